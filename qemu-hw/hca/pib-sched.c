/*
 * pib HCA device model - doorbells, the run list and the timers
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * How work reaches the transport engines (pib-req.c, pib-resp.c,
 * pib-comp.c).  An MMIO handler only records, with one exception:
 *
 *   doorbells  BAR2, the UAR pages: a doorbell is checked (the object exists
 *              on this page, the index moves forward by at most the depth)
 *              and recorded; an SQ doorbell puts the QP on the run list.
 *              The exception: an SQ doorbell of an idle QP on an idle device
 *              whose link rings the peer's doorbell runs the QP at once, in
 *              the vCPU thread (pib_qp_doorbell says why).
 *              (The CQ doorbell, which arms completion events, is in
 *              pib-cq.c.)
 *   run list   QPs with work for their engines.  The work bottom half gives
 *              each a bounded budget of packets per run and puts it back if
 *              it has more to do (pib_qp_doorbell says why this holds for
 *              latency too).  Received packets are handled as they come off
 *              the link, or by the receive bottom half for loopback
 *              (pib-rx.c), which then runs the list itself.
 *   timers     the RC retransmit (local ACK) timer and the RNR timer; their
 *              callbacks only set a flag and schedule the QP.
 */

#include "qemu/osdep.h"
#include "qemu/main-loop.h"

#include "pib-internal.h"
#include "../trace.h"

/* Packets one QP may send per run of the work bottom half. */
#define PIB_WORK_BUDGET         32
/*
 * Packets an SQ doorbell sends itself (pib_work_now); the rest is the bottom
 * half's.  Two: a one-packet message leaves budget over, so the QP is not
 * put back on the run list and the main loop is not woken for nothing.
 */
#define PIB_DOORBELL_BUDGET     2
/* QPs the work bottom half runs before it yields to the main loop. */
#define PIB_WORK_QPS            64
/* Floor for the local ACK timeout: TCG's pace should not look like loss. */
#define PIB_MIN_ACK_TIMEOUT_NS  (1 * 1000 * 1000)

/*
 * BAR2: UAR doorbells
 */

static const char *pib_uar_db_name(uint32_t reg)
{
    switch (reg) {
#define PIB_UAR_NAME(id, offset) case PIB_UAR_##id: return #id;
    PIB_UAR_DOORBELLS(PIB_UAR_NAME)
    PIB_UAR_REGISTERS(PIB_UAR_NAME)
#undef PIB_UAR_NAME
    default: return "UNDEFINED";
    }
}

static bool pib_uar_db_known(uint32_t reg)
{
    switch (reg) {
#define PIB_UAR_CASE(id, offset) case PIB_UAR_##id:
    PIB_UAR_DOORBELLS(PIB_UAR_CASE)
#undef PIB_UAR_CASE
        return true;
    default:
        return false;
    }
}

/*
 * A doorbell is honoured only for an object created on this UAR page: a
 * process can ring only its own queues.  The handlers record the new index
 * and schedule work (pib_qp_doorbell has the one case that runs it here).
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

/*
 * Reads: the halves of the device clock, 32 bits at a time (pib_hw.h says how
 * a reader puts them together).  Every page has them, so no page check.
 */
static uint64_t pib_uar_read(void *opaque, hwaddr addr, unsigned size)
{
    PibState *s = opaque;
    uint32_t page = addr >> PIB_UAR_PAGE_SHIFT;
    uint32_t reg = addr & (PIB_UAR_PAGE_SIZE - 1);
    uint64_t clock = pib_clock_ns();
    uint32_t val;

    if (size != 4 || (reg != PIB_UAR_CLOCK_LO && reg != PIB_UAR_CLOCK_HI)) {
        PIB_GUEST_ERR(s, PIB_GERR_UAR_DB_BAD_OFF, pib_ub_uar_bad_off,
                      "%s of size %u at UAR page %" PRIu32 " offset 0x%" PRIx32
                      " (only the clock halves are read, 32 bits each)",
                      "read", size, page, reg);
        return 0;
    }
    val = reg == PIB_UAR_CLOCK_LO ? (uint32_t)clock : (uint32_t)(clock >> 32);
    trace_pib_uar_read(page, pib_uar_db_name(reg), val);
    return val;
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

    if (!pib_uar_db_known(reg) || size != 8) {
        PIB_GUEST_ERR(s, PIB_GERR_UAR_DB_BAD_OFF, pib_ub_uar_bad_off,
                      "%s of size %u at UAR page %" PRIu32 " offset 0x%" PRIx32,
                      "write", size, page, reg);
        return;
    }
    pib_uar_doorbell(s, page, reg, data);
}

