// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-verbs-test: UD and the Q_Key
 * (the program is described in pib_verbs_test.c; what the files share is in pib_verbs.h)
 *
 * Subtest ud-qkey.
 */
#define _GNU_SOURCE
#include "pib_verbs.h"

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

int ud_qkey_server(struct role *r)
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

int ud_qkey_client(struct role *r)
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
