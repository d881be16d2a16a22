/*
 * pib HCA device model - the requester
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Turns send WQEs into request packets, in order, one packet per step, as
 * an explicit state machine (after Linux's rxe_req.c).  For each WQE:
 *
 *   NEXT_WQE  is there one, inside the window the completer allows?
 *   FETCH     read and check it (pib_sq_fetch); remember it in the meta
 *             ring with the PSN range it will use
 *   CHECK     may a packet go now: SQD, fence, READ/atomic credits,
 *             outstanding PSNs, room in the transmit queue, budget
 *   LOCAL     BIND_MW, REG_MR and LOCAL_INV act on this HCA alone: done
 *             here, with no packet and no PSN (and skipped when go-back-N
 *             walks over them again)
 *   SEND_PKT  gather the payload, build the next packet (FIRST / MIDDLE /
 *             LAST / ONLY by position), transmit it
 *   WQE_DONE  all its packets are out: RC waits for the ACK (PENDING), UC
 *             and UD complete now (DONE); on to the next WQE
 *   WQE_ERROR it failed locally: the completer completes it with the status
 *             once everything before it is complete, and the QP goes to ERR
 *
 * Segmentation is at the path MTU; PSNs are 24 bits and wrap.  A READ
 * request uses one PSN per response packet it asks for; an atomic uses one.
 * The last packet of an RC message asks for an ACK (AckReq), and so does
 * every PIB_ACKREQ_INTERVAL-th packet of a long one, so that the responder
 * acknowledges progress even while the message is still going.
 *
 * Retransmission (go-back-N) rewinds the requester to the oldest
 * unacknowledged PSN: pib_req_retry(), called by the completer.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"

#include "pib-internal.h"
#include "../trace.h"

#define PIB_ACKREQ_INTERVAL     32
/* PSNs an RC requester may have outstanding (well under the 2^23 limit). */
#define PIB_MAX_INFLIGHT_PSN    2048

typedef enum PibReqStep {
    REQ_NEXT_WQE,
    REQ_FETCH,
    REQ_CHECK,
    REQ_LOCAL,
    REQ_SEND_PKT,
    REQ_WQE_DONE,
    REQ_WQE_ERROR,
    REQ_EXIT,
} PibReqStep;

static const char *const pib_req_step_names[] = {
    [REQ_NEXT_WQE]  = "NEXT_WQE",
    [REQ_FETCH]     = "FETCH",
    [REQ_CHECK]     = "CHECK",
    [REQ_LOCAL]     = "LOCAL",
    [REQ_SEND_PKT]  = "SEND_PKT",
    [REQ_WQE_DONE]  = "WQE_DONE",
    [REQ_WQE_ERROR] = "WQE_ERROR",
    [REQ_EXIT]      = "EXIT",
};

/* Packets (PSNs) a message of len bytes takes at the QP's path MTU. */
uint32_t pib_req_npkts(const PibQp *qp, uint64_t len)
{
    return len ? DIV_ROUND_UP(len, pib_mtu_bytes(qp->path_mtu)) : 1;
}

static PibWqeMeta *pib_req_meta(PibQp *qp, uint32_t idx)
{
    return &qp->meta[idx & (qp->meta_size - 1)];
}

static bool pib_qp_is_ud(const PibQp *qp)
{
    return pib_qp_type_is_ud(qp->type);
}

/*
 * The BTH P_Key: QP0's is the default (SMPs are not partitioned), QP1 names a table entry
 * per send, every other QP uses its own entry.
 */
static uint16_t pib_req_pkey(const PibQp *qp, const PibSendWqe *w)
{
    switch (qp->type) {
    case PIB_QPT_SMI:
        return PIB_DEFAULT_PKEY;
    case PIB_QPT_GSI:
        return pib_port_pkey(qp->s, w->ud_pkey_index);
    default:
        return pib_port_pkey(qp->s, qp->pkey_index);
    }
}

/* Where the QP's packets go. */
static uint16_t pib_req_dlid(const PibQp *qp, const PibSendWqe *w)
{
    return pib_qp_is_ud(qp) ? w->ud_dlid : qp->av.dlid;
}

