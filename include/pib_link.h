/* SPDX-License-Identifier: GPL-2.0-or-later OR Linux-OpenIB */
/*
 * pib_link.h - framing on the link between two pib ports.
 *
 * The link is a byte stream (a QEMU socket chardev).  It carries frames:
 *
 *   +--------+--------+----------------+---------------------------+
 *   | magic  | type   | length (BE16)  | payload (length bytes)    |
 *   | 0x50   | 1 byte | bytes after hdr|                           |
 *   +--------+--------+----------------+---------------------------+
 *
 * The receiver reassembles frames across partial reads.  A frame with a bad magic, an unknown
 * type or a length above PIB_LINK_MAX_PAYLOAD means the stream lost framing: the receiver
 * counts it, drops the connection and lets the link retrain, exactly as a physical link that
 * loses symbol lock would.  Multi-byte fields in link frames are big-endian, as on the IB wire.
 *
 * Training: when the byte stream connects, each side sends HELLO with its node GUID and port
 * GUID.  The physical link is UP once each side has received the other's HELLO.
 *
 * Doorbell (unix-socket links only, both sides on one host): a HELLO with PIB_HELLO_F_DOORBELL
 * carries one eventfd as SCM_RIGHTS ancillary data.  The receiver of that HELLO may ring it
 * around a write on the stream: PIB_LINK_RING_START before the write, PIB_LINK_RING_END after
 * it, and every START must be followed by its END.  The eventfd's owner adds up what it reads:
 * while its STARTs outnumber its ENDs it does not poll the socket for input, and it reads the
 * socket whenever rung.  The point is the wakeup.  A socket write wakes the reader as a
 * "synchronous" wakeup (the writer is expected to sleep), which the host scheduler may leave
 * queued behind a writer that goes on running, such as a vCPU thread that sent from a doorbell.
 * Around such a write the reader is not waiting on the socket: the START wakes it early, with
 * an ordinary wakeup, and the END brings it back if it looked before the bytes came.  Writes
 * from a thread that sleeps next (a main loop) need no ring: the socket's wakeup is the better
 * one there.  The bytes still go through the socket, in order, and end of stream is still seen
 * on it.  A HELLO without the flag (a TCP link, a peer built before it, link-doorbell=off), or
 * whose descriptor is not an eventfd, means no doorbell.  A receiver that does not know the
 * flag ignores it, and the kernel closes the descriptor it did not ask for.
 *
 * Credits (IBTA 7.9, link-level flow control): when both HELLOs carry PIB_HELLO_F_CREDITS and
 * either carries PIB_HELLO_F_SWITCH or PIB_HELLO_F_CREDITS_ON, the data VLs (0-14) are
 * flow-controlled and the link never drops a data packet for lack of buffer.  (Between two CAs
 * nothing drops anyway, a CA stops reading rather than drop, and IBTA's 128 KiB window costs a
 * link whose round trip is a main loop's about half its bulk bandwidth: so two CAs run credits
 * only when one asks, docs/reference/hardware.md "Credits".)  VL15 (SMPs) is not
 * flow-controlled.  Each receiver has PIB_LINK_VL_BLOCKS blocks of PIB_LINK_BLOCK bytes per
 * data VL; a packet takes ceil(its LRH length in bytes / 64) blocks.
 * FLOW frames carry IBTA flow-control packets (struct pib_link_fc), one per VL, and both
 * directions of a VL ride in each: FCTBS is the sender's Total Blocks Sent on that VL, modulo
 * 4096; FCCL the Credit Limit its receiver grants, modulo 4096.
 *   - a transmitter may send a packet of n blocks on VL v only while
 *     (FCCL - (FCTBS + n)) mod 4096 <= 2048; otherwise the packet waits (PortXmitWait counts);
 *   - a receiver sets ABR (its Adjusted Blocks Received) to the FCTBS of each flow-control
 *     packet, adds n for each packet, and grants FCCL = ABR + the VL's free blocks (at most
 *     2048) modulo 4096;
 *   - each side sends a FLOW frame for every VL as soon as both HELLOs are in (no data moves
 *     before it: the credit limit starts at 0), again whenever its receiver freed blocks
 *     (a packet left its buffer: consumed by the HCA, or sent on by a switch), and whenever
 *     its transmitter runs out of credit (its FCTBS then lets the peer's receiver count what
 *     it dropped, which would otherwise be credit lost for good);
 *   - no side sends a data packet on a stream before both HELLOs are in, with or without
 *     credits: until then it does not know whether they run (a port that kept its state
 *     across a move, below, has data to send at once).
 * A data packet that arrives with no buffer left on its VL (the peer ignored its credits) is
 * dropped and counted (PortCounters:ExcessiveBufferOverrunErrors).  A FLOW frame that is not a
 * whole number of entries means framing is lost.  Unknown Op values and VL15 entries are
 * ignored.
 *
 * Moving (a port whose machine migrates, docs/explanation/migration.md): each port has a token,
 * a random 64-bit number drawn when its device is created and carried by its HELLO.  A port
 * that migrates keeps its token; a port that is created again (a rebooted machine) has a new
 * one.  When a machine is about to move, its port sends MOVE: its token, and how long the peer
 * should wait for it.  If the stream then closes within that time, the peer does not take its
 * port down: it holds the port's state (ACTIVE stays ACTIVE; packets sent meanwhile are lost,
 * as on a link that is retraining) and waits for a new stream whose HELLO carries the same port
 * GUID and token.  That HELLO recovers the link (PortCounters:LinkErrorRecoveryCounter) and
 * nothing else changes, for the SM or the guests.  Any other HELLO, or no HELLO within the
 * wait, and the port goes down as it would have at the close (PortCounters:LinkDownedCounter),
 * then trains with the new stream as usual.  The moved port does the same from its side: it
 * comes back in the state it left, waiting for its peer's HELLO with the peer's token.  A MOVE
 * with a wait of 0 withdraws the notice (the machine stayed, as after a snapshot).  A MOVE of
 * the wrong length means framing is lost; a wait longer than PIB_LINK_MOVE_WAIT_MAX_MS is cut
 * to it.  A peer that does not know MOVE never sends one, and a HELLO of 32 bytes has no token
 * (0): such a link retrains as before.
 */
