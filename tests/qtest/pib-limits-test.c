/*
 * QTest: the pib HCA at the edges of its rings and counters (hw/pib)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * What only shows after many events: a ring's second pass, a counter past
 * the width of its field.  The test is the device's remote peer on its cable
 * (pib-qtest.h's wp_* helpers), which makes the events.
 *
 *   /pib/limits/ceq-wrap      the CEQ's phase bit flips on every pass
 *   /pib/limits/pma-saturate  PortCounters' narrow fields stop at their maximum
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-limits-test
 */

#include "qemu/osdep.h"

#include "pib-qtest.h"

#define LIM_CEQ_DEPTH   4

/*
 * The CEQ is a ring the device produces like the others (include/pib_hw.h,
 * "The phase bit"): a driver knows entry idx is new by its phase bit, 1 on
 * the first pass, 0 on the second, and so on.  A CEQ of 4 entries and 10
 * completion events, one at a time (arm, a SEND from the peer, its CQE, the
 * CEQE, CEQ_DB): each CEQE names the CQ and carries its pass's phase.  Were
 * the bit not flipped, the second pass would look unwritten and its events
 * lost.
 */
static void test_ceq_wrap(void)
{
    struct pib_sge sge;
    struct pib_ceqe e;
    uint64_t ceq;
    gint64 end;
    TestEnd x;
    WirePkt w;
    PeerLink l;
    PibDev d;
    uint32_t i;
    int fd;

    peer_boot(&l, 1);
    pib_open(&d, l.qs, PIB_DEVFN_A);
    pib_program_queues(&d, 16, 64);
    ceq = dp_alloc(&d, 4096);
    wr(&d, PIB_REG_CEQ_DEPTH, LIM_CEQ_DEPTH);
    wr(&d, PIB_REG_CEQ_LO, (uint32_t)ceq);
    wr(&d, PIB_REG_CEQ_HI, ceq >> 32);
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_READY);
    fd = peer_connect(l.path);
    peer_bring_up(&d, fd, TEST_NODE_GUID);

    dp_end(&d, &x, PIB_QPT_RC, 4096);
    wp_dqpn = x.qp.qpn;
    wp_qp_rtr(&d, x.qp.qpn, 0, 4);
    wp_qp_rts(&d, x.qp.qpn, 4);
    sge = dp_sge(x.buf, 64, x.key);
    for (i = 0; i < 10; i++) {
        dp_post_recv(&d, &x.qp, i, &sge, 1);
        dp_doorbell(&d, DP_UAR, PIB_UAR_CQ_DB, x.rcq.cqn | PIB_DB_CQ_ARM,
                    x.rcq.ci);
        wp_send_only(fd, 100 + i, "event");
        wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 100 + i);
        dp_expect(&d, &x.rcq, i, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
        /* Written with the CQE; the wait is only a hang guard. */
        end = g_get_monotonic_time() + TIMEOUT_US;
        for (;;) {
            qtest_memread(qts(&d), ceq + (i % LIM_CEQ_DEPTH) * sizeof(e), &e,
                          sizeof(e));
            if ((e.flags & PIB_CEQE_F_PHASE) == phase_of(i, LIM_CEQ_DEPTH)) {
                break;
            }
            g_assert_cmpint(g_get_monotonic_time(), <, end);
            g_usleep(dp_poll_interval_us);
        }
        g_assert_cmpuint(le32_to_cpu(e.cqn), ==, x.rcq.cqn);
        wr(&d, PIB_REG_CEQ_DB, i + 1);
    }
    g_assert_cmpuint(dp_err_count(&d), ==, 0);
    close(fd);
    pib_close(&d);
    peer_shutdown(&l);
}

/* A PMA MAD through MAD_IFC, as the driver's process_mad hands it over. */
static uint16_t lim_pma(PibDev *d, uint8_t method, uint16_t counter_select,
                        struct pib_pma_mad *resp)
{
    uint64_t mbox = dp_alloc(d, 4096);
    struct pib_mad_ifc_in in = { .port_num = 1 };
    struct pib_pma_mad *req = (struct pib_pma_mad *)in.mad;
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_MAD_IFC,
        .resp_addr = cpu_to_le64(d->resp),
        .resp_len = cpu_to_le32(PIB_MAD_SIZE),
        .in.mbox = { .addr = cpu_to_le64(mbox), .len = cpu_to_le32(sizeof(in)) },
    };
    struct pib_admin_cqe cqe;

    req->hdr = (struct pib_mad_hdr) {
        .base_version = PIB_MAD_BASE_VERSION,
        .mgmt_class = PIB_MGMT_CLASS_PERF,
        .class_version = PIB_PMA_CLASS_VERSION,
        .method = method,
        .tid_lo_be = cpu_to_be32(0x99),
        .attr_id_be = cpu_to_be16(PIB_PMA_ATTR_PORT_COUNTERS),
    };
    req->data[1] = 1;                       /* PortSelect */
    stw_be_p(req->data + 2, counter_select);
    qtest_memwrite(qts(d), mbox, &in, sizeof(in));
    g_assert_cmpuint(pib_cmd(d, &cmd, &cqe), ==, PIB_AQ_OK);
    g_assert_cmphex(le32_to_cpu(cqe.result0) & PIB_MAD_IFC_REPLY, !=, 0);
    qtest_memread(qts(d), d->resp, resp, PIB_MAD_SIZE);
    g_assert_cmphex(resp->hdr.method, ==, PIB_MAD_METHOD_GET_RESP);
    return be16_to_cpu(resp->hdr.status_be);
}

