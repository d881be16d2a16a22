/*
 * pib HCA device model - queue pairs
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The QP as a whole: its state machine (MODIFY_QP with the IBTA's table of
 * required and optional attributes, QUERY_QP), fetching and checking WQEs
 * from its rings, completions, flushing, its doorbells, its timers, and the
 * scheduler that runs the three transport engines:
 *
 *   requester  pib-req.c   send WQEs -> request packets
 *   responder  pib-resp.c  request packets -> memory, receive CQEs, ACKs
 *   completer  pib-comp.c  ACKs and responses -> send CQEs, retries
 *
 * Work is never done in an MMIO handler: a doorbell records the new producer
 * index and puts the QP on the run list; the work bottom half gives each QP
 * on the list a bounded budget of packets per run and puts it back if it
 * has more to do (pib_qp_doorbell says why this holds for latency too).
 * Received packets are handled as they come off the link, or by the receive
 * bottom half for loopback (pib-pkt.c); timers only set a flag and schedule
 * the QP.
 *
 * States and what runs in them:
 *
 *   RESET  nothing; doorbells are recorded; entering RESET zeroes the ring
 *          indices and forgets all transport state
 *   INIT   receive WQEs may be posted; nothing is executed
 *   RTR    the responder runs (incoming requests, ACKs, READ responses)
 *   RTS    the requester and completer run too
 *   SQD    the requester finishes the message in progress and starts no new
 *          WQE; SQ_DRAINED when all outstanding work completed (if asked)
 *   SQE    (not entered by this device: errors go to ERR)
 *   ERR    every outstanding WQE, and every WQE rung later, completes with
 *          WR_FLUSH_ERR; nothing else runs
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/main-loop.h"

#include "pib-internal.h"
#include "trace.h"

/* Packets one QP may send per run of the work bottom half. */
#define PIB_WORK_BUDGET         32
/* QPs the work bottom half runs before it yields to the main loop. */
#define PIB_WORK_QPS            64
/* Floor for the local ACK timeout: TCG's pace should not look like loss. */
#define PIB_MIN_ACK_TIMEOUT_NS  (1 * 1000 * 1000)

static const char *const pib_qps_names[] = {
    [PIB_QPS_RESET] = "RESET",
    [PIB_QPS_INIT]  = "INIT",
    [PIB_QPS_RTR]   = "RTR",
    [PIB_QPS_RTS]   = "RTS",
    [PIB_QPS_SQD]   = "SQD",
    [PIB_QPS_SQE]   = "SQE",
    [PIB_QPS_ERR]   = "ERR",
};

const char *pib_qp_state_name(uint8_t state)
{
    return state < ARRAY_SIZE(pib_qps_names) ? pib_qps_names[state] : "?";
}

bool pib_qp_is_connected(const PibQp *qp)
{
    return qp->type == PIB_QPT_RC || qp->type == PIB_QPT_UC;
}

/*
 * The modify-QP table: which transitions exist and which attributes each one
 * requires and allows, per QP type (IBTA 11.2.5.3, and Linux's
 * ib_modify_qp_is_ok).  PIB_QP_STATE is always allowed.
 */
#define NTYPES  (PIB_QPT_UD + 1)
typedef struct PibQpTransition {
    bool valid;
    uint32_t req[NTYPES];
    uint32_t opt[NTYPES];
} PibQpTransition;

#define RC_UC_PATH  (PIB_QP_CUR_STATE | PIB_QP_ALT_PATH | \
                     PIB_QP_ACCESS_FLAGS | PIB_QP_PATH_MIG_STATE)

