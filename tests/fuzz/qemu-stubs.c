/*
 * pib fuzzing - the stand-in for QEMU around the device model
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Every QEMU function the device model calls, served by a small fake (see
 * fuzz-env.h for what each one promises).  Prototypes come from QEMU's own
 * headers, so a signature that drifts fails to compile here.
 */

#include "qemu/osdep.h"
#include "qemu/main-loop.h"
#include "qemu/module.h"
#include "qemu/timer.h"
#include "qemu/error-report.h"
#include "qemu/log.h"
#include "migration/vmstate.h"
#include "migration/qemu-file-types.h"
#include "qemu/guest-random.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "qemu/cutils.h"
#include "hw/pci/pci.h"
#include "hw/pci/msix.h"
#include "hw/pci/pcie.h"
#include "hw/qdev-properties.h"
#include "hw/qdev-properties-system.h"
#include "chardev/char-fe.h"
#include "chardev/char-socket.h"
#include "io/channel-socket.h"
#include "exec/memory.h"
#include "trace/control.h"
#include "trace/event-internal.h"

#include "fuzz-env.h"
#include "hw/pib/pib-compat.h"        /* as staged by build.sh */
#include <sanitizer/allocator_interface.h>

void fz_bug(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "\n==pib-fuzz== BUG: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    abort();
}

/*
 * Guest RAM
 */

uint8_t fz_ram[FZ_RAM_SIZE];
static uint8_t fz_page_role[FZ_RAM_PAGES];
static uint32_t fz_next_page;
uint64_t fz_dma_writes, fz_dma_reads;

static const char *const fz_role_names[] = {
    [FZ_PG_UNUSED] = "unused (canary)",
    [FZ_PG_DRIVER] = "driver-owned, read-only to the device",
    [FZ_PG_DEVICE] = "device-writable",
};

void fz_ram_reset(void)
{
    static bool filled;

    /* Only the pages handed out last time can have lost their canary. */
    memset(fz_ram, FZ_CANARY,
           filled ? (size_t)fz_next_page * FZ_PAGE_SIZE : sizeof(fz_ram));
    filled = true;
    memset(fz_page_role, FZ_PG_UNUSED, sizeof(fz_page_role));
    /* Page 0 stays unused: a zero address is never a valid ring. */
    fz_next_page = 1;
}

uint64_t fz_ram_alloc(uint32_t npages, FzPageRole role)
{
    uint64_t gpa = (uint64_t)fz_next_page * FZ_PAGE_SIZE;

    if (fz_next_page + npages > FZ_RAM_PAGES) {
        fz_bug("harness: guest RAM exhausted");
    }
    if (role != FZ_PG_UNUSED) {     /* a guard page keeps its canary */
        memset(&fz_ram[gpa], 0, (size_t)npages * FZ_PAGE_SIZE);
    }
    memset(&fz_page_role[fz_next_page], role, npages);
    fz_next_page += npages;
    return gpa;
}

void *fz_ram_ptr(uint64_t gpa, uint32_t len)
{
    if (gpa >= FZ_RAM_SIZE || len > FZ_RAM_SIZE - gpa) {
        fz_bug("harness: guest address 0x%" PRIx64 "+%u outside RAM", gpa, len);
    }
    return &fz_ram[gpa];
}

void fz_ram_check_canary(void)
{
    uint32_t pg, i;

    for (pg = 0; pg < MIN(fz_next_page + 1, FZ_RAM_PAGES); pg++) {
        if (fz_page_role[pg] != FZ_PG_UNUSED) {
            continue;
        }
        for (i = 0; i < FZ_PAGE_SIZE; i++) {
            if (fz_ram[pg * FZ_PAGE_SIZE + i] != FZ_CANARY) {
                fz_bug("canary at guest address 0x%x overwritten (0x%02x)",
                       pg * FZ_PAGE_SIZE + i, fz_ram[pg * FZ_PAGE_SIZE + i]);
            }
        }
    }
}

/*
 * Every DMA of the device: pci_dma_rw() -> dma_memory_rw() -> here.  Like the
 * memory core, a range that leaves RAM fails (the part inside RAM is still
 * accessed); writes are checked page by page against the page roles.
 */
MemTxResult address_space_rw(AddressSpace *as, hwaddr addr, MemTxAttrs attrs,
                             void *buf, hwaddr len, bool is_write)
{
    hwaddr end = addr + len, in_end = MIN(end, (hwaddr)FZ_RAM_SIZE);
    hwaddr a;

    if (end < addr) {
        fz_bug("address_space_rw() called with a range that wraps: "
               "0x%" PRIx64 "+0x%" PRIx64, (uint64_t)addr, (uint64_t)len);
    }
    if (is_write) {
        fz_dma_writes++;
        for (a = addr; a < in_end; a = (a | (FZ_PAGE_SIZE - 1)) + 1) {
            uint8_t role = fz_page_role[a / FZ_PAGE_SIZE];

            if (role != FZ_PG_DEVICE) {
                fz_bug("device DMA write of %" PRIu64 " bytes at 0x%" PRIx64
                       " touches page 0x%" PRIx64 ", which is %s",
                       (uint64_t)len, (uint64_t)addr,
                       (uint64_t)(a & ~(hwaddr)(FZ_PAGE_SIZE - 1)),
                       fz_role_names[role]);
            }
        }
        if (addr < in_end) {
            memcpy(&fz_ram[addr], buf, in_end - addr);
        }
    } else {
        fz_dma_reads++;
        memset(buf, 0xff, len);
        if (addr < in_end) {
            memcpy(buf, &fz_ram[addr], in_end - addr);
        }
    }
    return end <= FZ_RAM_SIZE ? MEMTX_OK : MEMTX_DECODE_ERROR;
}

