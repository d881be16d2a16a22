/*
 * pib fabric - the port state machine, for every port of every node
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"

#include "pib-fabric.h"

/*
 * The port state machine (IBTA 7.2, PortState and PortPhysicalState in one):
 *
 *   POLLING  --STREAM_UP-->   TRAINING (HELLO sent; not while DISABLED)
 *   TRAINING --HELLO-->       INIT, or ACTIVE without an SM (the HCA's `lid` property)
 *   INIT     --SM_ARM-->      ARMED          (PortInfo Set PortState=ARMED)
 *   ARMED    --SM_ACTIVATE--> ACTIVE         (PortInfo Set PortState=ACTIVE)
 *   ARMED    --RX_DATA-->     ACTIVE         (a data packet arrived, IBTA 7.2.5)
 *   INIT     --LID_SET-->     ACTIVE         (without an SM: SET_PORT gave a LID)
 *   any      --STREAM_DOWN--> POLLING        (the stream closed, framing lost, or an SM
 *                                             took the link down: it retrains)
 *
 * What each state lets through is each device's business (docs/reference/hardware.md,
 * "Port"): an HCA's receive path (hca/pib-rx.c) and its link (fabric/pib-link.c), a
 * switch's forwarding (switch/pib-switch.c).
 */

const char *const pib_port_sm_names[PIB_PSM__MAX] = {
    [PIB_PSM_POLLING]  = "POLLING",
    [PIB_PSM_TRAINING] = "TRAINING",
    [PIB_PSM_INIT]     = "INIT",
    [PIB_PSM_ARMED]    = "ARMED",
    [PIB_PSM_ACTIVE]   = "ACTIVE",
};

const char *const pib_port_ev_names[PIB_PEV__MAX] = {
    [PIB_PEV_STREAM_UP]   = "STREAM_UP",
    [PIB_PEV_HELLO]       = "HELLO",
    [PIB_PEV_STREAM_DOWN] = "STREAM_DOWN",
    [PIB_PEV_LID_SET]     = "LID_SET",
    [PIB_PEV_SM_ARM]      = "SM_ARM",
    [PIB_PEV_SM_ACTIVATE] = "SM_ACTIVATE",
    [PIB_PEV_RX_DATA]     = "RX_DATA",
};

/* The IBTA PortState of a state of the machine (an HCA's port or a switch's). */
uint8_t pib_port_sm_ib_state(PibPortSmState sm)
{
    switch (sm) {
    case PIB_PSM_INIT:   return PIB_PORT_INIT;
    case PIB_PSM_ARMED:  return PIB_PORT_ARMED;
    case PIB_PSM_ACTIVE: return PIB_PORT_ACTIVE;
    default:             return PIB_PORT_DOWN;
    }
}

/*
 * The transition table, one state at a time.  Events that do not apply leave the state as
 * it is (the SMA has already refused the transitions the IBTA forbids).  Every port runs
 * it: the HCA's and each external port of a switch (pib-switch.c).
 */
PibPortSmState pib_port_sm_next(PibPortSmState cur, PibPortSmEvent ev, bool disabled,
                                PibPortSmState trained)
{
    if (ev == PIB_PEV_STREAM_DOWN) {
        return PIB_PSM_POLLING;
    }
    switch (cur) {
    case PIB_PSM_POLLING:
        if (ev == PIB_PEV_STREAM_UP && !disabled) {
            return PIB_PSM_TRAINING;
        }
        break;
    case PIB_PSM_TRAINING:
        if (ev == PIB_PEV_HELLO) {
            return trained;
        }
        break;
    case PIB_PSM_INIT:
        if (ev == PIB_PEV_SM_ARM) {
            return PIB_PSM_ARMED;
        }
        if (ev == PIB_PEV_LID_SET) {
            return trained;
        }
        break;
    case PIB_PSM_ARMED:
        if (ev == PIB_PEV_SM_ACTIVATE || ev == PIB_PEV_RX_DATA) {
            return PIB_PSM_ACTIVE;
        }
        break;
    default:
        break;
    }
    return cur;
}

uint8_t pib_port_sm_phys_state(PibPortSmState sm, bool disabled)
{
    return disabled ? PIB_PHYS_DISABLED :
           pib_port_sm_link_up(sm) ? PIB_PHYS_LINKUP : PIB_PHYS_POLLING;
}

bool pib_port_sm_link_up(PibPortSmState sm)
{
    return sm == PIB_PSM_INIT || sm == PIB_PSM_ARMED || sm == PIB_PSM_ACTIVE;
}

void pib_port_sm_set_port_state(PibLink *link, uint8_t state, PibPortEventFn *event,
                                void *port)
{
    switch (state) {
    case PIB_PORT_DOWN:
        if (link) {
            pib_link_take_down(link, "PortInfo PortState=DOWN");
        }
        break;
    case PIB_PORT_ARMED:
        event(port, PIB_PEV_SM_ARM);
        break;
    case PIB_PORT_ACTIVE:
        event(port, PIB_PEV_SM_ACTIVATE);
        break;
    default:
        break;
    }
}

void pib_port_sm_set_phys_state(PibLink *link, bool *disabled, uint8_t phys)
{
    *disabled = phys == PIB_PHYS_DISABLED;
    if (link) {
        pib_link_take_down(link, *disabled ? "PortInfo phys=DISABLED" :
                                             "PortInfo phys=POLLING");
    }
}