#ifndef PIB_LINK_H
#define PIB_LINK_H

#include "pib_hw.h"

#define PIB_LINK_MAGIC         0x50
#define PIB_LINK_HDR_LEN       4
#define PIB_LINK_MAX_PAYLOAD   (4096 + 256) /* one IB packet: headers + 4 KiB MTU payload */

enum pib_link_frame_type {
	PIB_FRAME_HELLO   = 0x01, /* payload: struct pib_link_hello                         */
	PIB_FRAME_PACKET  = 0x02, /* payload: one IB packet (LRH onwards)                   */
	PIB_FRAME_FLOW    = 0x03, /* payload: 1-15 struct pib_link_fc (credits, above)       */
	PIB_FRAME_MOVE    = 0x04, /* payload: struct pib_link_move (moving, above)          */
};

struct pib_link_hdr {
	pib_u8  magic;          /* PIB_LINK_MAGIC                                             */
	pib_u8  type;           /* enum pib_link_frame_type                                   */
	pib_u16 length_be;      /* payload bytes, big-endian                                  */
};

#define PIB_LINK_PROTO_VERSION 1
/*
 * A HELLO is at least PIB_LINK_HELLO_MIN_LEN bytes (flags_be came later: a HELLO that short has
 * no flags).  A longer one comes from a newer peer: the extra bytes are ignored.
 */
#define PIB_LINK_HELLO_MIN_LEN 24
#define PIB_HELLO_F_DOORBELL   0x1  /* an eventfd rides with this HELLO: ring it (see above)  */
#define PIB_HELLO_F_CREDITS    0x2  /* this side runs credit-based flow control (see above)  */
#define PIB_HELLO_F_SWITCH     0x4  /* this side is a switch port                            */
#define PIB_HELLO_F_CREDITS_ON 0x8  /* ... and wants credits even between two CAs            */
/* What a ring adds to the peer's eventfd (an 8-byte write): STARTs count in the low 32 bits. */
#define PIB_LINK_RING_START    0x1ULL
#define PIB_LINK_RING_END      0x100000000ULL
struct pib_link_hello {
	pib_u32 version_be;     /* PIB_LINK_PROTO_VERSION                                     */
	pib_u32 mtu_be;         /* largest payload this side accepts, bytes                   */
	pib_u64 node_guid_be;
	pib_u64 port_guid_be;
	pib_u32 flags_be;       /* PIB_HELLO_F_*; others are 0 and ignored                    */
	pib_u32 reserved_be;    /* 0                                                          */
	pib_u64 token_be;       /* this port's token (moving, above); absent from a 32-byte   */
	                        /* HELLO, which has none                                      */
};

