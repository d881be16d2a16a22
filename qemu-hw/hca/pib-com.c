/*
 * pib HCA device model - the admin queue and the event queues
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The queues the device shares with its driver (include/pib_hw.h,
 * docs/reference/hardware.md "Admin queue" and "Async event queue"), as the driver's
 * guest-driver/pib_com.c is the other end of them:
 *
 *   admin queue  64-byte commands in, 16-byte phase-tagged completions out;
 *                AQ_DB only records the producer index, a bottom half runs
 *                the commands (pib_admin_exec: one handler per opcode of
 *                PIB_ADMIN_OPCODES, pib_cmd_<name>())
 *   AEQ          16-byte phase-tagged async events, MSI-X vector 1
 *   CEQ          8-byte CEQEs naming a CQ with a completion event, vector 2
 *
 * The commands about the device itself (QUERY_DEVICE, QUERY_PORT, SET_PORT,
 * QUERY_PKEY, QUERY_GID, ALLOC_UAR, DEALLOC_UAR, NOP, QUERY_COUNTERS) are
 * here too; each data-path object's commands are in its own file (pib-mr.c,
 * pib-cq.c, pib-srq.c, pib-qp.c).
 *
 * Layout: names, helpers for every command handler, the AEQ and the CEQ,
 * the device's commands, then the admin queue engine.
 */

#include "qemu/osdep.h"
#include "qemu/bitmap.h"
#include "qemu/bswap.h"
#include "qemu/units.h"

#include "pib-internal.h"
#include "../trace.h"

/*
 * Values QUERY_DEVICE reports.  The limits (pib-internal.h) are
 * what the data path enforces.
 */
#define PIB_FW_VER              ((uint64_t)1 << 32)     /* 1.0.0 */
#define PIB_PAGE_SIZE_CAP       ((uint64_t)(4 * KiB))

/* device_cap_flags: exactly what the data path implements. */
#define PIB_DEV_CAPS    (PIB_DEV_CAP_RC | PIB_DEV_CAP_RDMA | \
                         PIB_DEV_CAP_ATOMIC | PIB_DEV_CAP_UC | \
                         PIB_DEV_CAP_UD | PIB_DEV_CAP_SRQ | \
                         PIB_DEV_CAP_RC_RNR_NAK_GEN | \
                         PIB_DEV_CAP_MEM_WINDOW | PIB_DEV_CAP_MEM_MGT_EXT | \
                         PIB_DEV_CAP_RESIZE | PIB_DEV_CAP_CLOCK | \
                         PIB_DEV_CAP_ATOMIC_WRITE | PIB_DEV_CAP_XRC | \
                         PIB_DEV_CAP_FLUSH | PIB_DEV_CAP_RECV_DBREC)

/*
 * Names for traces, from the lists in include/pib_hw.h
 */

static const char *pib_admin_opcode_name(uint8_t opcode)
{
    switch (opcode) {
#define PIB_CMD_NAME(id, name, value) case PIB_CMD_##id: return #id;
    PIB_ADMIN_OPCODES(PIB_CMD_NAME)
#undef PIB_CMD_NAME
    default: return "UNKNOWN";
    }
}

static const char *pib_admin_status_name(uint8_t status)
{
    switch (status) {
#define PIB_AQ_NAME(id, value) case PIB_AQ_##id: return #id;
    PIB_ADMIN_STATUSES(PIB_AQ_NAME)
#undef PIB_AQ_NAME
    default: return "UNKNOWN";
    }
}

const char *pib_async_event_name(uint8_t type)
{
    switch (type) {
#define PIB_AE_NAME(id, value) case PIB_AE_##id: return #id;
    PIB_ASYNC_EVENTS(PIB_AE_NAME)
#undef PIB_AE_NAME
    default: return "UNKNOWN";
    }
}

/*
 * Helpers for every command handler
 */