const MemoryRegionOps pib_uar_ops = {
    .read = pib_uar_read,
    .write = pib_uar_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 1, .max_access_size = 8, .unaligned = true },
    .impl = { .min_access_size = 1, .max_access_size = 8, .unaligned = true },
};

/*
 * SQ, RQ and SRQ doorbells (from the UAR page the object was created on)
 */

/*
 * A new producer index for a ring of depth slots whose consumer is at ci and
 * whose producer was at prev, from a doorbell or a doorbell record: at most
 * depth WQEs outstanding, and the index never moves back.
 */
static bool pib_pi_ok(uint32_t pi, uint32_t prev, uint32_t ci, uint32_t depth)
{
    return pi - ci <= depth && pi - ci >= prev - ci;
}

void pib_qp_doorbell(PibState *s, PibQp *qp, bool is_sq, uint32_t page,
                     uint64_t data)
{
    PibWq *wq = is_sq ? &qp->sq : &qp->rq;
    uint32_t pi = data >> PIB_DB_INDEX_SHIFT;
    bool idle;                  /* nothing was outstanding before this doorbell */

    if (!is_sq && qp->no_rq) {
        PIB_GUEST_ERR(s, PIB_GERR_UAR_DB_BAD_OBJ, pib_ub_uar_db_bad_obj,
                      "UAR page %" PRIu32 " %s for object %" PRIu32
                      " (index %" PRIu32 "): the QP has no RQ",
                      page, "RQ_DB", qp->qpn, pi);
        return;
    }
    if (!pib_pi_ok(pi, wq->pi, wq->ci, wq->ring.depth)) {
        PIB_GUEST_ERR(s, PIB_GERR_UAR_DB_RANGE, pib_ub_wq_db_range,
                      "QP %" PRIu32 " %s producer index %" PRIu32
                      " (previous %" PRIu32 ", consumer %" PRIu32
                      ", depth %" PRIu32 ")", qp->qpn, is_sq ? "SQ" : "RQ",
                      pi, wq->pi, wq->ci, wq->ring.depth);
        return;
    }
    trace_pib_qp_db(qp->qpn, is_sq ? "SQ" : "RQ", pi, wq->ci,
                    pib_qp_state_name(qp->state));
    /*
     * An idle requester sends from here, in the vCPU thread: a QP in RTS
     * whose SQ was empty, on a device with nothing else to run, whose link
     * has the peer's doorbell.  That saves the wakeup of our main loop,
     * which under TCG waits for a CPU that both vCPU threads are busy on
     * (the guest polls its CQ): measured (perf sched), about 12 us of
     * scheduling delay plus the pass itself, twice per round trip.
     *
     * The doorbell is what makes it safe.  Written to the link socket from
     * this thread, which goes on running the guest, the kernel wakes the
     * peer QEMU's main loop as a "sync" wakeup (the writer is expected to
     * sleep), and the peer stayed queued behind our vCPU thread until the
     * next scheduler tick: a trace showed every trip of a ping-pong waiting
     * for a 4 ms tick, typical latency 0.2-2 ms instead of 50 us, and
     * neither sched_yield(), a 1 us sleep nor a 100 us EEVDF slice for the
     * main loops avoided it.  pib_work_now rings the peer's doorbell around
     * the write (include/pib_link.h, "Doorbell"): the peer does not wait on
     * its socket meanwhile, and eventfd wakeups are ordinary ones.  The
     * same ib_send_lat went from 46-61 to 22-34 us, bulk bandwidth unchanged.
     *
     * Anything busier (WQEs outstanding, other QPs to run) waits for the
     * bottom half as before: a stream of doorbells then costs the vCPU
     * nothing, and the main loop sends them in batches, unrung.
     */
    idle = wq->ci == wq->pi;
    wq->pi = pi;
    if (is_sq && idle && qp->state == PIB_QPS_RTS &&
        QTAILQ_EMPTY(&s->runlist) && pib_link_rings_peer(&s->link)) {
        pib_work_now(s, qp);
        return;
    }
    if (qp->state == PIB_QPS_ERR ||
        (is_sq && (qp->state == PIB_QPS_RTS || qp->state == PIB_QPS_SQD))) {
        pib_qp_schedule(qp);
    }
}

