/*
 * pib fuzzing - what the files of the link fuzzer share
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The link fuzzer is three files around the device model and its stand-in
 * for QEMU (qemu-stubs.c, fuzz-env.h):
 *
 *   pib-link-fuzz.c   the libFuzzer entry points, the input format and its
 *                     decoders (packets from the peer, the ops), the seeds
 *   fuzz-harness.c    the fixture: the device as a driver leaves it, and the
 *                     driver's actions on it (admin commands, WQEs, doorbells)
 *   fuzz-harness.h    this header: the fixture's constants, its state (one
 *                     global, fz), the configuration bytes and the send WQE
 *                     record that both files read, and the fixture's functions
 */
#ifndef PIB_FUZZ_HARNESS_H
#define PIB_FUZZ_HARNESS_H

#include "hw/pib/hca/pib-internal.h"   /* as staged by build.sh */
#include "fuzz-env.h"

#define FZ_LID          1           /* ours */
#define FZ_PEER_LID     2
#define FZ_NODE_GUID    0x0002c903000abcd0ull
#define FZ_PEER_GUID    0x0002c90300011110ull
#define FZ_AQ_DEPTH     64
#define FZ_EQ_DEPTH     64
#define FZ_CQ_DEPTH     256
#define FZ_TINY_CQ      4           /* FZ_CFG3_TINY_CQ */
#define FZ_SQ_DEPTH     32
#define FZ_SQ_STRIDE    7           /* 128 bytes: control segment + 4 SGEs */
#define FZ_RQ_DEPTH     32
#define FZ_RQ_STRIDE    6           /* 64 bytes: header + 3 SGEs */
#define FZ_SRQ_DEPTH    32
#define FZ_QKEY         0x11111111u
#define FZ_PEER_QPN     0x77
#define FZ_FRAME_MAX    (PIB_LINK_HDR_LEN + PIB_LINK_MAX_PAYLOAD + 256)
#define FZ_BIG_PAGES    80
#define FZ_OUTSIDE_RAM  0x100000000ull  /* 4 GiB: nothing there */
#define FZ_FR_IOVA      0x7f1800000000ull /* where REG_MR WQEs map the fast-reg MR */

/* The QPs every input starts with. */
typedef enum FzTarget {
    T_RC, T_RC_SRQ, T_UC, T_UD, T_GSI, T__MAX
} FzTarget;

/* The MRs: which PD, what access, what the pages are to the device. */
typedef enum FzMrId {
    M_RW,       /* QPs' PD, all rights: the RDMA and atomic target */
    M_RO,       /* QPs' PD, REMOTE_READ only: never written */
    M_RECV,     /* QPs' PD, LOCAL_WRITE: receive buffers */
    M_OTHER,    /* other PD, all rights: never written (PD check) */
    M_PHYS,     /* other PD, physical (all of RAM): never used (PD check) */
    M_BIG,      /* QPs' PD, all rights, 320 KiB: long READs and WRITEs */
    M_BAD,      /* QPs' PD, all rights, pages outside RAM: every DMA fails */
    M__MAX
} FzMrId;

/* Keys a structured packet can carry (FzPktRec.keysel). */
typedef enum FzKey {
    K_MR,               /* K_MR + FzMrId: that MR's rkey */
    K_MW2 = M__MAX,     /* the type 2 window */
    K_MW1,              /* the type 1 window */
    K_STALE,            /* M_RW's rkey with another key byte */
    K_RAW,              /* FzPktRec.raw32 */
    K_FR,               /* the fast-registration MR (as last registered) */
    K__MAX
} FzKey;

typedef struct FzMr {
    uint32_t key;
    uint64_t iova;
    uint64_t len;
    uint32_t pdn;
    uint32_t access;
    uint32_t flags;
    uint32_t npages;
    uint64_t pbl;
    bool registered;
} FzMr;

typedef struct FzRing {
    uint64_t base;          /* contiguous pages */
    uint32_t depth;
    uint32_t stride_log;
    uint64_t dbrec;         /* receive rings: the doorbell record, 0: none */
} FzRing;

typedef struct FzQp {
    uint32_t qpn;           /* 0: does not exist (destroyed) */
    uint32_t old_qpn;       /* what it was, for packets to a stale QPN */
    uint8_t type;           /* enum pib_qp_type */
    FzRing sq, rq;
    uint64_t sq_pbl, rq_pbl;
    uint32_t dest_qpn;
    uint16_t dlid;
    uint32_t rq_psn, sq_psn;
} FzQp;

typedef struct FzCq {
    uint32_t cqn;
    uint64_t ring;
    uint64_t record;        /* consumer index record page */
    uint64_t pbl;
} FzCq;

