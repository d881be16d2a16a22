/*
 * pib HCA device model - the device in a migration stream, and the device while the machine
 * is stopped
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * What is saved (docs/explanation/migration.md has it for users): the registers, the admin
 * queue and both event queues as latched at CONTROL.ENABLE, the UARs, every object table (PDs,
 * XRC domains, MRs with their page lists, memory windows, CQs, SRQs, QPs with the state of all
 * three engines: PSNs, the WQE window, the retry and RNR state and their timers, the
 * responder's READ/atomic resources and replay cache, the receive WQE in progress), the
 * multicast groups, the counters, the port's management state (LID, SM LID, M_Key, P_Keys,
 * SL2VL, VL arbitration, the PMA's bases, a pending trap) and the packets that were received
 * and not processed yet.  MSI-X state comes with the PCI function's.  What lives in guest
 * memory (rings, WQEs, CQEs, the consumer records) travels with the RAM, as it would on
 * hardware; cached copies of WQEs are not saved, the engines read them again.
 *
 * Not saved: the link itself.  The destination has its own cable (its chardev); what was in
 * flight on the old one is lost, and the transport's own retries recover it (RC, UC and UD then
 * behave as after any lost packet).  What is saved is the link's identity: its token and its
 * peer's (include/pib_link.h, "Moving").  The migration's start (and the save again) tells
 * the peer we may move, so that it holds its port when our cable drops; the load makes our
 * port hold its state until the same peer greets the new cable.  Then neither port changes
 * state, and the SM sees nothing.  A peer that does not come back in PIB_LINK_MOVE_HOLD_MS takes
 * the port down then (PORT_ERR).  Error injection is an operator's, not the guest's: it is not
 * saved.
 *
 * A stream is input like any other: every number that names an object, sizes an array or
 * indexes one is checked as the admin commands check it, and references between objects are
 * resolved and counted as CREATE_* counts them.  A bad stream fails the load with an error
 * that names the field; the device is then left reset, never half-loaded with dangling
 * references.
 *
 * Stopped machine: while the VM is stopped (a migration's last phase, savevm, `stop`) the
 * device does nothing that writes guest memory.  The link stops reading, so packets wait in
 * the socket, and the port hears of its cable opening or closing only when the machine runs
 * (pib_link_stream_defer); the bottom halves return at once; the timers are on QEMU_CLOCK_VIRTUAL, which
 * stands still.  Without this a source that stopped for the last RAM pass would go on
 * writing received data into RAM already sent, and acknowledge it to the peer: data lost.
 */

#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "qemu/main-loop.h"
#include "hw/pci/msix.h"
#include "migration/vmstate.h"
#include "migration/qemu-file-types.h"

#include "pib-internal.h"
#include "../trace.h"

/*
 * The device being loaded.  Sections load one at a time, under the BQL, so one pointer is
 * enough; the object descriptions below need it to resolve references (an SRQ's CQ, a QP's
 * CQs) and to charge page lists to the device's MTT budget as they load.
 */
static PibState *pib_loading;

static bool pib_load_fail(const char *what, uint64_t val)
{
    error_report("pib-hca: migration stream refused: %s (0x%" PRIx64 ")", what, val);
    trace_pib_vmstate_refused(what, val);
    return false;
}

#define PIB_LOAD_CHECK(cond, what, val) \
    do { if (!(cond)) { return pib_load_fail((what), (val)); } } while (0)

/*
 * Rings and page lists
 */

/*
 * A page list's length, checked against what is left of the MTT budget before the list is
 * allocated (VMSTATE_VALIDATE runs between the count and the array it sizes).  A save runs
 * the same checks on its way out (pib_loading is NULL then): nothing to charge.
 */
static bool pib_load_charge(uint32_t npages)
{
    PibState *s = pib_loading;

    if (!s) {
        return true;
    }
    PIB_LOAD_CHECK(npages <= PIB_MAX_MTT_PAGES - s->mtt_pages, "page lists exceed the MTT",
                   npages);
    s->mtt_pages += npages;
    return true;
}

static bool pib_ring_npages_ok(void *opaque, int version_id)
{
    return pib_load_charge(((PibRing *)opaque)->npages);
}

/* The geometry pib_ring_addr() relies on: every entry of the ring is on a listed page. */
static bool pib_ring_geometry_ok(void *opaque, int version_id)
{
    const PibRing *r = opaque;
    uint32_t i;

    if (r->depth == 0) {
        PIB_LOAD_CHECK(r->npages == 0, "pages of an empty ring", r->npages);
        return true;
    }
    PIB_LOAD_CHECK(is_power_of_2(r->depth) && r->depth <= PIB_MAX_CQE, "ring depth", r->depth);
    PIB_LOAD_CHECK(r->stride_log >= PIB_RQ_STRIDE_LOG_MIN &&
                   r->stride_log <= PIB_STRIDE_LOG_MAX, "ring stride", r->stride_log);
    PIB_LOAD_CHECK((uint64_t)r->npages << PIB_PAGE_SHIFT >=
                   (uint64_t)r->depth << r->stride_log, "ring pages", r->npages);
    for (i = 0; i < r->npages; i++) {
        PIB_LOAD_CHECK(!(r->pages[i] & (PIB_PAGE_SIZE - 1)), "ring page alignment",
                       r->pages[i]);
    }
    return true;
}

static const VMStateDescription vmstate_pib_ring = {
    .name = "pib-ring",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(depth, PibRing),
        VMSTATE_UINT32(stride_log, PibRing),
        VMSTATE_UINT32(npages, PibRing),
        VMSTATE_VALIDATE("ring pages in the MTT", pib_ring_npages_ok),
        VMSTATE_VARRAY_UINT32_ALLOC(pages, PibRing, npages, 0, vmstate_info_uint64, uint64_t),
        VMSTATE_VALIDATE("ring geometry", pib_ring_geometry_ok),
        VMSTATE_END_OF_LIST()
    },
};

/*
 * PDs and XRC domains: their numbers.  Reference counts are not saved; each object that
 * uses one counts itself in as it loads, as at its CREATE.
 */

static const VMStateDescription vmstate_pib_pd = {
    .name = "pib-pd",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(pdn, PibPd),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_pib_xrcd = {
    .name = "pib-xrcd",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(xrcd, PibXrcd),
        VMSTATE_END_OF_LIST()
    },
};

/* A device memory allocation; its contents travel as the RAM block "pib-dm" (pib-dm.c). */
static const VMStateDescription vmstate_pib_dm = {
    .name = "pib-dm",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(dm, PibDm),
        VMSTATE_UINT64(start, PibDm),
        VMSTATE_UINT64(length, PibDm),
        VMSTATE_END_OF_LIST()
    },
};

/* MRs: the page list holds max_pages entries (a fast-registration MR's capacity). */
static bool pib_mr_pages_ok(void *opaque, int version_id)
{
    PibMr *mr = opaque;

    PIB_LOAD_CHECK(mr->npages <= mr->max_pages, "MR npages", mr->npages);
    return pib_load_charge(mr->max_pages);
}

