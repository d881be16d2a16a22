/*
 * pib HCA device model - object tables
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * One table type serves every object type (PibTable, pib-objects.h): PDs, MRs, memory
 * windows, CQs, SRQs, XRCDs, QPs and device memory allocations.  The numbers in a table are
 * the ones the driver names its objects by, so every number that comes from the guest (an
 * admin command, a WQE, a doorbell, a packet's DQPN) is looked up here, and the range check is
 * in one place.
 */

#include "qemu/osdep.h"

#include "pib-internal.h"

static void pib_table_init(PibTable *t, uint32_t first, uint32_t max, bool keyed)
{
    *t = (PibTable) {
        .first = first,
        .max = max,
        .obj = g_new0(void *, max + 1),
        .key = keyed ? g_new0(uint8_t, max + 1) : NULL,
    };
}

static void pib_table_fini(PibTable *t)
{
    g_free(t->obj);
    g_free(t->key);
    t->obj = NULL;
    t->key = NULL;
}

/* At realize: every table empty.  QPs are numbered from QP0; the others from 1. */
void pib_tables_realize(PibState *s)
{
    pib_table_init(&s->pds, 1, PIB_MAX_PD, false);
    pib_table_init(&s->mrs, 1, PIB_MAX_MR, true);
    pib_table_init(&s->mws, 1, PIB_MAX_MW, true);
    pib_table_init(&s->cqs, 1, PIB_MAX_CQ, false);
    pib_table_init(&s->srqs, 1, PIB_MAX_SRQ, false);
    pib_table_init(&s->xrcds, 1, PIB_MAX_XRCD, false);
    pib_table_init(&s->qps, PIB_QPN_SMI, PIB_QPN_LIMIT - 1, false);
    pib_table_init(&s->dms, 1, PIB_MAX_DM, false);
}

/* At unrealize, after every object was freed. */
void pib_tables_unrealize(PibState *s)
{
    pib_table_fini(&s->pds);
    pib_table_fini(&s->mrs);
    pib_table_fini(&s->mws);
    pib_table_fini(&s->cqs);
    pib_table_fini(&s->srqs);
    pib_table_fini(&s->xrcds);
    pib_table_fini(&s->qps);
    pib_table_fini(&s->dms);
}

void *pib_table_get(const PibTable *t, uint32_t n)
{
    return n >= t->first && n <= t->max ? t->obj[n] : NULL;
}

/* The lowest free number, or 0 when the table is full (tables that allocate start at 1). */
uint32_t pib_table_alloc(const PibTable *t)
{
    uint32_t n;

    for (n = MAX(t->first, 1); n <= t->max; n++) {
        if (!t->obj[n]) {
            return n;
        }
    }
    return 0;
}

/* Put obj at n (NULL: free n).  n comes from pib_table_alloc() or a checked lookup. */
void pib_table_set(PibTable *t, uint32_t n, void *obj)
{
    assert(n >= t->first && n <= t->max);
    t->obj[n] = obj;
}

/* A keyed table's next key byte for n: every reuse of an index gets a new key. */
uint8_t pib_table_next_key(PibTable *t, uint32_t n)
{
    assert(t->key && n <= t->max);
    return ++t->key[n];
}

/* The key byte a consumer chose for n (a fast registration), counted on from there. */
void pib_table_set_key(PibTable *t, uint32_t n, uint8_t key)
{
    assert(t->key && n <= t->max);
    t->key[n] = key;
}

/* Function reset: the table is empty (its objects are freed by their owners) and keys restart. */
void pib_table_reset(PibTable *t)
{
    memset(t->obj, 0, (t->max + 1) * sizeof(*t->obj));
    if (t->key) {
        memset(t->key, 0, t->max + 1);
    }
}

/* How many objects the table holds (traces, the objects-* properties); 0 before realize. */
uint32_t pib_table_count(const PibTable *t)
{
    uint32_t n, count = 0;

    if (!t->obj) {
        return 0;
    }
    for (n = t->first; n <= t->max; n++) {
        count += t->obj[n] != NULL;
    }
    return count;
}
