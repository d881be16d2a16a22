/*
 * pib HCA device model - the PCI function
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * pib is a virtual PCIe InfiniBand HCA.  The hardware interface is
 * include/pib_hw.h; this file implements it:
 *
 *   BAR0  control registers (struct pib_regs), 32-bit accesses only
 *   BAR2  UAR pages: 64-bit doorbell writes, one page per user context
 *         (page 0: the kernel)
 *   BAR4  MSI-X table and PBA: vector 0 admin completions, vector 1 async
 *         events, vector 2 completion events
 *
 * The driver talks to the device through rings in guest memory, latched at
 * CONTROL.ENABLE: the admin queue (64-byte commands in, 16-byte completions
 * out, phase-tagged), the async event queue (16-byte phase-tagged events
 * out) and, optionally, the completion event queue (8-byte CEQEs naming
 * CQs).  Doorbell writes only validate and record the new index; bottom
 * halves execute admin commands and transport work outside the MMIO handler.
 *
 * The port and its link to a peer HCA (a chardev) live in pib-link.c; the
 * data path (objects, CQs, QPs, packets, the transport engines) in
 * pib-obj.c, pib-cq.c, pib-qp.c, pib-pkt.c, pib-req.c, pib-resp.c and
 * pib-comp.c.
 *
 * Layout, as in hw/nvme/ctrl.c: helpers (names, guest errors, DMA, interrupts,
 * rings) first, behaviour (admin commands, AEQ, registers, UAR doorbells,
 * reset) next, QOM glue last.
 *
 * Rule for the whole file: a value that came from the guest is never
 * trusted.  Bad values give an admin status code or a counted, traced guest
 * error; nothing here asserts on them, and no loop runs longer than a bound the
 * device chose.
 */

#include "qemu/osdep.h"
#include "qemu/bitmap.h"
#include "qemu/bswap.h"
#include "qemu/host-utils.h"
#include "qemu/main-loop.h"
#include "qemu/module.h"
#include "qemu/units.h"
#include "qapi/error.h"
#include "hw/pci/msix.h"
#include "hw/pci/pci.h"
#include "hw/pci/pcie.h"
#include "hw/qdev-properties.h"
#include "hw/qdev-properties-system.h"
#include "migration/vmstate.h"
#include "chardev/char.h"

#include "pib-internal.h"
#include "trace.h"

/* PCIe capability offset in config space (as in hw/nvme). */
#define PIB_PCIE_CAP_OFFSET     0x80

/* BAR0 and BAR2: 64-bit, non-prefetchable (doorbells and registers) */
#define PIB_BAR_TYPE    (PCI_BASE_ADDRESS_SPACE_MEMORY | \
                         PCI_BASE_ADDRESS_MEM_TYPE_64)

/*
 * Values QUERY_DEVICE and QUERY_PORT report.  The limits (pib-internal.h) are
 * what the data path enforces.
 */
#define PIB_FW_VER              ((uint64_t)1 << 32)     /* 1.0.0 */
#define PIB_PAGE_SIZE_CAP       ((uint64_t)(4 * KiB))
#define PIB_IB_MTU_4096         PIB_PORT_MTU_ENUM
#define PIB_IB_WIDTH_4X         2

/* device_cap_flags: exactly what the data path implements. */
#define PIB_DEV_CAPS    (PIB_DEV_CAP_RC | PIB_DEV_CAP_RDMA | \
                         PIB_DEV_CAP_ATOMIC | PIB_DEV_CAP_UC | \
                         PIB_DEV_CAP_UD | PIB_DEV_CAP_SRQ | \
                         PIB_DEV_CAP_RC_RNR_NAK_GEN | \
                         PIB_DEV_CAP_MEM_WINDOW)
#define PIB_IB_SPEED_QDR        4

/*
 * Helpers: names for traces
 */

static const char *pib_reg_name(hwaddr addr)
{
    switch (addr) {
    case PIB_REG_MAGIC:      return "MAGIC";
    case PIB_REG_VERSION:    return "VERSION";
    case PIB_REG_CAPS:       return "CAPS";
    case PIB_REG_STATUS:     return "STATUS";
    case PIB_REG_CONTROL:    return "CONTROL";
    case PIB_REG_AQ_DEPTH:   return "AQ_DEPTH";
    case PIB_REG_AQ_SQ_LO:   return "AQ_SQ_LO";
    case PIB_REG_AQ_SQ_HI:   return "AQ_SQ_HI";
    case PIB_REG_AQ_CQ_LO:   return "AQ_CQ_LO";
    case PIB_REG_AQ_CQ_HI:   return "AQ_CQ_HI";
    case PIB_REG_AQ_DB:      return "AQ_DB";
    case PIB_REG_AEQ_DEPTH:  return "AEQ_DEPTH";
    case PIB_REG_AEQ_LO:     return "AEQ_LO";
    case PIB_REG_AEQ_HI:     return "AEQ_HI";
    case PIB_REG_AEQ_DB:     return "AEQ_DB";
    case PIB_REG_NUM_UARS:   return "NUM_UARS";
    case PIB_REG_ERR_COUNT:  return "ERR_COUNT";
    case PIB_REG_ERR_LAST:   return "ERR_LAST";
    case PIB_REG_LINK_STATE: return "LINK_STATE";
    case PIB_REG_AEQ_LOST:   return "AEQ_LOST";
    case PIB_REG_SCRATCH:    return "SCRATCH";
    case PIB_REG_CEQ_DEPTH:  return "CEQ_DEPTH";
    case PIB_REG_CEQ_LO:     return "CEQ_LO";
    case PIB_REG_CEQ_HI:     return "CEQ_HI";
    case PIB_REG_CEQ_DB:     return "CEQ_DB";
    default:                 return "UNDEFINED";
    }
}

static const char *pib_admin_opcode_name(uint8_t opcode)
{
    switch (opcode) {
    case PIB_CMD_QUERY_DEVICE: return "QUERY_DEVICE";
    case PIB_CMD_QUERY_PORT:   return "QUERY_PORT";
    case PIB_CMD_SET_PORT:     return "SET_PORT";
    case PIB_CMD_QUERY_PKEY:   return "QUERY_PKEY";
    case PIB_CMD_QUERY_GID:    return "QUERY_GID";
    case PIB_CMD_ALLOC_UAR:    return "ALLOC_UAR";
    case PIB_CMD_DEALLOC_UAR:  return "DEALLOC_UAR";
    case PIB_CMD_NOP:          return "NOP";
    case PIB_CMD_CREATE_PD:    return "CREATE_PD";
    case PIB_CMD_DESTROY_PD:   return "DESTROY_PD";
    case PIB_CMD_REG_MR:       return "REG_MR";
    case PIB_CMD_DEREG_MR:     return "DEREG_MR";
    case PIB_CMD_CREATE_CQ:    return "CREATE_CQ";
    case PIB_CMD_DESTROY_CQ:   return "DESTROY_CQ";
    case PIB_CMD_CREATE_QP:    return "CREATE_QP";
    case PIB_CMD_MODIFY_QP:    return "MODIFY_QP";
    case PIB_CMD_QUERY_QP:     return "QUERY_QP";
    case PIB_CMD_DESTROY_QP:   return "DESTROY_QP";
    case PIB_CMD_CREATE_SRQ:   return "CREATE_SRQ";
    case PIB_CMD_MODIFY_SRQ:   return "MODIFY_SRQ";
    case PIB_CMD_QUERY_SRQ:    return "QUERY_SRQ";
    case PIB_CMD_DESTROY_SRQ:  return "DESTROY_SRQ";
    case PIB_CMD_ALLOC_MW:     return "ALLOC_MW";
    case PIB_CMD_DEALLOC_MW:   return "DEALLOC_MW";
    case PIB_CMD_QUERY_COUNTERS: return "QUERY_COUNTERS";
    default:                   return "UNKNOWN";
    }
}

