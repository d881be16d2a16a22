// SPDX-License-Identifier: GPL-2.0
/*
 * pibl.c - the pib labs driver, stage 08: the kernel's own queues and the management datagrams.
 *
 * Stage 01: probe (PCI ID, enable, BAR0, identity registers).  Stage 02: reset, the admin
 * queue, one command polled to completion.  Stage 03: MSI-X, the async event queue, admin
 * completions by interrupt.  Stage 04: register an ib_device with ib_core that answers
 * query_device, query_port, query_pkey and query_gid from the device's admin commands.
 * Stage 05: user contexts, each with a UAR page of its own mapped into the process, so that
 * rdma-core's pib provider opens the device (ibv_devinfo).  Stage 06: PDs, MRs over pinned
 * user memory (a page list the device copies) and CQs whose ring is in the process's memory.
 * Stage 07: user QPs (RC, UC, UD) with their rings in the process, moved through the IB state
 * machine (RESET, INIT, RTR, RTS, ERR) by MODIFY_QP, and asked by QUERY_QP.
 * Stage 08: the kernel's own objects, so that ib_core's MAD layer runs on the port: a kernel
 * PD with its DMA MR, CQs whose ring is the driver's (polled here, armed with doorbells on UAR
 * page 0, their events through the completion event queue), QP0 and QP1 with rings of the
 * driver's (post_send with the address handles' UD address vector, post_recv), and
 * process_mad, which hands the firmware's agents their MADs with MAD_IFC.
 * labs/README.md is the course; docs/reference/hardware.md the device.
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/iopoll.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/sizes.h>
#include <linux/xarray.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/iter.h>           /* rdma_umem_for_each_dma_block() */

#include <rdma/uverbs_ioctl.h>

#include "pib_hw.h"
#include "pib_mad.h"
#include "pib_wqe.h"
#include "pib-abi.h"

#define DRV_NAME "pibl"

/* One page each: 64 commands of 64 bytes, 64 completions and 64 events of 16 bytes. */
#define PIBL_AQ_DEPTH           64
#define PIBL_AEQ_DEPTH          64
/* How long STATUS may take to follow CONTROL, and a command to complete. */
#define PIBL_STATUS_TIMEOUT_US  (1000 * 1000)
#define PIBL_CMD_TIMEOUT_MS     1000
/* Polling mode: look at the completion ring every 100-200 us, at most this many times. */
#define PIBL_POLL_TRIES         (PIBL_CMD_TIMEOUT_MS * 10)
/* Room for the largest response and mailbox (MAD_IFC's: a 256-byte MAD, a 312-byte input). */
#define PIBL_RESP_SIZE          512
/* The longest page list this driver builds: 64 Ki pages (256 MiB), a 512 KiB list. */
#define PIBL_PBL_MAX_PAGES      (64 * 1024)
/*
 * The completion event queue: 4096 entries of 8 bytes, the deepest the device takes.  A CQ
 * puts at most one CEQE in it per arming, and the device makes at most max_cq (4096) CQs, so
 * it never overflows.
 */
#define PIBL_CEQ_DEPTH          PIB_QUEUE_MAX_DEPTH
/*
 * The largest ring of a kernel CQ or QP: one coherent allocation, physically contiguous, and
 * the page allocator has no larger block than 4 MiB (order 10 on x86-64).
 */
#define PIBL_KRING_MAX          SZ_4M

static unsigned int scratch;
module_param(scratch, uint, 0444);
MODULE_PARM_DESC(scratch, "value written to the SCRATCH register at probe");
static unsigned int nop_value = 0xa5a5f00d;
module_param(nop_value, uint, 0444);
MODULE_PARM_DESC(nop_value, "NOP number i carries nop_value + i");
static unsigned int nop_count = 1;
module_param(nop_count, uint, 0444);
MODULE_PARM_DESC(nop_count, "NOPs to run at probe");

/* The device's objects: each holds the number the device gave it. */
struct pibl_pd {
	struct ib_pd ibpd;
	u32 pdn;
};

/*
 * A ring of the kernel's (a kernel CQ's, SQ's or RQ's): one coherent allocation, so the device
 * reaches it and the CPU sees what the device writes without any sync call.
 */
struct pibl_kring {
	void *buf;
	dma_addr_t dma;
	size_t size;
};

/*
 * A process's CQ: its ring and consumer record live in the process's memory, pinned while
 * the CQ lives (umem).  A kernel CQ: the ring is the driver's, which polls and arms it.
 */
struct pibl_cq {
	struct ib_cq ibcq;
	u32 cqn;
	struct ib_umem *umem;           /* a process's CQ only */
	struct pibl_kring ring;         /* a kernel CQ only: depth CQEs, then the record page */
	struct pib_cqe *cqes;
	u32 *ci_record;                 /* the consumer index, for the device */
	u32 depth;
	u32 ci;                         /* the next CQE to look at, free-running */
	spinlock_t lock;                /* ci, the record and the arm doorbell */
};

/* A registered MR: the pinned pages the device maps; lkey == rkey names it to the device. */
struct pibl_mr {
	struct ib_mr ibmr;
	struct ib_umem *umem;
};

/*
 * A kernel work queue (the SQ or RQ of QP0 or QP1): depth slots of 2^stride_log bytes.  The
 * poster moves pi under lock; poll_cq moves ci when a CQE says the device is done with the
 * slots before it.  Both are free-running: pi - ci slots are in use.
 */
struct pibl_wq {
	struct pibl_kring ring;
	u32 depth, stride_log, max_sge;
	u32 pi, ci;
	spinlock_t lock;
};

/*
 * A user QP: its send and receive rings live in the process, pinned while the QP lives.  QP0
 * and QP1, the kernel's: their rings are the driver's, which posts to them.
 */
struct pibl_qp {
	struct ib_qp ibqp;
	struct ib_umem *sq_umem, *rq_umem;      /* a process's QP only */
	struct pibl_wq sq, rq;                  /* QP0 and QP1 only */
	struct ib_qp_cap cap;           /* what its rings hold */
};

/* An address handle: the device has none, a UD send WQE carries the destination itself. */
struct pibl_ah {
	struct ib_ah ibah;
	struct rdma_ah_attr attr;
};

/* A process's context: its UAR page, and the mmap entry through which it maps it. */
struct pibl_ucontext {
	struct ib_ucontext ibucontext;
	u32 uar;
	struct rdma_user_mmap_entry *uar_mmap;
};

/* What an mmap offset of a context stands for: one UAR page of BAR2. */
struct pibl_mmap_entry {
	struct rdma_user_mmap_entry rdma_entry;
	phys_addr_t address;
};

struct pibl_dev {
	struct ib_device ibdev;         /* first: ib_alloc_device() allocates the whole */
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
	/* The mailbox: input too large for a command's 48 bytes (CREATE_QP, MODIFY_QP). */
	struct mutex mbox_lock;
	void *mbox;
	dma_addr_t mbox_dma;
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
	/* Completion event queue: consumed by its IRQ handler only. */
	struct pib_ceqe *ceq;
	dma_addr_t ceq_dma;
	u32 ceq_ci;
	/* CQN -> struct pibl_cq, every CQ: what a CEQE names, the handler finds here. */
	struct xarray cqs;
	/* QP0 and QP1, the only kernel QPs, by QPN: what a CQE of a kernel CQ names. */
	struct pibl_qp *kqps[2];
	void __iomem *uar0;             /* UAR page 0: the doorbells of kernel QPs and CQs */

	struct pib_device_attr attr;
	u16 pkey_tbl_len, gid_tbl_len;
	phys_addr_t uar_bar_start;      /* BAR2's bus address: UAR page n is at + n * 4 KiB */
	u32 num_uars;
};

static inline struct pibl_dev *to_pibl(struct ib_device *ibdev)
{
	return container_of(ibdev, struct pibl_dev, ibdev);
}

static u32 pibl_read(struct pibl_dev *d, u32 reg)
{
	return readl(d->regs + reg);
}

static void pibl_write(struct pibl_dev *d, u32 reg, u32 val)
{
	writel(val, d->regs + reg);
}

/*
 * A doorbell on UAR page 0, the kernel's: one 64-bit write, so that the object (with a CQ's
 * arm bits) and the index reach the device together.  writeq() is ordered after the CPU's
 * earlier stores to coherent memory: the WQEs it announces are there first.
 */
