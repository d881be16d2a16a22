/*
 * pib HCA device model - data-path objects
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Protection domains, memory regions and windows, completion queues, shared
 * receive queues and queue pairs: the
 * tables that hold them, the admin commands that create and destroy them
 * (include/pib_hw.h, docs/hardware.md "Objects and commands"), the page lists
 * that describe their guest memory, and every access the engines make
 * through an MR (key, PD, access right and range checks, then DMA).
 *
 * Each object lives in a fixed-size table indexed by its number, so every
 * count the guest can ask for is bounded by a limit QUERY_DEVICE reports.
 * Number 0 is never handed out.  An object is referenced by others through a
 * count, and destroying a referenced object answers BUSY (PD <- MR, MW, SRQ,
 * QP; MR <- bound MW; CQ <- QP; SRQ <- QP).
 *
 * Layout: helpers (page lists, rings, lookups), then one section per object
 * type, then memory access, then reset.
 */

#include "qemu/osdep.h"
#include "qemu/bitmap.h"
#include "qemu/bswap.h"
#include "qemu/host-utils.h"

#include "pib-internal.h"
#include "trace.h"

/*
 * Helpers
 */

/* An admin command refused: say why in the trace, answer the status. */
static uint8_t pib_reject(const char *cmd, const char *why, uint64_t val,
                          uint8_t status)
{
    trace_pib_cmd_reject(cmd, why, val, status);
    return status;
}

/*
 * Copy a page list from guest memory: npages little-endian u64 addresses of
 * 4 KiB pages.  The caller bounded npages.  Returns an admin status.
 */
static uint8_t pib_pbl_load(PibState *s, uint64_t pbl_addr, uint32_t npages,
                            uint64_t **pagesp, const char *cmd)
{
    uint64_t *pages;
    uint32_t i, chunk;

    *pagesp = NULL;
    if (npages == 0) {
        return PIB_AQ_OK;
    }
    pages = g_new(uint64_t, npages);
    for (i = 0; i < npages; i += chunk) {
        chunk = MIN(npages - i, PIB_PAGE_SIZE / sizeof(uint64_t));
        if (!pib_dma_read(s, pbl_addr + (uint64_t)i * sizeof(uint64_t),
                          &pages[i], chunk * sizeof(uint64_t), "page list")) {
            g_free(pages);
            return pib_reject(cmd, "page list unreadable", pbl_addr,
                              PIB_AQ_DMA_ERROR);
        }
    }
    for (i = 0; i < npages; i++) {
        pages[i] = le64_to_cpu(pages[i]);
        if (pages[i] & (PIB_PAGE_SIZE - 1)) {
            g_free(pages);
            return pib_reject(cmd, "page not 4 KiB aligned", i,
                              PIB_AQ_BAD_PARAM);
        }
    }
    *pagesp = pages;
    return PIB_AQ_OK;
}

/* Pages a ring of depth entries of 2^stride_log bytes occupies. */
static uint32_t pib_ring_pages(uint32_t depth, uint32_t stride_log)
{
    return DIV_ROUND_UP((uint64_t)depth << stride_log, PIB_PAGE_SIZE);
}

/* Guest address of entry idx (free-running) of a ring. */
uint64_t pib_ring_addr(const PibRing *r, uint32_t idx)
{
    uint64_t off = (uint64_t)(idx & (r->depth - 1)) << r->stride_log;

    return r->pages[off >> PIB_PAGE_SHIFT] + (off & (PIB_PAGE_SIZE - 1));
}

static bool pib_uar_valid(PibState *s, uint32_t uar)
{
    return uar < PIB_NUM_UARS && test_bit(uar, s->uar_bitmap);
}

static PibPd *pib_pd_lookup(PibState *s, uint32_t pdn)
{
    return pdn >= 1 && pdn <= PIB_MAX_PD ? s->pd[pdn] : NULL;
}

PibCq *pib_cq_lookup(PibState *s, uint32_t cqn)
{
    return cqn >= 1 && cqn <= PIB_MAX_CQ ? s->cq[cqn] : NULL;
}

PibSrq *pib_srq_lookup(PibState *s, uint32_t srqn)
{
    return srqn >= 1 && srqn <= PIB_MAX_SRQ ? s->srq[srqn] : NULL;
}

PibQp *pib_qp_lookup(PibState *s, uint32_t qpn)
{
    return qpn >= 1 && qpn < PIB_QPN_LIMIT ? s->qp[qpn] : NULL;
}

/* The MR a key names: the index must hold an MR and the key byte match. */
static PibMr *pib_mr_lookup(PibState *s, uint32_t key)
{
    uint32_t idx = key >> 8;
    PibMr *mr;

    if (idx < 1 || idx > PIB_MAX_MR) {
        return NULL;
    }
    mr = s->mr[idx];
    return mr && mr->key == key ? mr : NULL;
}

/* The window an rkey's index names, whatever its key byte, or NULL. */
static PibMw *pib_mw_by_index(PibState *s, uint32_t key)
{
    uint32_t idx = (key >> 8) - PIB_MW_INDEX_BASE;

    return (key >> 8) > PIB_MW_INDEX_BASE && idx <= PIB_MAX_MW ?
           s->mw[idx] : NULL;
}

/* Lowest free slot in 1..max of a pointer table, or 0. */
static uint32_t pib_table_alloc(void **table, uint32_t max)
{
    uint32_t i;

    for (i = 1; i <= max; i++) {
        if (!table[i]) {
            return i;
        }
    }
    return 0;
}

/* Does any QP, CQ or SRQ still name this UAR page?  (DEALLOC_UAR: BUSY.) */
bool pib_uar_has_objects(PibState *s, uint32_t uar)
{
    uint32_t i;

    for (i = 1; i < PIB_QPN_LIMIT; i++) {
        if (s->qp[i] && s->qp[i]->uar == uar) {
            return true;
        }
    }
    for (i = 1; i <= PIB_MAX_CQ; i++) {
        if (s->cq[i] && s->cq[i]->uar == uar) {
            return true;
        }
    }
    for (i = 1; i <= PIB_MAX_SRQ; i++) {
        if (s->srq[i] && s->srq[i]->uar == uar) {
            return true;
        }
    }
    return false;
}

