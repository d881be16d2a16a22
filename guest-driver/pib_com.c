// SPDX-License-Identifier: GPL-2.0
/*
 * pib_com.c - the admin queue, async event queue and completion event queue engine.
 *
 * Admin queue (docs/reference/hardware.md, "Admin queue"): command i goes into slot i % depth of the
 * command ring and AQ_DB is set to i + 1.  The device runs commands in order and writes the
 * completion of command i into slot i % depth of the completion ring, phase bit 1 on the
 * first pass, 0 on the second, and so on; then it raises MSI-X vector 0.  The driver owns a
 * completion when its phase bit is the one it expects.
 *
 * A command does not own a ring slot for long: it owns a context (struct pib_comp_ctx) from
 * before it is written until its waiter has read the result.  The context's index is the low
 * bits of the cmd_id the device echoes, so a completion finds its waiter directly.  Each
 * context also owns a DMA response buffer: a command that timed out can still be answered
 * late by the device without the DMA landing in memory somebody else now uses.
 *
 * When a wait times out the engine looks at the completion ring itself once, to tell the
 * two failures apart: the completion is there (the interrupt was lost: say so once and poll
 * from now on), or it is not (the device is dead: fail this and every later command, and
 * take away its bus mastering, so that memory the driver frees from then on is safe from it).
 *
 * The event queues (AEQ, CEQ) are rings the device produces and the driver consumes, with the
 * same phase bit rule; the driver hands entries back by writing its consumer index.
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/iopoll.h>
#include <linux/jiffies.h>
#include <linux/pci.h>
#include <linux/sizes.h>

#include "pib_com.h"
#include "pib_mad.h"

/* How long CONTROL.RESET and CONTROL.ENABLE may take to show in STATUS. */
#define PIB_STATUS_TIMEOUT_US   (1000 * 1000)
#define PIB_STATUS_POLL_US      100
/* Polling mode: how often the waiter looks at the completion ring. */
#define PIB_AQ_POLL_US          200

#define PIB_AQ_SQ_SIZE          (PIB_AQ_DEPTH * sizeof(struct pib_admin_cmd))
#define PIB_AQ_CQ_SIZE          (PIB_AQ_DEPTH * sizeof(struct pib_admin_cqe))
#define PIB_AQ_RESP_TOTAL       (PIB_AQ_DEPTH * PIB_AQ_RESP_SIZE)
#define PIB_AQ_MBOX_TOTAL       (PIB_AQ_DEPTH * PIB_AQ_MBOX_SIZE)
#define PIB_AEQ_SIZE            (PIB_AEQ_DEPTH * sizeof(struct pib_aeqe))
#define PIB_CEQ_SIZE            (PIB_CEQ_DEPTH * sizeof(struct pib_ceqe))

/* What CONTROL.ENABLE accepts (pib_hw.h). */
#define PIB_VALID_DEPTH(d)      (((d) & ((d) - 1)) == 0 && (d) >= PIB_QUEUE_MIN_DEPTH && \
				 (d) <= PIB_QUEUE_MAX_DEPTH)
static_assert(PIB_VALID_DEPTH(PIB_AQ_DEPTH), "AQ_DEPTH is not a depth the device takes");
static_assert(PIB_VALID_DEPTH(PIB_AEQ_DEPTH), "AEQ_DEPTH is not a depth the device takes");
static_assert(PIB_VALID_DEPTH(PIB_CEQ_DEPTH), "CEQ_DEPTH is not a depth the device takes");
/* cmd_id is 16 bits: the context index must fit with room for a generation count. */
static_assert(PIB_AQ_DEPTH <= 1024, "cmd_id carries the context index");
static_assert(sizeof(struct pib_device_attr) <= PIB_AQ_RESP_SIZE, "response buffer size");
static_assert(sizeof(struct pib_port_attr) <= PIB_AQ_RESP_SIZE, "response buffer size");
static_assert(sizeof(struct pib_qp_attr) <= PIB_AQ_RESP_SIZE, "response buffer size");
static_assert(PIB_CNT_MAX * sizeof(u64) <= PIB_AQ_RESP_SIZE, "response buffer size");
static_assert(sizeof(struct pib_qp_create) <= PIB_AQ_MBOX_SIZE, "mailbox size");
static_assert(sizeof(struct pib_qp_attr) <= PIB_AQ_MBOX_SIZE, "mailbox size");
static_assert(sizeof(struct pib_mad_ifc_in) <= PIB_AQ_MBOX_SIZE, "mailbox size");
static_assert(PIB_MAD_SIZE <= PIB_AQ_RESP_SIZE, "response buffer size");

