/*
 * pib HCA device model - the port
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The port's state, and the port as its management agents see it (fabric/pib-mgmt.h): the
 * PibMgmtOps through which the SMA and the PMA act on this HCA, the admin commands that
 * reach them (MAD_IFC, SET_NODE_DESC) or read what they keep (QUERY_PORT, QUERY_PKEY,
 * QUERY_GID, SET_PORT), the traps they send and the events they raise.
 *
 * The machine itself, its transitions and names, is the fabric's (fabric/pib-port-sm.c); this
 * file enters its states for the HCA: LINK_STATE, the link-down count, the async events.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/main-loop.h"

#include "pib-internal.h"
#include "../trace.h"

#define PIB_NODE_DESC_DEFAULT   "pib-hca"

uint8_t pib_port_ib_state(const PibState *s)
{
    return pib_port_sm_ib_state(s->port.sm);
}

uint8_t pib_port_phys_state(const PibState *s)
{
    return pib_port_sm_phys_state(s->port.sm, s->port.disabled);
}

bool pib_port_link_up(const PibState *s)
{
    return pib_port_sm_link_up(s->port.sm);
}

bool pib_port_active(const PibState *s)
{
    return s->port.sm == PIB_PSM_ACTIVE;
}

/* Without an SM the `lid` property is the LID, and a trained link goes ACTIVE. */
bool pib_port_no_sm(const PibState *s)
{
    return s->prop_lid != 0;
}

/* Is lid one of ours (the port's LID, with its LMC path bits)? */
bool pib_lid_is_ours(const PibState *s, uint16_t lid)
{
    const PibMgmtPort *m = &s->port.mgmt;
    uint16_t mask = ~((1u << m->lmc) - 1);

    return m->lid && (lid & mask) == (m->lid & mask);
}

/* Where a trained link settles. */
static PibPortSmState pib_port_trained_state(const PibState *s)
{
    return pib_port_no_sm(s) && s->port.mgmt.lid ? PIB_PSM_ACTIVE : PIB_PSM_INIT;
}

static PibPortSmState pib_port_next_state(const PibState *s, PibPortSmEvent ev)
{
    return pib_port_sm_next(s->port.sm, ev, s->port.disabled, pib_port_trained_state(s));
}

/*
 * Enter a new state: mirror it in LINK_STATE, count link downs, raise the async events.
 */
static void pib_port_set_state(PibState *s, PibPortSmState next, PibPortSmEvent ev)
{
    PibPortSmState prev = s->port.sm;
    bool was_up = pib_port_link_up(s);

    if (next == prev) {
        return;
    }
    trace_pib_port_state(s->node_guid, pib_port_sm_names[prev],
                         pib_port_sm_names[next], pib_port_ev_names[ev]);
    s->port.sm = next;
    s->regs.link_state = pib_port_link_up(s) ? PIB_LINK_UP : PIB_LINK_DOWN;

    if (was_up && !pib_port_link_up(s)) {
        s->port.link_downs++;
        pib_count(s, PIB_CNT_LINK_DOWNS, 1);
    }
    if (prev == PIB_PSM_ACTIVE) {
        pib_aeq_post(s, PIB_AE_PORT_ERR, PIB_PORT_NUM, 0);
    }
    if (next == PIB_PSM_ACTIVE) {
        pib_aeq_post(s, PIB_AE_PORT_ACTIVE, PIB_PORT_NUM, 0);
        /* Requesters held back while the port could not send may go on. */
        pib_qp_kick_waiters(s);
    } else if (next == PIB_PSM_INIT && !was_up) {
        pib_aeq_post(s, PIB_AE_LINK_UP, PIB_PORT_NUM, 0);
    }
}

void pib_port_event(PibState *s, PibPortSmEvent ev)
{
    pib_port_set_state(s, pib_port_next_state(s, ev), ev);
}

/*
 * A migrated device keeps the GUIDs it had (a node-guid derived from the cable's address may
 * differ at the destination): the node's, the port's, and what the link says in its HELLO.
 */
