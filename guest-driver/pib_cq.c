// SPDX-License-Identifier: GPL-2.0
/*
 * pib_cq.c - completion queues.
 *
 * A CQ is a ring of depth 32-byte CQEs followed by one page whose first u32 is the consumer
 * index record (include/pib_wqe.h, docs/reference/hardware.md "Rings").  A user CQ's ring belongs to
 * the provider: the driver pins it and gives the device its page list, and the provider
 * polls it and arms it with doorbells on its own UAR page.  A user CQ may also ask for
 * completion timestamps (IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION): its CQEs are then 64
 * bytes, the second half the device clock when the CQE was written (struct pib_cqe_ts).  A
 * kernel CQ's ring belongs to the driver, which polls and arms it here, with doorbells on UAR
 * page 0; its CQEs have no timestamps.
 *
 * The device writes a CQE with the phase bit set to 1 on its first pass over the ring, 0 on
 * the second, and so on; a consumer owns the slot at its index once the phase bit is the one
 * it expects for that pass.  The consumer index record tells the device how far the consumer
 * has read; the device reads it when the ring looks full, and if it really is full the CQ
 * overflows: it goes to error and the device raises CQ_ERR (IB_EVENT_CQ_ERR).
 *
 * Completion events: a CQ armed through its doorbell puts one CQE naming it on the CEQ at the
 * next completion that matches the arming (MSI-X vector PIB_MSIX_VEC_CEQ), whoever owns the
 * ring; pib_cq_comp_event() then calls the CQ's completion handler.  With event moderation
 * (modify_cq) the device may hold that CQE back for more completions.
 */
#include <linux/log2.h>
#include <linux/sizes.h>

#include <rdma/uverbs_ioctl.h>

#include "pib.h"
#include "pib_com_cmd.h"
#include "pib-abi.h"

