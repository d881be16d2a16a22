// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Subtest dm: device memory (ibv_alloc_dm, ibv_memcpy_to_dm/_from_dm, ibv_reg_dm_mr).
 *
 * Each side allocates DM_LEN bytes of device memory and registers it, zero-based.  The server
 * fills its DM with a pattern; the client, over one RC connection, with its own DM as every
 * local SGE:
 *   1. RDMA WRITEs DM_WLEN bytes from its DM into the server's at DM_WOFF;
 *   2. RDMA READs DM_RLEN bytes at DM_ROFF of the server's DM into its DM at DM_RDST, and
 *      finds the server's pattern there (ibv_memcpy_from_dm);
 *   3. FETCH_ADDs 7 to the u64 at DM_AOFF of the server's DM, the original landing in its DM;
 *   4. on a new connection, WRITEs across the end of the server's DM MR: REM_ACCESS_ERR.
 * After each round the server reads its whole DM back and finds exactly what it expects.
 * Misuse of the copies (unaligned offset, past the end) and a DM larger than max_dm_size are
 * refused.
 */
#include "pib_verbs.h"

#define DM_LEN		16384
#define DM_WOFF		1000	/* a WRITE may start anywhere */
#define DM_WLEN		3000
#define DM_ROFF		8192
#define DM_RLEN		4096
#define DM_RDST		4096	/* where the client's READ lands in its own DM */
#define DM_AOFF		12288
#define DM_ACCESS	(IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

enum dm_round { DM_WRITE, DM_READ, DM_ATOMIC, DM_PAST_END, DM_NR };

static const char *const dm_names[DM_NR] = {
	"RDMA WRITE from DM into DM", "RDMA READ from DM into DM", "FETCH_ADD on DM",
	"RDMA WRITE past the DM MR's end",
};

/*
 * Both sides' connection for round k, so that they agree: one for the rounds that succeed, a
 * new one for the WRITE past the end (which ends its QP in ERR).  0, or -1 on failure.
 */
static int dm_round_conn(struct role *r, struct conn *c, const struct conn_params *p,
			 enum dm_round k)
{
	if (k == DM_PAST_END)
		conn_close(r, c);
	return k == DM_WRITE || k == DM_PAST_END ? conn_open(r, c, p, NULL) : 0;
}

/* A DM of len bytes and its MR, or a skip/failure. */
static int dm_open(struct role *r, size_t len, struct ibv_dm **dm, struct ibv_mr **mr)
{
	struct ibv_alloc_dm_attr attr = { .length = len };
	struct ibv_device_attr_ex dev;

	if (ibv_query_device_ex(r->ctx, NULL, &dev))
		return fail(r, "ibv_query_device_ex: %s", strerror(errno));
	if (!check(r, dev.max_dm_size >= len, "max_dm_size %" PRIu64 " holds %zu bytes",
		   (uint64_t)dev.max_dm_size, len))
		return -1;
	attr.length = dev.max_dm_size + 1;
	*dm = ibv_alloc_dm(r->ctx, &attr);
	check(r, !*dm, "a DM of max_dm_size + 1 bytes is refused");
	if (*dm)
		ibv_free_dm(*dm);
	attr.length = len;
	*dm = ibv_alloc_dm(r->ctx, &attr);
	if (!*dm)
		return fail(r, "ibv_alloc_dm(%zu): %s", len, strerror(errno));
	*mr = ibv_reg_dm_mr(r->pd, *dm, 0, len, DM_ACCESS);
	if (!*mr)
		return fail(r, "ibv_reg_dm_mr: %s", strerror(errno));
	return 0;
}

static void dm_close(struct role *r, struct ibv_dm *dm, struct ibv_mr *mr)
{
	if (mr && ibv_dereg_mr(mr))
		fail(r, "ibv_dereg_mr of the DM MR: %s", strerror(errno));
	if (dm && ibv_free_dm(dm))
		fail(r, "ibv_free_dm: %s", strerror(errno));
}

