/*
 * pib switch - an InfiniBand switch as a QEMU device without a bus
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 *   qemu-system-x86_64 -machine none -nodefaults -display none \
 *       -chardev socket,id=p1,path=sw-1.sock,server=on,wait=off ... \
 *       -device pib-switch,id=sw0,ports=4,port1=p1,port2=p2,...
 *
 * The switch is built on the fabric layer alone (../fabric/pib-fabric.h), as the HCA is;
 * it knows nothing of the HCA.  Each external port is a PibLink (fabric/pib-link.c) on its
 * chardev, running the same framing, queues and port state machine as an HCA's port.  Port 0
 * is the switch's management port (base port 0, IBTA 18.2.1.1): it has no link; its LID is
 * the switch's, and the same SMA and PMA as the HCA's (fabric/pib-sma.c, pib-pma.c) answer
 * for it, with the switch attributes
 * (SwitchInfo, LinearForwardingTable, MulticastForwardingTable) that the SMA serves only to a
 * node with PibMgmtNode.sw.  docs/how-to/switch.md explains the choice and the rules.  The switch's
 * state is in pib-switch.h; its own management datagrams (directed route hop by hop, SMPs and
 * GMPs for its agents) in pib-switch-mad.c.
 *
 * A packet that arrives on port `in` goes through one pass:
 *
 *   LRH       malformed (length, LVer) -> dropped
 *   VL15      an SMP: directed route (class 0x81) follows IBTA 14.2.2 hop by hop; LID-routed
 *             (class 0x01) to the switch's LID goes to the SMA, to another LID by the LFT
 *   unicast   LFT[DLID]: 255, above LinearFDBTop, no such port, the arrival port or a port
 *             that is not ACTIVE -> dropped; port 0 -> the switch's own GSI (the PMA)
 *   multicast MFT[MLID] minus the arrival port: a copy out of each ACTIVE port
 *   VL        data arrives on a VL the arrival port operates, and leaves on the VL its
 *             SLtoVLMappingTable of (arrival port, output port) gives the SL (sw_map_vl);
 *             VL15 or a VL the output port does not operate -> dropped
 *
 * Every drop is counted under exactly one reason (PIB_SW_DROPS: a QOM property each, and the
 * ports' PMA counters) and traced.  Forwarded frames only queue; each read's frames leave in
 * one write per port when the read is done (rx_run).  A full output queue drops (a switch's
 * head-of-queue lifetime), which RC's retransmission recovers from.
 *
 * It is a device (-device) rather than an -object: since QEMU 6.0 -object and object-add
 * accept only the types of QAPI's ObjectType, which a device model outside the tree cannot
 * extend (docs/how-to/switch.md).  A device with no bus needs no machine (-machine none), but it
 * cannot be hot-plugged: device_add refuses it.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/error-report.h"
#include "qemu/host-utils.h"
#include "qemu/main-loop.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "chardev/char-fe.h"
#include "hw/qdev-properties-system.h"     /* DEFINE_PROP_CHR */

#include "../trace.h"

#include "pib-switch.h"        /* the switch's state, shared with pib-switch-mad.c */

static const char *const pib_sw_drop_names[PIB_SW_DROP__MAX] = {
#define PIB_SW_DROP_NAME(id, name) [PIB_SW_DROP_##id] = name,
    PIB_SW_DROPS(PIB_SW_DROP_NAME)
#undef PIB_SW_DROP_NAME
};

/*
 * Helpers
 */

bool pib_sw_port_up(const PibSwitchPort *p)
{
    return p->num == 0 || pib_port_sm_link_up(p->sm);
}

bool pib_sw_port_active(const PibSwitchPort *p)
{
    return p->num == 0 || p->sm == PIB_PSM_ACTIVE;
}

/* Is lid the switch's own (port 0's LID, with its LMC path bits)? */
bool pib_sw_lid_is_ours(const PibSwitch *sw, uint16_t lid)
{
    const PibMgmtPort *m = &sw->ports[0].mgmt;
    uint16_t mask = ~((1u << m->lmc) - 1);

    return m->lid && (lid & mask) == (m->lid & mask);
}

/* Count a drop under its one reason, and trace it. */
static void sw_count_drop(PibSwitch *sw, uint8_t port, enum pib_sw_drop why, uint16_t dlid)
{
    sw->drops[why]++;
    trace_pib_switch_drop(sw->node_guid, port, pib_sw_drop_names[why], dlid, sw->drops[why]);
}

