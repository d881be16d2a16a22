// SPDX-License-Identifier: GPL-2.0
/*
 * pib_qp.c - queue pairs: creating them, moving them through their states, and posting work
 * requests to the kernel's own.
 *
 * A QP's send queue (SQ) and receive queue (RQ) are rings of WQE slots of 2^stride_log
 * bytes (include/pib_wqe.h).  A user QP's rings belong to the provider, which posts to them
 * and rings the doorbells on its own UAR page; the driver checks the geometry the provider
 * chose, pins the rings and gives the device their page lists.  A kernel QP's rings belong
 * to the driver, which sizes them the way the provider does, and posts here exactly as the
 * provider does (guest-provider/qp.c): every work request checked before anything is
 * written, WQEs into the slots, then one doorbell on UAR page 0 with the new producer index.
 * A slot is free again once a CQE shows that the device is done with it (pib_qp_retire(),
 * called by poll_cq).
 *
 * A QP created on an SRQ has no RQ: its receives come from the SRQ (pib_srq.c), and each of
 * its receive completions retires one SRQ slot instead.
 *
 * The device checks every QP state transition itself, but the driver checks it too, with
 * ib_modify_qp_is_ok(), so that a transition IB does not allow fails before a command is sent.
 */
#include <linux/log2.h>
#include <linux/sizes.h>
#include <linux/string.h>

#include <rdma/uverbs_ioctl.h>

#include "pib.h"
#include "pib_com_cmd.h"
#include "pib-abi.h"

/* QP types, states and attribute mask bits are the IB values (pib_hw.h). */
#define PIB_SAME_QPT(id, value) static_assert(PIB_QPT_##id == (int)IB_QPT_##id, "QP type " #id);
#define PIB_SAME_QPS(id, value) static_assert(PIB_QPS_##id == (int)IB_QPS_##id, "QP state " #id);
#define PIB_SAME_QP_ATTR(id, bit) static_assert(PIB_QP_##id == (int)IB_QP_##id, "QP attr " #id);
PIB_QP_TYPES(PIB_SAME_QPT)
PIB_QP_STATES(PIB_SAME_QPS)
PIB_QP_ATTRS(PIB_SAME_QP_ATTR)

/* ------------------------------------------------------------------------------------------
 * Geometry
 * ------------------------------------------------------------------------------------------ */

/* The rules a slot is sized by are the contract's (include/pib_wqe.h, "What a slot holds"). */
static u32 pib_qp_sq_slot_bytes(const struct ib_qp_cap *cap)
{
	return pib_sq_slot_bytes(cap->max_send_sge, cap->max_inline_data);
}

static size_t pib_wq_ring_size(const struct pib_wq *wq)
{
	return (size_t)pib_ring_pages(wq->depth, wq->stride_log) << PIB_PAGE_SHIFT;
}

/*
 * What the rings hold, which may be more than was asked for: every slot, and the SGEs and
 * inline bytes that fit a slot, within the device's limits.
 */
static void pib_qp_set_caps(struct pib_dev *dev, struct pib_qp *qp)
{
	qp->sq.max_sge = min(dev->max_sge, pib_sq_max_sge(qp->sq.stride_log));
	/* No RQ (an SRQ's QP): no receive capabilities of its own. */
	qp->rq.max_sge = qp->rq.depth ? min(dev->max_sge, pib_recv_max_sge(qp->rq.stride_log)) : 0;
	qp->max_inline = min(dev->max_inline, pib_sq_max_inline(qp->sq.stride_log));

	qp->cap = (struct ib_qp_cap){
		.max_send_wr = qp->sq.depth,
		.max_recv_wr = qp->rq.depth,
		.max_send_sge = qp->sq.max_sge,
		.max_recv_sge = qp->rq.max_sge,
		.max_inline_data = qp->max_inline,
	};
}

/* ------------------------------------------------------------------------------------------
 * Creating and destroying
 * ------------------------------------------------------------------------------------------ */

