// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * cq.c - completion queues of the pib provider.
 *
 * The CQ ring is in the provider's memory; the device writes 32-byte CQEs
 * into it by DMA and the provider reads them without entering the kernel.
 * Who owns a slot is told by the CQE's phase bit alone (pib_wqe.h): on the
 * first pass over the ring the device writes phase 1 into each CQE, on the
 * second pass 0, and so on, so a slot still holding the previous pass's
 * value (or the zeroes it started with) is not yet written.  The consumer
 * index record after the ring tells the device how far the provider has read;
 * the device looks at it only when the ring looks full, to tell a slow
 * consumer from an overflow.
 *
 * Arming for a completion event is a doorbell (req_notify_cq); the event
 * itself arrives through the kernel (a CEQE, then the completion channel), so
 * cq_event needs nothing from the provider.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ccan/minmax.h>
#include <util/udma_barrier.h>
#include <util/util.h>

#include "pib.h"
#include "verbs.h"

/* A CQE's status is the verbs numbering, so it is passed on unchanged. */
#define PIB_SAME_STATUS(name, value)                                           \
	static_assert((int)PIB_WC_##name == (int)IBV_WC_##name,               \
		      "CQE status " #name " is the verbs value");
PIB_WC_STATUSES(PIB_SAME_STATUS)

struct ibv_cq *pib_create_cq(struct ibv_context *ibvctx, int cqe,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct pib_context *ctx = to_pib_context(ibvctx);
	struct pib_create_cq_resp resp = {};
	struct pib_create_cq cmd = {};
	size_t ring_size;
	struct pib_cq *cq;
	uint32_t depth;
	int err;

	/*
	 * One slot more than asked for, at least two, a power of two: the
	 * CQ then reports depth - 1 entries, and never more than the device's
	 * max_cqe slots.
	 */
	if (cqe < 0 || (uint32_t)cqe >= ctx->max_cqe) {
		errno = EINVAL;
		return NULL;
	}
	depth = roundup_pow_of_two(max_t(uint32_t, cqe + 1, 2));
	if (depth > ctx->max_cqe) {
		errno = EINVAL;
		return NULL;
	}

	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}

	/* The ring, then one page for the consumer index record. */
	ring_size = (size_t)pib_ring_pages(depth, PIB_CQE_STRIDE_LOG)
		    << PIB_PAGE_SHIFT;
	cq->buf_size = (size_t)pib_cq_pages(depth) << PIB_PAGE_SHIFT;
	cq->buf = pib_alloc_ring(cq->buf_size);
	if (!cq->buf) {
		err = errno;
		goto err_free_cq;
	}
	cq->ring = cq->buf;
	cq->ci_record = (_Atomic(uint32_t) *)((uint8_t *)cq->buf + ring_size);
	cq->depth = depth;
	cq->ci = 0;

	err = pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	if (err)
		goto err_free_ring;

	cmd.depth = depth;
	cmd.buf_addr = (uintptr_t)cq->buf;
	cmd.buf_size = cq->buf_size;
	err = ibv_cmd_create_cq(ibvctx, depth - 1, channel, comp_vector,
				&cq->vcq.cq, &cmd.ibv_cmd, sizeof(cmd),
				&resp.ibv_resp, sizeof(resp));
	if (err) {
		verbs_err(&ctx->ibvctx, "Failed to create CQ: %d\n", err);
		goto err_destroy_lock;
	}

	/* The ring is laid out for depth slots; the device must agree. */
	if (resp.depth != depth || resp.cqn > PIB_DB_OBJ_MASK) {
		verbs_err(&ctx->ibvctx,
			  "Kernel answered CQN %u depth %u for depth %u\n",
			  resp.cqn, resp.depth, depth);
		err = EPROTO;
		goto err_destroy_cq;
	}
	cq->cqn = resp.cqn;
	cq->vcq.cq.cqe = depth - 1;

	return &cq->vcq.cq;

err_destroy_cq:
	ibv_cmd_destroy_cq(&cq->vcq.cq);
err_destroy_lock:
	pthread_spin_destroy(&cq->lock);
err_free_ring:
	pib_free_ring(cq->buf, cq->buf_size);
err_free_cq:
	free(cq);
	errno = err;
	return NULL;
}

