// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-verbs-test: what its files share (the program is described in pib_verbs_test.c).
 *
 *   pib_verbs_test.c  the subtest table, the command line, running the two roles, main
 *   common.c          the channel between the roles, the device context, buffers and data
 *                     patterns, RC connections, posting WRs, checking completions and events
 *   rc_errors.c       bad-lkey, rkey-violation, rnr-retry, flush-on-destroy, cq-overflow
 *   rc_data.c         send-sizes, rdma-rw, atomics
 *   ud.c              ud-qkey
 *   srq_xrc.c         srq-limit, xrc
 *   memory.c          mw, rereg
 *   dm.c              dm
 *   cq_timing.c       timestamps, cq-moderation
 *   limits.c          limits
 *
 * A topic file holds its subtests' two roles, SUBTEST_server and SUBTEST_client, declared at
 * the end of this header and listed in the subtest table; everything else in it is static.
 * tests/guest/build.sh links the files of this folder into one program.
 */
#ifndef PIB_VERBS_H
#define PIB_VERBS_H

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <infiniband/verbs.h>

#define PIB_REPORT_SHARED	/* one PASS/FAIL count for all the files (pib_verbs_test.c has it) */
#include "pib_report.h"
#include "pib_test_util.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define STR_(x) #x
#define STR(x) STR_(x)	/* a number macro as a string literal */

/* =============================================================================================
 * Options, output and checks
 */

struct opts {
	const char *dev_name;	/* -d: NULL means the first device */
	int ib_port;		/* -i */
	int gid_idx;		/* -g: -1 means pick one (RoCE) or none (InfiniBand, LID routing) */
	int tcp_port;		/* -p: 0 means DEFAULT_TCP_PORT + subtest index */
	int timeout;		/* -t: seconds to wait for any one completion or message */
	bool loopback;		/* -l */
	const char *peer;	/* the server's host name: we are the client */
};

/* One side of a subtest, with everything it opened. */
struct role {
	char who[64];		/* "subtest/server" or "subtest/client", for the output */
	const struct opts *o;
	int sock;		/* channel to the other role (TCP or socketpair) */
	unsigned short seed[3];	/* for nrand48: PSNs */

	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr dev;
	struct ibv_port_attr port;
	int gid_idx;		/* -1: no GRH */
	union ibv_gid gid;
	int max_sge;		/* what we ask per QP: min(device, 4) */
	int rd_atom;		/* max_rd_atomic / max_dest_rd_atomic we ask: min(device, 4) */
	bool is_rxe;		/* Soft-RoCE, whose known deviations are XFAIL, not FAIL */
};

/*
 * The checks' output (tests/common/pib_report.h): every line names the role that speaks,
 * "subtest/role".
 */
#define check(r, ok, ...)		report_check((r)->who, ok, __VA_ARGS__)
#define check_why(r, ok, what, ...)	report_check_why((r)->who, ok, what, __VA_ARGS__)
#define xfail(r, ...)			report_xfail((r)->who, __VA_ARGS__)
#define fail(r, ...)			report_fail((r)->who, __VA_ARGS__)
#define info(r, ...)			report_info((r)->who, __VA_ARGS__)
#define skip(r, ...)			report_skip((r)->who, __VA_ARGS__)

/* =============================================================================================
 * common.c: the channel between the roles, one text line per message
 */

int __attribute__((format(printf, 2, 3))) chan_send(struct role *r, const char *fmt, ...);
int __attribute__((format(scanf, 3, 4))) chan_recv(struct role *r, int n, const char *fmt, ...);
int chan_sync(struct role *r, const char *what);
int chan_send_verdict(struct role *r, bool ok);
int chan_recv_verdict(struct role *r, bool *ok);

/* =============================================================================================
 * common.c: device context, buffers and data patterns
 */

/* A page-aligned buffer and its memory region. */
struct buf {
	uint8_t *p;
	size_t len;
	struct ibv_mr *mr;
};

void sleep_ms(int ms);
bool set_nonblocking(int fd);
int role_open(struct role *r);
void role_close(struct role *r, bool aborted);
int buf_alloc(struct role *r, struct buf *b, size_t len, int access);
void buf_free(struct role *r, struct buf *b);
void fill_pattern(uint8_t *p, size_t len, uint32_t seed);
ssize_t find_pattern_mismatch(const uint8_t *p, size_t len, uint32_t seed);
ssize_t find_not_byte(const uint8_t *p, size_t len, uint8_t c);
ssize_t find_diff(const uint8_t *a, const uint8_t *b, size_t len);
uint32_t fnv1a(const uint8_t *p, size_t len);

