/*
 * pib HCA device model - memory regions and windows
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * MRs and memory windows (docs/reference/hardware.md "Keys" and "Memory
 * windows"), their admin commands, and every access the engines make through
 * an MR: key, PD, access right and range checks (MR and window rkeys), then
 * DMA page by page through the MR's page list.  The commands are defined in
 * include/pib_hw.h.  The work requests that change keys (BIND_MW, REG_MR
 * fast registration, LOCAL_INV and SEND_WITH_INV) are in pib-mr-wqe.c.
 *
 * Like every data-path object, each lives in a fixed-size table indexed by
 * its number (pib-table.c), so every count the guest can ask for is bounded by
 * a limit QUERY_DEVICE reports; number 0 is never handed out.  An object referenced
 * by others keeps a count, and destroying it answers BUSY (PD <- MR, MW, SRQ,
 * QP; MR <- bound MW).
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"

#include "pib-internal.h"
#include "../trace.h"

/*
 * Lookups
 */

/* The MR a key names: the index must hold an MR and the key byte match. */
PibMr *pib_mr_lookup(PibState *s, uint32_t key)
{
    PibMr *mr = pib_table_get(&s->mrs, key >> 8);

    return mr && mr->key == key ? mr : NULL;
}

/* The window an rkey's index names, whatever its key byte, or NULL. */
PibMw *pib_mw_by_index(PibState *s, uint32_t key)
{
    return (key >> 8) > PIB_MW_INDEX_BASE ?
           pib_table_get(&s->mws, (key >> 8) - PIB_MW_INDEX_BASE) : NULL;
}

/*
 * Memory regions
 */

/*
 * A new MR at index idx of pd, holding a page list of max_pages entries (the
 * MTT budget it takes), with a new key byte for every reuse of the index:
 * stale keys fail.  Its keys are the command's result.
 */
static PibMr *pib_mr_install(PibState *s, uint32_t idx, PibPd *pd,
                             uint64_t *pages, uint32_t max_pages,
                             PibAdminResult *res)
{
    PibMr *mr = g_new0(PibMr, 1);

    mr->key = idx << 8 | pib_table_next_key(&s->mrs, idx);
    mr->pdn = pd->pdn;
    mr->pages = pages;
    mr->max_pages = max_pages;
    pib_table_set(&s->mrs, idx, mr);
    s->mtt_pages += max_pages;
    pd->refcnt++;
    res->result0 = mr->key;
    res->result1 = mr->key;
    return mr;
}

/*
 * The rules for an MR's access rights, whoever registers it (REG_MR, REREG_MR,
 * a REG_MR WQE): what is wrong with access, or NULL.
 */
const char *pib_mr_access_fault(uint32_t access)
{
    if (access & ~PIB_ACCESS_ALL) {
        return "unknown access bits";
    }
    /* IBTA: remote write and atomic access need local write (11.2.8.2). */
    if ((access & (PIB_ACCESS_REMOTE_WRITE | PIB_ACCESS_REMOTE_ATOMIC)) &&
        !(access & PIB_ACCESS_LOCAL_WRITE)) {
        return "remote write without local write";
    }
    return NULL;
}

/* ... and for its range: a length the device can map, without wrapping. */
bool pib_mr_length_ok(uint64_t iova, uint64_t length)
{
    return length != 0 && length <= PIB_MAX_MR_SIZE && iova + length >= iova;
}

/* The 4 KiB pages [iova, iova + length) spans. */
uint64_t pib_mr_span(uint64_t iova, uint64_t length)
{
    return DIV_ROUND_UP((iova & (PIB_PAGE_SIZE - 1)) + length, PIB_PAGE_SIZE);
}

/* REG_MR's (and REREG_MR's) check of the access rights. */
static uint8_t pib_mr_check_access(const char *cmd, uint32_t access)
{
    const char *why = pib_mr_access_fault(access);

    return why ? pib_cmd_reject(cmd, why, access, PIB_AQ_BAD_PARAM) :
                 PIB_AQ_OK;
}

/*
 * ... and of the range: the page count must be exactly what [iova, iova +
 * length) spans, and fit the device's page list budget once the MR being
 * changed gives back its own (freed pages).
 */
