/*
 * QTest: the pib HCA's remote memory access (hw/pib)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * As in pib-data-test.c, the test plays the driver and the provider at once
 * (the dp_* mini-driver in pib-qtest.h), on two devices on one link in one
 * QEMU (TestPair): WQEs written and doorbells rung as guest-provider/qp.c
 * does, CQEs read by their phase bit, the target's memory read back.
 *
 * Covered: RDMA WRITE (+IMM) and READ, atomics, ATOMIC WRITE and FLUSH, responses in
 * PSN order, remote access errors, memory windows and the IBTA bind rules,
 * REREG_MR, and fast registration (FRWR) with every way a REG_MR can fail.
 * The paths stay under /pib/data/, where these tests were first.
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-rdma-test
 */

#include "qemu/osdep.h"

#include "pib-qtest.h"

/*
 * Responses leave in PSN order: a 256 KiB READ (more responses than one scheduler pass
 * sends), then a SEND, then a fetch-and-add, posted together.  The responder answers the READ
 * in several passes; the SEND's ACK and the atomic's answer wait behind its responses, so the
 * requester never takes them for the loss of READ responses: everything completes in order at
 * the first try, with no retransmit and no duplicate at the responder.
 */
static void test_dp_read_order(void)
{
    enum { READ_LEN = 256 * 1024 };
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge;
    struct pib_send_wqe wqe;
    struct pib_cqe cqe;
    uint64_t ca[PIB_CNT_MAX], cb[PIB_CNT_MAX], ca2[PIB_CNT_MAX], cb2[PIB_CNT_MAX];

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, READ_LEN + 4096);
    dp_end(&p.b, &y, PIB_QPT_RC, READ_LEN + 4096);
    dp_link_ends(&x, 1, &y, 2);
    dp_fill(&p.b, y.buf, READ_LEN, 7);
    qtest_writeq(qts(&p.b), y.buf + READ_LEN, 40);
    sge = dp_sge(y.buf + READ_LEN + 64, 64, y.key);
    dp_post_recv(&p.b, &y.qp, 0x20, &sge, 1);
    dp_counters(&p.a, ca);
    dp_counters(&p.b, cb);

    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_RDMA_READ, .flags = PIB_WQE_F_SIGNALED, .num_sge = 1,
        .wr_id = cpu_to_le64(0x21), .remote_addr = cpu_to_le64(y.buf),
        .rkey = cpu_to_le32(y.key),
    };
    sge = dp_sge(x.buf, READ_LEN, x.key);
    dp_post_send_raw(&p.a, &x.qp, &wqe, &sge, sizeof(sge), false);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_SEND, .flags = PIB_WQE_F_SIGNALED, .num_sge = 1,
        .wr_id = cpu_to_le64(0x22),
    };
    sge = dp_sge(x.buf + READ_LEN, 64, x.key);
    dp_post_send_raw(&p.a, &x.qp, &wqe, &sge, sizeof(sge), false);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_ATOMIC_FA, .flags = PIB_WQE_F_SIGNALED, .num_sge = 1,
        .wr_id = cpu_to_le64(0x23), .remote_addr = cpu_to_le64(y.buf + READ_LEN),
        .rkey = cpu_to_le32(y.key), .compare_add = cpu_to_le64(2),
    };
    sge = dp_sge(x.buf + READ_LEN + 128, 8, x.key);
    dp_post_send_raw(&p.a, &x.qp, &wqe, &sge, sizeof(sge), true);

    dp_expect(&p.a, &x.scq, 0x21, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, READ_LEN);
    dp_expect(&p.a, &x.scq, 0x22, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.a, &x.scq, 0x23, PIB_WC_SUCCESS, PIB_CQE_FETCH_ADD, NULL);
    dp_expect(&p.b, &y.rcq, 0x20, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf, READ_LEN);
    g_assert_cmpuint(qtest_readq(qts(&p.a), x.buf + READ_LEN + 128), ==, 40);
    g_assert_cmpuint(qtest_readq(qts(&p.b), y.buf + READ_LEN), ==, 42);
    dp_counters(&p.a, ca2);
    dp_counters(&p.b, cb2);
    g_assert_cmpuint(ca2[PIB_CNT_RETRANSMITS], ==, ca[PIB_CNT_RETRANSMITS]);
    g_assert_cmpuint(cb2[PIB_CNT_DUPLICATE_REQUESTS], ==, cb[PIB_CNT_DUPLICATE_REQUESTS]);
    g_assert_cmpuint(ca2[PIB_CNT_RX_DROP_STALE_RESP], ==, ca[PIB_CNT_RX_DROP_STALE_RESP]);
    dp_pair_down(&p);
}

