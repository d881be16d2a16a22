// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * qp.c - queue pairs of the pib provider: sizing and creating their rings,
 * posting work requests (memory window binds among them), and the QPN table
 * that poll_cq retires WQEs through.  The ibv_qp_ex builders, which write the
 * same WQEs with the same helpers, are in qp_ex.c.
 *
 * A QP's send and receive queues are rings in the provider's memory.  Posting
 * a work request writes a WQE (pib_wqe.h) into the next free slot; after the
 * last WQE of a list, one write barrier and one doorbell on the context's UAR
 * page hand the device the new producer index, and the device fetches the
 * WQEs by DMA.  A slot is free again once a CQE shows that the device is done
 * with it: poll_cq moves the queue's consumer index.
 *
 * The kernel checks what it passes to the device; the provider checks every
 * work request before writing it, so a bad request fails with an errno and
 * nothing is written, and no WQE ever reaches beyond its slot: a slot holds
 * the 64-byte control segment plus max_sge SGEs or max_inline bytes, and the
 * provider accepts no more than that.
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
	struct pib_qp *qp;

	pthread_spin_lock(&ctx->qp_table_lock);
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

/* A ring for wq, in the memory of pd's allocator if pd is a parent domain. */
int pib_wq_init(struct pib_wq *wq, struct ibv_pd *pd, uint64_t res_type)
{
	int err;

	wq->src = (struct pib_ring_src){ .pad = to_pib_parent(pd),
					 .res_type = res_type };
	err = pthread_spin_init(&wq->lock, PTHREAD_PROCESS_PRIVATE);
	if (err)
		return err;
	if (!wq->depth)
		return 0;

	wq->buf_size = (size_t)pib_ring_pages(wq->depth, wq->stride_log)
		       << PIB_PAGE_SHIFT;
	wq->buf = pib_alloc_ring(&wq->src, wq->buf_size);
	if (!wq->buf) {
		err = errno;
		pthread_spin_destroy(&wq->lock);
		return err;
	}
	return 0;
}

void pib_wq_fini(struct pib_wq *wq)
{
	pib_free_ring(&wq->src, wq->buf, wq->buf_size);
	pthread_spin_destroy(&wq->lock);
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
 * What create_qp_ex takes: a PD, the extended send interface (ibv_qp_ex) for
 * the operations the QP type carries, no creation flags.
 */
#define PIB_QP_COMP_MASK	(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | \
				 IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
#define PIB_QP_EX_SEND_OPS						       \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |		       \
	 IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE |	       \
	 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |      \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | \
	 IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW)

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
		break;
	default:
		return EOPNOTSUPP;
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd ||
	    !attr->send_cq || !attr->recv_cq)
		return EINVAL;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    !pib_qp_ex_ops_allowed(attr->qp_type, attr->send_ops_flags))
		return EOPNOTSUPP;
	return 0;
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

	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}

	err = pib_qp_size(ctx, &want, !attr->srq, qp);
	if (err)
		goto err_free_qp;
	err = pib_wq_init(&qp->sq, attr->pd, PIB_RES_TYPE_SQ);
	if (err)
		goto err_free_qp;
	err = pib_wq_init(&qp->rq, attr->pd, PIB_RES_TYPE_RQ);
	if (err)
		goto err_fini_sq;

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
	qp->srq = attr->srq ? to_pib_srq(attr->srq) : NULL;
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
		struct pib_cq *scq = to_pib_cq(ibvqp->send_cq);
		struct pib_cq *rcq = to_pib_cq(ibvqp->recv_cq);

		/*
		 * The work the reset threw away has no completions left to
		 * poll: its CQEs still unread in the CQs (the flush CQEs of a
		 * QP that was in ERR, typically) go, as on the HCAs whose
		 * providers clean their CQs here.
		 */
		pthread_spin_lock(&rcq->lock);
		pib_cq_drop_qp_cqes(rcq, ibvqp->qp_num, qp->srq);
		pthread_spin_unlock(&rcq->lock);
		if (scq != rcq) {
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

/* ---- Posting ----------------------------------------------------------------------------- */

void pib_write_sges(struct pib_sge *dst, const struct ibv_sge *src,
		    int num_sge)
{
	int i;

	for (i = 0; i < num_sge; i++)
		dst[i] = (struct pib_sge){
			.addr = htole64(src[i].addr),
			.length = htole32(src[i].length),
			.lkey = htole32(src[i].lkey),
		};
}

/* The QP types are the verbs values, which pib_wqe_opcode_allowed() takes. */
static_assert((int)IBV_QPT_RC == (int)PIB_QPT_RC, "QP type");
static_assert((int)IBV_QPT_UC == (int)PIB_QPT_UC, "QP type");
static_assert((int)IBV_QPT_UD == (int)PIB_QPT_UD, "QP type");

/* The device opcode for a work request, or -1 for one it has no WQE for. */
static int pib_wqe_opcode_of(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:			return PIB_WQE_SEND;
	case IBV_WR_SEND_WITH_IMM:		return PIB_WQE_SEND_IMM;
	case IBV_WR_SEND_WITH_INV:		return PIB_WQE_SEND_INV;
	case IBV_WR_RDMA_WRITE:			return PIB_WQE_RDMA_WRITE;
	case IBV_WR_RDMA_WRITE_WITH_IMM:	return PIB_WQE_RDMA_WRITE_IMM;
	case IBV_WR_RDMA_READ:			return PIB_WQE_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:		return PIB_WQE_ATOMIC_CS;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:	return PIB_WQE_ATOMIC_FA;
	case IBV_WR_LOCAL_INV:			return PIB_WQE_LOCAL_INV;
	case IBV_WR_BIND_MW:			return PIB_WQE_BIND_MW;
	default:				return -1;
	}
}

