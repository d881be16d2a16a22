/*
 * pib fabric - the performance management agent (PMA)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Answers performance management MADs (class 0x04, IBTA 16.1) for a node's ports:
 * ClassPortInfo, PortCounters and PortCountersExtended, Get and Set.  The counters are the
 * node's own packet counters (PibMgmtOps.read_counters, counted in the packet path), seen
 * through a baseline per counter: a Set "clears" a counter by moving its baseline, so the
 * node's own counters (the driver's hw_counters) keep counting since reset.  PortCounters'
 * narrow fields saturate at their width, as the IBTA requires.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"

#include "pib-fabric.h"
#include "../trace.h"

const char *pib_pma_attr_name(uint16_t attr)
{
    switch (attr) {
#define PIB_PMA_ATTR_NAME(id, value, name) case value: return name;
    PIB_PMA_ATTRS(PIB_PMA_ATTR_NAME)
#undef PIB_PMA_ATTR_NAME
    default:
        return "unknown";
    }
}

/* The node's own value of a counter (octets for the data counters). */
static uint64_t pma_raw(const PibMgmtCounters *c, enum pib_pma_ctr which)
{
    static const size_t field[PIB_PMA_CTR_MAX] = {
#define PIB_PMA_CTR_FIELD(id, f) [PIB_PMA_CTR_##id] = offsetof(PibMgmtCounters, f),
        PIB_PMA_CTRS(PIB_PMA_CTR_FIELD)
#undef PIB_PMA_CTR_FIELD
    };

    return *(const uint64_t *)((const uint8_t *)c + field[which]);
}

/* A counter as the PMA shows it: raw - baseline (data counters: in units of 4 octets). */
static uint64_t pma_value(const PibMgmtPort *p, const PibMgmtCounters *c,
                          enum pib_pma_ctr which)
{
    uint64_t raw = pma_raw(c, which);
    uint64_t v = raw - MIN(raw, p->pma_base[which]);

    return which == PIB_PMA_CTR_XMIT_DATA || which == PIB_PMA_CTR_RCV_DATA ? v / 4 : v;
}

static void pma_clear(PibMgmtPort *p, const PibMgmtCounters *c, enum pib_pma_ctr which)
{
    p->pma_base[which] = pma_raw(c, which);
}

/* PortCounters' CounterSelect bits and the counters they clear. */
static const struct {
    uint16_t sel;
    enum pib_pma_ctr ctr;
} pma_select[] = {
    { PIB_PMA_SEL_SYMBOL_ERROR,   PIB_PMA_CTR_SYMBOL_ERRORS },
    { PIB_PMA_SEL_LINK_RECOVERY,  PIB_PMA_CTR_LINK_RECOVERY },
    { PIB_PMA_SEL_LINK_DOWNED,    PIB_PMA_CTR_LINK_DOWNED },
    { PIB_PMA_SEL_RCV_ERRORS,     PIB_PMA_CTR_RCV_ERRORS },
    { PIB_PMA_SEL_XMIT_DISCARDS,  PIB_PMA_CTR_XMIT_DISCARDS },
    { PIB_PMA_SEL_RCV_CONSTRAINT, PIB_PMA_CTR_RCV_CONSTRAINT },
    { PIB_PMA_SEL_RCV_SWITCH_RELAY, PIB_PMA_CTR_RCV_SWITCH_RELAY },
    { PIB_PMA_SEL_XMIT_CONSTRAINT, PIB_PMA_CTR_XMIT_CONSTRAINT },
    { PIB_PMA_SEL_VL15_DROPPED,   PIB_PMA_CTR_VL15_DROPPED },
    { PIB_PMA_SEL_BUFFER_OVERRUN, PIB_PMA_CTR_BUFFER_OVERRUN },
    { PIB_PMA_SEL_XMIT_DATA,      PIB_PMA_CTR_XMIT_DATA },
    { PIB_PMA_SEL_RCV_DATA,       PIB_PMA_CTR_RCV_DATA },
    { PIB_PMA_SEL_XMIT_PKTS,      PIB_PMA_CTR_XMIT_PKTS },
    { PIB_PMA_SEL_RCV_PKTS,       PIB_PMA_CTR_RCV_PKTS },
};