/*
 * The IB opcode of the next packet, from the operation and its position in
 * the message.  RC and UC number SEND and WRITE packets alike (IBTA table
 * 38): from the transport's base, SEND FIRST, MIDDLE, LAST, LAST_IMM, ONLY,
 * ONLY_IMM, then the same six for RDMA WRITE; UC's base is 0x20.  The
 * opcode as RC numbers it: XRC's are the same with XRC's base (pib_req_opcode).
 */
static uint8_t pib_req_rc_opcode(const PibQp *qp, const PibSendWqe *w,
                                 bool first, bool last)
{
    bool imm = w->opcode == PIB_WQE_SEND_IMM ||
               w->opcode == PIB_WQE_RDMA_WRITE_IMM;
    uint8_t op;

    switch (w->opcode) {
    case PIB_WQE_RDMA_READ:
        return PIB_OP_RC_RDMA_READ_REQUEST;
    case PIB_WQE_ATOMIC_CS:
        return PIB_OP_RC_COMPARE_SWAP;
    case PIB_WQE_ATOMIC_FA:
        return PIB_OP_RC_FETCH_ADD;
    case PIB_WQE_ATOMIC_WRITE:
        return PIB_OP_RC_ATOMIC_WRITE;
    case PIB_WQE_FLUSH:
        return PIB_OP_RC_FLUSH;
    case PIB_WQE_SEND_INV:          /* RC only */
        return first && last ? PIB_OP_RC_SEND_ONLY_INV :
               first ? PIB_OP_RC_SEND_FIRST :
               last ? PIB_OP_RC_SEND_LAST_INV : PIB_OP_RC_SEND_MIDDLE;
    default:
        break;
    }
    if (pib_qp_is_ud(qp)) {
        return imm ? PIB_OP_UD_SEND_ONLY_IMM : PIB_OP_UD_SEND_ONLY;
    }
    op = qp->type == PIB_QPT_UC ? PIB_OP_UC_SEND_FIRST : PIB_OP_RC_SEND_FIRST;
    if (w->opcode == PIB_WQE_RDMA_WRITE ||
        w->opcode == PIB_WQE_RDMA_WRITE_IMM) {
        op += PIB_OP_RC_RDMA_WRITE_FIRST - PIB_OP_RC_SEND_FIRST;
    }
    if (first && last) {
        return op + (PIB_OP_RC_SEND_ONLY - PIB_OP_RC_SEND_FIRST) + imm;
    }
    if (last) {
        return op + (PIB_OP_RC_SEND_LAST - PIB_OP_RC_SEND_FIRST) + imm;
    }
    return op + (first ? 0 : PIB_OP_RC_SEND_MIDDLE - PIB_OP_RC_SEND_FIRST);
}

static uint8_t pib_req_opcode(const PibQp *qp, const PibSendWqe *w,
                              bool first, bool last)
{
    uint8_t op = pib_req_rc_opcode(qp, w, first, last);

    return qp->type == PIB_QPT_XRC_INI ? PIB_OP_XRC(op) : op;
}

