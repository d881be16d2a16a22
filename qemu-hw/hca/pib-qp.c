/*
 * pib HCA device model - queue pairs
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The QP object: creating it (CREATE_QP, struct pib_qp_create in
 * include/pib_hw.h; the ring geometry checked against the rules in
 * include/pib_wqe.h) and destroying it.  Its state machine (MODIFY_QP with
 * the IBTA's table of required and optional attributes, QUERY_QP, entering
 * ERR) is in pib-qp-state.c.  What the QP's engines do lives elsewhere:
 *
 *   pib-wqe.c    fetching and checking WQEs, completions, flushing
 *   pib-sched.c  its doorbells, the run list that runs its engines, timers
 *   pib-req.c    requester: send WQEs -> request packets
 *   pib-resp.c   responder: request packets -> memory, receive CQEs, ACKs
 *                (READ and atomics in pib-resp-rdatom.c)
 *   pib-comp.c   completer: ACKs and responses -> send CQEs, retries
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/host-utils.h"

#include "pib-internal.h"
#include "../trace.h"

const char *pib_qp_state_name(uint8_t state)
{
    switch (state) {
#define PIB_QPS_NAME(id, value) case PIB_QPS_##id: return #id;
    PIB_QP_STATES(PIB_QPS_NAME)
#undef PIB_QPS_NAME
    default: return "?";
    }
}

bool pib_qp_is_connected(const PibQp *qp)
{
    return qp->type == PIB_QPT_UC || pib_qp_type_is_reliable(qp->type);
}

/*
 * Creating and destroying QPs
 */

#define PIB_QPC_F_ALL   (PIB_QPC_F_SQ_SIG_ALL | PIB_QPC_F_NO_RQ | PIB_QPC_F_RQ_DBREC)

/*
 * A QPN for a new QP of this type: QP0 and QP1 for the special QPs (one each), else the
 * next free one; QPNs rotate, so stale ones fail.  False if there is none.
 */
static bool pib_qpn_alloc(PibState *s, uint8_t type, uint32_t *qpn)
{
    uint32_t i, n;

    if (type == PIB_QPT_SMI || type == PIB_QPT_GSI) {
        *qpn = type == PIB_QPT_SMI ? PIB_QPN_SMI : PIB_QPN_GSI;
        return !pib_qp_lookup(s, *qpn);
    }
    for (i = 0; i < PIB_MAX_QP; i++) {
        n = PIB_QPN_FIRST + (s->next_qpn + i) % PIB_MAX_QP;
        if (!pib_qp_lookup(s, n)) {
            s->next_qpn = (n - PIB_QPN_FIRST + 1) % PIB_MAX_QP;
            *qpn = n;
            return true;
        }
    }
    return false;
}

static void pib_qp_free(PibState *s, PibQp *qp)
{
    PibPd *pd = pib_pd_lookup(s, qp->pdn);
    PibXrcd *xrcd = pib_xrcd_lookup(s, qp->xrcd);

    pib_qp_fini_engines(qp);
    pib_mw_unbind_qp(s, qp->qpn);
    pib_mcast_detach_qp(s, qp->qpn);
    if (pd) {
        pd->refcnt--;
    }
    if (xrcd) {
        xrcd->refcnt--;
    }
    if (qp->scq) {
        qp->scq->refcnt--;
    }
    if (qp->rcq) {
        qp->rcq->refcnt--;
    }
    if (qp->srq) {
        qp->srq->refcnt--;
    }
    pib_table_set(&s->qps, qp->qpn, NULL);
    pib_ring_free(s, &qp->sq.ring);
    pib_ring_free(s, &qp->rq.ring);
    g_free(qp->meta);
    g_free(qp);
}

/*
 * A new QP in RESET with what every type starts with; meta_size entries of WQE window (at
 * least one, even for an XRC target, which has no SQ: the engines never need to ask).
 */
static PibQp *pib_qp_new(PibState *s, uint32_t qpn, uint8_t type, uint32_t meta_size)
{
    PibQp *qp = g_new0(PibQp, 1);

    qp->s = s;
    qp->qpn = qpn;
    qp->type = type;
    qp->state = PIB_QPS_RESET;
    qp->meta_size = meta_size;
    qp->meta = g_new0(PibWqeMeta, meta_size);
    qp->port_num = PIB_PORT_NUM;
    qp->path_mtu = PIB_PORT_MTU_ENUM;
    return qp;
}

