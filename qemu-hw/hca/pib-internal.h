/*
 * pib HCA device model - state shared by the model's source files
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The hardware interface (registers, admin queue, AEQ, UAR doorbells, WQE and
 * CQE formats, link frames, packet headers) is defined once in
 * include/pib_hw.h, include/pib_wqe.h and include/pib_link.h.  This header
 * only holds the model's private state and the functions the source files
 * call in each other; the data-path objects (PD, MR, MW, CQ, SRQ, QP and its
 * engines' state) and their limits are in pib-objects.h, the link's in
 * pib-link.h, the management agents' in pib-mgmt.h.  The files, one per
 * object as in the driver:
 *
 *   pib.c         the PCI function: BAR0 registers, CONTROL, reset, the DMA
 *                 helpers (ring entries, page lists), MSI-X, QOM glue
 *   pib-com.c     the admin queue engine, the AEQ and the CEQ, the commands
 *                 about the device itself (QUERY_DEVICE, ALLOC_UAR, ...)
 *   pib-link.c    the link: chardev framing (HELLO/PACKET), receive, events;
 *                 pib-link-tx.c its frame buffers and transmit queue;
 *                 pib-hca-link.c the HCA's side of it and pib_xmit()
 *   pib-port.c    the port: its state machine, and the port as the management
 *                 agents see it (MAD_IFC, QUERY_PORT, SET_PORT, traps, events)
 *   pib-sma.c     the subnet management agent (pib-mgmt.h); its ports' state
 *                 and traps in pib-sma-port.c
 *   pib-pma.c     the performance management agent (pib-mgmt.h)
 *   pib-mcast.c   multicast groups: attaching QPs, delivering to them
 *   pib-mr.c      PDs, MRs and memory windows: their commands, key and range
 *                 checks, DMA through MRs
 *   pib-mr-wqe.c  the send queue's memory operations: BIND_MW, REG_MR (fast
 *                 registration), invalidation
 *   pib-cq.c      CQs: their commands, CQE writes, overflow, arming,
 *                 completion events (CEQ)
 *   pib-srq.c     SRQs: their commands, taking WQEs, the limit event
 *   pib-qp.c      QPs: CREATE_QP, DESTROY_QP
 *   pib-qp-state.c  the QP state machine: MODIFY_QP (the IBTA table),
 *                 QUERY_QP, entering ERR
 *   pib-wqe.c     fetching and checking WQEs, completing and flushing them
 *   pib-sched.c   UAR doorbells (BAR2), the run list and the work bottom
 *                 half, the RC timers
 *   pib-pkt.c     IB packet headers: build, parse, validate; receive dispatch
 *   pib-req.c     requester: send WQEs -> request packets
 *   pib-resp.c    responder: request packets -> memory, receive CQEs, ACKs
 *                 (its state machine's types in pib-resp.h)
 *   pib-resp-rdatom.c  the responder's READ and atomics: executing them, the
 *                 replay cache, sending READ responses
 *   pib-comp.c    completer: ACKs and responses -> send CQEs, retries
 *   pib-inject.c  error injection: QOM properties, and the hooks the engines
 *                 call (failed WQEs, lost packets, late interrupts)
 *   pib-switch.c  the switch (-device pib-switch): its ports' links, forwarding;
 *                 pib-switch-mad.c its directed route and own MADs; it shares the link, the SMA/PMA and the
 *                 packet headers with the HCA (docs/how-to/switch.md)
 *
 * Threading: the whole model runs in QEMU's main loop under the BQL: MMIO
 * handlers, bottom halves, timers and chardev callbacks never run
 * concurrently.  No locks are needed, and a read-modify-write of guest memory
 * done in one call (an atomic operation) cannot interleave with any other
 * operation of this device.
 */
#ifndef HW_PIB_INTERNAL_H
#define HW_PIB_INTERNAL_H

#include "qemu/log.h"
#include "qemu/queue.h"
#include "qemu/timer.h"
#include "qom/object.h"
#include "pib-compat.h"         /* PCIDevice, DMA, chardev: per QEMU version */

