// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-verbs-test: tests of the data path (RC, and UD, SRQs, memory windows, XRC, CQ event
 * moderation and the device's queue limits), written against plain libibverbs.
 *
 * Nothing here knows about pib: the same binary runs on Soft-RoCE (rdma_rxe) and on real HCAs,
 * which is how the tests themselves are validated.  Each subtest asserts real outcomes (completion
 * statuses, wr_ids, byte counts, the bytes themselves, QP states, async events) and prints one
 * line per check:
 *
 *     PASS  rnr-retry/client: SEND completes with SUCCESS once the receive is posted
 *     FAIL  rnr-retry/server: ...
 *
 * The process exits 1 when any check failed (2 on a usage error), 0 otherwise.
 *
 * Every subtest has two roles, like ibv_rc_pingpong:
 *   server  the passive side (target of RDMA, receiver of SENDs);
 *           started as `pib-verbs-test -d pib_0 SUBTEST`
 *   client  the active side (poster of SENDs, RDMA and atomics);
 *           started as `pib-verbs-test -d pib_0 SUBTEST SERVER_HOST`
 * The roles exchange QP numbers, LIDs, GIDs, PSNs, rkeys and addresses, and meet at
 * synchronisation points, over a line-based text channel on TCP.  With -l (loopback) both roles
 * run in one process, as two threads joined by a socketpair, each with its own device context and
 * QP, connected to each other through the port's own LID (or GID on RoCE).  The role code is the
 * same in both cases.
 *
 * This file holds the subtest table, the command line and the running of the roles; pib_verbs.h
 * lists the other files (what every subtest uses, and the subtests by topic).
 */
#define _GNU_SOURCE
#define PIB_REPORT_COUNTERS	/* the PASS/FAIL counters live here (tests/common/pib_report.h) */
#include "pib_verbs.h"

#define DEFAULT_TCP_PORT 18515	/* ibv_rc_pingpong's port; subtest k listens on this + k */

/* =============================================================================================
 * The subtest table and main
 */

struct subtest {
	const char *name;
	int (*server)(struct role *r);
	int (*client)(struct role *r);
	const char *doc;
};

/* The index in this table is the TCP port offset: do not reorder, append. */
static const struct subtest subtests[] = {
	{ "bad-lkey", bad_lkey_server, bad_lkey_client,
	  "SEND with a bad lkey: LOC_PROT_ERR, QP in ERR, later WRs flushed" },
	{ "rkey-violation", rkey_violation_server, rkey_violation_client,
	  "RDMA WRITE with bad rkey/range/access: REM_ACCESS_ERR, target unchanged" },
	{ "rnr-retry", rnr_retry_server, rnr_retry_client,
	  "SEND before the receive: RNR retries succeed (rnr_retry 7) or fail (0)" },
	{ "flush-on-destroy", flush_server, flush_client,
	  "QP to ERR: outstanding receives and SENDs flushed in order; destroy" },
	{ "cq-overflow", cq_overflow_server, cq_overflow_client,
	  "more completions than CQEs: IBV_EVENT_CQ_ERR" },
	{ "send-sizes", send_sizes_server, send_sizes_client,
	  "SEND/RECV 0 B..1 MiB at MTU 256 and 4096, SEND with immediate" },
	{ "rdma-rw", rdma_rw_server, rdma_rw_client,
	  "RDMA WRITE/READ with several SGEs at odd addresses" },
	{ "atomics", atomics_server, atomics_client,
	  "FETCH_ADD and CMP_SWAP on a remote counter; misaligned atomic refused" },
	{ "ud-qkey", ud_qkey_server, ud_qkey_client,
	  "UD SEND: right Q_Key delivered (GRH space, src_qp, slid); wrong one dropped, counted" },
	{ "srq-limit", srq_limit_server, srq_limit_client,
	  "two QPs on an SRQ: SRQ_LIMIT_REACHED once below the limit, then disarmed" },
	{ "mw", mw_server, mw_client,
	  "memory windows type 2 (LOCAL_INV, SEND_WITH_INV, range) and type 1 (unbind)" },
	{ "rereg", rereg_server, rereg_client,
	  "ibv_rereg_mr: access, translation, PD changed under the same keys; the next WRITE sees it" },
	{ "dm", dm_server, dm_client,
	  "device memory: RDMA WRITE/READ and FETCH_ADD between two DMs; past the DM MR refused" },
	{ "timestamps", timestamps_server, timestamps_client,
	  "device clock (ibv_query_rt_values_ex) and completion timestamps of a SEND ping-pong" },
	{ "xrc", xrc_server, xrc_client,
	  "XRC: SENDs, RDMA and atomics through one target QP to the SRQs they name; another domain's SRQ refused" },
	{ "cq-moderation", cq_moderation_server, cq_moderation_client,
	  "ibv_modify_cq: limits; an event waits for its period or count (device clock); bursts" },
	{ "limits", limits_server, limits_client,
	  "max_cqe, max_qp_wr, max_srq_wr, max_ah taken at the limit (CQ filled to max_cqe); one more refused" },
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pib-verbs-test [options] SUBTEST|all [SERVER_HOST]\n"
		"\n"
		"Without SERVER_HOST: run the server side and wait for a client.\n"
		"With SERVER_HOST:    run the client side against that server.\n"
		"With -l:             run both sides in this process (loopback through the port).\n"
		"\n"
		"options:\n"
		"  -d DEV    RDMA device (default: the first one)\n"
		"  -i PORT   device port (default 1)\n"
		"  -g IDX    GID index to use (default: none on InfiniBand, a RoCE v2 IPv4 GID on\n"
		"            RoCE)\n"
		"  -p PORT   TCP port (default %d + the subtest's index below)\n"
		"  -t SEC    how long to wait for any one completion or message (default 60)\n"
		"  -u N      the RC ACK timeout, 4.096 us * 2^N (default 16: 268 ms), of the\n"
		"            subtests that take the default; with 7 retries a link may be gone for\n"
		"            8 timeouts before a transfer fails\n"
		"  -l        loopback: both sides in one process\n"
		"\n"
		"subtests:\n", DEFAULT_TCP_PORT);
	for (size_t i = 0; i < ARRAY_SIZE(subtests); i++)
		fprintf(f, "  %zu %-15s %s\n", i, subtests[i].name, subtests[i].doc);
	fprintf(f, "  all               every subtest in turn\n");
}

