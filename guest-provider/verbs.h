/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * verbs.h - the verbs the pib provider implements, wired up in pib.c:
 * control path in verbs.c, completion queues in cq.c, queue pairs in qp.c,
 * posting to them in wq.c (the ibv_qp_ex builders in qp_ex.c), shared
 * receive queues in srq.c.
 */
#ifndef __PIB_VERBS_H__
#define __PIB_VERBS_H__

#include <infiniband/driver.h>
#include <infiniband/verbs.h>

struct pib_context;

/* verbs.c */
int pib_query_device_ex(struct ibv_context *ibvctx,
			const struct ibv_query_device_ex_input *input,
			struct ibv_device_attr_ex *attr, size_t attr_size);
int pib_query_device_limits(struct pib_context *ctx, uint32_t *max_qp);
int pib_query_port(struct ibv_context *ibvctx, uint8_t port,
		   struct ibv_port_attr *attr);

struct ibv_pd *pib_alloc_pd(struct ibv_context *ibvctx);
int pib_dealloc_pd(struct ibv_pd *ibvpd);
struct ibv_pd *pib_alloc_parent_domain(struct ibv_context *ibvctx,
				       struct ibv_parent_domain_init_attr *attr);
struct ibv_td *pib_alloc_td(struct ibv_context *ibvctx,
			    struct ibv_td_init_attr *attr);
int pib_dealloc_td(struct ibv_td *ibvtd);

struct ibv_mr *pib_reg_mr(struct ibv_pd *ibvpd, void *addr, size_t length,
			  uint64_t hca_va, int access);
int pib_dereg_mr(struct verbs_mr *vmr);
struct ibv_mr *pib_reg_dmabuf_mr(struct ibv_pd *ibvpd, uint64_t offset, size_t length,
				 uint64_t iova, int fd, int access);
struct ibv_pd *pib_import_pd(struct ibv_context *ibvctx, uint32_t pd_handle);
void pib_unimport_pd(struct ibv_pd *ibvpd);
struct ibv_mr *pib_import_mr(struct ibv_pd *ibvpd, uint32_t mr_handle);

/* dm.c */
struct ibv_dm *pib_alloc_dm(struct ibv_context *ibvctx, struct ibv_alloc_dm_attr *attr);
int pib_free_dm(struct ibv_dm *ibvdm);
struct ibv_dm *pib_import_dm(struct ibv_context *ibvctx, uint32_t dm_handle);
void pib_unimport_dm(struct ibv_dm *ibvdm);
struct ibv_mr *pib_reg_dm_mr(struct ibv_pd *ibvpd, struct ibv_dm *ibvdm, uint64_t offset,
			     size_t length, unsigned int access);
void pib_unimport_mr(struct ibv_mr *ibvmr);
int pib_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *ibvpd, void *addr,
		 size_t length, int access);

struct ibv_mw *pib_alloc_mw(struct ibv_pd *ibvpd, enum ibv_mw_type type);
int pib_dealloc_mw(struct ibv_mw *mw);

struct ibv_ah *pib_create_ah(struct ibv_pd *ibvpd, struct ibv_ah_attr *attr);
int pib_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int pib_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int pib_destroy_ah(struct ibv_ah *ibvah);
struct ibv_xrcd *pib_open_xrcd(struct ibv_context *ibvctx,
			       struct ibv_xrcd_init_attr *attr);
int pib_close_xrcd(struct ibv_xrcd *ibvxrcd);

/* cq.c */
struct ibv_cq *pib_create_cq(struct ibv_context *ibvctx, int cqe,
			     struct ibv_comp_channel *channel, int comp_vector);
struct ibv_cq_ex *pib_create_cq_ex(struct ibv_context *ibvctx,
				   struct ibv_cq_init_attr_ex *attr);
int pib_destroy_cq(struct ibv_cq *ibvcq);
int pib_resize_cq(struct ibv_cq *ibvcq, int cqe);
int pib_poll_cq(struct ibv_cq *ibvcq, int num_entries, struct ibv_wc *wc);
int pib_req_notify_cq(struct ibv_cq *ibvcq, int solicited_only);
int pib_modify_cq(struct ibv_cq *ibvcq, struct ibv_modify_cq_attr *attr);
int pib_query_rt_values(struct ibv_context *ibvctx, struct ibv_values_ex *values);

/* qp.c */
struct ibv_qp *pib_create_qp(struct ibv_pd *ibvpd,
			     struct ibv_qp_init_attr *attr);
struct ibv_qp *pib_create_qp_ex(struct ibv_context *ibvctx,
				struct ibv_qp_init_attr_ex *attr);
struct ibv_qp *pib_open_qp(struct ibv_context *ibvctx,
			   struct ibv_qp_open_attr *attr);
int pib_destroy_qp(struct ibv_qp *ibvqp);
int pib_modify_qp(struct ibv_qp *ibvqp, struct ibv_qp_attr *attr,
		  int attr_mask);
int pib_query_qp(struct ibv_qp *ibvqp, struct ibv_qp_attr *attr,
		 int attr_mask, struct ibv_qp_init_attr *init_attr);

/* wq.c */
int pib_post_send(struct ibv_qp *ibvqp, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad_wr);
int pib_post_recv(struct ibv_qp *ibvqp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr);
int pib_bind_mw(struct ibv_qp *ibvqp, struct ibv_mw *mw,
		struct ibv_mw_bind *mw_bind);

/* srq.c */
struct ibv_srq *pib_create_srq(struct ibv_pd *ibvpd,
			       struct ibv_srq_init_attr *attr);
struct ibv_srq *pib_create_srq_ex(struct ibv_context *ibvctx,
				  struct ibv_srq_init_attr_ex *attr);
int pib_get_srq_num(struct ibv_srq *ibvsrq, uint32_t *srq_num);
int pib_destroy_srq(struct ibv_srq *ibvsrq);
int pib_srq_table_init(struct pib_context *ctx);
void pib_srq_table_fini(struct pib_context *ctx);
struct pib_srq *pib_xsrq_lookup(struct pib_context *ctx, uint32_t srqn);
int pib_modify_srq(struct ibv_srq *ibvsrq, struct ibv_srq_attr *attr,
		   int attr_mask);
int pib_query_srq(struct ibv_srq *ibvsrq, struct ibv_srq_attr *attr);
int pib_post_srq_recv(struct ibv_srq *ibvsrq, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);

#endif /* __PIB_VERBS_H__ */
