/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pib.h - the pib InfiniBand HCA driver: device and verbs objects.
 *
 * Layers, each in its own file:
 *   pib_main.c     PCI probe/remove, BARs, MSI-X, the ib_device_ops table, event delivery
 *   pib_verbs.c    device, port and its counters, user contexts, AHs, multicast, and
 *                  the DMA memory and page lists the device reads
 *   pib_pd.c       protection domains and XRC domains
 *   pib_mr.c       memory regions (user, DMA, fast-registration) and memory windows
 *   pib_cq.c       completion queues: creation, and polling and arming kernel CQs
 *   pib_qp.c       queue pairs: creation, state changes, queries, destruction
 *   pib_wq.c       work queue rings of QPs and SRQs, and posting to kernel QPs
 *   pib_srq.c      shared receive queues: creation, limit, and posting to kernel SRQs
 *   pib_mad.c      process_mad: MADs for the firmware's management agents (MAD_IFC)
 *   pib_com_cmd.c  one function per admin command
 *   pib_com.c      the admin queue and the event queue engine (AEQ, CEQ)
 *
 * The verbs reach the device's control path only through pib_com_cmd.c.  The data path of a
 * user QP, CQ or SRQ bypasses the kernel (the provider in guest-provider/ owns its rings);
 * the driver has rings of its own only for kernel consumers (ULPs), in pib_cq.c, pib_wq.c
 * and pib_srq.c, laid out exactly as the provider lays them out (include/pib_wqe.h).
 */
#ifndef PIB_H
#define PIB_H

#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/sizes.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>

#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>

#include "pib_com.h"
#include "pib_compat.h"
#include "pib_wqe.h"

#define PIB_DRV_NAME    "pib"

struct pib_dev {
	struct ib_device ibdev;         /* first: ib_alloc_device() requires it */
	struct pci_dev *pdev;
	struct pib_com_dev com;

	phys_addr_t uar_bar_start;      /* BAR2: user contexts' UAR pages are mmap'ed from here */
	phys_addr_t dm_bar_start;       /* BAR0 + dm_bar_offset: the device memory, DMs mapped */
	u32 max_dm_size;                /* 0: no device memory */
	u32 num_uars;
	void __iomem *uar0;             /* UAR page 0: the doorbells of kernel QPs and CQs */

	struct pib_device_attr attr;    /* QUERY_DEVICE at probe; the device never changes it */
	u16 pkey_tbl_len;               /* from QUERY_PORT at probe: the tables' fixed sizes */
	u16 gid_tbl_len;

	/* Limits the driver enforces, the device's own trimmed to what the driver can do. */
	u32 max_cq;                     /* no more CQs than CEQ slots (PIB_CEQ_DEPTH) */
	u32 max_cqe;                    /* the deepest CQ ring */
	u32 max_qp_wr;
	u32 max_sge;
	u32 max_inline;
	u32 max_srq;                    /* 0: the device has no SRQs (PIB_DEV_CAP_SRQ) */
	u32 max_srq_wr;
	u32 max_srq_sge;
	u32 max_fast_reg_pages;         /* 0: no fast registration (PIB_DEV_CAP_MEM_MGT_EXT) */
	u32 clock_khz;                  /* 0: no device clock (PIB_DEV_CAP_CLOCK) */
	u16 max_cq_mod_count;           /* MODIFY_CQ's limits; period 0: no event moderation */
	u16 max_cq_mod_period;
	bool counters;                  /* the device answers QUERY_COUNTERS: hw_counters */
	bool mad;                       /* the firmware has an SMA and a PMA (MAD_IFC): the */
					/* port is managed, with QP0/QP1 and process_mad */
	atomic_t num_cqs;

	/*
	 * Number -> object, for what the device names only by number: CEQEs and async events
	 * name CQs, QPs and SRQs, CQEs name QPs.  An object is in its table from creation until
	 * its destruction is under way; the destroy verbs then wait out the event handlers
	 * (synchronize_irq) and, for a QP, the pollers of its CQs (their locks), so that no
	 * handler holds an object that is being freed.
	 */
	struct xarray cqs;              /* CQN -> struct pib_cq */
	struct xarray qps;              /* QPN -> struct pib_qp */
	struct xarray srqs;             /* SRQN -> struct pib_srq */

	u8 port_event;                  /* last port event logged (PIB_AE_*), to log changes once */
	struct mutex node_desc_lock;    /* the device's NodeDescription and ibdev.node_desc */

	char admin_irq_name[32];
	char aeq_irq_name[32];
	char ceq_irq_name[32];
};