static const char *pib_admin_status_name(uint8_t status)
{
    switch (status) {
    case PIB_AQ_OK:           return "OK";
    case PIB_AQ_BAD_OPCODE:   return "BAD_OPCODE";
    case PIB_AQ_BAD_PARAM:    return "BAD_PARAM";
    case PIB_AQ_BAD_RESOURCE: return "BAD_RESOURCE";
    case PIB_AQ_NO_RESOURCES: return "NO_RESOURCES";
    case PIB_AQ_BAD_STATE:    return "BAD_STATE";
    case PIB_AQ_DMA_ERROR:    return "DMA_ERROR";
    case PIB_AQ_BUSY:         return "BUSY";
    default:                  return "UNKNOWN";
    }
}

const char *pib_async_event_name(uint8_t type)
{
    switch (type) {
    case PIB_AE_PORT_ACTIVE:    return "PORT_ACTIVE";
    case PIB_AE_PORT_ERR:       return "PORT_ERR";
    case PIB_AE_LID_CHANGE:     return "LID_CHANGE";
    case PIB_AE_LINK_UP:        return "LINK_UP";
    case PIB_AE_CQ_ERR:         return "CQ_ERR";
    case PIB_AE_QP_FATAL:       return "QP_FATAL";
    case PIB_AE_QP_REQ_ERR:     return "QP_REQ_ERR";
    case PIB_AE_QP_ACCESS_ERR:  return "QP_ACCESS_ERR";
    case PIB_AE_COMM_EST:       return "COMM_EST";
    case PIB_AE_SQ_DRAINED:     return "SQ_DRAINED";
    case PIB_AE_QP_LAST_WQE:    return "QP_LAST_WQE";
    case PIB_AE_SRQ_LIMIT:      return "SRQ_LIMIT";
    case PIB_AE_SRQ_ERR:        return "SRQ_ERR";
    default:                    return "UNKNOWN";
    }
}

static const char *pib_uar_db_name(uint32_t reg)
{
    switch (reg) {
    case PIB_UAR_SQ_DB:  return "SQ_DB";
    case PIB_UAR_RQ_DB:  return "RQ_DB";
    case PIB_UAR_CQ_DB:  return "CQ_DB";
    case PIB_UAR_SRQ_DB: return "SRQ_DB";
    default:             return "UNDEFINED";
    }
}

/*
 * Helpers: guest errors, guest memory, interrupts, rings
 */

void pib_record_guest_error(PibState *s, enum pib_guest_error code)
{
    if (s->regs.err_count != UINT32_MAX) {
        s->regs.err_count++;
    }
    s->regs.err_last = code;
}

/*
 * The one pair of functions through which the device touches guest memory.  A
 * failed access (unassigned address, bus mastering off, IOMMU fault, a range
 * that wraps the address space, or one of our own BARs) is a guest error; the
 * caller turns it into a status code or a fatal error.
 *
 * The device's re-entrancy guard is engaged around every DMA, not only in
 * MMIO handlers and guarded bottom halves: link events post AEQ entries from
 * chardev callbacks, and a ring pointed at BAR0 must not reach the register
 * handlers from there either.
 */
static bool pib_dma_rw(PibState *s, uint64_t addr, void *buf, uint32_t len,
                       DMADirection dir, const char *what)
{
    const char *dirname = dir == DMA_DIRECTION_TO_DEVICE ? "read" : "write";
    MemReentrancyGuard *guard = &DEVICE(s)->mem_reentrancy_guard;
    MemTxResult res = MEMTX_DECODE_ERROR;
    bool engaged = guard->engaged_in_io;

    if (addr + len >= addr) {
        guard->engaged_in_io = true;
        res = pci_dma_rw(PCI_DEVICE(s), addr, buf, len, dir,
                         MEMTXATTRS_UNSPECIFIED);
        guard->engaged_in_io = engaged;
    }
    if (res != MEMTX_OK) {
        PIB_GUEST_ERR(s, PIB_GERR_DMA, pib_ub_dma,
                      "%s of %s at 0x%" PRIx64 " len %" PRIu32 " failed (%d)",
                      dirname, what, addr, len, res);
        return false;
    }
    trace_pib_dma(dirname, what, addr, len);
    return true;
}

bool pib_dma_read(PibState *s, uint64_t addr, void *buf, uint32_t len,
                  const char *what)
{
    return pib_dma_rw(s, addr, buf, len, DMA_DIRECTION_TO_DEVICE, what);
}

bool pib_dma_write(PibState *s, uint64_t addr, const void *buf, uint32_t len,
                   const char *what)
{
    return pib_dma_rw(s, addr, (void *)buf, len, DMA_DIRECTION_FROM_DEVICE,
                      what);
}

/*
 * Write a 16-byte ring entry (admin CQE or AEQE) whose first dword carries
 * the phase bit.  The body goes first and the phase dword last, so a driver
 * polling the phase never sees a half-written entry (each DMA is ordered
 * after the previous one by dma_memory_rw's barrier).
 */
static bool pib_ring_write_entry(PibState *s, uint64_t addr, const void *entry,
                                 const char *what)
{
    const uint8_t *p = entry;

    return pib_dma_write(s, addr + 4, p + 4, 12, what) &&
           pib_dma_write(s, addr, p, 4, what);
}

/*
 * Raise an MSI-X vector.  Error injection may hold the message back for a
 * while (inject-irq-delay-us); it then sends it with pib_irq_raise().
 */
void pib_irq_notify(PibState *s, unsigned vector)
{
    if (pib_inject_irq_delay(s, vector)) {
        return;
    }
    pib_irq_raise(s, vector);
}

/* The device signals only through MSI-X; without it the driver must poll. */
void pib_irq_raise(PibState *s, unsigned vector)
{
    PCIDevice *pci = PCI_DEVICE(s);

    if (msix_enabled(pci)) {
        trace_pib_irq_msix(vector);
        msix_notify(pci, vector);
    } else {
        trace_pib_irq_none(vector);
    }
}

static bool pib_queue_depth_valid(uint32_t depth)
{
    return depth >= PIB_QUEUE_MIN_DEPTH && depth <= PIB_QUEUE_MAX_DEPTH &&
           is_power_of_2(depth);
}

static uint64_t pib_reg_addr64(uint32_t lo, uint32_t hi)
{
    return ((uint64_t)hi << 32) | lo;
}

uint64_t pib_port_guid(PibState *s)
{
    return s->node_guid + 1;
}

/*
 * Async event queue
 */

/*
 * Post one event.  Events raised while the device is not READY are not
 * queued (there is no ring); the driver learns the port state at ENABLE
 * (pib_port_announce) or by QUERY_PORT.  A full ring drops the event and
 * counts it in AEQ_LOST, so loss is never silent.
 */
