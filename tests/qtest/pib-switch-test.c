/*
 * QTest testcase for the pib switch (-device pib-switch, qemu-hw/switch/pib-switch.c)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * One QEMU holds a three-port switch and two pib HCAs: HCA A (LID 1) on port 1, HCA B
 * (LID 2) on port 2.  This process is the node on port 3 and plays the subnet manager
 * (LID SW_SM_LID): it speaks the link protocol and sends SMPs itself, as a CA's QP0 would.
 *
 *   /pib/switch/dr          directed-route SMPs: NodeInfo (type 2, LocalPortNum = the arrival
 *                           port), a two-hop path out of and back into port 3 (the hop
 *                           pointer, InitialPath, ReturnPath and the D bit at each step), a hop
 *                           count over 63 and a path to a port that does not exist dropped
 *                           and counted; attributes with bad modifiers answered with status
 *                           0x1c (LFT block, MFT block, PortInfo port)
 *   /pib/switch/hca-qp0     HCA A's own QP0 sends a directed-route NodeInfo to the switch;
 *                           the answer (a switch, reached on port 1) arrives on that QP0
 *   /pib/switch/forwarding  the SM programs the switch (its LID, LinearFDBTop, the LFT) and
 *                           brings ports 1-3 to ACTIVE; an RC SEND from A to B crosses the
 *                           switch (bytes compared); frames to an LFT entry of 255, to a port
 *                           that does not exist and back out of their arrival port are
 *                           dropped, each counted under its reason; a LID-routed SMP to the
 *                           switch's LID is answered; a multicast packet reaches every port
 *                           of its MFT entry but the arrival port, an MLID without ports is
 *                           a counted drop; a port that goes down and comes back raises
 *                           trap 128 to the SM and PortStateChange, which the SM clears
 *   /pib/switch/stopped     a cable pulled while the machine is stopped: the switch sends no
 *                           trap 128 and its port does not go down until the machine runs;
 *                           then LinkDowned is 1 and the trap comes (a migration's source)
 *   /pib/switch/garbage     port 3's peer sends a bad frame header: the switch counts a
 *                           symbol error and a link error recovery on port 3 (its PMA, asked
 *                           with a GMP), drops the connection, and port 3 retrains when the
 *                           peer dials again; an RC SEND crosses ports 1 and 2 meanwhile
 *   /pib/switch/partition   partition enforcement at switch ports: SwitchInfo's caps, a P_Key
 *                           outside port 3's table dropped there (PortRcvConstraintErrors),
 *                           one outside port 1's dropped on the way out
 *                           (PortXmitConstraintErrors), a limited member passing, SMPs never
 *                           filtered, an LFT miss in PortRcvSwitchRelayErrors
 *   /pib/switch/vls         SLtoVLMappingTable per (input, output) port and with the "all
 *                           ports" bits; a packet leaves on the VL its pair's table gives its
 *                           SL; an SL mapped to VL15 or beyond the output port's
 *                           OperationalVLs, and data arriving on a VL the input port does not
 *                           operate, are dropped and counted (PortRcvErrors)
 *   /pib/switch/credits     credit-based flow control: one VL without credit waits alone
 *                           (PortXmitWait) and loses nothing; a receiver that holds its
 *                           credits backs the switch up, and a sender that ignores them is
 *                           dropped and counted (ExcessiveBufferOverrunErrors)
 *   /pib/switch/hoq         HOQLife: packets stuck at the head of an output VL queue (the
 *                           receiver grants no credit) are discarded once the SM set a
 *                           lifetime, counted in PortXmitDiscards; never at the reset value
 *   /pib/switch/vlarb       VL arbitration at a congested output: weights 192:64 give VL0
 *                           three packets for one of VL1, and swapped, the other way round;
 *                           a high-priority VL takes the port (VLHighLimit 255), or one
 *                           packet per turn of the low table (VLHighLimit 0)
 *   /pib/switch/dr-chain    two switches in two QEMU processes joined by a unix socket:
 *                           directed-route SMPs of two and three hops cross both, and each
 *                           answer retraces the ReturnPath the hops recorded
 *   /pib/switch/migration   a switch of its own (-machine none) that the SM programmed (LID,
 *                           LFT, an MFT entry, ports ACTIVE; its CC agent's
 *                           SwitchCongestionSetting and a SwitchPortCongestionSetting, which
 *                           come back with the load): a live migration paused before
 *                           the switchover and cancelled sends each peer a MOVE notice with a
 *                           hold, then one of 0, and the switch forwards on; then it is saved
 *                           to a file (QEMU's migration, as `pibvm snapshot save` does; each
 *                           peer gets a notice with a hold) and loaded into a new
 *                           QEMU: its HELLOs carry the tokens it had; ports 1 and 2, whose
 *                           peers come back with theirs, are ACTIVE without the SM (no
 *                           LinkDowned), port 3's peer comes back as another port and
 *                           retrains; the tables, the switch's LID and the PMA's counts are the
 *                           saved ones and a packet is forwarded by them.  Streams with a port
 *                           state out of range, an MFT entry naming a port the switch lacks,
 *                           or saved from another switch are refused (the load exits 1); 48
 *                           streams with random changes are each refused or loaded and run
 *                           (sw_mig_mutate: a fuzzer of the switch's section)
 *   /pib/switch/mft-32      a switch of 32 ports: MFT position 2 holds port 32 (masked to the
 *                           ports there are), position 3 is INVALID_VALUE; a multicast packet
 *                           to ports 1, 3 and 32 reaches the HCAs on 1 and 32
 *   /pib/switch/fecn        congestion control: packets that wait behind others at a port
 *                           with Threshold 15 leave with FECN, logged in CongestionLog (read
 *                           and emptied); a port's own element with Threshold 0, or a victim
 *                           port out of Victim_Mask, marks nothing
 */

#include "qemu/osdep.h"
#include <sys/socket.h>
#include <poll.h>
#include <glib/gstdio.h>

#include "pib-qtest.h"

#define SW_NODE_GUID    0x0002c90300ee0000ull
#define SW_PORTS        3
#define SW_TEST_PORT    3           /* this process */
#define SW_SM_LID       9           /* this process, as the SM */
#define SW_LID          7           /* what the SM gives the switch */
#define SW_MAD_PKT_LEN  (8 + 12 + 8 + PIB_MAD_SIZE)   /* LRH, BTH, DETH, MAD */

typedef struct Sw {
    QOSState *qs;
    char *dir;
    PibDev a, b;
    int fd;                 /* port 3: this process */
    int b_port;             /* B's port: 2, or another of a larger switch */
} Sw;

static char *sw_sock(Sw *s, const char *name)
{
    return g_build_filename(s->dir, name, NULL);
}

/*
 * A switch of nports ports (with these more properties, ",name=value..."), HCA A on port 1, B on
 * port b_port, and this process on port 3; our HELLO has these PIB_HELLO_F_* flags.
 */
static void sw_boot_ports(Sw *s, uint32_t hello_flags, const char *sw_props, int nports,
                          int b_port)
{
    g_autofree char *p1 = NULL, *p2 = NULL, *p3 = NULL, *args = NULL;
    PibDev *devs[2] = { &s->a, &s->b };
    int i;

    memset(s, 0, sizeof(*s));
    s->dir = g_dir_make_tmp("pib-switch-XXXXXX", NULL);
    p1 = sw_sock(s, "p1.sock");
    p2 = sw_sock(s, "p2.sock");
    p3 = sw_sock(s, "p3.sock");
    /* The switch's ports listen; the HCAs dial them (and redial, as a cable would). */
    args = g_strdup_printf(
        "-m 256M "
        "-chardev socket,id=s1,path=%s,server=on,wait=off "
        "-chardev socket,id=s2,path=%s,server=on,wait=off "
        "-chardev socket,id=s3,path=%s,server=on,wait=off "
        "-chardev socket,id=ca,path=%s," PIB_CHR_RECONNECT_1S " "
        "-chardev socket,id=cb,path=%s," PIB_CHR_RECONNECT_1S " "
        "-device pib-switch,id=sw0,ports=%d,node-guid=0x%" PRIx64 ",port1=s1,port%d=s2,port3=s3%s "
        "-device pib-hca,addr=4.0,id=pa,chardev=ca,lid=1 "
        "-device pib-hca,addr=5.0,id=pb,chardev=cb,lid=2",
        p1, p2, p3, p1, p2, nports, (uint64_t)SW_NODE_GUID, b_port, sw_props);
    s->b_port = b_port;
    s->qs = pib_boot(args);
    pib_open(&s->a, s->qs, PIB_DEVFN_A);
    pib_open(&s->b, s->qs, PIB_DEVFN_B);
    for (i = 0; i < 2; i++) {
        pib_enable(devs[i], 16, 64);
    }
    s->fd = peer_connect(p3);
    peer_expect_hello(s->fd, SW_NODE_GUID);
    peer_send_hello_flags(s->fd, hello_flags);
    /* An HCA with a `lid` needs no SM: ACTIVE once its cable trained. */
    pib_wait_port_state(&s->a, PIB_PORT_ACTIVE);
    pib_wait_port_state(&s->b, PIB_PORT_ACTIVE);
}

static void sw_boot_ex(Sw *s, uint32_t hello_flags, const char *sw_props)
{
    sw_boot_ports(s, hello_flags, sw_props, SW_PORTS, 2);
}

static void sw_boot(Sw *s)
{
    sw_boot_ex(s, 0, "");
}

static void sw_shutdown(Sw *s)
{
    const char *names[] = { "p1.sock", "p2.sock", "p3.sock" };
    int i;

    close(s->fd);
    pib_close(&s->a);
    pib_close(&s->b);
    qtest_shutdown(s->qs);
    for (i = 0; i < 3; i++) {
        g_autofree char *p = sw_sock(s, names[i]);

        g_unlink(p);
    }
    g_rmdir(s->dir);
    g_free(s->dir);
}

/* A drop counter of the switch (a QOM property). */
static uint64_t sw_counter(Sw *s, const char *name)
{
    return qom_get_u64(s->qs->qts, "/machine/peripheral/sw0", name);
}

/*
 * Packets on port 3
 */

/* One UD packet on vl and sl with P_Key pkey, LRH to payload, to QP dqpn. */
static void sw_send_ud_vl(Sw *s, uint16_t dlid, uint16_t slid, uint8_t vl, uint8_t sl,
                          uint32_t dqpn, uint16_t pkey, const void *payload, uint16_t paylen)
{
    uint16_t len = 8 + 12 + 8 + paylen;
    g_autofree uint8_t *f = g_malloc0(PIB_LINK_HDR_LEN + len);
    struct pib_link_hdr hdr = {
        .magic = PIB_LINK_MAGIC,
        .type = PIB_FRAME_PACKET,
        .length_be = cpu_to_be16(len),
    };
    uint8_t *b = f + PIB_LINK_HDR_LEN;
    struct pib_lrh *lrh = (struct pib_lrh *)b;
    struct pib_bth *bth = (struct pib_bth *)(b + 8);

    g_assert_cmpuint(paylen % 4, ==, 0);
    memcpy(f, &hdr, sizeof(hdr));
    lrh->vl_lver = vl << 4;
    lrh->sl_lnh = sl << 4 | PIB_LNH_IBA_LOCAL;
    lrh->dlid_be = cpu_to_be16(dlid);
    lrh->pktlen_be = cpu_to_be16(len / 4);
    lrh->slid_be = cpu_to_be16(slid);
    bth->opcode = PIB_OP_UD_SEND_ONLY;
    bth->pkey_be = cpu_to_be16(pkey);
    bth->dqpn_be = cpu_to_be32(dqpn);
    stl_be_p(b + 20, dqpn == 0 ? 0 : 0x80010000u);    /* DETH: Q_Key */
    stl_be_p(b + 24, dqpn == 0 ? 0 : 1);              /* DETH: source QP */
    memcpy(b + 28, payload, paylen);
    peer_write(s->fd, f, PIB_LINK_HDR_LEN + len);
}

/* One UD packet with P_Key pkey: QP0 on VL15 for an SMP, else QP dqpn on VL0, SL0. */
static void sw_send_ud_pkey(Sw *s, uint16_t dlid, uint16_t slid, bool vl15, uint32_t dqpn,
                            uint16_t pkey, const void *payload, uint16_t paylen)
{
    sw_send_ud_vl(s, dlid, slid, vl15 ? 15 : 0, 0, dqpn, pkey, payload, paylen);
}

static void sw_send_ud(Sw *s, uint16_t dlid, uint16_t slid, bool vl15, uint32_t dqpn,
                       const void *payload, uint16_t paylen)
{
    sw_send_ud_pkey(s, dlid, slid, vl15, dqpn, PIB_DEFAULT_PKEY, payload, paylen);
}

/*
 * The next SMP packet on port 3 within the timeout, a trap or (trap false) anything else; its
 * LRH DLID in *dlid.
 */
static bool sw_recv_smp_ex(Sw *s, struct pib_smp *smp, uint16_t *dlid, int timeout_ms,
                           bool trap)
{
    uint8_t buf[PIB_LINK_MAX_PAYLOAD];
    struct pib_link_hdr hdr;
    struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
    uint16_t len;

    for (;;) {
        if (poll(&pfd, 1, timeout_ms) != 1) {
            return false;
        }
        len = peer_read_frame(s->fd, &hdr, buf, sizeof(buf));
        if (hdr.type != PIB_FRAME_PACKET || len != SW_MAD_PKT_LEN || buf[0] >> 4 != 15) {
            continue;                   /* not an SMP: a trap's cousins, HCA traffic */
        }
        if ((buf[28 + 3] == PIB_MAD_METHOD_TRAP) != trap) {
            continue;                   /* (not) a trap from the switch: not what we wait for */
        }
        memcpy(smp, buf + 28, sizeof(*smp));
        if (dlid) {
            *dlid = lduw_be_p(buf + 2);
        }
        return true;
    }
}

/*
 * The next trap on port 3 (within a hang guard) is trap 128 (IBTA 14.2.5.1) to the SM: a
 * Notice from the switch's LID, its producer a switch, its details the switch's LID.  The
 * trap's SMP is in *trap.
 */
static void sw_expect_link_trap(Sw *s, struct pib_smp *trap)
{
    struct pib_notice notice;
    uint16_t dlid;

    g_assert_true(sw_recv_smp_ex(s, trap, &dlid, 5000, true));
    g_assert_cmphex(dlid, ==, SW_SM_LID);
    g_assert_cmphex(trap->hdr.mgmt_class, ==, PIB_MGMT_CLASS_SUBN_LID);
    g_assert_cmphex(be16_to_cpu(trap->hdr.attr_id_be), ==, PIB_SMP_ATTR_NOTICE);
    memcpy(&notice, trap->data, sizeof(notice));
    g_assert_cmpuint(be16_to_cpu(notice.trap_num_be), ==, PIB_TRAP_LINK_STATE_CHANGE);
    g_assert_cmpuint(be16_to_cpu(notice.issuer_lid_be), ==, SW_LID);
    g_assert_cmpuint(be16_to_cpu(notice.producer_lo_be), ==, PIB_NODE_TYPE_SWITCH);
    g_assert_cmpuint(lduw_be_p(notice.details), ==, SW_LID);
}

/*
 * A directed-route SMP to the switch, one hop out of port 3, as our CA's QP0 sends it: the
 * sender counted its own hop (hop pointer 1, InitialPath[1] = our port).
 */
static bool sw_recv_smp(Sw *s, struct pib_smp *smp, uint16_t *dlid, int timeout_ms)
{
    return sw_recv_smp_ex(s, smp, dlid, timeout_ms, false);
}

static struct pib_smp sw_dr_new(uint8_t method, uint16_t attr, uint32_t mod)
{
    struct pib_smp smp = peer_smp_new(PIB_MGMT_CLASS_SUBN_DR, method, attr, mod);

