// SPDX-License-Identifier: GPL-2.0
/*
 * pib_wq.c - work queues: the rings of QPs and SRQs (checking the provider's, pinning them,
 * allocating the kernel's own), and the data path of kernel QPs: post_send and post_recv,
 * which build WQEs into the slots, and retiring slots when their CQEs are polled.
 *
 * A ring is depth slots (a power of two) of 2^stride_log bytes each; what a slot holds (the
 * WQE formats: struct pib_send_wqe, pib_ud_wqe, pib_reg_mr_wqe, pib_recv_wqe, ...) is defined
 * in include/pib_wqe.h.  A kernel QP posts here exactly as the provider does
 * (guest-provider/wq.c): every work request checked before anything is written, WQEs into the
 * slots, then one doorbell on UAR page 0 with the new producer index.  A slot is free again
 * once a CQE shows that the device is done with it (pib_qp_retire(), called by poll_cq).
 * The QP objects themselves are in pib_qp.c, the SRQ objects in pib_srq.c.
 */
#include <linux/log2.h>
#include <linux/sizes.h>
#include <linux/string.h>

#include "pib.h"

/* ------------------------------------------------------------------------------------------
 * Rings
 * ------------------------------------------------------------------------------------------ */

/* The slots, then the doorbell record's page if the ring has one. */
static size_t pib_wq_ring_size(const struct pib_wq *wq)
{
	return (size_t)pib_recv_ring_pages(wq->depth, wq->stride_log, wq->has_dbrec) <<
	       PIB_PAGE_SHIFT;
}

/*
 * One ring of the provider's request: a power-of-two depth within the device's limit and at
 * least the WRs asked for, a stride in range and large enough for the slot, and a page
 * aligned buffer of exactly depth slots rounded up to a page (and the page of a doorbell
 * record, with dbrec).
 */
bool pib_wq_req_ok(u32 max_depth, u32 depth, u32 stride_log, u32 min_log, u32 want_wr,
		   u32 slot_bytes, bool dbrec, u64 addr, u32 size)
{
	return is_power_of_2(depth) && depth <= max_depth && depth >= want_wr &&
	       stride_log >= min_log && stride_log <= PIB_STRIDE_LOG_MAX &&
	       (1u << stride_log) >= slot_bytes &&
	       addr && IS_ALIGNED(addr, PIB_PAGE_SIZE) &&
	       size == (u64)pib_recv_ring_pages(depth, stride_log, dbrec) << PIB_PAGE_SHIFT;
}

/* Pin one user ring (the device only reads WQEs) and list its pages. */
int pib_wq_init_user(struct pib_dev *dev, struct ib_umem **umem, u64 addr, u32 size,
		     struct pib_pbl *pbl)
{
	*umem = ib_umem_get(&dev->ibdev, addr, size, 0);
	if (IS_ERR(*umem)) {
		int err = PTR_ERR(*umem);

		*umem = NULL;
		return err;
	}
	return pib_pbl_from_umem(dev, *umem, size / PIB_PAGE_SIZE, pbl);
}

/*
 * A kernel ring, sized as the provider sizes its own (guest-provider/qp.c), with a doorbell
 * record after the slots if the caller set has_dbrec.
 */
int pib_wq_init_kernel(struct pib_dev *dev, struct pib_wq *wq, u32 wr, u32 slot_bytes,
		       u32 min_log, u32 max_depth, struct pib_pbl *pbl)
{
	int err;

	wq->depth = roundup_pow_of_two(max(wr, 1u));
	wq->stride_log = pib_stride_log(slot_bytes, min_log);
	if (wq->depth > max_depth || wq->stride_log > PIB_STRIDE_LOG_MAX)
		return -EINVAL;

	err = pib_dma_buf_alloc(dev, pib_wq_ring_size(wq), &wq->buf);
	if (err)
		return err;
	err = pib_pbl_from_dma_buf(dev, &wq->buf, pbl);
	if (err) {
		pib_dma_buf_free(dev, &wq->buf);
		return err;
	}
	if (wq->has_dbrec)
		wq->dbrec = wq->buf.va +
			    ((size_t)pib_ring_pages(wq->depth, wq->stride_log) << PIB_PAGE_SHIFT);
	return 0;
}