static void pibl_doorbell(struct pibl_dev *d, enum pib_uar_offset db, u32 obj, u32 index)
{
	writeq((u64)index << PIB_DB_INDEX_SHIFT | obj, d->uar0 + db);
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
	pibl_write(d, PIB_REG_CEQ_DEPTH, PIBL_CEQ_DEPTH);
	pibl_write(d, PIB_REG_CEQ_LO, lower_32_bits(d->ceq_dma));
	pibl_write(d, PIB_REG_CEQ_HI, upper_32_bits(d->ceq_dma));
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

	if (d->ceq)
		dma_free_coherent(dev, PIBL_CEQ_DEPTH * sizeof(*d->ceq), d->ceq, d->ceq_dma);
	if (d->aeq)
		dma_free_coherent(dev, PIBL_AEQ_DEPTH * sizeof(*d->aeq), d->aeq, d->aeq_dma);
	if (d->mbox)
		dma_free_coherent(dev, PIBL_RESP_SIZE, d->mbox, d->mbox_dma);
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
	d->mbox = pibl_ring_alloc(d, PIBL_RESP_SIZE, &d->mbox_dma);
	d->ceq = pibl_ring_alloc(d, PIBL_CEQ_DEPTH * sizeof(*d->ceq), &d->ceq_dma);
	if (!d->sq || !d->cq || !d->resp || !d->aeq || !d->mbox || !d->ceq) {
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

/* A command whose input is the len bytes at in, handed to the device in the mailbox. */
static int pibl_exec_mbox(struct pibl_dev *d, struct pib_admin_cmd *cmd, const void *in,
			  u32 len, void *resp, u32 resp_len, struct pib_admin_cqe *cqe_out)
{
	int err;

	if (len > PIBL_RESP_SIZE)
		return -EINVAL;
	mutex_lock(&d->mbox_lock);
	memcpy(d->mbox, in, len);
	cmd->in.mbox.addr = d->mbox_dma;
	cmd->in.mbox.len = len;
	err = pibl_exec(d, cmd, resp, resp_len, cqe_out);
	mutex_unlock(&d->mbox_lock);
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

/*
 * Completion events: each CEQE names a CQ that was armed and got a completion; the device
 * disarmed it.  Its consumer (ib_core's CQ code, uverbs' completion channel) polls and arms it
 * again from its completion handler, which expects to be called in interrupt context.  One
 * interrupt may stand for several CEQEs: walk the ring to its end.  A CQ may be gone by now
 * (destroyed after the device wrote its CEQE, before this ran): its CQN is no longer in the
 * table, and the CEQE is dropped.
 */
static irqreturn_t pibl_comp_irq(int irq, void *data)
{
	struct pibl_dev *d = data;
	struct pib_ceqe *e;
	struct pibl_cq *cq;
	u32 start = d->ceq_ci;

	for (;;) {
		e = &d->ceq[d->ceq_ci & (PIBL_CEQ_DEPTH - 1)];
		if (!pib_ring_owned(READ_ONCE(e->flags) & PIB_CEQE_F_PHASE, d->ceq_ci,
				    PIBL_CEQ_DEPTH))
			break;
		dma_rmb();
		cq = xa_load(&d->cqs, e->cqn & PIB_DB_OBJ_MASK);
		if (cq && cq->ibcq.comp_handler)
			cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
		d->ceq_ci++;
	}
	if (d->ceq_ci != start)
		pibl_write(d, PIB_REG_CEQ_DB, d->ceq_ci);
	return IRQ_HANDLED;
}

static int pibl_irqs_setup(struct pibl_dev *d)
{
	struct pci_dev *pdev = d->pdev;
	int nvec, err;

	nvec = pci_alloc_irq_vectors(pdev, PIB_MSIX_VEC_CEQ + 1, PIB_MSIX_VEC_CEQ + 1,
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
	err = request_irq(pci_irq_vector(pdev, PIB_MSIX_VEC_CEQ), pibl_comp_irq, 0,
			  "pibl-comp", d);
	if (err)
		goto err_async;
	return 0;

err_async:
	free_irq(pci_irq_vector(pdev, PIB_MSIX_VEC_ASYNC), d);
err_admin:
	free_irq(pci_irq_vector(pdev, PIB_MSIX_VEC_ADMIN), d);
err_vectors:
	pci_free_irq_vectors(pdev);
	return err;
}

static void pibl_irqs_free(struct pibl_dev *d)
{
	free_irq(pci_irq_vector(d->pdev, PIB_MSIX_VEC_CEQ), d);
	free_irq(pci_irq_vector(d->pdev, PIB_MSIX_VEC_ASYNC), d);
	free_irq(pci_irq_vector(d->pdev, PIB_MSIX_VEC_ADMIN), d);
	pci_free_irq_vectors(d->pdev);
}

/* ------------------------------------------------------------------------------------------
 * Verbs: what ib_core asks of every device
 * ------------------------------------------------------------------------------------------ */

static int pibl_query_device(struct ib_device *ibdev, struct ib_device_attr *props,
			     struct ib_udata *udata)
{
	struct pibl_dev *d = to_pibl(ibdev);
	const struct pib_device_attr *a = &d->attr;

	memset(props, 0, sizeof(*props));
	props->fw_ver = a->fw_ver;
	props->sys_image_guid = cpu_to_be64(a->sys_image_guid);
	props->max_mr_size = a->max_mr_size;
	props->page_size_cap = a->page_size_cap;
	props->vendor_id = a->vendor_id;
	props->vendor_part_id = a->vendor_part_id;
	props->hw_ver = a->hw_ver;
	props->max_pkeys = a->max_pkeys;
	props->local_ca_ack_delay = a->local_ca_ack_delay;
	/* The objects of this stage.  A CQ's ring is a power of two deep, at most max_cqe, and
	 * holds one CQE less than its depth: that is the most a CQ can be asked for. */
	props->max_pd = a->max_pd;
	props->max_mr = a->max_mr;
	props->max_cq = a->max_cq;
	props->max_cqe = a->max_cqe - 1;
	/* The QPs of stage 07: how many, how deep their rings, how many SGEs a WQE has. */
	props->max_qp = a->max_qp;
	props->max_qp_wr = a->max_qp_wr;
	props->max_send_sge = a->max_sge;
	props->max_recv_sge = a->max_sge;
	props->max_sge_rd = a->max_sge;
	props->max_qp_rd_atom = a->max_qp_rd_atom;
	props->max_qp_init_rd_atom = a->max_qp_init_rd_atom;
	/* Stage 08: address handles, one for each destination the MAD layer sends to. */
	props->max_ah = a->max_ah;
	return 0;
}

static int pibl_query_port(struct ib_device *ibdev, u32 port, struct ib_port_attr *props)
{
	struct pibl_dev *d = to_pibl(ibdev);
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_QUERY_PORT };
	struct pib_port_attr pa;
	int err;

	cmd.in.port.port_num = port;
	err = pibl_exec(d, &cmd, &pa, sizeof(pa), NULL);
	if (err)
		return err;
	/* ib_core zeroed *props; the port's state follows the link, so ask every time. */
	props->subnet_prefix = pa.subnet_prefix;
	props->state = pa.state;
	props->phys_state = pa.phys_state;
	props->max_mtu = pa.max_mtu;
	props->active_mtu = pa.active_mtu;
	props->gid_tbl_len = pa.gid_tbl_len;
	props->pkey_tbl_len = pa.pkey_tbl_len;
	props->port_cap_flags = pa.port_cap_flags;
	props->max_msg_sz = pa.max_msg_sz;
	props->bad_pkey_cntr = pa.bad_pkey_cntr;
	props->qkey_viol_cntr = pa.qkey_viol_cntr;
	props->lid = pa.lid;
	props->sm_lid = pa.sm_lid;
	props->lmc = pa.lmc;
	props->sm_sl = pa.sm_sl;
	props->max_vl_num = pa.max_vl_num ?: 1;
	props->active_width = pa.active_width;
	props->active_speed = pa.active_speed;
	props->subnet_timeout = pa.subnet_timeout;
	return 0;
}

static int pibl_query_pkey(struct ib_device *ibdev, u32 port, u16 index, u16 *pkey)
{
	struct pibl_dev *d = to_pibl(ibdev);
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_QUERY_PKEY };
	struct pib_admin_cqe cqe;
	int err;

	cmd.in.port.port_num = port;
	cmd.in.port.index = index;
	err = pibl_exec(d, &cmd, NULL, 0, &cqe);
	if (!err)
		*pkey = cqe.result0;
	return err;
}

static int pibl_query_gid(struct ib_device *ibdev, u32 port, int index, union ib_gid *gid)
{
	struct pibl_dev *d = to_pibl(ibdev);
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_QUERY_GID };

	cmd.in.port.port_num = port;
	cmd.in.port.index = index;
	/* The device writes the 16 bytes in wire order (big-endian), as union ib_gid holds them. */
	return pibl_exec(d, &cmd, gid->raw, sizeof(gid->raw), NULL);
}

static int pibl_get_port_immutable(struct ib_device *ibdev, u32 port,
				   struct ib_port_immutable *immutable)
{
	struct pibl_dev *d = to_pibl(ibdev);

	immutable->pkey_tbl_len = d->pkey_tbl_len;
	immutable->gid_tbl_len = d->gid_tbl_len;
	/*
	 * A managed IB port: MADs (QP0, QP1), the SMI, the CM, the SA.  ib_core's MAD layer
	 * opens it at registration, and ib_umad offers it to opensm and the diagnostics.
	 */
	immutable->core_cap_flags = RDMA_CORE_PORT_IBA_IB;
	immutable->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

/*
 * PortInfo:CapabilityMask says which agents run above the port: ib_cm sets IsCommunication-
 * ManagementSupported while it serves the port, ib_umad IsSM while opensm holds
 * /dev/infiniband/issmN.  The firmware's SMA answers with the mask; SET_PORT sets and clears
 * its bits.  The other changes a port_modify may ask for are not the device's to make.
 */
static int pibl_modify_port(struct ib_device *ibdev, u32 port, int mask,
			    struct ib_port_modify *props)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_SET_PORT };

	if (mask)
		return -EOPNOTSUPP;
	cmd.in.set_port.port_num = port;
	cmd.in.set_port.mask = PIB_SET_PORT_CAPS;
	cmd.in.set_port.cap_set = props->set_port_cap_mask;
	cmd.in.set_port.cap_clr = props->clr_port_cap_mask;
	return pibl_exec(to_pibl(ibdev), &cmd, NULL, 0, NULL);
}

static enum rdma_link_layer pibl_get_link_layer(struct ib_device *ibdev, u32 port)
{
	return IB_LINK_LAYER_INFINIBAND;
}

static void pibl_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	u64 fw = to_pibl(ibdev)->attr.fw_ver;

	snprintf(str, IB_FW_VERSION_NAME_MAX, "%u.%u.%u", (u32)(fw >> 32) & 0xffff,
		 (u32)(fw >> 16) & 0xffff, (u32)fw & 0xffff);
}

/* ------------------------------------------------------------------------------------------
 * User contexts
 * ------------------------------------------------------------------------------------------ */

static int pibl_alloc_ucontext(struct ib_ucontext *ibuc, struct ib_udata *udata)
{
	struct pibl_ucontext *uc = container_of(ibuc, struct pibl_ucontext, ibucontext);
	struct pibl_dev *d = to_pibl(ibuc->device);
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_ALLOC_UAR };
	struct pib_admin_cmd free_cmd = { .opcode = PIB_CMD_DEALLOC_UAR };
	struct pib_ibv_alloc_ucontext_resp resp = {};
	struct pibl_mmap_entry *entry;
	struct pib_admin_cqe cqe;
	u64 key;
	int err;

	err = pibl_exec(d, &cmd, NULL, 0, &cqe);
	if (err)
		return err;
	uc->uar = cqe.result0;
	/* Page 0 is the kernel's; a page past BAR2 must never reach an mmap. */
	if (uc->uar == 0 || uc->uar >= d->num_uars) {
		err = -EIO;
		goto err_dealloc;
	}
	entry = kzalloc(sizeof(*entry), GFP_KERNEL);
	if (!entry) {
		err = -ENOMEM;
		goto err_dealloc;
	}
	entry->address = d->uar_bar_start + (phys_addr_t)uc->uar * PIB_UAR_PAGE_SIZE;
	err = rdma_user_mmap_entry_insert(ibuc, &entry->rdma_entry, PIB_UAR_PAGE_SIZE);
	if (err) {
		kfree(entry);
		goto err_dealloc;
	}
	uc->uar_mmap = &entry->rdma_entry;
	key = rdma_user_mmap_get_offset(uc->uar_mmap);

	resp.uar_index = uc->uar;
	resp.uar_mmap_key = key;
	resp.uar_size = PIB_UAR_PAGE_SIZE;
	err = ib_copy_to_udata(udata, &resp, min(sizeof(resp), udata->outlen));
	if (err)
		goto err_remove;
	return 0;

err_remove:
	rdma_user_mmap_entry_remove(uc->uar_mmap);
err_dealloc:
	free_cmd.in.uar.uar = uc->uar;
	pibl_exec(d, &free_cmd, NULL, 0, NULL);
	return err;
}

/* The process closed the device: give its UAR page back to the device. */
static void pibl_dealloc_ucontext(struct ib_ucontext *ibuc)
{
	struct pibl_ucontext *uc = container_of(ibuc, struct pibl_ucontext, ibucontext);
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_DEALLOC_UAR };

	rdma_user_mmap_entry_remove(uc->uar_mmap);
	cmd.in.uar.uar = uc->uar;
	pibl_exec(to_pibl(ibuc->device), &cmd, NULL, 0, NULL);
}

