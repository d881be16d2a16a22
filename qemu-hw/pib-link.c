/*
 * pib HCA device model - the link
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The port's "cable" is a chardev, normally a socket shared with another
 * pib-hca (in this or another QEMU).  The byte stream carries frames
 * (include/pib_link.h): a 4-byte header and a payload.  The receive side is
 * an explicit state machine:
 *
 *   HDR -> PAYLOAD -> HDR ...; DISCARD once framing is lost (bad magic, type
 *   or length, malformed HELLO).  Losing framing drops the connection, from a
 *   bottom half, so the link retrains as a physical link that lost symbol
 *   lock would.
 *
 * The stream's events (connected, HELLO, closed) drive the port's state
 * machine (pib-port.c), which decides what may pass.
 *
 * Transmit never blocks the main loop: frames wait in a queue that is
 * drained with non-blocking writes, many frames per write; when the socket
 * is full the queue waits for G_IO_OUT, and requesters stop generating
 * packets while it is longer than PIB_TXQ_MAX.  A packet addressed to our
 * own LID does not touch the link at all: it goes straight to our receive
 * queue (loopback), so two QPs of one HCA can talk.
 *
 * PACKET frames go to the receive queue; pib-pkt.c parses and dispatches
 * them as soon as the read callback has consumed its bytes.  While that
 * queue is full the link reads nothing, so a fast peer is slowed down by
 * the socket rather than by dropped packets.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/main-loop.h"
#include "chardev/char-fe.h"

#include "pib-internal.h"
#include "trace.h"

static const char *pib_frame_type_name(uint8_t type)
{
    switch (type) {
    case PIB_FRAME_HELLO:  return "HELLO";
    case PIB_FRAME_PACKET: return "PACKET";
    default:               return "UNKNOWN";
    }
}

/*
 * Transmit
 */

static void pib_link_tx_drain(PibState *s);

/*
 * Frame buffers.  Every one has room for the largest frame, so they can be
 * recycled through a small free list instead of going back to the allocator
 * for each packet.  ib_len never exceeds PIB_LINK_MAX_PAYLOAD: a received
 * frame's length was checked against it, and a packet we build is at most
 * 80 bytes of headers and one 4 KiB MTU.
 */
#define PIB_PACKET_SIZE     (sizeof(PibPacket) + PIB_LINK_HDR_LEN + \
                             PIB_LINK_MAX_PAYLOAD)
QEMU_BUILD_BUG_ON(PIB_LINK_TX_BATCH < PIB_LINK_HDR_LEN + PIB_LINK_MAX_PAYLOAD);

/* A frame buffer: the link header filled in, room for ib_len bytes after it */
PibPacket *pib_packet_new(PibState *s, uint32_t ib_len)
{
    PibPacket *p = QSIMPLEQ_FIRST(&s->pkt_pool);
    struct pib_link_hdr hdr = {
        .magic = PIB_LINK_MAGIC,
        .type = PIB_FRAME_PACKET,
        .length_be = cpu_to_be16(ib_len),
    };

    if (p) {
        QSIMPLEQ_REMOVE_HEAD(&s->pkt_pool, next);
        s->pkt_pool_len--;
    } else {
        p = g_malloc(PIB_PACKET_SIZE);
    }
    p->len = PIB_LINK_HDR_LEN + ib_len;
    memcpy(p->data, &hdr, sizeof(hdr));
    return p;
}

/* Done with a frame: keep the buffer for the next one, up to a bound. */
void pib_packet_free(PibState *s, PibPacket *p)
{
    if (s->pkt_pool_len >= PIB_PACKET_POOL_MAX) {
        g_free(p);
        return;
    }
    QSIMPLEQ_INSERT_HEAD(&s->pkt_pool, p, next);
    s->pkt_pool_len++;
}

/* The device goes away: the free list goes back to the allocator. */
static void pib_packet_pool_free(PibState *s)
{
    PibPacket *p;

    while ((p = QSIMPLEQ_FIRST(&s->pkt_pool))) {
        QSIMPLEQ_REMOVE_HEAD(&s->pkt_pool, next);
        g_free(p);
    }
    s->pkt_pool_len = 0;
}

