/*
 * pib fabric - InfiniBand packets: the codec every node uses (pib-packet.c)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The wire formats themselves (LRH, GRH, BTH and the extension headers) are defined once,
 * in include/pib_link.h.  This header holds what the codec makes of them: which headers
 * each opcode carries (PibOpInfo), a parsed packet in host order (PibPktInfo), what a
 * sender fills to build one (PibPktFields), and the parser's verdict.
 */
#ifndef HW_PIB_PACKET_H
#define HW_PIB_PACKET_H

#include "../include/pib_link.h"
#include "pib-link.h"           /* PibPacket */

/* IBTA: 0xc000..0xfffe are multicast LIDs, 0xffff the permissive LID */
static inline bool pib_lid_is_unicast(uint16_t lid)
{
    return lid >= 0x0001 && lid <= 0xbfff;
}

static inline bool pib_lid_is_multicast(uint16_t lid)
{
    return lid >= PIB_LID_MULTICAST_BASE && lid != PIB_LID_PERMISSIVE;
}

/* The well-known QPs (IBTA 3.5.6): QP0 takes SMPs, QP1 GMPs, each with its fixed Q_Key. */
#define PIB_QPN_SMI             0
#define PIB_QPN_GSI             1
#define PIB_SMI_QKEY            0
#define PIB_GSI_QKEY            0x80010000u

/*
 * Is the packet at b (len bytes from the LRH) for QP0, an SMP?  SMPs are never global
 * (IBTA 14.2.2): the BTH follows the LRH.  Only QP0 may use VL15, only SMPs go to QP0.
 */
static inline bool pib_pkt_is_smp(const uint8_t *b, uint32_t len)
{
    const struct pib_lrh *lrh = (const struct pib_lrh *)b;
    const struct pib_bth *bth = (const struct pib_bth *)(b + sizeof(*lrh));

    return len >= sizeof(*lrh) + sizeof(*bth) && (lrh->sl_lnh & 3) == PIB_LNH_IBA_LOCAL &&
           (be32_to_cpu(bth->dqpn_be) & 0xffffff) == PIB_QPN_SMI;
}

/* What a GRH says besides its source GID: the global part of an address vector. */
typedef struct PibGrhAddr {
    uint8_t hop_limit;
    uint8_t traffic_class;
    uint32_t flow_label;
    uint8_t dgid[16];
} PibGrhAddr;

/* Why pib_pkt_parse() refused a packet; each node counts these its own way. */
typedef enum PibPktVerdict {
    PIB_PKT_OK,
    PIB_PKT_MALFORMED,      /* LRH or GRH wrong, or shorter than its headers */
    PIB_PKT_BAD_OPCODE,     /* an opcode the codec does not know, or TVer not 0 */
    PIB_PKT_BAD_LENGTH,     /* payload or pad on an opcode that carries none */
    PIB_PKT__MAX
} PibPktVerdict;

#define PIB_OPM_RETH        (1u << 0)
#define PIB_OPM_AETH        (1u << 1)
#define PIB_OPM_ATMETH      (1u << 2)
#define PIB_OPM_ATMACK      (1u << 3)
#define PIB_OPM_IMMDT       (1u << 4)
#define PIB_OPM_IETH        (1u << 5)
#define PIB_OPM_DETH        (1u << 6)
#define PIB_OPM_PAYLOAD     (1u << 7)   /* may carry payload */
#define PIB_OPM_REQ         (1u << 8)   /* a request (to the responder) */
#define PIB_OPM_RESP        (1u << 9)   /* a response (to the completer) */
#define PIB_OPM_FIRST       (1u << 10)  /* first packet of a message */
#define PIB_OPM_MIDDLE      (1u << 11)
#define PIB_OPM_LAST        (1u << 12)  /* last packet of a message */
#define PIB_OPM_SEND        (1u << 13)
#define PIB_OPM_WRITE       (1u << 14)
#define PIB_OPM_READ        (1u << 15)  /* READ request or READ response */
#define PIB_OPM_ATOMIC      (1u << 16)  /* atomic request or atomic ACK */
#define PIB_OPM_ATOMIC_WRITE (1u << 17) /* ATOMIC WRITE: 8 bytes placed at once */
#define PIB_OPM_XRCETH      (1u << 18)  /* an XRC request: the XRCETH follows the BTH */
#define PIB_OPM_FETH        (1u << 19)  /* FLUSH's FETH, before its RETH */
#define PIB_OPM_FLUSH       (1u << 20)  /* an RDMA FLUSH request */
#define PIB_OPM_CNP         (1u << 21)  /* a congestion notification: no request, no response */
#define PIB_OPM_ONLY        (PIB_OPM_FIRST | PIB_OPM_LAST)

