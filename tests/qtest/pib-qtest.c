/*
 * pib-qtest.c - the fixture the pib qtests share (libqos style)
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * pib-qtest.h says what each layer is for; this file is their code, in the
 * same order: the device (pib_*), the link peer (peer_*), the data-path
 * mini-driver (dp_*) and wire packets (wp_*).
 */

#include "qemu/osdep.h"
#include <sys/socket.h>
#include <sys/un.h>
#include <poll.h>
#include <sys/wait.h>
#include <glib/gstdio.h>
#include "hw/pci/pci_regs.h"        /* PCI_MSIX_ENTRY_*: dp_msix_to_ram */

#include "pib-qtest.h"

/*
 * The device: registers, admin queue, async events
 */

QOSState *pib_boot(const char *extra)
{
    return qtest_pc_boot("-M q35 -nodefaults " PIB_FIRMWARE_ARGS " %s", extra);
}

void pib_open(PibDev *d, QOSState *qs, int devfn)
{
    uint64_t size;

    memset(d, 0, sizeof(*d));
    d->qs = qs;
    d->dev = qpci_device_find(qs->pcibus, devfn);
    g_assert(d->dev != NULL);
    d->bar0 = qpci_iomap(d->dev, PIB_BAR_REGS, &size);
    /* The registers, or with device memory twice its size (pib_hw.h, "Device memory"). */
    g_assert_true(size == PIB_REGS_SIZE || (size > PIB_REGS_SIZE && !(size & (size - 1))));
    d->bar0_size = size;
    d->bar2 = qpci_iomap(d->dev, PIB_BAR_UAR, &size);
    g_assert_cmpuint(size, ==, PIB_UAR_BAR_SIZE);
    qpci_device_enable(d->dev);
    qpci_msix_enable(d->dev);
}

void pib_close(PibDev *d)
{
    qpci_msix_disable(d->dev);
    g_free(d->dev);
    d->dev = NULL;
}

uint32_t rd(PibDev *d, uint32_t reg)
{
    return qpci_io_readl(d->dev, d->bar0, reg);
}

void wr(PibDev *d, uint32_t reg, uint32_t val)
{
    qpci_io_writel(d->dev, d->bar0, reg, val);
}

QTestState *qts(PibDev *d)
{
    return d->qs->qts;
}

uint8_t phase_of(uint32_t idx, uint32_t depth)
{
    return ((idx / depth) & 1) ? 0 : 1;
}

/* Allocate and program the rings; the caller writes CONTROL.ENABLE. */
void pib_program_queues(PibDev *d, uint32_t depth, uint32_t aeq_depth)
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

void pib_enable(PibDev *d, uint32_t depth, uint32_t aeq_depth)
{
    pib_program_queues(d, depth, aeq_depth);
    wr(d, PIB_REG_CONTROL, PIB_CTRL_ENABLE);
    g_assert_cmphex(rd(d, PIB_REG_STATUS), ==, PIB_STATUS_READY);
}

/* Put a command in the next SQ slot (without ringing). */
void pib_post(PibDev *d, struct pib_admin_cmd *cmd)
{
    uint32_t slot = d->pi & (d->depth - 1);

    cmd->cmd_id = cpu_to_le16(0x100 + (d->pi & 0xff));
    qtest_memwrite(qts(d), d->sq + slot * sizeof(*cmd), cmd, sizeof(*cmd));
    d->pi++;
}

/* Wait for the completion of command idx, by its phase bit (pib_wait_cqe: and its cmd_id). */
void pib_wait_cqe_raw(PibDev *d, uint32_t idx, struct pib_admin_cqe *cqe)
{
    uint64_t addr = d->cq + (idx & (d->depth - 1)) * sizeof(*cqe);
    gint64 end = g_get_monotonic_time() + TIMEOUT_US;

    for (;;) {
        qtest_memread(qts(d), addr, cqe, sizeof(*cqe));
        if ((cqe->flags & PIB_ACQE_F_PHASE) == phase_of(idx, d->depth)) {
            break;
        }
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(100);
    }
}

void pib_wait_cqe(PibDev *d, uint32_t idx, struct pib_admin_cqe *cqe)
{
    pib_wait_cqe_raw(d, idx, cqe);
    g_assert_cmphex(le16_to_cpu(cqe->cmd_id), ==, 0x100 + (idx & 0xff));
}

/* One command, one completion: returns the status; the CQE in *cqe if asked. */
uint8_t pib_cmd(PibDev *d, struct pib_admin_cmd *cmd,
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

uint32_t pib_nop(PibDev *d, uint32_t value)
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_NOP,
        .in.nop.value = cpu_to_le32(value),
    };
    struct pib_admin_cqe cqe;

    g_assert_cmpuint(pib_cmd(d, &cmd, &cqe), ==, PIB_AQ_OK);
    return le32_to_cpu(cqe.result0);
}

/*
 * A full ring in one doorbell: depth NOPs, values base + i, posted and then rung at once;
 * asserts their completions come in order, each OK and echoing its value.
 */
void pib_nop_ring(PibDev *d, uint32_t base)
{
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe cqe;
    uint32_t first = d->pi, i;

    for (i = 0; i < d->depth; i++) {
        cmd = (struct pib_admin_cmd) {
            .opcode = PIB_CMD_NOP,
            .in.nop.value = cpu_to_le32(base + i),
        };
        pib_post(d, &cmd);
    }
    wr(d, PIB_REG_AQ_DB, d->pi);
    for (i = 0; i < d->depth; i++) {
        pib_wait_cqe(d, first + i, &cqe);
        g_assert_cmpuint(cqe.status, ==, PIB_AQ_OK);
        g_assert_cmpuint(le32_to_cpu(cqe.result0), ==, base + i);
    }
}

