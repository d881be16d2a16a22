// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-misuse-test: a verbs consumer that gets everything wrong, and what it must get back.
 *
 * Each case misuses the verbs in one way and checks the answer the IB specification (or,
 * where it leaves a choice, the provider) gives, with the device and the kernel staying
 * healthy throughout (the e2e test, tests/e2e/42-misuse.sh, checks the kernel log):
 *
 *   bad-lkey        SGEs with a flipped key byte, a deregistered MR's key, another PD's MR,
 *                   an MR without LOCAL_WRITE for READ data, a receive with a bad lkey:
 *                   LOC_PROT_ERR (the sender of a SEND into a bad receive: REM_OP_ERR)
 *   sge-range       SGEs that reach past either end of their MR, or are too long: LOC_PROT_ERR
 *                   (LOC_LEN_ERR past the largest message)
 *   wrong-state     WRs posted while the QP is in RESET, INIT or ERR (see below)
 *   mcast           multicast attach/detach of a QP that is not UD, to a unicast GID or LID,
 *                   or a detach of a QP that is not attached: EINVAL
 *   queue-depth     more WRs than the SQ or RQ holds: ENOMEM with bad_wr at the first one that
 *                   did not fit; too many SGEs, too much inline data: EINVAL
 *   cq-overflow     more completions than the CQ holds: IBV_EVENT_CQ_ERR
 *   dereg-inflight  deregistering the target (or source) MR of a large RDMA WRITE/READ while
 *                   it is in flight: dereg succeeds, the transfer completes or fails with an
 *                   access error, and no byte changes after ibv_dereg_mr returned
 *   destroy-busy    destroying a CQ, PD or SRQ that something still uses: EBUSY, and the object
 *                   keeps working
 *   import          a second context on a dup of the command file (ibv_import_device): PD and
 *                   MR handles it does not hold, or of the wrong type, are refused; the real
 *                   ones import and carry an RDMA WRITE; an imported MR the exporter
 *                   deregistered: LOC_PROT_ERR; unimporting leaves the exporter's PD working
 *   dmabuf          MRs over a dma-buf (udmabuf or vgem): an RDMA WRITE lands in it; not a
 *                   dma-buf, past its end, a mismatched page offset: refused; rereg: refused
 *
 * What pib does with WRs posted in the wrong state (the IBTA lets a post in RESET, INIT or RTR
 * fail at once): a post to a QP in RESET fails with EINVAL, as rdma-core's own test suite
 * expects of every provider (a QP in RESET has no usable ring: a move to RESET discards it);
 * in INIT and RTR ibv_post_send and ibv_post_recv return 0, as mlx5's fast path does: the
 * device records the doorbell, executes nothing until the QP reaches RTS (SQ) or RTR (RQ),
 * then runs what was posted; a move to RESET discards it; in ERR every WR completes with
 * WR_FLUSH_ERR.  The wrong-state case checks exactly that.
 *
 * Everything runs in loopback: two RC QPs of one context, connected through the port's own
 * LID.  Output: one line per check, "PASS  case: what" or "FAIL  case: what: why", "info"
 * lines for outcomes that depend on timing.  Exit 1 if any check failed, 2 on a setup error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/ioctl.h>
#include <sys/mman.h>

/*
 * The guest kernel's UAPI (tests/guest/build.sh), as the headers package ships it, without
 * headers_install's cleaning: __user is the kernel's address-space annotation.
 */
#define __user
#include <drm/drm.h>
#include <linux/udmabuf.h>
#include <infiniband/verbs.h>

#include "pib_report.h"
#include "pib_test_util.h"

#define PAGE 4096
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* =============================================================================================
 * Output and checks
 */

static const char *case_name = "setup";
static int timeout_ms = 30000;	/* for any one completion or event (-t) */

/* Output (tests/common/pib_report.h): every line names the case. */
#define check(ok, ...)	report_check(case_name, ok, __VA_ARGS__)
#define info(...)	report_info(case_name, __VA_ARGS__)
/* A setup step failed: the case cannot go on.  Returns -1. */
#define fail(...)	report_fail(case_name, __VA_ARGS__)

static const char *st(enum ibv_wc_status s)
{
	return ibv_wc_status_str(s);
}

/* =============================================================================================
 * The device, and a loopback pair of RC QPs
 */

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_port_attr port;
	struct ibv_device_attr attr;
	int ib_port;
};

/* A registered buffer. */
struct buf {
	uint8_t *p;
	size_t len;
	struct ibv_mr *mr;
};

struct pair {
	struct ibv_cq *cq_a, *cq_b;	/* send and receive CQ of each QP */
	struct ibv_qp *a, *b;
	struct ibv_qp_cap cap;		/* what was asked; a->cap after creation */
};

static int buf_alloc(struct dev *d, struct buf *b, size_t len, int access)
{
	b->len = len;
	if (posix_memalign((void **)&b->p, PAGE, len))
		return fail("cannot allocate %zu bytes", len);
	memset(b->p, 0, len);
	b->mr = ibv_reg_mr(d->pd, b->p, len, access);
	if (!b->mr)
		return fail("ibv_reg_mr(%zu bytes): %s", len, strerror(errno));
	return 0;
}

static void buf_free(struct buf *b)
{
	if (b->mr)
		ibv_dereg_mr(b->mr);
	free(b->p);
	memset(b, 0, sizeof(*b));
}

static int qp_to_rts(struct dev *d, struct ibv_qp *qp, uint32_t remote_qpn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = d->ib_port,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};
	int err;

	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS);
	if (err)
		return err;
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR,
		.path_mtu = d->port.active_mtu,
		.dest_qp_num = remote_qpn,
		.rq_psn = 0x100,
		.max_dest_rd_atomic = 4,
		.min_rnr_timer = 12,
		.ah_attr = { .dlid = d->port.lid, .port_num = d->ib_port },
	};
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			    IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTS,
		.sq_psn = 0x100,
		.timeout = 16,		/* 268 ms: generous, the guest may run under TCG */
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = 4,
	};
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* RESET -> INIT needs the port, the P_Key index and the access flags. */
static int qp_to_init(struct dev *d, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = d->ib_port,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS);
}

static int qp_to(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return (enum ibv_qp_state)-1;
	return a.qp_state;
}

/* Take every completion the CQ holds; returns how many. */
static int drain(struct ibv_cq *cq)
{
	struct ibv_wc wc[16];
	int n, total = 0;

	while ((n = ibv_poll_cq(cq, ARRAY_SIZE(wc), wc)) > 0)
		total += n;
	return total;
}

/* Both QPs to RESET (which discards their WRs), their CQs emptied. */
static int pair_reset(struct pair *p)
{
	if (qp_to(p->a, IBV_QPS_RESET) || qp_to(p->b, IBV_QPS_RESET))
		return fail("modify to RESET: %s", strerror(errno));
	drain(p->cq_a);
	drain(p->cq_b);
	return 0;
}

/* Both QPs through RESET to RTS, connected to each other. */
static int pair_connect(struct dev *d, struct pair *p)
{
	int err;

	if (pair_reset(p))
		return -1;
	err = qp_to_rts(d, p->a, p->b->qp_num);
	if (!err)
		err = qp_to_rts(d, p->b, p->a->qp_num);
	if (err)
		return fail("QPs to RTS: %s", strerror(err));
	return 0;
}

static int pair_create(struct dev *d, struct pair *p, int cqe_a, int send_wr, int recv_wr)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = send_wr, .max_recv_wr = recv_wr, .max_send_sge = 4,
			 .max_recv_sge = 4, .max_inline_data = 64 },
	};

	memset(p, 0, sizeof(*p));
	p->cq_a = ibv_create_cq(d->ctx, cqe_a, NULL, NULL, 0);
	p->cq_b = ibv_create_cq(d->ctx, 256, NULL, NULL, 0);
	if (!p->cq_a || !p->cq_b)
		return fail("ibv_create_cq: %s", strerror(errno));
	ia.send_cq = ia.recv_cq = p->cq_a;
	p->a = ibv_create_qp(d->pd, &ia);
	p->cap = ia.cap;
	ia.send_cq = ia.recv_cq = p->cq_b;
	p->b = p->a ? ibv_create_qp(d->pd, &ia) : NULL;
	if (!p->a || !p->b)
		return fail("ibv_create_qp: %s", strerror(errno));
	return pair_connect(d, p);
}

