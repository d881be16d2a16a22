// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pib-hostile: the attacks with MADs (SMPs, GMPs, CM messages)
 * (the program is described in pib_hostile.c; what the files share is in hostile.h)
 */
#define _GNU_SOURCE
#include "hostile.h"

/*
 * MADs that no SM or agent would send, to the target's QP0 and QP1 from the wire (the
 * port is ACTIVE, we are its SM).  Each gets what the IBTA prescribes: the answer with the
 * status that says what was wrong (13.4.7), or a silent discard where the IBTA says so
 * (C14-9: a directed-route SMP with an impossible hop pointer or count), or it is dropped by the
 * device and counted (a MAD that is not 256 bytes, the wrong VL, Q_Key or P_Key), never a
 * crash, a hang or a port left in another state.  A good SMP is answered afterwards.
 */

/* Send p (a MAD packet); the answer's status must be want (the D bit aside). */
void mad_expect_status(struct session *s, const char *what, struct pkt *p, uint16_t want)
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
void mad_expect_silence(struct session *s, const char *what, struct pkt *p,
			const struct pib_mad_hdr *req)
{
	uint8_t buf[PIB_LINK_MAX_PAYLOAD];
	struct resp r;

	send_pkt(s, p);
	check(!wait_mad(s, req, MAD_QUIET_MS, &r, buf), "%s: no answer", what);
}

/* A dropped packet the guest must count under some rx_drop_* reason (which one is the device's
 * to say: no expect line for a single counter). */
void expect_any_drop(void)
{
	expect_drops++;
}

/* The positive control: a directed-route NodeInfo Get is answered, and names the HCA we are
 * cabled to. */
void mad_good_smp(struct session *s, const char *what)
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

void cmd_mad(struct session *s)
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

void cmd_cm(struct session *s)
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
