/*
 * pib HCA device model - multicast
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The HCA's multicast groups: which of its UD QPs joined which group (ATTACH_MCAST and
 * DETACH_MCAST: the driver attaches a QP once the SA has answered its MCMemberRecord join,
 * as IB does), and the delivery of a multicast packet to each of them (IBTA 10.5.2.9).
 *
 * A multicast packet is a UD packet to a multicast LID (0xc000..0xfffe) and the multicast QP
 * 0xffffff, with a GRH whose DGID is the group's MGID.  One that arrives reaches every QP
 * attached to the group it names, each under its own checks (state, P_Key, Q_Key), as if it
 * had been sent to that QP alone; one that names no group of this HCA, or lacks the GRH, is
 * dropped and counted.  A multicast packet this HCA sends goes out on the link and, when a QP
 * of this HCA is attached to the group, is also looped back to it.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "migration/vmstate.h"

#include "pib-internal.h"
#include "../trace.h"

static bool pib_mgid_valid(const uint8_t *mgid)
{
    return mgid[0] == 0xff;             /* IBTA 4.1.1: a multicast GID starts with 0xff */
}

/* The group with this MGID, or NULL. */
static PibMcastGroup *pib_mcast_find(PibState *s, const uint8_t *mgid)
{
    int i;

    for (i = 0; i < PIB_MAX_MCAST_GRP; i++) {
        if (s->mcast[i].nqps && !memcmp(s->mcast[i].mgid, mgid, 16)) {
            return &s->mcast[i];
        }
    }
    return NULL;
}

static int pib_mcast_slot(const PibMcastGroup *g, uint32_t qpn)
{
    uint32_t i;

    for (i = 0; i < g->nqps; i++) {
        if (g->qpns[i] == qpn) {
            return i;
        }
    }
    return -1;
}

static void pib_mcast_remove(PibMcastGroup *g, int slot)
{
    g->qpns[slot] = g->qpns[--g->nqps];     /* an empty group is a free slot */
}

uint8_t pib_cmd_attach_mcast(PibState *s, const struct pib_admin_cmd *cmd,
                             PibAdminResult *res)
{
    const struct pib_cmd_mcast *in = &cmd->in.mcast;
    uint32_t qpn = le32_to_cpu(in->qpn);
    uint16_t mlid = le16_to_cpu(in->mlid);
    PibQp *qp = pib_qp_lookup(s, qpn);
    PibMcastGroup *g;
    int i;

    if (!qp) {
        return pib_cmd_reject("ATTACH_MCAST", "no such QP", qpn, PIB_AQ_BAD_RESOURCE);
    }
    if (qp->type != PIB_QPT_UD) {
        return pib_cmd_reject("ATTACH_MCAST", "not a UD QP", qp->type, PIB_AQ_BAD_PARAM);
    }
    if (!pib_mgid_valid(in->mgid) || !pib_lid_is_multicast(mlid)) {
        return pib_cmd_reject("ATTACH_MCAST", "not a multicast MGID/MLID", mlid,
                              PIB_AQ_BAD_PARAM);
    }
    g = pib_mcast_find(s, in->mgid);
    if (g && g->mlid != mlid) {
        return pib_cmd_reject("ATTACH_MCAST", "the group has another MLID", g->mlid,
                              PIB_AQ_BAD_PARAM);
    }
    if (g && pib_mcast_slot(g, qpn) >= 0) {
        return PIB_AQ_OK;                   /* attached already */
    }
    for (i = 0; !g && i < PIB_MAX_MCAST_GRP; i++) {
        if (!s->mcast[i].nqps) {
            g = &s->mcast[i];
            memcpy(g->mgid, in->mgid, sizeof(g->mgid));
            g->mlid = mlid;
        }
    }
    if (!g || g->nqps == PIB_MAX_MCAST_QP) {
        return pib_cmd_reject("ATTACH_MCAST", g ? "group full" : "no free group", qpn,
                              PIB_AQ_NO_RESOURCES);
    }
    g->qpns[g->nqps++] = qpn;
    trace_pib_mcast(qpn, "attach", ldq_be_p(in->mgid + 8), mlid, g->nqps);
    return PIB_AQ_OK;
}

