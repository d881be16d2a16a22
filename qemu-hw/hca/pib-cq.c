/*
 * pib HCA device model - completion queues
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * What a CQ promises (include/pib_wqe.h, docs/reference/hardware.md "Rings" and
 * "Completion events"):
 *
 *  - CQE i goes to slot i % depth with its phase bit 1 on the first pass,
 *    0 on the second, ...; the dword holding the phase is written last.
 *  - A CQ created with PIB_CQ_F_TIMESTAMP has 64-byte slots: the CQE, then
 *    the device clock and the real time when the CQE was written (struct
 *    pib_cqe_ts).  The slot
 *    size is the ring's stride; it stays the CQ's through RESIZE_CQ.
 *  - The ring is followed by a page whose first u32 is the consumer index
 *    record.  The device reads it only when the ring looks full.  If it
 *    really is full, that is an overflow: the CQ enters the error state
 *    (no CQE is written to it again) and CQ_ERR is raised once.
 *  - A CQ doorbell carries the consumer index and may arm the CQ, for the
 *    next completion or the next solicited (or unsuccessful) one.  The first
 *    completion that satisfies the arm disarms the CQ, writes a CEQE naming
 *    it and raises MSI-X vector 2.  If completions the consumer has not
 *    read yet already satisfy the arm, the event is raised right away, so a
 *    consumer that polls, arms, and polls again never sleeps on a CQE that
 *    is already there.
 *  - With event moderation (MODIFY_CQ) the first completion that satisfies
 *    the arm starts a wait instead, and the event goes after count such
 *    completions or period microseconds: one CEQE for them all.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/host-utils.h"
#include "qemu/main-loop.h"

#include "pib-internal.h"
#include "../trace.h"

/* What completed, for a send WQE's opcode (flushes included). */
uint8_t pib_cqe_opcode_of(uint8_t wqe_opcode)
{
    switch (wqe_opcode) {
    case PIB_WQE_RDMA_WRITE:
    case PIB_WQE_RDMA_WRITE_IMM:
        return PIB_CQE_RDMA_WRITE;
    case PIB_WQE_RDMA_READ:
        return PIB_CQE_RDMA_READ;
    case PIB_WQE_ATOMIC_CS:
        return PIB_CQE_COMP_SWAP;
    case PIB_WQE_ATOMIC_FA:
        return PIB_CQE_FETCH_ADD;
    case PIB_WQE_ATOMIC_WRITE:
        return PIB_CQE_ATOMIC_WRITE;
    case PIB_WQE_FLUSH:
        return PIB_CQE_FLUSH;
    case PIB_WQE_LOCAL_INV:
        return PIB_CQE_LOCAL_INV;
    case PIB_WQE_BIND_MW:
        return PIB_CQE_BIND_MW;
    case PIB_WQE_REG_MR:
        return PIB_CQE_REG_MR;
    default:
        return PIB_CQE_SEND;
    }
}

/* Raise the completion event: disarm, CEQE, interrupt; a moderation wait ends with it. */
static void pib_cq_fire(PibState *s, PibCq *cq)
{
    trace_pib_cq_event(cq->cqn, cq->arm == PIB_CQ_ARMED_SOLICITED, cq->mod_held);
    cq->arm = PIB_CQ_DISARMED;
    cq->mod_held = 0;
    timer_del(cq->mod_timer);
    pib_ceq_post(s, cq->cqn);
}

/*
 * A completion satisfied the arm.  Without moderation the event goes now; with it, the first
 * such completion starts the wait, and the count rule or the period (pib_cq_mod_expired)
 * ends it (MODIFY_CQ in pib_hw.h).
 */
static void pib_cq_event_due(PibState *s, PibCq *cq)
{
    if (!cq->mod_period_us) {
        pib_cq_fire(s, cq);
        return;
    }
    if (cq->mod_held++ == 0) {
        timer_mod(cq->mod_timer, qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) +
                                 cq->mod_period_us * SCALE_US);
        trace_pib_cq_mod_wait(cq->cqn, cq->mod_count, cq->mod_period_us);
    }
    if (cq->mod_count && cq->mod_held >= cq->mod_count) {
        pib_cq_fire(s, cq);
    }
}

