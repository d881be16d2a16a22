// SPDX-License-Identifier: GPL-2.0
/*
 * pib_srq.c - shared receive queues (docs/reference/hardware.md, "Shared receive queues").
 *
 * An SRQ is a ring of receive WQEs (the RQ's format, include/pib_wqe.h) shared by the QPs
 * created on it, which have no RQ of their own.  The device takes the WQEs in ring order for
 * whichever of those QPs needs one next, copying each as it takes it.  A user SRQ's ring
 * belongs to the provider, which posts to it and rings the SRQ doorbell on its own UAR page;
 * the driver checks the geometry, pins the ring and gives the device its page list.  A
 * kernel SRQ's ring belongs to the driver, which posts here with the SRQ doorbell on UAR
 * page 0.
 *
 * Retiring: because WQEs are taken in ring order and every WQE taken completes (with data,
 * an error or a flush), the slots before "number of receive completions so far" have all
 * been taken and copied.  So each receive completion of any QP on a kernel SRQ retires one
 * slot (pib_srq_retire()), from whichever of those QPs' CQs it is polled; the SRQ's lock
 * serializes the CQs that do so.
 *
 * The limit: with a limit > 0 the device raises SRQ_LIMIT (IB_EVENT_SRQ_LIMIT_REACHED) once
 * the WQEs posted but not yet taken fall below it, and disarms (the limit reads 0 again), as
 * IB specifies.  modify_srq re-arms it.
 *
 * Resizing (modify_srq with IB_SRQ_MAX_WR): a user SRQ moves to a new ring of the same stride
 * that the provider allocated and copied its WQEs not yet completed into, each at its index;
 * the device switches rings (MODIFY_SRQ's MAX_WR, include/pib_hw.h), and the old ring is
 * unpinned once it did.  A kernel SRQ is posted to under a spinlock: no resize there.
 *
 * XRC SRQs (IB_SRQT_XRC, user space only): an SRQ in an XRC domain with a CQ of its own,
 * which no QP is created on.  XRC target QPs of the domain take its WQEs for the requests
 * that name its number (srq_num, the SRQN) and complete them on its CQ.  The provider posts
 * to it as to any SRQ.  No kernel consumer uses XRC, so a kernel XRC SRQ is refused.
 */
#include <linux/log2.h>

#include <rdma/uverbs_ioctl.h>

#include "pib.h"
#include "pib_com_cmd.h"
#include "pib-abi.h"

/* ------------------------------------------------------------------------------------------
 * Creating and destroying
 * ------------------------------------------------------------------------------------------ */

/*
 * The provider's request (struct pib_ibv_create_srq), checked field by field like a QP's
 * rings: a power-of-two depth within the device's limit and at least max_wr, a stride in
 * range that holds max_sge SGEs, and a page-aligned buffer of exactly that ring.
 */
static int pib_srq_user_req(struct pib_dev *dev, const struct ib_srq_attr *attr,
			    struct ib_udata *udata, struct pib_ibv_create_srq *req)
{
	struct ib_device *ibdev = &dev->ibdev;
	int err;

	if (udata->inlen < sizeof(*req) ||
	    udata->outlen < offsetofend(struct pib_ibv_create_srq_resp, srqn)) {
		ibdev_dbg(ibdev, "create_srq: request %zu / response %zu bytes too short\n",
			  udata->inlen, udata->outlen);
		return -EINVAL;
	}
	if (udata->inlen > sizeof(*req) &&
	    !ib_is_udata_cleared(udata, sizeof(*req), udata->inlen - sizeof(*req))) {
		ibdev_dbg(ibdev, "create_srq: unknown request fields\n");
		return -EOPNOTSUPP;
	}
	err = ib_copy_from_udata(req, udata, sizeof(*req));
	if (err)
		return err;
	if (req->comp_mask & ~PIB_IBV_CREATE_SRQ_MASK_DBREC ||
	    (req->comp_mask & PIB_IBV_CREATE_SRQ_MASK_DBREC && !pib_dev_recv_dbrec(dev)) ||
	    memchr_inv(req->reserved_05, 0, sizeof(req->reserved_05))) {
		ibdev_dbg(ibdev, "create_srq: comp_mask %#x not supported\n", req->comp_mask);
		return -EOPNOTSUPP;
	}
	if (!pib_wq_req_ok(dev->max_srq_wr, req->depth, req->stride_log, PIB_RQ_STRIDE_LOG_MIN,
			   attr->max_wr, pib_recv_slot_bytes(attr->max_sge),
			   req->comp_mask & PIB_IBV_CREATE_SRQ_MASK_DBREC, req->buf_addr,
			   req->buf_size)) {
		ibdev_dbg(ibdev, "create_srq: bad ring: depth %u stride 2^%u ring %#llx size %u\n",
			  req->depth, req->stride_log, req->buf_addr, req->buf_size);
		return -EINVAL;
	}
	return 0;
}