/*
 * ... and -1 too for one the QP type does not carry (pib_wqe.h,
 * pib_wqe_opcode_allowed()).
 */
static int pib_wqe_opcode(enum ibv_qp_type qp_type, enum ibv_wr_opcode op)
{
	int opcode = pib_wqe_opcode_of(op);

	return opcode >= 0 && pib_wqe_opcode_allowed(qp_type, opcode) ?
		       opcode : -1;
}

/* A window's access is verbs' bits; the device's are the same numbers. */
static_assert(IBV_ACCESS_REMOTE_WRITE == PIB_ACCESS_REMOTE_WRITE, "access");
static_assert(IBV_ACCESS_REMOTE_READ == PIB_ACCESS_REMOTE_READ, "access");
static_assert(IBV_ACCESS_REMOTE_ATOMIC == PIB_ACCESS_REMOTE_ATOMIC, "access");
#define PIB_MW_ACCESS_REMOTE                                                   \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |                    \
	 IBV_ACCESS_REMOTE_ATOMIC)

/*
 * A window bind: the window and the new key's shape are checked here; what
 * depends on the device's tables (the PDs, the MR's rights and range, a type
 * 2 window being unbound) the device checks, and a failure completes with
 * IBV_WC_MW_BIND_ERR, as IB specifies.
 */
int pib_check_bind(const struct ibv_mw *mw, uint32_t rkey,
		   const struct ibv_mw_bind_info *bind)
{
	if (!mw || (mw->type != IBV_MW_TYPE_1 && mw->type != IBV_MW_TYPE_2))
		return EINVAL;
	/* The new key keeps the window's index; only the key byte changes. */
	if ((rkey ^ mw->rkey) & ~0xffu)
		return EINVAL;
	/*
	 * A window grants remote rights only; LOCAL_WRITE and MW_BIND, which
	 * callers often pass along with the MR's flags, are the MR's business
	 * and are ignored (the device checks the MR: pib_wqe.h, BIND_MW).
	 * Zero-based windows are not implemented.
	 */
	if (bind->mw_access_flags & ~(PIB_MW_ACCESS_REMOTE |
				      IBV_ACCESS_LOCAL_WRITE |
				      IBV_ACCESS_MW_BIND))
		return EINVAL;
	/* No MR means unbinding, which names no range. */
	if (!bind->mr && (bind->addr || bind->length))
		return EINVAL;
	return 0;
}

/*
 * Check a send work request against what the QP's slots and the device
 * allow.  Sets *opcode and, for an inline request, *inline_len.
 */
