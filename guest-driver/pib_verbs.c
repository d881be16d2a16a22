// SPDX-License-Identifier: GPL-2.0
/*
 * pib_verbs.c - the verbs of the pib HCA that are not queues, domains or memory registration:
 * device and port (with the port's hw_counters), user contexts and mmap, AHs and multicast; and
 * the DMA memory and page lists the queue verbs (pib_cq.c, pib_wq.c, pib_srq.c) and the MRs
 * (pib_mr.c) hand the device.  The commands are defined in include/pib_hw.h.
 *
 * Verbs reach the device only through pib_com_cmd.c.  What userspace hands in (udata, mmap
 * requests) is checked here before anything reaches the device.
 */
#include <linux/dma-mapping.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/sizes.h>

#include <rdma/ib_mad.h>
#include <rdma/iter.h>

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

/*
 * For the verbs whose request has no pib fields: a provider may send any length, all of it
 * zero.
 */
bool pib_udata_in_cleared(struct ib_udata *udata)
{
	return !udata || !udata->inlen || ib_is_udata_cleared(udata, 0, udata->inlen);
}

/*
 * A provider's request of size bytes: shorter is -EINVAL, longer only with zeroes past what
 * this driver knows (a newer provider's unused fields), else -EOPNOTSUPP.
 */
int pib_udata_req(struct ib_udata *udata, void *req, size_t size)
{
	if (udata->inlen < size)
		return -EINVAL;
	if (udata->inlen > size && !ib_is_udata_cleared(udata, size, udata->inlen - size))
		return -EOPNOTSUPP;
	return ib_copy_from_udata(req, udata, size);
}

/* ------------------------------------------------------------------------------------------
 * Device and port
 * ------------------------------------------------------------------------------------------ */

int pib_query_device(struct ib_device *ibdev, struct ib_device_attr *props,
		     struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibdev);
	const struct pib_device_attr *a = &dev->attr;

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
	props->max_qp_wr = dev->max_qp_wr;
	props->max_send_sge = dev->max_sge;
	props->max_recv_sge = dev->max_sge;
	props->max_sge_rd = dev->max_sge;
	props->max_cq = dev->max_cq;
	/*
	 * The most CQEs a CQ holds: its ring is a power of two deep, at most dev->max_cqe, and
	 * holds one less than its depth (pib_cq_init_kernel(), the provider's create_cq), so
	 * every count up to max_cqe is creatable.
	 */
	props->max_cqe = dev->max_cqe - 1;
	props->max_mr = pib_limit(a->max_mr);
	props->max_pd = pib_limit(a->max_pd);
	props->max_qp_rd_atom = pib_limit(a->max_qp_rd_atom);
	props->max_qp_init_rd_atom = pib_limit(a->max_qp_init_rd_atom);
	props->max_res_rd_atom = min_t(u64, (u64)a->max_qp_rd_atom * a->max_qp, INT_MAX);
	/* All 0 when the device has no SRQs (PIB_DEV_CAP_SRQ): see pib_query_hw(). */
	props->max_srq = pib_limit(dev->max_srq);
	props->max_srq_wr = dev->max_srq_wr;
	props->max_srq_sge = dev->max_srq_sge;
	props->max_ah = pib_limit(a->max_ah);
	props->max_pkeys = a->max_pkeys;
	props->max_mcast_grp = pib_limit(a->max_mcast_grp);
	props->max_mcast_qp_attach = pib_limit(a->max_mcast_qp_attach);
	props->max_total_mcast_qp_attach = pib_limit(a->max_total_mcast_qp_attach);
	props->local_ca_ack_delay = a->local_ca_ack_delay;
	/* The device's atomics are atomic across the whole HCA (PIB_DEV_CAP_ATOMIC). */
	props->atomic_cap = a->device_cap_flags & PIB_DEV_CAP_ATOMIC ? IB_ATOMIC_HCA :
								      IB_ATOMIC_NONE;
	props->masked_atomic_cap = IB_ATOMIC_NONE;

	/*
	 * PORT_ACTIVE events come from the AEQ; a modify_qp may name the current state
	 * (IB_QP_CUR_STATE); the system image GUID is the device's.
	 */
	props->device_cap_flags = IB_DEVICE_PORT_ACTIVE_EVENT | IB_DEVICE_CURR_QP_STATE_MOD |
				  IB_DEVICE_SYS_IMAGE_GUID;
	if (a->device_cap_flags & PIB_DEV_CAP_RC_RNR_NAK_GEN)
		props->device_cap_flags |= IB_DEVICE_RC_RNR_NAK_GEN;
	/*
	 * Windows of type 1 and type 2B (a type 2 window is bound through, and belongs to,
	 * one QP), bound by the provider's BIND_MW WQEs.  The device reports no window
	 * count, so max_mw stays 0 ("not reported").
	 */
	if (a->device_cap_flags & PIB_DEV_CAP_MEM_WINDOW)
		props->device_cap_flags |= IB_DEVICE_MEM_WINDOW | IB_DEVICE_MEM_WINDOW_TYPE_2B;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
	/* ATOMIC WRITE (IBTA 1.5, ib_core 6.2+): the provider's ibv_wr_atomic_write. */
	if (a->device_cap_flags & PIB_DEV_CAP_ATOMIC_WRITE)
		props->device_cap_flags |= IB_DEVICE_ATOMIC_WRITE;
	/*
	 * RDMA FLUSH to global visibility (IBA 1.5, ib_core 6.2+): MRs and QPs may grant it, the
	 * provider's ibv_wr_flush sends it.  Not to persistence: the device has no persistence
	 * domain, so ib_core refuses IB_ACCESS_FLUSH_PERSISTENT on an MR.
	 */
	if (a->device_cap_flags & PIB_DEV_CAP_FLUSH)
		props->device_cap_flags |= IB_DEVICE_FLUSH_GLOBAL;
