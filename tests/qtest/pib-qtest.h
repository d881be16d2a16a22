/*
 * pib-qtest.h - the fixture the pib qtests share (libqos style)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The qtests drive pib-hca with no guest, through the same interface the Linux
 * driver and the provider use (include/pib_hw.h, pib_wqe.h, pib_link.h).  This
 * header is what they have in common, in four layers, each built on the one
 * before:
 *
 *   pib_*   one device as its driver sees it: BARs, registers, the admin queue
 *           and the async event queue (PibDev);
 *   peer_*  this process at the other end of a device's cable: HELLO, frames,
 *           training the link and watching it go down;
 *   dp_*    the data-path mini-driver: PDs, MRs, CQs and QPs made by admin
 *           command, WQEs written and doorbells rung as guest-provider/qp.c
 *           does, CQEs read by their phase bit as guest-provider/cq.c does;
 *   wp_*    IB packets crafted and parsed by the peer, so that a test can be
 *           the remote HCA (LID WP_LID, QP WP_QPN) of a device at LID 1.
 *
 * The tests, one file per topic, each its own qtest executable:
 *   pib-ctrl-test.c    identity, reset, admin queue, doorbells, config, AEQ
 *   pib-link-test.c    two devices on one link; this process as the peer
 *   pib-data-test.c    objects, SEND/RECV, errors, RNR, retry, UD/UC, SRQs,
 *                      CQ overflow, resize, timestamps and moderation
 *   pib-rdma-test.c    RDMA WRITE/READ, atomics, memory windows, rereg, FRWR
 *   pib-wire-test.c    a misbehaving peer on the wire, XRC, the link dying
 *   pib-transport-test.c  the transport against the IBTA rules, as the peer HCA
 *   pib-limits-test.c  ring wraps and counter widths
 *   pib-mgmt-test.c    the SMA and PMA, this process as driver and SM
 *   pib-inject-test.c  the inject-* QOM properties
 *   pib-switch-test.c  pib-switch between two devices and this process as the SM
 *   pib-soak-test.c    the link cut again and again under RC traffic
 *   pib-bench.c        throughput and QEMU CPU time (perf mode only)
 *
 * Every helper fails the test (a GLib assertion) on anything unexpected, so a
 * test reads as the sequence of what it does; those that return a status
 * (an admin status, a bool for "it came in time") leave the verdict to it.
 */

#ifndef PIB_QTEST_H
#define PIB_QTEST_H

#include "qemu/bswap.h"         /* the contract's structures are little-endian */
#include "libqtest.h"
#include "libqos/libqos-pc.h"
#include "libqos/pci.h"
#include "pib-qtest-compat.h"   /* QEMU 7.2 and 10.0: qdict, chardev reconnect */

#include "hw/pib/include/pib_hw.h"
#include "hw/pib/include/pib_wqe.h"
#include "hw/pib/include/pib_link.h"
#include "hw/pib/include/pib_mad.h"

#define PIB_DEVFN_A         QPCI_DEVFN(4, 0)
#define PIB_DEVFN_B         QPCI_DEVFN(5, 0)
#define TEST_NODE_GUID      0x0002c903000abcd0ull
#define TIMEOUT_US          (10 * G_USEC_PER_SEC)
/*
 * Look at cond every 10 ms until it holds, for what crosses a socket or another process in
 * real time; TIMEOUT_US is only a hang guard (a slow machine looks longer, never fails sooner).
 * The caller asserts what it waited for afterwards.
 */
#define PIB_WAIT_FOR(cond)                                                  \
    do {                                                                    \
        gint64 wait_end_ = g_get_monotonic_time() + TIMEOUT_US;            \
        while (!(cond) && g_get_monotonic_time() < wait_end_) {             \
            g_usleep(10000);                                                \
        }                                                                   \
    } while (0)
#define ADDR_OUTSIDE_RAM    (1ull << 44)    /* aligned, nothing mapped there */

/*
 * The QEMU build has no firmware of its own (Debian's dfsg source drops the
 * blobs): use the host's seabios and qemu-system-data packages, as the rest of
 * the project does.
 */
