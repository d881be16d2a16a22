// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pib-hostile: IB packets, and sending them to the target QPs
 * (the program is described in pib_hostile.c; what the files share is in hostile.h)
 */
#define _GNU_SOURCE
#include "hostile.h"

/* =============================================================================================
 * IB packets (include/pib_link.h: LRH, GRH, BTH, RETH, AETH; big-endian; no ICRC/VCRC)
 */

/* The packet for p, in b (PIB_LINK_MAX_PAYLOAD bytes); returns its length. */
size_t pkt_build(uint8_t *b, const struct pkt *p)
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

int resp_parse(const uint8_t *b, size_t len, struct resp *r)
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

const char *aeth_str(uint8_t syn)
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

uint32_t psn_add(uint32_t psn, int32_t n)
{
	return (psn + n) & PIB_PSN_MASK;
}

/* A request from "our QP" peer_qpn + i to the target's QP i, from the LID it expects. */
struct pkt req_to(const struct session *s, int i, uint8_t opcode, uint32_t psn)
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
void send_bytes(struct session *s, const uint8_t *b, size_t len)
{
	if (send_frame(&s->l, PIB_FRAME_PACKET, b, len))
		die("the device closed the link while we sent (%s)", strerror(errno));
	s->sent++;
	expect(PIB_CNT_RX_PACKETS, 1);
}

void send_pkt(struct session *s, const struct pkt *p)
{
	uint8_t b[PIB_LINK_MAX_PAYLOAD];

	send_bytes(s, b, pkt_build(b, p));
}
