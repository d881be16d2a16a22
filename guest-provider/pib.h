/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * pib.h - rdma-core provider for the pib HCA: objects shared by pib.c, verbs.c,
 * cq.c and qp.c.
 *
 * The provider sees the device through headers shared with every other layer:
 * pib_hw.h (PCI identity, UAR doorbell layout), pib_wqe.h (WQE and CQE
 * formats) and pib-abi.h (what the kernel driver and the provider pass each
 * other in uverbs commands).  guest-provider/build.sh copies them from the
 * repo's include/ next to this file; they are never edited here.
 *
 * The data path bypasses the kernel.  The provider allocates every ring
 * (CQ, SQ, RQ) in its own memory and hands it to the kernel once, at create
 * time; the kernel pins it and gives the device its page list.  From then on
 * the provider writes WQEs and reads CQEs in that memory directly and rings
 * doorbells on the context's UAR page: posting and polling make no system
 * call.
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
DECLARE_DRV_CMD(pib_create_cq, IB_USER_VERBS_CMD_CREATE_CQ,
		pib_ibv_create_cq, pib_ibv_create_cq_resp);
DECLARE_DRV_CMD(pib_create_qp, IB_USER_VERBS_CMD_CREATE_QP,
		pib_ibv_create_qp, pib_ibv_create_qp_resp);

/*
 * The device's max_inline_data (struct pib_device_attr).  uverbs does not
 * carry it to userspace, so the provider knows it from the device's
 * documentation; the kernel confirms the figure per QP in CREATE_QP's
 * max_inline.
 */
#define PIB_MAX_INLINE_DATA	256

/* WQE strides, log2 (pib_qp_create's sq_stride_log / rq_stride_log). */
#define PIB_SQ_STRIDE_LOG_MIN	6	/* the 64-byte send control segment */
#define PIB_RQ_STRIDE_LOG_MIN	4	/* the 16-byte receive header */
#define PIB_STRIDE_LOG_MAX	PIB_PAGE_SHIFT	/* a WQE never straddles a page */

struct pib_device {
	struct verbs_device vdev;
};

struct pib_qp;

struct pib_context {
	struct verbs_context ibvctx;
	/*
	 * This context's UAR page (page resp.uar_index of BAR2), mapped
	 * write-only and non-cached.  Doorbells are single 64-bit writes at
	 * the offsets of enum pib_uar_offset; the device drops (and counts)
	 * doorbells for QPs/CQs that were not created on this page.
	 */
	void *uar;
	size_t uar_size;

	/* Device limits (QUERY_DEVICE at open), checked before any command. */
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_cqe;

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
};

/* Room for the PD number once the data path needs it (AHs, MRs). */
struct pib_pd {
	struct ibv_pd ibvpd;
};

/*
 * A completion queue: a ring of depth CQEs that the device produces and the
 * provider consumes, followed by one page whose first u32 is the consumer
 * index record (pib_wqe.h).
 */
struct pib_cq {
	struct verbs_cq vcq;
	pthread_spinlock_t lock;	/* poll_cq and req_notify_cq */
	void *buf;			/* ring + record page, page aligned */
	size_t buf_size;
	struct pib_cqe *ring;		/* == buf */
	_Atomic(uint32_t) *ci_record;	/* little-endian, read by the device */
	uint32_t depth;			/* power of two */
	uint32_t ci;			/* next CQE to look at, free-running */
	uint32_t cqn;
};

/*
 * A work queue (SQ or RQ): a ring of depth WQE slots of 2^stride_log bytes
 * that the provider produces and the device consumes.  pi is advanced by
 * post_send/post_recv under lock; ci by poll_cq when a CQE shows that the
 * device is done with the slots before it.  Both are free-running: the queue
 * holds pi - ci WQEs and is full when that reaches depth.
 */
struct pib_wq {
	pthread_spinlock_t lock;	/* post_send or post_recv */
	void *buf;			/* page aligned, NULL without a ring */
	size_t buf_size;
	uint32_t depth;			/* power of two; 0 = no ring (SRQ) */
	uint32_t stride_log;
	uint32_t max_sge;		/* SGEs a slot holds (and the device allows) */
	_Atomic(uint32_t) pi;		/* written by the poster, read by poll_cq */
	_Atomic(uint32_t) ci;		/* written by poll_cq, read by the poster */
};

struct pib_qp {
	struct verbs_qp vqp;
	struct pib_wq sq;
	struct pib_wq rq;
	uint32_t max_inline;		/* inline bytes a send WQE may carry */
	bool sq_sig_all;		/* every send WQE is signalled */
	struct pib_qp *table_next;	/* chain in pib_context.qp_table */
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
	struct ibv_global_route grh;	/* kept, but no WQE field carries it yet */
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

static inline struct pib_cq *to_pib_cq(struct ibv_cq *ibvcq)
{
	return container_of(ibvcq, struct pib_cq, vcq.cq);
}

static inline struct pib_qp *to_pib_qp(struct ibv_qp *ibvqp)
{
	return container_of(ibvqp, struct pib_qp, vqp.qp);
}

static inline struct pib_ah *to_pib_ah(struct ibv_ah *ibvah)
{
	return container_of(ibvah, struct pib_ah, ibvah);
}

/* Rings shared with the device (verbs.c). */
void *pib_alloc_ring(size_t size);
void pib_free_ring(void *buf, size_t size);

/* The QPN table (qp.c). */
int pib_qp_table_init(struct pib_context *ctx, uint32_t max_qp);
void pib_qp_table_fini(struct pib_context *ctx);
bool pib_qp_retire(struct pib_context *ctx, const struct pib_cqe *cqe);

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
