/*
 * pib fabric - the link of one port (pib-link.c, pib-link-tx.c), for the HCA and the switch
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A PibLink is one port's cable: a chardev carrying the frames of include/pib_link.h, the
 * receive framing state machine, the non-blocking transmit queue and the free list of frame
 * buffers.  It knows nothing of what is behind the port.  Its owner (the HCA,
 * hca/pib-hca-link.c; or one port of the switch, switch/pib-switch.c) gets the stream's
 * events and the received packets through PibLinkOps, and says through them how many
 * received packets still wait (the link stops reading while that backlog is full).
 */
#ifndef HW_PIB_LINK_H
#define HW_PIB_LINK_H

#include "qemu/queue.h"
#include "qapi/qapi-types-common.h"    /* OnOffAuto */
#include "../pib-compat.h"      /* CharFrontend */
#include "../include/pib_link.h"
#include "pib-port-sm.h"        /* the events the link reports */

/*
 * Link queues, in packets.  The requester stops when its queue is this full;
 * responses (ACKs, READ responses) are dropped beyond twice as much, which
 * RC recovers from, so that a peer that sends but never reads cannot make
 * the queues grow without bound.
 */
#define PIB_TXQ_MAX             256
#define PIB_RXQ_MAX             256
#define PIB_QUEUE_HARD_MAX      (2 * PIB_TXQ_MAX)
/* Free frame buffers kept for reuse (each holds the largest frame). */
#define PIB_PACKET_POOL_MAX     256
/* Bytes of whole frames one chardev write carries at most. */
#define PIB_LINK_TX_BATCH       (64 * 1024)
/*
 * Direct transmit (pib-link.c): frames one writev of the link's socket takes
 * at most, straight from their buffers (64 full-MTU frames: 256 KiB).
 */
#define PIB_LINK_TX_IOV         64
/*
 * Direct receive (pib-link.c): bytes one read of the link's socket takes at
 * most, and bytes the device takes from the socket in one main-loop pass.
 */
#define PIB_LINK_RX_BATCH       (256 * 1024)
#define PIB_LINK_RX_PASS        (256 * 1024)
/*
 * The send buffer asked of a unix link socket (property link-sndbuf): about
 * one requester window (PIB_SQ_WINDOW, 256 full-MTU packets), so that the
 * sender can hand the kernel a whole window and sleep while the peer reads
 * it, instead of refilling a socket of Linux's default 208 KiB four times a
 * window, with a wakeup on each side every time.  The kernel doubles what it
 * grants, for its own bookkeeping.  docs/reference/hardware.md, "Link socket buffer",
 * has the measurements.
 */
#define PIB_LINK_SNDBUF         (1024 * 1024)
/* Received packets dispatched per run of the owner's rx_run. */
#define PIB_RX_BUDGET           64

/* Receive side of the link framing: a header, then `length` payload bytes. */
typedef enum PibLinkRxState {
    PIB_RX_HDR,             /* collecting the 4-byte struct pib_link_hdr */
    PIB_RX_PAYLOAD,         /* collecting the payload the header announced */
    PIB_RX_DISCARD,         /* framing lost: ignore bytes until disconnect */
    PIB_RX__MAX
} PibLinkRxState;

/*
 * One link frame in a queue: the 4-byte link header, then the IB packet (LRH
 * onwards).  The same buffer travels from the requester to the transmit queue
 * and, for a packet to our own LID, straight to the receive queue; in a switch
 * from one port's receive side to another port's transmit queue.
 */
typedef struct PibLink PibLink;
typedef struct PibMgmtPort PibMgmtPort;

