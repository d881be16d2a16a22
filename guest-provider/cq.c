// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * cq.c - completion queues of the pib provider.
 *
 * The CQ ring is in the provider's memory; the device writes 32-byte CQEs
 * into it by DMA and the provider reads them without entering the kernel.
 * A CQ created with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP has 64-byte slots
 * instead, the CQE followed by the device clock when the device wrote it
 * (struct pib_cqe_ts); ibv_query_rt_values_ex reads the same clock from the
 * UAR page (see the end of this file).
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
 * cq_event needs nothing from the provider.  How long an event may wait to
 * cover more completions (modify_cq) is the kernel's to set.
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

/*
 * The work completion fields an extended CQ can report: all but the VLAN, flow
 * and tag ones, and (when the device has its clock) the completion timestamp
 * in the device clock's own units and the wall-clock one, the machine's real
 * time in ns: both are in every 64-byte CQE (struct pib_cqe_ts).
 */
#define PIB_CQ_WC_FLAGS		IBV_WC_STANDARD_FLAGS
#define PIB_CQ_WC_FLAGS_CLOCK	(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | \
				 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
#define PIB_CQ_CREATE_FLAGS	IBV_CREATE_CQ_ATTR_SINGLE_THREADED

static void pib_cq_ex_init(struct pib_cq *cq, uint64_t wc_flags);

struct ibv_cq_ex *pib_create_cq_ex(struct ibv_context *ibvctx,
				   struct ibv_cq_init_attr_ex *attr)
{
	struct pib_context *ctx = to_pib_context(ibvctx);
	struct pib_create_cq_ex_resp resp = {};
	struct pib_create_cq_ex cmd = {};
	uint64_t wc_flags_ok = PIB_CQ_WC_FLAGS |
			       (ctx->clock ? PIB_CQ_WC_FLAGS_CLOCK : 0);
	bool ts = attr->wc_flags & PIB_CQ_WC_FLAGS_CLOCK;
	uint32_t cqe_log = ts ? PIB_CQE_TS_STRIDE_LOG : PIB_CQE_STRIDE_LOG;
	int cqe = attr->cqe;
	size_t ring_size;
	struct pib_cq *cq;
	uint32_t depth;
	int err;

	if (attr->comp_mask & ~(IBV_CQ_INIT_ATTR_MASK_FLAGS |
				IBV_CQ_INIT_ATTR_MASK_PD) ||
	    attr->wc_flags & ~wc_flags_ok ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	     attr->flags & ~PIB_CQ_CREATE_FLAGS)) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	/*
	 * One slot more than asked for, at least two, a power of two: the
	 * CQ then reports depth - 1 entries.  max_cqe is what the driver
	 * reports, the deepest ring less that slot, so every count up to it
	 * fits.
	 */
	if (cqe < 0 || (uint32_t)cqe > ctx->max_cqe) {
		errno = EINVAL;
		return NULL;
	}
	depth = roundup_pow_of_two(max_t(uint32_t, cqe + 1, 2));
	if (depth - 1 > ctx->max_cqe) {
		errno = EINVAL;
		return NULL;
	}

	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}

	/* The ring, then one page for the consumer index record. */
	ring_size = (size_t)pib_ring_pages(depth, cqe_log) << PIB_PAGE_SHIFT;
	cq->buf_size = (size_t)pib_cq_pages(depth, cqe_log) << PIB_PAGE_SHIFT;
	/* A parent domain, if given, is the CQ's allocator (and nothing else). */
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
		cq->src.pad = to_pib_parent(attr->parent_domain);
		if (!cq->src.pad) {
			err = EINVAL;
			goto err_free_cq;
		}
	}
	cq->src.res_type = PIB_RES_TYPE_CQ;
	cq->buf = pib_alloc_ring(&cq->src, cq->buf_size);
	if (!cq->buf) {
		err = errno;
		goto err_free_cq;
	}
	cq->ring = cq->buf;
	cq->ci_record = (_Atomic(uint32_t) *)((uint8_t *)cq->buf + ring_size);
	cq->depth = depth;
	cq->cqe_log = cqe_log;
	cq->ci = 0;

	err = pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	if (err)
		goto err_free_ring;

	cmd.depth = depth;
	cmd.buf_addr = (uintptr_t)cq->buf;
	cmd.buf_size = cq->buf_size;
	/* A timestamp wc flag becomes the verbs' TIMESTAMP_COMPLETION flag. */
	if (ts) {
		cmd.comp_mask = PIB_IBV_CREATE_CQ_MASK_FLAGS;
		cmd.flags = PIB_IBV_CQ_F_TIMESTAMP;
	}
	err = ibv_cmd_create_cq_ex(ibvctx,
				   &(struct ibv_cq_init_attr_ex){
					.cqe = depth - 1,
					.channel = attr->channel,
					.comp_vector = attr->comp_vector,
					.wc_flags = attr->wc_flags &
						    PIB_CQ_WC_FLAGS_CLOCK,
				   },
				   &cq->vcq, &cmd.ibv_cmd, sizeof(cmd),
				   &resp.ibv_resp, sizeof(resp), 0);
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
	pib_cq_ex_init(cq, attr->wc_flags);

	return &cq->vcq.cq_ex;

