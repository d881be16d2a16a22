// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * dm.c - device memory: ibv_alloc_dm, ibv_memcpy_to_dm / _from_dm, ibv_reg_dm_mr,
 * ibv_free_dm, ibv_import_dm.
 *
 * A DM is pages of the device's own memory (BAR0, "Device memory" in pib_hw.h), which the
 * driver lets the process map write-combining (pib-abi.h).  Copying to and from it is the
 * process's own loads and stores, no command; the device reaches it through an MR over the DM
 * (ibv_reg_dm_mr), zero-based: an SGE or a peer's RDMA names byte 0 of the MR by address 0.
 *
 * Copies are of whole 4-byte words at 4-byte aligned offsets, as on mlx5's MEMIC (rdma-core's
 * suite holds every provider to that), and stay inside the DM.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <util/udma_barrier.h>

#include "pib.h"
#include "verbs.h"

struct pib_dm {
	struct verbs_dm verbs_dm;
	void *va;               /* the mapping: length rounded up to a page */
	uint64_t length;
	size_t map_len;
};

static struct pib_dm *to_pib_dm(struct ibv_dm *ibvdm)
{
	return container_of(ibvdm, struct pib_dm, verbs_dm.dm);
}

/* 0, or the errno for [offset, offset + length) of the DM. */
static int pib_dm_range(struct pib_dm *dm, uint64_t offset, size_t length)
{
	if (offset % 4 || length % 4)
		return EINVAL;
	if (offset > dm->length || length > dm->length - offset)
		return EFAULT;
	return 0;
}

static int pib_memcpy_to_dm(struct ibv_dm *ibvdm, uint64_t offset, const void *host,
			    size_t length)
{
	struct pib_dm *dm = to_pib_dm(ibvdm);
	int err = pib_dm_range(dm, offset, length);

	if (err)
		return err;
	memcpy((char *)dm->va + offset, host, length);
	/* Write-combined stores: visible to the device before the next doorbell or DMA. */
	udma_to_device_barrier();
	return 0;
}

static int pib_memcpy_from_dm(void *host, struct ibv_dm *ibvdm, uint64_t offset,
			      size_t length)
{
	struct pib_dm *dm = to_pib_dm(ibvdm);
	int err = pib_dm_range(dm, offset, length);

	if (err)
		return err;
	udma_from_device_barrier();
	memcpy(host, (char *)dm->va + offset, length);
	return 0;
}

/* Map a DM's pages from its mmap key, and make dm a usable ibv_dm. */
static int pib_dm_map(struct ibv_context *ibvctx, struct pib_dm *dm, uint64_t key,
		      uint64_t length)
{
	long page = sysconf(_SC_PAGESIZE);

	dm->length = length;
	dm->map_len = (length + page - 1) & ~(uint64_t)(page - 1);
	dm->va = mmap(NULL, dm->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, ibvctx->cmd_fd,
		      key);
	if (dm->va == MAP_FAILED) {
		dm->va = NULL;
		return errno;
	}
	dm->verbs_dm.dm.context = ibvctx;
	dm->verbs_dm.dm.memcpy_to_dm = pib_memcpy_to_dm;
	dm->verbs_dm.dm.memcpy_from_dm = pib_memcpy_from_dm;
	return 0;
}

struct ibv_dm *pib_alloc_dm(struct ibv_context *ibvctx, struct ibv_alloc_dm_attr *attr)
{
	DECLARE_COMMAND_BUFFER_LINK(link, UVERBS_OBJECT_DM, UVERBS_METHOD_DM_ALLOC, 1, NULL);
	struct pib_dm *dm;
	uint64_t key;
	int err;

	if (attr->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	dm = calloc(1, sizeof(*dm));
	if (!dm) {
		errno = ENOMEM;
		return NULL;
	}
	fill_attr_out_ptr(link, PIB_IB_ATTR_ALLOC_DM_RESP_MMAP_KEY, &key);
	err = ibv_cmd_alloc_dm(ibvctx, attr, &dm->verbs_dm, link);
	if (err) {
		free(dm);
		errno = err;
		return NULL;
	}
	err = pib_dm_map(ibvctx, dm, key, attr->length);
	if (err) {
		verbs_err(verbs_get_ctx(ibvctx), "Failed to map device memory: %d\n", err);
		ibv_cmd_free_dm(&dm->verbs_dm);
		free(dm);
		errno = err;
		return NULL;
	}
	return &dm->verbs_dm.dm;
}

int pib_free_dm(struct ibv_dm *ibvdm)
{
	struct pib_dm *dm = to_pib_dm(ibvdm);
	int err;

	err = ibv_cmd_free_dm(&dm->verbs_dm);
	if (err)
		return err;
	/* The device memory goes when this last mapping of it does (the driver's pib_dm.c). */
	munmap(dm->va, dm->map_len);
	free(dm);
	return 0;
}

/*
 * ibv_import_dm: a DM of the context this one was imported from, by handle.  The driver's DM
 * query (pib_uapi.c) gives its mmap key and length; the importer maps the same pages.
 */
struct ibv_dm *pib_import_dm(struct ibv_context *ibvctx, uint32_t dm_handle)
{
	DECLARE_COMMAND_BUFFER(cmd, UVERBS_OBJECT_DM, PIB_IB_METHOD_DM_QUERY, 3);
	uint64_t key, length;
	struct pib_dm *dm;
	int err;

	dm = calloc(1, sizeof(*dm));
	if (!dm) {
		errno = ENOMEM;
		return NULL;
	}
	fill_attr_in_obj(cmd, PIB_IB_ATTR_QUERY_DM_HANDLE, dm_handle);
	fill_attr_out_ptr(cmd, PIB_IB_ATTR_QUERY_DM_RESP_MMAP_KEY, &key);
	fill_attr_out_ptr(cmd, PIB_IB_ATTR_QUERY_DM_RESP_LENGTH, &length);
	err = execute_ioctl(ibvctx, cmd);
	if (!err)
		err = pib_dm_map(ibvctx, dm, key, length);
	if (err) {
		verbs_err(verbs_get_ctx(ibvctx), "Failed to import DM handle %u: %d\n",
			  dm_handle, err);
		free(dm);
		errno = err;
		return NULL;
	}
	dm->verbs_dm.handle = dm->verbs_dm.dm.handle = dm_handle;
	return &dm->verbs_dm.dm;
}

/* The DM stays the exporter's: only this mapping and copy go. */
void pib_unimport_dm(struct ibv_dm *ibvdm)
{
	struct pib_dm *dm = to_pib_dm(ibvdm);

	munmap(dm->va, dm->map_len);
	free(dm);
}

struct ibv_mr *pib_reg_dm_mr(struct ibv_pd *ibvpd, struct ibv_dm *ibvdm, uint64_t offset,
			     size_t length, unsigned int access)
{
	struct pib_dm *dm = to_pib_dm(ibvdm);
	struct verbs_mr *vmr;
	int err;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr) {
		errno = ENOMEM;
		return NULL;
	}
	err = ibv_cmd_reg_dm_mr(ibvpd, &dm->verbs_dm, offset, length, access, vmr, NULL);
	if (err) {
		free(vmr);
		errno = err;
		return NULL;
	}
	return &vmr->ibv_mr;
}
