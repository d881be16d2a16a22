/*
 * pib HCA device model - the responder
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Executes request packets that arrive at a QP, as an explicit state machine
 * (after Linux's rxe_resp.c).  For an RC or UC packet:
 *
 *   CHK_PSN       in sequence?  Ahead: NAK (PSN sequence error, once per
 *                 gap).  Behind: a duplicate.  UC has no duplicates and no
 *                 NAKs: a lost packet drops the rest of its message.
 *   CHK_OP_SEQ    does the opcode continue the message in progress?
 *   CHK_OP_VALID  does the QP allow the operation (remote access flags;
 *                 ATOMIC WRITE needs remote write, as in rxe)?  An XRC
 *                 target: does the XRCETH name an XRC SRQ of its domain
 *                 (ERR_XRC: NAK invalid RD request)?
 *   CHK_RESOURCE  a receive WQE (RQ or SRQ) for a SEND or WRITE with
 *                 immediate (none: RNR NAK); a free responder resource for a
 *                 READ or atomic
 *   CHK_LENGTH    payload size right for the opcode and the path MTU; the
 *                 message fits the receive WQE or the RETH's DMA length;
 *                 an ATOMIC WRITE carries exactly 8 bytes
 *   CHK_RKEY      R_Key, PD, access right and range for RDMA and atomics
 *                 (atomics and ATOMIC WRITE: an 8-byte aligned target)
 *   EXECUTE       place the data, run the atomic, record the READ; an
 *                 ATOMIC WRITE's 8 bytes land in one store;
 *                 SEND with invalidate: invalidate the rkey at the end
 *   COMPLETE      the receive CQE at the end of a message that consumed a
 *                 receive WQE
 *   ACKNOWLEDGE   advance the expected PSN; ACK when asked (AckReq) or every
 *                 PIB_ACK_COALESCE packets
 *   DUPLICATE     ACK a duplicate SEND/WRITE/ATOMIC WRITE again without
 *                 applying it;
 *                 resend READ responses (re-reading memory, as IB allows);
 *                 answer a duplicate atomic from the replay cache
 *   ERR_*         NAK (RC), complete the receive WQE in error if one is
 *                 involved, raise the affiliated async event, QP to ERR
 *
 * UD packets take a short path: Q_Key (checked at dispatch), a receive WQE
 * (none: dropped), the GRH space, the data, the CQE.
 *
 * READ responses are not sent from here but from pib_resp_run() in the
 * scheduler (pib-sched.c), within its packet budget and only while the
 * transmit queue has room, so a large READ cannot flood the link or stall
 * the main loop.
 *
 * The steps' enum and the packet context are in pib-resp.h; the steps for
 * READ and atomics (EXECUTE's halves for them, DUPLICATE) and pib_resp_run()
 * are in pib-resp-rdatom.c.  The packet formats are in include/pib_link.h.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"

#include "pib-internal.h"
#include "pib-resp.h"
#include "../trace.h"

#define PIB_ACK_COALESCE        16
#define PIB_GRH_SPACE           40      /* UD: receive buffer bytes for a GRH */

static const char *const pib_resp_step_names[] = {
    [RESP_CHK_PSN]      = "CHK_PSN",
    [RESP_CHK_OP_SEQ]   = "CHK_OP_SEQ",
    [RESP_CHK_OP_VALID] = "CHK_OP_VALID",
    [RESP_CHK_RESOURCE] = "CHK_RESOURCE",
    [RESP_CHK_LENGTH]   = "CHK_LENGTH",
    [RESP_CHK_RKEY]     = "CHK_RKEY",
    [RESP_EXECUTE]      = "EXECUTE",
    [RESP_COMPLETE]     = "COMPLETE",
    [RESP_ACKNOWLEDGE]  = "ACKNOWLEDGE",
    [RESP_DUPLICATE]    = "DUPLICATE",
    [RESP_NAK_SEQ]      = "NAK_SEQ",
    [RESP_RNR]          = "RNR",
    [RESP_ERR_INVALID]  = "ERR_INVALID",
    [RESP_ERR_ACCESS]   = "ERR_ACCESS",
    [RESP_ERR_OP]       = "ERR_OP",
    [RESP_ERR_XRC]      = "ERR_XRC",
    [RESP_UC_DROP]      = "UC_DROP",
    [RESP_DONE]         = "DONE",
};

/*
 * Responses we send: ACK/NAK, READ responses, atomic ACKs, to the connected
 * peer.  A READ response's payload is filled in place afterwards.
 */
