/*
 * pib HCA device model - state shared by pib.c and pib-link.c
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The hardware interface (registers, admin queue, AEQ, UAR doorbells, link
 * frames) is defined once in include/pib_hw.h and include/pib_link.h.  This
 * header only holds the model's private state and the few functions the two
 * source files call in each other:
 *
 *   pib.c       the PCI function: BAR0 registers, admin queue, AEQ,
 *               UAR doorbells, reset, QOM glue
 *   pib-link.c  the link: chardev framing (HELLO/PACKET) and the port
 *               state machine
 */
#ifndef HW_PIB_INTERNAL_H
#define HW_PIB_INTERNAL_H

#include "hw/pci/pci.h"
#include "chardev/char-fe.h"
#include "qemu/log.h"
#include "qom/object.h"

#include "include/pib_hw.h"
#include "include/pib_link.h"

#define TYPE_PIB_HCA "pib-hca"
OBJECT_DECLARE_SIMPLE_TYPE(PibState, PIB_HCA)

/* The one port (1-based, as in IB); async events name it in their obj field. */
#define PIB_PORT_NUM            1

/* What CONTROL.ENABLE accepts in AQ_DEPTH / AEQ_DEPTH and the ring bases. */
#define PIB_QUEUE_MIN_DEPTH     2
#define PIB_QUEUE_MAX_DEPTH     4096
#define PIB_QUEUE_BASE_ALIGN    4096

/*
 * Admin queue as latched at CONTROL.ENABLE.  Indices are free-running u32
 * counters (mod 2^32, like the AQ_DB register); the ring slot is
 * index & (depth - 1).  sq_head counts the commands the device has executed
 * and completed, so CQ slot i belongs to command i.
 */
typedef struct PibAdminQueue {
    uint32_t depth;
    uint64_t sq_base;       /* 64-byte struct pib_admin_cmd slots */
    uint64_t cq_base;       /* 16-byte struct pib_admin_cqe slots */
    uint32_t sq_tail;       /* producer: last accepted AQ_DB value */
    uint32_t sq_head;       /* consumer: next command to execute */
} PibAdminQueue;

/* Async event queue as latched at CONTROL.ENABLE. */
typedef struct PibEventQueue {
    uint32_t depth;
    uint64_t base;          /* 16-byte struct pib_aeqe slots */
    uint32_t pi;            /* producer: the device */
    uint32_t ci;            /* consumer: the driver, via AEQ_DB */
} PibEventQueue;

/*
 * Objects a UAR doorbell can name.  Nothing creates them yet (the data path
 * comes later), but the doorbell decoder already looks them up here: a
 * doorbell is honoured only if the object exists *and* was created on the UAR
 * page the doorbell arrived on.
 */
typedef enum PibObjType {
    PIB_OBJ_QP,
    PIB_OBJ_CQ,
    PIB_OBJ_SRQ,
    PIB_OBJ_NTYPES
} PibObjType;

typedef struct PibObject {
    PibObjType type;
    uint32_t num;           /* QPN / CQN / SRQN (24 bits) */
    uint32_t uar;           /* owning UAR page index */
} PibObject;

/*
 * Port/link state machine (pib-link.c).  One state combines what IBTA splits
 * into PortPhysicalState and PortState, because here the two move together:
 *
 *   POLLING --stream opened--> TRAINING --peer HELLO--> INIT (no LID)
 *                                                   or ACTIVE (LID set)
 *   INIT    --LID set--> ACTIVE
 *   any     --stream closed or framing lost--> POLLING
 *
 * There is no subnet manager: a port with a LID and a trained link is ACTIVE
 * (ARMED is skipped).
 */
typedef enum PibPortSmState {
    PIB_PSM_POLLING,    /* no peer: PortState DOWN, phys POLLING */
    PIB_PSM_TRAINING,   /* stream open, HELLO sent, waiting for the peer's */
    PIB_PSM_INIT,       /* link up, no LID: PortState INIT, phys LINKUP */
    PIB_PSM_ACTIVE,     /* link up, LID: PortState ACTIVE, phys LINKUP */
    PIB_PSM__MAX
} PibPortSmState;

typedef enum PibPortSmEvent {
    PIB_PEV_STREAM_UP,      /* chardev connected (CHR_EVENT_OPENED) */
    PIB_PEV_HELLO,          /* a valid HELLO arrived from the peer */
    PIB_PEV_STREAM_DOWN,    /* chardev closed, or framing lost */
    PIB_PEV_LID_CHANGED,    /* SET_PORT changed the LID */
    PIB_PEV__MAX
} PibPortSmEvent;

/* Receive side of the link framing: a header, then `length` payload bytes. */
typedef enum PibLinkRxState {
    PIB_RX_HDR,             /* collecting the 4-byte struct pib_link_hdr */
    PIB_RX_PAYLOAD,         /* collecting the payload the header announced */
    PIB_RX_DISCARD,         /* framing lost: ignore bytes until disconnect */
    PIB_RX__MAX
} PibLinkRxState;

typedef struct PibLink {
    CharBackend chr;
    bool stream_open;       /* CHR_EVENT_OPENED seen, CLOSED not yet */
    QEMUBH *drop_bh;        /* disconnects outside the chardev callbacks */

    PibLinkRxState rx_state;
    struct pib_link_hdr rx_hdr;
    uint32_t rx_got;        /* bytes of the header or payload so far */
    uint32_t rx_len;        /* payload length from the header */
    uint8_t rx_buf[PIB_LINK_MAX_PAYLOAD];

    uint64_t peer_node_guid;
    uint64_t peer_port_guid;

    /* Statistics (traces and debugging only; not guest-visible yet). */
    uint64_t frames_tx;
    uint64_t frames_rx;
    uint64_t bad_frames;
    uint64_t packets_dropped;
} PibLink;

typedef struct PibPort {
    PibPortSmState sm;
    uint16_t lid;
    uint16_t sm_lid;
    uint8_t lmc;
    uint8_t sm_sl;
    uint32_t cap_flags;     /* PortInfo:CapabilityMask */
    uint32_t link_downs;    /* times the link left INIT/ACTIVE since reset */
} PibPort;

struct PibState {
    /*< private >*/
    PCIDevice parent_obj;
    /*< public >*/

    MemoryRegion regs_mr;   /* BAR0 */
    MemoryRegion uar_mr;    /* BAR2 */

    struct pib_regs regs;   /* what BAR0 reads return, host byte order */
    PibAdminQueue aq;
    PibEventQueue aeq;
    QEMUBH *admin_bh;

    /* Allocated UAR pages; bit 0 (the kernel's page) is always set. */
    unsigned long *uar_bitmap;
    /* Per type: object number -> PibObject (all empty for now). */
    GHashTable *objs[PIB_OBJ_NTYPES];

    PibPort port;
    PibLink link;

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

/* pib.c, called by the link */
void pib_aeq_post(PibState *s, enum pib_async_event_type type, uint32_t obj,
                  uint64_t data);
uint64_t pib_port_guid(PibState *s);

/* pib-link.c, called by the PCI side */
void pib_link_realize(PibState *s);
void pib_link_unrealize(PibState *s);
void pib_port_reset(PibState *s);
void pib_port_event(PibState *s, PibPortSmEvent ev);
void pib_port_announce(PibState *s);
uint8_t pib_port_ib_state(const PibState *s);
uint8_t pib_port_phys_state(const PibState *s);
bool pib_port_link_up(const PibState *s);

#endif /* HW_PIB_INTERNAL_H */
