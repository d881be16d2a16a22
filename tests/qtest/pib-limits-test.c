/*
 * QTest: the pib HCA at the edges of its rings and counters (hw/pib)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * What only shows after many events or objects: a ring's second pass, a
 * counter past the width of its field, queues as deep and objects as many as
 * QUERY_DEVICE says (docs/reference/hardware.md, "Limits").  In the first two
 * tests this process is the device's remote peer on its cable (pib-qtest.h's
 * wp_* helpers), which makes the events.
 *
 *   /pib/limits/ceq-wrap      the CEQ's phase bit flips on every pass
 *   /pib/limits/pma-saturate  PortCounters' narrow fields stop at their maximum
 *   /pib/limits/cq-full       a CQ of max_cqe CQEs filled to its last slot by
 *                             flushed RQs of max_qp_wr receives; its wrap and
 *                             its overflow at that depth
 *   /pib/limits/wq-full       an SQ of max_qp_wr SENDs into an SRQ of
 *                             max_srq_wr receives, every one delivered
 *   /pib/limits/objects       max_pd PDs, max_mr MRs, max_cq CQs, max_srq SRQs,
 *                             one more of each refused, the last of each used
 *   /pib/limits/mtt           rings' page lists count against the MTT: deep
 *                             CQs until it is full, and again once one goes
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

    g_assert_cmpuint(dp_pma(&d, PIB_MAD_METHOD_SET, PIB_PMA_ATTR_PORT_COUNTERS, 1, 0xffff, &r), ==, 0);
    g_assert_cmpuint(pc->rcv_constraint_errors, ==, 0);
    lim_bad_pkeys(&d, fd, 200);
    g_assert_cmpuint(dp_pma(&d, PIB_MAD_METHOD_GET, PIB_PMA_ATTR_PORT_COUNTERS, 1, 0, &r), ==, 0);
    g_assert_cmpuint(pc->rcv_constraint_errors, ==, 200);
    lim_bad_pkeys(&d, fd, 100);
    g_assert_cmpuint(dp_pma(&d, PIB_MAD_METHOD_GET, PIB_PMA_ATTR_PORT_COUNTERS, 1, 0, &r), ==, 0);
    g_assert_cmpuint(pc->rcv_constraint_errors, ==, 255);
    g_assert_cmpuint(dp_pma(&d, PIB_MAD_METHOD_SET, PIB_PMA_ATTR_PORT_COUNTERS, 1, PIB_PMA_SEL_RCV_CONSTRAINT, &r),
                     ==, 0);
    g_assert_cmpuint(pc->rcv_constraint_errors, ==, 0);
    lim_bad_pkeys(&d, fd, 10);
    g_assert_cmpuint(dp_pma(&d, PIB_MAD_METHOD_GET, PIB_PMA_ATTR_PORT_COUNTERS, 1, 0, &r), ==, 0);
    g_assert_cmpuint(pc->rcv_constraint_errors, ==, 10);

    g_assert_cmpuint(dp_err_count(&d), ==, 0);
    close(fd);
    pib_close(&d);
    peer_shutdown(&l);
}

/*
 * Queues as deep and objects as many as QUERY_DEVICE says.  The rings here are
 * large (a CQ of PIB_MAX_CQE CQEs is 128 MiB), so they are written and read
 * in bulk (qtest_bufwrite, qtest_bufread), not slot by slot.
 */

/* A page list of n entries, written at once: the pages from addr on, or addr n times. */
static uint64_t lim_pbl(PibDev *d, uint64_t addr, uint32_t n, bool same)
{
    g_autofree uint64_t *l = g_new(uint64_t, n);
    uint64_t pbl = dp_alloc(d, (size_t)n * sizeof(*l));
    uint32_t i;

    for (i = 0; i < n; i++) {
        l[i] = cpu_to_le64(addr + (same ? 0 : (uint64_t)i * 4096));
    }
    qtest_bufwrite(qts(d), pbl, l, (size_t)n * sizeof(*l));
    return pbl;
}

/*
 * n copies of one command, as many at a time as the admin queue holds: written
 * at once, one doorbell, the completions read at once.  Each must succeed; its
 * result0 (the object's number or key) goes to out[].
 */