/*
 * Bottom halves: QEMUBH is opaque to its users, so it is ours to define.
 */

struct QEMUBH {
    QEMUBHFunc *cb;
    void *opaque;
    const char *name;
    MemReentrancyGuard *guard;
    bool scheduled;
    QEMUBH *next;
};

static QEMUBH *fz_bhs;
static unsigned fz_bh_generation;   /* bumped by every qemu_bh_delete() */

QEMUBH *qemu_bh_new_full(QEMUBHFunc *cb, void *opaque, const char *name,
                         MemReentrancyGuard *reentrancy_guard)
{
    QEMUBH *bh = g_new0(QEMUBH, 1);

    bh->cb = cb;
    bh->opaque = opaque;
    bh->name = name;
    bh->guard = reentrancy_guard;
    bh->next = fz_bhs;
    fz_bhs = bh;
    return bh;
}

void qemu_bh_schedule(QEMUBH *bh)
{
    bh->scheduled = true;
}

void qemu_bh_cancel(QEMUBH *bh)
{
    bh->scheduled = false;
}

void qemu_bh_delete(QEMUBH *bh)
{
    QEMUBH **p;

    for (p = &fz_bhs; *p; p = &(*p)->next) {
        if (*p == bh) {
            *p = bh->next;
            g_free(bh);
            fz_bh_generation++;
            return;
        }
    }
    fz_bug("qemu_bh_delete() of a bottom half that does not exist");
}

bool fz_bhs_pending(void)
{
    QEMUBH *bh;

    for (bh = fz_bhs; bh; bh = bh->next) {
        if (bh->scheduled) {
            return true;
        }
    }
    return false;
}

/* As aio_bh_call(): the callback runs with the device's guard engaged. */
static void fz_bh_call(QEMUBH *bh)
{
    MemReentrancyGuard *guard = bh->guard;
    bool last = guard ? guard->engaged_in_io : false;

    bh->scheduled = false;
    if (guard) {
        guard->engaged_in_io = true;
    }
    bh->cb(bh->opaque);
    if (guard) {
        guard->engaged_in_io = last;
    }
}

/*
 * The main loop, minus everything but bottom halves: passes over the list, each
 * running every bottom half scheduled at that moment once (as aio_bh_poll()
 * does), until none is scheduled.  Each device bottom half has a budget per
 * run, so work always finishes; one that keeps itself scheduled forever would
 * spin a real QEMU at 100% CPU: that is a bug too.
 */
#define FZ_BH_RUNS_MAX      200000

void fz_run_bhs(void)
{
    unsigned runs = 0, gen;
    QEMUBH *bh, *next;
    bool ran;

    do {
        ran = false;
        gen = fz_bh_generation;
        for (bh = fz_bhs; bh; bh = next) {
            next = bh->next;
            if (!bh->scheduled) {
                continue;
            }
            if (++runs > FZ_BH_RUNS_MAX) {
                fz_bug("bottom halves still scheduled after %u runs "
                       "(last: %s): they never settle", runs, bh->name);
            }
            fz_bh_call(bh);
            ran = true;
            if (gen != fz_bh_generation) {
                break;      /* one was deleted: next may be gone */
            }
        }
    } while (ran);
}

/*
 * Timers: armed ones sit on a list sorted by expiry, linked through
 * QEMUTimer.next as in QEMU.
 */

int64_t fz_clock_ns;
static QEMUTimer *fz_timers;

int64_t qemu_clock_get_ns(QEMUClockType type)
{
    return fz_clock_ns;
}

/* Is p a live heap block?  Only ASan can tell; without it, assume not. */
static bool fz_heap_live(const void *p)
{
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
    return __sanitizer_get_ownership(p);
#endif
#endif
    return false;
}

/* Every timer set up since fz_loop_reset(), to find the ones never freed. */
static GPtrArray *fz_all_timers;

void timer_init_full(QEMUTimer *ts, QEMUTimerListGroup *timer_list_group,
                     QEMUClockType type, int scale, int attributes,
                     QEMUTimerCB *cb, void *opaque)
{
    if (!fz_all_timers) {
        fz_all_timers = g_ptr_array_new();
    }
    g_ptr_array_add(fz_all_timers, ts);
    ts->timer_list = NULL;
    ts->cb = cb;
    ts->opaque = opaque;
    ts->scale = scale;
    ts->attributes = attributes;
    ts->expire_time = -1;
    ts->next = NULL;
}

void timer_del(QEMUTimer *ts)
{
    QEMUTimer **p;

    for (p = &fz_timers; *p; p = &(*p)->next) {
        if (*p == ts) {
            *p = ts->next;
            break;
        }
    }
    ts->next = NULL;
    ts->expire_time = -1;
}

void timer_mod(QEMUTimer *ts, int64_t expire_time)
{
    QEMUTimer **p;

    timer_del(ts);
    ts->expire_time = MAX(expire_time, 0) * ts->scale;
    for (p = &fz_timers; *p && (*p)->expire_time <= ts->expire_time;
         p = &(*p)->next) {
        /* keep the list sorted */
    }
    ts->next = *p;
    *p = ts;
}

