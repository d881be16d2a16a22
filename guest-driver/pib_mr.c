// SPDX-License-Identifier: GPL-2.0
/*
 * pib_mr.c - memory registration: MRs (the kernel's DMA MR, user MRs, rereg and dereg),
 * fast-registration MRs for kernel consumers (alloc_mr, map_mr_sg), and memory windows.
 *
 * The device holds every MR and window; the driver checks what the consumer asks for, pins
 * user memory, lists its 4 KiB pages (pib_verbs.c) and sends the command.  The commands and
 * the access bits are defined in include/pib_hw.h (struct pib_cmd_reg_mr, pib_cmd_rereg_mr,
 * pib_cmd_alloc_mw, PIB_ACCESS_*); the REG_MR WQE a fast-registration MR is registered by is
 * struct pib_reg_mr_wqe in include/pib_wqe.h.
 */
#include <linux/sizes.h>

#include "pib.h"
#include "pib_com_cmd.h"

/* ------------------------------------------------------------------------------------------
 * Memory regions
 * ------------------------------------------------------------------------------------------ */

/* The access bits are the IB/verbs values, which the device takes unchanged. */
static_assert(PIB_ACCESS_LOCAL_WRITE == IB_ACCESS_LOCAL_WRITE, "access flag values");
static_assert(PIB_ACCESS_REMOTE_WRITE == IB_ACCESS_REMOTE_WRITE, "access flag values");
static_assert(PIB_ACCESS_REMOTE_READ == IB_ACCESS_REMOTE_READ, "access flag values");
static_assert(PIB_ACCESS_REMOTE_ATOMIC == IB_ACCESS_REMOTE_ATOMIC, "access flag values");
static_assert(PIB_ACCESS_MW_BIND == IB_ACCESS_MW_BIND, "access flag values");
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
static_assert(PIB_ACCESS_FLUSH_GLOBAL == IB_ACCESS_FLUSH_GLOBAL, "access flag values");
#endif

#define PIB_MR_ACCESS   (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | \
			 IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC | IB_ACCESS_MW_BIND | \
			 PIB_ACCESS_FLUSH_GLOBAL)

/*
 * The device's access bits for an MR (also those of a REG_MR WQE, pib_wq.c), or an error for
 * rights the device cannot give.  IB_ACCESS_OPTIONAL bits (relaxed ordering, ...) are hints
 * a device may ignore; pib does.  No on-demand paging, no zero-based MRs.
 */
int pib_mr_access(struct pib_dev *dev, int access, u32 *hw_access)
{
	u32 caps = dev->attr.device_cap_flags;

	access &= ~IB_ACCESS_OPTIONAL;
	if (access & ~PIB_MR_ACCESS)
		return -EOPNOTSUPP;
	/* Windows may be bound in the MR (PIB_ACCESS_MW_BIND) only where there are windows. */
	if ((access & IB_ACCESS_MW_BIND) && !(caps & PIB_DEV_CAP_MEM_WINDOW))
		return -EOPNOTSUPP;
	if ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ)) &&
	    !(caps & PIB_DEV_CAP_RDMA))
		return -EOPNOTSUPP;
	if ((access & IB_ACCESS_REMOTE_ATOMIC) && !(caps & PIB_DEV_CAP_ATOMIC))
		return -EOPNOTSUPP;
	if ((access & PIB_ACCESS_FLUSH_GLOBAL) && !(caps & PIB_DEV_CAP_FLUSH))
		return -EOPNOTSUPP;
	*hw_access = access;
	return 0;
}

/*
 * The kernel's DMA MR (ib_alloc_pd() asks for one per PD as its local_dma_lkey): the
 * identity map of guest-physical memory, which is what DMA addresses are to the device.
 */
