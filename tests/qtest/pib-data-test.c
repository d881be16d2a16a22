/*
 * QTest: the pib HCA's data path (hw/pib)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The test plays the driver and the provider at once (the dp_* mini-driver in
 * pib-qtest.h): it builds rings and page lists in guest memory, writes WQEs
 * and rings doorbells exactly as guest-provider/qp.c does, and reads CQEs by
 * their phase bit as guest-provider/cq.c does.  Most tests use two devices on
 * one link in one QEMU (TestPair); the wire and link-death tests are the
 * remote HCA themselves, speaking IB packets on the device's socket.
 *
 * Covered: every object and its admin commands, RC SEND/RECV and loopback,
 * local errors and flushes, RNR, retry, RDMA WRITE/READ and atomics, UD and
 * UC, CQ overflow, SRQs, memory windows, the transport rules only a
 * misbehaving peer exercises, and the requester's timers when the link dies.
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-data-test
 */

#include "qemu/osdep.h"
#include <glib/gstdio.h>

#include "pib-qtest.h"

/* Objects and their admin commands: every field checked. */
static void test_dp_objects(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0");
    struct pib_device_attr dev_attr;
    struct pib_admin_cmd cmd;
    struct pib_qp_attr qa;
    PibDev d;
    uint32_t pdn, key1, key2, key3, errs = 0;
    uint64_t buf, pbl;
    TestCq cq;
    TestQp qp;

    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 16);

    /* What the data path implements, and nothing else. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_QUERY_DEVICE,
        .resp_addr = cpu_to_le64(d.resp),
        .resp_len = cpu_to_le32(sizeof(dev_attr)),
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_OK);
    qtest_memread(qts(&d), d.resp, &dev_attr, sizeof(dev_attr));
    g_assert_cmphex(le32_to_cpu(dev_attr.device_cap_flags), ==,
                    PIB_DEV_CAP_RC | PIB_DEV_CAP_RDMA | PIB_DEV_CAP_ATOMIC |
                    PIB_DEV_CAP_UC | PIB_DEV_CAP_UD | PIB_DEV_CAP_SRQ |
                    PIB_DEV_CAP_RC_RNR_NAK_GEN | PIB_DEV_CAP_MEM_WINDOW |
                    PIB_DEV_CAP_MEM_MGT_EXT | PIB_DEV_CAP_RESIZE |
                    PIB_DEV_CAP_CLOCK | PIB_DEV_CAP_ATOMIC_WRITE |
                    PIB_DEV_CAP_XRC);
    g_assert_cmpuint(le32_to_cpu(dev_attr.clock_khz), ==, PIB_CLOCK_KHZ);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_fast_reg_pages), ==,
                     PIB_MAX_FAST_REG_PAGES);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_srq), ==, 256);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_sge), ==, PIB_MAX_SGE);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_inline_data), ==,
                     PIB_MAX_INLINE_DATA);

    /* PD */
    pdn = dp_create_pd(&d);
    g_assert_cmpuint(pdn, !=, 0);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_PD, pdn + 1), ==,
                     PIB_AQ_BAD_RESOURCE);

    /* REG_MR: every field */
    buf = dp_alloc(&d, 3 * 4096);
    g_assert_cmpuint(dp_reg_mr_status(&d, pdn + 1, 0, buf, 4096, NULL), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_reg_mr_status(&d, pdn, 0x100, buf, 4096, NULL), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_reg_mr_status(&d, pdn, PIB_ACCESS_REMOTE_WRITE, buf,
                                      4096, NULL), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_reg_mr_status(&d, pdn, 0, buf, 0, NULL), ==,
                     PIB_AQ_BAD_PARAM);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_REG_MR,
        .in.reg_mr = {
            .pdn = cpu_to_le32(pdn),
            .iova = cpu_to_le64(buf + 100),
            .length = cpu_to_le64(8192),        /* spans 3 pages */
            .pbl_addr = cpu_to_le64(dp_pbl(&d, buf, 3)),
            .npages = cpu_to_le32(2),
        },
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.reg_mr.npages = cpu_to_le32(0xffffffff);
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.reg_mr.npages = cpu_to_le32(3);
    cmd.in.reg_mr.pbl_addr = cpu_to_le64(ADDR_OUTSIDE_RAM);
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_DMA_ERROR);
    pib_expect_guest_error(&d, &errs, PIB_GERR_DMA);
    pbl = dp_pbl(&d, buf, 3);
    qtest_writeq(qts(&d), pbl + 8, buf + 4096 + 8);     /* not page aligned */
    cmd.in.reg_mr.pbl_addr = cpu_to_le64(pbl);
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.reg_mr.length = cpu_to_le64(1ull << 40);     /* past max_mr_size */
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);

    /* Keys: index << 8 | a key byte that changes on each reuse. */
    key1 = dp_reg_mr(&d, pdn, PIB_ACCESS_LOCAL_WRITE, buf, 4096);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_PD, pdn), ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key1 ^ 1), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key1), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key1), ==,
                     PIB_AQ_BAD_RESOURCE);
    key2 = dp_reg_mr(&d, pdn, PIB_ACCESS_LOCAL_WRITE, buf, 4096);
    g_assert_cmphex(key2 >> 8, ==, key1 >> 8);
    g_assert_cmphex(key2, !=, key1);
    /* The kernel's physical MR: iova 0, no page list. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_REG_MR,
        .in.reg_mr = {
            .pdn = cpu_to_le32(pdn),
            .access = cpu_to_le32(PIB_ACCESS_LOCAL_WRITE),
            .length = cpu_to_le64(UINT64_MAX),
            .flags = cpu_to_le32(PIB_MR_F_PHYS),
        },
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_OK);
    cmd.in.reg_mr.iova = cpu_to_le64(4096);
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    key3 = dp_reg_mr(&d, pdn, 0, buf, 100);

    /* CREATE_CQ */
    g_assert_cmpuint(dp_create_cq_status(&d, 3, DP_UAR, &cq), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_cq_status(&d, 1, DP_UAR, &cq), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_cq_status(&d, 1u << 17, DP_UAR, &cq), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_cq_status(&d, 8, 5, &cq), ==,
                     PIB_AQ_BAD_PARAM);             /* UAR 5 not allocated */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_CQ,
        .in.create_cq = {
            .depth = cpu_to_le32(256),              /* 2 pages + 1 */
            .npages = cpu_to_le32(2),
            .pbl_addr = cpu_to_le64(pbl),
        },
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    dp_create_cq(&d, 8, &cq);

    /* CREATE_QP: the special QPs are QP0 and QP1, one each */
    g_assert_cmpuint(dp_create_qp_status(&d, PIB_QPT_SMI, pdn, &cq, &cq, 4, 4,
                                         DP_UAR, &qp), ==, PIB_AQ_OK);
    g_assert_cmpuint(qp.qpn, ==, 0);
    g_assert_cmpuint(dp_create_qp_status(&d, PIB_QPT_SMI, pdn, &cq, &cq, 4, 4,
                                         DP_UAR, &qp), ==, PIB_AQ_NO_RESOURCES);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_QP, 0), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_create_qp_status(&d, PIB_QPT_GSI, pdn, &cq, &cq, 4, 4,
                                         DP_UAR, &qp), ==, PIB_AQ_OK);
    g_assert_cmpuint(qp.qpn, ==, 1);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_QP, 1), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_create_qp_status(&d, PIB_QPT_UD + 1, pdn, &cq, &cq, 4,
                                         4, DP_UAR, &qp), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_qp_status(&d, PIB_QPT_RC, pdn, &cq, &cq, 3, 4,
                                         DP_UAR, &qp), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_qp_status(&d, PIB_QPT_RC, pdn, &cq, &cq, 4,
                                         8192, DP_UAR, &qp), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_qp_status(&d, PIB_QPT_RC, pdn + 7, &cq, &cq, 4,
                                         4, DP_UAR, &qp), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_create_qp_status(&d, PIB_QPT_RC, pdn, &cq, &cq, 4, 4,
                                         9, &qp), ==, PIB_AQ_BAD_PARAM);
    dp_create_qp(&d, PIB_QPT_RC, pdn, &cq, &cq, &qp);
    g_assert_cmpuint(qp.qpn, >=, 2);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_CQ, cq.cqn), ==,
                     PIB_AQ_BUSY);

    /* QUERY_QP: RESET, and the capabilities of its rings */
    qa = dp_query_qp(&d, qp.qpn);
    g_assert_cmpuint(qa.qp_state, ==, PIB_QPS_RESET);
    g_assert_cmpuint(le32_to_cpu(qa.max_send_wr), ==, 16);
    g_assert_cmpuint(le32_to_cpu(qa.max_recv_wr), ==, 16);
    g_assert_cmpuint(le32_to_cpu(qa.max_send_sge), ==, 12);
    g_assert_cmpuint(le32_to_cpu(qa.max_recv_sge), ==, 3);
    g_assert_cmpuint(le32_to_cpu(qa.max_inline_data), ==, 192);

    /* MODIFY_QP: the IBTA transition table */
    g_assert_cmpuint(dp_modify_state(&d, qp.qpn, PIB_QPS_RTS), ==,
                     PIB_AQ_BAD_STATE);
    g_assert_cmpuint(dp_modify_state(&d, qp.qpn, PIB_QPS_ERR), ==,
                     PIB_AQ_BAD_STATE);
    g_assert_cmpuint(dp_modify_state(&d, qp.qpn, 9), ==, PIB_AQ_BAD_PARAM);
    qa = (struct pib_qp_attr) {                     /* no ACCESS_FLAGS */
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX |
                                 PIB_QP_PORT),
        .qp_state = PIB_QPS_INIT,
        .port_num = 1,
    };
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_PARAM);
    qa.attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX |
                               PIB_QP_PORT | PIB_QP_ACCESS_FLAGS |
                               PIB_QP_SQ_PSN);      /* not allowed here */
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_PARAM);
    qa.attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX |
                               PIB_QP_PORT | PIB_QP_ACCESS_FLAGS);
    qa.port_num = 2;
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_PARAM);
    qa.port_num = 1;
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_OK);
    qa = (struct pib_qp_attr) {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_AV | PIB_QP_PATH_MTU |
                                 PIB_QP_DEST_QPN | PIB_QP_RQ_PSN |
                                 PIB_QP_MAX_DEST_RD_ATOMIC |
                                 PIB_QP_MIN_RNR_TIMER),
        .qp_state = PIB_QPS_RTR,
        .path_mtu = 6,
        .dlid = cpu_to_le16(2),
        .dest_qp_num = cpu_to_le32(5),
    };
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_PARAM);
    qa.path_mtu = 5;
    qa.dlid = cpu_to_le16(0xc001);                  /* multicast */
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_PARAM);
    qa.dlid = cpu_to_le16(2);
    qa.max_dest_rd_atomic = 17;
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_PARAM);
    qa.max_dest_rd_atomic = 1;
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_OK);
    qa = dp_query_qp(&d, qp.qpn);
    g_assert_cmpuint(qa.qp_state, ==, PIB_QPS_RTR);
    g_assert_cmpuint(le16_to_cpu(qa.dlid), ==, 2);
    g_assert_cmpuint(le32_to_cpu(qa.dest_qp_num), ==, 5);
    qa = (struct pib_qp_attr) {                     /* the wrong CUR_STATE */
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_CUR_STATE),
        .qp_state = PIB_QPS_ERR,
        .cur_qp_state = PIB_QPS_RTS,
    };
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_STATE);
    g_assert_cmpuint(dp_modify_state(&d, qp.qpn, PIB_QPS_ERR), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&d, qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&d, 999, PIB_QPS_RESET), ==,
                     PIB_AQ_BAD_RESOURCE);

    /* Tear down in order; each object freed once. */
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_QP, qp.qpn), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_QP, qp.qpn), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_CQ, cq.cqn), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key2), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key3), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_PD, pdn), ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_err_count(&d), ==, errs);

    /* A reset frees everything (the physical MR included). */
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_RESET);
    pib_enable(&d, 16, 16);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_PD, pdn), ==,
                     PIB_AQ_BAD_RESOURCE);

    pib_close(&d);
    qtest_shutdown(qs);
}

