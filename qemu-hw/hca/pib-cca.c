/*
 * pib HCA device model - the CA's congestion control (IBTA Annex A10.2.2 and A10.3)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * What the CA does with the settings an SM wrote into its CC agent (fabric/pib-cc.c:
 * CACongestionSetting, the CongestionControlTable):
 *
 *   BECN owed   an RC or XRC request that arrives with FECN (a switch met congestion on its
 *               way, fabric/pib-cc.c) makes the responder set BECN on the next ACK or
 *               response of that QP (pib-resp.c).
 *   CNP         UD and UC send no responses: a UD or UC packet that arrives with FECN is
 *               answered at once with a congestion notification packet (A10.2.2.1.1,
 *               PIB_OP_CNP in include/pib_link.h) to the QP that sent it, on the SL and with
 *               the P_Key it came with; a UC QP sends it to its peer, a UD QP to the packet's
 *               SLID and source QP (LID-routed: one subnet).  Not for multicast (every member
 *               would answer one packet) nor QP0.  The CNP that reaches the sender counts as
 *               a BECN for that QP on the CNP's SL.
 *   the index   each response that reaches the requester with BECN (or a CNP) raises an
 *               index into the congestion control table (CCTI) by CCTI_Increase of the QP's
 *               SL, up to the table's CCTI_Limit.  The index is the QP's own (PortControl
 *               0) or its SL's, shared by every QP sending on that SL (PortControl 1).
 *               Every CCTI_Timer (1.024 us units; 0: never) it falls by one, down to
 *               CCTI_Min.  A rise to Trigger_Threshold logs an event in the CA's
 *               CongestionLog.
 *   the delay   the requester leaves at least the injection rate delay of the table's entry
 *               at the index between two packets of a QP: (PIB_CCA_PKT_NS >> shift) x
 *               multiplier, where PIB_CCA_PKT_NS is the time a 4096-byte packet takes on the
 *               port's 4X QDR link.  (An SM's table has 0 at index 0: no delay.)
 *
 *                      BECN: + CCTI_Increase, at most CCTI_Limit
 *     AT CCTI_Min  ---------------------------------------------->  ABOVE CCTI_Min
 *          ^                                                       |  ^   | BECN: up again;
 *          +---- each CCTI_Timer: - 1, down to CCTI_Min -----------+  +---+ CCTI_Timer: - 1
 *
 * The index falls lazily: it is kept with the time it was last brought up to date, and
 * cca_index() takes off the timer periods since, so no timer runs for it (the cca-index
 * property reads the highest one, pib_cca_max_index()).  The delay's own timer only wakes a
 * QP that waits.  Not saved in a migration stream: a loaded device starts with every index at
 * 0 (the settings themselves travel, fabric/pib-cc.c).
 */

#include "qemu/osdep.h"

#include "pib-internal.h"
#include "../trace.h"

#define PIB_CCA_PKT_NS          1024    /* 4096 bytes at 32 Gb/s (4X QDR's data rate) */
#define PIB_CCA_TIMER_UNIT_NS   1024    /* CCTI_Timer's unit: 1.024 us */

static int64_t cca_now(void)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
}

static const struct pib_cc_ca_entry *cca_entry(PibState *s, uint8_t sl)
{
    return &s->mgmt.cc.ca.entries[sl & 0xf];
}

/* Does the SM use congestion control here at all?  Nothing set: no index, no delay. */
static bool cca_off(PibState *s)
{
    return s->mgmt.cc.ccti_limit == 0 && s->mgmt.cc.cct[0] == 0;
}

static PibCcaIndex *cca_index_of(PibQp *qp, uint8_t sl)
{
    if (be16_to_cpu(qp->s->mgmt.cc.ca.port_control_be) & PIB_CC_CA_PORT_SL_BASED) {
        return &qp->s->cca_sl[sl & 0xf];
    }
    return &qp->cca;
}

/* The index x of SL sl's settings at now: what CCTI_Timer took off since it was updated. */
static uint16_t cca_index(PibState *s, PibCcaIndex *x, uint8_t sl, int64_t now)
{
    const struct pib_cc_ca_entry *e = cca_entry(s, sl);
    uint16_t limit = s->mgmt.cc.ccti_limit;
    uint16_t min = MIN(e->ccti_min, limit);
    uint64_t period = (uint64_t)be16_to_cpu(e->ccti_timer_be) * PIB_CCA_TIMER_UNIT_NS;
    uint64_t steps;

    x->ccti = MIN(x->ccti, limit);      /* (an SM may have shrunk the table since) */
    if (x->ccti <= min || period == 0) {
        x->since_ns = now;              /* the timer is not running */
        return x->ccti;
    }
    steps = (uint64_t)(now - x->since_ns) / period;
    if (steps >= x->ccti - min) {
        x->ccti = min;
        x->since_ns = now;
    } else if (steps) {
        x->ccti -= steps;
        x->since_ns += steps * period;
    }
    return x->ccti;
}

