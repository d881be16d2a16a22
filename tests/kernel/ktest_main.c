// SPDX-License-Identifier: GPL-2.0
/*
 * pib_ktest: a kernel ULP that exercises pib's kernel data path on the first pib device:
 * PD (DMA MR), CQs (manual polling + CEQ events, and ib_alloc_cq's softirq polling), RC and UD
 * QPs in loopback through the port's own LID, SEND / SEND_IMM / inline / RDMA WRITE / READ /
 * atomics, query_qp, bad transitions, drain, and destroy-with-outstanding-WRs (flush CQEs must
 * not reach the consumer).  When the device has them: SRQs (two RC QPs sharing one, ring
 * wrap-around, the limit event, LAST_WQE_REACHED) and remote/local invalidation
 * (SEND_WITH_INV, LOCAL_INV), and fast registration (ktest_frwr.c).  Results go to the
 * kernel log ("pib_ktest: PASS/FAIL ...") and to /sys/module/pib_ktest/parameters/{passed,failed}.
 *
 * With frwr=owner or frwr=peer:<address> it runs none of that, but the fast registration
 * tests across the link, with the other node's pib_ktest (ktest_frwr.c).
 */
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/slab.h>

#include <rdma/ib_verbs.h>

#include "ktest.h"

int kt_passed, kt_failed;
module_param_named(passed, kt_passed, int, 0444);
module_param_named(failed, kt_failed, int, 0444);

static char *frwr = "";
module_param(frwr, charp, 0444);
MODULE_PARM_DESC(frwr, "owner | peer:<IPv4 address of the owner>: only the FRWR tests, across the link");

struct kt {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	atomic_t events;
	struct completion event;
	atomic_t srq_limit;             /* IB_EVENT_SRQ_LIMIT_REACHED */
	atomic_t last_wqe;              /* IB_EVENT_QP_LAST_WQE_REACHED */
	struct completion async;        /* either of those */
	u16 lid;
	void *buf[2];
	u64 dma[2];
};

static void kt_comp(struct ib_cq *cq, void *ctx)
{
	struct kt *kt = ctx;

	atomic_inc(&kt->events);
	complete(&kt->event);
}

static void kt_cq_event(struct ib_event *ev, void *ctx)
{
	pr_info("pib_ktest: CQ event %s\n", ib_event_msg(ev->event));
}

static void kt_qp_event(struct ib_event *ev, void *ctx)
{
	struct kt *kt = ctx;

	pr_info("pib_ktest: QP %#x event %s\n", ev->element.qp->qp_num, ib_event_msg(ev->event));
	if (ev->event == IB_EVENT_QP_LAST_WQE_REACHED) {
		atomic_inc(&kt->last_wqe);
		complete(&kt->async);
	}
}

static void kt_srq_event(struct ib_event *ev, void *ctx)
{
	struct kt *kt = ctx;

	pr_info("pib_ktest: SRQ event %s\n", ib_event_msg(ev->event));
	if (ev->event == IB_EVENT_SRQ_LIMIT_REACHED) {
		atomic_inc(&kt->srq_limit);
		complete(&kt->async);
	}
}

int kt_poll(struct ib_cq *cq, struct ib_wc *wc, int n, int ms)
{
	unsigned long end = jiffies + msecs_to_jiffies(ms);
	int got = 0, r;

	while (got < n && time_before(jiffies, end)) {
		r = ib_poll_cq(cq, n - got, wc + got);
		if (r < 0)
			return r;
		got += r;
		if (got < n)
			msleep(2);
	}
	return got;
}

/* A QP in pd; with srq, its receives come from the SRQ and it has no RQ of its own. */
static struct ib_qp *kt_qp_on(struct kt *kt, struct ib_pd *pd, struct ib_cq *cq,
			      enum ib_qp_type type, struct ib_srq *srq)
{
	struct ib_qp_init_attr ia = {
		.event_handler = kt_qp_event,
		.qp_context = kt,
		.send_cq = cq,
		.recv_cq = cq,
		.srq = srq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = type,
	};
	struct ib_qp *qp = ib_create_qp(pd, &ia);

	CHECK(!IS_ERR(qp) && (!srq || (ia.cap.max_recv_wr == 0 && ia.cap.max_recv_sge == 0)),
	      "create_qp type %d%s: %ld, caps %u/%u/%u/%u/%u", type, srq ? " on an SRQ" : "",
	      IS_ERR(qp) ? PTR_ERR(qp) : 0L, ia.cap.max_send_wr, ia.cap.max_recv_wr,
	      ia.cap.max_send_sge, ia.cap.max_recv_sge, ia.cap.max_inline_data);
	return IS_ERR(qp) ? NULL : qp;
}

static struct ib_qp *kt_qp(struct kt *kt, struct ib_cq *cq, enum ib_qp_type type)
{
	return kt_qp_on(kt, kt->pd, cq, type, NULL);
}

/* An RC QP in RESET to RTS, connected to QP dqpn at LID dlid. */
int kt_rc_connect_to(struct ib_qp *qp, u16 dlid, u32 dqpn)
{
	struct ib_qp_attr a = {};
	int err;

	a.qp_state = IB_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
			    IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC;
	err = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
			   IB_QP_ACCESS_FLAGS);
	if (err)
		return err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0x1234;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.type = RDMA_AH_ATTR_TYPE_IB;
	rdma_ah_set_dlid(&a.ah_attr, dlid);
	rdma_ah_set_port_num(&a.ah_attr, 1);
	err = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN |
			   IB_QP_RQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (err)
		return err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.sq_psn = 0x1234;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN | IB_QP_TIMEOUT |
			    IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC);
}

/* ... in loopback, through the port's own LID. */
static int kt_rc_connect(struct kt *kt, struct ib_qp *qp, u32 dqpn)
{
	return kt_rc_connect_to(qp, kt->lid, dqpn);
}