/* The CQN of CEQE idx if the device has written it (first pass of the CEQ), else 0 (no CQ). */
static uint32_t dp_ceqe_cqn(PibDev *d, uint64_t ceq, uint32_t idx)
{
    struct pib_ceqe e;

    qtest_memread(qts(d), ceq + idx * sizeof(e), &e, sizeof(e));
    return (e.flags & PIB_CEQE_F_PHASE) ? le32_to_cpu(e.cqn) : 0;
}

/* The CQN of CEQE idx, once the device has written it (within TIMEOUT_US). */
static uint32_t dp_wait_ceqe(PibDev *d, uint64_t ceq, uint32_t idx)
{
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;
    uint32_t cqn;

    while (!(cqn = dp_ceqe_cqn(d, ceq, idx))) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(dp_poll_interval_us);
    }
    return cqn;
}

/* RC SEND/RECV between the two HCAs, and loopback on one of them. */
static void test_dp_send_recv(void)
{
    static const uint32_t sizes[] = { 0, 1, 1024, 4097, 10000 };
    TestPair p;
    TestEnd x, y, l1, l2;
    struct pib_cqe cqe;
    struct pib_sge sge[3];
    struct pib_send_wqe wqe;
    struct pib_sge rsg, ssg;
    uint8_t inline_data[150], got[150], imm[4] = { 0xde, 0xad, 0xbe, 0xef };
    uint8_t guard;
    size_t i;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 64 * 1024);
    dp_end(&p.b, &y, PIB_QPT_RC, 64 * 1024);
    dp_link_ends(&x, 1, &y, 2);

    /* One message per size (MTU 1024): the bytes, and nothing beyond. */
    for (i = 0; i < G_N_ELEMENTS(sizes); i++) {
        qtest_memset(qts(&p.b), y.buf, 0x5a, 16384 + 1);
        dp_fill(&p.a, x.buf, sizes[i], i);
        sge[0] = dp_sge(y.buf, 16384, y.key);
        dp_post_recv(&p.b, &y.qp, 0x100 + i, sge, 1);
        sge[0] = dp_sge(x.buf, sizes[i], x.key);
        dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x200 + i,
                     sge, 1, 0, 0);
        dp_expect(&p.a, &x.scq, 0x200 + i, PIB_WC_SUCCESS, PIB_CQE_SEND,
                  &cqe);
        g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, x.qp.qpn);
        g_assert_cmpuint(le16_to_cpu(cqe.wqe_index), ==, x.qp.sq_pi - 1);
        dp_expect(&p.b, &y.rcq, 0x100 + i, PIB_WC_SUCCESS, PIB_CQE_RECV,
                  &cqe);
        g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, sizes[i]);
        g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, y.qp.qpn);
        g_assert_cmpuint(cqe.flags & PIB_CQE_F_IMM, ==, 0);
        dp_assert_same(&p.a, x.buf, &p.b, y.buf, sizes[i]);
        guard = qtest_readb(qts(&p.b), y.buf + sizes[i]);
        g_assert_cmphex(guard, ==, 0x5a);
    }

    /* Gather 3 SGEs into a receive of 2; SEND with immediate data. */
    dp_fill(&p.a, x.buf, 8192, 77);
    sge[0] = dp_sge(y.buf + 1, 1000, y.key);
    sge[1] = dp_sge(y.buf + 4000, 3000, y.key);
    dp_post_recv(&p.b, &y.qp, 0x300, sge, 2);
    sge[0] = dp_sge(x.buf + 3, 500, x.key);
    sge[1] = dp_sge(x.buf + 2000, 1200, x.key);
    sge[2] = dp_sge(x.buf + 5000, 300, x.key);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_SEND_IMM,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 3,
        .wr_id = cpu_to_le64(0x301),
    };
    memcpy(&wqe.imm_inv, imm, 4);
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge), true);
    dp_expect(&p.a, &x.scq, 0x301, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x300, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 2000);
    g_assert_cmpuint(cqe.flags & PIB_CQE_F_IMM, ==, PIB_CQE_F_IMM);
    g_assert_cmpmem(&cqe.imm_inv, 4, imm, 4);       /* raw, as on the wire */
    dp_assert_same(&p.a, x.buf + 3, &p.b, y.buf + 1, 500);
    dp_assert_same(&p.a, x.buf + 2000, &p.b, y.buf + 501, 500);
    dp_assert_same(&p.a, x.buf + 2500, &p.b, y.buf + 4000, 700);
    dp_assert_same(&p.a, x.buf + 5000, &p.b, y.buf + 4700, 300);

    /* Inline data; an unsignaled SEND gets no CQE (the next one retires it) */
    for (i = 0; i < sizeof(inline_data); i++) {
        inline_data[i] = i ^ 0x33;
    }
    sge[0] = dp_sge(y.buf, 4096, y.key);
    dp_post_recv(&p.b, &y.qp, 0x400, sge, 1);
    dp_post_recv(&p.b, &y.qp, 0x401, sge, 1);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_SEND,
        .flags = PIB_WQE_F_INLINE,
        .wr_id = cpu_to_le64(0x402),
        .inline_len = cpu_to_le32(sizeof(inline_data)),
    };
    dp_post_send_raw(&p.a, &x.qp, &wqe, inline_data, sizeof(inline_data),
                     false);
    sge[0] = dp_sge(x.buf, 10, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x403, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x403, PIB_WC_SUCCESS, PIB_CQE_SEND, &cqe);
    g_assert_cmpuint(le16_to_cpu(cqe.wqe_index), ==, x.qp.sq_pi - 1);
    dp_expect(&p.b, &y.rcq, 0x400, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, sizeof(inline_data));
    dp_expect(&p.b, &y.rcq, 0x401, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    dp_expect_none(&p.a, &x.scq);
    qtest_memread(qts(&p.b), y.buf + 10, got, sizeof(got) - 10);
    g_assert_cmpmem(got, sizeof(got) - 10, inline_data + 10,
                    sizeof(got) - 10);

    /*
     * Completion events: armed for solicited completions only, an ordinary
     * SEND raises nothing; a solicited one writes a CEQE naming the CQ and
     * raises MSI-X vector 2.
     */
    rsg = dp_sge(y.buf, 4096, y.key);
    ssg = dp_sge(x.buf, 10, x.key);
    g_assert_false(qpci_msix_pending(p.b.dev, PIB_MSIX_VEC_CEQ));
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_CQ_DB,
                y.rcq.cqn | PIB_DB_CQ_ARM | PIB_DB_CQ_SOLICITED, y.rcq.ci);
    dp_post_recv(&p.b, &y.qp, 0x500, &rsg, 1);
    dp_post_recv(&p.b, &y.qp, 0x501, &rsg, 1);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x502, &ssg, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x502, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x500, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    g_assert_cmpuint(dp_ceqe_cqn(&p.b, p.ceq_b, 0), ==, 0);
    g_assert_false(qpci_msix_pending(p.b.dev, PIB_MSIX_VEC_CEQ));
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND,
                 PIB_WQE_F_SIGNALED | PIB_WQE_F_SOLICITED, 0x503, &ssg, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x503, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x501, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    g_assert_cmpuint(dp_ceqe_cqn(&p.b, p.ceq_b, 0), ==, y.rcq.cqn);
    g_assert_true(qpci_msix_pending(p.b.dev, PIB_MSIX_VEC_CEQ));
    wr(&p.b, PIB_REG_CEQ_DB, 1);
    /* Arming "next" with an unread CQE behind the consumer index: at once. */
    dp_post_recv(&p.b, &y.qp, 0x505, &rsg, 1);
    dp_post_recv(&p.b, &y.qp, 0x507, &rsg, 1);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, 0, 0x504, &ssg, 1, 0, 0);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x506, &ssg, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x506, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_doorbell(&p.a, DP_UAR, PIB_UAR_CQ_DB, x.scq.cqn | PIB_DB_CQ_ARM,
                x.scq.ci - 1);
    g_assert_cmpuint(dp_wait_ceqe(&p.a, p.ceq_a, 0), ==, x.scq.cqn);
    dp_expect(&p.b, &y.rcq, 0x505, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    dp_expect(&p.b, &y.rcq, 0x507, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);

    /* Loopback: two QPs of HCA A, talking through A's own LID. */
    dp_end(&p.a, &l1, PIB_QPT_RC, 16384);
    dp_end(&p.a, &l2, PIB_QPT_RC, 16384);
    dp_link_ends(&l1, 1, &l2, 1);
    dp_fill(&p.a, l1.buf, 5000, 9);
    sge[0] = dp_sge(l2.buf, 8192, l2.key);
    dp_post_recv(&p.a, &l2.qp, 0x600, sge, 1);
    sge[0] = dp_sge(l1.buf, 5000, l1.key);
    dp_post_send(&p.a, &l1.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x601, sge, 1,
                 0, 0);
    dp_expect(&p.a, &l1.scq, 0x601, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.a, &l2.rcq, 0x600, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 5000);
    dp_assert_same(&p.a, l1.buf, &p.a, l2.buf, 5000);

    /* Nothing of this was a guest error. */
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/* Local errors, flushes, doorbell rules. */
static void test_dp_errors(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_cqe cqe;
    struct pib_sge sge[1];
    struct pib_send_wqe wqe;
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe acqe;
    uint32_t errs_a = 0, uar;
    int i;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);

    /* A doorbell for our QP rung on another UAR page: counted, ignored. */
    cmd = (struct pib_admin_cmd) { .opcode = PIB_CMD_ALLOC_UAR };
    g_assert_cmpuint(pib_cmd(&p.a, &cmd, &acqe), ==, PIB_AQ_OK);
    uar = le32_to_cpu(acqe.result0);
    g_assert_cmpuint(uar, !=, DP_UAR);
    dp_doorbell(&p.a, uar, PIB_UAR_SQ_DB, x.qp.qpn, 1);
    pib_expect_guest_error(&p.a, &errs_a, PIB_GERR_UAR_DB_BAD_OBJ);
    dp_doorbell(&p.a, uar, PIB_UAR_CQ_DB, x.scq.cqn | PIB_DB_CQ_ARM, 0);
    pib_expect_guest_error(&p.a, &errs_a, PIB_GERR_UAR_DB_BAD_OBJ);
    /*
     * ... and a producer index more than the depth ahead, or a CQ consumer
     * index past the producer.
     */
    dp_doorbell(&p.a, DP_UAR, PIB_UAR_SQ_DB, x.qp.qpn, 17);
    pib_expect_guest_error(&p.a, &errs_a, PIB_GERR_UAR_DB_RANGE);
    dp_doorbell(&p.a, DP_UAR, PIB_UAR_CQ_DB, x.scq.cqn, 3);
    pib_expect_guest_error(&p.a, &errs_a, PIB_GERR_UAR_DB_RANGE);
    /* The page still owns nothing, so it can go. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_DEALLOC_UAR, .in.uar.uar = cpu_to_le32(uar),
    };
    g_assert_cmpuint(pib_cmd(&p.a, &cmd, NULL), ==, PIB_AQ_OK);
    dp_expect_none(&p.a, &x.scq);

    /* A SEND with a bad lkey (key byte flipped): LOC_PROT_ERR, QP to ERR */
    sge[0] = dp_sge(y.buf, 4096, y.key);
    dp_post_recv(&p.b, &y.qp, 0x10, sge, 1);
    sge[0] = dp_sge(x.buf, 100, x.key ^ 0xff);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x11, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x11, PIB_WC_LOC_PROT_ERR, PIB_CQE_SEND, NULL);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    /* ... and what is posted afterwards is flushed, opcode and all. */
    sge[0] = dp_sge(x.buf, 8, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, 0, 0x12, sge, 1, y.buf,
                 y.key);
    dp_expect(&p.a, &x.scq, 0x12, PIB_WC_WR_FLUSH_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    dp_post_recv(&p.a, &x.qp, 0x13, sge, 1);
    dp_expect(&p.a, &x.rcq, 0x13, PIB_WC_WR_FLUSH_ERR, PIB_CQE_RECV, NULL);
    dp_expect_none(&p.b, &y.rcq);   /* nothing went on the wire */

    /* MODIFY to ERR flushes the posted receives, in order. */
    for (i = 0; i < 3; i++) {
        dp_post_recv(&p.b, &y.qp, 0x20 + i, sge, 1);
    }
    g_assert_cmpuint(dp_modify_state(&p.b, y.qp.qpn, PIB_QPS_ERR), ==,
                     PIB_AQ_OK);
    dp_expect(&p.b, &y.rcq, 0x10, PIB_WC_WR_FLUSH_ERR, PIB_CQE_RECV, NULL);
    for (i = 0; i < 3; i++) {
        dp_expect(&p.b, &y.rcq, 0x20 + i, PIB_WC_WR_FLUSH_ERR, PIB_CQE_RECV,
                  &cqe);
        g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, y.qp.qpn);
    }
    /* RESET starts the rings over at index 0. */
    g_assert_cmpuint(dp_modify_state(&p.a, x.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&p.b, y.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x.qp.sq_pi = x.qp.rq_pi = y.qp.sq_pi = y.qp.rq_pi = 0;
    dp_link_ends(&x, 1, &y, 2);

    /* A malformed WQE: unknown opcode -> LOC_QP_OP_ERR and a guest error */
    wqe = (struct pib_send_wqe) {
        .opcode = 0x42,
        .flags = PIB_WQE_F_SIGNALED,
        .wr_id = cpu_to_le64(0x30),
    };
    dp_post_send_raw(&p.a, &x.qp, &wqe, NULL, 0, true);
    dp_expect(&p.a, &x.scq, 0x30, PIB_WC_LOC_QP_OP_ERR, PIB_CQE_SEND, NULL);
    pib_expect_guest_error(&p.a, &errs_a, PIB_GERR_WQE);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    g_assert_cmpuint(dp_modify_state(&p.a, x.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&p.b, y.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x.qp.sq_pi = x.qp.rq_pi = y.qp.sq_pi = y.qp.rq_pi = 0;
    dp_link_ends(&x, 1, &y, 2);

    /* More SGEs than the slot holds: LOC_LEN_ERR, a guest error too. */
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_SEND,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 13,
        .wr_id = cpu_to_le64(0x31),
    };
    dp_post_send_raw(&p.a, &x.qp, &wqe, NULL, 0, true);
    dp_expect(&p.a, &x.scq, 0x31, PIB_WC_LOC_LEN_ERR, PIB_CQE_SEND, NULL);
    pib_expect_guest_error(&p.a, &errs_a, PIB_GERR_WQE);
    g_assert_cmpuint(dp_modify_state(&p.a, x.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&p.b, y.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x.qp.sq_pi = x.qp.rq_pi = y.qp.sq_pi = y.qp.rq_pi = 0;
    dp_link_ends(&x, 1, &y, 2);

    /*
     * A receive buffer too small: the receive fails with LOC_LEN_ERR, the
     * requester hears "invalid request", both QPs end in ERR.
     */
    sge[0] = dp_sge(y.buf, 16, y.key);
    dp_post_recv(&p.b, &y.qp, 0x40, sge, 1);
    sge[0] = dp_sge(x.buf, 100, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x41, sge, 1,
                 0, 0);
    dp_expect(&p.b, &y.rcq, 0x40, PIB_WC_LOC_LEN_ERR, PIB_CQE_RECV, NULL);
    dp_expect(&p.a, &x.scq, 0x41, PIB_WC_REM_INV_REQ_ERR, PIB_CQE_SEND, NULL);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    g_assert_cmpuint(dp_query_qp(&p.b, y.qp.qpn).qp_state, ==, PIB_QPS_ERR);

    /* DESTROY_QP flushes first. */
    sge[0] = dp_sge(x.buf, 16, x.key);
    dp_post_recv(&p.a, &x.qp, 0x50, sge, 1);
    g_assert_cmpuint(dp_obj_cmd(&p.a, PIB_CMD_DESTROY_QP, x.qp.qpn), ==,
                     PIB_AQ_OK);
    dp_expect(&p.a, &x.rcq, 0x50, PIB_WC_WR_FLUSH_ERR, PIB_CQE_RECV, NULL);

    g_assert_cmpuint(dp_err_count(&p.a), ==, errs_a);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/* RNR: a SEND before the receive is posted; retried, or given up. */
static void test_dp_rnr(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    int i;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);         /* rnr_retry 7: forever */

    dp_fill(&p.a, x.buf, 3000, 5);
    sge[0] = dp_sge(x.buf, 3000, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x1, sge, 1,
                 0, 0);
    /* RNR NAKs while the virtual clock runs and nobody posts a receive */
    for (i = 0; i < 5; i++) {
        dp_expect_none(&p.a, &x.scq);
        qtest_clock_step(qts(&p.a), 1000 * 1000);
    }
    sge[0] = dp_sge(y.buf, 8192, y.key);
    dp_post_recv(&p.b, &y.qp, 0x2, sge, 1);
    dp_step_until_cqe(&p.a, &x.scq, &cqe, 1000 * 1000, 500);
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x1);
    g_assert_cmpuint(cqe.status, ==, PIB_WC_SUCCESS);
    dp_expect(&p.b, &y.rcq, 0x2, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf, 3000);

    /* rnr_retry 0: the first RNR NAK is final. */
    g_assert_cmpuint(dp_modify_state(&p.a, x.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&p.b, y.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x.qp.sq_pi = x.qp.rq_pi = y.qp.sq_pi = y.qp.rq_pi = 0;
    dp_connect_ex(&p.a, &x.qp, 2, y.qp.qpn, DP_MTU_1024, 14, 7, 0);
    dp_connect(&p.b, &y.qp, 1, x.qp.qpn);
    sge[0] = dp_sge(x.buf, 10, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x3, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x3, PIB_WC_RNR_RETRY_EXC_ERR, PIB_CQE_SEND,
              NULL);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    dp_pair_down(&p);
}

/*
 * Retransmission: a peer QP that drops everything (left in INIT).  The ACK
 * timeout fires retry_cnt + 1 times, then RETRY_EXC_ERR.
 */
static void test_dp_retry(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX |
                                 PIB_QP_PORT | PIB_QP_ACCESS_FLAGS),
        .qp_state = PIB_QPS_INIT,
        .port_num = 1,
    };
    uint64_t cnt[PIB_CNT_MAX];

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    g_assert_cmpuint(dp_modify(&p.b, y.qp.qpn, &a), ==, PIB_AQ_OK);
    /* timeout 12: 16.8 ms; retry_cnt 2 */
    dp_connect_ex(&p.a, &x.qp, 2, y.qp.qpn, DP_MTU_1024, 12, 2, 7);
    sge[0] = dp_sge(x.buf, 5000, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x1, sge, 1,
                 0, 0);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x2, sge, 1,
                 0, 0);
    dp_step_until_cqe(&p.a, &x.scq, &cqe, 20 * 1000 * 1000, 500);
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x1);
    g_assert_cmpuint(cqe.status, ==, PIB_WC_RETRY_EXC_ERR);
    dp_counters(&p.a, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_RETRY_TIMEOUTS], ==, 3);   /* 1 + retry_cnt */
    g_assert_cmpuint(cnt[PIB_CNT_RETRANSMITS], ==, 2 * 2 * 5);
    dp_expect(&p.a, &x.scq, 0x2, PIB_WC_WR_FLUSH_ERR, PIB_CQE_SEND, NULL);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    dp_pair_down(&p);
}

