// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pib-hostile: a hostile peer for a pib link, run on the host.
 *
 * A pib port's cable is a unix stream socket (include/pib_link.h).  This program takes the
 * place of the HCA at the other end: it dials the socket, trains the link with a HELLO of its
 * own, so that the guest's port goes ACTIVE, and then sends what no well-behaved HCA would:
 * garbage, broken frames, malformed IB headers, requests out of the PSN window, and RDMA with
 * forged keys and addresses aimed at memory that `pib-mr-target` (tests/guest/) exposes.
 *
 * The device model must survive all of it, drop and count every bad packet under exactly one
 * rx_drop_* reason (enum pib_counter), answer with the NAKs the IBTA prescribes, and never
 * touch memory it was not given.  The checks that need the guest (its hw_counters, its memory,
 * its kernel log) are the e2e test's (tests/e2e/40-hostile-peer.sh); this program checks what
 * can be seen from the wire (the stream dropped on framing loss, the link retrained, the
 * responses) and prints what the guest should have counted:
 *
 *     PASS  forged: WRITE with a flipped key byte: NAK REM_ACCESS_ERR, PSN 0x1234
 *     FAIL  psn: ...
 *     expect rx_drop_access 9          (the counter's increase this run should cause)
 *     expect_qp 3 ERR                  (the state pib-mr-target's QP 3 should end in)
 *     expect_event QP_ACCESS_ERR 9     (async events pib-mr-target should have seen)
 *
 * It also relays a link (`relay`): two HCAs joined through it see a transparent cable, until
 * it is told (SIGUSR1) to cut both sides, which tests/e2e/41-link-fault.sh uses for a short
 * link drop under traffic.
 *
 * Every header comes from include/pib_link.h and include/pib_hw.h; the program is the only
 * thing on the host that speaks the link protocol besides the device model itself.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pib_link.h"
#include "pib_mad.h"
#include "pib_report.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* Our identity in HELLO: a GUID no pibvm node uses (pibvm's are 0x001af4000000NN00). */
#define HOSTILE_NODE_GUID 0x001af4ffff00e600ull

/* Target QPs, by their index in pib-mr-target's list (see target_roles in the usage text). */
#define QP_CONTROL 0 /* header checks, sync probes: never moves its PSN, stays RTS */
#define QP_PSN     1 /* PSN window checks: stays RTS */
#define QP_READ    2 /* valid READs (positive control): stays RTS */
#define QP_FORGED  3 /* first of the QPs the forged RDMA requests break, one each */
#define MAX_QPS    64

/* Bytes every forged WRITE carries: no byte of the pattern is guaranteed to differ, but 64 of
 * them in a row would be a coincidence of 1 in 2^512. */
#define POISON 0xee

/* =============================================================================================
 * Output
 */

static const char *cmd_name = "?";

/* One line per check, named after the command (tests/common/pib_report.h). */
#define check(ok, ...)	report_check(cmd_name, ok, __VA_ARGS__)
#define info(...)	report_info(cmd_name, __VA_ARGS__)

static void __attribute__((format(printf, 1, 2), noreturn)) die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "pib-hostile: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * What the guest should count.  The names are the driver's hw_counter names, i.e. the
 * names in include/pib_hw.h's PIB_COUNTERS list.
 */
#define COUNTER_NAME(id, name) [PIB_CNT_##id] = #name,
static const char *const counter_names[PIB_CNT_MAX] = {
	PIB_COUNTERS(COUNTER_NAME)
};
#undef COUNTER_NAME

static bool expect_set[PIB_CNT_MAX];
static uint64_t expect_n[PIB_CNT_MAX];
static int expect_drops;		/* packets the guest should drop, all reasons together */

/* The guest should count n more of c (n may be 0: "this must not move"). */
static void expect(enum pib_counter c, unsigned n)
{
	expect_set[c] = true;
	expect_n[c] += n;
	if (!strncmp(counter_names[c], "rx_drop_", 8))
		expect_drops += n;
}

/*
 * Counters of the guest's port that are not the device's: ib_cm's, in the port's sysfs
 * directory (cm_rx_msgs/req, ...).  The e2e test reads them next to the hw_counters.
 */
#define MAX_NAMED 16
static struct { const char *name; unsigned n; } expect_named[MAX_NAMED];
static int n_named;

static void expect_port_counter(const char *name, unsigned n)
{
	for (int i = 0; i < n_named; i++)
		if (!strcmp(expect_named[i].name, name)) {
			expect_named[i].n += n;
			return;
		}
	if (n_named < MAX_NAMED)
		expect_named[n_named++] = (typeof(expect_named[0])){ name, n };
}

static void print_expectations(void)
{
	for (int c = 0; c < PIB_CNT_MAX; c++)
		if (expect_set[c])
			printf("expect %s %" PRIu64 "\n", counter_names[c], expect_n[c]);
	for (int i = 0; i < n_named; i++)
		printf("expect %s %u\n", expect_named[i].name, expect_named[i].n);
	printf("expect_drops %d\n", expect_drops);
}

/* =============================================================================================
 * The link: framing on a unix stream socket
 */

struct link {
	const char *path;
	int fd;
	bool eof;			/* the other end closed the stream */
	uint8_t buf[2 * (PIB_LINK_HDR_LEN + PIB_LINK_MAX_PAYLOAD)];
	size_t len;			/* bytes in buf */
	uint64_t peer_node_guid;
	unsigned rx_frames, rx_other;	/* frames seen; of them, not meant for what we waited on */
};

static int link_dial(struct link *l, int timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int64_t deadline = now_ms() + timeout_ms;

	if (strlen(l->path) >= sizeof(sa.sun_path))
		die("socket path too long: %s", l->path);
	strcpy(sa.sun_path, l->path);
	for (;;) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			die("socket: %s", strerror(errno));
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			l->fd = fd;
			l->eof = false;
			l->len = 0;
			return 0;
		}
		close(fd);
		/* Between two connections, or before the server exists: try again. */
		if ((errno != ECONNREFUSED && errno != ENOENT && errno != EAGAIN) ||
		    now_ms() > deadline)
			return -1;
		sleep_ms(100);
	}
}

static void link_close(struct link *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

static int send_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t r = send(fd, b, n, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		b += r;
		n -= r;
	}
	return 0;
}

/* A frame as a well-behaved port would send it (whatever the payload holds). */
static int send_frame(struct link *l, uint8_t type, const void *payload, size_t len)
{
	uint8_t f[PIB_LINK_HDR_LEN + PIB_LINK_MAX_PAYLOAD];
	struct pib_link_hdr h = { .magic = PIB_LINK_MAGIC, .type = type,
				  .length_be = htons(len) };

	if (len > PIB_LINK_MAX_PAYLOAD)
		die("send_frame: %zu bytes do not fit a frame", len);
	memcpy(f, &h, sizeof(h));
	memcpy(f + sizeof(h), payload, len);
	return send_all(l->fd, f, sizeof(h) + len);
}

static int send_hello(struct link *l)
{
	struct pib_link_hello h = {
		.version_be = htonl(PIB_LINK_PROTO_VERSION),
		.mtu_be = htonl(PIB_LINK_MAX_PAYLOAD),
		.node_guid_be = htobe64(HOSTILE_NODE_GUID),
		.port_guid_be = htobe64(HOSTILE_NODE_GUID + 1),
	};

	return send_frame(l, PIB_FRAME_HELLO, &h, sizeof(h));
}

/*
 * The next frame from the device: 1 with *type, payload in p (up to PIB_LINK_MAX_PAYLOAD
 * bytes) and *len; 0 on timeout; -1 when the stream ended or broke (l->eof).
 */