/* RDMA WRITE (+IMM), READ, atomics, remote access errors. */
static void test_dp_rdma(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge[2];
    struct pib_send_wqe wqe;
    struct pib_cqe cqe;
    uint8_t imm[4] = { 1, 2, 3, 4 };
    g_autofree uint8_t *before = g_malloc(16384);
    g_autofree uint8_t *after = g_malloc(16384);
    uint64_t ctr;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);

    /* WRITE 5000 bytes from two SGEs to an odd remote address */
    dp_fill(&p.a, x.buf, 8192, 21);
    sge[0] = dp_sge(x.buf + 1, 3000, x.key);
    sge[1] = dp_sge(x.buf + 4000, 2000, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x1,
                 sge, 2, y.buf + 333, y.key);
    dp_expect(&p.a, &x.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_assert_same(&p.a, x.buf + 1, &p.b, y.buf + 333, 3000);
    dp_assert_same(&p.a, x.buf + 4000, &p.b, y.buf + 3333, 2000);
    dp_expect_none(&p.b, &y.rcq);       /* a plain WRITE consumes nothing */

    /* WRITE with immediate consumes a receive WQE. */
    sge[1] = dp_sge(y.buf, 16, y.key);
    dp_post_recv(&p.b, &y.qp, 0x2, &sge[1], 1);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_RDMA_WRITE_IMM,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 1,
        .wr_id = cpu_to_le64(0x3),
        .remote_addr = cpu_to_le64(y.buf + 8192),
        .rkey = cpu_to_le32(y.key),
    };
    memcpy(&wqe.imm_inv, imm, 4);
    sge[0] = dp_sge(x.buf, 2500, x.key);
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x3, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_expect(&p.b, &y.rcq, 0x2, PIB_WC_SUCCESS, PIB_CQE_RECV_RDMA_IMM, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 2500);
    g_assert_cmpuint(cqe.flags & PIB_CQE_F_IMM, ==, PIB_CQE_F_IMM);
    g_assert_cmpmem(&cqe.imm_inv, 4, imm, 4);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 8192, 2500);

    /* READ 6000 bytes back into two SGEs. */
    dp_fill(&p.b, y.buf + 100, 6000, 99);
    qtest_memset(qts(&p.a), x.buf, 0, 16384);
    sge[0] = dp_sge(x.buf + 10, 2000, x.key);
    sge[1] = dp_sge(x.buf + 5000, 4000, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x4, sge,
                 2, y.buf + 100, y.key);
    dp_expect(&p.a, &x.scq, 0x4, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 6000);
    dp_assert_same(&p.a, x.buf + 10, &p.b, y.buf + 100, 2000);
    dp_assert_same(&p.a, x.buf + 5000, &p.b, y.buf + 2100, 4000);
    g_assert_cmphex(qtest_readb(qts(&p.a), x.buf + 9), ==, 0);
    g_assert_cmphex(qtest_readb(qts(&p.a), x.buf + 9000), ==, 0);

    /* Atomics on a little-endian counter: FA, CS that matches, one that not */
    qtest_writeq(qts(&p.b), y.buf + 64, 100);
    sge[0] = dp_sge(x.buf + 8, 8, x.key);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_ATOMIC_FA,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 1,
        .wr_id = cpu_to_le64(0x5),
        .remote_addr = cpu_to_le64(y.buf + 64),
        .rkey = cpu_to_le32(y.key),
        .compare_add = cpu_to_le64(5),
    };
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x5, PIB_WC_SUCCESS, PIB_CQE_FETCH_ADD, NULL);
    g_assert_cmpuint(qtest_readq(qts(&p.a), x.buf + 8), ==, 100);
    g_assert_cmpuint(qtest_readq(qts(&p.b), y.buf + 64), ==, 105);
    wqe.opcode = PIB_WQE_ATOMIC_CS;
    wqe.wr_id = cpu_to_le64(0x6);
    wqe.compare_add = cpu_to_le64(105);
    wqe.swap = cpu_to_le64(1000);
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x6, PIB_WC_SUCCESS, PIB_CQE_COMP_SWAP, NULL);
    g_assert_cmpuint(qtest_readq(qts(&p.a), x.buf + 8), ==, 105);
    g_assert_cmpuint(qtest_readq(qts(&p.b), y.buf + 64), ==, 1000);
    wqe.wr_id = cpu_to_le64(0x7);
    wqe.swap = cpu_to_le64(7);
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x7, PIB_WC_SUCCESS, PIB_CQE_COMP_SWAP, NULL);
    g_assert_cmpuint(qtest_readq(qts(&p.a), x.buf + 8), ==, 1000);
    ctr = qtest_readq(qts(&p.b), y.buf + 64);
    g_assert_cmpuint(ctr, ==, 1000);

    /* A WRITE with a bad rkey: REM_ACCESS_ERR, target memory unchanged. */
    qtest_memread(qts(&p.b), y.buf, before, 16384);
    sge[0] = dp_sge(x.buf, 3000, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x8,
                 sge, 1, y.buf, y.key ^ 0x80);
    dp_expect(&p.a, &x.scq, 0x8, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    qtest_memread(qts(&p.b), y.buf, after, 16384);
    g_assert_cmpmem(before, 16384, after, 16384);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    g_assert_cmpuint(dp_query_qp(&p.b, y.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    g_assert_true(dp_aeq_find(&p.b, PIB_AE_QP_ACCESS_ERR, y.qp.qpn));

    /* A misaligned atomic: invalid request. */
    g_assert_cmpuint(dp_modify_state(&p.a, x.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&p.b, y.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x.qp.sq_pi = x.qp.rq_pi = y.qp.sq_pi = y.qp.rq_pi = 0;
    dp_link_ends(&x, 1, &y, 2);
    wqe.opcode = PIB_WQE_ATOMIC_FA;
    wqe.wr_id = cpu_to_le64(0x9);
    wqe.remote_addr = cpu_to_le64(y.buf + 68);
    sge[0] = dp_sge(x.buf + 8, 8, x.key);
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x9, PIB_WC_REM_INV_REQ_ERR, PIB_CQE_FETCH_ADD,
              NULL);
    g_assert_cmpuint(qtest_readq(qts(&p.b), y.buf + 64), ==, 1000);

    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/*
 * ATOMIC WRITE (IBTA 1.5): 8 bytes placed at once, answered by an ACK.  The
 * target needs remote write (not remote atomic) and 8-byte alignment; the
 * data travels in the WQE, byte for byte.
 */
static void test_dp_atomic_write(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_send_wqe wqe;
    struct pib_cqe cqe;
    const uint8_t val[8] = { 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88 };
    uint8_t got[24], want[24];
    uint32_t ro_key;
    uint64_t raw;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 4096);
    dp_end(&p.b, &y, PIB_QPT_RC, 4096);
    dp_link_ends(&x, 1, &y, 2);

    /* The 8 bytes land as posted; the neighbours stay. */
    dp_fill(&p.b, y.buf, 4096, 5);
    qtest_memread(qts(&p.b), y.buf + 56, want, sizeof(want));
    memcpy(want + 8, val, 8);
    memcpy(&raw, val, 8);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_ATOMIC_WRITE,
        .flags = PIB_WQE_F_SIGNALED,
        .wr_id = cpu_to_le64(0x1),
        .remote_addr = cpu_to_le64(y.buf + 64),
        .rkey = cpu_to_le32(y.key),
        .compare_add = raw,             /* bytes as they are to land */
    };
    dp_post_send_raw(&p.a, &x.qp, &wqe, NULL, 0, true);
    dp_expect(&p.a, &x.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_ATOMIC_WRITE, &cqe);
    qtest_memread(qts(&p.b), y.buf + 56, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), want, sizeof(want));
    dp_expect_none(&p.b, &y.rcq);       /* consumes no receive WQE */

    /* Another at once, then a READ back through the same QP: ordered. */
    wqe.wr_id = cpu_to_le64(0x2);
    wqe.remote_addr = cpu_to_le64(y.buf + 72);
    dp_post_send_raw(&p.a, &x.qp, &wqe, NULL, 0, true);
    dp_expect(&p.a, &x.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_ATOMIC_WRITE, NULL);
    g_assert_cmpuint(qtest_readq(qts(&p.b), y.buf + 72), ==, ldq_le_p(val));

    /* An MR without remote write: REM_ACCESS_ERR, nothing written. */
    ro_key = dp_reg_mr(&p.b, y.pdn, PIB_ACCESS_LOCAL_WRITE |
                       PIB_ACCESS_REMOTE_READ | PIB_ACCESS_REMOTE_ATOMIC,
                       y.buf + 2048, 2048);
    qtest_memread(qts(&p.b), y.buf + 2048, want, 8);
    wqe.wr_id = cpu_to_le64(0x3);
    wqe.remote_addr = cpu_to_le64(y.buf + 2048);
    wqe.rkey = cpu_to_le32(ro_key);
    dp_post_send_raw(&p.a, &x.qp, &wqe, NULL, 0, true);
    dp_expect(&p.a, &x.scq, 0x3, PIB_WC_REM_ACCESS_ERR, PIB_CQE_ATOMIC_WRITE,
              NULL);
    qtest_memread(qts(&p.b), y.buf + 2048, got, 8);
    g_assert_cmpmem(got, 8, want, 8);
    g_assert_true(dp_aeq_find(&p.b, PIB_AE_QP_ACCESS_ERR, y.qp.qpn));

    /* Misaligned: invalid request, nothing written. */
    dp_relink(&x, 1, &y, 2);
    qtest_memread(qts(&p.b), y.buf + 100, want, 16);
    wqe.wr_id = cpu_to_le64(0x4);
    wqe.remote_addr = cpu_to_le64(y.buf + 100);
    wqe.rkey = cpu_to_le32(y.key);
    dp_post_send_raw(&p.a, &x.qp, &wqe, NULL, 0, true);
    dp_expect(&p.a, &x.scq, 0x4, PIB_WC_REM_INV_REQ_ERR, PIB_CQE_ATOMIC_WRITE,
              NULL);
    qtest_memread(qts(&p.b), y.buf + 100, got, 16);
    g_assert_cmpmem(got, 16, want, 16);

    /* Inline is not how ATOMIC WRITE carries its data: a local QP error. */
    dp_relink(&x, 1, &y, 2);
    wqe.wr_id = cpu_to_le64(0x5);
    wqe.remote_addr = cpu_to_le64(y.buf + 64);
    wqe.flags = PIB_WQE_F_SIGNALED | PIB_WQE_F_INLINE;
    dp_post_send_raw(&p.a, &x.qp, &wqe, NULL, 0, true);
    dp_expect(&p.a, &x.scq, 0x5, PIB_WC_LOC_QP_OP_ERR, PIB_CQE_ATOMIC_WRITE,
              NULL);

    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);

    /* UC has no ATOMIC WRITE: the device refuses the WQE. */
    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_UC, 4096);
    dp_end(&p.b, &y, PIB_QPT_UC, 4096);
    dp_link_ends(&x, 1, &y, 2);
    qtest_memread(qts(&p.b), y.buf + 64, want, 8);
    wqe.flags = PIB_WQE_F_SIGNALED;
    wqe.wr_id = cpu_to_le64(0x6);
    wqe.rkey = cpu_to_le32(y.key);
    dp_post_send_raw(&p.a, &x.qp, &wqe, NULL, 0, true);
    dp_expect(&p.a, &x.scq, 0x6, PIB_WC_LOC_QP_OP_ERR, PIB_CQE_ATOMIC_WRITE,
              NULL);
    qtest_memread(qts(&p.b), y.buf + 64, got, 8);
    g_assert_cmpmem(got, 8, want, 8);
    dp_pair_down(&p);
}

