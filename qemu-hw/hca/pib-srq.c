/*
 * pib HCA device model - shared receive queues
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * An SRQ (docs/reference/hardware.md "Shared receive queues") is a ring of receive WQEs
 * that the driver produces (SRQ doorbell, pib-sched.c) and the responders of
 * the QPs created on it consume.  A QP takes the SRQ's next WQE when a
 * message needs one and copies it (pib_srq_take), so its slot is free at
 * once: the consumer retires one SRQ slot per receive completion of any QP
 * on the SRQ.  Falling below an armed limit raises SRQ_LIMIT once and
 * disarms, as IB specifies.
 *
 * XRC (IBTA 9.8): an XRC domain (ALLOC_XRCD, pib-pd.c) groups XRC SRQs and XRC_TGT QPs.
 * An XRC SRQ is an SRQ with a domain and a CQ of its own; no QP is created on
 * it.  An XRC_TGT QP takes, for each message, a WQE of the SRQ the request's
 * XRCETH names, if that SRQ is an XRC SRQ of the QP's domain, and completes
 * it on that SRQ's CQ (pib-resp.c).
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/host-utils.h"

#include "pib-internal.h"
#include "../trace.h"

/*
 * Creating and destroying SRQs
 */

/* Is depth an SRQ ring size CREATE_SRQ and MODIFY_SRQ accept? */
static bool pib_srq_depth_ok(uint32_t depth)
{
    return depth >= 1 && depth <= PIB_MAX_SRQ_WR && is_power_of_2(depth);
}

/* The producer index in the SRQ's doorbell record, if it has one (pib_wqe.h). */
static void pib_srq_refresh(PibState *s, PibSrq *srq)
{
    pib_dbrec_read(s, srq->dbrec, srq->ring.depth, srq->ci, &srq->pi, "SRQ",
                   srq->srqn);
}

/*
 * CREATE_SRQ: a ring of depth receive WQEs of 2^stride_log bytes on the
 * pages of the page list; the limit, if armed, below the depth.
 */
