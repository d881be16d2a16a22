/*
 * pib HCA device model - the data-path objects and their limits
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * What the device keeps for each object the driver creates through the admin
 * queue: PDs, MRs and memory windows (pib-mr.c), CQs (pib-cq.c), SRQs
 * (pib-srq.c) and QPs with the state of their three engines, requester
 * (pib-req.c), completer (pib-comp.c) and responder (pib-resp.c).  The
 * formats these objects read and write in guest memory (WQEs, CQEs, rings)
 * are defined in include/pib_wqe.h; the device as a whole (PibState) and the
 * functions are in pib-internal.h, which includes this file.
 */

#ifndef HW_PIB_OBJECTS_H
#define HW_PIB_OBJECTS_H

#include "qemu/queue.h"
#include "qemu/timer.h"

#include "../include/pib_hw.h"
#include "../include/pib_wqe.h"
#include "../fabric/pib-fabric.h"  /* PibGrhAddr, PibPacket */

typedef struct PibState PibState;

/*
 * Data-path limits.  QUERY_DEVICE reports them; every admin command and WQE
 * is checked against them, so every allocation the guest can cause is
 * bounded.  Each object's state lives here, in QEMU's memory, and each
 * table is an array of max + 1 pointers allocated at realize
 * (docs/reference/hardware.md, "Limits", has them against mlx5's):
 *  - a PD, an MR, a CQ or an SRQ costs the device at most a few hundred bytes
 *    (an MR's and a ring's page lists count against the MTT below): MR
 *    indices go up to the windows' (PIB_MW_INDEX_BASE), CQs to the deepest
 *    CEQ (one CEQE per CQ and arming, so a CEQ of PIB_QUEUE_MAX_DEPTH never
 *    overflows), PDs and SRQs to tables of 512 KiB and 32 KiB;
 *  - a QP costs some 11 KiB (the engines' state, the WQE window), and the
 *    link's "room again" wakeup walks the QP table: 1024 of them.
 */
#define PIB_MAX_PD              65536
#define PIB_MAX_MR              0xffff
#define PIB_MAX_CQ              PIB_QUEUE_MAX_DEPTH
#define PIB_MAX_QP              1024    /* RC/UC/UD QPs, plus the GSI QP */
#define PIB_MAX_SRQ             4096
#define PIB_MAX_MW              1024
#define PIB_MAX_XRCD            256
/*
 * Keys are index << 8 | key byte.  MR indices are 1..PIB_MAX_MR; memory
 * windows take indices from PIB_MW_INDEX_BASE on, so one look at an rkey's
 * index tells which table it names.
 */
#define PIB_MW_INDEX_BASE       0x10000
QEMU_BUILD_BUG_ON(PIB_MAX_MR >= PIB_MW_INDEX_BASE);
QEMU_BUILD_BUG_ON(PIB_MW_INDEX_BASE + PIB_MAX_MW > 0xffffff);  /* 24-bit key index */
#define PIB_MAX_RD_ATOM         16      /* max_qp_[init_]rd_atom */
/*
 * Pages of all page lists together (the "MTT"): 16 GiB of 4 KiB pages, 32 MiB of
 * list in the device.  MRs' lists count against it, and so do the rings' (CQs, SQs,
 * RQs, SRQs), as the queue buffers of mlx4 and mlx5 take MTT entries: the ring
 * depths (include/pib_hw.h) are the hardware class's, a CQ of PIB_MAX_CQE
 * timestamped CQEs lists 65537 pages, and this keeps what a guest can make the
 * device hold bounded whatever the depths.
 */
#define PIB_MAX_MTT_PAGES       (1u << 22)
#define PIB_MAX_MR_SIZE         ((uint64_t)PIB_MAX_MTT_PAGES << PIB_PAGE_SHIFT)
#define PIB_PORT_MTU_ENUM       5       /* IB MTU 4096 */

/* QP numbers: QP0 and QP1 (fabric/pib-packet.h), then the rest. */
#define PIB_QPN_FIRST           2
#define PIB_QPN_LIMIT           (PIB_QPN_FIRST + PIB_MAX_QP)   /* exclusive */

/*
 * An object table (pib-table.c): the objects of one type by the numbers the driver names them
 * by, first..max.  Every type keeps its objects in one (PibState).  Keyed tables (MRs,
 * windows) also keep each index's last key byte: a reused index gets a new key, so stale
 * keys fail.
 */
