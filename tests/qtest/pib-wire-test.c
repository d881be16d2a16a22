/*
 * QTest: the pib HCA's transport with the test as the peer HCA (hw/pib)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * One device, and this process at the other end of its link (peer_* in
 * pib-qtest.h), speaking IB packets on the device's socket as the remote HCA
 * (wp_*: LID WP_LID, QP WP_QPN).  The device side is driven by the dp_*
 * mini-driver, as in pib-data-test.c.  The virtual clock moves only when the
 * test steps it, so every timer is counted, not timed.
 *
 * Covered: XRC and RDMA FLUSH at the wire, the transport rules only a misbehaving peer
 * exercises (duplicates, gaps, NAKs, RNR, replayed READs and atomics, a replayed READ whose
 * key goes while its answer is out, go-back-N, malformed packets), and the requester's timers
 * when the link dies under it.  The paths stay under /pib/data/, where these tests were
 * first.
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-wire-test
 */

#include "qemu/osdep.h"

#include "pib-qtest.h"

/*
 * XRC (IBTA 9.8) at the wire.  The fake peer is the initiator; the device has
 * two XRC domains, an XRC SRQ in each (one CQ for both), and an XRC target QP
 * in the first.  The commands refuse what XRC does not allow; a SEND and an
 * RDMA WRITE naming the target's SRQ land, the SEND on the SRQ's CQ naming
 * the SRQ and the target QP, answered with XRC ACKs; a packet too short for
 * its XRCETH is malformed; a request naming the other domain's SRQ draws the
 * invalid RD request NAK, is counted, and puts the target in ERR.
 */
static uint32_t xrc_alloc(PibDev *d)
{
    struct pib_admin_cmd cmd = { .opcode = PIB_CMD_ALLOC_XRCD };
    struct pib_admin_cqe acqe;

    g_assert_cmpuint(pib_cmd(d, &cmd, &acqe), ==, PIB_AQ_OK);
    return le32_to_cpu(acqe.result0);
}

/* CREATE_SRQ of an XRC SRQ (8 slots of 64 bytes at ring); its status, SRQN in *srqn. */
static uint8_t xrc_srq(PibDev *d, uint32_t pdn, uint32_t xrcd, uint32_t cqn,
                       uint64_t ring, uint32_t *srqn)
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_CREATE_SRQ,
        .in.create_srq = {
            .pdn = cpu_to_le32(pdn),
            .depth = cpu_to_le32(8),
            .stride_log = 6,
            .flags = PIB_SRQ_F_XRC,
            .uar = cpu_to_le32(DP_UAR),
            .npages = cpu_to_le32(1),
            .pbl_addr = cpu_to_le64(dp_pbl(d, ring, 1)),
            .xrcd = cpu_to_le32(xrcd),
            .cqn = cpu_to_le32(cqn),
        },
    };
    struct pib_admin_cqe acqe;
    uint8_t status = pib_cmd(d, &cmd, &acqe);

    *srqn = le32_to_cpu(acqe.result0);
    return status;
}

/* CREATE_QP of an XRC target; with pdn set (which it must not have), refused. */
static uint8_t xrc_tgt(PibDev *d, uint32_t xrcd, uint32_t pdn, uint32_t *qpn)
{
    struct pib_qp_create c = {
        .pdn = cpu_to_le32(pdn),
        .type = PIB_QPT_XRC_TGT,
        .flags = PIB_QPC_F_NO_RQ,
        .srqn = cpu_to_le32(PIB_SRQN_NONE),
        .xrcd = cpu_to_le32(xrcd),
    };
    uint64_t mbox = dp_alloc(d, sizeof(c));
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_CREATE_QP,
        .in.mbox = { .addr = cpu_to_le64(mbox), .len = cpu_to_le32(sizeof(c)) },
    };
    struct pib_admin_cqe acqe;
    uint8_t status;

    qtest_memwrite(qts(d), mbox, &c, sizeof(c));
    status = pib_cmd(d, &cmd, &acqe);
    *qpn = le32_to_cpu(acqe.result0);
    return status;
}