static void pair_destroy(struct pair *p)
{
	if (p->a)
		ibv_destroy_qp(p->a);
	if (p->b)
		ibv_destroy_qp(p->b);
	if (p->cq_a)
		ibv_destroy_cq(p->cq_a);
	if (p->cq_b)
		ibv_destroy_cq(p->cq_b);
	memset(p, 0, sizeof(*p));
}

static int post_send(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		     struct ibv_sge *sge, int nsge, uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = sge, .num_sge = nsge, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

static int post_recv(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sge, int nsge)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sge, .num_sge = nsge }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/* The next completion within ms: true if one came. */
static bool wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	int64_t end = now_ms() + ms;

	do {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n > 0)
			return true;
		if (n < 0)
			return false;
		usleep(200);
	} while (now_ms() < end);
	return false;
}

/* The next completion must be wr_id with status want (or want2, if not -1). */
static bool expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status want, int want2,
		      const char *what)
{
	struct ibv_wc wc;

	if (!wait_wc(cq, &wc, timeout_ms))
		return check(false, "%s: no completion in %d ms (wanted %s)", what, timeout_ms,
			     st(want));
	if (wc.wr_id != wr_id || (wc.status != want && (int)wc.status != want2))
		return check(false, "%s: completion wr_id %" PRIu64 " %s (wanted wr_id %" PRIu64
			     " %s)", what, wc.wr_id, st(wc.status), wr_id, st(want));
	return check(true, "%s: %s", what, st(wc.status));
}

static bool expect_no_wc(struct ibv_cq *cq, int ms, const char *what)
{
	struct ibv_wc wc;

	if (wait_wc(cq, &wc, ms))
		return check(false, "%s: unexpected completion wr_id %" PRIu64 " %s", what,
			     wc.wr_id, st(wc.status));
	return check(true, "%s", what);
}

/* The next async event of this type for this object, within ms (others are skipped). */
static bool wait_event(struct dev *d, enum ibv_event_type type, void *obj, int ms)
{
	int64_t end = now_ms() + ms;

	while (now_ms() < end) {
		struct pollfd pfd = { .fd = d->ctx->async_fd, .events = POLLIN };
		struct ibv_async_event ev;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		while (!ibv_get_async_event(d->ctx, &ev)) {
			bool hit = ev.event_type == type &&
				   (ev.element.cq == obj || ev.element.qp == obj ||
				    ev.element.srq == obj);

			if (!hit)
				info("async event %s", ibv_event_type_str(ev.event_type));
			ibv_ack_async_event(&ev);
			if (hit)
				return true;
		}
	}
	return false;
}

/* =============================================================================================
 * bad-lkey: local protection errors from the keys of the local SGEs
 */

static int case_bad_lkey(struct dev *d)
{
	struct buf src = { 0 }, dst = { 0 }, noloc = { 0 }, gone = { 0 };
	struct ibv_pd *pd2 = ibv_alloc_pd(d->ctx);
	struct ibv_mr *other_pd_mr = NULL;
	struct pair p = { 0 };
	struct ibv_sge sge, rsge;
	uint32_t gone_lkey;
	int ret = -1;

	if (!pd2 || pair_create(d, &p, 64, 16, 16) ||
	    buf_alloc(d, &src, PAGE, IBV_ACCESS_LOCAL_WRITE) ||
	    buf_alloc(d, &dst, PAGE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		      IBV_ACCESS_REMOTE_READ) ||
	    buf_alloc(d, &noloc, PAGE, IBV_ACCESS_REMOTE_READ) ||
	    buf_alloc(d, &gone, PAGE, IBV_ACCESS_LOCAL_WRITE))
		goto out;
	other_pd_mr = ibv_reg_mr(pd2, src.p, PAGE, IBV_ACCESS_LOCAL_WRITE);
	if (!other_pd_mr) {
		fail("ibv_reg_mr in a second PD: %s", strerror(errno));
		goto out;
	}
	gone_lkey = gone.mr->lkey;
	ibv_dereg_mr(gone.mr);
	gone.mr = NULL;
	rsge = (struct ibv_sge){ (uintptr_t)dst.p, 256, dst.mr->lkey };

	const struct {
		const char *what;
		enum ibv_wr_opcode op;
		struct ibv_sge sge;
	} cases[] = {
		{ "SEND with the lkey's key byte flipped", IBV_WR_SEND,
		  { (uintptr_t)src.p, 64, src.mr->lkey ^ 0x01 } },
		{ "SEND with a deregistered MR's lkey", IBV_WR_SEND,
		  { (uintptr_t)gone.p, 64, gone_lkey } },
		{ "SEND with the lkey of an MR in another PD", IBV_WR_SEND,
		  { (uintptr_t)src.p, 64, other_pd_mr->lkey } },
		{ "RDMA WRITE gathering with a flipped lkey", IBV_WR_RDMA_WRITE,
		  { (uintptr_t)src.p, 64, src.mr->lkey ^ 0x80 } },
		{ "RDMA READ into an MR without LOCAL_WRITE", IBV_WR_RDMA_READ,
		  { (uintptr_t)noloc.p, 64, noloc.mr->lkey } },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		sge = cases[i].sge;
		if (post_recv(p.b, 1000 + i, &rsge, 1) ||
		    post_send(p.a, i, cases[i].op, &sge, 1, (uintptr_t)dst.p, dst.mr->rkey)) {
			fail("post: %s", strerror(errno));
			goto out;
		}
		expect_wc(p.cq_a, i, IBV_WC_LOC_PROT_ERR, -1, cases[i].what);
		check(qp_state(p.a) == IBV_QPS_ERR, "%s: the QP is in ERR", cases[i].what);
		/* The error is local: nothing reached the other QP. */
		expect_no_wc(p.cq_b, 100, "  ... and the peer received nothing");
		sge = (struct ibv_sge){ (uintptr_t)src.p, 8, src.mr->lkey };
		if (!post_send(p.a, 500 + i, IBV_WR_SEND, &sge, 1, 0, 0))
			expect_wc(p.cq_a, 500 + i, IBV_WC_WR_FLUSH_ERR, -1,
				  "  ... and a WR posted after it is flushed");
		if (pair_connect(d, &p))
			goto out;
	}

	/* The receiver's SGE is the bad one: its receive fails, the sender gets REM_OP_ERR. */
	rsge.lkey ^= 0x01;
	sge = (struct ibv_sge){ (uintptr_t)src.p, 64, src.mr->lkey };
	if (post_recv(p.b, 2000, &rsge, 1) ||
	    post_send(p.a, 2001, IBV_WR_SEND, &sge, 1, 0, 0)) {
		fail("post: %s", strerror(errno));
		goto out;
	}
	expect_wc(p.cq_b, 2000, IBV_WC_LOC_PROT_ERR, -1, "receive with a flipped lkey");
	expect_wc(p.cq_a, 2001, IBV_WC_REM_OP_ERR, -1, "the SEND into it");
	ret = 0;
out:
	if (other_pd_mr)
		ibv_dereg_mr(other_pd_mr);
	buf_free(&src);
	buf_free(&dst);
	buf_free(&noloc);
	buf_free(&gone);
	pair_destroy(&p);
	if (pd2)
		ibv_dealloc_pd(pd2);
	return ret;
}

/* =============================================================================================
 * sge-range: SGEs with a good key but a range outside their MR
 */