/* A CQE's status is the IB numbering (enum ib_wc_status), passed on unchanged. */
#define PIB_SAME_STATUS(name, value) \
	static_assert((int)PIB_WC_##name == (int)IB_WC_##name, "CQE status " #name);
PIB_WC_STATUSES(PIB_SAME_STATUS)

/* The CQE ring, in whole pages; the consumer index record page follows it (pib_cq_pages()). */
static size_t pib_cq_ring_size(u32 depth)
{
	return (size_t)pib_ring_pages(depth, PIB_CQE_STRIDE_LOG) << PIB_PAGE_SHIFT;
}

/* ------------------------------------------------------------------------------------------
 * Creating and destroying
 * ------------------------------------------------------------------------------------------ */

/* The device's CREATE_CQ flags for the provider's request. */
static u32 pib_cq_flags_of(const struct pib_ibv_create_cq *req)
{
	return req->flags & PIB_IBV_CQ_F_TIMESTAMP ? PIB_CQ_F_TIMESTAMP : 0;
}

/*
 * The provider's request (struct pib_ibv_create_cq), checked field by field: the ring it
 * describes is the one the device will write, so it must be exactly depth CQEs and the
 * record page, page aligned, and deep enough for what ib_core asked for.
 */
static int pib_cq_user_req(struct pib_dev *dev, const struct ib_cq_init_attr *attr,
			   struct ib_udata *udata, struct pib_ibv_create_cq *req)
{
	struct ib_device *ibdev = &dev->ibdev;
	u32 stride_log;
	int err;

	if (udata->inlen < sizeof(*req) ||
	    udata->outlen < offsetofend(struct pib_ibv_create_cq_resp, depth)) {
		ibdev_dbg(ibdev, "create_cq: request %zu / response %zu bytes too short\n",
			  udata->inlen, udata->outlen);
		return -EINVAL;
	}
	if (udata->inlen > sizeof(*req) &&
	    !ib_is_udata_cleared(udata, sizeof(*req), udata->inlen - sizeof(*req))) {
		ibdev_dbg(ibdev, "create_cq: unknown request fields\n");
		return -EOPNOTSUPP;
	}
	err = ib_copy_from_udata(req, udata, sizeof(*req));
	if (err)
		return err;
	if (req->comp_mask & ~PIB_IBV_CREATE_CQ_MASK_FLAGS ||
	    (!(req->comp_mask & PIB_IBV_CREATE_CQ_MASK_FLAGS) && req->flags) ||
	    req->flags & ~PIB_IBV_CQ_F_TIMESTAMP) {
		ibdev_dbg(ibdev, "create_cq: comp_mask %#x flags %#x not supported\n",
			  req->comp_mask, req->flags);
		return -EOPNOTSUPP;
	}
	/* Timestamps need the device clock, and the verbs flag and the ring to agree. */
	if ((req->flags & PIB_IBV_CQ_F_TIMESTAMP) && !dev->clock_khz)
		return -EOPNOTSUPP;
	if (!(req->flags & PIB_IBV_CQ_F_TIMESTAMP) !=
	    !(attr->flags & IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION)) {
		ibdev_dbg(ibdev, "create_cq: flags %#x with ring flags %#x\n", attr->flags,
			  req->flags);
		return -EINVAL;
	}
	if (!is_power_of_2(req->depth) || req->depth < 2 || req->depth > dev->max_cqe ||
	    req->depth < (u64)attr->cqe + 1) {
		ibdev_dbg(ibdev, "create_cq: bad depth %u for %u CQEs\n", req->depth, attr->cqe);
		return -EINVAL;
	}
	stride_log = pib_cqe_stride_log(pib_cq_flags_of(req));
	if (req->buf_size != (size_t)pib_cq_pages(req->depth, stride_log) << PIB_PAGE_SHIFT ||
	    !req->buf_addr || !IS_ALIGNED(req->buf_addr, PIB_PAGE_SIZE)) {
		ibdev_dbg(ibdev, "create_cq: bad ring %#llx size %u for depth %u\n",
			  req->buf_addr, req->buf_size, req->depth);
		return -EINVAL;
	}
	return 0;
}

static int pib_cq_init_user(struct pib_dev *dev, struct pib_cq *cq,
			    const struct ib_cq_init_attr *attr, struct ib_udata *udata,
			    struct pib_pbl *pbl)
{
	struct pib_ibv_create_cq req;
	int err;

	err = pib_cq_user_req(dev, attr, udata, &req);
	if (err)
		return err;

	cq->user = true;
	cq->depth = req.depth;
	cq->cq_flags = pib_cq_flags_of(&req);
	/* The device writes the ring and reads the record page. */
	cq->umem = ib_umem_get(&dev->ibdev, req.buf_addr, req.buf_size, IB_ACCESS_LOCAL_WRITE);
	if (IS_ERR(cq->umem)) {
		err = PTR_ERR(cq->umem);
		cq->umem = NULL;
		return err;
	}
	err = pib_pbl_from_umem(dev, cq->umem, req.buf_size / PIB_PAGE_SIZE, pbl);
	if (err) {
		ib_umem_release(cq->umem);
		cq->umem = NULL;
	}
	return err;
}

/* One slot more than asked for, at least two, a power of two: as the provider sizes it. */
static int pib_cq_init_kernel(struct pib_dev *dev, struct pib_cq *cq,
			      const struct ib_cq_init_attr *attr, struct pib_pbl *pbl)
{
	size_t ring_size;
	int err;

	cq->depth = roundup_pow_of_two(max(attr->cqe + 1, 2u));
	if (cq->depth > dev->max_cqe)
		return -EINVAL;

	ring_size = pib_cq_ring_size(cq->depth);
	err = pib_dma_buf_alloc(dev, ring_size + PIB_PAGE_SIZE, &cq->buf);
	if (err)
		return err;
	cq->ring = cq->buf.va;
	cq->ci_record = cq->buf.va + ring_size;
	cq->ci = 0;

	err = pib_pbl_from_dma_buf(dev, &cq->buf, pbl);
	if (err)
		pib_dma_buf_free(dev, &cq->buf);
	return err;
}

static void pib_cq_fini(struct pib_dev *dev, struct pib_cq *cq)
{
	ib_umem_release(cq->umem);
	pib_dma_buf_free(dev, &cq->buf);
}

int pib_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		  struct pib_create_cq_arg *arg)
{
	struct ib_udata *udata = pib_create_cq_udata(arg);
	struct pib_dev *dev = to_pdev(ibcq->device);
	struct pib_cq *cq = to_pcq(ibcq);
	struct pib_ibv_create_cq_resp resp = {};
	struct pib_cmd_create_cq in = {};
	struct pib_ucontext *uctx;
	struct pib_pbl pbl;
	int err;

	/* Completion timestamps: user CQs only (the provider reads them). */
	if (attr->flags & ~IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION ||
	    (attr->flags && !udata))
		return -EOPNOTSUPP;
	if (attr->comp_vector >= ibcq->device->num_comp_vectors || attr->cqe >= dev->max_cqe)
		return -EINVAL;
	/* No more CQs than CEQ slots: then the CEQ cannot overflow (pib_com.h). */
	if (atomic_inc_return(&dev->num_cqs) > dev->max_cq) {
		err = -ENOMEM;
		goto err_count;
	}
	spin_lock_init(&cq->lock);
	mutex_init(&cq->resize_lock);

	if (udata) {
		uctx = rdma_udata_to_drv_context(udata, struct pib_ucontext, ibucontext);
		err = pib_cq_init_user(dev, cq, attr, udata, &pbl);
		in.uar = uctx->uar;
	} else {
		err = pib_cq_init_kernel(dev, cq, attr, &pbl);
		in.uar = 0;
	}
	if (err)
		goto err_count;

	in.depth = cq->depth;
	in.npages = pbl.npages;
	in.pbl_addr = pbl.dma;
	in.flags = cq->cq_flags;
	err = pib_cmd_create_cq(&dev->com, &in, &cq->cqn);
	pib_pbl_free(dev, &pbl);
	if (err)
		goto err_fini;
	if (cq->cqn >= PIB_DB_OBJ_MASK) {
		ibdev_err(&dev->ibdev, "CREATE_CQ returned CQN %#x, beyond 24 bits\n", cq->cqn);
		err = -EIO;
		goto err_destroy;
	}
	/* From here on CEQEs and async events naming the CQN reach it. */
	err = xa_insert(&dev->cqs, cq->cqn, cq, GFP_KERNEL);
	if (err) {
		if (err == -EBUSY)
			ibdev_err(&dev->ibdev, "CREATE_CQ returned CQN %#x, which is in use\n",
				  cq->cqn);
		goto err_destroy;
	}
	ibcq->cqe = cq->depth - 1;

	if (udata) {
		resp.cqn = cq->cqn;
		resp.depth = cq->depth;
		err = ib_copy_to_udata(udata, &resp, min(sizeof(resp), udata->outlen));
		if (err)
			goto err_erase;
	}
	return 0;

err_erase:
	xa_erase(&dev->cqs, cq->cqn);
	pib_sync_events(dev);
err_destroy:
	pib_destroy_status(dev, "CQ", cq->cqn, pib_cmd_destroy_cq(&dev->com, cq->cqn));
err_fini:
	pib_cq_fini(dev, cq);
err_count:
	atomic_dec(&dev->num_cqs);
	return err;
}

