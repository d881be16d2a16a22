/*
 * QTest testcase for the pib InfiniBand HCA: the management plane
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A device with no `lid` property, as on a fabric with a subnet manager: its port comes up in
 * INIT and only the SMA moves it on.  This test plays both the driver (it hands MADs to the
 * firmware with MAD_IFC, as process_mad does, and owns QP0 and QP1 as ib_mad would) and the
 * fabric: the peer at the other end of the link is the SM, at LID MG_SM_LID.
 *
 *   /pib/mgmt/port-states  INIT -> ARMED -> ACTIVE (by Set, and by a data packet in ARMED),
 *                          refused transitions and values (0x1c, nothing applied), the
 *                          events, DOWN and DISABLED taking the link down
 *   /pib/mgmt/attributes   every attribute the SMA answers, and the statuses of what it
 *                          does not: unknown attribute, method, class version; reserved and
 *                          switch-only modifier bits ignored on a CA
 *   /pib/mgmt/mkey         protection levels, violations counted and dropped, trap 256 on the
 *                          wire, the lease, TrapRepress
 *   /pib/mgmt/special-qps  QP0 on VL15 only, the permissive LID, SMPs in INIT, MAD length,
 *                          the CQE fields; trap 144 when the capabilities or the node
 *                          description change
 *   /pib/mgmt/vls          the VL a packet leaves on (SLtoVLMappingTable), SLs mapped to
 *                          VL15 or beyond OperationalVLs not sent, data received on a VL
 *                          the port does not operate dropped and counted
 *   /pib/mgmt/partitions   the P_Key table through the SMA, full and limited members, the
 *                          QP's own partition, QP1 taking any, violations and trap 257
 *   /pib/mgmt/pma          ClassPortInfo, PortCounters and PortCountersExtended: counting,
 *                          clearing, bad PortSelect
 *   /pib/mgmt/multicast    groups joined with ATTACH_MCAST: a packet from the wire reaches
 *                          every attached QP, our own sends go out and loop back, and a
 *                          group nobody joined, a missing GRH or a GRH that lies are drops
 *   /pib/mgmt/cc           the congestion control agent: CACongestionSetting by ControlMap,
 *                          the CongestionControlTable's blocks and CCTI_Limit (past the table:
 *                          refused, nothing changed), the CA's empty log, TimeStamp against the
 *                          clock, the CC_Key (Sets without it dropped and counted, Gets with
 *                          the protect bit too; the lease: the bit clears a LeasePeriod after
 *                          a violation, unless the key came), switch-only attributes,
 *                          versions and methods
 */

#include "qemu/osdep.h"
#include <sys/socket.h>
#include <poll.h>
#include <glib/gstdio.h>

#include "pib-qtest.h"

#define MG_SM_LID       9           /* the peer: the subnet manager */
#define MG_LID          5           /* what the SM gives the device */
#define MG_PEER_QPN     0x55        /* the peer's UD QP */
#define MG_QKEY         0x1234

/* The device on a link to this process, no `lid` property: SM mode. */
typedef struct Mg {
    QOSState *qs;
    char *dir, *path;
    PibDev d;
    int fd;
    TestCq cq;
    uint32_t pdn;
    uint64_t buf;
    uint32_t key;
} Mg;

static void mg_connect(Mg *m, bool expect_hello)
{
    m->fd = peer_connect(m->path);
    if (expect_hello) {
        peer_expect_hello(m->fd, TEST_NODE_GUID);
        peer_send_hello(m->fd);
    }
}

static void mg_boot(Mg *m)
{
    g_autofree char *args = NULL;

    memset(m, 0, sizeof(*m));
    m->dir = g_dir_make_tmp("pib-mgmt-XXXXXX", NULL);
    m->path = g_build_filename(m->dir, "link.sock", NULL);
    args = g_strdup_printf("-chardev socket,id=link,path=%s,server=on,wait=off "
                           "-device pib-hca,addr=4.0,chardev=link,node-guid=0x%" PRIx64,
                           m->path, (uint64_t)TEST_NODE_GUID);
    m->qs = pib_boot(args);
    pib_open(&m->d, m->qs, PIB_DEVFN_A);
    pib_enable(&m->d, 16, 64);
    mg_connect(m, true);
    pib_wait_port_state(&m->d, PIB_PORT_INIT);
    g_assert_true(pib_aeq_find(&m->d, PIB_AE_LINK_UP, TIMEOUT_US));
    m->pdn = dp_create_pd(&m->d);
    m->buf = dp_alloc(&m->d, 64 * 1024);
    m->key = dp_reg_mr(&m->d, m->pdn, DP_ALL_ACCESS, m->buf, 64 * 1024);
    dp_create_cq(&m->d, 256, &m->cq);
}

static void mg_shutdown(Mg *m)
{
    g_assert_cmpuint(dp_err_count(&m->d), ==, 0);
    close(m->fd);
    pib_close(&m->d);
    qtest_shutdown(m->qs);
    g_unlink(m->path);
    g_rmdir(m->dir);
    g_free(m->path);
    g_free(m->dir);
}

/*
 * MADs through MAD_IFC, as the driver's process_mad
 */

/*
 * One SMP round trip that must be answered: the response's status (without the D bit),
 * its data in *resp.  The response answers the request: same TID, GetResp.
 */
static uint16_t mg_smp_ex(Mg *m, struct pib_smp *req, struct pib_smp *resp,
                          bool ignore_mkey)
{
    g_assert_cmpuint(dp_mad_ifc(&m->d, req, resp, ignore_mkey), ==, PIB_MAD_IFC_REPLY);
    g_assert_cmphex(resp->hdr.method, ==, PIB_MAD_METHOD_GET_RESP);
    g_assert_cmphex(resp->hdr.tid_lo_be, ==, req->hdr.tid_lo_be);
    g_assert_cmphex(resp->hdr.mgmt_class, ==, req->hdr.mgmt_class);
    if (req->hdr.mgmt_class == PIB_MGMT_CLASS_SUBN_DR) {
        g_assert_cmphex(be16_to_cpu(resp->hdr.status_be) & PIB_SMP_STATUS_DIRECTION, ==,
                        PIB_SMP_STATUS_DIRECTION);
    }
    return be16_to_cpu(resp->hdr.status_be) & ~PIB_SMP_STATUS_DIRECTION;
}

static uint16_t mg_get(Mg *m, uint16_t attr, uint32_t mod, struct pib_smp *resp)
{
    struct pib_smp req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_GET, attr, mod);

    return mg_smp_ex(m, &req, resp, false);
}

static struct pib_port_info mg_port_info(Mg *m)
{
    struct pib_smp resp;

    g_assert_cmpuint(mg_get(m, PIB_SMP_ATTR_PORT_INFO, 1, &resp), ==, PIB_MAD_STATUS_OK);
    return *(struct pib_port_info *)resp.data;
}

/* PortInfo Set: the current values with the changes the caller made in pi. */
static uint16_t mg_port_set(Mg *m, const struct pib_port_info *pi, uint64_t mkey,
                            struct pib_port_info *now)
{
    struct pib_smp req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_SET,
                                    PIB_SMP_ATTR_PORT_INFO, 1);
    struct pib_smp resp;
    uint16_t status;

    stq_be_p(&req.mkey_hi_be, mkey);
    memcpy(req.data, pi, sizeof(*pi));
    status = mg_smp_ex(m, &req, &resp, false);
    if (now) {
        memcpy(now, resp.data, sizeof(*now));
    }
    return status;
}

/* What an SM sets first: LID, SM LID, MTU, subnet timeout; PortState as given. */
static struct pib_port_info mg_pi_sm(Mg *m, uint8_t state)
{
    struct pib_port_info pi = mg_port_info(m);

    pi.lid_be = cpu_to_be16(MG_LID);
    pi.sm_lid_be = cpu_to_be16(MG_SM_LID);
    pi.speed_state = (pi.speed_state & 0xf0) | state;
    pi.phys_down &= 0x0f;               /* PortPhysicalState: no change */
    pi.mtu_smsl = 5 << 4;
    pi.rereg_subnet_timeout = 10;       /* 4 ms: traps are resent every ~1 s */
    return pi;
}

/* Bring the port to ACTIVE as an SM does: LID, then ARMED, then ACTIVE. */
static void mg_activate(Mg *m)
{
    struct pib_port_info pi = mg_pi_sm(m, PIB_PORTINFO_STATE_NOP);

    g_assert_cmpuint(mg_port_set(m, &pi, 0, NULL), ==, PIB_MAD_STATUS_OK);
    pi = mg_pi_sm(m, PIB_PORT_ARMED);
    g_assert_cmpuint(mg_port_set(m, &pi, 0, NULL), ==, PIB_MAD_STATUS_OK);
    pi = mg_pi_sm(m, PIB_PORT_ACTIVE);
    g_assert_cmpuint(mg_port_set(m, &pi, 0, NULL), ==, PIB_MAD_STATUS_OK);
    pib_wait_port_state(&m->d, PIB_PORT_ACTIVE);
}

/*
 * UD packets on the wire (the peer's side)
 */

typedef struct MgPkt {
    bool grh;               /* a GRH: SGID and DGID below */
    uint8_t sgid[16], dgid[16];
    int grh_len_delta;      /* sent: lie in the GRH's PayLen by this much */
    uint8_t vl, sl;
    uint16_t dlid, slid, pkey;
    uint8_t opcode;
    uint32_t dqpn, sqpn, qkey;
    uint8_t payload[4096];
    uint32_t paylen;
} MgPkt;

static void mg_send(Mg *m, const MgPkt *p)
{
    uint8_t frame[4 + 8 + 40 + 12 + 8 + 4096] = { 0 };
    uint32_t pad = -p->paylen & 3;
    uint32_t grh = p->grh ? 40 : 0;
    uint32_t len = 8 + grh + 12 + 8 + p->paylen + pad;
    uint8_t *b = frame + 4;

    frame[0] = PIB_LINK_MAGIC;
    frame[1] = PIB_FRAME_PACKET;
    stw_be_p(frame + 2, len);
    b[0] = p->vl << 4;
    b[1] = p->sl << 4 | (p->grh ? PIB_LNH_IBA_GLOBAL : PIB_LNH_IBA_LOCAL);
    stw_be_p(b + 2, p->dlid);
    stw_be_p(b + 4, len / 4);
    stw_be_p(b + 6, p->slid);
    if (p->grh) {
        stl_be_p(b + 8, 6u << 28);
        stw_be_p(b + 12, len - 8 - 40 + p->grh_len_delta);
        b[14] = 0x1b;
        b[15] = 1;
        memcpy(b + 16, p->sgid, 16);
        memcpy(b + 32, p->dgid, 16);
        b += 40;
    }
    b[8] = p->opcode ? p->opcode : PIB_OP_UD_SEND_ONLY;
    b[9] = pad << PIB_BTH_PAD_SHIFT;
    stw_be_p(b + 10, p->pkey);
    stl_be_p(b + 12, p->dqpn);
    stl_be_p(b + 16, 0);
    stl_be_p(b + 20, p->qkey);
    stl_be_p(b + 24, p->sqpn);
    memcpy(b + 28, p->payload, p->paylen);
    peer_write(m->fd, frame, 4 + len);
}

/* The next UD packet from the device, or false if none comes within timeout_ms. */
static bool mg_recv(Mg *m, MgPkt *p, int timeout_ms)
{
    struct pollfd pfd = { .fd = m->fd, .events = POLLIN };
    struct pib_link_hdr hdr;
    uint8_t b[4352];
    uint32_t len;

    if (poll(&pfd, 1, timeout_ms) != 1) {
        return false;
    }
    len = peer_read_frame(m->fd, &hdr, b, sizeof(b));
    g_assert_cmphex(hdr.type, ==, PIB_FRAME_PACKET);
    memset(p, 0, sizeof(*p));
    p->vl = b[0] >> 4;
    p->sl = b[1] >> 4;
    p->dlid = lduw_be_p(b + 2);
    p->slid = lduw_be_p(b + 6);
    if ((b[1] & 3) == PIB_LNH_IBA_GLOBAL) {
        p->grh = true;
        g_assert_cmpuint(ldl_be_p(b + 8) >> 28, ==, 6);
        g_assert_cmpuint(lduw_be_p(b + 12), ==, len - 8 - 40);
        memcpy(p->sgid, b + 16, 16);
        memcpy(p->dgid, b + 32, 16);
        memmove(b + 8, b + 48, len - 48);
        len -= 40;
    } else {
        g_assert_cmpuint(b[1] & 3, ==, PIB_LNH_IBA_LOCAL);
    }
    p->opcode = b[8];
    p->pkey = lduw_be_p(b + 10);
    p->dqpn = ldl_be_p(b + 12) & PIB_QPN_MASK;
    g_assert_cmpuint(p->opcode, ==, PIB_OP_UD_SEND_ONLY);
    p->qkey = ldl_be_p(b + 20);
    p->sqpn = ldl_be_p(b + 24) & PIB_QPN_MASK;
    p->paylen = len - 28 - ((b[9] >> PIB_BTH_PAD_SHIFT) & 3);
    memcpy(p->payload, b + 28, p->paylen);
    return true;
}

