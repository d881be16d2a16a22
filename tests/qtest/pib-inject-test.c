/*
 * QTest: the pib HCA's error injection (hw/pib)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * QOM properties set at run time (qom-set over QMP) make the device fail a
 * chosen WQE, lose packets, or send interrupts late (qemu-hw/hca/pib-inject.c).
 * Each property's defaults, accepted and refused values, and each fault's
 * effect on the data path between two devices (pib-qtest.h's TestPair).
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-inject-test
 */

#include "qemu/osdep.h"
#include "hw/pci/pci_regs.h"

#include "pib-qtest.h"

/* QOM paths of the devices the tests name with id= */
#define INJ_PATH_A          "/machine/peripheral/pa"
#define INJ_PATH_B          "/machine/peripheral/pb"

/* qom-set: NULL if it worked, else the error's description (g_free it). */
static char *inj_set_str(QTestState *q, const char *path, const char *prop,
                         const char *value)
{
    QDict *r = qtest_qmp(q, "{ 'execute': 'qom-set', 'arguments': "
                         "{ 'path': %s, 'property': %s, 'value': %s } }",
                         path, prop, value);
    char *err = NULL;

    g_assert(r);
    if (qdict_haskey(r, "error")) {
        err = g_strdup(qdict_get_str(qdict_get_qdict(r, "error"), "desc"));
    }
    qobject_unref(r);
    return err;
}

static char *inj_set_int(QTestState *q, const char *path, const char *prop,
                         int64_t value)
{
    QDict *r = qtest_qmp(q, "{ 'execute': 'qom-set', 'arguments': "
                         "{ 'path': %s, 'property': %s, 'value': %" PRId64
                         " } }", path, prop, value);
    char *err = NULL;

    g_assert(r);
    if (qdict_haskey(r, "error")) {
        err = g_strdup(qdict_get_str(qdict_get_qdict(r, "error"), "desc"));
    }
    qobject_unref(r);
    return err;
}

static void inj_set(QTestState *q, const char *path, const char *prop,
                    const char *value)
{
    g_autofree char *err = inj_set_str(q, path, prop, value);

    g_assert_null(err);
}

/* A bad value is refused with an error that names the property. */
static void inj_refuse(QTestState *q, const char *path, const char *prop,
                       const char *value)
{
    g_autofree char *err = inj_set_str(q, path, prop, value);

    g_assert_nonnull(err);
    g_test_message("%s = '%s': %s", prop, value, err);
}

static char *inj_get_str(QTestState *q, const char *path, const char *prop)
{
    QDict *r = qtest_qmp(q, "{ 'execute': 'qom-get', 'arguments': "
                         "{ 'path': %s, 'property': %s } }", path, prop);
    char *val;

    g_assert(r && qdict_haskey(r, "return"));
    val = g_strdup(qdict_get_str(r, "return"));
    qobject_unref(r);
    return val;
}

static void inj_assert_str(QTestState *q, const char *path, const char *prop,
                           const char *expect)
{
    g_autofree char *val = inj_get_str(q, path, prop);

    g_assert_cmpstr(val, ==, expect);
}

