// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * provider-test.c - host-side unit test of the pib provider's data path.
 *
 * The provider's cq.c, qp.c, qp_ex.c, srq.c, verbs.c and wq.c are linked
 * with this file (guest-provider/test/run.sh), which plays the two parties
 * they talk to:
 *   - the kernel: the ibv_cmd_* calls for CQs, QPs, SRQs (XRC ones too) and
 *     memory windows are defined here (an executable's own definitions win over
 *     libibverbs'), check the pib-abi.h payload and answer as the driver
 *     would;
 *   - the device: the test reads WQEs out of the rings, writes CQEs with the
 *     phase bit into the CQ ring, and the UAR page is plain memory, so every
 *     doorbell the provider rings can be read back.
 *
 *   guest-provider/test/run.sh    (builds rdma-core first if needed)
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ccan/minmax.h>
#include <util/util.h>

#include "pib.h"
#include "verbs.h"

static int failures;
static int checks;

#define CHECK(cond)                                                            \
	do {                                                                   \
		checks++;                                                      \
		if (!(cond)) {                                                 \
			failures++;                                            \
			fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__,         \
				__LINE__, #cond);                              \
		}                                                              \
	} while (0)

#define CHECK_EQ(a, b)                                                         \
	do {                                                                   \
		unsigned long long _va = (a), _vb = (b);                       \
		checks++;                                                      \
		if (_va != _vb) {                                              \
			failures++;                                            \
			fprintf(stderr, "%s:%d: FAIL: %s == %s (%#llx != %#llx)\n", \
				__FILE__, __LINE__, #a, #b, _va, _vb);         \
		}                                                              \
	} while (0)

/* ---- The fake kernel --------------------------------------------------------------------- */

/* The device's producer side of a CQ: index and the phase of each pass. */
struct fake_cq {
	struct pib_cq *cq;
	uint32_t pi;
};


static uint32_t next_cqn = 5;
static uint32_t next_qpn = 0x1234;
static uint32_t next_srqn = 7;
static uint32_t next_mw_index = 0x42;
static int create_cq_calls, destroy_qp_calls;
static int create_srq_calls, modify_srq_calls, alloc_mw_calls;
static int destroy_srq_err;		/* what DESTROY_SRQ answers */
static struct pib_create_qp last_create_qp;
static struct pib_create_srq last_create_srq;
static struct ibv_srq_attr last_srq_attr;	/* as CREATE/MODIFY_SRQ got it */

int ibv_cmd_create_cq_ex(struct ibv_context *context,
			 const struct ibv_cq_init_attr_ex *attr,
			 struct verbs_cq *vcq, struct ibv_create_cq_ex *cmd,
			 size_t cmd_size, struct ib_uverbs_ex_create_cq_resp *resp,
			 size_t resp_size, uint32_t cmd_flags)
{
	struct pib_create_cq_ex *c =
		container_of(cmd, struct pib_create_cq_ex, ibv_cmd);
	struct pib_create_cq_ex_resp *r =
		container_of(resp, struct pib_create_cq_ex_resp, ibv_resp);
	struct ibv_cq *cq = &vcq->cq;
	int cqe = attr->cqe;
	bool ts = (c->comp_mask & PIB_IBV_CREATE_CQ_MASK_FLAGS) &&
		  (c->flags & PIB_IBV_CQ_F_TIMESTAMP);
	uint32_t cqe_size = ts ? 64 : 32;

	create_cq_calls++;
	CHECK_EQ(cmd_size, sizeof(*c));
	CHECK_EQ(resp_size, sizeof(*r));
	/* What the driver will check: a page-aligned ring of depth CQEs plus
	 * the record page, depth a power of two; the ring's timestamp flag
	 * with the verbs' own (which either timestamp wc flag becomes, in
	 * libibverbs' ibv_cmd_create_cq_ex). */
	CHECK_EQ(c->comp_mask & ~PIB_IBV_CREATE_CQ_MASK_FLAGS, 0);
	CHECK_EQ(c->flags & ~PIB_IBV_CQ_F_TIMESTAMP, 0);
	CHECK_EQ(!!(attr->wc_flags & (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
				      IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)), ts);
	CHECK_EQ(c->buf_addr % PIB_PAGE_SIZE, 0);
	CHECK_EQ(c->depth & (c->depth - 1), 0);
	CHECK_EQ(c->buf_size, align(c->depth * cqe_size, PIB_PAGE_SIZE) + PIB_PAGE_SIZE);
	CHECK_EQ((uint32_t)cqe, c->depth - 1);

	cq->context = context;
	cq->cqe = 12345;	/* the provider must overwrite this */
	r->cqn = next_cqn++;
	r->depth = c->depth;
	return 0;
}

int ibv_cmd_destroy_cq(struct ibv_cq *cq)
{
	return 0;
}

int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *vqp,
			 struct ibv_qp_init_attr_ex *attr,
			 struct ibv_create_qp *cmd, size_t cmd_size,
			 struct ib_uverbs_create_qp_resp *resp,
			 size_t resp_size)
{
	struct ibv_qp *qp = &vqp->qp;
	struct ibv_pd *pd = attr->pd;
	struct pib_create_qp *c = container_of(cmd, struct pib_create_qp, ibv_cmd);
	struct pib_create_qp_resp *r =
		container_of(resp, struct pib_create_qp_resp, ibv_resp);

	CHECK_EQ(cmd_size, sizeof(*c));
	CHECK_EQ(resp_size, sizeof(*r));
	/* What libibverbs' ibv_cmd_create_qp_ex takes; anything else is EINVAL. */
	CHECK_EQ(attr->comp_mask & ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
				     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS), 0);
	last_create_qp = *c;
	/* An XRC target is made from its domain alone: the kernel ignores the request. */
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		CHECK(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD);
		CHECK(attr->xrcd);
		qp->context = attr->xrcd->context;
		qp->qp_type = attr->qp_type;
		qp->qp_num = next_qpn++;
		return 0;
	}
	/* An XRC initiator has no receive side: the provider hands the kernel none. */
	if (attr->qp_type == IBV_QPT_XRC_SEND)
		CHECK(!attr->recv_cq && !attr->srq);
	CHECK_EQ(c->sq_buf_addr % PIB_PAGE_SIZE, 0);
	CHECK_EQ(c->sq_buf_size, align((size_t)c->sq_depth << c->sq_stride_log,
				       PIB_PAGE_SIZE));
	CHECK(c->sq_stride_log >= 6 && c->sq_stride_log <= 12);
	/* The driver takes the record bit only with an RQ (pib_qp_user_req). */
	CHECK_EQ(c->comp_mask & ~PIB_IBV_CREATE_QP_MASK_RQ_DBREC, 0);
	CHECK(c->rq_depth || !c->comp_mask);
	if (c->rq_depth) {
		CHECK_EQ(c->rq_buf_addr % PIB_PAGE_SIZE, 0);
		CHECK_EQ(c->rq_buf_size,
			 align((size_t)c->rq_depth << c->rq_stride_log,
			       PIB_PAGE_SIZE) +
			 (c->comp_mask ? PIB_PAGE_SIZE : 0));
		CHECK(c->rq_stride_log >= 4 && c->rq_stride_log <= 12);
	}

	qp->context = pd->context;
	qp->pd = pd;
	qp->qp_type = attr->qp_type;
	qp->send_cq = attr->send_cq;
	qp->recv_cq = attr->recv_cq;
	qp->qp_num = next_qpn;
	/*
	 * libibverbs creates a QP in RESET and ibv_modify_qp() records each
	 * state; the tests post as on a connected QP (test_qp_reset: RESET).
	 */
	qp->state = IBV_QPS_RTS;
	r->qpn = next_qpn++;
	r->max_inline = min_t(uint32_t, 256, (1u << c->sq_stride_log) - 64);
	/* The kernel echoes caps; the provider must replace them with its own. */
	memset(&attr->cap, 0xff, sizeof(attr->cap));
	return 0;
}

int ibv_cmd_destroy_qp(struct ibv_qp *qp)
{
	destroy_qp_calls++;
	return 0;
}

int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask, struct ibv_modify_qp *cmd, size_t cmd_size)
{
	return 0;
}

int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr,
		     int attr_mask, struct ibv_qp_init_attr *qp_init_attr,
		     struct ibv_query_qp *cmd, size_t cmd_size)
{
	memset(&qp_init_attr->cap, 0, sizeof(qp_init_attr->cap));
	return 0;
}

int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
		       struct ibv_srq_init_attr *attr,
		       struct ibv_create_srq *cmd, size_t cmd_size,
		       struct ib_uverbs_create_srq_resp *resp, size_t resp_size)
{
	struct pib_create_srq *c =
		container_of(cmd, struct pib_create_srq, ibv_cmd);
	struct pib_create_srq_resp *r =
		container_of(resp, struct pib_create_srq_resp, ibv_resp);

	create_srq_calls++;
	CHECK_EQ(cmd_size, sizeof(*c));
	CHECK_EQ(resp_size, sizeof(*r));
	last_create_srq = *c;
	last_srq_attr = attr->attr;
	/* What the driver and the device will check. */
	CHECK_EQ(c->buf_addr % PIB_PAGE_SIZE, 0);
	CHECK_EQ(c->depth & (c->depth - 1), 0);
	CHECK(c->depth >= 1 && c->depth <= PIB_MAX_SRQ_WR);
	CHECK(c->stride_log >= 4 && c->stride_log <= 12);
	CHECK_EQ(c->comp_mask & ~PIB_IBV_CREATE_SRQ_MASK_DBREC, 0);
	CHECK_EQ(c->buf_size, align((size_t)c->depth << c->stride_log,
				    PIB_PAGE_SIZE) +
		 (c->comp_mask ? PIB_PAGE_SIZE : 0));
	CHECK(attr->attr.srq_limit < c->depth);

	srq->context = pd->context;
	srq->pd = pd;
	r->srqn = next_srqn++;
	/* The kernel echoes max_wr/max_sge; the provider must use its own. */
	attr->attr.max_wr = 0xffffffff;
	attr->attr.max_sge = 0xffffffff;
	return 0;
}

/* CREATE_XSRQ: the same ring request; libibverbs fills in the SRQ's number (set_vsrq). */
int ibv_cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq,
			  struct ibv_srq_init_attr_ex *attr_ex, struct ibv_create_xsrq *cmd,
			  size_t cmd_size, struct ib_uverbs_create_srq_resp *resp,
			  size_t resp_size)
{
	struct pib_create_xsrq *c = container_of(cmd, struct pib_create_xsrq, ibv_cmd);
	struct pib_create_srq_resp *r =
		container_of(resp, struct pib_create_srq_resp, ibv_resp);

	CHECK_EQ(cmd_size, sizeof(*c));
	CHECK_EQ(resp_size, sizeof(*r));
	CHECK_EQ(attr_ex->srq_type, IBV_SRQT_XRC);
	CHECK(attr_ex->pd && attr_ex->xrcd && attr_ex->cq);
	CHECK_EQ(c->buf_addr % PIB_PAGE_SIZE, 0);
	CHECK_EQ(c->buf_size, align((size_t)c->depth << c->stride_log, PIB_PAGE_SIZE) +
		 (c->comp_mask & PIB_IBV_CREATE_SRQ_MASK_DBREC ? PIB_PAGE_SIZE : 0));
	srq->srq.context = context;
	srq->srq.pd = attr_ex->pd;
	srq->srq_type = IBV_SRQT_XRC;
	srq->cq = attr_ex->cq;
	r->srqn = srq->srq_num = next_srqn++;
	return 0;
}

int ibv_cmd_destroy_srq(struct ibv_srq *srq)
{
	return destroy_srq_err;
}

static struct pib_modify_srq last_modify_srq;

int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		       int srq_attr_mask, struct ibv_modify_srq *cmd,
		       size_t cmd_size)
{
	modify_srq_calls++;
	last_srq_attr = *srq_attr;
	/* A resize carries the new ring; anything else carries nothing. */
	if (srq_attr_mask & IBV_SRQ_MAX_WR) {
		CHECK_EQ(cmd_size, sizeof(last_modify_srq));
		last_modify_srq = *container_of(cmd, struct pib_modify_srq,
						ibv_cmd);
		CHECK_EQ(last_modify_srq.buf_addr % PIB_PAGE_SIZE, 0);
	} else {
		CHECK_EQ(cmd_size, sizeof(*cmd));
	}
	return 0;
}

/*
 * RESIZE_CQ as the driver and device do it: the CQEs [ci, pi) of the fake
 * device's CQ (resize_dev) copied to the start of the new (zeroed) ring with
 * the first pass's phase bit, the device's index starting over after them;
 * EINVAL if they do not fit.
 */
static struct fake_cq *resize_dev;

int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp,
		      size_t resp_size)
{
	struct pib_resize_cq *c = container_of(cmd, struct pib_resize_cq, ibv_cmd);
	struct pib_resize_cq_resp *r =
		container_of(resp, struct pib_resize_cq_resp, ibv_resp);
	uint8_t *old = (void *)resize_dev->cq->ring, *ring = (void *)c->buf_addr;
	uint32_t size = 1u << resize_dev->cq->cqe_log;	/* the CQ keeps it */
	uint32_t i;

	CHECK_EQ(cmd_size, sizeof(*c));
	CHECK_EQ(resp_size, sizeof(*r));
	CHECK_EQ((uint32_t)cqe, c->depth - 1);
	CHECK_EQ(c->buf_addr % PIB_PAGE_SIZE, 0);
	CHECK_EQ(c->buf_size, align(c->depth * size, PIB_PAGE_SIZE) + PIB_PAGE_SIZE);
	CHECK_EQ(le32toh(*(uint32_t *)(ring + align(c->depth * size, PIB_PAGE_SIZE))), 0);
	if (resize_dev->pi - c->ci > c->depth)
		return EINVAL;
	for (i = 0; i != resize_dev->pi - c->ci; i++) {
		memcpy(ring + i * size,
		       old + ((c->ci + i) & (resize_dev->cq->depth - 1)) * size, size);
		((struct pib_cqe *)(ring + i * size))->flags |= PIB_CQE_F_PHASE;
	}
	resize_dev->pi = i;
	cq->cqe = cqe;
	r->depth = c->depth;
	return 0;
}

int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct ibv_query_srq *cmd, size_t cmd_size)
{
	/* The kernel's view: the limit it knows, nothing useful besides. */
	*srq_attr = (struct ibv_srq_attr){ .srq_limit = 9 };
	return 0;
}

int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type,
		     struct ibv_mw *mw, struct ibv_alloc_mw *cmd,
		     size_t cmd_size, struct ib_uverbs_alloc_mw_resp *resp,
		     size_t resp_size)
{
	alloc_mw_calls++;
	mw->context = pd->context;
	mw->pd = pd;
	mw->type = type;
	/* Index << 8 | key byte; 0xfe so that two binds wrap the byte. */
	mw->rkey = next_mw_index++ << 8 | 0xfe;
	return 0;
}

int ibv_cmd_dealloc_mw(struct ibv_mw *mw)
{
	return 0;
}

/* ---- The fake device --------------------------------------------------------------------- */

static uint64_t uar_read(struct pib_context *ctx, unsigned int offset)
{
	return le64toh(*(uint64_t *)((uint8_t *)ctx->uar + offset));
}

