/*
 * pib fabric - the link of a port (pib-link.h): receive, events, training
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The port's "cable" is a chardev, normally a socket shared with another
 * pib-hca or a pib-switch port (in this or another QEMU).  The same code runs
 * the HCA's one port and each port of the switch: the owner is reached only
 * through PibLinkOps (pib-link.h).  The byte stream carries frames
 * (include/pib_link.h): a 4-byte header and a payload.  The receive side is
 * an explicit state machine:
 *
 *   HDR -> PAYLOAD -> HDR ...; DISCARD once framing is lost (bad magic, type
 *   or length, malformed HELLO).  Losing framing drops the connection, from a
 *   bottom half, so the link retrains as a physical link that lost symbol
 *   lock would.
 *
 * The stream's events (connected, HELLO, closed) drive the owner's port
 * state machine (pib-port-sm.c; entered by hca/pib-port.c and
 * switch/pib-switch.c), which decides what may pass.
 *
 * Transmit never blocks the main loop: frames wait in a queue that is
 * drained with non-blocking writes, many frames per write (on the socket
 * read directly, one writev straight from the frame buffers; else a chardev
 * write of frames staged in one buffer); when the socket is full the queue
 * waits for G_IO_OUT, and requesters stop generating packets while it is
 * longer than PIB_TXQ_MAX (pib-link-tx.c).  A packet addressed to our own
 * LID does not touch the link at all: it goes straight to our receive queue
 * (loopback, pib_xmit() in hca/pib-hca-link.c), so two QPs of one HCA can
 * talk.
 *
 * PACKET frames go to the owner's receive queue; the HCA's (hca/pib-rx.c)
 * parses and dispatches
 * them as soon as the read callback has consumed its bytes.  While that
 * queue is full the link reads nothing, so a fast peer is slowed down by
 * the socket rather than by dropped packets.
 *
 * Receive has two paths into the same framing state machine:
 *
 *   direct    on a plain socket chardev (unix or TCP; not TLS, websocket or
 *             telnet), the default: the device reads the connected socket
 *             itself, up to PIB_LINK_RX_BATCH bytes per read and
 *             PIB_LINK_RX_PASS per main-loop pass, from an fd handler of the
 *             main loop's iohandler context.  The chardev still owns the
 *             socket: it connects, accepts, reconnects and reports OPENED and
 *             CLOSED; the device only reads between those two events, and its
 *             can_receive tells the chardev to read nothing meanwhile.
 *   chardev   any other backend, or link-direct=off: the chardev's read
 *             callback, at most CHR_READ_BUF_LEN (4 KiB) per main-loop pass.
 *
 * On either path, a packet that lies whole in the bytes read is handled right
 * there when its owner can (PibLinkOps.packet_bytes: the HCA, when no packet
 * waits ahead of it), without a copy into a frame buffer; the others are
 * copied into one and queued.
 *
 * The chardev path is bounded by the main loop's cost per pass: the socket
 * chardev's GSource is blocked and unblocked around each dispatch, which
 * costs GLib four eventfd writes, and one pass moved 4 KiB, less than one
 * full-MTU frame.  The iohandler context's source is recursive (never
 * blocked), and one direct read empties the socket.
 *
 * Doorbell (include/pib_link.h): on a unix socket read directly, both ends
 * trade eventfds in their HELLOs.  A write made from the vCPU thread (an idle
 * requester sending from its SQ doorbell: pib-sched.c, pib_qp_doorbell) is
 * rung around, START before and END after, and the peer does not poll its
 * socket between the two: the socket's wakeup of the peer, coming from that
 * busy thread, left it queued behind it.  The main loop's writes are not
 * rung.  Same bytes, same order; only the wakeup differs.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/main-loop.h"
#include "chardev/char-fe.h"
#include "chardev/char-socket.h"
#include "io/channel-socket.h"
#include <sys/eventfd.h>
#include <sys/uio.h>

#include "pib-fabric.h"
#include "../trace.h"

static const char *pib_frame_type_name(uint8_t type)
{
    switch (type) {
    case PIB_FRAME_HELLO:  return "HELLO";
    case PIB_FRAME_PACKET: return "PACKET";
    case PIB_FRAME_FLOW:   return "FLOW";
    case PIB_FRAME_MOVE:   return "MOVE";
    default:               return "UNKNOWN";
    }
}

static void pib_link_send_hello(PibLink *l)
{
    struct pib_link_hello h = {
        .version_be   = cpu_to_be32(PIB_LINK_PROTO_VERSION),
        .mtu_be       = cpu_to_be32(PIB_LINK_MAX_PAYLOAD),
        .node_guid_be = cpu_to_be64(l->node_guid),
        .port_guid_be = cpu_to_be64(l->port_guid),
        .flags_be     = cpu_to_be32((l->db_fd >= 0 ? PIB_HELLO_F_DOORBELL : 0) |
                                    pib_link_fc_flags(l)),
        .token_be     = cpu_to_be64(l->token),
    };
    PibPacket *p;

    if (l->rx_paused) {
        l->hello_deferred = true;   /* a stopped machine trains when it runs (a moved one */
        return;                     /* must not greet with the token it had before the load) */
    }
    l->hello_deferred = false;
    p = pib_link_packet_new(l, sizeof(h));
    p->data[1] = PIB_FRAME_HELLO;
    memcpy(pib_packet_ib(p), &h, sizeof(h));
    if (l->db_fd >= 0) {
        l->tx_db_hello = p;     /* pib_link_tx_writev sends db_fd with it */
    }
    trace_pib_link_tx(l->id, pib_frame_type_name(PIB_FRAME_HELLO),
                      sizeof(h));
    pib_link_enqueue(l, p);
    l->fc_offered = pib_link_fc_flags(l);
    l->fc_hello_tx = true;
    pib_link_fc_maybe_start(l);     /* if the peer's HELLO came first: credits after ours */
    pib_link_tx_flush(l);
}

