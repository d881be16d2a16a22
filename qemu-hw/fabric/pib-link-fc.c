/*
 * pib fabric - a link's credit-based flow control (IBTA 7.9)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The protocol (FLOW frames, FCTBS, FCCL, ABR, 64-byte blocks) is defined once, in
 * include/pib_link.h, "Credits".  This file is its engine on one link, for both directions:
 *
 *   transmit  a data packet waits in its VL's queue (PibLinkVl.q) until the peer's credit
 *             limit takes it whole; then it moves to the transmit FIFO (txq), which holds at
 *             most PIB_LINK_FC_READY frames so that one VL out of credits does not hold up
 *             the others.  The pick among the VLs that may send is the port's VL arbitration
 *             (IBTA 7.6.9: the high- and low-priority tables of (VL, weight) and VLHighLimit
 *             the SM set; round robin while it set none).  While a head packet lacks credits
 *             the port is waiting: PortXmitWait.  On a switch port, a packet that stays at
 *             the head of its VL's queue past the port's HOQLife is discarded (fc_hoq_check).
 *   receive   a data packet takes blocks of its VL's buffer (PibLinkVl.held) until it is
 *             freed: the HCA consumed it, or a switch sent it on (pib_packet_release, from
 *             every path that frees a frame buffer).  A freed block is credit granted again:
 *             a bottom half sends one FLOW frame for all VLs once a limit moved by
 *             FC_GRANT_STEP, or the peer is down to half a window.  A packet with no room
 *             left is the peer's fault: dropped and counted (fc_overrun).
 *
 * Nothing here trusts the peer: its FCTBS and FCCL are taken modulo 4096 as IBTA says, a lie
 * only moves the limits this side checks against its real buffer, and a peer that grants
 * nothing only keeps our packets waiting (the owner's bounds and the transport's timers end
 * that), never a busy loop.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"

#include "pib-fabric.h"
#include "../trace.h"

#define FC_MASK         (PIB_LINK_FC_MOD - 1)
#define FC_WINDOW       (PIB_LINK_FC_MOD / 2)
/*
 * A FLOW frame goes out once the limit moved by this many blocks (16 KiB), or by any while the
 * peer is down to half a window.  The window is IBTA's 128 KiB, and the peer's main loop turns
 * it around far slower than a wire: granting in small steps keeps its sender from running dry.
 */
#define FC_GRANT_STEP   (FC_WINDOW / 8)

/* The blocks a packet of len bytes (LRH onwards) takes. */
static uint16_t fc_blocks(uint32_t len)
{
    return DIV_ROUND_UP(len, PIB_LINK_BLOCK);
}

/* May n more blocks go out on v: (FCCL - (FCTBS + n)) mod 4096 <= 2048 (IBTA 7.9.4.2)? */
static bool fc_credit_ok(const PibLinkVl *v, uint16_t n)
{
    return ((v->fccl - (v->fctbs + n)) & FC_MASK) <= FC_WINDOW;
}

/* The credit limit our receiver grants on v: ABR plus the free blocks, at most 2048. */
static uint16_t fc_limit(const PibLinkVl *v)
{
    uint16_t free = PIB_LINK_VL_BLOCKS - MIN(v->held, PIB_LINK_VL_BLOCKS);

    return (v->abr + MIN(free, FC_WINDOW)) & FC_MASK;
}

/*
 * Send our FLOW frame: every VL's FCTBS and credit limit.  Unless forced, only once a VL's
 * limit moved by FC_GRANT_STEP, or at all while the peer is down to half a window: a frame per
 * freed packet would cost as much as the packets.
 */
