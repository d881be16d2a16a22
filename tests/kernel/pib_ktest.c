// SPDX-License-Identifier: GPL-2.0
/*
 * pib_ktest: a kernel ULP that exercises pib's kernel data path on the first pib device:
 * PD (DMA MR), CQs (manual polling + CEQ events, and ib_alloc_cq's softirq polling), RC and UD
 * QPs in loopback through the port's own LID, SEND / SEND_IMM / inline / RDMA WRITE / READ /
 * atomics, query_qp, bad transitions, drain, and destroy-with-outstanding-WRs (flush CQEs must
 * not reach the consumer).  Results go to the kernel log ("pib_ktest: PASS/FAIL ...") and to
 * /sys/module/pib_ktest/parameters/{passed,failed}.
 */
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/slab.h>

#include <rdma/ib_verbs.h>

static int passed, failed;
module_param(passed, int, 0444);
module_param(failed, int, 0444);

#define CHECK(cond, fmt, ...) do { \
	if (cond) { passed++; pr_info("pib_ktest: PASS " fmt "\n", ##__VA_ARGS__); } \
	else { failed++; pr_err("pib_ktest: FAIL " fmt "\n", ##__VA_ARGS__); } } while (0)

struct kt {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	atomic_t events;
	struct completion event;
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
	pr_info("pib_ktest: QP %#x event %s\n", ev->element.qp->qp_num, ib_event_msg(ev->event));
}

static int kt_poll(struct ib_cq *cq, struct ib_wc *wc, int n, int ms)
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

static struct ib_qp *kt_qp(struct kt *kt, struct ib_cq *cq, enum ib_qp_type type)
{
	struct ib_qp_init_attr ia = {
		.event_handler = kt_qp_event,
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = type,
	};
	struct ib_qp *qp = ib_create_qp(kt->pd, &ia);

	CHECK(!IS_ERR(qp), "create_qp type %d: %ld, caps %u/%u/%u/%u/%u", type,
	      IS_ERR(qp) ? PTR_ERR(qp) : 0L, ia.cap.max_send_wr, ia.cap.max_recv_wr,
	      ia.cap.max_send_sge, ia.cap.max_recv_sge, ia.cap.max_inline_data);
	return IS_ERR(qp) ? NULL : qp;
}

static int kt_rc_connect(struct kt *kt, struct ib_qp *qp, u32 dqpn)
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
	rdma_ah_set_dlid(&a.ah_attr, kt->lid);
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

		sw = (struct ib_send_wr){ .wr_id = 9, .opcode = IB_WR_REG_MR };
		err = ib_post_send(a, &sw, &bad);
		CHECK(err == -EINVAL && bad == &sw, "post_send REG_MR refused: %d", err);
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

static int kt_add(struct ib_device *dev)
{
	struct ib_cq_init_attr cqa = { .cqe = 63 };
	struct ib_port_attr pa;
	struct kt *kt;
	int i, err;

	if (strncmp(dev_name(&dev->dev), "pib_", 4))
		return 0;
	kt = kzalloc(sizeof(*kt), GFP_KERNEL);
	if (!kt)
		return -ENOMEM;
	kt->dev = dev;
	init_completion(&kt->event);
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
	pr_info("pib_ktest: %d passed, %d failed\n", passed, failed);
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
	return ib_register_client(&kt_client);
}

static void __exit kt_exit(void)
{
	ib_unregister_client(&kt_client);
}

module_init(kt_init);
module_exit(kt_exit);
MODULE_LICENSE("GPL");
