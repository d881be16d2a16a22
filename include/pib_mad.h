/* SPDX-License-Identifier: GPL-2.0-or-later OR Linux-OpenIB */
/*
 * pib_mad.h - management datagrams (MADs) as the pib firmware speaks them: the formats of the
 * subnet management packets (SMPs) its subnet management agent (SMA) answers, of the
 * performance management MADs its performance management agent (PMA) answers, of the traps it
 * sends, and the mailbox of the MAD_IFC admin command through which the driver hands MADs to
 * those agents.  docs/reference/hardware.md ("Management") explains how they fit together.
 *
 * Everything here is IBTA volume 1, chapters 13 (MADs), 14 (subnet management) and 16.1
 * (performance management), laid out as on the wire: big-endian ("_be") fields, packed to the
 * IBTA's byte offsets (each struct is checked by a size assertion at the end).  Sub-byte fields
 * are named by their bit ranges in a comment; PIB_MAD_* helpers below read and write them.
 *
 * A MAD is 256 bytes: a 24-byte common header, then class-specific data.
 *
 *   SMP (class 0x01 LID-routed, 0x81 directed-route), IBTA 14.2.1:
 *     0   common header (DR: status [15] is the Direction bit D, [14:0] the status;
 *         class_specific [15:8] HopPointer, [7:0] HopCount)
 *     24  M_Key
 *     32  DR: DrSLID, DrDLID, 28 reserved bytes      LID-routed: 32 reserved bytes
 *     64  attribute data (64 bytes)
 *     128 DR: InitialPath[64], ReturnPath[64]        LID-routed: 128 reserved bytes
 *
 *   PMA (class 0x04), IBTA 16.1.1: common header, 40 reserved bytes, data at 64 (192 bytes).
 *
 *   CC (class 0x21, congestion control), IBTA Annex A10.4.1: common header, CC_Key at 24, log
 *     data at 32 (32 bytes: CongestionLog's first part), data at 64 (192 bytes).
 */
#ifndef PIB_MAD_H
#define PIB_MAD_H

#include "pib_hw.h"

#define PIB_MAD_SIZE            256
#define PIB_MAD_BASE_VERSION    1
#define PIB_SMP_CLASS_VERSION   1
#define PIB_PMA_CLASS_VERSION   1
#define PIB_CC_CLASS_VERSION    2
#define PIB_SMP_DATA_SIZE       64
#define PIB_SMP_MAX_HOPS        64      /* path arrays; HopCount is 0..63 */

/* Management classes (IBTA 13.4.4) */
#define PIB_MGMT_CLASS_SUBN_LID     0x01
#define PIB_MGMT_CLASS_SUBN_DR      0x81
#define PIB_MGMT_CLASS_SUBN_ADM     0x03    /* SA: the SM's, never the firmware's */
#define PIB_MGMT_CLASS_PERF         0x04
#define PIB_MGMT_CLASS_CC           0x21    /* congestion control (Annex A10) */

/* Methods (IBTA 13.4.5) */
#define PIB_MAD_METHOD_GET          0x01
#define PIB_MAD_METHOD_SET          0x02
#define PIB_MAD_METHOD_SEND         0x03
#define PIB_MAD_METHOD_TRAP         0x05
#define PIB_MAD_METHOD_TRAP_REPRESS 0x07
#define PIB_MAD_METHOD_RESP         0x80    /* the R bit: a response */
#define PIB_MAD_METHOD_GET_RESP     0x81

/* MAD status (IBTA 13.4.7): [0] busy, [1] redirect, [4:2] invalid-field code. */
#define PIB_MAD_STATUS_OK               0x0000
#define PIB_MAD_STATUS_BAD_VERSION      0x0004  /* base or class version, or class */
#define PIB_MAD_STATUS_UNSUP_METHOD     0x0008
#define PIB_MAD_STATUS_UNSUP_ATTR       0x000c  /* method/attribute combination */
#define PIB_MAD_STATUS_INVALID_VALUE    0x001c  /* attribute or modifier field */
#define PIB_SMP_STATUS_DIRECTION        0x8000  /* DR SMPs: the D bit, set on the way back */

/*
 * Subnet management attributes (IBTA 14.2.5).  PIB_SMP_ATTRS(X) calls X(ID, value, name) for
 * each attribute the SMA knows, answered or refused with a status (never dropped): the device's
 * names, its dispatch table and the tests are all made from this one list.
 */
#define PIB_SMP_ATTRS(X)                                        \
	X(NOTICE,        0x0002, "Notice")                      \
	X(NODE_DESC,     0x0010, "NodeDescription")             \
	X(NODE_INFO,     0x0011, "NodeInfo")                    \
	X(SWITCH_INFO,   0x0012, "SwitchInfo")                  \
	X(GUID_INFO,     0x0014, "GUIDInfo")                    \
	X(PORT_INFO,     0x0015, "PortInfo")                    \
	X(PKEY_TABLE,    0x0016, "P_KeyTable")                  \
	X(SL2VL_TABLE,   0x0017, "SLtoVLMappingTable")          \
	X(VLARB_TABLE,   0x0018, "VLArbitrationTable")          \
	X(LFT,           0x0019, "LinearForwardingTable")       \
	X(MFT,           0x001b, "MulticastForwardingTable")    \
	X(SM_INFO,       0x0020, "SMInfo")

