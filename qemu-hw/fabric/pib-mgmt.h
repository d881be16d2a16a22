/*
 * pib fabric - the management agents: the subnet management agent (SMA, pib-sma.c and
 * pib-sma-port.c), the performance management agent (PMA, pib-pma.c) and the congestion
 * control agent (CC, pib-cc.c)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The agents answer MADs (include/pib_mad.h) for a node: an HCA (one port) or a switch
 * (port 0, its management port, and its external ports).  They own the management state of
 * each port: the PortInfo fields an SM sets, the P_Key table, the M_Key and its lease, the
 * violation counters, the PMA's counter baselines, the trap in flight.  What only the node
 * itself can do (change the port's state, take a link down, raise an event for the driver,
 * transmit a trap, read its packet counters) it does through PibMgmtOps.  So the same agents
 * serve the HCA (hca/pib-port.c) and the switch (switch/pib-switch.c).
 *
 * Nothing here trusts a MAD: every field is checked before it is used, a bad one gets the
 * IBTA status in the response (or, for a wrong M_Key, no response, a counted violation and
 * a trap), and no MAD can make an agent touch memory outside the 256 bytes it was given.
 */
#ifndef HW_PIB_MGMT_H
#define HW_PIB_MGMT_H

#include "qemu/timer.h"
#include "../include/pib_mad.h"

/* What the ports advertise and accept. */
/*
 * GUIDInfo entries (GUIDCap) of a CA port: the port GUID and 7 alias GUIDs, one block, which
 * an SM assigns (IBTA 14.2.5.5; opensm does for the GUIDInfoRecords its clients ask the SA
 * for).  Entry i, with the port's GID prefix, is GID index i of the HCA's GID table
 * (PIB_GID_TBL_LEN).  A switch's port 0 has the port GUID only.
 */
#define PIB_MGMT_GUID_CAP       8
#define PIB_MGMT_SW_GUID_CAP    1
#define PIB_MGMT_MTU_CAP        5       /* MTUCap: 4096 */
/*
 * Virtual lanes: VLCap (and OperationalVLs) is an encoding, 1: VL0, 2: VL0-1, 3: VL0-3,
 * 4: VL0-7, 5: VL0-14; VL15 is the management lane on every port.  Each of the two
 * arbitration tables has PIB_MGMT_VLARB_CAP entries (VLArbitrationHigh/LowCap).
 */
#define PIB_MGMT_VL_CAP         3       /* VLCap: VL0-VL3 (and VL15) */
#define PIB_MGMT_VLARB_CAP      8
#define PIB_VL_MGMT             15
/* PortInfo:HOQLife: 4.096 us x 2^value; this and above mean infinite (the reset value). */
#define PIB_MGMT_HOQ_INFINITE   20
#define PIB_MGMT_WIDTH_4X       2       /* LinkWidthSupported/Active: 4X */
#define PIB_MGMT_SPEED_QDR      4       /* LinkSpeedSupported/Active: QDR (10 Gb/s) */
#define PIB_MGMT_RESP_TIME      18      /* RespTimeValue: 4.096 us * 2^18, about 1 s */
#define PIB_MGMT_TRAP_SENDS     4       /* a trap is sent this often without a repress */
/* PortInfo encodings the SMA resets a port to: widths 1X or 4X, speeds SDR/DDR/QDR enabled. */
#define SMA_WIDTH_SUPPORTED     3
#define SMA_SPEED_SUPPORTED     7
#define SMA_VL_STALL_COUNT      7       /* PortInfo:VLStallCount's reset value */
#define SMA_LINK_DOWN_POLLING   2

/* Why a port's management state changed: what the node tells its driver (PibMgmtOps). */
#define PIB_MGMT_CHG_LID        (1u << 0)   /* LID or LMC */
#define PIB_MGMT_CHG_SM         (1u << 1)   /* MasterSMLID or MasterSMSL */
#define PIB_MGMT_CHG_PKEY       (1u << 2)   /* the P_Key table */
#define PIB_MGMT_CHG_REREG      (1u << 3)   /* ClientReregister: re-register with the SA */
#define PIB_MGMT_CHG_GID        (1u << 4)   /* GidPrefix, or an alias GUID (GUIDInfo) */
#define PIB_MGMT_CHG_HOQ        (1u << 5)   /* HOQLife (a switch port's discard deadline) */

