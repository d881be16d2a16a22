// SPDX-License-Identifier: GPL-2.0
/*
 * pib_mad.c - management datagrams: the driver's process_mad, through which ib_core's MAD
 * layer hands the firmware's agents (SMA, PMA and CC, docs/reference/hardware.md
 * "Management") the MADs meant for them, as mthca and mlx4 do with their MAD_IFC command.
 *
 * ib_core calls process_mad first for every MAD that arrives on QP0 or QP1, for every
 * directed-route SMP to the local port (a hop count of 0: opensm's and the diags' own port),
 * and for the port counters in sysfs.  What the driver answers decides the MAD's fate
 * (core/mad.c):
 *   SUCCESS | REPLY     ib_core sends out_mad back to where the MAD came from;
 *   SUCCESS | CONSUMED  the MAD is dropped;
 *   SUCCESS             the MAD goes on to the MAD agents (opensm's SMInfo, the SA, the CM,
 *                       and every response to a request somebody sent).
 * The firmware decides which of the three: the driver only passes the MADs of the classes the
 * firmware has agents for, with what the receive completion said about them, and maps the
 * answer.  It never makes up an answer of its own.
 */
#include <linux/string.h>

#include <rdma/ib_mad.h>
#include <rdma/ib_smi.h>

#include "pib.h"
#include "pib_com_cmd.h"

static_assert(sizeof(struct ib_mad) == PIB_MAD_SIZE, "a MAD is 256 bytes");
static_assert(sizeof(struct ib_grh) == sizeof(((struct pib_mad_ifc_in *)0)->grh), "GRH");
static_assert(IB_MGMT_CLASS_SUBN_LID_ROUTED == PIB_MGMT_CLASS_SUBN_LID, "class values");
static_assert(IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE == PIB_MGMT_CLASS_SUBN_DR, "class values");
static_assert(IB_MGMT_CLASS_PERF_MGMT == PIB_MGMT_CLASS_PERF, "class values");
static_assert(IB_MGMT_CLASS_CONG_MGMT == PIB_MGMT_CLASS_CC, "class values");
static_assert(IB_MGMT_METHOD_RESP == PIB_MAD_METHOD_RESP, "the R bit");
static_assert(sizeof_field(struct ib_device, node_desc) == sizeof_field(struct ib_smp, data),
	      "NodeDescription is an SMP's data");

/*
 * The classes the firmware has agents for: SMPs (SMA), performance management (PMA) and
 * congestion control (CC).
 */
static bool pib_mad_for_firmware(const struct ib_mad_hdr *hdr)
{
	/* A response is for whoever sent the request: an agent above, never the firmware. */
	if (hdr->method & IB_MGMT_METHOD_RESP)
		return false;
	switch (hdr->mgmt_class) {
	case IB_MGMT_CLASS_SUBN_LID_ROUTED:
	case IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE:
	case IB_MGMT_CLASS_PERF_MGMT:
	case IB_MGMT_CLASS_CONG_MGMT:
		return true;
	default:
		return false;
	}
}

/*
 * The MAD_IFC mailbox for a MAD and its receive completion.  ib_core gives a completion for a
 * MAD from the wire (with the GRH slot of its receive buffer) and one it makes up for a local
 * directed-route SMP (no GRH slot: in_grh is NULL); sysfs asks the PMA with neither.  Only the
 * first came from the wire.
 */
static void pib_mad_ifc_fill(struct pib_mad_ifc_in *ifc, int mad_flags, u32 port_num,
			     const struct ib_wc *in_wc, const struct ib_grh *in_grh,
			     const struct ib_mad *in)
{
	*ifc = (struct pib_mad_ifc_in){ .port_num = port_num };
	if (mad_flags & IB_MAD_IGNORE_MKEY)
		ifc->flags |= PIB_MAD_IFC_F_IGNORE_MKEY;
	if (in_wc && in_grh) {
		ifc->flags |= PIB_MAD_IFC_F_WIRE;
		ifc->sl = in_wc->sl;
		ifc->slid = ib_lid_cpu16(in_wc->slid);
		ifc->src_qp = in_wc->src_qp;
		ifc->pkey_index = in_wc->pkey_index;
		ifc->dlid_path_bits = in_wc->dlid_path_bits;
		if (in_wc->wc_flags & IB_WC_GRH) {
			ifc->flags |= PIB_MAD_IFC_F_GRH;
			memcpy(ifc->grh, in_grh, sizeof(ifc->grh));
		}
	}
	memcpy(ifc->mad, in, sizeof(ifc->mad));
}