/* Every property: defaults, accepted values as read back, refused values */
static void test_inject_properties(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0,id=pa "
                            "-device pib-hca,addr=5.0,id=pb,inject-drop-tx=3,"
                            "inject-wr-error=7:1:loc_len_err,"
                            "inject-drop-opcode=RC_SEND_ONLY");
    QTestState *q = qs->qts;
    static const char *const bad_wr[] = {
        "1:2", "1:2:3:4", "x:1:4", "-1:1:4", " 1:1:4", "0x1000000:1:4",
        "1:65536:4", "1:1:0", "1:1:SUCCESS", "1:1:22", "1:1:BOGUS", "1::4",
        ":1:4", "1:1:4 ",
    };
    static const char *const bad_op[] = { "256", "-1", "FOO", "RC_", "0x" };
    static const char *const u32_props[] = {
        "inject-drop-tx", "inject-drop-rx", "inject-irq-delay-us",
        "inject-irq-delay-count",
    };
    g_autofree char *err = NULL;
    PibDev d;
    size_t i;

    /* Defaults: nothing armed. */
    inj_assert_str(q, INJ_PATH_A, "inject-wr-error", "");
    inj_assert_str(q, INJ_PATH_A, "inject-drop-opcode", "");
    for (i = 0; i < G_N_ELEMENTS(u32_props); i++) {
        g_assert_cmpint(qom_get_u32(q, INJ_PATH_A, u32_props[i]), ==, 0);
    }
    /* The command line sets them too. */
    g_assert_cmpint(qom_get_u32(q, INJ_PATH_B, "inject-drop-tx"), ==, 3);
    inj_assert_str(q, INJ_PATH_B, "inject-wr-error", "7:1:LOC_LEN_ERR");
    inj_assert_str(q, INJ_PATH_B, "inject-drop-opcode", "RC_SEND_ONLY");

    /* inject-wr-error: QPN:INDEX:STATUS, numbers or a status name. */
    inj_set(q, INJ_PATH_A, "inject-wr-error", "0x12:3:4");
    inj_assert_str(q, INJ_PATH_A, "inject-wr-error", "18:3:LOC_PROT_ERR");
    inj_set(q, INJ_PATH_A, "inject-wr-error", "16777215:65535:retry_exc_err");
    inj_assert_str(q, INJ_PATH_A, "inject-wr-error",
                   "16777215:65535:RETRY_EXC_ERR");
    for (i = 0; i < G_N_ELEMENTS(bad_wr); i++) {
        inj_refuse(q, INJ_PATH_A, "inject-wr-error", bad_wr[i]);
    }
    inj_assert_str(q, INJ_PATH_A, "inject-wr-error",
                   "16777215:65535:RETRY_EXC_ERR");      /* unchanged */
    inj_set(q, INJ_PATH_A, "inject-wr-error", "");
    inj_assert_str(q, INJ_PATH_A, "inject-wr-error", "");

    /* inject-drop-opcode: a name or a number; "" or "any" for any. */
    inj_set(q, INJ_PATH_A, "inject-drop-opcode", "rc_acknowledge");
    inj_assert_str(q, INJ_PATH_A, "inject-drop-opcode", "RC_ACKNOWLEDGE");
    inj_set(q, INJ_PATH_A, "inject-drop-opcode", "0x64");
    inj_assert_str(q, INJ_PATH_A, "inject-drop-opcode", "UD_SEND_ONLY");
    inj_set(q, INJ_PATH_A, "inject-drop-opcode", "21");
    inj_assert_str(q, INJ_PATH_A, "inject-drop-opcode", "0x15");
    for (i = 0; i < G_N_ELEMENTS(bad_op); i++) {
        inj_refuse(q, INJ_PATH_A, "inject-drop-opcode", bad_op[i]);
    }
    inj_assert_str(q, INJ_PATH_A, "inject-drop-opcode", "0x15");
    inj_set(q, INJ_PATH_A, "inject-drop-opcode", "any");
    inj_assert_str(q, INJ_PATH_A, "inject-drop-opcode", "");

    /* The counts: uint32; the delay at most a minute. */
    qom_set_u32(q, INJ_PATH_A, "inject-drop-rx", UINT32_MAX);
    g_assert_cmpint(qom_get_u32(q, INJ_PATH_A, "inject-drop-rx"), ==,
                    UINT32_MAX);
    err = inj_set_int(q, INJ_PATH_A, "inject-drop-tx", -1);
    g_assert_nonnull(err);
    g_free(err);
    err = inj_set_int(q, INJ_PATH_A, "inject-drop-tx", 1ll << 32);
    g_assert_nonnull(err);
    g_free(err);
    err = inj_set_str(q, INJ_PATH_A, "inject-drop-tx", "many");
    g_assert_nonnull(err);
    g_free(err);
    err = inj_set_int(q, INJ_PATH_A, "inject-irq-delay-us", 60000001);
    g_assert_nonnull(err);
    qom_set_u32(q, INJ_PATH_A, "inject-irq-delay-us", 60000000);
    g_assert_cmpint(qom_get_u32(q, INJ_PATH_A, "inject-irq-delay-us"), ==,
                    60000000);
    qom_set_u32(q, INJ_PATH_A, "inject-irq-delay-us", 0);
    g_assert_cmpint(qom_get_u32(q, INJ_PATH_A, "inject-drop-tx"), ==, 0);

    /* A function reset keeps what is armed: it is not guest state. */
    pib_open(&d, qs, PIB_DEVFN_B);
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_RESET);
    g_assert_cmpint(qom_get_u32(q, INJ_PATH_B, "inject-drop-tx"), ==, 3);
    inj_assert_str(q, INJ_PATH_B, "inject-wr-error", "7:1:LOC_LEN_ERR");
    /* None of this touched the device's guest-visible state. */
    pib_enable(&d, 4, 8);
    g_assert_cmphex(pib_nop(&d, 0x1234), ==, 0x1234);
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, 0);
    pib_close(&d);
    qtest_shutdown(qs);
}