bool timer_pending(QEMUTimer *ts)
{
    return ts->expire_time >= 0;
}

uint64_t timer_expire_time_ns(QEMUTimer *ts)
{
    return timer_pending(ts) ? ts->expire_time : -1;
}

int64_t fz_next_timer(void)
{
    return fz_timers ? fz_timers->expire_time : -1;
}

void fz_clock_advance(int64_t ns)
{
    QEMUTimer *ts;

    fz_clock_ns += ns;
    while ((ts = fz_timers) && ts->expire_time <= fz_clock_ns) {
        fz_timers = ts->next;
        ts->next = NULL;
        ts->expire_time = -1;
        ts->cb(ts->opaque);
    }
}

void fz_loop_check_empty(void)
{
    unsigned i;

    /* A timer_new() whose timer_free() never came: still a live allocation */
    for (i = 0; fz_all_timers && i < fz_all_timers->len; i++) {
        QEMUTimer *ts = g_ptr_array_index(fz_all_timers, i);

        if (fz_heap_live(ts)) {
            fz_bug("timer %p (callback %p) was never freed: a leak",
                   ts, ts->cb);
        }
    }
    if (fz_timers) {
        fz_bug("a timer is still armed after the device's exit");
    }
    if (fz_bhs) {
        fz_bug("bottom half '%s' still exists after the device's exit",
               fz_bhs->name);
    }
    if (fz_link.watch_tag &&
        g_main_context_find_source_by_id(NULL, fz_link.watch_tag)) {
        fz_bug("the device's chardev watch is still installed after its exit");
    }
    if (fz_link.fd_read || fz_link.sock_refs) {
        fz_bug("the device still reads its socket after its exit");
    }
}

void fz_loop_reset(void)
{
    if (fz_all_timers) {
        g_ptr_array_set_size(fz_all_timers, 0);
    }
    fz_timers = NULL;
    fz_bhs = NULL;
    fz_clock_ns = 0;
}

/*
 * The chardev backend: a socket to a peer that the harness plays.
 */

FzLink fz_link;

/*
 * With fz_link.direct the backend is a socket chardev, connected while the
 * stream is open, whose channel is the socket itself: what the device needs
 * to read it directly.  QOM casts are unchecked here (see below); only
 * object_dynamic_cast() answers for real.
 */
#define FZ_SOCK_FD      1000        /* never a real descriptor */
static QIOChannelSocket fz_sioc = { .fd = FZ_SOCK_FD };
static SocketChardev fz_schr = {
    .ioc = (QIOChannel *)&fz_sioc,
    .sioc = &fz_sioc,
};

bool qemu_chr_fe_backend_connected(CharBackend *be)
{
    return true;
}

/*
 * The frontend's chardev, in be->chr as in QEMU: the link takes chardev changes, so it reads
 * be->chr itself (qemu_chr_fe_get_driver() refuses such frontends).  Its state follows the
 * harness's connection.
 */
static void fz_schr_sync(CharBackend *be)
{
    fz_schr.state = fz_link.connected ? TCP_CHARDEV_STATE_CONNECTED :
                                        TCP_CHARDEV_STATE_DISCONNECTED;
    if (be) {
        be->chr = fz_link.direct ? (Chardev *)&fz_schr : NULL;
    }
}

Chardev *qemu_chr_fe_get_driver(CharBackend *be)
{
    fz_schr_sync(be);
    return be->chr;
}

Object *object_dynamic_cast(Object *obj, const char *typename)
{
    if (obj == (Object *)&fz_schr && g_str_equal(typename, TYPE_CHARDEV_SOCKET)) {
        return obj;
    }
    return NULL;
}

Object *object_ref(void *obj)
{
    if (obj != &fz_sioc) {
        fz_bug("object_ref() of an object the harness does not know");
    }
    fz_link.sock_refs++;
    return obj;
}

void object_unref(void *obj)
{
    if (obj != &fz_sioc || fz_link.sock_refs <= 0) {
        fz_bug("object_unref() without a reference");
    }
    fz_link.sock_refs--;
}

void qemu_set_fd_handler(int fd, IOHandler *fd_read, IOHandler *fd_write,
                         void *opaque)
{
    if (fd != FZ_SOCK_FD || fd_write) {
        fz_bug("qemu_set_fd_handler() on fd %d (write handler %p)",
               fd, fd_write);
    }
    if (fd_read && !fz_link.sock_refs) {
        fz_bug("an fd handler on a socket the device holds no reference to");
    }
    fz_link.fd_read = fd_read;
    fz_link.fd_opaque = opaque;
}

/* As QIOChannelSocket's: what the peer sent, then EAGAIN, EOF or an error. */
ssize_t qio_channel_read(QIOChannel *ioc, char *buf, size_t buflen,
                         Error **errp)
{
    FzLink *l = &fz_link;
    size_t n;

    if (ioc != (QIOChannel *)&fz_sioc || !l->sock_refs) {
        fz_bug("qio_channel_read() on a socket the device does not hold");
    }
    if (!l->rx_left) {
        if (l->rx_end) {
            return l->rx_end > 0 ? 0 : -1;
        }
        return QIO_CHANNEL_ERR_BLOCK;
    }
    n = MIN(MIN(buflen, l->rx_left), (size_t)l->rx_chunk);
    memcpy(buf, l->rx_data, n);
    l->rx_data += n;
    l->rx_left -= n;
    return n;
}