/* qp's packets on sl met congestion on their way to (rlid, rqpn): its index rises. */
static void cca_raise(PibQp *qp, uint8_t sl, uint16_t rlid, uint32_t rqpn)
{
    PibState *s = qp->s;
    const struct pib_cc_ca_entry *e = cca_entry(s, sl);
    PibCcaIndex *x = cca_index_of(qp, sl);
    uint16_t was = cca_index(s, x, x->sl, cca_now());

    x->ccti = MIN(was + e->ccti_increase, s->mgmt.cc.ccti_limit);
    x->sl = sl & 0xf;
    trace_pib_cca_becn(qp->qpn, sl, was, x->ccti);
    if (e->trigger_threshold && was < e->trigger_threshold &&
        x->ccti >= e->trigger_threshold) {
        pib_cc_ca_log(&s->mgmt.cc, qp->qpn, sl,
                      qp->type == PIB_QPT_UC ? 1 : pib_qp_type_is_ud(qp->type) ? 3 : 0,
                      s->port.mgmt.lid, rlid, rqpn);
    }
}

/* A response to qp (sending on sl) came with BECN. */
void pib_cca_becn(PibQp *qp, uint8_t sl)
{
    cca_raise(qp, sl, qp->av.dlid, qp->dest_qpn);
}

/*
 * A UD or UC packet (pi) came to qp with FECN: the CNP back to the QP that sent it, from the
 * LID the packet came to (its path bits).  A CNP carries no source QP, so a UD sender logs
 * the remote QP as 0.
 */
void pib_cca_cnp_tx(PibQp *qp, const PibPktInfo *pi)
{
    PibState *s = qp->s;
    bool ud = pib_qp_type_is_ud(qp->type);
    PibPktFields f;

    if (pib_lid_is_multicast(pi->dlid) || qp->type == PIB_QPT_SMI) {
        return;
    }
    f = (PibPktFields) {
        .opcode = PIB_OP_CNP,
        .becn = true,
        .dqpn = ud ? pi->src_qpn : qp->dest_qpn,
        .dlid = pi->slid,
        .sl = pi->sl,
        .pkey = pi->pkey,
        .src_path_bits = ud ? pi->dlid & ((1u << s->port.mgmt.lmc) - 1) :
                              qp->av.src_path_bits,
    };
    trace_pib_cca_cnp(qp->qpn, "sent", f.dlid, f.dqpn, f.sl);
    pib_xmit(s, pib_pkt_build(s, &f, NULL, 0), f.dlid);
}

/* A CNP (pi) came to qp: its packets on the CNP's SL met congestion. */
void pib_cca_cnp_rx(PibQp *qp, const PibPktInfo *pi)
{
    trace_pib_cca_cnp(qp->qpn, "received", pi->slid, pi->dqpn, pi->sl);
    cca_raise(qp, pi->sl, pi->slid, qp->type == PIB_QPT_UC ? qp->dest_qpn : 0);
}

/*
 * May qp send its next packet now?  No while its injection rate delay runs: its timer
 * schedules the QP when the delay is over.
 */
bool pib_cca_may_send(PibQp *qp)
{
    int64_t now;

    if (!qp->cca_next_ns) {
        return true;
    }
    now = cca_now();
    if (now >= qp->cca_next_ns) {
        qp->cca_next_ns = 0;
        return true;
    }
    timer_mod(qp->cca_timer, qp->cca_next_ns);
    return false;
}

/* qp sent a packet on sl: when the next may go. */
void pib_cca_sent(PibQp *qp, uint8_t sl)
{
    PibState *s = qp->s;
    PibCcaIndex *x;
    int64_t now;
    uint16_t entry, ccti;
    uint64_t delay;

    if (cca_off(s)) {
        return;
    }
    now = cca_now();
    x = cca_index_of(qp, sl);
    ccti = cca_index(s, x, x->sl, now);
    entry = s->mgmt.cc.cct[ccti];
    delay = (uint64_t)(PIB_CCA_PKT_NS >> PIB_CC_CCT_SHIFT(entry)) * PIB_CC_CCT_MULT(entry);
    if (delay) {
        qp->cca_next_ns = now + delay;
        trace_pib_cca_delay(qp->qpn, sl, ccti, delay);
    }
}

/*
 * The highest index now, of any QP or SL: what the cca-index property shows (0 when the SM
 * uses no congestion control), so that a test can see an index rise and fall.
 */
uint16_t pib_cca_max_index(PibState *s)
{
    int64_t now = cca_now();
    uint16_t max = 0;
    uint32_t n;
    PibQp *qp;

    if (cca_off(s)) {
        return 0;
    }
    for (n = 0; n < PIB_CC_SLS; n++) {
        max = MAX(max, cca_index(s, &s->cca_sl[n], s->cca_sl[n].sl, now));
    }
    for (n = 0; n <= s->qps.max; n++) {
        qp = pib_qp_lookup(s, n);
        if (qp) {
            max = MAX(max, cca_index(s, &qp->cca, qp->cca.sl, now));
        }
    }
    return max;
}

static void pib_cca_timer_cb(void *opaque)
{
    PibQp *qp = opaque;

    pib_qp_schedule(qp);
}

void pib_cca_init(PibQp *qp)
{
    qp->cca_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, pib_cca_timer_cb, qp);
}

void pib_cca_fini(PibQp *qp)
{
    timer_free(qp->cca_timer);
    qp->cca_timer = NULL;
}

/* The QP enters RESET or ERR: its index and delay are gone. */
void pib_cca_reset(PibQp *qp)
{
    timer_del(qp->cca_timer);
    qp->cca = (PibCcaIndex) { 0 };
    qp->cca_next_ns = 0;
}