#define PIB_SMP_ATTR_ENUM_ENTRY(id, value, name) PIB_SMP_ATTR_##id = value,
enum pib_smp_attr {
	PIB_SMP_ATTRS(PIB_SMP_ATTR_ENUM_ENTRY)
};
#undef PIB_SMP_ATTR_ENUM_ENTRY

/* Performance management attributes (IBTA 16.1.3), as PIB_SMP_ATTRS. */
#define PIB_PMA_ATTRS(X)                                        \
	X(CLASS_PORT_INFO, 0x0001, "ClassPortInfo")             \
	X(PORT_COUNTERS,   0x0012, "PortCounters")              \
	X(PORT_COUNTERS_EXT, 0x001d, "PortCountersExtended")

#define PIB_PMA_ATTR_ENUM_ENTRY(id, value, name) PIB_PMA_ATTR_##id = value,
enum pib_pma_attr {
	PIB_PMA_ATTRS(PIB_PMA_ATTR_ENUM_ENTRY)
};
#undef PIB_PMA_ATTR_ENUM_ENTRY

/*
 * PortInfo:CapabilityMask bits (IBTA 14.2.5.6, table 146) that pib ports use.  The firmware
 * sets the ones it implements; the driver sets and clears the ones that say which agents run
 * above it (ib_core's modify_port: the CM, an SM), through SET_PORT.
 */
#define PIB_PORT_CAP_SM                (1u << 1)   /* an SM runs behind this port          */
#define PIB_PORT_CAP_NOTICE            (1u << 2)
#define PIB_PORT_CAP_TRAP              (1u << 3)   /* the SMA sends traps                   */
#define PIB_PORT_CAP_SL_MAP            (1u << 6)   /* IsSLMappingSupported: SLtoVLMapping-  */
                                                   /* Table and VLArbitrationTable are set  */
#define PIB_PORT_CAP_SM_DISABLED       (1u << 10)
#define PIB_PORT_CAP_SYS_IMAGE_GUID    (1u << 11)
#define PIB_PORT_CAP_CM                (1u << 16)  /* a communication manager runs          */
#define PIB_PORT_CAP_DEVICE_MGMT       (1u << 19)
#define PIB_PORT_CAP_VENDOR_CLASS      (1u << 20)
#define PIB_PORT_CAP_CAP_MASK_NOTICE   (1u << 22)  /* trap 144 on CapabilityMask changes    */
#define PIB_PORT_CAP_CLIENT_REREG      (1u << 25)  /* PortInfo:ClientReregister            */
#define PIB_PORT_CAP_OTHER_LOCAL_CHG   (1u << 26)  /* trap 144 on NodeDescription changes   */
/* What the firmware itself implements: always set, the driver cannot clear them. */
#define PIB_PORT_CAP_FIRMWARE  (PIB_PORT_CAP_TRAP | PIB_PORT_CAP_SL_MAP | \
                                PIB_PORT_CAP_SYS_IMAGE_GUID | PIB_PORT_CAP_CAP_MASK_NOTICE | \
                                PIB_PORT_CAP_CLIENT_REREG | PIB_PORT_CAP_OTHER_LOCAL_CHG)

/* ---- The common MAD header (IBTA 13.4.3): 24 bytes ----------------------------------------- */
struct pib_mad_hdr {
	pib_u8  base_version;   /* 0x00 PIB_MAD_BASE_VERSION                                   */
	pib_u8  mgmt_class;     /* 0x01                                                        */
	pib_u8  class_version;  /* 0x02                                                        */
	pib_u8  method;         /* 0x03 [7] R (response), [6:0] method                         */
	pib_u16 status_be;      /* 0x04 DR SMPs: [15] D, [14:0] status                         */
	pib_u16 class_spec_be;  /* 0x06 DR SMPs: [15:8] HopPointer, [7:0] HopCount            */
	pib_u32 tid_hi_be;      /* 0x08 transaction ID, split so the struct packs to 4 bytes   */
	pib_u32 tid_lo_be;
	pib_u16 attr_id_be;     /* 0x10                                                        */
	pib_u16 rsvd;
	pib_u32 attr_mod_be;    /* 0x14                                                        */
};

/* ---- SMP: 256 bytes (IBTA 14.2.1.1 LID-routed, 14.2.1.2 directed route) ------------------- */
struct pib_smp {
	struct pib_mad_hdr hdr;
	pib_u32 mkey_hi_be;     /* 0x18 M_Key                                                  */
	pib_u32 mkey_lo_be;
	pib_u16 dr_slid_be;     /* 0x20 DR: DrSLID (LID-routed: reserved)                      */
	pib_u16 dr_dlid_be;     /* 0x22 DR: DrDLID                                             */
	pib_u8  rsvd[28];       /* 0x24                                                        */
	pib_u8  data[PIB_SMP_DATA_SIZE];                /* 0x40 the attribute                   */
	pib_u8  initial_path[PIB_SMP_MAX_HOPS];         /* 0x80 DR: port numbers, out           */
	pib_u8  return_path[PIB_SMP_MAX_HOPS];          /* 0xc0 DR: port numbers, back          */
};

