/*
 * pib fuzzing - the link fuzzer's fixture: the device as a driver leaves it
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Every input of pib-link-fuzz.c starts from the device fz_setup() builds
 * here, through the device's own code:
 *
 *   fz_layout()     fresh guest RAM (qemu-stubs.c): the admin and event
 *                   rings, the page lists, the MRs' pages, each with its role
 *                   for the oracle (driver pages, device pages, canaries)
 *   realize         the device's class_init and realize, as QOM runs them
 *   fz_link_up()    the link trained with the peer's HELLO (and, with
 *                   credits, its first FLOW frame: fz_credit_topup())
 *   fz_enable()     BAR0 programmed, then ENABLE
 *   fz_objects()    admin commands through the admin queue: a UAR, two PDs,
 *                   the MRs (enum FzMrId), two windows bound with BIND_MW
 *                   WQEs, a fast-registration MR, two CQs, an SRQ, five QPs
 *                   in RTS with receives posted, the XRC domain, SRQ and
 *                   target QP (fz_xrc_setup()), the port's LID
 *
 * and the driver's actions the ops of an input take on it: admin commands
 * (fz_admin() and its wrappers), MADs through MAD_IFC, QP state changes,
 * receive and send WQEs and their doorbells.  fz_settle() lets what is
 * pending finish; fz_teardown() runs the device's exit and checks what must
 * hold after it.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"

#include "fuzz-harness.h"

static const char *const fz_target_names[T__MAX] = {
    "RC", "RC-SRQ", "UC", "UD", "GSI",
};

Fz fz;
static PCIDeviceClass *fz_class;

/*
 * One admin command, as the driver runs it: write the slot, ring AQ_DB, let
 * the device work, read the completion.  Returns the status, or 0xff if the
 * device is not READY, 0xfe if no completion appeared.
 */
uint8_t fz_admin(struct pib_admin_cmd *cmd, uint32_t *r0, uint32_t *r1)
{
    uint32_t idx = fz.s->aq.sq_pi, slot = idx & (FZ_AQ_DEPTH - 1);
    struct pib_admin_cqe cqe;

    if (!fz_ready()) {
        return 0xff;
    }
    cmd->cmd_id = cpu_to_le16(idx);
    memcpy(fz_ram_ptr(fz.aq_sq + slot * sizeof(*cmd), sizeof(*cmd)), cmd,
           sizeof(*cmd));
    reg_write(PIB_REG_AQ_DB, idx + 1);
    fz_run_bhs();
    memcpy(&cqe, fz_ram_ptr(fz.aq_cq + slot * sizeof(cqe), sizeof(cqe)),
           sizeof(cqe));
    if ((cqe.flags & PIB_ACQE_F_PHASE) != pib_ring_phase(idx, FZ_AQ_DEPTH) ||
        le16_to_cpu(cqe.cmd_id) != (idx & 0xffff)) {
        return 0xfe;
    }
    if (r0) {
        *r0 = le32_to_cpu(cqe.result0);
    }
    if (r1) {
        *r1 = le32_to_cpu(cqe.result1);
    }
    return cqe.status;
}

/* A command the setup cannot do without. */
static uint32_t fz_admin_must(struct pib_admin_cmd *cmd, const char *what)
{
    uint32_t r0 = 0;
    uint8_t st = fz_admin(cmd, &r0, NULL);

    if (st != PIB_AQ_OK) {
        fz_bug("harness setup: %s failed with status 0x%x", what, st);
    }
    return r0;
}

uint8_t fz_obj_cmd(uint8_t opcode, uint32_t num)
{
    struct pib_admin_cmd cmd = { .opcode = opcode };

    cmd.in.obj.num = cpu_to_le32(num);
    return fz_admin(&cmd, NULL, NULL);
}

/* A page list for npages contiguous pages from base. */
static uint64_t fz_pbl(uint64_t base, uint32_t npages)
{
    uint64_t pbl = fz_ram_alloc(1, FZ_PG_DRIVER);
    uint64_t *p = fz_ram_ptr(pbl, npages * 8);
    uint32_t i;

    for (i = 0; i < npages; i++) {
        p[i] = cpu_to_le64(base + (uint64_t)i * PIB_PAGE_SIZE);
    }
    return pbl;
}

uint8_t fz_reg_mr(FzMrId id)
{
    FzMr *m = &fz.mr[id];
    struct pib_admin_cmd cmd = { .opcode = PIB_CMD_REG_MR };
    uint32_t key = 0;
    uint8_t st;

    cmd.in.reg_mr = (struct pib_cmd_reg_mr) {
        .pdn = cpu_to_le32(m->pdn),
        .access = cpu_to_le32(m->access),
        .iova = cpu_to_le64(m->flags ? 0 : m->iova),
        .length = cpu_to_le64(m->flags ? 0 : m->len),
        .pbl_addr = cpu_to_le64(m->pbl),
        .npages = cpu_to_le32(m->npages),
        .flags = cpu_to_le32(m->flags),
    };
    st = fz_admin(&cmd, &key, NULL);
    if (st == PIB_AQ_OK) {
        m->key = key;
        m->registered = true;
    }
    return st;
}

/*
 * One MAD through MAD_IFC, as the driver's process_mad hands it over: the firmware's answer
 * (PIB_MAD_IFC_*) in *result, its response in out (with REPLY).
 */
uint8_t fz_mad_ifc(const void *mad, uint32_t *result, void *out)
{
    struct pib_admin_cmd cmd = { .opcode = PIB_CMD_MAD_IFC };
    struct pib_mad_ifc_in in = { .port_num = PIB_PORT_NUM };
    uint8_t st;

    memcpy(in.mad, mad, PIB_MAD_SIZE);
    memcpy(fz_ram_ptr(fz.mbox, sizeof(in)), &in, sizeof(in));
    cmd.in.mbox = (struct pib_cmd_mbox) {
        .addr = cpu_to_le64(fz.mbox), .len = cpu_to_le32(sizeof(in)),
    };
    cmd.resp_addr = cpu_to_le64(fz.resp);
    cmd.resp_len = cpu_to_le32(PIB_MAD_SIZE);
    st = fz_admin(&cmd, result, NULL);
    if (st == PIB_AQ_OK && out) {
        memcpy(out, fz_ram_ptr(fz.resp, PIB_MAD_SIZE), PIB_MAD_SIZE);
    }
    return st;
}

/* One SMP Set of attr with modifier mod and data, as an SM sends it: did the SMA take it? */
static bool fz_sm_set(uint16_t attr, uint32_t mod, const void *data, size_t len)
{
    struct pib_smp smp = {
        .hdr = {
            .base_version = PIB_MAD_BASE_VERSION,
            .mgmt_class = PIB_MGMT_CLASS_SUBN_LID,
            .class_version = PIB_SMP_CLASS_VERSION,
            .method = PIB_MAD_METHOD_SET,
            .attr_id_be = cpu_to_be16(attr),
            .attr_mod_be = cpu_to_be32(mod),
        },
    };
    uint32_t result = 0;
    struct pib_smp resp;

    memcpy(smp.data, data, len);
    return fz_mad_ifc(&smp, &result, &resp) == PIB_AQ_OK &&
           (result & PIB_MAD_IFC_REPLY) && resp.hdr.status_be == 0;
}

