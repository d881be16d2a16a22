/*
 * QTest: the pib HCA saved and loaded with QEMU's migration, and bad streams (hw/pib)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 *   /pib/migration/file     two HCAs (one QEMU, linked to each other) with every object type
 *                           live and an RC SEND stopped by an RNR NAK, saved to a file
 *                           (migrate "exec:cat > FILE") and loaded into a new QEMU: every
 *                           register, QUERY_QP and counter reads as before; the objects still
 *                           hold each other (DESTROY_* says BUSY); the links, new cables
 *                           between the same ports, recover with the ports ACTIVE all along
 *                           and no async event; the stopped SEND completes
 *                           once a receive is posted, and WRITE, READ, atomics and a memory
 *                           window work on the loaded QPs, their data checked, and READ and
 *                           WRITE through a DM MR find B's device memory as it was; an interrupt
 *                           error injection held back is sent at its deadline after the load;
 *                           A's CongestionControlTable and the CC_Key guarding it came along
 *   /pib/migration/refused  the same stream with one number changed (a QP number out of
 *                           range, a QP's CQ that does not exist, a page list larger than the
 *                           MTT, a DM over another), or loaded into an HCA configured
 *                           otherwise (recv-dbrec=off): the destination refuses it and exits
 *                           with status 1, never a crash, never a huge allocation
 *   /pib/migration/mutate   a fuzzer: that stream with 1-4 random changes in A's section
 *                           (bits, zeros, all-ones, +1, at seeded random places), loaded by a
 *                           new QEMU each time (PIB_MIG_MUTATIONS of them, 48 by default;
 *                           PIB_MIG_SEED picks another sequence; tests/fuzz/run.sh runs more):
 *                           each must be refused (exit status 1) or run, its timers fire and
 *                           its QPs rung, and quit cleanly (status 0)
 *
 * The device's timers run on the virtual clock, which only the test moves, so the RNR wait
 * saved in the stream is still pending after the load.  Waits are bounded by counts of
 * migration-status looks (a hang guard), not by time.
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-migration-test
 */

#include "qemu/osdep.h"
#include "libqos/libqos-malloc.h"
#include <glib/gstdio.h>
#include <poll.h>
#include <sys/wait.h>

#include "pib-qtest.h"

#define MIG_POLLS       20000   /* looks at the migration status, 5 ms apart: hang guard */
#define MIG_MLID        0xc001
#define MIG_ALIAS_GUID  0x0002c903000a2200ull
#define MIG_DM_LEN      10000
#define MIG_DM_A_LEN    5555

/* Everything the test made before the save, on both HCAs. */
typedef struct Mig {
    TestPair p;
    TestEnd x, y;           /* RC, A <-> B */
    TestEnd u;              /* UD on A, in a multicast group */
    uint32_t mw_mr;         /* an MR over y's buffer that windows may bind to */
    uint32_t mw_rkey;       /* a type 2 window on it, bound to y's QP */
    uint32_t srqn, xrcd;    /* on B: an SRQ with a QP on it; on A: an XRC domain */
    uint32_t dm, dm_start;  /* on B: device memory, and a DM MR over it in y's PD */
    uint32_t dm_key;
    uint8_t dm_bytes[MIG_DM_LEN];   /* what the host wrote into it */
    TestQp srq_qp;
    char *file;
} Mig;

static const uint32_t mig_regs[] = {
    PIB_REG_STATUS, PIB_REG_CONTROL, PIB_REG_AQ_DEPTH, PIB_REG_AQ_SQ_LO, PIB_REG_AQ_SQ_HI,
    PIB_REG_AQ_CQ_LO, PIB_REG_AQ_CQ_HI, PIB_REG_AEQ_DEPTH, PIB_REG_AEQ_LO, PIB_REG_AEQ_HI,
    PIB_REG_ERR_COUNT, PIB_REG_ERR_LAST, PIB_REG_AEQ_LOST, PIB_REG_SCRATCH,
    PIB_REG_CEQ_DEPTH, PIB_REG_CEQ_LO, PIB_REG_CEQ_HI,
};

typedef struct MigView {
    uint32_t regs[ARRAY_SIZE(mig_regs)];
    uint64_t counters[PIB_CNT_MAX];
    struct pib_qp_attr qp[2];
    uint8_t gids[PIB_GID_TBL_LEN][16];
} MigView;

static void mig_view(PibDev *d, uint32_t qpn0, uint32_t qpn1, MigView *v)
{
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(mig_regs); i++) {
        v->regs[i] = rd(d, mig_regs[i]);
    }
    dp_counters(d, v->counters);
    v->qp[0] = dp_query_qp(d, qpn0);
    v->qp[1] = dp_query_qp(d, qpn1);
    for (i = 0; i < PIB_GID_TBL_LEN; i++) {
        dp_query_gid(d, i, v->gids[i]);
    }
}