typedef struct PibPacket {
    QSIMPLEQ_ENTRY(PibPacket) next;
    PibLink *fc_link;       /* (credits, below) */
    int64_t fc_head_since;  /* transmit: at the head of its VL's queue since (virtual ns) */
    uint32_t len;           /* bytes in data[]: header + IB packet */
    /*
     * Credits (pib-link-fc.c): a data packet received on a flow-controlled link holds
     * fc_blocks of that link's buffer on VL fc_vl until the buffer is freed
     * (pib_packet_release); fc_gen is the link's receive generation then, so a packet from a
     * stream that has since gone returns nothing to the new one.  fc_link NULL: none held.
     */
    uint32_t fc_gen;
    uint16_t fc_blocks;
    uint8_t fc_vl;
    uint8_t rsvd;
    uint8_t data[];         /* room for the largest frame */
} PibPacket;
/* The IB packet (data + 4) starts 8-byte aligned, so its headers' fields are aligned too. */
QEMU_BUILD_BUG_ON(offsetof(PibPacket, data) % 8 != 4);

static inline uint8_t *pib_packet_ib(PibPacket *p)
{
    return p->data + PIB_LINK_HDR_LEN;
}

static inline uint32_t pib_packet_ib_len(const PibPacket *p)
{
    return p->len - PIB_LINK_HDR_LEN;
}

typedef QSIMPLEQ_HEAD(, PibPacket) PibPacketQueue;

/*
 * Transmit frames in flight to the link while credits run (pib-link-fc.c): only this many wait
 * in the transmit FIFO itself, the rest in their VL's queue, so that a VL whose credits ran out
 * does not hold up the others behind it, and VL arbitration picks the order of all but these.
 */
#define PIB_LINK_FC_READY       16

/* One data VL of a flow-controlled link: its transmitter's and its receiver's credit state. */
typedef struct PibLinkVl {
    PibPacketQueue q;       /* transmit: data packets waiting for credits */
    uint32_t qlen;
    uint16_t fctbs;         /* transmit: blocks sent, modulo 4096 */
    uint16_t fccl;          /* transmit: the peer's credit limit, modulo 4096 */
    uint16_t abr;           /* receive: adjusted blocks received, modulo 4096 */
    uint16_t held;          /* receive: blocks of our buffer in use */
    uint16_t fccl_sent;     /* receive: the credit limit our last FLOW frame granted */
    uint8_t hoq_drops;      /* transmit: HOQ discards since the VL last sent (VLStallCount) */
    int64_t stalled_until;  /* transmit: VLStalled until then (virtual ns); 0: not stalled */
} PibLinkVl;

/* What the link asks of its owner. */
typedef struct PibLinkOps {
    /* The stream opened (STREAM_UP), closed or lost framing (STREAM_DOWN), or HELLO came. */
    void (*event)(PibLink *l, PibPortSmEvent ev);
    /* May the port train now (send HELLO)?  Not while PortPhysicalState is DISABLED. */
    bool (*may_train)(PibLink *l);
    /* A PACKET frame arrived: the owner takes the buffer (queue it, forward it, free it). */
    void (*packet)(PibLink *l, PibPacket *p);
    /*
     * Optional: a PACKET frame whose IB packet (len bytes at ib) is whole, in the link's read
     * buffer or (a frame split across two reads) in the frame buffer it was gathered in.  The
     * owner may handle it right there and return true: no copy, no queueing; the bytes are
     * the link's again once it returns.  False: the link gives it to packet() in a PibPacket
     * (copied, if it was in the read buffer).  rx_run() follows, as for queued packets.
     */
    bool (*packet_bytes)(PibLink *l, const uint8_t *ib, uint32_t len);
    /* Packets received and not handled yet: the link stops reading at PIB_RXQ_MAX. */
    uint32_t (*rx_backlog)(PibLink *l);
    /* Handle the received packets now (after a read's frames were fed). */
    void (*rx_run)(PibLink *l);
    /* The transmit queue has room again (drained below half, or purged). */
    void (*tx_room)(PibLink *l);
    /* Optional: a data packet came with no buffer left on its VL (dropped, to be counted). */
    void (*fc_overrun)(PibLink *l, uint8_t vl);
    /* Optional (with hoq): a packet waited at its VL queue's head past HOQLife, discarded. */
    void (*fc_hoq_discard)(PibLink *l, uint8_t vl);
    /* Framing was lost: a counted link error. */
    void (*framing_error)(PibLink *l);
    /* Optional: the stream dropped and the same port came back in time (pib-link-move.c). */
    void (*recovered)(PibLink *l);
} PibLinkOps;

