/*
 * pib HCA device model - queue pairs
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The QP object: creating it (the ring geometry checked against the rules in
 * include/pib_wqe.h), its state machine (MODIFY_QP with the IBTA's table of
 * required and optional attributes, QUERY_QP), entering ERR, and destroying
 * it.  What the QP's engines do lives elsewhere:
 *
 *   pib-wqe.c    fetching and checking WQEs, completions, flushing
 *   pib-sched.c  its doorbells, the run list that runs its engines, timers
 *   pib-req.c    requester: send WQEs -> request packets
 *   pib-resp.c   responder: request packets -> memory, receive CQEs, ACKs
 *                (READ and atomics in pib-resp-rdatom.c)
 *   pib-comp.c   completer: ACKs and responses -> send CQEs, retries
 *
 * States and what runs in them:
 *
 *   RESET  nothing; doorbells are recorded; entering RESET zeroes the ring
 *          indices and forgets all transport state
 *   INIT   receive WQEs may be posted; nothing is executed
 *   RTR    the responder runs (incoming requests, ACKs, READ responses)
 *   RTS    the requester and completer run too
 *   SQD    the requester finishes the message in progress and starts no new
 *          WQE; SQ_DRAINED when all outstanding work completed (if asked)
 *   SQE    (not entered by this device: errors go to ERR)
 *   ERR    every outstanding WQE, and every WQE rung later, completes with
 *          WR_FLUSH_ERR; nothing else runs
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/host-utils.h"

#include "pib-internal.h"
#include "trace.h"

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
    return qp->type == PIB_QPT_RC || qp->type == PIB_QPT_UC;
}

/*
 * Creating and destroying QPs
 */

#define PIB_QPC_F_ALL   (PIB_QPC_F_SQ_SIG_ALL | PIB_QPC_F_NO_RQ)

PibQp *pib_qp_lookup(PibState *s, uint32_t qpn)
{
    return qpn < PIB_QPN_LIMIT ? s->qp[qpn] : NULL;
}

/*
 * A QPN for a new QP of this type: QP0 and QP1 for the special QPs (one each), else the
 * next free one; QPNs rotate, so stale ones fail.  False if there is none.
 */