/*
 * Receive
 */

static void pib_link_rx_reset(PibLink *l)
{

    if (l->rx_pkt) {
        pib_link_packet_free(l, l->rx_pkt);
        l->rx_pkt = NULL;
    }
    l->rx_state = PIB_RX_HDR;
    l->rx_got = 0;
    l->rx_len = 0;
    l->rx_head = 0;
    l->rx_tail = 0;
    l->rx_gen++;
}

/*
 * The stream lost framing: ignore everything until the connection is gone, take
 * the port down now, and drop the connection from a bottom half (never from
 * inside the chardev's own read callback).  The peer reconnects (a client
 * chardev needs reconnect=N) and the link retrains.
 */
static void pib_link_lose_framing(PibLink *l, const char *why, uint32_t val)
{
    trace_pib_link_bad_frame(l->id, why, val);
    l->bad_frames++;
    l->ops->framing_error(l);
    l->rx_state = PIB_RX_DISCARD;
    pib_link_move_abort(l);
    l->ops->event(l, PIB_PEV_STREAM_DOWN);
    qemu_bh_schedule(l->drop_bh);
}

static void pib_link_drop_bh(void *opaque)
{
    PibLink *l = opaque;

    trace_pib_link_drop(l->id);
    qemu_chr_fe_disconnect(&l->chr);
}

/*
 * Take the link down and let it train again (an SM's PortInfo Set: PortState DOWN, or a new
 * PortPhysicalState): the port is DOWN at once, the connection is dropped from a bottom half,
 * and the chardev's reconnect (ours or the peer's) brings the cable back.
 */
void pib_link_take_down(PibLink *l, const char *why)
{
    trace_pib_link_retrain(l->id, why);
    pib_link_move_abort(l);
    l->ops->event(l, PIB_PEV_STREAM_DOWN);
    if (l->stream_open) {
        l->rx_state = PIB_RX_DISCARD;
        qemu_bh_schedule(l->drop_bh);
    }
}

/*
 * Doorbell
 *
 * Both eventfds are shared with the peer's process, and so is every flag of
 * their file descriptions: the peer could make them blocking.  So ours is
 * read with RWF_NOWAIT, which never blocks whatever the flags say, and a
 * peer's is taken only from a process of our own user (SO_PEERCRED), which
 * could stop or trace us anyway: a write to an eventfd cannot be made
 * non-blocking per call, and one the peer keeps full and blocking would
 * otherwise hang the main loop.
 */