/* FETCH: the WQE at wqe_idx, cached across packets of the same WQE. */
static PibReqStep pib_req_fetch(PibQp *qp, uint8_t *status)
{
    PibReq *r = &qp->req;
    PibSendWqe *w = &r->wqe;
    PibWqeMeta *m = pib_req_meta(qp, r->wqe_idx);
    uint32_t npkts;

    if (!r->wqe_valid || r->wqe_cached != r->wqe_idx) {
        r->wqe_valid = false;
        if (!pib_sq_fetch(qp, r->wqe_idx, w, status)) {
            return REQ_WQE_ERROR;
        }
        r->wqe_valid = true;
        r->wqe_cached = r->wqe_idx;
    }
    if (r->offset == 0 && pib_inject_wqe_error(qp, r->wqe_idx, status)) {
        return REQ_WQE_ERROR;       /* an injected local error */
    }
    if (r->offset == 0) {
        /* Starting (or restarting) it: its PSN range begins here. */
        npkts = pib_wqe_is_local(w->opcode) ? 0 :
                pib_wqe_is_rd_atomic(w->opcode) &&
                w->opcode != PIB_WQE_RDMA_READ ? 1 :
                pib_req_npkts(qp, w->length);
        *m = (PibWqeMeta) {
            .wr_id = w->wr_id,
            .length = w->length,
            .first_psn = r->psn,
            .last_psn = pib_psn_add(r->psn, npkts - 1),
            .opcode = w->opcode,
            .flags = w->flags,
            .state = PIB_WQE_POSTED,
            .local = pib_wqe_is_local(w->opcode),
        };
        if (r->wqe_idx - qp->sq.ci >= r->wqe_max - qp->sq.ci) {
            r->wqe_max = r->wqe_idx + 1;
        }
    } else if (m->length != w->length || m->opcode != w->opcode) {
        /* Rewritten while posted (a retransmission re-read it). */
        PIB_GUEST_ERR(qp->s, PIB_GERR_WQE, pib_ub_wqe,
                      "QP %" PRIu32 " %s WQE %" PRIu32 ": %s (0x%" PRIx64 ")",
                      qp->qpn, "send", r->wqe_idx,
                      "changed while outstanding", w->length);
        *status = PIB_WC_LOC_QP_OP_ERR;
        return REQ_WQE_ERROR;
    }
    return REQ_CHECK;
}

/* CHECK: may the next packet of the current WQE go now? */
static PibReqStep pib_req_check(PibQp *qp, unsigned budget, uint8_t *status)
{
    PibReq *r = &qp->req;
    const PibSendWqe *w = &r->wqe;

    if (r->offset == 0) {
        if ((w->flags & PIB_WQE_F_FENCE) && r->rd_atomic) {
            trace_pib_req_wait(qp->qpn, r->wqe_idx, "fence");
            return REQ_EXIT;
        }
        if (pib_wqe_is_local(w->opcode)) {
            return REQ_LOCAL;
        }
        if (pib_wqe_is_rd_atomic(w->opcode)) {
            if (qp->max_rd_atomic == 0) {
                *status = PIB_WC_LOC_QP_OP_ERR;     /* none allowed at all */
                return REQ_WQE_ERROR;
            }
            if (r->rd_atomic >= qp->max_rd_atomic) {
                trace_pib_req_wait(qp->qpn, r->wqe_idx, "max_rd_atomic");
                return REQ_EXIT;
            }
        }
    }
    if (pib_qp_type_is_reliable(qp->type) &&
        pib_psn_diff(r->psn, qp->comp.psn) >= PIB_MAX_INFLIGHT_PSN) {
        trace_pib_req_wait(qp->qpn, r->wqe_idx, "outstanding PSNs");
        return REQ_EXIT;
    }
    if (budget == 0) {
        return REQ_EXIT;
    }
    if (!pib_cca_may_send(qp)) {
        trace_pib_req_wait(qp->qpn, r->wqe_idx, "injection rate delay");
        return REQ_EXIT;
    }
    if (!pib_xmit_room(qp->s, pib_req_dlid(qp, w))) {
        trace_pib_req_wait(qp->qpn, r->wqe_idx, "transmit queue");
        r->wait_tx = true;
        return REQ_EXIT;
    }
    return REQ_SEND_PKT;
}

/* LOCAL: bind a memory window, register an MR, or invalidate a key. */
static PibReqStep pib_req_local(PibQp *qp, uint8_t *status)
{
    const PibSendWqe *w = &qp->req.wqe;

    if (w->opcode == PIB_WQE_BIND_MW) {
        *status = pib_mw_bind(qp, &w->bind);
    } else if (w->opcode == PIB_WQE_REG_MR) {
        *status = pib_mr_fast_reg(qp, &w->reg);
    } else {
        *status = pib_key_invalidate(qp->s, qp, qp->pdn, ldl_le_p(w->imm)) ?
                  PIB_WC_SUCCESS : PIB_WC_LOC_QP_OP_ERR;
    }
    return *status == PIB_WC_SUCCESS ? REQ_WQE_DONE : REQ_WQE_ERROR;
}

