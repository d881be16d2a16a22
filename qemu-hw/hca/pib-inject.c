/*
 * pib HCA device model - error injection
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Faults on demand, for people who develop driver and provider logic: a work
 * request that completes in error, packets lost on the wire, interrupts that
 * arrive late.  They are asked for through QOM properties of the device,
 * which can be set on the command line (-device pib-hca,inject-drop-tx=1) or
 * at any time with qom-set over QMP:
 *
 *   { "execute": "qom-set", "arguments": { "path": "/machine/peripheral/pib0",
 *     "property": "inject-drop-tx", "value": 1 } }
 *
 *   inject-wr-error        "QPN:INDEX:STATUS": the next time QP QPN starts
 *                          send WQE INDEX (mod 2^16), it fails locally with
 *                          completion status STATUS (a number 1..21 or a name
 *                          such as RETRY_EXC_ERR): the WQE completes with it
 *                          in order and the QP goes to ERR, as with a real
 *                          local error.  One shot; "" disarms.  Reads back
 *                          what is armed, "" once it fired.
 *   inject-drop-tx         N: the next N packets the port transmits are lost
 *                          (counted as sent; the peer never sees them)
 *   inject-drop-rx         N: the next N packets that arrive are lost before
 *                          the port sees them
 *   inject-drop-opcode     "" (any packet) or an IB opcode, by name
 *                          (RC_ACKNOWLEDGE) or number: the drop counters only
 *                          count down on packets with this BTH opcode
 *   inject-irq-delay-us    N: every MSI-X message is sent N microseconds
 *                          (virtual clock) after the device raised it;
 *                          notifications of a vector already waiting ride
 *                          along with it.  0: no delay.
 *   inject-irq-delay-count K: delay only the next K interrupts, then set
 *                          inject-irq-delay-us back to 0; 0: all of them
 *   inject-credit-hold     on: the port's receiver grants no more credit
 *                          (include/pib_link.h, "Credits"), as a receiver
 *                          whose buffers do not drain; the peer stops once it
 *                          has used what it had.  off: everything freed
 *                          meanwhile is granted at once.
 *
 * Every injected fault counts in injected_faults (PIB_CNT_INJECTED_FAULTS)
 * and is traced (pib_inject_*).  A bad value is refused with an error; it
 * never reaches the engines.
 *
 * What is armed is operator configuration, not guest state: a function reset
 * keeps it (only interrupts still waiting are forgotten), as it keeps the
 * other properties.
 *
 * Layout: names and parsing, then the hooks the engines call, then QOM glue.
 */

#include "qemu/osdep.h"
#include "qemu/cutils.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "hw/pci/msix.h"
#include "migration/vmstate.h"
#include "qemu/error-report.h"

#include "pib-internal.h"
#include "../trace.h"

/* Longest interrupt delay accepted: a minute of virtual time. */
#define PIB_INJECT_MAX_IRQ_DELAY_US     (60u * 1000 * 1000)

/*
 * Helpers: names and parsing
 */

/* enum pib_cqe_status, without the PIB_WC_ prefix */
#define PIB_WC_NAME(name, value) [PIB_WC_##name] = #name,
static const char *const pib_wc_status_names[] = {
    PIB_WC_STATUSES(PIB_WC_NAME)
};
#undef PIB_WC_NAME

static const char *pib_wc_status_name(uint8_t status)
{
    return status < ARRAY_SIZE(pib_wc_status_names) ?
           pib_wc_status_names[status] : "?";
}

/*
 * A whole string that is an unsigned number (decimal, or 0x hex) no larger
 * than max.  No sign, no blanks: "-1" is refused, not wrapped around; a
 * leading 0 is decimal ("010" is ten), not C's octal.
 */
static bool pib_parse_uint(const char *str, uint64_t max, uint64_t *val)
{
    bool hex = str[0] == '0' && (str[1] == 'x' || str[1] == 'X');
    const char *digits = hex ? str + 2 : str;

    return (hex ? g_ascii_isxdigit(digits[0]) : g_ascii_isdigit(digits[0])) &&
           qemu_strtou64(digits, NULL, hex ? 16 : 10, val) == 0 && *val <= max;
}

