/*
 * pib HCA device model - InfiniBand packets
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Building and parsing the IBTA headers a PACKET frame carries
 * (include/pib_link.h): LRH, optional GRH, BTH, then the extension headers
 * the opcode calls for (RETH, AETH, AtomicETH, AtomicAckETH, ImmDt, IETH,
 * DETH) and the payload with its pad.  All of it is big-endian.
 *
 * A received packet comes from the peer's device model, or from a hostile
 * program on the other end of the socket: every field is checked before
 * anything trusts it, and a packet that fails a check is dropped and counted
 * under one rx_drop_* reason (PibState.counters[], QUERY_COUNTERS, trace point
 * pib_pkt_drop).  Checks that need
 * the QP (PSN, opcode sequence, keys) belong to the engines, which answer
 * with NAKs where IB says so.
 *
 * Received packets (from the link, or looped back from our own requester
 * because they are addressed to our own LID) wait in the receive queue and
 * are dispatched at most PIB_RX_BUDGET at a time: right after the link's read
 * callback, or from a bottom half (loopback, and what the budget left).
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/main-loop.h"

#include "pib-internal.h"
#include "trace.h"

#define RC(x)   PIB_OP_RC_##x
#define UC(x)   PIB_OP_UC_##x
#define UD(x)   PIB_OP_UD_##x

#define REQ_SEND        (PIB_OPM_REQ | PIB_OPM_SEND | PIB_OPM_PAYLOAD)
#define REQ_WRITE       (PIB_OPM_REQ | PIB_OPM_WRITE | PIB_OPM_PAYLOAD)

/*
 * RC's operations (IBTA 9.2 and table 38): X(operation, what it carries and
 * means).  XRC has the same ones, with XRC's transport bits and an XRCETH in
 * each request (IBTA 9.8.3).
 */
#define PIB_RC_OPS(X)                                                         \
    X(SEND_FIRST,           REQ_SEND | PIB_OPM_FIRST)                         \
    X(SEND_MIDDLE,          REQ_SEND | PIB_OPM_MIDDLE)                        \
    X(SEND_LAST,            REQ_SEND | PIB_OPM_LAST)                          \
    X(SEND_LAST_IMM,        REQ_SEND | PIB_OPM_LAST | PIB_OPM_IMMDT)          \
    X(SEND_ONLY,            REQ_SEND | PIB_OPM_ONLY)                          \
    X(SEND_ONLY_IMM,        REQ_SEND | PIB_OPM_ONLY | PIB_OPM_IMMDT)          \
    X(RDMA_WRITE_FIRST,     REQ_WRITE | PIB_OPM_FIRST | PIB_OPM_RETH)         \
    X(RDMA_WRITE_MIDDLE,    REQ_WRITE | PIB_OPM_MIDDLE)                       \
    X(RDMA_WRITE_LAST,      REQ_WRITE | PIB_OPM_LAST)                         \
    X(RDMA_WRITE_LAST_IMM,  REQ_WRITE | PIB_OPM_LAST | PIB_OPM_IMMDT)         \
    X(RDMA_WRITE_ONLY,      REQ_WRITE | PIB_OPM_ONLY | PIB_OPM_RETH)          \
    X(RDMA_WRITE_ONLY_IMM,  REQ_WRITE | PIB_OPM_ONLY | PIB_OPM_RETH |         \
                            PIB_OPM_IMMDT)                                    \
    X(RDMA_READ_REQUEST,    PIB_OPM_REQ | PIB_OPM_READ | PIB_OPM_ONLY |       \
                            PIB_OPM_RETH)                                     \
    X(RDMA_READ_RESP_FIRST, PIB_OPM_RESP | PIB_OPM_READ | PIB_OPM_FIRST |     \
                            PIB_OPM_AETH | PIB_OPM_PAYLOAD)                   \
    X(RDMA_READ_RESP_MIDDLE, PIB_OPM_RESP | PIB_OPM_READ | PIB_OPM_MIDDLE |   \
                             PIB_OPM_PAYLOAD)                                 \
    X(RDMA_READ_RESP_LAST,  PIB_OPM_RESP | PIB_OPM_READ | PIB_OPM_LAST |      \
                            PIB_OPM_AETH | PIB_OPM_PAYLOAD)                   \
    X(RDMA_READ_RESP_ONLY,  PIB_OPM_RESP | PIB_OPM_READ | PIB_OPM_ONLY |      \
                            PIB_OPM_AETH | PIB_OPM_PAYLOAD)                   \
    X(ACKNOWLEDGE,          PIB_OPM_RESP | PIB_OPM_AETH)                      \
    X(ATOMIC_ACKNOWLEDGE,   PIB_OPM_RESP | PIB_OPM_ATOMIC | PIB_OPM_AETH |    \
                            PIB_OPM_ATMACK)                                   \
    X(COMPARE_SWAP,         PIB_OPM_REQ | PIB_OPM_ATOMIC | PIB_OPM_ONLY |     \
                            PIB_OPM_ATMETH)                                   \
    X(FETCH_ADD,            PIB_OPM_REQ | PIB_OPM_ATOMIC | PIB_OPM_ONLY |     \
                            PIB_OPM_ATMETH)                                   \
    X(SEND_LAST_INV,        REQ_SEND | PIB_OPM_LAST | PIB_OPM_IETH)           \
    X(SEND_ONLY_INV,        REQ_SEND | PIB_OPM_ONLY | PIB_OPM_IETH)           \
    X(ATOMIC_WRITE,         PIB_OPM_REQ | PIB_OPM_ATOMIC_WRITE |              \
                            PIB_OPM_ONLY | PIB_OPM_RETH | PIB_OPM_PAYLOAD)

