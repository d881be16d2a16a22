/*
 * pib fuzzing - the link packet parser and the transport engines
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A libFuzzer target for everything a peer on the other end of the link can
 * reach: the frame reassembly (fabric/pib-link.c), the credits and the VL
 * queues (fabric/pib-link-fc.c: FLOW frames honest, lying and malformed, a
 * peer that grants or withholds, packets on every data VL), the packet parser
 * (fabric/pib-packet.c) and dispatch (hca/pib-rx.c), the responder
 * (hca/pib-resp.c) and the completer (hca/pib-comp.c), with the requester and
 * the admin commands interleaved.
 *
 * Each input starts from a fresh device, set up the way a driver would: the
 * real realize, the link trained with a HELLO, BAR0 programmed, and objects
 * created with real admin commands through the admin queue in guest memory:
 * two PDs, seven MRs (enum FzMrId), a fast-registration MR (registered by
 * REG_MR WQEs the input posts), two memory windows bound with BIND_MW
 * WQEs, two CQs, an SRQ, and five QPs in RTS (RC, RC on the SRQ, UC, UD, GSI)
 * with receive WQEs posted; and an XRC domain with an XRC SRQ (receives
 * posted) and an XRC target QP in RTS, which requests with XRC opcodes
 * reach.  The configuration bytes vary that setup (path MTU, GRH, timers,
 * loopback, ...).  The input then drives
 * the peer's side and the driver's side, op by op (enum FzOp).
 *
 * The oracle is deliberately weak: the sanitizers (ASan, UBSan, LeakSanitizer)
 * stay quiet, and the device never writes guest RAM that is not its to write
 * (qemu-stubs.c checks every DMA write against the page roles; pages nobody
 * owns are canaries).  Besides, the device must never send a malformed frame,
 * its bottom halves must settle, it must not stop reading the link with no
 * work pending, and after its exit no timer, bottom half or watch of it may be
 * left.
 *
 * Input format: 4 configuration bytes (struct FzConfig, in fuzz-harness.h),
 * then ops: one byte (enum FzOp in [4:0], FZ_OP_NORUN in [7]) and its
 * fixed-size argument record.  Short inputs read as zeros.  PIB_FUZZ_GEN=<dir>
 * writes a seed corpus and exits; PIB_FUZZ_TRACE=1 formats every trace point.
 * PIB_FUZZ_SELFTEST=1 plants a bug the oracle must report (see fz_layout() in
 * fuzz-harness.c).
 *
 * This file holds the entry points, the input format and its decoders (the
 * structured packets, the ops) and the seed corpus.  The fixture, the device
 * as fz_setup() leaves it and the driver's actions on it, is fuzz-harness.c;
 * what the two share is fuzz-harness.h.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"

#include "fuzz-harness.h"

/*
 * Reading the input: fields past the end read as zeros.
 */
typedef struct FzIn {
    const uint8_t *p;
    size_t n;
} FzIn;

static void in_read(FzIn *in, void *out, size_t len)
{
    size_t n = MIN(len, in->n);

    memcpy(out, in->p, n);
    memset((uint8_t *)out + n, 0, len - n);
    in->p += n;
    in->n -= n;
}

static uint8_t in_u8(FzIn *in)
{
    uint8_t v;

    in_read(in, &v, 1);
    return v;
}

static uint16_t in_u16(FzIn *in)
{
    uint16_t v;

    in_read(in, &v, 2);
    return le16_to_cpu(v);
}

/*
 * Packets from the peer
 */

/* Every opcode the device knows, for structured packets. */
static const uint8_t fz_opcodes[] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
    0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x16, 0x17,
    0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b,
    0x64, 0x65,
};

/*
 * A structured packet: valid by default (the right QPN, the expected PSN,
 * real keys and addresses, the right lengths, correct headers), with every
 * field open to mutation.
 */
typedef struct QEMU_PACKED FzPktRec {
    uint8_t target;     /* [2:0] FzTarget, 5 raw dqpn, 6 no such QP, 7 QP0;
                         * [3] GRH, [4] SE, [5] AckReq, [7:6] PSN mode:
                         * 0 the expected one (responses: the oldest
                         * unacknowledged), 1 expected + psn_delta
                         * (responses: the first PSN of outstanding WQE
                         * psn_delta[2:0], + psn_delta[6:3]), 2 expected - 1
                         * (responses: the newest sent), 3 psn_raw */
    uint8_t opsel;      /* < 0xc0: fz_opcodes[opsel % n]; else opraw */
    uint8_t opraw;
    int8_t psn_delta;
    uint32_t psn_raw;
    uint8_t keysel;     /* FzKey, mod K__MAX */
    uint8_t key;        /* [1:0] VA: 0 start + va_off, 1 end - va_off,
                         * 2 raw (raw32 << 12 | va_off), 3 start + 16 va_off;
                         * [4:2] DMA length: 0 right for the opcode, 1 raw32,
                         * 2 zero, 3 2^31 + 1, 4 payload + MTU, 5 payload - 1,
                         * 6 to the end of the MR, 7 one byte past it;
                         * [7:5] the LRH VL's bits [2:0] (ext [7]: [3]) */
    uint8_t mut;        /* FZ_MUT_* */
    uint8_t mut2;       /* FZ_MUT2_* */
    uint8_t syndrome;   /* AETH */
    uint16_t plen;      /* >= 0x8000: right for the opcode (bits [14:0] pick
                         * the size of a LAST/ONLY); else raw */
    uint16_t va_off;
    uint32_t raw32;
    uint8_t fill;       /* payload byte pattern */
    uint8_t ext;        /* [0] wrong Q_Key, [1] IETH names MW type 2 else
                         * M_RW, [2] SLID of another port, [3] our own LID
                         * as SLID, [5:4] DLID + 0..3 (LMC path bits),
                         * [6] the XRCETH names raw32 else the XRC SRQ,
                         * [7] VL bit 3.  The VL is 0 (QP0: 15) xor those
                         * four bits: data VLs 0-14 each have their own
                         * credits (VL0-3 the port's, 4-14 rx_drop_vl) */
} FzPktRec;

#define FZ_MUT_LVER         0x01
#define FZ_MUT_LNH          0x02
#define FZ_MUT_PKTLEN       0x04
#define FZ_MUT_DLID         0x08
#define FZ_MUT_SLID         0x10
#define FZ_MUT_TVER         0x20
#define FZ_MUT_PKEY         0x40
#define FZ_MUT_PAD          0x80
#define FZ_MUT2_GRH_VER     0x01
#define FZ_MUT2_GRH_NXT     0x02
#define FZ_MUT2_GRH_LEN     0x04
#define FZ_MUT2_GRH_DGID    0x08
#define FZ_MUT2_ODD         0x10    /* frame length not a multiple of 4 */
#define FZ_MUT2_TRUNC       0x20    /* cut the packet short, lengths agree */
#define FZ_MUT2_PKEY_LIM    0x40    /* limited-member P_Key (accepted) */
#define FZ_MUT2_MIG         0x80

static uint32_t fz_rkey_of(FzKey k, uint32_t raw)
{
    switch (k) {
    case K_MW2:
        return fz.mw2;
    case K_MW1:
        return fz.mw1;
    case K_STALE:
        return fz.mr[M_RW].key ^ 0x40;
    case K_RAW:
        return raw;
    case K_FR:
        return fz.fr;
    default:
        return fz.mr[k - K_MR].key;
    }
}

/* Where the memory a key names starts, and how long it is. */
static uint64_t fz_base_of(FzKey k, uint64_t *len)
{
    const FzMr *m = &fz.mr[k < K_MW2 ? k - K_MR : M_RW];

    if (k == K_MW2 || k == K_MW1) {
        *len = 0x1000;              /* where fz_bind() put the windows */
        return fz.mr[M_RW].iova;
    }
    if (k == K_FR) {
        *len = 3 * PIB_PAGE_SIZE;   /* the most a REG_MR maps there */
        return FZ_FR_IOVA;
    }
    *len = m->flags ? FZ_RAM_SIZE : m->len;
    return m->flags ? 0 : m->iova;
}

/* PSN of a response: relative to what the requester has outstanding. */
static uint32_t fz_resp_psn(PibQp *qp, uint8_t mode, int8_t delta)
{
    uint32_t idx;

    switch (mode) {
    case 1:
        idx = qp->sq.ci + (delta & 7);
        if (idx - qp->sq.ci < qp->req.wqe_max - qp->sq.ci) {
            return qp->meta[idx & (qp->meta_size - 1)].first_psn +
                   ((delta >> 3) & 15);
        }
        return qp->comp.psn + delta;
    case 2:
        return qp->req.psn - 1;
    default:
        return qp->comp.psn;
    }
}

