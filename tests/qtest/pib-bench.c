/*
 * QTest benchmark of the pib HCA's data path (hw/pib)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Only in GLib's perf mode (pib-bench -m perf): two HCAs in one QEMU, RC at
 * MTU 4096.  Each run reports wall-clock throughput and the CPU time the QEMU
 * process spent, read from /proc (the device's cost; the test itself runs on
 * another core and only polls).  Not part of `make qtest`.
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-bench \
 *          -m perf -p /x86_64/pib/bench/rc
 * PIB_BENCH_ROUNDS=N moves N times as much data (steadier figures).
 */

#include "qemu/osdep.h"

#include "pib-qtest.h"

#define BENCH_MTU_4096      5

/* The QEMU process this test started: our child named qemu-system-*. */
static pid_t bench_qemu_pid(void)
{
    g_autofree char *path = g_strdup_printf("/proc/self/task/%d/children",
                                            (int)getpid());
    g_autofree char *list = NULL;
    g_auto(GStrv) pids = NULL;
    int i;

    g_assert_true(g_file_get_contents(path, &list, NULL, NULL));
    pids = g_strsplit(g_strstrip(list), " ", -1);
    for (i = 0; pids[i]; i++) {
        g_autofree char *comm_path = g_strdup_printf("/proc/%s/comm",
                                                     pids[i]);
        g_autofree char *comm = NULL;

        if (g_file_get_contents(comm_path, &comm, NULL, NULL) &&
            g_str_has_prefix(comm, "qemu-system")) {
            return atoi(pids[i]);
        }
    }
    g_assert_not_reached();
}

/* utime + stime of a process, in seconds. */
static double bench_cpu_s(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
    g_autofree char *stat = NULL;
    unsigned long long utime, stime;
    const char *p;

    g_assert_true(g_file_get_contents(path, &stat, NULL, NULL));
    p = strrchr(stat, ')');     /* comm may hold blanks: skip past it */
    g_assert_nonnull(p);
    g_assert_cmpint(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
                           "%*u %llu %llu", &utime, &stime), ==, 2);
    return (double)(utime + stime) / sysconf(_SC_CLK_TCK);
}

typedef struct BenchClock {
    pid_t pid;
    gint64 wall0;
    double cpu0;
} BenchClock;

static void bench_start(BenchClock *c, pid_t pid)
{
    c->pid = pid;
    c->cpu0 = bench_cpu_s(pid);
    c->wall0 = g_get_monotonic_time();
}

/* Report bytes (or, with bytes 0, msgs messages) moved since bench_start. */
static void bench_report(BenchClock *c, const char *what, uint64_t bytes,
                         uint64_t msgs)
{
    double wall = (g_get_monotonic_time() - c->wall0) / 1e6;
    double cpu = bench_cpu_s(c->pid) - c->cpu0;

    if (bytes) {
        g_test_message("bench %-28s %8.1f MiB/s   QEMU CPU %6.3f s/GiB",
                       what, bytes / wall / (1 << 20),
                       cpu / ((double)bytes / (1 << 30)));
    } else {
        g_test_message("bench %-28s %8.0f msg/s   QEMU CPU %6.2f us/msg",
                       what, msgs / wall, cpu * 1e6 / msgs);
    }
}

/*
 * Batched posting and polling for the small-message benchmark, so that it
 * measures the device rather than the qtest protocol (one command costs more
 * than a small message does): n WQEs, one SGE each, go into consecutive ring
 * slots with one memory write per contiguous run and one doorbell, and n
 * CQEs are awaited by the last one's phase and consumed with one read.
 */
static void bench_write_slots(PibDev *d, uint64_t ring, uint32_t depth,
                              uint32_t stride_log, uint32_t pi,
                              const uint8_t *slots, uint32_t n)
{
    uint32_t first = pi & (depth - 1), run = MIN(n, depth - first);

    qtest_memwrite(qts(d), ring + ((uint64_t)first << stride_log), slots,
                   (size_t)run << stride_log);
    if (run < n) {
        qtest_memwrite(qts(d), ring, slots + ((size_t)run << stride_log),
                       (size_t)(n - run) << stride_log);
    }
}

