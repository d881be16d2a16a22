/* SPDX-License-Identifier: GPL-2.0-or-later OR Linux-OpenIB */
/*
 * pib_wqe.h - the data-path queue formats of the pib HCA: work queue entries (WQEs) that the
 * driver or provider writes, completion queue entries (CQEs) and completion event queue
 * entries (CEQEs) that the device writes.  docs/reference/hardware.md ("Data path") explains them.
 *
 * Rings live in guest memory described by a page list (PBL: an array of little-endian u64
 * guest-physical addresses of 4 KiB pages).  Entry strides are powers of two no larger than a
 * page, so an entry never straddles two pages: entry i of a ring is at
 *     pbl[(i * stride) >> 12] + ((i * stride) & 0xfff).
 *
 * Indices are free-running u32 counters; the slot is index % depth.
 */
#ifndef PIB_WQE_H
#define PIB_WQE_H

#include "pib_hw.h"

#define PIB_PAGE_SHIFT         12
#define PIB_PAGE_SIZE          (1u << PIB_PAGE_SHIFT)

/*
 * Ring geometry: the rules every layer sizes and checks rings by.  A work queue slot is
 * 2^stride_log bytes: at least its header (the 64-byte send control segment, the 16-byte
 * receive header), at most a page, so that no WQE straddles two pages.  A CQ's slots are
 * CQEs (32 bytes, or 64 with a timestamp); its ring is followed by the page of the consumer
 * index record.
 */
#define PIB_SQ_STRIDE_LOG_MIN  6      /* sizeof(struct pib_send_wqe)                       */
#define PIB_RQ_STRIDE_LOG_MIN  4      /* sizeof(struct pib_recv_wqe): RQs and SRQs         */
#define PIB_STRIDE_LOG_MAX     PIB_PAGE_SHIFT
#define PIB_CQE_STRIDE_LOG     5      /* sizeof(struct pib_cqe)                            */
#define PIB_CQE_TS_STRIDE_LOG  6      /* sizeof(struct pib_cqe_ts)                         */

/* ---- Scatter/gather element: 16 bytes ---------------------------------------------------- */
struct pib_sge {
	pib_u64 addr;           /* virtual address within the MR named by lkey                 */
	pib_u32 length;         /* bytes                                                       */
	pib_u32 lkey;
};

/* ---- Send WQE ------------------------------------------------------------------------------
 * A 64-byte control segment followed by num_sge SGEs, or (PIB_WQE_F_INLINE) by inline_len
 * bytes of payload.  The SQ stride is chosen at CREATE_QP (>= 64 + 16 * max_send_sge, and
 * large enough for max_inline_data).
 */
enum pib_wqe_opcode {
	PIB_WQE_SEND           = 0x00,
	PIB_WQE_SEND_IMM       = 0x01,
	PIB_WQE_SEND_INV       = 0x02,
	PIB_WQE_RDMA_WRITE     = 0x03,
	PIB_WQE_RDMA_WRITE_IMM = 0x04,
	PIB_WQE_RDMA_READ      = 0x05,
	PIB_WQE_ATOMIC_CS      = 0x06, /* compare and swap                                     */
	PIB_WQE_ATOMIC_FA      = 0x07, /* fetch and add                                        */
	PIB_WQE_LOCAL_INV      = 0x08,
	PIB_WQE_BIND_MW        = 0x09,
	PIB_WQE_REG_MR         = 0x0a, /* fast registration: struct pib_reg_mr_wqe            */
	PIB_WQE_ATOMIC_WRITE   = 0x0b, /* ATOMIC WRITE: compare_add's 8 bytes, as they are to  */
	                               /* land, to remote_addr (8-byte aligned); no SGEs       */
	PIB_WQE_FLUSH          = 0x0c, /* RDMA FLUSH: imm_inv says what (PIB_FLUSH_*), of      */
	                               /* [remote_addr, + compare_add) or rkey's whole MR; no  */
	                               /* SGEs.  It completes once the responder has placed    */
	                               /* every earlier write as asked                         */
	PIB_WQE_OPCODE_MAX
};