/*
 * RDMA FLUSH between two devices: an RDMA WRITE, then a FLUSH of its range, complete in
 * order, and the data is in the target's memory when the FLUSH completes (with byte_len 0);
 * a flush of the whole MR and a zero-length one complete too.  A persistent one is a remote
 * access error, a range longer than a message a local length error.  UC has no FLUSH.
 */
static void flush_post(TestPair *p, TestEnd *x, uint64_t wr_id, uint32_t what,
                       uint64_t va, uint32_t rkey, uint64_t len)
{
    struct pib_send_wqe wqe = {
        .opcode = PIB_WQE_FLUSH, .flags = PIB_WQE_F_SIGNALED,
        .wr_id = cpu_to_le64(wr_id), .remote_addr = cpu_to_le64(va),
        .rkey = cpu_to_le32(rkey), .compare_add = cpu_to_le64(len),
        .imm_inv = cpu_to_le32(what),
    };

    dp_post_send_raw(&p->a, &x->qp, &wqe, NULL, 0, true);
}

static void flush_grant(PibDev *d, TestQp *qp)
{
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_ACCESS_FLAGS),
        .qp_state = PIB_QPS_RTS,
        .qp_access_flags = cpu_to_le32(PIB_ACCESS_REMOTE_WRITE | PIB_ACCESS_REMOTE_READ |
                                       PIB_ACCESS_REMOTE_ATOMIC | PIB_ACCESS_FLUSH_GLOBAL),
    };

    g_assert_cmpuint(dp_modify(d, qp->qpn, &a), ==, PIB_AQ_OK);
}

static void test_dp_flush(void)
{
    const uint32_t whole = PIB_FLUSH_GLOBAL | PIB_FLUSH_MR << PIB_FLUSH_SEL_SHIFT;
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge;
    struct pib_cqe cqe;
    uint32_t fkey;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 8192);
    dp_end(&p.b, &y, PIB_QPT_RC, 8192);
    fkey = dp_reg_mr(&p.b, y.pdn, DP_ALL_ACCESS | PIB_ACCESS_FLUSH_GLOBAL, y.buf, 8192);
    dp_link_ends(&x, 1, &y, 2);
    flush_grant(&p.b, &y.qp);

    dp_fill(&p.a, x.buf, 4096, 9);
    dp_fill(&p.b, y.buf, 8192, 3);
    sge = dp_sge(x.buf, 4096, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, 0, 0x1, &sge, 1, y.buf + 1024, fkey);
    flush_post(&p, &x, 0x2, PIB_FLUSH_GLOBAL, y.buf + 1024, fkey, 4096);
    dp_expect(&p.a, &x.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_FLUSH, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 0);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 1024, 4096);
    flush_post(&p, &x, 0x3, whole, 0, fkey, 0);
    dp_expect(&p.a, &x.scq, 0x3, PIB_WC_SUCCESS, PIB_CQE_FLUSH, NULL);
    flush_post(&p, &x, 0x4, PIB_FLUSH_GLOBAL, y.buf, fkey, 0);
    dp_expect(&p.a, &x.scq, 0x4, PIB_WC_SUCCESS, PIB_CQE_FLUSH, NULL);
    dp_expect_none(&p.b, &y.rcq);       /* consumes no receive WQE */

    /* A persistent flush: the target has no persistence domain. */
    flush_post(&p, &x, 0x5, PIB_FLUSH_PERSISTENT, y.buf, fkey, 64);
    dp_expect(&p.a, &x.scq, 0x5, PIB_WC_REM_ACCESS_ERR, PIB_CQE_FLUSH, NULL);
    g_assert_true(dp_aeq_find(&p.b, PIB_AE_QP_ACCESS_ERR, y.qp.qpn));

    /* A range longer than a message can be: LOC_LEN_ERR. */
    dp_relink(&x, 1, &y, 2);
    flush_post(&p, &x, 0x7, PIB_FLUSH_GLOBAL, y.buf, fkey, (uint64_t)PIB_MAX_MSG_SZ + 1);
    dp_expect(&p.a, &x.scq, 0x7, PIB_WC_LOC_LEN_ERR, PIB_CQE_FLUSH, NULL);
    dp_pair_down(&p);

    /* UC has no FLUSH: the device refuses the WQE. */
    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_UC, 4096);
    dp_end(&p.b, &y, PIB_QPT_UC, 4096);
    dp_link_ends(&x, 1, &y, 2);
    flush_post(&p, &x, 0x8, PIB_FLUSH_GLOBAL, y.buf, y.key, 64);
    dp_expect(&p.a, &x.scq, 0x8, PIB_WC_LOC_QP_OP_ERR, PIB_CQE_FLUSH, NULL);
    dp_pair_down(&p);
}

/* A window key with the same index and another key byte. */
static uint32_t mw_key_byte(uint32_t key, uint32_t byte)
{
    return (key & ~0xffu) | (byte & 0xff);
}

