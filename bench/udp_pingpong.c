/* Baseline: UDP ping-pong latency on 127.0.0.1 between two processes, both
 * busy-polling with non-blocking recv (the floor for softrnic's UDP path).
 * Usage: udp_pingpong [-s SIZE] [-n ITERS] [-b (blocking recv)]
 * Prints the median and average one-way latency (half round trip) in us. */
#include <arpa/inet.h>
#include "bench_util.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	return bench_now_s() * 1e6;
}

/* Receive one datagram; busy-polls unless blocking, gives up after 5 s. */
static int recv_one(int fd, char *buf, size_t len, int blocking)
{
	double end = now_us() + 5e6;
	for (;;) {
		ssize_t n = recv(fd, buf, len, blocking ? 0 : MSG_DONTWAIT);
		if (n >= 0)
			return 0;
		if (errno != EAGAIN || now_us() > end)
			return -1;
	}
}

int main(int argc, char **argv)
{
	int size = 2, iters = 10000, blocking = 0, opt;
	while ((opt = getopt(argc, argv, "s:n:b")) != -1) {
		if (opt == 's') size = atoi(optarg);
		else if (opt == 'n') iters = atoi(optarg);
		else if (opt == 'b') blocking = 1;
		else return 2;
	}
	struct sockaddr_in a, b;
	int fa = bench_udp_loopback(&a, "udp_pingpong");
	int fb = bench_udp_loopback(&b, "udp_pingpong");
	char *buf = calloc(1, size > 64 ? size : 64);
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; i < iters; i++) {
			if (recv_one(fb, buf, size, blocking))
				_exit(1);
			sendto(fb, buf, size, 0, (struct sockaddr *)&a, sizeof(a));
		}
		_exit(0);
	}
	double *rtt = calloc(iters, sizeof(double)), sum = 0;
	for (int i = 0; i < iters; i++) {
		double t0 = now_us();
		sendto(fa, buf, size, 0, (struct sockaddr *)&b, sizeof(b));
		if (recv_one(fa, buf, size, blocking)) {
			fprintf(stderr, "udp_pingpong: lost a datagram\n");
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return 1;
		}
		rtt[i] = (now_us() - t0) / 2;
		sum += rtt[i];
	}
	waitpid(pid, NULL, 0);
	printf("udp_pingpong size %d iters %d: median %.2f us, average %.2f us (one way)\n",
	       size, iters, bench_median(rtt, iters), sum / iters);
	return 0;
}