/*
 * RDMA FLUSH's imm_inv: the placement types it must reach in [3:0], its selectivity in [5:4],
 * as the FETH carries them (include/pib_link.h).  GLOBAL: visible to every reader of the
 * memory; PERSISTENT: in the persistence domain, which pib has none of, so no MR grants it and
 * such a flush fails with REM_ACCESS_ERR.  RANGE: remote_addr and the length in compare_add
 * (at most 2^31, a RETH's DMA length); MR: the whole region rkey names.
 */
#define PIB_FLUSH_GLOBAL       (1u << 0)
#define PIB_FLUSH_PERSISTENT   (1u << 1)
#define PIB_FLUSH_PLT_MASK     0x0fu
#define PIB_FLUSH_SEL_SHIFT    4
#define PIB_FLUSH_RANGE        0u
#define PIB_FLUSH_MR           1u

/*
 * Which operations each QP type carries (the IBTA's, for what the device implements): sends on
 * every type with a send queue (an XRC_TGT QP has none); RDMA writes and the local operations
 * (BIND_MW, LOCAL_INV, REG_MR) on the connected ones;
 * SEND with invalidate, READ, atomics, ATOMIC WRITE and FLUSH on RC and XRC_INI alone (no UC
 * packet carries an IETH, and the IBTA defines ATOMIC WRITE and FLUSH for RC only; XRC runs
 * RC's protocol).  The
 * device refuses any other WQE (LOC_QP_OP_ERR), the driver and the provider refuse the work
 * request before writing it.
 */
static inline bool pib_wqe_opcode_allowed(pib_u32 qp_type, pib_u32 opcode)
{
	if (qp_type == PIB_QPT_XRC_TGT)
		return false;           /* no send queue */
	switch (opcode) {
	case PIB_WQE_SEND:
	case PIB_WQE_SEND_IMM:
		return true;
	case PIB_WQE_RDMA_WRITE:
	case PIB_WQE_RDMA_WRITE_IMM:
	case PIB_WQE_LOCAL_INV:
	case PIB_WQE_BIND_MW:
	case PIB_WQE_REG_MR:
		return qp_type == PIB_QPT_RC || qp_type == PIB_QPT_UC ||
		       qp_type == PIB_QPT_XRC_INI;
	case PIB_WQE_SEND_INV:
	case PIB_WQE_RDMA_READ:
	case PIB_WQE_ATOMIC_CS:
	case PIB_WQE_ATOMIC_FA:
	case PIB_WQE_ATOMIC_WRITE:
	case PIB_WQE_FLUSH:
		return qp_type == PIB_QPT_RC || qp_type == PIB_QPT_XRC_INI;
	default:
		return false;
	}
}

/* BIND_MW, LOCAL_INV and REG_MR act on the local HCA only: no packet, no PSN, no data. */
static inline bool pib_wqe_is_local(pib_u32 opcode)
{
	return opcode == PIB_WQE_BIND_MW || opcode == PIB_WQE_LOCAL_INV ||
	       opcode == PIB_WQE_REG_MR;
}

/* READ, atomics and FLUSH: the requests that take a responder resource (max_rd_atomic) and
 * that a fence waits for. */
static inline bool pib_wqe_is_rd_atomic(pib_u32 opcode)
{
	return opcode == PIB_WQE_RDMA_READ || opcode == PIB_WQE_ATOMIC_CS ||
	       opcode == PIB_WQE_ATOMIC_FA || opcode == PIB_WQE_FLUSH;
}

/* PIB_WQE_F_INLINE: only the operations whose payload the requester sends (sends, writes).
 * ATOMIC WRITE carries its 8 bytes in the control segment instead. */
static inline bool pib_wqe_inline_allowed(pib_u32 opcode)
{
	return !pib_wqe_is_local(opcode) && !pib_wqe_is_rd_atomic(opcode) &&
	       opcode != PIB_WQE_ATOMIC_WRITE;
}

#define PIB_WQE_F_SIGNALED     (1u << 0)  /* generate a CQE on success                      */
#define PIB_WQE_F_SOLICITED    (1u << 1)  /* set SE in the last packet                      */
#define PIB_WQE_F_INLINE       (1u << 2)  /* payload follows the control segment            */
#define PIB_WQE_F_FENCE        (1u << 3)  /* wait for prior READ/ATOMIC to complete          */