/*
 * PortInfo Set of the LID, SM LID, LMC and a PortState, as an SM sends it.  Returns whether
 * the SMA took it.
 */
static bool fz_sm_port_set(uint16_t lid, uint16_t sm_lid, uint8_t lmc, uint8_t state)
{
    struct pib_port_info pi = {
        .lid_be = cpu_to_be16(lid),
        .sm_lid_be = cpu_to_be16(sm_lid),
        .mkeyprot_lmc = lmc,
        .speed_state = state,
        .mtu_smsl = 5 << 4,
    };

    return fz_sm_set(PIB_SMP_ATTR_PORT_INFO, PIB_PORT_NUM, &pi, sizeof(pi));
}

/*
 * QoS as an SM with it on sets it up: SL s to VL s % 4 (VL0-VL3, the port's VLCap), and
 * VLArbitrationTables that weigh the VLs (low: VL0-VL3 with weights 1, 4, 16, 255; high:
 * VL3, weight 2), so that the transmitter's pick runs by the tables, not round robin.
 */
static bool fz_sm_qos(void)
{
    struct pib_vlarb_entry low[PIB_VLARB_BLOCK_ENTRIES] = {
        { 0, 1 }, { 1, 4 }, { 2, 16 }, { 3, 255 },
    };
    struct pib_vlarb_entry high[PIB_VLARB_BLOCK_ENTRIES] = { { 3, 2 } };
    uint8_t sl2vl[PIB_SL2VL_BYTES];
    unsigned i;

    for (i = 0; i < PIB_SL2VL_BYTES; i++) {
        sl2vl[i] = 0x01 + (i & 1) * 0x22;       /* SLs 2i, 2i + 1: VLs 0, 1 or 2, 3 */
    }
    return fz_sm_set(PIB_SMP_ATTR_SL2VL_TABLE, 0, sl2vl, sizeof(sl2vl)) &&
           fz_sm_set(PIB_SMP_ATTR_VLARB_TABLE, PIB_VLARB_LOW_0 << 16, low, sizeof(low)) &&
           fz_sm_set(PIB_SMP_ATTR_VLARB_TABLE, PIB_VLARB_HIGH_0 << 16, high, sizeof(high));
}

/*
 * What an SM's sweep does for a port it finds in INIT (FZ_CFG3_NO_LID, after the link came
 * up): arm it, then activate it.  Inputs may have changed the SMA's state (an M_Key, a
 * LID): then the port stays where it is, as it would for a real SM without the key.
 */
void fz_sm_sweep(void)
{
    const PibMgmtPort *m = &fz.s->port.mgmt;

    if (m->lid && pib_port_ib_state(fz.s) == PIB_PORT_INIT) {
        fz_sm_port_set(m->lid, m->sm_lid, m->lmc, PIB_PORT_ARMED);
    }
    if (m->lid && pib_port_ib_state(fz.s) == PIB_PORT_ARMED) {
        fz_sm_port_set(m->lid, m->sm_lid, m->lmc, PIB_PORT_ACTIVE);
    }
}

uint8_t fz_modify(FzQp *q, uint8_t state, uint32_t mask,
                  struct pib_qp_attr *a)
{
    struct pib_admin_cmd cmd = { .opcode = PIB_CMD_MODIFY_QP };

    a->attr_mask = cpu_to_le32(mask | PIB_QP_STATE);
    a->qp_state = state;
    memcpy(fz_ram_ptr(fz.mbox, sizeof(*a)), a, sizeof(*a));
    cmd.in.mbox = (struct pib_cmd_mbox) {
        .addr = cpu_to_le64(fz.mbox),
        .len = cpu_to_le32(sizeof(*a)),
        .obj = cpu_to_le32(q->qpn),
    };
    return fz_admin(&cmd, NULL, NULL);
}

/*
 * RESET -> INIT -> RTR -> RTS with the attributes the QP type requires.  An
 * XRC target takes RC's INIT and RTR attributes, and at RTS only its PSN and
 * timeout (it sends no requests).
 */
bool fz_qp_to_rts(FzQp *q)
{
    bool rc = q->type == PIB_QPT_RC || q->type == PIB_QPT_XRC_TGT;
    struct pib_qp_attr a;

    a = (struct pib_qp_attr) { .port_num = PIB_PORT_NUM };
    a.qp_access_flags = cpu_to_le32(PIB_ACCESS_REMOTE_WRITE |
                                    (rc ? PIB_ACCESS_REMOTE_READ |
                                          PIB_ACCESS_REMOTE_ATOMIC : 0));
    a.qkey = cpu_to_le32(q->type == PIB_QPT_GSI ? PIB_GSI_QKEY : FZ_QKEY);
    if (fz_modify(q, PIB_QPS_INIT,
                  q->type == PIB_QPT_GSI ? PIB_QP_PKEY_INDEX | PIB_QP_QKEY :
                  q->type == PIB_QPT_UD ? PIB_QP_PKEY_INDEX | PIB_QP_PORT |
                                          PIB_QP_QKEY :
                  PIB_QP_PKEY_INDEX | PIB_QP_PORT | PIB_QP_ACCESS_FLAGS,
                  &a) != PIB_AQ_OK) {
        return false;
    }
    a = (struct pib_qp_attr) {
        .path_mtu = fz.mtu,
        .dlid = cpu_to_le16(q->dlid),
        .dest_qp_num = cpu_to_le32(q->dest_qpn),
        .rq_psn = cpu_to_le32(q->rq_psn),
        .max_dest_rd_atomic = (fz.cfg.flags2 & FZ_CFG2_NO_RD_ATOM) ? 0 : 4,
        .min_rnr_timer = 1,
        .src_path_bits = (fz.cfg.flags2 & FZ_CFG2_LMC) ? 3 : 0,
        /* With credits, SL s is VL s % 4 (fz_sm_qos): one VL per connected QP. */
        .sl = (fz.cfg.flags3 & FZ_CFG3_CREDITS_MASK) ?
              (q >= fz.qp && q < fz.qp + T__MAX ? q - fz.qp : 3) % 4 : 0,
    };
    if (fz.cfg.flags2 & FZ_CFG2_GRH) {
        a.ah_flags = 1;
        a.hop_limit = 64;
        a.traffic_class = 0x20;
        a.flow_label = cpu_to_le32(0x12345);
        stq_be_p(a.dgid, PIB_DEFAULT_GID_PREFIX);
        stq_be_p(a.dgid + 8, FZ_PEER_GUID + 1);
    }
    if (q == &fz.qp[T_RC_SRQ] && (fz.cfg.flags2 & FZ_CFG2_RTR) &&
        q->type == PIB_QPT_RC) {
        return fz_modify(q, PIB_QPS_RTR,
                         PIB_QP_AV | PIB_QP_PATH_MTU | PIB_QP_DEST_QPN |
                         PIB_QP_RQ_PSN | PIB_QP_MAX_DEST_RD_ATOMIC |
                         PIB_QP_MIN_RNR_TIMER, &a) == PIB_AQ_OK;
    }
    if (fz_modify(q, PIB_QPS_RTR,
                  rc ?
                  PIB_QP_AV | PIB_QP_PATH_MTU | PIB_QP_DEST_QPN |
                  PIB_QP_RQ_PSN | PIB_QP_MAX_DEST_RD_ATOMIC |
                  PIB_QP_MIN_RNR_TIMER :
                  q->type == PIB_QPT_UC ?
                  PIB_QP_AV | PIB_QP_PATH_MTU | PIB_QP_DEST_QPN |
                  PIB_QP_RQ_PSN : 0, &a) != PIB_AQ_OK) {
        return false;
    }
    a = (struct pib_qp_attr) {
        .sq_psn = cpu_to_le32(q->sq_psn),
        .timeout = (fz.cfg.flags2 & FZ_CFG2_NO_TIMEOUT) ? 0 : 14,
        .retry_cnt = 3,
        .rnr_retry = (fz.cfg.flags2 & FZ_CFG2_RNR_FOREVER) ? 7 : 3,
        .max_rd_atomic = 4,
    };
    return fz_modify(q, PIB_QPS_RTS,
                     q->type == PIB_QPT_RC ?
                     PIB_QP_TIMEOUT | PIB_QP_RETRY_CNT | PIB_QP_RNR_RETRY |
                     PIB_QP_SQ_PSN | PIB_QP_MAX_QP_RD_ATOMIC :
                     q->type == PIB_QPT_XRC_TGT ?
                     PIB_QP_SQ_PSN | PIB_QP_TIMEOUT :
                     PIB_QP_SQ_PSN, &a) == PIB_AQ_OK;
}

