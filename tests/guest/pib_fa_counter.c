// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-fa-counter: two nodes doing FETCH_AND_ADD on one counter, N times each, leave it at
 * exactly 2N.  That is the promise of an HCA's atomics (atomic_cap HCA or better): every atomic
 * that reaches one device, through whichever of its QPs, is applied as one indivisible
 * read-modify-write, so no two of them ever read the same old value.
 *
 * The counter lives on the server's node.  Two requesters hammer it at the same time:
 *
 *     node0 (server)                                          node1 (client)
 *     counter MR (REMOTE_ATOMIC)
 *       ^        ^
 *       |        +-- QP "target" <========= link =========== QP "remote"  N x FETCH_ADD +1
 *       +-- QP "loop B" <-- QP "loop A"   N x FETCH_ADD +1
 *           (RC loopback through node0's own LID: the device delivers to itself)
 *
 * so the device serves atomics on one address from two responder QPs at once, one fed by the
 * link and one by its own requester.  Each requester keeps up to max_rd_atomic (16 by default)
 * atomics in flight and records every returned old value in its own slot.  Then:
 *
 *   - every completion is SUCCESS with opcode FETCH_ADD, in posting order;
 *   - each requester's old values strictly increase (one QP's atomics execute in PSN order);
 *   - the 2N old values of both requesters (the client sends its N to the server) are exactly
 *     {0, ..., 2N-1}: no value was returned twice, none was skipped;
 *   - the two requesters really overlapped (the owner of consecutive values switches);
 *   - the counter ends at 2N, and every other byte of its page is unchanged;
 *   - no async event, no completion on a responder QP, every QP still in RTS.
 *
 * Usage (InfiniBand, LID routing; on RoCE a RoCE v2 GID is picked, or -g):
 *
 *     node0$ pib-fa-counter -d pib_0 server
 *     node1$ pib-fa-counter -d pib_0 client node0
 *
 * The roles talk over TCP (port 18600 by default): text lines, plus the client's old values as
 * one binary block.  Output is one line per check, like pib-verbs-test:
 *
 *     PASS  fa-counter/server: final counter 20000 (2 x 10000 FETCH_ADD +1) ...
 *
 * Exit status: 0 when every check passed, 1 when one failed, 2 on a usage error.  Every wait
 * has a timeout (-t per completion or message, -T for the whole run, backed by a watchdog), so
 * a failure never hangs.  Nothing here knows about pib: the same binary runs on Soft-RoCE and
 * on real HCAs.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
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

#include <netinet/in.h>

#include <infiniband/verbs.h>

#include "pib_report.h"
#include "pib_test_util.h"

#define DEFAULT_TCP_PORT 18600
#define DEFAULT_ITERS	 10000
#define DEFAULT_DEPTH	 16
#define MAX_ITERS	 (1 << 24)
#define PAGE		 4096
#define COUNTER_OFF	 64			/* the counter's offset in its page */
#define GUARD_BYTE	 0xa5			/* every other byte of the counter's page */
#define UNWRITTEN	 0xdeadbeefdeadbeefull	/* a result slot the HCA never wrote */

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* =============================================================================================
 * Options, output and checks
 */

struct opts {
	const char *dev_name;	/* -d: NULL means the first device */
	int ib_port;		/* -i */
	int gid_idx;		/* -g: -1 means pick one (RoCE) or none (InfiniBand) */
	int tcp_port;		/* -p */
	int iters;		/* -n: FETCH_ADDs per requester (the server tells the client) */
	int depth;		/* -q: atomics in flight per requester, capped by the device */
	int timeout;		/* -t: seconds for any one completion or message */
	int total;		/* -T: seconds for the whole run */
	const char *peer;	/* client: the server's host name */
};

/* "fa-counter/server" or "fa-counter/client": who speaks in the output (pib_report.h). */
static const char *who;
static int64_t run_deadline;	/* now_ms() at which the whole run gives up (-T) */

#define check(ok, ...)			report_check(who, ok, __VA_ARGS__)
#define check_why(ok, what, ...)	report_check_why(who, ok, what, __VA_ARGS__)
#define fail(...)			report_fail(who, __VA_ARGS__)
#define info(...)			report_info(who, __VA_ARGS__)

/* =============================================================================================
 * The TCP channel: text lines ("word args...\n") and one binary block, read through a buffer
 * with a deadline on every read.
 */

struct chan {
	int fd;
	char buf[4096];
	size_t head, len;	/* unread bytes: buf[head .. head + len) */
};

/* Read more bytes into the buffer (which must be empty), before deadline. */
static int chan_fill(struct chan *ch, int64_t deadline)
{
	for (;;) {
		struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		ssize_t got;

		if (left <= 0)
			return fail("channel: nothing from the peer in time");
		if (poll(&pfd, 1, (int)MIN(left, 1000)) <= 0)
			continue;
		got = read(ch->fd, ch->buf, sizeof(ch->buf));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return fail("channel: the peer went away");
		ch->head = 0;
		ch->len = got;
		return 0;
	}
}