/* ud_qkey: IBA's rule, a Q_Key with the high bit set means "the QP's own Q_Key". */
#define PIB_QKEY_USE_QP        0x80000000u

struct pib_send_wqe {
	pib_u8  opcode;         /* 0x00 enum pib_wqe_opcode                                    */
	pib_u8  flags;          /* 0x01 PIB_WQE_F_*                                            */
	pib_u8  num_sge;        /* 0x02 SGEs that follow (ignored with INLINE)                 */
	pib_u8  rsvd0;
	pib_u32 imm_inv;        /* 0x04 immediate data (as on the wire), rkey to invalidate,   */
	                        /*      or FLUSH's PIB_FLUSH_* bits                            */
	pib_u64 wr_id;          /* 0x08 returned in the CQE                                    */
	pib_u64 remote_addr;    /* 0x10 RDMA / atomic target VA (a UD QP: the GRH of the       */
	                        /*      address vector here and at 0x20, struct pib_ud_wqe)     */
	pib_u32 rkey;           /* 0x18 RDMA / atomic rkey                                     */
	pib_u32 inline_len;     /* 0x1c bytes of inline payload                                */
	pib_u64 compare_add;    /* 0x20 atomic: compare (CS) or add (FA) operand; ATOMIC WRITE: */
	                        /*      the 8 bytes to write, byte for byte as in memory;       */
	                        /*      FLUSH of a range: its length                            */
	pib_u64 swap;           /* 0x28 atomic: swap value (CS)                                */
	union {
		pib_u32 ud_qpn;   /* 0x30 UD: destination QPN [23:0]                             */
		pib_u32 xrc_srqn; /* 0x30 XRC_INI: the remote XRC SRQ [23:0] (the XRCETH's)     */
	};
	pib_u32 ud_qkey;        /* 0x34 UD: Q_Key; PIB_QKEY_USE_QP set: the QP's own Q_Key    */
	pib_u16 ud_dlid;        /* 0x38 UD: destination LID (QP0: 0xffff, the permissive LID,  */
	                        /*      sends a directed-route SMP: the SLID is made 0xffff too)*/
	pib_u8  ud_sl;          /* 0x3a UD: service level                                      */
	pib_u8  rsvd1;
	pib_u16 ud_pkey_index;  /* 0x3c GSI (QP1): the P_Key index this WR uses; other QPs use  */
	                        /*      their own (MODIFY_QP)                                  */
	pib_u16 rsvd2;
	/* 0x40: struct pib_sge sge[num_sge] or inline bytes */
};

/* ---- UD: the control segment of a send WQE on a UD QP, QP0 or QP1 (64 bytes) ------------
 * The same WQE as struct pib_send_wqe, seen as a datagram's: the space RDMA and atomics use
 * holds the GRH part of the address vector.  With PIB_UD_AV_F_GRH the packet carries a GRH
 * (hop limit, traffic class, flow label, the SGID at sgid_index, dgid), as a multicast send
 * must; the destination LID, QP, Q_Key and SL are at the offsets struct pib_send_wqe names.
 */
#define PIB_UD_AV_F_GRH        (1u << 0)
struct pib_ud_wqe {
	pib_u8  opcode;         /* 0x00 as in struct pib_send_wqe                              */
	pib_u8  flags;
	pib_u8  num_sge;
	pib_u8  rsvd0;
	pib_u32 imm_inv;        /* 0x04                                                        */
	pib_u64 wr_id;          /* 0x08                                                        */
	pib_u32 flow_label;     /* 0x10 GRH: [19:0] flow label                                 */
	pib_u8  traffic_class;  /* 0x14 GRH                                                    */
	pib_u8  hop_limit;      /* 0x15 GRH                                                    */
	pib_u8  sgid_index;     /* 0x16 GRH: the source GID's index in the port's GID table    */
	pib_u8  av_flags;       /* 0x17 PIB_UD_AV_F_*                                          */
	pib_u32 rsvd1;          /* 0x18                                                        */
	pib_u32 inline_len;     /* 0x1c as in struct pib_send_wqe                              */
	pib_u8  dgid[16];       /* 0x20 GRH: the destination GID (a multicast group's MGID)     */
	pib_u32 ud_qpn;         /* 0x30 as in struct pib_send_wqe (0xffffff: multicast)         */
	pib_u32 ud_qkey;        /* 0x34                                                        */
	pib_u16 ud_dlid;        /* 0x38                                                        */
	pib_u8  ud_sl;          /* 0x3a                                                        */
	pib_u8  rsvd2;
	pib_u16 ud_pkey_index;  /* 0x3c                                                        */
	pib_u16 rsvd3;
};