#define PIB_FIRMWARE_ARGS   "-L /usr/share/seabios -L /usr/share/qemu"

/*
 * The device: registers, admin queue, async events
 */

/* One pib-hca as a driver sees it: BARs, rings in guest memory, indices. */
typedef struct PibDev {
    QOSState *qs;
    QPCIDevice *dev;
    QPCIBar bar0, bar2;
    uint64_t bar0_size;
    uint64_t sq, cq, aeq, resp;
    uint32_t depth, aeq_depth;
    uint32_t pi;            /* admin commands issued   */
    uint32_t aeq_ci;        /* async events consumed   */
} PibDev;

/* A q35 machine with the firmware paths and `extra` (the -device options). */
QOSState *pib_boot(const char *extra);
/* The device at devfn: both BARs mapped, bus master and MSI-X on. */
void pib_open(PibDev *d, QOSState *qs, int devfn);
void pib_close(PibDev *d);
uint32_t rd(PibDev *d, uint32_t reg);
void wr(PibDev *d, uint32_t reg, uint32_t val);
QTestState *qts(PibDev *d);
/* The phase bit a ring's producer writes on its pass over slot idx. */
uint8_t phase_of(uint32_t idx, uint32_t depth);
void pib_program_queues(PibDev *d, uint32_t depth, uint32_t aeq_depth);
/* pib_program_queues, then CONTROL.ENABLE; the device must be READY. */
void pib_enable(PibDev *d, uint32_t depth, uint32_t aeq_depth);
void pib_post(PibDev *d, struct pib_admin_cmd *cmd);
/* Wait for the completion of command idx (its phase bit); _raw: whatever its cmd_id. */
void pib_wait_cqe_raw(PibDev *d, uint32_t idx, struct pib_admin_cqe *cqe);
/* ... which must echo pib_post's cmd_id. */
void pib_wait_cqe(PibDev *d, uint32_t idx, struct pib_admin_cqe *cqe);
uint8_t pib_cmd(PibDev *d, struct pib_admin_cmd *cmd,
                struct pib_admin_cqe *cqe_out);
/* NOP round trip: returns the value the device echoes. */
uint32_t pib_nop(PibDev *d, uint32_t value);
void pib_nop_ring(PibDev *d, uint32_t base);
uint8_t pib_query_port(PibDev *d, uint8_t port_num,
                       struct pib_port_attr *attr);
uint8_t pib_set_lid(PibDev *d, uint16_t lid);
bool pib_aeq_next(PibDev *d, struct pib_aeqe *e, gint64 timeout_us);
bool pib_aeq_find(PibDev *d, uint8_t type, gint64 timeout_us);
/* Poll QUERY_PORT until the port is in `state` (TIMEOUT_US at most). */
void pib_wait_port_state(PibDev *d, uint8_t state);
void pib_expect_guest_error(PibDev *d, uint32_t *count, uint32_t code);
/* The device clock, read from UAR page `page` hi-lo-hi as pib_hw.h says. */
uint64_t pib_clock_read(PibDev *d, uint32_t page);

/*
 * The link peer: this process on the other end of a device's cable (a unix
 * socket the device listens on, see include/pib_link.h).  A relay between two
 * devices is a peer to each: it reads whole frames from one (peer_read_frame)
 * and writes them to the other as they came, HELLO included.
 */

#define PEER_NODE_GUID      0x1122334455667700ull   /* our HELLO's identity */

/*
 * A machine with one device (addr 4.0, node GUID TEST_NODE_GUID, QOM path PEER_DEV_PATH)
 * whose cable is a socket in a directory of its own: the device listens on path, the test
 * dials it with peer_connect, as often as it likes.
 */
#define PEER_DEV_PATH       "/machine/peripheral/hca"

typedef struct PeerLink {
    QOSState *qs;
    char *dir, *path;
} PeerLink;

void peer_boot(PeerLink *l, uint16_t lid);
/* qtest_shutdown, then the socket and its directory go. */
void peer_shutdown(PeerLink *l);
int peer_connect(const char *path);
/*
 * Poll query-migrate until its status is want ("completed"); "failed" fails the test.  A hang
 * guard on a count of looks, not a time.
 */
