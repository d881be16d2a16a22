/*
 * pib switch - the switch's state, shared by its files
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * pib-switch.c is the device: its ports' links, the forwarding pass, the
 * ports as the management agents see them, QOM glue.  pib-switch-mad.c is the
 * switch's own management datagrams: directed-route SMPs hop by hop (IBTA
 * 14.2.2), and the SMPs and GMPs for its own agents.  pib-switch-vmstate.c is the
 * switch in a migration stream (a fabric snapshot), and while its machine is stopped.
 * docs/how-to/switch.md explains the design.
 */

#ifndef HW_PIB_SWITCH_H
#define HW_PIB_SWITCH_H

#include "qom/object.h"
#include "hw/qdev-core.h"
#include "../fabric/pib-fabric.h"

#define TYPE_PIB_SWITCH "pib-switch"
OBJECT_DECLARE_SIMPLE_TYPE(PibSwitch, PIB_SWITCH)

#define PIB_SW_DEVICE_ID        0x5357      /* "SW" */
#define PIB_SW_MAD_PKT_LEN      (sizeof(struct pib_lrh) + sizeof(struct pib_bth) + \
                                 sizeof(struct pib_deth) + PIB_MAD_SIZE)

/* Why a packet went nowhere: one counter (and QOM property) each. */
#define PIB_SW_DROPS(X)                                                             \
    X(MALFORMED,    "drop-malformed")    /* LRH or (SMPs) the headers are wrong */ \
    X(NO_ROUTE,     "drop-no-route")     /* LFT 255, above the top, or no MFT ports */ \
    X(BAD_PORT,     "drop-bad-port")     /* the table names a port the switch lacks */ \
    X(ARRIVAL_PORT, "drop-arrival-port") /* the table says back out the arrival port */ \
    X(PORT_DOWN,    "drop-port-down")    /* in or out port not ACTIVE (SMPs: not up) */ \
    X(TXQ_FULL,     "drop-txq-full")     /* the output queue is full */            \
    X(DR,           "drop-dr")           /* directed route: hop count/pointer/path */ \
    X(PARTITION,    "drop-partition")    /* P_Key or raw packet refused by a port */ \
    X(NOT_FOR_US,   "drop-local")        /* to the switch, but not for its agents */ \
    X(VL_MAPPING,   "drop-vl-mapping")   /* data on a VL the in port does not operate, */ \
                                         /* or its SL maps to VL15 or to a VL the out */ \
                                         /* port does not operate (IBTA 7.6.6) */     \
    X(CREDIT,       "drop-credit-overrun") /* data beyond the credits the in port */  \
                                         /* granted (a peer that ignores them) */    \
    X(HOQ,          "drop-hoq-lifetime") /* waited past HOQLife at the head of an */  \
                                         /* out port's VL queue (no credit came) */

#define PIB_SW_DROP_ENUM(id, name) PIB_SW_DROP_##id,
enum pib_sw_drop {
    PIB_SW_DROPS(PIB_SW_DROP_ENUM)
    PIB_SW_DROP__MAX
};
#undef PIB_SW_DROP_ENUM

typedef struct PibSwitchPort {
    struct PibSwitch *sw;
    uint8_t num;
    PibLink link;               /* external ports only; its chr is property portN */
    bool linked;                /* the port has a chardev */
    PibPortSmState sm;
    bool disabled;              /* PortPhysicalState DISABLED */
    PibMgmtPort mgmt;
    PibMgmtCounters ctr;        /* what the PMA reports for this port */
    uint64_t xmit_wait_base_ns; /* the link's credit waits before the load: not ours */
    PibLinkMoveSaved mig;       /* migration: the port's state and its link's tokens */
} PibSwitchPort;

struct PibSwitch {
    DeviceState parent_obj;

    /* properties */
    uint8_t nports;
    uint64_t node_guid;
    bool link_direct;
    bool link_doorbell;     /* property link-doorbell (pib_link.h, "Doorbell") */
    OnOffAuto link_credits; /* property link-credits (pib_link.h, "Credits") */
    uint32_t link_sndbuf;   /* property link-sndbuf (pib-link.h, PIB_LINK_SNDBUF) */

    PibSwitchPort ports[PIB_SW_MAX_PORTS + 1];      /* [0] the management port */
    PibMgmtNode mgmt;
    PibMgmtPort *mgmt_ports[PIB_SW_MAX_PORTS + 1];
    PibMgmtSwitch tables;
    uint32_t unflushed;         /* packets handled since the queues were last written */
    uint64_t drops[PIB_SW_DROP__MAX];
    uint64_t forwarded;
    uint64_t fecn_marked;       /* packets marked with FECN (congestion control) */

    /* migration (pib-switch-vmstate.c) */
    uint64_t mig_node_guid;     /* the switch the stream was saved from */
    uint8_t mig_ports;          /* its ports, port 0 included */
    bool mig_loaded;            /* loaded, and not yet run */
    VMChangeStateEntry *vm_change;
    PibMoveNotice move_notice;  /* when the ports tell their peers we may move */
};

/* pib-switch.c */
bool pib_sw_port_up(const PibSwitchPort *p);
bool pib_sw_port_active(const PibSwitchPort *p);
bool pib_sw_lid_is_ours(const PibSwitch *sw, uint16_t lid);
void pib_sw_drop(PibSwitch *sw, PibSwitchPort *in, PibPacket *p, enum pib_sw_drop why,
                 uint16_t dlid);
void pib_sw_send(PibSwitch *sw, PibSwitchPort *in, PibSwitchPort *out, PibPacket *p,
                 bool smp, uint16_t dlid);
void pib_sw_route_unicast(PibSwitch *sw, PibSwitchPort *in, PibPacket *p, uint16_t dlid,
                          bool smp);

/* pib-switch-vmstate.c */
extern const VMStateDescription vmstate_pib_switch;
void pib_sw_vmstate_realize(PibSwitch *sw);
void pib_sw_vmstate_unrealize(PibSwitch *sw);

/* pib-switch-mad.c */
void pib_sw_local_gsi(PibSwitch *sw, PibSwitchPort *in, PibPacket *p);
void pib_sw_smp(PibSwitch *sw, PibSwitchPort *in, PibPacket *p);

#endif /* HW_PIB_SWITCH_H */