/* A trap from the device to the SM at sm_lid: QP0 to QP0 on VL15, a Notice; its number. */
static uint16_t mg_expect_trap_to(Mg *m, struct pib_smp *trap, uint16_t sm_lid)
{
    MgPkt p;

    g_assert_true(mg_recv(m, &p, TIMEOUT_US / 1000));
    g_assert_cmpuint(p.vl, ==, 15);
    g_assert_cmpuint(p.dlid, ==, sm_lid);
    g_assert_cmpuint(p.slid, ==, MG_LID);
    g_assert_cmpuint(p.dqpn, ==, 0);
    g_assert_cmpuint(p.sqpn, ==, 0);
    g_assert_cmpuint(p.paylen, ==, PIB_MAD_SIZE);
    memcpy(trap, p.payload, sizeof(*trap));
    g_assert_cmphex(trap->hdr.mgmt_class, ==, PIB_MGMT_CLASS_SUBN_LID);
    g_assert_cmphex(trap->hdr.method, ==, PIB_MAD_METHOD_TRAP);
    g_assert_cmphex(be16_to_cpu(trap->hdr.attr_id_be), ==, PIB_SMP_ATTR_NOTICE);
    return be16_to_cpu(((struct pib_notice *)trap->data)->trap_num_be);
}

/* A trap to the SM that mg_activate() made the port's master. */
static uint16_t mg_expect_trap(Mg *m, struct pib_smp *trap)
{
    return mg_expect_trap_to(m, trap, MG_SM_LID);
}

/* TrapRepress for a trap: no response, and no more resends. */
static void mg_repress(Mg *m, const struct pib_smp *trap)
{
    struct pib_smp req = *trap;
    struct pib_smp resp;

    req.hdr.method = PIB_MAD_METHOD_TRAP_REPRESS;
    g_assert_cmpuint(dp_mad_ifc(&m->d, &req, &resp, false), ==, PIB_MAD_IFC_CONSUMED);
}

/* A UD QP (or QP0/QP1) of the device, RTS, with 16 receives posted. */
static void mg_ud_qp(Mg *m, uint8_t type, uint16_t pkey_index, uint32_t qkey, TestQp *qp)
{
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX | PIB_QP_QKEY |
                                 (type == PIB_QPT_UD ? PIB_QP_PORT : 0)),
        .qp_state = PIB_QPS_INIT,
        .port_num = 1,
        .pkey_index = cpu_to_le16(pkey_index),
        .qkey = cpu_to_le32(qkey),
    };
    struct pib_sge sge;
    int i;

    g_assert_cmpuint(dp_create_qp_ex(&m->d, type, m->pdn, &m->cq, &m->cq, 16, 16, DP_UAR,
                                     PIB_SRQN_NONE, qp), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_modify(&m->d, qp->qpn, &a), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&m->d, qp->qpn, PIB_QPS_RTR), ==, PIB_AQ_OK);
    a = (struct pib_qp_attr) {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_SQ_PSN),
        .qp_state = PIB_QPS_RTS,
    };
    g_assert_cmpuint(dp_modify(&m->d, qp->qpn, &a), ==, PIB_AQ_OK);
    for (i = 0; i < 16; i++) {
        sge = dp_sge(m->buf + (qp->qpn % 4) * 16384 + (i % 4) * 4096, 4096, m->key);
        dp_post_recv(&m->d, qp, 0x100 * qp->qpn + i, &sge, 1);
    }
}

/* A UD send from the device's QP: 256 bytes, to dlid/dqpn. */
static void mg_ud_send(Mg *m, TestQp *qp, uint16_t dlid, uint32_t dqpn, uint32_t qkey,
                       uint16_t pkey_index)
{
    struct pib_sge sge = dp_sge(m->buf + 60000, PIB_MAD_SIZE, m->key);
    struct pib_send_wqe w = {
        .opcode = PIB_WQE_SEND,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 1,
        .wr_id = cpu_to_le64(0x5e4d),
        .ud_qpn = cpu_to_le32(dqpn),
        .ud_qkey = cpu_to_le32(qkey),
        .ud_dlid = cpu_to_le16(dlid),
        .ud_pkey_index = cpu_to_le16(pkey_index),
    };

    dp_post_send_raw(&m->d, qp, &w, &sge, sizeof(sge), true);
    dp_expect(&m->d, &m->cq, 0x5e4d, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
}

static uint64_t mg_counter(Mg *m, enum pib_counter c)
{
    uint64_t all[PIB_CNT_MAX];

    dp_counters(&m->d, all);
    return all[c];
}

/* Wait until counter c reaches at least value (the packet went through the device). */
static void mg_wait_counter(Mg *m, enum pib_counter c, uint64_t value)
{
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;

    while (mg_counter(m, c) < value) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(1000);
    }
}

/*
 * 1. The port's states
 */