/*
 * As QIOChannelSocket's, for a socket that passes no descriptors: the
 * fuzzer's peer is bytes only, so the device never offers its doorbell
 * (qio_channel_has_feature says no) and never receives one.
 */
ssize_t qio_channel_readv_full(QIOChannel *ioc, const struct iovec *iov,
                               size_t niov, int **fds, size_t *nfds,
#if PIB_QEMU_AT_LEAST(8, 1)
                               int flags,
#endif
                               Error **errp)
{
    if (niov != 1) {
        fz_bug("qio_channel_readv_full() of %zu buffers", niov);
    }
    if (fds) {
        *fds = NULL;
        *nfds = 0;
    }
    return qio_channel_read(ioc, iov[0].iov_base, iov[0].iov_len, errp);
}

bool qio_channel_has_feature(QIOChannel *ioc, QIOChannelFeature feature)
{
    return false;
}

void qemu_chr_fe_set_handlers(CharBackend *b, IOCanReadHandler *fd_can_read,
                              IOReadHandler *fd_read,
                              IOEventHandler *fd_event,
                              BackendChangeHandler *be_change, void *opaque,
                              GMainContext *context, bool set_open)
{
    fz_link.can_read = fd_can_read;
    fz_link.read = fd_read;
    fz_link.event = fd_event;
    fz_link.opaque = opaque;
    fz_schr_sync(b);
}

void qemu_chr_fe_deinit(CharBackend *b, bool del)
{
    fz_link.can_read = NULL;
    fz_link.read = NULL;
    fz_link.event = NULL;
    fz_link.opaque = NULL;
    fz_link.connected = false;
}

void qemu_chr_fe_accept_input(CharBackend *be)
{
    /* fz_link_feed() asks can_receive again before every chunk anyway */
}

static void fz_link_tx_reset(void)
{
    fz_link.tx_got = 0;
    fz_link.tx_in_payload = false;
}

void fz_link_open(void)
{
    if (fz_link.connected || !fz_link.event) {
        return;
    }
    fz_link.connected = true;
    fz_schr_sync(NULL);
    fz_link.rx_end = 0;
    fz_link_tx_reset();
    fz_link.event(fz_link.opaque, CHR_EVENT_OPENED);
    if (fz_link.direct && !fz_link.fd_read) {
        fz_bug("a plain socket chardev opened, and the device does not "
               "read it directly");
    }
}

void fz_link_close(void)
{
    if (!fz_link.connected) {
        return;
    }
    fz_link.connected = false;
    fz_schr_sync(NULL);
    fz_link.event(fz_link.opaque, CHR_EVENT_CLOSED);
    if (fz_link.fd_read || fz_link.sock_refs) {
        fz_bug("the stream closed, and the device still reads its socket "
               "(handler %p, %d references)", fz_link.fd_read,
               fz_link.sock_refs);
    }
}

/* As tcp_chr_disconnect(): CLOSED reaches the frontend at once. */
void qemu_chr_fe_disconnect(CharBackend *be)
{
    fz_link_close();
}

/*
 * What the device transmits must be frames the peer can parse: a valid link
 * header, and for a PACKET an LRH whose length is the frame's.  The stream is
 * reassembled here because the device may write a frame in pieces.
 */
static void fz_link_tx_byte(uint8_t b)
{
    FzLink *l = &fz_link;

    if (!l->tx_in_payload) {
        l->tx_hdr[l->tx_got++] = b;
        if (l->tx_got < 4) {
            return;
        }
        l->tx_len = (uint32_t)l->tx_hdr[2] << 8 | l->tx_hdr[3];
        if (l->tx_hdr[0] != 0x50 || l->tx_hdr[1] < 1 || l->tx_hdr[1] > 3 ||
            l->tx_len > 4096 + 256 ||
            (l->tx_hdr[1] == 3 && (!l->tx_len || l->tx_len % 4 || l->tx_len > 60))) {
            fz_bug("device transmitted a bad link header %02x %02x %02x %02x",
                   l->tx_hdr[0], l->tx_hdr[1], l->tx_hdr[2], l->tx_hdr[3]);
        }
        l->tx_got = 0;
        l->tx_in_payload = true;
    } else {
        if (l->tx_got < sizeof(l->tx_lrh)) {
            l->tx_lrh[l->tx_got] = b;
        }
        l->tx_got++;
    }
    if (l->tx_in_payload && l->tx_got == l->tx_len) {
        if (l->tx_hdr[1] == 2) {
            uint32_t words = ((uint32_t)l->tx_lrh[4] << 8 | l->tx_lrh[5]) & 0x7ff;

            if (l->tx_len < 20 || words * 4 != l->tx_len ||
                (l->tx_lrh[1] & 3) < 2) {
                fz_bug("device transmitted a malformed packet: frame %u bytes, "
                       "LRH says %u words, LNH %u", l->tx_len, words,
                       l->tx_lrh[1] & 3);
            }
        }
        l->tx_frames++;
        l->tx_got = 0;
        l->tx_in_payload = false;
    }
}

/*
 * How many of len bytes the peer's socket takes now, by the transmit mode:
 * all, a few, or none (EAGAIN) every other call.
 */
static int fz_link_tx_room(int len)
{
    FzLink *l = &fz_link;

    l->tx_calls++;
    switch (l->tx_mode) {
    case FZ_TX_PARTIAL:
        return MIN(len, 1 + (int)(l->tx_calls % 13));
    case FZ_TX_EAGAIN:
    case FZ_TX_NOWATCH:
        return l->tx_calls & 1 ? 0 : len;
    default:
        return len;
    }
}