/* A completion status: a number or a name (case does not matter). */
static bool pib_parse_wc_status(const char *str, uint8_t *status)
{
    uint64_t val;
    size_t i;

    if (pib_parse_uint(str, PIB_WC_GENERAL_ERR, &val)) {
        *status = val;
        return val != PIB_WC_SUCCESS;
    }
    for (i = PIB_WC_SUCCESS + 1; i < ARRAY_SIZE(pib_wc_status_names); i++) {
        if (!g_ascii_strcasecmp(str, pib_wc_status_names[i])) {
            *status = i;
            return true;
        }
    }
    return false;
}

/* An IB opcode: a name from the device's opcode table, or 0..255. */
static bool pib_parse_opcode(const char *str, int *opcode)
{
    uint64_t val;
    int op;

    if (pib_parse_uint(str, 0xff, &val)) {
        *opcode = val;
        return true;
    }
    for (op = 0; op <= 0xff; op++) {
        if (pib_op_info(op) && !g_ascii_strcasecmp(str, pib_op_name(op))) {
            *opcode = op;
            return true;
        }
    }
    return false;
}

/*
 * The BTH opcode of a frame's IB packet, or -1 if it is too short to have
 * one.  Received frames are not checked yet, so nothing is trusted here.
 */
static int pib_packet_opcode(const PibPacket *p)
{
    const uint8_t *b = p->data + PIB_LINK_HDR_LEN;      /* LRH onwards */
    uint32_t len = pib_packet_ib_len(p);
    uint32_t off = sizeof(struct pib_lrh);

    if (len < off + sizeof(struct pib_bth)) {
        return -1;
    }
    if ((b[1] & 3) == PIB_LNH_IBA_GLOBAL) {
        off += sizeof(struct pib_grh);
        if (len < off + sizeof(struct pib_bth)) {
            return -1;
        }
    }
    return b[off];
}

static void pib_inject_fault(PibState *s)
{
    pib_count(s, PIB_CNT_INJECTED_FAULTS, 1);
}

/*
 * Hooks the engines call
 */

/*
 * The requester is starting send WQE idx of qp: should it fail?  If so,
 * *status is the completion status, and the fault is spent.
 */
bool pib_inject_wqe_error(PibQp *qp, uint32_t idx, uint8_t *status)
{
    PibInject *inj = &qp->s->inject;

    if (!inj->wr_armed || inj->wr_qpn != qp->qpn ||
        inj->wr_index != (idx & 0xffff)) {
        return false;
    }
    inj->wr_armed = false;
    *status = inj->wr_status;
    pib_inject_fault(qp->s);
    trace_pib_inject_wr_error(qp->qpn, idx, *status,
                              pib_wc_status_name(*status));
    return true;
}

/* Is a packet lost on its way out (tx) or in (!tx)?  Spends one drop. */
bool pib_inject_drop(PibState *s, const PibPacket *p, bool tx)
{
    PibInject *inj = &s->inject;
    uint32_t *left = tx ? &inj->drop_tx : &inj->drop_rx;
    int opcode;

    if (*left == 0) {
        return false;
    }
    opcode = pib_packet_opcode(p);
    if (inj->drop_opcode >= 0 && opcode != inj->drop_opcode) {
        return false;
    }
    (*left)--;
    pib_inject_fault(s);
    trace_pib_inject_drop(s->node_guid, tx ? "tx" : "rx",
                          opcode >= 0 ? pib_op_name(opcode) : "-", *left);
    return true;
}

static void pib_inject_irq_timer_cb(void *opaque)
{
    PibIrqDelay *d = opaque;

    trace_pib_inject_irq_fire(d->vector);
    pib_irq_raise(d->s, d->vector);
}

/*
 * The device raises MSI-X vector: hold it back?  A vector already held back
 * absorbs the new notification (one message will go, as MSI-X coalesces a
 * pending vector too).  The message goes when the vector's timer fires.
 */
