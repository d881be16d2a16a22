// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-verbs-test: tests of the RC data path, written against plain libibverbs.
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
#include <stdatomic.h>
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

#define DEFAULT_TCP_PORT 18515	/* ibv_rc_pingpong's port; subtest k listens on this + k */
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

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
	const char *test;	/* subtest name, for the output */
	const char *name;	/* "server" or "client" */
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

static atomic_int n_fail;
static atomic_int n_pass;

static void out(struct role *r, const char *tag, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* One fprintf per line: stdio locks the stream, so loopback threads do not interleave. */
	fprintf(stdout, "%-5s %s/%s: %s\n", tag, r->test, r->name, msg);
}

/* check(): count and print one assertion.  Returns ok, so callers can chain on it. */
static bool __attribute__((format(printf, 3, 4)))
check(struct role *r, bool ok, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	out(r, ok ? "PASS" : "FAIL", fmt, ap);
	va_end(ap);
	if (ok)
		n_pass++;
	else
		n_fail++;
	return ok;
}

/*
 * check_why(): a check whose details matter only when it fails.  PASS prints what; FAIL prints
 * what and the details (why_fmt).
 */
static bool __attribute__((format(printf, 4, 5)))
check_why(struct role *r, bool ok, const char *what, const char *why_fmt, ...)
{
	char why[768];
	va_list ap;

	if (ok)
		return check(r, true, "%s", what);
	va_start(ap, why_fmt);
	vsnprintf(why, sizeof(why), why_fmt, ap);
	va_end(ap);
	return check(r, false, "%s: %s", what, why);
}

/*
 * xfail(): an outcome that the IBTA forbids but that a known device (Soft-RoCE) produces: printed,
 * not counted as a failure, so that the rest of a subtest can still validate on that device.
 */
static void __attribute__((format(printf, 2, 3)))
xfail(struct role *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	out(r, "XFAIL", fmt, ap);
	va_end(ap);
}

/* fail(): a failure that stops the role (a setup step that did not work).  Returns -1. */
static int __attribute__((format(printf, 2, 3)))
fail(struct role *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	out(r, "FAIL", fmt, ap);
	va_end(ap);
	n_fail++;
	return -1;
}

static void __attribute__((format(printf, 2, 3)))
info(struct role *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	out(r, "info", fmt, ap);
	va_end(ap);
}

static void __attribute__((format(printf, 2, 3)))
skip(struct role *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	out(r, "SKIP", fmt, ap);
	va_end(ap);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

static int role_open(struct role *r)
{
	struct ibv_device **list;
	struct ibv_device *dev;
	int flags;

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
	flags = fcntl(r->ctx->async_fd, F_GETFL);
	if (flags < 0 || fcntl(r->ctx->async_fd, F_SETFL, flags | O_NONBLOCK) < 0)
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
};

static struct conn_params conn_defaults(void)
{
	return (struct conn_params){
		.send_cqe = 256, .recv_cqe = 256,
		.max_send_wr = 128, .max_recv_wr = 128,
		.mtu = IBV_MTU_4096,
		.min_rnr_timer = 12,	/* 0.64 ms */
		.rnr_retry = 7,
		.timeout = 16,		/* 268 ms: generous, guests may run under TCG */
		.retry_cnt = 7,
	};
}

struct conn {
	struct ibv_cq *scq, *rcq;
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
	c->scq = ibv_create_cq(r->ctx, p->send_cqe, NULL, NULL, 0);
	c->rcq = ibv_create_cq(r->ctx, p->recv_cqe, NULL, NULL, 0);
	if (!c->scq || !c->rcq)
		return fail(r, "ibv_create_cq: %s", strerror(errno));
	init.send_cq = c->scq;
	init.recv_cq = c->rcq;
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
	if (c->rcq && (ret = ibv_destroy_cq(c->rcq)))
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

static int post_recv(struct role *r, struct conn *c, uint64_t wr_id, void *addr, uint32_t len,
		     uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;
	int ret = ibv_post_recv(c->qp, &wr, &bad);

	return ret ? fail(r, "ibv_post_recv(wr_id %" PRIu64 "): %s", wr_id, strerror(ret)) : 0;
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

/*
 * Wait for an async event of the given type about the given object (a CQ, QP, ...), reading and
 * acknowledging every event that comes meanwhile.  Events must be acked before their object is
 * destroyed, or ibv_destroy_* waits for the ack forever.
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
		/* The element is a union: compare the member that belongs to the event type. */
		match = ev.event_type == want &&
			(ev.event_type == IBV_EVENT_CQ_ERR ? (void *)ev.element.cq :
							     (void *)ev.element.qp) == object;
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
 * The subtest table and main
 */

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
		"  -l        loopback: both sides in one process\n"
		"\n"
		"subtests:\n", DEFAULT_TCP_PORT);
	for (size_t i = 0; i < ARRAY_SIZE(subtests); i++)
		fprintf(f, "  %zu %-15s %s\n", i, subtests[i].name, subtests[i].doc);
	fprintf(f, "  all               every subtest in turn\n");
}

/* --- TCP --- */

static int tcp_listen_accept(int port, int timeout_s)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				  .sin6_addr = IN6ADDR_ANY_INIT };
	struct pollfd pfd;
	int one = 1, zero = 0, ls, fd;

	ls = socket(AF_INET6, SOCK_STREAM, 0);
	if (ls < 0) {
		/* No IPv6 in this kernel: IPv4 only. */
		struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons(port) };

		ls = socket(AF_INET, SOCK_STREAM, 0);
		if (ls < 0)
			return -1;
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(ls, (struct sockaddr *)&a4, sizeof(a4)))
			goto err;
	} else {
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (bind(ls, (struct sockaddr *)&a, sizeof(a)))
			goto err;
	}
	if (listen(ls, 1))
		goto err;
	pfd = (struct pollfd){ .fd = ls, .events = POLLIN };
	if (poll(&pfd, 1, timeout_s * 1000) <= 0) {
		errno = ETIMEDOUT;
		goto err;
	}
	fd = accept(ls, NULL, NULL);
	close(ls);
	return fd;
