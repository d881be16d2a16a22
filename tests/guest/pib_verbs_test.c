// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-verbs-test: tests of the data path (RC, and UD, SRQs, memory windows, XRC and CQ event
 * moderation), written against plain libibverbs.
 *
 * Nothing here knows about pib: the same binary runs on Soft-RoCE (rdma_rxe) and on real HCAs,
 * which is how the tests themselves are validated.  Each subtest asserts real outcomes (completion
 * statuses, wr_ids, byte counts, the bytes themselves, QP states, async events) and prints one
 * line per check:
 *
 *     PASS  rnr-retry/client: SEND completes with SUCCESS once the receive is posted
 *     FAIL  rnr-retry/server: ...
 *
 * The process exits 1 when any check failed (2 on a usage error), 0 otherwise.
 *
 * Every subtest has two roles, like ibv_rc_pingpong:
 *   server  the passive side (target of RDMA, receiver of SENDs);
 *           started as `pib-verbs-test -d pib_0 SUBTEST`
 *   client  the active side (poster of SENDs, RDMA and atomics);
 *           started as `pib-verbs-test -d pib_0 SUBTEST SERVER_HOST`
 * The roles exchange QP numbers, LIDs, GIDs, PSNs, rkeys and addresses, and meet at
 * synchronisation points, over a line-based text channel on TCP.  With -l (loopback) both roles
 * run in one process, as two threads joined by a socketpair, each with its own device context and
 * QP, connected to each other through the port's own LID (or GID on RoCE).  The role code is the
 * same in both cases.
 */
#define _GNU_SOURCE
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
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <infiniband/verbs.h>

#include "pib_report.h"
#include "pib_test_util.h"

#define DEFAULT_TCP_PORT 18515	/* ibv_rc_pingpong's port; subtest k listens on this + k */
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

static void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* =============================================================================================
 * The channel between the roles: one text line per message, "word args...\n".
 */

static int __attribute__((format(printf, 2, 3)))
chan_send(struct role *r, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	size_t len, done = 0;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(line) - 1)
		return fail(r, "channel: message too long");
	line[n] = '\n';
	len = n + 1;
	while (done < len) {
		ssize_t w = write(r->sock, line + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return fail(r, "channel: write to the peer failed: %s", strerror(errno));
		done += w;
	}
	return 0;
}

/*
 * Read one line (without the newline).  Between two messages the peer may wait for a few events
 * of its own, each up to the -t timeout, so allow it several.
 */
#define CHAN_TIMEOUTS 4

static int chan_read_line(struct role *r, char *line, size_t size)
{
	int64_t deadline = now_ms() + CHAN_TIMEOUTS * r->o->timeout * 1000LL;
	size_t n = 0;

	for (;;) {
		struct pollfd pfd = { .fd = r->sock, .events = POLLIN };
		int left = (int)(deadline - now_ms());
		ssize_t got;
		char c;

		if (left <= 0)
			return fail(r, "channel: no message from the peer within %d s",
				    CHAN_TIMEOUTS * r->o->timeout);
		if (poll(&pfd, 1, left) <= 0)
			continue;
		/* Byte by byte: messages are short, and this never reads past our line. */
		got = read(r->sock, &c, 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return fail(r, "channel: the peer went away");
		if (c == '\n') {
			line[n] = '\0';
			return 0;
		}
		if (n + 1 < size)
			line[n++] = c;
	}
}

/*
 * Receive one message and parse it with sscanf(fmt), which also matches fmt's literal words, so
 * chan_recv(r, 2, "target %x %x", ...) accepts only a "target" message.  n is the number of
 * conversions fmt must make.
 */
static int __attribute__((format(scanf, 3, 4)))
chan_recv(struct role *r, int n, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int got;

	if (chan_read_line(r, line, sizeof(line)))
		return -1;
	va_start(ap, fmt);
	got = vsscanf(line, fmt, ap);
	va_end(ap);
	if (got != n)
		return fail(r, "channel: expected \"%s\" from the peer, got \"%s\"", fmt, line);
	return 0;
}

/* Both roles call chan_sync(r, "x"): neither returns before the other got there. */
static int chan_sync(struct role *r, const char *what)
{
	char line[512], want[256];

	snprintf(want, sizeof(want), "sync %s", what);
	if (chan_send(r, "%s", want) || chan_read_line(r, line, sizeof(line)))
		return -1;
	if (strcmp(line, want))
		return fail(r, "channel: expected \"%s\" from the peer, got \"%s\"", want, line);
	return 0;
}

/*
 * The verdict of a check made on one side, sent to the other: the other side then checks it too,
 * so that the client's exit status alone tells whether the whole subtest passed.
 */
static int chan_send_verdict(struct role *r, bool ok)
{
	return chan_send(r, "verdict %s", ok ? "ok" : "bad");
}

static int chan_recv_verdict(struct role *r, bool *ok)
{
	char word[8];

	if (chan_recv(r, 1, "verdict %7s", word))
		return -1;
	*ok = !strcmp(word, "ok");
	return 0;
}

/* =============================================================================================
 * Device context, buffers and data patterns
 */

/*
 * The GID to put in the GRH.  InfiniBand routes by LID inside a subnet, so no GRH (-1).  RoCE has
 * no LIDs: every packet carries a GRH, and the source GID picks the RoCE version and the IP
 * address; prefer a RoCE v2 GID holding an IPv4 address (::ffff:a.b.c.d), which routes on any
 * IP network, like `ibv_rc_pingpong -g` with the IPv4 GID index.
 */
static int pick_gid_index(struct role *r)
{
	int first_v2 = -1;

	if (r->o->gid_idx >= 0)
		return r->o->gid_idx;
	if (r->port.link_layer != IBV_LINK_LAYER_ETHERNET)
		return -1;
	for (int i = 0; i < r->port.gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };

		if (ibv_query_gid_ex(r->ctx, r->o->ib_port, i, &e, 0))
			continue;
		if (e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		if (!memcmp(e.gid.raw, v4_prefix, sizeof(v4_prefix)))
			return i;
		if (first_v2 < 0)
			first_v2 = i;
	}
	return first_v2 >= 0 ? first_v2 : 0;
}

static struct ibv_device *find_device(struct role *r, struct ibv_device **list)
{
	for (int i = 0; list[i]; i++)
		if (!r->o->dev_name || !strcmp(ibv_get_device_name(list[i]), r->o->dev_name))
			return list[i];
	return NULL;
}

/* Make fd non-blocking (events read with poll() and a timeout); false if it cannot be. */
static bool set_nonblocking(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) >= 0;
}

static int role_open(struct role *r)
{
	struct ibv_device **list;
	struct ibv_device *dev;

	list = ibv_get_device_list(NULL);
	if (!list)
		return fail(r, "ibv_get_device_list: %s", strerror(errno));
	dev = find_device(r, list);
	if (!dev) {
		ibv_free_device_list(list);
		return fail(r, "no RDMA device %s", r->o->dev_name ? r->o->dev_name : "at all");
	}
	r->ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!r->ctx)
		return fail(r, "ibv_open_device: %s", strerror(errno));
	if (ibv_query_device(r->ctx, &r->dev))
		return fail(r, "ibv_query_device failed");
	if (ibv_query_port(r->ctx, r->o->ib_port, &r->port))
		return fail(r, "ibv_query_port(%d) failed", r->o->ib_port);
	if (r->port.state != IBV_PORT_ACTIVE)
		return fail(r, "port %d is %s, not ACTIVE", r->o->ib_port,
			    ibv_port_state_str(r->port.state));
	r->gid_idx = pick_gid_index(r);
	if (r->gid_idx >= 0 && ibv_query_gid(r->ctx, r->o->ib_port, r->gid_idx, &r->gid))
		return fail(r, "ibv_query_gid(%d) failed", r->gid_idx);
	r->pd = ibv_alloc_pd(r->ctx);
	if (!r->pd)
		return fail(r, "ibv_alloc_pd: %s", strerror(errno));
	r->max_sge = MIN(r->dev.max_sge, 4);
	r->rd_atom = MIN(MIN(r->dev.max_qp_rd_atom, r->dev.max_qp_init_rd_atom), 4);
	r->is_rxe = r->dev.vendor_id == 0xffffff;	/* rdma_rxe's RXE_VENDOR_ID */

	/* Async events are read with poll() and a timeout (see wait_async_event). */
	if (!set_nonblocking(r->ctx->async_fd))
		return fail(r, "cannot make the async event fd non-blocking: %s", strerror(errno));

	info(r, "device %s port %d: LID 0x%04x, active MTU %d, link layer %s, GID index %d",
	     ibv_get_device_name(r->ctx->device), r->o->ib_port, r->port.lid,
	     128 << r->port.active_mtu,
	     r->port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand", r->gid_idx);
	return 0;
}

/*
 * After a clean run every object is gone and the PD must go too.  A role that stopped half way
 * leaves objects behind: closing the device frees them all (the kernel does, when the uverbs file
 * closes), so do not report the PD as a second failure then.
 */
static void role_close(struct role *r, bool aborted)
{
	if (r->pd && !aborted && ibv_dealloc_pd(r->pd))
		fail(r, "ibv_dealloc_pd failed (resources left behind?)");
	if (r->ctx && ibv_close_device(r->ctx))
		fail(r, "ibv_close_device failed");
	r->pd = NULL;
	r->ctx = NULL;
}

/* A page-aligned buffer and its memory region. */
struct buf {
	uint8_t *p;
	size_t len;
	struct ibv_mr *mr;
};

static int buf_alloc(struct role *r, struct buf *b, size_t len, int access)
{
	memset(b, 0, sizeof(*b));
	if (posix_memalign((void **)&b->p, 4096, MAX(len, 1)))
		return fail(r, "out of memory (%zu bytes)", len);
	memset(b->p, 0, MAX(len, 1));
	b->len = len;
	b->mr = ibv_reg_mr(r->pd, b->p, len, access);
	if (!b->mr)
		return fail(r, "ibv_reg_mr(%zu bytes, access 0x%x): %s", len, access,
			    strerror(errno));
	return 0;
}

static void buf_free(struct role *r, struct buf *b)
{
	if (b->mr && ibv_dereg_mr(b->mr))
		fail(r, "ibv_dereg_mr failed");
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/*
 * Test data.  Byte i of the pattern with a given seed is a hash of (seed, i) (splitmix64's
 * mixer), so every byte depends on its offset at every scale and on the seed: a packet delivered
 * to the wrong offset, duplicated or dropped, or stale data from an earlier message (another
 * seed), shows.
 */
static uint8_t pattern_byte(uint32_t seed, size_t i)
{
	uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ (uint64_t)seed * 0xc2b2ae3d27d4eb4full;

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return (uint8_t)(x >> 56);
}

static void fill_pattern(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern_byte(seed, i);
}

/* Offset of the first byte that is not the pattern, or -1 when all match. */
static ssize_t find_pattern_mismatch(const uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern_byte(seed, i))
			return (ssize_t)i;
	return -1;
}

/* Offset of the first byte that differs from c, or -1. */
static ssize_t find_not_byte(const uint8_t *p, size_t len, uint8_t c)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != c)
			return (ssize_t)i;
	return -1;
}

/* Offset of the first differing byte, or -1. */
static ssize_t find_diff(const uint8_t *a, const uint8_t *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return (ssize_t)i;
	return -1;
}

/* FNV-1a: a fingerprint of remote bytes that the other role can compare with its own. */
static uint32_t fnv1a(const uint8_t *p, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* =============================================================================================
 * RC connections: CQs, a QP, and the RESET -> INIT -> RTR -> RTS walk.
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
static uint8_t default_qp_timeout = 16;

static struct conn_params conn_defaults(void)
{
	return (struct conn_params){
		.send_cqe = 256, .recv_cqe = 256,
		.max_send_wr = 128, .max_recv_wr = 128,
		.mtu = IBV_MTU_4096,
		.min_rnr_timer = 12,	/* 0.64 ms */
		.rnr_retry = 7,
		.timeout = default_qp_timeout,	/* 268 ms: generous, guests may run under TCG */
		.retry_cnt = 7,
	};
}

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

static int conn_create(struct role *r, struct conn *c, const struct conn_params *p)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = p->max_send_wr,
			.max_recv_wr = p->max_recv_wr,
			.max_send_sge = r->max_sge,
			.max_recv_sge = r->max_sge,
		},
	};
	/* The QP lets the peer do everything; the MRs decide what it may do where. */
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = r->o->ib_port,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	int ret;

	if (r->dev.atomic_cap != IBV_ATOMIC_NONE)
		attr.qp_access_flags |= IBV_ACCESS_REMOTE_ATOMIC;
	memset(c, 0, sizeof(*c));
	c->shared_rcq = p->rcq != NULL;
	if (p->timestamps && !p->rcq) {
		struct ibv_cq_init_attr_ex cx = {
			.cqe = p->send_cqe,
			.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
				    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
		};

		c->scqx = ibv_create_cq_ex(r->ctx, &cx);
		cx.cqe = p->recv_cqe;
		c->rcqx = c->scqx ? ibv_create_cq_ex(r->ctx, &cx) : NULL;
		if (!c->scqx || !c->rcqx)
			return fail(r, "ibv_create_cq_ex(COMPLETION_TIMESTAMP): %s",
				    strerror(errno));
		c->scq = ibv_cq_ex_to_cq(c->scqx);
		c->rcq = ibv_cq_ex_to_cq(c->rcqx);
	} else {
		c->scq = ibv_create_cq(r->ctx, p->send_cqe, NULL, NULL, 0);
		c->rcq = p->rcq ? p->rcq : ibv_create_cq(r->ctx, p->recv_cqe, NULL, NULL, 0);
	}
	if (!c->scq || !c->rcq)
		return fail(r, "ibv_create_cq: %s", strerror(errno));
	init.send_cq = c->scq;
	init.recv_cq = c->rcq;
	if (p->srq) {
		init.srq = p->srq;
		init.cap.max_recv_wr = 0;
		init.cap.max_recv_sge = 0;
	}
	c->qp = ibv_create_qp(r->pd, &init);
	if (!c->qp)
		return fail(r, "ibv_create_qp(RC, %d/%d WRs, %d SGEs): %s", p->max_send_wr,
			    p->max_recv_wr, r->max_sge, strerror(errno));
	ret = ibv_modify_qp(c->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					   IBV_QP_ACCESS_FLAGS);
	if (ret)
		return fail(r, "ibv_modify_qp(RESET -> INIT): %s", strerror(ret));
	c->psn = nrand48(r->seed) & 0xffffff;
	return 0;
}

static void gid_to_hex(const union ibv_gid *gid, char hex[33])
{
	for (int i = 0; i < 16; i++)
		sprintf(hex + 2 * i, "%02x", gid->raw[i]);
}

static void hex_to_gid(const char *hex, union ibv_gid *gid)
{
	for (int i = 0; i < 16; i++) {
		unsigned int v;

		sscanf(hex + 2 * i, "%2x", &v);
		gid->raw[i] = v;
	}
}

/* Tell the peer how to reach our QP, and learn the same about its QP. */
static int conn_exchange(struct role *r, struct conn *c, struct qp_info *remote)
{
	char hex[33];
	unsigned int lid, qpn, psn, mtu;

	gid_to_hex(&r->gid, hex);
	if (chan_send(r, "qp %x %x %x %u %s", r->port.lid, c->qp->qp_num, c->psn,
		      r->port.active_mtu, hex))
		return -1;
	if (chan_recv(r, 5, "qp %x %x %x %u %32s", &lid, &qpn, &psn, &mtu, hex))
		return -1;
	remote->lid = lid;
	remote->qpn = qpn;
	remote->psn = psn;
	remote->active_mtu = mtu;
	hex_to_gid(hex, &remote->gid);
	return 0;
}

/* INIT -> RTR -> RTS, aimed at the remote QP. */
static int conn_connect(struct role *r, struct conn *c, const struct qp_info *remote,
			const struct conn_params *p)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.dest_qp_num = remote->qpn,
		.rq_psn = remote->psn,
		.max_dest_rd_atomic = r->rd_atom,
		.min_rnr_timer = p->min_rnr_timer,
		.ah_attr = {
			.dlid = remote->lid,
			.sl = 0,
			.port_num = r->o->ib_port,
		},
	};
	int ret;

	/* Both ends compute the same MTU: what was asked, capped by both ports. */
	c->mtu = MIN(p->mtu, MIN(r->port.active_mtu, remote->active_mtu));
	attr.path_mtu = c->mtu;
	if (r->gid_idx >= 0) {
		attr.ah_attr.is_global = 1;
		attr.ah_attr.grh.dgid = remote->gid;
		attr.ah_attr.grh.sgid_index = r->gid_idx;
		attr.ah_attr.grh.hop_limit = 1;
	}
	ret = ibv_modify_qp(c->qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (ret)
		return fail(r, "ibv_modify_qp(INIT -> RTR): %s", strerror(ret));

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = c->psn;
	attr.timeout = p->timeout;
	attr.retry_cnt = p->retry_cnt;
	attr.rnr_retry = p->rnr_retry;
	attr.max_rd_atomic = r->rd_atom;
	ret = ibv_modify_qp(c->qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					   IBV_QP_MAX_QP_RD_ATOMIC);
	if (ret)
		return fail(r, "ibv_modify_qp(RTR -> RTS): %s", strerror(ret));
	return 0;
}

/*
 * Create, exchange and connect: the usual way to get a QP in RTS that is connected to the peer's.
 * remote (may be NULL) receives the peer's QP info.
 */
static int conn_open(struct role *r, struct conn *c, const struct conn_params *p,
		     struct qp_info *remote)
{
	struct qp_info tmp;

	if (!remote)
		remote = &tmp;
	if (conn_create(r, c, p) || conn_exchange(r, c, remote) || conn_connect(r, c, remote, p))
		return -1;
	return 0;
}

/* Destroy what conn_create made; a failure to destroy is a failed check. */
static void conn_close(struct role *r, struct conn *c)
{
	int ret;

	if (c->qp && (ret = ibv_destroy_qp(c->qp)))
		fail(r, "ibv_destroy_qp: %s", strerror(ret));
	if (c->scq && (ret = ibv_destroy_cq(c->scq)))
		fail(r, "ibv_destroy_cq (send CQ): %s", strerror(ret));
	if (c->rcq && !c->shared_rcq && (ret = ibv_destroy_cq(c->rcq)))
		fail(r, "ibv_destroy_cq (recv CQ): %s", strerror(ret));
	memset(c, 0, sizeof(*c));
}

static int modify_to_err(struct role *r, struct conn *c)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	int ret = ibv_modify_qp(c->qp, &attr, IBV_QP_STATE);

	return ret ? fail(r, "ibv_modify_qp(-> ERR): %s", strerror(ret)) : 0;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;

	if (ibv_query_qp(qp, &attr, IBV_QP_STATE, &init))
		return (enum ibv_qp_state)-1;
	return attr.qp_state;
}

static const char *qp_state_str(enum ibv_qp_state s)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS", [IBV_QPS_SQD] = "SQD", [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	return (unsigned int)s < ARRAY_SIZE(names) && names[s] ? names[s] : "?";
}

/*
 * The QP reaches ERR when the error completion is generated; a device may report the completion
 * a moment before ibv_query_qp sees the new state (rxe completes first), so allow 2 seconds.
 */
static bool check_qp_state(struct role *r, struct conn *c, enum ibv_qp_state want,
			   const char *why)
{
	int64_t deadline = now_ms() + 2000;
	enum ibv_qp_state s;
	char what[160];

	while ((s = qp_state(c->qp)) != want && now_ms() < deadline)
		sleep_ms(10);
	snprintf(what, sizeof(what), "QP is in state %s %s", qp_state_str(want), why);
	return check_why(r, s == want, what, "ibv_query_qp says %s", qp_state_str(s));
}

/* =============================================================================================
 * Posting work requests and reaping completions
 */

static int post_recv_qp(struct role *r, struct ibv_qp *qp, uint64_t wr_id, void *addr,
			uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;
	int ret = ibv_post_recv(qp, &wr, &bad);

	return ret ? fail(r, "ibv_post_recv(wr_id %" PRIu64 "): %s", wr_id, strerror(ret)) : 0;
}

static int post_recv(struct role *r, struct conn *c, uint64_t wr_id, void *addr, uint32_t len,
		     uint32_t lkey)
{
	return post_recv_qp(r, c->qp, wr_id, addr, len, lkey);
}

/* Post one signaled send-queue WR.  len 0 posts no SGE at all. */
static int post_send(struct role *r, struct conn *c, uint64_t wr_id, enum ibv_wr_opcode opcode,
		     void *addr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = len ? &sge : NULL,
		.num_sge = len ? 1 : 0,
		.opcode = opcode,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;
	int ret = ibv_post_send(c->qp, &wr, &bad);

	return ret ? fail(r, "ibv_post_send(wr_id %" PRIu64 "): %s", wr_id, strerror(ret)) : 0;
}

/* Wait up to timeout_ms for one completion.  1: got one in *wc; 0: none came; -1: poll error. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;

	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n < 0 ? -1 : 1;
		if (now_ms() >= deadline)
			return 0;
		/* Be polite: under TCG the device model may be waiting for our vCPU. */
		usleep(50);
	}
}

static const char *opcode_str(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	case IBV_WC_BIND_MW: return "BIND_MW";
	case IBV_WC_LOCAL_INV: return "LOCAL_INV";
	default: return "?";
	}
}

/*
 * Reap one completion from cq and check it: the wr_id, the status, and that it names our QP.
 * One PASS/FAIL line, "what" describing the WR.  The completion is left in *wc.  rxe_status, when
 * not -1, is the status rdma_rxe is known to give instead (an XFAIL there).
 */