static int kt_ud_up(struct ib_qp *qp)
{
	struct ib_qp_attr a = { .qp_state = IB_QPS_INIT, .port_num = 1, .qkey = 0x11111111 };
	int err;

	err = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY);
	if (err)
		return err;
	a.qp_state = IB_QPS_RTR;
	err = ib_modify_qp(qp, &a, IB_QP_STATE);
	if (err)
		return err;
	a.qp_state = IB_QPS_RTS;
	a.sq_psn = 7;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN);
}

static int kt_post_recv(struct ib_qp *qp, u64 id, u64 addr, u32 len, u32 lkey)
{
	struct ib_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ib_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 };

	return ib_post_recv(qp, &wr, NULL);
}

static int kt_post_srq_recv(struct ib_srq *srq, u64 id, u64 addr, u32 len, u32 lkey)
{
	struct ib_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ib_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 };

	return ib_post_srq_recv(srq, &wr, NULL);
}

/* A signalled SEND of len bytes at addr, not waited for. */
static int kt_post_send(struct ib_qp *qp, u64 id, u64 addr, u32 len, u32 lkey)
{
	struct ib_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ib_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
				 .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED };

	return ib_post_send(qp, &wr, NULL);
}

/* One signalled send-side WR and the WCs it produces; returns WCs seen. */
static int kt_send(struct kt *kt, struct ib_qp *qp, struct ib_send_wr *wr, struct ib_wc *wc,
		   int nwc)
{
	int err;

	reinit_completion(&kt->event);
	err = ib_req_notify_cq(kt->cq, IB_CQ_NEXT_COMP | IB_CQ_REPORT_MISSED_EVENTS);
	if (err < 0)
		return err;
	err = ib_post_send(qp, wr, NULL);
	if (err)
		return err;
	return kt_poll(kt->cq, wc, nwc, 5000);
}