void pib_aeq_post(PibState *s, enum pib_async_event_type type, uint32_t obj,
                  uint64_t data)
{
    PibEventQueue *q = &s->aeq;
    struct pib_aeqe e = { 0 };
    uint64_t addr;

    if (!(s->regs.status & PIB_STATUS_READY)) {
        trace_pib_aeqe_not_ready(type, pib_async_event_name(type));
        return;
    }
    if (q->pi - q->ci >= q->depth) {
        if (s->regs.aeq_lost != UINT32_MAX) {
            s->regs.aeq_lost++;
        }
        trace_pib_aeq_full(type, pib_async_event_name(type), s->regs.aeq_lost);
        return;
    }

    e.type = type;
    e.flags = pib_phase(q->pi, q->depth) ? PIB_AEQE_PHASE : 0;
    e.obj = cpu_to_le32(obj);
    e.data = cpu_to_le64(data);
    addr = q->base + (uint64_t)(q->pi & (q->depth - 1)) * sizeof(e);
    if (!pib_ring_write_entry(s, addr, &e, "AEQE")) {
        if (s->regs.aeq_lost != UINT32_MAX) {
            s->regs.aeq_lost++;
        }
        return;
    }
    trace_pib_aeqe(q->pi, type, pib_async_event_name(type), obj, data,
                   e.flags & PIB_AEQE_PHASE);
    q->pi++;
    pib_irq_notify(s, PIB_MSIX_VEC_ASYNC);
}

/*
 * AEQ_DB: the driver returns entries.  The new consumer index may not pass
 * the producer.
 */
static void pib_aeq_doorbell(PibState *s, uint32_t ci)
{
    PibEventQueue *q = &s->aeq;

    if (!(s->regs.status & PIB_STATUS_READY)) {
        PIB_GUEST_ERR(s, PIB_GERR_BAD_ACCESS, pib_ub_aeq_db_disabled,
                      "AEQ_DB %" PRIu32 " while not READY", ci);
        return;
    }
    if (ci - q->ci > q->pi - q->ci) {
        PIB_GUEST_ERR(s, PIB_GERR_AEQ_DB_RANGE, pib_ub_aeq_db_range,
                      "AEQ_DB %" PRIu32 " (consumer %" PRIu32
                      ") is ahead of producer %" PRIu32, ci, q->ci, q->pi);
        return;
    }
    trace_pib_aeq_db(ci, q->pi);
    s->regs.aeq_db = ci;
    q->ci = ci;
}

/*
 * Completion event queue: one 8-byte CEQE per completion event, naming the
 * CQ, then MSI-X vector 2.  Without a CEQ (CEQ_DEPTH 0 at ENABLE) there are no
 * completion interrupts.  A CQ raises at most one event per arming, so a CEQ
 * as deep as the number of CQs never fills; if it does, the event is lost
 * and counted.
 */
void pib_ceq_post(PibState *s, uint32_t cqn)
{
    PibEventQueue *q = &s->ceq;
    struct pib_ceqe e = { 0 };
    uint64_t addr;

    if (!(s->regs.status & PIB_STATUS_READY) || q->depth == 0) {
        trace_pib_ceqe_none(cqn);
        return;
    }
    if (q->pi - q->ci >= q->depth) {
        q->lost++;
        trace_pib_ceq_full(cqn, q->lost);
        return;
    }
    e.cqn = cpu_to_le32(cqn);
    e.flags = pib_phase(q->pi, q->depth) ? PIB_CEQE_F_PHASE : 0;
    addr = q->base + (uint64_t)(q->pi & (q->depth - 1)) * sizeof(e);
    /* The CQN first, then the dword with the phase bit. */
    if (!pib_dma_write(s, addr, &e, 4, "CEQE") ||
        !pib_dma_write(s, addr + 4, (uint8_t *)&e + 4, 4, "CEQE")) {
        q->lost++;
        return;
    }
    trace_pib_ceqe(q->pi, cqn, e.flags & PIB_CEQE_F_PHASE);
    q->pi++;
    pib_irq_notify(s, PIB_MSIX_VEC_CEQ);
}

/* CEQ_DB: the driver returns CEQEs; it may not pass the producer. */
static void pib_ceq_doorbell(PibState *s, uint32_t ci)
{
    PibEventQueue *q = &s->ceq;

    if (!(s->regs.status & PIB_STATUS_READY) || q->depth == 0) {
        PIB_GUEST_ERR(s, PIB_GERR_BAD_ACCESS, pib_ub_ceq_db_disabled,
                      "CEQ_DB %" PRIu32 " without a CEQ", ci);
        return;
    }
    if (ci - q->ci > q->pi - q->ci) {
        PIB_GUEST_ERR(s, PIB_GERR_CEQ_DB_RANGE, pib_ub_ceq_db_range,
                      "CEQ_DB %" PRIu32 " (consumer %" PRIu32
                      ") is ahead of producer %" PRIu32, ci, q->ci, q->pi);
        return;
    }
    trace_pib_ceq_db(ci, q->pi);
    s->regs.ceq_db = ci;
    q->ci = ci;
}

/*
 * Admin commands.  Each handler validates its input and returns an admin
 * status; results go into *res (completion result0/result1) or, for
 * structures, to resp_addr.
 */

/*
 * Copy a response structure to resp_addr: min(resp_len, size) bytes, as the
 * header promises.
 */
static uint8_t pib_admin_respond(PibState *s, const struct pib_admin_cmd *cmd,
                                 const void *resp, uint32_t size)
{
    uint32_t len = MIN(le32_to_cpu(cmd->resp_len), size);

    if (len == 0) {
        return PIB_AQ_OK;
    }
    if (!pib_dma_write(s, le64_to_cpu(cmd->resp_addr), resp, len,
                       "admin response")) {
        return PIB_AQ_DMA_ERROR;
    }
    return PIB_AQ_OK;
}

static bool pib_port_num_valid(uint8_t port_num)
{
    return port_num >= 1 && port_num <= PIB_NUM_PORTS;
}

static uint8_t pib_cmd_query_device(PibState *s,
                                    const struct pib_admin_cmd *cmd,
                                    PibAdminResult *res)
{
    struct pib_device_attr a = {
        .fw_ver              = cpu_to_le64(PIB_FW_VER),
        .node_guid           = cpu_to_le64(s->node_guid),
        .sys_image_guid      = cpu_to_le64(s->node_guid),
        .max_mr_size         = cpu_to_le64(PIB_MAX_MR_SIZE),
        .page_size_cap       = cpu_to_le64(PIB_PAGE_SIZE_CAP),
        .vendor_id           = cpu_to_le32(PIB_VENDOR_OUI),
        .vendor_part_id      = cpu_to_le32(PIB_PCI_DEVICE_ID),
        .hw_ver              = cpu_to_le32(PIB_PCI_REVISION),
        .max_qp              = cpu_to_le32(PIB_MAX_QP),
        .max_qp_wr           = cpu_to_le32(PIB_MAX_QP_WR),
        .max_sge             = cpu_to_le32(PIB_MAX_SGE),
        .max_cq              = cpu_to_le32(PIB_MAX_CQ),
        .max_cqe             = cpu_to_le32(PIB_MAX_CQE),
        .max_mr              = cpu_to_le32(PIB_MAX_MR),
        .max_pd              = cpu_to_le32(PIB_MAX_PD),
        .max_qp_rd_atom      = cpu_to_le32(PIB_MAX_RD_ATOM),
        .max_qp_init_rd_atom = cpu_to_le32(PIB_MAX_RD_ATOM),
        .max_srq             = cpu_to_le32(PIB_MAX_SRQ),
        .max_srq_wr          = cpu_to_le32(PIB_MAX_SRQ_WR),
        .max_srq_sge         = cpu_to_le32(PIB_MAX_SGE),
        .max_ah              = cpu_to_le32(1024),   /* AHs: in the provider */
        .max_inline_data     = cpu_to_le32(PIB_MAX_INLINE_DATA),
        .device_cap_flags    = cpu_to_le32(PIB_DEV_CAPS),
        .max_pkeys           = cpu_to_le16(PIB_PKEY_TBL_LEN),
        .local_ca_ack_delay  = 15,
        .phys_port_cnt       = PIB_NUM_PORTS,
        .num_uars            = cpu_to_le32(PIB_NUM_UARS),
    };

    return pib_admin_respond(s, cmd, &a, sizeof(a));
}

