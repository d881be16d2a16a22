/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * verbs.h - the verbs the pib provider implements (verbs.c), wired up in pib.c.
 */
#ifndef __PIB_VERBS_H__
#define __PIB_VERBS_H__

#include <infiniband/driver.h>
#include <infiniband/verbs.h>

int pib_query_device_ex(struct ibv_context *ibvctx,
			const struct ibv_query_device_ex_input *input,
			struct ibv_device_attr_ex *attr, size_t attr_size);
int pib_query_port(struct ibv_context *ibvctx, uint8_t port,
		   struct ibv_port_attr *attr);

struct ibv_pd *pib_alloc_pd(struct ibv_context *ibvctx);
int pib_dealloc_pd(struct ibv_pd *ibvpd);

#endif /* __PIB_VERBS_H__ */