/* Drops are rare: the buffer goes straight back to the allocator, not to a port's list. */
void pib_sw_drop(PibSwitch *sw, PibSwitchPort *in, PibPacket *p, enum pib_sw_drop why,
                 uint16_t dlid)
{
    sw_count_drop(sw, in ? in->num : 0, why, dlid);
    if (in && (why == PIB_SW_DROP_MALFORMED || why == PIB_SW_DROP_VL_MAPPING)) {
        in->ctr.rcv_errors++;           /* PortVLMappingErrors are PortRcvErrors */
    }
    if (in && in->num != 0 && (why == PIB_SW_DROP_NO_ROUTE || why == PIB_SW_DROP_BAD_PORT ||
                               why == PIB_SW_DROP_ARRIVAL_PORT)) {
        in->ctr.rcv_switch_relay++;     /* PortRcvSwitchRelayErrors */
    }
    pib_packet_release(p);          /* the credits it held on its input link */
    g_free(p);
}

/*
 * Partition enforcement (IBTA 10.9.3) at one external port, for a data packet arriving
 * (inbound) or leaving (outbound) by it: with the port's PIB_PI_ENFORCE_PART_* bit set, the
 * BTH's P_Key must match an entry of the port's P_KeyTable (pib_mgmt_pkey_find); with its
 * PIB_PI_ENFORCE_RAW_* bit set, a raw packet (LNH 0 or 1, no BTH) may not pass at all.  The
 * caller drops what this refuses and counts it in the port's constraint errors.
 */
static bool sw_partition_ok(const PibSwitchPort *port, PibPacket *p, bool inbound)
{
    const uint8_t *b = pib_packet_ib(p);
    uint32_t len = pib_packet_ib_len(p);
    uint8_t enforce = port->mgmt.enforce;
    uint8_t lnh = ((const struct pib_lrh *)b)->sl_lnh & 3;
    uint32_t bth = sizeof(struct pib_lrh) +
                   (lnh == PIB_LNH_IBA_GLOBAL ? sizeof(struct pib_grh) : 0);

    if (lnh != PIB_LNH_IBA_LOCAL && lnh != PIB_LNH_IBA_GLOBAL) {
        return !(enforce & (inbound ? PIB_PI_ENFORCE_RAW_IN : PIB_PI_ENFORCE_RAW_OUT));
    }
    if (!(enforce & (inbound ? PIB_PI_ENFORCE_PART_IN : PIB_PI_ENFORCE_PART_OUT))) {
        return true;
    }
    /* Too short to hold a BTH: no P_Key to match (sw_receive checked the LRH only). */
    return len >= bth + sizeof(struct pib_bth) &&
           pib_mgmt_pkey_find(&port->mgmt,
                              be16_to_cpu(((const struct pib_bth *)(b + bth))->pkey_be)) >= 0;
}

/*
 * The VL a data packet leaves on (IBTA 7.6.6): the SLtoVLMappingTable of its (input port,
 * output port) maps the LRH's SL, and the LRH carries the new VL.  False when that VL is
 * VL15 or one the output port does not operate: the packet cannot leave.
 */
static bool sw_map_vl(PibSwitch *sw, const PibSwitchPort *in, const PibSwitchPort *out,
                      PibPacket *p)
{
    struct pib_lrh *lrh = (struct pib_lrh *)pib_packet_ib(p);
    uint8_t vl = pib_mgmt_sl2vl(sw->tables.sl2vl[in->num][out->num], lrh->sl_lnh >> 4);

    if (!pib_mgmt_data_vl_ok(&out->mgmt, vl)) {
        return false;
    }
    lrh->vl_lver = vl << 4 | (lrh->vl_lver & 0xf);
    return true;
}

/*
 * Transmit
 */

/*
 * Queue p out of port `out` (the caller checked it exists and is not the arrival port where
 * that matters).  Data needs an ACTIVE port, an SMP one whose link is up.
 */
/*
 * Congestion control (IBTA Annex A10, fabric/pib-cc.c): a data packet queued on `out` gets
 * FECN when its output VL is congested.  What waits ahead of it is the VL's queue (packets
 * without credits: the port is a victim of the next hop) and the transmit FIFO (packets the
 * link could not send yet: the port is the root).  Raw packets carry no BTH to mark.
 */
