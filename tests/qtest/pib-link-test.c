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
 * retraining, a burst of frames far larger than one read, and a transmit
 * burst far larger than the socket holds, on both of the device's link paths
 * (docs/reference/hardware.md, "The link": .../direct, the default, where the device
 * reads and writevs the socket itself, and .../chardev, link-direct=off).  The fixture (pib-qtest.h) has
 * the peer's helpers.  /pib/link/doorbell checks the eventfds the two ends
 * of a unix socket trade in their HELLOs.  /pib/link/credits plays a receiver that grants
 * little credit (pib_link.h, "Credits") and a sender the device grants credit to.
 *
 * Run: QTEST_QEMU_BINARY=build/qemu-system-x86_64 build/qtest/pib-link-test
 */

#include "qemu/osdep.h"
#include <glib/gstdio.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

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

/*
 * A guest-less QEMU with one HCA at this LID and these more properties
 * (",name=value..."), enabled with queues of these depths; this test is to
 * be its link peer.
 */
static void link_boot_props(PeerLink *l, PibDev *d, const char *props,
                            uint16_t lid, uint32_t depth, uint32_t aeq_depth)
{
    pib_dev_props = props;
    peer_boot(l, lid);
    pib_dev_props = "";
    pib_open(d, l->qs, PIB_DEVFN_A);
    pib_enable(d, depth, aeq_depth);
}

/* The same on the link path the test data names ("direct" or "chardev"). */
static void link_boot(PeerLink *l, PibDev *d, const void *path, uint16_t lid,
                      uint32_t depth, uint32_t aeq_depth)
{
    link_boot_props(l, d, g_str_equal(path, "chardev") ? ",link-direct=off" : "",
                    lid, depth, aeq_depth);
}

static void test_link_framing(const void *path)
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

    link_boot(&l, &d, path, 3, 8, 16);
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

/*
 * A burst: 65,536 empty PACKET frames (256 KiB, more than one direct read
 * and 64 chardev reads) in one write, then a full-size frame in three pieces
 * split inside its header and its payload.  Every frame is taken, in order
 * (each is malformed as a packet: counted, dropped), the receive queue stays
 * bounded on the way, and the link stays up.
 */
#define BURST_FRAMES        65536