bool pib_inject_irq_delay(PibState *s, unsigned vector)
{
    PibInject *inj = &s->inject;
    PibIrqDelay *d = &inj->irq[vector];

    if (timer_pending(d->timer)) {
        trace_pib_inject_irq_coalesced(vector);
        return true;
    }
    if (inj->irq_delay_us == 0) {
        return false;
    }
    timer_mod(d->timer, qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) +
                        (int64_t)inj->irq_delay_us * SCALE_US);
    pib_inject_fault(s);
    trace_pib_inject_irq_delay(vector, inj->irq_delay_us);
    if (inj->irq_delay_count && --inj->irq_delay_count == 0) {
        inj->irq_delay_us = 0;      /* the last one asked for */
    }
    return true;
}

/* Function reset: interrupts still held back are forgotten. */
void pib_inject_reset(PibState *s)
{
    unsigned i;

    for (i = 0; i < PIB_MSIX_VECTORS; i++) {
        timer_del(s->inject.irq[i].timer);
    }
}

void pib_inject_realize(PibState *s)
{
    unsigned i;

    for (i = 0; i < PIB_MSIX_VECTORS; i++) {
        s->inject.irq[i] = (PibIrqDelay) {
            .s = s,
            .vector = i,
            .timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, pib_inject_irq_timer_cb,
                                  &s->inject.irq[i]),
        };
    }
}

void pib_inject_unrealize(PibState *s)
{
    unsigned i;

    for (i = 0; i < PIB_MSIX_VECTORS; i++) {
        timer_free(s->inject.irq[i].timer);
        s->inject.irq[i].timer = NULL;
    }
}

/*
 * Migration: what is armed and what is held back goes with the machine (a subsection of
 * pib-hca, only when there is some).  A held interrupt is a message the device owes the
 * guest: its timer travels with its deadline on the virtual clock, and fires on the new
 * machine.  The stream is untrusted: a status, opcode or delay no setter could make, or a
 * held interrupt due later than the longest delay, is refused.
 */
static bool pib_inject_needed(void *opaque)
{
    PibInject *inj = &((PibState *)opaque)->inject;
    unsigned i;

    if (inj->wr_armed || inj->drop_tx || inj->drop_rx || inj->irq_delay_us) {
        return true;
    }
    for (i = 0; i < PIB_MSIX_VECTORS; i++) {
        if (timer_pending(inj->irq[i].timer)) {
            return true;
        }
    }
    return false;
}

static int pib_inject_post_load(void *opaque, int version_id)
{
    PibInject *inj = &((PibState *)opaque)->inject;
    uint64_t latest = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) +
                      (uint64_t)PIB_INJECT_MAX_IRQ_DELAY_US * SCALE_US;
    unsigned i;

    for (i = 0; i < PIB_MSIX_VECTORS; i++) {
        if (timer_pending(inj->irq[i].timer) &&
            timer_expire_time_ns(inj->irq[i].timer) > latest) {
            break;
        }
    }
    if ((inj->wr_armed && (inj->wr_status < 1 || inj->wr_status > PIB_WC_GENERAL_ERR ||
                           inj->wr_qpn > PIB_QPN_MASK)) ||
        inj->drop_opcode < -1 || inj->drop_opcode > 0xff ||
        inj->irq_delay_us > PIB_INJECT_MAX_IRQ_DELAY_US || i < PIB_MSIX_VECTORS) {
        error_report("pib-hca: migration stream refused: error injection state "
                     "(WQE status %u, drop opcode %d, interrupt delay %u us, a held "
                     "interrupt due later than the longest delay: %s)",
                     inj->wr_status, inj->drop_opcode, inj->irq_delay_us,
                     i < PIB_MSIX_VECTORS ? "yes" : "no");
        /* Nothing refused stays armed or held. */
        pib_inject_reset((PibState *)opaque);
        inj->wr_armed = false;
        inj->drop_tx = inj->drop_rx = inj->irq_delay_us = inj->irq_delay_count = 0;
        inj->drop_opcode = -1;
        return -EINVAL;
    }
    return 0;
}

static const VMStateDescription vmstate_pib_irq_delay = {
    .name = "pib-hca/irq-delay",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_TIMER_PTR(timer, PibIrqDelay),
        VMSTATE_END_OF_LIST()
    },
};