struct PibLink {
    const PibLinkOps *ops;
    void *opaque;           /* the owner */
    uint64_t id;            /* in traces: the node GUID (a switch: + the port number) */
    uint64_t node_guid;     /* what our HELLO says */
    uint64_t port_guid;

    CharFrontend chr;
    bool stream_open;       /* CHR_EVENT_OPENED seen, CLOSED not yet */
    QEMUBH *drop_bh;        /* disconnects outside the chardev callbacks */

    /*
     * Direct receive: on a plain socket chardev the link reads the
     * connected socket itself, PIB_LINK_RX_BATCH bytes at a time, from its
     * own fd handler; the chardev keeps connecting, reconnecting and
     * reporting the stream's events (pib-link.c, "Direct receive").
     */
    bool direct;            /* property link-direct: use it where possible */
    uint32_t sndbuf;        /* property link-sndbuf: asked of a unix socket; 0 leaves it */
    struct QIOChannelSocket *rx_sioc;   /* the socket read directly, or NULL */
    int rx_fd;              /* the descriptor our fd handler is on, while rx_sioc */
    QEMUBH *rx_more_bh;     /* bytes are left in rx_batch: go on next pass */
    uint8_t *rx_batch;      /* PIB_LINK_RX_BATCH bytes read, not yet framed */
    uint32_t rx_head;       /* rx_batch[rx_head, rx_tail) waits for framing */
    uint32_t rx_tail;
    uint32_t rx_gen;        /* bumped by every reset of the receive side */
    uint32_t rx_in_place;   /* frames packet_bytes() took since the last rx_run() */
    /*
     * The owner's machine is stopped (pib_link_rx_pause): nothing is read, so no packet reaches
     * an owner that must not touch guest memory now; the peer's bytes wait in the socket.
     * Nor does the owner hear its cable open or close: a stopped machine's port changes no
     * state and sends nothing (no trap), as its firmware does not run.  What the cable did is
     * kept, and the owner hears it when the machine runs (pib_link_rx_pause(l, false)).
     */
    bool rx_paused;
    bool stream_deferred;   /* the stream opened or closed while paused */
    bool down_deferred;     /* it closed, and no MOVE notice covered it */

    /*
     * The doorbell (include/pib_link.h; pib-link.c, "Doorbell"): on a unix
     * socket read directly, our HELLO carries an eventfd the peer rings
     * around writes from its vCPU thread, and the peer's HELLO may carry one
     * we ring around ours.
     */
    bool doorbell;          /* property link-doorbell: offer and accept one */
    int db_fd;              /* ours, while offered on this stream; -1 none */
    uint32_t db_starts;     /* PIB_LINK_RING_STARTs and ENDs read from it, modulo */
    uint32_t db_ends;       /* 2^32; while they differ, the socket has no fd handler */
    int peer_db_fd;         /* the peer's, rung around writes from the vCPU thread; -1 none */
    bool rx_fdpass;         /* the socket passes descriptors (unix): reads ask for them */
    int rx_passed_fd;       /* a descriptor that came with bytes read, until a HELLO takes it */
    PibPacket *tx_db_hello; /* our HELLO, queued (so db_fd >= 0): db_fd goes with its first byte */

    PibLinkRxState rx_state;
    bool rx_throttled;      /* can_receive said 0: accept_input when room */
    struct pib_link_hdr rx_hdr;
    uint32_t rx_got;        /* bytes of the header or payload so far */
    uint32_t rx_len;        /* payload length from the header */
    PibPacket *rx_pkt;      /* a PACKET frame's payload lands here, */
    uint8_t rx_buf[PIB_LINK_MAX_PAYLOAD];   /* a HELLO's here */