static const VMStateDescription vmstate_pib_mr = {
    .name = "pib-mr",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(key, PibMr),
        VMSTATE_UINT32(pdn, PibMr),
        VMSTATE_UINT32(access, PibMr),
        VMSTATE_UINT32(flags, PibMr),
        VMSTATE_UINT64(iova, PibMr),
        VMSTATE_UINT64(length, PibMr),
        VMSTATE_UINT32(npages, PibMr),
        VMSTATE_UINT32(max_pages, PibMr),
        VMSTATE_VALIDATE("MR pages in the MTT", pib_mr_pages_ok),
        VMSTATE_VARRAY_UINT32_ALLOC(pages, PibMr, max_pages, 0, vmstate_info_uint64, uint64_t),
        VMSTATE_BOOL(fast_reg, PibMr),
        VMSTATE_BOOL(invalid, PibMr),
        VMSTATE_UINT32(dm, PibMr),
        VMSTATE_UINT64(dm_addr, PibMr),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_pib_mw = {
    .name = "pib-mw",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(key, PibMw),
        VMSTATE_UINT32(alloc_key, PibMw),
        VMSTATE_UINT32(pdn, PibMw),
        VMSTATE_UINT8(type, PibMw),
        VMSTATE_BOOL(bound, PibMw),
        VMSTATE_UINT32(mr_key, PibMw),
        VMSTATE_UINT64(addr, PibMw),
        VMSTATE_UINT64(length, PibMw),
        VMSTATE_UINT32(access, PibMw),
        VMSTATE_UINT32(qpn, PibMw),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_pib_cq = {
    .name = "pib-cq",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(cqn, PibCq),
        VMSTATE_UINT32(uar, PibCq),
        VMSTATE_STRUCT(ring, PibCq, 1, vmstate_pib_ring, PibRing),
        VMSTATE_UINT64(ci_record, PibCq),
        VMSTATE_UINT32(pi, PibCq),
        VMSTATE_UINT32(ci, PibCq),
        VMSTATE_UINT8(arm, PibCq),
        VMSTATE_BOOL(sol_valid, PibCq),
        VMSTATE_UINT32(last_sol, PibCq),
        VMSTATE_BOOL(error, PibCq),
        VMSTATE_BOOL(notify_pending, PibCq),
        VMSTATE_UINT16(mod_count, PibCq),
        VMSTATE_UINT16(mod_period_us, PibCq),
        VMSTATE_UINT32(mod_held, PibCq),
        VMSTATE_TIMER_PTR(mod_timer, PibCq),
        VMSTATE_END_OF_LIST()
    },
};

/* A CQ an object names by number: 0 for none, else one already loaded. */
static bool pib_load_cq_ref(uint32_t cqn, PibCq **cqp, const char *what)
{
    *cqp = NULL;
    if (cqn == 0) {
        return true;
    }
    *cqp = pib_cq_lookup(pib_loading, cqn);
    PIB_LOAD_CHECK(*cqp, what, cqn);
    return true;
}

/* An SRQ's CQ (XRC SRQs) goes in the stream by number. */
typedef struct PibSrqTmp {
    PibSrq *parent;
    uint32_t cqn;
} PibSrqTmp;

static int pib_srq_tmp_pre_save(void *opaque)
{
    PibSrqTmp *t = opaque;

    t->cqn = t->parent->cq ? t->parent->cq->cqn : 0;
    return 0;
}

static int pib_srq_tmp_post_load(void *opaque, int version_id)
{
    PibSrqTmp *t = opaque;

    return pib_load_cq_ref(t->cqn, &t->parent->cq, "XRC SRQ's CQ") ? 0 : -EINVAL;
}

static const VMStateDescription vmstate_pib_srq_tmp = {
    .name = "pib-srq-refs",
    .pre_save = pib_srq_tmp_pre_save,
    .post_load = pib_srq_tmp_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(cqn, PibSrqTmp),
        VMSTATE_END_OF_LIST()
    },
};

/* A receive ring's doorbell record, as a subsection: a stream without it loads as before. */
static bool pib_srq_dbrec_needed(void *opaque)
{
    return ((PibSrq *)opaque)->dbrec != 0;
}

static const VMStateDescription vmstate_pib_srq_dbrec = {
    .name = "pib-srq/dbrec",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = pib_srq_dbrec_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64(dbrec, PibSrq),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_pib_srq = {
    .name = "pib-srq",
    .version_id = 1,
    .minimum_version_id = 1,
    .subsections = (const VMStateDescription *[]) {
        &vmstate_pib_srq_dbrec,
        NULL
    },
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(srqn, PibSrq),
        VMSTATE_UINT32(uar, PibSrq),
        VMSTATE_UINT32(pdn, PibSrq),
        VMSTATE_STRUCT(ring, PibSrq, 1, vmstate_pib_ring, PibRing),
        VMSTATE_UINT32(max_sge, PibSrq),
        VMSTATE_UINT32(pi, PibSrq),
        VMSTATE_UINT32(ci, PibSrq),
        VMSTATE_UINT32(limit, PibSrq),
        VMSTATE_UINT32(xrcd, PibSrq),
        VMSTATE_WITH_TMP(PibSrq, PibSrqTmp, vmstate_pib_srq_tmp),
        VMSTATE_END_OF_LIST()
    },
};

/*
 * QPs
 */

static bool pib_wq_dbrec_needed(void *opaque)
{
    return ((PibWq *)opaque)->dbrec != 0;
}

