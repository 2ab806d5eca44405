/* Baseline: ping-pong latency between two processes through one shared
 * page, both busy-polling a cache line each: the floor for a same-host
 * message.  Each message carries SIZE payload bytes (default 2) written
 * before the sequence number that publishes it.
 * Usage: shm_pingpong [-s SIZE (<= 64)] [-n ITERS (default 200000)]
 * Prints the median and average one-way latency (half round trip) in us. */
#include "bench_util.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* One direction per cache line, so the two writers never share a line. */
struct line {
	uint64_t seq;
	char payload[56];
} __attribute__((aligned(64)));

/* Spins until *seq == want; gives up after about 5 s (peer died). */
static int wait_seq(struct line *l, uint64_t want, double *deadline)
{
	unsigned spins = 0;

	while (__atomic_load_n(&l->seq, __ATOMIC_ACQUIRE) != want) {
		if (++spins == 1u << 20) {
			spins = 0;
			if (bench_now_s() > *deadline)
				return -1;
		}
	}
	return 0;
}

static void send_msg(struct line *l, uint64_t seq, const char *buf, int size)
{
	memcpy(l->payload, buf, (size_t)size);
	/* Release pairs with the peer's acquire load in wait_seq. */
	__atomic_store_n(&l->seq, seq, __ATOMIC_RELEASE);
}

int main(int argc, char **argv)
{
	int size = 2, iters = 200000, opt;
	char buf[56] = "hi";

	while ((opt = getopt(argc, argv, "s:n:")) != -1) {
		if (opt == 's')
			size = atoi(optarg);
		else if (opt == 'n')
			iters = atoi(optarg);
		else
			return 2;
	}
	if (size < 0 || size > 56 || iters < 1) {
		fprintf(stderr, "shm_pingpong: size 0..56, iters >= 1\n");
		return 2;
	}
	struct line *ping = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ping == MAP_FAILED) {
		perror("shm_pingpong: mmap");
		return 1;
	}
	struct line *pong = ping + 1;
	double deadline = bench_now_s() + 30;
	pid_t pid = fork();
	if (pid < 0) {
		perror("shm_pingpong: fork");
		return 1;
	}
	if (pid == 0) {
		char in[56];
		for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
			if (wait_seq(ping, i, &deadline))
				_exit(1);
			memcpy(in, ping->payload, (size_t)size);
			send_msg(pong, i, in, size);
		}
		_exit(0);
	}
	double *rtt = calloc((size_t)iters, sizeof(double)), sum = 0;
	if (!rtt)
		return 1;
	for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
		double t0 = bench_now_s();
		send_msg(ping, i, buf, size);
		if (wait_seq(pong, i, &deadline)) {
			fprintf(stderr, "shm_pingpong: peer stopped answering\n");
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return 1;
		}
		rtt[i - 1] = (bench_now_s() - t0) * 1e6 / 2;
		sum += rtt[i - 1];
	}
	waitpid(pid, NULL, 0);
	printf("shm_pingpong size %d iters %d: median %.3f us, average %.3f us (one way)\n",
	       size, iters, bench_median(rtt, iters), sum / iters);
	free(rtt);
	return 0;
}