static void test_link_burst(const void *path)
{
    g_autofree uint8_t *burst = g_malloc(BURST_FRAMES * PIB_LINK_HDR_LEN);
    g_autofree uint8_t *big = g_malloc0(PIB_LINK_HDR_LEN +
                                        PIB_LINK_MAX_PAYLOAD);
    struct pib_link_hdr hdr = {
        .magic = PIB_LINK_MAGIC,
        .type = PIB_FRAME_PACKET,
    };
    struct pib_port_attr attr;
    uint64_t cnt[PIB_CNT_MAX];
    gint64 end;
    PibDev d;
    PeerLink l;
    int fd, i;

    link_boot(&l, &d, path, 3, 8, 16);
    fd = peer_connect(l.path);
    peer_bring_up(&d, fd, TEST_NODE_GUID);

    for (i = 0; i < BURST_FRAMES; i++) {
        memcpy(burst + i * PIB_LINK_HDR_LEN, &hdr, sizeof(hdr));
    }
    peer_write(fd, burst, BURST_FRAMES * PIB_LINK_HDR_LEN);
    hdr.length_be = cpu_to_be16(PIB_LINK_MAX_PAYLOAD);
    memcpy(big, &hdr, sizeof(hdr));
    peer_write(fd, big, 3);
    g_usleep(20 * 1000);
    peer_write(fd, big + 3, 1000);
    g_usleep(20 * 1000);
    peer_write(fd, big + 1003, PIB_LINK_HDR_LEN + PIB_LINK_MAX_PAYLOAD - 1003);

    end = g_get_monotonic_time() + TIMEOUT_US;
    do {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(10 * 1000);
        dp_counters(&d, cnt);
    } while (cnt[PIB_CNT_RX_PACKETS] < BURST_FRAMES + 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_PACKETS], ==, BURST_FRAMES + 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_MALFORMED], ==, BURST_FRAMES + 1);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_RXQ_FULL], ==, 0);
    g_assert_cmpuint(cnt[PIB_CNT_LINK_FRAMING_ERRORS], ==, 0);
    g_assert_cmpuint(pib_query_port(&d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(attr.state, ==, PIB_PORT_ACTIVE);
    g_assert_cmpuint(le32_to_cpu(attr.link_downs), ==, 0);
    g_assert_cmpuint(rd(&d, PIB_REG_ERR_COUNT), ==, 0);

    /* The peer goes away in the middle of a frame: the link goes down. */
    peer_write(fd, big, 100);
    close(fd);
    peer_expect_down(&d, 1);

    pib_close(&d);
    peer_shutdown(&l);
}

/*
 * Transmit: 8 UC RDMA WRITEs of 256 KiB (512 full-MTU frames, 2 MiB) queued
 * at once while this peer reads nothing, so the socket fills: one writev (or
 * chardev write) takes part of a frame and the rest waits for G_IO_OUT.  Then
 * the whole stream is read back, frame by frame: every header is in step,
 * the PSNs follow each other, the opcodes make whole messages and every
 * payload byte is the sender's.
 */
#define TX_MSG              (256 * 1024)
#define TX_MSGS             8
#define TX_MTU_4096         5

/* Read back count RDMA WRITEs of TX_MSG bytes from src, each to 0x100000 + i * TX_MSG. */
static void tx_expect_writes(int fd, const uint8_t *src, uint32_t count)
{
    uint32_t i, off, psn = 0;
    WirePkt w;

    for (i = 0; i < count; i++) {
        for (off = 0; off < TX_MSG; off += 4096) {
            uint8_t op = off == 0 ? PIB_OP_UC_RDMA_WRITE_FIRST :
                         off + 4096 == TX_MSG ? PIB_OP_UC_RDMA_WRITE_LAST :
                         PIB_OP_UC_RDMA_WRITE_MIDDLE;

            g_assert_true(wp_recv(fd, &w, TIMEOUT_US / 1000));
            if (i == 0 && off == 0) {
                psn = w.psn;
            }
            g_assert_cmphex(w.opcode, ==, op);
            g_assert_cmpuint(w.psn, ==, psn);
            psn = (psn + 1) & PIB_PSN_MASK;
            if (op == PIB_OP_UC_RDMA_WRITE_FIRST) {
                g_assert_cmphex(w.va, ==, 0x100000 + i * TX_MSG);
                g_assert_cmphex(w.rkey, ==, 0x1234);
                g_assert_cmpuint(w.dmalen, ==, TX_MSG);
            }
            g_assert_cmpmem(w.payload, w.paylen, src + off, 4096);
        }
    }
}

/* A UC QP of the booted device, connected to the wire peer, its buffer filled; src gets a copy. */
static void tx_end(PibDev *d, TestEnd *x, uint8_t *src)
{
    dp_end(d, x, PIB_QPT_UC, TX_MSG);
    dp_fill(d, x->buf, TX_MSG, 5);
    qtest_memread(qts(d), x->buf, src, TX_MSG);
    dp_connect_ex(d, &x->qp, WP_LID, WP_QPN, TX_MTU_4096, 14, 7, 7);
}

/* Post count RDMA WRITEs of the whole buffer, signaled, wr_id i, to 0x100000 + i * TX_MSG. */
static void tx_post_writes(PibDev *d, TestEnd *x, uint32_t count)
{
    struct pib_sge sge[1] = { dp_sge(x->buf, TX_MSG, x->key) };
    uint32_t i;

    for (i = 0; i < count; i++) {
        dp_post_send(d, &x->qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, i,
                     sge, 1, 0x100000 + i * TX_MSG, 0x1234);
    }
}

/*
 * Nothing more came, count WRITEs went out as packets since cnt0, none was
 * dropped and no error was reported; then the link and the device go.
 */
static void tx_done(PeerLink *l, PibDev *d, int fd, const uint64_t *cnt0,
                    uint32_t count)
{
    uint64_t cnt[PIB_CNT_MAX];

    wp_expect_nothing(fd);
    dp_counters(d, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_TX_PACKETS] - cnt0[PIB_CNT_TX_PACKETS], ==,
                     count * TX_MSG / 4096);
    g_assert_cmpuint(cnt[PIB_CNT_TX_DROP_TXQ_FULL], ==, 0);
    g_assert_cmpuint(dp_err_count(d), ==, 0);

    close(fd);
    peer_expect_down(d, 1);
    pib_close(d);
    peer_shutdown(l);
}

