// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pib-hostile: MADs, and the session with the target port
 * (the program is described in pib_hostile.c; what the files share is in hostile.h)
 */
#define _GNU_SOURCE
#include "hostile.h"

/* =============================================================================================
 * MADs (include/pib_mad.h).  We are the target port's neighbour and, once the link trains,
 * its subnet manager: our QP0 and QP1 are QPN 0 and 1, our LID (when the target has one for us)
 * is peer_lid.  The target's SMA sends its traps to its master SM, which we make ourselves
 * (sm_activate()); we repress each one as an SM does, wherever it turns up.
 */

uint32_t next_tid = 1;
unsigned traps_seen[512];	/* by trap number (generic traps < 512) */

/* A MAD header for method/attribute, with a fresh TID. */
void mad_hdr_init(struct pib_mad_hdr *h, uint8_t mgmt_class, uint8_t class_version,
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
void smp_init(struct pib_smp *smp, bool dr, uint8_t method, uint16_t attr, uint32_t mod)
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
struct pkt mad_pkt(const struct session *s, uint32_t qpn, bool dr, const void *mad,
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

void send_smp(struct session *s, const struct pib_smp *smp)
{
	struct pkt p = mad_pkt(s, 0, smp->hdr.mgmt_class == PIB_MGMT_CLASS_SUBN_DR, smp,
			       sizeof(*smp));

	send_pkt(s, &p);
}

/* The MAD a parsed packet carries, if it is a datagram to our QP0 or QP1 with a whole one. */
const struct pib_mad_hdr *resp_mad(const struct resp *r)
{
	if (!r->has_deth || r->dqpn > 1 || r->paylen < PIB_MAD_SIZE)
		return NULL;
	return (const struct pib_mad_hdr *)r->payload;
}

/*
 * A trap from the target's SMA (Trap(Notice) to its master SM): count it and repress it, as
 * an SM does, so that the SMA stops sending it.  True if r was one.
 */
bool mad_trap(struct session *s, const struct resp *r)
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
bool mad_request_to_us(const struct resp *r)
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
 * The next frame from the device before deadline that the caller may care about: 1 for a FLOW
 * frame (on a stream where credits run; taken into the link's accounting), 2 for an IB packet,
 * parsed in *r (its payload in buf); 0 at the deadline.  Other frames are noted as unexpected
 * (a FLOW frame too, where credits do not run); traps are repressed and requests to our agents
 * noted on the way.
 */
int next_frame(struct session *s, int64_t deadline, struct resp *r, uint8_t *buf)
{
	uint8_t type;
	size_t n;

	while (recv_frame(&s->l, &type, buf, &n, deadline - now_ms()) == 1) {
		if (type == PIB_FRAME_FLOW && link_credits(&s->l)) {
			link_flow_rx(&s->l, buf, n);
			return 1;
		}
		if (type == PIB_FRAME_PACKET)
			link_rx_data(&s->l, buf, n);
		if (type != PIB_FRAME_PACKET || resp_parse(buf, n, r)) {
			s->l.rx_other++;
			info("unexpected frame (type %u, %zu bytes) from the device", type, n);
			continue;
		}
		if (mad_trap(s, r) || mad_request_to_us(r))
			continue;
		return 2;
	}
	return 0;
}

/* The next IB packet from the device before deadline: 1 with it in *r, as next_frame; 0 at
 * the deadline. */
int next_packet(struct session *s, int64_t deadline, struct resp *r, uint8_t *buf)
{
	int got;

	while ((got = next_frame(s, deadline, r, buf)) == 1)
		;
	return got == 2;
}

/*
 * The answer to the MAD whose header is req: 1 with the packet in *r (its MAD at r->payload,
 * in buf), 0 if none came within ms.  Anything else is noted as unexpected.
 */
int wait_mad(struct session *s, const struct pib_mad_hdr *req, int ms, struct resp *r,
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
int port_info(struct session *s, bool dr, uint8_t method, struct pib_port_info *pi)
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
int sm_activate(struct session *s)
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
int wait_resp(struct session *s, int i, struct resp *r, uint8_t *buf)
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
bool quiet(struct session *s, int ms)
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
void expect_ack(struct session *s, int i, uint8_t syndrome, uint32_t psn, const char *what)
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
void sync_probe(struct session *s, const char *what)
{
	expect_ack(s, QP_CONTROL, PIB_AETH_ACK, probe_send(s), what);
}

/* The sync probe's request alone: sent and its counts expected; returns the PSN its ACK has. */
uint32_t probe_send(struct session *s)
{
	struct pkt p = req_to(s, QP_CONTROL, PIB_OP_RC_RDMA_WRITE_ONLY,
			      psn_add(s->t.psn, -1));

	p.reth = true;
	p.va = s->t.mr_addr;
	p.rkey = s->t.mr_rkey;
	send_pkt(s, &p);
	expect(PIB_CNT_RX_DROP_DUPLICATE, 1);
	expect(PIB_CNT_DUPLICATE_REQUESTS, 1);
	return p.psn;
}

/*
 * Dial, train the link and, given the target (whose port then has an SM-assigned LID), be its
 * subnet manager: its port is ACTIVE on return 0.
 */
int session_open(struct session *s)
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
void session_close(struct session *s)
{
	check(s->l.rx_other == 0, "%u packet(s) sent, no unexpected answer (%u)", s->sent,
	      s->l.rx_other);
	link_close(&s->l);
}
