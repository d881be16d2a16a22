/*
 * pib HCA device model - the memory operations of the send queue
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The work requests that change keys rather than move data, which the
 * requester executes in send-queue order (pib-req.c): BIND_MW (struct
 * pib_bind_mw_wqe), REG_MR fast registration (struct pib_reg_mr_wqe), and
 * invalidation (LOCAL_INV, and a peer's SEND_WITH_INV through the
 * responder).  The WQE formats are in include/pib_wqe.h; the objects they
 * change, and the key checks every access makes, are in pib-mr.c.  A failure
 * is a completion status, never a crash: every field is checked before
 * anything changes.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"

#include "pib-internal.h"
#include "../trace.h"

static uint8_t pib_bind_fail(const PibQp *qp, const char *why, uint64_t val)
{
    trace_pib_mw_bind_fail(qp->qpn, why, val);
    return PIB_WC_MW_BIND_ERR;
}

/*
 * BIND_MW (docs/reference/hardware.md "Memory windows"): bind the window whose index
 * mw_rkey names to [addr, addr + length) of the MR mr_lkey, with remote rights
 * of its own; the window's rkey becomes new_rkey (same index).  The IBTA's
 * rules, as rxe applies them: the MR must allow binds (MW_BIND, C10-73), and
 * a window that remote peers may write (REMOTE_WRITE, REMOTE_ATOMIC) needs an
 * MR with LOCAL_WRITE (C10-74); the MR's own remote rights do not limit the
 * window's.  The local bits of access (LOCAL_WRITE, MW_BIND), which callers
 * pass along with an MR's flags, are ignored; any other bit (zero-based
 * windows) fails.  Only the
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
    uint32_t access = le32_to_cpu(b->access) &
                      ~(PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_MW_BIND);
    uint64_t addr = le64_to_cpu(b->addr);
    uint64_t length = le64_to_cpu(b->length);
    PibMw *mw = pib_mw_by_index(s, mw_rkey);
    PibMr *mr, *old;
    PibMemErr err;
    uint32_t need;

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
    /* The MR: valid, ours, MW_BIND (and LOCAL_WRITE if needed), the range. */
    need = PIB_ACCESS_MW_BIND | pib_mw_mr_access(access);
    err = pib_mr_check(s, le32_to_cpu(b->mr_lkey), qp->pdn, addr, length,
                       need, &mr);
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

static uint8_t pib_fast_reg_fail(const PibQp *qp, const char *why,
                                  uint64_t val, uint8_t status)
{
    trace_pib_mr_fast_reg_fail(qp->qpn, why, val);
    return status;
}

/*
 * REG_MR (struct pib_reg_mr_wqe): register the fast-registration MR whose
 * index key names, in the QP's PD and invalid, for [iova, iova + length) on
 * the WQE's page list, which the device reads now, in send-queue order (the
 * driver may rewrite it once the WQE completed).  The MR's keys become key.
 * Every check comes before any change: a failed REG_MR leaves the MR as it
 * was.  Returns a completion status.
 */
uint8_t pib_mr_fast_reg(PibQp *qp, const struct pib_reg_mr_wqe *r)
{
    PibState *s = qp->s;
    uint32_t key = le32_to_cpu(r->key);
    uint32_t idx = key >> 8;
    uint32_t access = le32_to_cpu(r->access);
    uint32_t npages = le32_to_cpu(r->npages);
    uint64_t iova = le64_to_cpu(r->iova);
    uint64_t length = le64_to_cpu(r->length);
    PibMr *mr = pib_table_get(&s->mrs, idx);
    g_autofree uint64_t *pages = NULL;
    uint64_t need;
    uint32_t i;

    if (!mr || !mr->fast_reg) {
        return pib_fast_reg_fail(qp, "no fast-registration MR", key,
                                 PIB_WC_LOC_PROT_ERR);
    }
    if (mr->pdn != qp->pdn) {
        return pib_fast_reg_fail(qp, "MR in another PD", mr->pdn,
                                 PIB_WC_LOC_PROT_ERR);
    }
    if (!mr->invalid) {
        return pib_fast_reg_fail(qp, "MR still valid", mr->key,
                                 PIB_WC_LOC_PROT_ERR);
    }
    if (r->page_shift != PIB_PAGE_SHIFT) {
        return pib_fast_reg_fail(qp, "page size", r->page_shift,
                                 PIB_WC_LOC_PROT_ERR);
    }
    if (pib_mr_access_fault(access)) {
        return pib_fast_reg_fail(qp, "access bits", access,
                                 PIB_WC_LOC_PROT_ERR);
    }
    if (npages > mr->max_pages) {
        return pib_fast_reg_fail(qp, "more pages than max_num_sg", npages,
                                 PIB_WC_LOC_LEN_ERR);
    }
    need = pib_mr_span(iova, length);
    if (!pib_mr_length_ok(iova, length) || npages < need) {
        return pib_fast_reg_fail(qp, "length outside the pages", length,
                                 PIB_WC_LOC_LEN_ERR);
    }
    /* The page list, into a scratch copy: a bad one changes nothing. */
    pages = g_new(uint64_t, npages);
    if (!pib_dma_read(s, le64_to_cpu(r->pbl_addr), pages,
                      (size_t)npages * sizeof(uint64_t), "REG_MR page list")) {
        return pib_fast_reg_fail(qp, "page list unreadable",
                                 le64_to_cpu(r->pbl_addr),
                                 PIB_WC_LOC_PROT_ERR);
    }
    for (i = 0; i < npages; i++) {
        pages[i] = le64_to_cpu(pages[i]);
        if (pages[i] & (PIB_PAGE_SIZE - 1)) {
            return pib_fast_reg_fail(qp, "unaligned page", pages[i],
                                     PIB_WC_LOC_PROT_ERR);
        }
    }

    memcpy(mr->pages, pages, (size_t)npages * sizeof(uint64_t));
    mr->npages = npages;
    mr->iova = iova;
    mr->length = length;
    mr->access = access;
    mr->key = key;
    pib_table_set_key(&s->mrs, idx, key & 0xff);
    mr->invalid = false;
    trace_pib_mr_reg(mr->key, mr->pdn, access, iova, length, npages);
    return PIB_WC_SUCCESS;
}

/*
 * LOCAL_INV and SEND_WITH_INV: invalidate a type 2 window (it becomes
 * unbound) or an MR (its keys fail from now on), in QP's PD.
 */
bool pib_key_invalidate(PibState *s, const PibQp *qp, uint32_t pdn, uint32_t rkey)
{
    PibMw *mw = pib_mw_by_index(s, rkey);
    PibMr *mr;

    if (mw) {
        if (mw->key != rkey || mw->type != 2 || !mw->bound ||
            mw->pdn != pdn) {
            trace_pib_invalidate(qp->qpn, rkey, "refused");
            return false;
        }
        pib_mw_unbind(s, mw);
        trace_pib_invalidate(qp->qpn, rkey, "window unbound");
        return true;
    }
    mr = pib_mr_lookup(s, rkey);
    if (!mr || mr->invalid || mr->pdn != pdn || mr->mw_bound) {
        trace_pib_invalidate(qp->qpn, rkey, "refused");
        return false;
    }
    mr->invalid = true;
    trace_pib_invalidate(qp->qpn, rkey, "MR invalid");
    return true;
}