static void kt_rc(struct kt *kt)
{
	struct ib_qp *a, *b;
	struct ib_wc wc[4];
	struct ib_sge sge;
	struct ib_rdma_wr rw = {};
	struct ib_atomic_wr aw = {};
	struct ib_send_wr sw = {};
	struct ib_qp_attr qa;
	struct ib_qp_init_attr qia;
	char inl[48];
	int n, err, ev;
	u32 lkey = kt->pd->local_dma_lkey;

	a = kt_qp(kt, kt->cq, IB_QPT_RC);
	b = kt_qp(kt, kt->cq, IB_QPT_RC);
	if (!a || !b)
		goto out;

	{
		struct ib_qp_attr x = { .qp_state = IB_QPS_RTS };

		err = ib_modify_qp(a, &x, IB_QP_STATE);
		CHECK(err == -EINVAL, "RESET -> RTS refused: %d", err);
	}
	err = kt_rc_connect(kt, a, b->qp_num);
	CHECK(!err, "connect A: %d", err);
	err = kt_rc_connect(kt, b, a->qp_num);
	CHECK(!err, "connect B: %d", err);
	if (err)
		goto out;

	err = ib_query_qp(a, &qa, IB_QP_STATE | IB_QP_DEST_QPN, &qia);
	CHECK(!err && qa.qp_state == IB_QPS_RTS && qa.dest_qp_num == b->qp_num &&
	      qa.path_mtu == IB_MTU_1024 && rdma_ah_get_dlid(&qa.ah_attr) == kt->lid &&
	      qia.cap.max_send_wr >= 16, "query_qp: %d state %d dest %#x mtu %d dlid %u",
	      err, qa.qp_state, qa.dest_qp_num, qa.path_mtu, rdma_ah_get_dlid(&qa.ah_attr));

	/* SEND with immediate, completion event on the CQ. */
	memset(kt->buf[0], 0x5a, 1024);
	memset(kt->buf[1], 0, 4096);
	err = kt_post_recv(b, 100, kt->dma[1], 4096, lkey);
	CHECK(!err, "post_recv: %d", err);
	ev = atomic_read(&kt->events);
	sge = (struct ib_sge){ .addr = kt->dma[0], .length = 1024, .lkey = lkey };
	sw = (struct ib_send_wr){ .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IB_WR_SEND_WITH_IMM, .send_flags = IB_SEND_SIGNALED,
				  .ex.imm_data = cpu_to_be32(0xabcd) };
	n = kt_send(kt, a, &sw, wc, 2);
	CHECK(n == 2, "SEND_IMM: %d WCs", n);
	if (n == 2) {
		struct ib_wc *s = wc[0].opcode == IB_WC_SEND ? &wc[0] : &wc[1];
		struct ib_wc *r = s == &wc[0] ? &wc[1] : &wc[0];

		CHECK(s->status == IB_WC_SUCCESS && s->wr_id == 1 && s->qp == a,
		      "send WC: status %d wr_id %llu", s->status, s->wr_id);
		CHECK(r->status == IB_WC_SUCCESS && r->wr_id == 100 && r->qp == b &&
		      r->opcode == IB_WC_RECV && r->byte_len == 1024 &&
		      (r->wc_flags & IB_WC_WITH_IMM) && r->ex.imm_data == cpu_to_be32(0xabcd),
		      "recv WC: status %d wr_id %llu opcode %d len %u flags %#x imm %#x",
		      r->status, r->wr_id, r->opcode, r->byte_len, r->wc_flags,
		      be32_to_cpu(r->ex.imm_data));
		CHECK(!memcmp(kt->buf[0], kt->buf[1], 1024), "SEND data arrived");
	}
	wait_for_completion_timeout(&kt->event, HZ);
	CHECK(atomic_read(&kt->events) > ev, "completion event through the CEQ (%d events)",
	      atomic_read(&kt->events));

	/* Inline SEND: the SGE holds a kernel virtual address. */
	memset(inl, 0x3c, sizeof(inl));
	memset(kt->buf[1], 0, 4096);
	kt_post_recv(b, 101, kt->dma[1], 4096, lkey);
	sge = (struct ib_sge){ .addr = (uintptr_t)inl, .length = sizeof(inl) };
	sw = (struct ib_send_wr){ .wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IB_WR_SEND,
				  .send_flags = IB_SEND_SIGNALED | IB_SEND_INLINE };
	n = kt_send(kt, a, &sw, wc, 2);
	CHECK(n == 2 && wc[0].status == IB_WC_SUCCESS && wc[1].status == IB_WC_SUCCESS &&
	      !memcmp(kt->buf[1], inl, sizeof(inl)), "inline SEND: %d WCs, status %d/%d", n,
	      wc[0].status, wc[1].status);

	/* RDMA WRITE and READ through the PD's global rkey (guest-physical identity MR). */
	memset(kt->buf[0], 0x77, 512);
	memset(kt->buf[1], 0, 4096);
	sge = (struct ib_sge){ .addr = kt->dma[0], .length = 512, .lkey = lkey };
	rw.wr = (struct ib_send_wr){ .wr_id = 3, .sg_list = &sge, .num_sge = 1,
				     .opcode = IB_WR_RDMA_WRITE, .send_flags = IB_SEND_SIGNALED };
	rw.remote_addr = kt->dma[1] + 1024;
	rw.rkey = kt->pd->unsafe_global_rkey;
	n = kt_send(kt, a, &rw.wr, wc, 1);
	CHECK(n == 1 && wc[0].status == IB_WC_SUCCESS && wc[0].opcode == IB_WC_RDMA_WRITE &&
	      !memcmp(kt->buf[1] + 1024, kt->buf[0], 512), "RDMA WRITE: %d WC status %d", n,
	      n ? wc[0].status : -1);

	memset(kt->buf[0], 0, 512);
	memset(kt->buf[1] + 2048, 0x42, 256);
	sge = (struct ib_sge){ .addr = kt->dma[0], .length = 256, .lkey = lkey };
	rw.wr.wr_id = 4;
	rw.wr.opcode = IB_WR_RDMA_READ;
	rw.remote_addr = kt->dma[1] + 2048;
	n = kt_send(kt, a, &rw.wr, wc, 1);
	CHECK(n == 1 && wc[0].status == IB_WC_SUCCESS && wc[0].opcode == IB_WC_RDMA_READ &&
	      !memcmp(kt->buf[1] + 2048, kt->buf[0], 256), "RDMA READ: %d WC status %d", n,
	      n ? wc[0].status : -1);

	/* Bad WRs fail at post time, with *bad_wr set. */
	{
		const struct ib_send_wr *bad = NULL;

		struct ib_reg_wr regw = { .wr = { .wr_id = 9, .opcode = IB_WR_REG_MR } };

		err = ib_post_send(a, &regw.wr, &bad);
		CHECK(err == -EINVAL && bad == &regw.wr, "post_send REG_MR without an MR refused: %d",
		      err);
		sw = (struct ib_send_wr){ .wr_id = 9, .opcode = IB_WR_SEND, .num_sge = 5 };
		err = ib_post_send(a, &sw, &bad);
		CHECK(err == -EINVAL && bad == &sw, "post_send 5 SGEs on a 4-SGE slot refused: %d", err);
	}

	/*
	 * The PD's global rkey grants remote read and write only (IB_PD_UNSAFE_GLOBAL_RKEY):
	 * an atomic through it must fail with a remote access error, and both QPs go to ERR.
	 */
	if (kt->dev->attrs.atomic_cap != IB_ATOMIC_NONE) {
		sge = (struct ib_sge){ .addr = kt->dma[0], .length = 8, .lkey = lkey };
		aw.wr = (struct ib_send_wr){ .wr_id = 5, .sg_list = &sge, .num_sge = 1,
					     .opcode = IB_WR_ATOMIC_FETCH_AND_ADD,
					     .send_flags = IB_SEND_SIGNALED };
		aw.remote_addr = kt->dma[1] + 3072;
		aw.compare_add = 2;
		aw.rkey = kt->pd->unsafe_global_rkey;
		n = kt_send(kt, a, &aw.wr, wc, 1);
		CHECK(n == 1 && wc[0].status == IB_WC_REM_ACCESS_ERR,
		      "FETCH_ADD without atomic rights: %d WC status %d", n, n ? wc[0].status : -1);
		msleep(100);
		err = ib_query_qp(a, &qa, IB_QP_STATE, &qia);
		CHECK(!err && qa.qp_state == IB_QPS_ERR, "requester QP in ERR: %d", qa.qp_state);
	}


	/* Whatever the error left in the CQ (flushes), then a quiet CQ. */
	while (kt_poll(kt->cq, wc, 4, 200) > 0)
		;

	/*
	 * A fresh QP in INIT with receives outstanding, destroyed: the device flushes them, and
	 * none of those CQEs may reach this consumer.
	 */
	{
		struct ib_qp *c = kt_qp(kt, kt->cq, IB_QPT_RC);
		struct ib_qp_attr x = { .qp_state = IB_QPS_INIT, .port_num = 1 };

		if (c) {
			err = ib_modify_qp(c, &x, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
					   IB_QP_ACCESS_FLAGS);
			err = err ?: kt_post_recv(c, 200, kt->dma[1], 64, lkey);
			err = err ?: kt_post_recv(c, 201, kt->dma[1], 64, lkey);
			CHECK(!err, "QP in INIT with 2 receives: %d", err);
			err = ib_destroy_qp(c);
			CHECK(!err, "destroy_qp with 2 receives outstanding: %d", err);
			n = kt_poll(kt->cq, wc, 4, 300);
			CHECK(n == 0, "no CQE of the destroyed QP reaches the consumer (%d, wr_id %llu)",
			      n, n > 0 ? wc[0].wr_id : 0);
		}
	}

out:
	if (b)
		ib_destroy_qp(b);
	if (a)
		ib_destroy_qp(a);
}

