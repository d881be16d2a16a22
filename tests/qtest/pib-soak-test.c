/*
 * QTest soak for the pib InfiniBand HCA: the link cut thousands of times with RC traffic
 * in flight
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Two devices in one QEMU (LIDs 1 and 2), each listening on a socket of its own.  This process
 * is the cable between them: a relay thread copies bytes from each socket to the other and,
 * when told, cuts both at a chosen byte of the traffic (mid-frame as often as not) and later
 * plugs both in again.  Each round:
 *
 *   1. device A posts a random mix of SENDs, RDMA WRITEs and RDMA READs (random sizes and
 *      offsets) on an RC QP connected to one of device B;
 *   2. the relay cuts the cable after a random number of bytes;
 *   3. either RESTORE: the cable is plugged in again at once, and every WQE must complete
 *      successfully, B must have received every SEND exactly once, and every byte must
 *      match; or DIE: the cable stays cut, and every WQE must complete: those the peer had
 *      acknowledged with success, the oldest other one with RETRY_EXC_ERR and the rest with
 *      WR_FLUSH_ERR, the QP in ERR.  Then both QPs start over and the cable comes back.
 *
 * One round in five is a STALL instead: large WRITEs, and a peer that stops reading before
 * anything reached it, so that A's socket and transmit queue fill and its requester stops
 * for room; one ACK timeout then rewinds the requester into the full queue, and only then
 * is the cable cut.  The head must fail with RETRY_EXC_ERR within the budget all the same
 * (the race of 41-link-fault that /pib/data/link-death reproduces exactly).
 *
 * "Must complete" has a bound, counted on the virtual clock, which only this test moves: the
 * retry budget, (retry_cnt + 1) ACK timeouts, plus one timeout of slack.  A QP that neither
 * completes nor fails within it is the hang this soak exists to find.
 *
 * PIB_SOAK_CUTS sets the number of rounds (default 200; `make soak` runs 10000) and
 * PIB_SOAK_SEED the random seed (default 1), so a failing round can be run again.
 */

#include "qemu/osdep.h"
#include <sys/socket.h>
#include <poll.h>
#include <glib/gstdio.h>

#include "pib-qtest.h"

#define SOAK_TIMEOUT        8           /* 4.096 us << 8: the 1 ms floor */
#define SOAK_RETRY_CNT      3
#define SOAK_STEP_NS        (1100 * 1000)   /* a little over one ACK timeout */
#define SOAK_BUDGET_STEPS   (SOAK_RETRY_CNT + 2)
#define SOAK_MAX_WQES       6
#define SOAK_MAX_MSG        (16 * 1024)
#define SOAK_QUIET_US       (20 * 1000)     /* no byte on the cable this long: settled */
#define SOAK_BUF            (SOAK_MAX_WQES * SOAK_MAX_MSG)
#define SOAK_STALL_MSG      (256 * 1024)    /* 6 of them: far more than the queue holds */
#define SOAK_STALL_BUF      (SOAK_MAX_WQES * SOAK_STALL_MSG)
#define SOAK_MTU_1024       3

/*
 * The cable.  The main thread asks for a cut (at a byte count) or a reconnection; the
 * relay thread does the I/O.  Everything below `lock` is shared.
 */
typedef struct Relay {
    const char *path[2];        /* device A's socket, device B's */
    GThread *thread;
    GMutex lock;
    GCond changed;
    int fd[2];                  /* -1: cut */
    bool paused;                /* A's side is not read: A's queue fills */
    bool stop;
    uint64_t relayed;           /* bytes copied since the cut was armed */
    uint64_t total;             /* bytes copied, ever */
    uint64_t cut_at;            /* cut once relayed reaches this; UINT64_MAX: never */
    unsigned cuts;
} Relay;

/* Copy what side i has to the other side, at most limit bytes; false if either end closed. */
static bool relay_copy(Relay *r, int i, uint64_t limit)
{
    uint8_t buf[65536];
    ssize_t got = read(r->fd[i], buf, MIN(sizeof(buf), limit));
    size_t off = 0;
    ssize_t put;

    if (got <= 0) {
        return false;
    }
    while (off < (size_t)got) {
        put = send(r->fd[i ^ 1], buf + off, got - off, MSG_NOSIGNAL);
        if (put <= 0) {
            return false;
        }
        off += put;
    }
    r->relayed += got;
    r->total += got;
    return true;
}

static void relay_cut_locked(Relay *r)
{
    int i;

    for (i = 0; i < 2; i++) {
        if (r->fd[i] >= 0) {
            close(r->fd[i]);
            r->fd[i] = -1;
        }
    }
    r->cuts++;
    r->cut_at = UINT64_MAX;
    g_cond_broadcast(&r->changed);
}

