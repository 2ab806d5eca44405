/* Baseline: UDP ping-pong latency on 127.0.0.1 between two processes, both
 * busy-polling with non-blocking recv (the floor for softrnic's UDP path).
 * Usage: udp_pingpong [-s SIZE] [-n ITERS] [-b (blocking recv)]
 * Prints the median and average one-way latency (half round trip) in us. */
#include <arpa/inet.h>
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
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int bound_socket(struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	socklen_t l = sizeof(*sa);
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)sa, sizeof(*sa)) ||
	    getsockname(fd, (struct sockaddr *)sa, &l)) {
		perror("socket");
		exit(1);
	}
	return fd;
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
	int fa = bound_socket(&a), fb = bound_socket(&b);
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
	qsort(rtt, iters, sizeof(double), cmp);
	printf("udp_pingpong size %d iters %d: median %.2f us, average %.2f us (one way)\n",
	       size, iters, rtt[iters / 2], sum / iters);
	return 0;
}