static void pib_link_db_close(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* Descriptors that came with bytes read: a HELLO may take the first, no other frame does. */
static void pib_link_rx_fds(PibLink *l, int *fds, size_t nfds)
{
    size_t i;

    for (i = 0; i < nfds; i++) {
        if (fds[i] >= 0 && l->rx_passed_fd < 0) {
            l->rx_passed_fd = fds[i];
        } else if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    g_free(fds);
}

/* Is fd an eventfd, and is the socket's peer a process of our user? */
static const char *pib_link_db_refuse(PibLink *l, int fd)
{
    char path[64], target[64];
    struct ucred cred;
    socklen_t len = sizeof(cred);
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, target, sizeof(target) - 1);
    if (n < 0) {
        return "cannot look at the descriptor";
    }
    target[n] = 0;
    if (strcmp(target, "anon_inode:[eventfd]")) {
        return "the descriptor is not an eventfd";
    }
    if (!l->rx_sioc ||
        getsockopt(l->rx_sioc->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) ||
        cred.uid != geteuid()) {
        return "the peer is not a process of our user";
    }
    return NULL;
}

/* The peer's HELLO came: take its doorbell if it offers one we can ring. */
static void pib_link_db_take(PibLink *l, bool offered)
{
    int fd = l->rx_passed_fd;
    const char *why;

    l->rx_passed_fd = -1;
    pib_link_db_close(&l->peer_db_fd);
    if (!offered || !l->doorbell) {
        pib_link_db_close(&fd);
        return;
    }
    why = fd < 0 ? "no descriptor came with it" : pib_link_db_refuse(l, fd);
    if (why) {
        trace_pib_link_doorbell(l->id, "peer's refused", why);
        pib_link_db_close(&fd);
        return;
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)) {
        pib_link_db_close(&fd);
        return;
    }
    l->peer_db_fd = fd;
    trace_pib_link_doorbell(l->id, "peer's taken",
                            "rung around writes from the vCPU thread");
}

/* ring: PIB_LINK_RING_START or PIB_LINK_RING_END.  Nothing without a peer's doorbell. */
void pib_link_ring_peer(PibLink *l, uint64_t ring)
{
    if (l->peer_db_fd < 0) {
        return;
    }
    /* EAGAIN: the counter is full, so the peer is due to look anyway. */
    if (write(l->peer_db_fd, &ring, sizeof(ring)) < 0 && errno != EAGAIN) {
        trace_pib_link_doorbell(l->id, "peer's dropped", strerror(errno));
        pib_link_db_close(&l->peer_db_fd);
        return;
    }
    l->db_rings_tx++;
}

static void pib_link_rx_direct(void *opaque);

/* Has the peer announced a write it has not ended?  Then our socket is not polled. */
static bool pib_link_db_announced(const PibLink *l)
{
    return l->db_starts != l->db_ends;
}

/*
 * Ours was rung: the peer is about to write, or has written, from a busy
 * thread.  Count the STARTs and ENDs: while a write is announced and not
 * ended, the socket is not polled (its wakeup would come from that thread)
 * and its END calls here again.  Either way, read what is there now.  The
 * counts are the peer's word only: a peer that never ENDs gets its bytes
 * read when it rings, and nothing else changes.
 */
static void pib_link_db_rung(void *opaque)
{
    PibLink *l = opaque;
    struct iovec iov;
    uint64_t count;
    bool was;

    iov.iov_base = &count;
    iov.iov_len = sizeof(count);
    if (preadv2(l->db_fd, &iov, 1, -1, RWF_NOWAIT) != sizeof(count) ||
        !l->rx_sioc) {
        return;
    }
    l->db_rings_rx++;
    was = pib_link_db_announced(l);
    l->db_starts += (uint32_t)count;            /* STARTs: the low half */
    l->db_ends += (uint32_t)(count >> 32);      /* ENDs: the high half */
    trace_pib_link_db_rung(l->id, count, l->db_starts - l->db_ends);
    if (pib_link_db_announced(l) != was && !l->rx_paused) {
        qemu_set_fd_handler(l->rx_fd, was ? pib_link_rx_direct : NULL, NULL, l);
    }
    pib_link_rx_direct(l);
}

/* A new stream on a unix socket read directly: a new doorbell to offer in our HELLO. */
static void pib_link_db_start(PibLink *l)
{
    if (!l->doorbell || !l->rx_fdpass) {
        return;
    }
    l->db_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->db_fd < 0 || l->rx_paused) {
        return;                 /* (paused: pib_link_rx_pause() sets the handler) */
    }
    qemu_set_fd_handler(l->db_fd, pib_link_db_rung, NULL, l);
}

static void pib_link_db_stop(PibLink *l)
{
    if (l->db_fd >= 0) {
        qemu_set_fd_handler(l->db_fd, NULL, NULL, NULL);
        pib_link_db_close(&l->db_fd);
    }
    l->db_starts = l->db_ends = 0;     /* (the socket's handler is gone already) */
    l->tx_db_hello = NULL;
    pib_link_db_close(&l->peer_db_fd);
    pib_link_db_close(&l->rx_passed_fd);
}

