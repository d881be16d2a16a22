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
				       sizeof(attr), NULL, NULL);
	if (err)
		return err;

	ctx->max_qp_wr = attr.orig_attr.max_qp_wr;
	ctx->max_sge = attr.orig_attr.max_sge;
	ctx->max_cqe = attr.orig_attr.max_cqe;
	ctx->max_srq = attr.orig_attr.max_srq;
	ctx->max_srq_wr = attr.orig_attr.max_srq_wr;
	ctx->max_srq_sge = attr.orig_attr.max_srq_sge;
	*max_qp = attr.orig_attr.max_qp;
	/* The device clock that timestamps completions (the driver says its rate). */
	ctx->clock = attr.hca_core_clock != 0;
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

/*
 * A parent domain (ibv_alloc_parent_domain): a PD in the kernel's and the
 * device's eyes, since it carries the PD's handle, plus what the provider
 * keeps of it: the thread domain and the ring allocator.
 */
struct ibv_pd *pib_alloc_parent_domain(struct ibv_context *ibvctx,
				       struct ibv_parent_domain_init_attr *attr)
{
	struct pib_pd *pad;

	if (ibv_check_alloc_parent_domain(attr))
		return NULL;
	if (attr->comp_mask & ~(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
				IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) ||
	    to_pib_parent(attr->pd)) {
		errno = EINVAL;
		return NULL;
	}
	if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
	    (!attr->alloc || !attr->free)) {
		errno = EINVAL;
		return NULL;
	}

	pad = calloc(1, sizeof(*pad));
	if (!pad) {
		errno = ENOMEM;
		return NULL;
	}
	ibv_initialize_parent_domain(&pad->ibvpd, attr->pd);
	pad->protection = to_pib_pd(attr->pd);
	atomic_fetch_add(&pad->protection->refcnt, 1);
	if (attr->td) {
		pad->td = to_pib_td(attr->td);
		atomic_fetch_add(&pad->td->refcnt, 1);
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pad->alloc = attr->alloc;
		pad->free = attr->free;
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pad->pd_context = attr->pd_context;
	return &pad->ibvpd;
}

struct ibv_td *pib_alloc_td(struct ibv_context *ibvctx,
			    struct ibv_td_init_attr *attr)
{
	struct pib_td *td;

	if (attr->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	td = calloc(1, sizeof(*td));
	if (!td) {
		errno = ENOMEM;
		return NULL;
	}
	td->ibvtd.context = ibvctx;
	return &td->ibvtd;
}

int pib_dealloc_td(struct ibv_td *ibvtd)
{
	struct pib_td *td = to_pib_td(ibvtd);

	if (atomic_load(&td->refcnt))
		return EBUSY;
	free(td);
	return 0;
}

int pib_dealloc_pd(struct ibv_pd *ibvpd)
{
	struct pib_pd *pd = to_pib_pd(ibvpd);
	int err;

	/* Parent domains made of it, or objects made with it, come first. */
	if (atomic_load(&pd->refcnt))
		return EBUSY;
	if (pd->protection) {
		atomic_fetch_sub(&pd->protection->refcnt, 1);
		if (pd->td)
			atomic_fetch_sub(&pd->td->refcnt, 1);
		free(pd);
		return 0;
	}

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
 * ibv_import_pd: a PD of the context this one was imported from (pib_import_context), by its
 * handle.  The driver's PD query (pib_uapi.c) checks that the file holds such a PD and gives
 * its device number, which the provider only logs: the handle is what every command names.
 * The PD stays the exporter's: unimporting frees the provider's copy, never the PD.
 */
struct ibv_pd *pib_import_pd(struct ibv_context *ibvctx, uint32_t pd_handle)
{
	DECLARE_COMMAND_BUFFER(cmd, UVERBS_OBJECT_PD, PIB_IB_METHOD_PD_QUERY, 2);
	struct pib_pd *pd;
	uint32_t pdn;
	int err;

	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}

	fill_attr_in_obj(cmd, PIB_IB_ATTR_QUERY_PD_HANDLE, pd_handle);
	fill_attr_out_ptr(cmd, PIB_IB_ATTR_QUERY_PD_RESP_PDN, &pdn);
	err = execute_ioctl(ibvctx, cmd);
	if (err) {
		verbs_err(verbs_get_ctx(ibvctx),
			  "Failed to import PD handle %u: %d\n", pd_handle, err);
		free(pd);
		errno = err;
		return NULL;
	}
	verbs_debug(verbs_get_ctx(ibvctx), "PD handle %u imported: PD %u\n",
		    pd_handle, pdn);

	pd->ibvpd.context = ibvctx;
	pd->ibvpd.handle = pd_handle;
	return &pd->ibvpd;
}

void pib_unimport_pd(struct ibv_pd *ibvpd)
{
	struct pib_pd *pd = to_pib_pd(ibvpd);

	/*
	 * A parent domain made of it would point at freed memory: keep the copy (a leak, and
	 * said) rather than crash later.  The verb has no way to refuse.
	 */
	if (atomic_load(&pd->refcnt)) {
		verbs_err(verbs_get_ctx(ibvpd->context),
			  "PD handle %u unimported while parent domains use it\n",
			  ibvpd->handle);
		return;
	}
	free(pd);
}

/*
 * Ring memory: page aligned (the kernel hands the device a list of 4 KiB
 * pages), zeroed (a CQE slot must start out with phase 0, which the device's
 * first pass does not use), and excluded from fork() so that a child's
 * copy-on-write cannot move the pages the device writes.  A parent domain's
 * allocator, if it has one, is asked first (src->pad); it may hand the choice
 * back (IBV_ALLOCATOR_USE_DEFAULT).  The object made with the parent domain
 * holds a reference on it until the ring is freed.
 */
void *pib_alloc_ring(struct pib_ring_src *src, size_t size)
{
	struct pib_pd *pad = src->pad;
	void *buf;
	int err;

	src->custom = false;
	if (pad && pad->alloc) {
		buf = pad->alloc(&pad->ibvpd, pad->pd_context, size,
				 PIB_PAGE_SIZE, src->res_type);
		if (!buf) {
			errno = ENOMEM;
			return NULL;
		}
		src->custom = buf != IBV_ALLOCATOR_USE_DEFAULT;
	}
	if (src->custom) {
		if ((uintptr_t)buf % PIB_PAGE_SIZE) {
			err = EINVAL;
			goto err_free;
		}
	} else {
		err = posix_memalign(&buf, PIB_PAGE_SIZE, size);
		if (err) {
			errno = err;
			return NULL;
		}
	}
	memset(buf, 0, size);

	err = ibv_dontfork_range(buf, size);
	if (err)
		goto err_free;
	if (pad)
		atomic_fetch_add(&pad->refcnt, 1);
	return buf;

err_free:
	if (src->custom)
		pad->free(&pad->ibvpd, pad->pd_context, buf, src->res_type);
	else
		free(buf);
	errno = err;
	return NULL;
}

void pib_free_ring(const struct pib_ring_src *src, void *buf, size_t size)
{
	struct pib_pd *pad = src->pad;

	if (!buf)
		return;
	ibv_dofork_range(buf, size);
	if (src->custom)
		pad->free(&pad->ibvpd, pad->pd_context, buf, src->res_type);
	else
		free(buf);
	if (pad)
		atomic_fetch_sub(&pad->refcnt, 1);
}

/*
 * How the MR verbs end, given the kernel's answer err for vmr: the MR, or NULL with vmr
 * freed, errno set and the failure (to do what) logged.
 */
static struct ibv_mr *pib_mr_done(struct ibv_pd *ibvpd, struct verbs_mr *vmr, int err,
				  const char *what)
{
	if (err) {
		verbs_err(verbs_get_ctx(ibvpd->context), "Failed to %s: %d\n", what,
			  err);
		free(vmr);
		errno = err;
		return NULL;
	}
	return &vmr->ibv_mr;
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
	return pib_mr_done(ibvpd, vmr, err, "register MR");
}

/*
 * ibv_reg_dmabuf_mr: an MR over part of a dma-buf (another driver's memory, held as a file
 * descriptor).  The kernel attaches to it and pins it; the MR is then like any other.
 */
struct ibv_mr *pib_reg_dmabuf_mr(struct ibv_pd *ibvpd, uint64_t offset, size_t length,
				 uint64_t iova, int fd, int access)
{
	struct verbs_mr *vmr;
	int err;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr) {
		errno = ENOMEM;
		return NULL;
	}