/* A CQE, and on a timestamped CQ the timestamp ts in the slot's second half. */
/* The fake device's real time: its clock plus this (2023-11-14 22:13:20 UTC). */
#define FAKE_EPOCH_NS 1700000000000000000ull

static void dev_write_cqe_ts(struct fake_cq *f, const struct pib_cqe *in, uint64_t ts)
{
	struct pib_cqe_ts *slot = (void *)((uint8_t *)f->cq->ring +
		((f->pi & (f->cq->depth - 1)) << f->cq->cqe_log));
	uint8_t phase = ((f->pi / f->cq->depth) & 1) ? 0 : PIB_CQE_F_PHASE;

	if (f->cq->cqe_log == PIB_CQE_TS_STRIDE_LOG) {
		slot->timestamp = htole64(ts);
		slot->wallclock = htole64(FAKE_EPOCH_NS + ts);
	}
	slot->cqe = *in;
	slot->cqe.flags = (in->flags & ~PIB_CQE_F_PHASE) | phase;
	f->pi++;
}

static void dev_write_cqe(struct fake_cq *f, const struct pib_cqe *in)
{
	dev_write_cqe_ts(f, in, 0);
}

static void dev_send_cqe(struct fake_cq *f, uint32_t qpn, uint16_t wqe_index,
			 uint64_t wr_id, uint8_t opcode, uint8_t status)
{
	struct pib_cqe c = {
		.wr_id = htole64(wr_id),
		.qpn = htole32(qpn),
		.status = status,
		.opcode = opcode,
		.wqe_index = htole16(wqe_index),
	};

	dev_write_cqe(f, &c);
}

static struct pib_send_wqe *sq_wqe(struct pib_qp *qp, uint32_t index)
{
	return (void *)((uint8_t *)qp->sq.buf +
			((index & (qp->sq.depth - 1)) << qp->sq.stride_log));
}

static struct pib_recv_wqe *rq_wqe(struct pib_qp *qp, uint32_t index)
{
	return (void *)((uint8_t *)qp->rq.buf +
			((index & (qp->rq.depth - 1)) << qp->rq.stride_log));
}

static struct pib_recv_wqe *srq_wqe(struct pib_srq *srq, uint32_t index)
{
	return (void *)((uint8_t *)srq->wq.buf +
			((index & (srq->wq.depth - 1)) << srq->wq.stride_log));
}

/* A receive completion (success or flush) as the responder writes it. */
static void dev_recv_cqe(struct fake_cq *f, uint32_t qpn, uint16_t wqe_index,
			 uint64_t wr_id, uint8_t status)
{
	struct pib_cqe c = {
		.wr_id = htole64(wr_id),
		.byte_len = htole32(status ? 0 : 64),
		.qpn = htole32(qpn),
		.status = status,
		.opcode = PIB_CQE_RECV,
		.wqe_index = htole16(wqe_index),
	};

	dev_write_cqe(f, &c);
}

/* ---- Tests ------------------------------------------------------------------------------- */

static struct ibv_device fake_dev = { .name = "pib_test" };

static struct pib_context *make_context(void)
{
	struct pib_context *ctx = calloc(1, sizeof(*ctx));

	ctx->ibvctx.context.device = &fake_dev;
	ctx->uar = aligned_alloc(PIB_UAR_PAGE_SIZE, PIB_UAR_PAGE_SIZE);
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);
	ctx->uar_size = PIB_UAR_PAGE_SIZE;
	/*
	 * The driver's query_device answer (guest-driver/pib_verbs.c): max_cqe
	 * is the deepest ring (PIB_MAX_CQE) less the slot a CQ keeps free.
	 */
	ctx->max_qp_wr = PIB_MAX_QP_WR;
	ctx->max_sge = 16;
	ctx->max_cqe = PIB_MAX_CQE - 1;
	ctx->max_srq = 4096;
	ctx->max_srq_wr = PIB_MAX_SRQ_WR;
	ctx->max_srq_sge = 16;
	CHECK_EQ(pib_qp_table_init(ctx, 1024), 0);
	CHECK_EQ(pib_srq_table_init(ctx), 0);
	return ctx;
}

static void test_cq_sizing(struct pib_context *ctx)
{
	struct ibv_cq *cq;

	cq = pib_create_cq(&ctx->ibvctx.context, 0, NULL, 0);
	CHECK(cq);
	CHECK_EQ(to_pib_cq(cq)->depth, 2);
	CHECK_EQ(cq->cqe, 1);
	CHECK_EQ(pib_destroy_cq(cq), 0);

	cq = pib_create_cq(&ctx->ibvctx.context, 500, NULL, 0);
	CHECK(cq);
	CHECK_EQ(to_pib_cq(cq)->depth, 512);
	CHECK_EQ(cq->cqe, 511);
	CHECK_EQ((uint8_t *)to_pib_cq(cq)->ci_record - (uint8_t *)to_pib_cq(cq)->buf,
		 512 * 32);
	CHECK_EQ(pib_destroy_cq(cq), 0);

	/* max_cqe itself, and max_cqe / 2 (rdma-core's test_create_cq). */
	cq = pib_create_cq(&ctx->ibvctx.context, ctx->max_cqe, NULL, 0);
	CHECK(cq);
	CHECK_EQ(to_pib_cq(cq)->depth, PIB_MAX_CQE);
	CHECK_EQ(cq->cqe, (int)ctx->max_cqe);
	CHECK_EQ(pib_destroy_cq(cq), 0);
	cq = pib_create_cq(&ctx->ibvctx.context, ctx->max_cqe / 2, NULL, 0);
	CHECK(cq);
	CHECK_EQ(to_pib_cq(cq)->depth, PIB_MAX_CQE / 2);
	CHECK_EQ(pib_destroy_cq(cq), 0);

	/* Beyond max_cqe, or negative: refused before the kernel is asked. */
	create_cq_calls = 0;
	errno = 0;
	CHECK(!pib_create_cq(&ctx->ibvctx.context, PIB_MAX_CQE, NULL, 0));
	CHECK_EQ(errno, EINVAL);
	CHECK(!pib_create_cq(&ctx->ibvctx.context, -1, NULL, 0));
	CHECK_EQ(create_cq_calls, 0);
}

static void test_qp_sizing(struct pib_context *ctx, struct ibv_pd *pd,
			   struct ibv_cq *cq)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_init_attr qattr;
	struct ibv_qp_attr qpattr;
	struct ibv_qp *ibvqp;
	struct pib_qp *qp;

	/* ibv_rc_pingpong's request. */
	attr.cap = (struct ibv_qp_cap){ .max_send_wr = 1, .max_recv_wr = 500,
					.max_send_sge = 1, .max_recv_sge = 1 };
	ibvqp = pib_create_qp(pd, &attr);
	CHECK(ibvqp);
	qp = to_pib_qp(ibvqp);
	CHECK_EQ(qp->sq.depth, 1);
	CHECK_EQ(qp->sq.stride_log, 7);		/* 64 + 16 -> 128 */
	CHECK_EQ(qp->rq.depth, 512);
	CHECK_EQ(qp->rq.stride_log, 5);		/* 16 + 16 -> 32 */
	CHECK_EQ(attr.cap.max_send_wr, 1);
	CHECK_EQ(attr.cap.max_recv_wr, 512);
	CHECK_EQ(attr.cap.max_send_sge, 4);	/* (128 - 64) / 16 */
	CHECK_EQ(attr.cap.max_recv_sge, 1);
	CHECK_EQ(attr.cap.max_inline_data, 64);
	/* query_qp answers from the rings, not the kernel's zeroes. */
	CHECK_EQ(pib_query_qp(ibvqp, &qpattr, IBV_QP_CAP, &qattr), 0);
	CHECK_EQ(qattr.cap.max_inline_data, 64);
	CHECK_EQ(qpattr.cap.max_recv_wr, 512);
	CHECK_EQ(pib_destroy_qp(ibvqp), 0);

	/* The largest request: 16 SGEs, 256 inline bytes, max_qp_wr WRs. */
	attr.cap = (struct ibv_qp_cap){ .max_send_wr = PIB_MAX_QP_WR,
					.max_recv_wr = PIB_MAX_QP_WR,
					.max_send_sge = 16, .max_recv_sge = 16,
					.max_inline_data = 256 };
	ibvqp = pib_create_qp(pd, &attr);
	CHECK(ibvqp);
	qp = to_pib_qp(ibvqp);
	CHECK_EQ(qp->sq.stride_log, 9);		/* 64 + 256 -> 512 */
	CHECK_EQ(qp->rq.stride_log, 9);		/* 16 + 256 -> 512 */
	CHECK_EQ(attr.cap.max_send_sge, 16);
	CHECK_EQ(attr.cap.max_inline_data, 256);
	CHECK_EQ(pib_destroy_qp(ibvqp), 0);

	/* Each limit, one over. */
	attr.cap = (struct ibv_qp_cap){ .max_send_wr = PIB_MAX_QP_WR + 1 };
	CHECK(!pib_create_qp(pd, &attr));
	CHECK_EQ(errno, EINVAL);
	attr.cap = (struct ibv_qp_cap){ .max_recv_wr = PIB_MAX_QP_WR + 1 };
	CHECK(!pib_create_qp(pd, &attr));
	attr.cap = (struct ibv_qp_cap){ .max_send_sge = 17 };
	CHECK(!pib_create_qp(pd, &attr));
	attr.cap = (struct ibv_qp_cap){ .max_recv_sge = 17 };
	CHECK(!pib_create_qp(pd, &attr));
	attr.cap = (struct ibv_qp_cap){ .max_inline_data = 257 };
	CHECK(!pib_create_qp(pd, &attr));
	attr.cap = (struct ibv_qp_cap){ 0 };
	attr.qp_type = IBV_QPT_RAW_PACKET;
	CHECK(!pib_create_qp(pd, &attr));
	CHECK_EQ(errno, EOPNOTSUPP);
	attr.qp_type = IBV_QPT_RC;
	attr.send_cq = NULL;
	CHECK(!pib_create_qp(pd, &attr));
	CHECK_EQ(errno, EINVAL);
}

