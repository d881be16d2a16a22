// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-verbs-test: memory windows and MR re-registration
 * (the program is described in pib_verbs_test.c; what the files share is in pib_verbs.h)
 *
 * Subtests mw and rereg.
 */
#define _GNU_SOURCE
#include "pib_verbs.h"

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

int mw_server(struct role *r)
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

int mw_client(struct role *r)
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

int rereg_server(struct role *r)
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

int rereg_client(struct role *r)
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