PibPacket *pib_resp_build(PibQp *qp, PibPktFields *f, uint32_t paylen)
{
    /* Callers name RC's response opcodes; an XRC target answers with XRC's. */
    if (qp->type == PIB_QPT_XRC_TGT) {
        f->opcode = PIB_OP_XRC(f->opcode);
    }
    f->dqpn = qp->dest_qpn;
    f->dlid = qp->av.dlid;
    f->sl = qp->av.sl;
    f->src_path_bits = qp->av.src_path_bits;
    f->grh = qp->av.grh ? &qp->av.g : NULL;
    f->sgid_index = qp->av.sgid_index;
    f->pkey = pib_port_pkey(qp->s, qp->pkey_index);
    f->msn = qp->resp.msn;
    f->becn = qp->resp.becn_owed;       /* congestion on the way here (pib-cca.c) */
    qp->resp.becn_owed = false;
    return pib_pkt_build(qp->s, f, NULL, paylen);
}

/* A response without payload. */
void pib_resp_send(PibQp *qp, PibPktFields *f)
{
    PibPacket *p = pib_resp_build(qp, f, 0);    /* sets f->dlid */

    pib_xmit(qp->s, p, f->dlid);
}

/*
 * An ACK or NAK for PSN psn.  Responses leave in PSN order (IBTA 9.7.5.2): the requester takes
 * an ACK for a later request while it still waits for READ responses as the loss of those
 * responses, and sends the READ again.  So while READ responses or an atomic's answer are
 * still to be sent (pib_resp_pending()), an ACK, an RNR NAK or a sequence NAK waits
 * (PibResp.ack_deferred) and pib_resp_run() sends it after them.  A NAK that ends the
 * connection (access, invalid request, operational error) goes at once.
 */
void pib_resp_ack(PibQp *qp, uint32_t psn, uint8_t syndrome)
{
    PibResp *r = &qp->resp;
    uint8_t type = syndrome & PIB_AETH_TYPE_MASK;
    PibPktFields f = {
        .opcode = PIB_OP_RC_ACKNOWLEDGE,
        .psn = psn,
        .syndrome = syndrome,
    };

    r->unacked = 0;
    if ((type == PIB_AETH_ACK || type == PIB_AETH_RNR_NAK ||
         syndrome == (PIB_AETH_NAK | PIB_NAK_PSN_SEQ_ERR)) && pib_resp_pending(qp)) {
        /* A NAK already waiting is not replaced by a later ACK. */
        if (!r->ack_deferred || type != PIB_AETH_ACK ||
            (r->ack_syndrome & PIB_AETH_TYPE_MASK) == PIB_AETH_ACK) {
            r->ack_deferred = true;
            r->ack_psn = psn;
            r->ack_syndrome = syndrome;
        }
        return;
    }
    trace_pib_resp_ack(qp->qpn, psn, syndrome, r->msn);
    pib_resp_send(qp, &f);
}

void pib_resp_reset(PibQp *qp)
{
    memset(&qp->resp, 0, sizeof(qp->resp));
    qp->resp.opcode = -1;
}

/*
 * Is a receive WQE posted to the RQ?  Once the device has taken all it knew
 * of, a ring with a doorbell record says in the record whether there are more.
 */
static bool pib_rq_posted(PibQp *qp)
{
    if (qp->rq.ci == qp->rq.pi) {
        pib_rq_refresh(qp);
    }
    return qp->rq.ci != qp->rq.pi;
}

/*
 * The receive WQE for this message: the one at the RQ's consumer index, or
 * the next one taken from the SRQ.  False if there is none.  A malformed one
 * is returned too, with c->rq_status set: it completes in error.
 */
static bool pib_resp_get_rwqe(PibRespCtx *c)
{
    PibQp *qp = c->qp;
    PibResp *r = &qp->resp;

    if (r->rwqe_valid) {
        return true;
    }
    if (c->srq) {
        if (!pib_srq_take(qp, c->srq, &r->rwqe, &c->rq_status)) {
            return false;
        }
    } else if (qp->no_rq || !pib_rq_posted(qp)) {
        return false;
    } else {
        pib_rq_fetch(qp, qp->rq.ci, &r->rwqe, &c->rq_status);
    }
    r->rwqe_valid = true;
    r->rwqe_srq = c->srq;
    r->offset = 0;
    return true;
}

/* Complete the receive WQE in progress and retire it. */
static void pib_resp_complete_rwqe(PibQp *qp, struct pib_cqe *cqe, bool sol)
{
    cqe->wr_id = cpu_to_le64(qp->resp.rwqe.wr_id);
    cqe->wqe_index = cpu_to_le16(qp->resp.rwqe.idx & 0xffff);
    pib_qp_post_recv_cqe(qp, cqe, sol);
    if (!qp->resp.rwqe_srq) {
        qp->rq.ci++;
    }
    qp->resp.rwqe_valid = false;
    qp->resp.rwqe_srq = NULL;
    qp->resp.offset = 0;
}