uint8_t pib_cmd_detach_mcast(PibState *s, const struct pib_admin_cmd *cmd,
                             PibAdminResult *res)
{
    const struct pib_cmd_mcast *in = &cmd->in.mcast;
    uint32_t qpn = le32_to_cpu(in->qpn);
    PibMcastGroup *g = pib_mcast_find(s, in->mgid);
    int slot = g ? pib_mcast_slot(g, qpn) : -1;

    if (slot < 0 || g->mlid != le16_to_cpu(in->mlid)) {
        return pib_cmd_reject("DETACH_MCAST", "QP not attached to that group", qpn,
                              PIB_AQ_BAD_PARAM);
    }
    pib_mcast_remove(g, slot);
    trace_pib_mcast(qpn, "detach", ldq_be_p(in->mgid + 8), g->mlid, g->nqps);
    return PIB_AQ_OK;
}

/* A QP goes away: it leaves every group. */
void pib_mcast_detach_qp(PibState *s, uint32_t qpn)
{
    int i, slot;

    for (i = 0; i < PIB_MAX_MCAST_GRP; i++) {
        slot = s->mcast[i].nqps ? pib_mcast_slot(&s->mcast[i], qpn) : -1;
        if (slot >= 0) {
            pib_mcast_remove(&s->mcast[i], slot);
        }
    }
}

void pib_mcast_reset(PibState *s)
{
    memset(s->mcast, 0, sizeof(s->mcast));
}

/* Is any QP of this HCA attached to a group with this MLID (loopback of our own sends)? */
bool pib_mcast_local(PibState *s, uint16_t mlid)
{
    int i;

    for (i = 0; i < PIB_MAX_MCAST_GRP; i++) {
        if (s->mcast[i].nqps && s->mcast[i].mlid == mlid) {
            return true;
        }
    }
    return false;
}

/*
 * A multicast packet passed the port's checks: deliver it to every QP attached to the group
 * its GRH names.  Returns the rx_drop_* reason if it reached none, else PIB_CNT_MAX.
 */
enum pib_counter pib_mcast_deliver(PibState *s, PibPktInfo *pi)
{
    PibMcastGroup *g;
    uint32_t qpns[PIB_MAX_MCAST_QP], n, i;

    if (!pi->has_grh || pi->dqpn != PIB_MCAST_QPN || pi->vl == 15) {
        return PIB_CNT_RX_DROP_MCAST;
    }
    g = pib_mcast_find(s, pi->grh.dgid);
    if (!g || g->mlid != pi->dlid) {
        return PIB_CNT_RX_DROP_MCAST;
    }
    /* A copy: a QP that errors out on this packet is detached under our feet. */
    n = g->nqps;
    memcpy(qpns, g->qpns, n * sizeof(qpns[0]));
    pib_count(s, PIB_CNT_RX_MCAST_PACKETS, 1);
    trace_pib_mcast_rx(ldq_be_p(pi->grh.dgid + 8), pi->dlid, n);
    for (i = 0; i < n; i++) {
        PibQp *qp = pib_qp_lookup(s, qpns[i]);

        if (qp) {
            pi->dqpn = qpns[i];
            pib_pkt_to_qp(s, qp, pi);
        }
    }
    pi->dqpn = PIB_MCAST_QPN;
    return PIB_CNT_MAX;
}

/* A group in a migration stream (pib-vmstate.c checks the members against the QPs). */
const VMStateDescription vmstate_pib_mcast_group = {
    .name = "pib-mcast-group",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT8_ARRAY(mgid, PibMcastGroup, 16),
        VMSTATE_UINT16(mlid, PibMcastGroup),
        VMSTATE_UINT32(nqps, PibMcastGroup),
        VMSTATE_UINT32_ARRAY(qpns, PibMcastGroup, PIB_MAX_MCAST_QP),
        VMSTATE_END_OF_LIST()
    },
};
