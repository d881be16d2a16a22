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
 * only holds the HCA's private state and the functions its source files
 * call in each other; the data-path objects (PD, MR, MW, CQ, SRQ, QP and its
 * engines' state) and their limits are in pib-objects.h.  What the HCA shares
 * with the switch (the link, the port state machine, the packet codec, the
 * SMA and the PMA) is the fabric layer's, ../fabric/pib-fabric.h.  The files,
 * named after the driver's where the objects are the same:
 *
 *   pib-main.c    the PCI function: BAR0 registers, CONTROL, reset, the DMA
 *                 helpers (ring entries, page lists), MSI-X, QOM glue
 *   pib-com.c     the admin queue engine, the AEQ and the CEQ, the commands
 *                 about the device itself (QUERY_DEVICE, ALLOC_UAR, ...)
 *   pib-hca-link.c  the HCA's side of the link: its PibLinkOps, pib_xmit()
 *                 to the link or back to ourselves
 *   pib-port.c    the port: entering its states (LINK_STATE, events), and the
 *                 port as the management agents see it (MAD_IFC, QUERY_PORT,
 *                 SET_PORT, traps)
 *   pib-mcast.c   multicast groups: attaching QPs, delivering to them
 *   pib-table.c   the object tables every object type is kept in
 *   pib-pd.c      protection domains and XRC domains
 *   pib-mr.c      MRs and memory windows: their commands, key and range
 *                 checks, DMA through MRs
 *   pib-dm.c      device memory: the BAR0 RAM behind it, ALLOC_DM, DEALLOC_DM
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
 *   pib-rx.c      the receive path: what the port lets in, dispatch to QPs;
 *                 building packets from this port
 *   pib-req.c     requester: send WQEs -> request packets
 *   pib-resp.c    responder: request packets -> memory, receive CQEs, ACKs
 *                 (its state machine's types in pib-resp.h)
 *   pib-resp-rdatom.c  the responder's READ and atomics: executing them, the
 *                 replay cache, sending READ responses
 *   pib-comp.c    completer: ACKs and responses -> send CQEs, retries
 *   pib-cca.c     congestion control: BECN owed, the table indexes, the delay
 *                 between a QP's packets
 *   pib-inject.c  error injection: QOM properties, and the hooks the engines
 *                 call (failed WQEs, lost packets, late interrupts)
 *   pib-teach.c   teach mode: reports of what real hardware would punish
 *                 silently (for a driver being written, labs/)
 *
 * Threading: everything runs under the BQL, so MMIO handlers (in the vCPU
 * threads), bottom halves, timers and chardev callbacks (in the main loop)
 * never run concurrently.  No locks are needed, and a read-modify-write of
 * guest memory done in one call (an atomic operation) cannot interleave with
 * any other operation of this device.
 */
#ifndef HW_PIB_INTERNAL_H
#define HW_PIB_INTERNAL_H

#include "qemu/log.h"
#include "qemu/queue.h"
#include "qemu/timer.h"
#include "qom/object.h"

#include "../pib-compat.h"      /* PCIDevice, DMA, chardev: per QEMU version */
#include "../include/pib_hw.h"
#include "../include/pib_wqe.h"
#include "../fabric/pib-fabric.h"  /* the link, the port state machine, packets, SMA, PMA */
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
    bool teach_told;        /* teach mode said it overran since the last doorbell */
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
     * the P_Key table, CapabilityMask, the violation counters (fabric/pib-mgmt.h).
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

    MemoryRegion regs_mr;   /* BAR0 (or its first page, with device memory) */
    MemoryRegion bar0_mr;   /* with device memory: BAR0, the registers and dm_mr */
    MemoryRegion dm_mr;     /* the device memory (pib-dm.c), RAM */
    uint32_t dm_size;       /* property dm-size: its bytes, 0 for none */
    unsigned long *dm_pages;    /* its allocated pages */
    MemoryRegion uar_mr;    /* BAR2 */

    struct pib_regs regs;   /* what BAR0 reads return, host byte order */
    PibAdminQueue aq;
    PibEventQueue aeq;
    PibEventQueue ceq;
    QEMUBH *admin_bh;

    /* Allocated UAR pages; bit 0 (the kernel's page) is always set. */
    unsigned long *uar_bitmap;

    /* Data-path objects by their numbers (pib-table.c); MRs and windows by key index. */
    PibTable pds;
    PibTable mrs;           /* keyed */
    PibTable mws;           /* keyed */
    PibTable cqs;
    PibTable srqs;
    PibTable xrcds;
    PibTable qps;           /* QP0, QP1, then PIB_QPN_FIRST .. */
    PibTable dms;           /* device memory allocations */
    uint32_t next_qpn;                  /* QPNs rotate, so stale ones fail */
    uint32_t mtt_pages;                 /* page list entries in use: MRs', rings' */

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
    uint64_t xmit_wait_base_ns;     /* the link's PortXmitWait time at the last reset */

    PibMcastGroup mcast[PIB_MAX_MCAST_GRP];
    PibPort port;
    PibMgmtNode mgmt;       /* the node the management agents answer for */
    PibCcaIndex cca_sl[PIB_CC_SLS];     /* congestion control: the SLs' indexes (pib-cca.c) */
    PibMgmtPort *mgmt_ports[PIB_NUM_PORTS + 1];
    PibLink link;
    PibInject inject;

    /* qdev properties */
    uint64_t node_guid;     /* 0 at realize: see pib_derive_node_guid() */
    uint16_t prop_lid;
    bool recv_dbrec;        /* recv-dbrec: receive doorbell records offered */
    bool teach;             /* teach: report what real hardware punishes silently */
    uint32_t teach_reports; /* teach-reports: how many (pib-teach.c; saturating) */

    /*
     * The machine stopped (pib-vmstate.c): the link reads nothing and the bottom halves
     * return at once, so nothing is written to guest memory until it runs again.
     */
    bool stopped;
    VMChangeStateEntry *vm_change;
    /* Migration (pib-vmstate.c): the port's state as the guest knew it, and what is left */
    /* to do when the loaded device first runs. */
    uint64_t mig_node_guid;         /* the device's identity moves with it */
    uint32_t mig_dev_caps;          /* what the guest's driver was told it can do */
    uint32_t mig_dm_size;           /* and how much device memory it has */
    PibLinkMoveSaved mig_link;      /* the port's state, the link's and its peer's tokens */
    PibMoveNotice move_notice;      /* when we tell the peer we may move */
    bool mig_resume;
    int32_t mig_num_uars;           /* PIB_NUM_UARS: the UAR bitmap's length in the stream */
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

/* IB MTU enum (1..5) -> bytes */
static inline uint32_t pib_mtu_bytes(uint8_t mtu)
{
    return 128u << mtu;
}

static inline void pib_count(PibState *s, enum pib_counter c, uint64_t n)
{
    s->counters[c] += n;
}

/* pib-main.c */
void pib_objects_reset(PibState *s);
void pib_reset(PibState *s, const char *why);
MemTxResult pib_dma_try(PibState *s, uint64_t addr, void *buf, uint32_t len,
                        DMADirection dir);
bool pib_dma_read(PibState *s, uint64_t addr, void *buf, uint32_t len,
                  const char *what);
bool pib_dma_write(PibState *s, uint64_t addr, const void *buf, uint32_t len,
                   const char *what);
bool pib_ring_publish(PibState *s, uint64_t addr, const void *entry,
                      uint32_t size, uint32_t phase_off, const char *what);
uint8_t pib_pbl_load(PibState *s, uint64_t pbl_addr, uint32_t npages,
                     uint64_t **pagesp, const char *cmd);
uint8_t pib_ring_pbl_load(PibState *s, uint64_t pbl_addr, uint32_t npages,
                          uint32_t freed, uint64_t **pagesp, const char *cmd);
void pib_ring_free(PibState *s, PibRing *r);
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
uint32_t pib_dev_caps(const PibState *s);
uint8_t pib_cmd_reject(const char *cmd, const char *why, uint64_t val,
                       uint8_t status);
bool pib_uar_valid(PibState *s, uint32_t uar);
uint8_t pib_admin_respond(PibState *s, const struct pib_admin_cmd *cmd,
                          const void *resp, uint32_t size);
bool pib_admin_mbox_read(PibState *s, const struct pib_admin_cmd *cmd,
                         void *buf, uint32_t size, const char *what);

/* pib-hca-link.c */
void pib_link_realize(PibState *s);
void pib_link_unrealize(PibState *s);
PibPacket *pib_packet_new(PibState *s, uint32_t ib_len);
void pib_packet_free(PibState *s, PibPacket *p);
void pib_link_free_buffers(PibState *s);
bool pib_xmit_room(PibState *s, uint16_t dlid);
void pib_xmit(PibState *s, PibPacket *p, uint16_t dlid);
void pib_link_flush(PibState *s);
void pib_link_sync_counters(PibState *s);
void pib_link_set_credit_hold(PibState *s, bool hold);
void pib_link_purge(PibState *s);

/* pib-table.c */
void pib_tables_realize(PibState *s);
void pib_tables_unrealize(PibState *s);
void *pib_table_get(const PibTable *t, uint32_t n);
uint32_t pib_table_alloc(const PibTable *t);
void pib_table_set(PibTable *t, uint32_t n, void *obj);
uint8_t pib_table_next_key(PibTable *t, uint32_t n);
void pib_table_set_key(PibTable *t, uint32_t n, uint8_t key);
void pib_table_reset(PibTable *t);
uint32_t pib_table_count(const PibTable *t);
/* Every object in t, in number order; the body may free it. */
#define PIB_TABLE_FOREACH(t, n, o) \
    for ((n) = (t)->first; (n) <= (t)->max; (n)++) \
        if (((o) = (t)->obj[n]) != NULL)

/* The objects a number from the guest names, or NULL. */
static inline PibPd *pib_pd_lookup(PibState *s, uint32_t pdn)
{
    return pib_table_get(&s->pds, pdn);
}

static inline PibCq *pib_cq_lookup(PibState *s, uint32_t cqn)
{
    return pib_table_get(&s->cqs, cqn);
}

static inline PibSrq *pib_srq_lookup(PibState *s, uint32_t srqn)
{
    return pib_table_get(&s->srqs, srqn);
}

static inline PibXrcd *pib_xrcd_lookup(PibState *s, uint32_t xrcd)
{
    return pib_table_get(&s->xrcds, xrcd);
}

static inline PibQp *pib_qp_lookup(PibState *s, uint32_t qpn)
{
    return pib_table_get(&s->qps, qpn);
}

static inline PibDm *pib_dm_lookup(PibState *s, uint32_t dm)
{
    return pib_table_get(&s->dms, dm);
}

/* pib-pd.c */
void pib_pd_reset_all(PibState *s);

/* pib-dm.c: device memory */
bool pib_dm_realize(PibState *s, Error **errp);
void pib_dm_unrealize(PibState *s);
MemoryRegion *pib_dm_bar0(PibState *s);
bool pib_dm_rw(PibState *s, uint64_t addr, void *buf, uint32_t len, DMADirection dir);
void pib_dm_reset_all(PibState *s);

/* Is [va, va + len) inside [base, base + size)?  (Written not to wrap.) */
static inline bool pib_range_in(uint64_t va, uint64_t len, uint64_t base, uint64_t size)
{
    return va >= base && len <= size && va - base <= size - len;
}

/* pib-mr.c: MRs, windows, and memory access through them */
typedef enum PibMemErr {
    PIB_MEM_OK,
    PIB_MEM_BAD_KEY,        /* no MR with that key */
    PIB_MEM_BAD_PD,         /* the MR is in another PD */
    PIB_MEM_ACCESS,         /* the MR does not allow the access */
    PIB_MEM_RANGE,          /* [va, va + len) is not inside the MR */
    PIB_MEM_DMA,            /* guest memory behind the MR is not accessible */
} PibMemErr;
void pib_mw_unbind_qp(PibState *s, uint32_t qpn);
void pib_mr_reset_all(PibState *s);
const char *pib_mem_err_name(PibMemErr err);
PibMemErr pib_mr_check(PibState *s, uint32_t key, uint32_t pdn, uint64_t va,
                       uint64_t len, uint32_t access, PibMr **mrp);
PibMemErr pib_rkey_check(PibState *s, const PibQp *qp, uint32_t pdn, uint32_t rkey,
                         uint64_t va, uint64_t len, uint32_t access,
                         PibMr **mrp);
PibMemErr pib_flush_check(PibState *s, uint32_t pdn, uint32_t rkey, uint64_t va,
                          uint64_t len, bool whole, uint32_t plt);
PibMemErr pib_mr_rw(PibState *s, PibMr *mr, uint64_t va, void *buf,
                    uint32_t len, DMADirection dir);

/*
 * Do these access rights (a QP's or an MR's PIB_ACCESS_*) allow a FLUSH to the placement types
 * plt (PIB_FLUSH_GLOBAL, PIB_FLUSH_PERSISTENT)?  Global visibility needs
 * PIB_ACCESS_FLUSH_GLOBAL; persistence nothing can grant: pib has no persistence domain.
 */
static inline bool pib_flush_allowed(uint32_t plt, uint32_t access)
{
    return !(plt & PIB_FLUSH_PERSISTENT) &&
           (!(plt & PIB_FLUSH_GLOBAL) || (access & PIB_ACCESS_FLUSH_GLOBAL));
}
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
void pib_cq_reset_all(PibState *s);
bool pib_cq_post(PibState *s, PibCq *cq, struct pib_cqe *cqe, bool solicited);
void pib_cq_doorbell(PibState *s, PibCq *cq, uint32_t page, uint64_t data);
void pib_cq_notify_run(PibState *s);
void pib_cq_mod_expired(void *opaque);
uint8_t pib_cqe_opcode_of(uint8_t wqe_opcode);

/* pib-srq.c */
void pib_srq_reset_all(PibState *s);
bool pib_srq_take(PibQp *qp, PibSrq *srq, PibRecvWqe *w, uint8_t *status);

/* pib-qp.c */
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
void pib_dbrec_read(PibState *s, uint64_t dbrec, uint32_t depth, uint32_t ci,
                    uint32_t *pi, const char *ring, uint32_t num);
void pib_rq_refresh(PibQp *qp);
void pib_dbrec_set_flags(PibState *s, uint64_t dbrec, uint32_t flags);
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

/* pib-rx.c: the receive path, and building packets from this port */
PibPacket *pib_pkt_build(PibState *s, const PibPktFields *f,
                         const void *payload, uint32_t paylen);
void pib_pkt_drop(PibState *s, enum pib_counter why, const PibPktInfo *pi);
const char *pib_counter_name(enum pib_counter c);
void pib_rx_enqueue(PibState *s, PibPacket *p);
void pib_rx_link(PibState *s, PibPacket *p);
bool pib_rx_link_bytes(PibState *s, const uint8_t *ib, uint32_t len);
void pib_rx_run(PibState *s);
void pib_rx_bh(void *opaque);
void pib_rx_purge(PibState *s);
void pib_pkt_to_qp(PibState *s, PibQp *qp, const PibPktInfo *pi);

/* pib-teach.c: teach mode's rules (the file's comment says what each means) */
#define PIB_TEACH_RULES(X)                              \
    X(CONFIG_WHILE_READY, "config-while-ready")         \
    X(RING_NOT_MEMORY,    "ring-not-memory")            \
    X(CMD_ID_REUSED,      "cmd-id-reused")          \
    X(EQ_OVERRUN,         "eq-overrun")             \
    X(PAGE_NOT_MEMORY,    "page-not-memory")

#define PIB_TEACH_ENUM(id, name) PIB_TEACH_##id,
enum pib_teach_rule {
    PIB_TEACH_RULES(PIB_TEACH_ENUM)
};
#undef PIB_TEACH_ENUM

void pib_teach(PibState *s, enum pib_teach_rule rule, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);
void pib_teach_enable(PibState *s);
void pib_teach_aq_doorbell(PibState *s, uint32_t pi);
void pib_teach_ring_reg(PibState *s, const char *reg);
void pib_teach_eq_overrun(PibState *s, PibEventQueue *q, const char *eq, const char *what);
void pib_teach_pages(PibState *s, const uint64_t *pages, uint32_t npages, const char *cmd);

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

/* pib-cca.c: the CA's congestion control */
void pib_cca_init(PibQp *qp);
void pib_cca_fini(PibQp *qp);
void pib_cca_reset(PibQp *qp);
void pib_cca_becn(PibQp *qp, uint8_t sl);
void pib_cca_cnp_tx(PibQp *qp, const PibPktInfo *pi);
void pib_cca_cnp_rx(PibQp *qp, const PibPktInfo *pi);
bool pib_cca_may_send(PibQp *qp);
void pib_cca_sent(PibQp *qp, uint8_t sl);
uint16_t pib_cca_max_index(PibState *s);

/* pib-port.c */
void pib_port_realize(PibState *s);
void pib_port_unrealize(PibState *s);
void pib_port_reset(PibState *s);
void pib_port_event(PibState *s, PibPortSmEvent ev);
void pib_port_announce(PibState *s);
void pib_set_node_guid(PibState *s, uint64_t guid);
uint8_t pib_port_ib_state(const PibState *s);
uint8_t pib_port_phys_state(const PibState *s);
bool pib_port_link_up(const PibState *s);
bool pib_port_active(const PibState *s);
bool pib_port_no_sm(const PibState *s);
bool pib_lid_is_ours(const PibState *s, uint16_t lid);
uint16_t pib_port_pkey(const PibState *s, uint16_t idx);
void pib_port_bad_pkey(PibState *s, const PibPktInfo *pi);
void pib_port_gid(const PibState *s, unsigned idx, uint8_t gid[16]);
bool pib_port_has_gid(const PibState *s, const uint8_t gid[16]);

/* pib-mcast.c */
extern const VMStateDescription vmstate_pib_mcast_group;
extern const VMStateDescription vmstate_pib_inject;     /* pib-inject.c, a subsection */
void pib_mcast_detach_qp(PibState *s, uint32_t qpn);
void pib_mcast_reset(PibState *s);
bool pib_mcast_local(PibState *s, uint16_t mlid);
enum pib_counter pib_mcast_deliver(PibState *s, PibPktInfo *pi);

/* pib-vmstate.c: migration, and the device while the machine is stopped */
extern const VMStateDescription pib_vmstate;
void pib_vmstate_realize(PibState *s);
void pib_vmstate_unrealize(PibState *s);

#endif /* HW_PIB_INTERNAL_H */