/* The moderation period is over: the event for the completions held so far. */
void pib_cq_mod_expired(void *opaque)
{
    PibCq *cq = opaque;

    if (cq->mod_held) {
        pib_cq_fire(cq->s, cq);
    }
}

/*
 * Is the ring full?  The consumer index we know may be stale: look at the
 * record in guest memory.  A record that claims more than was produced is
 * ignored (the consumer cannot have read CQEs that were never written).
 */
static bool pib_cq_full(PibState *s, PibCq *cq)
{
    uint32_t rec;

    if (cq->pi - cq->ci < cq->ring.depth) {
        return false;
    }
    if (pib_dma_read(s, cq->ci_record, &rec, sizeof(rec), "CQ CI record")) {
        rec = le32_to_cpu(rec);
        if (rec - cq->ci <= cq->pi - cq->ci) {
            cq->ci = rec;
        }
    }
    return cq->pi - cq->ci >= cq->ring.depth;
}

/*
 * Write one CQE (the caller filled everything but the phase).  Returns false
 * if the CQ is in error or just overflowed: the completion is lost, as on
 * hardware, and CQ_ERR tells the driver.
 */
bool pib_cq_post(PibState *s, PibCq *cq, struct pib_cqe *cqe, bool solicited)
{
    struct pib_cqe_ts slot = { 0 };
    uint64_t addr;

    if (cq->error) {
        trace_pib_cqe_lost(cq->cqn, le64_to_cpu(cqe->wr_id), "CQ in error");
        return false;
    }
    if (pib_cq_full(s, cq)) {
        cq->error = true;
        trace_pib_cq_overflow(cq->cqn, cq->pi, cq->ci);
        trace_pib_cqe_lost(cq->cqn, le64_to_cpu(cqe->wr_id), "overflow");
        pib_aeq_post(s, PIB_AE_CQ_ERR, cq->cqn, 0);
        return false;
    }

    cqe->flags = (cqe->flags & ~PIB_CQE_F_PHASE) |
                 (pib_ring_phase(cq->pi, cq->ring.depth) ? PIB_CQE_F_PHASE : 0);
    slot.cqe = *cqe;
    slot.timestamp = cpu_to_le64(pib_clock_ns());
    slot.wallclock = cpu_to_le64(pib_wallclock_ns());
    addr = pib_ring_addr(&cq->ring, cq->pi);
    if (!pib_ring_publish(s, addr, &slot, 1u << cq->ring.stride_log,
                          offsetof(struct pib_cqe, flags), "CQE")) {
        cq->error = true;
        trace_pib_cqe_lost(cq->cqn, le64_to_cpu(cqe->wr_id), "DMA failed");
        pib_aeq_post(s, PIB_AE_CQ_ERR, cq->cqn, 0);
        return false;
    }
    if (cq->ring.stride_log == PIB_CQE_TS_STRIDE_LOG) {
        trace_pib_cqe_ts(cq->cqn, cq->pi, le64_to_cpu(slot.timestamp));
    }
    trace_pib_cqe(cq->cqn, cq->pi, le32_to_cpu(cqe->qpn),
                  le64_to_cpu(cqe->wr_id), cqe->opcode, cqe->status,
                  le32_to_cpu(cqe->byte_len), cqe->flags);

    solicited = solicited || cqe->status != PIB_WC_SUCCESS;
    if (solicited) {
        cq->sol_valid = true;
        cq->last_sol = cq->pi;
    }
    cq->pi++;
    if (cq->arm == PIB_CQ_ARMED_NEXT ||
        (cq->arm == PIB_CQ_ARMED_SOLICITED && solicited)) {
        pib_cq_event_due(s, cq);
    }
    return true;
}

/*
 * CQ doorbell (from the UAR page the CQ was created on): [63:32] consumer
 * index, [24] arm, [25] solicited only.  Runs in the MMIO handler, so it only
 * records; an event that is due at once is raised from the work bottom half.
 */