/* What both kinds of QP must satisfy, before any memory is touched. */
static int pib_qp_check_attr(struct pib_dev *dev, const struct ib_qp_init_attr *attr,
			     bool user)
{
	u32 caps = dev->attr.device_cap_flags;
	const struct ib_qp_cap *cap = &attr->cap;
	bool supported;

	switch (attr->qp_type) {
	case IB_QPT_RC:
		supported = caps & PIB_DEV_CAP_RC;
		break;
	case IB_QPT_UC:
		supported = caps & PIB_DEV_CAP_UC;
		break;
	case IB_QPT_UD:
		supported = caps & PIB_DEV_CAP_UD;
		break;
	case IB_QPT_SMI:
	case IB_QPT_GSI:
		/*
		 * QP0 and QP1, ib_core's MAD layer's (a managed port only: pib_mad_probe()).
		 * The device makes one of each, on its one port; they are UD QPs to it.
		 */
		supported = !user && dev->mad && attr->port_num == PIB_PORT_NUM &&
			    (caps & PIB_DEV_CAP_UD);
		break;
	default:
		supported = false;
		break;
	}
	if (!supported || attr->create_flags || attr->rwq_ind_tbl ||
	    (attr->srq && (!dev->max_srq || attr->srq->srq_type != IB_SRQT_BASIC)))
		return -EOPNOTSUPP;

	/* A kernel QP with a user CQ or SRQ, or the reverse, could never be served. */
	if (!attr->send_cq || !attr->recv_cq ||
	    to_pcq(attr->send_cq)->user != user || to_pcq(attr->recv_cq)->user != user ||
	    (attr->srq && to_psrq(attr->srq)->user != user))
		return -EINVAL;
	if (attr->sq_sig_type != IB_SIGNAL_ALL_WR && attr->sq_sig_type != IB_SIGNAL_REQ_WR)
		return -EINVAL;
	if (cap->max_send_wr > dev->max_qp_wr || cap->max_send_sge > dev->max_sge ||
	    cap->max_inline_data > dev->max_inline)
		return -EINVAL;
	/* With an SRQ the receive capabilities are the SRQ's; IB ignores these. */
	if (!attr->srq && (cap->max_recv_wr > dev->max_qp_wr || cap->max_recv_sge > dev->max_sge))
		return -EINVAL;
	return 0;
}

/*
 * One ring of the provider's request: a power-of-two depth within the device's limit and at
 * least the WRs asked for, a stride in range and large enough for the slot, and a page
 * aligned buffer of exactly depth slots rounded up to a page.
 */
bool pib_wq_req_ok(u32 max_depth, u32 depth, u32 stride_log, u32 min_log, u32 want_wr,
		   u32 slot_bytes, u64 addr, u32 size)
{
	return is_power_of_2(depth) && depth <= max_depth && depth >= want_wr &&
	       stride_log >= min_log && stride_log <= PIB_STRIDE_LOG_MAX &&
	       (1u << stride_log) >= slot_bytes &&
	       addr && IS_ALIGNED(addr, PIB_PAGE_SIZE) &&
	       size == (u64)pib_ring_pages(depth, stride_log) << PIB_PAGE_SHIFT;
}

static int pib_qp_user_req(struct pib_dev *dev, const struct ib_qp_init_attr *attr,
			   struct ib_udata *udata, struct pib_ibv_create_qp *req)
{
	struct ib_device *ibdev = &dev->ibdev;
	int err;

	if (udata->inlen < sizeof(*req) ||
	    udata->outlen < offsetofend(struct pib_ibv_create_qp_resp, max_inline)) {
		ibdev_dbg(ibdev, "create_qp: request %zu / response %zu bytes too short\n",
			  udata->inlen, udata->outlen);
		return -EINVAL;
	}
	if (udata->inlen > sizeof(*req) &&
	    !ib_is_udata_cleared(udata, sizeof(*req), udata->inlen - sizeof(*req))) {
		ibdev_dbg(ibdev, "create_qp: unknown request fields\n");
		return -EOPNOTSUPP;
	}
	err = ib_copy_from_udata(req, udata, sizeof(*req));
	if (err)
		return err;
	if (req->comp_mask || req->reserved_06) {
		ibdev_dbg(ibdev, "create_qp: comp_mask %#x not supported\n", req->comp_mask);
		return -EOPNOTSUPP;
	}
	if (!pib_wq_req_ok(dev->max_qp_wr, req->sq_depth, req->sq_stride_log,
			   PIB_SQ_STRIDE_LOG_MIN, attr->cap.max_send_wr,
			   pib_qp_sq_slot_bytes(&attr->cap), req->sq_buf_addr, req->sq_buf_size)) {
		ibdev_dbg(ibdev, "create_qp: bad SQ: depth %u stride 2^%u ring %#llx size %u\n",
			  req->sq_depth, req->sq_stride_log, req->sq_buf_addr, req->sq_buf_size);
		return -EINVAL;
	}
	/*
	 * A QP on an SRQ has no RQ: no ring at all (the stride is still one the device takes).
	 * Any other QP has its own.
	 */
	if (attr->srq ?
	    req->rq_depth || req->rq_buf_addr || req->rq_buf_size ||
	    req->rq_stride_log < PIB_RQ_STRIDE_LOG_MIN || req->rq_stride_log > PIB_STRIDE_LOG_MAX :
	    !pib_wq_req_ok(dev->max_qp_wr, req->rq_depth, req->rq_stride_log,
			   PIB_RQ_STRIDE_LOG_MIN, attr->cap.max_recv_wr,
			   pib_recv_slot_bytes(attr->cap.max_recv_sge),
			   req->rq_buf_addr, req->rq_buf_size)) {
		ibdev_dbg(ibdev, "create_qp: bad RQ: depth %u stride 2^%u ring %#llx size %u\n",
			  req->rq_depth, req->rq_stride_log, req->rq_buf_addr, req->rq_buf_size);
		return -EINVAL;
	}
	return 0;
}

