/*
 * pib HCA device model - the receive path, and the packets this port sends
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The codec itself (headers built and parsed) is the fabric's (fabric/pib-packet.c); this
 * file is what the HCA does with it.  Building: a packet from this port's LID and GID
 * (pib_pkt_build).  Receiving: what the codec refused, what the port does not let in (its
 * state, the DLID, VL15, the P_Key), what has no QP, what the QP's transport does not
 * take; each such packet is dropped and counted under exactly one rx_drop_* reason
 * (PibState.counters[], QUERY_COUNTERS, trace point pib_pkt_drop).  Checks that need the QP's
 * state (PSN, opcode sequence, keys) belong to the engines, which answer with NAKs where IB
 * says so.
 *
 * Received packets (from the link, or looped back from our own requester
 * because they are addressed to our own LID) wait in the receive queue and
 * are dispatched at most PIB_RX_BUDGET at a time: right after the link's read
 * callback, or from a bottom half (loopback, and what the budget left).
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/main-loop.h"

#include "pib-internal.h"
#include "../trace.h"

/* The hw_counter names of include/pib_hw.h's enum pib_counter. */
#define PIB_CNT_NAME(id, name) [PIB_CNT_##id] = #name,
static const char *const pib_counter_names[PIB_CNT_MAX] = {
    PIB_COUNTERS(PIB_CNT_NAME)
};
#undef PIB_CNT_NAME

const char *pib_counter_name(enum pib_counter c)
{
    return c < PIB_CNT_MAX ? pib_counter_names[c] : "?";
}

/* Every dropped packet is counted under exactly one reason. */
void pib_pkt_drop(PibState *s, enum pib_counter why, const PibPktInfo *pi)
{
    pib_count(s, why, 1);
    trace_pib_pkt_drop(s->node_guid, pib_counter_name(why),
                       pi ? pib_op_name(pi->opcode) : "-",
                       pi ? pi->dqpn : 0, pi ? pi->psn : 0, s->counters[why]);
}

/*
 * A frame (link header and IB packet) for these header fields and payload.
 * The caller checked that the payload fits the path MTU.  With payload NULL
 * the payload bytes are left for the caller to fill in place
 * (pib_pkt_payload), so data DMA'd from guest memory is copied only once.
 */
PibPacket *pib_pkt_build(PibState *s, const PibPktFields *f,
                         const void *payload, uint32_t paylen)
{
    PibPacket *p = pib_packet_new(s, pib_pkt_len(f, paylen));
    const PibMgmtPort *m = &s->port.mgmt;
    uint16_t slid = m->lid | (f->src_path_bits & ((1u << m->lmc) - 1));
    PibPktFields g = *f;
    uint8_t sgid[16];

    /* The VL is the port's SLtoVLMappingTable's; pib_xmit() refuses a VL it cannot send on. */
    g.vl = pib_mgmt_sl2vl(m->sl2vl, f->sl);
    pib_port_gid(s, g.grh ? f->sgid_index : 0, sgid);
    pib_pkt_write(pib_packet_ib(p), &g, slid, sgid, payload, paylen);
    trace_pib_pkt_tx(s->node_guid, pib_op_name(f->opcode), f->dlid, f->dqpn,
                     f->psn & PIB_PSN_MASK, f->ackreq, paylen);
    return p;
}

/* The counter of a packet the codec refused; PIB_CNT_MAX: it parsed. */
static enum pib_counter pib_rx_parse_counter(PibPktVerdict v)
{
    switch (v) {
    case PIB_PKT_OK:          return PIB_CNT_MAX;
    case PIB_PKT_BAD_OPCODE:  return PIB_CNT_RX_DROP_OPCODE;
    case PIB_PKT_BAD_LENGTH:  return PIB_CNT_RX_DROP_LENGTH;
    default:                  return PIB_CNT_RX_DROP_MALFORMED;
    }
}

/*
 * What the port lets in (docs/reference/hardware.md, "Port"), for a packet whose headers parsed:
 * the port's state, the DLID, VL15 for QP0 and only for QP0, and the P_Key against the
 * table (QP0 is exempt).  Returns PIB_CNT_MAX, or the rx_drop_* reason.  A data packet that
 * passes in ARMED activates the port (IBTA 7.2.5).
 */
static enum pib_counter pib_pkt_admit(PibState *s, PibPktInfo *pi)
{
    bool smp = pi->dqpn == PIB_QPN_SMI;
    bool mcast = pib_lid_is_multicast(pi->dlid);
    int idx;

    if (!pib_port_link_up(s) || (!smp && s->port.sm == PIB_PSM_INIT)) {
        return PIB_CNT_RX_DROP_PORT_DOWN;
    }
    if (!pib_lid_is_ours(s, pi->dlid) && !mcast &&
        !(smp && pi->dlid == PIB_LID_PERMISSIVE)) {
        return PIB_CNT_RX_DROP_DLID;
    }
    if (smp != (pi->vl == PIB_VL_MGMT)) {
        return PIB_CNT_RX_DROP_VL15;
    }
    if (!smp && !pib_mgmt_data_vl_ok(&s->port.mgmt, pi->vl)) {
        return PIB_CNT_RX_DROP_VL;
    }
    if (!smp) {
        idx = pib_mgmt_pkey_find(&s->port.mgmt, pi->pkey);
        if (idx < 0) {
            pib_port_bad_pkey(s, pi);
            return PIB_CNT_RX_DROP_PKEY;
        }
        pi->pkey_index = idx;
        if (s->port.sm == PIB_PSM_ARMED) {
            pib_port_event(s, PIB_PEV_RX_DATA);
        }
    }
    return PIB_CNT_MAX;
}