int pib_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibcq->device);
	struct pib_cq *cq = to_pcq(ibcq);
	int err;

	/*
	 * Out of the table first, and the event handlers waited out: once ib_core frees the
	 * CQ, no CEQE or async event can still reach it.  A CEQE the device wrote before it
	 * forgot the CQ finds nothing and is dropped.
	 */
	xa_erase(&dev->cqs, cq->cqn);
	pib_sync_events(dev);

	err = pib_cmd_destroy_cq(&dev->com, cq->cqn);
	err = pib_destroy_status(dev, "CQ", cq->cqn, err);
	if (err) {
		/* Still the device's (a QP uses it): the CQN is still this CQ's, take it back. */
		if (xa_insert(&dev->cqs, cq->cqn, cq, GFP_KERNEL))
			ibdev_err(&dev->ibdev, "CQ %#x will get no more events\n", cq->cqn);
		return err;
	}

	/* The device no longer writes the ring. */
	pib_cq_fini(dev, cq);
	atomic_dec(&dev->num_cqs);
	return 0;
}

/*
 * resize_cq of a user CQ: the provider's new ring (struct pib_ibv_resize_cq), checked as at
 * create, pinned, and handed to the device with the provider's consumer index (RESIZE_CQ): the
 * device moves the CQEs not yet read into it at their own indices, so none is lost.  The old
 * ring stays pinned until the command completed: the device reads it while it copies.  A
 * kernel CQ is polled under a spinlock, across which an admin command cannot wait, and no
 * kernel consumer resizes a CQ: -EOPNOTSUPP.
 */
