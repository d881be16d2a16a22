/*
 * QTest testcase for the pib InfiniBand HCA (hw/pib)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Drives the device with no guest at all, through the same interface the Linux
 * driver uses (include/pib_hw.h, include/pib_link.h): PCI identity and reset
 * values, admin commands and their completions, async events, doorbell rules,
 * bad input, and the link, both between two devices and against this test
 * acting as a (sometimes misbehaving) peer; the data path; error injection
 * through QOM properties over QMP; and, in perf mode only, a benchmark.
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-test
 *      (add -m perf -p /x86_64/pib/bench/rc for the benchmark)
 */

#include "qemu/osdep.h"
#include <sys/socket.h>
#include <sys/un.h>
#include <poll.h>
#include <glib/gstdio.h>
#include "qemu/bswap.h"
#include "libqtest.h"
#include "libqos/libqos-pc.h"
#include "libqos/pci.h"
#include "hw/pci/pci_regs.h"
#include "pib-qtest-compat.h"

#include "hw/pib/include/pib_hw.h"
#include "hw/pib/include/pib_wqe.h"
#include "hw/pib/include/pib_link.h"

#define PIB_DEVFN_A         QPCI_DEVFN(4, 0)
#define PIB_DEVFN_B         QPCI_DEVFN(5, 0)
#define TEST_NODE_GUID      0x0002c903000abcd0ull
#define TIMEOUT_US          (10 * G_USEC_PER_SEC)
#define ADDR_OUTSIDE_RAM    (1ull << 44)    /* aligned, nothing mapped there */

/* One pib-hca as a driver sees it: BARs, rings in guest memory, indices. */
typedef struct PibDev {
    QOSState *qs;
    QPCIDevice *dev;
    QPCIBar bar0, bar2;
    uint64_t sq, cq, aeq, resp;
    uint32_t depth, aeq_depth;
    uint32_t pi;            /* admin commands issued   */
    uint32_t aeq_ci;        /* async events consumed   */
} PibDev;

/*
 * Helpers
 */

/*
 * The QEMU build has no firmware of its own (Debian's dfsg source drops the
 * blobs): use the host's seabios and qemu-system-data packages, as the rest of
 * the project does.
 */
#define PIB_FIRMWARE_ARGS   "-L /usr/share/seabios -L /usr/share/qemu"

static QOSState *pib_boot(const char *extra)
{
    return qtest_pc_boot("-M q35 -nodefaults " PIB_FIRMWARE_ARGS " %s", extra);
}

static void pib_open(PibDev *d, QOSState *qs, int devfn)
{
    uint64_t size;

    memset(d, 0, sizeof(*d));
    d->qs = qs;
    d->dev = qpci_device_find(qs->pcibus, devfn);
    g_assert(d->dev != NULL);
    d->bar0 = qpci_iomap(d->dev, PIB_BAR_REGS, &size);
    g_assert_cmpuint(size, ==, PIB_REGS_SIZE);
    d->bar2 = qpci_iomap(d->dev, PIB_BAR_UAR, &size);
    g_assert_cmpuint(size, ==, PIB_UAR_BAR_SIZE);
    qpci_device_enable(d->dev);
    qpci_msix_enable(d->dev);
}

static void pib_close(PibDev *d)
{
    qpci_msix_disable(d->dev);
    g_free(d->dev);
    d->dev = NULL;
}

static uint32_t rd(PibDev *d, uint32_t reg)
{
    return qpci_io_readl(d->dev, d->bar0, reg);
}

static void wr(PibDev *d, uint32_t reg, uint32_t val)
{
    qpci_io_writel(d->dev, d->bar0, reg, val);
}

static QTestState *qts(PibDev *d)
{
    return d->qs->qts;
}

static uint8_t phase_of(uint32_t idx, uint32_t depth)
{
    return ((idx / depth) & 1) ? 0 : 1;
}

/* Allocate and program the rings; the caller writes CONTROL.ENABLE. */
static void pib_program_queues(PibDev *d, uint32_t depth, uint32_t aeq_depth)
{
    QGuestAllocator *a = &d->qs->alloc;

    d->depth = depth;
    d->aeq_depth = aeq_depth;
    d->pi = 0;
    d->aeq_ci = 0;
    d->sq = guest_alloc(a, depth * sizeof(struct pib_admin_cmd));
    d->cq = guest_alloc(a, depth * sizeof(struct pib_admin_cqe));
    d->aeq = guest_alloc(a, aeq_depth * sizeof(struct pib_aeqe));
    d->resp = guest_alloc(a, 4096);
    g_assert_cmphex(d->sq & 0xfff, ==, 0);
    g_assert_cmphex(d->cq & 0xfff, ==, 0);
    g_assert_cmphex(d->aeq & 0xfff, ==, 0);
    qtest_memset(qts(d), d->cq, 0, depth * sizeof(struct pib_admin_cqe));
    qtest_memset(qts(d), d->aeq, 0, aeq_depth * sizeof(struct pib_aeqe));

    wr(d, PIB_REG_AQ_DEPTH, depth);
    wr(d, PIB_REG_AQ_SQ_LO, (uint32_t)d->sq);
    wr(d, PIB_REG_AQ_SQ_HI, d->sq >> 32);
    wr(d, PIB_REG_AQ_CQ_LO, (uint32_t)d->cq);
    wr(d, PIB_REG_AQ_CQ_HI, d->cq >> 32);
    wr(d, PIB_REG_AEQ_DEPTH, aeq_depth);
    wr(d, PIB_REG_AEQ_LO, (uint32_t)d->aeq);
    wr(d, PIB_REG_AEQ_HI, d->aeq >> 32);
}

static void pib_enable(PibDev *d, uint32_t depth, uint32_t aeq_depth)
{
    pib_program_queues(d, depth, aeq_depth);
    wr(d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
    g_assert_cmphex(rd(d, PIB_REG_STATUS), ==, PIB_STATUS_READY);
}

/* Put a command in the next SQ slot (without ringing). */
static void pib_post(PibDev *d, struct pib_admin_cmd *cmd)
{
    uint32_t slot = d->pi & (d->depth - 1);

    cmd->cmd_id = cpu_to_le16(0x100 + (d->pi & 0xff));
    qtest_memwrite(qts(d), d->sq + slot * sizeof(*cmd), cmd, sizeof(*cmd));
    d->pi++;
}

/* Wait for the completion of command idx, by its phase bit. */
static void pib_wait_cqe(PibDev *d, uint32_t idx, struct pib_admin_cqe *cqe)
{
    uint64_t addr = d->cq + (idx & (d->depth - 1)) * sizeof(*cqe);
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;

    for (;;) {
        qtest_memread(qts(d), addr, cqe, sizeof(*cqe));
        if ((cqe->flags & PIB_ACQE_PHASE) == phase_of(idx, d->depth)) {
            break;
        }
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(100);
    }
    g_assert_cmphex(le16_to_cpu(cqe->cmd_id), ==, 0x100 + (idx & 0xff));
}

/* One command, one completion: returns the status; the CQE in *cqe if asked. */
static uint8_t pib_cmd(PibDev *d, struct pib_admin_cmd *cmd,
                       struct pib_admin_cqe *cqe_out)
{
    struct pib_admin_cqe cqe;
    uint32_t idx = d->pi;

    pib_post(d, cmd);
    wr(d, PIB_REG_AQ_DB, d->pi);
    pib_wait_cqe(d, idx, &cqe);
    if (cqe_out) {
        *cqe_out = cqe;
    }
    return cqe.status;
}

static uint32_t pib_nop(PibDev *d, uint32_t value)
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_NOP,
        .in.nop.value = cpu_to_le32(value),
    };
    struct pib_admin_cqe cqe;

    g_assert_cmpuint(pib_cmd(d, &cmd, &cqe), ==, PIB_AQ_OK);
    return le32_to_cpu(cqe.result0);
}

static uint8_t pib_query_port(PibDev *d, uint8_t port_num,
                              struct pib_port_attr *attr)
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_QUERY_PORT,
        .resp_addr = cpu_to_le64(d->resp),
        .resp_len = cpu_to_le32(sizeof(*attr)),
        .in.port.port_num = port_num,
    };
    uint8_t status = pib_cmd(d, &cmd, NULL);

    qtest_memread(qts(d), d->resp, attr, sizeof(*attr));
    return status;
}

static uint8_t pib_set_lid(PibDev *d, uint16_t lid)
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_SET_PORT,
        .in.set_port = {
            .port_num = 1,
            .mask = cpu_to_le32(PIB_SET_PORT_LID),
            .lid = cpu_to_le16(lid),
        },
    };

    return pib_cmd(d, &cmd, NULL);
}

/*
 * Take the next async event if one turns up within timeout_us, and give the
 * slot back to the device (AEQ_DB).
 */
static bool pib_aeq_next(PibDev *d, struct pib_aeqe *e, gint64 timeout_us)
{
    uint64_t addr = d->aeq + (d->aeq_ci & (d->aeq_depth - 1)) * sizeof(*e);
    gint64 end = g_get_monotonic_time() + timeout_us;

    for (;;) {
        qtest_memread(qts(d), addr, e, sizeof(*e));
        if ((e->flags & PIB_AEQE_PHASE) == phase_of(d->aeq_ci, d->aeq_depth)) {
            break;
        }
        if (g_get_monotonic_time() >= end) {
            return false;
        }
        g_usleep(100);
    }
    d->aeq_ci++;
    wr(d, PIB_REG_AEQ_DB, d->aeq_ci);
    return true;
}

/* Consume events until one of `type` turns up. */
static bool pib_aeq_find(PibDev *d, uint8_t type, gint64 timeout_us)
{
    struct pib_aeqe e;

    while (pib_aeq_next(d, &e, timeout_us)) {
        g_assert_cmpuint(le32_to_cpu(e.obj), ==, 1);
        if (e.type == type) {
            return true;
        }
    }
    return false;
}

static void pib_wait_port_state(PibDev *d, uint8_t state)
{
    struct pib_port_attr attr;
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;

    for (;;) {
        g_assert_cmpuint(pib_query_port(d, 1, &attr), ==, PIB_AQ_OK);
        if (attr.state == state) {
            return;
        }
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(1000);
    }
}

/* Each guest error bumps ERR_COUNT by one and leaves its code in ERR_LAST. */
static void pib_expect_guest_error(PibDev *d, uint32_t *count, uint32_t code)
{
    *count += 1;
    g_assert_cmpuint(rd(d, PIB_REG_ERR_COUNT), ==, *count);
    g_assert_cmpuint(rd(d, PIB_REG_ERR_LAST), ==, code);
}

/*
 * 1. Identity and reset values
 */

static void test_reset_values(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0");
    PibDev d;
    uint8_t cap;

    pib_open(&d, qs, PIB_DEVFN_A);

    g_assert_cmphex(qpci_config_readw(d.dev, PCI_VENDOR_ID), ==,
                    PIB_PCI_VENDOR_ID);
    g_assert_cmphex(qpci_config_readw(d.dev, PCI_DEVICE_ID), ==,
                    PIB_PCI_DEVICE_ID);
    g_assert_cmphex(qpci_config_readw(d.dev, PCI_SUBSYSTEM_VENDOR_ID), ==,
                    PIB_PCI_SUBSYS_VENDOR_ID);
    g_assert_cmphex(qpci_config_readw(d.dev, PCI_SUBSYSTEM_ID), ==,
                    PIB_PCI_SUBSYS_ID);
    g_assert_cmphex(qpci_config_readb(d.dev, PCI_REVISION_ID), ==,
                    PIB_PCI_REVISION);
    g_assert_cmphex(qpci_config_readw(d.dev, PCI_CLASS_DEVICE), ==,
                    PIB_PCI_CLASS_INFINIBAND);
    g_assert_cmphex(qpci_config_readl(d.dev, PCI_BASE_ADDRESS_0) &
                    PCI_BASE_ADDRESS_MEM_TYPE_MASK, ==,
                    PCI_BASE_ADDRESS_MEM_TYPE_64);
    g_assert_cmphex(qpci_config_readl(d.dev, PCI_BASE_ADDRESS_2) &
                    PCI_BASE_ADDRESS_MEM_TYPE_MASK, ==,
                    PCI_BASE_ADDRESS_MEM_TYPE_64);
    cap = qpci_find_capability(d.dev, PCI_CAP_ID_EXP, 0);
    g_assert_cmphex(cap, !=, 0);
    g_assert_cmpuint(qpci_msix_table_size(d.dev), ==, PIB_MSIX_VECTORS);

    g_assert_cmphex(rd(&d, PIB_REG_MAGIC), ==, PIB_MAGIC);
    g_assert_cmphex(rd(&d, PIB_REG_VERSION), ==,
                    (PIB_VERSION_MAJOR << 16) | PIB_VERSION_MINOR);
    g_assert_cmphex(rd(&d, PIB_REG_CAPS), ==, PIB_CAP_AEQ);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, 0);
    g_assert_cmphex(rd(&d, PIB_REG_CONTROL), ==, 0);
    g_assert_cmpuint(rd(&d, PIB_REG_NUM_UARS), ==, PIB_NUM_UARS);
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, 0);
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_LAST), ==, PIB_GERR_NONE);
    g_assert_cmpuint(rd(&d, PIB_REG_LINK_STATE), ==, PIB_LINK_DOWN);
    g_assert_cmpuint(rd(&d, PIB_REG_AEQ_LOST), ==, 0);
    g_assert_cmphex(rd(&d, PIB_REG_SCRATCH), ==, 0);

    /* SCRATCH is read/write; CONTROL.RESET clears it (and reads as 0). */
    wr(&d, PIB_REG_SCRATCH, 0x12345678);
    g_assert_cmphex(rd(&d, PIB_REG_SCRATCH), ==, 0x12345678);
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_RESET);
    g_assert_cmphex(rd(&d, PIB_REG_SCRATCH), ==, 0);
    g_assert_cmphex(rd(&d, PIB_REG_CONTROL), ==, 0);
    g_assert_cmphex(rd(&d, PIB_REG_MAGIC), ==, PIB_MAGIC);

    pib_close(&d);
    qtest_shutdown(qs);
}

/*
 * 2. Admin round trip
 */

static void test_admin_roundtrip(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0,"
                            "node-guid=0x0002c903000abcd0,lid=7");
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe cqe;
    struct pib_device_attr dev_attr;
    struct pib_port_attr port_attr;
    uint8_t gid[16], expect_gid[16], buf[16];
    PibDev d;
    uint32_t i, first;

    pib_open(&d, qs, PIB_DEVFN_A);
    g_assert_false(qpci_msix_pending(d.dev, PIB_MSIX_VEC_ADMIN));
    pib_enable(&d, 4, 8);

    /* NOP echoes its value; the completion raised vector 0 (masked: pending) */
    g_assert_cmphex(pib_nop(&d, 0xdeadbeef), ==, 0xdeadbeef);
    g_assert_true(qpci_msix_pending(d.dev, PIB_MSIX_VEC_ADMIN));

    /* QUERY_DEVICE: the node-guid property, and the advertised limits. */
    qtest_memset(qts(&d), d.resp, 0xa5, 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_QUERY_DEVICE,
        .resp_addr = cpu_to_le64(d.resp),
        .resp_len = cpu_to_le32(4096),
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_OK);
    qtest_memread(qts(&d), d.resp, &dev_attr, sizeof(dev_attr));
    g_assert_cmphex(le64_to_cpu(dev_attr.node_guid), ==, TEST_NODE_GUID);
    g_assert_cmphex(le64_to_cpu(dev_attr.sys_image_guid), ==, TEST_NODE_GUID);
    g_assert_cmphex(le64_to_cpu(dev_attr.fw_ver), ==, 1ull << 32);
    g_assert_cmphex(le32_to_cpu(dev_attr.vendor_id), ==, PIB_VENDOR_OUI);
    g_assert_cmphex(le32_to_cpu(dev_attr.vendor_part_id), ==,
                    PIB_PCI_DEVICE_ID);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_qp), ==, 1024);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_qp_wr), ==, 4096);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_cqe), ==, 65536);
    g_assert_cmpuint(le16_to_cpu(dev_attr.max_pkeys), ==, 1);
    g_assert_cmpuint(dev_attr.phys_port_cnt, ==, 1);
    g_assert_cmpuint(le32_to_cpu(dev_attr.num_uars), ==, PIB_NUM_UARS);
    g_assert_cmphex(le64_to_cpu(dev_attr.max_mr_size), ==, 1ull << 34);
    /* The device wrote its structure and not a byte more. */
    qtest_memread(qts(&d), d.resp + sizeof(dev_attr), buf, sizeof(buf));
    for (i = 0; i < sizeof(buf); i++) {
        g_assert_cmphex(buf[i], ==, 0xa5);
    }

    /* A shorter resp_len gets a truncated structure: min(resp_len, size). */
    qtest_memset(qts(&d), d.resp, 0xa5, 64);
    cmd.resp_len = cpu_to_le32(8);
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_OK);
    qtest_memread(qts(&d), d.resp, buf, sizeof(buf));
    g_assert_cmphex(ldq_le_p(buf), ==, 1ull << 32);                 /* fw_ver */
    g_assert_cmphex(buf[8], ==, 0xa5);

    /*
     * QUERY_PORT with no peer: DOWN / POLLING, the lid property,
     * port GUID = node GUID + 1.
     */
    g_assert_cmpuint(pib_query_port(&d, 1, &port_attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(port_attr.state, ==, PIB_PORT_DOWN);
    g_assert_cmpuint(port_attr.phys_state, ==, PIB_PHYS_POLLING);
    g_assert_cmpuint(le16_to_cpu(port_attr.lid), ==, 7);
    g_assert_cmphex(le64_to_cpu(port_attr.port_guid), ==, TEST_NODE_GUID + 1);
    g_assert_cmphex(le64_to_cpu(port_attr.subnet_prefix), ==,
                    PIB_DEFAULT_GID_PREFIX);
    g_assert_cmpuint(port_attr.max_mtu, ==, 5);
    g_assert_cmpuint(port_attr.active_mtu, ==, 5);
    g_assert_cmpuint(le16_to_cpu(port_attr.gid_tbl_len), ==, 1);
    g_assert_cmpuint(le16_to_cpu(port_attr.pkey_tbl_len), ==, 1);
    g_assert_cmpuint(le32_to_cpu(port_attr.max_msg_sz), ==, 1u << 31);
    g_assert_cmpuint(le32_to_cpu(port_attr.link_downs), ==, 0);

    /* QUERY_PKEY / QUERY_GID: the one entry of each table. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_QUERY_PKEY,
        .in.port.port_num = 1,
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, &cqe), ==, PIB_AQ_OK);
    g_assert_cmphex(le32_to_cpu(cqe.result0), ==, 0xffff);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_QUERY_GID,
        .resp_addr = cpu_to_le64(d.resp),
        .resp_len = cpu_to_le32(sizeof(gid)),
        .in.port.port_num = 1,
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_OK);
    qtest_memread(qts(&d), d.resp, gid, sizeof(gid));
    stq_be_p(expect_gid, PIB_DEFAULT_GID_PREFIX);
    stq_be_p(expect_gid + 8, TEST_NODE_GUID + 1);
    g_assert_cmpmem(gid, sizeof(gid), expect_gid, sizeof(expect_gid));
    g_assert_cmphex(gid[0], ==, 0xfe);
    g_assert_cmphex(gid[1], ==, 0x80);

    /* Phase bit across several wraps of a depth-4 ring, one at a time. */
    for (i = 0; i < 3 * d.depth + 1; i++) {
        g_assert_cmphex(pib_nop(&d, 0x1000 + i), ==, 0x1000 + i);
    }

    /* A full ring in one doorbell: depth commands and completions, in order */
    first = d.pi;
    for (i = 0; i < d.depth; i++) {
        cmd = (struct pib_admin_cmd) {
            .opcode = PIB_CMD_NOP,
            .in.nop.value = cpu_to_le32(i),
        };
        pib_post(&d, &cmd);
    }
    wr(&d, PIB_REG_AQ_DB, d.pi);
    for (i = 0; i < d.depth; i++) {
        pib_wait_cqe(&d, first + i, &cqe);
        g_assert_cmpuint(cqe.status, ==, PIB_AQ_OK);
        g_assert_cmpuint(le32_to_cpu(cqe.result0), ==, i);
    }

    g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, 0);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_READY);
    pib_close(&d);
    qtest_shutdown(qs);
}

/*
 * 3. Bad commands: status codes, never a crash, and the device works afterwards
 */

static void test_bad_commands(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0");
    struct pib_admin_cmd cmd;
    struct pib_port_attr attr;
    uint32_t errs = 0;
    PibDev d;
    int i;

    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 8, 8);

    cmd = (struct pib_admin_cmd) { .opcode = 0x7f };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_OPCODE);
    cmd = (struct pib_admin_cmd) { .opcode = 0 };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_OPCODE);
    cmd = (struct pib_admin_cmd) { .opcode = PIB_CMD_MAX };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_OPCODE);

    g_assert_cmpuint(pib_query_port(&d, 2, &attr), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(pib_query_port(&d, 0, &attr), ==, PIB_AQ_BAD_PARAM);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_QUERY_PKEY,
        .in.port = { .port_num = 1, .index = cpu_to_le32(1) },
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.opcode = PIB_CMD_QUERY_GID;
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);

    /* SET_PORT refuses LID 0, 0xffff, multicast LIDs and unknown mask bits. */
    g_assert_cmpuint(pib_set_lid(&d, 0), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(pib_set_lid(&d, 0xffff), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(pib_set_lid(&d, 0xc000), ==, PIB_AQ_BAD_PARAM);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_SET_PORT,
        .in.set_port = { .port_num = 1, .mask = cpu_to_le32(0x80) },
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(pib_query_port(&d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(le16_to_cpu(attr.lid), ==, 0);

    /* No memory behind resp_addr: DMA_ERROR, and counted as a guest error. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_QUERY_DEVICE,
        .resp_addr = cpu_to_le64(ADDR_OUTSIDE_RAM),
        .resp_len = cpu_to_le32(sizeof(struct pib_device_attr)),
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_DMA_ERROR);
    pib_expect_guest_error(&d, &errs, PIB_GERR_DMA);
    /* ... and one that wraps around the top of the address space. */
    cmd.resp_addr = cpu_to_le64(UINT64_MAX - 8);
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_DMA_ERROR);
    pib_expect_guest_error(&d, &errs, PIB_GERR_DMA);

    /* A response aimed at the device's own registers is refused, too. */
    cmd.resp_addr = cpu_to_le64(d.bar0.addr);
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_DMA_ERROR);
    pib_expect_guest_error(&d, &errs, PIB_GERR_DMA);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_READY);

    /* Garbage: random bytes in every field, valid and invalid opcodes alike. */
    for (i = 0; i < 300; i++) {
        uint32_t *w = (uint32_t *)&cmd;
        size_t j;

        for (j = 0; j < sizeof(cmd) / 4; j++) {
            w[j] = g_test_rand_int();
        }
        cmd.opcode = g_test_rand_int_range(0, PIB_CMD_MAX + 3);
        switch (g_test_rand_int_range(0, 3)) {
        case 0:
            cmd.resp_addr = cpu_to_le64(d.resp);
            cmd.resp_len = cpu_to_le32(g_test_rand_int_range(0, 4097));
            break;
        case 1:
            cmd.resp_addr = cpu_to_le64(ADDR_OUTSIDE_RAM);
            break;
        default:
            break;              /* a random 64-bit address */
        }
        pib_cmd(&d, &cmd, NULL);
    }

    /* Still alive and well. */
    g_assert_cmphex(pib_nop(&d, 0xc0ffee), ==, 0xc0ffee);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_READY);
    g_assert_cmphex(rd(&d, PIB_REG_MAGIC), ==, PIB_MAGIC);

    pib_close(&d);
    qtest_shutdown(qs);
}

/*
 * 4. Doorbell and register rules
 */

