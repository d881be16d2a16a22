// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pib-hostile: relay, a transparent cable with a cutter
 * (the program is described in pib_hostile.c; what the files share is in hostile.h)
 */
#define _GNU_SOURCE
#include "hostile.h"

/* =============================================================================================
 * relay: a transparent cable with a cutter
 *
 * Listens on one path (where the client HCA dials) and dials the other (the server HCA) for
 * each client.  It parses the frame headers going by only to count PACKET frames.  SIGUSR1
 * arms the cutter: after --cut-after more PACKET frames (either way) it closes both sides, as
 * if the cable were pulled; it then waits --down-ms before it accepts the client again (the
 * client's redial comes on its own schedule: QEMU's reconnect= seconds).
 */

struct flow {
	uint8_t hdr[PIB_LINK_HDR_LEN];
	unsigned got;			/* header bytes collected */
	uint32_t left;			/* payload bytes still to come */
	bool lost;			/* not a frame stream: stop counting */
	uint64_t frames, packets;
};

static void flow_feed(struct flow *f, const uint8_t *b, size_t n, uint64_t *packets)
{
	while (n && !f->lost) {
		if (f->left) {
			size_t k = MIN(n, f->left);

			f->left -= k;
			b += k;
			n -= k;
			continue;
		}
		f->hdr[f->got++] = *b++;
		n--;
		if (f->got < PIB_LINK_HDR_LEN)
			continue;
		f->got = 0;
		if (f->hdr[0] != PIB_LINK_MAGIC) {
			f->lost = true;
			break;
		}
		f->left = (uint32_t)f->hdr[2] << 8 | f->hdr[3];
		f->frames++;
		if (f->hdr[1] == PIB_FRAME_PACKET) {
			f->packets++;
			(*packets)++;
		}
	}
}

static double rel_s(int64_t t0)
{
	return (now_ms() - t0) / 1000.0;
}

static int relay_listen(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (strlen(path) >= sizeof(sa.sun_path))
		die("socket path too long: %s", path);
	strcpy(sa.sun_path, path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4))
		die("listen on %s: %s", path, strerror(errno));
	return fd;
}

/* Forward what fd a has to fd b: false when either side is gone. */
static bool relay_pump(int a, int b, struct flow *f, uint64_t *packets)
{
	uint8_t buf[65536];
	ssize_t n = recv(a, buf, sizeof(buf), MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0)
		return false;
	flow_feed(f, buf, n, packets);
	return !send_all(b, buf, n);
}

int cmd_relay(const char *listen_path, const char *connect_path, unsigned cut_after,
	      int down_ms)
{
	struct link server = { .path = connect_path, .fd = -1 };
	int lfd = relay_listen(listen_path);
	int64_t t0 = now_ms(), cut_at = 0;
	unsigned cuts = 0;
	struct stat st;
	ino_t mine;

	if (stat(listen_path, &st))
		die("stat %s: %s", listen_path, strerror(errno));
	mine = st.st_ino;
	fprintf(stderr, "relay: +%.3f s listening on %s, server %s\n", rel_s(t0), listen_path,
		connect_path);
	while (!stop) {
		struct pollfd pfd = { .fd = lfd, .events = POLLIN };
		struct flow up = { 0 }, down = { 0 };	/* client -> server, server -> client */
		uint64_t packets = 0, armed_at = 0;
		bool armed = false, cut = false;
		int cfd;

		if (poll(&pfd, 1, 500) <= 0)
			continue;
		cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0)
			continue;
		if (link_dial(&server, 5000)) {
			fprintf(stderr, "relay: +%.3f s client came, but the server at %s does not "
				"answer (%s)\n", rel_s(t0), connect_path, strerror(errno));
			close(cfd);
			continue;
		}
		fprintf(stderr, "relay: +%.3f s connected%s\n", rel_s(t0),
			cut_at ? "" : " (first connection)");
		if (cut_at)
			fprintf(stderr, "relay: +%.3f s restored %.3f s after the cut\n", rel_s(t0),
				(now_ms() - cut_at) / 1000.0);
		while (!stop) {
			struct pollfd p[2] = { { .fd = cfd, .events = POLLIN },
					       { .fd = server.fd, .events = POLLIN } };

			if (arm && !armed) {
				arm = 0;
				armed = true;
				armed_at = packets;
				fprintf(stderr, "relay: +%.3f s armed: cut after %u more packets\n",
					rel_s(t0), cut_after);
			}
			if (armed && packets - armed_at >= cut_after) {
				cut = true;
				break;
			}
			if (poll(p, 2, 200) <= 0)
				continue;
			if ((p[0].revents && !relay_pump(cfd, server.fd, &up, &packets)) ||
			    (p[1].revents && !relay_pump(server.fd, cfd, &down, &packets)))
				break;
		}
		close(cfd);
		link_close(&server);
		fprintf(stderr, "relay: +%.3f s %s: %" PRIu64 " frames (%" PRIu64 " packets) client->"
			"server, %" PRIu64 " (%" PRIu64 ") server->client on this connection\n",
			rel_s(t0), cut ? "CUT both sides" : stop ? "stopping" : "a side hung up",
			up.frames, up.packets, down.frames, down.packets);
		if (cut) {
			cuts++;
			cut_at = now_ms();
			sleep_ms(down_ms);
		}
	}
	/* Leave the path alone if someone has put another socket there meanwhile. */
	if (!stat(listen_path, &st) && st.st_ino == mine)
		unlink(listen_path);
	fprintf(stderr, "relay: +%.3f s done, %u cut(s)\n", rel_s(t0), cuts);
	return 0;
}
