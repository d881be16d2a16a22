// SPDX-License-Identifier: GPL-2.0
/*
 * hostlimits: what the host itself can move, as the ceiling for tools/bench.
 *
 * Two QEMU processes joined by a pib link exchange every byte of guest data through one unix
 * stream socket (the link's chardev), and each side copies it between guest RAM and its socket
 * buffers.  So no transport built on that link can beat
 *
 *   unix-stream  bytes/s through a unix stream socket between two processes, writer and reader
 *                each moving SIZE bytes per system call, as two QEMUs would;
 *   memcpy       bytes/s of memcpy() between two SIZE-byte buffers in one process.
 *
 * Usage:  hostlimits unix-stream SIZE SECONDS
 *         hostlimits memcpy SIZE SECONDS
 *
 * Prints one line, "<test> size=<SIZE> bytes=<N> seconds=<T> MBps=<R>", where MB is 2^20
 * bytes, the unit perftest reports in, so the figures compare directly.  Exit status 0 on
 * success, 1 on a system error, 2 on bad usage.
 *
 * Build: gcc -O2 -Wall -o hostlimits tools/hostlimits.c (tools/bench does this into build/bench/).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024.0 * 1024.0)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void report(const char *test, size_t size, uint64_t bytes, double seconds)
{
	printf("%s size=%zu bytes=%llu seconds=%.3f MBps=%.1f\n", test, size,
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

/*
 * The writer (child) writes SIZE-byte chunks until the reader closes the socket; the reader
 * (parent) reads up to SIZE bytes per call, counts what arrives between its first byte and
 * the deadline, then closes its end.  Timing on the reader side counts only delivered bytes.
 */
static int run_unix_stream(size_t size, double seconds)
{
	unsigned char *buf = alloc_buf(size);
	uint64_t bytes = 0;
	double start, end;
	int sv[2], status;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("hostlimits: socketpair");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("hostlimits: fork");
		return 1;
	}
	if (pid == 0) {
		signal(SIGPIPE, SIG_IGN);
		close(sv[0]);
		for (;;) {
			size_t off = 0;

			while (off < size) {
				ssize_t n = write(sv[1], buf + off, size - off);

				if (n < 0 && errno == EINTR)
					continue;
				if (n <= 0)
					_exit(0);	/* the reader has finished */
				off += n;
			}
		}
	}
	close(sv[1]);

	/* The clock starts at the first byte, so process start-up is not counted. */
	if (read(sv[0], buf, size) <= 0) {
		perror("hostlimits: read");
		return 1;
	}
	start = now();
	end = start + seconds;
	for (;;) {
		ssize_t n = read(sv[0], buf, size);
		double t;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "hostlimits: the writer stopped early\n");
			return 1;
		}
		bytes += n;
		t = now();
		if (t >= end) {
			end = t;
			break;
		}
	}
	close(sv[0]);
	waitpid(pid, &status, 0);
	report("unix-stream", size, bytes, end - start);
	free(buf);
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
	free(src);
	free(dst);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: hostlimits unix-stream|memcpy SIZE SECONDS\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned long long size;
	double seconds;
	char *end;

	if (argc != 4)
		usage();
	size = strtoull(argv[2], &end, 0);
	if (*end || size == 0 || size > (1ULL << 30))
		usage();
	seconds = strtod(argv[3], &end);
	if (*end || !(seconds > 0 && seconds <= 600))
		usage();
	if (!strcmp(argv[1], "unix-stream"))
		return run_unix_stream(size, seconds);
	if (!strcmp(argv[1], "memcpy"))
		return run_memcpy(size, seconds);
	usage();
	return 2;
}
