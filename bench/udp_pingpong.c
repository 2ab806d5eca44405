/* Baseline: UDP ping-pong latency on 127.0.0.1 between two processes, both
 * busy-polling with non-blocking recv (the floor for softrnic's UDP path).
 * -a: each message leaves with an acknowledgment of the one before it, as
 * on a reliable connection (RoCE RC: a SEND is complete only once its ACK
 * is back, and perftest's latency tests wait for that before the next
 * one): two SIZE-byte datagrams in one UDP_SEGMENT (GSO) send, received
 * with UDP_GRO as one buffer.  That is the least an RC transport on UDP
 * sockets sends per message, so the floor for softrnic's RC latency.
 * -m: each receive also asks for the sender's address and the GRO segment
 * size (recvmsg with a name and a control buffer), as a RoCE receiver
 * must: the ICRC covers the source address and port, and a GRO buffer is
 * split into packets at the segment size.
 * Usage: udp_pingpong [-s SIZE] [-n ITERS] [-b (blocking recv)] [-a] [-m]
 * Prints the median and average one-way latency (half round trip) in us. */
#include <arpa/inet.h>
#include "bench_util.h"
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
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

static int with_meta; /* -m */

/* -m's receive: the sender's address and room for the GRO segment size
 * (a cmsg), as a RoCE receiver asks for them. */
static ssize_t recv_meta(int fd, char *buf, size_t want, int flags)
{
	struct sockaddr_storage from;
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { buf, want };
	struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from),
			     .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b) };
	return recvmsg(fd, &mh, flags);
}

/* Receive one message (want bytes: one datagram, or with -a the two of a
 * GSO send, which GRO hands over as one buffer); busy-polls unless
 * blocking, gives up after 5 s. */
static int recv_one(int fd, char *buf, size_t want, int blocking)
{
	double end = now_us() + 5e6;
	size_t got = 0;
	for (;;) {
		int flags = blocking ? 0 : MSG_DONTWAIT;
		ssize_t n = with_meta ? recv_meta(fd, buf, want, flags) : recv(fd, buf, want, flags);
		if (n > 0 && (got += (size_t)n) >= want)
			return 0;
		if ((n < 0 && errno != EAGAIN) || now_us() > end)
			return -1;
	}
}

/* Send one message: a datagram, or with -a (seg > 0) two seg-byte
 * datagrams in one GSO send. */
static void send_msg(int fd, char *buf, size_t len, int seg, const struct sockaddr_in *to)
{
	union {
		char b[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_name = (void *)to, .msg_namelen = sizeof(*to),
			     .msg_iov = &iov, .msg_iovlen = 1 };
	if (seg) {
		uint16_t g = (uint16_t)seg;
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.b;
		mh.msg_controllen = sizeof(ctl.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof(g));
		memcpy(CMSG_DATA(c), &g, sizeof(g));
	}
	sendmsg(fd, &mh, 0);
}

int main(int argc, char **argv)
{
	int size = 2, iters = 10000, blocking = 0, acked = 0, opt, one = 1;
	while ((opt = getopt(argc, argv, "s:n:bam")) != -1) {
		if (opt == 's') size = atoi(optarg);
		else if (opt == 'n') iters = atoi(optarg);
		else if (opt == 'b') blocking = 1;
		else if (opt == 'a') acked = 1;
		else if (opt == 'm') with_meta = 1;
		else return 2;
	}
	if (size < 1 || size > 1400) {
		fprintf(stderr, "udp_pingpong: -s 1..1400\n");
		return 2;
	}
	struct sockaddr_in a, b;
	int fa = bench_udp_loopback(&a, "udp_pingpong");
	int fb = bench_udp_loopback(&b, "udp_pingpong");
	/* -a: a message and its companion ACK, one GSO send */
	size_t len = acked ? 2 * (size_t)size : (size_t)size;
	int seg = acked ? size : 0;
	if (acked && (setsockopt(fa, SOL_UDP, UDP_GRO, &one, sizeof(one)) ||
		      setsockopt(fb, SOL_UDP, UDP_GRO, &one, sizeof(one)))) {
		fprintf(stderr, "udp_pingpong: UDP_GRO not supported: %s\n", strerror(errno));
		return 3;
	}
	char *buf = calloc(1, len > 64 ? len : 64);
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; i < iters; i++) {
			if (recv_one(fb, buf, len, blocking))
				_exit(1);
			send_msg(fb, buf, len, seg, &a);
		}
		_exit(0);
	}
	double *rtt = calloc(iters, sizeof(double)), sum = 0;
	for (int i = 0; i < iters; i++) {
		double t0 = now_us();
		send_msg(fa, buf, len, seg, &b);
		if (recv_one(fa, buf, len, blocking)) {
			fprintf(stderr, "udp_pingpong: lost a datagram\n");
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return 1;
		}
		rtt[i] = (now_us() - t0) / 2;
		sum += rtt[i];
	}
	waitpid(pid, NULL, 0);
	printf("udp_pingpong size %d%s%s iters %d: median %.2f us, average %.2f us (one way)\n",
	       size, acked ? " x2 (message + ACK, GSO/GRO)" : "",
	       with_meta ? " + sender address and segment size" : "", iters,
	       bench_median(rtt, iters), sum / iters);
	return 0;
}
