// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * qp_ex.c - the extended send interface of the pib provider (ibv_qp_ex): the
 * ibv_wr_start() / ibv_wr_<op>() / ibv_wr_set_*() / ibv_wr_complete() builders.
 *
 * They write the same WQEs as post_send (wq.c), with the same helpers: the
 * formats are struct pib_send_wqe, pib_ud_wqe and pib_bind_mw_wqe in
 * include/pib_wqe.h, and the doorbell is the SQ_DB of include/pib_hw.h.
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

/* ---- The extended send interface (ibv_qp_ex) ---------------------------------------------
 *
 * ibv_wr_start() takes the SQ lock; each ibv_wr_<op>() writes the control segment of the next
 * WQE straight into its ring slot, and the setters (ibv_wr_set_sge*, ibv_wr_set_inline_data*,
 * ibv_wr_set_ud_addr) fill in the rest of that same WQE; ibv_wr_complete() hands the device all
 * of them with one barrier and one doorbell, as post_send does, and ibv_wr_abort() forgets
 * them: the producer index moves only at complete, so the device never sees an aborted WQE.
 * The WQEs are the ones post_send writes (pib_wqe.h); nothing here enters the kernel.
 *
 * A request that post_send would refuse (an opcode the QP type does not carry, too many SGEs,
 * too much inline data, a full ring) marks the batch bad: the rest of it is ignored, and
 * ibv_wr_complete() returns the error and posts nothing.
 */

/* The WQE opcode of each IBV_QP_EX_WITH_* operation. */
static const struct {
	uint64_t op;
	uint8_t opcode;
} pib_qp_ex_ops[] = {
	{ IBV_QP_EX_WITH_SEND, PIB_WQE_SEND },
	{ IBV_QP_EX_WITH_SEND_WITH_IMM, PIB_WQE_SEND_IMM },
	{ IBV_QP_EX_WITH_SEND_WITH_INV, PIB_WQE_SEND_INV },
	{ IBV_QP_EX_WITH_RDMA_WRITE, PIB_WQE_RDMA_WRITE },
	{ IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, PIB_WQE_RDMA_WRITE_IMM },
	{ IBV_QP_EX_WITH_RDMA_READ, PIB_WQE_RDMA_READ },
	{ IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, PIB_WQE_ATOMIC_CS },
	{ IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, PIB_WQE_ATOMIC_FA },
	{ IBV_QP_EX_WITH_LOCAL_INV, PIB_WQE_LOCAL_INV },
	{ IBV_QP_EX_WITH_BIND_MW, PIB_WQE_BIND_MW },
	{ IBV_QP_EX_WITH_ATOMIC_WRITE, PIB_WQE_ATOMIC_WRITE },
	{ IBV_QP_EX_WITH_FLUSH, PIB_WQE_FLUSH },
};

/* May a QP of this type be created with these send_ops_flags? */
bool pib_qp_ex_ops_allowed(enum ibv_qp_type qp_type, uint64_t ops)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(pib_qp_ex_ops); i++) {
		if (!(ops & pib_qp_ex_ops[i].op))
			continue;
		if (!pib_wqe_opcode_allowed(qp_type, pib_qp_ex_ops[i].opcode))
			return false;
		ops &= ~pib_qp_ex_ops[i].op;
	}
	return ops == 0;
}

static struct pib_qp *pib_qp_of_ex(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct pib_qp, vqp.qp_ex);
}

static void pib_wr_start(struct ibv_qp_ex *qpx)
{
	struct pib_qp *qp = pib_qp_of_ex(qpx);

	pthread_spin_lock(&qp->sq.lock);
	qp->ex.first = qp->ex.pi = atomic_load_explicit(&qp->sq.pi,
							memory_order_relaxed);
	qp->ex.ci = atomic_load_explicit(&qp->sq.ci, memory_order_acquire);
	/* A QP in RESET takes no work requests (IBTA 10.3.1): the batch is refused. */
	qp->ex.err = qp->vqp.qp.state == IBV_QPS_RESET ? EINVAL : 0;
	qp->ex.wqe = NULL;
}

static int pib_wr_complete(struct ibv_qp_ex *qpx)
{
	struct pib_qp *qp = pib_qp_of_ex(qpx);
	int err = qp->ex.err;

	if (!err)
		pib_sq_publish(to_pib_context(qp->vqp.qp.context), qp,
			       qp->ex.first, qp->ex.pi);
	qp->ex.wqe = NULL;
	pthread_spin_unlock(&qp->sq.lock);
	return err;
}