static void pib_qp_fini(struct pib_dev *dev, struct pib_qp *qp)
{
	ib_umem_release(qp->rq_umem);
	ib_umem_release(qp->sq_umem);
	pib_dma_buf_free(dev, &qp->rq.buf);
	pib_dma_buf_free(dev, &qp->sq.buf);
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

static int pib_qp_init_user(struct pib_dev *dev, struct pib_qp *qp,
			    const struct ib_qp_init_attr *attr, struct ib_udata *udata,
			    struct pib_pbl *sq_pbl, struct pib_pbl *rq_pbl)
{
	struct pib_ibv_create_qp req;
	int err;

	err = pib_qp_user_req(dev, attr, udata, &req);
	if (err)
		return err;

	qp->user = true;
	qp->sq.depth = req.sq_depth;
	qp->sq.stride_log = req.sq_stride_log;
	qp->rq.depth = req.rq_depth;
	qp->rq.stride_log = req.rq_stride_log;

	err = pib_wq_init_user(dev, &qp->sq_umem, req.sq_buf_addr, req.sq_buf_size, sq_pbl);
	if (err)
		goto err_fini;
	if (!qp->rq.depth)
		return 0;
	err = pib_wq_init_user(dev, &qp->rq_umem, req.rq_buf_addr, req.rq_buf_size, rq_pbl);
	if (err)
		goto err_free_sq_pbl;
	return 0;

err_free_sq_pbl:
	pib_pbl_free(dev, sq_pbl);
err_fini:
	pib_qp_fini(dev, qp);
	return err;
}

/* A kernel ring, sized as the provider sizes its own (guest-provider/qp.c). */
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
	if (err)
		pib_dma_buf_free(dev, &wq->buf);
	return err;
}

static int pib_qp_init_kernel(struct pib_dev *dev, struct pib_qp *qp,
			      const struct ib_qp_init_attr *attr,
			      struct pib_pbl *sq_pbl, struct pib_pbl *rq_pbl)
{
	const struct ib_qp_cap *cap = &attr->cap;
	int err;

	err = pib_wq_init_kernel(dev, &qp->sq, cap->max_send_wr, pib_qp_sq_slot_bytes(cap),
				 PIB_SQ_STRIDE_LOG_MIN, dev->max_qp_wr, sq_pbl);
	if (err)
		return err;
	if (attr->srq)
		return 0;
	err = pib_wq_init_kernel(dev, &qp->rq, cap->max_recv_wr,
				 pib_recv_slot_bytes(cap->max_recv_sge), PIB_RQ_STRIDE_LOG_MIN,
				 dev->max_qp_wr, rq_pbl);
	if (err) {
		pib_pbl_free(dev, sq_pbl);
		pib_dma_buf_free(dev, &qp->sq.buf);
	}
	return err;
}

