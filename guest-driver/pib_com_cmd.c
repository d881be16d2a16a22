// SPDX-License-Identifier: GPL-2.0
/*
 * pib_com_cmd.c - the admin commands, one function each.  They fill struct pib_admin_cmd,
 * run it through pib_com_exec() and unpack what came back; nothing here touches a ring.
 */
#include <linux/string.h>

#include "pib_com_cmd.h"

int pib_cmd_query_device(struct pib_com_dev *com, struct pib_device_attr *attr)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_QUERY_DEVICE };

	return pib_com_exec(com, &cmd, attr, sizeof(*attr), NULL);
}

int pib_cmd_query_port(struct pib_com_dev *com, u8 port_num, struct pib_port_attr *attr)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_QUERY_PORT };

	cmd.in.port.port_num = port_num;
	return pib_com_exec(com, &cmd, attr, sizeof(*attr), NULL);
}

int pib_cmd_set_port(struct pib_com_dev *com, const struct pib_cmd_set_port *set)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_SET_PORT };

	cmd.in.set_port = *set;
	return pib_com_exec(com, &cmd, NULL, 0, NULL);
}

int pib_cmd_query_pkey(struct pib_com_dev *com, u8 port_num, u32 index, u16 *pkey)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_QUERY_PKEY };
	struct pib_admin_cqe cqe;
	int err;

	cmd.in.port.port_num = port_num;
	cmd.in.port.index = index;
	err = pib_com_exec(com, &cmd, NULL, 0, &cqe);
	if (err)
		return err;
	*pkey = cqe.result0 & 0xffff;
	return 0;
}

int pib_cmd_query_gid(struct pib_com_dev *com, u8 port_num, u32 index, u8 gid[PIB_GID_LEN])
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_QUERY_GID };

	cmd.in.port.port_num = port_num;
	cmd.in.port.index = index;
	/* The GID comes back as 16 bytes in wire (network) order, ready for union ib_gid. */
	return pib_com_exec(com, &cmd, gid, PIB_GID_LEN, NULL);
}

int pib_cmd_alloc_uar(struct pib_com_dev *com, u32 *uar)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_ALLOC_UAR };
	struct pib_admin_cqe cqe;
	int err;

	err = pib_com_exec(com, &cmd, NULL, 0, &cqe);
	if (err)
		return err;
	*uar = cqe.result0;
	return 0;
}

int pib_cmd_dealloc_uar(struct pib_com_dev *com, u32 uar)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_DEALLOC_UAR };

	cmd.in.uar.uar = uar;
	return pib_com_exec(com, &cmd, NULL, 0, NULL);
}

/*
 * MAD_IFC: hand one MAD to the firmware's agents (SMA, PMA).  *result gets what the firmware
 * made of it (PIB_MAD_IFC_*); with PIB_MAD_IFC_REPLY, out holds the 256-byte response.
 */
int pib_cmd_mad_ifc(struct pib_com_dev *com, const struct pib_mad_ifc_in *in,
		    u8 out[PIB_MAD_SIZE], u32 *result)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_MAD_IFC };
	struct pib_admin_cqe cqe;
	int err;

	err = pib_com_exec_mbox(com, &cmd, in, sizeof(*in), out, PIB_MAD_SIZE, &cqe);
	if (err)
		return err;
	*result = cqe.result0;
	return 0;
}

/* The NodeDescription the SMA answers with; a change raises trap 144. */
int pib_cmd_set_node_desc(struct pib_com_dev *com, const u8 desc[PIB_SMP_DATA_SIZE])
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_SET_NODE_DESC };

	return pib_com_exec_mbox(com, &cmd, desc, PIB_SMP_DATA_SIZE, NULL, 0, NULL);
}

/* A round trip that proves the admin queue works: the device echoes the value. */
int pib_cmd_nop(struct pib_com_dev *com, u32 value)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_NOP };
	struct pib_admin_cqe cqe;
	int err;

	cmd.in.nop.value = value;
	err = pib_com_exec(com, &cmd, NULL, 0, &cqe);
	if (err)
		return err;
	if (cqe.result0 != value) {
		dev_err(com->dmadev, "NOP echoed %#x instead of %#x\n", cqe.result0, value);
		return -EIO;
	}
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Data-path objects.  Object numbers come back in result0.
 * ------------------------------------------------------------------------------------------ */

/* A command whose only input is an object number and whose only output is a status. */
static int pib_cmd_obj(struct pib_com_dev *com, u8 opcode, u32 num)
{
	struct pib_admin_cmd cmd = { .opcode = opcode };

	cmd.in.obj.num = num;
	return pib_com_exec(com, &cmd, NULL, 0, NULL);
}

/* A command that creates an object and returns its number in result0. */
static int pib_cmd_create(struct pib_com_dev *com, const struct pib_admin_cmd *cmd, u32 *num)
{
	struct pib_admin_cqe cqe;
	int err;

	err = pib_com_exec(com, cmd, NULL, 0, &cqe);
	if (err)
		return err;
	*num = cqe.result0;
	return 0;
}

