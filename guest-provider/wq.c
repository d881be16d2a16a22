// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * wq.c - work queues of the pib provider: the rings of QPs and SRQs, and
 * posting work requests to them (post_send, memory window binds, post_recv).
 *
 * A QP's send and receive queues, and an SRQ, are rings in the provider's
 * memory.  Posting a work request writes a WQE (include/pib_wqe.h: struct
 * pib_send_wqe, pib_ud_wqe, pib_bind_mw_wqe, pib_recv_wqe) into the next free
 * slot; after the last WQE of a list, one write barrier and one doorbell on
 * the context's UAR page (include/pib_hw.h) hand the device the new producer
 * index, and the device fetches the WQEs by DMA.  A slot is free again once a
 * CQE shows that the device is done with it: poll_cq moves the queue's
 * consumer index (qp.c, srq.c).
 *
 * The kernel checks what it passes to the device; the provider checks every
 * work request before writing it, so a bad request fails with an errno and
 * nothing is written, and no WQE ever reaches beyond its slot: a slot holds
 * the 64-byte control segment plus max_sge SGEs or max_inline bytes, and the
 * provider accepts no more than that.  The ibv_qp_ex builders (qp_ex.c) write
 * the same WQEs with the helpers here.
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

/* ---- Rings ------------------------------------------------------------------------------- */

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

	wq->buf_size = (size_t)pib_recv_ring_pages(wq->depth, wq->stride_log,
						   wq->has_dbrec) << PIB_PAGE_SHIFT;
	wq->buf = pib_alloc_ring(&wq->src, wq->buf_size);
	if (!wq->buf) {
		err = errno;
		pthread_spin_destroy(&wq->lock);
		return err;
	}
	if (wq->has_dbrec)
		wq->dbrec = pib_wq_dbrec_of(wq->buf, wq->depth, wq->stride_log);
	return 0;
}

void pib_wq_fini(struct pib_wq *wq)
{
	pib_free_ring(&wq->src, wq->buf, wq->buf_size);
	pthread_spin_destroy(&wq->lock);
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
static_assert((int)IBV_QPT_XRC_SEND == (int)PIB_QPT_XRC_INI, "QP type");
static_assert((int)IBV_QPT_XRC_RECV == (int)PIB_QPT_XRC_TGT, "QP type");

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
	else if (qp->vqp.qp.qp_type == IBV_QPT_XRC_SEND)
		wqe->xrc_srqn = htole32(wr->qp_type.xrc.remote_srqn & PIB_QPN_MASK);

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
 * Tell the device of receive WQEs up to pi.  A ring with a doorbell record
 * has it written there, which costs no exit from the guest: the device reads
 * it when it needs a WQE (pib_wqe.h).  The doorbell is rung only if the device
 * asks for it too (a QP in ERR, which flushes what is posted).  The fences:
 * the WQEs before the index, the index before reading the device's flags.
 */
static void pib_wq_recv_publish(struct pib_context *ctx, struct pib_wq *wq,
				enum pib_uar_offset db, uint32_t obj,
				uint32_t pi)
{
	udma_to_device_barrier();
	if (wq->dbrec) {
		atomic_store_explicit((_Atomic(uint32_t) *)&wq->dbrec->pi,
				      htole32(pi), memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		if (!(le32toh(atomic_load_explicit(
			      (_Atomic(uint32_t) *)&wq->dbrec->flags,
			      memory_order_relaxed)) & PIB_DBREC_F_RING))
			return;
	}
	pib_ring_doorbell(ctx, db, obj, pi);
}

/*
 * Post receive WQEs to an RQ or an SRQ (wq) and tell the device (its record,
 * or doorbell db for object obj, the QPN or SRQN): a 16-byte header and the
 * SGEs per slot.
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
		/* As in post_send: WQEs first, then one record or doorbell. */
		pib_wq_recv_publish(ctx, wq, db, obj, pi);
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