static void test_dp_xrc(void)
{
    struct pib_qp_attr a;
    struct pib_recv_wqe rw = { .wr_id = cpu_to_le64(0x51), .num_sge = 1 };
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    uint64_t cnt[PIB_CNT_MAX], malformed, ring_a, ring_b, buf;
    uint32_t pdn, key, xa, xb, sa, sb, tgt, bad;
    uint8_t ext[20], got[8];
    TestCq cq;
    TestQp rc;
    WirePkt w;
    PibDev d;
    PeerLink l;
    int fd;

    fd = peer_dev_up(&l, &d);

    pdn = dp_create_pd(&d);
    buf = dp_alloc(&d, 16384);
    key = dp_reg_mr(&d, pdn, DP_ALL_ACCESS, buf, 16384);
    dp_create_cq(&d, 64, &cq);
    xa = xrc_alloc(&d);
    xb = xrc_alloc(&d);
    g_assert_cmpuint(xa, !=, xb);
    ring_a = dp_alloc(&d, 4096);
    ring_b = dp_alloc(&d, 4096);

    /* An XRC SRQ needs a domain and a CQ that exist; a plain one has neither. */
    g_assert_cmpuint(xrc_srq(&d, pdn, 999, cq.cqn, ring_a, &sa), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(xrc_srq(&d, pdn, xa, 999, ring_a, &sa), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(xrc_srq(&d, pdn, xa, cq.cqn, ring_a, &sa), ==, PIB_AQ_OK);
    g_assert_cmpuint(xrc_srq(&d, pdn, xb, cq.cqn, ring_b, &sb), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEALLOC_XRCD, xa), ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_CQ, cq.cqn), ==, PIB_AQ_BUSY);
    /* No QP is made on an XRC SRQ; a target has its domain and nothing else. */
    g_assert_cmpuint(dp_create_qp_ex(&d, PIB_QPT_RC, pdn, &cq, &cq, 16, 0, DP_UAR,
                                     sa, &rc), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(xrc_tgt(&d, 999, 0, &tgt), ==, PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(xrc_tgt(&d, xa, pdn, &tgt), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(xrc_tgt(&d, xa, 0, &tgt), ==, PIB_AQ_OK);

    /* The target to RTS with the IBTA's attributes for it (no retries). */
    wp_qp_rtr(&d, tgt, PIB_ACCESS_REMOTE_WRITE, 0);
    a = (struct pib_qp_attr) {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_SQ_PSN | PIB_QP_TIMEOUT |
                                 PIB_QP_RETRY_CNT),
        .qp_state = PIB_QPS_RTS,
        .timeout = 14,
        .retry_cnt = 7,
    };
    g_assert_cmpuint(dp_modify(&d, tgt, &a), !=, PIB_AQ_OK);
    a.attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_SQ_PSN | PIB_QP_TIMEOUT);
    g_assert_cmpuint(dp_modify(&d, tgt, &a), ==, PIB_AQ_OK);
    wp_dqpn = tgt;

    /* A SEND naming SRQ A: its WQE, its CQ; the CQE names the SRQ too. */
    sge[0] = dp_sge(buf + 8192, 64, key);
    qtest_memwrite(qts(&d), ring_a, &rw, sizeof(rw));
    qtest_memwrite(qts(&d), ring_a + 16, sge, sizeof(sge));
    dp_doorbell(&d, DP_UAR, PIB_UAR_SRQ_DB, sa, 1);
    stl_be_p(ext, sa);
    wp_send(fd, PIB_OP_XRC(PIB_OP_RC_SEND_ONLY), 100, true, ext, 4, "hello", 5);
    wp_expect(fd, &w, PIB_OP_XRC(PIB_OP_RC_ACKNOWLEDGE), 100);
    g_assert_cmphex(w.syndrome & PIB_AETH_TYPE_MASK, ==, PIB_AETH_ACK);
    dp_expect(&d, &cq, 0x51, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.qpn) & PIB_QPN_MASK, ==, tgt);
    g_assert_true(cqe.flags & PIB_CQE_F_XRC);
    g_assert_cmpuint(le32_to_cpu(cqe.src_qp), ==, sa);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 5);
    qtest_memread(qts(&d), buf + 8192, got, 5);
    g_assert_cmpmem(got, 5, "hello", 5);

    /* An RDMA WRITE: XRCETH, then RETH; the key is checked against A's PD. */
    stl_be_p(ext, sa);
    stq_be_p(ext + 4, buf + 4096);
    stl_be_p(ext + 12, key);
    stl_be_p(ext + 16, 8);
    wp_send(fd, PIB_OP_XRC(PIB_OP_RC_RDMA_WRITE_ONLY), 101, true, ext, 20,
            "written!", 8);
    wp_expect(fd, &w, PIB_OP_XRC(PIB_OP_RC_ACKNOWLEDGE), 101);
    g_assert_cmphex(w.syndrome & PIB_AETH_TYPE_MASK, ==, PIB_AETH_ACK);
    qtest_memread(qts(&d), buf + 4096, got, 8);
    g_assert_cmpmem(got, 8, "written!", 8);

    /* Too short for its XRCETH: malformed, dropped without a word. */
    dp_counters(&d, cnt);
    malformed = cnt[PIB_CNT_RX_DROP_MALFORMED];
    wp_send(fd, PIB_OP_XRC(PIB_OP_RC_SEND_ONLY), 102, true, NULL, 0, NULL, 0);
    wp_expect_nothing(fd);
    dp_counters(&d, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_MALFORMED], ==, malformed + 1);

    /* The other domain's SRQ (and no SRQ at all) is not the target's to use. */
    bad = sb;
    stl_be_p(ext, bad);
    wp_send(fd, PIB_OP_XRC(PIB_OP_RC_SEND_ONLY), 102, true, ext, 4, "nope", 4);
    wp_expect(fd, &w, PIB_OP_XRC(PIB_OP_RC_ACKNOWLEDGE), 102);
    g_assert_cmphex(w.syndrome, ==, PIB_AETH_NAK | PIB_NAK_INVALID_RD_REQ);
    dp_counters(&d, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_XRC_SRQ], ==, 1);
    g_assert_true(dp_aeq_find(&d, PIB_AE_QP_REQ_ERR, tgt));
    g_assert_cmpuint(dp_query_qp(&d, tgt).qp_state, ==, PIB_QPS_ERR);
    dp_expect_none(&d, &cq);

    /* Objects go in order: QP, SRQs, then the domains and the CQ are free. */
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_QP, tgt), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_SRQ, sa), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_SRQ, sb), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEALLOC_XRCD, xa), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEALLOC_XRCD, xb), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEALLOC_XRCD, xb), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_CQ, cq.cqn), ==, PIB_AQ_OK);

    /* None of this was the guest's doing. */
    g_assert_cmpuint(dp_err_count(&d), ==, 0);
    close(fd);
    pib_close(&d);
    peer_shutdown(&l);
}

/*
 * The wire: this test is the peer HCA (LID 9, QP 0x77) and speaks IB
 * packets to the device through its link, to check the transport rules
 * that a well-behaved peer never exercises: duplicates, gaps, NAKs, RNR,
 * replayed READs and atomics, go-back-N, and malformed packets.
 */