static int case_sge_range(struct dev *d)
{
	struct buf src = { 0 }, dst = { 0 };
	struct pair p = { 0 };
	struct ibv_sge rsge;
	int ret = -1;

	/* The MR covers the middle of the allocation: both neighbours are real memory. */
	if (pair_create(d, &p, 64, 16, 16) ||
	    buf_alloc(d, &dst, 4 * PAGE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE))
		goto out;
	if (posix_memalign((void **)&src.p, PAGE, 4 * PAGE)) {
		fail("posix_memalign");
		goto out;
	}
	src.len = 4 * PAGE;
	memset(src.p, 0x5a, src.len);
	src.mr = ibv_reg_mr(d->pd, src.p + PAGE, 2 * PAGE, IBV_ACCESS_LOCAL_WRITE);
	if (!src.mr) {
		fail("ibv_reg_mr: %s", strerror(errno));
		goto out;
	}
	uint8_t *lo = src.p + PAGE, *hi = src.p + 3 * PAGE;
	uint32_t k = src.mr->lkey;
	const struct {
		const char *what;
		struct ibv_sge sge[3];
		int nsge;
		enum ibv_wc_status want;
	} cases[] = {
		{ "SGE 16 bytes past the MR's end", { { (uintptr_t)hi - 48, 64, k } }, 1,
		  IBV_WC_LOC_PROT_ERR },
		{ "SGE starting 1 byte before the MR", { { (uintptr_t)lo - 1, 8, k } }, 1,
		  IBV_WC_LOC_PROT_ERR },
		{ "SGE starting past the MR's end", { { (uintptr_t)hi, 8, k } }, 1,
		  IBV_WC_LOC_PROT_ERR },
		{ "third of three SGEs past the end", { { (uintptr_t)lo, 4096, k },
		  { (uintptr_t)lo + 4096, 4096, k }, { (uintptr_t)hi - 8, 16, k } }, 3,
		  IBV_WC_LOC_PROT_ERR },
		{ "SGE of 4 GiB - 1 bytes", { { (uintptr_t)lo, UINT32_MAX, k } }, 1,
		  IBV_WC_LOC_LEN_ERR },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct ibv_sge sge[3];

		memcpy(sge, cases[i].sge, sizeof(sge));
		rsge = (struct ibv_sge){ (uintptr_t)dst.p, 4 * PAGE, dst.mr->lkey };
		if (post_recv(p.b, 1000 + i, &rsge, 1) ||
		    post_send(p.a, i, IBV_WR_RDMA_WRITE, sge, cases[i].nsge, (uintptr_t)dst.p,
			      dst.mr->rkey)) {
			fail("post: %s", strerror(errno));
			goto out;
		}
		/* A message past the largest one may fail either way: its length is wrong,
		 * and its SGE reaches outside the MR. */
		expect_wc(p.cq_a, i, cases[i].want,
			  cases[i].want == IBV_WC_LOC_LEN_ERR ? IBV_WC_LOC_PROT_ERR : -1,
			  cases[i].what);
		if (pair_connect(d, &p))
			goto out;
	}
	ret = 0;
out:
	buf_free(&src);
	buf_free(&dst);
	pair_destroy(&p);
	return ret;
}

/* =============================================================================================
 * wrong-state: WRs posted in RESET, INIT and ERR (what pib does: see the header comment)
 */

static int case_wrong_state(struct dev *d)
{
	struct buf b = { 0 };
	struct pair p = { 0 };
	struct ibv_sge sge, rsge;
	int ret = -1, err;

	if (pair_create(d, &p, 64, 16, 16) ||
	    buf_alloc(d, &b, 2 * PAGE, IBV_ACCESS_LOCAL_WRITE))
		goto out;
	memcpy(b.p, "wrong-state", 12);
	sge = (struct ibv_sge){ (uintptr_t)b.p, 64, b.mr->lkey };
	rsge = (struct ibv_sge){ (uintptr_t)b.p + PAGE, PAGE, b.mr->lkey };

	/* RESET: refused at once (EINVAL), and nothing of it runs later. */
	if (pair_reset(&p))
		goto out;
	err = post_send(p.a, 1, IBV_WR_SEND, &sge, 1, 0, 0);
	check(err == EINVAL, "post_send in RESET is refused with EINVAL, got %s", strerror(err));
	err = post_recv(p.a, 6, &rsge, 1);
	check(err == EINVAL, "post_recv in RESET is refused with EINVAL, got %s", strerror(err));
	err = qp_to_rts(d, p.b, p.a->qp_num) ?: post_recv(p.b, 100, &rsge, 1);
	err = err ?: qp_to_rts(d, p.a, p.b->qp_num);
	if (err) {
		fail("both QPs to RTS: %s", strerror(err));
		goto out;
	}
	expect_no_wc(p.cq_a, 300, "  ... and the refused SEND never runs, at RTS either");
	expect_no_wc(p.cq_b, 1, "  ... nothing arrives");

	/* INIT: the same. */
	memset(b.p + PAGE, 0, 64);
	if (pair_reset(&p) || qp_to_init(d, p.a)) {
		fail("to INIT: %s", strerror(errno));
		goto out;
	}
	err = post_send(p.a, 2, IBV_WR_SEND, &sge, 1, 0, 0);
	check(err == 0, "post_send in INIT returns 0 (pib holds the WR), got %s", strerror(err));
	err = qp_to_rts(d, p.b, p.a->qp_num) ?: post_recv(p.b, 101, &rsge, 1);
	if (err) {
		fail("peer to RTS with a receive: %s", strerror(err));
		goto out;
	}
	expect_no_wc(p.cq_a, 300, "nothing executes while the QP is in INIT");
	if (qp_to_rts(d, p.a, p.b->qp_num)) {
		fail("QP to RTS: %s", strerror(errno));
		goto out;
	}
	expect_wc(p.cq_a, 2, IBV_WC_SUCCESS, -1, "the SEND posted in INIT runs at RTS");
	expect_wc(p.cq_b, 101, IBV_WC_SUCCESS, -1, "  ... and arrives");
	check(!memcmp(b.p + PAGE, "wrong-state", 12), "  ... intact");

	/* ERR: every WR is flushed, receives too. */
	if (pair_connect(d, &p) || qp_to(p.a, IBV_QPS_ERR)) {
		fail("to ERR: %s", strerror(errno));
		goto out;
	}
	drain(p.cq_a);
	err = post_send(p.a, 4, IBV_WR_SEND, &sge, 1, 0, 0);
	check(err == 0, "post_send in ERR returns 0, got %s", strerror(err));
	expect_wc(p.cq_a, 4, IBV_WC_WR_FLUSH_ERR, -1, "  ... and the WR completes flushed");
	err = post_recv(p.a, 5, &rsge, 1);
	check(err == 0, "post_recv in ERR returns 0, got %s", strerror(err));
	expect_wc(p.cq_a, 5, IBV_WC_WR_FLUSH_ERR, -1, "  ... and the receive completes flushed");
	/* A move to RESET discards what was posted.  (Last: if the WR survives, the provider's
	 * and the device's ring indices disagree from then on.) */
	if (pair_reset(&p) || qp_to_init(d, p.a)) {
		fail("to INIT: %s", strerror(errno));
		goto out;
	}
	err = post_send(p.a, 3, IBV_WR_SEND, &sge, 1, 0, 0);
	check(err == 0, "post_send in INIT returns 0 (pib holds the WR), got %s", strerror(err));
	err = qp_to(p.a, IBV_QPS_RESET) ?: qp_to_rts(d, p.b, p.a->qp_num) ?:
	      post_recv(p.b, 102, &rsge, 1) ?: qp_to_rts(d, p.a, p.b->qp_num);
	if (err) {
		fail("INIT -> RESET -> RTS: %s", strerror(err));
		goto out;
	}
	expect_no_wc(p.cq_a, 500, "a WR posted in INIT, then the QP reset: discarded");
	expect_no_wc(p.cq_b, 1, "  ... nothing arrives");

	ret = 0;
out:
	buf_free(&b);
	pair_destroy(&p);
	return ret;
}

/* =============================================================================================
 * queue-depth: more WRs than the queues hold, bigger WRs than the slots hold
 */