/* =============================================================================================
 * common.c: RC connections, posting work requests and reaping completions
 */

/* How a connection is set up.  Zero fields take the defaults of conn_defaults(). */
struct conn_params {
	int send_cqe, recv_cqe;		/* CQ sizes asked for (the provider may round up) */
	int max_send_wr, max_recv_wr;
	enum ibv_mtu mtu;		/* path MTU wanted; the port's active MTU caps it */
	uint8_t min_rnr_timer;		/* responder: RNR NAK timer code (IBTA table) */
	uint8_t rnr_retry;		/* requester: RNR retries, 7 = forever */
	uint8_t timeout;		/* requester: ACK timeout, 4.096 us * 2^timeout */
	uint8_t retry_cnt;		/* requester: transport retries */
	struct ibv_srq *srq;		/* receives come from this SRQ (the QP has no RQ) */
	struct ibv_cq *rcq;		/* a receive CQ to share (conn_close leaves it alone) */
	bool timestamps;		/* extended CQs with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP */
};

/* -u: the ACK timeout the connections of the subtests get unless they ask for their own. */
extern uint8_t default_qp_timeout;

struct conn {
	struct ibv_cq *scq, *rcq;
	struct ibv_cq_ex *scqx, *rcqx;	/* conn_params.timestamps: the same CQs, extended */
	bool shared_rcq;	/* rcq is the caller's (conn_params.rcq), not ours */
	struct ibv_qp *qp;
	uint32_t psn;		/* our first send PSN */
	enum ibv_mtu mtu;	/* path MTU in use once connected */
};

/* What the other side needs to reach our QP. */
struct qp_info {
	uint16_t lid;
	uint32_t qpn;
	uint32_t psn;
	enum ibv_mtu active_mtu;
	union ibv_gid gid;
};

struct conn_params conn_defaults(void);
int conn_create(struct role *r, struct conn *c, const struct conn_params *p);
int conn_exchange(struct role *r, struct conn *c, struct qp_info *remote);
int conn_open(struct role *r, struct conn *c, const struct conn_params *p, struct qp_info *remote);
void conn_close(struct role *r, struct conn *c);
int modify_to_err(struct role *r, struct conn *c);
enum ibv_qp_state qp_state(struct ibv_qp *qp);
int mtu_bytes(enum ibv_mtu m);
bool check_qp_state(struct role *r, struct conn *c, enum ibv_qp_state want, const char *why);

int post_recv_qp(struct role *r, struct ibv_qp *qp, uint64_t wr_id, void *addr, uint32_t len,
		 uint32_t lkey);
int post_recv(struct role *r, struct conn *c, uint64_t wr_id, void *addr, uint32_t len,
	      uint32_t lkey);
int post_send(struct role *r, struct conn *c, uint64_t wr_id, enum ibv_wr_opcode opcode,
	      void *addr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey);
int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms);
const char *opcode_str(enum ibv_wc_opcode op);
bool __attribute__((format(printf, 7, 8)))
expect_wc(struct role *r, struct conn *c, struct ibv_cq *cq, struct ibv_wc *wc, uint64_t wr_id,
	  enum ibv_wc_status status, const char *fmt, ...);
bool __attribute__((format(printf, 8, 9)))
expect_wc_rxe(struct role *r, struct conn *c, struct ibv_cq *cq, struct ibv_wc *wc,
	      uint64_t wr_id, enum ibv_wc_status status, enum ibv_wc_status rxe_status,
	      const char *fmt, ...);
bool expect_no_wc(struct role *r, struct ibv_cq *cq, int ms, const char *what);
bool wait_async_event(struct role *r, enum ibv_event_type want, void *object, int ms);

/* =============================================================================================
 * The subtests' roles, SUBTEST_server and SUBTEST_client, by the file that holds them
 */

#define ROLES(t)	int t##_server(struct role *r); int t##_client(struct role *r);
ROLES(bad_lkey) ROLES(rkey_violation) ROLES(rnr_retry)			/* rc_errors.c */
ROLES(flush) ROLES(cq_overflow)
ROLES(send_sizes) ROLES(rdma_rw) ROLES(atomics)				/* rc_data.c */
ROLES(ud_qkey)								/* ud.c */
ROLES(srq_limit) ROLES(xrc)						/* srq_xrc.c */
ROLES(mw) ROLES(rereg)							/* memory.c */
ROLES(dm)								/* dm.c */
ROLES(timestamps) ROLES(cq_moderation)					/* cq_timing.c */
ROLES(limits)								/* limits.c */
#undef ROLES

#endif /* PIB_VERBS_H */