int qemu_chr_fe_write(CharBackend *be, const uint8_t *buf, int len)
{
    FzLink *l = &fz_link;
    int i, n;

    if (!l->connected) {
        errno = EIO;
        return -1;
    }
    n = fz_link_tx_room(len);
    if (!n) {
        errno = EAGAIN;
        return -1;
    }
    for (i = 0; i < n; i++) {
        fz_link_tx_byte(buf[i]);
    }
    l->tx_bytes += n;
    return n;
}

/* As QIOChannelSocket's: the device writes the socket it reads directly. */
ssize_t qio_channel_writev(QIOChannel *ioc, const struct iovec *iov,
                           size_t niov, Error **errp)
{
    FzLink *l = &fz_link;
    size_t i, j, len = 0;
    int n;

    if (ioc != (QIOChannel *)&fz_sioc || !l->sock_refs) {
        fz_bug("qio_channel_writev() on a socket the device does not hold");
    }
    if (!niov || niov > IOV_MAX) {
        fz_bug("qio_channel_writev() of %zu buffers", niov);
    }
    if (!l->connected) {
        return -1;
    }
    for (i = 0; i < niov; i++) {
        len += iov[i].iov_len;
    }
    n = fz_link_tx_room(MIN(len, (size_t)INT_MAX));
    if (!n) {
        return QIO_CHANNEL_ERR_BLOCK;
    }
    len = n;
    for (i = 0; i < niov && len; i++) {
        for (j = 0; j < iov[i].iov_len && len; j++, len--) {
            fz_link_tx_byte(((const uint8_t *)iov[i].iov_base)[j]);
        }
    }
    l->tx_bytes += n;
    return n;
}

ssize_t qio_channel_writev_full(QIOChannel *ioc, const struct iovec *iov,
                                size_t niov, int *fds, size_t nfds, int flags,
                                Error **errp)
{
    if (nfds) {
        fz_bug("qio_channel_writev_full() with %zu descriptors", nfds);
    }
    return qio_channel_writev(ioc, iov, niov, errp);
}

/* A real GSource, so that the device's g_source_remove() works as in QEMU. */
static gboolean fz_never(gpointer data)
{
    return G_SOURCE_CONTINUE;
}

guint qemu_chr_fe_add_watch(CharBackend *be, GIOCondition cond,
                            FEWatchFunc func, void *user_data)
{
    GSource *src;

    if (fz_link.watch_tag &&
        g_main_context_find_source_by_id(NULL, fz_link.watch_tag)) {
        fz_bug("the device installed a second chardev watch");
    }
    if (fz_link.tx_mode == FZ_TX_NOWATCH) {
        return 0;       /* as qemu_chr_fe_add_watch() on a backend without one */
    }
    src = g_timeout_source_new_seconds(1000000);
    g_source_set_callback(src, fz_never, NULL, NULL);
    fz_link.watch_tag = g_source_attach(src, NULL);
    g_source_unref(src);
    fz_link.watch_func = func;
    fz_link.watch_opaque = user_data;
    return fz_link.watch_tag;
}

/* The device's watch is live while its GSource exists. */
static bool fz_link_watch_live(void)
{
    if (fz_link.watch_tag &&
        !g_main_context_find_source_by_id(NULL, fz_link.watch_tag)) {
        fz_link.watch_tag = 0;      /* removed by the device */
    }
    return fz_link.watch_tag != 0;
}

void fz_link_writable(void)
{
    guint tag;

    if (!fz_link_watch_live()) {
        return;
    }
    tag = fz_link.watch_tag;
    if (!fz_link.watch_func(NULL, G_IO_OUT, fz_link.watch_opaque)) {
        if (g_main_context_find_source_by_id(NULL, tag)) {
            g_source_remove(tag);
        }
        if (fz_link.watch_tag == tag) {
            fz_link.watch_tag = 0;
        }
    }
}

/*
 * Bytes from the peer.  The chardev layer asks can_receive before each read
 * and never hands over more than that (nor more than its 4 KiB buffer); when
 * it says 0, the main loop runs (bottom halves) and asks again.  A device that
 * says 0 with no work pending would never read again: the link is stuck.
 */
/*
 * Direct receive: while the socket holds bytes, the main loop calls the
 * device's fd handler again and again, with bottom halves between; the
 * device may take less than it could per call.  A connected device with
 * bytes waiting must read them or have a bottom half under way that will.
 */
static void fz_link_feed_direct(const uint8_t *buf, size_t len)
{
    FzLink *l = &fz_link;
    size_t before;
    unsigned idle = 0, at_end = 0;

    l->rx_data = buf;
    l->rx_left = len;
    while (l->connected && (l->rx_left || l->rx_end)) {
        before = l->rx_left;
        if (l->fd_read) {
            l->fd_read(l->fd_opaque);
        } else if (!fz_bhs_pending()) {
            fz_bug("link stuck: the socket holds %zu bytes, the device has "
                   "no fd handler and no bottom half scheduled", l->rx_left);
        }
        fz_run_bhs();
        if (l->rx_left == before && !l->rx_end) {
            if (++idle > 2) {
                fz_bug("link stuck: the fd handler takes none of the %zu "
                       "bytes the socket holds", l->rx_left);
            }
        } else {
            idle = 0;
        }
        if (l->rx_end && !l->rx_left && l->connected && ++at_end > 2) {
            fz_bug("end of stream read, and the device does not drop the "
                   "connection");
        }
    }
    l->rx_data = NULL;
    l->rx_left = 0;         /* what a closed stream still held is lost */
}