void pib_set_node_guid(PibState *s, uint64_t guid)
{
    s->node_guid = guid;
    s->mgmt.node_guid = guid;
    s->mgmt.sys_image_guid = guid;
    s->port.mgmt.guid = pib_port_guid(s);
    s->link.id = guid;
    s->link.node_guid = guid;
    s->link.port_guid = pib_port_guid(s);
}

/*
 * At CONTROL.ENABLE: report the state the port is already in, as if it had just got there,
 * so a driver never has to race the link.
 */
void pib_port_announce(PibState *s)
{
    if (s->port.sm == PIB_PSM_ACTIVE) {
        pib_aeq_post(s, PIB_AE_PORT_ACTIVE, PIB_PORT_NUM, 0);
    } else if (pib_port_link_up(s)) {
        pib_aeq_post(s, PIB_AE_LINK_UP, PIB_PORT_NUM, 0);
    }
}

/*
 * Function reset: the management state goes back to what no SM has touched (no LID, the
 * default partition), or to the `lid` property without an SM.  A trained link stays
 * trained; the port goes back to INIT (or ACTIVE without an SM) for the SM to find.  No
 * events: after a reset there is no AEQ.
 */
void pib_port_reset(PibState *s)
{
    PibPort *p = &s->port;

    pib_mgmt_port_reset(&p->mgmt);
    pib_cc_reset(&s->mgmt.cc);
    p->mgmt.lid = s->prop_lid;
    p->disabled = false;
    p->link_downs = 0;
    if (pib_port_link_up(s)) {
        p->sm = pib_port_trained_state(s);
    }
    s->regs.link_state = pib_port_link_up(s) ? PIB_LINK_UP : PIB_LINK_DOWN;
}

/*
 * The port as the management agents see it (PibMgmtOps)
 */

static PibState *pib_mgmt_state(PibMgmtPort *m)
{
    return m->node->opaque;
}

static uint8_t pib_mgmt_port_state(PibMgmtPort *m)
{
    return pib_port_ib_state(pib_mgmt_state(m));
}

static uint8_t pib_mgmt_phys_state(PibMgmtPort *m)
{
    return pib_port_phys_state(pib_mgmt_state(m));
}

static void pib_mgmt_port_event(void *opaque, PibPortSmEvent ev)
{
    pib_port_event(opaque, ev);
}

/* An SM's PortInfo Set: the fabric's one way for every port (pib-port-sm.h). */
static void pib_mgmt_set_port_state(PibMgmtPort *m, uint8_t state)
{
    PibState *s = pib_mgmt_state(m);

    pib_port_sm_set_port_state(&s->link, state, pib_mgmt_port_event, s);
}

static void pib_mgmt_set_phys_state(PibMgmtPort *m, uint8_t phys)
{
    PibState *s = pib_mgmt_state(m);

    pib_port_sm_set_phys_state(&s->link, &s->port.disabled, phys);
}

static void pib_mgmt_changed(PibMgmtPort *m, unsigned what)
{
    PibState *s = pib_mgmt_state(m);

    if (what & PIB_MGMT_CHG_LID) {
        pib_aeq_post(s, PIB_AE_LID_CHANGE, PIB_PORT_NUM, m->lid);
    }
    if (what & PIB_MGMT_CHG_SM) {
        pib_aeq_post(s, PIB_AE_SM_CHANGE, PIB_PORT_NUM, m->sm_lid);
    }
    if (what & PIB_MGMT_CHG_PKEY) {
        pib_aeq_post(s, PIB_AE_PKEY_CHANGE, PIB_PORT_NUM, 0);
    }
    if (what & PIB_MGMT_CHG_GID) {
        pib_aeq_post(s, PIB_AE_GID_CHANGE, PIB_PORT_NUM, 0);
    }
    if (what & PIB_MGMT_CHG_REREG) {
        pib_aeq_post(s, PIB_AE_CLIENT_REREG, PIB_PORT_NUM, 0);
    }
}

