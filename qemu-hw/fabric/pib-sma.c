/*
 * pib fabric - the subnet management agent (SMA)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Answers subnet management packets (IBTA 14.2) for a node's ports, as one pass over the MAD:
 *
 *   CHECK     base and class version; a response, a Trap or SMInfo is not ours: pass it on
 *             to the MAD agents (SMInfo belongs to the SM, if one runs behind the port)
 *   M_KEY     the management key (IBTA 14.2.4): a Set, a TrapRepress, or (protection level 2
 *             and up) a Get with the wrong key is dropped, counted in M_KeyViolations, starts
 *             the M_Key lease and raises trap 256
 *   METHOD    Get and Set go to the attribute's handler; TrapRepress ends a trap's resends;
 *             anything else is answered with "unsupported method"
 *   ATTRIBUTE one handler per attribute (the table below, made from PIB_SMP_ATTRS): a Set is
 *             checked whole and applied only if every field is valid, else nothing changes
 *             and the status says "invalid value" (0x1c); either way the response carries
 *             the attribute as it now stands
 *   RESPOND   GetResp, with the D bit for directed-route SMPs (the kernel's smi.c walks the
 *             directed-route path on a CA; a switch does that itself)
 *
 * Traps (IBTA 13.4.9): the SMA sends a trap to the port's master SM and sends it again, after
 * the subnet timeout, until the SM represses it or PIB_MGMT_TRAP_SENDS sends went unanswered.
 * Each send goes to the master SM of the moment (PortInfo:MasterSMLID), so an SM that took
 * over gets the resends, not the SM that is gone (or this port itself, where it ran).
 *
 * The attribute modifier: each handler reads only the bits IBTA defines for its attribute and
 * node type, and ignores the rest, as a receiver must ignore reserved fields (IBTA 13.4.8.1
 * "reserved fields are ignored on receipt").  A switch-only field (the port number of
 * P_KeyTable, SLtoVLMappingTable and VLArbitrationTable) is reserved on a CA: diagnostic tools
 * send it to every node type, and a CA that refused it would break their reports.  Only a
 * defined field holding a value the node does not have (a block past the table, a port past
 * NumPorts) gets "invalid value".
 *
 * The ports' state (reset, M_Key lease, partitions) and the traps' sending and resending are in
 * pib-sma-port.c; this file is the SMP's pass and the attributes.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/timer.h"

#include "../include/pib_link.h"  /* LID ranges */
#include "pib-fabric.h"
#include "../trace.h"

const char *pib_smp_attr_name(uint16_t attr)
{
    switch (attr) {
#define PIB_SMP_ATTR_NAME(id, value, name) case value: return name;
    PIB_SMP_ATTRS(PIB_SMP_ATTR_NAME)
#undef PIB_SMP_ATTR_NAME
    default:
        return "unknown";
    }
}

/* One SMP being answered. */
typedef struct SmaReq {
    PibMgmtNode *n;
    const PibMadCtx *ctx;
    PibMgmtPort *mport;         /* the port whose M_Key guards the node: CA the arrival */
                                /* port, switch port 0 */
    struct pib_smp *smp;        /* the response, a copy of the request at first */
    bool set;
    bool mkey_ok;               /* the SMP offered the right M_Key (or none was needed) */
} SmaReq;

/*
 * Helpers
 */

static uint64_t sma_mkey(const struct pib_smp *smp)
{
    return ldq_be_p(&smp->mkey_hi_be);
}

static uint32_t sma_attr_mod(const SmaReq *r)
{
    return be32_to_cpu(r->smp->hdr.attr_mod_be);
}

static bool sma_lid_unicast(uint16_t lid)
{
    return lid >= 0x0001 && lid <= 0xbfff;
}

/*
 * The port an attribute modifier names (PortInfo, P_KeyTable on a switch, SL2VL ...): 0 is
 * the port the SMP arrived on for a CA, the management port for a switch.
 */
static PibMgmtPort *sma_port(const SmaReq *r, uint32_t num)
{
    PibMgmtNode *n = r->n;

    if (num == 0) {
        return n->node_type == PIB_NODE_TYPE_SWITCH ? n->ports[0] :
               n->ports[r->ctx->port];
    }
    return num <= n->num_ports ? n->ports[num] : NULL;
}

/* Is a link width or speed Set value acceptable (0 and "all supported" included)? */
static bool sma_enable_ok(uint8_t val, uint8_t all, uint8_t supported)
{
    return val == 0 || val == all || (val & ~supported) == 0;
}