static void test_doorbells(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0");
    uint32_t errs = 0;
    PibDev d;

    pib_open(&d, qs, PIB_DEVFN_A);

    /* Admin and AEQ doorbells before ENABLE. */
    wr(&d, PIB_REG_AQ_DB, 1);
    pib_expect_guest_error(&d, &errs, PIB_GERR_AQ_DB_DISABLED);
    wr(&d, PIB_REG_AEQ_DB, 1);
    pib_expect_guest_error(&d, &errs, PIB_GERR_BAD_ACCESS);

    /* SQ doorbell on UAR page 0 for QPN 5: no such QP. */
    qpci_io_writeq(d.dev, d.bar2, PIB_UAR_SQ_DB,
                   (7ull << PIB_DB_INDEX_SHIFT) | 5);
    pib_expect_guest_error(&d, &errs, PIB_GERR_UAR_DB_BAD_OBJ);
    qpci_io_writeq(d.dev, d.bar2, 3 * PIB_UAR_PAGE_SIZE + PIB_UAR_CQ_DB,
                   PIB_DB_CQ_ARM | 1);
    pib_expect_guest_error(&d, &errs, PIB_GERR_UAR_DB_BAD_OBJ);
    qpci_io_writeq(d.dev, d.bar2, 255 * PIB_UAR_PAGE_SIZE + PIB_UAR_SRQ_DB,
                   UINT64_MAX);
    pib_expect_guest_error(&d, &errs, PIB_GERR_UAR_DB_BAD_OBJ);

    /* UAR: 32-bit writes, undefined offsets, reads. */
    qpci_io_writel(d.dev, d.bar2, PIB_UAR_RQ_DB, 5);
    pib_expect_guest_error(&d, &errs, PIB_GERR_UAR_DB_BAD_OFF);
    qpci_io_writeq(d.dev, d.bar2, 0x20, 5);
    pib_expect_guest_error(&d, &errs, PIB_GERR_UAR_DB_BAD_OFF);
    qpci_io_writeq(d.dev, d.bar2, 0x04, 5);
    pib_expect_guest_error(&d, &errs, PIB_GERR_UAR_DB_BAD_OFF);
    g_assert_cmphex(qpci_io_readq(d.dev, d.bar2, 0), ==, 0);
    pib_expect_guest_error(&d, &errs, PIB_GERR_UAR_DB_BAD_OFF);

    /* BAR0: wrong sizes, read-only registers, undefined offsets. */
    g_assert_cmphex(qpci_io_readw(d.dev, d.bar0, PIB_REG_MAGIC), ==, 0);
    pib_expect_guest_error(&d, &errs, PIB_GERR_BAD_ACCESS);
    qpci_io_writeq(d.dev, d.bar0, PIB_REG_SCRATCH, 0x1111111122222222ull);
    pib_expect_guest_error(&d, &errs, PIB_GERR_BAD_ACCESS);
    g_assert_cmphex(rd(&d, PIB_REG_SCRATCH), ==, 0);
    wr(&d, PIB_REG_MAGIC, 0);
    pib_expect_guest_error(&d, &errs, PIB_GERR_BAD_ACCESS);
    g_assert_cmphex(rd(&d, PIB_REG_MAGIC), ==, PIB_MAGIC);
    wr(&d, PIB_REG_ERR_COUNT, 0);
    pib_expect_guest_error(&d, &errs, PIB_GERR_BAD_ACCESS);
    g_assert_cmphex(rd(&d, 0x800), ==, 0);
    pib_expect_guest_error(&d, &errs, PIB_GERR_BAD_ACCESS);
    wr(&d, PIB_REG_CONTROL, 0x80000000);
    pib_expect_guest_error(&d, &errs, PIB_GERR_BAD_ACCESS);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, 0);

    /* After ENABLE: AQ_DB more than depth ahead, or moving backwards. */
    pib_enable(&d, 4, 4);
    wr(&d, PIB_REG_AQ_DB, 5);
    pib_expect_guest_error(&d, &errs, PIB_GERR_AQ_DB_RANGE);
    wr(&d, PIB_REG_AQ_DB, 0xffffffff);
    pib_expect_guest_error(&d, &errs, PIB_GERR_AQ_DB_RANGE);
    g_assert_cmphex(pib_nop(&d, 42), ==, 42);
    g_assert_cmphex(rd(&d, PIB_REG_AQ_DB), ==, 1);
    wr(&d, PIB_REG_AQ_DB, 0);
    pib_expect_guest_error(&d, &errs, PIB_GERR_AQ_DB_RANGE);
    /* AEQ_DB past the producer (nothing produced yet). */
    wr(&d, PIB_REG_AEQ_DB, 1);
    pib_expect_guest_error(&d, &errs, PIB_GERR_AEQ_DB_RANGE);
    g_assert_cmphex(pib_nop(&d, 43), ==, 43);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_READY);

    pib_close(&d);
    qtest_shutdown(qs);
}

/* UAR allocation: pages 1..255, lowest free first, page 0 never. */
static void test_uar_alloc(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0");
    struct pib_admin_cmd alloc = { .opcode = PIB_CMD_ALLOC_UAR };
    struct pib_admin_cmd dealloc = { .opcode = PIB_CMD_DEALLOC_UAR };
    struct pib_admin_cqe cqe;
    PibDev d;
    uint32_t i;

    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 4);

    g_assert_cmpuint(pib_cmd(&d, &alloc, &cqe), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(cqe.result0), ==, 1);
    g_assert_cmpuint(pib_cmd(&d, &alloc, &cqe), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(cqe.result0), ==, 2);

    dealloc.in.uar.uar = cpu_to_le32(1);
    g_assert_cmpuint(pib_cmd(&d, &dealloc, NULL), ==, PIB_AQ_OK);
    g_assert_cmpuint(pib_cmd(&d, &dealloc, NULL), ==, PIB_AQ_BAD_RESOURCE);
    dealloc.in.uar.uar = cpu_to_le32(0);
    g_assert_cmpuint(pib_cmd(&d, &dealloc, NULL), ==, PIB_AQ_BAD_PARAM);
    dealloc.in.uar.uar = cpu_to_le32(PIB_NUM_UARS);
    g_assert_cmpuint(pib_cmd(&d, &dealloc, NULL), ==, PIB_AQ_BAD_PARAM);
    dealloc.in.uar.uar = cpu_to_le32(0xffffffff);
    g_assert_cmpuint(pib_cmd(&d, &dealloc, NULL), ==, PIB_AQ_BAD_PARAM);

    g_assert_cmpuint(pib_cmd(&d, &alloc, &cqe), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(cqe.result0), ==, 1);
    for (i = 3; i < PIB_NUM_UARS; i++) {
        g_assert_cmpuint(pib_cmd(&d, &alloc, &cqe), ==, PIB_AQ_OK);
        g_assert_cmpuint(le32_to_cpu(cqe.result0), ==, i);
    }
    g_assert_cmpuint(pib_cmd(&d, &alloc, &cqe), ==, PIB_AQ_NO_RESOURCES);

    /* A function reset frees them all. */
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_RESET);
    pib_enable(&d, 16, 4);
    g_assert_cmpuint(pib_cmd(&d, &alloc, &cqe), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(cqe.result0), ==, 1);

    pib_close(&d);
    qtest_shutdown(qs);
}

/*
 * 5. Bad configuration at ENABLE; a dead admin CQ is fatal until reset
 */

static void test_bad_config(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0");
    static const uint32_t bad_depths[] = { 0, 1, 3, 6, 8192, 0x80000000 };
    uint32_t errs = 0;
    PibDev d;
    size_t i;

    pib_open(&d, qs, PIB_DEVFN_A);

    for (i = 0; i < G_N_ELEMENTS(bad_depths); i++) {
        pib_program_queues(&d, 4, 4);
        wr(&d, PIB_REG_AQ_DEPTH, bad_depths[i]);
        wr(&d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
        g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, 0);
        pib_expect_guest_error(&d, &errs, PIB_GERR_BAD_CONFIG);
        wr(&d, PIB_REG_CONTROL, 0);

        pib_program_queues(&d, 4, 4);
        wr(&d, PIB_REG_AEQ_DEPTH, bad_depths[i]);
        wr(&d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
        g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, 0);
        pib_expect_guest_error(&d, &errs, PIB_GERR_BAD_CONFIG);
        wr(&d, PIB_REG_CONTROL, 0);
    }

    /* Ring bases must be 4 KiB aligned. */
    pib_program_queues(&d, 4, 4);
    wr(&d, PIB_REG_AQ_CQ_LO, (uint32_t)d.cq + 0x40);
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, 0);
    pib_expect_guest_error(&d, &errs, PIB_GERR_BAD_CONFIG);
    pib_program_queues(&d, 4, 4);
    wr(&d, PIB_REG_AEQ_LO, (uint32_t)d.aeq + 0x800);
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, 0);
    pib_expect_guest_error(&d, &errs, PIB_GERR_BAD_CONFIG);

    /* Fixed configuration, ENABLE again (it is still set): READY. */
    pib_program_queues(&d, 4, 4);
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_READY);
    g_assert_cmphex(pib_nop(&d, 7), ==, 7);
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, errs);

    pib_close(&d);
    qtest_shutdown(qs);
}

static void test_fatal_cq(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0");
    struct pib_admin_cmd cmd = { .opcode = PIB_CMD_NOP };
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;
    PibDev d;

    pib_open(&d, qs, PIB_DEVFN_A);
    pib_program_queues(&d, 4, 4);
    wr(&d, PIB_REG_AQ_CQ_LO, (uint32_t)ADDR_OUTSIDE_RAM);
    wr(&d, PIB_REG_AQ_CQ_HI, ADDR_OUTSIDE_RAM >> 32);
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_READY);

    pib_post(&d, &cmd);
    wr(&d, PIB_REG_AQ_DB, d.pi);
    while (!(rd(&d, PIB_REG_STATUS) & PIB_STATUS_FATAL)) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(100);
    }
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_FATAL);
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_LAST), ==, PIB_GERR_DMA);

    /* FATAL sticks: doorbells are refused, ENABLE does nothing ... */
    wr(&d, PIB_REG_AQ_DB, d.pi);
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_LAST), ==, PIB_GERR_AQ_DB_DISABLED);
    pib_program_queues(&d, 4, 4);
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_FATAL);

    /* ... until a reset. */
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_RESET);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, 0);
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, 0);
    pib_enable(&d, 4, 4);
    g_assert_cmphex(pib_nop(&d, 99), ==, 99);

    pib_close(&d);
    qtest_shutdown(qs);
}

/*
 * Rings pointed at the device's own BAR0: refused DMA, not a loop through the
 * register handlers.
 */
static void test_rings_at_own_bar(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0");
    struct pib_admin_cqe cqe;
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;
    PibDev d;

    pib_open(&d, qs, PIB_DEVFN_A);

    /* AEQ on BAR0: the event is lost (and counted), the device carries on. */
    pib_program_queues(&d, 4, 4);
    wr(&d, PIB_REG_AEQ_LO, (uint32_t)d.bar0.addr);
    wr(&d, PIB_REG_AEQ_HI, d.bar0.addr >> 32);
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_READY);
    g_assert_cmpuint(pib_set_lid(&d, 5), ==, PIB_AQ_OK);
    g_assert_cmpuint(rd(&d, PIB_REG_AEQ_LOST), ==, 1);
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_LAST), ==, PIB_GERR_DMA);
    g_assert_cmphex(rd(&d, PIB_REG_MAGIC), ==, PIB_MAGIC);
    wr(&d, PIB_REG_CONTROL, 0);

    /* Admin SQ on BAR0: the command cannot be fetched, DMA_ERROR, no cmd_id */
    pib_program_queues(&d, 4, 4);
    wr(&d, PIB_REG_AQ_SQ_LO, (uint32_t)d.bar0.addr);
    wr(&d, PIB_REG_AQ_SQ_HI, d.bar0.addr >> 32);
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_READY);
    wr(&d, PIB_REG_AQ_DB, 1);
    do {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        qtest_memread(qts(&d), d.cq, &cqe, sizeof(cqe));
    } while (!(cqe.flags & PIB_ACQE_PHASE));
    g_assert_cmpuint(cqe.status, ==, PIB_AQ_DMA_ERROR);
    g_assert_cmpuint(cqe.cmd_id, ==, 0);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_READY);

    pib_close(&d);
    qtest_shutdown(qs);
}

/*
 * Async events: LID changes, a full AEQ, phase across the wrap
 */

static void test_aeq(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0");
    struct pib_port_attr attr;
    struct pib_aeqe e;
    uint32_t errs = 0;
    PibDev d;

    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 8, 2);
    g_assert_false(qpci_msix_pending(d.dev, PIB_MSIX_VEC_ASYNC));

    /* Three LID changes into an undrained 2-entry AEQ: one lost, counted. */
    g_assert_cmpuint(pib_set_lid(&d, 10), ==, PIB_AQ_OK);
    g_assert_cmpuint(pib_set_lid(&d, 10), ==, PIB_AQ_OK);  /* same: no event */
    g_assert_cmpuint(pib_set_lid(&d, 11), ==, PIB_AQ_OK);
    g_assert_cmpuint(pib_set_lid(&d, 12), ==, PIB_AQ_OK);
    g_assert_cmpuint(rd(&d, PIB_REG_AEQ_LOST), ==, 1);
    g_assert_true(qpci_msix_pending(d.dev, PIB_MSIX_VEC_ASYNC));

    /* With no peer the port stays DOWN whatever its LID. */
    g_assert_cmpuint(pib_query_port(&d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(le16_to_cpu(attr.lid), ==, 12);
    g_assert_cmpuint(attr.state, ==, PIB_PORT_DOWN);

    g_assert_true(pib_aeq_next(&d, &e, TIMEOUT_US));
    g_assert_cmpuint(e.type, ==, PIB_AE_LID_CHANGE);
    g_assert_cmpuint(le64_to_cpu(e.data), ==, 10);
    g_assert_cmpuint(e.flags & PIB_AEQE_PHASE, ==, 1);
    g_assert_true(pib_aeq_next(&d, &e, TIMEOUT_US));
    g_assert_cmpuint(le64_to_cpu(e.data), ==, 11);
    g_assert_false(pib_aeq_next(&d, &e, 10000));

    /* The consumer index may not pass the producer. */
    wr(&d, PIB_REG_AEQ_DB, d.aeq_ci + 1);
    pib_expect_guest_error(&d, &errs, PIB_GERR_AEQ_DB_RANGE);

    /* Room again: the next event lands in slot 0 with phase 0. */
    g_assert_cmpuint(pib_set_lid(&d, 13), ==, PIB_AQ_OK);
    g_assert_true(pib_aeq_next(&d, &e, TIMEOUT_US));
    g_assert_cmpuint(e.type, ==, PIB_AE_LID_CHANGE);
    g_assert_cmpuint(le64_to_cpu(e.data), ==, 13);
    g_assert_cmpuint(e.flags & PIB_AEQE_PHASE, ==, 0);
    g_assert_cmpuint(rd(&d, PIB_REG_AEQ_LOST), ==, 1);

    pib_close(&d);
    qtest_shutdown(qs);
}

/*
 * 6. Two HCAs, one link: both ports reach ACTIVE
 */

static void test_link_pair(void)
{
    g_autofree char *dir = g_dir_make_tmp("pib-test-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "link.sock", NULL);
    g_autofree char *args = g_strdup_printf(
        "-chardev socket,id=la,path=%s,server=on,wait=off "
        "-chardev socket,id=lb,path=%s," PIB_CHR_RECONNECT_1S " "
        "-device pib-hca,addr=4.0,chardev=la,lid=1 "
        "-device pib-hca,addr=5.0,chardev=lb,lid=2", path, path);
    QOSState *qs = pib_boot(args);
    struct pib_port_attr attr_a, attr_b;
    struct pib_device_attr dev_attr;
    struct pib_admin_cmd cmd;
    PibDev a, b;
    uint64_t guid_a, guid_b;

    pib_open(&a, qs, PIB_DEVFN_A);
    pib_open(&b, qs, PIB_DEVFN_B);
    pib_enable(&a, 8, 8);
    pib_enable(&b, 8, 8);

    pib_wait_port_state(&a, PIB_PORT_ACTIVE);
    pib_wait_port_state(&b, PIB_PORT_ACTIVE);
    g_assert_true(pib_aeq_find(&a, PIB_AE_PORT_ACTIVE, TIMEOUT_US));
    g_assert_true(pib_aeq_find(&b, PIB_AE_PORT_ACTIVE, TIMEOUT_US));
    g_assert_true(qpci_msix_pending(a.dev, PIB_MSIX_VEC_ASYNC));
    g_assert_true(qpci_msix_pending(b.dev, PIB_MSIX_VEC_ASYNC));

    g_assert_cmpuint(pib_query_port(&a, 1, &attr_a), ==, PIB_AQ_OK);
    g_assert_cmpuint(pib_query_port(&b, 1, &attr_b), ==, PIB_AQ_OK);
    g_assert_cmpuint(attr_a.phys_state, ==, PIB_PHYS_LINKUP);
    g_assert_cmpuint(attr_b.phys_state, ==, PIB_PHYS_LINKUP);
    g_assert_cmpuint(le16_to_cpu(attr_a.lid), ==, 1);
    g_assert_cmpuint(le16_to_cpu(attr_b.lid), ==, 2);
    g_assert_cmpuint(rd(&a, PIB_REG_LINK_STATE), ==, PIB_LINK_UP);
    g_assert_cmpuint(rd(&b, PIB_REG_LINK_STATE), ==, PIB_LINK_UP);

    /* Derived node GUIDs: the OUI on top, different at the two ends. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_QUERY_DEVICE,
        .resp_addr = cpu_to_le64(a.resp),
        .resp_len = cpu_to_le32(sizeof(dev_attr)),
    };
    g_assert_cmpuint(pib_cmd(&a, &cmd, NULL), ==, PIB_AQ_OK);
    qtest_memread(qts(&a), a.resp, &dev_attr, sizeof(dev_attr));
    guid_a = le64_to_cpu(dev_attr.node_guid);
    cmd.resp_addr = cpu_to_le64(b.resp);
    g_assert_cmpuint(pib_cmd(&b, &cmd, NULL), ==, PIB_AQ_OK);
    qtest_memread(qts(&b), b.resp, &dev_attr, sizeof(dev_attr));
    guid_b = le64_to_cpu(dev_attr.node_guid);
    g_assert_cmphex(guid_a >> 40, ==, PIB_VENDOR_OUI);
    g_assert_cmphex(guid_b >> 40, ==, PIB_VENDOR_OUI);
    g_assert_cmphex(guid_a, !=, guid_b);
    g_assert_cmphex(le64_to_cpu(attr_a.port_guid), ==, guid_a + 1);

    pib_close(&a);
    pib_close(&b);
    qtest_shutdown(qs);
    g_unlink(path);
    g_rmdir(dir);
}

/*
 * 7. The link against this test as the peer: framing, partial reads, loss of
 * framing, retrain
 */

static int peer_connect(const char *path)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);

    g_assert_cmpint(fd, >=, 0);
    g_strlcpy(sun.sun_path, path, sizeof(sun.sun_path));
    while (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(1000);
    }
    return fd;
}

/* Read exactly len bytes; false on EOF.  Fails the test on timeout. */
static bool peer_read(int fd, void *buf, size_t len)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    size_t got = 0;
    ssize_t n;

    while (got < len) {
        g_assert_cmpint(poll(&pfd, 1, TIMEOUT_US / 1000), ==, 1);
        n = read(fd, (uint8_t *)buf + got, len - got);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            return false;
        }
        g_assert_cmpint(n, >, 0);
        got += n;
    }
    return true;
}

/* MSG_NOSIGNAL: if the device dropped us, fail an assertion, not by SIGPIPE */
static void peer_write(int fd, const void *buf, size_t len)
{
    g_assert_cmpint(send(fd, buf, len, MSG_NOSIGNAL), ==, len);
}

static void peer_expect_hello(int fd, uint64_t node_guid)
{
    struct pib_link_hdr hdr;
    struct pib_link_hello hello;

    g_assert_true(peer_read(fd, &hdr, sizeof(hdr)));
    g_assert_cmphex(hdr.magic, ==, PIB_LINK_MAGIC);
    g_assert_cmphex(hdr.type, ==, PIB_FRAME_HELLO);
    g_assert_cmpuint(be16_to_cpu(hdr.length_be), ==, sizeof(hello));
    g_assert_true(peer_read(fd, &hello, sizeof(hello)));
    g_assert_cmpuint(be32_to_cpu(hello.version_be), ==, PIB_LINK_PROTO_VERSION);
    g_assert_cmpuint(be32_to_cpu(hello.mtu_be), >=, 4096);
    g_assert_cmphex(be64_to_cpu(hello.node_guid_be), ==, node_guid);
    g_assert_cmphex(be64_to_cpu(hello.port_guid_be), ==, node_guid + 1);
}

/* Our HELLO, in three pieces that split the header: the device reassembles */
static void peer_send_hello(int fd)
{
    uint8_t frame[PIB_LINK_HDR_LEN + sizeof(struct pib_link_hello)];
    struct pib_link_hdr hdr = {
        .magic = PIB_LINK_MAGIC,
        .type = PIB_FRAME_HELLO,
        .length_be = cpu_to_be16(sizeof(struct pib_link_hello)),
    };
    struct pib_link_hello hello = {
        .version_be = cpu_to_be32(PIB_LINK_PROTO_VERSION),
        .mtu_be = cpu_to_be32(PIB_LINK_MAX_PAYLOAD),
        .node_guid_be = cpu_to_be64(0x1122334455667700ull),
        .port_guid_be = cpu_to_be64(0x1122334455667701ull),
    };

    memcpy(frame, &hdr, sizeof(hdr));
    memcpy(frame + sizeof(hdr), &hello, sizeof(hello));
    peer_write(fd, frame, 1);
    g_usleep(20000);
    peer_write(fd, frame + 1, 5);
    g_usleep(20000);
    peer_write(fd, frame + 6, sizeof(frame) - 6);
}

static void peer_send_packet(int fd, uint16_t len)
{
    g_autofree uint8_t *frame = g_malloc0(PIB_LINK_HDR_LEN + len);
    struct pib_link_hdr hdr = {
        .magic = PIB_LINK_MAGIC,
        .type = PIB_FRAME_PACKET,
        .length_be = cpu_to_be16(len),
    };

    memcpy(frame, &hdr, sizeof(hdr));
    peer_write(fd, frame, PIB_LINK_HDR_LEN + len);
}

/* After losing framing the device drops the connection: we see EOF. */
static void peer_expect_eof(int fd)
{
    uint8_t byte;

    g_assert_false(peer_read(fd, &byte, 1));
}

static void peer_bring_up(PibDev *d, int fd)
{
    peer_expect_hello(fd, TEST_NODE_GUID);
    peer_send_hello(fd);
    pib_wait_port_state(d, PIB_PORT_ACTIVE);
    g_assert_true(pib_aeq_find(d, PIB_AE_PORT_ACTIVE, TIMEOUT_US));
    g_assert_cmpuint(rd(d, PIB_REG_LINK_STATE), ==, PIB_LINK_UP);
}