static const PibQpTransition pib_qp_table[PIB_QPS_ERR + 1][PIB_QPS_ERR + 1] = {
    [PIB_QPS_RESET] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_INIT] = {
            .valid = true,
            .req = {
                [PIB_QPT_UD]  = PIB_QP_PKEY_INDEX | PIB_QP_PORT | PIB_QP_QKEY,
                [PIB_QPT_UC]  = PIB_QP_PKEY_INDEX | PIB_QP_PORT |
                                PIB_QP_ACCESS_FLAGS,
                [PIB_QPT_RC]  = PIB_QP_PKEY_INDEX | PIB_QP_PORT |
                                PIB_QP_ACCESS_FLAGS,
                [PIB_QPT_GSI] = PIB_QP_PKEY_INDEX | PIB_QP_QKEY,
            },
        },
    },
    [PIB_QPS_INIT] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_ERR] = { .valid = true },
        [PIB_QPS_INIT] = {
            .valid = true,
            .opt = {
                [PIB_QPT_UD]  = PIB_QP_PKEY_INDEX | PIB_QP_PORT | PIB_QP_QKEY,
                [PIB_QPT_UC]  = PIB_QP_PKEY_INDEX | PIB_QP_PORT |
                                PIB_QP_ACCESS_FLAGS,
                [PIB_QPT_RC]  = PIB_QP_PKEY_INDEX | PIB_QP_PORT |
                                PIB_QP_ACCESS_FLAGS,
                [PIB_QPT_GSI] = PIB_QP_PKEY_INDEX | PIB_QP_QKEY,
            },
        },
        [PIB_QPS_RTR] = {
            .valid = true,
            .req = {
                [PIB_QPT_UC]  = PIB_QP_AV | PIB_QP_PATH_MTU |
                                PIB_QP_DEST_QPN | PIB_QP_RQ_PSN,
                [PIB_QPT_RC]  = PIB_QP_AV | PIB_QP_PATH_MTU |
                                PIB_QP_DEST_QPN | PIB_QP_RQ_PSN |
                                PIB_QP_MAX_DEST_RD_ATOMIC |
                                PIB_QP_MIN_RNR_TIMER,
            },
            .opt = {
                [PIB_QPT_UD]  = PIB_QP_PKEY_INDEX | PIB_QP_QKEY,
                [PIB_QPT_UC]  = PIB_QP_ALT_PATH | PIB_QP_ACCESS_FLAGS |
                                PIB_QP_PKEY_INDEX,
                [PIB_QPT_RC]  = PIB_QP_ALT_PATH | PIB_QP_ACCESS_FLAGS |
                                PIB_QP_PKEY_INDEX,
                [PIB_QPT_GSI] = PIB_QP_PKEY_INDEX | PIB_QP_QKEY,
            },
        },
    },
    [PIB_QPS_RTR] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_ERR] = { .valid = true },
        [PIB_QPS_RTS] = {
            .valid = true,
            .req = {
                [PIB_QPT_UD]  = PIB_QP_SQ_PSN,
                [PIB_QPT_UC]  = PIB_QP_SQ_PSN,
                [PIB_QPT_RC]  = PIB_QP_TIMEOUT | PIB_QP_RETRY_CNT |
                                PIB_QP_RNR_RETRY | PIB_QP_SQ_PSN |
                                PIB_QP_MAX_QP_RD_ATOMIC,
                [PIB_QPT_GSI] = PIB_QP_SQ_PSN,
            },
            .opt = {
                [PIB_QPT_UD]  = PIB_QP_CUR_STATE | PIB_QP_QKEY,
                [PIB_QPT_UC]  = RC_UC_PATH,
                [PIB_QPT_RC]  = RC_UC_PATH | PIB_QP_MIN_RNR_TIMER,
                [PIB_QPT_GSI] = PIB_QP_CUR_STATE | PIB_QP_QKEY,
            },
        },
    },
    [PIB_QPS_RTS] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_ERR] = { .valid = true },
        [PIB_QPS_RTS] = {
            .valid = true,
            .opt = {
                [PIB_QPT_UD]  = PIB_QP_CUR_STATE | PIB_QP_QKEY,
                [PIB_QPT_UC]  = RC_UC_PATH,
                [PIB_QPT_RC]  = RC_UC_PATH | PIB_QP_MIN_RNR_TIMER,
                [PIB_QPT_GSI] = PIB_QP_CUR_STATE | PIB_QP_QKEY,
            },
        },
        [PIB_QPS_SQD] = {
            .valid = true,
            .opt = {
                [PIB_QPT_UD]  = PIB_QP_EN_SQD_ASYNC_NOTIFY,
                [PIB_QPT_UC]  = PIB_QP_EN_SQD_ASYNC_NOTIFY,
                [PIB_QPT_RC]  = PIB_QP_EN_SQD_ASYNC_NOTIFY,
                [PIB_QPT_GSI] = PIB_QP_EN_SQD_ASYNC_NOTIFY,
            },
        },
    },
    [PIB_QPS_SQD] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_ERR] = { .valid = true },
        [PIB_QPS_RTS] = {
            .valid = true,
            .opt = {
                [PIB_QPT_UD]  = PIB_QP_CUR_STATE | PIB_QP_QKEY,
                [PIB_QPT_UC]  = RC_UC_PATH,
                [PIB_QPT_RC]  = RC_UC_PATH | PIB_QP_MIN_RNR_TIMER,
                [PIB_QPT_GSI] = PIB_QP_CUR_STATE | PIB_QP_QKEY,
            },
        },
        [PIB_QPS_SQD] = {
            .valid = true,
            .opt = {
                [PIB_QPT_UD]  = PIB_QP_PKEY_INDEX | PIB_QP_QKEY,
                [PIB_QPT_UC]  = PIB_QP_AV | PIB_QP_ALT_PATH |
                                PIB_QP_ACCESS_FLAGS | PIB_QP_PKEY_INDEX |
                                PIB_QP_PATH_MIG_STATE,
                [PIB_QPT_RC]  = PIB_QP_PORT | PIB_QP_AV | PIB_QP_TIMEOUT |
                                PIB_QP_RETRY_CNT | PIB_QP_RNR_RETRY |
                                PIB_QP_MAX_QP_RD_ATOMIC |
                                PIB_QP_MAX_DEST_RD_ATOMIC | PIB_QP_ALT_PATH |
                                PIB_QP_ACCESS_FLAGS | PIB_QP_PKEY_INDEX |
                                PIB_QP_MIN_RNR_TIMER | PIB_QP_PATH_MIG_STATE,
                [PIB_QPT_GSI] = PIB_QP_PKEY_INDEX | PIB_QP_QKEY,
            },
        },
    },
    [PIB_QPS_SQE] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_ERR] = { .valid = true },
        [PIB_QPS_RTS] = {
            .valid = true,
            .opt = {
                [PIB_QPT_UD]  = PIB_QP_CUR_STATE | PIB_QP_QKEY,
                [PIB_QPT_UC]  = PIB_QP_CUR_STATE | PIB_QP_ACCESS_FLAGS,
                [PIB_QPT_GSI] = PIB_QP_CUR_STATE | PIB_QP_QKEY,
            },
        },
    },
    [PIB_QPS_ERR] = {
        [PIB_QPS_RESET] = { .valid = true },
        [PIB_QPS_ERR] = { .valid = true },
    },
};

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
    bool requesting = qp->type == PIB_QPT_RC &&
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