/* Names for messages, from the lists in pib_hw.h. */
static const char *pib_com_name(const char * const *names, size_t n, u32 value)
{
	return value < n && names[value] ? names[value] : "UNKNOWN";
}

const char *pib_com_cmd_str(u8 opcode)
{
#define PIB_CMD_STR(id, name, value) [PIB_CMD_##id] = #id,
	static const char * const names[] = { PIB_ADMIN_OPCODES(PIB_CMD_STR) };
#undef PIB_CMD_STR

	return pib_com_name(names, ARRAY_SIZE(names), opcode);
}

static const char *pib_com_status_str(u8 status)
{
#define PIB_STATUS_STR(id, value) [PIB_AQ_##id] = #id,
	static const char * const names[] = { PIB_ADMIN_STATUSES(PIB_STATUS_STR) };
#undef PIB_STATUS_STR

	return pib_com_name(names, ARRAY_SIZE(names), status);
}

static const char *pib_com_gerr_str(u32 code)
{
#define PIB_GERR_STR(id, value) [PIB_GERR_##id] = #id,
	static const char * const names[] = { PIB_GUEST_ERRORS(PIB_GERR_STR) };
#undef PIB_GERR_STR

	return pib_com_name(names, ARRAY_SIZE(names), code);
}

static int pib_com_status_to_errno(u8 status)
{
	switch (status) {
	case PIB_AQ_OK:
		return 0;
	case PIB_AQ_BAD_OPCODE:
		return -EOPNOTSUPP;
	case PIB_AQ_BAD_PARAM:
	case PIB_AQ_BAD_STATE:
		return -EINVAL;
	case PIB_AQ_BAD_RESOURCE:
		return -ENOENT;
	case PIB_AQ_NO_RESOURCES:
		return -ENOMEM;
	case PIB_AQ_BUSY:
		return -EBUSY;
	case PIB_AQ_DMA_ERROR:
	default:
		return -EIO;
	}
}

/* ------------------------------------------------------------------------------------------
 * Bring-up and teardown
 * ------------------------------------------------------------------------------------------ */

int pib_com_validate_device(struct pib_com_dev *com)
{
	u32 magic = pib_reg_read(com, PIB_REG_MAGIC);
	u32 version = pib_reg_read(com, PIB_REG_VERSION);
	u32 caps = pib_reg_read(com, PIB_REG_CAPS);

	if (magic != PIB_MAGIC) {
		dev_err(com->dmadev, "bad magic %#x (expected %#x): not a pib device\n",
			magic, PIB_MAGIC);
		return -ENODEV;
	}
	if (version >> 16 != PIB_VERSION_MAJOR) {
		dev_err(com->dmadev, "device interface v%u.%u, this driver speaks v%u.x\n",
			version >> 16, version & 0xffff, PIB_VERSION_MAJOR);
		return -ENODEV;
	}
	if (!(caps & PIB_CAP_AEQ)) {
		dev_err(com->dmadev, "device has no async event queue (caps %#x)\n", caps);
		return -ENODEV;
	}
	dev_info(com->dmadev, "pib device interface v%u.%u\n", version >> 16, version & 0xffff);
	return 0;
}

/* Function-level reset: the device forgets its queues and stops all DMA. */
int pib_com_reset(struct pib_com_dev *com)
{
	u32 status;
	int err;

	pib_reg_write(com, PIB_REG_CONTROL, PIB_CTRL_RESET);
	err = readl_poll_timeout(com->regs + PIB_REG_STATUS, status,
				 !(status & (PIB_STATUS_READY | PIB_STATUS_FATAL)),
				 PIB_STATUS_POLL_US, PIB_STATUS_TIMEOUT_US);
	if (err)
		dev_err(com->dmadev, "device did not reset (status %#x)\n", status);
	return err;
}

/*
 * The device wants every ring 4 KiB aligned.  dma_alloc_coherent() aligns to the page
 * order of the size, so a one-page-or-larger ring always is; check rather than assume.
 */
