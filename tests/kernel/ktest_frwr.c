// SPDX-License-Identifier: GPL-2.0
/*
 * ktest_frwr.c - fast registration (FRWR), the way the kernel's storage and file ULPs use it
 * (nvme-rdma, rpcrdma, iSER, SRP): ib_alloc_mr(), ib_map_mr_sg() of scattered pages,
 * IB_WR_REG_MR with a new key byte, RDMA WRITE and READ through the rkey, IB_WR_LOCAL_INV,
 * the peer's IB_WR_SEND_WITH_INV (IB_WC_WITH_INVALIDATE), and the registrations and
 * invalidations that the IBTA makes completion errors: each must complete in error, leave
 * the QP in ERR, and change no byte of memory, which the owner checks.
 *
 * Two roles.  The owner has the memory: it registers and invalidates it.  The peer reaches
 * the memory through the rkey, and invalidates it remotely.  In loopback (part of the
 * module's usual run) one kernel plays both, QP to QP through its own port.  Across the link
 * each kernel plays one: frwr=owner on one node, frwr=peer:<the owner's IPv4 address> on the
 * other.  The two exchange QPNs, LIDs and keys, and keep in step, over TCP on the management
 * network (FR_PORT): every sync point (fr_sync()) is passed by both sides before either goes
 * on, so each step sees the other side's last step done.  Each side checks only what it can
 * see; the e2e script (tests/e2e/32-frwr.sh) adds up both nodes' counts.
 *
 * A QP pair is used until an error puts it in ERR, then replaced (fr_pair()): a failed step
 * costs the pair, not the test.
 */
#include <linux/delay.h>
#include <linux/inet.h>
#include <linux/in.h>
#include <linux/net.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <net/net_namespace.h>
#include <net/sock.h>

#include "ktest.h"

#define FR_PORT         18531           /* TCP: the owner listens */
#define FR_TIMEOUT_S    60              /* for the other node at a sync point */
#define FR_WC_MS        5000            /* for one completion */

/*
 * The owner's memory: FR_NPAGES separate pages.  The region it registers is three of them,
 * out of order, starting FR_HEAD bytes into the first and ending FR_TAIL bytes into the
 * last; the bytes around it are guards that nothing may touch.  Two more pages are a second
 * region (re-registration), one is the owner's receive buffer.
 */
#define FR_NPAGES       6
#define FR_HEAD         512
#define FR_TAIL         1024
#define FR_LEN          (SZ_4K - FR_HEAD + SZ_4K + FR_TAIL)     /* 8704 */
#define FR_LEN2         (2 * SZ_4K)
#define FR_MAX_SG       8               /* the main MR's max_num_sg */
#define FR_GUARD_SEED   250
#define FR_REGION_SEED  1               /* the regions' first contents */
#define FR_REGION2_SEED 2
#define FR_FIRST_SEED   3
#define FR_ACCESS       (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ)

/* A guest-physical page no guest has (14 TiB): for a page list that points nowhere. */
#define FR_NOWHERE      0xdead0000000ULL

/* The peer's buffer: what it writes from, then what it reads into. */
#define FR_PBUF_SIZE    (6 * SZ_4K)
#define FR_READ_OFF     (3 * SZ_4K)

/* What one side tells the other at a sync point.  On the wire: big-endian u32s, then iova. */
struct fr_msg {
	u32 step;                       /* sync points passed: both sides must be at the same */
	u32 ok;                         /* the sender's part of this step worked (setup, pairing) */
	u32 qpn;                        /* the sender's QP */
	u32 lid;
	u32 rkey;                       /* owner: the key, address and length the peer is to use */
	u32 len;
	u64 iova;
};

struct fr_wire {
	__be32 step, ok, qpn, lid, rkey, len;
	__be64 iova;
};

struct fr {
	struct ib_device *dev;
	bool owner, peer;               /* the roles this kernel plays: both in loopback */
	struct socket *sock;            /* across the link: the other node's pib_ktest */
	bool broken;                    /* the other node is gone or out of step: stop */
	struct fr_msg me, them;         /* at the last sync point: what this side said, the other */
	struct fr_msg *pub;             /* what the owner published: its own me, or the peer's them */
	u16 lid;
	/*
	 * The next pattern to write.  Both sides count alike (every step takes its seeds
	 * whatever the role), so the owner knows what the peer wrote.
	 */
	int seed;

	/* Owner. */
	struct ib_pd *opd;              /* the MRs' PD */
	struct ib_pd *xpd;              /* another PD, whose QPs may not touch those MRs */
	struct ib_cq *ocq;
	struct ib_qp *oqp;
	struct ib_mr *mr;               /* FR_MAX_SG pages */
	struct ib_mr *mr2;              /* 2 pages */
	struct page *pg[FR_NPAGES];
	struct scatterlist sg[3];       /* the region */
	struct scatterlist sg2[2];      /* the second region */
	struct scatterlist guard[2];    /* around the region (CPU view only) */
	int sg_mapped, sg2_mapped;
	u64 recv_dma;                   /* pg[5] */
	int region_seed, region2_seed;  /* what the regions hold */

	/* Peer. */
	struct ib_pd *ppd;
	struct ib_cq *pcq;
	struct ib_qp *pqp;
	void *pbuf;
	u64 pdma;
};

/* ------------------------------------------------------------------------------------------
 * Keeping in step with the other node
 * ------------------------------------------------------------------------------------------ */

static int fr_xfer(struct socket *sock, void *buf, size_t len, bool send)
{
	struct kvec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };
	int n;

	n = send ? kernel_sendmsg(sock, &msg, &iov, 1, len) :
		   kernel_recvmsg(sock, &msg, &iov, 1, len, MSG_WAITALL);
	return n == len ? 0 : n < 0 ? n : -EPIPE;
}

/*
 * A sync point: both sides say what they have (f->me) and hear the other (f->them).  In
 * loopback there is no other side.  Returns false once the link is broken.
 */