static void peer_expect_down(PibDev *d, uint32_t link_downs)
{
    struct pib_port_attr attr;

    pib_wait_port_state(d, PIB_PORT_DOWN);
    g_assert_true(pib_aeq_find(d, PIB_AE_PORT_ERR, TIMEOUT_US));
    g_assert_cmpuint(pib_query_port(d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(attr.phys_state, ==, PIB_PHYS_POLLING);
    g_assert_cmpuint(le32_to_cpu(attr.link_downs), ==, link_downs);
    g_assert_cmpuint(rd(d, PIB_REG_LINK_STATE), ==, PIB_LINK_DOWN);
}

static void test_link_framing(void)
{
    g_autofree char *dir = g_dir_make_tmp("pib-test-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "link.sock", NULL);
    g_autofree char *args = g_strdup_printf(
        "-chardev socket,id=link,path=%s,server=on,wait=off "
        "-device pib-hca,addr=4.0,chardev=link,lid=3,node-guid=0x%" PRIx64,
        path, (uint64_t)TEST_NODE_GUID);
    QOSState *qs = pib_boot(args);
    struct pib_port_attr attr;
    uint8_t junk[8] = { 0x51, PIB_FRAME_PACKET, 0, 4 };
    struct pib_link_hdr big = {
        .magic = PIB_LINK_MAGIC,
        .type = PIB_FRAME_PACKET,
        .length_be = cpu_to_be16(0xffff),
    };
    struct pib_link_hdr odd = {
        .magic = PIB_LINK_MAGIC, .type = 0x7e, .length_be = cpu_to_be16(0),
    };
    PibDev d;
    int fd;

    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 8, 16);
    g_assert_cmpuint(pib_query_port(&d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(attr.state, ==, PIB_PORT_DOWN);
    g_assert_cmpuint(attr.phys_state, ==, PIB_PHYS_POLLING);

    /* Connect, train, and see data frames swallowed without harm. */
    fd = peer_connect(path);
    peer_bring_up(&d, fd);
    peer_send_packet(fd, 100);
    peer_send_packet(fd, 0);
    peer_send_packet(fd, PIB_LINK_MAX_PAYLOAD);
    g_assert_cmpuint(pib_query_port(&d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(attr.state, ==, PIB_PORT_ACTIVE);

    /* Bad magic: the device drops the connection and the port goes down. */
    peer_write(fd, junk, sizeof(junk));
    peer_expect_eof(fd);
    close(fd);
    peer_expect_down(&d, 1);

    /* Retrain; then an oversized frame. */
    fd = peer_connect(path);
    peer_bring_up(&d, fd);
    peer_write(fd, &big, sizeof(big));
    peer_expect_eof(fd);
    close(fd);
    peer_expect_down(&d, 2);

    /* Retrain; then an unknown frame type. */
    fd = peer_connect(path);
    peer_bring_up(&d, fd);
    peer_write(fd, &odd, sizeof(odd));
    peer_expect_eof(fd);
    close(fd);
    peer_expect_down(&d, 3);

    /* Retrain; then the peer simply goes away. */
    fd = peer_connect(path);
    peer_bring_up(&d, fd);
    close(fd);
    peer_expect_down(&d, 4);

    /* None of this was the guest's fault. */
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, 0);
    g_assert_cmpuint(rd(&d, PIB_REG_AEQ_LOST), ==, 0);

    pib_close(&d);
    qtest_shutdown(qs);
    g_unlink(path);
    g_rmdir(dir);
}

/*
 * 8. The data path: objects, queue pairs, packets between two HCAs
 *
 * The test plays the driver and the provider at once: it builds rings and
 * page lists in guest memory, writes WQEs and rings doorbells exactly as
 * guest-provider/qp.c does, and reads CQEs by their phase bit as
 * guest-provider/cq.c does.
 */

#define DP_UAR              0       /* the kernel's UAR page, always there */
#define DP_MTU_1024         3
#define DP_ALL_ACCESS       (PIB_ACCESS_LOCAL_WRITE | \
                             PIB_ACCESS_REMOTE_WRITE | \
                             PIB_ACCESS_REMOTE_READ | PIB_ACCESS_REMOTE_ATOMIC)
#define DP_SHORT_US         (200 * 1000)    /* "nothing comes": 0.2 s */

typedef struct TestCq {
    uint32_t cqn;
    uint32_t depth;
    uint32_t ci;            /* next CQE to look at */
    uint64_t ring;          /* depth CQEs, then the consumer index page */
    uint64_t ring_bytes;
} TestCq;

typedef struct TestQp {
    uint32_t qpn;
    uint8_t type;
    uint32_t uar;
    uint64_t sq, rq;
    uint32_t sq_depth, rq_depth;
    uint32_t sq_stride_log, rq_stride_log;
    uint32_t sq_pi, rq_pi;
} TestQp;

/* Two HCAs on one link (LIDs 1 and 2), enabled with a CEQ each. */
typedef struct TestPair {
    QOSState *qs;
    PibDev a, b;
    char *dir, *path;
    uint64_t ceq_a, ceq_b;
} TestPair;

static uint64_t dp_alloc(PibDev *d, size_t size)
{
    uint64_t addr = guest_alloc(&d->qs->alloc, size);

    g_assert_cmphex(addr & 0xfff, ==, 0);
    qtest_memset(qts(d), addr, 0, size);
    return addr;
}

/* A page list for npages contiguous pages from addr. */
static uint64_t dp_pbl(PibDev *d, uint64_t addr, uint32_t npages)
{
    uint64_t pbl = dp_alloc(d, MAX(npages, 1) * sizeof(uint64_t));
    uint32_t i;

    for (i = 0; i < npages; i++) {
        qtest_writeq(qts(d), pbl + i * 8, addr + (uint64_t)i * 4096);
    }
    return pbl;
}

static uint32_t dp_create_pd(PibDev *d)
{
    struct pib_admin_cmd cmd = { .opcode = PIB_CMD_CREATE_PD };
    struct pib_admin_cqe cqe;

    g_assert_cmpuint(pib_cmd(d, &cmd, &cqe), ==, PIB_AQ_OK);
    return le32_to_cpu(cqe.result0);
}

static uint8_t dp_obj_cmd(PibDev *d, uint8_t opcode, uint32_t num)
{
    struct pib_admin_cmd cmd = {
        .opcode = opcode,
        .in.obj.num = cpu_to_le32(num),
    };

    return pib_cmd(d, &cmd, NULL);
}

/* REG_MR of [addr, addr + len) with iova == addr (contiguous pages). */
static uint8_t dp_reg_mr_status(PibDev *d, uint32_t pdn, uint32_t access,
                                uint64_t addr, uint64_t len, uint32_t *key)
{
    uint32_t npages = DIV_ROUND_UP((addr & 0xfff) + len, 4096);
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_REG_MR,
        .in.reg_mr = {
            .pdn = cpu_to_le32(pdn),
            .access = cpu_to_le32(access),
            .iova = cpu_to_le64(addr),
            .length = cpu_to_le64(len),
            .pbl_addr = cpu_to_le64(dp_pbl(d, addr & ~0xfffull, npages)),
            .npages = cpu_to_le32(npages),
        },
    };
    struct pib_admin_cqe cqe;
    uint8_t status = pib_cmd(d, &cmd, &cqe);

    if (key) {
        *key = le32_to_cpu(cqe.result0);
    }
    if (status == PIB_AQ_OK) {
        g_assert_cmphex(le32_to_cpu(cqe.result0), ==,
                        le32_to_cpu(cqe.result1));
    }
    return status;
}

static uint32_t dp_reg_mr(PibDev *d, uint32_t pdn, uint32_t access,
                          uint64_t addr, uint64_t len)
{
    uint32_t key;

    g_assert_cmpuint(dp_reg_mr_status(d, pdn, access, addr, len, &key), ==,
                     PIB_AQ_OK);
    return key;
}

static uint8_t dp_create_cq_status(PibDev *d, uint32_t depth, uint32_t uar,
                                   TestCq *cq)
{
    uint64_t ring_bytes = ROUND_UP(depth * sizeof(struct pib_cqe), 4096);
    uint32_t npages = ring_bytes / 4096 + 1;
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe cqe;
    uint8_t status;

    memset(cq, 0, sizeof(*cq));
    cq->depth = depth;
    cq->ring_bytes = ring_bytes;
    cq->ring = dp_alloc(d, ring_bytes + 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_CQ,
        .in.create_cq = {
            .depth = cpu_to_le32(depth),
            .npages = cpu_to_le32(npages),
            .pbl_addr = cpu_to_le64(dp_pbl(d, cq->ring, npages)),
            .uar = cpu_to_le32(uar),
        },
    };
    status = pib_cmd(d, &cmd, &cqe);
    cq->cqn = le32_to_cpu(cqe.result0);
    return status;
}

static void dp_create_cq(PibDev *d, uint32_t depth, TestCq *cq)
{
    g_assert_cmpuint(dp_create_cq_status(d, depth, DP_UAR, cq), ==, PIB_AQ_OK);
}

/*
 * A QP with room for 12 SGEs (or 192 inline bytes) per send WQE and 3 per
 * receive WQE; on an SRQ (srqn != ~0) it has no RQ.
 */
static uint8_t dp_create_qp_ex(PibDev *d, uint8_t type, uint32_t pdn,
                               TestCq *scq, TestCq *rcq, uint32_t sq_depth,
                               uint32_t rq_depth, uint32_t uar, uint32_t srqn,
                               TestQp *qp)
{
    struct pib_qp_create c;
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe cqe;
    uint64_t mbox = dp_alloc(d, sizeof(c));
    uint32_t sq_pages, rq_pages;
    uint8_t status;

    memset(qp, 0, sizeof(*qp));
    qp->type = type;
    qp->uar = uar;
    qp->sq_depth = sq_depth;
    qp->rq_depth = rq_depth;
    qp->sq_stride_log = 8;      /* 64 + 4 * 16 = 128 <= 256 */
    qp->rq_stride_log = 6;      /* 16 + 3 * 16 = 64 */
    sq_pages = DIV_ROUND_UP(sq_depth << qp->sq_stride_log, 4096);
    rq_pages = DIV_ROUND_UP(rq_depth << qp->rq_stride_log, 4096);
    qp->sq = dp_alloc(d, sq_pages * 4096);
    qp->rq = dp_alloc(d, MAX(rq_pages, 1) * 4096);
    c = (struct pib_qp_create) {
        .pdn = cpu_to_le32(pdn),
        .type = type,
        .flags = rq_depth ? 0 : PIB_QPC_F_NO_RQ,
        .sq_stride_log = qp->sq_stride_log,
        .rq_stride_log = qp->rq_stride_log,
        .send_cqn = cpu_to_le32(scq->cqn),
        .recv_cqn = cpu_to_le32(rcq->cqn),
        .srqn = cpu_to_le32(srqn),
        .sq_depth = cpu_to_le32(sq_depth),
        .rq_depth = cpu_to_le32(rq_depth),
        .max_inline = cpu_to_le32(192),
        .uar = cpu_to_le32(uar),
        .sq_npages = cpu_to_le32(sq_pages),
        .rq_npages = cpu_to_le32(rq_pages),
        .sq_pbl_addr = cpu_to_le64(dp_pbl(d, qp->sq, sq_pages)),
        .rq_pbl_addr = cpu_to_le64(dp_pbl(d, qp->rq, rq_pages)),
    };
    qtest_memwrite(qts(d), mbox, &c, sizeof(c));
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_QP,
        .in.mbox = { .addr = cpu_to_le64(mbox), .len = cpu_to_le32(sizeof(c)) },
    };
    status = pib_cmd(d, &cmd, &cqe);
    qp->qpn = le32_to_cpu(cqe.result0);
    return status;
}

static uint8_t dp_create_qp_status(PibDev *d, uint8_t type, uint32_t pdn,
                                   TestCq *scq, TestCq *rcq, uint32_t sq_depth,
                                   uint32_t rq_depth, uint32_t uar,
                                   TestQp *qp)
{
    return dp_create_qp_ex(d, type, pdn, scq, rcq, sq_depth, rq_depth, uar,
                           0xffffffff, qp);
}

static void dp_create_qp(PibDev *d, uint8_t type, uint32_t pdn, TestCq *scq,
                         TestCq *rcq, TestQp *qp)
{
    g_assert_cmpuint(dp_create_qp_status(d, type, pdn, scq, rcq, 16, 16,
                                         DP_UAR, qp), ==, PIB_AQ_OK);
}

static uint8_t dp_modify(PibDev *d, uint32_t qpn, const struct pib_qp_attr *a)
{
    uint64_t mbox = d->resp + 2048;
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_MODIFY_QP,
        .in.mbox = {
            .addr = cpu_to_le64(mbox),
            .len = cpu_to_le32(sizeof(*a)),
            .obj = cpu_to_le32(qpn),
        },
    };

    qtest_memwrite(qts(d), mbox, a, sizeof(*a));
    return pib_cmd(d, &cmd, NULL);
}

static uint8_t dp_modify_state(PibDev *d, uint32_t qpn, uint8_t state)
{
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE),
        .qp_state = state,
    };

    return dp_modify(d, qpn, &a);
}

static struct pib_qp_attr dp_query_qp(PibDev *d, uint32_t qpn)
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_QUERY_QP,
        .resp_addr = cpu_to_le64(d->resp),
        .resp_len = cpu_to_le32(sizeof(struct pib_qp_attr)),
        .in.obj.num = cpu_to_le32(qpn),
    };
    struct pib_qp_attr a;

    g_assert_cmpuint(pib_cmd(d, &cmd, NULL), ==, PIB_AQ_OK);
    qtest_memread(qts(d), d->resp, &a, sizeof(a));
    return a;
}

/* RESET -> INIT -> RTR -> RTS for RC/UC, aimed at (dlid, dqpn). */
static void dp_connect_ex(PibDev *d, TestQp *qp, uint16_t dlid, uint32_t dqpn,
                          uint8_t mtu, uint8_t timeout, uint8_t retry_cnt,
                          uint8_t rnr_retry)
{
    bool rc = qp->type == PIB_QPT_RC;
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX |
                                 PIB_QP_PORT | PIB_QP_ACCESS_FLAGS),
        .qp_state = PIB_QPS_INIT,
        .port_num = 1,
        .qp_access_flags = cpu_to_le32(PIB_ACCESS_REMOTE_WRITE |
                                       PIB_ACCESS_REMOTE_READ |
                                       (rc ? PIB_ACCESS_REMOTE_ATOMIC : 0)),
    };

    g_assert_cmpuint(dp_modify(d, qp->qpn, &a), ==, PIB_AQ_OK);
    a = (struct pib_qp_attr) {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_AV | PIB_QP_PATH_MTU |
                                 PIB_QP_DEST_QPN | PIB_QP_RQ_PSN |
                                 (rc ? PIB_QP_MAX_DEST_RD_ATOMIC |
                                       PIB_QP_MIN_RNR_TIMER : 0)),
        .qp_state = PIB_QPS_RTR,
        .path_mtu = mtu,
        .dlid = cpu_to_le16(dlid),
        .dest_qp_num = cpu_to_le32(dqpn),
        .rq_psn = cpu_to_le32(0xfffff0),    /* PSNs wrap during the tests */
        .max_dest_rd_atomic = 4,
        .min_rnr_timer = 1,                 /* 0.01 ms */
    };
    g_assert_cmpuint(dp_modify(d, qp->qpn, &a), ==, PIB_AQ_OK);
    a = (struct pib_qp_attr) {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_SQ_PSN |
                                 (rc ? PIB_QP_TIMEOUT | PIB_QP_RETRY_CNT |
                                       PIB_QP_RNR_RETRY |
                                       PIB_QP_MAX_QP_RD_ATOMIC : 0)),
        .qp_state = PIB_QPS_RTS,
        .sq_psn = cpu_to_le32(0xfffff0),
        .timeout = timeout,
        .retry_cnt = retry_cnt,
        .rnr_retry = rnr_retry,
        .max_rd_atomic = 4,
    };
    g_assert_cmpuint(dp_modify(d, qp->qpn, &a), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_query_qp(d, qp->qpn).qp_state, ==, PIB_QPS_RTS);
}

static void dp_connect(PibDev *d, TestQp *qp, uint16_t dlid, uint32_t dqpn)
{
    dp_connect_ex(d, qp, dlid, dqpn, DP_MTU_1024, 14, 7, 7);
}

/* UD: RESET -> INIT -> RTR -> RTS with a Q_Key. */
static void dp_ud_ready(PibDev *d, TestQp *qp, uint32_t qkey)
{
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX |
                                 PIB_QP_PORT | PIB_QP_QKEY),
        .qp_state = PIB_QPS_INIT,
        .port_num = 1,
        .qkey = cpu_to_le32(qkey),
    };

    g_assert_cmpuint(dp_modify(d, qp->qpn, &a), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(d, qp->qpn, PIB_QPS_RTR), ==, PIB_AQ_OK);
    a = (struct pib_qp_attr) {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_SQ_PSN),
        .qp_state = PIB_QPS_RTS,
        .sq_psn = cpu_to_le32(7),
    };
    g_assert_cmpuint(dp_modify(d, qp->qpn, &a), ==, PIB_AQ_OK);
}

static void dp_doorbell(PibDev *d, uint32_t uar, uint32_t reg, uint32_t obj,
                        uint32_t index)
{
    qpci_io_writeq(d->dev, d->bar2, uar * PIB_UAR_PAGE_SIZE + reg,
                   (uint64_t)index << PIB_DB_INDEX_SHIFT | obj);
}

static struct pib_sge dp_sge(uint64_t addr, uint32_t len, uint32_t lkey)
{
    return (struct pib_sge) {
        .addr = cpu_to_le64(addr),
        .length = cpu_to_le32(len),
        .lkey = cpu_to_le32(lkey),
    };
}

/* Write a receive WQE in the next RQ slot; ring the RQ doorbell. */
static void dp_post_recv(PibDev *d, TestQp *qp, uint64_t wr_id,
                         const struct pib_sge *sge, int nsge)
{
    uint64_t slot = qp->rq + ((qp->rq_pi & (qp->rq_depth - 1)) <<
                              qp->rq_stride_log);
    struct pib_recv_wqe wqe = {
        .wr_id = cpu_to_le64(wr_id),
        .num_sge = nsge,
    };

    qtest_memwrite(qts(d), slot, &wqe, sizeof(wqe));
    qtest_memwrite(qts(d), slot + sizeof(wqe), sge, nsge * sizeof(*sge));
    qp->rq_pi++;
    dp_doorbell(d, qp->uar, PIB_UAR_RQ_DB, qp->qpn, qp->rq_pi);
}

/* Write a send WQE (control segment, then SGEs or inline bytes); ring. */
static void dp_post_send_raw(PibDev *d, TestQp *qp, struct pib_send_wqe *wqe,
                             const void *tail, size_t tail_len, bool ring)
{
    uint64_t slot = qp->sq + ((qp->sq_pi & (qp->sq_depth - 1)) <<
                              qp->sq_stride_log);

    qtest_memwrite(qts(d), slot, wqe, sizeof(*wqe));
    if (tail_len) {
        qtest_memwrite(qts(d), slot + sizeof(*wqe), tail, tail_len);
    }
    qp->sq_pi++;
    if (ring) {
        dp_doorbell(d, qp->uar, PIB_UAR_SQ_DB, qp->qpn, qp->sq_pi);
    }
}

static void dp_post_send(PibDev *d, TestQp *qp, uint8_t opcode, uint8_t flags,
                         uint64_t wr_id, const struct pib_sge *sge, int nsge,
                         uint64_t raddr, uint32_t rkey)
{
    struct pib_send_wqe wqe = {
        .opcode = opcode,
        .flags = flags,
        .num_sge = nsge,
        .wr_id = cpu_to_le64(wr_id),
        .remote_addr = cpu_to_le64(raddr),
        .rkey = cpu_to_le32(rkey),
    };

    dp_post_send_raw(d, qp, &wqe, sge, nsge * sizeof(*sge), true);
}

/*
 * How long dp_poll sleeps between looks at a CQ.  Each look is a qtest
 * command that costs QEMU CPU time too; the benchmarks look less often.
 */
static gulong dp_poll_interval_us = 200;

/* The next CQE, by its phase bit; gives the slot back (CI record). */
static bool dp_poll(PibDev *d, TestCq *cq, struct pib_cqe *cqe,
                    gint64 timeout_us)
{
    uint64_t addr = cq->ring + (cq->ci & (cq->depth - 1)) * sizeof(*cqe);
    gint64 end = g_get_monotonic_time() + timeout_us;

    for (;;) {
        qtest_memread(qts(d), addr, cqe, sizeof(*cqe));
        if ((cqe->flags & PIB_CQE_F_PHASE) == phase_of(cq->ci, cq->depth)) {
            break;
        }
        if (g_get_monotonic_time() >= end) {
            return false;
        }
        g_usleep(dp_poll_interval_us);
    }
    cq->ci++;
    qtest_writel(qts(d), cq->ring + cq->ring_bytes, cq->ci);
    return true;
}

static void dp_expect(PibDev *d, TestCq *cq, uint64_t wr_id, uint8_t status,
                      uint8_t opcode, struct pib_cqe *out)
{
    struct pib_cqe cqe;

    g_assert_true(dp_poll(d, cq, &cqe, TIMEOUT_US));
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, wr_id);
    g_assert_cmpuint(cqe.status, ==, status);
    g_assert_cmphex(cqe.opcode, ==, opcode);
    if (out) {
        *out = cqe;
    }
}

static void dp_expect_none(PibDev *d, TestCq *cq)
{
    struct pib_cqe cqe;

    g_assert_false(dp_poll(d, cq, &cqe, DP_SHORT_US));
}

/*
 * Timers run on the virtual clock, which under qtest moves only when told.
 * Step it until the next CQE turns up (a timer's work takes a moment of real
 * time to reach the CQ, so poll between the steps).
 */
static void dp_step_until_cqe(PibDev *d, TestCq *cq, struct pib_cqe *cqe,
                              int64_t step_ns, int max_steps)
{
    int i;

    for (i = 0; i < max_steps; i++) {
        qtest_clock_step(qts(d), step_ns);
        if (dp_poll(d, cq, cqe, 20 * 1000)) {
            return;
        }
    }
    g_assert_not_reached();
}

static void dp_fill(PibDev *d, uint64_t addr, size_t len, uint32_t seed)
{
    g_autofree uint8_t *buf = g_malloc(len);
    size_t i;

    for (i = 0; i < len; i++) {
        buf[i] = (i * 7 + seed * 13 + (i >> 8)) & 0xff;
    }
    qtest_memwrite(qts(d), addr, buf, len);
}

static void dp_assert_same(PibDev *da, uint64_t a, PibDev *db, uint64_t b,
                           size_t len)
{
    g_autofree uint8_t *x = g_malloc(len);
    g_autofree uint8_t *y = g_malloc(len);

    qtest_memread(qts(da), a, x, len);
    qtest_memread(qts(db), b, y, len);
    g_assert_cmpmem(x, len, y, len);
}

/* Async events of any object: skip until type/obj turns up. */
static bool dp_aeq_find(PibDev *d, uint8_t type, uint32_t obj)
{
    struct pib_aeqe e;

    while (pib_aeq_next(d, &e, TIMEOUT_US)) {
        if (e.type == type && le32_to_cpu(e.obj) == obj) {
            return true;
        }
    }
    return false;
}

static void dp_pair_up(TestPair *p)
{
    g_autofree char *args = NULL;
    PibDev *devs[2] = { &p->a, &p->b };
    uint64_t *ceqs[2] = { &p->ceq_a, &p->ceq_b };
    int i;

    p->dir = g_dir_make_tmp("pib-test-XXXXXX", NULL);
    p->path = g_build_filename(p->dir, "link.sock", NULL);
    args = g_strdup_printf(
        "-m 256M "
        "-chardev socket,id=la,path=%s,server=on,wait=off "
        "-chardev socket,id=lb,path=%s," PIB_CHR_RECONNECT_1S " "
        "-device pib-hca,addr=4.0,id=pa,chardev=la,lid=1 "
        "-device pib-hca,addr=5.0,id=pb,chardev=lb,lid=2", p->path, p->path);
    p->qs = pib_boot(args);
    pib_open(&p->a, p->qs, PIB_DEVFN_A);
    pib_open(&p->b, p->qs, PIB_DEVFN_B);
    for (i = 0; i < 2; i++) {
        pib_program_queues(devs[i], 16, 64);
        *ceqs[i] = dp_alloc(devs[i], 4096);
        wr(devs[i], PIB_REG_CEQ_DEPTH, 64);
        wr(devs[i], PIB_REG_CEQ_LO, (uint32_t)*ceqs[i]);
        wr(devs[i], PIB_REG_CEQ_HI, *ceqs[i] >> 32);
        wr(devs[i], PIB_REG_CONTROL, PIB_CTRL_ENABLE);
        g_assert_cmphex(rd(devs[i], PIB_REG_STATUS), ==, PIB_STATUS_READY);
    }
    pib_wait_port_state(&p->a, PIB_PORT_ACTIVE);
    pib_wait_port_state(&p->b, PIB_PORT_ACTIVE);
}

static void dp_pair_down(TestPair *p)
{
    pib_close(&p->a);
    pib_close(&p->b);
    qtest_shutdown(p->qs);
    g_unlink(p->path);
    g_rmdir(p->dir);
    g_free(p->path);
    g_free(p->dir);
}

/* One side of a connection: PD, MR over a buffer, CQs, a QP. */
typedef struct TestEnd {
    PibDev *d;
    uint32_t pdn;
    uint64_t buf;
    uint32_t buf_len;
    uint32_t key;
    TestCq scq, rcq;
    TestQp qp;
} TestEnd;

static void dp_end(PibDev *d, TestEnd *e, uint8_t type, uint32_t buf_len)
{
    memset(e, 0, sizeof(*e));
    e->d = d;
    e->pdn = dp_create_pd(d);
    e->buf_len = buf_len;
    e->buf = dp_alloc(d, buf_len);
    e->key = dp_reg_mr(d, e->pdn, DP_ALL_ACCESS, e->buf, buf_len);
    dp_create_cq(d, 64, &e->scq);
    dp_create_cq(d, 64, &e->rcq);
    dp_create_qp(d, type, e->pdn, &e->scq, &e->rcq, &e->qp);
}

/* Two ends, connected (RC/UC), each on its own HCA or both on one. */
static void dp_link_ends(TestEnd *x, uint16_t lid_x, TestEnd *y,
                         uint16_t lid_y)
{
    dp_connect(x->d, &x->qp, lid_y, y->qp.qpn);
    dp_connect(y->d, &y->qp, lid_x, x->qp.qpn);
}

static void dp_counters(PibDev *d, uint64_t c[PIB_CNT_MAX])
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_QUERY_COUNTERS,
        .resp_addr = cpu_to_le64(d->resp),
        .resp_len = cpu_to_le32(PIB_CNT_MAX * sizeof(uint64_t)),
    };
    int i;

    g_assert_cmpuint(pib_cmd(d, &cmd, NULL), ==, PIB_AQ_OK);
    qtest_memread(qts(d), d->resp, c, PIB_CNT_MAX * sizeof(uint64_t));
    for (i = 0; i < PIB_CNT_MAX; i++) {
        c[i] = le64_to_cpu(c[i]);
    }
}

static uint32_t dp_err_count(PibDev *d)
{
    return rd(d, PIB_REG_ERR_COUNT);
}

