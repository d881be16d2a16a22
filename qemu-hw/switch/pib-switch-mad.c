/*
 * pib switch - its own management datagrams
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * SMPs and GMPs that end at the switch, or pass it on a directed route: the
 * directed-route rules (IBTA 14.2.2.2 outbound, 14.2.2.3 returning) hop by
 * hop, LID-routed SMPs to the switch's LID for its SMA, and the GSI MADs its
 * PMA answers on port 0.  The forwarding pass that hands them here is in
 * pib-switch.c (pib_sw_receive... see its header comment).
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"

#include "pib-switch.h"
#include "../trace.h"

/*
 * The switch's own management datagrams
 */

/* A MAD packet as the switch accepts one: UD SEND_ONLY, no GRH, exactly one 256-byte MAD. */
static bool sw_mad_packet(const uint8_t *b, uint32_t len, PibPktInfo *pi, uint32_t qpn)
{
    return pib_pkt_parse(b, len, pi) == PIB_PKT_OK && !pi->has_grh &&
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

/*
 * The GSI on port 0: a GMP for QP1 that the LFT sent to port 0 (the switch's LID), for the PMA
 * or the CC agent; a MAD of any other class is not for a switch.
 */
void pib_sw_local_gsi(PibSwitch *sw, PibSwitchPort *in, PibPacket *p)
{
    const uint8_t *b = pib_packet_ib(p);
    uint8_t out[PIB_MAD_SIZE];
    PibPktInfo pi;
    PibMadCtx ctx;
    uint32_t r;

    if (!sw_mad_packet(b, pib_packet_ib_len(p), &pi, PIB_QPN_GSI) ||
        (pi.payload[1] != PIB_MGMT_CLASS_PERF && pi.payload[1] != PIB_MGMT_CLASS_CC)) {
        pib_sw_drop(sw, in, p, PIB_SW_DROP_NOT_FOR_US, pi.dlid);
        return;
    }
    ctx = (PibMadCtx) { .port = in->num, .wire = true, .slid = pi.slid, .sl = pi.sl };
    if (pi.payload[1] == PIB_MGMT_CLASS_PERF) {
        r = pib_pma_process(&sw->mgmt, &ctx, pi.payload, out);
    } else {
        r = pib_cc_process(&sw->mgmt, &ctx, pi.payload, out);
    }
    if (!(r & PIB_MAD_IFC_REPLY)) {
        pib_link_packet_free(&in->link, p);
        return;
    }
    sw_mad_reply(sw, p, &pi, pi.slid, sw->ports[0].mgmt.lid, out);
    pib_sw_route_unicast(sw, &sw->ports[0], p, pi.slid, false);
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
            pib_sw_route_unicast(sw, in, p, dr_dlid, true);
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
        pib_sw_route_unicast(sw, in, p, dr_slid, true);
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
        pib_sw_route_unicast(sw, &sw->ports[0], p, pi->slid, true);
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
    pib_sw_send(sw, in, &sw->ports[out_port], p, true, PIB_LID_PERMISSIVE);
    return;

drop:
    in->ctr.vl15_dropped++;
    pib_sw_drop(sw, in, p, PIB_SW_DROP_DR, PIB_LID_PERMISSIVE);
#undef SET_HOP_PTR
}

/* VL15: an SMP, directed-route or LID-routed. */
void pib_sw_smp(PibSwitch *sw, PibSwitchPort *in, PibPacket *p)
{
    const uint8_t *b = pib_packet_ib(p);
    uint8_t resp[PIB_MAD_SIZE];
    PibPktInfo pi;

    if (!sw_mad_packet(b, pib_packet_ib_len(p), &pi, PIB_QPN_SMI)) {
        in->ctr.vl15_dropped++;
        pib_sw_drop(sw, in, p, PIB_SW_DROP_MALFORMED, 0);
        return;
    }
    if (pi.payload[1] == PIB_MGMT_CLASS_SUBN_DR) {
        sw_smp_dr(sw, in, p, &pi);
        return;
    }
    if (pi.payload[1] != PIB_MGMT_CLASS_SUBN_LID) {
        in->ctr.vl15_dropped++;
        pib_sw_drop(sw, in, p, PIB_SW_DROP_MALFORMED, pi.dlid);
        return;
    }
    if (!pib_sw_lid_is_ours(sw, pi.dlid)) {
        pib_sw_route_unicast(sw, in, p, pi.dlid, true);
        return;
    }
    if (!sw_sma(sw, in, &pi, resp)) {
        pib_link_packet_free(&in->link, p);
        return;
    }
    sw_mad_reply(sw, p, &pi, pi.slid, sw->ports[0].mgmt.lid, resp);
    pib_sw_route_unicast(sw, &sw->ports[0], p, pi.slid, true);
}
