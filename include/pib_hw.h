/* SPDX-License-Identifier: GPL-2.0-or-later OR Linux-OpenIB */
/*
 * pib_hw.h - the pib HCA hardware interface.
 *
 * This one header is the contract between the device model (qemu-hw/), the Linux driver
 * (guest-driver/), the rdma-core provider (guest-provider/) and the qtests (tests/qtest/).
 * Every register, command, queue entry and link frame is defined here once; docs/reference/hardware.md
 * explains them in prose.  All multi-byte fields are little-endian in guest memory and in
 * registers; link frames (pib_link.h) are big-endian like IB wire headers.
 *
 * Field comments give the bit range and the owner: "dev" means written by the device, "drv"
 * by the driver (or the provider, for user queues).
 *
 * The header compiles in three worlds: QEMU (glib/stdint), the kernel (linux/types.h) and
 * userspace (stdint.h).  Only fixed-width types and static asserts are used.
 */
#ifndef PIB_HW_H
#define PIB_HW_H

#if defined(__KERNEL__)
#include <linux/types.h>
#include <linux/stddef.h>
#include <linux/build_bug.h>
#define PIB_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <assert.h>
#define PIB_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

#ifndef __KERNEL__
typedef uint8_t  pib_u8;
typedef uint16_t pib_u16;
typedef uint32_t pib_u32;
typedef uint64_t pib_u64;
#else
typedef u8  pib_u8;
typedef u16 pib_u16;
typedef u32 pib_u32;
typedef u64 pib_u64;
#endif

/* ------------------------------------------------------------------------------------------
 * PCI identity
 *
 * 1af4:10f0..10ff is the range the QEMU PCI ID allocation (docs/specs/pci-ids.txt in QEMU)
 * leaves "available for experimental usage without registration".  Linux's virtio_pci only
 * claims 1af4:1000..107f, so it leaves this device alone.  A product would need a registered ID.
 * ------------------------------------------------------------------------------------------ */
#define PIB_PCI_VENDOR_ID           0x1af4
#define PIB_PCI_DEVICE_ID           0x10f0
#define PIB_PCI_SUBSYS_VENDOR_ID    0x1af4
#define PIB_PCI_SUBSYS_ID           0x10f0
#define PIB_PCI_REVISION            0x01
#define PIB_PCI_CLASS_INFINIBAND    0x0c06 /* PCI class "Serial bus controller: InfiniBand" */

/* BARs.  BAR0: control registers, then the device memory if the device has some (see "Device
 * memory" below).  BAR2: UAR (doorbell) pages.  BAR4: MSI-X table and PBA. */
#define PIB_BAR_REGS                0
#define PIB_BAR_UAR                 2
#define PIB_BAR_MSIX                4
#define PIB_REGS_SIZE               0x1000
#define PIB_UAR_PAGE_SHIFT          12
#define PIB_UAR_PAGE_SIZE           (1u << PIB_UAR_PAGE_SHIFT)
#define PIB_NUM_UARS                256     /* UAR page 0 is the kernel driver's own */
#define PIB_UAR_BAR_SIZE            (PIB_NUM_UARS * PIB_UAR_PAGE_SIZE)

/* MSI-X vectors.  Vector 0: admin completions.  Vector 1: async events.  2..: completion EQs. */
#define PIB_MSIX_VEC_ADMIN          0
#define PIB_MSIX_VEC_ASYNC          1
#define PIB_MSIX_VEC_CEQ            2
#define PIB_MSIX_VECTORS            8

#define PIB_VERSION_MAJOR           1
#define PIB_VERSION_MINOR           0
#define PIB_MAGIC                   0x31424950u /* "PIB1" read as a little-endian u32 */

/* ------------------------------------------------------------------------------------------
 * BAR0 register map.  All registers are 32 bits wide and must be accessed with 32-bit
 * accesses; other sizes are ignored (and traced as guest errors).  64-bit addresses are
 * split into _LO/_HI halves; the device latches them when the queue is enabled.
 * ------------------------------------------------------------------------------------------ */
struct pib_regs {
	pib_u32 magic;        /* 0x000 RO  PIB_MAGIC                                          */
	pib_u32 version;      /* 0x004 RO  [31:16] major, [15:0] minor                        */
	pib_u32 caps;         /* 0x008 RO  PIB_CAP_* feature bits                             */
	pib_u32 status;       /* 0x00c RO  PIB_STATUS_*                                       */
	pib_u32 control;      /* 0x010 RW  PIB_CTRL_*                                         */
	pib_u32 aq_depth;     /* 0x014 RW  admin queue entries, power of two 2..4096          */
	pib_u32 aq_sq_lo;     /* 0x018 RW  admin command ring base, 4 KiB aligned, [31:0]     */
	pib_u32 aq_sq_hi;     /* 0x01c RW                                         [63:32]     */
	pib_u32 aq_cq_lo;     /* 0x020 RW  admin completion ring base, 4 KiB aligned          */
	pib_u32 aq_cq_hi;     /* 0x024 RW                                                     */
	pib_u32 aq_db;        /* 0x028 WO  admin SQ producer index (free-running, mod 2^32)   */
	pib_u32 aeq_depth;    /* 0x02c RW  async event queue entries, power of two 2..4096    */
	pib_u32 aeq_lo;       /* 0x030 RW  async event ring base, 4 KiB aligned               */
	pib_u32 aeq_hi;       /* 0x034 RW                                                     */
	pib_u32 aeq_db;       /* 0x038 WO  async event consumer index (free-running)          */
	pib_u32 num_uars;     /* 0x03c RO  UAR pages in BAR2                                  */
	pib_u32 err_count;    /* 0x040 RO  guest errors seen since reset (saturating)         */
	pib_u32 err_last;     /* 0x044 RO  PIB_GERR_* code of the last guest error            */
	pib_u32 link_state;   /* 0x048 RO  PIB_LINK_* (physical link, mirrors the port)       */
	pib_u32 aeq_lost;     /* 0x04c RO  async events dropped because the AEQ was full      */
	pib_u32 scratch;      /* 0x050 RW  free for driver use; reset to 0                    */
	pib_u32 ceq_depth;    /* 0x054 RW  completion event queue entries, power of two       */
	                      /*           2..4096; 0 = no CEQ (no completion interrupts)     */
	pib_u32 ceq_lo;       /* 0x058 RW  completion event ring base, 4 KiB aligned          */
	pib_u32 ceq_hi;       /* 0x05c RW                                                     */
	pib_u32 ceq_db;       /* 0x060 WO  CEQ consumer index (free-running)                  */
};

/*
 * PIB_REGS(X) calls X(ID, field) once per register, in address order.  The offsets are taken
 * from the struct (as QEMU's include/block/nvme.h does), so the struct above is the only
 * place a register's address is written down: the enum below is PIB_REG_<ID>, and the
 * device's register names (traces) come from the same list.
 */
#define PIB_REGS(X)                     \
	X(MAGIC,      magic)            \
	X(VERSION,    version)          \
	X(CAPS,       caps)             \
	X(STATUS,     status)           \
	X(CONTROL,    control)          \
	X(AQ_DEPTH,   aq_depth)         \
	X(AQ_SQ_LO,   aq_sq_lo)         \
	X(AQ_SQ_HI,   aq_sq_hi)         \
	X(AQ_CQ_LO,   aq_cq_lo)         \
	X(AQ_CQ_HI,   aq_cq_hi)         \
	X(AQ_DB,      aq_db)            \
	X(AEQ_DEPTH,  aeq_depth)        \
	X(AEQ_LO,     aeq_lo)           \
	X(AEQ_HI,     aeq_hi)           \
	X(AEQ_DB,     aeq_db)           \
	X(NUM_UARS,   num_uars)         \
	X(ERR_COUNT,  err_count)        \
	X(ERR_LAST,   err_last)         \
	X(LINK_STATE, link_state)       \
	X(AEQ_LOST,   aeq_lost)         \
	X(SCRATCH,    scratch)          \
	X(CEQ_DEPTH,  ceq_depth)        \
	X(CEQ_LO,     ceq_lo)           \
	X(CEQ_HI,     ceq_hi)           \
	X(CEQ_DB,     ceq_db)

#define PIB_REG_ENUM_ENTRY(id, field) PIB_REG_##id = offsetof(struct pib_regs, field),
enum pib_reg_offset {
	PIB_REGS(PIB_REG_ENUM_ENTRY)
};
#undef PIB_REG_ENUM_ENTRY

/* Every register is in the list: as many entries as the struct has 32-bit fields. */
#define PIB_REG_COUNT_ONE(id, field) + 1
PIB_STATIC_ASSERT(sizeof(struct pib_regs) == 4 * (0 PIB_REGS(PIB_REG_COUNT_ONE)),
		  "PIB_REGS lists every register of struct pib_regs");
#undef PIB_REG_COUNT_ONE

/* caps */
#define PIB_CAP_AEQ            (1u << 0)  /* async event queue present */

/* status (RO) */
#define PIB_STATUS_READY       (1u << 0)  /* CONTROL.ENABLE accepted, queues latched     */
#define PIB_STATUS_FATAL       (1u << 1)  /* device hit a guest error it cannot recover   */
                                          /* from (e.g. DMA to the admin CQ failed);      */
                                          /* only a reset clears it                       */

/* control (RW) */
#define PIB_CTRL_ENABLE        (1u << 0)  /* 0->1: latch AQ/AEQ/CEQ config, start         */
                                          /* (ignored while FATAL); 1->0: stop            */
#define PIB_CTRL_RESET         (1u << 1)  /* write 1: function-level reset; reads as 0    */

