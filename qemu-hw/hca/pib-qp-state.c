/*
 * pib HCA device model - the queue pair state machine
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * MODIFY_QP (struct pib_qp_attr in include/pib_hw.h) moves a QP between the
 * IBTA's states, with the attributes the table below requires and allows for
 * the transition and the QP type; QUERY_QP reads them back; pib_qp_error()
 * is the device's own move to ERR.  The QP object itself (CREATE_QP,
 * DESTROY_QP) is in pib-qp.c.
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
#include "../trace.h"

/*
 * The modify-QP table: which transitions exist and which attributes each one
 * requires and allows, per QP type (IBTA 11.2.5.3, and Linux's
 * ib_modify_qp_is_ok; XRC's columns are its).  PIB_QP_STATE is always allowed.
 */
#define NTYPES  (PIB_QPT_XRC_TGT + 1)
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
        [PIB_QPT_XRC_INI] = PIB_QP_PKEY_INDEX | PIB_QP_PORT |              \
                            PIB_QP_ACCESS_FLAGS,                            \
        [PIB_QPT_XRC_TGT] = PIB_QP_PKEY_INDEX | PIB_QP_PORT |              \
                            PIB_QP_ACCESS_FLAGS,                            \
    }

/* What a move to RTS allows, from RTR, RTS or SQD. */
#define RTS_OPT {                                                           \
        [PIB_QPT_UD]  = PIB_QP_CUR_STATE | PIB_QP_QKEY,                    \
        [PIB_QPT_UC]  = RC_UC_PATH,                                         \
        [PIB_QPT_RC]  = RC_UC_PATH | PIB_QP_MIN_RNR_TIMER,                 \
        [PIB_QPT_GSI] = PIB_QP_CUR_STATE | PIB_QP_QKEY,                    \
        [PIB_QPT_XRC_INI] = RC_UC_PATH,                                     \
        [PIB_QPT_XRC_TGT] = RC_UC_PATH | PIB_QP_MIN_RNR_TIMER,             \
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
                [PIB_QPT_XRC_INI] = PIB_QP_AV | PIB_QP_PATH_MTU |
                                    PIB_QP_DEST_QPN | PIB_QP_RQ_PSN,
                [PIB_QPT_XRC_TGT] = PIB_QP_AV | PIB_QP_PATH_MTU |
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
                [PIB_QPT_XRC_INI] = PIB_QP_ALT_PATH | PIB_QP_ACCESS_FLAGS |
                                    PIB_QP_PKEY_INDEX,
                [PIB_QPT_XRC_TGT] = PIB_QP_ALT_PATH | PIB_QP_ACCESS_FLAGS |
                                    PIB_QP_PKEY_INDEX,
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
                [PIB_QPT_XRC_INI] = PIB_QP_TIMEOUT | PIB_QP_RETRY_CNT |
                                    PIB_QP_RNR_RETRY | PIB_QP_SQ_PSN |
                                    PIB_QP_MAX_QP_RD_ATOMIC,
                [PIB_QPT_XRC_TGT] = PIB_QP_TIMEOUT | PIB_QP_SQ_PSN,
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
                [PIB_QPT_XRC_INI] = PIB_QP_EN_SQD_ASYNC_NOTIFY,
                [PIB_QPT_XRC_TGT] = PIB_QP_EN_SQD_ASYNC_NOTIFY,
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
                [PIB_QPT_XRC_INI] = PIB_QP_PORT | PIB_QP_AV | PIB_QP_TIMEOUT |
                                    PIB_QP_RETRY_CNT | PIB_QP_RNR_RETRY |
                                    PIB_QP_MAX_QP_RD_ATOMIC | PIB_QP_ALT_PATH |
                                    PIB_QP_ACCESS_FLAGS | PIB_QP_PKEY_INDEX |
                                    PIB_QP_PATH_MIG_STATE,
                [PIB_QPT_XRC_TGT] = PIB_QP_PORT | PIB_QP_AV | PIB_QP_TIMEOUT |
                                    PIB_QP_MAX_DEST_RD_ATOMIC | PIB_QP_ALT_PATH |
                                    PIB_QP_ACCESS_FLAGS | PIB_QP_PKEY_INDEX |
                                    PIB_QP_MIN_RNR_TIMER | PIB_QP_PATH_MIG_STATE,
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
            .g.hop_limit = a->hop_limit,
            .g.traffic_class = a->traffic_class,
            .g.flow_label = le32_to_cpu(a->flow_label),
        };
        memcpy(qp->av.g.dgid, a->dgid, sizeof(qp->av.g.dgid));
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
        if (qp->rq.dbrec) {     /* the record too: pi 0, no RING */
            static const struct pib_recv_dbrec zero;

            pib_dma_write(qp->s, qp->rq.dbrec, &zero, sizeof(zero),
                          "doorbell record");
        }
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
        .hop_limit = qp->av.g.hop_limit,
        .sgid_index = qp->av.sgid_index,
        .traffic_class = qp->av.g.traffic_class,
        .flow_label = cpu_to_le32(qp->av.g.flow_label),
        .max_send_wr = cpu_to_le32(qp->sq.ring.depth),
        .max_recv_wr = cpu_to_le32(qp->rq.ring.depth),
        .max_send_sge = cpu_to_le32(qp->sq.max_sge),
        .max_recv_sge = cpu_to_le32(qp->rq.max_sge),
        .max_inline_data = cpu_to_le32(qp->max_inline),
    };
    memcpy(a.dgid, qp->av.g.dgid, sizeof(a.dgid));
    return pib_admin_respond(s, cmd, &a, sizeof(a));
}
