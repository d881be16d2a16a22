/*
 * QTest: the pib HCA's RC transport rules, one packet at a time (hw/pib)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The test is the remote HCA (pib-qtest.h's wp_* peer, LID WP_LID, QP WP_QPN)
 * of a device at LID 1, so it sees every packet the device sends and chooses
 * every answer.  Each test checks one rule of the IBTA's RC transport (chapter
 * 9) where a wrong answer would still let ordinary traffic between two pib
 * devices work:
 *
 *   /pib/transport/responder/psn-gap      a request one PSN ahead: sequence NAK
 *   /pib/transport/responder/access       WRITE/READ without the QP's or the MR's
 *                                         right, or one byte past the MR: access
 *                                         NAK, memory untouched
 *   /pib/transport/responder/write-length a WRITE whose LAST packet is short
 *   /pib/transport/responder/mw-type2     a type 2 window used from another QP
 *   /pib/transport/requester/rnr-retry    rnr_retry 3: exactly 4 tries
 *   /pib/transport/requester/rd-atomic    max_rd_atomic credits, and the fence
 *   /pib/transport/requester/stale        responses for an acknowledged PSN
 *   /pib/transport/requester/read-length  a READ response of the wrong length
 *   /pib/transport/requester/inline       inline data over the QP's max_inline
 *   /pib/transport/modify/retry-cnt       retry_cnt and rnr_retry are 3 bits
 *   /pib/transport/cc                     congestion control: a request with FECN
 *                                         is acknowledged with BECN; each BECN
 *                                         raises the requester's index, whose
 *                                         table entry then spaces its packets;
 *                                         the event log, and the index's timer
 *   /pib/transport/cnp                    UD and UC: FECN is answered with a CNP;
 *                                         a CNP raises the UD sender's index (log,
 *                                         spacing); a CNP to RC or with payload
 *                                         is dropped and counted
 *
 * The device's IB timers (RNR, ACK timeout) run on the virtual clock, which
 * only the test moves (qtest_clock_step), so every retry is counted, not
 * timed.  "Nothing comes" is wp_expect_nothing's short look, as in
 * pib-wire-test; TIMEOUT_US is only a hang guard.
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-transport-test
 */

#include "qemu/osdep.h"

#include "pib-qtest.h"

#define TP_RQ_PSN       100     /* wp_qp_rtr: the first PSN the device expects */
#define TP_SQ_PSN       500     /* tp_rts: the first PSN the device sends */

/* One device, its port up, the test on its cable. */
typedef struct Tp {
    PeerLink l;
    PibDev d;
    int fd;
} Tp;

static void tp_up(Tp *t)
{
    t->fd = peer_dev_up(&t->l, &t->d);
}

/* Nothing the tests did was the guest's mistake, unless the test said so. */
static void tp_down(Tp *t, uint32_t guest_errors)
{
    g_assert_cmpuint(dp_err_count(&t->d), ==, guest_errors);
    close(t->fd);
    pib_close(&t->d);
    peer_shutdown(&t->l);
}

/* RTR -> RTS with the requester's limits a test is about. */
static void tp_rts(PibDev *d, uint32_t qpn, uint8_t max_rd_atomic,
                   uint8_t rnr_retry)
{
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_SQ_PSN | PIB_QP_TIMEOUT |
                                 PIB_QP_RETRY_CNT | PIB_QP_RNR_RETRY |
                                 PIB_QP_MAX_QP_RD_ATOMIC),
        .qp_state = PIB_QPS_RTS,
        .sq_psn = cpu_to_le32(TP_SQ_PSN),
        .timeout = 14,
        .retry_cnt = 7,
        .rnr_retry = rnr_retry,
        .max_rd_atomic = max_rd_atomic,
    };

    g_assert_cmpuint(dp_modify(d, qpn, &a), ==, PIB_AQ_OK);
}

/*
 * A fresh RC QP (its own PD, MR over a 16 KiB buffer with every right, CQs)
 * connected to the peer, which now talks to it.  An error moves an RC QP to
 * ERR, so each case that ends in one starts with its own.
 */
static void tp_end(Tp *t, TestEnd *e, uint32_t qp_access, uint8_t max_rd_atomic,
                   uint8_t rnr_retry)
{
    dp_end(&t->d, e, PIB_QPT_RC, 16384);
    wp_dqpn = e->qp.qpn;
    wp_qp_rtr(&t->d, e->qp.qpn, qp_access, 4);
    tp_rts(&t->d, e->qp.qpn, max_rd_atomic, rnr_retry);
}

/* A RETH: virtual address, rkey, DMA length. */
static void tp_reth(uint8_t *ext, uint64_t va, uint32_t rkey, uint32_t len)
{
    stq_be_p(ext, va);
    stl_be_p(ext + 8, rkey);
    stl_be_p(ext + 12, len);
}

/*
 * The next packet is an ACKNOWLEDGE for psn: an ACK (PIB_AETH_ACK: whatever
 * its credit count), or the NAK this AETH syndrome names.
 */
static void tp_expect_ack(Tp *t, uint32_t psn, uint8_t syndrome)
{
    WirePkt w;

    wp_expect(t->fd, &w, PIB_OP_RC_ACKNOWLEDGE, psn);
    if (syndrome == PIB_AETH_ACK) {
        g_assert_cmphex(w.syndrome & PIB_AETH_TYPE_MASK, ==, PIB_AETH_ACK);
    } else {
        g_assert_cmphex(w.syndrome, ==, syndrome);
    }
}

/* An RDMA WRITE ONLY of len bytes of pattern seed, asking for an ACK. */
static void tp_write_only(Tp *t, uint32_t psn, uint64_t va, uint32_t rkey,
                          uint32_t len, uint8_t seed)
{
    uint8_t ext[16], data[256];

    g_assert_cmpuint(len, <=, sizeof(data));
    memset(data, seed, len);
    tp_reth(ext, va, rkey, len);
    wp_send(t->fd, PIB_OP_RC_RDMA_WRITE_ONLY, psn, true, ext, 16, data, len);
}