/*
 * What CONTROL.ENABLE accepts: AQ_DEPTH, AEQ_DEPTH and CEQ_DEPTH a power of two in
 * [PIB_QUEUE_MIN_DEPTH, PIB_QUEUE_MAX_DEPTH] (CEQ_DEPTH may also be 0), ring bases aligned to
 * PIB_QUEUE_BASE_ALIGN.
 */
#define PIB_QUEUE_MIN_DEPTH    2
#define PIB_QUEUE_MAX_DEPTH    4096
#define PIB_QUEUE_BASE_ALIGN   4096

/* link_state and the port's physical state */
#define PIB_LINK_DOWN          0          /* no peer connected to the link chardev         */
#define PIB_LINK_UP            1          /* peer connected and hello exchanged            */

/*
 * err_last: what the last guest error was; err_count counts them all.  PIB_GUEST_ERRORS(X)
 * calls X(ID, value) once per code: the enum below is PIB_GERR_<ID>, and the driver's
 * messages name the code from the same list.
 */
#define PIB_GUEST_ERRORS(X)                                                                    \
	X(NONE,            0)                                                                  \
	X(BAD_ACCESS,      1)  /* register access of the wrong size or alignment, or         */ \
	                       /* outside the map; a write to a read-only register or to     */ \
	                       /* CONTROL's reserved bits; AEQ_DB or CEQ_DB while that       */ \
	                       /* queue is not running                                       */ \
	X(BAD_CONFIG,      2)  /* ENABLE with bad depth or unaligned ring base               */ \
	X(AQ_DB_DISABLED,  3)  /* admin doorbell while not READY                             */ \
	X(AQ_DB_RANGE,     4)  /* admin doorbell more than depth ahead of the consumer,      */ \
	                       /* or moving backwards                                        */ \
	X(DMA,             5)  /* a DMA to or from guest memory failed                       */ \
	X(UAR_DB_BAD_OBJ,  6)  /* UAR doorbell for a QP/CQ/SRQ that does not exist or was    */ \
	                       /* created on another UAR page (or an RQ doorbell for a QP    */ \
	                       /* on an SRQ)                                                 */ \
	X(UAR_DB_BAD_OFF,  7)  /* UAR access at an undefined offset or size                  */ \
	X(AEQ_DB_RANGE,    8)  /* AEQ consumer index ahead of the producer                   */ \
	X(CEQ_DB_RANGE,    9)  /* CEQ consumer index ahead of the producer                   */ \
	X(WQE,             10) /* a malformed WQE (an opcode the QP type does not carry,     */ \
	                       /* unknown flags, too many SGEs, inline data too long, ...);  */ \
	                       /* the QP also goes to ERROR                                  */ \
	X(UAR_DB_RANGE,    11) /* SQ/RQ/SRQ doorbell producer index more than depth ahead    */ \
	                       /* of the device's consumer index, or moving backwards; CQ    */ \
	                       /* doorbell consumer index past the producer                  */ \
	X(DBREC_RANGE,     12) /* RQ/SRQ doorbell record (struct pib_recv_dbrec) producer    */ \
	                       /* index more than depth ahead of the device's consumer       */ \
	                       /* index, or moving backwards: the record is not believed     */

#define PIB_GERR_ENUM_ENTRY(id, value) PIB_GERR_##id = value,
enum pib_guest_error {
	PIB_GUEST_ERRORS(PIB_GERR_ENUM_ENTRY)
};
#undef PIB_GERR_ENUM_ENTRY

/* ------------------------------------------------------------------------------------------
 * UAR pages (BAR2).  Page N belongs to whoever the driver gave it to (page 0: the kernel;
 * others: one per user context, mmap'ed non-cached).  Doorbells are single 64-bit writes,
 * so the object number and the index arrive together.  A doorbell naming an object that
 * was not created on this UAR page is dropped and counted (PIB_GERR_UAR_DB_BAD_OBJ).
 * PIB_UAR_DOORBELLS(X) calls X(ID, offset) once per doorbell of a page, PIB_UAR_REGISTERS(X)
 * once per read-only register: the enum below is PIB_UAR_<ID>, and the device decodes and
 * names UAR accesses from the same lists.  Any other access (a read of a doorbell, a write
 * of a register, a size other than the one listed) is PIB_GERR_UAR_DB_BAD_OFF.
 * ------------------------------------------------------------------------------------------ */
#define PIB_UAR_DOORBELLS(X)                                                                   \
	X(SQ_DB,  0x00)  /* [23:0] QPN, [63:32] SQ producer index                            */ \
	X(RQ_DB,  0x08)  /* [23:0] QPN, [63:32] RQ producer index                            */ \
	X(CQ_DB,  0x10)  /* [23:0] CQN, [24] arm, [25] solicited only,                       */ \
	                 /* [63:32] CQ consumer index                                         */ \
	X(SRQ_DB, 0x18)  /* [23:0] SRQN, [63:32] SRQ producer index                          */

/*
 * The device clock, in every UAR page, so that the driver (page 0) and each process (its own
 * page, already mapped for its doorbells) read it without a system call.  It is a free-running
 * 64-bit count of nanoseconds (PIB_CLOCK_KHZ: one tick per ns) that starts at 0 when the
 * machine starts and never goes back; it stands still while the machine is stopped.  It is
 * read in two 32-bit reads of its halves.  A reader that wants the whole reads HI, LO and HI
 * again, and if the two HI differ (LO wrapped in between) reads them all again: as mlx4 and
 * mlx5 read their internal timer.  The completion timestamps of timestamped CQEs
 * (struct pib_cqe_ts, pib_wqe.h) are readings of this clock.
 */
#define PIB_UAR_REGISTERS(X)                                                                   \
	X(CLOCK_LO, 0x20)  /* RO, 32-bit reads: device clock [31:0]                          */ \
	X(CLOCK_HI, 0x24)  /* RO, 32-bit reads: device clock [63:32]                         */

#define PIB_UAR_ENUM_ENTRY(id, offset) PIB_UAR_##id = offset,
enum pib_uar_offset {
	PIB_UAR_DOORBELLS(PIB_UAR_ENUM_ENTRY)
	PIB_UAR_REGISTERS(PIB_UAR_ENUM_ENTRY)
};
#undef PIB_UAR_ENUM_ENTRY
#define PIB_DB_OBJ_MASK        0x00ffffffu
#define PIB_DB_CQ_ARM          (1u << 24)
#define PIB_DB_CQ_SOLICITED    (1u << 25)
#define PIB_DB_INDEX_SHIFT     32
#define PIB_CLOCK_KHZ          1000000u /* the device clock ticks once a nanosecond          */

/* ------------------------------------------------------------------------------------------
 * The phase bit.  Every ring the device produces (the admin CQ, the AEQ, the CEQ and the CQs)
 * tells a new entry from an old one the same way.  The device writes entry i with its phase
 * bit (bit 0 of the entry's flags byte: PIB_ACQE_F_PHASE, PIB_AEQE_F_PHASE, PIB_CEQE_F_PHASE,
 * PIB_CQE_F_PHASE) set on the first pass over the ring, clear on the second, and so on; ring
 * depths are powers of two, so the pass's parity is the bit i & depth.  Rings start zeroed, so
 * nothing is new before the device writes.
 *
 * Publishing: the device writes the rest of the entry first and the dword that holds the
 * phase bit last, so an entry whose phase bit is new is whole.  Consuming: the consumer owns
 * entry i once pib_ring_owned() says so, and reads the rest of it only after a read barrier.
 * ------------------------------------------------------------------------------------------ */

/* The phase bit the device writes into entry idx of a ring of depth entries: 1 or 0. */
static inline pib_u8 pib_ring_phase(pib_u32 idx, pib_u32 depth)
{
	return (idx & depth) ? 0 : 1;
}

/* Has the device written entry idx on this pass?  phase_bit: the entry's flags & *_F_PHASE. */
static inline bool pib_ring_owned(pib_u32 phase_bit, pib_u32 idx, pib_u32 depth)
{
	return (phase_bit != 0) == (pib_ring_phase(idx, depth) != 0);
}

/* ------------------------------------------------------------------------------------------
 * Admin queue.  A ring of 64-byte commands (driver produces, device consumes) and a ring of
 * 16-byte completions (device produces, driver consumes).  Both have aq_depth entries.
 *
 * Flow: the driver writes command i at slot (i % depth) and writes i+1 to AQ_DB.  The device
 * executes commands in order, writes the completion for command i at slot (i % depth) of the
 * CQ, with the phase bit of that pass (pib_ring_phase(): 1 on the first pass, 0 on the second,
 * ...), then raises MSI-X vector PIB_MSIX_VEC_ADMIN.  The driver owns a completion once
 * pib_ring_owned() says so.  Because there is one CQ slot per command
 * slot and the driver never has more than depth commands outstanding, the CQ cannot overflow.
 *
 * Commands that return more than the 8 bytes of the completion write it by DMA to
 * resp_addr (resp_len bytes at most; the device writes min(resp_len, its size)).
 *
 * PIB_ADMIN_OPCODES(X) calls X(ID, name, opcode) once per command, in opcode order: the enum
 * below is PIB_CMD_<ID>; the device's handler for it is pib_cmd_<name>() (qemu-hw/hca/) and
 * so is the driver's typed call (guest-driver/pib_com_cmd.c); the names in traces and messages
 * come from this list too.  A new command is one line here plus its handler.
 * ------------------------------------------------------------------------------------------ */