static bool vexpect_wc(struct role *r, struct conn *c, struct ibv_cq *cq, struct ibv_wc *wc,
		       uint64_t wr_id, enum ibv_wc_status status, int rxe_status, const char *fmt,
		       va_list ap)
{
	char what[256], pass[320];
	bool ok;
	int got;

	vsnprintf(what, sizeof(what), fmt, ap);
	memset(wc, 0, sizeof(*wc));
	got = poll_one(cq, wc, r->o->timeout * 1000);
	if (got < 0)
		return check(r, false, "%s: ibv_poll_cq failed", what);
	if (got == 0)
		return check(r, false, "%s: no completion within %d s (wanted %s)", what,
			     r->o->timeout, ibv_wc_status_str(status));
	ok = wc->wr_id == wr_id && wc->status == status && wc->qp_num == c->qp->qp_num;
	if (!ok && r->is_rxe && (int)wc->status == rxe_status && wc->wr_id == wr_id) {
		xfail(r, "%s: %s where the IBTA says %s: a known rdma_rxe deviation", what,
		      ibv_wc_status_str(wc->status), ibv_wc_status_str(status));
		return true;
	}
	snprintf(pass, sizeof(pass), "%s: %s", what, ibv_wc_status_str(status));
	return check_why(r, ok, pass, "got wr_id %" PRIu64 " status %s (vendor_err 0x%x) qp 0x%x, "
			 "wanted wr_id %" PRIu64 " qp 0x%x", wc->wr_id,
			 ibv_wc_status_str(wc->status), wc->vendor_err, wc->qp_num, wr_id,
			 c->qp->qp_num);
}

static bool __attribute__((format(printf, 7, 8)))
expect_wc(struct role *r, struct conn *c, struct ibv_cq *cq, struct ibv_wc *wc, uint64_t wr_id,
	  enum ibv_wc_status status, const char *fmt, ...)
{
	va_list ap;
	bool ok;

	va_start(ap, fmt);
	ok = vexpect_wc(r, c, cq, wc, wr_id, status, -1, fmt, ap);
	va_end(ap);
	return ok;
}

/* expect_wc(), where rdma_rxe is known to complete with rxe_status instead. */
static bool __attribute__((format(printf, 8, 9)))
expect_wc_rxe(struct role *r, struct conn *c, struct ibv_cq *cq, struct ibv_wc *wc,
	      uint64_t wr_id, enum ibv_wc_status status, enum ibv_wc_status rxe_status,
	      const char *fmt, ...)
{
	va_list ap;
	bool ok;

	va_start(ap, fmt);
	ok = vexpect_wc(r, c, cq, wc, wr_id, status, rxe_status, fmt, ap);
	va_end(ap);
	return ok;
}

/* Check that no completion arrives on cq for ms milliseconds. */
static bool expect_no_wc(struct role *r, struct ibv_cq *cq, int ms, const char *what)
{
	struct ibv_wc wc;
	int got = poll_one(cq, &wc, ms);

	if (got > 0)
		return check(r, false, "%s: unexpected completion wr_id %" PRIu64 " status %s",
			     what, wc.wr_id, ibv_wc_status_str(wc.status));
	return check(r, got == 0, "%s (no completion in %d ms)", what, ms);
}

/* The object an async event is about: the member of the union that belongs to its type. */
static void *async_event_object(const struct ibv_async_event *ev)
{
	switch (ev->event_type) {
	case IBV_EVENT_CQ_ERR:
		return ev->element.cq;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return ev->element.srq;
	case IBV_EVENT_DEVICE_FATAL:
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		return NULL;	/* unaffiliated: element.port_num */
	default:
		return ev->element.qp;
	}
}

/*
 * Wait for an async event of the given type about the given object (a CQ, QP, SRQ), reading and
 * acknowledging every event that comes meanwhile.  Events must be acked before their object is
 * destroyed, or ibv_destroy_* waits for the ack forever.  Returns whether it came within ms.
 */
static bool wait_async_event(struct role *r, enum ibv_event_type want, void *object, int ms)
{
	int64_t deadline = now_ms() + ms;

	for (;;) {
		struct pollfd pfd = { .fd = r->ctx->async_fd, .events = POLLIN };
		struct ibv_async_event ev;
		int left = (int)(deadline - now_ms());
		bool match;

		if (left <= 0)
			return false;
		if (poll(&pfd, 1, left) <= 0)
			continue;
		if (ibv_get_async_event(r->ctx, &ev))
			continue;	/* EAGAIN: someone else's wakeup */
		match = ev.event_type == want && async_event_object(&ev) == object;
		info(r, "async event %s%s", ibv_event_type_str(ev.event_type),
		     match ? "" : " (not the one waited for)");
		ibv_ack_async_event(&ev);
		if (match)
			return true;
	}
}

/* =============================================================================================
 * Subtest bad-lkey
 *
 * A SEND whose SGE names a bad lkey fails locally, before anything goes on the wire: the CQE says
 * LOC_PROT_ERR, the QP is in ERR, and a WR posted afterwards is flushed (WR_FLUSH_ERR).
 * Two bad keys: a valid lkey with its key byte (the low 8 bits) flipped, and the lkey of an MR
 * that was deregistered.  The server checks that nothing reached its posted receive.
 */

#define BAD_LKEY_VARIANTS 2