static void test_rc_data_path(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *ibvcq = pib_create_cq(&ctx->ibvctx.context, 6, NULL, 0);
	struct ibv_qp_init_attr attr = {
		.send_cq = ibvcq, .recv_cq = ibvcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 3, .max_recv_wr = 2, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 100 },
	};
	struct pib_cq *cq = to_pib_cq(ibvcq);
	struct fake_cq dev = { .cq = cq };
	char payload[100];
	struct ibv_sge sge[5] = {
		{ .addr = 0x1000, .length = 8, .lkey = 0x101 },
		{ .addr = 0x2000, .length = 16, .lkey = 0x202 },
		{ .addr = 0x3000, .length = 1, .lkey = 0x303 },
	};
	struct ibv_send_wr wr[5], *bad;
	struct ibv_recv_wr rwr[3], *rbad;
	struct ibv_wc wc[8];
	struct pib_send_wqe *w;
	struct pib_recv_wqe *rw;
	struct pib_sge *ws;
	struct ibv_qp *ibvqp;
	struct pib_qp *qp;
	uint32_t qpn;
	uint64_t db;
	int i;

	CHECK_EQ(cq->depth, 8);
	ibvqp = pib_create_qp(pd, &attr);
	CHECK(ibvqp);
	qp = to_pib_qp(ibvqp);
	qpn = ibvqp->qp_num;
	CHECK_EQ(qp->sq.depth, 4);
	CHECK_EQ(qp->sq.stride_log, 8);	/* 64 + max(32, 100) -> 256 */
	CHECK_EQ(attr.cap.max_inline_data, 100 + 92);

	/* A list of four: SEND, WRITE_IMM, inline SEND, READ. */
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 5; i++) {
		wr[i].wr_id = 100 + i;
		wr[i].next = i < 4 ? &wr[i + 1] : NULL;
	}
	wr[0].opcode = IBV_WR_SEND;
	wr[0].sg_list = sge;
	wr[0].num_sge = 2;
	wr[0].send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	wr[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr[1].imm_data = htobe32(0xdeadbeef);
	wr[1].wr.rdma.remote_addr = 0xabcdef0123ull;
	wr[1].wr.rdma.rkey = 0x777;
	wr[1].sg_list = &sge[2];
	wr[1].num_sge = 1;
	for (i = 0; i < (int)sizeof(payload); i++)
		payload[i] = i;
	sge[3] = (struct ibv_sge){ .addr = (uintptr_t)payload, .length = 60 };
	sge[4] = (struct ibv_sge){ .addr = (uintptr_t)payload + 60, .length = 40 };
	wr[2].opcode = IBV_WR_SEND;
	wr[2].send_flags = IBV_SEND_INLINE | IBV_SEND_FENCE;
	wr[2].sg_list = &sge[3];
	wr[2].num_sge = 2;
	wr[3].opcode = IBV_WR_RDMA_READ;
	wr[3].send_flags = IBV_SEND_SIGNALED;
	wr[3].sg_list = sge;
	wr[3].num_sge = 1;
	wr[4].opcode = IBV_WR_SEND;	/* the fifth does not fit */

	bad = NULL;
	CHECK_EQ(pib_post_send(ibvqp, wr, &bad), ENOMEM);
	CHECK(bad == &wr[4]);
	/* One doorbell for the four that fit. */
	db = uar_read(ctx, PIB_UAR_SQ_DB);
	CHECK_EQ(db, (uint64_t)4 << 32 | qpn);

	w = sq_wqe(qp, 0);
	CHECK_EQ(w->opcode, PIB_WQE_SEND);
	CHECK_EQ(w->flags, PIB_WQE_F_SIGNALED | PIB_WQE_F_SOLICITED);
	CHECK_EQ(w->num_sge, 2);
	CHECK_EQ(le64toh(w->wr_id), 100);
	ws = (struct pib_sge *)(w + 1);
	CHECK_EQ(le64toh(ws[1].addr), 0x2000);
	CHECK_EQ(le32toh(ws[1].length), 16);
	CHECK_EQ(le32toh(ws[1].lkey), 0x202);

	w = sq_wqe(qp, 1);
	CHECK_EQ(w->opcode, PIB_WQE_RDMA_WRITE_IMM);
	CHECK_EQ(w->flags, 0);
	CHECK(memcmp(&w->imm_inv, "\xde\xad\xbe\xef", 4) == 0);	/* wire order */
	CHECK_EQ(le64toh(w->remote_addr), 0xabcdef0123ull);
	CHECK_EQ(le32toh(w->rkey), 0x777);

	w = sq_wqe(qp, 2);
	CHECK_EQ(w->flags, PIB_WQE_F_INLINE | PIB_WQE_F_FENCE);
	CHECK_EQ(w->num_sge, 0);
	CHECK_EQ(le32toh(w->inline_len), 100);
	CHECK(memcmp(w + 1, payload, 100) == 0);

	w = sq_wqe(qp, 3);
	CHECK_EQ(w->opcode, PIB_WQE_RDMA_READ);

	/* Bad requests: refused, nothing written, no doorbell. */
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);
	wr[4].next = NULL;
	CHECK_EQ(pib_post_send(ibvqp, &wr[4], &bad), ENOMEM);	/* still full */

	/* The device completes WQE 0 (signalled); slot 0 is free again. */
	dev_send_cqe(&dev, qpn, 0, 100, PIB_CQE_SEND, PIB_WC_SUCCESS);
	CHECK_EQ(pib_poll_cq(ibvcq, 8, wc), 1);
	CHECK_EQ(wc[0].wr_id, 100);
	CHECK_EQ(wc[0].opcode, IBV_WC_SEND);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].qp_num, qpn);
	CHECK_EQ(atomic_load(&qp->sq.ci), 1);
	CHECK_EQ(le32toh(*cq->ci_record), 1);
	CHECK_EQ(pib_poll_cq(ibvcq, 8, wc), 0);

	wr[4].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr[4].wr.atomic.remote_addr = 0x8000;
	wr[4].wr.atomic.rkey = 0x99;
	wr[4].wr.atomic.compare_add = 1;
	wr[4].wr.atomic.swap = 2;
	wr[4].send_flags = IBV_SEND_INLINE;	/* no inline atomics */
	CHECK_EQ(pib_post_send(ibvqp, &wr[4], &bad), EINVAL);
	wr[4].send_flags = IBV_SEND_SIGNALED;
	wr[4].num_sge = 3;
	wr[4].sg_list = sge;
	CHECK_EQ(pib_post_send(ibvqp, &wr[4], &bad), 0);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SQ_DB), (uint64_t)5 << 32 | qpn);
	w = sq_wqe(qp, 4);
	CHECK(w == sq_wqe(qp, 0));
	CHECK_EQ(w->opcode, PIB_WQE_ATOMIC_CS);
	CHECK_EQ(le64toh(w->compare_add), 1);
	CHECK_EQ(le64toh(w->swap), 2);
	CHECK_EQ(le32toh(w->rkey), 0x99);

	/* Validation, each with the ring not full. */
	dev_send_cqe(&dev, qpn, 1, 101, PIB_CQE_RDMA_WRITE, PIB_WC_SUCCESS);
	CHECK_EQ(pib_poll_cq(ibvcq, 8, wc), 1);
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);
	wr[4].send_flags = 0;
	wr[4].opcode = IBV_WR_SEND;
	wr[4].num_sge = 13;			/* slot holds 12 */
	CHECK_EQ(pib_post_send(ibvqp, &wr[4], &bad), EINVAL);
	wr[4].num_sge = -1;
	CHECK_EQ(pib_post_send(ibvqp, &wr[4], &bad), EINVAL);
	wr[4].num_sge = 0;
	wr[4].opcode = IBV_WR_BIND_MW;		/* a bind with no window */
	CHECK_EQ(pib_post_send(ibvqp, &wr[4], &bad), EINVAL);
	wr[4].opcode = IBV_WR_SEND;
	wr[4].send_flags = IBV_SEND_IP_CSUM;
	CHECK_EQ(pib_post_send(ibvqp, &wr[4], &bad), EINVAL);
	wr[4].send_flags = IBV_SEND_INLINE;	/* 193 bytes > 192 */
	sge[3].length = 153;
	wr[4].sg_list = &sge[3];
	wr[4].num_sge = 2;
	CHECK_EQ(pib_post_send(ibvqp, &wr[4], &bad), EINVAL);
	sge[3].length = 100;			/* sum wraps to 49 in 32 bits */
	sge[4].length = 0xffffffff - 50;
	CHECK_EQ(pib_post_send(ibvqp, &wr[4], &bad), EINVAL);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SQ_DB), 0);
	CHECK_EQ(atomic_load(&qp->sq.pi), 5);

	/* A stale CQE (index outside [ci, pi)) moves nothing. */
	dev_send_cqe(&dev, qpn, 0x7000, 1, PIB_CQE_SEND, PIB_WC_SUCCESS);
	CHECK_EQ(pib_poll_cq(ibvcq, 8, wc), 1);
	CHECK_EQ(atomic_load(&qp->sq.ci), 2);

	/* One CQE for the last signalled WQE retires the unsignalled ones. */
	dev_send_cqe(&dev, qpn, 4, 104, PIB_CQE_COMP_SWAP, PIB_WC_SUCCESS);
	CHECK_EQ(pib_poll_cq(ibvcq, 8, wc), 1);
	CHECK_EQ(wc[0].opcode, IBV_WC_COMP_SWAP);
	CHECK_EQ(atomic_load(&qp->sq.ci), 5);

	/* Receives: two fit, the RQ doorbell carries the producer index. */
	memset(rwr, 0, sizeof(rwr));
	for (i = 0; i < 3; i++) {
		rwr[i].wr_id = 200 + i;
		rwr[i].sg_list = sge;
		rwr[i].num_sge = 2;
		rwr[i].next = i < 2 ? &rwr[i + 1] : NULL;
	}
	CHECK_EQ(pib_post_recv(ibvqp, rwr, &rbad), ENOMEM);
	CHECK(rbad == &rwr[2]);
	CHECK_EQ(uar_read(ctx, PIB_UAR_RQ_DB), (uint64_t)2 << 32 | qpn);
	rw = rq_wqe(qp, 1);
	CHECK_EQ(le64toh(rw->wr_id), 201);
	CHECK_EQ(rw->num_sge, 2);
	CHECK_EQ(le64toh(((struct pib_sge *)(rw + 1))[0].addr), 0x1000);
	rwr[2].num_sge = 3;
	CHECK_EQ(pib_post_recv(ibvqp, &rwr[2], &rbad), ENOMEM);

	/* A receive with immediate data and a GRH, then one with INV. */
	{
		struct pib_cqe c = {
			.wr_id = htole64(200), .byte_len = htole32(77),
			.qpn = htole32(qpn), .src_qp = htole32(0x55),
			.slid = htole16(3), .sl = 2,
			.opcode = PIB_CQE_RECV,
			.flags = PIB_CQE_F_IMM | PIB_CQE_F_GRH,
		};
		memcpy(&c.imm_inv, "\x01\x02\x03\x04", 4);
		dev_write_cqe(&dev, &c);
		c.wr_id = htole64(201);
		c.flags = PIB_CQE_F_INV;
		c.imm_inv = htole32(0x4242);
		dev_write_cqe(&dev, &c);
	}
	CHECK_EQ(pib_poll_cq(ibvcq, 1, wc), 1);	/* one at a time */
	CHECK_EQ(pib_poll_cq(ibvcq, 1, wc + 1), 1);
	CHECK_EQ(wc[0].opcode, IBV_WC_RECV);
	CHECK_EQ(wc[0].byte_len, 77);
	CHECK_EQ(wc[0].wc_flags, IBV_WC_WITH_IMM | IBV_WC_GRH);
	CHECK_EQ(be32toh(wc[0].imm_data), 0x01020304);
	CHECK_EQ(wc[0].src_qp, 0x55);
	CHECK_EQ(wc[0].slid, 3);
	CHECK_EQ(wc[0].sl, 2);
	CHECK_EQ(wc[1].wr_id, 201);
	CHECK_EQ(wc[1].wc_flags, IBV_WC_WITH_INV);
	CHECK_EQ(wc[1].invalidated_rkey, 0x4242);
	CHECK_EQ(atomic_load(&qp->rq.ci), 2);

	/* Error and unknown completions. */
	dev_send_cqe(&dev, qpn, 0, 9, PIB_CQE_SEND, PIB_WC_WR_FLUSH_ERR);
	dev_send_cqe(&dev, qpn, 0, 9, 0x42, PIB_WC_SUCCESS);
	dev_send_cqe(&dev, qpn, 0, 9, PIB_CQE_SEND, 99);
	CHECK_EQ(pib_poll_cq(ibvcq, 8, wc), 3);
	CHECK_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc[1].status, IBV_WC_GENERAL_ERR);
	CHECK_EQ(wc[2].status, IBV_WC_GENERAL_ERR);
	CHECK_EQ(wc[2].vendor_err, 99);

	/* Arming: CQN, arm bits and the consumer index in one doorbell. */
	CHECK_EQ(pib_req_notify_cq(ibvcq, 0), 0);
	CHECK_EQ(uar_read(ctx, PIB_UAR_CQ_DB),
		 (uint64_t)cq->ci << 32 | PIB_DB_CQ_ARM | cq->cqn);
	CHECK_EQ(pib_req_notify_cq(ibvcq, 1), 0);
	CHECK_EQ(uar_read(ctx, PIB_UAR_CQ_DB),
		 (uint64_t)cq->ci << 32 | PIB_DB_CQ_ARM | PIB_DB_CQ_SOLICITED |
			 cq->cqn);

	/* RESET starts the indices over. */
	CHECK_EQ(pib_modify_qp(ibvqp, &(struct ibv_qp_attr){
				      .qp_state = IBV_QPS_RESET },
			      IBV_QP_STATE), 0);
	CHECK_EQ(atomic_load(&qp->sq.pi), 0);
	CHECK_EQ(atomic_load(&qp->rq.ci), 0);

	/* After destroy_qp the device's flush CQEs belong to no one. */
	CHECK_EQ(pib_destroy_qp(ibvqp), 0);
	dev_send_cqe(&dev, qpn, 0, 9, PIB_CQE_SEND, PIB_WC_WR_FLUSH_ERR);
	CHECK_EQ(pib_poll_cq(ibvcq, 8, wc), 0);
	CHECK_EQ(le32toh(*cq->ci_record), dev.pi);	/* but it is consumed */

	CHECK_EQ(pib_destroy_cq(ibvcq), 0);
}

/* The phase bit over many passes: nothing is seen twice or early. */
static void test_phase_wrap(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *ibvcq = pib_create_cq(&ctx->ibvctx.context, 3, NULL, 0);
	struct ibv_qp_init_attr attr = {
		.send_cq = ibvcq, .recv_cq = ibvcq, .qp_type = IBV_QPT_UC,
		.cap = { .max_send_wr = 1 },
	};
	struct pib_cq *cq = to_pib_cq(ibvcq);
	struct fake_cq dev = { .cq = cq };
	struct ibv_qp *ibvqp = pib_create_qp(pd, &attr);
	struct ibv_wc wc[4];
	uint64_t expect = 0;
	int pass, n, i, got;

	CHECK_EQ(cq->depth, 4);
	for (pass = 0; pass < 10; pass++) {
		n = 1 + pass % 4;
		for (i = 0; i < n; i++)
			dev_send_cqe(&dev, ibvqp->qp_num, 0, dev.pi,
				     PIB_CQE_SEND, PIB_WC_SUCCESS);
		got = pib_poll_cq(ibvcq, 4, wc);
		CHECK_EQ(got, n);
		for (i = 0; i < got; i++)
			CHECK_EQ(wc[i].wr_id, expect++);
		CHECK_EQ(pib_poll_cq(ibvcq, 4, wc), 0);
	}
	CHECK_EQ(cq->ci, dev.pi);

	/* UC has no READ; UD no WRITE. */
	{
		struct ibv_send_wr w = { .opcode = IBV_WR_RDMA_READ }, *bad;

		CHECK_EQ(pib_post_send(ibvqp, &w, &bad), EINVAL);
	}
	CHECK_EQ(pib_destroy_qp(ibvqp), 0);
	CHECK_EQ(pib_destroy_cq(ibvcq), 0);
}

static void test_ud(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *ibvcq = pib_create_cq(&ctx->ibvctx.context, 3, NULL, 0);
	struct ibv_qp_init_attr attr = {
		.send_cq = ibvcq, .recv_cq = ibvcq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 2, .max_send_sge = 1 },
	};
	struct ibv_ah_attr ah_attr = { .dlid = 0x22, .sl = 5, .port_num = 1 };
	struct ibv_qp *ibvqp = pib_create_qp(pd, &attr);
	struct ibv_ah *ah = pib_create_ah(pd, &ah_attr);
	struct ibv_send_wr w = { .opcode = IBV_WR_SEND }, *bad;
	struct pib_send_wqe *wqe;

	CHECK(ah);
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = 0x1000001;		/* 25 bits */
	CHECK_EQ(pib_post_send(ibvqp, &w, &bad), EINVAL);
	w.wr.ud.remote_qpn = 0xabc;
	w.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(pib_post_send(ibvqp, &w, &bad), 0);
	wqe = sq_wqe(to_pib_qp(ibvqp), 0);
	CHECK_EQ(le32toh(wqe->ud_qpn), 0xabc);
	CHECK_EQ(le32toh(wqe->ud_qkey), 0x11111111);
	CHECK_EQ(le16toh(wqe->ud_dlid), 0x22);
	CHECK_EQ(wqe->ud_sl, 5);
	w.opcode = IBV_WR_RDMA_WRITE;
	CHECK_EQ(pib_post_send(ibvqp, &w, &bad), EINVAL);
	w.opcode = IBV_WR_SEND;
	w.wr.ud.ah = NULL;
	CHECK_EQ(pib_post_send(ibvqp, &w, &bad), EINVAL);

	ah_attr.port_num = 2;
	CHECK(!pib_create_ah(pd, &ah_attr));
	ah_attr.port_num = 1;
	ah_attr.sl = 16;
	CHECK(!pib_create_ah(pd, &ah_attr));

	CHECK_EQ(pib_destroy_ah(ah), 0);
	CHECK_EQ(pib_destroy_qp(ibvqp), 0);
	CHECK_EQ(pib_destroy_cq(ibvcq), 0);
}