#define PIB_ADMIN_OPCODES(X)                                                                   \
	X(QUERY_DEVICE,   query_device,   0x01) /* resp: struct pib_device_attr              */ \
	X(QUERY_PORT,     query_port,     0x02) /* in: port_num; resp: struct pib_port_attr  */ \
	X(SET_PORT,       set_port,       0x03) /* in: struct pib_cmd_set_port (LID, SM LID, */ \
	                                        /*     caps)                                 */ \
	X(QUERY_PKEY,     query_pkey,     0x04) /* in: port_num, index; result0: P_Key       */ \
	X(QUERY_GID,      query_gid,      0x05) /* in: port_num, index; resp: 16-byte GID    */ \
	                                        /*     (prefix, then port GUID; big-endian)  */ \
	X(ALLOC_UAR,      alloc_uar,      0x06) /* result0: UAR page index (1..num_uars-1)   */ \
	X(DEALLOC_UAR,    dealloc_uar,    0x07) /* in: uar index                             */ \
	X(NOP,            nop,            0x08) /* does nothing; result0 echoes in.nop.value */ \
	/* Data-path objects.  Object numbers come back in result0. */                         \
	X(CREATE_PD,      create_pd,      0x10) /* result0: PDN                              */ \
	X(DESTROY_PD,     destroy_pd,     0x11) /* in.obj.num: PDN; BUSY while an MR/QP uses */ \
	X(REG_MR,         reg_mr,         0x12) /* in.reg_mr; result0: lkey, result1: rkey   */ \
	X(DEREG_MR,       dereg_mr,       0x13) /* in.obj.num: lkey                          */ \
	X(CREATE_CQ,      create_cq,      0x14) /* in.create_cq; result0: CQN                */ \
	X(DESTROY_CQ,     destroy_cq,     0x15) /* in.obj.num: CQN; BUSY while a QP uses it  */ \
	X(CREATE_QP,      create_qp,      0x16) /* in.mbox -> struct pib_qp_create; result0: */ \
	                                        /*     QPN                                   */ \
	X(MODIFY_QP,      modify_qp,      0x17) /* in.mbox -> struct pib_qp_attr, mbox.obj = */ \
	                                        /*     QPN                                   */ \
	X(QUERY_QP,       query_qp,       0x18) /* in.obj.num: QPN; resp: struct pib_qp_attr */ \
	X(DESTROY_QP,     destroy_qp,     0x19) /* in.obj.num: QPN; outstanding WRs are      */ \
	                                        /*     flushed first                         */ \
	X(CREATE_SRQ,     create_srq,     0x1a) /* in.create_srq; result0: SRQN              */ \
	X(MODIFY_SRQ,     modify_srq,     0x1b) /* in.modify_srq                             */ \
	X(QUERY_SRQ,      query_srq,      0x1c) /* in.obj.num: SRQN; result0: limit,         */ \
	                                        /*     result1: depth                        */ \
	X(DESTROY_SRQ,    destroy_srq,    0x1d) /* in.obj.num: SRQN; BUSY while a QP uses it */ \
	X(ALLOC_MW,       alloc_mw,       0x1e) /* in.alloc_mw; result0: rkey of the         */ \
	                                        /*     (unbound) window                      */ \
	X(DEALLOC_MW,     dealloc_mw,     0x1f) /* in.obj.num: the rkey ALLOC_MW returned    */ \
	                                        /*     (or the current one)                  */ \
	X(QUERY_COUNTERS, query_counters, 0x20) /* resp: u64 counters[PIB_CNT_MAX]           */ \
	                                        /*     (enum pib_counter)                    */ \
	/* Management (include/pib_mad.h). */                                                  \
	X(MAD_IFC,        mad_ifc,        0x21) /* in.mbox -> struct pib_mad_ifc_in; resp:   */ \
	                                        /*     the 256-byte response MAD; result0:   */ \
	                                        /*     PIB_MAD_IFC_*                         */ \
	X(SET_NODE_DESC,  set_node_desc,  0x22) /* in.mbox -> 64 bytes of NodeDescription    */ \
	/* Multicast. */                                                                       \
	X(ATTACH_MCAST,   attach_mcast,   0x23) /* in.mcast: a UD QP joins a group           */ \
	X(DETACH_MCAST,   detach_mcast,   0x24) /* in.mcast: ... leaves it (BAD_PARAM if it  */ \
	                                        /*     was not attached)                     */ \
	X(ALLOC_MR,       alloc_mr,       0x25) /* in.alloc_mr: a fast-registration MR;      */ \
	                                        /*     result0: lkey, result1: rkey          */ \
	X(RESIZE_CQ,      resize_cq,      0x26) /* in.resize_cq: the CQ moves to a new ring, */ \
	                                        /*     unread CQEs with it                   */ \
	X(REREG_MR,       rereg_mr,       0x27) /* in.rereg_mr: an MR's translation, PD or   */ \
	                                        /*     access change; its keys stay          */ \
	/* XRC (docs/reference/hardware.md, "XRC"). */                                                  \
	X(ALLOC_XRCD,     alloc_xrcd,     0x28) /* result0: XRCD number (1..)                */ \
	X(DEALLOC_XRCD,   dealloc_xrcd,   0x29) /* in.obj.num: XRCD; BUSY while an SRQ or QP */ \
	                                        /*     is in it                              */ \
	X(MODIFY_CQ,      modify_cq,      0x2a) /* in.modify_cq: a CQ's event moderation     */ \
	/* Device memory (see "Device memory" below). */                                       \
	X(ALLOC_DM,       alloc_dm,       0x2b) /* in.alloc_dm; result0: DM number (1..),    */ \
	                                        /*     result1: its byte offset in the DM    */ \
	X(DEALLOC_DM,     dealloc_dm,     0x2c) /* in.obj.num: DM; BUSY while an MR is in it */ \
	X(REG_DM_MR,      reg_dm_mr,      0x2d) /* in.reg_dm_mr: an MR over device memory;   */ \
	                                        /*     result0: lkey, result1: rkey          */

#define PIB_CMD_ENUM_ENTRY(id, name, opcode) PIB_CMD_##id = opcode,
enum pib_admin_opcode {
	PIB_ADMIN_OPCODES(PIB_CMD_ENUM_ENTRY)
	PIB_CMD_MAX                             /* one past the highest opcode */
};
#undef PIB_CMD_ENUM_ENTRY

/* PIB_ADMIN_STATUSES(X) calls X(ID, value) once per completion status: PIB_AQ_<ID>. */
#define PIB_ADMIN_STATUSES(X)                                                                  \
	X(OK,           0x00)                                                                  \
	X(BAD_OPCODE,   0x01) /* opcode not known                                            */ \
	X(BAD_PARAM,    0x02) /* a field is out of range                                     */ \
	X(BAD_RESOURCE, 0x03) /* object number does not exist                                */ \
	X(NO_RESOURCES, 0x04) /* table full                                                  */ \
	X(BAD_STATE,    0x05) /* object is in the wrong state for this command               */ \
	X(DMA_ERROR,    0x06) /* resp_addr (or another address) could not be accessed        */ \
	X(BUSY,         0x07) /* object still referenced                                     */

#define PIB_AQ_ENUM_ENTRY(id, value) PIB_AQ_##id = value,
enum pib_admin_status {
	PIB_ADMIN_STATUSES(PIB_AQ_ENUM_ENTRY)
};
#undef PIB_AQ_ENUM_ENTRY

struct pib_cmd_port_index {     /* QUERY_PORT, QUERY_PKEY, QUERY_GID */
	pib_u8  port_num;       /* 1 (the only port)                                          */
	pib_u8  rsvd[3];
	pib_u32 index;          /* table index for QUERY_PKEY / QUERY_GID                     */
};

/*
 * SET_PORT: what the driver may set on the port itself.  The LID, SM LID and LMC are an SM's to
 * set (through the SMA, PortInfo Set), so PIB_SET_PORT_LID and _SM are refused (BAD_STATE)
 * unless the device runs without an SM (its `lid` property set: the port goes ACTIVE on its
 * own).  PIB_SET_PORT_CAPS sets and clears the CapabilityMask bits that say which agents run
 * above the port (ib_core's modify_port: CM, SM); the bits the firmware itself implements
 * (PIB_PORT_CAP_FIRMWARE in pib_mad.h) stay set.  A change of the mask raises trap 144.
 */
#define PIB_SET_PORT_LID       (1u << 0)
#define PIB_SET_PORT_SM        (1u << 1)
#define PIB_SET_PORT_CAPS      (1u << 2)
struct pib_cmd_set_port {
	pib_u8  port_num;
	pib_u8  sm_sl;          /* [3:0]                                                      */
	pib_u8  lmc;            /* [2:0]                                                      */
	pib_u8  rsvd;
	pib_u32 mask;           /* PIB_SET_PORT_*: which fields below apply                   */
	pib_u16 lid;            /* 0 or 0xffff are rejected                                    */
	pib_u16 sm_lid;
	pib_u32 cap_set;        /* port_cap_flags bits to set (IB_PORT_* in PortInfo)          */
	pib_u32 cap_clr;        /* bits to clear                                               */
};

/* REG_MR: the MR maps [iova, iova + length) onto the pages in the page list (PBL) at
 * pbl_addr: npages little-endian u64 guest-physical addresses of 4 KiB pages, pbl[0] being
 * the page that holds iova.  The device copies the list at registration.  With
 * PIB_MR_F_PHYS the MR is the identity map of guest-physical memory (the kernel's DMA MR:
 * iova 0, length 2^64-1, no page list).  lkey == rkey: [31:8] MR index, [7:0] a key byte
 * that changes on every reuse of the index so that stale keys fail. */
