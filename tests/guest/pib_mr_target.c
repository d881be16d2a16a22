// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-mr-target: memory for a hostile peer to aim at, and a witness that it was not touched.
 *
 * Registers an MR with REMOTE_WRITE | REMOTE_READ over a buffer filled with a known pattern,
 * with unregistered guard pages on both sides of it in the same allocation, and a second MR
 * with LOCAL_WRITE only; creates NQP RC QPs and moves them to RTS, each connected to a peer
 * that does not exist: LID PEER_LID, QPN PEER_QPN + i, first PSN PSN.  Whoever sends packets
 * with that SLID and those QPNs on the port's link (tests/hostile/pib-hostile) reaches real
 * QPs in the states where they accept requests.
 *
 * It writes what the peer needs to INFO_FILE ("key value" lines, also on stdout), then waits
 * until GO_FILE exists (or the timeout), counting the async events that arrive meanwhile.
 * At the end it reports each QP's state, the events, and whether every byte of the MRs and
 * the guard pages is still what it wrote:
 *
 *     qp 3 0x000012 ERR
 *     event QP_ACCESS_ERR 10
 *     OK memory unchanged (73728 bytes checked)      or     CORRUPTED ...
 *
 * Exit status: 0 if the memory is unchanged, 1 if it is not, 2 if the setup failed.
 *
 * Nothing here knows about pib beyond the verbs: the same program serves any IB device.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "pib_test_util.h"

#define PAGE 4096
#define MAX_QPS 64

struct opts {
	const char *dev_name;	/* -d: NULL means the first device */
	int ib_port;		/* -i */
	int nqp;		/* -n */
	uint16_t peer_lid;	/* -L */
	uint32_t peer_qpn;	/* -Q */
	uint32_t psn;		/* -P */
	size_t mr_len;		/* -s, a multiple of the page size */
	const char *info_file;	/* -o */
	const char *go_file;	/* -w */
	int timeout;		/* -t, seconds */
};

/* Byte i of the MR: the top byte of i * 2654435761 (Knuth's multiplicative hash).
 * tests/hostile (hostile_attacks.c) checks what it READs against the same formula. */
static uint8_t pattern_byte(uint64_t i)
{
	return (uint8_t)(((uint32_t)i * 2654435761u) >> 24);
}

/* The guard pages and the LOCAL_WRITE-only MR get patterns of their own. */
static uint8_t guard_byte(uint64_t i)
{
	return pattern_byte(i) ^ 0xa5;
}

static uint8_t lo_byte(uint64_t i)
{
	return pattern_byte(i) ^ 0x3c;
}

static const char *event_name(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_CQ_ERR: return "CQ_ERR";
	case IBV_EVENT_QP_FATAL: return "QP_FATAL";
	case IBV_EVENT_QP_REQ_ERR: return "QP_REQ_ERR";
	case IBV_EVENT_QP_ACCESS_ERR: return "QP_ACCESS_ERR";
	case IBV_EVENT_COMM_EST: return "COMM_EST";
	case IBV_EVENT_SQ_DRAINED: return "SQ_DRAINED";
	case IBV_EVENT_PATH_MIG: return "PATH_MIG";
	case IBV_EVENT_PATH_MIG_ERR: return "PATH_MIG_ERR";
	case IBV_EVENT_DEVICE_FATAL: return "DEVICE_FATAL";
	case IBV_EVENT_PORT_ACTIVE: return "PORT_ACTIVE";
	case IBV_EVENT_PORT_ERR: return "PORT_ERR";
	case IBV_EVENT_LID_CHANGE: return "LID_CHANGE";
	case IBV_EVENT_PKEY_CHANGE: return "PKEY_CHANGE";
	case IBV_EVENT_SM_CHANGE: return "SM_CHANGE";
	case IBV_EVENT_SRQ_ERR: return "SRQ_ERR";
	case IBV_EVENT_SRQ_LIMIT_REACHED: return "SRQ_LIMIT_REACHED";
	case IBV_EVENT_QP_LAST_WQE_REACHED: return "QP_LAST_WQE_REACHED";
	case IBV_EVENT_CLIENT_REREGISTER: return "CLIENT_REREGISTER";
	case IBV_EVENT_GID_CHANGE: return "GID_CHANGE";
	case IBV_EVENT_WQ_FATAL: return "WQ_FATAL";
	}
	return "UNKNOWN";
}

