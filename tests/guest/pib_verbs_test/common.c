// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-verbs-test: what every subtest uses
 * (the program is described in pib_verbs_test.c; what the files share is in pib_verbs.h)
 *
 * The channel between the roles, the device context, buffers and data patterns, RC connections
 * (CQs, a QP, the walk to RTS), posting work requests, and the checks of completions, QP states
 * and async events.
 */
#define _GNU_SOURCE
#include "pib_verbs.h"

/* Sleep ms milliseconds, even across signals. */
void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* =============================================================================================
 * The channel between the roles: one text line per message, "word args...\n".
 */

int __attribute__((format(printf, 2, 3)))
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
int __attribute__((format(scanf, 3, 4)))
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
int chan_sync(struct role *r, const char *what)
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
int chan_send_verdict(struct role *r, bool ok)
{
	return chan_send(r, "verdict %s", ok ? "ok" : "bad");
}

int chan_recv_verdict(struct role *r, bool *ok)
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
bool set_nonblocking(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) >= 0;
}

int role_open(struct role *r)
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
void role_close(struct role *r, bool aborted)
{
	if (r->pd && !aborted && ibv_dealloc_pd(r->pd))
		fail(r, "ibv_dealloc_pd failed (resources left behind?)");
	if (r->ctx && ibv_close_device(r->ctx))
		fail(r, "ibv_close_device failed");
	r->pd = NULL;
	r->ctx = NULL;
}

int buf_alloc(struct role *r, struct buf *b, size_t len, int access)
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

void buf_free(struct role *r, struct buf *b)
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

void fill_pattern(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern_byte(seed, i);
}

/* Offset of the first byte that is not the pattern, or -1 when all match. */
ssize_t find_pattern_mismatch(const uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern_byte(seed, i))
			return (ssize_t)i;
	return -1;
}

/* Offset of the first byte that differs from c, or -1. */
ssize_t find_not_byte(const uint8_t *p, size_t len, uint8_t c)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != c)
			return (ssize_t)i;
	return -1;
}

/* Offset of the first differing byte, or -1. */
ssize_t find_diff(const uint8_t *a, const uint8_t *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return (ssize_t)i;
	return -1;
}

/* FNV-1a: a fingerprint of remote bytes that the other role can compare with its own. */
uint32_t fnv1a(const uint8_t *p, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* =============================================================================================
 * RC connections: CQs, a QP, and the RESET -> INIT -> RTR -> RTS walk.
 */

/* -u: the ACK timeout the connections of the subtests get unless they ask for their own. */
uint8_t default_qp_timeout = 16;

struct conn_params conn_defaults(void)
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

int conn_create(struct role *r, struct conn *c, const struct conn_params *p)
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
int conn_exchange(struct role *r, struct conn *c, struct qp_info *remote)
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
int conn_open(struct role *r, struct conn *c, const struct conn_params *p,
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
void conn_close(struct role *r, struct conn *c)
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

int modify_to_err(struct role *r, struct conn *c)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	int ret = ibv_modify_qp(c->qp, &attr, IBV_QP_STATE);

	return ret ? fail(r, "ibv_modify_qp(-> ERR): %s", strerror(ret)) : 0;
}

enum ibv_qp_state qp_state(struct ibv_qp *qp)
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

/* The bytes in a path MTU: IBV_MTU_256 (1) is 256, IBV_MTU_4096 (5) is 4096. */
int mtu_bytes(enum ibv_mtu m)
{
	return 128 << m;
}

/*
 * The QP reaches ERR when the error completion is generated; a device may report the completion
 * a moment before ibv_query_qp sees the new state (rxe completes first), so allow 2 seconds.
 */
bool check_qp_state(struct role *r, struct conn *c, enum ibv_qp_state want,
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

int post_recv_qp(struct role *r, struct ibv_qp *qp, uint64_t wr_id, void *addr,
		 uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;
	int ret = ibv_post_recv(qp, &wr, &bad);

	return ret ? fail(r, "ibv_post_recv(wr_id %" PRIu64 "): %s", wr_id, strerror(ret)) : 0;
}

int post_recv(struct role *r, struct conn *c, uint64_t wr_id, void *addr, uint32_t len,
	      uint32_t lkey)
{
	return post_recv_qp(r, c->qp, wr_id, addr, len, lkey);
}

/* Post one signaled send-queue WR.  len 0 posts no SGE at all. */
int post_send(struct role *r, struct conn *c, uint64_t wr_id, enum ibv_wr_opcode opcode,
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
int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms)
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

const char *opcode_str(enum ibv_wc_opcode op)
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

bool __attribute__((format(printf, 7, 8)))
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
bool __attribute__((format(printf, 8, 9)))
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
bool expect_no_wc(struct role *r, struct ibv_cq *cq, int ms, const char *what)
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
bool wait_async_event(struct role *r, enum ibv_event_type want, void *object, int ms)
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