static int recv_frame(struct link *l, uint8_t *type, uint8_t *p, size_t *len, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;

	for (;;) {
		if (l->len >= PIB_LINK_HDR_LEN) {
			struct pib_link_hdr h;
			size_t n;

			memcpy(&h, l->buf, sizeof(h));
			n = ntohs(h.length_be);
			if (h.magic != PIB_LINK_MAGIC || n > PIB_LINK_MAX_PAYLOAD) {
				info("the device sent a bad frame header (magic 0x%02x, length %zu)",
				     h.magic, n);
				l->eof = true;
				return -1;
			}
			if (l->len >= PIB_LINK_HDR_LEN + n) {
				*type = h.type;
				*len = n;
				memcpy(p, l->buf + PIB_LINK_HDR_LEN, n);
				l->len -= PIB_LINK_HDR_LEN + n;
				memmove(l->buf, l->buf + PIB_LINK_HDR_LEN + n, l->len);
				l->rx_frames++;
				return 1;
			}
		}
		if (l->eof)
			return -1;

		int64_t left = deadline - now_ms();
		struct pollfd pfd = { .fd = l->fd, .events = POLLIN };
		ssize_t r;

		if (left <= 0)
			return 0;
		r = poll(&pfd, 1, left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return 0;
		r = recv(l->fd, l->buf + l->len, sizeof(l->buf) - l->len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			l->eof = true;
			continue;	/* frames already buffered still count */
		}
		l->len += r;
	}
}

/* Wait for the device's HELLO (the frames before it, if any, are dropped). */
static int wait_hello(struct link *l, int timeout_ms)
{
	uint8_t p[PIB_LINK_MAX_PAYLOAD], type;
	int64_t deadline = now_ms() + timeout_ms;
	size_t n;

	while (recv_frame(l, &type, p, &n, deadline - now_ms()) == 1) {
		struct pib_link_hello h;

		if (type != PIB_FRAME_HELLO || n < sizeof(h))
			continue;
		memcpy(&h, p, sizeof(h));
		l->peer_node_guid = be64toh(h.node_guid_be);
		return ntohl(h.version_be) == PIB_LINK_PROTO_VERSION ? 0 : -1;
	}
	return -1;
}

/* Dial and train: each side sends HELLO; the port is ACTIVE once it has ours. */
static int link_train(struct link *l, int timeout_ms)
{
	if (link_dial(l, timeout_ms)) {
		info("cannot connect to %s: %s", l->path, strerror(errno));
		return -1;
	}
	if (send_hello(l) || wait_hello(l, timeout_ms)) {
		info("no HELLO from the device on %s", l->path);
		link_close(l);
		return -1;
	}
	return 0;
}

/* Read and discard until the device closes the stream: 0 if it did within timeout_ms. */
static int wait_eof(struct link *l, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	uint8_t junk[4096];

	while (now_ms() < deadline) {
		struct pollfd pfd = { .fd = l->fd, .events = POLLIN };
		ssize_t r = poll(&pfd, 1, deadline - now_ms());

		if (r <= 0)
			continue;
		r = recv(l->fd, junk, sizeof(junk), 0);
		if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
			return 0;
	}
	return -1;
}

/* =============================================================================================
 * What pib-mr-target exposes: a file of "key value" lines
 */

struct target {
	uint16_t lid;			/* the guest port's LID: our DLID */
	uint16_t peer_lid;		/* the LID its QPs are connected to: our SLID */
	uint32_t peer_qpn;		/* their QP i is connected to our QPN peer_qpn + i */
	uint32_t psn;			/* every QP's expected PSN (rq_psn) */
	uint32_t mtu;			/* path MTU, bytes */
	int nqp;
	uint32_t qpn[MAX_QPS];
	uint64_t mr_addr, mr_len;	/* the MR: LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ */
	uint32_t mr_rkey;
	uint64_t guard;			/* bytes before and after the MR that it does not cover */
	uint64_t lo_addr, lo_len;	/* a second MR with LOCAL_WRITE only */
	uint32_t lo_rkey;
};

static void target_load(struct target *t, const char *file)
{
	char line[4096], key[64];
	FILE *f = fopen(file, "r");
	int seen = 0;

	if (!f)
		die("%s: %s", file, strerror(errno));
	memset(t, 0, sizeof(*t));
	while (fgets(line, sizeof(line), f)) {
		char *v;
		int off;

		if (sscanf(line, "%63s %n", key, &off) != 1)
			continue;
		v = line + off;
#define U(name, field) else if (!strcmp(key, name)) { t->field = strtoull(v, NULL, 0); seen++; }
		if (!strcmp(key, "qpns")) {
			char *end;

			for (t->nqp = 0; t->nqp < MAX_QPS; t->nqp++) {
				t->qpn[t->nqp] = strtoul(v, &end, 0);
				if (end == v)
					break;
				v = end;
			}
			seen++;
		}
		U("lid", lid) U("peer_lid", peer_lid) U("peer_qpn", peer_qpn) U("psn", psn)
		U("mtu", mtu) U("mr_addr", mr_addr) U("mr_len", mr_len) U("mr_rkey", mr_rkey)
		U("guard", guard) U("lo_addr", lo_addr) U("lo_len", lo_len) U("lo_rkey", lo_rkey)
#undef U
	}
	fclose(f);
	if (seen < 13 || !t->lid || !t->nqp || !t->mr_len || !t->mtu)
		die("%s: not a complete pib-mr-target info file", file);
}

/* The MR's contents: byte i is the top byte of i * 2654435761 (Knuth's multiplicative hash),
 * as pib-mr-target fills it. */
static uint8_t pattern_byte(uint64_t i)
{
	return (uint8_t)(((uint32_t)i * 2654435761u) >> 24);
}

/* =============================================================================================
 * IB packets (include/pib_link.h: LRH, GRH, BTH, RETH, AETH; big-endian; no ICRC/VCRC)
 */

struct pkt {
	uint8_t opcode;
	uint16_t dlid, slid;
	uint16_t pkey;
	uint32_t dqpn, psn;
	bool ackreq;
	uint8_t vl;			/* LRH VL: 0, 15 for SMPs */
	uint8_t lver;			/* LRH LVer: 0 */
	bool lnh_raw;			/* LRH LNH 0 (raw) instead of IBA local/global */
	uint8_t tver;			/* BTH TVer: 0 */
	uint8_t pad_extra;		/* BTH PadCnt beyond what the payload needs */
	bool grh;
	uint8_t grh_ipver;		/* 6 */
	uint8_t dgid[16];
	bool reth;
	uint64_t va;
	uint32_t rkey, dmalen;
	bool aeth;
	uint8_t syndrome;
	uint32_t msn;
	bool deth;			/* UD: a DETH with qkey and sqpn */
	uint32_t qkey, sqpn;
	const void *payload;
	uint32_t paylen;
};

/* The packet for p, in b (PIB_LINK_MAX_PAYLOAD bytes); returns its length. */
static size_t pkt_build(uint8_t *b, const struct pkt *p)
{
	uint32_t pad = (-p->paylen & 3) + p->pad_extra;
	uint8_t lnh = p->lnh_raw ? 0 : p->grh ? PIB_LNH_IBA_GLOBAL : PIB_LNH_IBA_LOCAL;
	size_t off = sizeof(struct pib_lrh);
	size_t len = off + (p->grh ? sizeof(struct pib_grh) : 0) + sizeof(struct pib_bth) +
		     (p->reth ? sizeof(struct pib_reth) : 0) +
		     (p->aeth ? sizeof(struct pib_aeth) : 0) +
		     (p->deth ? sizeof(struct pib_deth) : 0) + p->paylen + (-p->paylen & 3);
	struct pib_lrh lrh = {
		.vl_lver = (p->vl & 0xf) << 4 | (p->lver & 0xf),
		.sl_lnh = lnh,
		.dlid_be = htons(p->dlid),
		.pktlen_be = htons(len / 4),
		.slid_be = htons(p->slid),
	};
	struct pib_bth bth = {
		.opcode = p->opcode,
		.flags = (pad & 3) << PIB_BTH_PAD_SHIFT | (p->tver & 0xf),
		.pkey_be = htons(p->pkey),
		.dqpn_be = htonl(p->dqpn & PIB_QPN_MASK),
		.psn_be = htonl((p->psn & PIB_PSN_MASK) | (p->ackreq ? PIB_BTH_ACKREQ : 0)),
	};

	if (len > PIB_LINK_MAX_PAYLOAD)
		die("pkt_build: %zu bytes do not fit a frame", len);
	memcpy(b, &lrh, sizeof(lrh));
	if (p->grh) {
		struct pib_grh grh = {
			.ver_tc_flow_be = htonl((uint32_t)p->grh_ipver << 28),
			.paylen_be = htons(len - off - sizeof(grh)),
			.next_hdr = 0x1b,
			.hop_limit = 1,
		};

		memcpy(grh.dgid, p->dgid, sizeof(grh.dgid));
		memcpy(b + off, &grh, sizeof(grh));
		off += sizeof(grh);
	}
	memcpy(b + off, &bth, sizeof(bth));
	off += sizeof(bth);
	if (p->reth) {
		struct pib_reth reth = {
			.va_hi_be = htonl(p->va >> 32),
			.va_lo_be = htonl((uint32_t)p->va),
			.rkey_be = htonl(p->rkey),
			.dmalen_be = htonl(p->dmalen),
		};

		memcpy(b + off, &reth, sizeof(reth));
		off += sizeof(reth);
	}
	if (p->aeth) {
		struct pib_aeth aeth = {
			.syn_msn_be = htonl((uint32_t)p->syndrome << 24 | (p->msn & 0xffffff)) };

		memcpy(b + off, &aeth, sizeof(aeth));
		off += sizeof(aeth);
	}
	if (p->deth) {
		struct pib_deth deth = {
			.qkey_be = htonl(p->qkey),
			.sqpn_be = htonl(p->sqpn & PIB_QPN_MASK),
		};

		memcpy(b + off, &deth, sizeof(deth));
		off += sizeof(deth);
	}
	if (p->paylen)
		memcpy(b + off, p->payload, p->paylen);
	memset(b + off + p->paylen, 0, -p->paylen & 3);
	return len;
}

/* A response from the device: an ACK/NAK or READ response, parsed. */
struct resp {
	uint8_t opcode;
	uint8_t vl;
	uint16_t dlid, slid;
	uint16_t pkey;
	uint32_t dqpn, psn;
	bool has_aeth;
	uint8_t syndrome;
	uint32_t msn;
	bool has_deth;			/* UD */
	uint32_t qkey, sqpn;
	const uint8_t *payload;
	uint32_t paylen;
};

static int resp_parse(const uint8_t *b, size_t len, struct resp *r)
{
	struct pib_lrh lrh;
	struct pib_bth bth;
	size_t off = sizeof(lrh);
	uint32_t pad;

	if (len < sizeof(lrh) + sizeof(bth))
		return -1;
	memcpy(&lrh, b, sizeof(lrh));
	if ((lrh.sl_lnh & 3) == PIB_LNH_IBA_GLOBAL)
		off += sizeof(struct pib_grh);
	if (len < off + sizeof(bth))
		return -1;
	memcpy(&bth, b + off, sizeof(bth));
	off += sizeof(bth);
	memset(r, 0, sizeof(*r));
	r->opcode = bth.opcode;
	r->vl = lrh.vl_lver >> 4;
	r->pkey = ntohs(bth.pkey_be);
	r->dlid = ntohs(lrh.dlid_be);
	r->slid = ntohs(lrh.slid_be);
	r->dqpn = ntohl(bth.dqpn_be) & PIB_QPN_MASK;
	r->psn = ntohl(bth.psn_be) & PIB_PSN_MASK;
	pad = (bth.flags >> PIB_BTH_PAD_SHIFT) & 3;
	switch (r->opcode) {
	case PIB_OP_RC_ACKNOWLEDGE:
	case PIB_OP_RC_ATOMIC_ACKNOWLEDGE:
	case PIB_OP_RC_RDMA_READ_RESP_FIRST:
	case PIB_OP_RC_RDMA_READ_RESP_LAST:
	case PIB_OP_RC_RDMA_READ_RESP_ONLY: {
		struct pib_aeth aeth;

		if (len < off + sizeof(aeth))
			return -1;
		memcpy(&aeth, b + off, sizeof(aeth));
		off += sizeof(aeth);
		r->has_aeth = true;
		r->syndrome = ntohl(aeth.syn_msn_be) >> 24;
		r->msn = ntohl(aeth.syn_msn_be) & 0xffffff;
		break;
	}
	case PIB_OP_UD_SEND_ONLY: {
		struct pib_deth deth;

		if (len < off + sizeof(deth))
			return -1;
		memcpy(&deth, b + off, sizeof(deth));
		off += sizeof(deth);
		r->has_deth = true;
		r->qkey = ntohl(deth.qkey_be);
		r->sqpn = ntohl(deth.sqpn_be) & PIB_QPN_MASK;
		break;
	}
	default:
		break;
	}
	if (r->opcode == PIB_OP_RC_ATOMIC_ACKNOWLEDGE)
		off += sizeof(struct pib_atomic_ack_eth);
	if (len < off + pad)
		return -1;
	r->payload = b + off;
	r->paylen = len - off - pad;
	return 0;
}

static const char *aeth_str(uint8_t syn)
{
	static char s[32];

	switch (syn & PIB_AETH_TYPE_MASK) {
	case PIB_AETH_ACK:
		return "ACK";
	case PIB_AETH_RNR_NAK:
		return "RNR NAK";
	case PIB_AETH_NAK:
		switch (syn & 0x1f) {
		case PIB_NAK_PSN_SEQ_ERR: return "NAK PSN_SEQ_ERR";
		case PIB_NAK_INVALID_REQ: return "NAK INVALID_REQ";
		case PIB_NAK_REM_ACCESS_ERR: return "NAK REM_ACCESS_ERR";
		case PIB_NAK_REM_OP_ERR: return "NAK REM_OP_ERR";
		case PIB_NAK_INVALID_RD_REQ: return "NAK INVALID_RD_REQ";
		}
		break;
	}
	snprintf(s, sizeof(s), "syndrome 0x%02x", syn);
	return s;
}

/* =============================================================================================
 * Talking to the target's QPs
 */

struct session {
	struct link l;
	struct target t;
	int timeout_ms;			/* for any one answer */
	unsigned sent;			/* PACKET frames sent on this connection */
};

static uint32_t psn_add(uint32_t psn, int32_t n)
{
	return (psn + n) & PIB_PSN_MASK;
}

/* A request from "our QP" peer_qpn + i to the target's QP i, from the LID it expects. */
static struct pkt req_to(const struct session *s, int i, uint8_t opcode, uint32_t psn)
{
	return (struct pkt){
		.opcode = opcode,
		.dlid = s->t.lid,
		.slid = s->t.peer_lid,
		.pkey = PIB_DEFAULT_PKEY,
		.dqpn = s->t.qpn[i],
		.psn = psn,
		.ackreq = true,
		.grh_ipver = 6,
	};
}

/* Send a raw IB packet (bytes already built, possibly cut short) as one PACKET frame. */
static void send_bytes(struct session *s, const uint8_t *b, size_t len)
{
	if (send_frame(&s->l, PIB_FRAME_PACKET, b, len))
		die("the device closed the link while we sent (%s)", strerror(errno));
	s->sent++;
	expect(PIB_CNT_RX_PACKETS, 1);
}

static void send_pkt(struct session *s, const struct pkt *p)
{
	uint8_t b[PIB_LINK_MAX_PAYLOAD];

	send_bytes(s, b, pkt_build(b, p));
}

/* =============================================================================================
 * MADs (include/pib_mad.h).  We are the target port's neighbour and, once the link trains,
 * its subnet manager: our QP0 and QP1 are QPN 0 and 1, our LID (when the target has one for us)
 * is peer_lid.  The target's SMA sends its traps to its master SM, which we make ourselves
 * (sm_activate()); we repress each one as an SM does, wherever it turns up.
 */

#define QP1_QKEY        0x80010000u	/* IBTA: QP1's Q_Key */
#define CM_CLASS        0x07		/* IBTA 16.7: the communication manager's class */
#define HOSTILE_TID_HI  0x4853544cu	/* "HSTL": the high half of our transaction IDs */

static uint32_t next_tid = 1;
static unsigned traps_seen[512];	/* by trap number (generic traps < 512) */

/* A MAD header for method/attribute, with a fresh TID. */
static void mad_hdr_init(struct pib_mad_hdr *h, uint8_t mgmt_class, uint8_t class_version,
			 uint8_t method, uint16_t attr, uint32_t mod)
{
	*h = (struct pib_mad_hdr){
		.base_version = PIB_MAD_BASE_VERSION,
		.mgmt_class = mgmt_class,
		.class_version = class_version,
		.method = method,
		.tid_hi_be = htonl(HOSTILE_TID_HI),
		.tid_lo_be = htonl(next_tid++),
		.attr_id_be = htons(attr),
		.attr_mod_be = htonl(mod),
	};
}

/*
 * An SMP to the target: directed route, as one hop out of our port 1 (on the wire its hop
 * pointer is already 1: IBTA C14-9), or LID-routed to its LID.
 */
static void smp_init(struct pib_smp *smp, bool dr, uint8_t method, uint16_t attr, uint32_t mod)
{
	memset(smp, 0, sizeof(*smp));
	mad_hdr_init(&smp->hdr, dr ? PIB_MGMT_CLASS_SUBN_DR : PIB_MGMT_CLASS_SUBN_LID,
		     PIB_SMP_CLASS_VERSION, method, attr, mod);
	if (dr) {
		smp->hdr.class_spec_be = htons(1 << 8 | 1);	/* HopPointer 1, HopCount 1 */
		smp->dr_slid_be = htons(0xffff);
		smp->dr_dlid_be = htons(0xffff);
		smp->initial_path[1] = 1;
	}
}

/*
 * The packet that carries a MAD of len bytes (a short one too) to the target's QP qpn: an SMP
 * (QP0) on VL15, directed-route ones between permissive LIDs; a GMP (QP1) on VL0 with QP1's
 * Q_Key.  The caller may spoil any field before it is sent.
 */
static struct pkt mad_pkt(const struct session *s, uint32_t qpn, bool dr, const void *mad,
			  size_t len)
{
	return (struct pkt){
		.opcode = PIB_OP_UD_SEND_ONLY,
		.vl = qpn == 0 ? 15 : 0,
		.dlid = dr ? 0xffff : s->t.lid,
		.slid = dr ? 0xffff : s->t.peer_lid,
		.pkey = PIB_DEFAULT_PKEY,
		.dqpn = qpn,
		.deth = true,
		.qkey = qpn == 0 ? 0 : QP1_QKEY,
		.sqpn = qpn,
		.grh_ipver = 6,
		.payload = mad,
		.paylen = len,
	};
}

static void send_smp(struct session *s, const struct pib_smp *smp)
{
	struct pkt p = mad_pkt(s, 0, smp->hdr.mgmt_class == PIB_MGMT_CLASS_SUBN_DR, smp,
			       sizeof(*smp));

	send_pkt(s, &p);
}

/* The MAD a parsed packet carries, if it is a datagram to our QP0 or QP1 with a whole one. */
static const struct pib_mad_hdr *resp_mad(const struct resp *r)
{
	if (!r->has_deth || r->dqpn > 1 || r->paylen < PIB_MAD_SIZE)
		return NULL;
	return (const struct pib_mad_hdr *)r->payload;
}

/*
 * A trap from the target's SMA (Trap(Notice) to its master SM): count it and repress it, as
 * an SM does, so that the SMA stops sending it.  True if r was one.
 */
static bool mad_trap(struct session *s, const struct resp *r)
{
	const struct pib_mad_hdr *h = resp_mad(r);
	struct pib_notice notice;
	struct pib_smp rep;
	uint16_t num;

	if (!h || h->method != PIB_MAD_METHOD_TRAP || r->dqpn != 0)
		return false;
	memcpy(&notice, r->payload + offsetof(struct pib_smp, data), sizeof(notice));
	num = ntohs(notice.trap_num_be);
	if (num < ARRAY_SIZE(traps_seen))
		traps_seen[num]++;
	info("trap %u from LID 0x%x (issuer LID 0x%x): repressed", num, r->slid,
	     ntohs(notice.issuer_lid_be));

	memcpy(&rep, r->payload, sizeof(rep));
	rep.hdr.method = PIB_MAD_METHOD_TRAP_REPRESS;
	rep.hdr.status_be = 0;
	struct pkt p = mad_pkt(s, 0, rep.hdr.mgmt_class == PIB_MGMT_CLASS_SUBN_DR, &rep,
			       sizeof(rep));
	if (rep.hdr.mgmt_class != PIB_MGMT_CLASS_SUBN_DR) {
		p.dlid = r->slid;		/* back where it came from */
		p.slid = r->dlid;
	}
	send_pkt(s, &p);
	return true;
}

/*
 * A request to one of our management agents (not an answer to us, not a trap): as the master
 * SM we get the target's SA queries (ib_sa asks its SM's SA for ClassPortInfo once the SM
 * LID changes).  We run no SA: they go unanswered, as the target's retries expect of an SM
 * that is busy or gone, and they are no answer to anything we sent.  True if r was one.
 */
static bool mad_request_to_us(const struct resp *r)
{
	const struct pib_mad_hdr *h = resp_mad(r);

	if (!h || (h->method & PIB_MAD_METHOD_RESP))
		return false;
	if (h->mgmt_class == CM_CLASS && h->tid_hi_be == htonl(HOSTILE_TID_HI))
		return false;	/* a CM message answering one of ours (REJ, DREP): a Send */
	info("a request to our QP%u: class 0x%02x method 0x%02x attribute 0x%04x: unanswered",
	     r->dqpn, h->mgmt_class, h->method, ntohs(h->attr_id_be));
	return true;
}

/*
 * The next IB packet from the device before deadline: 1 with it parsed in *r (its payload in
 * buf), 0 at the deadline.  Frames that carry no packet are noted as unexpected; traps are
 * repressed and requests to our agents noted on the way.
 */
static int next_packet(struct session *s, int64_t deadline, struct resp *r, uint8_t *buf)
{
	uint8_t type;
	size_t n;

	while (recv_frame(&s->l, &type, buf, &n, deadline - now_ms()) == 1) {
		if (type != PIB_FRAME_PACKET || resp_parse(buf, n, r)) {
			s->l.rx_other++;
			info("unexpected frame (type %u, %zu bytes) from the device", type, n);
			continue;
		}
		if (mad_trap(s, r) || mad_request_to_us(r))
			continue;
		return 1;
	}
	return 0;
}

/*
 * The answer to the MAD whose header is req: 1 with the packet in *r (its MAD at r->payload,
 * in buf), 0 if none came within ms.  Anything else is noted as unexpected.
 */
static int wait_mad(struct session *s, const struct pib_mad_hdr *req, int ms, struct resp *r,
		    uint8_t *buf)
{
	int64_t deadline = now_ms() + ms;
	const struct pib_mad_hdr *h;

	while (next_packet(s, deadline, r, buf)) {
		h = resp_mad(r);
		if (h && h->tid_hi_be == req->tid_hi_be && h->tid_lo_be == req->tid_lo_be)
			return 1;
		s->l.rx_other++;
		info("unexpected packet (opcode 0x%02x, QPN 0x%x, %u bytes) while waiting for a "
		     "MAD answer", r->opcode, r->dqpn, r->paylen);
	}
	return 0;
}

/* DR or LID-routed PortInfo of the target's port: 0 with *pi, or -1 (a FAIL said why). */
static int port_info(struct session *s, bool dr, uint8_t method, struct pib_port_info *pi)
{
	uint8_t buf[PIB_LINK_MAX_PAYLOAD];
	struct pib_smp smp;
	struct resp r;
	uint16_t status;

	smp_init(&smp, dr, method, PIB_SMP_ATTR_PORT_INFO, 0);
	if (method == PIB_MAD_METHOD_SET)
		memcpy(smp.data, pi, sizeof(*pi));
	send_smp(s, &smp);
	if (!wait_mad(s, &smp.hdr, s->timeout_ms, &r, buf)) {
		check(false, "PortInfo %s: no answer in %d ms", method == PIB_MAD_METHOD_SET ?
		      "Set" : "Get", s->timeout_ms);
		return -1;
	}
	memcpy(&smp, r.payload, sizeof(smp));
	status = ntohs(smp.hdr.status_be) & ~(dr ? PIB_SMP_STATUS_DIRECTION : 0);
	if (smp.hdr.method != PIB_MAD_METHOD_GET_RESP || status) {
		check(false, "PortInfo %s: method 0x%02x, status 0x%04x",
		      method == PIB_MAD_METHOD_SET ? "Set" : "Get", smp.hdr.method, status);
		return -1;
	}
	memcpy(pi, smp.data, sizeof(*pi));
	return 0;
}

/*
 * Be the target port's subnet manager, as an SM on the far end of its cable would: a port
 * whose link just trained is in INIT (an SM before us gave it its LID, which it keeps);
 * directed-route PortInfo Sets take it to ARMED and ACTIVE and make us its master SM (our
 * LID, peer_lid), so that its traps come to us.  Returns 0 once PortInfo says ACTIVE.
 */
static int sm_activate(struct session *s)
{
	static const uint8_t steps[] = { PIB_PORT_ARMED, PIB_PORT_ACTIVE };
	struct pib_port_info pi;
	uint8_t state;

	if (port_info(s, true, PIB_MAD_METHOD_GET, &pi))
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		state = pi.speed_state & 0xf;
		if (state >= steps[i])
			continue;
		pi.speed_state = (pi.speed_state & 0xf0) | steps[i];
		pi.phys_down &= 0x0f;			/* PortPhysicalState: no change */
		pi.sm_lid_be = htons(s->t.peer_lid);
		if (port_info(s, true, PIB_MAD_METHOD_SET, &pi))
			return -1;
	}
	state = pi.speed_state & 0xf;
	if (state != PIB_PORT_ACTIVE) {
		check(false, "as its SM we set the port ACTIVE; PortInfo says state %u", state);
		return -1;
	}
	return 0;
}