static bool fr_sync(struct fr *f)
{
	const struct fr_msg *m = &f->me;
	struct fr_wire out = {
		.step = cpu_to_be32(m->step + 1), .ok = cpu_to_be32(m->ok),
		.qpn = cpu_to_be32(m->qpn), .lid = cpu_to_be32(m->lid),
		.rkey = cpu_to_be32(m->rkey), .len = cpu_to_be32(m->len),
		.iova = cpu_to_be64(m->iova),
	};
	struct fr_wire in;
	int err;

	f->me.step++;
	if (!f->sock)
		return true;
	if (f->broken)
		return false;
	err = fr_xfer(f->sock, &out, sizeof(out), true) ?:
	      fr_xfer(f->sock, &in, sizeof(in), false);
	if (!err)
		f->them = (struct fr_msg){
			.step = be32_to_cpu(in.step), .ok = be32_to_cpu(in.ok),
			.qpn = be32_to_cpu(in.qpn), .lid = be32_to_cpu(in.lid),
			.rkey = be32_to_cpu(in.rkey), .len = be32_to_cpu(in.len),
			.iova = be64_to_cpu(in.iova),
		};
	if (err || f->them.step != f->me.step) {
		CHECK(false, "frwr: the other node at sync point %u: error %d, it is at %u",
		      f->me.step, err, err ? 0 : f->them.step);
		f->broken = true;
	}
	return !f->broken;
}

/* Did both sides' part of this step work?  (A sync point.) */
static bool fr_both(struct fr *f, bool ok)
{
	f->me.ok = ok;
	if (!fr_sync(f))
		return false;
	return ok && (!f->sock || f->them.ok);
}

/* The owner makes a key, an address and a length known to the peer at the next sync point. */
static void fr_publish(struct fr *f, u32 rkey, u64 iova, u32 len)
{
	f->me.rkey = rkey;
	f->me.iova = iova;
	f->me.len = len;
}

static int fr_listen(struct fr *f)
{
	struct sockaddr_in a = {
		.sin_family = AF_INET,
		.sin_port = htons(FR_PORT),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};
	struct socket *ls;
	int err;

	err = sock_create_kern(&init_net, AF_INET, SOCK_STREAM, IPPROTO_TCP, &ls);
	if (err)
		return err;
	sock_set_reuseaddr(ls->sk);
	ls->sk->sk_rcvtimeo = FR_TIMEOUT_S * HZ;        /* how long accept waits */
	err = kernel_bind(ls, (struct sockaddr *)&a, sizeof(a)) ?: kernel_listen(ls, 1) ?:
	      kernel_accept(ls, &f->sock, 0);
	sock_release(ls);
	return err;
}

/* The owner may not listen yet: try again for FR_TIMEOUT_S. */
static int fr_connect(struct fr *f, __be32 addr)
{
	struct sockaddr_in a = {
		.sin_family = AF_INET,
		.sin_port = htons(FR_PORT),
		.sin_addr.s_addr = addr,
	};
	unsigned long end = jiffies + FR_TIMEOUT_S * HZ;
	int err;

	do {
		err = sock_create_kern(&init_net, AF_INET, SOCK_STREAM, IPPROTO_TCP, &f->sock);
		if (err)
			return err;
		err = kernel_connect(f->sock, (struct sockaddr *)&a, sizeof(a), 0);
		if (!err)
			return 0;
		sock_release(f->sock);
		f->sock = NULL;
		msleep(500);
	} while (time_before(jiffies, end));
	return err;
}

/* ------------------------------------------------------------------------------------------
 * Memory patterns: pattern seed at byte i of a region.  Different seeds differ in every byte,
 * so a partial write shows.
 * ------------------------------------------------------------------------------------------ */

static u8 fr_byte(int seed, u32 i)
{
	return (u8)(((i + 1) * 2654435761u) >> 24) ^ (u8)(seed * 37);
}

/* Fill (check false) or compare (check true) len bytes at p, which are region bytes start.. */
static bool fr_pattern(u8 *p, u32 start, u32 len, int seed, bool check)
{
	u32 i;

	for (i = 0; i < len; i++) {
		if (!check)
			p[i] = fr_byte(seed, start + i);
		else if (p[i] != fr_byte(seed, start + i))
			return false;
	}
	return true;
}

/* The same over the CPU's view of a scatterlist, as one region. */
static bool fr_sg_pattern(struct scatterlist *sgl, int n, int seed, bool check)
{
	struct scatterlist *sg;
	u32 start = 0;
	bool ok = true;
	int i;

	for_each_sg(sgl, sg, n, i) {
		ok &= fr_pattern(page_address(sg_page(sg)) + sg->offset, start, sg->length, seed,
				 check);
		start += sg->length;
	}
	return ok;
}

/* Every byte of the owner's memory is what the last successful writes made it. */
static bool fr_owner_memory_ok(struct fr *f)
{
	return fr_sg_pattern(f->sg, 3, f->region_seed, true) &&
	       fr_sg_pattern(f->sg2, 2, f->region2_seed, true) &&
	       fr_sg_pattern(f->guard, 2, FR_GUARD_SEED, true);
}

/* ------------------------------------------------------------------------------------------
 * Work requests, one at a time: each returns the completion's status, or a negative errno
 * when the post failed or nothing completed.
 * ------------------------------------------------------------------------------------------ */

static const char *fr_st(int st)
{
	return st < 0 ? "no completion" : ib_wc_status_msg(st);
}

/* The completion of wr_id id; any other (a flushed receive) is set aside. */
static int fr_wait(struct ib_cq *cq, u64 id, struct ib_wc *wc)
{
	unsigned long end = jiffies + msecs_to_jiffies(FR_WC_MS);
	int n;

	do {
		n = ib_poll_cq(cq, 1, wc);
		if (n < 0)
			return n;
		if (n && wc->wr_id == id)
			return wc->status;
		if (n)
			pr_info("pib_ktest: (set aside: WC %llu %s)\n", wc->wr_id,
				ib_wc_status_msg(wc->status));
		else
			msleep(2);
	} while (time_before(jiffies, end));
	return -ETIMEDOUT;
}

static int fr_post_wait(struct ib_qp *qp, struct ib_cq *cq, const struct ib_send_wr *wr,
			enum ib_wc_opcode opcode)
{
	struct ib_wc wc;
	int st;