/*
 * The steps
 */

static PibRespStep pib_resp_chk_psn(PibRespCtx *c)
{
    PibQp *qp = c->qp;
    PibResp *r = &qp->resp;
    const PibPktInfo *pi = c->pi;
    int32_t diff = pib_psn_diff(pi->psn, r->psn);

    if (qp->type == PIB_QPT_UC) {
        if (diff != 0 || r->uc_drop) {
            /* A gap or a dropped message: start over at a FIRST/ONLY. */
            if (diff != 0 && r->opcode != -1) {
                trace_pib_resp_uc_abandon(qp->qpn, r->psn, pi->psn);
            }
            r->opcode = -1;
            r->offset = 0;
            r->psn = pi->psn;
            r->uc_drop = !(c->mask & PIB_OPM_FIRST);
            if (r->uc_drop) {
                return RESP_UC_DROP;
            }
        }
        return RESP_CHK_OP_SEQ;
    }
    if (diff > 0) {
        return RESP_NAK_SEQ;
    }
    if (diff < 0) {
        return RESP_DUPLICATE;
    }
    r->nak_seq_sent = false;
    return RESP_CHK_OP_SEQ;
}

static PibRespStep pib_resp_chk_op_seq(PibRespCtx *c)
{
    PibResp *r = &c->qp->resp;
    const PibOpInfo *prev = r->opcode >= 0 ? pib_op_info(r->opcode) : NULL;
    uint32_t m = c->mask;
    bool ok;

    if (prev && (prev->mask & PIB_OPM_SEND)) {
        ok = (m & PIB_OPM_SEND) && (m & (PIB_OPM_MIDDLE | PIB_OPM_LAST)) &&
             !(m & PIB_OPM_FIRST);
    } else if (prev && (prev->mask & PIB_OPM_WRITE)) {
        ok = (m & PIB_OPM_WRITE) && (m & (PIB_OPM_MIDDLE | PIB_OPM_LAST)) &&
             !(m & PIB_OPM_FIRST);
    } else {
        ok = m & PIB_OPM_FIRST;
    }
    if (ok) {
        return RESP_CHK_OP_VALID;
    }
    if (c->qp->type == PIB_QPT_UC) {
        r->opcode = -1;
        r->offset = 0;
        r->uc_drop = !(m & PIB_OPM_FIRST);
        return r->uc_drop ? RESP_UC_DROP : RESP_CHK_OP_VALID;
    }
    return RESP_ERR_INVALID;
}

static PibRespStep pib_resp_chk_op_valid(PibRespCtx *c)
{
    PibQp *qp = c->qp;
    uint32_t m = c->mask;

    /* XRC: the SRQ the XRCETH names must be an XRC SRQ of the QP's domain. */
    if (qp->type == PIB_QPT_XRC_TGT &&
        (!c->srq || (qp->resp.rwqe_valid && qp->resp.rwqe_srq != c->srq))) {
        trace_pib_resp_xrc_srq(qp->qpn, c->pi->psn, c->pi->xrc_srqn, qp->xrcd);
        c->drop = PIB_CNT_RX_DROP_XRC_SRQ;
        return RESP_ERR_XRC;
    }

    if (((m & (PIB_OPM_WRITE | PIB_OPM_ATOMIC_WRITE)) &&
         !(qp->access & PIB_ACCESS_REMOTE_WRITE)) ||
        ((m & PIB_OPM_READ) && !(qp->access & PIB_ACCESS_REMOTE_READ)) ||
        ((m & PIB_OPM_ATOMIC) && !(qp->access & PIB_ACCESS_REMOTE_ATOMIC)) ||
        ((m & PIB_OPM_FLUSH) && !pib_flush_allowed(c->pi->feth, qp->access))) {
        c->drop = PIB_CNT_RX_DROP_ACCESS;
        return qp->type == PIB_QPT_UC ? RESP_UC_DROP : RESP_ERR_ACCESS;
    }
    if ((m & (PIB_OPM_READ | PIB_OPM_ATOMIC | PIB_OPM_FLUSH)) &&
        qp->max_dest_rd_atomic == 0) {
        c->drop = PIB_CNT_RX_DROP_OPCODE;
        return RESP_ERR_INVALID;
    }
    return RESP_CHK_RESOURCE;
}