static void test_link_tx_burst(const void *path)
{
    g_autofree uint8_t *src = g_malloc(TX_MSG);
    uint64_t cnt0[PIB_CNT_MAX];
    uint32_t i;
    TestEnd x;
    PeerLink l;
    PibDev d;
    int fd;

    link_boot(&l, &d, path, 1, 16, 64);
    fd = peer_connect(l.path);
    peer_bring_up(&d, fd, TEST_NODE_GUID);
    tx_end(&d, &x, src);

    dp_counters(&d, cnt0);
    tx_post_writes(&d, &x, TX_MSGS);
    g_usleep(200 * 1000);           /* the socket fills up meanwhile */

    tx_expect_writes(fd, src, TX_MSGS);
    for (i = 0; i < TX_MSGS; i++) {
        dp_expect(&d, &x.scq, i, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    }
    tx_done(&l, &d, fd, cnt0, TX_MSGS);
}

/*
 * The link socket's send buffer (property link-sndbuf, pib-link.h
 * PIB_LINK_SNDBUF): by default a unix socket takes a whole requester window,
 * so 1 MiB of WRITEs (256 full-MTU packets) lies in the socket before the
 * peer reads a byte.  With link-sndbuf=0 the socket keeps Linux's default
 * (net.core.wmem_default, 208 KiB): it fills to about that much and stops,
 * and the rest of the window waits in the device's queue until the peer
 * reads.  UC completes a WRITE once its packets are queued, so the CQEs come
 * either way; then every byte is read back, in order, and nothing is
 * dropped: the bytes past what the socket held were still queued in the
 * device when it stopped growing.
 */
#define SNDBUF_MSGS         4
#define SNDBUF_WINDOW       (SNDBUF_MSGS * TX_MSG)
/*
 * The socket has settled once its byte count stayed put over SNDBUF_STILL
 * polls; SNDBUF_POLLS bounds the wait (a hang guard: 1 MiB in full frames
 * takes a few hundred writes at most).
 */
#define SNDBUF_STILL        20
#define SNDBUF_POLLS        100000

static int sndbuf_inq(int fd)
{
    int n = -1;

    g_assert_cmpint(ioctl(fd, FIONREAD, &n), ==, 0);
    return n;
}

/*
 * The bytes in the socket once the device has written all it can.  Each
 * poll is a register read, a round trip through QEMU's main loop, where the
 * device writes: non-blocking, and again on G_IO_OUT, which only our reads
 * bring.  A count that held over SNDBUF_STILL passes is final.
 */
static int sndbuf_settled(PibDev *d, int fd)
{
    int n = sndbuf_inq(fd), m, still = 0, polls;

    for (polls = 0; still < SNDBUF_STILL; polls++) {
        g_assert_cmpint(polls, <, SNDBUF_POLLS);
        rd(d, PIB_REG_STATUS);
        m = sndbuf_inq(fd);
        still = m == n ? still + 1 : 0;
        n = m;
    }
    return n;
}

/* Linux's send buffer for a new socket (bytes of skbs, data and overhead). */
static int sndbuf_linux_default(void)
{
    g_autofree char *text = NULL;

    g_assert_true(g_file_get_contents("/proc/sys/net/core/wmem_default",
                                      &text, NULL, NULL));
    return atoi(text);
}

static void test_link_sndbuf(const void *props)
{
    g_autofree uint8_t *src = g_malloc(TX_MSG);
    uint64_t cnt0[PIB_CNT_MAX];
    bool window = !strcmp(props, "");
    int held, linux_default = sndbuf_linux_default();
    uint32_t i;
    TestEnd x;
    PeerLink l;
    PibDev d;
    int fd;

    /* The default case can only tell the two apart on a host whose default is under a window. */
    if (!window && linux_default >= SNDBUF_WINDOW / 2) {
        g_test_skip("net.core.wmem_default holds half a window or more");
        return;
    }
    link_boot_props(&l, &d, props, 1, 16, 64);
    fd = peer_connect(l.path);
    peer_bring_up(&d, fd, TEST_NODE_GUID);
    tx_end(&d, &x, src);

    dp_counters(&d, cnt0);
    tx_post_writes(&d, &x, SNDBUF_MSGS);
    for (i = 0; i < SNDBUF_MSGS; i++) {
        dp_expect(&d, &x.scq, i, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);
    }
    held = sndbuf_settled(&d, fd);
    g_test_message("the socket held %d bytes of a %d-byte window (wmem_default %d)",
                   held, SNDBUF_WINDOW, linux_default);
    if (window) {
        /* The whole window, frame headers on top of the payload. */
        g_assert_cmpint(held, >, SNDBUF_WINDOW);
    } else {
        /*
         * What the default admits: at least half of it in data (the rest
         * being skb overhead), so the device did write and the socket was
         * not shrunk; at most it and one more skb, well under the window.
         */
        g_assert_cmpint(held, >=, linux_default / 2);
        g_assert_cmpint(held, <, SNDBUF_WINDOW / 2);
    }

    tx_expect_writes(fd, src, SNDBUF_MSGS);
    tx_done(&l, &d, fd, cnt0, SNDBUF_MSGS);
}

/*
 * The doorbell (include/pib_link.h, "Doorbell"), link-doorbell=on (the
 * default): the device's HELLO brings an eventfd; ours brings one.  The
 * device's main loop writes without ringing ours; an idle QP sends from its
 * SQ doorbell and rings START before and END after.  Between a START and its
 * END the device does not read the socket, and reads it when rung; counts
 * that wrap or do not match are the peer's own business.  A HELLO that
 * offers no descriptor, or one that is not an eventfd, or a HELLO from
 * before the flags, leaves the device without ours.  Off, the device's HELLO
 * offers nothing.
 */

/* The device's HELLO, whole, with what came with it: its flags; the descriptor in *passed, or -1. */
static uint32_t db_read_hello(int fd, int *passed)
{
    uint8_t frame[PIB_LINK_HDR_LEN + sizeof(struct pib_link_hello)];
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = { .iov_base = frame, .iov_len = sizeof(frame) };
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1,
        .msg_control = cbuf, .msg_controllen = sizeof(cbuf),
    };
    struct pib_link_hello h;
    struct pib_link_hdr hdr;
    struct cmsghdr *c;

    *passed = -1;
    g_assert_cmpint(recvmsg(fd, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC), ==, sizeof(frame));
    for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            g_assert_cmpint(*passed, ==, -1);
            memcpy(passed, CMSG_DATA(c), sizeof(int));
        }
    }
    memcpy(&hdr, frame, sizeof(hdr));
    memcpy(&h, frame + sizeof(hdr), sizeof(h));
    g_assert_cmphex(hdr.type, ==, PIB_FRAME_HELLO);
    g_assert_cmpuint(be16_to_cpu(hdr.length_be), ==, sizeof(h));
    g_assert_cmphex(be64_to_cpu(h.node_guid_be), ==, TEST_NODE_GUID);
    return be32_to_cpu(h.flags_be);
}