static gpointer relay_thread(gpointer opaque)
{
    Relay *r = opaque;
    struct pollfd pfd[2];
    uint64_t room;
    int i;

    g_mutex_lock(&r->lock);
    while (!r->stop) {
        if (r->fd[0] < 0) {
            g_cond_wait(&r->changed, &r->lock);
            continue;
        }
        for (i = 0; i < 2; i++) {
            pfd[i] = (struct pollfd) {
                .fd = r->fd[i], .events = i == 0 && r->paused ? 0 : POLLIN,
            };
        }
        g_mutex_unlock(&r->lock);
        poll(pfd, 2, 10);
        g_mutex_lock(&r->lock);
        for (i = 0; i < 2 && r->fd[0] >= 0; i++) {
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) ||
                (i == 0 && r->paused)) {
                continue;
            }
            /* Never copy past the cut: the bytes after it are lost with the cable. */
            room = r->cut_at - MIN(r->cut_at, r->relayed);
            if (room == 0 || !relay_copy(r, i, room) || r->relayed >= r->cut_at) {
                relay_cut_locked(r);
            }
        }
    }
    g_mutex_unlock(&r->lock);
    return NULL;
}

/* Plug both ends in again (the devices accept as soon as they noticed the last cut). */
static void relay_connect(Relay *r)
{
    int a = peer_connect(r->path[0]), b = peer_connect(r->path[1]);

    g_mutex_lock(&r->lock);
    g_assert_cmpint(r->fd[0], <, 0);
    r->fd[0] = a;
    r->fd[1] = b;
    r->relayed = 0;
    r->cut_at = UINT64_MAX;
    r->paused = false;
    g_cond_broadcast(&r->changed);
    g_mutex_unlock(&r->lock);
}

static void relay_pause(Relay *r, bool paused)
{
    g_mutex_lock(&r->lock);
    r->paused = paused;
    g_mutex_unlock(&r->lock);
}

static void relay_arm(Relay *r, uint64_t cut_at)
{
    g_mutex_lock(&r->lock);
    r->relayed = 0;
    r->cut_at = cut_at;
    g_mutex_unlock(&r->lock);
}

static uint64_t relay_total(Relay *r)
{
    uint64_t total;

    g_mutex_lock(&r->lock);
    total = r->total;
    g_mutex_unlock(&r->lock);
    return total;
}

/*
 * Wait until no byte has crossed the cable for SOAK_QUIET_US: the devices are done with
 * what they can do without a timer.  (A cut cable is quiet at once.)
 */
static void relay_settle(Relay *r)
{
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;
    uint64_t last = relay_total(r), now;

    for (;;) {
        g_usleep(SOAK_QUIET_US);
        now = relay_total(r);
        if (now == last) {
            return;
        }
        last = now;
        g_assert_cmpint(g_get_monotonic_time(), <, end);
    }
}

static void relay_cut_now(Relay *r)
{
    g_mutex_lock(&r->lock);
    if (r->fd[0] >= 0) {
        relay_cut_locked(r);
    }
    g_mutex_unlock(&r->lock);
}

/* What one round posted, and what must come back. */
typedef struct SoakWqe {
    uint8_t opcode;             /* PIB_WQE_SEND, _RDMA_WRITE, _RDMA_READ */
    uint32_t len;
    uint64_t local, remote;     /* A's buffer and B's */
} SoakWqe;

typedef struct Soak {
    QOSState *qs;
    char *dir;
    PibDev a, b;
    TestEnd x, y;               /* x on A, y on B */
    Relay relay;
    GRand *rand;
    uint32_t seed;
    uint64_t stall_buf;         /* A's and B's buffers for the STALL rounds */
    uint32_t stall_key;
    uint64_t stall_remote;
    uint32_t stall_rkey;
    unsigned rounds, restored, died, stalled, wqes, failed_wqes;
} Soak;

static const uint8_t soak_cqe_opcode[] = {
    [PIB_WQE_SEND] = PIB_CQE_SEND,
    [PIB_WQE_RDMA_WRITE] = PIB_CQE_RDMA_WRITE,
    [PIB_WQE_RDMA_READ] = PIB_CQE_RDMA_READ,
};

static void soak_connect_qps(Soak *s)
{
    dp_connect_ex(&s->a, &s->x.qp, 2, s->y.qp.qpn, SOAK_MTU_1024, SOAK_TIMEOUT,
                  SOAK_RETRY_CNT, 7);
    dp_connect_ex(&s->b, &s->y.qp, 1, s->x.qp.qpn, SOAK_MTU_1024, SOAK_TIMEOUT,
                  SOAK_RETRY_CNT, 7);
}

