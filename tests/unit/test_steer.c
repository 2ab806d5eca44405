/* net/steer_prog and net/steer: the port-4791 program sends each QPN to
 * the socket its span names, census probes to the index they carry, and
 * short datagrams to the kernel's hash; the kernel's SO_REUSEPORT group
 * behaves as steer.h assumes (sockets indexed in bind order, the last one
 * moving into a closed one's place); a census between the sockets of one
 * group finds every member's index. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/steer.h"
#include "net/steer_prog.h"

static int failures;
#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "FAIL %d: ", __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } } while (0)

/* A BTH-sized datagram for qpn (the program reads bytes 4-7). */
static void bth(uint8_t *b, uint32_t qpn)
{
	memset(b, 0, 12);
	b[0] = 0x04; /* RC SEND only */
	b[5] = (uint8_t)(qpn >> 16), b[6] = (uint8_t)(qpn >> 8), b[7] = (uint8_t)qpn;
}

static void prog_cases(void)
{
	static struct sock_filter prog[NET_STEER_PROG_LEN(NET_STEER_MAX_SPANS)];
	static struct net_steer_span many[NET_STEER_MAX_SPANS];
	struct net_steer_span sp[] = { { 2, 9, 0 }, { 10, 20, 1 }, { 21, 21, 0 },
				       { 100, 199, 2 }, { 65535, 65535, 3 } };
	uint8_t pkt[16];
	int len;

	len = net_steer_prog_build(sp, 5, prog);
	CHECK(len > 0 && len <= NET_STEER_PROG_LEN(5), "build: %d", len);
	for (uint32_t q = 0; q < 70000; q++) {
		uint32_t want = NET_STEER_ANY, got;

		for (int i = 0; i < 5; i++)
			if (q >= sp[i].lo && q <= sp[i].hi)
				want = sp[i].idx;
		bth(pkt, q);
		got = net_steer_prog_run(prog, len, pkt, 12);
		if (got != want) {
			CHECK(0, "qpn %u -> %u, want %u", q, got, want);
			break;
		}
	}
	/* a probe names its index; a datagram too short for a QPN is not ours */
	memset(pkt, 0, sizeof(pkt));
	pkt[0] = 0xff, pkt[1] = 'S', pkt[2] = 'R', pkt[3] = 'N', pkt[11] = 7;
	CHECK(net_steer_prog_run(prog, len, pkt, 16) == 7, "probe");
	CHECK(net_steer_prog_run(prog, len, pkt, 11) == NET_STEER_ANY, "short");
	CHECK(net_steer_prog_run(prog, len, pkt, 0) == NET_STEER_ANY, "empty");
	/* unsorted, overlapping, out of range, too many: refused */
	sp[1].lo = 5;
	CHECK(net_steer_prog_build(sp, 5, prog) == -EINVAL, "overlap");
	sp[1].lo = 10;
	sp[4].hi = 1 << 24;
	CHECK(net_steer_prog_build(sp, 5, prog) == -EINVAL, "qpn past 24 bits");
	CHECK(net_steer_prog_build(sp, NET_STEER_MAX_SPANS + 1, prog) == -EINVAL, "too many");
	/* the largest program fits the kernel's limit and still places all */
	for (int i = 0; i < NET_STEER_MAX_SPANS; i++)
		many[i] = (struct net_steer_span){ (uint32_t)(2 + 3 * i), (uint32_t)(2 + 3 * i),
						   (uint32_t)(i % 5) };
	len = net_steer_prog_build(many, NET_STEER_MAX_SPANS, prog);
	CHECK(len > 0 && len <= BPF_MAXINSNS, "largest program: %d insns", len);
	for (int i = 0; i < NET_STEER_MAX_SPANS; i++) {
		bth(pkt, many[i].lo);
		CHECK(net_steer_prog_run(prog, len, pkt, 12) == many[i].idx, "span %d", i);
		bth(pkt, many[i].lo + 1);
		CHECK(net_steer_prog_run(prog, len, pkt, 12) == NET_STEER_ANY, "gap %d", i);
	}
	printf("program: %d instructions for %d spans\n", len, NET_STEER_MAX_SPANS);
}

enum { NS = 4 };

static int bind_group(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(*port) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0), on = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	getsockname(fd, (struct sockaddr *)&a, &al);
	*port = ntohs(a.sin_port);
	return fd;
}

/* Which of socks got one datagram (-1: none within 1 s). */
static int who_got(const int *socks, int n, uint8_t *buf, int *len)
{
	struct pollfd p[NS];

	for (int i = 0; i < n; i++)
		p[i] = (struct pollfd){ socks[i], POLLIN, 0 };
	if (poll(p, (nfds_t)n, 1000) <= 0)
		return -1;
	for (int i = 0; i < n; i++)
		if (p[i].revents & POLLIN) {
			*len = (int)recv(socks[i], buf, 64, 0);
			return i;
		}
	return -1;
}

static void send_to(int tx, uint16_t port, const uint8_t *b, size_t len)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	(void)sendto(tx, b, len, 0, (struct sockaddr *)&a, sizeof(a));
}