static void test_srq_sizing(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_srq_init_attr attr = {};
	struct ibv_srq_attr sattr;
	struct ibv_srq *ibvsrq;
	struct pib_srq *srq;

	/* ibv_srq_pingpong's request: 500 WRs, one SGE. */
	attr.attr = (struct ibv_srq_attr){ .max_wr = 500, .max_sge = 1 };
	ibvsrq = pib_create_srq(pd, &attr);
	CHECK(ibvsrq);
	srq = to_pib_srq(ibvsrq);
	CHECK_EQ(srq->wq.depth, 512);
	CHECK_EQ(srq->wq.stride_log, 5);	/* 16 + 16 -> 32 */
	CHECK_EQ(attr.attr.max_wr, 512);	/* the ring, not the echo */
	CHECK_EQ(attr.attr.max_sge, 1);
	CHECK_EQ(last_create_srq.depth, 512);
	CHECK_EQ(last_create_srq.stride_log, 5);
	CHECK(last_create_srq.buf_addr == (uintptr_t)srq->wq.buf);
	CHECK_EQ(last_srq_attr.max_wr, 500);	/* the core command's */
	/* query_srq: the kernel's limit, the provider's ring. */
	CHECK_EQ(pib_query_srq(ibvsrq, &sattr), 0);
	CHECK_EQ(sattr.max_wr, 512);
	CHECK_EQ(sattr.max_sge, 1);
	CHECK_EQ(sattr.srq_limit, 9);
	CHECK_EQ(pib_destroy_srq(ibvsrq), 0);

	/*
	 * A power of two gets one slot more, so that a limit equal to max_wr
	 * is below the depth; the limit reaches the kernel unchanged.
	 */
	attr.attr = (struct ibv_srq_attr){ .max_wr = 512, .max_sge = 16,
					   .srq_limit = 512 };
	ibvsrq = pib_create_srq(pd, &attr);
	CHECK(ibvsrq);
	srq = to_pib_srq(ibvsrq);
	CHECK_EQ(srq->wq.depth, 1024);
	CHECK_EQ(srq->wq.stride_log, 9);	/* 16 + 256 -> 512 */
	CHECK_EQ(attr.attr.max_sge, 16);
	CHECK_EQ(last_srq_attr.srq_limit, 512);
	CHECK_EQ(pib_destroy_srq(ibvsrq), 0);

	/* The device's maximum is allowed, without the extra slot. */
	attr.attr = (struct ibv_srq_attr){ .max_wr = PIB_MAX_SRQ_WR,
					   .srq_limit = PIB_MAX_SRQ_WR - 1 };
	ibvsrq = pib_create_srq(pd, &attr);
	CHECK(ibvsrq);
	CHECK_EQ(to_pib_srq(ibvsrq)->wq.depth, PIB_MAX_SRQ_WR);
	CHECK_EQ(to_pib_srq(ibvsrq)->wq.stride_log, 4);
	CHECK_EQ(attr.attr.max_sge, 0);
	CHECK_EQ(pib_destroy_srq(ibvsrq), 0);

	/* No WRs asked for: one slot. */
	attr.attr = (struct ibv_srq_attr){ 0 };
	ibvsrq = pib_create_srq(pd, &attr);
	CHECK(ibvsrq);
	CHECK_EQ(to_pib_srq(ibvsrq)->wq.depth, 1);
	CHECK_EQ(pib_destroy_srq(ibvsrq), 0);

	/* Each limit, one over: refused before the kernel is asked. */
	create_srq_calls = 0;
	attr.attr = (struct ibv_srq_attr){ .max_wr = PIB_MAX_SRQ_WR + 1 };
	errno = 0;
	CHECK(!pib_create_srq(pd, &attr));
	CHECK_EQ(errno, EINVAL);
	attr.attr = (struct ibv_srq_attr){ .max_wr = 1, .max_sge = 17 };
	CHECK(!pib_create_srq(pd, &attr));
	attr.attr = (struct ibv_srq_attr){ .max_wr = PIB_MAX_SRQ_WR,
					   .srq_limit = PIB_MAX_SRQ_WR };
	CHECK(!pib_create_srq(pd, &attr));
	attr.attr = (struct ibv_srq_attr){ .max_wr = 3, .srq_limit = 4 };
	CHECK(!pib_create_srq(pd, &attr));
	CHECK_EQ(create_srq_calls, 0);
	/* A device without SRQs (max_srq_wr 0) refuses them all. */
	ctx->max_srq_wr = 0;
	attr.attr = (struct ibv_srq_attr){ 0 };
	CHECK(!pib_create_srq(pd, &attr));
	CHECK_EQ(create_srq_calls, 0);
	ctx->max_srq_wr = PIB_MAX_SRQ_WR;
}

/*
 * Two QPs on one SRQ, their receive completions on two CQs: posting, the SRQ
 * doorbell, and retiring one SRQ slot per receive completion of either QP.
 */
static void test_srq_data_path(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *ibvcq1 = pib_create_cq(&ctx->ibvctx.context, 7, NULL, 0);
	struct ibv_cq *ibvcq2 = pib_create_cq(&ctx->ibvctx.context, 7, NULL, 0);
	struct ibv_srq_init_attr sattr = {
		.attr = { .max_wr = 3, .max_sge = 2, .srq_limit = 1 },
	};
	struct ibv_qp_init_attr attr = {
		.send_cq = ibvcq1, .recv_cq = ibvcq1, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 2, .max_recv_wr = 100,
			 .max_recv_sge = 16 },
	};
	struct fake_cq dev1 = { .cq = to_pib_cq(ibvcq1) };
	struct fake_cq dev2 = { .cq = to_pib_cq(ibvcq2) };
	struct ibv_sge sge[3] = {
		{ .addr = 0x1000, .length = 8, .lkey = 0x101 },
		{ .addr = 0x2000, .length = 16, .lkey = 0x202 },
		{ .addr = 0x3000, .length = 1, .lkey = 0x303 },
	};
	struct ibv_recv_wr rwr[5], *rbad;
	struct ibv_qp *ibvqa, *ibvqb;
	struct ibv_srq *ibvsrq;
	struct pib_recv_wqe *rw;
	struct pib_sge *ws;
	struct pib_srq *srq;
	struct ibv_wc wc[8];
	uint32_t qpa, qpb, srqn;
	int i;

	ibvsrq = pib_create_srq(pd, &sattr);
	CHECK(ibvsrq);
	srq = to_pib_srq(ibvsrq);
	srqn = srq->srqn;
	CHECK_EQ(srq->wq.depth, 4);
	CHECK_EQ(srq->wq.max_sge, 3);		/* (64 - 16) / 16 */

	/* QP A: no RQ of its own, none handed to the kernel. */
	attr.srq = ibvsrq;
	ibvqa = pib_create_qp(pd, &attr);
	CHECK(ibvqa);
	qpa = ibvqa->qp_num;
	CHECK(to_pib_qp(ibvqa)->srq == srq);
	CHECK_EQ(to_pib_qp(ibvqa)->rq.depth, 0);
	CHECK(!to_pib_qp(ibvqa)->rq.buf);
	CHECK_EQ(last_create_qp.rq_depth, 0);
	CHECK_EQ(last_create_qp.rq_buf_addr, 0);
	CHECK_EQ(last_create_qp.rq_buf_size, 0);
	CHECK_EQ(attr.cap.max_recv_wr, 0);
	CHECK_EQ(attr.cap.max_recv_sge, 0);
	/* QP B: same SRQ, receive completions on the second CQ. */
	attr.recv_cq = ibvcq2;
	attr.cap = (struct ibv_qp_cap){ .max_send_wr = 2 };
	ibvqb = pib_create_qp(pd, &attr);
	CHECK(ibvqb);
	qpb = ibvqb->qp_num;

	/* Receives go to the SRQ, not to the QPs. */
	memset(rwr, 0, sizeof(rwr));
	for (i = 0; i < 5; i++) {
		rwr[i].wr_id = 300 + i;
		rwr[i].sg_list = sge;
		rwr[i].num_sge = 1 + i % 3;
		rwr[i].next = i < 4 ? &rwr[i + 1] : NULL;
	}
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);
	CHECK_EQ(pib_post_recv(ibvqa, rwr, &rbad), EINVAL);
	CHECK(rbad == rwr);
	CHECK_EQ(uar_read(ctx, PIB_UAR_RQ_DB), 0);

	/* Four fit; one doorbell: SRQN and the producer index. */
	rbad = NULL;
	CHECK_EQ(pib_post_srq_recv(ibvsrq, rwr, &rbad), ENOMEM);
	CHECK(rbad == &rwr[4]);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SRQ_DB), (uint64_t)4 << 32 | srqn);
	CHECK_EQ(atomic_load(&srq->wq.pi), 4);
	for (i = 0; i < 4; i++) {
		rw = srq_wqe(srq, i);
		CHECK_EQ(le64toh(rw->wr_id), 300 + i);
		CHECK_EQ(rw->num_sge, 1 + i % 3);
	}
	rw = srq_wqe(srq, 2);
	ws = (struct pib_sge *)(rw + 1);
	CHECK_EQ(le64toh(ws[2].addr), 0x3000);
	CHECK_EQ(le32toh(ws[2].length), 1);
	CHECK_EQ(le32toh(ws[2].lkey), 0x303);
	CHECK((uint8_t *)(ws + 3) <= (uint8_t *)rw + 64);	/* in its slot */

	/* Full: refused, no doorbell. */
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);
	rwr[4].num_sge = 1;
	CHECK_EQ(pib_post_srq_recv(ibvsrq, &rwr[4], &rbad), ENOMEM);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SRQ_DB), 0);

	/*
	 * The device took WQEs 0 (QP A) and 1 (QP B); B completes first, on
	 * the other CQ.  Each receive completion frees one SRQ slot; a send
	 * completion of a QP on the SRQ frees SQ slots only.
	 */
	dev_recv_cqe(&dev2, qpb, 1, 301, PIB_WC_SUCCESS);
	CHECK_EQ(pib_poll_cq(ibvcq2, 8, wc), 1);
	CHECK_EQ(wc[0].wr_id, 301);
	CHECK_EQ(wc[0].opcode, IBV_WC_RECV);
	CHECK_EQ(wc[0].qp_num, qpb);
	CHECK_EQ(atomic_load(&srq->wq.ci), 1);
	{
		struct ibv_send_wr w = { .opcode = IBV_WR_SEND }, *bad;

		CHECK_EQ(pib_post_send(ibvqa, &w, &bad), 0);
	}
	dev_send_cqe(&dev1, qpa, 0, 1, PIB_CQE_SEND, PIB_WC_SUCCESS);
	dev_recv_cqe(&dev1, qpa, 0, 300, PIB_WC_SUCCESS);
	CHECK_EQ(pib_poll_cq(ibvcq1, 8, wc), 2);
	CHECK_EQ(wc[1].wr_id, 300);
	CHECK_EQ(atomic_load(&to_pib_qp(ibvqa)->sq.ci), 1);
	CHECK_EQ(atomic_load(&srq->wq.ci), 2);

	/* Two slots free again: both post, the doorbell says 6. */
	rwr[4].next = NULL;
	rwr[3].next = &rwr[4];
	CHECK_EQ(pib_post_srq_recv(ibvsrq, &rwr[3], &rbad), 0);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SRQ_DB), (uint64_t)6 << 32 | srqn);
	CHECK_EQ(le64toh(srq_wqe(srq, 5)->wr_id), 304);
	CHECK(srq_wqe(srq, 5) == srq_wqe(srq, 1));

	/* Too many SGEs for the slot: refused, nothing written. */
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);
	dev_recv_cqe(&dev1, qpa, 2, 302, PIB_WC_SUCCESS);
	CHECK_EQ(pib_poll_cq(ibvcq1, 8, wc), 1);
	rwr[0].next = NULL;
	rwr[0].num_sge = 4;
	CHECK_EQ(pib_post_srq_recv(ibvsrq, rwr, &rbad), EINVAL);
	rwr[0].num_sge = -1;
	CHECK_EQ(pib_post_srq_recv(ibvsrq, rwr, &rbad), EINVAL);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SRQ_DB), 0);
	CHECK_EQ(atomic_load(&srq->wq.pi), 6);

	/*
	 * Destroying QP A with completions nobody polled: one success and the
	 * flush of the WQE it had taken.  Their SRQ slots are retired at
	 * destroy time; QP B's completion in the same CQ is left to poll_cq.
	 */
	CHECK_EQ(atomic_load(&srq->wq.ci), 3);
	dev_recv_cqe(&dev1, qpa, 3, 303, PIB_WC_SUCCESS);
	dev_send_cqe(&dev1, qpa, 1, 2, PIB_CQE_SEND, PIB_WC_WR_FLUSH_ERR);
	dev_recv_cqe(&dev2, qpb, 4, 304, PIB_WC_SUCCESS);
	dev_recv_cqe(&dev1, qpa, 5, 305, PIB_WC_WR_FLUSH_ERR);
	CHECK_EQ(pib_destroy_qp(ibvqa), 0);
	CHECK_EQ(atomic_load(&srq->wq.ci), 5);
	CHECK_EQ(pib_poll_cq(ibvcq1, 8, wc), 0);	/* A's are dropped */
	CHECK_EQ(atomic_load(&srq->wq.ci), 5);		/* and not counted twice */
	CHECK_EQ(pib_poll_cq(ibvcq2, 8, wc), 1);
	CHECK_EQ(wc[0].wr_id, 304);
	CHECK_EQ(atomic_load(&srq->wq.ci), 6);

	/* A completion with nothing posted never moves ci past pi. */
	dev_recv_cqe(&dev2, qpb, 6, 306, PIB_WC_SUCCESS);
	CHECK_EQ(pib_poll_cq(ibvcq2, 8, wc), 1);
	CHECK_EQ(atomic_load(&srq->wq.ci), 6);
	CHECK_EQ(atomic_load(&srq->wq.pi), 6);

	/* modify_srq: max_wr within the device's, the limit below the depth. */
	modify_srq_calls = 0;
	CHECK_EQ(pib_modify_srq(ibvsrq, &(struct ibv_srq_attr){ .max_wr = PIB_MAX_SRQ_WR + 1 },
				IBV_SRQ_MAX_WR), EINVAL);
	CHECK_EQ(pib_modify_srq(ibvsrq, &(struct ibv_srq_attr){ .srq_limit = 4 },
				IBV_SRQ_LIMIT), EINVAL);
	CHECK_EQ(modify_srq_calls, 0);
	CHECK_EQ(pib_modify_srq(ibvsrq, &(struct ibv_srq_attr){ .srq_limit = 3 },
				IBV_SRQ_LIMIT), 0);
	CHECK_EQ(modify_srq_calls, 1);
	CHECK_EQ(last_srq_attr.srq_limit, 3);

	/* The kernel refuses to destroy an SRQ in use: it stays intact. */
	destroy_srq_err = EBUSY;
	CHECK_EQ(pib_destroy_srq(ibvsrq), EBUSY);
	destroy_srq_err = 0;
	rwr[1].next = NULL;
	CHECK_EQ(pib_post_srq_recv(ibvsrq, &rwr[1], &rbad), 0);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SRQ_DB), (uint64_t)7 << 32 | srqn);

	CHECK_EQ(pib_destroy_qp(ibvqb), 0);
	CHECK_EQ(pib_destroy_srq(ibvsrq), 0);
	CHECK_EQ(pib_destroy_cq(ibvcq2), 0);
	CHECK_EQ(pib_destroy_cq(ibvcq1), 0);
}

static struct pib_bind_mw_wqe *sq_bind_wqe(struct pib_qp *qp, uint32_t index)
{
	return (struct pib_bind_mw_wqe *)sq_wqe(qp, index);
}

