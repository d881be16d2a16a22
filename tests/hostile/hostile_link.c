// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pib-hostile: the link (framing on the unix socket) and the target file
 * (the program is described in pib_hostile.c; what the files share is in hostile.h)
 */
#define _GNU_SOURCE
#include "hostile.h"

/* =============================================================================================
 * The link: framing on a unix stream socket
 */

int link_dial(struct link *l, int timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int64_t deadline = now_ms() + timeout_ms;

	if (strlen(l->path) >= sizeof(sa.sun_path))
		die("socket path too long: %s", l->path);
	strcpy(sa.sun_path, l->path);
	for (;;) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			die("socket: %s", strerror(errno));
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			l->fd = fd;
			l->eof = false;
			l->len = 0;
			l->passed_fd = -1;
			l->peer_flags = 0;
			memset(l->vl, 0, sizeof(l->vl));	/* a new stream: no credit */
			l->flow_rx = l->flow_odd = l->overrun = 0;
			l->flow_first_len = 0;
			l->lied = false;
			return 0;
		}
		close(fd);
		/* Between two connections, or before the server exists: try again. */
		if ((errno != ECONNREFUSED && errno != ENOENT && errno != EAGAIN) ||
		    now_ms() > deadline)
			return -1;
		sleep_ms(100);
	}
}

void link_close(struct link *l)
{
	if (l->fd >= 0) {
		close(l->fd);
		if (l->passed_fd >= 0)
			close(l->passed_fd);
	}
	l->fd = -1;
	l->passed_fd = -1;
}

int send_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t r = send(fd, b, n, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		b += r;
		n -= r;
	}
	return 0;
}

/* One sendmsg of b[0, n) with fd riding along (SCM_RIGHTS): the bytes it took, or -1. */
static ssize_t send_with_fd(int sock, const uint8_t *b, size_t n, int fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = (void *)b, .iov_len = n };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf) };
	ssize_t r;

	memset(&ctl, 0, sizeof(ctl));
	CMSG_FIRSTHDR(&m)->cmsg_level = SOL_SOCKET;
	CMSG_FIRSTHDR(&m)->cmsg_type = SCM_RIGHTS;
	CMSG_FIRSTHDR(&m)->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(CMSG_FIRSTHDR(&m)), &fd, sizeof(int));
	do {
		r = sendmsg(sock, &m, MSG_NOSIGNAL);
	} while (r < 0 && errno == EINTR);
	return r;
}

/*
 * A frame as a well-behaved port would send it (whatever the payload holds); a descriptor
 * fd >= 0 rides with its first byte (a HELLO's doorbell, include/pib_link.h).
 */
static int send_frame_fd(struct link *l, uint8_t type, const void *payload, size_t len, int fd)
{
	uint8_t f[PIB_LINK_HDR_LEN + PIB_LINK_MAX_PAYLOAD];
	struct pib_link_hdr h = { .magic = PIB_LINK_MAGIC, .type = type,
				  .length_be = htons(len) };
	size_t n = sizeof(h) + len;
	ssize_t first = 0;

	if (len > PIB_LINK_MAX_PAYLOAD)
		die("send_frame: %zu bytes do not fit a frame", len);
	/* A data packet spends credits, which our FLOW frames' FCTBS report. */
	if (type == PIB_FRAME_PACKET && len && link_credits(l) &&
	    ((const uint8_t *)payload)[0] >> 4 < PIB_LINK_DATA_VLS) {
		uint8_t vl = ((const uint8_t *)payload)[0] >> 4;

		l->vl[vl].fctbs = (l->vl[vl].fctbs + fc_blocks(len)) % PIB_LINK_FC_MOD;
	}
	memcpy(f, &h, sizeof(h));
	memcpy(f + sizeof(h), payload, len);
	if (fd >= 0 && (first = send_with_fd(l->fd, f, n, fd)) <= 0)
		return -1;
	return send_all(l->fd, f + first, n - first);
}

int send_frame(struct link *l, uint8_t type, const void *payload, size_t len)
{
	return send_frame_fd(l, type, payload, len, -1);
}

int send_hello(struct link *l)
{
	struct pib_link_hello h = {
		.version_be = htonl(PIB_LINK_PROTO_VERSION),
		.mtu_be = htonl(PIB_LINK_MAX_PAYLOAD),
		.node_guid_be = htobe64(HOSTILE_NODE_GUID),
		.port_guid_be = htobe64(HOSTILE_NODE_GUID + 1),
		.flags_be = htonl(l->hello_flags),
	};

	return send_frame_fd(l, PIB_FRAME_HELLO, &h, sizeof(h), l->offer ? l->offer_fd : -1);
}

/* Read from the stream; a descriptor that comes with the bytes is kept (the first) or closed. */
static ssize_t link_recv(struct link *l)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = l->buf + l->len, .iov_len = sizeof(l->buf) - l->len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf) };
	ssize_t r = recvmsg(l->fd, &m, MSG_CMSG_CLOEXEC);

	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); r >= 0 && c; c = CMSG_NXTHDR(&m, c)) {
		int n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int), fds[4];

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		memcpy(fds, CMSG_DATA(c), MIN(n, 4) * sizeof(int));
		for (int i = 0; i < MIN(n, 4); i++) {
			if (l->passed_fd < 0)
				l->passed_fd = fds[i];
			else
				close(fds[i]);
		}
	}
	return r;
}