/* ---- BIND_MW: the control segment of a PIB_WQE_BIND_MW send WQE (64 bytes, no SGEs) -------
 * Binds the window named by mw_rkey's index to [addr, addr + length) of the MR lkey, with
 * access (PIB_ACCESS_REMOTE_*: the window's own rights, which the MR need not have); the
 * window's key becomes new_rkey (its low byte may change, its index may not).  The MR must have
 * PIB_ACCESS_MW_BIND, and PIB_ACCESS_LOCAL_WRITE too when access has REMOTE_WRITE or
 * REMOTE_ATOMIC (IBTA C10-73, C10-74).  LOCAL_WRITE and MW_BIND in access are ignored.  Only the index of mw_rkey counts, so a consumer's stale copy of the
 * key (a type 2 window invalidated by the peer) still names the window; it must be in the
 * QP's PD and of type mw_type.  Type 1 windows are bound through ibv_bind_mw, which posts
 * this WQE too; length 0 unbinds a type 1 window (mr_lkey and addr are ignored).  A type 2
 * window must be unbound (invalidated) before it is bound again, and length 0 is refused.
 * Failures complete with PIB_WC_MW_BIND_ERR. */
struct pib_bind_mw_wqe {
	pib_u8  opcode;         /* 0x00 PIB_WQE_BIND_MW                                        */
	pib_u8  flags;          /* 0x01 PIB_WQE_F_*                                            */
	pib_u8  mw_type;        /* 0x02 1 or 2                                                 */
	pib_u8  rsvd0;
	pib_u32 new_rkey;       /* 0x04                                                        */
	pib_u64 wr_id;          /* 0x08                                                        */
	pib_u64 addr;           /* 0x10                                                        */
	pib_u64 length;         /* 0x18                                                        */
	pib_u32 mw_rkey;        /* 0x20 names the window: [31:8] its index; [7:0] ignored      */
	pib_u32 mr_lkey;        /* 0x24 the MR the window lies in (unused when length is 0)    */
	pib_u32 access;         /* 0x28 PIB_ACCESS_REMOTE_*; local bits ignored, others fail   */
	pib_u8  rsvd1[20];
};

/* ---- REG_MR: the control segment of a fast registration (64 bytes, no SGEs) ---------------
 * Registers the MR that ALLOC_MR made (a fast-registration MR, invalid until now) for
 * [iova, iova + length) on npages 4 KiB pages, whose guest-physical addresses the device reads
 * from pbl_addr (npages little-endian u64) when it executes the WQE, in send-queue order.  The
 * MR's keys become key: its index must be the MR's, its low byte is the consumer's new key
 * byte.  The MR must be in the QP's PD and invalid (a valid one is LOCAL_INV'ed first);
 * npages may not pass the MR's max_num_sg; remote write or atomic access needs local write.
 * Failures complete with LOC_PROT_ERR (LOC_LEN_ERR: too many pages) and change nothing.
 */
struct pib_reg_mr_wqe {
	pib_u8  opcode;         /* 0x00 PIB_WQE_REG_MR                                         */
	pib_u8  flags;          /* 0x01 PIB_WQE_F_*                                            */
	pib_u8  page_shift;     /* 0x02 12: 4 KiB pages (the only size the device maps)        */
	pib_u8  rsvd0;
	pib_u32 key;            /* 0x04 the MR's new lkey/rkey                                 */
	pib_u64 wr_id;          /* 0x08                                                        */
	pib_u64 iova;           /* 0x10                                                        */
	pib_u64 length;         /* 0x18                                                        */
	pib_u64 pbl_addr;       /* 0x20 guest-physical address of the page list                */
	pib_u32 npages;         /* 0x28                                                        */
	pib_u32 access;         /* 0x2c PIB_ACCESS_*                                           */
	pib_u8  rsvd1[16];
};

