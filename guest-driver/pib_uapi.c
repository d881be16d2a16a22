// SPDX-License-Identifier: GPL-2.0
/*
 * pib_uapi.c - the driver's own uverbs ioctl methods and attributes (their IDs are in
 * pib-abi.h): what importing a context and a PD needs.
 *
 * A process may hand its command file to another (over a unix socket) or dup it, and the
 * holder calls ibv_import_device() on it: both then share one ib_ucontext and every object
 * in it.  The core verbs let the importer find an MR's keys (QUERY_MR) but not what the
 * provider keeps of a context or a PD, so the driver answers those two here:
 *
 *   QUERY_CONTEXT + PIB_IB_ATTR_QUERY_CONTEXT_RESP_UCTX   the UAR page, as ALLOC_CONTEXT gave it
 *   PIB_IB_METHOD_PD_QUERY                               a PD handle's device PD number
 *
 * uverbs checks every handle before a handler runs (a PD handle must name a live PD of this
 * file), and the handlers only read: nothing here changes the device.
 *
 * Device memory adds two (pib_dm.c): ALLOC_DM + PIB_IB_ATTR_ALLOC_DM_RESP_MMAP_KEY, where the
 * DM's pages are mapped from, and PIB_IB_METHOD_DM_QUERY, a DM handle's key and length (what
 * ibv_import_dm needs).
 */
#include <rdma/uverbs_ioctl.h>

#include "pib.h"
#include "pib-abi.h"

#define UVERBS_MODULE_NAME pib_ib
#include <rdma/uverbs_named_ioctl.h>

/* The context's ALLOC_CONTEXT answer, again (pib_alloc_ucontext). */
int pib_query_ucontext(struct ib_ucontext *ibucontext, struct uverbs_attr_bundle *attrs)
{
	struct pib_ucontext *uctx = to_pucontext(ibucontext);
	struct pib_ibv_alloc_ucontext_resp resp = {};

	pib_ucontext_resp(uctx, &resp);
	return uverbs_copy_to_struct_or_zero(attrs, PIB_IB_ATTR_QUERY_CONTEXT_RESP_UCTX,
					     &resp, sizeof(resp));
}

ADD_UVERBS_ATTRIBUTES_SIMPLE(
	pib_ib_query_context,
	UVERBS_OBJECT_DEVICE,
	UVERBS_METHOD_QUERY_CONTEXT,
	UVERBS_ATTR_PTR_OUT(PIB_IB_ATTR_QUERY_CONTEXT_RESP_UCTX,
			    UVERBS_ATTR_STRUCT(struct pib_ibv_alloc_ucontext_resp, uar_size),
			    UA_MANDATORY));

static int UVERBS_HANDLER(PIB_IB_METHOD_PD_QUERY)(struct uverbs_attr_bundle *attrs)
{
	struct ib_pd *ibpd = uverbs_attr_get_obj(attrs, PIB_IB_ATTR_QUERY_PD_HANDLE);
	u32 pdn = to_ppd(ibpd)->pdn;

	return uverbs_copy_to(attrs, PIB_IB_ATTR_QUERY_PD_RESP_PDN, &pdn, sizeof(pdn));
}

DECLARE_UVERBS_NAMED_METHOD(
	PIB_IB_METHOD_PD_QUERY,
	UVERBS_ATTR_IDR(PIB_IB_ATTR_QUERY_PD_HANDLE, UVERBS_OBJECT_PD, UVERBS_ACCESS_READ,
			UA_MANDATORY),
	UVERBS_ATTR_PTR_OUT(PIB_IB_ATTR_QUERY_PD_RESP_PDN, UVERBS_ATTR_TYPE(u32),
			    UA_MANDATORY));

ADD_UVERBS_METHODS(pib_ib_pd, UVERBS_OBJECT_PD, &UVERBS_METHOD(PIB_IB_METHOD_PD_QUERY));

/* Device memory (pib_dm.c): where ALLOC_DM's pages are mapped from, and a DM's again. */
ADD_UVERBS_ATTRIBUTES_SIMPLE(
	pib_ib_dm_alloc,
	UVERBS_OBJECT_DM,
	UVERBS_METHOD_DM_ALLOC,
	UVERBS_ATTR_PTR_OUT(PIB_IB_ATTR_ALLOC_DM_RESP_MMAP_KEY, UVERBS_ATTR_TYPE(u64),
			    UA_MANDATORY));

static int UVERBS_HANDLER(PIB_IB_METHOD_DM_QUERY)(struct uverbs_attr_bundle *attrs)
{
	struct ib_dm *ibdm = uverbs_attr_get_obj(attrs, PIB_IB_ATTR_QUERY_DM_HANDLE);
	u64 key = rdma_user_mmap_get_offset(to_pdm(ibdm)->mmap);
	u64 length = ibdm->length;
	int err;

	err = uverbs_copy_to(attrs, PIB_IB_ATTR_QUERY_DM_RESP_MMAP_KEY, &key, sizeof(key));
	if (err)
		return err;
	return uverbs_copy_to(attrs, PIB_IB_ATTR_QUERY_DM_RESP_LENGTH, &length, sizeof(length));
}

DECLARE_UVERBS_NAMED_METHOD(
	PIB_IB_METHOD_DM_QUERY,
	UVERBS_ATTR_IDR(PIB_IB_ATTR_QUERY_DM_HANDLE, UVERBS_OBJECT_DM, UVERBS_ACCESS_READ,
			UA_MANDATORY),
	UVERBS_ATTR_PTR_OUT(PIB_IB_ATTR_QUERY_DM_RESP_MMAP_KEY, UVERBS_ATTR_TYPE(u64),
			    UA_MANDATORY),
	UVERBS_ATTR_PTR_OUT(PIB_IB_ATTR_QUERY_DM_RESP_LENGTH, UVERBS_ATTR_TYPE(u64),
			    UA_MANDATORY));

ADD_UVERBS_METHODS(pib_ib_dm, UVERBS_OBJECT_DM, &UVERBS_METHOD(PIB_IB_METHOD_DM_QUERY));

/* ib_device.driver_def: merged by ib_core into the device's uverbs API at registration. */
const struct uapi_definition pib_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DEVICE, &pib_ib_query_context),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_PD, &pib_ib_pd),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DM, &pib_ib_dm_alloc),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DM, &pib_ib_dm),
	{}
};