static void *pib_com_ring_alloc(struct pib_com_dev *com, size_t size, dma_addr_t *dma)
{
	void *ring = dma_alloc_coherent(com->dmadev, size, dma, GFP_KERNEL);

	if (ring && !IS_ALIGNED(*dma, SZ_4K)) {
		dev_err(com->dmadev, "ring at %pad is not 4 KiB aligned\n", dma);
		dma_free_coherent(com->dmadev, size, ring, *dma);
		return NULL;
	}
	return ring;
}

int pib_com_queues_alloc(struct pib_com_dev *com)
{
	struct pib_aq *aq = &com->aq;
	struct pib_aeq *aeq = &com->aeq;
	struct pib_ceq *ceq = &com->ceq;
	int i;

	/* Coherent memory comes zeroed: no stale phase bit can look like a new entry. */
	aq->sq = pib_com_ring_alloc(com, PIB_AQ_SQ_SIZE, &aq->sq_dma);
	if (!aq->sq)
		goto err;
	aq->cq = pib_com_ring_alloc(com, PIB_AQ_CQ_SIZE, &aq->cq_dma);
	if (!aq->cq)
		goto err_free_sq;
	aq->resp = dma_alloc_coherent(com->dmadev, PIB_AQ_RESP_TOTAL, &aq->resp_dma, GFP_KERNEL);
	if (!aq->resp)
		goto err_free_cq;
	aq->mbox = dma_alloc_coherent(com->dmadev, PIB_AQ_MBOX_TOTAL, &aq->mbox_dma, GFP_KERNEL);
	if (!aq->mbox)
		goto err_free_resp;
	aeq->ring = pib_com_ring_alloc(com, PIB_AEQ_SIZE, &aeq->dma);
	if (!aeq->ring)
		goto err_free_mbox;
	ceq->ring = pib_com_ring_alloc(com, PIB_CEQ_SIZE, &ceq->dma);
	if (!ceq->ring)
		goto err_free_aeq;

	/*
	 * The rings start empty at index 0, which is where the device starts at ENABLE.  Set
	 * now, before any IRQ is requested: a vector left pending from an earlier life of the
	 * device may fire as soon as it is unmasked.
	 */
	aq->sq_pi = 0;
	aq->cq_ci = 0;
	aeq->ci = 0;
	aeq->lost = 0;
	ceq->ci = 0;

	sema_init(&aq->free_ctx, PIB_AQ_DEPTH);
	spin_lock_init(&aq->sq_lock);
	spin_lock_init(&aq->cq_lock);
	bitmap_zero(aq->ctx_used, PIB_AQ_DEPTH);
	for (i = 0; i < PIB_AQ_DEPTH; i++) {
		init_completion(&aq->ctx[i].done);
		aq->ctx[i].state = PIB_CTX_FREE;
	}
	return 0;

err_free_aeq:
	dma_free_coherent(com->dmadev, PIB_AEQ_SIZE, aeq->ring, aeq->dma);
err_free_mbox:
	dma_free_coherent(com->dmadev, PIB_AQ_MBOX_TOTAL, aq->mbox, aq->mbox_dma);
err_free_resp:
	dma_free_coherent(com->dmadev, PIB_AQ_RESP_TOTAL, aq->resp, aq->resp_dma);
err_free_cq:
	dma_free_coherent(com->dmadev, PIB_AQ_CQ_SIZE, aq->cq, aq->cq_dma);
err_free_sq:
	dma_free_coherent(com->dmadev, PIB_AQ_SQ_SIZE, aq->sq, aq->sq_dma);
err:
	dev_err(com->dmadev, "cannot allocate the admin and event queue rings\n");
	return -ENOMEM;
}

/* Only after pib_com_disable() (or before pib_com_enable()): the device must not DMA. */
void pib_com_queues_free(struct pib_com_dev *com)
{
	struct pib_aq *aq = &com->aq;
	struct pib_aeq *aeq = &com->aeq;
	struct pib_ceq *ceq = &com->ceq;

	dma_free_coherent(com->dmadev, PIB_CEQ_SIZE, ceq->ring, ceq->dma);
	dma_free_coherent(com->dmadev, PIB_AEQ_SIZE, aeq->ring, aeq->dma);
	dma_free_coherent(com->dmadev, PIB_AQ_MBOX_TOTAL, aq->mbox, aq->mbox_dma);
	dma_free_coherent(com->dmadev, PIB_AQ_RESP_TOTAL, aq->resp, aq->resp_dma);
	dma_free_coherent(com->dmadev, PIB_AQ_CQ_SIZE, aq->cq, aq->cq_dma);
	dma_free_coherent(com->dmadev, PIB_AQ_SQ_SIZE, aq->sq, aq->sq_dma);
}

