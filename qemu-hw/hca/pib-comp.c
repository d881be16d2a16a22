/*
 * pib HCA device model - the completer
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Completes send WQEs, in order, as an explicit state machine (after Linux's
 * rxe_comp.c).  It runs for each RC response packet (ACK, NAK, READ
 * response, atomic ACK) and from the scheduler (UC/UD WQEs, which
 * complete once sent; local errors; the retransmit timer).
 *
 *   GET_WQE      the oldest outstanding WQE (the SQ's consumer index)
 *   CHECK_PSN    where the response falls relative to it: beyond it (it is
 *                implicitly acknowledged, or for a READ/atomic, its
 *                responses were lost), stale, or for it
 *   CHECK_ACK    what the response says: data, ACK, RNR NAK, NAK
 *   READ         place READ response data in the WQE's SGEs
 *   ATOMIC       place the original value in the WQE's SGE
 *   WRITE_SEND   an ACK for a SEND/WRITE: complete it if it is its last PSN
 *   COMP_ACK     complete the WQE the response finished
 *   COMP_WQE     complete a WQE that needs no more responses
 *   UPDATE_COMP  record progress: oldest unacknowledged PSN, retry counts,
 *                retransmit timer
 *   ERROR_RETRY  timeout, PSN sequence NAK, or lost READ responses: go back
 *                N (pib_req_retry) while retry_cnt lasts, else RETRY_EXC_ERR
 *   RNR_RETRY    RNR NAK: pause for the RNR timer, then go back N, while
 *                rnr_retry lasts (7 = forever), else RNR_RETRY_EXC_ERR
 *   ERROR        complete the WQE with its error status; the QP goes to ERR
 *   DONE / EXIT  stop
 *
 * A completion error always produces a CQE (IBTA 10.7.3.1); a success only
 * if the WQE was signalled or the QP signals every WQE.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"

#include "pib-internal.h"
#include "../trace.h"

typedef enum PibCompStep {
    COMP_GET_WQE,
    COMP_CHECK_PSN,
    COMP_CHECK_ACK,
    COMP_READ,
    COMP_ATOMIC,
    COMP_WRITE_SEND,
    COMP_COMP_ACK,
    COMP_COMP_WQE,
    COMP_UPDATE_COMP,
    COMP_ERROR_RETRY,
    COMP_RNR_RETRY,
    COMP_ERROR,
    COMP_DONE,
    COMP_EXIT,
} PibCompStep;

static const char *const pib_comp_step_names[] = {
    [COMP_GET_WQE]     = "GET_WQE",
    [COMP_CHECK_PSN]   = "CHECK_PSN",
    [COMP_CHECK_ACK]   = "CHECK_ACK",
    [COMP_READ]        = "READ",
    [COMP_ATOMIC]      = "ATOMIC",
    [COMP_WRITE_SEND]  = "WRITE_SEND",
    [COMP_COMP_ACK]    = "COMP_ACK",
    [COMP_COMP_WQE]    = "COMP_WQE",
    [COMP_UPDATE_COMP] = "UPDATE_COMP",
    [COMP_ERROR_RETRY] = "ERROR_RETRY",
    [COMP_RNR_RETRY]   = "RNR_RETRY",
    [COMP_ERROR]       = "ERROR",
    [COMP_DONE]        = "DONE",
    [COMP_EXIT]        = "EXIT",
};

static PibWqeMeta *pib_comp_meta(PibQp *qp, uint32_t idx)
{
    return &qp->meta[idx & (qp->meta_size - 1)];
}

/*
 * Has the requester started the WQE at the SQ's consumer index?  Then its
 * meta entry, and its PSN range, are valid (also after a go-back-N rewind).
 */
static bool pib_comp_head_started(const PibQp *qp)
{
    return qp->sq.ci != qp->req.wqe_max;
}

/* Retry counts start over whenever the peer shows progress. */
static void pib_comp_reset_retries(PibQp *qp)
{
    qp->comp.retry_left = qp->retry_cnt;
    qp->comp.rnr_retry_left = qp->rnr_retry;
}