static const char *qp_state_name(enum ibv_qp_state s)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS", [IBV_QPS_SQD] = "SQD", [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) && names[s] ? names[s] : "?";
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: pib-mr-target [options] -o INFO_FILE -w GO_FILE\n"
"  -d DEV     device (default: the first)\n"
"  -i PORT    port (default 1)\n"
"  -n NQP     RC QPs to create (default 13, at most %d)\n"
"  -L LID     the peer LID the QPs are connected to (default 0x20)\n"
"  -Q QPN     the peer QPN of QP 0; QP i's is QPN + i (default 0x4200)\n"
"  -P PSN     the first PSN the QPs expect (default 0x123456)\n"
"  -s BYTES   MR size, a multiple of %d (default 65536)\n"
"  -o FILE    where to write the info (key value lines)\n"
"  -w FILE    wait until this file exists, then check and exit\n"
"  -t SECS    stop waiting after this long (default 600)\n", MAX_QPS, PAGE);
}

static int setup_qp(struct ibv_qp *qp, const struct opts *o, int i, enum ibv_mtu mtu)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = o->ib_port,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	int err;

	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS);
	if (err)
		return err;
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR,
		.path_mtu = mtu,
		.dest_qp_num = (o->peer_qpn + i) & 0xffffff,
		.rq_psn = o->psn,
		.max_dest_rd_atomic = 4,
		.min_rnr_timer = 12,
		.ah_attr = { .dlid = o->peer_lid, .port_num = o->ib_port },
	};
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			    IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTS,
		.sq_psn = (o->psn + 0x1000 * (i + 1)) & 0xffffff,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = 1,
	};
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Check n bytes at p against gen(base + i); report the first few differences. */
static size_t verify(const char *what, const uint8_t *p, size_t n, uint64_t base,
		     uint8_t (*gen)(uint64_t))
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t want = gen(base + i);

		if (p[i] == want)
			continue;
		if (bad++ < 8)
			printf("CORRUPTED %s offset %zu: 0x%02x, wrote 0x%02x\n", what, i, p[i],
			       want);
	}
	if (bad)
		printf("CORRUPTED %s: %zu of %zu bytes changed\n", what, bad, n);
	return bad;
}