/* An admin command refused: say why in the trace, answer the status. */
uint8_t pib_cmd_reject(const char *cmd, const char *why, uint64_t val,
                       uint8_t status)
{
    trace_pib_cmd_reject(cmd, why, val, status);
    return status;
}

/* Is uar a page ALLOC_UAR handed out (or the kernel's page 0)? */
bool pib_uar_valid(PibState *s, uint32_t uar)
{
    return uar < PIB_NUM_UARS && test_bit(uar, s->uar_bitmap);
}

/*
 * Copy a response structure to resp_addr: min(resp_len, size) bytes, as the
 * header promises.
 */
uint8_t pib_admin_respond(PibState *s, const struct pib_admin_cmd *cmd,
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

/*
 * Read a command's input mailbox (struct pib_cmd_mbox) into buf: min(len,
 * size) bytes, the rest of buf left as the caller set it (zero).
 */
bool pib_admin_mbox_read(PibState *s, const struct pib_admin_cmd *cmd,
                         void *buf, uint32_t size, const char *what)
{
    uint32_t len = MIN(le32_to_cpu(cmd->in.mbox.len), size);

    return len == 0 ||
           pib_dma_read(s, le64_to_cpu(cmd->in.mbox.addr), buf, len, what);
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
        pib_teach_eq_overrun(s, q, "AEQ", pib_async_event_name(type));
        return;
    }

    e.type = type;
    e.flags = pib_ring_phase(q->pi, q->depth) ? PIB_AEQE_F_PHASE : 0;
    e.obj = cpu_to_le32(obj);
    e.data = cpu_to_le64(data);
    addr = q->base + (uint64_t)(q->pi & (q->depth - 1)) * sizeof(e);
    if (!pib_ring_publish(s, addr, &e, sizeof(e),
                          offsetof(struct pib_aeqe, flags), "AEQE")) {
        if (s->regs.aeq_lost != UINT32_MAX) {
            s->regs.aeq_lost++;
        }
        return;
    }
    trace_pib_aeqe(q->pi, type, pib_async_event_name(type), obj, data,
                   e.flags & PIB_AEQE_F_PHASE);
    q->pi++;
    pib_irq_notify(s, PIB_MSIX_VEC_ASYNC);
}

/* An event queue's doorbell, checked: the entries up to ci are the driver's again. */
static void pib_eq_consume(PibEventQueue *q, uint32_t ci)
{
    if (ci != q->ci) {
        q->teach_told = false;          /* entries handed back: room again */
    }
    q->ci = ci;
}

/*
 * AEQ_DB: the driver returns entries.  The new consumer index may not pass
 * the producer.
 */
void pib_aeq_doorbell(PibState *s, uint32_t ci)
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
    pib_eq_consume(q, ci);
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
        pib_teach_eq_overrun(s, q, "CEQ", "a completion event");
        return;
    }
    e.cqn = cpu_to_le32(cqn);
    e.flags = pib_ring_phase(q->pi, q->depth) ? PIB_CEQE_F_PHASE : 0;
    addr = q->base + (uint64_t)(q->pi & (q->depth - 1)) * sizeof(e);
    if (!pib_ring_publish(s, addr, &e, sizeof(e),
                          offsetof(struct pib_ceqe, flags), "CEQE")) {
        q->lost++;
        return;
    }
    trace_pib_ceqe(q->pi, cqn, e.flags & PIB_CEQE_F_PHASE);
    q->pi++;
    pib_irq_notify(s, PIB_MSIX_VEC_CEQ);
}

/* CEQ_DB: the driver returns CEQEs; it may not pass the producer. */
void pib_ceq_doorbell(PibState *s, uint32_t ci)
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
    pib_eq_consume(q, ci);
}

/*
 * The commands about the device itself.  Each handler validates its input and
 * returns an admin status; results go into *res (completion result0/result1)
 * or, for structures, to resp_addr.
 */