uint8_t pib_cmd_create_srq(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    const struct pib_cmd_create_srq *in = &cmd->in.create_srq;
    uint32_t pdn = le32_to_cpu(in->pdn);
    uint32_t depth = le32_to_cpu(in->depth);
    uint32_t limit = le32_to_cpu(in->limit);
    uint32_t uar = le32_to_cpu(in->uar);
    uint32_t npages = le32_to_cpu(in->npages);
    uint32_t xrcdn = le32_to_cpu(in->xrcd);
    uint32_t cqn = le32_to_cpu(in->cqn);
    bool xrc = in->flags & PIB_SRQ_F_XRC;
    bool dbrec = in->flags & PIB_SRQ_F_DBREC;
    PibPd *pd = pib_pd_lookup(s, pdn);
    PibXrcd *xrcd = NULL;
    PibCq *cq = NULL;
    uint64_t *pages;
    uint32_t srqn;
    uint8_t status;
    PibSrq *srq;

    if (!pd) {
        return pib_cmd_reject("CREATE_SRQ", "no such PD", pdn,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (in->flags & ~(PIB_SRQ_F_XRC | PIB_SRQ_F_DBREC) || (dbrec && !s->recv_dbrec) ||
        in->rsvd0[0] || in->rsvd0[1] ||
        (!xrc && (xrcdn || cqn))) {
        return pib_cmd_reject("CREATE_SRQ", "unknown flags or fields", in->flags,
                              PIB_AQ_BAD_PARAM);
    }
    if (xrc) {
        xrcd = pib_xrcd_lookup(s, xrcdn);
        cq = pib_cq_lookup(s, cqn);
        if (!xrcd || !cq) {
            return pib_cmd_reject("CREATE_SRQ", "no such XRCD or CQ",
                                  !xrcd ? xrcdn : cqn, PIB_AQ_BAD_RESOURCE);
        }
    }
    if (!pib_srq_depth_ok(depth)) {
        return pib_cmd_reject("CREATE_SRQ", "bad depth", depth,
                              PIB_AQ_BAD_PARAM);
    }
    if (in->stride_log < PIB_RQ_STRIDE_LOG_MIN ||
        in->stride_log > PIB_STRIDE_LOG_MAX) {
        return pib_cmd_reject("CREATE_SRQ", "bad stride", in->stride_log,
                              PIB_AQ_BAD_PARAM);
    }
    if (limit >= depth) {
        return pib_cmd_reject("CREATE_SRQ", "limit not below depth", limit,
                              PIB_AQ_BAD_PARAM);
    }
    if (npages != pib_recv_ring_pages(depth, in->stride_log, dbrec)) {
        return pib_cmd_reject("CREATE_SRQ", "npages does not match the ring",
                              npages, PIB_AQ_BAD_PARAM);
    }
    if (!pib_uar_valid(s, uar)) {
        return pib_cmd_reject("CREATE_SRQ", "UAR not allocated", uar,
                              PIB_AQ_BAD_PARAM);
    }
    srqn = pib_table_alloc(&s->srqs);
    if (!srqn) {
        return pib_cmd_reject("CREATE_SRQ", "table full", PIB_MAX_SRQ,
                              PIB_AQ_NO_RESOURCES);
    }
    status = pib_ring_pbl_load(s, le64_to_cpu(in->pbl_addr), npages, 0, &pages,
                               "CREATE_SRQ");
    if (status != PIB_AQ_OK) {
        return status;
    }

    srq = g_new0(PibSrq, 1);
    srq->srqn = srqn;
    srq->uar = uar;
    srq->pdn = pdn;
    srq->ring = (PibRing) {
        .depth = depth, .stride_log = in->stride_log, .npages = npages,
        .pages = pages,
    };
    srq->max_sge = pib_recv_max_sge(in->stride_log);
    srq->limit = limit;
    srq->dbrec = dbrec ? pages[npages - 1] : 0;
    if (xrc) {
        srq->xrcd = xrcdn;
        srq->cq = cq;
        xrcd->refcnt++;
        cq->refcnt++;
    }
    pib_table_set(&s->srqs, srqn, srq);
    pd->refcnt++;
    trace_pib_srq_create(srqn, depth, limit, uar, xrcdn, cqn);
    res->result0 = srqn;
    return PIB_AQ_OK;
}

/*
 * MODIFY_SRQ (include/pib_hw.h): arm (or disarm) the limit, and/or move the
 * SRQ to a new ring of max_wr slots of the same stride (MAX_WR).  Indices
 * carry on, and the driver has written the WQEs not yet taken into their
 * slots of the new ring, so the device only switches rings: from here on it
 * takes WQE i from slot i % max_wr of the new one.  Every check comes before
 * any change.
 */
uint8_t pib_cmd_modify_srq(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    const struct pib_cmd_modify_srq *in = &cmd->in.modify_srq;
    uint32_t srqn = le32_to_cpu(in->srqn);
    uint32_t mask = le32_to_cpu(in->attr_mask);
    uint32_t limit = le32_to_cpu(in->limit);
    uint32_t depth = le32_to_cpu(in->max_wr);
    uint32_t npages = le32_to_cpu(in->npages);
    PibSrq *srq = pib_srq_lookup(s, srqn);
    uint64_t *pages = NULL;
    uint8_t status;

    if (!srq) {
        return pib_cmd_reject("MODIFY_SRQ", "no such SRQ", srqn,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (mask & ~(PIB_SRQ_ATTR_LIMIT | PIB_SRQ_ATTR_MAX_WR)) {
        return pib_cmd_reject("MODIFY_SRQ", "unknown attributes", mask,
                              PIB_AQ_BAD_PARAM);
    }
    /* What is posted now: the WQEs not taken must fit a new ring. */
    pib_srq_refresh(s, srq);
    if (!(mask & PIB_SRQ_ATTR_MAX_WR)) {
        depth = srq->ring.depth;
    } else if (!pib_srq_depth_ok(depth)) {
        return pib_cmd_reject("MODIFY_SRQ", "bad max_wr", depth,
                              PIB_AQ_BAD_PARAM);
    } else if (srq->pi - srq->ci > depth) {
        return pib_cmd_reject("MODIFY_SRQ", "WQEs not taken do not fit",
                              srq->pi - srq->ci, PIB_AQ_BAD_PARAM);
    } else if (npages != pib_recv_ring_pages(depth, srq->ring.stride_log,
                                             srq->dbrec != 0)) {
        return pib_cmd_reject("MODIFY_SRQ", "npages does not match the ring",
                              npages, PIB_AQ_BAD_PARAM);
    }
    if (!(mask & PIB_SRQ_ATTR_LIMIT)) {
        limit = srq->limit;
    }
    if (limit >= depth) {
        return pib_cmd_reject("MODIFY_SRQ", "limit not below depth", limit,
                              PIB_AQ_BAD_PARAM);
    }
    if (mask & PIB_SRQ_ATTR_MAX_WR) {
        status = pib_ring_pbl_load(s, le64_to_cpu(in->pbl_addr), npages,
                                   srq->ring.npages, &pages, "MODIFY_SRQ");
        if (status != PIB_AQ_OK) {
            return status;
        }
        trace_pib_srq_resize(srqn, srq->ring.depth, depth, srq->ci, srq->pi);
        pib_ring_free(s, &srq->ring);
        srq->ring.pages = pages;
        srq->ring.npages = npages;
        srq->ring.depth = depth;
        if (srq->dbrec) {   /* the consumer wrote its index there already */
            srq->dbrec = pages[npages - 1];
        }
    }
    if (mask & PIB_SRQ_ATTR_LIMIT) {
        srq->limit = limit;
        trace_pib_srq_limit(srqn, limit, srq->pi - srq->ci);
    }
    return PIB_AQ_OK;
}

uint8_t pib_cmd_query_srq(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    uint32_t srqn = le32_to_cpu(cmd->in.obj.num);
    PibSrq *srq = pib_srq_lookup(s, srqn);

    if (!srq) {
        return pib_cmd_reject("QUERY_SRQ", "no such SRQ", srqn,
                              PIB_AQ_BAD_RESOURCE);
    }
    res->result0 = srq->limit;
    res->result1 = srq->ring.depth;
    return PIB_AQ_OK;
}

static void pib_srq_free(PibState *s, PibSrq *srq)
{
    PibPd *pd = pib_pd_lookup(s, srq->pdn);
    PibXrcd *xrcd = pib_xrcd_lookup(s, srq->xrcd);
    uint32_t i;
    PibQp *qp;

    if (pd) {
        pd->refcnt--;
    }
    if (xrcd) {
        xrcd->refcnt--;
    }
    if (srq->cq) {
        srq->cq->refcnt--;
    }
    /*
     * An XRC SRQ has no QPs to hold it, but an XRC_TGT QP may be in the middle
     * of a message whose WQE it took from it: the WQE goes with the SRQ, and
     * the rest of the message finds no SRQ (pib-resp.c answers it with an
     * invalid request NAK).
     */
    if (srq->xrcd) {
        PIB_TABLE_FOREACH(&s->qps, i, qp) {
            if (qp->resp.rwqe_srq == srq) {
                qp->resp.rwqe_valid = false;
                qp->resp.rwqe_srq = NULL;
                qp->resp.opcode = -1;   /* a MIDDLE or LAST now breaks the sequence */
            }
        }
    }
    pib_table_set(&s->srqs, srq->srqn, NULL);
    pib_ring_free(s, &srq->ring);
    g_free(srq);
}

uint8_t pib_cmd_destroy_srq(PibState *s, const struct pib_admin_cmd *cmd,
                            PibAdminResult *res)
{
    uint32_t srqn = le32_to_cpu(cmd->in.obj.num);
    PibSrq *srq = pib_srq_lookup(s, srqn);

    if (!srq) {
        return pib_cmd_reject("DESTROY_SRQ", "no such SRQ", srqn,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (srq->refcnt) {
        return pib_cmd_reject("DESTROY_SRQ", "in use", srq->refcnt,
                              PIB_AQ_BUSY);
    }
    trace_pib_obj("destroy", "SRQ", srqn);
    pib_srq_free(s, srq);
    return PIB_AQ_OK;
}

/*
 * Taking WQEs
 */

/*
 * Take the next WQE of srq (the QP's SRQ, or the XRC SRQ a request to an
 * XRC_TGT QP names), if there is one: copied into *w, its
 * slot given back to the producer at once (the consumer frees it when the
 * receive completion appears), the limit event raised when the SRQ falls
 * below its limit.  Its SGEs belong to the SRQ's PD.  Returns false if the
 * SRQ is empty; a malformed WQE is taken too, with *status set.
 */
bool pib_srq_take(PibQp *qp, PibSrq *srq, PibRecvWqe *w, uint8_t *status)
{
    if (srq->ci == srq->pi) {
        pib_srq_refresh(qp->s, srq);
    }
    if (srq->ci == srq->pi) {
        return false;
    }
    pib_recv_fetch(qp, &srq->ring, srq->max_sge, "SRQ", srq->ci, w, status);
    w->pdn = srq->pdn;
    srq->ci++;
    if (srq->limit) {
        pib_srq_refresh(qp->s, srq);    /* judge the limit on what is posted now */
    }
    if (srq->limit && srq->pi - srq->ci < srq->limit) {
        trace_pib_srq_limit(srq->srqn, 0, srq->pi - srq->ci);
        srq->limit = 0;
        pib_aeq_post(qp->s, PIB_AE_SRQ_LIMIT, srq->srqn, 0);
    }
    return true;
}

/* Function reset: every SRQ goes (the QPs on them went first; their domains go after). */
void pib_srq_reset_all(PibState *s)
{
    uint32_t i;
    PibSrq *srq;

    PIB_TABLE_FOREACH(&s->srqs, i, srq) {
        pib_srq_free(s, srq);
    }
}