/* TrapRepress: the SM has the trap with this TID; stop resending it. */
static uint32_t sma_trap_repress(SmaReq *r)
{
    PibMgmtTrap *t = &r->mport->trap;
    struct pib_mad_hdr *h = &r->smp->hdr;

    if (be16_to_cpu(h->attr_id_be) == PIB_SMP_ATTR_NOTICE && t->pending &&
        h->tid_hi_be == t->smp.hdr.tid_hi_be && h->tid_lo_be == t->smp.hdr.tid_lo_be) {
        trace_pib_sma_trap_repressed(r->n->node_guid, r->mport->num, t->sends);
        t->pending = false;
        timer_del(t->timer);
    }
    return PIB_MAD_IFC_CONSUMED;        /* a TrapRepress has no response */
}

/*
 * M_Key (IBTA 14.2.4): returns false if the SMP must be dropped as a violation.
 */
static bool sma_check_mkey(SmaReq *r)
{
    PibMgmtPort *p = r->mport;
    struct pib_smp *smp = r->smp;
    uint8_t method = smp->hdr.method;
    struct pib_trap256 d;
    uint8_t hops;

    r->mkey_ok = r->ctx->ignore_mkey || p->mkey == 0 || p->mkey == sma_mkey(smp);
    if (r->mkey_ok) {
        timer_del(p->mkey_lease_timer);     /* a valid key ends the lease countdown */
        return true;
    }
    if (method == PIB_MAD_METHOD_GET && p->mkey_protect < 2) {
        return true;                        /* not a violation below level 2 */
    }
    if (p->mkey_violations != UINT16_MAX) {
        p->mkey_violations++;
    }
    trace_pib_sma_mkey_violation(r->n->node_guid, p->num, method,
                                 be16_to_cpu(smp->hdr.attr_id_be), p->mkey_violations);
    if (p->mkey_lease && !timer_pending(p->mkey_lease_timer)) {
        trace_pib_sma_mkey_lease(r->n->node_guid, p->num, "started");
        timer_mod(p->mkey_lease_timer, qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) +
                                       p->mkey_lease * NANOSECONDS_PER_SECOND);
    }
    memset(&d, 0, sizeof(d));
    d.lid_be = cpu_to_be16(p->lid);
    d.method = method;
    d.attr_id_be = smp->hdr.attr_id_be;
    d.attr_mod_hi_be = cpu_to_be16(sma_attr_mod(r) >> 16);
    d.attr_mod_lo_be = cpu_to_be16(sma_attr_mod(r) & 0xffff);
    memcpy(d.mkey_be, &smp->mkey_hi_be, sizeof(d.mkey_be));
    if (smp->hdr.mgmt_class == PIB_MGMT_CLASS_SUBN_DR) {
        hops = be16_to_cpu(smp->hdr.class_spec_be) & 0x3f;
        d.dr_slid_be = smp->dr_slid_be;
        d.dr_trunc_hop = 0x80 | (hops > sizeof(d.dr_return_path) ? 0x40 : 0) | hops;
        memcpy(d.dr_return_path, smp->return_path, sizeof(d.dr_return_path));
    }
    pib_sma_trap(p, PIB_NOTICE_TYPE_SECURITY, PIB_TRAP_BAD_MKEY, &d, sizeof(d));
    return false;
}

/*
 * Attributes.  A handler checks and (for a Set) applies; it returns a MAD status.  After it,
 * the Get handler of the same attribute fills the response.
 */

/* NodeDescription (IBTA 14.2.5.2): read-only through SMPs. */
static uint16_t sma_node_desc(SmaReq *r)
{
    if (r->set) {
        return PIB_MAD_STATUS_UNSUP_ATTR;
    }
    /* The modifier is reserved (0 on sending): ignored. */
    memcpy(r->smp->data, r->n->node_desc, sizeof(r->smp->data));
    return PIB_MAD_STATUS_OK;
}

/* NodeInfo (IBTA 14.2.5.3): read-only; PortGUID and LocalPortNum are the arrival port's. */
static uint16_t sma_node_info(SmaReq *r)
{
    PibMgmtNode *n = r->n;
    struct pib_node_info *ni = (struct pib_node_info *)r->smp->data;
    PibMgmtPort *p = n->node_type == PIB_NODE_TYPE_SWITCH ? n->ports[0] :
                     n->ports[r->ctx->port];

    if (r->set) {
        return PIB_MAD_STATUS_UNSUP_ATTR;
    }
    /* The modifier is reserved: ignored. */
    ni->base_version = PIB_MAD_BASE_VERSION;
    ni->class_version = PIB_SMP_CLASS_VERSION;
    ni->node_type = n->node_type;
    ni->num_ports = n->num_ports;
    stq_be_p(&ni->sys_image_guid_hi_be, n->sys_image_guid);
    stq_be_p(&ni->node_guid_hi_be, n->node_guid);
    stq_be_p(&ni->port_guid_hi_be, p->guid);
    ni->partition_cap_be = cpu_to_be16(PIB_PKEY_TBL_LEN);
    ni->device_id_be = cpu_to_be16(n->device_id);
    ni->revision_be = cpu_to_be32(n->revision);
    ni->port_vendor_be = cpu_to_be32((uint32_t)r->ctx->port << 24 |
                                     (n->vendor_id & 0xffffff));
    return PIB_MAD_STATUS_OK;
}

