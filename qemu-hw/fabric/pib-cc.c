/*
 * pib fabric - the congestion control agent (CC, IBTA Annex A10)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Answers congestion control MADs (class 0x21, version 2; include/pib_mad.h) for a node, a
 * switch or a CA, as its SMA answers SMPs: ClassPortInfo, CongestionInfo, CongestionKeyInfo,
 * CongestionLog and TimeStamp on every node; SwitchCongestionSetting and
 * SwitchPortCongestionSetting on a switch; CACongestionSetting and CongestionControlTable on a
 * CA.  An SM's congestion control manager (opensm's, with `congestion_control TRUE`) writes the
 * settings; `ibccquery` reads them.  What the node holds is PibMgmtCc (pib-mgmt.h): the
 * settings as written (wire format), the CC_Key and its violations, and the log.
 *
 * The CC_Key (A10.4.1.1) guards the settings as the M_Key guards the SMA's: once an SM set a
 * key that is not 0, a Set must carry it, and with the protect bit so must a Get; a MAD that
 * does not is counted (Violations, saturating; a Set of 0 clears it, another value leaves
 * it) and dropped unanswered.  A Get that passes without the key shows the key as 0.  The
 * lease (A10.4.1.1, as the M_Key's, IBTA 14.2.4.3): a violation starts a countdown of
 * CC_KeyLeasePeriod seconds (0: none) unless one runs; a MAD with the right key stops it;
 * when it runs out the protect bit clears, so that a manager that lost the key can read the
 * agent again.  The countdown is a deadline on the virtual clock, looked at when the next MAD
 * comes (nothing but a MAD can see the bit).  Not modelled: the CC_Key violation trap.
 *
 * Nothing here trusts a MAD: the attribute, its modifier and every field are checked before
 * they are used; a Set of a bad value changes nothing and answers INVALID_VALUE.
 *
 * On the data path, a switch asks pib_cc_sw_mark() whether a packet it queues on an output
 * port gets FECN, and logs each one it marks (pib_cc_sw_log); a CA answers FECN with BECN and
 * slows down on BECN by its table (hca/pib-cca.c), logging an index that reaches its
 * threshold (pib_cc_ca_log).  Not yet: credit starvation (Credit_Mask, CS_Threshold).
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/error-report.h"
#include "qemu/timer.h"
#include "migration/vmstate.h"

#include "pib-fabric.h"
#include "../trace.h"

const char *pib_cc_attr_name(uint16_t attr)
{
    switch (attr) {
#define PIB_CC_ATTR_NAME(id, value, name) case value: return name;
    PIB_CC_ATTRS(PIB_CC_ATTR_NAME)
#undef PIB_CC_ATTR_NAME
    default:
        return "unknown";
    }
}

/* Power-on and reset: no key, nothing set, the log empty. */
void pib_cc_reset(PibMgmtCc *cc)
{
    memset(cc, 0, sizeof(*cc));
}

/* TimeStamp (A10.4.3.10): the node's free-running clock, in 1.024 us units. */
uint32_t pib_cc_time_stamp(void)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) / 1024;
}

static bool cc_is_switch(const PibMgmtNode *n)
{
    return n->node_type == PIB_NODE_TYPE_SWITCH;
}

/* Bit port of a 256-bit port mask (Victim_Mask, PortMap): bit 0 is the last byte's lowest. */
static bool cc_port_bit(const uint8_t *mask, unsigned port)
{
    return mask[31 - port / 8] >> (port % 8) & 1;
}

/*
 * Marking (A10.2.1.1): does the packet of len bytes a switch queues on its port `port`, with
 * `ahead` packets before it on its output VL, get FECN?  The queue is congested when `ahead`
 * reaches 16 - Threshold (Threshold 15: any packet waiting; 1: fifteen; 0: never).  The port
 * is the root of the congestion when the queue builds although it may send (its own link is
 * the bottleneck), a victim when its packets wait for credits the next hop withholds
 * (`victim`); a victim marks only if its Victim_Mask bit is set.  Packets shorter than
 * Packet_Size 64-byte units are never marked; of the others, one in Marking_Rate + 1 is.  A
 * valid SwitchPortCongestionSetting element gives the port its own Threshold, Packet_Size and
 * Marking_Rate.
 */
