// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pib-hostile: a hostile peer for a pib link, run on the host.
 *
 * A pib port's cable is a unix stream socket (include/pib_link.h).  This program takes the
 * place of the HCA at the other end: it dials the socket, trains the link with a HELLO of its
 * own, so that the guest's port goes ACTIVE, and then sends what no well-behaved HCA would:
 * garbage, broken frames, malformed IB headers, requests out of the PSN window, and RDMA with
 * forged keys and addresses aimed at memory that `pib-mr-target` (tests/guest/) exposes, and
 * link doorbells (include/pib_link.h) that are not eventfds or are rung against the rules, and
 * credits (link flow control) in a peer's hands: bad FLOW frames, none granted, lies.
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
 *     expect_grew xmit_wait_us         (a counter of time: it must have grown, by any amount)
 *     expect_qp 3 ERR                  (the state pib-mr-target's QP 3 should end in)
 *     expect_event QP_ACCESS_ERR 9     (async events pib-mr-target should have seen)
 *
 * It also relays a link (`relay`): two HCAs joined through it see a transparent cable, until
 * it is told (SIGUSR1) to cut both sides, which tests/e2e/41-link-fault.sh uses for a short
 * link drop under traffic.
 *
 * Every header comes from include/pib_link.h and include/pib_hw.h; the program is the only
 * thing on the host that speaks the link protocol besides the device model itself.
 *
 * This file holds the output, the expectations for the guest, hold and main; hostile.h lists
 * the other files (the link, packets, the session, the attacks, relay) and what they share.
 */
#define _GNU_SOURCE
#define PIB_REPORT_COUNTERS    /* the PASS/FAIL counters live here (tests/common/pib_report.h) */
#include "hostile.h"

/* =============================================================================================
 * Output
 */

/* The command running now: every check line carries its name (check() and info(), hostile.h). */
const char *cmd_name = "?";

void __attribute__((format(printf, 1, 2), noreturn)) die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "pib-hostile: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(int ms)
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
const char *const counter_names[PIB_CNT_MAX] = {
	PIB_COUNTERS(COUNTER_NAME)
};
#undef COUNTER_NAME

bool expect_set[PIB_CNT_MAX];
uint64_t expect_n[PIB_CNT_MAX];
int expect_drops;		/* packets the guest should drop, all reasons together */

/* The guest should count n more of c (n may be 0: "this must not move"). */
void expect(enum pib_counter c, unsigned n)
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

void expect_port_counter(const char *name, unsigned n)
{
	for (int i = 0; i < n_named; i++)
		if (!strcmp(expect_named[i].name, name)) {
			expect_named[i].n += n;
			return;
		}
	if (n_named < MAX_NAMED)
		expect_named[n_named++] = (typeof(expect_named[0])){ name, n };
}

/*
 * Counters that count time, not events (xmit_wait_us: how long a packet waited for credit):
 * no exact figure can be expected, only that the phase made them grow.
 */
static bool expect_grew_set[PIB_CNT_MAX];

void expect_grew(enum pib_counter c)
{
	expect_grew_set[c] = true;
}

void print_expectations(void)
{
	for (int c = 0; c < PIB_CNT_MAX; c++)
		if (expect_set[c])
			printf("expect %s %" PRIu64 "\n", counter_names[c], expect_n[c]);
	for (int c = 0; c < PIB_CNT_MAX; c++)
		if (expect_grew_set[c])
			printf("expect_grew %s\n", counter_names[c]);
	for (int i = 0; i < n_named; i++)
		printf("expect %s %u\n", expect_named[i].name, expect_named[i].n);
	printf("expect_drops %d\n", expect_drops);
}

/* Train and keep the link up (answering nothing) until SIGINT/SIGTERM or --hold seconds. */
volatile sig_atomic_t stop, arm;

void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

void on_arm(int sig)
{
	(void)sig;
	arm = 1;
}

void cmd_hold(struct session *s, int hold_s)
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
"  doorbell     our HELLO offers a pipe, then an eventfd; the device's doorbell rung wrong:\n"
"               a START never ENDed, counts that wrap\n"
"  mad          malformed, truncated and misaddressed MADs to QP0 and QP1\n"
"  cm           forged CM messages (REQ, REP, DREQ) to QP1: ib_cm rejects them\n"
"  credits      our HELLO offers credits, and asks for them: FLOW frames of bad lengths;\n"
"               READs while we grant nothing, then granted; lying FLOW frames; three\n"
"               windows' worth of packets\n"
"  all          garbage ... credits, in that order, on fresh connections\n"
"Commands after garbage and bad-frames need --target: the info file of pib-mr-target,\n"
"whose QPs they use as 0 control, 1 psn, 2 read, 3.. forged (one each), 13 credits\n"
"(14 in all: pib-mr-target -n 14).\n"
"With it, each connection also makes us the subnet manager of the target's port: once the\n"
"link trains, directed-route PortInfo Sets take the port from INIT to ACTIVE (its LID is\n"
"the one an SM gave it before), and its traps, which then come to us, are repressed.\n"
"\n"
"Output: PASS/FAIL/info lines; `expect COUNTER N` (what the guest's hw_counter COUNTER\n"
"should have grown by), `expect_grew COUNTER` (grown, by any amount: a counter of time),\n"
"`expect_drops N` (all rx_drop_* together), `expect_qp I STATE`, `expect_event TYPE N`.\n"
"Exit 0 if every check passed, 1 if not, 2 on a usage error.\n"
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
		{ "doorbell", cmd_doorbell, true },
		{ "mad", cmd_mad, true },
		{ "cm", cmd_cm, true },
		{ "credits", cmd_credits, true },
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