static void mig_running_wait(QTestState *qts)
{
    QDict *rsp;
    bool running;
    int i;

    for (i = 0; i < MIG_POLLS; i++) {
        rsp = qtest_qmp(qts, "{ 'execute': 'query-status' }");
        running = qdict_get_bool(qdict_get_qdict(rsp, "return"), "running");
        qobject_unref(rsp);
        if (running) {
            return;
        }
        g_usleep(5000);
    }
    g_assert_not_reached();
}

/* The source's whole state into m->file; the source is gone after. */
static void mig_save(Mig *m)
{
    g_autofree char *uri = g_strdup_printf("exec:cat > %s", m->file);

    qtest_qmp_assert_success(m->p.qs->qts,
                             "{ 'execute': 'migrate', 'arguments': { 'uri': %s } }", uri);
    qtest_qmp_eventwait(m->p.qs->qts, "STOP");
    pib_migration_wait(m->p.qs->qts, "completed");
}

/* The destination's PibDev, with the source's test-side state (same BARs, same rings). */
static void mig_adopt(PibDev *d, QOSState *qs, int devfn, PibDev *old)
{
    pib_open(d, qs, devfn);
    g_assert_cmphex(d->bar0.addr, ==, old->bar0.addr);
    g_assert_cmphex(d->bar2.addr, ==, old->bar2.addr);
    g_free(old->dev);
    old->dev = d->dev;
    old->qs = qs;
    *d = *old;
}

/* Load m->file into a new QEMU with the same devices (and a new link): m->p is that one. */
static void mig_load(Mig *m)
{
    TestPair src = m->p;
    g_autofree char *uri = g_strdup_printf("exec:cat %s", m->file);

    /* The test's own set-up of the machine (fw_cfg, the PCI bus) first, then the load. */
    dp_pair_boot(&m->p, "-incoming defer");
    qtest_qmp_assert_success(m->p.qs->qts, "{ 'execute': 'migrate-incoming', "
                             "'arguments': { 'uri': %s } }", uri);
    mig_running_wait(m->p.qs->qts);
    mig_adopt(&m->p.a, m->p.qs, PIB_DEVFN_A, &src.a);
    mig_adopt(&m->p.b, m->p.qs, PIB_DEVFN_B, &src.b);
    m->p.ceq_a = src.ceq_a;
    m->p.ceq_b = src.ceq_b;
    migrate_allocator(&src.qs->alloc, &m->p.qs->alloc);
    qtest_shutdown(src.qs);
    g_unlink(src.path);
    g_rmdir(src.dir);
    g_free(src.path);
    g_free(src.dir);
}

/* An SRQ of 8 one-SGE receives on y's PD, with a doorbell record, and an RC QP on it. */
static void mig_srq(Mig *m)
{
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe acqe;
    uint64_t ring = dp_alloc(&m->p.b, 2 * 4096);

    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_SRQ,
        .in.create_srq = {
            .pdn = cpu_to_le32(m->y.pdn),
            .depth = cpu_to_le32(8),
            .stride_log = 6,
            .flags = PIB_SRQ_F_DBREC,
            .uar = cpu_to_le32(DP_UAR),
            .npages = cpu_to_le32(2),
            .pbl_addr = cpu_to_le64(dp_pbl(&m->p.b, ring, 2)),
        },
    };
    g_assert_cmpuint(pib_cmd(&m->p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    m->srqn = le32_to_cpu(acqe.result0);
    g_assert_cmpuint(dp_create_qp_ex(&m->p.b, PIB_QPT_RC, m->y.pdn, &m->y.scq, &m->y.rcq,
                                     16, 0, DP_UAR, m->srqn, &m->srq_qp), ==, PIB_AQ_OK);
}

static void mig_mcast(Mig *m)
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_ATTACH_MCAST,
        .in.mcast = {
            .qpn = cpu_to_le32(m->u.qp.qpn),
            .mlid = cpu_to_le16(MIG_MLID),
            .mgid = { 0xff, 0x12, 0x40, 0x1b, [15] = 0x01 },
        },
    };

    g_assert_cmpuint(pib_cmd(&m->p.a, &cmd, NULL), ==, PIB_AQ_OK);
}

/* The kernel's kinds of MR: the DMA MR (guest-physical memory) on A, a fast-registration MR
 * on B. */
