/*
 * pib HCA device model - the HCA's port on its link, and its transmit path
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The HCA is one owner of a PibLink (../fabric/pib-link.c; a switch port is
 * another): its PibLinkOps hand the link's events to the port (pib-port.c)
 * and its packets to the receive queue (pib-rx.c).
 * pib_xmit() sends a packet the engines built: on the link, to this HCA
 * itself (loopback), or both for a multicast group a local QP joined.
 */

#include "qemu/osdep.h"

#include "pib-internal.h"
#include "../trace.h"

/*
 * The HCA's port on its link (pib-port.c enters the port's states, pib-rx.c runs the
 * receive queue), and its transmit path
 */

static PibState *pib_link_hca(PibLink *l)
{
    return l->opaque;
}

static void pib_hca_link_event(PibLink *l, PibPortSmEvent ev)
{
    pib_port_event(pib_link_hca(l), ev);
}

static bool pib_hca_link_may_train(PibLink *l)
{
    return !pib_link_hca(l)->port.disabled;
}

static void pib_hca_link_packet(PibLink *l, PibPacket *p)
{
    pib_rx_link(pib_link_hca(l), p);
}

static bool pib_hca_link_packet_bytes(PibLink *l, const uint8_t *ib, uint32_t len)
{
    return pib_rx_link_bytes(pib_link_hca(l), ib, len);
}

static uint32_t pib_hca_link_rx_backlog(PibLink *l)
{
    return pib_link_hca(l)->rxq_len;
}

static void pib_hca_link_rx_run(PibLink *l)
{
    pib_rx_run(pib_link_hca(l));
}

static void pib_hca_link_tx_room(PibLink *l)
{
    pib_qp_kick_waiters(pib_link_hca(l));
}

static void pib_hca_link_framing_error(PibLink *l)
{
    pib_count(pib_link_hca(l), PIB_CNT_LINK_FRAMING_ERRORS, 1);
}

static void pib_hca_link_fc_overrun(PibLink *l, uint8_t vl)
{
    pib_pkt_drop(pib_link_hca(l), PIB_CNT_RX_DROP_CREDIT, NULL);
}

/* The peer (or we) moved and came back in time: the port never left its state. */
static void pib_hca_link_recovered(PibLink *l)
{
    PibState *s = pib_link_hca(l);

    pib_count(s, PIB_CNT_LINK_RECOVERIES, 1);
    pib_qp_kick_waiters(s);
}

static const PibLinkOps pib_hca_link_ops = {
    .event = pib_hca_link_event,
    .may_train = pib_hca_link_may_train,
    .packet = pib_hca_link_packet,
    .packet_bytes = pib_hca_link_packet_bytes,
    .rx_backlog = pib_hca_link_rx_backlog,
    .rx_run = pib_hca_link_rx_run,
    .tx_room = pib_hca_link_tx_room,
    .framing_error = pib_hca_link_framing_error,
    .fc_overrun = pib_hca_link_fc_overrun,
    .recovered = pib_hca_link_recovered,
};

/*
 * The counters the link keeps rather than the device (xmit_wait_us, PortXmitWait: the time a
 * packet waited for credits), brought up to date before anyone reads them.
 */
void pib_link_sync_counters(PibState *s)
{
    s->counters[PIB_CNT_XMIT_WAIT_US] =
        (pib_link_xmit_wait_ns(&s->link) - s->xmit_wait_base_ns) / SCALE_US;
}

/* inject-credit-hold: the port grants no more credit (include/pib_link.h, "Credits"). */
void pib_link_set_credit_hold(PibState *s, bool hold)
{
    pib_link_fc_set_hold(&s->link, hold);
}

/* A frame buffer: the link header filled in, room for ib_len bytes after it */
PibPacket *pib_packet_new(PibState *s, uint32_t ib_len)
{
    return pib_link_packet_new(&s->link, ib_len);
}

void pib_packet_free(PibState *s, PibPacket *p)
{
    pib_link_packet_free(&s->link, p);
}

void pib_link_flush(PibState *s)
{
    pib_link_tx_flush(&s->link);
}