void pib_migration_wait(QTestState *qts, const char *want);
/*
 * A QEMU (args, with -incoming defer; its sockets in dir) that loads the stream in file and may
 * refuse it.  start: true once it runs loaded (a machine saved stopped is sent `cont`), false
 * if it went away (refused).  qtest: a qtest
 * command to the running one, its answer (NULL: it went away).  end: quits it if it runs, and
 * checks its exit status, 0 if it ran, 1 if it refused: a signal or a hang fails the test.
 */
typedef struct PibIncoming {
    GPid pid;
    int qmp, qt;
} PibIncoming;
/*
 * The migration fuzzers' changes: pib_mutate() copies good to buf with 1-4 random changes (a
 * bit flipped, a be32 set to 0, to all ones, or one more) in [start, end), outside the longest
 * run of the byte `filler` there, skip_len bytes at skip_at (a table any value of which is
 * valid, which would otherwise take most of the changes).
 */
typedef struct PibMutator {
    GRand *r;
    size_t start, end, skip_at, skip_len;
} PibMutator;
void pib_mutator_init(PibMutator *m, GRand *r, const uint8_t *good, size_t start, size_t end,
                      uint8_t filler);
void pib_mutate(PibMutator *m, const uint8_t *good, uint8_t *buf, size_t len);
bool pib_incoming_start(PibIncoming *c, const char *dir, const char *args, const char *file);
char *pib_incoming_qtest(PibIncoming *c, const char *cmd);
void pib_incoming_end(PibIncoming *c, bool running);
bool peer_read(int fd, void *buf, size_t len);
void peer_write(int fd, const void *buf, size_t len);
/* One whole frame: its header, then its body into buf; returns its length. */
uint16_t peer_read_frame(int fd, struct pib_link_hdr *hdr, void *buf,
                         size_t size);
/* The device's HELLO (its node GUID checked); returns the token it carries. */
uint64_t peer_expect_hello(int fd, uint64_t node_guid);
void peer_send_hello(int fd);
void peer_send_hello_flags(int fd, uint32_t flags);
/* Ours with these flags and token (include/pib_link.h, "Moving"; 0: none). */
void peer_send_hello_token(int fd, uint32_t flags, uint64_t token);
uint8_t peer_read_any(int fd, void *buf, size_t size, uint16_t *len, int timeout_ms);
void peer_send_flow(int fd, uint16_t fctbs, uint16_t fccl, uint16_t fccl_rest);
void peer_send_packet(int fd, uint16_t len);
void peer_expect_eof(int fd);
/* HELLO both ways; the port goes ACTIVE with its event. */
void peer_bring_up(PibDev *d, int fd, uint64_t node_guid);
/* The usual start of a wire test: a device at LID 1 with the peer socket, enabled (AEQ 16,
 * admin queue 64), the link trained and the port ACTIVE; returns the peer's fd. */
int peer_dev_up(PeerLink *l, PibDev *d);
/* The port went DOWN (event, POLLING, the link_downs count). */
void peer_expect_down(PibDev *d, uint32_t link_downs);
/* A fresh SMP request (no M_Key, no path): a new transaction ID each time. */
struct pib_smp peer_smp_new(uint8_t mgmt_class, uint8_t method, uint16_t attr,
                            uint32_t mod);
/* A fresh PMA request (class 0x04) for attr, with its PortSelect and CounterSelect. */
struct pib_pma_mad peer_pma_new(uint8_t method, uint16_t attr, uint8_t port_select,
                                uint16_t counter_select);
/* A fresh congestion control request (class 0x21, version 2) for attr, with this CC_Key. */
struct pib_cc_mad peer_cc_new(uint8_t method, uint16_t attr, uint32_t mod, uint64_t cc_key);

/*
 * The data-path mini-driver
 */

#define DP_UAR              0       /* the kernel's UAR page, always there */
#define DP_MTU_1024         3
#define DP_ALL_ACCESS       (PIB_ACCESS_LOCAL_WRITE | \
                             PIB_ACCESS_REMOTE_WRITE | \
                             PIB_ACCESS_REMOTE_READ | PIB_ACCESS_REMOTE_ATOMIC)