static void kt_ud(struct kt *kt)
{
	struct rdma_ah_attr ah_attr = { .type = RDMA_AH_ATTR_TYPE_IB };
	struct ib_ud_wr uw = {};
	struct ib_qp *a, *b;
	struct ib_ah *ah = NULL;
	struct ib_sge sge;
	struct ib_wc wc[2];
	int n, err;
	u32 lkey = kt->pd->local_dma_lkey;

	a = kt_qp(kt, kt->cq, IB_QPT_UD);
	b = kt_qp(kt, kt->cq, IB_QPT_UD);
	if (!a || !b)
		goto out;
	err = kt_ud_up(a) ?: kt_ud_up(b);
	CHECK(!err, "UD QPs to RTS: %d", err);
	rdma_ah_set_dlid(&ah_attr, kt->lid);
	rdma_ah_set_port_num(&ah_attr, 1);
	ah = rdma_create_ah(kt->pd, &ah_attr, 0);
	CHECK(!IS_ERR(ah), "create_ah: %ld", IS_ERR(ah) ? PTR_ERR(ah) : 0L);
	if (IS_ERR(ah)) {
		ah = NULL;
		goto out;
	}

	memset(kt->buf[0], 0x99, 200);
	memset(kt->buf[1], 0, 4096);
	kt_post_recv(b, 300, kt->dma[1], 40 + 256, lkey);
	sge = (struct ib_sge){ .addr = kt->dma[0], .length = 200, .lkey = lkey };
	uw.wr = (struct ib_send_wr){ .wr_id = 6, .sg_list = &sge, .num_sge = 1,
				     .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED };
	uw.ah = ah;
	uw.remote_qpn = b->qp_num;
	uw.remote_qkey = 0x80000000;    /* high bit: the QP's own Q_Key */
	n = kt_send(kt, a, &uw.wr, wc, 2);
	CHECK(n == 2 && wc[0].status == IB_WC_SUCCESS && wc[1].status == IB_WC_SUCCESS,
	      "UD SEND: %d WCs status %d/%d", n, wc[0].status, n > 1 ? wc[1].status : -1);
	if (n == 2) {
		struct ib_wc *r = wc[0].opcode == IB_WC_RECV ? &wc[0] : &wc[1];

		CHECK(r->src_qp == a->qp_num && r->slid == kt->lid &&
		      !memcmp(kt->buf[1] + 40, kt->buf[0], 200),
		      "UD recv: src_qp %#x slid %u len %u flags %#x", r->src_qp, r->slid,
		      r->byte_len, r->wc_flags);
	}
out:
	if (ah)
		rdma_destroy_ah(ah, 0);
	if (b)
		ib_destroy_qp(b);
	if (a)
		ib_destroy_qp(a);
}

/* Poll until the CQ stays empty for a while: what an error or a flush left behind. */
static void kt_drain_cq(struct ib_cq *cq)
{
	struct ib_wc wc[8];

	while (kt_poll(cq, wc, ARRAY_SIZE(wc), 200) > 0)
		;
}

/*
 * SRQs: two RC QPs (b[0], b[1]) share one SRQ and receive from a[0] and a[1].  The device
 * takes the SRQ's WQEs in ring order for whichever QP needs one; the driver frees one slot
 * per receive completion, which the rounds that fill the whole ring check (a slot not freed
 * makes posting fail with -ENOMEM).  Then the limit event and LAST_WQE_REACHED.
 */
#define KT_SRQ_WR       16