#define PIB_RC_OP_ENTRY(op, m)  [RC(op)] = { "RC_" #op, (m) },
#define PIB_XRC_OP_ENTRY(op, m) [PIB_OP_XRC(RC(op))] = {                      \
        "XRC_" #op, (m) | ((m) & PIB_OPM_REQ ? PIB_OPM_XRCETH : 0) },

/* What each opcode carries and means (IBTA 9.2 and table 38). */
static const PibOpInfo pib_ops[256] = {
    PIB_RC_OPS(PIB_RC_OP_ENTRY)
    PIB_RC_OPS(PIB_XRC_OP_ENTRY)
    [UC(SEND_FIRST)]    = { "UC_SEND_FIRST", REQ_SEND | PIB_OPM_FIRST },
    [UC(SEND_MIDDLE)]   = { "UC_SEND_MIDDLE", REQ_SEND | PIB_OPM_MIDDLE },
    [UC(SEND_LAST)]     = { "UC_SEND_LAST", REQ_SEND | PIB_OPM_LAST },
    [UC(SEND_LAST_IMM)] = { "UC_SEND_LAST_IMM",
                            REQ_SEND | PIB_OPM_LAST | PIB_OPM_IMMDT },
    [UC(SEND_ONLY)]     = { "UC_SEND_ONLY", REQ_SEND | PIB_OPM_ONLY },
    [UC(SEND_ONLY_IMM)] = { "UC_SEND_ONLY_IMM",
                            REQ_SEND | PIB_OPM_ONLY | PIB_OPM_IMMDT },
    [UC(RDMA_WRITE_FIRST)] = { "UC_RDMA_WRITE_FIRST",
                               REQ_WRITE | PIB_OPM_FIRST | PIB_OPM_RETH },
    [UC(RDMA_WRITE_MIDDLE)] = { "UC_RDMA_WRITE_MIDDLE",
                                REQ_WRITE | PIB_OPM_MIDDLE },
    [UC(RDMA_WRITE_LAST)] = { "UC_RDMA_WRITE_LAST", REQ_WRITE | PIB_OPM_LAST },
    [UC(RDMA_WRITE_LAST_IMM)] = { "UC_RDMA_WRITE_LAST_IMM",
                                  REQ_WRITE | PIB_OPM_LAST | PIB_OPM_IMMDT },
    [UC(RDMA_WRITE_ONLY)] = { "UC_RDMA_WRITE_ONLY",
                              REQ_WRITE | PIB_OPM_ONLY | PIB_OPM_RETH },
    [UC(RDMA_WRITE_ONLY_IMM)] = { "UC_RDMA_WRITE_ONLY_IMM",
                                  REQ_WRITE | PIB_OPM_ONLY | PIB_OPM_RETH |
                                  PIB_OPM_IMMDT },
    [UD(SEND_ONLY)]     = { "UD_SEND_ONLY",
                            REQ_SEND | PIB_OPM_ONLY | PIB_OPM_DETH },
    [UD(SEND_ONLY_IMM)] = { "UD_SEND_ONLY_IMM",
                            REQ_SEND | PIB_OPM_ONLY | PIB_OPM_DETH |
                            PIB_OPM_IMMDT },
};