uint8_t pib_query_port(PibDev *d, uint8_t port_num,
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

uint8_t pib_set_lid(PibDev *d, uint16_t lid)
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
bool pib_aeq_next(PibDev *d, struct pib_aeqe *e, gint64 timeout_us)
{
    uint64_t addr = d->aeq + (d->aeq_ci & (d->aeq_depth - 1)) * sizeof(*e);
    gint64 end = g_get_monotonic_time() + timeout_us;

    for (;;) {
        qtest_memread(qts(d), addr, e, sizeof(*e));
        if ((e->flags & PIB_AEQE_F_PHASE) == phase_of(d->aeq_ci, d->aeq_depth)) {
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
bool pib_aeq_find(PibDev *d, uint8_t type, gint64 timeout_us)
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

void pib_wait_port_state(PibDev *d, uint8_t state)
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
void pib_expect_guest_error(PibDev *d, uint32_t *count, uint32_t code)
{
    *count += 1;
    g_assert_cmpuint(rd(d, PIB_REG_ERR_COUNT), ==, *count);
    g_assert_cmpuint(rd(d, PIB_REG_ERR_LAST), ==, code);
}

uint64_t pib_clock_read(PibDev *d, uint32_t page)
{
    uint64_t base = (uint64_t)page * PIB_UAR_PAGE_SIZE;
    uint32_t hi, lo, hi2;

    for (;;) {
        hi = qpci_io_readl(d->dev, d->bar2, base + PIB_UAR_CLOCK_HI);
        lo = qpci_io_readl(d->dev, d->bar2, base + PIB_UAR_CLOCK_LO);
        hi2 = qpci_io_readl(d->dev, d->bar2, base + PIB_UAR_CLOCK_HI);
        if (hi == hi2) {
            return (uint64_t)hi << 32 | lo;
        }
    }
}


/*
 * The link peer: this process at the other end of the cable
 */

void peer_boot(PeerLink *l, uint16_t lid)
{
    g_autofree char *args = NULL;

    l->dir = g_dir_make_tmp("pib-qtest-XXXXXX", NULL);
    l->path = g_build_filename(l->dir, "link.sock", NULL);
    args = g_strdup_printf(
        "-chardev socket,id=link,path=%s,server=on,wait=off "
        "-device pib-hca,addr=4.0,id=hca,chardev=link,lid=%u,node-guid=0x%" PRIx64
        "%s", l->path, lid, (uint64_t)TEST_NODE_GUID, pib_dev_props);
    l->qs = pib_boot(args);
}

void peer_shutdown(PeerLink *l)
{
    qtest_shutdown(l->qs);
    g_unlink(l->path);
    g_rmdir(l->dir);
    g_free(l->path);
    g_free(l->dir);
}

int peer_connect(const char *path)
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

#define MIGRATION_POLLS 20000     /* looks at the migration status, 5 ms apart */

void pib_migration_wait(QTestState *qts, const char *want)
{
    QDict *rsp, *ret;
    const char *st;
    int i;

    for (i = 0; i < MIGRATION_POLLS; i++) {
        rsp = qtest_qmp(qts, "{ 'execute': 'query-migrate' }");
        ret = qdict_get_qdict(rsp, "return");
        st = ret && qdict_haskey(ret, "status") ? qdict_get_str(ret, "status") : "none";
        if (!strcmp(st, want)) {
            qobject_unref(rsp);
            return;
        }
        g_assert_cmpstr(st, !=, "failed");
        qobject_unref(rsp);
        g_usleep(5000);
    }
    g_assert_not_reached();
}

/*
 * A QEMU that loads a migration stream which it may refuse, driven without libqtest: libqtest
 * aborts the test when QEMU goes away, and here going away with status 1 is a right answer,
 * so every read may see the end of the stream and say so.
 */
static int incoming_accept(int lsock)
{
    struct pollfd pfd = { .fd = lsock, .events = POLLIN };
    int fd;

    g_assert_cmpint(poll(&pfd, 1, 60 * 1000), ==, 1);      /* hang guard */
    fd = accept(lsock, NULL, NULL);
    g_assert_cmpint(fd, >=, 0);
    close(lsock);
    return fd;
}

/* One line from fd, or NULL at the end of the stream (QEMU is gone). */
static char *incoming_readline(int fd)
{
    GString *s = g_string_new(NULL);
    char ch;
    ssize_t n;

    for (;;) {
        n = read(fd, &ch, 1);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            g_string_free(s, true);
            return NULL;
        }
        if (ch == '\n') {
            return g_string_free(s, false);
        }
        g_string_append_c(s, ch);
    }
}

/* A command, and its answer line (QMP: events skipped); NULL if QEMU went away. */
static char *incoming_ask(int fd, const char *cmd, bool qmp)
{
    char *line;

    if (send(fd, cmd, strlen(cmd), MSG_NOSIGNAL) != (ssize_t)strlen(cmd)) {
        return NULL;
    }
    while ((line = incoming_readline(fd)) && qmp && strstr(line, "\"event\"")) {
        g_free(line);
    }
    return line;
}

bool pib_incoming_start(PibIncoming *c, const char *dir, const char *args, const char *file)
{
    g_autofree char *qt = g_build_filename(dir, "incoming.qtest", NULL);
    g_autofree char *qmp = g_build_filename(dir, "incoming.qmp", NULL);
    g_autofree char *cmd = NULL, *greeting = NULL, *ans = NULL;
    g_autofree char *mig = g_strdup_printf(
        "{ 'execute': 'migrate-incoming', 'arguments': { 'uri': 'exec:cat %s' } }\n", file);
    g_auto(GStrv) argv = NULL;
    int lqt, lqmp, i;

    unlink(qt);
    unlink(qmp);
    lqt = qtest_socket_server(qt);
    lqmp = qtest_socket_server(qmp);
    cmd = g_strdup_printf("%s -qtest unix:%s -chardev socket,path=%s,id=mon "
                          "-mon chardev=mon,mode=control -display none -accel qtest %s",
                          getenv("QTEST_QEMU_BINARY"), qt, qmp, args);
    g_assert_true(g_shell_parse_argv(cmd, NULL, &argv, NULL));
    g_assert_true(g_spawn_async(NULL, argv, NULL,
                                G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDERR_TO_DEV_NULL,
                                NULL, NULL, &c->pid, NULL));
    c->qt = incoming_accept(lqt);
    c->qmp = incoming_accept(lqmp);
    greeting = incoming_readline(c->qmp);
    g_assert_nonnull(greeting);
    g_free(incoming_ask(c->qmp, "{ 'execute': 'qmp_capabilities' }\n", true));
    ans = incoming_ask(c->qmp, mig, true);
    g_assert_nonnull(ans);
    g_assert_nonnull(strstr(ans, "return"));
    for (i = 0; i < MIGRATION_POLLS; i++, g_usleep(5000)) {
        g_autofree char *st = incoming_ask(c->qmp, "{ 'execute': 'query-status' }\n", true);

        if (!st) {
            return false;                       /* gone: refused (pib_incoming_end checks) */
        }
        if (strstr(st, "\"running\": true")) {
            return true;
        }
        if (strstr(st, "\"status\": \"paused\"")) {
            /* Loaded from a machine saved while stopped (a snapshot's): it stays so until cont */
            g_free(incoming_ask(c->qmp, "{ 'execute': 'cont' }\n", true));
        }
    }
    g_assert_not_reached();
}

char *pib_incoming_qtest(PibIncoming *c, const char *cmd)
{
    return incoming_ask(c->qt, cmd, false);
}

void pib_incoming_end(PibIncoming *c, bool running)
{
    int status;

    if (running) {
        g_free(incoming_ask(c->qmp, "{ 'execute': 'quit' }\n", true));
    }
    close(c->qt);
    close(c->qmp);
    g_assert_cmpint(waitpid(c->pid, &status, 0), ==, c->pid);
    g_spawn_close_pid(c->pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, running ? 0 : 1);
}

void pib_mutator_init(PibMutator *m, GRand *r, const uint8_t *good, size_t start, size_t end,
                      uint8_t filler)
{
    size_t off, run;

    *m = (PibMutator) { .r = r, .start = start, .end = end };
    for (off = start; off < end; off += run ? run : 1) {
        for (run = 0; off + run < end && good[off + run] == filler; run++) {
        }
        if (run > m->skip_len) {
            m->skip_at = off;
            m->skip_len = run;
        }
    }
}

void pib_mutate(PibMutator *m, const uint8_t *good, uint8_t *buf, size_t len)
{
    size_t off;
    int k;

    memcpy(buf, good, len);
    for (k = g_rand_int_range(m->r, 1, 5); k > 0; k--) {
        off = m->start + g_rand_int_range(m->r, 0, m->end - m->start - 4 - m->skip_len);
        off += off >= m->skip_at ? m->skip_len : 0;
        switch (g_rand_int_range(m->r, 0, 4)) {
        case 0:
            buf[off] ^= 1u << g_rand_int_range(m->r, 0, 8);
            break;
        case 1:
            stl_be_p(buf + off, 0);
            break;
        case 2:
            stl_be_p(buf + off, UINT32_MAX);
            break;
        default:
            stl_be_p(buf + off, ldl_be_p(buf + off) + 1);
            break;
        }
    }
}

/* Read exactly len bytes; false on EOF.  Fails the test on timeout. */
bool peer_read(int fd, void *buf, size_t len)
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
void peer_write(int fd, const void *buf, size_t len)
{
    g_assert_cmpint(send(fd, buf, len, MSG_NOSIGNAL), ==, len);
}

/*
 * Read one frame of any type: the header, then its body into buf (size bytes
 * at most, else the test fails).  A relay between two devices can pass the
 * frame on as it came: peer_write of the header, then of the body.
 */
uint16_t peer_read_frame(int fd, struct pib_link_hdr *hdr, void *buf,
                         size_t size)
{
    uint16_t len;

    g_assert_true(peer_read(fd, hdr, sizeof(*hdr)));
    g_assert_cmphex(hdr->magic, ==, PIB_LINK_MAGIC);
    len = be16_to_cpu(hdr->length_be);
    g_assert_cmpuint(len, <=, size);
    g_assert_true(peer_read(fd, buf, len));
    return len;
}

uint64_t peer_expect_hello(int fd, uint64_t node_guid)
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
    return be64_to_cpu(hello.token_be);
}

/* Our HELLO, in three pieces that split the header: the device reassembles */
void peer_send_hello(int fd)
{
    peer_send_hello_flags(fd, 0);
}

/* The same with these PIB_HELLO_F_* flags. */
void peer_send_hello_flags(int fd, uint32_t flags)
{
    peer_send_hello_token(fd, flags, 0);
}

void peer_send_hello_token(int fd, uint32_t flags, uint64_t token)
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
        .node_guid_be = cpu_to_be64(PEER_NODE_GUID),
        .port_guid_be = cpu_to_be64(PEER_NODE_GUID + 1),
        .flags_be = cpu_to_be32(flags),
        .token_be = cpu_to_be64(token),
    };

    memcpy(frame, &hdr, sizeof(hdr));
    memcpy(frame + sizeof(hdr), &hello, sizeof(hello));
    peer_write(fd, frame, 1);
    g_usleep(20000);
    peer_write(fd, frame + 1, 5);
    g_usleep(20000);
    peer_write(fd, frame + 6, sizeof(frame) - 6);
}