static void fc_send(PibLink *l, bool force)
{
    struct pib_link_fc fc[PIB_LINK_DATA_VLS];
    bool due = force;
    PibPacket *p;
    uint16_t limit;
    int i;

    if (!l->fc || l->fc_hold || !l->stream_open) {
        return;
    }
    for (i = 0; i < PIB_LINK_DATA_VLS && !due; i++) {
        PibLinkVl *v = &l->vl[i];

        uint16_t moved = (fc_limit(v) - v->fccl_sent) & FC_MASK;

        due = moved >= FC_GRANT_STEP ||
              (moved && ((v->fccl_sent - v->abr) & FC_MASK) < FC_WINDOW / 2);
    }
    if (!due) {
        return;
    }
    for (i = 0; i < PIB_LINK_DATA_VLS; i++) {
        limit = fc_limit(&l->vl[i]);
        l->vl[i].fccl_sent = limit;
        fc[i].op_fctbs_be = cpu_to_be16(PIB_LINK_FC_OP_NORMAL << 12 | l->vl[i].fctbs);
        fc[i].vl_fccl_be = cpu_to_be16(i << 12 | limit);
    }
    p = pib_link_packet_new(l, sizeof(fc));
    p->data[1] = PIB_FRAME_FLOW;
    memcpy(pib_packet_ib(p), fc, sizeof(fc));
    trace_pib_link_fc_tx(l->id, l->vl[0].fctbs, fc_limit(&l->vl[0]), l->vl[0].held);
    /* Not a data packet: straight into the transmit FIFO, behind what is already there. */
    pib_link_enqueue(l, p);
    pib_link_tx_flush(l);
}

static void fc_bh(void *opaque)
{
    fc_send(opaque, false);
}

/* The head-of-queue lifetime in ns, or -1: infinite (or not a switch port). */
static int64_t fc_hoq_life(const PibLink *l)
{
    uint8_t v = l->arb ? l->arb->hoq_life & 0x1f : PIB_MGMT_HOQ_INFINITE;

    return !l->hoq || v >= PIB_MGMT_HOQ_INFINITE ? -1 : (int64_t)4096 << v;
}

/* Is VL v stalled now (VLStallCount)?  A stall that ran its time ends here. */
static bool fc_vl_stalled(PibLink *l, int v, int64_t now)
{
    PibLinkVl *vl = &l->vl[v];
    PibPacket *p;

    if (!vl->stalled_until) {
        return false;
    }
    if (now < vl->stalled_until) {
        return true;
    }
    vl->stalled_until = 0;
    vl->hoq_drops = 0;
    trace_pib_link_fc_vl_stall(l->id, v, "stall over");
    if ((p = QSIMPLEQ_FIRST(&vl->q))) {
        p->fc_head_since = now;         /* a head from now on */
    }
    return false;
}

/* A packet of VL v leaves its queue unsent: the port's discard, its input credit freed. */
static void fc_hoq_discard(PibLink *l, int v, PibPacket *p, int64_t waited)
{
    trace_pib_link_fc_hoq(l->id, v, waited / SCALE_US);
    if (l->ops->fc_hoq_discard) {
        l->ops->fc_hoq_discard(l, v);
    }
    pib_link_packet_free(l, p);
}

/*
 * Discard the heads that waited past HOQLife (freeing the input credits they held), and set the
 * timer for the next head's expiry.  VLStallCount such discards in a row (PortInfo, IBTA
 * 18.2.5.4) stall the VL for 8 x HOQLife: every packet of it is discarded meanwhile, those
 * waiting now and those that come.  A packet sent starts the count again; 0 never stalls.
 */
static void fc_hoq_check(PibLink *l)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    int64_t life = fc_hoq_life(l), next = INT64_MAX;
    uint8_t stall = l->arb ? l->arb->vl_stall_count : 0;
    PibLinkVl *vl;
    PibPacket *p;
    bool stalled;
    int v;

    if (life < 0) {
        timer_del(l->hoq_timer);
        return;
    }
    for (v = 0; v < PIB_LINK_DATA_VLS; v++) {
        vl = &l->vl[v];
        stalled = fc_vl_stalled(l, v, now);
        while ((p = QSIMPLEQ_FIRST(&vl->q)) &&
               (stalled || now - p->fc_head_since >= life)) {
            QSIMPLEQ_REMOVE_HEAD(&vl->q, next);
            vl->qlen--;
            l->txq_len--;
            fc_hoq_discard(l, v, p, now - p->fc_head_since);
            if (!stalled && stall && ++vl->hoq_drops >= stall) {
                vl->stalled_until = now + 8 * life;
                stalled = true;
                trace_pib_link_fc_vl_stall(l->id, v, "stalled for 8 x HOQLife");
            }
            if ((p = QSIMPLEQ_FIRST(&vl->q))) {
                p->fc_head_since = now;
            }
        }
        if (p) {
            next = MIN(next, p->fc_head_since + life);
        }
        if (vl->stalled_until) {
            next = MIN(next, vl->stalled_until);
        }
    }
    if (next == INT64_MAX) {
        timer_del(l->hoq_timer);
    } else if (!timer_pending(l->hoq_timer) || timer_expire_time_ns(l->hoq_timer) > next) {
        timer_mod(l->hoq_timer, next);
    }
}