bool pib_cc_sw_mark(PibMgmtCc *cc, uint8_t port, uint32_t ahead, bool victim, uint32_t len)
{
    const struct pib_cc_swp_element *e = &cc->swp[port];
    unsigned threshold, size, rate;

    if ((e->valid_type_threshold & (PIB_CC_SWP_VALID | PIB_CC_SWP_CREDIT_STARVATION)) ==
        PIB_CC_SWP_VALID) {
        threshold = e->valid_type_threshold & PIB_CC_SWP_THRESHOLD;
        size = e->packet_size;
        rate = be16_to_cpu(e->marking_rate_be);
    } else {
        threshold = cc->sw.threshold >> 4;
        size = cc->sw.packet_size;
        rate = be16_to_cpu(cc->sw.marking_rate_be);
    }
    if (threshold == 0 || ahead < 16 - threshold || len < size * 64u ||
        (victim && !cc_port_bit(cc->sw.victim_mask, port))) {
        return false;
    }
    if (cc->mark_skip[port] < rate) {
        cc->mark_skip[port]++;
        return false;
    }
    cc->mark_skip[port] = 0;
    return true;
}

/*
 * Room for a log's newest event at events[0] (the oldest of n falls off the end), counted in
 * its EventCounter (saturating): the step the switch's log and the CA's share.
 */
static void cc_log_push(void *events, size_t n, size_t each, uint16_t *event_counter_be)
{
    uint16_t count = be16_to_cpu(*event_counter_be);

    memmove((uint8_t *)events + each, events, (n - 1) * each);
    *event_counter_be = cpu_to_be16(MIN(count + 1, UINT16_MAX));
}

/* A switch's log: the packet it marked on port `port`. */
void pib_cc_sw_log(PibMgmtCc *cc, uint8_t port, uint16_t slid, uint16_t dlid, uint8_t sl)
{
    struct pib_cc_log_sw *l = &cc->log_sw;

    cc_log_push(l->events, ARRAY_SIZE(l->events), sizeof(l->events[0]), &l->event_counter_be);
    l->events[0] = (struct pib_cc_log_sw_event) {
        .slid_be = cpu_to_be16(slid),
        .dlid_be = cpu_to_be16(dlid),
        .sl_be = cpu_to_be32((uint32_t)(sl & 0xf) << 28),
        .time_stamp_be = cpu_to_be32(pib_cc_time_stamp()),
    };
    l->port_map[31 - port / 8] |= 1u << (port % 8);
}

/*
 * A CA's log: the index of local QP lqpn (service type `type`: 0 RC, 1 UC, 3 UD) sending on
 * sl from LID llid to (rlid, rqpn) reached the SL's Trigger_Threshold.
 */
void pib_cc_ca_log(PibMgmtCc *cc, uint32_t lqpn, uint8_t sl, uint8_t type, uint16_t llid,
                   uint16_t rlid, uint32_t rqpn)
{
    struct pib_cc_log_ca *l = &cc->log_ca;

    cc_log_push(l->events, ARRAY_SIZE(l->events), sizeof(l->events[0]), &l->event_counter_be);
    l->events[0] = (struct pib_cc_log_ca_event) {
        .local_qp_sl_type_be = cpu_to_be32(lqpn << 8 | (sl & 0xf) << 4 | type),
        .remote_qp_be = cpu_to_be32(rqpn << 8),
        .local_lid_be = cpu_to_be16(llid),
        .remote_lid_be = cpu_to_be16(rlid),
        .time_stamp_be = cpu_to_be32(pib_cc_time_stamp()),
    };
    l->event_map_be |= cpu_to_be16(1u << (sl & 0xf));
}

static uint16_t cc_class_port_info(uint8_t *data)
{
    struct pib_class_port_info *cpi = (struct pib_class_port_info *)data;

    memset(cpi, 0, sizeof(*cpi));
    cpi->base_version = PIB_MAD_BASE_VERSION;
    cpi->class_version = PIB_CC_CLASS_VERSION;
    cpi->cap_mask2_resp_time_be = cpu_to_be32(PIB_MGMT_RESP_TIME);
    return PIB_MAD_STATUS_OK;
}

static uint16_t cc_info(PibMgmtNode *n, uint8_t *data)
{
    struct pib_cc_info *ci = (struct pib_cc_info *)data;

    memset(ci, 0, sizeof(*ci));
    ci->control_table_cap = cc_is_switch(n) ? 0 : PIB_CC_CCT_CAP_BLOCKS;
    return PIB_MAD_STATUS_OK;
}