static PibRespStep pib_resp_chk_resource(PibRespCtx *c)
{
    PibQp *qp = c->qp;
    PibResp *r = &qp->resp;
    uint32_t m = c->mask;
    PibRdRes *res;

    if ((m & PIB_OPM_SEND) ||
        ((m & PIB_OPM_WRITE) && (m & PIB_OPM_IMMDT))) {
        if (!pib_resp_get_rwqe(c)) {
            if (qp->type == PIB_QPT_UC) {
                c->drop = PIB_CNT_RX_DROP_NO_RECV_WQE;
                return RESP_UC_DROP;
            }
            return RESP_RNR;
        }
        if (c->rq_status != PIB_WC_SUCCESS) {
            c->drop = PIB_CNT_RX_DROP_NO_RECV_WQE;
            return RESP_ERR_OP;         /* a malformed receive WQE */
        }
    }
    if (m & (PIB_OPM_READ | PIB_OPM_ATOMIC | PIB_OPM_FLUSH)) {
        r->res_next %= qp->max_dest_rd_atomic;
        res = &r->res[r->res_next];
        /*
         * The new request takes the oldest slot.  A requester within its max_rd_atomic sends
         * it only once it has completed the request in that slot, so a slot still answering
         * a duplicate of an answer that already left in full is taken: the replay is moot.
         * (A retransmit timer that fires while the first answers are still on the wire
         * leads there: the requester resends, then gets the answers, completes, and sends
         * new requests behind its duplicates.)  A slot whose first answer has not left in
         * full cannot have been completed.
         */
        if (res->state == PIB_RES_PENDING) {
            if (!res->answered) {
                /* More outstanding than max_dest_rd_atomic allows. */
                c->drop = PIB_CNT_RX_DROP_OPCODE;
                return RESP_ERR_INVALID;
            }
            trace_pib_resp_replay_moot(qp->qpn, res->psn, c->pi->psn);
            res->state = PIB_RES_FREE;
        }
    }
    return RESP_CHK_LENGTH;
}

static PibRespStep pib_resp_chk_length(PibRespCtx *c)
{
    PibQp *qp = c->qp;
    PibResp *r = &qp->resp;
    const PibPktInfo *pi = c->pi;
    uint32_t mtu = pib_mtu_bytes(qp->path_mtu);
    uint32_t m = c->mask;
    bool uc = qp->type == PIB_QPT_UC;

    if (m & PIB_OPM_PAYLOAD) {
        /* Packets before the last carry exactly one MTU; the last 1..MTU. */
        if (!(m & PIB_OPM_LAST) ? pi->paylen != mtu :
            pi->paylen > mtu || (!(m & PIB_OPM_FIRST) && pi->paylen == 0)) {
            c->drop = PIB_CNT_RX_DROP_LENGTH;
            return uc ? RESP_UC_DROP : RESP_ERR_INVALID;
        }
    }
    c->drop = PIB_CNT_RX_DROP_LENGTH;   /* for the checks below */
    if (m & PIB_OPM_SEND) {
        if (r->offset + pi->paylen > r->rwqe.length) {
            c->rq_status = PIB_WC_LOC_LEN_ERR;  /* the receive is too small */
            return RESP_ERR_INVALID;
        }
    } else if (m & PIB_OPM_WRITE) {
        if (m & PIB_OPM_FIRST) {
            if ((m & PIB_OPM_LAST) ? pi->paylen != pi->dmalen :
                pi->dmalen <= pi->paylen) {
                return uc ? RESP_UC_DROP : RESP_ERR_INVALID;
            }
            r->write_len = pi->dmalen;
            r->write_resid = pi->dmalen;
        } else if ((m & PIB_OPM_LAST) ? pi->paylen != r->write_resid :
                   pi->paylen >= r->write_resid) {
            return uc ? RESP_UC_DROP : RESP_ERR_INVALID;
        }
    } else if ((m & PIB_OPM_READ) && pi->dmalen > PIB_MAX_MSG_SZ) {
        return RESP_ERR_INVALID;
    } else if ((m & PIB_OPM_FLUSH) &&
               (!(pi->feth & PIB_FETH_PLT_MASK) ||
                (pi->feth & ~(PIB_FETH_PLT_MASK | PIB_FETH_SEL_MASK)) ||
                pi->feth >> PIB_FETH_SEL_SHIFT > PIB_FLUSH_MR ||
                (pi->feth >> PIB_FETH_SEL_SHIFT == PIB_FLUSH_RANGE &&
                 pi->dmalen > PIB_MAX_MSG_SZ))) {
        /* No placement type, reserved bits, or a range longer than a message. */
        return RESP_ERR_INVALID;
    } else if ((m & PIB_OPM_ATOMIC_WRITE) &&
               (pi->paylen != sizeof(uint64_t) ||
                pi->dmalen != sizeof(uint64_t))) {
        return RESP_ERR_INVALID;
    }
    c->drop = PIB_CNT_MAX;
    return RESP_CHK_RKEY;
}

