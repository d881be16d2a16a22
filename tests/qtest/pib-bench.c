/*
 * QTest benchmark of the pib HCA's data path (hw/pib)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Only in GLib's perf mode (pib-bench -m perf).  Each run reports wall-clock
 * throughput and the CPU time the QEMU process spent, read from /proc (the
 * device's cost; the test itself runs on another core and mostly waits).
 * Not part of `make qtest`.  Three benchmarks, each on the link's two paths
 * (docs/reference/hardware.md, "The link"): .../direct, the default, where the device
 * reads and writevs the socket itself, and .../chardev (link-direct=off),
 * for before/after figures:
 *
 *   rc        two HCAs in one QEMU, RC at MTU 4096: WRITE, READ and SEND
 *   link-rx   one HCA flooded with frames: this process is its link peer
 *             and writes UC RDMA WRITEs of 4 KiB (full-MTU frames) into an
 *             MR as fast as the device takes them, the receive path alone
 *   link-tx   one HCA sending UC RDMA WRITEs of 4 MiB to this process,
 *             which only reads them: the transmit path alone
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-bench \
 *          -m perf -p /x86_64/pib/bench
 * PIB_BENCH_ROUNDS=N moves N times as much data (steadier figures); PIB_BENCH_PROPS=",p=v"
 * adds device properties (",link-credits=off": the same without credit-based flow control).
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

/* PIB_BENCH_ROUNDS=N moves N times as much data (steadier figures). */
static uint32_t bench_rounds(void)
{
    const char *env = g_getenv("PIB_BENCH_ROUNDS");

    return env ? MAX(atoi(env), 1) : 1;
}

/*
 * The receive path a benchmark runs on: test data "direct" or "chardev"; PIB_BENCH_PROPS
 * adds device properties (",link-credits=off" for an A/B).
 */
static void bench_set_path(const void *path)
{
    static char *props;

    g_free(props);
    props = g_strdup_printf("%s%s", g_str_equal(path, "chardev") ? ",link-direct=off" : "",
                            g_getenv("PIB_BENCH_PROPS") ?: "");
    pib_dev_props = props;
}

