// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * qp.c - queue pairs of the pib provider: sizing and creating them (their
 * rings are work queues, wq.c), changing their state, and the QPN table that
 * poll_cq retires WQEs through.  Posting is in wq.c, the ibv_qp_ex builders in
 * qp_ex.c; the formats are in include/pib_wqe.h, the uverbs commands in
 * include/pib-abi.h.
 *
 * A slot of a QP's ring is free again once a CQE shows that the device is
 * done with it: pib_qp_retire(), called by poll_cq, moves the queue's
 * consumer index.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ccan/array_size.h>
#include <ccan/minmax.h>
#include <util/udma_barrier.h>
#include <util/util.h>

#include "pib.h"
#include "verbs.h"

/* ---- QPN table --------------------------------------------------------------------------- */

int pib_qp_table_init(struct pib_context *ctx, uint32_t max_qp)
{
	uint32_t nbuckets;
	int err;

	/* One bucket per QP the device can have, within reason. */
	max_qp = min_t(uint32_t, max_qp, 1u << 16);
	nbuckets = roundup_pow_of_two(max_t(uint32_t, max_qp, 1));
	ctx->qp_table = calloc(nbuckets, sizeof(*ctx->qp_table));
	if (!ctx->qp_table)
		return ENOMEM;
	ctx->qp_table_mask = nbuckets - 1;

	err = pthread_spin_init(&ctx->qp_table_lock, PTHREAD_PROCESS_PRIVATE);
	if (err) {
		free(ctx->qp_table);
		ctx->qp_table = NULL;
	}
	return err;
}

void pib_qp_table_fini(struct pib_context *ctx)
{
	if (!ctx->qp_table)
		return;
	pthread_spin_destroy(&ctx->qp_table_lock);
	free(ctx->qp_table);
	ctx->qp_table = NULL;
}

static struct pib_qp **pib_qp_table_bucket(struct pib_context *ctx,
					   uint32_t qpn)
{
	return &ctx->qp_table[qpn & ctx->qp_table_mask];
}

static void pib_qp_table_insert(struct pib_context *ctx, struct pib_qp *qp)
{
	struct pib_qp **bucket;

	pthread_spin_lock(&ctx->qp_table_lock);
	bucket = pib_qp_table_bucket(ctx, qp->vqp.qp.qp_num);
	qp->table_next = *bucket;
	*bucket = qp;
	pthread_spin_unlock(&ctx->qp_table_lock);
}

static void pib_qp_table_remove(struct pib_context *ctx, struct pib_qp *qp)
{
	struct pib_qp **link;

	pthread_spin_lock(&ctx->qp_table_lock);
	for (link = pib_qp_table_bucket(ctx, qp->vqp.qp.qp_num); *link;
	     link = &(*link)->table_next) {
		if (*link == qp) {
			*link = qp->table_next;
			break;
		}
	}
	pthread_spin_unlock(&ctx->qp_table_lock);
}

/* Called with the table lock held. */
static struct pib_qp *pib_qp_table_lookup(struct pib_context *ctx,
					  uint32_t qpn)
{
	struct pib_qp *qp;

	for (qp = *pib_qp_table_bucket(ctx, qpn); qp; qp = qp->table_next)
		if (qp->vqp.qp.qp_num == qpn)
			return qp;
	return NULL;
}

/*
 * A send CQE completes the WQE at wqe_index and, because the device executes
 * a send queue in order and writes no CQE for an unsignalled WQE that
 * succeeds, every WQE before it too: the consumer index moves past it.  An
 * index outside [ci, pi) names no outstanding WQE (a stale CQE); it moves
 * nothing.
 */
static void pib_sq_retire(struct pib_wq *sq, uint16_t wqe_index)
{
	uint32_t ci = atomic_load_explicit(&sq->ci, memory_order_relaxed);
	uint32_t pi = atomic_load_explicit(&sq->pi, memory_order_relaxed);
	uint32_t index = ci + (uint16_t)(wqe_index - (uint16_t)ci);

	if (index - ci >= pi - ci)
		return;

	/* Release: the slots may be rewritten once the poster sees this. */
	atomic_store_explicit(&sq->ci, index + 1, memory_order_release);
}