struct pib_ucontext {
	struct ib_ucontext ibucontext;
	u32 uar;                        /* this context's UAR page index in BAR2 */
	struct rdma_user_mmap_entry *uar_mmap;
};

struct pib_pd {
	struct ib_pd ibpd;
	u32 pdn;
};

struct pib_xrcd {
	struct ib_xrcd ibxrcd;
	u32 xrcdn;
};

/*
 * Memory the device reads or writes for a kernel object: one DMA-coherent, page-aligned,
 * physically contiguous allocation.  The page allocator gives at most 4 MiB of that (order
 * 10 on x86-64), so a kernel ring is at most PIB_DMA_BUF_MAX_BYTES: a kernel CQ at most
 * 65536 slots deep (its ring and its record page), an SQ or RQ at most 4 MiB of slots.  The
 * device's depths are far larger (PIB_MAX_CQE, PIB_MAX_QP_WR): those are for user rings, which
 * live in the process's memory; a kernel consumer that asks for more than one block holds gets
 * -ENOMEM, as it would on an HCA that wants its queues contiguous.  (ib_core's shared CQs ask
 * for at most IB_MAX_SHARED_CQ_SZ, 4096 CQEs.)
 */
#define PIB_DMA_BUF_MAX_BYTES   SZ_4M
struct pib_dma_buf {
	void *va;
	dma_addr_t dma;
	size_t size;
};

/*
 * A page list (docs/reference/hardware.md, "Page lists") built for one create command: the device
 * copies it while it executes the command, so it lives only that long.  A fast-registration
 * MR's is the exception: it lives as long as the MR (struct pib_mr).
 */
struct pib_pbl {
	u64 *pages;                     /* little-endian guest-physical 4 KiB page addresses */
	dma_addr_t dma;
	u32 npages;
};

/*
 * A page list must be one contiguous DMA allocation, and the page allocator gives at most
 * 4 MiB of those: 512 Ki pages, 2 GiB of memory.  That bounds what one MR or ring can map
 * (the deepest user ring, a timestamped CQ of PIB_MAX_CQE slots, lists 65537 pages: 512 KiB).
 * (A fast-registration MR's list is far smaller: PIB_MAX_FAST_REG_PAGES entries.)
 */
#define PIB_PBL_MAX_BYTES       PIB_DMA_BUF_MAX_BYTES
#define PIB_PBL_MAX_PAGES       (PIB_PBL_MAX_BYTES / sizeof(u64))

struct pib_mr {
	struct ib_mr ibmr;
	/*
	 * The lkey the device gave, which DEREG_MR names the MR by: a kernel consumer may
	 * change the key byte of ibmr's keys (ib_update_fast_reg_key()).
	 */
	u32 key;
	struct ib_umem *umem;           /* user MRs; NULL for the kernel's DMA MR */
	int access;                     /* user MRs: IB_ACCESS_*, as registered */

	/*
	 * A fast-registration MR (alloc_mr) only.  Its page list lives as long as the MR:
	 * map_mr_sg fills it, and the device reads it when it executes a REG_MR WQE, in
	 * send-queue order, so the consumer must not map the MR again before that WQE has
	 * completed (as on any HCA).
	 */
	struct pib_pbl pbl;             /* max_num_sg entries; pbl.pages NULL on other MRs */
	u32 npages;                     /* entries the last map_mr_sg filled */
};

/*
 * A memory window: the device's object, named by its rkey.  Binding it is a work request
 * (a BIND_MW WQE, posted by the provider), so the driver only creates and destroys it.
 */
struct pib_mw {
	struct ib_mw ibmw;
};

/*
 * A kernel AH: the device has no AH object, a UD send WQE carries the destination.  The
 * attributes are kept whole for query_ah, by which ib_mad matches a response to its request.
 */
struct pib_ah {
	struct ib_ah ibah;
	struct rdma_ah_attr attr;       /* as created; grh.sgid_attr is ib_core's (NULL here) */
};

struct pib_cq {
	struct ib_cq ibcq;
	u32 cqn;
	u32 depth;                      /* CQE slots, a power of two */
	bool user;                      /* the ring belongs to a process (umem) */
	u32 cq_flags;                   /* PIB_CQ_F_*: user CQs may have timestamped CQEs */
	struct ib_umem *umem;           /* user CQ: the ring and record page, pinned */

	/* Kernel CQ only. */
	struct pib_dma_buf buf;         /* depth CQEs, then the consumer index record page */
	struct pib_cqe *ring;
	u32 *ci_record;                 /* consumer index record, read by the device */
	spinlock_t lock;                /* ci, the record and the arm doorbell; QP retirement */
	u32 ci;                         /* next CQE to look at, free-running */
	struct mutex resize_lock;       /* user CQ: one resize at a time */
};