typedef struct PibTable {
    uint32_t first;         /* the lowest valid number: 1, or 0 for QPs (QP0) */
    uint32_t max;           /* the highest */
    void **obj;             /* [max + 1]; NULL: free */
    uint8_t *key;           /* [max + 1] in a keyed table, else NULL */
} PibTable;

/*
 * Data-path objects (pib-pd.c, pib-mr.c, pib-cq.c, pib-srq.c, pib-qp.c)
 */

typedef struct PibPd {
    uint32_t pdn;
    uint32_t refcnt;        /* MRs and QPs using it: DESTROY_PD says BUSY */
} PibPd;

/* An XRC domain (pib-pd.c): the XRC SRQs and XRC_TGT QPs in it may serve each other. */
typedef struct PibXrcd {
    uint32_t xrcd;
    uint32_t refcnt;        /* SRQs and QPs in it: DEALLOC_XRCD says BUSY */
} PibXrcd;

/*
 * A device-memory allocation (pib-dm.c): length bytes from byte start of the device memory,
 * in whole pages.  MRs over it (REG_DM_MR) count in refcnt.
 */
typedef struct PibDm {
    uint32_t dm;
    uint32_t refcnt;        /* MRs in it: DEALLOC_DM says BUSY */
    uint64_t start;         /* byte offset in the device memory, page aligned */
    uint64_t length;        /* as ALLOC_DM was given it */
} PibDm;

/*
 * An MR: [iova, iova + length) -> the pages of its page list, or with dm set, the device
 * memory from byte dm_addr on (REG_DM_MR).
 */
typedef struct PibMr {
    uint32_t key;           /* lkey == rkey: index << 8 | key byte */
    uint32_t pdn;
    uint32_t access;        /* PIB_ACCESS_* */
    uint32_t flags;         /* PIB_MR_F_* */
    uint64_t iova;
    uint64_t length;
    uint32_t npages;
    uint64_t *pages;        /* guest-physical 4 KiB pages, copied at REG_MR */
    uint32_t max_pages;     /* page list entries it holds (the MTT budget) */
    bool fast_reg;          /* ALLOC_MR: registered by REG_MR WQEs */
    bool invalid;           /* LOCAL_INV / SEND_WITH_INV, or a fast-reg MR */
                            /* not registered yet: its keys fail */
    uint32_t mw_bound;      /* windows bound to it: DEREG_MR says BUSY */
    uint32_t dm;            /* REG_DM_MR: the DM it lies in (0: none) */
    uint64_t dm_addr;       /* ... and where iova is, in bytes of the device memory */
} PibMr;

/*
 * A memory window: unbound (its rkey grants nothing) or bound by a BIND_MW
 * WQE to [addr, addr + length) of an MR, with remote access rights.  A type 2
 * window is bound to the QP that bound it: only that QP's requests may use
 * it, and it is unbound by invalidation (LOCAL_INV, SEND_WITH_INV).
 */
typedef struct PibMw {
    uint32_t key;           /* rkey: index << 8 | key byte */
    uint32_t alloc_key;     /* the rkey ALLOC_MW returned (DEALLOC_MW) */
    uint32_t pdn;
    uint8_t type;           /* 1 or 2 */
    bool bound;
    uint32_t mr_key;        /* the MR it lies in */
    uint64_t addr;
    uint64_t length;
    uint32_t access;        /* PIB_ACCESS_REMOTE_* */
    uint32_t qpn;           /* type 2: the QP it is bound to */
} PibMw;

/*
 * A ring in guest memory: depth entries of 2^stride_log bytes on the pages
 * of a page list (copied at creation).  An entry never straddles pages.
 */
typedef struct PibRing {
    uint32_t depth;         /* power of two */
    uint32_t stride_log;
    uint32_t npages;
    uint64_t *pages;
} PibRing;

typedef enum PibCqArm {
    PIB_CQ_DISARMED,
    PIB_CQ_ARMED_NEXT,      /* next completion of any kind */
    PIB_CQ_ARMED_SOLICITED, /* next solicited or unsuccessful completion */
} PibCqArm;

