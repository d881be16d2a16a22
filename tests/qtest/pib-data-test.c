/*
 * QTest: the pib HCA's data path (hw/pib): objects, SEND/RECV, CQs, SRQs
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The test plays the driver and the provider at once (the dp_* mini-driver in
 * pib-qtest.h): it builds rings and page lists in guest memory, writes WQEs
 * and rings doorbells exactly as guest-provider/qp.c does, and reads CQEs by
 * their phase bit as guest-provider/cq.c does.  Most tests use two devices on
 * one link in one QEMU (TestPair).
 *
 * Covered: every object and its admin commands, RC SEND/RECV and loopback,
 * local errors and flushes, RNR, retry, UD and UC, CQ overflow, RESIZE_CQ,
 * timestamped CQEs, CQ moderation, SRQs and MODIFY_SRQ's resize.  Remote
 * memory access (RDMA, atomics, windows, REREG_MR, FRWR) is pib-rdma-test.c;
 * the peer at the wire, XRC and link death are pib-wire-test.c.  All three
 * keep the /pib/data/ paths.
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-data-test
 */

#include "qemu/osdep.h"
#include <glib/gstdio.h>

#include "pib-qtest.h"

/* Objects and their admin commands: every field checked. */
static void test_dp_objects(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0,id=pa");
    const char *pa = "/machine/peripheral/pa";
    struct pib_device_attr dev_attr;
    struct pib_admin_cmd cmd;
    struct pib_qp_attr qa;
    PibDev d;
    uint32_t pdn, key1, key2, key3, errs = 0, mtt0;
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
                    PIB_DEV_CAP_XRC | PIB_DEV_CAP_FLUSH |
                    PIB_DEV_CAP_RECV_DBREC);
    g_assert_cmpuint(le32_to_cpu(dev_attr.clock_khz), ==, PIB_CLOCK_KHZ);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_fast_reg_pages), ==,
                     PIB_MAX_FAST_REG_PAGES);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_srq), ==, 4096);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_sge), ==, PIB_MAX_SGE);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_inline_data), ==,
                     PIB_MAX_INLINE_DATA);

    /* PD; the objects-* properties count what the device holds */
    g_assert_cmpuint(qom_get_u32(qts(&d), pa, "objects-pd"), ==, 0);
    mtt0 = qom_get_u32(qts(&d), pa, "mtt-pages");
    pdn = dp_create_pd(&d);
    g_assert_cmpuint(pdn, !=, 0);
    g_assert_cmpuint(qom_get_u32(qts(&d), pa, "objects-pd"), ==, 1);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_PD, pdn + 1), ==,
                     PIB_AQ_BAD_RESOURCE);

    /* REG_MR: every field */
    buf = dp_alloc(&d, 3 * 4096);
    g_assert_cmpuint(dp_reg_mr_status(&d, pdn + 1, 0, buf, 4096, NULL), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_reg_mr_status(&d, pdn, 0x20, buf, 4096, NULL), ==,
                     PIB_AQ_BAD_PARAM);     /* an access bit the device does not know */
    g_assert_cmpuint(dp_reg_mr_status(&d, pdn, 0x200, buf, 4096, NULL), ==,
                     PIB_AQ_BAD_PARAM);     /* verbs' FLUSH_PERSISTENT: no persistence */
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
    g_assert_cmpuint(qom_get_u32(qts(&d), pa, "objects-mr"), ==, 0);
    g_assert_cmpuint(qom_get_u32(qts(&d), pa, "mtt-pages"), ==, mtt0);
    key1 = dp_reg_mr(&d, pdn, PIB_ACCESS_LOCAL_WRITE, buf, 4096);
    g_assert_cmpuint(qom_get_u32(qts(&d), pa, "objects-mr"), ==, 1);
    g_assert_cmpuint(qom_get_u32(qts(&d), pa, "mtt-pages"), ==, mtt0 + 1);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_PD, pdn), ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key1 ^ 1), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key1), ==, PIB_AQ_OK);
    g_assert_cmpuint(qom_get_u32(qts(&d), pa, "objects-mr"), ==, 0);
    g_assert_cmpuint(qom_get_u32(qts(&d), pa, "mtt-pages"), ==, mtt0);
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
    /* Past max_cqe, with the page count such a ring would have. */
    cmd.in.create_cq.depth = cpu_to_le32(PIB_MAX_CQE * 2);
    cmd.in.create_cq.npages = cpu_to_le32(pib_cq_pages(PIB_MAX_CQE * 2,
                                                       PIB_CQE_STRIDE_LOG));
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(qom_get_u32(qts(&d), pa, "objects-cq"), ==, 0);
    g_assert_cmpuint(qom_get_u32(qts(&d), pa, "mtt-pages"), ==, mtt0 + 2);  /* key2, key3 */
    dp_create_cq(&d, 8, &cq);
    g_assert_cmpuint(qom_get_u32(qts(&d), pa, "objects-cq"), ==, 1);
    g_assert_cmpuint(qom_get_u32(qts(&d), pa, "mtt-pages"), ==,
                     mtt0 + 2 + pib_cq_pages(8, PIB_CQE_STRIDE_LOG));
    g_assert_cmpuint(qom_get_u32(qts(&d), pa, "objects-mr"), ==, 3);  /* key2, PHYS, key3 */

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
                                         PIB_MAX_QP_WR * 2, DP_UAR, &qp), ==,
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
    struct pib_admin_cmd cmd;
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
    cmd = (struct pib_admin_cmd) {             /* (no ring: refused first) */
        .opcode = PIB_CMD_RESIZE_CQ,
        .in.resize_cq = {
            .cqn = cpu_to_le32(cq.cqn),
            .depth = cpu_to_le32(PIB_MAX_CQE * 2),
            .npages = cpu_to_le32(pib_cq_pages(PIB_MAX_CQE * 2,
                                               PIB_CQE_STRIDE_LOG)),
            .ci = cpu_to_le32(cq.ci),
            .pbl_addr = cpu_to_le64(ADDR_OUTSIDE_RAM),
        },
    };
    g_assert_cmpuint(pib_cmd(&p.a, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
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

/* CREATE_SRQ of 4 receives of 32 bytes on the npages pages at ring. */
static struct pib_admin_cmd dp_srq4_cmd(PibDev *d, uint32_t pdn, uint64_t ring,
                                        uint32_t npages, uint8_t flags,
                                        uint32_t limit)
{
    return (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_SRQ,
        .in.create_srq = {
            .pdn = cpu_to_le32(pdn),
            .depth = cpu_to_le32(4),
            .stride_log = 5,
            .flags = flags,
            .limit = cpu_to_le32(limit),
            .uar = cpu_to_le32(DP_UAR),
            .npages = cpu_to_le32(npages),
            .pbl_addr = cpu_to_le64(dp_pbl(d, ring, npages)),
        },
    };
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
    cmd = dp_srq4_cmd(&p.b, y.pdn, ring, 1, 0, 0);
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

/* Write receive WQE i (one SGE) into slot i of a 32-byte-stride SRQ ring. */
static void dp_srq_slot(PibDev *d, uint64_t ring, uint32_t depth, uint32_t i,
                        uint64_t wr_id, struct pib_sge sge)
{
    struct pib_recv_wqe rw = { .wr_id = cpu_to_le64(wr_id), .num_sge = 1 };

    qtest_memwrite(qts(d), ring + (i % depth) * 32, &rw, sizeof(rw));
    qtest_memwrite(qts(d), ring + (i % depth) * 32 + 16, &sge, sizeof(sge));
}

/* The SRQ's limit as QUERY_SRQ reports it: 0 once the limit event fired. */
static uint32_t dp_srq_limit(PibDev *d, uint32_t srqn)
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_QUERY_SRQ, .in.obj.num = cpu_to_le32(srqn),
    };
    struct pib_admin_cqe acqe;

    g_assert_cmpuint(pib_cmd(d, &cmd, &acqe), ==, PIB_AQ_OK);
    return le32_to_cpu(acqe.result0);
}

/*
 * Receive doorbell records (struct pib_recv_dbrec, pib_wqe.h).  An RQ and an
 * SRQ posted to through their records alone, never a doorbell; a record the
 * device must not believe; a QP in ERR, which asks for doorbells and flushes
 * what the record and they announce; RESET, which zeroes the record; an SRQ
 * whose limit is judged on what its record says is posted.
 */
static void test_dp_recv_dbrec(void)
{
    TestPair p;
    TestEnd x, y, x2;
    TestQp q, qs;
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe acqe;
    struct pib_sge sge, rsge;
    struct pib_cqe cqe;
    uint64_t ring, srec;
    uint32_t errs, srqn, i;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 4096);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    /* A record needs an RQ. */
    g_assert_cmpuint(dp_create_qp_flags(&p.b, PIB_QPT_RC, y.pdn, &y.scq, &y.rcq,
                                        16, 0, DP_UAR, PIB_SRQN_NONE,
                                        PIB_QPC_F_RQ_DBREC, &q), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_qp_flags(&p.b, PIB_QPT_RC, y.pdn, &y.scq, &y.rcq,
                                        16, 16, DP_UAR, PIB_SRQN_NONE,
                                        PIB_QPC_F_RQ_DBREC, &q), ==, PIB_AQ_OK);
    dp_connect(&p.a, &x.qp, 2, q.qpn);
    dp_connect(&p.b, &q, 1, x.qp.qpn);

    /* Three receives announced in the record only: three SENDs land. */
    for (i = 0; i < 3; i++) {
        rsge = dp_sge(y.buf + i * 1024, 1024, y.key);
        dp_post_recv(&p.b, &q, 0x50 + i, &rsge, 1);
    }
    sge = dp_sge(x.buf, 100, x.key);
    for (i = 0; i < 3; i++) {
        dp_fill(&p.a, x.buf, 100, i);
        dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x1 + i,
                     &sge, 1, 0, 0);
        dp_expect(&p.a, &x.scq, 0x1 + i, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
        dp_expect(&p.b, &y.rcq, 0x50 + i, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
        dp_assert_same(&p.a, x.buf, &p.b, y.buf + i * 1024, 100);
    }

    /*
     * A record 17 ahead of the WQEs taken (depth 16) is not believed: the
     * SEND finds no receive, is RNR NAKed, and the record is counted.  Once
     * the record is right, the retried SEND lands.
     */
    errs = rd(&p.b, PIB_REG_ERR_COUNT);
    qtest_writel(qts(&p.b), q.dbrec, 3 + 17);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x9, &sge, 1,
                 0, 0);
    for (i = 0; rd(&p.b, PIB_REG_ERR_COUNT) == errs; i++) {
        g_assert_cmpuint(i, <, TIMEOUT_US / 1000);      /* hang guard */
        g_usleep(1000);
    }
    g_assert_cmpuint(rd(&p.b, PIB_REG_ERR_LAST), ==, PIB_GERR_DBREC_RANGE);
    dp_expect_none(&p.b, &y.rcq);
    rsge = dp_sge(y.buf, 1024, y.key);
    dp_post_recv(&p.b, &q, 0x53, &rsge, 1);
    dp_step_until_cqe(&p.a, &x.scq, &cqe, 1000 * 1000, 500);
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x9);
    g_assert_cmpuint(cqe.status, ==, PIB_WC_SUCCESS);
    dp_expect(&p.b, &y.rcq, 0x53, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);

    /*
     * ERR: the device sets RING and flushes what the record had; a receive
     * posted after that comes with a doorbell (dp_post_recv reads RING) and
     * is flushed too.
     */
    dp_post_recv(&p.b, &q, 0x60, &rsge, 1);
    g_assert_cmpuint(dp_modify_state(&p.b, q.qpn, PIB_QPS_ERR), ==, PIB_AQ_OK);
    g_assert_cmphex(qtest_readl(qts(&p.b), q.dbrec + 4), ==, PIB_DBREC_F_RING);
    dp_expect(&p.b, &y.rcq, 0x60, PIB_WC_WR_FLUSH_ERR, PIB_CQE_RECV, NULL);
    dp_post_recv(&p.b, &q, 0x61, &rsge, 1);
    dp_expect(&p.b, &y.rcq, 0x61, PIB_WC_WR_FLUSH_ERR, PIB_CQE_RECV, NULL);

    /* RESET zeroes the record; the indices start over at 0. */
    g_assert_cmpuint(dp_modify_state(&p.b, q.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmphex(qtest_readl(qts(&p.b), q.dbrec), ==, 0);
    g_assert_cmphex(qtest_readl(qts(&p.b), q.dbrec + 4), ==, 0);
    g_assert_cmpuint(dp_modify_state(&p.a, x.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x.qp.sq_pi = x.qp.rq_pi = q.sq_pi = q.rq_pi = 0;
    dp_connect(&p.a, &x.qp, 2, q.qpn);
    dp_connect(&p.b, &q, 1, x.qp.qpn);
    dp_post_recv(&p.b, &q, 0x70, &rsge, 1);
    dp_fill(&p.a, x.buf, 100, 7);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x10, &sge, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x10, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x70, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le16_to_cpu(cqe.wqe_index), ==, 0);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf, 100);

    /* An SRQ of 4 with a record: its page after the ring, else refused. */
    ring = dp_alloc(&p.b, 2 * 4096);
    srec = ring + 4096;
    cmd = dp_srq4_cmd(&p.b, y.pdn, ring, 2, PIB_SRQ_F_DBREC, 1);
    cmd.in.create_srq.npages = cpu_to_le32(1);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.create_srq.npages = cpu_to_le32(2);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    srqn = le32_to_cpu(acqe.result0);
    g_assert_cmpuint(dp_create_qp_ex(&p.b, PIB_QPT_RC, y.pdn, &y.scq, &y.rcq,
                                     16, 0, DP_UAR, srqn, &qs), ==, PIB_AQ_OK);
    dp_end(&p.a, &x2, PIB_QPT_RC, 4096);
    dp_connect(&p.a, &x2.qp, 2, qs.qpn);
    dp_connect(&p.b, &qs, 1, x2.qp.qpn);

    /*
     * Two posted, the limit armed at 1.  After the first take one is left:
     * no event.  A third, in the record only, before the second take: the
     * device must count it, so one is still left and the limit stays armed;
     * the third take leaves none, and the event comes.
     */
    for (i = 0; i < 2; i++) {
        dp_srq_slot(&p.b, ring, 4, i, 0x80 + i, dp_sge(y.buf + i * 1024, 1024,
                                                       y.key));
    }
    qtest_writel(qts(&p.b), srec, 2);
    sge = dp_sge(x2.buf, 64, x2.key);
    for (i = 0; i < 3; i++) {
        if (i == 1) {
            dp_srq_slot(&p.b, ring, 4, 2, 0x82, dp_sge(y.buf + 2048, 1024,
                                                       y.key));
            qtest_writel(qts(&p.b), srec, 3);
        }
        dp_post_send(&p.a, &x2.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x20 + i,
                     &sge, 1, 0, 0);
        dp_expect(&p.a, &x2.scq, 0x20 + i, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
        dp_expect(&p.b, &y.rcq, 0x80 + i, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
        g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, qs.qpn);
        g_assert_cmpuint(dp_srq_limit(&p.b, srqn), ==, i < 2 ? 1 : 0);
    }
    g_assert_true(dp_aeq_find(&p.b, PIB_AE_SRQ_LIMIT, srqn));
    g_assert_cmpuint(rd(&p.b, PIB_REG_ERR_LAST), ==, PIB_GERR_DBREC_RANGE);

    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_QP, qs.qpn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_SRQ, srqn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_QP, q.qpn), ==,
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

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    qtest_add_func("/pib/data/objects", test_dp_objects);
    qtest_add_func("/pib/data/send-recv", test_dp_send_recv);
    qtest_add_func("/pib/data/errors", test_dp_errors);
    qtest_add_func("/pib/data/rnr", test_dp_rnr);
    qtest_add_func("/pib/data/retry", test_dp_retry);
    qtest_add_func("/pib/data/ud-uc", test_dp_ud_uc);
    qtest_add_func("/pib/data/cq-overflow", test_dp_cq_overflow);
    qtest_add_func("/pib/data/srq", test_dp_srq);
    qtest_add_func("/pib/data/srq-resize", test_dp_srq_resize);
    qtest_add_func("/pib/data/recv-dbrec", test_dp_recv_dbrec);
    qtest_add_func("/pib/data/cq-resize", test_dp_cq_resize);
    qtest_add_func("/pib/data/cq-timestamp", test_dp_cq_timestamp);
    qtest_add_func("/pib/data/cq-moderation", test_dp_cq_moderation);

    return g_test_run();
}
