/*
 * pib fabric - the subnet management agent's ports: state, partitions, traps
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * What the SMA (pib-sma.c, which answers the SMPs) keeps per port and sends on its own:
 *
 *   - a port's state before any SM touched it (pib_mgmt_port_reset), and its lifetime;
 *   - the M_Key lease (IBTA 14.2.4.3): when it runs out the protection goes;
 *   - partitions (IBTA 10.9): which P_Keys match, and the table entry a packet's key matches;
 *   - traps (IBTA 13.4.9): a Notice to the port's master SM, resent after the subnet timeout
 *     until the SM represses it (pib-sma.c handles TrapRepress) or PIB_MGMT_TRAP_SENDS sends
 *     went unanswered.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/error-report.h"
#include "qemu/timer.h"
#include "migration/vmstate.h"

#include "../include/pib_link.h"  /* P_Key bits */
#include "pib-fabric.h"
#include "../trace.h"

/* The resend interval of a trap: the subnet timeout plus our response time, at least 10 ms. */
static int64_t sma_trap_interval_ns(const PibMgmtPort *p)
{
    int64_t ns = 4096LL << p->subnet_timeout;

    return MAX(ns + (4096LL << PIB_MGMT_RESP_TIME), 10 * SCALE_MS);
}

/*
 * Port state, reset, lifetime
 */

static void sma_mkey_lease_expired(void *opaque)
{
    PibMgmtPort *p = opaque;

    /* IBTA 14.2.4.3: the protection goes, so a new SM can read the M_Key. */
    trace_pib_sma_mkey_lease(p->node->node_guid, p->num, "expired");
    p->mkey_protect = 0;
}

static void sma_trap_resend(void *opaque);

void pib_mgmt_port_init(PibMgmtNode *n, PibMgmtPort *p, uint8_t num, uint64_t guid)
{
    p->node = n;
    p->num = num;
    p->guid = guid;
    p->mkey_lease_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, sma_mkey_lease_expired, p);
    p->trap.timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, sma_trap_resend, p);
    pib_mgmt_port_reset(p);
}

void pib_mgmt_port_fini(PibMgmtPort *p)
{
    timer_free(p->mkey_lease_timer);
    timer_free(p->trap.timer);
    p->mkey_lease_timer = NULL;
    p->trap.timer = NULL;
}

/*
 * What a port looks like before any SM touched it: no LID, no key, the default partition
 * (P_Key 0xffff at index 0, IBTA 10.9.1.1), the largest MTU, one data VL.
 */
void pib_mgmt_port_reset(PibMgmtPort *p)
{
    PibMgmtTrap *t = &p->trap;

    p->mkey = 0;
    p->gid_prefix = PIB_DEFAULT_GID_PREFIX;
    p->lid = 0;
    p->sm_lid = 0;
    p->cap_mask = PIB_PORT_CAP_FIRMWARE;
    p->mkey_lease = 0;
    p->mkey_protect = 0;
    p->lmc = 0;
    p->sm_sl = 0;
    p->neighbor_mtu = PIB_MGMT_MTU_CAP;
    p->subnet_timeout = 0;
    p->link_width_enabled = SMA_WIDTH_SUPPORTED;
    p->link_speed_enabled = SMA_SPEED_SUPPORTED;
    p->link_down_default = SMA_LINK_DOWN_POLLING;
    p->vl_high_limit = 0;
    p->operational_vls = PIB_MGMT_VL_CAP;
    p->hoq_life = PIB_MGMT_HOQ_INFINITE;   /* no discard until an SM sets a lifetime */
    p->vl_stall_count = SMA_VL_STALL_COUNT;
    p->enforce = 0;
    p->phy_overrun_thresh = 0;
    p->mkey_violations = 0;
    p->pkey_violations = 0;
    p->qkey_violations = 0;
    memset(p->pkeys, 0, sizeof(p->pkeys));
    p->pkeys[0] = PIB_DEFAULT_PKEY;
    memset(p->alias_guids, 0, sizeof(p->alias_guids));
    memset(p->sl2vl, 0, sizeof(p->sl2vl));          /* every SL on VL0 */
    memset(p->vlarb_low, 0, sizeof(p->vlarb_low));
    memset(p->vlarb_high, 0, sizeof(p->vlarb_high));
    memset(p->pma_base, 0, sizeof(p->pma_base));
    timer_del(p->mkey_lease_timer);
    timer_del(t->timer);
    t->pending = false;
    t->sends = 0;
}