/* ---- NodeInfo (IBTA 14.2.5.3): 40 bytes --------------------------------------------------- */
#define PIB_NODE_TYPE_CA        1
#define PIB_NODE_TYPE_SWITCH    2
struct pib_node_info {
	pib_u8  base_version;   /* 0x00                                                        */
	pib_u8  class_version;  /* 0x01                                                        */
	pib_u8  node_type;      /* 0x02 PIB_NODE_TYPE_*                                        */
	pib_u8  num_ports;      /* 0x03 physical ports (a switch: not counting port 0)         */
	pib_u32 sys_image_guid_hi_be;   /* 0x04                                                */
	pib_u32 sys_image_guid_lo_be;
	pib_u32 node_guid_hi_be;        /* 0x0c                                                */
	pib_u32 node_guid_lo_be;
	pib_u32 port_guid_hi_be;        /* 0x14 of the port the SMP arrived on (switch: port 0)*/
	pib_u32 port_guid_lo_be;
	pib_u16 partition_cap_be;       /* 0x1c P_Key table entries                            */
	pib_u16 device_id_be;           /* 0x1e                                                */
	pib_u32 revision_be;            /* 0x20                                                */
	pib_u32 port_vendor_be;         /* 0x24 [31:24] LocalPortNum, [23:0] VendorID (OUI)    */
};

/* ---- PortInfo (IBTA 14.2.5.6): 64 bytes --------------------------------------------------- */
struct pib_port_info {
	pib_u32 mkey_hi_be;             /* 0x00 M_Key                                          */
	pib_u32 mkey_lo_be;
	pib_u32 gid_prefix_hi_be;       /* 0x08 GidPrefix                                      */
	pib_u32 gid_prefix_lo_be;
	pib_u16 lid_be;                 /* 0x10 LID                                            */
	pib_u16 sm_lid_be;              /* 0x12 MasterSMLID                                    */
	pib_u32 cap_mask_be;            /* 0x14 CapabilityMask (IB_PORT_* bits), RO            */
	pib_u16 diag_code_be;           /* 0x18 DiagCode, RO                                   */
	pib_u16 mkey_lease_be;          /* 0x1a M_KeyLeasePeriod, seconds (0: infinite)        */
	pib_u8  local_port_num;         /* 0x1c the port the SMP arrived on, RO                */
	pib_u8  link_width_enabled;     /* 0x1d                                                */
	pib_u8  link_width_supported;   /* 0x1e RO                                             */
	pib_u8  link_width_active;      /* 0x1f RO                                             */
	pib_u8  speed_state;            /* 0x20 [7:4] LinkSpeedSupported, [3:0] PortState      */
	pib_u8  phys_down;              /* 0x21 [7:4] PortPhysicalState, [3:0] LinkDownDefault */
	pib_u8  mkeyprot_lmc;           /* 0x22 [7:6] M_KeyProtectBits, [2:0] LMC              */
	pib_u8  speed_active_enabled;   /* 0x23 [7:4] LinkSpeedActive, [3:0] LinkSpeedEnabled  */
	pib_u8  mtu_smsl;               /* 0x24 [7:4] NeighborMTU, [3:0] MasterSMSL            */
	pib_u8  vlcap_inittype;         /* 0x25 [7:4] VLCap, [3:0] InitType                    */
	pib_u8  vl_high_limit;          /* 0x26                                                */
	pib_u8  vl_arb_high_cap;        /* 0x27 RO                                             */
	pib_u8  vl_arb_low_cap;         /* 0x28 RO                                             */
	pib_u8  inittypereply_mtucap;   /* 0x29 [7:4] InitTypeReply, [3:0] MTUCap (RO)         */
	pib_u8  vlstall_hoqlife;        /* 0x2a [7:5] VLStallCount, [4:0] HOQLife              */
	pib_u8  opvls_enforce;          /* 0x2b [7:4] OperationalVLs, [3:0] PIB_PI_ENFORCE_*   */
	pib_u16 mkey_violations_be;     /* 0x2c                                                */
	pib_u16 pkey_violations_be;     /* 0x2e                                                */
	pib_u16 qkey_violations_be;     /* 0x30                                                */
	pib_u8  guid_cap;               /* 0x32 GUIDInfo entries, RO                           */
	pib_u8  rereg_subnet_timeout;   /* 0x33 [7] ClientReregister, [4:0] SubnetTimeOut      */
	pib_u8  resp_time;              /* 0x34 [4:0] RespTimeValue, RO                        */
	pib_u8  phy_overrun_errors;     /* 0x35 [7:4] LocalPhyErrors, [3:0] OverrunErrors      */
	pib_u16 max_credit_hint_be;     /* 0x36                                                */
	pib_u32 round_trip_latency_be;  /* 0x38 [23:0] LinkRoundTripLatency                    */
	pib_u16 cap_mask2_be;           /* 0x3c CapabilityMask2                                */
	pib_u8  speed_ext;              /* 0x3e [7:4] ExtActive, [3:0] ExtSupported            */
	pib_u8  speed_ext_enabled;      /* 0x3f [4:0]                                          */
};

/*
 * PortInfo's enforcement bits (opvls_enforce [3:0], IBTA 14.2.5.6), which a switch's external
 * ports act on (10.9.3): a port with PartitionEnforcementInbound (Outbound) set drops a data
 * packet arriving (leaving) whose BTH P_Key matches no entry of the port's P_KeyTable, and
 * counts it in PortRcvConstraintErrors (PortXmitConstraintErrors); FilterRawInbound (Outbound)
 * drops raw packets (LNH 0 or 1) the same way.  VL15 (SMPs) is never filtered.
 */
#define PIB_PI_ENFORCE_PART_IN       0x08
#define PIB_PI_ENFORCE_PART_OUT      0x04
#define PIB_PI_ENFORCE_RAW_IN        0x02
#define PIB_PI_ENFORCE_RAW_OUT       0x01