static int pib_srq_init_user(struct pib_dev *dev, struct pib_srq *srq,
			     const struct ib_srq_attr *attr, struct ib_udata *udata,
			     struct pib_pbl *pbl)
{
	struct pib_ibv_create_srq req;
	int err;

	err = pib_srq_user_req(dev, attr, udata, &req);
	if (err)
		return err;

	srq->user = true;
	srq->wq.depth = req.depth;
	srq->wq.stride_log = req.stride_log;
	srq->wq.has_dbrec = req.comp_mask & PIB_IBV_CREATE_SRQ_MASK_DBREC;
	/* On failure the caller's pib_srq_fini() unpins what was pinned. */
	return pib_wq_init_user(dev, &srq->umem, req.buf_addr, req.buf_size, pbl);
}

static void pib_srq_fini(struct pib_dev *dev, struct pib_srq *srq)
{
	ib_umem_release(srq->umem);
	srq->umem = NULL;
	pib_dma_buf_free(dev, &srq->wq.buf);
}

int pib_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init_attr,
		   struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibsrq->device);
	struct pib_srq *srq = to_psrq(ibsrq);
	struct ib_srq_attr *attr = &init_attr->attr;
	struct pib_ibv_create_srq_resp resp = {};
	struct pib_cmd_create_srq in = {};
	struct pib_pbl pbl = {};
	int err;

	/* No tag-matching SRQs; XRC SRQs only in user space, on a user CQ. */
	if (!dev->max_srq ||
	    (init_attr->srq_type != IB_SRQT_BASIC && init_attr->srq_type != IB_SRQT_XRC) ||
	    (init_attr->srq_type == IB_SRQT_XRC &&
	     (!(dev->attr.device_cap_flags & PIB_DEV_CAP_XRC) || !udata)))
		return -EOPNOTSUPP;
	if (init_attr->srq_type == IB_SRQT_XRC &&
	    (!init_attr->ext.xrc.xrcd || !init_attr->ext.cq || !to_pcq(init_attr->ext.cq)->user))
		return -EINVAL;
	if (attr->max_wr > dev->max_srq_wr || attr->max_sge > dev->max_srq_sge) {
		ibdev_dbg(&dev->ibdev, "create_srq: %u WRs / %u SGEs exceed %u / %u\n",
			  attr->max_wr, attr->max_sge, dev->max_srq_wr, dev->max_srq_sge);
		return -EINVAL;
	}
	spin_lock_init(&srq->wq.lock);
	mutex_init(&srq->resize_lock);

	if (udata) {
		err = pib_srq_init_user(dev, srq, attr, udata, &pbl);
		in.uar = rdma_udata_to_drv_context(udata, struct pib_ucontext, ibucontext)->uar;
	} else {
		srq->wq.has_dbrec = pib_dev_recv_dbrec(dev);
		err = pib_wq_init_kernel(dev, &srq->wq, attr->max_wr,
					 pib_recv_slot_bytes(attr->max_sge),
					 PIB_RQ_STRIDE_LOG_MIN, dev->max_srq_wr, &pbl);
		in.uar = 0;
	}
	if (err)
		goto err_fini;
	srq->wq.max_sge = min(dev->max_srq_sge, pib_recv_max_sge(srq->wq.stride_log));

	/* A limit the SRQ can never fall below would never fire; the device refuses it. */
	if (attr->srq_limit >= srq->wq.depth) {
		ibdev_dbg(&dev->ibdev, "create_srq: limit %u not below depth %u\n",
			  attr->srq_limit, srq->wq.depth);
		err = -EINVAL;
		goto err_free_pbl;
	}

	in.pdn = to_ppd(ibsrq->pd)->pdn;
	in.depth = srq->wq.depth;
	in.stride_log = srq->wq.stride_log;
	in.limit = attr->srq_limit;
	in.npages = pbl.npages;
	in.pbl_addr = pbl.dma;
	if (srq->wq.has_dbrec)
		in.flags |= PIB_SRQ_F_DBREC;
	if (init_attr->srq_type == IB_SRQT_XRC) {
		in.flags |= PIB_SRQ_F_XRC;
		in.xrcd = to_pxrcd(init_attr->ext.xrc.xrcd)->xrcdn;
		in.cqn = to_pcq(init_attr->ext.cq)->cqn;
	}
	err = pib_cmd_create_srq(&dev->com, &in, &srq->srqn);
	pib_pbl_free(dev, &pbl);
	if (err)
		goto err_fini;
	/* The SRQ doorbell carries 24 bits of SRQN. */
	if (srq->srqn >= PIB_DB_OBJ_MASK) {
		ibdev_err(&dev->ibdev, "CREATE_SRQ returned SRQN %#x, beyond 24 bits\n",
			  srq->srqn);
		err = -EIO;
		goto err_destroy;
	}
	/* From here on async events naming the SRQN reach it. */
	err = xa_insert(&dev->srqs, srq->srqn, srq, GFP_KERNEL);
	if (err) {
		if (err == -EBUSY)
			ibdev_err(&dev->ibdev, "CREATE_SRQ returned SRQN %#x, which is in use\n",
				  srq->srqn);
		goto err_destroy;
	}

	/* The number XRC initiators name in their requests (uverbs returns it). */
	if (init_attr->srq_type == IB_SRQT_XRC)
		ibsrq->ext.xrc.srq_num = srq->srqn;
	if (udata) {
		resp.srqn = srq->srqn;
		err = ib_copy_to_udata(udata, &resp, min(sizeof(resp), udata->outlen));
		if (err)
			goto err_erase;
	}
	/* What the ring holds, which may be more than was asked for. */
	attr->max_wr = srq->wq.depth;
	attr->max_sge = srq->wq.max_sge;
	return 0;

