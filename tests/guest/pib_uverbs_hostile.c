// SPDX-License-Identifier: GPL-2.0
/*
 * uverbs_hostile: drive pib.ko through the raw uverbs write() ABI with hostile driver data
 * (struct pib_ibv_create_cq / pib_ibv_create_qp), and with verbs the kernel must refuse for
 * user objects (POLL_CQ, REQ_NOTIFY_CQ, POST_SEND).  Every check prints PASS/FAIL; exit 1 on
 * any FAIL.  With NODP=1 (a device without the data path) only the checks that fail in the
 * driver before reaching the device are meaningful.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdma/ib_user_verbs.h>
#include <stdbool.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include "pib-abi.h"
#include "pib_hw.h"
#include "pib_report.h"

static int fd;

/* One check, one line (tests/common/pib_report.h). */
#define CHECK(cond, ...) report_check("uverbs-hostile", cond, __VA_ARGS__)

/* One write() command: header, then the command (response pointer first), then driver data. */
static int cmd(uint32_t command, const void *in, size_t inlen, size_t outlen)
{
	char buf[4096];
	struct ib_uverbs_cmd_hdr hdr = {
		.command = command,
		.in_words = (sizeof(hdr) + inlen) / 4,
		.out_words = outlen / 4,
	};

	memcpy(buf, &hdr, sizeof(hdr));
	memcpy(buf + sizeof(hdr), in, inlen);
	if (write(fd, buf, sizeof(hdr) + inlen) < 0)
		return -errno;
	return 0;
}

static void *ring(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	memset(p, 0, size);
	return p;
}

struct cq_in {
	struct ib_uverbs_create_cq core;
	struct pib_ibv_create_cq drv;
	uint64_t tail[2];
};
struct cq_out {
	struct ib_uverbs_create_cq_resp core;
	struct pib_ibv_create_cq_resp drv;
};

static size_t cq_buf_size(uint32_t depth)
{
	return ((depth * 32 + 4095) & ~4095ul) + 4096;
}

/* CREATE_CQ with a driver part of drvlen bytes and a response of outlen driver bytes. */
static int create_cq(uint32_t cqe, const struct pib_ibv_create_cq *drv, size_t drvlen,
		     size_t outdrv, const uint64_t *tail, struct cq_out *out)
{
	struct cq_in in = {};

	memset(out, 0, sizeof(*out));
	in.core.response = (uintptr_t)out;
	in.core.cqe = cqe;
	in.core.comp_channel = -1;
	in.drv = *drv;
	if (tail)
		memcpy(in.tail, tail, sizeof(in.tail));
	return cmd(IB_USER_VERBS_CMD_CREATE_CQ, &in, sizeof(in.core) + drvlen,
		   sizeof(out->core) + outdrv);
}

static int destroy_cq(uint32_t handle)
{
	struct ib_uverbs_destroy_cq_resp resp;
	struct ib_uverbs_destroy_cq in = { .response = (uintptr_t)&resp, .cq_handle = handle };

	return cmd(IB_USER_VERBS_CMD_DESTROY_CQ, &in, sizeof(in), sizeof(resp));
}

struct qp_in {
	struct ib_uverbs_create_qp core;
	struct pib_ibv_create_qp drv;
	uint64_t tail[2];
};
struct qp_out {
	struct ib_uverbs_create_qp_resp core;
	struct pib_ibv_create_qp_resp drv;
};

static int create_qp(uint32_t pd, uint32_t cq, uint8_t type, uint32_t wr, uint32_t sge,
		     const struct pib_ibv_create_qp *drv, size_t drvlen, struct qp_out *out)
{
	struct qp_in in = {};

	memset(out, 0, sizeof(*out));
	in.core.response = (uintptr_t)out;
	in.core.pd_handle = pd;
	in.core.send_cq_handle = cq;
	in.core.recv_cq_handle = cq;
	in.core.max_send_wr = wr;
	in.core.max_recv_wr = wr;
	in.core.max_send_sge = sge;
	in.core.max_recv_sge = sge;
	in.core.qp_type = type;
	in.drv = *drv;
	return cmd(IB_USER_VERBS_CMD_CREATE_QP, &in, sizeof(in.core) + drvlen, sizeof(*out));
}

static int destroy_qp(uint32_t handle)
{
	struct ib_uverbs_destroy_qp_resp resp;
	struct ib_uverbs_destroy_qp in = { .response = (uintptr_t)&resp, .qp_handle = handle };

	return cmd(IB_USER_VERBS_CMD_DESTROY_QP, &in, sizeof(in), sizeof(resp));
}