static uint8_t pib_cmd_query_port(PibState *s, const struct pib_admin_cmd *cmd,
                                  PibAdminResult *res)
{
    struct pib_port_attr a;

    if (!pib_port_num_valid(cmd->in.port.port_num)) {
        return PIB_AQ_BAD_PARAM;
    }

    a = (struct pib_port_attr) {
        .subnet_prefix  = cpu_to_le64(PIB_DEFAULT_GID_PREFIX),
        .port_guid      = cpu_to_le64(pib_port_guid(s)),
        .port_cap_flags = cpu_to_le32(s->port.cap_flags),
        .max_msg_sz     = cpu_to_le32(PIB_MAX_MSG_SZ),
        .lid            = cpu_to_le16(s->port.lid),
        .sm_lid         = cpu_to_le16(s->port.sm_lid),
        .pkey_tbl_len   = cpu_to_le16(PIB_PKEY_TBL_LEN),
        .gid_tbl_len    = cpu_to_le16(PIB_GID_TBL_LEN),
        .state          = pib_port_ib_state(s),
        .phys_state     = pib_port_phys_state(s),
        .max_mtu        = PIB_IB_MTU_4096,
        .active_mtu     = PIB_IB_MTU_4096,
        .lmc            = s->port.lmc,
        .sm_sl          = s->port.sm_sl,
        .active_width   = PIB_IB_WIDTH_4X,
        .active_speed   = PIB_IB_SPEED_QDR,
        .link_downs     = cpu_to_le32(s->port.link_downs),
        .bad_pkey_cntr  = cpu_to_le32(s->port.bad_pkey_cntr),
        .qkey_viol_cntr = cpu_to_le32(s->port.qkey_viol_cntr),
    };

    return pib_admin_respond(s, cmd, &a, sizeof(a));
}

static bool pib_lid_is_unicast(uint16_t lid)
{
    /* IBTA: 0xc000..0xfffe are multicast LIDs, 0xffff the permissive LID */
    return lid >= 0x0001 && lid <= 0xbfff;
}

/*
 * SET_PORT: validate every field named in the mask first, then apply them all,
 * so a rejected command changes nothing.  Capability bits are set before they
 * are cleared (clear wins).
 */
static uint8_t pib_cmd_set_port(PibState *s, const struct pib_admin_cmd *cmd,
                                PibAdminResult *res)
{
    const struct pib_cmd_set_port *p = &cmd->in.set_port;
    uint32_t mask = le32_to_cpu(p->mask);
    uint16_t lid = le16_to_cpu(p->lid);
    uint16_t sm_lid = le16_to_cpu(p->sm_lid);
    const uint32_t known = PIB_SET_PORT_LID | PIB_SET_PORT_SM |
                           PIB_SET_PORT_CAPS;

    if (!pib_port_num_valid(p->port_num) || (mask & ~known)) {
        return PIB_AQ_BAD_PARAM;
    }
    if ((mask & PIB_SET_PORT_LID) && (!pib_lid_is_unicast(lid) || p->lmc > 7)) {
        return PIB_AQ_BAD_PARAM;
    }
    if ((mask & PIB_SET_PORT_SM) &&
        ((sm_lid != 0 && !pib_lid_is_unicast(sm_lid)) || p->sm_sl > 15)) {
        return PIB_AQ_BAD_PARAM;
    }

    if (mask & PIB_SET_PORT_CAPS) {
        s->port.cap_flags |= le32_to_cpu(p->cap_set);
        s->port.cap_flags &= ~le32_to_cpu(p->cap_clr);
    }
    if (mask & PIB_SET_PORT_SM) {
        s->port.sm_lid = sm_lid;
        s->port.sm_sl = p->sm_sl;
    }
    if (mask & PIB_SET_PORT_LID) {
        s->port.lmc = p->lmc;
        if (lid != s->port.lid) {
            s->port.lid = lid;
            pib_aeq_post(s, PIB_AE_LID_CHANGE, PIB_PORT_NUM, lid);
            pib_port_event(s, PIB_PEV_LID_CHANGED);
        }
    }
    trace_pib_admin_set_port(mask, s->port.lid, s->port.sm_lid,
                             s->port.cap_flags);
    return PIB_AQ_OK;
}

static uint8_t pib_cmd_query_pkey(PibState *s, const struct pib_admin_cmd *cmd,
                                  PibAdminResult *res)
{
    if (!pib_port_num_valid(cmd->in.port.port_num) ||
        le32_to_cpu(cmd->in.port.index) >= PIB_PKEY_TBL_LEN) {
        return PIB_AQ_BAD_PARAM;
    }
    res->result0 = PIB_DEFAULT_PKEY;
    return PIB_AQ_OK;
}

/* The one GID: subnet prefix and port GUID, big-endian as on the wire. */
static uint8_t pib_cmd_query_gid(PibState *s, const struct pib_admin_cmd *cmd,
                                 PibAdminResult *res)
{
    uint8_t gid[16];

    if (!pib_port_num_valid(cmd->in.port.port_num) ||
        le32_to_cpu(cmd->in.port.index) >= PIB_GID_TBL_LEN) {
        return PIB_AQ_BAD_PARAM;
    }
    stq_be_p(gid, PIB_DEFAULT_GID_PREFIX);
    stq_be_p(gid + 8, pib_port_guid(s));
    return pib_admin_respond(s, cmd, gid, sizeof(gid));
}

/* UAR pages 1..num_uars-1 are handed out lowest first; page 0 is never free. */
static uint8_t pib_cmd_alloc_uar(PibState *s, const struct pib_admin_cmd *cmd,
                                 PibAdminResult *res)
{
    unsigned long uar = find_next_zero_bit(s->uar_bitmap, PIB_NUM_UARS, 1);

    if (uar >= PIB_NUM_UARS) {
        return PIB_AQ_NO_RESOURCES;
    }
    set_bit(uar, s->uar_bitmap);
    trace_pib_admin_uar("alloc", uar);
    res->result0 = uar;
    return PIB_AQ_OK;
}

