/* impair_relay IF1 IF2 [-d DELAY_MS] [-j JITTER_MS] [-D DUP_PERMILLE]
 *              [-R REORDER_PERMILLE] [-g REORDER_HOLD_MS] [-l LOSS_PERMILLE]
 *              [-O] [-t SECONDS] [-s SEED]
 *
 * A two-port Ethernet bridge in user space, for the fault tests in
 * tests/net/fault_*.sh: this kernel has no netem, so the impairments
 * netem would add are added here, in a namespace between the two
 * "hosts".  Every frame read from one interface (an AF_PACKET socket on
 * each) is sent out of the other, after:
 *   loss       dropped with probability LOSS_PERMILLE / 1000 (the RoCE
 *              payload bytes lost are counted, for resent-vs-lost)
 *   delay      held DELAY_MS plus a uniform jitter of +-JITTER_MS (frames
 *              leave in order of their release time, so jitter reorders,
 *              as netem's does; -O keeps each direction in order, as
 *              a path whose delay varies but whose queue is FIFO)
 *   reorder    with probability REORDER_PERMILLE / 1000, held
 *              REORDER_HOLD_MS (default 1) longer than the rest
 *   duplicate  with probability DUP_PERMILLE / 1000, sent twice
 * Runs until SIGTERM or SIGINT, or SECONDS (default 600) have passed, and
 * then prints what it did per direction.  The senders' checksum and
 * segmentation offloads must be off (the test does it with ethtool): a
 * frame with its checksum left to the hardware leaves this bridge as it
 * came, and a TSO super-frame does not fit the other link.
 * Exit 0, or 2 on a set-up error. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/t_util.h"

#define POOL 8192      /* frames held at once */
#define FRAME_MAX 9216 /* a jumbo frame (bench/delay.sh -M) */
#define BATCH 64

struct held {
	uint64_t at_ns, order; /* release time; arrival order breaks ties */
	int slot, out;         /* frame in the pool; output port */
};

static struct {
	uint8_t frame[POOL][FRAME_MAX];
	uint16_t len[POOL];
	int free_slots[POOL], nfree;
	struct held heap[POOL];
	int nheap;
	uint64_t order;
} q;

struct dir_stats {
	unsigned long in, out, lost, duplicated, reordered, overflow, too_big, send_err;
	unsigned long long lost_roce_bytes; /* RoCE payload of the frames lost */
};

static struct dir_stats st[2];
static volatile sig_atomic_t stop;
/* test noise, not a secret: t_util.h's seeded xorshift */
static int per_mille(unsigned int pm)
{
	return pm && t_rand64() % 1000 < pm;
}

static uint64_t now_ns(void)
{
	return (uint64_t)(t_now() * 1e9);
}

static int earlier(const struct held *a, const struct held *b)
{
	return a->at_ns != b->at_ns ? a->at_ns < b->at_ns : a->order < b->order;
}

static void heap_push(struct held h)
{
	int i = q.nheap++;

	while (i > 0 && earlier(&h, &q.heap[(i - 1) / 2])) {
		q.heap[i] = q.heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	q.heap[i] = h;
}

static struct held heap_pop(void)
{
	struct held top = q.heap[0], last = q.heap[--q.nheap];
	int i = 0;

	for (;;) {
		int c = 2 * i + 1;

		if (c >= q.nheap)
			break;
		if (c + 1 < q.nheap && earlier(&q.heap[c + 1], &q.heap[c]))
			c++;
		if (!earlier(&q.heap[c], &last))
			break;
		q.heap[i] = q.heap[c];
		i = c;
	}
	if (q.nheap)
		q.heap[i] = last;
	return top;
}

static int port_open(const char *ifname)
{
	struct sockaddr_ll a = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL) };
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)), one = 1, buf = 4 << 20;

	a.sll_ifindex = (int)if_nametoindex(ifname);
	if (fd < 0 || !a.sll_ifindex || bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		fprintf(stderr, "impair_relay: %s: %s\n", ifname, strerror(errno));
		return -1;
	}
	/* what this bridge sends out of a port is not read back from it */
	if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)))
		fprintf(stderr, "impair_relay: no PACKET_IGNORE_OUTGOING, checking each frame\n");
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	return fd;
}

