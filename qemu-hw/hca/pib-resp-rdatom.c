/*
 * pib HCA device model - the responder's RDMA READ and atomics
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The steps of the responder (pib-resp.c) that use its resources
 * (max_dest_rd_atomic of them, PibRdRes in pib-internal.h): EXECUTE for an
 * atomic (run it, keep the answer in the replay cache), for a READ (record
 * it) and for a FLUSH (do it, and record its answer: a READ response with no
 * data), DUPLICATE (answer again from the replay cache, or resend READ
 * responses), and pib_resp_run(), which the scheduler calls to send the READ
 * responses.  The packets (FETH, RETH, AtomicETH, AtomicAckETH, AETH) are
 * defined in include/pib_link.h.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"

#include "pib-internal.h"
#include "pib-resp.h"
#include "../trace.h"

static bool pib_psn_in(uint32_t psn, uint32_t first, uint32_t last)
{
    return pib_psn_diff(psn, first) >= 0 && pib_psn_diff(last, psn) >= 0;
}

/* An atomic, under the BQL: nothing else touches the device meanwhile. */
PibRespStep pib_resp_atomic(PibRespCtx *c)
{
    PibQp *qp = c->qp;
    PibResp *r = &qp->resp;
    const PibPktInfo *pi = c->pi;
    uint64_t orig, val;
    PibRdRes *res;
    bool pending;
    PibPktFields f = {
        .opcode = PIB_OP_RC_ATOMIC_ACKNOWLEDGE,
        .psn = pi->psn,
        .syndrome = PIB_AETH_ACK | PIB_AETH_NO_CREDITS,
    };

    /* Target memory is little-endian, the guest's host order. */
    if (pib_mr_rw(qp->s, c->mr, pi->va, &orig, sizeof(orig),
                  DMA_DIRECTION_TO_DEVICE) != PIB_MEM_OK) {
        return RESP_ERR_OP;
    }
    orig = le64_to_cpu(orig);
    if ((pi->opcode & PIB_OP_OPERATION_MASK) == PIB_OP_RC_COMPARE_SWAP) { /* RC or XRC */
        val = orig == pi->compare ? pi->swap_add : orig;
    } else {
        val = orig + pi->swap_add;
    }
    if (val != orig) {
        val = cpu_to_le64(val);
        if (pib_mr_rw(qp->s, c->mr, pi->va, &val, sizeof(val),
                      DMA_DIRECTION_FROM_DEVICE) != PIB_MEM_OK) {
            return RESP_ERR_OP;
        }
    }
    trace_pib_resp_atomic(qp->qpn, pi->psn, pi->va, orig);

    /*
     * The replay cache: a duplicate gets the same answer.  Behind READ responses still to be
     * sent, the answer waits its turn (pib_resp_run()).
     */
    res = &r->res[r->res_next];
    pending = pib_resp_pending(qp);
    *res = (PibRdRes) {
        .state = pending ? PIB_RES_PENDING : PIB_RES_DONE, .atomic = true, .answered = !pending,
        .psn = pi->psn, .last_psn = pi->psn, .cur_psn = pi->psn, .orig = orig,
        .seq = r->res_seq++,
    };
    r->res_next = (r->res_next + 1) % qp->max_dest_rd_atomic;
    r->psn = pib_psn_add(r->psn, 1);
    r->msn = (r->msn + 1) & 0xffffff;
    r->opcode = -1;
    r->unacked = 0;
    if (res->state == PIB_RES_PENDING) {
        pib_qp_schedule(qp);
        return RESP_DONE;
    }
    f.orig = orig;
    pib_resp_send(qp, &f);
    return RESP_DONE;
}

/*
 * An answer of len bytes of READ responses from va (a FLUSH's: one with no data), recorded in
 * the next responder resource and sent by pib_resp_run() in its turn.
 */
static PibRespStep pib_resp_answer_later(PibRespCtx *c, uint64_t va, uint32_t len)
{
    PibQp *qp = c->qp;
    PibResp *r = &qp->resp;
    const PibPktInfo *pi = c->pi;
    uint32_t npkts = pib_req_npkts(qp, len);

    r->res[r->res_next] = (PibRdRes) {
        .state = PIB_RES_PENDING,
        .psn = pi->psn,
        .last_psn = pib_psn_add(pi->psn, npkts - 1),
        .cur_psn = pi->psn,
        .va = va,
        .rkey = pi->rkey,
        .pdn = c->pdn,
        .resid = len,
        .first = true,
        .seq = r->res_seq++,
    };
    r->res_next = (r->res_next + 1) % qp->max_dest_rd_atomic;
    r->psn = pib_psn_add(r->psn, npkts);
    r->msn = (r->msn + 1) & 0xffffff;
    r->opcode = -1;
    r->unacked = 0;             /* the answer acknowledges what came before */
    pib_qp_schedule(qp);
    return RESP_DONE;
}