/* A trap: a UD SMP from our QP0 to the SM's, on VL15. */
static void pib_mgmt_send_trap(PibMgmtPort *m, const struct pib_smp *smp, uint16_t dlid,
                               uint8_t sl)
{
    PibState *s = pib_mgmt_state(m);
    PibPktFields f = pib_pkt_trap_fields(dlid, sl);

    if (!pib_xmit_room(s, dlid)) {
        return;             /* the queue is full: the trap's resend timer tries again */
    }
    pib_xmit(s, pib_pkt_build(s, &f, smp, sizeof(*smp)), dlid);
    pib_link_flush(s);
}

/* The PMA's counters: the device's own, as IBTA 16.1.3 names them. */
static void pib_mgmt_read_counters(PibMgmtPort *m, PibMgmtCounters *c)
{
    const uint64_t *n = pib_mgmt_state(m)->counters;

    pib_link_sync_counters(pib_mgmt_state(m));
    *c = (PibMgmtCounters) {
        /* Data counts octets from the LRH to the ICRC, which the link does not carry. */
        .xmit_data = n[PIB_CNT_TX_BYTES] + 4 * n[PIB_CNT_TX_PACKETS],
        .rcv_data = n[PIB_CNT_RX_BYTES] + 4 * n[PIB_CNT_RX_PACKETS],
        .xmit_pkts = n[PIB_CNT_TX_PACKETS],
        .rcv_pkts = n[PIB_CNT_RX_PACKETS],
        .uni_xmit_pkts = n[PIB_CNT_TX_PACKETS] - n[PIB_CNT_TX_MCAST_PACKETS],
        .uni_rcv_pkts = n[PIB_CNT_RX_PACKETS] - n[PIB_CNT_RX_MCAST_PACKETS],
        .multi_xmit_pkts = n[PIB_CNT_TX_MCAST_PACKETS],
        .multi_rcv_pkts = n[PIB_CNT_RX_MCAST_PACKETS],
        .symbol_errors = n[PIB_CNT_LINK_FRAMING_ERRORS],
        .link_recovery = n[PIB_CNT_LINK_FRAMING_ERRORS] + n[PIB_CNT_LINK_RECOVERIES],
        .link_downed = n[PIB_CNT_LINK_DOWNS],
        /* PortRcvErrors include PortVLMappingErrors (IBTA 16.1.4.5). */
        .rcv_errors = n[PIB_CNT_RX_DROP_MALFORMED] + n[PIB_CNT_RX_DROP_DLID] +
                      n[PIB_CNT_RX_DROP_OPCODE] + n[PIB_CNT_RX_DROP_VL],
        .xmit_discards = n[PIB_CNT_TX_DROP_PORT_DOWN] + n[PIB_CNT_TX_DROP_TXQ_FULL] +
                         n[PIB_CNT_TX_DROP_VL],
        .rcv_constraint = n[PIB_CNT_RX_DROP_PKEY],
        .vl15_dropped = n[PIB_CNT_RX_DROP_VL15],
        .buffer_overrun = n[PIB_CNT_RX_DROP_CREDIT],
        .xmit_wait = n[PIB_CNT_XMIT_WAIT_US],
    };
}

static const PibMgmtOps pib_port_mgmt_ops = {
    .port_state = pib_mgmt_port_state,
    .phys_state = pib_mgmt_phys_state,
    .set_port_state = pib_mgmt_set_port_state,
    .set_phys_state = pib_mgmt_set_phys_state,
    .changed = pib_mgmt_changed,
    .send_trap = pib_mgmt_send_trap,
    .read_counters = pib_mgmt_read_counters,
};

void pib_port_realize(PibState *s)
{
    PibMgmtNode *n = &s->mgmt;

    *n = (PibMgmtNode) {
        .ops = &pib_port_mgmt_ops,
        .opaque = s,
        .node_type = PIB_NODE_TYPE_CA,
        .num_ports = PIB_NUM_PORTS,
        .node_guid = s->node_guid,
        .sys_image_guid = s->node_guid,
        .device_id = PIB_PCI_DEVICE_ID,
        .revision = PIB_PCI_REVISION,
        .vendor_id = PIB_VENDOR_OUI,
        .ports = s->mgmt_ports,
    };
    g_strlcpy(n->node_desc, PIB_NODE_DESC_DEFAULT, sizeof(n->node_desc));
    s->mgmt_ports[0] = NULL;                /* a CA has no port 0 */
    s->mgmt_ports[PIB_PORT_NUM] = &s->port.mgmt;
    pib_mgmt_port_init(n, &s->port.mgmt, PIB_PORT_NUM, pib_port_guid(s));
}