/*
 * The next packet for our QP peer_qpn + i (any of ours if i < 0): 1 if one came, in *r, whose
 * payload lives in buf.  Packets for other QPs are noted and skipped, traps repressed.
 */
static int wait_resp(struct session *s, int i, struct resp *r, uint8_t *buf)
{
	int64_t deadline = now_ms() + s->timeout_ms;
	uint32_t want = (s->t.peer_qpn + i) & PIB_QPN_MASK;

	while (next_packet(s, deadline, r, buf)) {
		if (i < 0 || r->dqpn == want)
			return 1;
		s->l.rx_other++;
		info("unexpected %s (opcode 0x%02x) for QPN 0x%x while waiting for QPN 0x%x",
		     r->has_aeth ? aeth_str(r->syndrome) : "packet", r->opcode, r->dqpn, want);
	}
	return 0;
}

/* Nothing more from the device for any of our QPs within ms: true if so. */
static bool quiet(struct session *s, int ms)
{
	int saved = s->timeout_ms;
	uint8_t buf[PIB_LINK_MAX_PAYLOAD];
	struct resp r;
	int got;

	s->timeout_ms = ms;
	got = wait_resp(s, -1, &r, buf);
	s->timeout_ms = saved;
	if (got)
		info("unexpected opcode 0x%02x for QPN 0x%x, PSN 0x%06x %s", r.opcode, r.dqpn,
		     r.psn, r.has_aeth ? aeth_str(r.syndrome) : "");
	return !got;
}

/* Expect an ACK-type answer with this syndrome and PSN for our QP peer_qpn + i. */
static void expect_ack(struct session *s, int i, uint8_t syndrome, uint32_t psn, const char *what)
{
	uint8_t buf[PIB_LINK_MAX_PAYLOAD];
	struct resp r;

	if (!wait_resp(s, i, &r, buf)) {
		check(false, "%s: no answer in %d ms (wanted %s, PSN 0x%06x)", what,
		      s->timeout_ms, aeth_str(syndrome), psn);
		return;
	}
	/* The ACK's credit field [4:0] is free; NAK codes must match exactly. */
	bool ok = r.opcode == PIB_OP_RC_ACKNOWLEDGE && r.psn == psn &&
		  ((syndrome & PIB_AETH_TYPE_MASK) == PIB_AETH_ACK ?
			   (r.syndrome & PIB_AETH_TYPE_MASK) == PIB_AETH_ACK :
			   r.syndrome == syndrome);

	check(ok, "%s: %s, PSN 0x%06x%s%s", what, r.opcode == PIB_OP_RC_ACKNOWLEDGE ?
	      aeth_str(r.syndrome) : "not an ACK", r.psn, ok ? "" : ", wanted ",
	      ok ? "" : aeth_str(syndrome));
}

/*
 * The sync probe: a zero-length RDMA WRITE that repeats a PSN from before the target QP's
 * first one.  The responder takes it for a duplicate: it ACKs it and applies nothing.  The
 * receive queue is handled in order, so once the ACK is here every packet sent before the
 * probe has been handled and counted, and closing the stream cannot turn their drops into
 * rx_drop_port_down.
 */
static void sync_probe(struct session *s, const char *what)
{
	struct pkt p = req_to(s, QP_CONTROL, PIB_OP_RC_RDMA_WRITE_ONLY,
			      psn_add(s->t.psn, -1));

	p.reth = true;
	p.va = s->t.mr_addr;
	p.rkey = s->t.mr_rkey;
	send_pkt(s, &p);
	expect(PIB_CNT_RX_DROP_DUPLICATE, 1);
	expect(PIB_CNT_DUPLICATE_REQUESTS, 1);
	expect_ack(s, QP_CONTROL, PIB_AETH_ACK, psn_add(s->t.psn, -1), what);
}

