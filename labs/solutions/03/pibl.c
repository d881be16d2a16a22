// SPDX-License-Identifier: GPL-2.0
/*
 * pibl.c - the pib labs driver, stage 03: interrupts.
 *
 * Stage 01: probe (PCI ID, enable, BAR0, identity registers).  Stage 02: reset, the admin
 * queue, one command polled to completion.  Stage 03: MSI-X, the async event queue, admin
 * completions by interrupt.
 * labs/README.md is the course; docs/reference/hardware.md the device.
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/iopoll.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include "pib_hw.h"

#define DRV_NAME "pibl"

/* One page each: 64 commands of 64 bytes, 64 completions and 64 events of 16 bytes. */
#define PIBL_AQ_DEPTH           64
#define PIBL_AEQ_DEPTH          64
/* How long STATUS may take to follow CONTROL, and a command to complete. */
#define PIBL_STATUS_TIMEOUT_US  (1000 * 1000)
#define PIBL_CMD_TIMEOUT_MS     1000
/* Polling mode: look at the completion ring every 100-200 us, at most this many times. */
#define PIBL_POLL_TRIES         (PIBL_CMD_TIMEOUT_MS * 10)
/* Room for the largest response a command may return (QUERY_DEVICE's, in a later stage). */
#define PIBL_RESP_SIZE          512

static unsigned int scratch;
module_param(scratch, uint, 0444);
MODULE_PARM_DESC(scratch, "value written to the SCRATCH register at probe");
static unsigned int nop_value = 0xa5a5f00d;
module_param(nop_value, uint, 0444);
MODULE_PARM_DESC(nop_value, "NOP number i carries nop_value + i");
static unsigned int nop_count = 1;
module_param(nop_count, uint, 0444);
MODULE_PARM_DESC(nop_count, "NOPs to run at probe");

struct pibl_dev {
	struct pci_dev *pdev;
	void __iomem *regs;

	/* Admin queue: one command at a time (cmd_lock), completed by the IRQ or by polling. */
	struct mutex cmd_lock;
	struct pib_admin_cmd *sq;
	dma_addr_t sq_dma;
	struct pib_admin_cqe *cq;
	dma_addr_t cq_dma;
	void *resp;
	dma_addr_t resp_dma;
	u32 sq_pi, cq_ci;
	u16 next_id;
	spinlock_t cq_lock;             /* cq_ci and the waiter below: IRQ and waiter */
	struct completion done;
	u16 wait_id;
	bool waiting, wait_done, polling;
	struct pib_admin_cqe wait_cqe;

	/* Async event queue: consumed by its IRQ handler only. */
	struct pib_aeqe *aeq;
	dma_addr_t aeq_dma;
	u32 aeq_ci;
};

static u32 pibl_read(struct pibl_dev *d, u32 reg)
{
	return readl(d->regs + reg);
}

static void pibl_write(struct pibl_dev *d, u32 reg, u32 val)
{
	writel(val, d->regs + reg);
}

/* ------------------------------------------------------------------------------------------
 * Reset and enable
 * ------------------------------------------------------------------------------------------ */

static int pibl_reset(struct pibl_dev *d)
{
	u32 status;
	int err;

	pibl_write(d, PIB_REG_CONTROL, PIB_CTRL_RESET);
	err = readl_poll_timeout(d->regs + PIB_REG_STATUS, status,
				 !(status & (PIB_STATUS_READY | PIB_STATUS_FATAL)),
				 100, PIBL_STATUS_TIMEOUT_US);
	if (err)
		dev_err(&d->pdev->dev, "device did not reset (status %#x)\n", status);
	return err;
}

