/*
 * pib fabric - a link's transmit side
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The frame buffers every link shares the design of (a small free list of
 * buffers as large as the largest frame), and the transmit queue: frames wait
 * in it until the owner's pib_link_tx_flush(), which writes as many as the
 * socket takes (one writev of up to PIB_LINK_TX_BATCH bytes when the device
 * owns the socket directly, else the chardev's writes) and waits for the
 * socket to drain when it is full.  The receive side, the link's events and
 * the rest of the design are in pib-link.c; the formats in include/pib_link.h.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/main-loop.h"
#include "chardev/char-fe.h"
#include "chardev/char-socket.h"
#include "io/channel-socket.h"

#include "pib-fabric.h"
#include "../trace.h"

/*
 * Transmit
 */

static void pib_link_tx_drain(PibLink *l);

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
PibPacket *pib_link_packet_new(PibLink *l, uint32_t ib_len)
{
    PibPacket *p = QSIMPLEQ_FIRST(&l->pool);
    struct pib_link_hdr hdr = {
        .magic = PIB_LINK_MAGIC,
        .type = PIB_FRAME_PACKET,
        .length_be = cpu_to_be16(ib_len),
    };

    if (p) {
        QSIMPLEQ_REMOVE_HEAD(&l->pool, next);
        l->pool_len--;
    } else {
        p = g_malloc(PIB_PACKET_SIZE);
    }
    p->len = PIB_LINK_HDR_LEN + ib_len;
    p->fc_link = NULL;
    memcpy(p->data, &hdr, sizeof(hdr));
    return p;
}

/* Done with a frame: keep the buffer for the next one, up to a bound. */
void pib_link_packet_free(PibLink *l, PibPacket *p)
{
    pib_packet_release(p);      /* the credits it held, if any */
    if (l->pool_len >= PIB_PACKET_POOL_MAX) {
        g_free(p);
        return;
    }
    QSIMPLEQ_INSERT_HEAD(&l->pool, p, next);
    l->pool_len++;
}

/* The owner goes away: the free list goes back to the allocator. */
void pib_link_free_pool(PibLink *l)
{
    PibPacket *p;

    while ((p = QSIMPLEQ_FIRST(&l->pool))) {
        QSIMPLEQ_REMOVE_HEAD(&l->pool, next);
        g_free(p);
    }
    l->pool_len = 0;
}

/*
 * Drop every frame not yet written, staged or queued (the stream closed, or
 * the device goes away).  The queue is empty now, so whoever waited for room
 * in it runs again: a requester that stopped on a full queue when the link
 * died must go on to find the port down (its packets are then dropped and
 * counted, and its ACK timer runs out), not wait for a drain that will never
 * come.
 */