/*
 * Partitions (IBTA 10.9): two P_Keys match when their 15-bit keys are equal and not both
 * are limited members.  Keys 0x0000 and 0x8000 are invalid and match nothing.
 */
bool pib_mgmt_pkey_match(uint16_t a, uint16_t b)
{
    return (a & PIB_PKEY_BASE_MASK) != 0 &&
           (a & PIB_PKEY_BASE_MASK) == (b & PIB_PKEY_BASE_MASK) &&
           ((a | b) & PIB_PKEY_FULL_MEMBER);
}

/* The index of the first table entry a packet's P_Key matches, or -1. */
int pib_mgmt_pkey_find(const PibMgmtPort *p, uint16_t pkey)
{
    int i;

    for (i = 0; i < PIB_PKEY_TBL_LEN; i++) {
        if (pib_mgmt_pkey_match(p->pkeys[i], pkey)) {
            return i;
        }
    }
    return -1;
}

/*
 * Traps
 */

/* Can port p (a switch: its port 0) reach a master SM now?  It knows one, and is ARMED+. */
static bool sma_trap_reachable(PibMgmtPort *p)
{
    uint8_t state = p->node->ops->port_state(p);

    return p->sm_lid && (p->cap_mask & PIB_PORT_CAP_TRAP) &&
           (state == PIB_PORT_ARMED || state == PIB_PORT_ACTIVE);
}

/*
 * (Re)send the pending trap to the port's master SM as it is now: an SM that took over since
 * the trap was made gets the resends (a trap goes to PortInfo:MasterSMLID, not to where the
 * first send went, which may be an SM that is gone, or this very port).  A resend while the
 * port cannot reach an SM (link down, back in INIT) counts as a send that went nowhere.
 */
static void sma_trap_send(PibMgmtPort *p)
{
    PibMgmtTrap *t = &p->trap;
    uint16_t num = be16_to_cpu(((struct pib_notice *)t->smp.data)->trap_num_be);

    t->sends++;
    if (sma_trap_reachable(p)) {
        t->dlid = p->sm_lid;
        t->sl = p->sm_sl;
        trace_pib_sma_trap(p->node->node_guid, p->num, num, t->dlid, t->sends);
        p->node->ops->send_trap(p, &t->smp, t->dlid, t->sl);
    } else {
        trace_pib_sma_trap_unsent(p->node->node_guid, p->num, num, p->sm_lid,
                                  p->node->ops->port_state(p));
    }
    if (t->sends < PIB_MGMT_TRAP_SENDS) {
        timer_mod(t->timer, qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) +
                            sma_trap_interval_ns(p));
    } else {
        t->pending = false;         /* given up: the SM will find out by sweeping */
    }
}

static void sma_trap_resend(void *opaque)
{
    PibMgmtPort *p = opaque;

    if (p->trap.pending) {
        sma_trap_send(p);
    }
}

/*
 * Send a trap (a Notice with the given DataDetails) from port p to its master SM.  Only a port
 * an SM has configured (it knows the SM's LID, and it is at least ARMED) can reach the SM.  A
 * newer trap replaces one still being resent.  Returns whether it went out.
 */