/* The next frame of any type within timeout_ms: its type (payload in buf), or 0 if none came. */
uint8_t peer_read_any(int fd, void *buf, size_t size, uint16_t *len, int timeout_ms)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    struct pib_link_hdr hdr;

    if (poll(&pfd, 1, timeout_ms) != 1) {
        return 0;
    }
    *len = peer_read_frame(fd, &hdr, buf, size);
    return hdr.type;
}

/*
 * A FLOW frame for every data VL (include/pib_link.h, "Credits"): VL0's FCTBS and FCCL, and an
 * FCCL of fccl_rest for VLs 1-14, whose FCTBS is 0.
 */
void peer_send_flow(int fd, uint16_t fctbs, uint16_t fccl, uint16_t fccl_rest)
{
    uint8_t f[PIB_LINK_HDR_LEN + PIB_LINK_DATA_VLS * sizeof(struct pib_link_fc)];
    int i;

    f[0] = PIB_LINK_MAGIC;
    f[1] = PIB_FRAME_FLOW;
    stw_be_p(f + 2, sizeof(f) - PIB_LINK_HDR_LEN);
    for (i = 0; i < PIB_LINK_DATA_VLS; i++) {
        stw_be_p(f + 4 + 4 * i, i == 0 ? fctbs : 0);
        stw_be_p(f + 6 + 4 * i, i << 12 | ((i == 0 ? fccl : fccl_rest) & 0xfff));
    }
    peer_write(fd, f, sizeof(f));
}

void peer_send_packet(int fd, uint16_t len)
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
void peer_expect_eof(int fd)
{
    uint8_t byte;

    g_assert_false(peer_read(fd, &byte, 1));
}

void peer_bring_up(PibDev *d, int fd, uint64_t node_guid)
{
    peer_expect_hello(fd, node_guid);
    peer_send_hello(fd);
    pib_wait_port_state(d, PIB_PORT_ACTIVE);
    g_assert_true(pib_aeq_find(d, PIB_AE_PORT_ACTIVE, TIMEOUT_US));
    g_assert_cmpuint(rd(d, PIB_REG_LINK_STATE), ==, PIB_LINK_UP);
}