/*
 * XRC: a domain, an XRC SRQ in it (its CQ the receive CQ) with receives
 * posted, and an XRC target QP in RTS connected to the peer.  Requests with
 * an XRC opcode go to it (fz_pkt_build), naming that SRQ unless the record
 * says otherwise.
 */
static void fz_xrc_setup(void)
{
    struct pib_admin_cmd cmd = { .opcode = PIB_CMD_ALLOC_XRCD };
    uint32_t xrcd = fz_admin_must(&cmd, "ALLOC_XRCD");
    struct pib_qp_create c = {
        .type = PIB_QPT_XRC_TGT,
        .flags = PIB_QPC_F_NO_RQ,
        .srqn = cpu_to_le32(PIB_SRQN_NONE),
        .xrcd = cpu_to_le32(xrcd),
    };
    FzQp *q = &fz.xtgt;

    cmd = (struct pib_admin_cmd) { .opcode = PIB_CMD_CREATE_SRQ };
    cmd.in.create_srq = (struct pib_cmd_create_srq) {
        .pdn = cpu_to_le32(fz.pd),
        .depth = cpu_to_le32(FZ_SRQ_DEPTH),
        .stride_log = 6,
        .flags = PIB_SRQ_F_XRC,
        .uar = cpu_to_le32(fz.uar),
        .npages = cpu_to_le32(1),
        .pbl_addr = cpu_to_le64(fz.xsrq_pbl),
        .xrcd = cpu_to_le32(xrcd),
        .cqn = cpu_to_le32(fz.rcq.cqn),
    };
    fz.xsrqn = fz_admin_must(&cmd, "CREATE_SRQ (XRC)");
    memcpy(fz_ram_ptr(fz.mbox, sizeof(c)), &c, sizeof(c));
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_QP,
        .in.mbox = { .addr = cpu_to_le64(fz.mbox), .len = cpu_to_le32(sizeof(c)) },
    };
    *q = (FzQp) {
        .type = PIB_QPT_XRC_TGT, .dlid = FZ_PEER_LID,
        .dest_qpn = FZ_PEER_QPN, .rq_psn = 0x100, .sq_psn = 0x200,
    };
    q->qpn = fz_admin_must(&cmd, "CREATE_QP (XRC target)");
    if (!fz_qp_to_rts(q)) {
        fz_bug("harness setup: XRC target to RTS failed");
    }
    if (!(fz.cfg.flags2 & FZ_CFG2_NO_RECV)) {
        fz_post_recv(T__MAX, 8, 0);
    }
}

PibQp *fz_pibqp(FzTarget t)
{
    return fz.qp[t].qpn ? pib_qp_lookup(fz.s, fz.qp[t].qpn) : NULL;
}

static void fz_sge(struct pib_sge *sge, uint64_t addr, uint32_t len,
                   uint32_t key)
{
    sge->addr = cpu_to_le64(addr);
    sge->length = cpu_to_le32(len);
    sge->lkey = cpu_to_le32(key);
}

/*
 * Post up to n receive WQEs on a QP's RQ (or, for RC-SRQ, on the SRQ; t ==
 * T__MAX: on the XRC SRQ), at the device's producer index.  kind: 0 two SGEs
 * in the receive MR, 1 an SGE in the read-only MR (no LOCAL_WRITE), 2 more
 * SGEs than a slot holds, 3 none, 4 one small SGE (48 bytes), 5 the MR whose
 * pages are not RAM, 6 an MR of the other PD, 7 a stale lkey.
 */
void fz_post_recv(FzTarget t, unsigned n, uint8_t kind)
{
    bool xrc = t == T__MAX, on_srq = t == T_RC_SRQ || xrc;
    PibQp *qp = xrc ? NULL : fz_pibqp(t);
    uint32_t srqn = xrc ? fz.xsrqn : fz.srqn;
    PibSrq *srq = pib_srq_lookup(fz.s, srqn);
    FzRing *ring = xrc ? &fz.xsrq : on_srq ? &fz.srq : &fz.qp[t].rq;
    uint32_t pi, ci, i;

    if (on_srq ? !srq : !qp || qp->no_rq) {
        return;
    }
    pi = on_srq ? srq->pi : qp->rq.pi;
    ci = on_srq ? srq->ci : qp->rq.ci;
    for (i = 0; i < n && pi - ci < ring->depth; i++, pi++) {
        uint64_t addr = ring->base +
                        ((uint64_t)(pi & (ring->depth - 1)) << ring->stride_log);
        struct pib_recv_wqe *w = fz_ram_ptr(addr, 64);
        struct pib_sge *sge = (struct pib_sge *)(w + 1);
        uint64_t buf = fz.mr[M_RECV].iova + (pi & 1) * 4096;

        memset(w, 0, 1u << ring->stride_log);
        w->wr_id = cpu_to_le64(++fz.wr_id);
        w->num_sge = 1;
        switch (kind & 7) {
        case 0:
            w->num_sge = 2;
            fz_sge(&sge[0], buf, 2048, fz.mr[M_RECV].key);
            fz_sge(&sge[1], buf + 2048, 2048, fz.mr[M_RECV].key);
            break;
        case 1:
            fz_sge(&sge[0], fz.mr[M_RO].iova, 4096, fz.mr[M_RO].key);
            break;
        case 2:
            w->num_sge = 200;
            break;
        case 3:
            w->num_sge = 0;
            break;
        case 4:
            fz_sge(&sge[0], buf, 48, fz.mr[M_RECV].key);
            break;
        case 5:
            fz_sge(&sge[0], fz.mr[M_BAD].iova, 8192, fz.mr[M_BAD].key);
            break;
        case 6:
            fz_sge(&sge[0], fz.mr[M_OTHER].iova, 4096, fz.mr[M_OTHER].key);
            break;
        default:
            fz_sge(&sge[0], buf, 4096, fz.mr[M_RECV].key ^ 0x80);
            break;
        }
    }
    /*
     * A ring with a record: the index goes there, and kind bit 3 leaves the
     * doorbell out; bit 4 makes the record lie (ahead, behind, or wrapped).
     */
    if (ring->dbrec) {
        uint32_t rec = (kind & 0x10) ? pi + (uint32_t)(kind >> 5) * 0x3fffffffu - 2 : pi;

        stl_le_p(fz_ram_ptr(ring->dbrec, 4), rec);
        if (kind & 0x08) {
            return;
        }
    }
    if (on_srq) {
        uar_write(PIB_UAR_SRQ_DB, srqn, pi);
    } else {
        uar_write(PIB_UAR_RQ_DB, qp->qpn, pi);
    }
}