const VMStateDescription vmstate_pib_inject = {
    .name = "pib-hca/inject",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = pib_inject_needed,
    .post_load = pib_inject_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_BOOL(inject.wr_armed, PibState),
        VMSTATE_UINT32(inject.wr_qpn, PibState),
        VMSTATE_UINT16(inject.wr_index, PibState),
        VMSTATE_UINT8(inject.wr_status, PibState),
        VMSTATE_UINT32(inject.drop_tx, PibState),
        VMSTATE_UINT32(inject.drop_rx, PibState),
        VMSTATE_INT32(inject.drop_opcode, PibState),
        VMSTATE_UINT32(inject.irq_delay_us, PibState),
        VMSTATE_UINT32(inject.irq_delay_count, PibState),
        VMSTATE_STRUCT_ARRAY(inject.irq, PibState, PIB_MSIX_VECTORS, 1,
                             vmstate_pib_irq_delay, PibIrqDelay),
        VMSTATE_END_OF_LIST()
    },
};

/*
 * QOM glue: the properties.  Setters check the whole value first and change
 * nothing when it is bad.
 */

static char *pib_inject_get_wr_error(Object *obj, Error **errp)
{
    PibInject *inj = &PIB_HCA(obj)->inject;

    if (!inj->wr_armed) {
        return g_strdup("");
    }
    return g_strdup_printf("%" PRIu32 ":%" PRIu16 ":%s", inj->wr_qpn,
                           inj->wr_index, pib_wc_status_name(inj->wr_status));
}

static void pib_inject_set_wr_error(Object *obj, const char *value,
                                    Error **errp)
{
    PibInject *inj = &PIB_HCA(obj)->inject;
    g_auto(GStrv) f = g_strsplit(value, ":", -1);
    uint64_t qpn, index;
    uint8_t status;

    if (!value[0]) {
        inj->wr_armed = false;
        trace_pib_inject_set("inject-wr-error", "(disarmed)");
        return;
    }
    if (g_strv_length(f) != 3) {
        error_setg(errp, "inject-wr-error: '%s' is not QPN:WQE_INDEX:STATUS",
                   value);
        return;
    }
    if (!pib_parse_uint(f[0], PIB_QPN_MASK, &qpn)) {
        error_setg(errp, "inject-wr-error: QPN '%s' is not a number "
                   "0..0xffffff", f[0]);
        return;
    }
    if (!pib_parse_uint(f[1], 0xffff, &index)) {
        error_setg(errp, "inject-wr-error: WQE index '%s' is not a number "
                   "0..65535 (the index mod 2^16)", f[1]);
        return;
    }
    if (!pib_parse_wc_status(f[2], &status)) {
        error_setg(errp, "inject-wr-error: status '%s' is not an error "
                   "completion status (1..%d, or a name such as "
                   "RETRY_EXC_ERR)", f[2], PIB_WC_GENERAL_ERR);
        return;
    }
    inj->wr_armed = true;
    inj->wr_qpn = qpn;
    inj->wr_index = index;
    inj->wr_status = status;
    trace_pib_inject_set("inject-wr-error", value);
}

static char *pib_inject_get_drop_opcode(Object *obj, Error **errp)
{
    int op = PIB_HCA(obj)->inject.drop_opcode;

    if (op < 0) {
        return g_strdup("");
    }
    return pib_op_info(op) ? g_strdup(pib_op_name(op)) :
                             g_strdup_printf("0x%02x", op);
}

static void pib_inject_set_drop_opcode(Object *obj, const char *value,
                                       Error **errp)
{
    PibInject *inj = &PIB_HCA(obj)->inject;
    int op = -1;

    if (value[0] && g_ascii_strcasecmp(value, "any") &&
        !pib_parse_opcode(value, &op)) {
        error_setg(errp, "inject-drop-opcode: '%s' is not an IB opcode "
                   "(a name such as RC_ACKNOWLEDGE, or 0..255; '' for any)",
                   value);
        return;
    }
    inj->drop_opcode = op;
    trace_pib_inject_set("inject-drop-opcode", value[0] ? value : "(any)");
}

