// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-mpi-test: an MPI job that checks its data, for the full Debian guests (tools/pibvm up
 * --image debian), started like any cluster job:
 *
 *     mpirun --host node0,node1 -np 2 pib-mpi-test [ITERATIONS]
 *
 * Two ranks (more are refused: the ping-pong is between 0 and 1, the allreduce takes them all):
 *   pingpong   rank 0 sends a message, rank 1 checks every byte and sends it back, rank 0
 *              checks it again; for each size from 1 B to 4 MiB.  The pattern depends on the
 *              size, the iteration and the direction, so a stale or misplaced buffer fails.
 *   allreduce  MPI_SUM over 1 Mi doubles whose every element each rank knows the sum of.
 *   latency    half the round trip at 8 B, and bandwidth at 1 MiB (both ways of the round
 *              trips counted; MB = 2^20 bytes, as perftest counts), printed as
 *              "FIGURE name value unit" for tools/bench and the e2e test.
 * One line per check, "PASS  what: ..." or "FAIL  what: ...", as the other guest tests print
 * them; exit 1 if any check failed.  Built in the image by images/debian/build.sh (mpicc).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZE (4u << 20)
#define RED_COUNT (1u << 20)

static int rank, failures;

static void check(int ok, const char *what, const char *fmt, long a, long b)
{
	char msg[160];

	snprintf(msg, sizeof(msg), fmt, a, b);
	printf("%-5s %s: %s\n", ok ? "PASS" : "FAIL", what, msg);
	fflush(stdout);
	failures += !ok;
}

/* Byte i of the message of this size, iteration and direction (0: to rank 1, 1: back). */
static uint8_t pattern(size_t i, size_t size, int iter, int dir)
{
	return (uint8_t)(i * 131 + size * 7 + iter * 17 + dir * 101 + (i >> 8));
}

static void fill(uint8_t *b, size_t size, int iter, int dir)
{
	for (size_t i = 0; i < size; i++)
		b[i] = pattern(i, size, iter, dir);
}

/* The first byte that is not the pattern, or -1. */
static long mismatch(const uint8_t *b, size_t size, int iter, int dir)
{
	for (size_t i = 0; i < size; i++)
		if (b[i] != pattern(i, size, iter, dir))
			return (long)i;
	return -1;
}

/* Round trips of SIZE bytes, ITERS times, the data checked at both ends. */
static double pingpong(uint8_t *buf, size_t size, int iters, int verify)
{
	long bad0 = -1, bad1 = -1;
	double t0 = MPI_Wtime();

	for (int it = 0; it < iters; it++) {
		if (rank == 0) {
			if (verify)
				fill(buf, size, it, 0);
			MPI_Send(buf, (int)size, MPI_BYTE, 1, it, MPI_COMM_WORLD);
			MPI_Recv(buf, (int)size, MPI_BYTE, 1, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			if (verify && bad0 < 0)
				bad0 = mismatch(buf, size, it, 1);
		} else {
			MPI_Recv(buf, (int)size, MPI_BYTE, 0, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			if (verify && bad1 < 0)
				bad1 = mismatch(buf, size, it, 0);
			if (verify)
				fill(buf, size, it, 1);
			MPI_Send(buf, (int)size, MPI_BYTE, 0, it, MPI_COMM_WORLD);
		}
	}
	double t = MPI_Wtime() - t0;

	if (verify) {
		/* Rank 1's verdict travels to rank 0, which reports both. */
		MPI_Bcast(&bad1, 1, MPI_LONG, 1, MPI_COMM_WORLD);
		if (rank == 0) {
			char what[64];

			snprintf(what, sizeof(what), "pingpong %zu B", size);
			check(bad1 < 0 && bad0 < 0, what,
			      "every byte right both ways (first bad byte: to rank 1 %ld, back %ld)",
			      bad1, bad0);
		}
	}
	return t;
}

int main(int argc, char **argv)
{
	int size, iters = argc > 1 ? atoi(argv[1]) : 20;
	uint8_t *buf;
	double *in, *out;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2 || iters < 1) {
		if (rank == 0)
			fprintf(stderr, "usage: mpirun -np 2 pib-mpi-test [ITERATIONS >= 1]\n");
		MPI_Finalize();
		return 2;
	}
	buf = malloc(MAX_SIZE);
	in = malloc(RED_COUNT * sizeof(*in));
	out = malloc(RED_COUNT * sizeof(*out));
	if (!buf || !in || !out) {
		fprintf(stderr, "out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}

	for (size_t s = 1; s <= MAX_SIZE; s *= 4)
		pingpong(buf, s, s >= (1u << 20) ? 3 : 10, 1);

	/* Element i of rank r is r * 1000 + i: the sum over the two ranks is 1000 + 2i. */
	for (size_t i = 0; i < RED_COUNT; i++)
		in[i] = rank * 1000.0 + (double)i;
	MPI_Allreduce(in, out, RED_COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	long bad = -1;
	for (size_t i = 0; i < RED_COUNT && bad < 0; i++)
		if (out[i] != 1000.0 + 2.0 * (double)i)
			bad = (long)i;
	long bad_other = bad;
	MPI_Bcast(&bad_other, 1, MPI_LONG, 1, MPI_COMM_WORLD);
	if (rank == 0)
		check(bad < 0 && bad_other < 0, "allreduce",
		      "MPI_SUM of 1 Mi doubles right on both ranks (first bad element: rank 0 %ld, rank 1 %ld)",
		      bad, bad_other);

	/* Figures: warm up, then time. */
	pingpong(buf, 8, 10, 0);
	double lat = pingpong(buf, 8, iters * 10, 0) / (iters * 10) / 2 * 1e6;
	pingpong(buf, 1u << 20, 2, 0);
	double t = pingpong(buf, 1u << 20, iters, 0);
	double bw = 2.0 * iters / t;		/* MiB moved per second: MB/s, MB = 2^20 */
	if (rank == 0) {
		printf("FIGURE mpi_latency_8B %.2f us\n", lat);
		printf("FIGURE mpi_bandwidth_1MiB %.1f MB/s\n", bw);
	}

	int all;
	MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("pib-mpi-test: %s\n", all ? "FAILED" : "all checks passed");
	free(buf);
	free(in);
	free(out);
	MPI_Finalize();
	return all ? 1 : 0;
}