	err = ibv_cmd_reg_dmabuf_mr(ibvpd, offset, length, iova, fd, access, vmr,
				    NULL);
	return pib_mr_done(ibvpd, vmr, err, "register dma-buf MR");
}

/*
 * The device changes the MR in place (REREG_MR), so its keys stay: the kernel pins the new
 * range, if any, and unpins the old one once the device has let it go.
 */
int pib_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *ibvpd, void *addr,
		 size_t length, int access)
{
	struct ib_uverbs_rereg_mr_resp resp;
	struct ibv_rereg_mr cmd;

	return ibv_cmd_rereg_mr(vmr, flags, addr, length, (uintptr_t)addr, access, ibvpd,
				&cmd, sizeof(cmd), &resp, sizeof(resp));
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
 * ibv_import_mr: an MR of the exporter's context, by its handle, into one of this context's
 * PDs.  The core's QUERY_MR gives its keys and length; the address it was registered
 * at is the exporter's and stays unknown (NULL), as on every provider.
 */
struct ibv_mr *pib_import_mr(struct ibv_pd *ibvpd, uint32_t mr_handle)
{
	struct verbs_mr *vmr;
	int err;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr) {
		errno = ENOMEM;
		return NULL;
	}

	err = ibv_cmd_query_mr(ibvpd, vmr, mr_handle);
	return pib_mr_done(ibvpd, vmr, err, "import an MR by its handle");
}

void pib_unimport_mr(struct ibv_mr *ibvmr)
{
	free(verbs_get_mr(ibvmr));
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

/*
 * XRC domains: a kernel object only (the device checks that an XRC target and
 * the XRC SRQ a request names share one); processes that open the same file
 * share the domain.
 */
struct ibv_xrcd *pib_open_xrcd(struct ibv_context *ibvctx,
			       struct ibv_xrcd_init_attr *attr)
{
	struct ib_uverbs_open_xrcd_resp resp;
	struct ibv_open_xrcd cmd;
	struct verbs_xrcd *xrcd;
	int err;

	xrcd = calloc(1, sizeof(*xrcd));
	if (!xrcd) {
		errno = ENOMEM;
		return NULL;
	}
	err = ibv_cmd_open_xrcd(ibvctx, xrcd, sizeof(*xrcd), attr, &cmd,
				sizeof(cmd), &resp, sizeof(resp));
	if (err) {
		free(xrcd);
		errno = err;
		return NULL;
	}
	return &xrcd->xrcd;
}

int pib_close_xrcd(struct ibv_xrcd *ibvxrcd)
{
	struct verbs_xrcd *xrcd = container_of(ibvxrcd, struct verbs_xrcd, xrcd);
	int err;

	err = ibv_cmd_close_xrcd(xrcd);
	if (err)
		return err;
	free(xrcd);
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