static void lim_cmds(PibDev *d, const struct pib_admin_cmd *tmpl, uint32_t n,
                     uint32_t *out)
{
    g_autofree struct pib_admin_cmd *cmds = g_new(struct pib_admin_cmd, d->depth);
    g_autofree struct pib_admin_cqe *cqes = g_new(struct pib_admin_cqe, d->depth);
    uint32_t done, first, slot, m, k;

    for (done = 0; done < n; done += m) {
        first = d->pi;
        slot = first & (d->depth - 1);
        m = MIN(n - done, d->depth - slot);
        for (k = 0; k < m; k++) {
            cmds[k] = *tmpl;
            cmds[k].cmd_id = cpu_to_le16(0x100 + ((first + k) & 0xff));
        }
        qtest_bufwrite(qts(d), d->sq + slot * sizeof(*cmds), cmds, m * sizeof(*cmds));
        d->pi += m;
        wr(d, PIB_REG_AQ_DB, d->pi);
        pib_wait_cqe(d, d->pi - 1, &cqes[0]);   /* in order: the last one, and all */
        qtest_bufread(qts(d), d->cq + slot * sizeof(*cqes), cqes, m * sizeof(*cqes));
        for (k = 0; k < m; k++) {
            g_assert_cmphex(cqes[k].flags & PIB_ACQE_F_PHASE, ==,
                            phase_of(first + k, d->depth));
            g_assert_cmpuint(cqes[k].status, ==, PIB_AQ_OK);
            out[done + k] = le32_to_cpu(cqes[k].result0);
        }
    }
}

/* max copies of cmd, each made, then one more refused (NO_RESOURCES): the last one's result0. */
static uint32_t lim_fill(PibDev *d, struct pib_admin_cmd *cmd, uint32_t max, uint32_t *out)
{
    lim_cmds(d, cmd, max, out);
    g_assert_cmpuint(pib_cmd(d, cmd, NULL), ==, PIB_AQ_NO_RESOURCES);
    return out[max - 1];
}

/* A CQ of depth 32-byte CQEs on a zeroed ring of its own. */
static void lim_create_cq(PibDev *d, uint32_t depth, TestCq *cq)
{
    uint32_t npages = pib_cq_pages(depth, PIB_CQE_STRIDE_LOG);
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe cqe;

    memset(cq, 0, sizeof(*cq));
    cq->depth = depth;
    cq->cqe_size = sizeof(struct pib_cqe);
    cq->ring_bytes = (uint64_t)(npages - 1) * 4096;
    cq->ring = dp_alloc(d, (size_t)npages * 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_CQ,
        .in.create_cq = {
            .depth = cpu_to_le32(depth),
            .npages = cpu_to_le32(npages),
            .pbl_addr = cpu_to_le64(lim_pbl(d, cq->ring, npages, false)),
        },
    };
    g_assert_cmpuint(pib_cmd(d, &cmd, &cqe), ==, PIB_AQ_OK);
    cq->cqn = le32_to_cpu(cqe.result0);
}

/*
 * An RC QP with rings of these depths and strides (2^n bytes a slot); on an
 * SRQ (srqn != PIB_SRQN_NONE) without an RQ, rq_depth 0.  The dp_* helpers
 * take it as one of theirs.
 */
static void lim_create_qp(PibDev *d, uint32_t pdn, uint32_t scqn, uint32_t rcqn,
                          uint32_t srqn, uint32_t sq_depth, uint32_t sq_log,
                          uint32_t rq_depth, uint32_t rq_log, TestQp *qp)
{
    uint32_t sq_pages = pib_ring_pages(sq_depth, sq_log);
    uint32_t rq_pages = rq_depth ? pib_ring_pages(rq_depth, rq_log) : 0;
    uint64_t mbox = dp_alloc(d, sizeof(struct pib_qp_create));
    struct pib_qp_create c;
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe cqe;

    memset(qp, 0, sizeof(*qp));
    qp->type = PIB_QPT_RC;
    qp->sq_depth = sq_depth;
    qp->rq_depth = rq_depth;
    qp->sq_stride_log = sq_log;
    qp->rq_stride_log = rq_log;
    qp->sq = dp_alloc(d, (size_t)sq_pages * 4096);
    qp->rq = rq_pages ? dp_alloc(d, (size_t)rq_pages * 4096) : 0;
    c = (struct pib_qp_create) {
        .pdn = cpu_to_le32(pdn),
        .type = PIB_QPT_RC,
        .flags = rq_depth ? 0 : PIB_QPC_F_NO_RQ,
        .sq_stride_log = sq_log,
        .rq_stride_log = rq_log,
        .send_cqn = cpu_to_le32(scqn),
        .recv_cqn = cpu_to_le32(rcqn),
        .srqn = cpu_to_le32(srqn),
        .sq_depth = cpu_to_le32(sq_depth),
        .rq_depth = cpu_to_le32(rq_depth),
        .max_inline = cpu_to_le32(pib_sq_max_inline(sq_log)),
        .sq_npages = cpu_to_le32(sq_pages),
        .rq_npages = cpu_to_le32(rq_pages),
        .sq_pbl_addr = cpu_to_le64(lim_pbl(d, qp->sq, sq_pages, false)),
        .rq_pbl_addr = cpu_to_le64(rq_pages ? lim_pbl(d, qp->rq, rq_pages, false)
                                            : 0),
    };
    qtest_memwrite(qts(d), mbox, &c, sizeof(c));
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_QP,
        .in.mbox = { .addr = cpu_to_le64(mbox), .len = cpu_to_le32(sizeof(c)) },
    };
    g_assert_cmpuint(pib_cmd(d, &cmd, &cqe), ==, PIB_AQ_OK);
    qp->qpn = le32_to_cpu(cqe.result0);
}

