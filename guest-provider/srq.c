// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * srq.c - shared receive queues of the pib provider.
 *
 * An SRQ is a ring of receive WQEs in the provider's memory, laid out like a
 * QP's RQ (pib_wqe.h: a 16-byte header and the SGEs per slot), that any QP
 * created on it takes from.  Posting is the RQ's: write the WQEs, one write
 * barrier, one SRQ doorbell (SRQN and producer index) on the context's UAR
 * page.
 *
 * The device takes SRQ WQEs in ring order and copies each one as it takes it
 * (docs/reference/hardware.md, "Shared receive queues"), so every receive completion of
 * a QP on the SRQ stands for one slot the device no longer needs, whichever
 * QP and CQ it comes from: poll_cq retires one slot per completion
 * (pib_srq_retire), and destroy_qp retires those of the completions it
 * leaves behind in the CQ (pib_cq_drop_qp_cqes).
 *
 * An XRC SRQ (ibv_create_srq_ex, IBV_SRQT_XRC) is the same ring in an XRC
 * domain, with a CQ of its own: the XRC target QPs of the domain take its WQEs
 * for the requests that name its number (ibv_get_srq_num) and complete them on
 * that CQ, naming the SRQ (PIB_CQE_F_XRC), which poll_cq finds in the
 * context's SRQN table to retire the slot.
 *
 * The limit (low watermark) is armed at create time through the core
 * command's srq_limit or later with modify_srq; the event arrives through the
 * kernel's async event queue, as for every affiliated event.
 */
#include <errno.h>
#include <stdlib.h>

#include <ccan/minmax.h>
#include <util/util.h>

#include "pib.h"
#include "verbs.h"

/* The depth for max_wr WRs (pib.h, struct pib_srq, says why); 0: too many. */
static uint32_t pib_srq_depth(struct pib_context *ctx, uint32_t max_wr)
{
	uint32_t max_depth = min_t(uint32_t, ctx->max_srq_wr, PIB_WQ_DEPTH_MAX);
	uint32_t depth;

	if (max_wr > max_depth)
		return 0;
	depth = roundup_pow_of_two((uint64_t)max_wr + 1);
	if (depth > max_depth)
		depth = roundup_pow_of_two(max_t(uint32_t, max_wr, 1));
	return depth > max_depth ? 0 : depth;
}

/*
 * The ring for the attributes asked for: depth and stride (pib.h, struct
 * pib_srq, says why one slot more than max_wr).  A limit the device would
 * refuse (limit >= depth) is refused here, before any memory is pinned.
 */
static int pib_srq_size(struct pib_context *ctx,
			const struct ibv_srq_attr *attr, struct pib_wq *wq)
{
	uint32_t max_depth = min_t(uint32_t, ctx->max_srq_wr, PIB_WQ_DEPTH_MAX);

	if (attr->max_wr > max_depth || attr->max_sge > ctx->max_srq_sge)
		return EINVAL;

	wq->depth = pib_srq_depth(ctx, attr->max_wr);
	if (!wq->depth || attr->srq_limit >= wq->depth)
		return EINVAL;

	wq->stride_log = pib_stride_log(pib_recv_slot_bytes(attr->max_sge),
					PIB_RQ_STRIDE_LOG_MIN);
	if (wq->stride_log > PIB_STRIDE_LOG_MAX)
		return EINVAL;
	wq->max_sge = min_t(uint32_t, ctx->max_srq_sge,
			    pib_recv_max_sge(wq->stride_log));
	return 0;
}

/*
 * The SRQN table of XRC SRQs (pib_context.xsrq_table): an XRC target's receive
 * completion names the SRQ (PIB_CQE_F_XRC), not a QP of this process.
 */
int pib_srq_table_init(struct pib_context *ctx)
{
	ctx->xsrq_table = calloc((size_t)ctx->max_srq + 1, sizeof(*ctx->xsrq_table));
	return ctx->xsrq_table ? 0 : ENOMEM;
}