static uint8_t pib_cmd_dealloc_uar(PibState *s, const struct pib_admin_cmd *cmd,
                                   PibAdminResult *res)
{
    uint32_t uar = le32_to_cpu(cmd->in.uar.uar);

    if (uar == 0 || uar >= PIB_NUM_UARS) {
        return PIB_AQ_BAD_PARAM;
    }
    if (!test_bit(uar, s->uar_bitmap)) {
        return PIB_AQ_BAD_RESOURCE;
    }
    if (pib_uar_has_objects(s, uar)) {
        return PIB_AQ_BUSY;
    }
    clear_bit(uar, s->uar_bitmap);
    trace_pib_admin_uar("dealloc", uar);
    return PIB_AQ_OK;
}

static uint8_t pib_cmd_nop(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    res->result0 = le32_to_cpu(cmd->in.nop.value);
    return PIB_AQ_OK;
}

/* QUERY_COUNTERS: u64 counters[PIB_CNT_MAX], little-endian, since reset. */
static uint8_t pib_cmd_query_counters(PibState *s,
                                      const struct pib_admin_cmd *cmd,
                                      PibAdminResult *res)
{
    uint64_t c[PIB_CNT_MAX];
    int i;

    for (i = 0; i < PIB_CNT_MAX; i++) {
        c[i] = cpu_to_le64(s->counters[i]);
    }
    return pib_admin_respond(s, cmd, c, sizeof(c));
}

static uint8_t pib_admin_exec(PibState *s, const struct pib_admin_cmd *cmd,
                              PibAdminResult *res)
{
    switch (cmd->opcode) {
    case PIB_CMD_QUERY_DEVICE: return pib_cmd_query_device(s, cmd, res);
    case PIB_CMD_QUERY_PORT:   return pib_cmd_query_port(s, cmd, res);
    case PIB_CMD_SET_PORT:     return pib_cmd_set_port(s, cmd, res);
    case PIB_CMD_QUERY_PKEY:   return pib_cmd_query_pkey(s, cmd, res);
    case PIB_CMD_QUERY_GID:    return pib_cmd_query_gid(s, cmd, res);
    case PIB_CMD_ALLOC_UAR:    return pib_cmd_alloc_uar(s, cmd, res);
    case PIB_CMD_DEALLOC_UAR:  return pib_cmd_dealloc_uar(s, cmd, res);
    case PIB_CMD_NOP:          return pib_cmd_nop(s, cmd, res);
    case PIB_CMD_CREATE_PD:    return pib_cmd_create_pd(s, cmd, res);
    case PIB_CMD_DESTROY_PD:   return pib_cmd_destroy_pd(s, cmd, res);
    case PIB_CMD_REG_MR:       return pib_cmd_reg_mr(s, cmd, res);
    case PIB_CMD_DEREG_MR:     return pib_cmd_dereg_mr(s, cmd, res);
    case PIB_CMD_CREATE_CQ:    return pib_cmd_create_cq(s, cmd, res);
    case PIB_CMD_DESTROY_CQ:   return pib_cmd_destroy_cq(s, cmd, res);
    case PIB_CMD_CREATE_QP:    return pib_cmd_create_qp(s, cmd, res);
    case PIB_CMD_MODIFY_QP:    return pib_cmd_modify_qp(s, cmd, res);
    case PIB_CMD_QUERY_QP:     return pib_cmd_query_qp(s, cmd, res);
    case PIB_CMD_DESTROY_QP:   return pib_cmd_destroy_qp(s, cmd, res);
    case PIB_CMD_ALLOC_MW:     return pib_cmd_alloc_mw(s, cmd, res);
    case PIB_CMD_DEALLOC_MW:   return pib_cmd_dealloc_mw(s, cmd, res);
    case PIB_CMD_CREATE_SRQ:   return pib_cmd_create_srq(s, cmd, res);
    case PIB_CMD_MODIFY_SRQ:   return pib_cmd_modify_srq(s, cmd, res);
    case PIB_CMD_QUERY_SRQ:    return pib_cmd_query_srq(s, cmd, res);
    case PIB_CMD_DESTROY_SRQ:  return pib_cmd_destroy_srq(s, cmd, res);
    case PIB_CMD_QUERY_COUNTERS: return pib_cmd_query_counters(s, cmd, res);
    default:                   return PIB_AQ_BAD_OPCODE;
    }
}

/*
 * Admin queue engine
 */

/*
 * Execute command sq_head and write its completion.  Returns false if the
 * completion could not be written: the admin CQ is unusable, the device goes
 * FATAL and stops.
 */
static bool pib_admin_process_one(PibState *s)
{
    PibAdminQueue *q = &s->aq;
    uint32_t idx = q->sq_head;
    uint32_t slot = idx & (q->depth - 1);
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe cqe = { 0 };
    PibAdminResult res = { 0 };
    uint8_t status;

    if (pib_dma_read(s, q->sq_base + (uint64_t)slot * sizeof(cmd), &cmd,
                     sizeof(cmd), "admin command")) {
        trace_pib_admin_cmd(idx, le16_to_cpu(cmd.cmd_id), cmd.opcode,
                            pib_admin_opcode_name(cmd.opcode));
        status = pib_admin_exec(s, &cmd, &res);
    } else {
        /* Unreadable command: complete the slot, with no cmd_id to echo. */
        memset(&cmd, 0, sizeof(cmd));
        status = PIB_AQ_DMA_ERROR;
    }

    cqe.cmd_id = cmd.cmd_id;
    cqe.status = status;
    cqe.flags = pib_phase(idx, q->depth) ? PIB_ACQE_PHASE : 0;
    cqe.result0 = cpu_to_le32(res.result0);
    cqe.result1 = cpu_to_le32(res.result1);
    if (!pib_ring_write_entry(s, q->cq_base + (uint64_t)slot * sizeof(cqe),
                              &cqe, "admin CQE")) {
        s->regs.status &= ~PIB_STATUS_READY;
        s->regs.status |= PIB_STATUS_FATAL;
        trace_pib_fatal("admin CQ write failed");
        return false;
    }
    trace_pib_admin_cqe(idx, le16_to_cpu(cmd.cmd_id), status,
                        pib_admin_status_name(status), res.result0, res.result1,
                        cqe.flags & PIB_ACQE_PHASE);
    q->sq_head++;
    return true;
}

/*
 * Bottom half: run the commands between sq_head and the doorbell, in
 * order.  The doorbell check keeps tail - head <= depth, and the budget makes
 * that bound explicit: one run never executes more than depth commands.  One
 * interrupt covers the whole batch.
 */
static void pib_admin_bh(void *opaque)
{
    PibState *s = opaque;
    PibAdminQueue *q = &s->aq;
    uint32_t budget;
    bool completed = false;

    if (!(s->regs.status & PIB_STATUS_READY)) {
        return;
    }
    trace_pib_admin_bh(q->sq_head, q->sq_tail);

    for (budget = q->depth; budget > 0 && q->sq_head != q->sq_tail; budget--) {
        if (!pib_admin_process_one(s)) {
            break;
        }
        completed = true;
        if (!(s->regs.status & PIB_STATUS_READY)) {
            break;
        }
    }
    if (completed) {
        pib_irq_notify(s, PIB_MSIX_VEC_ADMIN);
    }
    if ((s->regs.status & PIB_STATUS_READY) && q->sq_head != q->sq_tail) {
        qemu_bh_schedule(s->admin_bh);
    }
}

/*
 * AQ_DB: the driver published commands up to (not including) index tail.  It
 * may never have more than depth commands outstanding, and the index never
 * moves backwards.
 */