/* LOCAL_INV uses struct pib_send_wqe with imm_inv = the rkey to invalidate (MR or MW). */

/* ---- Receive WQE: a 16-byte header followed by num_sge SGEs ------------------------------ */
struct pib_recv_wqe {
	pib_u64 wr_id;
	pib_u8  num_sge;
	pib_u8  rsvd[7];
	/* 0x10: struct pib_sge sge[num_sge] */
};

/* ---- What a slot holds --------------------------------------------------------------------
 * A send slot holds the control segment, then max_sge SGEs or max_inline bytes of inline data
 * (never more than PIB_MAX_SGE, PIB_MAX_INLINE_DATA); a receive slot (RQ, SRQ) its header,
 * then max_sge SGEs.  The provider and the driver size slots with these, the device checks
 * WQEs against them.
 */

/* log2 of the smallest power-of-two stride >= bytes, and at least 2^min_log. */
static inline pib_u32 pib_stride_log(pib_u32 bytes, pib_u32 min_log)
{
	pib_u32 log = min_log;

	while (log < 31 && (1u << log) < bytes)
		log++;
	return log;
}

/* Pages (PIB_PAGE_SIZE) a ring of depth slots of 2^stride_log bytes occupies. */
static inline pib_u32 pib_ring_pages(pib_u32 depth, pib_u32 stride_log)
{
	return (pib_u32)((((pib_u64)depth << stride_log) + PIB_PAGE_SIZE - 1) >> PIB_PAGE_SHIFT);
}

/*
 * The receive doorbell record (PIB_DEV_CAP_RECV_DBREC): an RQ created with PIB_QPC_F_RQ_DBREC,
 * or an SRQ with PIB_SRQ_F_DBREC, lists one page more than its slots need, and this record
 * starts that page.  It replaces the RQ_DB and SRQ_DB doorbells, and their MMIO write (an exit
 * from the guest), on the receive path, as mlx5's RQ doorbell record does:
 *
 * - The consumer writes the WQEs into their slots, a write barrier, then the new producer index
 *   into pi.  That is all a post_recv does.
 * - The device reads pi when a message needs a WQE and it has taken every one it knew of, and,
 *   on an SRQ armed for the limit event, before it judges the limit.  A pi more than depth ahead
 *   of the WQEs the device took, or behind what it knew, is not believed: counted as
 *   PIB_GERR_DBREC_RANGE, and the device goes on with what it knew.
 * - A QP in ERR takes no receives but flushes those posted, and only a doorbell tells it of
 *   new ones.  Entering ERR, the device sets PIB_DBREC_F_RING in flags, then reads pi and flushes
 *   up to it; a consumer that, after writing pi and a full barrier, reads PIB_DBREC_F_RING rings
 *   the RQ doorbell too (the record is still written).  Each side writes its word before it
 *   reads the other's, so at least one sees the other's write: no receive goes unflushed.
 * - Entering RESET, the device zeroes the record, as the RQ's indices start over at 0.
 * The RQ_DB and SRQ_DB doorbells still work on a ring with a record: each moves pi forward.
 */
struct pib_recv_dbrec {
	pib_u32 pi;             /* the consumer's: producer index of the RQ or SRQ            */
	pib_u32 flags;          /* the device's: PIB_DBREC_F_*                                 */
};
#define PIB_DBREC_F_RING       (1u << 0)  /* the QP is in ERR: ring the RQ doorbell too     */

/* Pages of a receive ring (RQ or SRQ): its slots, then the record's page if it has one. */
static inline pib_u32 pib_recv_ring_pages(pib_u32 depth, pib_u32 stride_log, bool dbrec)
{
	return pib_ring_pages(depth, stride_log) + (dbrec ? 1 : 0);
}

/* The CQE stride of a CQ created with these PIB_CQ_F_* flags (CREATE_CQ, pib_hw.h). */
static inline pib_u32 pib_cqe_stride_log(pib_u32 cq_flags)
{
	return cq_flags & PIB_CQ_F_TIMESTAMP ? PIB_CQE_TS_STRIDE_LOG : PIB_CQE_STRIDE_LOG;
}