/* Map the page an offset stands for, non-cached: doorbells must reach the device at once. */
static int pibl_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *rdma_entry;
	struct pibl_mmap_entry *entry;
	int err;

	rdma_entry = rdma_user_mmap_entry_get(ibuc, vma);
	if (!rdma_entry)
		return -EINVAL;
	entry = container_of(rdma_entry, struct pibl_mmap_entry, rdma_entry);
	err = rdma_user_mmap_io(ibuc, vma, PHYS_PFN(entry->address), PIB_UAR_PAGE_SIZE,
				pgprot_noncached(vma->vm_page_prot), rdma_entry);
	rdma_user_mmap_entry_put(rdma_entry);
	return err;
}

static void pibl_mmap_free(struct rdma_user_mmap_entry *rdma_entry)
{
	kfree(container_of(rdma_entry, struct pibl_mmap_entry, rdma_entry));
}

/* ------------------------------------------------------------------------------------------
 * Protection domains, memory regions and completion queues (a process's and the kernel's)
 * ------------------------------------------------------------------------------------------ */

/* An object command: DESTROY_PD, DEREG_MR, DESTROY_CQ name their object in in.obj.num. */
static int pibl_obj_cmd(struct pibl_dev *d, u8 opcode, u32 num)
{
	struct pib_admin_cmd cmd = { .opcode = opcode };

	cmd.in.obj.num = num;
	return pibl_exec(d, &cmd, NULL, 0, NULL);
}

/* A PD is the same to the device whoever asks: the kernel's comes with a DMA MR (below). */
static int pibl_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct pibl_pd *pd = container_of(ibpd, struct pibl_pd, ibpd);
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_CREATE_PD };
	struct pib_admin_cqe cqe;
	int err;

	err = pibl_exec(to_pibl(ibpd->device), &cmd, NULL, 0, &cqe);
	if (err)
		return err;
	pd->pdn = cqe.result0;
	return 0;
}

static int pibl_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	return pibl_obj_cmd(to_pibl(ibpd->device), PIB_CMD_DESTROY_PD,
			    container_of(ibpd, struct pibl_pd, ibpd)->pdn);
}

/*
 * The page list of pinned memory: one little-endian u64 bus address per 4 KiB page, in the
 * order of the addresses they back.  The pinned memory comes as scatterlist segments, and a
 * segment may cover many contiguous pages: rdma_umem_for_each_dma_block() cuts them into pages.
 * The list is in coherent memory; the device copies it during the command, so it is freed after.
 * More pages than the device takes in one list is the caller's error (EINVAL), not a lack of
 * memory.
 */
static void *pibl_pbl_from_umem(struct pibl_dev *d, struct ib_umem *umem, u32 npages,
				dma_addr_t *dma)
{
	struct ib_block_iter biter;
	__le64 *pbl;
	u32 i = 0;

	if (!npages || npages > PIBL_PBL_MAX_PAGES)
		return ERR_PTR(-EINVAL);
	pbl = dma_alloc_coherent(&d->pdev->dev, npages * sizeof(u64), dma, GFP_KERNEL);
	if (!pbl)
		return ERR_PTR(-ENOMEM);
	rdma_umem_for_each_dma_block(umem, &biter, SZ_4K) {
		if (i == npages)
			break;
		pbl[i++] = cpu_to_le64(rdma_block_iter_dma_address(&biter));
	}
	return pbl;
}

static void pibl_pbl_free(struct pibl_dev *d, void *pbl, u32 npages, dma_addr_t dma)
{
	dma_free_coherent(&d->pdev->dev, npages * sizeof(u64), pbl, dma);
}

/*
 * A kernel ring of size bytes (whole pages), zeroed: no slot looks written before it is.  A
 * kernel consumer that asks for more than one block of the page allocator gets -ENOMEM, as
 * it would from an HCA that wants its queues contiguous, and no allocation-failure splat.
 */
static int pibl_kring_alloc(struct pibl_dev *d, struct pibl_kring *r, size_t size)
{
	if (size > PIBL_KRING_MAX)
		return -ENOMEM;
	r->size = size;
	r->buf = dma_alloc_coherent(&d->pdev->dev, size, &r->dma, GFP_KERNEL | __GFP_NOWARN);
	return r->buf ? 0 : -ENOMEM;
}

static void pibl_kring_free(struct pibl_dev *d, struct pibl_kring *r)
{
	if (r->buf)
		dma_free_coherent(&d->pdev->dev, r->size, r->buf, r->dma);
	r->buf = NULL;
}

/*
 * The page list of a kernel ring.  A coherent allocation is one range of bus addresses, page
 * aligned, so its pages simply follow each other.
 */
static void *pibl_pbl_from_kring(struct pibl_dev *d, const struct pibl_kring *r, dma_addr_t *dma)
{
	u32 i, npages = r->size / SZ_4K;
	__le64 *pbl;

	pbl = dma_alloc_coherent(&d->pdev->dev, npages * sizeof(u64), dma, GFP_KERNEL);
	if (!pbl)
		return ERR_PTR(-ENOMEM);
	for (i = 0; i < npages; i++)
		pbl[i] = cpu_to_le64(r->dma + (dma_addr_t)i * SZ_4K);
	return pbl;
}

static struct ib_mr *pibl_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length, u64 virt_addr,
				      int access, struct ib_udata *udata)
{
	struct pibl_dev *d = to_pibl(ibpd->device);
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_REG_MR };
	struct pib_admin_cqe cqe;
	struct pibl_mr *mr;
	dma_addr_t pbl_dma;
	void *pbl;
	size_t npages;
	int err;

	/*
	 * The device maps iova's offset in its first page onto the first page's same offset.  Its
	 * access bits are the verbs' (PIB_ACCESS_*); the optional ones (IB_ACCESS_OPTIONAL, such
	 * as relaxed ordering) are hints a device may ignore.
	 */
	if (!length || (start ^ virt_addr) & (SZ_4K - 1) ||
	    access & ~IB_ACCESS_OPTIONAL & ~PIB_ACCESS_ALL)
		return ERR_PTR(-EINVAL);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->umem = ib_umem_get(ibpd->device, start, length, access);
	if (IS_ERR(mr->umem)) {
		err = PTR_ERR(mr->umem);
		goto err_free;
	}
	/* Every 4 KiB page the range touches: a range need not start on a page boundary. */
	npages = ib_umem_num_dma_blocks(mr->umem, SZ_4K);
	pbl = pibl_pbl_from_umem(d, mr->umem, npages, &pbl_dma);
	if (IS_ERR(pbl)) {
		err = PTR_ERR(pbl);
		goto err_release;
	}
	cmd.in.reg_mr.pdn = container_of(ibpd, struct pibl_pd, ibpd)->pdn;
	cmd.in.reg_mr.access = access & PIB_ACCESS_ALL;
	cmd.in.reg_mr.iova = virt_addr;
	cmd.in.reg_mr.length = length;
	cmd.in.reg_mr.pbl_addr = pbl_dma;
	cmd.in.reg_mr.npages = npages;
	err = pibl_exec(d, &cmd, NULL, 0, &cqe);
	pibl_pbl_free(d, pbl, npages, pbl_dma);
	if (err)
		goto err_release;
	mr->ibmr.lkey = cqe.result0;
	mr->ibmr.rkey = cqe.result1;
	return &mr->ibmr;

err_release:
	ib_umem_release(mr->umem);
err_free:
	kfree(mr);
	return ERR_PTR(err);
}

/*
 * The kernel's DMA MR.  A kernel consumer (the MAD layer, ...) names its buffers by their DMA
 * addresses, and ib_alloc_pd() asks every kernel PD for one MR that reaches them all: its lkey
 * becomes pd->local_dma_lkey, in every SGE the consumer posts.  On pib that is REG_MR with
 * PIB_MR_F_PHYS, the identity map of guest-physical memory (iova 0, every byte, no page list),
 * which is what a DMA address is to the device.
 */
static struct ib_mr *pibl_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_REG_MR };
	struct pib_admin_cqe cqe;
	struct pibl_mr *mr;
	int err;

	if (access & ~PIB_ACCESS_ALL)
		return ERR_PTR(-EINVAL);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	cmd.in.reg_mr.pdn = container_of(ibpd, struct pibl_pd, ibpd)->pdn;
	cmd.in.reg_mr.access = access;
	cmd.in.reg_mr.length = U64_MAX;
	cmd.in.reg_mr.flags = PIB_MR_F_PHYS;
	err = pibl_exec(to_pibl(ibpd->device), &cmd, NULL, 0, &cqe);
	if (err) {
		kfree(mr);
		return ERR_PTR(err);
	}
	mr->ibmr.lkey = cqe.result0;
	mr->ibmr.rkey = cqe.result1;
	return &mr->ibmr;
}

/* The device first (it must stop using the pages), then unpin them (a DMA MR has none). */
static int pibl_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct pibl_mr *mr = container_of(ibmr, struct pibl_mr, ibmr);
	int err;

	err = pibl_obj_cmd(to_pibl(ibmr->device), PIB_CMD_DEREG_MR, ibmr->lkey);
	if (err)
		return err;
	ib_umem_release(mr->umem);
	kfree(mr);
	return 0;
}

/*
 * A user CQ: the provider allocated the ring (depth CQEs, rounded up to a page, then the page of
 * the consumer index record) and says where; pin it, list its pages, and let the device write
 * it.  The provider checks that the CQN and depth answered are what it asked for.
 */
