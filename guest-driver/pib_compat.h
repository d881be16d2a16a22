/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pib_compat.h - what differs between the kernels pib.ko builds for.
 *
 * The driver is written against the newest interface; this header supplies it on older
 * kernels.  Tested on Linux 6.1 (Debian 12) and 6.12 (Debian 13).  Each entry names the
 * release and the upstream commit that forced it.
 */
#ifndef PIB_COMPAT_H
#define PIB_COMPAT_H

#include <linux/mm.h>
#include <linux/version.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

/*
 * 6.11, commit dd6d7f8574d7 ("RDMA: Pass entire uverbs attr bundle to create cq
 * function"): ib_device_ops.create_cq takes the uverbs attribute bundle instead of the
 * udata; the udata is its driver_udata, and kernel callers (ib_alloc_cq) pass NULL.
 * pib_create_cq() takes a struct pib_create_cq_arg * and asks pib_create_cq_udata() for the
 * udata (NULL for a kernel CQ) on every kernel.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
#define pib_create_cq_arg uverbs_attr_bundle
static inline struct ib_udata *pib_create_cq_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}
#else
#define pib_create_cq_arg ib_udata
static inline struct ib_udata *pib_create_cq_udata(struct ib_udata *udata)
{
	return udata;
}
#endif

/*
 * 6.12, with the mlx5 data-direct series (the one that added
 * ib_umem_dmabuf_get_pinned_with_dma_device()): ib_device_ops.reg_user_mr_dmabuf takes the
 * uverbs attribute bundle instead of the udata, which is its driver_udata.
 * pib_reg_user_mr_dmabuf() takes a struct pib_reg_dmabuf_arg * and asks
 * pib_reg_dmabuf_udata() for the udata.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0)
#define pib_reg_dmabuf_arg uverbs_attr_bundle
static inline struct ib_udata *pib_reg_dmabuf_udata(struct uverbs_attr_bundle *attrs)
{
	return &attrs->driver_udata;
}
#else
#define pib_reg_dmabuf_arg ib_udata
static inline struct ib_udata *pib_reg_dmabuf_udata(struct ib_udata *udata)
{
	return udata;
}
#endif

/*
 * 6.3, commit bc292ab00f6c ("mm: introduce vma->vm_flags wrapper functions"):
 * vma->vm_flags became const and changes go through vm_flags_set()/vm_flags_clear().
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 3, 0)
static inline void vm_flags_clear(struct vm_area_struct *vma, unsigned long flags)
{
	vma->vm_flags &= ~flags;
}
#endif

#endif /* PIB_COMPAT_H */
