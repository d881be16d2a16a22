// SPDX-License-Identifier: GPL-2.0
/*
 * hostlimits: what the host itself can move, as the ceiling for tools/bench.
 *
 * Two QEMU processes joined by a pib link exchange every byte of guest data through one unix
 * stream socket (the link's chardev), and each side copies it between guest RAM and its socket
 * buffers.  So no transport built on that link can beat
 *
 *   link    payload bytes/s through a unix stream socket between two processes that use it as
 *           the pib link does (qemu-hw/fabric/pib-link.c, pib-link-tx.c):
 *             - the send buffer the device asks for (property link-sndbuf, default 1 MiB,
 *               PIB_LINK_SNDBUF): SO_SNDBUFFORCE, else SO_SNDBUF, on both ends; 0 leaves
 *               Linux's default;
 *             - non-blocking writev of up to PIB_LINK_TX_IOV (64) frames, each its own buffer
 *               of FRAME bytes (a 4-byte link header and one IB packet), and a poll for
 *               POLLOUT when the socket is full, as QEMU's G_IO_OUT watch;
 *             - reads of up to PIB_LINK_RX_BATCH (256 KiB);
 *             - one thread per process polling its one socket, as QEMU's main loop;
 *             - --both: each process writes and reads the same socket at once (the link is one
 *               socket carrying both directions), and the figure is the sum of the two.
 *           Only the PAYLOAD bytes of each frame are counted (the message bytes perftest
 *           counts), so the figure bounds perftest's directly;
 *   memcpy  bytes/s of memcpy() between two SIZE-byte buffers in one process.
 *
 * Usage:  hostlimits link PAYLOAD FRAME SECONDS [SNDBUF] [--both]
 *         hostlimits memcpy SIZE SECONDS
 *
 * Prints one line, "<test> size=<PAYLOAD|SIZE> bytes=<N> seconds=<T> MBps=<R>", where MB is
 * 2^20 bytes, the unit perftest reports in, so the figures compare directly; the link test adds
 * "frame=<FRAME> sndbuf_asked=<A> sndbuf_got=<G> both=<0|1>" (G is what getsockopt reports:
 * Linux doubles what it grants).  Exit status 0 on success, 1 on a system error, 2 on bad usage.
 *
 * Build: gcc -O2 -Wall -o hostlimits tools/hostlimits.c (tools/bench does this into its scratch
 * directory).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024.0 * 1024.0)

/* The link's own figures (qemu-hw/fabric/pib-link.h, include/pib_link.h). */
#define LINK_TX_IOV     64              /* PIB_LINK_TX_IOV: frames per writev */
#define LINK_RX_BATCH   (256 * 1024)    /* PIB_LINK_RX_BATCH: bytes per read */
#define LINK_HDR_LEN    4               /* PIB_LINK_HDR_LEN */
#define LINK_MAX_FRAME  (LINK_HDR_LEN + 4096 + 256)     /* + PIB_LINK_MAX_PAYLOAD */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void report(const char *test, size_t size, uint64_t bytes, double seconds)
{
	printf("%s size=%zu bytes=%llu seconds=%.3f MBps=%.1f", test, size,
	       (unsigned long long)bytes, seconds, bytes / seconds / MIB);
}

/* Fill BUF so that the pages are really allocated and the data is not all zeroes. */
static void *alloc_buf(size_t size)
{
	unsigned char *buf = malloc(size);
	size_t i;

	if (!buf) {
		perror("hostlimits: malloc");
		exit(1);
	}
	for (i = 0; i < size; i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	return buf;
}

/* As pib_link_set_sndbuf(): SO_SNDBUFFORCE passes over net.core.wmem_max (root only). */
static int set_sndbuf(int fd, int asked)
{
	socklen_t len = sizeof(int);
	int got = -1;

	if (asked && setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &asked, sizeof(asked)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &asked, sizeof(asked));
	getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &got, &len);
	return got;
}

