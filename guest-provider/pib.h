/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * pib.h - rdma-core provider for the pib HCA: objects shared by pib.c and
 * verbs.c.
 *
 * The provider sees the device through two headers shared with every other
 * layer: pib_hw.h (PCI identity, UAR doorbell layout) and pib-abi.h (what the
 * kernel driver returns from uverbs commands).  guest-provider/build.sh copies
 * both from the repo's include/ next to this file; they are never edited here.
 */
#ifndef __PIB_H__
#define __PIB_H__

#include <stddef.h>
#include <stdint.h>

#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>
#include <kernel-abi/pib-abi.h> /* made from pib-abi.h by CMakeLists.txt */

#include "pib-abi.h"
#include "pib_hw.h"

/* ALLOC_UCONTEXT (GET_CONTEXT): no request payload, pib's response payload. */
DECLARE_DRV_CMD(pib_alloc_ucontext, IB_USER_VERBS_CMD_GET_CONTEXT, empty,
		pib_ibv_alloc_ucontext_resp);

struct pib_device {
	struct verbs_device vdev;
};

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
};

/* Room for the PD number once the data path needs it (AHs, MRs). */
struct pib_pd {
	struct ibv_pd ibvpd;
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

#endif /* __PIB_H__ */