static void pib_link_rx_hello(PibLink *l)
{
    struct pib_link_hello h = { 0 };
    uint32_t version;

    if (l->rx_len < PIB_LINK_HELLO_MIN_LEN) {
        pib_link_lose_framing(l, "short HELLO", l->rx_len);
        return;
    }
    /* A longer HELLO comes from a newer peer: the extra bytes are ignored. */
    memcpy(&h, l->rx_buf, MIN(l->rx_len, sizeof(h)));
    version = be32_to_cpu(h.version_be);
    if (version != PIB_LINK_PROTO_VERSION) {
        pib_link_lose_framing(l, "HELLO version", version);
        return;
    }
    l->peer_node_guid = be64_to_cpu(h.node_guid_be);
    l->peer_port_guid = be64_to_cpu(h.port_guid_be);
    l->peer_token = be64_to_cpu(h.token_be);       /* 0 from a 32-byte HELLO: none */
    trace_pib_link_hello(l->id, l->peer_node_guid, l->peer_port_guid,
                         version, be32_to_cpu(h.mtu_be));
    pib_link_db_take(l, be32_to_cpu(h.flags_be) & PIB_HELLO_F_DOORBELL);
    /*
     * Credits run once both sides offered them; our FLOW frame must follow our own HELLO, so
     * a port that has not sent its HELLO yet (DISABLED) starts them when it does.
     */
    l->fc_peer = be32_to_cpu(h.flags_be);
    l->fc_hello_rx = true;
    pib_link_fc_maybe_start(l);
    if (!pib_link_move_hello(l)) {
        /* Not the port we held ours for: the retraining the owner did not hear, now. */
        l->ops->event(l, PIB_PEV_STREAM_DOWN);
        l->ops->event(l, PIB_PEV_STREAM_UP);
    }
    l->ops->event(l, PIB_PEV_HELLO);
}

/*
 * A PACKET frame whose header was just checked lies whole in buf: offer it to
 * the owner in place (PibLinkOps.packet_bytes).  True if taken.
 */
static bool pib_link_rx_in_place(PibLink *l, const uint8_t *buf, uint32_t avail)
{
    if (l->rx_hdr.type != PIB_FRAME_PACKET || avail < l->rx_len || !l->ops->packet_bytes) {
        return false;
    }
    if (pib_link_fc_rx_room(l, buf, l->rx_len)) {
        if (!l->ops->packet_bytes(l, buf, l->rx_len)) {
            return false;
        }
        pib_link_fc_rx_take(l, buf, l->rx_len, NULL);
        l->rx_in_place++;
    }   /* else dropped: beyond the peer's credits (counted) */
    l->frames_rx++;
    trace_pib_link_rx(l->id, "PACKET (in place)", l->rx_len);
    l->rx_state = PIB_RX_HDR;
    l->rx_got = 0;
    return true;
}

/* A whole frame is in rx_hdr/rx_buf. */
static void pib_link_rx_frame(PibLink *l)
{

    l->frames_rx++;
    trace_pib_link_rx(l->id, pib_frame_type_name(l->rx_hdr.type),
                      l->rx_len);
    /*
     * Ready for the next frame; rx_len stays valid for the handlers below,
     * which may still move to DISCARD.
     */
    l->rx_state = PIB_RX_HDR;
    l->rx_got = 0;

    switch (l->rx_hdr.type) {
    case PIB_FRAME_HELLO:
        pib_link_rx_hello(l);
        break;
    case PIB_FRAME_PACKET: {
        PibPacket *p = l->rx_pkt;

        l->rx_pkt = NULL;
        if (!pib_link_fc_rx_room(l, pib_packet_ib(p), l->rx_len)) {
            pib_link_packet_free(l, p);     /* beyond the peer's credits (counted) */
            break;
        }
        /* Handled at once if the owner can (as in place), else queued. */
        if (l->ops->packet_bytes &&
            l->ops->packet_bytes(l, pib_packet_ib(p), l->rx_len)) {
            pib_link_fc_rx_take(l, pib_packet_ib(p), l->rx_len, NULL);
            l->rx_in_place++;
            pib_link_packet_free(l, p);
        } else {
            pib_link_fc_rx_take(l, pib_packet_ib(p), l->rx_len, p);
            l->ops->packet(l, p);
        }
        break;
    }
    case PIB_FRAME_FLOW:
        pib_link_fc_rx_flow(l, l->rx_buf, l->rx_len);
        break;
    case PIB_FRAME_MOVE:
        pib_link_move_rx(l, l->rx_buf, l->rx_len);
        break;
    default:
        break;      /* unreachable: the header check admits only the above */
    }
}