static void test_dp_wire(void)
{
    struct pib_qp_attr a;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    uint8_t ext[28], bad[64], data[700];
    struct pib_port_attr port;
    uint64_t cnt[PIB_CNT_MAX];
    char got[16];
    TestEnd x, y;
    WirePkt w;
    PibDev d;
    int fd, i;
    PeerLink l;

    fd = peer_dev_up(&l, &d);

    dp_end(&d, &x, PIB_QPT_RC, 16384);
    wp_dqpn = x.qp.qpn;
    wp_qp_rtr(&d, x.qp.qpn, PIB_ACCESS_REMOTE_READ | PIB_ACCESS_REMOTE_ATOMIC, 4);
    wp_qp_rts(&d, x.qp.qpn, 4);

    /* The responder: a SEND, acknowledged with the MSN. */
    sge[0] = dp_sge(x.buf + 8192, 64, x.key);
    dp_post_recv(&d, &x.qp, 0x1, sge, 1);
    dp_post_recv(&d, &x.qp, 0x2, sge, 1);
    wp_send_only(fd, 100, "first");
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 100);
    g_assert_cmphex(w.syndrome & PIB_AETH_TYPE_MASK, ==, PIB_AETH_ACK);
    g_assert_cmpuint(w.msn, ==, 1);
    dp_expect(&d, &x.rcq, 0x1, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 5);
    qtest_memread(qts(&d), x.buf + 8192, got, 5);
    g_assert_cmpmem(got, 5, "first", 5);

    /* The same again: a duplicate is acknowledged, not delivered. */
    wp_send_only(fd, 100, "again");
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 100);
    dp_expect_none(&d, &x.rcq);

    /* A gap: one PSN sequence NAK for it, naming the PSN expected. */
    wp_send_only(fd, 103, "gap");
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 101);
    g_assert_cmphex(w.syndrome, ==, PIB_AETH_NAK | PIB_NAK_PSN_SEQ_ERR);
    wp_send_only(fd, 104, "gap2");
    wp_expect_nothing(fd);
    wp_send_only(fd, 101, "second");
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 101);
    dp_expect(&d, &x.rcq, 0x2, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 6);

    /*
     * Malformed packets: dropped without a word, whatever is wrong.  Each is
     * a valid SEND_ONLY (PSN 102, no receive posted: it would draw an RNR
     * NAK) with one field broken.
     */
    memset(bad, 0, sizeof(bad));
    bad[0] = PIB_LINK_MAGIC;
    bad[1] = PIB_FRAME_PACKET;
    stw_be_p(bad + 2, 4);
    peer_write(fd, bad, 8);                             /* 4 bytes */
    for (i = 0; i < 9; i++) {
        uint8_t *b = bad + 4;

        memset(bad, 0, sizeof(bad));
        bad[0] = PIB_LINK_MAGIC;
        bad[1] = PIB_FRAME_PACKET;
        stw_be_p(bad + 2, 24);
        b[1] = PIB_LNH_IBA_LOCAL;
        stw_be_p(b + 2, 1);
        stw_be_p(b + 4, 6);
        stw_be_p(b + 6, WP_LID);
        b[8] = PIB_OP_RC_SEND_ONLY;
        stw_be_p(b + 10, 0xffff);
        stl_be_p(b + 12, wp_dqpn);
        stl_be_p(b + 16, PIB_BTH_ACKREQ | 102);
        memcpy(b + 20, "abcd", 4);
        switch (i) {
        case 0:                                 /* LRH length */
            stw_be_p(b + 4, 7);
            break;
        case 1:                                 /* P_Key */
            stw_be_p(b + 10, 0x1234);
            break;
        case 2:                                 /* not our peer */
            stw_be_p(b + 6, WP_LID + 1);
            break;
        case 3:                                 /* not our LID */
            stw_be_p(b + 2, 5);
            break;
        case 4:                                 /* no such QP */
            stl_be_p(b + 12, 0x3ff);
            break;
        case 5:                                 /* raw, not IBA */
            b[1] = 0;
            break;
        case 6:                                 /* LVer 1 */
            b[0] = 0x01;
            break;
        case 7:                                 /* TVer 1 */
            b[9] = 0x01;
            break;
        case 8:                                 /* UC to an RC QP */
            b[8] = PIB_OP_UC_SEND_ONLY;
            break;
        }
        peer_write(fd, bad, 4 + 24);
    }
    wp_send(fd, 0x1f, 102, true, NULL, 0, NULL, 0);     /* unknown opcode */
    wp_send(fd, PIB_OP_RC_ACKNOWLEDGE, 102, true, "\0\0\0\0", 4, "xxxx", 4);
    wp_send(fd, PIB_OP_RC_RDMA_WRITE_ONLY, 102, true, "short", 5, NULL, 0);
    wp_expect_nothing(fd);
    g_assert_cmpuint(dp_query_qp(&d, x.qp.qpn).qp_state, ==, PIB_QPS_RTS);
    g_assert_cmpuint(pib_query_port(&d, 1, &port), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(port.bad_pkey_cntr), ==, 1);

    /* No receive posted: an RNR NAK with our min_rnr_timer, PSN not used */
    wp_send_only(fd, 102, "rnr");
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 102);
    g_assert_cmphex(w.syndrome, ==, PIB_AETH_RNR_NAK | 3);

    /* A READ of 600 bytes: three responses at MTU 256. */
    dp_fill(&d, x.buf, 1024, 4);
    qtest_writeq(qts(&d), x.buf + 2048, 5);
    stq_be_p(ext, x.buf);
    stl_be_p(ext + 8, x.key);
    stl_be_p(ext + 12, 600);
    wp_send(fd, PIB_OP_RC_RDMA_READ_REQUEST, 102, false, ext, 16, NULL, 0);
    qtest_memread(qts(&d), x.buf, data, sizeof(data));
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_FIRST, 102);
    g_assert_cmpmem(w.payload, w.paylen, data, 256);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_MIDDLE, 103);
    g_assert_cmpmem(w.payload, w.paylen, data + 256, 256);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_LAST, 104);
    g_assert_cmpmem(w.payload, w.paylen, data + 512, 88);
    /* ... asked again from its middle: answered again from there. */
    stq_be_p(ext, x.buf + 256);
    stl_be_p(ext + 12, 344);
    wp_send(fd, PIB_OP_RC_RDMA_READ_REQUEST, 103, false, ext, 16, NULL, 0);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_FIRST, 103);
    g_assert_cmpmem(w.payload, w.paylen, data + 256, 256);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_LAST, 104);

    /* FETCH_ADD, then its duplicate: the same answer, added once. */
    stq_be_p(ext, x.buf + 2048);
    stl_be_p(ext + 8, x.key);
    stq_be_p(ext + 12, 3);
    stq_be_p(ext + 20, 0);
    wp_send(fd, PIB_OP_RC_FETCH_ADD, 105, false, ext, 28, NULL, 0);
    wp_expect(fd, &w, PIB_OP_RC_ATOMIC_ACKNOWLEDGE, 105);
    g_assert_cmpuint(w.orig, ==, 5);
    g_assert_cmpuint(qtest_readq(qts(&d), x.buf + 2048), ==, 8);
    wp_send(fd, PIB_OP_RC_FETCH_ADD, 105, false, ext, 28, NULL, 0);
    wp_expect(fd, &w, PIB_OP_RC_ATOMIC_ACKNOWLEDGE, 105);
    g_assert_cmpuint(w.orig, ==, 5);
    g_assert_cmpuint(qtest_readq(qts(&d), x.buf + 2048), ==, 8);

    /*
     * Four READs (PSN 106-109) take the four responder resources and are answered.  The
     * peer's retransmit timer fired before the answers reached it: it asks all four again;
     * then the answers arrive, it completes the first and sends a fifth READ (PSN 110)
     * right behind its duplicates (one write: the device handles all five before it sends
     * anything).  The duplicates are answered again; the fifth takes the first's resource,
     * whose answer had left in full (its replay is moot), and is answered too: it is not
     * "one READ more than max_dest_rd_atomic", which would be an invalid request NAK.
     */
    for (i = 0; i < 4; i++) {
        stq_be_p(ext, x.buf + 64 * i);
        stl_be_p(ext + 8, x.key);
        stl_be_p(ext + 12, 64);
        wp_send(fd, PIB_OP_RC_RDMA_READ_REQUEST, 106 + i, false, ext, 16, NULL, 0);
        wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_ONLY, 106 + i);
        g_assert_cmpmem(w.payload, w.paylen, data + 64 * i, 64);
    }
    wp_batch_begin();
    for (i = 0; i < 5; i++) {
        stq_be_p(ext, x.buf + 64 * i);
        wp_send(fd, PIB_OP_RC_RDMA_READ_REQUEST, 106 + i, false, ext, 16, NULL, 0);
    }
    wp_batch_send(fd);
    /* Then 107-110 in PSN order; 106's replay first, if it left before 110 was read. */
    g_assert_true(wp_recv(fd, &w, TIMEOUT_US / 1000));
    if (w.psn == 106) {
        g_assert_cmphex(w.opcode, ==, PIB_OP_RC_RDMA_READ_RESP_ONLY);
        g_assert_cmpmem(w.payload, w.paylen, data, 64);
        g_assert_true(wp_recv(fd, &w, TIMEOUT_US / 1000));
    }
    for (i = 107; i <= 110; i++) {
        if (i > 107) {
            g_assert_true(wp_recv(fd, &w, TIMEOUT_US / 1000));
        }
        g_assert_cmphex(w.opcode, ==, PIB_OP_RC_RDMA_READ_RESP_ONLY);
        g_assert_cmpuint(w.psn, ==, i);
        g_assert_cmphex(w.syndrome & PIB_AETH_TYPE_MASK, ==, PIB_AETH_ACK);
        g_assert_cmpmem(w.payload, w.paylen, data + 64 * (i - 106), 64);
    }
    wp_expect_nothing(fd);
    g_assert_cmpuint(dp_query_qp(&d, x.qp.qpn).qp_state, ==, PIB_QPS_RTS);

    /*
     * The requester: a 700-byte SEND is three packets.  A sequence NAK for
     * the second makes the device go back and resend from it.
     */
    dp_fill(&d, x.buf + 4096, 700, 12);
    qtest_memread(qts(&d), x.buf + 4096, data, sizeof(data));
    sge[0] = dp_sge(x.buf + 4096, 700, x.key);
    dp_post_send(&d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x10, sge, 1,
                 0, 0);
    wp_expect(fd, &w, PIB_OP_RC_SEND_FIRST, 500);
    g_assert_cmpmem(w.payload, w.paylen, data, 256);
    wp_expect(fd, &w, PIB_OP_RC_SEND_MIDDLE, 501);
    wp_expect(fd, &w, PIB_OP_RC_SEND_LAST, 502);
    g_assert_true(w.ackreq);
    g_assert_cmpmem(w.payload, w.paylen, data + 512, 188);
    wp_ack(fd, 501, PIB_AETH_NAK | PIB_NAK_PSN_SEQ_ERR);
    wp_expect(fd, &w, PIB_OP_RC_SEND_MIDDLE, 501);
    g_assert_cmpmem(w.payload, w.paylen, data + 256, 256);
    wp_expect(fd, &w, PIB_OP_RC_SEND_LAST, 502);
    dp_expect_none(&d, &x.scq);
    wp_ack(fd, 400, PIB_AETH_ACK | 0x1f);     /* stale: ignored */
    wp_ack(fd, 600, PIB_AETH_ACK | 0x1f);     /* never sent: ignored */
    dp_expect_none(&d, &x.scq);
    wp_ack(fd, 502, PIB_AETH_ACK | 0x1f);
    dp_expect(&d, &x.scq, 0x10, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);

    /* An RNR NAK: resent once the RNR timer (code 1: 10 us) expired. */
    dp_post_send(&d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x11, sge, 1,
                 0, 0);
    wp_expect(fd, &w, PIB_OP_RC_SEND_FIRST, 503);
    wp_expect(fd, &w, PIB_OP_RC_SEND_MIDDLE, 504);
    wp_expect(fd, &w, PIB_OP_RC_SEND_LAST, 505);
    wp_ack(fd, 503, PIB_AETH_RNR_NAK | 1);
    wp_expect_nothing(fd);
    qtest_clock_step(qts(&d), 1000 * 1000);
    wp_expect(fd, &w, PIB_OP_RC_SEND_FIRST, 503);
    wp_expect(fd, &w, PIB_OP_RC_SEND_MIDDLE, 504);
    wp_expect(fd, &w, PIB_OP_RC_SEND_LAST, 505);
    wp_ack(fd, 505, PIB_AETH_ACK | 0x1f);
    dp_expect(&d, &x.scq, 0x11, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);

    /* An ACK timeout: everything unacknowledged goes out again. */
    dp_post_send(&d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x12, sge, 1,
                 0, 0);
    wp_expect(fd, &w, PIB_OP_RC_SEND_FIRST, 506);
    wp_expect(fd, &w, PIB_OP_RC_SEND_MIDDLE, 507);
    wp_expect(fd, &w, PIB_OP_RC_SEND_LAST, 508);
    wp_ack(fd, 506, PIB_AETH_ACK | 0x1f);       /* the first only */
    wp_expect_nothing(fd);          /* (the device reads the ACK first) */
    qtest_clock_step(qts(&d), 100 * 1000 * 1000);
    wp_expect(fd, &w, PIB_OP_RC_SEND_MIDDLE, 507);
    wp_expect(fd, &w, PIB_OP_RC_SEND_LAST, 508);
    wp_ack(fd, 508, PIB_AETH_ACK | 0x1f);
    dp_expect(&d, &x.scq, 0x12, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);

    /* A READ: the peer's responses land in the SGE. */
    sge[0] = dp_sge(x.buf + 12288, 300, x.key);
    dp_post_send(&d, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x13, sge,
                 1, 0x123456789ull, 0xabcd);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_REQUEST, 509);
    g_assert_cmphex(w.va, ==, 0x123456789ull);
    g_assert_cmphex(w.rkey, ==, 0xabcd);
    g_assert_cmpuint(w.dmalen, ==, 300);
    for (i = 0; i < 300; i++) {
        data[i] = i * 3;
    }
    stl_be_p(ext, (PIB_AETH_ACK | 0x1f) << 24);
    wp_send(fd, PIB_OP_RC_RDMA_READ_RESP_FIRST, 509, false, ext, 4, data,
               256);
    wp_send(fd, PIB_OP_RC_RDMA_READ_RESP_LAST, 510, false, ext, 4,
               data + 256, 44);
    dp_expect(&d, &x.scq, 0x13, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    qtest_memread(qts(&d), x.buf + 12288, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), data, sizeof(got));

    /* Every drop and NAK so far, counted by reason. */
    dp_counters(&d, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_MALFORMED], ==, 5);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_OPCODE], ==, 2);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_PKEY], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_DLID], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_SLID], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_NO_QP], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_QP_TYPE], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_LENGTH], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_PSN_SEQ], ==, 2);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_DUPLICATE], ==, 3 + 4);
    g_assert_cmpuint(cnt[PIB_CNT_DUPLICATE_REQUESTS], ==, 3 + 4);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_RNR], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_STALE_RESP], ==, 2);
    g_assert_cmpuint(cnt[PIB_CNT_SEQ_NAKS_SENT], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RNR_NAKS_SENT], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_SEQ_NAKS_RCVD], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RNR_NAKS_RCVD], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RETRANSMITS], ==, 2 + 3 + 2);
    g_assert_cmpuint(cnt[PIB_CNT_RETRY_TIMEOUTS], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_PACKETS], >, 20);
    g_assert_cmpuint(cnt[PIB_CNT_TX_PACKETS], >, 20);
    g_assert_cmpuint(cnt[PIB_CNT_TX_BYTES], >, cnt[PIB_CNT_TX_PACKETS] * 20);

    /* A NAK "remote access error": REM_ACCESS_ERR, and the QP in ERR. */
    dp_post_send(&d, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x14,
                 sge, 1, 0x1000, 0xabcd);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_WRITE_FIRST, 511);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_WRITE_LAST, 512);
    wp_ack(fd, 511, PIB_AETH_NAK | PIB_NAK_REM_ACCESS_ERR);
    dp_expect(&d, &x.scq, 0x14, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    g_assert_cmpuint(dp_query_qp(&d, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);

    /*
     * Garbage that gets past the LRH and BTH checks to a fresh QP: random
     * opcodes, PSNs around the expected one, random headers and payload.
     * Whatever the device makes of it, it answers or drops, and lives on.
     */
    dp_end(&d, &y, PIB_QPT_RC, 16384);
    dp_connect_ex(&d, &y.qp, WP_LID, WP_QPN, WP_MTU_256, 14, 7, 7);
    wp_dqpn = y.qp.qpn;
    sge[0] = dp_sge(y.buf, 16384, y.key);
    for (i = 0; i < 8; i++) {
        dp_post_recv(&d, &y.qp, 0x100 + i, sge, 1);
    }
    for (i = 0; i < 400; i++) {
        static const uint8_t ops[] = {
            0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
            0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13,
            0x14, 0x16, 0x17, 0x1c, 0x1d,
        };
        uint32_t n = g_test_rand_int_range(0, 16) * 4, j;
        uint8_t junk[64];

        /* An error moves the QP to ERR: start it over now and then. */
        if (i % 25 == 0 && dp_query_qp(&d, y.qp.qpn).qp_state != PIB_QPS_RTS) {
            while (wp_recv(fd, &w, 100)) {
                /* its last words */
            }
            g_assert_cmpuint(dp_modify_state(&d, y.qp.qpn, PIB_QPS_RESET), ==,
                             PIB_AQ_OK);
            y.qp.sq_pi = y.qp.rq_pi = 0;
            dp_connect_ex(&d, &y.qp, WP_LID, WP_QPN, WP_MTU_256, 14, 7, 7);
            for (j = 0; j < 8; j++) {
                dp_post_recv(&d, &y.qp, 0x100 + j, sge, 1);
            }
        }

        for (j = 0; j < n; j++) {
            junk[j] = g_test_rand_int();
        }
        if (g_test_rand_bit()) {        /* a plausible RETH */
            stq_be_p(junk, y.buf + g_test_rand_int_range(0, 20000));
            stl_be_p(junk + 8, g_test_rand_bit() ? y.key : x.key);
            stl_be_p(junk + 12, g_test_rand_int_range(0, 5000));
        }
        wp_send(fd, ops[g_test_rand_int_range(0, sizeof(ops))],
                0xffffef + g_test_rand_int_range(0, 4), g_test_rand_bit(),
                junk, n, NULL, 0);
    }
    while (wp_recv(fd, &w, 500)) {
        /* answers: ACKs, NAKs, READ responses */
    }
    g_assert_cmphex(pib_nop(&d, 0x600d), ==, 0x600d);
    a = dp_query_qp(&d, y.qp.qpn);
    g_assert_cmpuint(a.qp_state == PIB_QPS_RTS || a.qp_state == PIB_QPS_ERR,
                     ==, true);

    /*
     * The link goes down with a SEND outstanding: nothing hangs, the
     * retransmit timer runs out (8 tries of 67 ms) and the SEND completes
     * with RETRY_EXC_ERR.
     */
    dp_end(&d, &x, PIB_QPT_RC, 4096);
    dp_connect_ex(&d, &x.qp, WP_LID, WP_QPN, WP_MTU_256, 14, 7, 7);
    wp_dqpn = x.qp.qpn;
    sge[0] = dp_sge(x.buf, 10, x.key);
    dp_post_send(&d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x20, sge, 1,
                 0, 0);
    wp_expect(fd, &w, PIB_OP_RC_SEND_ONLY, 0xfffff0);
    close(fd);
    pib_wait_port_state(&d, PIB_PORT_DOWN);
    g_assert_true(dp_aeq_find(&d, PIB_AE_PORT_ERR, 1));
    dp_counters(&d, cnt);
    i = cnt[PIB_CNT_RETRY_TIMEOUTS];
    dp_step_until_cqe(&d, &x.scq, &cqe, 100 * 1000 * 1000, 500);
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x20);
    g_assert_cmpuint(cqe.status, ==, PIB_WC_RETRY_EXC_ERR);
    dp_counters(&d, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_RETRY_TIMEOUTS] - i, ==, 8);
    g_assert_cmpuint(cnt[PIB_CNT_TX_DROP_PORT_DOWN], ==, 7);

    /* None of this was the guest's doing. */
    g_assert_cmpuint(dp_err_count(&d), ==, 0);
    pib_close(&d);
    peer_shutdown(&l);
}