/*
 * One end of the link: a single-threaded loop on one non-blocking socket, as a QEMU main loop.
 * SEND: write frames without end (writev of LINK_TX_IOV frame buffers, resuming a frame taken
 * in part, as pib_link_tx_writev()).  RECV: count the payload share of the bytes read between
 * the first byte and SECONDS later.  After that window the loop goes on serving the socket, so
 * that the peer's window is measured under the same load, until the peer closes it, or, if
 * DONE_FD >= 0, until that descriptor (the peer's result) is readable; with STOP set it leaves
 * at once.  RESULT_FD >= 0 gets "<bytes> <seconds>\n" when the window ends.
 */
struct link_end {
	int fd, send, recv, stop, result_fd, done_fd;
	size_t payload, frame;
	double seconds;
	uint64_t bytes;		/* out: payload bytes received in the window */
	double measured;	/* out: the window's length, 0 if it never started */
};

static void link_loop(struct link_end *e)
{
	static unsigned char rbuf[LINK_RX_BATCH];
	unsigned char *frames[LINK_TX_IOV];
	struct iovec iov[LINK_TX_IOV];
	uint64_t frame_bytes = 0;
	size_t head_off = 0;	/* bytes of frame 0 of the current batch already written */
	double start = 0, end = 0;
	int i, counting = e->recv;

	for (i = 0; i < LINK_TX_IOV; i++)
		frames[i] = alloc_buf(e->frame);
	e->bytes = 0;
	e->measured = 0;
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = e->fd, .events = (e->recv ? POLLIN : 0) | (e->send ? POLLOUT : 0) },
			{ .fd = e->done_fd, .events = POLLIN },
		};

		/* The peer's result is only waited for once ours is in. */
		if (poll(p, e->done_fd >= 0 && !counting ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("hostlimits: poll");
			exit(1);
		}
		if (p[0].revents & (POLLHUP | POLLERR) && !(p[0].revents & POLLIN))
			break;		/* the peer has finished */
		if (p[1].revents)
			break;
		if (p[0].revents & POLLOUT) {
			/* The queue never empties: at full bandwidth the link's queue is full. */
			for (;;) {
				ssize_t n;

				for (i = 0; i < LINK_TX_IOV; i++) {
					iov[i].iov_base = frames[i] + (i ? 0 : head_off);
					iov[i].iov_len = e->frame - (i ? 0 : head_off);
				}
				n = writev(e->fd, iov, LINK_TX_IOV);
				if (n < 0 && errno == EINTR)
					continue;
				if (n < 0 && errno == EAGAIN)
					break;	/* full: wait for POLLOUT, as QEMU for G_IO_OUT */
				if (n <= 0)
					return;	/* the peer has finished */
				/* Frames written whole leave the queue; the next writev starts where
				 * this one stopped, inside a frame or at its end. */
				head_off = (head_off + n) % e->frame;
			}
		}
		if (p[0].revents & POLLIN) {
			/* One batch per pass (PIB_LINK_RX_PASS is one batch), as pib_link_rx_direct(). */
			ssize_t n = read(e->fd, rbuf, sizeof(rbuf));
			double t;

			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0)
				break;	/* the peer has finished */
			if (!counting)
				continue;
			/* The clock starts at the first byte, so process start-up is not counted. */
			t = now();
			if (!start) {
				start = t;
				end = t + e->seconds;
				continue;
			}
			frame_bytes += n;
			if (t < end)
				continue;
			counting = 0;
			e->bytes = frame_bytes * e->payload / e->frame;
			e->measured = t - start;
			if (e->result_fd >= 0) {
				char msg[64];
				int len = snprintf(msg, sizeof(msg), "%llu %.6f\n",
						   (unsigned long long)e->bytes, e->measured);

				if (write(e->result_fd, msg, len) != len) {
					perror("hostlimits: result");
					exit(1);
				}
			}
			if (e->stop)
				break;
		}
	}
}

/*
 * Parent and child, one socketpair.  One way: the child writes, the parent reads and measures.
 * Both ways (--both): each writes and reads; each measures what it receives over its own window
 * of SECONDS, and the parent adds the two rates.  The parent leaves once it has its own window
 * and the child's result, and the child serves the socket until the parent closes it: both
 * directions stay loaded until both are measured.
 */