typedef struct PibCq {
    uint32_t cqn;
    uint32_t uar;
    PibRing ring;           /* depth 32-byte CQEs */
    uint64_t ci_record;     /* guest address of the consumer index record */
    uint32_t pi;            /* CQEs written (free-running) */
    uint32_t ci;            /* consumer index as last learned */
    uint8_t arm;            /* PibCqArm */
    bool sol_valid;         /* last_sol names a solicited/error CQE */
    uint32_t last_sol;
    bool error;             /* overflowed: no more CQEs, CQ_ERR raised */
    bool notify_pending;    /* an arm doorbell found CQEs already there */
    uint32_t refcnt;        /* QPs using it: DESTROY_CQ says BUSY */
    QTAILQ_ENTRY(PibCq) notify_next;
    struct PibState *s;
    /* Event moderation (MODIFY_CQ, pib_hw.h): the values, and the wait in progress. */
    uint16_t mod_count;
    uint16_t mod_period_us;
    /*
     * Completions that satisfied the arm since the wait began.  Never non-zero while the CQ
     * is disarmed: only an armed CQ starts a wait, and the event that ends it disarms.
     */
    uint32_t mod_held;
    QEMUTimer *mod_timer;   /* the wait's end, while mod_held > 0 */
} PibCq;

/*
 * Queue pairs
 */

/* A work queue: a ring the driver produces (doorbell), the device consumes */
typedef struct PibWq {
    PibRing ring;
    uint32_t pi;            /* producer index from the last doorbell */
    uint32_t ci;            /* WQEs the device has completed */
    uint32_t max_sge;       /* what a slot holds, at most PIB_MAX_SGE */
    uint64_t dbrec;         /* an RQ's doorbell record (guest address), 0: none */
} PibWq;

/* A scatter/gather element, host order. */
typedef struct PibSge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
} PibSge;

/* Address vector (primary path). */
typedef struct PibAv {
    uint16_t dlid;
    uint8_t sl;
    uint8_t src_path_bits;
    uint8_t static_rate;
    bool grh;               /* the GRH fields below are valid: packets carry a GRH */
    uint8_t sgid_index;
    PibGrhAddr g;
} PibAv;

/* A send WQE as fetched and checked (host order). */
typedef struct PibSendWqe {
    uint8_t opcode;         /* enum pib_wqe_opcode */
    uint8_t flags;          /* PIB_WQE_F_* */
    uint8_t imm[4];         /* ImmDt, bytes as on the wire */
    uint64_t wr_id;
    uint64_t remote_addr;
    uint32_t rkey;
    uint64_t compare_add;
    uint64_t swap;
    uint32_t xrc_srqn;      /* XRC_INI: the XRCETH's SRQ */
    uint32_t ud_qpn;
    uint32_t ud_qkey;
    uint16_t ud_dlid;
    uint8_t ud_sl;
    uint16_t ud_pkey_index;  /* GSI only */
    bool ud_grh;             /* the address vector has a GRH: ud_av */
    PibAv ud_av;             /* its GRH fields (and dlid, sl) */
    uint32_t num_sge;
    PibSge sge[PIB_MAX_SGE];
    uint32_t inline_len;
    uint8_t inline_data[PIB_MAX_INLINE_DATA];
    uint64_t length;        /* message length: SGE or inline bytes */
    union {                 /* BIND_MW, REG_MR: the control segment, raw */
        struct pib_bind_mw_wqe bind;
        struct pib_reg_mr_wqe reg;
    };
} PibSendWqe;

/* A receive WQE as fetched and checked (from the QP's RQ or its SRQ). */
typedef struct PibRecvWqe {
    uint64_t wr_id;
    uint32_t num_sge;
    PibSge sge[PIB_MAX_SGE];
    uint64_t length;        /* room in the SGEs */
    uint32_t idx;           /* ring index it came from (the CQE's wqe_index) */
    uint32_t pdn;           /* PD its lkeys belong to: the QP's, or the SRQ's */
} PibRecvWqe;

/*
 * A shared receive queue: a ring the driver produces (SRQ doorbell) and the
 * responders of its QPs consume.  A WQE is copied into the QP that takes it,
 * so its slot is free once that QP's receive completion appears.
 */
typedef struct PibSrq {
    uint32_t srqn;
    uint32_t uar;
    uint32_t pdn;
    PibRing ring;
    uint32_t max_sge;
    uint32_t pi;            /* producer index from the last doorbell or record */
    uint32_t ci;            /* WQEs taken by QPs */
    uint64_t dbrec;         /* its doorbell record (guest address), 0: none */
    uint32_t limit;         /* > 0: SRQ_LIMIT armed */
    uint32_t refcnt;        /* QPs using it: DESTROY_SRQ says BUSY */
    uint32_t xrcd;          /* an XRC SRQ: its domain; 0: a plain SRQ */
    PibCq *cq;              /* an XRC SRQ: where its receives complete */
} PibSrq;

