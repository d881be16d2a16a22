// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * verbs.c - the control-path verbs of the pib provider.
 *
 * Each of these is one uverbs command: the kernel driver asks the device
 * through its admin queue and libibverbs' ibv_cmd_* helpers marshal the
 * answer.  The provider adds only what the kernel ABI leaves to userspace,
 * such as rendering the firmware version string.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "pib.h"
#include "verbs.h"

int pib_query_device_ex(struct ibv_context *ibvctx,
			const struct ibv_query_device_ex_input *input,
			struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw_ver;
	int err;

	err = ibv_cmd_query_device_any(ibvctx, input, attr, attr_size, &resp,
				       &resp_size);
	if (err)
		return err;

	/*
	 * uverbs carries the firmware version as a raw u64: the driver passes
	 * on pib_device_attr.fw_ver, [47:32] major, [31:16] minor,
	 * [15:0] sub-minor.
	 */
	fw_ver = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%u", (unsigned int)(fw_ver >> 32) & 0xffff,
		 (unsigned int)(fw_ver >> 16) & 0xffff,
		 (unsigned int)fw_ver & 0xffff);

	return 0;
}

int pib_query_port(struct ibv_context *ibvctx, uint8_t port,
		   struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd;

	return ibv_cmd_query_port(ibvctx, port, attr, &cmd, sizeof(cmd));
}

struct ibv_pd *pib_alloc_pd(struct ibv_context *ibvctx)
{
	struct ib_uverbs_alloc_pd_resp resp;
	struct ibv_alloc_pd cmd;
	struct pib_pd *pd;
	int err;

	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}

	err = ibv_cmd_alloc_pd(ibvctx, &pd->ibvpd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (err) {
		verbs_err(verbs_get_ctx(ibvctx), "Failed to allocate PD\n");
		free(pd);
		errno = err;
		return NULL;
	}

	return &pd->ibvpd;
}

int pib_dealloc_pd(struct ibv_pd *ibvpd)
{
	struct pib_pd *pd = to_pib_pd(ibvpd);
	int err;

	err = ibv_cmd_dealloc_pd(ibvpd);
	if (err) {
		verbs_err(verbs_get_ctx(ibvpd->context),
			  "Failed to deallocate PD\n");
		return err;
	}

	free(pd);
	return 0;
}