/*
 * A BIND_MW, REG_MR or LOCAL_INV that go-back-N walks over again was done
 * already: its effect stays, it is not done twice.
 */
static bool pib_req_done_locally(PibQp *qp)
{
    PibReq *r = &qp->req;
    PibWqeMeta *m = pib_req_meta(qp, r->wqe_idx);

    return r->offset == 0 &&
           r->wqe_idx - qp->sq.ci < r->wqe_max - qp->sq.ci &&
           m->local && m->state == PIB_WQE_DONE;
}

/*
 * The payload of a SEND or WRITE packet, offset bytes into the message,
 * straight into the frame: inline data, or gathered from the SGEs.
 */
static bool pib_req_gather(PibQp *qp, const PibSendWqe *w, uint64_t offset,
                           uint8_t *dst, uint32_t len)
{
    if (w->opcode == PIB_WQE_ATOMIC_WRITE) {
        stq_le_p(dst, w->compare_add);  /* the 8 bytes as posted */
        return true;
    }
    if (w->flags & PIB_WQE_F_INLINE) {
        memcpy(dst, w->inline_data + offset, len);
        return true;
    }
    return pib_sgl_copy(qp->s, qp->pdn, w->sge, w->num_sge, offset, dst, len,
                        DMA_DIRECTION_TO_DEVICE) == PIB_MEM_OK;
}