/* Pages of a CQ: its ring of CQEs of 2^cqe_stride_log bytes, then the page of the consumer
 * index record. */
static inline pib_u32 pib_cq_pages(pib_u32 depth, pib_u32 cqe_stride_log)
{
	return pib_ring_pages(depth, cqe_stride_log) + 1;
}

static inline pib_u32 pib_sq_slot_bytes(pib_u32 max_sge, pib_u32 max_inline)
{
	pib_u32 sges = max_sge * (pib_u32)sizeof(struct pib_sge);

	return (pib_u32)sizeof(struct pib_send_wqe) + (sges > max_inline ? sges : max_inline);
}

static inline pib_u32 pib_recv_slot_bytes(pib_u32 max_sge)
{
	return (pib_u32)sizeof(struct pib_recv_wqe) + max_sge * (pib_u32)sizeof(struct pib_sge);
}

/* SGEs after a header of hdr bytes in a slot of 2^stride_log bytes, at most PIB_MAX_SGE. */
static inline pib_u32 pib_slot_max_sge(pib_u32 stride_log, pib_u32 hdr)
{
	pib_u32 n = ((1u << stride_log) - hdr) / (pib_u32)sizeof(struct pib_sge);

	return n < PIB_MAX_SGE ? n : PIB_MAX_SGE;
}

static inline pib_u32 pib_sq_max_sge(pib_u32 stride_log)
{
	return pib_slot_max_sge(stride_log, sizeof(struct pib_send_wqe));
}

static inline pib_u32 pib_recv_max_sge(pib_u32 stride_log)
{
	return pib_slot_max_sge(stride_log, sizeof(struct pib_recv_wqe));
}

/* Inline bytes a send slot of 2^stride_log bytes holds, at most PIB_MAX_INLINE_DATA. */
static inline pib_u32 pib_sq_max_inline(pib_u32 stride_log)
{
	pib_u32 n = (1u << stride_log) - (pib_u32)sizeof(struct pib_send_wqe);

	return n < PIB_MAX_INLINE_DATA ? n : PIB_MAX_INLINE_DATA;
}

/* ---- CQE: 32 bytes ------------------------------------------------------------------------
 * Written by the device with the owner (phase) bit set to 1 on the first pass over the ring,
 * 0 on the second, ...  The consumer owns an entry whose phase matches its expectation and
 * must read the rest only after that check (read barrier).
 *
 * The CQ ring is depth * 32 bytes followed by one page; the first 4 bytes of that page hold
 * the consumer index, written by the consumer (the CQ "doorbell record").  The device reads it
 * only when the ring looks full, to tell a slow consumer from a real overflow.
 */
enum pib_cqe_opcode {             /* what completed; mirrors enum ibv_wc_opcode              */
	PIB_CQE_SEND           = 0x00,
	PIB_CQE_RDMA_WRITE     = 0x01,
	PIB_CQE_RDMA_READ      = 0x02,
	PIB_CQE_COMP_SWAP      = 0x03,
	PIB_CQE_FETCH_ADD      = 0x04,
	PIB_CQE_BIND_MW        = 0x05,
	PIB_CQE_LOCAL_INV      = 0x06,
	PIB_CQE_REG_MR         = 0x07,
	PIB_CQE_FLUSH          = 0x08,
	PIB_CQE_ATOMIC_WRITE   = 0x09,
	PIB_CQE_RECV           = 0x80,
	PIB_CQE_RECV_RDMA_IMM  = 0x81,
};

/*
 * Completion status: the IBTA/verbs numbering (enum ibv_wc_status / ib_wc_status).
 * PIB_WC_STATUSES(X) calls X(name, value) once per status: the enum below, the device's
 * status names and the driver's and provider's checks against their own numbering are all
 * made from this one list.
 */