/* Memory windows: type 1 through ibv_bind_mw, type 2 and LOCAL_INV posted. */
static void test_mw(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *ibvcq = pib_create_cq(&ctx->ibvctx.context, 7, NULL, 0);
	struct ibv_qp_init_attr attr = {
		.send_cq = ibvcq, .recv_cq = ibvcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1 },
	};
	struct fake_cq dev = { .cq = to_pib_cq(ibvcq) };
	struct ibv_mr mr = { .context = &ctx->ibvctx.context, .pd = pd,
			     .addr = (void *)0x10000, .length = 0x4000,
			     .lkey = 0x1122, .rkey = 0x1122 };
	struct ibv_sge sge = { .addr = 0x10000, .length = 4, .lkey = 0x1122 };
	struct ibv_mw_bind mwb = {
		.wr_id = 0x77, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = &mr, .addr = 0x11000, .length = 0x800,
			       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE |
						  IBV_ACCESS_REMOTE_READ |
						  IBV_ACCESS_LOCAL_WRITE },
	};
	struct ibv_send_wr wr, *bad;
	struct pib_bind_mw_wqe *b;
	struct pib_send_wqe *w;
	struct ibv_mw *mw1, *mw2;
	struct ibv_qp *ibvqp;
	struct pib_qp *qp;
	struct ibv_wc wc[8];
	uint32_t qpn, key;
	int i;

	ibvqp = pib_create_qp(pd, &attr);
	CHECK(ibvqp);
	qp = to_pib_qp(ibvqp);
	qpn = ibvqp->qp_num;

	/* Types 1 and 2 only; the kernel answers with an unbound rkey. */
	alloc_mw_calls = 0;
	errno = 0;
	CHECK(!pib_alloc_mw(pd, (enum ibv_mw_type)3));
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(alloc_mw_calls, 0);
	mw1 = pib_alloc_mw(pd, IBV_MW_TYPE_1);
	mw2 = pib_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw1 && mw2);
	CHECK_EQ(alloc_mw_calls, 2);
	CHECK_EQ(mw1->type, IBV_MW_TYPE_1);

	/*
	 * Type 1: one BIND_MW WQE with the next key byte; the window's rkey
	 * is the new one once it is posted.  LOCAL_WRITE, passed along from
	 * the MR's flags, is dropped: a window grants remote rights only.
	 */
	key = mw1->rkey;
	CHECK_EQ(pib_bind_mw(ibvqp, mw1, &mwb), 0);
	CHECK_EQ(mw1->rkey, (key & ~0xffu) | 0xff);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SQ_DB), (uint64_t)1 << 32 | qpn);
	b = sq_bind_wqe(qp, 0);
	CHECK_EQ(b->opcode, PIB_WQE_BIND_MW);
	CHECK_EQ(b->flags, PIB_WQE_F_SIGNALED);
	CHECK_EQ(b->mw_type, 1);
	CHECK_EQ(le32toh(b->new_rkey), mw1->rkey);
	CHECK_EQ(le64toh(b->wr_id), 0x77);
	CHECK_EQ(le64toh(b->addr), 0x11000);
	CHECK_EQ(le64toh(b->length), 0x800);
	CHECK_EQ(le32toh(b->mw_rkey), key);
	CHECK_EQ(le32toh(b->mr_lkey), 0x1122);
	CHECK_EQ(le32toh(b->access),
		 PIB_ACCESS_REMOTE_WRITE | PIB_ACCESS_REMOTE_READ);
	{
		static const uint8_t zero[20];

		CHECK(b->rsvd0 == 0 && !memcmp(b->rsvd1, zero, sizeof(zero)));
	}

	/* Again: the key byte wraps within the window's index. */
	key = mw1->rkey;
	mwb.send_flags = 0;
	CHECK_EQ(pib_bind_mw(ibvqp, mw1, &mwb), 0);
	CHECK_EQ(mw1->rkey, key & ~0xffu);
	CHECK_EQ(le32toh(sq_bind_wqe(qp, 1)->mw_rkey), key);
	CHECK_EQ(sq_bind_wqe(qp, 1)->flags, 0);

	/* Unbinding a type 1 window: no MR, no range. */
	mwb.bind_info = (struct ibv_mw_bind_info){ 0 };
	CHECK_EQ(pib_bind_mw(ibvqp, mw1, &mwb), 0);
	b = sq_bind_wqe(qp, 2);
	CHECK_EQ(le32toh(b->mr_lkey), 0);
	CHECK_EQ(le64toh(b->length), 0);
	CHECK_EQ(le32toh(b->access), 0);

	/* Zero-based windows are refused, and the rkey stays. */
	key = mw1->rkey;
	mwb.bind_info = (struct ibv_mw_bind_info){
		.mr = &mr, .addr = 0x10000, .length = 8,
		.mw_access_flags = IBV_ACCESS_ZERO_BASED };
	CHECK_EQ(pib_bind_mw(ibvqp, mw1, &mwb), EINVAL);
	CHECK_EQ(mw1->rkey, key);

	/* Type 2, posted: the caller's new rkey, FENCE passed on. */
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0x88;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
	wr.bind_mw.mw = mw2;
	wr.bind_mw.rkey = ibv_inc_rkey(mw2->rkey);
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = &mr, .addr = 0x10000, .length = 0x4000,
		.mw_access_flags = IBV_ACCESS_REMOTE_ATOMIC };
	CHECK_EQ(pib_post_send(ibvqp, &wr, &bad), 0);
	b = sq_bind_wqe(qp, 3);
	CHECK_EQ(b->flags, PIB_WQE_F_SIGNALED | PIB_WQE_F_FENCE);
	CHECK_EQ(b->mw_type, 2);
	CHECK_EQ(le32toh(b->new_rkey), wr.bind_mw.rkey);
	CHECK_EQ(le32toh(b->mw_rkey), mw2->rkey);	/* not changed by post */
	CHECK_EQ(le32toh(b->access), PIB_ACCESS_REMOTE_ATOMIC);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SQ_DB), (uint64_t)4 << 32 | qpn);

	/* The device completes them: BIND_MW, then a bind error. */
	dev_send_cqe(&dev, qpn, 0, 0x77, PIB_CQE_BIND_MW, PIB_WC_SUCCESS);
	dev_send_cqe(&dev, qpn, 3, 0x88, PIB_CQE_BIND_MW, PIB_WC_MW_BIND_ERR);
	CHECK_EQ(pib_poll_cq(ibvcq, 8, wc), 2);
	CHECK_EQ(wc[0].opcode, IBV_WC_BIND_MW);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[1].wr_id, 0x88);
	CHECK_EQ(wc[1].status, IBV_WC_MW_BIND_ERR);
	CHECK_EQ(atomic_load(&qp->sq.ci), 4);

	/* Bad binds: refused, nothing posted. */
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);
	wr.bind_mw.rkey = mw2->rkey + 0x100;		/* another index */
	CHECK_EQ(pib_post_send(ibvqp, &wr, &bad), EINVAL);
	wr.bind_mw.rkey = ibv_inc_rkey(mw2->rkey);
	wr.send_flags = IBV_SEND_INLINE;
	CHECK_EQ(pib_post_send(ibvqp, &wr, &bad), EINVAL);
	wr.send_flags = 0;
	/* Zero-based windows are not implemented, with remote rights or not. */
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_ZERO_BASED |
					       IBV_ACCESS_REMOTE_READ;
	CHECK_EQ(pib_post_send(ibvqp, &wr, &bad), EINVAL);
	wr.bind_mw.bind_info.mw_access_flags = 0;
	wr.bind_mw.bind_info.mr = NULL;			/* a range, no MR */
	CHECK_EQ(pib_post_send(ibvqp, &wr, &bad), EINVAL);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SQ_DB), 0);
	CHECK_EQ(atomic_load(&qp->sq.pi), 4);

	/*
	 * LOCAL_INV: a send WQE with the rkey in imm_inv and no SGEs, whatever
	 * the request's list says.  SEND_WITH_INV keeps its data.
	 */
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0x99;
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = 0xabcdef01;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	CHECK_EQ(pib_post_send(ibvqp, &wr, &bad), 0);
	w = sq_wqe(qp, 4);
	CHECK_EQ(w->opcode, PIB_WQE_LOCAL_INV);
	CHECK_EQ(w->flags, PIB_WQE_F_SIGNALED);
	CHECK_EQ(w->num_sge, 0);
	CHECK_EQ(le32toh(w->imm_inv), 0xabcdef01);
	CHECK_EQ(le64toh(w->wr_id), 0x99);
	for (i = 0; i < 16; i++)
		CHECK_EQ(((uint8_t *)(w + 1))[i], 0);	/* no SGE written */
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.invalidate_rkey = 0x4455;
	CHECK_EQ(pib_post_send(ibvqp, &wr, &bad), 0);
	w = sq_wqe(qp, 5);
	CHECK_EQ(w->opcode, PIB_WQE_SEND_INV);
	CHECK_EQ(w->num_sge, 1);
	CHECK_EQ(le32toh(w->imm_inv), 0x4455);
	CHECK_EQ(le32toh(((struct pib_sge *)(w + 1))->lkey), 0x1122);
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.send_flags = IBV_SEND_INLINE;
	CHECK_EQ(pib_post_send(ibvqp, &wr, &bad), EINVAL);

	dev_send_cqe(&dev, qpn, 4, 0x99, PIB_CQE_LOCAL_INV, PIB_WC_SUCCESS);
	CHECK_EQ(pib_poll_cq(ibvcq, 8, wc), 1);
	CHECK_EQ(wc[0].opcode, IBV_WC_LOCAL_INV);
	CHECK_EQ(wc[0].wr_id, 0x99);

	/* A full SQ: ibv_bind_mw fails and the rkey stays. */
	dev_send_cqe(&dev, qpn, 5, 0, PIB_CQE_SEND, PIB_WC_SUCCESS);
	CHECK_EQ(pib_poll_cq(ibvcq, 8, wc), 1);
	/* The local bits of a bind's access are ignored, not refused. */
	mwb.bind_info = (struct ibv_mw_bind_info){
		.mr = &mr, .addr = 0x10000, .length = 8,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND };
	CHECK_EQ(pib_bind_mw(ibvqp, mw1, &mwb), 0);
	CHECK_EQ(le32toh(sq_bind_wqe(qp, 6)->access), PIB_ACCESS_REMOTE_WRITE);
	mwb.bind_info = (struct ibv_mw_bind_info){ 0 };
	for (i = 0; i < 3; i++)
		CHECK_EQ(pib_bind_mw(ibvqp, mw1, &mwb), 0);
	key = mw1->rkey;
	CHECK_EQ(pib_bind_mw(ibvqp, mw1, &mwb), ENOMEM);
	CHECK_EQ(mw1->rkey, key);

	CHECK_EQ(pib_dealloc_mw(mw1), 0);
	CHECK_EQ(pib_dealloc_mw(mw2), 0);
	CHECK_EQ(pib_destroy_qp(ibvqp), 0);

	/* UC binds and invalidates too; UD does neither; SEND_INV is RC's. */
	attr.qp_type = IBV_QPT_UC;
	ibvqp = pib_create_qp(pd, &attr);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_LOCAL_INV;
	CHECK_EQ(pib_post_send(ibvqp, &wr, &bad), 0);
	wr.opcode = IBV_WR_SEND_WITH_INV;
	CHECK_EQ(pib_post_send(ibvqp, &wr, &bad), EINVAL);
	CHECK_EQ(pib_destroy_qp(ibvqp), 0);
	attr.qp_type = IBV_QPT_UD;
	ibvqp = pib_create_qp(pd, &attr);
	wr.opcode = IBV_WR_LOCAL_INV;
	CHECK_EQ(pib_post_send(ibvqp, &wr, &bad), EINVAL);
	wr.opcode = IBV_WR_BIND_MW;
	CHECK_EQ(pib_post_send(ibvqp, &wr, &bad), EINVAL);
	CHECK_EQ(pib_destroy_qp(ibvqp), 0);

	CHECK_EQ(pib_destroy_cq(ibvcq), 0);
}

/*
 * The extended send interface: ibv_wr_* write the same WQEs as post_send,
 * ibv_wr_complete rings one doorbell for the batch, ibv_wr_abort and a bad
 * request in the batch post nothing.
 */
static void test_qp_ex(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *ibvcq = pib_create_cq(&ctx->ibvctx.context, 6, NULL, 0);
	struct ibv_qp_init_attr_ex attr = {
		.send_cq = ibvcq, .recv_cq = ibvcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 2,
			 .max_recv_sge = 1, .max_inline_data = 32 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
				  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
				  IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				  IBV_QP_EX_WITH_SEND_WITH_IMM |
				  IBV_QP_EX_WITH_ATOMIC_WRITE,
	};
	struct ibv_sge sgl[2] = {
		{ .addr = 0x1000, .length = 8, .lkey = 0x11 },
		{ .addr = 0x2000, .length = 4, .lkey = 0x22 },
	};
	struct ibv_data_buf bufs[2] = {
		{ .addr = "abcd", .length = 4 }, { .addr = "efgh", .length = 4 },
	};
	char big[300] = { 0 };	/* more than any slot holds inline */
	struct pib_send_wqe *w;
	struct pib_sge *ws;
	struct ibv_qp_ex *qpx;
	struct ibv_qp *ibvqp;
	struct pib_qp *qp;
	uint32_t qpn;

	/* UD has no RDMA: asking for it is refused. */
	attr.qp_type = IBV_QPT_UD;
	errno = 0;
	CHECK(!pib_create_qp_ex(&ctx->ibvctx.context, &attr));
	CHECK_EQ(errno, EOPNOTSUPP);
	/* UC has no ATOMIC WRITE (RC only). */
	attr.qp_type = IBV_QPT_UC;
	attr.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_ATOMIC_WRITE;
	errno = 0;
	CHECK(!pib_create_qp_ex(&ctx->ibvctx.context, &attr));
	CHECK_EQ(errno, EOPNOTSUPP);
	attr.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
			      IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
			      IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			      IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_ATOMIC_WRITE;
	attr.qp_type = IBV_QPT_RC;

	ibvqp = pib_create_qp_ex(&ctx->ibvctx.context, &attr);
	CHECK(ibvqp);
	qp = to_pib_qp(ibvqp);
	qpn = ibvqp->qp_num;
	qpx = ibv_qp_to_qp_ex(ibvqp);
	CHECK(qpx && qpx->wr_send && qpx->wr_atomic_fetch_add && qpx->wr_atomic_write);
	CHECK(!qpx->wr_rdma_read && !qpx->wr_set_ud_addr);
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);

	/* A batch of three: SEND (SGE list), inline WRITE, FETCH_ADD. */
	ibv_wr_start(qpx);
	qpx->wr_id = 1;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx);
	ibv_wr_set_sge_list(qpx, 2, sgl);
	qpx->wr_id = 2;
	qpx->wr_flags = IBV_SEND_FENCE;
	ibv_wr_rdma_write(qpx, 0x77, 0xabc000);
	ibv_wr_set_inline_data_list(qpx, 2, bufs);
	qpx->wr_id = 3;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_fetch_add(qpx, 0x88, 0xdef008, 5);
	ibv_wr_set_sge(qpx, 0x33, 0x3000, 8);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SQ_DB), 0);	/* nothing before complete */
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SQ_DB), (uint64_t)3 << 32 | qpn);

	w = sq_wqe(qp, 0);
	CHECK_EQ(w->opcode, PIB_WQE_SEND);
	CHECK_EQ(w->flags, PIB_WQE_F_SIGNALED);
	CHECK_EQ(le64toh(w->wr_id), 1);
	CHECK_EQ(w->num_sge, 2);
	ws = (struct pib_sge *)(w + 1);
	CHECK_EQ(le64toh(ws[1].addr), 0x2000);
	CHECK_EQ(le32toh(ws[1].lkey), 0x22);
	w = sq_wqe(qp, 1);
	CHECK_EQ(w->opcode, PIB_WQE_RDMA_WRITE);
	CHECK_EQ(w->flags, PIB_WQE_F_FENCE | PIB_WQE_F_INLINE);
	CHECK_EQ(le32toh(w->rkey), 0x77);
	CHECK_EQ(le64toh(w->remote_addr), 0xabc000);
	CHECK_EQ(le32toh(w->inline_len), 8);
	CHECK_EQ(w->num_sge, 0);
	CHECK(memcmp(w + 1, "abcdefgh", 8) == 0);
	w = sq_wqe(qp, 2);
	CHECK_EQ(w->opcode, PIB_WQE_ATOMIC_FA);
	CHECK_EQ(le64toh(w->compare_add), 5);
	CHECK_EQ(le64toh(w->remote_addr), 0xdef008);
	CHECK_EQ(w->num_sge, 1);

	/* Aborted: slot 3 written, but the producer index and doorbell stay. */
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);
	ibv_wr_start(qpx);
	qpx->wr_id = 4;
	ibv_wr_send_imm(qpx, htobe32(0x1234));
	ibv_wr_abort(qpx);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SQ_DB), 0);
	CHECK_EQ(atomic_load(&qp->sq.pi), 3);

	/* Bad requests make the whole batch fail, and post nothing. */
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_inline_data(qpx, big, sizeof(big));	/* > max_inline */
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	CHECK_EQ(atomic_load(&qp->sq.pi), 3);
	ibv_wr_start(qpx);
	ibv_wr_atomic_cmp_swp(qpx, 1, 8, 1, 2);
	ibv_wr_set_inline_data(qpx, big, 8);		/* no inline atomics */
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_atomic_write(qpx, 0x99, 0xfed010, "ATOMICWR");
	ibv_wr_set_sge(qpx, 0x33, 0x3000, 8);		/* its data is in the WQE */
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	CHECK_EQ(atomic_load(&qp->sq.pi), 3);
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_sge_list(qpx, qp->sq.max_sge + 1, sgl);	/* too many SGEs */
	ibv_wr_send(qpx);					/* ignored now */
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SQ_DB), 0);
	/* ATOMIC WRITE: the 8 bytes, byte for byte, in the control segment. */
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);
	ibv_wr_start(qpx);
	qpx->wr_id = 5;
	qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_atomic_write(qpx, 0x99, 0xfed010, "ATOMICWR");
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SQ_DB), (uint64_t)4 << 32 | qpn);
	w = sq_wqe(qp, 3);
	CHECK_EQ(w->opcode, PIB_WQE_ATOMIC_WRITE);
	CHECK_EQ(w->flags, PIB_WQE_F_SIGNALED);		/* never inline */
	CHECK_EQ(le64toh(w->wr_id), 5);
	CHECK_EQ(le32toh(w->rkey), 0x99);
	CHECK_EQ(le64toh(w->remote_addr), 0xfed010);
	CHECK(memcmp(&w->compare_add, "ATOMICWR", 8) == 0);
	CHECK_EQ(w->num_sge, 0);
	/* The ring holds 4: a batch that overfills it fails whole. */
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);
	ibv_wr_start(qpx);
	for (int i = 0; i < 4; i++)
		ibv_wr_send(qpx);
	CHECK_EQ(ibv_wr_complete(qpx), ENOMEM);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SQ_DB), 0);

	CHECK_EQ(pib_destroy_qp(ibvqp), 0);
	CHECK_EQ(pib_destroy_cq(ibvcq), 0);
}

