/*
 * pib fuzzing - the stand-in for QEMU around the device model
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The link fuzzer (pib-link-fuzz.c) compiles the device model's own sources
 * (the qemu-hw sources, unchanged) against QEMU's headers, but links them with this
 * small stand-in (qemu-stubs.c) instead of QEMU: no machine, no memory core,
 * no main loop.  What the model calls is served like this:
 *
 *   guest memory     pci_dma_rw() ends in address_space_rw(): a 2 MiB array
 *                    of "guest RAM" whose pages carry a role.  The device may
 *                    read any page, but write only pages the driver gave it
 *                    to write (rings it produces, response buffers, writable
 *                    MR pages).  A write anywhere else is a bug: the stub
 *                    reports it and aborts, so libFuzzer keeps the input.
 *   bottom halves    a list; fz_run_bhs() runs the scheduled ones until none
 *                    is left, as the main loop would, with the device's
 *                    re-entrancy guard engaged like aio_bh_call() does
 *   timers           QEMU_CLOCK_VIRTUAL is a counter the harness advances;
 *                    expired timers fire in order
 *   the link         qemu_chr_fe_set_handlers() hands us the device's
 *                    can_receive/receive/event callbacks; fz_link_feed()
 *                    delivers bytes in chunks no larger than can_receive
 *                    allows; qemu_chr_fe_write() checks every frame the
 *                    device transmits and can simulate a full socket.
 *                    With fz_link.direct, the chardev is a socket chardev
 *                    the device reads itself (pib-link.c, "Direct
 *                    receive"): fz_link_feed() calls the fd handler the
 *                    device installed, and qio_channel_read() hands over
 *                    the bytes, rx_chunk at most per read, then EAGAIN,
 *                    or end of stream / an error (fz_link_eof())
 *   PCI, MSI-X, QOM  enough to run the device's class_init, realize and exit
 *   trace points     generated with tracetool's log backend; they format
 *                    into a scratch buffer only when fz_trace_enable(true)
 */
#ifndef PIB_FUZZ_ENV_H
#define PIB_FUZZ_ENV_H

#include "qemu/osdep.h"
#include "hw/pci/pci.h"
#include "chardev/char-fe.h"

/* ---- guest RAM ------------------------------------------------------------------------ */

#define FZ_RAM_SIZE         (2u << 20)
#define FZ_PAGE_SIZE        4096u
#define FZ_RAM_PAGES        (FZ_RAM_SIZE / FZ_PAGE_SIZE)
#define FZ_CANARY           0xa5

/* What a page of guest RAM is, for the device's writes. */
typedef enum FzPageRole {
    FZ_PG_UNUSED = 0,   /* nobody's: filled with FZ_CANARY, must stay so */
    FZ_PG_DRIVER,       /* the driver's (commands, WQE rings, page lists, read-only
                         * MRs, MRs of a PD no QP uses): the device only reads */
    FZ_PG_DEVICE,       /* the device may write (CQ/event rings, responses, writable
                         * MRs of the QPs' PD) */
} FzPageRole;

extern uint8_t fz_ram[FZ_RAM_SIZE];

void fz_ram_reset(void);
/* npages fresh pages with that role; returns their guest-physical address. */
uint64_t fz_ram_alloc(uint32_t npages, FzPageRole role);
void *fz_ram_ptr(uint64_t gpa, uint32_t len);
/* Abort if a page that was never handed out lost its canary. */
void fz_ram_check_canary(void);
/* Device writes seen (for statistics). */
extern uint64_t fz_dma_writes, fz_dma_reads;

/* ---- bottom halves and timers ---------------------------------------------------------- */

extern int64_t fz_clock_ns;
/* Run scheduled bottom halves until none is left.  Aborts if they never settle. */
void fz_run_bhs(void);
bool fz_bhs_pending(void);
/* Advance QEMU_CLOCK_VIRTUAL by ns and fire every timer that expired. */
void fz_clock_advance(int64_t ns);
/* Expiry of the earliest armed timer, or -1. */
int64_t fz_next_timer(void);
/* After the device's exit: nothing of it may be left in the loop. */
void fz_loop_check_empty(void);
void fz_loop_reset(void);

/* ---- the link --------------------------------------------------------------------------- */

