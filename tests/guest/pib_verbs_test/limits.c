// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-verbs-test: queues at the device's limits
 * (the program is described in pib_verbs_test.c; what the files share is in pib_verbs.h)
 *
 * Subtest limits.  What ibv_query_device reports is taken at its word, at the limit itself,
 * and one past it is refused:
 *
 *   - an SRQ of max_srq_wr receives, every one posted, and a QP whose SQ holds max_qp_wr SENDs,
 *     all posted at once (the client's): min(max_srq_wr, max_qp_wr) SENDs take every receive,
 *     each message arriving once, intact, the send completions in order;
 *   - a CQ of max_cqe entries filled to the last one (the server's, once the client is done):
 *     receive queues of max_qp_wr WRs each, as many as it takes, posted full in INIT and moved
 *     to ERR, which flushes every receive into the CQ; all max_cqe completions are read back,
 *     each QP's in the order it posted them, and two more after them take the ring past its end;
 *   - address handles: min(max_ah, LIM_AHS) of them at once;
 *   - a CQ of max_cqe + 1, a QP of max_qp_wr + 1 WRs, an SRQ of max_srq_wr + 1 are refused.
 *
 * The rings are large (a CQ of 4 Mi CQEs is 128 MiB on pib): the fill runs after the last
 * meeting with the client, on the server alone.
 */
#define _GNU_SOURCE
#include "pib_verbs.h"

#define LIM_BATCH	256	/* WRs per ibv_post_* call, completions per ibv_poll_cq call */
#define LIM_MSG		64	/* one SRQ receive's buffer; a message is its 8-byte index */
#define LIM_AHS		4096	/* address handles to hold at once (pib reported 1024 once) */

/* --- one past each limit --- */

static struct ibv_qp *lim_create_qp(struct role *r, struct ibv_cq *cq, uint32_t send_wr,
				    uint32_t recv_wr, uint32_t recv_sge)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = send_wr, .max_recv_wr = recv_wr,
			 .max_send_sge = 1, .max_recv_sge = recv_sge },
	};

	return ibv_create_qp(r->pd, &init);
}

static void lim_refusals(struct role *r)
{
	struct ibv_srq_init_attr si = { .attr = { .max_wr = r->dev.max_srq_wr + 1, .max_sge = 1 } };
	struct ibv_cq *cq = ibv_create_cq(r->ctx, r->dev.max_cqe + 1, NULL, NULL, 0);
	struct ibv_srq *srq;
	struct ibv_qp *qp;

	check(r, !cq, "ibv_create_cq(max_cqe + 1 = %d) is refused", r->dev.max_cqe + 1);
	if (cq)
		ibv_destroy_cq(cq);
	cq = ibv_create_cq(r->ctx, 16, NULL, NULL, 0);
	if (!cq) {
		fail(r, "ibv_create_cq(16): %s", strerror(errno));
		return;
	}
	qp = lim_create_qp(r, cq, r->dev.max_qp_wr + 1, 1, 1);
	check(r, !qp, "ibv_create_qp(max_send_wr = max_qp_wr + 1 = %d) is refused",
	      r->dev.max_qp_wr + 1);
	if (qp)
		ibv_destroy_qp(qp);
	qp = lim_create_qp(r, cq, 1, r->dev.max_qp_wr + 1, 1);
	check(r, !qp, "ibv_create_qp(max_recv_wr = max_qp_wr + 1 = %d) is refused",
	      r->dev.max_qp_wr + 1);
	if (qp)
		ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	if (r->dev.max_srq) {
		srq = ibv_create_srq(r->pd, &si);
		check(r, !srq, "ibv_create_srq(max_wr = max_srq_wr + 1 = %d) is refused",
		      r->dev.max_srq_wr + 1);
		if (srq)
			ibv_destroy_srq(srq);
	}
}

/* --- the CQ at max_cqe --- */

static int lim_to_state(struct role *r, struct ibv_qp *qp, enum ibv_qp_state state)
{
	struct ibv_qp_attr attr = {
		.qp_state = state,
		.port_num = r->o->ib_port,
	};
	int mask = IBV_QP_STATE;
	int ret;

	if (state == IBV_QPS_INIT)
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	ret = ibv_modify_qp(qp, &attr, mask);
	return ret ? fail(r, "ibv_modify_qp(-> %d): %s", state, strerror(ret)) : 0;
}