/*
 * The requester's timers when the link dies under it.  The rule the
 * device keeps: while an RC QP has requests the peer has not acknowledged
 * and is not in ERR, a timer is running (the retransmit timer, or the RNR
 * timer during an RNR wait), whatever happens to the link.  So a peer that
 * dies always ends in RETRY_EXC_ERR within (retry_cnt + 1) ACK timeouts.
 *
 * The hard case is a link that fills up first: the peer stops reading, the
 * socket and then the transmit queue fill, and the requester stops for room.
 * An ACK timeout (or the end of an RNR wait) then rewinds the requester,
 * which finds the queue still full and cannot resend; then the peer goes
 * away and the queue is purged.  Each variant below reaches that point with
 * the virtual clock frozen, so it is deterministic.
 */

#define LD_TIMEOUT          8           /* 4.096 us << 8: ~1 ms (the floor) */
#define LD_RETRY_CNT        3
#define LD_STEP_NS          (1100 * 1000)   /* a little over one timeout */
#define LD_MSG              (1u << 20)
#define LD_MTU_4096         5

typedef enum LdVariant {
    LD_WRITES,          /* RDMA WRITEs only */
    LD_READ_HEAD,       /* a READ at the head: its responses never come */
    LD_RNR,             /* the peer RNR NAKs the head, then goes away */
} LdVariant;