static void test_port_states(void)
{
    struct pib_port_info pi, now;
    struct pib_port_attr attr;
    struct pib_aeqe e;
    TestQp ud;
    MgPkt p = { 0 };
    uint64_t drops;
    Mg m;

    mg_boot(&m);
    pi = mg_port_info(&m);
    g_assert_cmpuint(pi.speed_state & 0xf, ==, PIB_PORT_INIT);
    g_assert_cmpuint(pi.phys_down >> 4, ==, PIB_PHYS_LINKUP);
    g_assert_cmpuint(be16_to_cpu(pi.lid_be), ==, 0);

    /* The LID is the SM's: SET_PORT refuses it in this mode. */
    g_assert_cmpuint(pib_set_lid(&m.d, 3), ==, PIB_AQ_BAD_STATE);

    /* Refused Sets change nothing, not even their valid fields. */
    pi = mg_pi_sm(&m, PIB_PORT_ACTIVE);     /* ACTIVE from INIT: no */
    g_assert_cmpuint(mg_port_set(&m, &pi, 0, &now), ==, PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmpuint(be16_to_cpu(now.lid_be), ==, 0);
    g_assert_cmpuint(now.speed_state & 0xf, ==, PIB_PORT_INIT);
    pi = mg_pi_sm(&m, PIB_PORT_INIT);       /* INIT cannot be set */
    g_assert_cmpuint(mg_port_set(&m, &pi, 0, NULL), ==, PIB_MAD_STATUS_INVALID_VALUE);
    pi = mg_pi_sm(&m, 0);
    pi.lid_be = cpu_to_be16(0xc000);        /* a multicast LID */
    g_assert_cmpuint(mg_port_set(&m, &pi, 0, NULL), ==, PIB_MAD_STATUS_INVALID_VALUE);
    pi = mg_pi_sm(&m, 0);
    pi.mtu_smsl = 6 << 4;                   /* NeighborMTU beyond MTUCap */
    g_assert_cmpuint(mg_port_set(&m, &pi, 0, NULL), ==, PIB_MAD_STATUS_INVALID_VALUE);
    pi = mg_pi_sm(&m, 0);
    pi.opvls_enforce = 4 << 4;              /* OperationalVLs VL0-7: beyond VLCap */
    g_assert_cmpuint(mg_port_set(&m, &pi, 0, NULL), ==, PIB_MAD_STATUS_INVALID_VALUE);
    pi = mg_pi_sm(&m, 0);
    pi.link_width_enabled = 8;              /* 12X: not supported */
    g_assert_cmpuint(mg_port_set(&m, &pi, 0, NULL), ==, PIB_MAD_STATUS_INVALID_VALUE);
    pi = mg_pi_sm(&m, 0);
    pi.phys_down = 7 << 4;                  /* PortPhysicalState 7: not settable */
    g_assert_cmpuint(mg_port_set(&m, &pi, 0, NULL), ==, PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmpuint(pib_query_port(&m.d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(le16_to_cpu(attr.lid), ==, 0);

    /* The LID and SM: events, QUERY_PORT; still INIT. */
    pi = mg_pi_sm(&m, PIB_PORTINFO_STATE_NOP);
    g_assert_cmpuint(mg_port_set(&m, &pi, 0, &now), ==, PIB_MAD_STATUS_OK);
    g_assert_cmpuint(be16_to_cpu(now.lid_be), ==, MG_LID);
    g_assert_true(pib_aeq_next(&m.d, &e, TIMEOUT_US));
    g_assert_cmpuint(e.type, ==, PIB_AE_LID_CHANGE);
    g_assert_cmpuint(le64_to_cpu(e.data), ==, MG_LID);
    g_assert_true(pib_aeq_next(&m.d, &e, TIMEOUT_US));
    g_assert_cmpuint(e.type, ==, PIB_AE_SM_CHANGE);
    g_assert_cmpuint(pib_query_port(&m.d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(le16_to_cpu(attr.lid), ==, MG_LID);
    g_assert_cmpuint(le16_to_cpu(attr.sm_lid), ==, MG_SM_LID);
    g_assert_cmpuint(attr.subnet_timeout, ==, 10);
    g_assert_cmpuint(attr.state, ==, PIB_PORT_INIT);

    /* In INIT a data packet is refused; in ARMED it is taken, and activates the port. */
    mg_ud_qp(&m, PIB_QPT_UD, 0, MG_QKEY, &ud);
    p = (MgPkt) {
        .dlid = MG_LID, .slid = MG_SM_LID, .pkey = 0xffff, .dqpn = ud.qpn,
        .sqpn = MG_PEER_QPN, .qkey = MG_QKEY, .paylen = 64,
    };
    drops = mg_counter(&m, PIB_CNT_RX_DROP_PORT_DOWN);
    mg_send(&m, &p);
    mg_wait_counter(&m, PIB_CNT_RX_DROP_PORT_DOWN, drops + 1);
    pi = mg_pi_sm(&m, PIB_PORT_ARMED);
    g_assert_cmpuint(mg_port_set(&m, &pi, 0, NULL), ==, PIB_MAD_STATUS_OK);
    g_assert_cmpuint(mg_port_info(&m).speed_state & 0xf, ==, PIB_PORT_ARMED);
    /* ARMED sends no data: a UD send completes and is dropped at the port. */
    drops = mg_counter(&m, PIB_CNT_TX_DROP_PORT_DOWN);
    mg_ud_send(&m, &ud, MG_SM_LID, MG_PEER_QPN, MG_QKEY, 0);
    g_assert_cmpuint(mg_counter(&m, PIB_CNT_TX_DROP_PORT_DOWN), ==, drops + 1);
    mg_send(&m, &p);
    dp_expect(&m.d, &m.cq, 0x100 * ud.qpn, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    pib_wait_port_state(&m.d, PIB_PORT_ACTIVE);
    g_assert_true(pib_aeq_find(&m.d, PIB_AE_PORT_ACTIVE, TIMEOUT_US));
    /* ... and now it does send. */
    mg_ud_send(&m, &ud, MG_SM_LID, MG_PEER_QPN, MG_QKEY, 0);
    g_assert_true(mg_recv(&m, &p, TIMEOUT_US / 1000));
    g_assert_cmpuint(p.vl, ==, 0);
    g_assert_cmpuint(p.dqpn, ==, MG_PEER_QPN);
    g_assert_cmpuint(p.slid, ==, MG_LID);

    /* PortState DOWN: the link goes down and trains again; the LID stays. */
    pi = mg_pi_sm(&m, PIB_PORT_DOWN);
    g_assert_cmpuint(mg_port_set(&m, &pi, 0, NULL), ==, PIB_MAD_STATUS_OK);
    g_assert_true(pib_aeq_find(&m.d, PIB_AE_PORT_ERR, TIMEOUT_US));
    peer_expect_eof(m.fd);
    close(m.fd);
    mg_connect(&m, true);
    pib_wait_port_state(&m.d, PIB_PORT_INIT);
    g_assert_cmpuint(pib_query_port(&m.d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(le16_to_cpu(attr.lid), ==, MG_LID);
    g_assert_cmpuint(le32_to_cpu(attr.link_downs), ==, 1);

    /* DISABLED: down, and no HELLO when the peer dials again; POLLING enables it. */
    pi = mg_pi_sm(&m, PIB_PORTINFO_STATE_NOP);
    pi.phys_down = PIB_PHYS_DISABLED << 4;
    g_assert_cmpuint(mg_port_set(&m, &pi, 0, NULL), ==, PIB_MAD_STATUS_OK);
    peer_expect_eof(m.fd);
    close(m.fd);
    mg_connect(&m, false);
    {
        struct pollfd pfd = { .fd = m.fd, .events = POLLIN };

        g_assert_cmpint(poll(&pfd, 1, 300), ==, 0);     /* no HELLO */
    }
    g_assert_cmpuint(pib_query_port(&m.d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(attr.state, ==, PIB_PORT_DOWN);
    g_assert_cmpuint(attr.phys_state, ==, PIB_PHYS_DISABLED);
    pi = mg_pi_sm(&m, PIB_PORTINFO_STATE_NOP);
    pi.phys_down = PIB_PHYS_POLLING << 4;
    g_assert_cmpuint(mg_port_set(&m, &pi, 0, NULL), ==, PIB_MAD_STATUS_OK);
    peer_expect_eof(m.fd);                  /* retrain */
    close(m.fd);
    mg_connect(&m, true);
    pib_wait_port_state(&m.d, PIB_PORT_INIT);
    g_assert_cmpuint(pib_query_port(&m.d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(attr.phys_state, ==, PIB_PHYS_LINKUP);
    mg_shutdown(&m);
}

/*
 * 2. What the SMA answers
 */

#define TEST_ALIAS_GUID     0x0002c903000a1100ull

static void test_attributes(void)
{
    uint8_t desc[PIB_SMP_DATA_SIZE] = "node0 pib_0";
    struct pib_smp req, resp;
    struct pib_node_info *ni = (struct pib_node_info *)resp.data;
    struct pib_port_info *pi = (struct pib_port_info *)resp.data;
    struct pib_port_attr attr;
    struct pib_admin_cmd cmd;
    struct pib_aeqe e;
    uint64_t mbox;
    Mg m;
    int i;

    mg_boot(&m);

    /* NodeInfo: a CA with one port, its GUIDs, 64 P_Keys, the arrival port. */
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_NODE_INFO, 0, &resp), ==, 0);
    g_assert_cmpuint(ni->node_type, ==, PIB_NODE_TYPE_CA);
    g_assert_cmpuint(ni->num_ports, ==, 1);
    g_assert_cmphex(ldq_be_p(&ni->node_guid_hi_be), ==, TEST_NODE_GUID);
    g_assert_cmphex(ldq_be_p(&ni->port_guid_hi_be), ==, TEST_NODE_GUID + 1);
    g_assert_cmphex(ldq_be_p(&ni->sys_image_guid_hi_be), ==, TEST_NODE_GUID);
    g_assert_cmpuint(be16_to_cpu(ni->partition_cap_be), ==, PIB_PKEY_TBL_LEN);
    g_assert_cmpuint(be16_to_cpu(ni->device_id_be), ==, PIB_PCI_DEVICE_ID);
    g_assert_cmphex(be32_to_cpu(ni->port_vendor_be), ==, 1u << 24 | PIB_VENDOR_OUI);

    /* NodeDescription: the firmware's, then the driver's (SET_NODE_DESC). */
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_NODE_DESC, 0, &resp), ==, 0);
    g_assert_cmpstr((char *)resp.data, ==, "pib-hca");
    mbox = dp_alloc(&m.d, 4096);
    qtest_memwrite(qts(&m.d), mbox, desc, sizeof(desc));
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_SET_NODE_DESC,
        .in.mbox = { .addr = cpu_to_le64(mbox), .len = cpu_to_le32(sizeof(desc)) },
    };
    g_assert_cmpuint(pib_cmd(&m.d, &cmd, NULL), ==, PIB_AQ_OK);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_NODE_DESC, 0, &resp), ==, 0);
    g_assert_cmpmem(resp.data, sizeof(desc), desc, sizeof(desc));
    cmd.in.mbox.len = cpu_to_le32(10);      /* shorter than a NodeDescription */
    g_assert_cmpuint(pib_cmd(&m.d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_SET, PIB_SMP_ATTR_NODE_DESC, 0);
    g_assert_cmpuint(mg_smp_ex(&m, &req, &resp, false), ==, PIB_MAD_STATUS_UNSUP_ATTR);

    /*
     * GUIDInfo: block 0 is the port GUID and 7 alias GUIDs, none assigned; there is no
     * block 1.  A Set assigns aliases (entry 0 stays the port GUID), which is a GID change:
     * the GID table's entries follow (QUERY_GID).
     */
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_GUID_INFO, 0, &resp), ==, 0);
    g_assert_cmphex(ldq_be_p(resp.data), ==, TEST_NODE_GUID + 1);
    for (i = 1; i < 8; i++) {
        g_assert_cmphex(ldq_be_p(resp.data + 8 * i), ==, 0);
    }
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_GUID_INFO, 1, &resp), ==,
                     PIB_MAD_STATUS_INVALID_VALUE);
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_SET, PIB_SMP_ATTR_GUID_INFO, 0);
    stq_be_p(req.data, 0x1111);                         /* read-only: ignored */
    stq_be_p(req.data + 8, TEST_ALIAS_GUID);
    stq_be_p(req.data + 56, TEST_ALIAS_GUID + 6);
    g_assert_cmpuint(mg_smp_ex(&m, &req, &resp, false), ==, 0);
    g_assert_cmphex(ldq_be_p(resp.data), ==, TEST_NODE_GUID + 1);
    g_assert_cmphex(ldq_be_p(resp.data + 8), ==, TEST_ALIAS_GUID);
    g_assert_cmphex(ldq_be_p(resp.data + 16), ==, 0);
    g_assert_cmphex(ldq_be_p(resp.data + 56), ==, TEST_ALIAS_GUID + 6);
    g_assert_true(dp_aeq_find(&m.d, PIB_AE_GID_CHANGE, 1));
    {
        static const uint8_t zero[16];
        uint8_t gid[16], want[16];

        dp_query_gid(&m.d, 1, gid);
        stq_be_p(want, PIB_DEFAULT_GID_PREFIX);
        stq_be_p(want + 8, TEST_ALIAS_GUID);
        g_assert_cmpmem(gid, sizeof(gid), want, sizeof(want));
        dp_query_gid(&m.d, 2, gid);                     /* unassigned: all zeros */
        g_assert_cmpmem(gid, sizeof(gid), zero, sizeof(zero));
    }

    /* PortInfo: what the port is and can do; port 0 is the arrival port, 2 is none. */
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_PORT_INFO, 0, &resp), ==, 0);
    g_assert_cmpuint(pi->local_port_num, ==, 1);
    g_assert_cmphex(ldq_be_p(&pi->gid_prefix_hi_be), ==, PIB_DEFAULT_GID_PREFIX);
    g_assert_cmphex(be32_to_cpu(pi->cap_mask_be), ==, PIB_PORT_CAP_FIRMWARE);
    g_assert_cmpuint(pi->link_width_active, ==, 2);             /* 4X */
    g_assert_cmpuint(pi->speed_active_enabled >> 4, ==, 4);     /* QDR */
    g_assert_cmpuint(pi->inittypereply_mtucap & 0xf, ==, 5);    /* 4096 */
    g_assert_cmpuint(pi->vlcap_inittype >> 4, ==, 3);               /* VL0-VL3 */
    g_assert_cmpuint(pi->opvls_enforce >> 4, ==, 3);
    g_assert_cmpuint(pi->vl_arb_high_cap, ==, 8);
    g_assert_cmpuint(pi->vl_arb_low_cap, ==, 8);
    g_assert_cmpuint(pi->guid_cap, ==, 8);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_PORT_INFO, 2, &resp), ==,
                     PIB_MAD_STATUS_INVALID_VALUE);
    /* Directed route: the same, with the D bit in the response. */
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_DR, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_PORT_INFO, 1);
    req.dr_slid_be = req.dr_dlid_be = cpu_to_be16(PIB_LID_PERMISSIVE);
    g_assert_cmpuint(mg_smp_ex(&m, &req, &resp, false), ==, 0);
    g_assert_cmpuint(pi->local_port_num, ==, 1);

    /* P_KeyTable: block 0 has the default P_Key; block 1 set by the SM; no block 2. */
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_PKEY_TABLE, 0, &resp), ==, 0);
    g_assert_cmphex(lduw_be_p(resp.data), ==, 0xffff);
    g_assert_cmphex(lduw_be_p(resp.data + 2), ==, 0);
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_SET, PIB_SMP_ATTR_PKEY_TABLE, 1);
    stw_be_p(req.data, 0x8001);
    stw_be_p(req.data + 62, 0x0002);
    g_assert_cmpuint(mg_smp_ex(&m, &req, &resp, false), ==, 0);
    g_assert_cmphex(lduw_be_p(resp.data), ==, 0x8001);
    g_assert_true(dp_aeq_find(&m.d, PIB_AE_PKEY_CHANGE, 1));
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_QUERY_PKEY,
        .in.port = { .port_num = 1, .index = cpu_to_le32(63) },
    };
    {
        struct pib_admin_cqe cqe;

        g_assert_cmpuint(pib_cmd(&m.d, &cmd, &cqe), ==, PIB_AQ_OK);
        g_assert_cmphex(le32_to_cpu(cqe.result0), ==, 0x0002);
    }
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_PKEY_TABLE, 2, &resp), ==,
                     PIB_MAD_STATUS_INVALID_VALUE);

    /* SLtoVLMappingTable: VL0-VL3 or VL15 (the SL's packets are dropped). */
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_SET, PIB_SMP_ATTR_SL2VL_TABLE,
                     0);
    req.data[0] = 0x01;                     /* SL0 -> VL0, SL1 -> VL1 */
    req.data[1] = 0x23;                     /* SL2 -> VL2, SL3 -> VL3 */
    req.data[7] = 0x0f;                     /* SL15 -> VL15 */
    g_assert_cmpuint(mg_smp_ex(&m, &req, &resp, false), ==, 0);
    g_assert_cmphex(ldq_be_p(resp.data), ==, 0x012300000000000full);
    req.data[0] = 0x40;                     /* SL0 -> VL4: beyond VLCap */
    g_assert_cmpuint(mg_smp_ex(&m, &req, &resp, false), ==, PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmphex(ldq_be_p(resp.data), ==, 0x012300000000000full);   /* unchanged */

    /*
     * VLArbitrationTable: 8 entries in each table, all in blocks 1 (low) and 3 (high);
     * blocks 2 and 4 (entries 32-63) and 5 do not exist.  Reserved bits read as 0.
     */
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_SET, PIB_SMP_ATTR_VLARB_TABLE,
                     PIB_VLARB_LOW_0 << 16);
    req.data[0] = 0xf1;                     /* VL1 (and reserved bits) */
    req.data[1] = 3;
    req.data[2] = 2;
    req.data[3] = 1;
    req.data[20] = 3;                       /* entry 10: beyond the 8 */
    req.data[21] = 9;
    g_assert_cmpuint(mg_smp_ex(&m, &req, &resp, false), ==, 0);
    g_assert_cmphex(ldl_be_p(resp.data), ==, 0x01030201);
    g_assert_cmphex(resp.data[21], ==, 0);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_VLARB_TABLE, PIB_VLARB_HIGH_0 << 16, &resp), ==, 0);
    g_assert_cmphex(ldl_be_p(resp.data), ==, 0);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_VLARB_TABLE, PIB_VLARB_LOW_0 << 16, &resp), ==, 0);
    g_assert_cmphex(ldl_be_p(resp.data), ==, 0x01030201);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_VLARB_TABLE, PIB_VLARB_LOW_32 << 16, &resp), ==,
                     PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_VLARB_TABLE, PIB_VLARB_HIGH_32 << 16, &resp),
                     ==, PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_VLARB_TABLE, 5u << 16, &resp), ==,
                     PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_VLARB_TABLE, 0, &resp), ==,
                     PIB_MAD_STATUS_INVALID_VALUE);

    /*
     * Reserved and switch-only modifier bits are ignored on a CA (IBTA 13.4.8.1), as
     * diagnostic tools send them to every node type: the port number of P_KeyTable [31:16],
     * SLtoVLMappingTable [15:0] and VLArbitrationTable [15:0], PortInfo's
     * SMSupportsExtendedSpeeds [31], and the modifier of NodeInfo and NodeDescription.
     */
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_PKEY_TABLE, 1u << 16, &resp), ==, 0);
    g_assert_cmphex(lduw_be_p(resp.data), ==, 0xffff);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_PKEY_TABLE, 7u << 16 | 1, &resp), ==, 0);
    g_assert_cmphex(lduw_be_p(resp.data), ==, 0x8001);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_PKEY_TABLE, 1u << 16 | 2, &resp), ==,
                     PIB_MAD_STATUS_INVALID_VALUE);     /* still no block 2 */
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_SL2VL_TABLE, 0x0101, &resp), ==, 0);
    g_assert_cmphex(ldq_be_p(resp.data), ==, 0x012300000000000full);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_VLARB_TABLE, PIB_VLARB_LOW_0 << 16 | 3, &resp),
                     ==, 0);
    g_assert_cmphex(ldl_be_p(resp.data), ==, 0x01030201);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_PORT_INFO, 0x80000001u, &resp), ==, 0);
    g_assert_cmpuint(pi->local_port_num, ==, 1);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_PORT_INFO, 0x80000002u, &resp), ==,
                     PIB_MAD_STATUS_INVALID_VALUE);     /* still no port 2 */
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_NODE_INFO, 1, &resp), ==, 0);
    g_assert_cmpuint(ni->node_type, ==, PIB_NODE_TYPE_CA);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_NODE_DESC, 0xffffffffu, &resp), ==, 0);

    /* Never silence: a status for what is not there. */
    g_assert_cmpuint(mg_get(&m, 0x0042, 0, &resp), ==, PIB_MAD_STATUS_UNSUP_ATTR);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_SWITCH_INFO, 0, &resp), ==,
                     PIB_MAD_STATUS_UNSUP_ATTR);
    g_assert_cmpuint(mg_get(&m, PIB_SMP_ATTR_LFT, 0, &resp), ==, PIB_MAD_STATUS_UNSUP_ATTR);
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_SEND, PIB_SMP_ATTR_NODE_INFO, 0);
    g_assert_cmpuint(mg_smp_ex(&m, &req, &resp, false), ==, PIB_MAD_STATUS_UNSUP_METHOD);
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
    req.hdr.class_version = 2;
    g_assert_cmpuint(mg_smp_ex(&m, &req, &resp, false), ==, PIB_MAD_STATUS_BAD_VERSION);

    /* Not the SMA's: SMInfo, responses and traps go on to the MAD agents; SA MADs too. */
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_SM_INFO, 0);
    g_assert_cmpuint(dp_mad_ifc(&m.d, &req, &resp, false), ==, 0);
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_GET_RESP,
                     PIB_SMP_ATTR_NODE_INFO, 0);
    g_assert_cmpuint(dp_mad_ifc(&m.d, &req, &resp, false), ==, 0);
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_TRAP, PIB_SMP_ATTR_NOTICE, 0);
    g_assert_cmpuint(dp_mad_ifc(&m.d, &req, &resp, false), ==, 0);
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_ADM, PIB_MAD_METHOD_GET, 0x0011, 0);
    g_assert_cmpuint(dp_mad_ifc(&m.d, &req, &resp, false), ==, 0);

    /* MAD_IFC itself: a short mailbox, a response buffer too small, port 2. */
    mbox = dp_alloc(&m.d, 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_MAD_IFC,
        .resp_addr = cpu_to_le64(m.d.resp),
        .resp_len = cpu_to_le32(PIB_MAD_SIZE),
        .in.mbox = { .addr = cpu_to_le64(mbox), .len = cpu_to_le32(100) },
    };
    g_assert_cmpuint(pib_cmd(&m.d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.mbox.len = cpu_to_le32(sizeof(struct pib_mad_ifc_in));
    cmd.resp_len = cpu_to_le32(PIB_MAD_SIZE - 1);
    g_assert_cmpuint(pib_cmd(&m.d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.resp_len = cpu_to_le32(PIB_MAD_SIZE);
    qtest_writeb(qts(&m.d), mbox + offsetof(struct pib_mad_ifc_in, port_num), 2);
    g_assert_cmpuint(pib_cmd(&m.d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);

    /* SET_PORT's capability bits: the driver's are added, the firmware's stay. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_SET_PORT,
        .in.set_port = {
            .port_num = 1,
            .mask = cpu_to_le32(PIB_SET_PORT_CAPS),
            .cap_set = cpu_to_le32(PIB_PORT_CAP_CM | PIB_PORT_CAP_SM),
            .cap_clr = cpu_to_le32(PIB_PORT_CAP_TRAP),
        },
    };
    g_assert_cmpuint(pib_cmd(&m.d, &cmd, NULL), ==, PIB_AQ_OK);
    g_assert_cmpuint(pib_query_port(&m.d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmphex(le32_to_cpu(attr.port_cap_flags), ==,
                    PIB_PORT_CAP_FIRMWARE | PIB_PORT_CAP_CM | PIB_PORT_CAP_SM);
    g_assert_false(pib_aeq_next(&m.d, &e, 10000));
    mg_shutdown(&m);
}

/*
 * 2b. Virtual lanes: what a packet carries and where it may go
 */

static void mg_set_sl2vl(Mg *m, uint64_t table)
{
    struct pib_smp req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_SET,
                                      PIB_SMP_ATTR_SL2VL_TABLE, 0);
    struct pib_smp resp;

    stq_be_p(req.data, table);
    g_assert_cmpuint(mg_smp_ex(m, &req, &resp, false), ==, 0);
}

static void mg_set_opvls(Mg *m, uint8_t opvls)
{
    struct pib_port_info pi = mg_pi_sm(m, PIB_PORTINFO_STATE_NOP);

    pi.opvls_enforce = opvls << 4;
    g_assert_cmpuint(mg_port_set(m, &pi, 0, NULL), ==, PIB_MAD_STATUS_OK);
}

/* A UD send of 256 bytes on SL sl to the peer's QP, completed (sent or not, as for UD). */
static void mg_ud_send_sl(Mg *m, TestQp *qp, uint8_t sl)
{
    struct pib_sge sge = dp_sge(m->buf + 60000, 256, m->key);
    struct pib_send_wqe w = {
        .opcode = PIB_WQE_SEND,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 1,
        .wr_id = cpu_to_le64(0x5100 + sl),
        .ud_qpn = cpu_to_le32(MG_PEER_QPN),
        .ud_qkey = cpu_to_le32(MG_QKEY),
        .ud_dlid = cpu_to_le16(MG_SM_LID),
        .ud_sl = sl,
    };

    dp_post_send_raw(&m->d, qp, &w, &sge, sizeof(sge), true);
    dp_expect(&m->d, &m->cq, 0x5100 + sl, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
}

static void test_vls(void)
{
    uint64_t drops, rx;
    TestQp ud;
    MgPkt p;
    Mg m;

    mg_boot(&m);
    mg_activate(&m);
    mg_ud_qp(&m, PIB_QPT_UD, 0, MG_QKEY, &ud);

    /* Sending: the LRH carries the VL the port's SLtoVLMappingTable gives the WQE's SL. */
    mg_set_sl2vl(&m, 0x0123f00000000000ull);   /* SL1 -> VL1 ... SL3 -> VL3, SL4 -> VL15 */
    mg_ud_send_sl(&m, &ud, 3);
    g_assert_true(mg_recv(&m, &p, 5000));
    g_assert_cmpuint(p.sl, ==, 3);
    g_assert_cmpuint(p.vl, ==, 3);
    mg_ud_send_sl(&m, &ud, 0);
    g_assert_true(mg_recv(&m, &p, 5000));
    g_assert_cmpuint(p.vl, ==, 0);

    /* An SL mapped to VL15 does not leave the port (IBTA 7.6.6): counted, not sent. */
    drops = mg_counter(&m, PIB_CNT_TX_DROP_VL);
    mg_ud_send_sl(&m, &ud, 4);
    g_assert_cmpuint(mg_counter(&m, PIB_CNT_TX_DROP_VL), ==, drops + 1);
    /* Nor does one mapped beyond OperationalVLs: VL0-1 now, SL2 is on VL2. */
    mg_set_opvls(&m, 2);
    mg_ud_send_sl(&m, &ud, 2);
    g_assert_cmpuint(mg_counter(&m, PIB_CNT_TX_DROP_VL), ==, drops + 2);
    mg_ud_send_sl(&m, &ud, 1);
    g_assert_true(mg_recv(&m, &p, 5000));
    g_assert_cmpuint(p.vl, ==, 1);
    g_assert_false(mg_recv(&m, &p, 100));      /* the dropped ones never came */

    /* Receiving: a data packet on a VL the port does not operate is a PortRcvError. */
    drops = mg_counter(&m, PIB_CNT_RX_DROP_VL);
    rx = mg_counter(&m, PIB_CNT_RX_PACKETS);
    p = (MgPkt) {
        .dlid = MG_LID, .slid = MG_SM_LID, .pkey = 0xffff, .dqpn = ud.qpn,
        .sqpn = MG_PEER_QPN, .qkey = MG_QKEY, .paylen = 64, .vl = 2, .sl = 2,
    };
    mg_send(&m, &p);
    mg_wait_counter(&m, PIB_CNT_RX_DROP_VL, drops + 1);
    p.vl = 1;
    mg_send(&m, &p);
    dp_expect(&m.d, &m.cq, 0x100 * ud.qpn, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    g_assert_cmpuint(mg_counter(&m, PIB_CNT_RX_PACKETS), ==, rx + 2);
    g_assert_cmpuint(mg_counter(&m, PIB_CNT_RX_DROP_VL), ==, drops + 1);
    /* VL15 stays QP0's alone, whatever OperationalVLs says. */
    drops = mg_counter(&m, PIB_CNT_RX_DROP_VL15);
    p.vl = 15;
    mg_send(&m, &p);
    mg_wait_counter(&m, PIB_CNT_RX_DROP_VL15, drops + 1);
    mg_shutdown(&m);
}

/*
 * 3. The M_Key
 */

/* PortInfo as an SM with this M_Key reads it. */
static struct pib_port_info mg_port_info_key(Mg *m, uint64_t mkey)
{
    struct pib_smp req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_GET,
                                    PIB_SMP_ATTR_PORT_INFO, 1);
    struct pib_smp resp;

    stq_be_p(&req.mkey_hi_be, mkey);
    g_assert_cmpuint(mg_smp_ex(m, &req, &resp, false), ==, PIB_MAD_STATUS_OK);
    return *(struct pib_port_info *)resp.data;
}

static void test_mkey(void)
{
    const uint64_t key = 0x1122334455667788ull;
    struct pib_port_info pi, now;
    struct pib_smp req, resp, trap;
    struct pib_trap256 *d;
    MgPkt p;
    Mg m;

    mg_boot(&m);
    mg_activate(&m);

    /* Level 2, no lease: Gets and Sets need the key. */
    pi = mg_pi_sm(&m, 0);
    stq_be_p(&pi.mkey_hi_be, key);
    pi.mkeyprot_lmc = 2 << 6;
    g_assert_cmpuint(mg_port_set(&m, &pi, 0, &now), ==, 0);
    g_assert_cmphex(ldq_be_p(&now.mkey_hi_be), ==, key);

    /* A Get without it: no answer, a violation, trap 256 to the SM. */
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_PORT_INFO, 1);
    stq_be_p(&req.mkey_hi_be, 0x99);
    g_assert_cmpuint(dp_mad_ifc(&m.d, &req, &resp, false), ==, PIB_MAD_IFC_CONSUMED);
    g_assert_cmpuint(mg_expect_trap(&m, &trap), ==, PIB_TRAP_BAD_MKEY);
    d = (struct pib_trap256 *)((struct pib_notice *)trap.data)->details;
    g_assert_cmpuint(be16_to_cpu(d->lid_be), ==, MG_LID);
    g_assert_cmpuint(d->method, ==, PIB_MAD_METHOD_GET);
    g_assert_cmphex(be16_to_cpu(d->attr_id_be), ==, PIB_SMP_ATTR_PORT_INFO);
    g_assert_cmphex(ldq_be_p(d->mkey_be), ==, 0x99);
    g_assert_cmphex(ldq_be_p(&trap.mkey_hi_be), ==, key);   /* traps carry the M_Key */
    g_assert_cmpuint(((struct pib_notice *)trap.data)->generic_type, ==,
                     PIB_NOTICE_GENERIC | PIB_NOTICE_TYPE_SECURITY);
    /* Not repressed: sent again after the subnet timeout; repressed: not again. */
    qtest_clock_step(qts(&m.d), 1200 * 1000 * 1000ll);
    g_assert_cmpuint(mg_expect_trap(&m, &trap), ==, PIB_TRAP_BAD_MKEY);
    mg_repress(&m, &trap);
    qtest_clock_step(qts(&m.d), 1200 * 1000 * 1000ll);
    g_assert_false(mg_recv(&m, &p, 200));

    /* With the key: answered; the violation was counted. */
    now = mg_port_info_key(&m, key);
    g_assert_cmpuint(be16_to_cpu(now.mkey_violations_be), ==, 1);
    g_assert_cmpuint(now.mkeyprot_lmc >> 6, ==, 2);

    /* A Set without it: refused, nothing changed... */
    pi = now;
    pi.lid_be = cpu_to_be16(7);
    pi.speed_state &= 0xf0;
    pi.phys_down &= 0x0f;
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_SET, PIB_SMP_ATTR_PORT_INFO, 1);
    memcpy(req.data, &pi, sizeof(pi));
    g_assert_cmpuint(dp_mad_ifc(&m.d, &req, &resp, false), ==, PIB_MAD_IFC_CONSUMED);
    g_assert_cmpuint(mg_expect_trap(&m, &trap), ==, PIB_TRAP_BAD_MKEY);
    mg_repress(&m, &trap);
    now = mg_port_info_key(&m, key);
    g_assert_cmpuint(be16_to_cpu(now.lid_be), ==, MG_LID);
    /* ... but a trusted local agent may. */
    g_assert_cmpuint(mg_smp_ex(&m, &req, &resp, true), ==, 0);
    g_assert_cmpuint(be16_to_cpu(((struct pib_port_info *)resp.data)->lid_be), ==, 7);
    pi.lid_be = cpu_to_be16(MG_LID);
    g_assert_cmpuint(mg_port_set(&m, &pi, key, NULL), ==, 0);

    /*
     * The lease (1 s): a violation starts it, and nothing with the right key comes (a
     * TrapRepress with it would end the countdown): when it runs out, the protection goes.
     * The trap is sent again in the meantime (at ~1.07 s).
     */
    pi.mkey_lease_be = cpu_to_be16(1);
    g_assert_cmpuint(mg_port_set(&m, &pi, key, NULL), ==, 0);
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_PORT_INFO, 1);
    g_assert_cmpuint(dp_mad_ifc(&m.d, &req, &resp, false), ==, PIB_MAD_IFC_CONSUMED);
    g_assert_cmpuint(mg_expect_trap(&m, &trap), ==, PIB_TRAP_BAD_MKEY);
    qtest_clock_step(qts(&m.d), 900 * 1000 * 1000ll);
    g_assert_cmpuint(dp_mad_ifc(&m.d, &req, &resp, false), ==, PIB_MAD_IFC_CONSUMED);
    g_assert_cmpuint(mg_expect_trap(&m, &trap), ==, PIB_TRAP_BAD_MKEY);
    qtest_clock_step(qts(&m.d), 200 * 1000 * 1000ll);
    g_assert_cmpuint(mg_smp_ex(&m, &req, &resp, false), ==, 0);
    now = *(struct pib_port_info *)resp.data;
    g_assert_cmpuint(now.mkeyprot_lmc >> 6, ==, 0);
    g_assert_cmphex(ldq_be_p(&now.mkey_hi_be), ==, key);    /* level 0: shown */
    /* 1 (the SM wrote it back with the LID, it is RW), then the two of the lease */
    g_assert_cmpuint(be16_to_cpu(now.mkey_violations_be), ==, 3);
    mg_repress(&m, &trap);

    /* Level 1: a Get without the key is answered, with the M_Key hidden. */
    pi = now;
    pi.speed_state &= 0xf0;
    pi.phys_down &= 0x0f;
    pi.mkeyprot_lmc = 1 << 6;
    pi.mkey_lease_be = 0;
    g_assert_cmpuint(mg_port_set(&m, &pi, key, NULL), ==, 0);
    g_assert_cmpuint(mg_smp_ex(&m, &req, &resp, false), ==, 0);
    g_assert_cmphex(ldq_be_p(&((struct pib_port_info *)resp.data)->mkey_hi_be), ==, 0);
    now = mg_port_info_key(&m, key);
    g_assert_cmphex(ldq_be_p(&now.mkey_hi_be), ==, key);
    mg_shutdown(&m);
}

/*
 * 4. QP0 and QP1 on the wire, and trap 144
 */

static void test_special_qps(void)
{
    struct pib_port_attr attr;
    struct pib_admin_cmd cmd;
    struct pib_smp trap;
    struct pib_cqe cqe;
    TestQp qp0, qp1;
    MgPkt p, q;
    uint64_t drops, mbox;
    uint8_t desc[PIB_SMP_DATA_SIZE] = "renamed";
    Mg m;

    mg_boot(&m);
    mg_ud_qp(&m, PIB_QPT_SMI, 0, 0, &qp0);
    mg_ud_qp(&m, PIB_QPT_GSI, 0, 0x80010000, &qp1);
    g_assert_cmpuint(qp0.qpn, ==, 0);
    g_assert_cmpuint(qp1.qpn, ==, 1);

    /* In INIT, with no LID yet: a directed-route SMP to the permissive LID arrives. */
    p = (MgPkt) {
        .vl = 15, .dlid = PIB_LID_PERMISSIVE, .slid = PIB_LID_PERMISSIVE, .pkey = 0xffff,
        .dqpn = 0, .sqpn = 0, .qkey = 0, .paylen = PIB_MAD_SIZE,
    };
    p.payload[1] = PIB_MGMT_CLASS_SUBN_DR;
    mg_send(&m, &p);
    dp_expect(&m.d, &m.cq, 0, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le16_to_cpu(cqe.slid), ==, PIB_LID_PERMISSIVE);
    g_assert_cmpuint(le32_to_cpu(cqe.src_qp) & PIB_QPN_MASK, ==, 0);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 40 + PIB_MAD_SIZE);
    /* ... and QP0's answer to the permissive LID comes from it, on VL15. */
    mg_ud_send(&m, &qp0, PIB_LID_PERMISSIVE, 0, 0, 0);
    g_assert_true(mg_recv(&m, &q, TIMEOUT_US / 1000));
    g_assert_cmpuint(q.vl, ==, 15);
    g_assert_cmpuint(q.dlid, ==, PIB_LID_PERMISSIVE);
    g_assert_cmpuint(q.slid, ==, PIB_LID_PERMISSIVE);
    g_assert_cmphex(q.pkey, ==, 0xffff);
    /* QP1 may not send in INIT. */
    drops = mg_counter(&m, PIB_CNT_TX_DROP_PORT_DOWN);
    mg_ud_send(&m, &qp1, MG_SM_LID, 1, 0x80010000, 0);
    g_assert_cmpuint(mg_counter(&m, PIB_CNT_TX_DROP_PORT_DOWN), ==, drops + 1);

    /* VL15 is QP0's alone; the permissive LID too. */
    drops = mg_counter(&m, PIB_CNT_RX_DROP_VL15);
    p.vl = 0;
    mg_send(&m, &p);                        /* an SMP not on VL15 */
    mg_wait_counter(&m, PIB_CNT_RX_DROP_VL15, drops + 1);
    mg_activate(&m);
    p = (MgPkt) {
        .vl = 15, .dlid = MG_LID, .slid = MG_SM_LID, .pkey = 0xffff, .dqpn = 1, .sqpn = 1,
        .qkey = 0x80010000, .paylen = PIB_MAD_SIZE,
    };
    mg_send(&m, &p);                        /* VL15 to QP1 */
    mg_wait_counter(&m, PIB_CNT_RX_DROP_VL15, drops + 2);
    drops = mg_counter(&m, PIB_CNT_RX_DROP_DLID);
    p.vl = 0;
    p.dlid = PIB_LID_PERMISSIVE;
    mg_send(&m, &p);                        /* permissive LID to QP1 */
    mg_wait_counter(&m, PIB_CNT_RX_DROP_DLID, drops + 1);

    /* A MAD must be 256 bytes: a short one costs QP1 nothing. */
    drops = mg_counter(&m, PIB_CNT_RX_DROP_LENGTH);
    p.dlid = MG_LID | 0;
    p.paylen = 100;
    mg_send(&m, &p);
    mg_wait_counter(&m, PIB_CNT_RX_DROP_LENGTH, drops + 1);
    g_assert_cmpuint(dp_query_qp(&m.d, 1).qp_state, ==, PIB_QPS_RTS);
    /* A good one arrives with its fields: SL, source QP, P_Key index. */
    p.paylen = PIB_MAD_SIZE;
    p.sl = 3;
    p.sqpn = 0x77;
    mg_send(&m, &p);
    dp_expect(&m.d, &m.cq, 0x100, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, 1);          /* P_Key index 0 */
    g_assert_cmpuint(le32_to_cpu(cqe.src_qp), ==, 0x77);
    g_assert_cmpuint(cqe.sl, ==, 3);
    g_assert_cmpuint(le16_to_cpu(cqe.slid), ==, MG_SM_LID);
    /* QP1 sends with the P_Key of the entry its WQE names; a bad index fails the WQE. */
    mg_ud_send(&m, &qp1, MG_SM_LID, 1, 0x80010000, 0);
    g_assert_true(mg_recv(&m, &q, TIMEOUT_US / 1000));
    g_assert_cmpuint(q.vl, ==, 0);
    g_assert_cmphex(q.pkey, ==, 0xffff);
    g_assert_cmphex(q.qkey, ==, 0x80010000);
    g_assert_cmpuint(q.sqpn, ==, 1);

    /*
     * A unicast GRH's DGID must be one of the port's GIDs: the port GID or an alias an SM
     * assigned (GUIDInfo).  An unassigned entry (prefix:0) or a GID nobody assigned is
     * a drop.
     */
    {
        struct pib_smp set = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_SET,
                                          PIB_SMP_ATTR_GUID_INFO, 0), resp;

        stq_be_p(set.data + 16, TEST_ALIAS_GUID);      /* entry 2 */
        g_assert_cmpuint(mg_smp_ex(&m, &set, &resp, false), ==, 0);
    }
    p.grh = true;
    stq_be_p(p.sgid, PIB_DEFAULT_GID_PREFIX);
    stq_be_p(p.sgid + 8, 0x1234);
    stq_be_p(p.dgid, PIB_DEFAULT_GID_PREFIX);
    stq_be_p(p.dgid + 8, TEST_ALIAS_GUID);
    mg_send(&m, &p);
    dp_expect(&m.d, &m.cq, 0x101, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_true(cqe.flags & PIB_CQE_F_GRH);
    drops = mg_counter(&m, PIB_CNT_RX_DROP_DLID);
    stq_be_p(p.dgid + 8, 0);                            /* entry 1, unassigned */
    mg_send(&m, &p);
    stq_be_p(p.dgid + 8, TEST_ALIAS_GUID + 1);
    mg_send(&m, &p);
    mg_wait_counter(&m, PIB_CNT_RX_DROP_DLID, drops + 2);
    p.grh = false;

    /* Trap 144: the driver changes the capabilities, then the node description. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_SET_PORT,
        .in.set_port = {
            .port_num = 1,
            .mask = cpu_to_le32(PIB_SET_PORT_CAPS),
            .cap_set = cpu_to_le32(PIB_PORT_CAP_CM),
        },
    };
    g_assert_cmpuint(pib_cmd(&m.d, &cmd, NULL), ==, PIB_AQ_OK);
    g_assert_cmpuint(mg_expect_trap(&m, &trap), ==, PIB_TRAP_CAP_MASK_CHANGE);
    {
        struct pib_trap144 *d = (void *)((struct pib_notice *)trap.data)->details;

        g_assert_cmphex(be16_to_cpu(d->cap_mask_hi_be) << 16 |
                        be16_to_cpu(d->cap_mask_lo_be), ==,
                        PIB_PORT_CAP_FIRMWARE | PIB_PORT_CAP_CM);
        g_assert_cmpuint(d->change_flags, ==, 0);
    }
    mg_repress(&m, &trap);
    g_assert_cmpuint(pib_cmd(&m.d, &cmd, NULL), ==, PIB_AQ_OK);    /* no change: none */
    g_assert_false(mg_recv(&m, &q, 200));
    mbox = dp_alloc(&m.d, 4096);
    qtest_memwrite(qts(&m.d), mbox, desc, sizeof(desc));
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_SET_NODE_DESC,
        .in.mbox = { .addr = cpu_to_le64(mbox), .len = cpu_to_le32(sizeof(desc)) },
    };
    g_assert_cmpuint(pib_cmd(&m.d, &cmd, NULL), ==, PIB_AQ_OK);
    g_assert_cmpuint(mg_expect_trap(&m, &trap), ==, PIB_TRAP_CAP_MASK_CHANGE);
    g_assert_cmpuint(((struct pib_trap144 *)
                      ((struct pib_notice *)trap.data)->details)->change_flags, ==,
                     PIB_TRAP144_NODE_DESC);
    /*
     * Another SM takes over before it is repressed: the resend goes to the new master SM
     * (PortInfo:MasterSMLID as it is now), not to the one that is gone.
     */
    {
        struct pib_port_info pi = mg_pi_sm(&m, PIB_PORTINFO_STATE_NOP);
        struct pib_smp again;

        pi.sm_lid_be = cpu_to_be16(MG_SM_LID + 1);
        g_assert_cmpuint(mg_port_set(&m, &pi, 0, NULL), ==, PIB_MAD_STATUS_OK);
        qtest_clock_step(qts(&m.d), 1200 * 1000 * 1000ll);
        g_assert_cmpuint(mg_expect_trap_to(&m, &again, MG_SM_LID + 1), ==,
                         PIB_TRAP_CAP_MASK_CHANGE);
        g_assert_cmphex(again.hdr.tid_lo_be, ==, trap.hdr.tid_lo_be);   /* the same trap */
        mg_repress(&m, &again);
        qtest_clock_step(qts(&m.d), 1200 * 1000 * 1000ll);
        g_assert_false(mg_recv(&m, &q, 200));
    }
    g_assert_cmpuint(pib_query_port(&m.d, 1, &attr), ==, PIB_AQ_OK);
    mg_shutdown(&m);
}