void fz_post_send(const FzSendRec *r)
{
    FzTarget t = r->target % T__MAX;
    FzQp *q = &fz.qp[t];
    PibQp *qp = fz_pibqp(t);
    uint8_t op = r->opcode % PIB_WQE_OPCODE_MAX;
    FzMrId src = (r->flags & 0x80) ? M_RO : (r->flags & 0x20) ? M_BAD :
                 (r->flags & 0x10) ? M_BIG : M_RW;
    uint32_t len = le16_to_cpu(r->len), pi, i, nsge;
    uint64_t addr;
    struct pib_send_wqe *w;
    struct pib_sge *sge;

    if (!qp || qp->sq.pi - qp->sq.ci >= q->sq.depth) {
        return;
    }
    pi = qp->sq.pi;
    addr = q->sq.base + ((uint64_t)(pi & (q->sq.depth - 1)) << q->sq.stride_log);
    w = fz_ram_ptr(addr, 1u << q->sq.stride_log);
    sge = (struct pib_sge *)(w + 1);
    memset(w, 0, 1u << q->sq.stride_log);
    w->opcode = op;
    w->flags = (r->flags & 0x0e) | ((r->flags & 0x40) ? 0 : PIB_WQE_F_SIGNALED);
    if (src == M_BIG) {
        len *= 8;
    }
    w->wr_id = cpu_to_le64(++fz.wr_id);
    w->remote_addr = cpu_to_le64(0x5000);
    w->rkey = cpu_to_le32(0x1234);
    w->compare_add = cpu_to_le64(1);
    w->swap = cpu_to_le64(2);
    w->ud_qpn = cpu_to_le32(FZ_PEER_QPN);
    w->ud_qkey = cpu_to_le32(t == T_GSI ? PIB_GSI_QKEY : FZ_QKEY);
    w->ud_dlid = cpu_to_le16(r->ud_dlid ? le16_to_cpu(r->ud_dlid) :
                             FZ_PEER_LID);
    if (fz.cfg.flags3 & FZ_CFG3_CREDITS_MASK) {
        w->ud_sl = fz.wr_id % 4;        /* VL wr_id % 4 (fz_sm_qos) */
    }
    switch (op) {
    case PIB_WQE_ATOMIC_CS:
    case PIB_WQE_ATOMIC_FA:
        len = 8;
        break;
    case PIB_WQE_SEND_INV:
    case PIB_WQE_LOCAL_INV:
        w->imm_inv = cpu_to_le32(len & 1 ? fz.mw2 : len & 2 ? fz.fr :
                                 fz.mr[M_RW].key);
        break;
    case PIB_WQE_BIND_MW: {
        struct pib_bind_mw_wqe *b = (struct pib_bind_mw_wqe *)w;
        uint32_t mw = len & 1 ? fz.mw1 : fz.mw2;

        b->mw_type = len & 1 ? 1 : 2;
        b->new_rkey = cpu_to_le32((mw & ~0xffu) | ((mw + 1 + (len >> 8)) & 0xff));
        b->addr = cpu_to_le64(fz.mr[M_RW].iova + (len & 0xff0));
        b->length = cpu_to_le64(len & 2 ? 0 : 0x1000);
        b->mw_rkey = cpu_to_le32(mw);
        b->mr_lkey = cpu_to_le32(fz.mr[M_RW].key);
        b->access = cpu_to_le32(PIB_ACCESS_REMOTE_WRITE |
                                PIB_ACCESS_REMOTE_READ |
                                PIB_ACCESS_REMOTE_ATOMIC);
        if (len & 1) {
            fz.mw1 = le32_to_cpu(b->new_rkey);
        } else {
            fz.mw2 = le32_to_cpu(b->new_rkey);
        }
        break;
    }
    case PIB_WQE_REG_MR: {
        /*
         * len picks: [0] M_RW's pages (out of order) or M_BAD's (not RAM),
         * [1] a page list outside RAM, [3:2] 1-3 pages, [4] 5 pages (more
         * than max_num_sg), [5] read-only, [6] remote write without local
         * write, [9:7] the offset into the first page, [15] 8 KiB pages.
         */
        struct pib_reg_mr_wqe *m = (struct pib_reg_mr_wqe *)w;
        uint32_t npages = len & 0x10 ? 5 : 1 + ((len >> 2) & 3) % 3;
        uint64_t off = (len >> 7 & 7) * 0x200;

        fz.fr = (fz.fr & ~0xffu) | ((fz.fr + 1) & 0xff);
        m->page_shift = len & 0x8000 ? 13 : PIB_PAGE_SHIFT;
        m->key = cpu_to_le32(fz.fr);
        m->iova = cpu_to_le64(FZ_FR_IOVA + off);
        m->length = cpu_to_le64((uint64_t)npages * PIB_PAGE_SIZE - off);
        m->pbl_addr = cpu_to_le64(len & 2 ? FZ_OUTSIDE_RAM :
                                  fz.mr[len & 1 ? M_BAD : M_RW].pbl);
        m->npages = cpu_to_le32(npages);
        m->access = cpu_to_le32(len & 0x40 ? PIB_ACCESS_REMOTE_WRITE :
                                len & 0x20 ? PIB_ACCESS_REMOTE_READ :
                                fz.mr[M_RW].access & ~PIB_ACCESS_MW_BIND);
        break;
    }
    default:
        break;
    }
    if (w->flags & PIB_WQE_F_INLINE) {
        /* the slot holds 64 bytes of inline data (max_inline); more is an error */
        w->inline_len = cpu_to_le32(len);
        memset(sge, 0x3c, MIN(len, (1u << q->sq.stride_log) - sizeof(*w)));
    } else if (!pib_wqe_is_local(op)) {
        nsge = r->num_sge ? r->num_sge : 1;
        w->num_sge = nsge;
        for (i = 0; i < MIN(nsge, 4u); i++) {
            fz_sge(&sge[i], fz.mr[src].iova + (i ? 0x800 * i : 0x100),
                   i + 1 < nsge ? 16 : len, fz.mr[src].key);
        }
    }
    uar_write(PIB_UAR_SQ_DB, qp->qpn, pi + 1);
}