/* Our HELLO of len bytes (PIB_LINK_HELLO_MIN_LEN: one from before the flags), passed with it unless -1. */
static void db_send_hello(int fd, uint32_t flags, int passed, uint16_t len)
{
    uint8_t frame[PIB_LINK_HDR_LEN + sizeof(struct pib_link_hello)];
    char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
    struct iovec iov = { .iov_base = frame, .iov_len = PIB_LINK_HDR_LEN + len };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
    struct pib_link_hdr hdr = {
        .magic = PIB_LINK_MAGIC,
        .type = PIB_FRAME_HELLO,
        .length_be = cpu_to_be16(len),
    };
    struct pib_link_hello h = {
        .version_be = cpu_to_be32(PIB_LINK_PROTO_VERSION),
        .mtu_be = cpu_to_be32(PIB_LINK_MAX_PAYLOAD),
        .node_guid_be = cpu_to_be64(PEER_NODE_GUID),
        .port_guid_be = cpu_to_be64(PEER_NODE_GUID + 1),
        .flags_be = cpu_to_be32(flags),
    };
    struct cmsghdr *c;

    memcpy(frame, &hdr, sizeof(hdr));
    memcpy(frame + sizeof(hdr), &h, len);
    if (passed >= 0) {
        msg.msg_control = cbuf;
        msg.msg_controllen = sizeof(cbuf);
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &passed, sizeof(int));
    }
    g_assert_cmpint(sendmsg(fd, &msg, 0), ==, iov.iov_len);
}

static bool db_is_eventfd(int fd)
{
    g_autofree char *link = g_strdup_printf("/proc/self/fd/%d", fd);
    g_autofree char *target = g_file_read_link(link, NULL);

    return target && g_str_equal(target, "anon_inode:[eventfd]");
}

/* How often an eventfd was rung since the last look (it is non-blocking). */
static uint64_t db_rings(int efd)
{
    uint64_t n = 0;

    return read(efd, &n, sizeof(n)) == sizeof(n) ? n : 0;
}