/*
 * Program the queue registers (AQ, AEQ, CEQ) and set CONTROL.ENABLE.  The device latches
 * the registers at the 0->1 edge and reports READY; a bad configuration leaves READY clear
 * and names the reason in ERR_LAST.  Once per pib_com_queues_alloc(): the device starts its
 * rings at index 0, so they must be fresh.
 */
int pib_com_enable(struct pib_com_dev *com)
{
	struct pib_aq *aq = &com->aq;
	struct pib_aeq *aeq = &com->aeq;
	struct pib_ceq *ceq = &com->ceq;
	u32 status;
	int err;

	pib_reg_write(com, PIB_REG_AQ_DEPTH, PIB_AQ_DEPTH);
	pib_reg_write(com, PIB_REG_AQ_SQ_LO, lower_32_bits(aq->sq_dma));
	pib_reg_write(com, PIB_REG_AQ_SQ_HI, upper_32_bits(aq->sq_dma));
	pib_reg_write(com, PIB_REG_AQ_CQ_LO, lower_32_bits(aq->cq_dma));
	pib_reg_write(com, PIB_REG_AQ_CQ_HI, upper_32_bits(aq->cq_dma));
	pib_reg_write(com, PIB_REG_AEQ_DEPTH, PIB_AEQ_DEPTH);
	pib_reg_write(com, PIB_REG_AEQ_LO, lower_32_bits(aeq->dma));
	pib_reg_write(com, PIB_REG_AEQ_HI, upper_32_bits(aeq->dma));
	pib_reg_write(com, PIB_REG_CEQ_DEPTH, PIB_CEQ_DEPTH);
	pib_reg_write(com, PIB_REG_CEQ_LO, lower_32_bits(ceq->dma));
	pib_reg_write(com, PIB_REG_CEQ_HI, upper_32_bits(ceq->dma));

	set_bit(PIB_AQ_RUNNING, &aq->flags);
	pib_reg_write(com, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
	err = readl_poll_timeout(com->regs + PIB_REG_STATUS, status,
				 status & (PIB_STATUS_READY | PIB_STATUS_FATAL),
				 PIB_STATUS_POLL_US, PIB_STATUS_TIMEOUT_US);
	if (!err && (status & PIB_STATUS_READY) && !(status & PIB_STATUS_FATAL))
		return 0;

	dev_err(com->dmadev, "device did not become ready (status %#x, last guest error %s)\n",
		status, pib_com_gerr_str(pib_reg_read(com, PIB_REG_ERR_LAST)));
	clear_bit(PIB_AQ_RUNNING, &aq->flags);
	pib_com_reset(com);
	return err ?: -EIO;
}

/*
 * Stop the device for good: no command is accepted after this, and the reset guarantees
 * the device no longer writes into the rings, so they can be freed.
 */
void pib_com_disable(struct pib_com_dev *com)
{
	clear_bit(PIB_AQ_RUNNING, &com->aq.flags);
	pib_com_reset(com);
}

/* ------------------------------------------------------------------------------------------
 * Admin completions
 * ------------------------------------------------------------------------------------------ */

static bool pib_ctx_completed(struct pib_comp_ctx *ctx)
{
	/* Pairs with the smp_store_release() in pib_aq_complete(): cqe is valid once seen. */
	return smp_load_acquire(&ctx->state) == PIB_CTX_COMPLETED;
}

static void pib_aq_complete(struct pib_com_dev *com, const struct pib_admin_cqe *cqe)
{
	struct pib_aq *aq = &com->aq;
	struct pib_comp_ctx *ctx = &aq->ctx[cqe->cmd_id & (PIB_AQ_DEPTH - 1)];

	/* A late answer to a command whose waiter gave up, or a device bug. */
	if (READ_ONCE(ctx->state) != PIB_CTX_SUBMITTED || ctx->cmd_id != cqe->cmd_id) {
		dev_err_ratelimited(com->dmadev,
				    "admin completion for cmd_id %#x that nobody waits for (status %s)\n",
				    cqe->cmd_id, pib_com_status_str(cqe->status));
		return;
	}
	ctx->cqe = *cqe;
	smp_store_release(&ctx->state, PIB_CTX_COMPLETED);
	complete(&ctx->done);
}

/* Reap every new completion.  Called with cq_lock held, from the IRQ or from a waiter. */
static void pib_aq_process_cq(struct pib_com_dev *com)
{
	struct pib_aq *aq = &com->aq;
	struct pib_admin_cqe *cqe;

	lockdep_assert_held(&aq->cq_lock);
	for (;;) {
		/* The completion, and the response the device wrote before it, once new. */
		cqe = &aq->cq[aq->cq_ci & (PIB_AQ_DEPTH - 1)];
		if (!pib_ring_entry_new(&cqe->flags, PIB_ACQE_F_PHASE, aq->cq_ci, PIB_AQ_DEPTH))
			break;
		pib_aq_complete(com, cqe);
		aq->cq_ci++;
	}
}

void pib_com_admin_intr(struct pib_com_dev *com)
{
	spin_lock(&com->aq.cq_lock);
	pib_aq_process_cq(com);
	spin_unlock(&com->aq.cq_lock);
}

static void pib_aq_poll_cq(struct pib_com_dev *com)
{
	unsigned long flags;

	spin_lock_irqsave(&com->aq.cq_lock, flags);
	pib_aq_process_cq(com);
	spin_unlock_irqrestore(&com->aq.cq_lock, flags);
}

/* ------------------------------------------------------------------------------------------
 * Submission and waiting
 * ------------------------------------------------------------------------------------------ */

static struct pib_comp_ctx *pib_aq_submit(struct pib_com_dev *com,
					  const struct pib_admin_cmd *cmd,
					  const void *in, size_t in_len, size_t resp_len)
{
	struct pib_aq *aq = &com->aq;
	struct pib_admin_cmd *slot;
	struct pib_comp_ctx *ctx;
	unsigned int idx;

	spin_lock(&aq->sq_lock);
	if (!test_bit(PIB_AQ_RUNNING, &aq->flags)) {
		spin_unlock(&aq->sq_lock);
		return ERR_PTR(-ENODEV);
	}
	/* The free_ctx semaphore guarantees a free context. */
	idx = find_first_zero_bit(aq->ctx_used, PIB_AQ_DEPTH);
	if (WARN_ON_ONCE(idx >= PIB_AQ_DEPTH)) {
		spin_unlock(&aq->sq_lock);
		return ERR_PTR(-EBUSY);
	}
	__set_bit(idx, aq->ctx_used);

	ctx = &aq->ctx[idx];
	/* Low bits: the context.  High bits: a generation, so stale completions stand out. */
	ctx->cmd_id = (u16)((aq->sq_pi & ~(PIB_AQ_DEPTH - 1)) | idx);
	ctx->opcode = cmd->opcode;
	reinit_completion(&ctx->done);
	WRITE_ONCE(ctx->state, PIB_CTX_SUBMITTED);
	if (resp_len)
		memset(aq->resp + idx * PIB_AQ_RESP_SIZE, 0, resp_len);
	if (in_len)
		memcpy(aq->mbox + idx * PIB_AQ_MBOX_SIZE, in, in_len);

	slot = &aq->sq[aq->sq_pi & (PIB_AQ_DEPTH - 1)];
	*slot = *cmd;
	slot->cmd_id = ctx->cmd_id;
	slot->resp_len = resp_len;
	slot->resp_addr = resp_len ? aq->resp_dma + idx * PIB_AQ_RESP_SIZE : 0;
	if (in_len) {
		slot->in.mbox.addr = aq->mbox_dma + idx * PIB_AQ_MBOX_SIZE;
		slot->in.mbox.len = in_len;
	}
	aq->sq_pi++;
	/* writel() orders the ring and context writes above before the doorbell. */
	pib_reg_write(com, PIB_REG_AQ_DB, aq->sq_pi);
	spin_unlock(&aq->sq_lock);

	return ctx;
}

static void pib_aq_put_ctx(struct pib_aq *aq, struct pib_comp_ctx *ctx)
{
	spin_lock(&aq->sq_lock);
	WRITE_ONCE(ctx->state, PIB_CTX_FREE);
	__clear_bit(ctx - aq->ctx, aq->ctx_used);
	spin_unlock(&aq->sq_lock);
	up(&aq->free_ctx);
}

/*
 * ctx never completed: the device has stopped executing commands.  Say so once, refuse
 * every later command and wake the other waiters, whose commands will not complete either.
 * The rings and response buffers stay allocated until the device is reset at removal, so a
 * device that wakes up late writes only into memory the engine still owns.
 *
 * The verbs go on freeing what they destroy (a command that fails because the device is dead
 * does not keep ib_core from tearing down), and some of that memory the device could still
 * write: a CQ ring, pinned user pages.  Turning off bus mastering takes its DMA away for good
 * (MSI-X messages are DMA too: no interrupt comes from it either).
 */
static void pib_aq_set_dead(struct pib_com_dev *com, struct pib_comp_ctx *ctx)
{
	struct pib_aq *aq = &com->aq;
	unsigned long flags;
	int i;

	if (!test_and_clear_bit(PIB_AQ_RUNNING, &aq->flags))
		return;

	dev_err(com->dmadev,
		"admin command %s (cmd_id %#x) not completed in %u ms; device dead (status %#x, last guest error %s, sq_pi %u, cq_ci %u)\n",
		pib_com_cmd_str(ctx->opcode), ctx->cmd_id, PIB_AQ_TIMEOUT_MS,
		pib_reg_read(com, PIB_REG_STATUS),
		pib_com_gerr_str(pib_reg_read(com, PIB_REG_ERR_LAST)),
		READ_ONCE(aq->sq_pi), READ_ONCE(aq->cq_ci));

	pci_clear_master(to_pci_dev(com->dmadev));

	spin_lock_irqsave(&aq->cq_lock, flags);
	for (i = 0; i < PIB_AQ_DEPTH; i++)
		if (READ_ONCE(aq->ctx[i].state) == PIB_CTX_SUBMITTED)
			complete(&aq->ctx[i].done);
	spin_unlock_irqrestore(&aq->cq_lock, flags);
}

static int pib_aq_wait_polling(struct pib_com_dev *com, struct pib_comp_ctx *ctx)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(PIB_AQ_TIMEOUT_MS);

	for (;;) {
		pib_aq_poll_cq(com);
		if (pib_ctx_completed(ctx))
			return 0;
		if (!test_bit(PIB_AQ_RUNNING, &com->aq.flags))
			return -EIO;
		if (time_after(jiffies, deadline)) {
			pib_aq_set_dead(com, ctx);
			return -ETIMEDOUT;
		}
		usleep_range(PIB_AQ_POLL_US, 2 * PIB_AQ_POLL_US);
	}
}