/*
 * SRQ doorbell: the producer index, at most depth WQEs ahead of what the QPs
 * took, never backwards.  Nothing to schedule: a responder takes WQEs when a
 * message needs one (an RNR-NAKed peer retries by itself).
 */
void pib_srq_doorbell(PibState *s, PibSrq *srq, uint32_t page, uint64_t data)
{
    uint32_t pi = data >> PIB_DB_INDEX_SHIFT;

    if (!pib_pi_ok(pi, srq->pi, srq->ci, srq->ring.depth)) {
        PIB_GUEST_ERR(s, PIB_GERR_UAR_DB_RANGE, pib_ub_srq_db_range,
                      "SRQ %" PRIu32 " producer index %" PRIu32
                      " (previous %" PRIu32 ", consumer %" PRIu32
                      ", depth %" PRIu32 ")", srq->srqn, pi, srq->pi,
                      srq->ci, srq->ring.depth);
        return;
    }
    trace_pib_srq_db(srq->srqn, pi, srq->ci);
    srq->pi = pi;
}

/*
 * Receive doorbell records (struct pib_recv_dbrec, pib_wqe.h): the producer
 * index an RQ's or SRQ's consumer wrote in memory instead of ringing.
 */

/*
 * Read the record at dbrec (0: the ring has none, nothing to do) into *pi,
 * if it is an index to believe: at most depth ahead of ci, not behind *pi.
 * ring and num name the ring ("RQ" and a QPN, "SRQ" and an SRQN).
 */
void pib_dbrec_read(PibState *s, uint64_t dbrec, uint32_t depth, uint32_t ci,
                    uint32_t *pi, const char *ring, uint32_t num)
{
    uint32_t rec;

    if (!dbrec || !pib_dma_read(s, dbrec + offsetof(struct pib_recv_dbrec, pi),
                                &rec, sizeof(rec), "doorbell record")) {
        return;
    }
    rec = le32_to_cpu(rec);
    if (rec == *pi) {
        return;
    }
    if (!pib_pi_ok(rec, *pi, ci, depth)) {
        PIB_GUEST_ERR(s, PIB_GERR_DBREC_RANGE, pib_ub_dbrec_range,
                      "%s %" PRIu32 " doorbell record producer index %" PRIu32
                      " (previous %" PRIu32 ", consumer %" PRIu32
                      ", depth %" PRIu32 ")", ring, num, rec, *pi, ci, depth);
        return;
    }
    trace_pib_dbrec(ring, num, rec, ci);
    *pi = rec;
}

/* The producer index in the RQ's doorbell record, if it has one. */
void pib_rq_refresh(PibQp *qp)
{
    pib_dbrec_read(qp->s, qp->rq.dbrec, qp->rq.ring.depth, qp->rq.ci, &qp->rq.pi,
                   "RQ", qp->qpn);
}