int pib_cmd_create_pd(struct pib_com_dev *com, u32 *pdn)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_CREATE_PD };

	return pib_cmd_create(com, &cmd, pdn);
}

/* BUSY (-EBUSY) while an MR or QP uses the PD. */
int pib_cmd_destroy_pd(struct pib_com_dev *com, u32 pdn)
{
	return pib_cmd_obj(com, PIB_CMD_DESTROY_PD, pdn);
}

int pib_cmd_alloc_xrcd(struct pib_com_dev *com, u32 *xrcd)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_ALLOC_XRCD };

	return pib_cmd_create(com, &cmd, xrcd);
}

/* BUSY (-EBUSY) while an XRC SRQ or XRC target QP is in the domain. */
int pib_cmd_dealloc_xrcd(struct pib_com_dev *com, u32 xrcd)
{
	return pib_cmd_obj(com, PIB_CMD_DEALLOC_XRCD, xrcd);
}

/* A command that creates an MR, which gets an lkey (result0) and an rkey (result1). */
static int pib_cmd_create_mr(struct pib_com_dev *com, const struct pib_admin_cmd *cmd,
			     u32 *lkey, u32 *rkey)
{
	struct pib_admin_cqe cqe;
	int err;

	err = pib_com_exec(com, cmd, NULL, 0, &cqe);
	if (err)
		return err;
	*lkey = cqe.result0;
	*rkey = cqe.result1;
	return 0;
}

/* The device copies the page list at registration: it may be freed on return. */
int pib_cmd_reg_mr(struct pib_com_dev *com, const struct pib_cmd_reg_mr *in,
		   u32 *lkey, u32 *rkey)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_REG_MR };

	cmd.in.reg_mr = *in;
	return pib_cmd_create_mr(com, &cmd, lkey, rkey);
}

/* Device memory: a DM's number, and its first byte in the device memory. */
int pib_cmd_alloc_dm(struct pib_com_dev *com, u64 length, u32 *dm, u32 *start)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_ALLOC_DM };
	struct pib_admin_cqe cqe;
	int err;

	cmd.in.alloc_dm.length = length;
	err = pib_com_exec(com, &cmd, NULL, 0, &cqe);
	if (err)
		return err;
	*dm = cqe.result0;
	*start = cqe.result1;
	return 0;
}

/* BUSY (-EBUSY) while an MR lies in the DM. */
int pib_cmd_dealloc_dm(struct pib_com_dev *com, u32 dm)
{
	return pib_cmd_obj(com, PIB_CMD_DEALLOC_DM, dm);
}

int pib_cmd_reg_dm_mr(struct pib_com_dev *com, const struct pib_cmd_reg_dm_mr *in,
		      u32 *lkey, u32 *rkey)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_REG_DM_MR };

	cmd.in.reg_dm_mr = *in;
	return pib_cmd_create_mr(com, &cmd, lkey, rkey);
}

/* A fast-registration MR: keys but no memory, invalid until a REG_MR WQE registers it. */
int pib_cmd_alloc_mr(struct pib_com_dev *com, u32 pdn, u32 max_num_sg, u32 *lkey, u32 *rkey)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_ALLOC_MR };

	cmd.in.alloc_mr.pdn = pdn;
	cmd.in.alloc_mr.max_num_sg = max_num_sg;
	return pib_cmd_create_mr(com, &cmd, lkey, rkey);
}

/* A fast-registration MR may be named by any key with its index (docs/reference/hardware.md). */
int pib_cmd_dereg_mr(struct pib_com_dev *com, u32 lkey)
{
	return pib_cmd_obj(com, PIB_CMD_DEREG_MR, lkey);
}

/* As for REG_MR, the page list is the caller's again on return; the keys stay. */
int pib_cmd_rereg_mr(struct pib_com_dev *com, const struct pib_cmd_rereg_mr *in)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_REREG_MR };
	struct pib_admin_cqe cqe;

	cmd.in.rereg_mr = *in;
	return pib_com_exec(com, &cmd, NULL, 0, &cqe);
}

/* As for REG_MR, the page list is the caller's again on return. */
int pib_cmd_create_cq(struct pib_com_dev *com, const struct pib_cmd_create_cq *in, u32 *cqn)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_CREATE_CQ };

	cmd.in.create_cq = *in;
	return pib_cmd_create(com, &cmd, cqn);
}

/* BUSY (-EBUSY) while a QP uses the CQ. */
int pib_cmd_destroy_cq(struct pib_com_dev *com, u32 cqn)
{
	return pib_cmd_obj(com, PIB_CMD_DESTROY_CQ, cqn);
}

/* BAD_PARAM (-EINVAL) when the CQEs not yet read do not fit the new ring. */
int pib_cmd_resize_cq(struct pib_com_dev *com, const struct pib_cmd_resize_cq *in)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_RESIZE_CQ };

	cmd.in.resize_cq = *in;
	return pib_com_exec(com, &cmd, NULL, 0, NULL);
}