/*
 * Setup: the device as a driver leaves it.  Fresh guest RAM, fresh device.
 */

void fz_peer_hello(uint32_t version, uint32_t flags_xor)
{
    uint8_t f[PIB_LINK_HDR_LEN + sizeof(struct pib_link_hello)] = {
        PIB_LINK_MAGIC, PIB_FRAME_HELLO, 0, sizeof(struct pib_link_hello),
    };
    static const uint32_t credits[4] = {
        0, PIB_HELLO_F_CREDITS | PIB_HELLO_F_CREDITS_ON, PIB_HELLO_F_CREDITS,
        PIB_HELLO_F_CREDITS | PIB_HELLO_F_SWITCH,
    };
    uint32_t flags = ((fz.cfg.flags3 & FZ_CFG3_DOORBELL) ? PIB_HELLO_F_DOORBELL : 0) |
                     credits[(fz.cfg.flags3 & FZ_CFG3_CREDITS_MASK) >> 5];
    struct pib_link_hello h = {
        .version_be = cpu_to_be32(version),
        .mtu_be = cpu_to_be32(PIB_LINK_MAX_PAYLOAD),
        .node_guid_be = cpu_to_be64(FZ_PEER_GUID),
        .port_guid_be = cpu_to_be64(FZ_PEER_GUID + 1),
        .flags_be = cpu_to_be32(flags ^ flags_xor),
    };

    memcpy(f + PIB_LINK_HDR_LEN, &h, sizeof(h));
    fz_link_feed(f, sizeof(f));
}

void fz_peer_flow(const struct pib_link_fc *fc, unsigned n, unsigned len)
{
    uint8_t f[PIB_LINK_HDR_LEN + 0xffff];
    unsigned have = MIN(n * sizeof(*fc), len);

    len = MIN(len, 0xffffu);
    f[0] = PIB_LINK_MAGIC;
    f[1] = PIB_FRAME_FLOW;
    stw_be_p(f + 2, len);
    memcpy(f + PIB_LINK_HDR_LEN, fc, have);
    memset(f + PIB_LINK_HDR_LEN + have, 0xa5, len - have);
    fz_link_feed(f, PIB_LINK_HDR_LEN + len);
}

void fz_peer_grant(void)
{
    struct pib_link_fc fc[PIB_LINK_DATA_VLS];
    const PibLink *l = &fz.s->link;
    unsigned i;

    for (i = 0; i < PIB_LINK_DATA_VLS; i++) {
        stw_be_p(&fc[i].op_fctbs_be, PIB_LINK_FC_OP_NORMAL << 12 | l->vl[i].abr);
        stw_be_p(&fc[i].vl_fccl_be, i << 12 |
                 ((l->vl[i].fctbs + PIB_LINK_VL_BLOCKS) & (PIB_LINK_FC_MOD - 1)));
    }
    fz_peer_flow(fc, PIB_LINK_DATA_VLS, sizeof(fc));
}

void fz_credit_topup(void)
{
    const PibLink *l = &fz.s->link;
    uint16_t left;
    unsigned i;

    if ((fz.cfg.flags3 & FZ_CFG3_WITHHOLD) ||
        !l->fc || !fz_link.connected || l->rx_state != PIB_RX_HDR || l->rx_got) {
        return;     /* a frame of the input's is half-way in: not in its middle */
    }
    for (i = 0; i < PIB_LINK_DATA_VLS; i++) {
        left = (l->vl[i].fccl - l->vl[i].fctbs) & (PIB_LINK_FC_MOD - 1);
        if (left < PIB_LINK_VL_BLOCKS / 2 || left > PIB_LINK_VL_BLOCKS) {
            fz_peer_grant();
            return;
        }
    }
}

/* The peer (re)connects, as a socket chardev with reconnect=1 would. */
void fz_link_up(void)
{
    if (!fz_link.connected) {
        fz_link_open();
        fz_peer_hello(PIB_LINK_PROTO_VERSION, 0);
        fz_run_bhs();
        fz_credit_topup();
    }
}

static uint32_t fz_cq_depth(void)
{
    return (fz.cfg.flags3 & FZ_CFG3_TINY_CQ) ? FZ_TINY_CQ : FZ_CQ_DEPTH;
}

