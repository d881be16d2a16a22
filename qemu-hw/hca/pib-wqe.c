/*
 * pib HCA device model - work queue entries
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A QP's WQEs as the engines see them: fetched from the rings in guest
 * memory (SQ, RQ; an SRQ's through pib_srq_take), checked, completed with a
 * CQE, and flushed when the QP enters ERR.
 *
 * A WQE is read from guest memory every time an engine needs it, and checked
 * every time: the guest may rewrite a posted WQE (that is its own bug), but
 * it can never make the device overrun a slot or trust a count it did not
 * check.  Which opcodes a QP type carries, and what a slot holds, are the
 * contract's rules (include/pib_wqe.h), shared with the driver and the
 * provider.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"

#include "pib-internal.h"
#include "../trace.h"

/*
 * Fetching WQEs
 */

static bool pib_wqe_bad(PibQp *qp, const char *ring, uint32_t idx,
                        const char *why, uint64_t val, uint8_t code,
                        uint8_t *status)
{
    PIB_GUEST_ERR(qp->s, PIB_GERR_WQE, pib_ub_wqe,
                  "QP %" PRIu32 " %s WQE %" PRIu32 ": %s (0x%" PRIx64 ")",
                  qp->qpn, ring, idx, why, val);
    *status = code;
    return false;
}

static bool pib_read_sges(PibQp *qp, uint64_t addr, uint32_t n, PibSge *sge,
                          uint64_t *total)
{
    struct pib_sge raw[PIB_MAX_SGE];
    uint32_t i;

    *total = 0;
    if (n && !pib_dma_read(qp->s, addr, raw, n * sizeof(raw[0]), "SGEs")) {
        return false;
    }
    for (i = 0; i < n; i++) {
        sge[i].addr = le64_to_cpu(raw[i].addr);
        sge[i].length = le32_to_cpu(raw[i].length);
        sge[i].lkey = le32_to_cpu(raw[i].lkey);
        *total += sge[i].length;
    }
    return true;
}

/*
 * A datagram's address vector: the GRH part, when there is one, sits where RC/UC WQEs keep
 * RDMA and atomic operands (struct pib_ud_wqe).
 */
static bool pib_ud_av_fetch(PibQp *qp, uint32_t idx, const struct pib_send_wqe *raw,
                            PibSendWqe *w, uint8_t *status)
{
    const struct pib_ud_wqe *ud = (const struct pib_ud_wqe *)raw;

    if (ud->av_flags & ~PIB_UD_AV_F_GRH) {
        return pib_wqe_bad(qp, "send", idx, "av_flags", ud->av_flags,
                           PIB_WC_LOC_QP_OP_ERR, status);
    }
    w->ud_grh = ud->av_flags & PIB_UD_AV_F_GRH;
    if (!w->ud_grh) {
        return true;
    }
    if (ud->sgid_index >= PIB_GID_TBL_LEN) {
        return pib_wqe_bad(qp, "send", idx, "sgid_index", ud->sgid_index,
                           PIB_WC_LOC_QP_OP_ERR, status);
    }
    w->ud_av = (PibAv) {
        .dlid = w->ud_dlid,
        .sl = w->ud_sl,
        .grh = true,
        .sgid_index = ud->sgid_index,
        .g.hop_limit = ud->hop_limit,
        .g.traffic_class = ud->traffic_class,
        .g.flow_label = le32_to_cpu(ud->flow_label) & PIB_FLOW_LABEL_MASK,
    };
    memcpy(w->ud_av.g.dgid, ud->dgid, sizeof(w->ud_av.g.dgid));
    return true;
}

#define PIB_WQE_F_ALL   (PIB_WQE_F_SIGNALED | PIB_WQE_F_SOLICITED | \
                         PIB_WQE_F_INLINE | PIB_WQE_F_FENCE)

/*
 * A FLUSH WQE (pib_wqe.h, PIB_FLUSH_*): no SGEs and no data (length 0); what to flush is in
 * imm_inv, and a range's length in compare_add.  Unknown bits, no placement type or an
 * unknown selectivity make a bad WQE; a range longer than a message can be, LOC_LEN_ERR.
 */