static void db_ring(int efd, uint64_t ring)
{
    g_assert_cmpint(write(efd, &ring, sizeof(ring)), ==, sizeof(ring));
}

/*
 * Ring, and wait until the device's handler has run: it empties the
 * eventfd, and a qtest command sent after that is answered after the
 * handler returns (one main loop).  Bytes written next come after its read.
 */
static void db_ring_seen(PibDev *d, TestEnd *x, int efd, uint64_t ring)
{
    struct pollfd pfd = { .fd = efd, .events = POLLIN };
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;
    uint8_t b;

    db_ring(efd, ring);
    while (poll(&pfd, 1, 0) == 1) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(1000);
    }
    qtest_memread(qts(d), x->buf, &b, 1);
}

/* A SEND from the wire peer, acknowledged, and delivered to receive WQE wr_id. */
static void db_send(PibDev *d, TestEnd *x, int fd, uint32_t psn, uint64_t wr_id,
                    const char *text)
{
    struct pib_cqe cqe;
    char got[16];
    WirePkt w;

    wp_send_only(fd, psn, text);
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, psn);
    dp_expect(d, &x->rcq, wr_id, PIB_WC_SUCCESS, PIB_CQE_RECV, &cqe);
    g_assert_cmpuint(le32_to_cpu(cqe.byte_len), ==, strlen(text));
    qtest_memread(qts(d), x->buf + (wr_id - 1) * 64, got, strlen(text));
    g_assert_cmpmem(got, strlen(text), text, strlen(text));
}