/* Wait until the device has stopped transmitting (the link is full). */
static uint64_t ld_wait_stalled(PibDev *d)
{
    uint64_t c[PIB_CNT_MAX], last = 0;
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;
    int stable = 0;

    while (stable < 3) {
        g_usleep(50 * 1000);
        dp_counters(d, c);
        stable = c[PIB_CNT_TX_PACKETS] == last ? stable + 1 : 0;
        last = c[PIB_CNT_TX_PACKETS];
        g_assert_cmpint(g_get_monotonic_time(), <, end);
    }
    return last;
}

static void ld_run(PibDev *d, const char *path, TestEnd *x, LdVariant v,
                   uint32_t link_downs)
{
    uint64_t before[PIB_CNT_MAX], after[PIB_CNT_MAX];
    struct pib_sge sge = dp_sge(x->buf, LD_MSG, x->key);
    struct pib_cqe cqe;
    uint64_t sent;
    uint32_t i;
    int fd;

    fd = peer_connect(path);
    peer_bring_up(d, fd, TEST_NODE_GUID);
    g_assert_cmpuint(dp_modify_state(d, x->qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x->qp.sq_pi = x->qp.rq_pi = 0;
    dp_connect_ex(d, &x->qp, WP_LID, WP_QPN, LD_MTU_4096, LD_TIMEOUT,
                  LD_RETRY_CNT, LD_RETRY_CNT);
    dp_counters(d, before);

    /* 16 MiB of requests: far more than the socket and the queue hold. */
    for (i = 0; i < x->qp.sq_depth; i++) {
        dp_post_send(d, &x->qp,
                     i == 0 && v == LD_READ_HEAD ? PIB_WQE_RDMA_READ
                                                 : PIB_WQE_RDMA_WRITE,
                     PIB_WQE_F_SIGNALED, 0x100 + i, &sge, 1,
                     x->buf, x->key);
    }
    sent = ld_wait_stalled(d);
    g_assert_cmpuint(sent - before[PIB_CNT_TX_PACKETS], >, 256);
    g_assert_cmpuint(sent - before[PIB_CNT_TX_PACKETS], <,
                     x->qp.sq_depth * (LD_MSG / 4096));

    if (v == LD_RNR) {
        /* An RNR NAK for the head: the requester pauses 0.01 ms, then
         * rewinds into a full queue. */
        wp_ack(fd, 0xfffff0, PIB_AETH_RNR_NAK | 1);
        ld_wait_stalled(d);
        qtest_clock_step(qts(d), 20 * 1000);
    } else {
        /* One ACK timeout: the requester rewinds into a full queue. */
        qtest_clock_step(qts(d), LD_STEP_NS);
    }
    ld_wait_stalled(d);
    dp_expect_none(d, &x->scq);

    /* The peer dies: the queue is purged, the port goes DOWN. */
    close(fd);
    pib_wait_port_state(d, PIB_PORT_DOWN);
    g_assert_true(pib_aeq_find(d, PIB_AE_PORT_ERR, TIMEOUT_US));

    /* Within the retry budget the head fails, the rest is flushed. */
    dp_step_until_cqe(d, &x->scq, &cqe, LD_STEP_NS, LD_RETRY_CNT + 2);
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x100);
    g_assert_cmpuint(cqe.status, ==, PIB_WC_RETRY_EXC_ERR);
    for (i = 1; i < x->qp.sq_depth; i++) {
        dp_expect(d, &x->scq, 0x100 + i, PIB_WC_WR_FLUSH_ERR,
                  PIB_CQE_RDMA_WRITE, NULL);
    }
    g_assert_cmpuint(dp_query_qp(d, x->qp.qpn).qp_state, ==, PIB_QPS_ERR);
    dp_counters(d, after);
    g_assert_cmpuint(after[PIB_CNT_RETRY_TIMEOUTS] -
                     before[PIB_CNT_RETRY_TIMEOUTS], ==, LD_RETRY_CNT + 1);
    g_assert_cmpuint(after[PIB_CNT_LINK_DOWNS], ==, link_downs);
    if (v == LD_RNR) {
        g_assert_cmpuint(after[PIB_CNT_RNR_NAKS_RCVD] -
                         before[PIB_CNT_RNR_NAKS_RCVD], ==, 1);
    }
}

/*
 * A READ answered again, whose key goes before the answer is out.  The peer asks for 1 MiB
 * (4096 responses at MTU 256) and, its timer having run out, asks again right away (one
 * write: the device takes both before it sends anything), so the device answers a duplicate
 * of a READ whose first answer never left in full.  The peer reads nothing: the device's
 * socket and transmit queue fill (link-sndbuf 64 KiB) and the answer stalls.  The MR is
 * deregistered then.  The rest of the answer meets the gone key as a first answer would: a
 * remote access NAK at the first PSN not sent, the QP in ERR; not a silent drop, which would
 * leave the peer to retry until RETRY_EXC_ERR without hearing why.
 */
static void test_dp_wire_read_key_gone(void)
{
    const uint32_t len = 1 << 20, last = 100 + len / 256 - 1;
    uint8_t ext[16];
    uint32_t i, n = 0;
    TestEnd x;
    WirePkt w;
    PibDev d;
    PeerLink l;
    int fd;

    pib_dev_props = ",link-sndbuf=65536";
    fd = peer_dev_up(&l, &d);
    pib_dev_props = "";
    dp_end(&d, &x, PIB_QPT_RC, len);
    wp_dqpn = x.qp.qpn;
    wp_qp_rtr(&d, x.qp.qpn, PIB_ACCESS_REMOTE_READ, 4);
    wp_qp_rts(&d, x.qp.qpn, 4);

    stq_be_p(ext, x.buf);
    stl_be_p(ext + 8, x.key);
    stl_be_p(ext + 12, len);
    wp_batch_begin();
    wp_send(fd, PIB_OP_RC_RDMA_READ_REQUEST, 100, false, ext, 16, NULL, 0);
    wp_send(fd, PIB_OP_RC_RDMA_READ_REQUEST, 100, false, ext, 16, NULL, 0);
    wp_batch_send(fd);
    /* Stalled: frames ready that the full socket does not take (a count, not a time). */
    for (i = 0; qom_get_u32(qts(&d), "/machine/peripheral/hca", "link-tx-ready") == 0; i++) {
        g_assert_cmpuint(i, <, 100000);
        g_usleep(1000);
    }
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, x.key), ==, PIB_AQ_OK);

    /* What left before the DEREG: READ responses in PSN order from 100; then the NAK. */
    for (;;) {
        g_assert_true(wp_recv(fd, &w, TIMEOUT_US / 1000));
        if (w.opcode == PIB_OP_RC_ACKNOWLEDGE) {
            break;
        }
        g_assert_cmpuint(w.psn, ==, 100 + n);
        g_assert_cmpuint(w.opcode, ==, n ? PIB_OP_RC_RDMA_READ_RESP_MIDDLE
                                         : PIB_OP_RC_RDMA_READ_RESP_FIRST);
        n++;
    }
    g_test_message("%u of %u READ responses left before the DEREG", n, len / 256);
    g_assert_cmpuint(n, >, 0);
    g_assert_cmpuint(100 + n, <, last);
    g_assert_cmphex(w.syndrome, ==, PIB_AETH_NAK | PIB_NAK_REM_ACCESS_ERR);
    g_assert_cmpuint(w.psn, ==, 100 + n);
    wp_expect_nothing(fd);
    g_assert_cmpuint(dp_query_qp(&d, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);

    close(fd);
    peer_shutdown(&l);
}