int pib_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init_attr,
		  struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibqp->device);
	struct pib_qp *qp = to_pqp(ibqp);
	struct pib_ibv_create_qp_resp resp = {};
	struct pib_pbl sq_pbl = {}, rq_pbl = {};
	struct pib_qp_create in = {};
	u32 qpn;
	int err;

	err = pib_qp_check_attr(dev, init_attr, !!udata);
	if (err) {
		ibdev_dbg(&dev->ibdev, "create_qp: type %d, caps or flags not supported\n",
			  init_attr->qp_type);
		return err;
	}

	mutex_init(&qp->state_lock);
	qp->state = IB_QPS_RESET;
	qp->sq_sig_type = init_attr->sq_sig_type;
	spin_lock_init(&qp->sq.lock);
	spin_lock_init(&qp->rq.lock);
	/* Without an RQ the stride is still one the device accepts; the depth stays 0. */
	qp->rq.stride_log = PIB_RQ_STRIDE_LOG_MIN;

	if (udata) {
		err = pib_qp_init_user(dev, qp, init_attr, udata, &sq_pbl, &rq_pbl);
		in.uar = rdma_udata_to_drv_context(udata, struct pib_ucontext, ibucontext)->uar;
	} else {
		err = pib_qp_init_kernel(dev, qp, init_attr, &sq_pbl, &rq_pbl);
		in.uar = 0;
	}
	if (err)
		goto err_mutex;
	pib_qp_set_caps(dev, qp);

	in.pdn = to_ppd(ibqp->pd)->pdn;
	in.type = init_attr->qp_type;
	in.flags = init_attr->sq_sig_type == IB_SIGNAL_ALL_WR ? PIB_QPC_F_SQ_SIG_ALL : 0;
	in.sq_stride_log = qp->sq.stride_log;
	in.rq_stride_log = qp->rq.stride_log;
	in.send_cqn = to_pcq(init_attr->send_cq)->cqn;
	in.recv_cqn = to_pcq(init_attr->recv_cq)->cqn;
	in.srqn = PIB_SRQN_NONE;
	if (init_attr->srq) {
		in.flags |= PIB_QPC_F_NO_RQ;
		in.srqn = to_psrq(init_attr->srq)->srqn;
	}
	in.sq_depth = qp->sq.depth;
	in.rq_depth = qp->rq.depth;
	in.max_inline = qp->max_inline;
	in.sq_npages = sq_pbl.npages;
	in.rq_npages = rq_pbl.npages;
	in.sq_pbl_addr = sq_pbl.dma;
	in.rq_pbl_addr = rq_pbl.dma;
	err = pib_cmd_create_qp(&dev->com, &in, &qpn);
	pib_pbl_free(dev, &rq_pbl);
	pib_pbl_free(dev, &sq_pbl);
	if (err)
		goto err_fini;

	/* QPN 0 and 1 are QP0/QP1's, 0xffffff is multicast's (and the scrub mark). */
	ibqp->qp_num = qpn;
	if (init_attr->qp_type == IB_QPT_SMI ? qpn != 0 :
	    init_attr->qp_type == IB_QPT_GSI ? qpn != 1 :
	    qpn < 2 || qpn >= IB_MULTICAST_QPN) {
		ibdev_err(&dev->ibdev, "CREATE_QP returned QPN %#x\n", qpn);
		err = -EIO;
		goto err_destroy;
	}
	/* From here on CQEs and async events naming the QPN reach it. */
	err = xa_insert(&dev->qps, qpn, qp, GFP_KERNEL);
	if (err) {
		if (err == -EBUSY)
			ibdev_err(&dev->ibdev, "CREATE_QP returned QPN %#x, which is in use\n", qpn);
		goto err_destroy;
	}

	if (udata) {
		resp.qpn = qpn;
		resp.max_inline = qp->max_inline;
		err = ib_copy_to_udata(udata, &resp, min(sizeof(resp), udata->outlen));
		if (err)
			goto err_erase;
	}
	init_attr->cap = qp->cap;
	return 0;

err_erase:
	xa_erase(&dev->qps, qpn);
	pib_sync_events(dev);
err_destroy:
	pib_destroy_status(dev, "QP", qpn, pib_cmd_destroy_qp(&dev->com, qpn));
err_fini:
	pib_qp_fini(dev, qp);
err_mutex:
	mutex_destroy(&qp->state_lock);
	return err;
}

/*
 * The kernel QP's CQEs still in its CQs name it no more (pib_cq_scrub_qp()); the SRQ slots
 * that its scrubbed receive completions stood for are retired all the same.
 */