int pib_process_mad(struct ib_device *ibdev, int mad_flags, u32 port_num,
		    const struct ib_wc *in_wc, const struct ib_grh *in_grh,
		    const struct ib_mad *in, struct ib_mad *out,
		    size_t *out_mad_size, u16 *out_mad_pkey_index)
{
	struct pib_dev *dev = to_pdev(ibdev);
	struct pib_mad_ifc_in ifc;
	u32 result;
	int err;

	if (!pib_mad_for_firmware(&in->mad_hdr))
		return IB_MAD_RESULT_SUCCESS;
	if (port_num != PIB_PORT_NUM || *out_mad_size < PIB_MAD_SIZE)
		return IB_MAD_RESULT_FAILURE;

	pib_mad_ifc_fill(&ifc, mad_flags, port_num, in_wc, in_grh, in);
	err = pib_cmd_mad_ifc(&dev->com, &ifc, (u8 *)out, &result);
	if (err) {
		ibdev_err_ratelimited(ibdev, "MAD_IFC failed (%d) for class %#x method %#x attribute %#x\n",
				      err, in->mad_hdr.mgmt_class, in->mad_hdr.method,
				      be16_to_cpu(in->mad_hdr.attr_id));
		return IB_MAD_RESULT_FAILURE;
	}

	/* Exactly one of the three answers: ib_core takes no other combination. */
	switch (result) {
	case PIB_MAD_IFC_REPLY:
		*out_mad_size = PIB_MAD_SIZE;
		return IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_REPLY;
	case PIB_MAD_IFC_CONSUMED:
		return IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_CONSUMED;
	case 0:
		return IB_MAD_RESULT_SUCCESS;
	default:
		ibdev_err_ratelimited(ibdev, "MAD_IFC answered %#x, which means nothing\n", result);
		return IB_MAD_RESULT_FAILURE;
	}
}

/*
 * Does the firmware have management agents?  Asked once at probe, the way mlx4 learns its
 * node description: a local NodeDescription Get through MAD_IFC.  A device that does not know
 * the command (-EOPNOTSUPP) has none: its port is registered without MAD support (no QP0/QP1,
 * no SM), as before management came.  On success ibdev->node_desc is the firmware's.
 */
int pib_mad_probe(struct pib_dev *dev)
{
	struct pib_mad_ifc_in ifc;
	struct ib_smp *smp;
	u8 *out;
	u32 result;
	int err;

	smp = kzalloc(sizeof(*smp), GFP_KERNEL);
	out = kzalloc(PIB_MAD_SIZE, GFP_KERNEL);
	err = -ENOMEM;
	if (!smp || !out)
		goto out;
	smp->base_version = IB_MGMT_BASE_VERSION;
	smp->mgmt_class = IB_MGMT_CLASS_SUBN_LID_ROUTED;
	smp->class_version = 1;
	smp->method = IB_MGMT_METHOD_GET;
	smp->attr_id = IB_SMP_ATTR_NODE_DESC;
	pib_mad_ifc_fill(&ifc, IB_MAD_IGNORE_MKEY, PIB_PORT_NUM, NULL, NULL,
			 (const struct ib_mad *)smp);

	err = pib_cmd_mad_ifc(&dev->com, &ifc, out, &result);
	if (err == -EOPNOTSUPP) {
		dev_info(&dev->pdev->dev, "device has no management agents (MAD_IFC): no QP0/QP1, no subnet manager\n");
		dev->mad = false;
		err = 0;
		goto out;
	}
	if (err)
		goto out;
	memcpy(smp, out, sizeof(*smp));
	if (result != PIB_MAD_IFC_REPLY || smp->method != IB_MGMT_METHOD_GET_RESP ||
	    smp->status) {
		dev_err(&dev->pdev->dev, "the SMA answered a NodeDescription Get with %#x, method %#x, status %#x\n",
			result, smp->method, be16_to_cpu(smp->status));
		err = -EIO;
		goto out;
	}
	memcpy(dev->ibdev.node_desc, smp->data, sizeof(dev->ibdev.node_desc));
	dev->mad = true;
out:
	kfree(out);
	kfree(smp);
	return err;
}