/* The send WQE at idx, fetched for the completer (READ/atomic results). */
static bool pib_comp_fetch(PibQp *qp, uint32_t idx, uint8_t *status)
{
    PibComp *c = &qp->comp;

    if (c->wqe_valid && c->wqe_cached == idx) {
        return true;
    }
    c->wqe_valid = false;
    if (!pib_sq_fetch(qp, idx, &c->wqe, status)) {
        return false;
    }
    c->wqe_valid = true;
    c->wqe_cached = idx;
    return true;
}

/*
 * Complete the head WQE (success or error), retire it, and wake the
 * requester: the window moved, and a fence or a READ credit may be free.
 */
static void pib_comp_complete(PibQp *qp, PibWqeMeta *m, uint8_t status)
{
    if (status != PIB_WC_SUCCESS || qp->sig_all ||
        (m->flags & PIB_WQE_F_SIGNALED)) {
        pib_qp_post_send_cqe(qp, qp->sq.ci, m, status);
    } else {
        trace_pib_comp_unsignaled(qp->qpn, qp->sq.ci, m->wr_id);
    }
    if (m->rd_atomic) {
        m->rd_atomic = false;
        qp->req.rd_atomic--;
    }
    if (qp->comp.wqe_valid && qp->comp.wqe_cached == qp->sq.ci) {
        qp->comp.wqe_valid = false;
    }
    qp->sq.ci++;
    pib_qp_schedule(qp);
}

/* GET_WQE: what the oldest WQE needs. */
static PibCompStep pib_comp_get_wqe(PibQp *qp, const PibPktInfo *pi,
                                    PibWqeMeta **mp)
{
    PibWqeMeta *m;

    if (!pib_comp_head_started(qp)) {
        return pi ? COMP_DONE : COMP_EXIT;
    }
    m = *mp = pib_comp_meta(qp, qp->sq.ci);
    switch (m->state) {
    case PIB_WQE_DONE:
        return COMP_COMP_WQE;
    case PIB_WQE_ERROR:
        return COMP_ERROR;
    case PIB_WQE_PENDING:
    case PIB_WQE_POSTED:        /* partly sent: ACKs for its packets count */
    default:
        return pi ? COMP_CHECK_PSN : COMP_EXIT;
    }
}

/* CHECK_PSN: relate the response's PSN to the head WQE. */
static PibCompStep pib_comp_check_psn(PibQp *qp, const PibPktInfo *pi,
                                      PibWqeMeta *m)
{
    /* Beyond anything we ever sent: a confused or hostile peer. */
    if (pib_psn_diff(pi->psn, qp->req.psn_max) >= 0) {
        pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_STALE_RESP, pi);
        return COMP_DONE;
    }
    if (pib_psn_diff(pi->psn, m->last_psn) > 0) {
        /*
         * The response is for a later WQE, so this one was sent in full
         * (perhaps before a rewind).  A SEND or WRITE is implicitly
         * acknowledged; a READ or atomic lost its responses.
         */
        if (!pib_wqe_is_rd_atomic(m->opcode)) {
            return COMP_COMP_WQE;
        }
        return m->state == PIB_WQE_PENDING ? COMP_ERROR_RETRY : COMP_DONE;
    }
    if (pib_psn_diff(pi->psn, qp->comp.psn) < 0) {
        pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_STALE_RESP, pi);
        return COMP_DONE;               /* old: a duplicate response */
    }
    if (pib_psn_diff(pi->psn, qp->comp.psn) > 0 &&
        pib_wqe_is_rd_atomic(m->opcode)) {
        pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_STALE_RESP, pi);
        return COMP_DONE;               /* a gap in READ responses */
    }
    return COMP_CHECK_ACK;
}