void fz_link_eof(bool error)
{
    static const uint8_t none;

    if (!fz_link.direct || !fz_link.connected) {
        fz_link_close();
        return;
    }
    fz_link.rx_end = error ? -1 : 1;
    fz_link_feed_direct(&none, 0);
    if (fz_link.connected) {
        fz_bug("end of stream read, and the connection is still up");
    }
}

void fz_link_feed(const uint8_t *buf, size_t len)
{
    FzLink *l = &fz_link;
    size_t n;
    int room;

    if (l->direct) {
        if (len) {
            fz_link_feed_direct(buf, len);
        }
        return;
    }
    while (len && l->connected && l->read) {
        room = l->can_read(l->opaque);
        if (room <= 0) {
            if (!fz_bhs_pending()) {
                fz_bug("link stuck: can_receive() is 0 and no bottom half "
                       "is scheduled to make room");
            }
            fz_run_bhs();
            continue;
        }
        n = MIN(MIN(len, (size_t)room), MIN(l->rx_chunk, 4096u));
        l->read(l->opaque, buf, n);
        buf += n;
        len -= n;
    }
}

/*
 * PCI, MSI-X, memory regions
 */

FzMmio fz_bar_regs, fz_bar_uar;
uint64_t fz_msix_notifies;

void memory_region_init_io(MemoryRegion *mr, Object *owner,
                           const MemoryRegionOps *ops, void *opaque,
                           const char *name, uint64_t size)
{
    FzMmio *bar = g_str_equal(name, "pib-regs") ? &fz_bar_regs :
                  g_str_equal(name, "pib-uar") ? &fz_bar_uar : NULL;

    if (!bar) {
        fz_bug("harness: unknown memory region '%s'", name);
    }
    bar->ops = ops;
    bar->opaque = opaque;
    bar->size = size;
}

/*
 * Device memory (pib-dm.c): RAM in BAR0.  The harness keeps it as a plain buffer; dirty
 * tracking and the BAR's layout have no meaning without a machine.
 */
static uint8_t *fz_dm_ram;

void memory_region_init_ram(MemoryRegion *mr, Object *owner, const char *name,
                            uint64_t size, Error **errp)
{
    g_free(fz_dm_ram);
    fz_dm_ram = g_malloc0(size);
}

void *memory_region_get_ram_ptr(MemoryRegion *mr)
{
    return fz_dm_ram;
}

void memory_region_set_dirty(MemoryRegion *mr, hwaddr addr, hwaddr size)
{
}

void memory_region_init(MemoryRegion *mr, Object *owner, const char *name, uint64_t size)
{
}

void memory_region_add_subregion(MemoryRegion *mr, hwaddr offset, MemoryRegion *subregion)
{
}

void error_propagate(Error **dst_errp, Error *local_err)
{
    if (dst_errp && local_err && !*dst_errp) {
        *dst_errp = local_err;
    }
}

/* As memory_region_dispatch_*(): the device's guard blocks re-entry. */
void fz_mmio_write(FzMmio *bar, DeviceState *dev, uint64_t addr, uint64_t val,
                   unsigned size)
{
    if (addr >= bar->size || dev->mem_reentrancy_guard.engaged_in_io) {
        return;
    }
    dev->mem_reentrancy_guard.engaged_in_io = true;
    bar->ops->write(bar->opaque, addr, val, size);
    dev->mem_reentrancy_guard.engaged_in_io = false;
}

uint64_t fz_mmio_read(FzMmio *bar, DeviceState *dev, uint64_t addr, unsigned size)
{
    uint64_t val;

    if (addr >= bar->size || dev->mem_reentrancy_guard.engaged_in_io) {
        return 0;
    }
    dev->mem_reentrancy_guard.engaged_in_io = true;
    val = bar->ops->read(bar->opaque, addr, size);
    dev->mem_reentrancy_guard.engaged_in_io = false;
    return val;
}

void pci_register_bar(PCIDevice *pci_dev, int region_num, uint8_t attr,
                      MemoryRegion *memory)
{
}

int pcie_endpoint_cap_init(PCIDevice *dev, uint8_t offset)
{
    return 0;
}

void pcie_cap_exit(PCIDevice *dev)
{
}

int msix_init_exclusive_bar(PCIDevice *dev, unsigned short nentries,
                            uint8_t bar_nr, Error **errp)
{
    return 0;
}

void msix_uninit_exclusive_bar(PCIDevice *dev)
{
}

void msix_vector_use(PCIDevice *dev, unsigned vector)
{
}

void msix_unuse_all_vectors(PCIDevice *dev)
{
}

int msix_enabled(PCIDevice *dev)
{
    return 1;
}

void msix_notify(PCIDevice *dev, unsigned vector)
{
    if (vector >= 8) {
        fz_bug("MSI-X notify of vector %u (the device has 8)", vector);
    }
    fz_msix_notifies++;
}

/*
 * QOM: the casts are checked by QEMU; here every object is what it claims.
 * module_init constructors are recorded and run by fz_modules_init().
 */

Object *object_dynamic_cast_assert(Object *obj, const char *typename,
                                   const char *file, int line,
                                   const char *func)
{
    return obj;
}