/* Ring memory, MR pages: allocated once per input, before the device. */
static void fz_layout(void)
{
    static const struct { uint64_t iova; uint32_t len; uint32_t pages; } geo[M__MAX] = {
        [M_RW]    = { 0x7f1200000200ull, 3 * 4096 - 0x200 - 0x80, 3 },
        [M_RO]    = { 0x7f1300000000ull, 4096, 1 },
        [M_RECV]  = { 0x7f1400000000ull, 8192, 2 },
        [M_OTHER] = { 0x7f1500000000ull, 4096, 1 },
        [M_BIG]   = { 0x7f1600000000ull, FZ_BIG_PAGES * 4096, FZ_BIG_PAGES },
        [M_BAD]   = { 0x7f1700000000ull, 2 * 4096, 2 },
    };
    uint64_t *pbl;
    unsigned t, i;

    fz.aq_sq = fz_ram_alloc(1, FZ_PG_DRIVER);
    fz.aq_cq = fz_ram_alloc(1, FZ_PG_DEVICE);
    fz.aeq = fz_ram_alloc(1, FZ_PG_DEVICE);
    fz.ceq = fz_ram_alloc(1, FZ_PG_DEVICE);
    fz.resp = fz_ram_alloc(1, FZ_PG_DEVICE);
    fz.mbox = fz_ram_alloc(1, FZ_PG_DRIVER);

    /* M_RW: three pages apart, each between canary pages, listed out of order */
    fz_ram_alloc(1, FZ_PG_UNUSED);
    for (i = 0; i < 3; i++) {
        fz.mr_rw_pages[i] = fz_ram_alloc(1, FZ_PG_DEVICE);
        fz_ram_alloc(1, FZ_PG_UNUSED);
    }
    fz.mr[M_RW].pbl = fz_ram_alloc(1, FZ_PG_DRIVER);
    pbl = fz_ram_ptr(fz.mr[M_RW].pbl, 3 * 8);
    pbl[0] = cpu_to_le64(fz.mr_rw_pages[2]);
    pbl[1] = cpu_to_le64(fz.mr_rw_pages[0]);
    pbl[2] = cpu_to_le64(fz.mr_rw_pages[1]);
    fz.mr[M_RO].pbl = fz_pbl(fz_ram_alloc(1, FZ_PG_DRIVER), 1);
    fz.mr[M_RECV].pbl = fz_pbl(fz_ram_alloc(2, FZ_PG_DEVICE), 2);
    fz_ram_alloc(1, FZ_PG_UNUSED);
    fz.mr[M_OTHER].pbl = fz_pbl(fz_ram_alloc(1, FZ_PG_DRIVER), 1);
    fz_ram_alloc(1, FZ_PG_UNUSED);
    fz.mr[M_BIG].pbl = fz_pbl(fz_ram_alloc(FZ_BIG_PAGES, FZ_PG_DEVICE),
                              FZ_BIG_PAGES);
    fz_ram_alloc(1, FZ_PG_UNUSED);
    fz.mr[M_BAD].pbl = fz_pbl(FZ_OUTSIDE_RAM, 2);
    for (i = 0; i < M__MAX; i++) {
        fz.mr[i].iova = geo[i].iova;
        fz.mr[i].len = geo[i].len;
        fz.mr[i].npages = geo[i].pages;
    }
    fz.mr[M_RW].access = PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_REMOTE_WRITE |
                         PIB_ACCESS_REMOTE_READ | PIB_ACCESS_REMOTE_ATOMIC |
                         PIB_ACCESS_MW_BIND;
    fz.mr[M_RO].access = PIB_ACCESS_REMOTE_READ;
    /*
     * PIB_FUZZ_SELFTEST=1: the read-only MR gets LOCAL_WRITE, so the device
     * may legitimately write it while its pages stay driver pages: the oracle
     * must catch that write (run.sh checks that it does).
     */
    if (getenv("PIB_FUZZ_SELFTEST")) {
        fz.mr[M_RO].access |= PIB_ACCESS_LOCAL_WRITE;
    }
    fz.mr[M_RECV].access = PIB_ACCESS_LOCAL_WRITE;
    fz.mr[M_OTHER].access = fz.mr[M_RW].access;
    fz.mr[M_PHYS].access = fz.mr[M_RW].access;
    fz.mr[M_PHYS].flags = PIB_MR_F_PHYS;
    fz.mr[M_PHYS].len = UINT64_MAX;
    fz.mr[M_BIG].access = fz.mr[M_RW].access;
    fz.mr[M_BAD].access = fz.mr[M_RW].access;

    /* CQs: depth * 32 bytes of ring, then the consumer index record page */
    for (i = 0; i < 2; i++) {
        FzCq *cq = i ? &fz.rcq : &fz.scq;
        uint32_t ring_pages = DIV_ROUND_UP(fz_cq_depth() * 32, PIB_PAGE_SIZE);
        uint64_t *pbl;

        cq->ring = fz_ram_alloc(ring_pages, FZ_PG_DEVICE);
        cq->record = fz_ram_alloc(1, FZ_PG_DRIVER);
        cq->pbl = fz_pbl(cq->ring, ring_pages + 1);
        if (i && (fz.cfg.flags3 & FZ_CFG3_CQ_NOT_RAM)) {
            pbl = fz_ram_ptr(cq->pbl, 8);
            pbl[0] = cpu_to_le64(FZ_OUTSIDE_RAM);
        }
    }
    /*
     * The SRQ, RC's and UC's RQs have doorbell records (pib_wqe.h); UD's not.
     * The record's page follows the ring's: the device writes its flags there.
     */
    fz.srq = (FzRing) { fz_ram_alloc(1, FZ_PG_DRIVER), FZ_SRQ_DEPTH, 6 };
    fz.srq.dbrec = fz_ram_alloc(1, FZ_PG_DEVICE);
    fz.srq_pbl = fz_pbl(fz.srq.base, 2);
    fz.xsrq = (FzRing) { fz_ram_alloc(1, FZ_PG_DRIVER), FZ_SRQ_DEPTH, 6 };
    fz.xsrq_pbl = fz_pbl(fz.xsrq.base, 1);
    for (t = 0; t < T__MAX; t++) {
        FzQp *q = &fz.qp[t];

        q->sq = (FzRing) { fz_ram_alloc(1, FZ_PG_DRIVER), FZ_SQ_DEPTH,
                           FZ_SQ_STRIDE };
        q->sq_pbl = fz_pbl(q->sq.base, 1);
        if (t != T_RC_SRQ) {
            bool rec = t == T_RC || t == T_UC;

            q->rq = (FzRing) { fz_ram_alloc(1, FZ_PG_DRIVER), FZ_RQ_DEPTH,
                               FZ_RQ_STRIDE };
            q->rq.dbrec = rec ? fz_ram_alloc(1, FZ_PG_DEVICE) : 0;
            q->rq_pbl = fz_pbl(q->rq.base, 1 + rec);
        }
    }
}

bool fz_create_qp(FzTarget t)
{
    static const uint8_t types[T__MAX] = {
        [T_RC] = PIB_QPT_RC, [T_RC_SRQ] = PIB_QPT_RC, [T_UC] = PIB_QPT_UC,
        [T_UD] = PIB_QPT_UD, [T_GSI] = PIB_QPT_GSI,
    };
    FzQp *q = &fz.qp[t];
    bool srq = t == T_RC_SRQ;
    struct pib_qp_create c = {
        .pdn = cpu_to_le32(fz.pd),
        .type = types[t],
        .flags = (srq ? PIB_QPC_F_NO_RQ : 0) |
                 (q->rq.dbrec ? PIB_QPC_F_RQ_DBREC : 0) |
                 ((fz.cfg.flags2 & FZ_CFG2_SIG_ALL) ? PIB_QPC_F_SQ_SIG_ALL : 0),
        .sq_stride_log = FZ_SQ_STRIDE,
        .rq_stride_log = srq ? 0 : FZ_RQ_STRIDE,
        .send_cqn = cpu_to_le32(fz.scq.cqn),
        .recv_cqn = cpu_to_le32(fz.rcq.cqn),
        .srqn = cpu_to_le32(srq ? fz.srqn : 0xffffffffu),
        .sq_depth = cpu_to_le32(FZ_SQ_DEPTH),
        .rq_depth = cpu_to_le32(srq ? 0 : FZ_RQ_DEPTH),
        .max_inline = cpu_to_le32(64),
        .uar = cpu_to_le32(fz.uar),
        .sq_npages = cpu_to_le32(1),
        .rq_npages = cpu_to_le32(srq ? 0 : q->rq.dbrec ? 2 : 1),
        .sq_pbl_addr = cpu_to_le64(q->sq_pbl),
        .rq_pbl_addr = cpu_to_le64(q->rq_pbl),
    };
    struct pib_admin_cmd cmd = { .opcode = PIB_CMD_CREATE_QP };

    memcpy(fz_ram_ptr(fz.mbox, sizeof(c)), &c, sizeof(c));
    cmd.in.mbox = (struct pib_cmd_mbox) {
        .addr = cpu_to_le64(fz.mbox), .len = cpu_to_le32(sizeof(c)),
    };
    q->type = types[t];
    q->qpn = 0;
    return fz_admin(&cmd, &q->qpn, NULL) == PIB_AQ_OK;
}