int pib_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibcq->device);
	struct pib_cq *cq = to_pcq(ibcq);
	struct pib_ibv_resize_cq_resp resp = {};
	struct pib_cmd_resize_cq in = {};
	struct pib_ibv_resize_cq req;
	struct ib_umem *umem, *old;
	struct pib_pbl pbl;
	int err;

	if (!cq->user || !udata)
		return -EOPNOTSUPP;
	err = pib_udata_req(udata, &req, sizeof(req));
	if (err)
		return err;
	if (req.comp_mask)
		return -EOPNOTSUPP;
	if (cqe < 1 || cqe >= dev->max_cqe || !is_power_of_2(req.depth) || req.depth < 2 ||
	    req.depth > dev->max_cqe || req.depth < (u64)cqe + 1 ||
	    req.buf_size != (size_t)pib_cq_pages(req.depth, pib_cqe_stride_log(cq->cq_flags))
			    << PIB_PAGE_SHIFT ||
	    !req.buf_addr || !IS_ALIGNED(req.buf_addr, PIB_PAGE_SIZE)) {
		ibdev_dbg(&dev->ibdev, "resize_cq: bad ring %#llx size %u depth %u for %d CQEs\n",
			  req.buf_addr, req.buf_size, req.depth, cqe);
		return -EINVAL;
	}

	mutex_lock(&cq->resize_lock);
	umem = ib_umem_get(&dev->ibdev, req.buf_addr, req.buf_size, IB_ACCESS_LOCAL_WRITE);
	if (IS_ERR(umem)) {
		err = PTR_ERR(umem);
		goto out;
	}
	err = pib_pbl_from_umem(dev, umem, req.buf_size / PIB_PAGE_SIZE, &pbl);
	if (err) {
		ib_umem_release(umem);
		goto out;
	}
	in.cqn = cq->cqn;
	in.depth = req.depth;
	in.npages = pbl.npages;
	in.ci = req.ci;
	in.pbl_addr = pbl.dma;
	err = pib_cmd_resize_cq(&dev->com, &in);
	pib_pbl_free(dev, &pbl);
	if (err) {
		/* Still on the old ring (too many CQEs unread: -EINVAL). */
		ib_umem_release(umem);
		goto out;
	}
	old = cq->umem;
	cq->umem = umem;
	cq->depth = req.depth;
	ibcq->cqe = req.depth - 1;
	ib_umem_release(old);

	resp.depth = req.depth;
	err = ib_copy_to_udata(udata, &resp, min(sizeof(resp), udata->outlen));
out:
	mutex_unlock(&cq->resize_lock);
	return err;
}

/* ------------------------------------------------------------------------------------------
 * Events
 * ------------------------------------------------------------------------------------------ */

/*
 * modify_cq: event moderation, for user and kernel CQs alike (IPoIB's ethtool -C, and rdma_dim
 * once adaptive moderation is turned on for the device, come through rdma_set_cq_moderation()).
 * The device lets an event wait for cq_count completions or cq_period microseconds, whichever
 * comes first; cq_period 0 turns it off (MODIFY_CQ in pib_hw.h has the rules).  Offered only
 * where the device can wait (pib_query_hw()).
 */
int pib_modify_cq(struct ib_cq *ibcq, u16 cq_count, u16 cq_period)
{
	struct pib_dev *dev = to_pdev(ibcq->device);

	if (cq_count > dev->max_cq_mod_count || cq_period > dev->max_cq_mod_period) {
		ibdev_dbg(&dev->ibdev, "modify_cq: count %u period %u beyond %u, %u\n", cq_count,
			  cq_period, dev->max_cq_mod_count, dev->max_cq_mod_period);
		return -EINVAL;
	}
	return pib_cmd_modify_cq(&dev->com, to_pcq(ibcq)->cqn, cq_count, cq_period);
}