#endif
	/* XRC domains, XRC SRQs and XRC initiator and target QPs (user space's). */
	if ((a->device_cap_flags & PIB_DEV_CAP_XRC) && dev->max_srq)
		props->device_cap_flags |= IB_DEVICE_XRC;
	/* User SRQs (and CQs) move to a bigger or smaller ring, nothing lost (RESIZE). */
	if ((a->device_cap_flags & PIB_DEV_CAP_RESIZE) && dev->max_srq)
		props->device_cap_flags |= IB_DEVICE_SRQ_RESIZE;
	/*
	 * The IBTA's base memory management extensions: fast registration (alloc_mr,
	 * map_mr_sg, IB_WR_REG_MR), local invalidation and SEND with invalidate
	 * (PIB_DEV_CAP_MEM_MGT_EXT), which storage and file ULPs require.
	 */
	if (dev->max_fast_reg_pages) {
		props->device_cap_flags |= IB_DEVICE_MEM_MGT_EXTENSIONS;
		props->max_fast_reg_page_list_len = dev->max_fast_reg_pages;
	}
	props->max_dm_size = dev->max_dm_size;
	/* The device clock (the UAR's CLOCK registers, CQE timestamps): 64 bits of it. */
	if (dev->clock_khz) {
		props->hca_core_clock = dev->clock_khz;
		props->timestamp_mask = U64_MAX;
	}
	/* Event moderation (modify_cq); both 0 when the device has none. */
	props->cq_caps.max_cq_moderation_count = dev->max_cq_mod_count;
	props->cq_caps.max_cq_moderation_period = dev->max_cq_mod_period;
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
	props->max_vl_num = pa.max_vl_num ?: 1;     /* IBTA VLCap encoding; 1: VL0 only */
	props->active_width = pa.active_width;
	props->active_speed = pa.active_speed;
	props->init_type_reply = pa.init_type_reply;
	props->subnet_timeout = pa.subnet_timeout;
	return 0;
}