/* The hw_counter names of include/pib_hw.h's enum pib_counter. */
#define PIB_CNT_NAME(id, name) [PIB_CNT_##id] = #name,
static const char *const pib_counter_names[PIB_CNT_MAX] = {
    PIB_COUNTERS(PIB_CNT_NAME)
};
#undef PIB_CNT_NAME

const PibOpInfo *pib_op_info(uint8_t opcode)
{
    return pib_ops[opcode].name ? &pib_ops[opcode] : NULL;
}

const char *pib_op_name(uint8_t opcode)
{
    return pib_ops[opcode].name ? pib_ops[opcode].name : "UNKNOWN";
}

const char *pib_counter_name(enum pib_counter c)
{
    return c < PIB_CNT_MAX ? pib_counter_names[c] : "?";
}

/* Bytes of the extension headers an opcode carries. */
static uint32_t pib_ext_len(uint32_t mask)
{
    return (mask & PIB_OPM_RETH ? sizeof(struct pib_reth) : 0) +
           (mask & PIB_OPM_AETH ? sizeof(struct pib_aeth) : 0) +
           (mask & PIB_OPM_ATMETH ? sizeof(struct pib_atomic_eth) : 0) +
           (mask & PIB_OPM_ATMACK ? sizeof(struct pib_atomic_ack_eth) : 0) +
           (mask & PIB_OPM_IMMDT ? 4 : 0) +
           (mask & PIB_OPM_IETH ? 4 : 0) +
           (mask & PIB_OPM_DETH ? sizeof(struct pib_deth) : 0) +
           (mask & PIB_OPM_XRCETH ? sizeof(struct pib_xrceth) : 0);
}

/* Every dropped packet is counted under exactly one reason. */
void pib_pkt_drop(PibState *s, enum pib_counter why, const PibPktInfo *pi)
{
    pib_count(s, why, 1);
    trace_pib_pkt_drop(s->node_guid, pib_counter_name(why),
                       pi ? pib_op_name(pi->opcode) : "-",
                       pi ? pi->dqpn : 0, pi ? pi->psn : 0, s->counters[why]);
}

/*
 * Build
 */

/* A trap SMP's headers (IBTA 14.2.5.1): LID-routed on VL15, from QP0 to the SM's QP0. */
PibPktFields pib_pkt_trap_fields(uint16_t dlid, uint8_t sl)
{
    return (PibPktFields) {
        .opcode = PIB_OP_UD_SEND_ONLY,
        .dqpn = PIB_QPN_SMI,
        .dlid = dlid,
        .sl = sl,
        .vl15 = true,
        .pkey = PIB_DEFAULT_PKEY,
        .qkey = PIB_SMI_QKEY,
        .src_qpn = PIB_QPN_SMI,
    };
}

/* The IB packet's length (LRH to pad) for these header fields and payload. */
uint32_t pib_pkt_len(const PibPktFields *f, uint32_t paylen)
{
    const PibOpInfo *op = &pib_ops[f->opcode];

    return sizeof(struct pib_lrh) + (f->grh_av ? sizeof(struct pib_grh) : 0) +
           sizeof(struct pib_bth) + pib_ext_len(op->mask) + paylen + (-paylen & 3);
}

/*
 * Write an IB packet of pib_pkt_len() bytes at b: the headers for f, from slid (sgid: the
 * GRH's source GID), then the payload (NULL: left for the caller) and the pad.  Any node
 * builds its packets here: the HCA through pib_pkt_build(), a switch its SMP traps.
 */