/* The datagram QPs: a send WQE names its destination (the UD fields), a receive completion
 * its source.  QP0 and QP1 are UD QPs with rules of their own (docs/reference/hardware.md). */
static bool pib_qp_is_ud(const struct pib_qp *qp)
{
	switch (qp->ibqp.qp_type) {
	case IB_QPT_UD:
	case IB_QPT_SMI:
	case IB_QPT_GSI:
		return true;
	default:
		return false;
	}
}

/* ------------------------------------------------------------------------------------------
 * Posting to kernel QPs.  A user QP's rings are the process's, which the kernel does not
 * map: the uverbs POST_SEND and POST_RECV commands are refused for it.
 * ------------------------------------------------------------------------------------------ */

static void *pib_wq_slot(struct pib_wq *wq, u32 index)
{
	return wq->buf.va + ((size_t)(index & (wq->depth - 1)) << wq->stride_log);
}

/* Room for one more WQE?  ci is re-read only when the ring looks full. */
static bool pib_wq_full(struct pib_wq *wq, u32 pi, u32 *ci)
{
	if (pi - *ci < wq->depth)
		return false;
	*ci = smp_load_acquire(&wq->ci);
	return pi - *ci >= wq->depth;
}

static void pib_write_sges(struct pib_sge *dst, const struct ib_sge *src, int num_sge)
{
	int i;

	for (i = 0; i < num_sge; i++)
		dst[i] = (struct pib_sge){
			.addr = src[i].addr,
			.length = src[i].length,
			.lkey = src[i].lkey,
		};
}

static bool pib_dev_invalidates(struct pib_dev *dev)
{
	return dev->attr.device_cap_flags & (PIB_DEV_CAP_MEM_WINDOW | PIB_DEV_CAP_MEM_MGT_EXT);
}

/* The device opcode for a work request, or -1 for one the device has no WQE for. */
static int pib_wqe_opcode_of(struct pib_dev *dev, enum ib_wr_opcode op)
{
	switch (op) {
	case IB_WR_SEND:                return PIB_WQE_SEND;
	case IB_WR_SEND_WITH_IMM:       return PIB_WQE_SEND_IMM;
	case IB_WR_RDMA_WRITE:          return PIB_WQE_RDMA_WRITE;
	case IB_WR_RDMA_WRITE_WITH_IMM: return PIB_WQE_RDMA_WRITE_IMM;
	case IB_WR_RDMA_READ:           return PIB_WQE_RDMA_READ;
	case IB_WR_ATOMIC_CMP_AND_SWP:  return PIB_WQE_ATOMIC_CS;
	case IB_WR_ATOMIC_FETCH_AND_ADD: return PIB_WQE_ATOMIC_FA;
	/*
	 * Invalidation, local or carried by a SEND, is the device's with either memory windows
	 * or the memory management extensions (PIB_DEV_CAP_MEM_MGT_EXT), and fast registration
	 * with the latter only.  (Binding a window is the provider's: a kernel ib_send_wr has
	 * no form for IB_WR_BIND_MW.)
	 */
	case IB_WR_SEND_WITH_INV:
		return pib_dev_invalidates(dev) ? PIB_WQE_SEND_INV : -1;
	case IB_WR_LOCAL_INV:
		return pib_dev_invalidates(dev) ? PIB_WQE_LOCAL_INV : -1;
	case IB_WR_REG_MR:
		return dev->max_fast_reg_pages ? PIB_WQE_REG_MR : -1;
	default:
		return -1;
	}
}

/* ... and -1 too for one the QP type does not carry (pib_wqe_opcode_allowed()). */
static int pib_wqe_opcode(struct pib_dev *dev, enum ib_qp_type qp_type, enum ib_wr_opcode op)
{
	int opcode = pib_wqe_opcode_of(dev, op);

	return opcode >= 0 && pib_wqe_opcode_allowed(qp_type, opcode) ? opcode : -1;
}