/* RDMA WRITE (+IMM), READ, atomics, remote access errors. */
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

/* UD: Q_Keys, the GRH space, source QP and LID in the CQE; and UC. */
static void test_dp_ud_uc(void)
{
    TestPair p;
    TestEnd x, y, u1, u2;
    struct pib_sge sge[1];
    struct pib_send_wqe wqe;
    struct pib_cqe cqe;
    struct pib_port_attr attr;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_UD, 16384);
    dp_end(&p.b, &y, PIB_QPT_UD, 16384);
    dp_ud_ready(&p.a, &x.qp, 0x1111);
    dp_ud_ready(&p.b, &y.qp, 0x2222);

    dp_fill(&p.a, x.buf, 1000, 3);
    qtest_memset(qts(&p.b), y.buf, 0xee, 2048);
    sge[0] = dp_sge(y.buf, 2048, y.key);
    dp_post_recv(&p.b, &y.qp, 0x1, sge, 1);
    sge[0] = dp_sge(x.buf, 1000, x.key);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_SEND,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 1,
        .wr_id = cpu_to_le64(0x2),
        .ud_qpn = cpu_to_le32(y.qp.qpn),
        .ud_qkey = cpu_to_le32(0x2222),
        .ud_dlid = cpu_to_le16(2),
    };
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x1, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 40 + 1000);
    g_assert_cmpuint(le32_to_cpu(cqe.src_qp), ==, x.qp.qpn);
    g_assert_cmpuint(le16_to_cpu(cqe.slid), ==, 1);
    g_assert_cmpuint(cqe.flags & PIB_CQE_F_GRH, ==, 0);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 40, 1000);
    g_assert_cmphex(qtest_readb(qts(&p.b), y.buf), ==, 0xee);  /* no GRH */

    /* The wrong Q_Key: dropped and counted; the send still completes. */
    dp_post_recv(&p.b, &y.qp, 0x3, sge, 1);
    wqe.wr_id = cpu_to_le64(0x4);
    wqe.ud_qkey = cpu_to_le32(0x2223);
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x4, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect_none(&p.b, &y.rcq);
    g_assert_cmpuint(pib_query_port(&p.b, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(attr.qkey_viol_cntr), ==, 1);

    /* UC: SEND and WRITE, no ACKs. */
    dp_end(&p.a, &u1, PIB_QPT_UC, 16384);
    dp_end(&p.b, &u2, PIB_QPT_UC, 16384);
    dp_link_ends(&u1, 1, &u2, 2);
    dp_fill(&p.a, u1.buf, 4000, 8);
    sge[0] = dp_sge(u2.buf, 8192, u2.key);
    dp_post_recv(&p.b, &u2.qp, 0x10, sge, 1);
    sge[0] = dp_sge(u1.buf, 4000, u1.key);
    dp_post_send(&p.a, &u1.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x11, sge, 1,
                 0, 0);
    dp_expect(&p.a, &u1.scq, 0x11, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &u2.rcq, 0x10, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 4000);
    dp_assert_same(&p.a, u1.buf, &p.b, u2.buf, 4000);
    dp_post_send(&p.a, &u1.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x12,
                 sge, 1, u2.buf + 8192, u2.key);
    dp_expect(&p.a, &u1.scq, 0x12, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    /* No ACK tells when it landed: wait for the bytes. */
    {
        gint64 end = g_get_monotonic_time() + TIMEOUT_US;

        while (qtest_readb(qts(&p.b), u2.buf + 8192 + 3999) !=
               qtest_readb(qts(&p.a), u1.buf + 3999)) {
            g_assert_cmpint(g_get_monotonic_time(), <, end);
            g_usleep(1000);
        }
    }
    dp_assert_same(&p.a, u1.buf, &p.b, u2.buf + 8192, 4000);
    /* READ is not a UC operation: a malformed WQE. */
    dp_post_send(&p.a, &u1.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x13,
                 sge, 1, u2.buf, u2.key);
    dp_expect(&p.a, &u1.scq, 0x13, PIB_WC_LOC_QP_OP_ERR, PIB_CQE_RDMA_READ,
              NULL);
    g_assert_cmpuint(rd(&p.a, PIB_REG_ERR_LAST), ==, PIB_GERR_WQE);
    dp_pair_down(&p);
}

/* More completions than a CQ holds, nobody polling: CQ_ERR. */
static void test_dp_cq_overflow(void)
{
    TestPair p;
    TestEnd x;
    TestCq small;
    TestQp qp;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    int i;

    dp_pair_up(&p);
    dp_end(&p.b, &x, PIB_QPT_RC, 4096);
    dp_create_cq(&p.b, 2, &small);
    dp_create_qp(&p.b, PIB_QPT_RC, x.pdn, &x.scq, &small, &qp);
    dp_connect(&p.b, &qp, 1, 77);
    sge[0] = dp_sge(x.buf, 64, x.key);
    for (i = 0; i < 3; i++) {
        dp_post_recv(&p.b, &qp, 0x10 + i, sge, 1);
    }
    g_assert_cmpuint(dp_modify_state(&p.b, qp.qpn, PIB_QPS_ERR), ==,
                     PIB_AQ_OK);
    g_assert_true(dp_aeq_find(&p.b, PIB_AE_CQ_ERR, small.cqn));
    /* The two that fitted are there; the third was lost, not misplaced. */
    g_assert_true(dp_poll(&p.b, &small, &cqe, TIMEOUT_US));
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x10);
    g_assert_true(dp_poll(&p.b, &small, &cqe, TIMEOUT_US));
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x11);
    dp_expect_none(&p.b, &small);
    dp_pair_down(&p);
}