/* n receives without SGEs, wr_ids tag << 32 | 0 .. n - 1, in batches. */
static int lim_post_recvs(struct role *r, struct ibv_qp *qp, uint32_t tag, uint32_t n)
{
	struct ibv_recv_wr wr[LIM_BATCH], *bad;
	uint32_t i, k, m;
	int ret;

	for (i = 0; i < n; i += m) {
		m = MIN(n - i, LIM_BATCH);
		for (k = 0; k < m; k++)
			wr[k] = (struct ibv_recv_wr){
				.wr_id = (uint64_t)tag << 32 | (i + k),
				.next = k + 1 < m ? &wr[k + 1] : NULL,
			};
		ret = ibv_post_recv(qp, wr, &bad);
		if (ret)
			return fail(r, "ibv_post_recv(QP %u, receive %u of %u): %s", tag,
				    i + (uint32_t)(bad - wr), n, strerror(ret));
	}
	return 0;
}

/*
 * Up to max completions from cq, waiting for the first at most -t seconds: how many (0 when
 * none came in time), or -1 when ibv_poll_cq fails.
 */
static int lim_poll(struct role *r, struct ibv_cq *cq, struct ibv_wc *wc, uint64_t max)
{
	int64_t deadline = now_ms() + r->o->timeout * 1000LL;
	int m;

	while (!(m = ibv_poll_cq(cq, (int)MIN(max, (uint64_t)LIM_BATCH), wc)) &&
	       now_ms() < deadline)
		usleep(100);
	return m;
}

/*
 * Read n flushed receives from cq: WR_FLUSH_ERR, through the QP the tag names, each QP's in
 * the order it posted them (next[tag]).  Gives up after -t seconds without a completion.
 * Returns the completions that were wrong; the first is described in *why.
 */
static uint64_t lim_reap_flushes(struct role *r, struct ibv_cq *cq, struct ibv_qp **qps,
				 uint32_t nqp, uint32_t *next, uint64_t n, uint64_t *got,
				 char *why, size_t why_len)
{
	struct ibv_wc wc[LIM_BATCH];
	uint64_t bad = 0;
	int i, m;

	*got = 0;
	while (*got < n) {
		m = lim_poll(r, cq, wc, n - *got);
		if (m < 0) {
			snprintf(why, why_len, "ibv_poll_cq failed after %" PRIu64, *got);
			return bad + 1;
		}
		if (!m)
			break;
		for (i = 0; i < m; i++) {
			uint32_t tag = wc[i].wr_id >> 32, seq = (uint32_t)wc[i].wr_id;
			bool ok = tag < nqp && wc[i].status == IBV_WC_WR_FLUSH_ERR &&
				  wc[i].qp_num == qps[tag]->qp_num && seq == next[tag];

			if (!ok && !bad++)
				snprintf(why, why_len, "completion %" PRIu64 ": wr_id %#" PRIx64
					 " status %s qp 0x%x (QP %u expected receive %u)",
					 *got + i, wc[i].wr_id, ibv_wc_status_str(wc[i].status),
					 wc[i].qp_num, tag, tag < nqp ? next[tag] : 0);
			if (tag < nqp)
				next[tag] = seq + 1;
		}
		*got += m;
	}
	return bad;
}

/*
 * The CQ at max_cqe: full to its last entry, then read back, then two more CQEs that take its
 * ring past the end (on pib the ring is max_cqe + 1 deep: the first lands in its last slot, the
 * second in slot 0 on the second pass).
 */