	if (!qp)
		return -ENOTCONN;
	st = ib_post_send(qp, wr, NULL);
	if (st)
		return st;
	st = fr_wait(cq, wr->wr_id, &wc);
	/* A successful completion must say what it completed. */
	return st == IB_WC_SUCCESS && wc.opcode != opcode ? -EPROTO : st;
}

/* REG_MR of what mr maps now, with these rights, under a new key byte (ib_inc_rkey()). */
static int fr_reg_access(struct fr *f, struct ib_mr *mr, int access, u64 id)
{
	struct ib_reg_wr wr = {
		.wr = { .wr_id = id, .opcode = IB_WR_REG_MR, .send_flags = IB_SEND_SIGNALED },
		.mr = mr,
		.access = access,
	};

	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	wr.key = mr->rkey;
	return fr_post_wait(f->oqp, f->ocq, &wr.wr, IB_WC_REG_MR);
}

/* ... as ULPs register: local write, remote read and write. */
static int fr_reg(struct fr *f, struct ib_mr *mr, u64 id)
{
	return fr_reg_access(f, mr, FR_ACCESS, id);
}

static int fr_local_inv(struct fr *f, u32 rkey, u64 id)
{
	struct ib_send_wr wr = { .wr_id = id, .opcode = IB_WR_LOCAL_INV,
				 .send_flags = IB_SEND_SIGNALED, .ex.invalidate_rkey = rkey };

	return fr_post_wait(f->oqp, f->ocq, &wr, IB_WC_LOCAL_INV);
}

/* The owner's receive, for a SEND with invalidate (lkey: the QP's PD's). */
static int fr_post_recv(struct fr *f, u64 id)
{
	struct ib_sge sge = { .addr = f->recv_dma, .length = 64 };
	struct ib_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 };

	if (!f->oqp)
		return -ENOTCONN;
	sge.lkey = f->oqp->pd->local_dma_lkey;
	return ib_post_recv(f->oqp, &wr, NULL);
}

/* The peer: a WRITE of len bytes of a new pattern, or a READ into FR_READ_OFF. */
static int fr_rdma(struct fr *f, enum ib_wr_opcode op, u32 rkey, u64 iova, u32 len, int seed,
		   u64 id)
{
	bool rd = op == IB_WR_RDMA_READ;
	struct ib_sge sge = { .addr = f->pdma + (rd ? FR_READ_OFF : 0), .length = len,
			      .lkey = f->ppd->local_dma_lkey };
	struct ib_rdma_wr wr = {
		.wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
			.send_flags = IB_SEND_SIGNALED },
		.remote_addr = iova,
		.rkey = rkey,
	};

	if (rd)
		memset(f->pbuf + FR_READ_OFF, 0, len);
	else
		fr_pattern(f->pbuf, 0, len, seed, false);
	return fr_post_wait(f->pqp, f->pcq, &wr.wr, rd ? IB_WC_RDMA_READ : IB_WC_RDMA_WRITE);
}

/* The peer: a SEND with invalidate of len bytes (0: none). */
static int fr_send_inv(struct fr *f, u32 rkey, u32 len, u64 id)
{
	struct ib_sge sge = { .addr = f->pdma, .length = len, .lkey = f->ppd->local_dma_lkey };
	struct ib_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = len ? 1 : 0,
				 .opcode = IB_WR_SEND_WITH_INV, .send_flags = IB_SEND_SIGNALED,
				 .ex.invalidate_rkey = rkey };

	return fr_post_wait(f->pqp, f->pcq, &wr, IB_WC_SEND);
}

/* The device moves a QP to ERR on its own: give the event a moment. */
static bool fr_in_err(struct ib_qp *qp)
{
	struct ib_qp_init_attr ia;
	struct ib_qp_attr a;
	int i;

	for (i = 0; qp && i < 50; i++) {
		if (!ib_query_qp(qp, &a, IB_QP_STATE, &ia) && a.qp_state == IB_QPS_ERR)
			return true;
		msleep(20);
	}
	return false;
}

/* ------------------------------------------------------------------------------------------
 * QP pairs: the owner's QP (in a PD of its choosing) and the peer's, connected
 * ------------------------------------------------------------------------------------------ */

static void fr_qp_event(struct ib_event *ev, void *ctx)
{
	pr_info("pib_ktest: frwr: QP %#x event %s\n", ev->element.qp->qp_num,
		ib_event_msg(ev->event));
}

static void fr_cq_comp(struct ib_cq *cq, void *ctx)
{
}

static struct ib_qp *fr_qp(struct ib_pd *pd, struct ib_cq *cq, enum ib_qp_type type)
{
	struct ib_qp_init_attr ia = {
		.event_handler = fr_qp_event,
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 8, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = type,
	};
	struct ib_qp *qp = ib_create_qp(pd, &ia);

	return IS_ERR(qp) ? NULL : qp;
}

static void fr_drain(struct ib_cq *cq)
{
	struct ib_wc wc;

	while (cq && ib_poll_cq(cq, 1, &wc) > 0)
		;
}

static void fr_unpair(struct fr *f)
{
	if (f->oqp)
		ib_destroy_qp(f->oqp);
	if (f->pqp)
		ib_destroy_qp(f->pqp);
	f->oqp = f->pqp = NULL;
	fr_drain(f->ocq);
	fr_drain(f->pcq);
}

/* A new pair, the owner's QP in opd; the old one goes.  Two sync points across the link. */
static bool fr_pair(struct fr *f, struct ib_pd *opd, const char *why)
{
	struct ib_qp *qp;
	bool ok;

	fr_unpair(f);
	if (f->owner)
		f->oqp = fr_qp(opd, f->ocq, IB_QPT_RC);
	if (f->peer)
		f->pqp = fr_qp(f->ppd, f->pcq, IB_QPT_RC);
	if (!f->sock) {
		ok = f->oqp && f->pqp && !kt_rc_connect_to(f->oqp, f->lid, f->pqp->qp_num) &&
		     !kt_rc_connect_to(f->pqp, f->lid, f->oqp->qp_num);
	} else {
		qp = f->owner ? f->oqp : f->pqp;
		f->me.qpn = qp ? qp->qp_num : 0;
		f->me.lid = f->lid;
		ok = fr_both(f, qp);
		/* Both RTS before the next step sends anything. */
		ok = fr_both(f, ok && !kt_rc_connect_to(qp, f->them.lid, f->them.qpn));
	}
	if (!ok)
		CHECK(false, "frwr: a QP pair for %s", why);
	return ok;
}