/* The responder refused qpn's request: an access NAK for psn, and its QP's event. */
static void tp_expect_access_nak(Tp *t, uint32_t qpn, uint32_t psn)
{
    tp_expect_ack(t, psn, PIB_AETH_NAK | PIB_NAK_REM_ACCESS_ERR);
    g_assert_true(dp_aeq_find(&t->d, PIB_AE_QP_ACCESS_ERR, qpn));
    g_assert_cmpuint(dp_query_qp(&t->d, qpn).qp_state, ==, PIB_QPS_ERR);
}

/* len bytes at addr all hold byte b. */
static void tp_assert_bytes(PibDev *d, uint64_t addr, uint32_t len, uint8_t b)
{
    g_autofree uint8_t *got = g_malloc(len);
    uint32_t i;

    qtest_memread(qts(d), addr, got, len);
    for (i = 0; i < len; i++) {
        g_assert_cmphex(got[i], ==, b);
    }
}

/*
 * The responder
 */

/*
 * IBTA 9.7.5.1.2: a request whose PSN is ahead of the expected one, even by
 * one, means a lost packet: a PSN sequence error NAK naming the expected PSN,
 * nothing delivered; the request resent in order is then taken.
 */
static void test_resp_psn_gap(void)
{
    struct pib_sge sge;
    struct pib_cqe cqe;
    TestEnd x;
    Tp t;

    tp_up(&t);
    tp_end(&t, &x, PIB_ACCESS_REMOTE_WRITE, 4, 7);
    sge = dp_sge(x.buf, 64, x.key);
    dp_post_recv(&t.d, &x.qp, 0x1, &sge, 1);
    dp_post_recv(&t.d, &x.qp, 0x2, &sge, 1);

    wp_send_only(t.fd, TP_RQ_PSN + 1, "ahead");
    tp_expect_ack(&t, TP_RQ_PSN, PIB_AETH_NAK | PIB_NAK_PSN_SEQ_ERR);
    dp_expect_none(&t.d, &x.rcq);

    wp_send_only(t.fd, TP_RQ_PSN, "first");
    tp_expect_ack(&t, TP_RQ_PSN, PIB_AETH_ACK);
    dp_expect(&t.d, &x.rcq, 0x1, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 5);
    wp_send_only(t.fd, TP_RQ_PSN + 1, "second");
    tp_expect_ack(&t, TP_RQ_PSN + 1, PIB_AETH_ACK);
    dp_expect(&t.d, &x.rcq, 0x2, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 6);
    tp_down(&t, 0);
}

/*
 * IBTA 9.7.5.2.4 / C9-86: a remote access error NAK, and the memory left as
 * it was, when the QP does not grant the operation (its access flags), when
 * the MR the rkey names does not (its own rights), or when the range reaches
 * one byte past the MR.  The responder's QP goes to ERR with the affiliated
 * async event "local access violation" (11.6.3.1), found at the request:
 * nothing of it was answered.  Each case on a fresh QP.
 */
static void test_resp_access(void)
{
    const uint32_t all = PIB_ACCESS_REMOTE_WRITE | PIB_ACCESS_REMOTE_READ |
                         PIB_ACCESS_REMOTE_ATOMIC;
    uint8_t ext[16];
    uint32_t key;
    TestEnd x;
    Tp t;

    tp_up(&t);

    /* The QP grants READ only: a WRITE to an MR that allows it is refused. */
    tp_end(&t, &x, PIB_ACCESS_REMOTE_READ, 4, 7);
    qtest_memset(qts(&t.d), x.buf, 0x11, 64);
    tp_write_only(&t, TP_RQ_PSN, x.buf, x.key, 64, 0xee);
    tp_expect_access_nak(&t, x.qp.qpn, TP_RQ_PSN);
    tp_assert_bytes(&t.d, x.buf, 64, 0x11);

    /* The QP grants everything, the MR no remote write. */
    tp_end(&t, &x, all, 4, 7);
    key = dp_reg_mr(&t.d, x.pdn, PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_REMOTE_READ,
                    x.buf, 4096);
    qtest_memset(qts(&t.d), x.buf, 0x22, 64);
    tp_write_only(&t, TP_RQ_PSN, x.buf, key, 64, 0xee);
    tp_expect_access_nak(&t, x.qp.qpn, TP_RQ_PSN);
    tp_assert_bytes(&t.d, x.buf, 64, 0x22);

    /* ... the MR no remote read: no READ response, an access NAK. */
    tp_end(&t, &x, all, 4, 7);
    key = dp_reg_mr(&t.d, x.pdn, PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_REMOTE_WRITE,
                    x.buf, 4096);
    tp_reth(ext, x.buf, key, 64);
    wp_send(t.fd, PIB_OP_RC_RDMA_READ_REQUEST, TP_RQ_PSN, false, ext, 16, NULL, 0);
    tp_expect_access_nak(&t, x.qp.qpn, TP_RQ_PSN);

    /*
     * An MR of 100 bytes: 8 bytes ending at its last byte land; 8 bytes ending
     * one past it are refused, and neither that byte nor the MR changes.
     */
    tp_end(&t, &x, all, 4, 7);
    key = dp_reg_mr(&t.d, x.pdn, PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_REMOTE_WRITE,
                    x.buf, 100);
    qtest_memset(qts(&t.d), x.buf, 0x33, 128);
    tp_write_only(&t, TP_RQ_PSN, x.buf + 92, key, 8, 0xee);
    tp_expect_ack(&t, TP_RQ_PSN, PIB_AETH_ACK);
    tp_assert_bytes(&t.d, x.buf + 92, 8, 0xee);
    tp_write_only(&t, TP_RQ_PSN + 1, x.buf + 93, key, 8, 0x77);
    tp_expect_access_nak(&t, x.qp.qpn, TP_RQ_PSN + 1);
    tp_assert_bytes(&t.d, x.buf + 92, 8, 0xee);
    tp_assert_bytes(&t.d, x.buf + 100, 28, 0x33);
    tp_down(&t, 0);
}