/* Objects and their admin commands: every field checked. */
static void test_dp_objects(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0");
    struct pib_device_attr dev_attr;
    struct pib_admin_cmd cmd;
    struct pib_qp_attr qa;
    PibDev d;
    uint32_t pdn, key1, key2, key3, errs = 0;
    uint64_t buf, pbl;
    TestCq cq;
    TestQp qp;

    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 16);

    /* What the data path implements, and nothing else. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_QUERY_DEVICE,
        .resp_addr = cpu_to_le64(d.resp),
        .resp_len = cpu_to_le32(sizeof(dev_attr)),
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_OK);
    qtest_memread(qts(&d), d.resp, &dev_attr, sizeof(dev_attr));
    g_assert_cmphex(le32_to_cpu(dev_attr.device_cap_flags), ==,
                    PIB_DEV_CAP_RC | PIB_DEV_CAP_RDMA | PIB_DEV_CAP_ATOMIC |
                    PIB_DEV_CAP_UC | PIB_DEV_CAP_UD | PIB_DEV_CAP_SRQ |
                    PIB_DEV_CAP_RC_RNR_NAK_GEN | PIB_DEV_CAP_MEM_WINDOW);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_srq), ==, 256);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_sge), ==, PIB_MAX_SGE);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_inline_data), ==,
                     PIB_MAX_INLINE_DATA);

    /* PD */
    pdn = dp_create_pd(&d);
    g_assert_cmpuint(pdn, !=, 0);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_PD, pdn + 1), ==,
                     PIB_AQ_BAD_RESOURCE);

    /* REG_MR: every field */
    buf = dp_alloc(&d, 3 * 4096);
    g_assert_cmpuint(dp_reg_mr_status(&d, pdn + 1, 0, buf, 4096, NULL), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_reg_mr_status(&d, pdn, 0x100, buf, 4096, NULL), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_reg_mr_status(&d, pdn, PIB_ACCESS_REMOTE_WRITE, buf,
                                      4096, NULL), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_reg_mr_status(&d, pdn, 0, buf, 0, NULL), ==,
                     PIB_AQ_BAD_PARAM);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_REG_MR,
        .in.reg_mr = {
            .pdn = cpu_to_le32(pdn),
            .iova = cpu_to_le64(buf + 100),
            .length = cpu_to_le64(8192),        /* spans 3 pages */
            .pbl_addr = cpu_to_le64(dp_pbl(&d, buf, 3)),
            .npages = cpu_to_le32(2),
        },
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.reg_mr.npages = cpu_to_le32(0xffffffff);
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.reg_mr.npages = cpu_to_le32(3);
    cmd.in.reg_mr.pbl_addr = cpu_to_le64(ADDR_OUTSIDE_RAM);
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_DMA_ERROR);
    pib_expect_guest_error(&d, &errs, PIB_GERR_DMA);
    pbl = dp_pbl(&d, buf, 3);
    qtest_writeq(qts(&d), pbl + 8, buf + 4096 + 8);     /* not page aligned */
    cmd.in.reg_mr.pbl_addr = cpu_to_le64(pbl);
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.reg_mr.length = cpu_to_le64(1ull << 40);     /* past max_mr_size */
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);

    /* Keys: index << 8 | a key byte that changes on each reuse. */
    key1 = dp_reg_mr(&d, pdn, PIB_ACCESS_LOCAL_WRITE, buf, 4096);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_PD, pdn), ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key1 ^ 1), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key1), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key1), ==,
                     PIB_AQ_BAD_RESOURCE);
    key2 = dp_reg_mr(&d, pdn, PIB_ACCESS_LOCAL_WRITE, buf, 4096);
    g_assert_cmphex(key2 >> 8, ==, key1 >> 8);
    g_assert_cmphex(key2, !=, key1);
    /* The kernel's physical MR: iova 0, no page list. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_REG_MR,
        .in.reg_mr = {
            .pdn = cpu_to_le32(pdn),
            .access = cpu_to_le32(PIB_ACCESS_LOCAL_WRITE),
            .length = cpu_to_le64(UINT64_MAX),
            .flags = cpu_to_le32(PIB_MR_F_PHYS),
        },
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_OK);
    cmd.in.reg_mr.iova = cpu_to_le64(4096);
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    key3 = dp_reg_mr(&d, pdn, 0, buf, 100);

    /* CREATE_CQ */
    g_assert_cmpuint(dp_create_cq_status(&d, 3, DP_UAR, &cq), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_cq_status(&d, 1, DP_UAR, &cq), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_cq_status(&d, 1u << 17, DP_UAR, &cq), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_cq_status(&d, 8, 5, &cq), ==,
                     PIB_AQ_BAD_PARAM);             /* UAR 5 not allocated */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_CQ,
        .in.create_cq = {
            .depth = cpu_to_le32(256),              /* 2 pages + 1 */
            .npages = cpu_to_le32(2),
            .pbl_addr = cpu_to_le64(pbl),
        },
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    dp_create_cq(&d, 8, &cq);

    /* CREATE_QP */
    g_assert_cmpuint(dp_create_qp_status(&d, PIB_QPT_SMI, pdn, &cq, &cq, 4, 4,
                                         DP_UAR, &qp), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_qp_status(&d, PIB_QPT_RC, pdn, &cq, &cq, 3, 4,
                                         DP_UAR, &qp), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_qp_status(&d, PIB_QPT_RC, pdn, &cq, &cq, 4,
                                         8192, DP_UAR, &qp), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_qp_status(&d, PIB_QPT_RC, pdn + 7, &cq, &cq, 4,
                                         4, DP_UAR, &qp), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_create_qp_status(&d, PIB_QPT_RC, pdn, &cq, &cq, 4, 4,
                                         9, &qp), ==, PIB_AQ_BAD_PARAM);
    dp_create_qp(&d, PIB_QPT_RC, pdn, &cq, &cq, &qp);
    g_assert_cmpuint(qp.qpn, >=, 2);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_CQ, cq.cqn), ==,
                     PIB_AQ_BUSY);

    /* QUERY_QP: RESET, and the capabilities of its rings */
    qa = dp_query_qp(&d, qp.qpn);
    g_assert_cmpuint(qa.qp_state, ==, PIB_QPS_RESET);
    g_assert_cmpuint(le32_to_cpu(qa.max_send_wr), ==, 16);
    g_assert_cmpuint(le32_to_cpu(qa.max_recv_wr), ==, 16);
    g_assert_cmpuint(le32_to_cpu(qa.max_send_sge), ==, 12);
    g_assert_cmpuint(le32_to_cpu(qa.max_recv_sge), ==, 3);
    g_assert_cmpuint(le32_to_cpu(qa.max_inline_data), ==, 192);

    /* MODIFY_QP: the IBTA transition table */
    g_assert_cmpuint(dp_modify_state(&d, qp.qpn, PIB_QPS_RTS), ==,
                     PIB_AQ_BAD_STATE);
    g_assert_cmpuint(dp_modify_state(&d, qp.qpn, PIB_QPS_ERR), ==,
                     PIB_AQ_BAD_STATE);
    g_assert_cmpuint(dp_modify_state(&d, qp.qpn, 9), ==, PIB_AQ_BAD_PARAM);
    qa = (struct pib_qp_attr) {                     /* no ACCESS_FLAGS */
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX |
                                 PIB_QP_PORT),
        .qp_state = PIB_QPS_INIT,
        .port_num = 1,
    };
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_PARAM);
    qa.attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX |
                               PIB_QP_PORT | PIB_QP_ACCESS_FLAGS |
                               PIB_QP_SQ_PSN);      /* not allowed here */
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_PARAM);
    qa.attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX |
                               PIB_QP_PORT | PIB_QP_ACCESS_FLAGS);
    qa.port_num = 2;
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_PARAM);
    qa.port_num = 1;
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_OK);
    qa = (struct pib_qp_attr) {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_AV | PIB_QP_PATH_MTU |
                                 PIB_QP_DEST_QPN | PIB_QP_RQ_PSN |
                                 PIB_QP_MAX_DEST_RD_ATOMIC |
                                 PIB_QP_MIN_RNR_TIMER),
        .qp_state = PIB_QPS_RTR,
        .path_mtu = 6,
        .dlid = cpu_to_le16(2),
        .dest_qp_num = cpu_to_le32(5),
    };
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_PARAM);
    qa.path_mtu = 5;
    qa.dlid = cpu_to_le16(0xc001);                  /* multicast */
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_PARAM);
    qa.dlid = cpu_to_le16(2);
    qa.max_dest_rd_atomic = 17;
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_PARAM);
    qa.max_dest_rd_atomic = 1;
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_OK);
    qa = dp_query_qp(&d, qp.qpn);
    g_assert_cmpuint(qa.qp_state, ==, PIB_QPS_RTR);
    g_assert_cmpuint(le16_to_cpu(qa.dlid), ==, 2);
    g_assert_cmpuint(le32_to_cpu(qa.dest_qp_num), ==, 5);
    qa = (struct pib_qp_attr) {                     /* the wrong CUR_STATE */
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_CUR_STATE),
        .qp_state = PIB_QPS_ERR,
        .cur_qp_state = PIB_QPS_RTS,
    };
    g_assert_cmpuint(dp_modify(&d, qp.qpn, &qa), ==, PIB_AQ_BAD_STATE);
    g_assert_cmpuint(dp_modify_state(&d, qp.qpn, PIB_QPS_ERR), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&d, qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&d, 999, PIB_QPS_RESET), ==,
                     PIB_AQ_BAD_RESOURCE);

    /* Tear down in order; each object freed once. */
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_QP, qp.qpn), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_QP, qp.qpn), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_CQ, cq.cqn), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key2), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DEREG_MR, key3), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_PD, pdn), ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_err_count(&d), ==, errs);

    /* A reset frees everything (the physical MR included). */
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_RESET);
    pib_enable(&d, 16, 16);
    g_assert_cmpuint(dp_obj_cmd(&d, PIB_CMD_DESTROY_PD, pdn), ==,
                     PIB_AQ_BAD_RESOURCE);

    pib_close(&d);
    qtest_shutdown(qs);
}

/* RC SEND/RECV between the two HCAs, and loopback on one of them. */
static void test_dp_send_recv(void)
{
    static const uint32_t sizes[] = { 0, 1, 1024, 4097, 10000 };
    TestPair p;
    TestEnd x, y, l1, l2;
    struct pib_cqe cqe;
    struct pib_sge sge[3];
    struct pib_send_wqe wqe;
    struct pib_ceqe ceqe;
    struct pib_sge rsg, ssg;
    uint8_t inline_data[150], got[150], imm[4] = { 0xde, 0xad, 0xbe, 0xef };
    uint8_t guard;
    size_t i;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 64 * 1024);
    dp_end(&p.b, &y, PIB_QPT_RC, 64 * 1024);
    dp_link_ends(&x, 1, &y, 2);

    /* One message per size (MTU 1024): the bytes, and nothing beyond. */
    for (i = 0; i < G_N_ELEMENTS(sizes); i++) {
        qtest_memset(qts(&p.b), y.buf, 0x5a, 16384 + 1);
        dp_fill(&p.a, x.buf, sizes[i], i);
        sge[0] = dp_sge(y.buf, 16384, y.key);
        dp_post_recv(&p.b, &y.qp, 0x100 + i, sge, 1);
        sge[0] = dp_sge(x.buf, sizes[i], x.key);
        dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x200 + i,
                     sge, 1, 0, 0);
        dp_expect(&p.a, &x.scq, 0x200 + i, PIB_WC_SUCCESS, PIB_CQE_SEND,
                  &cqe);
        g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, x.qp.qpn);
        g_assert_cmpuint(le16_to_cpu(cqe.wqe_index), ==, x.qp.sq_pi - 1);
        dp_expect(&p.b, &y.rcq, 0x100 + i, PIB_WC_SUCCESS, PIB_CQE_RECV,
                  &cqe);
        g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, sizes[i]);
        g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, y.qp.qpn);
        g_assert_cmpuint(cqe.flags & PIB_CQE_F_IMM, ==, 0);
        dp_assert_same(&p.a, x.buf, &p.b, y.buf, sizes[i]);
        guard = qtest_readb(qts(&p.b), y.buf + sizes[i]);
        g_assert_cmphex(guard, ==, 0x5a);
    }

    /* Gather 3 SGEs into a receive of 2; SEND with immediate data. */
    dp_fill(&p.a, x.buf, 8192, 77);
    sge[0] = dp_sge(y.buf + 1, 1000, y.key);
    sge[1] = dp_sge(y.buf + 4000, 3000, y.key);
    dp_post_recv(&p.b, &y.qp, 0x300, sge, 2);
    sge[0] = dp_sge(x.buf + 3, 500, x.key);
    sge[1] = dp_sge(x.buf + 2000, 1200, x.key);
    sge[2] = dp_sge(x.buf + 5000, 300, x.key);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_SEND_IMM,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 3,
        .wr_id = cpu_to_le64(0x301),
    };
    memcpy(&wqe.imm_inv, imm, 4);
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge), true);
    dp_expect(&p.a, &x.scq, 0x301, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x300, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 2000);
    g_assert_cmpuint(cqe.flags & PIB_CQE_F_IMM, ==, PIB_CQE_F_IMM);
    g_assert_cmpmem(&cqe.imm_inv, 4, imm, 4);       /* raw, as on the wire */
    dp_assert_same(&p.a, x.buf + 3, &p.b, y.buf + 1, 500);
    dp_assert_same(&p.a, x.buf + 2000, &p.b, y.buf + 501, 500);
    dp_assert_same(&p.a, x.buf + 2500, &p.b, y.buf + 4000, 700);
    dp_assert_same(&p.a, x.buf + 5000, &p.b, y.buf + 4700, 300);

    /* Inline data; an unsignaled SEND gets no CQE (the next one retires it) */
    for (i = 0; i < sizeof(inline_data); i++) {
        inline_data[i] = i ^ 0x33;
    }
    sge[0] = dp_sge(y.buf, 4096, y.key);
    dp_post_recv(&p.b, &y.qp, 0x400, sge, 1);
    dp_post_recv(&p.b, &y.qp, 0x401, sge, 1);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_SEND,
        .flags = PIB_WQE_F_INLINE,
        .wr_id = cpu_to_le64(0x402),
        .inline_len = cpu_to_le32(sizeof(inline_data)),
    };
    dp_post_send_raw(&p.a, &x.qp, &wqe, inline_data, sizeof(inline_data),
                     false);
    sge[0] = dp_sge(x.buf, 10, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x403, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x403, PIB_WC_SUCCESS, PIB_CQE_SEND, &cqe);
    g_assert_cmpuint(le16_to_cpu(cqe.wqe_index), ==, x.qp.sq_pi - 1);
    dp_expect(&p.b, &y.rcq, 0x400, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, sizeof(inline_data));
    dp_expect(&p.b, &y.rcq, 0x401, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    dp_expect_none(&p.a, &x.scq);
    qtest_memread(qts(&p.b), y.buf + 10, got, sizeof(got) - 10);
    g_assert_cmpmem(got, sizeof(got) - 10, inline_data + 10,
                    sizeof(got) - 10);

    /*
     * Completion events: armed for solicited completions only, an ordinary
     * SEND raises nothing; a solicited one writes a CEQE naming the CQ and
     * raises MSI-X vector 2.
     */
    rsg = dp_sge(y.buf, 4096, y.key);
    ssg = dp_sge(x.buf, 10, x.key);
    g_assert_false(qpci_msix_pending(p.b.dev, PIB_MSIX_VEC_CEQ));
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_CQ_DB,
                y.rcq.cqn | PIB_DB_CQ_ARM | PIB_DB_CQ_SOLICITED, y.rcq.ci);
    dp_post_recv(&p.b, &y.qp, 0x500, &rsg, 1);
    dp_post_recv(&p.b, &y.qp, 0x501, &rsg, 1);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x502, &ssg, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x502, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x500, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    qtest_memread(qts(&p.b), p.ceq_b, &ceqe, sizeof(ceqe));
    g_assert_cmpuint(ceqe.flags & PIB_CEQE_F_PHASE, ==, 0);
    g_assert_false(qpci_msix_pending(p.b.dev, PIB_MSIX_VEC_CEQ));
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND,
                 PIB_WQE_F_SIGNALED | PIB_WQE_F_SOLICITED, 0x503, &ssg, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x503, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x501, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    qtest_memread(qts(&p.b), p.ceq_b, &ceqe, sizeof(ceqe));
    g_assert_cmpuint(ceqe.flags & PIB_CEQE_F_PHASE, ==, PIB_CEQE_F_PHASE);
    g_assert_cmpuint(le32_to_cpu(ceqe.cqn), ==, y.rcq.cqn);
    g_assert_true(qpci_msix_pending(p.b.dev, PIB_MSIX_VEC_CEQ));
    wr(&p.b, PIB_REG_CEQ_DB, 1);
    /* Arming "next" with an unread CQE behind the consumer index: at once. */
    dp_post_recv(&p.b, &y.qp, 0x505, &rsg, 1);
    dp_post_recv(&p.b, &y.qp, 0x507, &rsg, 1);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, 0, 0x504, &ssg, 1, 0, 0);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x506, &ssg, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x506, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_doorbell(&p.a, DP_UAR, PIB_UAR_CQ_DB, x.scq.cqn | PIB_DB_CQ_ARM,
                x.scq.ci - 1);
    {
        gint64 end = g_get_monotonic_time() + TIMEOUT_US;

        do {
            qtest_memread(qts(&p.a), p.ceq_a, &ceqe, sizeof(ceqe));
            g_assert_cmpint(g_get_monotonic_time(), <, end);
        } while (!(ceqe.flags & PIB_CEQE_F_PHASE));
        g_assert_cmpuint(le32_to_cpu(ceqe.cqn), ==, x.scq.cqn);
    }
    dp_expect(&p.b, &y.rcq, 0x505, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    dp_expect(&p.b, &y.rcq, 0x507, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);

    /* Loopback: two QPs of HCA A, talking through A's own LID. */
    dp_end(&p.a, &l1, PIB_QPT_RC, 16384);
    dp_end(&p.a, &l2, PIB_QPT_RC, 16384);
    dp_link_ends(&l1, 1, &l2, 1);
    dp_fill(&p.a, l1.buf, 5000, 9);
    sge[0] = dp_sge(l2.buf, 8192, l2.key);
    dp_post_recv(&p.a, &l2.qp, 0x600, sge, 1);
    sge[0] = dp_sge(l1.buf, 5000, l1.key);
    dp_post_send(&p.a, &l1.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x601, sge, 1,
                 0, 0);
    dp_expect(&p.a, &l1.scq, 0x601, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.a, &l2.rcq, 0x600, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 5000);
    dp_assert_same(&p.a, l1.buf, &p.a, l2.buf, 5000);

    /* Nothing of this was a guest error. */
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/* Local errors, flushes, doorbell rules. */
static void test_dp_errors(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_cqe cqe;
    struct pib_sge sge[1];
    struct pib_send_wqe wqe;
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe acqe;
    uint32_t errs_a = 0, uar;
    int i;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);

    /* A doorbell for our QP rung on another UAR page: counted, ignored. */
    cmd = (struct pib_admin_cmd) { .opcode = PIB_CMD_ALLOC_UAR };
    g_assert_cmpuint(pib_cmd(&p.a, &cmd, &acqe), ==, PIB_AQ_OK);
    uar = le32_to_cpu(acqe.result0);
    g_assert_cmpuint(uar, !=, DP_UAR);
    dp_doorbell(&p.a, uar, PIB_UAR_SQ_DB, x.qp.qpn, 1);
    pib_expect_guest_error(&p.a, &errs_a, PIB_GERR_UAR_DB_BAD_OBJ);
    dp_doorbell(&p.a, uar, PIB_UAR_CQ_DB, x.scq.cqn | PIB_DB_CQ_ARM, 0);
    pib_expect_guest_error(&p.a, &errs_a, PIB_GERR_UAR_DB_BAD_OBJ);
    /*
     * ... and a producer index more than the depth ahead, or a CQ consumer
     * index past the producer.
     */
    dp_doorbell(&p.a, DP_UAR, PIB_UAR_SQ_DB, x.qp.qpn, 17);
    pib_expect_guest_error(&p.a, &errs_a, PIB_GERR_UAR_DB_RANGE);
    dp_doorbell(&p.a, DP_UAR, PIB_UAR_CQ_DB, x.scq.cqn, 3);
    pib_expect_guest_error(&p.a, &errs_a, PIB_GERR_UAR_DB_RANGE);
    /* The page still owns nothing, so it can go. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_DEALLOC_UAR, .in.uar.uar = cpu_to_le32(uar),
    };
    g_assert_cmpuint(pib_cmd(&p.a, &cmd, NULL), ==, PIB_AQ_OK);
    dp_expect_none(&p.a, &x.scq);

    /* A SEND with a bad lkey (key byte flipped): LOC_PROT_ERR, QP to ERR */
    sge[0] = dp_sge(y.buf, 4096, y.key);
    dp_post_recv(&p.b, &y.qp, 0x10, sge, 1);
    sge[0] = dp_sge(x.buf, 100, x.key ^ 0xff);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x11, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x11, PIB_WC_LOC_PROT_ERR, PIB_CQE_SEND, NULL);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    /* ... and what is posted afterwards is flushed, opcode and all. */
    sge[0] = dp_sge(x.buf, 8, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, 0, 0x12, sge, 1, y.buf,
                 y.key);
    dp_expect(&p.a, &x.scq, 0x12, PIB_WC_WR_FLUSH_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    dp_post_recv(&p.a, &x.qp, 0x13, sge, 1);
    dp_expect(&p.a, &x.rcq, 0x13, PIB_WC_WR_FLUSH_ERR, PIB_CQE_RECV, NULL);
    dp_expect_none(&p.b, &y.rcq);   /* nothing went on the wire */

    /* MODIFY to ERR flushes the posted receives, in order. */
    for (i = 0; i < 3; i++) {
        dp_post_recv(&p.b, &y.qp, 0x20 + i, sge, 1);
    }
    g_assert_cmpuint(dp_modify_state(&p.b, y.qp.qpn, PIB_QPS_ERR), ==,
                     PIB_AQ_OK);
    dp_expect(&p.b, &y.rcq, 0x10, PIB_WC_WR_FLUSH_ERR, PIB_CQE_RECV, NULL);
    for (i = 0; i < 3; i++) {
        dp_expect(&p.b, &y.rcq, 0x20 + i, PIB_WC_WR_FLUSH_ERR, PIB_CQE_RECV,
                  &cqe);
        g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, y.qp.qpn);
    }
    /* RESET starts the rings over at index 0. */
    g_assert_cmpuint(dp_modify_state(&p.a, x.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&p.b, y.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x.qp.sq_pi = x.qp.rq_pi = y.qp.sq_pi = y.qp.rq_pi = 0;
    dp_link_ends(&x, 1, &y, 2);

    /* A malformed WQE: unknown opcode -> LOC_QP_OP_ERR and a guest error */
    wqe = (struct pib_send_wqe) {
        .opcode = 0x42,
        .flags = PIB_WQE_F_SIGNALED,
        .wr_id = cpu_to_le64(0x30),
    };
    dp_post_send_raw(&p.a, &x.qp, &wqe, NULL, 0, true);
    dp_expect(&p.a, &x.scq, 0x30, PIB_WC_LOC_QP_OP_ERR, PIB_CQE_SEND, NULL);
    pib_expect_guest_error(&p.a, &errs_a, PIB_GERR_WQE);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    g_assert_cmpuint(dp_modify_state(&p.a, x.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&p.b, y.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x.qp.sq_pi = x.qp.rq_pi = y.qp.sq_pi = y.qp.rq_pi = 0;
    dp_link_ends(&x, 1, &y, 2);

    /* More SGEs than the slot holds: LOC_LEN_ERR, a guest error too. */
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_SEND,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 13,
        .wr_id = cpu_to_le64(0x31),
    };
    dp_post_send_raw(&p.a, &x.qp, &wqe, NULL, 0, true);
    dp_expect(&p.a, &x.scq, 0x31, PIB_WC_LOC_LEN_ERR, PIB_CQE_SEND, NULL);
    pib_expect_guest_error(&p.a, &errs_a, PIB_GERR_WQE);
    g_assert_cmpuint(dp_modify_state(&p.a, x.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&p.b, y.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x.qp.sq_pi = x.qp.rq_pi = y.qp.sq_pi = y.qp.rq_pi = 0;
    dp_link_ends(&x, 1, &y, 2);

    /*
     * A receive buffer too small: the receive fails with LOC_LEN_ERR, the
     * requester hears "invalid request", both QPs end in ERR.
     */
    sge[0] = dp_sge(y.buf, 16, y.key);
    dp_post_recv(&p.b, &y.qp, 0x40, sge, 1);
    sge[0] = dp_sge(x.buf, 100, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x41, sge, 1,
                 0, 0);
    dp_expect(&p.b, &y.rcq, 0x40, PIB_WC_LOC_LEN_ERR, PIB_CQE_RECV, NULL);
    dp_expect(&p.a, &x.scq, 0x41, PIB_WC_REM_INV_REQ_ERR, PIB_CQE_SEND, NULL);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    g_assert_cmpuint(dp_query_qp(&p.b, y.qp.qpn).qp_state, ==, PIB_QPS_ERR);

    /* DESTROY_QP flushes first. */
    sge[0] = dp_sge(x.buf, 16, x.key);
    dp_post_recv(&p.a, &x.qp, 0x50, sge, 1);
    g_assert_cmpuint(dp_obj_cmd(&p.a, PIB_CMD_DESTROY_QP, x.qp.qpn), ==,
                     PIB_AQ_OK);
    dp_expect(&p.a, &x.rcq, 0x50, PIB_WC_WR_FLUSH_ERR, PIB_CQE_RECV, NULL);

    g_assert_cmpuint(dp_err_count(&p.a), ==, errs_a);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/* RNR: a SEND before the receive is posted; retried, or given up. */
static void test_dp_rnr(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    int i;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);         /* rnr_retry 7: forever */

    dp_fill(&p.a, x.buf, 3000, 5);
    sge[0] = dp_sge(x.buf, 3000, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x1, sge, 1,
                 0, 0);
    /* RNR NAKs while the virtual clock runs and nobody posts a receive */
    for (i = 0; i < 5; i++) {
        dp_expect_none(&p.a, &x.scq);
        qtest_clock_step(qts(&p.a), 1000 * 1000);
    }
    sge[0] = dp_sge(y.buf, 8192, y.key);
    dp_post_recv(&p.b, &y.qp, 0x2, sge, 1);
    dp_step_until_cqe(&p.a, &x.scq, &cqe, 1000 * 1000, 500);
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x1);
    g_assert_cmpuint(cqe.status, ==, PIB_WC_SUCCESS);
    dp_expect(&p.b, &y.rcq, 0x2, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf, 3000);

    /* rnr_retry 0: the first RNR NAK is final. */
    g_assert_cmpuint(dp_modify_state(&p.a, x.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&p.b, y.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x.qp.sq_pi = x.qp.rq_pi = y.qp.sq_pi = y.qp.rq_pi = 0;
    dp_connect_ex(&p.a, &x.qp, 2, y.qp.qpn, DP_MTU_1024, 14, 7, 0);
    dp_connect(&p.b, &y.qp, 1, x.qp.qpn);
    sge[0] = dp_sge(x.buf, 10, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x3, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x3, PIB_WC_RNR_RETRY_EXC_ERR, PIB_CQE_SEND,
              NULL);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    dp_pair_down(&p);
}

/*
 * Retransmission: a peer QP that drops everything (left in INIT).  The ACK
 * timeout fires retry_cnt + 1 times, then RETRY_EXC_ERR.
 */
static void test_dp_retry(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX |
                                 PIB_QP_PORT | PIB_QP_ACCESS_FLAGS),
        .qp_state = PIB_QPS_INIT,
        .port_num = 1,
    };
    uint64_t cnt[PIB_CNT_MAX];

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    g_assert_cmpuint(dp_modify(&p.b, y.qp.qpn, &a), ==, PIB_AQ_OK);
    /* timeout 12: 16.8 ms; retry_cnt 2 */
    dp_connect_ex(&p.a, &x.qp, 2, y.qp.qpn, DP_MTU_1024, 12, 2, 7);
    sge[0] = dp_sge(x.buf, 5000, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x1, sge, 1,
                 0, 0);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x2, sge, 1,
                 0, 0);
    dp_step_until_cqe(&p.a, &x.scq, &cqe, 20 * 1000 * 1000, 500);
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x1);
    g_assert_cmpuint(cqe.status, ==, PIB_WC_RETRY_EXC_ERR);
    dp_counters(&p.a, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_RETRY_TIMEOUTS], ==, 3);   /* 1 + retry_cnt */
    g_assert_cmpuint(cnt[PIB_CNT_RETRANSMITS], ==, 2 * 2 * 5);
    dp_expect(&p.a, &x.scq, 0x2, PIB_WC_WR_FLUSH_ERR, PIB_CQE_SEND, NULL);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    dp_pair_down(&p);
}

