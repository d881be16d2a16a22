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
 * Each external port is a PibLink (pib-link.c) on its chardev, running the same framing,
 * queues and port state machine as an HCA's port.  Port 0 is the switch's management port
 * (base port 0, IBTA 18.2.1.1): it has no link; its LID is the switch's, and the same SMA and
 * PMA as the HCA's (pib-sma.c, pib-pma.c) answer for it, with the switch attributes
 * (SwitchInfo, LinearForwardingTable, MulticastForwardingTable) that the SMA serves only to a
 * node with PibMgmtNode.sw.  docs/switch.md explains the choice and the rules.
 *
 * A packet that arrives on port `in` goes through one pass:
 *
 *   LRH       malformed (length, LVer) -> dropped
 *   VL15      an SMP: directed route (class 0x81) follows IBTA 14.2.2 hop by hop; LID-routed
 *             (class 0x01) to the switch's LID goes to the SMA, to another LID by the LFT
 *   unicast   LFT[DLID]: 255, above LinearFDBTop, no such port, the arrival port or a port
 *             that is not ACTIVE -> dropped; port 0 -> the switch's own GSI (the PMA)
 *   multicast MFT[MLID] minus the arrival port: a copy out of each ACTIVE port
 *
 * Every drop is counted under exactly one reason (PIB_SW_DROPS: a QOM property each, and the
 * ports' PMA counters) and traced.  Forwarded frames only queue; each read's frames leave in
 * one write per port when the read is done (rx_run).  A full output queue drops (a switch's
 * head-of-queue lifetime), which RC's retransmission recovers from.
 *
 * It is a device (-device) rather than an -object: since QEMU 6.0 -object and object-add
 * accept only the types of QAPI's ObjectType, which a device model outside the tree cannot
 * extend (docs/switch.md).  A device with no bus needs no machine (-machine none), but it
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

#include "pib-internal.h"       /* pib_pkt_parse/len/write, PibPktInfo, pib_port_sm_next */
#include "trace.h"

#define TYPE_PIB_SWITCH "pib-switch"
OBJECT_DECLARE_SIMPLE_TYPE(PibSwitch, PIB_SWITCH)

#define PIB_SW_DEVICE_ID        0x5357      /* "SW" */
#define PIB_SW_MAD_PKT_LEN      (sizeof(struct pib_lrh) + sizeof(struct pib_bth) + \
                                 sizeof(struct pib_deth) + PIB_MAD_SIZE)

/* Why a packet went nowhere: one counter (and QOM property) each. */
#define PIB_SW_DROPS(X)                                                             \
    X(MALFORMED,    "drop-malformed")    /* LRH or (SMPs) the headers are wrong */ \
    X(NO_ROUTE,     "drop-no-route")     /* LFT 255, above the top, or no MFT ports */ \
    X(BAD_PORT,     "drop-bad-port")     /* the table names a port the switch lacks */ \
    X(ARRIVAL_PORT, "drop-arrival-port") /* the table says back out the arrival port */ \
    X(PORT_DOWN,    "drop-port-down")    /* in or out port not ACTIVE (SMPs: not up) */ \
    X(TXQ_FULL,     "drop-txq-full")     /* the output queue is full */            \
    X(DR,           "drop-dr")           /* directed route: hop count/pointer/path */ \
    X(NOT_FOR_US,   "drop-local")        /* to the switch, but not for its agents */

#define PIB_SW_DROP_ENUM(id, name) PIB_SW_DROP_##id,
enum pib_sw_drop {
    PIB_SW_DROPS(PIB_SW_DROP_ENUM)
    PIB_SW_DROP__MAX
};
#undef PIB_SW_DROP_ENUM

static const char *const pib_sw_drop_names[PIB_SW_DROP__MAX] = {
#define PIB_SW_DROP_NAME(id, name) [PIB_SW_DROP_##id] = name,
    PIB_SW_DROPS(PIB_SW_DROP_NAME)
#undef PIB_SW_DROP_NAME
};

typedef struct PibSwitchPort {
    struct PibSwitch *sw;
    uint8_t num;
    PibLink link;               /* external ports only; its chr is property portN */
    bool linked;                /* the port has a chardev */
    PibPortSmState sm;
    bool disabled;              /* PortPhysicalState DISABLED */
    PibMgmtPort mgmt;
    PibMgmtCounters ctr;        /* what the PMA reports for this port */
} PibSwitchPort;

