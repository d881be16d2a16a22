/*
 * QTest: the pib HCA's control plane (hw/pib)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * One device, no link: PCI identity and the registers' reset values, admin
 * commands and their completions, bad commands, UAR allocation, doorbells for
 * queues that do not exist, bad configuration at ENABLE, and the async event
 * queue.  The fixture is pib-qtest.h.
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-ctrl-test
 */

#include "qemu/osdep.h"
#include "hw/pci/pci_regs.h"
#include "qemu/units.h"

#include "pib-qtest.h"

/*
 * Identity and reset values
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
 * Admin round trip
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
    uint32_t i;

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
    /* mlx5's depths (docs/reference/hardware.md, "Limits"); a CQ's depth, not verbs' count. */
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_qp_wr), ==, 32768);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_srq_wr), ==, 32768);
    g_assert_cmpuint(le32_to_cpu(dev_attr.max_cqe), ==, 4194304);
    g_assert_cmpuint(le16_to_cpu(dev_attr.max_pkeys), ==, PIB_PKEY_TBL_LEN);
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
    g_assert_cmpuint(le16_to_cpu(port_attr.gid_tbl_len), ==, PIB_GID_TBL_LEN);
    g_assert_cmpuint(le16_to_cpu(port_attr.pkey_tbl_len), ==, PIB_PKEY_TBL_LEN);
    /* What the firmware's SMA implements is in the CapabilityMask from the start. */
    g_assert_cmphex(le32_to_cpu(port_attr.port_cap_flags), ==, PIB_PORT_CAP_FIRMWARE);
    g_assert_cmpuint(le32_to_cpu(port_attr.max_msg_sz), ==, 1u << 31);
    g_assert_cmpuint(le32_to_cpu(port_attr.link_downs), ==, 0);
    g_assert_cmpuint(port_attr.max_vl_num, ==, 3);          /* VLCap: VL0-VL3 */

    /*
     * QUERY_PKEY: until an SM fills the table, the default P_Key at index 0 and
     * nothing (0) elsewhere.  QUERY_GID: the one GID.
     */
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_QUERY_PKEY,
        .in.port.port_num = 1,
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, &cqe), ==, PIB_AQ_OK);
    g_assert_cmphex(le32_to_cpu(cqe.result0), ==, 0xffff);
    cmd.in.port.index = cpu_to_le32(PIB_PKEY_TBL_LEN - 1);
    g_assert_cmpuint(pib_cmd(&d, &cmd, &cqe), ==, PIB_AQ_OK);
    g_assert_cmphex(le32_to_cpu(cqe.result0), ==, 0);
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
    pib_nop_ring(&d, 0);

    g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, 0);
    g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_READY);
    pib_close(&d);
    qtest_shutdown(qs);
}

/*
 * Bad commands: status codes, never a crash, and the device works afterwards
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
        .in.port = { .port_num = 1, .index = cpu_to_le32(PIB_PKEY_TBL_LEN) },
    };
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);
    cmd.opcode = PIB_CMD_QUERY_GID;
    cmd.in.port.index = cpu_to_le32(PIB_GID_TBL_LEN);
    g_assert_cmpuint(pib_cmd(&d, &cmd, NULL), ==, PIB_AQ_BAD_PARAM);

    /* SET_PORT: an SM sets the LID (this device has no `lid`); unknown mask bits. */
    g_assert_cmpuint(pib_set_lid(&d, 10), ==, PIB_AQ_BAD_STATE);
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
 * Doorbell and register rules
 */

/*
 * The device clock: the same in every UAR page, standing still until the
 * virtual clock moves and then moving by exactly as much, LO carrying into
 * HI; reads of another size and writes are guest errors that change nothing.
 */