/* RDMA WRITE (+IMM), READ, atomics, remote access errors. */
static void test_dp_rdma(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge[2];
    struct pib_send_wqe wqe;
    struct pib_cqe cqe;
    uint8_t imm[4] = { 1, 2, 3, 4 };
    g_autofree uint8_t *before = g_malloc(16384);
    g_autofree uint8_t *after = g_malloc(16384);
    uint64_t ctr;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);

    /* WRITE 5000 bytes from two SGEs to an odd remote address */
    dp_fill(&p.a, x.buf, 8192, 21);
    sge[0] = dp_sge(x.buf + 1, 3000, x.key);
    sge[1] = dp_sge(x.buf + 4000, 2000, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x1,
                 sge, 2, y.buf + 333, y.key);
    dp_expect(&p.a, &x.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_assert_same(&p.a, x.buf + 1, &p.b, y.buf + 333, 3000);
    dp_assert_same(&p.a, x.buf + 4000, &p.b, y.buf + 3333, 2000);
    dp_expect_none(&p.b, &y.rcq);       /* a plain WRITE consumes nothing */

    /* WRITE with immediate consumes a receive WQE. */
    sge[1] = dp_sge(y.buf, 16, y.key);
    dp_post_recv(&p.b, &y.qp, 0x2, &sge[1], 1);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_RDMA_WRITE_IMM,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 1,
        .wr_id = cpu_to_le64(0x3),
        .remote_addr = cpu_to_le64(y.buf + 8192),
        .rkey = cpu_to_le32(y.key),
    };
    memcpy(&wqe.imm_inv, imm, 4);
    sge[0] = dp_sge(x.buf, 2500, x.key);
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x3, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_expect(&p.b, &y.rcq, 0x2, PIB_WC_SUCCESS, PIB_CQE_RECV_RDMA_IMM, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 2500);
    g_assert_cmpuint(cqe.flags & PIB_CQE_F_IMM, ==, PIB_CQE_F_IMM);
    g_assert_cmpmem(&cqe.imm_inv, 4, imm, 4);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 8192, 2500);

    /* READ 6000 bytes back into two SGEs. */
    dp_fill(&p.b, y.buf + 100, 6000, 99);
    qtest_memset(qts(&p.a), x.buf, 0, 16384);
    sge[0] = dp_sge(x.buf + 10, 2000, x.key);
    sge[1] = dp_sge(x.buf + 5000, 4000, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x4, sge,
                 2, y.buf + 100, y.key);
    dp_expect(&p.a, &x.scq, 0x4, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 6000);
    dp_assert_same(&p.a, x.buf + 10, &p.b, y.buf + 100, 2000);
    dp_assert_same(&p.a, x.buf + 5000, &p.b, y.buf + 2100, 4000);
    g_assert_cmphex(qtest_readb(qts(&p.a), x.buf + 9), ==, 0);
    g_assert_cmphex(qtest_readb(qts(&p.a), x.buf + 9000), ==, 0);

    /* Atomics on a little-endian counter: FA, CS that matches, one that not */
    qtest_writeq(qts(&p.b), y.buf + 64, 100);
    sge[0] = dp_sge(x.buf + 8, 8, x.key);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_ATOMIC_FA,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 1,
        .wr_id = cpu_to_le64(0x5),
        .remote_addr = cpu_to_le64(y.buf + 64),
        .rkey = cpu_to_le32(y.key),
        .compare_add = cpu_to_le64(5),
    };
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x5, PIB_WC_SUCCESS, PIB_CQE_FETCH_ADD, NULL);
    g_assert_cmpuint(qtest_readq(qts(&p.a), x.buf + 8), ==, 100);
    g_assert_cmpuint(qtest_readq(qts(&p.b), y.buf + 64), ==, 105);
    wqe.opcode = PIB_WQE_ATOMIC_CS;
    wqe.wr_id = cpu_to_le64(0x6);
    wqe.compare_add = cpu_to_le64(105);
    wqe.swap = cpu_to_le64(1000);
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x6, PIB_WC_SUCCESS, PIB_CQE_COMP_SWAP, NULL);
    g_assert_cmpuint(qtest_readq(qts(&p.a), x.buf + 8), ==, 105);
    g_assert_cmpuint(qtest_readq(qts(&p.b), y.buf + 64), ==, 1000);
    wqe.wr_id = cpu_to_le64(0x7);
    wqe.swap = cpu_to_le64(7);
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x7, PIB_WC_SUCCESS, PIB_CQE_COMP_SWAP, NULL);
    g_assert_cmpuint(qtest_readq(qts(&p.a), x.buf + 8), ==, 1000);
    ctr = qtest_readq(qts(&p.b), y.buf + 64);
    g_assert_cmpuint(ctr, ==, 1000);

    /* A WRITE with a bad rkey: REM_ACCESS_ERR, target memory unchanged. */
    qtest_memread(qts(&p.b), y.buf, before, 16384);
    sge[0] = dp_sge(x.buf, 3000, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x8,
                 sge, 1, y.buf, y.key ^ 0x80);
    dp_expect(&p.a, &x.scq, 0x8, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    qtest_memread(qts(&p.b), y.buf, after, 16384);
    g_assert_cmpmem(before, 16384, after, 16384);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    g_assert_cmpuint(dp_query_qp(&p.b, y.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    g_assert_true(dp_aeq_find(&p.b, PIB_AE_QP_ACCESS_ERR, y.qp.qpn));

    /* A misaligned atomic: invalid request. */
    g_assert_cmpuint(dp_modify_state(&p.a, x.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(&p.b, y.qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x.qp.sq_pi = x.qp.rq_pi = y.qp.sq_pi = y.qp.rq_pi = 0;
    dp_link_ends(&x, 1, &y, 2);
    wqe.opcode = PIB_WQE_ATOMIC_FA;
    wqe.wr_id = cpu_to_le64(0x9);
    wqe.remote_addr = cpu_to_le64(y.buf + 68);
    sge[0] = dp_sge(x.buf + 8, 8, x.key);
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x9, PIB_WC_REM_INV_REQ_ERR, PIB_CQE_FETCH_ADD,
              NULL);
    g_assert_cmpuint(qtest_readq(qts(&p.b), y.buf + 64), ==, 1000);

    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/* UD: Q_Keys, the GRH space, source QP and LID in the CQE; and UC. */
static void test_dp_ud_uc(void)
{
    TestPair p;
    TestEnd x, y, u1, u2;
    struct pib_sge sge[1];
    struct pib_send_wqe wqe;
    struct pib_cqe cqe;
    struct pib_port_attr attr;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_UD, 16384);
    dp_end(&p.b, &y, PIB_QPT_UD, 16384);
    dp_ud_ready(&p.a, &x.qp, 0x1111);
    dp_ud_ready(&p.b, &y.qp, 0x2222);

    dp_fill(&p.a, x.buf, 1000, 3);
    qtest_memset(qts(&p.b), y.buf, 0xee, 2048);
    sge[0] = dp_sge(y.buf, 2048, y.key);
    dp_post_recv(&p.b, &y.qp, 0x1, sge, 1);
    sge[0] = dp_sge(x.buf, 1000, x.key);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_SEND,
        .flags = PIB_WQE_F_SIGNALED,
        .num_sge = 1,
        .wr_id = cpu_to_le64(0x2),
        .ud_qpn = cpu_to_le32(y.qp.qpn),
        .ud_qkey = cpu_to_le32(0x2222),
        .ud_dlid = cpu_to_le16(2),
    };
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x1, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 40 + 1000);
    g_assert_cmpuint(le32_to_cpu(cqe.src_qp), ==, x.qp.qpn);
    g_assert_cmpuint(le16_to_cpu(cqe.slid), ==, 1);
    g_assert_cmpuint(cqe.flags & PIB_CQE_F_GRH, ==, 0);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 40, 1000);
    g_assert_cmphex(qtest_readb(qts(&p.b), y.buf), ==, 0xee);  /* no GRH */

    /* The wrong Q_Key: dropped and counted; the send still completes. */
    dp_post_recv(&p.b, &y.qp, 0x3, sge, 1);
    wqe.wr_id = cpu_to_le64(0x4);
    wqe.ud_qkey = cpu_to_le32(0x2223);
    dp_post_send_raw(&p.a, &x.qp, &wqe, sge, sizeof(sge[0]), true);
    dp_expect(&p.a, &x.scq, 0x4, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect_none(&p.b, &y.rcq);
    g_assert_cmpuint(pib_query_port(&p.b, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(attr.qkey_viol_cntr), ==, 1);

    /* UC: SEND and WRITE, no ACKs. */
    dp_end(&p.a, &u1, PIB_QPT_UC, 16384);
    dp_end(&p.b, &u2, PIB_QPT_UC, 16384);
    dp_link_ends(&u1, 1, &u2, 2);
    dp_fill(&p.a, u1.buf, 4000, 8);
    sge[0] = dp_sge(u2.buf, 8192, u2.key);
    dp_post_recv(&p.b, &u2.qp, 0x10, sge, 1);
    sge[0] = dp_sge(u1.buf, 4000, u1.key);
    dp_post_send(&p.a, &u1.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x11, sge, 1,
                 0, 0);
    dp_expect(&p.a, &u1.scq, 0x11, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &u2.rcq, 0x10, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 4000);
    dp_assert_same(&p.a, u1.buf, &p.b, u2.buf, 4000);
    dp_post_send(&p.a, &u1.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x12,
                 sge, 1, u2.buf + 8192, u2.key);
    dp_expect(&p.a, &u1.scq, 0x12, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    /* No ACK tells when it landed: wait for the bytes. */
    {
        gint64 end = g_get_monotonic_time() + TIMEOUT_US;

        while (qtest_readb(qts(&p.b), u2.buf + 8192 + 3999) !=
               qtest_readb(qts(&p.a), u1.buf + 3999)) {
            g_assert_cmpint(g_get_monotonic_time(), <, end);
            g_usleep(1000);
        }
    }
    dp_assert_same(&p.a, u1.buf, &p.b, u2.buf + 8192, 4000);
    /* READ is not a UC operation: a malformed WQE. */
    dp_post_send(&p.a, &u1.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x13,
                 sge, 1, u2.buf, u2.key);
    dp_expect(&p.a, &u1.scq, 0x13, PIB_WC_LOC_QP_OP_ERR, PIB_CQE_RDMA_READ,
              NULL);
    g_assert_cmpuint(rd(&p.a, PIB_REG_ERR_LAST), ==, PIB_GERR_WQE);
    dp_pair_down(&p);
}

/* More completions than a CQ holds, nobody polling: CQ_ERR. */
static void test_dp_cq_overflow(void)
{
    TestPair p;
    TestEnd x;
    TestCq small;
    TestQp qp;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    int i;

    dp_pair_up(&p);
    dp_end(&p.b, &x, PIB_QPT_RC, 4096);
    dp_create_cq(&p.b, 2, &small);
    dp_create_qp(&p.b, PIB_QPT_RC, x.pdn, &x.scq, &small, &qp);
    dp_connect(&p.b, &qp, 1, 77);
    sge[0] = dp_sge(x.buf, 64, x.key);
    for (i = 0; i < 3; i++) {
        dp_post_recv(&p.b, &qp, 0x10 + i, sge, 1);
    }
    g_assert_cmpuint(dp_modify_state(&p.b, qp.qpn, PIB_QPS_ERR), ==,
                     PIB_AQ_OK);
    g_assert_true(dp_aeq_find(&p.b, PIB_AE_CQ_ERR, small.cqn));
    /* The two that fitted are there; the third was lost, not misplaced. */
    g_assert_true(dp_poll(&p.b, &small, &cqe, TIMEOUT_US));
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x10);
    g_assert_true(dp_poll(&p.b, &small, &cqe, TIMEOUT_US));
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x11);
    dp_expect_none(&p.b, &small);
    dp_pair_down(&p);
}

/* SRQ: two QPs share one queue of receives; the limit event; LAST_WQE. */
static void test_dp_srq(void)
{
    TestPair p;
    TestEnd x1, x2, y;
    TestQp q1, q2, bad;
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe acqe;
    struct pib_sge sge[1];
    struct pib_recv_wqe rw;
    struct pib_cqe cqe;
    uint64_t ring;
    uint32_t srqn, i, pi = 0;

    dp_pair_up(&p);
    dp_end(&p.a, &x1, PIB_QPT_RC, 8192);
    dp_end(&p.a, &x2, PIB_QPT_RC, 8192);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);

    /* An SRQ of 8 receives of up to 3 SGEs (64-byte slots); checks first. */
    ring = dp_alloc(&p.b, 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_SRQ,
        .in.create_srq = {
            .pdn = cpu_to_le32(y.pdn),
            .depth = cpu_to_le32(8),
            .stride_log = 6,
            .limit = cpu_to_le32(8),                /* not below depth */
            .uar = cpu_to_le32(DP_UAR),
            .npages = cpu_to_le32(1),
            .pbl_addr = cpu_to_le64(dp_pbl(&p.b, ring, 1)),
        },
    };
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.create_srq.limit = 0;
    cmd.in.create_srq.stride_log = 3;
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.create_srq.stride_log = 6;
    cmd.in.create_srq.depth = cpu_to_le32(6);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.create_srq.depth = cpu_to_le32(8);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    srqn = le32_to_cpu(acqe.result0);

    /* QPs on it have no RQ; one that asks for both is refused. */
    g_assert_cmpuint(dp_create_qp_ex(&p.b, PIB_QPT_RC, y.pdn, &y.scq, &y.rcq,
                                     16, 16, DP_UAR, srqn, &bad), ==,
                     PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(dp_create_qp_ex(&p.b, PIB_QPT_RC, y.pdn, &y.scq, &y.rcq,
                                     16, 0, DP_UAR, srqn + 1, &bad), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_create_qp_ex(&p.b, PIB_QPT_RC, y.pdn, &y.scq, &y.rcq,
                                     16, 0, DP_UAR, srqn, &q1), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_create_qp_ex(&p.b, PIB_QPT_RC, y.pdn, &y.scq, &y.rcq,
                                     16, 0, DP_UAR, srqn, &q2), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_SRQ, srqn), ==,
                     PIB_AQ_BUSY);
    dp_connect(&p.a, &x1.qp, 2, q1.qpn);
    dp_connect(&p.b, &q1, 1, x1.qp.qpn);
    dp_connect(&p.a, &x2.qp, 2, q2.qpn);
    dp_connect(&p.b, &q2, 1, x2.qp.qpn);

    /* Four receives, 1 KiB each, posted with one SRQ doorbell. */
    for (i = 0; i < 4; i++) {
        rw = (struct pib_recv_wqe) {
            .wr_id = cpu_to_le64(0x70 + i),
            .num_sge = 1,
        };
        sge[0] = dp_sge(y.buf + i * 1024, 1024, y.key);
        qtest_memwrite(qts(&p.b), ring + i * 64, &rw, sizeof(rw));
        qtest_memwrite(qts(&p.b), ring + i * 64 + 16, sge, sizeof(sge));
    }
    pi = 4;
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_SRQ_DB, srqn, pi);
    dp_doorbell(&p.b, DP_UAR, PIB_UAR_SRQ_DB, srqn, pi + 8);   /* too far */
    g_assert_cmpuint(rd(&p.b, PIB_REG_ERR_LAST), ==, PIB_GERR_UAR_DB_RANGE);

    /* Each QP takes the next one, whichever it is. */
    dp_fill(&p.a, x1.buf, 100, 1);
    dp_fill(&p.a, x2.buf, 200, 2);
    sge[0] = dp_sge(x1.buf, 100, x1.key);
    dp_post_send(&p.a, &x1.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x1, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x1.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x70, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, q1.qpn);
    g_assert_cmpuint(le16_to_cpu(cqe.wqe_index), ==, 0);
    sge[0] = dp_sge(x2.buf, 200, x2.key);
    dp_post_send(&p.a, &x2.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x2, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x2.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x71, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, q2.qpn);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 200);
    dp_assert_same(&p.a, x2.buf, &p.b, y.buf + 1024, 200);

    /* The limit: 2 left; armed at 2, the next take raises SRQ_LIMIT once. */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_MODIFY_SRQ,
        .in.modify_srq = {
            .srqn = cpu_to_le32(srqn),
            .attr_mask = cpu_to_le32(PIB_SRQ_ATTR_MAX_WR),
            .max_wr = cpu_to_le32(16),
        },
    };
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.modify_srq.attr_mask = cpu_to_le32(PIB_SRQ_ATTR_LIMIT);
    cmd.in.modify_srq.limit = cpu_to_le32(2);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_OK);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_QUERY_SRQ, .in.obj.num = cpu_to_le32(srqn),
    };
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(acqe.result0), ==, 2);
    g_assert_cmpuint(le32_to_cpu(acqe.result1), ==, 8);
    sge[0] = dp_sge(x1.buf, 10, x1.key);
    dp_post_send(&p.a, &x1.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x3, sge, 1,
                 0, 0);
    dp_expect(&p.b, &y.rcq, 0x72, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    g_assert_true(dp_aeq_find(&p.b, PIB_AE_SRQ_LIMIT, srqn));
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(acqe.result0), ==, 0);     /* disarmed */

    /*
     * A QP of the SRQ goes to ERR: LAST_WQE, and the SRQ's last WQE stays
     * for the other QP.
     */
    g_assert_cmpuint(dp_modify_state(&p.b, q1.qpn, PIB_QPS_ERR), ==,
                     PIB_AQ_OK);
    g_assert_true(dp_aeq_find(&p.b, PIB_AE_QP_LAST_WQE, q1.qpn));
    dp_expect_none(&p.b, &y.rcq);
    sge[0] = dp_sge(x2.buf, 10, x2.key);
    dp_post_send(&p.a, &x2.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x4, sge, 1,
                 0, 0);
    dp_expect(&p.b, &y.rcq, 0x73, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.qpn), ==, q2.qpn);
    g_assert_cmpuint(le16_to_cpu(cqe.wqe_index), ==, 3);

    /* Empty SRQ: RNR; destroyed once no QP uses it. */
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_QP, q1.qpn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_QP, q2.qpn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_SRQ, srqn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 1);
    dp_pair_down(&p);
}