void pib_pkt_write(uint8_t *b, const PibPktFields *f, uint16_t slid, const uint8_t *sgid,
                   const void *payload, uint32_t paylen)
{
    const PibOpInfo *op = &pib_ops[f->opcode];
    uint32_t pad = -paylen & 3;
    uint32_t len = pib_pkt_len(f, paylen);
    struct pib_lrh *lrh = (struct pib_lrh *)b;
    struct pib_bth *bth;
    uint8_t *e;

    /* A directed-route SMP goes to the permissive LID, and comes from it. */
    if (f->vl15 && f->dlid == PIB_LID_PERMISSIVE) {
        slid = PIB_LID_PERMISSIVE;
    }
    *lrh = (struct pib_lrh) {
        .vl_lver = f->vl15 ? 15 << 4 : 0,
        .sl_lnh = (f->sl & 0xf) << 4 |
                  (f->grh_av ? PIB_LNH_IBA_GLOBAL : PIB_LNH_IBA_LOCAL),
        .dlid_be = cpu_to_be16(f->dlid),
        .pktlen_be = cpu_to_be16(len / 4),
        .slid_be = cpu_to_be16(slid),
    };
    e = b + sizeof(*lrh);
    if (f->grh_av) {
        struct pib_grh *grh = (struct pib_grh *)e;
        const PibAv *av = f->grh_av;

        grh->ver_tc_flow_be = cpu_to_be32(6u << 28 | av->traffic_class << 20 |
                                          (av->flow_label & PIB_FLOW_LABEL_MASK));
        grh->paylen_be = cpu_to_be16(len - sizeof(*lrh) - sizeof(*grh));
        grh->next_hdr = 0x1b;
        grh->hop_limit = av->hop_limit;
        memcpy(grh->sgid, sgid, sizeof(grh->sgid));
        memcpy(grh->dgid, av->dgid, sizeof(grh->dgid));
        e += sizeof(*grh);
    }
    bth = (struct pib_bth *)e;
    *bth = (struct pib_bth) {
        .opcode = f->opcode,
        .flags = (f->se ? PIB_BTH_SE : 0) | pad << PIB_BTH_PAD_SHIFT,
        .pkey_be = cpu_to_be16(f->pkey),
        .dqpn_be = cpu_to_be32(f->dqpn & PIB_QPN_MASK),
        .psn_be = cpu_to_be32((f->psn & PIB_PSN_MASK) |
                              (f->ackreq ? PIB_BTH_ACKREQ : 0)),
    };
    e += sizeof(*bth);

    /* Extension headers, in the IBTA order. */
    if (op->mask & PIB_OPM_XRCETH) {
        stl_be_p(e, f->xrc_srqn & PIB_QPN_MASK);
        e += sizeof(struct pib_xrceth);
    }
    if (op->mask & PIB_OPM_DETH) {
        stl_be_p(e, f->qkey);
        stl_be_p(e + 4, f->src_qpn & PIB_QPN_MASK);
        e += sizeof(struct pib_deth);
    }
    if (op->mask & PIB_OPM_RETH) {
        stq_be_p(e, f->va);
        stl_be_p(e + 8, f->rkey);
        stl_be_p(e + 12, f->dmalen);
        e += sizeof(struct pib_reth);
    }
    if (op->mask & PIB_OPM_ATMETH) {
        stq_be_p(e, f->va);
        stl_be_p(e + 8, f->rkey);
        stq_be_p(e + 12, f->swap_add);
        stq_be_p(e + 20, f->compare);
        e += sizeof(struct pib_atomic_eth);
    }
    if (op->mask & PIB_OPM_AETH) {
        stl_be_p(e, (uint32_t)f->syndrome << 24 | (f->msn & 0xffffff));
        e += sizeof(struct pib_aeth);
    }
    if (op->mask & PIB_OPM_ATMACK) {
        stq_be_p(e, f->orig);
        e += sizeof(struct pib_atomic_ack_eth);
    }
    if (op->mask & PIB_OPM_IMMDT) {
        memcpy(e, f->imm, 4);
        e += 4;
    }
    if (op->mask & PIB_OPM_IETH) {
        stl_be_p(e, f->ieth_rkey);
        e += 4;
    }
    if (payload && paylen) {
        memcpy(e, payload, paylen);
    }
    memset(e + paylen, 0, pad);
}

/*
 * A frame (link header and IB packet) for these header fields and payload.
 * The caller checked that the payload fits the path MTU.  With payload NULL
 * the payload bytes are left for the caller to fill in place
 * (pib_pkt_payload), so data DMA'd from guest memory is copied only once.
 */