/*
 * Dial, train the link and, given the target (whose port then has an SM-assigned LID), be its
 * subnet manager: its port is ACTIVE on return 0.
 */
static int session_open(struct session *s)
{
	s->sent = 0;
	s->l.rx_other = 0;
	if (link_train(&s->l, s->timeout_ms))
		return -1;
	if (s->t.lid && sm_activate(s)) {
		link_close(&s->l);
		return -1;
	}
	return 0;
}

/* End a connection on which we waited for answers: nothing else may have come. */
static void session_close(struct session *s)
{
	check(s->l.rx_other == 0, "%u packet(s) sent, no unexpected answer (%u)", s->sent,
	      s->l.rx_other);
	link_close(&s->l);
}

/* =============================================================================================
 * The attacks
 */

/* Random bytes: the first header is garbage, so the device must drop the stream; then the
 * link must train again when we dial again. */
static void cmd_garbage(struct session *s)
{
	uint8_t junk[8192];

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = random();
	junk[0] = PIB_LINK_MAGIC ^ 0xff;	/* never the magic: framing is lost at byte 0 */

	if (session_open(s)) {
		check(false, "the link trains before the garbage");
		return;
	}
	check(true, "the link trains (device node GUID 0x%016" PRIx64 ")", s->l.peer_node_guid);
	send_all(s->l.fd, junk, sizeof(junk));	/* the device may hang up midway */
	expect(PIB_CNT_LINK_FRAMING_ERRORS, 1);
	check(!wait_eof(&s->l, s->timeout_ms), "%zu random bytes: the device drops the stream",
	      sizeof(junk));
	link_close(&s->l);

	check(!session_open(s), "the link trains again on a new connection");
	link_close(&s->l);
}

/* Frames with a valid magic but an impossible header, each on a fresh connection. */
static void cmd_bad_frames(struct session *s)
{
	static const struct {
		const char *what;
		uint8_t type;
		uint32_t length;	/* in the header */
		uint32_t sent;		/* payload bytes actually sent */
	} cases[] = {
		{ "unknown frame type 0x7f", 0x7f, 8, 8 },
		{ "frame type 0 (none)", 0x00, 0, 0 },
		{ "length one past the maximum", PIB_FRAME_PACKET, PIB_LINK_MAX_PAYLOAD + 1, 64 },
		{ "length 0xffff", PIB_FRAME_PACKET, 0xffff, 64 },
		{ "HELLO shorter than struct pib_link_hello", PIB_FRAME_HELLO, 8, 8 },
	};
	uint8_t f[PIB_LINK_HDR_LEN + 64];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct pib_link_hdr h = { .magic = PIB_LINK_MAGIC, .type = cases[i].type,
					  .length_be = htons(cases[i].length) };

		if (session_open(s)) {
			check(false, "%s: the link trains first", cases[i].what);
			continue;
		}
		memset(f, 0, sizeof(f));
		memcpy(f, &h, sizeof(h));
		send_all(s->l.fd, f, sizeof(h) + cases[i].sent);
		expect(PIB_CNT_LINK_FRAMING_ERRORS, 1);
		check(!wait_eof(&s->l, s->timeout_ms), "%s: the device drops the stream",
		      cases[i].what);
		link_close(&s->l);
	}

	/* A HELLO of another protocol version loses framing too, and so before training. */
	if (!link_dial(&s->l, s->timeout_ms)) {
		struct pib_link_hello hello = {
			.version_be = htonl(PIB_LINK_PROTO_VERSION + 1),
			.mtu_be = htonl(PIB_LINK_MAX_PAYLOAD),
			.node_guid_be = htobe64(HOSTILE_NODE_GUID),
		};

		send_frame(&s->l, PIB_FRAME_HELLO, &hello, sizeof(hello));
		expect(PIB_CNT_LINK_FRAMING_ERRORS, 1);
		check(!wait_eof(&s->l, s->timeout_ms),
		      "HELLO with protocol version %d: the device drops the stream",
		      PIB_LINK_PROTO_VERSION + 1);
		link_close(&s->l);
	}
	check(!session_open(s), "the link trains again afterwards");
	link_close(&s->l);
}

/* IB packets cut short, and a frame cut by the end of the stream. */
static void cmd_truncated(struct session *s)
{
	uint8_t b[PIB_LINK_MAX_PAYLOAD], payload[64];
	struct pkt p;
	size_t len;

	memset(payload, POISON, sizeof(payload));

	/* A frame whose payload never comes: the stream ends in the middle of it.  The device
	 * must forget the piece and start the next connection clean: nothing is counted. */
	if (session_open(s)) {
		check(false, "the link trains");
		return;
	}
	{
		struct pib_link_hdr h = { .magic = PIB_LINK_MAGIC, .type = PIB_FRAME_PACKET,
					  .length_be = htons(100) };
		uint8_t f[PIB_LINK_HDR_LEN + 40] = { 0 };

		memcpy(f, &h, sizeof(h));
		send_all(s->l.fd, f, sizeof(f));
		sleep_ms(200);
		link_close(&s->l);
		info("sent a PACKET frame header for 100 bytes, then 40 bytes, then closed");
	}

	if (session_open(s)) {
		check(false, "the link trains after a frame cut by the end of the stream");
		return;
	}
	check(true, "the link trains after a frame cut by the end of the stream");

	/* Shorter than an LRH and a BTH. */
	p = req_to(s, QP_CONTROL, PIB_OP_RC_RDMA_WRITE_ONLY, s->t.psn);
	p.reth = true;
	p.va = s->t.mr_addr;
	p.rkey = s->t.mr_rkey;
	p.dmalen = sizeof(payload);
	p.payload = payload;
	p.paylen = sizeof(payload);
	len = pkt_build(b, &p);
	send_bytes(s, b, 8);
	send_bytes(s, b, sizeof(struct pib_lrh) + sizeof(struct pib_bth) - 1);
	expect(PIB_CNT_RX_DROP_MALFORMED, 2);

	/* A WRITE cut inside its RETH, with the LRH length fixed up to the cut. */
	{
		size_t cut = sizeof(struct pib_lrh) + sizeof(struct pib_bth) + 8;
		struct pib_lrh lrh;

		memcpy(&lrh, b, sizeof(lrh));
		lrh.pktlen_be = htons(cut / 4);
		memcpy(b, &lrh, sizeof(lrh));
		send_bytes(s, b, cut);
		expect(PIB_CNT_RX_DROP_MALFORMED, 1);
	}

	/* A whole WRITE whose LRH claims more (or fewer) words than the frame has. */
	len = pkt_build(b, &p);
	send_bytes(s, b, len - 4);
	{
		struct pib_lrh lrh;

		memcpy(&lrh, b, sizeof(lrh));
		lrh.pktlen_be = htons(len / 4 - 1);
		memcpy(b, &lrh, sizeof(lrh));
		send_bytes(s, b, len);
	}
	expect(PIB_CNT_RX_DROP_MALFORMED, 2);

	/* A pad count larger than the bytes after the headers: an ACK has none to pad. */
	p = req_to(s, QP_CONTROL, PIB_OP_RC_ACKNOWLEDGE, s->t.psn);
	p.ackreq = false;
	p.aeth = true;
	p.pad_extra = 3;
	send_pkt(s, &p);
	expect(PIB_CNT_RX_DROP_MALFORMED, 1);

	sync_probe(s, "after truncated packets: the stream is still in step");
	session_close(s);
}

/* PACKET frames with no payload at all, a few, then a burst of 65,536 (256 KiB) in one write:
 * far more frames than one read of the device holds (it reads the socket up to 256 KiB at a
 * time and dispatches 64 frames at a time, so the burst tests that its receive queue stays
 * bounded).  The stream must stay in step, and every frame must be counted. */
#define BURST_FRAMES 65536
static void cmd_zero_length(struct session *s)
{
	static uint8_t burst[BURST_FRAMES * PIB_LINK_HDR_LEN];
	const struct pib_link_hdr hdr = { .magic = PIB_LINK_MAGIC, .type = PIB_FRAME_PACKET };
	const int n = 5;

	if (session_open(s)) {
		check(false, "the link trains");
		return;
	}
	for (int i = 0; i < n; i++)
		send_bytes(s, NULL, 0);
	for (int i = 0; i < BURST_FRAMES; i++)
		memcpy(burst + i * PIB_LINK_HDR_LEN, &hdr, sizeof(hdr));
	if (send_all(s->l.fd, burst, sizeof(burst)))
		die("the device closed the link during a burst (%s)", strerror(errno));
	s->sent += BURST_FRAMES;
	expect(PIB_CNT_RX_PACKETS, BURST_FRAMES);
	expect(PIB_CNT_RX_DROP_MALFORMED, n + BURST_FRAMES);
	expect(PIB_CNT_LINK_FRAMING_ERRORS, 0);
	sync_probe(s, "after zero-length PACKET frames and a burst of 65536: the stream is still "
		      "in step");
	session_close(s);
}

/* One bad field each: everything a receiver checks before a packet reaches a QP's engines,
 * plus responses that answer nothing. */
static void cmd_bad_headers(struct session *s)
{
	uint8_t payload[64];
	struct {
		const char *what;
		struct pkt p;
		enum pib_counter why;
	} c[24];
	int n = 0;
	struct pkt base;

	memset(payload, POISON, sizeof(payload));
	base = req_to(s, QP_CONTROL, PIB_OP_RC_RDMA_WRITE_ONLY, s->t.psn);
	base.reth = true;
	base.va = s->t.mr_addr;
	base.rkey = s->t.mr_rkey;
	base.dmalen = sizeof(payload);
	base.payload = payload;
	base.paylen = sizeof(payload);

#define CASE(w, reason, ...) do { \
		c[n].what = (w); c[n].p = base; c[n].why = (reason); \
		{ struct pkt *p = &c[n].p; __VA_ARGS__; (void)p; } n++; \
	} while (0)
	CASE("LRH LVer 1", PIB_CNT_RX_DROP_MALFORMED, p->lver = 1);
	CASE("LRH LNH 0 (raw)", PIB_CNT_RX_DROP_MALFORMED, p->lnh_raw = true);
	CASE("GRH with IPVer 4", PIB_CNT_RX_DROP_MALFORMED, p->grh = true; p->grh_ipver = 4);
	CASE("DLID of another port", PIB_CNT_RX_DROP_DLID, p->dlid = s->t.lid + 0x100);
	CASE("DLID 0xffff (permissive)", PIB_CNT_RX_DROP_DLID, p->dlid = 0xffff);
	CASE("GRH with another port's DGID", PIB_CNT_RX_DROP_DLID,
	     p->grh = true; memset(p->dgid, 0x42, 16));
	CASE("opcode 0x15 (reserved in RC)", PIB_CNT_RX_DROP_OPCODE, p->opcode = 0x15);
	CASE("opcode 0x40 (RD, not supported)", PIB_CNT_RX_DROP_OPCODE, p->opcode = 0x40);
	CASE("opcode 0xff", PIB_CNT_RX_DROP_OPCODE, p->opcode = 0xff);
	CASE("BTH TVer 1", PIB_CNT_RX_DROP_OPCODE, p->tver = 1);
	CASE("P_Key 0x1234", PIB_CNT_RX_DROP_PKEY, p->pkey = 0x1234);
	CASE("P_Key 0x0000", PIB_CNT_RX_DROP_PKEY, p->pkey = 0);
	CASE("QPN 0xfffff0 (no such QP)", PIB_CNT_RX_DROP_NO_QP, p->dqpn = 0xfffff0);
	CASE("UC opcode to an RC QP", PIB_CNT_RX_DROP_QP_TYPE,
	     p->opcode = PIB_OP_UC_RDMA_WRITE_ONLY);
	CASE("UD opcode to an RC QP", PIB_CNT_RX_DROP_QP_TYPE,
	     p->opcode = PIB_OP_UD_SEND_ONLY; p->reth = false);
	CASE("SLID other than the QP's peer", PIB_CNT_RX_DROP_SLID, p->slid = s->t.peer_lid + 1);
	CASE("READ response to a QP with no READ outstanding", PIB_CNT_RX_DROP_STALE_RESP,
	     p->opcode = PIB_OP_RC_RDMA_READ_RESP_ONLY; p->reth = false; p->aeth = true;
	     p->ackreq = false);
	CASE("ACK to a QP with nothing outstanding", PIB_CNT_RX_DROP_STALE_RESP,
	     p->opcode = PIB_OP_RC_ACKNOWLEDGE; p->reth = false; p->aeth = true;
	     p->paylen = 0; p->ackreq = false);
	CASE("NAK REM_ACCESS_ERR to a QP with nothing outstanding", PIB_CNT_RX_DROP_STALE_RESP,
	     p->opcode = PIB_OP_RC_ACKNOWLEDGE; p->reth = false; p->aeth = true;
	     p->syndrome = PIB_AETH_NAK | PIB_NAK_REM_ACCESS_ERR; p->paylen = 0;
	     p->ackreq = false);