static int pib_aq_wait(struct pib_com_dev *com, struct pib_comp_ctx *ctx)
{
	struct pib_aq *aq = &com->aq;

	if (test_bit(PIB_AQ_POLLING, &aq->flags))
		return pib_aq_wait_polling(com, ctx);

	wait_for_completion_timeout(&ctx->done, msecs_to_jiffies(PIB_AQ_TIMEOUT_MS));
	if (pib_ctx_completed(ctx))
		return 0;
	/* Woken by pib_aq_set_dead() on behalf of another command. */
	if (!test_bit(PIB_AQ_RUNNING, &aq->flags))
		return -EIO;

	/* No wakeup in time.  Did the device answer without raising the interrupt? */
	pib_aq_poll_cq(com);
	if (pib_ctx_completed(ctx)) {
		if (!test_and_set_bit(PIB_AQ_POLLING, &aq->flags))
			dev_warn(com->dmadev,
				 "admin command %s completed but no MSI-X arrived; polling the admin queue from now on\n",
				 pib_com_cmd_str(ctx->opcode));
		return 0;
	}
	pib_aq_set_dead(com, ctx);
	return -ETIMEDOUT;
}

static int pib_com_run(struct pib_com_dev *com, const struct pib_admin_cmd *cmd,
		       const void *in, size_t in_len, void *resp, size_t resp_len,
		       struct pib_admin_cqe *cqe)
{
	struct pib_aq *aq = &com->aq;
	struct pib_comp_ctx *ctx;
	int err;