void pib_port_unrealize(PibState *s)
{
    pib_mgmt_port_fini(&s->port.mgmt);
}

/*
 * Partitions in the packet path (docs/reference/hardware.md, "Port")
 */

/* The P_Key of table entry idx (QPs and GSI sends name entries by index). */
uint16_t pib_port_pkey(const PibState *s, uint16_t idx)
{
    return idx < PIB_PKEY_TBL_LEN ? s->port.mgmt.pkeys[idx] : 0;
}

/*
 * A received packet's P_Key failed the check: count it in PortInfo:P_KeyViolations and, for
 * QP1, tell the SM (trap 257: the packet's LIDs, key, SL and QPs).
 */
void pib_port_bad_pkey(PibState *s, const PibPktInfo *pi)
{
    PibMgmtPort *m = &s->port.mgmt;
    uint8_t d[50] = { 0 };

    if (m->pkey_violations != UINT16_MAX) {
        m->pkey_violations++;
    }
    if (pi->dqpn != PIB_QPN_GSI) {
        return;
    }
    stw_be_p(d + 2, pi->slid);
    stw_be_p(d + 4, pi->dlid);
    stl_be_p(d + 6, pi->pkey);
    stl_be_p(d + 10, (uint32_t)pi->sl << 28 | (pi->src_qpn & PIB_QPN_MASK));
    stl_be_p(d + 14, pi->dqpn);
    pib_sma_trap(m, PIB_NOTICE_TYPE_SECURITY, PIB_TRAP_BAD_PKEY, d, sizeof(d));
}

/*
 * Admin commands of the port
 */

static bool pib_port_num_valid(uint8_t port_num)
{
    return port_num >= 1 && port_num <= PIB_NUM_PORTS;
}

uint8_t pib_cmd_query_port(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    const PibMgmtPort *m = &s->port.mgmt;
    struct pib_port_attr a;

    if (!pib_port_num_valid(cmd->in.port.port_num)) {
        return PIB_AQ_BAD_PARAM;
    }
    a = (struct pib_port_attr) {
        .subnet_prefix  = cpu_to_le64(m->gid_prefix),
        .port_guid      = cpu_to_le64(m->guid),
        .port_cap_flags = cpu_to_le32(m->cap_mask),
        .max_msg_sz     = cpu_to_le32(PIB_MAX_MSG_SZ),
        .lid            = cpu_to_le16(m->lid),
        .sm_lid         = cpu_to_le16(m->sm_lid),
        .pkey_tbl_len   = cpu_to_le16(PIB_PKEY_TBL_LEN),
        .gid_tbl_len    = cpu_to_le16(PIB_GID_TBL_LEN),
        .state          = pib_port_ib_state(s),
        .phys_state     = pib_port_phys_state(s),
        .max_mtu        = PIB_PORT_MTU_ENUM,
        .active_mtu     = MIN(m->neighbor_mtu, PIB_PORT_MTU_ENUM),
        .lmc            = m->lmc,
        .sm_sl          = m->sm_sl,
        .active_width   = PIB_MGMT_WIDTH_4X,
        .active_speed   = PIB_MGMT_SPEED_QDR,
        .subnet_timeout = m->subnet_timeout,
        .max_vl_num     = PIB_MGMT_VL_CAP,
        .link_downs     = cpu_to_le32(s->port.link_downs),
        .bad_pkey_cntr  = cpu_to_le32(m->pkey_violations),
        .qkey_viol_cntr = cpu_to_le32(m->qkey_violations),
    };
    return pib_admin_respond(s, cmd, &a, sizeof(a));
}