#define PIB_MR_F_PHYS          (1u << 0)
/* access flags: the IB/verbs bit values */
#define PIB_ACCESS_LOCAL_WRITE   (1u << 0)
#define PIB_ACCESS_REMOTE_WRITE  (1u << 1)
#define PIB_ACCESS_REMOTE_READ   (1u << 2)
#define PIB_ACCESS_REMOTE_ATOMIC (1u << 3)
#define PIB_ACCESS_MW_BIND       (1u << 4)
#define PIB_ACCESS_FLUSH_GLOBAL  (1u << 8)  /* remote RDMA FLUSH to global visibility: on an */
                                            /* MR, of its memory; on a QP (MODIFY_QP), of    */
                                            /* the QP's MRs.  There is no persistent one     */
                                            /* (pib_wqe.h, PIB_FLUSH_PERSISTENT)             */
#define PIB_ACCESS_REMOTE        (PIB_ACCESS_REMOTE_WRITE | PIB_ACCESS_REMOTE_READ | \
				  PIB_ACCESS_REMOTE_ATOMIC)
#define PIB_ACCESS_ALL           (PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_REMOTE | \
				  PIB_ACCESS_MW_BIND | PIB_ACCESS_FLUSH_GLOBAL)
struct pib_cmd_reg_mr {
	pib_u32 pdn;
	pib_u32 access;         /* PIB_ACCESS_*                                               */
	pib_u64 iova;
	pib_u64 length;
	pib_u64 pbl_addr;       /* guest-physical address of the page list                    */
	pib_u32 npages;         /* entries in the page list                                   */
	pib_u32 flags;          /* PIB_MR_F_*                                                 */
};

/*
 * REREG_MR: change a registered MR (REG_MR's, not a fast-registration or physical one) in
 * place: with PIB_REREG_TRANS its range and pages (iova, length, the page list, as REG_MR
 * takes them), with PIB_REREG_PD its PD, with PIB_REREG_ACCESS its access (REG_MR's rules:
 * remote write or atomic need local write).  Its lkey and rkey stay, so a peer that holds the
 * rkey keeps it.  All changes apply together or none does: no such key is BAD_RESOURCE (so is
 * no such PD), a window bound to the MR is BUSY, anything REG_MR would refuse is BAD_PARAM
 * (NO_RESOURCES for the page list budget), an unreadable page list DMA_ERROR.  Work already
 * executing may see the MR before or after the change (the IBTA leaves it undefined); the
 * next access through the keys sees the new MR.
 */
#define PIB_REREG_TRANS        (1u << 0)
#define PIB_REREG_PD           (1u << 1)
#define PIB_REREG_ACCESS       (1u << 2)
struct pib_cmd_rereg_mr {
	pib_u32 key;            /* the MR's lkey                                              */
	pib_u32 mask;           /* PIB_REREG_*, at least one                                  */
	pib_u32 pdn;            /* PD: the new PD                                             */
	pib_u32 access;         /* ACCESS: PIB_ACCESS_*                                       */
	pib_u64 iova;           /* TRANS: as REG_MR's                                         */
	pib_u64 length;
	pib_u64 pbl_addr;
	pib_u32 npages;
	pib_u32 rsvd;
};

/*
 * Device memory: dm_size bytes of memory on the card (the pib-hca property dm-size; QUERY_DEVICE
 * reports it as max_dm_size, 0 when the device has none), which the host reaches in BAR0 at
 * dm_bar_offset and the device reaches without crossing PCIe.  It is ordinary memory to the
 * host: reads and writes of any size, mapped write-combining into a process (ibv_alloc_dm,
 * ibv_memcpy_to_dm).  As mlx5's MEMIC, the device owns its allocation:
 *
 * ALLOC_DM takes length bytes (1..dm_size) and returns a DM number and the byte offset of its
 * first byte in the device memory.  An allocation is whole 4 KiB pages (PIB_DM_PAGE_SIZE, so
 * that each can be mapped into its own process), the lowest free run that fits; its pages read
 * zero.  A length of 0 or over dm_size is BAD_PARAM; no free run of the pages it needs is
 * NO_RESOURCES.  DEALLOC_DM frees one; while an MR lies in it, BUSY.
 *
 * REG_DM_MR registers [iova, iova + length) onto [offset, offset + length) of DM dm, offset
 * counted from the DM's first byte; the range must lie in the length ALLOC_DM was given (not
 * merely its pages); it may be empty (ib_core allows a DM MR of length 0).  The MR then works as
 * any other: SGEs, RDMA and atomics reach the device memory through its keys, and DEREG_MR
 * frees it.  REREG_MR refuses it (BAD_PARAM).  No such PD or DM is BAD_RESOURCE.
 *
 * dm-size is 0 or a power of two from 4 KiB to PIB_DM_MAX_SIZE.  With device memory BAR0 is
 * twice dm_size: the registers at 0, the device memory at dm_bar_offset = dm_size.
 *
 * The device memory travels with the device in a migration (a RAM block of the device's own).
 */
#define PIB_DM_PAGE_SIZE       4096u
#define PIB_DM_MAX_SIZE        (16u << 20)   /* the largest dm-size                            */
#define PIB_MAX_DM             1024          /* allocations at once                            */
struct pib_cmd_alloc_dm {
	pib_u64 length;         /* bytes, 1..dm_size                                          */
};
struct pib_cmd_reg_dm_mr {
	pib_u32 pdn;
	pib_u32 access;         /* PIB_ACCESS_*, as REG_MR's                                  */
	pib_u64 iova;           /* the address the MR's users name byte offset 0 by           */
	pib_u64 length;         /* 0..the DM's length - offset                                */
	pib_u64 offset;         /* into the DM                                                */
	pib_u32 dm;             /* DM number                                                  */
	pib_u32 rsvd;
};

/*
 * CREATE_CQ: a ring of depth CQEs followed by one page whose first u32 is the consumer index
 * record; npages = pib_cq_pages(depth, pib_cqe_stride_log(flags)) (pib_wqe.h).  The CQEs are
 * struct pib_cqe (32 bytes), or with PIB_CQ_F_TIMESTAMP struct pib_cqe_ts (64 bytes: the CQE,
 * then the device clock's reading when the device wrote it).  Unknown flags are BAD_PARAM.
 * The CQ keeps its CQE size for its life (RESIZE_CQ too).
 */
#define PIB_CQ_F_TIMESTAMP     (1u << 0)
#define PIB_CQ_F_ALL           PIB_CQ_F_TIMESTAMP
struct pib_cmd_create_cq {
	pib_u32 depth;          /* power of two, 2..max_cqe                                   */
	pib_u32 npages;
	pib_u64 pbl_addr;
	pib_u32 uar;            /* UAR page whose CQ doorbell may name this CQ                 */
	pib_u32 flags;          /* PIB_CQ_F_*                                                 */
};

/* CREATE_SRQ: a ring of depth receive WQEs (struct pib_recv_wqe + SGEs, 1 << stride_log
 * bytes each) in the pages of the page list.  The device takes SRQ WQEs in ring order and
 * copies each one when it takes it, so the consumer may retire one slot per receive
 * completion of any QP on the SRQ.  limit > 0 arms the limit event: when the WQEs posted but
 * not yet taken fall below limit, the device raises PIB_AE_SRQ_LIMIT once and disarms
 * (limit becomes 0), as IB specifies.
 *
 * PIB_SRQ_F_XRC makes an XRC SRQ: it belongs to the XRC domain xrcd, and its receive
 * completions go to its own CQ, cqn, whichever XRC target QP took the WQE (IBTA 9.8.2).  Its
 * number (the SRQN) is the one an XRC initiator names in the XRCETH of its requests.  It holds
 * the XRCD and the CQ: DEALLOC_XRCD and DESTROY_CQ say BUSY meanwhile.  A plain SRQ has
 * xrcd and cqn 0. */
#define PIB_SRQ_F_XRC          (1u << 0)
#define PIB_SRQ_F_DBREC        (1u << 1)  /* a doorbell record: npages (and MODIFY_SRQ's)  */
                                          /* is pib_recv_ring_pages(.., true) (pib_wqe.h)  */
struct pib_cmd_create_srq {
	pib_u32 pdn;
	pib_u32 depth;          /* power of two, 1..max_srq_wr                                 */
	pib_u8  stride_log;     /* 4..12                                                       */
	pib_u8  flags;          /* PIB_SRQ_F_*                                                 */
	pib_u8  rsvd0[2];
	pib_u32 limit;          /* 0 = not armed                                               */
	pib_u32 uar;            /* UAR page whose SRQ doorbell may name this SRQ               */
	pib_u32 npages;         /* = ceil(depth << stride_log, 4096)                           */
	pib_u64 pbl_addr;
	pib_u32 xrcd;           /* XRC: its domain (ALLOC_XRCD)                                */
	pib_u32 cqn;            /* XRC: the CQ its receive completions go to                   */
};

/*
 * MODIFY_SRQ.  PIB_SRQ_ATTR_LIMIT arms the limit event (limit < depth; 0 disarms).
 * PIB_SRQ_ATTR_MAX_WR resizes: the SRQ moves to a new ring of max_wr slots (a power of two,
 * 1..max_srq_wr) of the same stride, on the npages pages (= ceil(max_wr << stride_log, 4096))
 * listed at pbl_addr.  Indices carry on: WQE i is in slot i % max_wr of the new ring, and the
 * driver, which wrote them, writes the WQEs posted but not yet taken into their new slots before
 * the command; the device takes from the new ring once the command completes, and never reads
 * the old one again.  An SRQ with a doorbell record (PIB_SRQ_F_DBREC) has one on the new ring
 * too (npages counts its page), where the driver has written the producer index.  max_wr must
 * hold the WQEs posted and not yet taken, and the limit (if armed) must stay below it, else
 * BAD_PARAM and nothing changes.  Both bits may come together.
 */