/*
 * GUIDInfo (IBTA 14.2.5.5): the modifier is the block of 8 entries, and a port has one
 * (GUIDCap is at most 8).  Entry 0 is the port GUID, read-only: a Set of it is ignored.
 * Entries 1 .. GUIDCap - 1 are alias GUIDs an SM assigns (0: none); entries past GUIDCap
 * read as 0 and ignore a Set.  A changed alias is a GID change (PIB_MGMT_CHG_GID): on an HCA
 * it is GID index i of the port's table.
 */
static uint16_t sma_guid_info(SmaReq *r)
{
    PibMgmtPort *p = sma_port(r, 0);
    unsigned cap = pib_mgmt_guid_cap(r->n), i;
    uint64_t *data = (uint64_t *)r->smp->data;
    bool changed = false;
    uint64_t guid;

    if (sma_attr_mod(r) != 0) {
        return PIB_MAD_STATUS_INVALID_VALUE;
    }
    for (i = 1; r->set && i < cap; i++) {
        guid = ldq_be_p(&data[i]);
        changed |= guid != p->alias_guids[i];
        p->alias_guids[i] = guid;
    }
    memset(r->smp->data, 0, sizeof(r->smp->data));
    for (i = 0; i < cap; i++) {
        stq_be_p(&data[i], pib_mgmt_port_guid(p, i));
    }
    if (changed) {
        trace_pib_sma_guid_info_set(r->n->node_guid, p->num);
        r->n->ops->changed(p, PIB_MGMT_CHG_GID);
    }
    return PIB_MAD_STATUS_OK;
}

static void sma_port_info_fill(SmaReq *r, PibMgmtPort *p)
{
    const PibMgmtOps *ops = r->n->ops;
    struct pib_port_info *pi = (struct pib_port_info *)r->smp->data;
    bool show_mkey = !(r->smp->hdr.method == PIB_MAD_METHOD_GET && !r->mkey_ok &&
                       p->mkey_protect == 1);

    memset(pi, 0, sizeof(*pi));
    stq_be_p(&pi->mkey_hi_be, show_mkey ? p->mkey : 0);
    stq_be_p(&pi->gid_prefix_hi_be, p->gid_prefix);
    pi->lid_be = cpu_to_be16(p->lid);
    pi->sm_lid_be = cpu_to_be16(p->sm_lid);
    pi->cap_mask_be = cpu_to_be32(p->cap_mask);
    pi->mkey_lease_be = cpu_to_be16(p->mkey_lease);
    pi->local_port_num = r->ctx->port;
    pi->link_width_enabled = p->link_width_enabled;
    pi->link_width_supported = SMA_WIDTH_SUPPORTED;
    pi->link_width_active = PIB_MGMT_WIDTH_4X;
    pi->speed_state = SMA_SPEED_SUPPORTED << 4 | ops->port_state(p);
    pi->phys_down = ops->phys_state(p) << 4 | p->link_down_default;
    pi->mkeyprot_lmc = p->mkey_protect << 6 | p->lmc;
    pi->speed_active_enabled = PIB_MGMT_SPEED_QDR << 4 | p->link_speed_enabled;
    pi->mtu_smsl = p->neighbor_mtu << 4 | p->sm_sl;
    pi->vlcap_inittype = PIB_MGMT_VL_CAP << 4;
    pi->vl_high_limit = p->vl_high_limit;
    pi->vl_arb_high_cap = PIB_MGMT_VLARB_CAP;
    pi->vl_arb_low_cap = PIB_MGMT_VLARB_CAP;
    pi->inittypereply_mtucap = PIB_MGMT_MTU_CAP;
    pi->vlstall_hoqlife = p->vl_stall_count << 5 | p->hoq_life;
    pi->opvls_enforce = p->operational_vls << 4 | p->enforce;
    pi->mkey_violations_be = cpu_to_be16(p->mkey_violations);
    pi->pkey_violations_be = cpu_to_be16(p->pkey_violations);
    pi->qkey_violations_be = cpu_to_be16(p->qkey_violations);
    pi->guid_cap = pib_mgmt_guid_cap(r->n);
    pi->rereg_subnet_timeout = p->subnet_timeout;   /* ClientReregister reads as 0 */
    pi->resp_time = PIB_MGMT_RESP_TIME;
    pi->phy_overrun_errors = p->phy_overrun_thresh;
}

/*
 * PortInfo Set: every field is checked first (the port's state transition included, IBTA
 * 14.2.5.6 table 148: INIT -> ARMED -> ACTIVE, any state -> DOWN); then all are applied, the
 * node is asked for the state changes, and told what changed so it can raise the events.
 */