#define PIB_SEND_FLAGS  (IB_SEND_FENCE | IB_SEND_SIGNALED | IB_SEND_SOLICITED | IB_SEND_INLINE)

/*
 * What the driver must vouch for in an IB_WR_REG_MR request: that it names a fast-registration
 * MR of this device, whose page list the WQE will point at, and rights the device can give.
 * Everything the IBTA makes a completion error (the MR in another PD or still valid, a length
 * its pages do not hold, remote write without local write) is left to the device, which
 * completes the WQE with an error and moves the QP to ERR.  A REG_MR carries no data: its
 * SGEs are ignored, and it cannot be inline.
 */
static int pib_check_reg_wr(struct pib_dev *dev, struct pib_qp *qp, const struct ib_reg_wr *wr)
{
	u32 access;

	if (!wr->mr || wr->mr->device != &dev->ibdev || !to_pmr(wr->mr)->pbl.pages) {
		ibdev_dbg(&dev->ibdev, "post_send: QP %#x: REG_MR names no fast-registration MR\n",
			  qp->ibqp.qp_num);
		return -EINVAL;
	}
	if (pib_mr_access(dev, wr->access, &access) || wr->wr.send_flags & IB_SEND_INLINE) {
		ibdev_dbg(&dev->ibdev, "post_send: QP %#x: REG_MR with access %#x, flags %#x\n",
			  qp->ibqp.qp_num, wr->access, wr->wr.send_flags);
		return -EINVAL;
	}
	return 0;
}

/*
 * The REG_MR WQE: the MR's index with the consumer's new key byte (the low byte of wr->key,
 * as on other HCAs; ib_update_fast_reg_key() put the same in mr->lkey and mr->rkey), and what
 * map_mr_sg mapped.  pib_check_reg_wr() has passed.
 */
static void pib_write_reg_mr_wqe(struct pib_dev *dev, struct pib_qp *qp,
				 const struct ib_reg_wr *wr, void *slot)
{
	struct pib_reg_mr_wqe *wqe = slot;
	struct pib_mr *mr = to_pmr(wr->mr);
	u32 access = 0;
	u8 flags = 0;

	pib_mr_access(dev, wr->access, &access);
	if ((wr->wr.send_flags & IB_SEND_SIGNALED) || qp->sq_sig_type == IB_SIGNAL_ALL_WR)
		flags |= PIB_WQE_F_SIGNALED;
	if (wr->wr.send_flags & IB_SEND_FENCE)
		flags |= PIB_WQE_F_FENCE;

	*wqe = (struct pib_reg_mr_wqe){
		.opcode = PIB_WQE_REG_MR,
		.flags = flags,
		.page_shift = PIB_PAGE_SHIFT,
		.key = (mr->key & ~0xffu) | (wr->key & 0xff),
		.wr_id = wr->wr.wr_id,
		.iova = mr->ibmr.iova,
		.length = mr->ibmr.length,
		.pbl_addr = mr->pbl.dma,
		.npages = mr->npages,
		.access = access,
	};
}

/*
 * Check a send work request against what the QP's slots and the device allow, so that no
 * WQE reaches beyond its slot.  Sets *opcode and, for an inline request, *inline_len.
 */
static int pib_check_send_wr(struct pib_dev *dev, struct pib_qp *qp,
			     const struct ib_send_wr *wr, int *opcode, u32 *inline_len)
{
	u32 len = 0;
	int i;

	*opcode = pib_wqe_opcode(dev, qp->ibqp.qp_type, wr->opcode);
	if (*opcode < 0 || wr->send_flags & ~PIB_SEND_FLAGS || wr->num_sge < 0)
		return -EINVAL;
	if (*opcode == PIB_WQE_REG_MR)
		return pib_check_reg_wr(dev, qp, reg_wr(wr));

	if (pib_qp_is_ud(qp) &&
	    (!ud_wr(wr)->ah || ud_wr(wr)->remote_qpn > PIB_DB_OBJ_MASK))
		return -EINVAL;
	/* QP1's sends each name the P_Key they go out with (ib_mad: the request's). */
	if (qp->ibqp.qp_type == IB_QPT_GSI && ud_wr(wr)->pkey_index >= dev->pkey_tbl_len)
		return -EINVAL;

	if (!(wr->send_flags & IB_SEND_INLINE))
		return (u32)wr->num_sge > qp->sq.max_sge ? -EINVAL : 0;

	/* Inline: only payload the requester sends, and only what fits. */
	if (!pib_wqe_inline_allowed(*opcode))
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++) {
		if (wr->sg_list[i].length > qp->max_inline - len)
			return -EINVAL;
		len += wr->sg_list[i].length;
	}
	*inline_len = len;
	return 0;
}