/* Configuration: the first four bytes of an input. */
typedef struct QEMU_PACKED FzConfig {
    uint8_t flags;          /* [2:0] path MTU choice, [3] post sends at setup,
                             * [5:4] FzTxMode, [6] RC loopback, [7] small reads */
    uint8_t rx_chunk;       /* with [7]: the link hands over 1 + rx_chunk bytes
                             * at most per read */
    uint8_t flags2;         /* FZ_CFG2_* */
    uint8_t flags3;         /* FZ_CFG3_* */
} FzConfig;

#define FZ_CFG_POST_SENDS   0x08
#define FZ_CFG_LOOPBACK     0x40
#define FZ_CFG_SMALL_READS  0x80
#define FZ_CFG2_GRH         0x01    /* RC and UC address vectors with a GRH */
#define FZ_CFG2_NO_RECV     0x02    /* no receive WQEs posted at setup */
#define FZ_CFG2_NO_TIMEOUT  0x04    /* RC: local ACK timeout 0 (infinite) */
#define FZ_CFG2_NO_RD_ATOM  0x08    /* RC: max_dest_rd_atomic 0 */
#define FZ_CFG2_RTR         0x10    /* RC-SRQ stays in RTR */
#define FZ_CFG2_RNR_FOREVER 0x20    /* RC: rnr_retry 7 (infinite) */
#define FZ_CFG2_SIG_ALL     0x40    /* every QP signals every send WQE */
#define FZ_CFG2_LMC         0x80    /* our LID with LMC 2 (four LIDs) */
#define FZ_CFG3_TINY_CQ     0x01    /* CQs of 4 entries: they overflow */
#define FZ_CFG3_CQ_NOT_RAM  0x02    /* the receive CQ's ring is not RAM */
#define FZ_CFG3_NO_LID      0x04    /* the port starts without a LID (INIT);
                                     * an SM sets it through the SMA */
#define FZ_CFG3_CHARDEV     0x08    /* link-direct=off: the chardev's own
                                     * reads (else the device reads the
                                     * socket directly) */
#define FZ_CFG3_DOORBELL    0x10    /* the peer's HELLO offers a doorbell
                                     * (with no descriptor: the device
                                     * must go on polling) */
/*
 * Credits (include/pib_link.h, "Credits"): they run when both HELLOs offer
 * them and one asks.  [6:5] of flags3:
 *   0  the peer offers none; the device's link-credits is auto (the default)
 *   1  FZ_CFG3_CREDITS: the peer offers and asks (CREDITS_ON), auto: they run
 *   2  FZ_CFG3_DEV_CREDITS: the peer offers, the device's link-credits=on
 *      asks: they run
 *   3  the peer offers as a switch port, link-credits=off: they do not run
 * While they run the peer grants as a receiver whose buffer is always empty
 * (fz_credit_topup: its whole window once the HELLOs are in, and again
 * whenever the device is down to half of it or a FLOW op lied), unless it
 * withholds: then only FLOW ops grant.  With any of 1-3, an SM has mapped SL
 * s to VL s % 4 and weighed VL0-VL3 in the VLArbitrationTables, and the QPs
 * use SLs 0-3, so the device's transmit VL queues and its VL arbitration run,
 * not only VL0's queue.
 */
#define FZ_CFG3_CREDITS     0x20
#define FZ_CFG3_DEV_CREDITS 0x40
#define FZ_CFG3_CREDITS_MASK 0x60
#define FZ_CFG3_WITHHOLD    0x80    /* the peer grants nothing by itself */

typedef struct Fz {
    PibState *s;
    PCIDevice *pci;
    FzConfig cfg;
    uint8_t mtu;            /* IB enum */
    bool loopback;          /* RC and RC-SRQ are connected to each other */
    uint64_t aq_sq, aq_cq, aeq, ceq, resp, mbox;
    uint32_t uar, pd, pd2;
    FzMr mr[M__MAX];
    uint64_t mr_rw_pages[3];
    uint32_t mw2, mw1;      /* rkeys of the windows (as last bound) */
    uint32_t fr;            /* the fast-reg MR's key (as last registered) */
    FzCq scq, rcq;
    uint32_t srqn;
    FzRing srq;
    uint64_t srq_pbl;
    FzQp qp[T__MAX];
    uint32_t xsrqn;         /* the XRC SRQ (fz_xrc_setup) */
    FzRing xsrq;
    uint64_t xsrq_pbl;
    FzQp xtgt;              /* the XRC target QP */
    uint32_t wr_id;
    uint8_t last_frame[FZ_FRAME_MAX];
    uint32_t last_len;
} Fz;

/* The device and what the fixture made of it; fz_setup() starts it afresh. */
extern Fz fz;