static bool pib_qpn_alloc(PibState *s, uint8_t type, uint32_t *qpn)
{
    uint32_t i, n;

    if (type == PIB_QPT_SMI || type == PIB_QPT_GSI) {
        *qpn = type == PIB_QPT_SMI ? PIB_QPN_SMI : PIB_QPN_GSI;
        return !s->qp[*qpn];
    }
    for (i = 0; i < PIB_MAX_QP; i++) {
        n = PIB_QPN_FIRST + (s->next_qpn + i) % PIB_MAX_QP;
        if (!s->qp[n]) {
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

    pib_qp_fini_engines(qp);
    pib_mw_unbind_qp(s, qp->qpn);
    pib_mcast_detach_qp(s, qp->qpn);
    if (pd) {
        pd->refcnt--;
    }
    qp->scq->refcnt--;
    qp->rcq->refcnt--;
    if (qp->srq) {
        qp->srq->refcnt--;
    }
    s->qp[qp->qpn] = NULL;
    g_free(qp->sq.ring.pages);
    g_free(qp->rq.ring.pages);
    g_free(qp->meta);
    g_free(qp);
}

/*
 * CREATE_QP: struct pib_qp_create in a mailbox.  Ring geometry must be
 * consistent (depths, strides, page counts), the objects it names must exist,
 * and the UAR must be allocated.  A QP on an SRQ has no RQ of its own.
 */
uint8_t pib_cmd_create_qp(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    struct pib_qp_create c = { 0 };
    uint32_t pdn, scqn, rcqn, sq_depth, rq_depth, max_inline, uar;
    uint32_t sq_npages, rq_npages, qpn, srqn;
    uint64_t *sq_pages = NULL, *rq_pages = NULL;
    bool no_rq;
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

    pd = pib_pd_lookup(s, pdn);
    scq = pib_cq_lookup(s, scqn);
    rcq = pib_cq_lookup(s, rcqn);
    if (!pd || !scq || !rcq) {
        return pib_cmd_reject("CREATE_QP", "no such PD or CQ",
                              !pd ? pdn : !scq ? scqn : rcqn,
                              PIB_AQ_BAD_RESOURCE);
    }
    switch (c.type) {
    case PIB_QPT_RC:
    case PIB_QPT_UC:
    case PIB_QPT_UD:
    case PIB_QPT_SMI:
    case PIB_QPT_GSI:
        break;
    default:
        return pib_cmd_reject("CREATE_QP", "unsupported type", c.type,
                              PIB_AQ_BAD_PARAM);
    }
    if (c.flags & ~PIB_QPC_F_ALL) {
        return pib_cmd_reject("CREATE_QP", "unknown flags", c.flags,
                              PIB_AQ_BAD_PARAM);
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
        rq_npages != (no_rq ? 0 : pib_ring_pages(rq_depth, c.rq_stride_log))) {
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
    status = pib_pbl_load(s, le64_to_cpu(c.sq_pbl_addr), sq_npages, &sq_pages,
                          "CREATE_QP");
    if (status == PIB_AQ_OK) {
        status = pib_pbl_load(s, le64_to_cpu(c.rq_pbl_addr), rq_npages,
                              &rq_pages, "CREATE_QP");
    }
    if (status != PIB_AQ_OK) {
        g_free(sq_pages);
        return status;
    }

    qp = g_new0(PibQp, 1);
    qp->s = s;
    qp->qpn = qpn;
    qp->uar = uar;
    qp->pdn = pdn;
    qp->type = c.type;
    qp->state = PIB_QPS_RESET;
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
    qp->meta_size = MIN(sq_depth, PIB_SQ_WINDOW);
    qp->meta = g_new0(PibWqeMeta, qp->meta_size);
    qp->port_num = PIB_PORT_NUM;
    qp->path_mtu = PIB_PORT_MTU_ENUM;
    if (qp->type == PIB_QPT_GSI) {
        qp->qkey = PIB_GSI_QKEY;
    } else if (qp->type == PIB_QPT_SMI) {
        qp->qkey = PIB_SMI_QKEY;
    }
    pib_qp_init_engines(qp);

    pd->refcnt++;
    scq->refcnt++;
    rcq->refcnt++;
    if (srq) {
        srq->refcnt++;
    }
    s->qp[qpn] = qp;
    trace_pib_qp_create(qpn, c.type, pdn, scqn, rcqn, sq_depth, rq_depth, uar);
    res->result0 = qpn;
    return PIB_AQ_OK;
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

/*
 * The state machine: MODIFY_QP, QUERY_QP, entering ERR
 */

/*
 * The modify-QP table: which transitions exist and which attributes each one
 * requires and allows, per QP type (IBTA 11.2.5.3, and Linux's
 * ib_modify_qp_is_ok).  PIB_QP_STATE is always allowed.
 */
#define NTYPES  (PIB_QPT_UD + 1)
typedef struct PibQpTransition {
    bool valid;
    uint32_t req[NTYPES];
    uint32_t opt[NTYPES];
} PibQpTransition;

#define RC_UC_PATH  (PIB_QP_CUR_STATE | PIB_QP_ALT_PATH | \
                     PIB_QP_ACCESS_FLAGS | PIB_QP_PATH_MIG_STATE)

/* What RESET -> INIT requires, and INIT -> INIT allows. */
#define INIT_ATTRS {                                                        \
        [PIB_QPT_UD]  = PIB_QP_PKEY_INDEX | PIB_QP_PORT | PIB_QP_QKEY,     \
        [PIB_QPT_UC]  = PIB_QP_PKEY_INDEX | PIB_QP_PORT |                  \
                        PIB_QP_ACCESS_FLAGS,                                \
        [PIB_QPT_RC]  = PIB_QP_PKEY_INDEX | PIB_QP_PORT |                  \
                        PIB_QP_ACCESS_FLAGS,                                \
        [PIB_QPT_GSI] = PIB_QP_PKEY_INDEX | PIB_QP_QKEY,                   \
    }

/* What a move to RTS allows, from RTR, RTS or SQD. */
#define RTS_OPT {                                                           \
        [PIB_QPT_UD]  = PIB_QP_CUR_STATE | PIB_QP_QKEY,                    \
        [PIB_QPT_UC]  = RC_UC_PATH,                                         \
        [PIB_QPT_RC]  = RC_UC_PATH | PIB_QP_MIN_RNR_TIMER,                 \
        [PIB_QPT_GSI] = PIB_QP_CUR_STATE | PIB_QP_QKEY,                    \
    }

static const PibQpTransition pib_qp_table[PIB_QPS_ERR + 1][PIB_QPS_ERR + 1] = {
    [PIB_QPS_RESET] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_INIT] = {
            .valid = true,
            .req = INIT_ATTRS,
        },
    },
    [PIB_QPS_INIT] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_ERR] = { .valid = true },
        [PIB_QPS_INIT] = {
            .valid = true,
            .opt = INIT_ATTRS,
        },
        [PIB_QPS_RTR] = {
            .valid = true,
            .req = {
                [PIB_QPT_UC]  = PIB_QP_AV | PIB_QP_PATH_MTU |
                                PIB_QP_DEST_QPN | PIB_QP_RQ_PSN,
                [PIB_QPT_RC]  = PIB_QP_AV | PIB_QP_PATH_MTU |
                                PIB_QP_DEST_QPN | PIB_QP_RQ_PSN |
                                PIB_QP_MAX_DEST_RD_ATOMIC |
                                PIB_QP_MIN_RNR_TIMER,
            },
            .opt = {
                [PIB_QPT_UD]  = PIB_QP_PKEY_INDEX | PIB_QP_QKEY,
                [PIB_QPT_UC]  = PIB_QP_ALT_PATH | PIB_QP_ACCESS_FLAGS |
                                PIB_QP_PKEY_INDEX,
                [PIB_QPT_RC]  = PIB_QP_ALT_PATH | PIB_QP_ACCESS_FLAGS |
                                PIB_QP_PKEY_INDEX,
                [PIB_QPT_GSI] = PIB_QP_PKEY_INDEX | PIB_QP_QKEY,
            },
        },
    },
    [PIB_QPS_RTR] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_ERR] = { .valid = true },
        [PIB_QPS_RTS] = {
            .valid = true,
            .req = {
                [PIB_QPT_UD]  = PIB_QP_SQ_PSN,
                [PIB_QPT_UC]  = PIB_QP_SQ_PSN,
                [PIB_QPT_RC]  = PIB_QP_TIMEOUT | PIB_QP_RETRY_CNT |
                                PIB_QP_RNR_RETRY | PIB_QP_SQ_PSN |
                                PIB_QP_MAX_QP_RD_ATOMIC,
                [PIB_QPT_GSI] = PIB_QP_SQ_PSN,
            },
            .opt = RTS_OPT,
        },
    },
    [PIB_QPS_RTS] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_ERR] = { .valid = true },
        [PIB_QPS_RTS] = {
            .valid = true,
            .opt = RTS_OPT,
        },
        [PIB_QPS_SQD] = {
            .valid = true,
            .opt = {
                [PIB_QPT_UD]  = PIB_QP_EN_SQD_ASYNC_NOTIFY,
                [PIB_QPT_UC]  = PIB_QP_EN_SQD_ASYNC_NOTIFY,
                [PIB_QPT_RC]  = PIB_QP_EN_SQD_ASYNC_NOTIFY,
                [PIB_QPT_GSI] = PIB_QP_EN_SQD_ASYNC_NOTIFY,
            },
        },
    },
    [PIB_QPS_SQD] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_ERR] = { .valid = true },
        [PIB_QPS_RTS] = {
            .valid = true,
            .opt = RTS_OPT,
        },
        [PIB_QPS_SQD] = {
            .valid = true,
            .opt = {
                [PIB_QPT_UD]  = PIB_QP_PKEY_INDEX | PIB_QP_QKEY,
                [PIB_QPT_UC]  = PIB_QP_AV | PIB_QP_ALT_PATH |
                                PIB_QP_ACCESS_FLAGS | PIB_QP_PKEY_INDEX |
                                PIB_QP_PATH_MIG_STATE,
                [PIB_QPT_RC]  = PIB_QP_PORT | PIB_QP_AV | PIB_QP_TIMEOUT |
                                PIB_QP_RETRY_CNT | PIB_QP_RNR_RETRY |
                                PIB_QP_MAX_QP_RD_ATOMIC |
                                PIB_QP_MAX_DEST_RD_ATOMIC | PIB_QP_ALT_PATH |
                                PIB_QP_ACCESS_FLAGS | PIB_QP_PKEY_INDEX |
                                PIB_QP_MIN_RNR_TIMER | PIB_QP_PATH_MIG_STATE,
                [PIB_QPT_GSI] = PIB_QP_PKEY_INDEX | PIB_QP_QKEY,
            },
        },
    },
    [PIB_QPS_SQE] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_ERR] = { .valid = true },
        [PIB_QPS_RTS] = {
            .valid = true,
            .opt = {
                [PIB_QPT_UD]  = PIB_QP_CUR_STATE | PIB_QP_QKEY,
                [PIB_QPT_UC]  = PIB_QP_CUR_STATE | PIB_QP_ACCESS_FLAGS,
                [PIB_QPT_GSI] = PIB_QP_CUR_STATE | PIB_QP_QKEY,
            },
        },
    },
    [PIB_QPS_ERR] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_ERR] = { .valid = true },
    },
};