static void fc_hoq_timer(void *opaque)
{
    pib_link_fc_hoq_update(opaque);
}

/* The lifetime changed, or its timer fired: discard what expired, send what may go now. */
void pib_link_fc_hoq_update(PibLink *l)
{
    fc_hoq_check(l);
    pib_link_fc_pump(l);
    pib_link_tx_flush(l);
    if (l->tx_waiters && l->txq_len < PIB_TXQ_MAX / 2) {
        l->tx_waiters = false;
        l->ops->tx_room(l);
    }
}

void pib_link_fc_init(PibLink *l)
{
    int i;

    for (i = 0; i < PIB_LINK_DATA_VLS; i++) {
        QSIMPLEQ_INIT(&l->vl[i].q);
    }
    l->fc_bh = qemu_bh_new(fc_bh, l);
    l->hoq_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, fc_hoq_timer, l);
}

void pib_link_fc_fini(PibLink *l)
{
    pib_link_fc_purge(l);
    qemu_bh_delete(l->fc_bh);
    timer_free(l->hoq_timer);
}

/*
 * Drop what waits for credits (the stream closed, or the device goes away).  Their buffers go
 * back; a packet a switch received holds credits of another link, returned now.
 */
void pib_link_fc_purge(PibLink *l)
{
    PibPacket *p;
    int i;

    for (i = 0; i < PIB_LINK_DATA_VLS; i++) {
        while ((p = QSIMPLEQ_FIRST(&l->vl[i].q))) {
            QSIMPLEQ_REMOVE_HEAD(&l->vl[i].q, next);
            l->txq_len--;
            pib_link_packet_free(l, p);
        }
        l->vl[i].qlen = 0;
        l->vl[i].hoq_drops = 0;
        l->vl[i].stalled_until = 0;
    }
    timer_del(l->hoq_timer);
    if (l->fc_waiting) {
        l->fc_wait_ns += qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - l->fc_wait_since;
        l->fc_waiting = false;
    }
}

/* A new stream: no credit either way until the first FLOW frames. */
void pib_link_fc_reset(PibLink *l)
{
    int i;

    pib_link_fc_purge(l);
    l->fc = false;
    l->fc_offered = l->fc_peer = 0;
    l->fc_hello_tx = l->fc_hello_rx = l->fc_decided = false;
    l->arb_idx[0] = l->arb_idx[1] = 0;
    l->arb_left[0] = l->arb_left[1] = 0;
    l->arb_high_bytes = 0;
    for (i = 0; i < PIB_LINK_DATA_VLS; i++) {
        l->vl[i].fctbs = l->vl[i].fccl = l->vl[i].abr = l->vl[i].held = 0;
        l->vl[i].fccl_sent = 0;
    }
}

/* What our HELLO says of credits (include/pib_link.h): link-credits and whether a switch. */
uint32_t pib_link_fc_flags(const PibLink *l)
{
    return (l->credits != ON_OFF_AUTO_OFF ? PIB_HELLO_F_CREDITS : 0) |
           (l->credits == ON_OFF_AUTO_ON ? PIB_HELLO_F_CREDITS_ON : 0) |
           (l->is_switch ? PIB_HELLO_F_SWITCH : 0);
}

/*
 * Without credits on this stream, the data that waited for the HELLOs goes as it came, VL by
 * VL (their order within a VL kept).
 */
static void fc_release_waiting(PibLink *l)
{
    PibPacket *p;
    int i;

    for (i = 0; i < PIB_LINK_DATA_VLS; i++) {
        while ((p = QSIMPLEQ_FIRST(&l->vl[i].q))) {
            QSIMPLEQ_REMOVE_HEAD(&l->vl[i].q, next);
            QSIMPLEQ_INSERT_TAIL(&l->txq, p, next);
            l->txq_ready++;
        }
        l->vl[i].qlen = 0;
    }
    timer_del(l->hoq_timer);
    pib_link_tx_flush(l);
}