/* Start a connection over: both QPs through RESET, rings from index 0. */
static void dp_relink(TestEnd *x, uint16_t lid_x, TestEnd *y, uint16_t lid_y)
{
    g_assert_cmpuint(dp_modify_state(x->d, x->qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(y->d, y->qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x->qp.sq_pi = x->qp.rq_pi = y->qp.sq_pi = y->qp.rq_pi = 0;
    dp_link_ends(x, lid_x, y, lid_y);
}

static void dp_post_bind(PibDev *d, TestQp *qp, uint64_t wr_id, uint8_t type,
                         uint32_t mw_rkey, uint32_t new_rkey, uint32_t mr_key,
                         uint64_t addr, uint64_t len, uint32_t access)
{
    struct pib_bind_mw_wqe b = {
        .opcode = PIB_WQE_BIND_MW,
        .flags = PIB_WQE_F_SIGNALED,
        .mw_type = type,
        .new_rkey = cpu_to_le32(new_rkey),
        .wr_id = cpu_to_le64(wr_id),
        .addr = cpu_to_le64(addr),
        .length = cpu_to_le64(len),
        .mw_rkey = cpu_to_le32(mw_rkey),
        .mr_lkey = cpu_to_le32(mr_key),
        .access = cpu_to_le32(access),
    };

    dp_post_send_raw(d, qp, (struct pib_send_wqe *)&b, NULL, 0, true);
}

/* A window key with the same index and another key byte. */
static uint32_t mw_key_byte(uint32_t key, uint32_t byte)
{
    return (key & ~0xffu) | (byte & 0xff);
}

/*
 * Memory windows: bind, use, invalidate (SEND_WITH_INV, LOCAL_INV), unbind,
 * rebind under a stale key, deallocate by the key ALLOC_MW returned.
 */
static void test_dp_mw(void)
{
    TestPair p;
    TestEnd x, y;
    struct pib_admin_cmd cmd = { .opcode = PIB_CMD_ALLOC_MW };
    struct pib_admin_cqe acqe;
    struct pib_send_wqe wqe;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    uint32_t mr, mr2, mw1, mw2, k1, k2;
    const uint32_t rw = PIB_ACCESS_REMOTE_WRITE | PIB_ACCESS_REMOTE_READ;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);
    mr = dp_reg_mr(&p.b, y.pdn, PIB_ACCESS_LOCAL_WRITE | rw |
                   PIB_ACCESS_MW_BIND, y.buf, 16384);

    /* Windows of type 1 and 2; unbound, their rkeys grant nothing. */
    cmd.in.alloc_mw.pdn = cpu_to_le32(y.pdn);
    cmd.in.alloc_mw.type = cpu_to_le32(3);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.in.alloc_mw.type = cpu_to_le32(1);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    mw1 = le32_to_cpu(acqe.result0);
    cmd.in.alloc_mw.type = cpu_to_le32(2);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    mw2 = le32_to_cpu(acqe.result0);
    g_assert_cmphex(mw1 >> 8, !=, mw2 >> 8);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_PD, y.pdn), ==,
                     PIB_AQ_BUSY);

    /* Bind the type 2 window to 4 KiB of the MR; its key byte moves on. */
    k2 = (mw2 & ~0xffu) | ((mw2 + 1) & 0xff);
    dp_post_bind(&p.b, &y.qp, 0x1, 2, mw2, k2, mr, y.buf + 4096, 4096, rw);
    dp_expect(&p.b, &y.scq, 0x1, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, mr), ==, PIB_AQ_BUSY);

    /* The peer WRITEs and READs through it. */
    dp_fill(&p.a, x.buf, 512, 41);
    sge[0] = dp_sge(x.buf, 300, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x2,
                 sge, 1, y.buf + 4096 + 10, k2);
    dp_expect(&p.a, &x.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 4096 + 10, 300);
    sge[0] = dp_sge(x.buf + 1024, 300, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x3,
                 sge, 1, y.buf + 4096 + 10, k2);
    dp_expect(&p.a, &x.scq, 0x3, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    dp_assert_same(&p.a, x.buf + 1024, &p.b, y.buf + 4096 + 10, 300);

    /* SEND_WITH_INV: the receive says which rkey went. */
    sge[0] = dp_sge(y.buf, 64, y.key);
    dp_post_recv(&p.b, &y.qp, 0x4, sge, 1);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_SEND_INV,
        .flags = PIB_WQE_F_SIGNALED,
        .wr_id = cpu_to_le64(0x5),
        .imm_inv = cpu_to_le32(k2),
    };
    dp_post_send_raw(&p.a, &x.qp, &wqe, NULL, 0, true);
    dp_expect(&p.a, &x.scq, 0x5, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x4, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(cqe.flags & PIB_CQE_F_INV, ==, PIB_CQE_F_INV);
    g_assert_cmphex(le32_to_cpu(cqe.imm_inv), ==, k2);

    /* Type 1: bound, rebound elsewhere, then LOCAL_INV is refused for it. */
    k1 = (mw1 & ~0xffu) | ((mw1 + 7) & 0xff);
    dp_post_bind(&p.b, &y.qp, 0x6, 1, mw1, k1, mr, y.buf, 100, rw);
    dp_expect(&p.b, &y.scq, 0x6, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    dp_post_bind(&p.b, &y.qp, 0x7, 1, k1, k1 + 1, mr, y.buf + 8192, 100, rw);
    dp_expect(&p.b, &y.scq, 0x7, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    k1++;
    sge[0] = dp_sge(x.buf, 100, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x8,
                 sge, 1, y.buf + 8192, k1);
    dp_expect(&p.a, &x.scq, 0x8, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 8192, 100);

    /* The invalidated type 2 rkey: a remote access error, memory intact. */
    qtest_memset(qts(&p.b), y.buf + 4096, 0x11, 64);
    sge[0] = dp_sge(x.buf, 64, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x9,
                 sge, 1, y.buf + 4096, k2);
    dp_expect(&p.a, &x.scq, 0x9, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    g_assert_cmphex(qtest_readb(qts(&p.b), y.buf + 4096 + 63), ==, 0x11);
    dp_relink(&x, 1, &y, 2);

    /* LOCAL_INV of a type 1 window: refused, a completion error. */
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_LOCAL_INV,
        .flags = PIB_WQE_F_SIGNALED,
        .wr_id = cpu_to_le64(0xa),
        .imm_inv = cpu_to_le32(k1),
    };
    dp_post_send_raw(&p.b, &y.qp, &wqe, NULL, 0, true);
    dp_expect(&p.b, &y.scq, 0xa, PIB_WC_LOC_QP_OP_ERR, PIB_CQE_LOCAL_INV,
              NULL);
    dp_relink(&x, 1, &y, 2);

    /* A bind to an MR without MW_BIND: MW_BIND_ERR. */
    dp_post_bind(&p.b, &y.qp, 0xb, 2, k2, k2 + 1, y.key, y.buf, 100, rw);
    dp_expect(&p.b, &y.scq, 0xb, PIB_WC_MW_BIND_ERR, PIB_CQE_BIND_MW, NULL);
    dp_relink(&x, 1, &y, 2);

    /* LOCAL_INV of an MR: from then on its rkey fails. */
    mr2 = dp_reg_mr(&p.b, y.pdn, PIB_ACCESS_LOCAL_WRITE | rw, y.buf, 4096);
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_LOCAL_INV,
        .flags = PIB_WQE_F_SIGNALED,
        .wr_id = cpu_to_le64(0xc),
        .imm_inv = cpu_to_le32(mr2),
    };
    dp_post_send_raw(&p.b, &y.qp, &wqe, NULL, 0, true);
    dp_expect(&p.b, &y.scq, 0xc, PIB_WC_SUCCESS, PIB_CQE_LOCAL_INV, NULL);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0xd,
                 sge, 1, y.buf, mr2);
    dp_expect(&p.a, &x.scq, 0xd, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, mr2), ==, PIB_AQ_OK);

    dp_relink(&x, 1, &y, 2);

    /*
     * BIND_MW names the window by its index.  Nothing updates the consumer's
     * copy of an invalidated type 2 key (k2), so the provider still passes the
     * rkey ALLOC_MW returned (mw2): the bind works, under a new key byte.
     */
    k2 = mw_key_byte(mw2, mw2 + 2);
    dp_post_bind(&p.b, &y.qp, 0x10, 2, mw2, k2, mr, y.buf + 12288, 256, rw);
    dp_expect(&p.b, &y.scq, 0x10, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    dp_fill(&p.a, x.buf, 256, 43);
    sge[0] = dp_sge(x.buf, 256, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x11,
                 sge, 1, y.buf + 12288, k2);
    dp_expect(&p.a, &x.scq, 0x11, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf + 12288, 256);
    /* ... but the index must be a window of the type the WQE says. */
    dp_post_bind(&p.b, &y.qp, 0x12, 1, mw2, k2, mr, y.buf, 64, rw);
    dp_expect(&p.b, &y.scq, 0x12, PIB_WC_MW_BIND_ERR, PIB_CQE_BIND_MW, NULL);
    dp_relink(&x, 1, &y, 2);
    /* LOCAL_INV unbinds it; a type 2 bind of length 0 is refused. */
    wqe = (struct pib_send_wqe) {
        .opcode = PIB_WQE_LOCAL_INV,
        .flags = PIB_WQE_F_SIGNALED,
        .wr_id = cpu_to_le64(0x13),
        .imm_inv = cpu_to_le32(k2),
    };
    dp_post_send_raw(&p.b, &y.qp, &wqe, NULL, 0, true);
    dp_expect(&p.b, &y.scq, 0x13, PIB_WC_SUCCESS, PIB_CQE_LOCAL_INV, NULL);
    dp_post_bind(&p.b, &y.qp, 0x14, 2, mw2, mw_key_byte(mw2, mw2 + 3), 0,
                 0, 0, rw);
    dp_expect(&p.b, &y.scq, 0x14, PIB_WC_MW_BIND_ERR, PIB_CQE_BIND_MW, NULL);
    dp_relink(&x, 1, &y, 2);
    /* Bound again (stale key once more), to be deallocated while bound. */
    k2 = mw_key_byte(mw2, mw2 + 4);
    dp_post_bind(&p.b, &y.qp, 0x15, 2, mw2, k2, mr, y.buf, 4096, rw);
    dp_expect(&p.b, &y.scq, 0x15, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);

    /*
     * Type 1 unbind: ibv_bind_mw with no MR and length 0 (the provider sends
     * mr_lkey 0).  The window takes the new key and grants nothing.
     */
    dp_post_bind(&p.b, &y.qp, 0x16, 1, k1, mw_key_byte(k1, k1 + 1), 0, 0, 0,
                 rw);
    dp_expect(&p.b, &y.scq, 0x16, PIB_WC_SUCCESS, PIB_CQE_BIND_MW, NULL);
    k1 = mw_key_byte(k1, k1 + 1);
    qtest_memset(qts(&p.b), y.buf + 8192, 0x22, 64);
    sge[0] = dp_sge(x.buf, 64, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x17,
                 sge, 1, y.buf + 8192, k1);
    dp_expect(&p.a, &x.scq, 0x17, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    g_assert_cmphex(qtest_readb(qts(&p.b), y.buf + 8192), ==, 0x22);
    dp_relink(&x, 1, &y, 2);

    /*
     * DEALLOC_MW by the rkey ALLOC_MW returned (all the kernel knows), after
     * binds moved the key byte on; a key byte that is neither that nor the
     * current one is a stale handle.  Deallocating the bound type 2 window
     * unbinds it, so the MR can go, and so can the PD's last reference.
     */
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEALLOC_MW,
                                mw_key_byte(mw1, mw1 + 0x40)), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEALLOC_MW, mw1), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEALLOC_MW, mw1), ==,
                     PIB_AQ_BAD_RESOURCE);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, mr), ==, PIB_AQ_BUSY);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEALLOC_MW, mw2), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, mr), ==, PIB_AQ_OK);
    /* A window deallocated by its current key works as before. */
    cmd.in.alloc_mw.type = cpu_to_le32(1);
    g_assert_cmpuint(pib_cmd(&p.b, &cmd, &acqe), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEALLOC_MW,
                                le32_to_cpu(acqe.result0)), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_QP, y.qp.qpn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DEREG_MR, y.key), ==, PIB_AQ_OK);
    g_assert_cmpuint(dp_obj_cmd(&p.b, PIB_CMD_DESTROY_PD, y.pdn), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/*
 * 9. The wire: this test is the peer HCA (LID 9, QP 0x77) and speaks IB
 * packets to the device through its link, to check the transport rules
 * that a well-behaved peer never exercises: duplicates, gaps, NAKs, RNR,
 * replayed READs and atomics, go-back-N, and malformed packets.
 */

#define WP_LID          9
#define WP_QPN          0x77
#define WP_MTU_256      1

typedef struct WirePkt {
    uint8_t opcode;
    uint32_t dqpn, psn;
    bool ackreq;
    uint8_t syndrome;       /* AETH */
    uint32_t msn;
    uint64_t orig;          /* AtomicAckETH */
    uint64_t va;            /* RETH */
    uint32_t rkey, dmalen;
    uint8_t payload[4096];
    uint32_t paylen;
} WirePkt;

static uint32_t wp_dqpn;                /* the device's QP the peer talks to */

/* Frame and send one packet; ext: the extension headers, already built. */
static void wp_send(int fd, uint8_t opcode, uint32_t psn, bool ackreq,
                    const void *ext, uint32_t ext_len, const void *payload,
                    uint32_t paylen)
{
    uint8_t frame[4 + 4352] = { 0 };
    uint32_t pad = -paylen & 3;
    uint32_t len = 8 + 12 + ext_len + paylen + pad;
    uint8_t *b = frame + 4;

    frame[0] = PIB_LINK_MAGIC;
    frame[1] = PIB_FRAME_PACKET;
    stw_be_p(frame + 2, len);
    b[1] = PIB_LNH_IBA_LOCAL;
    stw_be_p(b + 2, 1);                 /* DLID: the device */
    stw_be_p(b + 4, len / 4);
    stw_be_p(b + 6, WP_LID);
    b[8] = opcode;
    b[9] = pad << PIB_BTH_PAD_SHIFT;
    stw_be_p(b + 10, 0xffff);
    stl_be_p(b + 12, wp_dqpn);
    stl_be_p(b + 16, (psn & PIB_PSN_MASK) | (ackreq ? PIB_BTH_ACKREQ : 0));
    memcpy(b + 20, ext, ext_len);
    memcpy(b + 20 + ext_len, payload, paylen);
    peer_write(fd, frame, 4 + len);
}

/* Wait for the next packet from the device, parse what we need of it. */
static bool wp_recv(int fd, WirePkt *w, int timeout_ms)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    struct pib_link_hdr hdr;
    uint8_t b[4352];
    uint32_t len, off;
    uint8_t pad;

    if (poll(&pfd, 1, timeout_ms) != 1) {
        return false;
    }
    g_assert_true(peer_read(fd, &hdr, sizeof(hdr)));
    g_assert_cmphex(hdr.magic, ==, PIB_LINK_MAGIC);
    g_assert_cmphex(hdr.type, ==, PIB_FRAME_PACKET);
    len = be16_to_cpu(hdr.length_be);
    g_assert_cmpuint(len, <=, sizeof(b));
    g_assert_true(peer_read(fd, b, len));

    memset(w, 0, sizeof(*w));
    g_assert_cmpuint(b[1] & 3, ==, PIB_LNH_IBA_LOCAL);
    g_assert_cmpuint(lduw_be_p(b + 2), ==, WP_LID);
    g_assert_cmpuint(lduw_be_p(b + 4) * 4, ==, len);
    g_assert_cmpuint(lduw_be_p(b + 6), ==, 1);
    w->opcode = b[8];
    pad = (b[9] >> PIB_BTH_PAD_SHIFT) & 3;
    g_assert_cmphex(lduw_be_p(b + 10), ==, 0xffff);
    w->dqpn = ldl_be_p(b + 12) & PIB_QPN_MASK;
    g_assert_cmphex(w->dqpn, ==, WP_QPN);
    w->psn = ldl_be_p(b + 16) & PIB_PSN_MASK;
    w->ackreq = ldl_be_p(b + 16) & PIB_BTH_ACKREQ;
    off = 20;
    if (w->opcode == PIB_OP_RC_RDMA_READ_REQUEST) {
        w->va = ldq_be_p(b + off);
        w->rkey = ldl_be_p(b + off + 8);
        w->dmalen = ldl_be_p(b + off + 12);
        off += 16;
    }
    switch (w->opcode) {
    case PIB_OP_RC_ACKNOWLEDGE:
    case PIB_OP_RC_ATOMIC_ACKNOWLEDGE:
    case PIB_OP_RC_RDMA_READ_RESP_FIRST:
    case PIB_OP_RC_RDMA_READ_RESP_LAST:
    case PIB_OP_RC_RDMA_READ_RESP_ONLY:
        w->syndrome = b[off];
        w->msn = ldl_be_p(b + off) & 0xffffff;
        off += 4;
        break;
    default:
        break;
    }
    if (w->opcode == PIB_OP_RC_ATOMIC_ACKNOWLEDGE) {
        w->orig = ldq_be_p(b + off);
        off += 8;
    }
    g_assert_cmpuint(off + pad, <=, len);
    w->paylen = len - off - pad;
    memcpy(w->payload, b + off, w->paylen);
    return true;
}

static void wp_expect(int fd, WirePkt *w, uint8_t opcode, uint32_t psn)
{
    g_assert_true(wp_recv(fd, w, TIMEOUT_US / 1000));
    g_assert_cmphex(w->opcode, ==, opcode);
    g_assert_cmpuint(w->psn, ==, psn);
}

static void wp_expect_nothing(int fd)
{
    WirePkt w;

    g_assert_false(wp_recv(fd, &w, 200));
}

/* An RC SEND_ONLY to the device's QP. */
static void wp_send_only(int fd, uint32_t psn, const char *text)
{
    wp_send(fd, PIB_OP_RC_SEND_ONLY, psn, true, NULL, 0, text,
               strlen(text));
}

static void wp_ack(int fd, uint32_t psn, uint8_t syndrome)
{
    uint8_t aeth[4];

    stl_be_p(aeth, (uint32_t)syndrome << 24);
    wp_send(fd, PIB_OP_RC_ACKNOWLEDGE, psn, false, aeth, 4, NULL, 0);
}