/* Every receive WQE completes, in order: one CQE retires one slot. */
static void pib_rq_retire(struct pib_wq *rq)
{
	uint32_t ci = atomic_load_explicit(&rq->ci, memory_order_relaxed);
	uint32_t pi = atomic_load_explicit(&rq->pi, memory_order_relaxed);

	if (!rq->depth || ci == pi)
		return;
	atomic_store_explicit(&rq->ci, ci + 1, memory_order_release);
}

/*
 * Retire the WQE slots a CQE frees: SQ slots, or one RQ slot, or, for a QP on
 * an SRQ, one SRQ slot.  Returns false if the CQE's QP is not (or no longer)
 * one of this context's.  The table lock is held across the update, so
 * destroy_qp cannot free the QP underneath (and the SRQ outlives its QPs:
 * the kernel refuses to destroy an SRQ that a QP uses).
 */
bool pib_qp_retire(struct pib_context *ctx, const struct pib_cqe *cqe)
{
	uint32_t qpn = le32toh(cqe->qpn) & PIB_DB_OBJ_MASK;
	struct pib_srq *srq;
	struct pib_qp *qp;

	pthread_spin_lock(&ctx->qp_table_lock);
	/*
	 * An XRC target's receive: the XRC SRQ it names has a slot free.  The
	 * completion is the SRQ's consumer's, whichever process the target QP
	 * belongs to, even if the SRQ is gone by now.
	 */
	if (cqe->flags & PIB_CQE_F_XRC) {
		srq = pib_xsrq_lookup(ctx, le32toh(cqe->src_qp) & PIB_DB_OBJ_MASK);
		if (srq)
			pib_srq_retire(srq);
		pthread_spin_unlock(&ctx->qp_table_lock);
		return true;
	}
	qp = pib_qp_table_lookup(ctx, qpn);
	if (qp) {
		/* Receive opcodes are PIB_CQE_RECV (0x80) and up. */
		if ((cqe->opcode & PIB_CQE_RECV) && qp->srq)
			pib_srq_retire(qp->srq);
		else if (cqe->opcode & PIB_CQE_RECV)
			pib_rq_retire(&qp->rq);
		else
			pib_sq_retire(&qp->sq, le16toh(cqe->wqe_index));
	}
	pthread_spin_unlock(&ctx->qp_table_lock);

	return qp != NULL;
}

/* ---- Creating and destroying ------------------------------------------------------------- */

/*
 * Choose the ring geometry for the capabilities asked for:
 *   depth  = the number of WRs rounded up to a power of two (at least 1);
 *   stride = the WQE header plus the SGEs (or, for sends, the inline bytes),
 *            rounded up to a power of two.
 */
static int pib_qp_size(struct pib_context *ctx, const struct ibv_qp_cap *cap,
		       bool has_rq, struct pib_qp *qp)
{
	uint32_t max_depth = min_t(uint32_t, ctx->max_qp_wr, PIB_WQ_DEPTH_MAX);

	if (cap->max_send_wr > max_depth || cap->max_send_sge > ctx->max_sge ||
	    cap->max_inline_data > PIB_MAX_INLINE_DATA)
		return EINVAL;
	if (has_rq && (cap->max_recv_wr > max_depth ||
		       cap->max_recv_sge > ctx->max_sge))
		return EINVAL;

	qp->sq.depth = roundup_pow_of_two(max_t(uint32_t, cap->max_send_wr, 1));
	qp->sq.stride_log = pib_stride_log(pib_sq_slot_bytes(cap->max_send_sge,
							     cap->max_inline_data),
					   PIB_SQ_STRIDE_LOG_MIN);
	if (qp->sq.depth > max_depth || qp->sq.stride_log > PIB_STRIDE_LOG_MAX)
		return EINVAL;
	qp->sq.max_sge = min_t(uint32_t, ctx->max_sge,
			       pib_sq_max_sge(qp->sq.stride_log));

	/* Without an RQ (receives go to the SRQ) rq.depth stays 0. */
	qp->rq.stride_log = PIB_RQ_STRIDE_LOG_MIN;
	if (!has_rq)
		return 0;

	qp->rq.depth = roundup_pow_of_two(max_t(uint32_t, cap->max_recv_wr, 1));
	qp->rq.stride_log = pib_stride_log(pib_recv_slot_bytes(cap->max_recv_sge),
					   PIB_RQ_STRIDE_LOG_MIN);
	if (qp->rq.depth > max_depth || qp->rq.stride_log > PIB_STRIDE_LOG_MAX)
		return EINVAL;
	qp->rq.max_sge = min_t(uint32_t, ctx->max_sge,
			       pib_recv_max_sge(qp->rq.stride_log));
	return 0;
}