/*
 * Once both HELLOs are in (ours sent, the peer's come): credits run if both sides run them and
 * one is a switch or wants them between CAs too.  Both ends decide alike from the same two
 * HELLOs.  Our FLOW frame must follow our HELLO, which is why this waits for both.
 *
 * Data the owner sends before then waits in the VL queues (pib_link_fc_data): sent without
 * credits to a receiver that counts them, it would be counted there and not here, and the
 * limit the receiver granted before it held them would let us overrun it, each packet it
 * dropped a credit lost for good.  A port that held its state across a move (pib-link-move.c)
 * sends data as soon as its machine runs, before the peer's HELLO is read.
 */
void pib_link_fc_maybe_start(PibLink *l)
{
    uint32_t both = l->fc_offered & l->fc_peer, any = l->fc_offered | l->fc_peer;

    if (l->fc_decided || !l->fc_hello_tx || !l->fc_hello_rx) {
        return;
    }
    l->fc_decided = true;
    if (!(both & PIB_HELLO_F_CREDITS) || !(any & (PIB_HELLO_F_SWITCH | PIB_HELLO_F_CREDITS_ON))) {
        fc_release_waiting(l);
        return;
    }
    l->fc = true;
    trace_pib_link_event(l->id, "credit-based flow control on");
    fc_send(l, true);
}

/* May v's head packet go now: there is one, and the peer's limit takes it? */
static bool fc_sendable(const PibLink *l, unsigned v)
{
    const PibPacket *p = v < PIB_LINK_DATA_VLS ? QSIMPLEQ_FIRST(&l->vl[v].q) : NULL;

    return p && fc_credit_ok(&l->vl[v], fc_blocks(pib_packet_ib_len(p)));
}

/* Round robin over the VLs that may send, from the one after the last pick; -1: none. */
static int fc_pick_rr(PibLink *l)
{
    int i, v;

    for (i = 0; i < PIB_LINK_DATA_VLS; i++) {
        v = (l->fc_rr + i) % PIB_LINK_DATA_VLS;
        if (fc_sendable(l, v)) {
            l->fc_rr = (v + 1) % PIB_LINK_DATA_VLS;
            return v;
        }
    }
    return -1;
}

/*
 * One arbitration table (t 0: low priority, 1: high): the entry being served while it has
 * weight left and its VL may send, else the next entry with weight whose VL may send, which
 * starts with its whole weight (64-byte units).  -1: none.
 */
static int fc_pick_table(PibLink *l, int t)
{
    const struct pib_vlarb_entry *e = t ? l->arb->vlarb_high : l->arb->vlarb_low;
    unsigned k, i;

    for (k = 0; k < PIB_MGMT_VLARB_CAP; k++) {
        i = (l->arb_idx[t] + k) % PIB_MGMT_VLARB_CAP;
        if (!e[i].weight || !fc_sendable(l, e[i].vl)) {
            continue;
        }
        if (k > 0 || l->arb_left[t] <= 0) {
            l->arb_idx[t] = i;
            l->arb_left[t] = e[i].weight * PIB_LINK_BLOCK;
        }
        return e[i].vl;
    }
    return -1;
}

static bool fc_tables_set(const PibMgmtPort *m)
{
    int i;

    for (i = 0; i < PIB_MGMT_VLARB_CAP; i++) {
        if (m->vlarb_low[i].weight || m->vlarb_high[i].weight) {
            return true;
        }
    }
    return false;
}

/*
 * The next VL to send from (IBTA 7.6.9): the high-priority table while it has sent no more
 * than VLHighLimit x 4 KiB since the low table's last turn (255: no limit; 0: one packet),
 * else the low table; either one when the other has nothing to send.  A VL no entry names
 * with weight does not send.  Tables the SM never set (no weight anywhere): round robin.
 * *table says which table picked (-1: round robin).
 */
static int fc_pick(PibLink *l, int *table)
{
    uint8_t limit;
    bool high_first;
    int v;

    *table = -1;
    if (!l->arb || !fc_tables_set(l->arb)) {
        return fc_pick_rr(l);
    }
    limit = l->arb->vl_high_limit;
    high_first = limit == 255 || l->arb_high_bytes == 0 ||
                 l->arb_high_bytes < limit * 4096u;
    if (high_first && (v = fc_pick_table(l, 1)) >= 0) {
        *table = 1;
    } else if ((v = fc_pick_table(l, 0)) >= 0) {
        *table = 0;
    } else if ((v = fc_pick_table(l, 1)) >= 0) {
        *table = 1;
    }
    return v;
}