static int run_link(size_t payload, size_t frame, double seconds, int sndbuf, int both)
{
	struct link_end e = { .payload = payload, .frame = frame, .seconds = seconds };
	unsigned long long child_bytes = 0;
	int sv[2], res[2], status, got[2];
	double child_secs = 0, mbps;
	char line[64];
	ssize_t n;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 || pipe(res) < 0) {
		perror("hostlimits: socketpair");
		return 1;
	}
	got[0] = set_sndbuf(sv[0], sndbuf);
	got[1] = set_sndbuf(sv[1], sndbuf);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	signal(SIGPIPE, SIG_IGN);
	pid = fork();
	if (pid < 0) {
		perror("hostlimits: fork");
		return 1;
	}
	if (pid == 0) {
		close(sv[0]);
		close(res[0]);
		e.fd = sv[1];
		e.send = 1;
		e.recv = both;
		e.result_fd = res[1];
		e.done_fd = -1;
		link_loop(&e);
		_exit(0);
	}
	close(sv[1]);
	close(res[1]);
	e.fd = sv[0];
	e.send = both;
	e.recv = 1;
	e.stop = !both;
	e.result_fd = -1;
	e.done_fd = both ? res[0] : -1;
	link_loop(&e);
	if (both) {
		n = read(res[0], line, sizeof(line) - 1);
		if (n > 0)
			line[n] = 0;
		if (n <= 0 || sscanf(line, "%llu %lf", &child_bytes, &child_secs) != 2 ||
		    child_secs <= 0) {
			fprintf(stderr, "hostlimits: no result from the other end\n");
			return 1;
		}
	}
	close(sv[0]);
	waitpid(pid, &status, 0);
	if (!e.measured) {
		fprintf(stderr, "hostlimits: the writer stopped early\n");
		return 1;
	}
	/* Both ways: the sum of the two directions' rates, as perftest -b reports. */
	mbps = e.bytes / e.measured + (both ? child_bytes / child_secs : 0);
	report("link", payload, (uint64_t)(mbps * e.measured), e.measured);
	printf(" frame=%zu sndbuf_asked=%d sndbuf_got=%d both=%d\n", frame, sndbuf,
	       got[0] < got[1] ? got[0] : got[1], both);
	return 0;
}

static int run_memcpy(size_t size, double seconds)
{
	unsigned char *src = alloc_buf(size), *dst = alloc_buf(size);
	uint64_t bytes = 0;
	double start = now(), end = start + seconds, t;
	volatile unsigned char sink;

	do {
		memcpy(dst, src, size);
		src[bytes % size]++;	/* keep each copy from being optimised away */
		bytes += size;
		t = now();
	} while (t < end);
	sink = dst[size / 2];
	(void)sink;
	report("memcpy", size, bytes, t - start);
	printf("\n");
	free(src);
	free(dst);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: hostlimits link PAYLOAD FRAME SECONDS [SNDBUF] [--both]\n"
			"       hostlimits memcpy SIZE SECONDS\n");
	exit(2);
}

static unsigned long long arg_size(const char *s, unsigned long long min,
				   unsigned long long max)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	if (*end || v < min || v > max)
		usage();
	return v;
}

static double arg_seconds(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (*end || !(v > 0 && v <= 600))
		usage();
	return v;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && argc <= 7 && !strcmp(argv[1], "link")) {
		int both = !strcmp(argv[argc - 1], "--both");
		int nargs = argc - both;
		size_t frame = arg_size(argv[3], LINK_HDR_LEN + 1, LINK_MAX_FRAME);
		size_t payload = arg_size(argv[2], 1, frame - LINK_HDR_LEN);
		int sndbuf = nargs == 6 ? (int)arg_size(argv[5], 0, INT_MAX / 2) : 0;

		if (nargs < 5 || nargs > 6)
			usage();
		return run_link(payload, frame, arg_seconds(argv[4]), sndbuf, both);
	}
	if (argc == 4 && !strcmp(argv[1], "memcpy"))
		return run_memcpy(arg_size(argv[2], 1, 1ULL << 30), arg_seconds(argv[3]));
	usage();
	return 2;
}