/* The capabilities the rings give, which may exceed what was asked for. */
static void pib_qp_caps(struct pib_qp *qp, struct ibv_qp_cap *cap)
{
	cap->max_send_wr = qp->sq.depth;
	cap->max_send_sge = qp->sq.max_sge;
	cap->max_recv_wr = qp->rq.depth;
	cap->max_recv_sge = qp->rq.max_sge;
	cap->max_inline_data = qp->max_inline;
}

/*
 * What create_qp_ex takes: a PD (an XRC domain for an XRC_RECV QP), the
 * extended send interface (ibv_qp_ex) for the operations the QP type carries,
 * no creation flags.
 */
#define PIB_QP_COMP_MASK	(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | \
				 IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_XRCD)
#define PIB_QP_EX_SEND_OPS						       \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |		       \
	 IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE |	       \
	 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |      \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | \
	 IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_ATOMIC_WRITE | \
	 IBV_QP_EX_WITH_FLUSH)

static int pib_check_qp_init_attr(const struct ibv_qp_init_attr_ex *attr)
{
	if (attr->comp_mask & ~PIB_QP_COMP_MASK)
		return EOPNOTSUPP;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	    attr->create_flags)
		return EOPNOTSUPP;
	switch (attr->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
	case IBV_QPT_XRC_SEND:
		break;
	case IBV_QPT_XRC_RECV:
		/* Only its domain: no PD, CQ, SRQ or send operations. */
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd ||
		    (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
			return EINVAL;
		return 0;
	default:
		return EOPNOTSUPP;
	}
	/*
	 * An XRC initiator only sends: a receive CQ or SRQ it is given goes
	 * unused, as libibverbs and the other providers have it.
	 */
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd ||
	    !attr->send_cq || (attr->qp_type != IBV_QPT_XRC_SEND && !attr->recv_cq))
		return EINVAL;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    !pib_qp_ex_ops_allowed(attr->qp_type, attr->send_ops_flags))
		return EOPNOTSUPP;
	return 0;
}

/*
 * An XRC_RECV (target) QP has no rings: the kernel makes it as an object of
 * its own (it ignores the driver request) that other processes may open.  Its
 * completions name the XRC SRQ, so it needs no place in the QPN table.  Made
 * or opened, it is a struct pib_qp with nothing in it (pib_qp_ringless: the
 * result, or the error err, freeing qp).
 */
static struct ibv_qp *pib_qp_ringless(struct pib_qp *qp, int err)
{
	if (err) {
		free(qp);
		errno = err;
		return NULL;
	}
	return &qp->vqp.qp;
}

static struct ibv_qp *pib_create_xrc_recv(struct ibv_context *ibvctx,
					  struct ibv_qp_init_attr_ex *attr)
{
	struct pib_context *ctx = to_pib_context(ibvctx);
	struct pib_create_qp_resp resp = {};
	struct pib_create_qp cmd = {};
	struct pib_qp *qp = calloc(1, sizeof(*qp));
	int err;

	if (!qp)
		return pib_qp_ringless(qp, ENOMEM);
	attr->cap = (struct ibv_qp_cap){};
	err = ibv_cmd_create_qp_ex(ibvctx, &qp->vqp, attr, &cmd.ibv_cmd,
				   sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (err)
		verbs_err(&ctx->ibvctx, "Failed to create XRC target QP: %d\n", err);
	return pib_qp_ringless(qp, err);
}

/* ibv_open_qp: another process's XRC target QP, by number, in a shared domain. */
struct ibv_qp *pib_open_qp(struct ibv_context *ibvctx,
			   struct ibv_qp_open_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp;
	struct ibv_open_qp cmd;
	struct pib_qp *qp = calloc(1, sizeof(*qp));

	if (!qp)
		return pib_qp_ringless(qp, ENOMEM);
	return pib_qp_ringless(qp, ibv_cmd_open_qp(ibvctx, &qp->vqp, sizeof(qp->vqp),
						   attr, &cmd, sizeof(cmd), &resp,
						   sizeof(resp)));
}

struct ibv_qp *pib_create_qp_ex(struct ibv_context *ibvctx,
				struct ibv_qp_init_attr_ex *attr)
{
	struct pib_context *ctx = to_pib_context(ibvctx);
	struct pib_create_qp_resp resp = {};
	struct pib_create_qp cmd = {};
	struct ibv_qp_cap want = attr->cap;
	struct ibv_qp_init_attr_ex kattr;
	struct pib_qp *qp;
	int err;