/* ---- SwitchInfo (IBTA 14.2.5.4): 20 bytes used of the 64 ---------------------------------- */
#define PIB_SWINFO_PORT_STATE_CHANGE 0x04   /* life_state [2]: a port changed state; Set 1 clears */
#define PIB_SWINFO_OPT_SL2VL         0x01   /* life_state [0]: OptimizedSLtoVLMappingProgramming: */
                                            /* SLtoVLMappingTable takes the "all ports" bits  */
#define PIB_SWINFO_ENHANCED_PORT0    0x08   /* flags [3]: port 0 is an enhanced port           */
#define PIB_SWINFO_ENFORCE_CAPS      0xf0   /* flags [7:4]: Inbound/OutboundEnforcementCap,    */
                                            /* FilterRawInbound/OutboundCap                    */
struct pib_switch_info {
	pib_u16 lft_cap_be;             /* 0x00 LinearFDBCap: LFT entries                      */
	pib_u16 rft_cap_be;             /* 0x02 RandomFDBCap: 0, no random table               */
	pib_u16 mft_cap_be;             /* 0x04 MulticastFDBCap: MFT entries from 0xc000       */
	pib_u16 lft_top_be;             /* 0x06 LinearFDBTop: the highest LID the LFT holds    */
	pib_u8  def_port;               /* 0x08 DefaultPort (random FDB only)                  */
	pib_u8  def_mcast_pri_port;     /* 0x09 DefaultMulticastPrimaryPort                    */
	pib_u8  def_mcast_not_pri_port; /* 0x0a DefaultMulticastNotPrimaryPort                 */
	pib_u8  life_state;             /* 0x0b [7:3] LifeTimeValue, [2] PortStateChange,      */
	                                /*      [1:0] OptimizedSLtoVLMappingProgramming        */
	pib_u16 lids_per_port_be;       /* 0x0c LIDsPerPort                                    */
	pib_u16 enforce_cap_be;         /* 0x0e PartitionEnforcementCap                        */
	pib_u8  flags;                  /* 0x10 [7:4] enforcement/filter caps, [3] EnhancedPort0*/
	pib_u8  rsvd;                   /* 0x11                                                */
	pib_u16 mft_top_be;             /* 0x12 MulticastFDBTop                                */
};

/*
 * LinearForwardingTable (IBTA 14.2.5.10): AttributeModifier is the block, 64 one-byte port
 * numbers for LIDs block*64 .. block*64+63; 255 (or a port the switch lacks) drops.
 * MulticastForwardingTable (14.2.5.12): AttributeModifier [31:28] the position (ports
 * position*16 .. +15), [8:0] the block, 32 16-bit port masks for MLIDs 0xc000 + block*32 ..
 */
#define PIB_LFT_BLOCK_ENTRIES       64
#define PIB_LFT_NO_PORT             255
#define PIB_MFT_BLOCK_ENTRIES       32
#define PIB_MFT_POSITION_PORTS      16

/* PortInfo:PortState values in a Set (IBTA 14.2.5.6, table 148) */
#define PIB_PORTINFO_STATE_NOP      0   /* no change */
/* (1 DOWN, 3 ARMED, 4 ACTIVE as in PIB_PORT_*; INIT cannot be set) */
/* PortInfo:PortPhysicalState values in a Set */
#define PIB_PORTINFO_PHYS_NOP       0
/* (2 POLLING retrains the link, 3 DISABLED as in PIB_PHYS_*) */

/* The P_Key table: 32 entries per block (IBTA 14.2.5.7). */
#define PIB_PKEY_BLOCK_ENTRIES      32
#define PIB_PKEY_FULL_MEMBER        0x8000  /* [15]: full membership; [14:0] the key */
#define PIB_PKEY_BASE_MASK          0x7fff
/* GUIDInfo: 8 GUIDs per block (IBTA 14.2.5.5). */
#define PIB_GUID_BLOCK_ENTRIES      8
/*
 * SLtoVLMappingTable (IBTA 14.2.5.8): 16 SLs, 4 bits each, SL0 in [7:4] of byte 0.  On a
 * switch the modifier names the table: [15:8] the input port, [7:0] the output port, and with
 * OptimizedSLtoVLMappingProgramming [16] "every output port" and [17] "every input port".
 * On a CA the modifier is reserved.
 */
#define PIB_SL2VL_BYTES             8
#define PIB_SL2VL_ALL_OUT           (1u << 16)
#define PIB_SL2VL_ALL_IN            (1u << 17)
/*
 * VLArbitrationTable (IBTA 14.2.5.9): modifier [31:16] the block (1, 2: the low-priority
 * table's entries 0-31 and 32-63; 3, 4: the high-priority table's), [15:0] a switch's port
 * (reserved on a CA).  A block is 32 entries of two bytes: [3:0] of the first the VL, the
 * second the weight in units of 64 bytes (0: the entry is skipped).
 */
#define PIB_VLARB_BLOCK_ENTRIES     32
#define PIB_VLARB_LOW_0             1
#define PIB_VLARB_LOW_32            2
#define PIB_VLARB_HIGH_0            3
#define PIB_VLARB_HIGH_32           4
struct pib_vlarb_entry {
	pib_u8  vl;             /* [3:0] VL                                                    */
	pib_u8  weight;         /* units of 64 bytes                                           */
};