static int pib_check_send_wr(struct pib_qp *qp, const struct ibv_send_wr *wr,
			     int *opcode, uint32_t *inline_len)
{
	uint32_t len = 0;
	int i;

	*opcode = pib_wqe_opcode(qp->vqp.qp.qp_type, wr->opcode);
	if (*opcode < 0 || wr->send_flags & ~PIB_SEND_FLAGS_SUPPORTED)
		return EINVAL;

	/* The local operations carry no data: their SGE list is ignored. */
	switch (*opcode) {
	case PIB_WQE_BIND_MW:
		if (wr->send_flags & IBV_SEND_INLINE)
			return EINVAL;
		return pib_check_bind(wr->bind_mw.mw, wr->bind_mw.rkey,
				      &wr->bind_mw.bind_info);
	case PIB_WQE_LOCAL_INV:
		return wr->send_flags & IBV_SEND_INLINE ? EINVAL : 0;
	}

	if (wr->num_sge < 0)
		return EINVAL;
	if (qp->vqp.qp.qp_type == IBV_QPT_UD &&
	    (!wr->wr.ud.ah || wr->wr.ud.remote_qpn > PIB_DB_OBJ_MASK))
		return EINVAL;

	if (!(wr->send_flags & IBV_SEND_INLINE))
		return (uint32_t)wr->num_sge > qp->sq.max_sge ? EINVAL : 0;

	/* Inline: only payload the requester sends, and only what fits. */
	if (!pib_wqe_inline_allowed(*opcode))
		return EINVAL;
	for (i = 0; i < wr->num_sge; i++) {
		if (wr->sg_list[i].length > qp->max_inline - len)
			return EINVAL;
		len += wr->sg_list[i].length;
	}
	*inline_len = len;
	return 0;
}

uint8_t pib_wqe_flags(const struct pib_qp *qp, unsigned int send_flags)
{
	uint8_t flags = 0;

	if ((send_flags & IBV_SEND_SIGNALED) || qp->sq_sig_all)
		flags |= PIB_WQE_F_SIGNALED;
	if (send_flags & IBV_SEND_SOLICITED)
		flags |= PIB_WQE_F_SOLICITED;
	if (send_flags & IBV_SEND_FENCE)
		flags |= PIB_WQE_F_FENCE;
	if (send_flags & IBV_SEND_INLINE)
		flags |= PIB_WQE_F_INLINE;
	return flags;
}

/* A BIND_MW WQE: the 64-byte struct pib_bind_mw_wqe, no SGEs. */
void pib_write_bind_wqe(struct pib_qp *qp, void *slot,
			unsigned int send_flags, uint64_t wr_id,
			const struct ibv_mw *mw, uint32_t rkey,
			const struct ibv_mw_bind_info *bind)
{
	struct pib_bind_mw_wqe *wqe = slot;

	*wqe = (struct pib_bind_mw_wqe){
		.opcode = PIB_WQE_BIND_MW,
		.flags = pib_wqe_flags(qp, send_flags),
		.mw_type = mw->type,
		.new_rkey = htole32(rkey),
		.wr_id = htole64(wr_id),
		.addr = htole64(bind->addr),
		.length = htole64(bind->length),
		.mw_rkey = htole32(mw->rkey),
		.mr_lkey = htole32(bind->mr ? bind->mr->lkey : 0),
		.access = htole32(bind->mw_access_flags & PIB_MW_ACCESS_REMOTE),
	};
}

/* A UD send's destination: from the address handle, plus the QPN and Q_Key. */
void pib_write_ud_dest(struct pib_send_wqe *wqe, struct ibv_ah *ibvah,
		       uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct pib_ah *ah = to_pib_ah(ibvah);

	wqe->ud_qpn = htole32(remote_qpn);
	wqe->ud_qkey = htole32(remote_qkey);
	wqe->ud_dlid = htole16(ah->dlid);
	wqe->ud_sl = ah->sl;
	if (ah->is_global) {
		/* The GRH half of the address vector (struct pib_ud_wqe). */
		struct pib_ud_wqe *ud = (struct pib_ud_wqe *)wqe;

		ud->av_flags = PIB_UD_AV_F_GRH;
		ud->flow_label = htole32(ah->grh.flow_label & PIB_FLOW_LABEL_MASK);
		ud->traffic_class = ah->grh.traffic_class;
		ud->hop_limit = ah->grh.hop_limit;
		ud->sgid_index = ah->grh.sgid_index;
		memcpy(ud->dgid, ah->grh.dgid.raw, sizeof(ud->dgid));
	}
}