static void test_clock(void)
{
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0");
    uint32_t errs = 0;
    uint64_t c0, c1;
    uint32_t lo;
    PibDev d;

    pib_open(&d, qs, PIB_DEVFN_A);

    /* Before ENABLE too: the clock runs from power-on, in every page.  (The virtual clock
     * is read with a step of 1 ns: QEMU 10's qtest answers FAIL to a step of 0.) */
    c0 = qtest_clock_step(qts(&d), 1);
    g_assert_cmpuint(pib_clock_read(&d, 0), ==, c0);
    g_assert_cmpuint(pib_clock_read(&d, 7), ==, c0);
    g_assert_cmpuint(pib_clock_read(&d, PIB_NUM_UARS - 1), ==, c0);
    qtest_clock_step(qts(&d), 12345);
    c1 = pib_clock_read(&d, 0);
    g_assert_cmpuint(c1, ==, c0 + 12345);
    g_assert_cmpuint(pib_clock_read(&d, 1), ==, c1);

    /* LO wraps into HI: step to 5 ns past the next 2^32. */
    lo = (uint32_t)c1;
    qtest_clock_step(qts(&d), (1ull << 32) - lo + 5);
    g_assert_cmphex(qpci_io_readl(d.dev, d.bar2, PIB_UAR_CLOCK_LO), ==, 5);
    g_assert_cmphex(qpci_io_readl(d.dev, d.bar2, PIB_UAR_CLOCK_HI), ==,
                    (c1 >> 32) + 1);
    c1 = pib_clock_read(&d, 0);

    /* 64-bit and 16-bit reads, writes: guest errors; the clock goes on. */
    g_assert_cmphex(qpci_io_readq(d.dev, d.bar2, PIB_UAR_CLOCK_LO), ==, 0);
    pib_expect_guest_error(&d, &errs, PIB_GERR_UAR_DB_BAD_OFF);
    g_assert_cmphex(qpci_io_readw(d.dev, d.bar2, PIB_UAR_CLOCK_HI), ==, 0);
    pib_expect_guest_error(&d, &errs, PIB_GERR_UAR_DB_BAD_OFF);
    qpci_io_writel(d.dev, d.bar2, PIB_UAR_CLOCK_LO, 0);
    pib_expect_guest_error(&d, &errs, PIB_GERR_UAR_DB_BAD_OFF);
    qpci_io_writeq(d.dev, d.bar2, PIB_UAR_CLOCK_LO, 0);
    pib_expect_guest_error(&d, &errs, PIB_GERR_UAR_DB_BAD_OFF);
    g_assert_cmphex(qpci_io_readl(d.dev, d.bar2, 0x28), ==, 0);
    pib_expect_guest_error(&d, &errs, PIB_GERR_UAR_DB_BAD_OFF);
    g_assert_cmpuint(pib_clock_read(&d, 0), ==, c1);

    /* A function reset does not stop or rewind it. */
    wr(&d, PIB_REG_CONTROL, PIB_CTRL_RESET);
    qtest_clock_step(qts(&d), 1000);
    g_assert_cmpuint(pib_clock_read(&d, 0), ==, c1 + 1000);

    pib_close(&d);
    qtest_shutdown(qs);
}

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
 * Bad configuration at ENABLE; a dead admin CQ is fatal until reset
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
    /* (lid=1: without an SM, SET_PORT may change the LID, which raises an event) */
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0,lid=1");
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
    } while (!(cqe.flags & PIB_ACQE_F_PHASE));
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
    /* Without an SM (the `lid` property), SET_PORT changes the LID. */
    QOSState *qs = pib_boot("-device pib-hca,addr=4.0,lid=1");
    struct pib_port_attr attr;
    struct pib_aeqe e;
    uint32_t errs = 0;
    PibDev d;

    pib_open(&d, qs, PIB_DEVFN_A);
    pib_enable(&d, 8, 2);
    g_assert_false(qpci_msix_pending(d.dev, PIB_MSIX_VEC_ASYNC));

    /* SET_PORT refuses LID 0, 0xffff and multicast LIDs. */
    g_assert_cmpuint(pib_set_lid(&d, 0), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(pib_set_lid(&d, 0xffff), ==, PIB_AQ_BAD_PARAM);
    g_assert_cmpuint(pib_set_lid(&d, 0xc000), ==, PIB_AQ_BAD_PARAM);

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
    g_assert_cmpuint(e.flags & PIB_AEQE_F_PHASE, ==, 1);
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
    g_assert_cmpuint(e.flags & PIB_AEQE_F_PHASE, ==, 0);
    g_assert_cmpuint(rd(&d, PIB_REG_AEQ_LOST), ==, 1);

    pib_close(&d);
    qtest_shutdown(qs);
}