static void pib_qp_scrub_cqs(struct pib_qp *qp)
{
	struct pib_srq *srq = qp->ibqp.srq ? to_psrq(qp->ibqp.srq) : NULL;

	pib_cq_scrub_qp(to_pcq(qp->ibqp.send_cq), qp->ibqp.qp_num, srq);
	if (qp->ibqp.recv_cq != qp->ibqp.send_cq)
		pib_cq_scrub_qp(to_pcq(qp->ibqp.recv_cq), qp->ibqp.qp_num, srq);
}

int pib_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibqp->device);
	struct pib_qp *qp = to_pqp(ibqp);
	u32 qpn = ibqp->qp_num;
	int err;

	/*
	 * The device is about to flush the QP's work requests into its CQs.  Those flush CQEs
	 * must not reach the kernel consumer, whose wr_ids may point at memory it frees next,
	 * but poll_cq must still find the QP for them: a receive on an SRQ frees an SRQ slot
	 * (pib_qp_retire()).  So the QP stays in its table and is only marked; a poller sees
	 * the mark for every flush CQE, since the device writes those only after the doorbell
	 * of the command below, which is ordered after this store.
	 */
	WRITE_ONCE(qp->destroying, true);
	err = pib_cmd_destroy_qp(&dev->com, qpn);
	err = pib_destroy_status(dev, "QP", qpn, err);
	if (err) {
		WRITE_ONCE(qp->destroying, false);
		return err;
	}

	/*
	 * The device has forgotten the QP and writes no more CQEs for it.  Once its CQEs still
	 * in the rings are scrubbed (under each CQ's lock, so a poller that found the QP is
	 * done with it too), no poller looks for it again; then it leaves the table, and the
	 * async event handler is waited out (as for a CQ).
	 */
	if (!qp->user)
		pib_qp_scrub_cqs(qp);
	xa_erase(&dev->qps, qpn);
	pib_sync_events(dev);

	pib_qp_fini(dev, qp);
	mutex_destroy(&qp->state_lock);
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Modify and query
 * ------------------------------------------------------------------------------------------ */

/* No alternate paths (APM), no resizing (IB_QP_CAP), nothing beyond the IB attributes. */
#define PIB_QP_ATTR_MASK (IB_QP_STATE | IB_QP_CUR_STATE | IB_QP_EN_SQD_ASYNC_NOTIFY |     \
			  IB_QP_ACCESS_FLAGS | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY | \
			  IB_QP_AV | IB_QP_PATH_MTU | IB_QP_TIMEOUT | IB_QP_RETRY_CNT |     \
			  IB_QP_RNR_RETRY | IB_QP_RQ_PSN | IB_QP_MAX_QP_RD_ATOMIC |         \
			  IB_QP_MIN_RNR_TIMER | IB_QP_SQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC |   \
			  IB_QP_PATH_MIG_STATE | IB_QP_DEST_QPN)

#define PIB_QP_ACCESS   (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | \
			 IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC)
/*
 * IB_UVERBS_ACCESS_FLUSH_GLOBAL and _PERSISTENT (bits 8 and 9; named from Linux 6.2 on): a QP's
 * rights to incoming RDMA FLUSH, an opcode the device does not execute (it answers one with an
 * invalid request NAK whatever the rights), so they grant nothing and are ignored, as mlx5
 * ignores them; rdma-core's tests ask for them on every RC QP.
 */
#define PIB_QP_ACCESS_IGNORED	(BIT(8) | BIT(9))

/* The primary path (IB_QP_AV): LID routing, and a GRH when there is one. */
static int pib_av_to_hw(struct pib_dev *dev, const struct rdma_ah_attr *ah,
			struct pib_qp_attr *hw)
{
	const struct ib_global_route *grh;

	if (ah->type != RDMA_AH_ATTR_TYPE_IB || rdma_ah_get_port_num(ah) != PIB_PORT_NUM ||
	    rdma_ah_get_dlid(ah) > U16_MAX || rdma_ah_get_sl(ah) > 15)
		return -EINVAL;

	hw->dlid = rdma_ah_get_dlid(ah);
	hw->sl = rdma_ah_get_sl(ah);
	hw->src_path_bits = rdma_ah_get_path_bits(ah);
	hw->static_rate = rdma_ah_get_static_rate(ah);
	if (!(rdma_ah_get_ah_flags(ah) & IB_AH_GRH))
		return 0;