static void pib_write_send_wqe(struct pib_qp *qp, const struct ibv_send_wr *wr,
			       int opcode, uint32_t inline_len, void *slot)
{
	struct pib_send_wqe *wqe = slot;
	uint8_t *payload = (uint8_t *)slot + sizeof(*wqe);
	bool is_inline = wr->send_flags & IBV_SEND_INLINE;
	bool has_data = opcode != PIB_WQE_LOCAL_INV;
	int i;

	/* Every byte of the control segment, so no stale field survives. */
	*wqe = (struct pib_send_wqe){
		.opcode = opcode,
		.flags = pib_wqe_flags(qp, wr->send_flags),
		.num_sge = is_inline || !has_data ? 0 : wr->num_sge,
		.wr_id = htole64(wr->wr_id),
		.inline_len = htole32(is_inline ? inline_len : 0),
	};

	switch (opcode) {
	case PIB_WQE_SEND_IMM:
	case PIB_WQE_RDMA_WRITE_IMM:
		/* Immediate data is in network order already, as on the wire. */
		wqe->imm_inv = (uint32_t)wr->imm_data;
		break;
	case PIB_WQE_SEND_INV:
	case PIB_WQE_LOCAL_INV:
		wqe->imm_inv = htole32(wr->invalidate_rkey);
		break;
	}

	switch (opcode) {
	case PIB_WQE_RDMA_WRITE:
	case PIB_WQE_RDMA_WRITE_IMM:
	case PIB_WQE_RDMA_READ:
		wqe->remote_addr = htole64(wr->wr.rdma.remote_addr);
		wqe->rkey = htole32(wr->wr.rdma.rkey);
		break;
	case PIB_WQE_ATOMIC_CS:
	case PIB_WQE_ATOMIC_FA:
		wqe->remote_addr = htole64(wr->wr.atomic.remote_addr);
		wqe->rkey = htole32(wr->wr.atomic.rkey);
		wqe->compare_add = htole64(wr->wr.atomic.compare_add);
		wqe->swap = htole64(wr->wr.atomic.swap);
		break;
	}

	if (qp->vqp.qp.qp_type == IBV_QPT_UD)
		pib_write_ud_dest(wqe, wr->wr.ud.ah, wr->wr.ud.remote_qpn,
				  wr->wr.ud.remote_qkey);

	if (!has_data)
		return;
	if (!is_inline) {
		pib_write_sges((struct pib_sge *)payload, wr->sg_list,
			       wr->num_sge);
		return;
	}
	for (i = 0; i < wr->num_sge; i++) {
		memcpy(payload, (void *)(uintptr_t)wr->sg_list[i].addr,
		       wr->sg_list[i].length);
		payload += wr->sg_list[i].length;
	}
}

/*
 * Hand the device the WQEs in [first, pi), with the SQ lock held.  The device
 * may fetch every WQE before pi as soon as it sees the doorbell, so they must
 * be in memory first.  One barrier and one doorbell cover the whole list: the
 * producer index is cumulative, and a doorbell, an uncached write across PCIe
 * (in QEMU, an exit to the device model), is the costliest step of posting.
 */
void pib_sq_publish(struct pib_context *ctx, struct pib_qp *qp,
		    uint32_t first, uint32_t pi)
{
	if (pi == first)
		return;
	atomic_store_explicit(&qp->sq.pi, pi, memory_order_relaxed);
	udma_to_device_barrier();
	pib_ring_doorbell(ctx, PIB_UAR_SQ_DB, qp->vqp.qp.qp_num, pi);
}

