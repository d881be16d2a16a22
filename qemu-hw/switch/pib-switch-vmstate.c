/*
 * pib switch - the switch in a migration stream, and the switch while its machine is stopped
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A switch is saved so that a fabric snapshot (`pibvm snapshot save`) holds every device of the
 * fabric at one moment, and loads back (docs/explanation/migration.md).  What is saved is what
 * an SM set and what the agents count: the forwarding tables and SwitchInfo (PibMgmtSwitch),
 * every port's management state (PortInfo, P_Keys, SL2VL, VL arbitration, the PMA's bases, a
 * pending trap: vmstate_pib_mgmt_port, as an HCA's port), each external port's state machine
 * and PhysicalState, its PMA counters, the drop counters, NodeDescription and the traps'
 * transaction IDs.
 *
 * Not saved: the cables.  Frames queued out of a port when the switch stopped are lost with
 * the old streams, as a switch's buffers are when it resets; the transports' retries recover
 * them.  What is saved of each cable is its identity (include/pib_link.h, "Moving";
 * fabric/pib-link-move.c): a port that was up holds its state after the load until the same
 * peer greets the new cable with the token it had, so neither side's port changes state and
 * the SM sees nothing.
 *
 * A stream is input: the switch it names (node GUID, port count) must be this one, a port's
 * state must be one the machine has, an MFT entry may name only ports the switch has, and
 * SwitchInfo's fields must be ones an SM could have set.  A refused stream fails the load with
 * an error that names the field (QEMU's incoming side then exits with status 1).
 *
 * Stopped machine: while the switch's machine is stopped (a snapshot's save, `stop`) its ports
 * read nothing, so nothing is forwarded and no counter moves between the save and `cont`; the
 * frames wait in the sockets.  Nor do they hear a cable close (pib_link_stream_defer): a
 * stopped port does not go down or send trap 128, which matters most for a migration's source,
 * stopped for good while the nodes' cables move to the new switch.  The timers (HOQLife, trap resends, the M_Key lease) are on
 * QEMU_CLOCK_VIRTUAL, which stands still.
 *
 * Live migration (`pibvm migrate sw<S>`): when a migration starts, and again at the save, every
 * port that is up and whose peer greeted it with a token tells that peer the switch may move
 * (a MOVE notice, include/pib_link.h, "Moving"; PibMoveNotice decides when, as for an HCA), so
 * the peer holds its port while the cable is down; a migration that fails withdraws it.  The
 * moved switch's ports hold theirs until the same peers greet the new cables.
 */

#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "migration/vmstate.h"

#include "../pib-compat.h"      /* the run state */
#include "../trace.h"
#include "pib-switch.h"

static bool sw_load_fail(const char *what, uint64_t val)
{
    error_report("pib-switch: migration stream refused: %s (0x%" PRIx64 ")", what, val);
    return false;
}

/*
 * A port
 */

static int sw_port_pre_save(void *opaque)
{
    PibSwitchPort *p = opaque;

    if (p->num != 0) {
        p->ctr.xmit_wait = (pib_link_xmit_wait_ns(&p->link) - p->xmit_wait_base_ns) / SCALE_US;
        pib_link_move_save(&p->link, p->sm, &p->mig);
    }
    return 0;
}

static int sw_port_post_load(void *opaque, int version_id)
{
    PibSwitchPort *p = opaque;

    if (p->mig.port_sm >= PIB_PSM__MAX) {
        sw_load_fail("port state", p->mig.port_sm);
        return -EINVAL;
    }
    return 0;
}

#define SW_VMSTATE_CTR(id, field) VMSTATE_UINT64(ctr.field, PibSwitchPort),