/* inject-wr-error: the chosen WQE fails with the chosen status, QP to ERR */
static void test_inject_wr_error(void)
{
    g_autofree char *spec = NULL;
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    uint64_t cnt[PIB_CNT_MAX];
    uint32_t i;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);
    for (i = 0; i < 3; i++) {
        sge[0] = dp_sge(y.buf + i * 1024, 1024, y.key);
        dp_post_recv(&p.b, &y.qp, 0x10 + i, sge, 1);
    }

    /* The second of three SENDs fails with REM_ACCESS_ERR. */
    spec = g_strdup_printf("%u:%u:REM_ACCESS_ERR", x.qp.qpn, x.qp.sq_pi + 1);
    inj_set(p.qs->qts, INJ_PATH_A, "inject-wr-error", spec);
    sge[0] = dp_sge(x.buf, 100, x.key);
    for (i = 0; i < 3; i++) {
        dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x20 + i,
                     sge, 1, 0, 0);
    }
    dp_expect(&p.a, &x.scq, 0x20, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.a, &x.scq, 0x21, PIB_WC_REM_ACCESS_ERR, PIB_CQE_SEND, &cqe);
    g_assert_cmpuint(le16_to_cpu(cqe.wqe_index), ==, x.qp.sq_pi - 2);
    dp_expect(&p.a, &x.scq, 0x22, PIB_WC_WR_FLUSH_ERR, PIB_CQE_SEND, NULL);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    /* Only the first one went out. */
    dp_expect(&p.b, &y.rcq, 0x10, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    dp_expect_none(&p.b, &y.rcq);

    /* One shot: spent, it reads back empty; counted on A only. */
    inj_assert_str(p.qs->qts, INJ_PATH_A, "inject-wr-error", "");
    dp_counters(&p.a, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_INJECTED_FAULTS], ==, 1);
    dp_counters(&p.b, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_INJECTED_FAULTS], ==, 0);

    /* A fault armed for a WQE index the QP never reaches does nothing. */
    dp_relink(&x, 1, &y, 2);
    spec = (g_free(spec), g_strdup_printf("%u:%u:4", x.qp.qpn, 40000));
    inj_set(p.qs->qts, INJ_PATH_A, "inject-wr-error", spec);
    sge[0] = dp_sge(y.buf, 1024, y.key);
    dp_post_recv(&p.b, &y.qp, 0x30, sge, 1);
    sge[0] = dp_sge(x.buf, 100, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x31, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x31, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x30, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/*
 * inject-drop-tx / -rx: RC recovers from each lost packet.  A lost request
 * packet: the responder NAKs the gap, the requester goes back N.  A lost ACK
 * (-rx with inject-drop-opcode): the ACK timer resends, the responder
 * answers the duplicate.
 */
static void test_inject_drop(void)
{
    QTestState *q;
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    uint64_t ca[PIB_CNT_MAX], cb[PIB_CNT_MAX];

    dp_pair_up(&p);
    q = p.qs->qts;
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);

    /* The first packet of a 5-packet SEND is lost on its way out. */
    qom_set_u32(q, INJ_PATH_A, "inject-drop-tx", 1);
    dp_fill(&p.a, x.buf, 5000, 3);
    sge[0] = dp_sge(y.buf, 8192, y.key);
    dp_post_recv(&p.b, &y.qp, 0x1, sge, 1);
    sge[0] = dp_sge(x.buf, 5000, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x2, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x1, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 5000);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf, 5000);
    g_assert_cmpint(qom_get_u32(q, INJ_PATH_A, "inject-drop-tx"), ==, 0);
    dp_counters(&p.a, ca);
    dp_counters(&p.b, cb);
    g_assert_cmpuint(ca[PIB_CNT_INJECTED_FAULTS], ==, 1);
    g_assert_cmpuint(ca[PIB_CNT_RETRANSMITS], >=, 1);
    g_assert_cmpuint(ca[PIB_CNT_SEQ_NAKS_RCVD], ==, 1);
    g_assert_cmpuint(cb[PIB_CNT_SEQ_NAKS_SENT], ==, 1);
    g_assert_cmpuint(cb[PIB_CNT_INJECTED_FAULTS], ==, 0);
    dp_expect_none(&p.a, &x.scq);           /* the link is quiet again */

    /* The ACK of the next SEND is lost on its way in: the timer resends. */
    inj_set(q, INJ_PATH_A, "inject-drop-opcode", "RC_ACKNOWLEDGE");
    qom_set_u32(q, INJ_PATH_A, "inject-drop-rx", 1);
    sge[0] = dp_sge(y.buf, 8192, y.key);
    dp_post_recv(&p.b, &y.qp, 0x3, sge, 1);
    sge[0] = dp_sge(x.buf, 100, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x4, sge, 1,
                 0, 0);
    dp_expect(&p.b, &y.rcq, 0x3, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    dp_expect_none(&p.a, &x.scq);           /* no ACK: nothing completes */
    dp_step_until_cqe(&p.a, &x.scq, &cqe, 10 * 1000 * 1000, 100);
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x4);
    g_assert_cmpuint(cqe.status, ==, PIB_WC_SUCCESS);
    dp_expect_none(&p.b, &y.rcq);           /* the duplicate was not applied */
    g_assert_cmpint(qom_get_u32(q, INJ_PATH_A, "inject-drop-rx"), ==, 0);
    dp_counters(&p.a, ca);
    dp_counters(&p.b, cb);
    g_assert_cmpuint(ca[PIB_CNT_INJECTED_FAULTS], ==, 2);
    g_assert_cmpuint(ca[PIB_CNT_RETRY_TIMEOUTS], >=, 1);
    g_assert_cmpuint(cb[PIB_CNT_DUPLICATE_REQUESTS], ==, 1);
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/*
 * inject-irq-delay-us: the admin completion is written at once, its
 * interrupt only once the virtual clock passed the delay.
 */
