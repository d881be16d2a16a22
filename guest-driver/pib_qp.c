// SPDX-License-Identifier: GPL-2.0
/*
 * pib_qp.c - queue pairs: creating them, moving them through their states (MODIFY_QP,
 * include/pib_hw.h), querying and destroying them.
 *
 * A QP's send queue (SQ) and receive queue (RQ) are rings of WQE slots of 2^stride_log
 * bytes (include/pib_wqe.h).  A user QP's rings belong to the provider, which posts to them
 * and rings the doorbells on its own UAR page; the driver checks the geometry the provider
 * chose, pins the rings and gives the device their page lists.  A kernel QP's rings belong
 * to the driver, which sizes them the way the provider does, and posts to them exactly as
 * the provider does (pib_wq.c, which also has the ring helpers shared with pib_srq.c).
 *
 * A QP created on an SRQ has no RQ: its receives come from the SRQ (pib_srq.c), and each of
 * its receive completions retires one SRQ slot instead.
 *
 * XRC (user space only, as in every HCA driver: the kernel's work requests cannot name a
 * remote SRQ): an XRC_INI QP is a user QP with an SQ and no receive side at all; an XRC_TGT
 * QP has no rings, no PD and no CQ, only its XRC domain.  ib_core creates the target without
 * udata, as its own object that processes share (ib_open_qp); its receive completions land on
 * the CQs of user XRC SRQs, so nothing of it is the kernel's to scrub or reset: it counts as
 * a user QP.
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
	case IB_QPT_XRC_INI:
		supported = (caps & PIB_DEV_CAP_XRC) && dev->max_srq && user;
		break;
	case IB_QPT_XRC_TGT:
		/* ib_core makes it without udata, however user space asked for it. */
		supported = (caps & PIB_DEV_CAP_XRC) && dev->max_srq;
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

	/* An XRC target has its domain and nothing else. */
	if (attr->qp_type == IB_QPT_XRC_TGT)
		return attr->xrcd && !attr->send_cq && !attr->recv_cq && !attr->srq ? 0 : -EINVAL;
	/* An XRC initiator only sends: no receive CQ, no SRQ. */
	if (attr->qp_type == IB_QPT_XRC_INI && (attr->recv_cq || attr->srq))
		return -EINVAL;
	/* A kernel QP with a user CQ or SRQ, or the reverse, could never be served. */
	if (!attr->send_cq || to_pcq(attr->send_cq)->user != user ||
	    (attr->qp_type != IB_QPT_XRC_INI &&
	     (!attr->recv_cq || to_pcq(attr->recv_cq)->user != user)) ||
	    (attr->srq && to_psrq(attr->srq)->user != user))
		return -EINVAL;
	if (attr->sq_sig_type != IB_SIGNAL_ALL_WR && attr->sq_sig_type != IB_SIGNAL_REQ_WR)
		return -EINVAL;
	if (cap->max_send_wr > dev->max_qp_wr || cap->max_send_sge > dev->max_sge ||
	    cap->max_inline_data > dev->max_inline)
		return -EINVAL;
	/* With an SRQ the receive capabilities are the SRQ's; IB ignores these. */
	if (!attr->srq && attr->qp_type != IB_QPT_XRC_INI && (cap->max_recv_wr > dev->max_qp_wr || cap->max_recv_sge > dev->max_sge))
		return -EINVAL;
	return 0;
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
	if (req->comp_mask & ~PIB_IBV_CREATE_QP_MASK_RQ_DBREC || req->reserved_06 ||
	    (req->comp_mask & PIB_IBV_CREATE_QP_MASK_RQ_DBREC &&
	     (!pib_dev_recv_dbrec(dev) || attr->srq || attr->qp_type == IB_QPT_XRC_INI))) {
		ibdev_dbg(ibdev, "create_qp: comp_mask %#x not supported\n", req->comp_mask);
		return -EOPNOTSUPP;
	}
	if (!pib_wq_req_ok(dev->max_qp_wr, req->sq_depth, req->sq_stride_log,
			   PIB_SQ_STRIDE_LOG_MIN, attr->cap.max_send_wr,
			   pib_qp_sq_slot_bytes(&attr->cap), false, req->sq_buf_addr,
			   req->sq_buf_size)) {
		ibdev_dbg(ibdev, "create_qp: bad SQ: depth %u stride 2^%u ring %#llx size %u\n",
			  req->sq_depth, req->sq_stride_log, req->sq_buf_addr, req->sq_buf_size);
		return -EINVAL;
	}
	/*
	 * A QP on an SRQ, or an XRC initiator, has no RQ: no ring at all (the stride is still
	 * one the device takes).  Any other QP has its own.
	 */
	if (attr->srq || attr->qp_type == IB_QPT_XRC_INI ?
	    req->rq_depth || req->rq_buf_addr || req->rq_buf_size ||
	    req->rq_stride_log < PIB_RQ_STRIDE_LOG_MIN || req->rq_stride_log > PIB_STRIDE_LOG_MAX :
	    !pib_wq_req_ok(dev->max_qp_wr, req->rq_depth, req->rq_stride_log,
			   PIB_RQ_STRIDE_LOG_MIN, attr->cap.max_recv_wr,
			   pib_recv_slot_bytes(attr->cap.max_recv_sge),
			   req->comp_mask & PIB_IBV_CREATE_QP_MASK_RQ_DBREC,
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
	qp->rq.has_dbrec = req.comp_mask & PIB_IBV_CREATE_QP_MASK_RQ_DBREC;

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
	qp->rq.has_dbrec = pib_dev_recv_dbrec(dev);
	err = pib_wq_init_kernel(dev, &qp->rq, cap->max_recv_wr,
				 pib_recv_slot_bytes(cap->max_recv_sge), PIB_RQ_STRIDE_LOG_MIN,
				 dev->max_qp_wr, rq_pbl);
	if (err) {
		pib_pbl_free(dev, sq_pbl);
		pib_dma_buf_free(dev, &qp->sq.buf);
	}
	return err;
}

/* An XRC target: CREATE_QP with its domain only (include/pib_hw.h). */
static int pib_create_xrc_tgt(struct pib_dev *dev, struct pib_qp *qp,
			      const struct ib_qp_init_attr *init_attr)
{
	struct pib_qp_create in = {
		.type = PIB_QPT_XRC_TGT,
		.flags = PIB_QPC_F_NO_RQ,
		.sq_stride_log = PIB_SQ_STRIDE_LOG_MIN,
		.rq_stride_log = PIB_RQ_STRIDE_LOG_MIN,
		.srqn = PIB_SRQN_NONE,
		.xrcd = to_pxrcd(init_attr->xrcd)->xrcdn,
	};
	u32 qpn;
	int err;

	err = pib_cmd_create_qp(&dev->com, &in, &qpn);
	if (err)
		return err;
	qp->ibqp.qp_num = qpn;
	if (qpn < 2 || qpn >= IB_MULTICAST_QPN) {
		ibdev_err(&dev->ibdev, "CREATE_QP returned QPN %#x\n", qpn);
		err = -EIO;
		goto err_destroy;
	}
	err = xa_insert(&dev->qps, qpn, qp, GFP_KERNEL);
	if (err)
		goto err_destroy;
	return 0;

err_destroy:
	pib_destroy_status(dev, "QP", qpn, pib_cmd_destroy_qp(&dev->com, qpn));
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
	if (init_attr->qp_type == IB_QPT_XRC_TGT) {
		qp->user = true;        /* nothing of it is the kernel's (above) */
		err = pib_create_xrc_tgt(dev, qp, init_attr);
		if (err)
			mutex_destroy(&qp->state_lock);
		return err;
	}
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
	in.recv_cqn = init_attr->recv_cq ? to_pcq(init_attr->recv_cq)->cqn : 0;
	in.srqn = PIB_SRQN_NONE;
	if (init_attr->srq) {
		in.flags |= PIB_QPC_F_NO_RQ;
		in.srqn = to_psrq(init_attr->srq)->srqn;
	}
	if (init_attr->qp_type == IB_QPT_XRC_INI)
		in.flags |= PIB_QPC_F_NO_RQ;
	if (qp->rq.has_dbrec)
		in.flags |= PIB_QPC_F_RQ_DBREC;
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
			 IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC | PIB_ACCESS_FLUSH_GLOBAL)
/*
 * IB_UVERBS_ACCESS_FLUSH_GLOBAL (bit 8, PIB_ACCESS_FLUSH_GLOBAL; named from Linux 6.2 on) is
 * the QP's right to incoming RDMA FLUSH to global visibility, which the device checks.
 * _PERSISTENT (bit 9) is accepted and grants nothing: the device has no persistence domain and
 * answers a persistent flush with a remote access error whatever the rights.  rdma-core's tests
 * ask for both on every RC QP.
 */
#define PIB_QP_ACCESS_IGNORED	BIT(9)

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
