/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pib.h - the pib InfiniBand HCA driver: device and verbs objects.
 *
 * Layers, each in its own file:
 *   pib_main.c     PCI probe/remove, BARs, MSI-X, the ib_device_ops table, async events
 *   pib_verbs.c    the verbs; they reach the device only through pib_com_cmd.c
 *   pib_com_cmd.c  one function per admin command
 *   pib_com.c      the admin queue and async event queue engine (the only ring code)
 */
#ifndef PIB_H
#define PIB_H

#include <linux/idr.h>
#include <linux/pci.h>

#include <rdma/ib_verbs.h>

#include "pib_com.h"

#define PIB_DRV_NAME    "pib"
#define PIB_PORT        1       /* the only port */

struct pib_dev {
	struct ib_device ibdev;         /* first: ib_alloc_device() requires it */
	struct pci_dev *pdev;
	struct pib_com_dev com;

	phys_addr_t uar_bar_start;      /* BAR2: user contexts' UAR pages are mmap'ed from here */
	u32 num_uars;

	struct pib_device_attr attr;    /* QUERY_DEVICE at probe; the device never changes it */
	u16 pkey_tbl_len;               /* from QUERY_PORT at probe: the tables' fixed sizes */
	u16 gid_tbl_len;

	struct ida pd_ida;              /* PD numbers */

	u8 port_event;                  /* last port event logged (PIB_AE_*), to log changes once */

	char admin_irq_name[32];
	char aeq_irq_name[32];
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

/* Data path: next stage.  They exist so that ib_core can size its allocations. */
struct pib_cq {
	struct ib_cq ibcq;
};

struct pib_qp {
	struct ib_qp ibqp;
};

/* How an mmap offset handed to userspace is to be mapped. */
enum pib_mmap_flag {
	PIB_MMAP_IO_NC,                 /* device MMIO (a UAR page), non-cached */
};

struct pib_user_mmap_entry {
	struct rdma_user_mmap_entry rdma_entry;
	phys_addr_t address;
	u8 mmap_flag;                   /* enum pib_mmap_flag */
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

static inline struct pib_user_mmap_entry *to_pmmap(struct rdma_user_mmap_entry *rdma_entry)
{
	return container_of(rdma_entry, struct pib_user_mmap_entry, rdma_entry);
}

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

int pib_alloc_ucontext(struct ib_ucontext *ibucontext, struct ib_udata *udata);
void pib_dealloc_ucontext(struct ib_ucontext *ibucontext);
void pib_disassociate_ucontext(struct ib_ucontext *ibucontext);
int pib_mmap(struct ib_ucontext *ibucontext, struct vm_area_struct *vma);
void pib_mmap_free(struct rdma_user_mmap_entry *rdma_entry);

int pib_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
int pib_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);

/* Data path: next stage.  Until then these refuse (-EOPNOTSUPP). */
int pib_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		  struct ib_udata *udata);
int pib_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int pib_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int pib_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
int pib_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init_attr,
		  struct ib_udata *udata);
int pib_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int attr_mask,
		  struct ib_udata *udata);
int pib_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int pib_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		  const struct ib_send_wr **bad_wr);
int pib_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		  const struct ib_recv_wr **bad_wr);
struct ib_mr *pib_get_dma_mr(struct ib_pd *ibpd, int access);
struct ib_mr *pib_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length, u64 virt_addr,
			      int access, struct ib_udata *udata);
int pib_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);

#endif /* PIB_H */
