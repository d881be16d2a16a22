// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-verbs-test: shared receive queues and XRC
 * (the program is described in pib_verbs_test.c; what the files share is in pib_verbs.h)
 *
 * Subtests srq-limit and xrc.
 */
#define _GNU_SOURCE
#include "pib_verbs.h"

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

int srq_limit_server(struct role *r)
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

int srq_limit_client(struct role *r)
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

int xrc_server(struct role *r)
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

int xrc_client(struct role *r)
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