void pib_srq_table_fini(struct pib_context *ctx)
{
	free(ctx->xsrq_table);
	ctx->xsrq_table = NULL;
}

/* Called with qp_table_lock held. */
struct pib_srq *pib_xsrq_lookup(struct pib_context *ctx, uint32_t srqn)
{
	return srqn <= ctx->max_srq ? ctx->xsrq_table[srqn] : NULL;
}

static void pib_xsrq_set(struct pib_context *ctx, uint32_t srqn,
			 struct pib_srq *srq)
{
	pthread_spin_lock(&ctx->qp_table_lock);
	ctx->xsrq_table[srqn] = srq;
	pthread_spin_unlock(&ctx->qp_table_lock);
}

/*
 * A plain SRQ (ibv_create_srq), or an XRC SRQ (ibv_create_srq_ex with
 * IBV_SRQT_XRC: a domain and a CQ, which travel in the core command).  The
 * ring and the driver's request are the same for both.
 */
static struct ibv_srq *pib_srq_create(struct ibv_context *ibvctx,
				      struct ibv_srq_init_attr_ex *attr)
{
	struct pib_context *ctx = to_pib_context(ibvctx);
	bool xrc = attr->srq_type == IBV_SRQT_XRC;
	struct pib_create_srq_resp resp = {};
	struct pib_create_xsrq xcmd = {};
	struct pib_create_srq cmd = {};
	struct pib_ibv_create_srq *req = xrc ? &xcmd.drv_payload : &cmd.drv_payload;
	struct pib_srq *srq;
	int err;

	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}

	err = pib_srq_size(ctx, &attr->attr, &srq->wq);
	if (err)
		goto err_free_srq;
	srq->wq.has_dbrec = ctx->recv_dbrec;
	err = pib_wq_init(&srq->wq, attr->pd, PIB_RES_TYPE_SRQ);
	if (err)
		goto err_free_srq;
	if (srq->wq.has_dbrec)
		req->comp_mask |= PIB_IBV_CREATE_SRQ_MASK_DBREC;

	/* max_wr, max_sge and srq_limit travel in the core command. */
	req->stride_log = srq->wq.stride_log;
	req->buf_addr = (uintptr_t)srq->wq.buf;
	req->depth = srq->wq.depth;
	req->buf_size = srq->wq.buf_size;
	if (xrc)
		err = ibv_cmd_create_srq_ex(ibvctx, &srq->vsrq, attr, &xcmd.ibv_cmd,
					    sizeof(xcmd), &resp.ibv_resp, sizeof(resp));
	else
		err = ibv_cmd_create_srq(attr->pd, &srq->vsrq.srq,
					 (struct ibv_srq_init_attr *)attr, &cmd.ibv_cmd,
					 sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (err) {
		verbs_err(&ctx->ibvctx, "Failed to create SRQ: %d\n", err);
		goto err_fini_wq;
	}

	/* An XRC SRQ's number is the SRQN the driver answered (the device's). */
	if (resp.srqn > PIB_DB_OBJ_MASK ||
	    (xrc && (resp.srqn != srq->vsrq.srq_num || resp.srqn > ctx->max_srq))) {
		verbs_err(&ctx->ibvctx, "Kernel answered SRQN %u (srq_num %u)\n",
			  resp.srqn, srq->vsrq.srq_num);
		err = EPROTO;
		goto err_destroy_srq;
	}
	srq->srqn = resp.srqn;
	if (xrc)
		pib_xsrq_set(ctx, srq->srqn, srq);

	/* What the ring really holds, not the kernel's echo of the request. */
	attr->attr.max_wr = srq->wq.depth;
	attr->attr.max_sge = srq->wq.max_sge;

	return &srq->vsrq.srq;

err_destroy_srq:
	ibv_cmd_destroy_srq(&srq->vsrq.srq);
err_fini_wq:
	pib_wq_fini(&srq->wq);
err_free_srq:
	free(srq);
	errno = err;
	return NULL;
}