static uint16_t cc_key_info(PibMgmtCc *cc, uint8_t *data, bool set, bool key_ok)
{
    struct pib_cc_key_info *ki = (struct pib_cc_key_info *)data;

    if (set) {
        cc->key = (uint64_t)be32_to_cpu(ki->cc_key_hi_be) << 32 | be32_to_cpu(ki->cc_key_lo_be);
        cc->key_protect = be16_to_cpu(ki->protect_be) & PIB_CC_KEY_PROTECT;
        cc->key_lease = be16_to_cpu(ki->lease_period_be);
        /* CC_KeyViolations: a Set of 0 clears the counter, any other value leaves it. */
        if (!ki->violations_be) {
            cc->key_violations = 0;
        }
    }
    memset(ki, 0, sizeof(*ki));
    if (key_ok) {                   /* (a Get without the key does not learn it) */
        ki->cc_key_hi_be = cpu_to_be32(cc->key >> 32);
        ki->cc_key_lo_be = cpu_to_be32(cc->key);
    }
    ki->protect_be = cpu_to_be16(cc->key_protect ? PIB_CC_KEY_PROTECT : 0);
    ki->lease_period_be = cpu_to_be16(cc->key_lease);
    ki->violations_be = cpu_to_be16(cc->key_violations);
    return PIB_MAD_STATUS_OK;
}

/*
 * CongestionLog: the attribute spans the MAD's log area and its data area (pib_mad.h).  A Get
 * reads the log and empties it: the counter, the map and the events start again.
 */
static uint16_t cc_log(PibMgmtNode *n, struct pib_cc_mad *m)
{
    PibMgmtCc *cc = &n->cc;
    uint8_t attr[sizeof(m->log) + sizeof(m->data)] = { 0 };

    if (cc_is_switch(n)) {
        struct pib_cc_log_sw *l = (struct pib_cc_log_sw *)attr;

        QEMU_BUILD_BUG_ON(sizeof(*l) > sizeof(attr));
        *l = cc->log_sw;
        l->log_type = PIB_CC_LOG_SWITCH;
        l->time_stamp_be = cpu_to_be32(pib_cc_time_stamp());
    } else {
        struct pib_cc_log_ca *l = (struct pib_cc_log_ca *)attr;

        QEMU_BUILD_BUG_ON(sizeof(*l) > sizeof(attr));
        *l = cc->log_ca;
        l->log_type = PIB_CC_LOG_CA;
        l->time_stamp_be = cpu_to_be32(pib_cc_time_stamp());
    }
    memset(&cc->log_sw, 0, sizeof(cc->log_sw));
    memset(&cc->log_ca, 0, sizeof(cc->log_ca));
    memcpy(m->log, attr, sizeof(m->log));
    memcpy(m->data, attr + sizeof(m->log), sizeof(m->data));
    return PIB_MAD_STATUS_OK;
}

/* SwitchCongestionSetting: a Set changes the parts its ControlMap names. */
static uint16_t cc_sw_setting(PibMgmtCc *cc, uint8_t *data, bool set)
{
    struct pib_cc_sw_setting in, *cur = &cc->sw;
    uint32_t map;

    if (set) {
        memcpy(&in, data, sizeof(in));
        map = be32_to_cpu(in.control_map_be);
        if (map & PIB_CC_SW_CTL_VICTIM) {
            memcpy(cur->victim_mask, in.victim_mask, sizeof(in.victim_mask));
        }
        if (map & PIB_CC_SW_CTL_CREDIT) {
            memcpy(cur->credit_mask, in.credit_mask, sizeof(in.credit_mask));
        }
        if (map & PIB_CC_SW_CTL_THRESHOLD) {
            cur->threshold = in.threshold & 0xf0;
            cur->packet_size = in.packet_size;
        }
        if (map & PIB_CC_SW_CTL_CS) {
            cur->cs_threshold_be = in.cs_threshold_be & cpu_to_be16(0xf000);
            cur->cs_return_delay_be = in.cs_return_delay_be;
        }
        if (map & PIB_CC_SW_CTL_MARKING_RATE) {
            cur->marking_rate_be = in.marking_rate_be;
        }
        cur->control_map_be = in.control_map_be;
    }
    memset(data, 0, PIB_CC_DATA_SIZE);
    memcpy(data, cur, sizeof(*cur));
    return PIB_MAD_STATUS_OK;
}