/* Connection attributes: RC and RC-SRQ talk to the peer, or to each other. */
static void fz_connect_attrs(void)
{
    unsigned t;

    for (t = 0; t < T__MAX; t++) {
        FzQp *q = &fz.qp[t];

        q->dlid = FZ_PEER_LID;
        q->dest_qpn = FZ_PEER_QPN + t;
    }
    /* PSNs near the 24-bit wrap on one QP, so that arithmetic gets tested */
    fz.qp[T_RC].rq_psn = 0x100;
    fz.qp[T_RC].sq_psn = 0x200;
    fz.qp[T_RC_SRQ].rq_psn = 0xfffff0;
    fz.qp[T_RC_SRQ].sq_psn = 0xfffffe;
    fz.qp[T_UC].rq_psn = 0x300;
    fz.qp[T_UC].sq_psn = 0x400;
    if (fz.loopback) {
        fz.qp[T_RC].dlid = fz.qp[T_RC_SRQ].dlid = FZ_LID;
        fz.qp[T_RC].dest_qpn = fz.qp[T_RC_SRQ].qpn;
        fz.qp[T_RC_SRQ].dest_qpn = fz.qp[T_RC].qpn;
        fz.qp[T_RC].rq_psn = fz.qp[T_RC_SRQ].sq_psn;
        fz.qp[T_RC_SRQ].rq_psn = fz.qp[T_RC].sq_psn;
    }
}

/* Bind a window with a BIND_MW WQE on the RC QP (no packet). */
void fz_bind(bool type1)
{
    FzSendRec r = {
        .target = T_RC, .opcode = PIB_WQE_BIND_MW, .len = type1 ? 1 : 0,
    };

    fz_post_send(&r);
}

/* Everything after BAR0 programming: the objects and their states. */
void fz_objects(void)
{
    struct pib_admin_cmd cmd;
    unsigned t, i;

    cmd = (struct pib_admin_cmd) { .opcode = PIB_CMD_ALLOC_UAR };
    fz.uar = fz_admin_must(&cmd, "ALLOC_UAR");
    cmd = (struct pib_admin_cmd) { .opcode = PIB_CMD_CREATE_PD };
    fz.pd = fz_admin_must(&cmd, "CREATE_PD");
    fz.pd2 = fz_admin_must(&cmd, "CREATE_PD");
    for (i = 0; i < M__MAX; i++) {
        fz.mr[i].pdn = i == M_OTHER || i == M_PHYS ? fz.pd2 : fz.pd;
        if (fz_reg_mr(i) != PIB_AQ_OK) {
            fz_bug("harness setup: REG_MR %u failed", i);
        }
    }
    cmd = (struct pib_admin_cmd) { .opcode = PIB_CMD_ALLOC_MW };
    cmd.in.alloc_mw = (struct pib_cmd_alloc_mw) {
        .pdn = cpu_to_le32(fz.pd), .type = cpu_to_le32(2),
    };
    fz.mw2 = fz_admin_must(&cmd, "ALLOC_MW");
    cmd.in.alloc_mw.type = cpu_to_le32(1);
    fz.mw1 = fz_admin_must(&cmd, "ALLOC_MW");
    cmd = (struct pib_admin_cmd) { .opcode = PIB_CMD_ALLOC_MR };
    cmd.in.alloc_mr = (struct pib_cmd_alloc_mr) {
        .pdn = cpu_to_le32(fz.pd), .max_num_sg = cpu_to_le32(4),
    };
    fz.fr = fz_admin_must(&cmd, "ALLOC_MR");
    for (i = 0; i < 2; i++) {
        FzCq *cq = i ? &fz.rcq : &fz.scq;

        cmd = (struct pib_admin_cmd) { .opcode = PIB_CMD_CREATE_CQ };
        cmd.in.create_cq = (struct pib_cmd_create_cq) {
            .depth = cpu_to_le32(fz_cq_depth()),
            .npages = cpu_to_le32(DIV_ROUND_UP(fz_cq_depth() * 32,
                                               PIB_PAGE_SIZE) + 1),
            .pbl_addr = cpu_to_le64(cq->pbl),
            .uar = cpu_to_le32(fz.uar),
        };
        cq->cqn = fz_admin_must(&cmd, "CREATE_CQ");
    }
    cmd = (struct pib_admin_cmd) { .opcode = PIB_CMD_CREATE_SRQ };
    cmd.in.create_srq = (struct pib_cmd_create_srq) {
        .pdn = cpu_to_le32(fz.pd),
        .depth = cpu_to_le32(FZ_SRQ_DEPTH),
        .stride_log = 6,
        .flags = PIB_SRQ_F_DBREC,
        .limit = cpu_to_le32(4),
        .uar = cpu_to_le32(fz.uar),
        .npages = cpu_to_le32(2),
        .pbl_addr = cpu_to_le64(fz.srq_pbl),
    };
    fz.srqn = fz_admin_must(&cmd, "CREATE_SRQ");
    if ((fz.cfg.flags3 & FZ_CFG3_CREDITS_MASK) && !fz_sm_qos()) {
        fz_bug("harness setup: SLtoVLMappingTable or VLArbitrationTable Set refused");
    }
    for (t = 0; t < T__MAX; t++) {
        if (!fz_create_qp(t)) {
            fz_bug("harness setup: CREATE_QP %s failed", fz_target_names[t]);
        }
    }
    fz_connect_attrs();
    for (t = 0; t < T__MAX; t++) {
        if (!fz_qp_to_rts(&fz.qp[t])) {
            fz_bug("harness setup: QP %s to RTS failed", fz_target_names[t]);
        }
        if (!(fz.cfg.flags2 & FZ_CFG2_NO_RECV)) {
            fz_post_recv(t, 8, 0);
        }
    }
    fz_xrc_setup();
    if (fz.cfg.flags3 & FZ_CFG3_NO_LID) {
        /* An SM gives the port its LID; fz_sm_sweep() arms it once the link is up. */
        if (!fz_sm_port_set(FZ_LID, FZ_PEER_LID, (fz.cfg.flags2 & FZ_CFG2_LMC) ? 2 : 0,
                            PIB_PORTINFO_STATE_NOP)) {
            fz_bug("harness setup: PortInfo Set of the LID refused");
        }
        fz_sm_sweep();
    } else if (fz.cfg.flags2 & FZ_CFG2_LMC) {
        cmd = (struct pib_admin_cmd) { .opcode = PIB_CMD_SET_PORT };
        cmd.in.set_port.port_num = PIB_PORT_NUM;
        cmd.in.set_port.mask = cpu_to_le32(PIB_SET_PORT_LID);
        cmd.in.set_port.lid = cpu_to_le16(FZ_LID);
        cmd.in.set_port.lmc = (fz.cfg.flags2 & FZ_CFG2_LMC) ? 2 : 0;
        fz_admin_must(&cmd, "SET_PORT");
    }
    fz_bind(false);
    fz_bind(true);
    fz_run_bhs();
}