static void test_dp_link_death(void)
{
    TestEnd x;
    PibDev d;
    PeerLink l;

    peer_boot(&l, 1);
    pib_open(&d, l.qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 64);
    dp_end(&d, &x, PIB_QPT_RC, LD_MSG);
    wp_dqpn = x.qp.qpn;

    ld_run(&d, l.path, &x, LD_WRITES, 1);
    ld_run(&d, l.path, &x, LD_READ_HEAD, 2);
    ld_run(&d, l.path, &x, LD_RNR, 3);
    g_assert_cmpuint(dp_err_count(&d), ==, 0);

    pib_close(&d);
    peer_shutdown(&l);
}

/*
 * RDMA FLUSH (IBA 1.5) at the wire, the peer as requester, then as responder.  A FLUSH is
 * BTH, FETH, RETH; the device answers it with a READ response (ONLY) that carries no data,
 * and a duplicate gets the same answer again.  A flush of the whole MR ignores the RETH's
 * range; a zero-length range still names the MR.  Reserved FETH bits or no placement type:
 * invalid request.  A persistent flush (pib has no persistence domain), an MR or a QP without
 * the flush right, a range outside the MR: remote access error.  As requester, the device
 * sends what the WQE says, asks no ACK, takes no ACK for the answer, and completes the FLUSH
 * on the empty READ response.
 */