static bool pib_flush_wqe_check(PibQp *qp, uint32_t idx, PibSendWqe *w, uint8_t *status)
{
    uint32_t what = ldl_le_p(w->imm);
    uint32_t sel = what >> PIB_FLUSH_SEL_SHIFT;

    if (!(what & PIB_FLUSH_PLT_MASK) ||
        (what & PIB_FLUSH_PLT_MASK & ~(PIB_FLUSH_GLOBAL | PIB_FLUSH_PERSISTENT)) ||
        sel > PIB_FLUSH_MR) {
        return pib_wqe_bad(qp, "send", idx, "FLUSH type", what, PIB_WC_LOC_QP_OP_ERR,
                           status);
    }
    if (sel == PIB_FLUSH_RANGE && w->compare_add > PIB_MAX_MSG_SZ) {
        *status = PIB_WC_LOC_LEN_ERR;
        return false;
    }
    w->length = 0;
    return true;
}

/*
 * Fetch and check send WQE idx.  On failure *status is the completion status
 * it must complete with (the QP then goes to ERR); w->wr_id and w->opcode are
 * valid whenever the control segment could be read.
 */
bool pib_sq_fetch(PibQp *qp, uint32_t idx, PibSendWqe *w, uint8_t *status)
{
    uint64_t addr = pib_ring_addr(&qp->sq.ring, idx);
    struct pib_send_wqe raw;

    memset(w, 0, sizeof(*w));
    if (!pib_dma_read(qp->s, addr, &raw, sizeof(raw), "send WQE")) {
        *status = PIB_WC_LOC_QP_OP_ERR;
        return false;
    }
    w->opcode = raw.opcode;
    w->flags = raw.flags;
    memcpy(w->imm, &raw.imm_inv, sizeof(w->imm));
    w->wr_id = le64_to_cpu(raw.wr_id);
    w->remote_addr = le64_to_cpu(raw.remote_addr);
    w->rkey = le32_to_cpu(raw.rkey);
    w->compare_add = le64_to_cpu(raw.compare_add);
    w->swap = le64_to_cpu(raw.swap);
    w->ud_qpn = le32_to_cpu(raw.ud_qpn);
    w->xrc_srqn = le32_to_cpu(raw.xrc_srqn) & PIB_QPN_MASK;
    w->ud_qkey = le32_to_cpu(raw.ud_qkey);
    w->ud_dlid = le16_to_cpu(raw.ud_dlid);
    w->ud_sl = raw.ud_sl;
    w->ud_pkey_index = le16_to_cpu(raw.ud_pkey_index);
    trace_pib_wqe_fetch(qp->qpn, "SQ", idx, w->wr_id, w->opcode, w->flags);

    if (!pib_wqe_opcode_allowed(qp->type, w->opcode)) {
        return pib_wqe_bad(qp, "send", idx, "opcode", w->opcode,
                           PIB_WC_LOC_QP_OP_ERR, status);
    }
    if (w->flags & ~PIB_WQE_F_ALL) {
        return pib_wqe_bad(qp, "send", idx, "flags", w->flags,
                           PIB_WC_LOC_QP_OP_ERR, status);
    }
    if ((w->flags & PIB_WQE_F_INLINE) && !pib_wqe_inline_allowed(w->opcode)) {
        return pib_wqe_bad(qp, "send", idx, "inline with this opcode",
                           w->opcode, PIB_WC_LOC_QP_OP_ERR, status);
    }
    if (pib_qp_type_is_ud(qp->type) && !pib_ud_av_fetch(qp, idx, &raw, w, status)) {
        return false;
    }
    if (qp->type == PIB_QPT_GSI && w->ud_pkey_index >= PIB_PKEY_TBL_LEN) {
        return pib_wqe_bad(qp, "send", idx, "ud_pkey_index", w->ud_pkey_index,
                           PIB_WC_LOC_QP_OP_ERR, status);
    }
    if (pib_wqe_is_local(w->opcode)) {
        memcpy(&w->bind, &raw, sizeof(w->bind));
        return true;        /* no SGEs, no length */
    }
    if (w->opcode == PIB_WQE_ATOMIC_WRITE) {
        w->length = sizeof(uint64_t);   /* compare_add's bytes; no SGEs */
        return true;
    }
    if (w->opcode == PIB_WQE_FLUSH) {
        return pib_flush_wqe_check(qp, idx, w, status);
    }
    if (w->flags & PIB_WQE_F_INLINE) {
        w->inline_len = le32_to_cpu(raw.inline_len);
        if (w->inline_len > qp->max_inline) {
            return pib_wqe_bad(qp, "send", idx, "inline_len", w->inline_len,
                               PIB_WC_LOC_LEN_ERR, status);
        }
        if (w->inline_len &&
            !pib_dma_read(qp->s, addr + sizeof(raw), w->inline_data,
                          w->inline_len, "inline data")) {
            *status = PIB_WC_LOC_QP_OP_ERR;
            return false;
        }
        w->length = w->inline_len;
    } else {
        w->num_sge = raw.num_sge;
        if (w->num_sge > qp->sq.max_sge) {
            return pib_wqe_bad(qp, "send", idx, "num_sge", w->num_sge,
                               PIB_WC_LOC_LEN_ERR, status);
        }
        if (!pib_read_sges(qp, addr + sizeof(raw), w->num_sge, w->sge,
                           &w->length)) {
            *status = PIB_WC_LOC_QP_OP_ERR;
            return false;
        }
    }

    /* Well formed; lengths the verbs reject, completing with an error. */
    if (w->length > PIB_MAX_MSG_SZ) {
        *status = PIB_WC_LOC_LEN_ERR;
        return false;
    }
    if (pib_qp_type_is_ud(qp->type) &&
        w->length > pib_mtu_bytes(PIB_PORT_MTU_ENUM)) {
        *status = PIB_WC_LOC_LEN_ERR;
        return false;
    }
    if ((w->opcode == PIB_WQE_ATOMIC_CS || w->opcode == PIB_WQE_ATOMIC_FA) &&
        w->length != sizeof(uint64_t)) {
        *status = PIB_WC_LOC_LEN_ERR;
        return false;
    }
    return true;
}