/* --- running the roles --- */

struct role_run {
	struct role r;
	int (*fn)(struct role *r);
	int ret;
};

static void *role_main(void *arg)
{
	struct role_run *run = arg;
	struct role *r = &run->r;

	run->ret = role_open(r);
	if (!run->ret)
		run->ret = run->fn(r);
	role_close(r, run->ret != 0);
	/* Closing the channel tells a peer that still waits that we are gone. */
	close(r->sock);
	return NULL;
}

static void role_init(struct role_run *run, const struct opts *o, const struct subtest *t,
		      bool server, int sock)
{
	memset(run, 0, sizeof(*run));
	snprintf(run->r.who, sizeof(run->r.who), "%s/%s", t->name, server ? "server" : "client");
	run->r.o = o;
	run->r.sock = sock;
	run->r.seed[0] = (unsigned short)getpid();
	run->r.seed[1] = (unsigned short)time(NULL);
	run->r.seed[2] = server;
	run->fn = server ? t->server : t->client;
}

static void run_subtest(const struct opts *o, size_t idx)
{
	const struct subtest *t = &subtests[idx];
	int port = o->tcp_port ? o->tcp_port : DEFAULT_TCP_PORT + (int)idx;
	struct role_run server, client;
	int sv[2];

	printf("== %s: %s\n", t->name, t->doc);
	if (o->loopback) {
		pthread_t th;

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
			report_fail(t->name, "socketpair: %s", strerror(errno));
			return;
		}
		role_init(&server, o, t, true, sv[0]);
		role_init(&client, o, t, false, sv[1]);
		if ((errno = pthread_create(&th, NULL, role_main, &server))) {
			report_fail(t->name, "pthread_create: %s", strerror(errno));
			return;
		}
		role_main(&client);
		pthread_join(th, NULL);
	} else if (o->peer) {
		role_init(&client, o, t, false, tcp_connect(o->peer, port, o->timeout));
		if (client.r.sock < 0) {
			fail(&client.r, "cannot connect to %s port %d", o->peer, port);
			return;
		}
		role_main(&client);
	} else {
		role_init(&server, o, t, true, tcp_listen_accept(port, o->timeout));
		if (server.r.sock < 0) {
			fail(&server.r, "no client on port %d: %s", port, strerror(errno));
			return;
		}
		role_main(&server);
	}
}

int main(int argc, char **argv)
{
	struct opts o = { .ib_port = 1, .gid_idx = -1, .timeout = 60 };
	const char *which;
	size_t first, last;
	int c;

	while ((c = getopt(argc, argv, "d:i:g:p:t:u:lh")) != -1) {
		switch (c) {
		case 'd': o.dev_name = optarg; break;
		case 'i': o.ib_port = atoi(optarg); break;
		case 'g': o.gid_idx = atoi(optarg); break;
		case 'p': o.tcp_port = atoi(optarg); break;
		case 't': o.timeout = atoi(optarg); break;
		case 'u': default_qp_timeout = atoi(optarg) & 31; break;
		case 'l': o.loopback = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc || argc - optind > 2 || o.timeout <= 0) {
		usage(stderr);
		return 2;
	}
	which = argv[optind];
	o.peer = argc - optind == 2 ? argv[optind + 1] : NULL;
	if (o.peer && o.loopback) {
		fprintf(stderr, "pib-verbs-test: -l and SERVER_HOST exclude each other\n");
		return 2;
	}
	if (!strcmp(which, "all")) {
		first = 0;
		last = ARRAY_SIZE(subtests) - 1;
	} else {
		for (first = 0; first < ARRAY_SIZE(subtests); first++)
			if (!strcmp(which, subtests[first].name))
				break;
		if (first == ARRAY_SIZE(subtests)) {
			fprintf(stderr, "pib-verbs-test: no subtest '%s'\n\n", which);
			usage(stderr);
			return 2;
		}
		last = first;
	}

	setvbuf(stdout, NULL, _IOLBF, 0);	/* lines in order even through a pipe */
	signal(SIGPIPE, SIG_IGN);		/* a vanished peer is an error return, not a kill */
	for (size_t i = first; i <= last; i++) {
		/* Every subtest is a handful of waits; none should take 10 of them. */
		report_watchdog(subtests[i].name, 10 * o.timeout);
		run_subtest(&o, i);
	}
	report_watchdog(which, 0);
	return report_summary(which);
}