struct ib_mr *pib_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct pib_dev *dev = to_pdev(ibpd->device);
	struct pib_cmd_reg_mr in = {
		.pdn = to_ppd(ibpd)->pdn,
		.iova = 0,
		.length = U64_MAX,
		.flags = PIB_MR_F_PHYS,
	};
	struct pib_mr *mr;
	int err;

	err = pib_mr_access(dev, access, &in.access);
	if (err)
		return ERR_PTR(err);

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	err = pib_cmd_reg_mr(&dev->com, &in, &mr->ibmr.lkey, &mr->ibmr.rkey);
	if (err) {
		kfree(mr);
		return ERR_PTR(err);
	}
	mr->key = mr->ibmr.lkey;
	return &mr->ibmr;
}

/*
 * A user MR maps [virt_addr, virt_addr + length) onto the pinned pages of
 * [start, start + length).  The device finds byte va at
 *     pbl[(va - (virt_addr & ~0xfff)) >> 12] + (va & 0xfff),
 * so start and virt_addr must have the same offset in their 4 KiB page.
 */
/* A user MR's range: its page count (of 4 KiB device pages), or -EINVAL. */
static int pib_mr_range(struct pib_dev *dev, u64 start, u64 length, u64 virt_addr, u64 *npages)
{
	/* Bounded first, so that the page count below cannot overflow. */
	if (!length || length > dev->attr.max_mr_size ||
	    length > (u64)PIB_PBL_MAX_PAGES * SZ_4K || virt_addr + length < virt_addr) {
		ibdev_dbg(&dev->ibdev, "reg_mr: bad length %#llx at iova %#llx\n",
			  length, virt_addr);
		return -EINVAL;
	}
	if ((start ^ virt_addr) & (SZ_4K - 1)) {
		ibdev_dbg(&dev->ibdev, "reg_mr: address %#llx and iova %#llx differ in page offset\n",
			  start, virt_addr);
		return -EINVAL;
	}
	*npages = ((virt_addr & (SZ_4K - 1)) + length + SZ_4K - 1) / SZ_4K;
	return *npages > PIB_PBL_MAX_PAGES ? -EINVAL : 0;
}

/*
 * A user MR over pinned memory: process memory (reg_user_mr) or a dma-buf's
 * (reg_user_mr_dmabuf), pinned by get_umem.  start is the address in the process, or the
 * offset in the dma-buf; either way its offset in a 4 KiB page must be virt_addr's.
 */
static struct ib_mr *pib_reg_mr_umem(struct ib_pd *ibpd, u64 start, u64 length, u64 virt_addr,
				     int access, struct ib_udata *udata,
				     struct ib_umem *(*get_umem)(struct ib_pd *ibpd, u64 start,
								 u64 length, u64 virt_addr,
								 int access, int fd),
				     int fd)
{
	struct pib_dev *dev = to_pdev(ibpd->device);
	struct pib_cmd_reg_mr in = {
		.pdn = to_ppd(ibpd)->pdn,
		.iova = virt_addr,
		.length = length,
	};
	struct pib_pbl pbl;
	struct pib_mr *mr;
	u64 npages;
	int err;

	if (!pib_udata_in_cleared(udata)) {
		ibdev_dbg(&dev->ibdev, "reg_mr: unknown request bytes\n");
		return ERR_PTR(-EINVAL);
	}
	err = pib_mr_access(dev, access, &in.access);
	if (err) {
		ibdev_dbg(&dev->ibdev, "reg_mr: access %#x not supported\n", access);
		return ERR_PTR(err);
	}
	err = pib_mr_range(dev, start, length, virt_addr, &npages);
	if (err)
		return ERR_PTR(err);

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->umem = get_umem(ibpd, start, length, virt_addr, access, fd);
	if (IS_ERR(mr->umem)) {
		err = PTR_ERR(mr->umem);
		goto err_free;
	}
	err = pib_pbl_from_umem(dev, mr->umem, npages, &pbl);
	if (err)
		goto err_release;
	in.pbl_addr = pbl.dma;
	in.npages = npages;
	err = pib_cmd_reg_mr(&dev->com, &in, &mr->ibmr.lkey, &mr->ibmr.rkey);
	pib_pbl_free(dev, &pbl);
	if (err)
		goto err_release;
	mr->access = access;
	mr->key = mr->ibmr.lkey;
	return &mr->ibmr;

err_release:
	ib_umem_release(mr->umem);
err_free:
	kfree(mr);
	return ERR_PTR(err);
}