/*
 * RESIZE_CQ of cq to depth with the consumer at ci; on PIB_AQ_OK the TestCq
 * follows the CQ to its new ring, which starts over at index 0.  pbl_addr 0:
 * a fresh ring and page list; otherwise that page list.
 */
static uint8_t dp_resize_cq(PibDev *d, TestCq *cq, uint32_t depth,
                            uint32_t ci, uint64_t pbl_addr)
{
    uint64_t ring_bytes = ROUND_UP((uint64_t)depth * cq->cqe_size, 4096);
    uint32_t npages = ring_bytes / 4096 + 1;
    uint64_t ring = dp_alloc(d, ring_bytes + 4096);
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_RESIZE_CQ,
        .in.resize_cq = {
            .cqn = cpu_to_le32(cq->cqn),
            .depth = cpu_to_le32(depth),
            .npages = cpu_to_le32(npages),
            .ci = cpu_to_le32(ci),
            .pbl_addr = cpu_to_le64(pbl_addr ? pbl_addr :
                                    dp_pbl(d, ring, npages)),
        },
    };
    uint8_t status;

    status = pib_cmd(d, &cmd, NULL);
    if (status == PIB_AQ_OK) {
        cq->ring = ring;
        cq->ring_bytes = ring_bytes;
        cq->depth = depth;
        cq->ci = 0;
    }
    return status;
}