/* ---- Notice (IBTA 14.2.5.1): the data of a Trap(Notice) SMP, 64 bytes --------------------- */
#define PIB_NOTICE_GENERIC          0x80    /* generic_type [7]: IsGeneric                    */
#define PIB_NOTICE_TYPE_URGENT      1       /* generic_type [6:0]: Type                       */
#define PIB_NOTICE_TYPE_SECURITY    2
#define PIB_NOTICE_TYPE_INFO        4
#define PIB_TRAP_LINK_STATE_CHANGE  128     /* switch: a port's state changed                 */
#define PIB_TRAP_CAP_MASK_CHANGE    144     /* CapabilityMask or NodeDescription changed      */
#define PIB_TRAP_BAD_MKEY           256     /* an SMP with a wrong M_Key                      */
#define PIB_TRAP_BAD_PKEY           257     /* a packet with a P_Key not in the table (QP1)   */
#define PIB_TRAP144_NODE_DESC       0x01    /* change_flags: NodeDescription changed          */
struct pib_notice {
	pib_u8  generic_type;   /* 0x00 [7] IsGeneric, [6:0] Type                              */
	pib_u8  producer_hi;    /* 0x01 ProducerType [23:16] (PIB_NODE_TYPE_*, in [7:0] of it) */
	pib_u16 producer_lo_be; /* 0x02 ProducerType [15:0]                                    */
	pib_u16 trap_num_be;    /* 0x04 TrapNumber                                             */
	pib_u16 issuer_lid_be;  /* 0x06 IssuerLID                                              */
	pib_u16 toggle_count_be;/* 0x08 [15] NoticeToggle, [14:0] NoticeCount                  */
	pib_u8  details[54];    /* 0x0a DataDetails: per trap, below                           */
};

/* DataDetails of trap 144 (at Notice offset 0x0a) */
struct pib_trap144 {
	pib_u16 rsvd0;
	pib_u16 lid_be;         /* the port whose capabilities changed                         */
	pib_u8  rsvd1;
	pib_u8  local_changes;  /* [0] a local change other than CapabilityMask               */
	pib_u16 cap_mask_hi_be; /* the new CapabilityMask (split: the details are 2-aligned)   */
	pib_u16 cap_mask_lo_be;
	pib_u8  rsvd2;
	pib_u8  change_flags;   /* PIB_TRAP144_*                                               */
};

/* DataDetails of trap 256 */
struct pib_trap256 {
	pib_u16 rsvd0;
	pib_u16 lid_be;         /* the port that saw the bad M_Key                             */
	pib_u16 dr_slid_be;
	pib_u8  method;
	pib_u8  rsvd1;
	pib_u16 attr_id_be;
	pib_u16 attr_mod_hi_be;
	pib_u16 attr_mod_lo_be;
	pib_u16 mkey_be[4];     /* the M_Key that was offered                                  */
	pib_u8  rsvd2;
	pib_u8  dr_trunc_hop;   /* [7] DR notice, [6] return path truncated, [5:0] hop count   */
	pib_u8  dr_return_path[30];
};

/* DataDetails of trap 128 */
struct pib_trap128 {
	pib_u16 lid_be;         /* the switch                                                  */
};

/* ---- PMA MADs: 256 bytes (IBTA 16.1.1) ---------------------------------------------------- */
struct pib_pma_mad {
	struct pib_mad_hdr hdr;
	pib_u8  rsvd[40];
	pib_u8  data[192];
};

/* ClassPortInfo (IBTA 13.4.8.1), the part a PMA fills: CapabilityMask and RespTimeValue. */
#define PIB_PMA_CAP_ALL_PORT_SELECT 0x0100
#define PIB_PMA_CAP_EXT_WIDTH       0x0200  /* PortCountersExtended, all counters          */
#define PIB_PMA_CAP_XMIT_WAIT       0x1000  /* PortCounters:PortXmitWait (1 tick = 1 us)    */
struct pib_class_port_info {
	pib_u8  base_version;
	pib_u8  class_version;
	pib_u16 cap_mask_be;
	pib_u32 cap_mask2_resp_time_be;  /* [31:5] CapabilityMask2, [4:0] RespTimeValue        */
	pib_u8  rest[64];                /* redirect and trap addresses: unused (zero)         */
};

/*
 * PortCounters (IBTA 16.1.3.5): 32-bit data and packet counters, smaller error counters, all
 * saturating.  A Set writes zero to the counters named by CounterSelect (the rest of a Set's
 * data is ignored).  Data counters count octets / 4, LRH to ICRC.
 */