static void lim_qp_init(PibDev *d, uint32_t qpn)
{
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX | PIB_QP_PORT |
                                 PIB_QP_ACCESS_FLAGS),
        .qp_state = PIB_QPS_INIT,
        .port_num = 1,
    };

    g_assert_cmpuint(dp_modify(d, qpn, &a), ==, PIB_AQ_OK);
}

/* n receives without SGEs (16-byte slots), wr_id tag << 32 | index, written at once, rung. */
static void lim_post_recvs(PibDev *d, TestQp *qp, uint32_t tag, uint32_t n)
{
    g_autofree struct pib_recv_wqe *w = g_new0(struct pib_recv_wqe, n);
    uint32_t i;

    g_assert_cmpuint(1u << qp->rq_stride_log, ==, sizeof(*w));
    g_assert_cmpuint(qp->rq_pi + n, <=, qp->rq_depth);
    for (i = 0; i < n; i++) {
        w[i].wr_id = cpu_to_le64((uint64_t)tag << 32 | i);
    }
    qtest_bufwrite(qts(d), qp->rq, w, (size_t)n * sizeof(*w));
    qp->rq_pi += n;
    dp_doorbell(d, DP_UAR, PIB_UAR_RQ_DB, qp->qpn, qp->rq_pi);
}

/* CQEs first .. first + n - 1 of a ring's first pass, as they are now. */
static struct pib_cqe *lim_read_cqes(PibDev *d, TestCq *cq, uint32_t first, uint32_t n)
{
    struct pib_cqe *c = g_new(struct pib_cqe, n);

    g_assert_cmpuint(first + n, <=, cq->depth);
    qtest_bufread(qts(d), cq->ring + (uint64_t)first * sizeof(*c), c,
                  (size_t)n * sizeof(*c));
    return c;
}

/*
 * Wait until the first n CQEs of a ring's first pass are written: CQE i is
 * written once its phase bit is 1, and the device writes them in order, so
 * looking at every 1024th is enough.  Each 1024 get TIMEOUT_US: a hang guard
 * bounded by the count, however long the whole run takes.
 */
static void lim_wait_cqes(PibDev *d, TestCq *cq, uint32_t n)
{
    uint32_t i = 0;
    gint64 end;

    while (i < n) {
        i = MIN(i + 1024, n);
        end = g_get_monotonic_time() + TIMEOUT_US;
        while (!(qtest_readb(qts(d), cq->ring + (uint64_t)(i - 1) * sizeof(struct pib_cqe) +
                             offsetof(struct pib_cqe, flags)) & PIB_CQE_F_PHASE)) {
            g_assert_cmpint(g_get_monotonic_time(), <, end);
            g_usleep(dp_poll_interval_us);
        }
    }
}

/*
 * A CQ of max_cqe CQEs: receive queues of max_qp_wr receives each, as many as
 * make max_cqe, posted in INIT and moved to ERR one after the other, flush
 * into it until every slot holds a CQE, in order, on the first pass (the
 * device lets a CQ hold as many CQEs as it is deep; verbs' max_cqe is one less,
 * the slot the driver and the provider keep free).  The consumer then takes
 * one: the next CQE goes to slot 0 with the second pass's phase, and the one
 * after it does not fit: the CQ overflows (CQ_ERR) and slot 1 keeps its CQE.
 */