/* Signalled RDMA WRITEs x -> y with wr_ids first..first + n - 1. */
static void dp_writes(TestEnd *x, TestEnd *y, uint64_t first, uint32_t n)
{
    struct pib_sge sge = dp_sge(x->buf, 8, x->key);
    uint32_t i;

    for (i = 0; i < n; i++) {
        dp_post_send(x->d, &x->qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED,
                     first + i, &sge, 1, y->buf, y->key);
    }
}

/* Wait until the device wrote CQE idx (phase bit), without consuming it. */
static void dp_wait_cqe_written(PibDev *d, TestCq *cq, uint32_t idx)
{
    uint64_t addr = cq->ring + (uint64_t)(idx & (cq->depth - 1)) * cq->cqe_size;
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;

    while ((qtest_readb(qts(d), addr + offsetof(struct pib_cqe, flags)) &
            PIB_CQE_F_PHASE) != phase_of(idx, cq->depth)) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(dp_poll_interval_us);
    }
}

/*
 * RESIZE_CQ: the unread CQEs move to the start of the new ring and nothing is
 * lost or seen twice, growing or shrinking, across the new ring's wrap; the
 * old ring is never written again; bad arguments and DMA failures leave the
 * CQ whole on its old ring.
 */
static void test_dp_cq_resize(void)
{
    TestPair p;
    TestEnd x, y;
    TestCq cq;
    uint64_t old_ring;
    uint32_t i, errs;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 4096);
    dp_end(&p.b, &y, PIB_QPT_RC, 4096);
    /* x's sends complete on a CQ of 4. */
    dp_create_cq(&p.a, 4, &cq);
    g_assert_cmpuint(dp_obj_cmd(&p.a, PIB_CMD_DESTROY_QP, x.qp.qpn), ==,
                     PIB_AQ_OK);
    dp_create_qp(&p.a, PIB_QPT_RC, x.pdn, &cq, &x.rcq, &x.qp);
    dp_link_ends(&x, 1, &y, 2);

    /* One read, three unread: grow to 8 with the consumer at 1. */
    dp_writes(&x, &y, 0x10, 4);
    dp_expect(&p.a, &cq, 0x10, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_wait_cqe_written(&p.a, &cq, 3);
    old_ring = cq.ring;
    g_assert_cmpuint(dp_resize_cq(&p.a, &cq, 8, cq.ci, 0), ==, PIB_AQ_OK);
    qtest_memset(qts(&p.a), old_ring, 0x5a, 4 * sizeof(struct pib_cqe));
    /* Then five more (3..7) fill it; after those, three wrap it at 8. */
    dp_writes(&x, &y, 0x14, 5);
    for (i = 0x11; i < 0x19; i++) {
        dp_expect(&p.a, &cq, i, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    }
    dp_writes(&x, &y, 0x19, 3);
    for (i = 0x19; i < 0x1c; i++) {
        dp_expect(&p.a, &cq, i, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    }
    dp_expect_none(&p.a, &cq);
    /* Nothing went to the old ring. */
    g_assert_cmphex(qtest_readb(qts(&p.a), old_ring + 3 * 32 + 31), ==, 0x5a);

    /* Three unread do not fit a ring of 2: refused, the CQ as it was. */
    dp_writes(&x, &y, 0x20, 3);
    dp_wait_cqe_written(&p.a, &cq, cq.ci + 2);
    g_assert_cmpuint(dp_resize_cq(&p.a, &cq, 2, cq.ci, 0), ==,
                     PIB_AQ_BAD_PARAM);
    /* Bad arguments: depth, consumer index past the producer or behind. */
    dp_doorbell(&p.a, DP_UAR, PIB_UAR_CQ_DB, cq.cqn, cq.ci);
    g_assert_cmpuint(dp_resize_cq(&p.a, &cq, 3, cq.ci, 0), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_resize_cq(&p.a, &cq, PIB_MAX_CQE * 2, cq.ci, 0), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_resize_cq(&p.a, &cq, 16, cq.ci + 4, 0), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_resize_cq(&p.a, &cq, 16, cq.ci - 1, 0), ==,
                     PIB_AQ_BAD_PARAM);
    /* A page list that is not there, and one whose pages are not. */
    errs = dp_err_count(&p.a);
    g_assert_cmpuint(dp_resize_cq(&p.a, &cq, 16, cq.ci, 1ull << 60), ==,
                     PIB_AQ_DMA_ERROR);
    {
        uint64_t pbl = dp_alloc(&p.a, 16);

        qtest_writeq(qts(&p.a), pbl, 1ull << 60);
        qtest_writeq(qts(&p.a), pbl + 8, 1ull << 60);
        g_assert_cmpuint(dp_resize_cq(&p.a, &cq, 16, cq.ci, pbl), ==,
                         PIB_AQ_DMA_ERROR);
    }
    g_assert_cmpuint(dp_err_count(&p.a), >, errs);
    for (i = 0x20; i < 0x23; i++) {
        dp_expect(&p.a, &cq, i, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    }

    /* Shrink to 2 with nothing unread, and go on. */
    g_assert_cmpuint(dp_resize_cq(&p.a, &cq, 2, cq.ci, 0), ==, PIB_AQ_OK);
    dp_writes(&x, &y, 0x30, 2);
    dp_expect(&p.a, &cq, 0x30, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_expect(&p.a, &cq, 0x31, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);

    /*
     * Work in flight: with y in ERR nothing answers x's three writes, and the
     * virtual clock stands still, so they stay posted and unacknowledged.
     * Nothing is unread, but the CQEs they owe would overflow a ring of 2:
     * refused; a ring of 4 has room.
     */
    g_assert_cmpuint(dp_modify_state(&p.b, y.qp.qpn, PIB_QPS_ERR), ==,
                     PIB_AQ_OK);
    dp_writes(&x, &y, 0x40, 3);
    g_assert_cmpuint(dp_resize_cq(&p.a, &cq, 2, cq.ci, 0), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_resize_cq(&p.a, &cq, 4, cq.ci, 0), ==, PIB_AQ_OK);
    dp_expect_none(&p.a, &cq);

    /* No such CQ. */
    cq.cqn += 100;
    g_assert_cmpuint(dp_resize_cq(&p.a, &cq, 8, 0, 0), ==,
                     PIB_AQ_BAD_RESOURCE);
    dp_pair_down(&p);
}

/* Real time (ns) when the timestamp test began: no wall-clock stamp is older. */
static uint64_t dp_ts_test_start;

/*
 * The next CQE of a timestamped CQ is this one, written at clock `ts`; its
 * wall-clock stamp lies between the test's start and now (the device and this
 * program read the same host real-time clock).
 */
static void dp_expect_ts(PibDev *d, TestCq *cq, uint64_t wr_id,
                         uint8_t opcode, uint64_t ts)
{
    static const uint8_t zero[sizeof(((struct pib_cqe_ts *)0)->rsvd)];
    struct pib_cqe_ts slot;

    g_assert_true(dp_poll_ts(d, cq, &slot, TIMEOUT_US));
    g_assert_cmphex(le64_to_cpu(slot.cqe.wr_id), ==, wr_id);
    g_assert_cmpuint(slot.cqe.status, ==, PIB_WC_SUCCESS);
    g_assert_cmphex(slot.cqe.opcode, ==, opcode);
    g_assert_cmpuint(le64_to_cpu(slot.timestamp), ==, ts);
    g_assert_cmpuint(le64_to_cpu(slot.wallclock), >=, dp_ts_test_start);
    g_assert_cmpuint(le64_to_cpu(slot.wallclock), <=,
                     (uint64_t)g_get_real_time() * 1000 + 1000);
    g_assert_cmpmem(slot.rsvd, sizeof(slot.rsvd), zero, sizeof(zero));
}

static uint8_t dp_modify_cq(PibDev *d, uint32_t cqn, uint16_t count, uint16_t period)
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_MODIFY_CQ,
        .in.modify_cq = {
            .cqn = cpu_to_le32(cqn),
            .count = cpu_to_le16(count),
            .period = cpu_to_le16(period),
        },
    };

    return pib_cmd(d, &cmd, NULL);
}

/*
 * x sends one message to y (receive WQE wr_id posted); both completions are read.  The device
 * learns nothing of that: only a CQ doorbell tells it the consumer index.
 */
static void dp_send_one(TestEnd *x, TestEnd *y, uint64_t wr_id)
{
    struct pib_sge ssg = dp_sge(x->buf, 8, x->key);

    dp_post_send(x->d, &x->qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, wr_id, &ssg, 1, 0, 0);
    dp_expect(x->d, &x->scq, wr_id, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(y->d, &y->rcq, wr_id, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
}

/*
 * MODIFY_CQ: with a period, the first completion that satisfies the arm starts a wait that
 * the count or the period ends, one CEQE for all; a MODIFY_CQ ends a wait; period 0 (and a
 * count alone) means at once; arming over unread completions is at once too.  The virtual
 * clock only moves when the test steps it, so "not yet" is exact here.
 */
static void test_dp_cq_moderation(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_sge rsg;
    uint32_t ev = 0, i;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 4096);
    dp_end(&p.b, &y, PIB_QPT_RC, 4096);
    dp_link_ends(&x, 1, &y, 2);
    rsg = dp_sge(y.buf, 4096, y.key);
    for (i = 0; i < 16; i++) {
        dp_post_recv(&p.b, &y.qp, 0x100 + i, &rsg, 1);
    }
    g_assert_cmpuint(dp_modify_cq(&p.b, y.rcq.cqn + 100, 4, 100), ==, PIB_AQ_BAD_RESOURCE);

    /* Count 3, period 1000 us: two completions wait past 999 us, the third ends it. */
    g_assert_cmpuint(dp_modify_cq(&p.b, y.rcq.cqn, 3, 1000), ==, PIB_AQ_OK);
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_CQ_DB, y.rcq.cqn | PIB_DB_CQ_ARM, y.rcq.ci);
    dp_send_one(&x, &y, 0x100);
    dp_send_one(&x, &y, 0x101);
    qtest_clock_step(qts(&p.b), 999 * 1000);
    g_assert_cmpuint(dp_ceqe_cqn(&p.b, p.ceq_b, ev), ==, 0);
    g_assert_false(qpci_msix_pending(p.b.dev, PIB_MSIX_VEC_CEQ));
    dp_send_one(&x, &y, 0x102);
    g_assert_cmpuint(dp_ceqe_cqn(&p.b, p.ceq_b, ev), ==, y.rcq.cqn);
    g_assert_true(qpci_msix_pending(p.b.dev, PIB_MSIX_VEC_CEQ));
    wr(&p.b, PIB_REG_CEQ_DB, ++ev);
    /* The period that ran out meanwhile belonged to that wait: nothing more. */
    qtest_clock_step(qts(&p.b), 10 * 1000);
    g_assert_cmpuint(dp_ceqe_cqn(&p.b, p.ceq_b, ev), ==, 0);

    /* One completion, armed again: the period ends the wait, not a microsecond before. */
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_CQ_DB, y.rcq.cqn | PIB_DB_CQ_ARM, y.rcq.ci);
    dp_send_one(&x, &y, 0x103);
    qtest_clock_step(qts(&p.b), 999 * 1000);
    g_assert_cmpuint(dp_ceqe_cqn(&p.b, p.ceq_b, ev), ==, 0);
    qtest_clock_step(qts(&p.b), 1000);
    g_assert_cmpuint(dp_ceqe_cqn(&p.b, p.ceq_b, ev), ==, y.rcq.cqn);
    wr(&p.b, PIB_REG_CEQ_DB, ++ev);

    /* A MODIFY_CQ during a wait ends it. */
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_CQ_DB, y.rcq.cqn | PIB_DB_CQ_ARM, y.rcq.ci);
    dp_send_one(&x, &y, 0x104);
    g_assert_cmpuint(dp_ceqe_cqn(&p.b, p.ceq_b, ev), ==, 0);
    g_assert_cmpuint(dp_modify_cq(&p.b, y.rcq.cqn, 0, 1000), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_ceqe_cqn(&p.b, p.ceq_b, ev), ==, y.rcq.cqn);
    wr(&p.b, PIB_REG_CEQ_DB, ++ev);

    /* Count 0 (period only): two completions, one event, at the period. */
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_CQ_DB, y.rcq.cqn | PIB_DB_CQ_ARM, y.rcq.ci);
    dp_send_one(&x, &y, 0x105);
    qtest_clock_step(qts(&p.b), 500 * 1000);
    dp_send_one(&x, &y, 0x106);
    qtest_clock_step(qts(&p.b), 499 * 1000);
    g_assert_cmpuint(dp_ceqe_cqn(&p.b, p.ceq_b, ev), ==, 0);
    qtest_clock_step(qts(&p.b), 1000);
    g_assert_cmpuint(dp_ceqe_cqn(&p.b, p.ceq_b, ev), ==, y.rcq.cqn);
    g_assert_cmpuint(dp_ceqe_cqn(&p.b, p.ceq_b, ev + 1), ==, 0);
    wr(&p.b, PIB_REG_CEQ_DB, ++ev);

    /* Armed over an unread completion: at once, moderation or not. */
    dp_send_one(&x, &y, 0x107);
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_CQ_DB, y.rcq.cqn | PIB_DB_CQ_ARM, y.rcq.ci - 1);
    g_assert_cmpuint(dp_wait_ceqe(&p.b, p.ceq_b, ev), ==, y.rcq.cqn);
    wr(&p.b, PIB_REG_CEQ_DB, ++ev);

    /* Period 0 turns it off, and a count alone does not hold an event. */
    g_assert_cmpuint(dp_modify_cq(&p.b, y.rcq.cqn, 2, 0), ==, PIB_AQ_OK);
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_CQ_DB, y.rcq.cqn | PIB_DB_CQ_ARM, y.rcq.ci);
    dp_send_one(&x, &y, 0x108);
    g_assert_cmpuint(dp_ceqe_cqn(&p.b, p.ceq_b, ev), ==, y.rcq.cqn);
    wr(&p.b, PIB_REG_CEQ_DB, ++ev);

    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/*
 * CQs with PIB_CQ_F_TIMESTAMP: 64-byte CQEs whose second half holds the
 * device clock when the CQE was written.  Under qtest the virtual clock stands
 * still between clock_steps, so a completion's timestamp is exactly the clock
 * read before the work.  Bad flags and a ring sized for 32-byte CQEs are
 * refused; RESIZE_CQ keeps the CQE size, and the timestamps move with the
 * CQEs not yet read.
 */
