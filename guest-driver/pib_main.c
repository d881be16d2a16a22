// SPDX-License-Identifier: GPL-2.0
/*
 * pib_main.c - PCI driver for the pib InfiniBand HCA: probe and remove, BARs, MSI-X, the
 * ib_device_ops tables and the delivery of events to ib_core: async events (AEQ, vector 1)
 * for the port, CQs, QPs and SRQs, and completion events (CEQ, vector 2) for CQs.
 *
 * Bring-up order (remove undoes it backwards):
 *   map BAR0/BAR2, check the device, reset it, allocate the rings, MSI-X and the admin and
 *   completion event IRQs, enable the queues, NOP/QUERY_DEVICE/QUERY_PORT (and a first
 *   QUERY_COUNTERS, to learn whether the device counts, and a NodeDescription Get through
 *   MAD_IFC, to learn whether it has management agents), register the
 *   ib_device, then arm the async event IRQ: an event is only ever delivered to a registered
 *   ib_device.  (Completion events need a CQ, and there is none before registration.)
 */
#include <linux/interrupt.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "pib.h"
#include "pib_com_cmd.h"
#include "pib-abi.h"

static const struct pci_device_id pib_pci_table[] = {
	{ PCI_DEVICE(PIB_PCI_VENDOR_ID, PIB_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, pib_pci_table);

static const struct ib_device_ops pib_dev_ops = {
	.owner = THIS_MODULE,
	/* An out-of-tree driver has no RDMA_DRIVER_* id; the provider matches the PCI ID. */
	.driver_id = RDMA_DRIVER_UNKNOWN,
	.uverbs_abi_ver = PIB_UVERBS_ABI_VERSION,

	.alloc_pd = pib_alloc_pd,
	.alloc_ucontext = pib_alloc_ucontext,
	.create_ah = pib_create_ah,
	.create_cq = pib_create_cq,
	.create_qp = pib_create_qp,
	.dealloc_pd = pib_dealloc_pd,
	.dealloc_ucontext = pib_dealloc_ucontext,
	.dereg_mr = pib_dereg_mr,
	.destroy_ah = pib_destroy_ah,
	.destroy_cq = pib_destroy_cq,
	.destroy_qp = pib_destroy_qp,
	.disassociate_ucontext = pib_disassociate_ucontext,
	.get_dev_fw_str = pib_get_dev_fw_str,
	.get_dma_mr = pib_get_dma_mr,
	.get_link_layer = pib_get_link_layer,
	.get_port_immutable = pib_get_port_immutable,
	.mmap = pib_mmap,
	.mmap_free = pib_mmap_free,
	.modify_qp = pib_modify_qp,
	.poll_cq = pib_poll_cq,
	.post_recv = pib_post_recv,
	.post_send = pib_post_send,
	.query_ah = pib_query_ah,
	.query_device = pib_query_device,
	.query_gid = pib_query_gid,
	.query_pkey = pib_query_pkey,
	.query_port = pib_query_port,
	.query_qp = pib_query_qp,
	.query_ucontext = pib_query_ucontext,
	.reg_user_mr = pib_reg_user_mr,
	.reg_user_mr_dmabuf = pib_reg_user_mr_dmabuf,
	.rereg_user_mr = pib_rereg_user_mr,
	.req_notify_cq = pib_req_notify_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, pib_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, pib_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_pd, pib_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, pib_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, pib_ucontext, ibucontext),
};

/*
 * The verbs of the device's optional features, added to the device only when it has them,
 * so that ib_core and uverbs answer EOPNOTSUPP for the others without asking the driver.
 */
static const struct ib_device_ops pib_srq_ops = {               /* PIB_DEV_CAP_SRQ */
	.create_srq = pib_create_srq,
	.destroy_srq = pib_destroy_srq,
	.modify_srq = pib_modify_srq,
	.post_srq_recv = pib_post_srq_recv,
	.query_srq = pib_query_srq,

	INIT_RDMA_OBJ_SIZE(ib_srq, pib_srq, ibsrq),
};

static const struct ib_device_ops pib_xrc_ops = {               /* PIB_DEV_CAP_XRC, SRQ */
	.alloc_xrcd = pib_alloc_xrcd,
	.dealloc_xrcd = pib_dealloc_xrcd,

	INIT_RDMA_OBJ_SIZE(ib_xrcd, pib_xrcd, ibxrcd),
};

static const struct ib_device_ops pib_resize_ops = {            /* PIB_DEV_CAP_RESIZE */
	.resize_cq = pib_resize_cq,
};

static const struct ib_device_ops pib_cq_mod_ops = {            /* max_cq_mod_period > 0 */
	.modify_cq = pib_modify_cq,
};

static const struct ib_device_ops pib_mw_ops = {                /* PIB_DEV_CAP_MEM_WINDOW */
	.alloc_mw = pib_alloc_mw,
	.dealloc_mw = pib_dealloc_mw,

	INIT_RDMA_OBJ_SIZE(ib_mw, pib_mw, ibmw),
};

static const struct ib_device_ops pib_mcast_ops = {            /* max_mcast_grp > 0 */
	.attach_mcast = pib_attach_mcast,
	.detach_mcast = pib_detach_mcast,
};

static const struct ib_device_ops pib_frwr_ops = {              /* PIB_DEV_CAP_MEM_MGT_EXT */
	.alloc_mr = pib_alloc_mr,
	.map_mr_sg = pib_map_mr_sg,
};

static const struct ib_device_ops pib_dm_ops = {                /* max_dm_size > 0 */
	.alloc_dm = pib_alloc_dm,
	.dealloc_dm = pib_dealloc_dm,
	.reg_dm_mr = pib_reg_dm_mr,
};

static const struct ib_device_ops pib_hw_stats_ops = {          /* QUERY_COUNTERS */
	.alloc_hw_port_stats = pib_alloc_hw_port_stats,
	.get_hw_stats = pib_get_hw_stats,
};

static const struct ib_device_ops pib_mad_ops = {               /* MAD_IFC: a managed port */
	.modify_device = pib_modify_device,
	.modify_port = pib_modify_port,
	.process_mad = pib_process_mad,
};

/* ------------------------------------------------------------------------------------------
 * Async events
 * ------------------------------------------------------------------------------------------ */

/* Log a port transition once, however many times the device reports it. */
static void pib_log_port_event(struct pib_dev *dev, u8 type)
{
	if (dev->port_event == type)
		return;
	dev->port_event = type;

	switch (type) {
	case PIB_AE_PORT_ACTIVE:
		ibdev_info(&dev->ibdev, "port %u: link up, ACTIVE\n", PIB_PORT_NUM);
		break;
	case PIB_AE_LINK_UP:
		ibdev_info(&dev->ibdev, "port %u: link up, INIT: waiting for a subnet manager\n",
			   PIB_PORT_NUM);
		break;
	case PIB_AE_PORT_ERR:
		ibdev_info(&dev->ibdev, "port %u: link down\n", PIB_PORT_NUM);
		break;
	}
}

/*
 * The IB affiliated async events: the ones that name a CQ, a QP or an SRQ (docs/reference/hardware.md,
 * "Affiliated async events").  Returns false for any other event type.
 */
static bool pib_handle_object_event(struct pib_dev *dev, const struct pib_aeqe *aeqe)
{
	switch (aeqe->type) {
	case PIB_AE_CQ_ERR:
		pib_cq_async_event(dev, aeqe->obj, IB_EVENT_CQ_ERR);
		return true;
	case PIB_AE_QP_FATAL:
		pib_qp_async_event(dev, aeqe->obj, IB_EVENT_QP_FATAL);
		return true;
	case PIB_AE_QP_REQ_ERR:
		pib_qp_async_event(dev, aeqe->obj, IB_EVENT_QP_REQ_ERR);
		return true;
	case PIB_AE_QP_ACCESS_ERR:
		pib_qp_async_event(dev, aeqe->obj, IB_EVENT_QP_ACCESS_ERR);
		return true;
	case PIB_AE_COMM_EST:
		pib_qp_async_event(dev, aeqe->obj, IB_EVENT_COMM_EST);
		return true;
	case PIB_AE_SQ_DRAINED:
		pib_qp_async_event(dev, aeqe->obj, IB_EVENT_SQ_DRAINED);
		return true;
	case PIB_AE_QP_LAST_WQE:
		pib_qp_async_event(dev, aeqe->obj, IB_EVENT_QP_LAST_WQE_REACHED);
		return true;
	case PIB_AE_SRQ_LIMIT:
		pib_srq_async_event(dev, aeqe->obj, IB_EVENT_SRQ_LIMIT_REACHED);
		return true;
	case PIB_AE_SRQ_ERR:
		pib_srq_async_event(dev, aeqe->obj, IB_EVENT_SRQ_ERR);
		return true;
	default:
		return false;
	}
}

/* The port events: what the link and the subnet manager did to the port (ib_core's cache,
 * the SA and CM clients and IPoIB follow them). */
static bool pib_port_event_type(u8 type, enum ib_event_type *event)
{
	switch (type) {
	case PIB_AE_PORT_ACTIVE:        *event = IB_EVENT_PORT_ACTIVE; return true;
	case PIB_AE_PORT_ERR:           *event = IB_EVENT_PORT_ERR; return true;
	case PIB_AE_LID_CHANGE:         *event = IB_EVENT_LID_CHANGE; return true;
	case PIB_AE_SM_CHANGE:          *event = IB_EVENT_SM_CHANGE; return true;
	case PIB_AE_PKEY_CHANGE:        *event = IB_EVENT_PKEY_CHANGE; return true;
	case PIB_AE_CLIENT_REREG:       *event = IB_EVENT_CLIENT_REREGISTER; return true;
	case PIB_AE_GID_CHANGE:         *event = IB_EVENT_GID_CHANGE; return true;
	default:                        return false;
	}
}

static void pib_handle_aeqe(void *data, const struct pib_aeqe *aeqe)
{
	struct pib_dev *dev = data;
	struct ib_event event = {
		.device = &dev->ibdev,
		.element.port_num = PIB_PORT_NUM,
	};

	if (pib_handle_object_event(dev, aeqe))
		return;

	if (aeqe->type == PIB_AE_LINK_UP) {
		/* Physical link only; the port is not ACTIVE, so ib_core has nothing to hear. */
		pib_log_port_event(dev, aeqe->type);
		return;
	}
	if (!pib_port_event_type(aeqe->type, &event.event)) {
		ibdev_err_ratelimited(&dev->ibdev, "unexpected async event %#x (obj %u)\n",
				      aeqe->type, aeqe->obj);
		return;
	}
	if (aeqe->obj != PIB_PORT_NUM) {
		ibdev_err_ratelimited(&dev->ibdev, "async event %#x for port %u, which does not exist\n",
				      aeqe->type, aeqe->obj);
		return;
	}
	switch (aeqe->type) {
	case PIB_AE_PORT_ACTIVE:
	case PIB_AE_PORT_ERR:
		pib_log_port_event(dev, aeqe->type);
		break;
	case PIB_AE_LID_CHANGE:
		ibdev_info(&dev->ibdev, "port %u: LID %llu\n", PIB_PORT_NUM, aeqe->data);
		break;
	default:
		ibdev_dbg(&dev->ibdev, "port %u: %s\n", PIB_PORT_NUM, ib_event_msg(event.event));
		break;
	}
	ib_dispatch_event(&event);
}

static irqreturn_t pib_admin_irq(int irq, void *data)
{
	pib_com_admin_intr(data);
	return IRQ_HANDLED;
}

/*
 * Threaded: a single thread delivers events in the order the device posted them, and the
 * consumers' event handlers run in process context, where ib_core's own do their work.
 */
static irqreturn_t pib_aeq_irq_thread(int irq, void *data)
{
	struct pib_dev *dev = data;

	pib_com_aeq_process(&dev->com, pib_handle_aeqe, dev);
	return IRQ_HANDLED;
}

/*
 * Hard IRQ: completion handlers expect to be called in interrupt context (ib_core's
 * schedule irq_poll or work; uverbs wakes the completion channel).
 */
static irqreturn_t pib_ceq_irq(int irq, void *data)
{
	struct pib_dev *dev = data;

	pib_com_ceq_process(&dev->com, pib_cq_comp_event, dev);
	return IRQ_HANDLED;
}

/*
 * Wait until no event handler runs any more that may have found an object in dev->cqs,
 * dev->qps or dev->srqs before the caller took it out.  synchronize_irq() also waits for a
 * threaded handler (the AEQ's), so this must not be called from an event handler: destroy
 * verbs sleep anyway, and consumers' handlers defer destruction to process context.
 */
void pib_sync_events(struct pib_dev *dev)
{
	synchronize_irq(pci_irq_vector(dev->pdev, PIB_MSIX_VEC_CEQ));
	synchronize_irq(pci_irq_vector(dev->pdev, PIB_MSIX_VEC_ASYNC));
}

/* ------------------------------------------------------------------------------------------
 * Probe and remove
 * ------------------------------------------------------------------------------------------ */

static int pib_map_bars(struct pib_dev *dev)
{
	struct pci_dev *pdev = dev->pdev;
	resource_size_t uar_len;
	int err;

	err = pcim_iomap_regions(pdev, BIT(PIB_BAR_REGS) | BIT(PIB_BAR_UAR), PIB_DRV_NAME);
	if (err) {
		dev_err(&pdev->dev, "cannot map BAR%u/BAR%u: %d\n", PIB_BAR_REGS, PIB_BAR_UAR, err);
		return err;
	}
	if (pci_resource_len(pdev, PIB_BAR_REGS) < PIB_REGS_SIZE) {
		dev_err(&pdev->dev, "BAR%u is too small for the registers\n", PIB_BAR_REGS);
		return -ENODEV;
	}
	dev->com.regs = pcim_iomap_table(pdev)[PIB_BAR_REGS];

	/*
	 * User contexts' UAR pages are mmap'ed from BAR2's physical address; the kernel's own
	 * mapping of BAR2 is for UAR page 0, the doorbells of kernel QPs and CQs.
	 */
	dev->uar0 = pcim_iomap_table(pdev)[PIB_BAR_UAR];
	dev->uar_bar_start = pci_resource_start(pdev, PIB_BAR_UAR);
	uar_len = pci_resource_len(pdev, PIB_BAR_UAR);
	dev->num_uars = pib_reg_read(&dev->com, PIB_REG_NUM_UARS);
	if (dev->num_uars < 2 || (u64)dev->num_uars * PIB_UAR_PAGE_SIZE > uar_len) {
		dev_err(&pdev->dev, "%u UAR pages do not fit BAR%u (%pa bytes)\n",
			dev->num_uars, PIB_BAR_UAR, &uar_len);
		return -ENODEV;
	}
	return 0;
}

static int pib_setup_irqs(struct pib_dev *dev)
{
	struct pci_dev *pdev = dev->pdev;
	int nvec, err;

	/* Vectors 0 (admin), 1 (async events) and 2 (completion events) are needed. */
	nvec = pci_alloc_irq_vectors(pdev, PIB_MSIX_VEC_CEQ + 1, PIB_MSIX_VECTORS,
				     PCI_IRQ_MSIX);
	if (nvec < 0) {
		dev_err(&pdev->dev, "cannot enable MSI-X: %d\n", nvec);
		return nvec;
	}

	snprintf(dev->admin_irq_name, sizeof(dev->admin_irq_name), "pib-admin@pci:%s",
		 pci_name(pdev));
	snprintf(dev->aeq_irq_name, sizeof(dev->aeq_irq_name), "pib-async@pci:%s",
		 pci_name(pdev));
	snprintf(dev->ceq_irq_name, sizeof(dev->ceq_irq_name), "pib-comp@pci:%s",
		 pci_name(pdev));
	err = request_irq(pci_irq_vector(pdev, PIB_MSIX_VEC_ADMIN), pib_admin_irq, 0,
			  dev->admin_irq_name, &dev->com);
	if (err) {
		dev_err(&pdev->dev, "cannot request the admin IRQ: %d\n", err);
		goto err_free_vectors;
	}
	err = request_irq(pci_irq_vector(pdev, PIB_MSIX_VEC_CEQ), pib_ceq_irq, 0,
			  dev->ceq_irq_name, dev);
	if (err) {
		dev_err(&pdev->dev, "cannot request the completion event IRQ: %d\n", err);
		goto err_free_admin;
	}
	return 0;

err_free_admin:
	free_irq(pci_irq_vector(pdev, PIB_MSIX_VEC_ADMIN), &dev->com);
err_free_vectors:
	pci_free_irq_vectors(pdev);
	return err;
}

static void pib_free_irqs(struct pib_dev *dev)
{
	free_irq(pci_irq_vector(dev->pdev, PIB_MSIX_VEC_CEQ), dev);
	free_irq(pci_irq_vector(dev->pdev, PIB_MSIX_VEC_ADMIN), &dev->com);
	pci_free_irq_vectors(dev->pdev);
}

/*
 * Does the device count (QUERY_COUNTERS)?  One that does not know the command (an older one:
 * BAD_OPCODE, -EOPNOTSUPP) simply has no hw_counters; any other failure is a broken device.
 */
static int pib_query_counters_cap(struct pib_dev *dev)
{
	u64 *counters;
	int err;

	counters = kcalloc(PIB_CNT_MAX, sizeof(*counters), GFP_KERNEL);
	if (!counters)
		return -ENOMEM;
	err = pib_cmd_query_counters(&dev->com, counters, PIB_CNT_MAX);
	kfree(counters);

	dev->counters = !err;
	if (err == -EOPNOTSUPP) {
		dev_info(&dev->pdev->dev, "device keeps no counters: no hw_counters\n");
		return 0;
	}
	return err;
}

/* What the device says about itself, checked before anything is built on it. */
static int pib_query_hw(struct pib_dev *dev, struct pib_port_attr *pa)
{
	struct device *d = &dev->pdev->dev;
	int err;

	/* Any value will do: the device must echo it. */
	err = pib_cmd_nop(&dev->com, 0xa5a5f00d);
	if (err)
		return err;
	err = pib_cmd_query_device(&dev->com, &dev->attr);
	if (err)
		return err;
	if (dev->attr.phys_port_cnt != PIB_NUM_PORTS) {
		dev_err(d, "device reports %u ports, the driver knows %u\n",
			dev->attr.phys_port_cnt, PIB_NUM_PORTS);
		return -ENODEV;
	}
	err = pib_cmd_query_port(&dev->com, PIB_PORT_NUM, pa);
	if (err)
		return err;
	if (!pa->pkey_tbl_len || !pa->gid_tbl_len) {
		dev_err(d, "port has an empty P_Key or GID table\n");
		return -ENODEV;
	}
	dev->pkey_tbl_len = pa->pkey_tbl_len;
	dev->gid_tbl_len = pa->gid_tbl_len;

	/*
	 * The limits the driver enforces: the device's, within what every layer agrees on
	 * (pib_hw.h) and, for CQs, within the CEQ's depth.
	 */
	dev->max_cq = min_t(u32, dev->attr.max_cq, PIB_CEQ_DEPTH);
	dev->max_cqe = min_t(u32, dev->attr.max_cqe, PIB_MAX_CQE);
	dev->max_qp_wr = min_t(u32, dev->attr.max_qp_wr, PIB_MAX_QP_WR);
	dev->max_sge = min_t(u32, dev->attr.max_sge, PIB_MAX_SGE);
	dev->max_inline = min_t(u32, dev->attr.max_inline_data, PIB_MAX_INLINE_DATA);
	/* No SRQs unless the device has them. */
	if (dev->attr.device_cap_flags & PIB_DEV_CAP_SRQ) {
		dev->max_srq_wr = min_t(u32, dev->attr.max_srq_wr, PIB_MAX_SRQ_WR);
		dev->max_srq_sge = min_t(u32, dev->attr.max_srq_sge, PIB_MAX_SGE);
		if (dev->max_srq_wr && dev->max_srq_sge)
			dev->max_srq = dev->attr.max_srq;
	}
	if (!dev->max_srq)
		dev->max_srq_wr = dev->max_srq_sge = 0;
	/* Fast registration only where the device has it, and for pages it reports. */
	if (dev->attr.device_cap_flags & PIB_DEV_CAP_MEM_MGT_EXT)
		dev->max_fast_reg_pages = min_t(u32, dev->attr.max_fast_reg_pages,
						PIB_MAX_FAST_REG_PAGES);

	/* Timestamped completions only with a clock whose rate the device says. */
	if (dev->attr.device_cap_flags & PIB_DEV_CAP_CLOCK)
		dev->clock_khz = dev->attr.clock_khz;

	/* Device memory only where BAR0 holds what the device says it has. */
	if (dev->attr.max_dm_size) {
		struct pci_dev *pdev = dev->pdev;
		u64 off = dev->attr.dm_bar_offset, size = dev->attr.max_dm_size;

		if (off < PIB_REGS_SIZE || off % PAGE_SIZE || size % PAGE_SIZE ||
		    off + size > pci_resource_len(pdev, PIB_BAR_REGS)) {
			dev_err(d, "device memory [%#llx, +%#llx) is not in BAR%u\n", off, size,
				PIB_BAR_REGS);
			return -ENODEV;
		}
		dev->dm_bar_start = pci_resource_start(pdev, PIB_BAR_REGS) + off;
		dev->max_dm_size = size;
	}

	/* Event moderation only where an event may wait: a count without a period does nothing. */
	if (dev->attr.max_cq_mod_period) {
		dev->max_cq_mod_count = dev->attr.max_cq_mod_count;
		dev->max_cq_mod_period = dev->attr.max_cq_mod_period;
	}

	err = pib_query_counters_cap(dev);
	if (err)
		return err;
	return pib_mad_probe(dev);
}

static int pib_ib_device_add(struct pib_dev *dev, const struct pib_port_attr *pa)
{
	struct ib_device *ibdev = &dev->ibdev;
	struct pci_dev *pdev = dev->pdev;
	int err;

	ibdev->node_type = RDMA_NODE_IB_CA;
	ibdev->node_guid = cpu_to_be64(dev->attr.node_guid);
	ibdev->phys_port_cnt = PIB_NUM_PORTS;
	ibdev->num_comp_vectors = 1;
	ibdev->dev.parent = &pdev->dev;
	ib_set_device_ops(ibdev, &pib_dev_ops);
	ibdev->driver_def = pib_uapi_defs;      /* pib_uapi.c: what importing needs */
	if (dev->max_srq)
		ib_set_device_ops(ibdev, &pib_srq_ops);
	if ((dev->attr.device_cap_flags & PIB_DEV_CAP_XRC) && dev->max_srq)
		ib_set_device_ops(ibdev, &pib_xrc_ops);
	if (dev->attr.device_cap_flags & PIB_DEV_CAP_MEM_WINDOW)
		ib_set_device_ops(ibdev, &pib_mw_ops);
	if (dev->attr.device_cap_flags & PIB_DEV_CAP_RESIZE)
		ib_set_device_ops(ibdev, &pib_resize_ops);
	if (dev->max_cq_mod_period)
		ib_set_device_ops(ibdev, &pib_cq_mod_ops);
	if (dev->attr.max_mcast_grp && dev->attr.max_mcast_qp_attach)
		ib_set_device_ops(ibdev, &pib_mcast_ops);
	if (dev->max_fast_reg_pages)
		ib_set_device_ops(ibdev, &pib_frwr_ops);
	if (dev->counters)
		ib_set_device_ops(ibdev, &pib_hw_stats_ops);
	if (dev->max_dm_size)
		ib_set_device_ops(ibdev, &pib_dm_ops);
	if (dev->mad)
		ib_set_device_ops(ibdev, &pib_mad_ops);

	/* The log says how the port starts; events then log only changes. */
	if (pa->state == PIB_PORT_ACTIVE)
		dev->port_event = PIB_AE_PORT_ACTIVE;
	else if (pa->phys_state == PIB_PHYS_LINKUP)
		dev->port_event = PIB_AE_LINK_UP;
	else
		dev->port_event = PIB_AE_PORT_ERR;

	err = ib_register_device(ibdev, "pib_%d", &pdev->dev);
	if (err) {
		dev_err(&pdev->dev, "cannot register the IB device: %d\n", err);
		return err;
	}
	ibdev_info(ibdev, "node GUID %016llx, port %u %s, LID %u\n",
		   (unsigned long long)dev->attr.node_guid, PIB_PORT_NUM,
		   pa->state == PIB_PORT_ACTIVE ? "ACTIVE" :
		   pa->phys_state == PIB_PHYS_LINKUP ? "link up" : "link down", pa->lid);
	return 0;
}

static int pib_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct pib_port_attr pa;
	struct pib_dev *dev;
	int err;

	/* pcim_*: the function's enable, regions and mappings are undone by devres. */
	err = pcim_enable_device(pdev);
	if (err) {
		dev_err(&pdev->dev, "cannot enable the PCI function: %d\n", err);
		return err;
	}
	pci_set_master(pdev);
	err = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (err) {
		dev_err(&pdev->dev, "no usable 64-bit DMA: %d\n", err);
		return err;
	}

	dev = ib_alloc_device(pib_dev, ibdev);
	if (!dev)
		return -ENOMEM;
	pci_set_drvdata(pdev, dev);
	dev->pdev = pdev;
	dev->com.dmadev = &pdev->dev;
	xa_init(&dev->cqs);
	xa_init(&dev->qps);
	xa_init(&dev->srqs);
	atomic_set(&dev->num_cqs, 0);
	mutex_init(&dev->node_desc_lock);

	err = pib_map_bars(dev);
	if (err)
		goto err_dealloc_ibdev;
	err = pib_com_validate_device(&dev->com);
	if (err)
		goto err_dealloc_ibdev;
	err = pib_com_reset(&dev->com);
	if (err)
		goto err_dealloc_ibdev;
	err = pib_com_queues_alloc(&dev->com);
	if (err)
		goto err_dealloc_ibdev;
	err = pib_setup_irqs(dev);
	if (err)
		goto err_free_queues;
	err = pib_com_enable(&dev->com);
	if (err)
		goto err_free_irqs;
	err = pib_query_hw(dev, &pa);
	if (err)
		goto err_disable;
	err = pib_ib_device_add(dev, &pa);
	if (err)
		goto err_disable;

	err = request_threaded_irq(pci_irq_vector(pdev, PIB_MSIX_VEC_ASYNC), NULL,
				   pib_aeq_irq_thread, IRQF_ONESHOT, dev->aeq_irq_name, dev);
	if (err) {
		dev_err(&pdev->dev, "cannot request the async event IRQ: %d\n", err);
		goto err_unregister;
	}
	return 0;

err_unregister:
	ib_unregister_device(&dev->ibdev);
err_disable:
	pib_com_disable(&dev->com);
	pci_clear_master(pdev);
err_free_irqs:
	pib_free_irqs(dev);
err_free_queues:
	pib_com_queues_free(&dev->com);
err_dealloc_ibdev:
	ib_dealloc_device(&dev->ibdev);
	return err;
}