/*
 * The GRH half of a UD address vector (struct pib_ud_wqe): a multicast send, or a path that
 * leaves the subnet.  The AH was checked at create_ah (sgid_index within the GID table).
 */
static void pib_write_ud_grh(struct pib_ud_wqe *wqe, const struct ib_global_route *grh)
{
	wqe->av_flags = PIB_UD_AV_F_GRH;
	wqe->flow_label = grh->flow_label & PIB_FLOW_LABEL_MASK;
	wqe->traffic_class = grh->traffic_class;
	wqe->hop_limit = grh->hop_limit;
	wqe->sgid_index = grh->sgid_index;
	memcpy(wqe->dgid, grh->dgid.raw, sizeof(wqe->dgid));
}

static void pib_write_send_wqe(struct pib_qp *qp, const struct ib_send_wr *wr, int opcode,
			       u32 inline_len, void *slot)
{
	struct pib_send_wqe *wqe = slot;
	u8 *payload = slot + sizeof(*wqe);
	bool is_inline = wr->send_flags & IB_SEND_INLINE;
	/* LOCAL_INV moves no data: the SGE list, if any, is ignored. */
	int num_sge = opcode == PIB_WQE_LOCAL_INV ? 0 : wr->num_sge;
	u8 flags = 0;
	int i;

	if ((wr->send_flags & IB_SEND_SIGNALED) || qp->sq_sig_type == IB_SIGNAL_ALL_WR)
		flags |= PIB_WQE_F_SIGNALED;
	if (wr->send_flags & IB_SEND_SOLICITED)
		flags |= PIB_WQE_F_SOLICITED;
	if (wr->send_flags & IB_SEND_FENCE)
		flags |= PIB_WQE_F_FENCE;
	if (is_inline)
		flags |= PIB_WQE_F_INLINE;

	/* Every byte of the control segment, so no stale field survives. */
	*wqe = (struct pib_send_wqe){
		.opcode = opcode,
		.flags = flags,
		.num_sge = is_inline ? 0 : num_sge,
		.wr_id = wr->wr_id,
		.inline_len = is_inline ? inline_len : 0,
	};

	switch (opcode) {
	case PIB_WQE_SEND_IMM:
	case PIB_WQE_RDMA_WRITE_IMM:
		/* Immediate data is in network order already, as on the wire. */
		wqe->imm_inv = (__force u32)wr->ex.imm_data;
		break;
	case PIB_WQE_SEND_INV:
	case PIB_WQE_LOCAL_INV:
		wqe->imm_inv = wr->ex.invalidate_rkey;
		break;
	}

	switch (opcode) {
	case PIB_WQE_RDMA_WRITE:
	case PIB_WQE_RDMA_WRITE_IMM:
	case PIB_WQE_RDMA_READ:
		wqe->remote_addr = rdma_wr(wr)->remote_addr;
		wqe->rkey = rdma_wr(wr)->rkey;
		break;
	case PIB_WQE_ATOMIC_CS:
	case PIB_WQE_ATOMIC_FA:
		wqe->remote_addr = atomic_wr(wr)->remote_addr;
		wqe->rkey = atomic_wr(wr)->rkey;
		wqe->compare_add = atomic_wr(wr)->compare_add;
		wqe->swap = atomic_wr(wr)->swap;
		break;
	}

	if (pib_qp_is_ud(qp)) {
		const struct ib_ud_wr *ud = ud_wr(wr);
		struct pib_ah *ah = to_pah(ud->ah);

		wqe->ud_qpn = ud->remote_qpn;
		/*
		 * IBA: a Q_Key with the high bit set means "the QP's own Q_Key" (ib_mad sends
		 * with it: QP1's is 0x80010000, QP0's 0).
		 */
		wqe->ud_qkey = ud->remote_qkey & PIB_QKEY_USE_QP ? READ_ONCE(qp->qkey) :
							       ud->remote_qkey;
		/* QP0 to the permissive LID: a directed-route SMP (the device sets the SLID). */
		wqe->ud_dlid = rdma_ah_get_dlid(&ah->attr);
		wqe->ud_sl = rdma_ah_get_sl(&ah->attr);
		if (qp->ibqp.qp_type == IB_QPT_GSI)
			wqe->ud_pkey_index = ud->pkey_index;
		if (rdma_ah_get_ah_flags(&ah->attr) & IB_AH_GRH)
			pib_write_ud_grh((struct pib_ud_wqe *)wqe, rdma_ah_read_grh(&ah->attr));
	}

	if (!is_inline) {
		pib_write_sges((struct pib_sge *)payload, wr->sg_list, num_sge);
		return;
	}
	/* A kernel consumer's inline SGEs hold kernel virtual addresses, not DMA addresses. */
	for (i = 0; i < wr->num_sge; i++) {
		memcpy(payload, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
		payload += wr->sg_list[i].length;
	}
}

int pib_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		  const struct ib_send_wr **bad_wr)
{
	struct pib_dev *dev = to_pdev(ibqp->device);
	struct pib_qp *qp = to_pqp(ibqp);
	struct pib_wq *sq = &qp->sq;
	unsigned long flags;
	u32 pi, ci, first;
	u32 inline_len;
	int opcode;
	int err = 0;

	if (qp->user) {
		*bad_wr = wr;
		return -EINVAL;
	}

	spin_lock_irqsave(&sq->lock, flags);
	first = pi = sq->pi;
	ci = smp_load_acquire(&sq->ci);

	for (; wr; wr = wr->next) {
		if (pib_wq_full(sq, pi, &ci)) {
			err = -ENOMEM;
			break;
		}
		inline_len = 0;
		err = pib_check_send_wr(dev, qp, wr, &opcode, &inline_len);
		if (err)
			break;
		if (opcode == PIB_WQE_REG_MR)
			pib_write_reg_mr_wqe(dev, qp, reg_wr(wr), pib_wq_slot(sq, pi));
		else
			pib_write_send_wqe(qp, wr, opcode, inline_len, pib_wq_slot(sq, pi));
		pi++;
	}

	/* One doorbell for the whole list: the producer index is cumulative. */
	if (pi != first) {
		WRITE_ONCE(sq->pi, pi);
		pib_ring_doorbell(dev, PIB_UAR_SQ_DB, ibqp->qp_num, pi);
	}
	spin_unlock_irqrestore(&sq->lock, flags);

	if (err)
		*bad_wr = wr;
	return err;
}

