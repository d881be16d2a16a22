// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pib-hostile: the attacks on the link and the transport
 * (the program is described in pib_hostile.c; what the files share is in hostile.h)
 */
#define _GNU_SOURCE
#include "hostile.h"

/* =============================================================================================
 * The attacks
 */

/* Random bytes: the first header is garbage, so the device must drop the stream; then the
 * link must train again when we dial again. */
void cmd_garbage(struct session *s)
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
void cmd_bad_frames(struct session *s)
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
		{ "HELLO shorter than PIB_LINK_HELLO_MIN_LEN", PIB_FRAME_HELLO, 8, 8 },
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
void cmd_truncated(struct session *s)
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
void cmd_zero_length(struct session *s)
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
void cmd_bad_headers(struct session *s)
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
void cmd_psn(struct session *s)
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

/* A valid RDMA READ of len bytes at MR offset off, to target QP i with PSN psn: sent now;
 * returns the number of response packets it asks for (their PSNs are psn onwards). */
uint32_t read_send(struct session *s, int i, uint32_t psn, uint64_t off, uint32_t len)
{
	struct pkt p = req_to(s, i, PIB_OP_RC_RDMA_READ_REQUEST, psn);

	p.reth = true;
	p.va = s->t.mr_addr + off;
	p.rkey = s->t.mr_rkey;
	p.dmalen = len;
	send_pkt(s, &p);
	return (len + s->t.mtu - 1) / s->t.mtu;
}

/*
 * The responses to that READ: FIRST, MIDDLE..., LAST (or ONLY) with consecutive PSNs, and the
 * MR's pattern in them.  One check line "what: ..."; true if it passed.
 */
bool read_expect(struct session *s, int i, uint32_t psn, uint64_t off, uint32_t len,
		 const char *what)
{
	uint32_t npkts = (len + s->t.mtu - 1) / s->t.mtu;
	uint8_t buf[PIB_LINK_MAX_PAYLOAD];
	uint32_t got = 0, bad = 0, first_bad = 0;
	bool ok = true;

	for (uint32_t j = 0; j < npkts && ok; j++) {
		struct resp r;
		uint8_t want = npkts == 1 ? PIB_OP_RC_RDMA_READ_RESP_ONLY :
			       j == 0 ? PIB_OP_RC_RDMA_READ_RESP_FIRST :
			       j == npkts - 1 ? PIB_OP_RC_RDMA_READ_RESP_LAST :
			       PIB_OP_RC_RDMA_READ_RESP_MIDDLE;

		if (!wait_resp(s, i, &r, buf) || r.opcode != want || r.psn != psn_add(psn, j)) {
			ok = false;
			break;
		}
		for (uint32_t b = 0; b < r.paylen; b++)
			if (r.payload[b] != pattern_byte(off + got + b) && !bad++)
				first_bad = got + b;
		got += r.paylen;
	}
	check(ok && got == len && !bad,
	      "%s: READ of %u bytes at MR offset %" PRIu64 ": %u response(s), the pattern%s",
	      what, len, off, npkts,
	      !ok ? " (missing or out-of-order responses)" :
	      got != len ? " (wrong length)" : bad ? " (wrong bytes)" : "");
	if (bad)
		info("%u wrong bytes, the first at offset %u", bad, first_bad);
	return ok && got == len && !bad;
}

/* Valid READs: the positive control that the target's keys and addresses are the ones the
 * forged requests tamper with, and that what comes back is the pattern. */