static uint16_t sma_port_info_set(SmaReq *r, PibMgmtPort *p)
{
    const PibMgmtOps *ops = r->n->ops;
    const struct pib_port_info *pi = (const struct pib_port_info *)r->smp->data;
    uint16_t lid = be16_to_cpu(pi->lid_be);
    uint16_t sm_lid = be16_to_cpu(pi->sm_lid_be);
    uint8_t state = pi->speed_state & 0xf;
    uint8_t phys = pi->phys_down >> 4;
    uint8_t link_down = pi->phys_down & 0xf;
    uint8_t lse = pi->speed_active_enabled & 0xf;
    uint8_t mtu = pi->mtu_smsl >> 4;
    uint8_t opvls = pi->opvls_enforce >> 4;
    uint8_t cur = ops->port_state(p);
    uint64_t gid_prefix = ldq_be_p(&pi->gid_prefix_hi_be);
    bool sw = r->n->node_type == PIB_NODE_TYPE_SWITCH;
    bool ext = sw && p->num != 0;   /* a switch's external port: no LID, no M_Key */
    const char *bad = NULL;
    unsigned changed = 0;

    if (sw && p->num == 0) {
        /* Base switch port 0 has no link: its PortState and PhysicalState are fixed. */
        state = PIB_PORTINFO_STATE_NOP;
        phys = PIB_PORTINFO_PHYS_NOP;
    }
    if (!ext && !sma_lid_unicast(lid)) {
        bad = "LID";
    } else if (!ext && sm_lid != 0 && !sma_lid_unicast(sm_lid)) {
        bad = "MasterSMLID";
    } else if (!(state == PIB_PORTINFO_STATE_NOP || state == PIB_PORT_DOWN ||
                 (state == PIB_PORT_ARMED && cur == PIB_PORT_INIT) ||
                 (state == PIB_PORT_ACTIVE && cur == PIB_PORT_ARMED))) {
        bad = "PortState transition";
    } else if (phys != PIB_PORTINFO_PHYS_NOP && phys != PIB_PHYS_POLLING &&
               phys != PIB_PHYS_DISABLED) {
        bad = "PortPhysicalState";
    } else if (link_down != 0 && link_down != SMA_LINK_DOWN_POLLING) {
        bad = "LinkDownDefaultState";
    } else if (!sma_enable_ok(pi->link_width_enabled, 0xff, SMA_WIDTH_SUPPORTED)) {
        bad = "LinkWidthEnabled";
    } else if (!sma_enable_ok(lse, 0xf, SMA_SPEED_SUPPORTED)) {
        bad = "LinkSpeedEnabled";
    } else if (mtu < 1 || mtu > PIB_MGMT_MTU_CAP) {
        bad = "NeighborMTU";
    } else if (opvls > PIB_MGMT_VL_CAP) {
        bad = "OperationalVLs";
    }
    if (bad) {
        trace_pib_sma_set_refused(r->n->node_guid, p->num, bad, cur, state);
        return PIB_MAD_STATUS_INVALID_VALUE;
    }

    if (ext) {
        /* The LID, SM, M_Key and GID fields are port 0's: keep them as they are. */
        lid = p->lid;
        sm_lid = p->sm_lid;
        gid_prefix = p->gid_prefix;
    }
    if (lid != p->lid || (pi->mkeyprot_lmc & 7) != p->lmc) {
        changed |= PIB_MGMT_CHG_LID;
    }
    if (sm_lid != p->sm_lid || (pi->mtu_smsl & 0xf) != p->sm_sl) {
        changed |= PIB_MGMT_CHG_SM;
    }
    if (gid_prefix != p->gid_prefix) {
        changed |= PIB_MGMT_CHG_GID;
    }
    if (pi->rereg_subnet_timeout & 0x80) {
        changed |= PIB_MGMT_CHG_REREG;
    }
    if (!ext) {
        p->mkey = ldq_be_p(&pi->mkey_hi_be);
        p->gid_prefix = gid_prefix;
        p->lid = lid;
        p->sm_lid = sm_lid;
        p->mkey_lease = be16_to_cpu(pi->mkey_lease_be);
        p->mkey_protect = pi->mkeyprot_lmc >> 6;
        p->lmc = pi->mkeyprot_lmc & 7;
        p->sm_sl = pi->mtu_smsl & 0xf;
    } else {
        changed = 0;
    }
    if (pi->vlstall_hoqlife != (p->vl_stall_count << 5 | p->hoq_life)) {
        changed |= PIB_MGMT_CHG_HOQ;
    }
    p->neighbor_mtu = mtu;
    p->subnet_timeout = pi->rereg_subnet_timeout & 0x1f;
    if (pi->link_width_enabled) {
        p->link_width_enabled = pi->link_width_enabled == 0xff ?
                                SMA_WIDTH_SUPPORTED : pi->link_width_enabled;
    }
    if (lse) {
        p->link_speed_enabled = lse == 0xf ? SMA_SPEED_SUPPORTED : lse;
    }
    if (link_down) {
        p->link_down_default = link_down;
    }
    p->vl_high_limit = pi->vl_high_limit;
    if (opvls) {
        p->operational_vls = opvls;
    }
    p->hoq_life = pi->vlstall_hoqlife & 0x1f;
    p->vl_stall_count = pi->vlstall_hoqlife >> 5;
    p->enforce = pi->opvls_enforce & 0xf;
    p->phy_overrun_thresh = pi->phy_overrun_errors;
    p->mkey_violations = be16_to_cpu(pi->mkey_violations_be);
    p->pkey_violations = be16_to_cpu(pi->pkey_violations_be);
    p->qkey_violations = be16_to_cpu(pi->qkey_violations_be);
    trace_pib_sma_port_set(r->n->node_guid, p->num, p->lid, p->sm_lid, cur, state, phys);

    if (phys != PIB_PORTINFO_PHYS_NOP) {
        ops->set_phys_state(p, phys);
    }
    if (state != PIB_PORTINFO_STATE_NOP) {
        ops->set_port_state(p, state);
    }
    if (changed) {
        ops->changed(p, changed);
    }
    return PIB_MAD_STATUS_OK;
}