/* MOVE: this port's machine is about to move (or, wait_ms 0, stayed). */
#define PIB_LINK_MOVE_WAIT_MAX_MS 30000
struct pib_link_move {
	pib_u64 token_be;       /* the token the moved port's HELLO will carry                */
	pib_u32 wait_ms_be;     /* how long to hold the port for it; 0: the move is off       */
	pib_u32 reserved_be;    /* 0                                                          */
};

/* A flow-control packet (IBTA 7.9.4), without its LPCRC (the stream is reliable). */
#define PIB_LINK_BLOCK         64   /* bytes per credit block                                 */
#define PIB_LINK_VL_BLOCKS     2048 /* a receiver's buffer per data VL: 128 KiB, the most the */
                                    /* 12-bit credit arithmetic can grant                    */
#define PIB_LINK_FC_MOD        4096 /* FCTBS, FCCL and ABR count modulo 2^12                  */
#define PIB_LINK_FC_OP_NORMAL  0
#define PIB_LINK_FC_OP_INIT    1
#define PIB_LINK_DATA_VLS      15   /* VL0-VL14; VL15 is not flow-controlled                 */
struct pib_link_fc {
	pib_u16 op_fctbs_be;    /* [15:12] Op, [11:0] FCTBS                                    */
	pib_u16 vl_fccl_be;     /* [15:12] VL, [11:0] FCCL                                     */
};

/* ------------------------------------------------------------------------------------------
 * PACKET frames carry one InfiniBand packet, LRH first, with the IBTA header formats below
 * (all fields big-endian, "_be").  The link is a reliable byte stream, so the ICRC/VCRC are
 * not carried: corruption cannot happen on it, and a hostile peer can forge a CRC anyway.
 * The LRH packet length counts 4-byte words from the LRH to the end of the payload
 * (including pad).
 * ------------------------------------------------------------------------------------------ */
#define PIB_LID_PERMISSIVE     0xffff /* LRH DLID of a directed-route SMP (QP0 only)     */
#define PIB_LID_MULTICAST_BASE 0xc000 /* 0xc000..0xfffe: multicast LIDs                  */
#define PIB_LNH_IBA_LOCAL      0x2  /* LRH:LNH, BTH follows the LRH                         */
#define PIB_LNH_IBA_GLOBAL     0x3  /* LRH:LNH, a GRH follows the LRH                        */
struct pib_lrh {
	pib_u8  vl_lver;        /* [7:4] VL, [3:0] LVer (0)                                    */
	pib_u8  sl_lnh;         /* [7:4] SL, [1:0] LNH                                         */
	pib_u16 dlid_be;
	pib_u16 pktlen_be;      /* [10:0] packet length in 4-byte words                        */
	pib_u16 slid_be;
};

struct pib_grh {
	pib_u32 ver_tc_flow_be; /* [31:28] IPVer 6, [27:20] TClass, [19:0] FlowLabel          */
	pib_u16 paylen_be;
	pib_u8  next_hdr;       /* 0x1b: BTH                                                   */
	pib_u8  hop_limit;
	pib_u8  sgid[16];
	pib_u8  dgid[16];
};

#define PIB_BTH_SE             0x80 /* BTH byte 1: solicited event                          */
#define PIB_BTH_MIG            0x40 /* BTH byte 1: migration state                          */
#define PIB_BTH_PAD_SHIFT      4    /* BTH byte 1 [5:4]: pad count                          */
#define PIB_BTH_ACKREQ         0x80000000u /* in psn_be (host order after conversion)       */
/*
 * Congestion notification (IBTA Annex A10), in dqpn_be (host order after conversion): a
 * switch sets FECN on a packet that met a congested queue; the destination CA answers with
 * BECN.  Both lie in the byte the ICRC does not cover, so a switch may set them in flight.
 */
#define PIB_BTH_FECN           0x80000000u
#define PIB_BTH_BECN           0x40000000u
/* PSNs and QPNs are 24 bits: PIB_PSN_MASK, PIB_QPN_MASK (pib_hw.h). */
struct pib_bth {
	pib_u8  opcode;         /* enum pib_ib_opcode                                          */
	pib_u8  flags;          /* SE, M, PadCnt, TVer                                         */
	pib_u16 pkey_be;
	pib_u32 dqpn_be;        /* [31] FECN, [30] BECN, [23:0] destination QP                 */
	pib_u32 psn_be;         /* [31] AckReq, [23:0] PSN                                     */
};

