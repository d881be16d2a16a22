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