static void pib_aq_doorbell(PibState *s, uint32_t tail)
{
    PibAdminQueue *q = &s->aq;

    if (!(s->regs.status & PIB_STATUS_READY)) {
        PIB_GUEST_ERR(s, PIB_GERR_AQ_DB_DISABLED, pib_ub_aq_db_disabled,
                      "AQ_DB %" PRIu32 " while not READY", tail);
        return;
    }
    if (tail - q->sq_head > q->depth ||
        tail - q->sq_head < q->sq_tail - q->sq_head) {
        PIB_GUEST_ERR(s, PIB_GERR_AQ_DB_RANGE, pib_ub_aq_db_range,
                      "AQ_DB %" PRIu32 " (previous %" PRIu32 ", consumer %"
                      PRIu32 ", depth %" PRIu32 ")",
                      tail, q->sq_tail, q->sq_head, q->depth);
        return;
    }
    trace_pib_aq_db(tail, q->sq_head);
    s->regs.aq_db = tail;
    q->sq_tail = tail;
    qemu_bh_schedule(s->admin_bh);
}

/*
 * CONTROL: enable, disable, reset
 */

static bool pib_check_depth(PibState *s, const char *name, uint32_t depth)
{
    if (!pib_queue_depth_valid(depth)) {
        PIB_GUEST_ERR(s, PIB_GERR_BAD_CONFIG, pib_ub_bad_config,
                      "%s = 0x%" PRIx64 " (need a power of two, 2..4096)",
                      name, (uint64_t)depth);
        return false;
    }
    return true;
}

static bool pib_check_base(PibState *s, const char *name, uint64_t base)
{
    if (!QEMU_IS_ALIGNED(base, PIB_QUEUE_BASE_ALIGN)) {
        PIB_GUEST_ERR(s, PIB_GERR_BAD_CONFIG, pib_ub_bad_config,
                      "%s = 0x%" PRIx64 " (need 4 KiB alignment)", name, base);
        return false;
    }
    return true;
}

/*
 * CONTROL.ENABLE: latch and check the ring configuration; READY only if all
 * of it is valid.
 */
static void pib_enable(PibState *s)
{
    struct pib_regs *r = &s->regs;
    uint64_t sq = pib_reg_addr64(r->aq_sq_lo, r->aq_sq_hi);
    uint64_t cq = pib_reg_addr64(r->aq_cq_lo, r->aq_cq_hi);
    uint64_t eq = pib_reg_addr64(r->aeq_lo, r->aeq_hi);
    uint64_t ceq = pib_reg_addr64(r->ceq_lo, r->ceq_hi);

    if (r->status & PIB_STATUS_FATAL) {
        trace_pib_enable_fatal();
        return;
    }
    if (!pib_check_depth(s, "aq_depth", r->aq_depth) ||
        !pib_check_base(s, "aq_sq", sq) ||
        !pib_check_base(s, "aq_cq", cq) ||
        !pib_check_depth(s, "aeq_depth", r->aeq_depth) ||
        !pib_check_base(s, "aeq", eq)) {
        return;
    }
    /* The CEQ is optional: depth 0 means none. */
    if (r->ceq_depth != 0 &&
        (!pib_check_depth(s, "ceq_depth", r->ceq_depth) ||
         !pib_check_base(s, "ceq", ceq))) {
        return;
    }

    s->aq = (PibAdminQueue) {
        .depth = r->aq_depth, .sq_base = sq, .cq_base = cq,
    };
    s->aeq = (PibEventQueue) { .depth = r->aeq_depth, .base = eq };
    s->ceq = (PibEventQueue) { .depth = r->ceq_depth, .base = ceq };
    r->aq_db = 0;
    r->aeq_db = 0;
    r->ceq_db = 0;
    r->status |= PIB_STATUS_READY;
    trace_pib_enable(s->aq.depth, sq, cq, s->aeq.depth, eq);
    trace_pib_enable_ceq(s->ceq.depth, ceq);

    /* Tell the new driver where the port stands. */
    pib_port_announce(s);
}

static void pib_disable(PibState *s)
{
    trace_pib_disable();
    qemu_bh_cancel(s->admin_bh);
    s->regs.status &= ~PIB_STATUS_READY;
    s->aq = (PibAdminQueue) { 0 };
    s->aeq = (PibEventQueue) { 0 };
    s->ceq = (PibEventQueue) { 0 };
}

/*
 * Function reset (dc->reset, and CONTROL.RESET): every register back to its
 * reset value, rings forgotten, UARs and objects freed, port attributes back to
 * the properties.  The link itself (the "cable") stays as it is; a trained link
 * stays trained.
 */
static void pib_reset(PibState *s, const char *why)
{
    trace_pib_reset(why);
    qemu_bh_cancel(s->admin_bh);
    qemu_bh_cancel(s->work_bh);
    qemu_bh_cancel(s->rx_bh);
    s->regs = (struct pib_regs) {
        .magic    = PIB_MAGIC,
        .version  = (PIB_VERSION_MAJOR << 16) | PIB_VERSION_MINOR,
        .caps     = PIB_CAP_AEQ,
        .num_uars = PIB_NUM_UARS,
    };
    s->aq = (PibAdminQueue) { 0 };
    s->aeq = (PibEventQueue) { 0 };
    s->ceq = (PibEventQueue) { 0 };
    /* Objects first: their queued packets and timers go with them. */
    pib_objects_reset(s);
    pib_rx_purge(s);
    memset(s->counters, 0, sizeof(s->counters));
    pib_inject_reset(s);
    bitmap_zero(s->uar_bitmap, PIB_NUM_UARS);
    set_bit(0, s->uar_bitmap);
    pib_port_reset(s);
}

static void pib_write_control(PibState *s, uint32_t val)
{
    const uint32_t known = PIB_CTRL_ENABLE | PIB_CTRL_RESET;

    if (val & ~known) {
        PIB_GUEST_ERR(s, PIB_GERR_BAD_ACCESS, pib_ub_control_reserved,
                      "CONTROL 0x%" PRIx32 " sets reserved bits", val);
        val &= known;
    }
    if (val & PIB_CTRL_RESET) {
        pib_reset(s, "CONTROL.RESET");
        return;
    }
    s->regs.control = val;
    if (val & PIB_CTRL_ENABLE) {
        if (!(s->regs.status & PIB_STATUS_READY)) {
            pib_enable(s);
        }
    } else if (s->regs.status & PIB_STATUS_READY) {
        pib_disable(s);
    }
}

/*
 * BAR0: registers.  Reads come straight from struct pib_regs; writes go through
 * one switch.
 */

static bool pib_regs_access_ok(PibState *s, hwaddr addr, unsigned size,
                               const char *dir)
{
    if (size != 4 || (addr & 3)) {
        PIB_GUEST_ERR(s, PIB_GERR_BAD_ACCESS, pib_ub_mmio_size,
                      "%s of size %u at 0x%" PRIx64 " (registers are 32-bit)",
                      dir, size, (uint64_t)addr);
        return false;
    }
    if (addr >= sizeof(struct pib_regs)) {
        PIB_GUEST_ERR(s, PIB_GERR_BAD_ACCESS, pib_ub_mmio_undefined,
                      "%s at undefined offset 0x%" PRIx64, dir, (uint64_t)addr);
        return false;
    }
    return true;
}