static void mig_kernel_mrs(Mig *m)
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_REG_MR,
        .in.reg_mr = {
            .pdn = cpu_to_le32(m->x.pdn),
            .access = cpu_to_le32(PIB_ACCESS_LOCAL_WRITE),
            .flags = cpu_to_le32(PIB_MR_F_PHYS),
        },
    };

    g_assert_cmpuint(pib_cmd(&m->p.a, &cmd, NULL), ==, PIB_AQ_OK);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_ALLOC_MR,
        .in.alloc_mr = { .pdn = cpu_to_le32(m->y.pdn), .max_num_sg = cpu_to_le32(16) },
    };
    g_assert_cmpuint(pib_cmd(&m->p.b, &cmd, NULL), ==, PIB_AQ_OK);
}

static void mig_xrcd(Mig *m)
{
    struct pib_admin_cmd cmd = { .opcode = PIB_CMD_ALLOC_XRCD };
    struct pib_admin_cqe acqe;

    g_assert_cmpuint(pib_cmd(&m->p.a, &cmd, &acqe), ==, PIB_AQ_OK);
    m->xrcd = le32_to_cpu(acqe.result0);
}

/*
 * Device memory on B: a DM the host wrote through BAR0, and a DM MR over it in y's PD.  The
 * memory travels as the device's RAM block, the DM and MR in its section.  Each HCA's first
 * DM is a page of padding, so that the DMs the test uses start elsewhere than byte 0; A's
 * second one (DM 2, MIG_DM_A_LEN bytes at 4096) is what /pib/migration/refused overlaps.
 */
static void mig_dm(Mig *m)
{
    struct pib_device_attr a = dp_query_device(&m->p.b);
    uint32_t pad, start;
    unsigned i;

    for (i = 0; i < MIG_DM_LEN; i++) {
        m->dm_bytes[i] = i * 7 + 3;
    }
    g_assert_cmpuint(dp_alloc_dm(&m->p.a, 100, &pad, &start), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_alloc_dm(&m->p.a, MIG_DM_A_LEN, &pad, &start), ==, PIB_AQ_OK);
    g_assert_cmpuint(pad, ==, 2);
    g_assert_cmpuint(start, ==, 4096);
    g_assert_cmpuint(dp_alloc_dm(&m->p.b, 4096, &pad, &start), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_alloc_dm(&m->p.b, MIG_DM_LEN, &m->dm, &m->dm_start), ==, PIB_AQ_OK);
    g_assert_cmpuint(m->dm_start, ==, 4096);
    m->dm_start += le32_to_cpu(a.dm_bar_offset);
    qpci_memwrite(m->p.b.dev, m->p.b.bar0, m->dm_start, m->dm_bytes, MIG_DM_LEN);
    g_assert_cmpuint(dp_reg_dm_mr(&m->p.b, m->y.pdn, m->dm, 0, MIG_DM_LEN, &m->dm_key), ==,
                     PIB_AQ_OK);
}

/*
 * Congestion control as an SM left it on A (fabric/pib-cc.c, a subsection of A's section): a
 * protected CC_Key and block 0 of the CongestionControlTable.  A CC MAD of method to A's CC
 * agent with key: what MAD_IFC answered, the response in *resp.
 */
#define MIG_CC_KEY      0x6363000063630001ull

static uint32_t mig_cc(PibDev *d, uint8_t method, uint16_t attr, uint64_t key,
                       const void *data, size_t len, struct pib_cc_mad *resp)
{
    struct pib_cc_mad req = peer_cc_new(method, attr, 0, key);

    memcpy(req.data, data, len);
    return dp_mad_ifc(d, &req, resp, false);
}

static void mig_cc_set(PibDev *d, struct pib_cc_mad *table)
{
    struct pib_cc_key_info ki = {
        .cc_key_hi_be = cpu_to_be32(MIG_CC_KEY >> 32),
        .cc_key_lo_be = cpu_to_be32((uint32_t)MIG_CC_KEY),
        .protect_be = cpu_to_be16(PIB_CC_KEY_PROTECT),
    };
    struct pib_cc_table t = { .ccti_limit_be = cpu_to_be16(10) };
    struct pib_cc_mad r;
    int i;

    for (i = 1; i < PIB_CC_CCT_BLOCK_ENTRIES; i++) {        /* (entry 0: no delay) */
        t.entries_be[i] = cpu_to_be16(1u << 14 | i);
    }
    g_assert_cmpuint(mig_cc(d, PIB_MAD_METHOD_SET, PIB_CC_ATTR_CONG_KEY_INFO, 0, &ki,
                            sizeof(ki), &r), ==, PIB_MAD_IFC_REPLY);
    g_assert_cmpuint(r.hdr.status_be, ==, 0);
    g_assert_cmpuint(mig_cc(d, PIB_MAD_METHOD_SET, PIB_CC_ATTR_CC_TABLE, MIG_CC_KEY, &t,
                            sizeof(t), table), ==, PIB_MAD_IFC_REPLY);
    g_assert_cmpuint(table->hdr.status_be, ==, 0);
}