bool pib_sma_trap(PibMgmtPort *p, uint8_t type, uint16_t trap_num,
                  const void *details, size_t len)
{
    PibMgmtNode *n = p->node;
    PibMgmtPort *mp = n->node_type == PIB_NODE_TYPE_SWITCH ? n->ports[0] : p;
    PibMgmtTrap *t = &mp->trap;
    struct pib_notice *notice;

    if (!sma_trap_reachable(mp)) {
        trace_pib_sma_trap_unsent(n->node_guid, p->num, trap_num, mp->sm_lid,
                                  n->ops->port_state(p));
        return false;
    }
    memset(&t->smp, 0, sizeof(t->smp));
    t->smp.hdr = (struct pib_mad_hdr) {
        .base_version = PIB_MAD_BASE_VERSION,
        .mgmt_class = PIB_MGMT_CLASS_SUBN_LID,
        .class_version = PIB_SMP_CLASS_VERSION,
        .method = PIB_MAD_METHOD_TRAP,
        .tid_hi_be = cpu_to_be32(0x70696200),      /* "pib" */
        .tid_lo_be = cpu_to_be32((uint32_t)++n->next_tid),
        .attr_id_be = cpu_to_be16(PIB_SMP_ATTR_NOTICE),
    };
    stq_be_p(&t->smp.mkey_hi_be, mp->mkey);
    notice = (struct pib_notice *)t->smp.data;
    notice->generic_type = PIB_NOTICE_GENERIC | type;
    notice->producer_lo_be = cpu_to_be16(n->node_type);
    notice->trap_num_be = cpu_to_be16(trap_num);
    notice->issuer_lid_be = cpu_to_be16(mp->lid);
    memcpy(notice->details, details, MIN(len, sizeof(notice->details)));
    t->dlid = mp->sm_lid;
    t->sl = mp->sm_sl;
    t->pending = true;
    t->sends = 0;
    timer_del(t->timer);
    sma_trap_send(mp);
    return true;
}

/* Trap 144: the port's CapabilityMask (or, node_desc, the NodeDescription) changed. */
void pib_sma_cap_changed(PibMgmtPort *p, bool node_desc)
{
    struct pib_trap144 d = {
        .lid_be = cpu_to_be16(p->lid),
        .local_changes = node_desc ? 1 : 0,
        .cap_mask_hi_be = cpu_to_be16(p->cap_mask >> 16),
        .cap_mask_lo_be = cpu_to_be16(p->cap_mask & 0xffff),
        .change_flags = node_desc ? PIB_TRAP144_NODE_DESC : 0,
    };

    if (p->cap_mask & (node_desc ? PIB_PORT_CAP_OTHER_LOCAL_CHG :
                                   PIB_PORT_CAP_CAP_MASK_NOTICE)) {
        pib_sma_trap(p, PIB_NOTICE_TYPE_INFO, PIB_TRAP_CAP_MASK_CHANGE, &d,
                     sizeof(d));
    }
}

/*
 * A port's management state in a migration stream (the HCA's, pib-vmstate.c): what the SM set,
 * the violation counters, the PMA's bases, the M_Key lease and a trap being resent.  The
 * fields that size a shift are checked as the SMA checks a Set.
 */
static int sma_port_post_load(void *opaque, int version_id)
{
    PibMgmtPort *p = opaque;

    if (p->lmc > 7 || p->mkey_protect > 3 || p->subnet_timeout > 31 || p->hoq_life > 31) {
        error_report("pib: migration stream refused: port %u PortInfo (LMC %u, "
                     "M_KeyProtect %u, SubnetTimeout %u, HOQLife %u)", p->num, p->lmc,
                     p->mkey_protect, p->subnet_timeout, p->hoq_life);
        pib_mgmt_port_reset(p);     /* nothing refused stays */
        return -EINVAL;
    }
    return 0;
}

/* Wire-format bytes (pib_mad.h), kept as they are. */
#define SMA_VMSTATE_RAW(_field) PIB_VMSTATE_BYTES(PibMgmtPort, _field)