    smp.hdr.class_spec_be = cpu_to_be16(1 << 8 | 1);
    smp.dr_slid_be = cpu_to_be16(PIB_LID_PERMISSIVE);
    smp.dr_dlid_be = cpu_to_be16(PIB_LID_PERMISSIVE);
    smp.initial_path[1] = 1;
    return smp;
}

/* A round trip that must be answered: the status without the D bit. */
static uint16_t sw_dr(Sw *s, struct pib_smp *req, struct pib_smp *resp)
{
    uint16_t dlid;

    sw_send_ud(s, PIB_LID_PERMISSIVE, PIB_LID_PERMISSIVE, true, 0, req, sizeof(*req));
    g_assert_true(sw_recv_smp(s, resp, &dlid, 5000));
    g_assert_cmphex(dlid, ==, PIB_LID_PERMISSIVE);
    g_assert_cmphex(resp->hdr.method, ==, PIB_MAD_METHOD_GET_RESP);
    g_assert_cmphex(resp->hdr.tid_lo_be, ==, req->hdr.tid_lo_be);
    g_assert_cmphex(be16_to_cpu(resp->hdr.status_be) & PIB_SMP_STATUS_DIRECTION, ==,
                    PIB_SMP_STATUS_DIRECTION);
    /* C14-13:1: the switch took the hop back; the hop count is untouched. */
    g_assert_cmphex(be16_to_cpu(resp->hdr.class_spec_be), ==,
                    be16_to_cpu(req->hdr.class_spec_be));
    return be16_to_cpu(resp->hdr.status_be) & ~PIB_SMP_STATUS_DIRECTION;
}

static uint16_t sw_dr_get(Sw *s, uint16_t attr, uint32_t mod, struct pib_smp *resp)
{
    struct pib_smp req = sw_dr_new(PIB_MAD_METHOD_GET, attr, mod);

    return sw_dr(s, &req, resp);
}

static uint16_t sw_dr_set(Sw *s, uint16_t attr, uint32_t mod, const void *data,
                          size_t len, struct pib_smp *resp)
{
    struct pib_smp req = sw_dr_new(PIB_MAD_METHOD_SET, attr, mod);

    memcpy(req.data, data, len);
    return sw_dr(s, &req, resp);
}

/* PortInfo Set of one port: what it reads now, with the new PortState (and LIDs, port 0). */
static void sw_port_state(Sw *s, uint8_t port, uint8_t state, uint16_t lid)
{
    struct pib_smp resp;
    struct pib_port_info pi;

    g_assert_cmphex(sw_dr_get(s, PIB_SMP_ATTR_PORT_INFO, port, &resp), ==, 0);
    memcpy(&pi, resp.data, sizeof(pi));
    pi.speed_state = (pi.speed_state & 0xf0) | state;
    pi.phys_down &= 0x0f;                       /* PortPhysicalState: no change */
    if (port == 0) {
        pi.lid_be = cpu_to_be16(lid);
        pi.sm_lid_be = cpu_to_be16(SW_SM_LID);
    }
    g_assert_cmphex(sw_dr_set(s, PIB_SMP_ATTR_PORT_INFO, port, &pi, sizeof(pi), &resp),
                    ==, 0);
    memcpy(&pi, resp.data, sizeof(pi));
    if (state) {
        g_assert_cmpuint(pi.speed_state & 0xf, ==, state);
    }
}

/*
 * The SM's work: the switch's LID, the LFT (LIDs 1 and 2 to A's and B's ports, the switch's own
 * to port 0, ours to port 3; LID 4 to a port the 3-port switch does not have, LID 5 back out of
 * port 3) and its top, the connected ports ACTIVE.  Returns SwitchInfo as set.
 */
static struct pib_switch_info sw_program(Sw *s)
{
    struct pib_smp resp;
    struct pib_switch_info si;
    uint8_t lft[64];
    int i;

    sw_port_state(s, 0, 0, SW_LID);
    memset(lft, PIB_LFT_NO_PORT, sizeof(lft));
    lft[1] = 1;
    lft[2] = s->b_port;
    lft[SW_LID] = 0;
    lft[SW_SM_LID] = SW_TEST_PORT;
    lft[4] = SW_PORTS + 2;          /* a port the switch does not have */
    lft[5] = SW_TEST_PORT;          /* back out of port 3, for frames from port 3 */
    g_assert_cmphex(sw_dr_set(s, PIB_SMP_ATTR_LFT, 0, lft, sizeof(lft), &resp), ==, 0);
    g_assert_cmpmem(resp.data, 64, lft, 64);
    g_assert_cmphex(sw_dr_get(s, PIB_SMP_ATTR_SWITCH_INFO, 0, &resp), ==, 0);
    memcpy(&si, resp.data, sizeof(si));
    si.lft_top_be = cpu_to_be16(SW_SM_LID);
    g_assert_cmphex(sw_dr_set(s, PIB_SMP_ATTR_SWITCH_INFO, 0, &si, sizeof(si), &resp),
                    ==, 0);
    memcpy(&si, resp.data, sizeof(si));
    g_assert_cmpuint(be16_to_cpu(si.lft_top_be), ==, SW_SM_LID);
    for (i = 1; i <= SW_PORTS; i++) {
        int port = i == 2 ? s->b_port : i;

        sw_port_state(s, port, PIB_PORT_ARMED, 0);
        sw_port_state(s, port, PIB_PORT_ACTIVE, 0);
    }
    return si;
}

/* An RC SEND of 5000 bytes from A (LID 1) to B (LID 2), through ports 1 and 2, bytes compared. */
static void sw_rc_send_a_to_b(Sw *s)
{
    TestEnd x, y;
    struct pib_sge sge;
    struct pib_cqe cqe;

    dp_end(&s->a, &x, PIB_QPT_RC, 8192);
    dp_end(&s->b, &y, PIB_QPT_RC, 8192);
    dp_link_ends(&x, 1, &y, 2);
    dp_fill(&s->a, x.buf, 5000, 77);
    sge = dp_sge(y.buf, 8192, y.key);
    dp_post_recv(&s->b, &y.qp, 0x10, &sge, 1);
    sge = dp_sge(x.buf, 5000, x.key);
    dp_post_send(&s->a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x11, &sge, 1, 0, 0);
    dp_expect(&s->a, &x.scq, 0x11, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&s->b, &y.rcq, 0x10, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 5000);
    dp_assert_same(&s->a, x.buf, &s->b, y.buf, 5000);
}

/*
 * A GMP (a PMA or CC request, 256 bytes) from port 3 (our LID) to the switch's LID, QP1; the
 * answer comes back out of port 3, into resp: its status.
 */
static uint16_t sw_gmp(Sw *s, const void *req, void *resp)
{
    const struct pib_mad_hdr *rq = req;
    uint8_t buf[PIB_LINK_MAX_PAYLOAD];
    struct pib_link_hdr hdr;
    struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
    struct pib_mad_hdr *rs = (struct pib_mad_hdr *)(buf + 28);
    uint16_t len;

    sw_send_ud(s, SW_LID, SW_SM_LID, false, 1, req, PIB_MAD_SIZE);
    for (;;) {
        g_assert_cmpint(poll(&pfd, 1, 5000), ==, 1);
        len = peer_read_frame(s->fd, &hdr, buf, sizeof(buf));
        if (hdr.type == PIB_FRAME_PACKET && len == SW_MAD_PKT_LEN && buf[0] >> 4 != 15 &&
            rs->mgmt_class == rq->mgmt_class && rs->tid_lo_be == rq->tid_lo_be) {
            break;                      /* (SMPs and traps on VL15 are not what we wait for) */
        }
    }
    g_assert_cmphex(rs->method, ==, PIB_MAD_METHOD_GET_RESP);
    memcpy(resp, rs, PIB_MAD_SIZE);
    return be16_to_cpu(rs->status_be);
}

/* PortCounters of switch port `port` from the switch's PMA. */
static void sw_port_counters(Sw *s, uint8_t port, struct pib_port_counters *pc)
{
    struct pib_pma_mad req = peer_pma_new(PIB_MAD_METHOD_GET, PIB_PMA_ATTR_PORT_COUNTERS,
                                          port, 0), resp;

    g_assert_cmphex(sw_gmp(s, &req, &resp), ==, 0);
    memcpy(pc, resp.data, sizeof(*pc));
    g_assert_cmpuint(pc->port_select, ==, port);
}

/* A CC request (no CC_Key) to the switch's CC agent, data len bytes: its status. */
static uint16_t sw_cc(Sw *s, uint8_t method, uint16_t attr, uint32_t mod, const void *data,
                      size_t len, struct pib_cc_mad *resp)
{
    struct pib_cc_mad req = peer_cc_new(method, attr, mod, 0);

    memcpy(req.data, data, len);
    return sw_gmp(s, &req, resp);
}

/* What port 3's peer reads until the switch closes the connection: true at end of stream. */
static bool sw_drain_to_eof(int fd, int timeout_ms)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    uint8_t buf[4096];
    ssize_t n;

    for (;;) {
        if (poll(&pfd, 1, timeout_ms) != 1) {
            return false;
        }
        n = read(fd, buf, sizeof(buf));
        if (n <= 0) {
            return n == 0;
        }
    }
}

/* The SM sets port `port`'s P_KeyTable block 0 to `keys` (the rest 0) and its enforcement
 * bits (PIB_PI_ENFORCE_*), as opensm does for a switch port cabled to a CA. */
static void sw_port_partition(Sw *s, uint8_t port, const uint16_t *keys, int n, uint8_t enforce)
{
    struct pib_smp resp;
    struct pib_port_info pi;
    uint16_t block[PIB_PKEY_BLOCK_ENTRIES] = { 0 };
    int i;

    for (i = 0; i < n; i++) {
        stw_be_p(&block[i], keys[i]);
    }
    g_assert_cmphex(sw_dr_set(s, PIB_SMP_ATTR_PKEY_TABLE, (uint32_t)port << 16, block,
                              sizeof(block), &resp), ==, 0);
    g_assert_cmpmem(resp.data, sizeof(block), block, sizeof(block));
    g_assert_cmphex(sw_dr_get(s, PIB_SMP_ATTR_PORT_INFO, port, &resp), ==, 0);
    memcpy(&pi, resp.data, sizeof(pi));
    pi.speed_state &= 0xf0;                     /* PortState: no change */
    pi.phys_down &= 0x0f;                       /* PortPhysicalState: no change */
    pi.opvls_enforce = (pi.opvls_enforce & 0xf0) | enforce;
    g_assert_cmphex(sw_dr_set(s, PIB_SMP_ATTR_PORT_INFO, port, &pi, sizeof(pi), &resp), ==, 0);
    memcpy(&pi, resp.data, sizeof(pi));
    g_assert_cmphex(pi.opvls_enforce & 0xf, ==, enforce);
}

/* Wait until the switch counter `name` reaches `want` (the packets cross a socket first). */
static void sw_wait_counter(Sw *s, const char *name, uint64_t want)
{
    PIB_WAIT_FOR(sw_counter(s, name) >= want);
    g_assert_cmpuint(sw_counter(s, name), ==, want);
}

/* Wait until HCA d's device counter `which` reaches `want`. */
static void sw_wait_hca_counter(PibDev *d, int which, uint64_t want)
{
    uint64_t c[PIB_CNT_MAX];

    PIB_WAIT_FOR((dp_counters(d, c), c[which] >= want));
    g_assert_cmpuint(c[which], ==, want);
}

/*
 * Tests
 */