/* A READ: recorded here, answered by pib_resp_run(). */
PibRespStep pib_resp_read(PibRespCtx *c)
{
    trace_pib_resp_read(c->qp->qpn, c->pi->psn, c->pi->va, c->pi->dmalen);
    return pib_resp_answer_later(c, c->pi->va, c->pi->dmalen);
}

/*
 * A FLUSH (IBA 1.5), checked (pib_flush_check): what it asks is already so when it gets here.
 * The device places every earlier WRITE, SEND and ATOMIC in guest memory, in PSN order, before
 * it takes the next packet, and nothing it placed waits in a device cache; the barrier orders
 * those stores before the answer for every vCPU (global visibility).  A persistent flush never
 * gets here (pib_flush_allowed).  The answer is a READ response with no data, in its turn
 * behind earlier READ responses: recorded as a zero-length READ's, so a duplicate is answered
 * again the same way.
 */
PibRespStep pib_resp_flush(PibRespCtx *c)
{
    const PibPktInfo *pi = c->pi;

    smp_mb();
    trace_pib_resp_flush(c->qp->qpn, pi->psn, pi->feth & PIB_FETH_PLT_MASK,
                         pi->feth >> PIB_FETH_SEL_SHIFT == PIB_FLUSH_MR ? "MR" : "range",
                         pi->va, pi->dmalen);
    return pib_resp_answer_later(c, 0, 0);
}

/*
 * DUPLICATE: a request we already executed (its ACK or response was lost).
 * Never applied twice.
 */
PibRespStep pib_resp_duplicate(PibRespCtx *c)
{
    PibQp *qp = c->qp;
    PibResp *r = &qp->resp;
    const PibPktInfo *pi = c->pi;
    PibRdRes *res;
    PibMr *mr;
    uint32_t len;
    unsigned i;

    pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_DUPLICATE, pi);
    pib_count(qp->s, PIB_CNT_DUPLICATE_REQUESTS, 1);
    if (c->mask & (PIB_OPM_SEND | PIB_OPM_WRITE | PIB_OPM_ATOMIC_WRITE)) {
        if (pi->ackreq || (c->mask & PIB_OPM_LAST)) {
            pib_resp_ack(qp, pib_psn_add(r->psn, -1),
                         PIB_AETH_ACK | PIB_AETH_NO_CREDITS);
        }
        return RESP_DONE;
    }
    for (i = 0; i < PIB_MAX_RD_ATOM; i++) {
        res = &r->res[i];
        if (res->state == PIB_RES_FREE ||
            res->atomic != !!(c->mask & PIB_OPM_ATOMIC) ||
            !pib_psn_in(pi->psn, res->psn, res->last_psn)) {
            continue;
        }
        if (res->atomic) {
            PibPktFields f = {
                .opcode = PIB_OP_RC_ATOMIC_ACKNOWLEDGE,
                .psn = res->psn,
                .syndrome = PIB_AETH_ACK | PIB_AETH_NO_CREDITS,
                .orig = res->orig,
            };

            if (pi->psn == res->psn) {
                trace_pib_resp_replay(qp->qpn, pi->psn, "atomic");
                pib_resp_send(qp, &f);
                res->answered = true;
            }
            return RESP_DONE;
        }
        /*
         * READ: respond again from the PSN asked for, with the address and
         * length of this request (they must match the original's tail).  A
         * FLUSH: answer again with no data (what it flushed stays flushed).
         */
        len = (c->mask & PIB_OPM_FLUSH) ? 0 : pi->dmalen;
        if (pib_req_npkts(qp, len) - 1 != pib_psn_diff(res->last_psn, pi->psn) ||
            pib_rkey_check(qp->s, qp, c->pdn, pi->rkey, pi->va, len,
                           PIB_ACCESS_REMOTE_READ, &mr) != PIB_MEM_OK) {
            return RESP_DONE;
        }
        trace_pib_resp_replay(qp->qpn, pi->psn, "READ");
        res->state = PIB_RES_PENDING;
        res->replay = true;
        res->first = true;
        res->cur_psn = pi->psn;
        res->va = pi->va;
        res->rkey = pi->rkey;
        res->pdn = c->pdn;
        res->resid = len;
        pib_qp_schedule(qp);
        return RESP_DONE;
    }
    return RESP_DONE;       /* too old for the replay cache */
}

/* The pending READ or atomic answer whose next response comes first in PSN order. */
static PibRdRes *pib_resp_next_read(PibQp *qp)
{
    PibRdRes *best = NULL;
    unsigned i;

    for (i = 0; i < PIB_MAX_RD_ATOM; i++) {
        PibRdRes *res = &qp->resp.res[i];

        if (res->state == PIB_RES_PENDING &&
            (!best || pib_psn_diff(res->cur_psn, best->cur_psn) < 0)) {
            best = res;
        }
    }
    return best;
}

/* Are READ responses or an atomic's answer still to be sent? */
bool pib_resp_pending(PibQp *qp)
{
    return pib_resp_next_read(qp) != NULL;
}