#define PIB_SRQ_ATTR_MAX_WR    (1u << 0)
#define PIB_SRQ_ATTR_LIMIT     (1u << 1)
struct pib_cmd_modify_srq {
	pib_u32 srqn;
	pib_u32 attr_mask;      /* PIB_SRQ_ATTR_*                                              */
	pib_u32 max_wr;         /* MAX_WR: the new depth                                       */
	pib_u32 limit;          /* LIMIT: must be < depth                                      */
	pib_u32 npages;         /* MAX_WR: pages of the new ring                               */
	pib_u32 rsvd;
	pib_u64 pbl_addr;       /* MAX_WR: guest-physical address of its page list             */
};

/*
 * RESIZE_CQ: the CQ moves to a new ring of depth CQEs (a power of two, 2..max_cqe) on the
 * pages listed at pbl_addr, zeroed and laid out as CREATE_CQ's, CQEs of the size the CQ was
 * created with (npages = pib_cq_pages(depth, its CQE stride): the ring, then the page of the
 * consumer index record).  The new ring starts over at index 0,
 * as a new CQ's does, so that its zeroed slots read as not written: the device copies the n
 * CQEs it wrote and the consumer has not read (indices ci up to its producer index) into
 * entries 0..n-1 of the new ring, in order, with the first pass's phase bit, and writes every
 * later CQE to the new ring after them.  So no completion is lost or seen twice: the consumer,
 * which does not poll meanwhile, goes on at index 0 of the new ring.  ci is the consumer's
 * index in the old ring (at or past the one its last doorbell or record gave, not past the
 * producer's).  The new ring must hold the n CQEs, and as many more as the send WQEs posted to
 * QPs completing on this CQ and not yet completed may write (so that no completion of work
 * posted before the resize can overflow it); the CQ must not be in error (overflowed).
 * Otherwise BAD_PARAM (BAD_STATE for a CQ in error) and the CQ stays as it was, on its old
 * ring; so does a DMA failure (DMA_ERROR).  Arming carries over.
 */
struct pib_cmd_resize_cq {
	pib_u32 cqn;
	pib_u32 depth;
	pib_u32 npages;
	pib_u32 ci;             /* the consumer index                                         */
	pib_u64 pbl_addr;
};

/*
 * MODIFY_CQ: event moderation (ib_modify_cq's cq_count and cq_period, as mlx4 and mlx5 have
 * it).  With period 0, the default, a completion that satisfies the CQ's arm raises the event
 * at once ("Completion events" in docs/reference/hardware.md).  With a period, that first completion
 * starts a wait instead: the event is raised when count completions that satisfy the arm have
 * been written since (count 0: no such limit), or when period microseconds of device time
 * (QEMU_CLOCK_VIRTUAL) have passed, whichever comes first.  It is still one CEQE and one
 * interrupt, for all of them; the CQ stays armed meanwhile.  A count without a period has no
 * effect: an event never waits for completions that may not come.  Arming over completions
 * the consumer has not read raises the event at once, as without moderation: they waited
 * already.  A MODIFY_CQ during a wait ends it (the event is raised now); the new values apply
 * from the next one.  Both fields take their whole 16-bit range (max_cq_mod_count and
 * max_cq_mod_period in struct pib_device_attr say so); a CQ that does not exist: BAD_RESOURCE.
 */
struct pib_cmd_modify_cq {
	pib_u32 cqn;
	pib_u16 count;          /* completions one event may wait for; 0: no limit             */
	pib_u16 period;         /* microseconds an event may wait; 0: none, no moderation      */
};

/* ALLOC_MW: a memory window of type 1 (bound with a BIND_MW WQE through ibv_bind_mw) or type
 * 2 (bound with a BIND_MW WQE posted by the consumer).  It starts unbound: its rkey gives no
 * access.  DEALLOC_MW names it by the rkey ALLOC_MW returned, whatever binds did to the key
 * byte since (the window's current rkey works too); a bound window is invalidated with it. */
struct pib_cmd_alloc_mw {
	pib_u32 pdn;
	pib_u32 type;           /* 1 or 2                                                      */
};

/*
 * ATTACH_MCAST / DETACH_MCAST: the multicast group (its MGID, ff..., and MLID, 0xc000..0xfffe,
 * as the SA assigned them) and the UD QP.  A packet to the MLID whose GRH names the MGID
 * reaches every attached QP of this HCA, also one sent by this HCA (loopback).  Attaching twice
 * is no error; detaching a QP that is not attached is BAD_PARAM.  Destroying a QP detaches it.
 */
struct pib_cmd_mcast {
	pib_u32 qpn;
	pib_u16 mlid;
	pib_u16 rsvd;
	pib_u8  mgid[16];
};

/*
 * ALLOC_MR: a fast-registration MR (ib_alloc_mr's IB_MR_TYPE_MEM_REG) in a PD, for up to
 * max_num_sg pages (at most max_fast_reg_pages): it has keys but no memory, and is invalid
 * until a REG_MR WQE registers it (struct pib_reg_mr_wqe).  DEREG_MR frees it, named by any
 * key with its index (the key byte last chosen may be a REG_MR's that never ran).
 */
struct pib_cmd_alloc_mr {
	pib_u32 pdn;
	pib_u32 max_num_sg;
};

/* A command whose input does not fit in 48 bytes points at a mailbox in guest memory. */
struct pib_cmd_mbox {
	pib_u64 addr;           /* guest-physical address of the input structure              */
	pib_u32 len;            /* its size in bytes (the device reads min(len, its size))    */
	pib_u32 obj;            /* the object the command applies to (QPN for MODIFY_QP)      */
};

struct pib_admin_cmd {
	pib_u8  opcode;         /* enum pib_admin_opcode                                       */
	pib_u8  rsvd0;
	pib_u16 cmd_id;         /* echoed in the completion                                    */
	pib_u32 resp_len;       /* bytes available at resp_addr; 0 = none                      */
	pib_u64 resp_addr;      /* guest-physical, for commands with a response struct         */
	union {
		pib_u8  raw[48];
		struct pib_cmd_port_index port;
		struct pib_cmd_set_port set_port;
		struct { pib_u32 uar; } uar;
		struct { pib_u32 value; } nop;
		struct { pib_u32 num; } obj;
		struct pib_cmd_reg_mr reg_mr;
		struct pib_cmd_create_cq create_cq;
		struct pib_cmd_mbox mbox;
		struct pib_cmd_create_srq create_srq;
		struct pib_cmd_modify_srq modify_srq;
		struct pib_cmd_alloc_mw alloc_mw;
		struct pib_cmd_mcast mcast;
		struct pib_cmd_alloc_mr alloc_mr;
		struct pib_cmd_resize_cq resize_cq;
		struct pib_cmd_rereg_mr rereg_mr;
		struct pib_cmd_modify_cq modify_cq;
		struct pib_cmd_alloc_dm alloc_dm;
		struct pib_cmd_reg_dm_mr reg_dm_mr;
	} in;
};

#define PIB_ACQE_F_PHASE       (1u << 0)
struct pib_admin_cqe {
	pib_u16 cmd_id;         /* dev: from the command                                       */
	pib_u8  status;         /* dev: enum pib_admin_status                                  */
	pib_u8  flags;          /* dev: [0] phase                                              */
	pib_u32 result0;        /* dev: command-specific (object number, ...)                  */
	pib_u32 result1;        /* dev: command-specific                                       */
	pib_u32 rsvd;
};

/* ------------------------------------------------------------------------------------------
 * Async event queue.  Device produces 16-byte entries, driver consumes and returns them by
 * writing its consumer index to AEQ_DB.  Phase bit as in the admin CQ.  When the ring is full
 * the device drops the event and bumps AEQ_LOST (the driver can see it never missed silently).
 * Every event raises MSI-X vector PIB_MSIX_VEC_ASYNC.  PIB_ASYNC_EVENTS(X) calls X(ID, type)
 * once per event type: the enum below is PIB_AE_<ID>, and the device's event names come from
 * the same list.
 * ------------------------------------------------------------------------------------------ */
#define PIB_ASYNC_EVENTS(X)                                                                    \
	X(PORT_ACTIVE,   0x01) /* obj = port: port reached ACTIVE                             */ \
	X(PORT_ERR,      0x02) /* obj = port: port left ACTIVE (link lost, or the SM took it  */ \
	                       /*       down)                                                 */ \
	X(LID_CHANGE,    0x03) /* obj = port: the SM (or SET_PORT) changed the LID or LMC;    */ \
	                       /*       data = the new LID                                    */ \
	X(LINK_UP,       0x04) /* obj = port: physical link up, port in INIT: no SM has       */ \
	                       /*       configured it yet                                     */ \
	X(SM_CHANGE,     0x05) /* obj = port: the SM changed MasterSMLID or MasterSMSL        */ \
	X(PKEY_CHANGE,   0x06) /* obj = port: the SM changed the P_Key table                  */ \
	X(CLIENT_REREG,  0x07) /* obj = port: the SM asks the port's clients to register      */ \
	                       /*       with the SA again (PortInfo:ClientReregister)         */ \
	X(GID_CHANGE,    0x08) /* obj = port: the SM changed the GID prefix                   */ \
	/* Object events: the IB affiliated asynchronous events. */                            \
	X(CQ_ERR,        0x10) /* obj = CQN: CQ overflow; the CQ is now in error              */ \
	X(QP_FATAL,      0x11) /* obj = QPN: local work queue catastrophic error              */ \
	X(QP_REQ_ERR,    0x12) /* obj = QPN: invalid request local WQ error                   */ \
	X(QP_ACCESS_ERR, 0x13) /* obj = QPN: local access violation WQ error                  */ \
	X(COMM_EST,      0x14) /* obj = QPN: first packet received in RTR                     */ \
	X(SQ_DRAINED,    0x15) /* obj = QPN: SQD reached with nothing outstanding             */ \
	X(QP_LAST_WQE,   0x16) /* obj = QPN: last WQE reached (SRQ-attached QP in ERR)        */ \
	X(SRQ_LIMIT,     0x17) /* obj = SRQN: SRQ fell below its limit                        */ \
	X(SRQ_ERR,       0x18) /* obj = SRQN: SRQ catastrophic error                          */