/* SENDs i = 0..n-1 of len bytes from buf + i * len; only the last signaled */
static void bench_post_sends(PibDev *d, TestQp *qp, uint32_t n, uint64_t buf,
                             uint32_t len, uint32_t key)
{
    size_t stride = (size_t)1 << qp->sq_stride_log;
    g_autofree uint8_t *slots = g_malloc0(n * stride);
    uint32_t i;

    for (i = 0; i < n; i++) {
        struct pib_send_wqe wqe = {
            .opcode = PIB_WQE_SEND,
            .flags = i == n - 1 ? PIB_WQE_F_SIGNALED : 0,
            .num_sge = 1,
            .wr_id = cpu_to_le64(i),
        };
        struct pib_sge sge = dp_sge(buf + i * len, len, key);

        memcpy(slots + i * stride, &wqe, sizeof(wqe));
        memcpy(slots + i * stride + sizeof(wqe), &sge, sizeof(sge));
    }
    bench_write_slots(d, qp->sq, qp->sq_depth, qp->sq_stride_log, qp->sq_pi,
                      slots, n);
    qp->sq_pi += n;
    dp_doorbell(d, qp->uar, PIB_UAR_SQ_DB, qp->qpn, qp->sq_pi);
}

/* Receives i = 0..n-1 of len bytes at buf + i * len. */
static void bench_post_recvs(PibDev *d, TestQp *qp, uint32_t n, uint64_t buf,
                             uint32_t len, uint32_t key)
{
    size_t stride = (size_t)1 << qp->rq_stride_log;
    g_autofree uint8_t *slots = g_malloc0(n * stride);
    uint32_t i;

    for (i = 0; i < n; i++) {
        struct pib_recv_wqe wqe = {
            .wr_id = cpu_to_le64(i),
            .num_sge = 1,
        };
        struct pib_sge sge = dp_sge(buf + i * len, len, key);

        memcpy(slots + i * stride, &wqe, sizeof(wqe));
        memcpy(slots + i * stride + sizeof(wqe), &sge, sizeof(sge));
    }
    bench_write_slots(d, qp->rq, qp->rq_depth, qp->rq_stride_log, qp->rq_pi,
                      slots, n);
    qp->rq_pi += n;
    dp_doorbell(d, qp->uar, PIB_UAR_RQ_DB, qp->qpn, qp->rq_pi);
}

/*
 * The next n CQEs, all successful with this opcode and wr_ids 0..n-1 (or,
 * with one_last, the single CQE of wr_id n - 1).
 */
static void bench_expect(PibDev *d, TestCq *cq, uint32_t n, uint8_t opcode,
                         bool one_last)
{
    uint32_t want = one_last ? 1 : n, i, slot;
    g_autofree struct pib_cqe *cqe = g_new(struct pib_cqe, cq->depth);
    uint32_t last = cq->ci + want - 1;
    uint64_t last_addr = cq->ring + (last & (cq->depth - 1)) * sizeof(*cqe);
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;

    g_assert_cmpuint(want, <=, cq->depth);
    for (;;) {
        qtest_memread(qts(d), last_addr, cqe, sizeof(*cqe));
        if ((cqe->flags & PIB_CQE_F_PHASE) == phase_of(last, cq->depth)) {
            break;
        }
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(dp_poll_interval_us);
    }
    qtest_memread(qts(d), cq->ring, cqe, cq->depth * sizeof(*cqe));
    for (i = 0; i < want; i++) {
        slot = (cq->ci + i) & (cq->depth - 1);
        g_assert_cmpuint(cqe[slot].flags & PIB_CQE_F_PHASE, ==,
                         phase_of(cq->ci + i, cq->depth));
        g_assert_cmpuint(cqe[slot].status, ==, PIB_WC_SUCCESS);
        g_assert_cmphex(cqe[slot].opcode, ==, opcode);
        g_assert_cmphex(le64_to_cpu(cqe[slot].wr_id), ==,
                        one_last ? n - 1 : i);
    }
    cq->ci += want;
    qtest_writel(qts(d), cq->ring + cq->ring_bytes, cq->ci);
}