static void sw_cc_mark(PibSwitch *sw, PibSwitchPort *out, PibPacket *p, uint16_t dlid)
{
    uint8_t *b = pib_packet_ib(p);
    const struct pib_lrh *lrh = (const struct pib_lrh *)b;
    uint32_t len = pib_packet_ib_len(p), off = sizeof(*lrh), ahead;
    uint8_t vl = lrh->vl_lver >> 4, lnh = lrh->sl_lnh & 3;
    PibLink *l = &out->link;
    struct pib_bth *bth;
    bool victim;

    if (lnh == PIB_LNH_IBA_GLOBAL) {
        off += sizeof(struct pib_grh);
    } else if (lnh != PIB_LNH_IBA_LOCAL) {
        return;
    }
    if (len < off + sizeof(*bth) || vl >= PIB_LINK_DATA_VLS) {
        return;
    }
    victim = l->fc && l->vl[vl].qlen;
    ahead = (l->fc ? l->vl[vl].qlen : 0) + l->txq_len;
    if (!pib_cc_sw_mark(&sw->mgmt.cc, out->num, ahead, victim, len)) {
        return;
    }
    bth = (struct pib_bth *)(b + off);
    bth->dqpn_be |= cpu_to_be32(PIB_BTH_FECN);
    sw->fecn_marked++;
    pib_cc_sw_log(&sw->mgmt.cc, out->num, be16_to_cpu(lrh->slid_be), dlid, lrh->sl_lnh >> 4);
    trace_pib_switch_fecn(sw->node_guid, out->num, vl, ahead, victim, dlid);
}

void pib_sw_send(PibSwitch *sw, PibSwitchPort *in, PibSwitchPort *out, PibPacket *p,
                 bool smp, uint16_t dlid)
{
    uint32_t len = pib_packet_ib_len(p);

    if (out->num == 0 || !out->linked || !(smp ? pib_sw_port_up(out) : pib_sw_port_active(out))) {
        out->ctr.xmit_discards++;
        pib_sw_drop(sw, in, p, PIB_SW_DROP_PORT_DOWN, dlid);
        return;
    }
    if (!smp && !sw_partition_ok(out, p, false)) {
        out->ctr.xmit_constraint++;
        pib_sw_drop(sw, in, p, PIB_SW_DROP_PARTITION, dlid);
        return;
    }
    if (!smp && !sw_map_vl(sw, in, out, p)) {
        pib_sw_drop(sw, in, p, PIB_SW_DROP_VL_MAPPING, dlid);
        return;
    }
    /*
     * A packet that holds credits of its input link is bounded by them (the input port
     * granted no more than its buffer); only what came without (a link without credits,
     * multicast copies, the switch's own) meets the queue's hard bound.
     */
    if (!p->fc_link && out->link.txq_len >= PIB_QUEUE_HARD_MAX) {
        out->ctr.xmit_discards++;
        pib_sw_drop(sw, in, p, PIB_SW_DROP_TXQ_FULL, dlid);
        return;
    }
    if (!smp) {
        sw_cc_mark(sw, out, p, dlid);
    }
    out->ctr.xmit_pkts++;
    out->ctr.xmit_data += len + 4;      /* LRH to ICRC: the link carries no CRCs */
    if (pib_lid_is_multicast(dlid)) {
        out->ctr.multi_xmit_pkts++;
    } else {
        out->ctr.uni_xmit_pkts++;
    }
    sw->forwarded++;
    trace_pib_switch_fwd(sw->node_guid, in->num, out->num, dlid, len);
    pib_link_enqueue(&out->link, p);
}

/* Leave every port's queued frames in one write each (the end of a read, a timer, a trap). */
static void sw_flush(PibSwitch *sw)
{
    int i;

    for (i = 1; i <= sw->nports; i++) {
        if (sw->ports[i].linked) {
            pib_link_tx_flush(&sw->ports[i].link);
        }
    }
}