static int case_queue_depth(struct dev *d)
{
	enum { DEPTH = 8, MAXN = 64 };
	struct ibv_send_wr wr[MAXN + 1], *bad = NULL;
	struct ibv_recv_wr rwr[MAXN + 1], *rbad = NULL;
	struct ibv_sge sge[MAXN + 1], big_sge[17];
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	struct buf b = { 0 };
	struct pair p = { 0 };
	uint32_t sq, rq;
	int ret = -1, err, n;

	if (pair_create(d, &p, 256, DEPTH, DEPTH) ||
	    buf_alloc(d, &b, PAGE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE))
		goto out;
	/* The queues may be deeper than asked (pib rounds up to a power of two): use what the
	 * QP reports. */
	if (ibv_query_qp(p.a, &qa, IBV_QP_CAP, &ia)) {
		fail("ibv_query_qp: %s", strerror(errno));
		goto out;
	}
	sq = ia.cap.max_send_wr;
	rq = ia.cap.max_recv_wr;
	info("SQ holds %u WRs, RQ %u (asked %d)", sq, rq, DEPTH);
	if (sq < DEPTH || sq > MAXN || rq < DEPTH || rq > MAXN) {
		fail("unexpected queue sizes");
		goto out;
	}

	/* One list one longer than the SQ: all but the last are posted. */
	for (uint32_t i = 0; i <= sq; i++) {
		sge[i] = (struct ibv_sge){ (uintptr_t)b.p + 8 * i, 8, b.mr->lkey };
		wr[i] = (struct ibv_send_wr){
			.wr_id = i, .sg_list = &sge[i], .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED, .next = i < sq ? &wr[i + 1] : NULL,
			.wr.rdma = { (uintptr_t)b.p + 2048 + 8 * i, b.mr->rkey },
		};
	}
	err = ibv_post_send(p.a, wr, &bad);
	check(err == ENOMEM && bad == &wr[sq], "a list of %u WRs on a %u-deep SQ: ENOMEM, "
	      "bad_wr the last one (got %s, bad_wr #%td)", sq + 1, sq, strerror(err),
	      bad ? bad - wr : -1);
	n = 0;
	for (uint32_t i = 0; i < sq; i++) {
		struct ibv_wc wc;

		if (wait_wc(p.cq_a, &wc, timeout_ms) && wc.wr_id == i &&
		    wc.status == IBV_WC_SUCCESS)
			n++;
	}
	check(n == (int)sq, "  ... the %u before it complete, in order, with SUCCESS (%d did)",
	      sq, n);
	expect_no_wc(p.cq_a, 200, "  ... and the last one never ran");

	/* Completed but not yet polled: the slots are still taken. */
	wr[sq - 1].next = NULL;
	err = ibv_post_send(p.a, wr, &bad);
	if (err) {
		fail("post %u WRs: %s", sq, strerror(err));
		goto out;
	}
	usleep(300 * 1000);
	wr[0].next = NULL;
	err = ibv_post_send(p.a, &wr[0], &bad);
	check(err == ENOMEM && bad == &wr[0], "one more WR while %u completions are unpolled: "
	      "ENOMEM (got %s)", sq, strerror(err));
	n = drain(p.cq_a);
	check(n == (int)sq, "  ... %u completions to poll (%d)", sq, n);
	err = ibv_post_send(p.a, &wr[0], &bad);
	check(err == 0, "  ... and once polled, the WR posts (%s)", strerror(err));
	expect_wc(p.cq_a, 0, IBV_WC_SUCCESS, -1, "  ... and completes");

	/* The RQ: one list one longer than it. */
	for (uint32_t i = 0; i <= rq; i++) {
		sge[i] = (struct ibv_sge){ (uintptr_t)b.p, 8, b.mr->lkey };
		rwr[i] = (struct ibv_recv_wr){ .wr_id = 100 + i, .sg_list = &sge[i], .num_sge = 1,
					       .next = i < rq ? &rwr[i + 1] : NULL };
	}
	err = ibv_post_recv(p.b, rwr, &rbad);
	check(err == ENOMEM && rbad == &rwr[rq], "a list of %u receives on a %u-deep RQ: "
	      "ENOMEM, bad_wr the last one (got %s, bad_wr #%td)", rq + 1, rq, strerror(err),
	      rbad ? rbad - rwr : -1);

	/* WRs bigger than a slot. */
	for (int i = 0; i < 17; i++)
		big_sge[i] = (struct ibv_sge){ (uintptr_t)b.p + 16 * i, 16, b.mr->lkey };
	n = ia.cap.max_send_sge + 1;
	if (n > 17)
		n = 17;
	wr[0] = (struct ibv_send_wr){ .wr_id = 7, .sg_list = big_sge, .num_sge = n,
				      .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	drain(p.cq_a);
	bad = NULL;
	err = ibv_post_send(p.a, &wr[0], &bad);
	check(err == EINVAL && bad == &wr[0], "SEND with %d SGEs on a QP made for %u: EINVAL "
	      "(got %s)", n, ia.cap.max_send_sge, strerror(err));
	wr[0].num_sge = -1;
	bad = NULL;
	err = ibv_post_send(p.a, &wr[0], &bad);
	check(err == EINVAL && bad == &wr[0], "SEND with num_sge -1: EINVAL (got %s)",
	      strerror(err));
	big_sge[0].length = PAGE;
	wr[0].num_sge = 1;
	wr[0].send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	bad = NULL;
	err = ibv_post_send(p.a, &wr[0], &bad);
	check(err == EINVAL && bad == &wr[0], "inline SEND of %d bytes, max_inline_data %u: "
	      "EINVAL (got %s)", PAGE, ia.cap.max_inline_data, strerror(err));
	expect_no_wc(p.cq_a, 200, "  ... none of them ran");
	check(qp_state(p.a) == IBV_QPS_RTS, "  ... and the QP is still RTS");
	ret = 0;
out:
	buf_free(&b);
	pair_destroy(&p);
	return ret;
}

/* =============================================================================================
 * cq-overflow: completions beyond the CQ's size
 */

static int case_cq_overflow(struct dev *d)
{
	struct buf b = { 0 };
	struct pair p = { 0 };
	int ret = -1, n;

	if (pair_create(d, &p, 4, 64, 16) ||
	    buf_alloc(d, &b, PAGE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE))
		goto out;
	n = p.cq_a->cqe + 8;
	if (n > 64)
		n = 64;
	info("CQ of %d entries (asked 4), %d signaled WRITEs", p.cq_a->cqe, n);
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = { (uintptr_t)b.p, 8, b.mr->lkey };

		if (post_send(p.a, i, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.p + 64,
			      b.mr->rkey)) {
			fail("post %d: %s", i, strerror(errno));
			goto out;
		}
	}
	check(wait_event(d, IBV_EVENT_CQ_ERR, p.cq_a, timeout_ms),
	      "%d completions into a CQ of %d: IBV_EVENT_CQ_ERR on that CQ", n, p.cq_a->cqe);
	ret = 0;
out:
	buf_free(&b);
	/* Destroying a CQ in error (after its QP) must work as any other. */
	if (p.a) {
		check(!ibv_destroy_qp(p.a), "destroy the QP of the overflowed CQ");
		p.a = NULL;
	}
	if (p.cq_a) {
		check(!ibv_destroy_cq(p.cq_a), "destroy the overflowed CQ");
		p.cq_a = NULL;
	}
	pair_destroy(&p);
	return ret;
}

/* =============================================================================================
 * dereg-inflight: ibv_dereg_mr while an RDMA WRITE or READ uses the MR
 */

/*
 * A transfer long enough to be caught: NWR WRs of BIG bytes each (1024 packets each at MTU
 * 4096), all over the same two buffers, so that the memory stays small.
 */
enum { BIG = 4 << 20, NWR = 16 };

/* How many bytes of p differ from ref. */
static size_t ndiff(const uint8_t *p, const uint8_t *ref, size_t n)
{
	size_t d = 0;

	for (size_t i = 0; i < n; i++)
		d += p[i] != ref[i];
	return d;
}

/*
 * One run: QP a posts NWR RDMA WRITEs (or READs) of BIG bytes between its MR "mine" and QP
 * b's MR "theirs", and the MR the run is about (theirs, or mine) is deregistered while they
 * are going on.  Each MR covers the middle of an allocation with a guard page on each side.
 * The WRs must complete in order: some with SUCCESS, then (if the dereg caught one) one with
 * fail_status, then the rest flushed; and no byte of the deregistered MR's allocation may
 * change once ibv_dereg_mr has returned.
 */