/*
 * Tell the device of receive WQEs up to pi.  A ring with a doorbell record has it written
 * there, which costs no exit from the guest: the device reads it when it needs a WQE.  Only
 * if the device asks for a doorbell too (a QP in ERR, which flushes; pib_wqe.h) is it rung.
 * The barriers: the WQEs before the index, the index before reading the device's flags.
 */
static void pib_wq_recv_publish(struct pib_dev *dev, struct pib_wq *wq,
				enum pib_uar_offset doorbell, u32 obj, u32 pi)
{
	if (wq->dbrec) {
		dma_wmb();
		WRITE_ONCE(wq->dbrec->pi, pi);
		mb();
		if (!(READ_ONCE(wq->dbrec->flags) & PIB_DBREC_F_RING))
			return;
	}
	pib_ring_doorbell(dev, doorbell, obj, pi);
}

/*
 * Receive WQEs into a kernel RQ or SRQ (the same format), then the ring's doorbell record or
 * one doorbell for the list on UAR page 0 (pib_wq_recv_publish()): doorbell and obj say which
 * queue.
 */
int pib_wq_post_recv(struct pib_dev *dev, struct pib_wq *wq, enum pib_uar_offset doorbell,
		     u32 obj, const struct ib_recv_wr *wr, const struct ib_recv_wr **bad_wr)
{
	struct pib_recv_wqe *wqe;
	unsigned long flags;
	u32 pi, ci, first;
	int err = 0;

	spin_lock_irqsave(&wq->lock, flags);
	first = pi = wq->pi;
	ci = smp_load_acquire(&wq->ci);

	for (; wr; wr = wr->next) {
		if (pib_wq_full(wq, pi, &ci)) {
			err = -ENOMEM;
			break;
		}
		if (wr->num_sge < 0 || (u32)wr->num_sge > wq->max_sge) {
			err = -EINVAL;
			break;
		}
		wqe = pib_wq_slot(wq, pi);
		*wqe = (struct pib_recv_wqe){
			.wr_id = wr->wr_id,
			.num_sge = wr->num_sge,
		};
		pib_write_sges((struct pib_sge *)(wqe + 1), wr->sg_list, wr->num_sge);
		pi++;
	}

	if (pi != first) {
		WRITE_ONCE(wq->pi, pi);
		pib_wq_recv_publish(dev, wq, doorbell, obj, pi);
	}
	spin_unlock_irqrestore(&wq->lock, flags);

	if (err)
		*bad_wr = wr;
	return err;
}