/*
 * Memory windows: bind, use, invalidate (SEND_WITH_INV, LOCAL_INV), unbind,
 * rebind under a stale key, deallocate by the key ALLOC_MW returned.
 */
static void test_dp_mw(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_admin_cmd cmd = { .opcode = PIB_CMD_ALLOC_MW };
    struct pib_admin_cqe acqe;
    struct pib_send_wqe wqe;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    uint32_t mr, mr2, mw1, mw2, k1, k2;
    const uint32_t rw = PIB_ACCESS_REMOTE_WRITE | PIB_ACCESS_REMOTE_READ;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);
    /* The windows' rights are their own: the MR needs no remote rights. */
    mr = dp_reg_mr(&p.b, y.pdn, PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_MW_BIND,
                   y.buf, 16384);

    /* Windows of type 1 and 2; unbound, their rkeys grant nothing. */
    cmd.in.alloc_mw.pdn = cpu_to_le32(y.pdn);
    cmd.in.alloc_mw.type = cpu_to_le32(3);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.alloc_mw.type = cpu_to_le32(1);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    mw1 = le32_to_cpu(acqe.result0);
    cmd.in.alloc_mw.type = cpu_to_le32(2);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    mw2 = le32_to_cpu(acqe.result0);
    g_assert_cmphex(mw1 >> 8, !=, mw2 >> 8);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_PD, y.pdn), ==,
                     PIB_AQ_BUSY);

    /* Bind the type 2 window to 4 KiB of the MR; its key byte moves on. */
    k2 = (mw2 & ~0xffu) | ((mw2 + 1) & 0xff);
    dp_post_bind(&p.b, &y.qp, 0x1, 2, mw2, k2, mr, y.buf + 4096, 4096, rw);
    dp_expect(&p.b, &y.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, mr), ==, PIB_AQ_BUSY);

    /* The peer WRITEs and READs through it. */
    dp_fill(&p.a, x.buf, 512, 41);
    sge[0] = dp_sge(x.buf, 300, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x2,
                 sge, 1, y.buf + 4096 + 10, k2);
    dp_expect(&p.a, &x.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 4096 + 10, 300);
    sge[0] = dp_sge(x.buf + 1024, 300, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x3,
                 sge, 1, y.buf + 4096 + 10, k2);
    dp_expect(&p.a, &x.scq, 0x3, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    dp_assert_same(&p.a, x.buf + 1024, &p.b, y.buf + 4096 + 10, 300);

    /* SEND_WITH_INV: the receive says which rkey went. */
    sge[0] = dp_sge(y.buf, 64, y.key);
    dp_post_recv(&p.b, &y.qp, 0x4, sge, 1);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_SEND_INV,
        .flags = PIB_WQE_F_SIGNALED,
        .wr_id = cpu_to_le64(0x5),
        .imm_inv = cpu_to_le32(k2),
    };
    dp_post_send_raw(&p.a, &x.qp, &wqe, NULL, 0, true);
    dp_expect(&p.a, &x.scq, 0x5, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x4, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(cqe.flags & PIB_CQE_F_INV, ==, PIB_CQE_F_INV);
    g_assert_cmphex(le32_to_cpu(cqe.imm_inv), ==, k2);

    /* Type 1: bound, rebound elsewhere, then LOCAL_INV is refused for it. */
    k1 = (mw1 & ~0xffu) | ((mw1 + 7) & 0xff);
    dp_post_bind(&p.b, &y.qp, 0x6, 1, mw1, k1, mr, y.buf, 100, rw);
    dp_expect(&p.b, &y.scq, 0x6, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    dp_post_bind(&p.b, &y.qp, 0x7, 1, k1, k1 + 1, mr, y.buf + 8192, 100, rw);
    dp_expect(&p.b, &y.scq, 0x7, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    k1++;
    sge[0] = dp_sge(x.buf, 100, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x8,
                 sge, 1, y.buf + 8192, k1);
    dp_expect(&p.a, &x.scq, 0x8, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 8192, 100);

    /* The invalidated type 2 rkey: a remote access error, memory intact. */
    qtest_memset(qts(&p.b), y.buf + 4096, 0x11, 64);
    sge[0] = dp_sge(x.buf, 64, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x9,
                 sge, 1, y.buf + 4096, k2);
    dp_expect(&p.a, &x.scq, 0x9, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    g_assert_cmphex(qtest_readb(qts(&p.b), y.buf + 4096 + 63), ==, 0x11);
    dp_relink(&x, 1, &y, 2);

    /* LOCAL_INV of a type 1 window: refused, a completion error. */
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_LOCAL_INV,
        .flags = PIB_WQE_F_SIGNALED,
        .wr_id = cpu_to_le64(0xa),
        .imm_inv = cpu_to_le32(k1),
    };
    dp_post_send_raw(&p.b, &y.qp, &wqe, NULL, 0, true);
    dp_expect(&p.b, &y.scq, 0xa, PIB_WC_LOC_QP_OP_ERR, PIB_CQE_LOCAL_INV,
              NULL);
    dp_relink(&x, 1, &y, 2);

    /* A bind to an MR without MW_BIND: MW_BIND_ERR. */
    dp_post_bind(&p.b, &y.qp, 0xb, 2, k2, k2 + 1, y.key, y.buf, 100, rw);
    dp_expect(&p.b, &y.scq, 0xb, PIB_WC_MW_BIND_ERR, PIB_CQE_BIND_MW, NULL);
    dp_relink(&x, 1, &y, 2);

    /* LOCAL_INV of an MR: from then on its rkey fails. */
    mr2 = dp_reg_mr(&p.b, y.pdn, PIB_ACCESS_LOCAL_WRITE | rw, y.buf, 4096);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_LOCAL_INV,
        .flags = PIB_WQE_F_SIGNALED,
        .wr_id = cpu_to_le64(0xc),
        .imm_inv = cpu_to_le32(mr2),
    };
    dp_post_send_raw(&p.b, &y.qp, &wqe, NULL, 0, true);
    dp_expect(&p.b, &y.scq, 0xc, PIB_WC_SUCCESS, PIB_CQE_LOCAL_INV, NULL);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0xd,
                 sge, 1, y.buf, mr2);
    dp_expect(&p.a, &x.scq, 0xd, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, mr2), ==, PIB_AQ_OK);

    dp_relink(&x, 1, &y, 2);

    /*
     * BIND_MW names the window by its index.  Nothing updates the consumer's
     * copy of an invalidated type 2 key (k2), so the provider still passes the
     * rkey ALLOC_MW returned (mw2): the bind works, under a new key byte.
     */
    k2 = mw_key_byte(mw2, mw2 + 2);
    dp_post_bind(&p.b, &y.qp, 0x10, 2, mw2, k2, mr, y.buf + 12288, 256, rw);
    dp_expect(&p.b, &y.scq, 0x10, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    dp_fill(&p.a, x.buf, 256, 43);
    sge[0] = dp_sge(x.buf, 256, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x11,
                 sge, 1, y.buf + 12288, k2);
    dp_expect(&p.a, &x.scq, 0x11, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 12288, 256);
    /* ... but the index must be a window of the type the WQE says. */
    dp_post_bind(&p.b, &y.qp, 0x12, 1, mw2, k2, mr, y.buf, 64, rw);
    dp_expect(&p.b, &y.scq, 0x12, PIB_WC_MW_BIND_ERR, PIB_CQE_BIND_MW, NULL);
    dp_relink(&x, 1, &y, 2);
    /* LOCAL_INV unbinds it; a type 2 bind of length 0 is refused. */
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_LOCAL_INV,
        .flags = PIB_WQE_F_SIGNALED,
        .wr_id = cpu_to_le64(0x13),
        .imm_inv = cpu_to_le32(k2),
    };
    dp_post_send_raw(&p.b, &y.qp, &wqe, NULL, 0, true);
    dp_expect(&p.b, &y.scq, 0x13, PIB_WC_SUCCESS, PIB_CQE_LOCAL_INV, NULL);
    dp_post_bind(&p.b, &y.qp, 0x14, 2, mw2, mw_key_byte(mw2, mw2 + 3), 0,
                 0, 0, rw);
    dp_expect(&p.b, &y.scq, 0x14, PIB_WC_MW_BIND_ERR, PIB_CQE_BIND_MW, NULL);
    dp_relink(&x, 1, &y, 2);
    /* Bound again (stale key once more), to be deallocated while bound. */
    k2 = mw_key_byte(mw2, mw2 + 4);
    dp_post_bind(&p.b, &y.qp, 0x15, 2, mw2, k2, mr, y.buf, 4096, rw);
    dp_expect(&p.b, &y.scq, 0x15, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);

    /*
     * Type 1 unbind: ibv_bind_mw with no MR and length 0 (the provider sends
     * mr_lkey 0).  The window takes the new key and grants nothing.
     */
    dp_post_bind(&p.b, &y.qp, 0x16, 1, k1, mw_key_byte(k1, k1 + 1), 0, 0, 0,
                 rw);
    dp_expect(&p.b, &y.scq, 0x16, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    k1 = mw_key_byte(k1, k1 + 1);
    qtest_memset(qts(&p.b), y.buf + 8192, 0x22, 64);
    sge[0] = dp_sge(x.buf, 64, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x17,
                 sge, 1, y.buf + 8192, k1);
    dp_expect(&p.a, &x.scq, 0x17, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    g_assert_cmphex(qtest_readb(qts(&p.b), y.buf + 8192), ==, 0x22);
    dp_relink(&x, 1, &y, 2);

    /*
     * DEALLOC_MW by the rkey ALLOC_MW returned (all the kernel knows), after
     * binds moved the key byte on; a key byte that is neither that nor the
     * current one is a stale handle.  Deallocating the bound type 2 window
     * unbinds it, so the MR can go, and so can the PD's last reference.
     */
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEALLOC_MW,
                                mw_key_byte(mw1, mw1 + 0x40)), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEALLOC_MW, mw1), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEALLOC_MW, mw1), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, mr), ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEALLOC_MW, mw2), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, mr), ==, PIB_AQ_OK);
    /* A window deallocated by its current key works as before. */
    cmd.in.alloc_mw.type = cpu_to_le32(1);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEALLOC_MW,
                                le32_to_cpu(acqe.result0)), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_QP, y.qp.qpn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, y.key), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_PD, y.pdn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/* A signalled LOCAL_INV of key, rung, and its successful completion. */