/* Unicast by the LFT; `in` is port 0 for what the switch itself sends. */
void pib_sw_route_unicast(PibSwitch *sw, PibSwitchPort *in, PibPacket *p, uint16_t dlid,
                          bool smp)
{
    PibMgmtSwitch *t = &sw->tables;
    uint8_t out;

    if (dlid == 0 || dlid >= PIB_SW_LFT_CAP || dlid > t->lft_top ||
        t->lft[dlid] == PIB_LFT_NO_PORT) {
        pib_sw_drop(sw, in, p, PIB_SW_DROP_NO_ROUTE, dlid);
        return;
    }
    out = t->lft[dlid];
    if (out > sw->nports) {
        pib_sw_drop(sw, in, p, PIB_SW_DROP_BAD_PORT, dlid);
        return;
    }
    if (in->num != 0 && out == in->num) {
        pib_sw_drop(sw, in, p, PIB_SW_DROP_ARRIVAL_PORT, dlid);
        return;
    }
    if (out == 0) {
        /* Only a packet that arrived from outside can be for the switch's own port 0. */
        pib_sw_drop(sw, in, p, PIB_SW_DROP_NOT_FOR_US, dlid);
        return;
    }
    pib_sw_send(sw, in, &sw->ports[out], p, smp, dlid);
}

/*
 * Multicast by the MFT: a copy out of every port of the group's mask but the arrival port
 * (IBTA 18.2.4.3.3); the last one takes the buffer itself.
 */
static void sw_route_multicast(PibSwitch *sw, PibSwitchPort *in, PibPacket *p, uint16_t mlid)
{
    PibMgmtSwitch *t = &sw->tables;
    uint32_t idx = mlid - PIB_LID_MULTICAST_BASE;
    uint64_t mask;
    int port, last;

    /* A MulticastFDBTop of 0 is an SM that never set it: then the whole table is valid. */
    mask = idx < PIB_SW_MFT_CAP && (t->mft_top == 0 || mlid <= t->mft_top) ?
           t->mft[idx] : 0;
    mask &= ~(1ull << in->num) & ~1ull;
    if (!mask) {
        pib_sw_drop(sw, in, p, PIB_SW_DROP_NO_ROUTE, mlid);
        return;
    }
    last = 63 - clz64(mask);
    for (port = 1; port < last; port++) {
        if (mask & (1ull << port)) {
            PibSwitchPort *out = &sw->ports[port];
            PibPacket *copy = pib_link_packet_new(&out->link, pib_packet_ib_len(p));

            memcpy(pib_packet_ib(copy), pib_packet_ib(p), pib_packet_ib_len(p));
            pib_sw_send(sw, in, out, copy, false, mlid);
        }
    }
    pib_sw_send(sw, in, &sw->ports[last], p, false, mlid);
}

/*
 * Receive
 */

static void sw_receive(PibSwitch *sw, PibSwitchPort *in, PibPacket *p)
{
    const uint8_t *b = pib_packet_ib(p);
    uint32_t len = pib_packet_ib_len(p);
    const struct pib_lrh *lrh = (const struct pib_lrh *)b;
    uint16_t dlid;

    in->ctr.rcv_pkts++;
    in->ctr.rcv_data += len + 4;
    if (len < sizeof(*lrh) || (lrh->vl_lver & 0xf) != 0 ||
        (be16_to_cpu(lrh->pktlen_be) & 0x7ff) * 4 != len ||
        (be16_to_cpu(lrh->pktlen_be) & 0xf800)) {
        pib_sw_drop(sw, in, p, PIB_SW_DROP_MALFORMED, 0);
        return;
    }
    dlid = be16_to_cpu(lrh->dlid_be);
    if (pib_lid_is_multicast(dlid)) {
        in->ctr.multi_rcv_pkts++;
    } else {
        in->ctr.uni_rcv_pkts++;
    }
    if (lrh->vl_lver >> 4 == 15) {
        if (!pib_sw_port_up(in)) {
            in->ctr.vl15_dropped++;
            pib_sw_drop(sw, in, p, PIB_SW_DROP_PORT_DOWN, dlid);
            return;
        }
        pib_sw_smp(sw, in, p);
        return;
    }
    /* Data: an ARMED port that receives it goes ACTIVE (IBTA 7.2.5); below that it drops. */
    if (in->sm == PIB_PSM_ARMED) {
        PibPortSmState prev = in->sm;

        in->sm = pib_port_sm_next(in->sm, PIB_PEV_RX_DATA, in->disabled, PIB_PSM_INIT);
        trace_pib_switch_port_state(sw->node_guid, in->num, pib_port_sm_names[prev],
                                    pib_port_sm_names[in->sm], "RX_DATA");
    }
    if (!pib_sw_port_active(in)) {
        pib_sw_drop(sw, in, p, PIB_SW_DROP_PORT_DOWN, dlid);
        return;
    }
    if (!pib_mgmt_data_vl_ok(&in->mgmt, lrh->vl_lver >> 4)) {
        pib_sw_drop(sw, in, p, PIB_SW_DROP_VL_MAPPING, dlid);
        return;
    }
    if (!sw_partition_ok(in, p, true)) {
        in->ctr.rcv_constraint++;
        pib_sw_drop(sw, in, p, PIB_SW_DROP_PARTITION, dlid);
        return;
    }
    if (pib_lid_is_multicast(dlid)) {
        sw_route_multicast(sw, in, p, dlid);
        return;
    }
    if (dlid < PIB_SW_LFT_CAP && dlid <= sw->tables.lft_top &&
        sw->tables.lft[dlid] == 0) {
        pib_sw_local_gsi(sw, in, p);
        return;
    }
    pib_sw_route_unicast(sw, in, p, dlid, false);
}