PibPacket *pib_pkt_build(PibState *s, const PibPktFields *f,
                         const void *payload, uint32_t paylen)
{
    PibPacket *p = pib_packet_new(s, pib_pkt_len(f, paylen));
    const PibMgmtPort *m = &s->port.mgmt;
    uint16_t slid = m->lid | (f->src_path_bits & ((1u << m->lmc) - 1));
    uint8_t sgid[16];

    pib_port_gid(s, sgid);
    pib_pkt_write(pib_packet_ib(p), f, slid, sgid, payload, paylen);
    trace_pib_pkt_tx(s->node_guid, pib_op_name(f->opcode), f->dlid, f->dqpn,
                     f->psn & PIB_PSN_MASK, f->ackreq, paylen);
    return p;
}

/* Where the paylen payload bytes of a frame pib_pkt_build() made go. */
uint8_t *pib_pkt_payload(PibPacket *p, uint32_t paylen)
{
    return pib_packet_ib(p) + pib_packet_ib_len(p) - (-paylen & 3) - paylen;
}

/*
 * Parse
 */

/*
 * Check the headers every packet must get right, whatever QP it is for, and
 * fill *pi.  Returns PIB_CNT_MAX if the packet may go on, else the rx_drop_*
 * counter of the reason.  port_gid: a unicast GRH's DGID must be this GID (an
 * HCA's port); NULL: not checked (a switch, which forwards by the LRH).
 */
enum pib_counter pib_pkt_parse(const uint8_t *b, uint32_t len, const uint8_t *port_gid,
                               PibPktInfo *pi)
{
    const struct pib_lrh *lrh = (const struct pib_lrh *)b;
    const struct pib_bth *bth;
    uint32_t off = sizeof(*lrh), mask, ext, psn;
    uint8_t lnh, tver;
    const uint8_t *e;

    memset(pi, 0, sizeof(*pi));
    pi->pkt = b;
    pi->len = len;
    if (len < sizeof(*lrh) + sizeof(*bth)) {
        return PIB_CNT_RX_DROP_MALFORMED;
    }
    /* LRH: LVer 0, IBA transport, and the length it claims is the frame's. */
    lnh = lrh->sl_lnh & 3;
    pi->sl = lrh->sl_lnh >> 4;
    pi->vl = lrh->vl_lver >> 4;
    pi->dlid = be16_to_cpu(lrh->dlid_be);
    pi->slid = be16_to_cpu(lrh->slid_be);
    if ((lrh->vl_lver & 0xf) != 0 ||
        (lnh != PIB_LNH_IBA_LOCAL && lnh != PIB_LNH_IBA_GLOBAL) ||
        (be16_to_cpu(lrh->pktlen_be) & 0x7ff) * 4 != len ||
        (be16_to_cpu(lrh->pktlen_be) & 0xf800)) {
        return PIB_CNT_RX_DROP_MALFORMED;
    }
    if (lnh == PIB_LNH_IBA_GLOBAL) {
        if (len < off + sizeof(struct pib_grh) + sizeof(*bth)) {
            return PIB_CNT_RX_DROP_MALFORMED;
        }
        memcpy(&pi->grh, b + off, sizeof(pi->grh));
        if (be32_to_cpu(pi->grh.ver_tc_flow_be) >> 28 != 6 ||
            pi->grh.next_hdr != 0x1b ||
            be16_to_cpu(pi->grh.paylen_be) != len - off - sizeof(pi->grh)) {
            return PIB_CNT_RX_DROP_MALFORMED;
        }
        /* A multicast packet's DGID is its group's: pib_mcast_deliver() checks it. */
        if (port_gid && !pib_lid_is_multicast(pi->dlid) &&
            memcmp(pi->grh.dgid, port_gid, sizeof(pi->grh.dgid))) {
            return PIB_CNT_RX_DROP_DLID;
        }
        pi->has_grh = true;
        off += sizeof(struct pib_grh);
    }

    bth = (const struct pib_bth *)(b + off);
    pi->opcode = bth->opcode;
    pi->se = bth->flags & PIB_BTH_SE;
    pi->pad = (bth->flags >> PIB_BTH_PAD_SHIFT) & 3;
    tver = bth->flags & 0xf;
    pi->pkey = be16_to_cpu(bth->pkey_be);
    pi->dqpn = be32_to_cpu(bth->dqpn_be) & PIB_QPN_MASK;
    psn = be32_to_cpu(bth->psn_be);
    pi->psn = psn & PIB_PSN_MASK;
    pi->ackreq = psn & PIB_BTH_ACKREQ;
    off += sizeof(*bth);
    pi->op = pib_op_info(pi->opcode);
    if (!pi->op || tver != 0) {
        return PIB_CNT_RX_DROP_OPCODE;
    }

    mask = pi->op->mask;
    ext = pib_ext_len(mask);
    if (len < off + ext + pi->pad) {
        return PIB_CNT_RX_DROP_MALFORMED;
    }
    e = b + off;
    if (mask & PIB_OPM_XRCETH) {
        pi->xrc_srqn = ldl_be_p(e) & PIB_QPN_MASK;  /* [31:24] reserved */
        e += sizeof(struct pib_xrceth);
    }
    if (mask & PIB_OPM_DETH) {
        pi->qkey = ldl_be_p(e);
        pi->src_qpn = ldl_be_p(e + 4) & PIB_QPN_MASK;
        e += sizeof(struct pib_deth);
    }
    if (mask & PIB_OPM_RETH) {
        pi->va = ldq_be_p(e);
        pi->rkey = ldl_be_p(e + 8);
        pi->dmalen = ldl_be_p(e + 12);
        e += sizeof(struct pib_reth);
    }
    if (mask & PIB_OPM_ATMETH) {
        pi->va = ldq_be_p(e);
        pi->rkey = ldl_be_p(e + 8);
        pi->swap_add = ldq_be_p(e + 12);
        pi->compare = ldq_be_p(e + 20);
        e += sizeof(struct pib_atomic_eth);
    }
    if (mask & PIB_OPM_AETH) {
        uint32_t aeth = ldl_be_p(e);

        pi->syndrome = aeth >> 24;
        pi->msn = aeth & 0xffffff;
        e += sizeof(struct pib_aeth);
    }
    if (mask & PIB_OPM_ATMACK) {
        pi->orig = ldq_be_p(e);
        e += sizeof(struct pib_atomic_ack_eth);
    }
    if (mask & PIB_OPM_IMMDT) {
        memcpy(pi->imm, e, 4);
        e += 4;
    }
    if (mask & PIB_OPM_IETH) {
        pi->ieth_rkey = ldl_be_p(e);
        e += 4;
    }
    pi->payload = e;
    pi->paylen = len - off - ext - pi->pad;
    /* Opcodes without payload carry neither payload nor pad. */
    if (!(mask & PIB_OPM_PAYLOAD) && (pi->paylen || pi->pad)) {
        return PIB_CNT_RX_DROP_LENGTH;
    }
    return PIB_CNT_MAX;
}