static int chan_read_line(struct chan *ch, char *line, size_t size, int64_t deadline)
{
	size_t n = 0;

	for (;;) {
		char c;

		if (!ch->len && chan_fill(ch, deadline))
			return -1;
		c = ch->buf[ch->head++];
		ch->len--;
		if (c == '\n') {
			line[n] = '\0';
			return 0;
		}
		if (n + 1 < size)
			line[n++] = c;
	}
}

static int chan_read_bytes(struct chan *ch, void *p, size_t size, int64_t deadline)
{
	uint8_t *d = p;

	while (size) {
		size_t n;

		if (!ch->len && chan_fill(ch, deadline))
			return -1;
		n = MIN(size, ch->len);
		memcpy(d, ch->buf + ch->head, n);
		ch->head += n;
		ch->len -= n;
		d += n;
		size -= n;
	}
	return 0;
}

static int chan_write(struct chan *ch, const void *p, size_t len)
{
	const uint8_t *s = p;

	while (len) {
		ssize_t w = write(ch->fd, s, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return fail("channel: write to the peer failed: %s", strerror(errno));
		s += w;
		len -= w;
	}
	return 0;
}

static int __attribute__((format(printf, 2, 3)))
chan_send(struct chan *ch, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(line) - 1)
		return fail("channel: message too long");
	line[n++] = '\n';
	return chan_write(ch, line, n);
}

/*
 * Receive one line and parse it with sscanf(fmt), whose literal words must match too; n is the
 * number of conversions fmt must make.
 */
static int __attribute__((format(scanf, 4, 5)))
chan_recv(struct chan *ch, int64_t deadline, int n, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int got;

	if (chan_read_line(ch, line, sizeof(line), deadline))
		return -1;
	va_start(ap, fmt);
	got = vsscanf(line, fmt, ap);
	va_end(ap);
	if (got != n)
		return fail("channel: expected \"%s\" from the peer, got \"%s\"", fmt, line);
	return 0;
}

/* Receive one line that must be exactly word. */
static int chan_expect(struct chan *ch, int64_t deadline, const char *word)
{
	char line[256];

	if (chan_read_line(ch, line, sizeof(line), deadline))
		return -1;
	if (strcmp(line, word))
		return fail("channel: expected \"%s\" from the peer, got \"%s\"", word, line);
	return 0;
}

/* The deadline for one message the peer sends without doing anything long first. */
static int64_t msg_deadline(const struct opts *o)
{
	return MIN(now_ms() + o->timeout * 1000LL, run_deadline);
}

/* Connect, retrying for up to timeout_s: the server may not be listening yet. */
/* =============================================================================================
 * The device, memory and RC QPs
 */

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	int ib_port;
	int gid_idx;		/* -1: LID routing, no GRH */
	union ibv_gid gid;
	int depth;		/* our max_rd_atomic and max_dest_rd_atomic */
	unsigned short seed[3];	/* nrand48: first PSNs */
};

/* A page-aligned buffer and its MR. */
struct buf {
	void *p;
	size_t len;
	struct ibv_mr *mr;
};

/* One RC QP with a CQ for both its queues. */
struct qp {
	const char *name;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint32_t psn;		/* our first send PSN */
};

/* What the other end needs to reach a QP. */
struct qp_info {
	uint16_t lid;
	uint32_t qpn;
	uint32_t psn;
	enum ibv_mtu mtu;	/* the port's active MTU */
	int rd_atom;		/* atomics it accepts in flight (max_dest_rd_atomic) */
	union ibv_gid gid;
};

/*
 * InfiniBand routes by LID inside a subnet: no GRH.  RoCE has no LIDs, so every packet carries
 * a GRH; prefer a RoCE v2 GID holding an IPv4 address, like `ibv_rc_pingpong -g`.
 */
static int pick_gid_index(struct dev *d, int wanted)
{
	static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };
	int first_v2 = -1;

	if (wanted >= 0)
		return wanted;
	if (d->port.link_layer != IBV_LINK_LAYER_ETHERNET)
		return -1;
	for (int i = 0; i < d->port.gid_tbl_len; i++) {
		struct ibv_gid_entry e;

		if (ibv_query_gid_ex(d->ctx, d->ib_port, i, &e, 0) ||
		    e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		if (!memcmp(e.gid.raw, v4_prefix, sizeof(v4_prefix)))
			return i;
		if (first_v2 < 0)
			first_v2 = i;
	}
	return first_v2 >= 0 ? first_v2 : 0;
}

static const char *atomic_cap_str(enum ibv_atomic_cap c)
{
	switch (c) {
	case IBV_ATOMIC_NONE: return "NONE";
	case IBV_ATOMIC_HCA: return "HCA";
	case IBV_ATOMIC_GLOB: return "GLOB";
	default: return "?";
	}
}