/* A whole header is in rx_hdr: check it before trusting its length. */
static bool pib_link_rx_check_hdr(PibLink *l)
{
    const struct pib_link_hdr *h = &l->rx_hdr;
    uint16_t len = be16_to_cpu(h->length_be);

    if (h->magic != PIB_LINK_MAGIC) {
        pib_link_lose_framing(l, "bad magic", h->magic);
        return false;
    }
    if (h->type != PIB_FRAME_HELLO && h->type != PIB_FRAME_PACKET &&
        h->type != PIB_FRAME_FLOW && h->type != PIB_FRAME_MOVE) {
        pib_link_lose_framing(l, "unknown frame type", h->type);
        return false;
    }
    if (h->type == PIB_FRAME_MOVE && len != sizeof(struct pib_link_move)) {
        pib_link_lose_framing(l, "MOVE frame length", len);
        return false;
    }
    if (h->type == PIB_FRAME_FLOW &&
        (len == 0 || len % sizeof(struct pib_link_fc) ||
         len > PIB_LINK_DATA_VLS * sizeof(struct pib_link_fc))) {
        pib_link_lose_framing(l, "FLOW frame length", len);
        return false;
    }
    if (len > PIB_LINK_MAX_PAYLOAD) {
        pib_link_lose_framing(l, "oversized frame", len);
        return false;
    }
    return true;
}

/* Take exactly what the current piece (header or payload) still needs. */
static int pib_link_can_receive(void *opaque)
{
    PibLink *l = opaque;

    if (l->rx_sioc || l->rx_paused) {
        return 0;               /* the device reads the socket itself, or nothing now */
    }
    /* Backpressure: read on once pib_rx_run() made room. */
    if (l->rx_state != PIB_RX_DISCARD && l->ops->rx_backlog(l) >= PIB_RXQ_MAX) {
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
 * Feed bytes through the framing state machine, and return how many it took.
 * Frames arrive split or merged arbitrarily; every pass of the loop consumes
 * at least one byte, so it ends within `size` passes.  It stops early once a
 * frame completed with max_queued packets waiting in the receive queue (the
 * caller dispatches them, then feeds the rest), or when the stream was reset
 * under it (a HELLO's port event can transmit, and a write that finds the
 * peer gone closes the stream at once): the bytes left belong to a
 * connection that is gone.  A packet that lies whole in buf may be handled
 * in place (pib_link_rx_in_place: no copy; counted with the queued ones
 * against max_queued); the others are only queued.  Either way the framing
 * state is back at HDR before anything the packet causes runs.
 */
static uint32_t pib_link_rx_feed(PibLink *l, const uint8_t *buf,
                                 uint32_t size, uint32_t max_queued)
{
    uint32_t gen = l->rx_gen;
    uint32_t off = 0, n;
    bool frame;

    while (off < size) {
        frame = false;
        switch (l->rx_state) {
        case PIB_RX_HDR:
            n = MIN(size - off, PIB_LINK_HDR_LEN - l->rx_got);
            memcpy((uint8_t *)&l->rx_hdr + l->rx_got, buf + off, n);
            off += n;
            l->rx_got += n;
            if (l->rx_got < PIB_LINK_HDR_LEN || !pib_link_rx_check_hdr(l)) {
                break;
            }
            l->rx_len = be16_to_cpu(l->rx_hdr.length_be);
            l->rx_got = 0;
            l->rx_state = PIB_RX_PAYLOAD;
            if (pib_link_rx_in_place(l, buf + off, size - off)) {
                off += l->rx_len;
                frame = true;
                break;
            }
            /* Else a packet's payload goes straight into its frame buffer. */
            if (l->rx_hdr.type == PIB_FRAME_PACKET) {
                l->rx_pkt = pib_link_packet_new(l, l->rx_len);
            }
            if (l->rx_len == 0) {
                pib_link_rx_frame(l);
                frame = true;
            }
            break;
        case PIB_RX_PAYLOAD:
            n = MIN(size - off, l->rx_len - l->rx_got);
            memcpy((l->rx_pkt ? pib_packet_ib(l->rx_pkt) : l->rx_buf) +
                   l->rx_got, buf + off, n);
            off += n;
            l->rx_got += n;
            if (l->rx_got == l->rx_len) {
                pib_link_rx_frame(l);
                frame = true;
            }
            break;
        default:
            off = size;         /* DISCARD */
            break;
        }
        if (l->rx_gen != gen) {
            return size;        /* reset: the rest is of a dead stream */
        }
        if (frame && l->ops->rx_backlog(l) + l->rx_in_place >= max_queued) {
            break;
        }
    }
    return off;
}

/* Have the owner handle what the feed queued or took in place. */
static void pib_link_rx_run(PibLink *l)
{
    if (l->ops->rx_backlog(l) || l->rx_in_place) {
        l->rx_in_place = 0;
        l->ops->rx_run(l);
    }
}

/*
 * The chardev's read callback (the chardev path).  A socket chardev hands
 * over at most CHR_READ_BUF_LEN (4 KiB) per main-loop pass, less than one
 * full-MTU frame, and can_receive bounds it by the receive queue's room.
 */
static void pib_link_receive(void *opaque, const uint8_t *buf, int size)
{
    PibLink *l = opaque;

    pib_link_rx_feed(l, buf, size, UINT32_MAX);
    pib_link_rx_run(l);
}

/*
 * Direct receive
 */

/*
 * The chardev's connected socket, if the device may read it directly: a
 * socket chardev whose channel is the socket itself.  TLS and websocket wrap
 * it in another channel, telnet interprets bytes: those go through the
 * chardev's own reads.
 */
static QIOChannelSocket *pib_link_direct_socket(PibLink *l)
{
    /*
     * The chardev of this stream, looked up now: chardev-change may replace it between
     * streams (pib_link_be_change), so it is never kept.  (qemu_chr_fe_get_driver() refuses
     * a frontend that takes changes, for those that would keep it.)
     */
    Chardev *chr = l->chr.chr;
    SocketChardev *sc;

    if (!l->direct || !chr ||
        !object_dynamic_cast(OBJECT(chr), TYPE_CHARDEV_SOCKET)) {
        return NULL;
    }
    sc = SOCKET_CHARDEV(chr);
    if (sc->state != TCP_CHARDEV_STATE_CONNECTED || !sc->sioc ||
        sc->ioc != QIO_CHANNEL(sc->sioc) || sc->do_telnetopt) {
        return NULL;
    }
    return sc->sioc;
}

/*
 * A unix socket's send buffer: a full requester window, not Linux's default
 * 208 KiB (PIB_LINK_SNDBUF says why).  As root SO_SNDBUFFORCE passes over
 * net.core.wmem_max; else SO_SNDBUF is capped by it.  A TCP socket keeps
 * its own autotuning, which a fixed size would turn off.
 */
static void pib_link_set_sndbuf(PibLink *l, int fd)
{
    int asked = MIN(l->sndbuf, INT_MAX / 2), got = -1;
    socklen_t len = sizeof(got);

    if (!asked) {
        return;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &asked, sizeof(asked))) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &asked, sizeof(asked));
    }
    getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &got, &len);
    trace_pib_link_sndbuf(l->id, asked, got);
}