/* Where a started send WQE stands. */
typedef enum PibWqeState {
    PIB_WQE_POSTED,         /* not (or no longer) started by the requester */
    PIB_WQE_PENDING,        /* all packets sent, waiting for the ACK/response */
    PIB_WQE_DONE,           /* needs no response (UC/UD): complete in order */
    PIB_WQE_ERROR,          /* failed locally: complete with status, ERR */
} PibWqeState;

/*
 * What the device remembers of a send WQE between starting it and
 * completing it.  A small ring (PibQp.meta, PIB_SQ_WINDOW entries at most)
 * bounds how many WQEs the requester runs ahead of the completer.
 */
typedef struct PibWqeMeta {
    uint64_t wr_id;
    uint32_t length;
    uint32_t first_psn;
    uint32_t last_psn;
    uint8_t opcode;         /* enum pib_wqe_opcode */
    uint8_t flags;
    uint8_t state;          /* PibWqeState */
    uint8_t status;         /* enum pib_cqe_status, for PIB_WQE_ERROR */
    bool rd_atomic;         /* counted in PibReq.rd_atomic */
    bool local;             /* BIND_MW / REG_MR / LOCAL_INV: at once, no PSN */
} PibWqeMeta;

#define PIB_SQ_WINDOW           256


/*
 * Requester (pib-req.c).  The meta ring is valid for SQ indices
 * [sq.ci, wqe_max): what the requester started, even if go-back-N rewound
 * wqe_idx since.
 */
typedef struct PibReq {
    uint32_t wqe_idx;       /* SQ index of the WQE being sent */
    uint64_t offset;        /* bytes of it already sent */
    uint32_t psn;           /* next PSN to send */
    uint32_t wqe_max;       /* one past the newest WQE ever started */
    uint32_t psn_max;       /* one past the newest PSN ever sent */
    uint32_t rd_atomic;     /* READ/ATOMIC WQEs outstanding */
    uint32_t since_ackreq;  /* packets since the last AckReq */
    bool wqe_valid;         /* wqe holds SQ entry wqe_cached */
    uint32_t wqe_cached;
    PibSendWqe wqe;
    bool wait_tx;           /* stopped on a full transmit queue */
    bool error;             /* a WQE failed locally: stopped until ERR */
} PibReq;

/* Completer (pib-comp.c), and the timers of the requesting side. */
typedef struct PibComp {
    uint32_t psn;           /* oldest PSN not yet acknowledged */
    uint8_t retry_left;
    uint8_t rnr_retry_left;
    bool timeout;           /* the retransmit timer fired */
    bool rnr_wait;          /* requester paused by an RNR NAK */
    QEMUTimer *retrans_timer;   /* fires no later than retrans_deadline */
    int64_t retrans_deadline;   /* QEMU_CLOCK_VIRTUAL ns; 0: not running */
    QEMUTimer *rnr_timer;
    bool wqe_valid;         /* wqe holds SQ entry wqe_cached */
    uint32_t wqe_cached;
    PibSendWqe wqe;
} PibComp;

/* A READ or atomic the responder executed: replies and the replay cache. */
typedef enum PibResState {
    PIB_RES_FREE,
    PIB_RES_PENDING,        /* READ: responses still to send; atomic: its answer */
    PIB_RES_DONE,           /* replied; kept for duplicate requests */
} PibResState;

typedef struct PibRdRes {
    uint8_t state;          /* PibResState */
    bool atomic;
    uint32_t psn;           /* first PSN of the request */
    uint32_t last_psn;      /* READ: last response PSN */
    uint32_t cur_psn;       /* READ: next response to send */
    uint64_t va;            /* READ: where cur_psn's data starts */
    uint32_t rkey;
    uint32_t pdn;           /* READ: the PD the rkey must be in */
    uint32_t resid;         /* READ: bytes still to send */
    bool first;             /* READ: the next response starts the reply */
    bool replay;            /* READ: answering a duplicate request again */
    bool answered;          /* the whole answer left once (pib_resp_chk_resource) */
    uint64_t seq;           /* order of arrival, for sending in order */
    uint64_t orig;          /* atomic: the original value (replay cache) */
} PibRdRes;

