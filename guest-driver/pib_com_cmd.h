/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pib_com_cmd.h - one typed call per admin command (docs/reference/hardware.md, "Admin queue").
 *
 * Each returns 0 or a negative errno: the device's status mapped to an errno, -ETIMEDOUT
 * when the device stopped answering, -ENODEV/-EIO once it is known dead.  All sleep.
 */
#ifndef PIB_COM_CMD_H
#define PIB_COM_CMD_H

#include "pib_com.h"
#include "pib_mad.h"

#define PIB_GID_LEN 16

int pib_cmd_query_device(struct pib_com_dev *com, struct pib_device_attr *attr);
int pib_cmd_query_port(struct pib_com_dev *com, u8 port_num, struct pib_port_attr *attr);
int pib_cmd_set_port(struct pib_com_dev *com, const struct pib_cmd_set_port *set);
int pib_cmd_query_pkey(struct pib_com_dev *com, u8 port_num, u32 index, u16 *pkey);
int pib_cmd_query_gid(struct pib_com_dev *com, u8 port_num, u32 index, u8 gid[PIB_GID_LEN]);
int pib_cmd_alloc_uar(struct pib_com_dev *com, u32 *uar);
int pib_cmd_dealloc_uar(struct pib_com_dev *com, u32 uar);
int pib_cmd_nop(struct pib_com_dev *com, u32 value);

/* Management (docs/reference/hardware.md, "Management"). */
int pib_cmd_mad_ifc(struct pib_com_dev *com, const struct pib_mad_ifc_in *in,
		    u8 out[PIB_MAD_SIZE], u32 *result);
int pib_cmd_set_node_desc(struct pib_com_dev *com, const u8 desc[PIB_SMP_DATA_SIZE]);

/* Data-path objects (docs/reference/hardware.md, "Data path"). */
int pib_cmd_create_pd(struct pib_com_dev *com, u32 *pdn);
int pib_cmd_destroy_pd(struct pib_com_dev *com, u32 pdn);
int pib_cmd_alloc_xrcd(struct pib_com_dev *com, u32 *xrcd);
int pib_cmd_dealloc_xrcd(struct pib_com_dev *com, u32 xrcd);
int pib_cmd_reg_mr(struct pib_com_dev *com, const struct pib_cmd_reg_mr *in,
		   u32 *lkey, u32 *rkey);
int pib_cmd_alloc_mr(struct pib_com_dev *com, u32 pdn, u32 max_num_sg, u32 *lkey,
		     u32 *rkey);
int pib_cmd_dereg_mr(struct pib_com_dev *com, u32 lkey);
int pib_cmd_rereg_mr(struct pib_com_dev *com, const struct pib_cmd_rereg_mr *in);
int pib_cmd_alloc_dm(struct pib_com_dev *com, u64 length, u32 *dm, u32 *start);
int pib_cmd_dealloc_dm(struct pib_com_dev *com, u32 dm);
int pib_cmd_reg_dm_mr(struct pib_com_dev *com, const struct pib_cmd_reg_dm_mr *in,
		      u32 *lkey, u32 *rkey);
int pib_cmd_create_cq(struct pib_com_dev *com, const struct pib_cmd_create_cq *in, u32 *cqn);
int pib_cmd_destroy_cq(struct pib_com_dev *com, u32 cqn);
int pib_cmd_resize_cq(struct pib_com_dev *com, const struct pib_cmd_resize_cq *in);
int pib_cmd_modify_cq(struct pib_com_dev *com, u32 cqn, u16 count, u16 period);
int pib_cmd_create_qp(struct pib_com_dev *com, const struct pib_qp_create *in, u32 *qpn);
int pib_cmd_modify_qp(struct pib_com_dev *com, u32 qpn, const struct pib_qp_attr *attr);
int pib_cmd_query_qp(struct pib_com_dev *com, u32 qpn, struct pib_qp_attr *attr);
int pib_cmd_destroy_qp(struct pib_com_dev *com, u32 qpn);
int pib_cmd_create_srq(struct pib_com_dev *com, const struct pib_cmd_create_srq *in,
		       u32 *srqn);
int pib_cmd_modify_srq(struct pib_com_dev *com, const struct pib_cmd_modify_srq *in);
int pib_cmd_query_srq(struct pib_com_dev *com, u32 srqn, u32 *limit, u32 *depth);
int pib_cmd_destroy_srq(struct pib_com_dev *com, u32 srqn);
int pib_cmd_alloc_mw(struct pib_com_dev *com, u32 pdn, u32 type, u32 *rkey);
int pib_cmd_dealloc_mw(struct pib_com_dev *com, u32 rkey);
int pib_cmd_mcast(struct pib_com_dev *com, u8 opcode, u32 qpn, u16 mlid, const u8 *mgid);

/* Counters (docs/reference/hardware.md, "Counters"): count u64s indexed by enum pib_counter. */
int pib_cmd_query_counters(struct pib_com_dev *com, u64 *counters, u32 count);

#endif /* PIB_COM_CMD_H */