/*
 * PortInfo (IBTA 14.2.5.6): [7:0] of the modifier names the port.  Bit 31 is the SM's
 * SMSupportsExtendedSpeeds (pib has no extended speeds, so there is nothing it changes) and
 * [30:8] are reserved.
 */
static uint16_t sma_port_info(SmaReq *r)
{
    PibMgmtPort *p = sma_port(r, sma_attr_mod(r) & 0xff);
    uint16_t status = PIB_MAD_STATUS_OK;

    if (!p) {
        return PIB_MAD_STATUS_INVALID_VALUE;
    }
    if (r->set) {
        status = sma_port_info_set(r, p);
    }
    sma_port_info_fill(r, p);
    return status;
}

/*
 * P_KeyTable (IBTA 14.2.5.7): [15:0] of the modifier is the block of 32 entries; on a switch
 * [31:16] is the port, on a CA that field is reserved (the table is the arrival port's, as
 * ibsim's SMA and the HCAs answer it).  A Set replaces the whole block.
 */
static uint16_t sma_pkey_table(SmaReq *r)
{
    uint32_t mod = sma_attr_mod(r);
    uint32_t block = mod & 0xffff;
    uint32_t first = block * PIB_PKEY_BLOCK_ENTRIES;
    PibMgmtPort *p = sma_port(r, r->n->node_type == PIB_NODE_TYPE_SWITCH ? mod >> 16 : 0);
    uint16_t *data = (uint16_t *)r->smp->data;
    bool changed = false;
    uint16_t key;
    int i;

    if (!p || first >= PIB_PKEY_TBL_LEN) {
        return PIB_MAD_STATUS_INVALID_VALUE;
    }
    for (i = 0; i < PIB_PKEY_BLOCK_ENTRIES; i++) {
        if (r->set) {
            key = lduw_be_p(&data[i]);
            changed |= key != p->pkeys[first + i];
            p->pkeys[first + i] = key;
        }
        stw_be_p(&data[i], p->pkeys[first + i]);
    }
    if (changed) {
        trace_pib_sma_pkey_set(r->n->node_guid, p->num, block);
        r->n->ops->changed(p, PIB_MGMT_CHG_PKEY);
    }
    return PIB_MAD_STATUS_OK;
}

/*
 * SLtoVLMappingTable (IBTA 14.2.5.8): a CA's one table (the modifier is reserved), or on a
 * switch the table of (input port, output port), with the "every input" and "every output"
 * bits of OptimizedSLtoVLMappingProgramming (pib_mad.h).  A Set is refused whole if an entry
 * names a VL beyond VLCap other than VL15 (VL15 means: drop that SL's packets).  A Get
 * over several tables answers the first.
 */