	err = pib_check_qp_init_attr(attr);
	if (err) {
		errno = err;
		return NULL;
	}
	if (attr->qp_type == IBV_QPT_XRC_RECV)
		return pib_create_xrc_recv(ibvctx, attr);

	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}

	err = pib_qp_size(ctx, &want,
			  !attr->srq && attr->qp_type != IBV_QPT_XRC_SEND, qp);
	if (err)
		goto err_free_qp;
	err = pib_wq_init(&qp->sq, attr->pd, PIB_RES_TYPE_SQ);
	if (err)
		goto err_free_qp;
	qp->rq.has_dbrec = ctx->recv_dbrec && qp->rq.depth;
	err = pib_wq_init(&qp->rq, attr->pd, PIB_RES_TYPE_RQ);
	if (err)
		goto err_fini_sq;
	if (qp->rq.has_dbrec)
		cmd.comp_mask |= PIB_IBV_CREATE_QP_MASK_RQ_DBREC;

	cmd.sq_stride_log = qp->sq.stride_log;
	cmd.rq_stride_log = qp->rq.stride_log;
	cmd.sq_buf_addr = (uintptr_t)qp->sq.buf;
	cmd.rq_buf_addr = (uintptr_t)qp->rq.buf;
	cmd.sq_depth = qp->sq.depth;
	cmd.rq_depth = qp->rq.depth;
	cmd.sq_buf_size = qp->sq.buf_size;
	cmd.rq_buf_size = qp->rq.buf_size;
	/*
	 * create_flags is 0 by now (pib_check_qp_init_attr), and the command
	 * refuses the mask bit that announces it: the kernel gets the QP
	 * without it.
	 */
	kattr = *attr;
	kattr.comp_mask &= ~IBV_QP_INIT_ATTR_CREATE_FLAGS;
	if (attr->qp_type == IBV_QPT_XRC_SEND) {
		kattr.recv_cq = NULL;
		kattr.srq = NULL;
	}
	err = ibv_cmd_create_qp_ex(ibvctx, &qp->vqp, &kattr, &cmd.ibv_cmd,
				   sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (err) {
		verbs_err(&ctx->ibvctx, "Failed to create QP: %d\n", err);
		goto err_fini_rq;
	}

	if (resp.qpn != qp->vqp.qp.qp_num || resp.qpn > PIB_DB_OBJ_MASK) {
		verbs_err(&ctx->ibvctx, "Kernel answered QPN %u and %u\n",
			  resp.qpn, qp->vqp.qp.qp_num);
		err = EPROTO;
		goto err_destroy_qp;
	}

	/*
	 * Inline data goes into the slot after the control segment: never
	 * more than the slot holds, nor more than the device accepts.
	 */
	qp->max_inline = min_t(uint32_t, pib_sq_max_inline(qp->sq.stride_log),
			       resp.max_inline);
	if (qp->max_inline < want.max_inline_data) {
		verbs_err(&ctx->ibvctx, "Kernel allows %u inline bytes, %u asked\n",
			  resp.max_inline, want.max_inline_data);
		err = EINVAL;
		goto err_destroy_qp;
	}
	qp->sq_sig_all = attr->sq_sig_all;
	qp->srq = kattr.srq ? to_pib_srq(kattr.srq) : NULL;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
		pib_qp_ex_init(qp, attr->send_ops_flags);

	/* What the rings really hold, not the kernel's echo of the request. */
	pib_qp_caps(qp, &attr->cap);

	pib_qp_table_insert(ctx, qp);
	return &qp->vqp.qp;

err_destroy_qp:
	ibv_cmd_destroy_qp(&qp->vqp.qp);
err_fini_rq:
	pib_wq_fini(&qp->rq);
err_fini_sq:
	pib_wq_fini(&qp->sq);
err_free_qp:
	free(qp);
	errno = err;
	return NULL;
}

/* ibv_create_qp: the extended verb with a PD and nothing extended. */
struct ibv_qp *pib_create_qp(struct ibv_pd *ibvpd,
			     struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex = {
		.qp_context = attr->qp_context,
		.send_cq = attr->send_cq,
		.recv_cq = attr->recv_cq,
		.srq = attr->srq,
		.cap = attr->cap,
		.qp_type = attr->qp_type,
		.sq_sig_all = attr->sq_sig_all,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = ibvpd,
	};
	struct ibv_qp *qp = pib_create_qp_ex(ibvpd->context, &ex);

	if (qp)
		attr->cap = ex.cap;
	return qp;
}

int pib_destroy_qp(struct ibv_qp *ibvqp)
{
	struct pib_context *ctx = to_pib_context(ibvqp->context);
	struct pib_qp *qp = to_pib_qp(ibvqp);
	int err;

	/* The device flushes the QP's outstanding WQEs and forgets the rings. */
	err = ibv_cmd_destroy_qp(ibvqp);
	if (err)
		return err;

	/*
	 * From here on poll_cq drops the QP's CQEs, its flush CQEs among them.
	 * Its own rings go with it, but the SRQ stays: the slots of the QP's
	 * receive completions still waiting in the CQ are retired now, under
	 * the CQ lock and before the QP leaves the table, so that poll_cq
	 * counts each of them exactly once.
	 */
	if (qp->srq) {
		struct pib_cq *rcq = to_pib_cq(ibvqp->recv_cq);

		pthread_spin_lock(&rcq->lock);
		pib_cq_drop_qp_cqes(rcq, ibvqp->qp_num, qp->srq);
		pib_qp_table_remove(ctx, qp);
		pthread_spin_unlock(&rcq->lock);
	} else {
		pib_qp_table_remove(ctx, qp);
	}

	pib_wq_fini(&qp->rq);
	pib_wq_fini(&qp->sq);
	free(qp);
	return 0;
}

/*
 * A QP moved to RESET has empty work queues and starts over: the provider
 * posts from index 0 again, and the device expects the next doorbells to
 * count from 0 as well.
 */
static void pib_qp_reset_indices(struct pib_qp *qp)
{
	struct pib_wq *wqs[] = { &qp->sq, &qp->rq };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(wqs); i++) {
		pthread_spin_lock(&wqs[i]->lock);
		atomic_store_explicit(&wqs[i]->pi, 0, memory_order_relaxed);
		atomic_store_explicit(&wqs[i]->ci, 0, memory_order_relaxed);
		pthread_spin_unlock(&wqs[i]->lock);
	}
}