static void lim_cq_fill(struct role *r)
{
	uint32_t n = r->dev.max_cqe, wr = r->dev.max_qp_wr;
	uint32_t nqp = (n + wr - 1) / wr;	/* and one more for the wrap */
	struct ibv_qp **qps = calloc(nqp + 1, sizeof(*qps));
	uint32_t *next = calloc(nqp + 1, sizeof(*next));
	uint64_t got, bad;
	int64_t t0 = now_ms();
	struct ibv_cq *cq = NULL;
	char why[256] = "";
	uint32_t q;

	if (!qps || !next) {
		fail(r, "out of memory");
		goto out;
	}
	cq = ibv_create_cq(r->ctx, (int)n, NULL, NULL, 0);
	if (!check_why(r, cq && cq->cqe >= (int)n, "ibv_create_cq(max_cqe) holds max_cqe CQEs",
		       "%s, cqe %d for max_cqe %u", cq ? "made" : strerror(errno), cq ? cq->cqe : 0,
		       n))
		goto out;
	for (q = 0; q <= nqp; q++) {
		uint32_t want = q < nqp ? MIN(wr, n - q * wr) : 2;

		qps[q] = lim_create_qp(r, cq, 1, q < nqp ? wr : 2, 0);
		if (!qps[q]) {
			fail(r, "ibv_create_qp(max_recv_wr %u, no SGE), QP %u of %u: %s",
			     q < nqp ? wr : 2, q, nqp + 1, strerror(errno));
			goto destroy;
		}
		if (lim_to_state(r, qps[q], IBV_QPS_INIT) ||
		    lim_post_recvs(r, qps[q], q, want))
			goto destroy;
	}
	check(r, true, "%u QPs with receive queues of max_qp_wr = %u WRs hold %u receives, "
	      "all posted", nqp, wr, n);
	for (q = 0; q < nqp; q++)
		if (lim_to_state(r, qps[q], IBV_QPS_ERR))
			goto destroy;
	bad = lim_reap_flushes(r, cq, qps, nqp, next, n, &got, why, sizeof(why));
	check_why(r, got == n && !bad, "all max_cqe flushed receives came out of the full CQ, "
		  "each QP's in order", "%" PRIu64 " of %u, %" PRIu64 " wrong: %s", got, n, bad,
		  why);
	expect_no_wc(r, cq, 200, "the CQ held max_cqe completions, no more");
	info(r, "the fill took %.1f s", (now_ms() - t0) / 1000.0);

	if (lim_to_state(r, qps[nqp], IBV_QPS_ERR))
		goto destroy;
	bad = lim_reap_flushes(r, cq, qps, nqp + 1, next, 2, &got, why, sizeof(why));
	check_why(r, got == 2 && !bad, "two more completions, past the end of the CQ's ring",
		  "%" PRIu64 " of 2, %" PRIu64 " wrong: %s", got, bad, why);
destroy:
	for (q = 0; q <= nqp; q++)
		if (qps[q] && ibv_destroy_qp(qps[q]))
			fail(r, "ibv_destroy_qp (QP %u)", q);
	if (cq && ibv_destroy_cq(cq))
		fail(r, "ibv_destroy_cq (the max_cqe CQ)");
out:
	free(qps);
	free(next);
}

/* --- address handles --- */

static void lim_ahs(struct role *r, uint16_t dlid)
{
	uint32_t want = (uint32_t)MIN(r->dev.max_ah, LIM_AHS), n;
	struct ibv_ah **ah = calloc(want, sizeof(*ah));
	struct ibv_ah_attr attr = { .dlid = dlid, .port_num = r->o->ib_port };

	if (!ah) {
		fail(r, "out of memory");
		return;
	}
	if (r->gid_idx >= 0) {
		attr.is_global = 1;
		attr.grh.dgid = r->gid;
		attr.grh.sgid_index = r->gid_idx;
		attr.grh.hop_limit = 1;
	}
	for (n = 0; n < want; n++) {
		ah[n] = ibv_create_ah(r->pd, &attr);
		if (!ah[n])
			break;
	}
	check_why(r, n == want, "min(max_ah, " STR(LIM_AHS) ") address handles held at once",
		  "ibv_create_ah %u of %u (max_ah %d) failed: %s", n, want, r->dev.max_ah,
		  strerror(errno));
	while (n--)
		ibv_destroy_ah(ah[n]);
	free(ah);
}

/* --- the SRQ at max_srq_wr, the SQ at max_qp_wr --- */

