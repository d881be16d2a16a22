/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pib_com.h - the pib driver's engine for the queues it shares with the device: the admin
 * queue (a command ring and a completion ring), the async event queue (AEQ) and the
 * completion event queue (CEQ).
 *
 * pib_com.c is the only code that touches those rings or the registers that drive them.
 * pib_com_cmd.c builds one typed call per admin command on top of pib_com_exec(); the verbs
 * (pib_verbs.c) only ever call those.
 */
#ifndef PIB_COM_H
#define PIB_COM_H

#include <linux/bitmap.h>
#include <linux/completion.h>
#include <linux/device.h>
#include <linux/io.h>
#include <linux/semaphore.h>
#include <linux/spinlock.h>
#include <asm/barrier.h>
#include <asm/byteorder.h>

#include "pib_hw.h"
#include "pib_wqe.h"

/*
 * pib_hw.h is shared with QEMU and userspace, so it declares the device's little-endian
 * fields as plain integers.  This driver reads them natively, which is right only on a
 * little-endian CPU; say so at build time rather than misread every field at run time.
 */
#ifndef __LITTLE_ENDIAN
#error "pib: the hardware interface is little-endian and this driver reads it natively"
#endif

/* 64 commands of 64 bytes fill one 4 KiB page; the completion ring has as many entries. */
#define PIB_AQ_DEPTH          64
/* 256 events of 16 bytes fill one 4 KiB page. */
#define PIB_AEQ_DEPTH         256
/* Each command slot owns a response buffer this large (QUERY_COUNTERS' is the largest). */
#define PIB_AQ_RESP_SIZE      512
/* ... and an input mailbox this large (struct pib_mad_ifc_in is the largest). */
#define PIB_AQ_MBOX_SIZE      512
/*
 * 4096 CEQEs of 8 bytes: 32 KiB, the deepest CEQ the device takes.  A CQ puts at most one
 * CEQE in the ring per arming, so the CEQ cannot overflow while there are no more CQs than
 * this: the driver never creates more (struct pib_dev.max_cq).
 */
#define PIB_CEQ_DEPTH         4096
/* How long a command may take before the device is declared dead. */
#define PIB_AQ_TIMEOUT_MS     5000

enum pib_comp_ctx_state {
	PIB_CTX_FREE,
	PIB_CTX_SUBMITTED,    /* in the command ring, no completion seen yet */
	PIB_CTX_COMPLETED,    /* completion copied into cqe */
};

/* One outstanding admin command: who waits for it and what came back. */
struct pib_comp_ctx {
	struct completion done;
	struct pib_admin_cqe cqe;
	u16 cmd_id;
	u8 opcode;
	u8 state;             /* enum pib_comp_ctx_state */
};

/* struct pib_aq.flags bit numbers */
enum {
	PIB_AQ_RUNNING,       /* cleared for good when the device stops answering */
	PIB_AQ_POLLING,       /* completions arrive without MSI-X: poll the ring */
};

struct pib_aq {
	struct pib_admin_cmd *sq;       /* command ring: driver writes, device reads */
	dma_addr_t sq_dma;
	struct pib_admin_cqe *cq;       /* completion ring: device writes, driver reads */
	dma_addr_t cq_dma;
	u8 *resp;                       /* PIB_AQ_RESP_SIZE bytes per context */
	dma_addr_t resp_dma;
	u8 *mbox;                       /* PIB_AQ_MBOX_SIZE bytes per context */
	dma_addr_t mbox_dma;

	/*
	 * At most PIB_AQ_DEPTH commands are outstanding, one per context; that is also what
	 * keeps the device's completion ring from overflowing.  A context is taken from the
	 * semaphore before a command is written and given back after its completion is read.
	 */
	struct semaphore free_ctx;
	struct pib_comp_ctx ctx[PIB_AQ_DEPTH];
	DECLARE_BITMAP(ctx_used, PIB_AQ_DEPTH);

	spinlock_t sq_lock;             /* sq_pi, the command ring, ctx_used (process context) */
	u32 sq_pi;                      /* commands written, free-running; what AQ_DB holds */

	spinlock_t cq_lock;             /* cq_ci, completing a context (any context) */
	u32 cq_ci;                      /* completions consumed, free-running */