static void pib_remove(struct pci_dev *pdev)
{
	struct pib_dev *dev = pci_get_drvdata(pdev);

	/* No event may reach ib_core once unregistering starts. */
	free_irq(pci_irq_vector(pdev, PIB_MSIX_VEC_ASYNC), dev);
	/* Destroys every user context first, and those still need the admin queue. */
	ib_unregister_device(&dev->ibdev);
	pib_com_disable(&dev->com);
	/* Even a device that ignored the reset can no longer DMA into the rings freed below. */
	pci_clear_master(pdev);
	pib_free_irqs(dev);
	pib_com_queues_free(&dev->com);
	/* ib_unregister_device() destroyed every CQ, QP and SRQ: the tables are empty. */
	WARN_ON(!xa_empty(&dev->cqs) || !xa_empty(&dev->qps) || !xa_empty(&dev->srqs));
	ib_dealloc_device(&dev->ibdev);
}

static struct pci_driver pib_pci_driver = {
	.name = PIB_DRV_NAME,
	.id_table = pib_pci_table,
	.probe = pib_probe,
	.remove = pib_remove,
};
module_pci_driver(pib_pci_driver);

MODULE_DESCRIPTION("pib virtual InfiniBand HCA");
MODULE_LICENSE("GPL");
/* ib_umem_get() and friends live in ib_uverbs: modinfo's "depends" names it with ib_core. */