/*
 * The extended CQ interface: start/next/end_poll read the same CQEs as
 * poll_cq, the read functions return their fields, the slots go back at
 * end_poll only, and completions of a QP that is gone are skipped.
 */
/*
 * ibv_wr_flush: the placement types and selectivity in imm_inv as the FETH has them, a range's
 * length in compare_add, no SGEs and no setter after it; a request verbs does not define, or a
 * range longer than a message, fails the batch.  UC has no FLUSH.
 */
static void test_qp_ex_flush(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *ibvcq = pib_create_cq(&ctx->ibvctx.context, 6, NULL, 0);
	struct ibv_qp_init_attr_ex attr = {
		.send_cq = ibvcq, .recv_cq = ibvcq, .qp_type = IBV_QPT_UC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_FLUSH,
	};
	struct pib_send_wqe *w;
	struct ibv_qp_ex *qpx;
	struct ibv_qp *ibvqp;
	struct pib_qp *qp;
	uint32_t qpn;

	errno = 0;
	CHECK(!pib_create_qp_ex(&ctx->ibvctx.context, &attr));
	CHECK_EQ(errno, EOPNOTSUPP);
	attr.qp_type = IBV_QPT_RC;
	ibvqp = pib_create_qp_ex(&ctx->ibvctx.context, &attr);
	CHECK(ibvqp);
	qp = to_pib_qp(ibvqp);
	qpn = ibvqp->qp_num;
	qpx = ibv_qp_to_qp_ex(ibvqp);
	CHECK(qpx && qpx->wr_flush);
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);

	ibv_wr_start(qpx);
	qpx->wr_id = 1;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_flush(qpx, 0x99, 0xfed000, 4096, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
	qpx->wr_id = 2;
	qpx->wr_flags = IBV_SEND_FENCE;
	ibv_wr_flush(qpx, 0x98, 0, 12345, IBV_FLUSH_GLOBAL | IBV_FLUSH_PERSISTENT,
		     IBV_FLUSH_MR);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SQ_DB), (uint64_t)2 << 32 | qpn);
	w = sq_wqe(qp, 0);
	CHECK_EQ(w->opcode, PIB_WQE_FLUSH);
	CHECK_EQ(w->flags, PIB_WQE_F_SIGNALED);
	CHECK_EQ(le64toh(w->wr_id), 1);
	CHECK_EQ(le32toh(w->rkey), 0x99);
	CHECK_EQ(le64toh(w->remote_addr), 0xfed000);
	CHECK_EQ(le64toh(w->compare_add), 4096);
	CHECK_EQ(le32toh(w->imm_inv), PIB_FLUSH_GLOBAL);
	CHECK_EQ(w->num_sge, 0);
	w = sq_wqe(qp, 1);
	CHECK_EQ(w->opcode, PIB_WQE_FLUSH);
	CHECK_EQ(w->flags, PIB_WQE_F_FENCE);
	CHECK_EQ(le32toh(w->imm_inv), PIB_FLUSH_GLOBAL | PIB_FLUSH_PERSISTENT |
				      PIB_FLUSH_MR << PIB_FLUSH_SEL_SHIFT);
	CHECK_EQ(le64toh(w->compare_add), 0);	/* the whole MR: no length */

	/* Bad requests fail the batch and post nothing. */
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);
	ibv_wr_start(qpx);
	ibv_wr_flush(qpx, 0x99, 0, 64, 0, IBV_FLUSH_RANGE);		/* no type */
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_flush(qpx, 0x99, 0, 64, 4, IBV_FLUSH_RANGE);		/* unknown type */
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_flush(qpx, 0x99, 0, 64, IBV_FLUSH_GLOBAL, 2);		/* unknown level */
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_flush(qpx, 0x99, 0, (size_t)PIB_MAX_MSG_SZ + 1, IBV_FLUSH_GLOBAL,
		     IBV_FLUSH_RANGE);
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_flush(qpx, 0x99, 0, 64, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
	ibv_wr_set_sge(qpx, 0x33, 0x3000, 8);				/* no data */
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SQ_DB), 0);
	CHECK_EQ(atomic_load(&qp->sq.pi), 2);

	CHECK_EQ(pib_destroy_qp(ibvqp), 0);
	CHECK_EQ(pib_destroy_cq(ibvcq), 0);
}