/*
 * The external ports' links (PibLinkOps)
 */

/* Trap 128 (IBTA 14.2.5.1): a port went up or down; PortStateChange says so until cleared. */
static void sw_port_changed(PibSwitch *sw)
{
    PibMgmtPort *m0 = &sw->ports[0].mgmt;
    struct pib_trap128 d = { .lid_be = cpu_to_be16(m0->lid) };

    sw->tables.port_state_change = true;
    pib_sma_trap(m0, PIB_NOTICE_TYPE_URGENT, PIB_TRAP_LINK_STATE_CHANGE, &d, sizeof(d));
    sw_flush(sw);
}

static void sw_port_event(PibSwitchPort *port, PibPortSmEvent ev)
{
    PibSwitch *sw = port->sw;
    PibPortSmState prev = port->sm;
    bool was_up = pib_sw_port_up(port);

    port->sm = pib_port_sm_next(prev, ev, port->disabled, PIB_PSM_INIT);
    if (port->sm == prev) {
        return;
    }
    trace_pib_switch_port_state(sw->node_guid, port->num, pib_port_sm_names[prev],
                                pib_port_sm_names[port->sm], pib_port_ev_names[ev]);
    if (was_up != pib_sw_port_up(port)) {
        if (was_up) {
            port->ctr.link_downed++;
        }
        sw_port_changed(sw);
    }
}

static void sw_link_event(PibLink *l, PibPortSmEvent ev)
{
    sw_port_event(l->opaque, ev);
}

static bool sw_link_may_train(PibLink *l)
{
    PibSwitchPort *port = l->opaque;

    return !port->disabled;
}

static void sw_link_packet(PibLink *l, PibPacket *p)
{
    PibSwitchPort *port = l->opaque;

    sw_receive(port->sw, port, p);
    port->sw->unflushed++;
}

/*
 * Packets are forwarded (queued on their output ports) as they arrive; what waits is the
 * write of those queues, which rx_run does after a batch (PIB_RX_BUDGET frames at most).
 */
static uint32_t sw_link_rx_backlog(PibLink *l)
{
    PibSwitchPort *port = l->opaque;

    return port->sw->unflushed;
}

static void sw_link_rx_run(PibLink *l)
{
    PibSwitchPort *port = l->opaque;

    port->sw->unflushed = 0;
    sw_flush(port->sw);
}

static void sw_link_tx_room(PibLink *l)
{
}

static void sw_link_framing_error(PibLink *l)
{
    PibSwitchPort *port = l->opaque;

    port->ctr.symbol_errors++;
    port->ctr.link_recovery++;
}

/* A packet waited past HOQLife at the head of this port's VL queue: PortXmitDiscards. */
static void sw_link_fc_hoq_discard(PibLink *l, uint8_t vl)
{
    PibSwitchPort *port = l->opaque;

    port->ctr.xmit_discards++;
    sw_count_drop(port->sw, port->num, PIB_SW_DROP_HOQ, 0);
}

/* The peer sent beyond the credits this port granted: dropped by the link, counted here. */
static void sw_link_fc_overrun(PibLink *l, uint8_t vl)
{
    PibSwitchPort *port = l->opaque;

    port->ctr.buffer_overrun++;
    sw_count_drop(port->sw, port->num, PIB_SW_DROP_CREDIT, 0);
}