int pib_destroy_cq(struct ibv_cq *ibvcq)
{
	struct pib_cq *cq = to_pib_cq(ibvcq);
	int err;

	/* The kernel refuses (BUSY) while a QP still uses the CQ. */
	err = ibv_cmd_destroy_cq(ibvcq);
	if (err)
		return err;

	/* The device no longer writes the ring: it can go. */
	pthread_spin_destroy(&cq->lock);
	pib_free_ring(cq->buf, cq->buf_size);
	free(cq);
	return 0;
}

/*
 * The CQE at index (consumer index or later), if the device has written it
 * on that pass, else NULL (the phase-bit rule: pib_hw.h, "The phase bit").
 */
static struct pib_cqe *pib_cq_cqe_at(struct pib_cq *cq, uint32_t index)
{
	struct pib_cqe *cqe = &cq->ring[index & (cq->depth - 1)];

	if (!pib_ring_owned(cqe->flags & PIB_CQE_F_PHASE, index, cq->depth))
		return NULL;

	/*
	 * The device writes the CQE's other fields before (or with) the phase
	 * bit; do not let the CPU read them before the phase bit it checked.
	 */
	udma_from_device_barrier();
	return cqe;
}

static struct pib_cqe *pib_cq_next_cqe(struct pib_cq *cq)
{
	return pib_cq_cqe_at(cq, cq->ci);
}

/*
 * destroy_qp of a QP on an SRQ, with the CQ lock held, before the QP leaves
 * the QPN table: retire one SRQ slot for each of the QP's receive
 * completions (its flush CQEs included) that the device has written and
 * poll_cq has not consumed.  poll_cq will drop them as the completions of a
 * QP that no longer exists, but the SRQ slots they stand for are free and
 * would otherwise be lost for good.  The device wrote them all before
 * DESTROY_QP completed; the walk stops at the first slot not yet written.
 */
void pib_cq_retire_srq_cqes(struct pib_cq *cq, uint32_t qpn,
			    struct pib_srq *srq)
{
	struct pib_cqe *cqe;
	uint32_t i;

	for (i = 0; i < cq->depth; i++) {
		cqe = pib_cq_cqe_at(cq, cq->ci + i);
		if (!cqe)
			break;
		if ((cqe->opcode & PIB_CQE_RECV) &&
		    (le32toh(cqe->qpn) & PIB_DB_OBJ_MASK) == qpn)
			pib_srq_retire(srq);
	}
}

static enum ibv_wc_opcode pib_wc_opcode(uint8_t opcode)
{
	switch (opcode) {
	case PIB_CQE_SEND:		return IBV_WC_SEND;
	case PIB_CQE_RDMA_WRITE:	return IBV_WC_RDMA_WRITE;
	case PIB_CQE_RDMA_READ:		return IBV_WC_RDMA_READ;
	case PIB_CQE_COMP_SWAP:		return IBV_WC_COMP_SWAP;
	case PIB_CQE_FETCH_ADD:		return IBV_WC_FETCH_ADD;
	case PIB_CQE_BIND_MW:		return IBV_WC_BIND_MW;
	case PIB_CQE_LOCAL_INV:		return IBV_WC_LOCAL_INV;
	case PIB_CQE_RECV:		return IBV_WC_RECV;
	case PIB_CQE_RECV_RDMA_IMM:	return IBV_WC_RECV_RDMA_WITH_IMM;
	}
	return IBV_WC_SEND;	/* unknown; pib_cqe_to_wc reports an error */
}

static bool pib_cqe_opcode_known(uint8_t opcode)
{
	switch (opcode) {
	case PIB_CQE_SEND:
	case PIB_CQE_RDMA_WRITE:
	case PIB_CQE_RDMA_READ:
	case PIB_CQE_COMP_SWAP:
	case PIB_CQE_FETCH_ADD:
	case PIB_CQE_BIND_MW:
	case PIB_CQE_LOCAL_INV:
	case PIB_CQE_RECV:
	case PIB_CQE_RECV_RDMA_IMM:
		return true;
	}
	return false;
}