err_destroy_cq:
	ibv_cmd_destroy_cq(&cq->vcq.cq);
err_destroy_lock:
	pthread_spin_destroy(&cq->lock);
err_free_ring:
	pib_free_ring(&cq->src, cq->buf, cq->buf_size);
err_free_cq:
	free(cq);
	errno = err;
	return NULL;
}

/*
 * Resize: a new (zeroed) ring from the same source as the old, and RESIZE_CQ
 * with the consumer index, under the CQ lock so that nothing polls meanwhile.
 * The device copies the CQEs not yet read to the start of the new ring
 * (pib_hw.h, RESIZE_CQ), so polling goes on at index 0 there, nothing lost or
 * seen twice; if they do not fit, the command fails (EINVAL) and the CQ stays
 * on its old ring.
 */
int pib_resize_cq(struct ibv_cq *ibvcq, int cqe)
{
	struct pib_context *ctx = to_pib_context(ibvcq->context);
	struct pib_cq *cq = to_pib_cq(ibvcq);
	struct pib_resize_cq_resp resp = {};
	struct pib_resize_cq cmd = {};
	struct pib_ring_src src = cq->src, old_src;
	size_t ring_size, buf_size, old_size;
	void *buf, *old_buf;
	uint32_t depth;
	int err;

	if (cqe < 1 || (uint32_t)cqe > ctx->max_cqe)
		return EINVAL;
	depth = roundup_pow_of_two(max_t(uint32_t, cqe + 1, 2));
	/* The same CQE size: the device moves the CQEs as they are. */
	ring_size = (size_t)pib_ring_pages(depth, cq->cqe_log) << PIB_PAGE_SHIFT;
	buf_size = (size_t)pib_cq_pages(depth, cq->cqe_log) << PIB_PAGE_SHIFT;
	buf = pib_alloc_ring(&src, buf_size);
	if (!buf)
		return errno;

	pthread_spin_lock(&cq->lock);
	cmd.depth = depth;
	cmd.buf_addr = (uintptr_t)buf;
	cmd.buf_size = buf_size;
	cmd.ci = cq->ci;
	err = ibv_cmd_resize_cq(ibvcq, depth - 1, &cmd.ibv_cmd, sizeof(cmd),
				&resp.ibv_resp, sizeof(resp));
	if (!err && resp.depth != depth)
		err = EPROTO;	/* cannot happen: the driver checked depth */
	if (err) {
		pthread_spin_unlock(&cq->lock);
		pib_free_ring(&src, buf, buf_size);
		return err;
	}
	/* The old ring goes: the device wrote its last CQE there before. */
	old_buf = cq->buf;
	old_size = cq->buf_size;
	old_src = cq->src;
	cq->buf = buf;
	cq->buf_size = buf_size;
	cq->src = src;
	cq->ring = cq->buf;
	cq->ci_record = (_Atomic(uint32_t) *)((uint8_t *)cq->buf + ring_size);
	cq->depth = depth;
	cq->ci = 0;
	ibvcq->cqe = depth - 1;
	pthread_spin_unlock(&cq->lock);
	pib_free_ring(&old_src, old_buf, old_size);
	return 0;
}