static uint16_t sma_sl2vl(SmaReq *r)
{
    PibMgmtNode *n = r->n;
    uint32_t mod = sma_attr_mod(r);
    unsigned in = (mod >> 8) & 0xff, out = mod & 0xff;
    unsigned in_end = in, out_end = out, i, j;
    uint16_t status = PIB_MAD_STATUS_OK;
    uint8_t *first;

    for (i = 0; r->set && i < 16; i++) {
        uint8_t vl = pib_mgmt_sl2vl(r->smp->data, i);

        if (vl >= pib_mgmt_vls(PIB_MGMT_VL_CAP) && vl != PIB_VL_MGMT) {
            status = PIB_MAD_STATUS_INVALID_VALUE;
        }
    }
    if (!n->sw) {
        first = sma_port(r, 0)->sl2vl;
        if (r->set && status == PIB_MAD_STATUS_OK) {
            memcpy(first, r->smp->data, PIB_SL2VL_BYTES);
        }
    } else {
        if (mod & PIB_SL2VL_ALL_IN) {
            in = 1;
            in_end = n->num_ports;
        }
        if (mod & PIB_SL2VL_ALL_OUT) {
            out = 1;
            out_end = n->num_ports;
        }
        if (in_end > n->num_ports || out_end > n->num_ports) {
            trace_pib_sma_switch_refused(n->node_guid, "SLtoVLMappingTable", mod);
            return PIB_MAD_STATUS_INVALID_VALUE;
        }
        first = n->sw->sl2vl[in][out];
        for (i = in; r->set && status == PIB_MAD_STATUS_OK && i <= in_end; i++) {
            for (j = out; j <= out_end; j++) {
                memcpy(n->sw->sl2vl[i][j], r->smp->data, PIB_SL2VL_BYTES);
            }
        }
    }
    if (r->set && status == PIB_MAD_STATUS_OK) {
        trace_pib_sma_sl2vl_set(n->node_guid, mod, ldq_be_p(r->smp->data));
    }
    /* The table as it now stands, after a refused Set too. */
    memset(r->smp->data, 0, sizeof(r->smp->data));
    memcpy(r->smp->data, first, PIB_SL2VL_BYTES);
    return status;
}

/*
 * VLArbitrationTable (IBTA 14.2.5.9): the low- and high-priority tables of a port, each of
 * PIB_MGMT_VLARB_CAP (VL, weight) entries, all in the first block of 32; the second block of
 * each table names entries the port does not have.  On a switch [15:0] of the modifier is the
 * port; on a CA it is reserved.  Reserved bits of an entry read as 0.
 */
static uint16_t sma_vlarb(SmaReq *r)
{
    uint32_t mod = sma_attr_mod(r);
    uint32_t block = mod >> 16;
    PibMgmtPort *p = sma_port(r, r->n->sw ? mod & 0xffff : 0);
    struct pib_vlarb_entry *e = (struct pib_vlarb_entry *)r->smp->data;
    struct pib_vlarb_entry *table;
    unsigned i;

    if (!p || (block != PIB_VLARB_LOW_0 && block != PIB_VLARB_HIGH_0)) {
        /* Blocks 2 and 4 hold entries 32-63, beyond VLArbitrationLow/HighCap. */
        return PIB_MAD_STATUS_INVALID_VALUE;
    }
    table = block == PIB_VLARB_LOW_0 ? p->vlarb_low : p->vlarb_high;
    for (i = 0; r->set && i < PIB_MGMT_VLARB_CAP; i++) {
        table[i].vl = e[i].vl & 0xf;
        table[i].weight = e[i].weight;
    }
    if (r->set) {
        trace_pib_sma_vlarb_set(r->n->node_guid, p->num, block);
    }
    memset(r->smp->data, 0, sizeof(r->smp->data));
    memcpy(e, table, sizeof(p->vlarb_low));
    return PIB_MAD_STATUS_OK;
}

/*
 * Switch attributes
 */

/* What no SM has touched: every LID and MLID unrouted, the default life time. */
void pib_mgmt_switch_reset(PibMgmtSwitch *sw)
{
    memset(sw->lft, PIB_LFT_NO_PORT, sizeof(sw->lft));
    memset(sw->mft, 0, sizeof(sw->mft));
    sw->lft_top = 0;
    sw->mft_top = 0;
    sw->life_time = PIB_SW_LIFE_TIME;
    sw->port_state_change = false;
    sw->def_mcast_pri_port = PIB_LFT_NO_PORT;
    sw->def_mcast_not_pri_port = PIB_LFT_NO_PORT;
    memset(sw->sl2vl, 0, sizeof(sw->sl2vl));    /* every SL on VL0 */
}

/*
 * SwitchInfo (IBTA 14.2.5.4; the modifier is reserved): the capacities are read-only, and
 * OptimizedSLtoVLMappingProgramming is offered; a Set takes LinearFDBTop,
 * MulticastFDBTop, the default multicast ports and LifeTimeValue, and clears PortStateChange
 * when it writes 1 there.
 */