/* Both QPs back to RESET and connected again: a fresh start after a dead cable. */
static void soak_reset_qps(Soak *s)
{
    g_assert_cmpuint(dp_modify_state(&s->a, s->x.qp.qpn, PIB_QPS_RESET), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&s->b, s->y.qp.qpn, PIB_QPS_RESET), ==, PIB_AQ_OK);
    s->x.qp.sq_pi = s->x.qp.rq_pi = 0;
    s->y.qp.sq_pi = s->y.qp.rq_pi = 0;
    soak_connect_qps(s);
}

static void soak_wait_active(Soak *s)
{
    pib_wait_port_state(&s->a, PIB_PORT_ACTIVE);
    pib_wait_port_state(&s->b, PIB_PORT_ACTIVE);
}

/*
 * The next CQE of cq, stepping the virtual clock one ACK timeout at a time while there is
 * none and the cable is quiet (so that no timer fires while the devices are still working);
 * false if the retry budget ran out first.
 */
static bool soak_step_until(Soak *s, PibDev *d, TestCq *cq, struct pib_cqe *cqe,
                            int *steps)
{
    for (;;) {
        if (dp_poll(d, cq, cqe, 2 * 1000)) {
            return true;
        }
        relay_settle(&s->relay);
        if (dp_poll(d, cq, cqe, 2 * 1000)) {
            return true;
        }
        if (*steps >= SOAK_BUDGET_STEPS) {
            return false;
        }
        qtest_clock_step(qts(d), SOAK_STEP_NS);
        (*steps)++;
    }
}

/* Wait until A sends nothing more: its queue and socket are full. */
static void soak_wait_stalled(Soak *s)
{
    uint64_t c[PIB_CNT_MAX], last = UINT64_MAX;
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;
    int stable = 0;

    while (stable < 3) {
        g_usleep(SOAK_QUIET_US);
        dp_counters(&s->a, c);
        stable = c[PIB_CNT_TX_PACKETS] == last ? stable + 1 : 0;
        last = c[PIB_CNT_TX_PACKETS];
        g_assert_cmpint(g_get_monotonic_time(), <, end);
    }
}