/*
 * The transport an opcode belongs to must be the destination QP's.  XRC
 * requests go to an XRC target, XRC responses to an XRC initiator.  A CNP
 * goes to the UD or UC QP whose packet met congestion (not QP0: VL15 is not
 * congestion-controlled).
 */
static bool pib_transport_ok(const PibPktInfo *pi, uint8_t qp_type)
{
    switch (pi->opcode >> 5) {
    case 0:
        return qp_type == PIB_QPT_RC;
    case 1:
        return qp_type == PIB_QPT_UC;
    case 3:
        return pib_qp_type_is_ud(qp_type);
    case PIB_OP_CNP >> 5:
        return qp_type == PIB_QPT_UC || qp_type == PIB_QPT_UD || qp_type == PIB_QPT_GSI;
    case PIB_OP_TRANSPORT_XRC >> 5:
        return qp_type == (pi->op->mask & PIB_OPM_RESP ? PIB_QPT_XRC_INI :
                           PIB_QPT_XRC_TGT);
    default:
        return false;
    }
}

/*
 * Receive one packet: parse, find the QP, check what can be checked without
 * the engines, dispatch to the responder (requests) or the completer (RC
 * responses).
 */
static void pib_pkt_dispatch(PibState *s, const uint8_t *b, uint32_t len)
{
    enum pib_counter why;
    PibPktInfo pi;
    PibQp *qp;

    why = pib_rx_parse_counter(pib_pkt_parse(b, len, &pi));
    /* A multicast packet's DGID is its group's: pib_mcast_deliver() checks it. */
    if (why == PIB_CNT_MAX && pi.has_grh && !pib_lid_is_multicast(pi.dlid) &&
        !pib_port_has_gid(s, pi.grh.dgid)) {
        why = PIB_CNT_RX_DROP_DLID;
    }
    if (why == PIB_CNT_MAX) {
        why = pib_pkt_admit(s, &pi);
    }
    if (why != PIB_CNT_MAX) {
        pib_pkt_drop(s, why, &pi);
        return;
    }
    trace_pib_pkt_rx(s->node_guid, pib_op_name(pi.opcode), pi.slid, pi.dqpn,
                     pi.psn, pi.ackreq, pi.paylen);

    if (pib_lid_is_multicast(pi.dlid)) {
        why = pib_mcast_deliver(s, &pi);
        if (why != PIB_CNT_MAX) {
            pib_pkt_drop(s, why, &pi);
        }
        return;
    }
    qp = pib_qp_lookup(s, pi.dqpn);
    if (!qp) {
        pib_pkt_drop(s, PIB_CNT_RX_DROP_NO_QP, &pi);
        return;
    }
    pib_pkt_to_qp(s, qp, &pi);
}

/*
 * A packet for one QP: the checks that need the QP, then the responder (requests) or the
 * completer (RC responses).  A multicast packet comes here once per attached QP.
 */
void pib_pkt_to_qp(PibState *s, PibQp *qp, const PibPktInfo *pi)
{
    if (!pib_transport_ok(pi, qp->type)) {
        pib_pkt_drop(s, PIB_CNT_RX_DROP_QP_TYPE, pi);
        return;
    }
    /* Only RTR and later receive: RESET, INIT and ERR drop. */
    switch (qp->state) {
    case PIB_QPS_RTR:
    case PIB_QPS_RTS:
    case PIB_QPS_SQD:
    case PIB_QPS_SQE:
        break;
    default:
        pib_pkt_drop(s, PIB_CNT_RX_DROP_QP_STATE, pi);
        return;
    }
    if (pib_qp_is_connected(qp) && pi->slid != qp->av.dlid) {
        pib_pkt_drop(s, PIB_CNT_RX_DROP_SLID, pi);
        return;
    }
    /* QP1 takes any partition of the port; other QPs only their own (IBTA 10.9.3). */
    if (qp->type != PIB_QPT_SMI && qp->type != PIB_QPT_GSI &&
        !pib_mgmt_pkey_match(pib_port_pkey(s, qp->pkey_index), pi->pkey)) {
        pib_port_bad_pkey(s, pi);
        pib_pkt_drop(s, PIB_CNT_RX_DROP_PKEY, pi);
        return;
    }
    /* A CNP has no DETH and asks nothing of the responder: the requester slows down. */
    if (pi->op->mask & PIB_OPM_CNP) {
        pib_cca_cnp_rx(qp, pi);
        return;
    }
    if (pib_qp_type_is_ud(qp->type) && pi->qkey != qp->qkey) {
        if (s->port.mgmt.qkey_violations != UINT16_MAX) {
            s->port.mgmt.qkey_violations++;
        }
        pib_pkt_drop(s, PIB_CNT_RX_DROP_QKEY, pi);
        return;
    }
    /* First packet in RTR: communication established (IBTA 11.6.3.1). */
    if (qp->state == PIB_QPS_RTR && !qp->resp.comm_est) {
        qp->resp.comm_est = true;
        pib_aeq_post(s, PIB_AE_COMM_EST, qp->qpn, 0);
    }
    if (pi->op->mask & PIB_OPM_RESP) {
        if (qp->state == PIB_QPS_RTR) {
            pib_pkt_drop(s, PIB_CNT_RX_DROP_QP_STATE, pi);
            return;
        }
        pib_comp_recv(qp, pi);
    } else {
        pib_resp_recv(qp, pi);
    }
}