static PibRespStep pib_resp_chk_rkey(PibRespCtx *c)
{
    PibQp *qp = c->qp;
    PibResp *r = &qp->resp;
    const PibPktInfo *pi = c->pi;
    uint32_t m = c->mask;
    PibMemErr err = PIB_MEM_OK;
    bool uc = qp->type == PIB_QPT_UC;

    if (m & PIB_OPM_WRITE) {
        if (m & PIB_OPM_FIRST) {
            /* The whole range at the first packet: nothing lands if bad. */
            r->write_va = pi->va;
            r->write_rkey = pi->rkey;
            err = pib_rkey_check(qp->s, qp, c->pdn, pi->rkey, pi->va, pi->dmalen,
                                 PIB_ACCESS_REMOTE_WRITE, &c->mr);
        } else {
            /* Again for each packet: the MR may have gone meanwhile. */
            err = pib_rkey_check(qp->s, qp, c->pdn, r->write_rkey, r->write_va,
                                 pi->paylen, PIB_ACCESS_REMOTE_WRITE, &c->mr);
        }
    } else if (m & PIB_OPM_READ) {
        err = pib_rkey_check(qp->s, qp, c->pdn, pi->rkey, pi->va, pi->dmalen,
                             PIB_ACCESS_REMOTE_READ, &c->mr);
    } else if (m & PIB_OPM_FLUSH) {
        err = pib_flush_check(qp->s, c->pdn, pi->rkey, pi->va, pi->dmalen,
                              pi->feth >> PIB_FETH_SEL_SHIFT == PIB_FLUSH_MR,
                              pi->feth & PIB_FETH_PLT_MASK);
    } else if (m & (PIB_OPM_ATOMIC | PIB_OPM_ATOMIC_WRITE)) {
        if (pi->va & 7) {
            c->drop = PIB_CNT_RX_DROP_ACCESS;
            return RESP_ERR_INVALID;    /* atomics are 8-byte aligned */
        }
        err = pib_rkey_check(qp->s, qp, c->pdn, pi->rkey, pi->va, sizeof(uint64_t),
                             (m & PIB_OPM_ATOMIC) ? PIB_ACCESS_REMOTE_ATOMIC :
                             PIB_ACCESS_REMOTE_WRITE, &c->mr);
    }
    if (err != PIB_MEM_OK) {
        trace_pib_resp_rkey_fault(qp->qpn, pi->rkey, pi->va,
                                  pib_mem_err_name(err));
        c->drop = PIB_CNT_RX_DROP_ACCESS;
        return uc ? RESP_UC_DROP : RESP_ERR_ACCESS;
    }
    return RESP_EXECUTE;
}

static PibRespStep pib_resp_execute(PibRespCtx *c)
{
    PibQp *qp = c->qp;
    PibResp *r = &qp->resp;
    const PibPktInfo *pi = c->pi;
    uint32_t m = c->mask;
    PibMemErr err;

    if (m & PIB_OPM_READ) {
        return pib_resp_read(c);
    }
    if (m & PIB_OPM_ATOMIC) {
        return pib_resp_atomic(c);
    }
    if (m & PIB_OPM_FLUSH) {
        return pib_resp_flush(c);
    }
    if (m & PIB_OPM_SEND) {
        if (pi->paylen) {
            err = pib_sgl_copy(qp->s, r->rwqe.pdn, r->rwqe.sge,
                               r->rwqe.num_sge, r->offset, (void *)pi->payload,
                               pi->paylen, DMA_DIRECTION_FROM_DEVICE);
            if (err != PIB_MEM_OK) {
                c->rq_status = PIB_WC_LOC_PROT_ERR;
                return RESP_ERR_OP;
            }
        }
        r->offset += pi->paylen;
    } else if (m & PIB_OPM_WRITE) {
        if (pi->paylen &&
            pib_mr_rw(qp->s, c->mr, r->write_va, (void *)pi->payload,
                      pi->paylen, DMA_DIRECTION_FROM_DEVICE) != PIB_MEM_OK) {
            return RESP_ERR_OP;
        }
        r->write_va += pi->paylen;
        r->write_resid -= pi->paylen;
    } else if (m & PIB_OPM_ATOMIC_WRITE) {
        /* One 8-byte store, under the BQL like the atomics. */
        trace_pib_resp_atomic_write(qp->qpn, pi->psn, pi->va,
                                    ldq_le_p(pi->payload));
        if (pib_mr_rw(qp->s, c->mr, pi->va, (void *)pi->payload,
                      sizeof(uint64_t), DMA_DIRECTION_FROM_DEVICE) !=
            PIB_MEM_OK) {
            return RESP_ERR_OP;
        }
    }
    if (!(m & PIB_OPM_LAST)) {
        return RESP_ACKNOWLEDGE;
    }
    /* SEND with invalidate: the rkey goes once the message is in. */
    if ((m & PIB_OPM_IETH) &&
        !pib_key_invalidate(qp->s, qp, c->pdn, pi->ieth_rkey)) {
        c->rq_status = PIB_WC_REM_INV_REQ_ERR;
        c->drop = PIB_CNT_RX_DROP_ACCESS;
        return RESP_ERR_INVALID;
    }
    r->msn = (r->msn + 1) & 0xffffff;
    if ((m & PIB_OPM_SEND) || (m & PIB_OPM_IMMDT)) {
        return RESP_COMPLETE;
    }
    return RESP_ACKNOWLEDGE;
}