#undef CASE

	if (session_open(s)) {
		check(false, "the link trains");
		return;
	}
	for (int i = 0; i < n; i++) {
		send_pkt(s, &c[i].p);
		expect(c[i].why, 1);
		info("sent: %s (the guest should count %s)", c[i].what, counter_names[c[i].why]);
	}
	sync_probe(s, "after bad headers");
	printf("expect_qp %d RTS\n", QP_CONTROL);
	check(quiet(s, 300), "no other answer to any of them");
	expect(PIB_CNT_ACCESS_NAKS_SENT, 0);
	expect(PIB_CNT_SEQ_NAKS_SENT, 0);
	session_close(s);
}

/* The PSN window: ahead is a sequence error (one NAK per gap), behind is a duplicate (ACKed,
 * never applied), and the 24-bit space wraps at half. */
static void cmd_psn(struct session *s)
{
	uint8_t payload[64];
	uint32_t e = s->t.psn;		/* what the target's QP expects */
	struct pkt p;

	memset(payload, POISON, sizeof(payload));
	p = req_to(s, QP_PSN, PIB_OP_RC_RDMA_WRITE_ONLY, 0);
	p.reth = true;
	p.va = s->t.mr_addr + 256;
	p.rkey = s->t.mr_rkey;
	p.dmalen = sizeof(payload);
	p.payload = payload;
	p.paylen = sizeof(payload);

	if (session_open(s)) {
		check(false, "the link trains");
		return;
	}
	p.psn = psn_add(e, 1000);
	send_pkt(s, &p);
	expect(PIB_CNT_RX_DROP_PSN_SEQ, 1);
	expect(PIB_CNT_SEQ_NAKS_SENT, 1);
	expect_ack(s, QP_PSN, PIB_AETH_NAK | PIB_NAK_PSN_SEQ_ERR, e,
		   "valid WRITE 1000 PSNs ahead: NAK with the expected PSN, not applied");

	p.psn = psn_add(e, 0x7fffff);
	send_pkt(s, &p);
	expect(PIB_CNT_RX_DROP_PSN_SEQ, 1);
	check(quiet(s, 500), "WRITE 2^23-1 PSNs ahead, same gap: dropped, no second NAK");

	p.psn = psn_add(e, -10);
	send_pkt(s, &p);
	expect(PIB_CNT_RX_DROP_DUPLICATE, 1);
	expect(PIB_CNT_DUPLICATE_REQUESTS, 1);
	expect_ack(s, QP_PSN, PIB_AETH_ACK, psn_add(e, -1),
		   "valid WRITE 10 PSNs behind: a duplicate, ACKed, not applied");

	p.psn = psn_add(e, 0x800000);
	send_pkt(s, &p);
	expect(PIB_CNT_RX_DROP_DUPLICATE, 1);
	expect(PIB_CNT_DUPLICATE_REQUESTS, 1);
	expect_ack(s, QP_PSN, PIB_AETH_ACK, psn_add(e, -1),
		   "valid WRITE 2^23 PSNs away: behind in 24-bit arithmetic, a duplicate");
	printf("expect_qp %d RTS\n", QP_PSN);
	session_close(s);
}

/* Valid READs: the positive control that the target's keys and addresses are the ones the
 * forged requests tamper with, and that what comes back is the pattern. */
static void cmd_read(struct session *s)
{
	const struct {
		uint64_t off;
		uint32_t len;
	} reads[] = {
		{ 128, 256 },
		{ 1, 2 * 4096 + 100 },		/* several responses at any MTU up to 4096 */
	};
	uint8_t buf[PIB_LINK_MAX_PAYLOAD];
	uint32_t psn = s->t.psn;

	if (session_open(s)) {
		check(false, "the link trains");
		return;
	}
	for (size_t k = 0; k < ARRAY_SIZE(reads); k++) {
		struct pkt p = req_to(s, QP_READ, PIB_OP_RC_RDMA_READ_REQUEST, psn);
		uint32_t npkts = (reads[k].len + s->t.mtu - 1) / s->t.mtu;
		uint32_t got = 0, bad = 0, first_bad = 0;
		bool ok = true;

		if (reads[k].off + reads[k].len > s->t.mr_len)
			continue;
		p.reth = true;
		p.va = s->t.mr_addr + reads[k].off;
		p.rkey = s->t.mr_rkey;
		p.dmalen = reads[k].len;
		send_pkt(s, &p);
		for (uint32_t j = 0; j < npkts && ok; j++) {
			struct resp r;
			uint8_t want = npkts == 1 ? PIB_OP_RC_RDMA_READ_RESP_ONLY :
				       j == 0 ? PIB_OP_RC_RDMA_READ_RESP_FIRST :
				       j == npkts - 1 ? PIB_OP_RC_RDMA_READ_RESP_LAST :
				       PIB_OP_RC_RDMA_READ_RESP_MIDDLE;

			if (!wait_resp(s, QP_READ, &r, buf) || r.opcode != want ||
			    r.psn != psn_add(psn, j)) {
				ok = false;
				break;
			}
			for (uint32_t b = 0; b < r.paylen; b++)
				if (r.payload[b] != pattern_byte(reads[k].off + got + b) && !bad++)
					first_bad = got + b;
			got += r.paylen;
		}
		check(ok && got == reads[k].len && !bad,
		      "READ of %u bytes at MR offset %" PRIu64 ": %u response(s), the pattern%s",
		      reads[k].len, reads[k].off, npkts,
		      !ok ? " (missing or out-of-order responses)" :
		      got != reads[k].len ? " (wrong length)" : bad ? " (wrong bytes)" : "");
		if (bad)
			info("%u wrong bytes, the first at offset %u", bad, first_bad);
		psn = psn_add(psn, npkts);
	}
	printf("expect_qp %d RTS\n", QP_READ);
	session_close(s);
}

/*
 * RDMA with forged keys and addresses, one per target QP (a remote access error moves the
 * QP to ERR, as the IBTA says).  Each must be NAKed with REM_ACCESS_ERR and counted as
 * rx_drop_access, and a valid WRITE sent after it to the same QP must be dropped too
 * (rx_drop_qp_state): the QP is dead, the memory out of reach.
 */
static void cmd_forged(struct session *s)
{
	const struct target *t = &s->t;
	uint32_t key_byte = t->mr_rkey & 0xff;
	const struct {
		const char *what;
		uint8_t opcode;
		uint64_t va;
		uint32_t rkey, len;
	} cases[] = {
		{ "WRITE with the key byte flipped", PIB_OP_RC_RDMA_WRITE_ONLY,
		  t->mr_addr, t->mr_rkey ^ 0x01, 64 },
		{ "WRITE with an rkey naming no MR", PIB_OP_RC_RDMA_WRITE_ONLY,
		  t->mr_addr, 0x00fff000 | key_byte, 64 },
		{ "WRITE with an rkey in the memory-window range", PIB_OP_RC_RDMA_WRITE_ONLY,
		  t->mr_addr, 0xfffff000 | key_byte, 64 },
		{ "WRITE with the rkey of an MR without REMOTE_WRITE", PIB_OP_RC_RDMA_WRITE_ONLY,
		  t->lo_addr, t->lo_rkey, 64 },
		{ "WRITE across the MR's end", PIB_OP_RC_RDMA_WRITE_ONLY,
		  t->mr_addr + t->mr_len - 32, t->mr_rkey, 64 },
		{ "WRITE just before the MR", PIB_OP_RC_RDMA_WRITE_ONLY,
		  t->mr_addr - 64, t->mr_rkey, 64 },
		{ "WRITE whose range wraps past 2^64", PIB_OP_RC_RDMA_WRITE_ONLY,
		  UINT64_MAX - 31, t->mr_rkey, 64 },
		{ "READ with the key byte flipped", PIB_OP_RC_RDMA_READ_REQUEST,
		  t->mr_addr, t->mr_rkey ^ 0x80, 64 },
		{ "READ across the MR's end", PIB_OP_RC_RDMA_READ_REQUEST,
		  t->mr_addr + t->mr_len - 64, t->mr_rkey, 4096 },
		{ "READ of 1 GiB from a small MR", PIB_OP_RC_RDMA_READ_REQUEST,
		  t->mr_addr, t->mr_rkey, 1u << 30 },
	};
	uint8_t payload[64];
	int n = ARRAY_SIZE(cases);

	if (t->nqp < QP_FORGED + n)
		die("the target has %d QPs; forged needs %d (pib-mr-target -n)", t->nqp,
		    QP_FORGED + n);
	memset(payload, POISON, sizeof(payload));
	if (session_open(s)) {
		check(false, "the link trains");
		return;
	}
	for (int i = 0; i < n; i++) {
		int q = QP_FORGED + i;
		struct pkt p = req_to(s, q, cases[i].opcode, t->psn);
		char what[160];

		p.reth = true;
		p.va = cases[i].va;
		p.rkey = cases[i].rkey;
		p.dmalen = cases[i].len;
		if (cases[i].opcode == PIB_OP_RC_RDMA_WRITE_ONLY) {
			p.payload = payload;
			p.paylen = cases[i].len;
		}
		send_pkt(s, &p);
		expect(PIB_CNT_RX_DROP_ACCESS, 1);
		expect(PIB_CNT_ACCESS_NAKS_SENT, 1);
		snprintf(what, sizeof(what), "%s (va 0x%" PRIx64 ", rkey 0x%08x, %u bytes)",
			 cases[i].what, cases[i].va, cases[i].rkey, cases[i].len);
		expect_ack(s, q, PIB_AETH_NAK | PIB_NAK_REM_ACCESS_ERR, t->psn, what);

		/* The QP is in ERR now: a valid WRITE with the next PSN lands nowhere. */
		p = req_to(s, q, PIB_OP_RC_RDMA_WRITE_ONLY, psn_add(t->psn, 1));
		p.reth = true;
		p.va = t->mr_addr;
		p.rkey = t->mr_rkey;
		p.dmalen = sizeof(payload);
		p.payload = payload;
		p.paylen = sizeof(payload);
		send_pkt(s, &p);
		expect(PIB_CNT_RX_DROP_QP_STATE, 1);
		printf("expect_qp %d ERR\n", q);
	}
	printf("expect_event QP_ACCESS_ERR %d\n", n);
	sync_probe(s, "after the forged requests");
	check(quiet(s, 300), "no answer to the valid WRITEs sent to QPs in ERR");
	session_close(s);
}

/* Train and keep the link up (answering nothing) until SIGINT/SIGTERM or --hold seconds. */
static volatile sig_atomic_t stop, arm;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

static void on_arm(int sig)
{
	(void)sig;
	arm = 1;
}

/*
 * MADs that no SM or agent would send, to the target's QP0 and QP1 from the wire (the
 * port is ACTIVE, we are its SM).  Each gets what the IBTA prescribes: the answer with the
 * status that says what was wrong (13.4.7), or a silent discard where the IBTA says so
 * (C14-9: a directed-route SMP with an impossible hop pointer or count), or it is dropped by the
 * device and counted (a MAD that is not 256 bytes, the wrong VL, Q_Key or P_Key), never a
 * crash, a hang or a port left in another state.  A good SMP is answered afterwards.
 */
#define MAD_QUIET_MS 1500		/* no answer within this: none is coming (TCG) */