/* A well-formed QP request for wr WRs of sge SGEs, rings freshly mapped. */
static struct pib_ibv_create_qp good_qp(uint32_t wr, uint32_t sge)
{
	struct pib_ibv_create_qp d = {};
	uint32_t depth = 1, sq_log = 6, rq_log = 4;

	while (depth < wr)
		depth <<= 1;
	while ((1u << sq_log) < 64 + 16 * sge)
		sq_log++;
	while ((1u << rq_log) < 16 + 16 * sge)
		rq_log++;
	d.sq_stride_log = sq_log;
	d.rq_stride_log = rq_log;
	d.sq_depth = depth;
	d.rq_depth = depth;
	d.sq_buf_size = ((depth << sq_log) + 4095) & ~4095u;
	d.rq_buf_size = ((depth << rq_log) + 4095) & ~4095u;
	d.sq_buf_addr = (uintptr_t)ring(d.sq_buf_size);
	d.rq_buf_addr = (uintptr_t)ring(d.rq_buf_size);
	return d;
}

static int modify_qp(uint32_t handle, uint32_t mask, uint8_t state, uint8_t port, uint16_t pkey)
{
	struct ib_uverbs_modify_qp in = {};

	in.qp_handle = handle;
	in.attr_mask = mask;
	in.qp_state = state;
	in.port_num = port;
	in.pkey_index = pkey;
	in.qp_access_flags = 0;
	return cmd(IB_USER_VERBS_CMD_MODIFY_QP, &in, sizeof(in), 0);
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/dev/infiniband/uverbs0";
	bool nodp = getenv("NODP") != NULL;
	struct ib_uverbs_get_context ctx_in = {};
	struct {
		struct ib_uverbs_get_context_resp core;
		struct pib_ibv_alloc_ucontext_resp drv;
	} ctx_out = {};
	struct ib_uverbs_alloc_pd_resp pd_out;
	struct ib_uverbs_alloc_pd pd_in = { .response = (uintptr_t)&pd_out };
	struct pib_ibv_create_cq d, good;
	struct cq_out cq_out;
	struct qp_out qp_out;
	struct pib_ibv_create_qp q;
	uint64_t tail[2] = { 0, 0 };
	uint32_t cq_handle = ~0u, pd_handle = ~0u;
	int err;

	fd = open(path, O_RDWR);
	if (fd < 0) {
		perror(path);
		return 2;
	}
	ctx_in.response = (uintptr_t)&ctx_out;
	err = cmd(IB_USER_VERBS_CMD_GET_CONTEXT, &ctx_in, sizeof(ctx_in), sizeof(ctx_out));
	CHECK(!err && ctx_out.drv.uar_index > 0, "get_context: UAR %u (%d)", ctx_out.drv.uar_index, err);
	if (err)
		return 1;

	/* ---- CQ ---- */
	good = (struct pib_ibv_create_cq){ .depth = 16, .buf_size = cq_buf_size(16) };
	good.buf_addr = (uintptr_t)ring(good.buf_size);

#define CQ_BAD(want, desc, cqe, mod) do { \
		d = good; mod; \
		err = create_cq(cqe, &d, sizeof(d), sizeof(cq_out.drv), NULL, &cq_out); \
		CHECK(err == (want), "create_cq %s: %d (want %d)", desc, err, want); \
		if (!err) destroy_cq(cq_out.core.cq_handle); \
	} while (0)

	CQ_BAD(-EINVAL, "depth 3", 2, d.depth = 3);
	CQ_BAD(-EINVAL, "depth 1", 0, d.depth = 1; d.buf_size = cq_buf_size(1));
	CQ_BAD(-EINVAL, "depth 0", 0, d.depth = 0);
	CQ_BAD(-EINVAL, "depth 2^31", 15, d.depth = 1u << 31);
	CQ_BAD(-EINVAL, "depth > max_cqe", 15,
	       d.depth = PIB_MAX_CQE * 2; d.buf_size = cq_buf_size(PIB_MAX_CQE * 2));
	CQ_BAD(-EINVAL, "depth 16 for 16 CQEs", 16, (void)0);
	CQ_BAD(-EINVAL, "cqe 2^32-1", 0xffffffffu, (void)0);
	CQ_BAD(-EINVAL, "buf_size one page short", 15, d.buf_size -= 4096);
	CQ_BAD(-EINVAL, "buf_size huge", 15, d.buf_size = 0xfffff000u);
	CQ_BAD(-EINVAL, "buf_addr unaligned", 15, d.buf_addr += 8);
	CQ_BAD(-EINVAL, "buf_addr 0", 15, d.buf_addr = 0);
	CQ_BAD(-EOPNOTSUPP, "comp_mask 2", 15, d.comp_mask = 2);
	CQ_BAD(-EOPNOTSUPP, "flags without their comp_mask bit", 15,
	       d.flags = PIB_IBV_CQ_F_TIMESTAMP);
	CQ_BAD(-EOPNOTSUPP, "unknown flag", 15,
	       d.comp_mask = PIB_IBV_CREATE_CQ_MASK_FLAGS; d.flags = 2);
	CQ_BAD(0, "comp_mask FLAGS, no flags", 15, d.comp_mask = PIB_IBV_CREATE_CQ_MASK_FLAGS);
	/*
	 * A timestamped ring (16 CQEs of 64 bytes: two pages, as 16 of 32) without the verbs'
	 * TIMESTAMP_COMPLETION flag, which this (write) command cannot carry.
	 */
	CQ_BAD(-EINVAL, "timestamp ring, no verbs flag", 15,
	       d.comp_mask = PIB_IBV_CREATE_CQ_MASK_FLAGS; d.flags = PIB_IBV_CQ_F_TIMESTAMP);
	CQ_BAD(-EFAULT, "buf_addr unmapped", 15, d.buf_addr = 0x10000);
	CQ_BAD(-EFAULT, "buf_addr kernel half", 15, d.buf_addr = 0xffff888000000000ull);
	{
		void *ro = mmap(NULL, good.buf_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		CQ_BAD(-EFAULT, "ring read-only", 15, d.buf_addr = (uintptr_t)ro);
	}

	d = good;
	err = create_cq(15, &d, 8, sizeof(cq_out.drv), NULL, &cq_out);
	CHECK(err == -EINVAL, "create_cq short request (8 bytes): %d", err);
	err = create_cq(15, &d, 0, sizeof(cq_out.drv), NULL, &cq_out);
	CHECK(err == -EINVAL, "create_cq no driver request: %d", err);
	err = create_cq(15, &d, sizeof(d), 4, NULL, &cq_out);
	CHECK(err == -EINVAL, "create_cq short response: %d", err);
	tail[1] = 1;
	err = create_cq(15, &d, sizeof(d) + 16, sizeof(cq_out.drv), tail, &cq_out);
	CHECK(err == -EOPNOTSUPP, "create_cq unknown non-zero tail: %d", err);
	tail[1] = 0;
	err = create_cq(15, &d, sizeof(d) + 16, sizeof(cq_out.drv), tail, &cq_out);
	CHECK(nodp ? err == -EOPNOTSUPP : err == 0, "create_cq zero tail accepted: %d", err);
	if (!err) {
		CHECK(cq_out.drv.depth == 16 && cq_out.core.cqe == 15,
		      "create_cq answers depth %u cqe %u", cq_out.drv.depth, cq_out.core.cqe);
		cq_handle = cq_out.core.cq_handle;
	}

	if (nodp)
		goto out;

	/* A user CQ is the provider's to poll and arm. */
	{
		struct ib_uverbs_poll_cq_resp resp;
		struct ib_uverbs_poll_cq in = { .response = (uintptr_t)&resp,
						.cq_handle = cq_handle, .ne = 1 };
		struct ib_uverbs_req_notify_cq rn = { .cq_handle = cq_handle };

		err = cmd(IB_USER_VERBS_CMD_POLL_CQ, &in, sizeof(in), sizeof(resp));
		CHECK(err == -EINVAL || err == -EOPNOTSUPP, "uverbs POLL_CQ on a user CQ refused: %d", err);
		err = cmd(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, &rn, sizeof(rn), 0);
		CHECK(err == -EINVAL || err == -EOPNOTSUPP, "uverbs REQ_NOTIFY_CQ on a user CQ refused: %d", err);
	}

	/* ---- PD, MR ---- */
	err = cmd(IB_USER_VERBS_CMD_ALLOC_PD, &pd_in, sizeof(pd_in), sizeof(pd_out));
	CHECK(!err, "alloc_pd: %d", err);
	pd_handle = pd_out.pd_handle;
	{
		char *buf = ring(1 << 20);
		struct ib_uverbs_reg_mr_resp mr_out;
		struct ib_uverbs_reg_mr mr = { .response = (uintptr_t)&mr_out,
					       .pd_handle = pd_handle };
		struct ib_uverbs_dereg_mr dr;

#define MR(want, desc, s, l, va, acc) do { \
		mr.start = (uintptr_t)(s); mr.length = (l); mr.hca_va = (va); mr.access_flags = (acc); \
		err = cmd(IB_USER_VERBS_CMD_REG_MR, &mr, sizeof(mr), sizeof(mr_out)); \
		CHECK(err == (want), "reg_mr %s: %d (want %d)", desc, err, want); \
		if (!err) { dr.mr_handle = mr_out.mr_handle; cmd(IB_USER_VERBS_CMD_DEREG_MR, &dr, sizeof(dr), 0); } \
	} while (0)

		MR(0, "1 MiB at its own address", buf, 1 << 20, (uintptr_t)buf, IB_UVERBS_ACCESS_LOCAL_WRITE);
		MR(0, "offset 100, iova offset 100", buf + 100, 5000, 0x10000064ull, IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE);
		MR(-EINVAL, "offset 100, iova offset 0", buf + 100, 5000, 0x10000000ull, 0);
		MR(-EINVAL, "iova + length wraps", buf, 8192, 0xfffffffffffff000ull, 0);
		MR(-EINVAL, "length 2^41", buf, 1ull << 41, (uintptr_t)buf, 0);
		/* pib reports memory windows, so MRs may allow binding them. */
		MR(0, "MW_BIND access", buf, 4096, (uintptr_t)buf, IB_UVERBS_ACCESS_MW_BIND);
		MR(-EFAULT, "unmapped memory", 0x10000, 4096, 0x10000, 0);
	}

	/* ---- QP ---- */