/* BAR0 as the driver programs it, then ENABLE. */
void fz_enable(void)
{
    reg_write(PIB_REG_AQ_DEPTH, FZ_AQ_DEPTH);
    reg_write(PIB_REG_AQ_SQ_LO, fz.aq_sq);
    reg_write(PIB_REG_AQ_SQ_HI, 0);
    reg_write(PIB_REG_AQ_CQ_LO, fz.aq_cq);
    reg_write(PIB_REG_AQ_CQ_HI, 0);
    reg_write(PIB_REG_AEQ_DEPTH, FZ_EQ_DEPTH);
    reg_write(PIB_REG_AEQ_LO, fz.aeq);
    reg_write(PIB_REG_AEQ_HI, 0);
    reg_write(PIB_REG_CEQ_DEPTH, FZ_EQ_DEPTH);
    reg_write(PIB_REG_CEQ_LO, fz.ceq);
    reg_write(PIB_REG_CEQ_HI, 0);
    reg_write(PIB_REG_CONTROL, PIB_CTRL_ENABLE);
    if (!fz_ready()) {
        fz_bug("harness setup: the device did not become READY");
    }
    /* Admin/event rings were used before (a reset): start them clean. */
    memset(fz_ram_ptr(fz.aq_cq, 4096), 0, 4096);
    memset(fz_ram_ptr(fz.aeq, 4096), 0, 4096);
    memset(fz_ram_ptr(fz.ceq, 4096), 0, 4096);
}

/* Sends on every QP, so that the completer has responses to wait for. */
static void fz_post_initial_sends(void)
{
    static const FzSendRec sends[] = {
        { T_RC, PIB_WQE_SEND, 0, 0, 3000, 0 },
        { T_RC, PIB_WQE_RDMA_WRITE, 0, 0, 700, 0 },
        { T_RC, PIB_WQE_RDMA_READ, 0, 0, 2500, 0 },
        { T_RC, PIB_WQE_ATOMIC_FA, 0, 0, 8, 0 },
        { T_RC, PIB_WQE_ATOMIC_CS, 0, 0, 8, 0 },
        { T_RC, PIB_WQE_SEND_IMM, PIB_WQE_F_INLINE, 0, 40, 0 },
        { T_RC_SRQ, PIB_WQE_RDMA_READ, 0, 0, 300, 0 },
        { T_UC, PIB_WQE_SEND, 0, 0, 1000, 0 },
        { T_UD, PIB_WQE_SEND, 0, 0, 200, 0 },
        { T_GSI, PIB_WQE_SEND, 0, 0, 100, 0 },
    };
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(sends); i++) {
        fz_post_send(&sends[i]);
    }
    fz_run_bhs();
}

void fz_setup(FzConfig cfg)
{
    static const uint8_t mtus[8] = { 1, 2, 3, 4, 5, 1, 3, 5 };
    PCIDevice *pci;
    Error *err = NULL;

    memset(&fz, 0, sizeof(fz));
    fz.cfg = cfg;
    fz.mtu = mtus[cfg.flags & 7];
    fz.loopback = cfg.flags & FZ_CFG_LOOPBACK;
    fz_ram_reset();
    fz_loop_reset();
    memset(&fz_link, 0, sizeof(fz_link));
    fz_link.tx_mode = (cfg.flags >> 4) & 3;
    fz_link.direct = !(cfg.flags3 & FZ_CFG3_CHARDEV);
    /* A socket read takes what is there; the chardev at most 4 KiB. */
    fz_link.rx_chunk = (cfg.flags & FZ_CFG_SMALL_READS) ? 1 + cfg.rx_chunk :
                       fz_link.direct ? UINT32_MAX : 4096;

    if (!fz_class) {
        fz_modules_init();
        if (!fz_type_info) {
            fz_bug("harness: the device registered no QOM type");
        }
        fz_class = g_malloc0(MAX(fz_type_info->class_size,
                                 sizeof(PCIDeviceClass)));
        fz_type_info->class_init(OBJECT_CLASS(fz_class),
                                 (void *)fz_type_info->class_data);
        fz_trace_enable(getenv("PIB_FUZZ_TRACE") != NULL);
    }
    fz.s = g_malloc0(fz_type_info->instance_size);
    pci = fz.pci = PCI_DEVICE(fz.s);
    pci->config = g_malloc0(PCIE_CONFIG_SPACE_SIZE);
    if (fz_type_info->instance_init) {
        fz_type_info->instance_init(OBJECT(fz.s));
    }
    fz.s->node_guid = FZ_NODE_GUID;
    fz.s->prop_lid = (cfg.flags3 & FZ_CFG3_NO_LID) ? 0 : FZ_LID;
    fz.s->link.direct = true;           /* the properties' defaults */
    fz.s->recv_dbrec = true;
    fz.s->dm_size = 16384;              /* device memory, smaller than the default */
    fz.s->link.sndbuf = PIB_LINK_SNDBUF;    /* (a unix socket's only: not here) */
    fz.s->link.credits = (const OnOffAuto[4]) {    /* FZ_CFG3_CREDITS_MASK */
        ON_OFF_AUTO_AUTO, ON_OFF_AUTO_AUTO, ON_OFF_AUTO_ON, ON_OFF_AUTO_OFF,
    }[(cfg.flags3 & FZ_CFG3_CREDITS_MASK) >> 5];
    fz_class->realize(pci, &err);
    if (fz_error_clear(&err)) {
        fz_bug("harness: the device refused to realize");
    }

    fz_layout();
    fz_link_up();
    fz_enable();
    fz_objects();
    if (cfg.flags & FZ_CFG_POST_SENDS) {
        fz_post_initial_sends();
    }
}

/* Everything still pending finishes: bottom halves, the socket, timers. */
void fz_settle(void)
{
    int64_t next;
    unsigned i;

    for (i = 0; i < 64; i++) {
        fz_run_bhs();
        fz_link_writable();
        fz_run_bhs();
        next = fz_next_timer();
        if (next < 0) {
            break;
        }
        fz_clock_advance(MAX(next - fz_clock_ns, 0));
    }
    fz_run_bhs();
}

/* PIB_FUZZ_VERBOSE=1: what the input made the device do. */
static void fz_report(void)
{
    unsigned i, t;

    fprintf(stderr, "pib-fuzz: tx frames %" PRIu64 ", DMA writes %" PRIu64
            ", MSI-X %" PRIu64 ", CQEs send %u recv %u, err_count %u\n",
            fz_link.tx_frames, fz_dma_writes, fz_msix_notifies,
            pib_cq_lookup(fz.s, fz.scq.cqn) ? pib_cq_lookup(fz.s, fz.scq.cqn)->pi : 0,
            pib_cq_lookup(fz.s, fz.rcq.cqn) ? pib_cq_lookup(fz.s, fz.rcq.cqn)->pi : 0,
            fz.s->regs.err_count);
    for (i = 0; i < PIB_CNT_MAX; i++) {
        if (fz.s->counters[i]) {
            fprintf(stderr, "  %s %" PRIu64 "\n", pib_counter_name(i),
                    fz.s->counters[i]);
        }
    }
    for (t = 0; t < T__MAX; t++) {
        PibQp *qp = fz_pibqp(t);

        if (qp) {
            fprintf(stderr, "  QP %s %u: %s\n", fz_target_names[t], qp->qpn,
                    pib_qp_state_name(qp->state));
        }
    }
}

void fz_teardown(void)
{
    if (getenv("PIB_FUZZ_VERBOSE")) {
        fz_report();
    }
    fz_class->exit(fz.pci);
    fz_loop_check_empty();
    g_free(fz.pci->config);
    g_free(fz.s);
    fz.s = NULL;
    fz_ram_check_canary();
}
