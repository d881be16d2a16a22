// SPDX-License-Identifier: GPL-2.0
/*
 * pibl.c - the pib labs driver, stage 01 skeleton: probe.
 *
 * It builds and loads as it is, and claims nothing.  Do the TODOs (labs/01-probe/README.md),
 * then grade: `make lab STAGE=01` at the top of the clone.
 */
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "pib_hw.h"

#define DRV_NAME "pibl"

/* The grader loads the module with scratch=<a random number>. */
static unsigned int scratch;
module_param(scratch, uint, 0444);
MODULE_PARM_DESC(scratch, "value written to the SCRATCH register at probe");

struct pibl_dev {
	struct pci_dev *pdev;
	void __iomem *regs;             /* BAR0, the control registers */
};

static int pibl_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	/*
	 * TODO:
	 *  1. enable the PCI function (pci_enable_device);
	 *  2. reserve BAR0 (pci_request_region, PIB_BAR_REGS) and check it is at least
	 *     PIB_REGS_SIZE long (pci_resource_len);
	 *  3. allocate a struct pibl_dev and map BAR0 (pci_iomap);
	 *  4. read MAGIC, VERSION, CAPS and NUM_UARS (32-bit reads: readl at PIB_REG_*); refuse
	 *     (-ENODEV) a device whose MAGIC is not PIB_MAGIC or whose major version is not
	 *     PIB_VERSION_MAJOR; print
	 *       dev_info(&pdev->dev, "magic %#010x version %u.%u caps %#010x num_uars %u\n", ...)
	 *  5. write the scratch parameter to SCRATCH (writel);
	 *  6. pci_set_drvdata(pdev, d), return 0.  On any failure undo what was done, in
	 *     reverse order, and return the error.
	 */
	return -ENODEV;
}

static void pibl_remove(struct pci_dev *pdev)
{
	/* TODO: undo probe in reverse order (pci_iounmap, kfree, pci_release_region,
	 * pci_disable_device). */
}

static const struct pci_device_id pibl_ids[] = {
	/* TODO: the pib HCA's vendor and device IDs (PCI_DEVICE, PIB_PCI_*). */
	{ }
};
MODULE_DEVICE_TABLE(pci, pibl_ids);

static struct pci_driver pibl_driver = {
	.name = DRV_NAME,
	.id_table = pibl_ids,
	.probe = pibl_probe,
	.remove = pibl_remove,
};
module_pci_driver(pibl_driver);

MODULE_DESCRIPTION("pib labs driver");
MODULE_LICENSE("GPL");
