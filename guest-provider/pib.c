// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib.c - rdma-core provider for the pib HCA: device matching and the user
 * context.
 *
 * libibverbs loads this provider for an RDMA device whose parent is a PCI
 * function with pib's IDs.  The kernel driver registers with driver_id
 * RDMA_DRIVER_UNKNOWN (an out-of-tree driver cannot own an RDMA_DRIVER_*
 * number), so the match goes by PCI ID, and by uverbs ABI version so that a
 * mismatched driver and provider refuse each other instead of misreading
 * responses.
 *
 * Opening the device allocates a user context, for which the kernel reserves a
 * UAR page of its own; the provider maps it once and keeps it for the data
 * path's doorbells and for reading the device clock.  The context also holds the device limits the data path
 * checks requests against and the QPN table poll_cq looks QPs up in.  Importing another
 * process's command file (ibv_import_device) sets up the same from the existing kernel
 * context.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "pib.h"
#include "verbs.h"

static void pib_free_context(struct ibv_context *ibvctx);

static const struct verbs_match_ent pib_table[] = {
	VERBS_PCI_MATCH(PIB_PCI_VENDOR_ID, PIB_PCI_DEVICE_ID, NULL),
	{}
};

/*
 * Alphabetical.  libibverbs answers every op left unset here (tag matching,
 * on-demand paging, ...) with EOPNOTSUPP.
 */
static const struct verbs_context_ops pib_ctx_ops = {
	.alloc_dm = pib_alloc_dm,
	.alloc_mw = pib_alloc_mw,
	.alloc_parent_domain = pib_alloc_parent_domain,
	.alloc_pd = pib_alloc_pd,
	.alloc_td = pib_alloc_td,
	.attach_mcast = pib_attach_mcast,
	.bind_mw = pib_bind_mw,
	.close_xrcd = pib_close_xrcd,
	.create_ah = pib_create_ah,
	.create_cq = pib_create_cq,
	.create_cq_ex = pib_create_cq_ex,
	.create_qp = pib_create_qp,
	.create_qp_ex = pib_create_qp_ex,
	.create_srq = pib_create_srq,
	.create_srq_ex = pib_create_srq_ex,
	.dealloc_mw = pib_dealloc_mw,
	.dealloc_pd = pib_dealloc_pd,
	.dealloc_td = pib_dealloc_td,
	.dereg_mr = pib_dereg_mr,
	.destroy_ah = pib_destroy_ah,
	.destroy_cq = pib_destroy_cq,
	.destroy_qp = pib_destroy_qp,
	.destroy_srq = pib_destroy_srq,
	.detach_mcast = pib_detach_mcast,
	.free_context = pib_free_context,
	.free_dm = pib_free_dm,
	.get_srq_num = pib_get_srq_num,
	.import_dm = pib_import_dm,
	.import_mr = pib_import_mr,
	.import_pd = pib_import_pd,
	.modify_cq = pib_modify_cq,
	.modify_qp = pib_modify_qp,
	.modify_srq = pib_modify_srq,
	.open_qp = pib_open_qp,
	.open_xrcd = pib_open_xrcd,
	.poll_cq = pib_poll_cq,
	.post_recv = pib_post_recv,
	.post_send = pib_post_send,
	.post_srq_recv = pib_post_srq_recv,
	.query_device_ex = pib_query_device_ex,
	.query_port = pib_query_port,
	.query_qp = pib_query_qp,
	.query_rt_values = pib_query_rt_values,
	.query_srq = pib_query_srq,
	.reg_dm_mr = pib_reg_dm_mr,
	.reg_dmabuf_mr = pib_reg_dmabuf_mr,
	.reg_mr = pib_reg_mr,
	.req_notify_cq = pib_req_notify_cq,
	.rereg_mr = pib_rereg_mr,
	.resize_cq = pib_resize_cq,
	.unimport_dm = pib_unimport_dm,
	.unimport_mr = pib_unimport_mr,
	.unimport_pd = pib_unimport_pd,
};

/*
 * A context that could not be set up: freed, with errno set.  Closing cmd_fd (an allocated
 * context's) releases the kernel's ucontext and its UAR page; an imported one's stays the
 * exporter's.
 */
static struct verbs_context *pib_context_fail(struct pib_context *ctx, int err)
{
	verbs_uninit_context(&ctx->ibvctx);
	free(ctx);
	errno = err;
	return NULL;
}

/*
 * What a context needs of the kernel's answer, whether it was just allocated or imported:
 * the UAR page mapped, the device limits, the QPN and SRQN tables.  Returns the context,
 * or NULL with errno set and the context freed.
 */
