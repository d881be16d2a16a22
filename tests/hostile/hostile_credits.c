// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pib-hostile: credits (include/pib_link.h, "Credits") in a peer's hands
 * (the program is described in pib_hostile.c; what the files share is in hostile.h)
 *
 * Our HELLO offers PIB_HELLO_F_CREDITS and asks for them (PIB_HELLO_F_CREDITS_ON: between two
 * CAs they run only when one side asks), so the device's data VLs wait for the credit we grant,
 * and ours for the credit it grants.  The link layer (hostile_link.c) keeps the accounting of
 * both directions: it counts the blocks we send (our FCTBS) and the device sends (our ABR),
 * takes the device's FLOW frames, and flags a data packet the device sent beyond what we
 * granted.  The attacks:
 *   unasked   credits offered, not asked for: they run only if the device asks (its HELLO);
 *   offer     the device offers credits too and grants its whole buffer; a peer that keeps
 *             to them sends three windows' worth, across the 4096 wrap, and the device grants
 *             again what it frees; a READ round trip on credits both ways;
 *   lengths   FLOW frames that are not 1-15 whole entries lose framing (with credits and
 *             without); a valid one where credits do not run is ignored;
 *   withheld  READs while we grant nothing: no response, yet SMPs (VL15) are answered and
 *             the port stays ACTIVE; FLOW entries for VL15 or with unknown Ops grant nothing;
 *             our grant brings the responses;
 *   lies      FCTBS that jumps, FCCL garbage, entries repeated, VL15 only, unknown Ops,
 *             random words: the device survives them, and an honest FLOW frame afterwards
 *             makes a READ round trip work again.
 */
#define _GNU_SOURCE
#include "hostile.h"

#define FC_MASK		(PIB_LINK_FC_MOD - 1)
#define WINDOW_PKTS	100	/* 4 KiB packets: 6,500 blocks, three windows of 2048 */
#define NO_QPN		0xfffff0	/* a QPN with no QP behind it (rx_drop_no_qp) */

static uint32_t credits_psn;	/* QP_CREDITS's next PSN: every READ here moves it */

/* The READs of this command, on QP_CREDITS: from MR offset read_off, three responses at any
 * path MTU (two full, one of 100 bytes). */
static const uint64_t read_off = 512;

static uint32_t credits_read_len(const struct session *s)
{
	return MIN(2 * s->t.mtu + 100, s->t.mr_len - read_off);
}

static void credits_read_expect(struct session *s, const char *what)
{
	uint32_t len = credits_read_len(s);

	read_expect(s, QP_CREDITS, credits_psn, read_off, len, what);
	credits_psn = psn_add(credits_psn, (len + s->t.mtu - 1) / s->t.mtu);
}

static void credits_read(struct session *s, const char *what)
{
	read_send(s, QP_CREDITS, credits_psn, read_off, credits_read_len(s));
	credits_read_expect(s, what);
}

/* A FLOW entry, as it goes on the wire. */
static struct pib_link_fc fc_entry(unsigned op, uint16_t fctbs, unsigned vl, uint16_t fccl)
{
	return (struct pib_link_fc){
		.op_fctbs_be = htons((op & 0xf) << 12 | (fctbs & FC_MASK)),
		.vl_fccl_be = htons((vl & 0xf) << 12 | (fccl & FC_MASK)),
	};
}

/* What the device's first FLOW frame should be: VL i at entry i, Op Normal, FCTBS 0 (it has
 * sent nothing), FCCL 2048 (its buffer is empty).  NULL if it is; else what is wrong. */
static const char *first_flow_wrong(const struct link *l, char *why, size_t len)
{
	if (!l->flow_rx)
		return "none came before the answers to our SMPs";
	if (l->flow_first_len != sizeof(l->flow_first)) {
		snprintf(why, len, "%zu bytes, not %d entries", l->flow_first_len,
			 PIB_LINK_DATA_VLS);
		return why;
	}
	for (int i = 0; i < PIB_LINK_DATA_VLS; i++) {
		const uint8_t *e = l->flow_first + i * sizeof(struct pib_link_fc);
		uint16_t a = e[0] << 8 | e[1], b = e[2] << 8 | e[3];

		if (a >> 12 != PIB_LINK_FC_OP_NORMAL || (a & FC_MASK) != 0 || b >> 12 != i ||
		    (b & FC_MASK) != PIB_LINK_VL_BLOCKS) {
			snprintf(why, len, "entry %d: Op %u, FCTBS %u, VL %u, FCCL %u", i, a >> 12,
				 a & FC_MASK, b >> 12, b & FC_MASK);
			return why;
		}
	}
	return NULL;
}