#define PIB_PMA_SEL_SYMBOL_ERROR        0x0001
#define PIB_PMA_SEL_LINK_RECOVERY       0x0002
#define PIB_PMA_SEL_LINK_DOWNED         0x0004
#define PIB_PMA_SEL_RCV_ERRORS          0x0008
#define PIB_PMA_SEL_RCV_REMPHYS_ERRORS  0x0010
#define PIB_PMA_SEL_RCV_SWITCH_RELAY    0x0020
#define PIB_PMA_SEL_XMIT_DISCARDS       0x0040
#define PIB_PMA_SEL_XMIT_CONSTRAINT     0x0080
#define PIB_PMA_SEL_RCV_CONSTRAINT      0x0100
#define PIB_PMA_SEL_LOCAL_LINK_INTEGRITY 0x0200
#define PIB_PMA_SEL_BUFFER_OVERRUN      0x0400
#define PIB_PMA_SEL_VL15_DROPPED        0x0800
#define PIB_PMA_SEL_XMIT_DATA           0x1000
#define PIB_PMA_SEL_RCV_DATA            0x2000
#define PIB_PMA_SEL_XMIT_PKTS           0x4000
#define PIB_PMA_SEL_RCV_PKTS            0x8000
#define PIB_PMA_SEL2_XMIT_WAIT          0x01    /* CounterSelect2 [0]: PortXmitWait */
struct pib_port_counters {
	pib_u8  rsvd0;
	pib_u8  port_select;
	pib_u16 counter_select_be;
	pib_u16 symbol_errors_be;
	pib_u8  link_recovery;
	pib_u8  link_downed;
	pib_u16 rcv_errors_be;
	pib_u16 rcv_remphys_errors_be;
	pib_u16 rcv_switch_relay_errors_be;
	pib_u16 xmit_discards_be;
	pib_u8  xmit_constraint_errors;
	pib_u8  rcv_constraint_errors;
	pib_u8  counter_select2;
	pib_u8  link_integrity_overrun;  /* [7:4] LocalLinkIntegrity, [3:0] BufferOverrun     */
	pib_u16 rsvd1;
	pib_u16 vl15_dropped_be;
	pib_u32 xmit_data_be;
	pib_u32 rcv_data_be;
	pib_u32 xmit_pkts_be;
	pib_u32 rcv_pkts_be;
	pib_u32 xmit_wait_be;
};

/* PortCountersExtended (IBTA 16.1.4.11): 64-bit counters, CounterSelect as below. */
#define PIB_PMA_SELX_XMIT_DATA          0x0001
#define PIB_PMA_SELX_RCV_DATA           0x0002
#define PIB_PMA_SELX_XMIT_PKTS          0x0004
#define PIB_PMA_SELX_RCV_PKTS           0x0008
#define PIB_PMA_SELX_UNI_XMIT_PKTS      0x0010
#define PIB_PMA_SELX_UNI_RCV_PKTS       0x0020
#define PIB_PMA_SELX_MULTI_XMIT_PKTS    0x0040
#define PIB_PMA_SELX_MULTI_RCV_PKTS     0x0080
struct pib_port_counters_ext {
	pib_u8  rsvd0;
	pib_u8  port_select;
	pib_u16 counter_select_be;
	pib_u32 rsvd1;
	pib_u32 ctr_be[8][2];   /* the eight counters above, in order: [i][0] high, [i][1] low */
};

/* ---- Congestion control MADs: 256 bytes (IBTA Annex A10.4) --------------------------------
 * The CC agent of a node (switch or CA) answers Get and Set of these attributes.  Every CC MAD
 * carries a CC_Key: a node whose CC_Key is not 0 answers a Set (and, with the protect bit, a
 * Get) only when the MAD's CC_Key matches; a mismatch is counted (CongestionKeyInfo:
 * Violations) and gets no answer.
 */
#define PIB_CC_ATTRS(X)                                                 \
	X(CLASS_PORT_INFO,    0x0001, "ClassPortInfo")                  \
	X(CONG_INFO,          0x0011, "CongestionInfo")                 \
	X(CONG_KEY_INFO,      0x0012, "CongestionKeyInfo")              \
	X(CONG_LOG,           0x0013, "CongestionLog")                  \
	X(SW_CONG_SETTING,    0x0014, "SwitchCongestionSetting")        \
	X(SW_PORT_CONG_SETTING, 0x0015, "SwitchPortCongestionSetting")  \
	X(CA_CONG_SETTING,    0x0016, "CACongestionSetting")            \
	X(CC_TABLE,           0x0017, "CongestionControlTable")         \
	X(TIME_STAMP,         0x0018, "TimeStamp")

#define PIB_CC_ATTR_ENUM_ENTRY(id, value, name) PIB_CC_ATTR_##id = value,
enum pib_cc_attr {
	PIB_CC_ATTRS(PIB_CC_ATTR_ENUM_ENTRY)
};
#undef PIB_CC_ATTR_ENUM_ENTRY

#define PIB_CC_DATA_SIZE             192
struct pib_cc_mad {
	struct pib_mad_hdr hdr;
	pib_u32 cc_key_hi_be;   /* 0x18 CC_Key                                                 */
	pib_u32 cc_key_lo_be;
	pib_u8  log[32];        /* 0x20 CongestionLog's first 32 bytes (other attributes: 0)   */
	pib_u8  data[PIB_CC_DATA_SIZE]; /* 0x40 the attribute (CongestionLog: from byte 32)    */
};

/* CongestionInfo (A10.4.3.3): what the node can do.  Get only. */
#define PIB_CC_INFO_CREDIT_STARVATION 0x01  /* cong_info [0]: a switch that does it (not pib) */
struct pib_cc_info {
	pib_u8  cong_info;
	pib_u8  rsvd;
	pib_u8  control_table_cap;      /* CA: 64-entry blocks of its CongestionControlTable   */
	pib_u8  rsvd1;
};

/* CongestionKeyInfo (A10.4.3.4) */
struct pib_cc_key_info {
	pib_u32 cc_key_hi_be;
	pib_u32 cc_key_lo_be;
	pib_u16 protect_be;             /* [15] CC_KeyProtectBit                                */
	pib_u16 lease_period_be;        /* seconds; 0: the protection never lapses              */
	pib_u16 violations_be;
	pib_u16 rsvd;
};
#define PIB_CC_KEY_PROTECT           0x8000