static int pibl_create_user_cq(struct pibl_dev *d, struct pibl_cq *cq,
			       const struct ib_cq_init_attr *attr, struct ib_udata *udata)
{
	struct ib_cq *ibcq = &cq->ibcq;
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_CREATE_CQ };
	struct pib_ibv_create_cq_resp resp = {};
	struct pib_ibv_create_cq req = {};
	struct pibl_ucontext *uc;
	struct pib_admin_cqe cqe;
	u32 flags = 0, npages;
	dma_addr_t pbl_dma;
	void *pbl;
	int err;

	if (attr->flags || udata->inlen < sizeof(req))
		return -EINVAL;
	err = ib_copy_from_udata(&req, udata, sizeof(req));
	if (err)
		return err;
	if (req.comp_mask & PIB_IBV_CREATE_CQ_MASK_FLAGS) {
		if (req.flags & ~PIB_IBV_CQ_F_TIMESTAMP)
			return -EINVAL;
		if (req.flags & PIB_IBV_CQ_F_TIMESTAMP)
			flags |= PIB_CQ_F_TIMESTAMP;
	}
	/* The device checks depth and size again; refusing here gives the process a clear EINVAL. */
	if (req.depth < 2 || !is_power_of_2(req.depth) || req.depth > d->attr.max_cqe ||
	    req.depth <= attr->cqe ||
	    req.buf_size != (u64)pib_cq_pages(req.depth, pib_cqe_stride_log(flags)) * SZ_4K ||
	    !req.buf_addr || !IS_ALIGNED(req.buf_addr, SZ_4K))
		return -EINVAL;

	cq->umem = ib_umem_get(ibcq->device, req.buf_addr, req.buf_size, IB_ACCESS_LOCAL_WRITE);
	if (IS_ERR(cq->umem))
		return PTR_ERR(cq->umem);
	npages = req.buf_size / SZ_4K;
	pbl = pibl_pbl_from_umem(d, cq->umem, npages, &pbl_dma);
	if (IS_ERR(pbl)) {
		err = PTR_ERR(pbl);
		goto err_release;
	}
	/* The context's UAR page: the only page whose CQ doorbells may name this CQ. */
	uc = rdma_udata_to_drv_context(udata, struct pibl_ucontext, ibucontext);
	cmd.in.create_cq.depth = req.depth;
	cmd.in.create_cq.npages = npages;
	cmd.in.create_cq.pbl_addr = pbl_dma;
	cmd.in.create_cq.uar = uc->uar;
	cmd.in.create_cq.flags = flags;
	err = pibl_exec(d, &cmd, NULL, 0, &cqe);
	pibl_pbl_free(d, pbl, npages, pbl_dma);
	if (err)
		goto err_release;
	cq->cqn = cqe.result0;
	ibcq->cqe = req.depth - 1;

	resp.cqn = cq->cqn;
	resp.depth = req.depth;
	err = ib_copy_to_udata(udata, &resp, min(sizeof(resp), udata->outlen));
	if (err)
		goto err_destroy;
	return 0;

err_destroy:
	pibl_obj_cmd(d, PIB_CMD_DESTROY_CQ, cq->cqn);
err_release:
	ib_umem_release(cq->umem);
	return err;
}

/*
 * A kernel CQ: the ring is the driver's, laid out as the provider lays out its own (depth
 * CQEs, one more than asked for and a power of two, then the page of the consumer index
 * record), in coherent memory.  It is armed with doorbells on UAR page 0, the kernel's.
 */
static int pibl_create_kernel_cq(struct pibl_dev *d, struct pibl_cq *cq,
				 const struct ib_cq_init_attr *attr)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_CREATE_CQ };
	struct pib_admin_cqe cqe;
	dma_addr_t pbl_dma;
	u32 npages;
	void *pbl;
	int err;

	if (attr->flags)
		return -EOPNOTSUPP;
	if (attr->cqe >= d->attr.max_cqe)
		return -EINVAL;
	cq->depth = roundup_pow_of_two(max(attr->cqe + 1, 2u));
	npages = pib_cq_pages(cq->depth, PIB_CQE_STRIDE_LOG);
	err = pibl_kring_alloc(d, &cq->ring, (size_t)npages * SZ_4K);
	if (err)
		return err;
	cq->cqes = cq->ring.buf;
	cq->ci_record = cq->ring.buf + (size_t)(npages - 1) * SZ_4K;
	pbl = pibl_pbl_from_kring(d, &cq->ring, &pbl_dma);
	if (IS_ERR(pbl)) {
		err = PTR_ERR(pbl);
		goto err_free;
	}
	cmd.in.create_cq.depth = cq->depth;
	cmd.in.create_cq.npages = npages;
	cmd.in.create_cq.pbl_addr = pbl_dma;
	cmd.in.create_cq.uar = 0;
	err = pibl_exec(d, &cmd, NULL, 0, &cqe);
	pibl_pbl_free(d, pbl, npages, pbl_dma);
	if (err)
		goto err_free;
	cq->cqn = cqe.result0;
	cq->ibcq.cqe = cq->depth - 1;
	return 0;

err_free:
	pibl_kring_free(d, &cq->ring);
	return err;
}

static int pibl_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
			  struct ib_udata *udata)
{
	struct pibl_cq *cq = container_of(ibcq, struct pibl_cq, ibcq);
	struct pibl_dev *d = to_pibl(ibcq->device);
	int err;

	spin_lock_init(&cq->lock);
	err = udata ? pibl_create_user_cq(d, cq, attr, udata) : pibl_create_kernel_cq(d, cq, attr);
	if (err)
		return err;
	/* From here on the CEQEs that name it reach its completion handler. */
	err = xa_insert(&d->cqs, cq->cqn, cq, GFP_KERNEL);
	if (err) {
		pibl_obj_cmd(d, PIB_CMD_DESTROY_CQ, cq->cqn);
		ib_umem_release(cq->umem);
		pibl_kring_free(d, &cq->ring);
	}
	return err;
}

/*
 * Out of the table first, and the completion handler waited out: ib_core frees the CQ when
 * this returns, and a CEQE the device wrote for it before must then find nothing.
 */
static int pibl_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct pibl_cq *cq = container_of(ibcq, struct pibl_cq, ibcq);
	struct pibl_dev *d = to_pibl(ibcq->device);
	int err;

	xa_erase(&d->cqs, cq->cqn);
	synchronize_irq(pci_irq_vector(d->pdev, PIB_MSIX_VEC_CEQ));
	err = pibl_obj_cmd(d, PIB_CMD_DESTROY_CQ, cq->cqn);
	if (err) {
		/* Still the device's: still ours to hear of. */
		xa_store(&d->cqs, cq->cqn, cq, GFP_KERNEL);
		return err;
	}
	ib_umem_release(cq->umem);
	pibl_kring_free(d, &cq->ring);
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Queue pairs (a process's RC, UC and UD QPs; the kernel's QP0 and QP1)
 * ------------------------------------------------------------------------------------------ */

/* QP0 and QP1 are the kernel's, with rings of the driver's; a process's QPs have none here. */
static bool pibl_is_kernel_qp(const struct pibl_qp *qp)
{
	return qp->sq.ring.buf;
}

/*
 * One ring as the provider laid it out (struct pib_ibv_create_qp): depth slots of 2^stride_log
 * bytes, a power of two deep, enough for what was asked, each slot big enough for one WQE
 * with the SGEs asked for, and the buffer exactly the ring's pages.
 */
static bool pibl_ring_ok(struct pibl_dev *d, u32 depth, u32 stride_log, u32 min_log, u32 want_wr,
			 u32 slot_bytes, u64 addr, u32 size)
{
	return is_power_of_2(depth) && depth <= d->attr.max_qp_wr && depth >= want_wr &&
	       stride_log >= min_log && stride_log <= PIB_STRIDE_LOG_MAX &&
	       (1u << stride_log) >= slot_bytes && addr && IS_ALIGNED(addr, SZ_4K) &&
	       size == (u64)pib_ring_pages(depth, stride_log) * SZ_4K;
}

/* Pin one ring the device reads (access 0: it never writes a WQE) and hand it its pages. */
static void *pibl_ring_pin(struct pibl_dev *d, u64 addr, u32 size, struct ib_umem **umem,
			   dma_addr_t *pbl_dma)
{
	struct ib_umem *u = ib_umem_get(&d->ibdev, addr, size, 0);
	void *pbl;

	if (IS_ERR(u))
		return ERR_CAST(u);
	*umem = u;
	pbl = pibl_pbl_from_umem(d, *umem, size / SZ_4K, pbl_dma);
	if (IS_ERR(pbl)) {
		ib_umem_release(*umem);
		*umem = NULL;
	}
	return pbl;
}

static int pibl_create_user_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *attr,
			       struct ib_udata *udata)
{
	struct pibl_qp *qp = container_of(ibqp, struct pibl_qp, ibqp);
	struct pibl_dev *d = to_pibl(ibqp->device);
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_CREATE_QP };
	struct pib_ibv_create_qp_resp resp = {};
	struct pib_ibv_create_qp req = {};
	struct pib_qp_create in = {};
	void *sq_pbl = NULL, *rq_pbl = NULL;
	dma_addr_t sq_pbl_dma = 0, rq_pbl_dma = 0;
	struct pib_admin_cqe cqe;
	u32 max_inline;
	int err;

	if (attr->qp_type != IB_QPT_RC && attr->qp_type != IB_QPT_UC &&
	    attr->qp_type != IB_QPT_UD)
		return -EOPNOTSUPP;
	if (attr->srq || attr->create_flags || !attr->send_cq || !attr->recv_cq)
		return -EOPNOTSUPP;
	if (attr->sq_sig_type != IB_SIGNAL_ALL_WR && attr->sq_sig_type != IB_SIGNAL_REQ_WR)
		return -EINVAL;
	if (udata->inlen < sizeof(req))
		return -EINVAL;
	err = ib_copy_from_udata(&req, udata, sizeof(req));
	if (err)
		return err;
	/* A receive doorbell record is only asked for when alloc_ucontext offered it (it did not). */
	if (req.comp_mask || req.reserved_06)
		return -EOPNOTSUPP;
	if (!pibl_ring_ok(d, req.sq_depth, req.sq_stride_log, PIB_SQ_STRIDE_LOG_MIN,
			  attr->cap.max_send_wr,
			  pib_sq_slot_bytes(attr->cap.max_send_sge, attr->cap.max_inline_data),
			  req.sq_buf_addr, req.sq_buf_size) ||
	    !pibl_ring_ok(d, req.rq_depth, req.rq_stride_log, PIB_RQ_STRIDE_LOG_MIN,
			  attr->cap.max_recv_wr, pib_recv_slot_bytes(attr->cap.max_recv_sge),
			  req.rq_buf_addr, req.rq_buf_size))
		return -EINVAL;

	sq_pbl = pibl_ring_pin(d, req.sq_buf_addr, req.sq_buf_size, &qp->sq_umem, &sq_pbl_dma);
	if (IS_ERR(sq_pbl))
		return PTR_ERR(sq_pbl);
	rq_pbl = pibl_ring_pin(d, req.rq_buf_addr, req.rq_buf_size, &qp->rq_umem, &rq_pbl_dma);
	if (IS_ERR(rq_pbl)) {
		err = PTR_ERR(rq_pbl);
		rq_pbl = NULL;
		goto err_free;
	}

	/* What the rings hold: maybe more than was asked for, never more than the device takes. */
	max_inline = min(d->attr.max_inline_data, pib_sq_max_inline(req.sq_stride_log));
	qp->cap = (struct ib_qp_cap) {
		.max_send_wr = req.sq_depth,
		.max_recv_wr = req.rq_depth,
		.max_send_sge = min(d->attr.max_sge, pib_sq_max_sge(req.sq_stride_log)),
		.max_recv_sge = min(d->attr.max_sge, pib_recv_max_sge(req.rq_stride_log)),
		.max_inline_data = max_inline,
	};

	in.pdn = container_of(ibqp->pd, struct pibl_pd, ibpd)->pdn;
	in.type = attr->qp_type;        /* PIB_QPT_* are IB_QPT_*'s values */
	in.flags = attr->sq_sig_type == IB_SIGNAL_ALL_WR ? PIB_QPC_F_SQ_SIG_ALL : 0;
	in.sq_stride_log = req.sq_stride_log;
	in.rq_stride_log = req.rq_stride_log;
	in.send_cqn = container_of(attr->send_cq, struct pibl_cq, ibcq)->cqn;
	in.recv_cqn = container_of(attr->recv_cq, struct pibl_cq, ibcq)->cqn;
	in.srqn = PIB_SRQN_NONE;
	in.sq_depth = req.sq_depth;
	in.rq_depth = req.rq_depth;
	in.max_inline = max_inline;
	in.uar = rdma_udata_to_drv_context(udata, struct pibl_ucontext, ibucontext)->uar;
	in.sq_npages = req.sq_buf_size / SZ_4K;
	in.rq_npages = req.rq_buf_size / SZ_4K;
	in.sq_pbl_addr = sq_pbl_dma;
	in.rq_pbl_addr = rq_pbl_dma;
	err = pibl_exec_mbox(d, &cmd, &in, sizeof(in), NULL, 0, &cqe);
	pibl_pbl_free(d, rq_pbl, in.rq_npages, rq_pbl_dma);
	pibl_pbl_free(d, sq_pbl, in.sq_npages, sq_pbl_dma);
	rq_pbl = sq_pbl = NULL;
	if (err)
		goto err_free;

	/* 0 and 1 are QP0 and QP1, 0xffffff the multicast QPN: never a user QP's. */
	ibqp->qp_num = cqe.result0;
	if (ibqp->qp_num < 2 || ibqp->qp_num >= IB_MULTICAST_QPN) {
		dev_err(&d->pdev->dev, "CREATE_QP returned QPN %#x\n", ibqp->qp_num);
		err = -EIO;
		goto err_destroy;
	}
	resp.qpn = ibqp->qp_num;
	resp.max_inline = max_inline;
	err = ib_copy_to_udata(udata, &resp, min(sizeof(resp), udata->outlen));
	if (err)
		goto err_destroy;
	attr->cap = qp->cap;
	return 0;