/* Event moderation; a wait in progress ends with it (the fields' whole range is valid). */
int pib_cmd_modify_cq(struct pib_com_dev *com, u32 cqn, u16 count, u16 period)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_MODIFY_CQ };

	cmd.in.modify_cq.cqn = cqn;
	cmd.in.modify_cq.count = count;
	cmd.in.modify_cq.period = period;
	return pib_com_exec(com, &cmd, NULL, 0, NULL);
}

int pib_cmd_create_qp(struct pib_com_dev *com, const struct pib_qp_create *in, u32 *qpn)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_CREATE_QP };
	struct pib_admin_cqe cqe;
	int err;

	err = pib_com_exec_mbox(com, &cmd, in, sizeof(*in), NULL, 0, &cqe);
	if (err)
		return err;
	*qpn = cqe.result0;
	return 0;
}

/* The device checks the state transition and the attributes attr->attr_mask names. */
int pib_cmd_modify_qp(struct pib_com_dev *com, u32 qpn, const struct pib_qp_attr *attr)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_MODIFY_QP };

	cmd.in.mbox.obj = qpn;
	return pib_com_exec_mbox(com, &cmd, attr, sizeof(*attr), NULL, 0, NULL);
}

int pib_cmd_query_qp(struct pib_com_dev *com, u32 qpn, struct pib_qp_attr *attr)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_QUERY_QP };

	cmd.in.obj.num = qpn;
	return pib_com_exec(com, &cmd, attr, sizeof(*attr), NULL);
}

/* The device flushes the QP's outstanding work requests before it completes this. */
int pib_cmd_destroy_qp(struct pib_com_dev *com, u32 qpn)
{
	return pib_cmd_obj(com, PIB_CMD_DESTROY_QP, qpn);
}

/* As for CREATE_CQ, the page list is the caller's again on return. */
int pib_cmd_create_srq(struct pib_com_dev *com, const struct pib_cmd_create_srq *in,
		       u32 *srqn)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_CREATE_SRQ };

	cmd.in.create_srq = *in;
	return pib_cmd_create(com, &cmd, srqn);
}

/* Arms (limit > 0) or disarms the limit event; the device refuses to resize. */
int pib_cmd_modify_srq(struct pib_com_dev *com, const struct pib_cmd_modify_srq *in)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_MODIFY_SRQ };

	cmd.in.modify_srq = *in;
	return pib_com_exec(com, &cmd, NULL, 0, NULL);
}

/* The limit reads 0 again once the limit event fired (the device disarms it). */
int pib_cmd_query_srq(struct pib_com_dev *com, u32 srqn, u32 *limit, u32 *depth)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_QUERY_SRQ };
	struct pib_admin_cqe cqe;
	int err;

	cmd.in.obj.num = srqn;
	err = pib_com_exec(com, &cmd, NULL, 0, &cqe);
	if (err)
		return err;
	*limit = cqe.result0;
	*depth = cqe.result1;
	return 0;
}

/* BUSY (-EBUSY) while a QP uses the SRQ. */
int pib_cmd_destroy_srq(struct pib_com_dev *com, u32 srqn)
{
	return pib_cmd_obj(com, PIB_CMD_DESTROY_SRQ, srqn);
}

/* The window starts unbound: its rkey grants nothing until a BIND_MW WQE binds it. */
int pib_cmd_alloc_mw(struct pib_com_dev *com, u32 pdn, u32 type, u32 *rkey)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_ALLOC_MW };

	cmd.in.alloc_mw.pdn = pdn;
	cmd.in.alloc_mw.type = type;
	return pib_cmd_create(com, &cmd, rkey);
}

/* A bound window is invalidated with it. */
int pib_cmd_dealloc_mw(struct pib_com_dev *com, u32 rkey)
{
	return pib_cmd_obj(com, PIB_CMD_DEALLOC_MW, rkey);
}

/* ATTACH_MCAST or DETACH_MCAST (opcode) of QP qpn to the group mgid/mlid. */
int pib_cmd_mcast(struct pib_com_dev *com, u8 opcode, u32 qpn, u16 mlid, const u8 *mgid)
{
	struct pib_admin_cmd cmd = { .opcode = opcode };

	cmd.in.mcast.qpn = qpn;
	cmd.in.mcast.mlid = mlid;
	memcpy(cmd.in.mcast.mgid, mgid, sizeof(cmd.in.mcast.mgid));
	return pib_com_exec(com, &cmd, NULL, 0, NULL);
}

/*
 * The device writes min(count, PIB_CNT_MAX) counters; any it does not have read as 0.
 * Nothing is written to counters unless the command succeeds.
 */
int pib_cmd_query_counters(struct pib_com_dev *com, u64 *counters, u32 count)
{
	struct pib_admin_cmd cmd = { .opcode = PIB_CMD_QUERY_COUNTERS };

	return pib_com_exec(com, &cmd, counters, (size_t)count * sizeof(*counters), NULL);
}