static void test_switch_dr(void)
{
    Sw s;
    struct pib_smp req, resp;
    struct pib_node_info ni;
    struct pib_switch_info si;
    struct pib_port_info pi;
    uint64_t before;

    sw_boot(&s);

    /* NodeInfo: a switch of 3 ports, reached on port 3. */
    g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_NODE_INFO, 0, &resp), ==, 0);
    memcpy(&ni, resp.data, sizeof(ni));
    g_assert_cmpuint(ni.node_type, ==, PIB_NODE_TYPE_SWITCH);
    g_assert_cmpuint(ni.num_ports, ==, SW_PORTS);
    g_assert_cmphex(ldq_be_p(&ni.node_guid_hi_be), ==, SW_NODE_GUID);
    g_assert_cmphex(ldq_be_p(&ni.port_guid_hi_be), ==, SW_NODE_GUID + 1);
    g_assert_cmpuint(be32_to_cpu(ni.port_vendor_be) >> 24, ==, SW_TEST_PORT);
    /* C14-9:3: the switch recorded the port the SMP came in by. */
    g_assert_cmpuint(resp.return_path[1], ==, SW_TEST_PORT);

    /* SwitchInfo: the capacities, nothing set yet. */
    g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_SWITCH_INFO, 0, &resp), ==, 0);
    memcpy(&si, resp.data, sizeof(si));
    g_assert_cmpuint(be16_to_cpu(si.lft_cap_be), ==, 0xc000);
    g_assert_cmpuint(be16_to_cpu(si.mft_cap_be), >, 0);
    g_assert_cmpuint(be16_to_cpu(si.lft_top_be), ==, 0);

    /* PortInfo of port 3: LocalPortNum is the arrival port, the link is up (INIT). */
    g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_PORT_INFO, 3, &resp), ==, 0);
    memcpy(&pi, resp.data, sizeof(pi));
    g_assert_cmpuint(pi.local_port_num, ==, SW_TEST_PORT);
    g_assert_cmpuint(pi.speed_state & 0xf, ==, PIB_PORT_INIT);
    g_assert_cmpuint(pi.phys_down >> 4, ==, PIB_PHYS_LINKUP);

    /* Bad modifiers: the status, never a drop. */
    g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_LFT, 0xc000 / 64, &resp), ==,
                    PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_LFT, 0xc000 / 64 - 1, &resp), ==, 0);
    g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_MFT, 1024 / 32, &resp), ==,
                    PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_MFT, 1u << 28, &resp), ==,
                    PIB_MAD_STATUS_INVALID_VALUE);      /* position 1: ports 16..31 */
    g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_PORT_INFO, SW_PORTS + 1, &resp), ==,
                    PIB_MAD_STATUS_INVALID_VALUE);
    /* NodeInfo's modifier and the MFT's [27:9] are reserved: ignored (IBTA 13.4.8.1). */
    g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_NODE_INFO, 1, &resp), ==, 0);
    g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_MFT, 0x0ffffe00, &resp), ==, 0);

    /*
     * Two hops: out of port 3 and straight back into it (InitialPath [_, 1, 3]).  The
     * switch is hop 1: it records ReturnPath[1] = 3, moves the hop pointer to 2 and sends the
     * SMP out of port 3 again, to us, as hop 2.
     */
    req = sw_dr_new(PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
    req.hdr.class_spec_be = cpu_to_be16(1 << 8 | 2);
    req.initial_path[2] = SW_TEST_PORT;
    sw_send_ud(&s, PIB_LID_PERMISSIVE, PIB_LID_PERMISSIVE, true, 0, &req, sizeof(req));
    g_assert_true(sw_recv_smp(&s, &resp, NULL, 5000));
    g_assert_cmphex(resp.hdr.method, ==, PIB_MAD_METHOD_GET);
    g_assert_cmphex(be16_to_cpu(resp.hdr.class_spec_be), ==, 2 << 8 | 2);
    g_assert_cmpuint(resp.return_path[1], ==, SW_TEST_PORT);
    /*
     * We answer as hop 2 would: D set, hop pointer back to 2 (C14-13:1), ReturnPath[2] our
     * port.  The switch takes the hop back (C14-13:2): the pointer at 1, out of ReturnPath[1].
     */
    resp.hdr.method = PIB_MAD_METHOD_GET_RESP;
    resp.hdr.status_be = cpu_to_be16(PIB_SMP_STATUS_DIRECTION);
    resp.return_path[2] = 1;
    resp.data[0] = 0xab;
    sw_send_ud(&s, PIB_LID_PERMISSIVE, PIB_LID_PERMISSIVE, true, 0, &resp, sizeof(resp));
    g_assert_true(sw_recv_smp(&s, &req, NULL, 5000));
    g_assert_cmphex(req.hdr.method, ==, PIB_MAD_METHOD_GET_RESP);
    g_assert_cmphex(be16_to_cpu(req.hdr.class_spec_be), ==, 1 << 8 | 2);
    g_assert_cmphex(req.data[0], ==, 0xab);

    /* A hop count over 63, a path through a port that does not exist: counted drops. */
    before = sw_counter(&s, "drop-dr");
    req = sw_dr_new(PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
    req.hdr.class_spec_be = cpu_to_be16(1 << 8 | 64);
    sw_send_ud(&s, PIB_LID_PERMISSIVE, PIB_LID_PERMISSIVE, true, 0, &req, sizeof(req));
    req = sw_dr_new(PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
    req.hdr.class_spec_be = cpu_to_be16(1 << 8 | 2);
    req.initial_path[2] = SW_PORTS + 1;
    sw_send_ud(&s, PIB_LID_PERMISSIVE, PIB_LID_PERMISSIVE, true, 0, &req, sizeof(req));
    /* A hop pointer of 0 with hops to go: the sender did not count its hop. */
    req = sw_dr_new(PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
    req.hdr.class_spec_be = cpu_to_be16(0 << 8 | 1);
    sw_send_ud(&s, PIB_LID_PERMISSIVE, PIB_LID_PERMISSIVE, true, 0, &req, sizeof(req));
    g_assert_false(sw_recv_smp(&s, &resp, NULL, 300));
    sw_wait_counter(&s, "drop-dr", before + 3);

    sw_shutdown(&s);
}

static void test_switch_forwarding(void)
{
    Sw s;
    struct pib_smp req, resp;
    struct pib_switch_info si;
    uint8_t junk[64] = { 0 };
    uint64_t no_route, bad_port, arrival, fwd;
    uint16_t dlid;

    sw_boot(&s);
    si = sw_program(&s);
    fwd = sw_counter(&s, "forwarded");
    sw_rc_send_a_to_b(&s);
    /* 5 requests at MTU 1024 and at least one ACK crossed the switch. */
    g_assert_cmpuint(sw_counter(&s, "forwarded"), >=, fwd + 6);

    /* Frames from port 3 that go nowhere, each under its reason. */
    no_route = sw_counter(&s, "drop-no-route");
    bad_port = sw_counter(&s, "drop-bad-port");
    arrival = sw_counter(&s, "drop-arrival-port");
    sw_send_ud(&s, 3, SW_SM_LID, false, 0x42, junk, sizeof(junk));     /* LFT 255 */
    sw_send_ud(&s, SW_SM_LID + 1, SW_SM_LID, false, 0x42, junk, sizeof(junk)); /* > top */
    sw_send_ud(&s, 4, SW_SM_LID, false, 0x42, junk, sizeof(junk));     /* no port 5 */
    sw_send_ud(&s, 5, SW_SM_LID, false, 0x42, junk, sizeof(junk));     /* back to 3 */
    sw_send_ud(&s, SW_SM_LID, SW_SM_LID, false, 0x42, junk, sizeof(junk)); /* to us: 3 */
    sw_wait_counter(&s, "drop-arrival-port", arrival + 2);
    g_assert_cmpuint(sw_counter(&s, "drop-no-route"), ==, no_route + 2);
    g_assert_cmpuint(sw_counter(&s, "drop-bad-port"), ==, bad_port + 1);

    /*
     * Multicast: MLID 0xc000 to ports 1, 2 and 3 (MFT block 0, position 0, and
     * MulticastFDBTop).  A packet from port 3 reaches A and B, each once (their drop counter
     * for a group nobody there joined), and never comes back out of port 3; an MLID with no
     * ports is a counted drop.
     */
    {
        uint16_t mft[32] = { 0 };
        uint64_t ca[PIB_CNT_MAX], cb[PIB_CNT_MAX], ca2[PIB_CNT_MAX], cb2[PIB_CNT_MAX];

        stw_be_p(&mft[0], 1u << 1 | 1u << 2 | 1u << SW_TEST_PORT);
        g_assert_cmphex(sw_dr_set(&s, PIB_SMP_ATTR_MFT, 0, mft, sizeof(mft), &resp), ==, 0);
        g_assert_cmphex(lduw_be_p(resp.data), ==, 0x000e);
        si.mft_top_be = cpu_to_be16(0xc001);
        g_assert_cmphex(sw_dr_set(&s, PIB_SMP_ATTR_SWITCH_INFO, 0, &si, sizeof(si), &resp),
                        ==, 0);
        dp_counters(&s.a, ca);
        dp_counters(&s.b, cb);
        fwd = sw_counter(&s, "forwarded");
        no_route = sw_counter(&s, "drop-no-route");
        sw_send_ud(&s, 0xc000, SW_SM_LID, false, PIB_MCAST_QPN, junk, sizeof(junk));
        sw_send_ud(&s, 0xc001, SW_SM_LID, false, PIB_MCAST_QPN, junk, sizeof(junk));
        sw_wait_counter(&s, "drop-no-route", no_route + 1);
        g_assert_cmpuint(sw_counter(&s, "forwarded"), ==, fwd + 2);
        PIB_WAIT_FOR((dp_counters(&s.a, ca2), dp_counters(&s.b, cb2),
                      ca2[PIB_CNT_RX_DROP_MCAST] > ca[PIB_CNT_RX_DROP_MCAST] &&
                      cb2[PIB_CNT_RX_DROP_MCAST] > cb[PIB_CNT_RX_DROP_MCAST]));
        g_assert_cmpuint(ca2[PIB_CNT_RX_DROP_MCAST], ==, ca[PIB_CNT_RX_DROP_MCAST] + 1);
        g_assert_cmpuint(cb2[PIB_CNT_RX_DROP_MCAST], ==, cb[PIB_CNT_RX_DROP_MCAST] + 1);
    }

    /* A LID-routed SMP to the switch's LID: the SMA answers, by the LFT, to our LID. */
    req = peer_smp_new(PIB_MGMT_CLASS_SUBN_LID, PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
    sw_send_ud(&s, SW_LID, SW_SM_LID, true, 0, &req, sizeof(req));
    g_assert_true(sw_recv_smp(&s, &resp, &dlid, 5000));
    g_assert_cmphex(dlid, ==, SW_SM_LID);
    g_assert_cmphex(resp.hdr.method, ==, PIB_MAD_METHOD_GET_RESP);
    g_assert_cmphex(resp.hdr.status_be, ==, 0);
    g_assert_cmpuint(resp.data[2], ==, PIB_NODE_TYPE_SWITCH);

    /*
     * Trap 128: port 3's cable is pulled and plugged back.  Once the port is up again the
     * switch tells its SM (us, by the LFT) from its own LID; PortStateChange says so until the
     * SM clears it; a TrapRepress ends the resends and is not answered.
     */
    {
        g_autofree char *p3 = sw_sock(&s, "p3.sock");

        close(s.fd);
        s.fd = peer_connect(p3);
        peer_expect_hello(s.fd, SW_NODE_GUID);
        peer_send_hello(s.fd);
        sw_expect_link_trap(&s, &resp);
        /* Unanswered, it comes again after the subnet timeout (about 1.07 s here). */
        qtest_clock_step(s.qs->qts, 1200 * 1000 * 1000ll);
        g_assert_true(sw_recv_smp_ex(&s, &req, NULL, 5000, true));
        g_assert_cmphex(req.hdr.tid_lo_be, ==, resp.hdr.tid_lo_be);
        req.hdr.method = PIB_MAD_METHOD_TRAP_REPRESS;
        sw_send_ud(&s, SW_LID, SW_SM_LID, true, 0, &req, sizeof(req));

        g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_SWITCH_INFO, 0, &resp), ==, 0);
        memcpy(&si, resp.data, sizeof(si));
        g_assert_cmphex(si.life_state & PIB_SWINFO_PORT_STATE_CHANGE, !=, 0);
        g_assert_cmphex(sw_dr_set(&s, PIB_SMP_ATTR_SWITCH_INFO, 0, &si, sizeof(si), &resp),
                        ==, 0);
        memcpy(&si, resp.data, sizeof(si));
        g_assert_cmphex(si.life_state & PIB_SWINFO_PORT_STATE_CHANGE, ==, 0);
        /* Repressed: no more resends (the next, unrepressed, would be due by now). */
        qtest_clock_step(s.qs->qts, 2400 * 1000 * 1000ll);
        g_assert_false(sw_recv_smp_ex(&s, &resp, NULL, 300, true));
    }

    g_assert_cmpuint(dp_err_count(&s.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&s.b), ==, 0);
    sw_shutdown(&s);
}

/* Whether chardev `id`'s socket has no connection now (QMP query-chardev: "disconnected:..."). */
static bool sw_chardev_disconnected(Sw *s, const char *id)
{
    QDict *r = qtest_qmp(s->qs->qts, "{ 'execute': 'query-chardev' }");
    QListEntry *e;
    bool found = false, down = false;

    g_assert_true(qdict_haskey(r, "return"));
    QLIST_FOREACH_ENTRY(qdict_get_qlist(r, "return"), e) {
        QDict *c = qobject_to(QDict, qlist_entry_obj(e));

        if (!strcmp(qdict_get_str(c, "label"), id)) {
            found = true;
            down = g_str_has_prefix(qdict_get_str(c, "filename"), "disconnected:");
        }
    }
    qobject_unref(r);
    g_assert_true(found);
    return down;
}

/*
 * A stopped machine's switch changes no port state and sends nothing.  HCA A's cable (port 1)
 * is pulled while the machine is stopped (A's chardev becomes a null one: QMP chardev-change)
 * and the switch's end of it closes; no trap 128 reaches the SM (us, port 3) until the machine
 * runs.  Then port 1 goes down once (LinkDowned 1), the trap comes, and A's port is DOWN.
 * The source of a live migration is such a switch: it never runs again, and an SM must not hear
 * of its ports (which the moved switch holds ACTIVE).
 */
static void test_switch_stopped(void)
{
    Sw s;
    struct pib_smp resp;
    struct pib_port_counters pc;

    sw_boot(&s);
    sw_program(&s);
    sw_port_counters(&s, 1, &pc);
    g_assert_cmpuint(pc.link_downed, ==, 0);
    qtest_qmp_assert_success(s.qs->qts, "{ 'execute': 'stop' }");
    qtest_qmp_assert_success(s.qs->qts, "{ 'execute': 'chardev-change', 'arguments': "
                             "{ 'id': 'ca', 'backend': { 'type': 'null', 'data': {} } } }");
    /* The switch saw the close (query-chardev says so after the CLOSED event ran)... */
    PIB_WAIT_FOR(sw_chardev_disconnected(&s, "s1"));
    /* ...and sent nothing: a trap would have been written by now. */
    g_assert_false(sw_recv_smp_ex(&s, &resp, NULL, 200, true));
    qtest_qmp_assert_success(s.qs->qts, "{ 'execute': 'cont' }");
    sw_expect_link_trap(&s, &resp);
    sw_port_counters(&s, 1, &pc);
    g_assert_cmpuint(pc.link_downed, ==, 1);
    sw_port_counters(&s, 2, &pc);
    g_assert_cmpuint(pc.link_downed, ==, 0);
    pib_wait_port_state(&s.a, PIB_PORT_DOWN);
    g_assert_cmpuint(dp_err_count(&s.a), ==, 0);
    sw_shutdown(&s);
}

/*
 * A port whose peer sends garbage (a frame header with a bad magic): the switch counts a symbol
 * error and a link error recovery on that port, closes its connection and lets it retrain,
 * while ports 1 and 2 carry an RC SEND meanwhile.  The peer dials again, the port trains, the
 * SM makes it ACTIVE, and the PMA shows the errors on port 3 only.
 */
static void test_switch_garbage(void)
{
    static const uint8_t junk[] = { 0x00, PIB_FRAME_PACKET, 0x00, 0x10, 'j', 'u', 'n', 'k' };
    struct pib_port_counters pc1, pc3, before;
    g_autofree char *p3 = NULL;
    Sw s;

    sw_boot(&s);
    sw_program(&s);
    p3 = sw_sock(&s, "p3.sock");
    sw_port_counters(&s, SW_TEST_PORT, &before);
    peer_write(s.fd, junk, sizeof(junk));
    g_assert_true(sw_drain_to_eof(s.fd, 5000));
    close(s.fd);
    sw_rc_send_a_to_b(&s);          /* port 3 is down: ports 1 and 2 carry on */

    s.fd = peer_connect(p3);
    peer_expect_hello(s.fd, SW_NODE_GUID);
    peer_send_hello(s.fd);
    sw_port_state(&s, SW_TEST_PORT, PIB_PORT_ARMED, 0);
    sw_port_state(&s, SW_TEST_PORT, PIB_PORT_ACTIVE, 0);
    sw_port_counters(&s, SW_TEST_PORT, &pc3);
    sw_port_counters(&s, 1, &pc1);
    g_assert_cmpuint(be16_to_cpu(pc3.symbol_errors_be), ==,
                     be16_to_cpu(before.symbol_errors_be) + 1);
    g_assert_cmpuint(pc3.link_recovery, ==, before.link_recovery + 1);
    g_assert_cmpuint(be16_to_cpu(pc1.symbol_errors_be), ==, 0);
    g_assert_cmpuint(pc1.link_recovery, ==, 0);
    sw_rc_send_a_to_b(&s);

    g_assert_cmpuint(dp_err_count(&s.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&s.b), ==, 0);
    sw_shutdown(&s);
}

/*
 * Partition enforcement at the switch's ports, as opensm sets it up for ports cabled to CAs:
 * SwitchInfo offers it (PartitionEnforcementCap, the four enforcement caps); port 3 enforces
 * inbound with the keys {0xffff, 0x8005}, port 1 outbound with {0xffff}.  A packet from port 3
 * with P_Key 0x8006 is dropped at port 3 (PortRcvConstraintErrors), 0x0005 (a limited member of
 * partition 5) passes port 3 and reaches B (whose own table refuses it: B's rx_drop_pkey),
 * 0x8005 passes port 3 but not port 1 towards A (PortXmitConstraintErrors); SMPs pass
 * regardless, and an LFT miss counts in port 3's PortRcvSwitchRelayErrors.
 */
static void test_switch_partition(void)
{
    static const uint16_t keys3[] = { PIB_DEFAULT_PKEY, 0x8005 };
    static const uint16_t keys1[] = { PIB_DEFAULT_PKEY };
    uint8_t junk[64] = { 0 };
    struct pib_port_counters pc1, pc3, pc1b, pc3b;
    struct pib_switch_info si;
    struct pib_smp resp;
    uint64_t part, no_route, ca[PIB_CNT_MAX], cb[PIB_CNT_MAX], ca2[PIB_CNT_MAX];
    Sw s;

    sw_boot(&s);
    si = sw_program(&s);
    g_assert_cmpuint(be16_to_cpu(si.enforce_cap_be), ==, PIB_PKEY_TBL_LEN);
    g_assert_cmphex(si.flags & PIB_SWINFO_ENFORCE_CAPS, ==, PIB_SWINFO_ENFORCE_CAPS);
    sw_port_partition(&s, SW_TEST_PORT, keys3, 2, PIB_PI_ENFORCE_PART_IN);
    sw_port_partition(&s, 1, keys1, 1, PIB_PI_ENFORCE_PART_OUT);
    sw_port_counters(&s, SW_TEST_PORT, &pc3);
    sw_port_counters(&s, 1, &pc1);

    part = sw_counter(&s, "drop-partition");
    dp_counters(&s.a, ca);
    dp_counters(&s.b, cb);
    sw_send_ud_pkey(&s, 2, SW_SM_LID, false, 0x42, 0x8006, junk, sizeof(junk));   /* not at 3 */
    sw_wait_counter(&s, "drop-partition", part + 1);
    sw_send_ud_pkey(&s, 2, SW_SM_LID, false, 0x42, 0x0005, junk, sizeof(junk));   /* 3 and 2 */
    sw_wait_hca_counter(&s.b, PIB_CNT_RX_DROP_PKEY, cb[PIB_CNT_RX_DROP_PKEY] + 1);
    sw_send_ud_pkey(&s, 1, SW_SM_LID, false, 0x42, 0x8005, junk, sizeof(junk));   /* not at 1 */
    sw_wait_counter(&s, "drop-partition", part + 2);
    dp_counters(&s.a, ca2);
    g_assert_cmpuint(ca2[PIB_CNT_RX_PACKETS], ==, ca[PIB_CNT_RX_PACKETS]);
    no_route = sw_counter(&s, "drop-no-route");
    sw_send_ud(&s, 3, SW_SM_LID, false, 0x42, junk, sizeof(junk));                 /* LFT 255 */
    sw_wait_counter(&s, "drop-no-route", no_route + 1);

    /* SMPs are never filtered: a directed-route Get out of port 3 still works. */
    g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_NODE_INFO, 0, &resp), ==, 0);
    sw_port_counters(&s, SW_TEST_PORT, &pc3b);
    sw_port_counters(&s, 1, &pc1b);
    g_assert_cmpuint(pc3b.rcv_constraint_errors, ==, pc3.rcv_constraint_errors + 1);
    g_assert_cmpuint(pc3b.xmit_constraint_errors, ==, pc3.xmit_constraint_errors);
    g_assert_cmpuint(pc1b.xmit_constraint_errors, ==, pc1.xmit_constraint_errors + 1);
    g_assert_cmpuint(pc1b.rcv_constraint_errors, ==, pc1.rcv_constraint_errors);
    g_assert_cmpuint(be16_to_cpu(pc3b.rcv_switch_relay_errors_be), ==,
                     be16_to_cpu(pc3.rcv_switch_relay_errors_be) + 1);

    /* Enforcement off again: 0x8006 crosses port 3 (to B, which drops it as a bad P_Key). */
    sw_port_partition(&s, SW_TEST_PORT, keys3, 2, 0);
    sw_send_ud_pkey(&s, 2, SW_SM_LID, false, 0x42, 0x8006, junk, sizeof(junk));
    sw_wait_hca_counter(&s.b, PIB_CNT_RX_DROP_PKEY, cb[PIB_CNT_RX_DROP_PKEY] + 2);
    g_assert_cmpuint(sw_counter(&s, "drop-partition"), ==, part + 2);
    sw_shutdown(&s);
}