/* Build the frame for a record into fz.last_frame. */
static void fz_pkt_build(const FzPktRec *r)
{
    uint8_t *f = fz.last_frame, *b = f + PIB_LINK_HDR_LEN, *e;
    FzTarget t = r->target & 7;
    PibQp *qp = t < T__MAX ? fz_pibqp(t) : NULL;
    uint8_t opcode = r->opsel < 0xc0 ?
                     fz_opcodes[r->opsel % ARRAY_SIZE(fz_opcodes)] : r->opraw;
    const PibOpInfo *oi = pib_op_info(opcode);
    uint32_t mask = oi ? oi->mask : PIB_OPM_PAYLOAD;
    uint32_t mtu = pib_mtu_bytes(fz.mtu), psn, dqpn, paylen, dmalen, len;
    uint32_t pad, hdr, plen = le16_to_cpu(r->plen), rkey;
    uint64_t va, base, blen;
    uint16_t slid;
    bool grh = r->target & 8, resp = mask & PIB_OPM_RESP;
    uint8_t gid[16];

    /* Destination QP and PSN; an XRC request goes to the XRC target */
    dqpn = t < T__MAX ? (fz.qp[t].qpn ? fz.qp[t].qpn : fz.qp[t].old_qpn) :
           t == 5 ? le32_to_cpu(r->raw32) :
           t == 6 ? PIB_QPN_LIMIT - 1 : 0;
    if ((mask & PIB_OPM_XRCETH) && t != 5) {
        dqpn = fz.xtgt.qpn;
        qp = pib_qp_lookup(fz.s, dqpn);
    }
    if (r->target >> 6 == 3) {
        psn = le32_to_cpu(r->psn_raw);
    } else if (qp && resp) {
        psn = fz_resp_psn(qp, r->target >> 6, r->psn_delta);
    } else {
        psn = qp ? qp->resp.psn : 0;
        psn += r->target >> 6 == 1 ? r->psn_delta :
               r->target >> 6 == 2 ? -1 : 0;
    }

    /* Payload: what the opcode wants, unless the record says otherwise */
    if (plen & 0x8000) {
        paylen = !(mask & PIB_OPM_PAYLOAD) ? 0 :
                 !(mask & PIB_OPM_LAST) ? mtu : (plen & 0x7fff) % mtu + 1;
    } else {
        paylen = plen;
    }
    paylen = MIN(paylen, PIB_LINK_MAX_PAYLOAD);

    /* RETH / AtomicETH */
    rkey = fz_rkey_of(r->keysel % K__MAX, le32_to_cpu(r->raw32));
    base = fz_base_of(r->keysel % K__MAX, &blen);
    switch (r->key & 3) {
    case 0:
        va = base + le16_to_cpu(r->va_off);
        break;
    case 1:
        va = base + blen - le16_to_cpu(r->va_off);
        break;
    case 2:
        va = (uint64_t)le32_to_cpu(r->raw32) << 12 | le16_to_cpu(r->va_off);
        break;
    default:
        va = base + 16 * (uint64_t)le16_to_cpu(r->va_off);
        break;
    }
    if (mask & PIB_OPM_ATMETH && (r->key & 3) != 2) {
        va &= ~7ull;
    }
    switch ((r->key >> 2) & 7) {
    case 1:
        dmalen = le32_to_cpu(r->raw32);
        break;
    case 2:
        dmalen = 0;
        break;
    case 3:
        dmalen = 0x80000001u;
        break;
    case 4:
        dmalen = paylen + mtu;
        break;
    case 5:
        dmalen = paylen - 1;
        break;
    case 6:
        dmalen = base + blen - va;
        break;
    case 7:
        dmalen = base + blen - va + 1;
        break;
    default:
        /*
         * READ: plen's bits.  WRITE ONLY: the payload.  WRITE FIRST: one MTU
         * more than a LAST with the same plen carries, so FIRST, LAST is a
         * valid message.
         */
        dmalen = (mask & PIB_OPM_READ) ? (plen & 0x7fff) % (4 * mtu) + 1 :
                 (mask & PIB_OPM_LAST) ? paylen :
                 paylen + (plen & 0x7fff) % mtu + 1;
        break;
    }

    pad = -paylen & 3;
    if (r->mut2 & FZ_MUT2_ODD) {
        pad = 0;
    }
    hdr = sizeof(struct pib_lrh) + (grh ? sizeof(struct pib_grh) : 0) +
          sizeof(struct pib_bth);
    e = b + hdr;

    /* Extension headers, in the IBTA order */
    if (mask & PIB_OPM_XRCETH) {
        stl_be_p(e, r->ext & 0x40 ? le32_to_cpu(r->raw32) : fz.xsrqn);
        e += 4;
    }
    if (mask & PIB_OPM_DETH) {
        uint32_t qkey = t == T_GSI ? PIB_GSI_QKEY : FZ_QKEY;

        stl_be_p(e, r->ext & 1 ? le32_to_cpu(r->raw32) : qkey);
        stl_be_p(e + 4, FZ_PEER_QPN);
        e += 8;
    }
    if (mask & PIB_OPM_RETH) {
        stq_be_p(e, va);
        stl_be_p(e + 8, rkey);
        stl_be_p(e + 12, dmalen);
        e += 16;
    }
    if (mask & PIB_OPM_ATMETH) {
        stq_be_p(e, va);
        stl_be_p(e + 8, rkey);
        stq_be_p(e + 12, r->fill);          /* swap / add */
        stq_be_p(e + 20, r->va_off);        /* compare */
        e += 28;
    }
    if (mask & PIB_OPM_AETH) {
        stl_be_p(e, (uint32_t)r->syndrome << 24 | (r->fill * 0x10101u));
        e += 4;
    }
    if (mask & PIB_OPM_ATMACK) {
        stq_be_p(e, 0x1122334455667788ull ^ r->fill);
        e += 8;
    }
    if (mask & PIB_OPM_IMMDT) {
        stl_be_p(e, 0xcafe0000u | r->fill);
        e += 4;
    }
    if (mask & PIB_OPM_IETH) {
        stl_be_p(e, r->ext & 2 ? fz.mw2 : fz.mr[M_RW].key);
        e += 4;
    }
    memset(e, r->fill, paylen);
    memset(e + paylen, 0, pad);
    len = (e - b) + paylen + pad;
    if (r->mut2 & FZ_MUT2_TRUNC) {
        len = MIN(len, hdr + (r->fill & 31));
    }
    len = MIN(len, (uint32_t)PIB_LINK_MAX_PAYLOAD);

    /* LRH */
    slid = qp && qp->av.dlid ? qp->av.dlid : FZ_PEER_LID;
    if (r->ext & 4) {
        slid = FZ_PEER_LID + 1;
    } else if (r->ext & 8) {
        slid = FZ_LID;
    }
    b[0] = ((((r->key >> 5) | (r->ext >> 7) << 3) ^ (t == 7 ? 15 : 0)) << 4) |
           ((r->mut & FZ_MUT_LVER) ? 1 : 0);
    b[1] = (grh ? PIB_LNH_IBA_GLOBAL : PIB_LNH_IBA_LOCAL) ^
           ((r->mut & FZ_MUT_LNH) ? 2 : 0);
    stw_be_p(b + 2, (r->mut & FZ_MUT_DLID) ? le32_to_cpu(r->raw32) :
                    fz.s->port.mgmt.lid + ((r->ext >> 4) & 3));
    stw_be_p(b + 4, (len / 4 + !!(r->mut & FZ_MUT_PKTLEN)) & 0x7ff);
    stw_be_p(b + 6, (r->mut & FZ_MUT_SLID) ? le32_to_cpu(r->raw32) >> 16 :
                    slid);
    e = b + sizeof(struct pib_lrh);
    if (grh) {
        stl_be_p(e, ((r->mut2 & FZ_MUT2_GRH_VER) ? 4u : 6u) << 28);
        stw_be_p(e + 4, len - 8 - 40 + !!(r->mut2 & FZ_MUT2_GRH_LEN));
        e[6] = (r->mut2 & FZ_MUT2_GRH_NXT) ? 0x1c : 0x1b;
        e[7] = 64;
        stq_be_p(gid, PIB_DEFAULT_GID_PREFIX);
        stq_be_p(gid + 8, FZ_PEER_GUID + 1);
        memcpy(e + 8, gid, 16);             /* SGID: the peer's */
        stq_be_p(gid + 8, fz.s->node_guid + 1);
        if (r->mut2 & FZ_MUT2_GRH_DGID) {
            gid[15] ^= 1;
        }
        memcpy(e + 24, gid, 16);
        e += 40;
    }
    /* BTH */
    e[0] = opcode;
    e[1] = ((r->target & 0x10) ? PIB_BTH_SE : 0) |
           ((r->mut2 & FZ_MUT2_MIG) ? PIB_BTH_MIG : 0) |
           (((pad + !!(r->mut & FZ_MUT_PAD)) & 3) << PIB_BTH_PAD_SHIFT) |
           ((r->mut & FZ_MUT_TVER) ? 1 : 0);
    stw_be_p(e + 2, (r->mut & FZ_MUT_PKEY) ? 0x1234 :
                    (r->mut2 & FZ_MUT2_PKEY_LIM) ? 0x7fff : 0xffff);
    stl_be_p(e + 4, dqpn & PIB_QPN_MASK);
    stl_be_p(e + 8, (psn & PIB_PSN_MASK) |
                    ((r->target & 0x20) ? PIB_BTH_ACKREQ : 0));

    f[0] = PIB_LINK_MAGIC;
    f[1] = PIB_FRAME_PACKET;
    stw_be_p(f + 2, len);
    fz.last_len = PIB_LINK_HDR_LEN + len;
}

/* Feed bytes from the peer, reconnecting first if the link is down. */
static void fz_feed(const uint8_t *buf, size_t len)
{
    fz_link_up();
    fz_link_feed(buf, len);
}

/*
 * The driver's other actions on the device
 */

typedef struct QEMU_PACKED FzAdminRec {
    uint8_t sel;
    uint8_t target;
    uint16_t arg;
} FzAdminRec;

enum {
    FZ_ADM_QP_ERR, FZ_ADM_QP_RESET_RTS, FZ_ADM_QP_SQD, FZ_ADM_QP_SQD_RTS,
    FZ_ADM_DEREG_MR, FZ_ADM_REREG_MR, FZ_ADM_DESTROY_QP, FZ_ADM_DEALLOC_MW,
    FZ_ADM_QUERY_QP, FZ_ADM_COUNTERS, FZ_ADM_SET_LID, FZ_ADM_RESET,
    FZ_ADM_SRQ_LIMIT, FZ_ADM_BUSY, FZ_ADM_QP_ACCESS, FZ_ADM_BIND,
    FZ_ADM_QUERIES,
    FZ_ADM__MAX
};