struct ibv_srq *pib_create_srq(struct ibv_pd *ibvpd,
			       struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ex = {
		.srq_context = attr->srq_context,
		.attr = attr->attr,
		.comp_mask = IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_BASIC,
		.pd = ibvpd,
	};
	struct ibv_srq *srq = pib_srq_create(ibvpd->context, &ex);

	if (srq)
		attr->attr = ex.attr;
	return srq;
}

/* Plain and XRC SRQs; no tag-matching ones. */
struct ibv_srq *pib_create_srq_ex(struct ibv_context *ibvctx,
				  struct ibv_srq_init_attr_ex *attr)
{
	uint32_t mask = attr->comp_mask;
	bool xrc = (mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type == IBV_SRQT_XRC;

	if ((mask & ~(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE |
		      IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ)) ||
	    ((mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC && !xrc)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
	    (xrc && (!(mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd ||
		     !(mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq))) {
		errno = EINVAL;
		return NULL;
	}
	if (!xrc)
		attr->srq_type = IBV_SRQT_BASIC;
	return pib_srq_create(ibvctx, attr);
}

int pib_get_srq_num(struct ibv_srq *ibvsrq, uint32_t *srq_num)
{
	struct pib_srq *srq = to_pib_srq(ibvsrq);

	if (srq->vsrq.srq_type != IBV_SRQT_XRC)
		return EOPNOTSUPP;
	*srq_num = srq->srqn;
	return 0;
}

int pib_destroy_srq(struct ibv_srq *ibvsrq)
{
	struct pib_context *ctx = to_pib_context(ibvsrq->context);
	struct pib_srq *srq = to_pib_srq(ibvsrq);
	int err;

	/*
	 * The kernel refuses (EBUSY) while a QP uses the SRQ, so no QP, and
	 * so no poll_cq, can reach the SRQ once this succeeds.  An XRC SRQ's
	 * completions name it by number: it leaves the table first.
	 */
	err = ibv_cmd_destroy_srq(ibvsrq);
	if (err)
		return err;
	if (srq->vsrq.srq_type == IBV_SRQT_XRC)
		pib_xsrq_set(ctx, srq->srqn, NULL);

	pib_wq_fini(&srq->wq);
	free(srq);
	return 0;
}

/*
 * Resize (IBV_SRQ_MAX_WR): a new ring of the same stride, into which the WQEs
 * posted and not yet retired are copied, each to its index's slot, before the
 * device is told (MODIFY_SRQ's MAX_WR, pib_hw.h): the device takes from the
 * new ring from then on, indices carrying on, so nothing is lost.  Posting
 * waits (the SRQ's lock); poll_cq may retire slots meanwhile, which only means
 * a few copied WQEs were already taken.  The new ring must hold every WQE
 * outstanding, and an armed limit must stay below its depth.
 */
static int pib_srq_resize(struct pib_srq *srq, struct ibv_srq_attr *attr,
			  int attr_mask)
{
	struct pib_context *ctx = to_pib_context(srq->vsrq.srq.context);
	struct pib_wq *wq = &srq->wq;
	struct pib_ring_src src = wq->src;
	struct pib_modify_srq cmd = {};
	uint32_t depth, stride = 1u << wq->stride_log, i, pi;
	size_t size;
	void *buf;
	int err;

	depth = pib_srq_depth(ctx, attr->max_wr);
	if (!depth || ((attr_mask & IBV_SRQ_LIMIT) && attr->srq_limit >= depth))
		return EINVAL;
	size = (size_t)pib_recv_ring_pages(depth, wq->stride_log, wq->has_dbrec)
	       << PIB_PAGE_SHIFT;
	buf = pib_alloc_ring(&src, size);
	if (!buf)
		return errno;

	pthread_spin_lock(&wq->lock);
	pi = atomic_load_explicit(&wq->pi, memory_order_relaxed);
	i = atomic_load_explicit(&wq->ci, memory_order_acquire);
	if (pi - i > depth) {
		err = EINVAL;
		goto out;
	}
	for (; i != pi; i++)
		memcpy((uint8_t *)buf + (i & (depth - 1)) * stride,
		       (uint8_t *)wq->buf + (i & (wq->depth - 1)) * stride, stride);
	/* The device reads the new ring's record from the command on. */
	if (wq->has_dbrec)
		pib_wq_dbrec_of(buf, depth, wq->stride_log)->pi = htole32(pi);
	cmd.depth = depth;
	cmd.buf_addr = (uintptr_t)buf;
	cmd.buf_size = size;
	err = ibv_cmd_modify_srq(&srq->vsrq.srq, attr, attr_mask, &cmd.ibv_cmd,
				 sizeof(cmd));
	if (!err) {
		/* The new ring in, the old one out (freed below). */
		struct pib_ring_src old_src = wq->src;
		void *old_buf = wq->buf;
		size_t old_size = wq->buf_size;

		wq->buf = buf;
		wq->buf_size = size;
		if (wq->has_dbrec)
			wq->dbrec = pib_wq_dbrec_of(buf, depth, wq->stride_log);
		wq->src = src;
		wq->depth = depth;
		buf = old_buf;
		size = old_size;
		src = old_src;
	}
out:
	pthread_spin_unlock(&wq->lock);
	pib_free_ring(&src, buf, size);
	return err;
}

int pib_modify_srq(struct ibv_srq *ibvsrq, struct ibv_srq_attr *attr,
		   int attr_mask)
{
	struct pib_srq *srq = to_pib_srq(ibvsrq);
	struct ibv_modify_srq cmd;

	if (attr_mask & ~(IBV_SRQ_LIMIT | IBV_SRQ_MAX_WR))
		return EINVAL;
	if (attr_mask & IBV_SRQ_MAX_WR)
		return pib_srq_resize(srq, attr, attr_mask);
	if ((attr_mask & IBV_SRQ_LIMIT) && attr->srq_limit >= srq->wq.depth)
		return EINVAL;

	return ibv_cmd_modify_srq(ibvsrq, attr, attr_mask, &cmd, sizeof(cmd));
}

int pib_query_srq(struct ibv_srq *ibvsrq, struct ibv_srq_attr *attr)
{
	struct pib_srq *srq = to_pib_srq(ibvsrq);
	struct ibv_query_srq cmd;
	int err;

	/* The kernel knows the limit, which the device disarms by itself. */
	err = ibv_cmd_query_srq(ibvsrq, attr, &cmd, sizeof(cmd));
	if (err)
		return err;

	/* The ring is the provider's: it knows best what it holds. */
	attr->max_wr = srq->wq.depth;
	attr->max_sge = srq->wq.max_sge;
	return 0;
}

int pib_post_srq_recv(struct ibv_srq *ibvsrq, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	struct pib_srq *srq = to_pib_srq(ibvsrq);

	return pib_wq_post_recv(to_pib_context(ibvsrq->context), &srq->wq,
				PIB_UAR_SRQ_DB, srq->srqn, wr, bad_wr);
}

/*
 * One receive completion of a QP on the SRQ: one more slot free.  Several CQs
 * may be polled at once, so the increment is a compare-and-swap; it never
 * passes the producer index (a completion with nothing posted would be a
 * device bug, and must not make the ring look more than empty).
 */
void pib_srq_retire(struct pib_srq *srq)
{
	struct pib_wq *wq = &srq->wq;
	uint32_t ci = atomic_load_explicit(&wq->ci, memory_order_relaxed);

	/* Release: the slot may be rewritten once the poster sees it. */
	do {
		if (ci == atomic_load_explicit(&wq->pi, memory_order_relaxed))
			return;
	} while (!atomic_compare_exchange_weak_explicit(&wq->ci, &ci, ci + 1,
							 memory_order_release,
							 memory_order_relaxed));
}