static void dereg_run(struct dev *d, struct pair *p, const char *what, enum ibv_wr_opcode op,
		      bool victim_is_target, enum ibv_wc_status fail_status)
{
	uint8_t *mine = NULL, *theirs = NULL, *snap = NULL, *victim_region;
	struct ibv_mr *mr_mine = NULL, *mr_theirs = NULL, *victim;
	int n_ok = 0, n_err = 0, n_flush = 0, n_wrong = 0;
	struct ibv_sge sge;
	int64_t t0, t_dereg;
	int err;

	if (posix_memalign((void **)&mine, PAGE, BIG + 2 * PAGE) ||
	    posix_memalign((void **)&theirs, PAGE, BIG + 2 * PAGE) ||
	    !(snap = malloc(BIG + 2 * PAGE))) {
		fail("%s: out of memory", what);
		goto out;
	}
	memset(mine, 0x11, BIG + 2 * PAGE);
	memset(theirs, 0x22, BIG + 2 * PAGE);
	mr_mine = ibv_reg_mr(d->pd, mine + PAGE, BIG, IBV_ACCESS_LOCAL_WRITE);
	mr_theirs = ibv_reg_mr(d->pd, theirs + PAGE, BIG, IBV_ACCESS_LOCAL_WRITE |
			       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr_mine || !mr_theirs) {
		fail("%s: ibv_reg_mr: %s", what, strerror(errno));
		goto out;
	}
	victim = victim_is_target ? mr_theirs : mr_mine;
	victim_region = victim_is_target ? theirs : mine;

	sge = (struct ibv_sge){ (uintptr_t)mine + PAGE, BIG, mr_mine->lkey };
	for (int i = 0; i < NWR; i++)
		if (post_send(p->a, i, op, &sge, 1, (uintptr_t)theirs + PAGE, mr_theirs->rkey)) {
			fail("%s: post: %s", what, strerror(errno));
			goto out;
		}
	t0 = now_ms();
	usleep(20 * 1000);	/* let the first packets go */
	err = ibv_dereg_mr(victim);
	t_dereg = now_ms() - t0;
	if (victim_is_target)
		mr_theirs = NULL;
	else
		mr_mine = NULL;
	/* From here on the device must not write into the victim's memory. */
	memcpy(snap, victim_region, BIG + 2 * PAGE);
	check(err == 0, "%s: ibv_dereg_mr succeeds %" PRId64 " ms into %d x %d MiB (%s)", what,
	      t_dereg, NWR, BIG >> 20, strerror(err));

	for (int i = 0; i < NWR; i++) {
		struct ibv_wc wc;

		if (!wait_wc(p->cq_a, &wc, timeout_ms)) {
			check(false, "%s: completion %d of %d did not come in %d ms", what, i + 1,
			      NWR, timeout_ms);
			goto out;
		}
		if (wc.wr_id != (uint64_t)i)
			n_wrong++;
		else if (wc.status == IBV_WC_SUCCESS && !n_err && !n_flush)
			n_ok++;
		else if (wc.status == fail_status && !n_err && !n_flush)
			n_err++;
		else if (wc.status == IBV_WC_WR_FLUSH_ERR && n_err)
			n_flush++;
		else
			n_wrong++;
		if (n_wrong == 1 && wc.wr_id == (uint64_t)i)
			info("%s: WR %d: %s", what, i, st(wc.status));
	}
	check(!n_wrong && n_ok + n_err + n_flush == NWR,
	      "%s: in order, %d SUCCESS, %d %s, %d flushed%s", what, n_ok, n_err,
	      st(fail_status), n_flush, n_wrong ? " and some out of place" : "");
	info("%s: the dereg %s", what, n_err ? "cut the transfer short" :
	     "came after the last packet (nothing caught in flight)");
	usleep(200 * 1000);	/* anything late would land now */
	check(ndiff(victim_region, snap, BIG + 2 * PAGE) == 0,
	      "%s: no byte of the deregistered MR or its guard pages changed after the dereg",
	      what);
	/* The guard pages of the other buffer, which stays registered. */
	{
		uint8_t *other = victim_is_target ? mine : theirs;
		uint8_t g = victim_is_target ? 0x11 : 0x22;
		size_t bad = 0;

		for (size_t i = 0; i < PAGE; i++)
			bad += (other[i] != g) + (other[PAGE + BIG + i] != g);
		check(bad == 0, "%s: the other MR's guard pages are intact", what);
	}
out:
	if (mr_mine)
		ibv_dereg_mr(mr_mine);
	if (mr_theirs)
		ibv_dereg_mr(mr_theirs);
	free(mine);
	free(theirs);
	free(snap);
}

static int case_dereg_inflight(struct dev *d)
{
	struct pair p = { 0 };

	if (pair_create(d, &p, 64, NWR, 16))
		return -1;
	dereg_run(d, &p, "RDMA WRITE, target MR deregistered", IBV_WR_RDMA_WRITE, true,
		  IBV_WC_REM_ACCESS_ERR);
	if (!pair_connect(d, &p))
		dereg_run(d, &p, "RDMA READ, source MR deregistered", IBV_WR_RDMA_READ, true,
			  IBV_WC_REM_ACCESS_ERR);
	if (!pair_connect(d, &p))
		dereg_run(d, &p, "RDMA WRITE, local MR deregistered", IBV_WR_RDMA_WRITE, false,
			  IBV_WC_LOC_PROT_ERR);
	if (!pair_connect(d, &p))
		dereg_run(d, &p, "RDMA READ, local MR deregistered", IBV_WR_RDMA_READ, false,
			  IBV_WC_LOC_PROT_ERR);
	/* The device is still sane: a small WRITE on a fresh connection works. */
	if (!pair_connect(d, &p)) {
		struct buf b = { 0 };

		if (!buf_alloc(d, &b, PAGE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)) {
			struct ibv_sge sge = { (uintptr_t)b.p, 64, b.mr->lkey };

			memset(b.p, 0x77, 64);
			if (!post_send(p.a, 9, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)b.p + 1024,
				       b.mr->rkey) &&
			    expect_wc(p.cq_a, 9, IBV_WC_SUCCESS, -1, "a WRITE afterwards works"))
				check(b.p[1024] == 0x77 && b.p[1087] == 0x77, "  ... and lands");
			buf_free(&b);
		}
	}
	pair_destroy(&p);
	return 0;
}

/* =============================================================================================
 * destroy-busy: objects still in use
 */

static int case_destroy_busy(struct dev *d)
{
	struct ibv_pd *pd = ibv_alloc_pd(d->ctx);
	struct ibv_cq *cq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
	struct ibv_mr *mr = NULL;
	struct ibv_qp *qp = NULL, *qp2 = NULL;
	struct ibv_srq *srq = NULL;
	uint8_t *mem = NULL;
	int err, ret = -1;

	if (!pd || !cq || posix_memalign((void **)&mem, PAGE, PAGE)) {
		fail("setup: %s", strerror(errno));
		goto out;
	}
	mr = ibv_reg_mr(pd, mem, PAGE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	{
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};

		qp = mr ? ibv_create_qp(pd, &ia) : NULL;
	}
	if (!qp) {
		fail("setup: %s", strerror(errno));
		goto out;
	}

	err = ibv_destroy_cq(cq);
	check(err == EBUSY, "destroy a CQ a QP uses: EBUSY (got %s)", strerror(err));
	err = ibv_dealloc_pd(pd);
	check(err == EBUSY, "dealloc a PD with an MR and a QP: EBUSY (got %s)", strerror(err));

	/* Both still work: the QP talks to itself through the CQ. */
	{
		struct ibv_sge sge = { (uintptr_t)mem, 16, mr->lkey };

		memset(mem, 0x33, 16);
		err = qp_to_rts(d, qp, qp->qp_num);
		if (err) {
			fail("QP to RTS: %s", strerror(err));
			goto out;
		}
		if (!post_send(qp, 1, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)mem + 512, mr->rkey))
			expect_wc(cq, 1, IBV_WC_SUCCESS, -1,
				  "the CQ and PD still work after the refusals");
		check(mem[512] == 0x33, "  ... the WRITE landed");
	}

	{
		struct ibv_srq_init_attr sia = { .attr = { .max_wr = 4, .max_sge = 1 } };

		srq = ibv_create_srq(pd, &sia);
	}
	if (!srq) {
		info("no SRQ (%s): SRQ case skipped", strerror(errno));
	} else {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 4, .max_send_sge = 1 },
		};

		qp2 = ibv_create_qp(pd, &ia);
		if (!qp2) {
			fail("QP on an SRQ: %s", strerror(errno));
		} else {
			err = ibv_destroy_srq(srq);
			check(err == EBUSY, "destroy an SRQ a QP uses: EBUSY (got %s)",
			      strerror(err));
			check(!ibv_destroy_qp(qp2), "destroy that QP");
			qp2 = NULL;
		}
		check(!ibv_destroy_srq(srq), "then the SRQ goes");
		srq = NULL;
	}

	check(!ibv_destroy_qp(qp), "destroy the QP");
	qp = NULL;
	err = ibv_destroy_cq(cq);
	check(err == 0, "then the CQ goes (%s)", strerror(err));
	cq = NULL;
	err = ibv_dealloc_pd(pd);
	check(err == EBUSY, "the PD still has its MR: EBUSY (got %s)", strerror(err));
	check(!ibv_dereg_mr(mr), "dereg the MR");
	mr = NULL;
	err = ibv_dealloc_pd(pd);
	check(err == 0, "then the PD goes (%s)", strerror(err));
	pd = NULL;
	ret = 0;
