// SPDX-License-Identifier: GPL-2.0
/*
 * pibl.c - the pib labs driver, stage 02 skeleton: reset and the admin queue.
 *
 * Claim the pib HCA by its PCI ID, enable it, map BAR0, check and print the identity
 * registers, write SCRATCH; undo all of it on remove.  labs/README.md is the course;
 * docs/reference/hardware.md the device.
 *
 * This is the solution of stage 01: it builds, loads and passes stage 01's grader, and
 * fails stage 02's.  Do the TODOs (labs/02-admin-queue/README.md), then `make lab STAGE=02`.
 *
 * TODO (stage 02), in probe after the identity check:
 *  1. dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64)) and pci_set_master();
 *  2. reset the device: CONTROL.RESET, then wait (bounded: readl_poll_timeout) until STATUS
 *     has neither READY nor FATAL;
 *  3. allocate with dma_alloc_coherent() the command ring (depth x 64 bytes), the completion
 *     ring (depth x 16 bytes), the async event ring (AEQ: ENABLE needs one; depth x 16 bytes)
 *     and a response buffer; each ring base must be 4 KiB aligned;
 *  4. program AQ_DEPTH, AQ_SQ_LO/HI, AQ_CQ_LO/HI, AEQ_DEPTH, AEQ_LO/HI, CEQ_DEPTH = 0, then
 *     CONTROL.ENABLE, and wait (bounded) for STATUS.READY; write SCRATCH again (the reset
 *     cleared it) and print
 *       dev_info(dev, "admin queue depth %u sq %pad cq %pad\n", depth, &sq_dma, &cq_dma);
 *  5. write pibl_exec(): command i into slot i % depth, AQ_DB = i + 1, then poll completion
 *     slot i % depth until pib_ring_owned() says the device wrote it on this pass (bounded:
 *     give up with -ETIMEDOUT after a second), dma_rmb(), check cmd_id and status;
 *  6. run nop_count NOPs, NOP i carrying nop_value + i, check each echo (result0), print
 *       dev_info(dev, "%u NOPs completed, last echoed %#010x\n", nop_count, last);
 * and in remove (and on probe's error path), before freeing the rings: reset the device.
 */
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "pib_hw.h"

#define DRV_NAME "pibl"

static unsigned int scratch;
module_param(scratch, uint, 0444);
MODULE_PARM_DESC(scratch, "value written to the SCRATCH register at probe");

/* The grader loads the module with nop_value=<random> nop_count=<1, then 2 x depth + 3>. */
static unsigned int nop_value = 0xa5a5f00d;
module_param(nop_value, uint, 0444);
MODULE_PARM_DESC(nop_value, "NOP number i carries nop_value + i");
static unsigned int nop_count = 1;
module_param(nop_count, uint, 0444);
MODULE_PARM_DESC(nop_count, "NOPs to run at probe");

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