#define PIB_AE_ENUM_ENTRY(id, value) PIB_AE_##id = value,
enum pib_async_event_type {
	PIB_ASYNC_EVENTS(PIB_AE_ENUM_ENTRY)
};
#undef PIB_AE_ENUM_ENTRY

#define PIB_AEQE_F_PHASE       (1u << 0)
struct pib_aeqe {
	pib_u8  type;           /* dev: enum pib_async_event_type                              */
	pib_u8  flags;          /* dev: [0] phase                                              */
	pib_u16 rsvd0;
	pib_u32 obj;            /* dev: port number / QPN / CQN / SRQN                         */
	pib_u64 data;           /* dev: event-specific                                         */
};

/* ------------------------------------------------------------------------------------------
 * QP mailboxes.  Types and states use the IB/verbs numbering (enum ib_qp_type,
 * enum ib_qp_state), attribute mask bits are enum ib_qp_attr_mask's.  Each list calls
 * X(ID, value) with the ID of the IB name (IB_QPT_<ID>, IB_QPS_<ID>, IB_QP_<ID>): the enums
 * below, the device's state names and the driver's checks against ib_verbs.h come from them.
 * ------------------------------------------------------------------------------------------ */
#define PIB_QP_TYPES(X)         \
	X(SMI, 0)               \
	X(GSI, 1)               \
	X(RC,  2)               \
	X(UC,  3)               \
	X(UD,  4)               \
	X(XRC_INI, 9)           \
	X(XRC_TGT, 10)

#define PIB_QP_STATES(X)        \
	X(RESET, 0)             \
	X(INIT,  1)             \
	X(RTR,   2)             \
	X(RTS,   3)             \
	X(SQD,   4)             \
	X(SQE,   5)             \
	X(ERR,   6)

/* X(ID, bit): the attribute mask bit is 1 << bit. */
#define PIB_QP_ATTRS(X)                 \
	X(STATE,               0)       \
	X(CUR_STATE,           1)       \
	X(EN_SQD_ASYNC_NOTIFY, 2)       \
	X(ACCESS_FLAGS,        3)       \
	X(PKEY_INDEX,          4)       \
	X(PORT,                5)       \
	X(QKEY,                6)       \
	X(AV,                  7)       \
	X(PATH_MTU,            8)       \
	X(TIMEOUT,             9)       \
	X(RETRY_CNT,           10)      \
	X(RNR_RETRY,           11)      \
	X(RQ_PSN,              12)      \
	X(MAX_QP_RD_ATOMIC,    13)      \
	X(ALT_PATH,            14)      \
	X(MIN_RNR_TIMER,       15)      \
	X(SQ_PSN,              16)      \
	X(MAX_DEST_RD_ATOMIC,  17)      \
	X(PATH_MIG_STATE,      18)      \
	X(CAP,                 19)      \
	X(DEST_QPN,            20)

#define PIB_QPT_ENUM_ENTRY(id, value) PIB_QPT_##id = value,
#define PIB_QPS_ENUM_ENTRY(id, value) PIB_QPS_##id = value,
#define PIB_QP_ATTR_ENUM_ENTRY(id, bit) PIB_QP_##id = 1 << bit,
enum pib_qp_type { PIB_QP_TYPES(PIB_QPT_ENUM_ENTRY) };
enum pib_qp_state { PIB_QP_STATES(PIB_QPS_ENUM_ENTRY) };
enum pib_qp_attr_mask { PIB_QP_ATTRS(PIB_QP_ATTR_ENUM_ENTRY) };
#undef PIB_QPT_ENUM_ENTRY
#undef PIB_QPS_ENUM_ENTRY
#undef PIB_QP_ATTR_ENUM_ENTRY

/* The datagram QPs: UD, and the special QPs 0 (SMI) and 1 (GSI), which are UD QPs too. */
static inline bool pib_qp_type_is_ud(pib_u32 type)
{
	return type == PIB_QPT_UD || type == PIB_QPT_GSI || type == PIB_QPT_SMI;
}

/*
 * The reliable transports: RC, and XRC's two halves (IBTA 9.8), which run RC's protocol (PSNs,
 * ACKs, retries, READ and atomics) between an initiator QP (XRC_INI: a send queue, no receive
 * side) and a target QP (XRC_TGT: no queues at all; it takes receive WQEs from the XRC SRQ
 * each request names).
 */
static inline bool pib_qp_type_is_reliable(pib_u32 type)
{
	return type == PIB_QPT_RC || type == PIB_QPT_XRC_INI || type == PIB_QPT_XRC_TGT;
}

/* Fields of struct pib_qp_attr (and of the IB wire: PSNs and QPNs are 24 bits). */
#define PIB_PSN_MASK           0x00ffffffu
#define PIB_QPN_MASK           0x00ffffffu
#define PIB_AH_F_GRH           (1u << 0)  /* ah_flags: the path has a GRH                  */
#define PIB_FLOW_LABEL_MASK    0x000fffffu

#define PIB_QPC_F_SQ_SIG_ALL   (1u << 0)  /* every send WQE completes, signalled or not    */
#define PIB_QPC_F_NO_RQ        (1u << 1)  /* the QP has no RQ (it uses an SRQ, or none)     */
#define PIB_QPC_F_RQ_DBREC     (1u << 2)  /* the RQ has a doorbell record: rq_npages is    */
                                          /* pib_recv_ring_pages(.., true) (pib_wqe.h)     */
#define PIB_SRQN_NONE          0xffffffffu
/*
 * CREATE_QP.  An XRC_INI QP has a PD, a send CQ and an SQ, no receive side: PIB_QPC_F_NO_RQ,
 * recv_cqn 0, no SRQ.  An XRC_TGT QP belongs to the XRC domain xrcd and has no queues of its
 * own: pdn, the CQNs, the depths and page counts 0, PIB_QPC_F_NO_RQ, no SRQ; its receives
 * complete on the CQ of the XRC SRQ that each request names, and its memory accesses check
 * keys against that SRQ's PD.  Other types have xrcd 0.
 */
struct pib_qp_create {
	pib_u32 pdn;
	pib_u8  type;           /* enum pib_qp_type                                            */
	pib_u8  flags;          /* PIB_QPC_F_*                                                 */
	pib_u8  sq_stride_log;  /* log2 of the send WQE stride, 6..12                          */
	pib_u8  rq_stride_log;  /* log2 of the receive WQE stride, 4..12                       */
	pib_u32 send_cqn;
	pib_u32 recv_cqn;
	pib_u32 srqn;           /* PIB_SRQN_NONE: none                                         */
	pib_u32 sq_depth;       /* power of two, 1..max_qp_wr (XRC_TGT: 0)                     */
	pib_u32 rq_depth;       /* power of two, 1..max_qp_wr (0 with PIB_QPC_F_NO_RQ)         */
	pib_u32 max_inline;     /* inline bytes the SQ stride leaves room for                  */
	pib_u32 uar;            /* UAR page whose doorbells may name this QP                    */
	pib_u32 sq_npages;      /* = ceil(sq_depth << sq_stride_log, 4096)                     */
	pib_u32 rq_npages;
	pib_u32 xrcd;           /* XRC_TGT: its XRC domain; other types 0                       */
	pib_u64 sq_pbl_addr;
	pib_u64 rq_pbl_addr;
	pib_u32 rsvd[4];
};

struct pib_qp_attr {
	pib_u32 attr_mask;      /* PIB_QP_*: which fields MODIFY_QP applies                    */
	pib_u8  qp_state;       /* enum pib_qp_state                                           */
	pib_u8  cur_qp_state;
	pib_u8  path_mtu;       /* IB MTU enum 1..5                                            */
	pib_u8  timeout;        /* local ACK timeout: 4.096 us * 2^timeout, 0 = infinite       */
	pib_u8  retry_cnt;      /* 0..7                                                        */
	pib_u8  rnr_retry;      /* 0..7, 7 = infinite                                          */
	pib_u8  min_rnr_timer;  /* IB RNR timer encoding 0..31                                 */
	pib_u8  max_rd_atomic;
	pib_u8  max_dest_rd_atomic;
	pib_u8  sl;
	pib_u8  port_num;
	pib_u8  sq_draining;    /* QUERY_QP only                                               */
	pib_u16 pkey_index;
	pib_u16 dlid;
	pib_u32 qkey;
	pib_u32 rq_psn;         /* [23:0]                                                      */
	pib_u32 sq_psn;         /* [23:0]                                                      */
	pib_u32 dest_qp_num;    /* [23:0]                                                      */
	pib_u32 qp_access_flags;/* PIB_ACCESS_REMOTE_*, PIB_ACCESS_FLUSH_GLOBAL                  */
	pib_u8  src_path_bits;
	pib_u8  static_rate;
	pib_u8  ah_flags;       /* PIB_AH_F_GRH                                                */
	pib_u8  hop_limit;
	pib_u8  sgid_index;
	pib_u8  traffic_class;
	pib_u16 rsvd0;
	pib_u32 flow_label;     /* [19:0]                                                      */
	pib_u8  dgid[16];
	/* QUERY_QP also reports the capabilities the QP was created with */
	pib_u32 max_send_wr;
	pib_u32 max_recv_wr;
	pib_u32 max_send_sge;
	pib_u32 max_recv_sge;
	pib_u32 max_inline_data;
	pib_u32 rsvd[4];
};