static const PibLinkOps sw_link_ops = {
    .event = sw_link_event,
    .may_train = sw_link_may_train,
    .packet = sw_link_packet,
    .rx_backlog = sw_link_rx_backlog,
    .rx_run = sw_link_rx_run,
    .tx_room = sw_link_tx_room,
    .framing_error = sw_link_framing_error,
    .fc_overrun = sw_link_fc_overrun,
    .fc_hoq_discard = sw_link_fc_hoq_discard,
};

/*
 * The ports as the management agents see them (PibMgmtOps)
 */

static PibSwitchPort *sw_mgmt_port(PibMgmtPort *m)
{
    PibSwitch *sw = m->node->opaque;

    return &sw->ports[m->num];
}

/* Base port 0 has no link: always up and ACTIVE. */
static uint8_t sw_mgmt_port_state(PibMgmtPort *m)
{
    PibSwitchPort *p = sw_mgmt_port(m);

    return p->num == 0 ? PIB_PORT_ACTIVE : pib_port_sm_ib_state(p->sm);
}

static uint8_t sw_mgmt_phys_state(PibMgmtPort *m)
{
    PibSwitchPort *p = sw_mgmt_port(m);

    return p->num == 0 ? PIB_PHYS_LINKUP : pib_port_sm_phys_state(p->sm, p->disabled);
}

static void sw_mgmt_port_event(void *opaque, PibPortSmEvent ev)
{
    sw_port_event(opaque, ev);
}

/*
 * An SM's PortInfo Set: the fabric's one way for every port (pib-port-sm.h).  Port 0 has
 * no state to set.
 */
static void sw_mgmt_set_port_state(PibMgmtPort *m, uint8_t state)
{
    PibSwitchPort *p = sw_mgmt_port(m);

    if (p->num != 0) {
        pib_port_sm_set_port_state(p->linked ? &p->link : NULL, state, sw_mgmt_port_event, p);
    }
}

static void sw_mgmt_set_phys_state(PibMgmtPort *m, uint8_t phys)
{
    PibSwitchPort *p = sw_mgmt_port(m);

    if (p->num != 0) {
        pib_port_sm_set_phys_state(p->linked ? &p->link : NULL, &p->disabled, phys);
    }
}

static void sw_mgmt_changed(PibMgmtPort *m, unsigned what)
{
    PibSwitchPort *port = sw_mgmt_port(m);

    /* No driver to tell; a new HOQLife applies to what waits already. */
    if ((what & PIB_MGMT_CHG_HOQ) && port->num != 0) {
        pib_link_fc_hoq_update(&port->link);
    }
}

/* A trap from the SMA: a LID-routed SMP from port 0, out by the LFT. */
static void sw_mgmt_send_trap(PibMgmtPort *m, const struct pib_smp *smp, uint16_t dlid,
                              uint8_t sl)
{
    PibSwitch *sw = m->node->opaque;
    PibPktFields f = pib_pkt_trap_fields(dlid, sl);
    uint8_t out = dlid < PIB_SW_LFT_CAP ? sw->tables.lft[dlid] : PIB_LFT_NO_PORT;
    PibSwitchPort *via;
    PibPacket *p;

    if (out == 0 || out > sw->nports || !sw->ports[out].linked) {
        sw->drops[PIB_SW_DROP_NO_ROUTE]++;
        trace_pib_switch_drop(sw->node_guid, 0, "trap: no route", dlid,
                              sw->drops[PIB_SW_DROP_NO_ROUTE]);
        return;             /* the resend timer tries again */
    }
    via = &sw->ports[out];
    p = pib_link_packet_new(&via->link, pib_pkt_len(&f, sizeof(*smp)));
    pib_pkt_write(pib_packet_ib(p), &f, sw->ports[0].mgmt.lid, NULL, smp, sizeof(*smp));
    pib_sw_route_unicast(sw, &sw->ports[0], p, dlid, true);
    sw_flush(sw);
}

static void sw_mgmt_read_counters(PibMgmtPort *m, PibMgmtCounters *c)
{
    PibSwitchPort *port = sw_mgmt_port(m);

    *c = port->ctr;
    if (port->num != 0) {
        c->xmit_wait = (pib_link_xmit_wait_ns(&port->link) - port->xmit_wait_base_ns) /
                       SCALE_US;
    }
}