	unsigned long flags;            /* PIB_AQ_* bits */
};

struct pib_aeq {
	struct pib_aeqe *ring;          /* device writes, driver reads */
	dma_addr_t dma;
	u32 ci;                         /* events consumed, free-running; what AEQ_DB gets */
	u32 lost;                       /* last AEQ_LOST value reported */
};

struct pib_ceq {
	struct pib_ceqe *ring;          /* device writes, driver reads */
	dma_addr_t dma;
	u32 ci;                         /* CEQEs consumed, free-running; what CEQ_DB gets */
};

struct pib_com_dev {
	void __iomem *regs;             /* BAR0 */
	struct device *dmadev;          /* the PCI function, for DMA and messages */
	struct pib_aq aq;
	struct pib_aeq aeq;
	struct pib_ceq ceq;
};

static inline u32 pib_reg_read(struct pib_com_dev *com, enum pib_reg_offset off)
{
	return readl(com->regs + off);
}

static inline void pib_reg_write(struct pib_com_dev *com, enum pib_reg_offset off, u32 val)
{
	writel(val, com->regs + off);
}

/*
 * The consumer's half of the phase-bit rule (pib_hw.h, "The phase bit"), for every ring the
 * device produces (admin CQ, AEQ, CEQ, CQs): has the device written entry idx of a ring of
 * depth entries on this pass?  flags is the entry's flags byte, phase_bit its *_F_PHASE.  If
 * so, the read barrier keeps the CPU from reading the rest of the entry (or what the device
 * wrote before it) ahead of the bit that says it is there.
 */
static inline bool pib_ring_entry_new(const u8 *flags, u8 phase_bit, u32 idx, u32 depth)
{
	if (!pib_ring_owned(READ_ONCE(*flags) & phase_bit, idx, depth))
		return false;
	dma_rmb();
	return true;
}

/* Bring-up and teardown, in this order; pib_com_disable() undoes pib_com_enable(). */
int pib_com_validate_device(struct pib_com_dev *com);
int pib_com_reset(struct pib_com_dev *com);
int pib_com_queues_alloc(struct pib_com_dev *com);
int pib_com_enable(struct pib_com_dev *com);
void pib_com_disable(struct pib_com_dev *com);
void pib_com_queues_free(struct pib_com_dev *com);

/*
 * Run one admin command and wait for it (process context only; it sleeps).  The engine
 * fills in cmd_id, resp_addr and resp_len.  On success up to resp_len bytes of response
 * are copied to resp and, if cqe is not NULL, the completion to *cqe.
 */
int pib_com_exec(struct pib_com_dev *com, const struct pib_admin_cmd *cmd,
		 void *resp, size_t resp_len, struct pib_admin_cqe *cqe);
/*
 * The same for a command whose input is a mailbox (struct pib_cmd_mbox): in_len bytes of in
 * are copied to the command's own DMA mailbox and cmd->in.mbox.addr/len point at it; the
 * caller sets cmd->in.mbox.obj.
 */
int pib_com_exec_mbox(struct pib_com_dev *com, const struct pib_admin_cmd *cmd,
		      const void *in, size_t in_len, void *resp, size_t resp_len,
		      struct pib_admin_cqe *cqe);

/* MSI-X vector PIB_MSIX_VEC_ADMIN: reap admin completions (hard-IRQ safe). */
void pib_com_admin_intr(struct pib_com_dev *com);

/*
 * MSI-X vector PIB_MSIX_VEC_ASYNC: hand each new event to handler, then return the entries
 * to the device.  Runs in process context (a threaded IRQ); one caller at a time.
 */
typedef void (*pib_aeq_handler_t)(void *data, const struct pib_aeqe *aeqe);
void pib_com_aeq_process(struct pib_com_dev *com, pib_aeq_handler_t handler, void *data);

/*
 * MSI-X vector PIB_MSIX_VEC_CEQ: hand the CQN of each new CEQE to handler, then return the
 * entries to the device.  Hard-IRQ context; one caller at a time (the vector's handler).
 */
typedef void (*pib_ceq_handler_t)(void *data, u32 cqn);
void pib_com_ceq_process(struct pib_com_dev *com, pib_ceq_handler_t handler, void *data);

const char *pib_com_cmd_str(u8 opcode);

#endif /* PIB_COM_H */