/* The CapabilityMask bits ib_core's clients set are PortInfo's, which the device takes. */
static_assert(IB_PORT_SM == PIB_PORT_CAP_SM, "CapabilityMask bits");
static_assert(IB_PORT_CM_SUP == PIB_PORT_CAP_CM, "CapabilityMask bits");
static_assert(IB_PORT_CLIENT_REG_SUP == PIB_PORT_CAP_CLIENT_REREG, "CapabilityMask bits");
static_assert(IB_DEVICE_NODE_DESC_MAX == PIB_SMP_DATA_SIZE, "NodeDescription size");

/*
 * What runs above the port, told to the subnet through PortInfo:CapabilityMask: ib_cm sets
 * IB_PORT_CM_SUP while it serves the port (cm_add_one() fails without this verb), ib_umad
 * IB_PORT_SM while an SM holds /dev/infiniband/issmN.  The device sets and clears the bits
 * itself (SET_PORT's cap_set and cap_clr), so callers racing each other need no
 * read-modify-write here; a change raises trap 144 to the SM.  A port shutdown, an InitType
 * or a Q_Key violation counter reset the device cannot do.
 */
int pib_modify_port(struct ib_device *ibdev, u32 port, int mask, struct ib_port_modify *props)
{
	struct pib_dev *dev = to_pdev(ibdev);
	struct pib_cmd_set_port set = {
		.port_num = port,
		.mask = PIB_SET_PORT_CAPS,
		.cap_set = props->set_port_cap_mask,
		.cap_clr = props->clr_port_cap_mask,
	};

	if (port != PIB_PORT_NUM)
		return -EINVAL;
	if (mask)
		return -EOPNOTSUPP;
	if (!set.cap_set && !set.cap_clr)
		return 0;
	return pib_cmd_set_port(&dev->com, &set);
}

/*
 * The NodeDescription (sysfs node_desc, rdma-ndd): the firmware's SMA answers with it, and
 * ib_core shows its own copy, which follows the firmware's under the lock.  The system image
 * GUID is the device's to say.
 */
int pib_modify_device(struct ib_device *ibdev, int mask, struct ib_device_modify *props)
{
	struct pib_dev *dev = to_pdev(ibdev);
	int err;

	if (mask & ~IB_DEVICE_MODIFY_NODE_DESC)
		return -EOPNOTSUPP;
	if (!(mask & IB_DEVICE_MODIFY_NODE_DESC))
		return 0;

	mutex_lock(&dev->node_desc_lock);
	err = pib_cmd_set_node_desc(&dev->com, (const u8 *)props->node_desc);
	if (!err)
		memcpy(ibdev->node_desc, props->node_desc, IB_DEVICE_NODE_DESC_MAX);
	mutex_unlock(&dev->node_desc_lock);
	return err;
}

int pib_get_port_immutable(struct ib_device *ibdev, u32 port,
			   struct ib_port_immutable *immutable)
{
	struct pib_dev *dev = to_pdev(ibdev);