static uint64_t pib_regs_read(void *opaque, hwaddr addr, unsigned size)
{
    PibState *s = opaque;
    uint32_t val;

    if (!pib_regs_access_ok(s, addr, size, "read")) {
        return 0;
    }
    memcpy(&val, (uint8_t *)&s->regs + addr, sizeof(val));
    trace_pib_mmio_read(addr, pib_reg_name(addr), val);
    return val;
}

static void pib_regs_write(void *opaque, hwaddr addr, uint64_t data,
                           unsigned size)
{
    PibState *s = opaque;
    struct pib_regs *r = &s->regs;
    uint32_t val = data;

    if (!pib_regs_access_ok(s, addr, size, "write")) {
        return;
    }
    trace_pib_mmio_write(addr, pib_reg_name(addr), val);

    switch (addr) {
    case PIB_REG_CONTROL:
        pib_write_control(s, val);
        break;
    /* Ring configuration: takes effect at the next CONTROL.ENABLE. */
    case PIB_REG_AQ_DEPTH:
        r->aq_depth = val;
        break;
    case PIB_REG_AQ_SQ_LO:
        r->aq_sq_lo = val;
        break;
    case PIB_REG_AQ_SQ_HI:
        r->aq_sq_hi = val;
        break;
    case PIB_REG_AQ_CQ_LO:
        r->aq_cq_lo = val;
        break;
    case PIB_REG_AQ_CQ_HI:
        r->aq_cq_hi = val;
        break;
    case PIB_REG_AEQ_DEPTH:
        r->aeq_depth = val;
        break;
    case PIB_REG_AEQ_LO:
        r->aeq_lo = val;
        break;
    case PIB_REG_AEQ_HI:
        r->aeq_hi = val;
        break;
    case PIB_REG_CEQ_DEPTH:
        r->ceq_depth = val;
        break;
    case PIB_REG_CEQ_LO:
        r->ceq_lo = val;
        break;
    case PIB_REG_CEQ_HI:
        r->ceq_hi = val;
        break;
    /* Doorbells */
    case PIB_REG_AQ_DB:
        pib_aq_doorbell(s, val);
        break;
    case PIB_REG_AEQ_DB:
        pib_aeq_doorbell(s, val);
        break;
    case PIB_REG_CEQ_DB:
        pib_ceq_doorbell(s, val);
        break;
    case PIB_REG_SCRATCH:
        r->scratch = val;
        break;
    /* Read-only */
    case PIB_REG_MAGIC:
    case PIB_REG_VERSION:
    case PIB_REG_CAPS:
    case PIB_REG_STATUS:
    case PIB_REG_NUM_UARS:
    case PIB_REG_ERR_COUNT:
    case PIB_REG_ERR_LAST:
    case PIB_REG_LINK_STATE:
    case PIB_REG_AEQ_LOST:
    default:
        PIB_GUEST_ERR(s, PIB_GERR_BAD_ACCESS, pib_ub_mmio_ro,
                      "write of 0x%" PRIx32 " to read-only %s (0x%" PRIx64 ")",
                      val, pib_reg_name(addr), (uint64_t)addr);
        break;
    }
}

/*
 * Every size and alignment is let through to the handlers (valid = 1..8,
 * unaligned), so that a wrong access is counted as a guest error instead of
 * being dropped by the memory core.
 */
static const MemoryRegionOps pib_regs_ops = {
    .read = pib_regs_read,
    .write = pib_regs_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 1, .max_access_size = 8, .unaligned = true },
    .impl = { .min_access_size = 1, .max_access_size = 8, .unaligned = true },
};

/*
 * BAR2: UAR doorbells
 */

/*
 * A doorbell is honoured only for an object created on this UAR page: a
 * process can ring only its own queues.  The handlers record the new index
 * and schedule work; nothing is executed here.
 */
static void pib_uar_doorbell(PibState *s, uint32_t page, uint32_t reg,
                             uint64_t data)
{
    uint32_t num = data & PIB_DB_OBJ_MASK;
    uint32_t index = data >> PIB_DB_INDEX_SHIFT;
    PibQp *qp = NULL;
    PibCq *cq = NULL;
    PibSrq *srq = NULL;

    trace_pib_uar_db(page, pib_uar_db_name(reg), num, index);
    switch (reg) {
    case PIB_UAR_SQ_DB:
    case PIB_UAR_RQ_DB:
        qp = pib_qp_lookup(s, num);
        if (qp && qp->uar == page) {
            pib_qp_doorbell(s, qp, reg == PIB_UAR_SQ_DB, page, data);
            return;
        }
        break;
    case PIB_UAR_CQ_DB:
        cq = pib_cq_lookup(s, num);
        if (cq && cq->uar == page) {
            pib_cq_doorbell(s, cq, page, data);
            return;
        }
        break;
    case PIB_UAR_SRQ_DB:
        srq = pib_srq_lookup(s, num);
        if (srq && srq->uar == page) {
            pib_srq_doorbell(s, srq, page, data);
            return;
        }
        break;
    default:
        break;
    }
    PIB_GUEST_ERR(s, PIB_GERR_UAR_DB_BAD_OBJ, pib_ub_uar_db_bad_obj,
                  "UAR page %" PRIu32 " %s for object %" PRIu32
                  " (index %" PRIu32 "): no such object on this page",
                  page, pib_uar_db_name(reg), num, index);
}

static uint64_t pib_uar_read(void *opaque, hwaddr addr, unsigned size)
{
    PibState *s = opaque;

    PIB_GUEST_ERR(s, PIB_GERR_UAR_DB_BAD_OFF, pib_ub_uar_bad_off,
                  "%s of size %u at UAR page %" PRIu32 " offset 0x%" PRIx32
                  " (doorbells are write-only)",
                  "read", size, (uint32_t)(addr >> PIB_UAR_PAGE_SHIFT),
                  (uint32_t)(addr & (PIB_UAR_PAGE_SIZE - 1)));
    return 0;
}

/*
 * Decode: page = offset >> 12, register = offset & 0xfff.  Doorbells are
 * single 64-bit writes.
 */
static void pib_uar_write(void *opaque, hwaddr addr, uint64_t data,
                          unsigned size)
{
    PibState *s = opaque;
    uint32_t page = addr >> PIB_UAR_PAGE_SHIFT;
    uint32_t reg = addr & (PIB_UAR_PAGE_SIZE - 1);
    bool known = reg == PIB_UAR_SQ_DB || reg == PIB_UAR_RQ_DB ||
                 reg == PIB_UAR_CQ_DB || reg == PIB_UAR_SRQ_DB;

    if (!known || size != 8) {
        PIB_GUEST_ERR(s, PIB_GERR_UAR_DB_BAD_OFF, pib_ub_uar_bad_off,
                      "%s of size %u at UAR page %" PRIu32 " offset 0x%" PRIx32,
                      "write", size, page, reg);
        return;
    }
    pib_uar_doorbell(s, page, reg, data);
}

static const MemoryRegionOps pib_uar_ops = {
    .read = pib_uar_read,
    .write = pib_uar_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 1, .max_access_size = 8, .unaligned = true },
    .impl = { .min_access_size = 1, .max_access_size = 8, .unaligned = true },
};

/*
 * QOM glue: identity, realize, properties, class
 */