static void test_dp_wire(void)
{
    g_autofree char *dir = g_dir_make_tmp("pib-test-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "link.sock", NULL);
    g_autofree char *args = g_strdup_printf(
        "-chardev socket,id=link,path=%s,server=on,wait=off "
        "-device pib-hca,addr=4.0,chardev=link,lid=1,node-guid=0x%" PRIx64,
        path, (uint64_t)TEST_NODE_GUID);
    QOSState *qs = pib_boot(args);
    struct pib_qp_attr a;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    uint8_t ext[28], bad[64], data[700];
    struct pib_port_attr port;
    uint64_t cnt[PIB_CNT_MAX];
    char got[16];
    TestEnd x, y;
    WirePkt w;
    PibDev d;
    int fd, i;

    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 64);
    fd = peer_connect(path);
    peer_bring_up(&d, fd);

    dp_end(&d, &x, PIB_QPT_RC, 16384);
    wp_dqpn = x.qp.qpn;
    a = (struct pib_qp_attr) {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX |
                                 PIB_QP_PORT | PIB_QP_ACCESS_FLAGS),
        .qp_state = PIB_QPS_INIT,
        .port_num = 1,
        .qp_access_flags = cpu_to_le32(PIB_ACCESS_REMOTE_READ |
                                       PIB_ACCESS_REMOTE_ATOMIC),
    };
    g_assert_cmpuint(dp_modify(&d, x.qp.qpn, &a), ==, PIB_AQ_OK);
    a = (struct pib_qp_attr) {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_AV | PIB_QP_PATH_MTU |
                                 PIB_QP_DEST_QPN | PIB_QP_RQ_PSN |
                                 PIB_QP_MAX_DEST_RD_ATOMIC |
                                 PIB_QP_MIN_RNR_TIMER),
        .qp_state = PIB_QPS_RTR,
        .path_mtu = WP_MTU_256,
        .dlid = cpu_to_le16(WP_LID),
        .dest_qp_num = cpu_to_le32(WP_QPN),
        .rq_psn = cpu_to_le32(100),
        .max_dest_rd_atomic = 4,
        .min_rnr_timer = 3,
    };
    g_assert_cmpuint(dp_modify(&d, x.qp.qpn, &a), ==, PIB_AQ_OK);
    a = (struct pib_qp_attr) {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_SQ_PSN |
                                 PIB_QP_TIMEOUT | PIB_QP_RETRY_CNT |
                                 PIB_QP_RNR_RETRY | PIB_QP_MAX_QP_RD_ATOMIC),
        .qp_state = PIB_QPS_RTS,
        .sq_psn = cpu_to_le32(500),
        .timeout = 14,
        .retry_cnt = 7,
        .rnr_retry = 7,
        .max_rd_atomic = 4,
    };
    g_assert_cmpuint(dp_modify(&d, x.qp.qpn, &a), ==, PIB_AQ_OK);

    /* The responder: a SEND, acknowledged with the MSN. */
    sge[0] = dp_sge(x.buf + 8192, 64, x.key);
    dp_post_recv(&d, &x.qp, 0x1, sge, 1);
    dp_post_recv(&d, &x.qp, 0x2, sge, 1);
    wp_send_only(fd, 100, "first");
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 100);
    g_assert_cmphex(w.syndrome & PIB_AETH_TYPE_MASK, ==, PIB_AETH_ACK);
    g_assert_cmpuint(w.msn, ==, 1);
    dp_expect(&d, &x.rcq, 0x1, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 5);
    qtest_memread(qts(&d), x.buf + 8192, got, 5);
    g_assert_cmpmem(got, 5, "first", 5);

    /* The same again: a duplicate is acknowledged, not delivered. */
    wp_send_only(fd, 100, "again");
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 100);
    dp_expect_none(&d, &x.rcq);

    /* A gap: one PSN sequence NAK for it, naming the PSN expected. */
    wp_send_only(fd, 103, "gap");
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 101);
    g_assert_cmphex(w.syndrome, ==, PIB_AETH_NAK | PIB_NAK_PSN_SEQ_ERR);
    wp_send_only(fd, 104, "gap2");
    wp_expect_nothing(fd);
    wp_send_only(fd, 101, "second");
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 101);
    dp_expect(&d, &x.rcq, 0x2, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 6);

    /*
     * Malformed packets: dropped without a word, whatever is wrong.  Each is
     * a valid SEND_ONLY (PSN 102, no receive posted: it would draw an RNR
     * NAK) with one field broken.
     */
    memset(bad, 0, sizeof(bad));
    bad[0] = PIB_LINK_MAGIC;
    bad[1] = PIB_FRAME_PACKET;
    stw_be_p(bad + 2, 4);
    peer_write(fd, bad, 8);                             /* 4 bytes */
    for (i = 0; i < 9; i++) {
        uint8_t *b = bad + 4;

        memset(bad, 0, sizeof(bad));
        bad[0] = PIB_LINK_MAGIC;
        bad[1] = PIB_FRAME_PACKET;
        stw_be_p(bad + 2, 24);
        b[1] = PIB_LNH_IBA_LOCAL;
        stw_be_p(b + 2, 1);
        stw_be_p(b + 4, 6);
        stw_be_p(b + 6, WP_LID);
        b[8] = PIB_OP_RC_SEND_ONLY;
        stw_be_p(b + 10, 0xffff);
        stl_be_p(b + 12, wp_dqpn);
        stl_be_p(b + 16, PIB_BTH_ACKREQ | 102);
        memcpy(b + 20, "abcd", 4);
        switch (i) {
        case 0:                                 /* LRH length */
            stw_be_p(b + 4, 7);
            break;
        case 1:                                 /* P_Key */
            stw_be_p(b + 10, 0x1234);
            break;
        case 2:                                 /* not our peer */
            stw_be_p(b + 6, WP_LID + 1);
            break;
        case 3:                                 /* not our LID */
            stw_be_p(b + 2, 5);
            break;
        case 4:                                 /* no such QP */
            stl_be_p(b + 12, 0x3ff);
            break;
        case 5:                                 /* raw, not IBA */
            b[1] = 0;
            break;
        case 6:                                 /* LVer 1 */
            b[0] = 0x01;
            break;
        case 7:                                 /* TVer 1 */
            b[9] = 0x01;
            break;
        case 8:                                 /* UC to an RC QP */
            b[8] = PIB_OP_UC_SEND_ONLY;
            break;
        }
        peer_write(fd, bad, 4 + 24);
    }
    wp_send(fd, 0x1f, 102, true, NULL, 0, NULL, 0);     /* unknown opcode */
    wp_send(fd, PIB_OP_RC_ACKNOWLEDGE, 102, true, "\0\0\0\0", 4, "xxxx", 4);
    wp_send(fd, PIB_OP_RC_RDMA_WRITE_ONLY, 102, true, "short", 5, NULL, 0);
    wp_expect_nothing(fd);
    g_assert_cmpuint(dp_query_qp(&d, x.qp.qpn).qp_state, ==, PIB_QPS_RTS);
    g_assert_cmpuint(pib_query_port(&d, 1, &port), ==, PIB_AQ_OK);
    g_assert_cmpuint(le32_to_cpu(port.bad_pkey_cntr), ==, 1);

    /* No receive posted: an RNR NAK with our min_rnr_timer, PSN not used */
    wp_send_only(fd, 102, "rnr");
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 102);
    g_assert_cmphex(w.syndrome, ==, PIB_AETH_RNR_NAK | 3);

    /* A READ of 600 bytes: three responses at MTU 256. */
    dp_fill(&d, x.buf, 1024, 4);
    qtest_writeq(qts(&d), x.buf + 2048, 5);
    stq_be_p(ext, x.buf);
    stl_be_p(ext + 8, x.key);
    stl_be_p(ext + 12, 600);
    wp_send(fd, PIB_OP_RC_RDMA_READ_REQUEST, 102, false, ext, 16, NULL, 0);
    qtest_memread(qts(&d), x.buf, data, sizeof(data));
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_FIRST, 102);
    g_assert_cmpmem(w.payload, w.paylen, data, 256);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_MIDDLE, 103);
    g_assert_cmpmem(w.payload, w.paylen, data + 256, 256);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_LAST, 104);
    g_assert_cmpmem(w.payload, w.paylen, data + 512, 88);
    /* ... asked again from its middle: answered again from there. */
    stq_be_p(ext, x.buf + 256);
    stl_be_p(ext + 12, 344);
    wp_send(fd, PIB_OP_RC_RDMA_READ_REQUEST, 103, false, ext, 16, NULL, 0);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_FIRST, 103);
    g_assert_cmpmem(w.payload, w.paylen, data + 256, 256);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_RESP_LAST, 104);

    /* FETCH_ADD, then its duplicate: the same answer, added once. */
    stq_be_p(ext, x.buf + 2048);
    stl_be_p(ext + 8, x.key);
    stq_be_p(ext + 12, 3);
    stq_be_p(ext + 20, 0);
    wp_send(fd, PIB_OP_RC_FETCH_ADD, 105, false, ext, 28, NULL, 0);
    wp_expect(fd, &w, PIB_OP_RC_ATOMIC_ACKNOWLEDGE, 105);
    g_assert_cmpuint(w.orig, ==, 5);
    g_assert_cmpuint(qtest_readq(qts(&d), x.buf + 2048), ==, 8);
    wp_send(fd, PIB_OP_RC_FETCH_ADD, 105, false, ext, 28, NULL, 0);
    wp_expect(fd, &w, PIB_OP_RC_ATOMIC_ACKNOWLEDGE, 105);
    g_assert_cmpuint(w.orig, ==, 5);
    g_assert_cmpuint(qtest_readq(qts(&d), x.buf + 2048), ==, 8);

    /*
     * The requester: a 700-byte SEND is three packets.  A sequence NAK for
     * the second makes the device go back and resend from it.
     */
    dp_fill(&d, x.buf + 4096, 700, 12);
    qtest_memread(qts(&d), x.buf + 4096, data, sizeof(data));
    sge[0] = dp_sge(x.buf + 4096, 700, x.key);
    dp_post_send(&d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x10, sge, 1,
                 0, 0);
    wp_expect(fd, &w, PIB_OP_RC_SEND_FIRST, 500);
    g_assert_cmpmem(w.payload, w.paylen, data, 256);
    wp_expect(fd, &w, PIB_OP_RC_SEND_MIDDLE, 501);
    wp_expect(fd, &w, PIB_OP_RC_SEND_LAST, 502);
    g_assert_true(w.ackreq);
    g_assert_cmpmem(w.payload, w.paylen, data + 512, 188);
    wp_ack(fd, 501, PIB_AETH_NAK | PIB_NAK_PSN_SEQ_ERR);
    wp_expect(fd, &w, PIB_OP_RC_SEND_MIDDLE, 501);
    g_assert_cmpmem(w.payload, w.paylen, data + 256, 256);
    wp_expect(fd, &w, PIB_OP_RC_SEND_LAST, 502);
    dp_expect_none(&d, &x.scq);
    wp_ack(fd, 400, PIB_AETH_ACK | 0x1f);     /* stale: ignored */
    wp_ack(fd, 600, PIB_AETH_ACK | 0x1f);     /* never sent: ignored */
    dp_expect_none(&d, &x.scq);
    wp_ack(fd, 502, PIB_AETH_ACK | 0x1f);
    dp_expect(&d, &x.scq, 0x10, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);

    /* An RNR NAK: resent once the RNR timer (code 1: 10 us) expired. */
    dp_post_send(&d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x11, sge, 1,
                 0, 0);
    wp_expect(fd, &w, PIB_OP_RC_SEND_FIRST, 503);
    wp_expect(fd, &w, PIB_OP_RC_SEND_MIDDLE, 504);
    wp_expect(fd, &w, PIB_OP_RC_SEND_LAST, 505);
    wp_ack(fd, 503, PIB_AETH_RNR_NAK | 1);
    wp_expect_nothing(fd);
    qtest_clock_step(qts(&d), 1000 * 1000);
    wp_expect(fd, &w, PIB_OP_RC_SEND_FIRST, 503);
    wp_expect(fd, &w, PIB_OP_RC_SEND_MIDDLE, 504);
    wp_expect(fd, &w, PIB_OP_RC_SEND_LAST, 505);
    wp_ack(fd, 505, PIB_AETH_ACK | 0x1f);
    dp_expect(&d, &x.scq, 0x11, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);

    /* An ACK timeout: everything unacknowledged goes out again. */
    dp_post_send(&d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x12, sge, 1,
                 0, 0);
    wp_expect(fd, &w, PIB_OP_RC_SEND_FIRST, 506);
    wp_expect(fd, &w, PIB_OP_RC_SEND_MIDDLE, 507);
    wp_expect(fd, &w, PIB_OP_RC_SEND_LAST, 508);
    wp_ack(fd, 506, PIB_AETH_ACK | 0x1f);       /* the first only */
    wp_expect_nothing(fd);          /* (the device reads the ACK first) */
    qtest_clock_step(qts(&d), 100 * 1000 * 1000);
    wp_expect(fd, &w, PIB_OP_RC_SEND_MIDDLE, 507);
    wp_expect(fd, &w, PIB_OP_RC_SEND_LAST, 508);
    wp_ack(fd, 508, PIB_AETH_ACK | 0x1f);
    dp_expect(&d, &x.scq, 0x12, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);

    /* A READ: the peer's responses land in the SGE. */
    sge[0] = dp_sge(x.buf + 12288, 300, x.key);
    dp_post_send(&d, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, 0x13, sge,
                 1, 0x123456789ull, 0xabcd);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_READ_REQUEST, 509);
    g_assert_cmphex(w.va, ==, 0x123456789ull);
    g_assert_cmphex(w.rkey, ==, 0xabcd);
    g_assert_cmpuint(w.dmalen, ==, 300);
    for (i = 0; i < 300; i++) {
        data[i] = i * 3;
    }
    stl_be_p(ext, (PIB_AETH_ACK | 0x1f) << 24);
    wp_send(fd, PIB_OP_RC_RDMA_READ_RESP_FIRST, 509, false, ext, 4, data,
               256);
    wp_send(fd, PIB_OP_RC_RDMA_READ_RESP_LAST, 510, false, ext, 4,
               data + 256, 44);
    dp_expect(&d, &x.scq, 0x13, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ, NULL);
    qtest_memread(qts(&d), x.buf + 12288, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), data, sizeof(got));

    /* Every drop and NAK so far, counted by reason. */
    dp_counters(&d, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_MALFORMED], ==, 5);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_OPCODE], ==, 2);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_PKEY], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_DLID], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_SLID], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_NO_QP], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_QP_TYPE], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_LENGTH], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_PSN_SEQ], ==, 2);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_DUPLICATE], ==, 3);
    g_assert_cmpuint(cnt[PIB_CNT_DUPLICATE_REQUESTS], ==, 3);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_RNR], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_STALE_RESP], ==, 2);
    g_assert_cmpuint(cnt[PIB_CNT_SEQ_NAKS_SENT], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RNR_NAKS_SENT], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_SEQ_NAKS_RCVD], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RNR_NAKS_RCVD], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RETRANSMITS], ==, 2 + 3 + 2);
    g_assert_cmpuint(cnt[PIB_CNT_RETRY_TIMEOUTS], ==, 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_PACKETS], >, 20);
    g_assert_cmpuint(cnt[PIB_CNT_TX_PACKETS], >, 20);
    g_assert_cmpuint(cnt[PIB_CNT_TX_BYTES], >, cnt[PIB_CNT_TX_PACKETS] * 20);

    /* A NAK "remote access error": REM_ACCESS_ERR, and the QP in ERR. */
    dp_post_send(&d, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 0x14,
                 sge, 1, 0x1000, 0xabcd);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_WRITE_FIRST, 511);
    wp_expect(fd, &w, PIB_OP_RC_RDMA_WRITE_LAST, 512);
    wp_ack(fd, 511, PIB_AETH_NAK | PIB_NAK_REM_ACCESS_ERR);
    dp_expect(&d, &x.scq, 0x14, PIB_WC_REM_ACCESS_ERR, PIB_CQE_RDMA_WRITE,
              NULL);
    g_assert_cmpuint(dp_query_qp(&d, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);

    /*
     * Garbage that gets past the LRH and BTH checks to a fresh QP: random
     * opcodes, PSNs around the expected one, random headers and payload.
     * Whatever the device makes of it, it answers or drops, and lives on.
     */
    dp_end(&d, &y, PIB_QPT_RC, 16384);
    dp_connect_ex(&d, &y.qp, WP_LID, WP_QPN, WP_MTU_256, 14, 7, 7);
    wp_dqpn = y.qp.qpn;
    sge[0] = dp_sge(y.buf, 16384, y.key);
    for (i = 0; i < 8; i++) {
        dp_post_recv(&d, &y.qp, 0x100 + i, sge, 1);
    }
    for (i = 0; i < 400; i++) {
        static const uint8_t ops[] = {
            0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
            0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13,
            0x14, 0x16, 0x17,
        };
        uint32_t n = g_test_rand_int_range(0, 16) * 4, j;
        uint8_t junk[64];

        /* An error moves the QP to ERR: start it over now and then. */
        if (i % 25 == 0 && dp_query_qp(&d, y.qp.qpn).qp_state != PIB_QPS_RTS) {
            while (wp_recv(fd, &w, 100)) {
                /* its last words */
            }
            g_assert_cmpuint(dp_modify_state(&d, y.qp.qpn, PIB_QPS_RESET), ==,
                             PIB_AQ_OK);
            y.qp.sq_pi = y.qp.rq_pi = 0;
            dp_connect_ex(&d, &y.qp, WP_LID, WP_QPN, WP_MTU_256, 14, 7, 7);
            for (j = 0; j < 8; j++) {
                dp_post_recv(&d, &y.qp, 0x100 + j, sge, 1);
            }
        }

        for (j = 0; j < n; j++) {
            junk[j] = g_test_rand_int();
        }
        if (g_test_rand_bit()) {        /* a plausible RETH */
            stq_be_p(junk, y.buf + g_test_rand_int_range(0, 20000));
            stl_be_p(junk + 8, g_test_rand_bit() ? y.key : x.key);
            stl_be_p(junk + 12, g_test_rand_int_range(0, 5000));
        }
        wp_send(fd, ops[g_test_rand_int_range(0, sizeof(ops))],
                0xffffef + g_test_rand_int_range(0, 4), g_test_rand_bit(),
                junk, n, NULL, 0);
    }
    while (wp_recv(fd, &w, 500)) {
        /* answers: ACKs, NAKs, READ responses */
    }
    g_assert_cmphex(pib_nop(&d, 0x600d), ==, 0x600d);
    a = dp_query_qp(&d, y.qp.qpn);
    g_assert_cmpuint(a.qp_state == PIB_QPS_RTS || a.qp_state == PIB_QPS_ERR,
                     ==, true);

    /*
     * The link goes down with a SEND outstanding: nothing hangs, the
     * retransmit timer runs out (8 tries of 67 ms) and the SEND completes
     * with RETRY_EXC_ERR.
     */
    dp_end(&d, &x, PIB_QPT_RC, 4096);
    dp_connect_ex(&d, &x.qp, WP_LID, WP_QPN, WP_MTU_256, 14, 7, 7);
    wp_dqpn = x.qp.qpn;
    sge[0] = dp_sge(x.buf, 10, x.key);
    dp_post_send(&d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x20, sge, 1,
                 0, 0);
    wp_expect(fd, &w, PIB_OP_RC_SEND_ONLY, 0xfffff0);
    close(fd);
    pib_wait_port_state(&d, PIB_PORT_DOWN);
    g_assert_true(dp_aeq_find(&d, PIB_AE_PORT_ERR, 1));
    dp_counters(&d, cnt);
    i = cnt[PIB_CNT_RETRY_TIMEOUTS];
    dp_step_until_cqe(&d, &x.scq, &cqe, 100 * 1000 * 1000, 500);
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x20);
    g_assert_cmpuint(cqe.status, ==, PIB_WC_RETRY_EXC_ERR);
    dp_counters(&d, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_RETRY_TIMEOUTS] - i, ==, 8);
    g_assert_cmpuint(cnt[PIB_CNT_TX_DROP_PORT_DOWN], ==, 7);

    /* None of this was the guest's doing. */
    g_assert_cmpuint(dp_err_count(&d), ==, 0);
    pib_close(&d);
    qtest_shutdown(qs);
    g_unlink(path);
    g_rmdir(dir);
}

/*
 * 9b. The requester's timers when the link dies under it.  The rule the
 * device keeps: while an RC QP has requests the peer has not acknowledged
 * and is not in ERR, a timer is running (the retransmit timer, or the RNR
 * timer during an RNR wait), whatever happens to the link.  So a peer that
 * dies always ends in RETRY_EXC_ERR within (retry_cnt + 1) ACK timeouts.
 *
 * The hard case is a link that fills up first: the peer stops reading, the
 * socket and then the transmit queue fill, and the requester stops for room.
 * An ACK timeout (or the end of an RNR wait) then rewinds the requester,
 * which finds the queue still full and cannot resend; then the peer goes
 * away and the queue is purged.  Each variant below reaches that point with
 * the virtual clock frozen, so it is deterministic.
 */

#define LD_TIMEOUT          8           /* 4.096 us << 8: ~1 ms (the floor) */
#define LD_RETRY_CNT        3
#define LD_STEP_NS          (1100 * 1000)   /* a little over one timeout */
#define LD_MSG              (1u << 20)
#define LD_MTU_4096         5

typedef enum LdVariant {
    LD_WRITES,          /* RDMA WRITEs only */
    LD_READ_HEAD,       /* a READ at the head: its responses never come */
    LD_RNR,             /* the peer RNR NAKs the head, then goes away */
} LdVariant;

/* Wait until the device has stopped transmitting (the link is full). */
static uint64_t ld_wait_stalled(PibDev *d)
{
    uint64_t c[PIB_CNT_MAX], last = 0;
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;
    int stable = 0;

    while (stable < 3) {
        g_usleep(50 * 1000);
        dp_counters(d, c);
        stable = c[PIB_CNT_TX_PACKETS] == last ? stable + 1 : 0;
        last = c[PIB_CNT_TX_PACKETS];
        g_assert_cmpint(g_get_monotonic_time(), <, end);
    }
    return last;
}

static void ld_run(PibDev *d, const char *path, TestEnd *x, LdVariant v,
                   uint32_t link_downs)
{
    uint64_t before[PIB_CNT_MAX], after[PIB_CNT_MAX];
    struct pib_sge sge = dp_sge(x->buf, LD_MSG, x->key);
    struct pib_cqe cqe;
    uint64_t sent;
    uint32_t i;
    int fd;

    fd = peer_connect(path);
    peer_bring_up(d, fd);
    g_assert_cmpuint(dp_modify_state(d, x->qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x->qp.sq_pi = x->qp.rq_pi = 0;
    dp_connect_ex(d, &x->qp, WP_LID, WP_QPN, LD_MTU_4096, LD_TIMEOUT,
                  LD_RETRY_CNT, LD_RETRY_CNT);
    dp_counters(d, before);

    /* 16 MiB of requests: far more than the socket and the queue hold. */
    for (i = 0; i < x->qp.sq_depth; i++) {
        dp_post_send(d, &x->qp,
                     i == 0 && v == LD_READ_HEAD ? PIB_WQE_RDMA_READ
                                                 : PIB_WQE_RDMA_WRITE,
                     PIB_WQE_F_SIGNALED, 0x100 + i, &sge, 1,
                     x->buf, x->key);
    }
    sent = ld_wait_stalled(d);
    g_assert_cmpuint(sent - before[PIB_CNT_TX_PACKETS], >, 256);
    g_assert_cmpuint(sent - before[PIB_CNT_TX_PACKETS], <,
                     x->qp.sq_depth * (LD_MSG / 4096));

    if (v == LD_RNR) {
        /* An RNR NAK for the head: the requester pauses 0.01 ms, then
         * rewinds into a full queue. */
        wp_ack(fd, 0xfffff0, PIB_AETH_RNR_NAK | 1);
        ld_wait_stalled(d);
        qtest_clock_step(qts(d), 20 * 1000);
    } else {
        /* One ACK timeout: the requester rewinds into a full queue. */
        qtest_clock_step(qts(d), LD_STEP_NS);
    }
    ld_wait_stalled(d);
    dp_expect_none(d, &x->scq);

    /* The peer dies: the queue is purged, the port goes DOWN. */
    close(fd);
    pib_wait_port_state(d, PIB_PORT_DOWN);
    g_assert_true(pib_aeq_find(d, PIB_AE_PORT_ERR, TIMEOUT_US));

    /* Within the retry budget the head fails, the rest is flushed. */
    dp_step_until_cqe(d, &x->scq, &cqe, LD_STEP_NS, LD_RETRY_CNT + 2);
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x100);
    g_assert_cmpuint(cqe.status, ==, PIB_WC_RETRY_EXC_ERR);
    for (i = 1; i < x->qp.sq_depth; i++) {
        dp_expect(d, &x->scq, 0x100 + i, PIB_WC_WR_FLUSH_ERR,
                  PIB_CQE_RDMA_WRITE, NULL);
    }
    g_assert_cmpuint(dp_query_qp(d, x->qp.qpn).qp_state, ==, PIB_QPS_ERR);
    dp_counters(d, after);
    g_assert_cmpuint(after[PIB_CNT_RETRY_TIMEOUTS] -
                     before[PIB_CNT_RETRY_TIMEOUTS], ==, LD_RETRY_CNT + 1);
    g_assert_cmpuint(after[PIB_CNT_LINK_DOWNS], ==, link_downs);
    if (v == LD_RNR) {
        g_assert_cmpuint(after[PIB_CNT_RNR_NAKS_RCVD] -
                         before[PIB_CNT_RNR_NAKS_RCVD], ==, 1);
    }
}

static void test_dp_link_death(void)
{
    g_autofree char *dir = g_dir_make_tmp("pib-test-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "link.sock", NULL);
    g_autofree char *args = g_strdup_printf(
        "-chardev socket,id=link,path=%s,server=on,wait=off "
        "-device pib-hca,addr=4.0,chardev=link,lid=1,node-guid=0x%" PRIx64,
        path, (uint64_t)TEST_NODE_GUID);
    QOSState *qs = pib_boot(args);
    TestEnd x;
    PibDev d;

    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 16, 64);
    dp_end(&d, &x, PIB_QPT_RC, LD_MSG);
    wp_dqpn = x.qp.qpn;

    ld_run(&d, path, &x, LD_WRITES, 1);
    ld_run(&d, path, &x, LD_READ_HEAD, 2);
    ld_run(&d, path, &x, LD_RNR, 3);
    g_assert_cmpuint(dp_err_count(&d), ==, 0);

    pib_close(&d);
    qtest_shutdown(qs);
    g_unlink(path);
    g_rmdir(dir);
}

/*
 * 10. Error injection: QOM properties set at run time (qom-set over QMP)
 * make the device fail a chosen WQE, lose packets, or send interrupts late.
 */

/* QOM paths of the devices the tests name with id= */
#define INJ_PATH_A          "/machine/peripheral/pa"
#define INJ_PATH_B          "/machine/peripheral/pb"

/* qom-set: NULL if it worked, else the error's description (g_free it). */
static char *inj_set_str(QTestState *q, const char *path, const char *prop,
                         const char *value)
{
    QDict *r = qtest_qmp(q, "{ 'execute': 'qom-set', 'arguments': "
                         "{ 'path': %s, 'property': %s, 'value': %s } }",
                         path, prop, value);
    char *err = NULL;

    g_assert(r);
    if (qdict_haskey(r, "error")) {
        err = g_strdup(qdict_get_str(qdict_get_qdict(r, "error"), "desc"));
    }
    qobject_unref(r);
    return err;
}

static char *inj_set_int(QTestState *q, const char *path, const char *prop,
                         int64_t value)
{
    QDict *r = qtest_qmp(q, "{ 'execute': 'qom-set', 'arguments': "
                         "{ 'path': %s, 'property': %s, 'value': %" PRId64
                         " } }", path, prop, value);
    char *err = NULL;

    g_assert(r);
    if (qdict_haskey(r, "error")) {
        err = g_strdup(qdict_get_str(qdict_get_qdict(r, "error"), "desc"));
    }
    qobject_unref(r);
    return err;
}

static void inj_set(QTestState *q, const char *path, const char *prop,
                    const char *value)
{
    g_autofree char *err = inj_set_str(q, path, prop, value);

    g_assert_null(err);
}

static void inj_set_u32(QTestState *q, const char *path, const char *prop,
                        uint32_t value)
{
    g_autofree char *err = inj_set_int(q, path, prop, value);

    g_assert_null(err);
}

/* A bad value is refused with an error that names the property. */
static void inj_refuse(QTestState *q, const char *path, const char *prop,
                       const char *value)
{
    g_autofree char *err = inj_set_str(q, path, prop, value);

    g_assert_nonnull(err);
    g_test_message("%s = '%s': %s", prop, value, err);
}

static char *inj_get_str(QTestState *q, const char *path, const char *prop)
{
    QDict *r = qtest_qmp(q, "{ 'execute': 'qom-get', 'arguments': "
                         "{ 'path': %s, 'property': %s } }", path, prop);
    char *val;

    g_assert(r && qdict_haskey(r, "return"));
    val = g_strdup(qdict_get_str(r, "return"));
    qobject_unref(r);
    return val;
}

static int64_t inj_get_int(QTestState *q, const char *path, const char *prop)
{
    QDict *r = qtest_qmp(q, "{ 'execute': 'qom-get', 'arguments': "
                         "{ 'path': %s, 'property': %s } }", path, prop);
    int64_t val;

    g_assert(r && qdict_haskey(r, "return"));
    val = qdict_get_int(r, "return");
    qobject_unref(r);
    return val;
}

static void inj_assert_str(QTestState *q, const char *path, const char *prop,
                           const char *expect)
{
    g_autofree char *val = inj_get_str(q, path, prop);

    g_assert_cmpstr(val, ==, expect);
}

/* Every property: defaults, accepted values as read back, refused values */
static void test_inject_properties(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0,id=pa "
                            "-device pib-hca,addr=5.0,id=pb,inject-drop-tx=3,"
                            "inject-wr-error=7:1:loc_len_err,"
                            "inject-drop-opcode=RC_SEND_ONLY");
    QTestState *q = qs->qts;
    static const char *const bad_wr[] = {
        "1:2", "1:2:3:4", "x:1:4", "-1:1:4", " 1:1:4", "0x1000000:1:4",
        "1:65536:4", "1:1:0", "1:1:SUCCESS", "1:1:22", "1:1:BOGUS", "1::4",
        ":1:4", "1:1:4 ",
    };
    static const char *const bad_op[] = { "256", "-1", "FOO", "RC_", "0x" };
    static const char *const u32_props[] = {
        "inject-drop-tx", "inject-drop-rx", "inject-irq-delay-us",
        "inject-irq-delay-count",
    };
    g_autofree char *err = NULL;
    PibDev d;
    size_t i;

    /* Defaults: nothing armed. */
    inj_assert_str(q, INJ_PATH_A, "inject-wr-error", "");
    inj_assert_str(q, INJ_PATH_A, "inject-drop-opcode", "");
    for (i = 0; i < G_N_ELEMENTS(u32_props); i++) {
        g_assert_cmpint(inj_get_int(q, INJ_PATH_A, u32_props[i]), ==, 0);
    }
    /* The command line sets them too. */
    g_assert_cmpint(inj_get_int(q, INJ_PATH_B, "inject-drop-tx"), ==, 3);
    inj_assert_str(q, INJ_PATH_B, "inject-wr-error", "7:1:LOC_LEN_ERR");
    inj_assert_str(q, INJ_PATH_B, "inject-drop-opcode", "RC_SEND_ONLY");

    /* inject-wr-error: QPN:INDEX:STATUS, numbers or a status name. */
    inj_set(q, INJ_PATH_A, "inject-wr-error", "0x12:3:4");
    inj_assert_str(q, INJ_PATH_A, "inject-wr-error", "18:3:LOC_PROT_ERR");
    inj_set(q, INJ_PATH_A, "inject-wr-error", "16777215:65535:retry_exc_err");
    inj_assert_str(q, INJ_PATH_A, "inject-wr-error",
                   "16777215:65535:RETRY_EXC_ERR");
    for (i = 0; i < G_N_ELEMENTS(bad_wr); i++) {
        inj_refuse(q, INJ_PATH_A, "inject-wr-error", bad_wr[i]);
    }
    inj_assert_str(q, INJ_PATH_A, "inject-wr-error",
                   "16777215:65535:RETRY_EXC_ERR");      /* unchanged */
    inj_set(q, INJ_PATH_A, "inject-wr-error", "");
    inj_assert_str(q, INJ_PATH_A, "inject-wr-error", "");

    /* inject-drop-opcode: a name or a number; "" or "any" for any. */
    inj_set(q, INJ_PATH_A, "inject-drop-opcode", "rc_acknowledge");
    inj_assert_str(q, INJ_PATH_A, "inject-drop-opcode", "RC_ACKNOWLEDGE");
    inj_set(q, INJ_PATH_A, "inject-drop-opcode", "0x64");
    inj_assert_str(q, INJ_PATH_A, "inject-drop-opcode", "UD_SEND_ONLY");
    inj_set(q, INJ_PATH_A, "inject-drop-opcode", "21");
    inj_assert_str(q, INJ_PATH_A, "inject-drop-opcode", "0x15");
    for (i = 0; i < G_N_ELEMENTS(bad_op); i++) {
        inj_refuse(q, INJ_PATH_A, "inject-drop-opcode", bad_op[i]);
    }
    inj_assert_str(q, INJ_PATH_A, "inject-drop-opcode", "0x15");
    inj_set(q, INJ_PATH_A, "inject-drop-opcode", "any");
    inj_assert_str(q, INJ_PATH_A, "inject-drop-opcode", "");

    /* The counts: uint32; the delay at most a minute. */
    inj_set_u32(q, INJ_PATH_A, "inject-drop-rx", UINT32_MAX);
    g_assert_cmpint(inj_get_int(q, INJ_PATH_A, "inject-drop-rx"), ==,
                    UINT32_MAX);
    err = inj_set_int(q, INJ_PATH_A, "inject-drop-tx", -1);
    g_assert_nonnull(err);
    g_free(err);
    err = inj_set_int(q, INJ_PATH_A, "inject-drop-tx", 1ll << 32);
    g_assert_nonnull(err);
    g_free(err);
    err = inj_set_str(q, INJ_PATH_A, "inject-drop-tx", "many");
    g_assert_nonnull(err);
    g_free(err);
    err = inj_set_int(q, INJ_PATH_A, "inject-irq-delay-us", 60000001);
    g_assert_nonnull(err);
    inj_set_u32(q, INJ_PATH_A, "inject-irq-delay-us", 60000000);
    g_assert_cmpint(inj_get_int(q, INJ_PATH_A, "inject-irq-delay-us"), ==,
                    60000000);
    inj_set_u32(q, INJ_PATH_A, "inject-irq-delay-us", 0);
    g_assert_cmpint(inj_get_int(q, INJ_PATH_A, "inject-drop-tx"), ==, 0);

    /* A function reset keeps what is armed: it is not guest state. */
    pib_open(&d, qs, PIB_DEVFN_B);
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_RESET);
    g_assert_cmpint(inj_get_int(q, INJ_PATH_B, "inject-drop-tx"), ==, 3);
    inj_assert_str(q, INJ_PATH_B, "inject-wr-error", "7:1:LOC_LEN_ERR");
    /* None of this touched the device's guest-visible state. */
    pib_enable(&d, 4, 8);
    g_assert_cmphex(pib_nop(&d, 0x1234), ==, 0x1234);
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, 0);
    pib_close(&d);
    qtest_shutdown(qs);
}