struct PibSwitch {
    DeviceState parent_obj;

    /* properties */
    uint8_t nports;
    uint64_t node_guid;
    bool link_direct;

    PibSwitchPort ports[PIB_SW_MAX_PORTS + 1];      /* [0] the management port */
    PibMgmtNode mgmt;
    PibMgmtPort *mgmt_ports[PIB_SW_MAX_PORTS + 1];
    PibMgmtSwitch tables;
    uint32_t unflushed;         /* packets handled since the queues were last written */
    uint64_t drops[PIB_SW_DROP__MAX];
    uint64_t forwarded;
};

/*
 * Helpers
 */

static bool sw_port_up(const PibSwitchPort *p)
{
    return p->num == 0 || p->sm == PIB_PSM_INIT || p->sm == PIB_PSM_ARMED ||
           p->sm == PIB_PSM_ACTIVE;
}

static bool sw_port_active(const PibSwitchPort *p)
{
    return p->num == 0 || p->sm == PIB_PSM_ACTIVE;
}

/* Is lid the switch's own (port 0's LID, with its LMC path bits)? */
static bool sw_lid_is_ours(const PibSwitch *sw, uint16_t lid)
{
    const PibMgmtPort *m = &sw->ports[0].mgmt;
    uint16_t mask = ~((1u << m->lmc) - 1);

    return m->lid && (lid & mask) == (m->lid & mask);
}

/* Drops are rare: the buffer goes straight back to the allocator, not to a port's list. */
static void sw_drop(PibSwitch *sw, PibSwitchPort *in, PibPacket *p, enum pib_sw_drop why,
                    uint16_t dlid)
{
    sw->drops[why]++;
    trace_pib_switch_drop(sw->node_guid, in ? in->num : 0, pib_sw_drop_names[why], dlid,
                          sw->drops[why]);
    if (in && why == PIB_SW_DROP_MALFORMED) {
        in->ctr.rcv_errors++;
    }
    g_free(p);
}

/*
 * Transmit
 */

/*
 * Queue p out of port `out` (the caller checked it exists and is not the arrival port where
 * that matters).  Data needs an ACTIVE port, an SMP one whose link is up.
 */