static int dev_open(struct dev *d, const struct opts *o, bool server)
{
	struct ibv_device **list;
	struct ibv_device *found = NULL;
	int flags;

	memset(d, 0, sizeof(*d));
	d->ib_port = o->ib_port;
	d->seed[0] = (unsigned short)getpid();
	d->seed[1] = (unsigned short)time(NULL);
	d->seed[2] = server;
	list = ibv_get_device_list(NULL);
	if (!list)
		return fail("ibv_get_device_list: %s", strerror(errno));
	for (int i = 0; list[i] && !found; i++)
		if (!o->dev_name || !strcmp(ibv_get_device_name(list[i]), o->dev_name))
			found = list[i];
	if (found)
		d->ctx = ibv_open_device(found);
	ibv_free_device_list(list);
	if (!found)
		return fail("no RDMA device %s", o->dev_name ? o->dev_name : "at all");
	if (!d->ctx)
		return fail("ibv_open_device: %s", strerror(errno));
	if (ibv_query_device(d->ctx, &d->attr))
		return fail("ibv_query_device failed");
	if (d->attr.atomic_cap == IBV_ATOMIC_NONE)
		return fail("%s has no atomics (atomic_cap NONE)", ibv_get_device_name(found));
	if (ibv_query_port(d->ctx, d->ib_port, &d->port))
		return fail("ibv_query_port(%d) failed", d->ib_port);
	if (d->port.state != IBV_PORT_ACTIVE)
		return fail("port %d is %s, not ACTIVE", d->ib_port,
			    ibv_port_state_str(d->port.state));
	d->gid_idx = pick_gid_index(d, o->gid_idx);
	if (d->gid_idx >= 0 && ibv_query_gid(d->ctx, d->ib_port, d->gid_idx, &d->gid))
		return fail("ibv_query_gid(%d) failed", d->gid_idx);
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd)
		return fail("ibv_alloc_pd: %s", strerror(errno));
	d->depth = MIN(o->depth, MIN(d->attr.max_qp_rd_atom, d->attr.max_qp_init_rd_atom));
	if (d->depth < 1)
		return fail("the device allows no atomics in flight (max_qp_rd_atom %d, "
			    "max_qp_init_rd_atom %d)", d->attr.max_qp_rd_atom,
			    d->attr.max_qp_init_rd_atom);

	/* Async events are drained without blocking at the end (check_no_async_events). */
	flags = fcntl(d->ctx->async_fd, F_GETFL);
	if (flags < 0 || fcntl(d->ctx->async_fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return fail("cannot make the async event fd non-blocking: %s", strerror(errno));

	info("device %s port %d: LID 0x%04x, %s, GID index %d, atomic_cap %s, "
	     "max_qp_rd_atom %d: %d atomics in flight per QP", ibv_get_device_name(found),
	     d->ib_port, d->port.lid,
	     d->port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand",
	     d->gid_idx, atomic_cap_str(d->attr.atomic_cap), d->attr.max_qp_rd_atom, d->depth);
	return 0;
}

/* Everything else is gone by now (or the run failed, and closing the device frees it). */
static void dev_close(struct dev *d, bool clean)
{
	if (d->pd && clean && ibv_dealloc_pd(d->pd))
		fail("ibv_dealloc_pd failed (resources left behind?)");
	if (d->ctx && ibv_close_device(d->ctx))
		fail("ibv_close_device failed");
	memset(d, 0, sizeof(*d));
}

static int buf_alloc(struct dev *d, struct buf *b, size_t len, int access, uint8_t fill)
{
	memset(b, 0, sizeof(*b));
	len = (len + PAGE - 1) / PAGE * PAGE;
	if (posix_memalign(&b->p, PAGE, len))
		return fail("out of memory (%zu bytes)", len);
	memset(b->p, fill, len);
	b->len = len;
	b->mr = ibv_reg_mr(d->pd, b->p, len, access);
	if (!b->mr)
		return fail("ibv_reg_mr(%zu bytes, access 0x%x): %s", len, access, strerror(errno));
	return 0;
}

static void buf_free(struct buf *b)
{
	if (b->mr && ibv_dereg_mr(b->mr))
		fail("ibv_dereg_mr failed");
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Create an RC QP in INIT that lets the peer do atomics (the MR decides where). */
static int qp_create(struct dev *d, struct qp *q, const char *name)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = d->depth,
			.max_recv_wr = 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = d->ib_port,
		.qp_access_flags = IBV_ACCESS_REMOTE_ATOMIC,
	};
	int ret;

	memset(q, 0, sizeof(*q));
	q->name = name;
	/* Room for every signaled WR in flight and then some: the CQ can never overflow. */
	q->cq = ibv_create_cq(d->ctx, 2 * d->depth + 16, NULL, NULL, 0);
	if (!q->cq)
		return fail("%s: ibv_create_cq: %s", name, strerror(errno));
	init.send_cq = q->cq;
	init.recv_cq = q->cq;
	q->qp = ibv_create_qp(d->pd, &init);
	if (!q->qp)
		return fail("%s: ibv_create_qp(RC, %d send WRs): %s", name, d->depth,
			    strerror(errno));
	ret = ibv_modify_qp(q->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					  IBV_QP_ACCESS_FLAGS);
	if (ret)
		return fail("%s: ibv_modify_qp(RESET -> INIT): %s", name, strerror(ret));
	q->psn = nrand48(d->seed) & 0xffffff;
	return 0;
}