/* Send p (a MAD packet); the answer's status must be want (the D bit aside). */
static void mad_expect_status(struct session *s, const char *what, struct pkt *p, uint16_t want)
{
	const struct pib_mad_hdr *req = p->payload;
	bool dr = req->mgmt_class == PIB_MGMT_CLASS_SUBN_DR;
	uint8_t buf[PIB_LINK_MAX_PAYLOAD];
	const struct pib_mad_hdr *h;
	struct resp r;
	uint16_t status;

	send_pkt(s, p);
	if (!wait_mad(s, req, s->timeout_ms, &r, buf)) {
		check(false, "%s: no answer in %d ms (wanted status 0x%04x)", what, s->timeout_ms,
		      want);
		return;
	}
	h = resp_mad(&r);
	status = ntohs(h->status_be);
	check(h->method == PIB_MAD_METHOD_GET_RESP && (status & ~PIB_SMP_STATUS_DIRECTION) == want &&
	      (!dr || (status & PIB_SMP_STATUS_DIRECTION)) && r.sqpn == p->dqpn &&
	      r.vl == (p->dqpn == 0 ? 15 : 0),
	      "%s: method 0x%02x, status 0x%04x from QP%u on VL%u (wanted GetResp 0x%04x%s)",
	      what, h->method, status, r.sqpn, r.vl, want, dr ? " with the D bit" : "");
}

/* Send p; no answer may come within MAD_QUIET_MS (the caller expect()s the drop, if any). */
static void mad_expect_silence(struct session *s, const char *what, struct pkt *p,
			       const struct pib_mad_hdr *req)
{
	uint8_t buf[PIB_LINK_MAX_PAYLOAD];
	struct resp r;

	send_pkt(s, p);
	check(!wait_mad(s, req, MAD_QUIET_MS, &r, buf), "%s: no answer", what);
}

/* A dropped packet the guest must count under some rx_drop_* reason (which one is the device's
 * to say: no expect line for a single counter). */
static void expect_any_drop(void)
{
	expect_drops++;
}

/* The positive control: a directed-route NodeInfo Get is answered, and names the HCA we are
 * cabled to. */
static void mad_good_smp(struct session *s, const char *what)
{
	uint8_t buf[PIB_LINK_MAX_PAYLOAD];
	struct pib_node_info ni;
	struct pib_smp smp;
	struct resp r;
	uint64_t guid;

	smp_init(&smp, true, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
	send_smp(s, &smp);
	if (!wait_mad(s, &smp.hdr, s->timeout_ms, &r, buf)) {
		check(false, "%s: NodeInfo Get: no answer in %d ms", what, s->timeout_ms);
		return;
	}
	memcpy(&smp, r.payload, sizeof(smp));
	memcpy(&ni, smp.data, sizeof(ni));
	guid = (uint64_t)ntohl(ni.node_guid_hi_be) << 32 | ntohl(ni.node_guid_lo_be);
	/* Back on the wire the hop pointer is 1 again (C14-13:1); our SMI would take it to 0. */
	check(ntohs(smp.hdr.status_be) == PIB_SMP_STATUS_DIRECTION &&
	      (ntohs(smp.hdr.class_spec_be) >> 8) == 1 && ni.node_type == PIB_NODE_TYPE_CA &&
	      ni.num_ports == 1 && guid == s->l.peer_node_guid,
	      "%s: NodeInfo Get: status 0x%04x, hop pointer %u, a CA with %u port(s), node GUID "
	      "0x%016" PRIx64 " (HELLO said 0x%016" PRIx64 ")", what, ntohs(smp.hdr.status_be),
	      ntohs(smp.hdr.class_spec_be) >> 8, ni.num_ports, guid, s->l.peer_node_guid);
}

static void cmd_mad(struct session *s)
{
	struct pib_port_info pi, before;
	struct pib_pma_mad gmp;
	struct pib_smp smp;
	struct pkt p;

	if (session_open(s)) {
		check(false, "the link trains and the port goes ACTIVE with us as its SM");
		return;
	}
	check(true, "the link trains; as its SM we took the port to ACTIVE");
	mad_good_smp(s, "before");
	if (port_info(s, false, PIB_MAD_METHOD_GET, &before))
		return;
	check(ntohs(before.lid_be) == s->t.lid, "LID-routed PortInfo Get: LID 0x%x (the target "
	      "says 0x%x)", ntohs(before.lid_be), s->t.lid);

	/* -- Answered with a status (IBTA 13.4.7) -- */
#define SMP_CASE(what, dr, method, attr, mod, spoil, want) do {			\
		smp_init(&smp, dr, method, attr, mod);				\
		spoil;								\
		p = mad_pkt(s, 0, dr, &smp, sizeof(smp));			\
		mad_expect_status(s, what, &p, want);				\
	} while (0)
	SMP_CASE("SMP class version 2", true, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0,
		 smp.hdr.class_version = 2, PIB_MAD_STATUS_BAD_VERSION);
	SMP_CASE("SMP method 0x10 (none)", true, 0x10, PIB_SMP_ATTR_NODE_INFO, 0, ,
		 PIB_MAD_STATUS_UNSUP_METHOD);
	SMP_CASE("SMP Get of attribute 0x00ff (none)", true, PIB_MAD_METHOD_GET, 0x00ff, 0, ,
		 PIB_MAD_STATUS_UNSUP_ATTR);
	SMP_CASE("SwitchInfo Get from a CA", false, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_SWITCH_INFO,
		 0, , PIB_MAD_STATUS_UNSUP_ATTR);
	SMP_CASE("P_KeyTable Get of block 2 (64 entries: blocks 0 and 1)", true,
		 PIB_MAD_METHOD_GET, PIB_SMP_ATTR_PKEY_TABLE, 2, , PIB_MAD_STATUS_INVALID_VALUE);
	SMP_CASE("GUIDInfo Get of block 1 (one GUID)", false, PIB_MAD_METHOD_GET,
		 PIB_SMP_ATTR_GUID_INFO, 1, , PIB_MAD_STATUS_INVALID_VALUE);
	pi = before;
	pi.phys_down &= 0x0f;
	pi.speed_state = (pi.speed_state & 0xf0) | PIB_PORT_INIT;	/* INIT cannot be set */
	SMP_CASE("PortInfo Set PortState INIT", true, PIB_MAD_METHOD_SET, PIB_SMP_ATTR_PORT_INFO,
		 0, memcpy(smp.data, &pi, sizeof(pi)), PIB_MAD_STATUS_INVALID_VALUE);
	pi.speed_state = (pi.speed_state & 0xf0) | 7;			/* no such state */
	SMP_CASE("PortInfo Set PortState 7", true, PIB_MAD_METHOD_SET, PIB_SMP_ATTR_PORT_INFO, 0,
		 memcpy(smp.data, &pi, sizeof(pi)), PIB_MAD_STATUS_INVALID_VALUE);
	pi.speed_state &= 0xf0;
	pi.phys_down = (pi.phys_down & 0x0f) | 7 << 4;		/* no such physical state */
	SMP_CASE("PortInfo Set PortPhysicalState 7", true, PIB_MAD_METHOD_SET,
		 PIB_SMP_ATTR_PORT_INFO, 0, memcpy(smp.data, &pi, sizeof(pi)),
		 PIB_MAD_STATUS_INVALID_VALUE);
	SMP_CASE("PortInfo Get of port 9 (one port)", true, PIB_MAD_METHOD_GET,
		 PIB_SMP_ATTR_PORT_INFO, 9, , PIB_MAD_STATUS_INVALID_VALUE);

#define GMP_CASE(what, method, attr, spoil, want) do {				\
		memset(&gmp, 0, sizeof(gmp));					\
		mad_hdr_init(&gmp.hdr, PIB_MGMT_CLASS_PERF, PIB_PMA_CLASS_VERSION,	\
			     method, attr, 0);					\
		spoil;								\
		p = mad_pkt(s, 1, false, &gmp, sizeof(gmp));			\
		mad_expect_status(s, what, &p, want);				\
	} while (0)
	GMP_CASE("PMA ClassPortInfo Get", PIB_MAD_METHOD_GET, PIB_PMA_ATTR_CLASS_PORT_INFO, ,
		 PIB_MAD_STATUS_OK);
	GMP_CASE("PMA PortCounters Get", PIB_MAD_METHOD_GET, PIB_PMA_ATTR_PORT_COUNTERS,
		 gmp.data[1] = 1, PIB_MAD_STATUS_OK);
	GMP_CASE("PMA class version 2", PIB_MAD_METHOD_GET, PIB_PMA_ATTR_PORT_COUNTERS,
		 gmp.hdr.class_version = 2, PIB_MAD_STATUS_BAD_VERSION);
	GMP_CASE("PMA Get of attribute 0x00ff (none)", PIB_MAD_METHOD_GET, 0x00ff, ,
		 PIB_MAD_STATUS_UNSUP_ATTR);
	GMP_CASE("PMA method 0x10 (none)", 0x10, PIB_PMA_ATTR_PORT_COUNTERS, ,
		 PIB_MAD_STATUS_UNSUP_METHOD);

	/* -- Discarded where the IBTA says so: directed routes that cannot be (C14-9) -- */