typedef struct PibMgmtNode PibMgmtNode;
typedef struct PibMgmtPort PibMgmtPort;

/*
 * A port's packet counters as the node counts them, for the PMA: 64-bit, since the node was
 * reset.  Data counts octets, LRH to ICRC.
 */
typedef struct PibMgmtCounters {
    uint64_t xmit_data, rcv_data;
    uint64_t xmit_pkts, rcv_pkts;
    uint64_t uni_xmit_pkts, uni_rcv_pkts;
    uint64_t multi_xmit_pkts, multi_rcv_pkts;
    uint64_t symbol_errors;         /* link framing lost */
    uint64_t link_recovery;         /* link retrained after a framing error */
    uint64_t link_downed;
    uint64_t rcv_errors;            /* malformed, bad DLID, unknown opcode */
    uint64_t xmit_discards;         /* port down, queue full */
    uint64_t rcv_switch_relay;      /* a switch could not forward it (LFT, port) */
    uint64_t xmit_constraint;       /* partition enforcement on the way out (switch) */
    uint64_t rcv_constraint;        /* partition enforcement (P_Key) */
    uint64_t vl15_dropped;          /* SMPs with nowhere to go */
    uint64_t buffer_overrun;        /* data beyond the credits the port granted */
    uint64_t xmit_wait;             /* ticks (1 us) a packet waited for credits */
} PibMgmtCounters;

/* The PMA's counters of one port: values = raw - base, saturating at the IBTA width. */
#define PIB_PMA_CTRS(X)                                                     \
    X(XMIT_DATA, xmit_data) X(RCV_DATA, rcv_data)                           \
    X(XMIT_PKTS, xmit_pkts) X(RCV_PKTS, rcv_pkts)                           \
    X(UNI_XMIT_PKTS, uni_xmit_pkts) X(UNI_RCV_PKTS, uni_rcv_pkts)           \
    X(MULTI_XMIT_PKTS, multi_xmit_pkts) X(MULTI_RCV_PKTS, multi_rcv_pkts)   \
    X(SYMBOL_ERRORS, symbol_errors) X(LINK_RECOVERY, link_recovery)         \
    X(LINK_DOWNED, link_downed) X(RCV_ERRORS, rcv_errors)                   \
    X(XMIT_DISCARDS, xmit_discards) X(RCV_CONSTRAINT, rcv_constraint)       \
    X(RCV_SWITCH_RELAY, rcv_switch_relay) X(XMIT_CONSTRAINT, xmit_constraint) \
    X(VL15_DROPPED, vl15_dropped) X(BUFFER_OVERRUN, buffer_overrun)         \
    X(XMIT_WAIT, xmit_wait)
#define PIB_PMA_CTR_ENUM_ENTRY(id, field) PIB_PMA_CTR_##id,
enum pib_pma_ctr {
    PIB_PMA_CTRS(PIB_PMA_CTR_ENUM_ENTRY)
    PIB_PMA_CTR_MAX
};
#undef PIB_PMA_CTR_ENUM_ENTRY

typedef struct PibMgmtOps {
    /* IBTA PortState (PIB_PORT_*) and PortPhysicalState (PIB_PHYS_*) of port p now. */
    uint8_t (*port_state)(PibMgmtPort *p);
    uint8_t (*phys_state)(PibMgmtPort *p);
    /*
     * An SM asked for a new PortState (DOWN, ARMED or ACTIVE) or PortPhysicalState (POLLING
     * or DISABLED), already checked against the IBTA's transitions.
     */
    void (*set_port_state)(PibMgmtPort *p, uint8_t state);
    void (*set_phys_state)(PibMgmtPort *p, uint8_t phys);
    /* The SM changed what PIB_MGMT_CHG_* says (after the Set is applied). */
    void (*changed)(PibMgmtPort *p, unsigned what);
    /* Send a trap SMP (LID-routed, QP0 to QP0) out of port p to dlid on sl. */
    void (*send_trap)(PibMgmtPort *p, const struct pib_smp *smp, uint16_t dlid,
                      uint8_t sl);
    void (*read_counters)(PibMgmtPort *p, PibMgmtCounters *c);
} PibMgmtOps;

