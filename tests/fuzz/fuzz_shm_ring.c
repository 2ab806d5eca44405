/* libFuzzer target for the same-host packet inbox (net/shm_ring.c): the
 * file another process maps read-write and fills.  The input is a script
 * of steps against one live inbox: real sends through the producer API,
 * and hostile writes of any value to the words a producer controls (the
 * active-lane bitmap, a lane's head, tail and owner, a slot's length,
 * family, ports and bytes), interleaved with drains.  Each drained packet
 * is checked to lie inside its slot and inside the file, with a length the
 * receive path can hold, and every byte of it is read; a drain must hand
 * out at most what it was asked for and return (no hang).  A send that
 * finds a nonsense tail must give up within its spin budget.
 * Built by `make fuzz` (clang); tests/e2e/fuzz_smoke.sh runs it briefly. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/clock.h"
#include "net/shm_ring_layout.h"
#include "tests/fuzz/fuzz_cursor.h"

#define DEV "fuzzring"
#define SPIN_NS 20000

static struct net_shm_inbox *in;
static struct net_shm_peer *peer;
static uint8_t *base;                /* our own view of the file: the hostile side */
static uint16_t port;
static volatile uint8_t sink;
static unsigned handed;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_shm_ring: %s\n", what);
	abort();
}

static void cleanup(void)
{
	net_shm_inbox_destroy(in);
}

static void setup(void)
{
	char path[160];
	int fd;

	port = (uint16_t)(20000 + getpid() % 40000);
	in = net_shm_inbox_create(DEV, port);
	if (!in)
		die("inbox create");
	atexit(cleanup);
	net_shm_inbox_path(path, sizeof(path), DEV, port);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die("open inbox");
	base = mmap(NULL, SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED)
		die("map inbox");
	peer = net_shm_peer_get(DEV, port);
	if (!peer)
		die("claim a lane");
}

static void check(void *arg, struct net_udp_msg *m)
{
	const uint8_t *own = net_shm_inbox_base(in), *slots = own + SHM_SLOTS_OFF, *b = m->buf;
	size_t off;

	(void)arg;
	if (b < slots || b >= own + SHM_BYTES)
		die("packet outside the inbox");
	off = (size_t)(b - slots) % NET_SHM_SLOT_BYTES;
	if (off != NET_SHM_SLOT_HDR || m->len > m->cap ||
	    off + m->cap > NET_SHM_SLOT_BYTES)
		die("packet outside its slot");
	if (m->from.family != AF_INET && m->from.family != AF_INET6)
		die("bad family handed out");
	for (uint32_t i = 0; i < m->len; i++)
		sink ^= b[i];
	handed++;
}

static struct shm_lane *lane(uint8_t l)
{
	return (struct shm_lane *)(base + SHM_HEAD_BYTES) + l % NET_SHM_LANES;
}

static struct shm_slot *slot(uint8_t l, uint32_t i)
{
	size_t k = (size_t)(l % NET_SHM_LANES) * NET_SHM_SLOTS + i % NET_SHM_SLOTS;

	return (struct shm_slot *)(base + SHM_SLOTS_OFF + k * NET_SHM_SLOT_BYTES);
}

static void send_one(struct cursor *c)
{
	static uint8_t pkt[NET_SHM_PKT_MAX + 64];
	struct net_addr from = { .family = AF_INET, .port = 4791, .ip = { 127, 0, 0, 1 } };
	uint8_t to[16] = { 127, 0, 0, 1 };
	struct iovec iov = { pkt, (size_t)take(c, 2) % sizeof(pkt) };
	uint64_t t0 = net_now_ns();
	int r;

	memset(pkt, (int)take(c, 1), iov.iov_len);
	r = net_shm_send(peer, &from, to, &iov, 1, SPIN_NS);
	if (r == -EMSGSIZE ? iov.iov_len <= NET_SHM_PKT_MAX : iov.iov_len > NET_SHM_PKT_MAX)
		die("size check");
	/* a full or nonsense lane: give up after the spin budget (+ slack) */
	if (net_now_ns() - t0 > 2000000000ull)
		die("send did not give up");
}

static void drain(unsigned max)
{
	int n;

	handed = 0;
	n = net_shm_inbox_drain(in, (int)max, check, NULL);
	if (n < 0 || (unsigned)n > max || (unsigned)n != handed)
		die("drain handed out more than asked");
	(void)net_shm_inbox_pending(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	struct shm_head *h;

	if (!in)
		setup();
	h = (struct shm_head *)base;
	for (int step = 0; step < 64 && c.n; step++) {
		uint8_t op = (uint8_t)take(&c, 1), l = (uint8_t)take(&c, 1);
		uint32_t i;

		switch (op % 10) {
		case 0: send_one(&c); break;
		case 1: atomic_store(&lane(l)->head, (uint32_t)take(&c, 4)); break;
		case 2: atomic_store(&lane(l)->tail, (uint32_t)take(&c, 4)); break;
		case 3: atomic_store(&h->active, take(&c, 8)); break;
		case 4:
			i = (uint32_t)take(&c, 2);
			atomic_store(&slot(l, i)->len, (uint32_t)take(&c, 4));
			break;
		case 5:
			i = (uint32_t)take(&c, 2);
			slot(l, i)->family = (uint16_t)take(&c, 2);
			slot(l, i)->port = (uint16_t)take(&c, 2);
			slot(l, i)->to_port = (uint16_t)take(&c, 2);
			break;
		case 6: /* head moved by a small step: packets "published" */
			atomic_fetch_add(&lane(l)->head, (uint32_t)take(&c, 1) % 8);
			break;
		case 7: atomic_store(&h->sleeping, (uint32_t)take(&c, 1)); break;
		default: drain(1 + (unsigned)take(&c, 1) % 64); break;
		}
	}
	/* leave it empty; bounded: each pass hands out up to 64 */
	for (int k = 0; k < NET_SHM_LANES * NET_SHM_SLOTS / 64 + 1 && net_shm_inbox_pending(in); k++)
		drain(64);
	/* the next input starts from our producer's view again */
	atomic_store(&h->active, atomic_load(&h->active) | 1ull << net_shm_peer_lane(peer));
	return 0;
}