/*
 * A kernel work queue (SQ, RQ or SRQ): depth slots of 2^stride_log bytes (the ring rules are
 * in include/pib_wqe.h, "Ring geometry").  pi is advanced by
 * the poster under lock; ci by poll_cq when a CQE shows the device is done with the slots
 * before it: under the CQ's lock for an SQ or RQ (one CQ retires it), under the queue's own
 * lock for an SRQ (any CQ of a QP on it may).  Both are free-running: pi - ci WQEs are
 * outstanding.
 */
struct pib_wq {
	spinlock_t lock;                /* posting; retiring an SRQ */
	struct pib_dma_buf buf;
	u32 depth;
	u32 stride_log;
	u32 max_sge;                    /* SGEs a slot holds (and the device allows) */
	u32 pi;
	u32 ci;
	bool has_dbrec;                 /* an RQ or SRQ with a doorbell record (pib_wqe.h) */
	struct pib_recv_dbrec *dbrec;   /* a kernel ring's: in buf, after the slots */
};

struct pib_qp {
	struct ib_qp ibqp;
	bool user;
	/*
	 * Set when destruction starts: the QP's CQEs no longer reach the consumer (poll_cq
	 * still retires their WQEs) and its async events are dropped.
	 */
	bool destroying;
	struct ib_umem *sq_umem;        /* user QP: the rings, pinned */
	struct ib_umem *rq_umem;

	struct mutex state_lock;        /* modify_qp: state, and the indices on RESET */
	enum ib_qp_state state;         /* as last set, or ERR after a QP error event */
	u32 qkey;                       /* UD: the Q_Key a WR with the high bit set uses */

	struct ib_qp_cap cap;           /* what the rings hold, reported by query_qp */
	enum ib_sig_type sq_sig_type;
	u32 max_inline;

	/* Kernel QP only.  A QP on an SRQ has no RQ: rq.depth is 0. */
	struct pib_wq sq;
	struct pib_wq rq;
};

/*
 * A shared receive queue: a ring of receive WQEs from which the QPs created on it take, in
 * ring order.  The device copies a WQE as it takes it, so each receive completion of any of
 * those QPs frees one slot (pib_srq_retire()), whichever CQ it came to.
 */
struct pib_srq {
	struct ib_srq ibsrq;
	u32 srqn;
	bool user;
	struct ib_umem *umem;           /* user SRQ: the ring, pinned */
	struct pib_wq wq;               /* the geometry; for a kernel SRQ also the ring */
	struct mutex resize_lock;       /* user SRQ: umem and wq.depth against a resize */
};

/* How an mmap offset handed to userspace is to be mapped. */
enum pib_mmap_flag {
	PIB_MMAP_IO_NC,                 /* device MMIO (a UAR page), non-cached */
	PIB_MMAP_DM,                    /* device memory (a DM's pages), write-combining */
};

struct pib_user_mmap_entry {
	struct rdma_user_mmap_entry rdma_entry;
	phys_addr_t address;
	u8 mmap_flag;                   /* enum pib_mmap_flag */
	u32 dm;                         /* PIB_MMAP_DM: the device's DM, freed with the entry */
};

/*
 * A DM: an allocation of device memory, which the process maps through its mmap entry.  The
 * entry owns the allocation (DEALLOC_DM runs when the last mapping of it goes, pib_mmap_free):
 * device memory that a process still maps is never handed to another.
 */
struct pib_dm {
	struct ib_dm ibdm;
	struct rdma_user_mmap_entry *mmap;
};

static inline struct pib_dev *to_pdev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct pib_dev, ibdev);
}

static inline struct pib_ucontext *to_pucontext(struct ib_ucontext *ibucontext)
{
	return container_of(ibucontext, struct pib_ucontext, ibucontext);
}

static inline struct pib_pd *to_ppd(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct pib_pd, ibpd);
}

static inline struct pib_xrcd *to_pxrcd(struct ib_xrcd *ibxrcd)
{
	return container_of(ibxrcd, struct pib_xrcd, ibxrcd);
}

static inline struct pib_user_mmap_entry *to_pmmap(struct rdma_user_mmap_entry *rdma_entry)
{
	return container_of(rdma_entry, struct pib_user_mmap_entry, rdma_entry);
}

static inline struct pib_dm *to_pdm(struct ib_dm *ibdm)
{
	return container_of(ibdm, struct pib_dm, ibdm);
}

static inline struct pib_mr *to_pmr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct pib_mr, ibmr);
}

static inline struct pib_ah *to_pah(struct ib_ah *ibah)
{
	return container_of(ibah, struct pib_ah, ibah);
}