	grh = rdma_ah_read_grh(ah);
	if (grh->sgid_index >= dev->gid_tbl_len || grh->flow_label > PIB_FLOW_LABEL_MASK)
		return -EINVAL;
	hw->ah_flags = PIB_AH_F_GRH;
	hw->sgid_index = grh->sgid_index;
	hw->hop_limit = grh->hop_limit;
	hw->traffic_class = grh->traffic_class;
	hw->flow_label = grh->flow_label;
	memcpy(hw->dgid, grh->dgid.raw, sizeof(hw->dgid));
	return 0;
}

/*
 * The attributes attr_mask names, range-checked and put into the MODIFY_QP mailbox.  The
 * mailbox takes the IB mask as it is, less the two bits whose values it has no field for.
 */
static int pib_qp_attr_to_hw(struct pib_dev *dev, const struct ib_qp_attr *attr, int mask,
			     struct pib_qp_attr *hw)
{
	const struct pib_device_attr *a = &dev->attr;

	hw->attr_mask = mask;
	if (mask & IB_QP_STATE)
		hw->qp_state = attr->qp_state;
	if (mask & IB_QP_CUR_STATE)
		hw->cur_qp_state = attr->cur_qp_state;
	/* The mask bit alone asks for SQ_DRAINED events. */
	if ((mask & IB_QP_EN_SQD_ASYNC_NOTIFY) && !attr->en_sqd_async_notify)
		hw->attr_mask &= ~PIB_QP_EN_SQD_ASYNC_NOTIFY;
	if (mask & IB_QP_ACCESS_FLAGS) {
		if (attr->qp_access_flags & ~(PIB_QP_ACCESS | PIB_QP_ACCESS_IGNORED))
			return -EINVAL;
		hw->qp_access_flags = attr->qp_access_flags & PIB_QP_ACCESS;
	}
	if (mask & IB_QP_PKEY_INDEX) {
		if (attr->pkey_index >= dev->pkey_tbl_len)
			return -EINVAL;
		hw->pkey_index = attr->pkey_index;
	}
	if (mask & IB_QP_PORT) {
		if (attr->port_num != PIB_PORT_NUM)
			return -EINVAL;
		hw->port_num = attr->port_num;
	}
	if (mask & IB_QP_QKEY)
		hw->qkey = attr->qkey;
	if (mask & IB_QP_AV) {
		int err = pib_av_to_hw(dev, &attr->ah_attr, hw);

		if (err)
			return err;
	}
	if (mask & IB_QP_PATH_MTU) {
		if (attr->path_mtu < IB_MTU_256 || attr->path_mtu > IB_MTU_4096)
			return -EINVAL;
		hw->path_mtu = attr->path_mtu;
	}
	if (mask & IB_QP_TIMEOUT) {
		if (attr->timeout > 31)
			return -EINVAL;
		hw->timeout = attr->timeout;
	}
	if (mask & IB_QP_RETRY_CNT) {
		if (attr->retry_cnt > 7)
			return -EINVAL;
		hw->retry_cnt = attr->retry_cnt;
	}
	if (mask & IB_QP_RNR_RETRY) {
		if (attr->rnr_retry > 7)
			return -EINVAL;
		hw->rnr_retry = attr->rnr_retry;
	}
	if (mask & IB_QP_RQ_PSN) {
		if (attr->rq_psn > PIB_PSN_MASK)
			return -EINVAL;
		hw->rq_psn = attr->rq_psn;
	}
	if (mask & IB_QP_MAX_QP_RD_ATOMIC) {
		if (attr->max_rd_atomic > a->max_qp_init_rd_atom)
			return -EINVAL;
		hw->max_rd_atomic = attr->max_rd_atomic;
	}
	if (mask & IB_QP_MIN_RNR_TIMER) {
		if (attr->min_rnr_timer > 31)
			return -EINVAL;
		hw->min_rnr_timer = attr->min_rnr_timer;
	}
	if (mask & IB_QP_SQ_PSN) {
		if (attr->sq_psn > PIB_PSN_MASK)
			return -EINVAL;
		hw->sq_psn = attr->sq_psn;
	}
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC) {
		if (attr->max_dest_rd_atomic > a->max_qp_rd_atom)
			return -EINVAL;
		hw->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	}
	/* Without APM the only path state is "migrated"; saying so changes nothing. */
	if (mask & IB_QP_PATH_MIG_STATE) {
		if (attr->path_mig_state != IB_MIG_MIGRATED)
			return -EOPNOTSUPP;
		hw->attr_mask &= ~PIB_QP_PATH_MIG_STATE;
	}
	if (mask & IB_QP_DEST_QPN) {
		if (attr->dest_qp_num > PIB_DB_OBJ_MASK)
			return -EINVAL;
		hw->dest_qp_num = attr->dest_qp_num;
	}
	return 0;
}