#define DP_SHORT_US         (200 * 1000)    /* "nothing comes": 0.2 s */

typedef struct TestCq {
    uint32_t cqn;
    uint32_t depth;
    uint32_t ci;            /* next CQE to look at */
    uint64_t ring;          /* depth CQEs, then the consumer index page */
    uint64_t ring_bytes;
    uint32_t cqe_size;      /* 32, or 64 with PIB_CQ_F_TIMESTAMP */
} TestCq;

typedef struct TestQp {
    uint32_t qpn;
    uint8_t type;
    uint32_t uar;
    uint64_t sq, rq;
    uint32_t sq_depth, rq_depth;
    uint32_t sq_stride_log, rq_stride_log;
    uint32_t sq_pi, rq_pi;
    uint64_t dbrec;         /* the RQ's doorbell record (PIB_QPC_F_RQ_DBREC), 0: none */
} TestQp;

/* Two HCAs on one link (LIDs 1 and 2, QOM ids pa and pb), a CEQ each. */
typedef struct TestPair {
    QOSState *qs;
    PibDev a, b;
    char *dir, *path;
    uint64_t ceq_a, ceq_b;
} TestPair;

/* One side of a connection: PD, MR over a buffer, CQs, a QP. */
typedef struct TestEnd {
    PibDev *d;
    uint32_t pdn;
    uint64_t buf;
    uint32_t buf_len;
    uint32_t key;
    TestCq scq, rcq;
    TestQp qp;
} TestEnd;

/* How long dp_poll sleeps between looks at a CQ (the benchmark raises it). */
extern gulong dp_poll_interval_us;
/*
 * More properties for every pib-hca that dp_pair_up and peer_boot create
 * (",name=value..."; the benchmark sets link-direct=off to compare).
 */
extern const char *pib_dev_props;

/* Zeroed, page-aligned guest memory. */
uint64_t dp_alloc(PibDev *d, size_t size);
uint64_t dp_pbl(PibDev *d, uint64_t addr, uint32_t npages);
uint32_t dp_create_pd(PibDev *d);
/* A command whose only input is an object number (DESTROY_*, ...). */
uint8_t dp_obj_cmd(PibDev *d, uint8_t opcode, uint32_t num);
uint8_t dp_reg_mr_status(PibDev *d, uint32_t pdn, uint32_t access,
                         uint64_t addr, uint64_t len, uint32_t *key);
uint32_t dp_reg_mr(PibDev *d, uint32_t pdn, uint32_t access,
                   uint64_t addr, uint64_t len);
/* QUERY_DEVICE's answer. */
struct pib_device_attr dp_query_device(PibDev *d);
/* ALLOC_DM: the DM's number and its first byte in the device memory (BAR0 + dm_bar_offset). */
uint8_t dp_alloc_dm(PibDev *d, uint64_t length, uint32_t *dm, uint32_t *start);
/* REG_DM_MR, iova 0, with local and remote write and remote read. */
uint8_t dp_reg_dm_mr(PibDev *d, uint32_t pdn, uint32_t dm, uint64_t offset, uint64_t length,
                     uint32_t *key);
/* ALLOC_MW of a type (1 or 2) in a PD; returns the window's first rkey. */
uint32_t dp_alloc_mw(PibDev *d, uint32_t pdn, uint32_t type);
uint8_t dp_create_cq_status(PibDev *d, uint32_t depth, uint32_t uar,
                            TestCq *cq);
/* CREATE_CQ with PIB_CQ_F_* flags; npages as the flags' CQE size needs. */
uint8_t dp_create_cq_flags(PibDev *d, uint32_t depth, uint32_t flags,
                           TestCq *cq);
void dp_create_cq(PibDev *d, uint32_t depth, TestCq *cq);
uint8_t dp_create_qp_ex(PibDev *d, uint8_t type, uint32_t pdn,
                        TestCq *scq, TestCq *rcq, uint32_t sq_depth,
                        uint32_t rq_depth, uint32_t uar, uint32_t srqn,
                        TestQp *qp);