#define DR_SILENT(what, hop_ptr, hop_cnt) do {					\
		smp_init(&smp, true, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);	\
		smp.hdr.class_spec_be = htons((hop_ptr) << 8 | (hop_cnt));	\
		p = mad_pkt(s, 0, true, &smp, sizeof(smp));			\
		mad_expect_silence(s, what, &p, &smp.hdr);			\
	} while (0)
	DR_SILENT("DR SMP with hop pointer 5 of hop count 1", 5, 1);
	DR_SILENT("DR SMP with hop pointer 0 of hop count 1 (not advanced)", 0, 1);
	DR_SILENT("DR SMP with hop count 64 (at most 63)", 64, 64);
	DR_SILENT("DR SMP with hop count 255", 255, 255);

	/* ... and MADs the kernel's MAD layer refuses: another base version, an SMP on QP1, a
	 * response to nothing, a TrapRepress of no trap. */
	smp_init(&smp, true, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
	smp.hdr.base_version = 2;
	p = mad_pkt(s, 0, true, &smp, sizeof(smp));
	mad_expect_silence(s, "SMP base version 2", &p, &smp.hdr);
	smp_init(&smp, false, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
	p = mad_pkt(s, 1, false, &smp, sizeof(smp));
	mad_expect_silence(s, "an SMP (class 0x01) to QP1", &p, &smp.hdr);
	smp_init(&smp, true, PIB_MAD_METHOD_GET_RESP, PIB_SMP_ATTR_NODE_INFO, 0);
	p = mad_pkt(s, 0, true, &smp, sizeof(smp));
	mad_expect_silence(s, "an SMP GetResp nobody asked for", &p, &smp.hdr);
	smp_init(&smp, false, PIB_MAD_METHOD_TRAP_REPRESS, PIB_SMP_ATTR_NOTICE, 0);
	p = mad_pkt(s, 0, false, &smp, sizeof(smp));
	mad_expect_silence(s, "a TrapRepress of no trap", &p, &smp.hdr);

	/* -- Dropped by the device and counted -- */
	static const uint32_t short_lens[] = { 0, 23, 64, 255 };
	for (size_t i = 0; i < ARRAY_SIZE(short_lens); i++) {
		char what[64];

		smp_init(&smp, true, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
		p = mad_pkt(s, 0, true, &smp, short_lens[i]);
		snprintf(what, sizeof(what), "an SMP of %u bytes (a MAD is 256)", short_lens[i]);
		expect_any_drop();
		mad_expect_silence(s, what, &p, &smp.hdr);
	}
	{
		uint8_t big[PIB_MAD_SIZE + 64] = { 0 };

		smp_init(&smp, true, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
		memcpy(big, &smp, sizeof(smp));
		p = mad_pkt(s, 0, true, big, sizeof(big));
		expect_any_drop();
		mad_expect_silence(s, "an SMP of 320 bytes", &p, &smp.hdr);
		memset(&gmp, 0, sizeof(gmp));
		mad_hdr_init(&gmp.hdr, PIB_MGMT_CLASS_PERF, PIB_PMA_CLASS_VERSION,
			     PIB_MAD_METHOD_GET, PIB_PMA_ATTR_CLASS_PORT_INFO, 0);
		p = mad_pkt(s, 1, false, &gmp, 100);
		expect_any_drop();
		mad_expect_silence(s, "a GMP of 100 bytes to QP1", &p, &gmp.hdr);
	}
	smp_init(&smp, true, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
	p = mad_pkt(s, 0, true, &smp, sizeof(smp));
	p.vl = 0;
	expect(PIB_CNT_RX_DROP_VL15, 1);
	mad_expect_silence(s, "an SMP to QP0 on VL0", &p, &smp.hdr);
	memset(&gmp, 0, sizeof(gmp));
	mad_hdr_init(&gmp.hdr, PIB_MGMT_CLASS_PERF, PIB_PMA_CLASS_VERSION, PIB_MAD_METHOD_GET,
		     PIB_PMA_ATTR_CLASS_PORT_INFO, 0);
	p = mad_pkt(s, 1, false, &gmp, sizeof(gmp));
	p.vl = 15;
	expect(PIB_CNT_RX_DROP_VL15, 1);
	mad_expect_silence(s, "a GMP to QP1 on VL15", &p, &gmp.hdr);
	mad_hdr_init(&gmp.hdr, PIB_MGMT_CLASS_PERF, PIB_PMA_CLASS_VERSION, PIB_MAD_METHOD_GET,
		     PIB_PMA_ATTR_CLASS_PORT_INFO, 0);
	p = mad_pkt(s, 1, false, &gmp, sizeof(gmp));
	p.qkey = 0x12345678;
	expect(PIB_CNT_RX_DROP_QKEY, 1);
	mad_expect_silence(s, "a GMP to QP1 with Q_Key 0x12345678", &p, &gmp.hdr);

	/* A P_Key not in the table: dropped, counted, and trap 257 to us, its SM. */
	unsigned traps257 = traps_seen[PIB_TRAP_BAD_PKEY];
	mad_hdr_init(&gmp.hdr, PIB_MGMT_CLASS_PERF, PIB_PMA_CLASS_VERSION, PIB_MAD_METHOD_GET,
		     PIB_PMA_ATTR_CLASS_PORT_INFO, 0);
	p = mad_pkt(s, 1, false, &gmp, sizeof(gmp));
	p.pkey = 0x7777;
	expect(PIB_CNT_RX_DROP_PKEY, 1);
	mad_expect_silence(s, "a GMP to QP1 with P_Key 0x7777 (not in the table)", &p, &gmp.hdr);
	/* The SMA resends an unrepressed trap after the subnet timeout; ours are repressed
	 * as they come, so one is enough, and by now it had time to come. */
	check(traps_seen[PIB_TRAP_BAD_PKEY] > traps257, "trap 257 (bad P_Key) came to the SM");

	/* -- And the port is as it was, and answers -- */
	mad_good_smp(s, "after");
	if (!port_info(s, true, PIB_MAD_METHOD_GET, &pi))
		check((pi.speed_state & 0xf) == PIB_PORT_ACTIVE && pi.lid_be == before.lid_be &&
		      pi.mkeyprot_lmc == before.mkeyprot_lmc && pi.sm_lid_be == before.sm_lid_be,
		      "PortInfo after: state %u (ACTIVE is %u), LID 0x%x, SM LID 0x%x, LMC %u: "
		      "as before", pi.speed_state & 0xf, PIB_PORT_ACTIVE, ntohs(pi.lid_be),
		      ntohs(pi.sm_lid_be), pi.mkeyprot_lmc & 7);
	sync_probe(s, "sync probe after the MADs");
	session_close(s);
#undef SMP_CASE
#undef GMP_CASE
#undef DR_SILENT
}

/* =============================================================================================
 * cm: forged connection-manager MADs (IBTA 12) to the target's QP1.
 *
 * The device does not parse CM messages: to it they are GMPs for QP1, which ib_mad hands to
 * the guest's ib_cm.  What is checked here is that the device delivers them whole and sends the
 * answers ib_cm gives, and that ib_cm keeps no state for a connection that never was:
 *   - a REQ for a service nobody listens on gets REJ "invalid service ID" (reason 8), and the
 *     same REQ again gets the same REJ (a REQ that left its remote ID behind would be taken for
 *     a duplicate and ignored);
 *   - a REP and a DREQ for a connection ib_cm does not know: the REP is dropped silently, the
 *     DREQ is answered with a DREP (12.9.6: a DREQ for no connection is answered all the same).
 * The e2e test adds that no QP appeared in the device and that ib_cm counted each message.
 */

/* CM attribute IDs (IBTA 12.6, Table 97) */
#define CM_ATTR_REQ  0x0010
#define CM_ATTR_REJ  0x0012
#define CM_ATTR_REP  0x0013
#define CM_ATTR_DREQ 0x0015
#define CM_ATTR_DREP 0x0016
#define CM_CLASS_VERSION 2
#define CM_REJ_INVALID_SERVICE_ID 8

/* Byte offsets in a CM MAD's 232 bytes of data (IBTA 12.6.5 REQ, 12.6.7 REJ, 12.6.8 REP,
 * 12.6.10 DREQ, 12.6.11 DREP): just the fields these checks write or read. */
#define CM_LOCAL_COMM_ID   0	/* every message */
#define CM_REMOTE_COMM_ID  4	/* every message but REQ */
#define CM_REQ_SERVICE_ID  8
#define CM_REQ_CA_GUID    16
#define CM_REQ_QKEY       28
#define CM_REQ_QPN        32	/* QPN << 8 | responder resources */
#define CM_REQ_EECN       36	/* EECN << 8 | initiator depth */
#define CM_REQ_TIMEOUTS   40	/* remote EECN << 8 | CM response timeout:5, transport:2, flow:1 */
#define CM_REQ_PSN        44	/* starting PSN << 8 | local CM response timeout:5, retry:3 */
#define CM_REQ_PKEY       48
#define CM_REQ_MTU        50	/* path MTU:4, RDC:1, RNR retry:3 */
#define CM_REQ_CM_RETRIES 51	/* max CM retries:4, SRQ:1, extended transport:3 */
#define CM_REQ_LID        52	/* primary path: local LID, remote LID, then the GIDs */
#define CM_REJ_MSG        8	/* MsgRejected in bits 7:6: 0 REQ, 1 REP, 2 other */
#define CM_REJ_REASON     10

struct cm_mad {
	struct pib_mad_hdr hdr;
	uint8_t data[PIB_MAD_SIZE - sizeof(struct pib_mad_hdr)];
};

static void put32(uint8_t *p, uint32_t v) { v = htonl(v); memcpy(p, &v, 4); }
static void put16(uint8_t *p, uint16_t v) { v = htons(v); memcpy(p, &v, 2); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return ntohl(v); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return ntohs(v); }

/* A REQ for an RC connection from our QP 0x4242 to service_id, with comm ID id. */
static void cm_req_init(struct cm_mad *m, const struct session *s, uint32_t id,
			uint64_t service_id)
{
	memset(m, 0, sizeof(*m));
	mad_hdr_init(&m->hdr, CM_CLASS, CM_CLASS_VERSION, PIB_MAD_METHOD_SEND, CM_ATTR_REQ, 0);
	put32(m->data + CM_LOCAL_COMM_ID, id);
	put32(m->data + CM_REQ_SERVICE_ID, service_id >> 32);
	put32(m->data + CM_REQ_SERVICE_ID + 4, (uint32_t)service_id);
	put32(m->data + CM_REQ_CA_GUID, HOSTILE_NODE_GUID >> 32);
	put32(m->data + CM_REQ_CA_GUID + 4, (uint32_t)HOSTILE_NODE_GUID);
	put32(m->data + CM_REQ_QPN, 0x4242u << 8 | 1);
	put32(m->data + CM_REQ_EECN, 1);
	put32(m->data + CM_REQ_TIMEOUTS, 18u << 3);		/* RC, CM timeout 2^18 * 4 us */
	put32(m->data + CM_REQ_PSN, 0x123456u << 8 | 18u << 3 | 7);
	put16(m->data + CM_REQ_PKEY, PIB_DEFAULT_PKEY);
	m->data[CM_REQ_MTU] = 4 << 4 | 7;			/* 2048 bytes, RNR retry 7 */
	m->data[CM_REQ_CM_RETRIES] = 2 << 4;
	put16(m->data + CM_REQ_LID, s->t.peer_lid);
	put16(m->data + CM_REQ_LID + 2, s->t.lid);
}

/* Send m to the target's QP1 and wait for the CM message that answers it (same TID). */
static bool cm_send_wait(struct session *s, const char *what, struct cm_mad *m, int ms,
			 struct cm_mad *ans)
{
	uint8_t buf[PIB_LINK_MAX_PAYLOAD];
	struct pkt p = mad_pkt(s, 1, false, m, sizeof(*m));
	struct resp r;

	send_pkt(s, &p);
	if (!wait_mad(s, &m->hdr, ms, &r, buf))
		return false;
	memcpy(ans, r.payload, sizeof(*ans));
	info("%s: answered with CM attribute 0x%04x, method 0x%02x, from QP%u", what,
	     ntohs(ans->hdr.attr_id_be), ans->hdr.method, r.sqpn);
	return true;
}

/* A REQ nobody listens for: REJ, invalid service ID, naming our comm ID. */
static void cm_req_rejected(struct session *s, const char *what, uint32_t id)
{
	struct cm_mad m, ans;

	cm_req_init(&m, s, id, 0x0106000000c0ffeeull);	/* an RDMA IP CM service ID, port 0xffee */
	if (!cm_send_wait(s, what, &m, s->timeout_ms, &ans)) {
		check(false, "%s: no REJ in %d ms", what, s->timeout_ms);
		return;
	}
	check(ans.hdr.mgmt_class == CM_CLASS && ans.hdr.method == PIB_MAD_METHOD_SEND &&
	      ntohs(ans.hdr.attr_id_be) == CM_ATTR_REJ &&
	      get32(ans.data + CM_REMOTE_COMM_ID) == id && ans.data[CM_REJ_MSG] >> 6 == 0 &&
	      get16(ans.data + CM_REJ_REASON) == CM_REJ_INVALID_SERVICE_ID,
	      "%s: REJ (attribute 0x%04x, method 0x%02x) of the REQ (MsgRejected %u) for comm ID "
	      "0x%x (ours 0x%x), reason %u (invalid service ID is %u)", what,
	      ntohs(ans.hdr.attr_id_be), ans.hdr.method, ans.data[CM_REJ_MSG] >> 6,
	      get32(ans.data + CM_REMOTE_COMM_ID), id, get16(ans.data + CM_REJ_REASON),
	      CM_REJ_INVALID_SERVICE_ID);
	expect_port_counter("cm_rx_msgs/req", 1);
	expect_port_counter("cm_tx_msgs/rej", 1);
}

static void cmd_cm(struct session *s)
{
	struct cm_mad m, ans;

	if (session_open(s)) {
		check(false, "the link trains and the port goes ACTIVE with us as its SM");
		return;
	}
	check(true, "the link trains; as its SM we took the port to ACTIVE");

	cm_req_rejected(s, "REQ for service 0x0106000000c0ffee", 0x0c0ffee1);
	cm_req_rejected(s, "the same REQ again (no remote ID left behind)", 0x0c0ffee1);

	memset(&m, 0, sizeof(m));
	mad_hdr_init(&m.hdr, CM_CLASS, CM_CLASS_VERSION, PIB_MAD_METHOD_SEND, CM_ATTR_REP, 0);
	put32(m.data + CM_LOCAL_COMM_ID, 0x0c0ffee2);
	put32(m.data + CM_REMOTE_COMM_ID, 0x5eed0001);	/* no cm_id of the guest's */
	check(!cm_send_wait(s, "REP for no REQ", &m, MAD_QUIET_MS, &ans),
	      "REP for a REQ the guest never sent: no answer");
	expect_port_counter("cm_rx_msgs/rep", 1);

	memset(&m, 0, sizeof(m));
	mad_hdr_init(&m.hdr, CM_CLASS, CM_CLASS_VERSION, PIB_MAD_METHOD_SEND, CM_ATTR_DREQ, 0);
	put32(m.data + CM_LOCAL_COMM_ID, 0x0c0ffee3);
	put32(m.data + CM_REMOTE_COMM_ID, 0x5eed0002);
	if (!cm_send_wait(s, "DREQ for no connection", &m, s->timeout_ms, &ans))
		check(false, "DREQ for no connection: no DREP in %d ms", s->timeout_ms);
	else
		check(ntohs(ans.hdr.attr_id_be) == CM_ATTR_DREP &&
		      get32(ans.data + CM_LOCAL_COMM_ID) == 0x5eed0002 &&
		      get32(ans.data + CM_REMOTE_COMM_ID) == 0x0c0ffee3,
		      "DREQ for no connection: DREP (attribute 0x%04x) with comm IDs 0x%x/0x%x "
		      "(wanted 0x5eed0002/0x0c0ffee3)", ntohs(ans.hdr.attr_id_be),
		      get32(ans.data + CM_LOCAL_COMM_ID), get32(ans.data + CM_REMOTE_COMM_ID));
	expect_port_counter("cm_rx_msgs/dreq", 1);
	expect_port_counter("cm_rx_duplicates/dreq", 1);

	mad_good_smp(s, "after");
	sync_probe(s, "sync probe after the CM messages");
	session_close(s);
}

static void cmd_hold(struct session *s, int hold_s)
{
	int64_t end = hold_s > 0 ? now_ms() + hold_s * 1000ll : INT64_MAX;
	uint8_t buf[PIB_LINK_MAX_PAYLOAD], type;
	size_t n;

	if (session_open(s)) {
		check(false, "the link trains");
		return;
	}
	check(true, "the link trains; holding it");
	fflush(stdout);
	while (!stop && now_ms() < end && !s->l.eof)
		recv_frame(&s->l, &type, buf, &n, 200);
	info("%s after %u frame(s) from the device", s->l.eof ? "the device hung up" : "released",
	     s->l.rx_frames);
	link_close(&s->l);
}

/* =============================================================================================
 * relay: a transparent cable with a cutter
 *
 * Listens on one path (where the client HCA dials) and dials the other (the server HCA) for
 * each client.  It parses the frame headers going by only to count PACKET frames.  SIGUSR1
 * arms the cutter: after --cut-after more PACKET frames (either way) it closes both sides, as
 * if the cable were pulled; it then waits --down-ms before it accepts the client again (the
 * client's redial comes on its own schedule: QEMU's reconnect= seconds).
 */

struct flow {
	uint8_t hdr[PIB_LINK_HDR_LEN];
	unsigned got;			/* header bytes collected */
	uint32_t left;			/* payload bytes still to come */
	bool lost;			/* not a frame stream: stop counting */
	uint64_t frames, packets;
};

static void flow_feed(struct flow *f, const uint8_t *b, size_t n, uint64_t *packets)
{
	while (n && !f->lost) {
		if (f->left) {
			size_t k = MIN(n, f->left);

			f->left -= k;
			b += k;
			n -= k;
			continue;
		}
		f->hdr[f->got++] = *b++;
		n--;
		if (f->got < PIB_LINK_HDR_LEN)
			continue;
		f->got = 0;
		if (f->hdr[0] != PIB_LINK_MAGIC) {
			f->lost = true;
			break;
		}
		f->left = (uint32_t)f->hdr[2] << 8 | f->hdr[3];
		f->frames++;
		if (f->hdr[1] == PIB_FRAME_PACKET) {
			f->packets++;
			(*packets)++;
		}
	}
}

static double rel_s(int64_t t0)
{
	return (now_ms() - t0) / 1000.0;
}

static int relay_listen(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (strlen(path) >= sizeof(sa.sun_path))
		die("socket path too long: %s", path);
	strcpy(sa.sun_path, path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4))
		die("listen on %s: %s", path, strerror(errno));
	return fd;
}

/* Forward what fd a has to fd b: false when either side is gone. */
static bool relay_pump(int a, int b, struct flow *f, uint64_t *packets)
{
	uint8_t buf[65536];
	ssize_t n = recv(a, buf, sizeof(buf), MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0)
		return false;
	flow_feed(f, buf, n, packets);
	return !send_all(b, buf, n);
}

static int cmd_relay(const char *listen_path, const char *connect_path, unsigned cut_after,
		     int down_ms)
{
	struct link server = { .path = connect_path, .fd = -1 };
	int lfd = relay_listen(listen_path);
	int64_t t0 = now_ms(), cut_at = 0;
	unsigned cuts = 0;
	struct stat st;
	ino_t mine;

	if (stat(listen_path, &st))
		die("stat %s: %s", listen_path, strerror(errno));
	mine = st.st_ino;
	fprintf(stderr, "relay: +%.3f s listening on %s, server %s\n", rel_s(t0), listen_path,
		connect_path);
	while (!stop) {
		struct pollfd pfd = { .fd = lfd, .events = POLLIN };
		struct flow up = { 0 }, down = { 0 };	/* client -> server, server -> client */
		uint64_t packets = 0, armed_at = 0;
		bool armed = false, cut = false;
		int cfd;

		if (poll(&pfd, 1, 500) <= 0)
			continue;
		cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0)
			continue;
		if (link_dial(&server, 5000)) {
			fprintf(stderr, "relay: +%.3f s client came, but the server at %s does not "
				"answer (%s)\n", rel_s(t0), connect_path, strerror(errno));
			close(cfd);
			continue;
		}
		fprintf(stderr, "relay: +%.3f s connected%s\n", rel_s(t0),
			cut_at ? "" : " (first connection)");
		if (cut_at)
			fprintf(stderr, "relay: +%.3f s restored %.3f s after the cut\n", rel_s(t0),
				(now_ms() - cut_at) / 1000.0);
		while (!stop) {
			struct pollfd p[2] = { { .fd = cfd, .events = POLLIN },
					       { .fd = server.fd, .events = POLLIN } };

			if (arm && !armed) {
				arm = 0;
				armed = true;
				armed_at = packets;
				fprintf(stderr, "relay: +%.3f s armed: cut after %u more packets\n",
					rel_s(t0), cut_after);
			}
			if (armed && packets - armed_at >= cut_after) {
				cut = true;
				break;
			}
			if (poll(p, 2, 200) <= 0)
				continue;
			if ((p[0].revents && !relay_pump(cfd, server.fd, &up, &packets)) ||
			    (p[1].revents && !relay_pump(server.fd, cfd, &down, &packets)))
				break;
		}
		close(cfd);
		link_close(&server);
		fprintf(stderr, "relay: +%.3f s %s: %" PRIu64 " frames (%" PRIu64 " packets) client->"
			"server, %" PRIu64 " (%" PRIu64 ") server->client on this connection\n",
			rel_s(t0), cut ? "CUT both sides" : stop ? "stopping" : "a side hung up",
			up.frames, up.packets, down.frames, down.packets);
		if (cut) {
			cuts++;
			cut_at = now_ms();
			sleep_ms(down_ms);
		}
	}
	/* Leave the path alone if someone has put another socket there meanwhile. */
	if (!stat(listen_path, &st) && st.st_ino == mine)
		unlink(listen_path);
	fprintf(stderr, "relay: +%.3f s done, %u cut(s)\n", rel_s(t0), cuts);
	return 0;
}

/* =============================================================================================
 * main
 */

static void usage(FILE *f)
{
	fprintf(f,
"usage: pib-hostile [options] COMMAND\n"
"       pib-hostile relay --listen PATH --connect PATH [--cut-after N] [--down-ms MS]\n"
"\n"
"A hostile peer on a pib link: dials the link's unix socket (a pib-hca chardev in server\n"
"mode), trains the link, then:\n"
"  hold         keeps the link up, answering nothing, until SIGTERM or --hold seconds\n"
"  garbage      random bytes: the device must drop the stream; the link must train again\n"
"  bad-frames   bad frame type, oversized lengths, short HELLO, wrong protocol version\n"
"  truncated    IB packets cut short or with a wrong LRH length; a frame cut by EOF\n"
"  zero-length  PACKET frames with no payload, then a burst of 65536 in one write\n"
"  bad-headers  wrong LVer/LNH/GRH/DLID/opcode/TVer/P_Key/QPN/transport/SLID; responses\n"
"               to nothing outstanding\n"
"  psn          requests ahead of and behind the PSN window\n"
"  read         valid RDMA READs of the target MR (positive control)\n"
"  forged       RDMA WRITE/READ with forged rkeys and out-of-range addresses\n"
"  mad          malformed, truncated and misaddressed MADs to QP0 and QP1\n"
"  cm           forged CM messages (REQ, REP, DREQ) to QP1: ib_cm rejects them\n"
"  all          garbage ... cm, in that order, on fresh connections\n"
"Commands after garbage and bad-frames need --target: the info file of pib-mr-target,\n"
"whose QPs they use as 0 control, 1 psn, 2 read, 3.. forged (one each; 13 in all).\n"
"With it, each connection also makes us the subnet manager of the target's port: once the\n"
"link trains, directed-route PortInfo Sets take the port from INIT to ACTIVE (its LID is\n"
"the one an SM gave it before), and its traps, which then come to us, are repressed.\n"
"\n"
"Output: PASS/FAIL/info lines; `expect COUNTER N` (what the guest's hw_counter COUNTER\n"
"should have grown by), `expect_drops N` (all rx_drop_* together), `expect_qp I STATE`,\n"
"`expect_event TYPE N`.  Exit 0 if every check passed, 1 if not, 2 on a usage error.\n"
"\n"
"relay: passes a link through; SIGUSR1 arms a cut of both sides after N more packets\n"
"(default 0), then waits MS milliseconds (default 0) before it accepts the client again.\n"
"\n"
"options:\n"
"  -s, --socket PATH    the link socket to dial\n"
"  -l, --listen PATH    relay: where the client HCA dials\n"
"  -c, --connect PATH   relay: where the server HCA listens\n"
"      --cut-after N    relay: packets between SIGUSR1 and the cut\n"
"      --down-ms MS     relay: how long the cable stays cut\n"
"  -T, --target FILE    what pib-mr-target wrote (-o)\n"
"  -t, --timeout MS     wait this long for any one answer (default 10000)\n"
"      --hold S         hold: release after S seconds (default: until SIGTERM)\n"
"      --seed N         random seed for garbage (default: the time)\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "target", required_argument, NULL, 'T' },
		{ "timeout", required_argument, NULL, 't' },
		{ "hold", required_argument, NULL, 'H' },
		{ "seed", required_argument, NULL, 'S' },
		{ "listen", required_argument, NULL, 'l' },
		{ "connect", required_argument, NULL, 'c' },
		{ "cut-after", required_argument, NULL, 'C' },
		{ "down-ms", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static struct session s = { .l = { .fd = -1 }, .timeout_ms = 10000 };
	const char *target = NULL, *listen_path = NULL, *connect_path = NULL;
	unsigned seed = time(NULL), cut_after = 0;
	int hold_s = 0, down_ms = 0, c;
	struct sigaction sa = { .sa_handler = on_stop };	/* no SA_RESTART: poll returns */

	while ((c = getopt_long(argc, argv, "s:T:t:l:c:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's': s.l.path = optarg; break;
		case 'T': target = optarg; break;
		case 't': s.timeout_ms = atoi(optarg); break;
		case 'H': hold_s = atoi(optarg); break;
		case 'S': seed = strtoul(optarg, NULL, 0); break;
		case 'l': listen_path = optarg; break;
		case 'c': connect_path = optarg; break;
		case 'C': cut_after = strtoul(optarg, NULL, 0); break;
		case 'D': down_ms = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1 || s.timeout_ms <= 0) {
		usage(stderr);
		return 2;
	}
	cmd_name = argv[optind];
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_arm;
	sigaction(SIGUSR1, &sa, NULL);

	if (!strcmp(cmd_name, "relay")) {
		if (!listen_path || !connect_path)
			die("relay needs --listen and --connect");
		return cmd_relay(listen_path, connect_path, cut_after, down_ms);
	}
	if (!s.l.path)
		die("no --socket");
	srandom(seed);

	static const struct {
		const char *name;
		void (*fn)(struct session *);
		bool needs_target;
	} cmds[] = {
		{ "garbage", cmd_garbage, false },
		{ "bad-frames", cmd_bad_frames, false },
		{ "truncated", cmd_truncated, true },
		{ "zero-length", cmd_zero_length, true },
		{ "bad-headers", cmd_bad_headers, true },
		{ "psn", cmd_psn, true },
		{ "read", cmd_read, true },
		{ "forged", cmd_forged, true },
		{ "mad", cmd_mad, true },
		{ "cm", cmd_cm, true },
	};
	bool all = !strcmp(cmd_name, "all"), found = all;

	if (target)
		target_load(&s.t, target);
	if (!strcmp(cmd_name, "hold")) {
		cmd_hold(&s, hold_s);
		found = true;
	}
	for (size_t i = 0; i < ARRAY_SIZE(cmds); i++) {
		if (!all && strcmp(cmd_name, cmds[i].name))
			continue;
		found = true;
		if (cmds[i].needs_target && !target)
			die("%s needs --target", cmds[i].name);
		if (all)
			cmd_name = cmds[i].name;
		if (!strcmp(cmds[i].name, "garbage"))
			info("random seed %u", seed);
		cmds[i].fn(&s);
	}
	if (!found) {
		fprintf(stderr, "pib-hostile: no command '%s'\n\n", cmd_name);
		usage(stderr);
		return 2;
	}
	if (all)
		cmd_name = "all";
	print_expectations();
	return report_summary(cmd_name);
}