static void pib_qp_set_state(PibQp *qp, uint8_t state, const char *why)
{
    trace_pib_qp_state(qp->qpn, pib_qp_state_name(qp->state),
                       pib_qp_state_name(state), why);
    qp->state = state;
}

/*
 * The QP enters ERR (a completion error, a protocol error, MODIFY_QP, or
 * DESTROY_QP): transport stops, outstanding work is flushed.
 */
void pib_qp_error(PibQp *qp, const char *why)
{
    if (qp->state == PIB_QPS_RESET) {
        return;
    }
    if (qp->state != PIB_QPS_ERR) {
        pib_qp_set_state(qp, PIB_QPS_ERR, why);
        pib_qp_flush(qp);       /* before the engines forget the taken WQE */
        pib_qp_reset_engines(qp);
        /* On an SRQ: no WQE will be taken any more (IBTA 11.6.3.2). */
        if (qp->srq) {
            pib_aeq_post(qp->s, PIB_AE_QP_LAST_WQE, qp->qpn, 0);
        }
    }
    pib_qp_flush(qp);
}

#define PIB_QP_ATTR_ALL     ((PIB_QP_DEST_QPN << 1) - 1)

static uint8_t pib_modify_reject(PibQp *qp, const char *why, uint64_t val,
                                 uint8_t status)
{
    trace_pib_qp_modify_reject(qp->qpn, why, val, status);
    return status;
}