/*
 * Start reading the socket directly (the stream opened).  The handler is
 * removed by the descriptor it was added on, kept in rx_fd: by the time the
 * chardev reports CLOSED it may have closed the socket already (QEMU 10's
 * tcp_chr_free_connection() does, whatever references remain), and its fd
 * then reads -1.  A handler left on the old number would outlive the
 * connection; once the reconnect's socket took that number and the peer's
 * HELLO arrived, the handler (which reads nothing without rx_sioc) kept the
 * main loop's iohandler source ready on every pass, and GLib never ran the
 * lower-priority completion of the chardev's connect: the link stayed down.
 */
static void pib_link_direct_start(PibLink *l)
{
    QIOChannelSocket *sioc = pib_link_direct_socket(l);

    if (!sioc) {
        trace_pib_link_rx_path(l->id, "chardev");
        return;
    }
    if (!l->rx_batch) {
        l->rx_batch = g_malloc(PIB_LINK_RX_BATCH);
    }
    object_ref(OBJECT(sioc));
    l->rx_sioc = sioc;
    l->rx_fd = sioc->fd;
    l->rx_fdpass = qio_channel_has_feature(QIO_CHANNEL(sioc),
                                           QIO_CHANNEL_FEATURE_FD_PASS);
    if (l->rx_fdpass) {
        pib_link_set_sndbuf(l, l->rx_fd);       /* FD_PASS: a unix socket */
    }
    if (!l->rx_paused) {
        qemu_set_fd_handler(l->rx_fd, pib_link_rx_direct, NULL, l);
    }
    pib_link_db_start(l);
    trace_pib_link_rx_path(l->id, l->db_fd >= 0 ? "direct, doorbell offered"
                                                : "direct");
}

void pib_link_direct_stop(PibLink *l)
{

    if (!l->rx_sioc) {
        return;
    }
    qemu_set_fd_handler(l->rx_fd, NULL, NULL, NULL);
    pib_link_db_stop(l);
    object_unref(OBJECT(l->rx_sioc));
    l->rx_sioc = NULL;
    l->rx_fd = -1;
    qemu_bh_cancel(l->rx_more_bh);
}

/*
 * The stream opened (up) or closed (!up) while the owner's machine is stopped: the owner hears
 * it when the machine runs (pib_link_rx_pause).  A machine that never runs again, the source of
 * a completed migration, never hears it: its ports change no state and send no trap.
 */