void pib_qp_init_engines(PibQp *qp)
{
    qp->comp.retrans_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL,
                                          pib_qp_retrans_cb, qp);
    qp->comp.rnr_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, pib_qp_rnr_cb, qp);
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
}

/* Forget all transport state (entering RESET or ERR). */
static void pib_qp_reset_engines(PibQp *qp)
{
    timer_del(qp->comp.retrans_timer);
    qp->comp.retrans_deadline = 0;
    timer_del(qp->comp.rnr_timer);
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

/*
 * Fetching WQEs.  A WQE is read from guest memory every time an engine
 * needs it, and checked every time: the guest may rewrite a posted WQE (that
 * is its own bug), but it can never make the device overrun a slot or trust
 * a count it did not check.
 */

/* Is this send opcode one this QP type carries, and one the device runs? */
static bool pib_wqe_opcode_ok(uint8_t type, uint8_t opcode)
{
    switch (opcode) {
    case PIB_WQE_SEND:
    case PIB_WQE_SEND_IMM:
        return true;
    case PIB_WQE_RDMA_WRITE:
    case PIB_WQE_RDMA_WRITE_IMM:
    case PIB_WQE_LOCAL_INV:
    case PIB_WQE_BIND_MW:
        return type == PIB_QPT_RC || type == PIB_QPT_UC;
    case PIB_WQE_SEND_INV:
    case PIB_WQE_RDMA_READ:
    case PIB_WQE_ATOMIC_CS:
    case PIB_WQE_ATOMIC_FA:
        return type == PIB_QPT_RC;
    default:
        return false;
    }
}

/* BIND_MW and LOCAL_INV act on this HCA only: no packet, no PSN. */
bool pib_wqe_is_local(uint8_t opcode)
{
    return opcode == PIB_WQE_BIND_MW || opcode == PIB_WQE_LOCAL_INV;
}

bool pib_wqe_is_rd_atomic(uint8_t opcode)
{
    return opcode == PIB_WQE_RDMA_READ || opcode == PIB_WQE_ATOMIC_CS ||
           opcode == PIB_WQE_ATOMIC_FA;
}

static bool pib_wqe_bad(PibQp *qp, const char *ring, uint32_t idx,
                        const char *why, uint64_t val, uint8_t code,
                        uint8_t *status)
{
    PIB_GUEST_ERR(qp->s, PIB_GERR_WQE, pib_ub_wqe,
                  "QP %" PRIu32 " %s WQE %" PRIu32 ": %s (0x%" PRIx64 ")",
                  qp->qpn, ring, idx, why, val);
    *status = code;
    return false;
}

static bool pib_read_sges(PibQp *qp, uint64_t addr, uint32_t n, PibSge *sge,
                          uint64_t *total)
{
    struct pib_sge raw[PIB_MAX_SGE];
    uint32_t i;

    *total = 0;
    if (n && !pib_dma_read(qp->s, addr, raw, n * sizeof(raw[0]), "SGEs")) {
        return false;
    }
    for (i = 0; i < n; i++) {
        sge[i].addr = le64_to_cpu(raw[i].addr);
        sge[i].length = le32_to_cpu(raw[i].length);
        sge[i].lkey = le32_to_cpu(raw[i].lkey);
        *total += sge[i].length;
    }
    return true;
}

#define PIB_WQE_F_ALL   (PIB_WQE_F_SIGNALED | PIB_WQE_F_SOLICITED | \
                         PIB_WQE_F_INLINE | PIB_WQE_F_FENCE)

/*
 * Fetch and check send WQE idx.  On failure *status is the completion status
 * it must complete with (the QP then goes to ERR); w->wr_id and w->opcode are
 * valid whenever the control segment could be read.
 */