static void pib_cqe_to_wc(const struct pib_cqe *cqe, struct ibv_wc *wc)
{
	uint8_t flags = cqe->flags;

	*wc = (struct ibv_wc){
		.wr_id = le64toh(cqe->wr_id),
		.status = cqe->status,
		.opcode = pib_wc_opcode(cqe->opcode),
		.byte_len = le32toh(cqe->byte_len),
		.qp_num = le32toh(cqe->qpn) & PIB_DB_OBJ_MASK,
		.src_qp = le32toh(cqe->src_qp) & PIB_DB_OBJ_MASK,
		.slid = le16toh(cqe->slid),
		.sl = cqe->sl,
	};

	/* A status or opcode this provider does not know is a device error. */
	if (cqe->status > PIB_WC_GENERAL_ERR ||
	    (cqe->status == PIB_WC_SUCCESS &&
	     !pib_cqe_opcode_known(cqe->opcode))) {
		wc->status = IBV_WC_GENERAL_ERR;
		wc->vendor_err = cqe->status;
		return;
	}

	if (flags & PIB_CQE_F_IMM) {
		/* Immediate data stays in network order, as on the wire. */
		wc->imm_data = (__be32)cqe->imm_inv;
		wc->wc_flags |= IBV_WC_WITH_IMM;
	} else if (flags & PIB_CQE_F_INV) {
		wc->invalidated_rkey = le32toh(cqe->imm_inv);
		wc->wc_flags |= IBV_WC_WITH_INV;
	}
	if (flags & PIB_CQE_F_GRH)
		wc->wc_flags |= IBV_WC_GRH;
	/* A datagram's receive: the P_Key index it matched, the DLID path bits (0 otherwise). */
	if (cqe->opcode & PIB_CQE_RECV) {
		wc->pkey_index = le32toh(cqe->qpn) >> PIB_CQE_PKEY_INDEX_SHIFT;
		wc->dlid_path_bits = (le32toh(cqe->src_qp) >> PIB_CQE_PATH_BITS_SHIFT) &
				     PIB_CQE_PATH_BITS_MASK;
	}
}

int pib_poll_cq(struct ibv_cq *ibvcq, int num_entries, struct ibv_wc *wc)
{
	struct pib_context *ctx = to_pib_context(ibvcq->context);
	struct pib_cq *cq = to_pib_cq(ibvcq);
	struct pib_cqe *cqe;
	bool consumed = false;
	int npolled = 0;

	pthread_spin_lock(&cq->lock);
	while (npolled < num_entries) {
		cqe = pib_cq_next_cqe(cq);
		if (!cqe)
			break;

		/*
		 * Free the WQE slots this completion retires.  A CQE for a QP
		 * that was destroyed (the device flushes a dying QP's WQEs)
		 * belongs to no one and is dropped.
		 */
		if (pib_qp_retire(ctx, cqe))
			pib_cqe_to_wc(cqe, &wc[npolled++]);
		cq->ci++;
		consumed = true;
	}

	/*
	 * Tell the device how far the ring has been read.  The release order
	 * keeps this store after the reads of the CQEs above: once the device
	 * sees the new index it may overwrite their slots.
	 */
	if (consumed)
		atomic_store_explicit(cq->ci_record, htole32(cq->ci),
				      memory_order_release);
	pthread_spin_unlock(&cq->lock);

	return npolled;
}

int pib_req_notify_cq(struct ibv_cq *ibvcq, int solicited_only)
{
	struct pib_context *ctx = to_pib_context(ibvcq->context);
	struct pib_cq *cq = to_pib_cq(ibvcq);
	uint32_t arm = PIB_DB_CQ_ARM;

	if (solicited_only)
		arm |= PIB_DB_CQ_SOLICITED;

	/*
	 * The doorbell carries the consumer index with the arm bits, so it is
	 * built under the lock that poll_cq advances the index under.  The
	 * barrier keeps the consumer index record written by an earlier
	 * poll_cq ahead of the doorbell.
	 */
	pthread_spin_lock(&cq->lock);
	udma_to_device_barrier();
	pib_ring_doorbell(ctx, PIB_UAR_CQ_DB, cq->cqn | arm, cq->ci);
	pthread_spin_unlock(&cq->lock);

	return 0;
}