/*
 * A kernel QP on an SRQ that leaves a working state for RESET goes through ERR first.
 * Straight to RESET, the device would drop an SRQ WQE it took for a message in progress
 * without a completion, and the SRQ slot it stood for would never be retired.  Through ERR,
 * that WQE completes (flushed) before RESET, and the flush CQE, scrubbed like the others,
 * retires its slot (pib_qp_scrub_cqs()).  IB allows the detour: ERR -> RESET is always valid.
 */
static int pib_qp_flush_srq_wqe(struct pib_dev *dev, struct pib_qp *qp, enum ib_qp_state cur)
{
	struct pib_qp_attr hw = {
		.attr_mask = PIB_QP_STATE,
		.qp_state = PIB_QPS_ERR,
	};

	if (qp->user || !qp->ibqp.srq || cur == IB_QPS_RESET || cur == IB_QPS_INIT ||
	    cur == IB_QPS_ERR)
		return 0;
	return pib_cmd_modify_qp(&dev->com, qp->ibqp.qp_num, &hw);
}

/*
 * A kernel QP back in RESET has empty work queues: the device dropped their WQEs without
 * completions, the CQEs it had already written are scrubbed, and posting starts over at
 * index 0, where the device expects the next doorbells to count from (as in the provider).
 */
static void pib_qp_reset_kernel(struct pib_qp *qp)
{
	struct pib_wq *wqs[] = { &qp->sq, &qp->rq };
	unsigned long flags;
	unsigned int i;

	pib_qp_scrub_cqs(qp);
	for (i = 0; i < ARRAY_SIZE(wqs); i++) {
		spin_lock_irqsave(&wqs[i]->lock, flags);
		WRITE_ONCE(wqs[i]->pi, 0);
		WRITE_ONCE(wqs[i]->ci, 0);
		spin_unlock_irqrestore(&wqs[i]->lock, flags);
	}
}

int pib_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int attr_mask,
		  struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibqp->device);
	struct pib_qp *qp = to_pqp(ibqp);
	enum ib_qp_state cur, next;
	struct pib_qp_attr hw = {};
	int err;

	if (!pib_udata_in_cleared(udata)) {
		ibdev_dbg(&dev->ibdev, "modify_qp: unknown request bytes\n");
		return -EINVAL;
	}
	if (attr_mask & ~PIB_QP_ATTR_MASK) {
		ibdev_dbg(&dev->ibdev, "modify_qp: attributes %#x not supported\n",
			  attr_mask & ~PIB_QP_ATTR_MASK);
		return -EOPNOTSUPP;
	}

	mutex_lock(&qp->state_lock);
	cur = attr_mask & IB_QP_CUR_STATE ? attr->cur_qp_state : READ_ONCE(qp->state);
	next = attr_mask & IB_QP_STATE ? attr->qp_state : cur;
	if (cur > IB_QPS_ERR || next > IB_QPS_ERR ||
	    !ib_modify_qp_is_ok(cur, next, ibqp->qp_type, attr_mask)) {
		ibdev_dbg(&dev->ibdev, "modify_qp: QP %#x: %d -> %d with mask %#x is not allowed\n",
			  ibqp->qp_num, cur, next, attr_mask);
		err = -EINVAL;
		goto out;
	}
	err = pib_qp_attr_to_hw(dev, attr, attr_mask, &hw);
	if (err) {
		ibdev_dbg(&dev->ibdev, "modify_qp: QP %#x: attribute out of range\n",
			  ibqp->qp_num);
		goto out;
	}
	if (next == IB_QPS_RESET) {
		err = pib_qp_flush_srq_wqe(dev, qp, cur);
		if (err)
			goto out;
	}
	err = pib_cmd_modify_qp(&dev->com, ibqp->qp_num, &hw);
	if (err)
		goto out;

	if (attr_mask & IB_QP_QKEY)
		WRITE_ONCE(qp->qkey, attr->qkey);
	if (attr_mask & IB_QP_STATE) {
		WRITE_ONCE(qp->state, next);
		if (next == IB_QPS_RESET && cur != IB_QPS_RESET && !qp->user)
			pib_qp_reset_kernel(qp);
	}