/* A STALL round: see the top of the file. */
static void soak_stall_round(Soak *s, unsigned round)
{
    struct pib_sge sge = dp_sge(s->stall_buf, SOAK_STALL_MSG, s->stall_key);
    struct pib_cqe cqe;
    int steps = 0;
    uint32_t i;

    relay_pause(&s->relay, true);
    for (i = 0; i < SOAK_MAX_WQES; i++) {
        sge.addr = cpu_to_le64(s->stall_buf + (uint64_t)i * SOAK_STALL_MSG);
        dp_post_send(&s->a, &s->x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED,
                     0x3000 + i, &sge, 1, s->stall_remote, s->stall_rkey);
    }
    soak_wait_stalled(s);
    qtest_clock_step(qts(&s->a), SOAK_STEP_NS);     /* rewinds into the full queue */
    soak_wait_stalled(s);
    steps = 1;
    relay_cut_now(&s->relay);
    for (i = 0; i < SOAK_MAX_WQES; i++) {
        if (!soak_step_until(s, &s->a, &s->x.scq, &cqe, &steps)) {
            g_error("soak round %u (seed %u, stall): WQE %u had no completion within "
                    "%d ACK timeouts: a hung QP", round, s->seed, i, SOAK_BUDGET_STEPS);
        }
        g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x3000 + i);
        g_assert_cmpuint(cqe.status, ==, i == 0 ? PIB_WC_RETRY_EXC_ERR :
                                                  PIB_WC_WR_FLUSH_ERR);
    }
    g_assert_cmpuint(dp_query_qp(&s->a, s->x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    s->stalled++;
    s->wqes += SOAK_MAX_WQES;
    s->failed_wqes += SOAK_MAX_WQES;
    soak_reset_qps(s);
    relay_connect(&s->relay);
    soak_wait_active(s);
}

static void soak_round(Soak *s, unsigned round)
{
    SoakWqe w[SOAK_MAX_WQES];
    struct pib_cqe cqe;
    struct pib_sge sge;
    uint32_t n = g_rand_int_range(s->rand, 1, SOAK_MAX_WQES + 1);
    uint32_t sends = 0, got_sends, i, ok = 0;
    uint64_t bytes = 0;
    bool restore = g_rand_boolean(s->rand);
    bool failed = false;
    int steps = 0;

    for (i = 0; i < n; i++) {
        static const uint8_t ops[] = { PIB_WQE_SEND, PIB_WQE_RDMA_WRITE, PIB_WQE_RDMA_READ };

        w[i].opcode = ops[g_rand_int_range(s->rand, 0, 3)];
        w[i].len = g_rand_int_range(s->rand, 1, SOAK_MAX_MSG + 1);
        /* Each WQE has its own slice of both buffers, at a random offset in it. */
        w[i].local = s->x.buf + i * SOAK_MAX_MSG +
                     g_rand_int_range(s->rand, 0, SOAK_MAX_MSG - w[i].len + 1);
        w[i].remote = s->y.buf + i * SOAK_MAX_MSG +
                      g_rand_int_range(s->rand, 0, SOAK_MAX_MSG - w[i].len + 1);
        dp_fill(&s->a, w[i].local, w[i].len, round * 2);
        dp_fill(&s->b, w[i].remote, w[i].len, round * 2 + 1);
        bytes += w[i].len + 64 * DIV_ROUND_UP(w[i].len, 1024);
        if (w[i].opcode == PIB_WQE_SEND) {
            sge = dp_sge(w[i].remote, w[i].len, s->y.key);
            dp_post_recv(&s->b, &s->y.qp, 0x2000 + i, &sge, 1);
            sends++;
        }
    }
    /* Cut anywhere in the round's traffic, or just after it. */
    relay_arm(&s->relay, g_rand_int_range(s->rand, 0, bytes + bytes / 4 + 1));
    for (i = 0; i < n; i++) {
        sge = dp_sge(w[i].local, w[i].len, s->x.key);
        dp_post_send(&s->a, &s->x.qp, w[i].opcode, PIB_WQE_F_SIGNALED, 0x1000 + i, &sge,
                     1, w[i].remote, s->y.key);
    }
    /* The cut comes within the traffic, or the traffic ends before it: cut then. */
    relay_settle(&s->relay);
    relay_cut_now(&s->relay);
    if (restore) {
        relay_connect(&s->relay);
        soak_wait_active(s);
    }

    for (i = 0; i < n; i++) {
        if (!soak_step_until(s, &s->a, &s->x.scq, &cqe, &steps)) {
            g_error("soak round %u (seed %u, %s): WQE %u of %u had no completion within "
                    "%d ACK timeouts: a hung QP", round, s->seed,
                    restore ? "restore" : "die", i, n, SOAK_BUDGET_STEPS);
        }
        g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x1000 + i);
        if (restore || (!failed && cqe.status == PIB_WC_SUCCESS)) {
            g_assert_cmpuint(cqe.status, ==, PIB_WC_SUCCESS);
            g_assert_cmphex(cqe.opcode, ==, soak_cqe_opcode[w[i].opcode]);
            ok++;
        } else if (!failed) {
            g_assert_cmpuint(cqe.status, ==, PIB_WC_RETRY_EXC_ERR);
            failed = true;
        } else {
            g_assert_cmpuint(cqe.status, ==, PIB_WC_WR_FLUSH_ERR);
        }
    }
    g_assert_false(dp_poll(&s->a, &s->x.scq, &cqe, 2 * 1000));

    /*
     * What B received: every SEND that A completed, once; in DIE, perhaps also SENDs whose
     * acknowledgement the cut lost.  All of it arrived before the cut.
     */
    for (got_sends = 0; dp_poll(&s->b, &s->y.rcq, &cqe, 2 * 1000); got_sends++) {
        g_assert_cmpuint(cqe.status, ==, PIB_WC_SUCCESS);
        g_assert_cmphex(le64_to_cpu(cqe.wr_id) & 0xf000, ==, 0x2000);
    }
    g_assert_cmpuint(got_sends, <=, sends);
    for (i = 0, sends = 0; i < ok; i++) {
        sends += w[i].opcode == PIB_WQE_SEND;
    }
    g_assert_cmpuint(got_sends, >=, sends);

    /* Every byte of what completed. */
    for (i = 0; i < ok; i++) {
        if (w[i].opcode == PIB_WQE_RDMA_READ) {
            dp_assert_same(&s->a, w[i].local, &s->b, w[i].remote, w[i].len);
        } else {
            dp_assert_same(&s->b, w[i].remote, &s->a, w[i].local, w[i].len);
        }
    }
    s->wqes += n;
    if (restore) {
        s->restored++;
        g_assert_cmpuint(dp_query_qp(&s->a, s->x.qp.qpn).qp_state, ==, PIB_QPS_RTS);
        g_assert_cmpuint(got_sends, ==, sends);
        return;
    }
    s->died++;
    s->failed_wqes += n - ok;
    g_assert_cmpuint(dp_query_qp(&s->a, s->x.qp.qpn).qp_state, ==,
                     failed ? PIB_QPS_ERR : PIB_QPS_RTS);
    /* B's unmatched receives go with its reset; then both start over on a new cable. */
    soak_reset_qps(s);
    relay_connect(&s->relay);
    soak_wait_active(s);
}