int pib_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		  const struct ib_recv_wr **bad_wr)
{
	struct pib_qp *qp = to_pqp(ibqp);

	/* A QP on an SRQ has no RQ: its receives are posted to the SRQ. */
	if (qp->user || ibqp->srq) {
		*bad_wr = wr;
		return -EINVAL;
	}
	return pib_wq_post_recv(to_pdev(ibqp->device), &qp->rq, PIB_UAR_RQ_DB, ibqp->qp_num,
				wr, bad_wr);
}

/* ------------------------------------------------------------------------------------------
 * Retiring WQEs (poll_cq, under the lock of the CQ the CQE came to)
 * ------------------------------------------------------------------------------------------ */

/*
 * A send CQE completes the WQE at wqe_index and, because the device executes an SQ in order
 * and writes no CQE for an unsignalled WQE that succeeds, every WQE before it too: the
 * consumer index moves past it.  An index outside [ci, pi) names no outstanding WQE (a stale
 * CQE); it moves nothing.
 */
static void pib_sq_retire(struct pib_wq *sq, u16 wqe_index)
{
	u32 ci = sq->ci;
	u32 pi = READ_ONCE(sq->pi);
	u32 index = ci + (u16)(wqe_index - (u16)ci);

	if (index - ci >= pi - ci)
		return;
	/* Release: the poster may rewrite the slots once it sees this. */
	smp_store_release(&sq->ci, index + 1);
}

/*
 * Every receive WQE of an RQ completes, in order, and every one an SRQ's QPs take completes
 * too: one CQE retires one slot.  A CQE with nothing outstanding (stale) retires nothing.
 */
void pib_wq_retire_one(struct pib_wq *wq)
{
	u32 ci = wq->ci;

	if (ci == READ_ONCE(wq->pi))
		return;
	/* Release: the poster may rewrite the slot once it sees this. */
	smp_store_release(&wq->ci, ci + 1);
}

void pib_qp_retire(struct pib_qp *qp, const struct pib_cqe *cqe)
{
	/* Receive opcodes are PIB_CQE_RECV (0x80) and up. */
	if (!(cqe->opcode & PIB_CQE_RECV))
		pib_sq_retire(&qp->sq, cqe->wqe_index);
	else if (qp->ibqp.srq)
		pib_srq_retire(to_psrq(qp->ibqp.srq));
	else
		pib_wq_retire_one(&qp->rq);
}