/* FNV-1a, 64 bit: small, and stable across hosts and versions. */
static uint64_t pib_fnv1a(uint64_t h, const void *data, size_t len)
{
    const uint8_t *p = data;
    size_t i;

    for (i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/*
 * node-guid=0: derive an EUI-64 that is the same every time this configuration
 * starts and differs between the two ends of a link.  OUI in bits 63:40, a hash
 * of the link chardev's label and address, the device id and the LID in bits
 * 39:1, and bit 0 clear so the port GUID (node GUID + 1) keeps the OUI.  A
 * socket chardev's filename carries a "disconnected:" prefix or a " <-> peer"
 * suffix depending on the moment; both are stripped.
 */
static uint64_t pib_derive_node_guid(PibState *s)
{
    Chardev *chr = qemu_chr_fe_get_driver(&s->link.chr);
    const char *id = DEVICE(s)->id ? DEVICE(s)->id : "";
    uint64_t h = 0xcbf29ce484222325ull;
    uint8_t lid[2];

    if (chr) {
        const char *fn = chr->filename ? chr->filename : "";
        const char *end;

        if (g_str_has_prefix(fn, "disconnected:")) {
            fn += strlen("disconnected:");
        }
        end = strstr(fn, " <-> ");
        h = pib_fnv1a(h, chr->label, strlen(chr->label) + 1);
        h = pib_fnv1a(h, fn, end ? end - fn : strlen(fn));
    }
    h = pib_fnv1a(h, id, strlen(id) + 1);
    stw_le_p(lid, s->prop_lid);
    h = pib_fnv1a(h, lid, sizeof(lid));

    return ((uint64_t)PIB_VENDOR_OUI << 40) | (h & 0xfffffffffeull);
}

static void pib_realize(PCIDevice *pci, Error **errp)
{
    PibState *s = PIB_HCA(pci);
    int t;

    if (s->prop_lid != 0 && !pib_lid_is_unicast(s->prop_lid)) {
        error_setg(errp, "pib-hca: lid 0x%x is not a unicast LID "
                   "(1..0xbfff, or 0 for none)", s->prop_lid);
        return;
    }

    /* No INTx: the device signals only through MSI-X. */
    pci->config[PCI_INTERRUPT_PIN] = 0;
    pcie_endpoint_cap_init(pci, PIB_PCIE_CAP_OFFSET);

    memory_region_init_io(&s->regs_mr, OBJECT(s), &pib_regs_ops, s, "pib-regs",
                          PIB_REGS_SIZE);
    pci_register_bar(pci, PIB_BAR_REGS, PIB_BAR_TYPE, &s->regs_mr);
    memory_region_init_io(&s->uar_mr, OBJECT(s), &pib_uar_ops, s, "pib-uar",
                          PIB_UAR_BAR_SIZE);
    pci_register_bar(pci, PIB_BAR_UAR, PIB_BAR_TYPE, &s->uar_mr);
    if (msix_init_exclusive_bar(pci, PIB_MSIX_VECTORS, PIB_BAR_MSIX, errp)) {
        pcie_cap_exit(pci);
        return;
    }
    for (t = 0; t < PIB_MSIX_VECTORS; t++) {
        msix_vector_use(pci, t);
    }

    s->admin_bh = qemu_bh_new_guarded(pib_admin_bh, s,
                                      &DEVICE(s)->mem_reentrancy_guard);
    s->work_bh = qemu_bh_new_guarded(pib_work_bh, s,
                                     &DEVICE(s)->mem_reentrancy_guard);
    s->rx_bh = qemu_bh_new_guarded(pib_rx_bh, s,
                                   &DEVICE(s)->mem_reentrancy_guard);
    QTAILQ_INIT(&s->runlist);
    QTAILQ_INIT(&s->notify_list);
    QSIMPLEQ_INIT(&s->rxq);
    QSIMPLEQ_INIT(&s->pkt_pool);
    s->uar_bitmap = bitmap_new(PIB_NUM_UARS);
    if (s->node_guid == 0) {
        s->node_guid = pib_derive_node_guid(s);
    }
    pib_inject_realize(s);

    pib_reset(s, "realize");
    pib_link_realize(s);        /* last: the link may come up right away */
}

static void pib_exit(PCIDevice *pci)
{
    PibState *s = PIB_HCA(pci);

    pib_link_unrealize(s);
    pib_objects_reset(s);
    pib_rx_purge(s);
    pib_link_free_buffers(s);
    qemu_bh_delete(s->admin_bh);
    qemu_bh_delete(s->work_bh);
    qemu_bh_delete(s->rx_bh);
    pib_inject_unrealize(s);
    g_free(s->uar_bitmap);
    msix_unuse_all_vectors(pci);
    msix_uninit_exclusive_bar(pci);
    pcie_cap_exit(pci);
}

static void pib_instance_init(Object *obj)
{
    pib_inject_init(PIB_HCA(obj));
}

static void pib_qdev_reset(DeviceState *dev)
{
    pib_reset(PIB_HCA(dev), "device reset");
}

static PIB_PROPERTIES pib_props[] = {
    DEFINE_PROP_UINT64("node-guid", PibState, node_guid, 0),
    DEFINE_PROP_UINT16("lid", PibState, prop_lid, 0),
    DEFINE_PROP_CHR("chardev", PibState, link.chr),
    PIB_PROP_END
};

static const VMStateDescription pib_vmstate = {
    .name = "pib-hca",
    .unmigratable = 1,
};

static void pib_class_init(ObjectClass *oc, PibClassData data)
{
    DeviceClass *dc = DEVICE_CLASS(oc);
    PCIDeviceClass *pc = PCI_DEVICE_CLASS(oc);

    pc->realize = pib_realize;
    pc->exit = pib_exit;
    pc->vendor_id = PIB_PCI_VENDOR_ID;
    pc->device_id = PIB_PCI_DEVICE_ID;
    pc->subsystem_vendor_id = PIB_PCI_SUBSYS_VENDOR_ID;
    pc->subsystem_id = PIB_PCI_SUBSYS_ID;
    pc->revision = PIB_PCI_REVISION;
    pc->class_id = PIB_PCI_CLASS_INFINIBAND;

    set_bit(DEVICE_CATEGORY_NETWORK, dc->categories);
    dc->desc = "pib virtual InfiniBand HCA";
    device_class_set_legacy_reset(dc, pib_qdev_reset);
    dc->vmsd = &pib_vmstate;
    device_class_set_props(dc, pib_props);
    object_class_property_set_description(oc, "node-guid",
        "node GUID (EUI-64); 0 = derive from the link chardev and the LID");
    object_class_property_set_description(oc, "lid",
        "port LID until the driver sets one (1..0xbfff; 0 = none)");
    object_class_property_set_description(oc, "chardev",
        "the link: a socket chardev shared with the peer HCA");
    pib_inject_class_init(oc);      /* inject-*: settable at run time */
}

static const TypeInfo pib_info = {
    .name          = TYPE_PIB_HCA,
    .parent        = TYPE_PCI_DEVICE,
    .instance_size = sizeof(PibState),
    .instance_init = pib_instance_init,
    .class_init    = pib_class_init,
    .interfaces    = (InterfaceInfo[]) {
        { INTERFACE_PCIE_DEVICE },
        { }
    },
};

static void pib_register_types(void)
{
    type_register_static(&pib_info);
}

type_init(pib_register_types)