/* CHECK_ACK: what the response says. */
static PibCompStep pib_comp_check_ack(PibQp *qp, const PibPktInfo *pi,
                                      PibWqeMeta *m)
{
    uint8_t type = pi->syndrome & PIB_AETH_TYPE_MASK;

    if (pi->op->mask & PIB_OPM_READ) {
        /* A FLUSH's answer is a READ response with no data (its length is 0). */
        if ((m->opcode != PIB_WQE_RDMA_READ && m->opcode != PIB_WQE_FLUSH) ||
            ((pi->op->mask & PIB_OPM_AETH) && type != PIB_AETH_ACK)) {
            pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_STALE_RESP, pi);
            return COMP_DONE;
        }
        return COMP_READ;
    }
    if (pi->op->mask & PIB_OPM_ATOMIC) {       /* (XRC_)ATOMIC_ACKNOWLEDGE */
        if ((m->opcode != PIB_WQE_ATOMIC_CS &&
             m->opcode != PIB_WQE_ATOMIC_FA) || type != PIB_AETH_ACK) {
            pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_STALE_RESP, pi);
            return COMP_DONE;
        }
        return COMP_ATOMIC;
    }
    /* (XRC_)ACKNOWLEDGE */
    switch (type) {
    case PIB_AETH_ACK:
        if (pib_wqe_is_rd_atomic(m->opcode)) {
            /* An ACK does not answer a READ or atomic; ignore it. */
            pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_STALE_RESP, pi);
            return COMP_DONE;
        }
        return COMP_WRITE_SEND;
    case PIB_AETH_RNR_NAK:
        pib_count(qp->s, PIB_CNT_RNR_NAKS_RCVD, 1);
        return COMP_RNR_RETRY;
    case PIB_AETH_NAK:
        switch (pi->syndrome & ~PIB_AETH_TYPE_MASK) {
        case PIB_NAK_PSN_SEQ_ERR:
            pib_count(qp->s, PIB_CNT_SEQ_NAKS_RCVD, 1);
            if (qp->comp.rnr_wait) {
                return COMP_DONE;   /* resending after the RNR wait anyway */
            }
            /* Everything before the NAK'd PSN arrived. */
            qp->comp.psn = pi->psn;
            return COMP_ERROR_RETRY;
        case PIB_NAK_INVALID_REQ:
            m->status = PIB_WC_REM_INV_REQ_ERR;
            return COMP_ERROR;
        case PIB_NAK_REM_ACCESS_ERR:
            m->status = PIB_WC_REM_ACCESS_ERR;
            return COMP_ERROR;
        case PIB_NAK_INVALID_RD_REQ:
            m->status = PIB_WC_REM_INV_RD_REQ_ERR;
            return COMP_ERROR;
        case PIB_NAK_REM_OP_ERR:
        default:
            m->status = PIB_WC_REM_OP_ERR;
            return COMP_ERROR;
        }
    default:
        pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_STALE_RESP, pi);
        return COMP_DONE;
    }
}

/*
 * READ: response data for PSN p lands (p - first_psn) * MTU bytes into the
 * WQE's SGEs.  Packets before the last carry exactly one MTU; the last
 * carries the rest.
 */
static PibCompStep pib_comp_read(PibQp *qp, const PibPktInfo *pi,
                                 PibWqeMeta *m)
{
    uint32_t mtu = pib_mtu_bytes(qp->path_mtu);
    uint64_t off = (uint64_t)pib_psn_diff(pi->psn, m->first_psn) * mtu;
    bool last = pi->op->mask & PIB_OPM_LAST;
    uint8_t status = PIB_WC_SUCCESS;
    PibSendWqe *w = &qp->comp.wqe;

    if (last ? (pi->psn != m->last_psn || off + pi->paylen != m->length ||
                pi->paylen > mtu)
             : (pi->psn == m->last_psn || pi->paylen != mtu)) {
        pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_LENGTH, pi);
        return COMP_DONE;
    }
    if (!pib_comp_fetch(qp, qp->sq.ci, &status)) {
        m->status = status;
        return COMP_ERROR;
    }
    if (pi->paylen &&
        pib_sgl_copy(qp->s, qp->pdn, w->sge, w->num_sge, off,
                     (void *)pi->payload, pi->paylen,
                     DMA_DIRECTION_FROM_DEVICE) != PIB_MEM_OK) {
        m->status = PIB_WC_LOC_PROT_ERR;
        return COMP_ERROR;
    }
    return last ? COMP_COMP_ACK : COMP_UPDATE_COMP;
}