/*
 * Drop every frame not yet written, staged or queued (the stream closed, or
 * the device goes away).  The queue is empty now, so whoever waited for room
 * in it runs again: a requester that stopped on a full queue when the link
 * died must go on to find the port down (its packets are then dropped and
 * counted, and its ACK timer runs out), not wait for a drain that will never
 * come.
 */
void pib_link_purge(PibState *s)
{
    PibLink *l = &s->link;
    PibPacket *p;

    while ((p = QSIMPLEQ_FIRST(&l->txq))) {
        QSIMPLEQ_REMOVE_HEAD(&l->txq, next);
        pib_packet_free(s, p);
    }
    l->txq_len = 0;
    l->tx_len = 0;
    l->tx_off = 0;
    l->tx_blocked = false;
    if (l->tx_watch) {
        g_source_remove(l->tx_watch);
        l->tx_watch = 0;
    }
    if (l->tx_waiters) {
        l->tx_waiters = false;
        pib_qp_kick_waiters(s);
    }
}

/*
 * G_IO_OUT: the socket has room again.  While it keeps filling up, the same
 * watch stays installed (G_SOURCE_CONTINUE) rather than being removed here
 * and added again by the drain: adding or removing a GSource with a poll fd
 * makes GLib write its wakeup eventfd, and under load (a full socket after
 * every write) that cost two system calls per main-loop pass.
 */
static gboolean pib_link_tx_ready(void *do_not_use, GIOCondition cond,
                                  void *opaque)
{
    PibState *s = opaque;
    PibLink *l = &s->link;

    pib_link_tx_drain(s);
    if (l->tx_watch && l->tx_blocked) {
        return G_SOURCE_CONTINUE;       /* full again: keep waiting */
    }
    l->tx_watch = 0;                    /* (a purge may have removed it) */
    return G_SOURCE_REMOVE;
}

/*
 * Stage whole frames from the head of the queue in tx_buf, as many as fit,
 * once everything staged before has been written.  Staged frames have left
 * the queue (and its PIB_TXQ_MAX bound); their buffers are free again.
 */
static void pib_link_tx_stage(PibState *s)
{
    PibLink *l = &s->link;
    PibPacket *p;

    l->tx_len = 0;
    l->tx_off = 0;
    while ((p = QSIMPLEQ_FIRST(&l->txq)) &&
           p->len <= sizeof(l->tx_buf) - l->tx_len) {
        memcpy(l->tx_buf + l->tx_len, p->data, p->len);
        l->tx_len += p->len;
        QSIMPLEQ_REMOVE_HEAD(&l->txq, next);
        l->txq_len--;
        l->frames_tx++;
        pib_packet_free(s, p);
    }
}

/*
 * Write queued frames until the queue is empty or the chardev takes no more.
 * Frames are staged first, so one write carries many of them: a write is a
 * system call, and at 4 KiB per frame it cost more than the copy.  The
 * staged bytes may go out in pieces; frames never interleave because only
 * this function writes, and always in queue order.
 */
static void pib_link_tx_drain(PibState *s)
{
    PibLink *l = &s->link;
    int ret;

    if (l->tx_draining) {
        return;
    }
    l->tx_draining = true;
    l->tx_blocked = false;
    for (;;) {
        if (!l->stream_open) {
            pib_link_purge(s);
            break;
        }
        if (l->tx_off == l->tx_len) {
            pib_link_tx_stage(s);
            if (l->tx_len == 0) {
                break;                  /* nothing left */
            }
        }
        ret = qemu_chr_fe_write(&l->chr, l->tx_buf + l->tx_off,
                                l->tx_len - l->tx_off);
        if (ret > 0) {
            l->tx_off += ret;
            continue;
        }
        if (!l->stream_open) {      /* the write found the peer gone */
            pib_link_purge(s);
            break;
        }
        /* Full (EAGAIN): continue when the chardev can take more. */
        trace_pib_link_tx_wait(s->node_guid, l->txq_len);
        l->tx_blocked = true;
        if (!l->tx_watch) {
            l->tx_watch = qemu_chr_fe_add_watch(&l->chr, G_IO_OUT | G_IO_HUP,
                                                pib_link_tx_ready, s);
        }
        if (!l->tx_watch) {
            pib_link_purge(s);      /* a backend we cannot wait on */
        }
        break;
    }
    l->tx_draining = false;
    if (l->tx_waiters && l->txq_len < PIB_TXQ_MAX / 2) {
        l->tx_waiters = false;
        pib_qp_kick_waiters(s);
    }
}