bool pib_sq_fetch(PibQp *qp, uint32_t idx, PibSendWqe *w, uint8_t *status)
{
    uint64_t addr = pib_ring_addr(&qp->sq.ring, idx);
    struct pib_send_wqe raw;

    memset(w, 0, sizeof(*w));
    if (!pib_dma_read(qp->s, addr, &raw, sizeof(raw), "send WQE")) {
        *status = PIB_WC_LOC_QP_OP_ERR;
        return false;
    }
    w->opcode = raw.opcode;
    w->flags = raw.flags;
    memcpy(w->imm, &raw.imm_inv, sizeof(w->imm));
    w->wr_id = le64_to_cpu(raw.wr_id);
    w->remote_addr = le64_to_cpu(raw.remote_addr);
    w->rkey = le32_to_cpu(raw.rkey);
    w->compare_add = le64_to_cpu(raw.compare_add);
    w->swap = le64_to_cpu(raw.swap);
    w->ud_qpn = le32_to_cpu(raw.ud_qpn);
    w->ud_qkey = le32_to_cpu(raw.ud_qkey);
    w->ud_dlid = le16_to_cpu(raw.ud_dlid);
    w->ud_sl = raw.ud_sl;
    trace_pib_wqe_fetch(qp->qpn, "SQ", idx, w->wr_id, w->opcode, w->flags);

    if (!pib_wqe_opcode_ok(qp->type, w->opcode)) {
        return pib_wqe_bad(qp, "send", idx, "opcode", w->opcode,
                           PIB_WC_LOC_QP_OP_ERR, status);
    }
    if (w->flags & ~PIB_WQE_F_ALL) {
        return pib_wqe_bad(qp, "send", idx, "flags", w->flags,
                           PIB_WC_LOC_QP_OP_ERR, status);
    }
    if (pib_wqe_is_local(w->opcode)) {
        if (w->flags & PIB_WQE_F_INLINE) {
            return pib_wqe_bad(qp, "send", idx, "inline local operation",
                               w->opcode, PIB_WC_LOC_QP_OP_ERR, status);
        }
        memcpy(&w->bind, &raw, sizeof(w->bind));
        return true;        /* no SGEs, no length */
    }
    if (w->flags & PIB_WQE_F_INLINE) {
        w->inline_len = le32_to_cpu(raw.inline_len);
        if (pib_wqe_is_rd_atomic(w->opcode)) {
            return pib_wqe_bad(qp, "send", idx, "inline READ/atomic",
                               w->opcode, PIB_WC_LOC_QP_OP_ERR, status);
        }
        if (w->inline_len > qp->max_inline) {
            return pib_wqe_bad(qp, "send", idx, "inline_len", w->inline_len,
                               PIB_WC_LOC_LEN_ERR, status);
        }
        if (w->inline_len &&
            !pib_dma_read(qp->s, addr + sizeof(raw), w->inline_data,
                          w->inline_len, "inline data")) {
            *status = PIB_WC_LOC_QP_OP_ERR;
            return false;
        }
        w->length = w->inline_len;
    } else {
        w->num_sge = raw.num_sge;
        if (w->num_sge > qp->sq.max_sge) {
            return pib_wqe_bad(qp, "send", idx, "num_sge", w->num_sge,
                               PIB_WC_LOC_LEN_ERR, status);
        }
        if (!pib_read_sges(qp, addr + sizeof(raw), w->num_sge, w->sge,
                           &w->length)) {
            *status = PIB_WC_LOC_QP_OP_ERR;
            return false;
        }
    }

    /* Well formed; lengths the verbs reject, completing with an error. */
    if (w->length > PIB_MAX_MSG_SZ) {
        *status = PIB_WC_LOC_LEN_ERR;
        return false;
    }
    if ((qp->type == PIB_QPT_UD || qp->type == PIB_QPT_GSI) &&
        w->length > pib_mtu_bytes(PIB_PORT_MTU_ENUM)) {
        *status = PIB_WC_LOC_LEN_ERR;
        return false;
    }
    if ((w->opcode == PIB_WQE_ATOMIC_CS || w->opcode == PIB_WQE_ATOMIC_FA) &&
        w->length != sizeof(uint64_t)) {
        *status = PIB_WC_LOC_LEN_ERR;
        return false;
    }
    return true;
}

/* A receive WQE from a ring (the QP's RQ, or an SRQ), checked. */
static bool pib_recv_fetch(PibQp *qp, const PibRing *ring, uint32_t max_sge,
                           const char *what, uint32_t idx, PibRecvWqe *w,
                           uint8_t *status)
{
    uint64_t addr = pib_ring_addr(ring, idx);
    struct pib_recv_wqe raw;

    memset(w, 0, sizeof(*w));
    w->idx = idx;
    if (!pib_dma_read(qp->s, addr, &raw, sizeof(raw), "receive WQE")) {
        *status = PIB_WC_LOC_QP_OP_ERR;
        return false;
    }
    w->wr_id = le64_to_cpu(raw.wr_id);
    w->num_sge = raw.num_sge;
    trace_pib_wqe_fetch(qp->qpn, what, idx, w->wr_id, 0, 0);
    if (w->num_sge > max_sge) {
        return pib_wqe_bad(qp, "receive", idx, "num_sge", w->num_sge,
                           PIB_WC_LOC_LEN_ERR, status);
    }
    if (!pib_read_sges(qp, addr + sizeof(raw), w->num_sge, w->sge,
                       &w->length)) {
        *status = PIB_WC_LOC_QP_OP_ERR;
        return false;
    }
    return true;
}

/* Fetch and check receive WQE idx of the QP's RQ, as pib_sq_fetch(). */
bool pib_rq_fetch(PibQp *qp, uint32_t idx, PibRecvWqe *w, uint8_t *status)
{
    bool ok = pib_recv_fetch(qp, &qp->rq.ring, qp->rq.max_sge, "RQ", idx, w,
                             status);

    w->pdn = qp->pdn;
    return ok;
}

/*
 * Take the next WQE of the QP's SRQ, if there is one: copied into *w, its
 * slot given back to the producer at once (the consumer frees it when the
 * receive completion appears), the limit event raised when the SRQ falls
 * below its limit.  Its SGEs belong to the SRQ's PD.  Returns false if the
 * SRQ is empty; a malformed WQE is taken too, with *status set.
 */
bool pib_srq_take(PibQp *qp, PibRecvWqe *w, uint8_t *status)
{
    PibSrq *srq = qp->srq;

    if (srq->ci == srq->pi) {
        return false;
    }
    pib_recv_fetch(qp, &srq->ring, srq->max_sge, "SRQ", srq->ci, w, status);
    w->pdn = srq->pdn;
    srq->ci++;
    if (srq->limit && srq->pi - srq->ci < srq->limit) {
        trace_pib_srq_limit(srq->srqn, 0, srq->pi - srq->ci);
        srq->limit = 0;
        pib_aeq_post(qp->s, PIB_AE_SRQ_LIMIT, srq->srqn, 0);
    }
    return true;
}

/*
 * Completions
 */

/*
 * A send completion for SQ entry idx (its wqe_index lets the consumer retire
 * every slot up to it).
 */
void pib_qp_post_send_cqe(PibQp *qp, uint32_t idx, const PibWqeMeta *m,
                          uint8_t status)
{
    struct pib_cqe cqe = {
        .wr_id = cpu_to_le64(m->wr_id),
        .byte_len = cpu_to_le32(m->length),
        .qpn = cpu_to_le32(qp->qpn),
        .status = status,
        .opcode = pib_cqe_opcode_of(m->opcode),
        .wqe_index = cpu_to_le16(idx & 0xffff),
    };

    pib_cq_post(qp->s, qp->scq, &cqe, false);
}