static struct ib_umem *pib_umem_get(struct ib_pd *ibpd, u64 start, u64 length, u64 virt_addr,
				    int access, int fd)
{
	return ib_umem_get(ibpd->device, start, length, access);
}

struct ib_mr *pib_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length, u64 virt_addr,
			      int access, struct ib_udata *udata)
{
	return pib_reg_mr_umem(ibpd, start, length, virt_addr, access, udata, pib_umem_get, -1);
}

/*
 * ibv_reg_dmabuf_mr: an MR over [offset, offset + length) of a dma-buf, another driver's
 * memory (a GPU's, udmabuf's, vgem's) that the process holds as a file descriptor.  ib_core
 * attaches to it and pins it (the exporter must allow pinning: pib takes no move notices, as
 * it keeps no page fault path), and its DMA addresses become the MR's page list like any
 * other.  The device sees guest memory either way.
 */
static struct ib_umem *pib_umem_dmabuf_get(struct ib_pd *ibpd, u64 offset, u64 length,
					   u64 virt_addr, int access, int fd)
{
	struct ib_umem_dmabuf *umem_dmabuf;

	umem_dmabuf = ib_umem_dmabuf_get_pinned(ibpd->device, offset, length, fd, access);
	if (IS_ERR(umem_dmabuf))
		return ERR_CAST(umem_dmabuf);
	/* Its blocks counted from the MR's iova, as ib_umem_get's are. */
	if (!ib_umem_find_best_pgsz(&umem_dmabuf->umem, SZ_4K, virt_addr)) {
		ib_umem_release(&umem_dmabuf->umem);
		return ERR_PTR(-EINVAL);
	}
	return &umem_dmabuf->umem;
}

struct ib_mr *pib_reg_user_mr_dmabuf(struct ib_pd *ibpd, u64 offset, u64 length,
				     u64 virt_addr, int fd, int access,
				     struct pib_reg_dmabuf_arg *arg)
{
	return pib_reg_mr_umem(ibpd, offset, length, virt_addr, access,
			       pib_reg_dmabuf_udata(arg), pib_umem_dmabuf_get, fd);
}

/*
 * ibv_rereg_mr (not of a dma-buf MR).  The device changes the MR in place (REREG_MR), so its keys stay and NULL tells
 * ib_uverbs so (it then moves the ib_mr's PD, iova and length itself).  A new range is pinned
 * before the command and the old one unpinned only after it: the device never holds a page
 * that is not pinned.  Access that makes a read-only MR writable pins its range again, for
 * writing: pages pinned for reading may be shared copy-on-write.
 */