static uint8_t pib_mr_check_range(PibState *s, const char *cmd, uint64_t iova,
                                  uint64_t length, uint32_t npages,
                                  uint32_t freed)
{
    if (!pib_mr_length_ok(iova, length)) {
        return pib_cmd_reject(cmd, "bad length", length, PIB_AQ_BAD_PARAM);
    }
    if (npages != pib_mr_span(iova, length)) {
        return pib_cmd_reject(cmd, "npages does not match the range", npages,
                              PIB_AQ_BAD_PARAM);
    }
    if (npages > PIB_MAX_MTT_PAGES - s->mtt_pages + freed) {
        return pib_cmd_reject(cmd, "page list budget exhausted", npages,
                              PIB_AQ_NO_RESOURCES);
    }
    return PIB_AQ_OK;
}

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
    uint64_t *pages = NULL;
    PibPd *pd = pib_pd_lookup(s, pdn);
    uint32_t idx;
    uint8_t status;
    PibMr *mr;

    if (!pd) {
        return pib_cmd_reject("REG_MR", "no such PD", pdn, PIB_AQ_BAD_RESOURCE);
    }
    status = pib_mr_check_access("REG_MR", access);
    if (status != PIB_AQ_OK) {
        return status;
    }
    if (flags & ~PIB_MR_F_PHYS) {
        return pib_cmd_reject("REG_MR", "unknown flags", flags,
                              PIB_AQ_BAD_PARAM);
    }
    if (flags & PIB_MR_F_PHYS) {
        /* Identity map of guest-physical memory: no page list. */
        if (iova != 0 || npages != 0) {
            return pib_cmd_reject("REG_MR", "physical MR with iova or pages",
                                  iova | npages, PIB_AQ_BAD_PARAM);
        }
        length = UINT64_MAX;
    } else {
        status = pib_mr_check_range(s, "REG_MR", iova, length, npages, 0);
        if (status != PIB_AQ_OK) {
            return status;
        }
    }
    idx = pib_table_alloc(&s->mrs);
    if (!idx) {
        return pib_cmd_reject("REG_MR", "table full", PIB_MAX_MR,
                              PIB_AQ_NO_RESOURCES);
    }
    status = pib_pbl_load(s, le64_to_cpu(in->pbl_addr), npages, &pages,
                          "REG_MR");
    if (status != PIB_AQ_OK) {
        return status;
    }

    mr = pib_mr_install(s, idx, pd, pages, npages, res);
    mr->access = access;
    mr->flags = flags;
    mr->iova = iova;
    mr->length = length;
    mr->npages = npages;
    trace_pib_mr_reg(mr->key, pdn, access, iova, length, npages);
    return PIB_AQ_OK;
}

/*
 * REG_DM_MR: an MR over device memory (pib-dm.c), [offset, offset + length) of a DM, which
 * must lie in the length the DM was allocated with.  It takes no page list.
 */
uint8_t pib_cmd_reg_dm_mr(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    const struct pib_cmd_reg_dm_mr *in = &cmd->in.reg_dm_mr;
    uint32_t pdn = le32_to_cpu(in->pdn);
    uint32_t access = le32_to_cpu(in->access);
    uint32_t n = le32_to_cpu(in->dm);
    uint64_t iova = le64_to_cpu(in->iova);
    uint64_t length = le64_to_cpu(in->length);
    uint64_t offset = le64_to_cpu(in->offset);
    PibPd *pd = pib_pd_lookup(s, pdn);
    PibDm *dm = pib_dm_lookup(s, n);
    uint32_t idx;
    uint8_t status;
    PibMr *mr;

    if (!pd) {
        return pib_cmd_reject("REG_DM_MR", "no such PD", pdn, PIB_AQ_BAD_RESOURCE);
    }
    if (!dm) {
        return pib_cmd_reject("REG_DM_MR", "no such DM", n, PIB_AQ_BAD_RESOURCE);
    }
    status = pib_mr_check_access("REG_DM_MR", access);
    if (status != PIB_AQ_OK) {
        return status;
    }
    if (!pib_range_in(offset, length, 0, dm->length)) {
        return pib_cmd_reject("REG_DM_MR", "range outside the DM", offset + length,
                              PIB_AQ_BAD_PARAM);
    }
    if (length > UINT64_MAX - iova) {
        return pib_cmd_reject("REG_DM_MR", "iova + length wraps", iova, PIB_AQ_BAD_PARAM);
    }
    idx = pib_table_alloc(&s->mrs);
    if (!idx) {
        return pib_cmd_reject("REG_DM_MR", "table full", PIB_MAX_MR,
                              PIB_AQ_NO_RESOURCES);
    }
    mr = pib_mr_install(s, idx, pd, NULL, 0, res);
    mr->access = access;
    mr->iova = iova;
    mr->length = length;
    mr->dm = n;
    mr->dm_addr = dm->start + offset;
    dm->refcnt++;
    trace_pib_dm_mr_reg(mr->key, pdn, access, iova, length, n, mr->dm_addr);
    return PIB_AQ_OK;
}