static void mw_local_inv(PibDev *d, TestQp *qp, TestCq *scq, uint64_t wr_id,
                         uint32_t key)
{
    struct pib_send_wqe wqe = {
        .opcode = PIB_WQE_LOCAL_INV,
        .flags = PIB_WQE_F_SIGNALED,
        .wr_id = cpu_to_le64(wr_id),
        .imm_inv = cpu_to_le32(key),
    };

    dp_post_send_raw(d, qp, &wqe, NULL, 0, true);
    dp_expect(d, scq, wr_id, PIB_WC_SUCCESS, PIB_CQE_LOCAL_INV, NULL);
}

/* A bind that must fail (MW_BIND_ERR); the QP is in ERR, so relink. */
static void mw_bind_refused(TestEnd *x, TestEnd *y, uint64_t wr_id,
                            uint32_t mw, uint32_t new_key, uint32_t mr,
                            uint64_t addr, uint64_t len, uint32_t access)
{
    dp_post_bind(y->d, &y->qp, wr_id, 2, mw, new_key, mr, addr, len, access);
    dp_expect(y->d, &y->scq, wr_id, PIB_WC_MW_BIND_ERR, PIB_CQE_BIND_MW, NULL);
    dp_relink(x, 1, y, 2);
}

/*
 * The bind rules of the IBTA (C10-73, C10-74), as rdma-core's MWTest uses
 * them: the window's rights are its own, not limited by the MR's remote
 * rights; the MR needs MW_BIND, and LOCAL_WRITE for a window that peers may
 * write or use atomics on; the local bits of the bind's access are ignored.
 */