static void kernel_group(void)
{
	struct net_steer_span sp[NS];
	int socks[NS], tx = socket(AF_INET, SOCK_DGRAM, 0), len;
	uint16_t port = 0;
	uint8_t pkt[64];

	for (int i = 0; i < NS; i++) {
		socks[i] = bind_group(&port);
		CHECK(socks[i] >= 0, "bind %d: %s", i, strerror(errno));
		if (socks[i] < 0)
			return;
		sp[i] = (struct net_steer_span){ 1000u * (i + 1), 1000u * (i + 1) + 99, (uint32_t)i };
	}
	CHECK(net_steer_attach(socks[1], sp, NS) == 0, "attach: %s", strerror(errno));
	for (int i = 0; i < NS; i++) {
		bth(pkt, 1000u * (i + 1) + 42);
		send_to(tx, port, pkt, 12);
		CHECK(who_got(socks, NS, pkt, &len) == i, "qpn of socket %d went elsewhere", i);
	}
	/* closing socket 1 moves the last one (3) into index 1: probe 1
	 * reaches it, and QPNs of span 1 do too, until a new program */
	close(socks[1]);
	socks[1] = socks[3];
	memset(pkt, 0, 16);
	pkt[0] = 0xff, pkt[1] = 'S', pkt[2] = 'R', pkt[3] = 'N', pkt[11] = 1;
	send_to(tx, port, pkt, 16);
	CHECK(who_got(socks, 3, pkt, &len) == 1 && len == 16, "probe 1 after a close");
	close(socks[0]);
	close(socks[1]);
	close(socks[2]);
	close(tx);
}

/* QPNs 100..199 are port 5000's, 200..299 port 5001's, both ours. */
static int fake_owner(void *arg, uint32_t qpn, uint16_t *port)
{
	(void)arg;
	if (qpn < 100 || qpn >= 300)
		return 0;
	*port = qpn < 200 ? 5000 : 5001;
	return getpid();
}

/* After a complete census of a (port 5000) and b (5001): both steered
 * and nothing stale; once a third member joins (of the table at ip),
 * the program still steers a and b by the indexes they had, and asks
 * for a census. */
static void spans_after_census(struct net_steer *a, const uint8_t *ip)
{
	struct net_steer c;
	struct net_steer_span sp[8], again[8];
	bool stale = true;
	int n;

	net_steer_lock(a);
	n = net_steer_spans(a, fake_owner, NULL, 1000, sp, 8, &stale);
	net_steer_unlock(a);
	CHECK(n == 2 && !stale && sp[0].lo == 100 && sp[0].hi == 199 && sp[1].lo == 200 &&
		      sp[1].hi == 299 && sp[0].idx != sp[1].idx && sp[0].idx < 2 && sp[1].idx < 2,
	      "two spans from the census (%d)", n);
	if (net_steer_open(&c, AF_INET, ip) != 0 || net_steer_join(&c, 5002) != 0) {
		CHECK(0, "a third member");
		return;
	}
	stale = false;
	net_steer_lock(a);
	n = net_steer_spans(a, fake_owner, NULL, 1000, again, 8, &stale);
	net_steer_unlock(a);
	CHECK(n == 2 && stale && !memcmp(sp, again, sizeof(sp[0]) * 2),
	      "a new member: the same spans (%d), a census asked for (%d)", n, stale);
	net_steer_close(&c);
}

/* A census in one process: two members of one table, each with a
 * socket of the group at the table's address... here 127.0.0.1 at an
 * ephemeral port stands for 4791, so the probes are sent by hand. */
static void census_case(void)
{
	uint8_t ip[4] = { 127, 0, 0, 1 }, probes[NET_STEER_MEMBERS][NET_STEER_PROBE_LEN], buf[64];
	struct net_steer a, b;
	struct net_steer_span sp[8];
	int socks[2], tx = socket(AF_INET, SOCK_DGRAM, 0), n, len, who;
	uint16_t port = 0;
	bool done = false, c;

	/* a private address so that no real engine's table is touched */
	ip[3] = (uint8_t)(200 + getpid() % 50);
	CHECK(net_steer_open(&a, AF_INET, ip) == 0 && net_steer_open(&b, AF_INET, ip) == 0,
	      "open tables");
	socks[0] = bind_group(&port);
	socks[1] = bind_group(&port);
	CHECK(net_steer_join(&a, 5000) == 0 && net_steer_join(&b, 5001) == 0, "join");
	/* a program with the probe branch must be there first */
	CHECK(net_steer_attach(socks[0], sp, 0) == 0, "empty program");
	n = net_steer_census_begin(&a, probes);
	CHECK(n == 2, "census of %d", n);
	for (int i = 0; i < n; i++)
		send_to(tx, port, probes[i], NET_STEER_PROBE_LEN);
	for (int i = 0; i < n; i++) {
		who = who_got(socks, 2, buf, &len);
		CHECK(who >= 0, "probe %d lost", i);
		if (who < 0)
			break;
		CHECK(net_steer_probe_in(who ? &b : &a, buf, (uint32_t)len, &c), "a probe");
		done |= c;
	}
	CHECK(done, "census complete");
	spans_after_census(&a, ip);
	/* a forged probe (wrong secret) is consumed and claims nothing */
	memcpy(buf, probes[0], NET_STEER_PROBE_LEN);
	buf[15] ^= 1;
	CHECK(net_steer_probe_in(&a, buf, NET_STEER_PROBE_LEN, &c) && !c, "forged probe");
	net_steer_leave(&b);
	net_steer_close(&b);
	net_steer_close(&a);
	unlink(a.path);
	close(socks[0]);
	close(socks[1]);
	close(tx);
}

int main(void)
{
	alarm(60);
	prog_cases();
	kernel_group();
	census_case();
	if (failures) {
		fprintf(stderr, "%d failure(s)\n", failures);
		return 1;
	}
	printf("steer: all checks passed\n");
	return 0;
}