static struct qp_info qp_info_of(const struct dev *d, const struct qp *q)
{
	return (struct qp_info){ .lid = d->port.lid, .qpn = q->qp->qp_num, .psn = q->psn,
				 .mtu = d->port.active_mtu, .rd_atom = d->depth, .gid = d->gid };
}

/* INIT -> RTR -> RTS, aimed at the remote QP. */
static int qp_connect(struct dev *d, struct qp *q, const struct qp_info *rem)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = MIN(d->port.active_mtu, rem->mtu),
		.dest_qp_num = rem->qpn,
		.rq_psn = rem->psn,
		.max_dest_rd_atomic = d->depth,
		.min_rnr_timer = 12,		/* 0.64 ms; nothing here uses receives */
		.ah_attr = { .dlid = rem->lid, .port_num = d->ib_port },
	};
	int ret;

	if (d->gid_idx >= 0) {
		attr.ah_attr.is_global = 1;
		attr.ah_attr.grh.dgid = rem->gid;
		attr.ah_attr.grh.sgid_index = d->gid_idx;
		attr.ah_attr.grh.hop_limit = 1;
	}
	ret = ibv_modify_qp(q->qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (ret)
		return fail("%s: ibv_modify_qp(INIT -> RTR): %s", q->name, strerror(ret));

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = q->psn;
	attr.timeout = 16;		/* 268 ms ACK timeout: generous, guests may run under TCG */
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	/* Never more reads/atomics in flight than the responder has room for. */
	attr.max_rd_atomic = MIN(d->depth, rem->rd_atom);
	ret = ibv_modify_qp(q->qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_MAX_QP_RD_ATOMIC);
	if (ret)
		return fail("%s: ibv_modify_qp(RTR -> RTS): %s", q->name, strerror(ret));
	return 0;
}

static void qp_destroy(struct qp *q)
{
	int ret;

	if (q->qp && (ret = ibv_destroy_qp(q->qp)))
		fail("%s: ibv_destroy_qp: %s", q->name, strerror(ret));
	if (q->cq && (ret = ibv_destroy_cq(q->cq)))
		fail("%s: ibv_destroy_cq: %s", q->name, strerror(ret));
	memset(q, 0, sizeof(*q));
}

static int send_qp_info(struct chan *ch, const struct qp_info *i)
{
	char hex[33];

	for (int k = 0; k < 16; k++)
		sprintf(hex + 2 * k, "%02x", i->gid.raw[k]);
	return chan_send(ch, "qp %x %x %x %u %d %s", i->lid, i->qpn, i->psn, i->mtu, i->rd_atom,
			 hex);
}

static int recv_qp_info(struct chan *ch, int64_t deadline, struct qp_info *i)
{
	unsigned int lid, qpn, psn, mtu;
	char hex[33];

	if (chan_recv(ch, deadline, 6, "qp %x %x %x %u %d %32s", &lid, &qpn, &psn, &mtu,
		      &i->rd_atom, hex))
		return -1;
	if (strlen(hex) != 32 || i->rd_atom < 1)
		return fail("channel: bad QP info from the peer");
	i->lid = lid;
	i->qpn = qpn;
	i->psn = psn;
	i->mtu = mtu;
	for (int k = 0; k < 16; k++) {
		unsigned int v;

		sscanf(hex + 2 * k, "%2x", &v);
		i->gid.raw[k] = v;
	}
	return 0;
}

/* =============================================================================================
 * The requester: N x FETCH_AND_ADD +1, up to depth in flight, every old value kept
 */

struct fa_run {
	const char *who;	/* "local" or "remote", for the output */
	struct qp *q;
	uint64_t *res;		/* res[i]: the old value returned by FETCH_ADD number i */
	uint32_t lkey;
	uint64_t raddr;
	uint32_t rkey;
	int n, depth;

	/* results */
	int completed;		/* completions reaped */
	int64_t ms;		/* how long the N took */
};

static const char *wc_opcode_str(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_RECV: return "RECV";
	default: return "?";
	}
}

