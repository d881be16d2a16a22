// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-verbs-test: RC data: SEND sizes, RDMA WRITE and READ, atomics
 * (the program is described in pib_verbs_test.c; what the files share is in pib_verbs.h)
 *
 * Subtests send-sizes, rdma-rw and atomics.
 */
#define _GNU_SOURCE
#include "pib_verbs.h"

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

int send_sizes_server(struct role *r)
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

int send_sizes_client(struct role *r)
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

int rdma_rw_server(struct role *r)
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

int rdma_rw_client(struct role *r)
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

int atomics_server(struct role *r)
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

int atomics_client(struct role *r)
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