static int bad_lkey_server(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct buf rb;

	if (buf_alloc(r, &rb, 4096, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	for (int v = 0; v < BAD_LKEY_VARIANTS; v++) {
		struct conn c;

		if (conn_open(r, &c, &p, NULL) ||
		    post_recv(r, &c, 1, rb.p, rb.len, rb.mr->lkey) ||
		    chan_sync(r, "ready") || chan_sync(r, "done"))
			return -1;
		expect_no_wc(r, c.rcq, 200, "the failed SENDs delivered nothing to our receive");
		conn_close(r, &c);
	}
	buf_free(r, &rb);
	return chan_sync(r, "end");
}

static int bad_lkey_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct buf sb;

	if (buf_alloc(r, &sb, 4096, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	fill_pattern(sb.p, sb.len, 1);
	for (int v = 0; v < BAD_LKEY_VARIANTS; v++) {
		struct conn c;
		struct ibv_wc wc;
		uint32_t lkey;
		const char *how;

		if (conn_open(r, &c, &p, NULL) || chan_sync(r, "ready"))
			return -1;
		if (v == 0) {
			lkey = sb.mr->lkey ^ 0x80;
			how = "lkey ^ 0x80";
		} else {
			struct buf gone;

			if (buf_alloc(r, &gone, 4096, IBV_ACCESS_LOCAL_WRITE))
				return -1;
			lkey = gone.mr->lkey;
			buf_free(r, &gone);
			how = "the lkey of a deregistered MR";
		}
		if (post_send(r, &c, 10 + v, IBV_WR_SEND, sb.p, 64, lkey, 0, 0))
			return -1;
		/* rdma_rxe (Linux 6.1) says LOC_QP_OP_ERR: its copy_data() fails with -EINVAL. */
		expect_wc_rxe(r, &c, c.scq, &wc, 10 + v, IBV_WC_LOC_PROT_ERR, IBV_WC_LOC_QP_OP_ERR,
			      "SEND with %s", how);
		check_qp_state(r, &c, IBV_QPS_ERR, "after the protection error");

		/* A good WR posted to a QP in ERR completes with a flush error, never executed. */
		if (post_send(r, &c, 20 + v, IBV_WR_SEND, sb.p, 64, sb.mr->lkey, 0, 0))
			return -1;
		expect_wc(r, &c, c.scq, &wc, 20 + v, IBV_WC_WR_FLUSH_ERR,
			  "valid SEND posted to the QP in ERR");
		expect_no_wc(r, c.scq, 100, "no further send completions");

		if (chan_sync(r, "done"))
			return -1;
		conn_close(r, &c);
	}
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * Subtest rkey-violation
 *
 * RDMA WRITEs the target must refuse: a wrong rkey, a valid rkey with a range running past the
 * end of the MR, and an MR registered without REMOTE_WRITE.  The requester's CQE says
 * REM_ACCESS_ERR and the target's memory is unchanged (the server compares all of it against
 * what it expects, and reports).  A first, valid WRITE shows the setup itself works.
 * Every variant uses a fresh QP pair: an access error moves both QPs to ERR.
 */

#define RKV_BUF_LEN	8192	/* the target buffer ... */
#define RKV_MR_LEN	4096	/* ... of which the first 4096 bytes are registered for WRITE */
#define RKV_GOOD_OFF	512
#define RKV_GOOD_LEN	256
#define RKV_BAD_LEN	64

enum rkv_variant { RKV_GOOD, RKV_WRONG_RKEY, RKV_PAST_END, RKV_NO_REMOTE_WRITE, RKV_NR };

static const char *const rkv_names[RKV_NR] = {
	[RKV_GOOD] = "valid rkey and range (control)",
	[RKV_WRONG_RKEY] = "wrong rkey (key byte flipped)",
	[RKV_PAST_END] = "valid rkey, range crossing the end of the MR",
	[RKV_NO_REMOTE_WRITE] = "MR registered without REMOTE_WRITE",
};

static int rkey_violation_server(struct role *r)
{
	struct conn_params p = conn_defaults();
	uint8_t *target, *ro, *expect;
	struct ibv_mr *mr_w, *mr_ro;
	int ret = -1;

	/* target: 8 KiB, the first 4 KiB registered for REMOTE_WRITE; ro: 4 KiB read-only. */
	if (posix_memalign((void **)&target, 4096, RKV_BUF_LEN) ||
	    posix_memalign((void **)&ro, 4096, RKV_MR_LEN) ||
	    !(expect = malloc(RKV_BUF_LEN + RKV_MR_LEN)))
		return fail(r, "out of memory");
	fill_pattern(target, RKV_BUF_LEN, 0x7a);
	fill_pattern(ro, RKV_MR_LEN, 0x7b);
	memcpy(expect, target, RKV_BUF_LEN);
	memcpy(expect + RKV_BUF_LEN, ro, RKV_MR_LEN);
	mr_w = ibv_reg_mr(r->pd, target, RKV_MR_LEN,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	mr_ro = ibv_reg_mr(r->pd, ro, RKV_MR_LEN, IBV_ACCESS_REMOTE_READ);
	if (!mr_w || !mr_ro)
		return fail(r, "ibv_reg_mr: %s", strerror(errno));

	for (int v = 0; v < RKV_NR; v++) {
		struct conn c;
		ssize_t bad_w, bad_ro;
		char what[160];
		bool ok;

		if (conn_open(r, &c, &p, NULL) ||
		    chan_send(r, "target %" PRIx64 " %x %" PRIx64 " %x",
			      (uint64_t)(uintptr_t)target, mr_w->rkey,
			      (uint64_t)(uintptr_t)ro, mr_ro->rkey) ||
		    chan_sync(r, "written"))
			goto out;
		/* The control WRITE lands; everything else must leave the bytes alone. */
		if (v == RKV_GOOD)
			fill_pattern(expect + RKV_GOOD_OFF, RKV_GOOD_LEN, 0x5151);
		bad_w = find_diff(target, expect, RKV_BUF_LEN);
		bad_ro = find_diff(ro, expect + RKV_BUF_LEN, RKV_MR_LEN);
		snprintf(what, sizeof(what), "%s: target memory %s", rkv_names[v],
			 v == RKV_GOOD ? "holds exactly the written bytes" : "is unchanged");
		ok = check_why(r, bad_w < 0 && bad_ro < 0, what, "first difference at write MR "
			       "+%zd, read-only MR +%zd", bad_w, bad_ro);
		if (chan_send_verdict(r, ok) || chan_sync(r, "next"))
			goto out;
		conn_close(r, &c);
	}
	ret = chan_sync(r, "end");
out:
	ibv_dereg_mr(mr_w);
	ibv_dereg_mr(mr_ro);
	free(target);
	free(ro);
	free(expect);
	return ret;
}

static int rkey_violation_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct buf sb;

	if (buf_alloc(r, &sb, 4096, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	fill_pattern(sb.p, RKV_GOOD_LEN, 0x5151);
	for (int v = 0; v < RKV_NR; v++) {
		uint64_t addr_w, addr_ro, raddr;
		uint32_t rkey_w, rkey_ro, rkey, len;
		struct conn c;
		struct ibv_wc wc;
		bool server_ok;

		if (conn_open(r, &c, &p, NULL) ||
		    chan_recv(r, 4, "target %" SCNx64 " %x %" SCNx64 " %x", &addr_w, &rkey_w,
			      &addr_ro, &rkey_ro))
			return -1;
		raddr = addr_w + RKV_GOOD_OFF;
		rkey = rkey_w;
		len = RKV_BAD_LEN;
		switch (v) {
		case RKV_GOOD:
			len = RKV_GOOD_LEN;
			break;
		case RKV_WRONG_RKEY:
			rkey = rkey_w ^ 0x80;
			break;
		case RKV_PAST_END:
			/* Starts inside the MR, ends 32 bytes past it (still inside the buffer). */
			raddr = addr_w + RKV_MR_LEN - RKV_BAD_LEN / 2;
			break;
		case RKV_NO_REMOTE_WRITE:
			raddr = addr_ro;
			rkey = rkey_ro;
			break;
		}
		if (post_send(r, &c, v, IBV_WR_RDMA_WRITE, sb.p, len, sb.mr->lkey, raddr, rkey))
			return -1;
		expect_wc(r, &c, c.scq, &wc, v,
			  v == RKV_GOOD ? IBV_WC_SUCCESS : IBV_WC_REM_ACCESS_ERR,
			  "RDMA WRITE, %s", rkv_names[v]);
		if (v != RKV_GOOD)
			check_qp_state(r, &c, IBV_QPS_ERR, "after the remote access error");
		if (chan_sync(r, "written") || chan_recv_verdict(r, &server_ok))
			return -1;
		check(r, server_ok, "%s: the server found its memory as expected", rkv_names[v]);
		if (chan_sync(r, "next"))
			return -1;
		conn_close(r, &c);
	}
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * Subtest rnr-retry
 *
 * A SEND that arrives before the responder has posted a receive is answered with an RNR NAK, and
 * the requester retries after the RNR timer.  With rnr_retry 7 (retry forever) the SEND completes
 * with SUCCESS once the server, a second later, posts its receive, and the server gets the exact
 * bytes.  With rnr_retry 0 the requester gives up at the first RNR NAK: RNR_RETRY_EXC_ERR.
 */

#define RNR_MSG_LEN 8192	/* more than one packet at any MTU */

static int rnr_retry_server(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct conn c;
	struct ibv_wc wc;
	struct buf rb;
	ssize_t bad;

	if (buf_alloc(r, &rb, RNR_MSG_LEN + 4096, IBV_ACCESS_LOCAL_WRITE))
		return -1;

	/* 1: rnr_retry 7.  No receive posted until a second after the client posted its SEND. */
	p.min_rnr_timer = 1;	/* 0.01 ms: the smallest nonzero timer, so retries are prompt */
	if (conn_open(r, &c, &p, NULL) || chan_sync(r, "posted"))
		return -1;
	sleep_ms(1000);
	memset(rb.p, 0xa5, rb.len);
	if (post_recv(r, &c, 1, rb.p, rb.len, rb.mr->lkey))
		return -1;
	if (expect_wc(r, &c, c.rcq, &wc, 1, IBV_WC_SUCCESS, "receive posted 1 s late")) {
		bad = find_pattern_mismatch(rb.p, RNR_MSG_LEN, 0x3131);
		check_why(r, wc.opcode == IBV_WC_RECV && wc.byte_len == RNR_MSG_LEN && bad < 0,
			  "received the 8192 bytes intact", "%s of %u bytes, first bad byte at %zd",
			  opcode_str(wc.opcode), wc.byte_len, bad);
		check(r, find_not_byte(rb.p + RNR_MSG_LEN, 4096, 0xa5) < 0,
		      "nothing written past the message");
	}
	if (chan_sync(r, "retry7 done"))
		return -1;
	conn_close(r, &c);

	/* 2: rnr_retry 0.  The receive is posted only after the client saw its error. */
	if (conn_open(r, &c, &p, NULL) || chan_sync(r, "failed"))
		return -1;
	if (post_recv(r, &c, 2, rb.p, rb.len, rb.mr->lkey))
		return -1;
	expect_no_wc(r, c.rcq, 500, "the abandoned SEND is never delivered");
	conn_close(r, &c);
	buf_free(r, &rb);
	return chan_sync(r, "end");
}

static int rnr_retry_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct conn c;
	struct ibv_wc wc;
	struct buf sb;
	int64_t t0;

	if (buf_alloc(r, &sb, RNR_MSG_LEN, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	fill_pattern(sb.p, RNR_MSG_LEN, 0x3131);

	/* 1: rnr_retry 7.  RNR NAKs until the server posts its receive, then SUCCESS. */
	p.rnr_retry = 7;
	if (conn_open(r, &c, &p, NULL) ||
	    post_send(r, &c, 1, IBV_WR_SEND, sb.p, RNR_MSG_LEN, sb.mr->lkey, 0, 0) ||
	    chan_sync(r, "posted"))
		return -1;
	t0 = now_ms();
	/* The server waits 1 s after "posted" before it posts the receive, so no ACK can come. */
	expect_no_wc(r, c.scq, 500, "SEND not completed while the server has no receive (RNR)");
	if (expect_wc(r, &c, c.scq, &wc, 1, IBV_WC_SUCCESS,
		      "SEND with rnr_retry 7 once the receive is posted"))
		info(r, "the SEND completed %" PRId64 " ms after it was posted", now_ms() - t0);
	if (chan_sync(r, "retry7 done"))
		return -1;
	conn_close(r, &c);

	/* 2: rnr_retry 0.  The first RNR NAK ends the SEND. */
	p.rnr_retry = 0;
	if (conn_open(r, &c, &p, NULL) ||
	    post_send(r, &c, 2, IBV_WR_SEND, sb.p, 64, sb.mr->lkey, 0, 0))
		return -1;
	expect_wc(r, &c, c.scq, &wc, 2, IBV_WC_RNR_RETRY_EXC_ERR,
		  "SEND with rnr_retry 0 to a QP without receives");
	check_qp_state(r, &c, IBV_QPS_ERR, "after the RNR retry error");
	if (chan_sync(r, "failed"))
		return -1;
	conn_close(r, &c);
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * Subtest flush-on-destroy
 *
 * Outstanding WRs are flushed when the QP moves to ERR: N receives and M SENDs (to a peer QP left
 * in INIT, which drops every packet, so the SENDs are never acknowledged) all complete with
 * WR_FLUSH_ERR, with their wr_ids, in posting order; then the QP, and its CQs, are destroyed.
 */

#define FLUSH_RECVS 16
#define FLUSH_SENDS 8

static int flush_server(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct qp_info remote;
	struct conn c;
	struct buf rb;

	/*
	 * A silent peer: our QP stays in INIT, where it may hold receives but must drop every
	 * packet that comes in, so the client's SENDs are neither delivered nor acknowledged.
	 */
	if (buf_alloc(r, &rb, 4096, IBV_ACCESS_LOCAL_WRITE) || conn_create(r, &c, &p))
		return -1;
	for (int i = 0; i < 4; i++)
		if (post_recv(r, &c, i, rb.p + i * 1024, 1024, rb.mr->lkey))
			return -1;
	if (conn_exchange(r, &c, &remote) || chan_sync(r, "done"))
		return -1;
	expect_no_wc(r, c.rcq, 100, "our QP in INIT took none of the client's SENDs");
	conn_close(r, &c);
	buf_free(r, &rb);
	return chan_sync(r, "end");
}

/* Reap n completions from cq: each must be WR_FLUSH_ERR, wr_ids first_id, first_id + 1, ... */
static void expect_flushed(struct role *r, struct conn *c, struct ibv_cq *cq, int n,
			   uint64_t first_id, const char *what)
{
	int good = 0;

	for (int i = 0; i < n; i++) {
		struct ibv_wc wc;
		int got = poll_one(cq, &wc, r->o->timeout * 1000);

		if (got <= 0) {
			check(r, false, "%s: only %d of %d completions came", what, i, n);
			return;
		}
		if (wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == first_id + i &&
		    wc.qp_num == c->qp->qp_num)
			good++;
		else
			check(r, false, "%s: completion %d is wr_id %" PRIu64 " status %s qp 0x%x, "
			      "wanted wr_id %" PRIu64 " WR_FLUSH_ERR qp 0x%x", what, i, wc.wr_id,
			      ibv_wc_status_str(wc.status), wc.qp_num, first_id + i,
			      c->qp->qp_num);
	}
	check(r, good == n, "%s: %d of %d completed with WR_FLUSH_ERR, wr_ids in posting order",
	      what, good, n);
	expect_no_wc(r, cq, 100, "no extra completions");
}

static int flush_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct ibv_wc wc;
	struct conn c;
	struct buf b;
	int ret;

	if (buf_alloc(r, &b, (FLUSH_RECVS + FLUSH_SENDS) * 256, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	p.timeout = 20;		/* 4.3 s per try: no transport retry error during the test */
	if (conn_open(r, &c, &p, NULL))
		return -1;

	for (int i = 0; i < FLUSH_RECVS; i++)
		if (post_recv(r, &c, 100 + i, b.p + i * 256, 256, b.mr->lkey))
			return -1;
	for (int i = 0; i < FLUSH_SENDS; i++)
		if (post_send(r, &c, 200 + i, IBV_WR_SEND, b.p + (FLUSH_RECVS + i) * 256, 64,
			      b.mr->lkey, 0, 0))
			return -1;
	expect_no_wc(r, c.scq, 300, "SENDs to a silent peer stay outstanding");
	expect_no_wc(r, c.rcq, 1, "receives stay outstanding");

	if (modify_to_err(r, &c))
		return -1;
	expect_flushed(r, &c, c.rcq, FLUSH_RECVS, 100, "receives");
	expect_flushed(r, &c, c.scq, FLUSH_SENDS, 200, "SENDs");
	check_qp_state(r, &c, IBV_QPS_ERR, "after ibv_modify_qp(ERR)");

	if (post_send(r, &c, 300, IBV_WR_SEND, b.p, 64, b.mr->lkey, 0, 0))
		return -1;
	expect_wc(r, &c, c.scq, &wc, 300, IBV_WC_WR_FLUSH_ERR, "SEND posted to the QP in ERR");

	/* Destroy, checked one by one (conn_close would only report failures). */
	ret = ibv_destroy_qp(c.qp);
	check_why(r, ret == 0, "ibv_destroy_qp of the flushed QP succeeds", "%s", strerror(ret));
	ret = ibv_destroy_cq(c.scq);
	check_why(r, ret == 0, "ibv_destroy_cq (send CQ) succeeds", "%s", strerror(ret));
	ret = ibv_destroy_cq(c.rcq);
	check_why(r, ret == 0, "ibv_destroy_cq (recv CQ) succeeds", "%s", strerror(ret));
	buf_free(r, &b);
	if (chan_sync(r, "done"))
		return -1;
	return chan_sync(r, "end");
}

/* =============================================================================================
 * Subtest cq-overflow
 *
 * More completions than a CQ holds, with nobody polling: the device reports the overflow as an
 * IBV_EVENT_CQ_ERR async event on that CQ.  Two ways to fill a CQ of 4 (or what the provider
 * rounded it to): successful SENDs on the client's send CQ, and flushed receives on a receive CQ.
 */

#define CQO_CQE 4
#define CQO_EXTRA 4	/* completions beyond the CQ's capacity */

static int cq_overflow_server(struct role *r)
{
	struct conn_params p = conn_defaults();
	int n, cqe, arrived = 0, other = 0;
	struct ibv_wc wc;
	struct conn c;
	struct buf rb;

	if (buf_alloc(r, &rb, 64, IBV_ACCESS_LOCAL_WRITE) || conn_open(r, &c, &p, NULL) ||
	    chan_recv(r, 2, "sends %d into %d", &n, &cqe))
		return -1;
	if (n > p.max_recv_wr)
		return fail(r, "client wants %d receives, more than our %d", n, p.max_recv_wr);
	for (int i = 0; i < n; i++)
		if (post_recv(r, &c, i, rb.p, rb.len, rb.mr->lkey))
			return -1;
	if (chan_sync(r, "ready") || chan_sync(r, "done"))
		return -1;
	/*
	 * A SEND completes only once acknowledged, so the cqe + 1 completions that overflowed the
	 * client's CQ mean at least cqe + 1 SENDs arrived here.  What happens to the rest after
	 * the overflow is up to the device (the QP may go to ERR).
	 */
	while (poll_one(c.rcq, &wc, arrived <= cqe ? r->o->timeout * 1000 : 200) > 0) {
		if (wc.status == IBV_WC_SUCCESS && wc.byte_len == 16)
			arrived++;
		else
			other++;
	}
	check_why(r, arrived > cqe && other == 0, "the SENDs that overflowed the client's CQ "
		  "arrived", "%d of %d arrived, %d completed otherwise; wanted at least %d",
		  arrived, n, other, cqe + 1);
	conn_close(r, &c);
	buf_free(r, &rb);
	return chan_sync(r, "end");
}

static int cq_overflow_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct conn c;
	struct buf sb;
	int n;

	if (buf_alloc(r, &sb, 64, IBV_ACCESS_LOCAL_WRITE))
		return -1;

	/* 1: the send CQ overflows with successful SEND completions. */
	p.send_cqe = CQO_CQE;
	p.max_send_wr = 128;
	if (conn_open(r, &c, &p, NULL))
		return -1;
	n = c.scq->cqe + CQO_EXTRA;
	info(r, "send CQ: asked for %d CQEs, got %d; posting %d signaled SENDs", CQO_CQE,
	     c.scq->cqe, n);
	if (n > p.max_send_wr)
		return fail(r, "the provider rounded a %d-entry CQ up to %d: too big for this test",
			    CQO_CQE, c.scq->cqe);
	if (chan_send(r, "sends %d into %d", n, c.scq->cqe) || chan_sync(r, "ready"))
		return -1;
	for (int i = 0; i < n; i++)
		if (post_send(r, &c, i, IBV_WR_SEND, sb.p, 16, sb.mr->lkey, 0, 0))
			return -1;
	check(r, wait_async_event(r, IBV_EVENT_CQ_ERR, c.scq, r->o->timeout * 1000),
	      "IBV_EVENT_CQ_ERR on the send CQ after %d SENDs into %d CQEs", n, c.scq->cqe);
	if (chan_sync(r, "done"))
		return -1;
	conn_close(r, &c);

	/* 2: the receive CQ overflows with flushed receives (a local QP, never connected). */
	p = conn_defaults();
	p.recv_cqe = CQO_CQE;
	if (conn_create(r, &c, &p))
		return -1;
	n = c.rcq->cqe + CQO_EXTRA;
	info(r, "recv CQ: asked for %d CQEs, got %d; flushing %d receives", CQO_CQE, c.rcq->cqe, n);
	if (n > p.max_recv_wr)
		return fail(r, "the provider rounded a %d-entry CQ up to %d: too big for this test",
			    CQO_CQE, c.rcq->cqe);
	for (int i = 0; i < n; i++)
		if (post_recv(r, &c, i, sb.p, sb.len, sb.mr->lkey))
			return -1;
	if (modify_to_err(r, &c))
		return -1;
	check(r, wait_async_event(r, IBV_EVENT_CQ_ERR, c.rcq, r->o->timeout * 1000),
	      "IBV_EVENT_CQ_ERR on the recv CQ after flushing %d receives into %d CQEs", n,
	      c.rcq->cqe);
	conn_close(r, &c);
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * Subtest send-sizes
 *
 * SEND/RECV of 0, 1, 4095, 4096, 4097, 64 KiB and 1 MiB at path MTU 256 and 4096, every byte
 * checked, and nothing written past the message; then SEND with immediate (0 and 4097 bytes),
 * where the receive CQE must carry IBV_WC_WITH_IMM and the value.
 */

static const uint32_t ss_sizes[] = { 0, 1, 4095, 4096, 4097, 65536, 1048576 };
static const enum ibv_mtu ss_mtus[] = { IBV_MTU_256, IBV_MTU_4096 };
static const uint32_t ss_imm_sizes[] = { 0, 4097 };

#define SS_MAX (1u << 20)
#define SS_RBUF (SS_MAX + 4096)	/* the receive buffer: the largest message and a guard zone */
#define SS_IMM 0x1badcafe

/* The seed of the message's data: unique per message, so stale bytes never pass. */
static uint32_t ss_seed(int mtu, int k, bool imm)
{
	return (uint32_t)mtu * 131 + k * 7 + imm;
}

static int mtu_bytes(enum ibv_mtu m)
{
	return 128 << m;
}

static int send_sizes_server(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct buf rb;

	if (buf_alloc(r, &rb, SS_RBUF, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	for (size_t m = 0; m < ARRAY_SIZE(ss_mtus); m++) {
		struct conn c;
		int n_plain = ARRAY_SIZE(ss_sizes);

		p.mtu = ss_mtus[m];
		if (conn_open(r, &c, &p, NULL))
			return -1;
		if (c.mtu != ss_mtus[m]) {
			skip(r, "path MTU %d: a port's active MTU is only %d",
			     mtu_bytes(ss_mtus[m]), mtu_bytes(c.mtu));
			conn_close(r, &c);
			continue;
		}
		for (int k = 0; k < n_plain + (int)ARRAY_SIZE(ss_imm_sizes); k++) {
			bool imm = k >= n_plain;
			uint32_t len = imm ? ss_imm_sizes[k - n_plain] : ss_sizes[k];
			uint32_t seed = ss_seed(ss_mtus[m], k, imm);
			struct ibv_wc wc;
			ssize_t bad, over;
			char what[160];
			bool flags_ok;

			if (len > r->port.max_msg_sz) {
				skip(r, "%u bytes: more than the port's max_msg_sz", len);
				continue;
			}
			memset(rb.p, 0xa5, rb.len);
			if (post_recv(r, &c, k, rb.p, rb.len, rb.mr->lkey) ||
			    chan_sync(r, "ready"))
				return -1;
			if (!expect_wc(r, &c, c.rcq, &wc, k, IBV_WC_SUCCESS, "MTU %d, %sSEND of %u "
				       "bytes", mtu_bytes(c.mtu), imm ? "immediate " : "", len)) {
				if (chan_sync(r, "next"))
					return -1;
				continue;
			}
			bad = find_pattern_mismatch(rb.p, len, seed);
			over = find_not_byte(rb.p + len, rb.len - len, 0xa5);
			snprintf(what, sizeof(what), "MTU %d, %u bytes: RECV, byte_len right, "
				 "every byte right, nothing written past the message",
				 mtu_bytes(c.mtu), len);
			check_why(r, wc.opcode == IBV_WC_RECV && wc.byte_len == len && bad < 0 &&
				     over < 0, what, "%s, byte_len %u, first bad byte %zd, "
				  "first byte written past the message +%zd",
				  opcode_str(wc.opcode), wc.byte_len, bad, over);
			if (imm)
				flags_ok = (wc.wc_flags & IBV_WC_WITH_IMM) &&
					   ntohl(wc.imm_data) == SS_IMM;
			else
				flags_ok = !(wc.wc_flags & IBV_WC_WITH_IMM);
			snprintf(what, sizeof(what), "MTU %d, %u bytes: %s", mtu_bytes(c.mtu), len,
				 imm ? "IBV_WC_WITH_IMM with imm_data 0x1badcafe" :
				       "no IBV_WC_WITH_IMM");
			check_why(r, flags_ok, what, "wc_flags 0x%x, imm_data 0x%x", wc.wc_flags,
				  ntohl(wc.imm_data));
			if (chan_sync(r, "next"))
				return -1;
		}
		conn_close(r, &c);
	}
	buf_free(r, &rb);
	return chan_sync(r, "end");
}

static int send_sizes_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct buf sb;

	if (buf_alloc(r, &sb, SS_MAX, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	for (size_t m = 0; m < ARRAY_SIZE(ss_mtus); m++) {
		struct conn c;
		int n_plain = ARRAY_SIZE(ss_sizes);

		p.mtu = ss_mtus[m];
		if (conn_open(r, &c, &p, NULL))
			return -1;
		if (c.mtu != ss_mtus[m]) {
			skip(r, "path MTU %d: a port's active MTU is only %d",
			     mtu_bytes(ss_mtus[m]), mtu_bytes(c.mtu));
			conn_close(r, &c);
			continue;
		}
		for (int k = 0; k < n_plain + (int)ARRAY_SIZE(ss_imm_sizes); k++) {
			bool imm = k >= n_plain;
			uint32_t len = imm ? ss_imm_sizes[k - n_plain] : ss_sizes[k];
			struct ibv_sge sge = { .addr = (uintptr_t)sb.p, .length = len,
					       .lkey = sb.mr->lkey };
			struct ibv_send_wr wr = {
				.wr_id = k,
				.sg_list = len ? &sge : NULL,
				.num_sge = len ? 1 : 0,
				.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
				.send_flags = IBV_SEND_SIGNALED,
				.imm_data = htonl(SS_IMM),
			}, *bad;
			struct ibv_wc wc;
			int ret;

			if (len > r->port.max_msg_sz) {
				skip(r, "%u bytes: more than the port's max_msg_sz", len);
				continue;
			}
			fill_pattern(sb.p, len, ss_seed(ss_mtus[m], k, imm));
			if (chan_sync(r, "ready"))
				return -1;
			ret = ibv_post_send(c.qp, &wr, &bad);
			if (ret)
				return fail(r, "ibv_post_send(%u bytes): %s", len, strerror(ret));
			if (expect_wc(r, &c, c.scq, &wc, k, IBV_WC_SUCCESS, "MTU %d, %sSEND of %u "
				      "bytes", mtu_bytes(c.mtu), imm ? "immediate " : "", len))
				check(r, wc.opcode == IBV_WC_SEND, "MTU %d, %u bytes: send "
				      "completion opcode %s", mtu_bytes(c.mtu), len,
				      opcode_str(wc.opcode));
			if (chan_sync(r, "next"))
				return -1;
		}
		conn_close(r, &c);
	}
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * Subtest rdma-rw
 *
 * RDMA WRITE gathering three SGEs at odd addresses and lengths, to an odd remote address; RDMA
 * READ of the same bytes scattered into two SGEs at other odd addresses.  The READ must return
 * the written bytes, nothing around the SGEs may change, and the server's memory must hold the
 * bytes and nothing else (it sends a fingerprint of the region and checks the rest itself).
 */

#define RW_LEN		(64 * 1024)
#define RW_ROFF		333	/* odd remote offset */

static const struct { uint32_t off, len; } rw_write_sges[] = {
	{ 1, 3 }, { 4099, 4093 }, { 9001, 1001 },	/* 5097 bytes */
};
static const struct { uint32_t off, len; } rw_read_sges[] = {
	{ 7, 2000 }, { 20003, 3097 },
};

static uint32_t rw_total(void)
{
	uint32_t n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(rw_write_sges); i++)
		n += rw_write_sges[i].len;
	return n;
}

static int rdma_rw_server(struct role *r)
{
	struct conn_params p = conn_defaults();
	uint32_t total = rw_total();
	struct conn c;
	struct buf t;
	uint8_t *orig;
	ssize_t before, after;
	bool ok;

	if (buf_alloc(r, &t, RW_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_READ))
		return -1;
	fill_pattern(t.p, t.len, 0x2222);
	orig = malloc(t.len);
	if (!orig)
		return fail(r, "out of memory");
	memcpy(orig, t.p, t.len);
	if (conn_open(r, &c, &p, NULL) ||
	    chan_send(r, "target %" PRIx64 " %x", (uint64_t)(uintptr_t)t.p, t.mr->rkey) ||
	    chan_sync(r, "written"))
		return -1;
	/* The client checks the written bytes by fingerprint; we check everything around them. */
	before = find_diff(t.p, orig, RW_ROFF);
	after = find_diff(t.p + RW_ROFF + total, orig + RW_ROFF + total, t.len - RW_ROFF - total);
	ok = check_why(r, before < 0 && after < 0, "RDMA WRITE changed nothing outside its range",
		       "first change before it at +%zd, after it at +%zd", before, after);
	memcpy(orig, t.p, t.len);	/* from now on nothing may change */
	if (chan_send(r, "fingerprint %x", fnv1a(t.p + RW_ROFF, total)) ||
	    chan_send_verdict(r, ok) || chan_sync(r, "read"))
		return -1;
	check(r, find_diff(t.p, orig, t.len) < 0, "RDMA READ left our memory alone");
	conn_close(r, &c);
	buf_free(r, &t);
	free(orig);
	return chan_sync(r, "end");
}

static int rdma_rw_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct ibv_sge wsge[ARRAY_SIZE(rw_write_sges)], rsge[ARRAY_SIZE(rw_read_sges)];
	uint32_t total = rw_total(), rkey, fp;
	uint8_t *expect, *rorig;
	struct buf lb, rd;
	struct ibv_wc wc;
	struct conn c;
	uint64_t raddr;
	size_t pos;
	bool server_ok;
	int ret;

	if (r->max_sge < 3 || r->dev.max_sge_rd < 2)
		return fail(r, "the device has max_sge %d, max_sge_rd %d; this test needs 3 and 2",
			    r->dev.max_sge, r->dev.max_sge_rd);
	if (buf_alloc(r, &lb, RW_LEN, IBV_ACCESS_LOCAL_WRITE) ||
	    buf_alloc(r, &rd, RW_LEN, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	fill_pattern(lb.p, lb.len, 0x3333);
	fill_pattern(rd.p, rd.len, 0x4444);
	expect = malloc(total);
	rorig = malloc(rd.len);
	if (!expect || !rorig)
		return fail(r, "out of memory");
	memcpy(rorig, rd.p, rd.len);

	/* The bytes the WRITE gathers, in order: what the remote range must hold afterwards. */
	pos = 0;
	for (size_t i = 0; i < ARRAY_SIZE(rw_write_sges); i++) {
		wsge[i] = (struct ibv_sge){ .addr = (uintptr_t)lb.p + rw_write_sges[i].off,
					    .length = rw_write_sges[i].len, .lkey = lb.mr->lkey };
		memcpy(expect + pos, lb.p + rw_write_sges[i].off, rw_write_sges[i].len);
		pos += rw_write_sges[i].len;
	}
	pos = 0;
	for (size_t i = 0; i < ARRAY_SIZE(rw_read_sges); i++) {
		rsge[i] = (struct ibv_sge){ .addr = (uintptr_t)rd.p + rw_read_sges[i].off,
					    .length = rw_read_sges[i].len, .lkey = rd.mr->lkey };
		pos += rw_read_sges[i].len;
	}
	if (pos != total)
		return fail(r, "internal: READ SGEs cover %zu bytes, WRITE SGEs %u", pos, total);

	if (conn_open(r, &c, &p, NULL) ||
	    chan_recv(r, 2, "target %" SCNx64 " %x", &raddr, &rkey))
		return -1;

	{
		struct ibv_send_wr wr = {
			.wr_id = 1, .sg_list = wsge, .num_sge = ARRAY_SIZE(wsge),
			.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = raddr + RW_ROFF, .rkey = rkey },
		}, *bad;

		ret = ibv_post_send(c.qp, &wr, &bad);
		if (ret)
			return fail(r, "ibv_post_send(RDMA WRITE): %s", strerror(ret));
	}
	if (expect_wc(r, &c, c.scq, &wc, 1, IBV_WC_SUCCESS,
		      "RDMA WRITE of %u bytes from 3 SGEs to remote +%d", total, RW_ROFF))
		check(r, wc.opcode == IBV_WC_RDMA_WRITE, "RDMA WRITE CQE opcode %s",
		      opcode_str(wc.opcode));
	if (chan_sync(r, "written") || chan_recv(r, 1, "fingerprint %x", &fp) ||
	    chan_recv_verdict(r, &server_ok))
		return -1;
	check_why(r, fp == fnv1a(expect, total), "the server's memory holds the gathered bytes",
		  "fingerprint 0x%08x, wanted 0x%08x", fp, fnv1a(expect, total));
	check(r, server_ok, "the server found nothing written outside the range");

	{
		struct ibv_send_wr wr = {
			.wr_id = 2, .sg_list = rsge, .num_sge = ARRAY_SIZE(rsge),
			.opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = raddr + RW_ROFF, .rkey = rkey },
		}, *bad;

		ret = ibv_post_send(c.qp, &wr, &bad);
		if (ret)
			return fail(r, "ibv_post_send(RDMA READ): %s", strerror(ret));
	}
	if (expect_wc(r, &c, c.scq, &wc, 2, IBV_WC_SUCCESS,
		      "RDMA READ of %u bytes from remote +%d into 2 SGEs", total, RW_ROFF)) {
		ssize_t bad_data = -1, bad_around;
		uint8_t *scattered = rorig;	/* rebuild what rd must now hold */

		check(r, wc.opcode == IBV_WC_RDMA_READ, "RDMA READ CQE opcode %s",
		      opcode_str(wc.opcode));
		pos = 0;
		for (size_t i = 0; i < ARRAY_SIZE(rw_read_sges); i++) {
			ssize_t d = find_diff(rd.p + rw_read_sges[i].off, expect + pos,
					      rw_read_sges[i].len);

			if (d >= 0 && bad_data < 0)
				bad_data = (ssize_t)pos + d;
			memcpy(scattered + rw_read_sges[i].off, expect + pos, rw_read_sges[i].len);
			pos += rw_read_sges[i].len;
		}
		bad_around = find_diff(rd.p, scattered, rd.len);
		check_why(r, bad_data < 0, "RDMA READ returned the written bytes",
			  "first bad byte at +%zd", bad_data);
		check_why(r, bad_around < 0, "RDMA READ wrote nothing outside its SGEs",
			  "first difference at +%zd", bad_around);
	}
	if (chan_sync(r, "read"))
		return -1;
	conn_close(r, &c);
	buf_free(r, &lb);
	buf_free(r, &rd);
	free(expect);
	free(rorig);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * Subtest atomics
 *
 * FETCH_AND_ADD three times on a remote counter (100 -> 115, returning 100, 105, 110), then
 * COMPARE_AND_SWAP that matches (115 -> 1000) and one that does not (returns 1000, no change);
 * the server checks the final value and that the neighbouring words are untouched.  Finally an
 * atomic to a misaligned address is refused: REM_INV_REQ_ERR.
 * The counter is in the target's host byte order, as rxe and pib implement it.
 */

#define AT_COUNTER_OFF 64	/* the counter, between two guard words */

static int atomics_server(struct role *r)
{
	struct conn_params p = conn_defaults();
	uint64_t *w;
	struct conn c;
	struct buf t;
	bool ok;

	if (r->dev.atomic_cap == IBV_ATOMIC_NONE) {
		skip(r, "the device has no atomics (atomic_cap NONE)");
		return chan_sync(r, "end");
	}
	if (buf_alloc(r, &t, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC))
		return -1;
	w = (uint64_t *)(t.p + AT_COUNTER_OFF);
	w[-1] = 0x1111111111111111ull;
	w[0] = 100;
	w[1] = 0x2222222222222222ull;
	if (conn_open(r, &c, &p, NULL) ||
	    chan_send(r, "target %" PRIx64 " %x", (uint64_t)(uintptr_t)t.p, t.mr->rkey) ||
	    chan_sync(r, "done"))
		return -1;
	ok = check_why(r, w[0] == 1000 && w[-1] == 0x1111111111111111ull &&
			  w[1] == 0x2222222222222222ull,
		       "the counter is 1000 and the words around it are untouched",
		       "counter %" PRIu64 ", guard words %016" PRIx64 " %016" PRIx64,
		       w[0], w[-1], w[1]);
	if (chan_send_verdict(r, ok) || chan_sync(r, "next"))
		return -1;
	conn_close(r, &c);
	buf_free(r, &t);
	return chan_sync(r, "end");
}

static int post_atomic(struct role *r, struct conn *c, uint64_t wr_id, enum ibv_wr_opcode op,
		       uint64_t *result, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		       uint64_t compare_add, uint64_t swap)
{
	struct ibv_sge sge = { .addr = (uintptr_t)result, .length = 8, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.atomic = { .remote_addr = raddr, .rkey = rkey, .compare_add = compare_add,
			       .swap = swap },
	}, *bad;
	int ret = ibv_post_send(c->qp, &wr, &bad);

	return ret ? fail(r, "ibv_post_send(atomic): %s", strerror(ret)) : 0;
}

static int atomics_client(struct role *r)
{
	static const struct {
		enum ibv_wr_opcode op;
		uint64_t compare_add, swap, returns;
		const char *what;
	} steps[] = {
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, 5, 0, 100, "FETCH_ADD +5" },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, 5, 0, 105, "FETCH_ADD +5" },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, 5, 0, 110, "FETCH_ADD +5" },
		{ IBV_WR_ATOMIC_CMP_AND_SWP, 115, 1000, 115, "CMP_SWAP 115 -> 1000 (matches)" },
		{ IBV_WR_ATOMIC_CMP_AND_SWP, 115, 7, 1000, "CMP_SWAP 115 -> 7 (does not match)" },
	};
	struct conn_params p = conn_defaults();
	uint64_t raddr, *res;
	uint32_t rkey;
	struct conn c;
	struct ibv_wc wc;
	struct buf lb;
	bool server_ok;

	if (r->dev.atomic_cap == IBV_ATOMIC_NONE) {
		skip(r, "the device has no atomics (atomic_cap NONE)");
		return chan_sync(r, "end");
	}
	if (buf_alloc(r, &lb, 4096, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	res = (uint64_t *)lb.p;
	if (conn_open(r, &c, &p, NULL) ||
	    chan_recv(r, 2, "target %" SCNx64 " %x", &raddr, &rkey))
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		res[i] = 0xdeadbeefdeadbeefull;
		if (post_atomic(r, &c, i, steps[i].op, &res[i], lb.mr->lkey,
				raddr + AT_COUNTER_OFF, rkey, steps[i].compare_add, steps[i].swap))
			return -1;
		if (expect_wc(r, &c, c.scq, &wc, i, IBV_WC_SUCCESS, "%s", steps[i].what))
			check(r, res[i] == steps[i].returns &&
				 wc.opcode == (steps[i].op == IBV_WR_ATOMIC_CMP_AND_SWP ?
					       IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD),
			      "%s returned the old value %" PRIu64 " (wanted %" PRIu64 "), "
			      "completion opcode %s", steps[i].what, res[i], steps[i].returns,
			      opcode_str(wc.opcode));
	}
	if (chan_sync(r, "done") || chan_recv_verdict(r, &server_ok))
		return -1;
	check(r, server_ok, "the server found the counter at 1000 and its neighbours untouched");

	/*
	 * Atomics need 8-byte aligned remote addresses.  The provider may refuse the WR at once
	 * (ibv_post_send fails with EINVAL: rxe's does); if it posts it, the responder must refuse
	 * it with an invalid request NAK.
	 */
	{
		struct ibv_sge sge = { .addr = (uintptr_t)&res[8], .length = 8,
				       .lkey = lb.mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = 99, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED,
			.wr.atomic = { .remote_addr = raddr + AT_COUNTER_OFF + 4, .rkey = rkey,
				       .compare_add = 1 },
		}, *bad;
		int ret = ibv_post_send(c.qp, &wr, &bad);

		if (ret == EINVAL)
			check(r, true, "FETCH_ADD to a misaligned address: ibv_post_send "
			      "refuses it");
		else if (ret)
			check(r, false, "FETCH_ADD to a misaligned address: ibv_post_send: %s",
			      strerror(ret));
		else
			expect_wc(r, &c, c.scq, &wc, 99, IBV_WC_REM_INV_REQ_ERR,
				  "FETCH_ADD to a misaligned address");
	}
	if (chan_sync(r, "next"))
		return -1;
	conn_close(r, &c);
	buf_free(r, &lb);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * Subtest ud-qkey
 *
 * UD QPs.  A SEND carrying the receiver's Q_Key is delivered: the receive buffer holds 40 bytes
 * of GRH space (IBV_WC_GRH set only when a GRH came, as on RoCE) and then the message, byte_len
 * counts both, and the CQE names the sender (src_qp, slid).  A SEND with a wrong Q_Key is
 * dropped by the receiving QP: its posted receive stays posted, no completion comes, the port's
 * Q_Key violation counter (PortInfo:Q_KeyViolations, ibv_query_port's qkey_viol_cntr) rises by
 * one, and so does pib's rx_drop_qkey hw_counter.  A right SEND afterwards takes the very
 * receive the dropped one left.  The sender's completions are all SUCCESS: a UD requester
 * never learns what became of a datagram.
 *
 * Devices without rx_drop_qkey get a SKIP for that one check.  counters/port_rcv_errors is no
 * substitute: PortRcvErrors counts link-level errors (malformed packets, buffer overruns), not
 * Q_Key violations, which the transport layer checks.
 */

#define UD_GRH		40		/* the GRH space in front of every UD receive */
#define UD_QKEY		0x1ee7c0deu	/* the server QP's Q_Key; the high bit is clear ... */
#define UD_BAD_QKEY	(UD_QKEY ^ 0x00a50000u)	/* ... here too: a plain wrong key */
#define UD_CLIENT_QKEY	0x0badf00du	/* the client QP's own Q_Key, which never matches */
#define UD_SLOT		(UD_GRH + 4096 + 256)	/* one receive: GRH, an MTU, a guard zone */

struct ud {
	struct ibv_cq *cq;	/* sends and receives */
	struct ibv_qp *qp;
	struct ibv_ah *ah;	/* to the peer's QP (client only) */
};

/* A UD QP in RTS with the given Q_Key, and one CQ for both queues. */
static int ud_create(struct role *r, struct ud *u, uint32_t qkey)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = r->o->ib_port,
		.qkey = qkey,
	};
	int ret;

	memset(u, 0, sizeof(*u));
	u->cq = ibv_create_cq(r->ctx, 64, NULL, NULL, 0);
	if (!u->cq)
		return fail(r, "ibv_create_cq: %s", strerror(errno));
	init.send_cq = init.recv_cq = u->cq;
	u->qp = ibv_create_qp(r->pd, &init);
	if (!u->qp)
		return fail(r, "ibv_create_qp(UD): %s", strerror(errno));
	ret = ibv_modify_qp(u->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					  IBV_QP_QKEY);
	if (ret)
		return fail(r, "ibv_modify_qp(UD, RESET -> INIT): %s", strerror(ret));
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	ret = ibv_modify_qp(u->qp, &attr, IBV_QP_STATE);
	if (ret)
		return fail(r, "ibv_modify_qp(UD, INIT -> RTR): %s", strerror(ret));
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = nrand48(r->seed) & 0xffffff;
	ret = ibv_modify_qp(u->qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
	if (ret)
		return fail(r, "ibv_modify_qp(UD, RTR -> RTS): %s", strerror(ret));
	return 0;
}

/* Tell the peer our QP (the format of conn_exchange), learn its. */
static int ud_exchange(struct role *r, struct ud *u, struct qp_info *remote)
{
	struct conn c = { .qp = u->qp };

	return conn_exchange(r, &c, remote);
}

static int ud_make_ah(struct role *r, struct ud *u, const struct qp_info *remote)
{
	struct ibv_ah_attr ah = {
		.dlid = remote->lid,
		.sl = 0,
		.port_num = r->o->ib_port,
	};

	if (r->gid_idx >= 0) {
		ah.is_global = 1;
		ah.grh.dgid = remote->gid;
		ah.grh.sgid_index = r->gid_idx;
		ah.grh.hop_limit = 1;
	}
	u->ah = ibv_create_ah(r->pd, &ah);
	return u->ah ? 0 : fail(r, "ibv_create_ah(DLID 0x%04x): %s", remote->lid, strerror(errno));
}

static void ud_destroy(struct role *r, struct ud *u)
{
	int ret;

	if (u->ah && (ret = ibv_destroy_ah(u->ah)))
		fail(r, "ibv_destroy_ah: %s", strerror(ret));
	if (u->qp && (ret = ibv_destroy_qp(u->qp)))
		fail(r, "ibv_destroy_qp(UD): %s", strerror(ret));
	if (u->cq && (ret = ibv_destroy_cq(u->cq)))
		fail(r, "ibv_destroy_cq: %s", strerror(ret));
	memset(u, 0, sizeof(*u));
}

/*
 * A port counter from sysfs: /sys/class/infiniband/DEV/ports/PORT/GROUP/NAME.  Returns 1 with
 * *val, 0 when the device has no such file, -1 on any other failure (reported).
 */
static int read_port_counter(struct role *r, const char *group, const char *name, uint64_t *val)
{
	char path[256];
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/%s/%s",
		 ibv_get_device_name(r->ctx->device), r->o->ib_port, group, name);
	f = fopen(path, "r");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		return fail(r, "cannot open %s: %s", path, strerror(errno));
	}
	n = fscanf(f, "%" SCNu64, val);
	fclose(f);
	return n == 1 ? 1 : fail(r, "%s does not hold a number", path);
}

static int qkey_viol_cntr(struct role *r, uint32_t *val)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(r->ctx, r->o->ib_port, &pa))
		return fail(r, "ibv_query_port(%d) failed", r->o->ib_port);
	*val = pa.qkey_viol_cntr;
	return 0;
}

/* The message of SEND number k: its length (at most an MTU) and its data's seed. */
static uint32_t ud_len(int mtu_bytes, int k)
{
	return MIN(1000u, (uint32_t)mtu_bytes) - 3 * k;
}

static uint32_t ud_seed(int k)
{
	return 0x0d0d00 + k;
}

/*
 * Reap the receive of SEND k, which must have landed in the receive wr_id at slot, and check
 * everything about it; remote is the sender.  Returns whether every check passed.
 */
static bool ud_check_recv(struct role *r, struct ud *u, uint8_t *slot, uint64_t wr_id, int k,
			  uint32_t len, const struct qp_info *remote)
{
	struct conn c = { .qp = u->qp };
	bool grh = r->gid_idx >= 0;	/* the sender puts a GRH in exactly when we do */
	struct ibv_wc wc;
	ssize_t bad, over;
	char what[160];
	bool ok;

	if (!expect_wc(r, &c, u->cq, &wc, wr_id, IBV_WC_SUCCESS, "SEND %d (right Q_Key) "
		       "completes receive %" PRIu64, k, wr_id))
		return false;
	bad = find_pattern_mismatch(slot + UD_GRH, len, ud_seed(k));
	over = find_not_byte(slot + UD_GRH + len, UD_SLOT - UD_GRH - len, 0xa5);
	snprintf(what, sizeof(what), "SEND %d: RECV of 40 + %u bytes, the message intact after "
		 "the GRH space, nothing written past it", k, len);
	ok = check_why(r, wc.opcode == IBV_WC_RECV && wc.byte_len == UD_GRH + len && bad < 0 &&
			  over < 0, what, "%s, byte_len %u, first bad byte %zd, first byte "
		       "written past the message +%zd", opcode_str(wc.opcode), wc.byte_len, bad,
		       over);
	snprintf(what, sizeof(what), "SEND %d: the CQE names the sender: src_qp 0x%x, slid "
		 "0x%04x", k, remote->qpn, remote->lid);
	ok &= check_why(r, wc.src_qp == remote->qpn && wc.slid == remote->lid, what,
			"src_qp 0x%x slid 0x%04x", wc.src_qp, wc.slid);
	snprintf(what, sizeof(what), "SEND %d: %s", k, grh ? "IBV_WC_GRH (RoCE: a GRH came)" :
		 "no IBV_WC_GRH (LID routed: no GRH came)");
	ok &= check_why(r, !!(wc.wc_flags & IBV_WC_GRH) == grh, what, "wc_flags 0x%x",
			wc.wc_flags);
	return ok;
}

/* The three SENDs: right Q_Key, wrong Q_Key, right Q_Key. */
#define UD_SENDS 3

static int ud_qkey_server(struct role *r)
{
	struct qp_info remote;
	uint64_t drop0 = 0, drop1 = 0;
	uint32_t viol0 = 0, viol1 = 0;
	int have_drop, have_drop1;
	uint32_t len0, len2;
	struct buf rb;
	struct ud u;
	bool ok;

	if (buf_alloc(r, &rb, 2 * UD_SLOT, IBV_ACCESS_LOCAL_WRITE) ||
	    ud_create(r, &u, UD_QKEY) || ud_exchange(r, &u, &remote))
		return -1;
	len0 = ud_len(mtu_bytes(MIN(r->port.active_mtu, remote.active_mtu)), 0);
	len2 = ud_len(mtu_bytes(MIN(r->port.active_mtu, remote.active_mtu)), 2);

	/* 1: the right Q_Key. */
	memset(rb.p, 0xa5, rb.len);
	if (post_recv_qp(r, u.qp, 1, rb.p, UD_SLOT, rb.mr->lkey) || chan_sync(r, "ready 0"))
		return -1;
	ok = ud_check_recv(r, &u, rb.p, 1, 0, len0, &remote);

	/* 2: a wrong Q_Key, with a receive posted that it must not take. */
	if (post_recv_qp(r, u.qp, 2, rb.p + UD_SLOT, UD_SLOT, rb.mr->lkey))
		return -1;
	have_drop = read_port_counter(r, "hw_counters", "rx_drop_qkey", &drop0);
	if (have_drop < 0 || qkey_viol_cntr(r, &viol0) || chan_sync(r, "ready 1") ||
	    chan_sync(r, "sent 1"))
		return -1;
	/* The client saw its SEND complete: the datagram has left; give it time to arrive. */
	ok &= expect_no_wc(r, u.cq, 1000, "the SEND with a wrong Q_Key is dropped: no receive "
			   "completion");

	/* 3: the right Q_Key again: it takes the receive the dropped SEND left. */
	if (chan_sync(r, "ready 2"))
		return -1;
	ok &= ud_check_recv(r, &u, rb.p + UD_SLOT, 2, 2, len2, &remote);

	/* The drop is counted, exactly once; every packet of the exchange has been handled. */
	have_drop1 = read_port_counter(r, "hw_counters", "rx_drop_qkey", &drop1);
	if (have_drop1 < 0 || qkey_viol_cntr(r, &viol1))
		return -1;
	ok &= check_why(r, viol1 == viol0 + 1, "the port's Q_Key violation counter "
			"(ibv_query_port qkey_viol_cntr) rose by 1", "%u -> %u", viol0, viol1);
	if (have_drop && have_drop1)
		ok &= check_why(r, drop1 == drop0 + 1, "hw_counters/rx_drop_qkey rose by 1",
				"%" PRIu64 " -> %" PRIu64, drop0, drop1);
	else
		skip(r, "%s has no ports/%d/hw_counters/rx_drop_qkey: the drop counter is not "
		     "checked (qkey_viol_cntr was)", ibv_get_device_name(r->ctx->device),
		     r->o->ib_port);
	if (chan_send_verdict(r, ok))
		return -1;
	ud_destroy(r, &u);
	buf_free(r, &rb);
	return chan_sync(r, "end");
}

static int ud_qkey_client(struct role *r)
{
	struct qp_info remote;
	struct buf sb;
	struct ud u;
	bool server_ok;

	if (buf_alloc(r, &sb, 4096, IBV_ACCESS_LOCAL_WRITE) ||
	    ud_create(r, &u, UD_CLIENT_QKEY) || ud_exchange(r, &u, &remote) ||
	    ud_make_ah(r, &u, &remote))
		return -1;
	for (int k = 0; k < UD_SENDS; k++) {
		uint32_t len = ud_len(mtu_bytes(MIN(r->port.active_mtu, remote.active_mtu)), k);
		uint32_t qkey = k == 1 ? UD_BAD_QKEY : UD_QKEY;
		struct ibv_sge sge = { .addr = (uintptr_t)sb.p, .length = len,
				       .lkey = sb.mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = 10 + k, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.ud = { .ah = u.ah, .remote_qpn = remote.qpn, .remote_qkey = qkey },
		}, *bad;
		struct conn c = { .qp = u.qp };
		struct ibv_wc wc;
		char ready[16];
		int ret;

		fill_pattern(sb.p, len, ud_seed(k));
		snprintf(ready, sizeof(ready), "ready %d", k);
		if (chan_sync(r, ready))
			return -1;
		ret = ibv_post_send(u.qp, &wr, &bad);
		if (ret)
			return fail(r, "ibv_post_send(UD SEND): %s", strerror(ret));
		if (expect_wc(r, &c, u.cq, &wc, 10 + k, IBV_WC_SUCCESS, "UD SEND %d of %u bytes "
			      "with Q_Key 0x%08x (%s)", k, len, qkey, k == 1 ? "wrong" : "right"))
			check(r, wc.opcode == IBV_WC_SEND, "UD SEND %d: completion opcode %s", k,
			      opcode_str(wc.opcode));
		if (k == 1 && chan_sync(r, "sent 1"))
			return -1;
	}
	if (chan_recv_verdict(r, &server_ok))
		return -1;
	check(r, server_ok, "the server got the right SENDs intact, dropped the wrong one and "
	      "counted it");
	ud_destroy(r, &u);
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * Subtest srq-limit
 *
 * Two RC QPs on one SRQ (and one receive CQ).  The SRQ holds SRQ_N receives and is armed with
 * ibv_modify_srq(srq_limit = SRQ_L).  The client SENDs on both QPs in turn: after SRQ_N - SRQ_L
 * messages SRQ_L receives are left, not yet below the limit, so no event; one more and the
 * device raises IBV_EVENT_SRQ_LIMIT_REACHED, once, and disarms: ibv_query_srq says srq_limit 0
 * and the last messages raise nothing.  Every message lands intact in the receive it took, and
 * its CQE names the QP it came through.
 */

#define SRQ_N		16	/* receives posted */
#define SRQ_L		4	/* the limit */
#define SRQ_SLOT	2048	/* one receive's buffer */
#define SRQ_QPS		2

/* Message k: a length of its own (so the receiver knows k from byte_len), its own data. */
static uint32_t srq_len(int k)
{
	return 100 + 61 * k;
}

static uint32_t srq_seed(int k)
{
	return 0x5e0000 + k;
}

static int srq_query_limit(struct role *r, struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	int ret = ibv_query_srq(srq, attr);

	return ret ? fail(r, "ibv_query_srq: %s", strerror(ret)) : 0;
}

/*
 * Reap n receive completions from the shared CQ and check each: SUCCESS, a RECV of one of the
 * client's messages (k from byte_len) not seen before, through the QP it was sent on, its bytes
 * in the receive's buffer and nothing past them.  Returns whether all were right.
 */
static bool srq_reap(struct role *r, struct conn *c, struct ibv_cq *rcq, struct buf *rb, int n,
		     bool *seen)
{
	bool all = true;

	for (int i = 0; i < n; i++) {
		struct ibv_wc wc;
		int got = poll_one(rcq, &wc, r->o->timeout * 1000);
		uint32_t k = 0;
		bool known;
		ssize_t bad = -2, over = -2;
		uint8_t *slot;
		char what[128];

		if (got <= 0)
			return check(r, false, "only %d of %d receive completions came", i, n);
		known = wc.status == IBV_WC_SUCCESS && wc.byte_len >= srq_len(0) &&
			(wc.byte_len - srq_len(0)) % 61 == 0 &&
			(k = (wc.byte_len - srq_len(0)) / 61) < SRQ_N && wc.wr_id < SRQ_N;
		if (known) {
			slot = rb->p + wc.wr_id * SRQ_SLOT;
			bad = find_pattern_mismatch(slot, wc.byte_len, srq_seed(k));
			over = find_not_byte(slot + wc.byte_len, SRQ_SLOT - wc.byte_len, 0xa5);
			snprintf(what, sizeof(what), "message %u (%u bytes) arrived intact through "
				 "QP %u, in SRQ receive %" PRIu64, k, srq_len(k), k % SRQ_QPS,
				 wc.wr_id);
		} else {
			snprintf(what, sizeof(what), "receive completion %d is one of the messages",
				 i);
		}
		all &= check_why(r, known && wc.opcode == IBV_WC_RECV && !seen[k] &&
				    wc.qp_num == c[k % SRQ_QPS].qp->qp_num && bad < 0 && over < 0,
				 what,
				 "status %s, opcode %s, byte_len %u (message %u%s), wr_id %" PRIu64
				 ", qp 0x%x (wanted 0x%x), first bad byte %zd, first byte past it "
				 "+%zd", ibv_wc_status_str(wc.status), opcode_str(wc.opcode),
				 wc.byte_len, k, known && seen[k] ? ", again" : "", wc.wr_id,
				 wc.qp_num, c[k % SRQ_QPS].qp->qp_num, bad, over);
		if (known)
			seen[k] = true;
	}
	return all;
}

static int srq_limit_server(struct role *r)
{
	struct ibv_srq_init_attr init = { .attr = { .max_wr = SRQ_N, .max_sge = 1 } };
	struct conn_params p = conn_defaults();
	struct ibv_srq_attr attr = { .srq_limit = SRQ_L };
	bool seen[SRQ_N] = { false }, ok;
	struct conn c[SRQ_QPS];
	struct ibv_srq *srq;
	struct ibv_cq *rcq;
	struct buf rb;
	int ret, n;

	if (!r->dev.max_srq) {
		skip(r, "the device has no SRQs (max_srq 0)");
		return chan_send(r, "srq 0 0") ? -1 : chan_sync(r, "end");
	}
	if (chan_send(r, "srq %d %d", SRQ_N, SRQ_L))
		return -1;
	if (buf_alloc(r, &rb, SRQ_N * SRQ_SLOT, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	memset(rb.p, 0xa5, rb.len);
	srq = ibv_create_srq(r->pd, &init);
	if (!srq)
		return fail(r, "ibv_create_srq(%d WRs): %s", SRQ_N, strerror(errno));
	for (int i = 0; i < SRQ_N; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)rb.p + i * SRQ_SLOT, .length = SRQ_SLOT,
				       .lkey = rb.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		ret = ibv_post_srq_recv(srq, &wr, &bad);
		if (ret)
			return fail(r, "ibv_post_srq_recv(%d): %s", i, strerror(ret));
	}
	/* Armed once the receives are there (rxe refuses a limit above what is posted). */
	ret = ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT);
	if (!check_why(r, ret == 0, "ibv_modify_srq(srq_limit " STR(SRQ_L) ") arms the limit",
		       "%s", strerror(ret)))
		return -1;
	if (srq_query_limit(r, srq, &attr))
		return -1;
	check_why(r, attr.srq_limit == SRQ_L && attr.max_wr >= SRQ_N, "ibv_query_srq: srq_limit "
		  STR(SRQ_L) ", room for at least " STR(SRQ_N) " WRs", "srq_limit %u, max_wr %u",
		  attr.srq_limit, attr.max_wr);

	rcq = ibv_create_cq(r->ctx, 64, NULL, NULL, 0);
	if (!rcq)
		return fail(r, "ibv_create_cq: %s", strerror(errno));
	p.srq = srq;
	p.rcq = rcq;
	for (int q = 0; q < SRQ_QPS; q++)
		if (conn_open(r, &c[q], &p, NULL))
			return -1;
	if (chan_sync(r, "armed"))
		return -1;

	/* 1: down to the limit, not below it. */
	n = SRQ_N - SRQ_L;
	if (chan_sync(r, "sent 1"))
		return -1;
	ok = srq_reap(r, c, rcq, &rb, n, seen);
	ok &= check(r, !wait_async_event(r, IBV_EVENT_SRQ_LIMIT_REACHED, srq, 500),
		    "no SRQ limit event with " STR(SRQ_L) " receives left (not below the limit)");
	if (srq_query_limit(r, srq, &attr))
		return -1;
	ok &= check_why(r, attr.srq_limit == SRQ_L, "ibv_query_srq: still armed (srq_limit "
			STR(SRQ_L) ")", "srq_limit %u", attr.srq_limit);

	/* 2: one more, and fewer than the limit are left. */
	if (chan_sync(r, "checked 1") || chan_sync(r, "sent 2"))
		return -1;
	ok &= srq_reap(r, c, rcq, &rb, 1, seen);
	ok &= check(r, wait_async_event(r, IBV_EVENT_SRQ_LIMIT_REACHED, srq,
					r->o->timeout * 1000),
		    "IBV_EVENT_SRQ_LIMIT_REACHED with %d receives left, below the limit (acked)",
		    SRQ_L - 1);
	if (srq_query_limit(r, srq, &attr))
		return -1;
	ok &= check_why(r, attr.srq_limit == 0, "ibv_query_srq: srq_limit 0 after the event "
			"(disarmed)", "srq_limit %u", attr.srq_limit);

	/* 3: the rest: disarmed, so no second event. */
	n = SRQ_L - 1;
	if (chan_sync(r, "checked 2") || chan_sync(r, "sent 3"))
		return -1;
	ok &= srq_reap(r, c, rcq, &rb, n, seen);
	ok &= check(r, !wait_async_event(r, IBV_EVENT_SRQ_LIMIT_REACHED, srq, 500),
		    "no second SRQ limit event (the limit disarmed itself)");
	n = 0;
	for (int k = 0; k < SRQ_N; k++)
		n += seen[k];
	ok &= check_why(r, n == SRQ_N, "all " STR(SRQ_N) " messages arrived, each once, half "
			"through each QP", "%d of them", n);
	if (chan_send_verdict(r, ok) || chan_sync(r, "done"))
		return -1;
	for (int q = 0; q < SRQ_QPS; q++)
		conn_close(r, &c[q]);
	if ((ret = ibv_destroy_cq(rcq)))
		fail(r, "ibv_destroy_cq (shared recv CQ): %s", strerror(ret));
	if ((ret = ibv_destroy_srq(srq)))
		fail(r, "ibv_destroy_srq: %s", strerror(ret));
	buf_free(r, &rb);
	return chan_sync(r, "end");
}

/* Send messages first .. last - 1, each on QP k % SRQ_QPS, one at a time. */
static int srq_send(struct role *r, struct conn *c, struct buf *sb, int first, int last)
{
	for (int k = first; k < last; k++) {
		struct conn *q = &c[k % SRQ_QPS];
		struct ibv_wc wc;

		fill_pattern(sb->p, srq_len(k), srq_seed(k));
		if (post_send(r, q, k, IBV_WR_SEND, sb->p, srq_len(k), sb->mr->lkey, 0, 0))
			return -1;
		expect_wc(r, q, q->scq, &wc, k, IBV_WC_SUCCESS, "SEND %d (%u bytes) on QP %d", k,
			  srq_len(k), k % SRQ_QPS);
	}
	return 0;
}

static int srq_limit_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct conn c[SRQ_QPS];
	struct buf sb;
	bool server_ok;
	int n, l;

	if (chan_recv(r, 2, "srq %d %d", &n, &l))
		return -1;
	if (!n) {
		skip(r, "the server's device has no SRQs");
		return chan_sync(r, "end");
	}
	if (n > SRQ_N || l < 1 || l >= n)
		return fail(r, "the server wants %d messages and a limit of %d", n, l);
	if (buf_alloc(r, &sb, 4096, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	for (int q = 0; q < SRQ_QPS; q++)
		if (conn_open(r, &c[q], &p, NULL))
			return -1;
	if (chan_sync(r, "armed"))
		return -1;
	if (srq_send(r, c, &sb, 0, n - l) || chan_sync(r, "sent 1") ||
	    chan_sync(r, "checked 1") ||
	    srq_send(r, c, &sb, n - l, n - l + 1) || chan_sync(r, "sent 2") ||
	    chan_sync(r, "checked 2") ||
	    srq_send(r, c, &sb, n - l + 1, n) || chan_sync(r, "sent 3") ||
	    chan_recv_verdict(r, &server_ok))
		return -1;
	check(r, server_ok, "the server got every message intact and the limit event once, at "
	      "the right moment");
	if (chan_sync(r, "done"))
		return -1;
	for (int q = 0; q < SRQ_QPS; q++)
		conn_close(r, &c[q]);
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * Subtest mw
 *
 * Memory windows, where the device has them.  The server registers a 16 KiB MR with MW_BIND and
 * binds a window to a sub-range of it with REMOTE_WRITE; the client writes through the window's
 * rkey.  Each client WRITE is reported to the server, which checks that its memory holds
 * exactly what the successful WRITEs wrote (so a WRITE that lands does so in full, at its
 * place, and a refused one changes nothing).  Rounds, each on a fresh QP pair:
 *   type 2  A: WRITE in the window: SUCCESS; the server posts LOCAL_INV on the window's rkey;
 *              WRITE through it again: REM_ACCESS_ERR.
 *           B: the invalidated window bound again (new key): WRITE: SUCCESS; the client's
 *              SEND_WITH_INV names the rkey, the server's receive has IBV_WC_WITH_INV and
 *              invalidated_rkey; WRITE through it again: REM_ACCESS_ERR.
 *           C: bound again: WRITE outside the window (inside the MR): REM_ACCESS_ERR.
 *           D: a new window: WRITE running past the window's end: REM_ACCESS_ERR.
 *   type 1  E: ibv_bind_mw: WRITE: SUCCESS; ibv_bind_mw with length 0 unbinds; WRITE through
 *              the window's current rkey: REM_ACCESS_ERR.
 *           F: WRITE through the rkey it had while bound: REM_ACCESS_ERR.
 * The MR has LOCAL_WRITE and MW_BIND only, and the binds ask for REMOTE_WRITE | LOCAL_WRITE:
 * the windows grant remote write that the MR does not, and the local bit is ignored (IBTA
 * C10-73, C10-74, as rdma-core's MWTest expects).
 * A type 2 window is bound to the server's QP, and an error moves the QPs to ERR, so every
 * round has its own QPs.
 */

#define MW_T_LEN	16384	/* the MR */
#define MW_W_OFF	4160	/* the window: [MW_W_OFF, MW_W_OFF + MW_W_LEN) of the MR */
#define MW_W_LEN	4000
#define MW_IN_OFF	100	/* a WRITE inside the window (offsets from its start) */
#define MW_IN_LEN	777
#define MW_MSG_LEN	64	/* SEND_WITH_INV payload; the WRITEs that must fail */

/*
 * rdma_rxe (Linux 6.1) checks an access through a window against the range of the MR under it,
 * not the window's (check_rkey() in rxe_resp.c), so a WRITE outside the window but inside the
 * MR succeeds there.
 */
#define MW_RXE_RANGE	IBV_WC_SUCCESS

/* What a round does; the server and the client walk the same list. */
enum mw_round { MW2_LOCAL_INV, MW2_SEND_INV, MW2_OUTSIDE, MW2_PAST_END, MW1_UNBIND, MW1_OLD_KEY,
		MW_ROUNDS };

static const char *const mw_round_names[MW_ROUNDS] = {
	[MW2_LOCAL_INV] = "type 2, LOCAL_INV",
	[MW2_SEND_INV] = "type 2, SEND_WITH_INV",
	[MW2_OUTSIDE] = "type 2, WRITE outside the window",
	[MW2_PAST_END] = "type 2, WRITE past the window's end",
	[MW1_UNBIND] = "type 1, unbind (length 0)",
	[MW1_OLD_KEY] = "type 1, the old rkey after the unbind",
};

static bool mw_round_type2(enum mw_round k)
{
	return k <= MW2_PAST_END;
}

/*
 * Server: bind mw (type 2) to [T + MW_W_OFF, + MW_W_LEN) of mr with REMOTE_WRITE, under the
 * new key *key (the next key byte of the window's current rkey).
 */
static int mw2_bind(struct role *r, struct conn *c, struct ibv_mw *mw, struct ibv_mr *mr,
		    uint8_t *t, uint32_t *key)
{
	uint32_t new_key = ibv_inc_rkey(mw->rkey);
	struct ibv_send_wr wr = {
		.wr_id = 0xb1d, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
		.bind_mw = {
			.mw = mw, .rkey = new_key,
			.bind_info = { .mr = mr, .addr = (uintptr_t)t + MW_W_OFF,
				       .length = MW_W_LEN,
				       /* The local bit is ignored, as callers expect. */
				       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE |
							  IBV_ACCESS_LOCAL_WRITE },
		},
	}, *bad;
	struct ibv_wc wc;
	int ret;

	ret = ibv_post_send(c->qp, &wr, &bad);
	if (ret)
		return fail(r, "ibv_post_send(BIND_MW): %s", strerror(ret));
	if (!expect_wc(r, c, c->scq, &wc, 0xb1d, IBV_WC_SUCCESS, "BIND_MW of a type 2 window "
		       "(rkey 0x%08x -> 0x%08x)", mw->rkey, new_key))
		return -1;
	check(r, wc.opcode == IBV_WC_BIND_MW, "BIND_MW completion opcode %s",
	      opcode_str(wc.opcode));
	/*
	 * The consumer owns a type 2 window's key: libibverbs does not update mw->rkey, and the
	 * next bind names the window by its current key (rxe insists on that).
	 */
	mw->rkey = *key = new_key;
	return 0;
}

/* Server: ibv_bind_mw on a type 1 window; length 0 unbinds it.  The new key is mw->rkey. */
static int mw1_bind(struct role *r, struct conn *c, struct ibv_mw *mw, struct ibv_mr *mr,
		    uint8_t *t, uint32_t length)
{
	struct ibv_mw_bind bind = {
		.wr_id = 0xb1e, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr, .addr = (uintptr_t)t + MW_W_OFF, .length = length,
			       .mw_access_flags = length ? IBV_ACCESS_REMOTE_WRITE |
							   IBV_ACCESS_LOCAL_WRITE : 0 },
	};
	uint32_t old_key = mw->rkey;
	struct ibv_wc wc;
	int ret;

	ret = ibv_bind_mw(c->qp, mw, &bind);
	if (ret)
		return fail(r, "ibv_bind_mw(length %u): %s", length, strerror(ret));
	check_why(r, mw->rkey != old_key && (mw->rkey >> 8) == (old_key >> 8),
		  length ? "ibv_bind_mw gives the window its next key" :
			   "ibv_bind_mw(length 0) gives the window its next key",
		  "0x%08x -> 0x%08x", old_key, mw->rkey);
	if (!expect_wc(r, c, c->scq, &wc, 0xb1e, IBV_WC_SUCCESS, "%s of a type 1 window "
		       "(rkey 0x%08x -> 0x%08x)", length ? "bind" : "unbind (length 0)", old_key,
		       mw->rkey))
		return -1;
	check(r, wc.opcode == IBV_WC_BIND_MW, "bind completion opcode %s", opcode_str(wc.opcode));
	return 0;
}

/*
 * Server: the client reports a WRITE (offset from the window's start, length, data seed, its
 * completion status); check that our memory holds what the successful WRITEs wrote, and tell
 * the client.
 */
static int mw_serve_write(struct role *r, uint8_t *t, uint8_t *expect, const char *round)
{
	unsigned int off, len, seed, status;
	char what[192];
	ssize_t bad;

	if (chan_recv(r, 4, "wrote %x %x %x %u", &off, &len, &seed, &status))
		return -1;
	if (MW_W_OFF + (uint64_t)off + len > MW_T_LEN)
		return fail(r, "the client reports a WRITE outside the MR (+%#x, %u bytes)",
			    off, len);
	if (status == IBV_WC_SUCCESS)
		fill_pattern(expect + MW_W_OFF + off, len, seed);
	bad = find_diff(t, expect, MW_T_LEN);
	snprintf(what, sizeof(what), "%s: %s WRITE of %u bytes at window +%u: the MR %s", round,
		 status == IBV_WC_SUCCESS ? "successful" : "failed", len, off,
		 status == IBV_WC_SUCCESS ? "holds exactly the written bytes" : "is unchanged");
	return chan_send_verdict(r, check_why(r, bad < 0, what, "first difference at MR +%zd",
					      bad));
}

static int mw_post_local_inv(struct role *r, struct conn *c, uint32_t key)
{
	struct ibv_send_wr wr = {
		.wr_id = 0x1a7, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED,
		.invalidate_rkey = key,
	}, *bad;
	struct ibv_wc wc;
	int ret = ibv_post_send(c->qp, &wr, &bad);

	if (ret)
		return fail(r, "ibv_post_send(LOCAL_INV): %s", strerror(ret));
	if (expect_wc(r, c, c->scq, &wc, 0x1a7, IBV_WC_SUCCESS, "LOCAL_INV of the window's rkey "
		      "0x%08x", key))
		check(r, wc.opcode == IBV_WC_LOCAL_INV, "LOCAL_INV completion opcode %s",
		      opcode_str(wc.opcode));
	return 0;
}

static int mw_server(struct role *r)
{
	bool t1 = r->dev.device_cap_flags & IBV_DEVICE_MEM_WINDOW;
	bool t2 = r->dev.device_cap_flags & (IBV_DEVICE_MEM_WINDOW_TYPE_2A |
					     IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	struct conn_params p = conn_defaults();
	struct ibv_mw *mw = NULL;
	uint32_t key = 0, old_key = 0;
	uint8_t *expect;
	struct buf t, rb;

	info(r, "device_cap_flags 0x%x: memory windows type 1 %s, type 2 %s",
	     r->dev.device_cap_flags, t1 ? "yes" : "no", t2 ? "yes" : "no");
	if (!t1)
		skip(r, "the device has no type 1 memory windows (IBV_DEVICE_MEM_WINDOW)");
	if (!t2)
		skip(r, "the device has no type 2 memory windows (IBV_DEVICE_MEM_WINDOW_TYPE_2A/B)");
	if (chan_send(r, "windows %d %d", t1, t2))
		return -1;
	if (!t1 && !t2)
		return chan_sync(r, "end");

	/*
	 * The MR grants nothing remote: a window's rights are its own (IBTA C10-74), and a
	 * window with remote write needs only LOCAL_WRITE and MW_BIND on the MR, as rdma-core's
	 * MWTest registers it.
	 */
	if (buf_alloc(r, &t, MW_T_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND) ||
	    buf_alloc(r, &rb, 4096, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	fill_pattern(t.p, t.len, 0x3a3a);
	expect = malloc(t.len);
	if (!expect)
		return fail(r, "out of memory");
	memcpy(expect, t.p, t.len);

	for (int k = 0; k < MW_ROUNDS; k++) {
		const char *round = mw_round_names[k];
		struct ibv_wc wc;
		struct conn c;

		if (mw_round_type2(k) ? !t2 : !t1)
			continue;
		if (conn_open(r, &c, &p, NULL))
			return -1;
		/* A window for the round: new, or the one of the round before. */
		if (k == MW2_LOCAL_INV || k == MW2_PAST_END || k == MW1_UNBIND) {
			enum ibv_mw_type type = mw_round_type2(k) ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1;

			mw = ibv_alloc_mw(r->pd, type);
			if (!check_why(r, mw != NULL, type == IBV_MW_TYPE_2 ?
				       "ibv_alloc_mw(IBV_MW_TYPE_2)" : "ibv_alloc_mw(IBV_MW_TYPE_1)",
				       "%s", strerror(errno)))
				return -1;
		}
		if (k == MW2_SEND_INV && post_recv(r, &c, 0x5e, rb.p, rb.len, rb.mr->lkey))
			return -1;
		if (mw_round_type2(k)) {
			if (mw2_bind(r, &c, mw, t.mr, t.p, &key))
				return -1;
		} else if (k == MW1_UNBIND) {
			if (mw1_bind(r, &c, mw, t.mr, t.p, MW_W_LEN))
				return -1;
			key = mw->rkey;
		}
		if (chan_send(r, "window %" PRIx64 " %x", (uint64_t)(uintptr_t)t.p + MW_W_OFF,
			      k == MW1_OLD_KEY ? old_key : key))
			return -1;

		switch (k) {
		case MW2_LOCAL_INV:
			if (mw_serve_write(r, t.p, expect, round) ||
			    mw_post_local_inv(r, &c, key) || chan_sync(r, "invalidated") ||
			    mw_serve_write(r, t.p, expect, round))
				return -1;
			break;
		case MW2_SEND_INV:
			if (mw_serve_write(r, t.p, expect, round))
				return -1;
			if (expect_wc(r, &c, c.rcq, &wc, 0x5e, IBV_WC_SUCCESS,
				      "receive of the SEND_WITH_INV")) {
				ssize_t bad = find_pattern_mismatch(rb.p, MW_MSG_LEN, 0x1177);

				check_why(r, wc.opcode == IBV_WC_RECV && wc.byte_len == MW_MSG_LEN &&
					     bad < 0, "SEND_WITH_INV: RECV of its 64 bytes, intact",
					  "%s, byte_len %u, first bad byte %zd",
					  opcode_str(wc.opcode), wc.byte_len, bad);
				/*
				 * rdma_rxe (Linux 6.1) hands userspace the kernel's flag bits: its
				 * IB_WC_WITH_INVALIDATE (1 << 2) reads as IBV_WC_IP_CSUM_OK.
				 */
				if (r->is_rxe && !(wc.wc_flags & IBV_WC_WITH_INV) &&
				    (wc.wc_flags & IBV_WC_IP_CSUM_OK) && wc.invalidated_rkey == key)
					xfail(r, "SEND_WITH_INV: wc_flags 0x%x, the kernel's "
					      "IB_WC_WITH_INVALIDATE bit where libibverbs wants "
					      "IBV_WC_WITH_INV: a known rdma_rxe deviation "
					      "(invalidated_rkey is right)", wc.wc_flags);
				else
					check_why(r, (wc.wc_flags & IBV_WC_WITH_INV) &&
						     !(wc.wc_flags & IBV_WC_WITH_IMM) &&
						     wc.invalidated_rkey == key,
						  "SEND_WITH_INV: IBV_WC_WITH_INV, invalidated_rkey is "
						  "the window's", "wc_flags 0x%x, invalidated_rkey "
						  "0x%08x, wanted 0x%08x", wc.wc_flags,
						  wc.invalidated_rkey, key);
			}
			if (chan_sync(r, "invalidated") || mw_serve_write(r, t.p, expect, round))
				return -1;
			break;
		case MW2_OUTSIDE:
		case MW2_PAST_END:
		case MW1_OLD_KEY:
			if (mw_serve_write(r, t.p, expect, round))
				return -1;
			break;
		case MW1_UNBIND:
			old_key = key;
			if (mw_serve_write(r, t.p, expect, round) ||
			    mw1_bind(r, &c, mw, t.mr, t.p, 0) ||
			    chan_send(r, "unbound %x", mw->rkey) ||
			    mw_serve_write(r, t.p, expect, round))
				return -1;
			break;
		}
		if (chan_sync(r, "next"))
			return -1;
		/*
		 * A window goes before the QP a type 2 window is still bound to (rxe's holds a
		 * reference on it) and before the MR.
		 */
		if (k == MW2_OUTSIDE || k == MW2_PAST_END || k == MW1_OLD_KEY) {
			int ret = ibv_dealloc_mw(mw);

			check_why(r, ret == 0, "ibv_dealloc_mw", "%s", strerror(ret));
			mw = NULL;
		}
		conn_close(r, &c);
	}
	if (mw)
		return fail(r, "internal: a window was left allocated");
	buf_free(r, &t);
	buf_free(r, &rb);
	free(expect);
	return chan_sync(r, "end");
}

/*
 * Client: RDMA WRITE len bytes of pattern seed to window + off through rkey, expect status
 * (rxe_status: what rdma_rxe is known to give instead, or -1), report the WRITE to the server
 * and check its verdict on its memory.
 */
static int mw_write(struct role *r, struct conn *c, struct buf *sb, uint64_t window,
		    uint32_t rkey, uint32_t off, uint32_t len, uint32_t seed,
		    enum ibv_wc_status status, int rxe_status, const char *round, const char *how)
{
	struct ibv_wc wc;
	bool server_ok;

	fill_pattern(sb->p, len, seed);
	if (post_send(r, c, seed, IBV_WR_RDMA_WRITE, sb->p, len, sb->mr->lkey, window + off, rkey))
		return -1;
	if (rxe_status >= 0)
		expect_wc_rxe(r, c, c->scq, &wc, seed, status, rxe_status, "%s: RDMA WRITE of %u "
			      "bytes %s (window +%u, rkey 0x%08x)", round, len, how, off, rkey);
	else
		expect_wc(r, c, c->scq, &wc, seed, status, "%s: RDMA WRITE of %u bytes %s "
			  "(window +%u, rkey 0x%08x)", round, len, how, off, rkey);
	if (chan_send(r, "wrote %x %x %x %u", off, len, seed, wc.wr_id == seed ? wc.status : 999) ||
	    chan_recv_verdict(r, &server_ok))
		return -1;
	check(r, server_ok, "%s: the server's memory holds what the successful WRITEs wrote",
	      round);
	if (status != IBV_WC_SUCCESS && wc.status != IBV_WC_SUCCESS)
		check_qp_state(r, c, IBV_QPS_ERR, "after the remote access error");
	return 0;
}

static int mw_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct buf sb;
	int t1, t2;

	if (chan_recv(r, 2, "windows %d %d", &t1, &t2))
		return -1;
	if (!t1)
		skip(r, "the server's device has no type 1 memory windows");
	if (!t2)
		skip(r, "the server's device has no type 2 memory windows");
	if (!t1 && !t2)
		return chan_sync(r, "end");
	if (buf_alloc(r, &sb, 4096, IBV_ACCESS_LOCAL_WRITE))
		return -1;

	for (int k = 0; k < MW_ROUNDS; k++) {
		const char *round = mw_round_names[k];
		uint32_t seed = 0x100 * (k + 1);
		uint64_t window;
		uint32_t rkey;
		struct conn c;

		if (mw_round_type2(k) ? !t2 : !t1)
			continue;
		if (conn_open(r, &c, &p, NULL) ||
		    chan_recv(r, 2, "window %" SCNx64 " %x", &window, &rkey))
			return -1;
		switch (k) {
		case MW2_LOCAL_INV:
			if (mw_write(r, &c, &sb, window, rkey, MW_IN_OFF, MW_IN_LEN, seed,
				     IBV_WC_SUCCESS, -1, round, "inside the window") ||
			    chan_sync(r, "invalidated") ||
			    mw_write(r, &c, &sb, window, rkey, MW_IN_OFF, MW_MSG_LEN, seed + 1,
				     IBV_WC_REM_ACCESS_ERR, -1, round,
				     "through the invalidated rkey"))
				return -1;
			break;
		case MW2_SEND_INV: {
			struct ibv_sge sge = { .addr = (uintptr_t)sb.p, .length = MW_MSG_LEN,
					       .lkey = sb.mr->lkey };
			struct ibv_send_wr wr = {
				.wr_id = 0x5e, .sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED,
				.invalidate_rkey = rkey,
			}, *bad;
			struct ibv_wc wc;
			int ret;

			if (mw_write(r, &c, &sb, window, rkey, MW_IN_OFF + 1, MW_IN_LEN, seed,
				     IBV_WC_SUCCESS, -1, round, "inside the window"))
				return -1;
			fill_pattern(sb.p, MW_MSG_LEN, 0x1177);
			ret = ibv_post_send(c.qp, &wr, &bad);
			if (ret)
				return fail(r, "ibv_post_send(SEND_WITH_INV): %s", strerror(ret));
			expect_wc(r, &c, c.scq, &wc, 0x5e, IBV_WC_SUCCESS, "%s: SEND_WITH_INV "
				  "naming the window's rkey 0x%08x", round, rkey);
			if (chan_sync(r, "invalidated") ||
			    mw_write(r, &c, &sb, window, rkey, MW_IN_OFF, MW_MSG_LEN, seed + 1,
				     IBV_WC_REM_ACCESS_ERR, -1, round,
				     "through the remotely invalidated rkey"))
				return -1;
			break;
		}
		case MW2_OUTSIDE:
			/* Inside the MR, 512 bytes past the window. */
			if (mw_write(r, &c, &sb, window, rkey, MW_W_LEN + 512, MW_MSG_LEN, seed,
				     IBV_WC_REM_ACCESS_ERR, MW_RXE_RANGE, round,
				     "outside the window, inside the MR"))
				return -1;
			break;
		case MW2_PAST_END:
			/* The last 32 bytes of the window and 32 past it. */
			if (mw_write(r, &c, &sb, window, rkey, MW_W_LEN - MW_MSG_LEN / 2,
				     MW_MSG_LEN, seed, IBV_WC_REM_ACCESS_ERR, MW_RXE_RANGE, round,
				     "across the window's end"))
				return -1;
			break;
		case MW1_UNBIND: {
			uint32_t now;

			if (mw_write(r, &c, &sb, window, rkey, MW_IN_OFF + 2, MW_IN_LEN, seed,
				     IBV_WC_SUCCESS, -1, round, "inside the window") ||
			    chan_recv(r, 1, "unbound %x", &now) ||
			    mw_write(r, &c, &sb, window, now, MW_IN_OFF, MW_MSG_LEN, seed + 1,
				     IBV_WC_REM_ACCESS_ERR, -1, round,
				     "through the unbound window's current rkey"))
				return -1;
			break;
		}
		case MW1_OLD_KEY:
			if (mw_write(r, &c, &sb, window, rkey, MW_IN_OFF, MW_MSG_LEN, seed,
				     IBV_WC_REM_ACCESS_ERR, -1, round,
				     "through the rkey the window had while bound"))
				return -1;
			break;
		}
		if (chan_sync(r, "next"))
			return -1;
		conn_close(r, &c);
	}
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * The subtest table and main
 */

/* =============================================================================================
 * Subtest rereg
 *
 * ibv_rereg_mr keeps an MR's keys and changes what they grant: the peer's next RDMA WRITE through
 * the same rkey sees exactly the new MR.  The server's 8 KiB buffer holds two pages, A and B; the
 * MR starts on A with REMOTE_WRITE.  Rounds: a WRITE to A lands; access without REMOTE_WRITE, the
 * WRITE fails (REM_ACCESS_ERR); translation to B with REMOTE_WRITE again, a WRITE to B lands and
 * one to A fails; another PD, the WRITE to B fails; the PD back, it lands.  After every round the
 * server finds its memory exactly as expected, and the keys have not changed.
 */
#define RR_BUF_LEN	8192
#define RR_OFF		256
#define RR_LEN		128

enum rr_round { RR_GOOD, RR_NO_WRITE, RR_MOVED, RR_OLD_RANGE, RR_OTHER_PD, RR_PD_BACK, RR_NR };

static const char *const rr_names[RR_NR] = {
	"WRITE to page A", "access without REMOTE_WRITE", "moved to page B",
	"WRITE to page A after the move", "MR in another PD", "MR back in the QP's PD",
};

static bool rr_lands(enum rr_round k)
{
	return k == RR_GOOD || k == RR_MOVED || k == RR_PD_BACK;
}

/* The server's change before round k, and the page the client is to write. */
static int rr_change(struct role *r, struct ibv_mr *mr, enum rr_round k, uint8_t *buf,
		     struct ibv_pd *other, uint8_t **page)
{
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	int ret = 0;

	*page = k <= RR_NO_WRITE || k == RR_OLD_RANGE ? buf : buf + 4096;
	switch (k) {
	case RR_NO_WRITE:
		ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				   IBV_ACCESS_LOCAL_WRITE);
		break;
	case RR_MOVED:
		ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS,
				   NULL, buf + 4096, 4096, rw);
		break;
	case RR_OTHER_PD:
		ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, other, NULL, 0, 0);
		break;
	case RR_PD_BACK:
		ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, r->pd, NULL, 0, 0);
		break;
	default:
		return 0;
	}
	return check_why(r, ret == 0, rr_names[k], "ibv_rereg_mr: %d (%s)", ret,
			 strerror(errno)) ? 0 : -1;
}

static int rereg_server(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct ibv_pd *other = NULL;
	struct ibv_mr *mr = NULL;
	uint8_t *buf = NULL, *expect = NULL, *page;
	uint32_t lkey, rkey;
	int ret = -1;

	if (posix_memalign((void **)&buf, 4096, RR_BUF_LEN) || !(expect = malloc(RR_BUF_LEN))) {
		fail(r, "out of memory");
		goto out;
	}
	fill_pattern(buf, RR_BUF_LEN, 0x2e2e);
	memcpy(expect, buf, RR_BUF_LEN);
	other = ibv_alloc_pd(r->ctx);
	mr = ibv_reg_mr(r->pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!other || !mr) {
		fail(r, "ibv_alloc_pd/ibv_reg_mr: %s", strerror(errno));
		goto out;
	}
	lkey = mr->lkey;
	rkey = mr->rkey;
	for (int k = 0; k < RR_NR; k++) {
		struct conn c;
		ssize_t bad;
		bool ok;

		if (conn_open(r, &c, &p, NULL))
			goto out;
		if (rr_change(r, mr, k, buf, other, &page))
			goto out;
		check(r, mr->lkey == lkey && mr->rkey == rkey, "%s: the MR's keys stay", rr_names[k]);
		if (chan_send(r, "target %" PRIx64 " %x", (uint64_t)(uintptr_t)page + RR_OFF, rkey) ||
		    chan_sync(r, "written"))
			goto out;
		if (rr_lands(k))
			fill_pattern(expect + (page - buf) + RR_OFF, RR_LEN, 0x4000 + k);
		bad = find_diff(buf, expect, RR_BUF_LEN);
		ok = check_why(r, bad < 0, rr_names[k], "%s; first difference at +%zd",
			       rr_lands(k) ? "the WRITE landed where the MR now is, nowhere else" :
					     "memory unchanged", bad);
		if (chan_send_verdict(r, ok) || chan_sync(r, "next"))
			goto out;
		conn_close(r, &c);
	}
	ret = chan_sync(r, "end");
out:
	if (mr && ibv_dereg_mr(mr))
		fail(r, "ibv_dereg_mr: %s", strerror(errno));
	if (other && ibv_dealloc_pd(other))
		fail(r, "ibv_dealloc_pd of the other PD: %s", strerror(errno));
	free(buf);
	free(expect);
	return ret;
}

static int rereg_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct buf sb;

	if (buf_alloc(r, &sb, 4096, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	for (int k = 0; k < RR_NR; k++) {
		uint64_t raddr;
		uint32_t rkey;
		struct conn c;
		struct ibv_wc wc;
		bool server_ok;

		if (conn_open(r, &c, &p, NULL) ||
		    chan_recv(r, 2, "target %" SCNx64 " %x", &raddr, &rkey))
			return -1;
		fill_pattern(sb.p, RR_LEN, 0x4000 + k);
		if (post_send(r, &c, k, IBV_WR_RDMA_WRITE, sb.p, RR_LEN, sb.mr->lkey, raddr, rkey))
			return -1;
		expect_wc(r, &c, c.scq, &wc, k, rr_lands(k) ? IBV_WC_SUCCESS : IBV_WC_REM_ACCESS_ERR,
			  "RDMA WRITE, %s", rr_names[k]);
		if (chan_sync(r, "written") || chan_recv_verdict(r, &server_ok))
			return -1;
		check(r, server_ok, "%s: the server found its memory as expected", rr_names[k]);
		if (chan_sync(r, "next"))
			return -1;
		conn_close(r, &c);
	}
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * Subtest timestamps
 *
 * The device clock and completion timestamps: ibv_query_rt_values_ex never goes back and keeps
 * time; then a ping-pong of SENDs on extended CQs with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
 * where every completion's timestamp lies between the clock readings taken before the work it
 * completes could have started and after it was polled, and a CQ's timestamps never decrease.
 * Each role only compares timestamps with its own device's clock.
 *
 * The same completions' wall-clock timestamps (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, the
 * machine's real time) were taken with their device-clock ones, and both clocks run at the host's
 * pace, so wall-clock minus device clock is the same for every completion, within
 * TS_WALL_STEADY_NS.  They are real time: within TS_WALL_NEAR_NS of the guest's CLOCK_REALTIME.
 * That bound is loose on purpose: the guest's system time starts from the RTC (whole seconds at
 * boot) and then follows the guest's own clocksource, which under TCG drifts from the host's
 * (a TSC calibrated against emulated timers), and nothing (no NTP) pulls it back.  A device clock
 * counting from the machine's start, or any stamp not taken at the completion, fails one check.
 */

#define TS_ROUNDS 32
#define TS_LEN 64
#define TS_READS 1000
#define TS_WALL_STEADY_NS 10000000ll	/* 10 ms: far above the drift of two host clocks */
#define TS_WALL_NEAR_NS 60000000000ll	/* 60 s: the guest's own clock drifts (see above) */

static int64_t realtime_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The device clock in its own ticks (hca_core_clock kHz), or -1 (a failed check). */
static int64_t ts_clock(struct role *r)
{
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	int ret = ibv_query_rt_values_ex(r->ctx, &v);

	if (ret || !(v.comp_mask & IBV_VALUES_MASK_RAW_CLOCK)) {
		fail(r, "ibv_query_rt_values_ex: %s (comp_mask 0x%x)", strerror(ret), v.comp_mask);
		return -1;
	}
	return (int64_t)v.raw_clock.tv_sec * 1000000000 + v.raw_clock.tv_nsec;
}

/*
 * The device's clock rate, or 0 when it has none (then the subtest has nothing to test); the
 * raw clock reads never go back, and keep pace with the system's clock over a short sleep (at
 * least half of it: the guest may be descheduled, but a device clock cannot run slow).
 */
static uint64_t ts_check_clock(struct role *r)
{
	struct ibv_device_attr_ex attr;
	int64_t t, prev, start, ms0;
	double ms_dev, ms_sys;
	int back = 0, ret;

	ret = ibv_query_device_ex(r->ctx, NULL, &attr);
	if (ret) {
		fail(r, "ibv_query_device_ex: %s", strerror(ret));
		return 0;
	}
	if (!attr.hca_core_clock) {
		skip(r, "the device reports no clock (hca_core_clock 0)");
		return 0;
	}
	info(r, "device clock %" PRIu64 " kHz, timestamp mask 0x%" PRIx64, attr.hca_core_clock,
	     attr.completion_timestamp_mask);
	start = prev = ts_clock(r);
	if (start < 0)
		return 0;
	for (int i = 0; i < TS_READS; i++) {
		t = ts_clock(r);
		if (t < 0)
			return 0;
		back += t < prev;
		prev = t;
	}
	check(r, back == 0 && prev > start, "%d reads of ibv_query_rt_values_ex never go back and "
	      "advance (%d went back; %" PRId64 " ticks in all)", TS_READS, back, prev - start);
	ms0 = now_ms();
	start = ts_clock(r);
	sleep_ms(50);
	t = ts_clock(r);
	ms_sys = (double)(now_ms() - ms0);
	ms_dev = (double)(t - start) / (double)attr.hca_core_clock;
	check(r, start >= 0 && t >= 0 && ms_dev >= ms_sys / 2,
	      "the device clock kept time over a sleep: %.1f ms of it in %.0f ms of the system's",
	      ms_dev, ms_sys);
	return attr.hca_core_clock;
}

/*
 * One completion of an extended CQ, with its timestamp.  1: got it; 0: none within the timeout;
 * -1: poll error.
 */
static int ts_poll(struct ibv_cq_ex *cqx, uint64_t *wr_id, enum ibv_wc_status *status,
		   uint32_t *byte_len, uint64_t *ts, uint64_t *wall, int timeout_ms)
{
	struct ibv_poll_cq_attr attr = {};
	int64_t deadline = now_ms() + timeout_ms;
	int ret;

	while ((ret = ibv_start_poll(cqx, &attr)) == ENOENT) {
		if (now_ms() >= deadline)
			return 0;
		usleep(50);
	}
	if (ret)
		return -1;
	*wr_id = cqx->wr_id;
	*status = cqx->status;
	*byte_len = ibv_wc_read_byte_len(cqx);
	*ts = ibv_wc_read_completion_ts(cqx);
	*wall = ibv_wc_read_completion_wallclock_ns(cqx);
	ibv_end_poll(cqx);
	return 1;
}

/* The tallies of a role's completions: each within its bracket, each CQ non-decreasing. */
struct ts_tally {
	int n, bad_status, outside, back, bad_data, wall_far, wall_unsteady;
	bool have_wall;
	int64_t wall_base;		/* the first completion's wall clock - device clock */
	int64_t wall_max_gap;		/* the largest |wall-clock stamp - CLOCK_REALTIME|, ns */
	int64_t wall_max_step;		/* the largest |(wall - device clock) - wall_base|, ns */
	uint64_t prev_s, prev_r;
	char first_bad[160];
};

static void ts_note(struct ts_tally *t, const char *what, int round, uint64_t ts, int64_t lo,
		    int64_t hi, uint64_t *prev)
{
	bool outside = (int64_t)ts < lo || (int64_t)ts > hi, back = ts < *prev;

	t->n++;
	t->outside += outside;
	t->back += back;
	if ((outside || back) && !t->first_bad[0])
		snprintf(t->first_bad, sizeof(t->first_bad), "round %d %s: %" PRIu64 " not in "
			 "[%" PRId64 ", %" PRId64 "] or below the previous %" PRIu64, round, what,
			 ts, lo, hi, *prev);
	*prev = ts;
}

/* One completion on cqx that must be wr_id, successful; its timestamp tallied. */
static int ts_expect(struct role *r, struct ts_tally *t, struct ibv_cq_ex *cqx, uint64_t wr_id,
		     const char *what, int round, int64_t lo, uint64_t *prev, uint32_t *len)
{
	enum ibv_wc_status st;
	uint64_t id, ts, wall;
	int64_t hi, gap;
	int got = ts_poll(cqx, &id, &st, len, &ts, &wall, r->o->timeout * 1000);

	if (got <= 0)
		return fail(r, "round %d: no %s completion within %d s", round, what,
			    r->o->timeout);
	gap = llabs((int64_t)wall - realtime_ns());
	t->wall_far += gap > TS_WALL_NEAR_NS;
	if (gap > t->wall_max_gap)
		t->wall_max_gap = gap;
	if (!t->have_wall) {
		t->have_wall = true;
		t->wall_base = (int64_t)(wall - ts);
	}
	gap = llabs((int64_t)(wall - ts) - t->wall_base);
	t->wall_unsteady += gap > TS_WALL_STEADY_NS;
	if (gap > t->wall_max_step)
		t->wall_max_step = gap;
	hi = ts_clock(r);
	if (hi < 0)
		return -1;
	if (id != wr_id || st != IBV_WC_SUCCESS)
		t->bad_status++;
	ts_note(t, what, round, ts, lo, hi, prev);
	return 0;
}

static void ts_report(struct role *r, struct ts_tally *t)
{
	check(r, t->bad_status == 0 && t->bad_data == 0,
	      "%d ping-pong completions successful, every message's bytes as sent "
	      "(%d bad statuses, %d bad messages)", t->n, t->bad_status, t->bad_data);
	check_why(r, t->outside == 0 && t->back == 0,
		  "every completion timestamp lies between the clock reads around its work, and "
		  "none goes back on its CQ", "%d outside, %d went back; first: %s", t->outside,
		  t->back, t->first_bad);
	check(r, t->wall_unsteady == 0, "every wall-clock timestamp was taken with its device-clock "
	      "one: wall clock minus device clock moved at most %.3f ms (bound %lld ms; %d beyond)",
	      (double)t->wall_max_step / 1e6, TS_WALL_STEADY_NS / 1000000, t->wall_unsteady);
	check(r, t->wall_far == 0, "every wall-clock timestamp is real time: within %lld s of the "
	      "system's when polled (%d are not; the largest gap is %.1f ms)",
	      TS_WALL_NEAR_NS / 1000000000, t->wall_far, (double)t->wall_max_gap / 1e6);
}

static int timestamps_server(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct ts_tally t = { 0 };
	struct buf rb, sb;
	uint32_t len;
	int64_t lo;
	struct conn c;

	if (!ts_check_clock(r))
		return chan_sync(r, "end");
	p.timestamps = true;
	if (buf_alloc(r, &rb, TS_LEN, IBV_ACCESS_LOCAL_WRITE) ||
	    buf_alloc(r, &sb, TS_LEN, IBV_ACCESS_LOCAL_WRITE) || conn_open(r, &c, &p, NULL) ||
	    post_recv(r, &c, 0, rb.p, TS_LEN, rb.mr->lkey))
		return -1;
	/* The client's first SEND comes after this sync, so after lo. */
	lo = ts_clock(r);
	if (lo < 0 || chan_sync(r, "ready"))
		return -1;
	for (int i = 0; i < TS_ROUNDS; i++) {
		if (ts_expect(r, &t, c.rcqx, i, "RECV", i, lo, &t.prev_r, &len))
			return -1;
		t.bad_data += len != TS_LEN || find_pattern_mismatch(rb.p, TS_LEN, i) >= 0;
		if (i + 1 < TS_ROUNDS && post_recv(r, &c, i + 1, rb.p, TS_LEN, rb.mr->lkey))
			return -1;
		/* The reply, and (after it arrives) the client's next SEND, come after lo. */
		fill_pattern(sb.p, TS_LEN, 1000 + i);
		lo = ts_clock(r);
		if (lo < 0 || post_send(r, &c, i, IBV_WR_SEND, sb.p, TS_LEN, sb.mr->lkey, 0, 0) ||
		    ts_expect(r, &t, c.scqx, i, "SEND", i, lo, &t.prev_s, &len))
			return -1;
	}
	ts_report(r, &t);
	if (chan_sync(r, "done"))
		return -1;
	conn_close(r, &c);
	buf_free(r, &rb);
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

static int timestamps_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct ts_tally t = { 0 };
	struct buf rb, sb;
	uint32_t len;
	int64_t lo;
	struct conn c;

	if (!ts_check_clock(r))
		return chan_sync(r, "end");
	p.timestamps = true;
	if (buf_alloc(r, &rb, TS_LEN, IBV_ACCESS_LOCAL_WRITE) ||
	    buf_alloc(r, &sb, TS_LEN, IBV_ACCESS_LOCAL_WRITE) || conn_open(r, &c, &p, NULL) ||
	    chan_sync(r, "ready"))
		return -1;
	for (int i = 0; i < TS_ROUNDS; i++) {
		/* SEND i and the reply to it: both complete after lo. */
		if (post_recv(r, &c, i, rb.p, TS_LEN, rb.mr->lkey))
			return -1;
		fill_pattern(sb.p, TS_LEN, i);
		lo = ts_clock(r);
		if (lo < 0 || post_send(r, &c, i, IBV_WR_SEND, sb.p, TS_LEN, sb.mr->lkey, 0, 0) ||
		    ts_expect(r, &t, c.scqx, i, "SEND", i, lo, &t.prev_s, &len) ||
		    ts_expect(r, &t, c.rcqx, i, "RECV", i, lo, &t.prev_r, &len))
			return -1;
		t.bad_data += len != TS_LEN || find_pattern_mismatch(rb.p, TS_LEN, 1000 + i) >= 0;
	}
	ts_report(r, &t);
	if (chan_sync(r, "done"))
		return -1;
	conn_close(r, &c);
	buf_free(r, &rb);
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * xrc: XRC (IBTA 9.8).  The server has two XRC domains: A with the target QP and two XRC SRQs
 * (A1, A2) sharing a CQ, and B with one XRC SRQ (B1).  The client's one XRC initiator QP sends
 * through the server's target QP to whichever SRQ each work request names:
 *   - a 2-packet SEND to A1 (legacy ibv_post_send, qp_type.xrc.remote_srqn), a SEND to A2 through
 *     ibv_qp_ex (ibv_wr_set_xrc_srqn): each lands in its SRQ's buffer, completes on the SRQ's CQ
 *     naming the target QP, with the right length;
 *   - RDMA WRITE, READ and FETCH_ADD through the target QP, keys checked against A1's PD;
 *   - a SEND naming B1, an SRQ of another domain: the initiator completes with
 *     REM_INV_RD_REQ_ERR, both QPs end in ERR, and nothing lands in B1.
 */

#define XRC_SEND1	5000	/* more than one 4 KiB MTU packet */
#define XRC_SEND2	100
#define XRC_SLOT	8192
#define XRC_RW_LEN	12288
#define XRC_RW_OFF	8192	/* in the target buffer; the counter is at 0 */

struct xrc_srv {
	struct ibv_xrcd *xrcd_a, *xrcd_b;
	struct ibv_cq *cq;
	struct ibv_srq *a1, *a2, *b1;
	struct ibv_qp *tgt;
	struct buf rb, t;	/* receive slots (A1: 0, A2: 1, B1: 2), RDMA target */
};

static struct ibv_xrcd *xrc_open_domain(struct role *r)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,		/* a domain of this process alone */
		.oflags = O_CREAT,
	};
	struct ibv_xrcd *x = ibv_open_xrcd(r->ctx, &a);

	if (!x)
		fail(r, "ibv_open_xrcd: %s", strerror(errno));
	return x;
}

static struct ibv_srq *xrc_srq(struct role *r, struct xrc_srv *s, struct ibv_xrcd *xrcd,
			       const char *name, uint32_t *srqn)
{
	struct ibv_srq_init_attr_ex a = {
		.attr = { .max_wr = 4, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_XRC,
		.pd = r->pd,
		.xrcd = xrcd,
		.cq = s->cq,
	};
	struct ibv_srq *srq = ibv_create_srq_ex(r->ctx, &a);

	if (!srq) {
		fail(r, "ibv_create_srq_ex(XRC %s): %s", name, strerror(errno));
		return NULL;
	}
	if (ibv_get_srq_num(srq, srqn)) {
		fail(r, "ibv_get_srq_num(%s) failed", name);
		return NULL;
	}
	info(r, "XRC SRQ %s: number %u", name, *srqn);
	return srq;
}

static int xrc_post_srq(struct role *r, struct ibv_srq *srq, uint64_t wr_id, uint8_t *addr,
			uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = XRC_SLOT, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;
	int ret = ibv_post_srq_recv(srq, &wr, &bad);

	return ret ? fail(r, "ibv_post_srq_recv(wr_id %" PRIu64 "): %s", wr_id, strerror(ret)) : 0;
}

/*
 * RESET -> INIT -> RTR -> RTS with exactly the attributes the IBTA lists for the XRC type (an
 * initiator has no responder resources, a target no retries).
 */
static int xrc_connect(struct role *r, struct ibv_qp *qp, uint32_t psn,
		       const struct qp_info *remote, enum ibv_mtu mtu)
{
	bool tgt = qp->qp_type == IBV_QPT_XRC_RECV;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = r->o->ib_port,
		.qp_access_flags = tgt ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					 IBV_ACCESS_REMOTE_ATOMIC : 0,
	};
	int ret;

	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_ACCESS_FLAGS);
	if (ret)
		return fail(r, "ibv_modify_qp(XRC -> INIT): %s", strerror(ret));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = remote->qpn;
	a.rq_psn = remote->psn;
	a.max_dest_rd_atomic = r->rd_atom;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = remote->lid;
	a.ah_attr.port_num = r->o->ib_port;
	if (r->gid_idx >= 0) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = remote->gid;
		a.ah_attr.grh.sgid_index = r->gid_idx;
		a.ah_attr.grh.hop_limit = 1;
	}
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				    (tgt ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0));
	if (ret)
		return fail(r, "ibv_modify_qp(XRC INIT -> RTR): %s", strerror(ret));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = psn;
	a.timeout = default_qp_timeout;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = r->rd_atom;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				    (tgt ? 0 : IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					       IBV_QP_MAX_QP_RD_ATOMIC));
	if (ret)
		return fail(r, "ibv_modify_qp(XRC RTR -> RTS): %s", strerror(ret));
	return 0;
}

/* Our QP's address and first PSN for the peer, and the peer's for us (conn_exchange's format). */
static int xrc_exchange(struct role *r, struct ibv_qp *qp, uint32_t psn, struct qp_info *remote)
{
	struct conn c = { .qp = qp, .psn = psn };

	return conn_exchange(r, &c, remote);
}

static void xrc_srv_close(struct role *r, struct xrc_srv *s)
{
	struct ibv_srq *srqs[] = { s->a1, s->a2, s->b1 };
	int ret;

	if (s->tgt && (ret = ibv_destroy_qp(s->tgt)))
		fail(r, "ibv_destroy_qp(XRC target): %s", strerror(ret));
	for (size_t i = 0; i < ARRAY_SIZE(srqs); i++)
		if (srqs[i] && (ret = ibv_destroy_srq(srqs[i])))
			fail(r, "ibv_destroy_srq(XRC): %s", strerror(ret));
	if (s->cq && (ret = ibv_destroy_cq(s->cq)))
		fail(r, "ibv_destroy_cq: %s", strerror(ret));
	if (s->xrcd_a && (ret = ibv_close_xrcd(s->xrcd_a)))
		fail(r, "ibv_close_xrcd(A): %s", strerror(ret));
	if (s->xrcd_b && (ret = ibv_close_xrcd(s->xrcd_b)))
		fail(r, "ibv_close_xrcd(B): %s", strerror(ret));
	buf_free(r, &s->rb);
	buf_free(r, &s->t);
}

/* One receive completion on the SRQs' CQ, from the target QP, into slot (wr_id) of len bytes. */
static bool xrc_expect_recv(struct role *r, struct xrc_srv *s, uint64_t wr_id, uint32_t len,
			    uint32_t seed, const char *what)
{
	struct conn c = { .qp = s->tgt };
	struct ibv_wc wc;
	ssize_t bad;

	if (!expect_wc(r, &c, s->cq, &wc, wr_id, IBV_WC_SUCCESS, "%s: receive on the SRQ's CQ",
		       what))
		return false;
	if (!check_why(r, wc.opcode == IBV_WC_RECV && wc.byte_len == len,
		       "receive is a RECV of the message's length", "opcode %s, %u bytes (want %u)",
		       opcode_str(wc.opcode), wc.byte_len, len))
		return false;
	bad = find_pattern_mismatch(s->rb.p + wr_id * XRC_SLOT, len, seed);
	return check_why(r, bad < 0, "the bytes landed in that SRQ's buffer",
			 "first wrong byte at +%zd", bad);
}

static int xrc_server(struct role *r)
{
	struct xrc_srv s = { 0 };
	uint32_t a1n, a2n, b1n, psn = nrand48(r->seed) & 0xffffff;
	struct qp_info remote;
	struct conn c;
	uint64_t *counter;
	ssize_t bad;
	bool ok;

	if (!(r->dev.device_cap_flags & IBV_DEVICE_XRC)) {
		skip(r, "the device has no XRC (IBV_DEVICE_XRC)");
		return chan_sync(r, "end");
	}
	if (buf_alloc(r, &s.rb, 3 * XRC_SLOT, IBV_ACCESS_LOCAL_WRITE) ||
	    buf_alloc(r, &s.t, XRC_RW_OFF + XRC_RW_LEN,
		      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC))
		return -1;
	counter = (uint64_t *)s.t.p;
	*counter = 100;
	s.xrcd_a = xrc_open_domain(r);
	s.xrcd_b = s.xrcd_a ? xrc_open_domain(r) : NULL;
	if (!s.xrcd_b)
		return -1;
	s.cq = ibv_create_cq(r->ctx, 16, NULL, NULL, 0);
	if (!s.cq)
		return fail(r, "ibv_create_cq: %s", strerror(errno));
	s.a1 = xrc_srq(r, &s, s.xrcd_a, "A1", &a1n);
	s.a2 = s.a1 ? xrc_srq(r, &s, s.xrcd_a, "A2", &a2n) : NULL;
	s.b1 = s.a2 ? xrc_srq(r, &s, s.xrcd_b, "B1", &b1n) : NULL;
	if (!s.b1)
		return -1;
	s.tgt = ibv_create_qp_ex(r->ctx, &(struct ibv_qp_init_attr_ex){
		.qp_type = IBV_QPT_XRC_RECV,
		.comp_mask = IBV_QP_INIT_ATTR_XRCD,
		.xrcd = s.xrcd_a,
	});
	if (!s.tgt)
		return fail(r, "ibv_create_qp_ex(XRC_RECV): %s", strerror(errno));
	if (xrc_post_srq(r, s.a1, 0, s.rb.p, s.rb.mr->lkey) ||
	    xrc_post_srq(r, s.a2, 1, s.rb.p + XRC_SLOT, s.rb.mr->lkey) ||
	    xrc_post_srq(r, s.b1, 2, s.rb.p + 2 * XRC_SLOT, s.rb.mr->lkey) ||
	    xrc_exchange(r, s.tgt, psn, &remote) ||
	    xrc_connect(r, s.tgt, psn, &remote, MIN(r->port.active_mtu, remote.active_mtu)) ||
	    chan_send(r, "xrc %x %x %x %" PRIx64 " %x", a1n, a2n, b1n,
		      (uint64_t)(uintptr_t)s.t.p, s.t.mr->rkey) ||
	    chan_sync(r, "sends"))
		return -1;

	ok = xrc_expect_recv(r, &s, 0, XRC_SEND1, 0x7101, "SEND to A1") &&
	     xrc_expect_recv(r, &s, 1, XRC_SEND2, 0x7102, "SEND to A2 (ibv_qp_ex)");
	if (chan_send_verdict(r, ok) || chan_sync(r, "rdma"))
		return -1;
	bad = find_pattern_mismatch(s.t.p + XRC_RW_OFF, XRC_RW_LEN, 0x7103);
	ok = check_why(r, bad < 0, "RDMA WRITE through the target QP landed",
		       "first wrong byte at +%zd", bad);
	ok &= check_why(r, *counter == 107, "FETCH_ADD through the target QP added 7",
			"counter %" PRIu64, *counter);
	if (chan_send_verdict(r, ok) || chan_sync(r, "foreign"))
		return -1;
	c.qp = s.tgt;
	check_qp_state(r, &c, IBV_QPS_ERR, "after a request for an SRQ of another XRC domain");
	expect_no_wc(r, s.cq, 500, "nothing lands in the other domain's SRQ");
	if (chan_sync(r, "next"))
		return -1;
	xrc_srv_close(r, &s);
	return chan_sync(r, "end");
}

/* One signaled SEND of len bytes from sb to XRC SRQ srqn, through ibv_qp_ex. */
static int xrc_send_ex(struct role *r, struct ibv_qp_ex *qpx, uint64_t wr_id, uint32_t srqn,
		       struct buf *sb, uint32_t len)
{
	int ret;

	ibv_wr_start(qpx);
	qpx->wr_id = wr_id;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx);
	ibv_wr_set_xrc_srqn(qpx, srqn);
	ibv_wr_set_sge(qpx, sb->mr->lkey, (uintptr_t)sb->p, len);
	ret = ibv_wr_complete(qpx);
	return ret ? fail(r, "ibv_wr_complete(XRC SEND to SRQ %u): %s", srqn, strerror(ret)) : 0;
}

static int xrc_client(struct role *r)
{
	uint32_t a1n, a2n, b1n, rkey, psn = nrand48(r->seed) & 0xffffff;
	struct ibv_qp_ex *qpx;
	struct qp_info remote;
	struct buf sb, lb;
	struct ibv_wc wc;
	struct conn c = { 0 };
	uint64_t raddr, *old;
	ssize_t bad;
	bool ok;
	int ret;

	if (!(r->dev.device_cap_flags & IBV_DEVICE_XRC)) {
		skip(r, "the device has no XRC (IBV_DEVICE_XRC)");
		return chan_sync(r, "end");
	}
	if (buf_alloc(r, &sb, XRC_RW_LEN, IBV_ACCESS_LOCAL_WRITE) ||
	    buf_alloc(r, &lb, XRC_RW_LEN + 8, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	c.scq = ibv_create_cq(r->ctx, 16, NULL, NULL, 0);
	if (!c.scq)
		return fail(r, "ibv_create_cq: %s", strerror(errno));
	c.qp = ibv_create_qp_ex(r->ctx, &(struct ibv_qp_init_attr_ex){
		.qp_type = IBV_QPT_XRC_SEND,
		.send_cq = c.scq,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = r->pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
				  IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
	});
	if (!c.qp)
		return fail(r, "ibv_create_qp_ex(XRC_SEND): %s", strerror(errno));
	if (xrc_exchange(r, c.qp, psn, &remote) ||
	    xrc_connect(r, c.qp, psn, &remote, MIN(r->port.active_mtu, remote.active_mtu)) ||
	    chan_recv(r, 5, "xrc %x %x %x %" SCNx64 " %x", &a1n, &a2n, &b1n, &raddr, &rkey))
		return -1;

	/* A SEND of two packets to A1, the legacy way. */
	fill_pattern(sb.p, XRC_SEND1, 0x7101);
	{
		struct ibv_sge sge = { .addr = (uintptr_t)sb.p, .length = XRC_SEND1,
				       .lkey = sb.mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
			.qp_type.xrc.remote_srqn = a1n,
		}, *badwr;

		ret = ibv_post_send(c.qp, &wr, &badwr);
		if (ret)
			return fail(r, "ibv_post_send(XRC SEND): %s", strerror(ret));
	}
	expect_wc(r, &c, c.scq, &wc, 1, IBV_WC_SUCCESS, "SEND %u B to XRC SRQ A1", XRC_SEND1);

	/* A SEND to A2 through ibv_qp_ex. */
	fill_pattern(sb.p, XRC_SEND2, 0x7102);
	qpx = ibv_qp_to_qp_ex(c.qp);
	if (xrc_send_ex(r, qpx, 2, a2n, &sb, XRC_SEND2))
		return -1;
	expect_wc(r, &c, c.scq, &wc, 2, IBV_WC_SUCCESS, "SEND %u B to XRC SRQ A2 (ibv_qp_ex)",
		  XRC_SEND2);
	if (chan_sync(r, "sends") || chan_recv_verdict(r, &ok))
		return -1;
	check(r, ok, "the server found both SENDs in their SRQs' buffers");

	/* RDMA WRITE, READ and FETCH_ADD through the target QP (A1's PD). */
	fill_pattern(sb.p, XRC_RW_LEN, 0x7103);
	ibv_wr_start(qpx);
	qpx->wr_id = 3;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, rkey, raddr + XRC_RW_OFF);
	ibv_wr_set_xrc_srqn(qpx, a1n);
	ibv_wr_set_sge(qpx, sb.mr->lkey, (uintptr_t)sb.p, XRC_RW_LEN);
	qpx->wr_id = 4;
	ibv_wr_rdma_read(qpx, rkey, raddr + XRC_RW_OFF);
	ibv_wr_set_xrc_srqn(qpx, a1n);
	ibv_wr_set_sge(qpx, lb.mr->lkey, (uintptr_t)lb.p, XRC_RW_LEN);
	qpx->wr_id = 5;
	ibv_wr_atomic_fetch_add(qpx, rkey, raddr, 7);
	ibv_wr_set_xrc_srqn(qpx, a1n);
	ibv_wr_set_sge(qpx, lb.mr->lkey, (uintptr_t)lb.p + XRC_RW_LEN, 8);
	ret = ibv_wr_complete(qpx);
	if (ret)
		return fail(r, "ibv_wr_complete(XRC RDMA): %s", strerror(ret));
	expect_wc(r, &c, c.scq, &wc, 3, IBV_WC_SUCCESS, "RDMA WRITE %u B", XRC_RW_LEN);
	if (expect_wc(r, &c, c.scq, &wc, 4, IBV_WC_SUCCESS, "RDMA READ %u B", XRC_RW_LEN)) {
		bad = find_pattern_mismatch(lb.p, XRC_RW_LEN, 0x7103);
		check_why(r, bad < 0, "RDMA READ brought back what was written",
			  "first wrong byte at +%zd", bad);
	}
	old = (uint64_t *)(lb.p + XRC_RW_LEN);
	if (expect_wc(r, &c, c.scq, &wc, 5, IBV_WC_SUCCESS, "FETCH_ADD +7"))
		check_why(r, *old == 100, "FETCH_ADD returned the old value 100",
			  "returned %" PRIu64, *old);
	if (chan_sync(r, "rdma") || chan_recv_verdict(r, &ok))
		return -1;
	check(r, ok, "the server saw the WRITE's bytes and the FETCH_ADD's sum");

	/* An SRQ of another domain: the target refuses, the connection ends. */
	if (xrc_send_ex(r, qpx, 6, b1n, &sb, XRC_SEND2))
		return -1;
	expect_wc(r, &c, c.scq, &wc, 6, IBV_WC_REM_INV_RD_REQ_ERR,
		  "SEND to an XRC SRQ of another domain");
	check_qp_state(r, &c, IBV_QPS_ERR, "after the NAK");
	if (chan_sync(r, "foreign") || chan_sync(r, "next"))
		return -1;
	conn_close(r, &c);
	buf_free(r, &sb);
	buf_free(r, &lb);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * Subtest cq-moderation
 *
 * Completion event moderation (ibv_modify_cq): the device reports its limits (cq_mod_caps of
 * ibv_query_device_ex), takes values up to them and period 0 (no moderation), and refuses an
 * attr_mask bit it does not know.  Then rounds of SENDs to the server's receive CQ, which is on
 * a completion channel and timestamps its completions, so that an event can be timed against
 * the device clock: a clock read as the event arrives against the timestamps of the CQEs it
 * covers (taken as each CQE was written).
 *   - period (count 0, CQM_PERIOD_US): the event for one SEND cannot come before the period has
 *     passed since its CQE.  The round before it, without moderation, prints the same delay.
 *   - count (CQM_COUNT, the longest period): the client sends CQM_COUNT - 1 SENDs, pauses
 *     CQM_PAUSE_MS, then sends the last.  When the event comes, CQM_COUNT CQEs have been
 *     written or the period has passed; an event at the first CQE, as without moderation, is
 *     neither.
 *   - a burst of CQM_BURST SENDs without moderation, then with it (CQM_BURST_COUNT,
 *     CQM_BURST_PERIOD_US), reaped as an event-driven consumer does (wait for the event, ack,
 *     re-arm, poll until empty).  The events a burst took are printed, not checked: how a burst
 *     spreads over time depends on how fast the guests run.
 * Every message carries its index and a pattern of its own, checked on arrival.  The timing
 * checks are one-sided bounds: a slow guest can make an event later, never earlier.
 */

#define CQM_LEN 64
#define CQM_PERIOD_US 50000	/* 50 ms: far above an event's latency without moderation */
#define CQM_COUNT 8
#define CQM_PAUSE_MS 50		/* within the count round's period, 65.5 ms */
#define CQM_BURST 64
#define CQM_BURST_COUNT 16
#define CQM_BURST_PERIOD_US 2000

/*
 * The rounds, in this order on both sides.  The timed ones come first: re-arming a CQ that
 * still holds CQEs raises an event at once, so a burst may leave one behind, which would time
 * the next event too early.
 */
static const struct cqm_round {
	const char *name;
	uint16_t count, period;	/* the server's receive CQ's moderation */
	int n;			/* SENDs */
	int pause_at;		/* the client pauses CQM_PAUSE_MS before this SEND (0: never) */
	bool burst;		/* reaped as an event loop; else one event, then every CQE */
} cqm_rounds[] = {
	{ .name = "unmoderated", .n = 1 },
	{ .name = "period", .period = CQM_PERIOD_US, .n = 1 },
	{ .name = "count", .count = CQM_COUNT, .period = UINT16_MAX, .n = CQM_COUNT,
	  .pause_at = CQM_COUNT - 1 },
	{ .name = "burst", .n = CQM_BURST, .burst = true },
	{ .name = "moderated-burst", .count = CQM_BURST_COUNT, .period = CQM_BURST_PERIOD_US,
	  .n = CQM_BURST, .burst = true },
};

/* The server's side: its receive CQ and what it received into. */
struct cqm_srv {
	struct ibv_comp_channel *ch;
	struct ibv_cq_ex *cqx;	/* the receive CQ: on ch, with completion timestamps */
	struct ibv_cq *cq;
	struct conn c;
	struct buf rb;		/* CQM_BURST slots of CQM_LEN bytes */
	uint64_t khz;		/* the device clock's rate */
	int bad;		/* messages of the round that did not arrive as sent */
};

/*
 * Whether the device moderates completion events as far as the rounds need (a count of
 * CQM_BURST_COUNT, the longest period ibv_modify_cq can say) and has a clock to time them by;
 * without that there is nothing to test.  *lim gets its limits, *khz the clock's rate.
 */
static bool cqm_caps(struct role *r, struct ibv_cq_moderation_caps *lim, uint64_t *khz)
{
	struct ibv_device_attr_ex attr = {};
	int ret = ibv_query_device_ex(r->ctx, NULL, &attr);

	if (ret) {
		fail(r, "ibv_query_device_ex: %s", strerror(ret));
		return false;
	}
	*lim = attr.cq_mod_caps;
	if (lim->max_cq_count < CQM_BURST_COUNT || lim->max_cq_period < UINT16_MAX) {
		skip(r, "the device's CQ moderation (up to %u completions, %u us) is short of the "
		     "rounds' %u and %u", lim->max_cq_count, lim->max_cq_period, CQM_BURST_COUNT,
		     UINT16_MAX);
		return false;
	}
	if (!attr.hca_core_clock) {
		skip(r, "the device reports no clock to time events by (hca_core_clock 0)");
		return false;
	}
	*khz = attr.hca_core_clock;
	return true;
}

/* ibv_modify_cq at the device's limits, back to period 0, and with an unknown attr_mask bit. */
static void cqm_modify_checks(struct role *r, struct ibv_cq *cq,
			      const struct ibv_cq_moderation_caps *lim)
{
	struct ibv_modify_cq_attr mod = {
		.attr_mask = IBV_CQ_ATTR_MODERATE,
		.moderate = { .cq_count = lim->max_cq_count, .cq_period = lim->max_cq_period },
	};
	int ret = ibv_modify_cq(cq, &mod);

	check(r, !ret, "ibv_modify_cq(count %u, period %u us: the device's limits) succeeds (%s)",
	      lim->max_cq_count, lim->max_cq_period, ret ? strerror(ret) : "it does");
	mod.moderate.cq_period = 0;
	ret = ibv_modify_cq(cq, &mod);
	check_why(r, !ret, "ibv_modify_cq(period 0: no moderation) succeeds", "%s", strerror(ret));
	mod.attr_mask = IBV_CQ_ATTR_MODERATE | IBV_CQ_ATTR_RESERVED;
	ret = ibv_modify_cq(cq, &mod);
	check(r, ret == EINVAL, "ibv_modify_cq with an unknown attr_mask bit (0x%x) fails with "
	      "EINVAL (got %s)", IBV_CQ_ATTR_RESERVED, ret ? strerror(ret) : "success");
}

static uint32_t cqm_seed(int round, int i)
{
	return (uint32_t)(round + 1) << 16 | (uint32_t)i;
}

/* Message i of a round: its index, then a pattern of its own. */
static void cqm_fill(uint8_t *p, int round, int i)
{
	uint32_t idx = htonl(i);

	memcpy(p, &idx, sizeof(idx));
	fill_pattern(p + sizeof(idx), CQM_LEN - sizeof(idx), cqm_seed(round, i));
}

/* Whether receive completion i of a round, into slot i, brought message i whole. */
static bool cqm_msg_ok(const struct cqm_srv *s, int round, int i, uint64_t wr_id,
		       enum ibv_wc_status st, uint32_t len)
{
	const uint8_t *p = s->rb.p + (size_t)i * CQM_LEN;
	uint32_t idx;

	memcpy(&idx, p, sizeof(idx));
	return st == IBV_WC_SUCCESS && wr_id == (uint64_t)i && len == CQM_LEN &&
	       ntohl(idx) == (uint32_t)i &&
	       find_pattern_mismatch(p + sizeof(idx), CQM_LEN - sizeof(idx),
				     cqm_seed(round, i)) < 0;
}

/*
 * The channel's next completion event, acked: 1, or 0 when none came within ms (the fd is
 * non-blocking: with ms 0, only one already there).  -1: a failed check.
 */
static int cqm_event(struct role *r, struct ibv_comp_channel *ch, int ms)
{
	int64_t deadline = now_ms() + ms;
	struct ibv_cq *cq;
	void *cq_ctx;

	for (;;) {
		struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
		int left = (int)(deadline - now_ms());

		if (!ibv_get_cq_event(ch, &cq, &cq_ctx)) {
			ibv_ack_cq_events(cq, 1);
			return 1;
		}
		if (errno != EAGAIN)
			return fail(r, "ibv_get_cq_event: %s", strerror(errno));
		if (left <= 0)
			return 0;
		poll(&pfd, 1, left);
	}
}

/*
 * A timed round: one event, the device clock read as it arrives, then the round's CQEs.  With
 * a period, the event cannot have come before count CQEs were written (count > 0) or before
 * the period had passed since the first.
 */
static int cqm_reap_timed(struct role *r, struct cqm_srv *s, const struct cqm_round *k,
			  int round)
{
	int64_t t_evt, waited, period_ticks = (int64_t)k->period * (int64_t)s->khz / 1000;
	uint64_t id, ts, wall, first = 0;
	enum ibv_wc_status st;
	int by_evt = 0, ret;
	uint32_t len;
	double ms;

	ret = cqm_event(r, s->ch, r->o->timeout * 1000);
	if (ret <= 0)
		return ret ? -1 : fail(r, "round %s: no completion event within %d s", k->name,
				       r->o->timeout);
	t_evt = ts_clock(r);
	if (t_evt < 0)
		return -1;
	for (int i = 0; i < k->n; i++) {
		if (ts_poll(s->cqx, &id, &st, &len, &ts, &wall, r->o->timeout * 1000) <= 0)
			return fail(r, "round %s: receive %d did not complete within %d s", k->name,
				    i, r->o->timeout);
		s->bad += !cqm_msg_ok(s, round, i, id, st, len);
		if (!i)
			first = ts;
		by_evt += (int64_t)ts <= t_evt;
	}
	waited = t_evt - (int64_t)first;
	ms = (double)waited / (double)s->khz;
	if (!k->period) {
		info(r, "round %s: the event came %.3f ms after its CQE", k->name, ms);
		return 0;
	}
	if (!k->count) {
		check(r, waited >= period_ticks, "round %s: the event waited out the %.1f ms period "
		      "(it came %.3f ms after its CQE)", k->name, k->period / 1000.0, ms);
		return 0;
	}
	check(r, by_evt >= k->count || waited >= period_ticks, "round %s: the event waited for %u "
	      "CQEs or the %.1f ms period (%d of %d written by then, %.3f ms after the first)",
	      k->name, k->count, k->period / 1000.0, by_evt, k->n, ms);
	return 0;
}

/*
 * A burst, reaped the event-driven way.  Re-arming before polling misses no completion, and on
 * a CQ that still holds CQEs it raises the next event at once: the count includes those.
 */
static int cqm_reap_burst(struct role *r, struct cqm_srv *s, const struct cqm_round *k,
			  int round)
{
	int got = 0, events = 0, ret = 0;
	uint64_t id, ts, wall;
	enum ibv_wc_status st;
	uint32_t len;

	while (got < k->n) {
		ret = cqm_event(r, s->ch, r->o->timeout * 1000);
		if (ret <= 0)
			return ret ? -1 : fail(r, "round %s: %d of %d SENDs arrived, then no "
					       "completion event within %d s", k->name, got, k->n,
					       r->o->timeout);
		events++;
		ret = ibv_req_notify_cq(s->cq, 0);
		if (ret)
			return fail(r, "ibv_req_notify_cq: %s", strerror(ret));
		while (got < k->n && (ret = ts_poll(s->cqx, &id, &st, &len, &ts, &wall, 0)) > 0) {
			s->bad += !cqm_msg_ok(s, round, got, id, st, len);
			got++;
		}
		if (ret < 0)
			return fail(r, "round %s: ibv_start_poll failed", k->name);
	}
	info(r, "round %s: %d SENDs in %d completion events (count %u, period %u us)", k->name,
	     k->n, events, k->count, k->period);
	return 0;
}

static int cqm_serve_round(struct role *r, struct cqm_srv *s, int round)
{
	const struct cqm_round *k = &cqm_rounds[round];
	struct ibv_modify_cq_attr mod = {
		.attr_mask = IBV_CQ_ATTR_MODERATE,
		.moderate = { .cq_count = k->count, .cq_period = k->period },
	};
	int ret = ibv_modify_cq(s->cq, &mod);

	if (ret)
		return fail(r, "round %s: ibv_modify_cq(count %u, period %u us): %s", k->name,
			    k->count, k->period, strerror(ret));
	memset(s->rb.p, 0, s->rb.len);
	for (int i = 0; i < k->n; i++)
		if (post_recv(r, &s->c, i, s->rb.p + (size_t)i * CQM_LEN, CQM_LEN,
			      s->rb.mr->lkey))
			return -1;
	/* An event the last burst left behind goes now, not into this round's. */
	while ((ret = cqm_event(r, s->ch, 0)) > 0)
		;
	if (ret < 0)
		return -1;
	ret = ibv_req_notify_cq(s->cq, 0);
	if (ret)
		return fail(r, "ibv_req_notify_cq: %s", strerror(ret));
	s->bad = 0;
	/* The client sends after this. */
	if (chan_sync(r, k->name) ||
	    (k->burst ? cqm_reap_burst(r, s, k, round) : cqm_reap_timed(r, s, k, round)))
		return -1;
	check(r, !s->bad, "round %s: %d SENDs arrived in order, each with its index and bytes "
	      "(%d did not)", k->name, k->n, s->bad);
	return 0;
}

static int cq_moderation_server(struct role *r)
{
	struct ibv_cq_init_attr_ex cx = {
		.cqe = CQM_BURST,
		.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
	};
	struct conn_params p = conn_defaults();
	struct cqm_srv s = { 0 };
	struct ibv_cq_moderation_caps lim;
	int ret;

	if (!cqm_caps(r, &lim, &s.khz))
		return chan_sync(r, "end");
	s.ch = ibv_create_comp_channel(r->ctx);
	if (!s.ch)
		return fail(r, "ibv_create_comp_channel: %s", strerror(errno));
	/* Events are read with a timeout (cqm_event). */
	if (!set_nonblocking(s.ch->fd))
		return fail(r, "cannot make the completion channel non-blocking: %s",
			    strerror(errno));
	cx.channel = s.ch;
	s.cqx = ibv_create_cq_ex(r->ctx, &cx);
	if (!s.cqx)
		return fail(r, "ibv_create_cq_ex(COMPLETION_TIMESTAMP, channel): %s",
			    strerror(errno));
	s.cq = ibv_cq_ex_to_cq(s.cqx);
	cqm_modify_checks(r, s.cq, &lim);

	p.rcq = s.cq;
	if (buf_alloc(r, &s.rb, CQM_BURST * CQM_LEN, IBV_ACCESS_LOCAL_WRITE) ||
	    conn_open(r, &s.c, &p, NULL))
		return -1;
	for (int i = 0; i < (int)ARRAY_SIZE(cqm_rounds); i++)
		if (cqm_serve_round(r, &s, i))
			return -1;
	conn_close(r, &s.c);
	/* Every event read was acked; one still unread does not hold the CQ. */
	ret = ibv_destroy_cq(s.cq);
	if (ret)
		fail(r, "ibv_destroy_cq (recv CQ): %s", strerror(ret));
	ret = ibv_destroy_comp_channel(s.ch);
	if (ret)
		fail(r, "ibv_destroy_comp_channel: %s", strerror(ret));
	buf_free(r, &s.rb);
	return chan_sync(r, "end");
}

/* A round's SENDs, posted without waiting for any (but the pause), then their completions. */
static int cqm_send_round(struct role *r, struct conn *c, struct buf *sb, int round)
{
	const struct cqm_round *k = &cqm_rounds[round];
	struct ibv_wc wc;
	int bad = 0;

	for (int i = 0; i < k->n; i++)
		cqm_fill(sb->p + (size_t)i * CQM_LEN, round, i);
	if (chan_sync(r, k->name))
		return -1;
	for (int i = 0; i < k->n; i++) {
		if (k->pause_at && i == k->pause_at)
			sleep_ms(CQM_PAUSE_MS);
		if (post_send(r, c, i, IBV_WR_SEND, sb->p + (size_t)i * CQM_LEN, CQM_LEN,
			      sb->mr->lkey, 0, 0))
			return -1;
	}
	for (int i = 0; i < k->n; i++) {
		if (poll_one(c->scq, &wc, r->o->timeout * 1000) <= 0)
			return fail(r, "round %s: SEND %d did not complete within %d s", k->name, i,
				    r->o->timeout);
		bad += wc.wr_id != (uint64_t)i || wc.status != IBV_WC_SUCCESS;
	}
	check(r, !bad, "round %s: %d SENDs complete successfully, in order (%d did not)", k->name,
	      k->n, bad);
	return 0;
}

static int cq_moderation_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct conn c;
	struct buf sb;
	struct ibv_cq_moderation_caps lim;
	uint64_t khz;

	if (!cqm_caps(r, &lim, &khz))
		return chan_sync(r, "end");
	if (buf_alloc(r, &sb, CQM_BURST * CQM_LEN, IBV_ACCESS_LOCAL_WRITE) ||
	    conn_open(r, &c, &p, NULL))
		return -1;
	for (int i = 0; i < (int)ARRAY_SIZE(cqm_rounds); i++)
		if (cqm_send_round(r, &c, &sb, i))
			return -1;
	conn_close(r, &c);
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

struct subtest {
	const char *name;
	int (*server)(struct role *r);
	int (*client)(struct role *r);
	const char *doc;
};

/* The index in this table is the TCP port offset: do not reorder, append. */
static const struct subtest subtests[] = {
	{ "bad-lkey", bad_lkey_server, bad_lkey_client,
	  "SEND with a bad lkey: LOC_PROT_ERR, QP in ERR, later WRs flushed" },
	{ "rkey-violation", rkey_violation_server, rkey_violation_client,
	  "RDMA WRITE with bad rkey/range/access: REM_ACCESS_ERR, target unchanged" },
	{ "rnr-retry", rnr_retry_server, rnr_retry_client,
	  "SEND before the receive: RNR retries succeed (rnr_retry 7) or fail (0)" },
	{ "flush-on-destroy", flush_server, flush_client,
	  "QP to ERR: outstanding receives and SENDs flushed in order; destroy" },
	{ "cq-overflow", cq_overflow_server, cq_overflow_client,
	  "more completions than CQEs: IBV_EVENT_CQ_ERR" },
	{ "send-sizes", send_sizes_server, send_sizes_client,
	  "SEND/RECV 0 B..1 MiB at MTU 256 and 4096, SEND with immediate" },
	{ "rdma-rw", rdma_rw_server, rdma_rw_client,
	  "RDMA WRITE/READ with several SGEs at odd addresses" },
	{ "atomics", atomics_server, atomics_client,
	  "FETCH_ADD and CMP_SWAP on a remote counter; misaligned atomic refused" },
	{ "ud-qkey", ud_qkey_server, ud_qkey_client,
	  "UD SEND: right Q_Key delivered (GRH space, src_qp, slid); wrong one dropped, counted" },
	{ "srq-limit", srq_limit_server, srq_limit_client,
	  "two QPs on an SRQ: SRQ_LIMIT_REACHED once below the limit, then disarmed" },
	{ "mw", mw_server, mw_client,
	  "memory windows type 2 (LOCAL_INV, SEND_WITH_INV, range) and type 1 (unbind)" },
	{ "rereg", rereg_server, rereg_client,
	  "ibv_rereg_mr: access, translation, PD changed under the same keys; the next WRITE sees it" },
	{ "timestamps", timestamps_server, timestamps_client,
	  "device clock (ibv_query_rt_values_ex) and completion timestamps of a SEND ping-pong" },
	{ "xrc", xrc_server, xrc_client,
	  "XRC: SENDs, RDMA and atomics through one target QP to the SRQs they name; another domain's SRQ refused" },
	{ "cq-moderation", cq_moderation_server, cq_moderation_client,
	  "ibv_modify_cq: limits; an event waits for its period or count (device clock); bursts" },
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pib-verbs-test [options] SUBTEST|all [SERVER_HOST]\n"
		"\n"
		"Without SERVER_HOST: run the server side and wait for a client.\n"
		"With SERVER_HOST:    run the client side against that server.\n"
		"With -l:             run both sides in this process (loopback through the port).\n"
		"\n"
		"options:\n"
		"  -d DEV    RDMA device (default: the first one)\n"
		"  -i PORT   device port (default 1)\n"
		"  -g IDX    GID index to use (default: none on InfiniBand, a RoCE v2 IPv4 GID on\n"
		"            RoCE)\n"
		"  -p PORT   TCP port (default %d + the subtest's index below)\n"
		"  -t SEC    how long to wait for any one completion or message (default 60)\n"
		"  -u N      the RC ACK timeout, 4.096 us * 2^N (default 16: 268 ms), of the\n"
		"            subtests that take the default; with 7 retries a link may be gone for\n"
		"            8 timeouts before a transfer fails\n"
		"  -l        loopback: both sides in one process\n"
		"\n"
		"subtests:\n", DEFAULT_TCP_PORT);
	for (size_t i = 0; i < ARRAY_SIZE(subtests); i++)
		fprintf(f, "  %zu %-15s %s\n", i, subtests[i].name, subtests[i].doc);
	fprintf(f, "  all               every subtest in turn\n");
}

/* --- running the roles --- */

struct role_run {
	struct role r;
	int (*fn)(struct role *r);
	int ret;
};

static void *role_main(void *arg)
{
	struct role_run *run = arg;
	struct role *r = &run->r;

	run->ret = role_open(r);
	if (!run->ret)
		run->ret = run->fn(r);
	role_close(r, run->ret != 0);
	/* Closing the channel tells a peer that still waits that we are gone. */
	close(r->sock);
	return NULL;
}

static void role_init(struct role_run *run, const struct opts *o, const struct subtest *t,
		      bool server, int sock)
{
	memset(run, 0, sizeof(*run));
	snprintf(run->r.who, sizeof(run->r.who), "%s/%s", t->name, server ? "server" : "client");
	run->r.o = o;
	run->r.sock = sock;
	run->r.seed[0] = (unsigned short)getpid();
	run->r.seed[1] = (unsigned short)time(NULL);
	run->r.seed[2] = server;
	run->fn = server ? t->server : t->client;
}

static void run_subtest(const struct opts *o, size_t idx)
{
	const struct subtest *t = &subtests[idx];
	int port = o->tcp_port ? o->tcp_port : DEFAULT_TCP_PORT + (int)idx;
	struct role_run server, client;
	int sv[2];

	printf("== %s: %s\n", t->name, t->doc);
	if (o->loopback) {
		pthread_t th;

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
			report_fail(t->name, "socketpair: %s", strerror(errno));
			return;
		}
		role_init(&server, o, t, true, sv[0]);
		role_init(&client, o, t, false, sv[1]);
		if ((errno = pthread_create(&th, NULL, role_main, &server))) {
			report_fail(t->name, "pthread_create: %s", strerror(errno));
			return;
		}
		role_main(&client);
		pthread_join(th, NULL);
	} else if (o->peer) {
		role_init(&client, o, t, false, tcp_connect(o->peer, port, o->timeout));
		if (client.r.sock < 0) {
			fail(&client.r, "cannot connect to %s port %d", o->peer, port);
			return;
		}
		role_main(&client);
	} else {
		role_init(&server, o, t, true, tcp_listen_accept(port, o->timeout));
		if (server.r.sock < 0) {
			fail(&server.r, "no client on port %d: %s", port, strerror(errno));
			return;
		}
		role_main(&server);
	}
}

int main(int argc, char **argv)
{
	struct opts o = { .ib_port = 1, .gid_idx = -1, .timeout = 60 };
	const char *which;
	size_t first, last;
	int c;

	while ((c = getopt(argc, argv, "d:i:g:p:t:u:lh")) != -1) {
		switch (c) {
		case 'd': o.dev_name = optarg; break;
		case 'i': o.ib_port = atoi(optarg); break;
		case 'g': o.gid_idx = atoi(optarg); break;
		case 'p': o.tcp_port = atoi(optarg); break;
		case 't': o.timeout = atoi(optarg); break;
		case 'u': default_qp_timeout = atoi(optarg) & 31; break;
		case 'l': o.loopback = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc || argc - optind > 2 || o.timeout <= 0) {
		usage(stderr);
		return 2;
	}
	which = argv[optind];
	o.peer = argc - optind == 2 ? argv[optind + 1] : NULL;
	if (o.peer && o.loopback) {
		fprintf(stderr, "pib-verbs-test: -l and SERVER_HOST exclude each other\n");
		return 2;
	}
	if (!strcmp(which, "all")) {
		first = 0;
		last = ARRAY_SIZE(subtests) - 1;
	} else {
		for (first = 0; first < ARRAY_SIZE(subtests); first++)
			if (!strcmp(which, subtests[first].name))
				break;
		if (first == ARRAY_SIZE(subtests)) {
			fprintf(stderr, "pib-verbs-test: no subtest '%s'\n\n", which);
			usage(stderr);
			return 2;
		}
		last = first;
	}

	setvbuf(stdout, NULL, _IOLBF, 0);	/* lines in order even through a pipe */
	signal(SIGPIPE, SIG_IGN);		/* a vanished peer is an error return, not a kill */
	for (size_t i = first; i <= last; i++) {
		/* Every subtest is a handful of waits; none should take 10 of them. */
		report_watchdog(subtests[i].name, 10 * o.timeout);
		run_subtest(&o, i);
	}
	report_watchdog(which, 0);
	return report_summary(which);
}