static inline struct pib_cq *to_pcq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct pib_cq, ibcq);
}

static inline struct pib_qp *to_pqp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct pib_qp, ibqp);
}

static inline struct pib_srq *to_psrq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct pib_srq, ibsrq);
}

static inline struct pib_mw *to_pmw(struct ib_mw *ibmw)
{
	return container_of(ibmw, struct pib_mw, ibmw);
}

/*
 * Ring a doorbell on UAR page 0: one 64-bit write, so that the object number (with a CQ's
 * arm bits) and the index reach the device together.  writeq() is ordered after the
 * CPU's earlier stores to coherent memory (Documentation/memory-barriers.txt, "Kernel I/O
 * barrier effects"), so the WQEs or the consumer index record it announces are there first.
 */
static inline void pib_ring_doorbell(struct pib_dev *dev, enum pib_uar_offset offset,
				     u32 obj_flags, u32 index)
{
	writeq((u64)index << PIB_DB_INDEX_SHIFT | obj_flags, dev->uar0 + offset);
}

/* Does the device read receive doorbell records (struct pib_recv_dbrec, pib_wqe.h)? */
static inline bool pib_dev_recv_dbrec(const struct pib_dev *dev)
{
	return dev->attr.device_cap_flags & PIB_DEV_CAP_RECV_DBREC;
}

/* pib_main.c */
void pib_sync_events(struct pib_dev *dev);

/* pib_verbs.c */
int pib_query_device(struct ib_device *ibdev, struct ib_device_attr *props,
		     struct ib_udata *udata);
void pib_get_dev_fw_str(struct ib_device *ibdev, char *str);
int pib_query_port(struct ib_device *ibdev, u32 port, struct ib_port_attr *props);
int pib_get_port_immutable(struct ib_device *ibdev, u32 port,
			   struct ib_port_immutable *immutable);
enum rdma_link_layer pib_get_link_layer(struct ib_device *ibdev, u32 port);
int pib_query_pkey(struct ib_device *ibdev, u32 port, u16 index, u16 *pkey);
int pib_query_gid(struct ib_device *ibdev, u32 port, int index, union ib_gid *gid);
int pib_modify_port(struct ib_device *ibdev, u32 port, int mask, struct ib_port_modify *props);
int pib_modify_device(struct ib_device *ibdev, int mask, struct ib_device_modify *props);

int pib_alloc_ucontext(struct ib_ucontext *ibucontext, struct ib_udata *udata);
void pib_dealloc_ucontext(struct ib_ucontext *ibucontext);
void pib_disassociate_ucontext(struct ib_ucontext *ibucontext);
struct pib_ibv_alloc_ucontext_resp;
void pib_ucontext_resp(struct pib_ucontext *uctx, struct pib_ibv_alloc_ucontext_resp *resp);
struct rdma_user_mmap_entry *
pib_user_mmap_entry_insert(struct ib_ucontext *ibucontext, phys_addr_t address, size_t length,
			   u8 mmap_flag);
int pib_mmap(struct ib_ucontext *ibucontext, struct vm_area_struct *vma);
void pib_mmap_free(struct rdma_user_mmap_entry *rdma_entry);

/* pib_uapi.c */
struct uverbs_attr_bundle;
int pib_query_ucontext(struct ib_ucontext *ibucontext, struct uverbs_attr_bundle *attrs);
extern const struct uapi_definition pib_uapi_defs[];

/* pib_pd.c */
int pib_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
int pib_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
int pib_alloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata);
int pib_dealloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata);

int pib_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init_attr,
		  struct ib_udata *udata);
int pib_destroy_ah(struct ib_ah *ibah, u32 flags);
int pib_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr);
int pib_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);
int pib_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);

struct rdma_hw_stats *pib_alloc_hw_port_stats(struct ib_device *ibdev, u32 port);
int pib_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats, u32 port,
		     int index);

bool pib_udata_in_cleared(struct ib_udata *udata);
int pib_udata_req(struct ib_udata *udata, void *req, size_t size);
int pib_destroy_status(struct pib_dev *dev, const char *what, u32 num, int err);
int pib_dma_buf_alloc(struct pib_dev *dev, size_t size, struct pib_dma_buf *buf);
void pib_dma_buf_free(struct pib_dev *dev, struct pib_dma_buf *buf);
int pib_pbl_alloc(struct pib_dev *dev, u32 npages, struct pib_pbl *pbl);
int pib_pbl_from_umem(struct pib_dev *dev, struct ib_umem *umem, u32 npages,
		      struct pib_pbl *pbl);