/* SEND_PKT: build and transmit the next packet of the current WQE. */
static PibReqStep pib_req_send_pkt(PibQp *qp, uint8_t *status)
{
    PibState *s = qp->s;
    PibReq *r = &qp->req;
    const PibSendWqe *w = &r->wqe;
    uint32_t mtu = pib_mtu_bytes(pib_qp_is_ud(qp) ? PIB_PORT_MTU_ENUM :
                                 qp->path_mtu);
    uint32_t paylen = 0, npsn = 1;
    bool first = r->offset == 0, last = true;
    bool rc = pib_qp_type_is_reliable(qp->type);
    PibPacket *p;
    PibPktFields f = {
        .dqpn = pib_qp_is_ud(qp) ? w->ud_qpn : qp->dest_qpn,
        .psn = r->psn,
        .dlid = pib_req_dlid(qp, w),
        .sl = pib_qp_is_ud(qp) ? w->ud_sl : qp->av.sl,
        .src_path_bits = pib_qp_is_ud(qp) ? 0 : qp->av.src_path_bits,
        .vl15 = qp->type == PIB_QPT_SMI,
        .pkey = pib_req_pkey(qp, w),
        .grh = pib_qp_is_ud(qp) ? (w->ud_grh ? &w->ud_av.g : NULL) :
               qp->av.grh ? &qp->av.g : NULL,
        .sgid_index = pib_qp_is_ud(qp) ? w->ud_av.sgid_index : qp->av.sgid_index,
        .xrc_srqn = w->xrc_srqn,        /* XRC: the target's SRQ */
    };

    switch (w->opcode) {
    case PIB_WQE_RDMA_READ:
        /* One request for the rest of the data: one PSN per response. */
        f.va = w->remote_addr + r->offset;
        f.rkey = w->rkey;
        f.dmalen = w->length - r->offset;
        npsn = pib_req_npkts(qp, f.dmalen);
        break;
    case PIB_WQE_ATOMIC_CS:
    case PIB_WQE_ATOMIC_FA:
        f.va = w->remote_addr;
        f.rkey = w->rkey;
        f.swap_add = w->opcode == PIB_WQE_ATOMIC_CS ? w->swap : w->compare_add;
        f.compare = w->compare_add;
        break;
    case PIB_WQE_FLUSH:
        /* The FETH says what; the RETH where (ignored by a flush of the whole MR). */
        f.feth = ldl_le_p(w->imm) & (PIB_FETH_PLT_MASK | PIB_FETH_SEL_MASK);
        f.va = w->remote_addr;
        f.rkey = w->rkey;
        f.dmalen = w->compare_add;
        break;
    default:        /* SEND, WRITE, ATOMIC WRITE: a piece of the payload */
        paylen = MIN(w->length - r->offset, mtu);
        last = r->offset + paylen == w->length;
        if (first && (w->opcode == PIB_WQE_RDMA_WRITE ||
                      w->opcode == PIB_WQE_RDMA_WRITE_IMM ||
                      w->opcode == PIB_WQE_ATOMIC_WRITE)) {
            f.va = w->remote_addr;
            f.rkey = w->rkey;
            f.dmalen = w->length;
        }
        if (last) {
            memcpy(f.imm, w->imm, sizeof(f.imm));
            f.ieth_rkey = ldl_le_p(w->imm);     /* SEND_INV: the rkey */
            f.se = (w->flags & PIB_WQE_F_SOLICITED) &&
                   w->opcode != PIB_WQE_RDMA_WRITE &&
                   w->opcode != PIB_WQE_ATOMIC_WRITE;
        }
        if (pib_qp_is_ud(qp)) {
            /* A Q_Key with the high bit set means "use the QP's". */
            f.qkey = (w->ud_qkey & PIB_QKEY_USE_QP) ? qp->qkey : w->ud_qkey;
            f.src_qpn = qp->qpn;
        }
        break;
    }
    f.opcode = pib_req_opcode(qp, w, first, last);
    /* A READ's or FLUSH's response is its acknowledgement. */
    f.ackreq = rc && w->opcode != PIB_WQE_RDMA_READ && w->opcode != PIB_WQE_FLUSH &&
               (last || r->since_ackreq + 1 >= PIB_ACKREQ_INTERVAL);

    /* Headers first, then the payload DMA'd straight into the frame. */
    p = pib_pkt_build(s, &f, NULL, paylen);
    if (paylen && !pib_req_gather(qp, w, r->offset,
                                  pib_pkt_payload(p, paylen), paylen)) {
        pib_packet_free(s, p);
        *status = PIB_WC_LOC_PROT_ERR;
        return REQ_WQE_ERROR;
    }
    r->since_ackreq = f.ackreq || !rc ? 0 : r->since_ackreq + 1;
    if (rc && pib_psn_diff(r->psn, r->psn_max) < 0) {
        pib_count(s, PIB_CNT_RETRANSMITS, 1);
    }
    pib_xmit(s, p, f.dlid);
    pib_cca_sent(qp, f.sl);
    r->psn = pib_psn_add(r->psn, npsn);
    if (pib_psn_diff(r->psn, r->psn_max) > 0) {
        r->psn_max = r->psn;
    }
    r->offset += paylen;
    if (pib_wqe_is_rd_atomic(w->opcode)) {
        r->offset = w->length;
        return REQ_WQE_DONE;
    }
    return last ? REQ_WQE_DONE : REQ_CHECK;
}