/* ------------------------------------------------------------------------------------------
 * Setting up and tearing down
 * ------------------------------------------------------------------------------------------ */

static bool fr_owner_init(struct fr *f)
{
	struct ib_cq_init_attr cqa = { .cqe = 32 };
	int i;

	f->opd = ib_alloc_pd(f->dev, 0);
	f->xpd = ib_alloc_pd(f->dev, 0);
	f->ocq = ib_create_cq(f->dev, fr_cq_comp, NULL, f, &cqa);
	if (IS_ERR(f->opd) || IS_ERR(f->xpd) || IS_ERR(f->ocq))
		return false;
	for (i = 0; i < FR_NPAGES; i++) {
		f->pg[i] = alloc_page(GFP_KERNEL);
		if (!f->pg[i])
			return false;
	}
	/*
	 * In address order, so that the region below is scattered whatever the allocator gave:
	 * page 0 lies below page 4, page 2 at least two pages above page 0.
	 */
	for (i = 1; i < FR_NPAGES; i++) {
		struct page *p = f->pg[i];
		int j;

		for (j = i; j > 0 && page_to_phys(f->pg[j - 1]) > page_to_phys(p); j--)
			f->pg[j] = f->pg[j - 1];
		f->pg[j] = p;
	}

	/* The region: pages 4, 0 and 2, in that order; the guards around it. */
	sg_init_table(f->sg, 3);
	sg_set_page(&f->sg[0], f->pg[4], SZ_4K - FR_HEAD, FR_HEAD);
	sg_set_page(&f->sg[1], f->pg[0], SZ_4K, 0);
	sg_set_page(&f->sg[2], f->pg[2], FR_TAIL, 0);
	sg_init_table(f->guard, 2);
	sg_set_page(&f->guard[0], f->pg[4], FR_HEAD, 0);
	sg_set_page(&f->guard[1], f->pg[2], SZ_4K - FR_TAIL, FR_TAIL);
	sg_init_table(f->sg2, 2);
	sg_set_page(&f->sg2[0], f->pg[3], SZ_4K, 0);
	sg_set_page(&f->sg2[1], f->pg[1], SZ_4K, 0);

	f->region_seed = FR_REGION_SEED;
	f->region2_seed = FR_REGION2_SEED;
	fr_sg_pattern(f->sg, 3, f->region_seed, false);
	fr_sg_pattern(f->sg2, 2, f->region2_seed, false);
	fr_sg_pattern(f->guard, 2, FR_GUARD_SEED, false);

	f->sg_mapped = ib_dma_map_sg(f->dev, f->sg, 3, DMA_BIDIRECTIONAL);
	f->sg2_mapped = ib_dma_map_sg(f->dev, f->sg2, 2, DMA_BIDIRECTIONAL);
	f->recv_dma = ib_dma_map_page(f->dev, f->pg[5], 0, SZ_4K, DMA_BIDIRECTIONAL);
	if (f->sg_mapped != 3 || f->sg2_mapped != 2 || ib_dma_mapping_error(f->dev, f->recv_dma))
		return false;

	f->mr = ib_alloc_mr(f->opd, IB_MR_TYPE_MEM_REG, FR_MAX_SG);
	f->mr2 = ib_alloc_mr(f->opd, IB_MR_TYPE_MEM_REG, 2);
	CHECK(!IS_ERR(f->mr) && !IS_ERR(f->mr2) && f->mr->lkey == f->mr->rkey,
	      "ib_alloc_mr(MEM_REG, %d) and (MEM_REG, 2): %d/%d, keys %#x/%#x", FR_MAX_SG,
	      PTR_ERR_OR_ZERO(f->mr), PTR_ERR_OR_ZERO(f->mr2),
	      IS_ERR(f->mr) ? 0 : f->mr->lkey, IS_ERR(f->mr) ? 0 : f->mr->rkey);
	return !IS_ERR(f->mr) && !IS_ERR(f->mr2);
}

static bool fr_peer_init(struct fr *f)
{
	struct ib_cq_init_attr cqa = { .cqe = 32 };

	f->ppd = ib_alloc_pd(f->dev, 0);
	f->pcq = ib_create_cq(f->dev, fr_cq_comp, NULL, f, &cqa);
	if (IS_ERR(f->ppd) || IS_ERR(f->pcq))
		return false;
	f->pbuf = kzalloc(FR_PBUF_SIZE, GFP_KERNEL);
	if (!f->pbuf)
		return false;
	f->pdma = ib_dma_map_single(f->dev, f->pbuf, FR_PBUF_SIZE, DMA_BIDIRECTIONAL);
	return !ib_dma_mapping_error(f->dev, f->pdma);
}

/* Undoes whatever of the init functions ran; a registered MR may be deregistered. */
static void fr_fini(struct fr *f)
{
	int i, err;

	fr_unpair(f);
	if (!IS_ERR_OR_NULL(f->mr)) {
		err = ib_dereg_mr(f->mr);
		CHECK(!err, "frwr: dereg_mr of the registered MR: %d", err);
	}
	if (!IS_ERR_OR_NULL(f->mr2)) {
		err = ib_dereg_mr(f->mr2);
		CHECK(!err, "frwr: dereg_mr of the MR on a page outside memory: %d", err);
	}
	if (f->sg_mapped > 0)
		ib_dma_unmap_sg(f->dev, f->sg, 3, DMA_BIDIRECTIONAL);
	if (f->sg2_mapped > 0)
		ib_dma_unmap_sg(f->dev, f->sg2, 2, DMA_BIDIRECTIONAL);
	if (f->recv_dma && !ib_dma_mapping_error(f->dev, f->recv_dma))
		ib_dma_unmap_page(f->dev, f->recv_dma, SZ_4K, DMA_BIDIRECTIONAL);
	for (i = 0; i < FR_NPAGES; i++)
		if (f->pg[i])
			__free_page(f->pg[i]);
	if (f->pdma && !ib_dma_mapping_error(f->dev, f->pdma))
		ib_dma_unmap_single(f->dev, f->pdma, FR_PBUF_SIZE, DMA_BIDIRECTIONAL);
	kfree(f->pbuf);
	if (!IS_ERR_OR_NULL(f->ocq))
		ib_destroy_cq(f->ocq);
	if (!IS_ERR_OR_NULL(f->pcq))
		ib_destroy_cq(f->pcq);
	if (!IS_ERR_OR_NULL(f->xpd))
		ib_dealloc_pd(f->xpd);
	if (!IS_ERR_OR_NULL(f->opd))
		ib_dealloc_pd(f->opd);
	if (!IS_ERR_OR_NULL(f->ppd))
		ib_dealloc_pd(f->ppd);
}