typedef struct PibOpInfo {
    const char *name;       /* NULL: not an opcode the device knows */
    uint32_t mask;          /* PIB_OPM_* */
} PibOpInfo;

/* A received packet after pib_pkt_parse(): headers in host order. */
typedef struct PibPktInfo {
    const uint8_t *pkt;     /* LRH onwards */
    uint32_t len;
    uint16_t dlid;
    uint16_t slid;
    uint8_t sl;
    uint8_t vl;             /* LRH: 15 for SMPs, 0 otherwise */
    bool has_grh;
    struct pib_grh grh;     /* raw, as on the wire */
    uint8_t opcode;
    const PibOpInfo *op;
    bool se;
    bool ackreq;
    uint8_t pad;
    uint16_t pkey;
    uint8_t pkey_index;     /* the table entry it matched (QP0: 0) */
    uint32_t dqpn;
    bool fecn, becn;        /* congestion notification (IBTA Annex A10) */
    uint32_t psn;
    uint64_t va;            /* RETH or AtomicETH */
    uint32_t rkey;
    uint32_t dmalen;        /* RETH */
    uint8_t syndrome;       /* AETH */
    uint32_t msn;
    uint64_t swap_add;      /* AtomicETH */
    uint64_t compare;
    uint64_t orig;          /* AtomicAckETH */
    uint8_t imm[4];         /* ImmDt, raw */
    uint32_t ieth_rkey;
    uint32_t qkey;          /* DETH */
    uint32_t src_qpn;
    uint32_t xrc_srqn;      /* XRCETH */
    uint32_t feth;          /* FETH: PIB_FETH_* bits */
    const uint8_t *payload;
    uint32_t paylen;
} PibPktInfo;

/* What a sender fills to build a packet. */
typedef struct PibPktFields {
    uint8_t opcode;
    bool se;
    bool ackreq;
    uint32_t dqpn;
    bool becn;              /* a response that carries the congestion notification back */
    uint32_t psn;
    uint16_t dlid;
    uint8_t sl;
    uint8_t vl;             /* the LRH VL: the sender's SLtoVLMappingTable[sl] */
    uint8_t src_path_bits;
    bool vl15;              /* an SMP: VL15 (vl is ignored), and a permissive */
                            /* DLID gets a permissive SLID */
    uint16_t pkey;          /* BTH P_Key */
    const PibGrhAddr *grh;  /* non-NULL: add a GRH with these fields, */
    uint8_t sgid_index;     /* and the SGID at this index of the sender's GID table */
    uint64_t va;            /* RETH / AtomicETH */
    uint32_t rkey;
    uint32_t dmalen;
    uint8_t syndrome;       /* AETH */
    uint32_t msn;
    uint64_t swap_add;
    uint64_t compare;
    uint64_t orig;          /* AtomicAckETH */
    uint8_t imm[4];
    uint32_t ieth_rkey;     /* IETH: the rkey the responder invalidates */
    uint32_t qkey;          /* DETH */
    uint32_t src_qpn;
    uint32_t xrc_srqn;      /* XRCETH */
    uint32_t feth;          /* FETH */
} PibPktFields;

const PibOpInfo *pib_op_info(uint8_t opcode);
const char *pib_op_name(uint8_t opcode);
PibPktFields pib_pkt_trap_fields(uint16_t dlid, uint8_t sl);
uint32_t pib_pkt_len(const PibPktFields *f, uint32_t paylen);
void pib_pkt_write(uint8_t *b, const PibPktFields *f, uint16_t slid, const uint8_t *sgid,
                   const void *payload, uint32_t paylen);
uint8_t *pib_pkt_payload(PibPacket *p, uint32_t paylen);
PibPktVerdict pib_pkt_parse(const uint8_t *b, uint32_t len, PibPktInfo *pi);

#endif /* HW_PIB_PACKET_H */