static void test_bench(const void *path)
{
    const uint32_t rounds = bench_rounds();
    const uint32_t big = 4 << 20, n_big = 16;
    const uint32_t mid = 64 << 10, n_mid = 256;
    const uint32_t n_small = 4096;
    TestPair p;
    TestEnd x, y;
    BenchClock c;
    struct pib_sge sge[1];
    uint32_t i, j;
    pid_t pid;

    bench_set_path(path);
    dp_pair_up(&p);
    pid = bench_qemu_pid();
    dp_poll_interval_us = 2000;
    dp_end(&p.a, &x, PIB_QPT_RC, big);
    dp_end(&p.b, &y, PIB_QPT_RC, big);
    dp_connect_ex(&p.a, &x.qp, 2, y.qp.qpn, BENCH_MTU_4096, 14, 7, 7);
    dp_connect_ex(&p.b, &y.qp, 1, x.qp.qpn, BENCH_MTU_4096, 14, 7, 7);
    dp_fill(&p.a, x.buf, big, 5);

    /* RDMA WRITE, 4 MiB each, 16 in flight (one SQ's worth). */
    g_test_message("bench: rc, %s receive path (QEMU pid %d)",
                   (const char *)path, (int)pid);
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

/*
 * The receive path alone: this process is the device's link peer and floods
 * it with UC RDMA WRITE ONLY frames of 4 KiB payload (4,136 bytes on the
 * wire), LINK_RX_BATCH frames per write, PSNs in sequence, into a 4 MiB MR
 * round and round.  UC sends no ACKs, so the device only receives; a SEND
 * into a posted receive closes the run, and its CQE says that every frame
 * before it was taken.  The counters then say none was dropped.
 */
#define LINK_RX_PAYLOAD     4096
#define LINK_RX_BATCH       64
#define LINK_RX_FRAMES      (64 * 1024)     /* 256 MiB of payload */
#define LINK_RX_MR          (4 << 20)

static uint32_t link_rx_frame(uint8_t *f, uint32_t psn, uint64_t va,
                              uint32_t rkey, uint8_t fill)
{
    uint32_t len = 8 + 12 + 16 + LINK_RX_PAYLOAD;
    uint8_t *b = f + PIB_LINK_HDR_LEN;

    f[0] = PIB_LINK_MAGIC;
    f[1] = PIB_FRAME_PACKET;
    stw_be_p(f + 2, len);
    b[0] = 0;
    b[1] = PIB_LNH_IBA_LOCAL;
    stw_be_p(b + 2, 1);                 /* DLID: the device */
    stw_be_p(b + 4, len / 4);
    stw_be_p(b + 6, WP_LID);
    b[8] = PIB_OP_UC_RDMA_WRITE_ONLY;
    b[9] = 0;
    stw_be_p(b + 10, 0xffff);
    stl_be_p(b + 12, wp_dqpn);
    stl_be_p(b + 16, psn & PIB_PSN_MASK);
    stq_be_p(b + 20, va);               /* RETH */
    stl_be_p(b + 28, rkey);
    stl_be_p(b + 32, LINK_RX_PAYLOAD);
    memset(b + 36, fill, LINK_RX_PAYLOAD);
    return PIB_LINK_HDR_LEN + len;
}

static void test_link_rx(const void *path)
{
    const uint32_t frames = LINK_RX_FRAMES * bench_rounds();
    const uint32_t frame_len = PIB_LINK_HDR_LEN + 8 + 12 + 16 + LINK_RX_PAYLOAD;
    g_autofree uint8_t *batch = g_malloc(LINK_RX_BATCH * frame_len);
    uint64_t cnt[PIB_CNT_MAX];
    struct pib_sge sge[1];
    uint8_t page[64];
    uint32_t i, j, psn = 0;
    BenchClock c;
    PeerLink l;
    TestEnd x;
    PibDev d;
    pid_t pid;
    int fd, c_id;

    bench_set_path(path);
    peer_boot(&l, 1);
    pid = bench_qemu_pid();
    pib_open(&d, l.qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 64);
    fd = peer_connect(l.path);
    peer_bring_up(&d, fd, TEST_NODE_GUID);
    dp_end(&d, &x, PIB_QPT_UC, LINK_RX_MR);
    dp_connect_ex(&d, &x.qp, WP_LID, WP_QPN, BENCH_MTU_4096, 14, 7, 7);
    wp_dqpn = x.qp.qpn;
    sge[0] = dp_sge(x.buf, 64, x.key);
    dp_post_recv(&d, &x.qp, 1, sge, 1);
    for (i = 0; i < LINK_RX_BATCH; i++) {
        link_rx_frame(batch + i * frame_len, 0, x.buf, x.key, 0x5a);
    }

    g_test_message("bench: link-rx, %s receive path (QEMU pid %d)",
                   (const char *)path, (int)pid);
    dp_poll_interval_us = 2000;
    bench_start(&c, pid);
    for (i = 0; i < frames; i += LINK_RX_BATCH) {
        for (j = 0; j < LINK_RX_BATCH; j++) {
            uint8_t *b = batch + j * frame_len + PIB_LINK_HDR_LEN;

            stl_be_p(b + 16, psn++ & PIB_PSN_MASK);
            stq_be_p(b + 20, x.buf + (uint64_t)((i + j) %
                              (LINK_RX_MR / LINK_RX_PAYLOAD)) * LINK_RX_PAYLOAD);
        }
        peer_write(fd, batch, LINK_RX_BATCH * frame_len);
    }
    wp_send(fd, PIB_OP_UC_SEND_ONLY, psn, false, NULL, 0, "done", 4);
    dp_expect(&d, &x.rcq, 1, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    bench_report(&c, "link-rx UC WRITE 4 KiB frames",
                 (uint64_t)frames * LINK_RX_PAYLOAD, 0);
    dp_poll_interval_us = 200;

    dp_counters(&d, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_RX_PACKETS], ==, frames + 1);
    for (c_id = PIB_CNT_RX_DROP_PORT_DOWN; c_id <= PIB_CNT_RX_DROP_VL15;
         c_id++) {
        g_assert_cmpuint(cnt[c_id], ==, 0);
    }
    qtest_memread(qts(&d), x.buf + LINK_RX_MR - sizeof(page), page,
                  sizeof(page));
    for (i = 0; i < sizeof(page); i++) {
        g_assert_cmphex(page[i], ==, 0x5a);
    }
    g_assert_cmpuint(dp_err_count(&d), ==, 0);
    close(fd);
    pib_close(&d);
    peer_shutdown(&l);
}

/*
 * The transmit path alone: the device sends UC RDMA WRITEs of 4 MiB (1,024
 * full-MTU frames each, no ACKs) to this process, its link peer, which only
 * reads the socket and counts the bytes in a thread of its own.  A run ends
 * when every byte of every frame has arrived.
 */
#define LINK_TX_MSG         (4 << 20)
#define LINK_TX_MSGS        64              /* 256 MiB */
#define LINK_TX_QUEUED      16

typedef struct LinkTxSink {
    int fd;
    uint64_t want;
    uint64_t got;
} LinkTxSink;

static gpointer link_tx_sink(gpointer opaque)
{
    LinkTxSink *k = opaque;
    g_autofree uint8_t *buf = g_malloc(1 << 20);
    ssize_t n;

    while (k->got < k->want) {
        n = read(k->fd, buf, 1 << 20);
        if (n <= 0) {
            break;
        }
        k->got += n;
    }
    return NULL;
}

static void test_link_tx(const void *path)
{
    const uint32_t msgs = LINK_TX_MSGS * bench_rounds();
    /* Frame bytes of a message: 1,024 frames of a link header, LRH, BTH and
     * 4 KiB, and the first one's RETH. */
    const uint64_t msg_bytes = LINK_TX_MSG + (LINK_TX_MSG / 4096) *
                               (PIB_LINK_HDR_LEN + 8 + 12) + 16;
    struct pib_sge sge[1];
    LinkTxSink sink;
    GThread *th;
    BenchClock c;
    PeerLink l;
    TestEnd x;
    PibDev d;
    pid_t pid;
    uint32_t i;

    bench_set_path(path);
    peer_boot(&l, 1);
    pid = bench_qemu_pid();
    pib_open(&d, l.qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 64);
    sink.fd = peer_connect(l.path);
    peer_bring_up(&d, sink.fd, TEST_NODE_GUID);
    dp_end(&d, &x, PIB_QPT_UC, LINK_TX_MSG);
    dp_connect_ex(&d, &x.qp, WP_LID, WP_QPN, BENCH_MTU_4096, 14, 7, 7);
    sink.want = msg_bytes * msgs;
    sink.got = 0;

    g_test_message("bench: link-tx, %s path (QEMU pid %d)",
                   (const char *)path, (int)pid);
    dp_poll_interval_us = 2000;
    sge[0] = dp_sge(x.buf, LINK_TX_MSG, x.key);
    bench_start(&c, pid);
    th = g_thread_new("link-tx-sink", link_tx_sink, &sink);
    for (i = 0; i < msgs; i++) {
        if (i >= LINK_TX_QUEUED) {
            dp_expect(&d, &x.scq, i - LINK_TX_QUEUED, PIB_WC_SUCCESS,
                      PIB_CQE_RDMA_WRITE, NULL);
        }
        dp_post_send(&d, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, i,
                     sge, 1, 0x100000, 0x1234);
    }
    for (i = msgs - MIN(msgs, LINK_TX_QUEUED); i < msgs; i++) {
        dp_expect(&d, &x.scq, i, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    }
    g_thread_join(th);
    bench_report(&c, "link-tx UC WRITE 4 MiB", (uint64_t)LINK_TX_MSG * msgs,
                 0);
    dp_poll_interval_us = 200;
    g_assert_cmpuint(sink.got, ==, sink.want);
    g_assert_cmpuint(dp_err_count(&d), ==, 0);
    close(sink.fd);
    pib_close(&d);
    peer_shutdown(&l);
}

int main(int argc, char **argv)
{
    static const char *const paths[] = { "direct", "chardev" };
    int i;

    g_test_init(&argc, &argv, NULL);

    if (g_test_perf()) {
        for (i = 0; i < ARRAY_SIZE(paths); i++) {
            g_autofree char *rc = g_strdup_printf("/pib/bench/rc/%s", paths[i]);
            g_autofree char *rx = g_strdup_printf("/pib/bench/link-rx/%s",
                                                  paths[i]);

            qtest_add_data_func(rc, paths[i], test_bench);
            qtest_add_data_func(rx, paths[i], test_link_rx);
            g_free(rx);
            rx = g_strdup_printf("/pib/bench/link-tx/%s", paths[i]);
            qtest_add_data_func(rx, paths[i], test_link_tx);
        }
    } else {
        g_printerr("pib-bench: the benchmark runs in perf mode only "
                   "(-m perf)\n");
    }

    return g_test_run();
}