/* The arbiter's accounts after a packet of len bytes left by table t's pick. */
static void fc_arb_sent(PibLink *l, int t, uint32_t len)
{
    if (t < 0) {
        return;
    }
    l->arb_left[t] -= len;
    if (l->arb_left[t] <= 0) {
        l->arb_idx[t] = (l->arb_idx[t] + 1) % PIB_MGMT_VLARB_CAP;     /* weight used up */
    }
    l->arb_high_bytes = t ? l->arb_high_bytes + len : 0;
}

/* The arbiter's picks, into the transmit FIFO while it has room; then PortXmitWait's state. */
void pib_link_fc_pump(PibLink *l)
{
    bool waiting = false;
    PibPacket *p;
    uint16_t n;
    int t, v;

    if (!l->fc) {
        return;                 /* the HELLOs have not decided yet: the data waits */
    }
    while (l->txq_ready < PIB_LINK_FC_READY && (v = fc_pick(l, &t)) >= 0) {
        p = QSIMPLEQ_FIRST(&l->vl[v].q);
        n = fc_blocks(pib_packet_ib_len(p));
        QSIMPLEQ_REMOVE_HEAD(&l->vl[v].q, next);
        l->vl[v].qlen--;
        l->vl[v].hoq_drops = 0;
        l->vl[v].fctbs = (l->vl[v].fctbs + n) & FC_MASK;
        fc_arb_sent(l, t, pib_packet_ib_len(p));
        QSIMPLEQ_INSERT_TAIL(&l->txq, p, next);
        l->txq_ready++;
        if (l->hoq && !QSIMPLEQ_EMPTY(&l->vl[v].q)) {
            QSIMPLEQ_FIRST(&l->vl[v].q)->fc_head_since = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
        }
    }
    for (v = 0; v < PIB_LINK_DATA_VLS; v++) {
        p = QSIMPLEQ_FIRST(&l->vl[v].q);
        if (p && !fc_credit_ok(&l->vl[v], fc_blocks(pib_packet_ib_len(p)))) {
            waiting = true;
            break;
        }
    }
    if (waiting && l->hoq) {
        fc_hoq_check(l);            /* a head waits: it has a lifetime */
    }
    if (waiting && !l->fc_waiting) {
        l->fc_waiting = true;
        l->fc_wait_since = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
        trace_pib_link_fc_wait(l->id, v, l->vl[v].fctbs, l->vl[v].fccl, l->vl[v].qlen);
        /*
         * Out of credit: our FCTBS to the peer, whose receiver sets its ABR to it (IBTA
         * 7.9.4.3).  A packet it dropped (sent beyond a limit it granted) is then counted
         * there too; without this its credit would be lost for good, and a link that lost a
         * window's worth would wait for ever.  IBTA has the transmitter send FLOW packets
         * periodically for the same reason; once per wait is enough here.  (The FLOW frame's
         * flush comes back here: fc_waiting is set, so it sends no other.)
         */
        fc_send(l, true);       /* (our FCTBS) */
    } else if (!waiting && l->fc_waiting) {
        l->fc_wait_ns += qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - l->fc_wait_since;
        l->fc_waiting = false;
    }
}

/* A data packet to send on a flow-controlled link: its VL's queue, then the pick. */
void pib_link_fc_enqueue(PibLink *l, PibPacket *p)
{
    int vln = p->data[PIB_LINK_HDR_LEN] >> 4;
    PibLinkVl *v = &l->vl[vln];
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);

    if (l->hoq && fc_vl_stalled(l, vln, now)) {
        l->txq_len--;                   /* (counted in when the owner queued it) */
        fc_hoq_discard(l, vln, p, 0);   /* a stalled VL takes nothing */
        return;
    }
    if (l->hoq && QSIMPLEQ_EMPTY(&v->q)) {
        p->fc_head_since = now;
    }
    QSIMPLEQ_INSERT_TAIL(&v->q, p, next);
    v->qlen++;
    pib_link_fc_pump(l);
}

/*
 * A FLOW frame: each entry brings the peer's credit limit for our transmitter and, as FCTBS,
 * what its transmitter sent, to which our receiver's ABR is set (IBTA 7.9.4.3).  len is a
 * whole number of entries (the header check saw to it).
 */