static void pib_wr_abort(struct ibv_qp_ex *qpx)
{
	struct pib_qp *qp = pib_qp_of_ex(qpx);

	qp->ex.wqe = NULL;
	pthread_spin_unlock(&qp->sq.lock);
}

/* The batch is bad from here on: its error is ibv_wr_complete()'s answer. */
static void pib_wr_fail(struct pib_qp *qp, int err)
{
	if (!qp->ex.err)
		qp->ex.err = err;
	qp->ex.wqe = NULL;
}

/*
 * The next WQE of the batch, its control segment written: the opcode, the
 * flags (IBV_SEND_INLINE is the setters' business) and wr_id.  NULL when the
 * batch is bad, or becomes bad here.
 */
static struct pib_send_wqe *pib_wr_begin(struct ibv_qp_ex *qpx, uint8_t opcode)
{
	struct pib_qp *qp = pib_qp_of_ex(qpx);
	struct pib_send_wqe *wqe;

	if (qp->ex.err)
		return NULL;
	if (!pib_wqe_opcode_allowed(qp->vqp.qp.qp_type, opcode) ||
	    qpx->wr_flags & ~PIB_SEND_FLAGS_SUPPORTED) {
		pib_wr_fail(qp, EINVAL);
		return NULL;
	}
	if (pib_wq_full(&qp->sq, qp->ex.pi, &qp->ex.ci)) {
		pib_wr_fail(qp, ENOMEM);
		return NULL;
	}
	wqe = pib_wq_slot(&qp->sq, qp->ex.pi++);
	*wqe = (struct pib_send_wqe){
		.opcode = opcode,
		.flags = pib_wqe_flags(qp, qpx->wr_flags & ~IBV_SEND_INLINE),
		.wr_id = htole64(qpx->wr_id),
	};
	qp->ex.wqe = wqe;
	return wqe;
}

static void pib_wr_send(struct ibv_qp_ex *qpx)
{
	pib_wr_begin(qpx, PIB_WQE_SEND);
}

static void pib_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	struct pib_send_wqe *wqe = pib_wr_begin(qpx, PIB_WQE_SEND_IMM);

	/* Immediate data is in network order already, as on the wire. */
	if (wqe)
		wqe->imm_inv = (uint32_t)imm_data;
}

static void pib_wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct pib_send_wqe *wqe = pib_wr_begin(qpx, PIB_WQE_SEND_INV);

	if (wqe)
		wqe->imm_inv = htole32(invalidate_rkey);
}

static struct pib_send_wqe *pib_wr_rdma(struct ibv_qp_ex *qpx, uint8_t opcode,
					uint32_t rkey, uint64_t remote_addr)
{
	struct pib_send_wqe *wqe = pib_wr_begin(qpx, opcode);

	if (wqe) {
		wqe->remote_addr = htole64(remote_addr);
		wqe->rkey = htole32(rkey);
	}
	return wqe;
}

static void pib_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr)
{
	pib_wr_rdma(qpx, PIB_WQE_RDMA_WRITE, rkey, remote_addr);
}

static void pib_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
				  uint64_t remote_addr, __be32 imm_data)
{
	struct pib_send_wqe *wqe = pib_wr_rdma(qpx, PIB_WQE_RDMA_WRITE_IMM,
					       rkey, remote_addr);

	if (wqe)
		wqe->imm_inv = (uint32_t)imm_data;
}

static void pib_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
			     uint64_t remote_addr)
{
	pib_wr_rdma(qpx, PIB_WQE_RDMA_READ, rkey, remote_addr);
}

static void pib_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
				  uint64_t remote_addr, uint64_t compare,
				  uint64_t swap)
{
	struct pib_send_wqe *wqe = pib_wr_rdma(qpx, PIB_WQE_ATOMIC_CS, rkey,
					       remote_addr);

	if (wqe) {
		wqe->compare_add = htole64(compare);
		wqe->swap = htole64(swap);
	}
}

static void pib_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				    uint64_t remote_addr, uint64_t add)
{
	struct pib_send_wqe *wqe = pib_wr_rdma(qpx, PIB_WQE_ATOMIC_FA, rkey,
					       remote_addr);

	if (wqe)
		wqe->compare_add = htole64(add);
}

/*
 * ATOMIC WRITE (IBTA 1.5, RC): the 8 bytes at atomic_wr, copied now into the control
 * segment byte for byte, land at remote_addr in one store.  The target must be 8-byte
 * aligned (the responder answers a misaligned one with an invalid-request NAK).
 */