#define PIB_WC_STATUSES(X)             \
	X(SUCCESS,             0)      \
	X(LOC_LEN_ERR,         1)      \
	X(LOC_QP_OP_ERR,       2)      \
	X(LOC_EEC_OP_ERR,      3)      \
	X(LOC_PROT_ERR,        4)      \
	X(WR_FLUSH_ERR,        5)      \
	X(MW_BIND_ERR,         6)      \
	X(BAD_RESP_ERR,        7)      \
	X(LOC_ACCESS_ERR,      8)      \
	X(REM_INV_REQ_ERR,     9)      \
	X(REM_ACCESS_ERR,      10)     \
	X(REM_OP_ERR,          11)     \
	X(RETRY_EXC_ERR,       12)     \
	X(RNR_RETRY_EXC_ERR,   13)     \
	X(LOC_RDD_VIOL_ERR,    14)     \
	X(REM_INV_RD_REQ_ERR,  15)     \
	X(REM_ABORT_ERR,       16)     \
	X(INV_EECN_ERR,        17)     \
	X(INV_EEC_STATE_ERR,   18)     \
	X(FATAL_ERR,           19)     \
	X(RESP_TIMEOUT_ERR,    20)     \
	X(GENERAL_ERR,         21)

#define PIB_WC_ENUM_ENTRY(name, value) PIB_WC_##name = value,
enum pib_cqe_status {
	PIB_WC_STATUSES(PIB_WC_ENUM_ENTRY)
};
#undef PIB_WC_ENUM_ENTRY

#define PIB_CQE_F_PHASE        (1u << 0)
#define PIB_CQE_F_IMM          (1u << 1)  /* imm_inv holds immediate data                   */
#define PIB_CQE_F_INV          (1u << 2)  /* imm_inv holds the rkey that was invalidated    */
#define PIB_CQE_F_GRH          (1u << 3)  /* UD: a GRH occupies the first 40 bytes          */
#define PIB_CQE_F_XRC          (1u << 4)  /* a receive on an XRC SRQ: src_qp [23:0] is its  */
                                          /* SRQN (qpn is the XRC_TGT QP's)                 */

struct pib_cqe {
	pib_u64 wr_id;          /* 0x00 from the WQE                                           */
	pib_u32 byte_len;       /* 0x08 bytes received (receive completions), or transferred   */
	pib_u32 imm_inv;        /* 0x0c immediate data (as on the wire) or invalidated rkey    */
	pib_u32 qpn;            /* 0x10 [23:0] local QPN; [31:24] receives on a UD or GSI QP:  */
	                        /*      the P_Key index the packet's P_Key matched             */
	pib_u32 src_qp;         /* 0x14 UD: [23:0] source QPN, [30:24] the DLID path bits;     */
	                        /*      PIB_CQE_F_XRC: [23:0] the XRC SRQ's number             */
	pib_u16 slid;           /* 0x18 UD: source LID                                         */
	pib_u8  status;         /* 0x1a enum pib_cqe_status                                    */
	pib_u8  opcode;         /* 0x1b enum pib_cqe_opcode                                    */
	pib_u8  flags;          /* 0x1c PIB_CQE_F_*                                            */
	pib_u8  sl;             /* 0x1d                                                        */
	pib_u16 wqe_index;      /* 0x1e index (mod 2^16) of the WQE this completes, so the      */
	                        /*      consumer can retire SQ slots up to it                    */
};
/*
 * ---- Timestamped CQE: 64 bytes --------------------------------------------------------------
 * A CQ created with PIB_CQ_F_TIMESTAMP has 64-byte slots: the 32-byte CQE as above (its phase
 * bit and the rule for reading it unchanged), then two readings taken at the moment the device
 * wrote the CQE:
 * - timestamp: the device clock (pib_hw.h, the UAR's CLOCK registers).  Timestamps of one CQ
 *   never decrease in ring order.
 * - wallclock: the machine's real-time clock, ns since the Unix epoch: the clock the machine's
 *   RTC reads, which is where the guest's system time starts (the verbs' completion wall-clock
 *   timestamp).  Real time may be set back, so these may decrease.
 * The device writes both before the dword with the phase bit, so a CQE whose phase bit is new
 * has them.
 */
struct pib_cqe_ts {
	struct pib_cqe cqe;     /* 0x00                                                        */
	pib_u64 timestamp;      /* 0x20 device clock, ns                                       */
	pib_u64 wallclock;      /* 0x28 real time, ns since 1970-01-01 00:00 UTC               */
	pib_u8  rsvd[16];       /* 0x30 written as zero                                        */
};