    /*
     * Transmit queue: frames wait here until the link takes them.  Writes
     * never block: on a full socket the queue waits for G_IO_OUT.  On the
     * socket read directly, one writev carries up to PIB_LINK_TX_IOV frames
     * from the queue itself; on any other chardev whole frames are staged in
     * tx_buf so that one write carries many.
     */
    PibPacketQueue txq;
    uint32_t txq_len;
    uint32_t tx_head_off;   /* bytes of the queue's head frame written */
    uint8_t tx_buf[PIB_LINK_TX_BATCH];
    uint32_t tx_len;        /* bytes staged */
    uint32_t tx_off;        /* bytes of them written */
    guint tx_watch;         /* G_IO_OUT watch tag, 0 = none */
    bool tx_blocked;        /* the last write found the socket full */
    bool tx_draining;       /* inside pib_link_tx_drain() */
    bool tx_waiters;        /* a sender stopped on a full queue */

    /*
     * Credit-based flow control (include/pib_link.h, "Credits"; pib-link-fc.c).  While fc, the
     * transmit FIFO above holds at most PIB_LINK_FC_READY frames (txq_ready) and txq_len
     * counts those and the VL queues' together.
     */
    OnOffAuto credits;      /* property link-credits: on, off, auto (with a switch only) */
    bool is_switch;         /* a switch port: says so in its HELLO */
    bool fc;                /* both HELLOs agreed to it: it runs on this stream */
    uint32_t fc_offered;    /* our HELLO's PIB_HELLO_F_CREDITS* and _SWITCH flags, once sent */
    uint32_t fc_peer;       /* the peer's, once its HELLO came */
    bool fc_hello_tx;       /* our HELLO went out on this stream */
    bool fc_hello_rx;       /* the peer's came */
    bool fc_decided;        /* both did: fc says whether credits run; until then data waits */
    bool fc_hold;           /* inject: our receiver grants no more credit until cleared */
    uint32_t txq_ready;     /* frames in txq itself */
    PibLinkVl vl[PIB_LINK_DATA_VLS];
    uint8_t fc_rr;          /* the VL the round-robin transmit pick starts at */
    /*
     * VL arbitration (IBTA 7.6.9; pib-link-fc.c): the port whose VLArbitrationTables and
     * VLHighLimit pick the next VL (NULL, or tables with no weight: round robin), the entry
     * of each table (0 low, 1 high) being served and the bytes it may still send, and the
     * bytes the high table sent since the low one last had a turn.
     */
    const PibMgmtPort *arb;
    /*
     * Head-of-queue lifetime (a switch port's: IBTA 18.2.5.4, PortInfo:HOQLife of arb): a
     * packet that waits at the head of its VL's queue longer than 4.096 us x 2^HOQLife is
     * discarded, so that a receiver that stops granting credit cannot hold the input buffers
     * of the whole switch for ever.  hoq_timer fires at the next head's expiry.
     */
    bool hoq;
    QEMUTimer *hoq_timer;
    uint8_t arb_idx[2];
    int32_t arb_left[2];
    uint32_t arb_high_bytes;
    QEMUBH *fc_bh;          /* our receiver freed blocks: send a FLOW frame */
    bool fc_waiting;        /* a VL's head packet lacks credits, */
    int64_t fc_wait_since;  /* since (realtime ns) */
    uint64_t fc_wait_ns;    /* PortXmitWait: time spent so, before fc_wait_since */
    uint64_t fc_overruns;   /* data packets dropped: their VL's buffer was full */
    uint64_t fc_frames_rx;  /* FLOW frames received */

    /* Frame buffers free for reuse (pib_link_packet_new/free) */
    PibPacketQueue pool;
    uint32_t pool_len;

    uint64_t peer_node_guid;
    uint64_t peer_port_guid;