/* SwitchPortCongestionSetting: block b holds ports 32b .. 32b + 31; ports it lacks read 0. */
static uint16_t cc_swp_setting(PibMgmtNode *n, uint8_t *data, uint32_t block, bool set)
{
    struct pib_cc_swp_element e[PIB_CC_SWP_BLOCK_PORTS];
    unsigned i, port;

    if (block > n->num_ports / PIB_CC_SWP_BLOCK_PORTS) {
        return PIB_MAD_STATUS_INVALID_VALUE;
    }
    memcpy(e, data, sizeof(e));
    memset(data, 0, PIB_CC_DATA_SIZE);
    for (i = 0; i < PIB_CC_SWP_BLOCK_PORTS; i++) {
        port = block * PIB_CC_SWP_BLOCK_PORTS + i;
        if (port > n->num_ports) {
            break;
        }
        if (set) {
            e[i].valid_type_threshold &= PIB_CC_SWP_VALID | PIB_CC_SWP_CREDIT_STARVATION |
                                         PIB_CC_SWP_THRESHOLD;
            n->cc.swp[port] = e[i];
        }
        memcpy(data + i * sizeof(e[0]), &n->cc.swp[port], sizeof(e[0]));
    }
    return PIB_MAD_STATUS_OK;
}

/* CACongestionSetting: a Set changes PortControl and the entries its ControlMap names. */
static uint16_t cc_ca_setting(PibMgmtCc *cc, uint8_t *data, bool set)
{
    struct pib_cc_ca_setting in, *cur = &cc->ca;
    uint16_t map;
    int sl;

    if (set) {
        memcpy(&in, data, sizeof(in));
        map = be16_to_cpu(in.control_map_be);
        cur->port_control_be = in.port_control_be & cpu_to_be16(PIB_CC_CA_PORT_SL_BASED);
        for (sl = 0; sl < PIB_CC_SLS; sl++) {
            if (map & (1u << sl)) {
                cur->entries[sl] = in.entries[sl];
                cur->entries[sl].rsvd0 = 0;
                cur->entries[sl].rsvd1 = 0;
            }
        }
        cur->control_map_be = in.control_map_be;
    }
    memset(data, 0, PIB_CC_DATA_SIZE);
    memcpy(data, cur, sizeof(*cur));
    return PIB_MAD_STATUS_OK;
}

/*
 * CongestionControlTable, block b of 64 entries.  A Set writes the block's entries and the
 * table's CCTI_Limit, which must name an entry the table has.
 */
static uint16_t cc_table(PibMgmtCc *cc, uint8_t *data, uint32_t block, bool set)
{
    struct pib_cc_table t;
    uint16_t limit;
    int i;

    if (block >= PIB_CC_CCT_CAP_BLOCKS) {
        return PIB_MAD_STATUS_INVALID_VALUE;
    }
    if (set) {
        memcpy(&t, data, sizeof(t));
        limit = be16_to_cpu(t.ccti_limit_be);
        if (limit >= PIB_CC_CCT_CAP_BLOCKS * PIB_CC_CCT_BLOCK_ENTRIES) {
            return PIB_MAD_STATUS_INVALID_VALUE;
        }
        cc->ccti_limit = limit;
        for (i = 0; i < PIB_CC_CCT_BLOCK_ENTRIES; i++) {
            cc->cct[block * PIB_CC_CCT_BLOCK_ENTRIES + i] = be16_to_cpu(t.entries_be[i]);
        }
    }
    memset(&t, 0, sizeof(t));
    t.ccti_limit_be = cpu_to_be16(cc->ccti_limit);
    for (i = 0; i < PIB_CC_CCT_BLOCK_ENTRIES; i++) {
        t.entries_be[i] = cpu_to_be16(cc->cct[block * PIB_CC_CCT_BLOCK_ENTRIES + i]);
    }
    memset(data, 0, PIB_CC_DATA_SIZE);
    memcpy(data, &t, sizeof(t));
    return PIB_MAD_STATUS_OK;
}