/* A trap the SMA sends until the SM represses it (IBTA 13.4.9, 14.2.5.1). */
typedef struct PibMgmtTrap {
    bool pending;
    struct pib_smp smp;
    uint16_t dlid;
    uint8_t sl;
    unsigned sends;             /* times sent so far */
    QEMUTimer *timer;           /* the next resend */
} PibMgmtTrap;

struct PibMgmtPort {
    PibMgmtNode *node;
    uint8_t num;                /* port number: 1.., a switch's management port 0 */
    uint64_t guid;

    /* PortInfo fields the SM sets (the others come from PibMgmtOps or are constants). */
    uint64_t mkey;
    uint64_t gid_prefix;
    uint16_t lid;
    uint16_t sm_lid;
    uint32_t cap_mask;          /* IB_PORT_* bits: the node's, plus what the driver set */
    uint16_t mkey_lease;        /* seconds, 0: the lease never runs out */
    uint8_t mkey_protect;       /* M_KeyProtectBits 0..3 */
    uint8_t lmc;
    uint8_t sm_sl;
    uint8_t neighbor_mtu;
    uint8_t subnet_timeout;
    uint8_t link_width_enabled;
    uint8_t link_speed_enabled;
    uint8_t link_down_default;
    uint8_t vl_high_limit;
    uint8_t operational_vls;
    uint8_t hoq_life;
    uint8_t vl_stall_count;     /* HOQ discards in a row that stall a VL; 0: never */
    uint8_t enforce;            /* opvls_enforce [3:0]: partition/raw filtering bits */
    uint8_t phy_overrun_thresh; /* LocalPhyErrors, OverrunErrors thresholds */
    uint16_t mkey_violations;
    uint16_t pkey_violations;
    uint16_t qkey_violations;
    uint16_t pkeys[PIB_PKEY_TBL_LEN];
    uint64_t alias_guids[PIB_MGMT_GUID_CAP];   /* GUIDInfo; [0] unused: the port GUID */
    uint8_t sl2vl[PIB_SL2VL_BYTES];     /* a CA's (a switch's: PibMgmtSwitch.sl2vl) */
    struct pib_vlarb_entry vlarb_low[PIB_MGMT_VLARB_CAP];
    struct pib_vlarb_entry vlarb_high[PIB_MGMT_VLARB_CAP];
    QEMUTimer *mkey_lease_timer;    /* runs after a violation, while lease > 0 */

    /* PMA: the raw counter values at the last reset of each counter */
    uint64_t pma_base[PIB_PMA_CTR_MAX];

    PibMgmtTrap trap;
};

/*
 * A switch's forwarding state: what SwitchInfo, LinearForwardingTable and
 * MulticastForwardingTable show and an SM sets (pib-sma.c), and what the switch forwards by
 * (switch/pib-switch.c).  Every unicast LID has an LFT entry; MFT entries are port masks.
 */
#define PIB_SW_MAX_PORTS        32      /* external ports: with port 0, three MFT positions */
#define PIB_SW_LFT_CAP          0xc000  /* LinearFDBCap: LIDs 0 .. 0xbfff */
#define PIB_SW_MFT_CAP          1024    /* MulticastFDBCap: MLIDs 0xc000 .. 0xc3ff */
#define PIB_SW_LIFE_TIME        15      /* LifeTimeValue after reset (IBTA 14.2.5.4) */
typedef struct PibMgmtSwitch {
    uint8_t lft[PIB_SW_LFT_CAP];        /* port per LID, PIB_LFT_NO_PORT: drop */
    uint64_t mft[PIB_SW_MFT_CAP];       /* bit p: forward out of port p (0..32) */
    uint16_t lft_top;
    uint16_t mft_top;
    uint8_t life_time;                  /* [4:0] LifeTimeValue */
    bool port_state_change;             /* SwitchInfo:PortStateChange */
    uint8_t def_mcast_pri_port;
    uint8_t def_mcast_not_pri_port;
    /* SLtoVLMappingTable per (input port, output port): the VL a packet leaves on */
    uint8_t sl2vl[PIB_SW_MAX_PORTS + 1][PIB_SW_MAX_PORTS + 1][PIB_SL2VL_BYTES];
} PibMgmtSwitch;

