// SPDX-License-Identifier: GPL-2.0
/*
 * pib_verbs.c - the verbs of the pib HCA.
 *
 * Verbs reach the device only through pib_com_cmd.c.  What userspace hands in (udata, mmap
 * requests) is checked here before anything reaches the device.
 */
#include <linux/kernel.h>
#include <linux/mm.h>

#include "pib.h"
#include "pib_com_cmd.h"
#include "pib-abi.h"

/* A UAR page is mapped into a process as one page: a larger CPU page would expose the
 * neighbouring UARs, which belong to other processes. */
static_assert(PAGE_SIZE == PIB_UAR_PAGE_SIZE, "a UAR page must be exactly one CPU page");

/* The device reports u32 limits; ib_device_attr holds them in ints. */
static int pib_limit(u32 v)
{
	return min_t(u32, v, INT_MAX);
}

/* No request fields are defined yet: a provider may send any length, all of it zero. */
static bool pib_udata_in_cleared(struct ib_udata *udata)
{
	return !udata || !udata->inlen || ib_is_udata_cleared(udata, 0, udata->inlen);
}

/* ------------------------------------------------------------------------------------------
 * Device and port
 * ------------------------------------------------------------------------------------------ */

int pib_query_device(struct ib_device *ibdev, struct ib_device_attr *props,
		     struct ib_udata *udata)
{
	const struct pib_device_attr *a = &to_pdev(ibdev)->attr;

	if (!pib_udata_in_cleared(udata)) {
		ibdev_dbg(ibdev, "query_device: unknown request bytes\n");
		return -EINVAL;
	}

	memset(props, 0, sizeof(*props));
	props->fw_ver = a->fw_ver;
	props->sys_image_guid = cpu_to_be64(a->sys_image_guid);
	props->max_mr_size = a->max_mr_size;
	props->page_size_cap = a->page_size_cap;
	props->vendor_id = a->vendor_id;
	props->vendor_part_id = a->vendor_part_id;
	props->hw_ver = a->hw_ver;
	props->max_qp = pib_limit(a->max_qp);
	props->max_qp_wr = pib_limit(a->max_qp_wr);
	props->max_send_sge = pib_limit(a->max_sge);
	props->max_recv_sge = pib_limit(a->max_sge);
	props->max_sge_rd = pib_limit(a->max_sge);
	props->max_cq = pib_limit(a->max_cq);
	props->max_cqe = pib_limit(a->max_cqe);
	props->max_mr = pib_limit(a->max_mr);
	props->max_pd = pib_limit(a->max_pd);
	props->max_qp_rd_atom = pib_limit(a->max_qp_rd_atom);
	props->max_qp_init_rd_atom = pib_limit(a->max_qp_init_rd_atom);
	props->max_res_rd_atom = min_t(u64, (u64)a->max_qp_rd_atom * a->max_qp, INT_MAX);
	props->max_srq = pib_limit(a->max_srq);
	props->max_srq_wr = pib_limit(a->max_srq_wr);
	props->max_srq_sge = pib_limit(a->max_srq_sge);
	props->max_ah = pib_limit(a->max_ah);
	props->max_pkeys = a->max_pkeys;
	props->local_ca_ack_delay = a->local_ca_ack_delay;
	props->atomic_cap = IB_ATOMIC_NONE;
	/*
	 * pib_hw.h defines no device capability bits yet; the one thing this driver already
	 * does is deliver PORT_ACTIVE events (from the AEQ).
	 */
	props->device_cap_flags = IB_DEVICE_PORT_ACTIVE_EVENT;
	return 0;
}

void pib_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	u64 fw = to_pdev(ibdev)->attr.fw_ver;

	snprintf(str, IB_FW_VERSION_NAME_MAX, "%u.%u.%u", (u32)(fw >> 32) & 0xffff,
		 (u32)(fw >> 16) & 0xffff, (u32)fw & 0xffff);
}

/* Asked of the device every time: the port's state follows the link. */
int pib_query_port(struct ib_device *ibdev, u32 port, struct ib_port_attr *props)
{
	struct pib_dev *dev = to_pdev(ibdev);
	struct pib_port_attr pa;
	int err;

	err = pib_cmd_query_port(&dev->com, port, &pa);
	if (err)
		return err;

	props->subnet_prefix = pa.subnet_prefix;
	props->state = pa.state;
	props->phys_state = pa.phys_state;
	props->max_mtu = pa.max_mtu;
	props->active_mtu = pa.active_mtu;
	props->gid_tbl_len = pa.gid_tbl_len;
	props->pkey_tbl_len = pa.pkey_tbl_len;
	props->port_cap_flags = pa.port_cap_flags;
	props->max_msg_sz = pa.max_msg_sz;
	props->bad_pkey_cntr = pa.bad_pkey_cntr;
	props->qkey_viol_cntr = pa.qkey_viol_cntr;
	props->lid = pa.lid;
	props->sm_lid = pa.sm_lid;
	props->lmc = pa.lmc;
	props->sm_sl = pa.sm_sl;
	props->max_vl_num = 1;          /* IBTA encoding: VL0 only */
	props->active_width = pa.active_width;
	props->active_speed = pa.active_speed;
	props->init_type_reply = pa.init_type_reply;
	return 0;
}