/* COMPLETE: the message consumed a receive WQE. */
static PibRespStep pib_resp_complete(PibRespCtx *c)
{
    PibQp *qp = c->qp;
    const PibPktInfo *pi = c->pi;
    bool send = c->mask & PIB_OPM_SEND;
    struct pib_cqe cqe = {
        .byte_len = cpu_to_le32(send ? qp->resp.offset : qp->resp.write_len),
        .slid = cpu_to_le16(pi->slid),
        .status = PIB_WC_SUCCESS,
        .opcode = send ? PIB_CQE_RECV : PIB_CQE_RECV_RDMA_IMM,
        .sl = pi->sl,
    };

    if (c->mask & PIB_OPM_IMMDT) {
        cqe.flags |= PIB_CQE_F_IMM;
        memcpy(&cqe.imm_inv, pi->imm, sizeof(cqe.imm_inv));
    } else if (c->mask & PIB_OPM_IETH) {
        cqe.flags |= PIB_CQE_F_INV;
        cqe.imm_inv = cpu_to_le32(pi->ieth_rkey);
    }
    pib_resp_complete_rwqe(qp, &cqe, pi->se);
    return RESP_ACKNOWLEDGE;
}

static PibRespStep pib_resp_acknowledge(PibRespCtx *c)
{
    PibQp *qp = c->qp;
    PibResp *r = &qp->resp;
    const PibPktInfo *pi = c->pi;

    r->psn = pib_psn_add(r->psn, 1);
    r->opcode = (c->mask & PIB_OPM_LAST) ? -1 : pi->opcode;
    if (!pib_qp_type_is_reliable(qp->type)) {
        return RESP_DONE;
    }
    r->unacked++;
    if (pi->ackreq || r->unacked >= PIB_ACK_COALESCE) {
        pib_resp_ack(qp, pi->psn, PIB_AETH_ACK | PIB_AETH_NO_CREDITS);
    }
    return RESP_DONE;
}

/* Errors: NAK (RC), the receive WQE in error, the async event, ERR. */
static PibRespStep pib_resp_error(PibRespCtx *c, PibRespStep step)
{
    PibQp *qp = c->qp;
    const PibPktInfo *pi = c->pi;
    uint8_t nak, event;
    struct pib_cqe cqe = { 0 };

    switch (step) {
    case RESP_ERR_INVALID:
        nak = PIB_NAK_INVALID_REQ;
        event = PIB_AE_QP_REQ_ERR;
        break;
    case RESP_ERR_ACCESS:
        nak = PIB_NAK_REM_ACCESS_ERR;
        event = PIB_AE_QP_ACCESS_ERR;
        pib_count(qp->s, PIB_CNT_ACCESS_NAKS_SENT, 1);
        break;
    case RESP_ERR_XRC:
        /* XRC's domain violation takes RD's NAK (the requester: REM_INV_RD_REQ_ERR). */
        nak = PIB_NAK_INVALID_RD_REQ;
        event = PIB_AE_QP_REQ_ERR;
        break;
    default:
        nak = PIB_NAK_REM_OP_ERR;
        event = PIB_AE_QP_FATAL;
        break;
    }
    /* Protocol errors without a more precise reason count as malformed. */
    pib_pkt_drop(qp->s, c->drop != PIB_CNT_MAX ? c->drop :
                 step == RESP_ERR_INVALID ? PIB_CNT_RX_DROP_MALFORMED :
                 PIB_CNT_RX_DROP_ACCESS, pi);
    trace_pib_resp_error(qp->qpn, pi->psn, pib_resp_step_names[step],
                         c->rq_status);
    if (pib_qp_type_is_reliable(qp->type)) {
        pib_resp_ack(qp, pi->psn, PIB_AETH_NAK | nak);
    }
    if (c->rq_status != PIB_WC_SUCCESS && qp->resp.rwqe_valid) {
        /* The receive WQE this message was using fails with it. */
        cqe.status = c->rq_status;
        cqe.opcode = PIB_CQE_RECV;
        pib_resp_complete_rwqe(qp, &cqe, false);
    } else if (c->rq_status == PIB_WC_SUCCESS) {
        pib_aeq_post(qp->s, event, qp->qpn, 0);
    }
    pib_qp_error(qp, "responder error");
    return RESP_DONE;
}