ObjectClass *object_class_dynamic_cast_assert(ObjectClass *klass,
                                              const char *typename,
                                              const char *file, int line,
                                              const char *func)
{
    return klass;
}

#define FZ_MAX_MODULE_INITS 8
static void (*fz_module_inits[FZ_MAX_MODULE_INITS])(void);
static unsigned fz_n_module_inits;
const TypeInfo *fz_type_info;

void register_module_init(void (*fn)(void), module_init_type type)
{
    if (fz_n_module_inits == FZ_MAX_MODULE_INITS) {
        fz_bug("harness: too many module_init constructors");
    }
    fz_module_inits[fz_n_module_inits++] = fn;
}

void fz_modules_init(void)
{
    unsigned i;

    for (i = 0; i < fz_n_module_inits; i++) {
        fz_module_inits[i]();
    }
    fz_n_module_inits = 0;
}

/* The model registers the HCA and the switch; the harness drives the HCA. */
Type type_register_static(const TypeInfo *info)
{
    if (g_str_equal(info->name, "pib-hca")) {     /* TYPE_PIB_HCA */
        fz_type_info = info;
    }
    return NULL;
}

void device_class_set_props(DeviceClass *dc, Property *props)
{
    dc->props_ = props;
}

void object_class_property_set_description(ObjectClass *klass,
                                           const char *name,
                                           const char *description)
{
}

const PropertyInfo qdev_prop_uint8;
const PropertyInfo qdev_prop_uint16;
const PropertyInfo qdev_prop_uint32;
const PropertyInfo qdev_prop_uint64;
const PropertyInfo qdev_prop_chr;
const PropertyInfo qdev_prop_bool;
const PropertyInfo qdev_prop_on_off_auto;

/*
 * Migration (hca/pib-vmstate.c): the link fuzzer never saves or loads, so the stream's
 * primitives are never called and its field types only need to exist.  The machine always
 * runs: the device is never paused.  The migration stream has its own mutation fuzzer, in
 * real QEMU (tests/qtest/pib-migration-test.c, /pib/migration/mutate).
 */
const VMStateInfo vmstate_info_bool, vmstate_info_int32, vmstate_info_int64;
const VMStateInfo vmstate_info_uint8, vmstate_info_uint16, vmstate_info_uint32;
const VMStateInfo vmstate_info_uint64, vmstate_info_buffer, vmstate_info_bitmap;
const VMStateInfo vmstate_info_timer, vmstate_info_tmp;
const VMStateDescription vmstate_pci_device, vmstate_msix;

#define FZ_NOT_REACHED() do { fprintf(stderr, "pib-fuzz: %s called\n", __func__); abort(); } \
                         while (0)

int vmstate_save_state(QEMUFile *f, const VMStateDescription *vmsd, void *opaque,
                       JSONWriter *vmdesc)
{
    FZ_NOT_REACHED();
}

int vmstate_load_state(QEMUFile *f, const VMStateDescription *vmsd, void *opaque,
                       int version_id)
{
    FZ_NOT_REACHED();
}

void qemu_put_byte(QEMUFile *f, int v) { FZ_NOT_REACHED(); }
void qemu_put_be32(QEMUFile *f, unsigned int v) { FZ_NOT_REACHED(); }
void qemu_put_buffer(QEMUFile *f, const uint8_t *buf, size_t size) { FZ_NOT_REACHED(); }
int qemu_get_byte(QEMUFile *f) { FZ_NOT_REACHED(); }
unsigned int qemu_get_be32(QEMUFile *f) { FZ_NOT_REACHED(); }
size_t qemu_get_buffer(QEMUFile *f, uint8_t *buf, size_t size) { FZ_NOT_REACHED(); }
int qemu_file_get_error(QEMUFile *f) { FZ_NOT_REACHED(); }

void error_report(const char *fmt, ...)
{
    FZ_NOT_REACHED();
}

/* A link's token (fabric/pib-link-move.c): the same every time, so that every run of an input
 * is the same. */
void qemu_guest_getrandom_nofail(void *buf, size_t len)
{
    memset(buf, 0x5a, len);
}

VMChangeStateEntry *qemu_add_vm_change_state_handler(VMChangeStateHandler *cb, void *opaque)
{
    return NULL;
}

void qemu_del_vm_change_state_handler(VMChangeStateEntry *e)
{
}

bool runstate_is_running(void)
{
    return true;
}

/* No migration in the harness: the device's notifier (pib-vmstate.c) is never called. */
#if PIB_MIG_EVENTS
void migration_add_notifier(NotifierWithReturn *notify, MigrationNotifyFunc func)
{
}

void migration_remove_notifier(NotifierWithReturn *notify)
{
}
#else
void add_migration_state_change_notifier(Notifier *notify)
{
}

void remove_migration_state_change_notifier(Notifier *notify)
{
}

bool migration_in_setup(MigrationState *s) { FZ_NOT_REACHED(); }
bool migration_has_failed(MigrationState *s) { FZ_NOT_REACHED(); }
#endif

/*
 * Errors: realize must not fail (the harness checks), a property setter may
 * refuse a value.  Error is opaque; a sentinel tells "an error was set".
 */
static Error *const fz_error_set = (Error *)&fz_error_set;

void error_setg_internal(Error **errp, const char *src, int line,
                         const char *func, const char *fmt, ...)
{
    va_list ap;

    if (getenv("PIB_FUZZ_LOG")) {
        fprintf(stderr, "pib-fuzz: device error (%s:%d): ", src, line);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\n");
    }
    if (errp && !*errp) {
        *errp = fz_error_set;
    }
}