static struct {
	uint64_t delay_ns, jitter_ns, hold_ns;
	unsigned int dup, reorder, loss;
	int in_order;
} imp = { .hold_ns = 1000000 };

static uint64_t last_at[2]; /* per output port, for -O */

/* Ethernet + IPv4 (no options) + UDP + BTH + ICRC: what a RoCEv2 frame
 * carries beside its payload (a RETH on a first packet aside). */
enum { ROCE_OVERHEAD = 14 + 20 + 8 + 12 + 4, ROCE_PORT = 4791 };

/* The payload bytes of a RoCEv2 frame over IPv4 (0 for anything else),
 * so that a sender's resent bytes compare with what this relay lost. */
static unsigned int roce_payload(const uint8_t *f, unsigned int len)
{
	if (len < ROCE_OVERHEAD || f[12] != 0x08 || f[13] != 0x00 || (f[14] & 0x0f) != 5 ||
	    f[23] != 17 || (f[36] << 8 | f[37]) != ROCE_PORT)
		return 0;
	return len - ROCE_OVERHEAD;
}

static int fds[2];

/* One frame in the pool, held until at_ns, to leave by port out. */
static void hold(int slot, int out, uint64_t at_ns)
{
	heap_push((struct held){ .at_ns = at_ns, .order = q.order++, .slot = slot, .out = out });
}

static int slot_take(void)
{
	return q.nfree ? q.free_slots[--q.nfree] : -1;
}

/* A frame read from port in: its fate, and its release time(s). */
static void admit(int slot, int in, uint64_t now)
{
	struct dir_stats *s = &st[in];
	int out = !in, copy;
	uint64_t at = now + imp.delay_ns;

	if (imp.jitter_ns)
		at = at - imp.jitter_ns + t_rand64() % (2 * imp.jitter_ns + 1);
	if (imp.in_order) {
		if (at < last_at[out])
			at = last_at[out];
		last_at[out] = at;
	}
	if (per_mille(imp.loss)) {
		s->lost++;
		s->lost_roce_bytes += roce_payload(q.frame[slot], q.len[slot]);
		q.free_slots[q.nfree++] = slot;
		return;
	}
	if (per_mille(imp.reorder)) {
		s->reordered++;
		at += imp.hold_ns;
	}
	hold(slot, out, at);
	if (per_mille(imp.dup)) {
		copy = slot_take();
		if (copy < 0) {
			s->overflow++;
			return;
		}
		memcpy(q.frame[copy], q.frame[slot], q.len[slot]);
		q.len[copy] = q.len[slot];
		s->duplicated++;
		hold(copy, out, at);
	}
}

/* Reads what port in has; 0, or -1 on a socket error. */
static int port_read(int in, uint64_t now)
{
	for (int i = 0; i < BATCH; i++) {
		struct sockaddr_ll from;
		socklen_t fl = sizeof(from);
		int slot = slot_take();
		ssize_t n;

		if (slot < 0) {
			/* full: read and drop, so the socket does not back up */
			uint8_t scratch[FRAME_MAX];

			n = recv(fds[in], scratch, sizeof(scratch), MSG_DONTWAIT);
			if (n < 0)
				return errno == EAGAIN || errno == EINTR ? 0 : -1;
			st[in].overflow++;
			continue;
		}
		n = recvfrom(fds[in], q.frame[slot], FRAME_MAX, MSG_DONTWAIT | MSG_TRUNC,
			     (struct sockaddr *)&from, &fl);
		if (n < 0 || from.sll_pkttype == PACKET_OUTGOING || n > FRAME_MAX) {
			q.free_slots[q.nfree++] = slot;
			if (n > FRAME_MAX)
				st[in].too_big++;
			if (n < 0)
				return errno == EAGAIN || errno == EINTR ? 0 : -1;
			continue;
		}
		st[in].in++;
		q.len[slot] = (uint16_t)n;
		admit(slot, in, now);
	}
	return 0;
}