void pib_req_run(PibQp *qp, unsigned *budget)
{
    PibReq *r = &qp->req;
    PibReqStep step = REQ_NEXT_WQE;
    uint8_t status = PIB_WC_SUCCESS;
    PibWqeMeta *m;

    while (step != REQ_EXIT) {
        trace_pib_req_step(qp->qpn, r->wqe_idx, pib_req_step_names[step]);
        switch (step) {
        case REQ_NEXT_WQE:
            if (r->error || qp->comp.rnr_wait || r->wqe_idx == qp->sq.pi ||
                r->wqe_idx - qp->sq.ci >= qp->meta_size) {
                step = REQ_EXIT;
            } else if (pib_req_done_locally(qp)) {
                r->wqe_idx++;
            } else if (qp->state == PIB_QPS_SQD && r->offset == 0) {
                step = REQ_EXIT;        /* SQD: no new WQE starts */
            } else {
                step = REQ_FETCH;
            }
            break;
        case REQ_FETCH:
            step = pib_req_fetch(qp, &status);
            break;
        case REQ_CHECK:
            step = pib_req_check(qp, *budget, &status);
            break;
        case REQ_LOCAL:
            step = pib_req_local(qp, &status);
            break;
        case REQ_SEND_PKT:
            step = pib_req_send_pkt(qp, &status);
            if (step != REQ_WQE_ERROR) {
                (*budget)--;
            }
            break;
        case REQ_WQE_DONE:
            m = pib_req_meta(qp, r->wqe_idx);
            m->state = pib_qp_type_is_reliable(qp->type) && !m->local ? PIB_WQE_PENDING :
                                                             PIB_WQE_DONE;
            if (pib_wqe_is_rd_atomic(m->opcode) && !m->rd_atomic) {
                m->rd_atomic = true;
                r->rd_atomic++;
            }
            trace_pib_req_wqe_sent(qp->qpn, r->wqe_idx, m->first_psn,
                                   m->last_psn);
            r->wqe_idx++;
            r->offset = 0;
            step = REQ_NEXT_WQE;
            break;
        case REQ_WQE_ERROR:
            /* The completer completes it in order; nothing after it runs */
            m = pib_req_meta(qp, r->wqe_idx);
            if (r->offset == 0) {
                *m = (PibWqeMeta) {
                    .local = pib_wqe_is_local(r->wqe.opcode),
                    .wr_id = r->wqe.wr_id,
                    .length = r->wqe.length,
                    .first_psn = r->psn,
                    .last_psn = pib_psn_add(r->psn, -1),
                    .opcode = r->wqe.opcode,
                    .flags = r->wqe.flags,
                };
                if (r->wqe_idx - qp->sq.ci >= r->wqe_max - qp->sq.ci) {
                    r->wqe_max = r->wqe_idx + 1;
                }
            }
            m->state = PIB_WQE_ERROR;
            m->status = status;
            trace_pib_req_wqe_error(qp->qpn, r->wqe_idx, m->wr_id, status);
            r->error = true;
            r->wqe_valid = false;
            r->wqe_idx++;
            r->offset = 0;
            step = REQ_EXIT;
            break;
        default:
            step = REQ_EXIT;
            break;
        }
    }
}

/*
 * Go back N: resend from the oldest unacknowledged PSN (comp.psn).  Every
 * WQE the requester started is started again; the oldest one resumes at the
 * packet comp.psn names (a READ asks for the rest of its data only).  The
 * completer also calls this to move the requester forward when an ACK
 * covers packets it was about to resend.
 */
void pib_req_retry(PibQp *qp)
{
    PibReq *r = &qp->req;
    uint32_t idx, span;
    int32_t delta;
    PibWqeMeta *m;

    for (idx = qp->sq.ci; idx != r->wqe_max; idx++) {
        m = pib_req_meta(qp, idx);
        if (m->rd_atomic) {
            m->rd_atomic = false;
            r->rd_atomic--;
        }
        if (!(m->local && m->state == PIB_WQE_DONE)) {
            m->state = PIB_WQE_POSTED;
        }
    }
    r->wqe_valid = false;
    r->error = false;
    r->since_ackreq = 0;
    r->wqe_idx = qp->sq.ci;
    r->offset = 0;
    r->psn = qp->comp.psn;
    if (qp->sq.ci == r->wqe_max) {
        return;                 /* nothing was outstanding */
    }
    m = pib_req_meta(qp, qp->sq.ci);
    delta = pib_psn_diff(qp->comp.psn, m->first_psn);
    span = pib_psn_diff(m->last_psn, m->first_psn);
    delta = MAX(0, MIN(delta, (int32_t)span));
    if (m->opcode != PIB_WQE_ATOMIC_CS && m->opcode != PIB_WQE_ATOMIC_FA) {
        r->offset = (uint64_t)delta * pib_mtu_bytes(qp->path_mtu);
    } else {
        delta = 0;
    }
    r->psn = pib_psn_add(m->first_psn, delta);
    trace_pib_req_retry(qp->qpn, qp->sq.ci, r->psn, r->offset);
}