static void test_cq_ex(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq_init_attr_ex cattr = {
		.cqe = 4, .wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_poll_cq_attr pattr = {};
	struct ibv_qp_init_attr attr = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_cq_ex *cqx;
	struct ibv_qp *ibvqp;
	struct fake_cq dev;
	struct pib_cqe c;
	struct pib_cq *cq;
	uint32_t qpn;

	/* Fields the device cannot fill are refused. */
	cattr.wc_flags = IBV_WC_EX_WITH_FLOW_TAG;
	errno = 0;
	CHECK(!pib_create_cq_ex(&ctx->ibvctx.context, &cattr));
	CHECK_EQ(errno, EOPNOTSUPP);
	cattr.wc_flags = IBV_WC_STANDARD_FLAGS;
	cqx = pib_create_cq_ex(&ctx->ibvctx.context, &cattr);
	CHECK(cqx);
	cq = to_pib_cq(ibv_cq_ex_to_cq(cqx));
	dev = (struct fake_cq){ .cq = cq };
	CHECK_EQ(cq->depth, 8);
	CHECK(cqx->read_byte_len && cqx->read_dlid_path_bits &&
	      !cqx->read_completion_ts);

	attr.send_cq = attr.recv_cq = ibv_cq_ex_to_cq(cqx);
	ibvqp = pib_create_qp(pd, &attr);
	CHECK(ibvqp);
	qpn = ibvqp->qp_num;

	CHECK_EQ(ibv_start_poll(cqx, &pattr), ENOENT);
	/* A UD receive with immediate data and a GRH, then a flushed one. */
	c = (struct pib_cqe){
		.wr_id = htole64(0x51), .byte_len = htole32(140),
		.imm_inv = htobe32(0xfeed), .qpn = htole32(qpn),
		.src_qp = htole32(0x3000077), .slid = htole16(9),
		.opcode = PIB_CQE_RECV, .flags = PIB_CQE_F_IMM | PIB_CQE_F_GRH,
		.sl = 3,
	};
	dev_write_cqe(&dev, &c);
	dev_recv_cqe(&dev, qpn, 1, 0x52, PIB_WC_WR_FLUSH_ERR);
	/* A completion of a QP that does not exist: skipped. */
	dev_send_cqe(&dev, 0x777, 0, 0x53, PIB_CQE_SEND, PIB_WC_SUCCESS);

	CHECK_EQ(ibv_start_poll(cqx, &pattr), 0);
	CHECK_EQ(cqx->wr_id, 0x51);
	CHECK_EQ(cqx->status, IBV_WC_SUCCESS);
	CHECK_EQ(ibv_wc_read_opcode(cqx), IBV_WC_RECV);
	CHECK_EQ(ibv_wc_read_byte_len(cqx), 140);
	CHECK_EQ(be32toh(ibv_wc_read_imm_data(cqx)), 0xfeed);
	CHECK_EQ(ibv_wc_read_qp_num(cqx), qpn);
	CHECK_EQ(ibv_wc_read_src_qp(cqx), 0x77);
	CHECK_EQ(ibv_wc_read_dlid_path_bits(cqx), 3);
	CHECK_EQ(ibv_wc_read_slid(cqx), 9);
	CHECK_EQ(ibv_wc_read_sl(cqx), 3);
	CHECK_EQ(ibv_wc_read_wc_flags(cqx), IBV_WC_WITH_IMM | IBV_WC_GRH);
	/* Read, but not given back before end_poll. */
	CHECK_EQ(le32toh(*cq->ci_record), 0);
	CHECK_EQ(ibv_next_poll(cqx), 0);
	CHECK_EQ(cqx->wr_id, 0x52);
	CHECK_EQ(cqx->status, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(ibv_next_poll(cqx), ENOENT);
	ibv_end_poll(cqx);
	CHECK_EQ(le32toh(*cq->ci_record), 3);
	CHECK_EQ(atomic_load(&to_pib_qp(ibvqp)->rq.ci), 0);	/* nothing posted */

	/* poll_cq on the same CQ still works. */
	dev_send_cqe(&dev, qpn, 0, 0x54, PIB_CQE_SEND, PIB_WC_SUCCESS);
	{
		struct ibv_wc wc;

		CHECK_EQ(pib_poll_cq(ibv_cq_ex_to_cq(cqx), 1, &wc), 1);
		CHECK_EQ(wc.wr_id, 0x54);
	}
	CHECK_EQ(pib_destroy_qp(ibvqp), 0);
	CHECK_EQ(pib_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
}

/*
 * The device clock and completion timestamps: without the clock (hca_core_clock 0) neither
 * is offered; with it, ibv_query_rt_values_ex reads the clock's halves from the UAR page, and
 * a CQ created with the timestamp wc flag has 64-byte CQEs whose timestamps
 * ibv_wc_read_completion_ts returns, through poll and resize; the wall-clock flag is refused.
 */
static void test_clock(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq_init_attr_ex cattr = {
		.cqe = 4,
		.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
	};
	struct ibv_qp_init_attr attr = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 2, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	struct ibv_poll_cq_attr pattr = {};
	uint8_t *uar = ctx->uar;
	struct ibv_cq_ex *cqx;
	struct ibv_qp *ibvqp;
	struct fake_cq dev;
	struct pib_cq *cq;
	struct ibv_wc wc;
	uint32_t qpn, i;

	/* No clock: neither the clock nor timestamps. */
	ctx->clock = false;
	CHECK_EQ(pib_query_rt_values(&ctx->ibvctx.context, &v), EOPNOTSUPP);
	errno = 0;
	CHECK(!pib_create_cq_ex(&ctx->ibvctx.context, &cattr));
	CHECK_EQ(errno, EOPNOTSUPP);

	/* The clock: HI and LO put together; only the raw clock is offered. */
	ctx->clock = true;
	*(uint32_t *)(uar + PIB_UAR_CLOCK_HI) = htole32(0x12);
	*(uint32_t *)(uar + PIB_UAR_CLOCK_LO) = htole32(0x89abcdef);
	v = (struct ibv_values_ex){ .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	CHECK_EQ(pib_query_rt_values(&ctx->ibvctx.context, &v), 0);
	CHECK_EQ(v.comp_mask, IBV_VALUES_MASK_RAW_CLOCK);
	CHECK_EQ(v.raw_clock.tv_sec, 0);
	CHECK_EQ(v.raw_clock.tv_nsec, 0x1289abcdefull);
	v = (struct ibv_values_ex){ .comp_mask = IBV_VALUES_MASK_RAW_CLOCK | (1u << 1) };
	CHECK_EQ(pib_query_rt_values(&ctx->ibvctx.context, &v), EINVAL);
	v = (struct ibv_values_ex){ .comp_mask = 0 };
	CHECK_EQ(pib_query_rt_values(&ctx->ibvctx.context, &v), 0);
	CHECK_EQ(v.comp_mask, 0);
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);

	/* Wall-clock timestamps alone: 64-byte slots too, the CQE's real-time stamp. */
	cattr.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
	cqx = pib_create_cq_ex(&ctx->ibvctx.context, &cattr);
	CHECK(cqx);
	cq = to_pib_cq(ibv_cq_ex_to_cq(cqx));
	CHECK_EQ(cq->cqe_log, PIB_CQE_TS_STRIDE_LOG);
	CHECK(!cqx->read_completion_ts && cqx->read_completion_wallclock_ns);
	dev = (struct fake_cq){ .cq = cq };
	attr.send_cq = attr.recv_cq = ibv_cq_ex_to_cq(cqx);
	ibvqp = pib_create_qp(pd, &attr);
	CHECK(ibvqp);
	dev_write_cqe_ts(&dev, &(struct pib_cqe){
				.wr_id = htole64(0x70), .qpn = htole32(ibvqp->qp_num),
				.opcode = PIB_CQE_SEND },
			 777);
	CHECK_EQ(ibv_start_poll(cqx, &pattr), 0);
	CHECK_EQ(cqx->wr_id, 0x70);
	CHECK_EQ(ibv_wc_read_completion_wallclock_ns(cqx), FAKE_EPOCH_NS + 777);
	ibv_end_poll(cqx);
	CHECK_EQ(pib_destroy_qp(ibvqp), 0);
	CHECK_EQ(pib_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);

	/* A timestamped CQ of 4 (depth 8): 64-byte slots. */
	cattr.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	cqx = pib_create_cq_ex(&ctx->ibvctx.context, &cattr);
	CHECK(cqx);
	cq = to_pib_cq(ibv_cq_ex_to_cq(cqx));
	CHECK_EQ(cq->cqe_log, PIB_CQE_TS_STRIDE_LOG);
	CHECK_EQ(cq->buf_size, 2 * PIB_PAGE_SIZE);
	CHECK(cqx->read_completion_ts && !cqx->read_completion_wallclock_ns);
	dev = (struct fake_cq){ .cq = cq };
	resize_dev = &dev;
	attr.send_cq = attr.recv_cq = ibv_cq_ex_to_cq(cqx);
	ibvqp = pib_create_qp(pd, &attr);
	CHECK(ibvqp);
	qpn = ibvqp->qp_num;

	/* Three completions at 1000, 2000, 3000: two read through the ex interface. */
	for (i = 0; i < 3; i++)
		dev_write_cqe_ts(&dev, &(struct pib_cqe){
					.wr_id = htole64(0x80 + i), .qpn = htole32(qpn),
					.opcode = PIB_CQE_SEND,
					.wqe_index = htole16(i) },
				 1000 * (i + 1));
	CHECK_EQ(ibv_start_poll(cqx, &pattr), 0);
	CHECK_EQ(cqx->wr_id, 0x80);
	CHECK_EQ(ibv_wc_read_completion_ts(cqx), 1000);
	CHECK_EQ(cq->cur_wallclock, FAKE_EPOCH_NS + 1000);
	CHECK_EQ(ibv_next_poll(cqx), 0);
	CHECK_EQ(cqx->wr_id, 0x81);
	CHECK_EQ(ibv_wc_read_completion_ts(cqx), 2000);
	ibv_end_poll(cqx);
	/* Resized to 100 (depth 128, 8 KiB of 64-byte CQEs): the unread one keeps its timestamp. */
	CHECK_EQ(pib_resize_cq(ibv_cq_ex_to_cq(cqx), 100), 0);
	CHECK_EQ(cq->depth, 128);
	CHECK_EQ(cq->cqe_log, PIB_CQE_TS_STRIDE_LOG);
	CHECK_EQ(cq->buf_size, 3 * PIB_PAGE_SIZE);
	dev_write_cqe_ts(&dev, &(struct pib_cqe){
				.wr_id = htole64(0x83), .qpn = htole32(qpn),
				.opcode = PIB_CQE_SEND, .wqe_index = htole16(3) },
			 4000);
	CHECK_EQ(ibv_start_poll(cqx, &pattr), 0);
	CHECK_EQ(cqx->wr_id, 0x82);
	CHECK_EQ(ibv_wc_read_completion_ts(cqx), 3000);
	CHECK_EQ(ibv_next_poll(cqx), 0);
	CHECK_EQ(cqx->wr_id, 0x83);
	CHECK_EQ(ibv_wc_read_completion_ts(cqx), 4000);
	CHECK_EQ(ibv_next_poll(cqx), ENOENT);
	ibv_end_poll(cqx);
	/* poll_cq reads the 64-byte slots too. */
	dev_write_cqe_ts(&dev, &(struct pib_cqe){
				.wr_id = htole64(0x84), .qpn = htole32(qpn),
				.opcode = PIB_CQE_SEND, .wqe_index = htole16(4) },
			 5000);
	CHECK_EQ(pib_poll_cq(ibv_cq_ex_to_cq(cqx), 1, &wc), 1);
	CHECK_EQ(wc.wr_id, 0x84);
	CHECK_EQ(le32toh(*cq->ci_record), 3);

	CHECK_EQ(pib_destroy_qp(ibvqp), 0);
	CHECK_EQ(pib_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	resize_dev = NULL;
	ctx->clock = false;
}

/* A parent domain's allocator: what it was asked for, and what it got back. */
static int pad_allocs, pad_frees;
static uint64_t pad_types;

static void *pad_alloc(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t resource_type)
{
	void *p;

	CHECK(pd_context == &pad_allocs);
	CHECK_EQ(alignment, PIB_PAGE_SIZE);
	pad_types |= 1ull << (resource_type & 63);
	/* The CQ's ring is left to the provider. */
	if (resource_type == PIB_RES_TYPE_CQ)
		return IBV_ALLOCATOR_USE_DEFAULT;
	if (posix_memalign(&p, alignment, size))
		return NULL;
	memset(p, 0xa5, size);		/* the provider must zero it */
	pad_allocs++;
	return p;
}

static void pad_free(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t resource_type)
{
	CHECK(resource_type != PIB_RES_TYPE_CQ);
	pad_frees++;
	free(ptr);
}

/*
 * Thread and parent domains: a parent domain is the PD to the kernel (same
 * handle), its allocator gives the QP's and SRQ's rings (zeroed, page
 * aligned) and gets them back, and nothing goes before what uses it.
 */
static void test_parent_domain(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_td_init_attr tattr = {};
	struct ibv_parent_domain_init_attr pattr = {
		.pd = pd, .comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
				       IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
		.alloc = pad_alloc, .free = pad_free, .pd_context = &pad_allocs,
	};
	struct ibv_qp_init_attr_ex qattr = {
		.qp_type = IBV_QPT_RC, .comp_mask = IBV_QP_INIT_ATTR_PD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_cq_init_attr_ex cattr = {
		.cqe = 8, .wc_flags = IBV_WC_STANDARD_FLAGS,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
	};
	struct ibv_srq_init_attr sattr = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_pd *pad;
	struct ibv_td *td;
	struct ibv_cq_ex *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;

	pd->handle = 0x5150;
	tattr.comp_mask = 1;
	CHECK(!pib_alloc_td(&ctx->ibvctx.context, &tattr));
	tattr.comp_mask = 0;
	td = pib_alloc_td(&ctx->ibvctx.context, &tattr);
	CHECK(td);
	pattr.td = td;
	pad = pib_alloc_parent_domain(&ctx->ibvctx.context, &pattr);
	CHECK(pad);
	CHECK_EQ(pad->handle, 0x5150);
	CHECK_EQ(pib_dealloc_pd(pd), EBUSY);
	CHECK_EQ(pib_dealloc_td(td), EBUSY);

	/* A CQ with the parent domain; its allocator declines the ring. */
	cattr.parent_domain = pad;
	cq = pib_create_cq_ex(&ctx->ibvctx.context, &cattr);
	CHECK(cq);
	cattr.parent_domain = pd;	/* a plain PD is no parent domain */
	CHECK(!pib_create_cq_ex(&ctx->ibvctx.context, &cattr));

	qattr.pd = pad;
	qattr.send_cq = qattr.recv_cq = ibv_cq_ex_to_cq(cq);
	qp = pib_create_qp_ex(&ctx->ibvctx.context, &qattr);
	CHECK(qp);
	CHECK_EQ(pad_allocs, 2);		/* SQ and RQ */
	CHECK(to_pib_qp(qp)->sq.src.custom && to_pib_qp(qp)->rq.src.custom);
	CHECK_EQ(((uint8_t *)to_pib_qp(qp)->sq.buf)[100], 0);
	srq = pib_create_srq(pad, &sattr);
	CHECK(srq);
	CHECK_EQ(pad_allocs, 3);
	CHECK_EQ(pad_types, 1ull << 1 | 1ull << 2 | 1ull << 3 | 1ull << 4);
	CHECK_EQ(pib_dealloc_pd(pad), EBUSY);

	CHECK_EQ(pib_destroy_qp(qp), 0);
	CHECK_EQ(pib_destroy_srq(srq), 0);
	CHECK_EQ(pad_frees, 3);
	CHECK_EQ(pib_dealloc_pd(pad), EBUSY);	/* the CQ still uses it */
	CHECK_EQ(pib_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
	CHECK_EQ(pib_dealloc_pd(pad), 0);
	CHECK_EQ(pib_dealloc_td(td), 0);
}

/*
 * Resizing a CQ: the CQEs not yet read move with it (as the device moves
 * them), polling goes on at the same index in the new ring, a resize that
 * cannot hold them fails and changes nothing.  Resizing an SRQ: the WQEs not
 * yet retired are copied to their slots in the new ring before the command.
 */
/*
 * Receive doorbell records (PIB_IBV_UCTX_F_RECV_DBREC): the RQ's and the SRQ's
 * rings get one more page, whose record post_recv writes instead of ringing;
 * the doorbell is rung too only while the device asks for it (RING, set when
 * the QP enters ERR).  A resized SRQ has the index in its new ring's record.
 */
static void test_recv_dbrec(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *ibvcq = pib_create_cq(&ctx->ibvctx.context, 8, NULL, 0);
	struct ibv_qp_init_attr attr = {
		.send_cq = ibvcq, .recv_cq = ibvcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 8, .max_recv_sge = 1 },
	};
	struct ibv_srq_init_attr sattr = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_sge sge = { .addr = 0x1000, .length = 8, .lkey = 1 };
	struct ibv_recv_wr rwr[3], *rbad;
	struct ibv_srq_attr mattr = { .max_wr = 16 };
	struct pib_recv_dbrec *rec;
	struct ibv_qp *ibvqp, *ibvsqp;
	struct ibv_srq *ibvsrq;
	struct pib_qp *qp;
	struct pib_srq *srq;
	uint32_t qpn, i;

	memset(rwr, 0, sizeof(rwr));
	for (i = 0; i < 3; i++) {
		rwr[i].wr_id = 0x70 + i;
		rwr[i].sg_list = &sge;
		rwr[i].num_sge = 1;
		rwr[i].next = i < 2 ? &rwr[i + 1] : NULL;
	}
	ctx->recv_dbrec = true;

	/* The RQ: the record's page after the slots, announced to the kernel. */
	ibvqp = pib_create_qp(pd, &attr);
	CHECK(ibvqp);
	qp = to_pib_qp(ibvqp);
	qpn = ibvqp->qp_num;
	CHECK_EQ(last_create_qp.comp_mask, PIB_IBV_CREATE_QP_MASK_RQ_DBREC);
	CHECK_EQ(qp->rq.buf_size, (size_t)2 * PIB_PAGE_SIZE);	/* 8 x 32 B, the record */
	rec = qp->rq.dbrec;
	CHECK(rec == (void *)((uint8_t *)qp->rq.buf + PIB_PAGE_SIZE));
	/* The SQ has none. */
	CHECK(!qp->sq.dbrec);

	/* Posting writes the record, and no doorbell. */
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);
	CHECK_EQ(pib_post_recv(ibvqp, rwr, &rbad), 0);
	CHECK_EQ(le32toh(rec->pi), 3);
	CHECK_EQ(uar_read(ctx, PIB_UAR_RQ_DB), 0);
	CHECK_EQ(le64toh(rq_wqe(qp, 2)->wr_id), 0x72);
	/* The device asks for doorbells (the QP went to ERR): both. */
	rec->flags = htole32(PIB_DBREC_F_RING);
	rwr[0].next = NULL;
	CHECK_EQ(pib_post_recv(ibvqp, rwr, &rbad), 0);
	CHECK_EQ(le32toh(rec->pi), 4);
	CHECK_EQ(uar_read(ctx, PIB_UAR_RQ_DB), (uint64_t)4 << 32 | qpn);
	rwr[0].next = &rwr[1];

	/* A QP on an SRQ has no RQ, so no record either. */
	ibvsrq = pib_create_srq(pd, &sattr);
	CHECK(ibvsrq);
	srq = to_pib_srq(ibvsrq);
	CHECK_EQ(last_create_srq.comp_mask, PIB_IBV_CREATE_SRQ_MASK_DBREC);
	attr.srq = ibvsrq;
	ibvsqp = pib_create_qp(pd, &attr);
	CHECK(ibvsqp);
	CHECK_EQ(last_create_qp.comp_mask, 0);
	CHECK(!to_pib_qp(ibvsqp)->rq.dbrec);

	/* The SRQ: its record, no doorbell. */
	CHECK(srq->wq.dbrec == (void *)((uint8_t *)srq->wq.buf + PIB_PAGE_SIZE));
	CHECK_EQ(pib_post_srq_recv(ibvsrq, rwr, &rbad), 0);
	CHECK_EQ(le32toh(srq->wq.dbrec->pi), 3);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SRQ_DB), 0);
	/* Resized: the new ring has a record too, with the index in it. */
	CHECK_EQ(pib_modify_srq(ibvsrq, &mattr, IBV_SRQ_MAX_WR), 0);
	CHECK_EQ(last_modify_srq.buf_size, (uint32_t)2 * PIB_PAGE_SIZE);
	CHECK(srq->wq.depth >= 16 && srq->wq.depth <= 64);	/* 2 pages: the slots, the record */
	CHECK(srq->wq.dbrec == (void *)((uint8_t *)srq->wq.buf + PIB_PAGE_SIZE));
	CHECK_EQ(le32toh(srq->wq.dbrec->pi), 3);
	rwr[0].next = NULL;
	CHECK_EQ(pib_post_srq_recv(ibvsrq, rwr, &rbad), 0);
	CHECK_EQ(le32toh(srq->wq.dbrec->pi), 4);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SRQ_DB), 0);

	CHECK_EQ(pib_destroy_qp(ibvsqp), 0);
	CHECK_EQ(pib_destroy_qp(ibvqp), 0);
	CHECK_EQ(pib_destroy_srq(ibvsrq), 0);
	CHECK_EQ(pib_destroy_cq(ibvcq), 0);
	ctx->recv_dbrec = false;
}