/*
 * CongestionLog (A10.4.3.5), Get only; a Get empties the log (its counter, its map and its
 * events).  It starts in the MAD's log area (32 bytes) and goes on in the data area: byte i of
 * the attribute is log[i] for i < 32, data[i - 32] after.  LogType 1 is a switch's, 2 a CA's.
 */
#define PIB_CC_LOG_SWITCH            1
#define PIB_CC_LOG_CA                2
#define PIB_CC_LOG_SW_EVENTS         15
#define PIB_CC_LOG_CA_EVENTS         13
struct pib_cc_log_sw_event {            /* a packet marked with FECN                           */
	pib_u16 slid_be;
	pib_u16 dlid_be;
	pib_u32 sl_be;                  /* [31:28] SL                                           */
	pib_u32 time_stamp_be;          /* TimeStamp units (1.024 us)                           */
};
struct pib_cc_log_sw {
	pib_u8  log_type;               /* PIB_CC_LOG_SWITCH                                    */
	pib_u8  cong_flags;             /* [7] CC_Key lease running ... : 0 here                */
	pib_u16 event_counter_be;       /* events since the last Get                            */
	pib_u32 time_stamp_be;          /* when it was read                                     */
	pib_u8  port_map[32];           /* as victim_mask: port p marked a packet with FECN     */
	struct pib_cc_log_sw_event events[PIB_CC_LOG_SW_EVENTS];   /* the newest first          */
};
struct pib_cc_log_ca_event {            /* a BECN that took an index to its trigger threshold  */
	pib_u32 local_qp_sl_type_be;    /* [31:8] the local QP, [7:4] SL, [3:0] service type    */
	pib_u32 remote_qp_be;           /* [31:8] the remote QP                                 */
	pib_u16 local_lid_be;
	pib_u16 remote_lid_be;
	pib_u32 time_stamp_be;
};
struct pib_cc_log_ca {
	pib_u8  log_type;               /* PIB_CC_LOG_CA                                        */
	pib_u8  cong_flags;
	pib_u16 event_counter_be;
	pib_u16 event_map_be;           /* bit sl: an event on that SL                          */
	pib_u16 rsvd;
	pib_u32 time_stamp_be;
	struct pib_cc_log_ca_event events[PIB_CC_LOG_CA_EVENTS];
};

/*
 * SwitchCongestionSetting (A10.4.3.6).  ControlMap says which parts a Set changes; a Get
 * shows them all, with the ControlMap of the last Set.
 */
#define PIB_CC_SW_CTL_VICTIM         0x01   /* Victim_Mask                                    */
#define PIB_CC_SW_CTL_CREDIT         0x02   /* Credit_Mask                                    */
#define PIB_CC_SW_CTL_THRESHOLD      0x04   /* Threshold and Packet_Size                      */
#define PIB_CC_SW_CTL_CS             0x08   /* CS_Threshold and CS_ReturnDelay                */
#define PIB_CC_SW_CTL_MARKING_RATE   0x10   /* Marking_Rate                                   */
struct pib_cc_sw_setting {
	pib_u32 control_map_be;
	pib_u8  victim_mask[32];        /* bit p (byte 31 - p / 8, bit p % 8): port p marks     */
	pib_u8  credit_mask[32];        /*   packets that meet congestion even as victims       */
	pib_u8  threshold;              /* [7:4] 0: no marking, 1 .. 15: least .. most eager    */
	pib_u8  packet_size;            /* 64-byte units: smaller packets are never marked      */
	pib_u16 cs_threshold_be;        /* [15:12]                                              */
	pib_u16 cs_return_delay_be;     /* [15:14] shift, [13:0] multiplier                     */
	pib_u16 marking_rate_be;        /* mean eligible packets between two marked ones        */
};

/*
 * SwitchPortCongestionSetting (A10.4.3.7): AttributeModifier is the block, 32 ports each
 * (block 0: ports 0-31).  An element that is Valid overrides the switch-wide Threshold,
 * Packet_Size and Marking_Rate for its port.
 */
#define PIB_CC_SWP_BLOCK_PORTS       32
#define PIB_CC_SWP_VALID             0x80   /* valid_type_threshold [7]                       */
#define PIB_CC_SWP_CREDIT_STARVATION 0x40   /* [6] 1: credit starvation parameters            */
#define PIB_CC_SWP_THRESHOLD         0x0f   /* [3:0]                                          */
struct pib_cc_swp_element {
	pib_u8  valid_type_threshold;
	pib_u8  packet_size;
	pib_u16 marking_rate_be;
};

/*
 * CACongestionSetting (A10.4.3.8): PortControl [0] 0: an index per QP, 1: per SL; one entry
 * per SL, ControlMap bit sl saying which a Set changes.
 */
#define PIB_CC_CA_PORT_SL_BASED      0x0001
#define PIB_CC_SLS                   16
struct pib_cc_ca_entry {
	pib_u16 ccti_timer_be;          /* 1.024 us units: the index falls by 1 this often      */
	pib_u8  ccti_increase;          /* added to the index for each BECN                     */
	pib_u8  trigger_threshold;      /* an index that reaches it logs an event               */
	pib_u8  ccti_min;               /* the index never falls below it                       */
	pib_u8  rsvd0;
	pib_u16 rsvd1;
};
struct pib_cc_ca_setting {
	pib_u16 port_control_be;
	pib_u16 control_map_be;
	struct pib_cc_ca_entry entries[PIB_CC_SLS];
};

