/*
 * pib HCA device model - teach mode: the mistakes real hardware would punish silently
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The model forgives what a driver may get away with on this device but not on real
 * hardware, where it corrupts memory, loses a command or leaves a ring half-updated, with
 * nothing to say so.  With the property teach=on (off by default; `pibvm up --no-driver`
 * sets it, for a driver of your own, labs/README.md), each such mistake is reported:
 * logged as a guest error ("pib: teach: RULE: what", QEMU's -d guest_errors), traced
 * (pib_teach) and counted in the read-only property teach-reports, which a grader reads.
 * What the device does is the same either way.  The rules:
 *
 *   config-while-ready  a ring register (AQ_DEPTH, AQ_SQ_*, AQ_CQ_*, AEQ_*, CEQ_* but the
 *                       doorbells) written while the device is READY: the device latched the
 *                       rings at CONTROL.ENABLE, so the write does nothing until the next
 *                       ENABLE (a device that took it at once would run on a half-written
 *                       base address).  Program the rings, then enable.
 *   ring-not-memory     CONTROL.ENABLE with a ring (the admin SQ or CQ, the AEQ, the CEQ)
 *                       with a byte that is not memory the device can reach (one is probed in
 *                       each 4 KiB page the ring spans, and its last byte): not the
 *                       DMA address of a coherent allocation of the ring's whole size (a
 *                       kernel virtual address, or a ring larger than its allocation).  The
 *                       device finds out only at its first access, as a DMA error; real
 *                       hardware would write into whatever is there.
 *   cmd-id-reused       two admin commands waiting in the ring at once (between the device's
 *                       consumer index and the producer index of a doorbell) with the same
 *                       cmd_id: their completions, which echo it, cannot be told apart.
 *   eq-overrun          an event dropped because the AEQ (or the CEQ) is full: the driver
 *                       has not handed its entries back (AEQ_DB, CEQ_DB) after reading them.
 *                       The device counts the loss (AEQ_LOST) and goes on; real hardware
 *                       overruns the queue, an error the device may not survive.  Said once
 *                       until the driver acknowledges the queue again.
 *   page-not-memory     a page list (REG_MR, CREATE_CQ, CREATE_QP, CREATE_SRQ, RESIZE_CQ,
 *                       MODIFY_SRQ) names a page that is not memory the device can reach
 *                       (one byte of each page is probed): not a DMA address of pinned memory
 *                       (a kernel virtual address, a page of the list left unfilled).  The
 *                       device finds out only when it touches that page, as an error
 *                       completion or event; real hardware would read or write whatever is
 *                       there.
 *
 * What the hardware interface itself leaves undefined (a doorbell before ENABLE, an event
 * queue acknowledged past its producer, a register access of the wrong size, ...) is a guest
 * error whatever the mode: ERR_COUNT and ERR_LAST (include/pib_hw.h).  Teach reports are not
 * guest errors: they change neither register.  The count is not migrated.
 */

#include "qemu/osdep.h"
#include "qemu/bitmap.h"

#include "pib-internal.h"
#include "../trace.h"

static const char *const pib_teach_names[] = {
#define PIB_TEACH_NAME(id, name) [PIB_TEACH_##id] = name,
    PIB_TEACH_RULES(PIB_TEACH_NAME)
#undef PIB_TEACH_NAME
};

void pib_teach(PibState *s, enum pib_teach_rule rule, const char *fmt, ...)
{
    g_autofree char *what = NULL;
    va_list ap;

    if (!s->teach) {
        return;
    }
    va_start(ap, fmt);
    what = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    trace_pib_teach(pib_teach_names[rule], what);
    qemu_log_mask(LOG_GUEST_ERROR, "pib: teach: %s: %s\n", pib_teach_names[rule], what);
    if (s->teach_reports != UINT32_MAX) {
        s->teach_reports++;
    }
}

/* Can the device read len bytes at addr into buf?  (A probe: a failure is no guest error.) */
static bool pib_teach_read(PibState *s, uint64_t addr, void *buf, uint32_t len)
{
    return pib_dma_try(s, addr, buf, len, DMA_DIRECTION_TO_DEVICE) == MEMTX_OK;
}