/*
 * ALLOC_MR: a fast-registration MR.  It reserves its page list (max_num_sg
 * entries of the MTT budget) now, so that a REG_MR WQE never runs out of
 * room; it is invalid until one registers it.
 */
uint8_t pib_cmd_alloc_mr(PibState *s, const struct pib_admin_cmd *cmd,
                         PibAdminResult *res)
{
    uint32_t pdn = le32_to_cpu(cmd->in.alloc_mr.pdn);
    uint32_t max_pages = le32_to_cpu(cmd->in.alloc_mr.max_num_sg);
    PibPd *pd = pib_pd_lookup(s, pdn);
    uint32_t idx;
    PibMr *mr;

    if (!pd) {
        return pib_cmd_reject("ALLOC_MR", "no such PD", pdn,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (max_pages == 0 || max_pages > PIB_MAX_FAST_REG_PAGES) {
        return pib_cmd_reject("ALLOC_MR", "bad max_num_sg", max_pages,
                              PIB_AQ_BAD_PARAM);
    }
    if (max_pages > PIB_MAX_MTT_PAGES - s->mtt_pages) {
        return pib_cmd_reject("ALLOC_MR", "page list budget exhausted",
                              max_pages, PIB_AQ_NO_RESOURCES);
    }
    idx = pib_table_alloc(&s->mrs);
    if (!idx) {
        return pib_cmd_reject("ALLOC_MR", "table full", PIB_MAX_MR,
                              PIB_AQ_NO_RESOURCES);
    }
    mr = pib_mr_install(s, idx, pd, g_new0(uint64_t, max_pages), max_pages,
                        res);
    mr->fast_reg = true;
    mr->invalid = true;
    trace_pib_obj("create", "fast-reg MR", mr->key);
    return PIB_AQ_OK;
}

/*
 * REREG_MR (include/pib_hw.h): change a registered MR's translation, PD or
 * access in place, its keys staying.  Every check comes before any change,
 * and the new page list is read before the old one goes.
 */
uint8_t pib_cmd_rereg_mr(PibState *s, const struct pib_admin_cmd *cmd,
                         PibAdminResult *res)
{
    const struct pib_cmd_rereg_mr *in = &cmd->in.rereg_mr;
    uint32_t key = le32_to_cpu(in->key);
    uint32_t mask = le32_to_cpu(in->mask);
    uint32_t pdn = le32_to_cpu(in->pdn);
    uint32_t access = le32_to_cpu(in->access);
    uint64_t iova = le64_to_cpu(in->iova);
    uint64_t length = le64_to_cpu(in->length);
    uint32_t npages = le32_to_cpu(in->npages);
    PibMr *mr = pib_mr_lookup(s, key);
    PibPd *pd = NULL, *old_pd;
    uint64_t *pages = NULL;
    uint8_t status;

    if (!mr) {
        return pib_cmd_reject("REREG_MR", "no such key", key,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (!mask || (mask & ~(PIB_REREG_TRANS | PIB_REREG_PD |
                           PIB_REREG_ACCESS))) {
        return pib_cmd_reject("REREG_MR", "bad mask", mask, PIB_AQ_BAD_PARAM);
    }
    if (mr->fast_reg || (mr->flags & PIB_MR_F_PHYS) || mr->dm) {
        return pib_cmd_reject("REREG_MR", "not a registered MR", key,
                              PIB_AQ_BAD_PARAM);
    }
    if (mr->mw_bound) {
        return pib_cmd_reject("REREG_MR", "windows bound to it", mr->mw_bound,
                              PIB_AQ_BUSY);
    }
    if (mask & PIB_REREG_PD) {
        pd = pib_pd_lookup(s, pdn);
        if (!pd) {
            return pib_cmd_reject("REREG_MR", "no such PD", pdn,
                                  PIB_AQ_BAD_RESOURCE);
        }
    }
    if (mask & PIB_REREG_ACCESS) {
        status = pib_mr_check_access("REREG_MR", access);
        if (status != PIB_AQ_OK) {
            return status;
        }
    }
    if (mask & PIB_REREG_TRANS) {
        status = pib_mr_check_range(s, "REREG_MR", iova, length, npages,
                                    mr->max_pages);
        if (status == PIB_AQ_OK) {
            status = pib_pbl_load(s, le64_to_cpu(in->pbl_addr), npages,
                                  &pages, "REREG_MR");
        }
        if (status != PIB_AQ_OK) {
            return status;
        }
        s->mtt_pages += npages;
        s->mtt_pages -= mr->max_pages;
        g_free(mr->pages);
        mr->pages = pages;
        mr->max_pages = npages;
        mr->npages = npages;
        mr->iova = iova;
        mr->length = length;
    }
    if (mask & PIB_REREG_PD) {
        old_pd = pib_pd_lookup(s, mr->pdn);
        if (old_pd) {
            old_pd->refcnt--;
        }
        pd->refcnt++;
        mr->pdn = pdn;
    }
    if (mask & PIB_REREG_ACCESS) {
        mr->access = access;
    }
    trace_pib_mr_rereg(key, mask, mr->pdn, mr->access, mr->iova, mr->length,
                       mr->npages);
    return PIB_AQ_OK;
}

static void pib_mr_free(PibState *s, PibMr *mr)
{
    PibPd *pd = pib_pd_lookup(s, mr->pdn);
    PibDm *dm = pib_dm_lookup(s, mr->dm);

    if (pd) {
        pd->refcnt--;
    }
    if (dm) {
        dm->refcnt--;
    }
    s->mtt_pages -= mr->max_pages;
    pib_table_set(&s->mrs, mr->key >> 8, NULL);
    g_free(mr->pages);
    g_free(mr);
}

uint8_t pib_cmd_dereg_mr(PibState *s, const struct pib_admin_cmd *cmd,
                         PibAdminResult *res)
{
    uint32_t key = le32_to_cpu(cmd->in.obj.num);
    PibMr *mr = pib_mr_lookup(s, key);

    /*
     * A fast-registration MR is named by its index: the key byte its
     * consumer chose last may belong to a REG_MR that never ran.
     */
    if (!mr) {
        mr = pib_table_get(&s->mrs, key >> 8);
        if (mr && !mr->fast_reg) {
            mr = NULL;
        }
    }
    if (!mr) {
        return pib_cmd_reject("DEREG_MR", "no such key", key,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (mr->mw_bound) {
        return pib_cmd_reject("DEREG_MR", "windows bound to it", mr->mw_bound,
                              PIB_AQ_BUSY);
    }
    trace_pib_obj("destroy", "MR", key);
    pib_mr_free(s, mr);
    return PIB_AQ_OK;
}

/*
 * Memory windows (bound by BIND_MW WQEs: pib_mw_bind(), pib-mr-wqe.c)
 */

void pib_mw_unbind(PibState *s, PibMw *mw)
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
        return pib_cmd_reject("ALLOC_MW", "no such PD", pdn,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (type != 1 && type != 2) {
        return pib_cmd_reject("ALLOC_MW", "bad type", type, PIB_AQ_BAD_PARAM);
    }
    idx = pib_table_alloc(&s->mws);
    if (!idx) {
        return pib_cmd_reject("ALLOC_MW", "table full", PIB_MAX_MW,
                              PIB_AQ_NO_RESOURCES);
    }
    mw = g_new0(PibMw, 1);
    mw->key = (PIB_MW_INDEX_BASE + idx) << 8 | pib_table_next_key(&s->mws, idx);
    mw->alloc_key = mw->key;
    mw->pdn = pdn;
    mw->type = type;
    pib_table_set(&s->mws, idx, mw);
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
    pib_table_set(&s->mws, (mw->key >> 8) - PIB_MW_INDEX_BASE, NULL);
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
        return pib_cmd_reject("DEALLOC_MW", "no such window", key,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (key != mw->alloc_key && key != mw->key) {
        return pib_cmd_reject("DEALLOC_MW", "stale key", key,
                              PIB_AQ_BAD_RESOURCE);
    }
    trace_pib_obj("destroy", "MW", key);
    pib_mw_free(s, mw);
    return PIB_AQ_OK;
}

/*
 * A type 2 window is bound to a QP and dies with it: otherwise the next QP
 * to get this QPN would inherit the binding.
 */
void pib_mw_unbind_qp(PibState *s, uint32_t qpn)
{
    uint32_t i;
    PibMw *mw;

    PIB_TABLE_FOREACH(&s->mws, i, mw) {
        if (mw->type == 2 && mw->bound && mw->qpn == qpn) {
            pib_mw_unbind(s, mw);
            trace_pib_mw_unbind(qpn, mw->key);
        }
    }
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
 * (docs/reference/hardware.md "Keys")  Local reads need no right; anything else needs
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
    if (!pib_range_in(va, len, mr->iova, mr->length)) {
        return PIB_MEM_RANGE;
    }
    return PIB_MEM_OK;
}

/*
 * What a window with these remote rights needs of the MR under it: LOCAL_WRITE
 * when remote peers may write it (REMOTE_WRITE, REMOTE_ATOMIC; IBTA C10-74),
 * nothing else.
 */
uint32_t pib_mw_mr_access(uint32_t access)
{
    return access & (PIB_ACCESS_REMOTE_WRITE | PIB_ACCESS_REMOTE_ATOMIC) ?
           PIB_ACCESS_LOCAL_WRITE : 0;
}

/*
 * The remote side's check: an rkey names an MR or a bound memory window, in
 * PD pdn (the QP's, or for an XRC_TGT QP the PD of the XRC SRQ the request
 * names).  A window passes if it lies in that PD, is bound (a type 2 one to this QP),
 * allows the access and holds the range; then the MR under it must still be
 * valid, in the PD and hold the range.  The window's rights are its own
 * (IBTA C10-74): the MR need not grant the remote access itself, only the
 * LOCAL_WRITE that a bind with remote write or atomic rights required.
 * *mrp is the MR to access.
 */
PibMemErr pib_rkey_check(PibState *s, const PibQp *qp, uint32_t pdn, uint32_t rkey,
                         uint64_t va, uint64_t len, uint32_t access,
                         PibMr **mrp)
{
    PibMw *mw = pib_mw_by_index(s, rkey);

    if (!mw) {
        return pib_mr_check(s, rkey, pdn, va, len, access, mrp);
    }
    *mrp = NULL;
    if (len == 0) {
        return PIB_MEM_OK;
    }
    if (mw->key != rkey || !mw->bound ||
        (mw->type == 2 && mw->qpn != qp->qpn)) {
        return PIB_MEM_BAD_KEY;
    }
    if (mw->pdn != pdn) {
        return PIB_MEM_BAD_PD;
    }
    if ((mw->access & access) != access) {
        return PIB_MEM_ACCESS;
    }
    if (!pib_range_in(va, len, mw->addr, mw->length)) {
        return PIB_MEM_RANGE;
    }
    return pib_mr_check(s, mw->mr_key, pdn, va, len,
                        pib_mw_mr_access(access), mrp);
}

/*
 * The responder's check of a FLUSH: rkey names a valid MR of PD pdn whose rights allow
 * the placement types plt (pib_flush_allowed), and, unless the whole MR is flushed, the
 * range lies in it.  Unlike a zero-length READ or WRITE, a zero-length flush still names a
 * region: its key and address are checked.  A memory window's rkey names no MR (a bind grants
 * remote read, write and atomic only): BAD_KEY.
 */
PibMemErr pib_flush_check(PibState *s, uint32_t pdn, uint32_t rkey, uint64_t va,
                          uint64_t len, bool whole, uint32_t plt)
{
    PibMr *mr = pib_mr_lookup(s, rkey);

    if (!mr || mr->invalid) {
        return PIB_MEM_BAD_KEY;
    }
    if (mr->pdn != pdn) {
        return PIB_MEM_BAD_PD;
    }
    if (!pib_flush_allowed(plt, mr->access)) {
        return PIB_MEM_ACCESS;
    }
    if (!whole && !pib_range_in(va, len, mr->iova, mr->length)) {
        return PIB_MEM_RANGE;
    }
    return PIB_MEM_OK;
}

/*
 * Copy between buf and [va, va + len) of a checked MR, page by page through
 * its page list (or 1:1 for a physical MR, or in device memory for a DM's).
 */
PibMemErr pib_mr_rw(PibState *s, PibMr *mr, uint64_t va, void *buf,
                    uint32_t len, DMADirection dir)
{
    uint8_t *p = buf;
    uint64_t off, addr;
    uint32_t n;
    bool ok;

    if (mr->dm) {
        return pib_dm_rw(s, mr->dm_addr + (va - mr->iova), buf, len, dir) ?
               PIB_MEM_OK : PIB_MEM_DMA;
    }
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
 * Function reset: windows and MRs go (the QPs, SRQs and CQs that used them
 * went first; their PDs go after them, pib-pd.c).
 */
void pib_mr_reset_all(PibState *s)
{
    uint32_t i;
    PibMw *mw;
    PibMr *mr;

    PIB_TABLE_FOREACH(&s->mws, i, mw) {
        pib_mw_free(s, mw);
    }
    PIB_TABLE_FOREACH(&s->mrs, i, mr) {
        pib_mr_free(s, mr);
    }
    pib_table_reset(&s->mws);
    pib_table_reset(&s->mrs);
    s->mtt_pages = 0;
}