/*
 * The next frame from the device: 1 with *type, payload in p (up to PIB_LINK_MAX_PAYLOAD
 * bytes) and *len; 0 on timeout; -1 when the stream ended or broke (l->eof).
 */
int recv_frame(struct link *l, uint8_t *type, uint8_t *p, size_t *len, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;

	for (;;) {
		if (l->len >= PIB_LINK_HDR_LEN) {
			struct pib_link_hdr h;
			size_t n;

			memcpy(&h, l->buf, sizeof(h));
			n = ntohs(h.length_be);
			if (h.magic != PIB_LINK_MAGIC || n > PIB_LINK_MAX_PAYLOAD) {
				info("the device sent a bad frame header (magic 0x%02x, length %zu)",
				     h.magic, n);
				l->eof = true;
				return -1;
			}
			if (l->len >= PIB_LINK_HDR_LEN + n) {
				*type = h.type;
				*len = n;
				memcpy(p, l->buf + PIB_LINK_HDR_LEN, n);
				l->len -= PIB_LINK_HDR_LEN + n;
				memmove(l->buf, l->buf + PIB_LINK_HDR_LEN + n, l->len);
				l->rx_frames++;
				return 1;
			}
		}
		if (l->eof)
			return -1;

		int64_t left = deadline - now_ms();
		struct pollfd pfd = { .fd = l->fd, .events = POLLIN };
		ssize_t r;

		if (left <= 0)
			return 0;
		r = poll(&pfd, 1, left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return 0;
		r = link_recv(l);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			l->eof = true;
			continue;	/* frames already buffered still count */
		}
		l->len += r;
	}
}

/* Wait for the device's HELLO (the frames before it, if any, are dropped). */
int wait_hello(struct link *l, int timeout_ms)
{
	uint8_t p[PIB_LINK_MAX_PAYLOAD], type;
	int64_t deadline = now_ms() + timeout_ms;
	size_t n;

	while (recv_frame(l, &type, p, &n, deadline - now_ms()) == 1) {
		struct pib_link_hello h;

		if (type != PIB_FRAME_HELLO || n < sizeof(h))
			continue;
		memcpy(&h, p, sizeof(h));
		l->peer_node_guid = be64toh(h.node_guid_be);
		l->peer_flags = ntohl(h.flags_be);
		return ntohl(h.version_be) == PIB_LINK_PROTO_VERSION ? 0 : -1;
	}
	return -1;
}

/* Dial and train: each side sends HELLO; the port is ACTIVE once it has ours. */
int link_train(struct link *l, int timeout_ms)
{
	if (link_dial(l, timeout_ms)) {
		info("cannot connect to %s: %s", l->path, strerror(errno));
		return -1;
	}
	if (send_hello(l) || wait_hello(l, timeout_ms)) {
		info("no HELLO from the device on %s", l->path);
		link_close(l);
		return -1;
	}
	/* Both HELLOs are in: a receiver grants its credits now (nothing moves before). */
	if (link_credits(l) && !l->withhold && link_grant(l)) {
		link_close(l);
		return -1;
	}
	return 0;
}

/* =============================================================================================
 * Credits (include/pib_link.h, "Credits"): FLOW frames both ways, our receiver's accounting
 */

#define FC_MASK (PIB_LINK_FC_MOD - 1)

/* Do credits run on this stream: did both HELLOs offer them, and one ask for them (a switch
 * port, or PIB_HELLO_F_CREDITS_ON)? */
bool link_credits(const struct link *l)
{
	return (l->hello_flags & l->peer_flags & PIB_HELLO_F_CREDITS) &&
	       ((l->hello_flags | l->peer_flags) & (PIB_HELLO_F_SWITCH | PIB_HELLO_F_CREDITS_ON));
}

/* The blocks a packet of len bytes (LRH onwards) takes. */
uint16_t fc_blocks(size_t len)
{
	return (len + PIB_LINK_BLOCK - 1) / PIB_LINK_BLOCK;
}

/* A FLOW frame of n entries, whatever they say. */
int link_flow_send(struct link *l, const struct pib_link_fc *fc, unsigned n)
{
	return send_frame(l, PIB_FRAME_FLOW, fc, n * sizeof(*fc));
}

/*
 * Grant as a receiver whose buffer is always empty: each VL's FCCL is what the device sent
 * (ABR) plus the largest window, 2048 blocks; FCTBS is what we sent.  One frame for all VLs,
 * as the device sends its own.
 */
int link_grant(struct link *l)
{
	struct pib_link_fc fc[PIB_LINK_DATA_VLS];

	l->lied = false;
	for (int i = 0; i < PIB_LINK_DATA_VLS; i++) {
		l->vl[i].granted = (l->vl[i].abr + PIB_LINK_VL_BLOCKS) & FC_MASK;
		fc[i].op_fctbs_be = htons(PIB_LINK_FC_OP_NORMAL << 12 | l->vl[i].fctbs);
		fc[i].vl_fccl_be = htons(i << 12 | l->vl[i].granted);
	}
	return link_flow_send(l, fc, PIB_LINK_DATA_VLS);
}

