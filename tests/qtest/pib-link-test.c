/*
 * QTest: the pib HCA's link (hw/pib)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The cable between two ports (include/pib_link.h): two devices in one QEMU
 * train their link and reach ACTIVE; then this test is the peer on a device's
 * socket and checks the framing rules, partial reads, loss of framing and
 * retraining.  The fixture (pib-qtest.h) has the peer's helpers.
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-link-test
 */

#include "qemu/osdep.h"
#include <glib/gstdio.h>

#include "pib-qtest.h"

/*
 * Two HCAs, one link: both ports reach ACTIVE
 */

static void test_link_pair(void)
{
    g_autofree char *dir = g_dir_make_tmp("pib-qtest-XXXXXX", NULL);
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
 * The link against this test as the peer: framing, partial reads, loss of
 * framing, retrain
 */

static void test_link_framing(void)
{
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
    PeerLink l;

    peer_boot(&l, 3);
    pib_open(&d, l.qs, PIB_DEVFN_A);
    pib_enable(&d, 8, 16);
    g_assert_cmpuint(pib_query_port(&d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(attr.state, ==, PIB_PORT_DOWN);
    g_assert_cmpuint(attr.phys_state, ==, PIB_PHYS_POLLING);

    /* Connect, train, and see data frames swallowed without harm. */
    fd = peer_connect(l.path);
    peer_bring_up(&d, fd, TEST_NODE_GUID);
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
    fd = peer_connect(l.path);
    peer_bring_up(&d, fd, TEST_NODE_GUID);
    peer_write(fd, &big, sizeof(big));
    peer_expect_eof(fd);
    close(fd);
    peer_expect_down(&d, 2);

    /* Retrain; then an unknown frame type. */
    fd = peer_connect(l.path);
    peer_bring_up(&d, fd, TEST_NODE_GUID);
    peer_write(fd, &odd, sizeof(odd));
    peer_expect_eof(fd);
    close(fd);
    peer_expect_down(&d, 3);

    /* Retrain; then the peer simply goes away. */
    fd = peer_connect(l.path);
    peer_bring_up(&d, fd, TEST_NODE_GUID);
    close(fd);
    peer_expect_down(&d, 4);

    /* None of this was the guest's fault. */
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, 0);
    g_assert_cmpuint(rd(&d, PIB_REG_AEQ_LOST), ==, 0);

    pib_close(&d);
    peer_shutdown(&l);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    qtest_add_func("/pib/link/pair", test_link_pair);
    qtest_add_func("/pib/link/framing", test_link_framing);

    return g_test_run();
}