static void kt_srq(struct kt *kt)
{
	struct ib_srq_init_attr sia = {
		.event_handler = kt_srq_event,
		.srq_context = kt,
		.attr = { .max_sge = 2 },
		.srq_type = IB_SRQT_BASIC,
	};
	struct ib_qp *a[2] = {}, *b[2] = {};
	struct ib_qp_attr x = {};
	struct ib_srq_attr sa = {};
	struct ib_wc *wc;
	u32 lkey = kt->pd->local_dma_lkey;
	int i, n, err, round, nrecv, bad, ev;
	unsigned long seen;
	struct ib_srq *srq;

	if (!kt->dev->attrs.max_srq) {
		pr_info("pib_ktest: the device has no SRQs: SRQ tests skipped\n");
		return;
	}
	/* Room for a whole round: a send and a receive WC per slot. */
	wc = kcalloc(2 * KT_SRQ_WR, sizeof(*wc), GFP_KERNEL);
	if (!wc)
		return;

	sia.attr.max_wr = kt->dev->attrs.max_srq_wr + 1;
	srq = ib_create_srq(kt->pd, &sia);
	CHECK(IS_ERR(srq) && PTR_ERR(srq) == -EINVAL,
	      "create_srq beyond max_srq_wr %d refused: %ld", kt->dev->attrs.max_srq_wr,
	      IS_ERR(srq) ? PTR_ERR(srq) : 0L);
	if (!IS_ERR(srq))
		ib_destroy_srq(srq);

	/* The driver sizes the ring as it would an RQ: exactly 16 slots for 16 WRs. */
	sia.attr.max_wr = KT_SRQ_WR;
	srq = ib_create_srq(kt->pd, &sia);
	CHECK(!IS_ERR(srq) && sia.attr.max_wr == KT_SRQ_WR && sia.attr.max_sge >= 2,
	      "create_srq: %ld, max_wr %u max_sge %u", IS_ERR(srq) ? PTR_ERR(srq) : 0L,
	      sia.attr.max_wr, sia.attr.max_sge);
	if (IS_ERR(srq))
		goto out_free;
	if (sia.attr.max_wr != KT_SRQ_WR)
		goto out_srq;

	err = ib_query_srq(srq, &sa);
	CHECK(!err && sa.max_wr == KT_SRQ_WR && sa.srq_limit == 0,
	      "query_srq: %d, max_wr %u limit %u", err, sa.max_wr, sa.srq_limit);
	sa.max_wr = 2 * KT_SRQ_WR;
	err = ib_modify_srq(srq, &sa, IB_SRQ_MAX_WR);
	/*
	 * A kernel SRQ is not resizable (pib_srq.c: it is posted to under a spinlock); only a
	 * user SRQ, whose provider brings the new ring, is.  Not supported: EOPNOTSUPP.
	 */
	CHECK(err == -EOPNOTSUPP, "modify_srq: resizing a kernel SRQ refused: %d", err);
	sa.srq_limit = KT_SRQ_WR;
	err = ib_modify_srq(srq, &sa, IB_SRQ_LIMIT);
	CHECK(err == -EINVAL, "modify_srq: a limit not below the depth refused: %d", err);

	for (i = 0; i < 2; i++) {
		a[i] = kt_qp(kt, kt->cq, IB_QPT_RC);
		b[i] = kt_qp_on(kt, kt->pd, kt->cq, IB_QPT_RC, srq);
		if (!a[i] || !b[i])
			goto out;
		err = kt_rc_connect(kt, a[i], b[i]->qp_num) ?:
		      kt_rc_connect(kt, b[i], a[i]->qp_num);
		CHECK(!err, "connect pair %d (receiver on the SRQ): %d", i, err);
		if (err)
			goto out;
	}
	err = kt_post_recv(b[0], 1, kt->dma[1], 64, lkey);
	CHECK(err == -EINVAL, "post_recv to a QP on an SRQ refused: %d", err);

	/* Four receives on the SRQ, two messages to each QP (a[i] sends bytes 0xa0 + i). */
	memset(kt->buf[0], 0xa0, 256);
	memset(kt->buf[0] + 256, 0xa1, 256);
	memset(kt->buf[1], 0, 4096);
	err = 0;
	for (i = 0; i < 4; i++)
		err = err ?: kt_post_srq_recv(srq, 500 + i, kt->dma[1] + i * 512, 512, lkey);
	CHECK(!err, "post_srq_recv x4: %d", err);
	for (i = 0; i < 4; i++)
		err = err ?: kt_post_send(a[i & 1], 10 + i, kt->dma[0] + (i & 1) * 256, 200, lkey);
	CHECK(!err, "2 SENDs from each of 2 QPs: %d", err);
	n = kt_poll(kt->cq, wc, 8, 5000);
	nrecv = 0;
	bad = 0;
	seen = 0;
	for (i = 0; i < n; i++) {
		int slot = (int)wc[i].wr_id - 500;
		int from = wc[i].qp == b[0] ? 0 : wc[i].qp == b[1] ? 1 : -1;

		if (wc[i].opcode != IB_WC_RECV) {
			bad += wc[i].status != IB_WC_SUCCESS;
			continue;
		}
		nrecv++;
		if (wc[i].status != IB_WC_SUCCESS || slot < 0 || slot > 3 || from < 0 ||
		    wc[i].byte_len != 200 || (seen & BIT(slot)) ||
		    memchr_inv(kt->buf[1] + slot * 512, 0xa0 + from, 200))
			bad++;
		else
			seen |= BIT(slot);
	}
	CHECK(n == 8 && nrecv == 4 && !bad,
	      "4 receives from the SRQ, each with its QP's data: %d WCs, %d receives, %d bad",
	      n, nrecv, bad);

	/* Fill the whole ring three times over. */
	bad = 0;
	for (round = 0, err = 0; round < 3 && !err; round++) {
		for (i = 0; i < KT_SRQ_WR && !err; i++)
			err = kt_post_srq_recv(srq, 1000 + i, kt->dma[1] + (i % 8) * 512, 512,
					       lkey);
		if (!err && round == 0) {
			int full = kt_post_srq_recv(srq, 999, kt->dma[1], 512, lkey);

			CHECK(full == -ENOMEM, "post_srq_recv to a full SRQ: %d", full);
		}
		for (i = 0; i < KT_SRQ_WR && !err; i++)
			err = kt_post_send(a[i & 1], 20 + i, kt->dma[0] + (i & 1) * 256, 100, lkey);
		n = err ? 0 : kt_poll(kt->cq, wc, 2 * KT_SRQ_WR, 10000);
		for (i = 0; i < n; i++)
			bad += wc[i].status != IB_WC_SUCCESS;
		if (!err && n != 2 * KT_SRQ_WR)
			err = -ETIMEDOUT;
	}
	CHECK(!err && !bad, "3 rounds of %d receives through the %d-slot SRQ: %d, %d bad WCs",
	      KT_SRQ_WR, KT_SRQ_WR, err, bad);

	/* The limit: 4 WQEs posted, limit 3; one message leaves 3 (no event), two leave 2. */
	err = 0;
	for (i = 0; i < 4; i++)
		err = err ?: kt_post_srq_recv(srq, 700 + i, kt->dma[1] + i * 512, 512, lkey);
	sa.srq_limit = 3;
	err = err ?: ib_modify_srq(srq, &sa, IB_SRQ_LIMIT);
	err = err ?: ib_query_srq(srq, &sa);
	CHECK(!err && sa.srq_limit == 3, "4 receives posted, limit 3 armed: %d, limit %u", err,
	      sa.srq_limit);
	ev = atomic_read(&kt->srq_limit);
	reinit_completion(&kt->async);
	err = kt_post_send(a[0], 30, kt->dma[0], 100, lkey);
	n = kt_poll(kt->cq, wc, 2, 5000);
	msleep(100);
	CHECK(!err && n == 2 && atomic_read(&kt->srq_limit) == ev,
	      "3 receives left, limit 3: no event (%d WCs, %d events)", n,
	      atomic_read(&kt->srq_limit) - ev);
	err = kt_post_send(a[1], 31, kt->dma[0] + 256, 100, lkey);
	n = kt_poll(kt->cq, wc, 2, 5000);
	wait_for_completion_timeout(&kt->async, 2 * HZ);
	CHECK(!err && n == 2 && atomic_read(&kt->srq_limit) == ev + 1,
	      "2 receives left, limit 3: SRQ_LIMIT_REACHED (%d WCs, %d events)", n,
	      atomic_read(&kt->srq_limit) - ev);
	err = ib_query_srq(srq, &sa);
	CHECK(!err && sa.srq_limit == 0, "the limit disarmed itself: %d, limit %u", err,
	      sa.srq_limit);
	err = kt_post_send(a[0], 32, kt->dma[0], 100, lkey) ?:
	      kt_post_send(a[1], 33, kt->dma[0] + 256, 100, lkey);
	n = kt_poll(kt->cq, wc, 4, 5000);
	CHECK(!err && n == 4, "the last 2 receives: %d, %d WCs", err, n);

	/* A QP on an SRQ that enters ERR will take no more WQEs: LAST_WQE_REACHED. */
	ev = atomic_read(&kt->last_wqe);
	reinit_completion(&kt->async);
	x.qp_state = IB_QPS_ERR;
	err = ib_modify_qp(b[0], &x, IB_QP_STATE);
	wait_for_completion_timeout(&kt->async, 2 * HZ);
	CHECK(!err && atomic_read(&kt->last_wqe) == ev + 1,
	      "QP on the SRQ to ERR: %d, LAST_WQE_REACHED %d", err,
	      atomic_read(&kt->last_wqe) - ev);
	err = kt_post_srq_recv(srq, 800, kt->dma[1], 512, lkey) ?:
	      kt_post_send(a[1], 40, kt->dma[0] + 256, 100, lkey);
	n = kt_poll(kt->cq, wc, 2, 5000);
	CHECK(!err && n == 2 && wc[0].status == IB_WC_SUCCESS && wc[1].status == IB_WC_SUCCESS &&
	      (wc[0].qp == b[1] || wc[1].qp == b[1]),
	      "the SRQ still serves the other QP: %d, %d WCs", err, n);

	/* RTS -> RESET (the driver passes through ERR for a QP on an SRQ). */
	x.qp_state = IB_QPS_RESET;
	err = ib_modify_qp(b[1], &x, IB_QP_STATE);
	CHECK(!err, "QP on the SRQ from RTS to RESET: %d", err);

	err = ib_destroy_srq_user(srq, NULL);
	CHECK(err == -EBUSY, "destroy_srq while QPs use it: %d", err);
out:
	for (i = 0; i < 2; i++) {
		if (b[i])
			ib_destroy_qp(b[i]);
		if (a[i])
			ib_destroy_qp(a[i]);
	}
	kt_drain_cq(kt->cq);
out_srq:
	err = ib_destroy_srq_user(srq, NULL);
	CHECK(!err, "destroy_srq: %d", err);
out_free:
	kfree(wc);
}