static void soak_boot(Soak *s)
{
    g_autofree char *args = NULL;

    s->dir = g_dir_make_tmp("pib-soak-XXXXXX", NULL);
    s->relay.path[0] = g_build_filename(s->dir, "a.sock", NULL);
    s->relay.path[1] = g_build_filename(s->dir, "b.sock", NULL);
    args = g_strdup_printf(
        "-m 256M "
        "-chardev socket,id=la,path=%s,server=on,wait=off "
        "-chardev socket,id=lb,path=%s,server=on,wait=off "
        "-device pib-hca,addr=4.0,id=pa,chardev=la,lid=1 "
        "-device pib-hca,addr=5.0,id=pb,chardev=lb,lid=2",
        s->relay.path[0], s->relay.path[1]);
    s->qs = pib_boot(args);
    pib_open(&s->a, s->qs, PIB_DEVFN_A);
    pib_open(&s->b, s->qs, PIB_DEVFN_B);
    pib_enable(&s->a, 16, 64);
    pib_enable(&s->b, 16, 64);
    g_mutex_init(&s->relay.lock);
    g_cond_init(&s->relay.changed);
    s->relay.fd[0] = s->relay.fd[1] = -1;
    s->relay.thread = g_thread_new("pib-relay", relay_thread, &s->relay);
    relay_connect(&s->relay);
    soak_wait_active(s);
}

static void test_link_cuts(void)
{
    const char *env = g_getenv("PIB_SOAK_CUTS");
    unsigned cuts = env ? strtoul(env, NULL, 10) : 200;
    Soak s = { 0 };
    gint64 t0 = g_get_monotonic_time();
    unsigned i;

    env = g_getenv("PIB_SOAK_SEED");
    s.seed = env ? strtoul(env, NULL, 10) : 1;
    s.rand = g_rand_new_with_seed(s.seed);
    soak_boot(&s);
    dp_end(&s.a, &s.x, PIB_QPT_RC, SOAK_BUF);
    dp_end(&s.b, &s.y, PIB_QPT_RC, SOAK_BUF);
    s.stall_buf = dp_alloc(&s.a, SOAK_STALL_BUF);
    s.stall_key = dp_reg_mr(&s.a, s.x.pdn, DP_ALL_ACCESS, s.stall_buf, SOAK_STALL_BUF);
    s.stall_remote = dp_alloc(&s.b, SOAK_STALL_MSG);
    s.stall_rkey = dp_reg_mr(&s.b, s.y.pdn, DP_ALL_ACCESS, s.stall_remote, SOAK_STALL_MSG);
    soak_connect_qps(&s);

    for (i = 0; i < cuts; i++) {
        if (g_rand_int_range(s.rand, 0, 5) == 0) {
            soak_stall_round(&s, i);
        } else {
            soak_round(&s, i);
        }
        if ((i + 1) % 1000 == 0) {
            g_test_message("soak: %u cuts, %.0f s", i + 1,
                           (g_get_monotonic_time() - t0) / 1e6);
        }
    }
    g_test_message("soak: %u cuts (seed %u) in %.1f s: %u restored, %u died, %u stalled "
                   "first; %u WQEs, %u of them failed with the cable; no hung QP",
                   s.relay.cuts, s.seed, (g_get_monotonic_time() - t0) / 1e6, s.restored,
                   s.died, s.stalled, s.wqes, s.failed_wqes);
    g_assert_cmpuint(s.relay.cuts, >=, cuts);
    g_assert_cmpuint(dp_err_count(&s.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&s.b), ==, 0);

    g_mutex_lock(&s.relay.lock);
    s.relay.stop = true;
    relay_cut_locked(&s.relay);
    g_mutex_unlock(&s.relay.lock);
    g_thread_join(s.relay.thread);
    pib_close(&s.a);
    pib_close(&s.b);
    qtest_shutdown(s.qs);
    g_unlink(s.relay.path[0]);
    g_unlink(s.relay.path[1]);
    g_rmdir(s.dir);
    g_free((char *)s.relay.path[0]);
    g_free((char *)s.relay.path[1]);
    g_free(s.dir);
    g_rand_free(s.rand);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/pib/soak/link-cuts", test_link_cuts);
    return g_test_run();
}