/*
 * Protection domains
 */

uint8_t pib_cmd_create_pd(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    uint32_t pdn = pib_table_alloc((void **)s->pd, PIB_MAX_PD);
    PibPd *pd;

    if (!pdn) {
        return pib_reject("CREATE_PD", "table full", PIB_MAX_PD,
                          PIB_AQ_NO_RESOURCES);
    }
    pd = g_new0(PibPd, 1);
    pd->pdn = pdn;
    s->pd[pdn] = pd;
    trace_pib_obj("create", "PD", pdn);
    res->result0 = pdn;
    return PIB_AQ_OK;
}

uint8_t pib_cmd_destroy_pd(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    uint32_t pdn = le32_to_cpu(cmd->in.obj.num);
    PibPd *pd = pib_pd_lookup(s, pdn);

    if (!pd) {
        return pib_reject("DESTROY_PD", "no such PD", pdn,
                          PIB_AQ_BAD_RESOURCE);
    }
    if (pd->refcnt) {
        return pib_reject("DESTROY_PD", "in use", pd->refcnt, PIB_AQ_BUSY);
    }
    s->pd[pdn] = NULL;
    g_free(pd);
    trace_pib_obj("destroy", "PD", pdn);
    return PIB_AQ_OK;
}

/*
 * Memory regions
 */

#define PIB_ACCESS_ALL  (PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_REMOTE_WRITE | \
                         PIB_ACCESS_REMOTE_READ | PIB_ACCESS_REMOTE_ATOMIC | \
                         PIB_ACCESS_MW_BIND)

/*
 * REG_MR.  Every field is checked before anything is allocated: the page
 * count must be exactly what [iova, iova + length) spans, and it must fit the
 * device's page list budget.
 */
uint8_t pib_cmd_reg_mr(PibState *s, const struct pib_admin_cmd *cmd,
                       PibAdminResult *res)
{
    const struct pib_cmd_reg_mr *in = &cmd->in.reg_mr;
    uint32_t pdn = le32_to_cpu(in->pdn);
    uint32_t access = le32_to_cpu(in->access);
    uint32_t flags = le32_to_cpu(in->flags);
    uint64_t iova = le64_to_cpu(in->iova);
    uint64_t length = le64_to_cpu(in->length);
    uint32_t npages = le32_to_cpu(in->npages);
    uint64_t need = 0;
    uint64_t *pages = NULL;
    PibPd *pd = pib_pd_lookup(s, pdn);
    uint32_t idx;
    uint8_t status;
    PibMr *mr;

    if (!pd) {
        return pib_reject("REG_MR", "no such PD", pdn, PIB_AQ_BAD_RESOURCE);
    }
    if (access & ~PIB_ACCESS_ALL) {
        return pib_reject("REG_MR", "unknown access bits", access,
                          PIB_AQ_BAD_PARAM);
    }
    /* IBTA: remote write and atomic access need local write (11.2.8.2). */
    if ((access & (PIB_ACCESS_REMOTE_WRITE | PIB_ACCESS_REMOTE_ATOMIC)) &&
        !(access & PIB_ACCESS_LOCAL_WRITE)) {
        return pib_reject("REG_MR", "remote write without local write",
                          access, PIB_AQ_BAD_PARAM);
    }
    if (flags & ~PIB_MR_F_PHYS) {
        return pib_reject("REG_MR", "unknown flags", flags, PIB_AQ_BAD_PARAM);
    }
    if (flags & PIB_MR_F_PHYS) {
        /* Identity map of guest-physical memory: no page list. */
        if (iova != 0 || npages != 0) {
            return pib_reject("REG_MR", "physical MR with iova or pages",
                              iova | npages, PIB_AQ_BAD_PARAM);
        }
        length = UINT64_MAX;
    } else {
        if (length == 0 || length > PIB_MAX_MR_SIZE ||
            iova + length < iova) {
            return pib_reject("REG_MR", "bad length", length,
                              PIB_AQ_BAD_PARAM);
        }
        need = DIV_ROUND_UP((iova & (PIB_PAGE_SIZE - 1)) + length,
                            PIB_PAGE_SIZE);
        if (npages != need) {
            return pib_reject("REG_MR", "npages does not match the range",
                              npages, PIB_AQ_BAD_PARAM);
        }
        if (npages > PIB_MAX_MTT_PAGES - s->mtt_pages) {
            return pib_reject("REG_MR", "page list budget exhausted", npages,
                              PIB_AQ_NO_RESOURCES);
        }
    }
    idx = pib_table_alloc((void **)s->mr, PIB_MAX_MR);
    if (!idx) {
        return pib_reject("REG_MR", "table full", PIB_MAX_MR,
                          PIB_AQ_NO_RESOURCES);
    }
    status = pib_pbl_load(s, le64_to_cpu(in->pbl_addr), npages, &pages,
                          "REG_MR");
    if (status != PIB_AQ_OK) {
        return status;
    }

    /* A new key byte for every reuse of the index: stale keys fail. */
    s->mr_key[idx]++;
    mr = g_new0(PibMr, 1);
    mr->key = idx << 8 | s->mr_key[idx];
    mr->pdn = pdn;
    mr->access = access;
    mr->flags = flags;
    mr->iova = iova;
    mr->length = length;
    mr->npages = npages;
    mr->pages = pages;
    s->mr[idx] = mr;
    s->mtt_pages += npages;
    pd->refcnt++;
    trace_pib_mr_reg(mr->key, pdn, access, iova, length, npages);
    res->result0 = mr->key;
    res->result1 = mr->key;
    return PIB_AQ_OK;
}

static void pib_mr_free(PibState *s, PibMr *mr)
{
    PibPd *pd = pib_pd_lookup(s, mr->pdn);

    if (pd) {
        pd->refcnt--;
    }
    s->mtt_pages -= mr->npages;
    s->mr[mr->key >> 8] = NULL;
    g_free(mr->pages);
    g_free(mr);
}