static void test_dp_cq_timestamp(void)
{
    TestPair p;
    TestEnd x, y;
    TestCq xcq, ycq;
    struct pib_admin_cmd cmd;
    struct pib_sge xsge, ysge;
    uint64_t ring, t0;
    uint32_t i;

    dp_ts_test_start = (uint64_t)g_get_real_time() * 1000;
    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 4096);
    dp_end(&p.b, &y, PIB_QPT_RC, 4096);

    /* Unknown flags; a timestamped CQ on pages for 32-byte CQEs. */
    g_assert_cmpuint(dp_create_cq_flags(&p.a, 4, 1u << 1, &xcq), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_cq_flags(&p.a, 4, UINT32_MAX, &xcq), ==,
                     PIB_AQ_BAD_PARAM);
    ring = dp_alloc(&p.a, 5 * 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_CQ,
        .in.create_cq = {
            .depth = cpu_to_le32(256),
            .npages = cpu_to_le32(pib_cq_pages(256, PIB_CQE_STRIDE_LOG)),
            .pbl_addr = cpu_to_le64(dp_pbl(&p.a, ring, 3)),
            .flags = cpu_to_le32(PIB_CQ_F_TIMESTAMP),
        },
    };
    g_assert_cmpuint(pib_cmd(&p.a, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.create_cq.npages = cpu_to_le32(5);
    cmd.in.create_cq.pbl_addr = cpu_to_le64(dp_pbl(&p.a, ring, 5));
    cmd.in.create_cq.flags = 0;
    g_assert_cmpuint(pib_cmd(&p.a, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);

    /* x sends and y receives on timestamped CQs of 4. */
    g_assert_cmpuint(dp_create_cq_flags(&p.a, 4, PIB_CQ_F_TIMESTAMP, &xcq),
                     ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_create_cq_flags(&p.b, 4, PIB_CQ_F_TIMESTAMP, &ycq),
                     ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.a, PIB_CMD_DESTROY_QP, x.qp.qpn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_QP, y.qp.qpn), ==,
                     PIB_AQ_OK);
    dp_create_qp(&p.a, PIB_QPT_RC, x.pdn, &xcq, &x.rcq, &x.qp);
    dp_create_qp(&p.b, PIB_QPT_RC, y.pdn, &y.scq, &ycq, &y.qp);
    dp_link_ends(&x, 1, &y, 2);

    /* A SEND: both completions are stamped with the clock of the moment. */
    xsge = dp_sge(x.buf, 64, x.key);
    ysge = dp_sge(y.buf, 64, y.key);
    dp_post_recv(&p.b, &y.qp, 0x100, &ysge, 1);
    qtest_clock_step(qts(&p.a), 1000);
    t0 = pib_clock_read(&p.a, DP_UAR);
    g_assert_cmpuint(pib_clock_read(&p.b, DP_UAR), ==, t0);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x200,
                 &xsge, 1, 0, 0);
    dp_expect_ts(&p.b, &ycq, 0x100, PIB_CQE_RECV, t0);
    dp_expect_ts(&p.a, &xcq, 0x200, PIB_CQE_SEND, t0);

    /* Three writes, 1 us apart; one read, then RESIZE_CQ 4 -> 8. */
    for (i = 0; i < 3; i++) {
        qtest_clock_step(qts(&p.a), 1000);
        dp_writes(&x, &y, 0x10 + i, 1);
        dp_wait_cqe_written(&p.a, &xcq, xcq.ci + i);
    }
    dp_expect_ts(&p.a, &xcq, 0x10, PIB_CQE_RDMA_WRITE, t0 + 1000);
    /* The new ring must be laid out for the CQ's own CQE size. */
    xcq.cqe_size = sizeof(struct pib_cqe);
    g_assert_cmpuint(dp_resize_cq(&p.a, &xcq, 256, xcq.ci, 0), ==,
                     PIB_AQ_BAD_PARAM);
    xcq.cqe_size = sizeof(struct pib_cqe_ts);
    g_assert_cmpuint(dp_resize_cq(&p.a, &xcq, 8, xcq.ci, 0), ==, PIB_AQ_OK);
    dp_expect_ts(&p.a, &xcq, 0x11, PIB_CQE_RDMA_WRITE, t0 + 2000);
    dp_expect_ts(&p.a, &xcq, 0x12, PIB_CQE_RDMA_WRITE, t0 + 3000);
    /* Later CQEs: 64 bytes apart in the new ring, at their own moments. */
    for (i = 0; i < 8; i++) {
        qtest_clock_step(qts(&p.a), 500);
        dp_writes(&x, &y, 0x20 + i, 1);
        dp_expect_ts(&p.a, &xcq, 0x20 + i, PIB_CQE_RDMA_WRITE,
                     t0 + 3500 + 500 * i);
    }
    dp_expect_none(&p.a, &xcq);
    dp_pair_down(&p);
}