/* inject-wr-error: the chosen WQE fails with the chosen status, QP to ERR */
static void test_inject_wr_error(void)
{
    g_autofree char *spec = NULL;
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    uint64_t cnt[PIB_CNT_MAX];
    uint32_t i;

    dp_pair_up(&p);
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);
    for (i = 0; i < 3; i++) {
        sge[0] = dp_sge(y.buf + i * 1024, 1024, y.key);
        dp_post_recv(&p.b, &y.qp, 0x10 + i, sge, 1);
    }

    /* The second of three SENDs fails with REM_ACCESS_ERR. */
    spec = g_strdup_printf("%u:%u:REM_ACCESS_ERR", x.qp.qpn, x.qp.sq_pi + 1);
    inj_set(p.qs->qts, INJ_PATH_A, "inject-wr-error", spec);
    sge[0] = dp_sge(x.buf, 100, x.key);
    for (i = 0; i < 3; i++) {
        dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x20 + i,
                     sge, 1, 0, 0);
    }
    dp_expect(&p.a, &x.scq, 0x20, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.a, &x.scq, 0x21, PIB_WC_REM_ACCESS_ERR, PIB_CQE_SEND, &cqe);
    g_assert_cmpuint(le16_to_cpu(cqe.wqe_index), ==, x.qp.sq_pi - 2);
    dp_expect(&p.a, &x.scq, 0x22, PIB_WC_WR_FLUSH_ERR, PIB_CQE_SEND, NULL);
    g_assert_cmpuint(dp_query_qp(&p.a, x.qp.qpn).qp_state, ==, PIB_QPS_ERR);
    /* Only the first one went out. */
    dp_expect(&p.b, &y.rcq, 0x10, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    dp_expect_none(&p.b, &y.rcq);

    /* One shot: spent, it reads back empty; counted on A only. */
    inj_assert_str(p.qs->qts, INJ_PATH_A, "inject-wr-error", "");
    dp_counters(&p.a, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_INJECTED_FAULTS], ==, 1);
    dp_counters(&p.b, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_INJECTED_FAULTS], ==, 0);

    /* A fault armed for a WQE index the QP never reaches does nothing. */
    dp_relink(&x, 1, &y, 2);
    spec = (g_free(spec), g_strdup_printf("%u:%u:4", x.qp.qpn, 40000));
    inj_set(p.qs->qts, INJ_PATH_A, "inject-wr-error", spec);
    sge[0] = dp_sge(y.buf, 1024, y.key);
    dp_post_recv(&p.b, &y.qp, 0x30, sge, 1);
    sge[0] = dp_sge(x.buf, 100, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x31, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x31, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x30, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/*
 * inject-drop-tx / -rx: RC recovers from each lost packet.  A lost request
 * packet: the responder NAKs the gap, the requester goes back N.  A lost ACK
 * (-rx with inject-drop-opcode): the ACK timer resends, the responder
 * answers the duplicate.
 */
static void test_inject_drop(void)
{
    QTestState *q;
    TestPair p;
    TestEnd x, y;
    struct pib_sge sge[1];
    struct pib_cqe cqe;
    uint64_t ca[PIB_CNT_MAX], cb[PIB_CNT_MAX];

    dp_pair_up(&p);
    q = p.qs->qts;
    dp_end(&p.a, &x, PIB_QPT_RC, 16384);
    dp_end(&p.b, &y, PIB_QPT_RC, 16384);
    dp_link_ends(&x, 1, &y, 2);

    /* The first packet of a 5-packet SEND is lost on its way out. */
    inj_set_u32(q, INJ_PATH_A, "inject-drop-tx", 1);
    dp_fill(&p.a, x.buf, 5000, 3);
    sge[0] = dp_sge(y.buf, 8192, y.key);
    dp_post_recv(&p.b, &y.qp, 0x1, sge, 1);
    sge[0] = dp_sge(x.buf, 5000, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x2, sge, 1,
                 0, 0);
    dp_expect(&p.a, &x.scq, 0x2, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    dp_expect(&p.b, &y.rcq, 0x1, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, 5000);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf, 5000);
    g_assert_cmpint(inj_get_int(q, INJ_PATH_A, "inject-drop-tx"), ==, 0);
    dp_counters(&p.a, ca);
    dp_counters(&p.b, cb);
    g_assert_cmpuint(ca[PIB_CNT_INJECTED_FAULTS], ==, 1);
    g_assert_cmpuint(ca[PIB_CNT_RETRANSMITS], >=, 1);
    g_assert_cmpuint(ca[PIB_CNT_SEQ_NAKS_RCVD], ==, 1);
    g_assert_cmpuint(cb[PIB_CNT_SEQ_NAKS_SENT], ==, 1);
    g_assert_cmpuint(cb[PIB_CNT_INJECTED_FAULTS], ==, 0);
    dp_expect_none(&p.a, &x.scq);           /* the link is quiet again */

    /* The ACK of the next SEND is lost on its way in: the timer resends. */
    inj_set(q, INJ_PATH_A, "inject-drop-opcode", "RC_ACKNOWLEDGE");
    inj_set_u32(q, INJ_PATH_A, "inject-drop-rx", 1);
    sge[0] = dp_sge(y.buf, 8192, y.key);
    dp_post_recv(&p.b, &y.qp, 0x3, sge, 1);
    sge[0] = dp_sge(x.buf, 100, x.key);
    dp_post_send(&p.a, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x4, sge, 1,
                 0, 0);
    dp_expect(&p.b, &y.rcq, 0x3, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    dp_expect_none(&p.a, &x.scq);           /* no ACK: nothing completes */
    dp_step_until_cqe(&p.a, &x.scq, &cqe, 10 * 1000 * 1000, 100);
    g_assert_cmphex(le64_to_cpu(cqe.wr_id), ==, 0x4);
    g_assert_cmpuint(cqe.status, ==, PIB_WC_SUCCESS);
    dp_expect_none(&p.b, &y.rcq);           /* the duplicate was not applied */
    g_assert_cmpint(inj_get_int(q, INJ_PATH_A, "inject-drop-rx"), ==, 0);
    dp_counters(&p.a, ca);
    dp_counters(&p.b, cb);
    g_assert_cmpuint(ca[PIB_CNT_INJECTED_FAULTS], ==, 2);
    g_assert_cmpuint(ca[PIB_CNT_RETRY_TIMEOUTS], >=, 1);
    g_assert_cmpuint(cb[PIB_CNT_DUPLICATE_REQUESTS], ==, 1);
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

/* Send MSI-X vector's message to guest RAM: addr <- data, unmasked. */
static void inj_msix_to_ram(PibDev *d, unsigned vector, uint64_t addr,
                            uint32_t data)
{
    uint64_t entry = d->dev->msix_table_off + vector * PCI_MSIX_ENTRY_SIZE;

    qpci_io_writel(d->dev, d->dev->msix_table_bar,
                   entry + PCI_MSIX_ENTRY_LOWER_ADDR, (uint32_t)addr);
    qpci_io_writel(d->dev, d->dev->msix_table_bar,
                   entry + PCI_MSIX_ENTRY_UPPER_ADDR, addr >> 32);
    qpci_io_writel(d->dev, d->dev->msix_table_bar,
                   entry + PCI_MSIX_ENTRY_DATA, data);
    qpci_io_writel(d->dev, d->dev->msix_table_bar,
                   entry + PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
}

/*
 * inject-irq-delay-us: the admin completion is written at once, its
 * interrupt only once the virtual clock passed the delay.
 */
static void test_inject_irq_delay(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0,id=pa");
    QTestState *q = qs->qts;
    uint64_t cnt[PIB_CNT_MAX];
    uint64_t msg;
    PibDev d;

    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 4, 8);
    msg = dp_alloc(&d, 4096);
    inj_msix_to_ram(&d, PIB_MSIX_VEC_ADMIN, msg, 0xfeed);
    g_assert_cmphex(pib_nop(&d, 1), ==, 1);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0xfeed);     /* on time */

    /* The next interrupt only, 5 ms late. */
    inj_set_u32(q, INJ_PATH_A, "inject-irq-delay-count", 1);
    inj_set_u32(q, INJ_PATH_A, "inject-irq-delay-us", 5000);
    qtest_writel(q, msg, 0);
    g_assert_cmphex(pib_nop(&d, 2), ==, 2);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0);
    qtest_clock_step(q, 4999 * 1000);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0);
    qtest_clock_step(q, 1000);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0xfeed);
    /* Count spent: the delay switched itself off. */
    g_assert_cmpint(inj_get_int(q, INJ_PATH_A, "inject-irq-delay-us"), ==, 0);
    g_assert_cmpint(inj_get_int(q, INJ_PATH_A, "inject-irq-delay-count"), ==,
                    0);
    qtest_writel(q, msg, 0);
    g_assert_cmphex(pib_nop(&d, 3), ==, 3);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0xfeed);

    /* Every interrupt: a second one while the first waits rides along. */
    inj_set_u32(q, INJ_PATH_A, "inject-irq-delay-us", 1000);
    qtest_writel(q, msg, 0);
    g_assert_cmphex(pib_nop(&d, 4), ==, 4);
    g_assert_cmphex(pib_nop(&d, 5), ==, 5);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0);
    qtest_clock_step(q, 1000 * 1000);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0xfeed);
    inj_set_u32(q, INJ_PATH_A, "inject-irq-delay-us", 0);
    qtest_writel(q, msg, 0);
    dp_counters(&d, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_INJECTED_FAULTS], ==, 2);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0xfeed);     /* on time again */

    /* A reset forgets an interrupt still held back. */
    inj_set_u32(q, INJ_PATH_A, "inject-irq-delay-us", 1000);
    qtest_writel(q, msg, 0);
    g_assert_cmphex(pib_nop(&d, 6), ==, 6);
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_RESET);
    qtest_clock_step(q, 2000 * 1000);
    g_assert_cmphex(qtest_readl(q, msg), ==, 0);
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, 0);
    pib_close(&d);
    qtest_shutdown(qs);
}

/*
 * 11. Benchmarks, only in GLib's perf mode (pib-test -m perf): two HCAs in
 * one QEMU, RC at MTU 4096.  Each reports wall-clock throughput and the CPU
 * time the QEMU process spent, read from /proc (the device's cost; the test
 * itself runs on another core and only polls).
 */

#define BENCH_MTU_4096      5

/* The QEMU process this test started: our child named qemu-system-*. */
static pid_t bench_qemu_pid(void)
{
    g_autofree char *path = g_strdup_printf("/proc/self/task/%d/children",
                                            (int)getpid());
    g_autofree char *list = NULL;
    g_auto(GStrv) pids = NULL;
    int i;

    g_assert_true(g_file_get_contents(path, &list, NULL, NULL));
    pids = g_strsplit(g_strstrip(list), " ", -1);
    for (i = 0; pids[i]; i++) {
        g_autofree char *comm_path = g_strdup_printf("/proc/%s/comm",
                                                     pids[i]);
        g_autofree char *comm = NULL;

        if (g_file_get_contents(comm_path, &comm, NULL, NULL) &&
            g_str_has_prefix(comm, "qemu-system")) {
            return atoi(pids[i]);
        }
    }
    g_assert_not_reached();
}

/* utime + stime of a process, in seconds. */
static double bench_cpu_s(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
    g_autofree char *stat = NULL;
    unsigned long long utime, stime;
    const char *p;

    g_assert_true(g_file_get_contents(path, &stat, NULL, NULL));
    p = strrchr(stat, ')');     /* comm may hold blanks: skip past it */
    g_assert_nonnull(p);
    g_assert_cmpint(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
                           "%*u %llu %llu", &utime, &stime), ==, 2);
    return (double)(utime + stime) / sysconf(_SC_CLK_TCK);
}

typedef struct BenchClock {
    pid_t pid;
    gint64 wall0;
    double cpu0;
} BenchClock;

static void bench_start(BenchClock *c, pid_t pid)
{
    c->pid = pid;
    c->cpu0 = bench_cpu_s(pid);
    c->wall0 = g_get_monotonic_time();
}

/* Report bytes (or, with bytes 0, msgs messages) moved since bench_start. */
static void bench_report(BenchClock *c, const char *what, uint64_t bytes,
                         uint64_t msgs)
{
    double wall = (g_get_monotonic_time() - c->wall0) / 1e6;
    double cpu = bench_cpu_s(c->pid) - c->cpu0;

    if (bytes) {
        g_test_message("bench %-28s %8.1f MiB/s   QEMU CPU %6.3f s/GiB",
                       what, bytes / wall / (1 << 20),
                       cpu / ((double)bytes / (1 << 30)));
    } else {
        g_test_message("bench %-28s %8.0f msg/s   QEMU CPU %6.2f us/msg",
                       what, msgs / wall, cpu * 1e6 / msgs);
    }
}

/*
 * Batched posting and polling for the small-message benchmark, so that it
 * measures the device rather than the qtest protocol (one command costs more
 * than a small message does): n WQEs, one SGE each, go into consecutive ring
 * slots with one memory write per contiguous run and one doorbell, and n
 * CQEs are awaited by the last one's phase and consumed with one read.
 */
static void bench_write_slots(PibDev *d, uint64_t ring, uint32_t depth,
                              uint32_t stride_log, uint32_t pi,
                              const uint8_t *slots, uint32_t n)
{
    uint32_t first = pi & (depth - 1), run = MIN(n, depth - first);

    qtest_memwrite(qts(d), ring + ((uint64_t)first << stride_log), slots,
                   (size_t)run << stride_log);
    if (run < n) {
        qtest_memwrite(qts(d), ring, slots + ((size_t)run << stride_log),
                       (size_t)(n - run) << stride_log);
    }
}

/* SENDs i = 0..n-1 of len bytes from buf + i * len; only the last signaled */
static void bench_post_sends(PibDev *d, TestQp *qp, uint32_t n, uint64_t buf,
                             uint32_t len, uint32_t key)
{
    size_t stride = (size_t)1 << qp->sq_stride_log;
    g_autofree uint8_t *slots = g_malloc0(n * stride);
    uint32_t i;

    for (i = 0; i < n; i++) {
        struct pib_send_wqe wqe = {
            .opcode = PIB_WQE_SEND,
            .flags = i == n - 1 ? PIB_WQE_F_SIGNALED : 0,
            .num_sge = 1,
            .wr_id = cpu_to_le64(i),
        };
        struct pib_sge sge = dp_sge(buf + i * len, len, key);

        memcpy(slots + i * stride, &wqe, sizeof(wqe));
        memcpy(slots + i * stride + sizeof(wqe), &sge, sizeof(sge));
    }
    bench_write_slots(d, qp->sq, qp->sq_depth, qp->sq_stride_log, qp->sq_pi,
                      slots, n);
    qp->sq_pi += n;
    dp_doorbell(d, qp->uar, PIB_UAR_SQ_DB, qp->qpn, qp->sq_pi);
}

/* Receives i = 0..n-1 of len bytes at buf + i * len. */
static void bench_post_recvs(PibDev *d, TestQp *qp, uint32_t n, uint64_t buf,
                             uint32_t len, uint32_t key)
{
    size_t stride = (size_t)1 << qp->rq_stride_log;
    g_autofree uint8_t *slots = g_malloc0(n * stride);
    uint32_t i;

    for (i = 0; i < n; i++) {
        struct pib_recv_wqe wqe = {
            .wr_id = cpu_to_le64(i),
            .num_sge = 1,
        };
        struct pib_sge sge = dp_sge(buf + i * len, len, key);

        memcpy(slots + i * stride, &wqe, sizeof(wqe));
        memcpy(slots + i * stride + sizeof(wqe), &sge, sizeof(sge));
    }
    bench_write_slots(d, qp->rq, qp->rq_depth, qp->rq_stride_log, qp->rq_pi,
                      slots, n);
    qp->rq_pi += n;
    dp_doorbell(d, qp->uar, PIB_UAR_RQ_DB, qp->qpn, qp->rq_pi);
}

/*
 * The next n CQEs, all successful with this opcode and wr_ids 0..n-1 (or,
 * with one_last, the single CQE of wr_id n - 1).
 */
static void bench_expect(PibDev *d, TestCq *cq, uint32_t n, uint8_t opcode,
                         bool one_last)
{
    uint32_t want = one_last ? 1 : n, i, slot;
    g_autofree struct pib_cqe *cqe = g_new(struct pib_cqe, cq->depth);
    uint32_t last = cq->ci + want - 1;
    uint64_t last_addr = cq->ring + (last & (cq->depth - 1)) * sizeof(*cqe);
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;

    g_assert_cmpuint(want, <=, cq->depth);
    for (;;) {
        qtest_memread(qts(d), last_addr, cqe, sizeof(*cqe));
        if ((cqe->flags & PIB_CQE_F_PHASE) == phase_of(last, cq->depth)) {
            break;
        }
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(dp_poll_interval_us);
    }
    qtest_memread(qts(d), cq->ring, cqe, cq->depth * sizeof(*cqe));
    for (i = 0; i < want; i++) {
        slot = (cq->ci + i) & (cq->depth - 1);
        g_assert_cmpuint(cqe[slot].flags & PIB_CQE_F_PHASE, ==,
                         phase_of(cq->ci + i, cq->depth));
        g_assert_cmpuint(cqe[slot].status, ==, PIB_WC_SUCCESS);
        g_assert_cmphex(cqe[slot].opcode, ==, opcode);
        g_assert_cmphex(le64_to_cpu(cqe[slot].wr_id), ==,
                        one_last ? n - 1 : i);
    }
    cq->ci += want;
    qtest_writel(qts(d), cq->ring + cq->ring_bytes, cq->ci);
}

static void test_bench(void)
{
    /* PIB_BENCH_ROUNDS=N moves N times as much data (steadier figures). */
    const char *rounds_env = g_getenv("PIB_BENCH_ROUNDS");
    const uint32_t rounds = rounds_env ? MAX(atoi(rounds_env), 1) : 1;
    const uint32_t big = 4 << 20, n_big = 16;
    const uint32_t mid = 64 << 10, n_mid = 256;
    const uint32_t n_small = 4096;
    TestPair p;
    TestEnd x, y;
    BenchClock c;
    struct pib_sge sge[1];
    uint32_t i, j;
    pid_t pid;

    dp_pair_up(&p);
    pid = bench_qemu_pid();
    dp_poll_interval_us = 2000;
    dp_end(&p.a, &x, PIB_QPT_RC, big);
    dp_end(&p.b, &y, PIB_QPT_RC, big);
    dp_connect_ex(&p.a, &x.qp, 2, y.qp.qpn, BENCH_MTU_4096, 14, 7, 7);
    dp_connect_ex(&p.b, &y.qp, 1, x.qp.qpn, BENCH_MTU_4096, 14, 7, 7);
    dp_fill(&p.a, x.buf, big, 5);

    /* RDMA WRITE, 4 MiB each, 16 in flight (one SQ's worth). */
    g_test_message("bench: WRITE runs (QEMU pid %d)", (int)pid);
    bench_start(&c, pid);
    sge[0] = dp_sge(x.buf, big, x.key);
    for (j = 0; j < rounds; j++) {
        for (i = 0; i < n_big; i++) {
            dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED,
                         i, sge, 1, y.buf, y.key);
        }
        for (i = 0; i < n_big; i++) {
            dp_expect(&p.a, &x.scq, i, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE,
                      NULL);
        }
    }
    bench_report(&c, "RC WRITE 4 MiB", (uint64_t)big * n_big * rounds, 0);
    dp_assert_same(&p.a, x.buf, &p.b, y.buf, big);

    /* RDMA READ, 4 MiB each. */
    bench_start(&c, pid);
    for (i = 0; i < n_big * rounds; i++) {
        dp_post_send(&p.a, &x.qp, PIB_WQE_RDMA_READ, PIB_WQE_F_SIGNALED, i,
                     sge, 1, y.buf, y.key);
        if (i % 4 == 3) {       /* max_rd_atomic 4 */
            for (j = i - 3; j <= i; j++) {
                dp_expect(&p.a, &x.scq, j, PIB_WC_SUCCESS, PIB_CQE_RDMA_READ,
                          NULL);
            }
        }
    }
    bench_report(&c, "RC READ 4 MiB", (uint64_t)big * n_big * rounds, 0);

    /* SEND, 64 KiB each, in batches of 16 receives. */
    bench_start(&c, pid);
    for (i = 0; i < n_mid * rounds; i += 16) {
        for (j = 0; j < 16; j++) {
            sge[0] = dp_sge(y.buf + j * mid, mid, y.key);
            dp_post_recv(&p.b, &y.qp, j, sge, 1);
        }
        for (j = 0; j < 16; j++) {
            sge[0] = dp_sge(x.buf + j * mid, mid, x.key);
            dp_post_send(&p.a, &x.qp, PIB_WQE_SEND,
                         j == 15 ? PIB_WQE_F_SIGNALED : 0, j, sge, 1, 0, 0);
        }
        dp_expect(&p.a, &x.scq, 15, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
        for (j = 0; j < 16; j++) {
            dp_expect(&p.b, &y.rcq, j, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
        }
    }
    bench_report(&c, "RC SEND 64 KiB", (uint64_t)mid * n_mid * rounds, 0);

    /*
     * Small SENDs: 64 bytes, batches of 16 (a ring's worth), posted and
     * reaped in bulk.  Still mostly the qtest protocol: a batch takes a dozen
     * commands, and each costs QEMU more than a small message does.
     */
    dp_poll_interval_us = 100;
    bench_start(&c, pid);
    for (i = 0; i < n_small * rounds; i += 16) {
        bench_post_recvs(&p.b, &y.qp, 16, y.buf, 64, y.key);
        bench_post_sends(&p.a, &x.qp, 16, x.buf, 64, x.key);
        bench_expect(&p.a, &x.scq, 16, PIB_CQE_SEND, true);
        bench_expect(&p.b, &y.rcq, 16, PIB_CQE_RECV, false);
    }
    bench_report(&c, "RC SEND 64 B", 0, n_small * rounds);
    dp_poll_interval_us = 200;
    g_assert_cmpuint(dp_err_count(&p.a), ==, 0);
    g_assert_cmpuint(dp_err_count(&p.b), ==, 0);
    dp_pair_down(&p);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    qtest_add_func("/pib/reset-values", test_reset_values);
    qtest_add_func("/pib/admin/roundtrip", test_admin_roundtrip);
    qtest_add_func("/pib/admin/bad-commands", test_bad_commands);
    qtest_add_func("/pib/admin/uar-alloc", test_uar_alloc);
    qtest_add_func("/pib/doorbells", test_doorbells);
    qtest_add_func("/pib/config/bad", test_bad_config);
    qtest_add_func("/pib/config/fatal-cq", test_fatal_cq);
    qtest_add_func("/pib/config/rings-at-own-bar", test_rings_at_own_bar);
    qtest_add_func("/pib/aeq", test_aeq);
    qtest_add_func("/pib/link/pair", test_link_pair);
    qtest_add_func("/pib/link/framing", test_link_framing);
    qtest_add_func("/pib/data/objects", test_dp_objects);
    qtest_add_func("/pib/data/send-recv", test_dp_send_recv);
    qtest_add_func("/pib/data/errors", test_dp_errors);
    qtest_add_func("/pib/data/rnr", test_dp_rnr);
    qtest_add_func("/pib/data/retry", test_dp_retry);
    qtest_add_func("/pib/data/rdma", test_dp_rdma);
    qtest_add_func("/pib/data/ud-uc", test_dp_ud_uc);
    qtest_add_func("/pib/data/cq-overflow", test_dp_cq_overflow);
    qtest_add_func("/pib/data/srq", test_dp_srq);
    qtest_add_func("/pib/data/mw", test_dp_mw);
    qtest_add_func("/pib/data/wire", test_dp_wire);
    qtest_add_func("/pib/data/link-death", test_dp_link_death);
    qtest_add_func("/pib/inject/properties", test_inject_properties);
    qtest_add_func("/pib/inject/wr-error", test_inject_wr_error);
    qtest_add_func("/pib/inject/drop", test_inject_drop);
    qtest_add_func("/pib/inject/irq-delay", test_inject_irq_delay);
    if (g_test_perf()) {
        qtest_add_func("/pib/bench/rc", test_bench);
    }

    return g_test_run();
}