out:
	if (qp2)
		ibv_destroy_qp(qp2);
	if (srq)
		ibv_destroy_srq(srq);
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
	if (mr)
		ibv_dereg_mr(mr);
	if (pd)
		ibv_dealloc_pd(pd);
	free(mem);
	return ret;
}

/* =============================================================================================
 * mcast: multicast attach and detach with bad arguments (the SA's groups are not needed: the
 * device takes any multicast MGID/MLID pair, as the ATTACH_MCAST contract says)
 */

static int case_mcast(struct dev *d)
{
	union ibv_gid mgid = { .raw = { 0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, [15] = 0x42 } };
	union ibv_gid ucast = { .raw = { 0xfe, 0x80, [15] = 0x01 } };
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_cq *cq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
	struct pair p = { 0 };
	struct ibv_qp *ud = NULL;
	int ret = -1, err;

	if (!cq) {
		fail("ibv_create_cq: %s", strerror(errno));
		goto out;
	}
	ia.send_cq = ia.recv_cq = cq;
	ud = ibv_create_qp(d->pd, &ia);
	if (!ud || pair_create(d, &p, 16, 4, 4)) {
		fail("ibv_create_qp: %s", strerror(errno));
		goto out;
	}
	err = ibv_detach_mcast(ud, &mgid, 0xc042);
	check(err == EINVAL, "detaching a QP that is not attached: EINVAL, got %s", strerror(err));
	err = ibv_attach_mcast(ud, &ucast, 0xc042);
	check(err == EINVAL, "attaching to a unicast GID: EINVAL, got %s", strerror(err));
	err = ibv_attach_mcast(ud, &mgid, 0x0042);
	check(err == EINVAL, "attaching with a unicast LID: EINVAL, got %s", strerror(err));
	err = ibv_attach_mcast(ud, &mgid, 0xffff);
	check(err == EINVAL, "attaching with the permissive LID: EINVAL, got %s", strerror(err));
	err = ibv_attach_mcast(p.a, &mgid, 0xc042);
	check(err == EINVAL, "attaching an RC QP: EINVAL, got %s", strerror(err));
	err = ibv_attach_mcast(ud, &mgid, 0xc042);
	check(err == 0, "attaching the UD QP: 0, got %s", strerror(err));
	err = ibv_attach_mcast(ud, &mgid, 0xc042);
	check(err == 0, "attaching it again: 0 (one attachment), got %s", strerror(err));
	err = ibv_detach_mcast(ud, &mgid, 0xc042);
	check(err == 0, "detaching it: 0, got %s", strerror(err));
	err = ibv_detach_mcast(ud, &mgid, 0xc042);
	check(err == EINVAL, "detaching it again: EINVAL (attached once), got %s", strerror(err));
	ret = 0;
out:
	pair_destroy(&p);
	if (ud)
		ibv_destroy_qp(ud);
	if (cq)
		ibv_destroy_cq(cq);
	return ret;
}

/* =============================================================================================
 * import: another context on this one's command file (ibv_import_device on a dup'd
 * descriptor, as a process handed the file over a unix socket would), the PD and MR imported
 * by handle, and the handles that must be refused
 */

/*
 * An RDMA WRITE from mem[0..15] to mem[512..] of one MR, on a QP of ctx (connected to itself)
 * in pd, with the given keys: the completion's status, or -1 if the setup failed.
 */
static int loopback_write(struct dev *d, struct ibv_context *ctx, struct ibv_pd *pd,
			  uint8_t *mem, uint32_t lkey, uint32_t rkey)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_sge sge = { (uintptr_t)mem, 16, lkey };
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *qp = NULL;
	struct ibv_wc wc;
	int err, ret = -1;

	if (!cq) {
		fail("ibv_create_cq: %s", strerror(errno));
		goto out;
	}
	ia.send_cq = ia.recv_cq = cq;
	qp = ibv_create_qp(pd, &ia);
	if (!qp) {
		fail("ibv_create_qp: %s", strerror(errno));
		goto out;
	}
	err = qp_to_rts(d, qp, qp->qp_num);
	if (!err)
		err = post_send(qp, 7, IBV_WR_RDMA_WRITE, &sge, 1, (uintptr_t)mem + 512, rkey);
	if (err) {
		fail("QP to RTS and post: %s", strerror(err));
		goto out;
	}
	if (!wait_wc(cq, &wc, timeout_ms)) {
		fail("no completion in %d ms", timeout_ms);
		goto out;
	}
	ret = wc.status;
out:
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
	return ret;
}