static uint32_t cc_respond(PibMgmtNode *n, const PibMadCtx *ctx, struct pib_cc_mad *m,
                           uint16_t status)
{
    m->hdr.method = PIB_MAD_METHOD_GET_RESP;
    m->hdr.status_be = cpu_to_be16(status);
    trace_pib_cc_respond(n->node_guid, ctx->port,
                         pib_cc_attr_name(be16_to_cpu(m->hdr.attr_id_be)), status);
    return PIB_MAD_IFC_REPLY;
}

/*
 * The CC_Key's check for a MAD that carries key (set: a Set), with the lease: true if it may
 * be answered; a MAD that may not is counted.  *key_ok: the MAD had the key (or none is set).
 */
static bool cc_key_check(PibMgmtNode *n, const PibMadCtx *ctx, uint64_t key, bool set,
                         uint16_t attr, uint8_t method, bool *key_ok)
{
    PibMgmtCc *cc = &n->cc;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);

    if (cc->key_lease_until && now >= cc->key_lease_until) {
        cc->key_lease_until = 0;
        cc->key_protect = false;
        trace_pib_cc_key_lease(n->node_guid, "ran out: the protect bit clears");
    }
    *key_ok = cc->key == 0 || key == cc->key;
    if (*key_ok) {
        if (cc->key && cc->key_lease_until) {
            cc->key_lease_until = 0;
            trace_pib_cc_key_lease(n->node_guid, "stopped by the right key");
        }
        return true;
    }
    if (!set && !cc->key_protect) {
        return true;
    }
    if (cc->key_violations < UINT16_MAX) {
        cc->key_violations++;
    }
    trace_pib_cc_key_violation(n->node_guid, ctx->port, method, attr, cc->key_violations);
    if (cc->key_lease && !cc->key_lease_until) {
        cc->key_lease_until = now + (int64_t)cc->key_lease * NANOSECONDS_PER_SECOND;
        trace_pib_cc_key_lease(n->node_guid, "started");
    }
    return false;
}

/*
 * Answer one CC MAD that arrived on port ctx->port, as pib_sma_process(): out gets the
 * response (in and out may be the same buffer).  PIB_MAD_IFC_REPLY, PIB_MAD_IFC_CONSUMED for a
 * MAD refused for its CC_Key, 0 for a response (some manager's behind this port).
 */
uint32_t pib_cc_process(PibMgmtNode *n, const PibMadCtx *ctx, const uint8_t *in,
                        uint8_t *out)
{
    struct pib_cc_mad *m = (struct pib_cc_mad *)out;
    PibMgmtCc *cc = &n->cc;
    uint64_t key;
    uint32_t mod;
    uint16_t attr;
    bool set, key_ok;

    if (out != in) {
        memcpy(out, in, PIB_MAD_SIZE);
    }
    attr = be16_to_cpu(m->hdr.attr_id_be);
    mod = be32_to_cpu(m->hdr.attr_mod_be);
    trace_pib_cc_mad(n->node_guid, ctx->port, m->hdr.method, pib_cc_attr_name(attr), mod);
    if (m->hdr.method & PIB_MAD_METHOD_RESP) {
        return 0;
    }
    if (m->hdr.base_version != PIB_MAD_BASE_VERSION ||
        m->hdr.class_version != PIB_CC_CLASS_VERSION) {
        return cc_respond(n, ctx, m, PIB_MAD_STATUS_BAD_VERSION);
    }
    if (m->hdr.method != PIB_MAD_METHOD_GET && m->hdr.method != PIB_MAD_METHOD_SET) {
        return cc_respond(n, ctx, m, PIB_MAD_STATUS_UNSUP_METHOD);
    }
    set = m->hdr.method == PIB_MAD_METHOD_SET;
    key = (uint64_t)be32_to_cpu(m->cc_key_hi_be) << 32 | be32_to_cpu(m->cc_key_lo_be);
    if (!cc_key_check(n, ctx, key, set, attr, m->hdr.method, &key_ok)) {
        return PIB_MAD_IFC_CONSUMED;
    }
    if (attr != PIB_CC_ATTR_CONG_LOG) {
        memset(m->log, 0, sizeof(m->log));
    }
    switch (attr) {
    case PIB_CC_ATTR_CLASS_PORT_INFO:
        return cc_respond(n, ctx, m, set ? PIB_MAD_STATUS_UNSUP_ATTR :
                                     cc_class_port_info(m->data));
    case PIB_CC_ATTR_CONG_INFO:
        return cc_respond(n, ctx, m, set ? PIB_MAD_STATUS_UNSUP_ATTR : cc_info(n, m->data));
    case PIB_CC_ATTR_CONG_KEY_INFO:
        return cc_respond(n, ctx, m, cc_key_info(cc, m->data, set, key_ok));
    case PIB_CC_ATTR_CONG_LOG:
        return cc_respond(n, ctx, m, set ? PIB_MAD_STATUS_UNSUP_ATTR : cc_log(n, m));
    case PIB_CC_ATTR_SW_CONG_SETTING:
        if (!cc_is_switch(n)) {
            break;
        }
        return cc_respond(n, ctx, m, cc_sw_setting(cc, m->data, set));
    case PIB_CC_ATTR_SW_PORT_CONG_SETTING:
        if (!cc_is_switch(n)) {
            break;
        }
        return cc_respond(n, ctx, m, cc_swp_setting(n, m->data, mod, set));
    case PIB_CC_ATTR_CA_CONG_SETTING:
        if (cc_is_switch(n)) {
            break;
        }
        return cc_respond(n, ctx, m, cc_ca_setting(cc, m->data, set));
    case PIB_CC_ATTR_CC_TABLE:
        if (cc_is_switch(n)) {
            break;
        }
        return cc_respond(n, ctx, m, cc_table(cc, m->data, mod, set));
    case PIB_CC_ATTR_TIME_STAMP:
        if (set) {
            break;
        }
        memset(m->data, 0, sizeof(m->data));
        stl_be_p(m->data, pib_cc_time_stamp());
        return cc_respond(n, ctx, m, PIB_MAD_STATUS_OK);
    default:
        break;
    }
    /* An attribute this node does not have, or a method it does not take for it. */
    return cc_respond(n, ctx, m, PIB_MAD_STATUS_UNSUP_ATTR);
}