/* The device_cap_flags QUERY_DEVICE reports: PIB_DEV_CAPS, less what a property turned off. */
uint32_t pib_dev_caps(const PibState *s)
{
    return PIB_DEV_CAPS & ~(s->recv_dbrec ? 0 : PIB_DEV_CAP_RECV_DBREC);
}

uint8_t pib_cmd_query_device(PibState *s, const struct pib_admin_cmd *cmd,
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
        /* An AH is the consumer's: the provider's or the driver's memory, never the device's. */
        .max_ah              = cpu_to_le32(INT32_MAX),
        .max_inline_data     = cpu_to_le32(PIB_MAX_INLINE_DATA),
        .device_cap_flags    = cpu_to_le32(pib_dev_caps(s)),
        .max_pkeys           = cpu_to_le16(PIB_PKEY_TBL_LEN),
        .local_ca_ack_delay  = 15,
        .phys_port_cnt       = PIB_NUM_PORTS,
        .num_uars            = cpu_to_le32(PIB_NUM_UARS),
        .max_mcast_grp       = cpu_to_le32(PIB_MAX_MCAST_GRP),
        .max_mcast_qp_attach = cpu_to_le32(PIB_MAX_MCAST_QP),
        .max_total_mcast_qp_attach = cpu_to_le32(PIB_MAX_MCAST_GRP * PIB_MAX_MCAST_QP),
        .max_fast_reg_pages  = cpu_to_le32(PIB_MAX_FAST_REG_PAGES),
        .clock_khz           = cpu_to_le32(PIB_CLOCK_KHZ),
        .max_cq_mod_count    = cpu_to_le16(PIB_MAX_CQ_MOD_COUNT),
        .max_cq_mod_period   = cpu_to_le16(PIB_MAX_CQ_MOD_PERIOD),
        .max_dm_size         = cpu_to_le32(s->dm_size),
        .dm_bar_offset       = cpu_to_le32(s->dm_size),
    };

    return pib_admin_respond(s, cmd, &a, sizeof(a));
}

/* Does any QP, CQ or SRQ still name this UAR page?  (DEALLOC_UAR: BUSY.) */
static bool pib_uar_has_objects(PibState *s, uint32_t uar)
{
    uint32_t i;
    PibQp *qp;
    PibCq *cq;
    PibSrq *srq;

    PIB_TABLE_FOREACH(&s->qps, i, qp) {
        if (qp->uar == uar) {
            return true;
        }
    }
    PIB_TABLE_FOREACH(&s->cqs, i, cq) {
        if (cq->uar == uar) {
            return true;
        }
    }
    PIB_TABLE_FOREACH(&s->srqs, i, srq) {
        if (srq->uar == uar) {
            return true;
        }
    }
    return false;
}