static struct verbs_context *pib_set_context(struct pib_context *ctx, int cmd_fd,
					     uint32_t uar_index,
					     uint64_t uar_mmap_key,
					     uint32_t uar_size,
					     uint32_t comp_mask,
					     uint32_t flags)
{
	uint32_t max_qp;
	int err;

	/* Without a UAR page there is no way to ring a doorbell. */
	if (!uar_size) {
		verbs_err(&ctx->ibvctx, "Kernel returned no UAR page\n");
		return pib_context_fail(ctx, EINVAL);
	}

	/* Doorbells are written, the clock registers read (pib_hw.h). */
	ctx->recv_dbrec = (comp_mask & PIB_IBV_UCTX_RESP_MASK_FLAGS) &&
			  (flags & PIB_IBV_UCTX_F_RECV_DBREC);
	ctx->uar_size = uar_size;
	ctx->uar = mmap(NULL, ctx->uar_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			cmd_fd, uar_mmap_key);
	if (ctx->uar == MAP_FAILED) {
		err = errno;
		verbs_err(&ctx->ibvctx, "Failed to map UAR page %u: %d\n",
			  uar_index, err);
		return pib_context_fail(ctx, err);
	}
	verbs_debug(&ctx->ibvctx, "UAR page %u mapped, %zu bytes\n",
		    uar_index, ctx->uar_size);

	err = pib_query_device_limits(ctx, &max_qp);
	if (err) {
		verbs_err(&ctx->ibvctx, "Failed to query device limits: %d\n",
			  err);
		goto err_unmap_uar;
	}

	err = pib_qp_table_init(ctx, max_qp);
	if (err)
		goto err_unmap_uar;
	err = pib_srq_table_init(ctx);
	if (err) {
		pib_qp_table_fini(ctx);
		goto err_unmap_uar;
	}

	verbs_set_ops(&ctx->ibvctx, &pib_ctx_ops);
	return &ctx->ibvctx;

err_unmap_uar:
	munmap(ctx->uar, ctx->uar_size);
	return pib_context_fail(ctx, err);
}

static struct verbs_context *pib_alloc_context(struct ibv_device *vdev,
					       int cmd_fd,
					       void *private_data)
{
	struct pib_alloc_ucontext_resp resp = {};
	struct pib_alloc_ucontext cmd = {};
	struct pib_context *ctx;
	int err;

	ctx = verbs_init_and_alloc_context(vdev, cmd_fd, ctx, ibvctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;

	err = ibv_cmd_get_context(&ctx->ibvctx, &cmd.ibv_cmd, sizeof(cmd),
				  &resp.ibv_resp, sizeof(resp));
	if (err) {
		verbs_err(&ctx->ibvctx, "ibv_cmd_get_context failed\n");
		return pib_context_fail(ctx, err);
	}
	return pib_set_context(ctx, cmd_fd, resp.uar_index, resp.uar_mmap_key,
			       resp.uar_size, resp.comp_mask, resp.flags);
}

/*
 * ibv_import_device: cmd_fd is another context's command file (dup'd, or passed over a unix
 * socket), whose kernel context already exists.  Its UAR page comes from QUERY_CONTEXT
 * with the driver's attribute (pib_uapi.c in the driver); the rest is set up as for a new
 * context.  The importer's QPs and CQs are its own; the PDs and MRs it shares come in with
 * ibv_import_pd and ibv_import_mr (verbs.c).
 */
static struct verbs_context *pib_import_context(struct ibv_device *vdev,
						int cmd_fd)
{
	struct pib_ibv_alloc_ucontext_resp resp = {};
	DECLARE_COMMAND_BUFFER_LINK(driver_attr, UVERBS_OBJECT_DEVICE,
				    UVERBS_METHOD_QUERY_CONTEXT, 1, NULL);
	struct pib_context *ctx;
	int err;

	ctx = verbs_init_and_alloc_context(vdev, cmd_fd, ctx, ibvctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;

	fill_attr_out_ptr(driver_attr, PIB_IB_ATTR_QUERY_CONTEXT_RESP_UCTX, &resp);
	err = ibv_cmd_query_context(&ctx->ibvctx.context, driver_attr);
	if (err) {
		verbs_err(&ctx->ibvctx, "Failed to query the imported context: %d\n",
			  err);
		return pib_context_fail(ctx, err);
	}
	return pib_set_context(ctx, cmd_fd, resp.uar_index, resp.uar_mmap_key,
			       resp.uar_size, resp.comp_mask, resp.flags);
}

static void pib_free_context(struct ibv_context *ibvctx)
{
	struct pib_context *ctx = to_pib_context(ibvctx);

	pib_srq_table_fini(ctx);
	pib_qp_table_fini(ctx);
	munmap(ctx->uar, ctx->uar_size);
	verbs_uninit_context(&ctx->ibvctx);
	free(ctx);
}

static struct verbs_device *pib_device_alloc(struct verbs_sysfs_dev *sysfs_dev)
{
	struct pib_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;

	return &dev->vdev;
}

static void pib_uninit_device(struct verbs_device *verbs_device)
{
	struct pib_device *dev = to_pib_dev(verbs_device);

	free(dev);
}

static const struct verbs_device_ops pib_dev_ops = {
	.name = "pib",
	.match_min_abi_version = PIB_UVERBS_ABI_VERSION,
	.match_max_abi_version = PIB_UVERBS_ABI_VERSION,
	.match_table = pib_table,
	.alloc_device = pib_device_alloc,
	.uninit_device = pib_uninit_device,
	.alloc_context = pib_alloc_context,
	.import_context = pib_import_context,
};
PROVIDER_DRIVER(pib, pib_dev_ops);