err_destroy:
	pibl_obj_cmd(d, PIB_CMD_DESTROY_QP, cqe.result0);
err_free:
	if (sq_pbl)
		pibl_pbl_free(d, sq_pbl, req.sq_buf_size / SZ_4K, sq_pbl_dma);
	ib_umem_release(qp->rq_umem);
	ib_umem_release(qp->sq_umem);
	return err;
}

/*
 * QP0 or QP1 into (qp) or out of (NULL) the table by which poll_cq finds the QP a CQE names.
 * The store is made under each of its CQs' locks in turn: once it is out, no poller that found
 * it still holds it.
 */
static void pibl_kqp_set(struct pibl_dev *d, u32 qpn, struct ib_cq *send_cq,
			 struct ib_cq *recv_cq, struct pibl_qp *qp)
{
	struct ib_cq *cqs[] = { send_cq, recv_cq };
	struct pibl_cq *cq;
	unsigned long flags;
	int i;

	for (i = 0; i < ARRAY_SIZE(cqs); i++) {
		cq = container_of(cqs[i], struct pibl_cq, ibcq);
		spin_lock_irqsave(&cq->lock, flags);
		d->kqps[qpn] = qp;
		spin_unlock_irqrestore(&cq->lock, flags);
	}
}

/* A kernel work queue: wr slots or more (a power of two), each of at least slot_bytes. */
static int pibl_wq_alloc(struct pibl_dev *d, struct pibl_wq *wq, u32 wr, u32 slot_bytes,
			 u32 min_log)
{
	if (wr > d->attr.max_qp_wr)
		return -EINVAL;
	wq->depth = roundup_pow_of_two(max(wr, 1u));
	wq->stride_log = pib_stride_log(slot_bytes, min_log);
	if (wq->stride_log > PIB_STRIDE_LOG_MAX)
		return -EINVAL;
	spin_lock_init(&wq->lock);
	return pibl_kring_alloc(d, &wq->ring,
				(size_t)pib_ring_pages(wq->depth, wq->stride_log) * SZ_4K);
}

/*
 * QP0 and QP1, which ib_core's MAD layer makes for the port (IB_QPT_SMI and IB_QPT_GSI): the
 * only QPs the kernel gets in this stage; any other kernel QP (IPoIB's UD QP, say) is refused.
 * Their rings are the driver's, sized as the provider sizes its own, with no inline data;
 * their doorbells are on UAR page 0.  The device makes one of each, numbered by type: QPN 0
 * for the SMI, 1 for the GSI.
 */
static int pibl_create_mad_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *attr)
{
	struct pibl_qp *qp = container_of(ibqp, struct pibl_qp, ibqp);
	struct pibl_dev *d = to_pibl(ibqp->device);
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_CREATE_QP };
	const struct ib_qp_cap *cap = &attr->cap;
	struct pib_qp_create in = {};
	dma_addr_t sq_pbl_dma, rq_pbl_dma;
	struct pib_admin_cqe cqe;
	void *sq_pbl, *rq_pbl;
	int err;

	if (attr->qp_type != IB_QPT_SMI && attr->qp_type != IB_QPT_GSI)
		return -EOPNOTSUPP;
	if (attr->srq || attr->create_flags || cap->max_inline_data)
		return -EOPNOTSUPP;
	if (attr->port_num != PIB_PORT_NUM || cap->max_send_sge > d->attr.max_sge ||
	    cap->max_recv_sge > d->attr.max_sge ||
	    (attr->sq_sig_type != IB_SIGNAL_ALL_WR && attr->sq_sig_type != IB_SIGNAL_REQ_WR))
		return -EINVAL;
	err = pibl_wq_alloc(d, &qp->sq, cap->max_send_wr,
			    pib_sq_slot_bytes(cap->max_send_sge, 0), PIB_SQ_STRIDE_LOG_MIN);
	if (err)
		goto err_free;
	err = pibl_wq_alloc(d, &qp->rq, cap->max_recv_wr,
			    pib_recv_slot_bytes(cap->max_recv_sge), PIB_RQ_STRIDE_LOG_MIN);
	if (err)
		goto err_free;
	qp->sq.max_sge = min(d->attr.max_sge, pib_sq_max_sge(qp->sq.stride_log));
	qp->rq.max_sge = min(d->attr.max_sge, pib_recv_max_sge(qp->rq.stride_log));

	sq_pbl = pibl_pbl_from_kring(d, &qp->sq.ring, &sq_pbl_dma);
	if (IS_ERR(sq_pbl)) {
		err = PTR_ERR(sq_pbl);
		goto err_free;
	}
	rq_pbl = pibl_pbl_from_kring(d, &qp->rq.ring, &rq_pbl_dma);
	if (IS_ERR(rq_pbl)) {
		err = PTR_ERR(rq_pbl);
		goto err_sq_pbl;
	}
	in.pdn = container_of(ibqp->pd, struct pibl_pd, ibpd)->pdn;
	in.type = attr->qp_type;
	in.flags = attr->sq_sig_type == IB_SIGNAL_ALL_WR ? PIB_QPC_F_SQ_SIG_ALL : 0;
	in.sq_stride_log = qp->sq.stride_log;
	in.rq_stride_log = qp->rq.stride_log;
	in.send_cqn = container_of(attr->send_cq, struct pibl_cq, ibcq)->cqn;
	in.recv_cqn = container_of(attr->recv_cq, struct pibl_cq, ibcq)->cqn;
	in.srqn = PIB_SRQN_NONE;
	in.sq_depth = qp->sq.depth;
	in.rq_depth = qp->rq.depth;
	in.uar = 0;
	in.sq_npages = qp->sq.ring.size / SZ_4K;
	in.rq_npages = qp->rq.ring.size / SZ_4K;
	in.sq_pbl_addr = sq_pbl_dma;
	in.rq_pbl_addr = rq_pbl_dma;
	err = pibl_exec_mbox(d, &cmd, &in, sizeof(in), NULL, 0, &cqe);
	pibl_pbl_free(d, rq_pbl, in.rq_npages, rq_pbl_dma);
err_sq_pbl:
	pibl_pbl_free(d, sq_pbl, qp->sq.ring.size / SZ_4K, sq_pbl_dma);
	if (err)
		goto err_free;

	ibqp->qp_num = cqe.result0;
	if (ibqp->qp_num != (attr->qp_type == IB_QPT_SMI ? 0 : 1)) {
		dev_err(&d->pdev->dev, "CREATE_QP of type %u returned QPN %#x\n", attr->qp_type,
			ibqp->qp_num);
		pibl_obj_cmd(d, PIB_CMD_DESTROY_QP, cqe.result0);
		err = -EIO;
		goto err_free;
	}
	qp->cap = (struct ib_qp_cap) {
		.max_send_wr = qp->sq.depth,
		.max_recv_wr = qp->rq.depth,
		.max_send_sge = qp->sq.max_sge,
		.max_recv_sge = qp->rq.max_sge,
	};
	attr->cap = qp->cap;
	/* From here on poll_cq hands its completions to the MAD layer. */
	pibl_kqp_set(d, ibqp->qp_num, attr->send_cq, attr->recv_cq, qp);
	return 0;

err_free:
	pibl_kring_free(d, &qp->rq.ring);
	pibl_kring_free(d, &qp->sq.ring);
	return err;
}

/* udata says who asks: a process (through uverbs and pib's provider), or the kernel. */
static int pibl_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *attr,
			  struct ib_udata *udata)
{
	return udata ? pibl_create_user_qp(ibqp, attr, udata) : pibl_create_mad_qp(ibqp, attr);
}

/*
 * The device flushes the QP's work and forgets it; then its rings may be unpinned or freed.
 * QP0 and QP1 leave poll_cq's table first: the completions the device flushes for their
 * outstanding work, and those still in the CQ, then name no QP and are dropped.
 */
static int pibl_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct pibl_qp *qp = container_of(ibqp, struct pibl_qp, ibqp);
	struct pibl_dev *d = to_pibl(ibqp->device);
	int err;

	if (pibl_is_kernel_qp(qp))
		pibl_kqp_set(d, ibqp->qp_num, ibqp->send_cq, ibqp->recv_cq, NULL);
	err = pibl_obj_cmd(d, PIB_CMD_DESTROY_QP, ibqp->qp_num);
	if (err) {
		if (pibl_is_kernel_qp(qp))
			pibl_kqp_set(d, ibqp->qp_num, ibqp->send_cq, ibqp->recv_cq, qp);
		return err;
	}
	ib_umem_release(qp->rq_umem);
	ib_umem_release(qp->sq_umem);
	pibl_kring_free(d, &qp->rq.ring);
	pibl_kring_free(d, &qp->sq.ring);
	return 0;
}

