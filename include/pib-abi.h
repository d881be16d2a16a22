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
#include <rdma/ib_user_ioctl_cmds.h>

#define PIB_UVERBS_ABI_VERSION 1

/*
 * PIB_IBV_UCTX_F_RECV_DBREC: the device reads receive doorbell records (struct pib_recv_dbrec
 * in pib_wqe.h, PIB_DEV_CAP_RECV_DBREC): a QP's RQ or an SRQ may be created with one, by the
 * comp_mask bits below, and posted to without a doorbell.
 */
#define PIB_IBV_UCTX_RESP_MASK_FLAGS   (1u << 0)  /* comp_mask: flags is meant             */
#define PIB_IBV_UCTX_F_RECV_DBREC      (1u << 0)
struct pib_ibv_alloc_ucontext_resp {
	__u32 comp_mask;
	__u32 uar_index;        /* this context's UAR page in BAR2                            */
	__aligned_u64 uar_mmap_key; /* mmap(offset = key) maps the UAR page, non-cached        */
	__u32 uar_size;         /* bytes to map                                                */
	__u32 flags;            /* PIB_IBV_UCTX_F_*, with PIB_IBV_UCTX_RESP_MASK_FLAGS         */
};

/*
 * The driver's own ioctl IDs (the driver namespace, UVERBS_ID_NS_SHIFT, as mlx5_user_ioctl_cmds.h
 * numbers mlx5's): what importing needs, which the core methods do not carry.  A process that
 * was handed another's command file (ibv_import_device on a dup'd or passed descriptor) shares
 * that file's context and every object in it, but has none of the provider's state for them.
 *
 * - QUERY_CONTEXT (UVERBS_OBJECT_DEVICE, a core method) gains PIB_IB_ATTR_QUERY_CONTEXT_RESP_UCTX:
 *   the context's struct pib_ibv_alloc_ucontext_resp, the same as ALLOC_CONTEXT answered, so
 *   that the importer maps the same UAR page.
 * - PIB_IB_METHOD_PD_QUERY (UVERBS_OBJECT_PD): the device's PD number of a PD handle of the
 *   file (ibv_import_pd checks its handle with it); a handle the file does not hold is refused
 *   by uverbs before the driver sees it.
 * MRs need nothing of the driver: the core's QUERY_MR gives an MR handle's keys and range.
 */
enum pib_ib_query_context_attrs {
	PIB_IB_ATTR_QUERY_CONTEXT_RESP_UCTX = (1U << UVERBS_ID_NS_SHIFT),
};

enum pib_ib_pd_methods {
	PIB_IB_METHOD_PD_QUERY = (1U << UVERBS_ID_NS_SHIFT),
};

enum pib_ib_query_pd_attrs {
	PIB_IB_ATTR_QUERY_PD_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	PIB_IB_ATTR_QUERY_PD_RESP_PDN,      /* __u32 */
};

/*
 * Device memory (ibv_alloc_dm; "Device memory" in pib_hw.h).  A DM is mapped into the process,
 * write-combining, from its mmap key: whole pages, its length rounded up to a page.
 * - ALLOC_DM (UVERBS_OBJECT_DM, a core method) gains PIB_IB_ATTR_ALLOC_DM_RESP_MMAP_KEY.
 * - PIB_IB_METHOD_DM_QUERY (UVERBS_OBJECT_DM): a DM handle's mmap key and length, for
 *   ibv_import_dm.
 * The device memory of a DM is freed when the DM is and no process maps it any more.
 */
enum pib_ib_alloc_dm_attrs {
	PIB_IB_ATTR_ALLOC_DM_RESP_MMAP_KEY = (1U << UVERBS_ID_NS_SHIFT),  /* __u64 */
};

enum pib_ib_dm_methods {
	PIB_IB_METHOD_DM_QUERY = (1U << UVERBS_ID_NS_SHIFT),
};

enum pib_ib_query_dm_attrs {
	PIB_IB_ATTR_QUERY_DM_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	PIB_IB_ATTR_QUERY_DM_RESP_MMAP_KEY,     /* __u64 */
	PIB_IB_ATTR_QUERY_DM_RESP_LENGTH,       /* __u64 */
};

/*
 * CQ: the provider allocates the ring (depth CQEs, then one page whose first u32 is the
 * consumer index record), page aligned, and passes it here; the driver pins it and hands its
 * page list to the device.  The CQEs are struct pib_cqe (32 bytes), or with
 * PIB_IBV_CQ_F_TIMESTAMP struct pib_cqe_ts (64 bytes, with the completion's timestamps:
 * CREATE_CQ's PIB_CQ_F_TIMESTAMP in pib_hw.h).  That flag goes with the verbs' own
 * IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION (which ibv_create_cq_ex sends for either timestamp
 * wc flag, the device clock's or the wall clock's): one without the other is refused.  A CQ keeps
 * its CQE size through resize_cq.
 */