/* ATOMIC: the original remote value, host order, into the local buffer. */
static PibCompStep pib_comp_atomic(PibQp *qp, const PibPktInfo *pi,
                                   PibWqeMeta *m)
{
    uint64_t orig = cpu_to_le64(pi->orig);
    uint8_t status = PIB_WC_SUCCESS;
    PibSendWqe *w = &qp->comp.wqe;

    if (!pib_comp_fetch(qp, qp->sq.ci, &status)) {
        m->status = status;
        return COMP_ERROR;
    }
    if (pib_sgl_copy(qp->s, qp->pdn, w->sge, w->num_sge, 0, &orig,
                     sizeof(orig), DMA_DIRECTION_FROM_DEVICE) != PIB_MEM_OK) {
        m->status = PIB_WC_LOC_PROT_ERR;
        return COMP_ERROR;
    }
    return COMP_COMP_ACK;
}

/*
 * UPDATE_COMP: the peer acknowledged up to and including psn.  The retransmit
 * timer restarts: stopped here, started again for a full period by
 * pib_qp_sync_timers() at the end of the pass if anything is still
 * unacknowledged.
 */
static void pib_comp_progress(PibQp *qp, uint32_t psn)
{
    if (pib_psn_diff(psn, qp->comp.psn) >= 0) {
        qp->comp.psn = pib_psn_add(psn, 1);
        pib_comp_reset_retries(qp);
    }
    /* The requester was resending what is now acknowledged: skip ahead. */
    if ((int32_t)(qp->req.wqe_idx - qp->sq.ci) < 0 ||
        pib_psn_diff(qp->req.psn, qp->comp.psn) < 0) {
        pib_req_retry(qp);
    }
    pib_qp_stop_retrans(qp);
    pib_qp_schedule(qp);
}

/*
 * ERROR_RETRY: go back N, or give up.  A retry that the retransmit timer did
 * not cause (a NAK, lost READ responses) costs a retry too, as in the IBTA.
 */
static PibCompStep pib_comp_error_retry(PibQp *qp, PibWqeMeta *m)
{
    if (qp->comp.psn == qp->req.psn && !pib_comp_head_started(qp)) {
        return COMP_DONE;
    }
    if (qp->comp.retry_left == 0) {
        m->status = PIB_WC_RETRY_EXC_ERR;
        return COMP_ERROR;
    }
    qp->comp.retry_left--;
    trace_pib_comp_retry(qp->qpn, qp->comp.psn, qp->comp.retry_left, "retry");
    pib_qp_stop_retrans(qp);
    pib_req_retry(qp);
    pib_qp_schedule(qp);
    return COMP_DONE;
}

/* RNR_RETRY: the responder had no receive WQE; wait and resend. */
static PibCompStep pib_comp_rnr_retry(PibQp *qp, const PibPktInfo *pi,
                                      PibWqeMeta *m)
{
    uint64_t ns = pib_rnr_timer_ns(pi->syndrome & 0x1f);

    if (qp->comp.rnr_retry_left == 0) {
        m->status = PIB_WC_RNR_RETRY_EXC_ERR;
        return COMP_ERROR;
    }
    if (qp->rnr_retry != 7) {       /* 7: retry forever */
        qp->comp.rnr_retry_left--;
    }
    /* The RNR NAK acknowledges everything before the PSN it names. */
    qp->comp.psn = pi->psn;
    trace_pib_comp_retry(qp->qpn, qp->comp.psn, qp->comp.rnr_retry_left,
                         "RNR");
    pib_qp_stop_retrans(qp);
    pib_req_retry(qp);
    qp->comp.rnr_wait = true;
    timer_mod(qp->comp.rnr_timer,
              qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) + ns);
    trace_pib_timer(qp->qpn, "RNR", "armed", ns);
    return COMP_DONE;
}

/*
 * The state machine.  pi is the response packet, or NULL when run from the
 * scheduler (timeouts, and WQEs that need no response).
 */