void pib_cq_doorbell(PibState *s, PibCq *cq, uint32_t page, uint64_t data)
{
    uint32_t ci = data >> PIB_DB_INDEX_SHIFT;
    bool arm = data & PIB_DB_CQ_ARM;
    bool sol = data & PIB_DB_CQ_SOLICITED;

    if (ci - cq->ci > cq->pi - cq->ci) {
        PIB_GUEST_ERR(s, PIB_GERR_UAR_DB_RANGE, pib_ub_cq_db_range,
                      "CQ %" PRIu32 " doorbell consumer index %" PRIu32
                      " (known %" PRIu32 ") is past the producer %" PRIu32,
                      cq->cqn, ci, cq->ci, cq->pi);
        return;
    }
    trace_pib_cq_db(cq->cqn, ci, cq->pi, arm, sol);
    cq->ci = ci;
    if (!arm || cq->error) {
        return;
    }
    /* Armed again during a wait (the event has not gone): the wait goes on. */
    cq->arm = sol ? PIB_CQ_ARMED_SOLICITED : PIB_CQ_ARMED_NEXT;

    /* Unread completions that already satisfy the arm: event now. */
    if (cq->pi != ci &&
        (!sol || (cq->sol_valid && cq->last_sol - ci < cq->pi - ci))) {
        if (!cq->notify_pending) {
            cq->notify_pending = true;
            QTAILQ_INSERT_TAIL(&s->notify_list, cq, notify_next);
            qemu_bh_schedule(s->work_bh);
        }
    }
}

/* From the work bottom half: events that arm doorbells found due. */
void pib_cq_notify_run(PibState *s)
{
    PibCq *cq;

    while ((cq = QTAILQ_FIRST(&s->notify_list))) {
        QTAILQ_REMOVE(&s->notify_list, cq, notify_next);
        cq->notify_pending = false;
        if (cq->arm != PIB_CQ_DISARMED) {
            pib_cq_fire(s, cq);
        }
    }
}

/* The CQ is going away: off the event list, out of the table, freed. */
static void pib_cq_free(PibState *s, PibCq *cq)
{
    if (cq->notify_pending) {
        QTAILQ_REMOVE(&s->notify_list, cq, notify_next);
        cq->notify_pending = false;
    }
    pib_table_set(&s->cqs, cq->cqn, NULL);
    timer_free(cq->mod_timer);
    pib_ring_free(s, &cq->ring);
    g_free(cq);
}

/*
 * Creating and destroying CQs
 */

/* Is depth a ring size CREATE_CQ and RESIZE_CQ accept? */
static bool pib_cq_depth_ok(uint32_t depth)
{
    return depth >= 2 && depth <= PIB_MAX_CQE && is_power_of_2(depth);
}

/*
 * CREATE_CQ: a ring of depth CQEs (of the size the flags say) on the pages of
 * the page list, then the page of the consumer index record.
 */
uint8_t pib_cmd_create_cq(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    const struct pib_cmd_create_cq *in = &cmd->in.create_cq;
    uint32_t depth = le32_to_cpu(in->depth);
    uint32_t npages = le32_to_cpu(in->npages);
    uint32_t uar = le32_to_cpu(in->uar);
    uint32_t flags = le32_to_cpu(in->flags);
    uint32_t stride_log = pib_cqe_stride_log(flags);
    uint32_t cqn;
    uint64_t *pages;
    uint8_t status;
    PibCq *cq;

    if (flags & ~PIB_CQ_F_ALL) {
        return pib_cmd_reject("CREATE_CQ", "unknown flags", flags,
                              PIB_AQ_BAD_PARAM);
    }
    if (!pib_cq_depth_ok(depth)) {
        return pib_cmd_reject("CREATE_CQ", "bad depth", depth,
                              PIB_AQ_BAD_PARAM);
    }
    if (npages != pib_cq_pages(depth, stride_log)) {
        return pib_cmd_reject("CREATE_CQ", "npages is not ring + 1", npages,
                              PIB_AQ_BAD_PARAM);
    }
    if (!pib_uar_valid(s, uar)) {
        return pib_cmd_reject("CREATE_CQ", "UAR not allocated", uar,
                              PIB_AQ_BAD_PARAM);
    }
    cqn = pib_table_alloc(&s->cqs);
    if (!cqn) {
        return pib_cmd_reject("CREATE_CQ", "table full", PIB_MAX_CQ,
                              PIB_AQ_NO_RESOURCES);
    }
    status = pib_ring_pbl_load(s, le64_to_cpu(in->pbl_addr), npages, 0, &pages,
                               "CREATE_CQ");
    if (status != PIB_AQ_OK) {
        return status;
    }

    cq = g_new0(PibCq, 1);
    cq->cqn = cqn;
    cq->uar = uar;
    cq->ring = (PibRing) {
        .depth = depth, .stride_log = stride_log, .npages = npages,
        .pages = pages,
    };
    cq->ci_record = pages[npages - 1];
    cq->s = s;
    cq->mod_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, pib_cq_mod_expired, cq);
    pib_table_set(&s->cqs, cqn, cq);
    trace_pib_cq_create(cqn, depth, uar, 1u << stride_log);
    res->result0 = cqn;
    return PIB_AQ_OK;
}