#include "include/pib_hw.h"
#include "include/pib_wqe.h"
#include "include/pib_link.h"
#include "pib-link.h"           /* a port's cable, PibPacket, the port state machine */
#include "include/pib_mad.h"
#include "pib-mgmt.h"
#include "pib-objects.h"        /* the data-path limits and objects: PD ... QP */

#define TYPE_PIB_HCA "pib-hca"
OBJECT_DECLARE_SIMPLE_TYPE(PibState, PIB_HCA)

/*
 * Admin queue as latched at CONTROL.ENABLE.  Indices are free-running u32
 * counters (mod 2^32, like the AQ_DB register); the ring slot is
 * index & (depth - 1).  sq_ci counts the commands the device has executed
 * and completed, so CQ slot i belongs to command i.
 */
typedef struct PibAdminQueue {
    uint32_t depth;
    uint64_t sq_base;       /* 64-byte struct pib_admin_cmd slots */
    uint64_t cq_base;       /* 16-byte struct pib_admin_cqe slots */
    uint32_t sq_pi;         /* producer: last accepted AQ_DB value */
    uint32_t sq_ci;         /* consumer: next command to execute */
} PibAdminQueue;

/* An event queue (AEQ or CEQ) as latched at CONTROL.ENABLE. */
typedef struct PibEventQueue {
    uint32_t depth;         /* 0: none (a CEQ is optional) */
    uint64_t base;
    uint32_t pi;            /* producer: the device */
    uint32_t ci;            /* consumer: the driver, via the doorbell */
    uint64_t lost;          /* entries dropped because the ring was full */
} PibEventQueue;

/* What an admin command returns in its completion. */
typedef struct PibAdminResult {
    uint32_t result0;
    uint32_t result1;
} PibAdminResult;

typedef struct PibPort {
    PibPortSmState sm;
    bool disabled;          /* PortPhysicalState DISABLED: the link does not train */
    uint32_t link_downs;    /* times the link left INIT/ARMED/ACTIVE since reset */
    /*
     * What the SM sets and the SMA reports: LID, LMC, SM LID and SL, M_Key,
     * the P_Key table, CapabilityMask, the violation counters (pib-mgmt.h).
     */
    PibMgmtPort mgmt;
} PibPort;

/*
 * Error injection (pib-inject.c): faults an operator arms through QOM
 * properties.  Not guest state; a function reset keeps it.
 */
typedef struct PibIrqDelay {
    struct PibState *s;
    unsigned vector;
    QEMUTimer *timer;       /* pending: the vector's message is held back */
} PibIrqDelay;

typedef struct PibInject {
    /* inject-wr-error: one send WQE to fail, once */
    bool wr_armed;
    uint32_t wr_qpn;
    uint16_t wr_index;      /* SQ index mod 2^16, as in the CQE */
    uint8_t wr_status;      /* enum pib_cqe_status */
    /* inject-drop-tx, inject-drop-rx, inject-drop-opcode */
    uint32_t drop_tx;       /* packets still to lose */
    uint32_t drop_rx;
    int drop_opcode;        /* only packets with this BTH opcode; -1: any */
    /* inject-irq-delay-us, inject-irq-delay-count */
    uint32_t irq_delay_us;  /* 0: interrupts on time */
    uint32_t irq_delay_count;   /* delays left before irq_delay_us -> 0; */
                                /* 0: no limit */
    PibIrqDelay irq[PIB_MSIX_VECTORS];
} PibInject;

/* A multicast group some QP of this HCA joined (pib-mcast.c); free while nqps is 0. */
typedef struct PibMcastGroup {
    uint8_t mgid[16];
    uint16_t mlid;
    uint32_t nqps;
    uint32_t qpns[PIB_MAX_MCAST_QP];
} PibMcastGroup;

typedef QTAILQ_HEAD(, PibQp) PibQpList;
typedef QTAILQ_HEAD(, PibCq) PibCqList;

struct PibState {
    /*< private >*/
    PCIDevice parent_obj;
    /*< public >*/

    MemoryRegion regs_mr;   /* BAR0 */
    MemoryRegion uar_mr;    /* BAR2 */

    struct pib_regs regs;   /* what BAR0 reads return, host byte order */
    PibAdminQueue aq;
    PibEventQueue aeq;
    PibEventQueue ceq;
    QEMUBH *admin_bh;