struct ib_mr *pib_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start, u64 length,
				u64 virt_addr, int access, struct ib_pd *ibpd,
				struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibmr->device);
	struct pib_mr *mr = to_pmr(ibmr);
	struct pib_cmd_rereg_mr in = { .key = ibmr->lkey };
	struct ib_umem *umem = NULL;
	struct pib_pbl pbl;
	u64 npages;
	int err;

	if (!pib_udata_in_cleared(udata) || !mr->umem || (flags & ~IB_MR_REREG_SUPPORTED))
		return ERR_PTR(-EINVAL);
	/* A dma-buf's MR stays on its dma-buf (as on mlx5): register a new one instead. */
	if (mr->umem->is_dmabuf)
		return ERR_PTR(-EOPNOTSUPP);
	if (flags & IB_MR_REREG_ACCESS) {
		err = pib_mr_access(dev, access, &in.access);
		if (err)
			return ERR_PTR(err);
		in.mask |= PIB_REREG_ACCESS;
		if (!(flags & IB_MR_REREG_TRANS) && ib_access_writable(access) &&
		    !mr->umem->writable) {
			flags |= IB_MR_REREG_TRANS;
			start = mr->umem->address;
			length = ibmr->length;
			virt_addr = ibmr->iova;
		}
	} else {
		access = mr->access;
	}
	if (flags & IB_MR_REREG_PD) {
		in.pdn = to_ppd(ibpd)->pdn;
		in.mask |= PIB_REREG_PD;
	}
	if (flags & IB_MR_REREG_TRANS) {
		err = pib_mr_range(dev, start, length, virt_addr, &npages);
		if (err)
			return ERR_PTR(err);
		umem = ib_umem_get(ibmr->device, start, length, access);
		if (IS_ERR(umem))
			return ERR_CAST(umem);
		err = pib_pbl_from_umem(dev, umem, npages, &pbl);
		if (err)
			goto err_release;
		in.mask |= PIB_REREG_TRANS;
		in.iova = virt_addr;
		in.length = length;
		in.pbl_addr = pbl.dma;
		in.npages = npages;
	}
	if (!in.mask)
		return NULL;
	err = pib_cmd_rereg_mr(&dev->com, &in);
	if (umem)
		pib_pbl_free(dev, &pbl);
	if (err)
		goto err_release;
	if (umem) {
		/* The device has the new pages: the old ones may be unpinned. */
		ib_umem_release(mr->umem);
		mr->umem = umem;
	}
	mr->access = access;
	return NULL;

err_release:
	ib_umem_release(umem);
	return ERR_PTR(err);
}

/*
 * Named by the key the device gave at creation: a kernel consumer may have changed the key
 * byte of ibmr->lkey since (ib_update_fast_reg_key()), and the device takes any key byte for
 * a fast-registration MR, whether or not the REG_MR WQE that chose it ever ran.
 */
int pib_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibmr->device);
	struct pib_mr *mr = to_pmr(ibmr);
	int err;

	err = pib_cmd_dereg_mr(&dev->com, mr->key);
	err = pib_destroy_status(dev, "MR", mr->key, err);
	if (err)
		return err;
	/* The device has forgotten the pages and the page list: both may go. */
	ib_umem_release(mr->umem);
	pib_pbl_free(dev, &mr->pbl);
	kfree(mr);
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Fast registration (PIB_DEV_CAP_MEM_MGT_EXT), for kernel consumers: alloc_mr makes an MR
 * with keys and a page list of max_num_sg entries but no memory (it is invalid);
 * ib_map_mr_sg() fills the page list from a DMA-mapped scatterlist; an IB_WR_REG_MR work
 * request (pib_wq.c) registers it with a key byte of the consumer's choosing, in send-queue
 * order; IB_WR_LOCAL_INV, or a peer's SEND with invalidate, makes it invalid again.  The
 * device checks the rest when it executes the WQE (docs/reference/hardware.md, "Fast registration").
 * ------------------------------------------------------------------------------------------ */

struct ib_mr *pib_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type mr_type, u32 max_num_sg)
{
	struct pib_dev *dev = to_pdev(ibpd->device);
	struct pib_mr *mr;
	int err;