/* The attributes this driver passes on: no alternate path (APM), no resizing (IB_QP_CAP). */
#define PIBL_QP_ATTR_MASK (IB_QP_STATE | IB_QP_CUR_STATE | IB_QP_ACCESS_FLAGS |              \
			   IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY | IB_QP_AV |              \
			   IB_QP_PATH_MTU | IB_QP_TIMEOUT | IB_QP_RETRY_CNT |                   \
			   IB_QP_RNR_RETRY | IB_QP_RQ_PSN | IB_QP_MAX_QP_RD_ATOMIC |            \
			   IB_QP_MIN_RNR_TIMER | IB_QP_SQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC |      \
			   IB_QP_DEST_QPN)
#define PIBL_QP_ACCESS    (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |                  \
			   IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC)

/*
 * The IB attributes into MODIFY_QP's mailbox.  struct pib_qp_attr's mask bits, states and
 * encodings are the IB ones, so most fields copy; the ranges are checked here, so that a bad
 * value is the caller's EINVAL and not a device error.  Only the fields the mask names are
 * checked, and only those does the device read: a caller need not set the others, and the
 * kernel's do not (the MAD layer's struct ib_qp_attr comes from kmalloc()).
 */
static int pibl_qp_attr_to_hw(struct pibl_dev *d, const struct ib_qp_attr *attr, int mask,
			      struct pib_qp_attr *hw)
{
	const struct rdma_ah_attr *ah = &attr->ah_attr;

	hw->attr_mask = mask;
	hw->qp_state = attr->qp_state;
	hw->cur_qp_state = attr->cur_qp_state;
	if ((mask & IB_QP_ACCESS_FLAGS) && attr->qp_access_flags & ~PIBL_QP_ACCESS)
		return -EINVAL;
	hw->qp_access_flags = attr->qp_access_flags;
	if ((mask & IB_QP_PKEY_INDEX) && attr->pkey_index >= d->pkey_tbl_len)
		return -EINVAL;
	hw->pkey_index = attr->pkey_index;
	if ((mask & IB_QP_PORT) && attr->port_num != PIB_PORT_NUM)
		return -EINVAL;
	hw->port_num = attr->port_num;
	hw->qkey = attr->qkey;
	if (mask & IB_QP_AV) {
		/* LID routing only in this course: no GRH. */
		if (ah->type != RDMA_AH_ATTR_TYPE_IB || rdma_ah_get_ah_flags(ah) & IB_AH_GRH ||
		    rdma_ah_get_dlid(ah) > U16_MAX || rdma_ah_get_sl(ah) > 15)
			return -EINVAL;
		hw->dlid = rdma_ah_get_dlid(ah);
		hw->sl = rdma_ah_get_sl(ah);
		hw->src_path_bits = rdma_ah_get_path_bits(ah);
		hw->static_rate = rdma_ah_get_static_rate(ah);
	}
	if ((mask & IB_QP_PATH_MTU) && (attr->path_mtu < IB_MTU_256 || attr->path_mtu > IB_MTU_4096))
		return -EINVAL;
	hw->path_mtu = attr->path_mtu;
	if (((mask & IB_QP_TIMEOUT) && attr->timeout > 31) ||
	    ((mask & IB_QP_RETRY_CNT) && attr->retry_cnt > 7) ||
	    ((mask & IB_QP_RNR_RETRY) && attr->rnr_retry > 7) ||
	    ((mask & IB_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31))
		return -EINVAL;
	hw->timeout = attr->timeout;
	hw->retry_cnt = attr->retry_cnt;
	hw->rnr_retry = attr->rnr_retry;
	hw->min_rnr_timer = attr->min_rnr_timer;
	if (((mask & IB_QP_RQ_PSN) && attr->rq_psn > PIB_PSN_MASK) ||
	    ((mask & IB_QP_SQ_PSN) && attr->sq_psn > PIB_PSN_MASK) ||
	    ((mask & IB_QP_DEST_QPN) && attr->dest_qp_num > PIB_QPN_MASK))
		return -EINVAL;
	hw->rq_psn = attr->rq_psn;
	hw->sq_psn = attr->sq_psn;
	hw->dest_qp_num = attr->dest_qp_num;
	if (((mask & IB_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > d->attr.max_qp_init_rd_atom) ||
	    ((mask & IB_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > d->attr.max_qp_rd_atom))
		return -EINVAL;
	hw->max_rd_atomic = attr->max_rd_atomic;
	hw->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	return 0;
}

/* QUERY_QP: the device's struct pib_qp_attr for QP qpn, a state it may have changed itself. */
static int pibl_qp_query_hw(struct pibl_dev *d, u32 qpn, struct pib_qp_attr *hw)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_QUERY_QP };

	cmd.in.obj.num = qpn;
	return pibl_exec(d, &cmd, hw, sizeof(*hw), NULL);
}

/*
 * A state change, with the attributes it needs.  IB says which transitions exist and which
 * attributes each requires and allows (ib_modify_qp_is_ok(), IBTA 10.3 and 11.2.5.1): what it
 * forbids is refused here, EINVAL, before the device is asked.  The current state is the
 * device's: it may have moved the QP on its own (to ERR, after an error), so ask it.
 */
static int pibl_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
			  struct ib_udata *udata)
{
	struct pibl_qp *qp = container_of(ibqp, struct pibl_qp, ibqp);
	struct pibl_dev *d = to_pibl(ibqp->device);
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_MODIFY_QP };
	struct pib_qp_attr hw = {};
	enum ib_qp_state cur, next;
	int err;

	if (mask & ~PIBL_QP_ATTR_MASK)
		return -EOPNOTSUPP;
	if (mask & IB_QP_CUR_STATE) {
		cur = attr->cur_qp_state;
	} else {
		err = pibl_qp_query_hw(d, ibqp->qp_num, &hw);
		if (err)
			return err;
		cur = hw.qp_state;
		memset(&hw, 0, sizeof(hw));
	}
	next = mask & IB_QP_STATE ? attr->qp_state : cur;
	if (cur > IB_QPS_ERR || next > IB_QPS_ERR ||
	    !ib_modify_qp_is_ok(cur, next, ibqp->qp_type, mask))
		return -EINVAL;
	/*
	 * Back in RESET the device drops a QP's work and starts its rings over at index 0; the
	 * driver's own rings, and the CQEs still in the CQ, would have to start over with it.
	 * The MAD layer never resets QP0 or QP1 (it destroys them), so this stage does not.
	 */
	if (pibl_is_kernel_qp(qp) && next == IB_QPS_RESET && cur != IB_QPS_RESET)
		return -EOPNOTSUPP;
	err = pibl_qp_attr_to_hw(d, attr, mask, &hw);
	if (err)
		return err;
	cmd.in.mbox.obj = ibqp->qp_num;
	return pibl_exec_mbox(d, &cmd, &hw, sizeof(hw), NULL, 0, NULL);
}

/* What the device holds for the QP: QUERY_QP's struct pib_qp_attr, into the IB structs. */
static int pibl_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
			 struct ib_qp_init_attr *init_attr)
{
	struct pibl_qp *qp = container_of(ibqp, struct pibl_qp, ibqp);
	struct pib_qp_attr hw;
	int err;

	err = pibl_qp_query_hw(to_pibl(ibqp->device), ibqp->qp_num, &hw);
	if (err)
		return err;
	if (hw.qp_state > IB_QPS_ERR)
		return -EIO;