	might_sleep();
	if (WARN_ON_ONCE(resp_len > PIB_AQ_RESP_SIZE || in_len > PIB_AQ_MBOX_SIZE))
		return -EINVAL;

	down(&aq->free_ctx);
	ctx = pib_aq_submit(com, cmd, in, in_len, resp_len);
	if (IS_ERR(ctx)) {
		up(&aq->free_ctx);
		return PTR_ERR(ctx);
	}

	err = pib_aq_wait(com, ctx);
	if (!err) {
		err = pib_com_status_to_errno(ctx->cqe.status);
		/*
		 * A full table, a busy object, a QP in the wrong state (the device may move
		 * a QP to ERROR on its own) or a command this device does not implement
		 * (-EOPNOTSUPP: an older device) is the caller's to report, not a fault.
		 */
		if (ctx->cqe.status == PIB_AQ_NO_RESOURCES || ctx->cqe.status == PIB_AQ_BUSY ||
		    ctx->cqe.status == PIB_AQ_BAD_STATE || ctx->cqe.status == PIB_AQ_BAD_OPCODE)
			dev_dbg(com->dmadev, "admin command %s: %s\n",
				pib_com_cmd_str(ctx->opcode), pib_com_status_str(ctx->cqe.status));
		else if (err)
			dev_err_ratelimited(com->dmadev, "admin command %s failed: %s\n",
					    pib_com_cmd_str(ctx->opcode),
					    pib_com_status_str(ctx->cqe.status));
	}
	if (!err) {
		if (resp_len)
			memcpy(resp, aq->resp + (ctx - aq->ctx) * PIB_AQ_RESP_SIZE, resp_len);
		if (cqe)
			*cqe = ctx->cqe;
	}
	pib_aq_put_ctx(aq, ctx);
	return err;
}