/* The alias GUIDs travel only when an SM assigned some: older streams load without them. */
static bool sma_alias_guids_needed(void *opaque)
{
    PibMgmtPort *p = opaque;
    unsigned i;

    for (i = 1; i < PIB_MGMT_GUID_CAP; i++) {
        if (p->alias_guids[i]) {
            return true;
        }
    }
    return false;
}

static const VMStateDescription vmstate_pib_mgmt_port_alias_guids = {
    .name = "pib-mgmt-port/alias-guids",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = sma_alias_guids_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64_ARRAY(alias_guids, PibMgmtPort, PIB_MGMT_GUID_CAP),
        VMSTATE_END_OF_LIST()
    },
};

const VMStateDescription vmstate_pib_mgmt_port = {
    .name = "pib-mgmt-port",
    .version_id = 1,
    .minimum_version_id = 1,
    .post_load = sma_port_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64(mkey, PibMgmtPort),
        VMSTATE_UINT64(gid_prefix, PibMgmtPort),
        VMSTATE_UINT16(lid, PibMgmtPort),
        VMSTATE_UINT16(sm_lid, PibMgmtPort),
        VMSTATE_UINT32(cap_mask, PibMgmtPort),
        VMSTATE_UINT16(mkey_lease, PibMgmtPort),
        VMSTATE_UINT8(mkey_protect, PibMgmtPort),
        VMSTATE_UINT8(lmc, PibMgmtPort),
        VMSTATE_UINT8(sm_sl, PibMgmtPort),
        VMSTATE_UINT8(neighbor_mtu, PibMgmtPort),
        VMSTATE_UINT8(subnet_timeout, PibMgmtPort),
        VMSTATE_UINT8(link_width_enabled, PibMgmtPort),
        VMSTATE_UINT8(link_speed_enabled, PibMgmtPort),
        VMSTATE_UINT8(link_down_default, PibMgmtPort),
        VMSTATE_UINT8(vl_high_limit, PibMgmtPort),
        VMSTATE_UINT8(operational_vls, PibMgmtPort),
        VMSTATE_UINT8(hoq_life, PibMgmtPort),
        VMSTATE_UINT8(vl_stall_count, PibMgmtPort),
        VMSTATE_UINT8(enforce, PibMgmtPort),
        VMSTATE_UINT8(phy_overrun_thresh, PibMgmtPort),
        VMSTATE_UINT16(mkey_violations, PibMgmtPort),
        VMSTATE_UINT16(pkey_violations, PibMgmtPort),
        VMSTATE_UINT16(qkey_violations, PibMgmtPort),
        VMSTATE_UINT16_ARRAY(pkeys, PibMgmtPort, PIB_PKEY_TBL_LEN),
        VMSTATE_UINT8_ARRAY(sl2vl, PibMgmtPort, PIB_SL2VL_BYTES),
        SMA_VMSTATE_RAW(vlarb_low),
        SMA_VMSTATE_RAW(vlarb_high),
        VMSTATE_TIMER_PTR(mkey_lease_timer, PibMgmtPort),
        VMSTATE_UINT64_ARRAY(pma_base, PibMgmtPort, PIB_PMA_CTR_MAX),
        VMSTATE_BOOL(trap.pending, PibMgmtPort),
        SMA_VMSTATE_RAW(trap.smp),
        VMSTATE_UINT16(trap.dlid, PibMgmtPort),
        VMSTATE_UINT8(trap.sl, PibMgmtPort),
        VMSTATE_UINT32(trap.sends, PibMgmtPort),
        VMSTATE_TIMER_PTR(trap.timer, PibMgmtPort),
        VMSTATE_END_OF_LIST()
    },
    .subsections = (const VMStateDescription *[]) {     /* 7.2 and 10.0 both take it */
        &vmstate_pib_mgmt_port_alias_guids,
        NULL
    },
};