/* ------------------------------------------------------------------------------------------
 * The steps
 * ------------------------------------------------------------------------------------------ */

/*
 * The owner alone: what the device reports, and what the driver refuses before the device
 * sees it (a ULP's mistakes: wrong types, sizes the device cannot map).
 */
static void fr_api(struct fr *f)
{
	const struct ib_device_attr *attrs = &f->dev->attrs;
	struct ib_mr *dma_mr = f->opd->__internal_mr;   /* the PD's DMA MR: not fast-reg */
	const struct ib_send_wr *bad;
	struct ib_reg_wr wr;
	struct ib_qp *rc, *ud;
	struct ib_mr *mr;
	int n, err;

	CHECK((attrs->device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS) &&
	      attrs->max_fast_reg_page_list_len == 512,
	      "frwr: the device reports MEM_MGT_EXTENSIONS, max_fast_reg_page_list_len %u",
	      attrs->max_fast_reg_page_list_len);

	mr = ib_alloc_mr(f->opd, IB_MR_TYPE_SG_GAPS, FR_MAX_SG);
	CHECK(PTR_ERR(mr) == -EOPNOTSUPP, "frwr: ib_alloc_mr(SG_GAPS) refused: %d",
	      PTR_ERR_OR_ZERO(mr));
	if (!IS_ERR(mr))
		ib_dereg_mr(mr);
	mr = ib_alloc_mr(f->opd, IB_MR_TYPE_MEM_REG, attrs->max_fast_reg_page_list_len + 1);
	CHECK(PTR_ERR(mr) == -EINVAL, "frwr: ib_alloc_mr beyond max_fast_reg_page_list_len refused: %d",
	      PTR_ERR_OR_ZERO(mr));
	if (!IS_ERR(mr))
		ib_dereg_mr(mr);
	mr = ib_alloc_mr(f->opd, IB_MR_TYPE_MEM_REG, 0);
	CHECK(PTR_ERR(mr) == -EINVAL, "frwr: ib_alloc_mr of 0 pages refused: %d",
	      PTR_ERR_OR_ZERO(mr));
	if (!IS_ERR(mr))
		ib_dereg_mr(mr);

	/* The largest, and a key byte changed by a REG_MR that never ran: dereg still works. */
	mr = ib_alloc_mr(f->opd, IB_MR_TYPE_MEM_REG, attrs->max_fast_reg_page_list_len);
	CHECK(!IS_ERR(mr), "frwr: ib_alloc_mr of max_fast_reg_page_list_len pages: %d",
	      PTR_ERR_OR_ZERO(mr));
	if (!IS_ERR(mr)) {
		ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey) ^ 0x80);
		err = ib_dereg_mr(mr);
		CHECK(!err, "frwr: dereg_mr after ib_update_fast_reg_key without a REG_MR: %d", err);
	}

	n = ib_map_mr_sg(f->mr, f->sg, 3, NULL, SZ_8K);
	CHECK(n == -EINVAL, "frwr: ib_map_mr_sg with 8 KiB pages refused (4 KiB only): %d", n);
	/* pib has no local_dma_lkey: ib_alloc_pd() gave the PD a DMA MR. */
	n = dma_mr ? ib_map_mr_sg(dma_mr, f->sg, 3, NULL, SZ_4K) : 0;
	CHECK(dma_mr && n == -EINVAL, "frwr: ib_map_mr_sg on the PD's DMA MR refused: %d", n);

	/* Refused at post time, *bad_wr set. */
	rc = fr_qp(f->opd, f->ocq, IB_QPT_RC);
	ud = fr_qp(f->opd, f->ocq, IB_QPT_UD);
	CHECK(rc && ud, "frwr: an RC and a UD QP for the refusals");
	if (!rc || !ud)
		goto out;
	wr = (struct ib_reg_wr){ .wr = { .wr_id = 1, .opcode = IB_WR_REG_MR }, .mr = dma_mr,
				 .key = 0, .access = FR_ACCESS };
	err = ib_post_send(rc, &wr.wr, &bad);
	CHECK(dma_mr && err == -EINVAL && bad == &wr.wr, "frwr: REG_MR of the PD's DMA MR refused: %d",
	      err);
	wr.mr = f->mr;
	wr.key = f->mr->rkey;
	wr.access = FR_ACCESS | IB_ACCESS_ON_DEMAND;
	err = ib_post_send(rc, &wr.wr, &bad);
	CHECK(err == -EINVAL && bad == &wr.wr, "frwr: REG_MR with IB_ACCESS_ON_DEMAND refused: %d",
	      err);
	wr.access = FR_ACCESS;
	wr.wr.send_flags = IB_SEND_INLINE;
	err = ib_post_send(rc, &wr.wr, &bad);
	CHECK(err == -EINVAL && bad == &wr.wr, "frwr: REG_MR inline refused: %d", err);
	wr.wr.send_flags = 0;
	err = ib_post_send(ud, &wr.wr, &bad);
	CHECK(err == -EINVAL && bad == &wr.wr, "frwr: REG_MR on a UD QP refused: %d", err);
out:
	if (ud)
		ib_destroy_qp(ud);
	if (rc)
		ib_destroy_qp(rc);
	fr_drain(f->ocq);
}

/*
 * The region through the rkey: WRITE and READ across its pages, then LOCAL_INV, after which
 * the peer's WRITE fails with a remote access error and lands nowhere.
 */