static void test_cq_full(void)
{
    const uint32_t wr = PIB_MAX_QP_WR, nqp = PIB_MAX_CQE / PIB_MAX_QP_WR;
    g_autofree TestQp *qps = g_new0(TestQp, nqp + 1);
    struct pib_device_attr a;
    struct pib_cqe *c;
    QOSState *qs;
    uint32_t pdn, q, i, j;
    TestCq cq;
    PibDev d;

    qs = pib_boot("-m 1G -device pib-hca,addr=4.0");
    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 16);
    a = dp_query_device(&d);
    g_assert_cmpuint(le32_to_cpu(a.max_cqe), ==, PIB_MAX_CQE);
    g_assert_cmpuint(le32_to_cpu(a.max_qp_wr), ==, PIB_MAX_QP_WR);
    g_assert_cmpuint(le32_to_cpu(a.max_srq_wr), ==, PIB_MAX_SRQ_WR);
    g_assert_cmpuint(PIB_MAX_CQE % PIB_MAX_QP_WR, ==, 0);
    pdn = dp_create_pd(&d);
    lim_create_cq(&d, PIB_MAX_CQE, &cq);

    for (q = 0; q < nqp; q++) {
        lim_create_qp(&d, pdn, cq.cqn, cq.cqn, PIB_SRQN_NONE, 1, PIB_SQ_STRIDE_LOG_MIN,
                      wr, PIB_RQ_STRIDE_LOG_MIN, &qps[q]);
        lim_qp_init(&d, qps[q].qpn);
        lim_post_recvs(&d, &qps[q], q, wr);
    }
    for (q = 0; q < nqp; q++) {
        g_assert_cmpuint(dp_modify_state(&d, qps[q].qpn, PIB_QPS_ERR), ==, PIB_AQ_OK);
    }
    for (i = 0; i < PIB_MAX_CQE; i += wr) {
        q = i / wr;
        c = lim_read_cqes(&d, &cq, i, wr);
        for (j = 0; j < wr; j++) {
            g_assert_cmphex(c[j].flags & PIB_CQE_F_PHASE, ==, PIB_CQE_F_PHASE);
            g_assert_cmpuint(c[j].status, ==, PIB_WC_WR_FLUSH_ERR);
            g_assert_cmphex(c[j].opcode, ==, PIB_CQE_RECV);
            g_assert_cmphex(le32_to_cpu(c[j].qpn) & PIB_QPN_MASK, ==, qps[q].qpn);
            g_assert_cmphex(le64_to_cpu(c[j].wr_id), ==, (uint64_t)q << 32 | j);
            g_assert_cmpuint(le16_to_cpu(c[j].wqe_index), ==, j & 0xffff);
        }
        g_free(c);
    }

    /* One taken: slot 0 again (second pass), then the overflow. */
    dp_doorbell(&d, DP_UAR, PIB_UAR_CQ_DB, cq.cqn, 1);
    lim_create_qp(&d, pdn, cq.cqn, cq.cqn, PIB_SRQN_NONE, 1, PIB_SQ_STRIDE_LOG_MIN, 2,
                  PIB_RQ_STRIDE_LOG_MIN, &qps[nqp]);
    lim_qp_init(&d, qps[nqp].qpn);
    lim_post_recvs(&d, &qps[nqp], nqp, 2);
    g_assert_cmpuint(dp_modify_state(&d, qps[nqp].qpn, PIB_QPS_ERR), ==, PIB_AQ_OK);
    g_assert_true(dp_aeq_find(&d, PIB_AE_CQ_ERR, cq.cqn));
    c = lim_read_cqes(&d, &cq, 0, 2);
    g_assert_cmphex(c[0].flags & PIB_CQE_F_PHASE, ==, 0);
    g_assert_cmphex(le64_to_cpu(c[0].wr_id), ==, (uint64_t)nqp << 32);
    g_assert_cmphex(le32_to_cpu(c[0].qpn) & PIB_QPN_MASK, ==, qps[nqp].qpn);
    g_assert_cmphex(c[1].flags & PIB_CQE_F_PHASE, ==, PIB_CQE_F_PHASE);
    g_assert_cmphex(le64_to_cpu(c[1].wr_id), ==, 1);
    g_free(c);

    for (q = 0; q <= nqp; q++) {
        g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_QP, qps[q].qpn), ==, PIB_AQ_OK);
    }
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_CQ, cq.cqn), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_err_count(&d), ==, 0);
    pib_close(&d);
    qtest_shutdown(qs);
}

/*
 * An SQ of max_qp_wr SENDs (8 inline bytes each), all posted with one
 * doorbell, into an SRQ of max_srq_wr receives, all posted with one doorbell,
 * across the link: every SEND completes, in order, each CQE naming its slot
 * (wqe_index) in an SQ as deep as a 16-bit index goes; every receive is taken
 * in ring order and holds its message.
 */