void pib_link_fc_rx_flow(PibLink *l, const uint8_t *buf, uint32_t len)
{
    const struct pib_link_fc *fc = (const struct pib_link_fc *)buf;
    uint32_t i, n = len / sizeof(*fc);
    uint16_t a, b;
    uint8_t vl, op;

    l->fc_frames_rx++;
    if (!l->fc) {
        return;     /* not negotiated on this stream: nothing to act on */
    }
    for (i = 0; i < n; i++) {
        a = lduw_be_p(&fc[i].op_fctbs_be);
        b = lduw_be_p(&fc[i].vl_fccl_be);
        op = a >> 12;
        vl = b >> 12;
        if (vl >= PIB_LINK_DATA_VLS ||
            (op != PIB_LINK_FC_OP_NORMAL && op != PIB_LINK_FC_OP_INIT)) {
            continue;
        }
        l->vl[vl].abr = a & FC_MASK;
        l->vl[vl].fccl = b & FC_MASK;
    }
    trace_pib_link_fc_rx(l->id, n, l->vl[0].fccl, l->vl[0].abr);
    pib_link_fc_pump(l);
    pib_link_tx_flush(l);
}

/*
 * A PACKET frame arrived (len bytes from the LRH at ib): is there room for it in its VL's
 * buffer?  False: the peer sent beyond its credits, and the packet is dropped (the caller
 * frees it) and counted.  VL15 and a link without credits always have room.
 */
bool pib_link_fc_rx_room(PibLink *l, const uint8_t *ib, uint32_t len)
{
    uint8_t vl = len ? ib[0] >> 4 : PIB_LINK_DATA_VLS;
    uint16_t n = fc_blocks(len);

    if (!l->fc || vl >= PIB_LINK_DATA_VLS || l->vl[vl].held + n <= PIB_LINK_VL_BLOCKS) {
        return true;
    }
    l->fc_overruns++;
    trace_pib_link_fc_overrun(l->id, vl, l->vl[vl].held, n, l->fc_overruns);
    if (l->ops->fc_overrun) {
        l->ops->fc_overrun(l, vl);
    }
    return false;
}

static void fc_free_blocks(PibLink *l, uint8_t vl, uint16_t n)
{
    PibLinkVl *v = &l->vl[vl];

    v->held -= MIN(v->held, n);
    qemu_bh_schedule(l->fc_bh);
}

/*
 * The packet that had room is received: it counts in ABR, and holds its blocks in frame
 * buffer p until pib_packet_release.  p NULL: the owner handled it in place, so its blocks are
 * free again at once.
 */
void pib_link_fc_rx_take(PibLink *l, const uint8_t *ib, uint32_t len, PibPacket *p)
{
    uint8_t vl = len ? ib[0] >> 4 : PIB_LINK_DATA_VLS;
    uint16_t n = fc_blocks(len);
    PibLinkVl *v;

    if (!l->fc || vl >= PIB_LINK_DATA_VLS) {
        return;
    }
    v = &l->vl[vl];
    v->abr = (v->abr + n) & FC_MASK;
    if (!p) {
        qemu_bh_schedule(l->fc_bh);
        return;
    }
    v->held += n;
    p->fc_link = l;
    p->fc_gen = l->rx_gen;
    p->fc_blocks = n;
    p->fc_vl = vl;
}

/* A frame buffer is freed: the blocks it held on the link it came from are free again. */
void pib_packet_release(PibPacket *p)
{
    PibLink *l = p->fc_link;

    if (!l) {
        return;
    }
    p->fc_link = NULL;
    if (l->fc && p->fc_gen == l->rx_gen) {
        fc_free_blocks(l, p->fc_vl, p->fc_blocks);
    }
}

/*
 * Inject: hold our receiver's credits (grant nothing more) or give them back.  The peer stops
 * once it has used what it had; on release it gets a FLOW frame with everything freed meanwhile.
 */
void pib_link_fc_set_hold(PibLink *l, bool hold)
{
    l->fc_hold = hold;
    trace_pib_link_event(l->id, hold ? "credits held" : "credits released");
    if (!hold) {
        fc_send(l, true);
    }
}

/* PortXmitWait's time: waited so far, and the wait going on now. */
uint64_t pib_link_xmit_wait_ns(const PibLink *l)
{
    return l->fc_wait_ns + (l->fc_waiting ?
                            qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - l->fc_wait_since : 0);
}