/*
 * UD (and QP0, QP1): one packet, one message.  The special QPs carry MADs, 256 bytes each
 * (IBTA 13.4.1); any other length is a malformed MAD, dropped before it can cost QP0 or QP1
 * a receive WQE, or put them in ERR and cut the port off from its SM.
 */
static void pib_resp_ud(PibQp *qp, const PibPktInfo *pi)
{
    PibResp *r = &qp->resp;
    PibRespCtx c = {
        .qp = qp, .pi = pi, .mask = pi->op->mask, .drop = PIB_CNT_MAX,
        .srq = qp->srq, .pdn = qp->pdn,
    };
    struct pib_cqe cqe = {
        .byte_len = cpu_to_le32(PIB_GRH_SPACE + pi->paylen),
        .qpn = cpu_to_le32((uint32_t)pi->pkey_index << 24),
        .src_qp = cpu_to_le32((pi->src_qpn & PIB_QPN_MASK) |
                              (uint32_t)(pi->dlid &
                                         ((1u << qp->s->port.mgmt.lmc) - 1)) << 24),
        .slid = cpu_to_le16(pi->slid),
        .opcode = PIB_CQE_RECV,
        .sl = pi->sl,
    };
    bool mad_qp = qp->type == PIB_QPT_SMI || qp->type == PIB_QPT_GSI;
    PibMemErr err = PIB_MEM_OK;

    if (pi->paylen > pib_mtu_bytes(PIB_PORT_MTU_ENUM) ||
        (mad_qp && pi->paylen != PIB_MAD_SIZE)) {
        pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_LENGTH, pi);
        return;
    }
    if (!pib_resp_get_rwqe(&c)) {
        pib_pkt_drop(qp->s, qp->type == PIB_QPT_SMI ? PIB_CNT_RX_DROP_VL15 :
                            PIB_CNT_RX_DROP_NO_RECV_WQE, pi);
        return;
    }
    if (c.rq_status == PIB_WC_SUCCESS &&
        PIB_GRH_SPACE + pi->paylen > r->rwqe.length) {
        c.rq_status = PIB_WC_LOC_LEN_ERR;
    }
    /* The first 40 bytes are the GRH's, whether or not one came. */
    if (c.rq_status == PIB_WC_SUCCESS && pi->has_grh) {
        err = pib_sgl_copy(qp->s, r->rwqe.pdn, r->rwqe.sge, r->rwqe.num_sge, 0,
                           (void *)&pi->grh, sizeof(pi->grh),
                           DMA_DIRECTION_FROM_DEVICE);
        cqe.flags |= PIB_CQE_F_GRH;
    }
    if (c.rq_status == PIB_WC_SUCCESS && err == PIB_MEM_OK && pi->paylen) {
        err = pib_sgl_copy(qp->s, r->rwqe.pdn, r->rwqe.sge, r->rwqe.num_sge,
                           PIB_GRH_SPACE, (void *)pi->payload, pi->paylen,
                           DMA_DIRECTION_FROM_DEVICE);
    }
    if (err != PIB_MEM_OK) {
        c.rq_status = PIB_WC_LOC_PROT_ERR;
    }
    if (c.rq_status != PIB_WC_SUCCESS) {
        pib_pkt_drop(qp->s, c.rq_status == PIB_WC_LOC_LEN_ERR ?
                     PIB_CNT_RX_DROP_LENGTH :
                     c.rq_status == PIB_WC_LOC_PROT_ERR ?
                     PIB_CNT_RX_DROP_ACCESS : PIB_CNT_RX_DROP_NO_RECV_WQE, pi);
        cqe = (struct pib_cqe) { .status = c.rq_status,
                                 .opcode = PIB_CQE_RECV };
        pib_resp_complete_rwqe(qp, &cqe, false);
        pib_qp_error(qp, "UD receive error");
        return;
    }
    if (c.mask & PIB_OPM_IMMDT) {
        cqe.flags |= PIB_CQE_F_IMM;
        memcpy(&cqe.imm_inv, pi->imm, sizeof(cqe.imm_inv));
    }
    pib_resp_complete_rwqe(qp, &cqe, pi->se);
}

