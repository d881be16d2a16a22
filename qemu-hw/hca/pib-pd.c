/*
 * pib HCA device model - protection domains and XRC domains
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The two kinds of domain (as in the driver's pib_pd.c): a PD (CREATE_PD) holds the MRs,
 * windows, SRQs and QPs made in it, which must name the same PD to use each other; an XRC
 * domain (ALLOC_XRCD, IBTA 9.8) groups the XRC SRQs and XRC_TGT QPs that may serve each
 * other.  Each keeps a count of the objects in it, and destroying it while that count is
 * not 0 answers BUSY.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"

#include "pib-internal.h"
#include "../trace.h"

/*
 * Protection domains
 */

uint8_t pib_cmd_create_pd(PibState *s, const struct pib_admin_cmd *cmd,
                          PibAdminResult *res)
{
    uint32_t pdn = pib_table_alloc(&s->pds);
    PibPd *pd;

    if (!pdn) {
        return pib_cmd_reject("CREATE_PD", "table full", PIB_MAX_PD,
                              PIB_AQ_NO_RESOURCES);
    }
    pd = g_new0(PibPd, 1);
    pd->pdn = pdn;
    pib_table_set(&s->pds, pdn, pd);
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
        return pib_cmd_reject("DESTROY_PD", "no such PD", pdn,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (pd->refcnt) {
        return pib_cmd_reject("DESTROY_PD", "in use", pd->refcnt, PIB_AQ_BUSY);
    }
    pib_table_set(&s->pds, pdn, NULL);
    g_free(pd);
    trace_pib_obj("destroy", "PD", pdn);
    return PIB_AQ_OK;
}

/*
 * XRC domains
 */

uint8_t pib_cmd_alloc_xrcd(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    uint32_t n = pib_table_alloc(&s->xrcds);
    PibXrcd *x;

    if (!n) {
        return pib_cmd_reject("ALLOC_XRCD", "table full", PIB_MAX_XRCD,
                              PIB_AQ_NO_RESOURCES);
    }
    x = g_new0(PibXrcd, 1);
    x->xrcd = n;
    pib_table_set(&s->xrcds, n, x);
    trace_pib_obj("alloc", "XRCD", n);
    res->result0 = n;
    return PIB_AQ_OK;
}

uint8_t pib_cmd_dealloc_xrcd(PibState *s, const struct pib_admin_cmd *cmd,
                             PibAdminResult *res)
{
    uint32_t n = le32_to_cpu(cmd->in.obj.num);
    PibXrcd *x = pib_xrcd_lookup(s, n);

    if (!x) {
        return pib_cmd_reject("DEALLOC_XRCD", "no such XRCD", n,
                              PIB_AQ_BAD_RESOURCE);
    }
    if (x->refcnt) {
        return pib_cmd_reject("DEALLOC_XRCD", "in use", x->refcnt,
                              PIB_AQ_BUSY);
    }
    pib_table_set(&s->xrcds, n, NULL);
    g_free(x);
    trace_pib_obj("dealloc", "XRCD", n);
    return PIB_AQ_OK;
}

/* Function reset: every domain goes (after everything that was in one). */
void pib_pd_reset_all(PibState *s)
{
    uint32_t i;
    PibPd *pd;
    PibXrcd *x;

    PIB_TABLE_FOREACH(&s->pds, i, pd) {
        g_free(pd);
    }
    PIB_TABLE_FOREACH(&s->xrcds, i, x) {
        g_free(x);
    }
    pib_table_reset(&s->pds);
    pib_table_reset(&s->xrcds);
}