int pib_modify_qp(struct ibv_qp *ibvqp, struct ibv_qp_attr *attr,
		  int attr_mask)
{
	struct ibv_modify_qp cmd = {};
	int err;

	err = ibv_cmd_modify_qp(ibvqp, attr, attr_mask, &cmd, sizeof(cmd));
	if (err)
		return err;

	if ((attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) {
		struct pib_qp *qp = to_pib_qp(ibvqp);
		struct pib_cq *scq = ibvqp->send_cq ? to_pib_cq(ibvqp->send_cq) : NULL;
		struct pib_cq *rcq = ibvqp->recv_cq ? to_pib_cq(ibvqp->recv_cq) : NULL;

		/*
		 * The work the reset threw away has no completions left to
		 * poll: its CQEs still unread in the CQs (the flush CQEs of a
		 * QP that was in ERR, typically) go, as on the HCAs whose
		 * providers clean their CQs here.  (An XRC target has no CQ:
		 * a WQE it took from an XRC SRQ completes on the SRQ's CQ,
		 * the SRQ consumer's completion.)
		 */
		if (rcq) {
			pthread_spin_lock(&rcq->lock);
			pib_cq_drop_qp_cqes(rcq, ibvqp->qp_num, qp->srq);
			pthread_spin_unlock(&rcq->lock);
		}
		if (scq && scq != rcq) {
			pthread_spin_lock(&scq->lock);
			pib_cq_drop_qp_cqes(scq, ibvqp->qp_num, NULL);
			pthread_spin_unlock(&scq->lock);
		}
		pib_qp_reset_indices(qp);
	}
	return 0;
}

int pib_query_qp(struct ibv_qp *ibvqp, struct ibv_qp_attr *attr,
		 int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd;
	int err;

	err = ibv_cmd_query_qp(ibvqp, attr, attr_mask, init_attr, &cmd,
			       sizeof(cmd));
	if (err)
		return err;

	/* The rings are the provider's: it knows best what they hold. */
	pib_qp_caps(to_pib_qp(ibvqp), &init_attr->cap);
	attr->cap = init_attr->cap;
	return 0;
}