static int post_fetch_add(struct fa_run *f, int i)
{
	struct ibv_sge sge = { .addr = (uintptr_t)&f->res[i], .length = 8, .lkey = f->lkey };
	struct ibv_send_wr wr = {
		.wr_id = i, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED,
		.wr.atomic = { .remote_addr = f->raddr, .rkey = f->rkey, .compare_add = 1 },
	}, *bad;
	int ret = ibv_post_send(f->q->qp, &wr, &bad);

	return ret ? fail("%s: ibv_post_send(FETCH_ADD %d): %s", f->who, i, strerror(ret)) : 0;
}

/*
 * Run the N atomics.  Every completion must be SUCCESS, FETCH_ADD, and come in posting order
 * (an RC send queue completes in order); the first that is not ends the run with a FAIL, as
 * does a wait of more than timeout_s for the next completion.  Returns 0 when all N completed
 * as they should (and prints one PASS for them).
 */
static int fa_run(struct fa_run *f, int timeout_s)
{
	int posted = 0;
	int64_t start, deadline;

	for (int i = 0; i < f->n; i++)
		f->res[i] = UNWRITTEN;
	f->completed = 0;
	start = now_ms();
	deadline = start + timeout_s * 1000LL;
	while (f->completed < f->n) {
		struct ibv_wc wc[16];
		int got;

		while (posted < f->n && posted - f->completed < f->depth)
			if (post_fetch_add(f, posted++))
				return -1;
		got = ibv_poll_cq(f->q->cq, ARRAY_SIZE(wc), wc);
		if (got < 0)
			return fail("%s: ibv_poll_cq failed", f->who);
		if (!got) {
			if (now_ms() >= deadline)
				return fail("%s: no completion within %d s (%d of %d completed, "
					    "%d in flight)", f->who, timeout_s, f->completed, f->n,
					    posted - f->completed);
			/* Be polite: under TCG the device model may be waiting for our vCPU. */
			usleep(50);
			continue;
		}
		for (int k = 0; k < got; k++, f->completed++) {
			if (wc[k].status != IBV_WC_SUCCESS || wc[k].opcode != IBV_WC_FETCH_ADD ||
			    wc[k].wr_id != (uint64_t)f->completed ||
			    wc[k].qp_num != f->q->qp->qp_num)
				return fail("%s: completion %d of %d: status %s (vendor_err 0x%x), "
					    "opcode %s, wr_id %" PRIu64 ", QP 0x%x; wanted SUCCESS, "
					    "FETCH_ADD, wr_id %d, QP 0x%x", f->who, f->completed,
					    f->n, ibv_wc_status_str(wc[k].status),
					    wc[k].vendor_err, wc_opcode_str(wc[k].opcode),
					    wc[k].wr_id, wc[k].qp_num, f->completed,
					    f->q->qp->qp_num);
		}
		deadline = now_ms() + timeout_s * 1000LL;
	}
	f->ms = now_ms() - start;
	check(true, "%s: %d FETCH_ADD +1 completed in order, every one SUCCESS with opcode "
	      "FETCH_ADD", f->who, f->n);
	info("%s: %d FETCH_ADD in %.3f s (%.0f per second, up to %d in flight)", f->who, f->n,
	     f->ms / 1000.0, f->ms ? f->n * 1000.0 / f->ms : 0.0, f->depth);
	return 0;
}

/*
 * One QP's atomics execute in PSN order, so its old values strictly increase; and the HCA must
 * have written every result slot.  limit: every old value is below it (2N).
 */
static bool check_increasing(const struct fa_run *f, uint64_t limit)
{
	for (int i = 0; i < f->n; i++) {
		if (f->res[i] == UNWRITTEN)
			return check(false, "%s: FETCH_ADD %d returned nothing (the result slot "
				     "was never written)", f->who, i);
		if (f->res[i] >= limit)
			return check(false, "%s: FETCH_ADD %d returned %" PRIu64 ", beyond any "
				     "value the counter can have held (< %" PRIu64 ")", f->who, i,
				     f->res[i], limit);
		if (i && f->res[i] <= f->res[i - 1])
			return check(false, "%s: old values do not strictly increase: FETCH_ADD "
				     "%d returned %" PRIu64 ", FETCH_ADD %d returned %" PRIu64,
				     f->who, i - 1, f->res[i - 1], i, f->res[i]);
	}
	return check(true, "%s: the %d old values strictly increase (%" PRIu64 " .. %" PRIu64
		     ")", f->who, f->n, f->res[0], f->res[f->n - 1]);
}

/* =============================================================================================
 * End-of-run checks shared by both roles
 */

