// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-verbs-test: RC errors: a bad lkey, rkey violations, RNR retries, flushes, CQ overflow
 * (the program is described in pib_verbs_test.c; what the files share is in pib_verbs.h)
 *
 * Subtests bad-lkey, rkey-violation, rnr-retry, flush-on-destroy and cq-overflow.
 */
#define _GNU_SOURCE
#include "pib_verbs.h"

/* =============================================================================================
 * Subtest bad-lkey
 *
 * A SEND whose SGE names a bad lkey fails locally, before anything goes on the wire: the CQE says
 * LOC_PROT_ERR, the QP is in ERR, and a WR posted afterwards is flushed (WR_FLUSH_ERR).
 * Two bad keys: a valid lkey with its key byte (the low 8 bits) flipped, and the lkey of an MR
 * that was deregistered.  The server checks that nothing reached its posted receive.
 */

#define BAD_LKEY_VARIANTS 2

int bad_lkey_server(struct role *r)
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

int bad_lkey_client(struct role *r)
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

int rkey_violation_server(struct role *r)
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

int rkey_violation_client(struct role *r)
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

int rnr_retry_server(struct role *r)
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

int rnr_retry_client(struct role *r)
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

int flush_server(struct role *r)
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

int flush_client(struct role *r)
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

int cq_overflow_server(struct role *r)
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

int cq_overflow_client(struct role *r)
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