/*
 * Send what the engines queued.  Transmitting queues only; each run of the
 * engines (the work bottom half, a batch of received packets, a link event)
 * ends with this flush, so the frames one run produced leave in one write of
 * up to PIB_LINK_TX_BATCH bytes instead of one system call each, and still
 * in the same main-loop pass.  While the socket is full (a G_IO_OUT watch
 * is pending) there is no point in trying: the watch drains the queue.
 */
void pib_link_flush(PibState *s)
{
    PibLink *l = &s->link;

    if (!l->tx_watch && !QSIMPLEQ_EMPTY(&l->txq)) {
        pib_link_tx_drain(s);
    }
}

static void pib_link_enqueue(PibState *s, PibPacket *p)
{
    QSIMPLEQ_INSERT_TAIL(&s->link.txq, p, next);
    s->link.txq_len++;
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
    bool smp = pib_packet_ib(p)[0] >> 4 == 15;      /* LRH VL */
    enum pib_counter why = PIB_CNT_MAX;

    /* An ACTIVE port sends anything; INIT and ARMED send SMPs only. */
    if (!pib_port_active(s) && !(smp && pib_port_link_up(s))) {
        why = PIB_CNT_TX_DROP_PORT_DOWN;
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
    pib_link_enqueue(s, p);
}

static void pib_link_send_hello(PibState *s)
{
    struct pib_link_hello h = {
        .version_be   = cpu_to_be32(PIB_LINK_PROTO_VERSION),
        .mtu_be       = cpu_to_be32(PIB_LINK_MAX_PAYLOAD),
        .node_guid_be = cpu_to_be64(s->node_guid),
        .port_guid_be = cpu_to_be64(pib_port_guid(s)),
    };
    PibPacket *p = pib_packet_new(s, sizeof(h));

    p->data[1] = PIB_FRAME_HELLO;
    memcpy(pib_packet_ib(p), &h, sizeof(h));
    trace_pib_link_tx(s->node_guid, pib_frame_type_name(PIB_FRAME_HELLO),
                      sizeof(h));
    pib_link_enqueue(s, p);
    pib_link_flush(s);
}

/*
 * Receive
 */

static void pib_link_rx_reset(PibState *s)
{
    PibLink *l = &s->link;

    if (l->rx_pkt) {
        pib_packet_free(s, l->rx_pkt);
        l->rx_pkt = NULL;
    }
    l->rx_state = PIB_RX_HDR;
    l->rx_got = 0;
    l->rx_len = 0;
}

/*
 * The stream lost framing: ignore everything until the connection is gone, take
 * the port down now, and drop the connection from a bottom half (never from
 * inside the chardev's own read callback).  The peer reconnects (a client
 * chardev needs reconnect=N) and the link retrains.
 */
static void pib_link_lose_framing(PibState *s, const char *why, uint32_t val)
{
    trace_pib_link_bad_frame(s->node_guid, why, val);
    s->link.bad_frames++;
    pib_count(s, PIB_CNT_LINK_FRAMING_ERRORS, 1);
    s->link.rx_state = PIB_RX_DISCARD;
    pib_port_event(s, PIB_PEV_STREAM_DOWN);
    qemu_bh_schedule(s->link.drop_bh);
}

static void pib_link_drop_bh(void *opaque)
{
    PibState *s = opaque;

    trace_pib_link_drop(s->node_guid);
    qemu_chr_fe_disconnect(&s->link.chr);
}

/*
 * Take the link down and let it train again (an SM's PortInfo Set: PortState DOWN, or a new
 * PortPhysicalState): the port is DOWN at once, the connection is dropped from a bottom half,
 * and the chardev's reconnect (ours or the peer's) brings the cable back.
 */
void pib_link_retrain(PibState *s, const char *why)
{
    trace_pib_link_retrain(s->node_guid, why);
    pib_port_event(s, PIB_PEV_STREAM_DOWN);
    if (s->link.stream_open) {
        s->link.rx_state = PIB_RX_DISCARD;
        qemu_bh_schedule(s->link.drop_bh);
    }
}

static void pib_link_rx_hello(PibState *s)
{
    PibLink *l = &s->link;
    struct pib_link_hello h;
    uint32_t version;

    if (l->rx_len < sizeof(h)) {
        pib_link_lose_framing(s, "short HELLO", l->rx_len);
        return;
    }
    /* A longer HELLO comes from a newer peer: the extra bytes are ignored. */
    memcpy(&h, l->rx_buf, sizeof(h));
    version = be32_to_cpu(h.version_be);
    if (version != PIB_LINK_PROTO_VERSION) {
        pib_link_lose_framing(s, "HELLO version", version);
        return;
    }
    l->peer_node_guid = be64_to_cpu(h.node_guid_be);
    l->peer_port_guid = be64_to_cpu(h.port_guid_be);
    trace_pib_link_hello(s->node_guid, l->peer_node_guid, l->peer_port_guid,
                         version, be32_to_cpu(h.mtu_be));
    pib_port_event(s, PIB_PEV_HELLO);
}

/* A whole frame is in rx_hdr/rx_buf. */
static void pib_link_rx_frame(PibState *s)
{
    PibLink *l = &s->link;

    l->frames_rx++;
    trace_pib_link_rx(s->node_guid, pib_frame_type_name(l->rx_hdr.type),
                      l->rx_len);
    /*
     * Ready for the next frame; rx_len stays valid for the handlers below,
     * which may still move to DISCARD.
     */
    l->rx_state = PIB_RX_HDR;
    l->rx_got = 0;

    switch (l->rx_hdr.type) {
    case PIB_FRAME_HELLO:
        pib_link_rx_hello(s);
        break;
    case PIB_FRAME_PACKET: {
        PibPacket *p = l->rx_pkt;

        l->rx_pkt = NULL;
        pib_rx_link(s, p);
        break;
    }
    default:
        break;      /* unreachable: the header check admits only the above */
    }
}

/* A whole header is in rx_hdr: check it before trusting its length. */
static bool pib_link_rx_check_hdr(PibState *s)
{
    const struct pib_link_hdr *h = &s->link.rx_hdr;
    uint16_t len = be16_to_cpu(h->length_be);

    if (h->magic != PIB_LINK_MAGIC) {
        pib_link_lose_framing(s, "bad magic", h->magic);
        return false;
    }
    if (h->type != PIB_FRAME_HELLO && h->type != PIB_FRAME_PACKET) {
        pib_link_lose_framing(s, "unknown frame type", h->type);
        return false;
    }
    if (len > PIB_LINK_MAX_PAYLOAD) {
        pib_link_lose_framing(s, "oversized frame", len);
        return false;
    }
    return true;
}

/* Take exactly what the current piece (header or payload) still needs. */
static int pib_link_can_receive(void *opaque)
{
    PibState *s = PIB_HCA(opaque);
    PibLink *l = &s->link;

    /* Backpressure: read on once pib_rx_run() made room. */
    if (l->rx_state != PIB_RX_DISCARD && s->rxq_len >= PIB_RXQ_MAX) {
        l->rx_throttled = true;
        return 0;
    }
    /*
     * Up to a whole frame's worth: the receive loop takes frames split or
     * merged anywhere, so one read may end one frame and start the next.
     */
    return PIB_LINK_HDR_LEN + sizeof(l->rx_buf);
}

/*
 * Feed bytes through the framing state machine.  Frames arrive split or merged
 * arbitrarily; every pass of the loop consumes at least one byte, so it ends
 * within `size` passes.  The packets that were completed are processed once
 * all bytes are in (pib_rx_run), so nothing they cause (an ACK that finds the
 * peer gone, a port event) can change the framing state under the loop.
 *
 * A socket chardev hands over at most CHR_READ_BUF_LEN (4 KiB) per main-loop
 * pass, less than one full-MTU frame: the link's receive rate is bounded by
 * how fast the main loop turns, so nothing here may cost a pass of its own.
 */
static void pib_link_receive(void *opaque, const uint8_t *buf, int size)
{
    PibState *s = opaque;
    PibLink *l = &s->link;
    int off = 0;
    uint32_t n;

    while (off < size) {
        switch (l->rx_state) {
        case PIB_RX_HDR:
            n = MIN((uint32_t)(size - off), PIB_LINK_HDR_LEN - l->rx_got);
            memcpy((uint8_t *)&l->rx_hdr + l->rx_got, buf + off, n);
            off += n;
            l->rx_got += n;
            if (l->rx_got < PIB_LINK_HDR_LEN || !pib_link_rx_check_hdr(s)) {
                break;
            }
            l->rx_len = be16_to_cpu(l->rx_hdr.length_be);
            l->rx_got = 0;
            l->rx_state = PIB_RX_PAYLOAD;
            /* A packet's payload goes straight into its frame buffer. */
            if (l->rx_hdr.type == PIB_FRAME_PACKET) {
                l->rx_pkt = pib_packet_new(s, l->rx_len);
            }
            if (l->rx_len == 0) {
                pib_link_rx_frame(s);
            }
            break;
        case PIB_RX_PAYLOAD:
            n = MIN((uint32_t)(size - off), l->rx_len - l->rx_got);
            memcpy((l->rx_pkt ? pib_packet_ib(l->rx_pkt) : l->rx_buf) +
                   l->rx_got, buf + off, n);
            off += n;
            l->rx_got += n;
            if (l->rx_got == l->rx_len) {
                pib_link_rx_frame(s);
            }
            break;
        default:
            off = size;         /* DISCARD */
            break;
        }
    }
    if (!QSIMPLEQ_EMPTY(&s->rxq)) {
        pib_rx_run(s);
    }
}

static void pib_link_event(void *opaque, QEMUChrEvent event)
{
    PibState *s = opaque;
    PibLink *l = &s->link;

    switch (event) {
    case CHR_EVENT_OPENED:
        trace_pib_link_event(s->node_guid, "opened");
        l->stream_open = true;
        pib_link_rx_reset(s);
        pib_port_event(s, PIB_PEV_STREAM_UP);
        if (!s->port.disabled) {
            pib_link_send_hello(s);     /* a DISABLED port does not train */
        }
        break;
    case CHR_EVENT_CLOSED:
        trace_pib_link_event(s->node_guid, "closed");
        l->stream_open = false;
        qemu_bh_cancel(l->drop_bh);
        if (!l->tx_draining) {
            pib_link_purge(s);  /* else the drain loop does it */
        }
        pib_link_rx_reset(s);
        pib_port_event(s, PIB_PEV_STREAM_DOWN);
        break;
    default:
        break;
    }
}

/*
 * Glue
 */

void pib_link_realize(PibState *s)
{
    PibLink *l = &s->link;

    l->drop_bh = qemu_bh_new_guarded(pib_link_drop_bh, s,
                                     &DEVICE(s)->mem_reentrancy_guard);
    QSIMPLEQ_INIT(&l->txq);
    pib_link_rx_reset(s);
    if (qemu_chr_fe_backend_connected(&l->chr)) {
        qemu_chr_fe_set_handlers(&l->chr, pib_link_can_receive,
                                 pib_link_receive, pib_link_event, NULL, s,
                                 NULL, true);
    }
}

void pib_link_unrealize(PibState *s)
{
    pib_link_purge(s);
    qemu_chr_fe_deinit(&s->link.chr, false);
    qemu_bh_delete(s->link.drop_bh);
    pib_link_rx_reset(s);
}

/* Last, after every frame went back to the free list. */
void pib_link_free_buffers(PibState *s)
{
    pib_packet_pool_free(s);
}