/*
 * The MFT bits that name ports of a switch with nports external ports: port 0 (bit 0) and
 * ports 1 .. nports.  A switch of 32 ports has 33: its port 32 is bit 0 of PortMask position 2
 * (IBTA 14.2.5.12), so an entry is 64 bits.
 */
static inline uint64_t pib_mgmt_mft_ports(unsigned nports)
{
    return (2ull << nports) - 1;
}
QEMU_BUILD_BUG_ON(PIB_SW_MAX_PORTS >= 63);

/* The data VLs an OperationalVLs (or VLCap) encoding names: 1, 2, 4, 8 or 15; 0 for none. */
static inline unsigned pib_mgmt_vls(uint8_t enc)
{
    return enc == 0 ? 0 : enc >= 5 ? 15 : 1u << (enc - 1);
}

/* The VL an SLtoVLMappingTable gives sl. */
static inline uint8_t pib_mgmt_sl2vl(const uint8_t *table, uint8_t sl)
{
    return (table[(sl & 0xf) / 2] >> (sl & 1 ? 0 : 4)) & 0xf;
}

/* May a data packet use vl on port p: one of its OperationalVLs (never VL15)? */
static inline bool pib_mgmt_data_vl_ok(const PibMgmtPort *p, uint8_t vl)
{
    return vl < pib_mgmt_vls(p->operational_vls);
}

/*
 * Congestion control (IBTA Annex A10): what a node's CC agent (pib-cc.c) holds.  The settings
 * are kept as an SM wrote them (wire format, include/pib_mad.h): a switch's, or its one
 * port's for a CA.  The logs are the node's to fill.  All zero after a reset.
 */
#define PIB_CC_CCT_CAP_BLOCKS   2       /* CongestionInfo:ControlTableCap: 128 entries */
typedef struct PibMgmtCc {
    uint64_t key;                       /* CC_Key; 0: no checks */
    bool key_protect;
    uint16_t key_lease;                 /* CC_KeyLeasePeriod, seconds; 0: never lapses */
    uint16_t key_violations;
    int64_t key_lease_until;            /* virtual ns the protect bit lapses; 0: no countdown */
    struct pib_cc_sw_setting sw;                        /* a switch's */
    struct pib_cc_swp_element swp[PIB_SW_MAX_PORTS + 1];
    struct pib_cc_ca_setting ca;                        /* a CA's */
    uint16_t ccti_limit;
    uint16_t cct[PIB_CC_CCT_CAP_BLOCKS * PIB_CC_CCT_BLOCK_ENTRIES];
    struct pib_cc_log_sw log_sw;        /* since the last Get; a switch's */
    struct pib_cc_log_ca log_ca;        /* a CA's */
    uint16_t mark_skip[PIB_SW_MAX_PORTS + 1];   /* eligible packets since a port marked */
} PibMgmtCc;

struct PibMgmtNode {
    const PibMgmtOps *ops;
    void *opaque;               /* the node's own state, for the ops */
    uint8_t node_type;          /* PIB_NODE_TYPE_* */
    uint8_t num_ports;          /* external ports; a switch also has port 0 */
    uint64_t node_guid;
    uint64_t sys_image_guid;
    uint16_t device_id;
    uint32_t revision;
    uint32_t vendor_id;         /* OUI */
    char node_desc[PIB_SMP_DATA_SIZE];
    uint64_t next_tid;          /* transaction IDs of our traps */
    PibMgmtPort **ports;        /* [0 .. num_ports]; an HCA has no port 0 (NULL) */
    PibMgmtSwitch *sw;          /* a switch's tables; NULL on an HCA */
    PibMgmtCc cc;               /* congestion control */
};