int peer_dev_up(PeerLink *l, PibDev *d)
{
    int fd;

    peer_boot(l, 1);
    pib_open(d, l->qs, PIB_DEVFN_A);
    pib_enable(d, 16, 64);
    fd = peer_connect(l->path);
    peer_bring_up(d, fd, TEST_NODE_GUID);
    return fd;
}

void peer_expect_down(PibDev *d, uint32_t link_downs)
{
    struct pib_port_attr attr;

    pib_wait_port_state(d, PIB_PORT_DOWN);
    g_assert_true(pib_aeq_find(d, PIB_AE_PORT_ERR, TIMEOUT_US));
    g_assert_cmpuint(pib_query_port(d, 1, &attr), ==, PIB_AQ_OK);
    g_assert_cmpuint(attr.phys_state, ==, PIB_PHYS_POLLING);
    g_assert_cmpuint(le32_to_cpu(attr.link_downs), ==, link_downs);
    g_assert_cmpuint(rd(d, PIB_REG_LINK_STATE), ==, PIB_LINK_DOWN);
}

/*
 * The data-path mini-driver
 */

uint64_t dp_alloc(PibDev *d, size_t size)
{
    uint64_t addr = guest_alloc(&d->qs->alloc, size);

    g_assert_cmphex(addr & 0xfff, ==, 0);
    qtest_memset(qts(d), addr, 0, size);
    return addr;
}

/* A page list for npages contiguous pages from addr. */
uint64_t dp_pbl(PibDev *d, uint64_t addr, uint32_t npages)
{
    uint64_t pbl = dp_alloc(d, MAX(npages, 1) * sizeof(uint64_t));
    uint32_t i;

    for (i = 0; i < npages; i++) {
        qtest_writeq(qts(d), pbl + i * 8, addr + (uint64_t)i * 4096);
    }
    return pbl;
}

uint32_t dp_create_pd(PibDev *d)
{
    struct pib_admin_cmd cmd = { .opcode = PIB_CMD_CREATE_PD };
    struct pib_admin_cqe cqe;

    g_assert_cmpuint(pib_cmd(d, &cmd, &cqe), ==, PIB_AQ_OK);
    return le32_to_cpu(cqe.result0);
}

uint8_t dp_obj_cmd(PibDev *d, uint8_t opcode, uint32_t num)
{
    struct pib_admin_cmd cmd = {
        .opcode = opcode,
        .in.obj.num = cpu_to_le32(num),
    };

    return pib_cmd(d, &cmd, NULL);
}

/* REG_MR of [addr, addr + len) with iova == addr (contiguous pages). */
uint8_t dp_reg_mr_status(PibDev *d, uint32_t pdn, uint32_t access,
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

uint32_t dp_reg_mr(PibDev *d, uint32_t pdn, uint32_t access,
                   uint64_t addr, uint64_t len)
{
    uint32_t key;

    g_assert_cmpuint(dp_reg_mr_status(d, pdn, access, addr, len, &key), ==,
                     PIB_AQ_OK);
    return key;
}

struct pib_device_attr dp_query_device(PibDev *d)
{
    struct pib_device_attr a;
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_QUERY_DEVICE,
        .resp_addr = cpu_to_le64(d->resp),
        .resp_len = cpu_to_le32(sizeof(a)),
    };

    g_assert_cmpuint(pib_cmd(d, &cmd, NULL), ==, PIB_AQ_OK);
    qtest_memread(qts(d), d->resp, &a, sizeof(a));
    return a;
}

uint8_t dp_alloc_dm(PibDev *d, uint64_t length, uint32_t *dm, uint32_t *start)
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_ALLOC_DM,
        .in.alloc_dm.length = cpu_to_le64(length),
    };
    struct pib_admin_cqe cqe;
    uint8_t st = pib_cmd(d, &cmd, &cqe);

    *dm = le32_to_cpu(cqe.result0);
    *start = le32_to_cpu(cqe.result1);
    return st;
}

uint8_t dp_reg_dm_mr(PibDev *d, uint32_t pdn, uint32_t dm, uint64_t offset, uint64_t length,
                     uint32_t *key)
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_REG_DM_MR,
        .in.reg_dm_mr = {
            .pdn = cpu_to_le32(pdn),
            .access = cpu_to_le32(PIB_ACCESS_LOCAL_WRITE | PIB_ACCESS_REMOTE_WRITE |
                                  PIB_ACCESS_REMOTE_READ),
            .length = cpu_to_le64(length),
            .offset = cpu_to_le64(offset),
            .dm = cpu_to_le32(dm),
        },
    };
    struct pib_admin_cqe cqe;
    uint8_t st = pib_cmd(d, &cmd, &cqe);

    *key = le32_to_cpu(cqe.result0);
    return st;
}

uint32_t dp_alloc_mw(PibDev *d, uint32_t pdn, uint32_t type)
{
    struct pib_admin_cmd cmd = { .opcode = PIB_CMD_ALLOC_MW };
    struct pib_admin_cqe acqe;

    cmd.in.alloc_mw.pdn = cpu_to_le32(pdn);
    cmd.in.alloc_mw.type = cpu_to_le32(type);
    g_assert_cmpuint(pib_cmd(d, &cmd, &acqe), ==, PIB_AQ_OK);
    return le32_to_cpu(acqe.result0);
}

static uint8_t dp_create_cq_ex(PibDev *d, uint32_t depth, uint32_t uar,
                               uint32_t flags, TestCq *cq)
{
    uint32_t cqe_size = 1u << pib_cqe_stride_log(flags);
    uint64_t ring_bytes = ROUND_UP((uint64_t)depth * cqe_size, 4096);
    uint32_t npages = ring_bytes / 4096 + 1;
    struct pib_admin_cmd cmd;
    struct pib_admin_cqe cqe;
    uint8_t status;

    memset(cq, 0, sizeof(*cq));
    cq->depth = depth;
    cq->cqe_size = cqe_size;
    cq->ring_bytes = ring_bytes;
    cq->ring = dp_alloc(d, ring_bytes + 4096);
    cmd = (struct pib_admin_cmd) {
        .opcode = PIB_CMD_CREATE_CQ,
        .in.create_cq = {
            .depth = cpu_to_le32(depth),
            .npages = cpu_to_le32(npages),
            .pbl_addr = cpu_to_le64(dp_pbl(d, cq->ring, npages)),
            .uar = cpu_to_le32(uar),
            .flags = cpu_to_le32(flags),
        },
    };
    status = pib_cmd(d, &cmd, &cqe);
    cq->cqn = le32_to_cpu(cqe.result0);
    return status;
}