static const VMStateDescription vmstate_pib_sw_port = {
    .name = "pib-switch-port",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_save = sw_port_pre_save,
    .post_load = sw_port_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_STRUCT(mig, PibSwitchPort, 1, vmstate_pib_link_move, PibLinkMoveSaved),
        VMSTATE_BOOL(disabled, PibSwitchPort),
        VMSTATE_STRUCT(mgmt, PibSwitchPort, 1, vmstate_pib_mgmt_port, PibMgmtPort),
        PIB_PMA_CTRS(SW_VMSTATE_CTR)
        VMSTATE_END_OF_LIST()
    },
};

/*
 * The switch
 */

/* Each port's MOVE notice: only a port that is up, with a peer that gave a token. */
static bool sw_move_announce(void *opaque, uint32_t wait_ms)
{
    PibSwitch *sw = opaque;
    bool told = false;
    int i;

    for (i = 1; i <= sw->nports; i++) {
        PibSwitchPort *p = &sw->ports[i];

        if (p->linked && (!wait_ms || (pib_sw_port_up(p) && p->link.peer_token))) {
            pib_link_move_announce(&p->link, wait_ms);
            told = true;
        }
    }
    return told;
}

static int sw_pre_save(void *opaque)
{
    PibSwitch *sw = opaque;

    sw->mig_node_guid = sw->node_guid;
    sw->mig_ports = sw->nports + 1;
    pib_move_notice_save(&sw->move_notice);    /* we may be about to move: again */
    return 0;
}

/* Before the ports load: the stream must be this switch's, with as many ports. */
static bool sw_stream_is_ours(void *opaque, int version_id)
{
    PibSwitch *sw = opaque;

    if (sw->mig_node_guid != sw->node_guid) {
        return sw_load_fail("node GUID (this switch's is another)", sw->mig_node_guid);
    }
    if (sw->mig_ports != sw->nports + 1) {
        return sw_load_fail("port count (port 0 included)", sw->mig_ports);
    }
    return true;
}

/* SwitchInfo and the MFT as sma_switch_info and sma_mft (fabric/pib-sma.c) take them. */
static bool sw_tables_ok(PibSwitch *sw)
{
    const PibMgmtSwitch *t = &sw->tables;
    uint32_t i;

    if (t->lft_top >= PIB_SW_LFT_CAP) {
        return sw_load_fail("LinearFDBTop", t->lft_top);
    }
    if (t->mft_top != 0 && (t->mft_top < PIB_LID_MULTICAST_BASE ||
                            t->mft_top >= PIB_LID_MULTICAST_BASE + PIB_SW_MFT_CAP)) {
        return sw_load_fail("MulticastFDBTop", t->mft_top);
    }
    if (t->life_time > 31) {
        return sw_load_fail("LifeTimeValue", t->life_time);
    }
    for (i = 0; i < PIB_SW_MFT_CAP; i++) {
        if (t->mft[i] & ~pib_mgmt_mft_ports(sw->nports)) {
            return sw_load_fail("MFT entry with a port the switch lacks", i);
        }
    }
    return true;
}

static int sw_post_load(void *opaque, int version_id)
{
    PibSwitch *sw = opaque;
    unsigned held = 0;
    int i;

    if (!sw_tables_ok(sw)) {
        pib_mgmt_switch_reset(&sw->tables);     /* nothing refused stays */
        return -EINVAL;
    }
    for (i = 1; i <= sw->nports; i++) {
        PibSwitchPort *p = &sw->ports[i];

        /*
         * A port that was up stays so while its link waits for the old peer (pib-link-move.c);
         * one that was not, or a port without a cable here, starts as the new link decides.
         */
        if (p->linked && pib_link_move_load(&p->link, &p->mig)) {
            p->sm = p->mig.port_sm;
            held++;
        }
        /* PortXmitWait goes on from the saved count. */
        p->xmit_wait_base_ns = pib_link_xmit_wait_ns(&p->link) - p->ctr.xmit_wait * SCALE_US;
    }
    trace_pib_switch_loaded(sw->node_guid, sw->nports, held);
    sw->mig_loaded = true;
    return 0;
}