/*
 * What the port lets in (docs/reference/hardware.md, "Port"), for a packet whose headers parsed:
 * the port's state, the DLID, VL15 for QP0 and only for QP0, and the P_Key against the
 * table (QP0 is exempt).  Returns PIB_CNT_MAX, or the rx_drop_* reason.  A data packet that
 * passes in ARMED activates the port (IBTA 7.2.5).
 */
static enum pib_counter pib_pkt_admit(PibState *s, PibPktInfo *pi)
{
    bool smp = pi->dqpn == PIB_QPN_SMI;
    bool mcast = pib_lid_is_multicast(pi->dlid);
    int idx;

    if (!pib_port_link_up(s) || (!smp && s->port.sm == PIB_PSM_INIT)) {
        return PIB_CNT_RX_DROP_PORT_DOWN;
    }
    if (!pib_lid_is_ours(s, pi->dlid) && !mcast &&
        !(smp && pi->dlid == PIB_LID_PERMISSIVE)) {
        return PIB_CNT_RX_DROP_DLID;
    }
    if (smp != (pi->vl == 15)) {
        return PIB_CNT_RX_DROP_VL15;
    }
    if (!smp) {
        idx = pib_mgmt_pkey_find(&s->port.mgmt, pi->pkey);
        if (idx < 0) {
            pib_port_bad_pkey(s, pi);
            return PIB_CNT_RX_DROP_PKEY;
        }
        pi->pkey_index = idx;
        if (s->port.sm == PIB_PSM_ARMED) {
            pib_port_event(s, PIB_PEV_RX_DATA);
        }
    }
    return PIB_CNT_MAX;
}

/*
 * The transport an opcode belongs to must be the destination QP's.  XRC
 * requests go to an XRC target, XRC responses to an XRC initiator.
 */