/* The uint32 properties: which field, and the largest value accepted. */
typedef struct PibInjectU32 {
    const char *name;
    size_t offset;          /* in PibInject */
    uint32_t max;
    const char *desc;
} PibInjectU32;

static const PibInjectU32 pib_inject_u32_props[] = {
    { "inject-drop-tx", offsetof(PibInject, drop_tx), UINT32_MAX,
      "lose the next N packets the port transmits" },
    { "inject-drop-rx", offsetof(PibInject, drop_rx), UINT32_MAX,
      "lose the next N packets that arrive at the port" },
    { "inject-irq-delay-us", offsetof(PibInject, irq_delay_us),
      PIB_INJECT_MAX_IRQ_DELAY_US,
      "send each MSI-X message N us (virtual time) late; 0 = on time" },
    { "inject-irq-delay-count", offsetof(PibInject, irq_delay_count),
      UINT32_MAX,
      "delay only the next K interrupts, then stop; 0 = all of them" },
};

static uint32_t *pib_inject_u32(Object *obj, const PibInjectU32 *p)
{
    return (uint32_t *)((uint8_t *)&PIB_HCA(obj)->inject + p->offset);
}

static void pib_inject_get_u32(Object *obj, Visitor *v, const char *name,
                               void *opaque, Error **errp)
{
    uint32_t val = *pib_inject_u32(obj, opaque);

    visit_type_uint32(v, name, &val, errp);
}

static void pib_inject_set_u32(Object *obj, Visitor *v, const char *name,
                               void *opaque, Error **errp)
{
    const PibInjectU32 *p = opaque;
    g_autofree char *str = NULL;
    uint32_t val;

    if (!visit_type_uint32(v, name, &val, errp)) {
        return;
    }
    if (val > p->max) {
        error_setg(errp, "%s: %" PRIu32 " is more than %" PRIu32, name, val,
                   p->max);
        return;
    }
    *pib_inject_u32(obj, p) = val;
    str = g_strdup_printf("%" PRIu32, val);
    trace_pib_inject_set(name, str);
}

void pib_inject_init(PibState *s)
{
    s->inject.drop_opcode = -1;
}

static bool pib_inject_get_credit_hold(Object *obj, Error **errp)
{
    return PIB_HCA(obj)->link.fc_hold;
}

static void pib_inject_set_credit_hold(Object *obj, bool value, Error **errp)
{
    PibState *s = PIB_HCA(obj);

    trace_pib_inject_set("inject-credit-hold", value ? "on" : "off");
    if (value) {
        pib_count(s, PIB_CNT_INJECTED_FAULTS, 1);
    }
    pib_link_set_credit_hold(s, value);
}

void pib_inject_class_init(ObjectClass *oc)
{
    size_t i;

    object_class_property_add_str(oc, "inject-wr-error",
                                  pib_inject_get_wr_error,
                                  pib_inject_set_wr_error);
    object_class_property_set_description(oc, "inject-wr-error",
        "QPN:WQE_INDEX:STATUS: complete that send WQE with that status "
        "(number or name), QP to ERR; one shot, '' disarms");
    object_class_property_add_str(oc, "inject-drop-opcode",
                                  pib_inject_get_drop_opcode,
                                  pib_inject_set_drop_opcode);
    object_class_property_set_description(oc, "inject-drop-opcode",
        "IB opcode (name or number) inject-drop-tx/rx apply to; '' = any");
    for (i = 0; i < ARRAY_SIZE(pib_inject_u32_props); i++) {
        const PibInjectU32 *p = &pib_inject_u32_props[i];

        object_class_property_add(oc, p->name, "uint32", pib_inject_get_u32,
                                  pib_inject_set_u32, NULL, (void *)p);
        object_class_property_set_description(oc, p->name, p->desc);
    }
    object_class_property_add_bool(oc, "inject-credit-hold", pib_inject_get_credit_hold,
                                   pib_inject_set_credit_hold);
    object_class_property_set_description(oc, "inject-credit-hold",
        "on: the port grants no more link credit until set off again");
}