int dm_server(struct role *r)
{
	struct conn_params p = conn_defaults();
	uint8_t *want = malloc(DM_LEN), *got = malloc(DM_LEN);
	struct ibv_mr *mr = NULL;
	struct ibv_dm *dm = NULL;
	uint64_t v;
	int ret = -1;

	if (!want || !got) {
		fail(r, "out of memory");
		goto out;
	}
	if (dm_open(r, DM_LEN, &dm, &mr))
		goto out;
	/* A new DM reads zero, then holds what is copied in. */
	check(r, ibv_memcpy_from_dm(got, dm, 0, DM_LEN) == 0 && find_not_byte(got, DM_LEN, 0) < 0,
	      "a new DM reads zero");
	fill_pattern(want, DM_LEN, 0xd0d0);
	if (ibv_memcpy_to_dm(dm, 0, want, DM_LEN)) {
		fail(r, "ibv_memcpy_to_dm: %s", strerror(errno));
		goto out;
	}
	check(r, ibv_memcpy_to_dm(dm, 2, want, 4) != 0, "a copy to an unaligned offset is refused");
	check(r, ibv_memcpy_to_dm(dm, DM_LEN - 4, want, 8) != 0, "a copy past the end is refused");
	check(r, ibv_memcpy_from_dm(got, dm, DM_LEN, 4) != 0, "a copy from past the end is refused");

	struct conn c;

	for (int k = 0; k < DM_NR; k++) {
		ssize_t bad;
		bool ok;

		if (dm_round_conn(r, &c, &p, k))
			goto out;
		if (chan_send(r, "target %x", mr->rkey) || chan_sync(r, "done"))
			goto out;
		if (k == DM_WRITE)
			fill_pattern(want + DM_WOFF, DM_WLEN, 0x5e5e);
		if (k == DM_ATOMIC) {
			memcpy(&v, want + DM_AOFF, 8);
			v += 7;
			memcpy(want + DM_AOFF, &v, 8);
		}
		if (ibv_memcpy_from_dm(got, dm, 0, DM_LEN)) {
			fail(r, "ibv_memcpy_from_dm: %s", strerror(errno));
			goto out;
		}
		bad = find_diff(got, want, DM_LEN);
		ok = check_why(r, bad < 0, dm_names[k], "the DM holds what it should; first difference at +%zd",
			       bad);
		if (chan_send_verdict(r, ok) || chan_sync(r, "next"))
			goto out;
	}
	conn_close(r, &c);
	ret = chan_sync(r, "end");
out:
	dm_close(r, dm, mr);
	free(want);
	free(got);
	return ret;
}

int dm_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	uint8_t *want = malloc(DM_LEN), *got = malloc(DM_LEN);
	struct ibv_mr *mr = NULL;
	struct ibv_dm *dm = NULL;
	uint64_t orig, v;
	int ret = -1;

	if (!want || !got) {
		fail(r, "out of memory");
		goto out;
	}
	if (dm_open(r, DM_LEN, &dm, &mr))
		goto out;
	fill_pattern(got, DM_LEN, 0x5e5e);
	if (ibv_memcpy_to_dm(dm, 0, got, DM_WLEN)) {
		fail(r, "ibv_memcpy_to_dm: %s", strerror(errno));
		goto out;
	}
	fill_pattern(want, DM_LEN, 0xd0d0);     /* the server's DM, before the rounds */
	struct conn c;

	for (int k = 0; k < DM_NR; k++) {
		enum ibv_wc_status st = k == DM_PAST_END ? IBV_WC_REM_ACCESS_ERR : IBV_WC_SUCCESS;
		struct ibv_sge sge = { .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = k, .sg_list = &sge, .num_sge = 1,
					  .send_flags = IBV_SEND_SIGNALED }, *badwr;
		struct ibv_wc wc;
		uint32_t rkey;
		bool server_ok;

		if (dm_round_conn(r, &c, &p, k))
			goto out;
		if (chan_recv(r, 1, "target %x", &rkey))
			goto out;
		wr.wr.rdma.rkey = rkey;
		switch (k) {
		case DM_WRITE:          /* zero-based: addresses are offsets in the MRs */
			wr.opcode = IBV_WR_RDMA_WRITE;
			sge.addr = 0, sge.length = DM_WLEN;
			wr.wr.rdma.remote_addr = DM_WOFF;
			break;
		case DM_READ:
			wr.opcode = IBV_WR_RDMA_READ;
			sge.addr = DM_RDST, sge.length = DM_RLEN;
			wr.wr.rdma.remote_addr = DM_ROFF;
			break;
		case DM_ATOMIC:
			wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			sge.addr = DM_AOFF, sge.length = 8;
			wr.wr.atomic.remote_addr = DM_AOFF;
			wr.wr.atomic.rkey = rkey;
			wr.wr.atomic.compare_add = 7;
			break;
		default:
			wr.opcode = IBV_WR_RDMA_WRITE;
			sge.addr = 0, sge.length = 64;
			wr.wr.rdma.remote_addr = DM_LEN - 16;
			break;
		}
		if ((errno = ibv_post_send(c.qp, &wr, &badwr))) {
			fail(r, "ibv_post_send: %s", strerror(errno));
			goto out;
		}
		expect_wc(r, &c, c.scq, &wc, k, st, "%s", dm_names[k]);
		if (k == DM_READ) {
			check(r, ibv_memcpy_from_dm(got, dm, DM_RDST, DM_RLEN) == 0 &&
				 find_diff(got, want + DM_ROFF, DM_RLEN) < 0,
			      "RDMA READ: the server's DM bytes landed in ours");
		} else if (k == DM_ATOMIC) {
			int err = ibv_memcpy_from_dm(&v, dm, DM_AOFF, 8);

			memcpy(&orig, want + DM_AOFF, 8);
			check(r, !err && v == orig,
			      "FETCH_ADD: the original value landed in our DM (%" PRIx64 ", want %"
			      PRIx64 ")", v, orig);
		}
		if (chan_sync(r, "done") || chan_recv_verdict(r, &server_ok))
			goto out;
		check(r, server_ok, "%s: the server found its DM as expected", dm_names[k]);
		if (chan_sync(r, "next"))
			goto out;
	}
	conn_close(r, &c);
	ret = chan_sync(r, "end");
out:
	dm_close(r, dm, mr);
	free(want);
	free(got);
	return ret;
}