static void test_link_doorbell(void)
{
    static const char *const texts[] = { "no fd", "a pipe", "old HELLO" };
    struct pib_sge sge[1];
    int fd, dev_db, ours, pipefd[2], i;
    char c;
    TestEnd x;
    PeerLink l;
    PibDev d;
    WirePkt w;

    /* Off: no flag, no descriptor. */
    pib_dev_props = ",link-doorbell=off";
    peer_boot(&l, 1);
    pib_dev_props = "";
    fd = peer_connect(l.path);
    g_assert_cmphex(db_read_hello(fd, &dev_db) & PIB_HELLO_F_DOORBELL, ==, 0);
    g_assert_cmpint(dev_db, ==, -1);
    close(fd);
    peer_shutdown(&l);

    link_boot_props(&l, &d, "", 1, 16, 64);
    dp_end(&d, &x, PIB_QPT_RC, 16384);
    wp_dqpn = x.qp.qpn;
    wp_qp_rtr(&d, x.qp.qpn, 0, 0);
    /* RTS now: a first packet in RTR would raise COMM_EST, which pib_aeq_find does not expect. */
    wp_qp_rts(&d, x.qp.qpn, 1);
    for (i = 1; i <= 10; i++) {
        sge[0] = dp_sge(x.buf + (i - 1) * 64, 64, x.key);
        dp_post_recv(&d, &x.qp, i, sge, 1);
    }

    /* On by default, offered both ways. */
    fd = peer_connect(l.path);
    g_assert_cmphex(db_read_hello(fd, &dev_db) & PIB_HELLO_F_DOORBELL, ==,
                    PIB_HELLO_F_DOORBELL);
    g_assert_cmpint(dev_db, >=, 0);
    g_assert_true(db_is_eventfd(dev_db));
    ours = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    db_send_hello(fd, PIB_HELLO_F_DOORBELL, ours, sizeof(struct pib_link_hello));
    pib_wait_port_state(&d, PIB_PORT_ACTIVE);
    g_assert_true(pib_aeq_find(&d, PIB_AE_PORT_ACTIVE, TIMEOUT_US));
    /* Nothing announced: the socket is polled, and the main loop's ACK does not ring. */
    db_send(&d, &x, fd, 100, 1, "first");
    g_assert_cmpuint(db_rings(ours), ==, 0);
    /* Announced and not ended: the SEND waits, then the END has it read. */
    db_ring_seen(&d, &x, dev_db, PIB_LINK_RING_START);
    wp_send_only(fd, 101, "second");
    wp_expect_nothing(fd);
    dp_expect_none(&d, &x.rcq);
    db_ring(dev_db, PIB_LINK_RING_END);
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 101);
    dp_expect(&d, &x.rcq, 2, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    /* Ended: polled again. */
    db_send(&d, &x, fd, 102, 3, "third");
    /* Two STARTs, one END: still announced, and any ring has the socket read. */
    db_ring(dev_db, 2 * PIB_LINK_RING_START);
    db_ring_seen(&d, &x, dev_db, PIB_LINK_RING_END);
    wp_send_only(fd, 103, "fourth");
    wp_expect_nothing(fd);
    db_ring_seen(&d, &x, dev_db, PIB_LINK_RING_START);
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 103);
    dp_expect(&d, &x.rcq, 4, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    db_ring_seen(&d, &x, dev_db, 2 * PIB_LINK_RING_END);
    /* The counts wrap: an eventfd's largest count, 0xfffffffe STARTs and 0xffffffff ENDs. */
    db_ring_seen(&d, &x, dev_db, UINT64_MAX - 1);
    wp_send_only(fd, 104, "fifth");
    wp_expect_nothing(fd);
    db_ring(dev_db, PIB_LINK_RING_START);
    wp_expect(fd, &w, PIB_OP_RC_ACKNOWLEDGE, 104);
    dp_expect(&d, &x.rcq, 5, PIB_WC_SUCCESS, PIB_CQE_RECV, NULL);
    db_send(&d, &x, fd, 105, 6, "sixth");
    /* An idle QP's SEND leaves from its doorbell, rung around: one START, one END. */
    qtest_memwrite(qts(&d), x.buf + 4096, "reply", 5);
    sge[0] = dp_sge(x.buf + 4096, 5, x.key);
    dp_post_send(&d, &x.qp, PIB_WQE_SEND, PIB_WQE_F_SIGNALED, 0x50, sge, 1, 0, 0);
    wp_expect(fd, &w, PIB_OP_RC_SEND_ONLY, 500);
    g_assert_cmpmem(w.payload, w.paylen, "reply", 5);
    g_assert_cmphex(db_rings(ours), ==, PIB_LINK_RING_START + PIB_LINK_RING_END);
    wp_ack(fd, 500, PIB_AETH_ACK | 0x1f);
    dp_expect(&d, &x.scq, 0x50, PIB_WC_SUCCESS, PIB_CQE_SEND, NULL);
    g_assert_cmpuint(db_rings(ours), ==, 0);
    close(fd);
    peer_expect_down(&d, 1);
    close(dev_db);

    /*
     * Refused or not offered: a HELLO with the flag and no descriptor, one
     * whose descriptor is a pipe, one from before the flags.  The device
     * polls the socket as before and writes nothing into the pipe.
     */
    g_assert_cmpint(pipe2(pipefd, O_NONBLOCK | O_CLOEXEC), ==, 0);
    for (i = 0; i < 3; i++) {
        fd = peer_connect(l.path);
        g_assert_cmphex(db_read_hello(fd, &dev_db) & PIB_HELLO_F_DOORBELL, ==,
                    PIB_HELLO_F_DOORBELL);
        close(dev_db);
        if (i < 2) {
            db_send_hello(fd, PIB_HELLO_F_DOORBELL, i ? pipefd[1] : -1,
                          sizeof(struct pib_link_hello));
        } else {
            db_send_hello(fd, 0, -1, PIB_LINK_HELLO_MIN_LEN);
        }
        pib_wait_port_state(&d, PIB_PORT_ACTIVE);
        db_send(&d, &x, fd, 106 + i, 7 + i, texts[i]);
        close(fd);
        peer_expect_down(&d, 2 + i);
    }
    g_assert_cmpint(read(pipefd[0], &c, 1), ==, -1);
    g_assert_cmpint(errno, ==, EAGAIN);
    close(pipefd[0]);
    close(pipefd[1]);
    close(ours);

    pib_close(&d);
    peer_shutdown(&l);
}

/*
 * Credits (include/pib_link.h, "Credits"): the peer offers them in its HELLO and plays a
 * receiver that grants little.  The device sends no more than the credit limit allows (a 4 KiB
 * WRITE packet is 65 blocks), waits and counts xmit_wait_us while it lacks credit, and goes on
 * when granted more; as a receiver it grants its whole buffer and raises the limit by what it
 * consumed; FLOW frames of a bad length lose framing.
 */
#define CR_PKT_BLOCKS       65      /* DIV_ROUND_UP(8 + 12 (+ 16, a RETH) + 4096, 64) */