/* Sends every held frame whose time has come. */
static void release(uint64_t now)
{
	while (q.nheap && q.heap[0].at_ns <= now) {
		struct held h = heap_pop();
		struct dir_stats *s = &st[!h.out];

		if (send(fds[h.out], q.frame[h.slot], q.len[h.slot], 0) < 0)
			s->send_err++;
		else
			s->out++;
		q.free_slots[q.nfree++] = h.slot;
	}
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	double secs = 600;
	uint64_t end;
	int c;

	while ((c = getopt(argc, argv, "d:j:D:R:g:l:Ot:s:")) != -1) {
		switch (c) {
		case 'd': imp.delay_ns = (uint64_t)(atof(optarg) * 1e6); break;
		case 'j': imp.jitter_ns = (uint64_t)(atof(optarg) * 1e6); break;
		case 'D': imp.dup = (unsigned int)atoi(optarg); break;
		case 'R': imp.reorder = (unsigned int)atoi(optarg); break;
		case 'g': imp.hold_ns = (uint64_t)(atof(optarg) * 1e6); break;
		case 'l': imp.loss = (unsigned int)atoi(optarg); break;
		case 'O': imp.in_order = 1; break;
		case 't': secs = atof(optarg); break;
		case 's': t_rand_seed(strtoull(optarg, NULL, 0) | 1); break;
		default: goto usage;
		}
	}
	if (argc - optind != 2 || imp.jitter_ns > imp.delay_ns) {
usage:
		fprintf(stderr, "usage: impair_relay IF1 IF2 [-d DELAY_MS] [-j JITTER_MS <= DELAY_MS] "
				"[-D DUP_PERMILLE] [-R REORDER_PERMILLE] [-g REORDER_HOLD_MS] "
				"[-l LOSS_PERMILLE] [-O] [-t SECONDS] [-s SEED]\n");
		return 2;
	}
	fds[0] = port_open(argv[optind]);
	fds[1] = port_open(argv[optind + 1]);
	if (fds[0] < 0 || fds[1] < 0)
		return 2;
	for (int i = 0; i < POOL; i++)
		q.free_slots[q.nfree++] = i;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("impair_relay: %s <-> %s ready\n", argv[optind], argv[optind + 1]);
	end = now_ns() + (uint64_t)(secs * 1e9);
	while (!stop) {
		struct pollfd pf[2] = { { .fd = fds[0], .events = POLLIN },
					{ .fd = fds[1], .events = POLLIN } };
		uint64_t now = now_ns(), wait_ns = 100000000ull;
		struct timespec ts;

		if (now >= end)
			break;
		if (q.nheap)
			wait_ns = q.heap[0].at_ns > now ? q.heap[0].at_ns - now : 0;
		ts = (struct timespec){ .tv_sec = (time_t)(wait_ns / 1000000000ull),
					.tv_nsec = (long)(wait_ns % 1000000000ull) };
		if (ppoll(pf, 2, &ts, NULL) < 0 && errno != EINTR)
			break;
		now = now_ns();
		for (int i = 0; i < 2; i++)
			if ((pf[i].revents & POLLIN) && port_read(i, now))
				stop = 1;
		release(now_ns());
	}
	for (int i = 0; i < 2; i++)
		printf("impair_relay: %s -> %s: in %lu out %lu lost %lu duplicated %lu "
		       "reordered %lu overflow %lu too_big %lu send_err %lu lost_roce_bytes %llu\n",
		       argv[optind + i], argv[optind + !i], st[i].in, st[i].out, st[i].lost,
		       st[i].duplicated, st[i].reordered, st[i].overflow, st[i].too_big,
		       st[i].send_err, st[i].lost_roce_bytes);
	close(fds[0]);
	close(fds[1]);
	return 0;
}