static int case_import(struct dev *d)
{
	struct ibv_context *ictx = NULL;
	struct ibv_pd *ipd = NULL, *bad_pd;
	struct ibv_mr *imr = NULL, *bad;
	struct buf b = {};
	uint32_t mr_handle;
	int fd, status, ret = -1;

	fd = dup(d->ctx->cmd_fd);
	ictx = fd < 0 ? NULL : ibv_import_device(fd);
	if (!ictx) {
		fail("ibv_import_device(dup of cmd_fd): %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	check(true, "ibv_import_device on a dup of the command file");

	errno = 0;
	bad_pd = ibv_import_pd(ictx, 0x7ffffff0);
	check(!bad_pd && errno, "import a PD handle the file does not hold: refused (%s)",
	      strerror(errno));
	if (bad_pd)
		ibv_unimport_pd(bad_pd);
	ipd = ibv_import_pd(ictx, d->pd->handle);
	if (!ipd) {
		fail("ibv_import_pd(%u): %s", d->pd->handle, strerror(errno));
		goto out;
	}
	check(ipd->handle == d->pd->handle && ipd->context == ictx,
	      "import the PD: same handle, in the importing context");

	if (buf_alloc(d, &b, PAGE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE))
		goto out;
	errno = 0;
	bad = ibv_import_mr(ipd, d->pd->handle);
	check(!bad && errno, "import a PD's handle as an MR: refused (%s)", strerror(errno));
	if (bad)
		ibv_unimport_mr(bad);
	imr = ibv_import_mr(ipd, b.mr->handle);
	if (!imr) {
		fail("ibv_import_mr(%u): %s", b.mr->handle, strerror(errno));
		goto out;
	}
	check(imr->lkey == b.mr->lkey && imr->rkey == b.mr->rkey && imr->length == b.len &&
	      !imr->addr, "import the MR: the exporter's keys and length, no address");

	/* The imported context rings its own doorbells on the shared UAR page. */
	memset(b.p, 0x5a, 16);
	status = loopback_write(d, ictx, ipd, b.p, imr->lkey, imr->rkey);
	check(status == IBV_WC_SUCCESS && b.p[512] == 0x5a && b.p[527] == 0x5a,
	      "an RDMA WRITE on the importer's QP, with the imported PD and MR: %s, data landed",
	      status < 0 ? "no completion" : st(status));

	/* The exporter deregisters: the importer's copy holds dead keys. */
	mr_handle = b.mr->handle;
	check(!ibv_dereg_mr(b.mr), "the exporter deregisters the MR");
	b.mr = NULL;
	errno = 0;
	bad = ibv_import_mr(ipd, mr_handle);
	check(!bad && errno, "import the deregistered MR's handle: refused (%s)", strerror(errno));
	if (bad)
		ibv_unimport_mr(bad);
	memset(b.p + 512, 0, 16);
	status = loopback_write(d, ictx, ipd, b.p, imr->lkey, imr->rkey);
	check(status == IBV_WC_LOC_PROT_ERR && b.p[512] == 0,
	      "a WRITE with the imported copy's dead keys: LOC_PROT_ERR, nothing written (%s)",
	      status < 0 ? "no completion" : st(status));
	ibv_unimport_mr(imr);
	imr = NULL;

	/* Unimporting frees the importer's copy only: the PD is the exporter's, and works. */
	ibv_unimport_pd(ipd);
	ipd = NULL;
	check(!ibv_close_device(ictx), "close the importing context");
	ictx = NULL;
	b.mr = ibv_reg_mr(d->pd, b.p, b.len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	status = b.mr ? loopback_write(d, d->ctx, d->pd, b.p, b.mr->lkey, b.mr->rkey) : -1;
	check(status == IBV_WC_SUCCESS && b.p[512] == 0x5a,
	      "the exporter's context and PD still work: %s",
	      status < 0 ? "no MR or no completion" : st(status));
	ret = 0;
out:
	if (imr)
		ibv_unimport_mr(imr);
	if (ipd)
		ibv_unimport_pd(ipd);
	if (ictx)
		ibv_close_device(ictx);
	buf_free(&b);
	return ret;
}

/* =============================================================================================
 * dm: device memory misused.  A DM of 0 bytes, over max_dm_size or with an unknown comp_mask;
 * an MR over it that is not zero-based, runs past the DM, or asks for a window right; freeing
 * a DM an MR lies in (EBUSY, and it still works); a DM handle the file does not hold, imported;
 * an RDMA WRITE past the DM MR's end (REM_ACCESS_ERR, nothing written), one inside it (lands,
 * local SGE in the DM too); a new DM after the old one was freed reads zero.
 */

#define DM_LEN (2 * PAGE)
#define DM_ZB  IBV_ACCESS_ZERO_BASED

static int case_dm(struct dev *d)
{
	const unsigned int rw = DM_ZB | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_alloc_dm_attr attr = { .length = DM_LEN };
	struct ibv_device_attr_ex dev;
	struct ibv_dm *dm = NULL, *bad;
	struct ibv_mr *mr = NULL, *badmr;
	uint8_t pat[16], got[DM_LEN];
	int status, ret = -1;
	size_t i;

	if (ibv_query_device_ex(d->ctx, NULL, &dev) || dev.max_dm_size < DM_LEN) {
		fail("ibv_query_device_ex, or max_dm_size under %d bytes", DM_LEN);
		return -1;
	}
	attr.length = 0;
	bad = ibv_alloc_dm(d->ctx, &attr);
	check(!bad, "a DM of 0 bytes: refused (%s)", strerror(errno));
	attr.length = dev.max_dm_size + 1;
	bad = bad ? bad : ibv_alloc_dm(d->ctx, &attr);
	check(!bad, "a DM of max_dm_size + 1 bytes: refused (%s)", strerror(errno));
	attr.length = DM_LEN;
	attr.comp_mask = 1;
	bad = bad ? bad : ibv_alloc_dm(d->ctx, &attr);
	check(!bad, "a DM with an unknown comp_mask: refused (%s)", strerror(errno));
	if (bad)
		ibv_free_dm(bad);
	attr.comp_mask = 0;
	dm = ibv_alloc_dm(d->ctx, &attr);
	if (!dm) {
		fail("ibv_alloc_dm(%d): %s", DM_LEN, strerror(errno));
		return -1;
	}

	badmr = ibv_reg_dm_mr(d->pd, dm, 0, DM_LEN, rw & ~DM_ZB);
	check(!badmr, "a DM MR that is not zero-based: refused (%s)", strerror(errno));
	badmr = badmr ? badmr : ibv_reg_dm_mr(d->pd, dm, 8, DM_LEN, rw);
	check(!badmr, "a DM MR past the DM's end: refused (%s)", strerror(errno));
	badmr = badmr ? badmr : ibv_reg_dm_mr(d->pd, dm, 0, DM_LEN, rw | IBV_ACCESS_MW_BIND);
	check(!badmr, "a DM MR with MW_BIND: refused (%s)", strerror(errno));
	if (badmr)
		ibv_dereg_mr(badmr);
	mr = ibv_reg_dm_mr(d->pd, dm, 0, DM_LEN, rw);
	if (!mr) {
		fail("ibv_reg_dm_mr: %s", strerror(errno));
		goto out;
	}
	errno = 0;
	check(ibv_free_dm(dm) == EBUSY, "free a DM an MR lies in: EBUSY");

	errno = 0;
	bad = ibv_import_dm(d->ctx, 0x7ffffff0);
	check(!bad && errno, "import a DM handle the file does not hold: refused (%s)",
	      strerror(errno));
	if (bad)
		ibv_unimport_dm(bad);

	/* Loopback WRITEs, DM MR to DM MR: 16 bytes from offset 0 to 512, then past the end. */
	for (i = 0; i < sizeof(pat); i++)
		pat[i] = 0xa0 + i;
	if (ibv_memcpy_to_dm(dm, 0, pat, sizeof(pat))) {
		fail("ibv_memcpy_to_dm: %s", strerror(errno));
		goto out;
	}
	status = loopback_write(d, d->ctx, d->pd, NULL, mr->lkey, mr->rkey);
	check(status == IBV_WC_SUCCESS && !ibv_memcpy_from_dm(got, dm, 0, DM_LEN) &&
	      !memcmp(got + 512, pat, sizeof(pat)),
	      "an RDMA WRITE from the DM into the DM: %s, data landed",
	      status < 0 ? "no completion" : st(status));
	status = loopback_write(d, d->ctx, d->pd, (uint8_t *)(uintptr_t)(DM_LEN - 16), mr->lkey,
				mr->rkey);
	/*
	 * The QP is its own responder: the responder's access error moves it to ERR, which may
	 * flush the WRITE before the NAK completes it (e2e 29j sees REM_ACCESS_ERR between two).
	 */
	check(status == IBV_WC_REM_ACCESS_ERR || status == IBV_WC_WR_FLUSH_ERR,
	      "an RDMA WRITE past the DM MR's end: %s",
	      status < 0 ? "no completion" : st(status));
	{
		uint8_t after[DM_LEN];

		check(!ibv_memcpy_from_dm(after, dm, 0, DM_LEN) && !memcmp(after, got, DM_LEN),
		      "... and the DM is unchanged");
	}

	/* Freed, then allocated again: the device memory reads zero. */
	check(!ibv_dereg_mr(mr), "deregister the DM MR");
	mr = NULL;
	check(!ibv_free_dm(dm), "free the DM");
	dm = ibv_alloc_dm(d->ctx, &attr);
	if (!dm) {
		fail("ibv_alloc_dm again: %s", strerror(errno));
		goto out;
	}
	memset(got, 0xff, sizeof(got));
	check(!ibv_memcpy_from_dm(got, dm, 0, DM_LEN) &&
	      !memcmp(got, (uint8_t[DM_LEN]){ 0 }, DM_LEN), "a new DM reads zero");
	ret = 0;
out:
	if (mr)
		ibv_dereg_mr(mr);
	if (dm)
		ibv_free_dm(dm);
	return ret;
}

/* =============================================================================================
 * dmabuf: MRs over a dma-buf (ibv_reg_dmabuf_mr), from udmabuf (a memfd's pages; Linux 6.12's
 * Debian kernel has it) or vgem (a virtual GEM driver's dumb buffer; both kernels have the
 * module, which the e2e test loads).  The CPU sees the buffer through a mapping; an RDMA WRITE
 * through the MR must show there.  A descriptor that is not a dma-buf, a range past its end,
 * an offset whose page offset is not the iova's: refused; rereg of such an MR: EOPNOTSUPP.
 */

#define DMABUF_LEN (4 * PAGE)

struct dmabuf {
	int fd;                 /* the dma-buf */
	int owner;              /* what keeps it: the memfd (udmabuf) or the DRM card (vgem) */
	uint8_t *map;           /* the CPU's view */
	const char *from;
};

static int dmabuf_udmabuf(struct dmabuf *b)
{
	struct udmabuf_create c = { .size = DMABUF_LEN };
	int dev = open("/dev/udmabuf", O_RDWR);

	if (dev < 0)
		return -1;
	b->owner = memfd_create("pib-dmabuf", MFD_ALLOW_SEALING);
	if (b->owner < 0 || ftruncate(b->owner, DMABUF_LEN) ||
	    fcntl(b->owner, F_ADD_SEALS, F_SEAL_SHRINK)) {
		close(dev);
		return -1;
	}
	c.memfd = b->owner;
	b->fd = ioctl(dev, UDMABUF_CREATE, &c);
	close(dev);
	if (b->fd < 0)
		return -1;
	b->map = mmap(NULL, DMABUF_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, b->owner, 0);
	b->from = "udmabuf";
	return b->map == MAP_FAILED ? -1 : 0;
}

static int dmabuf_vgem(struct dmabuf *b)
{
	char name[16], path[32];
	int i;

	for (i = 0; i < 8; i++) {
		struct drm_version v = { .name = name, .name_len = sizeof(name) - 1 };
		struct drm_mode_create_dumb c = {
			.width = PAGE / 4, .height = DMABUF_LEN / PAGE, .bpp = 32,
		};
		struct drm_prime_handle h = { .flags = DRM_CLOEXEC | DRM_RDWR };

		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		memset(name, 0, sizeof(name));
		b->owner = open(path, O_RDWR);
		if (b->owner < 0)
			continue;
		if (ioctl(b->owner, DRM_IOCTL_VERSION, &v) || strcmp(name, "vgem") ||
		    ioctl(b->owner, DRM_IOCTL_MODE_CREATE_DUMB, &c) || c.size < DMABUF_LEN) {
			close(b->owner);
			continue;
		}
		h.handle = c.handle;
		if (ioctl(b->owner, DRM_IOCTL_PRIME_HANDLE_TO_FD, &h))
			return -1;
		b->fd = h.fd;
		b->map = mmap(NULL, DMABUF_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
		b->from = "vgem";
		return b->map == MAP_FAILED ? -1 : 0;
	}
	return -1;
}

static int case_dmabuf(struct dev *d)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct dmabuf b = { .fd = -1, .owner = -1, .map = MAP_FAILED };
	struct ibv_mr *mr = NULL, *bad;
	uint64_t iova;
	int status, err, ret = -1;

	if (dmabuf_udmabuf(&b) && dmabuf_vgem(&b)) {
		fail("no dma-buf exporter (/dev/udmabuf, or vgem's /dev/dri/card*): %s",
		     strerror(errno));
		goto out;
	}
	info("dma-buf of %d bytes from %s", DMABUF_LEN, b.from);
	/* The MR's addresses are the CPU's mapping's, so that one pointer names a byte for both. */
	iova = (uintptr_t)b.map;
	mr = ibv_reg_dmabuf_mr(d->pd, 0, DMABUF_LEN, iova, b.fd, access);
	if (!mr) {
		fail("ibv_reg_dmabuf_mr(%s): %s", b.from, strerror(errno));
		goto out;
	}
	check(mr->length == DMABUF_LEN, "register the whole dma-buf (%s)", b.from);
	memset(b.map, 0x6b, 16);
	memset(b.map + 512, 0, 16);
	status = loopback_write(d, d->ctx, d->pd, b.map, mr->lkey, mr->rkey);
	check(status == IBV_WC_SUCCESS && b.map[512] == 0x6b && b.map[527] == 0x6b,
	      "an RDMA WRITE from and into the dma-buf MR: %s, the data shows in the mapping",
	      status < 0 ? "no completion" : st(status));
	err = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE);
	check(err != 0, "rereg of a dma-buf MR: refused (%d, errno %s)", err, strerror(errno));

	errno = 0;
	bad = ibv_reg_dmabuf_mr(d->pd, 0, PAGE, iova, b.owner == b.fd ? 0 : b.owner, access);
	check(!bad && errno, "a descriptor that is not a dma-buf: refused (%s)", strerror(errno));
	if (bad)
		ibv_dereg_mr(bad);
	errno = 0;
	bad = ibv_reg_dmabuf_mr(d->pd, PAGE, DMABUF_LEN, iova, b.fd, access);
	check(!bad && errno, "a range past the dma-buf's end: refused (%s)", strerror(errno));
	if (bad)
		ibv_dereg_mr(bad);
	errno = 0;
	bad = ibv_reg_dmabuf_mr(d->pd, 100, PAGE, iova, b.fd, access);
	check(!bad && errno, "an offset whose page offset is not the iova's: refused (%s)",
	      strerror(errno));
	if (bad)
		ibv_dereg_mr(bad);
	check(!ibv_dereg_mr(mr), "dereg the dma-buf MR");
	mr = NULL;
	ret = 0;
out:
	if (mr)
		ibv_dereg_mr(mr);
	if (b.map != MAP_FAILED)
		munmap(b.map, DMABUF_LEN);
	if (b.fd >= 0)
		close(b.fd);
	if (b.owner >= 0)
		close(b.owner);
	return ret;
}

/* =============================================================================================
 * main
 */

static const struct {
	const char *name;
	int (*fn)(struct dev *);
} cases[] = {
	{ "bad-lkey", case_bad_lkey },
	{ "sge-range", case_sge_range },
	{ "wrong-state", case_wrong_state },
	{ "queue-depth", case_queue_depth },
	{ "cq-overflow", case_cq_overflow },
	{ "dereg-inflight", case_dereg_inflight },
	{ "destroy-busy", case_destroy_busy },
	{ "mcast", case_mcast },
	{ "import", case_import },
	{ "dmabuf", case_dmabuf },
	{ "dm", case_dm },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: pib-misuse-test [-d DEV] [-i PORT] [-t SECONDS] [CASE...]\ncases:");
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		fprintf(f, " %s", cases[i].name);
	fprintf(f, " (default: all)\n");
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	const char *dev_name = NULL;
	struct dev d = { .ib_port = 1 };
	int c, i;

	while ((c = getopt(argc, argv, "d:i:t:h")) != -1) {
		switch (c) {
		case 'd': dev_name = optarg; break;
		case 'i': d.ib_port = atoi(optarg); break;
		case 't': timeout_ms = atoi(optarg) * 1000; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	for (i = optind; i < argc; i++) {
		size_t k;

		for (k = 0; k < ARRAY_SIZE(cases) && strcmp(argv[i], cases[k].name); k++)
			;
		if (k == ARRAY_SIZE(cases)) {
			fprintf(stderr, "pib-misuse-test: no case '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	list = ibv_get_device_list(NULL);
	for (i = 0; list && list[i]; i++)
		if (!dev_name || !strcmp(ibv_get_device_name(list[i]), dev_name)) {
			d.ctx = ibv_open_device(list[i]);
			break;
		}
	if (list)
		ibv_free_device_list(list);
	if (!d.ctx || ibv_query_port(d.ctx, d.ib_port, &d.port) ||
	    ibv_query_device(d.ctx, &d.attr) || !(d.pd = ibv_alloc_pd(d.ctx))) {
		fprintf(stderr, "pib-misuse-test: cannot open %s: %s\n",
			dev_name ? dev_name : "a device", strerror(errno));
		return 2;
	}
	if (d.port.state != IBV_PORT_ACTIVE) {
		fprintf(stderr, "pib-misuse-test: port %d is not ACTIVE (loopback needs it)\n",
			d.ib_port);
		return 2;
	}
	fcntl(d.ctx->async_fd, F_SETFL, fcntl(d.ctx->async_fd, F_GETFL) | O_NONBLOCK);

	for (size_t k = 0; k < ARRAY_SIZE(cases); k++) {
		bool want = optind == argc;

		for (i = optind; i < argc; i++)
			want |= !strcmp(argv[i], cases[k].name);
		if (!want)
			continue;
		case_name = cases[k].name;
		cases[k].fn(&d);
	}
	case_name = "misuse";
	ibv_dealloc_pd(d.pd);
	ibv_close_device(d.ctx);
	return report_summary("misuse");
}