static bool check_no_async_events(struct dev *d)
{
	struct ibv_async_event ev;
	int n = 0;

	while (!ibv_get_async_event(d->ctx, &ev)) {
		info("async event %s", ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
		n++;
	}
	return check(n == 0, "no async events (%d)", n);
}

/* The QP is still in RTS and its CQ holds nothing more (a responder QP makes no completions). */
static bool check_qp_quiet(struct qp *q)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	struct ibv_wc wc;
	int got = ibv_poll_cq(q->cq, 1, &wc);
	bool rts = !ibv_query_qp(q->qp, &attr, IBV_QP_STATE, &init) &&
		   attr.qp_state == IBV_QPS_RTS;

	if (got < 0)
		return check(false, "%s QP: ibv_poll_cq failed", q->name);
	if (got > 0)
		return check(false, "%s QP: unexpected completion: wr_id %" PRIu64 " status %s "
			     "opcode %s", q->name, wc.wr_id, ibv_wc_status_str(wc.status),
			     wc_opcode_str(wc.opcode));
	return check(rts, "%s QP: still in RTS%s, no stray completion", q->name,
		     rts ? "" : " (it is not)");
}

/* =============================================================================================
 * Server: the counter, the target QP for the client, and the local loopback requester
 */

static int server(const struct opts *o)
{
	struct dev d;
	struct buf ctr = { 0 }, lres = { 0 };
	struct qp tgt = { 0 }, la = { 0 }, lb = { 0 };
	struct qp_info cli, inf;
	struct fa_run loc;
	struct chan ch = { .fd = -1 };
	uint64_t n = o->iters, total = 2 * n, *remote = NULL, final;
	volatile uint64_t *counter;
	uint8_t *owner = NULL;
	char word[8], what[256];
	int rc_ok = 0, ret = -1, remote_ms = 0;
	bool ok;

	if (dev_open(&d, o, true))
		goto out;
	/* Verbs refuse REMOTE_ATOMIC (like REMOTE_WRITE) without LOCAL_WRITE. */
	if (buf_alloc(&d, &ctr, PAGE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC,
		      GUARD_BYTE) ||
	    buf_alloc(&d, &lres, n * 8, IBV_ACCESS_LOCAL_WRITE, 0))
		goto out;
	counter = (volatile uint64_t *)((uint8_t *)ctr.p + COUNTER_OFF);
	*counter = 0;

	/* The loopback pair: local requester A -> local responder B through our own port. */
	if (qp_create(&d, &tgt, "target") || qp_create(&d, &la, "loop A") ||
	    qp_create(&d, &lb, "loop B"))
		goto out;
	inf = qp_info_of(&d, &lb);
	if (qp_connect(&d, &la, &inf))
		goto out;
	inf = qp_info_of(&d, &la);
	if (qp_connect(&d, &lb, &inf))
		goto out;

	info("counter at %p (rkey 0x%x), initial value 0; waiting for a client on TCP port %d",
	     (void *)counter, ctr.mr->rkey, o->tcp_port);
	ch.fd = tcp_listen_accept(o->tcp_port, o->timeout);
	if (ch.fd < 0) {
		fail("no client on TCP port %d: %s", o->tcp_port, strerror(errno));
		goto out;
	}
	inf = qp_info_of(&d, &tgt);
	if (send_qp_info(&ch, &inf) || recv_qp_info(&ch, msg_deadline(o), &cli) ||
	    qp_connect(&d, &tgt, &cli) ||
	    chan_send(&ch, "target %" PRIx64 " %x %" PRIu64, (uint64_t)(uintptr_t)counter,
		      ctr.mr->rkey, n) ||
	    chan_expect(&ch, msg_deadline(o), "ready"))
		goto out;
	info("client QP 0x%x at LID 0x%04x connected to target QP 0x%x; loop A QP 0x%x -> "
	     "loop B QP 0x%x", cli.qpn, cli.lid, tgt.qp->qp_num, la.qp->qp_num, lb.qp->qp_num);

	/* Both requesters start now. */
	loc = (struct fa_run){ .who = "local", .q = &la, .res = lres.p, .lkey = lres.mr->lkey,
			       .raddr = (uintptr_t)counter, .rkey = ctr.mr->rkey, .n = n,
			       .depth = d.depth };
	if (chan_send(&ch, "go"))
		goto out;
	if (!fa_run(&loc, o->timeout))
		check_increasing(&loc, total);

	/* The client's N old values, whenever it is done (it sends them even after a failure). */
	remote = malloc(n * 8);
	owner = calloc(total, 1);
	if (!remote || !owner) {
		fail("out of memory");
		goto out;
	}
	if (chan_recv(&ch, run_deadline, 2, "done %7s %d", word, &remote_ms) ||
	    chan_expect(&ch, msg_deadline(o), "values") ||
	    chan_read_bytes(&ch, remote, n * 8, msg_deadline(o)))
		goto out;
	for (uint64_t i = 0; i < n; i++)
		remote[i] = le64toh(remote[i]);
	rc_ok = !strcmp(word, "ok");
	check(rc_ok, "remote: the client reports its %" PRIu64 " FETCH_ADDs all completed "
	      "(in %.3f s)", n, remote_ms / 1000.0);

	/*
	 * The 2N old values, counted once each: with exactly 2N of them, "no duplicate and none
	 * out of range" means they are exactly {0, ..., 2N-1}.  owner[v] says who got v.
	 */
	{
		uint64_t dup = 0, wild = 0, first_dup = 0, first_wild = 0, switches = 0;

		for (int who = 1; who <= 2; who++) {
			const uint64_t *v = who == 1 ? loc.res : remote;

			for (uint64_t i = 0; i < n; i++) {
				if (v[i] >= total) {
					if (!wild++)
						first_wild = v[i];
				} else if (owner[v[i]]) {
					if (!dup++)
						first_dup = v[i];
				} else {
					owner[v[i]] = who;
				}
			}
		}
		snprintf(what, sizeof(what), "the %" PRIu64 " old values of both requesters are "
			 "exactly {0 .. %" PRIu64 "}: none returned twice, none skipped", total,
			 total - 1);
		check_why(!dup && !wild, what, "%" PRIu64 " returned twice (first %" PRIu64
			  "), %" PRIu64 " out of range (first 0x%" PRIx64 ")", dup, first_dup,
			  wild, first_wild);
		for (uint64_t v = 1; v < total; v++)
			switches += owner[v] && owner[v - 1] && owner[v] != owner[v - 1];
		/* One switch would mean one requester finished before the other started. */
		check(switches >= 2, "the requesters overlapped: the owner of consecutive old "
		      "values switched %" PRIu64 " times between local and remote", switches);
	}

	final = *counter;
	check(final == total, "final counter %" PRIu64 " (wanted %" PRIu64 ": 2 x %" PRIu64
	      " FETCH_ADD +1, through two QPs at once)", final, total, n);
	*counter = GUARD_BYTE * 0x0101010101010101ull;	/* so the page check covers all else */
	{
		const uint8_t *p = ctr.p;
		size_t bad = 0, first = 0;

		for (size_t i = 0; i < ctr.len; i++)
			if (p[i] != GUARD_BYTE && !bad++)
				first = i;
		snprintf(what, sizeof(what), "the other %zu bytes of the counter's page are "
			 "unchanged", ctr.len - 8);
		check_why(!bad, what, "%zu differ, the first at offset %zu", bad, first);
	}
	*counter = final;
	check_qp_quiet(&tgt);
	check_qp_quiet(&lb);
	check_qp_quiet(&la);
	check_no_async_events(&d);
	ok = report_failed == 0;
	/* The client checks our verdict too, so its exit status alone tells the whole story. */
	if (chan_send(&ch, "verdict %s %" PRIu64, ok ? "ok" : "bad", final))
		goto out;
	/* Wait for the client to hang up: its QP must not go away while ours still talks to it. */
	chan_expect(&ch, msg_deadline(o), "bye");
	ret = 0;
out:
	qp_destroy(&la);
	qp_destroy(&lb);
	qp_destroy(&tgt);
	buf_free(&lres);
	buf_free(&ctr);
	dev_close(&d, ret == 0);
	free(remote);
	free(owner);
	if (ch.fd >= 0)
		close(ch.fd);
	return ret;
}