static void wire_flush_ext(uint8_t *ext, uint32_t feth, uint64_t va, uint32_t rkey,
                           uint32_t len)
{
    stl_be_p(ext, feth);
    stq_be_p(ext + 4, va);
    stl_be_p(ext + 12, rkey);
    stl_be_p(ext + 16, len);
}

/* A FLUSH at psn that must be refused with NAK syndrome nak; then the QP starts over. */
static void wire_flush_refused(PibDev *d, int fd, TestEnd *x, const uint8_t *ext,
                               uint32_t qp_access, uint8_t nak)
{
    WirePkt w;

    wp_send(fd, PIB_OP_RC_FLUSH, 100, false, ext, 20, NULL, 0);
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 100);
    g_assert_cmphex(w.syndrome, ==, PIB_AETH_NAK | nak);
    g_assert_cmpuint(dp_query_qp(d, x->qp.qpn).qp_state, ==, PIB_QPS_ERR);
    g_assert_cmpuint(dp_modify_state(d, x->qp.qpn, PIB_QPS_RESET), ==, PIB_AQ_OK);
    x->qp.sq_pi = x->qp.rq_pi = 0;
    wp_qp_rtr(d, x->qp.qpn, qp_access, 4);
    wp_qp_rts(d, x->qp.qpn, 4);
}