/* PortCountersExtended's counters, in the attribute's order (CounterSelect bit i). */
static const enum pib_pma_ctr pma_ext[8] = {
    PIB_PMA_CTR_XMIT_DATA, PIB_PMA_CTR_RCV_DATA, PIB_PMA_CTR_XMIT_PKTS,
    PIB_PMA_CTR_RCV_PKTS, PIB_PMA_CTR_UNI_XMIT_PKTS, PIB_PMA_CTR_UNI_RCV_PKTS,
    PIB_PMA_CTR_MULTI_XMIT_PKTS, PIB_PMA_CTR_MULTI_RCV_PKTS,
};

/*
 * Both counter attributes start alike: PortSelect and CounterSelect (bytes 1 and 2-3) stay,
 * the rest of the attribute is filled anew from the port's counters, read into *c.
 */
static uint16_t pma_counters_begin(PibMgmtPort *p, uint8_t *data, size_t size,
                                   PibMgmtCounters *c)
{
    uint8_t port_select = data[1];
    uint16_t sel = lduw_be_p(data + 2);

    p->node->ops->read_counters(p, c);
    memset(data, 0, size);
    data[1] = port_select;
    stw_be_p(data + 2, sel);
    return sel;
}

static uint16_t pma_port_counters(PibMgmtPort *p, uint8_t *data, bool set)
{
    struct pib_port_counters *pc = (struct pib_port_counters *)data;
    uint8_t sel2 = pc->counter_select2;     /* (the begin below clears the attribute) */
    PibMgmtCounters c;
    uint16_t sel = pma_counters_begin(p, data, sizeof(*pc), &c);
    size_t i;

    pc->counter_select2 = sel2;
    for (i = 0; set && i < ARRAY_SIZE(pma_select); i++) {
        if (sel & pma_select[i].sel) {
            pma_clear(p, &c, pma_select[i].ctr);
        }
    }
    if (set && (sel2 & PIB_PMA_SEL2_XMIT_WAIT)) {
        pma_clear(p, &c, PIB_PMA_CTR_XMIT_WAIT);
    }
#define SAT(v, bits) ((uint32_t)MIN((v), (1ull << (bits)) - 1))
    pc->symbol_errors_be = cpu_to_be16(SAT(pma_value(p, &c, PIB_PMA_CTR_SYMBOL_ERRORS), 16));
    pc->link_recovery = SAT(pma_value(p, &c, PIB_PMA_CTR_LINK_RECOVERY), 8);
    pc->link_downed = SAT(pma_value(p, &c, PIB_PMA_CTR_LINK_DOWNED), 8);
    pc->rcv_errors_be = cpu_to_be16(SAT(pma_value(p, &c, PIB_PMA_CTR_RCV_ERRORS), 16));
    pc->xmit_discards_be = cpu_to_be16(SAT(pma_value(p, &c, PIB_PMA_CTR_XMIT_DISCARDS), 16));
    pc->rcv_constraint_errors = SAT(pma_value(p, &c, PIB_PMA_CTR_RCV_CONSTRAINT), 8);
    pc->rcv_switch_relay_errors_be =
        cpu_to_be16(SAT(pma_value(p, &c, PIB_PMA_CTR_RCV_SWITCH_RELAY), 16));
    pc->xmit_constraint_errors = SAT(pma_value(p, &c, PIB_PMA_CTR_XMIT_CONSTRAINT), 8);
    pc->vl15_dropped_be = cpu_to_be16(SAT(pma_value(p, &c, PIB_PMA_CTR_VL15_DROPPED), 16));
    pc->link_integrity_overrun = SAT(pma_value(p, &c, PIB_PMA_CTR_BUFFER_OVERRUN), 4);
    pc->xmit_wait_be = cpu_to_be32(SAT(pma_value(p, &c, PIB_PMA_CTR_XMIT_WAIT), 32));
    pc->xmit_data_be = cpu_to_be32(SAT(pma_value(p, &c, PIB_PMA_CTR_XMIT_DATA), 32));
    pc->rcv_data_be = cpu_to_be32(SAT(pma_value(p, &c, PIB_PMA_CTR_RCV_DATA), 32));
    pc->xmit_pkts_be = cpu_to_be32(SAT(pma_value(p, &c, PIB_PMA_CTR_XMIT_PKTS), 32));
    pc->rcv_pkts_be = cpu_to_be32(SAT(pma_value(p, &c, PIB_PMA_CTR_RCV_PKTS), 32));
#undef SAT
    return PIB_MAD_STATUS_OK;
}