int pib_post_send(struct ibv_qp *ibvqp, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad_wr)
{
	struct pib_context *ctx = to_pib_context(ibvqp->context);
	struct pib_qp *qp = to_pib_qp(ibvqp);
	struct pib_wq *sq = &qp->sq;
	uint32_t pi, ci, first;
	uint32_t inline_len;
	int opcode;
	int err = 0;

	pthread_spin_lock(&sq->lock);
	first = pi = atomic_load_explicit(&sq->pi, memory_order_relaxed);
	ci = atomic_load_explicit(&sq->ci, memory_order_acquire);

	/* A QP in RESET takes no work requests (IBTA 10.3.1). */
	if (ibvqp->state == IBV_QPS_RESET)
		err = EINVAL;
	for (; wr && !err; wr = wr->next) {
		if (pib_wq_full(sq, pi, &ci)) {
			err = ENOMEM;
			break;
		}
		inline_len = 0;
		err = pib_check_send_wr(qp, wr, &opcode, &inline_len);
		if (err)
			break;
		if (opcode == PIB_WQE_BIND_MW)
			pib_write_bind_wqe(qp, pib_wq_slot(sq, pi),
					   wr->send_flags, wr->wr_id,
					   wr->bind_mw.mw, wr->bind_mw.rkey,
					   &wr->bind_mw.bind_info);
		else
			pib_write_send_wqe(qp, wr, opcode, inline_len,
					   pib_wq_slot(sq, pi));
		pi++;
	}

	pib_sq_publish(ctx, qp, first, pi);
	pthread_spin_unlock(&sq->lock);

	if (err)
		*bad_wr = wr;
	return err;
}

/*
 * Bind a type 1 window (ibv_bind_mw; libibverbs has checked the type and the
 * PD): the same BIND_MW WQE a type 2 bind posts, with the next key byte.  The
 * window's rkey is the new one as soon as the WQE is posted, as the verb
 * promises.  If the bind fails, its completion says so (IBV_WC_MW_BIND_ERR),
 * the device leaves the window under its old key, and the caller restores
 * that key (ibv_bind_mw(3)).
 */
int pib_bind_mw(struct ibv_qp *ibvqp, struct ibv_mw *mw,
		struct ibv_mw_bind *mw_bind)
{
	struct ibv_send_wr wr = {
		.wr_id = mw_bind->wr_id,
		.opcode = IBV_WR_BIND_MW,
		.send_flags = mw_bind->send_flags,
		.bind_mw = {
			.mw = mw,
			.rkey = ibv_inc_rkey(mw->rkey),
			.bind_info = mw_bind->bind_info,
		},
	};
	struct ibv_send_wr *bad_wr;
	int err;

	err = pib_post_send(ibvqp, &wr, &bad_wr);
	if (err)
		return err;

	mw->rkey = wr.bind_mw.rkey;
	return 0;
}

/*
 * Post receive WQEs to an RQ or an SRQ (wq) and ring its doorbell (db, for
 * object obj, the QPN or SRQN): a 16-byte header and the SGEs per slot.
 */
int pib_wq_post_recv(struct pib_context *ctx, struct pib_wq *wq,
		     enum pib_uar_offset db, uint32_t obj,
		     struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct pib_recv_wqe *wqe;
	uint32_t pi, ci, first;
	int err = 0;

	pthread_spin_lock(&wq->lock);
	first = pi = atomic_load_explicit(&wq->pi, memory_order_relaxed);
	ci = atomic_load_explicit(&wq->ci, memory_order_acquire);

	for (; wr; wr = wr->next) {
		if (pib_wq_full(wq, pi, &ci)) {
			err = ENOMEM;
			break;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > wq->max_sge) {
			err = EINVAL;
			break;
		}
		wqe = pib_wq_slot(wq, pi);
		*wqe = (struct pib_recv_wqe){
			.wr_id = htole64(wr->wr_id),
			.num_sge = wr->num_sge,
		};
		pib_write_sges((struct pib_sge *)(wqe + 1), wr->sg_list,
			       wr->num_sge);
		pi++;
	}

	if (pi != first) {
		atomic_store_explicit(&wq->pi, pi, memory_order_relaxed);
		/* As in post_send: WQEs first, then one doorbell for all. */
		udma_to_device_barrier();
		pib_ring_doorbell(ctx, db, obj, pi);
	}
	pthread_spin_unlock(&wq->lock);

	if (err)
		*bad_wr = wr;
	return err;
}

int pib_post_recv(struct ibv_qp *ibvqp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr)
{
	struct pib_qp *qp = to_pib_qp(ibvqp);

	/*
	 * A QP on an SRQ has no receive queue of its own, and a QP in RESET
	 * takes no work requests (IBTA 10.3.1).
	 */
	if (!qp->rq.depth || ibvqp->state == IBV_QPS_RESET) {
		*bad_wr = wr;
		return EINVAL;
	}

	return pib_wq_post_recv(to_pib_context(ibvqp->context), &qp->rq,
				PIB_UAR_RQ_DB, ibvqp->qp_num, wr, bad_wr);
}