static void test_bench(void)
{
    /* PIB_BENCH_ROUNDS=N moves N times as much data (steadier figures). */
    const char *rounds_env = g_getenv("PIB_BENCH_ROUNDS");
    const uint32_t rounds = rounds_env ? MAX(atoi(rounds_env), 1) : 1;
    const uint32_t big = 4 << 20, n_big = 16;
    const uint32_t mid = 64 << 10, n_mid = 256;
    const uint32_t n_small = 4096;
    TestPair p;
    TestEnd x, y;
    BenchClock c;
    struct pib_sge sge[1];
    uint32_t i, j;
    pid_t pid;

    dp_pair_up(&p);
    pid = bench_qemu_pid();
    dp_poll_interval_us = 2000;
    dp_end(&p.a, &x, PIB_QPT_RC, big);
    dp_end(&p.b, &y, PIB_QPT_RC, big);
    dp_connect_ex(&p.a, &x.qp, 2, y.qp.qpn, BENCH_MTU_4096, 14, 7, 7);
    dp_connect_ex(&p.b, &y.qp, 1, x.qp.qpn, BENCH_MTU_4096, 14, 7, 7);
    dp_fill(&p.a, x.buf, big, 5);

    /* RDMA WRITE, 4 MiB each, 16 in flight (one SQ's worth). */
    g_test_message("bench: WRITE runs (QEMU pid %d)", (int)pid);
    bench_start(&c, pid);
    sge[0] = dp_sge(x.buf, big, x.key);
    for (j = 0; j < rounds; j++) {
        for (i = 0; i < n_big; i++) {
            dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED,
                         i, sge, 1, y.buf, y.key);
        }
        for (i = 0; i < n_big; i++) {
            dp_expect(&p.a, &x.scq, i, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE,
                      NULL);
        }
    }
    bench_report(&c, "RC WRITE 4 MiB", (uint64_t)big * n_big * rounds, 0);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf, big);

    /* RDMA READ, 4 MiB each. */
    bench_start(&c, pid);
    for (i = 0; i < n_big * rounds; i++) {
        dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, i,
                     sge, 1, y.buf, y.key);
        if (i % 4 == 3) {       /* max_rd_atomic 4 */
            for (j = i - 3; j <= i; j++) {
                dp_expect(&p.a, &x.scq, j, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ,
                          NULL);
            }
        }
    }
    bench_report(&c, "RC READ 4 MiB", (uint64_t)big * n_big * rounds, 0);

    /* SEND, 64 KiB each, in batches of 16 receives. */
    bench_start(&c, pid);
    for (i = 0; i < n_mid * rounds; i += 16) {
        for (j = 0; j < 16; j++) {
            sge[0] = dp_sge(y.buf + j * mid, mid, y.key);
            dp_post_recv(&p.b, &y.qp, j, sge, 1);
        }
        for (j = 0; j < 16; j++) {
            sge[0] = dp_sge(x.buf + j * mid, mid, x.key);
            dp_post_send(&p.a, &x.qp, PIB_WQE_SEND,
                         j == 15 ? PIB_WQE_F_SIGNALED : 0, j, sge, 1, 0, 0);
        }
        dp_expect(&p.a, &x.scq, 15, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
        for (j = 0; j < 16; j++) {
            dp_expect(&p.b, &y.rcq, j, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
        }
    }
    bench_report(&c, "RC SEND 64 KiB", (uint64_t)mid * n_mid * rounds, 0);

    /*
     * Small SENDs: 64 bytes, batches of 16 (a ring's worth), posted and
     * reaped in bulk.  Still mostly the qtest protocol: a batch takes a dozen
     * commands, and each costs QEMU more than a small message does.
     */
    dp_poll_interval_us = 100;
    bench_start(&c, pid);
    for (i = 0; i < n_small * rounds; i += 16) {
        bench_post_recvs(&p.b, &y.qp, 16, y.buf, 64, y.key);
        bench_post_sends(&p.a, &x.qp, 16, x.buf, 64, x.key);
        bench_expect(&p.a, &x.scq, 16, PIB_CQE_SEND, true);
        bench_expect(&p.b, &y.rcq, 16, PIB_CQE_RECV, false);
    }
    bench_report(&c, "RC SEND 64 B", 0, n_small * rounds);
    dp_poll_interval_us = 200;
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    if (g_test_perf()) {
        qtest_add_func("/pib/bench/rc", test_bench);
    } else {
        g_printerr("pib-bench: the benchmark runs in perf mode only "
                   "(-m perf)\n");
    }

    return g_test_run();
}