static const PibMgmtOps sw_mgmt_ops = {
    .port_state = sw_mgmt_port_state,
    .phys_state = sw_mgmt_phys_state,
    .set_port_state = sw_mgmt_set_port_state,
    .set_phys_state = sw_mgmt_set_phys_state,
    .changed = sw_mgmt_changed,
    .send_trap = sw_mgmt_send_trap,
    .read_counters = sw_mgmt_read_counters,
};

/*
 * QOM glue
 */

static void sw_realize(DeviceState *dev, Error **errp)
{
    PibSwitch *sw = PIB_SWITCH(dev);
    const char *id = dev->id ? dev->id : "";
    PibMgmtNode *n = &sw->mgmt;
    int i;

    if (sw->nports < 1 || sw->nports > PIB_SW_MAX_PORTS) {
        error_setg(errp, "pib-switch: ports=%u: 1..%d external ports", sw->nports,
                   PIB_SW_MAX_PORTS);
        return;
    }
    for (i = sw->nports + 1; i <= PIB_SW_MAX_PORTS; i++) {
        if (qemu_chr_fe_backend_connected(&sw->ports[i].link.chr)) {
            error_setg(errp, "pib-switch: port%d given, but ports=%u", i, sw->nports);
            return;
        }
    }
    if (sw->node_guid == 0) {
        /* The same every time this id starts; the OUI's, and distinct per switch id. */
        sw->node_guid = (uint64_t)PIB_VENDOR_OUI << 40 |
                        (uint64_t)(g_str_hash(id) & 0xffffff) << 8;
    }
    *n = (PibMgmtNode) {
        .ops = &sw_mgmt_ops,
        .opaque = sw,
        .node_type = PIB_NODE_TYPE_SWITCH,
        .num_ports = sw->nports,
        .node_guid = sw->node_guid,
        .sys_image_guid = sw->node_guid,
        .device_id = PIB_SW_DEVICE_ID,
        .revision = PIB_PCI_REVISION,
        .vendor_id = PIB_VENDOR_OUI,
        .ports = sw->mgmt_ports,
        .sw = &sw->tables,
    };
    snprintf(n->node_desc, sizeof(n->node_desc), "pib-switch %s", id);
    pib_mgmt_switch_reset(&sw->tables);
    for (i = 0; i <= sw->nports; i++) {
        PibSwitchPort *p = &sw->ports[i];

        p->sw = sw;
        p->num = i;
        p->sm = PIB_PSM_POLLING;
        sw->mgmt_ports[i] = &p->mgmt;
        pib_mgmt_port_init(n, &p->mgmt, i, sw->node_guid + 1);
        if (i == 0) {
            continue;
        }
        pib_link_init(&p->link, &sw_link_ops, p, &dev->mem_reentrancy_guard);
        p->link.id = sw->node_guid + i;
        p->link.node_guid = sw->node_guid;
        p->link.port_guid = sw->node_guid + 1;      /* port 0's, as an HCA's port */
        p->link.direct = sw->link_direct;
        p->link.doorbell = sw->link_doorbell;
        p->link.credits = sw->link_credits;
        p->link.is_switch = true;
        p->link.arb = &p->mgmt;
        p->link.hoq = true;         /* a switch port: PortInfo:HOQLife applies */
        p->link.sndbuf = sw->link_sndbuf;
        p->linked = qemu_chr_fe_backend_connected(&p->link.chr);
    }
    /* Last: a link may come up at once (not while the machine is stopped, -S or -incoming). */
    for (i = 1; i <= sw->nports; i++) {
        if (sw->ports[i].linked) {
            pib_link_attach(&sw->ports[i].link);
        }
    }
    pib_sw_vmstate_realize(sw);
}

static void sw_unrealize(DeviceState *dev)
{
    PibSwitch *sw = PIB_SWITCH(dev);
    int i;

    pib_sw_vmstate_unrealize(sw);
    for (i = 0; i <= sw->nports; i++) {
        PibSwitchPort *p = &sw->ports[i];

        if (i > 0) {
            pib_link_fini(&p->link);
        }
        pib_mgmt_port_fini(&p->mgmt);
    }
    for (i = 1; i <= sw->nports; i++) {
        pib_link_free_pool(&sw->ports[i].link);
    }
}

/* The drop counters: read-only QOM properties (qom-get), one per PIB_SW_DROPS reason. */
static void sw_prop_get_counter(Object *obj, Visitor *v, const char *name, void *opaque,
                                Error **errp)
{
    uint64_t val = *(uint64_t *)((uint8_t *)obj + (uintptr_t)opaque);

    visit_type_uint64(v, name, &val, errp);
}