static uint16_t sma_switch_info(SmaReq *r)
{
    PibMgmtSwitch *sw = r->n->sw;
    struct pib_switch_info *si = (struct pib_switch_info *)r->smp->data;
    uint16_t lft_top = be16_to_cpu(si->lft_top_be);
    uint16_t mft_top = be16_to_cpu(si->mft_top_be);
    bool bad = (r->set && (lft_top >= PIB_SW_LFT_CAP ||
                           (mft_top != 0 &&
                            (mft_top < PIB_LID_MULTICAST_BASE ||
                             mft_top >= PIB_LID_MULTICAST_BASE + PIB_SW_MFT_CAP))));

    if (bad) {
        trace_pib_sma_switch_refused(r->n->node_guid, "SwitchInfo", sma_attr_mod(r));
    } else if (r->set) {
        sw->lft_top = lft_top;
        sw->mft_top = mft_top;
        sw->def_mcast_pri_port = si->def_mcast_pri_port;
        sw->def_mcast_not_pri_port = si->def_mcast_not_pri_port;
        sw->life_time = si->life_state >> 3;
        if (si->life_state & PIB_SWINFO_PORT_STATE_CHANGE) {
            sw->port_state_change = false;
        }
    }
    memset(r->smp->data, 0, sizeof(r->smp->data));
    si->lft_cap_be = cpu_to_be16(PIB_SW_LFT_CAP);
    si->mft_cap_be = cpu_to_be16(PIB_SW_MFT_CAP);
    si->lft_top_be = cpu_to_be16(sw->lft_top);
    si->def_port = PIB_LFT_NO_PORT;
    si->def_mcast_pri_port = sw->def_mcast_pri_port;
    si->def_mcast_not_pri_port = sw->def_mcast_not_pri_port;
    si->life_state = sw->life_time << 3 | PIB_SWINFO_OPT_SL2VL |
                     (sw->port_state_change ? PIB_SWINFO_PORT_STATE_CHANGE : 0);
    si->mft_top_be = cpu_to_be16(sw->mft_top);
    /* Every external port has a P_KeyTable and enforces it (pib-switch.c). */
    si->enforce_cap_be = cpu_to_be16(PIB_PKEY_TBL_LEN);
    si->flags = PIB_SWINFO_ENFORCE_CAPS;
    return bad ? PIB_MAD_STATUS_INVALID_VALUE : PIB_MAD_STATUS_OK;
}

/* LinearForwardingTable (IBTA 14.2.5.10): 64 LIDs per block, the modifier is the block. */
static uint16_t sma_lft(SmaReq *r)
{
    PibMgmtSwitch *sw = r->n->sw;
    uint32_t block = sma_attr_mod(r);
    uint32_t first = block * PIB_LFT_BLOCK_ENTRIES;

    if (block >= PIB_SW_LFT_CAP / PIB_LFT_BLOCK_ENTRIES) {
        trace_pib_sma_switch_refused(r->n->node_guid, "LinearForwardingTable", block);
        return PIB_MAD_STATUS_INVALID_VALUE;
    }
    if (r->set) {
        memcpy(&sw->lft[first], r->smp->data, PIB_LFT_BLOCK_ENTRIES);
        trace_pib_sma_lft_set(r->n->node_guid, block);
    }
    memcpy(r->smp->data, &sw->lft[first], PIB_LFT_BLOCK_ENTRIES);
    return PIB_MAD_STATUS_OK;
}

/*
 * MulticastForwardingTable (IBTA 14.2.5.12): 32 MLIDs per block; each entry is the 16-bit
 * PortMask of the ports position*16 .. position*16+15.
 */
static uint16_t sma_mft(SmaReq *r)
{
    PibMgmtSwitch *sw = r->n->sw;
    uint32_t mod = sma_attr_mod(r);
    uint32_t block = mod & 0x1ff;
    uint32_t pos = mod >> 28;
    uint32_t first = block * PIB_MFT_BLOCK_ENTRIES;
    uint32_t shift = pos * PIB_MFT_POSITION_PORTS;
    uint16_t *data = (uint16_t *)r->smp->data;
    int i;

    /* [27:9] of the modifier are reserved; a position must hold a port the switch has. */
    if (first >= PIB_SW_MFT_CAP || shift > r->n->num_ports) {
        trace_pib_sma_switch_refused(r->n->node_guid, "MulticastForwardingTable", mod);
        return PIB_MAD_STATUS_INVALID_VALUE;
    }
    for (i = 0; i < PIB_MFT_BLOCK_ENTRIES; i++) {
        uint64_t *e = &sw->mft[first + i];

        if (r->set) {
            *e = (*e & ~(0xffffull << shift)) | (uint64_t)lduw_be_p(&data[i]) << shift;
            /* Port 0 is bit 0 of position 0; ports beyond the switch's do not exist. */
            *e &= pib_mgmt_mft_ports(r->n->num_ports);
        }
        stw_be_p(&data[i], *e >> shift);
    }
    if (r->set) {
        trace_pib_sma_mft_set(r->n->node_guid, block, pos);
    }
    return PIB_MAD_STATUS_OK;
}

typedef uint16_t (*SmaHandler)(SmaReq *r);