/*
 * CongestionControlTable (A10.4.3.9): AttributeModifier is the block of 64 entries.  Entry i
 * is the injection rate delay at index i: [15:14] shift, [13:0] multiplier; CCTI_Limit (the
 * largest index in use) is the table's, as the last Set gave it.
 */
#define PIB_CC_CCT_BLOCK_ENTRIES     64
#define PIB_CC_CCT_SHIFT(e)          ((e) >> 14)
#define PIB_CC_CCT_MULT(e)           ((e) & 0x3fff)
struct pib_cc_table {
	pib_u16 ccti_limit_be;
	pib_u16 rsvd;
	pib_u16 entries_be[PIB_CC_CCT_BLOCK_ENTRIES];
};

/* TimeStamp (A10.4.3.10): a free-running clock of the node, in 1.024 us units.  Get only. */
struct pib_cc_time_stamp {
	pib_u32 value_be;
};

/* ---- MAD_IFC: the driver hands a MAD to the firmware's agents ------------------------------
 * PIB_CMD_MAD_IFC's mailbox (in.mbox) holds struct pib_mad_ifc_in: the MAD and, for a MAD that
 * came from the wire, what its receive completion said.  The firmware answers in
 * result0 with PIB_MAD_IFC_* and, with PIB_MAD_IFC_REPLY, writes the 256-byte response MAD to
 * resp_addr.  As ib_core's process_mad():
 *   REPLY     send the response (a GetResp, or a Set's, Trap's ... answer, status inside)
 *   CONSUMED  the MAD was for the firmware and needs no answer (a TrapRepress, a MAD refused
 *             for its M_Key), or must not reach any other agent
 *   0         not the firmware's: pass it on to the MAD agents (SMInfo, SA, CM, responses)
 */
#define PIB_MAD_IFC_REPLY           (1u << 0)
#define PIB_MAD_IFC_CONSUMED        (1u << 1)

#define PIB_MAD_IFC_F_WIRE          (1u << 0)   /* from the wire: the fields below are valid */
#define PIB_MAD_IFC_F_GRH           (1u << 1)   /* the MAD came with a GRH                   */
#define PIB_MAD_IFC_F_IGNORE_MKEY   (1u << 2)   /* local, from a trusted kernel agent        */
struct pib_mad_ifc_in {
	pib_u32 flags;          /* PIB_MAD_IFC_F_*                                             */
	pib_u8  port_num;       /* 1                                                           */
	pib_u8  sl;             /* the receive completion's SL                                 */
	pib_u16 slid;           /* ... source LID                                              */
	pib_u32 src_qp;         /* ... source QP                                               */
	pib_u16 pkey_index;     /* ... P_Key index                                             */
	pib_u8  dlid_path_bits; /* ... DLID path bits                                          */
	pib_u8  rsvd0;
	pib_u8  grh[40];        /* the GRH, with PIB_MAD_IFC_F_GRH                             */
	pib_u8  mad[PIB_MAD_SIZE];
};

PIB_STATIC_ASSERT(sizeof(struct pib_mad_hdr) == 24, "MAD header");
PIB_STATIC_ASSERT(sizeof(struct pib_smp) == PIB_MAD_SIZE, "SMP");
PIB_STATIC_ASSERT(sizeof(struct pib_node_info) == 40, "NodeInfo");
PIB_STATIC_ASSERT(sizeof(struct pib_switch_info) == 20, "SwitchInfo");
PIB_STATIC_ASSERT(sizeof(struct pib_port_info) == 64, "PortInfo");
PIB_STATIC_ASSERT(sizeof(struct pib_notice) == 64, "Notice");
PIB_STATIC_ASSERT(sizeof(struct pib_trap144) <= 54, "trap 144 details");
PIB_STATIC_ASSERT(sizeof(struct pib_trap256) == 54, "trap 256 details");
PIB_STATIC_ASSERT(sizeof(struct pib_pma_mad) == PIB_MAD_SIZE, "PMA MAD");
PIB_STATIC_ASSERT(sizeof(struct pib_class_port_info) == 72, "ClassPortInfo");
PIB_STATIC_ASSERT(sizeof(struct pib_port_counters) == 44, "PortCounters");
PIB_STATIC_ASSERT(sizeof(struct pib_port_counters_ext) == 72, "PortCountersExtended");
PIB_STATIC_ASSERT(sizeof(struct pib_mad_ifc_in) == 312, "MAD_IFC mailbox");
PIB_STATIC_ASSERT(sizeof(struct pib_cc_mad) == PIB_MAD_SIZE, "CC MAD");
PIB_STATIC_ASSERT(sizeof(struct pib_cc_key_info) == 16, "CongestionKeyInfo");
PIB_STATIC_ASSERT(sizeof(struct pib_cc_log_sw) == 40 + 12 * PIB_CC_LOG_SW_EVENTS, "switch log");
PIB_STATIC_ASSERT(sizeof(struct pib_cc_log_ca) == 12 + 16 * PIB_CC_LOG_CA_EVENTS, "CA log");
PIB_STATIC_ASSERT(sizeof(struct pib_cc_sw_setting) == 76, "SwitchCongestionSetting");
PIB_STATIC_ASSERT(sizeof(struct pib_cc_swp_element) == 4, "SwitchPortCongestionSetting");
PIB_STATIC_ASSERT(sizeof(struct pib_cc_ca_setting) == 132, "CACongestionSetting");
PIB_STATIC_ASSERT(sizeof(struct pib_cc_table) == 132, "CongestionControlTable");

#endif /* PIB_MAD_H */