/* A CEQE (hard IRQ): the CQ was armed and has a completion. */
void pib_cq_comp_event(void *data, u32 cqn)
{
	struct pib_dev *dev = data;
	struct pib_cq *cq = xa_load(&dev->cqs, cqn);

	/* Destroyed since it was armed. */
	if (!cq)
		return;
	if (cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
}

/* An affiliated async event for a CQ (the AEQ's thread). */
void pib_cq_async_event(struct pib_dev *dev, u32 cqn, enum ib_event_type type)
{
	struct pib_cq *cq = xa_load(&dev->cqs, cqn);
	struct ib_event event = {
		.device = &dev->ibdev,
		.event = type,
	};

	if (!cq) {
		ibdev_dbg(&dev->ibdev, "event %s for CQ %#x, which is gone\n",
			  ib_event_msg(type), cqn);
		return;
	}
	if (type == IB_EVENT_CQ_ERR)
		ibdev_err_ratelimited(&dev->ibdev, "CQ %#x overflowed; it is in error\n", cqn);
	event.element.cq = &cq->ibcq;
	if (cq->ibcq.event_handler)
		cq->ibcq.event_handler(&event, cq->ibcq.cq_context);
}

/* ------------------------------------------------------------------------------------------
 * Polling and arming kernel CQs.  A user CQ's ring is in the process's memory, which the
 * kernel does not map: the uverbs POLL_CQ and REQ_NOTIFY_CQ commands are refused for it.
 * ------------------------------------------------------------------------------------------ */

/* The CQE at index, if the device has written it on index's pass over the ring, else NULL. */
static struct pib_cqe *pib_cq_cqe(struct pib_cq *cq, u32 index)
{
	struct pib_cqe *cqe = &cq->ring[index & (cq->depth - 1)];

	return pib_ring_entry_new(&cqe->flags, PIB_CQE_F_PHASE, index, cq->depth) ? cqe : NULL;
}

/*
 * The QP a CQE completes a WQE of, provided that its CQEs come to this CQ: then its destroy
 * waits for this CQ's lock (pib_cq_scrub_qp()), which the caller holds, so the QP stays
 * while it is used.  Anything else (a CQE the driver scrubbed, a device bug) names no QP,
 * and the CQE is dropped.
 */
static struct pib_qp *pib_cq_find_qp(struct pib_dev *dev, struct pib_cq *cq,
				     const struct pib_cqe *cqe)
{
	struct pib_qp *qp = xa_load(&dev->qps, cqe->qpn & PIB_DB_OBJ_MASK);
	struct ib_cq *owner;

	if (!qp || qp->user)
		return NULL;
	owner = cqe->opcode & PIB_CQE_RECV ? qp->ibqp.recv_cq : qp->ibqp.send_cq;
	return owner == &cq->ibcq ? qp : NULL;
}

static enum ib_wc_opcode pib_wc_opcode(u8 opcode, bool *known)
{
	*known = true;
	switch (opcode) {
	case PIB_CQE_SEND:              return IB_WC_SEND;
	case PIB_CQE_RDMA_WRITE:        return IB_WC_RDMA_WRITE;
	case PIB_CQE_RDMA_READ:         return IB_WC_RDMA_READ;
	case PIB_CQE_COMP_SWAP:         return IB_WC_COMP_SWAP;
	case PIB_CQE_FETCH_ADD:         return IB_WC_FETCH_ADD;
	case PIB_CQE_BIND_MW:           return IB_WC_BIND_MW;
	case PIB_CQE_LOCAL_INV:         return IB_WC_LOCAL_INV;
	case PIB_CQE_REG_MR:            return IB_WC_REG_MR;
	case PIB_CQE_RECV:              return IB_WC_RECV;
	case PIB_CQE_RECV_RDMA_IMM:     return IB_WC_RECV_RDMA_WITH_IMM;
	}
	*known = false;
	return IB_WC_SEND;
}

static void pib_cqe_to_wc(const struct pib_cqe *cqe, struct pib_qp *qp, struct ib_wc *wc)
{
	bool known;

	*wc = (struct ib_wc){
		.wr_id = cqe->wr_id,
		.status = cqe->status,
		.opcode = pib_wc_opcode(cqe->opcode, &known),
		.byte_len = cqe->byte_len,
		.qp = &qp->ibqp,
		.src_qp = cqe->src_qp & PIB_DB_OBJ_MASK,
		.slid = cqe->slid,
		.sl = cqe->sl,
		.port_num = PIB_PORT_NUM,
	};

	/* A status or opcode the driver does not know is a device error. */
	if (cqe->status > PIB_WC_GENERAL_ERR || (cqe->status == PIB_WC_SUCCESS && !known)) {
		wc->status = IB_WC_GENERAL_ERR;
		wc->vendor_err = cqe->status;
		return;
	}
	if (cqe->flags & PIB_CQE_F_IMM) {
		/* Immediate data stays in network order, as on the wire. */
		wc->ex.imm_data = (__force __be32)cqe->imm_inv;
		wc->wc_flags |= IB_WC_WITH_IMM;
	} else if (cqe->flags & PIB_CQE_F_INV) {
		wc->ex.invalidate_rkey = cqe->imm_inv;
		wc->wc_flags |= IB_WC_WITH_INVALIDATE;
	}
	if (cqe->flags & PIB_CQE_F_GRH)
		wc->wc_flags |= IB_WC_GRH;
	/*
	 * A datagram's receive completion also says which P_Key it matched and which of the
	 * port's LIDs (LMC) it was sent to: ib_mad answers a MAD on the same P_Key.
	 */
	if ((cqe->opcode & PIB_CQE_RECV) && qp->ibqp.qp_type != IB_QPT_RC &&
	    qp->ibqp.qp_type != IB_QPT_UC) {
		wc->pkey_index = cqe->qpn >> PIB_CQE_PKEY_INDEX_SHIFT;
		wc->dlid_path_bits = (cqe->src_qp >> PIB_CQE_PATH_BITS_SHIFT) &
				     PIB_CQE_PATH_BITS_MASK;
	}
}

int pib_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct pib_dev *dev = to_pdev(ibcq->device);
	struct pib_cq *cq = to_pcq(ibcq);
	struct pib_cqe *cqe;
	struct pib_qp *qp;
	unsigned long flags;
	int npolled = 0;
	u32 start;

	if (cq->user)
		return -EINVAL;

	spin_lock_irqsave(&cq->lock, flags);
	start = cq->ci;
	while (npolled < num_entries) {
		cqe = pib_cq_cqe(cq, cq->ci);
		if (!cqe)
			break;
		qp = pib_cq_find_qp(dev, cq, cqe);
		if (qp) {
			pib_qp_retire(qp, cqe);
			/* A QP being destroyed gives its consumer nothing more (its flushes). */
			if (!READ_ONCE(qp->destroying))
				pib_cqe_to_wc(cqe, qp, &wc[npolled++]);
		}
		cq->ci++;
	}
	if (cq->ci != start) {
		/*
		 * Tell the device how far the ring has been read, only after reading the CQEs:
		 * once it sees the new index it may overwrite their slots.
		 */
		dma_mb();
		WRITE_ONCE(*cq->ci_record, cq->ci);
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	return npolled;
}

int pib_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct pib_dev *dev = to_pdev(ibcq->device);
	struct pib_cq *cq = to_pcq(ibcq);
	u32 arm = PIB_DB_CQ_ARM;
	unsigned long irqflags;
	int ret = 0;

	if (cq->user)
		return -EINVAL;
	if ((flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED)
		arm |= PIB_DB_CQ_SOLICITED;

	/* The doorbell carries the consumer index, which poll_cq moves under the lock. */
	spin_lock_irqsave(&cq->lock, irqflags);
	pib_ring_doorbell(dev, PIB_UAR_CQ_DB, cq->cqn | arm, cq->ci);
	/*
	 * Arming covers the completions to come; one the device wrote before it raises no
	 * event.  The caller who asks is told, so that it polls again instead of waiting.
	 */
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && pib_cq_cqe(cq, cq->ci))
		ret = 1;
	spin_unlock_irqrestore(&cq->lock, irqflags);
	return ret;
}