	/* Page lists only: no gapped scatterlists (IB_MR_TYPE_SG_GAPS), no integrity MRs. */
	if (mr_type != IB_MR_TYPE_MEM_REG) {
		ibdev_dbg(&dev->ibdev, "alloc_mr: type %d not supported\n", mr_type);
		return ERR_PTR(-EOPNOTSUPP);
	}
	if (!max_num_sg || max_num_sg > dev->max_fast_reg_pages) {
		ibdev_dbg(&dev->ibdev, "alloc_mr: max_num_sg %u outside 1..%u\n", max_num_sg,
			  dev->max_fast_reg_pages);
		return ERR_PTR(-EINVAL);
	}

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	err = pib_pbl_alloc(dev, max_num_sg, &mr->pbl);
	if (err)
		goto err_free;
	err = pib_cmd_alloc_mr(&dev->com, to_ppd(ibpd)->pdn, max_num_sg, &mr->ibmr.lkey,
			       &mr->ibmr.rkey);
	if (err)
		goto err_free_pbl;
	mr->key = mr->ibmr.lkey;
	return &mr->ibmr;

err_free_pbl:
	pib_pbl_free(dev, &mr->pbl);
err_free:
	kfree(mr);
	return ERR_PTR(err);
}

/* ib_sg_to_pages()'s callback: one more 4 KiB page, while the list has room. */
static int pib_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct pib_mr *mr = to_pmr(ibmr);

	if (mr->npages >= mr->pbl.npages)
		return -ENOMEM;
	mr->pbl.pages[mr->npages++] = addr;
	return 0;
}

/*
 * Returns how many scatterlist entries were mapped: fewer than sg_nents when they need more
 * pages than max_num_sg, or have a gap inside a page (ib_sg_to_pages()).  mr->iova and
 * mr->length describe what was mapped.  A REG_MR WQE still in the send queue reads the page
 * list when it executes: mapping again before it completes is the consumer's mistake.
 */
int pib_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		  unsigned int *sg_offset)
{
	struct pib_dev *dev = to_pdev(ibmr->device);
	struct pib_mr *mr = to_pmr(ibmr);

	/* ib_map_mr_sg() takes any MR of the device: only alloc_mr's have a page list. */
	if (!mr->pbl.pages) {
		ibdev_dbg(&dev->ibdev, "map_mr_sg: MR %#x is not a fast-registration MR\n",
			  ibmr->lkey);
		return -EINVAL;
	}
	/* The page size the consumer asked for: the device maps 4 KiB pages only. */
	if (ibmr->page_size != SZ_4K) {
		ibdev_dbg(&dev->ibdev, "map_mr_sg: page size %u not supported (4096 only)\n",
			  ibmr->page_size);
		return -EINVAL;
	}
	mr->npages = 0;
	return ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, pib_set_page);
}

/* ------------------------------------------------------------------------------------------
 * Memory windows (PIB_DEV_CAP_MEM_WINDOW).  ib_core has no kernel API for them in this kernel
 * (and a kernel ib_send_wr cannot bind one), so they come from userspace, where the provider
 * binds them with BIND_MW WQEs.
 * ------------------------------------------------------------------------------------------ */

static_assert(IB_MW_TYPE_1 == 1 && IB_MW_TYPE_2 == 2, "struct pib_cmd_alloc_mw's type values");

int pib_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibmw->device);

	if (!pib_udata_in_cleared(udata)) {
		ibdev_dbg(&dev->ibdev, "alloc_mw: unknown request bytes\n");
		return -EINVAL;
	}
	if (ibmw->type != IB_MW_TYPE_1 && ibmw->type != IB_MW_TYPE_2)
		return -EINVAL;
	return pib_cmd_alloc_mw(&dev->com, to_ppd(ibmw->pd)->pdn, ibmw->type, &ibmw->rkey);
}

/*
 * The window is named by the rkey ALLOC_MW gave it, the only one the driver knows: binds
 * made since by the provider change the key byte without the kernel seeing it.  The device
 * accepts that key as well as the window's current one (docs/reference/hardware.md, "Memory windows").
 */
int pib_dealloc_mw(struct ib_mw *ibmw)
{
	struct pib_dev *dev = to_pdev(ibmw->device);

	return pib_destroy_status(dev, "MW", ibmw->rkey,
				  pib_cmd_dealloc_mw(&dev->com, ibmw->rkey));
}