/*
 * A FLOW frame from the device (its length was already read off the header): its credit
 * limits for us, and its FCTBS, to which our ABR is set (IBTA 7.9.4.3).  The device sends one
 * entry per data VL, in VL order, with Op Normal; anything else is counted as odd.
 */
void link_flow_rx(struct link *l, const uint8_t *p, size_t n)
{
	if (!l->flow_rx++) {
		l->flow_first_len = MIN(n, sizeof(l->flow_first));
		memcpy(l->flow_first, p, l->flow_first_len);
	}
	if (n != sizeof(l->flow_first))
		l->flow_odd++;
	for (size_t i = 0; i + sizeof(struct pib_link_fc) <= n; i += sizeof(struct pib_link_fc)) {
		uint16_t a = p[i] << 8 | p[i + 1], b = p[i + 2] << 8 | p[i + 3];
		unsigned op = a >> 12, vl = b >> 12;

		if (op != PIB_LINK_FC_OP_NORMAL || vl != i / sizeof(struct pib_link_fc))
			l->flow_odd++;
		if (vl >= PIB_LINK_DATA_VLS ||
		    (op != PIB_LINK_FC_OP_NORMAL && op != PIB_LINK_FC_OP_INIT))
			continue;
		l->vl[vl].abr = a & FC_MASK;
		l->vl[vl].fccl = b & FC_MASK;
	}
}

/*
 * A PACKET frame from the device, n bytes from the LRH at ib: on a data VL it spends the
 * credit we granted.  One beyond it is the device's fault (overrun).  A well-behaved receiver
 * grants again once the device is down to half a window.
 */
void link_rx_data(struct link *l, const uint8_t *ib, size_t n)
{
	uint8_t vl = n ? ib[0] >> 4 : PIB_LINK_DATA_VLS;

	if (!link_credits(l) || vl >= PIB_LINK_DATA_VLS)
		return;
	l->vl[vl].abr = (l->vl[vl].abr + fc_blocks(n)) & FC_MASK;
	if (!l->lied && ((l->vl[vl].granted - l->vl[vl].abr) & FC_MASK) > PIB_LINK_FC_MOD / 2) {
		l->overrun++;
		info("the device sent %zu bytes on VL%u beyond the credit limit %u we granted "
		     "(it has sent %u blocks)", n, vl, l->vl[vl].granted, l->vl[vl].abr);
	}
	if (!l->withhold &&
	    ((l->vl[vl].granted - l->vl[vl].abr) & FC_MASK) < PIB_LINK_FC_MOD / 4)
		link_grant(l);
}

/* Read and discard until the device closes the stream: 0 if it did within timeout_ms. */
int wait_eof(struct link *l, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	uint8_t junk[4096];

	while (now_ms() < deadline) {
		struct pollfd pfd = { .fd = l->fd, .events = POLLIN };
		ssize_t r = poll(&pfd, 1, deadline - now_ms());

		if (r <= 0)
			continue;
		r = recv(l->fd, junk, sizeof(junk), 0);
		if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
			return 0;
	}
	return -1;
}

/* =============================================================================================
 * What pib-mr-target exposes: a file of "key value" lines
 */

void target_load(struct target *t, const char *file)
{
	char line[4096], key[64];
	FILE *f = fopen(file, "r");
	int seen = 0;

	if (!f)
		die("%s: %s", file, strerror(errno));
	memset(t, 0, sizeof(*t));
	while (fgets(line, sizeof(line), f)) {
		char *v;
		int off;

		if (sscanf(line, "%63s %n", key, &off) != 1)
			continue;
		v = line + off;
#define U(name, field) else if (!strcmp(key, name)) { t->field = strtoull(v, NULL, 0); seen++; }
		if (!strcmp(key, "qpns")) {
			char *end;

			for (t->nqp = 0; t->nqp < MAX_QPS; t->nqp++) {
				t->qpn[t->nqp] = strtoul(v, &end, 0);
				if (end == v)
					break;
				v = end;
			}
			seen++;
		}
		U("lid", lid) U("peer_lid", peer_lid) U("peer_qpn", peer_qpn) U("psn", psn)
		U("mtu", mtu) U("mr_addr", mr_addr) U("mr_len", mr_len) U("mr_rkey", mr_rkey)
		U("guard", guard) U("lo_addr", lo_addr) U("lo_len", lo_len) U("lo_rkey", lo_rkey)
#undef U
	}
	fclose(f);
	if (seen < 13 || !t->lid || !t->nqp || !t->mr_len || !t->mtu)
		die("%s: not a complete pib-mr-target info file", file);
}

/* The MR's contents: byte i is the top byte of i * 2654435761 (Knuth's multiplicative hash),
 * as pib-mr-target fills it. */
uint8_t pattern_byte(uint64_t i)
{
	return (uint8_t)(((uint32_t)i * 2654435761u) >> 24);
}