uint8_t pib_cmd_dereg_mr(PibState *s, const struct pib_admin_cmd *cmd,
                         PibAdminResult *res)
{
    uint32_t key = le32_to_cpu(cmd->in.obj.num);
    PibMr *mr = pib_mr_lookup(s, key);

    if (!mr) {
        return pib_reject("DEREG_MR", "no such key", key,
                          PIB_AQ_BAD_RESOURCE);
    }
    if (mr->mw_bound) {
        return pib_reject("DEREG_MR", "windows bound to it", mr->mw_bound,
                          PIB_AQ_BUSY);
    }
    trace_pib_obj("destroy", "MR", key);
    pib_mr_free(s, mr);
    return PIB_AQ_OK;
}

/*
 * Memory windows (bound by BIND_MW WQEs: pib_mw_bind() below)
 */

static void pib_mw_unbind(PibState *s, PibMw *mw)
{
    PibMr *mr = pib_mr_lookup(s, mw->mr_key);

    if (mw->bound && mr) {
        mr->mw_bound--;
    }
    mw->bound = false;
}

uint8_t pib_cmd_alloc_mw(PibState *s, const struct pib_admin_cmd *cmd,
                         PibAdminResult *res)
{
    uint32_t pdn = le32_to_cpu(cmd->in.alloc_mw.pdn);
    uint32_t type = le32_to_cpu(cmd->in.alloc_mw.type);
    PibPd *pd = pib_pd_lookup(s, pdn);
    uint32_t idx;
    PibMw *mw;

    if (!pd) {
        return pib_reject("ALLOC_MW", "no such PD", pdn, PIB_AQ_BAD_RESOURCE);
    }
    if (type != 1 && type != 2) {
        return pib_reject("ALLOC_MW", "bad type", type, PIB_AQ_BAD_PARAM);
    }
    idx = pib_table_alloc((void **)s->mw, PIB_MAX_MW);
    if (!idx) {
        return pib_reject("ALLOC_MW", "table full", PIB_MAX_MW,
                          PIB_AQ_NO_RESOURCES);
    }
    s->mw_key[idx]++;
    mw = g_new0(PibMw, 1);
    mw->key = (PIB_MW_INDEX_BASE + idx) << 8 | s->mw_key[idx];
    mw->alloc_key = mw->key;
    mw->pdn = pdn;
    mw->type = type;
    s->mw[idx] = mw;
    pd->refcnt++;
    trace_pib_obj("create", "MW", mw->key);
    res->result0 = mw->key;
    return PIB_AQ_OK;
}

static void pib_mw_free(PibState *s, PibMw *mw)
{
    PibPd *pd = pib_pd_lookup(s, mw->pdn);

    pib_mw_unbind(s, mw);
    if (pd) {
        pd->refcnt--;
    }
    s->mw[(mw->key >> 8) - PIB_MW_INDEX_BASE] = NULL;
    g_free(mw);
}

/*
 * DEALLOC_MW names the window by the rkey ALLOC_MW returned: binds happen in
 * userspace, so that is the only key the kernel knows.  The window's current
 * rkey is accepted too.  Another key byte on the same index is a stale handle
 * of an earlier window and fails.  A bound window is invalidated with it.
 */
uint8_t pib_cmd_dealloc_mw(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    uint32_t key = le32_to_cpu(cmd->in.obj.num);
    PibMw *mw = pib_mw_by_index(s, key);

    if (!mw) {
        return pib_reject("DEALLOC_MW", "no such window", key,
                          PIB_AQ_BAD_RESOURCE);
    }
    if (key != mw->alloc_key && key != mw->key) {
        return pib_reject("DEALLOC_MW", "stale key", key,
                          PIB_AQ_BAD_RESOURCE);
    }
    trace_pib_obj("destroy", "MW", key);
    pib_mw_free(s, mw);
    return PIB_AQ_OK;
}

/*
 * Completion queues (what a CQ does is in pib-cq.c)
 */

uint8_t pib_cmd_create_cq(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    const struct pib_cmd_create_cq *in = &cmd->in.create_cq;
    uint32_t depth = le32_to_cpu(in->depth);
    uint32_t npages = le32_to_cpu(in->npages);
    uint32_t uar = le32_to_cpu(in->uar);
    uint32_t ring_pages, cqn;
    uint64_t *pages;
    uint8_t status;
    PibCq *cq;

    if (depth < 2 || depth > PIB_MAX_CQE || !is_power_of_2(depth)) {
        return pib_reject("CREATE_CQ", "bad depth", depth, PIB_AQ_BAD_PARAM);
    }
    ring_pages = pib_ring_pages(depth, 5);
    if (npages != ring_pages + 1) {
        return pib_reject("CREATE_CQ", "npages is not ring + 1", npages,
                          PIB_AQ_BAD_PARAM);
    }
    if (!pib_uar_valid(s, uar)) {
        return pib_reject("CREATE_CQ", "UAR not allocated", uar,
                          PIB_AQ_BAD_PARAM);
    }
    cqn = pib_table_alloc((void **)s->cq, PIB_MAX_CQ);
    if (!cqn) {
        return pib_reject("CREATE_CQ", "table full", PIB_MAX_CQ,
                          PIB_AQ_NO_RESOURCES);
    }
    status = pib_pbl_load(s, le64_to_cpu(in->pbl_addr), npages, &pages,
                          "CREATE_CQ");
    if (status != PIB_AQ_OK) {
        return status;
    }

    cq = g_new0(PibCq, 1);
    cq->cqn = cqn;
    cq->uar = uar;
    cq->ring = (PibRing) {
        .depth = depth, .stride_log = 5, .npages = npages, .pages = pages,
    };
    cq->ci_record = pages[npages - 1];
    s->cq[cqn] = cq;
    trace_pib_cq_create(cqn, depth, uar);
    res->result0 = cqn;
    return PIB_AQ_OK;
}