static const VMStateDescription vmstate_pib_wq_dbrec = {
    .name = "pib-wq/dbrec",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = pib_wq_dbrec_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64(dbrec, PibWq),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_pib_wq = {
    .name = "pib-wq",
    .version_id = 1,
    .minimum_version_id = 1,
    .subsections = (const VMStateDescription *[]) {
        &vmstate_pib_wq_dbrec,
        NULL
    },
    .fields = (const VMStateField[]) {
        VMSTATE_STRUCT(ring, PibWq, 1, vmstate_pib_ring, PibRing),
        VMSTATE_UINT32(pi, PibWq),
        VMSTATE_UINT32(ci, PibWq),
        VMSTATE_UINT32(max_sge, PibWq),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_pib_av = {
    .name = "pib-av",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT16(dlid, PibAv),
        VMSTATE_UINT8(sl, PibAv),
        VMSTATE_UINT8(src_path_bits, PibAv),
        VMSTATE_UINT8(static_rate, PibAv),
        VMSTATE_BOOL(grh, PibAv),
        VMSTATE_UINT8(sgid_index, PibAv),
        VMSTATE_UINT8(g.hop_limit, PibAv),
        VMSTATE_UINT8(g.traffic_class, PibAv),
        VMSTATE_UINT32(g.flow_label, PibAv),
        VMSTATE_UINT8_ARRAY(g.dgid, PibAv, 16),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_pib_wqe_meta = {
    .name = "pib-wqe-meta",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64(wr_id, PibWqeMeta),
        VMSTATE_UINT32(length, PibWqeMeta),
        VMSTATE_UINT32(first_psn, PibWqeMeta),
        VMSTATE_UINT32(last_psn, PibWqeMeta),
        VMSTATE_UINT8(opcode, PibWqeMeta),
        VMSTATE_UINT8(flags, PibWqeMeta),
        VMSTATE_UINT8(state, PibWqeMeta),
        VMSTATE_UINT8(status, PibWqeMeta),
        VMSTATE_BOOL(rd_atomic, PibWqeMeta),
        VMSTATE_BOOL(local, PibWqeMeta),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_pib_sge = {
    .name = "pib-sge",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64(addr, PibSge),
        VMSTATE_UINT32(length, PibSge),
        VMSTATE_UINT32(lkey, PibSge),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_pib_recv_wqe = {
    .name = "pib-recv-wqe",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64(wr_id, PibRecvWqe),
        VMSTATE_UINT32(num_sge, PibRecvWqe),
        VMSTATE_STRUCT_ARRAY(sge, PibRecvWqe, PIB_MAX_SGE, 1, vmstate_pib_sge, PibSge),
        VMSTATE_UINT64(length, PibRecvWqe),
        VMSTATE_UINT32(idx, PibRecvWqe),
        VMSTATE_UINT32(pdn, PibRecvWqe),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_pib_rd_res = {
    .name = "pib-rd-res",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT8(state, PibRdRes),
        VMSTATE_BOOL(atomic, PibRdRes),
        VMSTATE_UINT32(psn, PibRdRes),
        VMSTATE_UINT32(last_psn, PibRdRes),
        VMSTATE_UINT32(cur_psn, PibRdRes),
        VMSTATE_UINT64(va, PibRdRes),
        VMSTATE_UINT32(rkey, PibRdRes),
        VMSTATE_UINT32(pdn, PibRdRes),
        VMSTATE_UINT32(resid, PibRdRes),
        VMSTATE_BOOL(first, PibRdRes),
        VMSTATE_BOOL(replay, PibRdRes),
        VMSTATE_BOOL(answered, PibRdRes),
        VMSTATE_UINT64(seq, PibRdRes),
        VMSTATE_UINT64(orig, PibRdRes),
        VMSTATE_END_OF_LIST()
    },
};

/* What the requester started; its copy of the current WQE is fetched again after a load. */
static const VMStateDescription vmstate_pib_req = {
    .name = "pib-req",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(wqe_idx, PibReq),
        VMSTATE_UINT64(offset, PibReq),
        VMSTATE_UINT32(psn, PibReq),
        VMSTATE_UINT32(wqe_max, PibReq),
        VMSTATE_UINT32(psn_max, PibReq),
        VMSTATE_UINT32(rd_atomic, PibReq),
        VMSTATE_UINT32(since_ackreq, PibReq),
        VMSTATE_BOOL(wait_tx, PibReq),
        VMSTATE_BOOL(error, PibReq),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_pib_comp = {
    .name = "pib-comp",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(psn, PibComp),
        VMSTATE_UINT8(retry_left, PibComp),
        VMSTATE_UINT8(rnr_retry_left, PibComp),
        VMSTATE_BOOL(timeout, PibComp),
        VMSTATE_BOOL(rnr_wait, PibComp),
        VMSTATE_TIMER_PTR(retrans_timer, PibComp),
        VMSTATE_INT64(retrans_deadline, PibComp),
        VMSTATE_TIMER_PTR(rnr_timer, PibComp),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_pib_resp = {
    .name = "pib-resp",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(psn, PibResp),
        VMSTATE_UINT32(msn, PibResp),
        VMSTATE_INT32(opcode, PibResp),
        VMSTATE_BOOL(nak_seq_sent, PibResp),
        VMSTATE_UINT32(unacked, PibResp),
        VMSTATE_BOOL(uc_drop, PibResp),
        VMSTATE_BOOL(comm_est, PibResp),
        VMSTATE_BOOL(rwqe_valid, PibResp),
        VMSTATE_STRUCT(rwqe, PibResp, 1, vmstate_pib_recv_wqe, PibRecvWqe),
        VMSTATE_UINT64(offset, PibResp),
        VMSTATE_UINT64(write_va, PibResp),
        VMSTATE_UINT32(write_rkey, PibResp),
        VMSTATE_UINT32(write_resid, PibResp),
        VMSTATE_UINT32(write_len, PibResp),
        VMSTATE_STRUCT_ARRAY(res, PibResp, PIB_MAX_RD_ATOM, 1, vmstate_pib_rd_res, PibRdRes),
        VMSTATE_UINT32(res_next, PibResp),
        VMSTATE_UINT64(res_seq, PibResp),
        VMSTATE_BOOL(ack_deferred, PibResp),
        VMSTATE_UINT32(ack_psn, PibResp),
        VMSTATE_UINT8(ack_syndrome, PibResp),
        VMSTATE_END_OF_LIST()
    },
};

/* A QP's CQs and SRQs, and the SRQ its receive WQE in progress came from, by number. */
typedef struct PibQpTmp {
    PibQp *parent;
    uint32_t scqn, rcqn, srqn, rwqe_srqn;
} PibQpTmp;

static int pib_qp_tmp_pre_save(void *opaque)
{
    PibQpTmp *t = opaque;
    const PibQp *qp = t->parent;

    t->scqn = qp->scq ? qp->scq->cqn : 0;
    t->rcqn = qp->rcq ? qp->rcq->cqn : 0;
    t->srqn = qp->srq ? qp->srq->srqn : 0;
    t->rwqe_srqn = qp->resp.rwqe_srq ? qp->resp.rwqe_srq->srqn : 0;
    return 0;
}

static bool pib_load_srq_ref(uint32_t srqn, PibSrq **srqp, const char *what)
{
    *srqp = NULL;
    if (srqn == 0) {
        return true;
    }
    *srqp = pib_srq_lookup(pib_loading, srqn);
    PIB_LOAD_CHECK(*srqp, what, srqn);
    return true;
}

static int pib_qp_tmp_post_load(void *opaque, int version_id)
{
    PibQpTmp *t = opaque;
    PibQp *qp = t->parent;

    if (!pib_load_cq_ref(t->scqn, &qp->scq, "QP's send CQ") ||
        !pib_load_cq_ref(t->rcqn, &qp->rcq, "QP's receive CQ") ||
        !pib_load_srq_ref(t->srqn, &qp->srq, "QP's SRQ") ||
        !pib_load_srq_ref(t->rwqe_srqn, &qp->resp.rwqe_srq, "SRQ of a receive in progress")) {
        return -EINVAL;
    }
    return 0;
}

static const VMStateDescription vmstate_pib_qp_tmp = {
    .name = "pib-qp-refs",
    .pre_save = pib_qp_tmp_pre_save,
    .post_load = pib_qp_tmp_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(scqn, PibQpTmp),
        VMSTATE_UINT32(rcqn, PibQpTmp),
        VMSTATE_UINT32(srqn, PibQpTmp),
        VMSTATE_UINT32(rwqe_srqn, PibQpTmp),
        VMSTATE_END_OF_LIST()
    },
};

static bool pib_qp_meta_size_ok(void *opaque, int version_id)
{
    uint32_t n = ((PibQp *)opaque)->meta_size;

    PIB_LOAD_CHECK(n && is_power_of_2(n) && n <= PIB_SQ_WINDOW, "QP WQE window", n);
    return true;
}

static const VMStateDescription vmstate_pib_qp = {
    .name = "pib-qp",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(qpn, PibQp),
        VMSTATE_UINT32(uar, PibQp),
        VMSTATE_UINT32(pdn, PibQp),
        VMSTATE_UINT32(xrcd, PibQp),
        VMSTATE_UINT8(type, PibQp),
        VMSTATE_UINT8(state, PibQp),
        VMSTATE_BOOL(sig_all, PibQp),
        VMSTATE_BOOL(no_rq, PibQp),
        VMSTATE_STRUCT(sq, PibQp, 1, vmstate_pib_wq, PibWq),
        VMSTATE_STRUCT(rq, PibQp, 1, vmstate_pib_wq, PibWq),
        VMSTATE_UINT32(max_inline, PibQp),
        VMSTATE_UINT8(path_mtu, PibQp),
        VMSTATE_UINT8(timeout, PibQp),
        VMSTATE_UINT8(retry_cnt, PibQp),
        VMSTATE_UINT8(rnr_retry, PibQp),
        VMSTATE_UINT8(min_rnr_timer, PibQp),
        VMSTATE_UINT8(max_rd_atomic, PibQp),
        VMSTATE_UINT8(max_dest_rd_atomic, PibQp),
        VMSTATE_UINT8(port_num, PibQp),
        VMSTATE_UINT16(pkey_index, PibQp),
        VMSTATE_UINT32(qkey, PibQp),
        VMSTATE_UINT32(dest_qpn, PibQp),
        VMSTATE_UINT32(access, PibQp),
        VMSTATE_UINT32(sq_psn, PibQp),
        VMSTATE_UINT32(rq_psn, PibQp),
        VMSTATE_BOOL(en_sqd_async, PibQp),
        VMSTATE_BOOL(sq_draining, PibQp),
        VMSTATE_STRUCT(av, PibQp, 1, vmstate_pib_av, PibAv),
        VMSTATE_UINT32(meta_size, PibQp),
        VMSTATE_VALIDATE("QP WQE window", pib_qp_meta_size_ok),
        {   /* VMSTATE_STRUCT_VARRAY_ALLOC, with a uint32_t count */
            .name = "meta",
            .version_id = 1,
            .vmsd = &vmstate_pib_wqe_meta,
            .num_offset = vmstate_offset_value(PibQp, meta_size, uint32_t),
            .size = sizeof(PibWqeMeta),
            .flags = VMS_STRUCT | VMS_VARRAY_UINT32 | VMS_ALLOC | VMS_POINTER,
            .offset = vmstate_offset_pointer(PibQp, meta, PibWqeMeta),
        },
        VMSTATE_STRUCT(req, PibQp, 1, vmstate_pib_req, PibReq),
        VMSTATE_STRUCT(comp, PibQp, 1, vmstate_pib_comp, PibComp),
        VMSTATE_STRUCT(resp, PibQp, 1, vmstate_pib_resp, PibResp),
        VMSTATE_WITH_TMP(PibQp, PibQpTmp, vmstate_pib_qp_tmp),
        VMSTATE_END_OF_LIST()
    },
};

/*
 * Object tables.  In the stream a table is its objects in number order, each a byte 1, its
 * number (be32) and its description's fields, then a byte 0; a keyed table (MRs, windows)
 * then has its key bytes, a be32 count and the bytes.  Loading takes each object as the admin
 * command that made it would: its number must be in range and free, its fields valid, what
 * it names must exist; then it is counted into what it uses, and into its table.
 */
typedef struct PibObjType {
    const char *name;
    const VMStateDescription *vmsd;
    size_t size;
    /*
     * An empty object whose timers exist (VMSTATE_TIMER_PTR loads into them); NULL: size
     * zeroed bytes.
     */
    void *(*alloc)(PibState *s);
    /* After its fields loaded: check it as its CREATE would, count its references. */
    bool (*check)(PibState *s, void *obj, uint32_t n);
    /* A loaded object that failed its check: freed with what it holds; NULL: g_free. */
    void (*discard)(PibState *s, void *obj);
} PibObjType;

static int pib_mig_table_put(QEMUFile *f, void *pv, const PibObjType *type,
                         JSONWriter *vmdesc)
{
    PibTable *t = pv;
    uint32_t n;
    void *obj;
    int ret;

    PIB_TABLE_FOREACH(t, n, obj) {
        qemu_put_byte(f, 1);
        qemu_put_be32(f, n);
        ret = vmstate_save_state(f, type->vmsd, obj, vmdesc);
        if (ret) {
            return ret;
        }
    }
    qemu_put_byte(f, 0);
    if (t->key) {
        qemu_put_be32(f, t->max + 1);
        qemu_put_buffer(f, t->key, t->max + 1);
    }
    return 0;
}

static int pib_mig_table_get(QEMUFile *f, void *pv, const PibObjType *type)
{
    PibState *s = pib_loading;
    PibTable *t = pv;
    uint32_t n, nkeys;
    void *obj;
    int ret;

    if (!s) {
        return -EINVAL;
    }
    while (qemu_get_byte(f)) {
        n = qemu_get_be32(f);
        if (n < t->first || n > t->max || t->obj[n]) {
            pib_load_fail(type->name, n);
            return -EINVAL;
        }
        obj = type->alloc ? type->alloc(s) : g_malloc0(type->size);
        ret = vmstate_load_state(f, type->vmsd, obj, type->vmsd->version_id);
        if (ret || !type->check(s, obj, n)) {
            if (type->discard) {
                type->discard(s, obj);
            } else {
                g_free(obj);
            }
            /* Nothing half-loaded stays (the MTT count included): a reset device. */
            pib_objects_reset(s);
            return ret ? ret : -EINVAL;
        }
        pib_table_set(t, n, obj);
    }
    if (t->key) {
        nkeys = qemu_get_be32(f);
        if (nkeys != t->max + 1) {
            pib_load_fail("key table size", nkeys);
            return -EINVAL;
        }
        qemu_get_buffer(f, t->key, nkeys);
    }
    return qemu_file_get_error(f);
}

/* One VMStateInfo per table: get and put know the object type. */
#define PIB_TABLE_INFO(kind)                                                    \
    static int pib_get_##kind##s(QEMUFile *f, void *pv, size_t size,            \
                                 const VMStateField *field)                     \
    {                                                                           \
        return pib_mig_table_get(f, pv, &pib_##kind##_type);                        \
    }                                                                           \
    static int pib_put_##kind##s(QEMUFile *f, void *pv, size_t size,            \
                                 const VMStateField *field, JSONWriter *vmdesc) \
    {                                                                           \
        return pib_mig_table_put(f, pv, &pib_##kind##_type, vmdesc);                \
    }                                                                           \
    static const VMStateInfo pib_info_##kind##s = {                             \
        .name = "pib-" #kind "-table",                                          \
        .get = pib_get_##kind##s,                                               \
        .put = pib_put_##kind##s,                                               \
    }

#define PIB_VMSTATE_TABLE(_field, kind) {                                       \
    .name = #_field,                                                            \
    .size = sizeof(PibTable),                                                   \
    .info = &pib_info_##kind##s,                                                \
    .flags = VMS_SINGLE,                                                        \
    .offset = vmstate_offset_value(PibState, _field, PibTable),                 \
}

/* PDs and XRC domains */

static bool pib_mig_pd_check(PibState *s, void *obj, uint32_t n)
{
    PIB_LOAD_CHECK(((PibPd *)obj)->pdn == n, "PD number", n);
    return true;
}

static const PibObjType pib_pd_type = {
    .name = "PD",
    .vmsd = &vmstate_pib_pd,
    .size = sizeof(PibPd),
    .check = pib_mig_pd_check,
};
PIB_TABLE_INFO(pd);

static bool pib_mig_xrcd_check(PibState *s, void *obj, uint32_t n)
{
    PIB_LOAD_CHECK(((PibXrcd *)obj)->xrcd == n, "XRCD number", n);
    return true;
}

static const PibObjType pib_xrcd_type = {
    .name = "XRCD",
    .vmsd = &vmstate_pib_xrcd,
    .size = sizeof(PibXrcd),
    .check = pib_mig_xrcd_check,
};
PIB_TABLE_INFO(xrcd);

/* A PD an object names: it must exist; the object counts in. */
static bool pib_load_pd_ref(PibState *s, uint32_t pdn, const char *what)
{
    PibPd *pd = pib_pd_lookup(s, pdn);

    PIB_LOAD_CHECK(pd, what, pdn);
    pd->refcnt++;
    return true;
}

static bool pib_load_xrcd_ref(PibState *s, uint32_t xrcd, const char *what)
{
    PibXrcd *x;

    if (xrcd == 0) {
        return true;
    }
    x = pib_xrcd_lookup(s, xrcd);
    PIB_LOAD_CHECK(x, what, xrcd);
    x->refcnt++;
    return true;
}

/* Device memory allocations: each inside the device memory, clear of the others. */
static bool pib_mig_dm_check(PibState *s, void *obj, uint32_t n)
{
    PibDm *dm = obj;
    uint64_t npages = DIV_ROUND_UP(dm->length, PIB_DM_PAGE_SIZE);
    uint64_t first = dm->start / PIB_DM_PAGE_SIZE;
    uint64_t pages = s->dm_size / PIB_DM_PAGE_SIZE;

    PIB_LOAD_CHECK(dm->dm == n, "DM number", n);
    PIB_LOAD_CHECK(dm->length && dm->length <= s->dm_size &&
                   !(dm->start % PIB_DM_PAGE_SIZE) && first < pages &&
                   npages <= pages - first, "DM range", dm->start);
    PIB_LOAD_CHECK(find_next_bit(s->dm_pages, first + npages, first) >= first + npages,
                   "DM overlapping another", dm->start);
    bitmap_set(s->dm_pages, first, npages);
    return true;
}

static const PibObjType pib_dm_type = {
    .name = "DM",
    .vmsd = &vmstate_pib_dm,
    .size = sizeof(PibDm),
    .check = pib_mig_dm_check,
};
PIB_TABLE_INFO(dm);

/* MRs and windows */

static bool pib_mig_mr_check(PibState *s, void *obj, uint32_t n)
{
    PibMr *mr = obj;
    uint32_t i;

    PIB_LOAD_CHECK(mr->key >> 8 == n, "MR key index", mr->key);
    PIB_LOAD_CHECK(!(mr->flags & ~PIB_MR_F_PHYS), "MR flags", mr->flags);
    if (mr->dm) {
        /* Device memory (REG_DM_MR): inside its DM, which counts it in. */
        PibDm *dm = pib_dm_lookup(s, mr->dm);

        PIB_LOAD_CHECK(dm, "MR's DM", mr->dm);
        PIB_LOAD_CHECK(!mr->flags && !mr->fast_reg && mr->max_pages == 0 &&
                       mr->length <= UINT64_MAX - mr->iova &&
                       pib_range_in(mr->dm_addr, mr->length, dm->start, dm->length),
                       "MR in device memory", mr->dm_addr);
        dm->refcnt++;
    } else if (mr->flags & PIB_MR_F_PHYS) {
        /* The kernel's DMA MR: guest-physical memory itself, no pages (REG_MR). */
        PIB_LOAD_CHECK(!mr->fast_reg && mr->iova == 0 && mr->length == UINT64_MAX &&
                       mr->npages == 0, "physical MR", mr->length);
    } else if (mr->length || !mr->fast_reg) {
        /* (A fast-registration MR no REG_MR WQE registered yet has no range.) */
        PIB_LOAD_CHECK(pib_mr_length_ok(mr->iova, mr->length), "MR length", mr->length);
        PIB_LOAD_CHECK(pib_mr_span(mr->iova, mr->length) <= mr->npages, "MR pages",
                       mr->npages);
    }
    for (i = 0; i < mr->npages; i++) {
        PIB_LOAD_CHECK(!(mr->pages[i] & (PIB_PAGE_SIZE - 1)), "MR page alignment",
                       mr->pages[i]);
    }
    return pib_load_pd_ref(s, mr->pdn, "MR's PD");
}

static void pib_mig_mr_discard(PibState *s, void *obj)
{
    PibMr *mr = obj;

    s->mtt_pages -= mr->max_pages;
    g_free(mr->pages);
    g_free(mr);
}

static const PibObjType pib_mr_type = {
    .name = "MR",
    .vmsd = &vmstate_pib_mr,
    .size = sizeof(PibMr),
    .check = pib_mig_mr_check,
    .discard = pib_mig_mr_discard,
};
PIB_TABLE_INFO(mr);

static bool pib_mig_mw_check(PibState *s, void *obj, uint32_t n)
{
    PibMw *mw = obj;
    PibMr *mr;

    PIB_LOAD_CHECK(mw->key >> 8 == n + PIB_MW_INDEX_BASE, "MW key index", mw->key);
    PIB_LOAD_CHECK(mw->type == 1 || mw->type == 2, "MW type", mw->type);
    if (mw->bound) {
        mr = pib_mr_lookup(s, mw->mr_key);
        PIB_LOAD_CHECK(mr && mr->key == mw->mr_key, "bound MW's MR", mw->mr_key);
        PIB_LOAD_CHECK(mw->length <= mr->length && mw->addr >= mr->iova &&
                       mw->addr - mr->iova <= mr->length - mw->length,
                       "bound MW's range", mw->addr);
        mr->mw_bound++;
    }
    return pib_load_pd_ref(s, mw->pdn, "MW's PD");
}

static const PibObjType pib_mw_type = {
    .name = "MW",
    .vmsd = &vmstate_pib_mw,
    .size = sizeof(PibMw),
    .check = pib_mig_mw_check,
};
PIB_TABLE_INFO(mw);

/* CQs */

static void *pib_mig_cq_alloc(PibState *s)
{
    PibCq *cq = g_new0(PibCq, 1);

    cq->s = s;
    cq->mod_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, pib_cq_mod_expired, cq);
    return cq;
}

static bool pib_mig_cq_check(PibState *s, void *obj, uint32_t n)
{
    PibCq *cq = obj;

    PIB_LOAD_CHECK(cq->cqn == n, "CQ number", cq->cqn);
    PIB_LOAD_CHECK(pib_uar_valid(s, cq->uar), "CQ's UAR", cq->uar);
    PIB_LOAD_CHECK(cq->ring.depth && cq->ring.npages, "CQ ring", cq->ring.depth);
    PIB_LOAD_CHECK(cq->ring.stride_log == PIB_CQE_STRIDE_LOG ||
                   cq->ring.stride_log == PIB_CQE_TS_STRIDE_LOG, "CQE stride",
                   cq->ring.stride_log);
    PIB_LOAD_CHECK(cq->ring.npages == pib_cq_pages(cq->ring.depth, cq->ring.stride_log),
                   "CQ pages", cq->ring.npages);
    PIB_LOAD_CHECK(cq->ci_record == cq->ring.pages[cq->ring.npages - 1], "CQ record",
                   cq->ci_record);
    PIB_LOAD_CHECK(cq->arm <= PIB_CQ_ARMED_SOLICITED, "CQ arm", cq->arm);
    PIB_LOAD_CHECK(cq->arm != PIB_CQ_DISARMED || cq->mod_held == 0, "CQ moderation",
                   cq->mod_held);
    if (cq->notify_pending) {       /* an event to raise: on the list again */
        QTAILQ_INSERT_TAIL(&s->notify_list, cq, notify_next);
    }
    return true;
}

static void pib_mig_cq_discard(PibState *s, void *obj)
{
    PibCq *cq = obj;

    timer_free(cq->mod_timer);
    pib_ring_free(s, &cq->ring);
    g_free(cq);
}

static const PibObjType pib_cq_type = {
    .name = "CQ",
    .vmsd = &vmstate_pib_cq,
    .size = sizeof(PibCq),
    .alloc = pib_mig_cq_alloc,
    .check = pib_mig_cq_check,
    .discard = pib_mig_cq_discard,
};
PIB_TABLE_INFO(cq);

/* SRQs */

/* A receive ring's doorbell record, if any, starts the page after its slots (pib_wqe.h). */
static bool pib_mig_dbrec_check(const PibRing *r, uint64_t dbrec, const char *what)
{
    PIB_LOAD_CHECK(!dbrec || (r->depth &&
                              r->npages == pib_recv_ring_pages(r->depth, r->stride_log, true) &&
                              dbrec == r->pages[r->npages - 1]), what, dbrec);
    return true;
}

static bool pib_mig_srq_check(PibState *s, void *obj, uint32_t n)
{
    PibSrq *srq = obj;

    PIB_LOAD_CHECK(srq->srqn == n, "SRQ number", srq->srqn);
    PIB_LOAD_CHECK(pib_uar_valid(s, srq->uar), "SRQ's UAR", srq->uar);
    PIB_LOAD_CHECK(srq->ring.depth && srq->ring.depth <= PIB_MAX_QP_WR, "SRQ depth",
                   srq->ring.depth);
    PIB_LOAD_CHECK(srq->max_sge <= pib_slot_max_sge(srq->ring.stride_log,
                                                     sizeof(struct pib_recv_wqe)),
                   "SRQ SGEs", srq->max_sge);
    PIB_LOAD_CHECK(!srq->xrcd == !srq->cq, "XRC SRQ's CQ", srq->xrcd);
    if (!pib_mig_dbrec_check(&srq->ring, srq->dbrec, "SRQ doorbell record")) {
        return false;
    }
    if (!pib_load_pd_ref(s, srq->pdn, "SRQ's PD") ||
        !pib_load_xrcd_ref(s, srq->xrcd, "SRQ's XRCD")) {
        return false;
    }
    if (srq->cq) {
        srq->cq->refcnt++;
    }
    return true;
}

static void pib_mig_srq_discard(PibState *s, void *obj)
{
    PibSrq *srq = obj;

    pib_ring_free(s, &srq->ring);
    g_free(srq);
}

static const PibObjType pib_srq_type = {
    .name = "SRQ",
    .vmsd = &vmstate_pib_srq,
    .size = sizeof(PibSrq),
    .check = pib_mig_srq_check,
    .discard = pib_mig_srq_discard,
};
PIB_TABLE_INFO(srq);

/* QPs */

static void *pib_mig_qp_alloc(PibState *s)
{
    PibQp *qp = g_new0(PibQp, 1);

    qp->s = s;
    pib_qp_init_engines(qp);
    return qp;
}

static bool pib_qp_type_ok(uint8_t type)
{
#define PIB_QPT_CASE(id, value) case value:
    switch (type) {
    PIB_QP_TYPES(PIB_QPT_CASE)
        return true;
    }
    return false;
#undef PIB_QPT_CASE
}

static bool pib_qp_state_ok(uint8_t state)
{
#define PIB_QPS_CASE(id, value) case value:
    switch (state) {
    PIB_QP_STATES(PIB_QPS_CASE)
        return true;
    }
    return false;
#undef PIB_QPS_CASE
}

/* A QP's work queue: within the device's limits, its SGEs within its slots. */
static bool pib_mig_wq_check(const PibWq *wq, uint32_t stride_min, uint32_t hdr, const char *what)
{
    if (!pib_mig_dbrec_check(&wq->ring, wq->dbrec, what)) {
        return false;
    }
    if (wq->ring.depth == 0) {
        PIB_LOAD_CHECK(wq->max_sge == 0, what, wq->max_sge);
        return true;
    }
    PIB_LOAD_CHECK(wq->ring.depth <= PIB_MAX_QP_WR && wq->ring.stride_log >= stride_min,
                   what, wq->ring.depth);
    PIB_LOAD_CHECK(wq->max_sge <= pib_slot_max_sge(wq->ring.stride_log, hdr), what,
                   wq->max_sge);
    return true;
}

static bool pib_mig_qp_check(PibState *s, void *obj, uint32_t n)
{
    PibQp *qp = obj;
    PibResp *r = &qp->resp;
    uint32_t i;

    PIB_LOAD_CHECK(qp->qpn == n, "QP number", qp->qpn);
    PIB_LOAD_CHECK(pib_qp_type_ok(qp->type), "QP type", qp->type);
    PIB_LOAD_CHECK(pib_qp_state_ok(qp->state), "QP state", qp->state);
    PIB_LOAD_CHECK(n >= PIB_QPN_FIRST || qp->type == n, "special QP's type", qp->type);
    PIB_LOAD_CHECK(pib_uar_valid(s, qp->uar), "QP's UAR", qp->uar);
    if (!pib_mig_wq_check(&qp->sq, PIB_SQ_STRIDE_LOG_MIN, sizeof(struct pib_send_wqe), "QP SQ") ||
        !pib_mig_wq_check(&qp->rq, PIB_RQ_STRIDE_LOG_MIN, sizeof(struct pib_recv_wqe), "QP RQ")) {
        return false;
    }
    PIB_LOAD_CHECK(qp->sq.dbrec == 0, "SQ doorbell record", qp->sq.dbrec);
    PIB_LOAD_CHECK(qp->max_inline <= PIB_MAX_INLINE_DATA, "QP inline", qp->max_inline);
    PIB_LOAD_CHECK(qp->path_mtu >= 1 && qp->path_mtu <= PIB_PORT_MTU_ENUM, "QP path MTU",
                   qp->path_mtu);
    PIB_LOAD_CHECK(qp->max_rd_atomic <= PIB_MAX_RD_ATOM &&
                   qp->max_dest_rd_atomic <= PIB_MAX_RD_ATOM, "QP rd_atomic",
                   qp->max_rd_atomic);
    PIB_LOAD_CHECK(qp->port_num == PIB_PORT_NUM, "QP port", qp->port_num);
    PIB_LOAD_CHECK(qp->pkey_index < PIB_PKEY_TBL_LEN, "QP P_Key index", qp->pkey_index);
    PIB_LOAD_CHECK(qp->av.sgid_index < PIB_GID_TBL_LEN, "QP SGID index", qp->av.sgid_index);
    PIB_LOAD_CHECK(qp->timeout < 32 && qp->min_rnr_timer < 32, "QP timers", qp->timeout);
    for (i = 0; i < qp->meta_size; i++) {
        PIB_LOAD_CHECK(qp->meta[i].state <= PIB_WQE_ERROR &&
                       qp->meta[i].opcode < PIB_WQE_OPCODE_MAX, "WQE window entry", i);
    }
    PIB_LOAD_CHECK(qp->req.wqe_max - qp->sq.ci <= qp->meta_size &&
                   qp->req.wqe_idx - qp->sq.ci <= qp->req.wqe_max - qp->sq.ci,
                   "requester position", qp->req.wqe_idx);
    PIB_LOAD_CHECK(qp->req.rd_atomic <= PIB_MAX_RD_ATOM, "requester rd_atomic",
                   qp->req.rd_atomic);
    PIB_LOAD_CHECK(r->opcode >= -1 && r->opcode <= 0xff, "responder opcode", r->opcode);
    PIB_LOAD_CHECK(r->rwqe.num_sge <= PIB_MAX_SGE, "receive WQE SGEs", r->rwqe.num_sge);
    PIB_LOAD_CHECK(r->res_next < PIB_MAX_RD_ATOM, "responder resource", r->res_next);
    for (i = 0; i < PIB_MAX_RD_ATOM; i++) {
        PIB_LOAD_CHECK(r->res[i].state <= PIB_RES_DONE, "responder resource state", i);
    }
    /* What CREATE_QP checked: the objects it names exist, and they count it in. */
    PIB_LOAD_CHECK(qp->type == PIB_QPT_XRC_TGT || qp->scq, "QP without send CQ", n);
    PIB_LOAD_CHECK(!qp->srq || !qp->rcq || qp->type != PIB_QPT_XRC_TGT, "XRC target's CQ", n);
    PIB_LOAD_CHECK(!r->rwqe_srq || r->rwqe_valid, "receive WQE's SRQ", n);
    if (!pib_load_pd_ref(s, qp->pdn, "QP's PD") ||
        !pib_load_xrcd_ref(s, qp->xrcd, "QP's XRCD")) {
        return false;
    }
    if (qp->scq) {
        qp->scq->refcnt++;
    }
    if (qp->rcq) {
        qp->rcq->refcnt++;
    }
    if (qp->srq) {
        qp->srq->refcnt++;
    }
    qp->req.wqe_valid = false;      /* the engines read their WQEs again */
    qp->comp.wqe_valid = false;
    return true;
}

static void pib_mig_qp_discard(PibState *s, void *obj)
{
    PibQp *qp = obj;

    pib_qp_fini_engines(qp);
    pib_ring_free(s, &qp->sq.ring);
    pib_ring_free(s, &qp->rq.ring);
    g_free(qp->meta);
    g_free(qp);
}

static const PibObjType pib_qp_type = {
    .name = "QP",
    .vmsd = &vmstate_pib_qp,
    .size = sizeof(PibQp),
    .alloc = pib_mig_qp_alloc,
    .check = pib_mig_qp_check,
    .discard = pib_mig_qp_discard,
};
PIB_TABLE_INFO(qp);

/*
 * Packets received and not yet processed (the receive queue): a be32 count, then each as a
 * be32 length and its bytes (link header and IB packet).
 */
static int pib_put_rxq(QEMUFile *f, void *pv, size_t size, const VMStateField *field,
                       JSONWriter *vmdesc)
{
    PibState *s = container_of(pv, PibState, rxq);
    PibPacket *p;

    qemu_put_be32(f, s->rxq_len);
    QSIMPLEQ_FOREACH(p, &s->rxq, next) {
        qemu_put_be32(f, p->len);
        qemu_put_buffer(f, p->data, p->len);
    }
    return 0;
}

static int pib_get_rxq(QEMUFile *f, void *pv, size_t size, const VMStateField *field)
{
    PibState *s = container_of(pv, PibState, rxq);
    uint32_t n = qemu_get_be32(f), len, i;
    PibPacket *p;

    if (n > PIB_RXQ_MAX) {
        pib_load_fail("received packets", n);
        return -EINVAL;
    }
    for (i = 0; i < n; i++) {
        len = qemu_get_be32(f);
        if (len < PIB_LINK_HDR_LEN || len > PIB_LINK_HDR_LEN + PIB_LINK_MAX_PAYLOAD) {
            pib_load_fail("received packet length", len);
            return -EINVAL;
        }
        p = pib_packet_new(s, len - PIB_LINK_HDR_LEN);
        qemu_get_buffer(f, p->data, len);
        p->len = len;
        QSIMPLEQ_INSERT_TAIL(&s->rxq, p, next);
        s->rxq_len++;
    }
    return qemu_file_get_error(f);
}

static const VMStateInfo pib_info_rxq = {
    .name = "pib-rxq",
    .get = pib_get_rxq,
    .put = pib_put_rxq,
};

/*
 * The device
 */

static bool pib_mcast_check(PibState *s)
{
    const PibMcastGroup *g;
    uint32_t i, j;

    for (i = 0; i < PIB_MAX_MCAST_GRP; i++) {
        g = &s->mcast[i];
        PIB_LOAD_CHECK(g->nqps <= PIB_MAX_MCAST_QP, "multicast group size", g->nqps);
        for (j = 0; j < g->nqps; j++) {
            PIB_LOAD_CHECK(pib_qp_lookup(s, g->qpns[j]), "multicast member", g->qpns[j]);
        }
    }
    return true;
}

/*
 * Right after the groups load (the QPs are in by then): a QP's destruction walks its groups,
 * so bad ones are not left for the reset that follows a failed load.
 */
static bool pib_mcast_loaded_ok(void *opaque, int version_id)
{
    PibState *s = opaque;

    if (!pib_loading || pib_mcast_check(s)) {
        return true;
    }
    memset(s->mcast, 0, sizeof(s->mcast));
    return false;
}

static bool pib_queues_ok(PibState *s)
{
    const PibEventQueue *eq[] = { &s->aeq, &s->ceq };
    unsigned i;

    if (!(s->regs.status & PIB_STATUS_READY)) {
        PIB_LOAD_CHECK(!s->aq.depth && !s->aeq.depth && !s->ceq.depth, "queues while disabled",
                       s->aq.depth);
        return true;
    }
    PIB_LOAD_CHECK(is_power_of_2(s->aq.depth) && s->aq.depth <= PIB_QUEUE_MAX_DEPTH,
                   "admin queue depth", s->aq.depth);
    PIB_LOAD_CHECK(s->aq.sq_pi - s->aq.sq_ci <= s->aq.depth, "admin queue indices",
                   s->aq.sq_pi);
    for (i = 0; i < ARRAY_SIZE(eq); i++) {
        PIB_LOAD_CHECK((i == 1 && eq[i]->depth == 0) ||
                       (is_power_of_2(eq[i]->depth) && eq[i]->depth <= PIB_QUEUE_MAX_DEPTH),
                       "event queue depth", eq[i]->depth);
        PIB_LOAD_CHECK(eq[i]->pi - eq[i]->ci <= eq[i]->depth, "event queue indices",
                       eq[i]->pi);
    }
    return true;
}

/*
 * The port's MOVE notice (PibMoveNotice, fabric/pib-link-move.c decides when): only a port
 * with a peer that greeted us with its token has anyone to tell.
 */
static bool pib_move_announce(void *opaque, uint32_t wait_ms)
{
    PibState *s = opaque;

    if (wait_ms && !(pib_port_link_up(s) && s->link.peer_token)) {
        return false;
    }
    pib_link_move_announce(&s->link, wait_ms);
    return true;
}

static int pib_pre_save(void *opaque)
{
    PibState *s = opaque;

    pib_link_sync_counters(s);
    s->mig_node_guid = s->node_guid;
    s->mig_dev_caps = pib_dev_caps(s);
    s->mig_dm_size = s->dm_size;
    pib_link_move_save(&s->link, s->port.sm, &s->mig_link);
    /* The machine may be about to move: the notice again. */
    pib_move_notice_save(&s->move_notice);
    return 0;
}

/* Every object goes, as at a function reset: the stream brings the device's own. */
static int pib_pre_load(void *opaque)
{
    PibState *s = opaque;

    pib_objects_reset(s);
    pib_rx_purge(s);
    s->mtt_pages = 0;
    s->mig_dev_caps = s->mig_dm_size = UINT32_MAX;     /* a stream without them is refused */
    pib_loading = s;
    return 0;
}

static int pib_post_load(void *opaque, int version_id)
{
    PibState *s = opaque;
    PibMw *mw;
    uint32_t n;

    pib_loading = NULL;
    if (!s->mig_node_guid) {
        pib_load_fail("node GUID", 0);
        goto bad;
    }
    pib_set_node_guid(s, s->mig_node_guid);
    /*
     * The guest's driver learned at probe what the device can do (QUERY_DEVICE): a destination
     * configured otherwise (recv-dbrec, dm-size) is not the device it probed.  QEMU's own
     * checks catch some differences first (dm-size changes a RAM block's size); this one is
     * the device's, at the end of the stream.
     */
    if (s->mig_dev_caps != pib_dev_caps(s)) {
        pib_load_fail("device capabilities: the destination's pib-hca is configured otherwise "
                      "(recv-dbrec?); the source's were", s->mig_dev_caps);
        goto bad;
    }
    if (s->mig_dm_size != s->dm_size) {
        pib_load_fail("device memory size: the destination's dm-size differs; the source's was",
                      s->mig_dm_size);
        goto bad;
    }
    if (!pib_queues_ok(s) || !test_bit(0, s->uar_bitmap) ||
        s->next_qpn >= PIB_MAX_QP || s->mig_link.port_sm >= PIB_PSM__MAX) {
        goto bad;
    }
    PIB_TABLE_FOREACH(&s->mws, n, mw) {
        if (mw->bound && mw->type == 2 && !pib_qp_lookup(s, mw->qpn)) {
            pib_load_fail("type 2 window's QP", mw->qpn);
            goto bad;
        }
    }
    /*
     * The port the guest knew: if it was up, it stays so while the link waits for the old peer
     * (its token saved with us); if it was down, the new link decides (pib_link_move_load).
     */
    if (pib_link_move_load(&s->link, &s->mig_link)) {
        s->port.sm = s->mig_link.port_sm;
        s->regs.link_state = PIB_LINK_UP;
    }
    /* The link's time spent waiting goes on from the saved count. */
    s->xmit_wait_base_ns = pib_link_xmit_wait_ns(&s->link) -
                           s->counters[PIB_CNT_XMIT_WAIT_US] * SCALE_US;
    s->mig_resume = true;
    trace_pib_vmstate_loaded(pib_table_count(&s->qps), pib_table_count(&s->cqs),
                             pib_table_count(&s->mrs), s->rxq_len);
    return 0;

bad:
    /* Nothing half-loaded stays: the device is as after a function reset. */
    pib_reset(s, "migration stream refused");
    return -EINVAL;
}

/* Congestion control (fabric/pib-cc.c): only when an SM set something. */
static bool pib_cc_state_needed(void *opaque)
{
    PibState *s = opaque;

    return pib_cc_needed(&s->mgmt.cc);
}

/* What the guest's driver was told at probe: always sent, checked by pib_post_load(). */
static const VMStateDescription vmstate_pib_hca_config = {
    .name = "pib-hca/config",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(mig_dev_caps, PibState),
        VMSTATE_UINT32(mig_dm_size, PibState),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_pib_hca_cc = {
    .name = "pib-hca/cc",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = pib_cc_state_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_STRUCT(mgmt.cc, PibState, 1, vmstate_pib_mgmt_cc, PibMgmtCc),
        VMSTATE_END_OF_LIST()
    },
};

/*
 * Version 2: device memory (its allocations before the MRs, and an MR's DM).  A version 1
 * stream, from a pib before it, is refused: QEMU says which versions it takes.
 */
const VMStateDescription pib_vmstate = {
    .name = "pib-hca",
    .version_id = 2,
    .minimum_version_id = 2,
    .pre_save = pib_pre_save,
    .pre_load = pib_pre_load,
    .post_load = pib_post_load,
    .subsections = (const VMStateDescription *[]) {     /* 7.2 and 10.0 both take it */
        &vmstate_pib_inject,
        &vmstate_pib_hca_cc,
        &vmstate_pib_hca_config,
        NULL
    },
    .fields = (const VMStateField[]) {
        VMSTATE_PCI_DEVICE(parent_obj, PibState),
        VMSTATE_MSIX(parent_obj, PibState),
#define PIB_VMSTATE_REG(id, field) VMSTATE_UINT32(regs.field, PibState),
        PIB_REGS(PIB_VMSTATE_REG)
#undef PIB_VMSTATE_REG
        VMSTATE_UINT32(aq.depth, PibState),
        VMSTATE_UINT64(aq.sq_base, PibState),
        VMSTATE_UINT64(aq.cq_base, PibState),
        VMSTATE_UINT32(aq.sq_pi, PibState),
        VMSTATE_UINT32(aq.sq_ci, PibState),
        VMSTATE_UINT32(aeq.depth, PibState),
        VMSTATE_UINT64(aeq.base, PibState),
        VMSTATE_UINT32(aeq.pi, PibState),
        VMSTATE_UINT32(aeq.ci, PibState),
        VMSTATE_UINT64(aeq.lost, PibState),
        VMSTATE_UINT32(ceq.depth, PibState),
        VMSTATE_UINT64(ceq.base, PibState),
        VMSTATE_UINT32(ceq.pi, PibState),
        VMSTATE_UINT32(ceq.ci, PibState),
        VMSTATE_UINT64(ceq.lost, PibState),
        VMSTATE_BITMAP(uar_bitmap, PibState, 0, mig_num_uars),
        /* In this order: each table's objects name only objects of the tables before it. */
        PIB_VMSTATE_TABLE(pds, pd),
        PIB_VMSTATE_TABLE(xrcds, xrcd),
        PIB_VMSTATE_TABLE(dms, dm),
        PIB_VMSTATE_TABLE(mrs, mr),
        PIB_VMSTATE_TABLE(mws, mw),
        PIB_VMSTATE_TABLE(cqs, cq),
        PIB_VMSTATE_TABLE(srqs, srq),
        PIB_VMSTATE_TABLE(qps, qp),
        VMSTATE_UINT32(next_qpn, PibState),
        VMSTATE_UINT64_ARRAY(counters, PibState, PIB_CNT_MAX),
        VMSTATE_STRUCT_ARRAY(mcast, PibState, PIB_MAX_MCAST_GRP, 1, vmstate_pib_mcast_group,
                             PibMcastGroup),
        VMSTATE_VALIDATE("multicast groups", pib_mcast_loaded_ok),
        VMSTATE_UINT64(mig_node_guid, PibState),
        VMSTATE_STRUCT(mig_link, PibState, 1, vmstate_pib_link_move, PibLinkMoveSaved),
        VMSTATE_BOOL(port.disabled, PibState),
        VMSTATE_UINT32(port.link_downs, PibState),
        VMSTATE_STRUCT(port.mgmt, PibState, 1, vmstate_pib_mgmt_port, PibMgmtPort),
        PIB_VMSTATE_BYTES(PibState, mgmt.node_desc),   /* as SET_NODE_DESC set it */
        VMSTATE_UINT64(mgmt.next_tid, PibState),
        {
            .name = "rxq",
            .info = &pib_info_rxq,
            .flags = VMS_SINGLE,
            .offset = offsetof(PibState, rxq),
        },
        VMSTATE_END_OF_LIST()
    },
};

/*
 * Running and stopped
 */


static void pib_vm_state_change(void *opaque, bool running, RunState state)
{
    PibState *s = opaque;
    PibQp *qp;
    uint32_t n;

    trace_pib_vm_state(running, state);
    s->stopped = !running;
    pib_move_notice_run_state(&s->move_notice, running, s->mig_resume);
    if (!running) {
        pib_link_rx_pause(&s->link, true);
        return;
    }
    if (s->mig_resume) {
        /*
         * Loaded: every QP looks for work again (a doorbell may have come just before the
         * save), and the CQs on the event list raise theirs.
         */
        s->mig_resume = false;
        trace_pib_vmstate_resume(pib_port_sm_names[s->mig_link.port_sm],
                                 pib_port_sm_names[s->port.sm]);
        PIB_TABLE_FOREACH(&s->qps, n, qp) {
            pib_qp_schedule(qp);
        }
        pib_cq_notify_run(s);
    }
    pib_link_rx_pause(&s->link, false);
    /* What the bottom halves left while stopped (they return at once then). */
    qemu_bh_schedule(s->admin_bh);
    qemu_bh_schedule(s->rx_bh);
    qemu_bh_schedule(s->work_bh);
}

void pib_vmstate_realize(PibState *s)
{
    s->mig_num_uars = PIB_NUM_UARS;
    s->vm_change = qemu_add_vm_change_state_handler(pib_vm_state_change, s);
    pib_move_notice_init(&s->move_notice, pib_move_announce, s);
    s->stopped = !runstate_is_running();
    if (s->stopped) {
        pib_link_rx_pause(&s->link, true);
    }
}

void pib_vmstate_unrealize(PibState *s)
{
    qemu_del_vm_change_state_handler(s->vm_change);
    pib_move_notice_fini(&s->move_notice);
}