int pib_get_port_immutable(struct ib_device *ibdev, u32 port,
			   struct ib_port_immutable *immutable)
{
	struct pib_dev *dev = to_pdev(ibdev);

	immutable->pkey_tbl_len = dev->pkey_tbl_len;
	immutable->gid_tbl_len = dev->gid_tbl_len;
	/*
	 * The IB transport, but not yet IB management: with RDMA_CORE_PORT_IBA_IB's MAD/SMI
	 * bits, ib_core's MAD layer would create QP0/QP1 the moment the device registers,
	 * and those need the data path (next stage).  Without RDMA_CORE_CAP_IB_MAD, ib_core
	 * requires max_mad_size to be 0 (verify_immutable() in core/device.c); it becomes
	 * IB_MGMT_MAD_SIZE together with RDMA_CORE_PORT_IBA_IB.
	 */
	immutable->core_cap_flags = RDMA_CORE_CAP_PROT_IB;
	immutable->max_mad_size = 0;
	return 0;
}

enum rdma_link_layer pib_get_link_layer(struct ib_device *ibdev, u32 port)
{
	return IB_LINK_LAYER_INFINIBAND;
}

int pib_query_pkey(struct ib_device *ibdev, u32 port, u16 index, u16 *pkey)
{
	struct pib_dev *dev = to_pdev(ibdev);

	if (index >= dev->pkey_tbl_len)
		return -EINVAL;
	return pib_cmd_query_pkey(&dev->com, port, index, pkey);
}

int pib_query_gid(struct ib_device *ibdev, u32 port, int index, union ib_gid *gid)
{
	struct pib_dev *dev = to_pdev(ibdev);

	if (index < 0 || index >= dev->gid_tbl_len)
		return -EINVAL;
	return pib_cmd_query_gid(&dev->com, port, index, gid->raw);
}

/* ------------------------------------------------------------------------------------------
 * User contexts and mmap
 * ------------------------------------------------------------------------------------------ */

static struct rdma_user_mmap_entry *
pib_user_mmap_entry_insert(struct ib_ucontext *ibucontext, phys_addr_t address, size_t length,
			   u8 mmap_flag, u64 *offset)
{
	struct pib_user_mmap_entry *entry;
	int err;

	entry = kzalloc(sizeof(*entry), GFP_KERNEL);
	if (!entry)
		return NULL;

	entry->address = address;
	entry->mmap_flag = mmap_flag;
	err = rdma_user_mmap_entry_insert(ibucontext, &entry->rdma_entry, length);
	if (err) {
		kfree(entry);
		return NULL;
	}
	*offset = rdma_user_mmap_get_offset(&entry->rdma_entry);
	return &entry->rdma_entry;
}

int pib_alloc_ucontext(struct ib_ucontext *ibucontext, struct ib_udata *udata)
{
	struct pib_ucontext *uctx = to_pucontext(ibucontext);
	struct pib_dev *dev = to_pdev(ibucontext->device);
	struct pib_ibv_alloc_ucontext_resp resp = {};
	u64 uar_key;
	u32 uar;
	int err;

	if (!pib_udata_in_cleared(udata)) {
		ibdev_dbg(&dev->ibdev, "alloc_ucontext: unknown request bytes\n");
		return -EINVAL;
	}

	err = pib_cmd_alloc_uar(&dev->com, &uar);
	if (err)
		return err;
	/* Page 0 is the kernel's; anything past BAR2 must never reach an mmap. */
	if (uar == 0 || uar >= dev->num_uars) {
		ibdev_err(&dev->ibdev, "ALLOC_UAR returned page %u, outside 1..%u\n",
			  uar, dev->num_uars - 1);
		return -EIO;
	}
	uctx->uar = uar;

	uctx->uar_mmap = pib_user_mmap_entry_insert(ibucontext,
						    dev->uar_bar_start +
						    (phys_addr_t)uar * PIB_UAR_PAGE_SIZE,
						    PIB_UAR_PAGE_SIZE, PIB_MMAP_IO_NC, &uar_key);
	if (!uctx->uar_mmap) {
		err = -ENOMEM;
		goto err_dealloc_uar;
	}

	resp.uar_index = uar;
	resp.uar_mmap_key = uar_key;
	resp.uar_size = PIB_UAR_PAGE_SIZE;
	/* An older provider may know a shorter response: give it what it has room for. */
	err = ib_copy_to_udata(udata, &resp, min(sizeof(resp), udata->outlen));
	if (err)
		goto err_remove_mmap;
	return 0;

err_remove_mmap:
	rdma_user_mmap_entry_remove(uctx->uar_mmap);
err_dealloc_uar:
	pib_cmd_dealloc_uar(&dev->com, uar);
	return err;
}