/*
 * SET_PORT: validate every field named in the mask first, then apply them all, so a
 * rejected command changes nothing.  The LID and SM are an SM's to set, through the SMA;
 * only a port without one (the `lid` property) takes them here.  Capability bits are set
 * before they are cleared (clear wins), and the firmware's own stay.
 */
uint8_t pib_cmd_set_port(PibState *s, const struct pib_admin_cmd *cmd,
                         PibAdminResult *res)
{
    const struct pib_cmd_set_port *p = &cmd->in.set_port;
    PibMgmtPort *m = &s->port.mgmt;
    uint32_t mask = le32_to_cpu(p->mask);
    uint16_t lid = le16_to_cpu(p->lid);
    uint16_t sm_lid = le16_to_cpu(p->sm_lid);
    const uint32_t known = PIB_SET_PORT_LID | PIB_SET_PORT_SM | PIB_SET_PORT_CAPS;
    uint32_t caps = m->cap_mask;

    if (!pib_port_num_valid(p->port_num) || (mask & ~known)) {
        return PIB_AQ_BAD_PARAM;
    }
    if ((mask & (PIB_SET_PORT_LID | PIB_SET_PORT_SM)) && !pib_port_no_sm(s)) {
        return PIB_AQ_BAD_STATE;
    }
    if ((mask & PIB_SET_PORT_LID) && (!pib_lid_is_unicast(lid) || p->lmc > 7)) {
        return PIB_AQ_BAD_PARAM;
    }
    if ((mask & PIB_SET_PORT_SM) &&
        ((sm_lid != 0 && !pib_lid_is_unicast(sm_lid)) || p->sm_sl > 15)) {
        return PIB_AQ_BAD_PARAM;
    }

    if (mask & PIB_SET_PORT_CAPS) {
        caps |= le32_to_cpu(p->cap_set);
        caps &= ~le32_to_cpu(p->cap_clr);
        caps |= PIB_PORT_CAP_FIRMWARE;
        if (caps != m->cap_mask) {
            m->cap_mask = caps;
            pib_sma_cap_changed(m, false);
        }
    }
    if (mask & PIB_SET_PORT_SM) {
        m->sm_lid = sm_lid;
        m->sm_sl = p->sm_sl;
    }
    if (mask & PIB_SET_PORT_LID) {
        m->lmc = p->lmc;
        if (lid != m->lid) {
            m->lid = lid;
            pib_aeq_post(s, PIB_AE_LID_CHANGE, PIB_PORT_NUM, lid);
            pib_port_event(s, PIB_PEV_LID_SET);
        }
    }
    trace_pib_admin_set_port(mask, m->lid, m->sm_lid, m->cap_mask);
    return PIB_AQ_OK;
}

uint8_t pib_cmd_query_pkey(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    uint32_t idx = le32_to_cpu(cmd->in.port.index);

    if (!pib_port_num_valid(cmd->in.port.port_num) || idx >= PIB_PKEY_TBL_LEN) {
        return PIB_AQ_BAD_PARAM;
    }
    res->result0 = pib_port_pkey(s, idx);
    return PIB_AQ_OK;
}

/*
 * GID index idx (< PIB_GID_TBL_LEN): the SM's subnet prefix and GUIDInfo entry idx,
 * big-endian as on the wire; all zeros while the SM has assigned no alias GUID there.
 */
void pib_port_gid(const PibState *s, unsigned idx, uint8_t gid[16])
{
    uint64_t guid = pib_mgmt_port_guid(&s->port.mgmt, idx);

    stq_be_p(gid, guid ? s->port.mgmt.gid_prefix : 0);
    stq_be_p(gid + 8, guid);
}

/* Is gid one of the port's assigned GIDs (a unicast packet's DGID that makes it ours)? */
bool pib_port_has_gid(const PibState *s, const uint8_t gid[16])
{
    uint8_t mine[16];
    unsigned i;

    for (i = 0; i < PIB_GID_TBL_LEN; i++) {
        pib_port_gid(s, i, mine);
        if ((i == 0 || ldq_be_p(mine + 8)) && !memcmp(gid, mine, sizeof(mine))) {
            return true;
        }
    }
    return false;
}