static void fr_access(struct fr *f)
{
	struct ib_mr *mr = f->mr;
	int seed = f->seed++, n, st;

	if (!fr_pair(f, f->opd, "registration and access"))
		return;
	if (f->owner) {
		u64 a0 = sg_dma_address(&f->sg[0]), a1 = sg_dma_address(&f->sg[1]);
		u64 a2 = sg_dma_address(&f->sg[2]);

		CHECK(a1 != a0 + SZ_4K - FR_HEAD && a2 != a1 + SZ_4K,
		      "frwr: the region's pages are scattered: %#llx %#llx %#llx", a0, a1, a2);
		n = ib_map_mr_sg(mr, f->sg, 3, NULL, SZ_4K);
		CHECK(n == 3 && mr->iova == a0 && mr->length == FR_LEN,
		      "frwr: ib_map_mr_sg: %d of 3 entries, iova %#llx, length %llu", n, mr->iova,
		      mr->length);
		st = fr_reg(f, mr, 10);
		CHECK(st == IB_WC_SUCCESS, "frwr: REG_MR of 3 scattered pages, key %#x: %d %s",
		      mr->rkey, st, fr_st(st));
		fr_publish(f, mr->rkey, mr->iova, mr->length);
	}
	fr_sync(f);
	if (f->peer) {
		st = fr_rdma(f, IB_WR_RDMA_WRITE, f->pub->rkey, f->pub->iova, f->pub->len, seed, 11);
		CHECK(st == IB_WC_SUCCESS, "frwr: peer: RDMA WRITE of %u bytes through the rkey: %d %s",
		      f->pub->len, st, fr_st(st));
		st = fr_rdma(f, IB_WR_RDMA_READ, f->pub->rkey, f->pub->iova, f->pub->len, 0, 12);
		CHECK(st == IB_WC_SUCCESS &&
		      fr_pattern(f->pbuf + FR_READ_OFF, 0, f->pub->len, seed, true),
		      "frwr: peer: RDMA READ through the rkey brings back what it wrote: %d %s", st,
		      fr_st(st));
	}
	fr_sync(f);
	if (f->owner) {
		f->region_seed = seed;
		CHECK(fr_owner_memory_ok(f),
		      "frwr: the peer's bytes are on the 3 pages, in order, and nothing around them");
		st = fr_local_inv(f, mr->rkey, 13);
		CHECK(st == IB_WC_SUCCESS, "frwr: LOCAL_INV of the key: %d %s", st, fr_st(st));
	}
	fr_sync(f);
	if (f->peer) {
		st = fr_rdma(f, IB_WR_RDMA_WRITE, f->pub->rkey, f->pub->iova, f->pub->len,
			     f->seed, 14);
		CHECK(st == IB_WC_REM_ACCESS_ERR,
		      "frwr: peer: WRITE through the invalidated key: %d %s", st, fr_st(st));
		CHECK(fr_in_err(f->pqp), "frwr: peer: its QP in ERR");
	}
	f->seed++;
	fr_sync(f);
	if (f->owner)
		CHECK(fr_owner_memory_ok(f), "frwr: nothing written through the invalidated key");
}

/*
 * Registered again (the MR is invalid: no LOCAL_INV needed), then invalidated by the peer's
 * SEND with invalidate: the receive says so, with the key.
 */
static void fr_remote_inv(struct fr *f)
{
	struct ib_mr *mr = f->mr;
	struct ib_wc wc;
	int seed = f->seed++, n, st;

	if (!fr_pair(f, f->opd, "SEND with invalidate"))
		return;
	if (f->owner) {
		n = ib_map_mr_sg(mr, f->sg, 3, NULL, SZ_4K);
		st = fr_reg(f, mr, 20);
		CHECK(n == 3 && st == IB_WC_SUCCESS, "frwr: REG_MR again, key %#x: %d %s", mr->rkey,
		      st, fr_st(st));
		fr_publish(f, mr->rkey, mr->iova, mr->length);
		st = fr_post_recv(f, 21);
		CHECK(!st, "frwr: owner: a receive for the SEND: %d", st);
	}
	fr_sync(f);
	if (f->peer) {
		st = fr_rdma(f, IB_WR_RDMA_WRITE, f->pub->rkey, f->pub->iova, f->pub->len, seed, 22);
		CHECK(st == IB_WC_SUCCESS, "frwr: peer: WRITE through the new key: %d %s", st,
		      fr_st(st));
		st = fr_send_inv(f, f->pub->rkey, 16, 23);
		CHECK(st == IB_WC_SUCCESS, "frwr: peer: SEND_WITH_INV of the key: %d %s", st,
		      fr_st(st));
	}
	fr_sync(f);
	if (f->owner) {
		f->region_seed = seed;
		CHECK(fr_owner_memory_ok(f), "frwr: the WRITE through the new key landed");
		st = fr_wait(f->ocq, 21, &wc);
		CHECK(st == IB_WC_SUCCESS && wc.opcode == IB_WC_RECV && wc.byte_len == 16 &&
		      (wc.wc_flags & IB_WC_WITH_INVALIDATE) && wc.ex.invalidate_rkey == mr->rkey,
		      "frwr: owner: the receive has IB_WC_WITH_INVALIDATE, rkey %#x (the key %#x): %d %s",
		      st >= 0 ? wc.ex.invalidate_rkey : 0, mr->rkey, st, fr_st(st));
	}
	fr_sync(f);
	if (f->peer) {
		st = fr_rdma(f, IB_WR_RDMA_WRITE, f->pub->rkey, f->pub->iova, f->pub->len,
			     f->seed, 24);
		CHECK(st == IB_WC_REM_ACCESS_ERR,
		      "frwr: peer: WRITE through the remotely invalidated key: %d %s", st, fr_st(st));
	}
	f->seed++;
	fr_sync(f);
	if (f->owner)
		CHECK(fr_owner_memory_ok(f), "frwr: nothing written through it");
}

/*
 * After a failed registration: a new pair, and the peer's WRITE through the key the owner
 * published (the one the failed REG_MR asked for) fails, with no byte of memory changed.
 */