static void pib_wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey,
				uint64_t remote_addr, const void *atomic_wr)
{
	struct pib_send_wqe *wqe = pib_wr_rdma(qpx, PIB_WQE_ATOMIC_WRITE, rkey,
					       remote_addr);

	if (!wqe)
		return;
	memcpy(&wqe->compare_add, atomic_wr, sizeof(wqe->compare_add));
	/* Its data is in the control segment: no setter may follow. */
	pib_qp_of_ex(qpx)->ex.wqe = NULL;
}

/*
 * RDMA FLUSH (IBA 1.5, RC): the placement types and the selectivity go into imm_inv as the
 * FETH carries them (pib_wqe.h, PIB_FLUSH_*), a range's length into compare_add.  verbs' values
 * are the FETH's.  No placement type, one verbs does not define, an unknown selectivity or a
 * range longer than a message make the batch fail (EINVAL).  A persistent flush is sent: the
 * responder, with no persistence domain, answers it with a remote access error.
 */
static_assert(IBV_FLUSH_GLOBAL == PIB_FLUSH_GLOBAL &&
	      IBV_FLUSH_PERSISTENT == PIB_FLUSH_PERSISTENT &&
	      IBV_FLUSH_RANGE == PIB_FLUSH_RANGE && IBV_FLUSH_MR == PIB_FLUSH_MR,
	      "FLUSH values");

static void pib_wr_flush(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
			 size_t len, uint8_t type, uint8_t level)
{
	struct pib_qp *qp = pib_qp_of_ex(qpx);
	struct pib_send_wqe *wqe;

	if (!type || (type & ~(IBV_FLUSH_GLOBAL | IBV_FLUSH_PERSISTENT)) ||
	    (level != IBV_FLUSH_RANGE && level != IBV_FLUSH_MR) ||
	    (level == IBV_FLUSH_RANGE && len > PIB_MAX_MSG_SZ)) {
		if (!qp->ex.err)
			pib_wr_fail(qp, EINVAL);
		return;
	}
	wqe = pib_wr_rdma(qpx, PIB_WQE_FLUSH, rkey, remote_addr);
	if (!wqe)
		return;
	wqe->imm_inv = htole32(type | (uint32_t)level << PIB_FLUSH_SEL_SHIFT);
	wqe->compare_add = htole64(level == IBV_FLUSH_RANGE ? len : 0);
	/* No data and no SGEs: no setter may follow. */
	qp->ex.wqe = NULL;
}

static void pib_wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct pib_send_wqe *wqe = pib_wr_begin(qpx, PIB_WQE_LOCAL_INV);

	if (wqe)
		wqe->imm_inv = htole32(invalidate_rkey);
}

static void pib_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw,
			   uint32_t rkey, const struct ibv_mw_bind_info *bind)
{
	struct pib_qp *qp = pib_qp_of_ex(qpx);
	void *slot = pib_wr_begin(qpx, PIB_WQE_BIND_MW);

	if (!slot)
		return;
	if (pib_check_bind(mw, rkey, bind)) {
		pib_wr_fail(qp, EINVAL);
		return;
	}
	pib_write_bind_wqe(qp, slot, qpx->wr_flags & ~IBV_SEND_INLINE,
			   qpx->wr_id, mw, rkey, bind);
	/* A bind carries no data: no setter may follow. */
	qp->ex.wqe = NULL;
}

/*
 * The WQE a setter fills: the last one begun, if it carries data.  A setter
 * with no such WQE (none begun, or a local operation's) marks the batch bad.
 */
static struct pib_send_wqe *pib_wr_data_wqe(struct pib_qp *qp)
{
	if (qp->ex.err)
		return NULL;
	if (!qp->ex.wqe || pib_wqe_is_local(qp->ex.wqe->opcode)) {
		pib_wr_fail(qp, EINVAL);
		return NULL;
	}
	return qp->ex.wqe;
}

static void pib_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
				const struct ibv_sge *sg_list)
{
	struct pib_qp *qp = pib_qp_of_ex(qpx);
	struct pib_send_wqe *wqe = pib_wr_data_wqe(qp);

	if (!wqe)
		return;
	if (num_sge > qp->sq.max_sge) {
		pib_wr_fail(qp, EINVAL);
		return;
	}
	wqe->flags &= ~PIB_WQE_F_INLINE;
	wqe->inline_len = 0;
	wqe->num_sge = num_sge;
	pib_write_sges((struct pib_sge *)(wqe + 1), sg_list, num_sge);
}

static void pib_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr,
			   uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	pib_wr_set_sge_list(qpx, 1, &sge);
}