bool fz_error_clear(Error **errp)
{
    bool was = *errp != NULL;

    *errp = NULL;
    return was;
}

/*
 * QOM properties the device adds to its class (error injection, and read-only
 * ones such as link-tx-ready): recorded, so that the harness can get them as
 * qom-get and set the settable ones as qom-set would.  A uint32 setter reads
 * its value through visit_type_uint32(), which hands it fz_prop_u32.
 */
FzProp fz_props[FZ_MAX_PROPS];
unsigned fz_n_props;
static uint32_t fz_prop_u32;

static ObjectProperty *fz_prop_add(const FzProp *p)
{
    if (fz_n_props == FZ_MAX_PROPS) {
        fz_bug("harness: too many QOM properties");
    }
    fz_props[fz_n_props++] = *p;
    return NULL;
}

ObjectProperty *object_class_property_add_str(ObjectClass *klass,
                                              const char *name,
                                              char *(*get)(Object *, Error **),
                                              void (*set)(Object *,
                                                          const char *,
                                                          Error **))
{
    return fz_prop_add(&(FzProp) { .name = name, .get_str = get,
                                   .set_str = set });
}

ObjectProperty *object_class_property_add_bool(ObjectClass *klass, const char *name,
                                               bool (*get)(Object *, Error **),
                                               void (*set)(Object *, bool, Error **))
{
    return fz_prop_add(&(FzProp) { .name = name, .get_bool = get, .set_bool = set });
}

ObjectProperty *object_class_property_add(ObjectClass *klass, const char *name,
                                          const char *type,
                                          ObjectPropertyAccessor *get,
                                          ObjectPropertyAccessor *set,
                                          ObjectPropertyRelease *release,
                                          void *opaque)
{
    if (!g_str_equal(type, "uint32")) {
        if (!set) {
            return NULL;    /* read-only (the switch's counters): nothing to set */
        }
        fz_bug("harness: QOM property %s of type %s", name, type);
    }
    return fz_prop_add(&(FzProp) { .name = name, .get = get, .set = set,
                                   .opaque = opaque });
}

bool visit_type_uint32(Visitor *v, const char *name, uint32_t *obj,
                       Error **errp)
{
    if (v == (Visitor *)&fz_prop_u32) {     /* a setter reads its input */
        *obj = fz_prop_u32;
    }
    return true;
}

/*
 * The getter of the switch's read-only counters (qemu-hw/switch/pib-switch.c), which is linked
 * with the model but not instantiated by this harness.
 */
bool visit_type_uint64(Visitor *v, const char *name, uint64_t *obj, Error **errp)
{
    return true;
}

bool fz_prop_set(Object *obj, const FzProp *p, const char *str, uint32_t u32)
{
    Error *err = NULL;

    if (!p->set_str && !p->set_bool && !p->set) {
        return false;                   /* read-only: qom-set would refuse it */
    }
    if (p->set_str) {
        p->set_str(obj, str, &err);
    } else if (p->set_bool) {
        p->set_bool(obj, u32 & 1, &err);
    } else {
        fz_prop_u32 = u32;
        p->set(obj, (Visitor *)&fz_prop_u32, p->name, p->opaque, &err);
    }
    return !fz_error_clear(&err);
}

void fz_prop_get(Object *obj, const FzProp *p)
{
    Error *err = NULL;

    if (p->get_str) {
        g_free(p->get_str(obj, &err));
    } else if (p->get_bool) {
        p->get_bool(obj, &err);
    } else {
        p->get(obj, NULL, p->name, p->opaque, &err);
    }
    fz_error_clear(&err);
}

/* As QEMU's: the whole string (unless endptr), no overflow. */
int qemu_strtou64(const char *nptr, const char **endptr, int base,
                  uint64_t *result)
{
    char *ep;
    unsigned long long v;

    *result = 0;
    if (!nptr) {
        return -EINVAL;
    }
    errno = 0;
    v = strtoull(nptr, &ep, base);
    if (ep == nptr) {
        return -EINVAL;
    }
    if (endptr) {
        *endptr = ep;
    } else if (*ep) {
        return -EINVAL;
    }
    if (errno == ERANGE) {
        *result = UINT64_MAX;
        return -ERANGE;
    }
    *result = v;
    return 0;
}

/*
 * Logging and trace points.  With tracing on, every trace point and guest
 * error message is formatted (into a scratch buffer), so that a bad argument,
 * such as an out-of-range name table index, is exercised under the sanitizers.
 */

int qemu_loglevel;
bool message_with_timestamp;
int trace_events_enabled_count;
static TraceEvent **fz_trace_events;

void qemu_log(const char *fmt, ...)
{
    static char scratch[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(scratch, sizeof(scratch), fmt, ap);
    va_end(ap);
    if (getenv("PIB_FUZZ_LOG")) {
        fputs(scratch, stderr);
    }
}

int qemu_get_thread_id(void)
{
    return 0;
}

void trace_event_register_group(TraceEvent **events)
{
    fz_trace_events = events;
}

void fz_trace_enable(bool on)
{
    TraceEvent **ev;

    for (ev = fz_trace_events; ev && *ev; ev++) {
        *(*ev)->dstate = on;
    }
    trace_events_enabled_count = on;
    qemu_loglevel = on ? (LOG_TRACE | LOG_GUEST_ERROR) : 0;
}