err_erase:
	xa_erase(&dev->srqs, srq->srqn);
	pib_sync_events(dev);
err_destroy:
	pib_destroy_status(dev, "SRQ", srq->srqn, pib_cmd_destroy_srq(&dev->com, srq->srqn));
err_free_pbl:
	pib_pbl_free(dev, &pbl);        /* freed already if the command ran: a no-op then */
err_fini:
	pib_srq_fini(dev, srq);
	return err;
}

int pib_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibsrq->device);
	struct pib_srq *srq = to_psrq(ibsrq);
	int err;

	/* As for a CQ: out of the table and the event handler waited out first. */
	xa_erase(&dev->srqs, srq->srqn);
	pib_sync_events(dev);

	err = pib_cmd_destroy_srq(&dev->com, srq->srqn);
	err = pib_destroy_status(dev, "SRQ", srq->srqn, err);
	if (err) {
		/* Still the device's (a QP uses it): the SRQN is still this SRQ's. */
		if (xa_insert(&dev->srqs, srq->srqn, srq, GFP_KERNEL))
			ibdev_err(&dev->ibdev, "SRQ %#x will get no more events\n", srq->srqn);
		return err;
	}

	/* The device no longer reads the ring. */
	pib_srq_fini(dev, srq);
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Modify and query
 * ------------------------------------------------------------------------------------------ */

/* The provider's new ring for IB_SRQ_MAX_WR, pinned and listed for the device. */
static int pib_srq_resize_req(struct pib_dev *dev, struct pib_srq *srq, u32 max_wr,
			      struct ib_udata *udata, u32 *depth, struct ib_umem **umem,
			      struct pib_pbl *pbl)
{
	struct pib_ibv_modify_srq req;
	int err;

	if (!srq->user || !udata || !(dev->attr.device_cap_flags & PIB_DEV_CAP_RESIZE))
		return -EOPNOTSUPP;
	err = pib_udata_req(udata, &req, sizeof(req));
	if (err)
		return err;
	if (req.comp_mask || req.reserved_14)
		return -EOPNOTSUPP;
	if (!pib_wq_req_ok(dev->max_srq_wr, req.depth, srq->wq.stride_log,
			   PIB_RQ_STRIDE_LOG_MIN, max_wr, 0, srq->wq.has_dbrec, req.buf_addr,
			   req.buf_size)) {
		ibdev_dbg(&dev->ibdev, "modify_srq: bad ring: depth %u ring %#llx size %u\n",
			  req.depth, req.buf_addr, req.buf_size);
		return -EINVAL;
	}
	*depth = req.depth;
	return pib_wq_init_user(dev, umem, req.buf_addr, req.buf_size, pbl);
}

