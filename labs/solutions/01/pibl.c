// SPDX-License-Identifier: GPL-2.0
/*
 * pibl.c - the pib labs driver, stage 01: probe.
 *
 * Claim the pib HCA by its PCI ID, enable it, map BAR0, check and print the identity
 * registers, write SCRATCH; undo all of it on remove.  labs/README.md is the course;
 * docs/reference/hardware.md the device.
 */
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "pib_hw.h"

#define DRV_NAME "pibl"

static unsigned int scratch;
module_param(scratch, uint, 0444);
MODULE_PARM_DESC(scratch, "value written to the SCRATCH register at probe");

struct pibl_dev {
	struct pci_dev *pdev;
	void __iomem *regs;
};

/* BAR0 takes 32-bit accesses only: readl()/writel(), never readb() or readq(). */
static u32 pibl_read(struct pibl_dev *d, u32 reg)
{
	return readl(d->regs + reg);
}

static void pibl_write(struct pibl_dev *d, u32 reg, u32 val)
{
	writel(val, d->regs + reg);
}

static int pibl_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct pibl_dev *d;
	u32 magic, version, caps, num_uars;
	int err;

	err = pci_enable_device(pdev);
	if (err)
		return err;
	err = pci_request_region(pdev, PIB_BAR_REGS, DRV_NAME);
	if (err)
		goto err_disable;
	if (pci_resource_len(pdev, PIB_BAR_REGS) < PIB_REGS_SIZE) {
		err = -ENODEV;
		goto err_release;
	}

	d = kzalloc(sizeof(*d), GFP_KERNEL);
	if (!d) {
		err = -ENOMEM;
		goto err_release;
	}
	d->pdev = pdev;
	d->regs = pci_iomap(pdev, PIB_BAR_REGS, PIB_REGS_SIZE);
	if (!d->regs) {
		err = -ENOMEM;
		goto err_free;
	}

	magic = pibl_read(d, PIB_REG_MAGIC);
	version = pibl_read(d, PIB_REG_VERSION);
	caps = pibl_read(d, PIB_REG_CAPS);
	num_uars = pibl_read(d, PIB_REG_NUM_UARS);
	/* Refuse what is not a pib device of the major version this driver speaks. */
	if (magic != PIB_MAGIC || version >> 16 != PIB_VERSION_MAJOR) {
		dev_err(&pdev->dev, "not a pib v%u device (magic %#x, version %#x)\n",
			PIB_VERSION_MAJOR, magic, version);
		err = -ENODEV;
		goto err_unmap;
	}
	dev_info(&pdev->dev, "magic %#010x version %u.%u caps %#010x num_uars %u\n",
		 magic, version >> 16, version & 0xffff, caps, num_uars);
	pibl_write(d, PIB_REG_SCRATCH, scratch);
	pci_set_drvdata(pdev, d);
	return 0;

err_unmap:
	pci_iounmap(pdev, d->regs);
err_free:
	kfree(d);
err_release:
	pci_release_region(pdev, PIB_BAR_REGS);
err_disable:
	pci_disable_device(pdev);
	return err;
}

/* Undo probe, in reverse order. */
static void pibl_remove(struct pci_dev *pdev)
{
	struct pibl_dev *d = pci_get_drvdata(pdev);

	pci_iounmap(pdev, d->regs);
	kfree(d);
	pci_release_region(pdev, PIB_BAR_REGS);
	pci_disable_device(pdev);
}

static const struct pci_device_id pibl_ids[] = {
	{ PCI_DEVICE(PIB_PCI_VENDOR_ID, PIB_PCI_DEVICE_ID) },
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