static void test_wq_full(void)
{
    const uint32_t n = MIN(PIB_MAX_QP_WR, PIB_MAX_SRQ_WR);
    struct lim_swqe {
        struct pib_send_wqe w;
        uint64_t data;
        uint8_t pad[56];
    } *sw = g_new0(struct lim_swqe, n);
    struct lim_rwqe {
        struct pib_recv_wqe h;
        struct pib_sge sge;
    } *rw = g_new0(struct lim_rwqe, PIB_MAX_SRQ_WR);
    g_autofree uint8_t *data = g_new(uint8_t, (size_t)n * 64);
    TestCq scq, rcq, acq, bcq;
    uint32_t pda, pdb, key, srqn, i, npages;
    uint64_t rbuf, srq_ring, v;
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe acqe;
    struct pib_cqe *c;
    TestQp qa, qb;
    TestPair p;

    G_STATIC_ASSERT(sizeof(struct lim_swqe) == 128 && sizeof(struct lim_rwqe) == 32);
    dp_pair_up(&p);
    pda = dp_create_pd(&p.a);
    pdb = dp_create_pd(&p.b);
    lim_create_cq(&p.a, PIB_MAX_QP_WR, &scq);
    lim_create_cq(&p.a, 2, &acq);
    lim_create_cq(&p.b, 2, &bcq);
    lim_create_cq(&p.b, PIB_MAX_SRQ_WR, &rcq);
    lim_create_qp(&p.a, pda, scq.cqn, acq.cqn, PIB_SRQN_NONE, PIB_MAX_QP_WR, 7, 1,
                  PIB_RQ_STRIDE_LOG_MIN, &qa);

    rbuf = dp_alloc(&p.b, (size_t)PIB_MAX_SRQ_WR * 64);
    key = dp_reg_mr(&p.b, pdb, PIB_ACCESS_LOCAL_WRITE, rbuf, (uint64_t)PIB_MAX_SRQ_WR * 64);
    npages = pib_ring_pages(PIB_MAX_SRQ_WR, 5);
    srq_ring = dp_alloc(&p.b, (size_t)npages * 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_SRQ,
        .in.create_srq = {
            .pdn = cpu_to_le32(pdb),
            .depth = cpu_to_le32(PIB_MAX_SRQ_WR),
            .stride_log = 5,
            .npages = cpu_to_le32(npages),
            .pbl_addr = cpu_to_le64(lim_pbl(&p.b, srq_ring, npages, false)),
        },
    };
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    srqn = le32_to_cpu(acqe.result0);
    lim_create_qp(&p.b, pdb, bcq.cqn, rcq.cqn, srqn, 1, PIB_SQ_STRIDE_LOG_MIN, 0, 0, &qb);
    dp_connect(&p.a, &qa, 2, qb.qpn);
    dp_connect(&p.b, &qb, 1, qa.qpn);

    for (i = 0; i < PIB_MAX_SRQ_WR; i++) {
        rw[i].h.wr_id = cpu_to_le64(i);
        rw[i].h.num_sge = 1;
        rw[i].sge = dp_sge(rbuf + (uint64_t)i * 64, 64, key);
    }
    qtest_bufwrite(qts(&p.b), srq_ring, rw, (size_t)PIB_MAX_SRQ_WR * sizeof(*rw));
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_SRQ_DB, srqn, PIB_MAX_SRQ_WR);
    for (i = 0; i < n; i++) {
        sw[i].w.opcode = PIB_WQE_SEND;
        sw[i].w.flags = PIB_WQE_F_SIGNALED | PIB_WQE_F_INLINE;
        sw[i].w.wr_id = cpu_to_le64(i);
        sw[i].w.inline_len = cpu_to_le32(sizeof(sw[i].data));
        sw[i].data = cpu_to_le64(0x5e0d000000000000ull | i);
    }
    qtest_bufwrite(qts(&p.a), qa.sq, sw, (size_t)n * sizeof(*sw));
    dp_doorbell(&p.a, DP_UAR, PIB_UAR_SQ_DB, qa.qpn, n);

    lim_wait_cqes(&p.b, &rcq, n);
    lim_wait_cqes(&p.a, &scq, n);
    c = lim_read_cqes(&p.a, &scq, 0, n);
    for (i = 0; i < n; i++) {
        g_assert_cmpuint(c[i].status, ==, PIB_WC_SUCCESS);
        g_assert_cmphex(c[i].opcode, ==, PIB_CQE_SEND);
        g_assert_cmphex(le64_to_cpu(c[i].wr_id), ==, i);
        g_assert_cmpuint(le16_to_cpu(c[i].wqe_index), ==, i & 0xffff);
    }
    g_free(c);
    c = lim_read_cqes(&p.b, &rcq, 0, n);
    qtest_bufread(qts(&p.b), rbuf, data, (size_t)n * 64);
    for (i = 0; i < n; i++) {
        g_assert_cmpuint(c[i].status, ==, PIB_WC_SUCCESS);
        g_assert_cmphex(c[i].opcode, ==, PIB_CQE_RECV);
        g_assert_cmphex(le64_to_cpu(c[i].wr_id), ==, i);
        g_assert_cmpuint(le32_to_cpu(c[i].byte_len), ==, 8);
        g_assert_cmphex(le32_to_cpu(c[i].qpn) & PIB_QPN_MASK, ==, qb.qpn);
        memcpy(&v, data + (size_t)i * 64, sizeof(v));
        g_assert_cmphex(le64_to_cpu(v), ==, 0x5e0d000000000000ull | i);
    }
    g_free(c);
    g_free(sw);
    g_free(rw);
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/*
 * max_pd PDs, max_mr MRs, max_cq CQs and max_srq SRQs on one HCA (the CQs all
 * on one ring, the SRQs all on another, the MRs all over one page: a guest may
 * do that, only the last of each is used); one more of each is refused
 * (NO_RESOURCES).  Then one SEND from the other HCA lands through the last of
 * each: a QP of the last PD on the last CQ takes the last SRQ's receive, whose
 * SGE is the last MR.
 */