/* A receive WQE from a ring (the QP's RQ, or an SRQ), checked. */
bool pib_recv_fetch(PibQp *qp, const PibRing *ring, uint32_t max_sge,
                    const char *what, uint32_t idx, PibRecvWqe *w,
                    uint8_t *status)
{
    uint64_t addr = pib_ring_addr(ring, idx);
    struct pib_recv_wqe raw;

    memset(w, 0, sizeof(*w));
    w->idx = idx;
    if (!pib_dma_read(qp->s, addr, &raw, sizeof(raw), "receive WQE")) {
        *status = PIB_WC_LOC_QP_OP_ERR;
        return false;
    }
    w->wr_id = le64_to_cpu(raw.wr_id);
    w->num_sge = raw.num_sge;
    trace_pib_wqe_fetch(qp->qpn, what, idx, w->wr_id, 0, 0);
    if (w->num_sge > max_sge) {
        return pib_wqe_bad(qp, "receive", idx, "num_sge", w->num_sge,
                           PIB_WC_LOC_LEN_ERR, status);
    }
    if (!pib_read_sges(qp, addr + sizeof(raw), w->num_sge, w->sge,
                       &w->length)) {
        *status = PIB_WC_LOC_QP_OP_ERR;
        return false;
    }
    return true;
}

/* Fetch and check receive WQE idx of the QP's RQ, as pib_sq_fetch(). */
bool pib_rq_fetch(PibQp *qp, uint32_t idx, PibRecvWqe *w, uint8_t *status)
{
    bool ok = pib_recv_fetch(qp, &qp->rq.ring, qp->rq.max_sge, "RQ", idx, w,
                             status);

    w->pdn = qp->pdn;
    return ok;
}


/*
 * Completions
 */

/*
 * A send completion for SQ entry idx (its wqe_index lets the consumer retire
 * every slot up to it).
 */
void pib_qp_post_send_cqe(PibQp *qp, uint32_t idx, const PibWqeMeta *m,
                          uint8_t status)
{
    struct pib_cqe cqe = {
        .wr_id = cpu_to_le64(m->wr_id),
        .byte_len = cpu_to_le32(m->length),
        .qpn = cpu_to_le32(qp->qpn),
        .status = status,
        .opcode = pib_cqe_opcode_of(m->opcode),
        .wqe_index = cpu_to_le16(idx & 0xffff),
    };

    pib_cq_post(qp->s, qp->scq, &cqe, false);
}

/*
 * A receive completion; the caller set wqe_index (RQ or SRQ slot).  An XRC
 * target's goes to the CQ of the XRC SRQ whose WQE it completes, and names
 * that SRQ (PIB_CQE_F_XRC), since the QP alone does not tell the consumer
 * which SRQ slot is free again.
 */