/* One byte of each 4 KiB page the ring spans, and its last byte: all of it memory? */
static void pib_teach_ring(PibState *s, const char *name, uint64_t base, uint32_t depth,
                           uint32_t entry)
{
    uint64_t last = base + (uint64_t)depth * entry - 1;
    uint64_t addr = base, next;
    uint8_t byte;

    for (;;) {
        if (last < base || !pib_teach_read(s, addr, &byte, 1)) {
            pib_teach(s, PIB_TEACH_RING_NOT_MEMORY,
                      "the %s ring 0x%" PRIx64 "..0x%" PRIx64 " (%" PRIu32 " x %" PRIu32
                      " bytes) is not all memory the device can reach: 0x%" PRIx64 " is not",
                      name, base, last, depth, entry, addr);
            return;
        }
        if (addr == last) {
            return;
        }
        next = (addr | 0xfff) + 1;
        addr = next > last ? last : next;
    }
}

/* The rings CONTROL.ENABLE just latched (ring-not-memory). */
void pib_teach_enable(PibState *s)
{
    s->aeq.teach_told = s->ceq.teach_told = false;
    if (!s->teach) {
        return;
    }
    pib_teach_ring(s, "admin SQ", s->aq.sq_base, s->aq.depth, sizeof(struct pib_admin_cmd));
    pib_teach_ring(s, "admin CQ", s->aq.cq_base, s->aq.depth, sizeof(struct pib_admin_cqe));
    pib_teach_ring(s, "AEQ", s->aeq.base, s->aeq.depth, sizeof(struct pib_aeqe));
    if (s->ceq.depth) {
        pib_teach_ring(s, "CEQ", s->ceq.base, s->ceq.depth, sizeof(struct pib_ceqe));
    }
}

/*
 * AQ_DB moves the producer from sq_pi to pi: the commands from the device's consumer index up
 * to pi wait together (cmd-id-reused).  Those before sq_pi were checked at the doorbells that
 * posted them, so only a pair with a command of this doorbell is reported, once; a map of the
 * 65536 cmd_ids finds it in one pass.  Unreadable slots are left to the command's own DMA
 * error.
 */
void pib_teach_aq_doorbell(PibState *s, uint32_t pi)
{
    PibAdminQueue *q = &s->aq;
    g_autofree unsigned long *seen = NULL;
    struct pib_admin_cmd cmd;
    uint32_t i, slot;
    uint16_t id;

    if (!s->teach || pi - q->sq_ci < 2 || pi == q->sq_pi) {
        return;
    }
    seen = bitmap_new(1u << 16);
    for (i = q->sq_ci; i != pi; i++) {
        slot = i & (q->depth - 1);
        if (!pib_teach_read(s, q->sq_base + (uint64_t)slot * sizeof(cmd), &cmd,
                            sizeof(cmd))) {
            return;
        }
        id = le16_to_cpu(cmd.cmd_id);
        if (test_and_set_bit(id, seen) && i - q->sq_ci >= q->sq_pi - q->sq_ci) {
            pib_teach(s, PIB_TEACH_CMD_ID_REUSED,
                      "admin command %" PRIu32 " has cmd_id %u, like one still waiting "
                      "(from %" PRIu32 ")", i, id, q->sq_ci);
            return;
        }
    }
}

/* A ring register written (config-while-ready). */
void pib_teach_ring_reg(PibState *s, const char *reg)
{
    if (s->regs.status & PIB_STATUS_READY) {
        pib_teach(s, PIB_TEACH_CONFIG_WHILE_READY,
                  "%s written while READY: the device latched the rings at CONTROL.ENABLE, "
                  "the write takes effect at the next ENABLE", reg);
    }
}

/* An event dropped on a full event queue (eq-overrun), once until its next doorbell. */
void pib_teach_eq_overrun(PibState *s, PibEventQueue *q, const char *eq, const char *what)
{
    if (!s->teach || q->teach_told) {
        return;
    }
    q->teach_told = true;
    pib_teach(s, PIB_TEACH_EQ_OVERRUN,
              "the %s is full (%" PRIu32 " entries the driver has not handed back since its "
              "doorbell at %" PRIu32 "): %s dropped", eq, q->pi - q->ci, q->ci, what);
}

/* The pages of a page list the device took (page-not-memory): one byte of each probed. */
void pib_teach_pages(PibState *s, const uint64_t *pages, uint32_t npages, const char *cmd)
{
    uint32_t i;
    uint8_t byte;

    if (!s->teach) {
        return;
    }
    for (i = 0; i < npages; i++) {
        if (!pib_teach_read(s, pages[i], &byte, 1)) {
            pib_teach(s, PIB_TEACH_PAGE_NOT_MEMORY,
                      "%s: page %" PRIu32 " of %" PRIu32 " (0x%" PRIx64 ") is not memory the "
                      "device can reach", cmd, i, npages, pages[i]);
            return;
        }
    }
}