/*
 * Make the CQEs of a kernel QP that is gone (or was reset) name no QP.  They name it only by
 * number, and the number may soon belong to another QP, which must not retire WQEs for them
 * or hand its consumer their wr_ids.  The slots from the consumer index to the first one the
 * device has not written are the driver's to change: the device writes none of them again
 * before the consumer index moves past.  IB_MULTICAST_QPN is never a QP's number.
 *
 * The QP's own rings need no retiring (they are freed, or start over after RESET), but the
 * SRQ it takes receives from (srq, or NULL) lives on: each scrubbed receive CQE stands for
 * an SRQ WQE taken, whose slot is retired here as poll_cq would have.
 */
void pib_cq_scrub_qp(struct pib_cq *cq, u32 qpn, struct pib_srq *srq)
{
	struct pib_cqe *cqe;
	unsigned long flags;
	u32 i;

	spin_lock_irqsave(&cq->lock, flags);
	for (i = cq->ci; i - cq->ci < cq->depth; i++) {
		cqe = pib_cq_cqe(cq, i);
		if (!cqe)
			break;
		if ((cqe->qpn & PIB_DB_OBJ_MASK) != qpn)
			continue;
		if (srq && (cqe->opcode & PIB_CQE_RECV))
			pib_srq_retire(srq);
		WRITE_ONCE(cqe->qpn, IB_MULTICAST_QPN);
	}
	spin_unlock_irqrestore(&cq->lock, flags);
}