int limits_server(struct role *r)
{
	struct ibv_srq_init_attr si = { .attr = { .max_wr = r->dev.max_srq_wr, .max_sge = 1 } };
	struct conn_params p = conn_defaults();
	uint32_t n = MIN(r->dev.max_srq_wr, r->dev.max_qp_wr), k, i, got = 0, wrong = 0;
	struct ibv_wc wc[LIM_BATCH];
	struct ibv_recv_wr wr[LIM_BATCH], *badwr;
	struct ibv_sge sge[LIM_BATCH];
	struct ibv_srq *srq;
	char why[256] = "";
	uint8_t *seen;
	struct conn c;
	struct buf rb;
	bool ok;
	int ret, m;

	info(r, "max_cqe %d, max_qp_wr %d, max_srq_wr %d, max_ah %d", r->dev.max_cqe,
	     r->dev.max_qp_wr, r->dev.max_srq_wr, r->dev.max_ah);
	lim_refusals(r);
	if (!r->dev.max_srq) {
		skip(r, "the device has no SRQs (max_srq 0)");
		return chan_send(r, "limits 0") ? -1 : chan_sync(r, "end");
	}
	if (chan_send(r, "limits %u", n))
		return -1;
	seen = calloc(r->dev.max_srq_wr, 1);
	if (!seen || buf_alloc(r, &rb, (size_t)r->dev.max_srq_wr * LIM_MSG, IBV_ACCESS_LOCAL_WRITE))
		return fail(r, "no buffer for %d receives", r->dev.max_srq_wr);
	srq = ibv_create_srq(r->pd, &si);
	if (!check_why(r, srq && si.attr.max_wr >= (uint32_t)r->dev.max_srq_wr,
		       "ibv_create_srq(max_wr = max_srq_wr) holds them all", "%s, max_wr %u",
		       srq ? "made" : strerror(errno), si.attr.max_wr))
		return -1;
	for (i = 0; i < (uint32_t)r->dev.max_srq_wr; i += (uint32_t)m) {
		m = (int)MIN((uint32_t)r->dev.max_srq_wr - i, LIM_BATCH);
		for (k = 0; k < (uint32_t)m; k++) {
			sge[k] = (struct ibv_sge){ .addr = (uintptr_t)rb.p + (size_t)(i + k) * LIM_MSG,
						   .length = LIM_MSG, .lkey = rb.mr->lkey };
			wr[k] = (struct ibv_recv_wr){ .wr_id = i + k, .sg_list = &sge[k], .num_sge = 1,
						      .next = k + 1 < (uint32_t)m ? &wr[k + 1] : NULL };
		}
		ret = ibv_post_srq_recv(srq, wr, &badwr);
		if (ret)
			return fail(r, "ibv_post_srq_recv(receive %u of %d): %s",
				    i + (uint32_t)(badwr - wr), r->dev.max_srq_wr, strerror(ret));
	}
	check(r, true, "max_srq_wr = %d receives posted to the SRQ", r->dev.max_srq_wr);
	p.srq = srq;
	p.recv_cqe = (int)n;
	if (conn_open(r, &c, &p, NULL) || chan_sync(r, "ready"))
		return -1;

	/* Every message once, in a receive of its own: byte_len 8, its index in it. */
	while (got < n) {
		m = lim_poll(r, c.rcq, wc, n - got);
		if (m < 0)
			return fail(r, "ibv_poll_cq failed");
		if (!m)
			break;
		for (int j = 0; j < m; j++) {
			uint64_t idx = UINT64_MAX;
			bool good = wc[j].status == IBV_WC_SUCCESS && wc[j].opcode == IBV_WC_RECV &&
				    wc[j].byte_len == 8 && wc[j].wr_id < (uint64_t)r->dev.max_srq_wr &&
				    wc[j].qp_num == c.qp->qp_num;

			if (good) {
				memcpy(&idx, rb.p + wc[j].wr_id * LIM_MSG, 8);
				good = idx < n && !(seen[idx] & 1) && !(seen[wc[j].wr_id] & 2);
			}
			if (good) {
				seen[idx] |= 1;
				seen[wc[j].wr_id] |= 2;
			} else if (!wrong++) {
				snprintf(why, sizeof(why), "receive %u: status %s byte_len %u wr_id %"
					 PRIu64 " message %" PRIu64, got + j,
					 ibv_wc_status_str(wc[j].status), wc[j].byte_len, wc[j].wr_id,
					 idx);
			}
		}
		got += (uint32_t)m;
	}
	ok = check_why(r, got == n && !wrong, "min(max_srq_wr, max_qp_wr) SENDs took as many SRQ "
		       "receives, every message once and intact", "%u of %u, %u wrong: %s", got, n,
		       wrong, why);
	if (chan_send_verdict(r, ok) || chan_sync(r, "end"))
		return -1;
	conn_close(r, &c);
	if ((ret = ibv_destroy_srq(srq)))
		fail(r, "ibv_destroy_srq: %s", strerror(ret));
	buf_free(r, &rb);
	free(seen);

	/* The client is done: the CQ's fill is ours alone. */
	lim_cq_fill(r);
	return 0;
}