	immutable->pkey_tbl_len = dev->pkey_tbl_len;
	immutable->gid_tbl_len = dev->gid_tbl_len;
	/*
	 * A managed IB port: ib_core's MAD layer creates QP0 and QP1 and brings up ib_umad
	 * (opensm, the diags), the SA and CM clients and IPoIB on it.  A device without
	 * management agents (pib_mad_probe()) gets the IB transport alone; without
	 * RDMA_CORE_CAP_IB_MAD ib_core requires max_mad_size 0 (verify_immutable()).
	 */
	if (dev->mad) {
		immutable->core_cap_flags = RDMA_CORE_PORT_IBA_IB;
		immutable->max_mad_size = IB_MGMT_MAD_SIZE;
	} else {
		immutable->core_cap_flags = RDMA_CORE_CAP_PROT_IB;
		immutable->max_mad_size = 0;
	}
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
 * Port counters: /sys/class/infiniband/pib_<n>/ports/1/hw_counters/<name>, one file per
 * enum pib_counter, named as in pib_hw.h.  Only for a device that answers QUERY_COUNTERS
 * (pib_dev.counters).
 * ------------------------------------------------------------------------------------------ */

#define PIB_STAT(id, sysfs)     [PIB_CNT_##id] = { .name = #sysfs },
static const struct rdma_stat_desc pib_port_stats[] = {
	PIB_COUNTERS(PIB_STAT)
};
#undef PIB_STAT
static_assert(ARRAY_SIZE(pib_port_stats) == PIB_CNT_MAX, "a name for every pib counter");

/* ib_core frees the struct when the device goes away. */
struct rdma_hw_stats *pib_alloc_hw_port_stats(struct ib_device *ibdev, u32 port)
{
	return rdma_alloc_hw_stats_struct(pib_port_stats, ARRAY_SIZE(pib_port_stats),
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

/*
 * One QUERY_COUNTERS reads them all, which is what ib_core is told (the return value); it
 * then serves reads from stats->value for the lifespan.  On failure stats->value is left as
 * it was and the read fails with the error.
 */
int pib_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats, u32 port,
		     int index)
{
	struct pib_dev *dev = to_pdev(ibdev);
	int err;

	if (port != PIB_PORT_NUM || stats->num_counters != ARRAY_SIZE(pib_port_stats))
		return -EINVAL;
	err = pib_cmd_query_counters(&dev->com, stats->value, stats->num_counters);
	return err ?: stats->num_counters;
}

/* ------------------------------------------------------------------------------------------
 * User contexts and mmap
 * ------------------------------------------------------------------------------------------ */

/* An mmap entry of the context: the key its mmap offset is, rdma_user_mmap_get_offset(). */
struct rdma_user_mmap_entry *
pib_user_mmap_entry_insert(struct ib_ucontext *ibucontext, phys_addr_t address, size_t length,
			   u8 mmap_flag)
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
	return &entry->rdma_entry;
}

/* What the provider needs of a context: ALLOC_CONTEXT's answer, and QUERY_CONTEXT's. */
void pib_ucontext_resp(struct pib_ucontext *uctx, struct pib_ibv_alloc_ucontext_resp *resp)
{
	resp->uar_index = uctx->uar;
	resp->uar_mmap_key = rdma_user_mmap_get_offset(uctx->uar_mmap);
	resp->uar_size = PIB_UAR_PAGE_SIZE;
	resp->comp_mask |= PIB_IBV_UCTX_RESP_MASK_FLAGS;
	if (pib_dev_recv_dbrec(to_pdev(uctx->ibucontext.device)))
		resp->flags |= PIB_IBV_UCTX_F_RECV_DBREC;
}

int pib_alloc_ucontext(struct ib_ucontext *ibucontext, struct ib_udata *udata)
{
	struct pib_ucontext *uctx = to_pucontext(ibucontext);
	struct pib_dev *dev = to_pdev(ibucontext->device);
	struct pib_ibv_alloc_ucontext_resp resp = {};
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
						    PIB_UAR_PAGE_SIZE, PIB_MMAP_IO_NC);
	if (!uctx->uar_mmap) {
		err = -ENOMEM;
		goto err_dealloc_uar;
	}

	pib_ucontext_resp(uctx, &resp);
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
	pgprot_t prot;
	int err;

	/* Only an offset we handed out, MAP_SHARED, and exactly the length we said. */
	rdma_entry = rdma_user_mmap_entry_get(ibucontext, vma);
	if (!rdma_entry) {
		ibdev_dbg(ibucontext->device, "mmap: no object at pgoff %#lx of that size\n",
			  vma->vm_pgoff);
		return -EINVAL;
	}
	entry = to_pmmap(rdma_entry);

