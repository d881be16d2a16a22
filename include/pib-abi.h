/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * pib-abi.h - the uverbs ABI between the pib kernel driver and the rdma-core provider.
 *
 * Rules (as in rdma-core's kernel-headers/rdma/<driver>-abi.h): every struct is 8-byte aligned,
 * comp_mask first, explicit reserved fields, mmap keys as __aligned_u64.  A new field goes at
 * the end and is announced by a comp_mask bit; the kernel accepts shorter (older) requests.
 */
#ifndef PIB_ABI_USER_H
#define PIB_ABI_USER_H

#include <linux/types.h>

#define PIB_UVERBS_ABI_VERSION 1

struct pib_ibv_alloc_ucontext_resp {
	__u32 comp_mask;
	__u32 uar_index;        /* this context's UAR page in BAR2                            */
	__aligned_u64 uar_mmap_key; /* mmap(offset = key) maps the UAR page, non-cached        */
	__u32 uar_size;         /* bytes to map                                                */
	__u32 reserved_20;
};

#endif /* PIB_ABI_USER_H */
