// SPDX-License-Identifier: GPL-2.0
/*
 * pib_dm.c - device memory: ibv_alloc_dm, ibv_free_dm, ibv_reg_dm_mr.
 *
 * The device has max_dm_size bytes of memory of its own, in BAR0 after the registers
 * ("Device memory" in pib_hw.h).  ALLOC_DM hands out whole pages of it; the process maps a DM's
 * pages write-combining and copies to and from them itself (the provider's ibv_memcpy_to_dm),
 * and an MR over a DM (REG_DM_MR) lets the device's RDMA, atomics and SGEs reach it.
 *
 * Lifetimes: ib_core frees a DM only after its MRs (its usecnt), but a process may still map
 * the DM's pages then.  So the DM's mmap entry owns the allocation: freeing the DM removes the
 * entry, and the device's DEALLOC_DM runs when the last mapping is gone (pib_mmap_free), as
 * mlx5 does with its MEMIC.  Device memory is never mapped by two owners at once.
 */
#include <rdma/uverbs_ioctl.h>

#include "pib.h"
#include "pib_com_cmd.h"
#include "pib-abi.h"

/* The entry's last reference went (pib_mmap_free): the device may hand the pages out again. */
void pib_dm_release(struct pib_dev *dev, u32 dm)
{
	int err = pib_cmd_dealloc_dm(&dev->com, dm);

	if (err)
		ibdev_err_ratelimited(&dev->ibdev, "DEALLOC_DM of DM %u failed (%d)\n", dm, err);
}

struct ib_dm *pib_alloc_dm(struct ib_device *ibdev, struct ib_ucontext *ibucontext,
			   struct ib_dm_alloc_attr *attr, struct uverbs_attr_bundle *attrs)
{
	struct pib_dev *dev = to_pdev(ibdev);
	struct pib_user_mmap_entry *entry;
	struct pib_dm *dm;
	u32 num, start;
	u64 key;
	int err;

	/* Allocations are page aligned: that satisfies any alignment up to a page. */
	if (!attr->length || attr->length > dev->max_dm_size || attr->flags ||
	    attr->alignment > PAGE_SHIFT) {
		ibdev_dbg(ibdev, "alloc_dm: length %llu (of %u), flags %#x, log alignment %u\n",
			  attr->length, dev->max_dm_size, attr->flags, attr->alignment);
		return ERR_PTR(-EINVAL);
	}
	dm = kzalloc(sizeof(*dm), GFP_KERNEL);
	if (!dm)
		return ERR_PTR(-ENOMEM);

	err = pib_cmd_alloc_dm(&dev->com, attr->length, &num, &start);
	if (err)
		goto err_free;
	/* What the device answered must lie in its memory, page aligned, before it is mapped. */
	if (start % PIB_DM_PAGE_SIZE || start >= dev->max_dm_size ||
	    attr->length > dev->max_dm_size - start) {
		ibdev_err(ibdev, "ALLOC_DM returned byte %#x for %llu bytes of %u\n",
			  start, attr->length, dev->max_dm_size);
		pib_dm_release(dev, num);
		err = -EIO;
		goto err_free;
	}
	dm->mmap = pib_user_mmap_entry_insert(ibucontext, dev->dm_bar_start + start,
					      PAGE_ALIGN(attr->length), PIB_MMAP_DM);
	if (!dm->mmap) {
		pib_dm_release(dev, num);
		err = -ENOMEM;
		goto err_free;
	}
	entry = to_pmmap(dm->mmap);
	entry->dm = num;
	dm->ibdm.length = attr->length;

	key = rdma_user_mmap_get_offset(dm->mmap);
	err = uverbs_copy_to(attrs, PIB_IB_ATTR_ALLOC_DM_RESP_MMAP_KEY, &key, sizeof(key));
	if (err) {
		rdma_user_mmap_entry_remove(dm->mmap);     /* DEALLOC_DM, now */
		goto err_free;
	}
	return &dm->ibdm;

err_free:
	kfree(dm);
	return ERR_PTR(err);
}

/* ib_core calls this only when no MR lies in the DM any more. */
int pib_dealloc_dm(struct ib_dm *ibdm, struct uverbs_attr_bundle *attrs)
{
	struct pib_dm *dm = to_pdm(ibdm);

	rdma_user_mmap_entry_remove(dm->mmap);
	kfree(dm);
	return 0;
}

/* The access rights an MR over device memory may have; it is addressed from 0 (zero based). */
#define PIB_DM_MR_ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | \
			  IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC | IB_ZERO_BASED)

struct ib_mr *pib_reg_dm_mr(struct ib_pd *ibpd, struct ib_dm *ibdm, struct ib_dm_mr_attr *attr,
			    struct uverbs_attr_bundle *attrs)
{
	struct pib_dev *dev = to_pdev(ibpd->device);
	struct pib_cmd_reg_dm_mr in = {
		.pdn = to_ppd(ibpd)->pdn,
		.iova = 0,
		.length = attr->length,
		.offset = attr->offset,
		.dm = to_pmmap(to_pdm(ibdm)->mmap)->dm,
	};
	struct pib_mr *mr;
	int err;

	if ((attr->access_flags & ~PIB_DM_MR_ACCESS) || !(attr->access_flags & IB_ZERO_BASED) ||
	    attr->offset > ibdm->length || attr->length > ibdm->length - attr->offset) {
		ibdev_dbg(&dev->ibdev, "reg_dm_mr: access %#x, [%llu, +%llu) of %u bytes\n",
			  attr->access_flags, attr->offset, attr->length, ibdm->length);
		return ERR_PTR(-EINVAL);
	}
	err = pib_mr_access(dev, attr->access_flags & ~IB_ZERO_BASED, &in.access);
	if (err)
		return ERR_PTR(err);

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	err = pib_cmd_reg_dm_mr(&dev->com, &in, &mr->ibmr.lkey, &mr->ibmr.rkey);
	if (err) {
		kfree(mr);
		return ERR_PTR(err);
	}
	mr->access = attr->access_flags;
	mr->key = mr->ibmr.lkey;
	return &mr->ibmr;
}