static void pib_wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
					const struct ibv_data_buf *buf_list)
{
	struct pib_qp *qp = pib_qp_of_ex(qpx);
	struct pib_send_wqe *wqe = pib_wr_data_wqe(qp);
	uint8_t *payload;
	size_t i, len = 0;

	if (!wqe)
		return;
	if (!pib_wqe_inline_allowed(wqe->opcode)) {
		pib_wr_fail(qp, EINVAL);
		return;
	}
	for (i = 0; i < num_buf; i++) {
		if (buf_list[i].length > qp->max_inline - len) {
			pib_wr_fail(qp, EINVAL);
			return;
		}
		len += buf_list[i].length;
	}
	payload = (uint8_t *)(wqe + 1);
	for (i = 0; i < num_buf; i++) {
		memcpy(payload, buf_list[i].addr, buf_list[i].length);
		payload += buf_list[i].length;
	}
	wqe->flags |= PIB_WQE_F_INLINE;
	wqe->num_sge = 0;
	wqe->inline_len = htole32(len);
}

static void pib_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
				   size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	pib_wr_set_inline_data_list(qpx, 1, &buf);
}

static void pib_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
			       uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct pib_qp *qp = pib_qp_of_ex(qpx);
	struct pib_send_wqe *wqe = pib_wr_data_wqe(qp);

	if (!wqe)
		return;
	if (qp->vqp.qp.qp_type != IBV_QPT_UD || !ah ||
	    remote_qpn > PIB_DB_OBJ_MASK) {
		pib_wr_fail(qp, EINVAL);
		return;
	}
	pib_write_ud_dest(wqe, ah, remote_qpn, remote_qkey);
}

/* XRC: the remote XRC SRQ of the work request begun last (its XRCETH). */
static void pib_wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t remote_srqn)
{
	struct pib_qp *qp = pib_qp_of_ex(qpx);
	struct pib_send_wqe *wqe = pib_wr_data_wqe(qp);

	if (!wqe)
		return;
	if (remote_srqn > PIB_DB_OBJ_MASK) {
		pib_wr_fail(qp, EINVAL);
		return;
	}
	wqe->xrc_srqn = htole32(remote_srqn);
}

/* The ibv_qp_ex functions of a QP created with these send_ops_flags. */
void pib_qp_ex_init(struct pib_qp *qp, uint64_t ops)
{
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;

	qp->vqp.comp_mask |= VERBS_QP_EX;
	qpx->wr_start = pib_wr_start;
	qpx->wr_complete = pib_wr_complete;
	qpx->wr_abort = pib_wr_abort;
	qpx->wr_set_sge = pib_wr_set_sge;
	qpx->wr_set_sge_list = pib_wr_set_sge_list;
	qpx->wr_set_inline_data = pib_wr_set_inline_data;
	qpx->wr_set_inline_data_list = pib_wr_set_inline_data_list;
	if (qp->vqp.qp.qp_type == IBV_QPT_UD)
		qpx->wr_set_ud_addr = pib_wr_set_ud_addr;
	if (qp->vqp.qp.qp_type == IBV_QPT_XRC_SEND)
		qpx->wr_set_xrc_srqn = pib_wr_set_xrc_srqn;
	if (ops & IBV_QP_EX_WITH_SEND)
		qpx->wr_send = pib_wr_send;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_IMM)
		qpx->wr_send_imm = pib_wr_send_imm;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_INV)
		qpx->wr_send_inv = pib_wr_send_inv;
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE)
		qpx->wr_rdma_write = pib_wr_rdma_write;
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
		qpx->wr_rdma_write_imm = pib_wr_rdma_write_imm;
	if (ops & IBV_QP_EX_WITH_RDMA_READ)
		qpx->wr_rdma_read = pib_wr_rdma_read;
	if (ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)
		qpx->wr_atomic_cmp_swp = pib_wr_atomic_cmp_swp;
	if (ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
		qpx->wr_atomic_fetch_add = pib_wr_atomic_fetch_add;
	if (ops & IBV_QP_EX_WITH_LOCAL_INV)
		qpx->wr_local_inv = pib_wr_local_inv;
	if (ops & IBV_QP_EX_WITH_BIND_MW)
		qpx->wr_bind_mw = pib_wr_bind_mw;
	if (ops & IBV_QP_EX_WITH_ATOMIC_WRITE)
		qpx->wr_atomic_write = pib_wr_atomic_write;
	if (ops & IBV_QP_EX_WITH_FLUSH)
		qpx->wr_flush = pib_wr_flush;
}