uint8_t pib_cmd_destroy_cq(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    uint32_t cqn = le32_to_cpu(cmd->in.obj.num);
    PibCq *cq = pib_cq_lookup(s, cqn);

    if (!cq) {
        return pib_reject("DESTROY_CQ", "no such CQ", cqn,
                          PIB_AQ_BAD_RESOURCE);
    }
    if (cq->refcnt) {
        return pib_reject("DESTROY_CQ", "in use", cq->refcnt, PIB_AQ_BUSY);
    }
    pib_cq_forget(s, cq);
    s->cq[cqn] = NULL;
    g_free(cq->ring.pages);
    g_free(cq);
    trace_pib_obj("destroy", "CQ", cqn);
    return PIB_AQ_OK;
}

/*
 * Shared receive queues (their WQEs are taken in pib-qp.c)
 */

uint8_t pib_cmd_create_srq(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    const struct pib_cmd_create_srq *in = &cmd->in.create_srq;
    uint32_t pdn = le32_to_cpu(in->pdn);
    uint32_t depth = le32_to_cpu(in->depth);
    uint32_t limit = le32_to_cpu(in->limit);
    uint32_t uar = le32_to_cpu(in->uar);
    uint32_t npages = le32_to_cpu(in->npages);
    PibPd *pd = pib_pd_lookup(s, pdn);
    uint64_t *pages;
    uint32_t srqn;
    uint8_t status;
    PibSrq *srq;

    if (!pd) {
        return pib_reject("CREATE_SRQ", "no such PD", pdn,
                          PIB_AQ_BAD_RESOURCE);
    }
    if (depth < 1 || depth > PIB_MAX_SRQ_WR || !is_power_of_2(depth)) {
        return pib_reject("CREATE_SRQ", "bad depth", depth, PIB_AQ_BAD_PARAM);
    }
    if (in->stride_log < 4 || in->stride_log > PIB_PAGE_SHIFT) {
        return pib_reject("CREATE_SRQ", "bad stride", in->stride_log,
                          PIB_AQ_BAD_PARAM);
    }
    if (limit >= depth) {
        return pib_reject("CREATE_SRQ", "limit not below depth", limit,
                          PIB_AQ_BAD_PARAM);
    }
    if (npages != pib_ring_pages(depth, in->stride_log)) {
        return pib_reject("CREATE_SRQ", "npages does not match the ring",
                          npages, PIB_AQ_BAD_PARAM);
    }
    if (!pib_uar_valid(s, uar)) {
        return pib_reject("CREATE_SRQ", "UAR not allocated", uar,
                          PIB_AQ_BAD_PARAM);
    }
    srqn = pib_table_alloc((void **)s->srq, PIB_MAX_SRQ);
    if (!srqn) {
        return pib_reject("CREATE_SRQ", "table full", PIB_MAX_SRQ,
                          PIB_AQ_NO_RESOURCES);
    }
    status = pib_pbl_load(s, le64_to_cpu(in->pbl_addr), npages, &pages,
                          "CREATE_SRQ");
    if (status != PIB_AQ_OK) {
        return status;
    }

    srq = g_new0(PibSrq, 1);
    srq->srqn = srqn;
    srq->uar = uar;
    srq->pdn = pdn;
    srq->ring = (PibRing) {
        .depth = depth, .stride_log = in->stride_log, .npages = npages,
        .pages = pages,
    };
    srq->max_sge = MIN(PIB_MAX_SGE, ((1u << in->stride_log) -
                       sizeof(struct pib_recv_wqe)) / sizeof(struct pib_sge));
    srq->limit = limit;
    s->srq[srqn] = srq;
    pd->refcnt++;
    trace_pib_srq_create(srqn, depth, limit, uar);
    res->result0 = srqn;
    return PIB_AQ_OK;
}

/* MODIFY_SRQ: arm (or disarm) the limit; an SRQ cannot be resized. */
uint8_t pib_cmd_modify_srq(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    const struct pib_cmd_modify_srq *in = &cmd->in.modify_srq;
    uint32_t srqn = le32_to_cpu(in->srqn);
    uint32_t mask = le32_to_cpu(in->attr_mask);
    uint32_t limit = le32_to_cpu(in->limit);
    PibSrq *srq = pib_srq_lookup(s, srqn);

    if (!srq) {
        return pib_reject("MODIFY_SRQ", "no such SRQ", srqn,
                          PIB_AQ_BAD_RESOURCE);
    }
    if (mask & ~PIB_SRQ_ATTR_LIMIT) {
        return pib_reject("MODIFY_SRQ", "only the limit can change", mask,
                          PIB_AQ_BAD_PARAM);
    }
    if ((mask & PIB_SRQ_ATTR_LIMIT) && limit >= srq->ring.depth) {
        return pib_reject("MODIFY_SRQ", "limit not below depth", limit,
                          PIB_AQ_BAD_PARAM);
    }
    if (mask & PIB_SRQ_ATTR_LIMIT) {
        srq->limit = limit;
        trace_pib_srq_limit(srqn, limit, srq->pi - srq->ci);
    }
    return PIB_AQ_OK;
}

uint8_t pib_cmd_query_srq(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    uint32_t srqn = le32_to_cpu(cmd->in.obj.num);
    PibSrq *srq = pib_srq_lookup(s, srqn);

    if (!srq) {
        return pib_reject("QUERY_SRQ", "no such SRQ", srqn,
                          PIB_AQ_BAD_RESOURCE);
    }
    res->result0 = srq->limit;
    res->result1 = srq->ring.depth;
    return PIB_AQ_OK;
}

static void pib_srq_free(PibState *s, PibSrq *srq)
{
    PibPd *pd = pib_pd_lookup(s, srq->pdn);

    if (pd) {
        pd->refcnt--;
    }
    s->srq[srq->srqn] = NULL;
    g_free(srq->ring.pages);
    g_free(srq);
}