static void test_dp_mw_rules(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge[1];
    uint32_t mr_lw, mr_ro, mw, k;
    const uint32_t rw = PIB_ACCESS_REMOTE_WRITE | PIB_ACCESS_REMOTE_READ;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);
    /* No remote rights on either MR: LOCAL_WRITE + MW_BIND, MW_BIND alone. */
    mr_lw = dp_reg_mr(&p.b, y.pdn, PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_MW_BIND,
                      y.buf, 8192);
    mr_ro = dp_reg_mr(&p.b, y.pdn, PIB_ACCESS_MW_BIND, y.buf + 8192, 8192);
    mw = dp_alloc_mw(&p.b, y.pdn, 2);

    /* Remote write and read over LOCAL_WRITE|MW_BIND, local bits passed. */
    k = mw_key_byte(mw, mw + 1);
    dp_post_bind(&p.b, &y.qp, 0x1, 2, mw, k, mr_lw, y.buf, 4096,
                 rw | PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_MW_BIND);
    dp_expect(&p.b, &y.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    dp_fill(&p.a, x.buf, 256, 7);
    sge[0] = dp_sge(x.buf, 256, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x2,
                 sge, 1, y.buf + 100, k);
    dp_expect(&p.a, &x.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 100, 256);
    sge[0] = dp_sge(x.buf + 4096, 256, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x3,
                 sge, 1, y.buf + 100, k);
    dp_expect(&p.a, &x.scq, 0x3, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    dp_assert_same(&p.a, x.buf + 4096, &p.b, y.buf + 100, 256);

    /* The MR's own key still grants nothing remote: memory untouched. */
    qtest_memset(qts(&p.b), y.buf + 5000, 0x33, 64);
    sge[0] = dp_sge(x.buf, 64, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x4,
                 sge, 1, y.buf + 5000, mr_lw);
    dp_expect(&p.a, &x.scq, 0x4, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    g_assert_cmphex(qtest_readb(qts(&p.b), y.buf + 5000 + 63), ==, 0x33);
    dp_relink(&x, 1, &y, 2);

    /* A window with only read rights refuses a write, memory untouched. */
    mw_local_inv(&p.b, &y.qp, &y.scq, 0x5, k);
    k = mw_key_byte(mw, mw + 2);
    dp_post_bind(&p.b, &y.qp, 0x6, 2, mw, k, mr_ro, y.buf + 8192, 4096,
                 PIB_ACCESS_REMOTE_READ);
    dp_expect(&p.b, &y.scq, 0x6, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    dp_fill(&p.b, y.buf + 8192, 128, 9);
    sge[0] = dp_sge(x.buf, 128, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x7,
                 sge, 1, y.buf + 8192, k);
    dp_expect(&p.a, &x.scq, 0x7, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 8192, 128);
    qtest_memset(qts(&p.b), y.buf + 8192, 0x44, 64);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x8,
                 sge, 1, y.buf + 8192, k);
    dp_expect(&p.a, &x.scq, 0x8, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    g_assert_cmphex(qtest_readb(qts(&p.b), y.buf + 8192 + 63), ==, 0x44);
    dp_relink(&x, 1, &y, 2);
    mw_local_inv(&p.b, &y.qp, &y.scq, 0x9, k);

    /* C10-74: remote write or atomic rights over an MR without LOCAL_WRITE. */
    mw_bind_refused(&x, &y, 0xa, mw, mw_key_byte(mw, mw + 3), mr_ro,
                    y.buf + 8192, 4096, PIB_ACCESS_REMOTE_WRITE);
    mw_bind_refused(&x, &y, 0xb, mw, mw_key_byte(mw, mw + 4), mr_ro,
                    y.buf + 8192, 4096, PIB_ACCESS_REMOTE_ATOMIC);
    /* C10-73: no MW_BIND on the MR (y.key is the buffer's plain MR). */
    mw_bind_refused(&x, &y, 0xc, mw, mw_key_byte(mw, mw + 5), y.key,
                    y.buf, 4096, PIB_ACCESS_REMOTE_READ);
    /* A bit that is neither remote nor local (zero-based, 0x20) fails. */
    mw_bind_refused(&x, &y, 0xd, mw, mw_key_byte(mw, mw + 6), mr_lw,
                    y.buf, 4096, PIB_ACCESS_REMOTE_READ | 0x20);

    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEALLOC_MW, mw), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, mr_lw), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, mr_ro), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/*
 * REREG_MR of key: mask, then pdn, access, and [addr, addr + len) mapped 1:1
 * (TRANS; pbl_addr 0: a page list made for it).
 */
static uint8_t dp_rereg_mr(PibDev *d, uint32_t key, uint32_t mask,
                           uint32_t pdn, uint32_t access, uint64_t addr,
                           uint64_t len, uint64_t pbl_addr)
{
    uint32_t npages = DIV_ROUND_UP((addr & 0xfff) + len, 4096);
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_REREG_MR,
        .in.rereg_mr = {
            .key = cpu_to_le32(key),
            .mask = cpu_to_le32(mask),
            .pdn = cpu_to_le32(pdn),
            .access = cpu_to_le32(access),
            .iova = cpu_to_le64(addr),
            .length = cpu_to_le64(len),
            .pbl_addr = cpu_to_le64(pbl_addr ? pbl_addr :
                                    dp_pbl(d, addr & ~0xfffull, npages)),
            .npages = cpu_to_le32(npages),
        },
    };

    return pib_cmd(d, &cmd, NULL);
}

/* A signalled RDMA WRITE of 64 bytes x -> y at raddr through rkey, checked. */
static void dp_write_expect(TestEnd *x, TestEnd *y, uint64_t wr_id,
                            uint64_t raddr, uint32_t rkey, uint8_t status)
{
    struct pib_sge sge = dp_sge(x->buf, 64, x->key);

    dp_fill(x->d, x->buf, 64, wr_id);
    dp_post_send(x->d, &x->qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, wr_id,
                 &sge, 1, raddr, rkey);
    dp_expect(x->d, &x->scq, wr_id, status, PIB_CQE_RDMA_WRITE, NULL);
    if (status == PIB_WC_SUCCESS) {
        dp_assert_same(x->d, x->buf, y->d, raddr, 64);
    } else {
        dp_relink(x, 1, y, 2);
    }
}

/*
 * REREG_MR: an MR's access, translation and PD change in place under the same
 * keys, and the next remote access sees exactly the new MR; anything invalid
 * (or a bound window) changes nothing.
 */