out:
	mutex_unlock(&qp->state_lock);
	return err;
}

int pib_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int attr_mask,
		 struct ib_qp_init_attr *init_attr)
{
	struct pib_dev *dev = to_pdev(ibqp->device);
	struct pib_qp *qp = to_pqp(ibqp);
	struct pib_qp_attr hw;
	int err;

	mutex_lock(&qp->state_lock);
	err = pib_cmd_query_qp(&dev->com, ibqp->qp_num, &hw);
	if (!err && hw.qp_state > IB_QPS_ERR) {
		ibdev_err(&dev->ibdev, "QUERY_QP: QP %#x in state %u\n", ibqp->qp_num,
			  hw.qp_state);
		err = -EIO;
	}
	/* The device's word on the state wins: it may have moved the QP on its own. */
	if (!err)
		WRITE_ONCE(qp->state, hw.qp_state);
	mutex_unlock(&qp->state_lock);
	if (err)
		return err;

	/* Callers need not clear these: everything ib_core could read is set here. */
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = hw.qp_state;
	attr->cur_qp_state = hw.qp_state;
	attr->path_mtu = hw.path_mtu;
	attr->path_mig_state = IB_MIG_MIGRATED;
	attr->qkey = hw.qkey;
	attr->rq_psn = hw.rq_psn & PIB_PSN_MASK;
	attr->sq_psn = hw.sq_psn & PIB_PSN_MASK;
	attr->dest_qp_num = hw.dest_qp_num & PIB_DB_OBJ_MASK;
	attr->qp_access_flags = hw.qp_access_flags & PIB_QP_ACCESS;
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
	if (hw.ah_flags & PIB_AH_F_GRH) {
		union ib_gid dgid;

		memcpy(dgid.raw, hw.dgid, sizeof(dgid.raw));
		rdma_ah_set_grh(&attr->ah_attr, &dgid, hw.flow_label & PIB_FLOW_LABEL_MASK, hw.sgid_index,
				hw.hop_limit, hw.traffic_class);
	}

	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->event_handler = ibqp->event_handler;
	init_attr->qp_context = ibqp->qp_context;
	init_attr->send_cq = ibqp->send_cq;
	init_attr->recv_cq = ibqp->recv_cq;
	init_attr->srq = ibqp->srq;
	init_attr->cap = qp->cap;
	init_attr->sq_sig_type = qp->sq_sig_type;
	init_attr->qp_type = ibqp->qp_type;
	init_attr->port_num = PIB_PORT_NUM;
	return 0;
}

/* An affiliated async event for a QP (the AEQ's thread). */
void pib_qp_async_event(struct pib_dev *dev, u32 qpn, enum ib_event_type type)
{
	struct pib_qp *qp = xa_load(&dev->qps, qpn);
	struct ib_event event = {
		.device = &dev->ibdev,
		.event = type,
	};

	if (!qp) {
		ibdev_dbg(&dev->ibdev, "event %s for QP %#x, which is gone\n",
			  ib_event_msg(type), qpn);
		return;
	}
	/* Being destroyed: the consumer has let go of it (the device may still report). */
	if (READ_ONCE(qp->destroying))
		return;
	/* These are the device's word that it moved the QP to the error state. */
	switch (type) {
	case IB_EVENT_QP_FATAL:
	case IB_EVENT_QP_REQ_ERR:
	case IB_EVENT_QP_ACCESS_ERR:
		WRITE_ONCE(qp->state, IB_QPS_ERR);
		break;
	default:
		break;
	}
	event.element.qp = &qp->ibqp;
	if (qp->ibqp.event_handler)
		qp->ibqp.event_handler(&event, qp->ibqp.qp_context);
}

/* The datagram QPs: a send WQE names its destination (the UD fields), a receive completion
 * its source.  QP0 and QP1 are UD QPs with rules of their own (docs/hardware.md). */
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
 * Receive WQEs into a kernel RQ or SRQ (the same format), then one doorbell for the list on
 * UAR page 0: doorbell and obj say which queue.
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
		pib_ring_doorbell(dev, doorbell, obj, pi);
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