static void fr_no_access(struct fr *f, const char *what)
{
	int st;

	if (!fr_pair(f, f->opd, what))
		return;
	if (f->peer) {
		st = fr_rdma(f, IB_WR_RDMA_WRITE, f->pub->rkey, f->pub->iova, f->pub->len,
			     f->seed, 30);
		CHECK(st == IB_WC_REM_ACCESS_ERR, "frwr: peer: WRITE through the key of %s: %d %s",
		      what, st, fr_st(st));
	}
	f->seed++;
	fr_sync(f);
	if (f->owner)
		CHECK(fr_owner_memory_ok(f), "frwr: no byte written after %s", what);
}

/*
 * More pages than max_num_sg.  ib_map_mr_sg() maps no more than max_num_sg (it returns how
 * many entries fit), so no page list can be longer; what a consumer can still do is claim
 * a length those pages do not hold.  The device completes that REG_MR with LOC_LEN_ERR.
 * (A page list longer than the MR's, which the driver cannot write, is the qtest's.)
 */
static void fr_bad_length(struct fr *f)
{
	struct ib_mr *mr = f->mr2;
	int n, st;

	if (!fr_pair(f, f->opd, "a registration beyond max_num_sg"))
		return;
	if (f->owner) {
		n = ib_map_mr_sg(mr, f->sg, 3, NULL, SZ_4K);
		CHECK(n == 2 && mr->length == SZ_4K - FR_HEAD + SZ_4K,
		      "frwr: ib_map_mr_sg of 3 pages on a 2-page MR maps 2 entries: %d, %llu bytes",
		      n, mr->length);
		mr->length = FR_LEN;
		st = fr_reg(f, mr, 31);
		CHECK(st == IB_WC_LOC_LEN_ERR,
		      "frwr: REG_MR of %u bytes on 2 pages (max_num_sg 2): %d %s", FR_LEN, st,
		      fr_st(st));
		CHECK(fr_in_err(f->oqp), "frwr: owner: its QP in ERR after the failed REG_MR");
		fr_publish(f, mr->rkey, mr->iova, FR_LEN);
	}
	fr_sync(f);
	fr_no_access(f, "a registration beyond max_num_sg");
}

/*
 * Remote write without local write, which the IBTA forbids (o10-37) and the driver leaves to
 * the device: the REG_MR completes with LOC_PROT_ERR, and the key it asked for gives no access.
 */
static void fr_bad_access(struct fr *f)
{
	struct ib_mr *mr = f->mr2;
	int n, st;

	if (!fr_pair(f, f->opd, "a registration with remote write but no local write"))
		return;
	if (f->owner) {
		n = ib_map_mr_sg(mr, f->sg2, 2, NULL, SZ_4K);
		st = fr_reg_access(f, mr, IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ, 35);
		CHECK(n == 2 && st == IB_WC_LOC_PROT_ERR,
		      "frwr: REG_MR with REMOTE_WRITE but no LOCAL_WRITE: %d %s", st, fr_st(st));
		CHECK(fr_in_err(f->oqp), "frwr: owner: its QP in ERR after the failed REG_MR");
		fr_publish(f, mr->rkey, mr->iova, FR_LEN2);
	}
	fr_sync(f);
	fr_no_access(f, "a registration with remote write but no local write");
}

/*
 * A page list naming a page outside guest memory.  The page list itself is the driver's
 * own DMA memory, which a kernel consumer cannot point elsewhere; the pages in it are the
 * consumer's DMA addresses, which neither the driver nor the device can vet at REG_MR time
 * (an HCA does not know the guest's memory map; an IOMMU would fault).  So the REG_MR
 * completes, and the failure comes with the first access: the responder's DMA fails,
 * and the peer's WRITE completes with a remote operational error.
 */
static void fr_bad_page(struct fr *f)
{
	struct ib_mr *mr = f->mr2;
	struct scatterlist nowhere;
	int n, st;

	if (!fr_pair(f, f->opd, "a page outside memory"))
		return;
	if (f->owner) {
		sg_init_table(&nowhere, 1);
		sg_dma_address(&nowhere) = FR_NOWHERE;
		sg_dma_len(&nowhere) = SZ_4K;
		n = ib_map_mr_sg(mr, &nowhere, 1, NULL, SZ_4K);
		st = fr_reg(f, mr, 40);
		CHECK(n == 1 && st == IB_WC_SUCCESS,
		      "frwr: REG_MR of a page at %#llx, outside guest memory: %d %s", FR_NOWHERE, st,
		      fr_st(st));
		fr_publish(f, mr->rkey, mr->iova, 64);
	}
	fr_sync(f);
	if (f->peer) {
		st = fr_rdma(f, IB_WR_RDMA_WRITE, f->pub->rkey, f->pub->iova, f->pub->len,
			     f->seed, 41);
		CHECK(st == IB_WC_REM_OP_ERR,
		      "frwr: peer: WRITE to that page fails with a remote operational error: %d %s",
		      st, fr_st(st));
	}
	f->seed++;
	fr_sync(f);
	if (f->owner) {
		CHECK(fr_in_err(f->oqp), "frwr: owner: its QP in ERR after the failed access");
		CHECK(fr_owner_memory_ok(f), "frwr: no byte of the owner's memory changed");
	}
}

/*
 * REG_MR of an MR that is still valid, with other pages and another key: LOC_PROT_ERR.  The
 * new key gives no access to the new pages, and the old registration is untouched: its key
 * still reaches the old pages.
 */
static void fr_bad_valid(struct fr *f)
{
	struct ib_mr *mr = f->mr;
	u32 old_key = 0;
	u64 old_iova = 0;
	int seed, n, st;

	if (!fr_pair(f, f->opd, "re-registering a valid key"))
		return;
	if (f->owner) {
		n = ib_map_mr_sg(mr, f->sg, 3, NULL, SZ_4K);
		st = fr_reg(f, mr, 50);
		CHECK(n == 3 && st == IB_WC_SUCCESS, "frwr: REG_MR, key %#x: %d %s", mr->rkey, st,
		      fr_st(st));
		old_key = mr->rkey;
		old_iova = mr->iova;
		n = ib_map_mr_sg(mr, f->sg2, 2, NULL, SZ_4K);
		st = fr_reg(f, mr, 51);
		CHECK(n == 2 && st == IB_WC_LOC_PROT_ERR,
		      "frwr: REG_MR again without LOCAL_INV, other pages, key %#x: %d %s", mr->rkey,
		      st, fr_st(st));
		CHECK(fr_in_err(f->oqp), "frwr: owner: its QP in ERR after the failed REG_MR");
		fr_publish(f, mr->rkey, mr->iova, FR_LEN2);
	}
	fr_sync(f);
	fr_no_access(f, "re-registering a valid key");

	/* The registration that was valid still is. */
	seed = f->seed++;
	if (f->owner)
		fr_publish(f, old_key, old_iova, FR_LEN);
	if (!fr_pair(f, f->opd, "the old key"))
		return;
	if (f->peer) {
		st = fr_rdma(f, IB_WR_RDMA_WRITE, f->pub->rkey, f->pub->iova, f->pub->len, seed, 52);
		CHECK(st == IB_WC_SUCCESS, "frwr: peer: WRITE through the old key: %d %s", st,
		      fr_st(st));
	}
	fr_sync(f);
	if (f->owner) {
		f->region_seed = seed;
		CHECK(fr_owner_memory_ok(f),
		      "frwr: it landed on the old pages; the new ones are unchanged");
	}
}