static void sw_send(PibSwitch *sw, PibSwitchPort *in, PibSwitchPort *out, PibPacket *p,
                    bool smp, uint16_t dlid)
{
    uint32_t len = pib_packet_ib_len(p);

    if (out->num == 0 || !out->linked || !(smp ? sw_port_up(out) : sw_port_active(out))) {
        out->ctr.xmit_discards++;
        sw_drop(sw, in, p, PIB_SW_DROP_PORT_DOWN, dlid);
        return;
    }
    if (out->link.txq_len >= PIB_QUEUE_HARD_MAX) {
        out->ctr.xmit_discards++;
        sw_drop(sw, in, p, PIB_SW_DROP_TXQ_FULL, dlid);
        return;
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
static void sw_route_unicast(PibSwitch *sw, PibSwitchPort *in, PibPacket *p, uint16_t dlid,
                             bool smp)
{
    PibMgmtSwitch *t = &sw->tables;
    uint8_t out;

    if (dlid == 0 || dlid >= PIB_SW_LFT_CAP || dlid > t->lft_top ||
        t->lft[dlid] == PIB_LFT_NO_PORT) {
        sw_drop(sw, in, p, PIB_SW_DROP_NO_ROUTE, dlid);
        return;
    }
    out = t->lft[dlid];
    if (out > sw->nports) {
        sw_drop(sw, in, p, PIB_SW_DROP_BAD_PORT, dlid);
        return;
    }
    if (in->num != 0 && out == in->num) {
        sw_drop(sw, in, p, PIB_SW_DROP_ARRIVAL_PORT, dlid);
        return;
    }
    if (out == 0) {
        /* Only a packet that arrived from outside can be for the switch's own port 0. */
        sw_drop(sw, in, p, PIB_SW_DROP_NOT_FOR_US, dlid);
        return;
    }
    sw_send(sw, in, &sw->ports[out], p, smp, dlid);
}

/*
 * Multicast by the MFT: a copy out of every port of the group's mask but the arrival port
 * (IBTA 18.2.4.3.3); the last one takes the buffer itself.
 */
static void sw_route_multicast(PibSwitch *sw, PibSwitchPort *in, PibPacket *p, uint16_t mlid)
{
    PibMgmtSwitch *t = &sw->tables;
    uint32_t idx = mlid - PIB_LID_MULTICAST_BASE;
    uint32_t mask;
    int port, last;

    /* A MulticastFDBTop of 0 is an SM that never set it: then the whole table is valid. */
    mask = idx < PIB_SW_MFT_CAP && (t->mft_top == 0 || mlid <= t->mft_top) ?
           t->mft[idx] : 0;
    mask &= ~(1u << in->num) & ~1u;
    if (!mask) {
        sw_drop(sw, in, p, PIB_SW_DROP_NO_ROUTE, mlid);
        return;
    }
    last = 31 - clz32(mask);
    for (port = 1; port < last; port++) {
        if (mask & (1u << port)) {
            PibSwitchPort *out = &sw->ports[port];
            PibPacket *copy = pib_link_packet_new(&out->link, pib_packet_ib_len(p));

            memcpy(pib_packet_ib(copy), pib_packet_ib(p), pib_packet_ib_len(p));
            sw_send(sw, in, out, copy, false, mlid);
        }
    }
    sw_send(sw, in, &sw->ports[last], p, false, mlid);
}

/*
 * The switch's own management datagrams
 */

/* A MAD packet as the switch accepts one: UD SEND_ONLY, no GRH, exactly one 256-byte MAD. */
static bool sw_mad_packet(const uint8_t *b, uint32_t len, PibPktInfo *pi, uint32_t qpn)
{
    return pib_pkt_parse(b, len, NULL, pi) == PIB_CNT_MAX && !pi->has_grh &&
           pi->opcode == PIB_OP_UD_SEND_ONLY && pi->dqpn == qpn &&
           pi->paylen == PIB_MAD_SIZE && len == PIB_SW_MAD_PKT_LEN;
}

/*
 * Turn a received MAD packet into the response, in place: the LIDs swapped (from us: our
 * LID, or the permissive LID on a directed-route SMP), back to the sender's QP, the agent's
 * MAD as payload.
 */
static void sw_mad_reply(PibSwitch *sw, PibPacket *p, const PibPktInfo *pi, uint16_t dlid,
                         uint16_t slid, const uint8_t *mad)
{
    uint8_t *b = pib_packet_ib(p);
    struct pib_lrh *lrh = (struct pib_lrh *)b;
    struct pib_bth *bth = (struct pib_bth *)(b + sizeof(*lrh));
    uint8_t *deth = b + sizeof(*lrh) + sizeof(*bth);

    lrh->dlid_be = cpu_to_be16(dlid);
    lrh->slid_be = cpu_to_be16(slid);
    bth->dqpn_be = cpu_to_be32(pi->src_qpn);
    stl_be_p(deth + 4, pi->dqpn);
    memcpy(b + (pi->payload - b), mad, PIB_MAD_SIZE);
}

/* The PMA on port 0: a GMP for QP1 that the LFT sent to port 0 (the switch's LID). */
static void sw_local_gsi(PibSwitch *sw, PibSwitchPort *in, PibPacket *p)
{
    const uint8_t *b = pib_packet_ib(p);
    uint8_t out[PIB_MAD_SIZE];
    PibPktInfo pi;
    PibMadCtx ctx;

    if (!sw_mad_packet(b, pib_packet_ib_len(p), &pi, PIB_QPN_GSI) ||
        pi.payload[1] != PIB_MGMT_CLASS_PERF) {
        sw_drop(sw, in, p, PIB_SW_DROP_NOT_FOR_US, pi.dlid);
        return;
    }
    ctx = (PibMadCtx) { .port = in->num, .wire = true, .slid = pi.slid, .sl = pi.sl };
    if (!(pib_pma_process(&sw->mgmt, &ctx, pi.payload, out) & PIB_MAD_IFC_REPLY)) {
        pib_link_packet_free(&in->link, p);
        return;
    }
    sw_mad_reply(sw, p, &pi, pi.slid, sw->ports[0].mgmt.lid, out);
    sw_route_unicast(sw, &sw->ports[0], p, pi.slid, false);
}

/* The SMA answers an SMP that arrived on `in`; out holds the response if it returns true. */
static bool sw_sma(PibSwitch *sw, PibSwitchPort *in, const PibPktInfo *pi, uint8_t *out)
{
    PibMadCtx ctx = { .port = in->num, .wire = true, .slid = pi->slid, .sl = pi->sl };

    return pib_sma_process(&sw->mgmt, &ctx, pi->payload, out) & PIB_MAD_IFC_REPLY;
}

/*
 * A directed-route SMP (IBTA 14.2.2.2 outbound, 14.2.2.3 returning; the same rules as
 * Linux's core/smi.c, seen from a switch).  The hop pointer counts the hops taken;
 * InitialPath[i] is the port to leave hop i by, ReturnPath[i] records the port hop i
 * arrived on.  The switch edits the SMP in place and sends it on, gives it to its SMA and
 * sends the response back along ReturnPath, or drops it.
 */
static void sw_smp_dr(PibSwitch *sw, PibSwitchPort *in, PibPacket *p, const PibPktInfo *pi)
{
    uint8_t *b = pib_packet_ib(p);
    struct pib_smp *smp = (struct pib_smp *)(b + (pi->payload - b));
    struct pib_lrh *lrh = (struct pib_lrh *)b;
    uint16_t cs = be16_to_cpu(smp->hdr.class_spec_be);
    uint8_t hop_ptr = cs >> 8, hop_cnt = cs & 0xff;
    bool returning = be16_to_cpu(smp->hdr.status_be) & PIB_SMP_STATUS_DIRECTION;
    uint16_t dr_slid = be16_to_cpu(smp->dr_slid_be);
    uint16_t dr_dlid = be16_to_cpu(smp->dr_dlid_be);
    uint8_t out_port, resp[PIB_MAD_SIZE];

#define SET_HOP_PTR(v) (smp->hdr.class_spec_be = cpu_to_be16((uint16_t)(v) << 8 | hop_cnt))
    trace_pib_switch_dr(sw->node_guid, in->num, returning, hop_ptr, hop_cnt);
    if (hop_cnt >= PIB_SMP_MAX_HOPS) {
        goto drop;                              /* HopCount is 0..63 (C14-7) */
    }
    if (!returning) {
        if (hop_cnt && hop_ptr == 0) {
            goto drop;                          /* the sender did not count its hop */
        }
        if (hop_ptr && hop_ptr < hop_cnt) {     /* C14-9:2, an intermediate hop */
            smp->return_path[hop_ptr] = in->num;
            out_port = smp->initial_path[hop_ptr + 1];
            SET_HOP_PTR(hop_ptr + 1);
            goto send_out;
        }
        if (hop_ptr == hop_cnt) {               /* C14-9:3, the directed part ends here */
            if (hop_cnt) {
                smp->return_path[hop_ptr] = in->num;
            }
            SET_HOP_PTR(hop_ptr + 1);
            if (dr_dlid == PIB_LID_PERMISSIVE) {
                goto to_sma;
            }
            lrh->dlid_be = cpu_to_be16(dr_dlid);    /* the rest is LID-routed */
            sw_route_unicast(sw, in, p, dr_dlid, true);
            return;
        }
        if (hop_ptr == hop_cnt + 1) {           /* C14-9:4, for this node's SMA */
            goto to_sma;
        }
        goto drop;                              /* C14-9:5 */
    }
    /* Returning (D set). */
    if (hop_ptr >= 2 && hop_ptr <= hop_cnt) {   /* C14-13:2, an intermediate hop */
        out_port = smp->return_path[hop_ptr - 1];
        SET_HOP_PTR(hop_ptr - 1);
        goto send_out;
    }
    if (hop_ptr == 1 && hop_cnt && dr_slid != PIB_LID_PERMISSIVE) {
        /* C14-13:3: the directed part ends here; LID-routed on to DrSLID. */
        SET_HOP_PTR(0);
        lrh->dlid_be = cpu_to_be16(dr_slid);
        sw_route_unicast(sw, in, p, dr_slid, true);
        return;
    }
    goto drop;      /* for an SM behind this node (there is none), or a bad hop pointer */

to_sma:
    if (!sw_sma(sw, in, pi, resp)) {
        pib_link_packet_free(&in->link, p);     /* consumed (a TrapRepress, a violation) */
        return;
    }
    /* The response starts back: C14-13:1 (hop_cnt > 0) or C14-13:3 (hop_cnt 0). */
    memcpy(smp, resp, sizeof(resp));
    if (hop_cnt == 0) {
        /* Reached by LID routing only: back the same way, to the sender's LID. */
        if (dr_slid == PIB_LID_PERMISSIVE && pi->slid == PIB_LID_PERMISSIVE) {
            goto drop;
        }
        SET_HOP_PTR(0);
        sw_mad_reply(sw, p, pi, pi->slid, sw->ports[0].mgmt.lid, resp);
        smp->hdr.class_spec_be = cpu_to_be16(0);
        sw_route_unicast(sw, &sw->ports[0], p, pi->slid, true);
        return;
    }
    SET_HOP_PTR(hop_cnt);
    out_port = smp->return_path[hop_cnt];
    lrh->dlid_be = cpu_to_be16(pi->slid);
    lrh->slid_be = cpu_to_be16(pi->dlid);
    {
        struct pib_bth *bth = (struct pib_bth *)(b + sizeof(*lrh));

        bth->dqpn_be = cpu_to_be32(pi->src_qpn);
    }

send_out:
    /* A directed route may lead back out of the arrival port: only the port must exist. */
    if (out_port == 0 || out_port > sw->nports) {
        goto drop;
    }
    sw_send(sw, in, &sw->ports[out_port], p, true, PIB_LID_PERMISSIVE);
    return;

drop:
    in->ctr.vl15_dropped++;
    sw_drop(sw, in, p, PIB_SW_DROP_DR, PIB_LID_PERMISSIVE);
#undef SET_HOP_PTR
}

/* VL15: an SMP, directed-route or LID-routed. */
static void sw_smp(PibSwitch *sw, PibSwitchPort *in, PibPacket *p)
{
    const uint8_t *b = pib_packet_ib(p);
    uint8_t resp[PIB_MAD_SIZE];
    PibPktInfo pi;

    if (!sw_mad_packet(b, pib_packet_ib_len(p), &pi, PIB_QPN_SMI)) {
        in->ctr.vl15_dropped++;
        sw_drop(sw, in, p, PIB_SW_DROP_MALFORMED, 0);
        return;
    }
    if (pi.payload[1] == PIB_MGMT_CLASS_SUBN_DR) {
        sw_smp_dr(sw, in, p, &pi);
        return;
    }
    if (pi.payload[1] != PIB_MGMT_CLASS_SUBN_LID) {
        in->ctr.vl15_dropped++;
        sw_drop(sw, in, p, PIB_SW_DROP_MALFORMED, pi.dlid);
        return;
    }
    if (!sw_lid_is_ours(sw, pi.dlid)) {
        sw_route_unicast(sw, in, p, pi.dlid, true);
        return;
    }
    if (!sw_sma(sw, in, &pi, resp)) {
        pib_link_packet_free(&in->link, p);
        return;
    }
    sw_mad_reply(sw, p, &pi, pi.slid, sw->ports[0].mgmt.lid, resp);
    sw_route_unicast(sw, &sw->ports[0], p, pi.slid, true);
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
        sw_drop(sw, in, p, PIB_SW_DROP_MALFORMED, 0);
        return;
    }
    dlid = be16_to_cpu(lrh->dlid_be);
    if (pib_lid_is_multicast(dlid)) {
        in->ctr.multi_rcv_pkts++;
    } else {
        in->ctr.uni_rcv_pkts++;
    }
    if (lrh->vl_lver >> 4 == 15) {
        if (!sw_port_up(in)) {
            in->ctr.vl15_dropped++;
            sw_drop(sw, in, p, PIB_SW_DROP_PORT_DOWN, dlid);
            return;
        }
        sw_smp(sw, in, p);
        return;
    }
    /* Data: an ARMED port that receives it goes ACTIVE (IBTA 7.2.5); below that it drops. */
    if (in->sm == PIB_PSM_ARMED) {
        PibPortSmState prev = in->sm;

        in->sm = pib_port_sm_next(in->sm, PIB_PEV_RX_DATA, in->disabled, PIB_PSM_INIT);
        trace_pib_switch_port_state(sw->node_guid, in->num, pib_port_sm_names[prev],
                                    pib_port_sm_names[in->sm], "RX_DATA");
    }
    if (!sw_port_active(in)) {
        sw_drop(sw, in, p, PIB_SW_DROP_PORT_DOWN, dlid);
        return;
    }
    if (pib_lid_is_multicast(dlid)) {
        sw_route_multicast(sw, in, p, dlid);
        return;
    }
    if (dlid < PIB_SW_LFT_CAP && dlid <= sw->tables.lft_top &&
        sw->tables.lft[dlid] == 0) {
        sw_local_gsi(sw, in, p);
        return;
    }
    sw_route_unicast(sw, in, p, dlid, false);
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
    bool was_up = sw_port_up(port);

    port->sm = pib_port_sm_next(prev, ev, port->disabled, PIB_PSM_INIT);
    if (port->sm == prev) {
        return;
    }
    trace_pib_switch_port_state(sw->node_guid, port->num, pib_port_sm_names[prev],
                                pib_port_sm_names[port->sm], pib_port_ev_names[ev]);
    if (was_up != sw_port_up(port)) {
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

static const PibLinkOps sw_link_ops = {
    .event = sw_link_event,
    .may_train = sw_link_may_train,
    .packet = sw_link_packet,
    .rx_backlog = sw_link_rx_backlog,
    .rx_run = sw_link_rx_run,
    .tx_room = sw_link_tx_room,
    .framing_error = sw_link_framing_error,
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

    return p->disabled ? PIB_PHYS_DISABLED :
           sw_port_up(p) ? PIB_PHYS_LINKUP : PIB_PHYS_POLLING;
}

static void sw_mgmt_set_port_state(PibMgmtPort *m, uint8_t state)
{
    PibSwitchPort *p = sw_mgmt_port(m);

    if (p->num == 0) {
        return;
    }
    switch (state) {
    case PIB_PORT_DOWN:
        if (p->linked) {
            pib_link_take_down(&p->link, "PortInfo PortState=DOWN");
        }
        break;
    case PIB_PORT_ARMED:
        sw_port_event(p, PIB_PEV_SM_ARM);
        break;
    case PIB_PORT_ACTIVE:
        sw_port_event(p, PIB_PEV_SM_ACTIVATE);
        break;
    default:
        break;
    }
}

static void sw_mgmt_set_phys_state(PibMgmtPort *m, uint8_t phys)
{
    PibSwitchPort *p = sw_mgmt_port(m);

    if (p->num == 0) {
        return;
    }
    p->disabled = phys == PIB_PHYS_DISABLED;
    if (p->linked) {
        pib_link_take_down(&p->link, p->disabled ? "PortInfo phys=DISABLED" :
                                                   "PortInfo phys=POLLING");
    }
}

static void sw_mgmt_changed(PibMgmtPort *m, unsigned what)
{
    /* No driver to tell: the switch forwards by its tables alone. */
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
    sw_route_unicast(sw, &sw->ports[0], p, dlid, true);
    sw_flush(sw);
}

static void sw_mgmt_read_counters(PibMgmtPort *m, PibMgmtCounters *c)
{
    *c = sw_mgmt_port(m)->ctr;
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
        p->linked = qemu_chr_fe_backend_connected(&p->link.chr);
    }
    /* Last: a link may come up at once. */
    for (i = 1; i <= sw->nports; i++) {
        if (sw->ports[i].linked) {
            pib_link_attach(&sw->ports[i].link);
        }
    }
}

static void sw_unrealize(DeviceState *dev)
{
    PibSwitch *sw = PIB_SWITCH(dev);
    int i;

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

#define SW_PORT_PROP(n) DEFINE_PROP_CHR("port" #n, PibSwitch, ports[n].link.chr)
static PIB_PROPERTIES sw_props[] = {
    DEFINE_PROP_UINT8("ports", PibSwitch, nports, 0),
    DEFINE_PROP_UINT64("node-guid", PibSwitch, node_guid, 0),
    DEFINE_PROP_BOOL("link-direct", PibSwitch, link_direct, true),
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