typedef enum FzTxMode {
    FZ_TX_ACCEPT,       /* the socket takes everything */
    FZ_TX_PARTIAL,      /* it takes a few bytes per write */
    FZ_TX_EAGAIN,       /* every other write finds it full */
    FZ_TX_NOWATCH,      /* full, and a backend that cannot be waited on */
    FZ_TX__MAX
} FzTxMode;

typedef struct FzLink {
    IOCanReadHandler *can_read;
    IOReadHandler *read;
    IOEventHandler *event;
    void *opaque;
    bool connected;         /* the byte stream is open (OPENED delivered) */
    /* direct receive: the device reads the socket from an fd handler */
    bool direct;            /* the chardev is a plain socket chardev */
    IOHandler *fd_read;     /* the device's fd handler, NULL if none */
    void *fd_opaque;
    int sock_refs;          /* the device's references to the socket */
    const uint8_t *rx_data; /* bytes the socket holds for the device */
    size_t rx_left;
    int rx_end;             /* 0: EAGAIN when empty; 1: EOF; -1: an error */
    FzTxMode tx_mode;
    uint32_t tx_calls;
    uint32_t rx_chunk;      /* largest piece handed to read() at once */
    /* the G_IO_OUT watch the device waits on */
    guint watch_tag;
    FEWatchFunc watch_func;
    void *watch_opaque;
    /* transmitted frames, reassembled and checked */
    uint8_t tx_hdr[4];
    uint32_t tx_got;
    uint32_t tx_len;        /* payload bytes of the frame being reassembled */
    bool tx_in_payload;
    uint8_t tx_lrh[8];
    uint64_t tx_frames;
    uint64_t tx_bytes;
} FzLink;

extern FzLink fz_link;

void fz_link_open(void);            /* CHR_EVENT_OPENED */
void fz_link_close(void);           /* CHR_EVENT_CLOSED */
/* Direct receive: the peer closes (end of stream) or the socket fails. */
void fz_link_eof(bool error);
/* Deliver bytes from the peer, respecting can_receive, as the chardev layer does. */
void fz_link_feed(const uint8_t *buf, size_t len);
/* The socket drained: fire the device's G_IO_OUT watch, if any. */
void fz_link_writable(void);

/* ---- the device's QOM and PCI side ------------------------------------------------------ */

typedef struct FzMmio {
    const MemoryRegionOps *ops;
    void *opaque;
    uint64_t size;
} FzMmio;

extern FzMmio fz_bar_regs, fz_bar_uar;
extern const TypeInfo *fz_type_info;
extern uint64_t fz_msix_notifies;

/* Run every module_init constructor recorded (QOM types, trace events) once. */
void fz_modules_init(void);
/* MMIO as the memory core dispatches it (re-entrancy guard engaged). */
void fz_mmio_write(FzMmio *bar, DeviceState *dev, uint64_t addr, uint64_t val,
                   unsigned size);
uint64_t fz_mmio_read(FzMmio *bar, DeviceState *dev, uint64_t addr, unsigned size);

/* QOM properties the device registers (error injection), settable as with qom-set. */
typedef struct FzProp {
    const char *name;
    char *(*get_str)(Object *, Error **);
    void (*set_str)(Object *, const char *, Error **);
    ObjectPropertyAccessor *get;
    ObjectPropertyAccessor *set;
    bool (*get_bool)(Object *, Error **);
    void (*set_bool)(Object *, bool, Error **);
    void *opaque;
} FzProp;

#define FZ_MAX_PROPS        16
extern FzProp fz_props[FZ_MAX_PROPS];
extern unsigned fz_n_props;
/* Set a string property to str, or a uint32 one to u32; false if refused. */
bool fz_prop_set(Object *obj, const FzProp *p, const char *str, uint32_t u32);
void fz_prop_get(Object *obj, const FzProp *p);
/* Was an error set?  Clears it. */
bool fz_error_clear(Error **errp);

/* ---- tracing ------------------------------------------------------------------------------ */

void fz_trace_enable(bool on);

/* ---- reporting ------------------------------------------------------------------------------ */

/* A broken invariant: print, then abort so that libFuzzer saves the input. */
void G_GNUC_PRINTF(1, 2) G_NORETURN fz_bug(const char *fmt, ...);

#endif /* PIB_FUZZ_ENV_H */
