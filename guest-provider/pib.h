/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * pib.h - rdma-core provider for the pib HCA: objects shared by pib.c, verbs.c,
 * cq.c, qp.c, qp_ex.c, wq.c and srq.c.
 *
 * The provider sees the device through headers shared with every other layer:
 * pib_hw.h (PCI identity, UAR doorbell layout), pib_wqe.h (WQE and CQE
 * formats) and pib-abi.h (what the kernel driver and the provider pass each
 * other in uverbs commands).  guest-provider/build.sh copies them from the
 * repo's include/ next to this file; they are never edited here.
 *
 * The data path bypasses the kernel.  The provider allocates every ring
 * (CQ, SQ, RQ, SRQ) in its own memory and hands it to the kernel once, at
 * create time; the kernel pins it and gives the device its page list.  From
 * then on the provider writes WQEs and reads CQEs in that memory directly and
 * rings doorbells on the context's UAR page: posting and polling make no
 * system call.
 */
#ifndef __PIB_H__
#define __PIB_H__

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>
#include <kernel-abi/pib-abi.h> /* made from pib-abi.h by CMakeLists.txt */
#include <util/mmio.h>

#include "pib-abi.h"
#include "pib_hw.h"
#include "pib_wqe.h"

/* ALLOC_UCONTEXT (GET_CONTEXT): no request payload, pib's response payload. */
DECLARE_DRV_CMD(pib_alloc_ucontext, IB_USER_VERBS_CMD_GET_CONTEXT, empty,
		pib_ibv_alloc_ucontext_resp);
/* CREATE_CQ / CREATE_QP: the rings the provider allocated, and their numbers. */
DECLARE_DRV_CMD(pib_create_cq_ex, IB_USER_VERBS_EX_CMD_CREATE_CQ,
		pib_ibv_create_cq, pib_ibv_create_cq_resp);
DECLARE_DRV_CMD(pib_create_qp, IB_USER_VERBS_CMD_CREATE_QP,
		pib_ibv_create_qp, pib_ibv_create_qp_resp);
/* CREATE_SRQ: the SRQ ring; srq_limit travels in the core command. */
DECLARE_DRV_CMD(pib_create_srq, IB_USER_VERBS_CMD_CREATE_SRQ,
		pib_ibv_create_srq, pib_ibv_create_srq_resp);
/* CREATE_XSRQ: an XRC SRQ's ring, the same request (its domain and CQ are core fields). */
DECLARE_DRV_CMD(pib_create_xsrq, IB_USER_VERBS_CMD_CREATE_XSRQ,
		pib_ibv_create_srq, pib_ibv_create_srq_resp);
/* Resizing: the new ring, and (CQ) the consumer index the device goes on from. */
DECLARE_DRV_CMD(pib_resize_cq, IB_USER_VERBS_CMD_RESIZE_CQ,
		pib_ibv_resize_cq, pib_ibv_resize_cq_resp);
DECLARE_DRV_CMD(pib_modify_srq, IB_USER_VERBS_CMD_MODIFY_SRQ,
		pib_ibv_modify_srq, empty);

/*
 * A CQE names the send WQE it completes by a 16-bit index; the full index is
 * recovered relative to the consumer index, which is unambiguous while fewer
 * than 2^16 WQEs are outstanding.  No work queue is made deeper than that.
 */
#define PIB_WQ_DEPTH_MAX	(1u << 16)

struct pib_device {
	struct verbs_device vdev;
};

struct pib_qp;

struct pib_context {
	struct verbs_context ibvctx;
	/*
	 * This context's UAR page (page resp.uar_index of BAR2), mapped
	 * non-cached.  Doorbells are single 64-bit writes at the offsets of
	 * enum pib_uar_offset; the device drops (and counts) doorbells for
	 * QPs/CQs that were not created on this page.  The page's only reads
	 * are the device clock's two halves (PIB_UAR_CLOCK_LO/HI).
	 */
	void *uar;
	size_t uar_size;
	bool clock;			/* the device has its clock (hca_core_clock) */
	bool recv_dbrec;		/* RQs and SRQs get doorbell records */

	/* Device limits (QUERY_DEVICE at open), checked before any command. */
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_cqe;
	uint32_t max_srq;
	uint32_t max_srq_wr;
	uint32_t max_srq_sge;