/*
 * Virtual lanes through the switch: the SLtoVLMappingTable of each (input, output) port pair,
 * programmed one by one or all at once (OptimizedSLtoVLMappingProgramming), the VL a packet
 * leaves on, and the packets that cannot be mapped.
 */
static uint64_t sw_sl2vl_get(Sw *s, uint32_t mod)
{
    struct pib_smp resp;

    g_assert_cmphex(sw_dr_get(s, PIB_SMP_ATTR_SL2VL_TABLE, mod, &resp), ==, 0);
    return ldq_be_p(resp.data);
}

static uint16_t sw_sl2vl_set(Sw *s, uint32_t mod, uint64_t table)
{
    struct pib_smp resp;
    uint8_t data[8];

    stq_be_p(data, table);
    return sw_dr_set(s, PIB_SMP_ATTR_SL2VL_TABLE, mod, data, sizeof(data), &resp);
}

/* The next UD SEND on port 3 that is not an SMP: its LRH VL. */
static uint8_t sw_recv_data_vl(Sw *s)
{
    uint8_t buf[PIB_LINK_MAX_PAYLOAD];
    struct pib_link_hdr hdr;
    struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
    uint16_t len;

    for (;;) {
        g_assert_cmpint(poll(&pfd, 1, 5000), ==, 1);
        len = peer_read_frame(s->fd, &hdr, buf, sizeof(buf));
        if (hdr.type == PIB_FRAME_PACKET && len > 20 && buf[0] >> 4 != 15 &&
            buf[8] == PIB_OP_UD_SEND_ONLY) {
            return buf[0] >> 4;
        }
    }
}

/* The UD SEND the tests post: signaled, on sl, to our QP 0x42 (Q_Key 0x1234) at SW_SM_LID. */
static struct pib_send_wqe sw_ud_wqe(uint8_t sl)
{
    return (struct pib_send_wqe) {
        .opcode = PIB_WQE_SEND,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 1,
        .ud_qpn = cpu_to_le32(0x42),
        .ud_qkey = cpu_to_le32(0x1234),
        .ud_dlid = cpu_to_le16(SW_SM_LID),
        .ud_sl = sl,
    };
}