/*
 * Invalidation (with memory windows, PIB_DEV_CAP_MEM_WINDOW): a PD's DMA MR serves as the
 * key.  SEND_WITH_INV lets the peer invalidate it, LOCAL_INV the owner; after either, an RDMA
 * WRITE through its rkey fails with a remote access error.  (Windows themselves are
 * userspace's: the kernel has no verbs to bind them.)
 */
static struct ib_pd *kt_inv_pd(struct kt *kt)
{
	struct ib_pd *pd = ib_alloc_pd(kt->dev, IB_PD_UNSAFE_GLOBAL_RKEY);

	CHECK(!IS_ERR(pd), "alloc_pd for invalidation: %ld", IS_ERR(pd) ? PTR_ERR(pd) : 0L);
	return IS_ERR(pd) ? NULL : pd;
}

static int kt_inv_write(struct kt *kt, struct ib_qp *qp, u32 rkey, u64 id, struct ib_wc *wc)
{
	struct ib_sge sge = { .addr = kt->dma[0], .length = 64,
			      .lkey = kt->pd->local_dma_lkey };
	struct ib_rdma_wr rw = {
		.wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
			.opcode = IB_WR_RDMA_WRITE, .send_flags = IB_SEND_SIGNALED },
		.remote_addr = kt->dma[1],
		.rkey = rkey,
	};

	return kt_send(kt, qp, &rw.wr, wc, 1);
}