/* The fields a datagram receive CQE packs next to the QPNs (qpn [31:24], src_qp [30:24]). */
#define PIB_CQE_PKEY_INDEX_SHIFT    24
#define PIB_CQE_PATH_BITS_SHIFT     24
#define PIB_CQE_PATH_BITS_MASK      0x7fu

/* ---- Completion event queue (CEQ) entry: 8 bytes ------------------------------------------
 * When a completion is written to an armed CQ (any completion for "next", a solicited or
 * error one for "solicited only"), the device disarms the CQ, writes a CEQE naming it to the
 * CEQ and raises MSI-X vector PIB_MSIX_VEC_CEQ.  Arming is done with the CQ doorbell.
 */
#define PIB_CEQE_F_PHASE       (1u << 0)
struct pib_ceqe {
	pib_u32 cqn;            /* [23:0]                                                      */
	pib_u8  flags;          /* [0] phase                                                   */
	pib_u8  rsvd[3];
};

PIB_STATIC_ASSERT(sizeof(struct pib_sge) == 16, "SGE is 16 bytes");
PIB_STATIC_ASSERT(sizeof(struct pib_send_wqe) == 64, "send WQE control segment is 64 bytes");
PIB_STATIC_ASSERT(sizeof(struct pib_bind_mw_wqe) == 64, "bind WQE is 64 bytes");
PIB_STATIC_ASSERT(sizeof(struct pib_ud_wqe) == 64, "UD WQE is 64 bytes");
PIB_STATIC_ASSERT(sizeof(struct pib_reg_mr_wqe) == 64, "REG_MR WQE is 64 bytes");
PIB_STATIC_ASSERT(sizeof(struct pib_recv_wqe) == 16, "receive WQE header is 16 bytes");
PIB_STATIC_ASSERT(sizeof(struct pib_cqe) == 32, "CQE is 32 bytes");
PIB_STATIC_ASSERT(sizeof(struct pib_ceqe) == 8, "CEQE is 8 bytes");
PIB_STATIC_ASSERT(sizeof(struct pib_send_wqe) == 1u << PIB_SQ_STRIDE_LOG_MIN, "SQ stride");
PIB_STATIC_ASSERT(sizeof(struct pib_recv_wqe) == 1u << PIB_RQ_STRIDE_LOG_MIN, "RQ stride");
PIB_STATIC_ASSERT(sizeof(struct pib_cqe) == 1u << PIB_CQE_STRIDE_LOG, "CQE stride");
PIB_STATIC_ASSERT(sizeof(struct pib_cqe_ts) == 1u << PIB_CQE_TS_STRIDE_LOG, "CQE stride");
/* A CQE names the WQE it completes by a 16-bit index (wqe_index): the slot of the deepest
 * ring, SQ, RQ or SRQ, must fit it. */
PIB_STATIC_ASSERT(PIB_MAX_QP_WR <= 1u << 16, "wqe_index is 16 bits");
PIB_STATIC_ASSERT(PIB_MAX_SRQ_WR <= 1u << 16, "wqe_index is 16 bits");
/* The deepest rings' sizes fit the 32-bit buf_size of the uverbs commands (pib-abi.h) and the
 * page counts of the admin commands: a timestamped CQ of PIB_MAX_CQE slots and its record page
 * (256 MiB + 4 KiB), a work queue of the largest depth and stride (128 MiB). */
PIB_STATIC_ASSERT(((pib_u64)PIB_MAX_CQE << PIB_CQE_TS_STRIDE_LOG) + PIB_PAGE_SIZE <= 0xffffffffu,
		  "the largest CQ ring fits 32 bits");
PIB_STATIC_ASSERT(((pib_u64)PIB_MAX_QP_WR << PIB_STRIDE_LOG_MAX) <= 0xffffffffu &&
		  ((pib_u64)PIB_MAX_SRQ_WR << PIB_STRIDE_LOG_MAX) <= 0xffffffffu,
		  "the largest work queue fits 32 bits");

#endif /* PIB_WQE_H */