/*
 * MODIFY_SRQ's MAX_WR: the SRQ takes WQEs from the new ring at their own
 * indices (the driver copied the ones not yet taken), never from the old one
 * again; a ring too small for what is not taken, a limit not below the new
 * depth or an unreadable page list change nothing.
 */
static void test_dp_srq_resize(void)
{
    TestPair p;
    TestEnd x, y;
    TestQp q;
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe acqe;
    uint64_t ring, ring2;
    struct pib_sge sge;
    uint32_t srqn, i;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 4096);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    ring = dp_alloc(&p.b, 4096);
    ring2 = dp_alloc(&p.b, 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_SRQ,
        .in.create_srq = {
            .pdn = cpu_to_le32(y.pdn),
            .depth = cpu_to_le32(4),
            .stride_log = 5,
            .uar = cpu_to_le32(DP_UAR),
            .npages = cpu_to_le32(1),
            .pbl_addr = cpu_to_le64(dp_pbl(&p.b, ring, 1)),
        },
    };
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    srqn = le32_to_cpu(acqe.result0);
    g_assert_cmpuint(dp_create_qp_ex(&p.b, PIB_QPT_RC, y.pdn, &y.scq, &y.rcq,
                                     16, 0, DP_UAR, srqn, &q), ==, PIB_AQ_OK);
    dp_connect(&p.a, &x.qp, 2, q.qpn);
    dp_connect(&p.b, &q, 1, x.qp.qpn);

    /* WQE i receives into y.buf + i * 1024; 4 posted in the old ring. */
    for (i = 0; i < 4; i++) {
        struct pib_recv_wqe rw = {
            .wr_id = cpu_to_le64(0x40 + i), .num_sge = 1,
        };

        sge = dp_sge(y.buf + i * 1024, 1024, y.key);
        qtest_memwrite(qts(&p.b), ring + (i % 4) * 32, &rw, sizeof(rw));
        qtest_memwrite(qts(&p.b), ring + (i % 4) * 32 + 16, &sge, sizeof(sge));
        /* The same WQE in its slot of the 8-deep ring, as a driver copies. */
        qtest_memwrite(qts(&p.b), ring2 + (i % 8) * 32, &rw, sizeof(rw));
        qtest_memwrite(qts(&p.b), ring2 + (i % 8) * 32 + 16, &sge, sizeof(sge));
    }
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_SRQ_DB, srqn, 4);
    sge = dp_sge(x.buf, 64, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x1, &sge, 1,
                 0, 0);
    dp_expect(&p.b, &y.rcq, 0x40, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);

    /* Refused: 3 not taken do not fit 2; limit 8 not below 8; bad pages. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_MODIFY_SRQ,
        .in.modify_srq = {
            .srqn = cpu_to_le32(srqn),
            .attr_mask = cpu_to_le32(PIB_SRQ_ATTR_MAX_WR),
            .max_wr = cpu_to_le32(2),
            .npages = cpu_to_le32(1),
            .pbl_addr = cpu_to_le64(dp_pbl(&p.b, ring2, 1)),
        },
    };
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.modify_srq.max_wr = cpu_to_le32(8);
    cmd.in.modify_srq.attr_mask = cpu_to_le32(PIB_SRQ_ATTR_MAX_WR |
                                              PIB_SRQ_ATTR_LIMIT);
    cmd.in.modify_srq.limit = cpu_to_le32(8);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.modify_srq.limit = cpu_to_le32(0);
    cmd.in.modify_srq.npages = cpu_to_le32(2);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.modify_srq.npages = cpu_to_le32(1);
    cmd.in.modify_srq.pbl_addr = cpu_to_le64(1ull << 60);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_DMA_ERROR);
    /* Still on the old ring: the next receive is WQE 1 from there. */
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x2, &sge, 1,
                 0, 0);
    dp_expect(&p.b, &y.rcq, 0x41, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);

    /* Grow to 8; the old ring is wiped, WQEs 2, 3 come from the new one. */
    cmd.in.modify_srq.pbl_addr = cpu_to_le64(dp_pbl(&p.b, ring2, 1));
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_OK);
    qtest_memset(qts(&p.b), ring, 0xff, 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_QUERY_SRQ, .in.obj.num = cpu_to_le32(srqn),
    };
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(acqe.result1), ==, 8);
    /* Five more (4..8) in the new ring; 7 not taken fit 8. */
    for (i = 4; i < 9; i++) {
        struct pib_recv_wqe rw = {
            .wr_id = cpu_to_le64(0x40 + i), .num_sge = 1,
        };
        struct pib_sge rs = dp_sge(y.buf + (i % 8) * 1024, 1024, y.key);

        qtest_memwrite(qts(&p.b), ring2 + (i % 8) * 32, &rw, sizeof(rw));
        qtest_memwrite(qts(&p.b), ring2 + (i % 8) * 32 + 16, &rs, sizeof(rs));
    }
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_SRQ_DB, srqn, 9);
    for (i = 2; i < 9; i++) {
        dp_fill(&p.a, x.buf, 64, i);
        dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x10 + i,
                     &sge, 1, 0, 0);
        dp_expect(&p.b, &y.rcq, 0x40 + i, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
        dp_assert_same(&p.a, x.buf, &p.b, y.buf + (i % 8) * 1024, 64);
    }
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_QP, q.qpn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_SRQ, srqn), ==,
                     PIB_AQ_OK);
    dp_pair_down(&p);
}