uint8_t pib_cmd_query_gid(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    uint8_t gid[16];

    if (!pib_port_num_valid(cmd->in.port.port_num) ||
        le32_to_cpu(cmd->in.port.index) >= PIB_GID_TBL_LEN) {
        return PIB_AQ_BAD_PARAM;
    }
    pib_port_gid(s, le32_to_cpu(cmd->in.port.index), gid);
    return pib_admin_respond(s, cmd, gid, sizeof(gid));
}

/*
 * MAD_IFC: one MAD for the firmware's agents (include/pib_mad.h).  SMPs go to the SMA,
 * performance MADs to the PMA, congestion control MADs to the CC agent, everything else is
 * not the firmware's (result 0: the driver passes it on).  A response goes to resp_addr, which must hold a whole MAD.
 */
uint8_t pib_cmd_mad_ifc(PibState *s, const struct pib_admin_cmd *cmd, PibAdminResult *res)
{
    struct pib_mad_ifc_in in;
    uint8_t out[PIB_MAD_SIZE];
    PibMadCtx ctx;
    uint32_t flags, r;

    if (le32_to_cpu(cmd->in.mbox.len) < sizeof(in) ||
        le32_to_cpu(cmd->resp_len) < PIB_MAD_SIZE) {
        return PIB_AQ_BAD_PARAM;
    }
    if (!pib_admin_mbox_read(s, cmd, &in, sizeof(in), "MAD_IFC mailbox")) {
        return PIB_AQ_DMA_ERROR;
    }
    flags = le32_to_cpu(in.flags);
    if (!pib_port_num_valid(in.port_num)) {
        return PIB_AQ_BAD_PARAM;
    }
    ctx = (PibMadCtx) {
        .port = in.port_num,
        .wire = flags & PIB_MAD_IFC_F_WIRE,
        .ignore_mkey = flags & PIB_MAD_IFC_F_IGNORE_MKEY,
        .slid = le16_to_cpu(in.slid),
        .sl = in.sl,
    };
    switch (in.mad[1]) {                /* the management class */
    case PIB_MGMT_CLASS_SUBN_LID:
    case PIB_MGMT_CLASS_SUBN_DR:
        r = pib_sma_process(&s->mgmt, &ctx, in.mad, out);
        break;
    case PIB_MGMT_CLASS_PERF:
        r = pib_pma_process(&s->mgmt, &ctx, in.mad, out);
        break;
    case PIB_MGMT_CLASS_CC:
        r = pib_cc_process(&s->mgmt, &ctx, in.mad, out);
        break;
    default:
        r = 0;
        break;
    }
    trace_pib_admin_mad_ifc(in.mad[1], in.mad[3], lduw_be_p(in.mad + 16), r);
    if ((r & PIB_MAD_IFC_REPLY) &&
        !pib_dma_write(s, le64_to_cpu(cmd->resp_addr), out, sizeof(out),
                       "MAD_IFC response")) {
        return PIB_AQ_DMA_ERROR;
    }
    res->result0 = r;
    return PIB_AQ_OK;
}

/* SET_NODE_DESC: the NodeDescription the SMA reports; a change raises trap 144. */
uint8_t pib_cmd_set_node_desc(PibState *s, const struct pib_admin_cmd *cmd,
                              PibAdminResult *res)
{
    char desc[PIB_SMP_DATA_SIZE];

    if (le32_to_cpu(cmd->in.mbox.len) < sizeof(desc)) {
        return PIB_AQ_BAD_PARAM;
    }
    if (!pib_admin_mbox_read(s, cmd, desc, sizeof(desc), "node description")) {
        return PIB_AQ_DMA_ERROR;
    }
    if (memcmp(desc, s->mgmt.node_desc, sizeof(desc))) {
        memcpy(s->mgmt.node_desc, desc, sizeof(desc));
        pib_sma_cap_changed(&s->port.mgmt, true);
    }
    return PIB_AQ_OK;
}