struct pib_reth {               /* RDMA extended transport header                           */
	pib_u32 va_hi_be;       /* split so the struct has no 8-byte alignment padding          */
	pib_u32 va_lo_be;
	pib_u32 rkey_be;
	pib_u32 dmalen_be;
};

/* AETH syndrome, bits [7:5]: what kind of acknowledgement; [4:0]: credits, RNR timer or
 * NAK code. */
#define PIB_AETH_ACK           0x00 /* [4:0] credit count (0x1f: invalid / not used)        */
#define PIB_AETH_RNR_NAK       0x20 /* [4:0] RNR timer (IB encoding)                        */
#define PIB_AETH_NAK           0x60 /* [4:0] NAK code below                                 */
#define PIB_AETH_TYPE_MASK     0xe0
#define PIB_NAK_PSN_SEQ_ERR    0
#define PIB_NAK_INVALID_REQ    1
#define PIB_NAK_REM_ACCESS_ERR 2
#define PIB_NAK_REM_OP_ERR     3
#define PIB_NAK_INVALID_RD_REQ 4
struct pib_aeth {
	pib_u32 syn_msn_be;     /* [31:24] syndrome, [23:0] MSN                                */
};

struct pib_atomic_eth {
	pib_u32 va_hi_be;
	pib_u32 va_lo_be;
	pib_u32 rkey_be;
	pib_u32 swap_add_hi_be; /* swap (CS) or add (FA) data                                  */
	pib_u32 swap_add_lo_be;
	pib_u32 compare_hi_be;
	pib_u32 compare_lo_be;
};

struct pib_atomic_ack_eth {
	pib_u32 orig_hi_be;     /* original remote data                                        */
	pib_u32 orig_lo_be;
};

/*
 * FLUSH extended transport header (IBA 1.5, RDMA FLUSH): in a FLUSH request, right after the
 * BTH (an XRC request's XRCETH) and before its RETH.  [3:0] the placement types the flush must
 * reach (PIB_FLUSH_GLOBAL, PIB_FLUSH_PERSISTENT, include/pib_wqe.h), [5:4] its selectivity
 * (PIB_FLUSH_RANGE: the RETH's range; PIB_FLUSH_MR: the whole region the RETH's rkey names,
 * its address and length ignored), the rest reserved.
 */
struct pib_feth {
	pib_u32 bits_be;
};
#define PIB_FETH_PLT_MASK      0x0000000fu
#define PIB_FETH_SEL_SHIFT     4
#define PIB_FETH_SEL_MASK      0x00000030u

struct pib_deth {               /* datagram extended transport header (UD)                  */
	pib_u32 qkey_be;
	pib_u32 sqpn_be;        /* [23:0] source QP                                            */
};

/*
 * XRC extended transport header (IBTA 9.3.7): in every XRC request, right after the BTH
 * (before the RETH, AtomicETH, ImmDt or IETH).  It names the XRC SRQ at the target whose
 * receive WQEs, CQ and PD the request uses.  XRC responses (ACKs, READ responses, atomic ACKs)
 * carry none.
 */
struct pib_xrceth {
	pib_u32 srqn_be;        /* [23:0] XRC SRQ number                                       */
};

/*
 * IBTA base transport opcodes: [7:5] transport (RC 000, UC 001, UD 011, CNP 100, XRC 101),
 * [4:0] operation.  XRC's operations are RC's, with the same [4:0] codes: PIB_OP_XRC(RC opcode).
 */