static void fz_op_admin(const FzAdminRec *r)
{
    FzTarget t = r->target % T__MAX;
    FzQp *q = &fz.qp[t];
    uint16_t arg = le16_to_cpu(r->arg);
    struct pib_qp_attr a = { 0 };
    struct pib_admin_cmd cmd = { 0 };

    switch (r->sel % FZ_ADM__MAX) {
    case FZ_ADM_QP_ERR:
        fz_modify(q, PIB_QPS_ERR, 0, &a);
        break;
    case FZ_ADM_QP_RESET_RTS:
        if (fz_modify(q, PIB_QPS_RESET, 0, &a) == PIB_AQ_OK) {
            fz_qp_to_rts(q);
            fz_post_recv(t, 4, 0);
        }
        break;
    case FZ_ADM_QP_SQD:
        fz_modify(q, PIB_QPS_SQD, PIB_QP_EN_SQD_ASYNC_NOTIFY, &a);
        break;
    case FZ_ADM_QP_SQD_RTS:
        fz_modify(q, PIB_QPS_RTS, 0, &a);
        break;
    case FZ_ADM_DEREG_MR:
        if (fz_obj_cmd(PIB_CMD_DEREG_MR, fz.mr[arg % M__MAX].key) == PIB_AQ_OK) {
            fz.mr[arg % M__MAX].registered = false;
        }
        break;
    case FZ_ADM_REREG_MR:
        if (!fz.mr[arg % M__MAX].registered) {
            fz_reg_mr(arg % M__MAX);
        }
        break;
    case FZ_ADM_DESTROY_QP:     /* or create it again: it gets a new QPN */
        if (q->qpn && fz_obj_cmd(PIB_CMD_DESTROY_QP, q->qpn) == PIB_AQ_OK) {
            q->old_qpn = q->qpn;
            q->qpn = 0;
        } else if (!q->qpn && fz_ready()) {
            fz_create_qp(t);
            if (fz.loopback && (t == T_RC || t == T_RC_SRQ)) {
                fz.qp[t ^ 1].dest_qpn = q->qpn;     /* only for new connections */
            }
            fz_qp_to_rts(q);
            fz_post_recv(t, 4, 0);
        }
        break;
    case FZ_ADM_DEALLOC_MW:
        fz_obj_cmd(PIB_CMD_DEALLOC_MW, arg & 1 ? fz.mw1 : fz.mw2);
        break;
    case FZ_ADM_QUERY_QP:
        cmd.opcode = PIB_CMD_QUERY_QP;
        cmd.resp_addr = cpu_to_le64(fz.resp);
        cmd.resp_len = cpu_to_le32(arg);
        cmd.in.obj.num = cpu_to_le32(q->qpn);
        fz_admin(&cmd, NULL, NULL);
        break;
    case FZ_ADM_COUNTERS:
        cmd.opcode = PIB_CMD_QUERY_COUNTERS;
        cmd.resp_addr = cpu_to_le64(fz.resp);
        cmd.resp_len = cpu_to_le32(4096);
        fz_admin(&cmd, NULL, NULL);
        break;
    case FZ_ADM_SET_LID:
        cmd.opcode = PIB_CMD_SET_PORT;
        cmd.in.set_port.port_num = PIB_PORT_NUM;
        cmd.in.set_port.mask = cpu_to_le32(PIB_SET_PORT_LID);
        cmd.in.set_port.lid = cpu_to_le16(arg % 4);
        cmd.in.set_port.lmc = (arg >> 8) & 7;
        fz_admin(&cmd, NULL, NULL);
        break;
    case FZ_ADM_RESET:
        /* Function reset with packets, timers and work in flight, then a
         * driver that starts over. */
        reg_write(PIB_REG_CONTROL, PIB_CTRL_RESET);
        fz_run_bhs();
        fz_enable();
        fz_objects();
        break;
    case FZ_ADM_SRQ_LIMIT:
        cmd.opcode = PIB_CMD_MODIFY_SRQ;
        cmd.in.modify_srq.srqn = cpu_to_le32(fz.srqn);
        cmd.in.modify_srq.attr_mask = cpu_to_le32(PIB_SRQ_ATTR_LIMIT);
        cmd.in.modify_srq.limit = cpu_to_le32(arg % FZ_SRQ_DEPTH);
        fz_admin(&cmd, NULL, NULL);
        break;
    case FZ_ADM_BUSY:   /* objects in use: BUSY, nothing changes */
        fz_obj_cmd(PIB_CMD_DESTROY_CQ, fz.rcq.cqn);
        fz_obj_cmd(PIB_CMD_DESTROY_PD, fz.pd);
        fz_obj_cmd(PIB_CMD_DESTROY_SRQ, fz.srqn);
        break;
    case FZ_ADM_QP_ACCESS:
        a.qp_access_flags = cpu_to_le32(arg & 0x1f);
        a.min_rnr_timer = (arg >> 8) & 31;
        fz_modify(q, PIB_QPS_RTS, PIB_QP_ACCESS_FLAGS |
                  (q->type == PIB_QPT_RC ? PIB_QP_MIN_RNR_TIMER : 0), &a);
        break;
    case FZ_ADM_BIND:
        fz_bind(arg & 1);
        break;
    case FZ_ADM_QUERIES:    /* what a driver asks at probe time */
        cmd.resp_addr = cpu_to_le64(fz.resp);
        cmd.resp_len = cpu_to_le32(arg);
        cmd.in.port.port_num = PIB_PORT_NUM + (r->target >> 7);
        cmd.in.port.index = cpu_to_le32((r->target >> 6) & 1);
        for (cmd.opcode = PIB_CMD_QUERY_DEVICE; cmd.opcode <= PIB_CMD_NOP;
             cmd.opcode++) {
            if (cmd.opcode != PIB_CMD_SET_PORT &&
                cmd.opcode != PIB_CMD_DEALLOC_UAR) {
                fz_admin(&cmd, NULL, NULL);
            }
        }
        cmd.opcode = PIB_CMD_QUERY_SRQ;
        cmd.in.obj.num = cpu_to_le32(fz.srqn);
        fz_admin(&cmd, NULL, NULL);
        break;
    }
}

/*
 * A MAD from the input through MAD_IFC, as any SM or performance manager could send one.
 * sel [2:0] chooses how much of the header to keep sane (0: none; else a class of the
 * firmware's agents, SMA, PMA or CC, with its versions), so that the fuzzer reaches the
 * agents' attribute handlers as well as their checks.  The oracle: the
 * command is accepted, the answer is one of the three, and a response answers the request
 * (the same class and TID, a GetResp).
 */
static void fz_op_mad(uint8_t sel, const uint8_t *raw)
{
    static const uint8_t classes[] = {
        PIB_MGMT_CLASS_SUBN_LID, PIB_MGMT_CLASS_SUBN_DR, PIB_MGMT_CLASS_PERF,
        PIB_MGMT_CLASS_CC,
    };
    uint8_t mad[PIB_MAD_SIZE], out[PIB_MAD_SIZE];
    uint32_t result = 0;
    uint8_t st;

    memcpy(mad, raw, sizeof(mad));
    if (sel & 7) {
        mad[0] = PIB_MAD_BASE_VERSION;
        mad[1] = classes[((sel & 7) - 1) % ARRAY_SIZE(classes)];
        mad[2] = mad[1] == PIB_MGMT_CLASS_CC ? PIB_CC_CLASS_VERSION : 1;
        mad[3] &= 0x7f;                 /* a request */
    }
    st = fz_mad_ifc(mad, &result, out);
    if (st == 0xff || st == 0xfe) {
        return;                         /* not READY, or dead: other oracles judge */
    }
    if (st != PIB_AQ_OK || (result & ~(PIB_MAD_IFC_REPLY | PIB_MAD_IFC_CONSUMED))) {
        fz_bug("MAD_IFC: status 0x%x result 0x%x", st, result);
    }
    if ((result & PIB_MAD_IFC_REPLY) &&
        (out[1] != mad[1] || out[3] != PIB_MAD_METHOD_GET_RESP ||
         memcmp(out + 8, mad + 8, 8))) {
        fz_bug("MAD_IFC: a response that does not answer the request "
               "(class 0x%x method 0x%x)", out[1], out[3]);
    }
}

/* Consume completions, arm, or ring a CQ doorbell that lies. */
static void fz_op_cq(uint8_t sel)
{
    FzCq *c = sel & 1 ? &fz.rcq : &fz.scq;
    PibCq *cq = pib_cq_lookup(fz.s, c->cqn);
    uint32_t ci, flags = 0;

    if (!cq) {
        return;
    }
    switch ((sel >> 1) & 3) {
    case 0:
        ci = cq->pi;                /* consumed everything */
        break;
    case 1:
        ci = cq->ci;                /* nothing */
        break;
    case 2:
        ci = cq->pi + 1 + (sel >> 5);   /* past the producer: refused */
        break;
    default:
        ci = cq->pi - (sel >> 4);
        break;
    }
    stl_le_p(fz_ram_ptr(c->record, 4), ci);
    if (sel & 8) {
        flags |= PIB_DB_CQ_ARM;
    }
    if (sel & 16) {
        flags |= PIB_DB_CQ_SOLICITED;
    }
    uar_write(PIB_UAR_CQ_DB, c->cqn | flags, ci);
    /* the driver also returns the event queue entries it has read */
    reg_write(PIB_REG_CEQ_DB, fz.s->ceq.pi);
    reg_write(PIB_REG_AEQ_DB, fz.s->aeq.pi);
}