uint8_t dp_create_qp_flags(PibDev *d, uint8_t type, uint32_t pdn,
                           TestCq *scq, TestCq *rcq, uint32_t sq_depth,
                           uint32_t rq_depth, uint32_t uar, uint32_t srqn,
                           uint8_t flags, TestQp *qp);
uint8_t dp_create_qp_status(PibDev *d, uint8_t type, uint32_t pdn,
                            TestCq *scq, TestCq *rcq, uint32_t sq_depth,
                            uint32_t rq_depth, uint32_t uar, TestQp *qp);
/* 16 send and 16 receive WQEs on the kernel's UAR. */
void dp_create_qp(PibDev *d, uint8_t type, uint32_t pdn, TestCq *scq,
                  TestCq *rcq, TestQp *qp);
uint8_t dp_modify(PibDev *d, uint32_t qpn, const struct pib_qp_attr *a);
uint8_t dp_modify_state(PibDev *d, uint32_t qpn, uint8_t state);
struct pib_qp_attr dp_query_qp(PibDev *d, uint32_t qpn);
void dp_connect_ex(PibDev *d, TestQp *qp, uint16_t dlid, uint32_t dqpn,
                   uint8_t mtu, uint8_t timeout, uint8_t retry_cnt,
                   uint8_t rnr_retry);
/* dp_connect_ex at MTU 1024, timeout 14, 7 retries and 7 RNR retries. */
void dp_connect(PibDev *d, TestQp *qp, uint16_t dlid, uint32_t dqpn);
void dp_ud_ready(PibDev *d, TestQp *qp, uint32_t qkey);
void dp_doorbell(PibDev *d, uint32_t uar, uint32_t reg, uint32_t obj,
                 uint32_t index);
struct pib_sge dp_sge(uint64_t addr, uint32_t len, uint32_t lkey);
void dp_post_recv(PibDev *d, TestQp *qp, uint64_t wr_id,
                  const struct pib_sge *sge, int nsge);
void dp_post_send_raw(PibDev *d, TestQp *qp, struct pib_send_wqe *wqe,
                      const void *tail, size_t tail_len, bool ring);
void dp_post_send(PibDev *d, TestQp *qp, uint8_t opcode, uint8_t flags,
                  uint64_t wr_id, const struct pib_sge *sge, int nsge,
                  uint64_t raddr, uint32_t rkey);
/* A signalled BIND_MW WQE, rung. */
void dp_post_bind(PibDev *d, TestQp *qp, uint64_t wr_id, uint8_t type,
                  uint32_t mw_rkey, uint32_t new_rkey, uint32_t mr_key,
                  uint64_t addr, uint64_t len, uint32_t access);
bool dp_poll(PibDev *d, TestCq *cq, struct pib_cqe *cqe, gint64 timeout_us);
/* dp_poll of a timestamped CQ: the CQE and its timestamp. */
bool dp_poll_ts(PibDev *d, TestCq *cq, struct pib_cqe_ts *slot,
                gint64 timeout_us);
/* The next CQE has this wr_id, status and opcode; a copy in *out if asked. */
void dp_expect(PibDev *d, TestCq *cq, uint64_t wr_id, uint8_t status,
               uint8_t opcode, struct pib_cqe *out);
/* No CQE within DP_SHORT_US. */
void dp_expect_none(PibDev *d, TestCq *cq);
void dp_step_until_cqe(PibDev *d, TestCq *cq, struct pib_cqe *cqe,
                       int64_t step_ns, int max_steps);
/* A pattern that differs with the seed. */
void dp_fill(PibDev *d, uint64_t addr, size_t len, uint32_t seed);
void dp_assert_same(PibDev *da, uint64_t a, PibDev *db, uint64_t b,
                    size_t len);