/*
 * A peer that keeps to its credits: 4 KiB packets on VL0 (to no QP: the device drops and
 * counts each, and frees its blocks at once), sent while the device's limit takes them, else
 * after the FLOW frame that raises it.  Three windows' worth, so FCTBS wraps at 4096.
 */
static void credits_window(struct session *s)
{
	static uint8_t payload[4096];
	uint8_t b[PIB_LINK_MAX_PAYLOAD], buf[PIB_LINK_MAX_PAYLOAD];
	struct pkt p = req_to(s, QP_CONTROL, PIB_OP_RC_SEND_ONLY, s->t.psn);
	unsigned flows = s->l.flow_rx, waits = 0, i = 0;
	size_t len;
	uint16_t n;
	struct resp r;

	memset(payload, POISON, sizeof(payload));
	p.dqpn = NO_QPN;
	p.payload = payload;
	p.paylen = sizeof(payload);
	len = pkt_build(b, &p);
	n = fc_blocks(len);
	while (i < WINDOW_PKTS) {
		if (((s->l.vl[0].fccl - (s->l.vl[0].fctbs + n)) & FC_MASK) <= PIB_LINK_FC_MOD / 2) {
			send_bytes(s, b, len);
			i++;
			continue;
		}
		waits++;
		switch (next_frame(s, now_ms() + s->timeout_ms, &r, buf)) {
		case 0:
			check(false, "out of credit after %u packets (limit %u, FCTBS %u): no FLOW "
			      "frame from the device in %d ms", i, s->l.vl[0].fccl,
			      s->l.vl[0].fctbs, s->timeout_ms);
			goto out;
		case 2:
			s->l.rx_other++;
			info("unexpected packet (opcode 0x%02x, QPN 0x%x) while waiting for credit",
			     r.opcode, r.dqpn);
			break;
		}
	}
out:
	expect(PIB_CNT_RX_DROP_NO_QP, i);
	check(i == WINDOW_PKTS, "%u packets of %u blocks on VL0 (%u blocks, across the 4096 "
	      "wrap), each within the device's credit limit: it granted again what it freed "
	      "(%u FLOW frames; we ran out of credit %u times)", i, n, i * n,
	      s->l.flow_rx - flows, waits);
}

/*
 * Offer credits without asking for them, as a CA with link-credits=auto does: they run only if
 * the device's HELLO asks (link-credits=on).  Either way a READ round trip works, and FLOW
 * frames come if and only if they run (next_frame counts any other as unexpected).
 */
static void credits_unasked(struct session *s)
{
	char what[160];
	bool run;

	s->l.hello_flags = PIB_HELLO_F_CREDITS;
	if (session_open(s)) {
		check(false, "offering credits, not asking for them: the link trains");
	} else {
		run = link_credits(&s->l);
		snprintf(what, sizeof(what), "credits offered, not asked for by us; the device's "
			 "HELLO (flags 0x%x) %s: they %s", s->l.peer_flags,
			 run ? "asks" : "does not ask", run ? "run" : "do not run");
		credits_read(s, what);
		check(run == (s->l.flow_rx > 0), "%s: %u FLOW frame(s) from the device",
		      run ? "credits run" : "no credits", s->l.flow_rx);
		session_close(s);
	}
	s->l.hello_flags = PIB_HELLO_F_CREDITS | PIB_HELLO_F_CREDITS_ON;
}

/* Offer credits and ask: the device offers them too, grants its whole buffer, runs on them. */
static void credits_offer(struct session *s)
{
	const char *wrong;
	char why[96];

	if (session_open(s)) {
		check(false, "offering credits: the link trains");
		return;
	}
	check(link_credits(&s->l), "our HELLO offers credits and asks for them: the device's "
	      "offers them too (flags 0x%x)", s->l.peer_flags);
	wrong = first_flow_wrong(&s->l, why, sizeof(why));
	check(!wrong, "the device's first FLOW frame grants its whole buffer: VL0-VL14, Op "
	      "Normal, FCTBS 0, FCCL %d%s%s", PIB_LINK_VL_BLOCKS, wrong ? "; " : "",
	      wrong ? wrong : "");
	credits_window(s);
	credits_read(s, "credits both ways");
	check(!s->l.overrun && !s->l.flow_odd, "the device's %u FLOW frames were whole, in VL "
	      "order (%u odd entries); it sent nothing beyond our credits (%u packets did)",
	      s->l.flow_rx, s->l.flow_odd, s->l.overrun);
	session_close(s);
}