/*
 * 5. Partitions
 */

static void mg_set_pkeys(Mg *m, const uint16_t *keys, int n)
{
    struct pib_smp req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_SET,
                                    PIB_SMP_ATTR_PKEY_TABLE, 0);
    struct pib_smp resp;
    int i;

    for (i = 0; i < n; i++) {
        stw_be_p(req.data + 2 * i, keys[i]);
    }
    g_assert_cmpuint(mg_smp_ex(m, &req, &resp, false), ==, 0);
}

static void test_partitions(void)
{
    /* 0: default (full), 1: 0x8001 full, 2: 0x0002 limited */
    static const uint16_t keys[] = { 0xffff, 0x8001, 0x0002 };
    uint64_t drops, viol;
    struct pib_port_attr attr;
    struct pib_smp trap;
    struct pib_cqe cqe;
    TestQp full, limited, qp1;
    MgPkt p;
    Mg m;

    mg_boot(&m);
    mg_activate(&m);
    mg_set_pkeys(&m, keys, 3);
    g_assert_true(dp_aeq_find(&m.d, PIB_AE_PKEY_CHANGE, 1));
    mg_ud_qp(&m, PIB_QPT_UD, 1, MG_QKEY, &full);
    mg_ud_qp(&m, PIB_QPT_UD, 2, MG_QKEY, &limited);
    mg_ud_qp(&m, PIB_QPT_GSI, 0, 0x80010000, &qp1);

    p = (MgPkt) {
        .dlid = MG_LID, .slid = MG_SM_LID, .dqpn = full.qpn, .sqpn = MG_PEER_QPN,
        .qkey = MG_QKEY, .paylen = 8,
    };
    /* The QP's own partition, full or limited members: in. */
    p.pkey = 0x8001;
    mg_send(&m, &p);
    dp_expect(&m.d, &m.cq, 0x100 * full.qpn, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.qpn) >> 24, ==, 1);    /* matched entry 1 */
    p.pkey = 0x0001;
    mg_send(&m, &p);
    dp_expect(&m.d, &m.cq, 0x100 * full.qpn + 1, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);

    /* Another partition of the port, not the QP's: dropped at the QP, counted. */
    drops = mg_counter(&m, PIB_CNT_RX_DROP_PKEY);
    g_assert_cmpuint(pib_query_port(&m.d, 1, &attr), ==, PIB_AQ_OK);
    viol = le32_to_cpu(attr.bad_pkey_cntr);
    p.pkey = 0xffff;
    mg_send(&m, &p);
    /* One in no partition of the port at all. */
    p.pkey = 0x8003;
    mg_send(&m, &p);
    /* Two limited members: no. */
    p.dqpn = limited.qpn;
    p.pkey = 0x0002;
    mg_send(&m, &p);
    mg_wait_counter(&m, PIB_CNT_RX_DROP_PKEY, drops + 3);
    g_assert_cmpuint(pib_query_port(&m.d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(attr.bad_pkey_cntr), ==, viol + 3);
    /* A full member to the limited QP: yes. */
    p.pkey = 0x8002;
    mg_send(&m, &p);
    dp_expect(&m.d, &m.cq, 0x100 * limited.qpn, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    /* The device sends with the QP's own P_Key. */
    mg_ud_send(&m, &limited, MG_SM_LID, MG_PEER_QPN, MG_QKEY, 0);
    g_assert_true(mg_recv(&m, &p, TIMEOUT_US / 1000));
    g_assert_cmphex(p.pkey, ==, 0x0002);

    /* QP1 takes any partition of the port and says which... */
    p = (MgPkt) {
        .dlid = MG_LID, .slid = MG_SM_LID, .pkey = 0x8001, .dqpn = 1, .sqpn = 1,
        .qkey = 0x80010000, .paylen = PIB_MAD_SIZE,
    };
    mg_send(&m, &p);
    dp_expect(&m.d, &m.cq, 0x100, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmphex(le32_to_cpu(cqe.qpn), ==, 1u << 24 | 1);
    /* ... but not one outside them: dropped, and trap 257 to the SM. */
    p.pkey = 0x8005;
    p.sqpn = 0x33;
    mg_send(&m, &p);
    g_assert_cmpuint(mg_expect_trap(&m, &trap), ==, PIB_TRAP_BAD_PKEY);
    {
        uint8_t *d = ((struct pib_notice *)trap.data)->details;

        g_assert_cmpuint(lduw_be_p(d + 2), ==, MG_SM_LID);
        g_assert_cmpuint(lduw_be_p(d + 4), ==, MG_LID);
        g_assert_cmphex(ldl_be_p(d + 6), ==, 0x8005);
        g_assert_cmphex(ldl_be_p(d + 10) & PIB_QPN_MASK, ==, 0x33);
        g_assert_cmphex(ldl_be_p(d + 14), ==, 1);
    }
    mg_repress(&m, &trap);
    mg_shutdown(&m);
}

/*
 * 6. The PMA
 */

static void test_pma(void)
{
    struct pib_pma_mad r;
    struct pib_port_counters *pc = (struct pib_port_counters *)r.data;
    struct pib_port_counters_ext *px = (struct pib_port_counters_ext *)r.data;
    struct pib_class_port_info *cpi = (struct pib_class_port_info *)r.data;
    uint64_t rx_pkts, rx_bytes, tx_pkts;
    TestQp ud;
    MgPkt p;
    int i;
    Mg m;

    mg_boot(&m);
    mg_activate(&m);
    mg_ud_qp(&m, PIB_QPT_UD, 0, MG_QKEY, &ud);

    g_assert_cmpuint(dp_pma(&m.d, PIB_MAD_METHOD_GET, PIB_PMA_ATTR_CLASS_PORT_INFO, 0, 0, &r),
                     ==, 0);
    g_assert_cmphex(be16_to_cpu(cpi->cap_mask_be), ==,
                    PIB_PMA_CAP_EXT_WIDTH | PIB_PMA_CAP_XMIT_WAIT);

    /* Clear everything, then ten packets in and one out. */
    g_assert_cmpuint(dp_pma(&m.d, PIB_MAD_METHOD_SET, PIB_PMA_ATTR_PORT_COUNTERS, 1, 0xffff,
                            &r), ==, 0);
    g_assert_cmpuint(be32_to_cpu(pc->rcv_pkts_be), ==, 0);
    g_assert_cmpuint(dp_pma(&m.d, PIB_MAD_METHOD_SET, PIB_PMA_ATTR_PORT_COUNTERS_EXT, 1, 0xff,
                            &r), ==, 0);
    rx_pkts = mg_counter(&m, PIB_CNT_RX_PACKETS);
    rx_bytes = mg_counter(&m, PIB_CNT_RX_BYTES);
    tx_pkts = mg_counter(&m, PIB_CNT_TX_PACKETS);
    p = (MgPkt) {
        .dlid = MG_LID, .slid = MG_SM_LID, .pkey = 0xffff, .dqpn = ud.qpn,
        .sqpn = MG_PEER_QPN, .qkey = MG_QKEY, .paylen = 100,
    };
    for (i = 0; i < 10; i++) {
        mg_send(&m, &p);
        dp_expect(&m.d, &m.cq, 0x100 * ud.qpn + i, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    }
    mg_ud_send(&m, &ud, MG_SM_LID, MG_PEER_QPN, MG_QKEY, 0);
    g_assert_true(mg_recv(&m, &p, TIMEOUT_US / 1000));
    rx_pkts = mg_counter(&m, PIB_CNT_RX_PACKETS) - rx_pkts;
    rx_bytes = mg_counter(&m, PIB_CNT_RX_BYTES) - rx_bytes;
    tx_pkts = mg_counter(&m, PIB_CNT_TX_PACKETS) - tx_pkts;
    g_assert_cmpuint(rx_pkts, ==, 10);
    g_assert_cmpuint(tx_pkts, ==, 1);

    /* PortCounters (port 0: the arrival port): the packets, data in 4-octet words. */
    g_assert_cmpuint(dp_pma(&m.d, PIB_MAD_METHOD_GET, PIB_PMA_ATTR_PORT_COUNTERS, 0, 0, &r),
                     ==, 0);
    g_assert_cmpuint(be32_to_cpu(pc->rcv_pkts_be), ==, rx_pkts);
    g_assert_cmpuint(be32_to_cpu(pc->xmit_pkts_be), ==, tx_pkts);
    g_assert_cmpuint(be32_to_cpu(pc->rcv_data_be), ==, (rx_bytes + 4 * rx_pkts) / 4);
    /* PortCountersExtended: the same, 64 bits, unicast too. */
    g_assert_cmpuint(dp_pma(&m.d, PIB_MAD_METHOD_GET, PIB_PMA_ATTR_PORT_COUNTERS_EXT, 1, 0,
                            &r), ==, 0);
    g_assert_cmpuint(ldq_be_p(px->ctr_be[3]), ==, rx_pkts);         /* PortRcvPkts */
    g_assert_cmpuint(ldq_be_p(px->ctr_be[5]), ==, rx_pkts);         /* unicast */
    g_assert_cmpuint(ldq_be_p(px->ctr_be[1]), ==, (rx_bytes + 4 * rx_pkts) / 4);

    /* A Set clears only what CounterSelect names. */
    g_assert_cmpuint(dp_pma(&m.d, PIB_MAD_METHOD_SET, PIB_PMA_ATTR_PORT_COUNTERS, 1,
                            PIB_PMA_SEL_RCV_PKTS, &r), ==, 0);
    g_assert_cmpuint(be32_to_cpu(pc->rcv_pkts_be), ==, 0);
    g_assert_cmpuint(be32_to_cpu(pc->xmit_pkts_be), ==, tx_pkts);
    g_assert_cmpuint(be32_to_cpu(pc->rcv_data_be), ==, (rx_bytes + 4 * rx_pkts) / 4);
    /* The device's own counters (hw_counters) keep counting. */
    g_assert_cmpuint(mg_counter(&m, PIB_CNT_RX_PACKETS), >=, rx_pkts);

    /* Bad input: a port that is not there, all ports, an unknown attribute or method. */
    g_assert_cmpuint(dp_pma(&m.d, PIB_MAD_METHOD_GET, PIB_PMA_ATTR_PORT_COUNTERS, 2, 0, &r),
                     ==, PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmpuint(dp_pma(&m.d, PIB_MAD_METHOD_GET, PIB_PMA_ATTR_PORT_COUNTERS, 0xff, 0,
                            &r), ==, PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmpuint(dp_pma(&m.d, PIB_MAD_METHOD_GET, 0x0010, 1, 0, &r), ==,
                     PIB_MAD_STATUS_UNSUP_ATTR);
    g_assert_cmpuint(dp_pma(&m.d, PIB_MAD_METHOD_TRAP, PIB_PMA_ATTR_PORT_COUNTERS, 1, 0, &r),
                     ==, PIB_MAD_STATUS_UNSUP_METHOD);
    g_assert_cmpuint(dp_pma(&m.d, PIB_MAD_METHOD_SET, PIB_PMA_ATTR_CLASS_PORT_INFO, 0, 0, &r),
                     ==, PIB_MAD_STATUS_UNSUP_ATTR);
    mg_shutdown(&m);
}

/*
 * 7. Multicast
 */

static uint8_t mg_mcast(Mg *m, uint8_t opcode, uint32_t qpn, const uint8_t *mgid,
                        uint16_t mlid)
{
    struct pib_admin_cmd cmd = {
        .opcode = opcode,
        .in.mcast = { .qpn = cpu_to_le32(qpn), .mlid = cpu_to_le16(mlid) },
    };

    memcpy(cmd.in.mcast.mgid, mgid, 16);
    return pib_cmd(&m->d, &cmd, NULL);
}

/* The next receive completion of qp: a multicast one, its GRH in the buffer. */
static void mg_expect_mcast(Mg *m, TestQp *qp, uint32_t idx, const uint8_t *mgid,
                            uint32_t paylen)
{
    uint64_t buf = m->buf + (qp->qpn % 4) * 16384 + (idx % 4) * 4096;
    struct pib_cqe cqe;
    uint8_t grh[40];

    dp_expect(&m->d, &m->cq, 0x100 * qp->qpn + idx, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.qpn) & PIB_QPN_MASK, ==, qp->qpn);
    g_assert_true(cqe.flags & PIB_CQE_F_GRH);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 40 + paylen);
    qtest_memread(qts(&m->d), buf, grh, sizeof(grh));
    g_assert_cmpmem(grh + 24, 16, mgid, 16);
}

static void test_multicast(void)
{
    /* The IPoIB broadcast group of the default partition. */
    static const uint8_t mgid[16] = {
        0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
    };
    static const uint8_t other[16] = { 0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 1 };
    static const uint8_t unicast[16] = { 0xfe, 0x80 };
    const uint16_t mlid = 0xc001;
    uint8_t our_gid[16];
    struct pib_sge sge;
    struct pib_ud_wqe w;
    TestQp a, b, c, qp1;
    uint64_t base[PIB_CNT_MAX];
    MgPkt p, q;
    Mg m;

    mg_boot(&m);
    mg_activate(&m);
    mg_ud_qp(&m, PIB_QPT_UD, 0, MG_QKEY, &a);
    mg_ud_qp(&m, PIB_QPT_UD, 0, MG_QKEY, &b);
    mg_ud_qp(&m, PIB_QPT_UD, 0, MG_QKEY, &c);
    mg_ud_qp(&m, PIB_QPT_GSI, 0, 0x80010000, &qp1);

    /* Attaching: twice is no error; only UD QPs, real MGIDs and MLIDs, one MLID a group. */
    g_assert_cmpuint(mg_mcast(&m, PIB_CMD_ATTACH_MCAST, a.qpn, mgid, mlid), ==, PIB_AQ_OK);
    g_assert_cmpuint(mg_mcast(&m, PIB_CMD_ATTACH_MCAST, a.qpn, mgid, mlid), ==, PIB_AQ_OK);
    g_assert_cmpuint(mg_mcast(&m, PIB_CMD_ATTACH_MCAST, b.qpn, mgid, mlid), ==, PIB_AQ_OK);
    g_assert_cmpuint(mg_mcast(&m, PIB_CMD_ATTACH_MCAST, qp1.qpn, mgid, mlid), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(mg_mcast(&m, PIB_CMD_ATTACH_MCAST, c.qpn, unicast, mlid), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(mg_mcast(&m, PIB_CMD_ATTACH_MCAST, c.qpn, mgid, 0x100), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(mg_mcast(&m, PIB_CMD_ATTACH_MCAST, c.qpn, mgid, 0xc002), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(mg_mcast(&m, PIB_CMD_ATTACH_MCAST, 0x777, mgid, mlid), ==,
                     PIB_AQ_BAD_RESOURCE);

    /* From the wire: every attached QP gets it, with the GRH; c did not join. */
    dp_counters(&m.d, base);
    p = (MgPkt) {
        .grh = true, .dlid = mlid, .slid = MG_SM_LID, .pkey = 0xffff,
        .dqpn = PIB_MCAST_QPN, .sqpn = MG_PEER_QPN, .qkey = MG_QKEY, .paylen = 300,
    };
    memcpy(p.dgid, mgid, 16);
    mg_send(&m, &p);
    mg_expect_mcast(&m, &a, 0, mgid, 300);
    mg_expect_mcast(&m, &b, 0, mgid, 300);
    g_assert_cmpuint(mg_counter(&m, PIB_CNT_RX_MCAST_PACKETS), ==,
                     base[PIB_CNT_RX_MCAST_PACKETS] + 1);

    /* Drops, each counted: no GRH, not to QP 0xffffff, a group nobody here joined, and a
     * GRH that lies about the length. */
    p.grh = false;
    mg_send(&m, &p);
    p.grh = true;
    p.dqpn = a.qpn;
    mg_send(&m, &p);
    p.dqpn = PIB_MCAST_QPN;
    memcpy(p.dgid, other, 16);
    mg_send(&m, &p);
    mg_wait_counter(&m, PIB_CNT_RX_DROP_MCAST, base[PIB_CNT_RX_DROP_MCAST] + 3);
    memcpy(p.dgid, mgid, 16);
    p.grh_len_delta = 8;
    mg_send(&m, &p);
    mg_wait_counter(&m, PIB_CNT_RX_DROP_MALFORMED, base[PIB_CNT_RX_DROP_MALFORMED] + 1);
    p.grh_len_delta = 0;

    /* Sent by a: out on the wire with its GRH, and looped back to a and b. */
    memset(&w, 0, sizeof(w));
    w.opcode = PIB_WQE_SEND;
    w.flags = PIB_WQE_F_SIGNALED;
    w.num_sge = 1;
    w.wr_id = cpu_to_le64(0x5e4d);
    w.av_flags = PIB_UD_AV_F_GRH;
    w.hop_limit = 1;
    memcpy(w.dgid, mgid, 16);
    w.ud_qpn = cpu_to_le32(PIB_MCAST_QPN);
    w.ud_qkey = cpu_to_le32(MG_QKEY);
    w.ud_dlid = cpu_to_le16(mlid);
    sge = dp_sge(m.buf + 60000, 200, m.key);
    dp_post_send_raw(&m.d, &a, (struct pib_send_wqe *)&w, &sge, sizeof(sge), true);
    /* (the loopback and the send completion may come in either order) */
    g_assert_true(mg_recv(&m, &q, TIMEOUT_US / 1000));
    g_assert_true(q.grh);
    g_assert_cmpmem(q.dgid, 16, mgid, 16);
    stq_be_p(our_gid, PIB_DEFAULT_GID_PREFIX);
    stq_be_p(our_gid + 8, TEST_NODE_GUID + 1);
    g_assert_cmpmem(q.sgid, 16, our_gid, 16);
    g_assert_cmpuint(q.dlid, ==, mlid);
    g_assert_cmpuint(q.dqpn, ==, PIB_MCAST_QPN);
    g_assert_cmpuint(q.paylen, ==, 200);
    {
        struct pib_cqe cqe;
        int got = 0, sends = 0, i;

        for (i = 0; i < 3; i++) {
            g_assert_true(dp_poll(&m.d, &m.cq, &cqe, TIMEOUT_US));
            g_assert_cmpuint(cqe.status, ==, PIB_WC_SUCCESS);
            if (cqe.opcode == PIB_CQE_SEND) {
                sends++;
            } else {
                g_assert_true(cqe.flags & PIB_CQE_F_GRH);
                got |= 1 << (le64_to_cpu(cqe.wr_id) == 0x100 * a.qpn + 1 ? 0 :
                             le64_to_cpu(cqe.wr_id) == 0x100 * b.qpn + 1 ? 1 : 2);
            }
        }
        g_assert_cmpint(sends, ==, 1);
        g_assert_cmphex(got, ==, 3);
    }
    g_assert_cmpuint(mg_counter(&m, PIB_CNT_TX_MCAST_PACKETS), ==,
                     base[PIB_CNT_TX_MCAST_PACKETS] + 1);

    /* Detached, b gets nothing more; detaching it again: EINVAL's status. */
    g_assert_cmpuint(mg_mcast(&m, PIB_CMD_DETACH_MCAST, b.qpn, mgid, mlid), ==, PIB_AQ_OK);
    g_assert_cmpuint(mg_mcast(&m, PIB_CMD_DETACH_MCAST, b.qpn, mgid, mlid), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(mg_mcast(&m, PIB_CMD_DETACH_MCAST, c.qpn, mgid, mlid), ==,
                     PIB_AQ_BAD_PARAM);
    mg_send(&m, &p);
    mg_expect_mcast(&m, &a, 2, mgid, 300);
    dp_expect_none(&m.d, &m.cq);
    /* A destroyed QP leaves its groups: the group is empty, the packet a drop. */
    g_assert_cmpuint(dp_modify_state(&m.d, a.qpn, PIB_QPS_RESET), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&m.d, PIB_CMD_DESTROY_QP, a.qpn), ==, PIB_AQ_OK);
    mg_send(&m, &p);
    mg_wait_counter(&m, PIB_CNT_RX_DROP_MCAST, base[PIB_CNT_RX_DROP_MCAST] + 4);
    mg_shutdown(&m);
}

/*
 * 8. Congestion control
 */

#define MG_CC_KEY       0xcc00cc00cc00cc01ull

/* A CC MAD through MAD_IFC: PIB_MAD_IFC_* back, the response in *resp when answered. */
static uint32_t mg_cc_ifc(Mg *m, uint8_t method, uint16_t attr, uint32_t mod, uint64_t key,
                          const void *data, size_t len, struct pib_cc_mad *resp)
{
    struct pib_cc_mad req = peer_cc_new(method, attr, mod, key);
    uint32_t r;

    memcpy(req.data, data, len);
    r = dp_mad_ifc(&m->d, &req, resp, false);
    if (r == PIB_MAD_IFC_REPLY) {
        g_assert_cmphex(resp->hdr.method, ==, PIB_MAD_METHOD_GET_RESP);
        g_assert_cmphex(resp->hdr.tid_lo_be, ==, req.hdr.tid_lo_be);
        g_assert_cmphex(resp->hdr.mgmt_class, ==, PIB_MGMT_CLASS_CC);
    }
    return r;
}

/* ... that must be answered: its status. */
static uint16_t mg_cc(Mg *m, uint8_t method, uint16_t attr, uint32_t mod, uint64_t key,
                      const void *data, size_t len, struct pib_cc_mad *resp)
{
    g_assert_cmpuint(mg_cc_ifc(m, method, attr, mod, key, data, len, resp), ==,
                     PIB_MAD_IFC_REPLY);
    return be16_to_cpu(resp->hdr.status_be);
}

/* Set CongestionKeyInfo to ki, with the key in force (0: none yet): answered, status 0. */
static void mg_cc_key_set(Mg *m, const struct pib_cc_key_info *ki, uint64_t key)
{
    struct pib_cc_mad r;

    g_assert_cmpuint(mg_cc(m, PIB_MAD_METHOD_SET, PIB_CC_ATTR_CONG_KEY_INFO, 0, key, ki,
                           sizeof(*ki), &r), ==, 0);
}

/* A Get of CongestionKeyInfo without the key, under the protect bit: dropped unanswered. */
static void mg_cc_key_get_refused(Mg *m)
{
    struct pib_cc_mad r;

    g_assert_cmpuint(mg_cc_ifc(m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_KEY_INFO, 0, 0, NULL, 0,
                               &r), ==, PIB_MAD_IFC_CONSUMED);
}

static void test_cc(void)
{
    struct pib_cc_mad r;
    struct pib_class_port_info *cpi = (struct pib_class_port_info *)r.data;
    struct pib_cc_info *ci = (struct pib_cc_info *)r.data;
    struct pib_cc_key_info ki = { 0 }, *kr = (struct pib_cc_key_info *)r.data;
    struct pib_cc_ca_setting cs = { 0 }, *csr = (struct pib_cc_ca_setting *)r.data;
    struct pib_cc_table t = { 0 }, *tr = (struct pib_cc_table *)r.data;
    uint32_t ts;
    int i;
    Mg m;

    mg_boot(&m);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CLASS_PORT_INFO, 0, 0, NULL, 0,
                           &r), ==, 0);
    g_assert_cmpuint(cpi->class_version, ==, PIB_CC_CLASS_VERSION);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_INFO, 0, 0, NULL, 0, &r),
                     ==, 0);
    g_assert_cmpuint(ci->control_table_cap, ==, 2);

    /* CACongestionSetting: the SLs ControlMap names (0 and 3) change, SL 5 does not. */
    cs.port_control_be = cpu_to_be16(PIB_CC_CA_PORT_SL_BASED);
    cs.control_map_be = cpu_to_be16(1u << 0 | 1u << 3);
    for (i = 0; i < PIB_CC_SLS; i++) {
        cs.entries[i] = (struct pib_cc_ca_entry) {
            .ccti_timer_be = cpu_to_be16(100 + i), .ccti_increase = 2,
            .trigger_threshold = 5, .ccti_min = 1,
        };
    }
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_SET, PIB_CC_ATTR_CA_CONG_SETTING, 0, 0, &cs,
                           sizeof(cs), &r), ==, 0);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CA_CONG_SETTING, 0, 0, NULL, 0,
                           &r), ==, 0);
    g_assert_cmphex(be16_to_cpu(csr->port_control_be), ==, PIB_CC_CA_PORT_SL_BASED);
    g_assert_cmpmem(&csr->entries[0], 8, &cs.entries[0], 8);
    g_assert_cmpmem(&csr->entries[3], 8, &cs.entries[3], 8);
    g_assert_cmpuint(be16_to_cpu(csr->entries[5].ccti_timer_be), ==, 0);
    g_assert_cmpuint(csr->entries[5].ccti_increase, ==, 0);

    /* CongestionControlTable: block 1 and CCTI_Limit 100; block 0 stays empty. */
    t.ccti_limit_be = cpu_to_be16(100);
    for (i = 0; i < PIB_CC_CCT_BLOCK_ENTRIES; i++) {
        t.entries_be[i] = cpu_to_be16((i % 4) << 14 | (3 * i + 1));
    }
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_SET, PIB_CC_ATTR_CC_TABLE, 1, 0, &t, sizeof(t),
                           &r), ==, 0);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CC_TABLE, 1, 0, NULL, 0, &r),
                     ==, 0);
    g_assert_cmpmem(tr, sizeof(t), &t, sizeof(t));
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CC_TABLE, 0, 0, NULL, 0, &r),
                     ==, 0);
    g_assert_cmpuint(be16_to_cpu(tr->ccti_limit_be), ==, 100);
    g_assert_cmpuint(be16_to_cpu(tr->entries_be[7]), ==, 0);
    /* A block past ControlTableCap, a CCTI_Limit past the table: refused, nothing changed. */
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_SET, PIB_CC_ATTR_CC_TABLE, 2, 0, &t, sizeof(t),
                           &r), ==, PIB_MAD_STATUS_INVALID_VALUE);
    t.ccti_limit_be = cpu_to_be16(128);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_SET, PIB_CC_ATTR_CC_TABLE, 0, 0, &t, sizeof(t),
                           &r), ==, PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CC_TABLE, 0, 0, NULL, 0, &r),
                     ==, 0);
    g_assert_cmpuint(be16_to_cpu(tr->ccti_limit_be), ==, 100);
    g_assert_cmpuint(be16_to_cpu(tr->entries_be[7]), ==, 0);

    /* A switch's attributes, and a Set of what only Get reads: not a CA's. */
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_SW_CONG_SETTING, 0, 0, NULL, 0,
                           &r), ==, PIB_MAD_STATUS_UNSUP_ATTR);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_SW_PORT_CONG_SETTING, 0, 0,
                           NULL, 0, &r), ==, PIB_MAD_STATUS_UNSUP_ATTR);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_SET, PIB_CC_ATTR_CONG_LOG, 0, 0, NULL, 0, &r),
                     ==, PIB_MAD_STATUS_UNSUP_ATTR);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_SET, PIB_CC_ATTR_TIME_STAMP, 0, 0, NULL, 0, &r),
                     ==, PIB_MAD_STATUS_UNSUP_ATTR);

    /* The CA's log, empty: LogType 2 in the MAD's log area. */
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_LOG, 0, 0, NULL, 0, &r),
                     ==, 0);
    g_assert_cmpuint(r.log[0], ==, PIB_CC_LOG_CA);
    g_assert_cmpuint(lduw_be_p(r.log + 2), ==, 0);              /* EventCounter */

    /* TimeStamp: 1.024 us units of the node's clock. */
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_TIME_STAMP, 0, 0, NULL, 0, &r),
                     ==, 0);
    ts = ldl_be_p(r.data);
    qtest_clock_step(qts(&m.d), 1024 * 1000);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_TIME_STAMP, 0, 0, NULL, 0, &r),
                     ==, 0);
    g_assert_cmpuint(ldl_be_p(r.data) - ts, ==, 1000);

    /*
     * The CC_Key: once set, a Set without it is dropped and counted; a Get passes (no protect
     * bit) but does not show the key.  With the protect bit, a Get without it is dropped too.
     */
    ki.cc_key_hi_be = cpu_to_be32(MG_CC_KEY >> 32);
    ki.cc_key_lo_be = cpu_to_be32((uint32_t)MG_CC_KEY);
    mg_cc_key_set(&m, &ki, 0);
    cs.control_map_be = cpu_to_be16(1u << 5);
    g_assert_cmpuint(mg_cc_ifc(&m, PIB_MAD_METHOD_SET, PIB_CC_ATTR_CA_CONG_SETTING, 0, 0, &cs,
                               sizeof(cs), &r), ==, PIB_MAD_IFC_CONSUMED);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CA_CONG_SETTING, 0, 0, NULL, 0,
                           &r), ==, 0);
    g_assert_cmpuint(csr->entries[5].ccti_increase, ==, 0);     /* not applied */
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_KEY_INFO, 0, 0, NULL, 0,
                           &r), ==, 0);
    g_assert_cmphex(be32_to_cpu(kr->cc_key_lo_be), ==, 0);
    g_assert_cmpuint(be16_to_cpu(kr->violations_be), ==, 1);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_SET, PIB_CC_ATTR_CA_CONG_SETTING, 0, MG_CC_KEY,
                           &cs, sizeof(cs), &r), ==, 0);
    g_assert_cmpuint(csr->entries[5].ccti_increase, ==, 2);     /* with the key: applied */
    ki.protect_be = cpu_to_be16(PIB_CC_KEY_PROTECT);
    ki.violations_be = cpu_to_be16(1);
    mg_cc_key_set(&m, &ki, MG_CC_KEY);
    mg_cc_key_get_refused(&m);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_KEY_INFO, 0, MG_CC_KEY,
                           NULL, 0, &r), ==, 0);
    g_assert_cmphex(((uint64_t)be32_to_cpu(kr->cc_key_hi_be) << 32 |
                     be32_to_cpu(kr->cc_key_lo_be)), ==, MG_CC_KEY);
    g_assert_cmphex(be16_to_cpu(kr->protect_be), ==, PIB_CC_KEY_PROTECT);
    g_assert_cmpuint(be16_to_cpu(kr->violations_be), ==, 2);

    /*
     * The lease (1 s): a violation starts it, a second one does not restart it, and when it
     * runs out the protect bit clears (the key stays, hidden from a Get without it).  A MAD
     * with the key stops a countdown: a second later the bit still protects.
     */
    ki.lease_period_be = cpu_to_be16(1);
    ki.violations_be = cpu_to_be16(2);
    mg_cc_key_set(&m, &ki, MG_CC_KEY);
    mg_cc_key_get_refused(&m);
    qtest_clock_step(qts(&m.d), 900 * 1000 * 1000ll);
    mg_cc_key_get_refused(&m);
    qtest_clock_step(qts(&m.d), 100 * 1000 * 1000ll);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_KEY_INFO, 0, 0, NULL, 0,
                           &r), ==, 0);
    g_assert_cmphex(be16_to_cpu(kr->protect_be), ==, 0);
    g_assert_cmphex(be32_to_cpu(kr->cc_key_lo_be), ==, 0);
    g_assert_cmpuint(be16_to_cpu(kr->lease_period_be), ==, 1);
    g_assert_cmpuint(be16_to_cpu(kr->violations_be), ==, 4);
    ki.violations_be = cpu_to_be16(4);
    mg_cc_key_set(&m, &ki, MG_CC_KEY);
    mg_cc_key_get_refused(&m);
    qtest_clock_step(qts(&m.d), 500 * 1000 * 1000ll);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_INFO, 0, MG_CC_KEY, NULL,
                           0, &r), ==, 0);
    qtest_clock_step(qts(&m.d), 1000 * 1000 * 1000ll);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_KEY_INFO, 0, MG_CC_KEY,
                           NULL, 0, &r), ==, 0);
    g_assert_cmphex(be16_to_cpu(kr->protect_be), ==, PIB_CC_KEY_PROTECT);
    g_assert_cmpuint(be16_to_cpu(kr->violations_be), ==, 5);

    /* Violations: a Set of another count leaves the counter, a Set of 0 clears it. */
    ki.violations_be = cpu_to_be16(9);
    mg_cc_key_set(&m, &ki, MG_CC_KEY);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_KEY_INFO, 0, MG_CC_KEY,
                           NULL, 0, &r), ==, 0);
    g_assert_cmpuint(be16_to_cpu(kr->violations_be), ==, 5);
    ki.violations_be = 0;
    mg_cc_key_set(&m, &ki, MG_CC_KEY);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_KEY_INFO, 0, MG_CC_KEY,
                           NULL, 0, &r), ==, 0);
    g_assert_cmpuint(be16_to_cpu(kr->violations_be), ==, 0);

    /* The class version and the methods the class has. */
    {
        struct pib_cc_mad req = peer_cc_new(PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_INFO, 0,
                                            MG_CC_KEY);

        req.hdr.class_version = 1;
        g_assert_cmpuint(dp_mad_ifc(&m.d, &req, &r, false), ==, PIB_MAD_IFC_REPLY);
        g_assert_cmphex(be16_to_cpu(r.hdr.status_be), ==, PIB_MAD_STATUS_BAD_VERSION);
    }
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_TRAP, PIB_CC_ATTR_CONG_INFO, 0, MG_CC_KEY, NULL,
                           0, &r), ==, PIB_MAD_STATUS_UNSUP_METHOD);
    g_assert_cmpuint(mg_cc(&m, PIB_MAD_METHOD_GET, 0x0019, 0, MG_CC_KEY, NULL, 0, &r), ==,
                     PIB_MAD_STATUS_UNSUP_ATTR);
    mg_shutdown(&m);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/pib/mgmt/port-states", test_port_states);
    qtest_add_func("/pib/mgmt/attributes", test_attributes);
    qtest_add_func("/pib/mgmt/vls", test_vls);
    qtest_add_func("/pib/mgmt/mkey", test_mkey);
    qtest_add_func("/pib/mgmt/special-qps", test_special_qps);
    qtest_add_func("/pib/mgmt/partitions", test_partitions);
    qtest_add_func("/pib/mgmt/pma", test_pma);
    qtest_add_func("/pib/mgmt/multicast", test_multicast);
    qtest_add_func("/pib/mgmt/cc", test_cc);
    return g_test_run();
}