/* A raw MMIO access to BAR0 (not CONTROL or the ring setup) or BAR2. */
typedef struct QEMU_PACKED FzMmioRec {
    uint8_t sel;            /* [0] BAR2, [1] read, [3:2] size 1/2/4/8 */
    uint8_t page;           /* BAR2 page */
    uint16_t off;
    uint64_t val;
} FzMmioRec;

static void fz_op_mmio(const FzMmioRec *r)
{
    static const unsigned sizes[4] = { 1, 2, 4, 8 };
    unsigned size = sizes[(r->sel >> 2) & 3];
    uint64_t off = le16_to_cpu(r->off) & 0xfff;

    if (r->sel & 1) {
        off += (uint64_t)r->page * PIB_UAR_PAGE_SIZE;
        if (r->sel & 2) {
            fz_mmio_read(&fz_bar_uar, fz_dev(), off, size);
        } else {
            fz_mmio_write(&fz_bar_uar, fz_dev(), off, le64_to_cpu(r->val), size);
        }
        return;
    }
    if (r->sel & 2) {
        fz_mmio_read(&fz_bar_regs, fz_dev(), off, size);
        return;
    }
    /* The queue configuration is the setup's; CONTROL has its own op. */
    if (off >= PIB_REG_CONTROL && off < PIB_REG_AEQ_LOST &&
        off != PIB_REG_AQ_DB && off != PIB_REG_AEQ_DB) {
        return;
    }
    if (off >= PIB_REG_CEQ_DEPTH && off < PIB_REG_CEQ_DB) {
        return;
    }
    fz_mmio_write(&fz_bar_regs, fz_dev(), off, le64_to_cpu(r->val), size);
}

/*
 * Error injection, as an operator would arm it with qom-set at any moment.
 */
typedef struct QEMU_PACKED FzInjectRec {
    uint8_t prop;           /* which property (mod the number registered) */
    uint8_t kind;           /* string properties: what to write; [7] read */
    uint16_t a;
    uint32_t b;
} FzInjectRec;

static void fz_op_inject(const FzInjectRec *r)
{
    static const char *const words[] = {
        "", "RC_ACKNOWLEDGE", "RC_SEND_ONLY", "rc_rdma_read_response_only",
        "RETRY_EXC_ERR", "17", "0x11", "-1", "4294967296", "2:3", "::",
        "SUCCESS", "UD_SEND_ONLY", "256",
    };
    const FzProp *p;
    char *str;
    uint32_t b = le32_to_cpu(r->b), a = le16_to_cpu(r->a);

    if (!fz_n_props) {
        return;
    }
    p = &fz_props[r->prop % fz_n_props];
    if (r->kind & 0x80) {
        fz_prop_get(OBJECT(fz.s), p);
        return;
    }
    switch (r->kind & 3) {
    case 0:     /* "QPN:INDEX:STATUS" for one of our QPs */
        str = g_strdup_printf("%u:%u:%u", fz.qp[a % T__MAX].qpn, a >> 3,
                              b % 24);
        break;
    case 1:
        str = g_strdup(words[b % ARRAY_SIZE(words)]);
        break;
    case 2:
        str = g_strdup_printf("%u", b & 0xff);
        break;
    default:
        str = g_strdup_printf("%u:%u:%s", b & 0xffffff, a,
                              words[r->kind % ARRAY_SIZE(words)]);
        break;
    }
    /* uint32 properties: small counts most of the time */
    fz_prop_set(OBJECT(fz.s), p, str, (r->kind & 4) ? b : b % 8);
    g_free(str);
}

/* The peer's side of the byte stream. */
static void fz_op_link(uint8_t sel)
{
    uint8_t f[PIB_LINK_HDR_LEN + 40] = { PIB_LINK_MAGIC, PIB_FRAME_HELLO };

    switch (sel & 7) {
    case 0:             /* the peer reconnects */
        fz_link_close();
        fz_link_up();
        break;
    case 1:             /* HELLO again, with the link up; it changed its mind
                         * about [3] offering credits, [4] the doorbell,
                         * [5] asking for credits, [6] being a switch port */
        fz_feed(NULL, 0);
        fz_peer_hello(PIB_LINK_PROTO_VERSION,
                      ((sel & 0x08) ? PIB_HELLO_F_CREDITS : 0) |
                      ((sel & 0x10) ? PIB_HELLO_F_DOORBELL : 0) |
                      ((sel & 0x20) ? PIB_HELLO_F_CREDITS_ON : 0) |
                      ((sel & 0x40) ? PIB_HELLO_F_SWITCH : 0));
        break;
    case 2:             /* a peer of another protocol version */
        fz_feed(NULL, 0);
        fz_peer_hello(PIB_LINK_PROTO_VERSION + (sel >> 3), 0);
        break;
    case 3:             /* the peer goes away: the chardev sees it, or */
        if (sel & 0x18) {   /* the device reads end of stream, or an error */
            fz_link_eof(sel & 0x10);
        } else {
            fz_link_close();
        }
        break;
    case 4:             /* reconnects, but says nothing yet (TRAINING) */
        fz_link_close();
        fz_link_open();
        break;
    case 5:             /* a HELLO too short, or longer (a newer peer) */
    case 6:
        f[3] = (sel & 7) == 5 ? (sel >> 3) % 24 : 24 + (sel >> 3) % 16;
        stl_be_p(f + PIB_LINK_HDR_LEN, PIB_LINK_PROTO_VERSION);
        if (!fz_link.connected) {
            fz_link_open();
        }
        fz_link_feed(f, PIB_LINK_HDR_LEN + f[3]);
        break;
    default:            /* the socket drains */
        fz_link_writable();
        break;
    }
}

/*
 * A FLOW frame from the peer (include/pib_link.h, "Credits").  Its values are
 * relative to the device's own state unless the record says otherwise, so that
 * honest grants are as easy to find as lies: kind 0 with fccl 2048 and fctbs 0
 * is what a peer with an empty buffer sends (fz_peer_grant).
 */
typedef struct QEMU_PACKED FzFlowRec {
    uint8_t sel;        /* [3:0] entries - 1 (16: one more than a FLOW frame
                         * holds, framing is lost); [5:4] kind: 0 relative (FCCL =
                         * the device's FCTBS on the entry's VL + fccl, FCTBS =
                         * its ABR + fctbs), 1 absolute, 2 relative in a frame
                         * whose header says len bytes (0, not whole entries,
                         * more than 15: framing is lost), 3 random words
                         * seeded by fccl and fctbs; [6] entry i has Op op + i,
                         * [7] every entry has the first one's VL */
    uint8_t vl_op;      /* [3:0] the first entry's VL (entry i: VL + i, mod
                         * 16: VL15 entries too), [7:4] Op (0 Normal, 1 Init,
                         * others unknown) */
    uint16_t fccl;
    uint16_t fctbs;
    uint8_t len;        /* kind 2: the frame's length */
    uint8_t step;       /* entry i's FCCL grows by i * step */
} FzFlowRec;

static void fz_op_flow(const FzFlowRec *r)
{
    struct pib_link_fc fc[16];
    unsigned n = (r->sel & 15) + 1, kind = (r->sel >> 4) & 3, i, vl, op;
    uint32_t x = (uint32_t)le16_to_cpu(r->fccl) << 16 | le16_to_cpu(r->fctbs) | 1;
    uint16_t cl, tbs;

    fz_feed(NULL, 0);                   /* reconnect first, if the link is down */
    for (i = 0; i < n; i++) {
        vl = ((r->vl_op & 15) + ((r->sel & 0x80) ? 0 : i)) & 15;
        op = ((r->vl_op >> 4) + ((r->sel & 0x40) ? i : 0)) & 15;
        cl = le16_to_cpu(r->fccl) + i * r->step;
        tbs = le16_to_cpu(r->fctbs);
        if (kind == 3) {                /* xorshift32 */
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            memcpy(&fc[i], &x, sizeof(x));
            continue;
        }
        if (kind != 1 && vl < PIB_LINK_DATA_VLS) {
            cl += fz.s->link.vl[vl].fctbs;
            tbs += fz.s->link.vl[vl].abr;
        }
        stw_be_p(&fc[i].op_fctbs_be, op << 12 | (tbs & (PIB_LINK_FC_MOD - 1)));
        stw_be_p(&fc[i].vl_fccl_be, vl << 12 | (cl & (PIB_LINK_FC_MOD - 1)));
    }
    fz_peer_flow(fc, n, kind == 2 ? r->len : n * sizeof(fc[0]));
}

/*
 * The ops
 */

typedef enum FzOp {
    FZ_OP_RAW,          /* u16 len, bytes: the link byte stream as is */
    FZ_OP_PACKET,       /* u16 len, bytes: one PACKET frame of that length */
    FZ_OP_STRUCT,       /* FzPktRec */
    FZ_OP_BURST,        /* u8 count, i8 PSN step: the last packet again */
    FZ_OP_TICK,         /* u8: [7] to the next timer, else 2^[5:0] ns */
    FZ_OP_RECV,         /* u8 target, u8 [2:0] count - 1, [5:3] kind */
    FZ_OP_SEND,         /* FzSendRec */
    FZ_OP_CQ,           /* u8 */
    FZ_OP_ADMIN,        /* FzAdminRec */
    FZ_OP_LINK,         /* u8: 0 drop and reconnect, 1 HELLO again,
                         * 2 HELLO of another version, 3 drop, ...
                         * (fz_op_link) */
    FZ_OP_MMIO,         /* FzMmioRec */
    FZ_OP_INJECT,       /* FzInjectRec */
    FZ_OP_MAD,          /* u8 sel, 256 bytes: a MAD through MAD_IFC */
    FZ_OP_FLOW,         /* FzFlowRec: a FLOW frame (credits) */
    FZ_OP__MAX
} FzOp;