err:
	close(ls);
	return -1;
}

/* Connect, retrying for up to timeout_s: the server may not be listening yet. */
static int tcp_connect(const char *host, int port, int timeout_s)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
	int64_t deadline = now_ms() + timeout_s * 1000LL;
	char service[16];
	int fd = -1, err;

	snprintf(service, sizeof(service), "%d", port);
	err = getaddrinfo(host, service, &hints, &res);
	if (err) {
		fprintf(stderr, "pib-verbs-test: %s: %s\n", host, gai_strerror(err));
		return -1;
	}
	while (fd < 0) {
		for (ai = res; ai && fd < 0; ai = ai->ai_next) {
			fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
			if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen)) {
				close(fd);
				fd = -1;
			}
		}
		if (fd < 0) {
			if (now_ms() >= deadline)
				break;
			sleep_ms(200);
		}
	}
	freeaddrinfo(res);
	return fd;
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
	run->r.test = t->name;
	run->r.name = server ? "server" : "client";
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
			perror("socketpair");
			n_fail++;
			return;
		}
		role_init(&server, o, t, true, sv[0]);
		role_init(&client, o, t, false, sv[1]);
		if (pthread_create(&th, NULL, role_main, &server)) {
			perror("pthread_create");
			n_fail++;
			return;
		}
		role_main(&client);
		pthread_join(th, NULL);
	} else if (o->peer) {
		int fd = tcp_connect(o->peer, port, o->timeout);

		if (fd < 0) {
			printf("FAIL  %s/client: cannot connect to %s port %d\n", t->name, o->peer,
			       port);
			n_fail++;
			return;
		}
		role_init(&client, o, t, false, fd);
		role_main(&client);
	} else {
		int fd = tcp_listen_accept(port, o->timeout);

		if (fd < 0) {
			printf("FAIL  %s/server: no client on port %d: %s\n", t->name, port,
			       strerror(errno));
			n_fail++;
			return;
		}
		role_init(&server, o, t, true, fd);
		role_main(&server);
	}
}

static int watchdog_seconds;

/* A hung verb (say, a destroy that never returns) must not hang the test run. */
static void watchdog(int sig)
{
	char msg[128];
	int n = snprintf(msg, sizeof(msg), "FAIL  watchdog: no result after %d s, giving up\n",
			 watchdog_seconds);

	(void)sig;
	if (write(STDOUT_FILENO, msg, n) < 0)
		_exit(1);
	_exit(1);
}

int main(int argc, char **argv)
{
	struct opts o = { .ib_port = 1, .gid_idx = -1, .timeout = 60 };
	const char *which;
	size_t first, last;
	int c;

	while ((c = getopt(argc, argv, "d:i:g:p:t:lh")) != -1) {
		switch (c) {
		case 'd': o.dev_name = optarg; break;
		case 'i': o.ib_port = atoi(optarg); break;
		case 'g': o.gid_idx = atoi(optarg); break;
		case 'p': o.tcp_port = atoi(optarg); break;
		case 't': o.timeout = atoi(optarg); break;
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
	signal(SIGALRM, watchdog);
	for (size_t i = first; i <= last; i++) {
		/* Every subtest is a handful of waits; none should take 10 of them. */
		watchdog_seconds = 10 * o.timeout;
		alarm(watchdog_seconds);
		run_subtest(&o, i);
	}
	alarm(0);
	printf("== %s: %d passed, %d failed\n", which, n_pass, n_fail);
	return n_fail ? 1 : 0;
}