bool dp_aeq_find(PibDev *d, uint8_t type, uint32_t obj);
/* The pair's QEMU with extra arguments; the devices not opened yet. */
void dp_pair_boot(TestPair *p, const char *extra);
void dp_pair_up(TestPair *p);
void dp_pair_down(TestPair *p);
/* A TestEnd of this QP type with a buffer of buf_len bytes, all access. */
void dp_end(PibDev *d, TestEnd *e, uint8_t type, uint32_t buf_len);
void dp_link_ends(TestEnd *x, uint16_t lid_x, TestEnd *y, uint16_t lid_y);
void dp_relink(TestEnd *x, uint16_t lid_x, TestEnd *y, uint16_t lid_y);
/* QUERY_COUNTERS, in host order, indexed by enum pib_counter. */
void dp_counters(PibDev *d, uint64_t c[PIB_CNT_MAX]);
/*
 * Hand a MAD to the firmware (MAD_IFC, as the driver's process_mad); the answer
 * (PIB_MAD_IFC_*) comes back, the response in out.
 */
uint32_t dp_mad_ifc(PibDev *d, const void *mad, void *out, bool ignore_mkey);
/*
 * A PMA MAD (class 0x04, attr, PortSelect, CounterSelect) through dp_mad_ifc, answered: the
 * response's status, the response in *resp.
 */
uint16_t dp_pma(PibDev *d, uint8_t method, uint16_t attr, uint8_t port_select,
                uint16_t counter_select, struct pib_pma_mad *resp);
/* qom-set of a number property (an HCA's inject-*, say), which must be taken. */
void qom_set_u32(QTestState *q, const char *path, const char *prop, uint32_t value);
/* qom-get of a number property (objects-pd, mtt-pages, ...). */
uint64_t qom_get_u64(QTestState *q, const char *path, const char *prop);
uint32_t qom_get_u32(QTestState *q, const char *path, const char *prop);
/* Send MSI-X vector's message to guest RAM (addr <- data), unmasked: a test sees it land. */
void dp_msix_to_ram(PibDev *d, unsigned vector, uint64_t addr, uint32_t data);
/* QUERY_GID: entry idx of port 1's GID table. */
void dp_query_gid(PibDev *d, uint32_t idx, uint8_t gid[16]);
/* ERR_COUNT: how many guest errors the device has seen. */
uint32_t dp_err_count(PibDev *d);

/*
 * Wire packets: the peer as a remote HCA (LID WP_LID, QP WP_QPN) speaking IB
 * to the device's QP wp_dqpn, which is at LID 1.
 */

#define WP_LID          9
#define WP_QPN          0x77
#define WP_MTU_256      1

typedef struct WirePkt {
    uint8_t opcode;
    uint32_t dqpn, psn;
    bool ackreq;
    bool fecn, becn;        /* BTH: congestion notification */
    uint8_t syndrome;       /* AETH */
    uint32_t msn;
    uint64_t orig;          /* AtomicAckETH */
    uint64_t va;            /* RETH */
    uint32_t rkey, dmalen;
    uint32_t xrc_srqn;      /* XRCETH (XRC requests) */
    uint32_t feth;          /* FETH (FLUSH) */
    uint8_t payload[4096];
    uint32_t paylen;
} WirePkt;

extern uint32_t wp_dqpn;                /* the device's QP the peer talks to */
extern uint32_t wp_bth_flags;           /* PIB_BTH_FECN, _BECN: what wp_send() sets */

void wp_send(int fd, uint8_t opcode, uint32_t psn, bool ackreq,
             const void *ext, uint32_t ext_len, const void *payload,
             uint32_t paylen);
/* wp_send()s in between go out in one write. */
void wp_batch_begin(void);
void wp_batch_send(int fd);
void wp_qp_rtr(PibDev *d, uint32_t qpn, uint32_t access, uint8_t max_dest_rd_atomic);
void wp_qp_rts(PibDev *d, uint32_t qpn, uint8_t max_rd_atomic);
bool wp_recv(int fd, WirePkt *w, int timeout_ms);
/* The next packet is this opcode and PSN (within TIMEOUT_US). */
void wp_expect(int fd, WirePkt *w, uint8_t opcode, uint32_t psn);
/* No packet within 0.2 s. */
void wp_expect_nothing(int fd);
void wp_send_only(int fd, uint32_t psn, const char *text);
/* An ACK (or NAK, by the AETH syndrome) for psn. */
void wp_ack(int fd, uint32_t psn, uint8_t syndrome);

#endif /* PIB_QTEST_H */