/* Write the device's flags word of a record (PIB_DBREC_F_*). */
void pib_dbrec_set_flags(PibState *s, uint64_t dbrec, uint32_t flags)
{
    uint32_t val = cpu_to_le32(flags);

    if (dbrec) {
        pib_dma_write(s, dbrec + offsetof(struct pib_recv_dbrec, flags), &val,
                      sizeof(val), "doorbell record flags");
    }
}

/*
 * The run list
 */

/*
 * Put the QP on the run list.  While the list is not empty the work bottom
 * half is scheduled (it reschedules itself while QPs remain).  While
 * received packets are being dispatched no bottom half is needed:
 * pib_rx_run() runs the list itself right after, in the same main-loop pass
 * (a bottom half scheduled from a chardev callback runs only in the next
 * pass, after an eventfd write to wake it).
 */
void pib_qp_schedule(PibQp *qp)
{
    PibState *s = qp->s;

    if (qp->on_runlist) {
        return;
    }
    qp->on_runlist = true;
    QTAILQ_INSERT_TAIL(&s->runlist, qp, run_next);
    if (!s->work_deferred) {
        qemu_bh_schedule(s->work_bh);
    }
}

/* A transmit or receive queue has room again: wake the requesters. */
void pib_qp_kick_waiters(PibState *s)
{
    uint32_t i;
    PibQp *qp;

    PIB_TABLE_FOREACH(&s->qps, i, qp) {
        if (qp->req.wait_tx) {
            qp->req.wait_tx = false;
            pib_qp_schedule(qp);
        }
    }
}

/* SQD: tell the driver once nothing is outstanding any more. */
static void pib_qp_check_drained(PibQp *qp)
{
    if (qp->state != PIB_QPS_SQD || !qp->sq_draining ||
        qp->req.wqe_max != qp->sq.ci) {
        return;
    }
    qp->sq_draining = false;
    trace_pib_qp_drained(qp->qpn);
    if (qp->en_sqd_async) {
        pib_aeq_post(qp->s, PIB_AE_SQ_DRAINED, qp->qpn, 0);
    }
}

/* One QP's turn: the engines that apply to its state, within a budget of packets. */
static void pib_qp_work(PibQp *qp, unsigned budget)
{
    switch (qp->state) {
    case PIB_QPS_ERR:
        pib_qp_flush(qp);       /* WQEs rung while in ERR */
        return;
    case PIB_QPS_RTS:
    case PIB_QPS_SQD:
        pib_comp_run(qp);
        if (qp->state == PIB_QPS_RTS || qp->state == PIB_QPS_SQD) {
            pib_req_run(qp, &budget);
        }
        if (qp->state == PIB_QPS_RTS || qp->state == PIB_QPS_SQD) {
            pib_comp_run(qp);   /* UC/UD WQEs are done once sent */
        }
        pib_qp_check_drained(qp);
        pib_qp_sync_timers(qp);
        /* fall through: the responder side */
    case PIB_QPS_RTR:
        if (qp->state != PIB_QPS_ERR) {
            pib_resp_run(qp, &budget);
        }
        break;
    default:
        return;
    }
    if (budget == 0 && qp->state != PIB_QPS_ERR) {
        pib_qp_schedule(qp);    /* more to do: after the others */
    }
}

/* After a run: the QPs left wait for the bottom half, and what the run queued goes out. */
static void pib_work_finish(PibState *s)
{
    if (!QTAILQ_EMPTY(&s->runlist)) {
        qemu_bh_schedule(s->work_bh);
    }
    pib_link_flush(s);
}

/*
 * One run of the scheduler (the work bottom half, or pib_rx_run() after a
 * batch of received packets): the QPs on the run list, at most PIB_WORK_QPS
 * of them, then one flush of everything they transmitted.
 */