static void test_switch_vls(void)
{
    struct pib_port_counters pc1, pc1b;
    struct pib_switch_info si;
    struct pib_sge sge;
    struct pib_send_wqe w = sw_ud_wqe(5);
    uint8_t junk[64] = { 0 };
    uint64_t drops, cb[PIB_CNT_MAX];
    TestEnd x;
    Sw s;

    sw_boot(&s);
    si = sw_program(&s);
    g_assert_cmphex(si.life_state & PIB_SWINFO_OPT_SL2VL, ==, PIB_SWINFO_OPT_SL2VL);

    /* One table: (in 3, out 2); the others stay all VL0. */
    g_assert_cmphex(sw_sl2vl_set(&s, 3 << 8 | 2, 0x0123012301230123ull), ==, 0);
    g_assert_cmphex(sw_sl2vl_get(&s, 3 << 8 | 2), ==, 0x0123012301230123ull);
    g_assert_cmphex(sw_sl2vl_get(&s, 1 << 8 | 2), ==, 0);
    /* Every pair at once, then every input port to output 3. */
    g_assert_cmphex(sw_sl2vl_set(&s, PIB_SL2VL_ALL_IN | PIB_SL2VL_ALL_OUT,
                                 0x1111111111111111ull), ==, 0);
    g_assert_cmphex(sw_sl2vl_get(&s, 3 << 8 | 2), ==, 0x1111111111111111ull);
    g_assert_cmphex(sw_sl2vl_set(&s, PIB_SL2VL_ALL_IN | 3, 0x000002f000000000ull), ==, 0);
    g_assert_cmphex(sw_sl2vl_get(&s, 1 << 8 | 3), ==, 0x000002f000000000ull);
    g_assert_cmphex(sw_sl2vl_get(&s, 2 << 8 | 3), ==, 0x000002f000000000ull);
    g_assert_cmphex(sw_sl2vl_get(&s, 1 << 8 | 2), ==, 0x1111111111111111ull);
    /* No port 4, no VL4: refused, nothing changed. */
    g_assert_cmphex(sw_sl2vl_set(&s, 4 << 8 | 2, 0), ==, PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmphex(sw_sl2vl_set(&s, 1 << 8 | 4, 0), ==, PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmphex(sw_sl2vl_set(&s, 1 << 8 | 2, 0x4000000000000000ull), ==,
                    PIB_MAD_STATUS_INVALID_VALUE);
    g_assert_cmphex(sw_sl2vl_get(&s, 1 << 8 | 2), ==, 0x1111111111111111ull);

    /*
     * A packet leaves on the VL of its (in, out) table: HCA A's UD SEND on SL5 enters port 1
     * on VL0 (A's own table) and leaves port 3 on VL2 (table (1, 3): SL5 -> VL2).
     */
    dp_end(&s.a, &x, PIB_QPT_UD, 4096);
    dp_ud_ready(&s.a, &x.qp, 0x1234);
    sge = dp_sge(x.buf, 256, x.key);
    w.wr_id = cpu_to_le64(1);
    dp_post_send_raw(&s.a, &x.qp, &w, &sge, sizeof(sge), true);
    dp_expect(&s.a, &x.scq, 1, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    g_assert_cmpuint(sw_recv_data_vl(&s), ==, 2);

    /* SL6 maps to VL15 on (1, 3): dropped at the switch, a PortRcvError of port 1. */
    sw_port_counters(&s, 1, &pc1);
    drops = sw_counter(&s, "drop-vl-mapping");
    w.ud_sl = 6;
    w.wr_id = cpu_to_le64(2);
    dp_post_send_raw(&s.a, &x.qp, &w, &sge, sizeof(sge), true);
    dp_expect(&s.a, &x.scq, 2, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    sw_wait_counter(&s, "drop-vl-mapping", drops + 1);
    sw_port_counters(&s, 1, &pc1b);
    g_assert_cmpuint(be16_to_cpu(pc1b.rcv_errors_be), ==, be16_to_cpu(pc1.rcv_errors_be) + 1);

    /* Port 3 operating VL0 only: data arriving on VL1 there is dropped, on VL0 it passes. */
    {
        struct pib_smp resp;
        struct pib_port_info pi;

        g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_PORT_INFO, 3, &resp), ==, 0);
        memcpy(&pi, resp.data, sizeof(pi));
        g_assert_cmpuint(pi.vlcap_inittype >> 4, ==, 3);
        g_assert_cmpuint(pi.vl_arb_low_cap, ==, 8);
        pi.speed_state &= 0xf0;
        pi.phys_down &= 0x0f;
        pi.opvls_enforce = 1 << 4 | (pi.opvls_enforce & 0xf);
        g_assert_cmphex(sw_dr_set(&s, PIB_SMP_ATTR_PORT_INFO, 3, &pi, sizeof(pi), &resp),
                        ==, 0);
        g_assert_cmpuint(resp.data[0x2b] >> 4, ==, 1);
    }
    dp_counters(&s.b, cb);
    sw_send_ud_vl(&s, 2, SW_SM_LID, 1, 0, 0x42, PIB_DEFAULT_PKEY, junk, sizeof(junk));
    sw_wait_counter(&s, "drop-vl-mapping", drops + 2);
    sw_send_ud_vl(&s, 2, SW_SM_LID, 0, 0, 0x42, PIB_DEFAULT_PKEY, junk, sizeof(junk));
    sw_wait_hca_counter(&s.b, PIB_CNT_RX_PACKETS, cb[PIB_CNT_RX_PACKETS] + 1);
    /* And an SL that port 3's table (2, 3) maps to VL2, now beyond its OperationalVLs. */
    g_assert_cmphex(sw_sl2vl_set(&s, 1 << 8 | 3, 0x0000020000000000ull), ==, 0);
    w.ud_sl = 5;
    w.wr_id = cpu_to_le64(3);
    dp_post_send_raw(&s.a, &x.qp, &w, &sge, sizeof(sge), true);
    dp_expect(&s.a, &x.scq, 3, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    sw_wait_counter(&s, "drop-vl-mapping", drops + 3);

    /* The RC path A -> B still runs: (1, 2) maps every SL to VL1, which B operates. */
    sw_rc_send_a_to_b(&s);
    sw_shutdown(&s);
}

/*
 * Credits through the switch (include/pib_link.h, "Credits"): this process offers them on
 * port 3.  A VL without credit stops alone: HCA A's SENDs to us on VL1 arrive while those on
 * VL0 wait at port 3, counted in its PortXmitWait, and come whole once VL0 is granted.  Then
 * HCA B holds its credits (inject-credit-hold): port 2 stops once B's buffer is used, port 3's
 * input buffer fills behind it, and what we send beyond that (ignoring the switch's credits,
 * as a hostile peer would) is dropped and counted; what the switch admitted is delivered once
 * B lets go, nothing of it lost.
 */
#define SWC_PAYLOAD     4096
#define SWC_BLOCKS      65          /* DIV_ROUND_UP(8 + 12 + 8 + 4096, 64): a UD SEND */
#define SWC_BUFFER_PKTS (2048 / SWC_BLOCKS)     /* 31 such packets fill a VL's buffer */

/* Data packets on port 3 within timeout_ms of each other, counted per VL. */
static void swc_count(Sw *s, uint32_t *per_vl, int timeout_ms)
{
    uint8_t b[PIB_LINK_MAX_PAYLOAD];
    uint16_t len;
    uint8_t type;

    while ((type = peer_read_any(s->fd, b, sizeof(b), &len, timeout_ms))) {
        if (type == PIB_FRAME_PACKET && b[0] >> 4 != 15 && b[8] == PIB_OP_UD_SEND_ONLY) {
            per_vl[b[0] >> 4]++;
        }
    }
}

static void swc_qom_set_hold(Sw *s, const char *dev, bool hold)
{
    QDict *rsp = qtest_qmp(s->qs->qts,
                           "{'execute': 'qom-set', 'arguments': {'path': %s, "
                           "'property': 'inject-credit-hold', 'value': %i}}", dev, hold);

    g_assert_true(qdict_haskey(rsp, "return"));
    qobject_unref(rsp);
}

static void test_switch_credits(void)
{
    static uint8_t payload[SWC_PAYLOAD];
    struct pib_port_counters pc;
    struct pib_sge sge;
    struct pib_send_wqe w = sw_ud_wqe(0);
    uint32_t per_vl[16] = { 0 };
    uint64_t overrun0, cb[PIB_CNT_MAX];
    TestEnd x;
    Sw s;
    int i;

    sw_boot_ex(&s, PIB_HELLO_F_CREDITS, "");
    sw_program(&s);
    /* Every port pair: SL0 on VL0, SL1 on VL1.  We grant VL1 and everything but VL0. */
    g_assert_cmphex(sw_sl2vl_set(&s, PIB_SL2VL_ALL_IN | PIB_SL2VL_ALL_OUT,
                                 0x0100000000000000ull), ==, 0);
    peer_send_flow(s.fd, 0, 0, 2048);

    /* A sends 4 SENDs on SL0, then 4 on SL1: only VL1's come. */
    dp_end(&s.a, &x, PIB_QPT_UD, 4096);
    dp_ud_ready(&s.a, &x.qp, 0x1234);
    sge = dp_sge(x.buf, 256, x.key);
    for (i = 0; i < 8; i++) {
        w.ud_sl = i < 4 ? 0 : 1;
        w.wr_id = cpu_to_le64(i);
        w.flags = i == 7 ? PIB_WQE_F_SIGNALED : 0;
        dp_post_send_raw(&s.a, &x.qp, &w, &sge, sizeof(sge), true);
    }
    dp_expect(&s.a, &x.scq, 7, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    swc_count(&s, per_vl, 300);
    g_assert_cmpuint(per_vl[1], ==, 4);
    g_assert_cmpuint(per_vl[0], ==, 0);
    /* VL0 granted: its 4 come, none lost; port 3 counted the wait. */
    peer_send_flow(s.fd, 0, 2048, 2048);
    swc_count(&s, per_vl, 300);
    g_assert_cmpuint(per_vl[0], ==, 4);
    sw_port_counters(&s, SW_TEST_PORT, &pc);
    g_assert_cmpuint(be32_to_cpu(pc.xmit_wait_be), >, 0);
    g_assert_cmpuint(sw_counter(&s, "drop-txq-full"), ==, 0);

    /* B holds its credits; we send 100 full SENDs to B without looking at ours. */
    swc_qom_set_hold(&s, "/machine/peripheral/pb", true);
    dp_counters(&s.b, cb);
    overrun0 = sw_counter(&s, "drop-credit-overrun");
    for (i = 0; i < 100; i++) {
        sw_send_ud_vl(&s, 2, SW_SM_LID, 0, 0, 0x42, PIB_DEFAULT_PKEY, payload,
                      sizeof(payload));
    }
    sw_wait_counter(&s, "drop-credit-overrun", overrun0 + 100 - 2 * SWC_BUFFER_PKTS);
    sw_wait_hca_counter(&s.b, PIB_CNT_RX_PACKETS, cb[PIB_CNT_RX_PACKETS] + SWC_BUFFER_PKTS);
    sw_port_counters(&s, 2, &pc);
    g_assert_cmpuint(be32_to_cpu(pc.xmit_wait_be), >, 0);
    sw_port_counters(&s, SW_TEST_PORT, &pc);
    g_assert_cmpuint(pc.link_integrity_overrun & 0xf, ==, 15);  /* 38, saturated */
    /* B lets go: the 31 packets the switch held arrive too, and no more were dropped. */
    swc_qom_set_hold(&s, "/machine/peripheral/pb", false);
    sw_wait_hca_counter(&s.b, PIB_CNT_RX_PACKETS,
                        cb[PIB_CNT_RX_PACKETS] + 2 * SWC_BUFFER_PKTS);
    g_assert_cmpuint(sw_counter(&s, "drop-credit-overrun"), ==,
                     overrun0 + 100 - 2 * SWC_BUFFER_PKTS);
    g_assert_cmpuint(sw_counter(&s, "drop-txq-full"), ==, 0);
    sw_shutdown(&s);
}

/*
 * Head-of-queue lifetime (IBTA 18.2.5.4): HCA B holds its credits, so the 31 packets switch
 * port 2 could not send wait there, holding port 3's input buffer.  With PortInfo:HOQLife at
 * its reset value (infinite) they wait for ever; with HOQLife 10 (4.096 us x 2^10, about 4
 * ms) each is discarded once it has been at the head that long (the virtual clock, stepped
 * here), counted in port 2's PortXmitDiscards and drop-hoq-lifetime, and what comes after
 * them reaches B.
 */
/* PortInfo:HOQLife of a port, and VLStallCount (stall < 0: as it is). */
static void sw_set_hoq_stall(Sw *s, uint8_t port, uint8_t hoq, int stall)
{
    struct pib_smp resp;
    struct pib_port_info pi;
    uint8_t want;

    g_assert_cmphex(sw_dr_get(s, PIB_SMP_ATTR_PORT_INFO, port, &resp), ==, 0);
    memcpy(&pi, resp.data, sizeof(pi));
    pi.speed_state &= 0xf0;
    pi.phys_down &= 0x0f;
    want = (stall < 0 ? pi.vlstall_hoqlife & 0xe0 : stall << 5) | hoq;
    pi.vlstall_hoqlife = want;
    g_assert_cmphex(sw_dr_set(s, PIB_SMP_ATTR_PORT_INFO, port, &pi, sizeof(pi), &resp), ==, 0);
    g_assert_cmphex(((struct pib_port_info *)resp.data)->vlstall_hoqlife, ==, want);
}

static void sw_set_hoq(Sw *s, uint8_t port, uint8_t hoq)
{
    sw_set_hoq_stall(s, port, hoq, -1);
}

/*
 * For the head-of-queue tests: the switch programmed, B holding its credits with its buffer
 * full (B's RX count before, in cb) and a buffer's worth of UD SENDs to B waiting at port 2;
 * *pi is port 2's PortInfo, read before.
 */
static void sw_hoq_fill(Sw *s, uint64_t cb[PIB_CNT_MAX], struct pib_smp *pi)
{
    static uint8_t payload[SWC_PAYLOAD];
    uint64_t fwd;
    int i;

    sw_boot_ex(s, PIB_HELLO_F_CREDITS, "");
    sw_program(s);
    peer_send_flow(s->fd, 0, 2048, 2048);       /* credit for the PMA's answers to us */
    g_assert_cmphex(sw_dr_get(s, PIB_SMP_ATTR_PORT_INFO, 2, pi), ==, 0);
    swc_qom_set_hold(s, "/machine/peripheral/pb", true);
    dp_counters(&s->b, cb);
    fwd = sw_counter(s, "forwarded");
    /* B's buffer's worth (which B takes), then port 2's buffer's worth (which waits). */
    for (i = 0; i < 2 * SWC_BUFFER_PKTS; i++) {
        if (i == SWC_BUFFER_PKTS) {
            sw_wait_hca_counter(&s->b, PIB_CNT_RX_PACKETS,
                                cb[PIB_CNT_RX_PACKETS] + SWC_BUFFER_PKTS);
        }
        sw_send_ud_vl(s, 2, SW_SM_LID, 0, 0, 0x42, PIB_DEFAULT_PKEY, payload,
                      sizeof(payload));
    }
    sw_wait_counter(s, "forwarded", fwd + 2 * SWC_BUFFER_PKTS);
}

static void test_switch_hoq(void)
{
    static uint8_t payload[SWC_PAYLOAD];
    struct pib_port_counters pc0, pc1;
    uint64_t hoq0, cb[PIB_CNT_MAX];
    struct pib_smp resp;
    Sw s;
    int i;

    sw_hoq_fill(&s, cb, &resp);
    g_assert_cmpuint(((struct pib_port_info *)resp.data)->vlstall_hoqlife & 0x1f, ==, 20);
    hoq0 = sw_counter(&s, "drop-hoq-lifetime");
    /* Infinite: ten seconds at the head change nothing. */
    qtest_clock_step(s.qs->qts, 10 * 1000 * 1000 * 1000ll);
    g_assert_cmpuint(sw_counter(&s, "drop-hoq-lifetime"), ==, hoq0);

    sw_port_counters(&s, 2, &pc0);
    sw_set_hoq(&s, 2, 10);
    for (i = 0; i < 100 && sw_counter(&s, "drop-hoq-lifetime") < hoq0 + SWC_BUFFER_PKTS; i++) {
        qtest_clock_step(s.qs->qts, 10 * 1000 * 1000ll);
    }
    g_assert_cmpuint(sw_counter(&s, "drop-hoq-lifetime"), ==, hoq0 + SWC_BUFFER_PKTS);
    sw_port_counters(&s, 2, &pc1);
    g_assert_cmpuint(be16_to_cpu(pc1.xmit_discards_be), ==,
                     be16_to_cpu(pc0.xmit_discards_be) + SWC_BUFFER_PKTS);

    /*
     * Seven discards in a row (VLStallCount's reset value) stalled VL0 for 8 lifetimes
     * (/pib/switch/vl-stall): past that, B lets go; nothing of the discarded comes, and new
     * packets do.
     */
    qtest_clock_step(s.qs->qts, 8 * (4096ll << 10));
    swc_qom_set_hold(&s, "/machine/peripheral/pb", false);
    for (i = 0; i < 5; i++) {
        sw_send_ud_vl(&s, 2, SW_SM_LID, 0, 0, 0x42, PIB_DEFAULT_PKEY, payload,
                      sizeof(payload));
    }
    sw_wait_hca_counter(&s.b, PIB_CNT_RX_PACKETS, cb[PIB_CNT_RX_PACKETS] + SWC_BUFFER_PKTS + 5);
    sw_shutdown(&s);
}

/*
 * VLStallCount (PortInfo, IBTA 18.2.5.4): port 2 with HOQLife 10 (4.2 ms) and VLStallCount 2.
 * B holds its credits, its buffer full and a buffer's worth waiting at port 2.  One lifetime
 * discards one head, the second one stalls VL0: everything waiting goes at once.  While
 * stalled (8 lifetimes) packets to B are discarded as they come; after it, they wait again,
 * and reach B when it lets go.  The reset value reads 7.
 */
static void test_switch_vl_stall(void)
{
    static uint8_t payload[SWC_PAYLOAD];
    const int64_t life = 4096ll << 10;
    uint64_t fwd, hoq0, cb[PIB_CNT_MAX];
    struct pib_smp resp;
    Sw s;
    int i;

    sw_hoq_fill(&s, cb, &resp);
    g_assert_cmpuint(((struct pib_port_info *)resp.data)->vlstall_hoqlife >> 5, ==, 7);
    hoq0 = sw_counter(&s, "drop-hoq-lifetime");

    sw_set_hoq_stall(&s, 2, 10, 2);
    qtest_clock_step(s.qs->qts, life + 1000);
    g_assert_cmpuint(sw_counter(&s, "drop-hoq-lifetime"), ==, hoq0 + 1);
    qtest_clock_step(s.qs->qts, life + 1000);
    g_assert_cmpuint(sw_counter(&s, "drop-hoq-lifetime"), ==, hoq0 + SWC_BUFFER_PKTS);

    /* Stalled: what comes for VL0 of port 2 goes at once. */
    for (i = 0; i < 3; i++) {
        sw_send_ud_vl(&s, 2, SW_SM_LID, 0, 0, 0x42, PIB_DEFAULT_PKEY, payload,
                      sizeof(payload));
    }
    sw_wait_counter(&s, "drop-hoq-lifetime", hoq0 + SWC_BUFFER_PKTS + 3);

    /* Eight lifetimes on: the stall is over, and packets wait at the head again. */
    qtest_clock_step(s.qs->qts, 8 * life);
    fwd = sw_counter(&s, "forwarded");
    for (i = 0; i < 3; i++) {
        sw_send_ud_vl(&s, 2, SW_SM_LID, 0, 0, 0x42, PIB_DEFAULT_PKEY, payload,
                      sizeof(payload));
    }
    sw_wait_counter(&s, "forwarded", fwd + 3);
    g_assert_cmpuint(sw_counter(&s, "drop-hoq-lifetime"), ==, hoq0 + SWC_BUFFER_PKTS + 3);
    swc_qom_set_hold(&s, "/machine/peripheral/pb", false);
    sw_wait_hca_counter(&s.b, PIB_CNT_RX_PACKETS, cb[PIB_CNT_RX_PACKETS] + SWC_BUFFER_PKTS + 3);
    sw_shutdown(&s);
}

/*
 * VL arbitration (IBTA 7.6.9) at a congested output port: HCA A sends on VL0 and HCA B on
 * VL1, both to us on port 3, and we grant port 3 no credit until both VLs wait there with a
 * whole buffer each (31 packets of 4 KiB: A and B are then out of credit at ports 1 and 2).
 * Then we grant them all: the order in which port 3 sends the 62 packets is the arbiter's
 * alone.  Weights 192 and 64 in the low-priority table (units of 64 bytes: three 4 KiB packets
 * against one) send three of VL0 for one of VL1, and swapped the other way round; VL1 in the
 * high-priority table takes the port (VLHighLimit 255), or one packet per turn of the low
 * table (VLHighLimit 0).
 */
#define SWA_COUNT       24      /* packets of the VL we count to */

/* One HCA's UD QP posts n SENDs of 4 KiB on sl to us (their completions are not awaited). */
static void swa_send(PibDev *d, TestEnd *x, uint8_t sl, int n)
{
    struct pib_sge sge = dp_sge(x->buf, 4096, x->key);
    struct pib_send_wqe w = sw_ud_wqe(sl);
    int i;

    for (i = 0; i < n; i++) {
        w.wr_id = cpu_to_le64(i);
        dp_post_send_raw(d, &x->qp, &w, &sge, sizeof(sge), true);
    }
}

static void swa_end(PibDev *d, TestEnd *x)
{
    memset(x, 0, sizeof(*x));
    x->d = d;
    x->pdn = dp_create_pd(d);
    x->buf_len = 4096;
    x->buf = dp_alloc(d, 4096);
    x->key = dp_reg_mr(d, x->pdn, DP_ALL_ACCESS, x->buf, 4096);
    dp_create_cq(d, 256, &x->scq);
    dp_create_cq(d, 256, &x->rcq);
    g_assert_cmpuint(dp_create_qp_ex(d, PIB_QPT_UD, x->pdn, &x->scq, &x->rcq, 128, 16, DP_UAR,
                                     PIB_SRQN_NONE, &x->qp), ==, PIB_AQ_OK);
    dp_ud_ready(d, &x->qp, 0x1234);
}

/*
 * Grant port 3 every packet that waits, and read them: how many of the other VL came with the
 * first SWA_COUNT of VL done_vl.
 */
static uint32_t swa_share(Sw *s, uint8_t done_vl)
{
    uint8_t b[PIB_LINK_MAX_PAYLOAD];
    uint32_t got[2] = { 0 }, other = 0;
    uint16_t len;
    uint8_t type, vl;

    peer_send_flow(s->fd, 0, 2048, 2048);
    while (got[0] + got[1] < 2 * SWC_BUFFER_PKTS) {
        type = peer_read_any(s->fd, b, sizeof(b), &len, TIMEOUT_US / 1000);
        g_assert_cmpuint(type, !=, 0);
        vl = b[0] >> 4;
        if (type != PIB_FRAME_PACKET || vl > 1 || b[8] != PIB_OP_UD_SEND_ONLY) {
            continue;
        }
        if (++got[vl] == SWA_COUNT && vl == done_vl) {
            other = got[!done_vl];
        }
    }
    g_assert_cmpuint(got[0], ==, SWC_BUFFER_PKTS);
    g_assert_cmpuint(got[1], ==, SWC_BUFFER_PKTS);
    return other;
}

static void swa_vlarb(Sw *s, uint8_t w0, uint8_t w1)
{
    struct pib_smp resp;
    uint8_t t[64] = { 0, w0, 1, w1 };

    g_assert_cmphex(sw_dr_set(s, PIB_SMP_ATTR_VLARB_TABLE, PIB_VLARB_LOW_0 << 16 | SW_TEST_PORT,
                              t, sizeof(t), &resp), ==, 0);
    g_assert_cmpmem(resp.data, 4, t, 4);
}

/* VL1 alone in port 3's high-priority table, VL0 alone in the low one; VLHighLimit limit. */
static void swa_high(Sw *s, uint8_t limit)
{
    struct pib_smp resp;
    struct pib_port_info pi;
    uint8_t low[64] = { 0, 64 }, high[64] = { 1, 64 };

    g_assert_cmphex(sw_dr_set(s, PIB_SMP_ATTR_VLARB_TABLE, PIB_VLARB_LOW_0 << 16 | SW_TEST_PORT,
                              low, sizeof(low), &resp), ==, 0);
    g_assert_cmphex(sw_dr_set(s, PIB_SMP_ATTR_VLARB_TABLE, PIB_VLARB_HIGH_0 << 16 | SW_TEST_PORT,
                              high, sizeof(high), &resp), ==, 0);
    g_assert_cmphex(sw_dr_get(s, PIB_SMP_ATTR_PORT_INFO, SW_TEST_PORT, &resp), ==, 0);
    memcpy(&pi, resp.data, sizeof(pi));
    pi.speed_state &= 0xf0;
    pi.phys_down &= 0x0f;
    pi.vl_high_limit = limit;
    g_assert_cmphex(sw_dr_set(s, PIB_SMP_ATTR_PORT_INFO, SW_TEST_PORT, &pi, sizeof(pi), &resp),
                    ==, 0);
    g_assert_cmpuint(((struct pib_port_info *)resp.data)->vl_high_limit, ==, limit);
}

/* A fresh fabric with credits on port 3, SL0 on VL0 and SL1 on VL1, and A's and B's UD QPs. */
static void swa_boot(Sw *s, TestEnd *x, TestEnd *y)
{
    sw_boot_ex(s, PIB_HELLO_F_CREDITS, "");
    sw_program(s);
    g_assert_cmphex(sw_sl2vl_set(s, PIB_SL2VL_ALL_IN | PIB_SL2VL_ALL_OUT,
                                 0x0100000000000000ull), ==, 0);
    swa_end(&s->a, x);
    swa_end(&s->b, y);
}

/*
 * One measurement on a fresh fabric: port 3's tables set by weights (w0, w1 for VL0 and VL1 in
 * the low table) or, with high >= 0, VL1 high and VL0 low with VLHighLimit high; then A's VL0
 * and B's VL1 SENDs.  Returns the other VL's packets when VL done_vl brought SWA_COUNT.
 */
static uint32_t swa_run(uint8_t w0, uint8_t w1, int high, uint8_t done_vl)
{
    TestEnd x, y;
    uint32_t other;
    uint64_t fwd;
    Sw s;

    swa_boot(&s, &x, &y);
    if (high >= 0) {
        swa_high(&s, high);
    } else {
        swa_vlarb(&s, w0, w1);
    }
    fwd = sw_counter(&s, "forwarded");
    swa_send(&s.a, &x, 0, SWC_BUFFER_PKTS);
    swa_send(&s.b, &y, 1, SWC_BUFFER_PKTS);
    /* Both VLs wait at port 3 before we grant: a full buffer's worth from each of ports 1, 2. */
    sw_wait_counter(&s, "forwarded", fwd + 2 * SWC_BUFFER_PKTS);
    other = swa_share(&s, done_vl);
    g_test_message("weights %u:%u, VLHighLimit %d: %u of VL%u with %u of VL%u", w0, w1, high,
                   other, !done_vl, SWA_COUNT, done_vl);
    sw_shutdown(&s);
    return other;
}

static void test_switch_vlarb(void)
{
    /*
     * 3:1 by weight, either way round.  The table's entry 0 (VL0) goes first: with VL0 the
     * heavier, 0 0 0 1 0 0 0 1 ..., and 7 of VL1 came with the 24th of VL0; with VL1 the
     * heavier, 0 1 1 1 0 1 1 1 ..., and 8 of VL0 came with the 24th of VL1.
     */
    g_assert_cmpuint(swa_run(192, 64, -1, 0), ==, SWA_COUNT / 3 - 1);
    g_assert_cmpuint(swa_run(64, 192, -1, 1), ==, SWA_COUNT / 3);
    /* High priority without a limit: all of VL1 first; with VLHighLimit 0, turn by turn. */
    g_assert_cmpuint(swa_run(64, 64, 255, 1), ==, 0);
    g_assert_cmpuint(swa_run(64, 64, 0, 1), >=, SWA_COUNT - 1);
}

/*
 * HCA A's own QP0 (as ib_mad drives it) sends a directed-route SMP, NodeInfo one hop out of its
 * port: the kernel's smi.c send rule C14-9:1 is applied here (hop pointer 1, InitialPath[1] =
 * the port), the HCA sends it on VL15 to the permissive LID, and the switch's answer arrives on
 * A's QP0: a switch, reached on its port 1, the hop pointer back at 1.
 */
static void test_switch_hca_qp0(void)
{
    Sw s;
    TestCq cq;
    TestQp qp0;
    struct pib_smp req, resp;
    struct pib_node_info ni;
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX | PIB_QP_QKEY),
        .qp_state = PIB_QPS_INIT,
    };
    struct pib_send_wqe w = {
        .opcode = PIB_WQE_SEND,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 1,
        .wr_id = cpu_to_le64(0x5eed),
        .ud_qpn = cpu_to_le32(0),
        .ud_qkey = cpu_to_le32(0),
        .ud_dlid = cpu_to_le16(PIB_LID_PERMISSIVE),
    };
    struct pib_sge sge;
    struct pib_cqe cqe;
    uint32_t pdn, key;
    uint64_t buf;

    sw_boot(&s);
    pdn = dp_create_pd(&s.a);
    buf = dp_alloc(&s.a, 8192);
    key = dp_reg_mr(&s.a, pdn, PIB_ACCESS_LOCAL_WRITE, buf, 8192);
    dp_create_cq(&s.a, 16, &cq);
    g_assert_cmpuint(dp_create_qp_ex(&s.a, PIB_QPT_SMI, pdn, &cq, &cq, 16, 16, DP_UAR,
                                     PIB_SRQN_NONE, &qp0), ==, PIB_AQ_OK);
    g_assert_cmpuint(qp0.qpn, ==, 0);
    g_assert_cmpuint(dp_modify(&s.a, 0, &a), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&s.a, 0, PIB_QPS_RTR), ==, PIB_AQ_OK);
    a = (struct pib_qp_attr) {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_SQ_PSN),
        .qp_state = PIB_QPS_RTS,
    };
    g_assert_cmpuint(dp_modify(&s.a, 0, &a), ==, PIB_AQ_OK);
    /* A receive: the 40-byte GRH slot, then the MAD. */
    sge = dp_sge(buf + 4096, 40 + PIB_MAD_SIZE, key);
    dp_post_recv(&s.a, &qp0, 0x77, &sge, 1);

    req = sw_dr_new(PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
    qtest_memwrite(qts(&s.a), buf, &req, sizeof(req));
    sge = dp_sge(buf, PIB_MAD_SIZE, key);
    dp_post_send_raw(&s.a, &qp0, &w, &sge, sizeof(sge), true);
    dp_expect(&s.a, &cq, 0x5eed, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&s.a, &cq, 0x77, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 40 + PIB_MAD_SIZE);
    qtest_memread(qts(&s.a), buf + 4096 + 40, &resp, sizeof(resp));
    g_assert_cmphex(resp.hdr.method, ==, PIB_MAD_METHOD_GET_RESP);
    g_assert_cmphex(resp.hdr.tid_lo_be, ==, req.hdr.tid_lo_be);
    g_assert_cmphex(be16_to_cpu(resp.hdr.status_be), ==, PIB_SMP_STATUS_DIRECTION);
    g_assert_cmphex(be16_to_cpu(resp.hdr.class_spec_be), ==, 1 << 8 | 1);
    g_assert_cmpuint(resp.return_path[1], ==, 1);
    memcpy(&ni, resp.data, sizeof(ni));
    g_assert_cmpuint(ni.node_type, ==, PIB_NODE_TYPE_SWITCH);
    g_assert_cmpuint(ni.num_ports, ==, SW_PORTS);
    g_assert_cmpuint(be32_to_cpu(ni.port_vendor_be) >> 24, ==, 1);   /* A is on port 1 */
    g_assert_cmphex(ldq_be_p(&ni.node_guid_hi_be), ==, SW_NODE_GUID);
    g_assert_cmpuint(dp_err_count(&s.a), ==, 0);
    sw_shutdown(&s);
}

/*
 * Two switches in two QEMU processes, as pibvm chains them: switch A's port 2 listens, switch
 * B's port 1 dials it.  This process is on A's port 1.  Directed-route SMPs cross both devices
 * hop by hop: NodeInfo of B (two hops), and a three-hop loop out of B's port 1 back into A,
 * whose SMA answers; each answer retraces the ReturnPath that the hops recorded.
 */
#define SW_CHAIN_GUID_A 0x0002c90300ee1000ull
#define SW_CHAIN_GUID_B 0x0002c90300ee2000ull

static void test_switch_dr_chain(void)
{
    g_autofree char *dir = g_dir_make_tmp("pib-swchain-XXXXXX", NULL);
    g_autofree char *a1 = g_build_filename(dir, "a1.sock", NULL);
    g_autofree char *a2 = g_build_filename(dir, "a2.sock", NULL);
    g_autofree char *args_a = g_strdup_printf(
        "-machine none -nodefaults "
        "-chardev socket,id=s1,path=%s,server=on,wait=off "
        "-chardev socket,id=s2,path=%s,server=on,wait=off "
        "-device pib-switch,id=sw0,ports=2,node-guid=0x%" PRIx64 ",port1=s1,port2=s2",
        a1, a2, (uint64_t)SW_CHAIN_GUID_A);
    g_autofree char *args_b = g_strdup_printf(
        "-machine none -nodefaults "
        "-chardev socket,id=s1,path=%s," PIB_CHR_RECONNECT_1S " "
        "-device pib-switch,id=sw1,ports=2,node-guid=0x%" PRIx64 ",port1=s1",
        a2, (uint64_t)SW_CHAIN_GUID_B);
    QTestState *qa = qtest_init(args_a);
    QTestState *qb = qtest_init(args_b);
    Sw s = { .fd = peer_connect(a1) };
    struct pib_smp req, resp;
    struct pib_node_info ni;
    struct pib_port_info pi = { 0 };

    peer_expect_hello(s.fd, SW_CHAIN_GUID_A);
    peer_send_hello(s.fd);

    /* A's port 2 trains once B has dialled it (B redials every second). */
    PIB_WAIT_FOR((sw_dr_get(&s, PIB_SMP_ATTR_PORT_INFO, 2, &resp) == 0 &&
                  (memcpy(&pi, resp.data, sizeof(pi)),
                   (pi.speed_state & 0xf) == PIB_PORT_INIT)));
    g_assert_cmpuint(pi.speed_state & 0xf, ==, PIB_PORT_INIT);
    g_assert_cmpuint(pi.phys_down >> 4, ==, PIB_PHYS_LINKUP);

    /*
     * Two hops: A (in by 1, out of InitialPath[2] = 2), then B's SMA.  A recorded
     * ReturnPath[1] = 1, B ReturnPath[2] = 1 (its arrival port); B answered with D set and the
     * hop pointer at 2, and A took it back to 1 and out of ReturnPath[1], to us.
     */
    req = sw_dr_new(PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
    req.hdr.class_spec_be = cpu_to_be16(1 << 8 | 2);
    req.initial_path[2] = 2;
    g_assert_cmphex(sw_dr(&s, &req, &resp), ==, 0);
    memcpy(&ni, resp.data, sizeof(ni));
    g_assert_cmpuint(ni.node_type, ==, PIB_NODE_TYPE_SWITCH);
    g_assert_cmphex(ldq_be_p(&ni.node_guid_hi_be), ==, SW_CHAIN_GUID_B);
    g_assert_cmpuint(be32_to_cpu(ni.port_vendor_be) >> 24, ==, 1);   /* B's port 1 */
    g_assert_cmpuint(resp.return_path[1], ==, 1);
    g_assert_cmpuint(resp.return_path[2], ==, 1);

    /* B's PortInfo for port 1, two hops away: the inter-switch link is up (INIT, LinkUp). */
    req = sw_dr_new(PIB_MAD_METHOD_GET, PIB_SMP_ATTR_PORT_INFO, 1);
    req.hdr.class_spec_be = cpu_to_be16(1 << 8 | 2);
    req.initial_path[2] = 2;
    g_assert_cmphex(sw_dr(&s, &req, &resp), ==, 0);
    memcpy(&pi, resp.data, sizeof(pi));
    g_assert_cmpuint(pi.local_port_num, ==, 1);
    g_assert_cmpuint(pi.speed_state & 0xf, ==, PIB_PORT_INIT);

    /*
     * Three hops, a loop: A (out of 2), B (in by 1, out of InitialPath[3] = 1), back into A by
     * its port 2, whose SMA answers.  On the way back B and A each take one hop off the pointer.
     */
    req = sw_dr_new(PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
    req.hdr.class_spec_be = cpu_to_be16(1 << 8 | 3);
    req.initial_path[2] = 2;
    req.initial_path[3] = 1;
    g_assert_cmphex(sw_dr(&s, &req, &resp), ==, 0);
    memcpy(&ni, resp.data, sizeof(ni));
    g_assert_cmphex(ldq_be_p(&ni.node_guid_hi_be), ==, SW_CHAIN_GUID_A);
    g_assert_cmpuint(be32_to_cpu(ni.port_vendor_be) >> 24, ==, 2);   /* A, by port 2 */
    g_assert_cmpuint(resp.return_path[1], ==, 1);
    g_assert_cmpuint(resp.return_path[2], ==, 1);
    g_assert_cmpuint(resp.return_path[3], ==, 2);

    /* B's port 2 has no cable: a path through it is B's drop, and nothing comes back. */
    req = sw_dr_new(PIB_MAD_METHOD_GET, PIB_SMP_ATTR_NODE_INFO, 0);
    req.hdr.class_spec_be = cpu_to_be16(1 << 8 | 3);
    req.initial_path[2] = 2;
    req.initial_path[3] = 2;
    sw_send_ud(&s, PIB_LID_PERMISSIVE, PIB_LID_PERMISSIVE, true, 0, &req, sizeof(req));
    g_assert_false(sw_recv_smp(&s, &resp, NULL, 300));

    close(s.fd);
    qtest_quit(qb);
    qtest_quit(qa);
    g_unlink(a1);
    g_unlink(a2);
    g_rmdir(dir);
}

/*
 * Migration: a switch saved and loaded (pib-switch-vmstate.c).  This process is the peer on
 * all three ports and the SM, which speaks from port 1.
 */
#define SW_MIG_TOKEN(port)  (0x70c3e9000000000ull + (port))
#define SW_MIG_MLID         0xc000

static char *sw_mig_args(const char *dir, uint64_t guid, const char *extra)
{
    GString *a = g_string_new("-machine none -nodefaults ");
    int i;

    for (i = 1; i <= 3; i++) {
        g_string_append_printf(a, "-chardev socket,id=s%d,path=%s/m%d.sock,server=on,wait=off ",
                               i, dir, i);
    }
    g_string_append_printf(a, "-device pib-switch,id=sw0,ports=3,node-guid=0x%" PRIx64
                           ",port1=s1,port2=s2,port3=s3 %s", guid, extra);
    return g_string_free(a, false);
}

/* Dial port `port` of the switch; its HELLO's token in *token.  Ours is the caller's. */
static int sw_mig_dial(const char *dir, int port, uint64_t *token)
{
    g_autofree char *path = g_strdup_printf("%s/m%d.sock", dir, port);
    int fd = peer_connect(path);

    *token = peer_expect_hello(fd, SW_NODE_GUID);
    g_assert_cmphex(*token, !=, 0);
    return fd;
}

/* The next data packet (not VL15) on fd: its length, LRH onwards in buf. */
static uint16_t sw_recv_data(int fd, uint8_t *buf, size_t size)
{
    struct pib_link_hdr hdr;
    uint16_t len;

    for (;;) {
        len = peer_read_frame(fd, &hdr, buf, size);
        if (hdr.type == PIB_FRAME_PACKET && buf[0] >> 4 != 15) {
            return len;
        }
    }
}

/* A UD packet into the switch at `in`, to the LID behind `out`. */
static void sw_mig_send(Sw *in, uint16_t dlid, uint8_t seed)
{
    uint8_t payload[64];

    memset(payload, seed, sizeof(payload));
    sw_send_ud(in, dlid, dlid == 1 ? 2 : 1, false, 0x10, payload, sizeof(payload));
}

/* ... and out of the switch at `out` (bytes compared). */
static void sw_mig_expect(Sw *out, uint16_t dlid, uint8_t seed)
{
    uint8_t payload[64], buf[PIB_LINK_MAX_PAYLOAD];
    uint16_t len;

    memset(payload, seed, sizeof(payload));
    len = sw_recv_data(out->fd, buf, sizeof(buf));
    g_assert_cmpuint(len, ==, 28 + sizeof(payload));
    g_assert_cmphex(lduw_be_p(buf + 2), ==, dlid);
    g_assert_cmpmem(buf + 28, sizeof(payload), payload, sizeof(payload));
}

/* A UD packet from port 1 to LID 2 crosses to port 2. */
static void sw_mig_forward(Sw *in, Sw *out, uint8_t seed)
{
    sw_mig_send(in, 2, seed);
    sw_mig_expect(out, 2, seed);
}

static uint8_t sw_mig_port_state(Sw *sm, uint8_t port)
{
    struct pib_smp resp;
    struct pib_port_info pi;

    g_assert_cmphex(sw_dr_get(sm, PIB_SMP_ATTR_PORT_INFO, port, &resp), ==, 0);
    memcpy(&pi, resp.data, sizeof(pi));
    if (port == 0) {
        g_assert_cmphex(be16_to_cpu(pi.lid_be), ==, SW_LID);
    }
    return pi.speed_state & 0xf;
}

/*
 * The next MOVE frame on fd (other frames passed over): the switch port's token, and a hold
 * (moving) or 0 (the move is off).
 */
static void sw_expect_move(int fd, uint64_t token, bool moving)
{
    struct pib_link_hdr hdr;
    struct pib_link_move m;
    uint8_t buf[PIB_LINK_MAX_PAYLOAD];
    uint16_t len;

    do {
        len = peer_read_frame(fd, &hdr, buf, sizeof(buf));
    } while (hdr.type != PIB_FRAME_MOVE);
    g_assert_cmpuint(len, ==, sizeof(m));
    memcpy(&m, buf, sizeof(m));
    g_assert_cmphex(be64_to_cpu(m.token_be), ==, token);
    if (moving) {
        g_assert_cmpuint(be32_to_cpu(m.wait_ms_be), >, 0);
        g_assert_cmpuint(be32_to_cpu(m.wait_ms_be), <=, PIB_LINK_MOVE_WAIT_MAX_MS);
    } else {
        g_assert_cmpuint(be32_to_cpu(m.wait_ms_be), ==, 0);
    }
}

/* A load of file that must be refused: the incoming QEMU exits with status 1. */
static void sw_mig_expect_refused(const char *dir, uint64_t guid, const char *file)
{
    g_autofree char *args = sw_mig_args(dir, guid, "-incoming defer");
    QTestState *qts = qtest_init(args);
    g_autofree char *uri = g_strdup_printf("exec:cat %s", file);
    int i;

    qtest_set_expected_status(qts, 1);
    qtest_qmp_assert_success(qts, "{ 'execute': 'migrate-incoming', "
                             "'arguments': { 'uri': %s } }", uri);
    for (i = 0; i < 20000 && qtest_probe_child(qts); i++) {
        g_usleep(5000);
    }
    g_assert_false(qtest_probe_child(qts));
    qtest_quit(qts);
}

/* Where pat is in buf, once. */
static size_t sw_mig_find(const uint8_t *buf, size_t len, const uint8_t *pat, size_t plen)
{
    size_t i, at = SIZE_MAX;

    for (i = 0; i + plen <= len; i++) {
        if (!memcmp(buf + i, pat, plen)) {
            g_assert_cmpuint(at, ==, SIZE_MAX);
            at = i;
        }
    }
    g_assert_cmpuint(at, !=, SIZE_MAX);
    return at;
}

/*
 * A fuzzer of the switch's section: PIB_SW_MIG_MUTATIONS streams (48) with 1-4 random changes
 * each (a bit flipped, a be32 set to 0, to all ones, or one more), from PIB_SW_MIG_SEED.  Each
 * must be refused (exit 1) or load; a loaded switch runs 16 steps of 10 ms of virtual time (its
 * timers: traps, HOQLife, the M_Key lease), then must quit cleanly.  The LFT (48 KiB, nearly all
 * 255, any value valid) is left alone, so that the changes land elsewhere.
 */
static void sw_mig_mutate(const char *dir, const char *file)
{
    const char *env = getenv("PIB_SW_MIG_MUTATIONS");
    const char *seed = getenv("PIB_SW_MIG_SEED");
    int runs = env ? atoi(env) : 48, i, k, refused = 0;
    GRand *r = g_rand_new_with_seed(seed ? strtoul(seed, NULL, 0) : 0x5eed0002);
    g_autofree char *args = sw_mig_args(dir, SW_NODE_GUID, "-incoming defer");
    g_autofree char *bad = g_build_filename(dir, "mut.vmstate", NULL);
    g_autofree uint8_t *good = NULL, *buf = NULL;
    const uint8_t *name;
    PibMutator mu;
    gsize len;
    PibIncoming c;
    bool running;

    g_assert_true(g_file_get_contents(file, (char **)&good, &len, NULL));
    name = memmem(good, len, "pib-switch", strlen("pib-switch"));
    g_assert_nonnull(name);
    pib_mutator_init(&mu, r, good, name - good + strlen("pib-switch") + 8, len,
                     PIB_LFT_NO_PORT);                  /* (past the instance and version) */
    g_assert_cmpuint(mu.skip_len, >, 40000);
    buf = g_malloc(len);
    for (i = 0; i < runs; i++) {
        pib_mutate(&mu, good, buf, len);
        g_assert_true(g_file_set_contents(bad, (char *)buf, len, NULL));
        running = pib_incoming_start(&c, dir, args, bad);
        for (k = 0; running && k < 16; k++) {
            g_autofree char *step = pib_incoming_qtest(&c, "clock_step 10000000\n");

            g_assert_nonnull(step);
        }
        pib_incoming_end(&c, running);
        refused += !running;
    }
    g_test_message("%d mutated switch streams: %d refused, %d loaded and ran", runs, refused,
                   runs - refused);
    g_rand_free(r);
    g_unlink(bad);
}

/*
 * The switch's CC agent, as an SM's congestion control manager programs it: a
 * SwitchCongestionSetting (what ControlMap names changes), port 2's
 * SwitchPortCongestionSetting element; the switch's log; the CA attributes and a block past
 * the ports refused.  What was set in *cs and *cp.
 */
static void sw_mig_cc_program(Sw *sm, struct pib_cc_sw_setting *cs,
                              struct pib_cc_swp_element *cp)
{
    struct pib_cc_swp_element blk[PIB_CC_SWP_BLOCK_PORTS] = { { 0 } };
    struct pib_cc_sw_setting in = { 0 };
    struct pib_cc_mad r;

    memset(in.victim_mask, 0xff, sizeof(in.victim_mask));
    memset(in.credit_mask, 0xff, sizeof(in.credit_mask));       /* (not in the map) */
    in.threshold = 0xf0;
    in.packet_size = 8;
    in.marking_rate_be = cpu_to_be16(3);
    in.control_map_be = cpu_to_be32(PIB_CC_SW_CTL_VICTIM | PIB_CC_SW_CTL_THRESHOLD |
                                    PIB_CC_SW_CTL_MARKING_RATE);
    g_assert_cmphex(sw_cc(sm, PIB_MAD_METHOD_SET, PIB_CC_ATTR_SW_CONG_SETTING, 0, &in,
                          sizeof(in), &r), ==, 0);
    *cs = in;
    memset(cs->credit_mask, 0, sizeof(cs->credit_mask));
    g_assert_cmpmem(r.data, sizeof(*cs), cs, sizeof(*cs));
    *cp = (struct pib_cc_swp_element) {
        .valid_type_threshold = PIB_CC_SWP_VALID | 7, .packet_size = 2,
        .marking_rate_be = cpu_to_be16(1),
    };
    blk[2] = *cp;
    g_assert_cmphex(sw_cc(sm, PIB_MAD_METHOD_SET, PIB_CC_ATTR_SW_PORT_CONG_SETTING, 0, blk,
                          sizeof(blk), &r), ==, 0);
    g_assert_cmpmem(r.data + 2 * sizeof(*cp), sizeof(*cp), cp, sizeof(*cp));
    g_assert_cmphex(sw_cc(sm, PIB_MAD_METHOD_GET, PIB_CC_ATTR_SW_PORT_CONG_SETTING, 1, NULL,
                          0, &r), ==, PIB_MAD_STATUS_INVALID_VALUE);  /* ports 32-63: none */
    g_assert_cmphex(sw_cc(sm, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CA_CONG_SETTING, 0, NULL, 0,
                          &r), ==, PIB_MAD_STATUS_UNSUP_ATTR);
    g_assert_cmphex(sw_cc(sm, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_INFO, 0, NULL, 0, &r),
                    ==, 0);
    g_assert_cmpuint(r.data[2], ==, 0);         /* ControlTableCap: a switch has no table */
    g_assert_cmphex(sw_cc(sm, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_LOG, 0, NULL, 0, &r), ==, 0);
    g_assert_cmpuint(r.log[0], ==, PIB_CC_LOG_SWITCH);
}

static void test_switch_migration(void)
{
    g_autofree char *dir = g_dir_make_tmp("pib-swmig-XXXXXX", NULL);
    g_autofree char *args = sw_mig_args(dir, SW_NODE_GUID, "");
    g_autofree char *args_in = sw_mig_args(dir, SW_NODE_GUID, "-incoming defer");
    g_autofree char *file = g_build_filename(dir, "sw.vmstate", NULL);
    g_autofree char *bad = g_build_filename(dir, "bad.vmstate", NULL);
    g_autofree char *uri = g_strdup_printf("exec:cat > %s", file);
    g_autofree char *uri_in = g_strdup_printf("exec:cat %s", file);
    g_autofree uint8_t *stream = NULL;
    QTestState *qts = qtest_init(args);
    Sw p[4] = { { 0 } };        /* [1..3]: this process on the switch's ports */
    uint64_t tok[4], tok_again[4];
    struct pib_port_counters pc2, pc2_after, pc;
    struct pib_cc_sw_setting cs;
    struct pib_cc_swp_element cp;
    struct pib_cc_mad cc;
    struct pib_smp resp;
    struct pib_switch_info si;
    uint8_t lft[64], pat[16], buf[PIB_LINK_MAX_PAYLOAD];
    uint16_t len16;
    uint16_t mft[PIB_MFT_BLOCK_ENTRIES] = { 0 };
    gsize len;
    size_t at;
    uint32_t state;
    int i;

    for (i = 1; i <= 3; i++) {
        p[i].fd = sw_mig_dial(dir, i, &tok[i]);
        peer_send_hello_token(p[i].fd, 0, SW_MIG_TOKEN(i));
    }
    /* The SM's work, from port 1: LIDs 1-3 behind ports 1-3, an MFT entry, ports ACTIVE. */
    sw_port_state(&p[1], 0, 0, SW_LID);
    memset(lft, PIB_LFT_NO_PORT, sizeof(lft));
    lft[1] = 1;
    lft[2] = 2;
    lft[3] = 3;
    lft[SW_LID] = 0;
    lft[SW_SM_LID] = 1;
    g_assert_cmphex(sw_dr_set(&p[1], PIB_SMP_ATTR_LFT, 0, lft, sizeof(lft), &resp), ==, 0);
    g_assert_cmphex(sw_dr_get(&p[1], PIB_SMP_ATTR_SWITCH_INFO, 0, &resp), ==, 0);
    memcpy(&si, resp.data, sizeof(si));
    si.lft_top_be = cpu_to_be16(SW_SM_LID);
    g_assert_cmphex(sw_dr_set(&p[1], PIB_SMP_ATTR_SWITCH_INFO, 0, &si, sizeof(si), &resp),
                    ==, 0);
    stw_be_p(&mft[0], 1u << 1 | 1u << 2);       /* MLID 0xc000: ports 1 and 2 */
    g_assert_cmphex(sw_dr_set(&p[1], PIB_SMP_ATTR_MFT, 0, mft, sizeof(mft), &resp), ==, 0);
    for (i = 1; i <= 3; i++) {
        sw_port_state(&p[1], i, PIB_PORT_ARMED, 0);
        sw_port_state(&p[1], i, PIB_PORT_ACTIVE, 0);
    }
    sw_mig_forward(&p[1], &p[2], 0x5a);
    sw_port_counters(&p[1], 2, &pc2);
    g_assert_cmpuint(be32_to_cpu(pc2.xmit_pkts_be), >=, 1);
    sw_mig_cc_program(&p[1], &cs, &cp);

    /*
     * A live migration called off (`pibvm migrate sw0` that fails): when it starts, every port
     * tells its peer the switch may move; paused before the switchover (the machine stopped),
     * then cancelled, the switch runs on where it was, and every port says so (MOVE, 0).
     */
    qtest_qmp_assert_success(qts, "{ 'execute': 'migrate-set-capabilities', 'arguments': "
                             "{ 'capabilities': [ { 'capability': 'pause-before-switchover', "
                             "'state': true } ] } }");
    qtest_qmp_assert_success(qts, "{ 'execute': 'migrate', 'arguments': { 'uri': %s } }", uri);
    pib_migration_wait(qts, "pre-switchover");
    qtest_qmp_assert_success(qts, "{ 'execute': 'migrate_cancel' }");
    pib_migration_wait(qts, "cancelled");
    for (i = 1; i <= 3; i++) {
        sw_expect_move(p[i].fd, tok[i], true);
        sw_expect_move(p[i].fd, tok[i], false);
    }
    qtest_qmp_assert_success(qts, "{ 'execute': 'migrate-set-capabilities', 'arguments': "
                             "{ 'capabilities': [ { 'capability': 'pause-before-switchover', "
                             "'state': false } ] } }");
    sw_mig_forward(&p[1], &p[2], 0x5b);
    sw_port_counters(&p[1], 2, &pc2);

    /* The save, as `pibvm snapshot save`: stopped, then into the file.  Each port's notice. */
    qtest_qmp_assert_success(qts, "{ 'execute': 'stop' }");
    qtest_qmp_assert_success(qts, "{ 'execute': 'migrate', 'arguments': { 'uri': %s } }", uri);
    pib_migration_wait(qts, "completed");
    for (i = 1; i <= 3; i++) {
        sw_expect_move(p[i].fd, tok[i], true);
    }
    qtest_quit(qts);
    for (i = 1; i <= 3; i++) {
        close(p[i].fd);
    }

    /* The load into a new QEMU, which then runs. */
    qts = qtest_init(args_in);
    qtest_qmp_assert_success(qts, "{ 'execute': 'migrate-incoming', "
                             "'arguments': { 'uri': %s } }", uri_in);
    pib_migration_wait(qts, "completed");
    qtest_qmp_assert_success(qts, "{ 'execute': 'cont' }");
    /*
     * Every port greets with the token it had: the cable's identity came in the stream.  Ports
     * 1 and 2 get their old peers back; port 3 another port (a token it never had).
     */
    for (i = 1; i <= 3; i++) {
        p[i].fd = sw_mig_dial(dir, i, &tok_again[i]);
        g_assert_cmphex(tok_again[i], ==, tok[i]);
    }
    peer_send_hello_token(p[2].fd, 0, SW_MIG_TOKEN(2));
    /*
     * Port 1 held ACTIVE, but its peer's HELLO not in yet: data for it waits for that HELLO
     * (include/pib_link.h, "Credits": whether credits run is not known before), then goes.
     */
    sw_mig_send(&p[2], 1, 0x3c);
    g_assert_cmpuint(peer_read_any(p[1].fd, buf, sizeof(buf), &len16, 300), ==, 0);
    peer_send_hello_token(p[1].fd, 0, SW_MIG_TOKEN(1));
    sw_mig_expect(&p[1], 1, 0x3c);
    peer_send_hello_token(p[3].fd, 0, SW_MIG_TOKEN(3) + 0x100);
    g_assert_cmpuint(sw_mig_port_state(&p[1], 0), ==, PIB_PORT_ACTIVE);    /* its LID too */
    g_assert_cmpuint(sw_mig_port_state(&p[1], 1), ==, PIB_PORT_ACTIVE);
    g_assert_cmpuint(sw_mig_port_state(&p[1], 2), ==, PIB_PORT_ACTIVE);
    /* (port 3 holds its state until its peer's HELLO is read: a hang guard of looks) */
    PIB_WAIT_FOR(sw_mig_port_state(&p[1], 3) == PIB_PORT_INIT);
    g_assert_cmpuint(sw_mig_port_state(&p[1], 3), ==, PIB_PORT_INIT);
    /* The tables as the SM left them, and forwarding by them. */
    g_assert_cmphex(sw_dr_get(&p[1], PIB_SMP_ATTR_LFT, 0, &resp), ==, 0);
    g_assert_cmpmem(resp.data, sizeof(lft), lft, sizeof(lft));
    g_assert_cmphex(sw_dr_get(&p[1], PIB_SMP_ATTR_SWITCH_INFO, 0, &resp), ==, 0);
    memcpy(&si, resp.data, sizeof(si));
    g_assert_cmpuint(be16_to_cpu(si.lft_top_be), ==, SW_SM_LID);
    g_assert_cmphex(sw_dr_get(&p[1], PIB_SMP_ATTR_MFT, 0, &resp), ==, 0);
    g_assert_cmpmem(resp.data, sizeof(mft), mft, sizeof(mft));
    sw_mig_forward(&p[1], &p[2], 0xa5);
    /* The congestion control settings as the SM left them. */
    g_assert_cmphex(sw_cc(&p[1], PIB_MAD_METHOD_GET, PIB_CC_ATTR_SW_CONG_SETTING, 0, NULL, 0,
                          &cc), ==, 0);
    g_assert_cmpmem(cc.data, sizeof(cs), &cs, sizeof(cs));
    g_assert_cmphex(sw_cc(&p[1], PIB_MAD_METHOD_GET, PIB_CC_ATTR_SW_PORT_CONG_SETTING, 0,
                          NULL, 0, &cc), ==, 0);
    g_assert_cmpmem(cc.data + 2 * sizeof(cp), sizeof(cp), &cp, sizeof(cp));
    /* The PMA counts on from the save; only port 3 went down. */
    sw_port_counters(&p[1], 2, &pc2_after);
    g_assert_cmpuint(be32_to_cpu(pc2_after.xmit_pkts_be), ==, be32_to_cpu(pc2.xmit_pkts_be) + 1);
    for (i = 1; i <= 3; i++) {
        sw_port_counters(&p[1], i, &pc);
        g_assert_cmpuint(pc.link_downed, ==, i == 3 ? 1 : 0);
    }
    qtest_quit(qts);
    for (i = 1; i <= 3; i++) {
        close(p[i].fd);
    }

    /* Bad streams. */
    g_assert_true(g_file_get_contents(file, (char **)&stream, &len, NULL));
    /* 1. Port 1's state (the be32 before its token) out of range. */
    stq_be_p(pat, tok[1]);
    at = sw_mig_find(stream, len, pat, 8);
    state = ldl_be_p(stream + at - 4);
    stl_be_p(stream + at - 4, 0xff);
    g_assert_true(g_file_set_contents(bad, (char *)stream, len, NULL));
    sw_mig_expect_refused(dir, SW_NODE_GUID, bad);
    stl_be_p(stream + at - 4, state);
    /* 2. MLID 0xc000's entry (after the LFT's last unrouted LIDs) naming port 5. */
    memset(pat, PIB_LFT_NO_PORT, 4);
    stq_be_p(pat + 4, 1u << 1 | 1u << 2);       /* (an MFT entry is a be64) */
    at = sw_mig_find(stream, len, pat, 12);
    stq_be_p(stream + at + 4, 1u << 5 | 1u << 1);
    g_assert_true(g_file_set_contents(bad, (char *)stream, len, NULL));
    sw_mig_expect_refused(dir, SW_NODE_GUID, bad);
    /* 3. The good stream, into a switch with another node GUID. */
    sw_mig_expect_refused(dir, SW_NODE_GUID + 0x100, file);
    /* 4. Streams with random changes: each refused, or loaded and run. */
    sw_mig_mutate(dir, file);

    g_unlink(bad);
    g_unlink(file);
    for (i = 1; i <= 3; i++) {
        g_autofree char *path = g_strdup_printf("%s/m%d.sock", dir, i);

        g_unlink(path);
    }
    g_rmdir(dir);
}

/*
 * Congestion control at a switch (IBTA Annex A10.2.1; fabric/pib-cc.c, pib_cc_sw_mark).  Port
 * 3 (this process) runs credits; while it grants VL0 nothing, six UD SENDs from A on SL0 wait
 * there: the port is a victim of the next hop (us).  With Threshold 15 (any packet waiting)
 * and port 3 in Victim_Mask, each SEND that found another ahead of it leaves with FECN in its
 * BTH, the first one (the queue empty) without: five marks, in fecn-marked and in the
 * switch's CongestionLog (its counter, port 3 in PortMap, the newest event's LIDs), which a Get
 * empties.  Then the same six with port 3's SwitchPortCongestionSetting element valid and its
 * Threshold 0, and with port 3 out of Victim_Mask: no mark.
 */
#define SWF_PKT_BLOCKS  5           /* DIV_ROUND_UP(8 + 12 + 8 + 256, 64): a GMP, or a SEND */

typedef struct SwFecn {
    Sw s;
    TestEnd x;
    uint16_t our_blocks;        /* VL0 blocks we sent the switch: GMPs */
    uint16_t sw_blocks;         /* VL0 blocks the switch sent us: their answers, SENDs */
} SwFecn;

static uint16_t swf_cc_set(SwFecn *f, uint16_t attr, const void *data, size_t len)
{
    struct pib_cc_mad r;
    uint16_t st = sw_cc(&f->s, PIB_MAD_METHOD_SET, attr, 0, data, len, &r);

    f->our_blocks += SWF_PKT_BLOCKS;
    f->sw_blocks += SWF_PKT_BLOCKS;
    return st;
}

/* Six SENDs from A to us wait at port 3 (no VL0 credit), then come: FECN marked on each. */
static void swf_round(SwFecn *f, bool marked[6])
{
    struct pib_send_wqe w = sw_ud_wqe(0);
    struct pib_sge sge = dp_sge(f->x.buf, 256, f->x.key);
    uint8_t b[PIB_LINK_MAX_PAYLOAD];
    uint64_t fwd = sw_counter(&f->s, "forwarded");
    uint16_t len;
    uint8_t type;
    int i = 0;

    peer_send_flow(f->s.fd, f->our_blocks, f->sw_blocks, 2048);      /* VL0: no more */
    for (i = 0; i < 6; i++) {
        w.wr_id = cpu_to_le64(i);
        w.flags = i == 5 ? PIB_WQE_F_SIGNALED : 0;
        dp_post_send_raw(&f->s.a, &f->x.qp, &w, &sge, sizeof(sge), true);
    }
    dp_expect(&f->s.a, &f->x.scq, 5, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    sw_wait_counter(&f->s, "forwarded", fwd + 6);       /* all six queued at port 3 */
    peer_send_flow(f->s.fd, f->our_blocks, f->sw_blocks + 2048, 2048);
    for (i = 0; i < 6; ) {
        type = peer_read_any(f->s.fd, b, sizeof(b), &len, TIMEOUT_US / 1000);
        g_assert_cmpuint(type, !=, 0);
        if (type == PIB_FRAME_PACKET && b[0] >> 4 == 0 && b[8] == PIB_OP_UD_SEND_ONLY) {
            marked[i++] = ldl_be_p(b + 12) & PIB_BTH_FECN;
        }
    }
    f->sw_blocks += 6 * SWF_PKT_BLOCKS;
}

static void test_switch_fecn(void)
{
    struct pib_cc_sw_setting cs = { 0 };
    struct pib_cc_swp_element e[PIB_CC_SWP_BLOCK_PORTS] = { { 0 } };
    struct pib_cc_mad r;
    struct pib_cc_log_sw log;
    bool marked[6];
    SwFecn f = { 0 };
    int i;

    sw_boot_ex(&f.s, PIB_HELLO_F_CREDITS, "");
    sw_program(&f.s);
    peer_send_flow(f.s.fd, 0, 2048, 2048);
    dp_end(&f.s.a, &f.x, PIB_QPT_UD, 4096);
    dp_ud_ready(&f.s.a, &f.x.qp, 0x1234);
    memset(cs.victim_mask, 0xff, sizeof(cs.victim_mask));
    cs.threshold = 0xf0;
    cs.control_map_be = cpu_to_be32(PIB_CC_SW_CTL_VICTIM | PIB_CC_SW_CTL_THRESHOLD |
                                    PIB_CC_SW_CTL_MARKING_RATE);
    g_assert_cmphex(swf_cc_set(&f, PIB_CC_ATTR_SW_CONG_SETTING, &cs, sizeof(cs)), ==, 0);

    swf_round(&f, marked);
    g_assert_false(marked[0]);
    for (i = 1; i < 6; i++) {
        g_assert_true(marked[i]);
    }
    g_assert_cmpuint(sw_counter(&f.s, "fecn-marked"), ==, 5);
    g_assert_cmphex(sw_cc(&f.s, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_LOG, 0, NULL, 0, &r), ==, 0);
    f.our_blocks += SWF_PKT_BLOCKS;
    f.sw_blocks += SWF_PKT_BLOCKS;
    memcpy(&log, r.log, sizeof(r.log));
    memcpy((uint8_t *)&log + sizeof(r.log), r.data, sizeof(log) - sizeof(r.log));
    g_assert_cmpuint(log.log_type, ==, PIB_CC_LOG_SWITCH);
    g_assert_cmpuint(be16_to_cpu(log.event_counter_be), ==, 5);
    g_assert_cmphex(log.port_map[31], ==, 1u << SW_TEST_PORT);
    g_assert_cmpuint(be16_to_cpu(log.events[0].slid_be), ==, 1);
    g_assert_cmpuint(be16_to_cpu(log.events[0].dlid_be), ==, SW_SM_LID);
    g_assert_cmpuint(be16_to_cpu(log.events[4].dlid_be), ==, SW_SM_LID);
    g_assert_cmpuint(be16_to_cpu(log.events[5].dlid_be), ==, 0);
    g_assert_cmphex(sw_cc(&f.s, PIB_MAD_METHOD_GET, PIB_CC_ATTR_CONG_LOG, 0, NULL, 0, &r), ==, 0);
    f.our_blocks += SWF_PKT_BLOCKS;
    f.sw_blocks += SWF_PKT_BLOCKS;
    g_assert_cmpuint(lduw_be_p(r.log + 2), ==, 0);              /* emptied by the Get */

    /* Port 3's own element, valid, Threshold 0: it marks nothing. */
    e[SW_TEST_PORT].valid_type_threshold = PIB_CC_SWP_VALID;
    g_assert_cmphex(swf_cc_set(&f, PIB_CC_ATTR_SW_PORT_CONG_SETTING, e, sizeof(e)), ==, 0);
    swf_round(&f, marked);
    for (i = 0; i < 6; i++) {
        g_assert_false(marked[i]);
    }
    /* The element gone, port 3 out of Victim_Mask: a victim marks nothing either. */
    e[SW_TEST_PORT].valid_type_threshold = 0;
    g_assert_cmphex(swf_cc_set(&f, PIB_CC_ATTR_SW_PORT_CONG_SETTING, e, sizeof(e)), ==, 0);
    cs.victim_mask[31] &= ~(1u << SW_TEST_PORT);
    cs.control_map_be = cpu_to_be32(PIB_CC_SW_CTL_VICTIM);
    g_assert_cmphex(swf_cc_set(&f, PIB_CC_ATTR_SW_CONG_SETTING, &cs, sizeof(cs)), ==, 0);
    swf_round(&f, marked);
    for (i = 0; i < 6; i++) {
        g_assert_false(marked[i]);
    }
    g_assert_cmpuint(sw_counter(&f.s, "fecn-marked"), ==, 5);
    sw_shutdown(&f.s);
}

/*
 * A switch of 32 ports: port 32 is bit 0 of MFT position 2 (IBTA 14.2.5.12), which the SMA
 * takes (and masks to the ports there are); position 3 holds no port: INVALID_VALUE.  A
 * multicast packet from port 3 to an MLID of ports 1, 3 and 32 reaches A (port 1) and B
 * (port 32), each once.
 */
static void test_switch_mft_32(void)
{
    uint64_t ca[PIB_CNT_MAX], cb[PIB_CNT_MAX], ca2[PIB_CNT_MAX], cb2[PIB_CNT_MAX];
    uint16_t mft[PIB_MFT_BLOCK_ENTRIES] = { 0 };
    uint8_t junk[64] = { 0 };
    struct pib_smp resp;
    uint64_t fwd;
    Sw s;
    int i;

    sw_boot_ports(&s, 0, "", 32, 32);
    sw_program(&s);
    stw_be_p(&mft[0], 0xffff);                      /* ports 32..47: only 32 is there */
    g_assert_cmphex(sw_dr_set(&s, PIB_SMP_ATTR_MFT, 2u << 28, mft, sizeof(mft), &resp), ==, 0);
    g_assert_cmphex(lduw_be_p(resp.data), ==, 0x0001);
    stw_be_p(&mft[0], 1u << 1 | 1u << SW_TEST_PORT);
    g_assert_cmphex(sw_dr_set(&s, PIB_SMP_ATTR_MFT, 0, mft, sizeof(mft), &resp), ==, 0);
    g_assert_cmphex(lduw_be_p(resp.data), ==, 1u << 1 | 1u << SW_TEST_PORT);
    g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_MFT, 2u << 28, &resp), ==, 0);
    g_assert_cmphex(lduw_be_p(resp.data), ==, 0x0001);
    g_assert_cmphex(sw_dr_get(&s, PIB_SMP_ATTR_MFT, 3u << 28, &resp), ==,
                    PIB_MAD_STATUS_INVALID_VALUE);

    dp_counters(&s.a, ca);
    dp_counters(&s.b, cb);
    fwd = sw_counter(&s, "forwarded");
    sw_send_ud(&s, 0xc000, SW_SM_LID, false, PIB_MCAST_QPN, junk, sizeof(junk));
    for (i = 0; i < 1000; i++) {
        dp_counters(&s.a, ca2);
        dp_counters(&s.b, cb2);
        if (ca2[PIB_CNT_RX_DROP_MCAST] > ca[PIB_CNT_RX_DROP_MCAST] &&
            cb2[PIB_CNT_RX_DROP_MCAST] > cb[PIB_CNT_RX_DROP_MCAST]) {
            break;
        }
        g_usleep(10000);    /* a hang guard: 1000 looks */
    }
    g_assert_cmpuint(ca2[PIB_CNT_RX_DROP_MCAST], ==, ca[PIB_CNT_RX_DROP_MCAST] + 1);
    g_assert_cmpuint(cb2[PIB_CNT_RX_DROP_MCAST], ==, cb[PIB_CNT_RX_DROP_MCAST] + 1);
    g_assert_cmpuint(sw_counter(&s, "forwarded"), ==, fwd + 2);     /* a copy per port */
    sw_shutdown(&s);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/pib/switch/dr", test_switch_dr);
    qtest_add_func("/pib/switch/forwarding", test_switch_forwarding);
    qtest_add_func("/pib/switch/stopped", test_switch_stopped);
    qtest_add_func("/pib/switch/garbage", test_switch_garbage);
    qtest_add_func("/pib/switch/partition", test_switch_partition);
    qtest_add_func("/pib/switch/vls", test_switch_vls);
    qtest_add_func("/pib/switch/credits", test_switch_credits);
    qtest_add_func("/pib/switch/vlarb", test_switch_vlarb);
    qtest_add_func("/pib/switch/hoq", test_switch_hoq);
    qtest_add_func("/pib/switch/vl-stall", test_switch_vl_stall);
    qtest_add_func("/pib/switch/hca-qp0", test_switch_hca_qp0);
    qtest_add_func("/pib/switch/dr-chain", test_switch_dr_chain);
    qtest_add_func("/pib/switch/migration", test_switch_migration);
    qtest_add_func("/pib/switch/mft-32", test_switch_mft_32);
    qtest_add_func("/pib/switch/fecn", test_switch_fecn);
    return g_test_run();
}