    /* Allocated UAR pages; bit 0 (the kernel's page) is always set. */
    unsigned long *uar_bitmap;

    /* Data-path objects, indexed by their number; slot 0 is never used. */
    PibPd *pd[PIB_MAX_PD + 1];
    PibMr *mr[PIB_MAX_MR + 1];
    uint8_t mr_key[PIB_MAX_MR + 1];     /* key byte of each MR index */
    PibMw *mw[PIB_MAX_MW + 1];
    uint8_t mw_key[PIB_MAX_MW + 1];
    PibCq *cq[PIB_MAX_CQ + 1];
    PibSrq *srq[PIB_MAX_SRQ + 1];
    PibXrcd *xrcd[PIB_MAX_XRCD + 1];
    PibQp *qp[PIB_QPN_LIMIT];
    uint32_t next_qpn;                  /* QPNs rotate, so stale ones fail */
    uint32_t mtt_pages;                 /* MR page list entries in use */

    /* The engines' scheduler (pib-sched.c) */
    QEMUBH *work_bh;
    PibQpList runlist;      /* QPs with work for their engines */
    bool work_deferred;     /* pib_rx_run() runs the list when done */
    PibCqList notify_list;  /* CQs with a completion event to raise */

    /* Received packets wait here for pib_rx_run(). */
    QEMUBH *rx_bh;
    PibPacketQueue rxq;
    uint32_t rxq_len;
    bool rx_waiters;        /* a loopback requester stopped on a full rxq */

    /*
     * QUERY_COUNTERS (enum pib_counter): traffic, retransmissions, NAKs, and
     * every dropped packet under exactly one rx_drop_* / tx_drop_* reason.
     */
    uint64_t counters[PIB_CNT_MAX];

    PibMcastGroup mcast[PIB_MAX_MCAST_GRP];
    PibPort port;
    PibMgmtNode mgmt;       /* the node the management agents answer for */
    PibMgmtPort *mgmt_ports[PIB_NUM_PORTS + 1];
    PibLink link;
    PibInject inject;

    /* qdev properties */
    uint64_t node_guid;     /* 0 at realize: see pib_derive_node_guid() */
    uint16_t prop_lid;
};

/*
 * Guest errors: everything the guest does that the hardware interface leaves
 * undefined.  Each one is logged (-d guest_errors), traced (pib_ub_*) and
 * recorded in ERR_COUNT (saturating) and ERR_LAST; then the access is ignored.
 * Never assert on guest values.
 */
void pib_record_guest_error(PibState *s, enum pib_guest_error code);

