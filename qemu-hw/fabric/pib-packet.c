/*
 * pib fabric - InfiniBand packets: the codec every node uses
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Building and parsing the IBTA headers a PACKET frame carries (include/pib_link.h): LRH,
 * optional GRH, BTH, then the extension headers the opcode calls for (XRCETH, DETH, RETH,
 * AtomicETH, AETH, AtomicAckETH, ImmDt, IETH) and the payload with its pad.  All of it is
 * big-endian.  The formats are in include/pib_link.h; what each opcode carries is the table
 * below.
 *
 * A received packet comes from a peer's device model, or from a hostile program on the
 * other end of the socket: pib_pkt_parse() checks every field before anything trusts it and
 * says why a packet is refused (PibPktVerdict).  What a refusal costs is the node's
 * business: the HCA counts it under one rx_drop_* counter (hca/pib-rx.c), a switch under
 * one of its drop reasons (switch/pib-switch-mad.c).  Checks that need a QP (PSN, opcode
 * sequence, keys) belong to the HCA's engines.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"

#include "pib-fabric.h"

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
                            PIB_OPM_ONLY | PIB_OPM_RETH | PIB_OPM_PAYLOAD)    \
    X(FLUSH,                PIB_OPM_REQ | PIB_OPM_FLUSH | PIB_OPM_ONLY |      \
                            PIB_OPM_FETH | PIB_OPM_RETH)

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
    [PIB_OP_CNP]        = { "CNP", PIB_OPM_CNP },
};

const PibOpInfo *pib_op_info(uint8_t opcode)
{
    return pib_ops[opcode].name ? &pib_ops[opcode] : NULL;
}

const char *pib_op_name(uint8_t opcode)
{
    return pib_ops[opcode].name ? pib_ops[opcode].name : "UNKNOWN";
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
           (mask & PIB_OPM_XRCETH ? sizeof(struct pib_xrceth) : 0) +
           (mask & PIB_OPM_FETH ? sizeof(struct pib_feth) : 0);
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

    return sizeof(struct pib_lrh) + (f->grh ? sizeof(struct pib_grh) : 0) +
           sizeof(struct pib_bth) + pib_ext_len(op->mask) + paylen + (-paylen & 3);
}

/*
 * Write an IB packet of pib_pkt_len() bytes at b: the headers for f, from slid (sgid: the
 * GRH's source GID), then the payload (NULL: left for the caller) and the pad.  Any node
 * builds its packets here: the HCA through pib_pkt_build() (hca/pib-rx.c), a switch its
 * SMP traps.
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
        .vl_lver = (f->vl15 ? PIB_VL_MGMT : f->vl & 0xf) << 4,
        .sl_lnh = (f->sl & 0xf) << 4 |
                  (f->grh ? PIB_LNH_IBA_GLOBAL : PIB_LNH_IBA_LOCAL),
        .dlid_be = cpu_to_be16(f->dlid),
        .pktlen_be = cpu_to_be16(len / 4),
        .slid_be = cpu_to_be16(slid),
    };
    e = b + sizeof(*lrh);
    if (f->grh) {
        struct pib_grh *grh = (struct pib_grh *)e;
        const PibGrhAddr *av = f->grh;

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
        .dqpn_be = cpu_to_be32((f->dqpn & PIB_QPN_MASK) | (f->becn ? PIB_BTH_BECN : 0)),
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
    if (op->mask & PIB_OPM_FETH) {
        stl_be_p(e, f->feth);
        e += sizeof(struct pib_feth);
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

/* Where the paylen payload bytes of a frame whose packet pib_pkt_write() made go. */
uint8_t *pib_pkt_payload(PibPacket *p, uint32_t paylen)
{
    return pib_packet_ib(p) + pib_packet_ib_len(p) - (-paylen & 3) - paylen;
}

/*
 * Parse
 */

/*
 * Check the headers every packet must get right, whatever QP it is for, and
 * fill *pi.  Returns PIB_PKT_OK if the packet may go on, else why not (the
 * node counts it as it counts drops).  A GRH's DGID is the node's to check: a switch
 * forwards by the LRH, an HCA takes a unicast packet for one of its port's GIDs
 * (hca/pib-rx.c).
 */
PibPktVerdict pib_pkt_parse(const uint8_t *b, uint32_t len, PibPktInfo *pi)
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
        return PIB_PKT_MALFORMED;
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
        return PIB_PKT_MALFORMED;
    }
    if (lnh == PIB_LNH_IBA_GLOBAL) {
        if (len < off + sizeof(struct pib_grh) + sizeof(*bth)) {
            return PIB_PKT_MALFORMED;
        }
        memcpy(&pi->grh, b + off, sizeof(pi->grh));
        if (be32_to_cpu(pi->grh.ver_tc_flow_be) >> 28 != 6 ||
            pi->grh.next_hdr != 0x1b ||
            be16_to_cpu(pi->grh.paylen_be) != len - off - sizeof(pi->grh)) {
            return PIB_PKT_MALFORMED;
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
    pi->fecn = be32_to_cpu(bth->dqpn_be) & PIB_BTH_FECN;
    pi->becn = be32_to_cpu(bth->dqpn_be) & PIB_BTH_BECN;
    psn = be32_to_cpu(bth->psn_be);
    pi->psn = psn & PIB_PSN_MASK;
    pi->ackreq = psn & PIB_BTH_ACKREQ;
    off += sizeof(*bth);
    pi->op = pib_op_info(pi->opcode);
    if (!pi->op || tver != 0) {
        return PIB_PKT_BAD_OPCODE;
    }

    mask = pi->op->mask;
    ext = pib_ext_len(mask);
    if (len < off + ext + pi->pad) {
        return PIB_PKT_MALFORMED;
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
    if (mask & PIB_OPM_FETH) {
        pi->feth = ldl_be_p(e);
        e += sizeof(struct pib_feth);
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
        return PIB_PKT_BAD_LENGTH;
    }
    return PIB_PKT_OK;
}