static void test_dp_mr_rereg(void)
{
    TestPair p;
    TestEnd x, y;
    uint32_t mr, mr2, pd2, mw, fr;
    const uint32_t lw = PIB_ACCESS_LOCAL_WRITE;
    const uint32_t rw = lw | PIB_ACCESS_REMOTE_WRITE;
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe acqe;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 4096);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);
    mr = dp_reg_mr(&p.b, y.pdn, rw | PIB_ACCESS_MW_BIND, y.buf, 4096);
    dp_write_expect(&x, &y, 0x1, y.buf + 100, mr, PIB_WC_SUCCESS);

    /* Access without remote write: the WRITE fails, memory untouched. */
    g_assert_cmpuint(dp_rereg_mr(&p.b, mr, PIB_REREG_ACCESS, 0, lw, 0, 0, 0),
                     ==, PIB_AQ_OK);
    qtest_memset(qts(&p.b), y.buf + 200, 0x66, 64);
    dp_write_expect(&x, &y, 0x2, y.buf + 200, mr, PIB_WC_REM_ACCESS_ERR);
    g_assert_cmphex(qtest_readb(qts(&p.b), y.buf + 200), ==, 0x66);

    /* Access back and a new translation: the same keys, the new pages. */
    g_assert_cmpuint(dp_rereg_mr(&p.b, mr, PIB_REREG_ACCESS | PIB_REREG_TRANS,
                                 0, rw | PIB_ACCESS_MW_BIND, y.buf + 8192,
                                 4096, 0), ==, PIB_AQ_OK);
    dp_write_expect(&x, &y, 0x3, y.buf + 8192 + 300, mr, PIB_WC_SUCCESS);
    qtest_memset(qts(&p.b), y.buf + 300, 0x77, 64);
    dp_write_expect(&x, &y, 0x4, y.buf + 300, mr, PIB_WC_REM_ACCESS_ERR);
    g_assert_cmphex(qtest_readb(qts(&p.b), y.buf + 300), ==, 0x77);

    /* Another PD: the QP's PD no longer matches. */
    pd2 = dp_create_pd(&p.b);
    g_assert_cmpuint(dp_rereg_mr(&p.b, mr, PIB_REREG_PD, pd2, 0, 0, 0, 0), ==,
                     PIB_AQ_OK);
    dp_write_expect(&x, &y, 0x5, y.buf + 8192, mr, PIB_WC_REM_ACCESS_ERR);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_PD, pd2), ==,
                     PIB_AQ_BUSY);
    g_assert_cmpuint(dp_rereg_mr(&p.b, mr, PIB_REREG_PD, y.pdn, 0, 0, 0, 0),
                     ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_PD, pd2), ==, PIB_AQ_OK);
    dp_write_expect(&x, &y, 0x6, y.buf + 8192, mr, PIB_WC_SUCCESS);

    /* Refused, and the MR as it was (the last WRITE works again). */
    g_assert_cmpuint(dp_rereg_mr(&p.b, mr + 0x100, PIB_REREG_ACCESS, 0, lw, 0,
                                 0, 0), ==, PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_rereg_mr(&p.b, mr, 0, 0, lw, 0, 0, 0), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_rereg_mr(&p.b, mr, 0x8, 0, lw, 0, 0, 0), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_rereg_mr(&p.b, mr, PIB_REREG_ACCESS, 0,
                                 PIB_ACCESS_REMOTE_WRITE, 0, 0, 0), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_rereg_mr(&p.b, mr, PIB_REREG_ACCESS | PIB_REREG_PD,
                                 y.pdn + 100, lw, 0, 0, 0), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_rereg_mr(&p.b, mr, PIB_REREG_TRANS | PIB_REREG_ACCESS,
                                 0, lw, y.buf, 0, 0), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_rereg_mr(&p.b, mr, PIB_REREG_TRANS | PIB_REREG_ACCESS,
                                 0, lw, y.buf, 4096, 1ull << 60), ==,
                     PIB_AQ_DMA_ERROR);
    dp_write_expect(&x, &y, 0x7, y.buf + 8192 + 8, mr, PIB_WC_SUCCESS);

    /* A bound window holds the MR as it is; fast-registration MRs are not. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_ALLOC_MW,
        .in.alloc_mw = { .pdn = cpu_to_le32(y.pdn), .type = cpu_to_le32(2) },
    };
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    mw = le32_to_cpu(acqe.result0);
    dp_post_bind(&p.b, &y.qp, 0x8, 2, mw, mw_key_byte(mw, mw + 1), mr,
                 y.buf + 8192, 64, PIB_ACCESS_REMOTE_WRITE);
    dp_expect(&p.b, &y.scq, 0x8, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    g_assert_cmpuint(dp_rereg_mr(&p.b, mr, PIB_REREG_ACCESS, 0, lw, 0, 0, 0),
                     ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEALLOC_MW, mw), ==, PIB_AQ_OK);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_ALLOC_MR,
        .in.alloc_mr = { .pdn = cpu_to_le32(y.pdn),
                         .max_num_sg = cpu_to_le32(4) },
    };
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    fr = le32_to_cpu(acqe.result0);
    g_assert_cmpuint(dp_rereg_mr(&p.b, fr, PIB_REREG_ACCESS, 0, lw, 0, 0, 0),
                     ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, fr), ==, PIB_AQ_OK);

    /* A second MR rereg'd to a two-page range: its budget follows. */
    mr2 = dp_reg_mr(&p.b, y.pdn, rw, y.buf, 100);
    g_assert_cmpuint(dp_rereg_mr(&p.b, mr2, PIB_REREG_TRANS, 0, 0,
                                 y.buf + 4000, 200, 0), ==, PIB_AQ_OK);
    dp_write_expect(&x, &y, 0x9, y.buf + 4090, mr2, PIB_WC_SUCCESS);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, mr2), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, mr), ==, PIB_AQ_OK);
    dp_pair_down(&p);
}

/* A signalled REG_MR WQE, rung. */
static void frwr_post(PibDev *d, TestQp *qp, uint64_t wr_id, uint32_t key,
                      uint64_t iova, uint64_t length, uint64_t pbl,
                      uint32_t npages, uint32_t access, uint8_t page_shift)
{
    struct pib_reg_mr_wqe r = {
        .opcode = PIB_WQE_REG_MR,
        .flags = PIB_WQE_F_SIGNALED,
        .page_shift = page_shift,
        .key = cpu_to_le32(key),
        .wr_id = cpu_to_le64(wr_id),
        .iova = cpu_to_le64(iova),
        .length = cpu_to_le64(length),
        .pbl_addr = cpu_to_le64(pbl),
        .npages = cpu_to_le32(npages),
        .access = cpu_to_le32(access),
    };

    dp_post_send_raw(d, qp, (struct pib_send_wqe *)&r, NULL, 0, true);
}

static uint8_t frwr_alloc(PibDev *d, uint32_t pdn, uint32_t max_num_sg,
                          uint32_t *key)
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_ALLOC_MR,
        .in.alloc_mr.pdn = cpu_to_le32(pdn),
        .in.alloc_mr.max_num_sg = cpu_to_le32(max_num_sg),
    };
    struct pib_admin_cqe acqe;
    uint8_t status = pib_cmd(d, &cmd, &acqe);

    if (key) {
        *key = le32_to_cpu(acqe.result0);
    }
    return status;
}

/*
 * Fast registration (FRWR, as NVMe-oF, NFS/RDMA, iSER and SRP use it):
 * ALLOC_MR, then REG_MR WQEs on scattered pages at a made-up iova, remote
 * access through the new key, LOCAL_INV, and every way a REG_MR can fail,
 * each leaving the MR as it was.
 */