/* The next FLOW frame (PACKETs before it are counted in *pkts): VL0's FCTBS and FCCL. */
static void cr_expect_flow(int fd, uint16_t *fctbs, uint16_t *fccl, uint32_t *pkts)
{
    uint8_t b[PIB_LINK_MAX_PAYLOAD];
    uint16_t len;
    uint8_t type;

    for (;;) {
        type = peer_read_any(fd, b, sizeof(b), &len, TIMEOUT_US / 1000);
        g_assert_cmpuint(type, !=, 0);
        if (type == PIB_FRAME_FLOW) {
            break;
        }
        g_assert_cmpuint(type, ==, PIB_FRAME_PACKET);
        (*pkts)++;
    }
    g_assert_cmpuint(len, ==, PIB_LINK_DATA_VLS * sizeof(struct pib_link_fc));
    g_assert_cmpuint(lduw_be_p(b) >> 12, ==, PIB_LINK_FC_OP_NORMAL);
    g_assert_cmpuint(lduw_be_p(b + 2) >> 12, ==, 0);           /* the first entry: VL0 */
    g_assert_cmpuint(lduw_be_p(b + 6) >> 12, ==, 1);
    *fctbs = lduw_be_p(b) & 0xfff;
    *fccl = lduw_be_p(b + 2) & 0xfff;
}

/* Packets (not FLOW frames) that arrive within timeout_ms of each other. */
static uint32_t cr_count_packets(int fd, int timeout_ms)
{
    uint8_t b[PIB_LINK_MAX_PAYLOAD];
    uint32_t n = 0;
    uint16_t len;
    uint8_t type;

    while ((type = peer_read_any(fd, b, sizeof(b), &len, timeout_ms))) {
        n += type == PIB_FRAME_PACKET;
    }
    return n;
}