/* UAR pages 1..num_uars-1 are handed out lowest first; page 0 is never free. */
uint8_t pib_cmd_alloc_uar(PibState *s, const struct pib_admin_cmd *cmd,
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

uint8_t pib_cmd_dealloc_uar(PibState *s, const struct pib_admin_cmd *cmd,
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

uint8_t pib_cmd_nop(PibState *s, const struct pib_admin_cmd *cmd,
                    PibAdminResult *res)
{
    res->result0 = le32_to_cpu(cmd->in.nop.value);
    return PIB_AQ_OK;
}

/* QUERY_COUNTERS: u64 counters[PIB_CNT_MAX], little-endian, since reset. */
uint8_t pib_cmd_query_counters(PibState *s, const struct pib_admin_cmd *cmd,
                               PibAdminResult *res)
{
    uint64_t c[PIB_CNT_MAX];
    int i;

    pib_link_sync_counters(s);
    for (i = 0; i < PIB_CNT_MAX; i++) {
        c[i] = cpu_to_le64(s->counters[i]);
    }
    return pib_admin_respond(s, cmd, c, sizeof(c));
}

/*
 * Admin queue engine
 */

/* One handler per opcode, pib_cmd_<name>() (PIB_ADMIN_OPCODES). */
static uint8_t pib_admin_exec(PibState *s, const struct pib_admin_cmd *cmd,
                              PibAdminResult *res)
{
    switch (cmd->opcode) {
#define PIB_CMD_CASE(id, name, value) \
    case PIB_CMD_##id: return pib_cmd_##name(s, cmd, res);
    PIB_ADMIN_OPCODES(PIB_CMD_CASE)
#undef PIB_CMD_CASE
    default:
        return PIB_AQ_BAD_OPCODE;
    }
}

/*
 * Execute command sq_ci and write its completion.  Returns false if the
 * completion could not be written: the admin CQ is unusable, the device goes
 * FATAL and stops.
 */
static bool pib_admin_process_one(PibState *s)
{
    PibAdminQueue *q = &s->aq;
    uint32_t idx = q->sq_ci;
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
    cqe.flags = pib_ring_phase(idx, q->depth) ? PIB_ACQE_F_PHASE : 0;
    cqe.result0 = cpu_to_le32(res.result0);
    cqe.result1 = cpu_to_le32(res.result1);
    if (!pib_ring_publish(s, q->cq_base + (uint64_t)slot * sizeof(cqe), &cqe,
                          sizeof(cqe), offsetof(struct pib_admin_cqe, flags),
                          "admin CQE")) {
        s->regs.status &= ~PIB_STATUS_READY;
        s->regs.status |= PIB_STATUS_FATAL;
        trace_pib_fatal("admin CQ write failed");
        return false;
    }
    trace_pib_admin_cqe(idx, le16_to_cpu(cmd.cmd_id), status,
                        pib_admin_status_name(status), res.result0, res.result1,
                        cqe.flags & PIB_ACQE_F_PHASE);
    q->sq_ci++;
    return true;
}

/*
 * Bottom half: run the commands between sq_ci and the doorbell, in order.
 * The doorbell check keeps pi - ci <= depth, and the budget makes
 * that bound explicit: one run never executes more than depth commands.  One
 * interrupt covers the whole batch.
 */
void pib_admin_bh(void *opaque)
{
    PibState *s = opaque;
    PibAdminQueue *q = &s->aq;
    uint32_t budget;
    bool completed = false;

    if (!(s->regs.status & PIB_STATUS_READY) || s->stopped) {
        return;                 /* (stopped: the machine's resume schedules us again) */
    }
    trace_pib_admin_bh(q->sq_ci, q->sq_pi);

    for (budget = q->depth; budget > 0 && q->sq_ci != q->sq_pi; budget--) {
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
    if ((s->regs.status & PIB_STATUS_READY) && q->sq_ci != q->sq_pi) {
        qemu_bh_schedule(s->admin_bh);
    }
}

/*
 * AQ_DB: the driver published commands up to (not including) index pi.  It
 * may never have more than depth commands outstanding, and the index never
 * moves backwards.
 */
void pib_aq_doorbell(PibState *s, uint32_t pi)
{
    PibAdminQueue *q = &s->aq;

    if (!(s->regs.status & PIB_STATUS_READY)) {
        PIB_GUEST_ERR(s, PIB_GERR_AQ_DB_DISABLED, pib_ub_aq_db_disabled,
                      "AQ_DB %" PRIu32 " while not READY", pi);
        return;
    }
    if (pi - q->sq_ci > q->depth || pi - q->sq_ci < q->sq_pi - q->sq_ci) {
        PIB_GUEST_ERR(s, PIB_GERR_AQ_DB_RANGE, pib_ub_aq_db_range,
                      "AQ_DB %" PRIu32 " (previous %" PRIu32 ", consumer %"
                      PRIu32 ", depth %" PRIu32 ")",
                      pi, q->sq_pi, q->sq_ci, q->depth);
        return;
    }
    trace_pib_aq_db(pi, q->sq_ci);
    pib_teach_aq_doorbell(s, pi);
    s->regs.aq_db = pi;
    q->sq_pi = pi;
    qemu_bh_schedule(s->admin_bh);
}