void pib_qp_post_recv_cqe(PibQp *qp, struct pib_cqe *cqe, bool solicited)
{
    PibSrq *xsrq = qp->type == PIB_QPT_XRC_TGT ? qp->resp.rwqe_srq : NULL;

    /* [23:0] the QPN; [31:24], a UD receive's P_Key index, the caller's. */
    cqe->qpn = cpu_to_le32((le32_to_cpu(cqe->qpn) & ~PIB_QPN_MASK) | qp->qpn);
    if (xsrq) {
        cqe->flags |= PIB_CQE_F_XRC;
        cqe->src_qp = cpu_to_le32(xsrq->srqn);
        pib_cq_post(qp->s, xsrq->cq, cqe, solicited);
    } else if (qp->rcq) {
        pib_cq_post(qp->s, qp->rcq, cqe, solicited);
    }
}

/* wr_id and opcode of a WQE the engines never started (for a flush). */
static void pib_sq_peek(PibQp *qp, uint32_t idx, PibWqeMeta *m)
{
    struct pib_send_wqe raw;

    memset(m, 0, sizeof(*m));
    if (pib_dma_read(qp->s, pib_ring_addr(&qp->sq.ring, idx), &raw,
                     sizeof(raw), "send WQE")) {
        m->wr_id = le64_to_cpu(raw.wr_id);
        m->opcode = raw.opcode;
    }
}

/*
 * Complete every outstanding WQE with WR_FLUSH_ERR, in order: the SQ from
 * its consumer to its producer index, then the RQ, or, on an SRQ, the one WQE
 * the QP took and did not complete (the others stay in the SRQ for the other
 * QPs).  Bounded by the depths.
 */
void pib_qp_flush(PibQp *qp)
{
    PibWqeMeta m;
    struct pib_cqe cqe;
    uint64_t wr_id;

    /*
     * In ERR only a doorbell tells of new receives: ask the consumer for
     * one, then flush what the record had by then (pib_wqe.h says why none
     * is missed).  The barrier orders our write before our read.
     */
    if (qp->rq.dbrec && qp->state == PIB_QPS_ERR) {
        pib_dbrec_set_flags(qp->s, qp->rq.dbrec, PIB_DBREC_F_RING);
        smp_mb();
        pib_rq_refresh(qp);
    }
    if (qp->sq.pi != qp->sq.ci || qp->rq.pi != qp->rq.ci) {
        trace_pib_qp_flush(qp->qpn, qp->sq.pi - qp->sq.ci,
                           qp->rq.pi - qp->rq.ci);
    }
    while (qp->sq.ci != qp->sq.pi) {
        pib_sq_peek(qp, qp->sq.ci, &m);
        pib_qp_post_send_cqe(qp, qp->sq.ci, &m, PIB_WC_WR_FLUSH_ERR);
        qp->sq.ci++;
    }
    if (qp->resp.rwqe_srq && qp->resp.rwqe_valid) {
        cqe = (struct pib_cqe) {
            .wr_id = cpu_to_le64(qp->resp.rwqe.wr_id),
            .status = PIB_WC_WR_FLUSH_ERR,
            .opcode = PIB_CQE_RECV,
            .wqe_index = cpu_to_le16(qp->resp.rwqe.idx & 0xffff),
        };
        pib_qp_post_recv_cqe(qp, &cqe, false);
    }
    while (qp->rq.ci != qp->rq.pi) {
        wr_id = 0;
        if (pib_dma_read(qp->s, pib_ring_addr(&qp->rq.ring, qp->rq.ci),
                         &wr_id, sizeof(wr_id), "receive WQE")) {
            wr_id = le64_to_cpu(wr_id);
        }
        cqe = (struct pib_cqe) {
            .wr_id = cpu_to_le64(wr_id),
            .status = PIB_WC_WR_FLUSH_ERR,
            .opcode = PIB_CQE_RECV,
            .wqe_index = cpu_to_le16(qp->rq.ci & 0xffff),
        };
        pib_qp_post_recv_cqe(qp, &cqe, false);
        qp->rq.ci++;
    }
    qp->req.wqe_idx = qp->req.wqe_max = qp->sq.ci;
    qp->req.offset = 0;
    qp->req.wqe_valid = false;
    qp->resp.rwqe_valid = false;
    qp->resp.rwqe_srq = NULL;
}

