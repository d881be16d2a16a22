/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pib_com_cmd.h - one typed call per admin command (docs/hardware.md, "Admin queue").
 *
 * Each returns 0 or a negative errno: the device's status mapped to an errno, -ETIMEDOUT
 * when the device stopped answering, -ENODEV/-EIO once it is known dead.  All sleep.
 */
#ifndef PIB_COM_CMD_H
#define PIB_COM_CMD_H

#include "pib_com.h"

#define PIB_GID_LEN 16

int pib_cmd_query_device(struct pib_com_dev *com, struct pib_device_attr *attr);
int pib_cmd_query_port(struct pib_com_dev *com, u8 port_num, struct pib_port_attr *attr);
int pib_cmd_set_port(struct pib_com_dev *com, const struct pib_cmd_set_port *set);
int pib_cmd_query_pkey(struct pib_com_dev *com, u8 port_num, u32 index, u16 *pkey);
int pib_cmd_query_gid(struct pib_com_dev *com, u8 port_num, u32 index, u8 gid[PIB_GID_LEN]);
int pib_cmd_alloc_uar(struct pib_com_dev *com, u32 *uar);
int pib_cmd_dealloc_uar(struct pib_com_dev *com, u32 uar);
int pib_cmd_nop(struct pib_com_dev *com, u32 value);

#endif /* PIB_COM_CMD_H */