    /*
     * Moving (include/pib_link.h, "Moving"; pib-link-move.c): our token, the peer's, a MOVE
     * notice from the peer, and the wait for a moved peer (or, moved ourselves, for our old
     * one) during which the owner hears nothing of the stream.
     */
    uint64_t token;
    uint64_t peer_token;    /* from the peer's last HELLO; 0: it has none */
    uint64_t notice_token;  /* the peer's MOVE: the token it comes back with, */
    uint32_t notice_wait_ms;    /* how long to wait for it after the close, */
    int64_t notice_until;   /* if the close comes before then (virtual ns; 0: no notice) */
    bool recovering;
    uint64_t recover_guid;  /* the port GUID and token a HELLO must carry to end the wait */
    uint64_t recover_token;
    QEMUTimer *recover_timer;
    bool hello_deferred;    /* the stream opened while paused: HELLO when we resume */
    uint64_t recoveries;    /* waits that ended with the same port back */

    /* Statistics (traces and debugging only; not guest-visible yet). */
    uint64_t frames_tx;
    uint64_t frames_rx;
    uint64_t bad_frames;
    uint64_t rx_reads;      /* direct reads of the socket that returned data */
    uint64_t tx_writevs;    /* direct writevs of the socket that took data */
    uint64_t db_rings_tx;   /* the peer's doorbell rung */
    uint64_t db_rings_rx;   /* ours found rung */
};

/*
 * pib-link.c (receive, events) and pib-link-tx.c (frames, transmit).  Init before anything
 * allocates a frame; attach (the chardev's handlers) last, since the link may come up at once.
 * guard: the owner device's re-entrancy guard, or NULL.
 */
void pib_link_init(PibLink *l, const PibLinkOps *ops, void *opaque,
                   MemReentrancyGuard *guard);
void pib_link_attach(PibLink *l);
void pib_link_fini(PibLink *l);
/* Last, after every frame went back to the free list (or to another link's). */
void pib_link_free_pool(PibLink *l);
PibPacket *pib_link_packet_new(PibLink *l, uint32_t ib_len);
void pib_link_packet_free(PibLink *l, PibPacket *p);
void pib_link_enqueue(PibLink *l, PibPacket *p);
void pib_link_tx_flush(PibLink *l);
uint32_t pib_link_tx_unwritten(const PibLink *l);
void pib_link_tx_purge(PibLink *l);
void pib_link_take_down(PibLink *l, const char *why);
/* The device stops reading the socket itself (pib-link.c; the transmit side uses it too). */
void pib_link_direct_stop(PibLink *l);

/* pib-link-move.c: a link whose other end moves (include/pib_link.h, "Moving") */
void pib_link_move_init(PibLink *l);
void pib_link_move_fini(PibLink *l);
void pib_link_move_rx(PibLink *l, const uint8_t *buf, uint32_t len);
bool pib_link_move_closed(PibLink *l);
bool pib_link_move_opened(PibLink *l);
bool pib_link_move_hello(PibLink *l);
void pib_link_move_abort(PibLink *l);
void pib_link_move_announce(PibLink *l, uint32_t wait_ms);
void pib_link_move_arrived(PibLink *l, uint64_t token, uint64_t peer_guid,
                           uint64_t peer_token, uint32_t wait_ms);

/*
 * A port's link in a migration stream, for any owner (an HCA's port, each switch port): the
 * owner's port state at the save and the identities that let the two ports know each other on
 * the new cable.  Saved with vmstate_pib_link_move (its fields in this order, nothing else: a
 * stream with them inline reads the same).
 */
typedef struct PibLinkMoveSaved {
    uint32_t port_sm;           /* PibPortSmState at the save */
    uint64_t token;             /* our token */
    uint64_t peer_guid;         /* the peer's port GUID; 0: the port was not up */
    uint64_t peer_token;
} PibLinkMoveSaved;
extern const VMStateDescription vmstate_pib_link_move;