/*
 * An XRC target has no receive queue and no PD of its own: each request names
 * (XRCETH) the XRC SRQ whose WQEs, CQ and PD it uses, which must be one of the
 * QP's XRC domain.  If it is not, c->srq stays NULL and CHK_OP_VALID refuses
 * the request (a duplicate is only answered: its keys, checked against no PD,
 * fail).
 */
static void pib_resp_xrc_srq(PibRespCtx *c)
{
    PibSrq *srq = pib_srq_lookup(c->qp->s, c->pi->xrc_srqn);

    c->srq = NULL;
    c->pdn = 0;
    if (srq && srq->xrcd && srq->xrcd == c->qp->xrcd) {
        c->srq = srq;
        c->pdn = srq->pdn;
    }
}

/* A request packet arrived for this QP (from pib_rx_run()). */
void pib_resp_recv(PibQp *qp, const PibPktInfo *pi)
{
    PibRespCtx c = {
        .qp = qp, .pi = pi, .mask = pi->op->mask, .drop = PIB_CNT_MAX,
        .srq = qp->srq, .pdn = qp->pdn,
    };
    PibRespStep step = RESP_CHK_PSN;
    unsigned n;

    if (pi->fecn) {                     /* (pib-cca.c) */
        if (qp->type == PIB_QPT_UC || pib_qp_type_is_ud(qp->type)) {
            pib_cca_cnp_tx(qp, pi);
        } else {
            qp->resp.becn_owed = true;
        }
    }
    if (pib_qp_type_is_ud(qp->type)) {
        pib_resp_ud(qp, pi);
        return;
    }
    if (qp->type == PIB_QPT_XRC_TGT) {
        pib_resp_xrc_srq(&c);
    }
    /* Each step moves forward; the bound is only a safety net. */
    for (n = 0; step != RESP_DONE && n < 32; n++) {
        trace_pib_resp_step(qp->qpn, pi->psn, pib_resp_step_names[step]);
        switch (step) {
        case RESP_CHK_PSN:
            step = pib_resp_chk_psn(&c);
            break;
        case RESP_CHK_OP_SEQ:
            step = pib_resp_chk_op_seq(&c);
            break;
        case RESP_CHK_OP_VALID:
            step = pib_resp_chk_op_valid(&c);
            break;
        case RESP_CHK_RESOURCE:
            step = pib_resp_chk_resource(&c);
            break;
        case RESP_CHK_LENGTH:
            step = pib_resp_chk_length(&c);
            break;
        case RESP_CHK_RKEY:
            step = pib_resp_chk_rkey(&c);
            break;
        case RESP_EXECUTE:
            step = pib_resp_execute(&c);
            break;
        case RESP_COMPLETE:
            step = pib_resp_complete(&c);
            break;
        case RESP_ACKNOWLEDGE:
            step = pib_resp_acknowledge(&c);
            break;
        case RESP_DUPLICATE:
            step = pib_resp_duplicate(&c);
            break;
        case RESP_NAK_SEQ:
            pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_PSN_SEQ, pi);
            if (!qp->resp.nak_seq_sent) {
                qp->resp.nak_seq_sent = true;
                pib_count(qp->s, PIB_CNT_SEQ_NAKS_SENT, 1);
                pib_resp_ack(qp, qp->resp.psn,
                             PIB_AETH_NAK | PIB_NAK_PSN_SEQ_ERR);
            }
            step = RESP_DONE;
            break;
        case RESP_RNR:
            pib_pkt_drop(qp->s, PIB_CNT_RX_DROP_RNR, pi);
            pib_count(qp->s, PIB_CNT_RNR_NAKS_SENT, 1);
            pib_resp_ack(qp, pi->psn, PIB_AETH_RNR_NAK |
                                      (qp->min_rnr_timer & 0x1f));
            /*
             * The rest of the message is already on its way: the requester
             * resends from this PSN after the RNR timer, so no sequence NAK
             * for the packets behind it.
             */
            qp->resp.nak_seq_sent = true;
            step = RESP_DONE;
            break;
        case RESP_ERR_INVALID:
        case RESP_ERR_ACCESS:
        case RESP_ERR_OP:
        case RESP_ERR_XRC:
            step = pib_resp_error(&c, step);
            break;
        case RESP_UC_DROP:
            /* The rest of this message goes too; a FIRST/ONLY starts over */
            pib_pkt_drop(qp->s, c.drop != PIB_CNT_MAX ? c.drop :
                         PIB_CNT_RX_DROP_UC_SEQ, pi);
            qp->resp.psn = pib_psn_add(pi->psn, 1);
            qp->resp.uc_drop = !(c.mask & PIB_OPM_LAST);
            qp->resp.opcode = -1;
            qp->resp.offset = 0;
            step = RESP_DONE;
            break;
        default:
            step = RESP_DONE;
            break;
        }
    }
}