#define PIB_OP_TRANSPORT_XRC   0xa0
#define PIB_OP_XRC(rc_op)      ((rc_op) | PIB_OP_TRANSPORT_XRC)
#define PIB_OP_OPERATION_MASK  0x1f
enum pib_ib_opcode {
	PIB_OP_RC_SEND_FIRST             = 0x00,
	PIB_OP_RC_SEND_MIDDLE            = 0x01,
	PIB_OP_RC_SEND_LAST              = 0x02,
	PIB_OP_RC_SEND_LAST_IMM          = 0x03,
	PIB_OP_RC_SEND_ONLY              = 0x04,
	PIB_OP_RC_SEND_ONLY_IMM          = 0x05,
	PIB_OP_RC_RDMA_WRITE_FIRST       = 0x06,
	PIB_OP_RC_RDMA_WRITE_MIDDLE      = 0x07,
	PIB_OP_RC_RDMA_WRITE_LAST        = 0x08,
	PIB_OP_RC_RDMA_WRITE_LAST_IMM    = 0x09,
	PIB_OP_RC_RDMA_WRITE_ONLY        = 0x0a,
	PIB_OP_RC_RDMA_WRITE_ONLY_IMM    = 0x0b,
	PIB_OP_RC_RDMA_READ_REQUEST      = 0x0c,
	PIB_OP_RC_RDMA_READ_RESP_FIRST   = 0x0d,
	PIB_OP_RC_RDMA_READ_RESP_MIDDLE  = 0x0e,
	PIB_OP_RC_RDMA_READ_RESP_LAST    = 0x0f,
	PIB_OP_RC_RDMA_READ_RESP_ONLY    = 0x10,
	PIB_OP_RC_ACKNOWLEDGE            = 0x11,
	PIB_OP_RC_ATOMIC_ACKNOWLEDGE     = 0x12,
	PIB_OP_RC_COMPARE_SWAP           = 0x13,
	PIB_OP_RC_FETCH_ADD              = 0x14,
	PIB_OP_RC_SEND_LAST_INV          = 0x16,
	PIB_OP_RC_SEND_ONLY_INV          = 0x17,
	PIB_OP_RC_FLUSH                  = 0x1c,  /* IBA 1.5: FETH, RETH; answered by a READ   */
	                                          /* response (ONLY) with no payload, once     */
	                                          /* what came before is placed as asked       */
	PIB_OP_RC_ATOMIC_WRITE           = 0x1d,  /* IBTA 1.5: RETH (DMA length 8), 8-byte    */
	                                          /* payload; answered by an ACK              */
	PIB_OP_UC_SEND_FIRST             = 0x20,
	PIB_OP_UC_SEND_MIDDLE            = 0x21,
	PIB_OP_UC_SEND_LAST              = 0x22,
	PIB_OP_UC_SEND_LAST_IMM          = 0x23,
	PIB_OP_UC_SEND_ONLY              = 0x24,
	PIB_OP_UC_SEND_ONLY_IMM          = 0x25,
	PIB_OP_UC_RDMA_WRITE_FIRST       = 0x26,
	PIB_OP_UC_RDMA_WRITE_MIDDLE      = 0x27,
	PIB_OP_UC_RDMA_WRITE_LAST        = 0x28,
	PIB_OP_UC_RDMA_WRITE_LAST_IMM    = 0x29,
	PIB_OP_UC_RDMA_WRITE_ONLY        = 0x2a,
	PIB_OP_UC_RDMA_WRITE_ONLY_IMM    = 0x2b,
	PIB_OP_UD_SEND_ONLY              = 0x64,
	PIB_OP_UD_SEND_ONLY_IMM          = 0x65,
	PIB_OP_CNP                       = 0x80,  /* IBTA A10.2.2.1.1: a congestion notification */
	                                          /* from a UD or UC receiver to the sender of */
	                                          /* a packet that came with FECN: LRH (its SL), */
	                                          /* BTH (its P_Key; DestQP: the sending QP,   */
	                                          /* with BECN; PSN 0), nothing after          */
};

PIB_STATIC_ASSERT(sizeof(struct pib_lrh) == 8, "LRH");
PIB_STATIC_ASSERT(sizeof(struct pib_grh) == 40, "GRH");
PIB_STATIC_ASSERT(sizeof(struct pib_bth) == 12, "BTH");
PIB_STATIC_ASSERT(sizeof(struct pib_reth) == 16, "RETH");
PIB_STATIC_ASSERT(sizeof(struct pib_aeth) == 4, "AETH");
PIB_STATIC_ASSERT(sizeof(struct pib_atomic_eth) == 28, "AtomicETH");
PIB_STATIC_ASSERT(sizeof(struct pib_atomic_ack_eth) == 8, "AtomicAckETH");
PIB_STATIC_ASSERT(sizeof(struct pib_deth) == 8, "DETH");
PIB_STATIC_ASSERT(sizeof(struct pib_xrceth) == 4, "XRCETH");
PIB_STATIC_ASSERT(sizeof(struct pib_feth) == 4, "FETH");
PIB_STATIC_ASSERT(sizeof(struct pib_link_hdr) == PIB_LINK_HDR_LEN, "link header");
PIB_STATIC_ASSERT(sizeof(struct pib_link_hello) == 40, "hello frame");
PIB_STATIC_ASSERT(sizeof(struct pib_link_move) == 16, "move frame");
PIB_STATIC_ASSERT(sizeof(struct pib_link_fc) == 4, "flow-control packet");

#endif /* PIB_LINK_H */