uint8_t pib_cmd_destroy_srq(PibState *s, const struct pib_admin_cmd *cmd,
                            PibAdminResult *res)
{
    uint32_t srqn = le32_to_cpu(cmd->in.obj.num);
    PibSrq *srq = pib_srq_lookup(s, srqn);

    if (!srq) {
        return pib_reject("DESTROY_SRQ", "no such SRQ", srqn,
                          PIB_AQ_BAD_RESOURCE);
    }
    if (srq->refcnt) {
        return pib_reject("DESTROY_SRQ", "in use", srq->refcnt, PIB_AQ_BUSY);
    }
    trace_pib_obj("destroy", "SRQ", srqn);
    pib_srq_free(s, srq);
    return PIB_AQ_OK;
}

/*
 * Queue pairs (their state machine is in pib-qp.c)
 */

#define PIB_QPC_F_ALL   (PIB_QPC_F_SQ_SIG_ALL | PIB_QPC_F_NO_RQ)
#define PIB_SRQN_NONE   0xffffffffu

/* A QPN for a new QP of this type, or 0.  QPNs rotate: stale ones fail. */
static uint32_t pib_qpn_alloc(PibState *s, uint8_t type)
{
    uint32_t i, qpn;

    if (type == PIB_QPT_GSI) {
        return s->qp[PIB_QPN_GSI] ? 0 : PIB_QPN_GSI;
    }
    for (i = 0; i < PIB_MAX_QP; i++) {
        qpn = PIB_QPN_FIRST + (s->next_qpn + i) % PIB_MAX_QP;
        if (!s->qp[qpn]) {
            s->next_qpn = (qpn - PIB_QPN_FIRST + 1) % PIB_MAX_QP;
            return qpn;
        }
    }
    return 0;
}

static void pib_qp_free(PibState *s, PibQp *qp)
{
    PibPd *pd = pib_pd_lookup(s, qp->pdn);
    unsigned i;

    pib_qp_fini_engines(qp);
    /*
     * A type 2 window is bound to a QP and dies with it: otherwise the
     * next QP to get this QPN would inherit the binding.
     */
    for (i = 1; i <= PIB_MAX_MW; i++) {
        PibMw *mw = s->mw[i];

        if (mw && mw->type == 2 && mw->bound && mw->qpn == qp->qpn) {
            pib_mw_unbind(s, mw);
            trace_pib_mw_unbind(qp->qpn, mw->key);
        }
    }
    if (pd) {
        pd->refcnt--;
    }
    qp->scq->refcnt--;
    qp->rcq->refcnt--;
    if (qp->srq) {
        qp->srq->refcnt--;
    }
    s->qp[qp->qpn] = NULL;
    g_free(qp->sq.ring.pages);
    g_free(qp->rq.ring.pages);
    g_free(qp->meta);
    g_free(qp);
}

/*
 * CREATE_QP: struct pib_qp_create in a mailbox.  Ring geometry must be
 * consistent (depths, strides, page counts), the objects it names must exist,
 * and the UAR must be allocated.  A QP on an SRQ has no RQ of its own.
 */