/* A receive completion; the caller set wqe_index (RQ or SRQ slot). */
void pib_qp_post_recv_cqe(PibQp *qp, struct pib_cqe *cqe, bool solicited)
{
    cqe->qpn = cpu_to_le32(qp->qpn);
    pib_cq_post(qp->s, qp->rcq, cqe, solicited);
}

/* wr_id and opcode of a WQE the engines never started (for a flush). */
static void pib_sq_peek(PibQp *qp, uint32_t idx, PibWqeMeta *m)
{
    struct pib_send_wqe raw;

    memset(m, 0, sizeof(*m));
    if (pib_dma_read(qp->s, pib_ring_addr(&qp->sq.ring, idx), &raw,
                     sizeof(raw), "send WQE")) {
        m->wr_id = le64_to_cpu(raw.wr_id);
        m->opcode = raw.opcode;
    }
}

/*
 * Complete every outstanding WQE with WR_FLUSH_ERR, in order: the SQ from
 * its consumer to its producer index, then the RQ, or, on an SRQ, the one WQE
 * the QP took and did not complete (the others stay in the SRQ for the other
 * QPs).  Bounded by the depths.
 */
void pib_qp_flush(PibQp *qp)
{
    PibWqeMeta m;
    struct pib_cqe cqe;
    uint64_t wr_id;

    if (qp->sq.pi != qp->sq.ci || qp->rq.pi != qp->rq.ci) {
        trace_pib_qp_flush(qp->qpn, qp->sq.pi - qp->sq.ci,
                           qp->rq.pi - qp->rq.ci);
    }
    while (qp->sq.ci != qp->sq.pi) {
        pib_sq_peek(qp, qp->sq.ci, &m);
        pib_qp_post_send_cqe(qp, qp->sq.ci, &m, PIB_WC_WR_FLUSH_ERR);
        qp->sq.ci++;
    }
    if (qp->srq && qp->resp.rwqe_valid) {
        cqe = (struct pib_cqe) {
            .wr_id = cpu_to_le64(qp->resp.rwqe.wr_id),
            .status = PIB_WC_WR_FLUSH_ERR,
            .opcode = PIB_CQE_RECV,
            .wqe_index = cpu_to_le16(qp->resp.rwqe.idx & 0xffff),
        };
        pib_qp_post_recv_cqe(qp, &cqe, false);
    }
    while (qp->rq.ci != qp->rq.pi) {
        wr_id = 0;
        if (pib_dma_read(qp->s, pib_ring_addr(&qp->rq.ring, qp->rq.ci),
                         &wr_id, sizeof(wr_id), "receive WQE")) {
            wr_id = le64_to_cpu(wr_id);
        }
        cqe = (struct pib_cqe) {
            .wr_id = cpu_to_le64(wr_id),
            .status = PIB_WC_WR_FLUSH_ERR,
            .opcode = PIB_CQE_RECV,
            .wqe_index = cpu_to_le16(qp->rq.ci & 0xffff),
        };
        pib_qp_post_recv_cqe(qp, &cqe, false);
        qp->rq.ci++;
    }
    qp->req.wqe_idx = qp->req.wqe_max = qp->sq.ci;
    qp->req.offset = 0;
    qp->req.wqe_valid = false;
    qp->resp.rwqe_valid = false;
}

static void pib_qp_set_state(PibQp *qp, uint8_t state, const char *why)
{
    trace_pib_qp_state(qp->qpn, pib_qp_state_name(qp->state),
                       pib_qp_state_name(state), why);
    qp->state = state;
}

/*
 * The QP enters ERR (a completion error, a protocol error, MODIFY_QP, or
 * DESTROY_QP): transport stops, outstanding work is flushed.
 */
void pib_qp_error(PibQp *qp, const char *why)
{
    if (qp->state == PIB_QPS_RESET) {
        return;
    }
    if (qp->state != PIB_QPS_ERR) {
        pib_qp_set_state(qp, PIB_QPS_ERR, why);
        pib_qp_flush(qp);       /* before the engines forget the taken WQE */
        pib_qp_reset_engines(qp);
        /* On an SRQ: no WQE will be taken any more (IBTA 11.6.3.2). */
        if (qp->srq) {
            pib_aeq_post(qp->s, PIB_AE_QP_LAST_WQE, qp->qpn, 0);
        }
    }
    pib_qp_flush(qp);
}

/*
 * Doorbells (from the UAR page the QP was created on)
 */