static void kt_inv(struct kt *kt)
{
	struct ib_qp *a = NULL, *b = NULL, *ud = NULL;
	struct ib_pd *pd2 = NULL, *pd3 = NULL;
	const struct ib_send_wr *bad_wr;
	struct ib_send_wr sw;
	struct ib_recv_wr rw;
	struct ib_wc wc[2], *r;
	int n, err;

	if (!(kt->dev->attrs.device_cap_flags & IB_DEVICE_MEM_WINDOW)) {
		pr_info("pib_ktest: no memory windows on the device: invalidation tests skipped\n");
		return;
	}

	/* Remote: a (kt->pd) invalidates the key of b's PD. */
	pd2 = kt_inv_pd(kt);
	if (!pd2)
		return;
	a = kt_qp(kt, kt->cq, IB_QPT_RC);
	b = kt_qp_on(kt, pd2, kt->cq, IB_QPT_RC, NULL);
	if (!a || !b)
		goto out;
	err = kt_rc_connect(kt, a, b->qp_num) ?: kt_rc_connect(kt, b, a->qp_num);
	CHECK(!err, "connect across PDs: %d", err);
	if (err)
		goto out;
	memset(kt->buf[0], 0x6b, 64);
	memset(kt->buf[1], 0, 4096);
	n = kt_inv_write(kt, a, pd2->unsafe_global_rkey, 50, wc);
	CHECK(n == 1 && wc[0].status == IB_WC_SUCCESS && !memcmp(kt->buf[1], kt->buf[0], 64),
	      "RDMA WRITE through the key: %d WC status %d", n, n ? wc[0].status : -1);

	rw = (struct ib_recv_wr){ .wr_id = 51 };
	err = ib_post_recv(b, &rw, NULL);
	sw = (struct ib_send_wr){ .wr_id = 52, .opcode = IB_WR_SEND_WITH_INV,
				  .send_flags = IB_SEND_SIGNALED,
				  .ex.invalidate_rkey = pd2->unsafe_global_rkey };
	n = err ?: kt_send(kt, a, &sw, wc, 2);
	r = n == 2 ? (wc[0].opcode == IB_WC_RECV ? &wc[0] : &wc[1]) : NULL;
	CHECK(r && wc[0].status == IB_WC_SUCCESS && wc[1].status == IB_WC_SUCCESS &&
	      r->qp == b && (r->wc_flags & IB_WC_WITH_INVALIDATE) &&
	      r->ex.invalidate_rkey == pd2->unsafe_global_rkey,
	      "SEND_WITH_INV: %d WCs, receive flags %#x rkey %#x", n, r ? r->wc_flags : 0,
	      r ? r->ex.invalidate_rkey : 0);
	n = kt_inv_write(kt, a, pd2->unsafe_global_rkey, 53, wc);
	CHECK(n == 1 && wc[0].status == IB_WC_REM_ACCESS_ERR,
	      "RDMA WRITE through the invalidated key: %d WC status %d", n, n ? wc[0].status : -1);
	ib_destroy_qp(b);
	ib_destroy_qp(a);
	a = b = NULL;
	kt_drain_cq(kt->cq);

	/* Local: a (pd3) invalidates its own PD's key; b's WRITE through it then fails. */
	pd3 = kt_inv_pd(kt);
	if (!pd3)
		goto out;
	a = kt_qp_on(kt, pd3, kt->cq, IB_QPT_RC, NULL);
	b = kt_qp(kt, kt->cq, IB_QPT_RC);
	if (!a || !b)
		goto out;
	err = kt_rc_connect(kt, a, b->qp_num) ?: kt_rc_connect(kt, b, a->qp_num);
	CHECK(!err, "connect: %d", err);
	if (err)
		goto out;
	sw = (struct ib_send_wr){ .wr_id = 60, .opcode = IB_WR_LOCAL_INV,
				  .send_flags = IB_SEND_SIGNALED,
				  .ex.invalidate_rkey = pd3->unsafe_global_rkey };
	n = kt_send(kt, a, &sw, wc, 1);
	CHECK(n == 1 && wc[0].status == IB_WC_SUCCESS && wc[0].opcode == IB_WC_LOCAL_INV &&
	      wc[0].wr_id == 60, "LOCAL_INV: %d WC status %d opcode %d", n,
	      n ? wc[0].status : -1, n ? wc[0].opcode : -1);
	n = kt_inv_write(kt, b, pd3->unsafe_global_rkey, 61, wc);
	CHECK(n == 1 && wc[0].status == IB_WC_REM_ACCESS_ERR,
	      "RDMA WRITE through the locally invalidated key: %d WC status %d", n,
	      n ? wc[0].status : -1);

	ud = kt_qp(kt, kt->cq, IB_QPT_UD);
	if (ud) {
		err = ib_post_send(ud, &sw, &bad_wr);
		CHECK(err == -EINVAL && bad_wr == &sw, "LOCAL_INV on a UD QP refused: %d", err);
		ib_destroy_qp(ud);
	}
out:
	if (b)
		ib_destroy_qp(b);
	if (a)
		ib_destroy_qp(a);
	kt_drain_cq(kt->cq);
	if (pd3)
		ib_dealloc_pd(pd3);
	if (pd2)
		ib_dealloc_pd(pd2);
}

/* The way real ULPs run: ib_alloc_cq() with softirq polling, wr_cqe callbacks, drain. */
struct kt_cqe {
	struct ib_cqe cqe;
	struct completion done;
	enum ib_wc_status status;
};

static void kt_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kt_cqe *c = container_of(wc->wr_cqe, struct kt_cqe, cqe);

	c->status = wc->status;
	complete(&c->done);
}