	/*
	 * QPN -> QP, for poll_cq: a CQE names its QP only by number, and the
	 * provider must find the QP to retire the WQE slots the CQE frees.
	 * A hash of qp_table_mask + 1 buckets (the device's max_qp rounded up
	 * to a power of two), each a chain through pib_qp.table_next; with
	 * QPNs handed out densely every chain is one QP long.
	 */
	pthread_spinlock_t qp_table_lock;
	struct pib_qp **qp_table;
	uint32_t qp_table_mask;

	/*
	 * SRQN -> XRC SRQ (max_srq + 1 entries, under qp_table_lock), for
	 * poll_cq: an XRC target's receive CQE names the XRC SRQ whose slot it
	 * frees (PIB_CQE_F_XRC), and the target QP may be another process's.
	 */
	struct pib_srq **xsrq_table;
};

/*
 * A thread domain: the consumer promises to use the objects of the parent
 * domains made with it from one thread at a time.  The provider takes its
 * spinlocks anyway (uncontended, they cost little next to a doorbell); the
 * domain only counts the parent domains that use it.
 */
struct pib_td {
	struct ibv_td ibvtd;
	_Atomic(int) refcnt;
};

/*
 * A protection domain, or a parent domain (protection != NULL): a PD as far
 * as the kernel and the device know (it carries the PD's handle), with a
 * thread domain and the consumer's allocator for the rings of the QPs, SRQs
 * and CQs made with it.  refcnt counts the parent domains made of a PD and
 * the objects made with a parent domain, which must not go first.
 */
struct pib_pd {
	struct ibv_pd ibvpd;
	struct pib_pd *protection;
	struct pib_td *td;
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t resource_type);
	void *pd_context;
	_Atomic(int) refcnt;
};

/* The resource_type a parent domain's allocator is called with, per ring. */
#define PIB_RES_TYPE_SQ		((uint64_t)RDMA_DRIVER_UNKNOWN << 32 | 1)
#define PIB_RES_TYPE_RQ		((uint64_t)RDMA_DRIVER_UNKNOWN << 32 | 2)
#define PIB_RES_TYPE_SRQ	((uint64_t)RDMA_DRIVER_UNKNOWN << 32 | 3)
#define PIB_RES_TYPE_CQ		((uint64_t)RDMA_DRIVER_UNKNOWN << 32 | 4)

/*
 * Where a ring's memory came from: the provider's own allocation, or the
 * allocator of the parent domain pad (custom), which gets it back.
 */
struct pib_ring_src {
	struct pib_pd *pad;		/* a parent domain, or NULL */
	uint64_t res_type;		/* PIB_RES_TYPE_* */
	bool custom;			/* pad->alloc gave the memory */
};

/*
 * A completion queue: a ring of depth CQEs that the device produces and the
 * provider consumes, followed by one page whose first u32 is the consumer
 * index record (pib_wqe.h).  With completion timestamps the slots are
 * struct pib_cqe_ts (64 bytes), whose first half is the CQE.
 */
struct pib_cq {
	struct verbs_cq vcq;
	pthread_spinlock_t lock;	/* poll_cq and req_notify_cq */
	void *buf;			/* ring + record page, page aligned */
	size_t buf_size;
	struct pib_ring_src src;
	struct pib_cqe *ring;		/* == buf; slots of 2^cqe_log bytes */
	_Atomic(uint32_t) *ci_record;	/* little-endian, read by the device */
	uint32_t depth;			/* power of two */
	uint32_t cqe_log;		/* PIB_CQE_STRIDE_LOG, or _TS_ with timestamps */
	uint32_t ci;			/* next CQE to look at, free-running */
	uint32_t cqn;
	struct ibv_wc cur;		/* ibv_cq_ex: the completion being read */
	uint64_t cur_ts;		/* ... and its timestamp (timestamped CQs) */
	uint64_t cur_wallclock;		/* ... and its real time, ns since the epoch */
};

/*
 * A work queue (SQ, RQ or SRQ): a ring of depth WQE slots of 2^stride_log
 * bytes that the provider produces and the device consumes.  pi is advanced
 * by post_send/post_recv/post_srq_recv under lock; ci by poll_cq when a CQE
 * shows that the device is done with the slots before it.  Both are
 * free-running: the queue holds pi - ci WQEs and is full when that reaches
 * depth, so every slot is usable.
 */