void pib_work_run(PibState *s)
{
    unsigned n;
    PibQp *qp;

    pib_cq_notify_run(s);
    for (n = 0; n < PIB_WORK_QPS && (qp = QTAILQ_FIRST(&s->runlist)); n++) {
        QTAILQ_REMOVE(&s->runlist, qp, run_next);
        qp->on_runlist = false;
        pib_qp_work(qp, PIB_WORK_BUDGET);
    }
    pib_work_finish(s);
}

void pib_work_bh(void *opaque)
{
    PibState *s = opaque;

    if (!s->stopped) {          /* (stopped: the machine's resume schedules us again) */
        pib_work_run(s);
    }
}

/*
 * Run one QP now, from an SQ doorbell (pib_qp_doorbell), as the work bottom
 * half would, but for PIB_DOORBELL_BUDGET packets: a small message leaves
 * whole, a large one its first packets, and the bottom half sends the rest
 * while the guest goes on (a vCPU that sent 64 KiB itself could not post
 * the next WQE meanwhile).  Whatever is left or was scheduled meanwhile is
 * on the run list for the bottom half.  The peer's doorbell is rung around
 * it all: START first, so that the peer's wakeup overlaps building the
 * packets, and END once they are written.
 */
void pib_work_now(PibState *s, PibQp *qp)
{
    pib_link_ring_peer(&s->link, PIB_LINK_RING_START);
    s->work_deferred = true;
    pib_cq_notify_run(s);
    pib_qp_work(qp, PIB_DOORBELL_BUDGET);
    s->work_deferred = false;
    pib_work_finish(s);
    pib_link_ring_peer(&s->link, PIB_LINK_RING_END);
}

/*
 * Timers.  Both run on QEMU_CLOCK_VIRTUAL, so they follow the guest's notion
 * of time (and a qtest's clock_step).  Their callbacks only set a flag and
 * schedule the QP: the engines do the work in the bottom half.
 */

static uint64_t pib_ack_timeout_ns(const PibQp *qp)
{
    /* 4.096 us * 2^timeout; timeout <= 31 keeps this within 64 bits */
    return MAX((uint64_t)4096 << qp->timeout, PIB_MIN_ACK_TIMEOUT_NS);
}

/* IBTA RNR NAK timer field (9.7.5.2.8): code -> nanoseconds. */
uint64_t pib_rnr_timer_ns(uint8_t code)
{
    static const uint32_t us[32] = {
        655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
        1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
        40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
    };

    return (uint64_t)us[code & 31] * 1000;
}

/*
 * The retransmit timer runs while anything is outstanding and restarts on
 * every acknowledged step (pib_comp_progress: stop, then arm).  That is once
 * per ACK, and once per message in a ping-pong, so the QEMU timer is moved
 * lazily: the deadline lives in comp.retrans_deadline, and the QEMU timer
 * only has to fire no later than it.  When it fires early (the deadline moved
 * on since), it is set again for the deadline; stopping leaves it pending.
 * timer_mod() of the earliest timer notifies the main loop (an eventfd write
 * and an extra pass); this way it happens at most once per timeout period.
 */
static void pib_qp_arm_retrans(PibQp *qp)
{
    PibComp *c = &qp->comp;
    int64_t deadline;

    if (qp->timeout == 0 || c->retrans_deadline) {
        return;                         /* infinite, or running */
    }
    deadline = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) + pib_ack_timeout_ns(qp);
    c->retrans_deadline = deadline;
    /* An earlier expiry is fine (the callback sets it again), a later not. */
    if (!timer_pending(c->retrans_timer) ||
        timer_expire_time_ns(c->retrans_timer) > deadline) {
        timer_mod(c->retrans_timer, deadline);
    }
    trace_pib_timer(qp->qpn, "retransmit", "armed", pib_ack_timeout_ns(qp));
}

void pib_qp_stop_retrans(PibQp *qp)
{
    if (qp->comp.retrans_deadline) {
        qp->comp.retrans_deadline = 0;  /* the QEMU timer may stay pending */
        trace_pib_timer(qp->qpn, "retransmit", "stopped", 0);
    }
}