static void kt_ulp(struct kt *kt)
{
	struct kt_cqe s = { .cqe.done = kt_done }, r = { .cqe.done = kt_done };
	struct ib_qp *a = NULL, *b = NULL;
	struct ib_cq *cq;
	struct ib_sge sge;
	struct ib_send_wr sw;
	struct ib_recv_wr rw;
	u32 lkey = kt->pd->local_dma_lkey;
	int err;

	init_completion(&s.done);
	init_completion(&r.done);
	cq = ib_alloc_cq(kt->dev, NULL, 64, 0, IB_POLL_SOFTIRQ);
	CHECK(!IS_ERR(cq), "ib_alloc_cq softirq: %ld", IS_ERR(cq) ? PTR_ERR(cq) : 0L);
	if (IS_ERR(cq))
		return;
	a = kt_qp(kt, cq, IB_QPT_RC);
	b = kt_qp(kt, cq, IB_QPT_RC);
	if (!a || !b)
		goto out;
	err = kt_rc_connect(kt, a, b->qp_num) ?: kt_rc_connect(kt, b, a->qp_num);
	CHECK(!err, "connect: %d", err);

	sge = (struct ib_sge){ .addr = kt->dma[1], .length = 4096, .lkey = lkey };
	rw = (struct ib_recv_wr){ .wr_cqe = &r.cqe, .sg_list = &sge, .num_sge = 1 };
	err = ib_post_recv(b, &rw, NULL);
	sge = (struct ib_sge){ .addr = kt->dma[0], .length = 100, .lkey = lkey };
	sw = (struct ib_send_wr){ .wr_cqe = &s.cqe, .sg_list = &sge, .num_sge = 1,
				  .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED };
	err = err ?: ib_post_send(a, &sw, NULL);
	CHECK(!err, "post: %d", err);
	CHECK(wait_for_completion_timeout(&s.done, 5 * HZ) && s.status == IB_WC_SUCCESS,
	      "wr_cqe send callback through CEQ -> irq_poll: status %d", s.status);
	CHECK(wait_for_completion_timeout(&r.done, 5 * HZ) && r.status == IB_WC_SUCCESS,
	      "wr_cqe recv callback: status %d", r.status);

	/* A receive left outstanding is flushed by the drain. */
	reinit_completion(&r.done);
	sge = (struct ib_sge){ .addr = kt->dma[1], .length = 4096, .lkey = lkey };
	rw = (struct ib_recv_wr){ .wr_cqe = &r.cqe, .sg_list = &sge, .num_sge = 1 };
	ib_post_recv(b, &rw, NULL);
	ib_drain_qp(b);
	CHECK(completion_done(&r.done) && r.status == IB_WC_WR_FLUSH_ERR,
	      "ib_drain_qp flushed the receive: status %d", r.status);
	ib_drain_qp(a);
	CHECK(true, "ib_drain_qp on the idle QP returned");
out:
	if (b)
		ib_destroy_qp(b);
	if (a)
		ib_destroy_qp(a);
	ib_free_cq(cq);
}

/* frwr=...: the device the link test runs on, held for kt_init(). */
static struct ib_device *kt_link_dev;

static int kt_add(struct ib_device *dev)
{
	struct ib_cq_init_attr cqa = { .cqe = 63 };
	struct ib_port_attr pa;
	struct kt *kt;
	int i, err;

	if (strncmp(dev_name(&dev->dev), "pib_", 4))
		return 0;
	/*
	 * The link test waits for the other node for as long as it takes: not here, where
	 * ib_core holds its client and device locks, but in kt_init() once they are released.
	 */
	if (*frwr) {
		if (!kt_link_dev && ib_device_try_get(dev))
			kt_link_dev = dev;
		return 0;
	}
	kt = kzalloc(sizeof(*kt), GFP_KERNEL);
	if (!kt)
		return -ENOMEM;
	kt->dev = dev;
	init_completion(&kt->event);
	init_completion(&kt->async);
	err = ib_query_port(dev, 1, &pa);
	CHECK(!err && pa.state == IB_PORT_ACTIVE, "%s port 1 ACTIVE, LID %u", dev_name(&dev->dev),
	      pa.lid);
	if (err || pa.state != IB_PORT_ACTIVE)
		goto out_free;
	kt->lid = pa.lid;

	kt->pd = ib_alloc_pd(dev, IB_PD_UNSAFE_GLOBAL_RKEY);
	CHECK(!IS_ERR(kt->pd), "alloc_pd (DMA MR): %ld, lkey %#x", IS_ERR(kt->pd) ?
	      PTR_ERR(kt->pd) : 0L, IS_ERR(kt->pd) ? 0 : kt->pd->local_dma_lkey);
	if (IS_ERR(kt->pd))
		goto out_free;
	kt->cq = ib_create_cq(dev, kt_comp, kt_cq_event, kt, &cqa);
	CHECK(!IS_ERR(kt->cq), "create_cq: %ld, cqe %d", IS_ERR(kt->cq) ? PTR_ERR(kt->cq) : 0L,
	      IS_ERR(kt->cq) ? 0 : kt->cq->cqe);
	if (IS_ERR(kt->cq))
		goto out_pd;
	for (i = 0; i < 2; i++) {
		kt->buf[i] = kzalloc(4096, GFP_KERNEL);
		kt->dma[i] = ib_dma_map_single(dev, kt->buf[i], 4096, DMA_BIDIRECTIONAL);
	}

	kt_rc(kt);
	kt_ud(kt);
	kt_srq(kt);
	kt_inv(kt);
	kt_frwr_loopback(dev, kt->lid);
	kt_ulp(kt);

	for (i = 0; i < 2; i++) {
		ib_dma_unmap_single(dev, kt->dma[i], 4096, DMA_BIDIRECTIONAL);
		kfree(kt->buf[i]);
	}
	ib_destroy_cq(kt->cq);
out_pd:
	ib_dealloc_pd(kt->pd);
out_free:
	kfree(kt);
	pr_info("pib_ktest: %d passed, %d failed\n", kt_passed, kt_failed);
	return 0;
}

static void kt_remove(struct ib_device *dev, void *data)
{
}

static struct ib_client kt_client = {
	.name = "pib_ktest",
	.add = kt_add,
	.remove = kt_remove,
};

static int __init kt_init(void)
{
	int err = ib_register_client(&kt_client);

	if (err || !*frwr)
		return err;
	CHECK(kt_link_dev, "a pib device for the link test (frwr=%s)", frwr);
	if (kt_link_dev) {
		kt_frwr_link(kt_link_dev, frwr);
		ib_device_put(kt_link_dev);
		kt_link_dev = NULL;
	}
	pr_info("pib_ktest: %d passed, %d failed\n", kt_passed, kt_failed);
	return 0;
}

static void __exit kt_exit(void)
{
	ib_unregister_client(&kt_client);
}

module_init(kt_init);
module_exit(kt_exit);
MODULE_DESCRIPTION("pib kernel-consumer test: RC/UD traffic, CQ events, drain, SRQs and FRWR over pib_0");
MODULE_LICENSE("GPL");