int pib_pbl_from_dma_buf(struct pib_dev *dev, const struct pib_dma_buf *buf,
			 struct pib_pbl *pbl);
void pib_pbl_free(struct pib_dev *dev, struct pib_pbl *pbl);

/* pib_dm.c */
struct ib_dm *pib_alloc_dm(struct ib_device *ibdev, struct ib_ucontext *ibucontext,
			   struct ib_dm_alloc_attr *attr, struct uverbs_attr_bundle *attrs);
int pib_dealloc_dm(struct ib_dm *ibdm, struct uverbs_attr_bundle *attrs);
struct ib_mr *pib_reg_dm_mr(struct ib_pd *ibpd, struct ib_dm *ibdm, struct ib_dm_mr_attr *attr,
			    struct uverbs_attr_bundle *attrs);
void pib_dm_release(struct pib_dev *dev, u32 dm);

/* pib_mr.c */
int pib_mr_access(struct pib_dev *dev, int access, u32 *hw_access);
struct ib_mr *pib_get_dma_mr(struct ib_pd *ibpd, int access);
struct ib_mr *pib_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length, u64 virt_addr,
			      int access, struct ib_udata *udata);
int pib_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
struct ib_mr *pib_reg_user_mr_dmabuf(struct ib_pd *ibpd, u64 offset, u64 length,
				     u64 virt_addr, int fd, int access,
				     struct pib_reg_dmabuf_arg *arg);
struct ib_mr *pib_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start, u64 length,
				u64 virt_addr, int access, struct ib_pd *ibpd,
				struct ib_udata *udata);
struct ib_mr *pib_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type mr_type, u32 max_num_sg);
int pib_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		  unsigned int *sg_offset);

int pib_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int pib_dealloc_mw(struct ib_mw *ibmw);

/* pib_mad.c */
int pib_process_mad(struct ib_device *ibdev, int mad_flags, u32 port_num,
		    const struct ib_wc *in_wc, const struct ib_grh *in_grh,
		    const struct ib_mad *in, struct ib_mad *out,
		    size_t *out_mad_size, u16 *out_mad_pkey_index);
int pib_mad_probe(struct pib_dev *dev);

/* pib_cq.c */
int pib_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		  struct pib_create_cq_arg *arg);
int pib_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int pib_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata);
int pib_modify_cq(struct ib_cq *ibcq, u16 cq_count, u16 cq_period);
int pib_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int pib_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
void pib_cq_comp_event(void *data, u32 cqn);
void pib_cq_async_event(struct pib_dev *dev, u32 cqn, enum ib_event_type type);
void pib_cq_scrub_qp(struct pib_cq *cq, u32 qpn, struct pib_srq *srq);

/* pib_qp.c */
int pib_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init_attr,
		  struct ib_udata *udata);
int pib_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int attr_mask,
		  struct ib_udata *udata);
int pib_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int attr_mask,
		 struct ib_qp_init_attr *init_attr);
int pib_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
void pib_qp_async_event(struct pib_dev *dev, u32 qpn, enum ib_event_type type);

/* pib_wq.c: work queue rings (shared with pib_srq.c), and posting to kernel QPs */
int pib_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		  const struct ib_send_wr **bad_wr);
int pib_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		  const struct ib_recv_wr **bad_wr);
void pib_qp_retire(struct pib_qp *qp, const struct pib_cqe *cqe);
bool pib_wq_req_ok(u32 max_depth, u32 depth, u32 stride_log, u32 min_log, u32 want_wr,
		   u32 slot_bytes, bool dbrec, u64 addr, u32 size);
int pib_wq_init_user(struct pib_dev *dev, struct ib_umem **umem, u64 addr, u32 size,
		     struct pib_pbl *pbl);
int pib_wq_init_kernel(struct pib_dev *dev, struct pib_wq *wq, u32 wr, u32 slot_bytes,
		       u32 min_log, u32 max_depth, struct pib_pbl *pbl);
int pib_wq_post_recv(struct pib_dev *dev, struct pib_wq *wq, enum pib_uar_offset doorbell,
		     u32 obj, const struct ib_recv_wr *wr, const struct ib_recv_wr **bad_wr);
void pib_wq_retire_one(struct pib_wq *wq);

/* pib_srq.c */
int pib_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init_attr,
		   struct ib_udata *udata);
int pib_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		   enum ib_srq_attr_mask attr_mask, struct ib_udata *udata);
int pib_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int pib_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int pib_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr);
void pib_srq_async_event(struct pib_dev *dev, u32 srqn, enum ib_event_type type);
void pib_srq_retire(struct pib_srq *srq);

#endif /* PIB_H */