struct pib_wq {
	pthread_spinlock_t lock;	/* the poster (post_*) */
	void *buf;			/* page aligned, NULL without a ring */
	size_t buf_size;
	struct pib_ring_src src;
	uint32_t depth;			/* power of two; 0: QP on an SRQ */
	uint32_t stride_log;
	uint32_t max_sge;		/* SGEs a slot holds (and the device allows) */
	_Atomic(uint32_t) pi;		/* written by the poster, read by poll_cq */
	_Atomic(uint32_t) ci;		/* written by poll_cq, read by the poster */
	/*
	 * An RQ's or SRQ's doorbell record (pib_wqe.h), after the slots in
	 * buf, if has_dbrec was set before pib_wq_init: post_recv writes its
	 * producer index there instead of ringing.
	 */
	bool has_dbrec;
	struct pib_recv_dbrec *dbrec;
};

/*
 * A shared receive queue: a ring of receive WQEs (struct pib_recv_wqe + SGEs)
 * that the QPs created on it take from in ring order.  The device copies a
 * WQE when it takes it, so the slot is free from then on; the provider learns
 * of it from the receive completion, which may arrive on any CQ of any QP on
 * the SRQ.  So poll_cq retires one SRQ slot per such completion (wq.ci,
 * advanced atomically: two CQs may be polled at once), and destroy_qp
 * retires the slots of the QP's completions that nobody will poll
 * (pib_cq_drop_qp_cqes).
 *
 * Depth: one slot more than the max_wr asked for, rounded up to a power of
 * two, so that any srq_limit up to that max_wr is below the depth, as the
 * device requires (limit < depth).  Where the extra slot would pass the
 * device's max_srq_wr, max_wr is only rounded up (so max_wr = max_srq_wr
 * works, with a limit below it).  create_srq and query_srq report the depth
 * as max_wr, since every slot can be posted.
 */
struct pib_srq {
	struct verbs_srq vsrq;		/* vsrq.srq_type IBV_SRQT_XRC: an XRC SRQ */
	struct pib_wq wq;		/* receive WQEs, like an RQ */
	uint32_t srqn;			/* an XRC SRQ's is its srq_num too */
};

struct pib_qp {
	struct verbs_qp vqp;
	struct pib_wq sq;
	struct pib_wq rq;		/* depth 0 on an SRQ */
	struct pib_srq *srq;		/* receives come from here, or NULL */
	uint32_t max_inline;		/* inline bytes a send WQE may carry */
	bool sq_sig_all;		/* every send WQE is signalled */
	struct pib_qp *table_next;	/* chain in pib_context.qp_table */
	/*
	 * The ibv_qp_ex batch being built, from ibv_wr_start() to
	 * ibv_wr_complete() or ibv_wr_abort(), under sq.lock (qp_ex.c).
	 */
	struct {
		uint32_t first;		/* sq.pi at ibv_wr_start() */
		uint32_t pi;		/* the next slot */
		uint32_t ci;		/* sq.ci as last read */
		int err;		/* the batch's first error, or 0 */
		struct pib_send_wqe *wqe; /* the WQE the setters fill, or NULL */
	} ex;
};

/*
 * An address handle lives only in userspace: a UD send WQE carries the
 * destination itself (ud_dlid, ud_sl), so the device has no AH object.
 */
struct pib_ah {
	struct ibv_ah ibvah;
	uint16_t dlid;
	uint8_t sl;
	bool is_global;
	struct ibv_global_route grh;	/* is_global: the GRH half of the WQE's address vector */
};

static inline struct pib_device *to_pib_dev(struct verbs_device *vdev)
{
	return container_of(vdev, struct pib_device, vdev);
}

static inline struct pib_context *to_pib_context(struct ibv_context *ibvctx)
{
	return container_of(ibvctx, struct pib_context, ibvctx.context);
}

static inline struct pib_pd *to_pib_pd(struct ibv_pd *ibvpd)
{
	return container_of(ibvpd, struct pib_pd, ibvpd);
}

/* The parent domain ibvpd is, or NULL if it is a plain PD (or none). */
static inline struct pib_pd *to_pib_parent(struct ibv_pd *ibvpd)
{
	return ibvpd && to_pib_pd(ibvpd)->protection ? to_pib_pd(ibvpd) : NULL;
}

static inline struct pib_td *to_pib_td(struct ibv_td *ibvtd)
{
	return container_of(ibvtd, struct pib_td, ibvtd);
}

static inline struct pib_cq *to_pib_cq(struct ibv_cq *ibvcq)
{
	return container_of(ibvcq, struct pib_cq, vcq.cq);
}

static inline struct pib_qp *to_pib_qp(struct ibv_qp *ibvqp)
{
	return container_of(ibvqp, struct pib_qp, vqp.qp);
}