	memset(attr, 0, sizeof(*attr));
	attr->qp_state = hw.qp_state;
	attr->cur_qp_state = hw.qp_state;
	attr->path_mtu = hw.path_mtu;
	attr->path_mig_state = IB_MIG_MIGRATED;
	attr->qkey = hw.qkey;
	attr->rq_psn = hw.rq_psn & PIB_PSN_MASK;
	attr->sq_psn = hw.sq_psn & PIB_PSN_MASK;
	attr->dest_qp_num = hw.dest_qp_num & PIB_QPN_MASK;
	attr->qp_access_flags = hw.qp_access_flags & PIBL_QP_ACCESS;
	attr->cap = qp->cap;
	attr->pkey_index = hw.pkey_index;
	attr->port_num = PIB_PORT_NUM;
	attr->sq_draining = hw.sq_draining;
	attr->max_rd_atomic = hw.max_rd_atomic;
	attr->max_dest_rd_atomic = hw.max_dest_rd_atomic;
	attr->min_rnr_timer = hw.min_rnr_timer;
	attr->timeout = hw.timeout;
	attr->retry_cnt = hw.retry_cnt;
	attr->rnr_retry = hw.rnr_retry;
	attr->ah_attr.type = RDMA_AH_ATTR_TYPE_IB;
	rdma_ah_set_dlid(&attr->ah_attr, hw.dlid);
	rdma_ah_set_sl(&attr->ah_attr, hw.sl & 0xf);
	rdma_ah_set_path_bits(&attr->ah_attr, hw.src_path_bits);
	rdma_ah_set_static_rate(&attr->ah_attr, hw.static_rate);
	rdma_ah_set_port_num(&attr->ah_attr, PIB_PORT_NUM);

	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->send_cq = ibqp->send_cq;
	init_attr->recv_cq = ibqp->recv_cq;
	init_attr->cap = qp->cap;
	init_attr->qp_type = ibqp->qp_type;
	init_attr->port_num = PIB_PORT_NUM;
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * The kernel's data path: polling and arming kernel CQs, posting to QP0 and QP1.  A process's
 * rings are in its own memory, which the kernel does not map: for its CQs and QPs these verbs
 * (which uverbs would pass on) are refused.  They run wherever their callers do (ib_core's
 * CQ work, softirq, under the MAD layer's spinlocks): spinlocks, no sleeping.
 * ------------------------------------------------------------------------------------------ */

/* A CQE's status is the IB numbering (enum ib_wc_status). */
#define PIBL_SAME_STATUS(name, value) static_assert(PIB_WC_##name == (int)IB_WC_##name);
PIB_WC_STATUSES(PIBL_SAME_STATUS)

/* The CQE at index, if the device has written it on index's pass over the ring, else NULL. */
static struct pib_cqe *pibl_cqe_new(struct pibl_cq *cq, u32 index)
{
	struct pib_cqe *cqe = &cq->cqes[index & (cq->depth - 1)];

	if (!pib_ring_owned(READ_ONCE(cqe->flags) & PIB_CQE_F_PHASE, index, cq->depth))
		return NULL;
	/* The rest of the CQE only after its phase bit says it is whole. */
	dma_rmb();
	return cqe;
}

/*
 * The slots a CQE frees.  Every receive WQE completes, in order: one slot.  A send CQE names
 * its WQE (wqe_index, the index mod 2^16), and the device runs an SQ in order and writes no
 * CQE for an unsignalled WQE that succeeds: the slots up to it are free.  An index that names
 * no WQE in use frees nothing.  The poster reads ci with acquire, against the release here:
 * once it sees the new ci, it may write the slots again.
 */
static void pibl_retire(struct pibl_qp *qp, const struct pib_cqe *cqe)
{
	struct pibl_wq *sq = &qp->sq;
	u32 done;

	if (cqe->opcode & PIB_CQE_RECV) {
		smp_store_release(&qp->rq.ci, qp->rq.ci + 1);
		return;
	}
	done = sq->ci + (u16)(cqe->wqe_index - (u16)sq->ci) + 1;
	if (done - sq->ci <= READ_ONCE(sq->pi) - sq->ci)
		smp_store_release(&sq->ci, done);
}

/*
 * A CQE into a work completion.  ib_core needs all of a datagram's receive completion: the MAD
 * layer answers a MAD from where it came (source LID and QP, SL, the P_Key index it matched,
 * the DLID path bits, the GRH if one came), and matches a response to its request with them.
 */
static void pibl_cqe_to_wc(const struct pib_cqe *cqe, struct pibl_qp *qp, struct ib_wc *wc)
{
	*wc = (struct ib_wc) {
		.wr_id = cqe->wr_id,
		.status = cqe->status <= PIB_WC_GENERAL_ERR ? cqe->status : IB_WC_GENERAL_ERR,
		.opcode = cqe->opcode & PIB_CQE_RECV ? IB_WC_RECV : IB_WC_SEND,
		.byte_len = cqe->byte_len,
		.qp = &qp->ibqp,
		.src_qp = cqe->src_qp & PIB_QPN_MASK,
		.slid = cqe->slid,
		.sl = cqe->sl,
		.port_num = PIB_PORT_NUM,
	};
	if (cqe->opcode & PIB_CQE_RECV) {
		wc->pkey_index = cqe->qpn >> PIB_CQE_PKEY_INDEX_SHIFT;
		wc->dlid_path_bits = (cqe->src_qp >> PIB_CQE_PATH_BITS_SHIFT) &
				     PIB_CQE_PATH_BITS_MASK;
		if (cqe->flags & PIB_CQE_F_GRH)
			wc->wc_flags |= IB_WC_GRH;
	}
}

/*
 * Take the CQEs the device has written, in ring order.  A kernel CQ serves QP0 and QP1 only;
 * a CQE that names neither (one of a QP being destroyed) is dropped.  The consumer index
 * record tells the device how far the ring is read, after the CQEs are read: the device may
 * overwrite their slots once it sees it.
 */
static int pibl_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct pibl_cq *cq = container_of(ibcq, struct pibl_cq, ibcq);
	struct pibl_dev *d = to_pibl(ibcq->device);
	struct pib_cqe *cqe;
	struct pibl_qp *qp;
	unsigned long flags;
	u32 qpn, start;
	int n = 0;

	if (!cq->ring.buf)
		return -EINVAL;
	spin_lock_irqsave(&cq->lock, flags);
	start = cq->ci;
	while (n < num_entries && (cqe = pibl_cqe_new(cq, cq->ci))) {
		qpn = cqe->qpn & PIB_QPN_MASK;
		qp = qpn < ARRAY_SIZE(d->kqps) ? d->kqps[qpn] : NULL;
		if (qp) {
			pibl_retire(qp, cqe);
			pibl_cqe_to_wc(cqe, qp, &wc[n++]);
		}
		cq->ci++;
	}
	if (cq->ci != start) {
		dma_mb();
		WRITE_ONCE(*cq->ci_record, cq->ci);
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

/*
 * Arm the CQ: its doorbell on UAR page 0 with the consumer index and the arm bits.  The device
 * raises the event at the next completion (or at once, for CQEs not yet read).  A caller that
 * asks (IB_CQ_REPORT_MISSED_EVENTS) is told of CQEs already there, and polls again at once
 * instead of waiting for that event's interrupt.
 */
static int pibl_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct pibl_cq *cq = container_of(ibcq, struct pibl_cq, ibcq);
	struct pibl_dev *d = to_pibl(ibcq->device);
	u32 arm = PIB_DB_CQ_ARM;
	unsigned long irqflags;
	int missed = 0;

	if (!cq->ring.buf)
		return -EINVAL;
	if ((flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED)
		arm |= PIB_DB_CQ_SOLICITED;
	spin_lock_irqsave(&cq->lock, irqflags);
	pibl_doorbell(d, PIB_UAR_CQ_DB, cq->cqn | arm, cq->ci);
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && pibl_cqe_new(cq, cq->ci))
		missed = 1;
	spin_unlock_irqrestore(&cq->lock, irqflags);
	return missed;
}

static void *pibl_wq_slot(struct pibl_wq *wq, u32 index)
{
	return wq->ring.buf + ((size_t)(index & (wq->depth - 1)) << wq->stride_log);
}

static void pibl_write_sges(struct pib_sge *dst, const struct ib_sge *src, int num_sge)
{
	int i;

	for (i = 0; i < num_sge; i++)
		dst[i] = (struct pib_sge) {
			.addr = src[i].addr,
			.length = src[i].length,
			.lkey = src[i].lkey,
		};
}

/*
 * A UD send WQE: the control segment as a datagram's (struct pib_ud_wqe), with the address
 * vector of the work request's AH, then the SGEs.  The Q_Key goes as the MAD layer gives it:
 * with its high bit set (IB_QP_SET_QKEY) it means the QP's own, and the device takes that.
 * QP1 sends each MAD with the P_Key index the MAD layer names (a response: its request's);
 * QP0's packets carry P_Key 0xffff whatever the WQE says.
 */
static void pibl_write_ud_wqe(struct pibl_qp *qp, const struct ib_ud_wr *wr, void *slot)
{
	const struct rdma_ah_attr *av = &container_of(wr->ah, struct pibl_ah, ibah)->attr;
	const struct ib_global_route *grh = rdma_ah_read_grh(av);
	struct pib_ud_wqe *wqe = slot;

	*wqe = (struct pib_ud_wqe) {
		.opcode = PIB_WQE_SEND,
		.flags = (wr->wr.send_flags & IB_SEND_SIGNALED ? PIB_WQE_F_SIGNALED : 0) |
			 (wr->wr.send_flags & IB_SEND_SOLICITED ? PIB_WQE_F_SOLICITED : 0),
		.num_sge = wr->wr.num_sge,
		.wr_id = wr->wr.wr_id,
		.ud_qpn = wr->remote_qpn,
		.ud_qkey = wr->remote_qkey,
		.ud_dlid = rdma_ah_get_dlid(av),
		.ud_sl = rdma_ah_get_sl(av),
		.ud_pkey_index = qp->ibqp.qp_type == IB_QPT_GSI ? wr->pkey_index : 0,
	};
	if (rdma_ah_get_ah_flags(av) & IB_AH_GRH) {
		wqe->av_flags = PIB_UD_AV_F_GRH;
		wqe->flow_label = grh->flow_label;
		wqe->traffic_class = grh->traffic_class;
		wqe->hop_limit = grh->hop_limit;
		wqe->sgid_index = grh->sgid_index;
		memcpy(wqe->dgid, grh->dgid.raw, sizeof(wqe->dgid));
	}
	pibl_write_sges((struct pib_sge *)(wqe + 1), wr->wr.sg_list, wr->wr.num_sge);
}

/*
 * Post sends to QP0 or QP1: each work request checked before its WQE is written (a MAD is a
 * SEND with SGEs, to an AH), then one doorbell for the list, with the new producer index.  A
 * full ring or a bad request stops the list there: *bad_wr says where.
 */
static int pibl_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
			  const struct ib_send_wr **bad_wr)
{
	struct pibl_qp *qp = container_of(ibqp, struct pibl_qp, ibqp);
	struct pibl_dev *d = to_pibl(ibqp->device);
	struct pibl_wq *sq = &qp->sq;
	unsigned long flags;
	int err = 0;
	u32 pi;

	if (!pibl_is_kernel_qp(qp)) {
		*bad_wr = wr;
		return -EINVAL;
	}
	spin_lock_irqsave(&sq->lock, flags);
	pi = sq->pi;
	for (; wr; wr = wr->next) {
		if (pi - smp_load_acquire(&sq->ci) >= sq->depth) {
			err = -ENOMEM;
			break;
		}
		if (wr->opcode != IB_WR_SEND ||
		    wr->send_flags & ~(IB_SEND_SIGNALED | IB_SEND_SOLICITED) ||
		    wr->num_sge < 0 || wr->num_sge > sq->max_sge || !ud_wr(wr)->ah ||
		    ud_wr(wr)->remote_qpn > PIB_QPN_MASK ||
		    (ibqp->qp_type == IB_QPT_GSI && ud_wr(wr)->pkey_index >= d->pkey_tbl_len)) {
			err = -EINVAL;
			break;
		}
		pibl_write_ud_wqe(qp, ud_wr(wr), pibl_wq_slot(sq, pi));
		pi++;
	}
	if (pi != sq->pi) {
		WRITE_ONCE(sq->pi, pi);
		pibl_doorbell(d, PIB_UAR_SQ_DB, ibqp->qp_num, pi);
	}
	spin_unlock_irqrestore(&sq->lock, flags);
	if (err)
		*bad_wr = wr;
	return err;
}

/* Post receives to QP0 or QP1: WQEs (the buffers' SGEs), then one RQ doorbell. */
static int pibl_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
			  const struct ib_recv_wr **bad_wr)
{
	struct pibl_qp *qp = container_of(ibqp, struct pibl_qp, ibqp);
	struct pibl_wq *rq = &qp->rq;
	struct pib_recv_wqe *wqe;
	unsigned long flags;
	int err = 0;
	u32 pi;

	if (!pibl_is_kernel_qp(qp)) {
		*bad_wr = wr;
		return -EINVAL;
	}
	spin_lock_irqsave(&rq->lock, flags);
	pi = rq->pi;
	for (; wr; wr = wr->next) {
		if (pi - smp_load_acquire(&rq->ci) >= rq->depth) {
			err = -ENOMEM;
			break;
		}
		if (wr->num_sge < 0 || wr->num_sge > rq->max_sge) {
			err = -EINVAL;
			break;
		}
		wqe = pibl_wq_slot(rq, pi);
		*wqe = (struct pib_recv_wqe) { .wr_id = wr->wr_id, .num_sge = wr->num_sge };
		pibl_write_sges((struct pib_sge *)(wqe + 1), wr->sg_list, wr->num_sge);
		pi++;
	}
	if (pi != rq->pi) {
		WRITE_ONCE(rq->pi, pi);
		pibl_doorbell(to_pibl(ibqp->device), PIB_UAR_RQ_DB, ibqp->qp_num, pi);
	}
	spin_unlock_irqrestore(&rq->lock, flags);
	if (err)
		*bad_wr = wr;
	return err;
}

/* ------------------------------------------------------------------------------------------
 * Address handles (the kernel's: the provider keeps a process's in the process)
 * ------------------------------------------------------------------------------------------ */

/*
 * Where a datagram goes: kept whole, for the send WQE (pibl_write_ud_wqe()) and for query_ah,
 * by which the MAD layer matches a response to the request it sent.  The GID attribute is
 * ib_core's, which it holds for the AH; the copy does not keep it.  May be called in atomic
 * context (without RDMA_CREATE_AH_SLEEPABLE): nothing here sleeps.
 */
