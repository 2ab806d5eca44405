/* An MPI job whose every result is checked: a ping-pong between ranks 0
 * and size-1 over message sizes (latency and bandwidth printed, every
 * byte of every reply compared), then an allreduce and an alltoall whose
 * outcomes each rank can compute on its own.  Exit status 0 only when all
 * ranks saw correct data.  Usage: mpi_check [ITERS] [MAX_BYTES] [fast].
 * "fast" (for benchmarks): each size's pattern is written once and only its
 * last exchange is compared, so the timing is the transport's rather than
 * the byte-by-byte fill and check. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank, g_size, g_errors, g_fast;

#define CHECK(cond, ...)                                                    \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "rank %d: ", g_rank);               \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			g_errors++;                                         \
		}                                                           \
	} while (0)

/* The byte at index i of message number seq, as its sender fills it. */
static uint8_t pattern(size_t i, int seq, int from)
{
	return (uint8_t)(i * 131 + (size_t)seq * 7 + (size_t)from * 29 + 1);
}

static void fill(uint8_t *buf, size_t n, int seq, int from)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = pattern(i, seq, from);
}

static size_t first_bad(const uint8_t *buf, size_t n, int seq, int from)
{
	for (size_t i = 0; i < n; i++)
		if (buf[i] != pattern(i, seq, from))
			return i;
	return n;
}

/* Rank 0 sends, the peer checks and answers with its own pattern, rank 0
 * checks that.  Times are taken on rank 0 only. */
static void pingpong(int peer, size_t bytes, int iters, uint8_t *sbuf, uint8_t *rbuf)
{
	double t0 = 0;

	if (g_fast)
		fill(sbuf, bytes, 0, g_rank);
	MPI_Barrier(MPI_COMM_WORLD);
	for (int it = -1; it < iters; it++) { /* it == -1: warm-up */
		int seq = g_fast ? 0 : it, check = !g_fast || it == iters - 1;

		if (it == 0)
			t0 = MPI_Wtime();
		if (g_rank == 0) {
			if (!g_fast)
				fill(sbuf, bytes, seq, 0);
			MPI_Send(sbuf, (int)bytes, MPI_BYTE, peer, it + 1, MPI_COMM_WORLD);
			MPI_Recv(rbuf, (int)bytes, MPI_BYTE, peer, it + 1, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			size_t bad = check ? first_bad(rbuf, bytes, seq, peer) : bytes;
			CHECK(bad == bytes, "pingpong %zu B iter %d: reply byte %zu wrong",
			      bytes, it, bad);
		} else if (g_rank == peer) {
			MPI_Recv(rbuf, (int)bytes, MPI_BYTE, 0, it + 1, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			size_t bad = check ? first_bad(rbuf, bytes, seq, 0) : bytes;
			CHECK(bad == bytes, "pingpong %zu B iter %d: byte %zu wrong", bytes, it,
			      bad);
			if (!g_fast)
				fill(sbuf, bytes, seq, peer);
			MPI_Send(sbuf, (int)bytes, MPI_BYTE, 0, it + 1, MPI_COMM_WORLD);
		}
	}
	if (g_rank == 0) {
		double dt = MPI_Wtime() - t0;
		double lat_us = dt / iters / 2 * 1e6;
		double mbps = bytes ? 2.0 * (double)bytes * iters / dt / 1e6 : 0;

		printf("pingpong %8zu B: %9.2f us one way, %9.1f MB/s\n", bytes, lat_us, mbps);
	}
}

static void allreduce_check(void)
{
	enum { N = 4096 };
	static int64_t in[N], out[N];

	for (int i = 0; i < N; i++)
		in[i] = (int64_t)g_rank * 1000003 + i;
	MPI_Allreduce(in, out, N, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
	int64_t ranks = (int64_t)g_size * (g_size - 1) / 2;
	for (int i = 0; i < N; i++) {
		int64_t want = ranks * 1000003 + (int64_t)g_size * i;
		if (out[i] != want) {
			CHECK(0, "allreduce[%d] = %lld, want %lld", i, (long long)out[i],
			      (long long)want);
			break;
		}
	}
	if (g_rank == 0)
		printf("allreduce of %d int64 over %d ranks: checked\n", N, g_size);
}

static void alltoall_check(void)
{
	enum { PER = 1024 };
	int32_t *in = malloc(sizeof(*in) * PER * (size_t)g_size);
	int32_t *out = malloc(sizeof(*out) * PER * (size_t)g_size);

	if (!in || !out) {
		CHECK(0, "out of memory");
		free(in);
		free(out);
		return;
	}
	/* Block d of rank r's input is meant for rank d. */
	for (int d = 0; d < g_size; d++)
		for (int i = 0; i < PER; i++)
			in[d * PER + i] = g_rank * 65536 + d * 1024 + i;
	MPI_Alltoall(in, PER, MPI_INT32_T, out, PER, MPI_INT32_T, MPI_COMM_WORLD);
	for (int s = 0; s < g_size; s++)
		for (int i = 0; i < PER; i++) {
			int32_t want = s * 65536 + g_rank * 1024 + i;
			if (out[s * PER + i] != want) {
				CHECK(0, "alltoall block %d [%d] = %d, want %d", s, i,
				      out[s * PER + i], want);
				s = g_size;
				break;
			}
		}
	if (g_rank == 0)
		printf("alltoall of %d int32 per pair over %d ranks: checked\n", PER, g_size);
	free(in);
	free(out);
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 200;
	size_t max = argc > 2 ? strtoul(argv[2], NULL, 0) : (size_t)4 << 20;

	g_fast = argc > 3 && !strcmp(argv[3], "fast");
	char name[MPI_MAX_PROCESSOR_NAME];
	int len, total;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &g_size);
	MPI_Get_processor_name(name, &len);
	printf("rank %d of %d on %s\n", g_rank, g_size, name);
	fflush(stdout);
	if (iters < 1 || g_size < 2) {
		if (g_rank == 0)
			fprintf(stderr, "need ITERS >= 1 and at least 2 ranks\n");
		MPI_Finalize();
		return 2;
	}

	uint8_t *sbuf = malloc(max ? max : 1), *rbuf = malloc(max ? max : 1);
	if (!sbuf || !rbuf)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (size_t bytes = 0; bytes <= max; bytes = bytes ? bytes * 4 : 1) {
		/* Large messages: fewer round trips, the same bytes checked. */
		int n = bytes >= 65536 ? (iters / 10 > 0 ? iters / 10 : 1) : iters;
		pingpong(g_size - 1, bytes, n, sbuf, rbuf);
	}
	allreduce_check();
	alltoall_check();
	free(sbuf);
	free(rbuf);

	MPI_Allreduce(&g_errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (g_rank == 0)
		printf("mpi_check: %s (%d errors over %d ranks)\n", total ? "FAILED" : "all checked",
		       total, g_size);
	MPI_Finalize();
	return total ? 1 : 0;
}