void pib_link_purge(PibState *s)
{
    pib_link_tx_purge(&s->link);
}

/*
 * May a requester send a packet to dlid now?  If not, it waits: the queue
 * that is full remembers to wake the requesters when it drains.
 */
bool pib_xmit_room(PibState *s, uint16_t dlid)
{
    if (pib_lid_is_ours(s, dlid)) {
        if (s->rxq_len < PIB_RXQ_MAX) {
            return true;
        }
        s->rx_waiters = true;
        return false;
    }
    if (s->link.txq_len < PIB_TXQ_MAX) {
        return true;
    }
    s->link.tx_waiters = true;
    return false;
}

/*
 * Send a packet built by pib_pkt_build(): on the link, or to ourselves.  A
 * link packet waits in the transmit queue for the caller's pib_link_flush().
 */
void pib_xmit(PibState *s, PibPacket *p, uint16_t dlid)
{
    bool loop = pib_lid_is_ours(s, dlid);
    uint8_t vl = pib_packet_ib(p)[0] >> 4;          /* LRH VL */
    bool smp = vl == PIB_VL_MGMT && pib_pkt_is_smp(pib_packet_ib(p), pib_packet_ib_len(p));
    enum pib_counter why = PIB_CNT_MAX;

    /* An ACTIVE port sends anything; INIT and ARMED send SMPs only. */
    if (!pib_port_active(s) && !(smp && pib_port_link_up(s))) {
        why = PIB_CNT_TX_DROP_PORT_DOWN;
    } else if (!smp && !pib_mgmt_data_vl_ok(&s->port.mgmt, vl)) {
        /* Its SL maps to VL15 or to a VL the port does not operate (IBTA 7.6.6). */
        why = PIB_CNT_TX_DROP_VL;
    } else if ((loop ? s->rxq_len : s->link.txq_len) >= PIB_QUEUE_HARD_MAX) {
        why = PIB_CNT_TX_DROP_TXQ_FULL;
    }
    if (why != PIB_CNT_MAX) {
        pib_pkt_drop(s, why, NULL);
        pib_packet_free(s, p);
        return;
    }
    pib_count(s, PIB_CNT_TX_PACKETS, 1);
    pib_count(s, PIB_CNT_TX_BYTES, pib_packet_ib_len(p));
    if (pib_inject_drop(s, p, true)) {
        pib_packet_free(s, p);      /* sent, and lost on the wire */
        return;
    }
    if (loop) {
        trace_pib_pkt_loopback(s->node_guid, pib_packet_ib_len(p));
        pib_rx_enqueue(s, p);
        return;
    }
    if (pib_lid_is_multicast(dlid)) {
        pib_count(s, PIB_CNT_TX_MCAST_PACKETS, 1);
        /* A group some QP here joined gets a copy too (IBTA 10.5.2.9 loopback). */
        if (pib_mcast_local(s, dlid) && s->rxq_len < PIB_QUEUE_HARD_MAX) {
            PibPacket *copy = pib_packet_new(s, pib_packet_ib_len(p));

            memcpy(pib_packet_ib(copy), pib_packet_ib(p), pib_packet_ib_len(p));
            trace_pib_pkt_loopback(s->node_guid, pib_packet_ib_len(p));
            pib_rx_enqueue(s, copy);
        }
    }
    pib_link_enqueue(&s->link, p);
}

/* Realize: the link is the device's one port (the link-direct property is already set). */
void pib_link_realize(PibState *s)
{
    PibLink *l = &s->link;

    pib_link_init(l, &pib_hca_link_ops, s, &DEVICE(s)->mem_reentrancy_guard);
    l->arb = &s->port.mgmt;         /* its VLArbitrationTables pick the VL to send */
    l->id = s->node_guid;
    l->node_guid = s->node_guid;
    l->port_guid = pib_port_guid(s);
    pib_link_attach(l);
}

void pib_link_unrealize(PibState *s)
{
    pib_link_fini(&s->link);
}

/* Last, after every frame went back to the free list. */
void pib_link_free_buffers(PibState *s)
{
    pib_link_free_pool(&s->link);
}
