/* Baseline: UDP goodput on 127.0.0.1 from a sender batching with GSO
 * (UDP_SEGMENT: one send carries up to 64 KiB cut into SEG-byte datagrams)
 * to a receiver with GRO (UDP_GRO) reading with recvmmsg: the ceiling for
 * softrnic's UDP path.  No pacing: what the receiver misses counts as loss.
 * With -w the sender keeps at most WINDOW bytes in flight, counted by the
 * receiver in a shared page (receiver-driven pacing, as the issue asks of
 * softrnic: an unpaced sender overruns the receive queue and the goodput
 * halves); -w 0 sends unpaced.
 * With -c each datagram also carries a CRC-32 of the rest in its last 4
 * bytes, computed by the sender and checked by the receiver (ISA-L, as
 * softrnic's ICRC): the least work RoCEv2 adds to every packet on both
 * ends, so the ceiling an ICRC-carrying protocol can reach here.
 * Usage: udp_gso_bw [-g SEG (default 4112: a 4096-byte RoCE payload with
 *        BTH and ICRC)] [-b BATCH bytes (default 64K, capped to whole
 *        segments)] [-t SECONDS (default 1)] [-w WINDOW (default 4M)] [-c]
 * Prints goodput (bytes received / receive time) in GB/s, and loss. */
#include "bench_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <isa-l/crc.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define RX_VLEN 8
#define RX_BUF 65536
#define MAX_UDP 65507

struct rx_result {
	unsigned long long bytes;	/* payload bytes received */
	unsigned long long reads;	/* buffers returned by recvmmsg */
	unsigned long long bad_crc;	/* datagrams whose CRC did not match (-c) */
	double secs;			/* first to last receive */
	int rcvbuf;			/* socket buffer the kernel granted */
};

/* Bytes received so far, shared with the sender for pacing. */
static unsigned long long *rx_progress;

/* -c: the datagram size and whether its last 4 bytes carry a CRC */
static int seg_len = 4112;
static int with_crc;

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Checks every datagram of a (GRO-coalesced) buffer; returns the bad ones. */
static unsigned check_crcs(const unsigned char *b, size_t len)
{
	unsigned bad = 0;

	for (size_t off = 0; off < len; off += (size_t)seg_len) {
		size_t n = len - off < (size_t)seg_len ? len - off : (size_t)seg_len;

		if (n < 4 || crc32_gzip_refl(0, b + off, n - 4) != le32(b + off + n - 4))
			bad++;
	}
	return bad;
}

/* Fills the CRC of every datagram of a batch (the payload is left as is). */
static void fill_crcs(unsigned char *b, size_t len)
{
	for (size_t off = 0; off + (size_t)seg_len <= len; off += (size_t)seg_len) {
		uint32_t c = crc32_gzip_refl(0, b + off, (size_t)seg_len - 4);
		unsigned char *t = b + off + seg_len - 4;

		t[0] = (unsigned char)c;
		t[1] = (unsigned char)(c >> 8);
		t[2] = (unsigned char)(c >> 16);
		t[3] = (unsigned char)(c >> 24);
	}
}

/* Receives until 300 ms pass without data (or 60 s in all). */
static struct rx_result receive(int fd)
{
	static char bufs[RX_VLEN][RX_BUF];
	struct iovec iov[RX_VLEN];
	struct mmsghdr msgs[RX_VLEN];
	struct rx_result r = { 0, 0, 0, 0, 0 };
	struct timeval tv = { 0, 300000 };
	double first = 0, last = 0, end = bench_now_s() + 60;
	socklen_t l = sizeof(r.rcvbuf);

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &r.rcvbuf, &l);
	for (;;) {
		memset(msgs, 0, sizeof(msgs));
		for (int i = 0; i < RX_VLEN; i++) {
			iov[i].iov_base = bufs[i];
			iov[i].iov_len = RX_BUF;
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
		}
		int n = recvmmsg(fd, msgs, RX_VLEN, MSG_WAITFORONE, NULL);
		double t = bench_now_s();
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			/* Timeout: the sender stopped (or never started). */
			if (r.bytes || t > end)
				break;
			continue;
		}
		if (!r.bytes)
			first = t;
		for (int i = 0; i < n; i++) {
			r.bytes += msgs[i].msg_len;
			if (with_crc)
				r.bad_crc += check_crcs((unsigned char *)bufs[i], msgs[i].msg_len);
		}
		/* Release pairs with the sender's acquire load in wait_window. */
		__atomic_store_n(rx_progress, r.bytes, __ATOMIC_RELEASE);
		r.reads += (unsigned)n;
		last = t;
		if (t > end)
			break;
	}
	r.secs = last - first;
	return r;
}

/* Spins while more than WINDOW bytes are in flight.  Datagrams lost on
 * the way never get counted, so after 10 ms without progress the missing
 * bytes are written off (*lost) and sending resumes. */
static void wait_window(unsigned long long sent, unsigned long long window,
			unsigned long long *lost, unsigned long long *stalls)
{
	double stuck = 0;

	for (;;) {
		unsigned long long got = __atomic_load_n(rx_progress, __ATOMIC_ACQUIRE);
		if (sent - *lost - got <= window)
			return;
		double t = bench_now_s();
		if (stuck == 0)
			stuck = t;
		else if (t - stuck > 0.01) {
			*lost = sent - got;
			(*stalls)++;
			return;
		}
	}
}