/*
 * n data packets with a P_Key the port does not hold (0x1234), in one write:
 * each is a P_Key violation (PortRcvConstraintErrors); counted once the
 * device's own counter says it read them all.
 */
static void lim_bad_pkeys(PibDev *d, int fd, uint32_t n)
{
    enum { LEN = 4 + 24 };
    g_autofree uint8_t *frames = g_malloc0(n * LEN);
    uint64_t cnt[PIB_CNT_MAX], before;
    gint64 end;
    uint32_t i;

    dp_counters(d, cnt);
    before = cnt[PIB_CNT_RX_DROP_PKEY];
    for (i = 0; i < n; i++) {
        uint8_t *f = frames + i * LEN, *b = f + 4;

        f[0] = PIB_LINK_MAGIC;
        f[1] = PIB_FRAME_PACKET;
        stw_be_p(f + 2, 24);
        b[1] = PIB_LNH_IBA_LOCAL;
        stw_be_p(b + 2, 1);                 /* DLID: the device */
        stw_be_p(b + 4, 6);
        stw_be_p(b + 6, WP_LID);
        b[8] = PIB_OP_RC_SEND_ONLY;
        stw_be_p(b + 10, 0x1234);           /* P_Key */
        stl_be_p(b + 12, wp_dqpn);
        stl_be_p(b + 16, PIB_BTH_ACKREQ | 100);
        memcpy(b + 20, "abcd", 4);
    }
    peer_write(fd, frames, n * LEN);
    end = g_get_monotonic_time() + TIMEOUT_US;
    do {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        dp_counters(d, cnt);
    } while (cnt[PIB_CNT_RX_DROP_PKEY] - before < n);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_PKEY] - before, ==, n);
}

/*
 * IBTA 16.1.3.5: PortCounters' error counters stop at all ones rather than
 * wrap.  PortRcvConstraintErrors is 8 bits: 200 violations read 200, 300 read
 * 255 (not 300 mod 256); the device's own 64-bit counter holds 300.  A Set
 * clears it, and it counts from 0 again.
 */
static void test_pma_saturate(void)
{
    struct pib_pma_mad r;
    struct pib_port_counters *pc = (struct pib_port_counters *)r.data;
    TestEnd x;
    PeerLink l;
    PibDev d;
    int fd;

    fd = peer_dev_up(&l, &d);
    dp_end(&d, &x, PIB_QPT_RC, 4096);
    wp_dqpn = x.qp.qpn;
    wp_qp_rtr(&d, x.qp.qpn, 0, 4);

    g_assert_cmpuint(lim_pma(&d, PIB_MAD_METHOD_SET, 0xffff, &r), ==, 0);
    g_assert_cmpuint(pc->rcv_constraint_errors, ==, 0);
    lim_bad_pkeys(&d, fd, 200);
    g_assert_cmpuint(lim_pma(&d, PIB_MAD_METHOD_GET, 0, &r), ==, 0);
    g_assert_cmpuint(pc->rcv_constraint_errors, ==, 200);
    lim_bad_pkeys(&d, fd, 100);
    g_assert_cmpuint(lim_pma(&d, PIB_MAD_METHOD_GET, 0, &r), ==, 0);
    g_assert_cmpuint(pc->rcv_constraint_errors, ==, 255);
    g_assert_cmpuint(lim_pma(&d, PIB_MAD_METHOD_SET, PIB_PMA_SEL_RCV_CONSTRAINT, &r),
                     ==, 0);
    g_assert_cmpuint(pc->rcv_constraint_errors, ==, 0);
    lim_bad_pkeys(&d, fd, 10);
    g_assert_cmpuint(lim_pma(&d, PIB_MAD_METHOD_GET, 0, &r), ==, 0);
    g_assert_cmpuint(pc->rcv_constraint_errors, ==, 10);

    g_assert_cmpuint(dp_err_count(&d), ==, 0);
    close(fd);
    pib_close(&d);
    peer_shutdown(&l);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/pib/limits/ceq-wrap", test_ceq_wrap);
    qtest_add_func("/pib/limits/pma-saturate", test_pma_saturate);
    return g_test_run();
}