uint8_t pib_cmd_create_qp(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    const struct pib_cmd_mbox *mbox = &cmd->in.mbox;
    struct pib_qp_create c = { 0 };
    uint32_t len = MIN(le32_to_cpu(mbox->len), sizeof(c));
    uint32_t pdn, scqn, rcqn, sq_depth, rq_depth, max_inline, uar;
    uint32_t sq_npages, rq_npages, qpn, srqn;
    uint64_t *sq_pages = NULL, *rq_pages = NULL;
    bool no_rq;
    PibPd *pd;
    PibCq *scq, *rcq;
    PibSrq *srq = NULL;
    PibQp *qp;
    uint8_t status;

    if (len && !pib_dma_read(s, le64_to_cpu(mbox->addr), &c, len,
                             "CREATE_QP mailbox")) {
        return PIB_AQ_DMA_ERROR;
    }
    pdn = le32_to_cpu(c.pdn);
    scqn = le32_to_cpu(c.send_cqn);
    rcqn = le32_to_cpu(c.recv_cqn);
    sq_depth = le32_to_cpu(c.sq_depth);
    rq_depth = le32_to_cpu(c.rq_depth);
    max_inline = le32_to_cpu(c.max_inline);
    uar = le32_to_cpu(c.uar);
    sq_npages = le32_to_cpu(c.sq_npages);
    rq_npages = le32_to_cpu(c.rq_npages);
    no_rq = c.flags & PIB_QPC_F_NO_RQ;

    pd = pib_pd_lookup(s, pdn);
    scq = pib_cq_lookup(s, scqn);
    rcq = pib_cq_lookup(s, rcqn);
    if (!pd || !scq || !rcq) {
        return pib_reject("CREATE_QP", "no such PD or CQ",
                          !pd ? pdn : !scq ? scqn : rcqn,
                          PIB_AQ_BAD_RESOURCE);
    }
    switch (c.type) {
    case PIB_QPT_RC:
    case PIB_QPT_UC:
    case PIB_QPT_UD:
    case PIB_QPT_GSI:
        break;
    default:        /* SMI: there is no subnet management agent */
        return pib_reject("CREATE_QP", "unsupported type", c.type,
                          PIB_AQ_BAD_PARAM);
    }
    if (c.flags & ~PIB_QPC_F_ALL) {
        return pib_reject("CREATE_QP", "unknown flags", c.flags,
                          PIB_AQ_BAD_PARAM);
    }
    srqn = le32_to_cpu(c.srqn);
    if (srqn != PIB_SRQN_NONE) {
        srq = pib_srq_lookup(s, srqn);
        if (!srq) {
            return pib_reject("CREATE_QP", "no such SRQ", srqn,
                              PIB_AQ_BAD_RESOURCE);
        }
        if (!no_rq) {
            return pib_reject("CREATE_QP", "a QP on an SRQ has no RQ", srqn,
                              PIB_AQ_BAD_PARAM);
        }
    }
    /* (Without an RQ, its stride means nothing.) */
    if (c.sq_stride_log < 6 || c.sq_stride_log > PIB_PAGE_SHIFT ||
        (!no_rq &&
         (c.rq_stride_log < 4 || c.rq_stride_log > PIB_PAGE_SHIFT))) {
        return pib_reject("CREATE_QP", "bad stride",
                          c.sq_stride_log << 8 | c.rq_stride_log,
                          PIB_AQ_BAD_PARAM);
    }
    if (sq_depth < 1 || sq_depth > PIB_MAX_QP_WR || !is_power_of_2(sq_depth)) {
        return pib_reject("CREATE_QP", "bad SQ depth", sq_depth,
                          PIB_AQ_BAD_PARAM);
    }
    if (no_rq ? rq_depth != 0 :
        rq_depth < 1 || rq_depth > PIB_MAX_QP_WR || !is_power_of_2(rq_depth)) {
        return pib_reject("CREATE_QP", "bad RQ depth", rq_depth,
                          PIB_AQ_BAD_PARAM);
    }
    if (max_inline > PIB_MAX_INLINE_DATA ||
        max_inline > (1u << c.sq_stride_log) - sizeof(struct pib_send_wqe)) {
        return pib_reject("CREATE_QP", "max_inline too large", max_inline,
                          PIB_AQ_BAD_PARAM);
    }
    if (sq_npages != pib_ring_pages(sq_depth, c.sq_stride_log) ||
        rq_npages != (no_rq ? 0 : pib_ring_pages(rq_depth, c.rq_stride_log))) {
        return pib_reject("CREATE_QP", "page counts do not match the rings",
                          (uint64_t)sq_npages << 32 | rq_npages,
                          PIB_AQ_BAD_PARAM);
    }
    if (!pib_uar_valid(s, uar)) {
        return pib_reject("CREATE_QP", "UAR not allocated", uar,
                          PIB_AQ_BAD_PARAM);
    }
    qpn = pib_qpn_alloc(s, c.type);
    if (!qpn) {
        return pib_reject("CREATE_QP", "no free QPN", c.type,
                          PIB_AQ_NO_RESOURCES);
    }
    status = pib_pbl_load(s, le64_to_cpu(c.sq_pbl_addr), sq_npages, &sq_pages,
                          "CREATE_QP");
    if (status == PIB_AQ_OK) {
        status = pib_pbl_load(s, le64_to_cpu(c.rq_pbl_addr), rq_npages,
                              &rq_pages, "CREATE_QP");
    }
    if (status != PIB_AQ_OK) {
        g_free(sq_pages);
        return status;
    }

    qp = g_new0(PibQp, 1);
    qp->s = s;
    qp->qpn = qpn;
    qp->uar = uar;
    qp->pdn = pdn;
    qp->type = c.type;
    qp->state = PIB_QPS_RESET;
    qp->sig_all = c.flags & PIB_QPC_F_SQ_SIG_ALL;
    qp->no_rq = no_rq;
    qp->scq = scq;
    qp->rcq = rcq;
    qp->srq = srq;
    qp->max_inline = max_inline;
    qp->sq.ring = (PibRing) {
        .depth = sq_depth, .stride_log = c.sq_stride_log,
        .npages = sq_npages, .pages = sq_pages,
    };
    qp->sq.max_sge = MIN(PIB_MAX_SGE, ((1u << c.sq_stride_log) -
                         sizeof(struct pib_send_wqe)) / sizeof(struct pib_sge));
    qp->rq.ring = (PibRing) {
        .depth = rq_depth, .stride_log = no_rq ? 4 : c.rq_stride_log,
        .npages = rq_npages, .pages = rq_pages,
    };
    qp->rq.max_sge = no_rq ? 0 :
        MIN(PIB_MAX_SGE, ((1u << c.rq_stride_log) -
            sizeof(struct pib_recv_wqe)) / sizeof(struct pib_sge));
    qp->meta_size = MIN(sq_depth, PIB_SQ_WINDOW);
    qp->meta = g_new0(PibWqeMeta, qp->meta_size);
    qp->port_num = PIB_PORT_NUM;
    qp->path_mtu = PIB_PORT_MTU_ENUM;
    if (qp->type == PIB_QPT_GSI) {
        qp->qkey = PIB_GSI_QKEY;
    }
    pib_qp_init_engines(qp);

    pd->refcnt++;
    scq->refcnt++;
    rcq->refcnt++;
    if (srq) {
        srq->refcnt++;
    }
    s->qp[qpn] = qp;
    trace_pib_qp_create(qpn, c.type, pdn, scqn, rcqn, sq_depth, rq_depth, uar);
    res->result0 = qpn;
    return PIB_AQ_OK;
}

/* DESTROY_QP: outstanding work requests complete (flushed) first. */
uint8_t pib_cmd_destroy_qp(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    uint32_t qpn = le32_to_cpu(cmd->in.obj.num);
    PibQp *qp = pib_qp_lookup(s, qpn);

    if (!qp) {
        return pib_reject("DESTROY_QP", "no such QP", qpn,
                          PIB_AQ_BAD_RESOURCE);
    }
    if (qp->state != PIB_QPS_RESET) {
        pib_qp_error(qp, "destroyed");
        pib_qp_flush(qp);
    }
    pib_qp_free(s, qp);
    trace_pib_obj("destroy", "QP", qpn);
    return PIB_AQ_OK;
}

/*
 * Memory access through MRs
 */

const char *pib_mem_err_name(PibMemErr err)
{
    switch (err) {
    case PIB_MEM_OK:      return "ok";
    case PIB_MEM_BAD_KEY: return "bad key";
    case PIB_MEM_BAD_PD:  return "MR in another PD";
    case PIB_MEM_ACCESS:  return "access not allowed";
    case PIB_MEM_RANGE:   return "range outside the MR";
    case PIB_MEM_DMA:     return "guest memory inaccessible";
    default:              return "?";
    }
}

/*
 * May a QP of PD pdn access [va, va + len) through key with these rights?
 * (docs/hardware.md "Keys")  Local reads need no right; anything else needs
 * its PIB_ACCESS_* bit.  A zero-length access needs no valid key at all (the
 * IBTA's rule for zero-length RDMA and SGEs).
 */
