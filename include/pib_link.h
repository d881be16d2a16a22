/* SPDX-License-Identifier: GPL-2.0-or-later OR Linux-OpenIB */
/*
 * pib_link.h - framing on the link between two pib ports.
 *
 * The link is a byte stream (a QEMU socket chardev).  It carries frames:
 *
 *   +--------+--------+----------------+---------------------------+
 *   | magic  | type   | length (BE16)  | payload (length bytes)    |
 *   | 0x50   | 1 byte | bytes after hdr|                           |
 *   +--------+--------+----------------+---------------------------+
 *
 * The receiver reassembles frames across partial reads.  A frame with a bad magic, an unknown
 * type or a length above PIB_LINK_MAX_PAYLOAD means the stream lost framing: the receiver
 * counts it, drops the connection and lets the link retrain, exactly as a physical link that
 * loses symbol lock would.  Multi-byte fields in link frames are big-endian, as on the IB wire.
 *
 * Training: when the byte stream connects, each side sends HELLO with its node GUID and port
 * GUID.  The physical link is UP once each side has received the other's HELLO.
 */
#ifndef PIB_LINK_H
#define PIB_LINK_H

#include "pib_hw.h"

#define PIB_LINK_MAGIC         0x50
#define PIB_LINK_HDR_LEN       4
#define PIB_LINK_MAX_PAYLOAD   (4096 + 256) /* one IB packet: headers + 4 KiB MTU payload */

enum pib_link_frame_type {
	PIB_FRAME_HELLO   = 0x01, /* payload: struct pib_link_hello                         */
	PIB_FRAME_PACKET  = 0x02, /* payload: one IB packet (LRH onwards)                   */
};

struct pib_link_hdr {
	pib_u8  magic;          /* PIB_LINK_MAGIC                                             */
	pib_u8  type;           /* enum pib_link_frame_type                                   */
	pib_u16 length_be;      /* payload bytes, big-endian                                  */
};

#define PIB_LINK_PROTO_VERSION 1
struct pib_link_hello {
	pib_u32 version_be;     /* PIB_LINK_PROTO_VERSION                                     */
	pib_u32 mtu_be;         /* largest payload this side accepts, bytes                   */
	pib_u64 node_guid_be;
	pib_u64 port_guid_be;
};

PIB_STATIC_ASSERT(sizeof(struct pib_link_hdr) == PIB_LINK_HDR_LEN, "link header");
PIB_STATIC_ASSERT(sizeof(struct pib_link_hello) == 24, "hello frame");

#endif /* PIB_LINK_H */