/* A FLOW frame header of this length, and that many zero bytes. */
static void flow_bad_length(struct link *l, uint16_t length)
{
	uint8_t f[PIB_LINK_HDR_LEN + 64] = { 0 };
	struct pib_link_hdr h = { .magic = PIB_LINK_MAGIC, .type = PIB_FRAME_FLOW,
				  .length_be = htons(length) };

	memcpy(f, &h, sizeof(h));
	send_all(l->fd, f, sizeof(h) + MIN(length, 64));	/* the device may hang up midway */
}

/*
 * FLOW frames that are not 1-15 whole entries: framing is lost, each on a fresh connection,
 * whether credits run or not.  A well-formed one where they do not run is ignored.
 */
static void credits_lengths(struct session *s)
{
	static const uint16_t lengths[] = { 0, 6, 64 };
	struct pib_link_fc fc[PIB_LINK_DATA_VLS];

	for (size_t i = 0; i < ARRAY_SIZE(lengths); i++) {
		if (session_open(s)) {
			check(false, "FLOW frame of %u bytes: the link trains first", lengths[i]);
			continue;
		}
		flow_bad_length(&s->l, lengths[i]);
		expect(PIB_CNT_LINK_FRAMING_ERRORS, 1);
		check(!wait_eof(&s->l, s->timeout_ms), "FLOW frame of %u bytes (%s): the device "
		      "drops the stream", lengths[i], lengths[i] ? "not 1-15 whole entries" :
		      "no entry");
		link_close(&s->l);
	}

	s->l.hello_flags = 0;
	if (!session_open(s)) {
		for (int i = 0; i < PIB_LINK_DATA_VLS; i++)
			fc[i] = fc_entry(PIB_LINK_FC_OP_NORMAL, 0, i, 0);
		link_flow_send(&s->l, fc, PIB_LINK_DATA_VLS);
		mad_good_smp(s, "our HELLO offers no credits; a FLOW frame is ignored");
		session_close(s);	/* and no FLOW frame came from the device */
	} else {
		check(false, "without credits: the link trains");
	}
	if (!session_open(s)) {
		flow_bad_length(&s->l, 6);
		expect(PIB_CNT_LINK_FRAMING_ERRORS, 1);
		check(!wait_eof(&s->l, s->timeout_ms), "without credits, a FLOW frame of 6 bytes: "
		      "the device drops the stream all the same");
		link_close(&s->l);
	} else {
		check(false, "without credits: the link trains again");
	}
	s->l.hello_flags = PIB_HELLO_F_CREDITS | PIB_HELLO_F_CREDITS_ON;
}

/* Our grant withheld: the device's READ responses wait, the rest of it goes on. */
static void credits_withheld(struct session *s)
{
	struct pib_link_fc fc[PIB_LINK_DATA_VLS];
	struct pib_port_info pi;
	int n = 0;

	read_send(s, QP_CREDITS, credits_psn, read_off, credits_read_len(s));
	check(quiet(s, MAD_QUIET_MS), "a READ while we grant no credit: no response in %d ms",
	      MAD_QUIET_MS);
	mad_good_smp(s, "while its READ responses wait for credit, an SMP (VL15)");
	if (!port_info(s, true, PIB_MAD_METHOD_GET, &pi))
		check((pi.speed_state & 0xf) == PIB_PORT_ACTIVE,
		      "while they wait, PortInfo says the port is ACTIVE (state %u)",
		      pi.speed_state & 0xf);

	/* Entries that grant nothing: VL15's, and unknown Ops on VL0 (IBTA: ignored). */
	fc[n++] = fc_entry(PIB_LINK_FC_OP_NORMAL, 0, 15, PIB_LINK_VL_BLOCKS);
	link_flow_send(&s->l, fc, n);
	n = 0;
	for (unsigned op = PIB_LINK_FC_OP_INIT + 1; op < 16 && n < PIB_LINK_DATA_VLS; op++)
		fc[n++] = fc_entry(op, 0, 0, PIB_LINK_VL_BLOCKS);
	link_flow_send(&s->l, fc, n);
	check(quiet(s, MAD_QUIET_MS), "FLOW entries for VL15 and with Ops 2-15 grant nothing: "
	      "still no response in %d ms", MAD_QUIET_MS);

	s->l.withhold = false;
	link_grant(&s->l);
	credits_read_expect(s, "our FLOW frame grants credit at last: the responses come");
	expect_grew(PIB_CNT_XMIT_WAIT_US);
}