/* ibv_create_cq: the extended verb with the standard fields. */
struct ibv_cq *pib_create_cq(struct ibv_context *ibvctx, int cqe,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct ibv_cq_ex *cq = pib_create_cq_ex(ibvctx,
		&(struct ibv_cq_init_attr_ex){
			.cqe = cqe,
			.channel = channel,
			.comp_vector = comp_vector,
			.wc_flags = IBV_WC_STANDARD_FLAGS,
		});

	return cq ? ibv_cq_ex_to_cq(cq) : NULL;
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
	pib_free_ring(&cq->src, cq->buf, cq->buf_size);
	free(cq);
	return 0;
}

/*
 * The CQE at index (consumer index or later), if the device has written it
 * on that pass, else NULL (the phase-bit rule: pib_hw.h, "The phase bit").
 */
static struct pib_cqe *pib_cq_cqe_at(struct pib_cq *cq, uint32_t index)
{
	struct pib_cqe *cqe = (struct pib_cqe *)((uint8_t *)cq->ring +
		((size_t)(index & (cq->depth - 1)) << cq->cqe_log));

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
 * modify_qp to RESET, and destroy_qp of a QP on an SRQ, with the CQ lock held
 * (and, for destroy_qp, before the QP leaves the QPN table): the QP's
 * completions that the device has written and poll_cq has not consumed are
 * made completions of no QP, which poll_cq drops.  They get the QPN
 * 0xffffff, the multicast QPN, which no QP has.  A receive completion of a QP
 * on an SRQ gives its SRQ slot back first (srq: the QP's SRQ, or NULL), so that
 * those slots, free now, are not lost for good.  The device wrote them all
 * before MODIFY_QP or DESTROY_QP completed, and owned slots before the
 * consumer index record are the provider's: the walk stops at the first slot
 * not yet written.
 */
void pib_cq_drop_qp_cqes(struct pib_cq *cq, uint32_t qpn, struct pib_srq *srq)
{
	struct pib_cqe *cqe;
	uint32_t i;

	for (i = 0; i < cq->depth; i++) {
		cqe = pib_cq_cqe_at(cq, cq->ci + i);
		if (!cqe)
			break;
		if ((le32toh(cqe->qpn) & PIB_DB_OBJ_MASK) != qpn)
			continue;
		if (srq && (cqe->opcode & PIB_CQE_RECV))
			pib_srq_retire(srq);
		cqe->qpn = htole32(PIB_DB_OBJ_MASK);
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
	case PIB_CQE_ATOMIC_WRITE:	return IBV_WC_ATOMIC_WRITE;
	case PIB_CQE_FLUSH:		return IBV_WC_FLUSH;
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
	case PIB_CQE_ATOMIC_WRITE:
	case PIB_CQE_FLUSH:
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
		.dlid_path_bits = (le32toh(cqe->src_qp) >> 24) & 0x7f,
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
	/* An XRC receive: src_qp held the SRQ's number (poll_cq's business). */
	if (flags & PIB_CQE_F_XRC)
		wc->src_qp = 0;
	/* A datagram's receive: the P_Key index it matched, the DLID path bits (0 otherwise). */
	if (cqe->opcode & PIB_CQE_RECV) {
		wc->pkey_index = le32toh(cqe->qpn) >> PIB_CQE_PKEY_INDEX_SHIFT;
		wc->dlid_path_bits = (le32toh(cqe->src_qp) >> PIB_CQE_PATH_BITS_SHIFT) &
				     PIB_CQE_PATH_BITS_MASK;
	}
}

/*
 * Tell the device how far the ring has been read.  The release order keeps
 * this store after the reads of the CQEs before ci: once the device sees the
 * new index it may overwrite their slots.
 */
static void pib_cq_give_back(struct pib_cq *cq)
{
	atomic_store_explicit(cq->ci_record, htole32(cq->ci),
			      memory_order_release);
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

	if (consumed)
		pib_cq_give_back(cq);
	pthread_spin_unlock(&cq->lock);

	return npolled;
}

/* ---- The extended CQ interface (ibv_cq_ex) ------------------------------------------------
 *
 * ibv_start_poll() takes the CQ lock and reads the first completion, ibv_next_poll() the next
 * ones, ibv_end_poll() tells the device how far the ring has been read and lets go of the lock.
 * A completion is decoded once, into cq->cur, as poll_cq decodes it; the ibv_wc_read_*()
 * functions return its fields.  The CQE slots read in between are not given back before
 * end_poll, so the device cannot overwrite the one being read.  No system call.
 */

static struct pib_cq *pib_cq_of_ex(struct ibv_cq_ex *cqx)
{
	return container_of(cqx, struct pib_cq, vcq.cq_ex);
}

/* The next completion of a live QP, decoded into cq->cur; ENOENT when none. */
static int pib_cq_ex_next(struct pib_cq *cq)
{
	struct pib_context *ctx = to_pib_context(cq->vcq.cq.context);
	struct pib_cqe *cqe;

	while ((cqe = pib_cq_next_cqe(cq))) {
		bool live = pib_qp_retire(ctx, cqe);

		cq->ci++;
		if (!live)
			continue;
		pib_cqe_to_wc(cqe, &cq->cur);
		/* The timestamp half was written before the phase (pib_wqe.h). */
		if (cq->cqe_log == PIB_CQE_TS_STRIDE_LOG) {
			const struct pib_cqe_ts *slot =
				container_of(cqe, struct pib_cqe_ts, cqe);

			cq->cur_ts = le64toh(slot->timestamp);
			cq->cur_wallclock = le64toh(slot->wallclock);
		}
		cq->vcq.cq_ex.wr_id = cq->cur.wr_id;
		cq->vcq.cq_ex.status = cq->cur.status;
		return 0;
	}
	return ENOENT;
}

static int pib_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct pib_cq *cq = pib_cq_of_ex(cqx);
	int err;

	if (attr->comp_mask)
		return EINVAL;
	pthread_spin_lock(&cq->lock);
	err = pib_cq_ex_next(cq);
	if (err) {
		/* No end_poll follows an empty start_poll. */
		pib_cq_give_back(cq);
		pthread_spin_unlock(&cq->lock);
	}
	return err;
}

static int pib_next_poll(struct ibv_cq_ex *cqx)
{
	return pib_cq_ex_next(pib_cq_of_ex(cqx));
}

static void pib_end_poll(struct ibv_cq_ex *cqx)
{
	struct pib_cq *cq = pib_cq_of_ex(cqx);

	pib_cq_give_back(cq);
	pthread_spin_unlock(&cq->lock);
}

static enum ibv_wc_opcode pib_wc_read_opcode(struct ibv_cq_ex *cqx)
{
	return pib_cq_of_ex(cqx)->cur.opcode;
}

static uint32_t pib_wc_read_vendor_err(struct ibv_cq_ex *cqx)
{
	return pib_cq_of_ex(cqx)->cur.vendor_err;
}

static uint32_t pib_wc_read_byte_len(struct ibv_cq_ex *cqx)
{
	return pib_cq_of_ex(cqx)->cur.byte_len;
}

/* The immediate data, or the invalidated rkey (ibv_wc_read_invalidated_rkey). */
static __be32 pib_wc_read_imm_data(struct ibv_cq_ex *cqx)
{
	const struct ibv_wc *wc = &pib_cq_of_ex(cqx)->cur;

	return wc->wc_flags & IBV_WC_WITH_INV ? htobe32(wc->invalidated_rkey) :
						wc->imm_data;
}

static uint32_t pib_wc_read_qp_num(struct ibv_cq_ex *cqx)
{
	return pib_cq_of_ex(cqx)->cur.qp_num;
}

static uint32_t pib_wc_read_src_qp(struct ibv_cq_ex *cqx)
{
	return pib_cq_of_ex(cqx)->cur.src_qp;
}

static unsigned int pib_wc_read_wc_flags(struct ibv_cq_ex *cqx)
{
	return pib_cq_of_ex(cqx)->cur.wc_flags;
}

static uint32_t pib_wc_read_slid(struct ibv_cq_ex *cqx)
{
	return pib_cq_of_ex(cqx)->cur.slid;
}

static uint8_t pib_wc_read_sl(struct ibv_cq_ex *cqx)
{
	return pib_cq_of_ex(cqx)->cur.sl;
}

static uint8_t pib_wc_read_dlid_path_bits(struct ibv_cq_ex *cqx)
{
	return pib_cq_of_ex(cqx)->cur.dlid_path_bits;
}

/* The device clock when the device wrote the CQE (ns; hca_core_clock is in kHz). */
static uint64_t pib_wc_read_completion_ts(struct ibv_cq_ex *cqx)
{
	return pib_cq_of_ex(cqx)->cur_ts;
}

static uint64_t pib_wc_read_completion_wallclock_ns(struct ibv_cq_ex *cqx)
{
	return pib_cq_of_ex(cqx)->cur_wallclock;
}

/* The poll and read functions of a CQ, for the fields wc_flags asks for. */
static void pib_cq_ex_init(struct pib_cq *cq, uint64_t wc_flags)
{
	struct ibv_cq_ex *cqx = &cq->vcq.cq_ex;

	cqx->start_poll = pib_start_poll;
	cqx->next_poll = pib_next_poll;
	cqx->end_poll = pib_end_poll;
	cqx->read_opcode = pib_wc_read_opcode;
	cqx->read_vendor_err = pib_wc_read_vendor_err;
	cqx->read_wc_flags = pib_wc_read_wc_flags;
	if (wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		cqx->read_byte_len = pib_wc_read_byte_len;
	if (wc_flags & IBV_WC_EX_WITH_IMM)
		cqx->read_imm_data = pib_wc_read_imm_data;
	if (wc_flags & IBV_WC_EX_WITH_QP_NUM)
		cqx->read_qp_num = pib_wc_read_qp_num;
	if (wc_flags & IBV_WC_EX_WITH_SRC_QP)
		cqx->read_src_qp = pib_wc_read_src_qp;
	if (wc_flags & IBV_WC_EX_WITH_SLID)
		cqx->read_slid = pib_wc_read_slid;
	if (wc_flags & IBV_WC_EX_WITH_SL)
		cqx->read_sl = pib_wc_read_sl;
	if (wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		cqx->read_dlid_path_bits = pib_wc_read_dlid_path_bits;
	if (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		cqx->read_completion_ts = pib_wc_read_completion_ts;
	if (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		cqx->read_completion_wallclock_ns = pib_wc_read_completion_wallclock_ns;
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

/*
 * ibv_modify_cq: event moderation, set by the kernel (MODIFY_CQ in pib_hw.h).
 * As for mlx5, ibv_cmd_modify_cq refuses attr_mask bits other than
 * IBV_CQ_ATTR_MODERATE (EINVAL), and the driver values beyond the device's
 * limits (EINVAL).
 */
int pib_modify_cq(struct ibv_cq *ibvcq, struct ibv_modify_cq_attr *attr)
{
	struct ibv_modify_cq cmd = {};

	return ibv_cmd_modify_cq(ibvcq, attr, &cmd, sizeof(cmd));
}

/* ---- The device clock ---------------------------------------------------------------------
 *
 * The device's free-running clock (pib_hw.h, PIB_UAR_CLOCK_LO/HI), the clock the completion
 * timestamps come from, is in every UAR page, so it is read from the context's own page: no
 * system call.  Two 32-bit halves, read high, low, high: if the high half changed, the low one
 * wrapped in between and the three are read again (as mlx4 and mlx5 read their HCA's timer).
 */
static uint64_t pib_read_clock(struct pib_context *ctx)
{
	const uint8_t *uar = ctx->uar;
	uint32_t hi, lo, hi2;

	hi = mmio_read32(uar + PIB_UAR_CLOCK_HI);
	for (;;) {
		lo = mmio_read32(uar + PIB_UAR_CLOCK_LO);
		hi2 = mmio_read32(uar + PIB_UAR_CLOCK_HI);
		if (hi2 == hi)
			return (uint64_t)hi << 32 | lo;
		hi = hi2;
	}
}

/*
 * ibv_query_rt_values_ex: the raw clock only (IBV_VALUES_MASK_RAW_CLOCK), in the device's
 * units, as tv_nsec with tv_sec 0 (the convention of the verbs API: ticks of hca_core_clock,
 * which are nanoseconds here).  Anything else asked for is EINVAL; no clock, EOPNOTSUPP.
 */
int pib_query_rt_values(struct ibv_context *ibvctx, struct ibv_values_ex *values)
{
	struct pib_context *ctx = to_pib_context(ibvctx);
	uint32_t asked = values->comp_mask;

	if (asked & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	if (!ctx->clock)
		return EOPNOTSUPP;
	values->comp_mask = 0;
	if (!(asked & IBV_VALUES_MASK_RAW_CLOCK))
		return 0;
	values->raw_clock.tv_sec = 0;
	values->raw_clock.tv_nsec = pib_read_clock(ctx);
	values->comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
	return 0;
}
