// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-guidinfo: read or assign a port's alias GUIDs with SubnGet/SubnSet(GUIDInfo), as a
 * subnet manager does (IBTA 14.2.5.5), through libibmad on this node's QP0.
 *
 *   pib-guidinfo [-C CA] [-P PORT] LID                  print block 0: "INDEX 0xGUID" x 8
 *   pib-guidinfo [-C CA] [-P PORT] LID INDEX GUID ...   set those entries (1..7; 0 is the
 *                                                       port GUID, read-only), print the answer
 *
 * infiniband-diags reads GUIDInfo (`smpquery GUIDInfo`) but cannot set it, and opensm assigns
 * alias GUIDs only for the GUIDInfoRecords SA clients ask for; this is the SM's SMP alone,
 * for tests/e2e/29i-alias-guids.sh.  A Set keeps the entries it does not name: it reads the
 * block first.  Exit 0 on an answered MAD with status 0; 1 otherwise, with the reason.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/mad.h>
#include <infiniband/umad.h>

#define GUIDS_PER_BLOCK 8

static void usage(FILE *f)
{
	fprintf(f, "usage: pib-guidinfo [-C CA] [-P PORT] LID [INDEX GUID]...\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno || *end || end == s ? -1 : 0;
}

int main(int argc, char **argv)
{
	int mgmt_classes[] = { IB_SMI_CLASS, IB_SMI_DIRECT_CLASS };
	uint8_t data[IB_SMP_DATA_SIZE] = {};
	struct ibmad_port *port;
	const char *ca = NULL;
	ib_portid_t portid = {};
	int ca_port = 0, status = 0, c, i;
	uint64_t lid, idx, guid;

	while ((c = getopt(argc, argv, "C:P:h")) != -1) {
		switch (c) {
		case 'C': ca = optarg; break;
		case 'P': ca_port = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 1;
		}
	}
	if (optind >= argc || (argc - optind - 1) % 2 || parse_u64(argv[optind], &lid) ||
	    !lid || lid >= 0xc000) {
		usage(stderr);
		return 1;
	}
	port = mad_rpc_open_port((char *)ca, ca_port, mgmt_classes, 2);
	if (!port) {
		fprintf(stderr, "pib-guidinfo: cannot open %s port %d for SMPs\n",
			ca ? ca : "the first CA", ca_port);
		return 1;
	}
	ib_portid_set(&portid, (int)lid, 0, 0);

	if (!smp_query_status_via(data, &portid, IB_ATTR_GUID_INFO, 0, 0, &status, port) ||
	    status) {
		fprintf(stderr, "pib-guidinfo: Get(GUIDInfo) of LID %" PRIu64 ": %s, status 0x%04x\n",
			lid, errno ? strerror(errno) : "no answer", status);
		return 1;
	}
	if (optind + 1 < argc) {
		for (i = optind + 1; i + 1 < argc; i += 2) {
			if (parse_u64(argv[i], &idx) || idx >= GUIDS_PER_BLOCK ||
			    parse_u64(argv[i + 1], &guid)) {
				fprintf(stderr, "pib-guidinfo: bad INDEX GUID: %s %s\n", argv[i],
					argv[i + 1]);
				return 1;
			}
			mad_encode_field(data + 8 * idx, IB_GI_GUID0_F, &guid);
		}
		if (!smp_set_status_via(data, &portid, IB_ATTR_GUID_INFO, 0, 0, &status, port) ||
		    status) {
			fprintf(stderr, "pib-guidinfo: Set(GUIDInfo) of LID %" PRIu64
				": %s, status 0x%04x\n", lid,
				errno ? strerror(errno) : "no answer", status);
			return 1;
		}
	}
	for (i = 0; i < GUIDS_PER_BLOCK; i++) {
		mad_decode_field(data + 8 * i, IB_GI_GUID0_F, &guid);
		printf("%d 0x%016" PRIx64 "\n", i, guid);
	}
	mad_rpc_close_port(port);
	return 0;
}