/* GUIDCap: how many GUIDInfo entries the node's ports have. */
static inline unsigned pib_mgmt_guid_cap(const PibMgmtNode *n)
{
    return n->node_type == PIB_NODE_TYPE_SWITCH ? PIB_MGMT_SW_GUID_CAP : PIB_MGMT_GUID_CAP;
}

/* GUIDInfo entry i of port p: the port GUID, an alias an SM assigned, or 0 (none). */
static inline uint64_t pib_mgmt_port_guid(const PibMgmtPort *p, unsigned i)
{
    return i == 0 ? p->guid : i < pib_mgmt_guid_cap(p->node) ? p->alias_guids[i] : 0;
}

/* Where a MAD came from, as its receive completion (or the driver) says. */
typedef struct PibMadCtx {
    uint8_t port;               /* the port it arrived on */
    bool wire;                  /* from the wire: slid and the rest are valid */
    bool ignore_mkey;           /* a local, trusted kernel agent */
    uint16_t slid;
    uint8_t sl;
} PibMadCtx;

/* pib-sma.c */
void pib_mgmt_switch_reset(PibMgmtSwitch *sw);
uint32_t pib_sma_process(PibMgmtNode *n, const PibMadCtx *ctx, const uint8_t *in,
                         uint8_t *out);
const char *pib_smp_attr_name(uint16_t attr);

/* pib-sma-port.c */
extern const VMStateDescription vmstate_pib_mgmt_port;   /* migration */
/*
 * Migration: a field of _state saved as the bytes it holds (wire-format tables, a
 * NodeDescription), whatever its C type.
 */
#define PIB_VMSTATE_BYTES(_state, _field) {                                     \
    .name = #_field,                                                            \
    .offset = offsetof(_state, _field),                                         \
    .size = sizeof(((_state *)0)->_field),                                      \
    .info = &vmstate_info_buffer,                                               \
    .flags = VMS_BUFFER,                                                        \
}
void pib_mgmt_port_init(PibMgmtNode *n, PibMgmtPort *p, uint8_t num, uint64_t guid);
void pib_mgmt_port_reset(PibMgmtPort *p);
void pib_mgmt_port_fini(PibMgmtPort *p);
bool pib_sma_trap(PibMgmtPort *p, uint8_t type, uint16_t trap_num,
                  const void *details, size_t len);
void pib_sma_cap_changed(PibMgmtPort *p, bool node_desc);
int pib_mgmt_pkey_find(const PibMgmtPort *p, uint16_t pkey);
bool pib_mgmt_pkey_match(uint16_t a, uint16_t b);

/* pib-pma.c */
uint32_t pib_pma_process(PibMgmtNode *n, const PibMadCtx *ctx, const uint8_t *in,
                         uint8_t *out);
const char *pib_pma_attr_name(uint16_t attr);

/* pib-cc.c */
void pib_cc_reset(PibMgmtCc *cc);
uint32_t pib_cc_process(PibMgmtNode *n, const PibMadCtx *ctx, const uint8_t *in,
                        uint8_t *out);
const char *pib_cc_attr_name(uint16_t attr);
uint32_t pib_cc_time_stamp(void);
bool pib_cc_needed(const PibMgmtCc *cc);
bool pib_cc_sw_mark(PibMgmtCc *cc, uint8_t port, uint32_t ahead, bool victim, uint32_t len);
void pib_cc_sw_log(PibMgmtCc *cc, uint8_t port, uint16_t slid, uint16_t dlid, uint8_t sl);
void pib_cc_ca_log(PibMgmtCc *cc, uint32_t lqpn, uint8_t sl, uint8_t type, uint16_t llid,
                   uint16_t rlid, uint32_t rqpn);
extern const VMStateDescription vmstate_pib_mgmt_cc;   /* migration */

#endif /* HW_PIB_MGMT_H */