/*
 * Both HCAs with every object type, traffic that completed, and a SEND of 3000 bytes from x
 * that y refused with an RNR NAK (no receive posted): x waits on its RNR timer.
 */
static void mig_setup(Mig *m)
{
    struct pib_sge sge;
    struct pib_aeqe e;
    uint64_t c[PIB_CNT_MAX];
    uint32_t k;

    memset(m, 0, sizeof(*m));
    dp_pair_up(&m->p);
    m->file = g_strdup_printf("%s.stream", m->p.dir);
    dp_end(&m->p.a, &m->x, PIB_QPT_RC, 16384);
    dp_end(&m->p.b, &m->y, PIB_QPT_RC, 16384);
    dp_end(&m->p.a, &m->u, PIB_QPT_UD, 4096);
    /* y's RQ has a doorbell record: the receive posted after the load is announced there alone. */
    g_assert_cmpuint(dp_obj_cmd(&m->p.b, PIB_CMD_DESTROY_QP, m->y.qp.qpn), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_create_qp_flags(&m->p.b, PIB_QPT_RC, m->y.pdn, &m->y.scq, &m->y.rcq,
                                        16, 16, DP_UAR, PIB_SRQN_NONE, PIB_QPC_F_RQ_DBREC,
                                        &m->y.qp), ==, PIB_AQ_OK);
    dp_link_ends(&m->x, 1, &m->y, 2);
    dp_ud_ready(&m->p.a, &m->u.qp, 0x11111111);
    m->mw_mr = dp_reg_mr(&m->p.b, m->y.pdn, PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_MW_BIND,
                         m->y.buf, 16384);
    m->mw_rkey = dp_alloc_mw(&m->p.b, m->y.pdn, 2);
    mig_srq(m);
    mig_mcast(m);
    mig_xrcd(m);
    mig_kernel_mrs(m);
    mig_dm(m);
    wr(&m->p.a, PIB_REG_SCRATCH, 0x5a5a1234);
    /* An alias GUID an SM assigned to A's port (GUIDInfo): its GID index 1. */
    {
        struct pib_smp req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_SET,
                                          PIB_SMP_ATTR_GUID_INFO, 0), resp;

        stq_be_p(req.data + 8, MIG_ALIAS_GUID);
        g_assert_cmpuint(dp_mad_ifc(&m->p.a, &req, &resp, true), ==, PIB_MAD_IFC_REPLY);
    }

    /* A type 2 window over y's second 4 KiB, bound to y's QP with a new key byte. */
    k = (m->mw_rkey & ~0xffu) | ((m->mw_rkey + 1) & 0xff);
    dp_post_bind(&m->p.b, &m->y.qp, 0xb1, 2, m->mw_rkey, k, m->mw_mr,
                 m->y.buf + 4096, 4096, PIB_ACCESS_REMOTE_WRITE | PIB_ACCESS_REMOTE_READ);
    dp_expect(&m->p.b, &m->y.scq, 0xb1, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    m->mw_rkey = k;

    /* A SEND that completes before the save. */
    dp_fill(&m->p.a, m->x.buf, 1000, 1);
    sge = dp_sge(m->y.buf, 1000, m->y.key);
    dp_post_recv(&m->p.b, &m->y.qp, 0x100, &sge, 1);
    sge = dp_sge(m->x.buf, 1000, m->x.key);
    dp_post_send(&m->p.a, &m->x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x1, &sge, 1, 0, 0);
    dp_expect(&m->p.a, &m->x.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&m->p.b, &m->y.rcq, 0x100, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    dp_assert_same(&m->p.a, m->x.buf, &m->p.b, m->y.buf, 1000);

    /* The one y cannot take yet: an RNR NAK, and x waits. */
    dp_fill(&m->p.a, m->x.buf + 8192, 3000, 2);
    sge = dp_sge(m->x.buf + 8192, 3000, m->x.key);
    dp_post_send(&m->p.a, &m->x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x2, &sge, 1, 0, 0);
    for (;;) {
        dp_counters(&m->p.b, c);
        if (c[PIB_CNT_RX_DROP_RNR]) {
            break;
        }
        g_usleep(1000);
    }
    dp_expect_none(&m->p.a, &m->x.scq);
    /* The async events so far (ports ACTIVE, ...) read: the load must add none. */
    while (pib_aeq_next(&m->p.a, &e, DP_SHORT_US)) {
    }
    while (pib_aeq_next(&m->p.b, &e, DP_SHORT_US)) {
    }
}

/*
 * The device's link came back from the same peer (LINK_RECOVERIES), its port ACTIVE all along
 * and no async event raised.  The wait is a hang guard on a count of looks.
 */
static void mig_wait_recovered(PibDev *d)
{
    struct pib_port_attr attr;
    struct pib_aeqe e;
    uint64_t c[PIB_CNT_MAX];
    int i;

    for (i = 0; i < MIG_POLLS; i++) {
        g_assert_cmpuint(pib_query_port(d, 1, &attr), ==, PIB_AQ_OK);
        g_assert_cmpuint(attr.state, ==, PIB_PORT_ACTIVE);
        dp_counters(d, c);
        if (c[PIB_CNT_LINK_RECOVERIES]) {
            break;
        }
        g_usleep(5000);
    }
    g_assert_cmpuint(c[PIB_CNT_LINK_RECOVERIES], ==, 1);
    g_assert_false(pib_aeq_next(d, &e, DP_SHORT_US));
}

static void test_mig_file(void)
{
    Mig m;
    MigView before[2], after[2];
    struct pib_cc_mad cc_before, cc_after;
    struct pib_sge sge;
    struct pib_cqe cqe;
    uint64_t v, msg;
    unsigned i, d;

    mig_setup(&m);
    mig_cc_set(&m.p.a, &cc_before);
    /*
     * An admin interrupt held back by error injection (5 ms of virtual time) when the machine
     * is saved: it is a message the device owes, and the loaded device sends it on time.
     */
    msg = dp_alloc(&m.p.a, 4096);
    dp_msix_to_ram(&m.p.a, PIB_MSIX_VEC_ADMIN, msg, 0xfeed);
    qtest_writel(qts(&m.p.a), msg, 0);      /* what was pending while masked came at unmask */
    qom_set_u32(m.p.qs->qts, "/machine/peripheral/pa", "inject-irq-delay-us", 5000);
    g_assert_cmphex(pib_nop(&m.p.a, 0x77), ==, 0x77);
    qom_set_u32(m.p.qs->qts, "/machine/peripheral/pa", "inject-irq-delay-us", 0);
    g_assert_cmphex(qtest_readl(qts(&m.p.a), msg), ==, 0);
    mig_view(&m.p.a, m.x.qp.qpn, m.u.qp.qpn, &before[0]);
    mig_view(&m.p.b, m.y.qp.qpn, m.srq_qp.qpn, &before[1]);
    mig_save(&m);
    mig_load(&m);

    /*
     * The new cable brings back the same two ports (their tokens travelled in the stream):
     * each link recovers, and neither port ever left ACTIVE: no event, no link down.
     */
    mig_wait_recovered(&m.p.a);
    mig_wait_recovered(&m.p.b);
    mig_view(&m.p.a, m.x.qp.qpn, m.u.qp.qpn, &after[0]);
    mig_view(&m.p.b, m.y.qp.qpn, m.srq_qp.qpn, &after[1]);
    /* The held interrupt: not yet, then at its deadline. */
    g_assert_cmphex(qtest_readl(qts(&m.p.a), msg), ==, 0);
    qtest_clock_step(qts(&m.p.a), 5000 * 1000);
    g_assert_cmphex(qtest_readl(qts(&m.p.a), msg), ==, 0xfeed);
    for (d = 0; d < 2; d++) {
        for (i = 0; i < ARRAY_SIZE(mig_regs); i++) {
            g_assert_cmphex(after[d].regs[i], ==, before[d].regs[i]);
        }
        for (i = 0; i < PIB_CNT_MAX; i++) {
            /* The link recovered once; nothing else moved. */
            v = before[d].counters[i] + (i == PIB_CNT_LINK_RECOVERIES);
            g_assert_cmpuint(after[d].counters[i], ==, v);
        }
        g_assert_cmpmem(&after[d].qp, sizeof(after[d].qp), &before[d].qp,
                        sizeof(before[d].qp));
        g_assert_cmpmem(after[d].gids, sizeof(after[d].gids), before[d].gids,
                        sizeof(before[d].gids));
    }
    g_assert_cmphex(ldq_be_p(after[0].gids[1] + 8), ==, MIG_ALIAS_GUID);
    /* A's congestion control: the table, and the key that still guards it. */
    g_assert_cmpuint(mig_cc(&m.p.a, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CC_TABLE, MIG_CC_KEY, NULL,
                            0, &cc_after), ==, PIB_MAD_IFC_REPLY);
    g_assert_cmpmem(cc_after.data, sizeof(cc_after.data), cc_before.data,
                    sizeof(cc_before.data));
    g_assert_cmpuint(mig_cc(&m.p.a, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CC_TABLE, 0, NULL, 0,
                            &cc_after), ==, PIB_MAD_IFC_CONSUMED);

    /* The objects still hold each other. */
    g_assert_cmpuint(dp_obj_cmd(&m.p.a, PIB_CMD_DESTROY_CQ, m.x.scq.cqn), ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_obj_cmd(&m.p.a, PIB_CMD_DESTROY_PD, m.x.pdn), ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_obj_cmd(&m.p.b, PIB_CMD_DESTROY_SRQ, m.srqn), ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_obj_cmd(&m.p.b, PIB_CMD_DEREG_MR, m.mw_mr), ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_obj_cmd(&m.p.b, PIB_CMD_DEALLOC_DM, m.dm), ==, PIB_AQ_BUSY);

    /* The SEND x was waiting with: a receive for it, and x's RNR timer runs out. */
    sge = dp_sge(m.y.buf + 8192, 4096, m.y.key);
    dp_post_recv(&m.p.b, &m.y.qp, 0x200, &sge, 1);
    dp_step_until_cqe(&m.p.a, &m.x.scq, &cqe, 100 * 1000, 1000);
    g_assert_cmpuint(le64_to_cpu(cqe.wr_id), ==, 0x2);
    g_assert_cmpuint(cqe.status, ==, PIB_WC_SUCCESS);
    dp_expect(&m.p.b, &m.y.rcq, 0x200, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 3000);
    dp_assert_same(&m.p.a, m.x.buf + 8192, &m.p.b, m.y.buf + 8192, 3000);

    /* A WRITE through the window, READ it back, an atomic: the loaded QPs, keys and MRs. */
    dp_fill(&m.p.a, m.x.buf, 2048, 3);
    sge = dp_sge(m.x.buf, 2048, m.x.key);
    dp_post_send(&m.p.a, &m.x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x3, &sge, 1,
                 m.y.buf + 4096, m.mw_rkey);
    dp_expect(&m.p.a, &m.x.scq, 0x3, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_assert_same(&m.p.a, m.x.buf, &m.p.b, m.y.buf + 4096, 2048);
    sge = dp_sge(m.x.buf + 4096, 2048, m.x.key);
    dp_post_send(&m.p.a, &m.x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x4, &sge, 1,
                 m.y.buf + 4096, m.y.key);
    dp_expect(&m.p.a, &m.x.scq, 0x4, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    dp_assert_same(&m.p.a, m.x.buf + 4096, &m.p.b, m.y.buf + 4096, 2048);

    /* B's device memory came along: READ it through the loaded DM MR, then WRITE into it. */
    {
        g_autofree uint8_t *got = g_malloc(MIG_DM_LEN);

        qpci_memread(m.p.b.dev, m.p.b.bar0, m.dm_start, got, MIG_DM_LEN);
        g_assert_cmpmem(got, MIG_DM_LEN, m.dm_bytes, MIG_DM_LEN);
        sge = dp_sge(m.x.buf, 4000, m.x.key);
        dp_post_send(&m.p.a, &m.x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x5, &sge, 1,
                     5000, m.dm_key);
        dp_expect(&m.p.a, &m.x.scq, 0x5, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
        qtest_memread(qts(&m.p.a), m.x.buf, got, 4000);
        g_assert_cmpmem(got, 4000, m.dm_bytes + 5000, 4000);
        dp_fill(&m.p.a, m.x.buf, 3000, 5);
        sge = dp_sge(m.x.buf, 3000, m.x.key);
        dp_post_send(&m.p.a, &m.x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x6, &sge, 1,
                     100, m.dm_key);
        dp_expect(&m.p.a, &m.x.scq, 0x6, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
        qtest_memread(qts(&m.p.a), m.x.buf, m.dm_bytes + 100, 3000);
        qpci_memread(m.p.b.dev, m.p.b.bar0, m.dm_start, got, MIG_DM_LEN);
        g_assert_cmpmem(got, MIG_DM_LEN, m.dm_bytes, MIG_DM_LEN);
    }
    g_assert_cmpuint(dp_err_count(&m.p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&m.p.b), ==, 0);

    dp_pair_down(&m.p);
    g_unlink(m.file);
    g_free(m.file);
}

/*
 * Device A's section of a saved stream: [*start, *end), from after its section header (its
 * name, instance and version) to the start of B's name.  (RAM comes earlier in the stream.)
 */
static void mig_section(const uint8_t *buf, size_t len, size_t *start, size_t *end)
{
    const char *a = "0000:00:04.0/pib-hca", *b = "0000:00:05.0/pib-hca";
    const uint8_t *sa = memmem(buf, len, a, strlen(a));
    const uint8_t *sb = sa ? memmem(sa, buf + len - sa, b, strlen(b)) : NULL;

    g_assert_nonnull(sb);
    *start = sa - buf + strlen(a) + 8;
    *end = sb - buf;
}

/*
 * Where a byte pattern is in device A's section, once: the test's numbers make it unique
 * there.
 */
static size_t mig_find(const uint8_t *buf, size_t len, const uint8_t *pat, size_t plen)
{
    size_t i, start, end, at = SIZE_MAX;

    mig_section(buf, len, &start, &end);
    for (i = start; i + plen <= end; i++) {
        if (!memcmp(buf + i, pat, plen)) {
            g_assert_cmpuint(at, ==, SIZE_MAX);
            at = i;
        }
    }
    g_assert_cmpuint(at, !=, SIZE_MAX);
    return at;
}

/* A destination that must refuse the stream in file: it exits with status 1. */
static void mig_expect_refused_by(const char *file, const char *a_props)
{
    QTestState *qts = qtest_initf("-M q35 -nodefaults " PIB_FIRMWARE_ARGS " -m 256M "
                                  "-device pib-hca,addr=4.0,id=pa,lid=1%s "
                                  "-device pib-hca,addr=5.0,id=pb,lid=2 "
                                  "-incoming defer", a_props);
    g_autofree char *uri = g_strdup_printf("exec:cat %s", file);

    int i;

    qtest_set_expected_status(qts, 1);
    qtest_qmp_assert_success(qts, "{ 'execute': 'migrate-incoming', "
                             "'arguments': { 'uri': %s } }", uri);
    for (i = 0; i < MIG_POLLS && qtest_probe_child(qts); i++) {
        g_usleep(5000);
    }
    g_assert_false(qtest_probe_child(qts));
    qtest_quit(qts);        /* checks the exit status: 1, not a signal */
}

static void mig_expect_refused(const char *file)
{
    mig_expect_refused_by(file, "");
}

static void put_be32(uint8_t *p, uint32_t v)
{
    stl_be_p(p, v);
}

static void test_mig_refused(void)
{
    Mig m;
    g_autofree uint8_t *good = NULL;
    g_autofree char *bad = NULL;
    uint8_t pat[32];
    uint32_t was;
    gsize len;
    size_t at;

    mig_setup(&m);
    mig_save(&m);
    g_assert_true(g_file_get_contents(m.file, (char **)&good, &len, NULL));
    bad = g_strdup_printf("%s.bad", m.file);

    /*
     * The QP table's entry for x: a byte 1, the number, then the QP's fields (qpn, uar, pdn,
     * xrcd, type, state).
     */
    pat[0] = 1;
    put_be32(pat + 1, m.x.qp.qpn);
    put_be32(pat + 5, m.x.qp.qpn);
    put_be32(pat + 9, DP_UAR);
    put_be32(pat + 13, m.x.pdn);
    put_be32(pat + 17, 0);
    pat[21] = PIB_QPT_RC;
    pat[22] = PIB_QPS_RTS;
    at = mig_find(good, len, pat, 23);

    /* 1. A QP number past the table. */
    put_be32(good + at + 1, 0x00ffffff);     /* the largest QPN, far past the table */
    g_assert_true(g_file_set_contents(bad, (char *)good, len, NULL));
    mig_expect_refused(bad);
    put_be32(good + at + 1, m.x.qp.qpn);

    /* 2. Its send CQ one that does not exist: the references end the record. */
    put_be32(pat, m.x.scq.cqn);
    put_be32(pat + 4, m.x.rcq.cqn);
    put_be32(pat + 8, 0);
    put_be32(pat + 12, 0);
    pat[16] = 1;            /* then the next QP's entry */
    put_be32(pat + 17, m.u.qp.qpn);
    at = mig_find(good, len, pat, 21);
    put_be32(good + at, 4000);
    g_assert_true(g_file_set_contents(bad, (char *)good, len, NULL));
    mig_expect_refused(bad);
    put_be32(good + at, m.x.scq.cqn);

    /* 3. A CQ whose ring lists 2^32 - 1 pages: refused before anything is allocated. */
    pat[0] = 1;
    put_be32(pat + 1, m.x.scq.cqn);
    put_be32(pat + 5, m.x.scq.cqn);
    put_be32(pat + 9, DP_UAR);
    put_be32(pat + 13, m.x.scq.depth);
    put_be32(pat + 17, PIB_CQE_STRIDE_LOG);
    at = mig_find(good, len, pat, 21);
    was = ldl_be_p(good + at + 21);
    put_be32(good + at + 21, UINT32_MAX);
    g_assert_true(g_file_set_contents(bad, (char *)good, len, NULL));
    mig_expect_refused(bad);
    put_be32(good + at + 21, was);

    /* 4. A's DM 2 moved onto byte 0, over DM 1: two DMs in the same device memory. */
    pat[0] = 1;
    put_be32(pat + 1, 2);
    put_be32(pat + 5, 2);
    stq_be_p(pat + 9, 4096);
    stq_be_p(pat + 17, MIG_DM_A_LEN);
    at = mig_find(good, len, pat, 25);
    stq_be_p(good + at + 9, 0);
    g_assert_true(g_file_set_contents(bad, (char *)good, len, NULL));
    mig_expect_refused(bad);

    /*
     * 5. The stream as saved, into a destination whose HCA A is configured otherwise: without
     * receive doorbell records, which A offered its driver.  Refused at the end of the
     * stream, by the device (its RAM blocks match).
     */
    mig_expect_refused_by(m.file, ",recv-dbrec=off");

    g_unlink(bad);
    g_unlink(m.file);
    g_free(m.file);
    dp_pair_down(&m.p);
}

/*
 * Load one stream: true if QEMU refused it (exit 1), false if it ran it and quit; anything
 * else (a signal, another status, a hang) fails the test.
 */
static bool mig_try(const Mig *m, const char *dir, const char *file)
{
    PibIncoming c;
    bool running;
    int i;

    running = pib_incoming_start(&c, dir,
                                 "-M q35 -nodefaults " PIB_FIRMWARE_ARGS " -m 256M "
                                 "-device pib-hca,addr=4.0,id=pa,lid=1 "
                                 "-device pib-hca,addr=5.0,id=pb,lid=2 -incoming defer", file);
    if (running) {
        /* Loaded: let its timers fire and ring its QPs, then it must quit cleanly. */
        for (i = 0; i < 16; i++) {
            g_autofree char *step = pib_incoming_qtest(&c, "clock_step 10000000\n");
            g_autofree char *db = g_strdup_printf(
                "writeq 0x%" PRIx64 " 0x%" PRIx64 "\n", m->p.a.bar2.addr + PIB_UAR_SQ_DB,
                (uint64_t)(m->x.qp.sq_pi + i % 3) << PIB_DB_INDEX_SHIFT |
                (i & 1 ? m->x.qp.qpn : m->u.qp.qpn));
            g_autofree char *rung = pib_incoming_qtest(&c, db);

            g_assert_nonnull(step);
            g_assert_nonnull(rung);
        }
    }
    pib_incoming_end(&c, running);
    return !running;
}

static void test_mig_mutate(void)
{
    const char *env = getenv("PIB_MIG_MUTATIONS");
    int runs = env ? atoi(env) : 48, i, refused = 0;
    g_autofree uint8_t *good = NULL, *buf = NULL;
    g_autofree char *bad = NULL;
    const char *seed = getenv("PIB_MIG_SEED");
    GRand *r = g_rand_new_with_seed(seed ? strtoul(seed, NULL, 0) : 0x5eed0001);
    size_t start, end;
    PibMutator mu;
    gsize len;
    Mig m;

    mig_setup(&m);
    mig_save(&m);
    g_assert_true(g_file_get_contents(m.file, (char **)&good, &len, NULL));
    bad = g_strdup_printf("%s.mut", m.file);
    mig_section(good, len, &start, &end);
    /*
     * The MR table's key bytes (65536, nearly all 0: the longest run of zeros) are most of the
     * section, and any value of them is valid: the changes go elsewhere.
     */
    pib_mutator_init(&mu, r, good, start, end, 0);
    g_assert_cmpuint(mu.skip_len, >, 60000);
    buf = g_malloc(len);
    for (i = 0; i < runs; i++) {
        pib_mutate(&mu, good, buf, len);
        g_assert_true(g_file_set_contents(bad, (char *)buf, len, NULL));
        refused += mig_try(&m, m.p.dir, bad);
    }
    g_test_message("%d mutated streams: %d refused, %d loaded and ran", runs, refused,
                   runs - refused);
    g_rand_free(r);
    g_unlink(bad);
    g_unlink(m.file);
    g_free(m.file);
    dp_pair_down(&m.p);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/pib/migration/file", test_mig_file);
    qtest_add_func("/pib/migration/refused", test_mig_refused);
    qtest_add_func("/pib/migration/mutate", test_mig_mutate);
    return g_test_run();
}