int pib_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		   enum ib_srq_attr_mask attr_mask, struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibsrq->device);
	struct pib_srq *srq = to_psrq(ibsrq);
	struct pib_cmd_modify_srq in = { .srqn = srq->srqn };
	struct ib_umem *umem = NULL;
	struct pib_pbl pbl = {};
	u32 depth;
	int err;

	if (attr_mask & ~(IB_SRQ_LIMIT | IB_SRQ_MAX_WR))
		return -EINVAL;
	if (!(attr_mask & IB_SRQ_MAX_WR) && !pib_udata_in_cleared(udata)) {
		ibdev_dbg(&dev->ibdev, "modify_srq: unknown request bytes\n");
		return -EINVAL;
	}
	if (!attr_mask)
		return 0;

	mutex_lock(&srq->resize_lock);
	depth = srq->wq.depth;
	if (attr_mask & IB_SRQ_MAX_WR) {
		if (attr->max_wr < 1 || attr->max_wr > dev->max_srq_wr) {
			err = -EINVAL;
			goto out;
		}
		err = pib_srq_resize_req(dev, srq, attr->max_wr, udata, &depth, &umem, &pbl);
		if (err)
			goto out;
		in.attr_mask |= PIB_SRQ_ATTR_MAX_WR;
		in.max_wr = depth;
		in.npages = pbl.npages;
		in.pbl_addr = pbl.dma;
	}
	if (attr_mask & IB_SRQ_LIMIT) {
		if (attr->srq_limit >= depth) {
			err = -EINVAL;
			goto out;
		}
		in.attr_mask |= PIB_SRQ_ATTR_LIMIT;
		in.limit = attr->srq_limit;
	}
	err = pib_cmd_modify_srq(&dev->com, &in);
	if (umem && !err) {
		ib_umem_release(srq->umem);
		srq->umem = umem;
		srq->wq.depth = depth;
		umem = NULL;
	}
out:
	pib_pbl_free(dev, &pbl);
	ib_umem_release(umem);
	mutex_unlock(&srq->resize_lock);
	return err;
}

/* The limit is the device's: it drops to 0 when the limit event fires. */
int pib_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct pib_dev *dev = to_pdev(ibsrq->device);
	struct pib_srq *srq = to_psrq(ibsrq);
	u32 limit, depth;
	int err;

	/* Not while a resize moves the SRQ from one depth to another. */
	mutex_lock(&srq->resize_lock);
	err = pib_cmd_query_srq(&dev->com, srq->srqn, &limit, &depth);
	if (!err && depth != srq->wq.depth) {
		ibdev_err(&dev->ibdev, "QUERY_SRQ: SRQ %#x has depth %u, the driver says %u\n",
			  srq->srqn, depth, srq->wq.depth);
		err = -EIO;
	}
	if (!err) {
		attr->max_wr = srq->wq.depth;
		attr->max_sge = srq->wq.max_sge;
		attr->srq_limit = limit;
	}
	mutex_unlock(&srq->resize_lock);
	return err;
}

/* ------------------------------------------------------------------------------------------
 * Events, posting and retiring
 * ------------------------------------------------------------------------------------------ */

/* An affiliated async event for an SRQ (the AEQ's thread). */
void pib_srq_async_event(struct pib_dev *dev, u32 srqn, enum ib_event_type type)
{
	struct pib_srq *srq = xa_load(&dev->srqs, srqn);
	struct ib_event event = {
		.device = &dev->ibdev,
		.event = type,
	};

	if (!srq) {
		ibdev_dbg(&dev->ibdev, "event %s for SRQ %#x, which is gone\n",
			  ib_event_msg(type), srqn);
		return;
	}
	if (type == IB_EVENT_SRQ_ERR)
		ibdev_err_ratelimited(&dev->ibdev, "SRQ %#x is in error\n", srqn);
	event.element.srq = &srq->ibsrq;
	if (srq->ibsrq.event_handler)
		srq->ibsrq.event_handler(&event, srq->ibsrq.srq_context);
}

/*
 * Kernel SRQs only: a user SRQ's ring is the process's, which the kernel does not map (the
 * uverbs POST_SRQ_RECV command is refused for it).
 */
int pib_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr)
{
	struct pib_srq *srq = to_psrq(ibsrq);

	if (srq->user) {
		*bad_wr = wr;
		return -EINVAL;
	}
	return pib_wq_post_recv(to_pdev(ibsrq->device), &srq->wq, PIB_UAR_SRQ_DB, srq->srqn,
				wr, bad_wr);
}

/*
 * A receive completion of a kernel QP on this SRQ was polled or scrubbed: one more slot is
 * free.  Called under the lock of the CQ it came to; any CQ of the SRQ's QPs may call.
 */
void pib_srq_retire(struct pib_srq *srq)
{
	unsigned long flags;

	spin_lock_irqsave(&srq->wq.lock, flags);
	pib_wq_retire_one(&srq->wq);
	spin_unlock_irqrestore(&srq->wq.lock, flags);
}