static inline struct pib_srq *to_pib_srq(struct ibv_srq *ibvsrq)
{
	return container_of(ibvsrq, struct pib_srq, vsrq.srq);
}

static inline struct pib_ah *to_pib_ah(struct ibv_ah *ibvah)
{
	return container_of(ibvah, struct pib_ah, ibvah);
}

/* Rings shared with the device (verbs.c); src says whose memory to use. */
void *pib_alloc_ring(struct pib_ring_src *src, size_t size);
void pib_free_ring(const struct pib_ring_src *src, void *buf, size_t size);

/* The QPN table (qp.c). */
int pib_qp_table_init(struct pib_context *ctx, uint32_t max_qp);
void pib_qp_table_fini(struct pib_context *ctx);
bool pib_qp_retire(struct pib_context *ctx, const struct pib_cqe *cqe);

/* The extended send interface (qp_ex.c). */
bool pib_qp_ex_ops_allowed(enum ibv_qp_type qp_type, uint64_t ops);
void pib_qp_ex_init(struct pib_qp *qp, uint64_t ops);

/* Writing send WQEs: post_send's helpers, shared with the ibv_qp_ex builders (wq.c). */
#define PIB_SEND_FLAGS_SUPPORTED \
	(IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_FENCE | IBV_SEND_INLINE)

int pib_check_bind(const struct ibv_mw *mw, uint32_t rkey,
		   const struct ibv_mw_bind_info *bind);
uint8_t pib_wqe_flags(const struct pib_qp *qp, unsigned int send_flags);
void pib_write_sges(struct pib_sge *dst, const struct ibv_sge *src,
		    int num_sge);
void pib_write_bind_wqe(struct pib_qp *qp, void *slot,
			unsigned int send_flags, uint64_t wr_id,
			const struct ibv_mw *mw, uint32_t rkey,
			const struct ibv_mw_bind_info *bind);
void pib_write_ud_dest(struct pib_send_wqe *wqe, struct ibv_ah *ibvah,
		       uint32_t remote_qpn, uint32_t remote_qkey);
void pib_sq_publish(struct pib_context *ctx, struct pib_qp *qp,
		    uint32_t first, uint32_t pi);

/* Work queue rings, shared by QPs and SRQs (wq.c). */
int pib_wq_init(struct pib_wq *wq, struct ibv_pd *pd, uint64_t res_type);

/* The doorbell record of a receive ring at buf: the page after its slots. */
static inline struct pib_recv_dbrec *pib_wq_dbrec_of(void *buf, uint32_t depth,
						     uint32_t stride_log)
{
	return (struct pib_recv_dbrec *)((uint8_t *)buf +
		((size_t)pib_ring_pages(depth, stride_log) << PIB_PAGE_SHIFT));
}
void pib_wq_fini(struct pib_wq *wq);
int pib_wq_post_recv(struct pib_context *ctx, struct pib_wq *wq,
		     enum pib_uar_offset db, uint32_t obj,
		     struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);

static inline void *pib_wq_slot(struct pib_wq *wq, uint32_t index)
{
	return (uint8_t *)wq->buf + ((index & (wq->depth - 1)) << wq->stride_log);
}

/* Room for one more WQE?  ci is re-read only when the ring looks full. */
static inline bool pib_wq_full(struct pib_wq *wq, uint32_t pi, uint32_t *ci)
{
	if (pi - *ci < wq->depth)
		return false;
	*ci = atomic_load_explicit(&wq->ci, memory_order_acquire);
	return pi - *ci >= wq->depth;
}

/* Retiring SRQ slots (srq.c, cq.c). */
void pib_srq_retire(struct pib_srq *srq);
void pib_cq_drop_qp_cqes(struct pib_cq *cq, uint32_t qpn, struct pib_srq *srq);

/*
 * Ring a doorbell: one 64-bit write to the context's UAR page, so that the
 * object number (with the CQ's arm bits) and the index reach the device
 * together; two 32-bit writes could interleave with another thread's doorbell
 * for a different object.  The caller puts a udma_to_device_barrier() before
 * it, so that the memory the doorbell announces is visible to the device
 * first.
 */
static inline void pib_ring_doorbell(struct pib_context *ctx,
				     enum pib_uar_offset offset,
				     uint32_t obj_flags, uint32_t index)
{
	uint64_t db = (uint64_t)index << PIB_DB_INDEX_SHIFT | obj_flags;

	mmio_write64_le((uint8_t *)ctx->uar + offset, htole64(db));
}

#endif /* __PIB_H__ */