static void pib_comp_loop(PibQp *qp, const PibPktInfo *pi)
{
    PibCompStep step = COMP_GET_WQE;
    PibWqeMeta *m = NULL;
    unsigned n;

    /* Each pass completes a WQE or ends: bounded by the window. */
    for (n = 0; step != COMP_DONE && step != COMP_EXIT &&
                n < 8 * PIB_SQ_WINDOW; n++) {
        trace_pib_comp_step(qp->qpn, qp->sq.ci, pib_comp_step_names[step]);
        switch (step) {
        case COMP_GET_WQE:
            step = pib_comp_get_wqe(qp, pi, &m);
            if (step == COMP_DONE && n == 0) {
                /* A response with nothing outstanding: stale or forged. */
                pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_STALE_RESP, pi);
            }
            break;
        case COMP_CHECK_PSN:
            step = pib_comp_check_psn(qp, pi, m);
            break;
        case COMP_CHECK_ACK:
            step = pib_comp_check_ack(qp, pi, m);
            break;
        case COMP_READ:
            step = pib_comp_read(qp, pi, m);
            break;
        case COMP_ATOMIC:
            step = pib_comp_atomic(qp, pi, m);
            break;
        case COMP_WRITE_SEND:
            /*
             * ACKs come only for what arrived in order: one for its last
             * PSN finishes a SEND/WRITE, even one being resent after a
             * rewind.
             */
            step = pi->psn == m->last_psn ? COMP_COMP_ACK : COMP_UPDATE_COMP;
            break;
        case COMP_COMP_ACK:
            /* The response finished the head WQE. */
            pib_comp_complete(qp, m, PIB_WC_SUCCESS);
            pib_comp_progress(qp, pi->psn);
            step = COMP_DONE;
            break;
        case COMP_COMP_WQE:
            /* Done without a response of its own (UC/UD, implicit ACK). */
            pib_comp_complete(qp, m, PIB_WC_SUCCESS);
            if (pib_qp_type_is_reliable(qp->type) && !m->local) {
                pib_comp_progress(qp, m->last_psn);
            }
            step = COMP_GET_WQE;
            break;
        case COMP_UPDATE_COMP:
            pib_comp_progress(qp, pi->psn);
            step = COMP_DONE;
            break;
        case COMP_ERROR_RETRY:
            step = pib_comp_error_retry(qp, m);
            break;
        case COMP_RNR_RETRY:
            step = pib_comp_rnr_retry(qp, pi, m);
            break;
        case COMP_ERROR:
            trace_pib_comp_error(qp->qpn, qp->sq.ci, m->wr_id, m->status);
            pib_comp_complete(qp, m, m->status);
            pib_qp_error(qp, "completion error");
            step = COMP_EXIT;
            break;
        default:
            step = COMP_EXIT;
            break;
        }
    }
}

/* An RC response packet arrived (from pib_rx_run()). */
void pib_comp_recv(PibQp *qp, const PibPktInfo *pi)
{
    if (qp->state != PIB_QPS_RTS && qp->state != PIB_QPS_SQD) {
        pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_QP_STATE, pi);
        return;
    }
    if (pi->becn) {
        pib_cca_becn(qp, qp->av.sl);    /* congestion on the way to the responder */
    }
    pib_comp_loop(qp, pi);
    pib_qp_sync_timers(qp);
}

/* From the scheduler: retransmit timeouts and finished WQEs. */
void pib_comp_run(PibQp *qp)
{
    PibComp *c = &qp->comp;

    if (c->timeout) {
        c->timeout = false;
        if (pib_comp_head_started(qp) && !c->rnr_wait) {
            PibWqeMeta *m = pib_comp_meta(qp, qp->sq.ci);

            trace_pib_comp_timeout(qp->qpn, c->psn, c->retry_left);
            if (pib_comp_error_retry(qp, m) == COMP_ERROR) {
                trace_pib_comp_error(qp->qpn, qp->sq.ci, m->wr_id, m->status);
                pib_comp_complete(qp, m, m->status);
                pib_qp_error(qp, "retry count exceeded");
                return;
            }
        }
    }
    pib_comp_loop(qp, NULL);
}