/* Send WQEs the fuzzer can post: one per enum pib_wqe_opcode, some variants. */
typedef struct QEMU_PACKED FzSendRec {
    uint8_t target;         /* FzTarget */
    uint8_t opcode;         /* enum pib_wqe_opcode (mod PIB_WQE_OPCODE_MAX) */
    uint8_t flags;          /* PIB_WQE_F_*; [4] the big MR, len * 8;
                             * [5] the MR whose pages are not RAM;
                             * [6] unsignaled; [7] the read-only MR */
    uint8_t num_sge;        /* 0: one; else num_sge (may exceed the slot) */
    uint16_t len;
    uint16_t ud_dlid;       /* UD: 0 = the peer */
} FzSendRec;

/*
 * The driver's side: registers, the admin queue, WQEs, doorbells
 */

static inline DeviceState *fz_dev(void)
{
    return DEVICE(fz.s);
}

static inline void reg_write(uint32_t reg, uint32_t val)
{
    fz_mmio_write(&fz_bar_regs, fz_dev(), reg, val, 4);
}

static inline void uar_write(uint32_t reg, uint32_t obj, uint32_t index)
{
    fz_mmio_write(&fz_bar_uar, fz_dev(),
                  (uint64_t)fz.uar * PIB_UAR_PAGE_SIZE + reg,
                  (uint64_t)index << PIB_DB_INDEX_SHIFT | obj, 8);
}

static inline bool fz_ready(void)
{
    return fz.s->regs.status & PIB_STATUS_READY;
}

/* One admin command through the admin queue: its status, or 0xff, 0xfe (fuzz-harness.c). */
uint8_t fz_admin(struct pib_admin_cmd *cmd, uint32_t *r0, uint32_t *r1);
/* A command whose only input is an object number (DESTROY_*, DEREG_MR, ...). */
uint8_t fz_obj_cmd(uint8_t opcode, uint32_t num);
/* Register MR id as described in fz.mr[id]; its key lands there. */
uint8_t fz_reg_mr(FzMrId id);
/* One MAD through MAD_IFC: PIB_MAD_IFC_* in *result, the response in out. */
uint8_t fz_mad_ifc(const void *mad, uint32_t *result, void *out);
/* An SM's sweep: a port in INIT with a LID is armed, then activated. */
void fz_sm_sweep(void);
/* MODIFY_QP to state, with the attributes of a in mask. */
uint8_t fz_modify(FzQp *q, uint8_t state, uint32_t mask, struct pib_qp_attr *a);
/* RESET -> INIT -> RTR -> RTS with the attributes the QP type requires. */
bool fz_qp_to_rts(FzQp *q);
/* Create the QP t (again, after a DESTROY_QP: it gets a new QPN). */
bool fz_create_qp(FzTarget t);
/* The device's QP t, or NULL if it is destroyed. */
PibQp *fz_pibqp(FzTarget t);
/*
 * Post up to n receive WQEs on t's RQ, its SRQ, or with t == T__MAX the XRC
 * SRQ, and ring the doorbell; kind picks good and bad ones (fuzz-harness.c),
 * and, on a ring with a doorbell record, whether the record alone announces
 * them and whether it lies.
 */
void fz_post_recv(FzTarget t, unsigned n, uint8_t kind);
/* Post the send WQE r describes and ring the SQ doorbell. */
void fz_post_send(const FzSendRec *r);
/* Bind a window with a BIND_MW WQE on the RC QP (no packet). */
void fz_bind(bool type1);

/*
 * The fixture
 */

/* The peer's HELLO of that protocol version; flags_xor flips PIB_HELLO_F_* the config gives. */
void fz_peer_hello(uint32_t version, uint32_t flags_xor);
/* A FLOW frame from the peer: its header says len bytes, and len bytes of fc follow (any
 * length: 1-15 whole entries is a valid one), padded with 0xa5 past n entries. */
void fz_peer_flow(const struct pib_link_fc *fc, unsigned n, unsigned len);
/* The FLOW frame of a peer whose buffer is empty: every data VL's FCCL the device's FCTBS
 * plus the whole window, its FCTBS the device's ABR (what the device received from it). */
void fz_peer_grant(void);
/* While credits run, unless FZ_CFG3_WITHHOLD: grant again if the device is down to half a
 * window on some VL (or a lie left it without credit), at a frame boundary only. */
void fz_credit_topup(void);
/* The peer (re)connects, as a socket chardev with reconnect=1 would. */
void fz_link_up(void);
/* BAR0 as the driver programs it, then ENABLE. */
void fz_enable(void);
/* Everything after BAR0 programming: the objects and their states. */
void fz_objects(void);
/* A fresh device, set up as a driver leaves it, for an input that starts with cfg. */
void fz_setup(FzConfig cfg);
/* Everything still pending finishes: bottom halves, the socket, timers. */
void fz_settle(void);
/* The device's exit, then what must hold after it (nothing left in the loop, canaries). */
void fz_teardown(void);

#endif /* PIB_FUZZ_HARNESS_H */