void cmd_read(struct session *s)
{
	const struct {
		uint64_t off;
		uint32_t len;
	} reads[] = {
		{ 128, 256 },
		{ 1, 2 * 4096 + 100 },		/* several responses at any MTU up to 4096 */
	};
	uint32_t psn = s->t.psn;

	if (session_open(s)) {
		check(false, "the link trains");
		return;
	}
	for (size_t k = 0; k < ARRAY_SIZE(reads); k++) {
		if (reads[k].off + reads[k].len > s->t.mr_len)
			continue;
		read_send(s, QP_READ, psn, reads[k].off, reads[k].len);
		read_expect(s, QP_READ, psn, reads[k].off, reads[k].len, "valid");
		psn = psn_add(psn, (reads[k].len + s->t.mtu - 1) / s->t.mtu);
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
void cmd_forged(struct session *s)
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

/* =============================================================================================
 * doorbell: the link's doorbell (include/pib_link.h, "Doorbell") in a peer's hands
 */

static bool is_eventfd(int fd)
{
	char path[64], target[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = 0;
	return !strcmp(target, "anon_inode:[eventfd]");
}

/*
 * Ring the device's eventfd and wait until it has read the count (the counter is back to 0):
 * the ring has been handled, or is being handled right now.  False if the write failed or the
 * device did not read within the timeout.
 */
static bool db_ring(struct session *s, uint64_t ring)
{
	int64_t deadline = now_ms() + s->timeout_ms;
	struct pollfd pfd = { .fd = s->l.passed_fd, .events = POLLIN };

	if (write(s->l.passed_fd, &ring, sizeof(ring)) != sizeof(ring)) {
		info("ring 0x%" PRIx64 ": %s", ring, strerror(errno));
		return false;
	}
	while (poll(&pfd, 1, 0) == 1 && now_ms() < deadline)
		sleep_ms(1);
	return !(pfd.revents & POLLIN);
}

/*
 * Our HELLO first offers a pipe as its doorbell: refused, and the link works as one without.
 * Then it offers an eventfd, and we ring the device's wrong: a START never ENDed (the device
 * must stop polling its socket, yet read it whenever rung), STARTs and ENDs even again (it
 * polls again), and the largest count an eventfd takes (its two halves wrap).  Every request
 * the device reads is answered and nothing is dropped.  When it rings ours, it rings by the
 * rules: each START has its END.
 */
void cmd_doorbell(struct session *s)
{
	uint8_t buf[PIB_LINK_MAX_PAYLOAD];
	struct resp r;
	int pipefd[2], efd, saved;
	uint32_t psn;
	uint64_t count;
	bool early;

	if (pipe2(pipefd, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	s->l.hello_flags = PIB_HELLO_F_DOORBELL;
	s->l.offer = true;
	s->l.offer_fd = pipefd[0];
	if (session_open(s)) {
		check(false, "offering a pipe as our doorbell: the link trains");
		return;
	}
	check((s->l.peer_flags & PIB_HELLO_F_DOORBELL) && s->l.passed_fd >= 0 &&
	      is_eventfd(s->l.passed_fd), "the device's HELLO offers an eventfd (flags 0x%x)",
	      s->l.peer_flags);
	sync_probe(s, "our HELLO offered a pipe as its doorbell: refused, the link works");
	session_close(s);
	close(pipefd[0]);
	close(pipefd[1]);

	efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (efd < 0)
		die("eventfd: %s", strerror(errno));
	s->l.offer_fd = efd;
	if (session_open(s)) {
		check(false, "offering an eventfd as our doorbell: the link trains");
		close(efd);
		return;
	}
	if (s->l.passed_fd < 0 || !is_eventfd(s->l.passed_fd)) {
		check(false, "the device's HELLO offers an eventfd (flags 0x%x)", s->l.peer_flags);
		session_close(s);
		close(efd);
		return;
	}
	sync_probe(s, "doorbells traded: before any ring the device polls its socket");

	/*
	 * A START, never ENDed.  The device reads the socket once more as it handles the ring: a
	 * probe sent then may still be answered, so the first probe only tells whether it was.  The
	 * second comes after that read, and must wait for the next ring.
	 */
	check(db_ring(s, PIB_LINK_RING_START), "START rung: the device read it");
	psn = probe_send(s);
	saved = s->timeout_ms;
	s->timeout_ms = MAD_QUIET_MS;
	early = wait_resp(s, QP_CONTROL, &r, buf);
	s->timeout_ms = saved;
	if (early)
		info("the first probe came as the device handled the START, and was read then");
	probe_send(s);
	check(quiet(s, MAD_QUIET_MS), "a START never ENDed: the device does not poll its socket "
	      "(no answer in %d ms)", MAD_QUIET_MS);
	check(db_ring(s, PIB_LINK_RING_START), "a second START rung: the device read it");
	if (!early)
		expect_ack(s, QP_CONTROL, PIB_AETH_ACK, psn,
			   "rung again: the device reads its socket and answers the first probe");
	expect_ack(s, QP_CONTROL, PIB_AETH_ACK, psn,
		   "rung again: the device reads its socket and answers the second probe");
	check(db_ring(s, 2 * PIB_LINK_RING_END), "two ENDs rung at once: the device read them");
	sync_probe(s, "STARTs and ENDs even: the device polls its socket again, unrung");

	/*
	 * The largest count: 0xfffffffe STARTs and 0xffffffff ENDs, modulo 2^32 one END too many.
	 * One more START evens them, and the socket is polled again.
	 */
	check(db_ring(s, 0xfffffffffffffffeull), "the largest count an eventfd takes: read");
	check(db_ring(s, PIB_LINK_RING_START), "one START more: read");
	sync_probe(s, "counts that wrapped modulo 2^32 even again: the socket is polled");

	/*
	 * The device rings ours around what its vCPU thread sends (the guest's MADs to us, its
	 * SM): every START with its END, which may be on its way right now.
	 */
	int64_t deadline = now_ms() + s->timeout_ms;
	uint64_t starts = 0, ends = 0;

	for (;;) {
		if (read(efd, &count, sizeof(count)) == sizeof(count)) {
			starts += (uint32_t)count;
			ends += count >> 32;
		}
		if (starts == ends || now_ms() > deadline)
			break;
		sleep_ms(1);
	}
	check(starts == ends, "every START the device rang our doorbell with has its END "
	      "(%" PRIu64 " STARTs, %" PRIu64 " ENDs)", starts, ends);
	session_close(s);
	close(efd);
	s->l.offer = false;
	s->l.hello_flags = 0;
}