#define PIB_GUEST_ERR(s, code, trace, fmt, ...)                         \
    do {                                                                \
        (trace_##trace)(__VA_ARGS__);                                   \
        qemu_log_mask(LOG_GUEST_ERROR, "pib: " #trace " in %s: " fmt    \
                      "\n", __func__, ##__VA_ARGS__);                   \
        pib_record_guest_error((s), (code));                            \
    } while (0)

/* 24-bit PSN arithmetic */
static inline uint32_t pib_psn_add(uint32_t psn, uint32_t n)
{
    return (psn + n) & PIB_PSN_MASK;
}

/* a - b as a signed 24-bit distance: < 0 if a is before b. */
static inline int32_t pib_psn_diff(uint32_t a, uint32_t b)
{
    return (int32_t)((a - b) << 8) >> 8;
}

/* IBTA: 0xc000..0xfffe are multicast LIDs, 0xffff the permissive LID */
static inline bool pib_lid_is_unicast(uint16_t lid)
{
    return lid >= 0x0001 && lid <= 0xbfff;
}

static inline bool pib_lid_is_multicast(uint16_t lid)
{
    return lid >= PIB_LID_MULTICAST_BASE && lid != PIB_LID_PERMISSIVE;
}

/* IB MTU enum (1..5) -> bytes */
static inline uint32_t pib_mtu_bytes(uint8_t mtu)
{
    return 128u << mtu;
}

static inline void pib_count(PibState *s, enum pib_counter c, uint64_t n)
{
    s->counters[c] += n;
}

/* pib.c */
bool pib_dma_read(PibState *s, uint64_t addr, void *buf, uint32_t len,
                  const char *what);
bool pib_dma_write(PibState *s, uint64_t addr, const void *buf, uint32_t len,
                   const char *what);
bool pib_ring_publish(PibState *s, uint64_t addr, const void *entry,
                      uint32_t size, uint32_t phase_off, const char *what);
uint8_t pib_pbl_load(PibState *s, uint64_t pbl_addr, uint32_t npages,
                     uint64_t **pagesp, const char *cmd);
uint64_t pib_ring_addr(const PibRing *r, uint32_t idx);
uint64_t pib_clock_ns(void);
uint64_t pib_wallclock_ns(void);
void pib_irq_notify(PibState *s, unsigned vector);
void pib_irq_raise(PibState *s, unsigned vector);
uint64_t pib_port_guid(PibState *s);

/*
 * The admin command handlers, one per line of PIB_ADMIN_OPCODES
 * (include/pib_hw.h): uint8_t pib_cmd_<name>(s, cmd, res) returns the
 * completion status and fills res.  They live with their objects: pib-com.c
 * (the device's own commands), pib-mr.c, pib-cq.c, pib-srq.c, pib-qp.c,
 * pib-qp-state.c.
 */
#define PIB_CMD_HANDLER_DECL(id, name, opcode)                          \
    uint8_t pib_cmd_##name(PibState *s, const struct pib_admin_cmd *cmd, \
                           PibAdminResult *res);
PIB_ADMIN_OPCODES(PIB_CMD_HANDLER_DECL)
#undef PIB_CMD_HANDLER_DECL

/* pib-com.c */
void pib_admin_bh(void *opaque);
void pib_aq_doorbell(PibState *s, uint32_t pi);
void pib_aeq_post(PibState *s, enum pib_async_event_type type, uint32_t obj,
                  uint64_t data);
void pib_aeq_doorbell(PibState *s, uint32_t ci);
void pib_ceq_post(PibState *s, uint32_t cqn);
void pib_ceq_doorbell(PibState *s, uint32_t ci);
const char *pib_async_event_name(uint8_t type);
uint8_t pib_cmd_reject(const char *cmd, const char *why, uint64_t val,
                       uint8_t status);
uint32_t pib_table_alloc(void **table, uint32_t max);
bool pib_uar_valid(PibState *s, uint32_t uar);
uint8_t pib_admin_respond(PibState *s, const struct pib_admin_cmd *cmd,
                          const void *resp, uint32_t size);
bool pib_admin_mbox_read(PibState *s, const struct pib_admin_cmd *cmd,
                         void *buf, uint32_t size, const char *what);

/* pib-hca-link.c */
void pib_link_realize(PibState *s);
void pib_link_unrealize(PibState *s);
void pib_link_retrain(PibState *s, const char *why);
PibPacket *pib_packet_new(PibState *s, uint32_t ib_len);
void pib_packet_free(PibState *s, PibPacket *p);
void pib_link_free_buffers(PibState *s);
bool pib_xmit_room(PibState *s, uint16_t dlid);
void pib_xmit(PibState *s, PibPacket *p, uint16_t dlid);
void pib_link_flush(PibState *s);
void pib_link_purge(PibState *s);

/* pib-mr.c: PDs, MRs, windows, and memory access through them */
typedef enum PibMemErr {
    PIB_MEM_OK,
    PIB_MEM_BAD_KEY,        /* no MR with that key */
    PIB_MEM_BAD_PD,         /* the MR is in another PD */
    PIB_MEM_ACCESS,         /* the MR does not allow the access */
    PIB_MEM_RANGE,          /* [va, va + len) is not inside the MR */
    PIB_MEM_DMA,            /* guest memory behind the MR is not accessible */
} PibMemErr;
PibPd *pib_pd_lookup(PibState *s, uint32_t pdn);
void pib_mw_unbind_qp(PibState *s, uint32_t qpn);
void pib_mr_reset_all(PibState *s);
const char *pib_mem_err_name(PibMemErr err);
PibMemErr pib_mr_check(PibState *s, uint32_t key, uint32_t pdn, uint64_t va,
                       uint64_t len, uint32_t access, PibMr **mrp);
PibMemErr pib_rkey_check(PibState *s, const PibQp *qp, uint32_t pdn, uint32_t rkey,
                         uint64_t va, uint64_t len, uint32_t access,
                         PibMr **mrp);
PibMemErr pib_mr_rw(PibState *s, PibMr *mr, uint64_t va, void *buf,
                    uint32_t len, DMADirection dir);
PibMemErr pib_sgl_copy(PibState *s, uint32_t pdn, const PibSge *sge,
                       uint32_t num_sge, uint64_t offset, void *buf,
                       uint32_t len, DMADirection dir);
PibMr *pib_mr_lookup(PibState *s, uint32_t key);
PibMw *pib_mw_by_index(PibState *s, uint32_t key);
void pib_mw_unbind(PibState *s, PibMw *mw);
uint32_t pib_mw_mr_access(uint32_t access);
const char *pib_mr_access_fault(uint32_t access);
bool pib_mr_length_ok(uint64_t iova, uint64_t length);
uint64_t pib_mr_span(uint64_t iova, uint64_t length);

/* pib-mr-wqe.c: the send queue's memory operations */
uint8_t pib_mw_bind(PibQp *qp, const struct pib_bind_mw_wqe *b);
uint8_t pib_mr_fast_reg(PibQp *qp, const struct pib_reg_mr_wqe *r);
bool pib_key_invalidate(PibState *s, const PibQp *qp, uint32_t pdn, uint32_t rkey);

/* pib-cq.c */
PibCq *pib_cq_lookup(PibState *s, uint32_t cqn);
void pib_cq_reset_all(PibState *s);
bool pib_cq_post(PibState *s, PibCq *cq, struct pib_cqe *cqe, bool solicited);
void pib_cq_doorbell(PibState *s, PibCq *cq, uint32_t page, uint64_t data);
void pib_cq_notify_run(PibState *s);
uint8_t pib_cqe_opcode_of(uint8_t wqe_opcode);

/* pib-srq.c */
PibSrq *pib_srq_lookup(PibState *s, uint32_t srqn);
PibXrcd *pib_xrcd_lookup(PibState *s, uint32_t xrcd);
void pib_srq_reset_all(PibState *s);
bool pib_srq_take(PibQp *qp, PibSrq *srq, PibRecvWqe *w, uint8_t *status);

/* pib-qp.c */
PibQp *pib_qp_lookup(PibState *s, uint32_t qpn);
void pib_qp_reset_all(PibState *s);
const char *pib_qp_state_name(uint8_t state);
bool pib_qp_is_connected(const PibQp *qp);

/* pib-qp-state.c */
void pib_qp_error(PibQp *qp, const char *why);

/* pib-wqe.c */
bool pib_sq_fetch(PibQp *qp, uint32_t idx, PibSendWqe *w, uint8_t *status);
bool pib_rq_fetch(PibQp *qp, uint32_t idx, PibRecvWqe *w, uint8_t *status);
bool pib_recv_fetch(PibQp *qp, const PibRing *ring, uint32_t max_sge,
                    const char *what, uint32_t idx, PibRecvWqe *w,
                    uint8_t *status);
void pib_qp_post_send_cqe(PibQp *qp, uint32_t idx, const PibWqeMeta *m,
                          uint8_t status);
void pib_qp_post_recv_cqe(PibQp *qp, struct pib_cqe *cqe, bool solicited);
void pib_qp_flush(PibQp *qp);

/* pib-sched.c */
extern const MemoryRegionOps pib_uar_ops;
void pib_qp_doorbell(PibState *s, PibQp *qp, bool sq, uint32_t page,
                     uint64_t data);
void pib_srq_doorbell(PibState *s, PibSrq *srq, uint32_t page, uint64_t data);
void pib_qp_schedule(PibQp *qp);
void pib_qp_kick_waiters(PibState *s);
void pib_work_run(PibState *s);
void pib_work_bh(void *opaque);
void pib_work_now(PibState *s, PibQp *qp);
void pib_qp_init_engines(PibQp *qp);
void pib_qp_reset_engines(PibQp *qp);
void pib_qp_fini_engines(PibQp *qp);
uint64_t pib_rnr_timer_ns(uint8_t code);
void pib_qp_stop_retrans(PibQp *qp);
void pib_qp_sync_timers(PibQp *qp);

/* pib-pkt.c */
#define PIB_OPM_RETH        (1u << 0)
#define PIB_OPM_AETH        (1u << 1)
#define PIB_OPM_ATMETH      (1u << 2)
#define PIB_OPM_ATMACK      (1u << 3)
#define PIB_OPM_IMMDT       (1u << 4)
#define PIB_OPM_IETH        (1u << 5)
#define PIB_OPM_DETH        (1u << 6)
#define PIB_OPM_PAYLOAD     (1u << 7)   /* may carry payload */
#define PIB_OPM_REQ         (1u << 8)   /* a request (to the responder) */
#define PIB_OPM_RESP        (1u << 9)   /* a response (to the completer) */
#define PIB_OPM_FIRST       (1u << 10)  /* first packet of a message */
#define PIB_OPM_MIDDLE      (1u << 11)
#define PIB_OPM_LAST        (1u << 12)  /* last packet of a message */
#define PIB_OPM_SEND        (1u << 13)
#define PIB_OPM_WRITE       (1u << 14)
#define PIB_OPM_READ        (1u << 15)  /* READ request or READ response */
#define PIB_OPM_ATOMIC      (1u << 16)  /* atomic request or atomic ACK */
#define PIB_OPM_ATOMIC_WRITE (1u << 17) /* ATOMIC WRITE: 8 bytes placed at once */
#define PIB_OPM_XRCETH      (1u << 18)  /* an XRC request: the XRCETH follows the BTH */
#define PIB_OPM_ONLY        (PIB_OPM_FIRST | PIB_OPM_LAST)

typedef struct PibOpInfo {
    const char *name;       /* NULL: not an opcode the device knows */
    uint32_t mask;          /* PIB_OPM_* */
} PibOpInfo;

/* A received packet after pib_pkt_parse(): headers in host order. */
typedef struct PibPktInfo {
    const uint8_t *pkt;     /* LRH onwards */
    uint32_t len;
    uint16_t dlid;
    uint16_t slid;
    uint8_t sl;
    uint8_t vl;             /* LRH: 15 for SMPs, 0 otherwise */
    bool has_grh;
    struct pib_grh grh;     /* raw, as on the wire */
    uint8_t opcode;
    const PibOpInfo *op;
    bool se;
    bool ackreq;
    uint8_t pad;
    uint16_t pkey;
    uint8_t pkey_index;     /* the table entry it matched (QP0: 0) */
    uint32_t dqpn;
    uint32_t psn;
    uint64_t va;            /* RETH or AtomicETH */
    uint32_t rkey;
    uint32_t dmalen;        /* RETH */
    uint8_t syndrome;       /* AETH */
    uint32_t msn;
    uint64_t swap_add;      /* AtomicETH */
    uint64_t compare;
    uint64_t orig;          /* AtomicAckETH */
    uint8_t imm[4];         /* ImmDt, raw */
    uint32_t ieth_rkey;
    uint32_t qkey;          /* DETH */
    uint32_t src_qpn;
    uint32_t xrc_srqn;      /* XRCETH */
    const uint8_t *payload;
    uint32_t paylen;
} PibPktInfo;

/* What a sender fills to build a packet. */
typedef struct PibPktFields {
    uint8_t opcode;
    bool se;
    bool ackreq;
    uint32_t dqpn;
    uint32_t psn;
    uint16_t dlid;
    uint8_t sl;
    uint8_t src_path_bits;
    bool vl15;              /* an SMP: VL15, and a permissive DLID gets a */
                            /* permissive SLID */
    uint16_t pkey;          /* BTH P_Key */
    const PibAv *grh_av;    /* non-NULL: add a GRH for this address vector */
    uint64_t va;            /* RETH / AtomicETH */
    uint32_t rkey;
    uint32_t dmalen;
    uint8_t syndrome;       /* AETH */
    uint32_t msn;
    uint64_t swap_add;
    uint64_t compare;
    uint64_t orig;          /* AtomicAckETH */
    uint8_t imm[4];
    uint32_t ieth_rkey;     /* IETH: the rkey the responder invalidates */
    uint32_t qkey;          /* DETH */
    uint32_t src_qpn;
    uint32_t xrc_srqn;      /* XRCETH */
} PibPktFields;

const PibOpInfo *pib_op_info(uint8_t opcode);
const char *pib_op_name(uint8_t opcode);
PibPktFields pib_pkt_trap_fields(uint16_t dlid, uint8_t sl);
uint32_t pib_pkt_len(const PibPktFields *f, uint32_t paylen);
void pib_pkt_write(uint8_t *b, const PibPktFields *f, uint16_t slid, const uint8_t *sgid,
                   const void *payload, uint32_t paylen);
PibPacket *pib_pkt_build(PibState *s, const PibPktFields *f,
                         const void *payload, uint32_t paylen);
enum pib_counter pib_pkt_parse(const uint8_t *b, uint32_t len, const uint8_t *port_gid,
                               PibPktInfo *pi);
uint8_t *pib_pkt_payload(PibPacket *p, uint32_t paylen);
void pib_pkt_drop(PibState *s, enum pib_counter why, const PibPktInfo *pi);
const char *pib_counter_name(enum pib_counter c);
void pib_rx_enqueue(PibState *s, PibPacket *p);
void pib_rx_link(PibState *s, PibPacket *p);
bool pib_rx_link_bytes(PibState *s, const uint8_t *ib, uint32_t len);
void pib_rx_run(PibState *s);
void pib_rx_bh(void *opaque);
void pib_rx_purge(PibState *s);
void pib_pkt_to_qp(PibState *s, PibQp *qp, const PibPktInfo *pi);

/* pib-inject.c */
void pib_inject_init(PibState *s);
void pib_inject_class_init(ObjectClass *oc);
void pib_inject_realize(PibState *s);
void pib_inject_unrealize(PibState *s);
void pib_inject_reset(PibState *s);
bool pib_inject_wqe_error(PibQp *qp, uint32_t idx, uint8_t *status);
bool pib_inject_drop(PibState *s, const PibPacket *p, bool tx);
bool pib_inject_irq_delay(PibState *s, unsigned vector);

/* pib-req.c */
void pib_req_run(PibQp *qp, unsigned *budget);
void pib_req_retry(PibQp *qp);
uint32_t pib_req_npkts(const PibQp *qp, uint64_t len);

/* pib-resp.c */
void pib_resp_recv(PibQp *qp, const PibPktInfo *pi);
void pib_resp_reset(PibQp *qp);

/* pib-resp-rdatom.c */
void pib_resp_run(PibQp *qp, unsigned *budget);

/* pib-comp.c */
void pib_comp_recv(PibQp *qp, const PibPktInfo *pi);
void pib_comp_run(PibQp *qp);

/* pib-port.c */
void pib_port_realize(PibState *s);
void pib_port_unrealize(PibState *s);
void pib_port_reset(PibState *s);
void pib_port_event(PibState *s, PibPortSmEvent ev);
void pib_port_announce(PibState *s);
uint8_t pib_port_sm_ib_state(PibPortSmState sm);
uint8_t pib_port_ib_state(const PibState *s);
uint8_t pib_port_phys_state(const PibState *s);
bool pib_port_link_up(const PibState *s);
bool pib_port_active(const PibState *s);
bool pib_port_no_sm(const PibState *s);
bool pib_lid_is_ours(const PibState *s, uint16_t lid);
uint16_t pib_port_pkey(const PibState *s, uint16_t idx);
void pib_port_bad_pkey(PibState *s, const PibPktInfo *pi);
void pib_port_gid(const PibState *s, uint8_t gid[16]);

/* pib-mcast.c */
void pib_mcast_detach_qp(PibState *s, uint32_t qpn);
void pib_mcast_reset(PibState *s);
bool pib_mcast_local(PibState *s, uint16_t mlid);
enum pib_counter pib_mcast_deliver(PibState *s, PibPktInfo *pi);

#endif /* HW_PIB_INTERNAL_H */