/*
 * How long a moved port holds its state for its old peer when its machine arrives, and how
 * long its MOVE notice asks the peer to hold its own: the move's downtime, a peer's redial
 * (pibvm's cables redial every second) and the HELLOs fit well inside; a machine that does not
 * come back by then is gone, and its ports go down as if its cable were pulled.
 */
#define PIB_LINK_MOVE_HOLD_MS   5000

void pib_link_move_save(PibLink *l, PibPortSmState sm, PibLinkMoveSaved *m);
bool pib_link_move_load(PibLink *l, PibLinkMoveSaved *m);

/*
 * A node whose machine may migrate (pib-link-move.c, "The notices a node sends"): when its
 * ports send MOVE notices, for any owner of links (an HCA's port, a switch's ports).  The owner
 * gives announce(), which sends a notice of wait_ms on each of its links that has a peer to
 * tell (an up port whose peer greeted it with a token) and says whether any had one; this
 * decides when it runs.  The owner calls pib_move_notice_save() from its pre_save and
 * pib_move_notice_run_state() from its run-state handler.
 */
typedef struct PibMoveNotice {
    bool (*announce)(void *opaque, uint32_t wait_ms);
    void *opaque;
    bool announced;             /* a notice "I may move" is out */
    bool stopped;               /* the machine is stopped */
    PibMigNotifier notifier;    /* an outgoing migration starts, or fails */
} PibMoveNotice;

void pib_move_notice_init(PibMoveNotice *m, bool (*announce)(void *opaque, uint32_t wait_ms),
                          void *opaque);
void pib_move_notice_fini(PibMoveNotice *m);
void pib_move_notice_save(PibMoveNotice *m);
void pib_move_notice_run_state(PibMoveNotice *m, bool running, bool loaded);
void pib_link_rx_pause(PibLink *l, bool paused);
/*
 * Credits (pib-link-fc.c): the flow-control engine the receive and transmit sides call, and
 * what the owner reads.  pib_packet_release gives a received packet's blocks back to the link
 * it came from; every path that frees a frame buffer calls it.
 */
void pib_link_fc_init(PibLink *l);
void pib_link_fc_fini(PibLink *l);
void pib_link_fc_reset(PibLink *l);
uint32_t pib_link_fc_flags(const PibLink *l);
void pib_link_fc_maybe_start(PibLink *l);
void pib_link_fc_enqueue(PibLink *l, PibPacket *p);
void pib_link_fc_pump(PibLink *l);
void pib_link_fc_purge(PibLink *l);
void pib_link_fc_rx_flow(PibLink *l, const uint8_t *buf, uint32_t len);
bool pib_link_fc_rx_room(PibLink *l, const uint8_t *ib, uint32_t len);
void pib_link_fc_rx_take(PibLink *l, const uint8_t *ib, uint32_t len, PibPacket *p);
void pib_packet_release(PibPacket *p);
void pib_link_fc_set_hold(PibLink *l, bool hold);
void pib_link_fc_hoq_update(PibLink *l);
uint64_t pib_link_xmit_wait_ns(const PibLink *l);
/*
 * Does this frame go through a VL queue: a PACKET on a data VL of a flow-controlled link, or of
 * a stream whose two HELLOs have not both passed yet (whether credits will run is not known, so
 * data waits for that: pib_link_fc_maybe_start)?
 */
static inline bool pib_link_fc_data(const PibLink *l, const PibPacket *p)
{
    return (l->fc || !l->fc_decided) && p->data[1] == PIB_FRAME_PACKET &&
           p->len > PIB_LINK_HDR_LEN && (p->data[PIB_LINK_HDR_LEN] >> 4) < PIB_LINK_DATA_VLS;
}

/* Around a write from the vCPU thread: ring the peer's doorbell (START, END), if it gave one. */
void pib_link_ring_peer(PibLink *l, uint64_t ring);
/* May a write from the vCPU thread wake the peer through its doorbell (not the socket)? */
static inline bool pib_link_rings_peer(const PibLink *l)
{
    return l->peer_db_fd >= 0;
}

#endif /* HW_PIB_LINK_H */
