/*
 * pib HCA device model - device memory
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Memory on the card (include/pib_hw.h, "Device memory"): dm-size bytes of RAM that the host
 * sees in BAR0 after the registers and the device reaches directly, as an MR's memory
 * (REG_DM_MR, pib-mr.c).  Being RAM, host reads and writes never trap, and a migration carries
 * it as a RAM block of the device's own; the device marks what it writes dirty, as a DMA
 * write into guest RAM is.  The device owns the allocation, in pages: ALLOC_DM, DEALLOC_DM.
 */

#include "qemu/osdep.h"
#include "qemu/bitmap.h"
#include "qemu/bswap.h"
#include "qapi/error.h"

#include "pib-internal.h"
#include "../trace.h"

#define PIB_DM_PAGES(s)     ((s)->dm_size / PIB_DM_PAGE_SIZE)

/* At realize: BAR0 is the registers alone, or with device memory twice dm_size. */
bool pib_dm_realize(PibState *s, Error **errp)
{
    Error *err = NULL;

    if (!s->dm_size) {
        return true;
    }
    if (!is_power_of_2(s->dm_size) || s->dm_size < PIB_DM_PAGE_SIZE ||
        s->dm_size > PIB_DM_MAX_SIZE) {
        error_setg(errp, "pib-hca: dm-size %" PRIu32 " is not 0 or a power of two "
                   "from %u to %u", s->dm_size, PIB_DM_PAGE_SIZE, PIB_DM_MAX_SIZE);
        return false;
    }
    memory_region_init_ram(&s->dm_mr, OBJECT(s), "pib-dm", s->dm_size, &err);
    if (err) {
        error_propagate(errp, err);
        return false;
    }
    memory_region_init(&s->bar0_mr, OBJECT(s), "pib-bar0", 2ull * s->dm_size);
    memory_region_add_subregion(&s->bar0_mr, 0, &s->regs_mr);
    memory_region_add_subregion(&s->bar0_mr, s->dm_size, &s->dm_mr);
    s->dm_pages = bitmap_new(PIB_DM_PAGES(s));
    return true;
}

void pib_dm_unrealize(PibState *s)
{
    g_free(s->dm_pages);
    s->dm_pages = NULL;
}

/* The memory region BAR0 is. */
MemoryRegion *pib_dm_bar0(PibState *s)
{
    return s->dm_size ? &s->bar0_mr : &s->regs_mr;
}

/* Byte addr of the device memory. */
static void *pib_dm_ptr(PibState *s, uint64_t addr)
{
    return (uint8_t *)memory_region_get_ram_ptr(&s->dm_mr) + addr;
}

static void pib_dm_free(PibState *s, PibDm *dm)
{
    bitmap_clear(s->dm_pages, dm->start / PIB_DM_PAGE_SIZE,
                 DIV_ROUND_UP(dm->length, PIB_DM_PAGE_SIZE));
    pib_table_set(&s->dms, dm->dm, NULL);
    g_free(dm);
}

uint8_t pib_cmd_alloc_dm(PibState *s, const struct pib_admin_cmd *cmd,
                         PibAdminResult *res)
{
    uint64_t length = le64_to_cpu(cmd->in.alloc_dm.length);
    unsigned long npages, first;
    uint32_t n;
    PibDm *dm;

    if (length == 0 || length > s->dm_size) {
        return pib_cmd_reject("ALLOC_DM", "bad length", length, PIB_AQ_BAD_PARAM);
    }
    npages = DIV_ROUND_UP(length, PIB_DM_PAGE_SIZE);
    first = bitmap_find_next_zero_area(s->dm_pages, PIB_DM_PAGES(s), 0, npages, 0);
    if (first >= PIB_DM_PAGES(s)) {
        return pib_cmd_reject("ALLOC_DM", "no free run of pages", npages,
                              PIB_AQ_NO_RESOURCES);
    }
    n = pib_table_alloc(&s->dms);
    if (!n) {
        return pib_cmd_reject("ALLOC_DM", "table full", PIB_MAX_DM, PIB_AQ_NO_RESOURCES);
    }
    dm = g_new0(PibDm, 1);
    dm->dm = n;
    dm->start = (uint64_t)first * PIB_DM_PAGE_SIZE;
    dm->length = length;
    bitmap_set(s->dm_pages, first, npages);
    pib_table_set(&s->dms, n, dm);
    /* Its pages read zero: nothing of the last user's stays. */
    memset(pib_dm_ptr(s, dm->start), 0, npages * PIB_DM_PAGE_SIZE);
    memory_region_set_dirty(&s->dm_mr, dm->start, npages * PIB_DM_PAGE_SIZE);
    trace_pib_dm_alloc(n, dm->start, length);
    res->result0 = n;
    res->result1 = dm->start;
    return PIB_AQ_OK;
}

uint8_t pib_cmd_dealloc_dm(PibState *s, const struct pib_admin_cmd *cmd,
                           PibAdminResult *res)
{
    uint32_t n = le32_to_cpu(cmd->in.obj.num);
    PibDm *dm = pib_dm_lookup(s, n);

    if (!dm) {
        return pib_cmd_reject("DEALLOC_DM", "no such DM", n, PIB_AQ_BAD_RESOURCE);
    }
    if (dm->refcnt) {
        return pib_cmd_reject("DEALLOC_DM", "MRs in it", dm->refcnt, PIB_AQ_BUSY);
    }
    trace_pib_obj("dealloc", "DM", n);
    pib_dm_free(s, dm);
    return PIB_AQ_OK;
}

/*
 * Copy between buf and [addr, addr + len) of the device memory: an MR's, whose range in its DM
 * was checked.  (Anything else is refused, as an access outside guest RAM would be.)
 */
bool pib_dm_rw(PibState *s, uint64_t addr, void *buf, uint32_t len, DMADirection dir)
{
    if (!pib_range_in(addr, len, 0, s->dm_size)) {
        return false;
    }
    if (dir == DMA_DIRECTION_TO_DEVICE) {
        memcpy(buf, pib_dm_ptr(s, addr), len);
    } else {
        memcpy(pib_dm_ptr(s, addr), buf, len);
        memory_region_set_dirty(&s->dm_mr, addr, len);
    }
    trace_pib_dm_access(dir == DMA_DIRECTION_TO_DEVICE ? "read" : "write", addr, len);
    return true;
}

/* Function reset: every allocation goes (after the MRs in them). */
void pib_dm_reset_all(PibState *s)
{
    uint32_t i;
    PibDm *dm;

    PIB_TABLE_FOREACH(&s->dms, i, dm) {
        g_free(dm);
    }
    pib_table_reset(&s->dms);
    if (s->dm_pages) {
        bitmap_zero(s->dm_pages, PIB_DM_PAGES(s));
    }
}