int limits_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct ibv_send_wr wr[LIM_BATCH], *badwr;
	struct ibv_sge sge[LIM_BATCH];
	struct ibv_wc wc[LIM_BATCH];
	uint32_t n, i, k, got = 0, wrong = 0;
	struct qp_info remote;
	char why[256] = "";
	bool server_ok;
	struct conn c;
	struct buf sb;
	int ret, m;

	if (chan_recv(r, 1, "limits %u", &n))
		return -1;
	if (!n) {
		skip(r, "the server's device has no SRQs");
		return chan_sync(r, "end");
	}
	if (n > (uint32_t)r->dev.max_qp_wr)
		return fail(r, "the server wants %u SENDs, max_qp_wr is %d", n, r->dev.max_qp_wr);
	if (buf_alloc(r, &sb, (size_t)n * 8, IBV_ACCESS_LOCAL_WRITE))
		return -1;
	for (i = 0; i < n; i++)
		memcpy(sb.p + (size_t)i * 8, &(uint64_t){ i }, 8);
	p.max_send_wr = r->dev.max_qp_wr;
	p.send_cqe = r->dev.max_qp_wr;
	if (conn_open(r, &c, &p, &remote))
		return -1;
	lim_ahs(r, remote.lid);
	if (chan_sync(r, "ready"))
		return -1;

	/* All at once: the SQ holds max_qp_wr WRs. */
	for (i = 0; i < n; i += (uint32_t)m) {
		m = (int)MIN(n - i, LIM_BATCH);
		for (k = 0; k < (uint32_t)m; k++) {
			sge[k] = (struct ibv_sge){ .addr = (uintptr_t)sb.p + (size_t)(i + k) * 8,
						   .length = 8, .lkey = sb.mr->lkey };
			wr[k] = (struct ibv_send_wr){
				.wr_id = i + k, .sg_list = &sge[k], .num_sge = 1,
				.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
				.next = k + 1 < (uint32_t)m ? &wr[k + 1] : NULL,
			};
		}
		ret = ibv_post_send(c.qp, wr, &badwr);
		if (ret)
			return fail(r, "ibv_post_send(SEND %u of %u): %s",
				    i + (uint32_t)(badwr - wr), n, strerror(ret));
	}
	check(r, true, "%u SENDs posted to an SQ of max_qp_wr = %d", n, r->dev.max_qp_wr);

	/* RC completes in order. */
	while (got < n) {
		m = lim_poll(r, c.scq, wc, n - got);
		if (m < 0)
			return fail(r, "ibv_poll_cq failed");
		if (!m)
			break;
		for (int j = 0; j < m; j++)
			if ((wc[j].status != IBV_WC_SUCCESS || wc[j].wr_id != got + j) && !wrong++)
				snprintf(why, sizeof(why), "completion %u: wr_id %" PRIu64 " status %s",
					 got + j, wc[j].wr_id, ibv_wc_status_str(wc[j].status));
		got += (uint32_t)m;
	}
	check_why(r, got == n && !wrong, "every SEND completed with SUCCESS, in order",
		  "%u of %u, %u wrong: %s", got, n, wrong, why);
	if (chan_recv_verdict(r, &server_ok))
		return -1;
	check(r, server_ok, "the server received every message once, intact");
	if (chan_sync(r, "end"))
		return -1;
	conn_close(r, &c);
	buf_free(r, &sb);
	return 0;
}