static void test_dp_frwr(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge[1];
    uint32_t fr, k, pd2, fr2;
    uint64_t pbl, bad_pbl;
    const uint64_t iova = 0x7f0000000123ull;
    const uint32_t rw = PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_REMOTE_WRITE |
                        PIB_ACCESS_REMOTE_READ;
    uint64_t page[2];

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);

    /* ALLOC_MR: a PD, and 1..max_fast_reg_pages pages. */
    g_assert_cmpuint(frwr_alloc(&p.b, y.pdn, 0, NULL), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(frwr_alloc(&p.b, y.pdn, PIB_MAX_FAST_REG_PAGES + 1, NULL),
                     ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(frwr_alloc(&p.b, 999, 4, NULL), ==, PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(frwr_alloc(&p.b, y.pdn, 4, &fr), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_PD, y.pdn), ==,
                     PIB_AQ_BUSY);

    /* Not registered yet: its key grants nothing. */
    sge[0] = dp_sge(x.buf, 64, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x1,
                 sge, 1, iova, fr);
    dp_expect(&p.a, &x.scq, 0x1, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    dp_relink(&x, 1, &y, 2);

    /*
     * Register two scattered pages, the fourth page of y's buffer then the
     * second, at iova, with a new key byte.
     */
    page[0] = cpu_to_le64(y.buf + 3 * 4096);
    page[1] = cpu_to_le64(y.buf + 1 * 4096);
    pbl = dp_alloc(&p.b, 4096);
    qtest_memwrite(qts(&p.b), pbl, page, sizeof(page));
    k = mw_key_byte(fr, fr + 1);
    frwr_post(&p.b, &y.qp, 0x2, k, iova, 2 * 4096 - 0x123, pbl, 2, rw, 12);
    dp_expect(&p.b, &y.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_REG_MR, NULL);

    /* The peer WRITEs 300 bytes across the page boundary, and READs them. */
    dp_fill(&p.a, x.buf, 300, 51);
    qtest_memset(qts(&p.b), y.buf, 0, 16384);
    sge[0] = dp_sge(x.buf, 300, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x3,
                 sge, 1, iova + 4091 - 0x123, k);
    dp_expect(&p.a, &x.scq, 0x3, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 3 * 4096 + 4091, 5);
    dp_assert_same(&p.a, x.buf + 5, &p.b, y.buf + 1 * 4096, 295);
    g_assert_cmphex(qtest_readb(qts(&p.b), y.buf + 2 * 4096), ==, 0);
    sge[0] = dp_sge(x.buf + 4096, 300, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x4,
                 sge, 1, iova + 4091 - 0x123, k);
    dp_expect(&p.a, &x.scq, 0x4, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    dp_assert_same(&p.a, x.buf, &p.a, x.buf + 4096, 300);
    /* The old key, and past the registered length: access errors. */
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x5,
                 sge, 1, iova, fr);
    dp_expect(&p.a, &x.scq, 0x5, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_READ,
              NULL);
    dp_relink(&x, 1, &y, 2);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x6,
                 sge, 1, iova + 2 * 4096 - 0x123 - 299, k);
    dp_expect(&p.a, &x.scq, 0x6, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_READ,
              NULL);
    dp_relink(&x, 1, &y, 2);

    /* A valid MR is not registered again: LOCAL_INV first. */
    frwr_post(&p.b, &y.qp, 0x7, mw_key_byte(k, k + 1), iova, 4096, pbl, 1,
              rw, 12);
    dp_expect(&p.b, &y.scq, 0x7, PIB_WC_LOC_PROT_ERR, PIB_CQE_REG_MR, NULL);
    dp_relink(&x, 1, &y, 2);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x8,
                 sge, 1, iova + 4091 - 0x123, k);
    dp_expect(&p.a, &x.scq, 0x8, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    {
        struct pib_send_wqe inv = {
            .opcode = PIB_WQE_LOCAL_INV,
            .flags = PIB_WQE_F_SIGNALED,
            .wr_id = cpu_to_le64(0x9),
            .imm_inv = cpu_to_le32(k),
        };
        dp_post_send_raw(&p.b, &y.qp, &inv, NULL, 0, true);
    }
    dp_expect(&p.b, &y.scq, 0x9, PIB_WC_SUCCESS, PIB_CQE_LOCAL_INV, NULL);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0xa,
                 sge, 1, iova + 4091 - 0x123, k);
    dp_expect(&p.a, &x.scq, 0xa, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_READ,
              NULL);
    dp_relink(&x, 1, &y, 2);

    /* Each bad REG_MR: the error, the QP in ERR, the MR still invalid. */
    bad_pbl = dp_alloc(&p.b, 4096);
    qtest_writeq(qts(&p.b), bad_pbl, y.buf + 100);          /* unaligned */
    struct {
        uint32_t key;
        uint64_t length;
        uint64_t pbl;
        uint32_t npages, access;
        uint8_t page_shift, status;
    } bad[] = {
        { y.key, 4096, pbl, 1, rw, 12, PIB_WC_LOC_PROT_ERR },  /* not fast-reg */
        { k, 4096, pbl, 1, rw, 13, PIB_WC_LOC_PROT_ERR },      /* page size */
        { k, 4096, pbl, 1, PIB_ACCESS_REMOTE_WRITE, 12,
          PIB_WC_LOC_PROT_ERR },                               /* no local write */
        { k, 4096, pbl, 1, 0x8000, 12, PIB_WC_LOC_PROT_ERR },  /* unknown access */
        { k, 5 * 4096, pbl, 5, rw, 12, PIB_WC_LOC_LEN_ERR },   /* > max_num_sg */
        { k, 2 * 4096, pbl, 1, rw, 12, PIB_WC_LOC_LEN_ERR },   /* past the pages */
        { k, 0, pbl, 1, rw, 12, PIB_WC_LOC_LEN_ERR },          /* empty */
        { k, 4096, bad_pbl, 1, rw, 12, PIB_WC_LOC_PROT_ERR },  /* unaligned page */
        { k, 4096, 0xfff0000000000000ull, 1, rw, 12,
          PIB_WC_LOC_PROT_ERR },                               /* list not RAM */
    };
    for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
        frwr_post(&p.b, &y.qp, 0x10 + i, bad[i].key, 0, bad[i].length,
                  bad[i].pbl, bad[i].npages, bad[i].access, bad[i].page_shift);
        dp_expect(&p.b, &y.scq, 0x10 + i, bad[i].status, PIB_CQE_REG_MR,
                  NULL);
        g_assert_cmpuint(dp_query_qp(&p.b, y.qp.qpn).qp_state, ==,
                         PIB_QPS_ERR);
        dp_relink(&x, 1, &y, 2);
        dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED,
                     0x30 + i, sge, 1, 0, k);
        dp_expect(&p.a, &x.scq, 0x30 + i, PIB_WC_REM_ACCESS_ERR,
                  PIB_CQE_RDMA_READ, NULL);
        dp_relink(&x, 1, &y, 2);
    }
    /* The plain MR the first one named is untouched. */
    sge[0] = dp_sge(x.buf, 64, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x40,
                 sge, 1, y.buf, y.key);
    dp_expect(&p.a, &x.scq, 0x40, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);

    /* An MR of another PD is not this QP's to register. */
    pd2 = dp_create_pd(&p.b);
    g_assert_cmpuint(frwr_alloc(&p.b, pd2, 1, &fr2), ==, PIB_AQ_OK);
    frwr_post(&p.b, &y.qp, 0x41, fr2, 0, 4096, pbl, 1, rw, 12);
    dp_expect(&p.b, &y.scq, 0x41, PIB_WC_LOC_PROT_ERR, PIB_CQE_REG_MR, NULL);
    dp_relink(&x, 1, &y, 2);

    /* Registered again, read-only this time: a remote WRITE is refused. */
    k = mw_key_byte(k, k + 1);
    frwr_post(&p.b, &y.qp, 0x42, k, 0x1000, 4096, pbl, 1,
              PIB_ACCESS_REMOTE_READ, 12);
    dp_expect(&p.b, &y.scq, 0x42, PIB_WC_SUCCESS, PIB_CQE_REG_MR, NULL);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x43,
                 sge, 1, 0x1000, k);
    dp_expect(&p.a, &x.scq, 0x43, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    dp_relink(&x, 1, &y, 2);

    /*
     * DEREG_MR names a fast-reg MR by its index, whatever the key byte: the
     * consumer's may be a REG_MR's that never ran.  Then the PD can go.
     */
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, mw_key_byte(k, k + 9)),
                     ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, k), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, fr2), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_PD, pd2), ==, PIB_AQ_OK);
    /* The one guest error: the page list outside RAM. */
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 1);
    g_assert_cmpuint(rd(&p.b, PIB_REG_ERR_LAST), ==, PIB_GERR_DMA);
    dp_pair_down(&p);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    qtest_add_func("/pib/data/rdma", test_dp_rdma);
    qtest_add_func("/pib/data/read-order", test_dp_read_order);
    qtest_add_func("/pib/data/atomic-write", test_dp_atomic_write);
    qtest_add_func("/pib/data/flush", test_dp_flush);
    qtest_add_func("/pib/data/mw", test_dp_mw);
    qtest_add_func("/pib/data/mw-rules", test_dp_mw_rules);
    qtest_add_func("/pib/data/mr-rereg", test_dp_mr_rereg);
    qtest_add_func("/pib/data/frwr", test_dp_frwr);

    return g_test_run();
}