static void pib_link_stream_defer(PibLink *l, bool up)
{
    trace_pib_link_event(l->id, up ? "opened while stopped: the port hears it at the resume"
                                   : "closed while stopped: the port hears it at the resume");
    l->stream_deferred = true;
    l->down_deferred |= !up;
}

/*
 * The machine runs: what the cable did meanwhile, as one retraining: STREAM_DOWN if it closed,
 * STREAM_UP if a stream is open now.  A port that a migration stream loaded and that waits for
 * its old peer (recovering) hears nothing: the load replaced what it had, and the peer's HELLO
 * decides (pib-link-move.c).
 */
static void pib_link_stream_replay(PibLink *l)
{
    bool down = l->down_deferred;

    if (!l->stream_deferred) {
        return;
    }
    l->stream_deferred = l->down_deferred = false;
    if (l->recovering) {
        return;
    }
    if (down) {
        l->ops->event(l, PIB_PEV_STREAM_DOWN);
    }
    if (l->stream_open) {
        l->ops->event(l, PIB_PEV_STREAM_UP);
    }
}

/*
 * The owner's machine stopped (paused) or runs again.  While it is stopped nothing is read:
 * neither socket nor doorbell has a handler and can_receive says 0, so the peer's frames wait
 * in the socket (and behind it, in the peer's transmit queue) instead of reaching an owner that
 * may not write guest memory now: a stopped guest may be in the middle of being migrated.
 * Writing goes on: what the owner queued before it stopped still leaves.  The stream's opening
 * and closing wait too (pib_link_stream_defer).
 */
void pib_link_rx_pause(PibLink *l, bool paused)
{
    if (l->rx_paused == paused) {
        return;
    }
    l->rx_paused = paused;
    trace_pib_link_event(l->id, paused ? "receive paused" : "receive resumed");
    if (paused) {
        if (l->rx_sioc) {
            qemu_set_fd_handler(l->rx_fd, NULL, NULL, NULL);
            qemu_bh_cancel(l->rx_more_bh);
        }
        if (l->db_fd >= 0) {
            qemu_set_fd_handler(l->db_fd, NULL, NULL, NULL);
        }
        return;
    }
    pib_link_stream_replay(l);
    if (l->hello_deferred && l->stream_open && l->ops->may_train(l)) {
        pib_link_send_hello(l);
    }
    if (l->db_fd >= 0) {
        qemu_set_fd_handler(l->db_fd, pib_link_db_rung, NULL, l);
    }
    if (l->rx_sioc) {
        if (!pib_link_db_announced(l)) {
            qemu_set_fd_handler(l->rx_fd, pib_link_rx_direct, NULL, l);
        }
        qemu_bh_schedule(l->rx_more_bh);        /* what came meanwhile, and what is left */
    } else if (qemu_chr_fe_backend_connected(&l->chr)) {
        qemu_chr_fe_accept_input(&l->chr);
    }
}

/*
 * The socket is readable (fd handler), or bytes read before are left
 * (rx_more_bh).  Read and frame until the socket is empty or this pass took
 * PIB_LINK_RX_PASS bytes; packets are dispatched PIB_RX_BUDGET at a time
 * (pib_rx_run), so the receive queue stays bounded however many frames one
 * read holds.  A read shorter than asked for emptied the socket: no second
 * read only to learn EAGAIN.  End of stream or an error: the chardev drops
 * the connection (from a bottom half) and reports CLOSED.
 */
static void pib_link_rx_direct(void *opaque)
{
    PibLink *l = opaque;
    uint32_t gen = l->rx_gen, taken = 0;
    bool drained = false;
    struct iovec iov = { .iov_base = l->rx_batch, .iov_len = PIB_LINK_RX_BATCH };
    int *fds;
    size_t nfds;
    ssize_t n;

    if (l->rx_paused) {
        return;                 /* (rx_more_bh, or a ring read before the pause) */
    }
    while (l->rx_sioc) {
        if (l->rx_head == l->rx_tail) {
            if (drained || taken >= PIB_LINK_RX_PASS) {
                if (!drained && pib_link_db_announced(l)) {
                    qemu_bh_schedule(l->rx_more_bh);    /* no poll calls again */
                }
                return;         /* a readable socket (or a ring) calls again */
            }
            /*
             * On a unix socket descriptors may come with the bytes (a
             * HELLO's doorbell); asking for them on any other socket is
             * an error.
             */
            fds = NULL;
            nfds = 0;
            n = pib_qio_channel_readv_full(QIO_CHANNEL(l->rx_sioc), &iov, 1,
                                           l->rx_fdpass ? &fds : NULL,
                                           l->rx_fdpass ? &nfds : NULL, NULL);
            pib_link_rx_fds(l, fds, nfds);
            if (n == QIO_CHANNEL_ERR_BLOCK) {
                return;
            }
            if (n <= 0) {
                trace_pib_link_event(l->id, n ? "read error" : "EOF");
                pib_link_direct_stop(l);
                qemu_bh_schedule(l->drop_bh);
                return;
            }
            l->rx_reads++;
            l->rx_head = 0;
            l->rx_tail = n;
            taken += n;
            drained = n < PIB_LINK_RX_BATCH;
        }
        l->rx_head += pib_link_rx_feed(l, l->rx_batch + l->rx_head,
                                       l->rx_tail - l->rx_head,
                                       PIB_RX_BUDGET);
        /* Also after a reset: what was taken in place still wants its engines run. */
        pib_link_rx_run(l);     /* may close the stream: checked below */
        if (l->rx_gen != gen) {
            return;             /* the stream was reset under the feed */
        }
        if (l->rx_head != l->rx_tail && l->ops->rx_backlog(l) >= PIB_RX_BUDGET) {
            /* The queue did not drain (loopback traffic): next pass. */
            qemu_bh_schedule(l->rx_more_bh);
            return;
        }
    }
}