PibMemErr pib_mr_check(PibState *s, uint32_t key, uint32_t pdn, uint64_t va,
                       uint64_t len, uint32_t access, PibMr **mrp)
{
    PibMr *mr = pib_mr_lookup(s, key);

    *mrp = mr;
    if (len == 0) {
        return PIB_MEM_OK;
    }
    if (!mr || mr->invalid) {
        return PIB_MEM_BAD_KEY;
    }
    if (mr->pdn != pdn) {
        return PIB_MEM_BAD_PD;
    }
    if ((mr->access & access) != access) {
        return PIB_MEM_ACCESS;
    }
    if (va < mr->iova || len > mr->length || va - mr->iova > mr->length - len) {
        return PIB_MEM_RANGE;
    }
    return PIB_MEM_OK;
}

/*
 * The remote side's check: an rkey names an MR or a bound memory window.  A
 * window passes if it lies in QP's PD, is bound (a type 2 one to this QP),
 * allows the access and holds the range; then the MR under it is checked
 * as for an MR rkey.  *mrp is the MR to access.
 */
PibMemErr pib_rkey_check(PibState *s, const PibQp *qp, uint32_t rkey,
                         uint64_t va, uint64_t len, uint32_t access,
                         PibMr **mrp)
{
    PibMw *mw = pib_mw_by_index(s, rkey);

    if (!mw) {
        return pib_mr_check(s, rkey, qp->pdn, va, len, access, mrp);
    }
    *mrp = NULL;
    if (len == 0) {
        return PIB_MEM_OK;
    }
    if (mw->key != rkey || !mw->bound ||
        (mw->type == 2 && mw->qpn != qp->qpn)) {
        return PIB_MEM_BAD_KEY;
    }
    if (mw->pdn != qp->pdn) {
        return PIB_MEM_BAD_PD;
    }
    if ((mw->access & access) != access) {
        return PIB_MEM_ACCESS;
    }
    if (va < mw->addr || len > mw->length || va - mw->addr > mw->length - len) {
        return PIB_MEM_RANGE;
    }
    return pib_mr_check(s, mw->mr_key, qp->pdn, va, len, access, mrp);
}

#define PIB_ACCESS_REMOTE   (PIB_ACCESS_REMOTE_WRITE | \
                             PIB_ACCESS_REMOTE_READ | \
                             PIB_ACCESS_REMOTE_ATOMIC)

static uint8_t pib_bind_fail(const PibQp *qp, const char *why, uint64_t val)
{
    trace_pib_mw_bind_fail(qp->qpn, why, val);
    return PIB_WC_MW_BIND_ERR;
}

/*
 * BIND_MW (docs/hardware.md "Memory windows"): bind the window whose index
 * mw_rkey names to [addr, addr + length) of the MR mr_lkey, with remote rights
 * the MR allows; the window's rkey becomes new_rkey (same index).  Only the
 * index counts: nothing updates the consumer's copy of a type 2 window's key
 * when the peer invalidates it, so that copy may be stale.  The window must
 * be in the QP's PD and of the type the WQE says.  A type 2 window must be
 * unbound (invalidated) first and is bound to this QP.  Length 0 unbinds a
 * type 1 window (ibv_bind_mw with no MR) and needs no MR; a type 2 window
 * cannot be bound with length 0 (IBTA o10-37.2.40).  Returns a completion
 * status.
 */
uint8_t pib_mw_bind(PibQp *qp, const struct pib_bind_mw_wqe *b)
{
    PibState *s = qp->s;
    uint32_t mw_rkey = le32_to_cpu(b->mw_rkey);
    uint32_t new_rkey = le32_to_cpu(b->new_rkey);
    uint32_t access = le32_to_cpu(b->access);
    uint64_t addr = le64_to_cpu(b->addr);
    uint64_t length = le64_to_cpu(b->length);
    PibMw *mw = pib_mw_by_index(s, mw_rkey);
    PibMr *mr, *old;
    PibMemErr err;

    if (!mw) {
        return pib_bind_fail(qp, "no such window", mw_rkey);
    }
    if (mw->pdn != qp->pdn || mw->type != b->mw_type) {
        return pib_bind_fail(qp, "window PD or type", mw->type);
    }
    if ((new_rkey >> 8) != (mw_rkey >> 8)) {
        return pib_bind_fail(qp, "new rkey changes the index", new_rkey);
    }
    if (access & ~PIB_ACCESS_REMOTE) {
        return pib_bind_fail(qp, "access bits", access);
    }
    if (mw->type == 2 && mw->bound) {
        return pib_bind_fail(qp, "type 2 window still bound", mw->key);
    }
    if (length == 0) {
        if (mw->type == 2) {
            return pib_bind_fail(qp, "type 2 bind of length 0", mw_rkey);
        }
        pib_mw_unbind(s, mw);
        mw->key = new_rkey;
        trace_pib_mw_unbind(qp->qpn, new_rkey);
        return PIB_WC_SUCCESS;
    }
    /* The MR: valid, ours, MW_BIND and the rights, the range. */
    mr = pib_mr_lookup(s, le32_to_cpu(b->mr_lkey));
    err = !mr || mr->invalid ? PIB_MEM_BAD_KEY :
          mr->pdn != qp->pdn ? PIB_MEM_BAD_PD :
          (mr->access & (PIB_ACCESS_MW_BIND | access)) !=
              (PIB_ACCESS_MW_BIND | access) ? PIB_MEM_ACCESS :
          addr < mr->iova || length > mr->length ||
              addr - mr->iova > mr->length - length ? PIB_MEM_RANGE :
          PIB_MEM_OK;
    if (err != PIB_MEM_OK) {
        return pib_bind_fail(qp, pib_mem_err_name(err),
                             le32_to_cpu(b->mr_lkey));
    }

    old = mw->bound ? pib_mr_lookup(s, mw->mr_key) : NULL;
    if (old) {
        old->mw_bound--;
    }
    mw->bound = true;
    mw->key = new_rkey;
    mw->mr_key = mr->key;
    mw->addr = addr;
    mw->length = length;
    mw->access = access;
    mw->qpn = qp->qpn;
    mr->mw_bound++;
    trace_pib_mw_bind(qp->qpn, new_rkey, mr->key, addr, length, access);
    return PIB_WC_SUCCESS;
}