/* Check every attribute the mask names; nothing is applied yet. */
static uint8_t pib_qp_check_attrs(PibQp *qp, const struct pib_qp_attr *a,
                                  uint32_t mask)
{
    uint16_t dlid = le16_to_cpu(a->dlid);

    if ((mask & PIB_QP_PKEY_INDEX) &&
        le16_to_cpu(a->pkey_index) >= PIB_PKEY_TBL_LEN) {
        return pib_modify_reject(qp, "pkey_index", le16_to_cpu(a->pkey_index),
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_PORT) && a->port_num != PIB_PORT_NUM) {
        return pib_modify_reject(qp, "port_num", a->port_num,
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_ACCESS_FLAGS) &&
        (le32_to_cpu(a->qp_access_flags) & ~PIB_ACCESS_ALL)) {
        return pib_modify_reject(qp, "qp_access_flags",
                                 le32_to_cpu(a->qp_access_flags),
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_PATH_MTU) &&
        (a->path_mtu < 1 || a->path_mtu > PIB_PORT_MTU_ENUM)) {
        return pib_modify_reject(qp, "path_mtu", a->path_mtu,
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_TIMEOUT) && a->timeout > 31) {
        return pib_modify_reject(qp, "timeout", a->timeout, PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_RETRY_CNT) && a->retry_cnt > 7) {
        return pib_modify_reject(qp, "retry_cnt", a->retry_cnt,
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_RNR_RETRY) && a->rnr_retry > 7) {
        return pib_modify_reject(qp, "rnr_retry", a->rnr_retry,
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31) {
        return pib_modify_reject(qp, "min_rnr_timer", a->min_rnr_timer,
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_MAX_QP_RD_ATOMIC) &&
        a->max_rd_atomic > PIB_MAX_RD_ATOM) {
        return pib_modify_reject(qp, "max_rd_atomic", a->max_rd_atomic,
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_MAX_DEST_RD_ATOMIC) &&
        a->max_dest_rd_atomic > PIB_MAX_RD_ATOM) {
        return pib_modify_reject(qp, "max_dest_rd_atomic",
                                 a->max_dest_rd_atomic, PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_RQ_PSN) && (le32_to_cpu(a->rq_psn) & ~PIB_PSN_MASK)) {
        return pib_modify_reject(qp, "rq_psn", le32_to_cpu(a->rq_psn),
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_SQ_PSN) && (le32_to_cpu(a->sq_psn) & ~PIB_PSN_MASK)) {
        return pib_modify_reject(qp, "sq_psn", le32_to_cpu(a->sq_psn),
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_DEST_QPN) &&
        (le32_to_cpu(a->dest_qp_num) & ~PIB_QPN_MASK)) {
        return pib_modify_reject(qp, "dest_qp_num",
                                 le32_to_cpu(a->dest_qp_num),
                                 PIB_AQ_BAD_PARAM);
    }
    if (mask & PIB_QP_AV) {
        /* A unicast destination LID (the permissive LID is not routable). */
        if (dlid == 0 || dlid >= 0xc000) {
            return pib_modify_reject(qp, "dlid", dlid, PIB_AQ_BAD_PARAM);
        }
        if (a->sl > 15 || a->src_path_bits > 0x7f ||
            (a->ah_flags & ~PIB_AH_F_GRH)) {
            return pib_modify_reject(qp, "sl/src_path_bits/ah_flags",
                                     a->sl << 16 | a->src_path_bits << 8 |
                                     a->ah_flags, PIB_AQ_BAD_PARAM);
        }
        if ((a->ah_flags & PIB_AH_F_GRH) &&
            (a->sgid_index >= PIB_GID_TBL_LEN ||
             le32_to_cpu(a->flow_label) > PIB_FLOW_LABEL_MASK)) {
            return pib_modify_reject(qp, "GRH", a->sgid_index,
                                     PIB_AQ_BAD_PARAM);
        }
    }
    return PIB_AQ_OK;
}

static void pib_qp_apply_attrs(PibQp *qp, const struct pib_qp_attr *a,
                               uint32_t mask)
{
    if (mask & PIB_QP_PKEY_INDEX) {
        qp->pkey_index = le16_to_cpu(a->pkey_index);
    }
    if (mask & PIB_QP_PORT) {
        qp->port_num = a->port_num;
    }
    if (mask & PIB_QP_QKEY) {
        qp->qkey = le32_to_cpu(a->qkey);
    }
    if (mask & PIB_QP_ACCESS_FLAGS) {
        qp->access = le32_to_cpu(a->qp_access_flags);
    }
    if (mask & PIB_QP_PATH_MTU) {
        qp->path_mtu = a->path_mtu;
    }
    if (mask & PIB_QP_TIMEOUT) {
        qp->timeout = a->timeout;
    }
    if (mask & PIB_QP_RETRY_CNT) {
        qp->retry_cnt = a->retry_cnt;
        qp->comp.retry_left = a->retry_cnt;
    }
    if (mask & PIB_QP_RNR_RETRY) {
        qp->rnr_retry = a->rnr_retry;
        qp->comp.rnr_retry_left = a->rnr_retry;
    }
    if (mask & PIB_QP_MIN_RNR_TIMER) {
        qp->min_rnr_timer = a->min_rnr_timer;
    }
    if (mask & PIB_QP_MAX_QP_RD_ATOMIC) {
        qp->max_rd_atomic = a->max_rd_atomic;
    }
    if (mask & PIB_QP_MAX_DEST_RD_ATOMIC) {
        qp->max_dest_rd_atomic = a->max_dest_rd_atomic;
    }
    if (mask & PIB_QP_DEST_QPN) {
        qp->dest_qpn = le32_to_cpu(a->dest_qp_num);
    }
    if (mask & PIB_QP_EN_SQD_ASYNC_NOTIFY) {
        qp->en_sqd_async = true;
    }
    if (mask & PIB_QP_AV) {
        qp->av = (PibAv) {
            .dlid = le16_to_cpu(a->dlid),
            .sl = a->sl,
            .src_path_bits = a->src_path_bits,
            .static_rate = a->static_rate,
            .grh = a->ah_flags & PIB_AH_F_GRH,
            .sgid_index = a->sgid_index,
            .hop_limit = a->hop_limit,
            .traffic_class = a->traffic_class,
            .flow_label = le32_to_cpu(a->flow_label),
        };
        memcpy(qp->av.dgid, a->dgid, sizeof(qp->av.dgid));
    }
    if (mask & PIB_QP_RQ_PSN) {
        qp->rq_psn = le32_to_cpu(a->rq_psn);
        qp->resp.psn = qp->rq_psn;
    }
    if (mask & PIB_QP_SQ_PSN) {
        qp->sq_psn = le32_to_cpu(a->sq_psn);
        qp->req.psn = qp->req.psn_max = qp->comp.psn = qp->sq_psn;
    }
}

/* Enter a new state (the attributes are already applied). */
static void pib_qp_enter(PibQp *qp, uint8_t next)
{
    uint8_t cur = qp->state;

    if (next == PIB_QPS_ERR) {
        pib_qp_error(qp, "MODIFY_QP");
        return;
    }
    if (next == cur && next != PIB_QPS_RESET) {
        return;
    }
    pib_qp_set_state(qp, next, "MODIFY_QP");
    switch (next) {
    case PIB_QPS_RESET:
        /*
         * Empty queues that start over at index 0, as the provider does on
         * every move to RESET, RESET to RESET included: WQEs posted in RESET
         * are discarded, and both sides' indices must agree afterwards.
         */
        qp->sq.pi = qp->sq.ci = 0;
        qp->rq.pi = qp->rq.ci = 0;
        pib_qp_reset_engines(qp);
        qp->req.psn = qp->req.psn_max = qp->comp.psn = qp->sq_psn;
        break;
    case PIB_QPS_RTR:
        qp->resp.opcode = -1;
        qp->resp.comm_est = false;
        break;
    case PIB_QPS_RTS:
        if (cur == PIB_QPS_RTR) {
            qp->req.wqe_idx = qp->req.wqe_max = qp->sq.ci;
            qp->comp.retry_left = qp->retry_cnt;
            qp->comp.rnr_retry_left = qp->rnr_retry;
        }
        qp->sq_draining = false;
        pib_qp_schedule(qp);
        break;
    case PIB_QPS_SQD:
        qp->sq_draining = true;
        pib_qp_schedule(qp);
        break;
    default:
        break;
    }
}

uint8_t pib_cmd_modify_qp(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    uint32_t qpn = le32_to_cpu(cmd->in.mbox.obj);
    PibQp *qp = pib_qp_lookup(s, qpn);
    struct pib_qp_attr a = { 0 };
    const PibQpTransition *t;
    uint32_t mask, req, opt;
    uint8_t cur, next, status;

    if (!qp) {
        trace_pib_cmd_reject("MODIFY_QP", "no such QP", qpn,
                             PIB_AQ_BAD_RESOURCE);
        return PIB_AQ_BAD_RESOURCE;
    }
    if (!pib_admin_mbox_read(s, cmd, &a, sizeof(a), "MODIFY_QP mailbox")) {
        return PIB_AQ_DMA_ERROR;
    }
    mask = le32_to_cpu(a.attr_mask);
    cur = qp->state;
    next = (mask & PIB_QP_STATE) ? a.qp_state : cur;
    trace_pib_qp_modify(qpn, pib_qp_state_name(cur), pib_qp_state_name(next),
                        mask);

    if (mask & ~PIB_QP_ATTR_ALL) {
        return pib_modify_reject(qp, "unknown attribute bits", mask,
                                 PIB_AQ_BAD_PARAM);
    }
    if (next > PIB_QPS_ERR) {
        return pib_modify_reject(qp, "qp_state", next, PIB_AQ_BAD_PARAM);
    }
    /* CUR_STATE: the caller's view must be the device's. */
    if ((mask & PIB_QP_CUR_STATE) && a.cur_qp_state != cur) {
        return pib_modify_reject(qp, "cur_qp_state", a.cur_qp_state,
                                 PIB_AQ_BAD_STATE);
    }
    t = &pib_qp_table[cur][next];
    if (!t->valid) {
        return pib_modify_reject(qp, "no such transition", next,
                                 PIB_AQ_BAD_STATE);
    }
    /* QP0 follows QP1's rules (IBTA 11.2.5.3 lists them together). */
    req = t->req[qp->type == PIB_QPT_SMI ? PIB_QPT_GSI : qp->type];
    opt = t->opt[qp->type == PIB_QPT_SMI ? PIB_QPT_GSI : qp->type];
    if ((mask & req) != req) {
        return pib_modify_reject(qp, "required attributes missing",
                                 req & ~mask, PIB_AQ_BAD_PARAM);
    }
    if (mask & ~(req | opt | PIB_QP_STATE)) {
        return pib_modify_reject(qp, "attributes not allowed",
                                 mask & ~(req | opt | PIB_QP_STATE),
                                 PIB_AQ_BAD_PARAM);
    }
    /*
     * No automatic path migration: an alternate path cannot be honoured.
     * PATH_MIG_STATE has no field (the state is always "migrated"): ignored.
     */
    if (mask & PIB_QP_ALT_PATH) {
        return pib_modify_reject(qp, "no alternate path support", mask,
                                 PIB_AQ_BAD_PARAM);
    }
    status = pib_qp_check_attrs(qp, &a, mask);
    if (status != PIB_AQ_OK) {
        return status;
    }
    pib_qp_apply_attrs(qp, &a, mask);
    pib_qp_enter(qp, next);
    return PIB_AQ_OK;
}

uint8_t pib_cmd_query_qp(PibState *s, const struct pib_admin_cmd *cmd,
                         PibAdminResult *res)
{
    uint32_t qpn = le32_to_cpu(cmd->in.obj.num);
    PibQp *qp = pib_qp_lookup(s, qpn);
    struct pib_qp_attr a;

    if (!qp) {
        trace_pib_cmd_reject("QUERY_QP", "no such QP", qpn,
                             PIB_AQ_BAD_RESOURCE);
        return PIB_AQ_BAD_RESOURCE;
    }
    a = (struct pib_qp_attr) {
        .qp_state = qp->state,
        .cur_qp_state = qp->state,
        .path_mtu = qp->path_mtu,
        .timeout = qp->timeout,
        .retry_cnt = qp->retry_cnt,
        .rnr_retry = qp->rnr_retry,
        .min_rnr_timer = qp->min_rnr_timer,
        .max_rd_atomic = qp->max_rd_atomic,
        .max_dest_rd_atomic = qp->max_dest_rd_atomic,
        .sl = qp->av.sl,
        .port_num = qp->port_num,
        .sq_draining = qp->sq_draining,
        .pkey_index = cpu_to_le16(qp->pkey_index),
        .dlid = cpu_to_le16(qp->av.dlid),
        .qkey = cpu_to_le32(qp->qkey),
        .rq_psn = cpu_to_le32(qp->rq_psn),
        .sq_psn = cpu_to_le32(qp->sq_psn),
        .dest_qp_num = cpu_to_le32(qp->dest_qpn),
        .qp_access_flags = cpu_to_le32(qp->access),
        .src_path_bits = qp->av.src_path_bits,
        .static_rate = qp->av.static_rate,
        .ah_flags = qp->av.grh ? PIB_AH_F_GRH : 0,
        .hop_limit = qp->av.hop_limit,
        .sgid_index = qp->av.sgid_index,
        .traffic_class = qp->av.traffic_class,
        .flow_label = cpu_to_le32(qp->av.flow_label),
        .max_send_wr = cpu_to_le32(qp->sq.ring.depth),
        .max_recv_wr = cpu_to_le32(qp->rq.ring.depth),
        .max_send_sge = cpu_to_le32(qp->sq.max_sge),
        .max_recv_sge = cpu_to_le32(qp->rq.max_sge),
        .max_inline_data = cpu_to_le32(qp->max_inline),
    };
    memcpy(a.dgid, qp->av.dgid, sizeof(a.dgid));
    return pib_admin_respond(s, cmd, &a, sizeof(a));
}

/* Function reset: every QP goes, without a CQE. */
void pib_qp_reset_all(PibState *s)
{
    uint32_t i;

    for (i = 0; i < PIB_QPN_LIMIT; i++) {
        if (s->qp[i]) {
            pib_qp_free(s, s->qp[i]);
        }
    }
    s->next_qpn = 0;
}