static void pib_link_event(void *opaque, QEMUChrEvent event)
{
    PibLink *l = opaque;

    switch (event) {
    case CHR_EVENT_OPENED:
        trace_pib_link_event(l->id, "opened");
        l->stream_open = true;
        pib_link_direct_stop(l);        /* (a stream never seen closing) */
        pib_link_rx_reset(l);
        pib_link_fc_reset(l);
        pib_link_direct_start(l);
        if (l->rx_paused) {
            pib_link_stream_defer(l, true);
        } else if (!pib_link_move_opened(l)) {
            l->ops->event(l, PIB_PEV_STREAM_UP);
        }
        if (l->ops->may_train(l)) {
            pib_link_send_hello(l);     /* a DISABLED port does not train */
        }
        break;
    case CHR_EVENT_CLOSED:
        trace_pib_link_event(l->id, "closed");
        l->stream_open = false;
        pib_link_direct_stop(l);
        qemu_bh_cancel(l->drop_bh);
        if (!l->tx_draining) {
            pib_link_tx_purge(l);  /* else the drain loop does it */
        }
        pib_link_rx_reset(l);
        pib_link_fc_reset(l);
        l->hello_deferred = false;
        if (pib_link_move_closed(l)) {
            break;              /* a noticed move: the port holds its state */
        }
        if (l->rx_paused) {
            pib_link_stream_defer(l, false);
        } else {
            l->ops->event(l, PIB_PEV_STREAM_DOWN);
        }
        break;
    default:
        break;
    }
}

/*
 * Glue
 */

void pib_link_init(PibLink *l, const PibLinkOps *ops, void *opaque,
                   MemReentrancyGuard *guard)
{
    l->ops = ops;
    l->opaque = opaque;
    l->db_fd = l->peer_db_fd = l->rx_passed_fd = -1;
    l->drop_bh = qemu_bh_new_guarded(pib_link_drop_bh, l, guard);
    l->rx_more_bh = qemu_bh_new_guarded(pib_link_rx_direct, l, guard);
    QSIMPLEQ_INIT(&l->txq);
    QSIMPLEQ_INIT(&l->pool);
    pib_link_fc_init(l);
    pib_link_move_init(l);
    pib_link_rx_reset(l);
}

/*
 * QMP's chardev-change gave the link a new chardev (a new cable): the old one's stream, if it
 * had one, was reported CLOSED already.  Take the new one's events from now on.  pibvm uses it
 * to redial at once a peer that moved (tools/pibvmlib/migrate.py).
 */
static int pib_link_be_change(void *opaque)
{
    PibLink *l = opaque;

    trace_pib_link_event(l->id, "changed to another chardev");
    pib_link_attach(l);
    return 0;
}

void pib_link_attach(PibLink *l)
{
    if (qemu_chr_fe_backend_connected(&l->chr)) {
        qemu_chr_fe_set_handlers(&l->chr, pib_link_can_receive,
                                 pib_link_receive, pib_link_event, pib_link_be_change, l,
                                 NULL, true);
    }
}

/* The owner goes away: the cable is let go, and every buffer with it. */
void pib_link_fini(PibLink *l)
{
    pib_link_tx_purge(l);
    pib_link_direct_stop(l);
    qemu_chr_fe_deinit(&l->chr, false);
    qemu_bh_delete(l->drop_bh);
    qemu_bh_delete(l->rx_more_bh);
    pib_link_fc_fini(l);
    pib_link_move_fini(l);
    pib_link_rx_reset(l);
    g_free(l->rx_batch);
    l->rx_batch = NULL;
}