int main(int argc, char **argv)
{
	int seg = 4112, batch = 65536, opt, one = 1, p[2];
	double secs = 1;
	unsigned long long window = 4 << 20;

	while ((opt = getopt(argc, argv, "g:b:t:w:c")) != -1) {
		if (opt == 'g')
			seg = atoi(optarg);
		else if (opt == 'b')
			batch = (int)bench_parse_size(optarg);
		else if (opt == 't')
			secs = atof(optarg);
		else if (opt == 'w')
			window = bench_parse_size(optarg);
		else if (opt == 'c')
			with_crc = 1;
		else
			return 2;
	}
	if (seg < 64 || seg > 9000 || secs <= 0) {
		fprintf(stderr, "udp_gso_bw: -g 64..9000, -t > 0\n");
		return 2;
	}
	seg_len = seg;
	if (batch > MAX_UDP)
		batch = MAX_UDP;
	batch -= batch % seg;	/* whole segments only */
	if (batch / seg > 64)	/* the kernel's UDP_MAX_SEGMENTS */
		batch = 64 * seg;
	if (batch < seg)
		batch = seg;

	struct sockaddr_in ra, sa;
	int rfd = bench_udp_loopback(&ra, "udp_gso_bw");
	int sfd = bench_udp_loopback(&sa, "udp_gso_bw");
	int big = 16 << 20;
	/* FORCE works as root past net.core.rmem_max; plain is the fallback. */
	if (setsockopt(rfd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)))
		setsockopt(rfd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (setsockopt(sfd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)))
		setsockopt(sfd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	if (setsockopt(rfd, SOL_UDP, UDP_GRO, &one, sizeof(one)) ||
	    setsockopt(sfd, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg))) {
		fprintf(stderr, "udp_gso_bw: UDP_GRO/UDP_SEGMENT not supported: %s\n",
			strerror(errno));
		return 3;
	}
	if (connect(sfd, (struct sockaddr *)&ra, sizeof(ra)) || pipe(p)) {
		perror("udp_gso_bw: connect");
		return 1;
	}
	rx_progress = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (rx_progress == MAP_FAILED) {
		perror("udp_gso_bw: mmap");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("udp_gso_bw: fork");
		return 1;
	}
	if (pid == 0) {
		struct rx_result r = receive(rfd);
		_exit(write(p[1], &r, sizeof(r)) == sizeof(r) ? 0 : 1);
	}
	close(rfd);

	/* Real bytes, written once: a buffer never written (calloc) maps the
	 * kernel's shared zero page, and the sender's copy would then read
	 * one 4 KiB page over and over instead of 64 KiB of data.  (Measured
	 * here the same either way for this one-iovec send; split into
	 * iovecs per packet, the zero page gave 7.0 GB/s, data 6.2.) */
	char *buf = malloc((size_t)batch);

	if (!buf) {
		perror("udp_gso_bw: malloc");
		return 1;
	}
	for (int i = 0; i < batch; i++)
		buf[i] = (char)(i * 131 + 7);
	unsigned long long sent = 0, calls = 0, errs = 0, lost = 0, stalls = 0;
	double t0 = bench_now_s(), t = t0;
	do {
		if (window)
			wait_window(sent, window, &lost, &stalls);
		if (with_crc)
			fill_crcs((unsigned char *)buf, (size_t)batch);
		ssize_t n = send(sfd, buf, (size_t)batch, 0);
		if (n > 0)
			sent += (unsigned long long)n;
		else if (errno != ENOBUFS && errno != EAGAIN && errno != ECONNREFUSED &&
			 errno != EINTR) {
			perror("udp_gso_bw: send");
			break;
		} else
			errs++;
		calls++;
		t = bench_now_s();
	} while (t - t0 < secs);
	double send_secs = t - t0;

	struct rx_result r;
	int ok = read(p[0], &r, sizeof(r)) == sizeof(r);
	int status = 0;
	waitpid(pid, &status, 0);
	if (!ok || r.bytes == 0 || r.secs <= 0) {
		fprintf(stderr, "udp_gso_bw: receiver got nothing\n");
		return 1;
	}
	printf("udp_gso_bw seg %d batch %d rcvbuf %d window %llu: goodput %.2f GB/s, "
	       "sent %.2f GB/s, loss %.1f%% (%llu sends, %llu refused, %llu reads, %llu stalls)\n",
	       seg, batch, r.rcvbuf, window, (double)r.bytes / r.secs / 1e9,
	       (double)sent / send_secs / 1e9,
	       sent ? 100.0 * (double)(sent - (r.bytes < sent ? r.bytes : sent)) / (double)sent : 0,
	       calls, errs, r.reads, stalls);
	if (with_crc)
		printf("udp_gso_bw: CRC-32 per datagram on both ends (-c): %llu bad\n", r.bad_crc);
	free(buf);
	return with_crc && r.bad_crc ? 1 : 0;
}