#define FZ_OP_NORUN     0x80    /* do not run the bottom halves after the op */

static void fz_op(FzIn *in)
{
    uint8_t op = in_u8(in);
    uint8_t buf[FZ_FRAME_MAX];
    uint32_t len, i, n;
    FzPktRec pr;
    FzSendRec sr;
    FzAdminRec ar;
    FzMmioRec mr;
    FzInjectRec ir;
    FzFlowRec fr;
    uint8_t b0, b1;
    int8_t step;

    switch ((op & 0x1f) % FZ_OP__MAX) {
    case FZ_OP_RAW:
        len = MIN(in_u16(in), (uint16_t)sizeof(buf));
        in_read(in, buf, len);
        fz_feed(buf, len);
        break;
    case FZ_OP_PACKET:
        len = MIN(in_u16(in) & 0x1fff, (uint32_t)PIB_LINK_MAX_PAYLOAD + 16);
        buf[0] = PIB_LINK_MAGIC;
        buf[1] = PIB_FRAME_PACKET;
        stw_be_p(buf + 2, len);
        in_read(in, buf + PIB_LINK_HDR_LEN, len);
        fz_feed(buf, PIB_LINK_HDR_LEN + len);
        break;
    case FZ_OP_STRUCT:
        in_read(in, &pr, sizeof(pr));
        fz_pkt_build(&pr);
        fz_feed(fz.last_frame, fz.last_len);
        break;
    case FZ_OP_BURST:
        n = in_u8(in);
        step = (int8_t)in_u8(in);
        for (i = 0; i < n && fz.last_len >= PIB_LINK_HDR_LEN + 20; i++) {
            /* PSN is the last 3 bytes of the BTH, wherever the BTH is */
            uint8_t *bth = fz.last_frame + PIB_LINK_HDR_LEN + 8 +
                           ((fz.last_frame[PIB_LINK_HDR_LEN + 1] & 3) == 3 ?
                            40 : 0);
            uint32_t psn;

            if (bth + 12 > fz.last_frame + fz.last_len) {
                break;
            }
            psn = ldl_be_p(bth + 8);
            stl_be_p(bth + 8, (psn & ~PIB_PSN_MASK) |
                              ((psn + step) & PIB_PSN_MASK));
            fz_feed(fz.last_frame, fz.last_len);
        }
        break;
    case FZ_OP_TICK:
        b0 = in_u8(in);
        if (b0 & 0x80) {
            int64_t next = fz_next_timer();

            fz_clock_advance(next < 0 ? 0 : MAX(next - fz_clock_ns, 0));
        } else {
            fz_clock_advance(1ll << (b0 & 31));
        }
        fz_link_writable();
        break;
    case FZ_OP_RECV:
        b0 = in_u8(in);
        b1 = in_u8(in);
        fz_post_recv(b0 % (T__MAX + 1), (b1 & 7) + 1, (b1 >> 3) & 7);
        break;
    case FZ_OP_SEND:
        in_read(in, &sr, sizeof(sr));
        fz_post_send(&sr);
        break;
    case FZ_OP_CQ:
        fz_op_cq(in_u8(in));
        break;
    case FZ_OP_ADMIN:
        in_read(in, &ar, sizeof(ar));
        fz_op_admin(&ar);
        break;
    case FZ_OP_LINK:
        fz_op_link(in_u8(in));
        break;
    case FZ_OP_MMIO:
        in_read(in, &mr, sizeof(mr));
        fz_op_mmio(&mr);
        break;
    case FZ_OP_INJECT:
        in_read(in, &ir, sizeof(ir));
        fz_op_inject(&ir);
        break;
    case FZ_OP_MAD:
        b0 = in_u8(in);
        in_read(in, buf, PIB_MAD_SIZE);
        fz_op_mad(b0, buf);
        break;
    case FZ_OP_FLOW:
        in_read(in, &fr, sizeof(fr));
        fz_op_flow(&fr);
        break;
    }
    if (!(op & FZ_OP_NORUN)) {
        fz_run_bhs();
        fz_credit_topup();      /* a peer that grants as it consumes, if configured */
    }
    if (fz.cfg.flags3 & FZ_CFG3_NO_LID) {
        fz_sm_sweep();
    }
}

/*
 * The seed corpus (PIB_FUZZ_GEN=dir): one input per kind of packet, valid,
 * built against the device as fz_setup() leaves it.
 */

typedef struct FzSeed {
    uint8_t b[8192];
    size_t n;
} FzSeed;

static void seed_put(FzSeed *sd, const void *p, size_t n)
{
    if (sd->n + n > sizeof(sd->b)) {
        fz_bug("harness: seed too large");
    }
    memcpy(sd->b + sd->n, p, n);
    sd->n += n;
}

static void seed_op(FzSeed *sd, uint8_t op, const void *arg, size_t n)
{
    seed_put(sd, &op, 1);
    seed_put(sd, arg, n);
}

static FzPktRec seed_pkt(FzTarget t, uint8_t opcode, FzKey key, uint16_t plen)
{
    FzPktRec r = { 0 };
    unsigned i;

    r.target = t | 0x20;                    /* AckReq */
    r.opsel = 0xc0;                         /* opraw, unless in fz_opcodes */
    r.opraw = opcode;
    for (i = 0; i < ARRAY_SIZE(fz_opcodes); i++) {
        if (fz_opcodes[i] == opcode) {
            r.opsel = i;
        }
    }
    r.keysel = key;
    r.plen = cpu_to_le16(plen);
    r.va_off = cpu_to_le16(0x40);
    r.syndrome = PIB_AETH_ACK | 0x1f;
    r.fill = 0x5a;
    return r;
}

static void seed_write(const char *dir, const char *name, FzSeed *sd)
{
    char *path = g_strdup_printf("%s/%s", dir, name);

    if (!g_file_set_contents(path, (const char *)sd->b, sd->n, NULL)) {
        fz_bug("cannot write %s", path);
    }
    g_free(path);
}

/* One seed: config, then structured packets; plus the same as raw PACKETs. */
static void seed_emit(const char *dir, const char *name, FzConfig cfg,
                      const FzPktRec *pkts, unsigned n, uint8_t tick)
{
    FzSeed sd = { .n = 0 };
    char *raw_name;
    unsigned i;

    seed_put(&sd, &cfg, sizeof(cfg));
    for (i = 0; i < n; i++) {
        seed_op(&sd, FZ_OP_STRUCT, &pkts[i], sizeof(pkts[i]));
    }
    if (tick) {
        seed_op(&sd, FZ_OP_TICK, &tick, 1);
    }
    seed_write(dir, name, &sd);

    /* The raw form, built against a device in the same state. */
    fz_setup(cfg);
    sd.n = 0;
    seed_put(&sd, &cfg, sizeof(cfg));
    for (i = 0; i < n; i++) {
        uint16_t len;

        fz_pkt_build(&pkts[i]);
        len = cpu_to_le16(fz.last_len - PIB_LINK_HDR_LEN);
        seed_put(&sd, (uint8_t[]) { FZ_OP_PACKET }, 1);
        seed_put(&sd, &len, 2);
        seed_put(&sd, fz.last_frame + PIB_LINK_HDR_LEN,
                 fz.last_len - PIB_LINK_HDR_LEN);
        fz_feed(fz.last_frame, fz.last_len);
        fz_run_bhs();
    }
    if (tick) {
        seed_op(&sd, FZ_OP_TICK, &tick, 1);
    }
    fz_settle();
    fz_teardown();
    raw_name = g_strdup_printf("raw-%s", name);
    seed_write(dir, raw_name, &sd);
    g_free(raw_name);
}

/* The index of a QOM property in fz_props (registered by the first fz_setup). */
static uint8_t fz_prop_index(const char *name)
{
    unsigned i;

    for (i = 0; i < fz_n_props; i++) {
        if (!strcmp(fz_props[i].name, name)) {
            return i;
        }
    }
    fz_bug("harness: no QOM property %s", name);
}

/* A FLOW record: kind, entries, from VL vl with Op op; fccl, fctbs as the kind reads them. */
static FzFlowRec seed_flow(unsigned kind, unsigned n, unsigned vl, unsigned op,
                           uint16_t fccl, uint16_t fctbs)
{
    return (FzFlowRec) {
        .sel = (n - 1) | kind << 4, .vl_op = vl | op << 4,
        .fccl = cpu_to_le16(fccl), .fctbs = cpu_to_le16(fctbs),
    };
}

/*
 * Credits (FZ_CFG3_CREDITS): traffic on them, on several VLs, a peer that withholds them, FLOW
 * frames of bad lengths and lies, inject-credit-hold, a peer that changes its mind.
 */