static void test_objects(void)
{
    g_autofree uint32_t *num = g_new(uint32_t, 65536);
    struct lim_rwqe {
        struct pib_recv_wqe h;
        struct pib_sge sge;
    } rw;
    struct pib_device_attr a;
    struct pib_admin_cmd cmd;
    uint32_t max, pdn, key, cqn, srqn;
    uint64_t rbuf, ring, srq_ring;
    struct pib_sge sge;
    struct pib_cqe cqe;
    TestCq cq;
    TestQp qb;
    TestEnd x;
    TestPair p;

    dp_pair_up(&p);
    a = dp_query_device(&p.b);
    g_assert_cmpuint(le32_to_cpu(a.max_ah), ==, INT32_MAX);     /* no device object */

    max = le32_to_cpu(a.max_pd);
    g_assert_cmpuint(max, ==, 65536);
    cmd = (struct pib_admin_cmd) { .opcode = PIB_CMD_CREATE_PD };
    pdn = lim_fill(&p.b, &cmd, max, num);
    g_assert_cmpuint(pdn, ==, max);

    max = le32_to_cpu(a.max_mr);
    g_assert_cmpuint(max, ==, 0xffff);
    rbuf = dp_alloc(&p.b, 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_REG_MR,
        .in.reg_mr = {
            .pdn = cpu_to_le32(pdn),
            .access = cpu_to_le32(PIB_ACCESS_LOCAL_WRITE),
            .iova = cpu_to_le64(rbuf),
            .length = cpu_to_le64(4096),
            .pbl_addr = cpu_to_le64(lim_pbl(&p.b, rbuf, 1, false)),
            .npages = cpu_to_le32(1),
        },
    };
    key = lim_fill(&p.b, &cmd, max, num);
    g_assert_cmphex(key >> 8, ==, max);

    max = le32_to_cpu(a.max_cq);
    g_assert_cmpuint(max, ==, PIB_QUEUE_MAX_DEPTH);
    ring = dp_alloc(&p.b, 2 * 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_CQ,
        .in.create_cq = {
            .depth = cpu_to_le32(2),
            .npages = cpu_to_le32(2),
            .pbl_addr = cpu_to_le64(lim_pbl(&p.b, ring, 2, false)),
        },
    };
    cqn = lim_fill(&p.b, &cmd, max, num);
    g_assert_cmpuint(cqn, ==, max);

    max = le32_to_cpu(a.max_srq);
    g_assert_cmpuint(max, ==, 4096);
    srq_ring = dp_alloc(&p.b, 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_SRQ,
        .in.create_srq = {
            .pdn = cpu_to_le32(pdn),
            .depth = cpu_to_le32(1),
            .stride_log = 5,
            .npages = cpu_to_le32(1),
            .pbl_addr = cpu_to_le64(lim_pbl(&p.b, srq_ring, 1, false)),
        },
    };
    srqn = lim_fill(&p.b, &cmd, max, num);
    g_assert_cmpuint(srqn, ==, max);

    /* The last of each, used. */
    lim_create_qp(&p.b, pdn, cqn, cqn, srqn, 1, PIB_SQ_STRIDE_LOG_MIN, 0, 0, &qb);
    cq = (TestCq) { .cqn = cqn, .depth = 2, .ring = ring, .ring_bytes = 4096,
                    .cqe_size = sizeof(struct pib_cqe) };
    dp_end(&p.a, &x, PIB_QPT_RC, 4096);
    dp_connect(&p.a, &x.qp, 2, qb.qpn);
    dp_connect(&p.b, &qb, 1, x.qp.qpn);
    rw = (struct lim_rwqe) {
        .h = { .wr_id = cpu_to_le64(0x77), .num_sge = 1 },
        .sge = dp_sge(rbuf, 4096, key),
    };
    qtest_memwrite(qts(&p.b), srq_ring, &rw, sizeof(rw));
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_SRQ_DB, srqn, 1);
    dp_fill(&p.a, x.buf, 100, 0x11);
    sge = dp_sge(x.buf, 100, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x55, &sge, 1, 0, 0);
    dp_expect(&p.a, &x.scq, 0x55, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &cq, 0x77, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 100);
    g_assert_cmphex(le32_to_cpu(cqe.qpn) & PIB_QPN_MASK, ==, qb.qpn);
    dp_assert_same(&p.a, x.buf, &p.b, rbuf, 100);
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/*
 * fit timestamped CQs of PIB_MAX_CQE slots, as many as the MTT holds, then one
 * more refused (NO_RESOURCES); their numbers in cqn[].
 */