static int pibl_enable(struct pibl_dev *d)
{
	u32 status;
	int err;

	pibl_write(d, PIB_REG_AQ_DEPTH, PIBL_AQ_DEPTH);
	pibl_write(d, PIB_REG_AQ_SQ_LO, lower_32_bits(d->sq_dma));
	pibl_write(d, PIB_REG_AQ_SQ_HI, upper_32_bits(d->sq_dma));
	pibl_write(d, PIB_REG_AQ_CQ_LO, lower_32_bits(d->cq_dma));
	pibl_write(d, PIB_REG_AQ_CQ_HI, upper_32_bits(d->cq_dma));
	pibl_write(d, PIB_REG_AEQ_DEPTH, PIBL_AEQ_DEPTH);
	pibl_write(d, PIB_REG_AEQ_LO, lower_32_bits(d->aeq_dma));
	pibl_write(d, PIB_REG_AEQ_HI, upper_32_bits(d->aeq_dma));
	pibl_write(d, PIB_REG_CEQ_DEPTH, 0);            /* no completion events yet */
	pibl_write(d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
	err = readl_poll_timeout(d->regs + PIB_REG_STATUS, status,
				 status & (PIB_STATUS_READY | PIB_STATUS_FATAL),
				 100, PIBL_STATUS_TIMEOUT_US);
	if (!err && status == PIB_STATUS_READY)
		return 0;
	dev_err(&d->pdev->dev, "device not ready (status %#x, ERR_LAST %u)\n",
		status, pibl_read(d, PIB_REG_ERR_LAST));
	return err ?: -EIO;
}

/* ------------------------------------------------------------------------------------------
 * Rings
 * ------------------------------------------------------------------------------------------ */

static void *pibl_ring_alloc(struct pibl_dev *d, size_t size, dma_addr_t *dma)
{
	/* Zeroed: no slot looks written by the device before it is. */
	void *p = dma_alloc_coherent(&d->pdev->dev, size, dma, GFP_KERNEL);

	if (p && !IS_ALIGNED(*dma, PIB_QUEUE_BASE_ALIGN)) {
		dma_free_coherent(&d->pdev->dev, size, p, *dma);
		return NULL;
	}
	return p;
}

static void pibl_rings_free(struct pibl_dev *d)
{
	struct device *dev = &d->pdev->dev;

	if (d->aeq)
		dma_free_coherent(dev, PIBL_AEQ_DEPTH * sizeof(*d->aeq), d->aeq, d->aeq_dma);
	if (d->resp)
		dma_free_coherent(dev, PIBL_RESP_SIZE, d->resp, d->resp_dma);
	if (d->cq)
		dma_free_coherent(dev, PIBL_AQ_DEPTH * sizeof(*d->cq), d->cq, d->cq_dma);
	if (d->sq)
		dma_free_coherent(dev, PIBL_AQ_DEPTH * sizeof(*d->sq), d->sq, d->sq_dma);
}

static int pibl_rings_alloc(struct pibl_dev *d)
{
	d->sq = pibl_ring_alloc(d, PIBL_AQ_DEPTH * sizeof(*d->sq), &d->sq_dma);
	d->cq = pibl_ring_alloc(d, PIBL_AQ_DEPTH * sizeof(*d->cq), &d->cq_dma);
	d->resp = pibl_ring_alloc(d, PIBL_RESP_SIZE, &d->resp_dma);
	d->aeq = pibl_ring_alloc(d, PIBL_AEQ_DEPTH * sizeof(*d->aeq), &d->aeq_dma);
	if (!d->sq || !d->cq || !d->resp || !d->aeq) {
		pibl_rings_free(d);
		return -ENOMEM;
	}
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Admin queue
 * ------------------------------------------------------------------------------------------ */

/* Take every completion the device has written (phase bit of this pass).  cq_lock held. */
static void pibl_aq_reap(struct pibl_dev *d)
{
	struct pib_admin_cqe *cqe;

	for (;;) {
		cqe = &d->cq[d->cq_ci & (PIBL_AQ_DEPTH - 1)];
		if (!pib_ring_owned(READ_ONCE(cqe->flags) & PIB_ACQE_F_PHASE, d->cq_ci,
				    PIBL_AQ_DEPTH))
			break;
		/* The rest of the entry only after its phase bit says it is whole. */
		dma_rmb();
		if (d->waiting && !d->wait_done && cqe->cmd_id == d->wait_id) {
			d->wait_cqe = *cqe;
			d->wait_done = true;
			complete(&d->done);
		} else {
			dev_warn_ratelimited(&d->pdev->dev,
					     "completion for cmd_id %#x that nobody waits for\n",
					     cqe->cmd_id);
		}
		d->cq_ci++;
	}
}

static bool pibl_aq_check(struct pibl_dev *d)
{
	unsigned long flags;
	bool done;

	spin_lock_irqsave(&d->cq_lock, flags);
	pibl_aq_reap(d);
	done = d->wait_done;
	spin_unlock_irqrestore(&d->cq_lock, flags);
	return done;
}

static irqreturn_t pibl_admin_irq(int irq, void *data)
{
	struct pibl_dev *d = data;

	spin_lock(&d->cq_lock);
	pibl_aq_reap(d);
	spin_unlock(&d->cq_lock);
	return IRQ_HANDLED;
}

/*
 * Run one command and wait for its completion: by interrupt, and if none comes in time, by
 * looking at the ring once.  A completion found there means the interrupt was lost or late:
 * say so once and poll from then on.  None means the device is not answering: -ETIMEDOUT.
 */
static int pibl_exec(struct pibl_dev *d, struct pib_admin_cmd *cmd, void *resp, u32 resp_len,
		     struct pib_admin_cqe *cqe_out)
{
	struct pib_admin_cqe cqe;
	unsigned long flags, left = 0;
	bool done;
	int i, err = 0;

	if (resp_len > PIBL_RESP_SIZE)
		return -EINVAL;
	mutex_lock(&d->cmd_lock);
	cmd->cmd_id = d->next_id++;
	cmd->resp_len = resp_len;
	cmd->resp_addr = resp_len ? d->resp_dma : 0;

	spin_lock_irqsave(&d->cq_lock, flags);
	reinit_completion(&d->done);
	d->wait_id = cmd->cmd_id;
	d->wait_done = false;
	d->waiting = true;
	spin_unlock_irqrestore(&d->cq_lock, flags);

	d->sq[d->sq_pi & (PIBL_AQ_DEPTH - 1)] = *cmd;
	d->sq_pi++;
	/* writel() orders the slot's writes before the doorbell. */
	pibl_write(d, PIB_REG_AQ_DB, d->sq_pi);

	if (!d->polling)
		left = wait_for_completion_timeout(&d->done,
						   msecs_to_jiffies(PIBL_CMD_TIMEOUT_MS));
	done = pibl_aq_check(d);
	for (i = 0; !done && d->polling && i < PIBL_POLL_TRIES; i++) {
		usleep_range(100, 200);
		done = pibl_aq_check(d);
	}
	if (done && !left && !d->polling) {
		d->polling = true;
		dev_warn(&d->pdev->dev,
			 "admin completion without interrupt: polling the admin queue from now on\n");
	}

	spin_lock_irqsave(&d->cq_lock, flags);
	d->waiting = false;
	cqe = d->wait_cqe;
	spin_unlock_irqrestore(&d->cq_lock, flags);

	if (!done) {
		dev_err(&d->pdev->dev, "admin command %#x (cmd_id %#x) timed out\n",
			cmd->opcode, cmd->cmd_id);
		err = -ETIMEDOUT;
	} else if (cqe.status != PIB_AQ_OK) {
		dev_err(&d->pdev->dev, "admin command %#x failed: status %#x\n",
			cmd->opcode, cqe.status);
		err = -EIO;
	} else {
		if (resp_len)
			memcpy(resp, d->resp, resp_len);
		if (cqe_out)
			*cqe_out = cqe;
	}
	mutex_unlock(&d->cmd_lock);
	return err;
}

static int pibl_nops(struct pibl_dev *d)
{
	struct pib_admin_cqe cqe;
	u32 i, value = 0;
	int err;

	for (i = 0; i < nop_count; i++) {
		struct pib_admin_cmd cmd = { .opcode = PIB_CMD_NOP };

		value = nop_value + i;
		cmd.in.nop.value = value;
		err = pibl_exec(d, &cmd, NULL, 0, &cqe);
		if (err)
			return err;
		if (cqe.result0 != value) {
			dev_err(&d->pdev->dev, "NOP %u: device echoed %#x, not %#x\n",
				i, cqe.result0, value);
			return -EIO;
		}
	}
	dev_info(&d->pdev->dev, "%u NOPs completed, last echoed %#010x\n", nop_count, value);
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Async events
 * ------------------------------------------------------------------------------------------ */

static irqreturn_t pibl_async_irq(int irq, void *data)
{
	struct pibl_dev *d = data;
	struct pib_aeqe *e, ev;
	u32 start = d->aeq_ci;

	for (;;) {
		e = &d->aeq[d->aeq_ci & (PIBL_AEQ_DEPTH - 1)];
		if (!pib_ring_owned(READ_ONCE(e->flags) & PIB_AEQE_F_PHASE, d->aeq_ci,
				    PIBL_AEQ_DEPTH))
			break;
		dma_rmb();
		ev = *e;
		dev_info(&d->pdev->dev, "async event %#04x obj %u data %#llx\n",
			 ev.type, ev.obj, (unsigned long long)ev.data);
		d->aeq_ci++;
	}
	/* Hand the entries back, so that the device has room for more. */
	if (d->aeq_ci != start)
		pibl_write(d, PIB_REG_AEQ_DB, d->aeq_ci);
	return IRQ_HANDLED;
}

static int pibl_irqs_setup(struct pibl_dev *d)
{
	struct pci_dev *pdev = d->pdev;
	int nvec, err;

	nvec = pci_alloc_irq_vectors(pdev, PIB_MSIX_VEC_ASYNC + 1, PIB_MSIX_VEC_ASYNC + 1,
				     PCI_IRQ_MSIX);
	if (nvec < 0)
		return nvec;
	err = request_irq(pci_irq_vector(pdev, PIB_MSIX_VEC_ADMIN), pibl_admin_irq, 0,
			  "pibl-admin", d);
	if (err)
		goto err_vectors;
	err = request_irq(pci_irq_vector(pdev, PIB_MSIX_VEC_ASYNC), pibl_async_irq, 0,
			  "pibl-async", d);
	if (err)
		goto err_admin;
	return 0;

err_admin:
	free_irq(pci_irq_vector(pdev, PIB_MSIX_VEC_ADMIN), d);
err_vectors:
	pci_free_irq_vectors(pdev);
	return err;
}

static void pibl_irqs_free(struct pibl_dev *d)
{
	free_irq(pci_irq_vector(d->pdev, PIB_MSIX_VEC_ASYNC), d);
	free_irq(pci_irq_vector(d->pdev, PIB_MSIX_VEC_ADMIN), d);
	pci_free_irq_vectors(d->pdev);
}

/* ------------------------------------------------------------------------------------------
 * Probe and remove
 * ------------------------------------------------------------------------------------------ */

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
	/* The device reaches all of memory: 64-bit addresses for rings and buffers alike. */
	err = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (err)
		goto err_release;
	pci_set_master(pdev);

	d = kzalloc(sizeof(*d), GFP_KERNEL);
	if (!d) {
		err = -ENOMEM;
		goto err_clear_master;
	}
	d->pdev = pdev;
	mutex_init(&d->cmd_lock);
	spin_lock_init(&d->cq_lock);
	init_completion(&d->done);
	d->regs = pci_iomap(pdev, PIB_BAR_REGS, PIB_REGS_SIZE);
	if (!d->regs) {
		err = -ENOMEM;
		goto err_free;
	}

	magic = pibl_read(d, PIB_REG_MAGIC);
	version = pibl_read(d, PIB_REG_VERSION);
	caps = pibl_read(d, PIB_REG_CAPS);
	num_uars = pibl_read(d, PIB_REG_NUM_UARS);
	if (magic != PIB_MAGIC || version >> 16 != PIB_VERSION_MAJOR) {
		dev_err(&pdev->dev, "not a pib v%u device (magic %#x, version %#x)\n",
			PIB_VERSION_MAJOR, magic, version);
		err = -ENODEV;
		goto err_unmap;
	}
	dev_info(&pdev->dev, "magic %#010x version %u.%u caps %#010x num_uars %u\n",
		 magic, version >> 16, version & 0xffff, caps, num_uars);
	pibl_write(d, PIB_REG_SCRATCH, scratch);

	err = pibl_reset(d);
	if (err)
		goto err_unmap;
	err = pibl_rings_alloc(d);
	if (err)
		goto err_unmap;
	err = pibl_irqs_setup(d);
	if (err)
		goto err_rings;
	err = pibl_enable(d);
	if (err)
		goto err_reset;
	/* After the reset, which cleared it. */
	pibl_write(d, PIB_REG_SCRATCH, scratch);
	dev_info(&pdev->dev, "admin queue depth %u sq %pad cq %pad\n",
		 PIBL_AQ_DEPTH, &d->sq_dma, &d->cq_dma);
	err = pibl_nops(d);
	if (err)
		goto err_reset;
	pci_set_drvdata(pdev, d);
	return 0;

err_reset:
	/* Stop the device before the memory it may write is freed. */
	pibl_reset(d);
	pibl_irqs_free(d);
err_rings:
	pibl_rings_free(d);
err_unmap:
	pci_iounmap(pdev, d->regs);
err_free:
	kfree(d);
err_clear_master:
	pci_clear_master(pdev);
err_release:
	pci_release_region(pdev, PIB_BAR_REGS);
err_disable:
	pci_disable_device(pdev);
	return err;
}

static void pibl_remove(struct pci_dev *pdev)
{
	struct pibl_dev *d = pci_get_drvdata(pdev);

	pibl_reset(d);
	pci_clear_master(pdev);
	pibl_irqs_free(d);
	pibl_rings_free(d);
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