/* ------------------------------------------------------------------------------------------
 * Attributes returned by QUERY_DEVICE / QUERY_PORT.  The numbers follow the IBTA's
 * Device/PortInfo attributes; the driver copies them into ib_device_attr / ib_port_attr.
 * ------------------------------------------------------------------------------------------ */
struct pib_device_attr {
	pib_u64 fw_ver;         /* [47:32] major, [31:16] minor, [15:0] sub-minor              */
	pib_u64 node_guid;      /* EUI-64, from the device's node-guid property, as a         */
	                        /* little-endian u64 (ib_core wants cpu_to_be64() of it)      */
	pib_u64 sys_image_guid;
	pib_u64 max_mr_size;
	pib_u64 page_size_cap;  /* bitmap of supported page sizes                              */
	pib_u32 vendor_id;      /* IEEE OUI                                                    */
	pib_u32 vendor_part_id;
	pib_u32 hw_ver;
	pib_u32 max_qp;
	pib_u32 max_qp_wr;
	pib_u32 max_sge;
	pib_u32 max_cq;
	pib_u32 max_cqe;
	pib_u32 max_mr;
	pib_u32 max_pd;
	pib_u32 max_qp_rd_atom;
	pib_u32 max_qp_init_rd_atom;
	pib_u32 max_srq;
	pib_u32 max_srq_wr;
	pib_u32 max_srq_sge;
	pib_u32 max_ah;
	pib_u32 max_inline_data;
	pib_u32 device_cap_flags; /* PIB_DEV_CAP_*                                             */
	pib_u16 max_pkeys;
	pib_u8  local_ca_ack_delay;
	pib_u8  phys_port_cnt;
	pib_u32 num_uars;
	pib_u32 max_mcast_grp;  /* multicast groups                                            */
	pib_u32 max_mcast_qp_attach;   /* QPs attached to one group                            */
	pib_u32 max_total_mcast_qp_attach; /* attachments in all                               */
	pib_u32 max_fast_reg_pages; /* pages one REG_MR WQE may map (ALLOC_MR's max_num_sg)     */
	pib_u32 clock_khz;      /* the device clock's frequency (PIB_CLOCK_KHZ)                */
	pib_u16 max_cq_mod_count;  /* MODIFY_CQ's largest count (PIB_MAX_CQ_MOD_COUNT)         */
	pib_u16 max_cq_mod_period; /* ... and period, microseconds (PIB_MAX_CQ_MOD_PERIOD)     */
	pib_u32 max_dm_size;    /* bytes of device memory (0: none; "Device memory" above)     */
	pib_u32 dm_bar_offset;  /* where it starts in BAR0                                     */
};

struct pib_port_attr {
	pib_u64 subnet_prefix;  /* GID prefix, default fe80::                                  */
	pib_u64 port_guid;      /* node GUID + 1                                               */
	pib_u32 port_cap_flags; /* PortInfo:CapabilityMask                                     */
	pib_u32 max_msg_sz;
	pib_u32 bad_pkey_cntr;
	pib_u32 qkey_viol_cntr;
	pib_u16 lid;
	pib_u16 sm_lid;
	pib_u16 pkey_tbl_len;
	pib_u16 gid_tbl_len;
	pib_u8  state;          /* IBTA PortState: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE           */
	pib_u8  phys_state;     /* IBTA PortPhysicalState: 2 POLLING, 3 DISABLED, 5 LINKUP     */
	pib_u8  max_mtu;        /* IBTA MTU enum: 1=256 .. 5=4096                              */
	pib_u8  active_mtu;
	pib_u8  lmc;
	pib_u8  sm_sl;
	pib_u8  active_width;   /* IBTA: 1 = 1X, 2 = 4X, ...                                   */
	pib_u8  active_speed;   /* IBTA: 1 = SDR, 2 = DDR, 4 = QDR, ...                        */
	pib_u8  init_type_reply;
	pib_u8  subnet_timeout; /* PortInfo:SubnetTimeOut, 4.096 us * 2^n                      */
	pib_u8  max_vl_num;     /* PortInfo:VLCap encoding: 3 = VL0-VL3 (0: a device before    */
	                        /* VLs, which had VL0 only)                                    */
	pib_u8  rsvd0;
	pib_u32 link_downs;     /* times the physical link went down since reset               */
	pib_u32 rsvd[8];
};

/* ------------------------------------------------------------------------------------------
 * Counters returned by QUERY_COUNTERS: an array of little-endian u64, indexed by this enum.
 * They count since reset and never wrap in practice.  PIB_COUNTERS(X) calls X(ID, name) for
 * each, in index order: the enum below is PIB_CNT_<ID>, and the driver exposes the counter as
 * the port hw_counter <name> (/sys/class/infiniband/pib_0/ports/1/hw_counters).
 * Every packet the device drops is counted under exactly one rx_drop_* reason.
 * ------------------------------------------------------------------------------------------ */
#define PIB_COUNTERS(X)                                                                        \
	X(TX_PACKETS,          tx_packets)                                                     \
	X(TX_BYTES,            tx_bytes)             /* IB packet bytes, LRH to payload     */ \
	X(RX_PACKETS,          rx_packets)           /* accepted by the link, before checks */ \
	X(RX_BYTES,            rx_bytes)                                                       \
	X(LINK_DOWNS,          link_downs)                                                     \
	X(LINK_FRAMING_ERRORS, link_framing_errors)  /* bad magic/type/length; the link was */ \
	                                             /* dropped and retrained               */ \
	X(RETRANSMITS,         retransmits)          /* RC packets sent again               */ \
	X(RETRY_TIMEOUTS,      retry_timeouts)       /* RC ACK timer expiries               */ \
	X(RNR_NAKS_SENT,       rnr_naks_sent)                                                  \
	X(RNR_NAKS_RCVD,       rnr_naks_rcvd)                                                  \
	X(SEQ_NAKS_SENT,       seq_naks_sent)        /* PSN sequence error NAKs             */ \
	X(SEQ_NAKS_RCVD,       seq_naks_rcvd)                                                  \
	X(ACCESS_NAKS_SENT,    access_naks_sent)     /* remote access errors answered       */ \
	X(DUPLICATE_REQUESTS,  duplicate_requests)   /* answered, not applied again         */ \
	X(RX_DROP_PORT_DOWN,   rx_drop_port_down)    /* the port's state refuses it: DOWN,  */ \
	                                             /* or INIT (SMPs only)                 */ \
	X(RX_DROP_MALFORMED,   rx_drop_malformed)    /* short, bad LRH/GRH/BTH              */ \
	X(RX_DROP_DLID,        rx_drop_dlid)         /* not for our LID/GID                 */ \
	X(RX_DROP_OPCODE,      rx_drop_opcode)       /* unknown or unsupported opcode       */ \
	X(RX_DROP_PKEY,        rx_drop_pkey)                                                   \
	X(RX_DROP_NO_QP,       rx_drop_no_qp)        /* destination QP does not exist       */ \
	X(RX_DROP_QP_TYPE,     rx_drop_qp_type)      /* opcode's transport is not the QP's  */ \
	X(RX_DROP_QP_STATE,    rx_drop_qp_state)     /* QP not receiving                    */ \
	X(RX_DROP_SLID,        rx_drop_slid)         /* RC/UC packet not from the peer      */ \
	X(RX_DROP_QKEY,        rx_drop_qkey)         /* UD Q_Key mismatch                   */ \
	X(RX_DROP_LENGTH,      rx_drop_length)       /* payload wrong for opcode and MTU    */ \
	X(RX_DROP_NO_RECV_WQE, rx_drop_no_recv_wqe)  /* UD/UC with no receive posted        */ \
	X(RX_DROP_UC_SEQ,      rx_drop_uc_seq)       /* UC message broken by a lost packet  */ \
	X(RX_DROP_PSN_SEQ,     rx_drop_psn_seq)      /* RC PSN ahead of the expected one    */ \
	X(RX_DROP_DUPLICATE,   rx_drop_duplicate)    /* RC duplicate, not applied           */ \
	X(RX_DROP_STALE_RESP,  rx_drop_stale_resp)   /* response to nothing outstanding     */ \
	X(RX_DROP_RNR,         rx_drop_rnr)          /* RC request refused with an RNR NAK  */ \
	X(RX_DROP_RXQ_FULL,    rx_drop_rxq_full)                                               \
	X(RX_DROP_ACCESS,      rx_drop_access)       /* bad rkey/range/rights, NAK sent     */ \
	X(RX_DROP_VL15,        rx_drop_vl15)         /* an SMP QP0 could not take, or a     */ \
	                                             /* VL15 packet not for QP0             */ \
	X(RX_DROP_MCAST,       rx_drop_mcast)        /* multicast: no GRH, not QP 0xffffff, */ \
	                                             /* or a group no QP here joined        */ \
	X(RX_MCAST_PACKETS,    rx_mcast_packets)     /* multicast packets taken             */ \
	X(TX_MCAST_PACKETS,    tx_mcast_packets)     /* multicast packets sent              */ \
	X(TX_DROP_PORT_DOWN,   tx_drop_port_down)    /* DOWN, or INIT/ARMED (SMPs only)     */ \
	X(TX_DROP_TXQ_FULL,    tx_drop_txq_full)                                               \
	X(INJECTED_FAULTS,     injected_faults)      /* error injection events (QOM/QMP)    */ \
	X(RX_DROP_XRC_SRQ,     rx_drop_xrc_srq)      /* XRC request naming no XRC SRQ of    */ \
	                                             /* the target QP's domain (NAK sent)   */ \
	X(RX_DROP_VL,          rx_drop_vl)           /* data on a VL the port does not      */ \
	                                             /* operate (OperationalVLs)            */ \
	X(TX_DROP_VL,          tx_drop_vl)           /* data whose SL maps to VL15 or to a  */ \
	                                             /* VL beyond OperationalVLs (IBTA 7.6.6)*/ \
	X(RX_DROP_CREDIT,      rx_drop_credit)       /* data beyond the credits we granted  */ \
	                                             /* (a peer that ignores them)          */ \
	X(XMIT_WAIT_US,        xmit_wait_us)         /* time a packet waited for credits    */ \
	X(LINK_RECOVERIES,     link_recoveries)      /* the link dropped and came back from */ \
	                                             /* the same peer in time: its port     */ \
	                                             /* stayed as it was (pib_link.h, MOVE) */