/*
 * The receive queue.  Frames from the link are queued by the chardev's read
 * callback and processed at its end (pib_rx_run() from pib_link_receive()),
 * in the same main-loop pass: going through the bottom half cost one more
 * pass, and an eventfd write to schedule it, per read.  Packets looped back
 * to our own LID are queued by our own engines, in the middle of a step, so
 * they wait for the receive bottom half.  Either way the queue is processed
 * in arrival order.
 */

/* Count a packet that reached the port, and queue it; false if it was lost */
static bool pib_rx_queue(PibState *s, PibPacket *p)
{
    if (pib_inject_drop(s, p, false)) {
        pib_packet_free(s, p);      /* lost before the port saw it */
        return false;
    }
    pib_count(s, PIB_CNT_RX_PACKETS, 1);
    pib_count(s, PIB_CNT_RX_BYTES, pib_packet_ib_len(p));
    QSIMPLEQ_INSERT_TAIL(&s->rxq, p, next);
    s->rxq_len++;
    return true;
}

/* A packet to our own LID: processed by the receive bottom half. */
void pib_rx_enqueue(PibState *s, PibPacket *p)
{
    /* A queue that was not empty has the bottom half scheduled already. */
    if (pib_rx_queue(s, p) && s->rxq_len == 1) {
        qemu_bh_schedule(s->rx_bh);
    }
}

/* A frame from the link: the read callback calls pib_rx_run() when done. */
void pib_rx_link(PibState *s, PibPacket *p)
{
    pib_rx_queue(s, p);
}

/*
 * A packet from the link, in the link's read buffer (or the frame buffer of
 * one split across two reads): dispatched right there, with no copy and no
 * wait in the receive queue, when nothing waits in that queue ahead of it
 * (packets are handled in arrival order) and no receive fault is armed
 * (inject-drop-rx works on queued packets).  The
 * engines it wakes run in pib_rx_run(), which the link calls after its feed,
 * as for queued packets.  False: the link queues it (pib_rx_link()).
 */
bool pib_rx_link_bytes(PibState *s, const uint8_t *ib, uint32_t len)
{
    if (s->rxq_len || s->inject.drop_rx) {
        return false;
    }
    pib_count(s, PIB_CNT_RX_PACKETS, 1);
    pib_count(s, PIB_CNT_RX_BYTES, len);
    s->work_deferred = true;
    pib_pkt_dispatch(s, ib, len);
    return true;
}

/*
 * Dispatch queued packets, at most PIB_RX_BUDGET (the bottom half takes the
 * rest), then run the engines they woke and send what all of it produced,
 * still in this main-loop pass.
 */
void pib_rx_run(PibState *s)
{
    unsigned n;
    PibPacket *p;

    s->work_deferred = true;
    for (n = 0; n < PIB_RX_BUDGET && (p = QSIMPLEQ_FIRST(&s->rxq)); n++) {
        QSIMPLEQ_REMOVE_HEAD(&s->rxq, next);
        s->rxq_len--;
        pib_pkt_dispatch(s, pib_packet_ib(p), pib_packet_ib_len(p));
        pib_packet_free(s, p);
    }
    s->work_deferred = false;
    if (!QSIMPLEQ_EMPTY(&s->rxq)) {
        qemu_bh_schedule(s->rx_bh);
    }
    pib_work_run(s);            /* flushes the transmit queue */
    /* Room again: the link may read, stopped requesters may send. */
    if (s->rxq_len < PIB_RXQ_MAX / 2) {
        if (s->link.rx_throttled) {
            s->link.rx_throttled = false;
            qemu_chr_fe_accept_input(&s->link.chr);
        }
        if (s->rx_waiters) {
            s->rx_waiters = false;
            pib_qp_kick_waiters(s);
        }
    }
}

void pib_rx_bh(void *opaque)
{
    PibState *s = opaque;

    if (!s->stopped) {          /* (stopped: the machine's resume schedules us again) */
        pib_rx_run(s);
    }
}

void pib_rx_purge(PibState *s)
{
    PibPacket *p;

    while ((p = QSIMPLEQ_FIRST(&s->rxq))) {
        QSIMPLEQ_REMOVE_HEAD(&s->rxq, next);
        pib_packet_free(s, p);
    }
    s->rxq_len = 0;
}