typedef struct SmaAttr {
    uint16_t id;
    SmaHandler handler;
    bool switch_only;
} SmaAttr;

/* The attributes the SMA answers: a CA's, and a switch's own. */
static const SmaAttr sma_attrs[] = {
    { PIB_SMP_ATTR_NODE_DESC,   sma_node_desc },
    { PIB_SMP_ATTR_NODE_INFO,   sma_node_info },
    { PIB_SMP_ATTR_GUID_INFO,   sma_guid_info },
    { PIB_SMP_ATTR_PORT_INFO,   sma_port_info },
    { PIB_SMP_ATTR_PKEY_TABLE,  sma_pkey_table },
    { PIB_SMP_ATTR_SL2VL_TABLE, sma_sl2vl },
    { PIB_SMP_ATTR_VLARB_TABLE, sma_vlarb },
    { PIB_SMP_ATTR_SWITCH_INFO, sma_switch_info, true },
    { PIB_SMP_ATTR_LFT,         sma_lft, true },
    { PIB_SMP_ATTR_MFT,         sma_mft, true },
};

/* GetResp, with the D bit on a directed-route SMP. */
static uint32_t sma_respond(SmaReq *r, uint16_t status)
{
    struct pib_smp *smp = r->smp;
    uint16_t st = status;

    if (smp->hdr.mgmt_class == PIB_MGMT_CLASS_SUBN_DR) {
        st |= PIB_SMP_STATUS_DIRECTION;
    }
    smp->hdr.method = PIB_MAD_METHOD_GET_RESP;
    smp->hdr.status_be = cpu_to_be16(st);
    trace_pib_sma_respond(r->n->node_guid, r->ctx->port,
                          pib_smp_attr_name(be16_to_cpu(smp->hdr.attr_id_be)),
                          sma_attr_mod(r), status);
    return PIB_MAD_IFC_REPLY;
}

/*
 * Answer one SMP.  in and out are PIB_MAD_SIZE bytes (out may be in); ctx->port must be a
 * port of the node.  Returns PIB_MAD_IFC_* (out holds the response with REPLY).
 */
uint32_t pib_sma_process(PibMgmtNode *n, const PibMadCtx *ctx, const uint8_t *in,
                         uint8_t *out)
{
    struct pib_smp *smp = (struct pib_smp *)out;
    SmaReq r = {
        .n = n,
        .ctx = ctx,
        .smp = smp,
        .mport = n->node_type == PIB_NODE_TYPE_SWITCH ? n->ports[0] : n->ports[ctx->port],
    };
    uint16_t attr;
    size_t i;

    if (out != in) {
        memcpy(out, in, PIB_MAD_SIZE);
    }
    attr = be16_to_cpu(smp->hdr.attr_id_be);
    trace_pib_sma_mad(n->node_guid, ctx->port, smp->hdr.mgmt_class, smp->hdr.method,
                      pib_smp_attr_name(attr), be32_to_cpu(smp->hdr.attr_mod_be));

    /* CHECK */
    if (smp->hdr.method & PIB_MAD_METHOD_RESP || smp->hdr.method == PIB_MAD_METHOD_TRAP) {
        return 0;                       /* for an SM behind this port, if any */
    }
    if (smp->hdr.base_version != PIB_MAD_BASE_VERSION ||
        smp->hdr.class_version != PIB_SMP_CLASS_VERSION) {
        return sma_respond(&r, PIB_MAD_STATUS_BAD_VERSION);
    }
    if (attr == PIB_SMP_ATTR_SM_INFO) {
        return 0;                       /* the SM's own attribute (IBTA 14.4.1) */
    }

    /* M_KEY */
    if ((smp->hdr.method == PIB_MAD_METHOD_GET || smp->hdr.method == PIB_MAD_METHOD_SET ||
         smp->hdr.method == PIB_MAD_METHOD_TRAP_REPRESS) && !sma_check_mkey(&r)) {
        return PIB_MAD_IFC_CONSUMED;
    }

    /* METHOD */
    switch (smp->hdr.method) {
    case PIB_MAD_METHOD_GET:
        break;
    case PIB_MAD_METHOD_SET:
        r.set = true;
        break;
    case PIB_MAD_METHOD_TRAP_REPRESS:
        return sma_trap_repress(&r);
    default:
        return sma_respond(&r, PIB_MAD_STATUS_UNSUP_METHOD);
    }

    /* ATTRIBUTE */
    for (i = 0; i < ARRAY_SIZE(sma_attrs); i++) {
        if (sma_attrs[i].id == attr &&
            (!sma_attrs[i].switch_only || n->node_type == PIB_NODE_TYPE_SWITCH)) {
            return sma_respond(&r, sma_attrs[i].handler(&r));
        }
    }
    return sma_respond(&r, PIB_MAD_STATUS_UNSUP_ATTR);
}