/*
 * Migration: the settings, the key and the log travel with the node, in a subsection of each
 * device's section, sent only when something is set (a stream without it loads into a pib
 * that has never heard of congestion control, and one from such a pib loads here as a reset).
 */
bool pib_cc_needed(const PibMgmtCc *cc)
{
    static const PibMgmtCc reset;       /* (pib_cc_reset: all zero, padding too) */

    return memcmp(cc, &reset, sizeof(*cc)) != 0;
}

static bool cc_loaded_ok(void *opaque, int version_id)
{
    PibMgmtCc *cc = opaque;

    if (cc->ccti_limit >= PIB_CC_CCT_CAP_BLOCKS * PIB_CC_CCT_BLOCK_ENTRIES) {
        error_report("pib: migration stream refused: CCTI_Limit (0x%x)", cc->ccti_limit);
        return false;
    }
    return true;
}

/* Version 2: the lease's deadline (a version 1 stream loads with no countdown). */
const VMStateDescription vmstate_pib_mgmt_cc = {
    .name = "pib-mgmt-cc",
    .version_id = 2,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64(key, PibMgmtCc),
        VMSTATE_BOOL(key_protect, PibMgmtCc),
        VMSTATE_UINT16(key_lease, PibMgmtCc),
        VMSTATE_UINT16(key_violations, PibMgmtCc),
        PIB_VMSTATE_BYTES(PibMgmtCc, sw),
        PIB_VMSTATE_BYTES(PibMgmtCc, swp),
        PIB_VMSTATE_BYTES(PibMgmtCc, ca),
        VMSTATE_UINT16(ccti_limit, PibMgmtCc),
        VMSTATE_UINT16_ARRAY(cct, PibMgmtCc, PIB_CC_CCT_CAP_BLOCKS * PIB_CC_CCT_BLOCK_ENTRIES),
        PIB_VMSTATE_BYTES(PibMgmtCc, log_sw),
        PIB_VMSTATE_BYTES(PibMgmtCc, log_ca),
        VMSTATE_UINT16_ARRAY(mark_skip, PibMgmtCc, PIB_SW_MAX_PORTS + 1),
        VMSTATE_INT64_V(key_lease_until, PibMgmtCc, 2),
        VMSTATE_VALIDATE("CCTI_Limit", cc_loaded_ok),
        VMSTATE_END_OF_LIST()
    },
};