static void fz_gen_credit_seeds(const char *dir)
{
    const FzConfig cr = { .flags = 2, .flags3 = FZ_CFG3_CREDITS };
    const FzConfig crw = { .flags = 2, .flags3 = FZ_CFG3_CREDITS | FZ_CFG3_WITHHOLD };
    const uint16_t right = 0x8000 | 100;
    const uint8_t next_timer = 0x90;
    FzFlowRec grant = seed_flow(0, PIB_LINK_DATA_VLS, 0, PIB_LINK_FC_OP_NORMAL,
                                PIB_LINK_VL_BLOCKS, 0);
    FzPktRec p[4];
    FzSeed sd;
    FzConfig cfg;
    unsigned v;

    /* A READ answered on credits; requests to the port on VLs 1, 3 (its) and 7, 14 (not) */
    p[0] = seed_pkt(T_RC, PIB_OP_RC_RDMA_READ_REQUEST, K_MR + M_RW, 0x8000 | 2000);
    seed_emit(dir, "credits-read", cr, p, 1, next_timer);
    for (v = 0; v < 4; v++) {
        static const uint8_t vls[] = { 1, 3, 7, 14 };

        p[v] = seed_pkt(v & 1 ? T_UD : T_UC, v & 1 ? PIB_OP_UD_SEND_ONLY : PIB_OP_UC_SEND_ONLY,
                        0, 0x8000 | 500);
        p[v].key = (vls[v] & 7) << 5;
        p[v].ext = (vls[v] & 8) << 4;
    }
    seed_emit(dir, "credits-vls", cr, p, 4, 0);

    /* The device sends on VL0-3: sends posted at setup, and on UC (VL2) and UD (VL wr_id % 4) */
    sd.n = 0;
    cfg = cr;
    cfg.flags |= FZ_CFG_POST_SENDS;
    seed_put(&sd, &cfg, sizeof(cfg));
    for (v = 0; v < 4; v++) {
        seed_op(&sd, FZ_OP_SEND, &(FzSendRec) { v & 1 ? T_UD : T_UC, PIB_WQE_SEND, 0, 0,
                                                 700, 0 }, sizeof(FzSendRec));
    }
    seed_op(&sd, FZ_OP_TICK, &next_timer, 1);
    seed_write(dir, "credits-tx-vls", &sd);

    /*
     * The peer withholds: a READ of all 320 KiB waits (PortXmitWait), then honest grants let
     * it through, a window at a time.
     */
    sd.n = 0;
    cfg = crw;
    cfg.flags = FZ_TX_EAGAIN << 4;
    seed_put(&sd, &cfg, sizeof(cfg));
    p[0] = seed_pkt(T_RC, PIB_OP_RC_RDMA_READ_REQUEST, K_MR + M_BIG, 0);
    p[0].key = 6 << 2;
    p[0].va_off = 0;
    seed_op(&sd, FZ_OP_STRUCT, &p[0], sizeof(p[0]));
    seed_op(&sd, FZ_OP_TICK, &next_timer, 1);
    for (v = 0; v < 4; v++) {
        seed_op(&sd, FZ_OP_FLOW, &grant, sizeof(grant));
        seed_put(&sd, (uint8_t[]) { FZ_OP_LINK, 7 }, 2);
    }
    seed_op(&sd, FZ_OP_TICK, &next_timer, 1);
    seed_write(dir, "credits-withheld", &sd);

    /* FLOW frames of 0, 6 and 64 bytes: framing lost, the peer dials again each time */
    sd.n = 0;
    seed_put(&sd, &cr, sizeof(cr));
    for (v = 0; v < 3; v++) {
        FzFlowRec f = seed_flow(2, PIB_LINK_DATA_VLS, 0, 0, PIB_LINK_VL_BLOCKS, 0);

        f.len = (uint8_t[]) { 0, 6, 64 }[v];
        seed_op(&sd, FZ_OP_FLOW, &f, sizeof(f));
    }
    p[0] = seed_pkt(T_RC, PIB_OP_RC_SEND_ONLY, 0, right);
    seed_op(&sd, FZ_OP_STRUCT, &p[0], sizeof(p[0]));
    seed_write(dir, "credits-flow-lengths", &sd);

    /*
     * Lies while a READ waits: an absolute FCCL, random words, VL15 entries, unknown Ops, one
     * VL over and over, FCTBS jumping ahead; then an honest grant.
     */
    sd.n = 0;
    seed_put(&sd, &crw, sizeof(crw));
    p[0] = seed_pkt(T_RC, PIB_OP_RC_RDMA_READ_REQUEST, K_MR + M_RW, 0x8000 | 3000);
    seed_op(&sd, FZ_OP_STRUCT, &p[0], sizeof(p[0]));
    {
        FzFlowRec lies[] = {
            seed_flow(1, PIB_LINK_DATA_VLS, 0, 0, 0xabc, 0x123),
            seed_flow(3, PIB_LINK_DATA_VLS, 0, 0, 0x1234, 0x5678),
            seed_flow(0, PIB_LINK_DATA_VLS, 15, 0, PIB_LINK_VL_BLOCKS, 0),
            seed_flow(0, PIB_LINK_DATA_VLS - 1, 0, 2, PIB_LINK_VL_BLOCKS, 0),
            seed_flow(0, PIB_LINK_DATA_VLS, 0, 0, 2100, 2000),
            seed_flow(0, 1, 0, PIB_LINK_FC_OP_INIT, 0xfff, 0),
        };

        lies[2].sel |= 0x80;            /* all VL15 */
        lies[3].sel |= 0xc0;            /* all VL0, Ops 2-15 */
        lies[4].step = 7;
        for (v = 0; v < ARRAY_SIZE(lies); v++) {
            seed_op(&sd, FZ_OP_FLOW, &lies[v], sizeof(lies[v]));
        }
    }
    seed_op(&sd, FZ_OP_TICK, &next_timer, 1);
    seed_op(&sd, FZ_OP_FLOW, &grant, sizeof(grant));
    seed_op(&sd, FZ_OP_TICK, &next_timer, 1);
    seed_write(dir, "credits-lies", &sd);

    /* inject-credit-hold on under the peer's traffic, then off again */
    sd.n = 0;
    seed_put(&sd, &cr, sizeof(cr));
    seed_op(&sd, FZ_OP_INJECT, &(FzInjectRec) { fz_prop_index("inject-credit-hold"), 2, 0,
                                                 cpu_to_le32(1) }, sizeof(FzInjectRec));
    p[0] = seed_pkt(T_UD, PIB_OP_UD_SEND_ONLY, 0, 0x8000 | 1000);
    seed_op(&sd, FZ_OP_STRUCT, &p[0], sizeof(p[0]));
    seed_put(&sd, (uint8_t[]) { FZ_OP_BURST, 40, 0 }, 3);
    seed_op(&sd, FZ_OP_INJECT, &(FzInjectRec) { fz_prop_index("inject-credit-hold"), 2, 0,
                                                 0 }, sizeof(FzInjectRec));
    seed_op(&sd, FZ_OP_TICK, &next_timer, 1);
    seed_write(dir, "credits-hold", &sd);

    /*
     * A peer that says HELLO again without credits, then with; a device that asks for them of
     * a peer that only offers; a device that has them off, with a switch port as its peer.
     */
    sd.n = 0;
    seed_put(&sd, &cr, sizeof(cr));
    seed_put(&sd, (uint8_t[]) { FZ_OP_LINK, 1 | 8 }, 2);
    p[0] = seed_pkt(T_RC, PIB_OP_RC_RDMA_READ_REQUEST, K_MR + M_RW, 0x8000 | 2000);
    seed_op(&sd, FZ_OP_STRUCT, &p[0], sizeof(p[0]));
    seed_put(&sd, (uint8_t[]) { FZ_OP_LINK, 1, FZ_OP_LINK, 0 }, 4);
    seed_op(&sd, FZ_OP_FLOW, &grant, sizeof(grant));
    seed_write(dir, "credits-hello-again", &sd);
    cfg = cr;
    cfg.flags3 ^= FZ_CFG3_CREDITS_MASK;        /* 2: the device asks */
    memcpy(sd.b, &cfg, sizeof(cfg));
    seed_write(dir, "credits-device-on", &sd);
    cfg.flags3 |= FZ_CFG3_CREDITS_MASK;        /* 3: the device has them off */
    memcpy(sd.b, &cfg, sizeof(cfg));
    seed_write(dir, "credits-device-off", &sd);
}