static void test_resize(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *ibvcq = pib_create_cq(&ctx->ibvctx.context, 6, NULL, 0);
	struct ibv_qp_init_attr attr = {
		.send_cq = ibvcq, .recv_cq = ibvcq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_srq_init_attr sattr = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct pib_cq *cq = to_pib_cq(ibvcq);
	struct fake_cq dev = { .cq = cq };
	struct ibv_recv_wr rwr[6], *rbad;
	struct ibv_srq_attr mattr;
	struct ibv_sge sge = { .addr = 0x1000, .length = 8, .lkey = 1 };
	struct ibv_wc wc[8];
	struct ibv_qp *ibvqp;
	struct ibv_srq *ibvsrq;
	struct pib_srq *srq;
	uint32_t qpn, i;

	resize_dev = &dev;
	ibvqp = pib_create_qp(pd, &attr);
	qpn = ibvqp->qp_num;
	for (i = 0; i < 5; i++)
		dev_send_cqe(&dev, qpn, 0, 0x60 + i, PIB_CQE_SEND, PIB_WC_SUCCESS);
	CHECK_EQ(pib_poll_cq(ibvcq, 2, wc), 2);
	/* Three unread do not fit a CQ of 1 (depth 2). */
	CHECK_EQ(pib_resize_cq(ibvcq, 1), EINVAL);
	CHECK_EQ(cq->depth, 8);
	CHECK_EQ(pib_resize_cq(ibvcq, 0), EINVAL);
	CHECK_EQ(pib_resize_cq(ibvcq, ctx->max_cqe + 1), EINVAL);
	/* Grow: the three unread come first, then new ones, then a wrap. */
	CHECK_EQ(pib_resize_cq(ibvcq, 20), 0);
	CHECK_EQ(cq->depth, 32);
	CHECK_EQ(ibvcq->cqe, 31);
	CHECK_EQ(cq->ci, 0);
	for (i = 5; i < 34; i++)
		dev_send_cqe(&dev, qpn, 0, 0x60 + i, PIB_CQE_SEND, PIB_WC_SUCCESS);
	for (i = 2; i < 34; i++) {
		CHECK_EQ(pib_poll_cq(ibvcq, 1, wc), 1);
		CHECK_EQ(wc[0].wr_id, 0x60 + i);
	}
	CHECK_EQ(pib_poll_cq(ibvcq, 1, wc), 0);
	CHECK_EQ(le32toh(*cq->ci_record), 32);
	/* Shrink with nothing unread. */
	CHECK_EQ(pib_resize_cq(ibvcq, 1), 0);
	CHECK_EQ(cq->depth, 2);
	dev_send_cqe(&dev, qpn, 0, 0x99, PIB_CQE_SEND, PIB_WC_SUCCESS);
	CHECK_EQ(pib_poll_cq(ibvcq, 8, wc), 1);
	CHECK_EQ(wc[0].wr_id, 0x99);
	CHECK_EQ(pib_destroy_qp(ibvqp), 0);

	/* SRQ of 4 (depth 8): five posted, one retired by a completion. */
	ibvsrq = pib_create_srq(pd, &sattr);
	srq = to_pib_srq(ibvsrq);
	CHECK_EQ(srq->wq.depth, 8);
	attr.srq = ibvsrq;
	ibvqp = pib_create_qp(pd, &attr);
	qpn = ibvqp->qp_num;
	for (i = 0; i < 6; i++)
		rwr[i] = (struct ibv_recv_wr){ .wr_id = 0x70 + i,
					       .sg_list = &sge, .num_sge = 1,
					       .next = i < 4 ? &rwr[i + 1] : NULL };
	CHECK_EQ(pib_post_srq_recv(ibvsrq, rwr, &rbad), 0);
	dev_recv_cqe(&dev, qpn, 0, 0x70, PIB_WC_SUCCESS);
	CHECK_EQ(pib_poll_cq(ibvcq, 8, wc), 1);
	CHECK_EQ(atomic_load(&srq->wq.ci), 1);
	/* Grow to 20 (depth 32): the four outstanding go to their slots. */
	mattr = (struct ibv_srq_attr){ .max_wr = 20 };
	CHECK_EQ(pib_modify_srq(ibvsrq, &mattr, IBV_SRQ_MAX_WR), 0);
	CHECK_EQ(srq->wq.depth, 32);
	CHECK_EQ(last_modify_srq.depth, 32);
	CHECK(last_modify_srq.buf_addr == (uintptr_t)srq->wq.buf);
	CHECK_EQ(last_modify_srq.buf_size, PIB_PAGE_SIZE);	/* 32 slots of 32 */
	for (i = 1; i < 5; i++)
		CHECK_EQ(le64toh(srq_wqe(srq, i)->wr_id), 0x70 + i);
	/* Posting goes on at index 5. */
	rwr[5].next = NULL;
	memset(ctx->uar, 0, PIB_UAR_PAGE_SIZE);
	CHECK_EQ(pib_post_srq_recv(ibvsrq, &rwr[5], &rbad), 0);
	CHECK_EQ(uar_read(ctx, PIB_UAR_SRQ_DB), (uint64_t)6 << 32 | srq->srqn);
	CHECK_EQ(le64toh(srq_wqe(srq, 5)->wr_id), 0x75);
	/* Too small for the five outstanding, or a limit not below: EINVAL. */
	mattr = (struct ibv_srq_attr){ .max_wr = 2 };
	CHECK_EQ(pib_modify_srq(ibvsrq, &mattr, IBV_SRQ_MAX_WR), EINVAL);
	mattr = (struct ibv_srq_attr){ .max_wr = 6, .srq_limit = 8 };
	CHECK_EQ(pib_modify_srq(ibvsrq, &mattr, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT),
		 EINVAL);
	CHECK_EQ(srq->wq.depth, 32);

	CHECK_EQ(pib_destroy_qp(ibvqp), 0);
	CHECK_EQ(pib_destroy_srq(ibvsrq), 0);
	CHECK_EQ(pib_destroy_cq(ibvcq), 0);
	resize_dev = NULL;
}

/*
 * A QP in RESET takes no work requests (EINVAL, bad_wr the first), and the move
 * to RESET drops its completions still unread in the CQ (the flush CQEs of its
 * time in ERR), and only its own: the next poll sees the other QP's.
 */
static void test_qp_reset(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *ibvcq = pib_create_cq(&ctx->ibvctx.context, 8, NULL, 0);
	struct ibv_qp_init_attr attr = {
		.send_cq = ibvcq, .recv_cq = ibvcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct pib_cq *cq = to_pib_cq(ibvcq);
	struct fake_cq dev = { .cq = cq };
	struct ibv_qp *a = pib_create_qp(pd, &attr), *b = pib_create_qp(pd, &attr);
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct ibv_send_wr sw = { .wr_id = 1, .opcode = IBV_WR_SEND }, *bad_s = NULL;
	struct ibv_recv_wr rw = { .wr_id = 2 }, *bad_r = NULL;
	struct ibv_wc wc[4];

	CHECK(a && b);
	dev_recv_cqe(&dev, a->qp_num, 0, 10, PIB_WC_WR_FLUSH_ERR);
	dev_send_cqe(&dev, b->qp_num, 0, 20, PIB_CQE_SEND, PIB_WC_SUCCESS);
	dev_send_cqe(&dev, a->qp_num, 0, 11, PIB_CQE_SEND, PIB_WC_WR_FLUSH_ERR);
	CHECK_EQ(pib_modify_qp(a, &reset, IBV_QP_STATE), 0);
	a->state = IBV_QPS_RESET;	/* as ibv_modify_qp() records it */
	CHECK_EQ(pib_poll_cq(ibvcq, 4, wc), 1);
	CHECK_EQ(wc[0].wr_id, 20);
	CHECK_EQ(wc[0].qp_num, b->qp_num);
	CHECK_EQ(cq->ci, dev.pi);

	CHECK_EQ(pib_post_send(a, &sw, &bad_s), EINVAL);
	CHECK(bad_s == &sw);
	CHECK_EQ(pib_post_recv(a, &rw, &bad_r), EINVAL);
	CHECK(bad_r == &rw);
	CHECK_EQ(atomic_load(&to_pib_qp(a)->sq.pi), 0);
	CHECK_EQ(atomic_load(&to_pib_qp(a)->rq.pi), 0);
	/* Out of RESET, it posts again. */
	a->state = IBV_QPS_INIT;
	CHECK_EQ(pib_post_recv(a, &rw, &bad_r), 0);
	CHECK_EQ(atomic_load(&to_pib_qp(a)->rq.pi), 1);

	CHECK_EQ(pib_destroy_qp(a), 0);
	CHECK_EQ(pib_destroy_qp(b), 0);

	/* create_flags 0 under IBV_QP_INIT_ATTR_CREATE_FLAGS, as rdma-core's tests ask. */
	{
		struct ibv_qp_init_attr_ex ax = {
			.qp_type = IBV_QPT_RC, .send_cq = ibvcq, .recv_cq = ibvcq, .pd = pd,
			.cap = attr.cap,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
		};
		struct ibv_qp *c = pib_create_qp_ex(&ctx->ibvctx.context, &ax);

		CHECK(c);
		CHECK_EQ(pib_destroy_qp(c), 0);
	}
	CHECK_EQ(pib_destroy_cq(ibvcq), 0);
}

/*
 * XRC: an XRC SRQ (its number, the SRQN table), the receive completions of XRC target QPs this
 * process does not know (PIB_CQE_F_XRC names the SRQ), an initiator's WQEs naming the remote
 * SRQ (legacy and ibv_qp_ex), a target QP with no rings.
 */
static void test_xrc(struct pib_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *ibvcq = pib_create_cq(&ctx->ibvctx.context, 7, NULL, 0);
	struct fake_cq dev = { .cq = to_pib_cq(ibvcq) };
	struct verbs_xrcd vx = { .xrcd = { .context = &ctx->ibvctx.context } };
	struct ibv_srq_init_attr_ex sx = {
		.attr = { .max_wr = 3, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = &vx.xrcd, .cq = ibvcq,
	};
	struct ibv_srq_init_attr plain = { .attr = { .max_wr = 1, .max_sge = 1 } };
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_XRC_SEND, .send_cq = ibvcq, .recv_cq = ibvcq,
		.cap = { .max_send_wr = 4, .max_send_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd, .send_ops_flags = IBV_QP_EX_WITH_SEND,
	};
	struct ibv_sge sge = { .addr = 0x1000, .length = 8, .lkey = 0x11 };
	struct ibv_recv_wr rwr = { .wr_id = 500, .sg_list = &sge, .num_sge = 1 }, *rbad;
	struct ibv_send_wr swr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_SEND }, *sbad;
	struct ibv_srq *ibvsrq, *ibvplain;
	struct ibv_qp *ini, *tgt;
	struct ibv_qp_ex *qpx;
	struct pib_srq *srq;
	struct pib_cqe cqe;
	struct ibv_wc wc[4];
	uint32_t num;

	/* An XRC SRQ needs its domain and CQ; tag matching is not there. */
	sx.comp_mask &= ~IBV_SRQ_INIT_ATTR_CQ;
	errno = 0;
	CHECK(!pib_create_srq_ex(&ctx->ibvctx.context, &sx));
	CHECK_EQ(errno, EINVAL);
	sx.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	sx.srq_type = IBV_SRQT_TM;
	errno = 0;
	CHECK(!pib_create_srq_ex(&ctx->ibvctx.context, &sx));
	CHECK_EQ(errno, EOPNOTSUPP);
	sx.srq_type = IBV_SRQT_XRC;
	ibvsrq = pib_create_srq_ex(&ctx->ibvctx.context, &sx);
	CHECK(ibvsrq);
	srq = to_pib_srq(ibvsrq);
	CHECK_EQ(pib_get_srq_num(ibvsrq, &num), 0);
	CHECK_EQ(num, srq->srqn);
	CHECK(ctx->xsrq_table[num] == srq);
	ibvplain = pib_create_srq(pd, &plain);
	CHECK(ibvplain);
	CHECK_EQ(pib_get_srq_num(ibvplain, &num), EOPNOTSUPP);
	CHECK_EQ(pib_destroy_srq(ibvplain), 0);

	/*
	 * Two receives; a target QP of another process (a QPN unknown here) took the first: the
	 * completion names the SRQ, whose slot is free again.  One naming no SRQ of ours is
	 * delivered all the same, freeing nothing.
	 */
	rwr.next = NULL;
	CHECK_EQ(pib_post_srq_recv(ibvsrq, &rwr, &rbad), 0);
	rwr.wr_id = 501;
	CHECK_EQ(pib_post_srq_recv(ibvsrq, &rwr, &rbad), 0);
	cqe = (struct pib_cqe){
		.wr_id = htole64(500), .byte_len = htole32(8), .qpn = htole32(0x4242),
		.src_qp = htole32(srq->srqn), .opcode = PIB_CQE_RECV,
		.flags = PIB_CQE_F_XRC,
	};
	dev_write_cqe(&dev, &cqe);
	CHECK_EQ(pib_poll_cq(ibvcq, 4, wc), 1);
	CHECK_EQ(wc[0].wr_id, 500);
	CHECK_EQ(wc[0].qp_num, 0x4242);
	CHECK_EQ(wc[0].src_qp, 0);
	CHECK_EQ(wc[0].byte_len, 8);
	CHECK_EQ(atomic_load(&srq->wq.ci), 1);
	cqe.wr_id = htole64(501);
	cqe.src_qp = htole32(srq->srqn + 100);
	dev_write_cqe(&dev, &cqe);
	CHECK_EQ(pib_poll_cq(ibvcq, 4, wc), 1);
	CHECK_EQ(wc[0].wr_id, 501);
	CHECK_EQ(atomic_load(&srq->wq.ci), 1);

	/* An initiator: the receive CQ it was given goes unused, no RQ. */
	ini = pib_create_qp_ex(&ctx->ibvctx.context, &qa);
	CHECK(ini);
	CHECK_EQ(to_pib_qp(ini)->rq.depth, 0);
	CHECK(!to_pib_qp(ini)->srq);
	CHECK_EQ(last_create_qp.rq_depth, 0);
	swr.qp_type.xrc.remote_srqn = 0x123456;
	CHECK_EQ(pib_post_send(ini, &swr, &sbad), 0);
	CHECK_EQ(sq_wqe(to_pib_qp(ini), 0)->opcode, PIB_WQE_SEND);
	CHECK_EQ(le32toh(sq_wqe(to_pib_qp(ini), 0)->xrc_srqn), 0x123456);
	qpx = ibv_qp_to_qp_ex(ini);
	CHECK(qpx && qpx->wr_set_xrc_srqn && !qpx->wr_set_ud_addr);
	ibv_wr_start(qpx);
	qpx->wr_id = 8;
	ibv_wr_send(qpx);
	ibv_wr_set_xrc_srqn(qpx, 0x654321);
	ibv_wr_set_sge(qpx, 0x11, 0x1000, 8);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(le32toh(sq_wqe(to_pib_qp(ini), 1)->xrc_srqn), 0x654321);
	ibv_wr_start(qpx);
	qpx->wr_id = 9;
	ibv_wr_send(qpx);
	ibv_wr_set_xrc_srqn(qpx, 0x1000000);	/* beyond 24 bits */
	ibv_wr_set_sge(qpx, 0x11, 0x1000, 8);
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	CHECK_EQ(pib_destroy_qp(ini), 0);

	/* A target: its domain alone, no rings; without the domain, refused. */
	qa = (struct ibv_qp_init_attr_ex){
		.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD,
	};
	errno = 0;
	CHECK(!pib_create_qp_ex(&ctx->ibvctx.context, &qa));
	CHECK_EQ(errno, EINVAL);
	qa.xrcd = &vx.xrcd;
	tgt = pib_create_qp_ex(&ctx->ibvctx.context, &qa);
	CHECK(tgt);
	CHECK(!to_pib_qp(tgt)->sq.buf && !to_pib_qp(tgt)->rq.buf);
	CHECK_EQ(pib_destroy_qp(tgt), 0);

	num = srq->srqn;
	CHECK_EQ(pib_destroy_srq(ibvsrq), 0);
	CHECK(!ctx->xsrq_table[num]);
	CHECK_EQ(pib_destroy_cq(ibvcq), 0);
}

int main(void)
{
	struct pib_context *ctx = make_context();
	/* The provider's PD (pib_alloc_pd's struct), not a bare ibv_pd. */
	struct pib_pd ppd = { .ibvpd = { .context = &ctx->ibvctx.context } };
	struct ibv_pd *pd = &ppd.ibvpd;
	struct ibv_cq *cq;

	test_cq_sizing(ctx);
	cq = pib_create_cq(&ctx->ibvctx.context, 16, NULL, 0);
	test_qp_sizing(ctx, pd, cq);
	pib_destroy_cq(cq);
	test_rc_data_path(ctx, pd);
	test_phase_wrap(ctx, pd);
	test_ud(ctx, pd);
	CHECK_EQ(destroy_qp_calls, 5);
	test_srq_sizing(ctx, pd);
	test_srq_data_path(ctx, pd);
	test_mw(ctx, pd);
	CHECK_EQ(destroy_qp_calls, 10);
	test_qp_ex(ctx, pd);
	test_qp_ex_flush(ctx, pd);
	test_cq_ex(ctx, pd);
	CHECK_EQ(destroy_qp_calls, 13);
	test_parent_domain(ctx, pd);
	test_resize(ctx, pd);
	test_recv_dbrec(ctx, pd);
	test_qp_reset(ctx, pd);
	test_xrc(ctx, pd);
	test_clock(ctx, pd);

	pib_qp_table_fini(ctx);
	free(ctx->uar);
	free(ctx);

	printf("provider-test: %d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