	/* Doorbells and device memory are written and read, never executed. */
	if (vma->vm_flags & VM_EXEC) {
		err = -EPERM;
		goto out;
	}
	vm_flags_clear(vma, VM_MAYEXEC);
	switch (entry->mmap_flag) {
	case PIB_MMAP_IO_NC:            /* a UAR page: device registers */
		prot = pgprot_noncached(vma->vm_page_prot);
		break;
	case PIB_MMAP_DM:               /* memory, as mlx5 maps its MEMIC */
		prot = pgprot_writecombine(vma->vm_page_prot);
		break;
	default:
		err = -EINVAL;
		goto out;
	}
	err = rdma_user_mmap_io(ibucontext, vma, PHYS_PFN(entry->address),
				rdma_entry->npages * PAGE_SIZE, prot, rdma_entry);
out:
	rdma_user_mmap_entry_put(rdma_entry);
	return err;
}

/*
 * The last reference is gone: no mapping and no mmap offset refers to the entry.  A DM's
 * device memory goes only now (struct pib_dm).
 */
void pib_mmap_free(struct rdma_user_mmap_entry *rdma_entry)
{
	struct pib_user_mmap_entry *entry = to_pmmap(rdma_entry);

	if (entry->mmap_flag == PIB_MMAP_DM)
		pib_dm_release(to_pdev(rdma_entry->ucontext->device), entry->dm);
	kfree(entry);
}

/* ------------------------------------------------------------------------------------------
 * Memory the device reads: rings of kernel objects and page lists
 * ------------------------------------------------------------------------------------------ */

/*
 * What a destroy verb makes of the device's answer.  BUSY leaves the object alive, and
 * ib_core keeps it.  Any other failure means that the device does not know the object
 * (BAD_RESOURCE) or is dead, and then it can no longer DMA (pib_com.c turns bus mastering
 * off): the driver frees the object anyway, since ib_core cannot handle a destroy that
 * fails for good (a kernel object's is a WARN, a user object's a leak at close).
 */
int pib_destroy_status(struct pib_dev *dev, const char *what, u32 num, int err)
{
	if (!err || err == -EBUSY)
		return err;
	ibdev_err_ratelimited(&dev->ibdev, "destroying %s %#x failed (%d); freeing it anyway\n",
			      what, num, err);
	return 0;
}

/*
 * Coherent memory comes zeroed, so a new ring holds no valid-looking entry, and it is aligned
 * to its size's page order, so it starts on a 4 KiB boundary as the device requires.  Larger
 * than one block of the page allocator is refused here, before the allocator warns of an
 * order it never serves (pib.h, PIB_DMA_BUF_MAX_BYTES).
 */
int pib_dma_buf_alloc(struct pib_dev *dev, size_t size, struct pib_dma_buf *buf)
{
	buf->va = NULL;
	if (size > PIB_DMA_BUF_MAX_BYTES)
		return -ENOMEM;
	buf->size = PAGE_ALIGN(size);
	buf->va = dma_alloc_coherent(&dev->pdev->dev, buf->size, &buf->dma, GFP_KERNEL);
	return buf->va ? 0 : -ENOMEM;
}

void pib_dma_buf_free(struct pib_dev *dev, struct pib_dma_buf *buf)
{
	if (buf->va)
		dma_free_coherent(&dev->pdev->dev, buf->size, buf->va, buf->dma);
	buf->va = NULL;
}

/* At most PIB_PBL_MAX_PAGES entries (pib.h). */
int pib_pbl_alloc(struct pib_dev *dev, u32 npages, struct pib_pbl *pbl)
{
	if (!npages || npages > PIB_PBL_MAX_PAGES)
		return -EINVAL;
	pbl->npages = npages;
	pbl->pages = dma_alloc_coherent(&dev->pdev->dev, npages * sizeof(u64), &pbl->dma,
					GFP_KERNEL);
	return pbl->pages ? 0 : -ENOMEM;
}

/* Also for the empty list ({}) of a ring that does not exist (the RQ of an SRQ's QP). */
void pib_pbl_free(struct pib_dev *dev, struct pib_pbl *pbl)
{
	if (pbl->pages)
		dma_free_coherent(&dev->pdev->dev, pbl->npages * sizeof(u64), pbl->pages,
				  pbl->dma);
	pbl->pages = NULL;
}