static bool pib_transport_ok(const PibPktInfo *pi, uint8_t qp_type)
{
    switch (pi->opcode >> 5) {
    case 0:
        return qp_type == PIB_QPT_RC;
    case 1:
        return qp_type == PIB_QPT_UC;
    case 3:
        return pib_qp_type_is_ud(qp_type);
    case PIB_OP_TRANSPORT_XRC >> 5:
        return qp_type == (pi->op->mask & PIB_OPM_RESP ? PIB_QPT_XRC_INI :
                           PIB_QPT_XRC_TGT);
    default:
        return false;
    }
}

/*
 * Receive one packet: parse, find the QP, check what can be checked without
 * the engines, dispatch to the responder (requests) or the completer (RC
 * responses).
 */
static void pib_pkt_dispatch(PibState *s, const uint8_t *b, uint32_t len)
{
    enum pib_counter why;
    uint8_t gid[16];
    PibPktInfo pi;
    PibQp *qp;

    pib_port_gid(s, gid);
    why = pib_pkt_parse(b, len, gid, &pi);
    if (why == PIB_CNT_MAX) {
        why = pib_pkt_admit(s, &pi);
    }
    if (why != PIB_CNT_MAX) {
        pib_pkt_drop(s, why, &pi);
        return;
    }
    trace_pib_pkt_rx(s->node_guid, pib_op_name(pi.opcode), pi.slid, pi.dqpn,
                     pi.psn, pi.ackreq, pi.paylen);

    if (pib_lid_is_multicast(pi.dlid)) {
        why = pib_mcast_deliver(s, &pi);
        if (why != PIB_CNT_MAX) {
            pib_pkt_drop(s, why, &pi);
        }
        return;
    }
    qp = pib_qp_lookup(s, pi.dqpn);
    if (!qp) {
        pib_pkt_drop(s, PIB_CNT_RX_DROP_NO_QP, &pi);
        return;
    }
    pib_pkt_to_qp(s, qp, &pi);
}

/*
 * A packet for one QP: the checks that need the QP, then the responder (requests) or the
 * completer (RC responses).  A multicast packet comes here once per attached QP.
 */
void pib_pkt_to_qp(PibState *s, PibQp *qp, const PibPktInfo *pi)
{
    if (!pib_transport_ok(pi, qp->type)) {
        pib_pkt_drop(s, PIB_CNT_RX_DROP_QP_TYPE, pi);
        return;
    }
    /* Only RTR and later receive: RESET, INIT and ERR drop. */
    switch (qp->state) {
    case PIB_QPS_RTR:
    case PIB_QPS_RTS:
    case PIB_QPS_SQD:
    case PIB_QPS_SQE:
        break;
    default:
        pib_pkt_drop(s, PIB_CNT_RX_DROP_QP_STATE, pi);
        return;
    }
    if (pib_qp_is_connected(qp) && pi->slid != qp->av.dlid) {
        pib_pkt_drop(s, PIB_CNT_RX_DROP_SLID, pi);
        return;
    }
    /* QP1 takes any partition of the port; other QPs only their own (IBTA 10.9.3). */
    if (qp->type != PIB_QPT_SMI && qp->type != PIB_QPT_GSI &&
        !pib_mgmt_pkey_match(pib_port_pkey(s, qp->pkey_index), pi->pkey)) {
        pib_port_bad_pkey(s, pi);
        pib_pkt_drop(s, PIB_CNT_RX_DROP_PKEY, pi);
        return;
    }
    if (pib_qp_type_is_ud(qp->type) && pi->qkey != qp->qkey) {
        if (s->port.mgmt.qkey_violations != UINT16_MAX) {
            s->port.mgmt.qkey_violations++;
        }
        pib_pkt_drop(s, PIB_CNT_RX_DROP_QKEY, pi);
        return;
    }
    /* First packet in RTR: communication established (IBTA 11.6.3.1). */
    if (qp->state == PIB_QPS_RTR && !qp->resp.comm_est) {
        qp->resp.comm_est = true;
        pib_aeq_post(s, PIB_AE_COMM_EST, qp->qpn, 0);
    }
    if (pi->op->mask & PIB_OPM_RESP) {
        if (qp->state == PIB_QPS_RTR) {
            pib_pkt_drop(s, PIB_CNT_RX_DROP_QP_STATE, pi);
            return;
        }
        pib_comp_recv(qp, pi);
    } else {
        pib_resp_recv(qp, pi);
    }
}