/* The QP made: the engines set up, and the QPN answers. */
static uint8_t pib_qp_install(PibState *s, PibQp *qp, PibAdminResult *res)
{
    pib_qp_init_engines(qp);
    pib_table_set(&s->qps, qp->qpn, qp);
    res->result0 = qp->qpn;
    return PIB_AQ_OK;
}

/*
 * An XRC_TGT QP (include/pib_hw.h, struct pib_qp_create): an XRC domain and
 * nothing else, no PD, no CQ, no queue.  Its receive side is set up per
 * request, from the XRC SRQ the request names (pib-resp.c).
 */
static uint8_t pib_qp_create_xrc_tgt(PibState *s, const struct pib_qp_create *c,
                                     PibAdminResult *res)
{
    uint32_t xrcdn = le32_to_cpu(c->xrcd);
    PibXrcd *xrcd = pib_xrcd_lookup(s, xrcdn);
    uint32_t qpn;
    PibQp *qp;

    if (!xrcd) {
        return pib_cmd_reject("CREATE_QP", "no such XRCD", xrcdn,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (c->pdn || c->send_cqn || c->recv_cqn || c->sq_depth || c->rq_depth ||
        c->sq_npages || c->rq_npages || c->max_inline ||
        le32_to_cpu(c->srqn) != PIB_SRQN_NONE ||
        c->flags != PIB_QPC_F_NO_RQ) {
        return pib_cmd_reject("CREATE_QP", "an XRC target has no PD, CQ or queue",
                              xrcdn, PIB_AQ_BAD_PARAM);
    }
    if (!pib_qpn_alloc(s, c->type, &qpn)) {
        return pib_cmd_reject("CREATE_QP", "no free QPN", c->type,
                              PIB_AQ_NO_RESOURCES);
    }
    qp = pib_qp_new(s, qpn, PIB_QPT_XRC_TGT, 1);
    qp->xrcd = xrcdn;
    qp->no_rq = true;
    qp->sq.ring.stride_log = PIB_SQ_STRIDE_LOG_MIN;
    qp->rq.ring.stride_log = PIB_RQ_STRIDE_LOG_MIN;
    xrcd->refcnt++;
    trace_pib_qp_create(qpn, qp->type, 0, 0, 0, 0, 0, 0, xrcdn);
    return pib_qp_install(s, qp, res);
}

/*
 * CREATE_QP: struct pib_qp_create in a mailbox.  Ring geometry must be
 * consistent (depths, strides, page counts), the objects it names must exist,
 * and the UAR must be allocated.  A QP on an SRQ has no RQ of its own, nor
 * has an XRC_INI QP, which has no receive CQ either.
 */
uint8_t pib_cmd_create_qp(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    struct pib_qp_create c = { 0 };
    uint32_t pdn, scqn, rcqn, sq_depth, rq_depth, max_inline, uar;
    uint32_t sq_npages, rq_npages, qpn, srqn;
    uint64_t *sq_pages = NULL, *rq_pages = NULL;
    bool no_rq, dbrec;
    PibPd *pd;
    PibCq *scq, *rcq;
    PibSrq *srq = NULL;
    PibQp *qp;
    uint8_t status;

    if (!pib_admin_mbox_read(s, cmd, &c, sizeof(c), "CREATE_QP mailbox")) {
        return PIB_AQ_DMA_ERROR;
    }
    pdn = le32_to_cpu(c.pdn);
    scqn = le32_to_cpu(c.send_cqn);
    rcqn = le32_to_cpu(c.recv_cqn);
    sq_depth = le32_to_cpu(c.sq_depth);
    rq_depth = le32_to_cpu(c.rq_depth);
    max_inline = le32_to_cpu(c.max_inline);
    uar = le32_to_cpu(c.uar);
    sq_npages = le32_to_cpu(c.sq_npages);
    rq_npages = le32_to_cpu(c.rq_npages);
    no_rq = c.flags & PIB_QPC_F_NO_RQ;
    dbrec = c.flags & PIB_QPC_F_RQ_DBREC;

    switch (c.type) {
    case PIB_QPT_RC:
    case PIB_QPT_UC:
    case PIB_QPT_UD:
    case PIB_QPT_SMI:
    case PIB_QPT_GSI:
    case PIB_QPT_XRC_INI:
        break;
    case PIB_QPT_XRC_TGT:
        return pib_qp_create_xrc_tgt(s, &c, res);
    default:
        return pib_cmd_reject("CREATE_QP", "unsupported type", c.type,
                              PIB_AQ_BAD_PARAM);
    }
    if (c.xrcd) {
        return pib_cmd_reject("CREATE_QP", "only an XRC target has an XRCD",
                              le32_to_cpu(c.xrcd), PIB_AQ_BAD_PARAM);
    }
    /* An XRC initiator only sends: no RQ, no SRQ, no receive CQ. */
    if (c.type == PIB_QPT_XRC_INI &&
        (!no_rq || rcqn || le32_to_cpu(c.srqn) != PIB_SRQN_NONE)) {
        return pib_cmd_reject("CREATE_QP", "an XRC initiator has no receive side",
                              rcqn, PIB_AQ_BAD_PARAM);
    }
    pd = pib_pd_lookup(s, pdn);
    scq = pib_cq_lookup(s, scqn);
    rcq = c.type == PIB_QPT_XRC_INI ? NULL : pib_cq_lookup(s, rcqn);
    if (!pd || !scq || (!rcq && c.type != PIB_QPT_XRC_INI)) {
        return pib_cmd_reject("CREATE_QP", "no such PD or CQ",
                              !pd ? pdn : !scq ? scqn : rcqn,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (c.flags & ~PIB_QPC_F_ALL || (dbrec && (no_rq || !s->recv_dbrec))) {
        return pib_cmd_reject("CREATE_QP", "unknown flags, or a record without an RQ or off",
                              c.flags, PIB_AQ_BAD_PARAM);
    }
    srqn = le32_to_cpu(c.srqn);
    if (srqn != PIB_SRQN_NONE) {
        srq = pib_srq_lookup(s, srqn);
        if (!srq) {
            return pib_cmd_reject("CREATE_QP", "no such SRQ", srqn,
                                  PIB_AQ_BAD_RESOURCE);
        }
        if (!no_rq) {
            return pib_cmd_reject("CREATE_QP", "a QP on an SRQ has no RQ", srqn,
                                  PIB_AQ_BAD_PARAM);
        }
        if (srq->xrcd) {
            return pib_cmd_reject("CREATE_QP", "no QP is made on an XRC SRQ",
                                  srqn, PIB_AQ_BAD_PARAM);
        }
    }
    /* (Without an RQ, its stride means nothing.) */
    if (c.sq_stride_log < PIB_SQ_STRIDE_LOG_MIN ||
        c.sq_stride_log > PIB_STRIDE_LOG_MAX ||
        (!no_rq && (c.rq_stride_log < PIB_RQ_STRIDE_LOG_MIN ||
                    c.rq_stride_log > PIB_STRIDE_LOG_MAX))) {
        return pib_cmd_reject("CREATE_QP", "bad stride",
                              c.sq_stride_log << 8 | c.rq_stride_log,
                              PIB_AQ_BAD_PARAM);
    }
    if (sq_depth < 1 || sq_depth > PIB_MAX_QP_WR || !is_power_of_2(sq_depth)) {
        return pib_cmd_reject("CREATE_QP", "bad SQ depth", sq_depth,
                              PIB_AQ_BAD_PARAM);
    }
    if (no_rq ? rq_depth != 0 :
        rq_depth < 1 || rq_depth > PIB_MAX_QP_WR || !is_power_of_2(rq_depth)) {
        return pib_cmd_reject("CREATE_QP", "bad RQ depth", rq_depth,
                              PIB_AQ_BAD_PARAM);
    }
    if (max_inline > pib_sq_max_inline(c.sq_stride_log)) {
        return pib_cmd_reject("CREATE_QP", "max_inline too large", max_inline,
                              PIB_AQ_BAD_PARAM);
    }
    if (sq_npages != pib_ring_pages(sq_depth, c.sq_stride_log) ||
        rq_npages != (no_rq ? 0 : pib_recv_ring_pages(rq_depth, c.rq_stride_log, dbrec))) {
        return pib_cmd_reject("CREATE_QP", "page counts do not match the rings",
                              (uint64_t)sq_npages << 32 | rq_npages,
                              PIB_AQ_BAD_PARAM);
    }
    if (!pib_uar_valid(s, uar)) {
        return pib_cmd_reject("CREATE_QP", "UAR not allocated", uar,
                              PIB_AQ_BAD_PARAM);
    }
    if (!pib_qpn_alloc(s, c.type, &qpn)) {
        return pib_cmd_reject("CREATE_QP", "no free QPN", c.type,
                              PIB_AQ_NO_RESOURCES);
    }
    status = pib_ring_pbl_load(s, le64_to_cpu(c.sq_pbl_addr), sq_npages, 0,
                               &sq_pages, "CREATE_QP");
    if (status != PIB_AQ_OK) {
        return status;
    }
    status = pib_ring_pbl_load(s, le64_to_cpu(c.rq_pbl_addr), rq_npages, 0,
                               &rq_pages, "CREATE_QP");
    if (status != PIB_AQ_OK) {
        PibRing sq = { .npages = sq_npages, .pages = sq_pages };

        pib_ring_free(s, &sq);
        return status;
    }

    qp = pib_qp_new(s, qpn, c.type, MIN(sq_depth, PIB_SQ_WINDOW));
    qp->uar = uar;
    qp->pdn = pdn;
    qp->sig_all = c.flags & PIB_QPC_F_SQ_SIG_ALL;
    qp->no_rq = no_rq;
    qp->scq = scq;
    qp->rcq = rcq;
    qp->srq = srq;
    qp->max_inline = max_inline;
    qp->sq.ring = (PibRing) {
        .depth = sq_depth, .stride_log = c.sq_stride_log,
        .npages = sq_npages, .pages = sq_pages,
    };
    qp->sq.max_sge = pib_sq_max_sge(c.sq_stride_log);
    qp->rq.ring = (PibRing) {
        .depth = rq_depth,
        .stride_log = no_rq ? PIB_RQ_STRIDE_LOG_MIN : c.rq_stride_log,
        .npages = rq_npages, .pages = rq_pages,
    };
    qp->rq.max_sge = no_rq ? 0 : pib_recv_max_sge(c.rq_stride_log);
    qp->rq.dbrec = dbrec ? rq_pages[rq_npages - 1] : 0;
    if (qp->type == PIB_QPT_GSI) {
        qp->qkey = PIB_GSI_QKEY;
    } else if (qp->type == PIB_QPT_SMI) {
        qp->qkey = PIB_SMI_QKEY;
    }
    pd->refcnt++;
    scq->refcnt++;
    if (rcq) {
        rcq->refcnt++;
    }
    if (srq) {
        srq->refcnt++;
    }
    trace_pib_qp_create(qpn, c.type, pdn, scqn, rcqn, sq_depth, rq_depth, uar, 0);
    return pib_qp_install(s, qp, res);
}

/* DESTROY_QP: outstanding work requests complete (flushed) first. */
uint8_t pib_cmd_destroy_qp(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    uint32_t qpn = le32_to_cpu(cmd->in.obj.num);
    PibQp *qp = pib_qp_lookup(s, qpn);

    if (!qp) {
        return pib_cmd_reject("DESTROY_QP", "no such QP", qpn,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (qp->state != PIB_QPS_RESET) {
        pib_qp_error(qp, "destroyed");
        pib_qp_flush(qp);
    }
    pib_qp_free(s, qp);
    trace_pib_obj("destroy", "QP", qpn);
    return PIB_AQ_OK;
}

/* Function reset: every QP goes, without a CQE. */
void pib_qp_reset_all(PibState *s)
{
    uint32_t i;
    PibQp *qp;

    PIB_TABLE_FOREACH(&s->qps, i, qp) {
        pib_qp_free(s, qp);
    }
    s->next_qpn = 0;
}