/* SRQ: two QPs share one queue of receives; the limit event; LAST_WQE. */
static void test_dp_srq(void)
{
    TestPair p;
    TestEnd x1, x2, y;
    TestQp q1, q2, bad;
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe acqe;
    struct pib_sge sge[1];
    struct pib_recv_wqe rw;
    struct pib_cqe cqe;
    uint64_t ring;
    uint32_t srqn, i, pi = 0;

    dp_pair_up(&p);
    dp_end(&p.a, &x1, PIB_QPT_RC, 8192);
    dp_end(&p.a, &x2, PIB_QPT_RC, 8192);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);

    /* An SRQ of 8 receives of up to 3 SGEs (64-byte slots); checks first. */
    ring = dp_alloc(&p.b, 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_SRQ,
        .in.create_srq = {
            .pdn = cpu_to_le32(y.pdn),
            .depth = cpu_to_le32(8),
            .stride_log = 6,
            .limit = cpu_to_le32(8),                /* not below depth */
            .uar = cpu_to_le32(DP_UAR),
            .npages = cpu_to_le32(1),
            .pbl_addr = cpu_to_le64(dp_pbl(&p.b, ring, 1)),
        },
    };
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.create_srq.limit = 0;
    cmd.in.create_srq.stride_log = 3;
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.create_srq.stride_log = 6;
    cmd.in.create_srq.depth = cpu_to_le32(6);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.create_srq.depth = cpu_to_le32(8);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    srqn = le32_to_cpu(acqe.result0);

    /* QPs on it have no RQ; one that asks for both is refused. */
    g_assert_cmpuint(dp_create_qp_ex(&p.b, PIB_QPT_RC, y.pdn, &y.scq, &y.rcq,
                                     16, 16, DP_UAR, srqn, &bad), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_qp_ex(&p.b, PIB_QPT_RC, y.pdn, &y.scq, &y.rcq,
                                     16, 0, DP_UAR, srqn + 1, &bad), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_create_qp_ex(&p.b, PIB_QPT_RC, y.pdn, &y.scq, &y.rcq,
                                     16, 0, DP_UAR, srqn, &q1), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_create_qp_ex(&p.b, PIB_QPT_RC, y.pdn, &y.scq, &y.rcq,
                                     16, 0, DP_UAR, srqn, &q2), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_SRQ, srqn), ==,
                     PIB_AQ_BUSY);
    dp_connect(&p.a, &x1.qp, 2, q1.qpn);
    dp_connect(&p.b, &q1, 1, x1.qp.qpn);
    dp_connect(&p.a, &x2.qp, 2, q2.qpn);
    dp_connect(&p.b, &q2, 1, x2.qp.qpn);

    /* Four receives, 1 KiB each, posted with one SRQ doorbell. */
    for (i = 0; i < 4; i++) {
        rw = (struct pib_recv_wqe) {
            .wr_id = cpu_to_le64(0x70 + i),
            .num_sge = 1,
        };
        sge[0] = dp_sge(y.buf + i * 1024, 1024, y.key);
        qtest_memwrite(qts(&p.b), ring + i * 64, &rw, sizeof(rw));
        qtest_memwrite(qts(&p.b), ring + i * 64 + 16, sge, sizeof(sge));
    }
    pi = 4;
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_SRQ_DB, srqn, pi);
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_SRQ_DB, srqn, pi + 8);   /* too far */
    g_assert_cmpuint(rd(&p.b, PIB_REG_ERR_LAST), ==, PIB_GERR_UAR_DB_RANGE);

    /* Each QP takes the next one, whichever it is. */
    dp_fill(&p.a, x1.buf, 100, 1);
    dp_fill(&p.a, x2.buf, 200, 2);
    sge[0] = dp_sge(x1.buf, 100, x1.key);
    dp_post_send(&p.a, &x1.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x1, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x1.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x70, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, q1.qpn);
    g_assert_cmpuint(le16_to_cpu(cqe.wqe_index), ==, 0);
    sge[0] = dp_sge(x2.buf, 200, x2.key);
    dp_post_send(&p.a, &x2.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x2, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x2.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x71, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, q2.qpn);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 200);
    dp_assert_same(&p.a, x2.buf, &p.b, y.buf + 1024, 200);

    /* The limit: 2 left; armed at 2, the next take raises SRQ_LIMIT once. */
    /* MAX_WR without a ring for it: refused (srq-resize has the rest). */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_MODIFY_SRQ,
        .in.modify_srq = {
            .srqn = cpu_to_le32(srqn),
            .attr_mask = cpu_to_le32(PIB_SRQ_ATTR_MAX_WR),
            .max_wr = cpu_to_le32(16),
        },
    };
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.modify_srq.attr_mask = cpu_to_le32(PIB_SRQ_ATTR_LIMIT);
    cmd.in.modify_srq.limit = cpu_to_le32(2);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_OK);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_QUERY_SRQ, .in.obj.num = cpu_to_le32(srqn),
    };
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(acqe.result0), ==, 2);
    g_assert_cmpuint(le32_to_cpu(acqe.result1), ==, 8);
    sge[0] = dp_sge(x1.buf, 10, x1.key);
    dp_post_send(&p.a, &x1.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x3, sge, 1,
                 0, 0);
    dp_expect(&p.b, &y.rcq, 0x72, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    g_assert_true(dp_aeq_find(&p.b, PIB_AE_SRQ_LIMIT, srqn));
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(acqe.result0), ==, 0);     /* disarmed */

    /*
     * A QP of the SRQ goes to ERR: LAST_WQE, and the SRQ's last WQE stays
     * for the other QP.
     */
    g_assert_cmpuint(dp_modify_state(&p.b, q1.qpn, PIB_QPS_ERR), ==,
                     PIB_AQ_OK);
    g_assert_true(dp_aeq_find(&p.b, PIB_AE_QP_LAST_WQE, q1.qpn));
    dp_expect_none(&p.b, &y.rcq);
    sge[0] = dp_sge(x2.buf, 10, x2.key);
    dp_post_send(&p.a, &x2.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x4, sge, 1,
                 0, 0);
    dp_expect(&p.b, &y.rcq, 0x73, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, q2.qpn);
    g_assert_cmpuint(le16_to_cpu(cqe.wqe_index), ==, 3);

    /* Empty SRQ: RNR; destroyed once no QP uses it. */
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_QP, q1.qpn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_QP, q2.qpn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_SRQ, srqn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 1);
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

/*
 * The wire: this test is the peer HCA (LID 9, QP 0x77) and speaks IB
 * packets to the device through its link, to check the transport rules
 * that a well-behaved peer never exercises: duplicates, gaps, NAKs, RNR,
 * replayed READs and atomics, go-back-N, and malformed packets.
 */

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

    peer_boot(&l, 1);
    pib_open(&d, l.qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 64);
    fd = peer_connect(l.path);
    peer_bring_up(&d, fd, TEST_NODE_GUID);

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

    peer_boot(&l, 1);
    pib_open(&d, l.qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 64);
    fd = peer_connect(l.path);
    peer_bring_up(&d, fd, TEST_NODE_GUID);

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
            0x14, 0x16, 0x17,
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

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    qtest_add_func("/pib/data/objects", test_dp_objects);
    qtest_add_func("/pib/data/send-recv", test_dp_send_recv);
    qtest_add_func("/pib/data/errors", test_dp_errors);
    qtest_add_func("/pib/data/rnr", test_dp_rnr);
    qtest_add_func("/pib/data/retry", test_dp_retry);
    qtest_add_func("/pib/data/rdma", test_dp_rdma);
    qtest_add_func("/pib/data/read-order", test_dp_read_order);
    qtest_add_func("/pib/data/atomic-write", test_dp_atomic_write);
    qtest_add_func("/pib/data/ud-uc", test_dp_ud_uc);
    qtest_add_func("/pib/data/cq-overflow", test_dp_cq_overflow);
    qtest_add_func("/pib/data/srq", test_dp_srq);
    qtest_add_func("/pib/data/srq-resize", test_dp_srq_resize);
    qtest_add_func("/pib/data/cq-resize", test_dp_cq_resize);
    qtest_add_func("/pib/data/cq-timestamp", test_dp_cq_timestamp);
    qtest_add_func("/pib/data/cq-moderation", test_dp_cq_moderation);
    qtest_add_func("/pib/data/mw", test_dp_mw);
    qtest_add_func("/pib/data/mw-rules", test_dp_mw_rules);
    qtest_add_func("/pib/data/mr-rereg", test_dp_mr_rereg);
    qtest_add_func("/pib/data/frwr", test_dp_frwr);
    qtest_add_func("/pib/data/wire", test_dp_wire);
    qtest_add_func("/pib/data/xrc", test_dp_xrc);
    qtest_add_func("/pib/data/link-death", test_dp_link_death);

    return g_test_run();
}