/*
 * The receive queue.  Frames from the link are queued by the chardev's read
 * callback and processed at its end (pib_rx_run() from pib_link_receive()),
 * in the same main-loop pass: going through the bottom half cost one more
 * pass, and an eventfd write to schedule it, per read.  Packets looped back
 * to our own LID are queued by our own engines, in the middle of a step, so
 * they wait for the receive bottom half.  Either way the queue is processed
 * in arrival order.
 */

/* Count a packet that reached the port, and queue it; false if it was lost */
static bool pib_rx_queue(PibState *s, PibPacket *p)
{
    if (pib_inject_drop(s, p, false)) {
        pib_packet_free(s, p);      /* lost before the port saw it */
        return false;
    }
    pib_count(s, PIB_CNT_RX_PACKETS, 1);
    pib_count(s, PIB_CNT_RX_BYTES, pib_packet_ib_len(p));
    QSIMPLEQ_INSERT_TAIL(&s->rxq, p, next);
    s->rxq_len++;
    return true;
}

/* A packet to our own LID: processed by the receive bottom half. */
void pib_rx_enqueue(PibState *s, PibPacket *p)
{
    /* A queue that was not empty has the bottom half scheduled already. */
    if (pib_rx_queue(s, p) && s->rxq_len == 1) {
        qemu_bh_schedule(s->rx_bh);
    }
}

/* A frame from the link: the read callback calls pib_rx_run() when done. */
void pib_rx_link(PibState *s, PibPacket *p)
{
    pib_rx_queue(s, p);
}

/*
 * A packet from the link, in the link's read buffer (or the frame buffer of
 * one split across two reads): dispatched right there, with no copy and no
 * wait in the receive queue, when nothing waits in that queue ahead of it
 * (packets are handled in arrival order) and no receive fault is armed
 * (inject-drop-rx works on queued packets).  The
 * engines it wakes run in pib_rx_run(), which the link calls after its feed,
 * as for queued packets.  False: the link queues it (pib_rx_link()).
 */
bool pib_rx_link_bytes(PibState *s, const uint8_t *ib, uint32_t len)
{
    if (s->rxq_len || s->inject.drop_rx) {
        return false;
    }
    pib_count(s, PIB_CNT_RX_PACKETS, 1);
    pib_count(s, PIB_CNT_RX_BYTES, len);
    s->work_deferred = true;
    pib_pkt_dispatch(s, ib, len);
    return true;
}

/*
 * Dispatch queued packets, at most PIB_RX_BUDGET (the bottom half takes the
 * rest), then run the engines they woke and send what all of it produced,
 * still in this main-loop pass.
 */
void pib_rx_run(PibState *s)
{
    unsigned n;
    PibPacket *p;

    s->work_deferred = true;
    for (n = 0; n < PIB_RX_BUDGET && (p = QSIMPLEQ_FIRST(&s->rxq)); n++) {
        QSIMPLEQ_REMOVE_HEAD(&s->rxq, next);
        s->rxq_len--;
        pib_pkt_dispatch(s, pib_packet_ib(p), pib_packet_ib_len(p));
        pib_packet_free(s, p);
    }
    s->work_deferred = false;
    if (!QSIMPLEQ_EMPTY(&s->rxq)) {
        qemu_bh_schedule(s->rx_bh);
    }
    pib_work_run(s);            /* flushes the transmit queue */
    /* Room again: the link may read, stopped requesters may send. */
    if (s->rxq_len < PIB_RXQ_MAX / 2) {
        if (s->link.rx_throttled) {
            s->link.rx_throttled = false;
            qemu_chr_fe_accept_input(&s->link.chr);
        }
        if (s->rx_waiters) {
            s->rx_waiters = false;
            pib_qp_kick_waiters(s);
        }
    }
}

void pib_rx_bh(void *opaque)
{
    pib_rx_run(opaque);
}

void pib_rx_purge(PibState *s)
{
    PibPacket *p;

    while ((p = QSIMPLEQ_FIRST(&s->rxq))) {
        QSIMPLEQ_REMOVE_HEAD(&s->rxq, next);
        pib_packet_free(s, p);
    }
    s->rxq_len = 0;
}