/* Responder (pib-resp.c). */
typedef struct PibResp {
    uint32_t psn;           /* expected PSN */
    uint32_t msn;           /* messages completed */
    int opcode;             /* last opcode of the message in progress, or -1 */
    bool nak_seq_sent;      /* a PSN sequence NAK for the current gap */
    uint32_t unacked;       /* packets accepted since the last ACK */
    bool uc_drop;           /* UC: drop until the next FIRST/ONLY */
    bool comm_est;          /* COMM_EST raised */
    bool rwqe_valid;        /* rwqe holds RQ entry rq.ci */
    PibRecvWqe rwqe;
    uint64_t offset;        /* SEND: bytes placed in rwqe */
    uint64_t write_va;      /* WRITE: next address */
    uint32_t write_rkey;
    uint32_t write_resid;   /* WRITE: bytes still expected */
    uint32_t write_len;     /* WRITE: DMA length from the RETH */
    PibSrq *rwqe_srq;       /* the SRQ rwqe came from (its CQ, for an XRC_TGT QP) */
    PibRdRes res[PIB_MAX_RD_ATOM];
    uint32_t res_next;      /* slot for the next READ/ATOMIC */
    uint64_t res_seq;
    /*
     * Responses leave in PSN order: an ACK, RNR NAK or sequence NAK for a later request waits
     * here while READ responses (or an atomic's answer) before it are still to be sent, and
     * pib_resp_run() sends it after them.  Only the latest counts: ACKs are cumulative.
     */
    bool ack_deferred;
    uint32_t ack_psn;
    uint8_t ack_syndrome;
    bool becn_owed;         /* a request came with FECN: the next response says BECN */
} PibResp;

/*
 * An index into the congestion control table (pib-cca.c): a QP's own, or an SL's.  It falls
 * by one every CCTI_Timer from since_ns on, which cca_index() in pib-cca.c works out when asked.
 */
typedef struct PibCcaIndex {
    uint16_t ccti;
    uint8_t sl;             /* whose CCTI_Timer and CCTI_Min lower it: the last SL raised */
    int64_t since_ns;       /* QEMU_CLOCK_VIRTUAL: when ccti was last brought up to date */
} PibCcaIndex;

typedef struct PibQp {
    struct PibState *s;
    uint32_t qpn;
    uint32_t uar;
    uint32_t pdn;
    uint32_t xrcd;          /* XRC_TGT: its domain; 0 otherwise */
    uint8_t type;           /* enum pib_qp_type */
    uint8_t state;          /* enum pib_qp_state */
    bool sig_all;
    bool no_rq;
    PibCq *scq;             /* NULL for XRC_TGT */
    PibCq *rcq;             /* NULL for XRC_INI and XRC_TGT */
    PibSrq *srq;            /* receives come from here (no RQ), or NULL; an */
                            /* XRC_TGT QP's come from the SRQ each request names */
    PibWq sq;
    PibWq rq;
    uint32_t max_inline;

    /* Attributes (MODIFY_QP) */
    uint8_t path_mtu;       /* IB enum 1..5 */
    uint8_t timeout;
    uint8_t retry_cnt;
    uint8_t rnr_retry;
    uint8_t min_rnr_timer;
    uint8_t max_rd_atomic;
    uint8_t max_dest_rd_atomic;
    uint8_t port_num;
    uint16_t pkey_index;
    uint32_t qkey;
    uint32_t dest_qpn;
    uint32_t access;        /* PIB_ACCESS_REMOTE_* */
    uint32_t sq_psn;        /* as last set, for QUERY_QP */
    uint32_t rq_psn;
    bool en_sqd_async;
    bool sq_draining;       /* SQD entered, outstanding work not yet done */
    PibAv av;

    PibWqeMeta *meta;
    uint32_t meta_size;     /* power of two: min(sq depth, PIB_SQ_WINDOW) */

    PibReq req;
    PibComp comp;
    PibResp resp;

    /* Congestion control (pib-cca.c): the QP's index, when its next packet may leave. */
    PibCcaIndex cca;
    int64_t cca_next_ns;    /* 0: at once */
    QEMUTimer *cca_timer;   /* schedules the QP when its delay is over */

    bool on_runlist;
    QTAILQ_ENTRY(PibQp) run_next;
} PibQp;

#endif /* HW_PIB_OBJECTS_H */