uint8_t dp_create_cq_status(PibDev *d, uint32_t depth, uint32_t uar,
                            TestCq *cq)
{
    return dp_create_cq_ex(d, depth, uar, 0, cq);
}

uint8_t dp_create_cq_flags(PibDev *d, uint32_t depth, uint32_t flags,
                           TestCq *cq)
{
    return dp_create_cq_ex(d, depth, DP_UAR, flags, cq);
}

void dp_create_cq(PibDev *d, uint32_t depth, TestCq *cq)
{
    g_assert_cmpuint(dp_create_cq_status(d, depth, DP_UAR, cq), ==, PIB_AQ_OK);
}

/*
 * A QP with room for 12 SGEs (or 192 inline bytes) per send WQE and 3 per
 * receive WQE; on an SRQ (srqn != ~0) it has no RQ.
 */
/* CREATE_QP with PIB_QPC_F_* flags (an RQ's doorbell record: one more page). */
uint8_t dp_create_qp_flags(PibDev *d, uint8_t type, uint32_t pdn,
                           TestCq *scq, TestCq *rcq, uint32_t sq_depth,
                           uint32_t rq_depth, uint32_t uar, uint32_t srqn,
                           uint8_t flags, TestQp *qp)
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
    rq_pages = pib_recv_ring_pages(rq_depth, qp->rq_stride_log,
                                   flags & PIB_QPC_F_RQ_DBREC);
    qp->sq = dp_alloc(d, sq_pages * 4096);
    qp->rq = dp_alloc(d, MAX(rq_pages, 1) * 4096);
    if (flags & PIB_QPC_F_RQ_DBREC) {
        qp->dbrec = qp->rq + (uint64_t)(rq_pages - 1) * 4096;
    }
    c = (struct pib_qp_create) {
        .pdn = cpu_to_le32(pdn),
        .type = type,
        .flags = flags | (rq_depth ? 0 : PIB_QPC_F_NO_RQ),
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

uint8_t dp_create_qp_ex(PibDev *d, uint8_t type, uint32_t pdn,
                        TestCq *scq, TestCq *rcq, uint32_t sq_depth,
                        uint32_t rq_depth, uint32_t uar, uint32_t srqn,
                        TestQp *qp)
{
    return dp_create_qp_flags(d, type, pdn, scq, rcq, sq_depth, rq_depth, uar,
                              srqn, 0, qp);
}

uint8_t dp_create_qp_status(PibDev *d, uint8_t type, uint32_t pdn,
                            TestCq *scq, TestCq *rcq, uint32_t sq_depth,
                            uint32_t rq_depth, uint32_t uar,
                            TestQp *qp)
{
    return dp_create_qp_ex(d, type, pdn, scq, rcq, sq_depth, rq_depth, uar,
                           0xffffffff, qp);
}

void dp_create_qp(PibDev *d, uint8_t type, uint32_t pdn, TestCq *scq,
                  TestCq *rcq, TestQp *qp)
{
    g_assert_cmpuint(dp_create_qp_status(d, type, pdn, scq, rcq, 16, 16,
                                         DP_UAR, qp), ==, PIB_AQ_OK);
}

uint8_t dp_modify(PibDev *d, uint32_t qpn, const struct pib_qp_attr *a)
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

uint8_t dp_modify_state(PibDev *d, uint32_t qpn, uint8_t state)
{
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE),
        .qp_state = state,
    };

    return dp_modify(d, qpn, &a);
}