/* =============================================================================================
 * Client: one QP to the server's target QP
 */

static int client(const struct opts *o)
{
	struct dev d;
	struct buf res = { 0 };
	struct qp q = { 0 };
	struct qp_info srv, inf;
	struct fa_run rem;
	struct chan ch = { .fd = -1 };
	uint64_t raddr, n, final, *le = NULL;
	uint32_t rkey;
	char word[8];
	int ret = -1;
	bool ran;

	if (dev_open(&d, o, false) || qp_create(&d, &q, "remote"))
		goto out;
	ch.fd = tcp_connect(o->peer, o->tcp_port, o->timeout);
	if (ch.fd < 0) {
		fail("cannot connect to %s port %d within %d s", o->peer, o->tcp_port, o->timeout);
		goto out;
	}
	inf = qp_info_of(&d, &q);
	if (send_qp_info(&ch, &inf) || recv_qp_info(&ch, msg_deadline(o), &srv) ||
	    qp_connect(&d, &q, &srv) ||
	    chan_recv(&ch, msg_deadline(o), 3, "target %" SCNx64 " %x %" SCNu64, &raddr, &rkey,
		      &n))
		goto out;
	if (n < 1 || n > MAX_ITERS) {
		fail("the server asks for %" PRIu64 " FETCH_ADDs", n);
		goto out;
	}
	if (buf_alloc(&d, &res, n * 8, IBV_ACCESS_LOCAL_WRITE, 0))
		goto out;
	info("QP 0x%x connected to server QP 0x%x at LID 0x%04x; counter at 0x%" PRIx64
	     " rkey 0x%x", q.qp->qp_num, srv.qpn, srv.lid, raddr, rkey);
	rem = (struct fa_run){ .who = "remote", .q = &q, .res = res.p, .lkey = res.mr->lkey,
			       .raddr = raddr, .rkey = rkey, .n = n,
			       .depth = MIN(d.depth, srv.rd_atom) };
	if (chan_send(&ch, "ready") || chan_expect(&ch, msg_deadline(o), "go"))
		goto out;

	ran = !fa_run(&rem, o->timeout);
	if (ran)
		check_increasing(&rem, 2 * n);
	/* Send the old values even after a failure: the server's checks then show what went on. */
	le = malloc(n * 8);
	if (!le) {
		fail("out of memory");
		goto out;
	}
	for (uint64_t i = 0; i < n; i++)
		le[i] = htole64(rem.res[i]);
	if (chan_send(&ch, "done %s %d", ran ? "ok" : "bad", (int)rem.ms) ||
	    chan_send(&ch, "values") || chan_write(&ch, le, n * 8))
		goto out;
	check_qp_quiet(&q);
	check_no_async_events(&d);
	/* The server's verdict waits for its own requester, which may still be running. */
	if (chan_recv(&ch, run_deadline, 2, "verdict %7s %" SCNu64, word, &final))
		goto out;
	check(!strcmp(word, "ok"), "the server's checks passed (final counter %" PRIu64 ")",
	      final);
	chan_send(&ch, "bye");
	ret = 0;
out:
	qp_destroy(&q);
	buf_free(&res);
	dev_close(&d, ret == 0);
	free(le);
	if (ch.fd >= 0)
		close(ch.fd);
	return ret;
}