static void test_dp_wire_flush(void)
{
    const uint32_t qp_access = PIB_ACCESS_REMOTE_WRITE | PIB_ACCESS_FLUSH_GLOBAL;
    const uint32_t global = PIB_FLUSH_GLOBAL;
    const uint32_t whole = PIB_FLUSH_GLOBAL | PIB_FLUSH_MR << PIB_FETH_SEL_SHIFT;
    uint64_t before[PIB_CNT_MAX], after[PIB_CNT_MAX];
    uint8_t ext[20];
    uint32_t fkey;
    struct pib_cqe cqe;
    TestEnd x;
    WirePkt w;
    PibDev d;
    int fd;
    PeerLink l;

    fd = peer_dev_up(&l, &d);
    dp_end(&d, &x, PIB_QPT_RC, 16384);
    fkey = dp_reg_mr(&d, x.pdn, PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_REMOTE_WRITE |
                     PIB_ACCESS_FLUSH_GLOBAL, x.buf, 4096);
    wp_dqpn = x.qp.qpn;
    wp_qp_rtr(&d, x.qp.qpn, qp_access, 4);
    wp_qp_rts(&d, x.qp.qpn, 4);
    dp_counters(&d, before);

    /* A range: answered by an empty READ response; its duplicate, the same again. */
    wire_flush_ext(ext, global, x.buf + 64, fkey, 1024);
    wp_send(fd, PIB_OP_RC_FLUSH, 100, false, ext, 20, NULL, 0);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_ONLY, 100);
    g_assert_cmphex(w.syndrome & PIB_AETH_TYPE_MASK, ==, PIB_AETH_ACK);
    g_assert_cmpuint(w.paylen, ==, 0);
    g_assert_cmpuint(w.msn, ==, 1);
    wp_send(fd, PIB_OP_RC_FLUSH, 100, false, ext, 20, NULL, 0);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_ONLY, 100);
    g_assert_cmpuint(w.paylen, ==, 0);
    dp_counters(&d, after);
    g_assert_cmpuint(after[PIB_CNT_DUPLICATE_REQUESTS] -
                     before[PIB_CNT_DUPLICATE_REQUESTS], ==, 1);

    /* The whole MR, whatever the RETH says; a zero-length range at the MR's end. */
    wire_flush_ext(ext, whole, 0, fkey, 0xffffffff);
    wp_send(fd, PIB_OP_RC_FLUSH, 101, false, ext, 20, NULL, 0);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_ONLY, 101);
    g_assert_cmpuint(w.paylen, ==, 0);
    wire_flush_ext(ext, global, x.buf + 4096, fkey, 0);
    wp_send(fd, PIB_OP_RC_FLUSH, 102, false, ext, 20, NULL, 0);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_ONLY, 102);
    g_assert_cmpuint(w.msn, ==, 3);
    wp_expect_nothing(fd);
    g_assert_cmpuint(dp_query_qp(&d, x.qp.qpn).qp_state, ==, PIB_QPS_RTS);

    /* What the responder refuses (each time from PSN 100 on a fresh QP). */
    g_assert_cmpuint(dp_modify_state(&d, x.qp.qpn, PIB_QPS_RESET), ==, PIB_AQ_OK);
    wp_qp_rtr(&d, x.qp.qpn, qp_access, 4);
    wp_qp_rts(&d, x.qp.qpn, 4);
    wire_flush_ext(ext, global | 1u << 6, x.buf, fkey, 64);         /* reserved bit */
    wire_flush_refused(&d, fd, &x, ext, qp_access, PIB_NAK_INVALID_REQ);
    wire_flush_ext(ext, 0, x.buf, fkey, 64);                        /* no placement */
    wire_flush_refused(&d, fd, &x, ext, qp_access, PIB_NAK_INVALID_REQ);
    wire_flush_ext(ext, PIB_FLUSH_GLOBAL | 2u << PIB_FETH_SEL_SHIFT, x.buf, fkey, 64);
    wire_flush_refused(&d, fd, &x, ext, qp_access, PIB_NAK_INVALID_REQ);
    wire_flush_ext(ext, PIB_FLUSH_PERSISTENT, x.buf, fkey, 64);     /* no persistence */
    wire_flush_refused(&d, fd, &x, ext, qp_access, PIB_NAK_REM_ACCESS_ERR);
    wire_flush_ext(ext, global, x.buf, x.key, 64);                  /* MR without it */
    wire_flush_refused(&d, fd, &x, ext, qp_access, PIB_NAK_REM_ACCESS_ERR);
    wire_flush_ext(ext, global, x.buf, x.key, 0);                   /* even empty */
    wire_flush_refused(&d, fd, &x, ext, qp_access, PIB_NAK_REM_ACCESS_ERR);
    wire_flush_ext(ext, global, x.buf + 4000, fkey, 200);           /* past the MR */
    wire_flush_refused(&d, fd, &x, ext, qp_access, PIB_NAK_REM_ACCESS_ERR);
    wire_flush_ext(ext, global, x.buf, fkey, 64);                   /* QP without it */
    g_assert_cmpuint(dp_modify_state(&d, x.qp.qpn, PIB_QPS_RESET), ==, PIB_AQ_OK);
    wp_qp_rtr(&d, x.qp.qpn, PIB_ACCESS_REMOTE_WRITE, 4);
    wp_qp_rts(&d, x.qp.qpn, 4);
    wire_flush_refused(&d, fd, &x, ext, qp_access, PIB_NAK_REM_ACCESS_ERR);

    /*
     * The device as requester: the FLUSH goes out as the WQE says, with no ACK request; an
     * ACK does not complete it, the empty READ response does.
     */
    dp_post_send(&d, &x.qp, PIB_WQE_FLUSH, PIB_WQE_F_SIGNALED, 0x30, NULL, 0,
                 0x12340000, 0xbeef);
    /* dp_post_send() wrote imm_inv 0 and compare_add 0: a WQE with no placement type. */
    dp_expect(&d, &x.scq, 0x30, PIB_WC_LOC_QP_OP_ERR, PIB_CQE_FLUSH, NULL);
    g_assert_cmpuint(dp_modify_state(&d, x.qp.qpn, PIB_QPS_RESET), ==, PIB_AQ_OK);
    x.qp.sq_pi = x.qp.rq_pi = 0;
    wp_qp_rtr(&d, x.qp.qpn, qp_access, 4);
    wp_qp_rts(&d, x.qp.qpn, 4);
    {
        struct pib_send_wqe wqe = {
            .opcode = PIB_WQE_FLUSH, .flags = PIB_WQE_F_SIGNALED,
            .wr_id = cpu_to_le64(0x31), .remote_addr = cpu_to_le64(0x12340000),
            .rkey = cpu_to_le32(0xbeef), .compare_add = cpu_to_le64(4096),
            .imm_inv = cpu_to_le32(PIB_FLUSH_GLOBAL),
        };

        dp_post_send_raw(&d, &x.qp, &wqe, NULL, 0, true);
    }
    wp_expect(fd, &w, PIB_OP_RC_FLUSH, 500);
    g_assert_false(w.ackreq);
    g_assert_cmphex(w.feth, ==, PIB_FLUSH_GLOBAL);
    g_assert_cmphex(w.va, ==, 0x12340000);
    g_assert_cmphex(w.rkey, ==, 0xbeef);
    g_assert_cmpuint(w.dmalen, ==, 4096);
    wp_ack(fd, 500, PIB_AETH_ACK | 0x1f);
    dp_expect_none(&d, &x.scq);
    wp_send(fd, PIB_OP_RC_RDMA_READ_RESP_ONLY, 500, false, "\x1f\0\0\1", 4, NULL, 0);
    dp_expect(&d, &x.scq, 0x31, PIB_WC_SUCCESS, PIB_CQE_FLUSH, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 0);

    g_assert_cmpuint(dp_err_count(&d), ==, 1);      /* the WQE with no placement type */
    close(fd);
    pib_close(&d);
    peer_shutdown(&l);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    qtest_add_func("/pib/data/wire", test_dp_wire);
    qtest_add_func("/pib/data/xrc", test_dp_xrc);
    qtest_add_func("/pib/data/wire-flush", test_dp_wire_flush);
    qtest_add_func("/pib/data/link-death", test_dp_link_death);
    qtest_add_func("/pib/data/wire-read-key-gone", test_dp_wire_read_key_gone);

    return g_test_run();
}