/* The 4 KiB pages of pinned user memory, which must be exactly npages of them. */
int pib_pbl_from_umem(struct pib_dev *dev, struct ib_umem *umem, u32 npages,
		      struct pib_pbl *pbl)
{
	struct ib_block_iter biter;
	u32 i = 0;
	int err;

	if (ib_umem_num_dma_blocks(umem, SZ_4K) != npages)
		return -EINVAL;
	err = pib_pbl_alloc(dev, npages, pbl);
	if (err)
		return err;
	rdma_umem_for_each_dma_block(umem, &biter, SZ_4K) {
		if (WARN_ON_ONCE(i >= npages))
			break;
		pbl->pages[i++] = rdma_block_iter_dma_address(&biter);
	}
	return 0;
}

/* The pages of a kernel ring: contiguous, so the list just counts them off. */
int pib_pbl_from_dma_buf(struct pib_dev *dev, const struct pib_dma_buf *buf,
			 struct pib_pbl *pbl)
{
	u32 i;
	int err;

	err = pib_pbl_alloc(dev, buf->size / SZ_4K, pbl);
	if (err)
		return err;
	for (i = 0; i < pbl->npages; i++)
		pbl->pages[i] = buf->dma + (dma_addr_t)i * SZ_4K;
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Address handles (kernel only: the provider keeps user AHs in userspace).  The device has no
 * AH object: a UD send WQE carries the destination LID and SL, which post_send takes from here.
 * May be called in atomic context (without RDMA_CREATE_AH_SLEEPABLE): nothing here sleeps.
 * ------------------------------------------------------------------------------------------ */

int pib_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init_attr,
		  struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibah->device);
	const struct rdma_ah_attr *attr = init_attr->ah_attr;
	struct pib_ah *ah = to_pah(ibah);

	if (attr->type != RDMA_AH_ATTR_TYPE_IB || rdma_ah_get_port_num(attr) != PIB_PORT_NUM ||
	    rdma_ah_get_dlid(attr) > U16_MAX || rdma_ah_get_sl(attr) > 15)
		return -EINVAL;
	if ((rdma_ah_get_ah_flags(attr) & IB_AH_GRH) &&
	    rdma_ah_read_grh(attr)->sgid_index >= dev->gid_tbl_len)
		return -EINVAL;

	ah->attr = *attr;
	ah->attr.grh.sgid_attr = NULL;
	return 0;
}

int pib_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Multicast (ATTACH_MCAST / DETACH_MCAST): the group is the one the SA assigned (an MCMember
 * join by ib_sa or by a user's rdma_cm), so the MGID is a multicast GID (ff...) and the MLID is
 * in the multicast range.  uverbs calls these directly, without ib_attach_mcast()'s checks, so
 * they are made here too; the device checks again.
 * ------------------------------------------------------------------------------------------ */

static int pib_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid, u8 opcode)
{
	if (ibqp->qp_type != IB_QPT_UD || gid->raw[0] != 0xff ||
	    lid < be16_to_cpu(IB_MULTICAST_LID_BASE) || lid == be16_to_cpu(IB_LID_PERMISSIVE))
		return -EINVAL;
	return pib_cmd_mcast(&to_pdev(ibqp->device)->com, opcode, ibqp->qp_num, lid, gid->raw);
}

/* Attaching a QP twice is no error: the device keeps one attachment. */
int pib_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	return pib_mcast(ibqp, gid, lid, PIB_CMD_ATTACH_MCAST);
}

/* Detaching a QP that is not attached is EINVAL (the device's BAD_PARAM). */
int pib_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	return pib_mcast(ibqp, gid, lid, PIB_CMD_DETACH_MCAST);
}

/*
 * ib_mad takes a response for a LID-routed request only from where the request went: it
 * compares the request's AH (rdma_query_ah()) with the response's receive completion.
 */
int pib_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	*attr = to_pah(ibah)->attr;
	return 0;
}