/*
 * IBTA 9.7.5.1.3 (C9-25): the packets of a WRITE carry exactly the DMA length
 * its RETH announced.  A LAST packet with fewer bytes than remain is an
 * invalid request NAK, not a completed WRITE.
 */
static void test_resp_write_length(void)
{
    uint8_t ext[16], data[256];
    TestEnd x;
    Tp t;

    tp_up(&t);
    tp_end(&t, &x, PIB_ACCESS_REMOTE_WRITE, 4, 7);
    memset(data, 0xa5, sizeof(data));

    /* 512 bytes in two packets of 256 (the path MTU): acknowledged. */
    tp_reth(ext, x.buf, x.key, 512);
    wp_send(t.fd, PIB_OP_RC_RDMA_WRITE_FIRST, TP_RQ_PSN, false, ext, 16, data, 256);
    wp_send(t.fd, PIB_OP_RC_RDMA_WRITE_LAST, TP_RQ_PSN + 1, true, NULL, 0, data, 256);
    tp_expect_ack(&t, TP_RQ_PSN + 1, PIB_AETH_ACK);
    tp_assert_bytes(&t.d, x.buf, 512, 0xa5);

    /* The same, its LAST 100 bytes short. */
    tp_reth(ext, x.buf + 4096, x.key, 512);
    wp_send(t.fd, PIB_OP_RC_RDMA_WRITE_FIRST, TP_RQ_PSN + 2, false, ext, 16, data, 256);
    wp_send(t.fd, PIB_OP_RC_RDMA_WRITE_LAST, TP_RQ_PSN + 3, true, NULL, 0, data, 156);
    tp_expect_ack(&t, TP_RQ_PSN + 3, PIB_AETH_NAK | PIB_NAK_INVALID_REQ);
    g_assert_cmpuint(dp_query_qp(&t.d, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    tp_down(&t, 0);
}

/*
 * IBTA 10.6.7.2 (C10-70...): a type 2 window is bound to one QP, and only
 * requests arriving on that QP may use it.  Two QPs of one PD, the window
 * bound through the first: a WRITE through it lands on the first, and is an
 * access NAK on the second, memory untouched.
 */
static void test_resp_mw_type2(void)
{
    const uint32_t rw = PIB_ACCESS_REMOTE_WRITE | PIB_ACCESS_REMOTE_READ;
    uint32_t mr, mw, k;
    TestQp other;
    TestEnd x;
    Tp t;

    tp_up(&t);
    tp_end(&t, &x, rw, 4, 7);
    dp_create_qp(&t.d, PIB_QPT_RC, x.pdn, &x.scq, &x.rcq, &other);
    wp_qp_rtr(&t.d, other.qpn, rw, 4);
    tp_rts(&t.d, other.qpn, 4, 7);

    mr = dp_reg_mr(&t.d, x.pdn, PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_MW_BIND,
                   x.buf, 8192);
    mw = dp_alloc_mw(&t.d, x.pdn, 2);
    k = (mw & ~0xffu) | ((mw + 1) & 0xff);
    dp_post_bind(&t.d, &x.qp, 0x1, 2, mw, k, mr, x.buf, 4096, rw);
    dp_expect(&t.d, &x.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    qtest_memset(qts(&t.d), x.buf, 0x11, 256);

    wp_dqpn = x.qp.qpn;
    tp_write_only(&t, TP_RQ_PSN, x.buf, k, 64, 0xee);
    tp_expect_ack(&t, TP_RQ_PSN, PIB_AETH_ACK);
    tp_assert_bytes(&t.d, x.buf, 64, 0xee);

    wp_dqpn = other.qpn;
    tp_write_only(&t, TP_RQ_PSN, x.buf + 128, k, 64, 0xdd);
    tp_expect_access_nak(&t, other.qpn, TP_RQ_PSN);
    tp_assert_bytes(&t.d, x.buf + 128, 128, 0x11);
    tp_down(&t, 0);
}

/*
 * The requester
 */

/*
 * IBTA 9.7.5.2.8 (C9-145): rnr_retry 3 allows three retries after the first
 * try: four SENDs, each RNR NAKed, then RNR_RETRY_EXC_ERR and the QP in ERR,
 * and no fifth try.  Each resend waits for the RNR timer the NAK names.
 */
static void test_req_rnr_retry(void)
{
    uint64_t cnt[PIB_CNT_MAX];
    struct pib_sge sge;
    TestEnd x;
    WirePkt w;
    int i;
    Tp t;

    tp_up(&t);
    tp_end(&t, &x, 0, 4, 3);
    sge = dp_sge(x.buf, 10, x.key);
    dp_post_send(&t.d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x1, &sge, 1,
                 0, 0);
    for (i = 0; i < 4; i++) {
        if (i > 0) {
            /* Not before the RNR timer (code 1: 0.01 ms) has run out. */
            wp_expect_nothing(t.fd);
            qtest_clock_step(qts(&t.d), 1000 * 1000);
        }
        wp_expect(t.fd, &w, PIB_OP_RC_SEND_ONLY, TP_SQ_PSN);
        wp_ack(t.fd, TP_SQ_PSN, PIB_AETH_RNR_NAK | 1);
    }
    dp_expect(&t.d, &x.scq, 0x1, PIB_WC_RNR_RETRY_EXC_ERR, PIB_CQE_SEND, NULL);
    g_assert_cmpuint(dp_query_qp(&t.d, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    qtest_clock_step(qts(&t.d), 100 * 1000 * 1000);
    wp_expect_nothing(t.fd);
    dp_counters(&t.d, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_RNR_NAKS_RCVD], ==, 4);
    tp_down(&t, 0);
}

/* Post a READ of len bytes into x's buffer at off, from the peer's va. */
static void tp_post_read(PibDev *d, TestEnd *x, uint64_t wr_id, uint32_t off,
                         uint32_t len, uint64_t va, bool ring)
{
    struct pib_send_wqe wqe = {
        .opcode = PIB_WQE_RDMA_READ, .flags = PIB_WQE_F_SIGNALED, .num_sge = 1,
        .wr_id = cpu_to_le64(wr_id), .remote_addr = cpu_to_le64(va),
        .rkey = cpu_to_le32(0x1234),
    };
    struct pib_sge sge = dp_sge(x->buf + off, len, x->key);

    dp_post_send_raw(d, &x->qp, &wqe, &sge, sizeof(sge), ring);
}

/* One READ RESPONSE ONLY for psn: len bytes of seed. */
static void tp_read_resp(Tp *t, uint32_t psn, uint32_t len, uint8_t seed)
{
    uint8_t aeth[4], data[256];

    g_assert_cmpuint(len, <=, sizeof(data));
    memset(data, seed, len);
    stl_be_p(aeth, (PIB_AETH_ACK | 0x1f) << 24);
    wp_send(t->fd, PIB_OP_RC_RDMA_READ_RESP_ONLY, psn, false, aeth, 4, data, len);
}

/* The next packet is a READ request for psn, of len bytes. */
static void tp_expect_read(Tp *t, uint32_t psn, uint32_t len)
{
    WirePkt w;

    wp_expect(t->fd, &w, PIB_OP_RC_RDMA_READ_REQUEST, psn);
    g_assert_cmpuint(w.dmalen, ==, len);
}

/*
 * IBTA 9.5 / 10.8.3.3: no more READs and atomics outstanding than
 * max_rd_atomic, each credit given back as one completes; and a fenced WQE
 * waits until every READ and atomic before it has completed (C10-68), while
 * an unfenced one does not.
 */
static void test_req_rd_atomic(void)
{
    struct pib_sge sge;
    TestEnd x;
    WirePkt w;
    Tp t;

    tp_up(&t);

    /* max_rd_atomic 1: READ, READ; the second waits for the first's answer. */
    tp_end(&t, &x, 0, 1, 7);
    tp_post_read(&t.d, &x, 0x1, 0, 64, 0x10000, false);
    tp_post_read(&t.d, &x, 0x2, 64, 64, 0x20000, true);
    tp_expect_read(&t, TP_SQ_PSN, 64);
    wp_expect_nothing(t.fd);
    tp_read_resp(&t, TP_SQ_PSN, 64, 0x31);
    dp_expect(&t.d, &x.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    tp_expect_read(&t, TP_SQ_PSN + 1, 64);
    tp_read_resp(&t, TP_SQ_PSN + 1, 64, 0x32);
    dp_expect(&t.d, &x.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    /* The credit came back again: a third goes out at once. */
    tp_post_read(&t.d, &x, 0x3, 128, 64, 0x30000, true);
    tp_expect_read(&t, TP_SQ_PSN + 2, 64);
    tp_read_resp(&t, TP_SQ_PSN + 2, 64, 0x33);
    dp_expect(&t.d, &x.scq, 0x3, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    tp_assert_bytes(&t.d, x.buf, 64, 0x31);
    tp_assert_bytes(&t.d, x.buf + 64, 64, 0x32);
    tp_assert_bytes(&t.d, x.buf + 128, 64, 0x33);

    /*
     * max_rd_atomic 4: a READ and an unfenced SEND go out together; a READ
     * and a fenced SEND: the SEND waits until every READ before it is done.
     */
    tp_end(&t, &x, 0, 4, 7);
    sge = dp_sge(x.buf + 4096, 10, x.key);
    tp_post_read(&t.d, &x, 0x4, 0, 64, 0x10000, false);
    dp_post_send(&t.d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x5, &sge, 1,
                 0, 0);
    tp_expect_read(&t, TP_SQ_PSN, 64);
    wp_expect(t.fd, &w, PIB_OP_RC_SEND_ONLY, TP_SQ_PSN + 1);
    tp_post_read(&t.d, &x, 0x6, 64, 64, 0x20000, false);
    dp_post_send(&t.d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED | PIB_WQE_F_FENCE,
                 0x7, &sge, 1, 0, 0);
    tp_expect_read(&t, TP_SQ_PSN + 2, 64);
    wp_expect_nothing(t.fd);
    /* The first READ and the SEND done: the second READ still holds the fence. */
    tp_read_resp(&t, TP_SQ_PSN, 64, 0x41);
    wp_ack(t.fd, TP_SQ_PSN + 1, PIB_AETH_ACK | 0x1f);
    dp_expect(&t.d, &x.scq, 0x4, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    dp_expect(&t.d, &x.scq, 0x5, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    wp_expect_nothing(t.fd);
    tp_read_resp(&t, TP_SQ_PSN + 2, 64, 0x42);
    dp_expect(&t.d, &x.scq, 0x6, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    wp_expect(t.fd, &w, PIB_OP_RC_SEND_ONLY, TP_SQ_PSN + 3);
    wp_ack(t.fd, TP_SQ_PSN + 3, PIB_AETH_ACK | 0x1f);
    dp_expect(&t.d, &x.scq, 0x7, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    tp_down(&t, 0);
}

/*
 * IBTA 9.7.5.1.6 / C9-112: a response whose PSN is older than the oldest
 * unacknowledged request is a duplicate and is ignored, whatever it says: a
 * stale NAK does not fail the next WQE, a stale RNR NAK does not make the
 * requester resend.
 */
static void test_req_stale(void)
{
    struct pib_sge sge;
    TestEnd x;
    WirePkt w;
    Tp t;

    tp_up(&t);
    tp_end(&t, &x, 0, 4, 7);
    sge = dp_sge(x.buf, 10, x.key);
    dp_post_send(&t.d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x1, &sge, 1,
                 0, 0);
    dp_post_send(&t.d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x2, &sge, 1,
                 0, 0);
    wp_expect(t.fd, &w, PIB_OP_RC_SEND_ONLY, TP_SQ_PSN);
    wp_expect(t.fd, &w, PIB_OP_RC_SEND_ONLY, TP_SQ_PSN + 1);
    wp_ack(t.fd, TP_SQ_PSN, PIB_AETH_ACK | 0x1f);
    dp_expect(&t.d, &x.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);

    /* Old news for the first SEND, already acknowledged. */
    wp_ack(t.fd, TP_SQ_PSN, PIB_AETH_NAK | PIB_NAK_REM_ACCESS_ERR);
    wp_ack(t.fd, TP_SQ_PSN, PIB_AETH_RNR_NAK | 1);
    dp_expect_none(&t.d, &x.scq);
    qtest_clock_step(qts(&t.d), 1000 * 1000);
    wp_expect_nothing(t.fd);
    g_assert_cmpuint(dp_query_qp(&t.d, x.qp.qpn).qp_state, ==, PIB_QPS_RTS);

    wp_ack(t.fd, TP_SQ_PSN + 1, PIB_AETH_ACK | 0x1f);
    dp_expect(&t.d, &x.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    tp_down(&t, 0);
}

/*
 * IBTA 9.7.5.1.5 (C9-106 ...): a READ's responses carry exactly the length it
 * asked for.  A response too short or too long is dropped, the buffer left as
 * it was; the right one then completes the READ.
 */
static void test_req_read_length(void)
{
    uint64_t cnt[PIB_CNT_MAX], drops;
    struct pib_cqe cqe;
    TestEnd x;
    Tp t;

    tp_up(&t);
    tp_end(&t, &x, 0, 4, 7);
    qtest_memset(qts(&t.d), x.buf, 0x5a, 256);
    tp_post_read(&t.d, &x, 0x1, 0, 100, 0x10000, true);
    tp_expect_read(&t, TP_SQ_PSN, 100);
    dp_counters(&t.d, cnt);
    drops = cnt[PIB_CNT_RX_DROP_LENGTH];

    tp_read_resp(&t, TP_SQ_PSN, 50, 0xc3);
    tp_read_resp(&t, TP_SQ_PSN, 120, 0xc3);
    dp_expect_none(&t.d, &x.scq);
    tp_assert_bytes(&t.d, x.buf, 256, 0x5a);
    dp_counters(&t.d, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_LENGTH] - drops, ==, 2);

    tp_read_resp(&t, TP_SQ_PSN, 100, 0xc3);
    dp_expect(&t.d, &x.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 100);
    tp_assert_bytes(&t.d, x.buf, 100, 0xc3);
    tp_assert_bytes(&t.d, x.buf + 100, 156, 0x5a);
    tp_down(&t, 0);
}

/*
 * Inline data up to the QP's max_inline (192 for the mini-driver's QPs) is
 * sent; one byte more is a local length error (LOC_LEN_ERR, a guest error the
 * device counts): the WQE would run past its slot.  Nothing goes out for it.
 */
static void test_req_inline(void)
{
    uint8_t data[192];
    struct pib_send_wqe wqe = {
        .opcode = PIB_WQE_SEND,
        .flags = PIB_WQE_F_SIGNALED | PIB_WQE_F_INLINE,
        .wr_id = cpu_to_le64(0x1),
        .inline_len = cpu_to_le32(sizeof(data)),
    };
    TestEnd x;
    WirePkt w;
    Tp t;

    tp_up(&t);
    tp_end(&t, &x, 0, 4, 7);
    memset(data, 0x6c, sizeof(data));
    dp_post_send_raw(&t.d, &x.qp, &wqe, data, sizeof(data), true);
    wp_expect(t.fd, &w, PIB_OP_RC_SEND_ONLY, TP_SQ_PSN);
    g_assert_cmpmem(w.payload, w.paylen, data, sizeof(data));
    wp_ack(t.fd, TP_SQ_PSN, PIB_AETH_ACK | 0x1f);
    dp_expect(&t.d, &x.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);

    wqe.wr_id = cpu_to_le64(0x2);
    wqe.inline_len = cpu_to_le32(sizeof(data) + 1);
    dp_post_send_raw(&t.d, &x.qp, &wqe, data, sizeof(data), true);
    dp_expect(&t.d, &x.scq, 0x2, PIB_WC_LOC_LEN_ERR, PIB_CQE_SEND, NULL);
    wp_expect_nothing(t.fd);
    tp_down(&t, 1);
}

/*
 * Modify QP
 */

/* retry_cnt and rnr_retry are 3-bit fields (IBTA 9.7.5.2.8, 11.2.4.2): 8 is refused. */
static void test_modify_retry_cnt(void)
{
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_SQ_PSN | PIB_QP_TIMEOUT |
                                 PIB_QP_RETRY_CNT | PIB_QP_RNR_RETRY |
                                 PIB_QP_MAX_QP_RD_ATOMIC),
        .qp_state = PIB_QPS_RTS,
        .timeout = 14,
        .retry_cnt = 8,
        .rnr_retry = 7,
        .max_rd_atomic = 1,
    };
    TestEnd x;
    Tp t;

    tp_up(&t);
    dp_end(&t.d, &x, PIB_QPT_RC, 4096);
    wp_qp_rtr(&t.d, x.qp.qpn, 0, 4);
    g_assert_cmpuint(dp_modify(&t.d, x.qp.qpn, &a), ==, PIB_AQ_BAD_PARAM);
    a.retry_cnt = 7;
    a.rnr_retry = 8;
    g_assert_cmpuint(dp_modify(&t.d, x.qp.qpn, &a), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_query_qp(&t.d, x.qp.qpn).qp_state, ==, PIB_QPS_RTR);
    a.rnr_retry = 7;
    g_assert_cmpuint(dp_modify(&t.d, x.qp.qpn, &a), ==, PIB_AQ_OK);
    a = dp_query_qp(&t.d, x.qp.qpn);
    g_assert_cmpuint(a.qp_state, ==, PIB_QPS_RTS);
    g_assert_cmpuint(a.retry_cnt, ==, 7);
    g_assert_cmpuint(a.rnr_retry, ==, 7);
    tp_down(&t, 0);
}

/*
 * Congestion control on the CA (IBTA Annex A10.2.2, A10.3; hca/pib-cca.c).  The responder: a
 * SEND that arrives with FECN is acknowledged with BECN, the next one without.  The
 * requester, with an SM's settings (SL-based; SL 0: CCTI_Increase 2, CCTI_Timer 1000 x 1.024
 * us, Trigger_Threshold 4; the table's entry i is 10 i packet times of 1.024 us, entry 4 as
 * 80 with a shift of 1): every ACK with BECN raises SL 0's index by 2, and a packet sent at
 * index i holds the next one back 10 i x 1.024 us of the virtual clock, which only the test
 * moves.  The index reaching 4 is in the CA's CongestionLog and in the cca-index property;
 * the timer then takes it down by one every 1.024 ms, and at 0 nothing is held back.
 */
static void tp_cc_set(PibDev *d, uint16_t attr, uint32_t mod, const void *data, size_t len)
{
    struct pib_cc_mad req = peer_cc_new(PIB_MAD_METHOD_SET, attr, mod, 0), resp;

    memcpy(req.data, data, len);
    g_assert_cmpuint(dp_mad_ifc(d, &req, &resp, false), ==, PIB_MAD_IFC_REPLY);
    g_assert_cmphex(resp.hdr.status_be, ==, 0);
}

/*
 * An SM's settings for SL 0 (CCTI_Increase 2, CCTI_Timer 1000 x 1.024 us, this
 * Trigger_Threshold; PortControl port_control) and a table whose entry i is 10 i packet
 * times, entry 4 given as entry4.
 */
static void tp_cc_program(Tp *t, uint16_t port_control, uint8_t trigger, uint16_t entry4)
{
    struct pib_cc_ca_setting cs = {
        .port_control_be = cpu_to_be16(port_control),
        .control_map_be = cpu_to_be16(1),
        .entries[0] = {
            .ccti_timer_be = cpu_to_be16(1000), .ccti_increase = 2,
            .trigger_threshold = trigger,
        },
    };
    struct pib_cc_table tbl = { .ccti_limit_be = cpu_to_be16(10) };
    int i;

    tp_cc_set(&t->d, PIB_CC_ATTR_CA_CONG_SETTING, 0, &cs, sizeof(cs));
    for (i = 0; i < PIB_CC_CCT_BLOCK_ENTRIES; i++) {
        tbl.entries_be[i] = cpu_to_be16(10 * i);
    }
    tbl.entries_be[4] = cpu_to_be16(entry4);
    tp_cc_set(&t->d, PIB_CC_ATTR_CC_TABLE, 0, &tbl, sizeof(tbl));
}

/* The device's highest congestion control table index now (its cca-index property). */
static uint32_t tp_cca_index(Tp *t)
{
    return qom_get_u32(qts(&t->d), PEER_DEV_PATH, "cca-index");
}

/* The CA's CongestionLog. */
static void tp_cc_log(Tp *t, struct pib_cc_log_ca *log)
{
    struct pib_cc_mad req = peer_cc_new(PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_LOG, 0, 0), r;

    g_assert_cmpuint(dp_mad_ifc(&t->d, &req, &r, false), ==, PIB_MAD_IFC_REPLY);
    memcpy(log, r.log, sizeof(r.log));
    memcpy((uint8_t *)log + sizeof(r.log), r.data, sizeof(*log) - sizeof(r.log));
    g_assert_cmpuint(log->log_type, ==, PIB_CC_LOG_CA);
}

/* Post a signalled 8-byte SEND, wr_id n. */
static void tp_cc_send(Tp *t, TestEnd *x, uint64_t n)
{
    struct pib_sge sge = dp_sge(x->buf, 8, x->key);

    dp_post_send(&t->d, &x->qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, n, &sge, 1, 0, 0);
}

/* The SEND of PSN psn arrives; the test acknowledges it, with BECN if becn. */
static void tp_cc_expect(Tp *t, uint32_t psn, bool becn)
{
    WirePkt w;

    wp_expect(t->fd, &w, PIB_OP_RC_SEND_ONLY, psn);
    g_assert_false(w.becn);
    wp_bth_flags = becn ? PIB_BTH_BECN : 0;
    wp_ack(t->fd, psn, PIB_AETH_ACK | 31);
    wp_bth_flags = 0;
}

static void test_cc(void)
{
    struct pib_cc_log_ca log;
    struct pib_sge sge;
    TestEnd x;
    WirePkt w;
    uint32_t psn = TP_SQ_PSN;
    int i;
    Tp t;

    tp_up(&t);
    tp_end(&t, &x, 0, 4, 7);

    /* The responder owes BECN for a request with FECN, on the ACK it sends next. */
    for (i = 0; i < 2; i++) {
        sge = dp_sge(x.buf + 8192, 256, x.key);
        dp_post_recv(&t.d, &x.qp, 0x10 + i, &sge, 1);
        wp_bth_flags = i == 0 ? PIB_BTH_FECN : 0;
        wp_send_only(t.fd, TP_RQ_PSN + i, "congested");
        wp_bth_flags = 0;
        wp_expect(t.fd, &w, PIB_OP_RC_ACKNOWLEDGE, TP_RQ_PSN + i);
        g_assert_cmpint(w.becn, ==, i == 0);
        dp_expect(&t.d, &x.rcq, 0x10 + i, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    }

    /* The requester.  Index 0: the table's entry 0, no delay. */
    tp_cc_program(&t, PIB_CC_CA_PORT_SL_BASED, 4,
                  1 << 14 | 80);                        /* 40, in half-time units */
    tp_cc_send(&t, &x, 1);
    tp_cc_expect(&t, psn++, true);                      /* index 2 */
    dp_expect(&t.d, &x.scq, 1, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    /* SEND 2 leaves at index 2: SEND 3 waits 20 x 1.024 us. */
    tp_cc_send(&t, &x, 2);
    tp_cc_send(&t, &x, 3);
    tp_cc_expect(&t, psn++, true);                      /* index 4: the log's event */
    PIB_WAIT_FOR(tp_cca_index(&t) == 4);
    wp_expect_nothing(t.fd);
    qtest_clock_step(qts(&t.d), 20 * 1024 - 1);
    wp_expect_nothing(t.fd);
    qtest_clock_step(qts(&t.d), 1);
    tp_cc_expect(&t, psn++, false);
    /* SEND 3 left at index 4: SEND 4 waits 40 x 1.024 us. */
    tp_cc_send(&t, &x, 4);
    qtest_clock_step(qts(&t.d), 40 * 1024 - 1);
    wp_expect_nothing(t.fd);
    qtest_clock_step(qts(&t.d), 1);
    tp_cc_expect(&t, psn++, false);
    for (i = 2; i <= 4; i++) {
        dp_expect(&t.d, &x.scq, i, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    }

    /* The CA's log: SL 0's index reached 4 on this QP. */
    tp_cc_log(&t, &log);
    g_assert_cmpuint(be16_to_cpu(log.event_counter_be), ==, 1);
    g_assert_cmphex(be16_to_cpu(log.event_map_be), ==, 1);
    g_assert_cmphex(be32_to_cpu(log.events[0].local_qp_sl_type_be), ==, x.qp.qpn << 8);
    g_assert_cmphex(be32_to_cpu(log.events[0].remote_qp_be), ==, WP_QPN << 8);
    g_assert_cmpuint(be16_to_cpu(log.events[0].remote_lid_be), ==, WP_LID);

    /* Four CCTI_Timer periods later the index is 0: after SEND 5 (held back by SEND 4's
     * delay no longer), SEND 6 follows at once. */
    qtest_clock_step(qts(&t.d), 1000 * 1024);
    g_assert_cmpuint(tp_cca_index(&t), ==, 3);          /* one period: down by one */
    qtest_clock_step(qts(&t.d), 3 * 1000 * 1024);
    g_assert_cmpuint(tp_cca_index(&t), ==, 0);
    tp_cc_send(&t, &x, 5);
    tp_cc_send(&t, &x, 6);
    tp_cc_expect(&t, psn++, false);
    tp_cc_expect(&t, psn++, false);
    dp_expect(&t.d, &x.scq, 5, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&t.d, &x.scq, 6, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    tp_down(&t, 0);
}

/*
 * Congestion notification packets (IBTA A10.2.2.1.1; hca/pib-cca.c): UD and UC have no
 * responses to carry BECN.  A UD SEND and a UC SEND that arrive with FECN are each answered
 * with a CNP to the sending QP (BECN, PSN 0, no payload) and still delivered; without FECN,
 * no CNP.  The other way, a CNP to the device's UD QP raises its index as a BECN would: with
 * CCTI_Increase 2 and Trigger_Threshold 2 the CA's CongestionLog has the event (remote LID the
 * CNP's SLID, remote QP 0: a CNP names none), and the QP's next two SENDs leave 20 x 1.024 us
 * apart.  A CNP to an RC QP is dropped (rx_drop_qp_type), one with payload too
 * (rx_drop_length).
 */
static void tp_cnp_expect(Tp *t)
{
    WirePkt w;

    wp_expect(t->fd, &w, PIB_OP_CNP, 0);
    g_assert_true(w.becn);
    g_assert_false(w.fecn);
    g_assert_cmpuint(w.paylen, ==, 0);
}

/* A UD SEND from the peer's QP to wp_dqpn, Q_Key qkey, with FECN if fecn. */
static void tp_ud_send(Tp *t, uint32_t qkey, bool fecn)
{
    uint8_t deth[8];

    stl_be_p(deth, qkey);
    stl_be_p(deth + 4, WP_QPN);
    wp_bth_flags = fecn ? PIB_BTH_FECN : 0;
    wp_send(t->fd, PIB_OP_UD_SEND_ONLY, 0, false, deth, sizeof(deth), "congested", 9);
    wp_bth_flags = 0;
}

/* Post a signalled 8-byte UD SEND from x to the peer's QP, wr_id n. */
static void tp_ud_post(Tp *t, TestEnd *x, uint64_t n)
{
    struct pib_sge sge = dp_sge(x->buf, 8, x->key);
    struct pib_send_wqe wqe = {
        .opcode = PIB_WQE_SEND,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 1,
        .wr_id = cpu_to_le64(n),
        .ud_qpn = cpu_to_le32(WP_QPN),
        .ud_qkey = cpu_to_le32(0x4444),
        .ud_dlid = cpu_to_le16(WP_LID),
    };

    dp_post_send_raw(&t->d, &x->qp, &wqe, &sge, sizeof(sge), true);
}

static void test_cnp(void)
{
    struct pib_cc_log_ca log;
    uint64_t c0[PIB_CNT_MAX], c1[PIB_CNT_MAX];
    struct pib_sge sge;
    TestEnd ud, uc, rc;
    WirePkt w;
    int i;
    Tp t;

    tp_up(&t);
    dp_end(&t.d, &ud, PIB_QPT_UD, 16384);
    dp_ud_ready(&t.d, &ud.qp, 0x4444);
    wp_dqpn = ud.qp.qpn;

    /* UD: FECN gets a CNP, and the SEND is delivered; no FECN, no CNP. */
    for (i = 0; i < 2; i++) {
        sge = dp_sge(ud.buf + 8192, 256, ud.key);
        dp_post_recv(&t.d, &ud.qp, 0x10 + i, &sge, 1);
        tp_ud_send(&t, 0x4444, i == 0);
        if (i == 0) {
            tp_cnp_expect(&t);
        }
        dp_expect(&t.d, &ud.rcq, 0x10 + i, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    }
    wp_expect_nothing(t.fd);

    /* UC: the CNP goes to the connected peer. */
    dp_end(&t.d, &uc, PIB_QPT_UC, 16384);
    dp_connect(&t.d, &uc.qp, WP_LID, WP_QPN);
    wp_dqpn = uc.qp.qpn;
    sge = dp_sge(uc.buf + 8192, 256, uc.key);
    dp_post_recv(&t.d, &uc.qp, 0x20, &sge, 1);
    wp_bth_flags = PIB_BTH_FECN;
    wp_send(t.fd, PIB_OP_UC_SEND_ONLY, 0xfffff0, false, NULL, 0, "congested", 9);
    wp_bth_flags = 0;
    tp_cnp_expect(&t);
    dp_expect(&t.d, &uc.rcq, 0x20, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);

    /* A CNP to the UD QP: its index rises to 2, the threshold (logged), and delays sends. */
    tp_cc_program(&t, 0, 2, 40);                        /* QP-based: the UD QP's own */
    wp_dqpn = ud.qp.qpn;
    wp_bth_flags = PIB_BTH_BECN;
    wp_send(t.fd, PIB_OP_CNP, 0, false, NULL, 0, NULL, 0);
    wp_bth_flags = 0;
    PIB_WAIT_FOR(tp_cca_index(&t) == 2);
    tp_ud_post(&t, &ud, 1);
    tp_ud_post(&t, &ud, 2);
    wp_expect(t.fd, &w, PIB_OP_UD_SEND_ONLY, 7);
    wp_expect_nothing(t.fd);
    qtest_clock_step(qts(&t.d), 20 * 1024 - 1);
    wp_expect_nothing(t.fd);
    qtest_clock_step(qts(&t.d), 1);
    wp_expect(t.fd, &w, PIB_OP_UD_SEND_ONLY, 8);
    dp_expect(&t.d, &ud.scq, 1, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&t.d, &ud.scq, 2, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    tp_cc_log(&t, &log);
    g_assert_cmpuint(be16_to_cpu(log.event_counter_be), ==, 1);
    g_assert_cmphex(be32_to_cpu(log.events[0].local_qp_sl_type_be), ==, ud.qp.qpn << 8 | 3);
    g_assert_cmphex(be32_to_cpu(log.events[0].remote_qp_be), ==, 0);
    g_assert_cmpuint(be16_to_cpu(log.events[0].remote_lid_be), ==, WP_LID);

    /* Not for RC; and a CNP carries nothing. */
    dp_end(&t.d, &rc, PIB_QPT_RC, 16384);
    dp_connect(&t.d, &rc.qp, WP_LID, WP_QPN);
    dp_counters(&t.d, c0);
    wp_dqpn = rc.qp.qpn;
    wp_bth_flags = PIB_BTH_BECN;
    wp_send(t.fd, PIB_OP_CNP, 0, false, NULL, 0, NULL, 0);
    wp_dqpn = ud.qp.qpn;
    wp_send(t.fd, PIB_OP_CNP, 0, false, NULL, 0, "junk", 4);
    wp_bth_flags = 0;
    PIB_WAIT_FOR((dp_counters(&t.d, c1), c1[PIB_CNT_RX_DROP_LENGTH] > c0[PIB_CNT_RX_DROP_LENGTH] &&
                  c1[PIB_CNT_RX_DROP_QP_TYPE] > c0[PIB_CNT_RX_DROP_QP_TYPE]));
    g_assert_cmpuint(c1[PIB_CNT_RX_DROP_QP_TYPE], ==, c0[PIB_CNT_RX_DROP_QP_TYPE] + 1);
    g_assert_cmpuint(c1[PIB_CNT_RX_DROP_LENGTH], ==, c0[PIB_CNT_RX_DROP_LENGTH] + 1);
    wp_expect_nothing(t.fd);
    tp_down(&t, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/pib/transport/responder/psn-gap", test_resp_psn_gap);
    qtest_add_func("/pib/transport/responder/access", test_resp_access);
    qtest_add_func("/pib/transport/responder/write-length", test_resp_write_length);
    qtest_add_func("/pib/transport/responder/mw-type2", test_resp_mw_type2);
    qtest_add_func("/pib/transport/requester/rnr-retry", test_req_rnr_retry);
    qtest_add_func("/pib/transport/requester/rd-atomic", test_req_rd_atomic);
    qtest_add_func("/pib/transport/requester/stale", test_req_stale);
    qtest_add_func("/pib/transport/requester/read-length", test_req_read_length);
    qtest_add_func("/pib/transport/requester/inline", test_req_inline);
    qtest_add_func("/pib/transport/modify/retry-cnt", test_modify_retry_cnt);
    qtest_add_func("/pib/transport/cc", test_cc);
    qtest_add_func("/pib/transport/cnp", test_cnp);
    return g_test_run();
}