/*
 * LOCAL_INV and SEND_WITH_INV: invalidate a type 2 window (it becomes
 * unbound) or an MR (its keys fail from now on), in QP's PD.
 */
bool pib_key_invalidate(PibState *s, const PibQp *qp, uint32_t rkey)
{
    PibMw *mw = pib_mw_by_index(s, rkey);
    PibMr *mr;

    if (mw) {
        if (mw->key != rkey || mw->type != 2 || !mw->bound ||
            mw->pdn != qp->pdn) {
            trace_pib_invalidate(qp->qpn, rkey, "refused");
            return false;
        }
        pib_mw_unbind(s, mw);
        trace_pib_invalidate(qp->qpn, rkey, "window unbound");
        return true;
    }
    mr = pib_mr_lookup(s, rkey);
    if (!mr || mr->invalid || mr->pdn != qp->pdn || mr->mw_bound) {
        trace_pib_invalidate(qp->qpn, rkey, "refused");
        return false;
    }
    mr->invalid = true;
    trace_pib_invalidate(qp->qpn, rkey, "MR invalid");
    return true;
}

/*
 * Copy between buf and [va, va + len) of a checked MR, page by page through
 * its page list (or 1:1 for a physical MR).
 */
PibMemErr pib_mr_rw(PibState *s, PibMr *mr, uint64_t va, void *buf,
                    uint32_t len, DMADirection dir)
{
    uint8_t *p = buf;
    uint64_t off, addr;
    uint32_t n;
    bool ok;

    if (mr->flags & PIB_MR_F_PHYS) {
        ok = dir == DMA_DIRECTION_TO_DEVICE ?
             pib_dma_read(s, va, buf, len, "MR") :
             pib_dma_write(s, va, buf, len, "MR");
        return ok ? PIB_MEM_OK : PIB_MEM_DMA;
    }
    /* Offset from the start of the first page (iova's page). */
    off = va - mr->iova + (mr->iova & (PIB_PAGE_SIZE - 1));
    while (len) {
        n = MIN(len, PIB_PAGE_SIZE - (off & (PIB_PAGE_SIZE - 1)));
        addr = mr->pages[off >> PIB_PAGE_SHIFT] + (off & (PIB_PAGE_SIZE - 1));
        ok = dir == DMA_DIRECTION_TO_DEVICE ?
             pib_dma_read(s, addr, p, n, "MR") :
             pib_dma_write(s, addr, p, n, "MR");
        if (!ok) {
            return PIB_MEM_DMA;
        }
        p += n;
        off += n;
        len -= n;
    }
    return PIB_MEM_OK;
}

/*
 * Copy len bytes between buf and a scatter/gather list, starting offset bytes
 * into the list.  Writing into the list (DMA_DIRECTION_FROM_DEVICE) needs
 * LOCAL_WRITE on each MR.  The caller checked that the list is long enough.
 */
PibMemErr pib_sgl_copy(PibState *s, uint32_t pdn, const PibSge *sge,
                       uint32_t num_sge, uint64_t offset, void *buf,
                       uint32_t len, DMADirection dir)
{
    uint32_t access = dir == DMA_DIRECTION_FROM_DEVICE ?
                      PIB_ACCESS_LOCAL_WRITE : 0;
    uint8_t *p = buf;
    uint32_t i, n;
    PibMemErr err;
    PibMr *mr;

    for (i = 0; i < num_sge && len; i++) {
        if (offset >= sge[i].length) {
            offset -= sge[i].length;
            continue;
        }
        n = MIN(len, sge[i].length - offset);
        err = pib_mr_check(s, sge[i].lkey, pdn, sge[i].addr + offset, n,
                           access, &mr);
        if (err == PIB_MEM_OK) {
            err = pib_mr_rw(s, mr, sge[i].addr + offset, p, n, dir);
        }
        if (err != PIB_MEM_OK) {
            trace_pib_sge_fault(sge[i].lkey, sge[i].addr + offset, n,
                                pib_mem_err_name(err));
            return err;
        }
        p += n;
        len -= n;
        offset = 0;
    }
    return len ? PIB_MEM_RANGE : PIB_MEM_OK;
}

/*
 * Function reset: every object goes, QPs first (they hold the others).  No
 * CQE is written: after a reset nothing in guest memory belongs to us.
 */
void pib_objects_reset(PibState *s)
{
    uint32_t i;

    for (i = 1; i < PIB_QPN_LIMIT; i++) {
        if (s->qp[i]) {
            pib_qp_free(s, s->qp[i]);
        }
    }
    for (i = 1; i <= PIB_MAX_SRQ; i++) {
        if (s->srq[i]) {
            pib_srq_free(s, s->srq[i]);
        }
    }
    for (i = 1; i <= PIB_MAX_CQ; i++) {
        if (s->cq[i]) {
            pib_cq_forget(s, s->cq[i]);
            g_free(s->cq[i]->ring.pages);
            g_free(s->cq[i]);
            s->cq[i] = NULL;
        }
    }
    for (i = 1; i <= PIB_MAX_MW; i++) {
        if (s->mw[i]) {
            pib_mw_free(s, s->mw[i]);
        }
    }
    for (i = 1; i <= PIB_MAX_MR; i++) {
        if (s->mr[i]) {
            pib_mr_free(s, s->mr[i]);
        }
    }
    for (i = 1; i <= PIB_MAX_PD; i++) {
        g_free(s->pd[i]);
        s->pd[i] = NULL;
    }
    memset(s->mr_key, 0, sizeof(s->mr_key));
    memset(s->mw_key, 0, sizeof(s->mw_key));
    s->mtt_pages = 0;
    s->next_qpn = 0;
}