struct pib_qp_attr dp_query_qp(PibDev *d, uint32_t qpn)
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
void dp_connect_ex(PibDev *d, TestQp *qp, uint16_t dlid, uint32_t dqpn,
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

void dp_connect(PibDev *d, TestQp *qp, uint16_t dlid, uint32_t dqpn)
{
    dp_connect_ex(d, qp, dlid, dqpn, DP_MTU_1024, 14, 7, 7);
}

/* UD: RESET -> INIT -> RTR -> RTS with a Q_Key. */
void dp_ud_ready(PibDev *d, TestQp *qp, uint32_t qkey)
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

void dp_doorbell(PibDev *d, uint32_t uar, uint32_t reg, uint32_t obj,
                 uint32_t index)
{
    qpci_io_writeq(d->dev, d->bar2, uar * PIB_UAR_PAGE_SIZE + reg,
                   (uint64_t)index << PIB_DB_INDEX_SHIFT | obj);
}

struct pib_sge dp_sge(uint64_t addr, uint32_t len, uint32_t lkey)
{
    return (struct pib_sge) {
        .addr = cpu_to_le64(addr),
        .length = cpu_to_le32(len),
        .lkey = cpu_to_le32(lkey),
    };
}

/*
 * Write a receive WQE in the next RQ slot; tell the device as a driver does:
 * the RQ's doorbell record if it has one (and the doorbell too only while the
 * record's RING flag asks for it), else the RQ doorbell.
 */
void dp_post_recv(PibDev *d, TestQp *qp, uint64_t wr_id,
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
    if (qp->dbrec) {
        qtest_writel(qts(d), qp->dbrec + offsetof(struct pib_recv_dbrec, pi),
                     qp->rq_pi);
        if (!(qtest_readl(qts(d), qp->dbrec +
                          offsetof(struct pib_recv_dbrec, flags)) &
              PIB_DBREC_F_RING)) {
            return;
        }
    }
    dp_doorbell(d, qp->uar, PIB_UAR_RQ_DB, qp->qpn, qp->rq_pi);
}

/* Write a send WQE (control segment, then SGEs or inline bytes); ring. */
void dp_post_send_raw(PibDev *d, TestQp *qp, struct pib_send_wqe *wqe,
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

void dp_post_send(PibDev *d, TestQp *qp, uint8_t opcode, uint8_t flags,
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

void dp_post_bind(PibDev *d, TestQp *qp, uint64_t wr_id, uint8_t type,
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

/*
 * How long dp_poll sleeps between looks at a CQ.  Each look is a qtest
 * command that costs QEMU CPU time too; the benchmarks look less often.
 */
gulong dp_poll_interval_us = 200;
const char *pib_dev_props = "";

/* The next CQE, by its phase bit; gives the slot back (CI record). */
bool dp_poll_ts(PibDev *d, TestCq *cq, struct pib_cqe_ts *slot,
                gint64 timeout_us)
{
    uint32_t size = cq->cqe_size ? cq->cqe_size : sizeof(struct pib_cqe);
    uint64_t addr = cq->ring + (uint64_t)(cq->ci & (cq->depth - 1)) * size;
    gint64 end = g_get_monotonic_time() + timeout_us;

    memset(slot, 0, sizeof(*slot));
    for (;;) {
        qtest_memread(qts(d), addr, slot, size);
        if ((slot->cqe.flags & PIB_CQE_F_PHASE) ==
            phase_of(cq->ci, cq->depth)) {
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

bool dp_poll(PibDev *d, TestCq *cq, struct pib_cqe *cqe,
             gint64 timeout_us)
{
    struct pib_cqe_ts slot;
    bool got = dp_poll_ts(d, cq, &slot, timeout_us);

    *cqe = slot.cqe;
    return got;
}

void dp_expect(PibDev *d, TestCq *cq, uint64_t wr_id, uint8_t status,
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

void dp_expect_none(PibDev *d, TestCq *cq)
{
    struct pib_cqe cqe;

    g_assert_false(dp_poll(d, cq, &cqe, DP_SHORT_US));
}

/*
 * Timers run on the virtual clock, which under qtest moves only when told.
 * Step it until the next CQE turns up (a timer's work takes a moment of real
 * time to reach the CQ, so poll between the steps).
 */
void dp_step_until_cqe(PibDev *d, TestCq *cq, struct pib_cqe *cqe,
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

void dp_fill(PibDev *d, uint64_t addr, size_t len, uint32_t seed)
{
    g_autofree uint8_t *buf = g_malloc(len);
    size_t i;

    for (i = 0; i < len; i++) {
        buf[i] = (i * 7 + seed * 13 + (i >> 8)) & 0xff;
    }
    qtest_memwrite(qts(d), addr, buf, len);
}

void dp_assert_same(PibDev *da, uint64_t a, PibDev *db, uint64_t b,
                    size_t len)
{
    g_autofree uint8_t *x = g_malloc(len);
    g_autofree uint8_t *y = g_malloc(len);

    qtest_memread(qts(da), a, x, len);
    qtest_memread(qts(db), b, y, len);
    g_assert_cmpmem(x, len, y, len);
}

/* Async events of any object: skip until type/obj turns up. */
bool dp_aeq_find(PibDev *d, uint8_t type, uint32_t obj)
{
    struct pib_aeqe e;

    while (pib_aeq_next(d, &e, TIMEOUT_US)) {
        if (e.type == type && le32_to_cpu(e.obj) == obj) {
            return true;
        }
    }
    return false;
}

void dp_pair_boot(TestPair *p, const char *extra)
{
    g_autofree char *args = NULL;

    p->dir = g_dir_make_tmp("pib-qtest-XXXXXX", NULL);
    p->path = g_build_filename(p->dir, "link.sock", NULL);
    args = g_strdup_printf(
        "-m 256M "
        "-chardev socket,id=la,path=%s,server=on,wait=off "
        "-chardev socket,id=lb,path=%s," PIB_CHR_RECONNECT_1S " "
        "-device pib-hca,addr=4.0,id=pa,chardev=la,lid=1%s "
        "-device pib-hca,addr=5.0,id=pb,chardev=lb,lid=2%s %s", p->path, p->path,
        pib_dev_props, pib_dev_props, extra);
    p->qs = pib_boot(args);
}

void dp_pair_up(TestPair *p)
{
    PibDev *devs[2] = { &p->a, &p->b };
    uint64_t *ceqs[2] = { &p->ceq_a, &p->ceq_b };
    int i;

    dp_pair_boot(p, "");
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

void dp_pair_down(TestPair *p)
{
    pib_close(&p->a);
    pib_close(&p->b);
    qtest_shutdown(p->qs);
    g_unlink(p->path);
    g_rmdir(p->dir);
    g_free(p->path);
    g_free(p->dir);
}

void dp_end(PibDev *d, TestEnd *e, uint8_t type, uint32_t buf_len)
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
void dp_link_ends(TestEnd *x, uint16_t lid_x, TestEnd *y,
                  uint16_t lid_y)
{
    dp_connect(x->d, &x->qp, lid_y, y->qp.qpn);
    dp_connect(y->d, &y->qp, lid_x, x->qp.qpn);
}

/* Start a connection over: both QPs through RESET, rings from index 0. */
void dp_relink(TestEnd *x, uint16_t lid_x, TestEnd *y, uint16_t lid_y)
{
    g_assert_cmpuint(dp_modify_state(x->d, x->qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    g_assert_cmpuint(dp_modify_state(y->d, y->qp.qpn, PIB_QPS_RESET), ==,
                     PIB_AQ_OK);
    x->qp.sq_pi = x->qp.rq_pi = y->qp.sq_pi = y->qp.rq_pi = 0;
    dp_link_ends(x, lid_x, y, lid_y);
}

uint32_t dp_mad_ifc(PibDev *d, const void *mad, void *out, bool ignore_mkey)
{
    uint64_t mbox = dp_alloc(d, 4096);
    struct pib_mad_ifc_in in = {
        .flags = cpu_to_le32(ignore_mkey ? PIB_MAD_IFC_F_IGNORE_MKEY : 0),
        .port_num = 1,
    };
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_MAD_IFC,
        .resp_addr = cpu_to_le64(d->resp),
        .resp_len = cpu_to_le32(PIB_MAD_SIZE),
        .in.mbox = { .addr = cpu_to_le64(mbox), .len = cpu_to_le32(sizeof(in)) },
    };
    struct pib_admin_cqe cqe;

    memcpy(in.mad, mad, PIB_MAD_SIZE);
    qtest_memwrite(qts(d), mbox, &in, sizeof(in));
    g_assert_cmpuint(pib_cmd(d, &cmd, &cqe), ==, PIB_AQ_OK);
    if (le32_to_cpu(cqe.result0) & PIB_MAD_IFC_REPLY) {
        qtest_memread(qts(d), d->resp, out, PIB_MAD_SIZE);
    }
    return le32_to_cpu(cqe.result0);
}

uint16_t dp_pma(PibDev *d, uint8_t method, uint16_t attr, uint8_t port_select,
                uint16_t counter_select, struct pib_pma_mad *resp)
{
    struct pib_pma_mad req = peer_pma_new(method, attr, port_select, counter_select);

    g_assert_cmpuint(dp_mad_ifc(d, &req, resp, false), ==, PIB_MAD_IFC_REPLY);
    g_assert_cmphex(resp->hdr.method, ==, PIB_MAD_METHOD_GET_RESP);
    g_assert_cmphex(resp->hdr.tid_lo_be, ==, req.hdr.tid_lo_be);
    return be16_to_cpu(resp->hdr.status_be);
}

void qom_set_u32(QTestState *q, const char *path, const char *prop, uint32_t value)
{
    qtest_qmp_assert_success(q, "{ 'execute': 'qom-set', 'arguments': "
                             "{ 'path': %s, 'property': %s, 'value': %u } }",
                             path, prop, value);
}

uint64_t qom_get_u64(QTestState *q, const char *path, const char *prop)
{
    QDict *r = qtest_qmp(q, "{ 'execute': 'qom-get', 'arguments': "
                         "{ 'path': %s, 'property': %s } }", path, prop);
    uint64_t val;

    g_assert(r && qdict_haskey(r, "return"));
    val = qdict_get_int(r, "return");
    qobject_unref(r);
    return val;
}

uint32_t qom_get_u32(QTestState *q, const char *path, const char *prop)
{
    uint64_t val = qom_get_u64(q, path, prop);

    g_assert_cmpuint(val, <=, UINT32_MAX);
    return val;
}

void dp_msix_to_ram(PibDev *d, unsigned vector, uint64_t addr, uint32_t data)
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

void dp_query_gid(PibDev *d, uint32_t idx, uint8_t gid[16])
{
    struct pib_admin_cmd cmd = {
        .opcode = PIB_CMD_QUERY_GID,
        .resp_addr = cpu_to_le64(d->resp),
        .resp_len = cpu_to_le32(16),
        .in.port = { .port_num = 1, .index = cpu_to_le32(idx) },
    };

    g_assert_cmpuint(pib_cmd(d, &cmd, NULL), ==, PIB_AQ_OK);
    qtest_memread(qts(d), d->resp, gid, 16);
}

void dp_counters(PibDev *d, uint64_t c[PIB_CNT_MAX])
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

uint32_t dp_err_count(PibDev *d)
{
    return rd(d, PIB_REG_ERR_COUNT);
}

/*
 * Wire packets: the peer as a remote HCA
 */

uint32_t wp_dqpn;                /* the device's QP the peer talks to */
uint32_t wp_bth_flags;
static bool wp_batching;         /* wp_batch_begin(): frames collect in wp_batch */
static uint8_t wp_batch[8192];
static uint32_t wp_batch_len;

/* Frame and send one packet; ext: the extension headers, already built. */
void wp_send(int fd, uint8_t opcode, uint32_t psn, bool ackreq,
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
    stl_be_p(b + 12, wp_dqpn | wp_bth_flags);
    stl_be_p(b + 16, (psn & PIB_PSN_MASK) | (ackreq ? PIB_BTH_ACKREQ : 0));
    memcpy(b + 20, ext, ext_len);
    memcpy(b + 20 + ext_len, payload, paylen);
    if (wp_batching) {
        g_assert_cmpuint(wp_batch_len + 4 + len, <=, sizeof(wp_batch));
        memcpy(wp_batch + wp_batch_len, frame, 4 + len);
        wp_batch_len += 4 + len;
        return;
    }
    peer_write(fd, frame, 4 + len);
}

/*
 * Between wp_batch_begin() and wp_batch_send(), wp_send() collects its frames, and
 * wp_batch_send() writes them in one send(): the device reads them in one read and handles
 * them all before its engines run, as packets that arrive together on a busy link.
 */
void wp_batch_begin(void)
{
    wp_batching = true;
    wp_batch_len = 0;
}

void wp_batch_send(int fd)
{
    wp_batching = false;
    peer_write(fd, wp_batch, wp_batch_len);
}

/*
 * The device's QP qpn to INIT (with the remote access rights access), then RTR
 * aimed at the wire peer: WP_LID, WP_QPN, MTU 256, the first PSN expected 100.
 */
void wp_qp_rtr(PibDev *d, uint32_t qpn, uint32_t access, uint8_t max_dest_rd_atomic)
{
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_PKEY_INDEX |
                                 PIB_QP_PORT | PIB_QP_ACCESS_FLAGS),
        .qp_state = PIB_QPS_INIT,
        .port_num = 1,
        .qp_access_flags = cpu_to_le32(access),
    };

    g_assert_cmpuint(dp_modify(d, qpn, &a), ==, PIB_AQ_OK);
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
        .max_dest_rd_atomic = max_dest_rd_atomic,
        .min_rnr_timer = 3,
    };
    g_assert_cmpuint(dp_modify(d, qpn, &a), ==, PIB_AQ_OK);
}

/* Then RTS: the first PSN sent 500, the local ACK timeout 14, 7 retries and 7 RNR retries. */
void wp_qp_rts(PibDev *d, uint32_t qpn, uint8_t max_rd_atomic)
{
    struct pib_qp_attr a = {
        .attr_mask = cpu_to_le32(PIB_QP_STATE | PIB_QP_SQ_PSN | PIB_QP_TIMEOUT |
                                 PIB_QP_RETRY_CNT | PIB_QP_RNR_RETRY |
                                 PIB_QP_MAX_QP_RD_ATOMIC),
        .qp_state = PIB_QPS_RTS,
        .sq_psn = cpu_to_le32(500),
        .timeout = 14,
        .retry_cnt = 7,
        .rnr_retry = 7,
        .max_rd_atomic = max_rd_atomic,
    };

    g_assert_cmpuint(dp_modify(d, qpn, &a), ==, PIB_AQ_OK);
}

/* Wait for the next packet from the device, parse what we need of it. */
bool wp_recv(int fd, WirePkt *w, int timeout_ms)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    struct pib_link_hdr hdr;
    uint8_t b[4352];
    uint32_t len, off;
    uint8_t pad, op;

    if (poll(&pfd, 1, timeout_ms) != 1) {
        return false;
    }
    len = peer_read_frame(fd, &hdr, b, sizeof(b));
    g_assert_cmphex(hdr.type, ==, PIB_FRAME_PACKET);

    memset(w, 0, sizeof(*w));
    g_assert_cmpuint(b[1] & 3, ==, PIB_LNH_IBA_LOCAL);
    g_assert_cmpuint(lduw_be_p(b + 2), ==, WP_LID);
    g_assert_cmpuint(lduw_be_p(b + 4) * 4, ==, len);
    g_assert_cmpuint(lduw_be_p(b + 6), ==, 1);
    w->opcode = b[8];
    pad = (b[9] >> PIB_BTH_PAD_SHIFT) & 3;
    g_assert_cmphex(lduw_be_p(b + 10), ==, 0xffff);
    w->dqpn = ldl_be_p(b + 12) & PIB_QPN_MASK;
    w->fecn = ldl_be_p(b + 12) & PIB_BTH_FECN;
    w->becn = ldl_be_p(b + 12) & PIB_BTH_BECN;
    g_assert_cmphex(w->dqpn, ==, WP_QPN);
    w->psn = ldl_be_p(b + 16) & PIB_PSN_MASK;
    w->ackreq = ldl_be_p(b + 16) & PIB_BTH_ACKREQ;
    off = 20;
    /* XRC's operations are RC's; its requests carry an XRCETH first. */
    op = w->opcode;
    if ((op & ~PIB_OP_OPERATION_MASK) == PIB_OP_TRANSPORT_XRC) {
        op &= PIB_OP_OPERATION_MASK;
        if (op < PIB_OP_RC_RDMA_READ_RESP_FIRST ||
            op > PIB_OP_RC_ATOMIC_ACKNOWLEDGE) {
            g_assert_cmpuint(off + 4, <=, len);
            w->xrc_srqn = ldl_be_p(b + off) & PIB_QPN_MASK;
            off += 4;
        }
    }
    if (op == PIB_OP_RC_FLUSH) {
        g_assert_cmpuint(off + 4, <=, len);     /* the FETH, before the RETH */
        w->feth = ldl_be_p(b + off);
        off += 4;
    }
    switch (op) {
    case PIB_OP_RC_RDMA_READ_REQUEST:
    case PIB_OP_RC_FLUSH:
    case PIB_OP_RC_RDMA_WRITE_FIRST:
    case PIB_OP_RC_RDMA_WRITE_ONLY:
    case PIB_OP_RC_RDMA_WRITE_ONLY_IMM:
    case PIB_OP_UC_RDMA_WRITE_FIRST:
    case PIB_OP_UC_RDMA_WRITE_ONLY:
    case PIB_OP_UC_RDMA_WRITE_ONLY_IMM:
        g_assert_cmpuint(off + 16, <=, len);    /* the RETH */
        w->va = ldq_be_p(b + off);
        w->rkey = ldl_be_p(b + off + 8);
        w->dmalen = ldl_be_p(b + off + 12);
        off += 16;
        break;
    default:
        break;
    }
    switch (op) {
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
    if (op == PIB_OP_RC_ATOMIC_ACKNOWLEDGE) {
        w->orig = ldq_be_p(b + off);
        off += 8;
    }
    g_assert_cmpuint(off + pad, <=, len);
    w->paylen = len - off - pad;
    g_assert_cmpuint(w->paylen, <=, sizeof(w->payload));
    memcpy(w->payload, b + off, w->paylen);
    return true;
}

void wp_expect(int fd, WirePkt *w, uint8_t opcode, uint32_t psn)
{
    g_assert_true(wp_recv(fd, w, TIMEOUT_US / 1000));
    g_assert_cmphex(w->opcode, ==, opcode);
    g_assert_cmpuint(w->psn, ==, psn);
}

void wp_expect_nothing(int fd)
{
    WirePkt w;

    g_assert_false(wp_recv(fd, &w, 200));
}

/* An RC SEND_ONLY to the device's QP. */
void wp_send_only(int fd, uint32_t psn, const char *text)
{
    wp_send(fd, PIB_OP_RC_SEND_ONLY, psn, true, NULL, 0, text,
               strlen(text));
}

void wp_ack(int fd, uint32_t psn, uint8_t syndrome)
{
    uint8_t aeth[4];

    stl_be_p(aeth, (uint32_t)syndrome << 24);
    wp_send(fd, PIB_OP_RC_ACKNOWLEDGE, psn, false, aeth, 4, NULL, 0);
}

/* A fresh SMP request: base and class version, a new transaction ID each time. */
static uint32_t peer_tid = 0x100;      /* transaction IDs of the requests made below */

struct pib_smp peer_smp_new(uint8_t mgmt_class, uint8_t method, uint16_t attr,
                            uint32_t mod)
{
    return (struct pib_smp) {
        .hdr = {
            .base_version = PIB_MAD_BASE_VERSION,
            .mgmt_class = mgmt_class,
            .class_version = PIB_SMP_CLASS_VERSION,
            .method = method,
            .tid_lo_be = cpu_to_be32(peer_tid++),
            .attr_id_be = cpu_to_be16(attr),
            .attr_mod_be = cpu_to_be32(mod),
        },
    };
}

struct pib_cc_mad peer_cc_new(uint8_t method, uint16_t attr, uint32_t mod, uint64_t cc_key)
{
    return (struct pib_cc_mad) {
        .hdr = {
            .base_version = PIB_MAD_BASE_VERSION,
            .mgmt_class = PIB_MGMT_CLASS_CC,
            .class_version = PIB_CC_CLASS_VERSION,
            .method = method,
            .tid_lo_be = cpu_to_be32(peer_tid++),
            .attr_id_be = cpu_to_be16(attr),
            .attr_mod_be = cpu_to_be32(mod),
        },
        .cc_key_hi_be = cpu_to_be32(cc_key >> 32),
        .cc_key_lo_be = cpu_to_be32(cc_key),
    };
}

struct pib_pma_mad peer_pma_new(uint8_t method, uint16_t attr, uint8_t port_select,
                                uint16_t counter_select)
{
    struct pib_pma_mad req = {
        .hdr = {
            .base_version = PIB_MAD_BASE_VERSION,
            .mgmt_class = PIB_MGMT_CLASS_PERF,
            .class_version = PIB_PMA_CLASS_VERSION,
            .method = method,
            .tid_lo_be = cpu_to_be32(peer_tid++),
            .attr_id_be = cpu_to_be16(attr),
        },
    };

    req.data[1] = port_select;
    stw_be_p(req.data + 2, counter_select);
    return req;
}