static void fz_gen_seeds(const char *dir)
{
    const FzConfig mtu1k = { .flags = 2 };
    const FzConfig sends = { .flags = 2 | FZ_CFG_POST_SENDS };
    const FzConfig mtu256 = { .flags = 0 };
    const uint16_t right = 0x8000 | 100;
    FzPktRec p[5];
    FzSeed sd;
    FzConfig cfg;
    uint8_t v;

    g_mkdir_with_parents(dir, 0755);
    /* Requests: each packet of a message at the PSN expected then */
    p[0] = seed_pkt(T_RC, PIB_OP_RC_SEND_ONLY, 0, right);
    seed_emit(dir, "rc-send-only", mtu1k, p, 1, 0);
    p[0] = seed_pkt(T_RC, PIB_OP_RC_SEND_FIRST, 0, right);
    p[1] = seed_pkt(T_RC, PIB_OP_RC_SEND_MIDDLE, 0, right);
    p[2] = seed_pkt(T_RC, PIB_OP_RC_SEND_LAST_IMM, 0, right);
    seed_emit(dir, "rc-send-multi", mtu1k, p, 3, 0);
    p[0] = seed_pkt(T_RC_SRQ, PIB_OP_RC_SEND_ONLY_INV, 0, right);
    p[0].ext = 2;
    seed_emit(dir, "rc-srq-send-inv", mtu1k, p, 1, 0);
    p[0] = seed_pkt(T_RC, PIB_OP_RC_RDMA_WRITE_ONLY, K_MR + M_RW, right);
    seed_emit(dir, "rc-write-only", mtu1k, p, 1, 0);
    p[0] = seed_pkt(T_RC, PIB_OP_RC_RDMA_WRITE_FIRST, K_MR + M_RW, right);
    p[0].va_off = 0;
    p[1] = seed_pkt(T_RC, PIB_OP_RC_RDMA_WRITE_LAST_IMM, K_MR + M_RW, right);
    seed_emit(dir, "rc-write-multi", mtu1k, p, 2, 0);
    p[0] = seed_pkt(T_RC, PIB_OP_RC_RDMA_WRITE_ONLY, K_MW2, right);
    seed_emit(dir, "rc-write-mw", mtu1k, p, 1, 0);
    p[0] = seed_pkt(T_RC, PIB_OP_RC_RDMA_READ_REQUEST, K_MR + M_RW,
                    0x8000 | 2000);
    seed_emit(dir, "rc-read", mtu1k, p, 1, 0x90);
    p[1] = p[0];
    p[1].target |= 2 << 6;          /* the same READ again: a duplicate */
    seed_emit(dir, "rc-read-dup", mtu1k, p, 2, 0);
    p[0] = seed_pkt(T_RC, PIB_OP_RC_RDMA_READ_REQUEST, K_MR + M_BIG, 0);
    p[0].key = 6 << 2;              /* the whole 320 KiB */
    p[0].va_off = 0;
    cfg = (FzConfig) { .flags = FZ_TX_EAGAIN << 4 };
    seed_emit(dir, "rc-read-big", cfg, p, 1, 0x90);
    p[0] = seed_pkt(T_RC, PIB_OP_RC_COMPARE_SWAP, K_MR + M_RW, right);
    p[1] = seed_pkt(T_RC, PIB_OP_RC_FETCH_ADD, K_MR + M_RW, right);
    seed_emit(dir, "rc-atomics", mtu1k, p, 2, 0);
    p[2] = p[1];
    p[2].target |= 2 << 6;          /* the FA again: answered from the replay cache */
    seed_emit(dir, "rc-atomic-dup", mtu1k, p, 3, 0);
    p[0] = seed_pkt(T_RC, PIB_OP_RC_FETCH_ADD, K_MR + M_BAD, right);
    seed_emit(dir, "rc-atomic-bad-dma", mtu1k, p, 1, 0);
    p[0] = seed_pkt(T_RC, PIB_OP_RC_SEND_ONLY, 0, right);
    cfg = (FzConfig) { .flags = 2, .flags2 = FZ_CFG2_NO_RECV };
    seed_emit(dir, "rc-rnr", cfg, p, 1, 0);
    /* XRC: to the XRC target, naming the XRC SRQ (a SEND) and M_RW's PD's keys */
    p[0] = seed_pkt(T_RC, PIB_OP_XRC(PIB_OP_RC_SEND_ONLY), 0, right);
    p[1] = seed_pkt(T_RC, PIB_OP_XRC(PIB_OP_RC_RDMA_WRITE_ONLY), K_MR + M_RW, right);
    p[2] = seed_pkt(T_RC, PIB_OP_XRC(PIB_OP_RC_FETCH_ADD), K_MR + M_RW, right);
    seed_emit(dir, "xrc", mtu1k, p, 3, 0);
    p[0].ext = 0x40;                /* an SRQN that is not the target's */
    p[0].raw32 = cpu_to_le32(1);
    seed_emit(dir, "xrc-bad-srq", mtu1k, p, 1, 0);
    p[0] = seed_pkt(T_RC, PIB_OP_RC_SEND_ONLY, 0, right);
    p[0].target |= 8;
    cfg = (FzConfig) { .flags = 2, .flags2 = FZ_CFG2_GRH | FZ_CFG2_LMC };
    p[0].ext = 0x20;                /* to LID + 2 */
    seed_emit(dir, "rc-send-grh-lmc", cfg, p, 1, 0);
    p[0] = seed_pkt(T_RC_SRQ, PIB_OP_RC_SEND_ONLY, 0, right);
    cfg = (FzConfig) { .flags = 2, .flags2 = FZ_CFG2_RTR };
    seed_emit(dir, "rc-rtr", cfg, p, 1, 0);

    /* Responses, to what the requester has outstanding (sends at setup) */
    p[0] = seed_pkt(T_RC, PIB_OP_RC_ACKNOWLEDGE, 0, right);
    p[0].target |= 2 << 6;          /* the newest PSN sent */
    seed_emit(dir, "rc-ack", sends, p, 1, 0);
    p[0] = seed_pkt(T_RC, PIB_OP_RC_ACKNOWLEDGE, 0, right);
    p[0].syndrome = PIB_AETH_NAK | PIB_NAK_PSN_SEQ_ERR;
    seed_emit(dir, "rc-nak-seq", sends, p, 1, 0x90);
    p[0].syndrome = PIB_AETH_RNR_NAK | 1;
    seed_emit(dir, "rc-rnr-nak", sends, p, 1, 0x90);
    p[0].syndrome = PIB_AETH_NAK | PIB_NAK_REM_ACCESS_ERR;
    seed_emit(dir, "rc-nak-access", sends, p, 1, 0);
    /*
     * The WQEs at setup: (BIND_MW, BIND_MW,) SEND, WRITE, READ, FA, CS,
     * SEND_IMM.  psn_delta[2:0] counts from the oldest WQE not completed yet.
     */
    p[0] = seed_pkt(T_RC, PIB_OP_RC_ACKNOWLEDGE, 0, right);
    p[0].target |= 1 << 6;
    p[0].psn_delta = 1;             /* the WRITE: acks the SEND too */
    p[1] = seed_pkt(T_RC, PIB_OP_RC_RDMA_READ_RESP_FIRST, 0, right);
    p[1].target |= 1 << 6;          /* the READ of 2500 bytes */
    p[2] = p[1];
    p[2].opsel = 14;                /* RC_RDMA_READ_RESP_MIDDLE */
    p[2].psn_delta = 1 << 3;
    p[3] = seed_pkt(T_RC, PIB_OP_RC_RDMA_READ_RESP_LAST, 0, 0x8000 | 451);
    p[3].target |= 1 << 6;
    p[3].psn_delta = 2 << 3;
    p[4] = seed_pkt(T_RC, PIB_OP_RC_ATOMIC_ACKNOWLEDGE, 0, right);
    seed_emit(dir, "rc-responses", sends, p, 5, 0);
    p[0] = seed_pkt(T_RC_SRQ, PIB_OP_RC_RDMA_READ_RESP_ONLY, 0, 0x8000 | 299);
    seed_emit(dir, "rc-srq-read-resp", sends, p, 1, 0);

    /* A READ, an atomic, whose local buffer is read-only: the response cannot land */
    for (v = 0; v < 2; v++) {
        sd.n = 0;
        cfg = mtu1k;
        seed_put(&sd, &cfg, sizeof(cfg));
        seed_op(&sd, FZ_OP_SEND, &(FzSendRec) {
                    T_RC, v ? PIB_WQE_ATOMIC_FA : PIB_WQE_RDMA_READ, 0x80, 0, 100, 0 },
                sizeof(FzSendRec));
        p[0] = v ? seed_pkt(T_RC, PIB_OP_RC_ATOMIC_ACKNOWLEDGE, 0, right) :
                   seed_pkt(T_RC, PIB_OP_RC_RDMA_READ_RESP_ONLY, 0, 0x8000 | 99);
        seed_op(&sd, FZ_OP_STRUCT, &p[0], sizeof(p[0]));
        seed_write(dir, v ? "rc-atomic-ack-prot" : "rc-read-resp-prot", &sd);
    }

    /* Fast registration: REG_MR on M_RW's pages, a WRITE through it, LOCAL_INV, again */
    sd.n = 0;
    cfg = mtu1k;
    seed_put(&sd, &cfg, sizeof(cfg));
    seed_op(&sd, FZ_OP_SEND, &(FzSendRec) { T_RC, PIB_WQE_REG_MR, 0, 0, 0x08, 0 },
            sizeof(FzSendRec));
    p[0] = seed_pkt(T_RC, PIB_OP_RC_RDMA_WRITE_ONLY, K_FR, right);
    seed_op(&sd, FZ_OP_STRUCT, &p[0], sizeof(p[0]));
    seed_op(&sd, FZ_OP_SEND, &(FzSendRec) { T_RC, PIB_WQE_LOCAL_INV, 0, 0, 2, 0 },
            sizeof(FzSendRec));
    p[0].target |= 1 << 6;
    seed_op(&sd, FZ_OP_STRUCT, &p[0], sizeof(p[0]));
    seed_write(dir, "rc-frwr", &sd);

    /* UD, GSI, UC */
    p[0] = seed_pkt(T_UD, PIB_OP_UD_SEND_ONLY, 0, 0x8000 | 500);
    p[1] = seed_pkt(T_GSI, PIB_OP_UD_SEND_ONLY_IMM, 0, 0x8000 | 60);
    p[1].target |= 8;               /* with a GRH */
    seed_emit(dir, "ud-send", mtu1k, p, 2, 0);
    p[0] = seed_pkt(T_UC, PIB_OP_UC_SEND_ONLY, 0, right);
    p[1] = seed_pkt(T_UC, PIB_OP_UC_RDMA_WRITE_ONLY_IMM, K_MR + M_RW, right);
    seed_emit(dir, "uc-send-write", mtu1k, p, 2, 0);
    p[0] = seed_pkt(T_UC, PIB_OP_UC_SEND_FIRST, 0, right);
    p[1] = seed_pkt(T_UC, PIB_OP_UC_SEND_LAST, 0, right);
    p[1].target |= 1 << 6;
    p[1].psn_delta = 1;             /* one packet lost: the message goes */
    seed_emit(dir, "uc-lost", mtu256, p, 2, 0);

    /* UD receives that fail: a buffer too small, one without LOCAL_WRITE */
    for (v = 0; v < 2; v++) {
        sd.n = 0;
        cfg = (FzConfig) { .flags = 2, .flags2 = FZ_CFG2_NO_RECV };
        seed_put(&sd, &cfg, sizeof(cfg));
        seed_put(&sd, (uint8_t[]) { FZ_OP_RECV, T_UD, v ? 1 << 3 : 4 << 3 }, 3);
        p[0] = seed_pkt(T_UD, PIB_OP_UD_SEND_ONLY, 0, 0x8000 | 500);
        seed_op(&sd, FZ_OP_STRUCT, &p[0], sizeof(p[0]));
        seed_write(dir, v ? "ud-recv-prot" : "ud-recv-small", &sd);
    }

    /* The transmit queue fills: a 320 KiB SEND into a socket that is full */
    sd.n = 0;
    cfg = (FzConfig) { .flags = FZ_TX_EAGAIN << 4 };
    seed_put(&sd, &cfg, sizeof(cfg));
    seed_op(&sd, FZ_OP_SEND, &(FzSendRec) { T_RC, PIB_WQE_SEND, 0x10, 0,
                                             40000, 0 }, sizeof(FzSendRec));
    seed_put(&sd, (uint8_t[]) { FZ_OP_LINK, 7, FZ_OP_LINK, 7 }, 4);
    seed_write(dir, "tx-full", &sd);
    cfg.flags = FZ_TX_NOWATCH << 4;
    memcpy(sd.b, &cfg, sizeof(cfg));
    seed_write(dir, "tx-nowatch", &sd);

    /* CQs that overflow, or cannot be written */
    p[0] = seed_pkt(T_RC, PIB_OP_RC_ACKNOWLEDGE, 0, right);
    p[0].target |= 2 << 6;
    cfg = (FzConfig) { .flags = 2 | FZ_CFG_POST_SENDS, .flags3 = FZ_CFG3_TINY_CQ };
    seed_emit(dir, "cq-overflow", cfg, p, 1, 0);
    p[0] = seed_pkt(T_UD, PIB_OP_UD_SEND_ONLY, 0, 0x8000 | 500);
    cfg = (FzConfig) { .flags = 2, .flags3 = FZ_CFG3_CQ_NOT_RAM };
    seed_emit(dir, "cq-not-ram", cfg, p, 1, 0);

    /* A port that starts without a LID; a peer that stays silent a while */
    p[0] = seed_pkt(T_RC, PIB_OP_RC_SEND_ONLY, 0, right);
    cfg = (FzConfig) { .flags = 2, .flags3 = FZ_CFG3_NO_LID };
    seed_emit(dir, "no-lid", cfg, p, 1, 0);
    sd.n = 0;
    cfg = mtu1k;
    seed_put(&sd, &cfg, sizeof(cfg));
    seed_put(&sd, (uint8_t[]) { FZ_OP_LINK, 4 }, 2);
    seed_op(&sd, FZ_OP_STRUCT, &p[0], sizeof(p[0]));
    seed_put(&sd, (uint8_t[]) { FZ_OP_LINK, 1, FZ_OP_LINK, 5 | 3 << 3 }, 4);
    seed_write(dir, "link-training", &sd);

    /* Framing: a HELLO again, then a frame with a bad magic */
    cfg = mtu1k;
    sd.n = 0;
    seed_put(&sd, &cfg, sizeof(cfg));
    v = 1;
    seed_op(&sd, FZ_OP_LINK, &v, 1);
    seed_put(&sd, (uint8_t[]) { FZ_OP_RAW, 8, 0, 0x51, 2, 0, 4, 1, 2, 3, 4 },
             11);
    seed_write(dir, "link-framing", &sd);
    /* The same through the chardev's own reads (link-direct=off), 7 bytes at a time */
    cfg.flags3 |= FZ_CFG3_CHARDEV;
    cfg.flags |= FZ_CFG_SMALL_READS;
    cfg.rx_chunk = 6;
    memcpy(sd.b, &cfg, sizeof(cfg));
    seed_write(dir, "link-framing-chardev", &sd);
    cfg = mtu1k;

    /* Direct receive: the peer closes (end of stream), the socket fails, each under traffic */
    for (v = 0; v < 2; v++) {
        sd.n = 0;
        seed_put(&sd, &cfg, sizeof(cfg));
        p[0] = seed_pkt(T_RC, PIB_OP_RC_SEND_ONLY, 0, right);
        seed_op(&sd, FZ_OP_STRUCT | FZ_OP_NORUN, &p[0], sizeof(p[0]));
        seed_put(&sd, (uint8_t[]) { FZ_OP_LINK, 3 | (v ? 0x10 : 0x08) }, 2);
        seed_op(&sd, FZ_OP_STRUCT, &p[0], sizeof(p[0]));
        seed_write(dir, v ? "link-read-error" : "link-eof", &sd);
    }

    /* A READ, then the MR goes while the responses are pending */
    sd.n = 0;
    seed_put(&sd, &cfg, sizeof(cfg));
    p[0] = seed_pkt(T_RC, PIB_OP_RC_RDMA_READ_REQUEST, K_MR + M_RW,
                    0x8000 | 3000);
    seed_op(&sd, FZ_OP_STRUCT | FZ_OP_NORUN, &p[0], sizeof(p[0]));
    seed_op(&sd, FZ_OP_ADMIN, &(FzAdminRec) { FZ_ADM_DEREG_MR, 0, 0 },
            sizeof(FzAdminRec));
    v = 0x90;
    seed_op(&sd, FZ_OP_TICK, &v, 1);
    seed_write(dir, "read-dereg", &sd);

    /* Sends over a loopback, the link full, a reset in the middle */
    sd.n = 0;
    cfg = (FzConfig) {
        .flags = 2 | FZ_CFG_POST_SENDS | (FZ_TX_EAGAIN << 4) | FZ_CFG_LOOPBACK,
    };
    seed_put(&sd, &cfg, sizeof(cfg));
    seed_op(&sd, FZ_OP_SEND, &(FzSendRec) { T_RC, PIB_WQE_RDMA_READ, 0x10, 0,
                                             4000, 0 }, sizeof(FzSendRec));
    v = 0x90;
    seed_op(&sd, FZ_OP_TICK, &v, 1);
    seed_op(&sd, FZ_OP_ADMIN, &(FzAdminRec) { FZ_ADM_RESET, 0, 0 },
            sizeof(FzAdminRec));
    seed_write(dir, "loopback-reset", &sd);

    /* Error injection armed, then traffic */
    sd.n = 0;
    cfg = sends;
    seed_put(&sd, &cfg, sizeof(cfg));
    for (v = 0; v < 6; v++) {
        seed_op(&sd, FZ_OP_INJECT, &(FzInjectRec) { v, v == 0 ? 0 : 2, 1, 3 },
                sizeof(FzInjectRec));
    }
    seed_op(&sd, FZ_OP_SEND, &(FzSendRec) { T_RC, PIB_WQE_SEND, 0, 0, 100, 0 },
            sizeof(FzSendRec));
    p[0] = seed_pkt(T_RC, PIB_OP_RC_ACKNOWLEDGE, 0, right);
    p[0].target |= 2 << 6;
    seed_op(&sd, FZ_OP_STRUCT, &p[0], sizeof(p[0]));
    v = 0x90;
    seed_op(&sd, FZ_OP_TICK, &v, 1);
    seed_write(dir, "inject", &sd);

    /*
     * MADs: NodeInfo, PortInfo (LID-routed and directed route), PortCounters, congestion
     * control (CACongestionSetting, the CongestionControlTable's block 1, CongestionLog)
     */
    {
        static const struct { uint8_t sel; uint16_t attr; uint8_t method; } mads[] = {
            { 1, PIB_SMP_ATTR_NODE_INFO, PIB_MAD_METHOD_GET },
            { 2, PIB_SMP_ATTR_PORT_INFO, PIB_MAD_METHOD_GET },
            { 1, PIB_SMP_ATTR_PKEY_TABLE, PIB_MAD_METHOD_SET },
            { 1, PIB_SMP_ATTR_PORT_INFO, PIB_MAD_METHOD_SET },
            { 3, PIB_PMA_ATTR_PORT_COUNTERS, PIB_MAD_METHOD_GET },
            { 3, PIB_PMA_ATTR_PORT_COUNTERS_EXT, PIB_MAD_METHOD_SET },
            { 4, PIB_CC_ATTR_CA_CONG_SETTING, PIB_MAD_METHOD_SET },
            { 4, PIB_CC_ATTR_CC_TABLE, PIB_MAD_METHOD_SET },
            { 4, PIB_CC_ATTR_CONG_LOG, PIB_MAD_METHOD_GET },
        };
        uint8_t mad[1 + PIB_MAD_SIZE];
        unsigned k;

        sd.n = 0;
        cfg = (FzConfig) { .flags = 2, .flags3 = FZ_CFG3_NO_LID };
        seed_put(&sd, &cfg, sizeof(cfg));
        for (k = 0; k < ARRAY_SIZE(mads); k++) {
            memset(mad, 0, sizeof(mad));
            mad[0] = mads[k].sel;
            mad[1 + 3] = mads[k].method;
            stw_be_p(mad + 1 + 16, mads[k].attr);
            stl_be_p(mad + 1 + 20, 1);
            stl_be_p(mad + 1 + 12, k);
            if (mads[k].attr == PIB_SMP_ATTR_PORT_INFO) {
                stw_be_p(mad + 1 + 64 + 16, FZ_LID);    /* LID */
                mad[1 + 64 + 36] = 5 << 4;              /* NeighborMTU */
            }
            mad[1 + 64 + 1] = 1;                        /* PortSelect */
            seed_op(&sd, FZ_OP_MAD, mad, sizeof(mad));
        }
        seed_write(dir, "mads", &sd);
    }

    fz_gen_credit_seeds(dir);
}

/*
 * libFuzzer entry points
 */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *gen = getenv("PIB_FUZZ_GEN");

    if (gen) {
        fz_gen_seeds(gen);
        exit(0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FzIn in = { data, size };
    FzConfig cfg;

    in_read(&in, &cfg, sizeof(cfg));
    fz_setup(cfg);
    while (in.n) {
        fz_op(&in);
    }
    fz_settle();
    fz_teardown();
    return 0;
}