#define PIB_IBV_CREATE_CQ_MASK_FLAGS   (1u << 0)  /* comp_mask: flags is meant             */
#define PIB_IBV_CQ_F_TIMESTAMP         (1u << 0)  /* flags: 64-byte timestamped CQEs       */
struct pib_ibv_create_cq {
	__u32 comp_mask;
	__u32 depth;            /* power of two >= the cqe count asked for                     */
	__aligned_u64 buf_addr; /* user VA of the ring, page aligned                           */
	__u32 buf_size;         /* depth CQEs rounded up to a page, plus one page              */
	__u32 flags;            /* PIB_IBV_CQ_F_*, with PIB_IBV_CREATE_CQ_MASK_FLAGS; else 0   */
};

struct pib_ibv_create_cq_resp {
	__u32 comp_mask;
	__u32 cqn;
	__u32 depth;
	__u32 reserved_0c;
};

/*
 * RESIZE_CQ: the new ring, zeroed and laid out as at create, and the provider's consumer
 * index in the old one: the device moves the CQEs not yet read to the start of the new ring
 * (RESIZE_CQ in pib_hw.h), so polling goes on at index 0 there.  The provider does not poll
 * meanwhile.
 */
struct pib_ibv_resize_cq {
	__u32 comp_mask;
	__u32 depth;            /* power of two >= the cqe count asked for                     */
	__aligned_u64 buf_addr; /* user VA of the new ring, page aligned                       */
	__u32 buf_size;         /* depth CQEs of the CQ's size rounded up to a page, plus one  */
	                        /* page                                                        */
	__u32 ci;               /* the consumer index                                          */
};

struct pib_ibv_resize_cq_resp {
	__u32 comp_mask;
	__u32 depth;
};

/*
 * QP: the provider sizes and allocates the SQ and RQ rings (page aligned; the RQ is absent
 * for a QP on an SRQ) and passes them here.  Strides are log2 of the WQE slot size.  With
 * PIB_IBV_CREATE_QP_MASK_RQ_DBREC (only where the context has PIB_IBV_UCTX_F_RECV_DBREC) the
 * RQ ring is followed by one more page, which starts with its doorbell record.
 */
#define PIB_IBV_CREATE_QP_MASK_RQ_DBREC (1u << 0)
struct pib_ibv_create_qp {
	__u32 comp_mask;
	__u8  sq_stride_log;    /* 6..12                                                       */
	__u8  rq_stride_log;    /* 4..12                                                       */
	__u16 reserved_06;
	__aligned_u64 sq_buf_addr;
	__aligned_u64 rq_buf_addr;
	__u32 sq_depth;         /* power of two                                                */
	__u32 rq_depth;         /* power of two, 0 without an RQ                               */
	__u32 sq_buf_size;      /* sq_depth << sq_stride_log, page aligned                     */
	__u32 rq_buf_size;      /* the same, plus the record's page with RQ_DBREC              */
};

struct pib_ibv_create_qp_resp {
	__u32 comp_mask;
	__u32 qpn;
	__u32 max_inline;       /* inline bytes the SQ stride allows                           */
	__u32 reserved_0c;
};

/*
 * SRQ: the provider allocates the ring (depth << stride_log bytes, page aligned), and with
 * PIB_IBV_CREATE_SRQ_MASK_DBREC (as the QP's RQ_DBREC) one more page for its doorbell record.
 */
#define PIB_IBV_CREATE_SRQ_MASK_DBREC   (1u << 0)
struct pib_ibv_create_srq {
	__u32 comp_mask;
	__u8  stride_log;       /* 4..12                                                       */
	__u8  reserved_05[3];
	__aligned_u64 buf_addr;
	__u32 depth;            /* power of two                                                */
	__u32 buf_size;
};

struct pib_ibv_create_srq_resp {
	__u32 comp_mask;
	__u32 srqn;
};

/*
 * MODIFY_SRQ with IB_SRQ_MAX_WR: the new ring (same stride), into which the provider has
 * already copied the WQEs posted and not yet completed, each at its index (slot i % depth);
 * without IB_SRQ_MAX_WR the request is empty (all zero).  An SRQ with a doorbell record has
 * one in the new ring too (one more page), where the provider has written its producer index.
 */
struct pib_ibv_modify_srq {
	__u32 comp_mask;
	__u32 depth;            /* power of two                                                */
	__aligned_u64 buf_addr;
	__u32 buf_size;         /* depth << stride_log, page aligned (+ the record's page)     */
	__u32 reserved_14;
};

#endif /* PIB_ABI_USER_H */