/*
 * Teach mode (qemu-hw/hca/pib-teach.c): each rule broken once is reported, as a count in the
 * teach-reports property, and the device does what it does without the mode; with teach off
 * the same mistakes report nothing.  Correct use (program, enable, a ring full of distinct
 * cmd_ids in one doorbell, an event queue handed back, an MR in memory) reports nothing
 * either way.
 */
#define TEACH_DEV_ID "pa"

static uint32_t teach_reports(PibDev *d)
{
    return qom_get_u32(qts(d), "/machine/peripheral/" TEACH_DEV_ID, "teach-reports");
}

static void test_teach(void)
{
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe cqe;
    uint32_t first, i, on, want, round, lost, lid = 1, pdn, key;
    uint64_t end_of_ram = 256 * MiB;            /* pib_boot's machine: -m 256M */
    struct pib_aeqe e;

    for (on = 0; on <= 1; on++) {
        /* lid=1: no SM, so that SET_PORT changes the LID (events for eq-overrun). */
        QOSState *qs = pib_boot(on ? "-device pib-hca,addr=4.0,lid=1,id=" TEACH_DEV_ID
                                     ",teach=on"
                                   : "-device pib-hca,addr=4.0,lid=1,id=" TEACH_DEV_ID);
        PibDev d;

        pib_open(&d, qs, PIB_DEVFN_A);
        pib_enable(&d, 4, 8);
        pib_nop_ring(&d, 0);
        g_assert_cmpuint(teach_reports(&d), ==, 0);

        /* config-while-ready: the ring stays the latched one (NOPs still work). */
        wr(&d, PIB_REG_AQ_DEPTH, 64);
        g_assert_cmpuint(teach_reports(&d), ==, on);
        g_assert_cmphex(pib_nop(&d, 0x7ea), ==, 0x7ea);
        wr(&d, PIB_REG_AQ_DEPTH, d.depth);
        want = 2 * on;
        g_assert_cmpuint(teach_reports(&d), ==, want);

        /* cmd-id-reused: two NOPs in one doorbell, both cmd_id 0x42; both complete. */
        first = d.pi;
        for (i = 0; i < 2; i++) {
            cmd = (struct pib_admin_cmd) { .opcode = PIB_CMD_NOP };
            pib_post(&d, &cmd);
            cmd.cmd_id = cpu_to_le16(0x42);
            qtest_memwrite(qts(&d), d.sq + ((first + i) & (d.depth - 1)) * sizeof(cmd), &cmd,
                           sizeof(cmd));
        }
        wr(&d, PIB_REG_AQ_DB, d.pi);
        for (i = 0; i < 2; i++) {
            pib_wait_cqe_raw(&d, first + i, &cqe);
            g_assert_cmpuint(cqe.status, ==, PIB_AQ_OK);
            g_assert_cmpuint(le16_to_cpu(cqe.cmd_id), ==, 0x42);
        }
        want += on;
        g_assert_cmpuint(teach_reports(&d), ==, want);
        /* The same doorbell again: nothing new waits, nothing more is said. */
        wr(&d, PIB_REG_AQ_DB, d.pi);
        g_assert_cmpuint(teach_reports(&d), ==, want);
        g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, 0);

        /*
         * eq-overrun: LID changes into the 8-entry AEQ, never handed back, until one is lost:
         * said once, however many more are lost; once the driver has handed the entries back
         * and the queue overruns again, said again.
         */
        for (round = 0; round < 2; round++) {
            lost = rd(&d, PIB_REG_AEQ_LOST);
            for (i = 0; rd(&d, PIB_REG_AEQ_LOST) == lost; i++) {
                g_assert_cmpuint(i, <=, d.aeq_depth);
                g_assert_cmpuint(pib_set_lid(&d, ++lid), ==, PIB_AQ_OK);
            }
            want += on;
            g_assert_cmpuint(teach_reports(&d), ==, want);
            g_assert_cmpuint(pib_set_lid(&d, ++lid), ==, PIB_AQ_OK);
            g_assert_cmpuint(pib_set_lid(&d, ++lid), ==, PIB_AQ_OK);
            g_assert_cmpuint(rd(&d, PIB_REG_AEQ_LOST), ==, lost + 3);
            g_assert_cmpuint(teach_reports(&d), ==, want);
            for (i = 0; pib_aeq_next(&d, &e, 10000); i++) {
                g_assert_cmpuint(e.type, ==, PIB_AE_LID_CHANGE);
            }
            g_assert_cmpuint(i, ==, d.aeq_depth);
        }

        /*
         * page-not-memory: an MR whose second page is past the end of RAM.  The device takes
         * it (it finds out at the first access); an MR all in memory says nothing.
         */
        pdn = dp_create_pd(&d);
        g_assert_cmpuint(dp_reg_mr_status(&d, pdn, 0, end_of_ram - 4096, 8192, &key), ==,
                         PIB_AQ_OK);
        want += on;
        g_assert_cmpuint(teach_reports(&d), ==, want);
        dp_reg_mr(&d, pdn, 0, dp_alloc(&d, 8192), 8192);
        g_assert_cmpuint(teach_reports(&d), ==, want);
        g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, 0);

        /*
         * ring-not-memory: an AEQ of 512 entries (8 KiB) in the last 4 KiB of RAM runs off its
         * end.  ENABLE accepts it (it is aligned); teach mode says so at once.
         */
        wr(&d, PIB_REG_CONTROL, 0);
        g_assert_cmpuint(teach_reports(&d), ==, want);      /* (not READY: nothing latched) */
        pib_program_queues(&d, 4, 8);
        wr(&d, PIB_REG_AEQ_DEPTH, 512);
        wr(&d, PIB_REG_AEQ_LO, (uint32_t)(end_of_ram - 4096));
        wr(&d, PIB_REG_AEQ_HI, 0);
        g_assert_cmpuint(teach_reports(&d), ==, want);
        wr(&d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
        g_assert_cmphex(rd(&d, PIB_REG_STATUS), ==, PIB_STATUS_READY);
        want += on;
        g_assert_cmpuint(teach_reports(&d), ==, want);
        g_assert_cmphex(pib_nop(&d, 0x7eb), ==, 0x7eb);
        g_assert_cmpuint(teach_reports(&d), ==, want);

        pib_close(&d);
        qtest_shutdown(qs);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    qtest_add_func("/pib/reset-values", test_reset_values);
    qtest_add_func("/pib/admin/roundtrip", test_admin_roundtrip);
    qtest_add_func("/pib/admin/bad-commands", test_bad_commands);
    qtest_add_func("/pib/admin/uar-alloc", test_uar_alloc);
    qtest_add_func("/pib/doorbells", test_doorbells);
    qtest_add_func("/pib/clock", test_clock);
    qtest_add_func("/pib/config/bad", test_bad_config);
    qtest_add_func("/pib/config/fatal-cq", test_fatal_cq);
    qtest_add_func("/pib/config/rings-at-own-bar", test_rings_at_own_bar);
    qtest_add_func("/pib/aeq", test_aeq);
    qtest_add_func("/pib/teach", test_teach);

    return g_test_run();
}