int main(int argc, char **argv)
{
	struct opts o = {
		.ib_port = 1, .nqp = 13, .peer_lid = 0x20, .peer_qpn = 0x4200,
		.psn = 0x123456, .mr_len = 65536, .timeout = 600,
	};
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_port_attr port;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr, *lo_mr;
	struct ibv_qp *qp[MAX_QPS];
	unsigned events[IBV_EVENT_WQ_FATAL + 1] = { 0 };
	uint8_t *buf, *lo;
	size_t bad = 0;
	int64_t deadline;
	FILE *f;
	char tmp[4096];
	int c, i, flags;
	bool go = false;

	while ((c = getopt(argc, argv, "d:i:n:L:Q:P:s:o:w:t:h")) != -1) {
		switch (c) {
		case 'd': o.dev_name = optarg; break;
		case 'i': o.ib_port = atoi(optarg); break;
		case 'n': o.nqp = atoi(optarg); break;
		case 'L': o.peer_lid = strtoul(optarg, NULL, 0); break;
		case 'Q': o.peer_qpn = strtoul(optarg, NULL, 0); break;
		case 'P': o.psn = strtoul(optarg, NULL, 0) & 0xffffff; break;
		case 's': o.mr_len = strtoull(optarg, NULL, 0); break;
		case 'o': o.info_file = optarg; break;
		case 'w': o.go_file = optarg; break;
		case 't': o.timeout = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || !o.info_file || !o.go_file || o.nqp < 1 || o.nqp > MAX_QPS ||
	    !o.mr_len || o.mr_len % PAGE || o.timeout <= 0) {
		usage(stderr);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	list = ibv_get_device_list(NULL);
	for (i = 0; list && list[i]; i++)
		if (!o.dev_name || !strcmp(ibv_get_device_name(list[i]), o.dev_name)) {
			ctx = ibv_open_device(list[i]);
			break;
		}
	if (!ctx) {
		fprintf(stderr, "pib-mr-target: cannot open %s\n", o.dev_name ? o.dev_name : "a device");
		return 2;
	}
	ibv_free_device_list(list);
	if (ibv_query_port(ctx, o.ib_port, &port)) {
		perror("ibv_query_port");
		return 2;
	}

	/* [guard page][MR: mr_len bytes][guard page], page aligned: the MR's neighbours are ours. */
	if (posix_memalign((void **)&buf, PAGE, o.mr_len + 2 * PAGE) ||
	    posix_memalign((void **)&lo, PAGE, PAGE)) {
		perror("posix_memalign");
		return 2;
	}
	for (size_t k = 0; k < PAGE; k++) {
		buf[k] = guard_byte(k);
		buf[PAGE + o.mr_len + k] = guard_byte(PAGE + k);
		lo[k] = lo_byte(k);
	}
	for (size_t k = 0; k < o.mr_len; k++)
		buf[PAGE + k] = pattern_byte(k);

	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	mr = pd ? ibv_reg_mr(pd, buf + PAGE, o.mr_len, IBV_ACCESS_LOCAL_WRITE |
			     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) : NULL;
	lo_mr = pd ? ibv_reg_mr(pd, lo, PAGE, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!pd || !cq || !mr || !lo_mr) {
		perror("pd/cq/mr");
		return 2;
	}
	for (i = 0; i < o.nqp; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};
		int err;

		qp[i] = ibv_create_qp(pd, &ia);
		if (!qp[i]) {
			perror("ibv_create_qp");
			return 2;
		}
		err = setup_qp(qp[i], &o, i, port.active_mtu);
		if (err) {
			fprintf(stderr, "pib-mr-target: QP %d to RTS: %s\n", i, strerror(err));
			return 2;
		}
	}

	/* The info file appears whole (rename), so a reader never sees half of it. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", o.info_file);
	f = fopen(tmp, "w");
	if (!f) {
		perror(tmp);
		return 2;
	}
	for (int pass = 0; pass < 2; pass++) {
		FILE *out = pass ? stdout : f;

		fprintf(out, "lid %u\npeer_lid %u\npeer_qpn 0x%06x\npsn 0x%06x\nmtu %u\n",
			port.lid, o.peer_lid, o.peer_qpn, o.psn, 128u << port.active_mtu);
		fprintf(out, "qpns");
		for (i = 0; i < o.nqp; i++)
			fprintf(out, " 0x%06x", qp[i]->qp_num);
		fprintf(out, "\nmr_addr 0x%" PRIx64 "\nmr_len %zu\nmr_rkey 0x%08x\nguard %d\n",
			(uint64_t)(uintptr_t)mr->addr, o.mr_len, mr->rkey, PAGE);
		fprintf(out, "lo_addr 0x%" PRIx64 "\nlo_len %d\nlo_rkey 0x%08x\n",
			(uint64_t)(uintptr_t)lo_mr->addr, PAGE, lo_mr->rkey);
	}
	if (fclose(f) || rename(tmp, o.info_file)) {
		perror(o.info_file);
		return 2;
	}

	/* Wait for the go, collecting async events (non-blocking: poll on the async fd). */
	flags = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
	deadline = now_ms() + o.timeout * 1000ll;
	while (!(go = !access(o.go_file, F_OK)) && now_ms() < deadline) {
		struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
		struct ibv_async_event ev;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		while (!ibv_get_async_event(ctx, &ev)) {
			if ((unsigned)ev.event_type < sizeof(events) / sizeof(events[0]))
				events[ev.event_type]++;
			ibv_ack_async_event(&ev);
		}
	}
	if (!go)
		printf("info  no %s after %d s: checking now\n", o.go_file, o.timeout);

	{
		struct ibv_wc wc[16];
		int n, total = 0;

		while ((n = ibv_poll_cq(cq, 16, wc)) > 0)
			total += n;
		printf("completions %d\n", total);
	}
	for (i = 0; i < o.nqp; i++) {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;

		if (ibv_query_qp(qp[i], &a, IBV_QP_STATE, &ia))
			printf("qp %d 0x%06x ?\n", i, qp[i]->qp_num);
		else
			printf("qp %d 0x%06x %s\n", i, qp[i]->qp_num, qp_state_name(a.qp_state));
	}
	for (unsigned t = 0; t < sizeof(events) / sizeof(events[0]); t++)
		if (events[t])
			printf("event %s %u\n", event_name(t), events[t]);

	bad += verify("guard before the MR", buf, PAGE, 0, guard_byte);
	bad += verify("MR", buf + PAGE, o.mr_len, 0, pattern_byte);
	bad += verify("guard after the MR", buf + PAGE + o.mr_len, PAGE, PAGE, guard_byte);
	bad += verify("LOCAL_WRITE-only MR", lo, PAGE, 0, lo_byte);
	if (!bad)
		printf("OK memory unchanged (%zu bytes checked)\n", o.mr_len + 3 * PAGE);

	for (i = 0; i < o.nqp; i++)
		ibv_destroy_qp(qp[i]);
	ibv_dereg_mr(lo_mr);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return bad ? 1 : 0;
}