static void test_inject_irq_delay(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0,id=pa");
    QTestState *q = qs->qts;
    uint64_t cnt[PIB_CNT_MAX];
    uint64_t msg;
    PibDev d;

    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 4, 8);
    msg = dp_alloc(&d, 4096);
    dp_msix_to_ram(&d, PIB_MSIX_VEC_ADMIN, msg, 0xfeed);
    g_assert_cmphex(pib_nop(&d, 1), ==, 1);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0xfeed);     /* on time */

    /* The next interrupt only, 5 ms late. */
    qom_set_u32(q, INJ_PATH_A, "inject-irq-delay-count", 1);
    qom_set_u32(q, INJ_PATH_A, "inject-irq-delay-us", 5000);
    qtest_writel(q, msg, 0);
    g_assert_cmphex(pib_nop(&d, 2), ==, 2);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0);
    qtest_clock_step(q, 4999 * 1000);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0);
    qtest_clock_step(q, 1000);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0xfeed);
    /* Count spent: the delay switched itself off. */
    g_assert_cmpint(qom_get_u32(q, INJ_PATH_A, "inject-irq-delay-us"), ==, 0);
    g_assert_cmpint(qom_get_u32(q, INJ_PATH_A, "inject-irq-delay-count"), ==,
                    0);
    qtest_writel(q, msg, 0);
    g_assert_cmphex(pib_nop(&d, 3), ==, 3);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0xfeed);

    /* Every interrupt: a second one while the first waits rides along. */
    qom_set_u32(q, INJ_PATH_A, "inject-irq-delay-us", 1000);
    qtest_writel(q, msg, 0);
    g_assert_cmphex(pib_nop(&d, 4), ==, 4);
    g_assert_cmphex(pib_nop(&d, 5), ==, 5);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0);
    qtest_clock_step(q, 1000 * 1000);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0xfeed);
    qom_set_u32(q, INJ_PATH_A, "inject-irq-delay-us", 0);
    qtest_writel(q, msg, 0);
    dp_counters(&d, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_INJECTED_FAULTS], ==, 2);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0xfeed);     /* on time again */

    /* A reset forgets an interrupt still held back. */
    qom_set_u32(q, INJ_PATH_A, "inject-irq-delay-us", 1000);
    qtest_writel(q, msg, 0);
    g_assert_cmphex(pib_nop(&d, 6), ==, 6);
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_RESET);
    qtest_clock_step(q, 2000 * 1000);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0);
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, 0);
    pib_close(&d);
    qtest_shutdown(qs);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    qtest_add_func("/pib/inject/properties", test_inject_properties);
    qtest_add_func("/pib/inject/wr-error", test_inject_wr_error);
    qtest_add_func("/pib/inject/drop", test_inject_drop);
    qtest_add_func("/pib/inject/irq-delay", test_inject_irq_delay);

    return g_test_run();
}