void pib_qp_doorbell(PibState *s, PibQp *qp, bool is_sq, uint32_t page,
                     uint64_t data)
{
    PibWq *wq = is_sq ? &qp->sq : &qp->rq;
    uint32_t pi = data >> PIB_DB_INDEX_SHIFT;

    if (!is_sq && qp->no_rq) {
        PIB_GUEST_ERR(s, PIB_GERR_UAR_DB_BAD_OBJ, pib_ub_uar_db_bad_obj,
                      "UAR page %" PRIu32 " %s for object %" PRIu32
                      " (index %" PRIu32 "): the QP has no RQ",
                      page, "RQ_DB", qp->qpn, pi);
        return;
    }
    /* At most depth WQEs outstanding, and the index never moves back. */
    if (pi - wq->ci > wq->ring.depth || pi - wq->ci < wq->pi - wq->ci) {
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
     * The work waits for the bottom half even when the requester is idle and
     * a small message could leave from here.  That was measured: sending
     * from the doorbell saves the wakeup of the main loop (20-30 us of a
     * small message's one-way latency under TCG) but makes the vCPU thread,
     * which goes on running the guest, the writer of the link socket.  The
     * kernel's wakeup of the peer QEMU's main loop for that socket is a
     * "sync" one (the writer is expected to sleep), so the peer was queued
     * behind a busy vCPU thread, and half of the ping-pong runs had a
     * typical latency of 0.2-2 ms instead of 50 us.  Written from our main
     * loop, which sleeps right after, the handoff is immediate.
     */
    wq->pi = pi;
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

    if (pi - srq->ci > srq->ring.depth || pi - srq->ci < srq->pi - srq->ci) {
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
 * The scheduler
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

    for (i = 1; i < PIB_QPN_LIMIT; i++) {
        if (s->qp[i] && s->qp[i]->req.wait_tx) {
            s->qp[i]->req.wait_tx = false;
            pib_qp_schedule(s->qp[i]);
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

/* One QP's turn: the engines that apply to its state, within a budget. */
static void pib_qp_work(PibQp *qp)
{
    unsigned budget = PIB_WORK_BUDGET;

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
        pib_qp_work(qp);
    }
    if (!QTAILQ_EMPTY(&s->runlist)) {
        qemu_bh_schedule(s->work_bh);
    }
    pib_link_flush(s);
}

void pib_work_bh(void *opaque)
{
    pib_work_run(opaque);
}

/*
 * MODIFY_QP and QUERY_QP
 */

#define PIB_QP_ATTR_ALL     ((PIB_QP_DEST_QPN << 1) - 1)
#define PIB_QP_ACCESS_ALL   (PIB_ACCESS_LOCAL_WRITE | \
                             PIB_ACCESS_REMOTE_WRITE | \
                             PIB_ACCESS_REMOTE_READ | \
                             PIB_ACCESS_REMOTE_ATOMIC | PIB_ACCESS_MW_BIND)

static uint8_t pib_modify_reject(PibQp *qp, const char *why, uint64_t val,
                                 uint8_t status)
{
    trace_pib_qp_modify_reject(qp->qpn, why, val, status);
    return status;
}

/* Check every attribute the mask names; nothing is applied yet. */
static uint8_t pib_qp_check_attrs(PibQp *qp, const struct pib_qp_attr *a,
                                  uint32_t mask)
{
    uint16_t dlid = le16_to_cpu(a->dlid);

    if ((mask & PIB_QP_PKEY_INDEX) &&
        le16_to_cpu(a->pkey_index) >= PIB_PKEY_TBL_LEN) {
        return pib_modify_reject(qp, "pkey_index", le16_to_cpu(a->pkey_index),
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_PORT) && a->port_num != PIB_PORT_NUM) {
        return pib_modify_reject(qp, "port_num", a->port_num,
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_ACCESS_FLAGS) &&
        (le32_to_cpu(a->qp_access_flags) & ~PIB_QP_ACCESS_ALL)) {
        return pib_modify_reject(qp, "qp_access_flags",
                                 le32_to_cpu(a->qp_access_flags),
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_PATH_MTU) &&
        (a->path_mtu < 1 || a->path_mtu > PIB_PORT_MTU_ENUM)) {
        return pib_modify_reject(qp, "path_mtu", a->path_mtu,
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_TIMEOUT) && a->timeout > 31) {
        return pib_modify_reject(qp, "timeout", a->timeout, PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_RETRY_CNT) && a->retry_cnt > 7) {
        return pib_modify_reject(qp, "retry_cnt", a->retry_cnt,
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_RNR_RETRY) && a->rnr_retry > 7) {
        return pib_modify_reject(qp, "rnr_retry", a->rnr_retry,
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31) {
        return pib_modify_reject(qp, "min_rnr_timer", a->min_rnr_timer,
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_MAX_QP_RD_ATOMIC) &&
        a->max_rd_atomic > PIB_MAX_RD_ATOM) {
        return pib_modify_reject(qp, "max_rd_atomic", a->max_rd_atomic,
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_MAX_DEST_RD_ATOMIC) &&
        a->max_dest_rd_atomic > PIB_MAX_RD_ATOM) {
        return pib_modify_reject(qp, "max_dest_rd_atomic",
                                 a->max_dest_rd_atomic, PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_RQ_PSN) && (le32_to_cpu(a->rq_psn) & ~PIB_PSN_MASK)) {
        return pib_modify_reject(qp, "rq_psn", le32_to_cpu(a->rq_psn),
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_SQ_PSN) && (le32_to_cpu(a->sq_psn) & ~PIB_PSN_MASK)) {
        return pib_modify_reject(qp, "sq_psn", le32_to_cpu(a->sq_psn),
                                 PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_QP_DEST_QPN) &&
        (le32_to_cpu(a->dest_qp_num) & ~PIB_QPN_MASK)) {
        return pib_modify_reject(qp, "dest_qp_num",
                                 le32_to_cpu(a->dest_qp_num),
                                 PIB_AQ_BAD_PARAM);
    }
    if (mask & PIB_QP_AV) {
        /* A unicast destination LID (the permissive LID is not routable). */
        if (dlid == 0 || dlid >= 0xc000) {
            return pib_modify_reject(qp, "dlid", dlid, PIB_AQ_BAD_PARAM);
        }
        if (a->sl > 15 || a->src_path_bits > 0x7f ||
            (a->ah_flags & ~1u)) {
            return pib_modify_reject(qp, "sl/src_path_bits/ah_flags",
                                     a->sl << 16 | a->src_path_bits << 8 |
                                     a->ah_flags, PIB_AQ_BAD_PARAM);
        }
        if ((a->ah_flags & 1) &&
            (a->sgid_index >= PIB_GID_TBL_LEN ||
             le32_to_cpu(a->flow_label) > 0xfffff)) {
            return pib_modify_reject(qp, "GRH", a->sgid_index,
                                     PIB_AQ_BAD_PARAM);
        }
    }
    return PIB_AQ_OK;
}

static void pib_qp_apply_attrs(PibQp *qp, const struct pib_qp_attr *a,
                               uint32_t mask)
{
    if (mask & PIB_QP_PKEY_INDEX) {
        qp->pkey_index = le16_to_cpu(a->pkey_index);
    }
    if (mask & PIB_QP_PORT) {
        qp->port_num = a->port_num;
    }
    if (mask & PIB_QP_QKEY) {
        qp->qkey = le32_to_cpu(a->qkey);
    }
    if (mask & PIB_QP_ACCESS_FLAGS) {
        qp->access = le32_to_cpu(a->qp_access_flags);
    }
    if (mask & PIB_QP_PATH_MTU) {
        qp->path_mtu = a->path_mtu;
    }
    if (mask & PIB_QP_TIMEOUT) {
        qp->timeout = a->timeout;
    }
    if (mask & PIB_QP_RETRY_CNT) {
        qp->retry_cnt = a->retry_cnt;
        qp->comp.retry_left = a->retry_cnt;
    }
    if (mask & PIB_QP_RNR_RETRY) {
        qp->rnr_retry = a->rnr_retry;
        qp->comp.rnr_retry_left = a->rnr_retry;
    }
    if (mask & PIB_QP_MIN_RNR_TIMER) {
        qp->min_rnr_timer = a->min_rnr_timer;
    }
    if (mask & PIB_QP_MAX_QP_RD_ATOMIC) {
        qp->max_rd_atomic = a->max_rd_atomic;
    }
    if (mask & PIB_QP_MAX_DEST_RD_ATOMIC) {
        qp->max_dest_rd_atomic = a->max_dest_rd_atomic;
    }
    if (mask & PIB_QP_DEST_QPN) {
        qp->dest_qpn = le32_to_cpu(a->dest_qp_num);
    }
    if (mask & PIB_QP_EN_SQD_ASYNC_NOTIFY) {
        qp->en_sqd_async = true;
    }
    if (mask & PIB_QP_AV) {
        qp->av = (PibAv) {
            .dlid = le16_to_cpu(a->dlid),
            .sl = a->sl,
            .src_path_bits = a->src_path_bits,
            .static_rate = a->static_rate,
            .grh = a->ah_flags & 1,
            .sgid_index = a->sgid_index,
            .hop_limit = a->hop_limit,
            .traffic_class = a->traffic_class,
            .flow_label = le32_to_cpu(a->flow_label),
        };
        memcpy(qp->av.dgid, a->dgid, sizeof(qp->av.dgid));
    }
    if (mask & PIB_QP_RQ_PSN) {
        qp->rq_psn = le32_to_cpu(a->rq_psn);
        qp->resp.psn = qp->rq_psn;
    }
    if (mask & PIB_QP_SQ_PSN) {
        qp->sq_psn = le32_to_cpu(a->sq_psn);
        qp->req.psn = qp->req.psn_max = qp->comp.psn = qp->sq_psn;
    }
}

/* Enter a new state (the attributes are already applied). */
static void pib_qp_enter(PibQp *qp, uint8_t next)
{
    uint8_t cur = qp->state;

    if (next == PIB_QPS_ERR) {
        pib_qp_error(qp, "MODIFY_QP");
        return;
    }
    if (next == cur && next != PIB_QPS_RESET) {
        return;
    }
    pib_qp_set_state(qp, next, "MODIFY_QP");
    switch (next) {
    case PIB_QPS_RESET:
        /*
         * Empty queues that start over at index 0, as the provider does on
         * every move to RESET, RESET to RESET included: WQEs posted in RESET
         * are discarded, and both sides' indices must agree afterwards.
         */
        qp->sq.pi = qp->sq.ci = 0;
        qp->rq.pi = qp->rq.ci = 0;
        pib_qp_reset_engines(qp);
        qp->req.psn = qp->req.psn_max = qp->comp.psn = qp->sq_psn;
        break;
    case PIB_QPS_RTR:
        qp->resp.opcode = -1;
        qp->resp.comm_est = false;
        break;
    case PIB_QPS_RTS:
        if (cur == PIB_QPS_RTR) {
            qp->req.wqe_idx = qp->req.wqe_max = qp->sq.ci;
            qp->comp.retry_left = qp->retry_cnt;
            qp->comp.rnr_retry_left = qp->rnr_retry;
        }
        qp->sq_draining = false;
        pib_qp_schedule(qp);
        break;
    case PIB_QPS_SQD:
        qp->sq_draining = true;
        pib_qp_schedule(qp);
        break;
    default:
        break;
    }
}

uint8_t pib_cmd_modify_qp(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    const struct pib_cmd_mbox *mbox = &cmd->in.mbox;
    uint32_t qpn = le32_to_cpu(mbox->obj);
    PibQp *qp = pib_qp_lookup(s, qpn);
    struct pib_qp_attr a = { 0 };
    uint32_t len = MIN(le32_to_cpu(mbox->len), sizeof(a));
    const PibQpTransition *t;
    uint32_t mask, req, opt;
    uint8_t cur, next, status;

    if (!qp) {
        trace_pib_cmd_reject("MODIFY_QP", "no such QP", qpn,
                             PIB_AQ_BAD_RESOURCE);
        return PIB_AQ_BAD_RESOURCE;
    }
    if (len && !pib_dma_read(s, le64_to_cpu(mbox->addr), &a, len,
                             "MODIFY_QP mailbox")) {
        return PIB_AQ_DMA_ERROR;
    }
    mask = le32_to_cpu(a.attr_mask);
    cur = qp->state;
    next = (mask & PIB_QP_STATE) ? a.qp_state : cur;
    trace_pib_qp_modify(qpn, pib_qp_state_name(cur), pib_qp_state_name(next),
                        mask);

    if (mask & ~PIB_QP_ATTR_ALL) {
        return pib_modify_reject(qp, "unknown attribute bits", mask,
                                 PIB_AQ_BAD_PARAM);
    }
    if (next > PIB_QPS_ERR) {
        return pib_modify_reject(qp, "qp_state", next, PIB_AQ_BAD_PARAM);
    }
    /* CUR_STATE: the caller's view must be the device's. */
    if ((mask & PIB_QP_CUR_STATE) && a.cur_qp_state != cur) {
        return pib_modify_reject(qp, "cur_qp_state", a.cur_qp_state,
                                 PIB_AQ_BAD_STATE);
    }
    t = &pib_qp_table[cur][next];
    if (!t->valid) {
        return pib_modify_reject(qp, "no such transition", next,
                                 PIB_AQ_BAD_STATE);
    }
    req = t->req[qp->type];
    opt = t->opt[qp->type];
    if ((mask & req) != req) {
        return pib_modify_reject(qp, "required attributes missing",
                                 req & ~mask, PIB_AQ_BAD_PARAM);
    }
    if (mask & ~(req | opt | PIB_QP_STATE)) {
        return pib_modify_reject(qp, "attributes not allowed",
                                 mask & ~(req | opt | PIB_QP_STATE),
                                 PIB_AQ_BAD_PARAM);
    }
    /*
     * No automatic path migration: an alternate path cannot be honoured.
     * PATH_MIG_STATE has no field (the state is always "migrated"): ignored.
     */
    if (mask & PIB_QP_ALT_PATH) {
        return pib_modify_reject(qp, "no alternate path support", mask,
                                 PIB_AQ_BAD_PARAM);
    }
    status = pib_qp_check_attrs(qp, &a, mask);
    if (status != PIB_AQ_OK) {
        return status;
    }
    pib_qp_apply_attrs(qp, &a, mask);
    pib_qp_enter(qp, next);
    return PIB_AQ_OK;
}

uint8_t pib_cmd_query_qp(PibState *s, const struct pib_admin_cmd *cmd,
                         PibAdminResult *res)
{
    uint32_t qpn = le32_to_cpu(cmd->in.obj.num);
    PibQp *qp = pib_qp_lookup(s, qpn);
    struct pib_qp_attr a;
    uint32_t len;

    if (!qp) {
        trace_pib_cmd_reject("QUERY_QP", "no such QP", qpn,
                             PIB_AQ_BAD_RESOURCE);
        return PIB_AQ_BAD_RESOURCE;
    }
    a = (struct pib_qp_attr) {
        .qp_state = qp->state,
        .cur_qp_state = qp->state,
        .path_mtu = qp->path_mtu,
        .timeout = qp->timeout,
        .retry_cnt = qp->retry_cnt,
        .rnr_retry = qp->rnr_retry,
        .min_rnr_timer = qp->min_rnr_timer,
        .max_rd_atomic = qp->max_rd_atomic,
        .max_dest_rd_atomic = qp->max_dest_rd_atomic,
        .sl = qp->av.sl,
        .port_num = qp->port_num,
        .sq_draining = qp->sq_draining,
        .pkey_index = cpu_to_le16(qp->pkey_index),
        .dlid = cpu_to_le16(qp->av.dlid),
        .qkey = cpu_to_le32(qp->qkey),
        .rq_psn = cpu_to_le32(qp->rq_psn),
        .sq_psn = cpu_to_le32(qp->sq_psn),
        .dest_qp_num = cpu_to_le32(qp->dest_qpn),
        .qp_access_flags = cpu_to_le32(qp->access),
        .src_path_bits = qp->av.src_path_bits,
        .static_rate = qp->av.static_rate,
        .ah_flags = qp->av.grh ? 1 : 0,
        .hop_limit = qp->av.hop_limit,
        .sgid_index = qp->av.sgid_index,
        .traffic_class = qp->av.traffic_class,
        .flow_label = cpu_to_le32(qp->av.flow_label),
        .max_send_wr = cpu_to_le32(qp->sq.ring.depth),
        .max_recv_wr = cpu_to_le32(qp->rq.ring.depth),
        .max_send_sge = cpu_to_le32(qp->sq.max_sge),
        .max_recv_sge = cpu_to_le32(qp->rq.max_sge),
        .max_inline_data = cpu_to_le32(qp->max_inline),
    };
    memcpy(a.dgid, qp->av.dgid, sizeof(a.dgid));

    len = MIN(le32_to_cpu(cmd->resp_len), sizeof(a));
    if (len && !pib_dma_write(s, le64_to_cpu(cmd->resp_addr), &a, len,
                              "QUERY_QP response")) {
        return PIB_AQ_DMA_ERROR;
    }
    return PIB_AQ_OK;
}