static void lim_fill_mtt(PibDev *d, struct pib_admin_cmd *cmd, uint32_t fit,
                         uint32_t *cqn)
{
    struct pib_admin_cqe cqe;
    uint32_t n;

    for (n = 0; n < fit; n++) {
        g_assert_cmpuint(pib_cmd(d, cmd, &cqe), ==, PIB_AQ_OK);
        cqn[n] = le32_to_cpu(cqe.result0);
    }
    g_assert_cmpuint(pib_cmd(d, cmd, NULL), ==, PIB_AQ_NO_RESOURCES);
}

/*
 * Rings' page lists count against the MTT, as MRs' do (pib-objects.h), whose
 * size is max_mr_size in pages.  Timestamped CQs of PIB_MAX_CQE slots (each
 * listing one page over and over: the device holds the list, whatever it
 * names) take it until one more does not fit; one destroyed, one fits again;
 * an MR gets what is left and not a page more; and once every one is gone,
 * as many CQs fit as at first.
 */
static void test_mtt(void)
{
    const uint32_t npages = pib_cq_pages(PIB_MAX_CQE, PIB_CQE_TS_STRIDE_LOG);
    uint32_t cqn[128], mtt, fit, i, left, key;
    struct pib_device_attr a;
    struct pib_admin_cmd cmd, mr;
    struct pib_admin_cqe cqe;
    uint64_t page, pbl;
    QOSState *qs;
    PibDev d;

    qs = pib_boot("-device pib-hca,addr=4.0");
    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 16);
    a = dp_query_device(&d);
    mtt = le64_to_cpu(a.max_mr_size) / 4096;
    fit = mtt / npages;
    g_assert_cmpuint(fit, <=, G_N_ELEMENTS(cqn));
    page = dp_alloc(&d, 4096);
    pbl = lim_pbl(&d, page, npages, true);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_CQ,
        .in.create_cq = {
            .depth = cpu_to_le32(PIB_MAX_CQE),
            .npages = cpu_to_le32(npages),
            .pbl_addr = cpu_to_le64(pbl),
            .flags = cpu_to_le32(PIB_CQ_F_TIMESTAMP),
        },
    };
    lim_fill_mtt(&d, &cmd, fit, cqn);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_CQ, cqn[0]), ==, PIB_AQ_OK);
    g_assert_cmpuint(pib_cmd(&d, &cmd, &cqe), ==, PIB_AQ_OK);
    cqn[0] = le32_to_cpu(cqe.result0);

    left = mtt - fit * npages;
    g_assert_cmpuint(left + 1, <=, npages);     /* the same page list will do */
    mr = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_REG_MR,
        .in.reg_mr = {
            .pdn = cpu_to_le32(dp_create_pd(&d)),
            .iova = cpu_to_le64(0x100000000ull),
            .length = cpu_to_le64((uint64_t)(left + 1) * 4096),
            .pbl_addr = cpu_to_le64(pbl),
            .npages = cpu_to_le32(left + 1),
        },
    };
    g_assert_cmpuint(pib_cmd(&d, &mr, NULL), ==, PIB_AQ_NO_RESOURCES);
    mr.in.reg_mr.length = cpu_to_le64((uint64_t)left * 4096);
    mr.in.reg_mr.npages = cpu_to_le32(left);
    g_assert_cmpuint(pib_cmd(&d, &mr, &cqe), ==, PIB_AQ_OK);
    key = le32_to_cpu(cqe.result0);

    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key), ==, PIB_AQ_OK);
    for (i = 0; i < fit; i++) {
        g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_CQ, cqn[i]), ==, PIB_AQ_OK);
    }
    lim_fill_mtt(&d, &cmd, fit, cqn);
    g_assert_cmpuint(dp_err_count(&d), ==, 0);
    pib_close(&d);
    qtest_shutdown(qs);
}