/*
 * Invalidating a key of another PD, locally (LOCAL_INV: the device says LOC_QP_OP_ERR) and
 * remotely (SEND_WITH_INV: the peer's completes with REM_INV_REQ_ERR); the key stays valid.
 */
static void fr_bad_pd(struct fr *f)
{
	struct ib_wc wc;
	int seed, st;

	if (!fr_pair(f, f->xpd, "LOCAL_INV of another PD's key"))
		return;
	/* The key: the one fr_bad_valid() showed valid (it is still published). */
	if (f->owner) {
		st = fr_local_inv(f, f->pub->rkey, 60);
		CHECK(st == IB_WC_LOC_QP_OP_ERR,
		      "frwr: LOCAL_INV of a key in another PD: %d %s", st, fr_st(st));
		CHECK(fr_in_err(f->oqp), "frwr: owner: its QP in ERR after the failed LOCAL_INV");
	}
	if (!fr_pair(f, f->xpd, "SEND_WITH_INV of another PD's key"))
		return;
	if (f->owner) {
		st = fr_post_recv(f, 62);
		CHECK(!st, "frwr: owner: a receive for the SEND: %d", st);
	}
	fr_sync(f);
	if (f->peer) {
		st = fr_send_inv(f, f->pub->rkey, 0, 63);
		CHECK(st == IB_WC_REM_INV_REQ_ERR,
		      "frwr: peer: SEND_WITH_INV of a key in another PD than the receiver's: %d %s",
		      st, fr_st(st));
	}
	fr_sync(f);
	if (f->owner) {
		st = fr_wait(f->ocq, 62, &wc);
		CHECK(st > IB_WC_SUCCESS && !(wc.wc_flags & IB_WC_WITH_INVALIDATE),
		      "frwr: owner: the receive completes in error: %d %s", st, fr_st(st));
		CHECK(fr_in_err(f->oqp), "frwr: owner: its QP in ERR");
	}

	seed = f->seed++;
	if (!fr_pair(f, f->opd, "the key after the refused invalidations"))
		return;
	if (f->peer) {
		st = fr_rdma(f, IB_WR_RDMA_WRITE, f->pub->rkey, f->pub->iova, f->pub->len, seed, 64);
		CHECK(st == IB_WC_SUCCESS, "frwr: peer: the key is still valid, WRITE: %d %s", st,
		      fr_st(st));
	}
	fr_sync(f);
	if (f->owner) {
		f->region_seed = seed;
		CHECK(fr_owner_memory_ok(f), "frwr: that WRITE landed, and only it");
	}
}

static void fr_run(struct fr *f)
{
	static void (*const steps[])(struct fr *f) = {
		fr_access, fr_remote_inv, fr_bad_length, fr_bad_access, fr_bad_page, fr_bad_valid,
		fr_bad_pd,
	};
	struct ib_port_attr pa;
	bool ok;
	int i;

	f->pub = f->owner ? &f->me : &f->them;
	f->seed = FR_FIRST_SEED;
	ok = !ib_query_port(f->dev, 1, &pa) && pa.state == IB_PORT_ACTIVE;
	f->lid = pa.lid;
	ok = ok && (f->dev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS);
	ok = ok && (!f->owner || fr_owner_init(f)) && (!f->peer || fr_peer_init(f));
	ok = fr_both(f, ok);
	CHECK(ok, "frwr: %s set up (port ACTIVE, MEM_MGT_EXTENSIONS, memory)",
	      f->owner && f->peer ? "loopback" : f->owner ? "owner" : "peer");
	if (ok) {
		if (f->owner)
			fr_api(f);
		for (i = 0; i < ARRAY_SIZE(steps) && !f->broken; i++)
			steps[i](f);
		fr_sync(f);
	}
	fr_fini(f);
}

/* Both roles, QP to QP through the port's own LID. */
void kt_frwr_loopback(struct ib_device *dev, u16 lid)
{
	struct fr *f;

	if (!(dev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS)) {
		pr_info("pib_ktest: no fast registration on the device: FRWR tests skipped\n");
		return;
	}
	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return;
	f->dev = dev;
	f->owner = f->peer = true;
	fr_run(f);
	kfree(f);
}

/* One role, with the other node: "owner", or "peer:<the owner's IPv4 address>". */
void kt_frwr_link(struct ib_device *dev, const char *role)
{
	struct fr *f;
	__be32 addr;
	int err;

	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return;
	f->dev = dev;
	if (!strcmp(role, "owner")) {
		f->owner = true;
		err = fr_listen(f);
	} else if (!strncmp(role, "peer:", 5) &&
		   in4_pton(role + 5, -1, (u8 *)&addr, -1, NULL)) {
		f->peer = true;
		err = fr_connect(f, addr);
	} else {
		err = -EINVAL;
	}
	CHECK(!err, "frwr: %s: TCP to the other node's pib_ktest, port %d: %d", role, FR_PORT,
	      err);
	if (!err) {
		f->sock->sk->sk_rcvtimeo = FR_TIMEOUT_S * HZ;
		f->sock->sk->sk_sndtimeo = FR_TIMEOUT_S * HZ;
		fr_run(f);
	}
	if (f->sock)
		sock_release(f->sock);
	kfree(f);
}
