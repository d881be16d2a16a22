/*
 * pib fabric - the port state machine (pib-port-sm.c), for every port of every node
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * PortState and PortPhysicalState in one machine, because here they move together.  The
 * same machine runs every port: an HCA's (hca/pib-port.c) and each of a switch's external
 * ports (switch/pib-switch.c).  The transitions are pure (pib_port_sm_next); entering a
 * state has effects only the device knows (async events, waking requesters), so each
 * device enters states itself.  The diagram is in pib-port-sm.c.
 */
#ifndef HW_PIB_PORT_SM_H
#define HW_PIB_PORT_SM_H

struct PibLink;

typedef enum PibPortSmState {
    PIB_PSM_POLLING,    /* no peer (or DISABLED): PortState DOWN */
    PIB_PSM_TRAINING,   /* stream open, HELLO sent, waiting for the peer's */
    PIB_PSM_INIT,       /* link up, waiting for an SM: SMPs only */
    PIB_PSM_ARMED,      /* the SM armed it: SMPs out, anything in */
    PIB_PSM_ACTIVE,     /* everything passes */
    PIB_PSM__MAX
} PibPortSmState;

typedef enum PibPortSmEvent {
    PIB_PEV_STREAM_UP,      /* chardev connected (CHR_EVENT_OPENED) */
    PIB_PEV_HELLO,          /* a valid HELLO arrived from the peer */
    PIB_PEV_STREAM_DOWN,    /* chardev closed, framing lost, or retrained */
    PIB_PEV_LID_SET,        /* without an SM: SET_PORT gave the port a LID */
    PIB_PEV_SM_ARM,         /* PortInfo Set PortState=ARMED */
    PIB_PEV_SM_ACTIVATE,    /* PortInfo Set PortState=ACTIVE */
    PIB_PEV_RX_DATA,        /* a data packet arrived (ARMED -> ACTIVE) */
    PIB_PEV__MAX
} PibPortSmEvent;

extern const char *const pib_port_sm_names[PIB_PSM__MAX];
extern const char *const pib_port_ev_names[PIB_PEV__MAX];
/*
 * Where event ev takes a port in state cur: disabled is PortPhysicalState DISABLED (the
 * link does not train), trained where a trained link settles (INIT, or ACTIVE without an SM).
 */
PibPortSmState pib_port_sm_next(PibPortSmState cur, PibPortSmEvent ev, bool disabled,
                                PibPortSmState trained);
/* The IBTA PortState (PIB_PORT_*) and PortPhysicalState (PIB_PHYS_*) of a state. */
uint8_t pib_port_sm_ib_state(PibPortSmState sm);
uint8_t pib_port_sm_phys_state(PibPortSmState sm, bool disabled);
/* Is the link up: trained, whatever the SM did since (INIT, ARMED, ACTIVE)? */
bool pib_port_sm_link_up(PibPortSmState sm);

/*
 * An SM's Set of PortState or PortPhysicalState on one port of either device, already
 * checked by the SMA against the IBTA's transitions (both devices' PibMgmtOps end here):
 *   PortState ARMED, ACTIVE: the events SM_ARM, SM_ACTIVATE, which the device feeds to its
 *     port through event(port, ev) (entering a state has effects only the device knows);
 *   PortState DOWN: the link goes down, and trains again;
 *   PortPhysicalState DISABLED or POLLING: *disabled follows, and the link goes down; it
 *     trains again only while enabled (PibLinkOps.may_train).
 * link NULL: the port has no cable (a switch port without a chardev).
 */
typedef void PibPortEventFn(void *port, PibPortSmEvent ev);
void pib_port_sm_set_port_state(struct PibLink *link, uint8_t state, PibPortEventFn *event,
                                void *port);
void pib_port_sm_set_phys_state(struct PibLink *link, bool *disabled, uint8_t phys);

#endif /* HW_PIB_PORT_SM_H */