/*
 * Device memory ("Device memory" in pib_hw.h): a 16 KiB one shows in BAR0 after the
 * registers; ALLOC_DM hands out whole pages, lowest first, refuses lengths of 0 or over the
 * size and what no free run holds; an MR must lie in its DM's length; a DM with an MR is BUSY;
 * REREG_MR refuses a DM MR; a page handed out again reads zero.
 */
static void test_dm(void)
{
    const uint32_t size = 16384;
    uint32_t dm1, dm2, dm3, start, key, pdn;
    struct pib_device_attr a;
    struct pib_admin_cmd rereg;
    QOSState *qs;
    PibDev d;

    qs = pib_boot("-device pib-hca,addr=4.0,dm-size=16384");
    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 16);
    a = dp_query_device(&d);
    g_assert_cmpuint(le32_to_cpu(a.max_dm_size), ==, size);
    g_assert_cmpuint(le32_to_cpu(a.dm_bar_offset), ==, size);
    g_assert_cmpuint(d.bar0_size, ==, 2 * size);
    pdn = dp_create_pd(&d);

    g_assert_cmpuint(dp_alloc_dm(&d, 0, &dm1, &start), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_alloc_dm(&d, size + 1, &dm1, &start), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_alloc_dm(&d, 5000, &dm1, &start), ==, PIB_AQ_OK);
    g_assert_cmpuint(start, ==, 0);
    g_assert_cmpuint(dp_alloc_dm(&d, 8192, &dm2, &start), ==, PIB_AQ_OK);
    g_assert_cmpuint(start, ==, 8192);
    g_assert_cmpuint(dp_alloc_dm(&d, 1, &dm3, &start), ==, PIB_AQ_NO_RESOURCES);

    /* The host writes DM 1's first page through BAR0. */
    qpci_io_writel(d.dev, d.bar0, size + 16, 0xfeedf00d);
    g_assert_cmphex(qpci_io_readl(d.dev, d.bar0, size + 16), ==, 0xfeedf00d);

    g_assert_cmpuint(dp_reg_dm_mr(&d, pdn, dm1, 4000, 1001, &key), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_reg_dm_mr(&d, pdn, dm1, 5001, 0, &key), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_reg_dm_mr(&d, pdn, 77, 0, 16, &key), ==, PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_reg_dm_mr(&d, pdn + 1, dm1, 0, 16, &key), ==, PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_reg_dm_mr(&d, pdn, dm1, 0, 5000, &key), ==, PIB_AQ_OK);
    rereg = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_REREG_MR,
        .in.rereg_mr = { .key = cpu_to_le32(key), .mask = cpu_to_le32(PIB_REREG_ACCESS) },
    };
    g_assert_cmpuint(pib_cmd(&d, &rereg, NULL), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEALLOC_DM, dm1), ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEALLOC_DM, dm1), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEALLOC_DM, dm1), ==, PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_reg_dm_mr(&d, pdn, dm1, 0, 16, &key), ==, PIB_AQ_BAD_RESOURCE);

    /* The lowest free run again, and nothing of its last user left in it. */
    g_assert_cmpuint(dp_alloc_dm(&d, 4096, &dm3, &start), ==, PIB_AQ_OK);
    g_assert_cmpuint(start, ==, 0);
    g_assert_cmphex(qpci_io_readl(d.dev, d.bar0, size + 16), ==, 0);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEALLOC_DM, dm3), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEALLOC_DM, dm2), ==, PIB_AQ_OK);
    pib_close(&d);
    qtest_shutdown(qs);

    /* Without device memory: BAR0 is the registers, and ALLOC_DM has nothing to give. */
    qs = pib_boot("-device pib-hca,addr=4.0,dm-size=0");
    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 16);
    a = dp_query_device(&d);
    g_assert_cmpuint(le32_to_cpu(a.max_dm_size), ==, 0);
    g_assert_cmpuint(d.bar0_size, ==, PIB_REGS_SIZE);
    g_assert_cmpuint(dp_alloc_dm(&d, 1, &dm1, &start), ==, PIB_AQ_BAD_PARAM);
    pib_close(&d);
    qtest_shutdown(qs);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/pib/limits/ceq-wrap", test_ceq_wrap);
    qtest_add_func("/pib/limits/pma-saturate", test_pma_saturate);
    qtest_add_func("/pib/limits/cq-full", test_cq_full);
    qtest_add_func("/pib/limits/wq-full", test_wq_full);
    qtest_add_func("/pib/limits/objects", test_objects);
    qtest_add_func("/pib/limits/mtt", test_mtt);
    qtest_add_func("/pib/limits/dm", test_dm);
    return g_test_run();
}