/* A small xorshift: the lies are the same on every run. */
static uint32_t lie_rand(void)
{
	static uint32_t x = 0x9e3779b9;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return x;
}

/* FLOW frames that lie, then an honest one: the device survives and runs on. */
static void credits_lies(struct session *s)
{
	static const int jumps[] = { 2000, -1500, 4095, 2048, 1 };
	struct pib_link_fc fc[PIB_LINK_DATA_VLS];
	struct link *l = &s->l;
	unsigned frames = 0;
	int i, k;

	l->withhold = true;	/* no grant of ours between the lies */
	l->lied = true;
	/* FCTBS that jumps ahead and back (the device sets its ABR to it). */
	for (k = 0; k < (int)ARRAY_SIZE(jumps); k++, frames++) {
		for (i = 0; i < PIB_LINK_DATA_VLS; i++)
			fc[i] = fc_entry(PIB_LINK_FC_OP_NORMAL, l->vl[i].fctbs + jumps[k], i,
					 l->vl[i].granted);
		link_flow_send(l, fc, PIB_LINK_DATA_VLS);
	}
	/* FCCL garbage, with Op Normal and Init. */
	for (k = 0; k < 4; k++, frames++) {
		for (i = 0; i < PIB_LINK_DATA_VLS; i++)
			fc[i] = fc_entry(k & 1, l->vl[i].fctbs, i, lie_rand());
		link_flow_send(l, fc, PIB_LINK_DATA_VLS);
	}
	/* One VL over and over, each entry another limit; then one entry per frame, no credit. */
	for (i = 0; i < PIB_LINK_DATA_VLS; i++)
		fc[i] = fc_entry(PIB_LINK_FC_OP_NORMAL, lie_rand(), 0, lie_rand());
	link_flow_send(l, fc, PIB_LINK_DATA_VLS);
	frames++;
	for (i = 0; i < PIB_LINK_DATA_VLS; i++, frames++) {
		fc[0] = fc_entry(PIB_LINK_FC_OP_NORMAL, l->vl[i].fctbs, i, l->vl[i].abr - 1);
		link_flow_send(l, fc, 1);
	}
	/* VL15 only, unknown Ops only, and random words. */
	for (i = 0; i < PIB_LINK_DATA_VLS; i++)
		fc[i] = fc_entry(PIB_LINK_FC_OP_NORMAL, lie_rand(), 15, lie_rand());
	link_flow_send(l, fc, PIB_LINK_DATA_VLS);
	for (i = 0; i < PIB_LINK_DATA_VLS; i++)
		fc[i] = fc_entry(2 + i % 14, lie_rand(), i, lie_rand());
	link_flow_send(l, fc, PIB_LINK_DATA_VLS);
	for (k = 0; k < 8; k++) {
		for (i = 0; i < PIB_LINK_DATA_VLS; i++) {
			uint32_t w = lie_rand();

			memcpy(&fc[i], &w, sizeof(w));
		}
		link_flow_send(l, fc, 1 + lie_rand() % PIB_LINK_DATA_VLS);
	}
	frames += 2 + 8;
	info("sent %u lying FLOW frames", frames);
	mad_good_smp(s, "after the lying FLOW frames, an SMP");

	l->withhold = false;
	link_grant(l);
	credits_read(s, "after the lies, one honest FLOW frame: a READ round trip");
}

void cmd_credits(struct session *s)
{
	if (s->t.nqp <= QP_CREDITS)
		die("the target has %d QPs; credits needs %d (pib-mr-target -n)", s->t.nqp,
		    QP_CREDITS + 1);
	credits_psn = s->t.psn;
	credits_unasked(s);
	credits_offer(s);
	credits_lengths(s);

	s->l.withhold = true;
	if (session_open(s)) {
		check(false, "granting no credit: the link trains");
	} else {
		check(s->l.flow_rx > 0, "granting no credit: the device grants us its own");
		credits_withheld(s);
		credits_lies(s);
		check(!s->l.overrun, "the device sent nothing beyond the credit we granted (%u "
		      "packets did)", s->l.overrun);
		session_close(s);
	}
	expect(PIB_CNT_RX_DROP_CREDIT, 0);
	printf("expect_qp %d RTS\n", QP_CREDITS);
	s->l.withhold = false;
	s->l.hello_flags = 0;
}