/*
 * From the scheduler: send READ responses and atomic answers, oldest first,
 * one packet per budget unit, while the transmit queue has room, then the
 * ACK or NAK that waited behind them (PibResp.ack_deferred).  The data is
 * read from guest memory straight into the frame.
 */
void pib_resp_run(PibQp *qp, unsigned *budget)
{
    uint32_t mtu = pib_mtu_bytes(qp->path_mtu);
    PibPktFields f;
    PibPacket *p;
    PibRdRes *res;
    PibMr *mr;
    PibMemErr err;
    bool first, last;
    uint32_t paylen;

    if (!pib_qp_type_is_reliable(qp->type)) {
        return;
    }
    while (*budget && (res = pib_resp_next_read(qp))) {
        if (!pib_xmit_room(qp->s, qp->av.dlid)) {
            qp->req.wait_tx = true;
            return;
        }
        /* A response for a later PSN acknowledges what came before: a waiting ACK is moot. */
        if (qp->resp.ack_deferred &&
            (qp->resp.ack_syndrome & PIB_AETH_TYPE_MASK) == PIB_AETH_ACK &&
            pib_psn_diff(qp->resp.ack_psn, res->cur_psn) < 0) {
            qp->resp.ack_deferred = false;
        }
        if (res->atomic) {
            f = (PibPktFields) {
                .opcode = PIB_OP_RC_ATOMIC_ACKNOWLEDGE,
                .psn = res->psn,
                .syndrome = PIB_AETH_ACK | PIB_AETH_NO_CREDITS,
                .orig = res->orig,
            };
            pib_resp_send(qp, &f);
            res->state = PIB_RES_DONE;
            res->answered = true;
            (*budget)--;
            continue;
        }
        f = (PibPktFields) {
            .psn = res->cur_psn,
            .syndrome = PIB_AETH_ACK | PIB_AETH_NO_CREDITS,
        };
        paylen = MIN(res->resid, mtu);
        first = res->first;     /* a replay starts with FIRST/ONLY too */
        last = res->resid <= mtu;
        f.opcode = first && last ? PIB_OP_RC_RDMA_READ_RESP_ONLY :
                   first ? PIB_OP_RC_RDMA_READ_RESP_FIRST :
                   last ? PIB_OP_RC_RDMA_READ_RESP_LAST :
                   PIB_OP_RC_RDMA_READ_RESP_MIDDLE;
        /* The MR may have gone since the request: check again. */
        err = pib_rkey_check(qp->s, qp, res->pdn, res->rkey, res->va, paylen,
                             PIB_ACCESS_REMOTE_READ, &mr);
        p = NULL;
        if (err == PIB_MEM_OK) {
            p = pib_resp_build(qp, &f, paylen);
            if (paylen) {
                err = pib_mr_rw(qp->s, mr, res->va, pib_pkt_payload(p, paylen),
                                paylen, DMA_DIRECTION_TO_DEVICE);
            }
        }
        if (err != PIB_MEM_OK && res->replay && res->answered && err != PIB_MEM_DMA) {
            /*
             * Answering a duplicate READ again, the key is no longer good, and the original
             * answer had left in full (the requester invalidated the key once it had it): the
             * duplicate was a late copy.  Drop the replay, as a duplicate with a bad key is
             * (pib_resp_duplicate); the connection lives on.  A replay of an answer that had
             * not left in full (the requester's timer ran out while it was still going out,
             * behind a slow responder) meets the gone key as the first answer would have:
             * the NAK below, so that the requester hears why.
             */
            if (p) {
                pib_packet_free(qp->s, p);
            }
            trace_pib_resp_rkey_fault(qp->qpn, res->rkey, res->va, "replay dropped");
            res->state = PIB_RES_DONE;
            continue;
        }
        if (err != PIB_MEM_OK) {
            if (p) {
                pib_packet_free(qp->s, p);
            }
            if (err != PIB_MEM_DMA) {
                pib_count(qp->s, PIB_CNT_ACCESS_NAKS_SENT, 1);
            }
            pib_resp_ack(qp, res->cur_psn, PIB_AETH_NAK |
                         (err == PIB_MEM_DMA ? PIB_NAK_REM_OP_ERR :
                                               PIB_NAK_REM_ACCESS_ERR));
            pib_qp_error(qp, "READ response failed");
            return;
        }
        pib_xmit(qp->s, p, f.dlid);
        res->cur_psn = pib_psn_add(res->cur_psn, 1);
        res->va += paylen;
        res->resid -= paylen;
        res->first = false;
        if (last) {
            res->state = PIB_RES_DONE;
            res->replay = false;
            res->answered = true;
        }
        (*budget)--;
    }
    if (qp->resp.ack_deferred && !pib_resp_pending(qp)) {
        qp->resp.ack_deferred = false;
        pib_resp_ack(qp, qp->resp.ack_psn, qp->resp.ack_syndrome);
    }
}