static int pibl_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init_attr,
			  struct ib_udata *udata)
{
	struct pibl_ah *ah = container_of(ibah, struct pibl_ah, ibah);
	const struct rdma_ah_attr *attr = init_attr->ah_attr;
	struct pibl_dev *d = to_pibl(ibah->device);

	if (udata)
		return -EOPNOTSUPP;
	if (attr->type != RDMA_AH_ATTR_TYPE_IB || rdma_ah_get_port_num(attr) != PIB_PORT_NUM ||
	    rdma_ah_get_dlid(attr) > U16_MAX || rdma_ah_get_sl(attr) > 15)
		return -EINVAL;
	if ((rdma_ah_get_ah_flags(attr) & IB_AH_GRH) &&
	    (rdma_ah_read_grh(attr)->sgid_index >= d->gid_tbl_len ||
	     rdma_ah_read_grh(attr)->flow_label > PIB_FLOW_LABEL_MASK))
		return -EINVAL;
	ah->attr = *attr;
	ah->attr.grh.sgid_attr = NULL;
	return 0;
}

static int pibl_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	return 0;
}

static int pibl_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	*attr = container_of(ibah, struct pibl_ah, ibah)->attr;
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Management datagrams
 * ------------------------------------------------------------------------------------------ */

static_assert(sizeof(struct ib_mad) == PIB_MAD_SIZE);
static_assert(sizeof(struct ib_grh) == sizeof_field(struct pib_mad_ifc_in, grh));

/*
 * ib_core's MAD layer gives the driver the first say on every MAD that arrives on QP0 or QP1,
 * on every directed-route SMP to the local port (smpquery -D ... 0), and on the PMA queries of
 * sysfs.  The firmware has agents for the SMPs (SMA), performance management (PMA) and
 * congestion control (CC): MAD_IFC hands them their MADs, with what the receive completion said
 * of a MAD from the wire, and the firmware answers in one of the three ways ib_core takes:
 *   REPLY     send out_mad back where the MAD came from;
 *   CONSUMED  drop it;
 *   0         pass it on to the agents above (SMInfo to opensm, the SA, the CM, ...).
 * A response, or a MAD of another class, is never the firmware's: it goes on at once, without
 * an admin command.  The driver never makes an answer up.  MAD_IFC sleeps (an admin command),
 * which every caller allows.
 */
static int pibl_process_mad(struct ib_device *ibdev, int mad_flags, u32 port_num,
			    const struct ib_wc *in_wc, const struct ib_grh *in_grh,
			    const struct ib_mad *in, struct ib_mad *out, size_t *out_mad_size,
			    u16 *out_mad_pkey_index)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_MAD_IFC };
	struct pib_mad_ifc_in ifc = { .port_num = port_num };
	u8 class = in->mad_hdr.mgmt_class;
	struct pib_admin_cqe cqe;

	if ((in->mad_hdr.method & IB_MGMT_METHOD_RESP) ||
	    (class != IB_MGMT_CLASS_SUBN_LID_ROUTED && class != IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE &&
	     class != IB_MGMT_CLASS_PERF_MGMT && class != IB_MGMT_CLASS_CONG_MGMT))
		return IB_MAD_RESULT_SUCCESS;
	if (*out_mad_size < sizeof(*out))
		return IB_MAD_RESULT_FAILURE;

	if (mad_flags & IB_MAD_IGNORE_MKEY)
		ifc.flags |= PIB_MAD_IFC_F_IGNORE_MKEY;
	/*
	 * Only a MAD from the wire comes with the GRH slot of its receive buffer.  A local
	 * directed-route SMP comes with a completion ib_core made up and no GRH, sysfs's with
	 * neither.
	 */
	if (in_wc && in_grh) {
		ifc.flags |= PIB_MAD_IFC_F_WIRE;
		ifc.sl = in_wc->sl;
		ifc.slid = ib_lid_cpu16(in_wc->slid);
		ifc.src_qp = in_wc->src_qp;
		ifc.pkey_index = in_wc->pkey_index;
		ifc.dlid_path_bits = in_wc->dlid_path_bits;
		if (in_wc->wc_flags & IB_WC_GRH) {
			ifc.flags |= PIB_MAD_IFC_F_GRH;
			memcpy(ifc.grh, in_grh, sizeof(ifc.grh));
		}
	}
	memcpy(ifc.mad, in, sizeof(ifc.mad));
	if (pibl_exec_mbox(to_pibl(ibdev), &cmd, &ifc, sizeof(ifc), out, sizeof(*out), &cqe))
		return IB_MAD_RESULT_FAILURE;

	switch (cqe.result0) {
	case PIB_MAD_IFC_REPLY:
		*out_mad_size = sizeof(*out);
		return IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_REPLY;
	case PIB_MAD_IFC_CONSUMED:
		return IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_CONSUMED;
	case 0:
		return IB_MAD_RESULT_SUCCESS;
	default:
		return IB_MAD_RESULT_FAILURE;
	}
}

static const struct ib_device_ops pibl_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,
	/* The provider (guest-provider/) claims a device by PCI ID and this version. */
	.uverbs_abi_ver = PIB_UVERBS_ABI_VERSION,

	.alloc_pd = pibl_alloc_pd,
	.alloc_ucontext = pibl_alloc_ucontext,
	.create_ah = pibl_create_ah,
	.create_cq = pibl_create_cq,
	.create_qp = pibl_create_qp,
	.dealloc_pd = pibl_dealloc_pd,
	.dealloc_ucontext = pibl_dealloc_ucontext,
	.dereg_mr = pibl_dereg_mr,
	.destroy_ah = pibl_destroy_ah,
	.destroy_cq = pibl_destroy_cq,
	.destroy_qp = pibl_destroy_qp,
	.get_dev_fw_str = pibl_get_dev_fw_str,
	.get_dma_mr = pibl_get_dma_mr,
	.get_link_layer = pibl_get_link_layer,
	.get_port_immutable = pibl_get_port_immutable,
	.mmap = pibl_mmap,
	.modify_port = pibl_modify_port,
	.modify_qp = pibl_modify_qp,
	.mmap_free = pibl_mmap_free,
	.poll_cq = pibl_poll_cq,
	.post_recv = pibl_post_recv,
	.post_send = pibl_post_send,
	.process_mad = pibl_process_mad,
	.query_ah = pibl_query_ah,
	.query_device = pibl_query_device,
	.query_gid = pibl_query_gid,
	.query_pkey = pibl_query_pkey,
	.query_port = pibl_query_port,
	.query_qp = pibl_query_qp,
	.reg_user_mr = pibl_reg_user_mr,
	.req_notify_cq = pibl_req_notify_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, pibl_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, pibl_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_pd, pibl_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, pibl_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, pibl_ucontext, ibucontext),
};

static int pibl_ib_register(struct pibl_dev *d)
{
	struct ib_device *ibdev = &d->ibdev;
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_QUERY_DEVICE };
	struct pib_admin_cmd pcmd = { .opcode = PIB_CMD_QUERY_PORT };
	struct pib_port_attr pa;
	int err;

	err = pibl_exec(d, &cmd, &d->attr, sizeof(d->attr), NULL);
	if (err)
		return err;
	pcmd.in.port.port_num = PIB_PORT_NUM;
	err = pibl_exec(d, &pcmd, &pa, sizeof(pa), NULL);
	if (err)
		return err;
	/* ... and no more CQs than the CEQ has slots: each has at most one CEQE there. */
	if (d->attr.phys_port_cnt != PIB_NUM_PORTS || !pa.pkey_tbl_len || !pa.gid_tbl_len ||
	    d->attr.max_cq > PIBL_CEQ_DEPTH)
		return -ENODEV;
	d->pkey_tbl_len = pa.pkey_tbl_len;
	d->gid_tbl_len = pa.gid_tbl_len;

	ibdev->node_type = RDMA_NODE_IB_CA;
	/* The device says it in CPU (little-endian) order; ib_core keeps it big-endian. */
	ibdev->node_guid = cpu_to_be64(d->attr.node_guid);
	ibdev->phys_port_cnt = PIB_NUM_PORTS;
	ibdev->num_comp_vectors = 1;
	ibdev->dev.parent = &d->pdev->dev;
	ib_set_device_ops(ibdev, &pibl_ops);
	/*
	 * With this stage the device has every verb a kernel consumer needs (ib_core's
	 * "mandatory" ones: get_dma_mr, poll_cq, post_send, ...), so ib_core's kernel clients
	 * take it as it registers: the MAD layer makes its PD, CQ, QP0 and QP1 and brings them to
	 * RTS before ib_register_device() returns; the SA, CM and umad clients follow.
	 */
	err = ib_register_device(ibdev, "pibl_%d", &d->pdev->dev);
	if (err)
		return err;
	dev_info(&d->pdev->dev, "registered %s: node GUID %016llx, port 1 state %u LID %u\n",
		 dev_name(&ibdev->dev), (unsigned long long)d->attr.node_guid, pa.state, pa.lid);
	return 0;
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

	d = ib_alloc_device(pibl_dev, ibdev);
	if (!d) {
		err = -ENOMEM;
		goto err_clear_master;
	}
	d->pdev = pdev;
	mutex_init(&d->cmd_lock);
	mutex_init(&d->mbox_lock);
	spin_lock_init(&d->cq_lock);
	init_completion(&d->done);
	xa_init(&d->cqs);
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
	/* User contexts map UAR pages of BAR2; page 0 is the kernel's, mapped here. */
	d->uar_bar_start = pci_resource_start(pdev, PIB_BAR_UAR);
	d->num_uars = num_uars;
	if ((u64)num_uars * PIB_UAR_PAGE_SIZE > pci_resource_len(pdev, PIB_BAR_UAR)) {
		err = -ENODEV;
		goto err_unmap;
	}
	d->uar0 = pci_iomap_range(pdev, PIB_BAR_UAR, 0, PIB_UAR_PAGE_SIZE);
	if (!d->uar0) {
		err = -ENOMEM;
		goto err_unmap;
	}

	err = pibl_reset(d);
	if (err)
		goto err_unmap_uar;
	err = pibl_rings_alloc(d);
	if (err)
		goto err_unmap_uar;
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
	err = pibl_ib_register(d);
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
err_unmap_uar:
	pci_iounmap(pdev, d->uar0);
err_unmap:
	pci_iounmap(pdev, d->regs);
err_free:
	ib_dealloc_device(&d->ibdev);
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

	/*
	 * ib_core's clients first: the MAD layer destroys QP0, QP1, their CQ and PD, with admin
	 * commands and with the completion handler still running.  Then the device stops, and
	 * only then go its interrupts and the memory it wrote.
	 */
	ib_unregister_device(&d->ibdev);
	pibl_reset(d);
	pci_clear_master(pdev);
	pibl_irqs_free(d);
	pibl_rings_free(d);
	pci_iounmap(pdev, d->uar0);
	pci_iounmap(pdev, d->regs);
	ib_dealloc_device(&d->ibdev);
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
