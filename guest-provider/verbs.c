// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * verbs.c - the control-path verbs of the pib provider: device and port
 * queries, PDs, MRs, memory windows and address handles, and the memory the
 * rings live in.
 *
 * Most of these are one uverbs command: the kernel driver asks the device
 * through its admin queue and libibverbs' ibv_cmd_* helpers marshal the
 * answer.  The provider adds only what the kernel ABI leaves to userspace,
 * such as rendering the firmware version string or keeping address handles,
 * which the device never sees as objects.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pib.h"
#include "verbs.h"

int pib_query_device_ex(struct ibv_context *ibvctx,
			const struct ibv_query_device_ex_input *input,
			struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw_ver;
	int err;

	err = ibv_cmd_query_device_any(ibvctx, input, attr, attr_size, &resp,
				       &resp_size);
	if (err)
		return err;

	/*
	 * uverbs carries the firmware version as a raw u64: the driver passes
	 * on pib_device_attr.fw_ver, [47:32] major, [31:16] minor,
	 * [15:0] sub-minor.
	 */
	fw_ver = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%u", (unsigned int)(fw_ver >> 32) & 0xffff,
		 (unsigned int)(fw_ver >> 16) & 0xffff,
		 (unsigned int)fw_ver & 0xffff);

	return 0;
}

/*
 * The limits the provider checks create_cq, create_qp and create_srq
 * against, so that a request the device would refuse fails before any memory
 * is pinned.
 */
int pib_query_device_limits(struct pib_context *ctx, uint32_t *max_qp)
{
	struct ibv_device_attr_ex attr;
	int err;

	err = ibv_cmd_query_device_any(&ctx->ibvctx.context, NULL, &attr,
				       sizeof(attr.orig_attr), NULL, NULL);
	if (err)
		return err;

	ctx->max_qp_wr = attr.orig_attr.max_qp_wr;
	ctx->max_sge = attr.orig_attr.max_sge;
	ctx->max_cqe = attr.orig_attr.max_cqe;
	ctx->max_srq_wr = attr.orig_attr.max_srq_wr;
	ctx->max_srq_sge = attr.orig_attr.max_srq_sge;
	*max_qp = attr.orig_attr.max_qp;
	return 0;
}

int pib_query_port(struct ibv_context *ibvctx, uint8_t port,
		   struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd;

	return ibv_cmd_query_port(ibvctx, port, attr, &cmd, sizeof(cmd));
}

struct ibv_pd *pib_alloc_pd(struct ibv_context *ibvctx)
{
	struct ib_uverbs_alloc_pd_resp resp;
	struct ibv_alloc_pd cmd;
	struct pib_pd *pd;
	int err;

	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}

	err = ibv_cmd_alloc_pd(ibvctx, &pd->ibvpd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (err) {
		verbs_err(verbs_get_ctx(ibvctx), "Failed to allocate PD\n");
		free(pd);
		errno = err;
		return NULL;
	}

	return &pd->ibvpd;
}

int pib_dealloc_pd(struct ibv_pd *ibvpd)
{
	struct pib_pd *pd = to_pib_pd(ibvpd);
	int err;

	err = ibv_cmd_dealloc_pd(ibvpd);
	if (err) {
		verbs_err(verbs_get_ctx(ibvpd->context),
			  "Failed to deallocate PD\n");
		return err;
	}

	free(pd);
	return 0;
}

/*
 * Ring memory: page aligned (the kernel hands the device a list of 4 KiB
 * pages), zeroed (a CQE slot must start out with phase 0, which the device's
 * first pass does not use), and excluded from fork() so that a child's
 * copy-on-write cannot move the pages the device writes.
 */
void *pib_alloc_ring(size_t size)
{
	void *buf;
	int err;

	err = posix_memalign(&buf, PIB_PAGE_SIZE, size);
	if (err) {
		errno = err;
		return NULL;
	}
	memset(buf, 0, size);

	err = ibv_dontfork_range(buf, size);
	if (err) {
		free(buf);
		errno = err;
		return NULL;
	}
	return buf;
}

void pib_free_ring(void *buf, size_t size)
{
	if (!buf)
		return;
	ibv_dofork_range(buf, size);
	free(buf);
}

struct ibv_mr *pib_reg_mr(struct ibv_pd *ibvpd, void *addr, size_t length,
			  uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct verbs_mr *vmr;
	int err;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr) {
		errno = ENOMEM;
		return NULL;
	}

	/* The kernel pins the pages and gives the device their list. */
	err = ibv_cmd_reg_mr(ibvpd, addr, length, hca_va, access, vmr, &cmd,
			     sizeof(cmd), &resp, sizeof(resp));
	if (err) {
		verbs_err(verbs_get_ctx(ibvpd->context),
			  "Failed to register MR: %d\n", err);
		free(vmr);
		errno = err;
		return NULL;
	}

	return &vmr->ibv_mr;
}

int pib_dereg_mr(struct verbs_mr *vmr)
{
	int err;

	err = ibv_cmd_dereg_mr(vmr);
	if (err)
		return err;

	free(vmr);
	return 0;
}

/*
 * A memory window is a device object (ALLOC_MW) that starts out unbound:
 * its rkey grants nothing until a BIND_MW WQE binds it (pib_bind_mw for type
 * 1, a posted IBV_WR_BIND_MW for type 2).  The kernel keeps the handle; the
 * provider keeps nothing of its own.
 */
struct ibv_mw *pib_alloc_mw(struct ibv_pd *ibvpd, enum ibv_mw_type type)
{
	struct ib_uverbs_alloc_mw_resp resp;
	struct ibv_alloc_mw cmd;
	struct ibv_mw *mw;
	int err;

	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EINVAL;
		return NULL;
	}

	mw = calloc(1, sizeof(*mw));
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}

	err = ibv_cmd_alloc_mw(ibvpd, type, mw, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (err) {
		verbs_err(verbs_get_ctx(ibvpd->context),
			  "Failed to allocate MW: %d\n", err);
		free(mw);
		errno = err;
		return NULL;
	}

	return mw;
}

int pib_dealloc_mw(struct ibv_mw *mw)
{
	int err;

	/* A bound window is invalidated with it. */
	err = ibv_cmd_dealloc_mw(mw);
	if (err)
		return err;

	free(mw);
	return 0;
}

struct ibv_ah *pib_create_ah(struct ibv_pd *ibvpd, struct ibv_ah_attr *attr)
{
	struct pib_ah *ah;

	/* An SL is 4 bits on the wire; the device has one port and one GID. */
	if (attr->port_num < 1 || attr->port_num > PIB_NUM_PORTS ||
	    attr->sl > 15 ||
	    (attr->is_global && attr->grh.sgid_index >= PIB_GID_TBL_LEN)) {
		errno = EINVAL;
		return NULL;
	}

	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}

	ah->dlid = attr->dlid;
	ah->sl = attr->sl;
	ah->is_global = attr->is_global;
	if (attr->is_global)
		ah->grh = attr->grh;

	/* libibverbs fills in ibvah.context and ibvah.pd. */
	return &ah->ibvah;
}

/*
 * Multicast: the kernel sends ATTACH_MCAST / DETACH_MCAST to the device (a slow-path
 * command); the group is the one the SA assigned (rdma_cm's or the application's join).
 */
int pib_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return ibv_cmd_attach_mcast(qp, gid, lid);
}

int pib_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return ibv_cmd_detach_mcast(qp, gid, lid);
}

int pib_destroy_ah(struct ibv_ah *ibvah)
{
	free(to_pib_ah(ibvah));
	return 0;
}