static uint16_t pma_port_counters_ext(PibMgmtPort *p, uint8_t *data, bool set)
{
    struct pib_port_counters_ext *pc = (struct pib_port_counters_ext *)data;
    PibMgmtCounters c;
    uint16_t sel = pma_counters_begin(p, data, sizeof(*pc), &c);
    size_t i;

    for (i = 0; i < ARRAY_SIZE(pma_ext); i++) {
        if (set && (sel & (1u << i))) {
            pma_clear(p, &c, pma_ext[i]);
        }
        stq_be_p(pc->ctr_be[i], pma_value(p, &c, pma_ext[i]));
    }
    return PIB_MAD_STATUS_OK;
}

static uint16_t pma_class_port_info(uint8_t *data, bool set)
{
    struct pib_class_port_info *cpi = (struct pib_class_port_info *)data;

    if (set) {
        return PIB_MAD_STATUS_UNSUP_ATTR;
    }
    memset(cpi, 0, sizeof(*cpi));
    cpi->base_version = PIB_MAD_BASE_VERSION;
    cpi->class_version = PIB_PMA_CLASS_VERSION;
    cpi->cap_mask_be = cpu_to_be16(PIB_PMA_CAP_EXT_WIDTH | PIB_PMA_CAP_XMIT_WAIT);
    cpi->cap_mask2_resp_time_be = cpu_to_be32(PIB_MGMT_RESP_TIME);
    return PIB_MAD_STATUS_OK;
}

static uint32_t pma_respond(PibMgmtNode *n, const PibMadCtx *ctx, struct pib_pma_mad *m,
                            uint16_t status)
{
    m->hdr.method = PIB_MAD_METHOD_GET_RESP;
    m->hdr.status_be = cpu_to_be16(status);
    trace_pib_pma_respond(n->node_guid, ctx->port,
                          pib_pma_attr_name(be16_to_cpu(m->hdr.attr_id_be)), status);
    return PIB_MAD_IFC_REPLY;
}

/*
 * Answer one PMA MAD, as pib_sma_process().  PortSelect names the port (0: the one the MAD
 * arrived on); 0xff (all ports) is not offered in ClassPortInfo, so it is an invalid value.
 */
uint32_t pib_pma_process(PibMgmtNode *n, const PibMadCtx *ctx, const uint8_t *in,
                         uint8_t *out)
{
    struct pib_pma_mad *m = (struct pib_pma_mad *)out;
    uint16_t attr;
    uint8_t sel;
    bool set;
    PibMgmtPort *p;

    if (out != in) {
        memcpy(out, in, PIB_MAD_SIZE);
    }
    attr = be16_to_cpu(m->hdr.attr_id_be);
    trace_pib_pma_mad(n->node_guid, ctx->port, m->hdr.method, pib_pma_attr_name(attr));
    if (m->hdr.method & PIB_MAD_METHOD_RESP) {
        return 0;                       /* for a performance manager behind this port */
    }
    if (m->hdr.base_version != PIB_MAD_BASE_VERSION ||
        m->hdr.class_version != PIB_PMA_CLASS_VERSION) {
        return pma_respond(n, ctx, m, PIB_MAD_STATUS_BAD_VERSION);
    }
    if (m->hdr.method != PIB_MAD_METHOD_GET && m->hdr.method != PIB_MAD_METHOD_SET) {
        return pma_respond(n, ctx, m, PIB_MAD_STATUS_UNSUP_METHOD);
    }
    set = m->hdr.method == PIB_MAD_METHOD_SET;
    switch (attr) {
    case PIB_PMA_ATTR_CLASS_PORT_INFO:
        return pma_respond(n, ctx, m, pma_class_port_info(m->data, set));
    case PIB_PMA_ATTR_PORT_COUNTERS:
    case PIB_PMA_ATTR_PORT_COUNTERS_EXT:
        sel = m->data[1];
        p = sel == 0 ? n->ports[ctx->port] : sel <= n->num_ports ? n->ports[sel] : NULL;
        if (!p) {
            return pma_respond(n, ctx, m, PIB_MAD_STATUS_INVALID_VALUE);
        }
        return pma_respond(n, ctx, m,
                           attr == PIB_PMA_ATTR_PORT_COUNTERS ?
                           pma_port_counters(p, m->data, set) :
                           pma_port_counters_ext(p, m->data, set));
    default:
        return pma_respond(n, ctx, m, PIB_MAD_STATUS_UNSUP_ATTR);
    }
}