void pib_link_tx_purge(PibLink *l)
{
    PibPacket *p;

    while ((p = QSIMPLEQ_FIRST(&l->txq))) {
        QSIMPLEQ_REMOVE_HEAD(&l->txq, next);
        pib_link_packet_free(l, p);
    }
    l->txq_ready = 0;
    pib_link_fc_purge(l);       /* and what waited for credits */
    l->txq_len = 0;
    l->tx_db_hello = NULL;
    l->tx_head_off = 0;
    l->tx_len = 0;
    l->tx_off = 0;
    l->tx_blocked = false;
    if (l->tx_watch) {
        g_source_remove(l->tx_watch);
        l->tx_watch = 0;
    }
    if (l->tx_waiters) {
        l->tx_waiters = false;
        l->ops->tx_room(l);
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
    PibLink *l = opaque;

    pib_link_tx_drain(l);
    if (l->tx_watch && l->tx_blocked) {
        return G_SOURCE_CONTINUE;       /* full again: keep waiting */
    }
    l->tx_watch = 0;                    /* (a purge may have removed it) */
    return G_SOURCE_REMOVE;
}

/* The queue's head frame has been written: done with it. */
static void pib_link_tx_pop(PibLink *l)
{
    PibPacket *p = QSIMPLEQ_FIRST(&l->txq);

    QSIMPLEQ_REMOVE_HEAD(&l->txq, next);
    if (p == l->tx_db_hello) {
        l->tx_db_hello = NULL;      /* written: the descriptor went with it */
    }
    l->txq_len--;
    l->txq_ready--;
    l->tx_head_off = 0;
    l->frames_tx++;
    pib_link_packet_free(l, p);
}

/*
 * Stage whole frames from the head of the queue in tx_buf, as many as fit,
 * once everything staged before has been written.  Staged frames have left
 * the queue (and its PIB_TXQ_MAX bound); their buffers are free again.  A
 * head frame that a writev took in part is staged from where it stopped (the
 * direct path ended under it), so no byte goes out twice.
 */
static void pib_link_tx_stage(PibLink *l)
{
    PibPacket *p;
    uint32_t len;

    l->tx_len = 0;
    l->tx_off = 0;
    while ((p = QSIMPLEQ_FIRST(&l->txq)) &&
           (len = p->len - l->tx_head_off) <= sizeof(l->tx_buf) - l->tx_len) {
        memcpy(l->tx_buf + l->tx_len, p->data + l->tx_head_off, len);
        l->tx_len += len;
        pib_link_tx_pop(l);
    }
}

/*
 * Direct transmit: one writev of the socket read directly, up to
 * PIB_LINK_TX_IOV frames from the head of the queue, straight from their
 * buffers.  Staging copied every byte once more, and one 64 KiB write was
 * sixteen frames.  Frames leave the queue once written whole; the head may
 * be written in part (tx_head_off), and the next writev starts there.
 * Returns the bytes written, 0 if the socket is full, -1 if the stream is
 * gone (the connection is then dropped, as on a read error).
 */
static ssize_t pib_link_tx_writev(PibLink *l)
{
    struct iovec iov[PIB_LINK_TX_IOV];
    uint32_t off = l->tx_head_off;
    ssize_t ret, left;
    PibPacket *p;
    int n = 0;

    QSIMPLEQ_FOREACH(p, &l->txq, next) {
        if (n == PIB_LINK_TX_IOV) {
            break;
        }
        iov[n].iov_base = p->data + off;
        iov[n].iov_len = p->len - off;
        off = 0;
        n++;
    }
    if (QSIMPLEQ_FIRST(&l->txq) == l->tx_db_hello && l->tx_head_off == 0) {
        /* Our HELLO offers the doorbell: the eventfd rides with its first byte. */
        n = 1;
        ret = qio_channel_writev_full(QIO_CHANNEL(l->rx_sioc), iov, n,
                                      &l->db_fd, 1, 0, NULL);
        if (ret > 0) {
            l->tx_db_hello = NULL;  /* the rest of it, if any, goes plain */
        }
    } else {
        ret = qio_channel_writev(QIO_CHANNEL(l->rx_sioc), iov, n, NULL);
    }
    if (ret == QIO_CHANNEL_ERR_BLOCK) {
        return 0;
    }
    if (ret <= 0) {
        trace_pib_link_event(l->id, "write error");
        pib_link_direct_stop(l);
        qemu_bh_schedule(l->drop_bh);
        pib_link_tx_purge(l);
        return -1;
    }
    l->tx_writevs++;
    trace_pib_link_tx_writev(l->id, n, ret);
    for (left = ret; left > 0; ) {
        p = QSIMPLEQ_FIRST(&l->txq);
        if (left < p->len - l->tx_head_off) {
            l->tx_head_off += left;
            break;
        }
        left -= p->len - l->tx_head_off;
        pib_link_tx_pop(l);
    }
    return ret;
}

/*
 * Write queued frames until the queue is empty or the link takes no more.
 * One system call carries many frames: a writev on the socket read directly,
 * else a chardev write of frames staged in tx_buf (a write is a system call,
 * and at 4 KiB per frame it cost more than the copy).  Either may take its
 * bytes in pieces; frames never interleave because only this function
 * writes, always in queue order, and staged bytes go out before the next
 * writev.
 */
static void pib_link_tx_drain(PibLink *l)
{
    ssize_t ret;

    if (l->tx_draining) {
        return;
    }
    l->tx_draining = true;
    l->tx_blocked = false;
    for (;;) {
        if (!l->stream_open) {
            pib_link_tx_purge(l);
            break;
        }
        if (l->fc) {
            pib_link_fc_pump(l);    /* refill the FIFO from the VL queues the credits allow */
        }
        if (l->tx_off < l->tx_len) {
            ret = qemu_chr_fe_write(&l->chr, l->tx_buf + l->tx_off,
                                    l->tx_len - l->tx_off);
            if (ret > 0) {
                l->tx_off += ret;
                continue;
            }
            if (!l->stream_open) {  /* the write found the peer gone */
                pib_link_tx_purge(l);
                break;
            }
        } else if (QSIMPLEQ_EMPTY(&l->txq)) {
            break;                  /* nothing left */
        } else if (l->rx_sioc) {
            ret = pib_link_tx_writev(l);
            if (ret < 0) {
                break;              /* purged, and the stream is dropped */
            }
            if (ret > 0) {
                continue;
            }
        } else {
            pib_link_tx_stage(l);   /* at least the head frame fits */
            continue;
        }
        /* Full (EAGAIN): continue when the chardev can take more. */
        trace_pib_link_tx_wait(l->id, l->txq_len);
        l->tx_blocked = true;
        if (!l->tx_watch) {
            l->tx_watch = qemu_chr_fe_add_watch(&l->chr, G_IO_OUT | G_IO_HUP,
                                                pib_link_tx_ready, l);
        }
        if (!l->tx_watch) {
            pib_link_tx_purge(l);      /* a backend we cannot wait on */
        }
        break;
    }
    l->tx_draining = false;
    if (l->tx_waiters && l->txq_len < PIB_TXQ_MAX / 2) {
        l->tx_waiters = false;
        l->ops->tx_room(l);
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
void pib_link_tx_flush(PibLink *l)
{
    if (!l->tx_watch && l->txq_ready) {
        pib_link_tx_drain(l);
    }
}

/*
 * Queue a frame; the caller's pib_link_tx_flush() writes it.  On a flow-controlled link a data
 * packet goes to its VL's queue first (pib-link-fc.c), anything else (HELLO, FLOW, VL15) into
 * the transmit FIFO.
 */
/*
 * Frames the link has ready for the socket and not yet written whole: the transmit FIFO and a
 * staged batch (not what waits in a VL queue for credits).  A machine that migrated away still
 * writes them while it waits to be quit, its MOVE notices among them: whoever quits it
 * waits for 0 first (`pibvm migrate`, through the devices' QOM properties).
 */
uint32_t pib_link_tx_unwritten(const PibLink *l)
{
    return l->txq_ready + (l->tx_off < l->tx_len);
}

void pib_link_enqueue(PibLink *l, PibPacket *p)
{
    l->txq_len++;
    if (pib_link_fc_data(l, p)) {
        pib_link_fc_enqueue(l, p);
        return;
    }
    QSIMPLEQ_INSERT_TAIL(&l->txq, p, next);
    l->txq_ready++;
}