static void test_link_credits(void)
{
    uint64_t cnt0[PIB_CNT_MAX], cnt[PIB_CNT_MAX];
    uint16_t fctbs, fccl, sent;
    uint8_t payload[4096] = { 0 };
    uint32_t pkts = 0, i;
    struct pib_sge sge;
    TestEnd x;
    PeerLink l;
    PibDev d;
    int fd, passed;

    link_boot(&l, &d, "direct", 1, 16, 64);
    fd = peer_connect(l.path);
    g_assert_cmphex(db_read_hello(fd, &passed) & PIB_HELLO_F_CREDITS, ==,
                    PIB_HELLO_F_CREDITS);
    if (passed >= 0) {
        close(passed);
    }
    /* As a switch port would: credits run (between two CAs, only when one asks). */
    db_send_hello(fd, PIB_HELLO_F_CREDITS | PIB_HELLO_F_SWITCH, -1,
                  sizeof(struct pib_link_hello));
    pib_wait_port_state(&d, PIB_PORT_ACTIVE);
    /* Its first FLOW frame: nothing sent, the whole buffer granted. */
    cr_expect_flow(fd, &fctbs, &fccl, &pkts);
    g_assert_cmpuint(fctbs, ==, 0);
    g_assert_cmpuint(fccl, ==, 2048);

    /* Transmit: credit for two full packets of a four-packet WRITE. */
    dp_end(&d, &x, PIB_QPT_UC, 4 * 4096);
    dp_connect_ex(&d, &x.qp, WP_LID, WP_QPN, TX_MTU_4096, 14, 7, 7);
    dp_counters(&d, cnt0);
    peer_send_flow(fd, 0, 2 * CR_PKT_BLOCKS, 0);
    sge = dp_sge(x.buf, 4 * 4096, x.key);
    dp_post_send(&d, &x.qp, PIB_WQE_RDMA_WRITE, PIB_WQE_F_SIGNALED, 1, &sge, 1, 0x100000,
                 0x1234);
    /*
     * The two it had credit for, then, out of credit, a FLOW frame with its FCTBS (a receiver
     * that dropped some would count them by it), then nothing.
     */
    cr_expect_flow(fd, &fctbs, &fccl, &pkts);
    g_assert_cmpuint(pkts, ==, 2);
    g_assert_cmpuint(fctbs, ==, 2 * CR_PKT_BLOCKS);
    g_assert_cmpuint(cr_count_packets(fd, 300), ==, 0);
    dp_counters(&d, cnt);
    g_assert_cmpuint(cnt[PIB_CNT_TX_PACKETS] - cnt0[PIB_CNT_TX_PACKETS], ==, 4);
    g_assert_cmpuint(cnt[PIB_CNT_XMIT_WAIT_US], >, cnt0[PIB_CNT_XMIT_WAIT_US]);
    g_assert_cmpuint(cnt[PIB_CNT_TX_DROP_TXQ_FULL], ==, 0);
    /* Credit for the rest: the other two come, and nothing more. */
    peer_send_flow(fd, 0, 4 * CR_PKT_BLOCKS, 0);
    g_assert_cmpuint(cr_count_packets(fd, 300), ==, 2);
    dp_expect(&d, &x.scq, 1, PIB_WC_SUCCESS, PIB_CQE_RDMA_WRITE, NULL);

    /*
     * Receive: RDMA WRITE Only packets to the device's QP, as a peer that keeps to its
     * credits: it sends what the limit allows, then waits for the FLOW frame that raises it.
     * The device grants again what it consumed, 100 packets (over three windows, across the
     * 4096 wrap) without a stall.
     */
    wp_dqpn = x.qp.qpn;
    for (i = 0, sent = 0; i < 100; ) {
        struct pib_reth reth = {
            .va_hi_be = cpu_to_be32(x.buf >> 32), .va_lo_be = cpu_to_be32(x.buf),
            .rkey_be = cpu_to_be32(x.key),
            .dmalen_be = cpu_to_be32(sizeof(payload)),
        };

        if (((fccl - (sent + CR_PKT_BLOCKS)) & 0xfff) > 2048) {
            cr_expect_flow(fd, &fctbs, &fccl, &pkts);       /* out of credit: wait for more */
            continue;
        }
        wp_send(fd, PIB_OP_UC_RDMA_WRITE_ONLY, i, false, &reth, sizeof(reth), payload,
                sizeof(payload));
        sent = (sent + CR_PKT_BLOCKS) & 0xfff;
        i++;
    }
    PIB_WAIT_FOR((dp_counters(&d, cnt),
                  cnt[PIB_CNT_RX_PACKETS] - cnt0[PIB_CNT_RX_PACKETS] >= 100));
    g_assert_cmpuint(cnt[PIB_CNT_RX_PACKETS] - cnt0[PIB_CNT_RX_PACKETS], ==, 100);
    g_assert_cmpuint(cnt[PIB_CNT_RX_DROP_CREDIT], ==, 0);
    g_assert_cmpuint(fctbs, ==, 4 * CR_PKT_BLOCKS);         /* what it sent above */

    /* A FLOW frame that is not whole entries: framing is lost, the link retrains. */
    {
        uint8_t bad[PIB_LINK_HDR_LEN + 6] = { PIB_LINK_MAGIC, PIB_FRAME_FLOW, 0, 6 };

        char junk[4096];
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        ssize_t n;

        peer_write(fd, bad, sizeof(bad));
        /* Whatever it had sent (FLOW frames), then the end of the stream. */
        do {
            g_assert_cmpint(poll(&pfd, 1, TIMEOUT_US / 1000), ==, 1);
            n = read(fd, junk, sizeof(junk));
            g_assert_cmpint(n, >=, 0);
        } while (n > 0);
        dp_counters(&d, cnt);
        g_assert_cmpuint(cnt[PIB_CNT_LINK_FRAMING_ERRORS], ==,
                         cnt0[PIB_CNT_LINK_FRAMING_ERRORS] + 1);
    }
    close(fd);
    pib_close(&d);
    peer_shutdown(&l);
}

int main(int argc, char **argv)
{
    static const char *const paths[] = { "direct", "chardev" };
    int i;

    g_test_init(&argc, &argv, NULL);

    qtest_add_func("/pib/link/pair", test_link_pair);
    qtest_add_func("/pib/link/doorbell", test_link_doorbell);
    qtest_add_func("/pib/link/credits", test_link_credits);
    qtest_add_data_func("/pib/link/sndbuf/window", "", test_link_sndbuf);
    qtest_add_data_func("/pib/link/sndbuf/default", ",link-sndbuf=0",
                        test_link_sndbuf);
    for (i = 0; i < ARRAY_SIZE(paths); i++) {
        g_autofree char *framing = g_strdup_printf("/pib/link/framing/%s",
                                                   paths[i]);
        g_autofree char *burst = g_strdup_printf("/pib/link/burst/%s",
                                                 paths[i]);

        qtest_add_data_func(framing, paths[i], test_link_framing);
        qtest_add_data_func(burst, paths[i], test_link_burst);
        g_free(burst);
        burst = g_strdup_printf("/pib/link/tx-burst/%s", paths[i]);
        qtest_add_data_func(burst, paths[i], test_link_tx_burst);
    }

    return g_test_run();
}