int pib_com_exec(struct pib_com_dev *com, const struct pib_admin_cmd *cmd,
		 void *resp, size_t resp_len, struct pib_admin_cqe *cqe)
{
	return pib_com_run(com, cmd, NULL, 0, resp, resp_len, cqe);
}

int pib_com_exec_mbox(struct pib_com_dev *com, const struct pib_admin_cmd *cmd,
		      const void *in, size_t in_len, void *resp, size_t resp_len,
		      struct pib_admin_cqe *cqe)
{
	if (WARN_ON_ONCE(!in_len))
		return -EINVAL;
	return pib_com_run(com, cmd, in, in_len, resp, resp_len, cqe);
}

/* ------------------------------------------------------------------------------------------
 * Async events
 * ------------------------------------------------------------------------------------------ */

void pib_com_aeq_process(struct pib_com_dev *com, pib_aeq_handler_t handler, void *data)
{
	struct pib_aeq *aeq = &com->aeq;
	struct pib_aeqe *slot, aeqe;
	u32 start = aeq->ci, lost;

	for (;;) {
		slot = &aeq->ring[aeq->ci & (PIB_AEQ_DEPTH - 1)];
		if (!pib_ring_entry_new(&slot->flags, PIB_AEQE_F_PHASE, aeq->ci, PIB_AEQ_DEPTH))
			break;
		aeqe = *slot;
		handler(data, &aeqe);
		aeq->ci++;
	}
	/* Hand the consumed entries back to the device. */
	if (aeq->ci != start)
		pib_reg_write(com, PIB_REG_AEQ_DB, aeq->ci);

	/* The device never drops an event silently: it counts the ones it had no room for. */
	lost = pib_reg_read(com, PIB_REG_AEQ_LOST);
	if (lost != aeq->lost) {
		dev_warn_ratelimited(com->dmadev, "%u async events lost: the AEQ was full\n",
				     lost - aeq->lost);
		aeq->lost = lost;
	}
}

/* ------------------------------------------------------------------------------------------
 * Completion events
 * ------------------------------------------------------------------------------------------ */

void pib_com_ceq_process(struct pib_com_dev *com, pib_ceq_handler_t handler, void *data)
{
	struct pib_ceq *ceq = &com->ceq;
	struct pib_ceqe *slot;
	u32 start = ceq->ci;

	for (;;) {
		slot = &ceq->ring[ceq->ci & (PIB_CEQ_DEPTH - 1)];
		if (!pib_ring_entry_new(&slot->flags, PIB_CEQE_F_PHASE, ceq->ci, PIB_CEQ_DEPTH))
			break;
		handler(data, READ_ONCE(slot->cqn) & PIB_DB_OBJ_MASK);
		ceq->ci++;
	}
	if (ceq->ci != start)
		pib_reg_write(com, PIB_REG_CEQ_DB, ceq->ci);
}