/* CQEs that the send WQEs posted to QPs completing on cq may still write: posted, not done. */
static uint32_t pib_cq_sends_owed(PibState *s, PibCq *cq)
{
    uint32_t i, owed = 0;
    PibQp *qp;

    PIB_TABLE_FOREACH(&s->qps, i, qp) {
        if (qp->scq == cq) {
            owed += qp->sq.pi - qp->sq.ci;
        }
    }
    return owed;
}

/*
 * RESIZE_CQ (include/pib_hw.h): move the CQ to a new ring, which starts over
 * at index 0 like a new CQ's (its zeroed slots then read as not written).
 * The CQEs the consumer has not read, [ci, pi), are copied to entries
 * 0..n-1 with the first pass's phase bit, each published as pib_cq_post()
 * publishes one; later CQEs follow them.  The copy comes first and the switch
 * last: a bad argument or a DMA failure leaves the CQ on its old ring, whole.
 */
uint8_t pib_cmd_resize_cq(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    const struct pib_cmd_resize_cq *in = &cmd->in.resize_cq;
    uint32_t cqn = le32_to_cpu(in->cqn);
    uint32_t depth = le32_to_cpu(in->depth);
    uint32_t npages = le32_to_cpu(in->npages);
    uint32_t ci = le32_to_cpu(in->ci);
    PibCq *cq = pib_cq_lookup(s, cqn);
    struct pib_cqe_ts cqe;
    uint32_t size;
    uint64_t *pages;
    PibRing ring;
    uint8_t status;
    uint32_t i, n, need;

    if (!cq) {
        return pib_cmd_reject("RESIZE_CQ", "no such CQ", cqn,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (cq->error) {
        return pib_cmd_reject("RESIZE_CQ", "CQ in error", cqn, PIB_AQ_BAD_STATE);
    }
    if (!pib_cq_depth_ok(depth)) {
        return pib_cmd_reject("RESIZE_CQ", "bad depth", depth, PIB_AQ_BAD_PARAM);
    }
    if (npages != pib_cq_pages(depth, cq->ring.stride_log)) {
        return pib_cmd_reject("RESIZE_CQ", "npages is not ring + 1", npages,
                              PIB_AQ_BAD_PARAM);
    }
    /* The consumer cannot have read what was not written, nor gone back. */
    if (ci - cq->ci > cq->pi - cq->ci) {
        return pib_cmd_reject("RESIZE_CQ", "consumer index not in [ci, pi]", ci,
                              PIB_AQ_BAD_PARAM);
    }
    /*
     * The new ring holds the CQEs written and not read, and those that send WQEs already
     * posted still owe: otherwise a completion of work the consumer posted before the resize
     * would overflow the ring and be lost.  (Receives are not counted: posted receives are
     * the normal state of a CQ, and they complete only as messages arrive.)
     */
    need = cq->pi - ci + pib_cq_sends_owed(s, cq);
    if (need > depth) {
        return pib_cmd_reject("RESIZE_CQ", "unread and owed CQEs do not fit", need,
                              PIB_AQ_BAD_PARAM);
    }
    status = pib_ring_pbl_load(s, le64_to_cpu(in->pbl_addr), npages,
                               cq->ring.npages, &pages, "RESIZE_CQ");
    if (status != PIB_AQ_OK) {
        return status;
    }
    /* Same CQE size, so the timestamps move with their CQEs. */
    ring = (PibRing) {
        .depth = depth, .stride_log = cq->ring.stride_log, .npages = npages,
        .pages = pages,
    };
    size = 1u << ring.stride_log;
    n = cq->pi - ci;
    for (i = 0; i < n; i++) {
        if (!pib_dma_read(s, pib_ring_addr(&cq->ring, ci + i), &cqe,
                          size, "CQE (resize)")) {
            break;
        }
        cqe.cqe.flags = (cqe.cqe.flags & ~PIB_CQE_F_PHASE) |
                        (pib_ring_phase(i, depth) ? PIB_CQE_F_PHASE : 0);
        if (!pib_ring_publish(s, pib_ring_addr(&ring, i), &cqe, size,
                              offsetof(struct pib_cqe, flags), "CQE (resize)")) {
            break;
        }
    }
    if (i != n) {
        pib_ring_free(s, &ring);
        return pib_cmd_reject("RESIZE_CQ", "CQE copy failed", ci + i,
                              PIB_AQ_DMA_ERROR);
    }
    trace_pib_cq_resize(cqn, cq->ring.depth, depth, ci, cq->pi);
    /* The solicited CQE, if still unread, moved with the rest. */
    cq->sol_valid = cq->sol_valid && cq->last_sol - ci < n;
    cq->last_sol -= ci;
    pib_ring_free(s, &cq->ring);
    cq->ring = ring;
    cq->ci_record = pages[npages - 1];
    cq->ci = 0;
    cq->pi = n;
    return PIB_AQ_OK;
}

/*
 * MODIFY_CQ (include/pib_hw.h): the CQ's event moderation; a wait in progress ends now.  The
 * limits are the whole range of the 16-bit fields, so no value is out of range here.
 */
QEMU_BUILD_BUG_ON(PIB_MAX_CQ_MOD_COUNT != UINT16_MAX || PIB_MAX_CQ_MOD_PERIOD != UINT16_MAX);
uint8_t pib_cmd_modify_cq(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    const struct pib_cmd_modify_cq *in = &cmd->in.modify_cq;
    uint32_t cqn = le32_to_cpu(in->cqn);
    uint16_t count = le16_to_cpu(in->count);
    uint16_t period = le16_to_cpu(in->period);
    PibCq *cq = pib_cq_lookup(s, cqn);

    if (!cq) {
        return pib_cmd_reject("MODIFY_CQ", "no such CQ", cqn, PIB_AQ_BAD_RESOURCE);
    }
    if (cq->mod_held) {
        pib_cq_fire(s, cq);
    }
    cq->mod_count = count;
    cq->mod_period_us = period;
    trace_pib_cq_modify(cqn, count, period);
    return PIB_AQ_OK;
}

uint8_t pib_cmd_destroy_cq(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    uint32_t cqn = le32_to_cpu(cmd->in.obj.num);
    PibCq *cq = pib_cq_lookup(s, cqn);

    if (!cq) {
        return pib_cmd_reject("DESTROY_CQ", "no such CQ", cqn,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (cq->refcnt) {
        return pib_cmd_reject("DESTROY_CQ", "in use", cq->refcnt, PIB_AQ_BUSY);
    }
    pib_cq_free(s, cq);
    trace_pib_obj("destroy", "CQ", cqn);
    return PIB_AQ_OK;
}

/* Function reset: every CQ goes, without a CQE (their QPs went first). */
void pib_cq_reset_all(PibState *s)
{
    uint32_t i;
    PibCq *cq;

    PIB_TABLE_FOREACH(&s->cqs, i, cq) {
        pib_cq_free(s, cq);
    }
}