/*
 * By now no process maps the UAR page: ib_core destroys a context only when its file is
 * closed (every mapping holds the file), or after zapping the mappings on disassociation.
 */
void pib_dealloc_ucontext(struct ib_ucontext *ibucontext)
{
	struct pib_ucontext *uctx = to_pucontext(ibucontext);
	struct pib_dev *dev = to_pdev(ibucontext->device);

	rdma_user_mmap_entry_remove(uctx->uar_mmap);
	pib_cmd_dealloc_uar(&dev->com, uctx->uar);
}

/*
 * The device is going away while a process still has it open.  ib_core zaps the process's
 * mappings (all made through rdma_user_mmap_io()) and then destroys its objects and context
 * as usual, so there is nothing left for the driver to do here; providing the op is what
 * lets removal proceed instead of waiting for every such process to exit.
 */
void pib_disassociate_ucontext(struct ib_ucontext *ibucontext)
{
}

int pib_mmap(struct ib_ucontext *ibucontext, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *rdma_entry;
	struct pib_user_mmap_entry *entry;
	int err;

	/* Only an offset we handed out, MAP_SHARED, and exactly the length we said. */
	rdma_entry = rdma_user_mmap_entry_get(ibucontext, vma);
	if (!rdma_entry) {
		ibdev_dbg(ibucontext->device, "mmap: no object at pgoff %#lx of that size\n",
			  vma->vm_pgoff);
		return -EINVAL;
	}
	entry = to_pmmap(rdma_entry);

	switch (entry->mmap_flag) {
	case PIB_MMAP_IO_NC:
		/* Doorbells are written, never executed. */
		if (vma->vm_flags & VM_EXEC) {
			err = -EPERM;
			break;
		}
		vma->vm_flags &= ~VM_MAYEXEC;
		err = rdma_user_mmap_io(ibucontext, vma, PHYS_PFN(entry->address),
					rdma_entry->npages * PAGE_SIZE,
					pgprot_noncached(vma->vm_page_prot), rdma_entry);
		break;
	default:
		err = -EINVAL;
		break;
	}

	rdma_user_mmap_entry_put(rdma_entry);
	return err;
}

/* The last reference is gone: no mapping and no mmap offset refers to the entry. */
void pib_mmap_free(struct rdma_user_mmap_entry *rdma_entry)
{
	kfree(to_pmmap(rdma_entry));
}

/* ------------------------------------------------------------------------------------------
 * Protection domains.  The number is the driver's for now; the device learns of PDs with
 * the data path, when MRs and QPs name them.
 * ------------------------------------------------------------------------------------------ */

int pib_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibpd->device);
	struct pib_pd *pd = to_ppd(ibpd);
	int pdn;

	if (!pib_udata_in_cleared(udata)) {
		ibdev_dbg(&dev->ibdev, "alloc_pd: unknown request bytes\n");
		return -EINVAL;
	}
	if (!dev->attr.max_pd)
		return -ENOMEM;

	pdn = ida_alloc_max(&dev->pd_ida, pib_limit(dev->attr.max_pd) - 1, GFP_KERNEL);
	if (pdn < 0)
		return pdn;
	pd->pdn = pdn;
	return 0;
}

int pib_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	ida_free(&to_pdev(ibpd->device)->pd_ida, to_ppd(ibpd)->pdn);
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Data path: next stage.  Creation is refused, so the destroy, post and poll calls cannot
 * be reached; they are here because a kernel-verbs device must provide them.
 * ------------------------------------------------------------------------------------------ */

int pib_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		  struct ib_udata *udata)
{
	return -EOPNOTSUPP;
}

int pib_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	return 0;
}

int pib_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	return -EOPNOTSUPP;
}

int pib_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	return -EOPNOTSUPP;
}

int pib_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init_attr,
		  struct ib_udata *udata)
{
	return -EOPNOTSUPP;
}

int pib_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int attr_mask,
		  struct ib_udata *udata)
{
	return -EOPNOTSUPP;
}

int pib_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	return 0;
}

int pib_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		  const struct ib_send_wr **bad_wr)
{
	*bad_wr = wr;
	return -EOPNOTSUPP;
}

int pib_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		  const struct ib_recv_wr **bad_wr)
{
	*bad_wr = wr;
	return -EOPNOTSUPP;
}

struct ib_mr *pib_get_dma_mr(struct ib_pd *ibpd, int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}

struct ib_mr *pib_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length, u64 virt_addr,
			      int access, struct ib_udata *udata)
{
	return ERR_PTR(-EOPNOTSUPP);
}

int pib_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	return 0;
}