#define QP(want, desc, type, wr, sge, mod) do { \
		q = good_qp(wr, sge); mod; \
		err = create_qp(pd_handle, cq_handle, type, wr, sge, &q, sizeof(q), &qp_out); \
		CHECK(err == (want), "create_qp %s: %d (want %d)", desc, err, want); \
		if (!err) destroy_qp(qp_out.core.qp_handle); \
	} while (0)

	QP(0, "RC 16x4", IB_UVERBS_QPT_RC, 16, 4, (void)0);
	QP(0, "UC 16x4", IB_UVERBS_QPT_UC, 16, 4, (void)0);
	QP(0, "UD 16x4", IB_UVERBS_QPT_UD, 16, 4, (void)0);
	QP(-EINVAL, "SQ stride 2^5", IB_UVERBS_QPT_RC, 16, 0, q.sq_stride_log = 5);
	QP(-EINVAL, "SQ stride 2^13", IB_UVERBS_QPT_RC, 16, 0, q.sq_stride_log = 13);
	QP(-EINVAL, "RQ stride 2^3", IB_UVERBS_QPT_RC, 16, 0, q.rq_stride_log = 3);
	QP(-EINVAL, "SQ stride too small for 4 SGEs", IB_UVERBS_QPT_RC, 16, 4,
	   q.sq_stride_log = 6; q.sq_buf_size = 4096);
	QP(-EINVAL, "SQ depth 3", IB_UVERBS_QPT_RC, 2, 1, q.sq_depth = 3);
	QP(-EINVAL, "SQ depth 0", IB_UVERBS_QPT_RC, 0, 1, q.sq_depth = 0);
	QP(-EINVAL, "SQ depth 8 for 16 WRs", IB_UVERBS_QPT_RC, 16, 1, q.sq_depth = 8);
	QP(-EINVAL, "SQ depth > max_qp_wr", IB_UVERBS_QPT_RC, 16, 1,
	   q.sq_depth = PIB_MAX_QP_WR * 2; q.sq_buf_size = (PIB_MAX_QP_WR * 2) << q.sq_stride_log);
	QP(-EINVAL, "RQ depth 0", IB_UVERBS_QPT_RC, 16, 1, q.rq_depth = 0; q.rq_buf_size = 0);
	QP(-EINVAL, "SQ buf_size off by a page", IB_UVERBS_QPT_RC, 16, 1, q.sq_buf_size += 4096);
	QP(-EINVAL, "RQ buf unaligned", IB_UVERBS_QPT_RC, 16, 1, q.rq_buf_addr += 64);
	QP(-EFAULT, "SQ buf unmapped", IB_UVERBS_QPT_RC, 16, 1, q.sq_buf_addr = 0x10000);
	QP(-EOPNOTSUPP, "comp_mask 2", IB_UVERBS_QPT_RC, 16, 1, q.comp_mask = 2);
	/* An RQ doorbell record (the device has them): one more page in the RQ's buffer. */
	QP(-EINVAL, "RQ_DBREC without the record's page", IB_UVERBS_QPT_RC, 16, 1,
	   q.comp_mask = PIB_IBV_CREATE_QP_MASK_RQ_DBREC);
	QP(0, "RQ_DBREC with the record's page", IB_UVERBS_QPT_RC, 16, 1,
	   q.comp_mask = PIB_IBV_CREATE_QP_MASK_RQ_DBREC; q.rq_buf_size += 4096;
	   q.rq_buf_addr = (uintptr_t)ring(q.rq_buf_size));
	QP(-EOPNOTSUPP, "reserved_06 set", IB_UVERBS_QPT_RC, 16, 1, q.reserved_06 = 1);
	QP(-EINVAL, "17 SGEs", IB_UVERBS_QPT_RC, 16, 17, (void)0);
	QP(-EINVAL, "max_qp_wr + 1 WRs", IB_UVERBS_QPT_RC, PIB_MAX_QP_WR + 1, 1, (void)0);

	q = good_qp(16, 1);
	err = create_qp(pd_handle, cq_handle, IB_UVERBS_QPT_RC, 16, 1, &q, 16, &qp_out);
	CHECK(err == -EINVAL, "create_qp short request: %d", err);

	/* A live QP: state rules, refused kernel posting, a CQ it pins. */
	q = good_qp(16, 1);
	err = create_qp(pd_handle, cq_handle, IB_UVERBS_QPT_RC, 16, 1, &q, sizeof(q), &qp_out);
	CHECK(!err && qp_out.drv.qpn == qp_out.core.qpn && qp_out.drv.max_inline <= PIB_MAX_INLINE_DATA,
	      "create_qp RC: QPN %#x max_inline %u (%d)", qp_out.drv.qpn, qp_out.drv.max_inline, err);
	if (!err) {
		uint32_t h = qp_out.core.qp_handle;
		struct {
			struct ib_uverbs_post_send core;
			struct ib_uverbs_send_wr wr;
		} ps = {};
		struct ib_uverbs_post_send_resp ps_out;

		err = modify_qp(h, PIB_QP_STATE, PIB_QPS_RTS, 0, 0);
		CHECK(err == -EINVAL, "modify_qp RESET -> RTS refused: %d", err);
		/* The first index past the P_Key table (64 entries since the SM fills it). */
		err = modify_qp(h, PIB_QP_STATE | PIB_QP_PKEY_INDEX | PIB_QP_PORT | PIB_QP_ACCESS_FLAGS,
				PIB_QPS_INIT, 1, PIB_PKEY_TBL_LEN);
		CHECK(err == -EINVAL, "modify_qp INIT with P_Key index %d (past the table) refused: %d",
		      PIB_PKEY_TBL_LEN, err);
		err = modify_qp(h, PIB_QP_STATE | PIB_QP_PKEY_INDEX | PIB_QP_ACCESS_FLAGS,
				PIB_QPS_INIT, 1, 0);
		CHECK(err == -EINVAL, "modify_qp INIT without port refused: %d", err);
		err = modify_qp(h, PIB_QP_STATE | PIB_QP_PKEY_INDEX | PIB_QP_PORT | PIB_QP_ACCESS_FLAGS,
				PIB_QPS_INIT, 1, 0);
		CHECK(!err, "modify_qp RESET -> INIT: %d", err);
		err = modify_qp(h, PIB_QP_STATE, PIB_QPS_RTS, 0, 0);
		CHECK(err == -EINVAL, "modify_qp INIT -> RTS refused: %d", err);

		ps.core.response = (uintptr_t)&ps_out;
		ps.core.qp_handle = h;
		ps.core.wr_count = 1;
		ps.core.wqe_size = sizeof(ps.wr);
		ps.wr.opcode = IB_UVERBS_WR_SEND;
		err = cmd(IB_USER_VERBS_CMD_POST_SEND, &ps, sizeof(ps), sizeof(ps_out));
		CHECK(err == -EINVAL || err == -EOPNOTSUPP, "uverbs POST_SEND on a user QP refused: %d", err);

		err = destroy_cq(cq_handle);
		CHECK(err == -EBUSY, "destroy_cq while a QP uses it: %d", err);
		err = destroy_qp(h);
		CHECK(!err, "destroy_qp: %d", err);
	}

out:
	if (cq_handle != ~0u) {
		err = destroy_cq(cq_handle);
		CHECK(!err, "destroy_cq: %d", err);
	}
	/* Everything else goes with the file. */
	close(fd);
	return report_summary("uverbs-hostile");
}