/* =============================================================================================
 * main
 */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pib-fa-counter [options] server\n"
		"       pib-fa-counter [options] client SERVER_HOST\n"
		"\n"
		"The server holds a counter and runs one requester through its own port; the client\n"
		"runs another over the link.  Each does N FETCH_AND_ADD +1; the counter must end at\n"
		"2N and no old value may be returned twice.\n"
		"\n"
		"options:\n"
		"  -d DEV    RDMA device (default: the first one)\n"
		"  -i PORT   device port (default 1)\n"
		"  -g IDX    GID index (default: none on InfiniBand, a RoCE v2 IPv4 GID on RoCE)\n"
		"  -p PORT   TCP port (default %d)\n"
		"  -n N      FETCH_ADDs per requester (default %d; the server tells the client)\n"
		"  -q DEPTH  atomics in flight per requester (default %d, capped by the device)\n"
		"  -t SEC    how long to wait for any one completion or message (default 60)\n"
		"  -T SEC    how long the whole run may take (default 900)\n",
		DEFAULT_TCP_PORT, DEFAULT_ITERS, DEFAULT_DEPTH);
}

int main(int argc, char **argv)
{
	struct opts o = { .ib_port = 1, .gid_idx = -1, .tcp_port = DEFAULT_TCP_PORT,
			  .iters = DEFAULT_ITERS, .depth = DEFAULT_DEPTH, .timeout = 60,
			  .total = 900 };
	bool is_server;
	int c, ret;

	while ((c = getopt(argc, argv, "d:i:g:p:n:q:t:T:h")) != -1) {
		switch (c) {
		case 'd': o.dev_name = optarg; break;
		case 'i': o.ib_port = atoi(optarg); break;
		case 'g': o.gid_idx = atoi(optarg); break;
		case 'p': o.tcp_port = atoi(optarg); break;
		case 'n': o.iters = atoi(optarg); break;
		case 'q': o.depth = atoi(optarg); break;
		case 't': o.timeout = atoi(optarg); break;
		case 'T': o.total = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	is_server = argc - optind == 1 && !strcmp(argv[optind], "server");
	if (!is_server && !(argc - optind == 2 && !strcmp(argv[optind], "client"))) {
		usage(stderr);
		return 2;
	}
	if (o.iters < 1 || o.iters > MAX_ITERS || o.depth < 1 || o.timeout <= 0 ||
	    o.total <= 0 || o.tcp_port <= 0 || o.tcp_port > 65535) {
		fprintf(stderr, "pib-fa-counter: an option is out of range\n");
		return 2;
	}
	o.peer = is_server ? NULL : argv[optind + 1];
	who = is_server ? "fa-counter/server" : "fa-counter/client";

	setvbuf(stdout, NULL, _IOLBF, 0);	/* lines in order even through a pipe */
	signal(SIGPIPE, SIG_IGN);		/* a vanished peer is an error return, not a kill */
	run_deadline = now_ms() + o.total * 1000LL;
	/* The run's own deadline comes first; the watchdog only catches a verb that hangs. */
	report_watchdog(who, o.total + 2 * o.timeout);
	ret = is_server ? server(&o) : client(&o);
	report_watchdog(who, 0);
	if (ret && !report_failed)
		report_fail(who, "stopped on an error that no check reported");
	return report_summary(who);
}