/*
 * The requester's timer rule, in one place.  An RC QP in RTS or SQD with
 * requests the peer has not acknowledged (PSNs in [comp.psn, req.psn_max))
 * always has a timer running, whatever happens to the link: the RNR timer
 * while an RNR NAK pauses it, otherwise the retransmit (local ACK) timer.
 * With nothing unacknowledged, no retransmit timer runs.
 *
 * Every engine pass ends here (pib_qp_work, pib_comp_recv), so no path can
 * leave an outstanding request with nothing to wake it: a go-back-N rewind
 * whose first packet finds the transmit queue full, a queue purged when the
 * link dropped, an RNR wait that ended with the queue full.  The engines
 * only stop the timer when the peer shows progress (pib_comp_progress) or
 * when they retry; this function starts it again, for a full period from
 * now.  A timeout of 0 means "wait forever" (pib_qp_arm_retrans).
 */
void pib_qp_sync_timers(PibQp *qp)
{
    bool requesting = pib_qp_type_is_reliable(qp->type) &&
                      (qp->state == PIB_QPS_RTS || qp->state == PIB_QPS_SQD);

    if (!requesting || qp->comp.rnr_wait ||
        pib_psn_diff(qp->req.psn_max, qp->comp.psn) <= 0) {
        pib_qp_stop_retrans(qp);
        return;
    }
    pib_qp_arm_retrans(qp);
}

static void pib_qp_retrans_cb(void *opaque)
{
    PibQp *qp = opaque;
    PibComp *c = &qp->comp;

    if (!c->retrans_deadline) {
        return;                         /* stopped since it was set */
    }
    if (qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) < c->retrans_deadline) {
        timer_mod(c->retrans_timer, c->retrans_deadline);   /* restarted */
        return;
    }
    c->retrans_deadline = 0;
    trace_pib_timer(qp->qpn, "retransmit", "expired", 0);
    pib_count(qp->s, PIB_CNT_RETRY_TIMEOUTS, 1);
    c->timeout = true;
    pib_qp_schedule(qp);
}

static void pib_qp_rnr_cb(void *opaque)
{
    PibQp *qp = opaque;

    trace_pib_timer(qp->qpn, "RNR", "expired", 0);
    qp->comp.rnr_wait = false;
    pib_qp_schedule(qp);
}

/*
 * The engines' state and timers: made with the QP, forgotten when it enters
 * RESET or ERR, freed with it.
 */

void pib_qp_init_engines(PibQp *qp)
{
    qp->comp.retrans_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL,
                                          pib_qp_retrans_cb, qp);
    qp->comp.rnr_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, pib_qp_rnr_cb, qp);
    pib_cca_init(qp);
    qp->resp.opcode = -1;
}

void pib_qp_fini_engines(PibQp *qp)
{
    PibState *s = qp->s;

    if (qp->on_runlist) {
        QTAILQ_REMOVE(&s->runlist, qp, run_next);
        qp->on_runlist = false;
    }
    timer_free(qp->comp.retrans_timer);
    timer_free(qp->comp.rnr_timer);
    qp->comp.retrans_timer = NULL;
    qp->comp.rnr_timer = NULL;
    pib_cca_fini(qp);
}

/* Forget all transport state (entering RESET or ERR). */
void pib_qp_reset_engines(PibQp *qp)
{
    timer_del(qp->comp.retrans_timer);
    qp->comp.retrans_deadline = 0;
    timer_del(qp->comp.rnr_timer);
    pib_cca_reset(qp);
    memset(&qp->req, 0, sizeof(qp->req));
    qp->req.wqe_idx = qp->req.wqe_max = qp->sq.ci;
    qp->comp.psn = 0;
    qp->comp.timeout = false;
    qp->comp.rnr_wait = false;
    qp->comp.wqe_valid = false;
    memset(qp->meta, 0, qp->meta_size * sizeof(*qp->meta));
    pib_resp_reset(qp);
    qp->sq_draining = false;
}