#define PIB_CNT_ENUM_ENTRY(id, name) PIB_CNT_##id,
enum pib_counter {
	PIB_COUNTERS(PIB_CNT_ENUM_ENTRY)
	PIB_CNT_MAX
};
#undef PIB_CNT_ENUM_ENTRY

/* PortState / PortPhysicalState values (IBTA 14.2.5.6) */
#define PIB_PORT_DOWN          1
#define PIB_PORT_INIT          2
#define PIB_PORT_ARMED         3
#define PIB_PORT_ACTIVE        4
#define PIB_PHYS_POLLING       2
#define PIB_PHYS_DISABLED      3
#define PIB_PHYS_LINKUP        5

/* device_cap_flags: what the device implements (the driver maps them to IB_DEVICE_*). */
#define PIB_DEV_CAP_RC             (1u << 0)  /* RC SEND/RECV                              */
#define PIB_DEV_CAP_RDMA           (1u << 1)  /* RDMA WRITE and READ                       */
#define PIB_DEV_CAP_ATOMIC         (1u << 2)  /* CS and FA, atomic across the whole HCA    */
#define PIB_DEV_CAP_UC             (1u << 3)
#define PIB_DEV_CAP_UD             (1u << 4)
#define PIB_DEV_CAP_SRQ            (1u << 5)
#define PIB_DEV_CAP_RC_RNR_NAK_GEN (1u << 6)  /* responder generates RNR NAKs              */
#define PIB_DEV_CAP_MEM_WINDOW     (1u << 7)
#define PIB_DEV_CAP_MEM_MGT_EXT    (1u << 8)  /* ALLOC_MR, REG_MR and LOCAL_INV WQEs,     */
                                              /* SEND_INV (IB_DEVICE_MEM_MGT_EXTENSIONS) */
#define PIB_DEV_CAP_RESIZE         (1u << 9)  /* RESIZE_CQ, MODIFY_SRQ's MAX_WR            */
#define PIB_DEV_CAP_CLOCK          (1u << 10) /* the UAR pages' clock, timestamped CQEs    */
                                              /* (PIB_CQ_F_TIMESTAMP)                      */
#define PIB_DEV_CAP_ATOMIC_WRITE   (1u << 11) /* RC ATOMIC WRITE (PIB_WQE_ATOMIC_WRITE)     */
#define PIB_DEV_CAP_XRC            (1u << 12) /* XRC domains, XRC SRQs, XRC_INI/TGT QPs     */
#define PIB_DEV_CAP_FLUSH          (1u << 13) /* RC RDMA FLUSH to global visibility         */
                                              /* (PIB_WQE_FLUSH, PIB_ACCESS_FLUSH_GLOBAL)   */
#define PIB_DEV_CAP_RECV_DBREC     (1u << 14) /* receive doorbell records: RQs and SRQs     */
                                              /* posted to without an MMIO write           */
                                              /* (struct pib_recv_dbrec, pib_wqe.h)         */

/*
 * Device limits that every layer must agree on (QUERY_DEVICE reports them too).  The rings live
 * in the consumer's memory, so their depths are those of the hardware class (mlx5's); the
 * device keeps only their page lists, which count against the MTT (PIB_MAX_MTT_PAGES in the
 * device model).  docs/reference/hardware.md, "Limits", compares every limit with mlx5's.
 */
#define PIB_MAX_INLINE_DATA    256    /* inline bytes in a send WQE                        */
#define PIB_MAX_SGE            16     /* SGEs in a WQE                                     */
#define PIB_MAX_MSG_SZ         (1u << 31) /* a message, READ or FLUSH range (max_msg_sz)  */
#define PIB_MAX_QP_WR          32768  /* SQ and RQ depth; a CQE's wqe_index (16 bits,      */
                                      /* pib_wqe.h) names any slot of the deepest ring     */
#define PIB_MAX_SRQ_WR         32768  /* SRQ depth                                         */
#define PIB_MAX_CQE            (1u << 22) /* CQ depth; verbs' max_cqe is one less          */
                                      /* (4194303): driver and provider keep a slot free   */
#define PIB_MAX_CQ_MOD_COUNT   0xffff /* MODIFY_CQ: ib_core's u16 cq_count ...            */
#define PIB_MAX_CQ_MOD_PERIOD  0xffff /* ... and cq_period, microseconds (65.5 ms)         */
#define PIB_MAX_MCAST_GRP      64     /* multicast groups the HCA joins                    */
#define PIB_MAX_MCAST_QP       16     /* QPs attached to one group                         */
#define PIB_MCAST_QPN          0xffffff /* BTH DestQP of a multicast packet                */
#define PIB_MAX_FAST_REG_PAGES 512    /* a REG_MR WQE's pages (2 MiB in 4 KiB pages)       */

#define PIB_NUM_PORTS          1
#define PIB_PORT_NUM           1      /* the one port's number (IB counts ports from 1)      */
#define PIB_PKEY_TBL_LEN       64     /* P_Key table entries (NodeInfo:PartitionCap); the  */
                                      /* SM fills them, entry 0 is 0xffff until it does    */
/*
 * The GID table: entry i is subnet_prefix:GUIDInfo entry i.  Entry 0 is the port GUID; 1..7
 * are the alias GUIDs an SM assigns (GUIDInfo Set), all-zero while unassigned (QUERY_GID
 * answers zeros, ib_core leaves such an entry empty).  A change is a GID_CHANGE event.
 * Packets carry the SGID at their sgid_index; a unicast packet with a GRH is ours when its
 * DGID is an assigned entry.
 */
#define PIB_GID_TBL_LEN        8
#define PIB_DEFAULT_PKEY       0xffff
#define PIB_DEFAULT_GID_PREFIX 0xfe80000000000000ull
#define PIB_VENDOR_OUI         0x001af4 /* Red Hat/Qumranet OUI, matching the PCI vendor   */

PIB_STATIC_ASSERT(sizeof(struct pib_regs) == 0x64, "pib_regs layout");
PIB_STATIC_ASSERT(sizeof(struct pib_admin_cmd) == 64, "admin command is 64 bytes");
PIB_STATIC_ASSERT(sizeof(struct pib_admin_cqe) == 16, "admin CQE is 16 bytes");
PIB_STATIC_ASSERT(sizeof(struct pib_aeqe) == 16, "AEQE is 16 bytes");
PIB_STATIC_ASSERT(sizeof(struct pib_cmd_set_port) <= 48, "set_port fits the command");
PIB_STATIC_ASSERT(sizeof(struct pib_device_attr) == 152, "device attr layout");
PIB_STATIC_ASSERT(sizeof(struct pib_port_attr) == 88, "port attr layout");
PIB_STATIC_ASSERT(sizeof(struct pib_cmd_reg_mr) <= 48, "reg_mr fits the command");
PIB_STATIC_ASSERT(sizeof(struct pib_cmd_create_cq) <= 48, "create_cq fits the command");
PIB_STATIC_ASSERT(sizeof(struct pib_cmd_create_srq) <= 48, "create_srq fits the command");
PIB_STATIC_ASSERT(sizeof(struct pib_cmd_mcast) <= 48, "mcast fits the command");
PIB_STATIC_ASSERT(sizeof(struct pib_cmd_alloc_mr) <= 48, "alloc_mr fits the command");
PIB_STATIC_ASSERT(sizeof(struct pib_cmd_modify_srq) <= 48, "modify_srq fits the command");
PIB_STATIC_ASSERT(sizeof(struct pib_cmd_resize_cq) <= 48, "resize_cq fits the command");
PIB_STATIC_ASSERT(sizeof(struct pib_cmd_rereg_mr) <= 48, "rereg_mr fits the command");
PIB_STATIC_ASSERT(sizeof(struct pib_cmd_modify_cq) <= 48, "modify_cq fits the command");
PIB_STATIC_ASSERT(sizeof(struct pib_qp_create) == 80, "qp create mailbox layout");
PIB_STATIC_ASSERT(sizeof(struct pib_qp_attr) == 104, "qp attr mailbox layout");

#endif /* PIB_HW_H */