/* tx-ready: frames the ports have ready and not yet written (pib_link_tx_unwritten). */
static void sw_prop_get_tx_ready(Object *obj, Visitor *v, const char *name, void *opaque,
                                 Error **errp)
{
    PibSwitch *sw = PIB_SWITCH(obj);
    uint32_t val = 0;
    int i;

    for (i = 1; i <= sw->nports; i++) {
        if (sw->ports[i].linked) {
            val += pib_link_tx_unwritten(&sw->ports[i].link);
        }
    }
    visit_type_uint32(v, name, &val, errp);
}

#define SW_PORT_PROP(n) DEFINE_PROP_CHR("port" #n, PibSwitch, ports[n].link.chr)
static PIB_PROPERTIES sw_props[] = {
    DEFINE_PROP_UINT8("ports", PibSwitch, nports, 0),
    DEFINE_PROP_UINT64("node-guid", PibSwitch, node_guid, 0),
    DEFINE_PROP_BOOL("link-direct", PibSwitch, link_direct, true),
    DEFINE_PROP_BOOL("link-doorbell", PibSwitch, link_doorbell, true),
    DEFINE_PROP_ON_OFF_AUTO("link-credits", PibSwitch, link_credits, ON_OFF_AUTO_AUTO),
    DEFINE_PROP_UINT32("link-sndbuf", PibSwitch, link_sndbuf, PIB_LINK_SNDBUF),
    SW_PORT_PROP(1), SW_PORT_PROP(2), SW_PORT_PROP(3), SW_PORT_PROP(4),
    SW_PORT_PROP(5), SW_PORT_PROP(6), SW_PORT_PROP(7), SW_PORT_PROP(8),
    SW_PORT_PROP(9), SW_PORT_PROP(10), SW_PORT_PROP(11), SW_PORT_PROP(12),
    SW_PORT_PROP(13), SW_PORT_PROP(14), SW_PORT_PROP(15), SW_PORT_PROP(16),
    SW_PORT_PROP(17), SW_PORT_PROP(18), SW_PORT_PROP(19), SW_PORT_PROP(20),
    SW_PORT_PROP(21), SW_PORT_PROP(22), SW_PORT_PROP(23), SW_PORT_PROP(24),
    SW_PORT_PROP(25), SW_PORT_PROP(26), SW_PORT_PROP(27), SW_PORT_PROP(28),
    SW_PORT_PROP(29), SW_PORT_PROP(30), SW_PORT_PROP(31), SW_PORT_PROP(32),
    PIB_PROP_END
};
QEMU_BUILD_BUG_ON(PIB_SW_MAX_PORTS != 32);

static void sw_class_init(ObjectClass *oc, PibClassData data)
{
    DeviceClass *dc = DEVICE_CLASS(oc);
    int i;

    dc->desc = "pib InfiniBand switch";
    dc->realize = sw_realize;
    dc->unrealize = sw_unrealize;
    dc->vmsd = &vmstate_pib_switch;
    set_bit(DEVICE_CATEGORY_NETWORK, dc->categories);
    device_class_set_props(dc, sw_props);
    for (i = 0; i < PIB_SW_DROP__MAX; i++) {
        object_class_property_add(oc, pib_sw_drop_names[i], "uint64", sw_prop_get_counter,
                                  NULL, NULL,
                                  (void *)(offsetof(PibSwitch, drops) +
                                           i * sizeof(uint64_t)));
    }
    object_class_property_add(oc, "forwarded", "uint64", sw_prop_get_counter, NULL, NULL,
                              (void *)offsetof(PibSwitch, forwarded));
    object_class_property_add(oc, "fecn-marked", "uint64", sw_prop_get_counter, NULL, NULL,
                              (void *)offsetof(PibSwitch, fecn_marked));
    object_class_property_add(oc, "tx-ready", "uint32", sw_prop_get_tx_ready, NULL, NULL,
                              NULL);
}

static const TypeInfo sw_info = {
    .name = TYPE_PIB_SWITCH,
    .parent = TYPE_DEVICE,
    .instance_size = sizeof(PibSwitch),
    .class_init = sw_class_init,
};

static void sw_register_types(void)
{
    type_register_static(&sw_info);
}

type_init(sw_register_types)