/* Congestion control (fabric/pib-cc.c): only when an SM set something. */
static bool sw_cc_needed(void *opaque)
{
    PibSwitch *sw = opaque;

    return pib_cc_needed(&sw->mgmt.cc) || sw->fecn_marked;
}

static const VMStateDescription vmstate_pib_switch_cc = {
    .name = "pib-switch/cc",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = sw_cc_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_STRUCT(mgmt.cc, PibSwitch, 1, vmstate_pib_mgmt_cc, PibMgmtCc),
        VMSTATE_UINT64(fecn_marked, PibSwitch),
        VMSTATE_END_OF_LIST()
    },
};

/*
 * Version 2: MFT entries of 64 bits (a 32-port switch's port 32 is bit 32).  A version 1
 * stream, from a pib before it, is refused: QEMU says which versions it takes.
 */
const VMStateDescription vmstate_pib_switch = {
    .name = "pib-switch",
    .version_id = 2,
    .minimum_version_id = 2,
    .pre_save = sw_pre_save,
    .post_load = sw_post_load,
    .subsections = (const VMStateDescription *[]) {
        &vmstate_pib_switch_cc,
        NULL
    },
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64(mig_node_guid, PibSwitch),
        VMSTATE_UINT8(mig_ports, PibSwitch),
        VMSTATE_VALIDATE("the switch saved", sw_stream_is_ours),
        VMSTATE_STRUCT_VARRAY_UINT8(ports, PibSwitch, mig_ports, 1, vmstate_pib_sw_port,
                                    PibSwitchPort),
        PIB_VMSTATE_BYTES(PibSwitch, tables.lft),
        VMSTATE_UINT64_ARRAY(tables.mft, PibSwitch, PIB_SW_MFT_CAP),
        VMSTATE_UINT16(tables.lft_top, PibSwitch),
        VMSTATE_UINT16(tables.mft_top, PibSwitch),
        VMSTATE_UINT8(tables.life_time, PibSwitch),
        VMSTATE_BOOL(tables.port_state_change, PibSwitch),
        VMSTATE_UINT8(tables.def_mcast_pri_port, PibSwitch),
        VMSTATE_UINT8(tables.def_mcast_not_pri_port, PibSwitch),
        PIB_VMSTATE_BYTES(PibSwitch, tables.sl2vl),
        PIB_VMSTATE_BYTES(PibSwitch, mgmt.node_desc),
        VMSTATE_UINT64(mgmt.next_tid, PibSwitch),
        VMSTATE_UINT64_ARRAY(drops, PibSwitch, PIB_SW_DROP__MAX),
        VMSTATE_UINT64(forwarded, PibSwitch),
        VMSTATE_END_OF_LIST()
    },
};

/*
 * Running and stopped
 */

static void sw_vm_state_change(void *opaque, bool running, RunState state)
{
    PibSwitch *sw = opaque;
    int i;

    pib_move_notice_run_state(&sw->move_notice, running, sw->mig_loaded);
    if (running) {
        sw->mig_loaded = false;
    }
    for (i = 1; i <= sw->nports; i++) {
        if (sw->ports[i].linked) {
            pib_link_rx_pause(&sw->ports[i].link, !running);
        }
    }
}

/* After the ports' links are attached (realize). */
void pib_sw_vmstate_realize(PibSwitch *sw)
{
    sw->vm_change = qemu_add_vm_change_state_handler(sw_vm_state_change, sw);
    pib_move_notice_init(&sw->move_notice, sw_move_announce, sw);
    if (!runstate_is_running()) {
        sw_vm_state_change(sw, false, RUN_STATE_PRELAUNCH);
    }
}

void pib_sw_vmstate_unrealize(PibSwitch *sw)
{
    qemu_del_vm_change_state_handler(sw->vm_change);
    pib_move_notice_fini(&sw->move_notice);
}
