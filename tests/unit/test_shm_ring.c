/* net/shm_ring: the same-host inbox alone (no engine): one and several
 * producer processes, a full lane, wraparound, the sleeping flag, hostile
 * values written into the shared file, a dead producer's lane reclaimed
 * and a dead owner's stale file replaced. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/shm_ring.h"

static int failures;

#define CHECK(cond, ...)                                                    \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			failures++;                                         \
		}                                                           \
	} while (0)

static char dev[32];
static const struct net_addr from = { .family = AF_INET, .ip = { 127, 0, 0, 1 }, .port = 4242 };
static const uint8_t to_ip[16] = { 127, 0, 0, 2 };

/* A packet: 4-byte producer id, 4-byte sequence, then len-8 bytes derived
 * from both. */
static int send_pkt(struct net_shm_peer *p, uint32_t id, uint32_t seq, uint32_t len,
		    uint64_t spin_ns)
{
	uint8_t buf[NET_SHM_PKT_MAX];
	struct iovec iov[2] = { { buf, 8 }, { buf + 8, len - 8 } };

	memcpy(buf, &id, 4);
	memcpy(buf + 4, &seq, 4);
	for (uint32_t i = 8; i < len; i++)
		buf[i] = (uint8_t)(id * 31 + seq + i);
	return net_shm_send(p, &from, to_ip, iov, 2, spin_ns);
}

struct rx_state {
	uint32_t next[NET_SHM_LANES + 8];     /* expected seq per producer id */
	uint64_t got, bad_order, bad_data, bad_addr;
	uint64_t sum;
};

static void rx_check(void *arg, struct net_udp_msg *m)
{
	struct rx_state *st = arg;
	uint32_t id, seq;

	st->got++;
	if (m->len < 8) {
		st->bad_data++;
		return;
	}
	memcpy(&id, m->buf, 4);
	memcpy(&seq, m->buf + 4, 4);
	if (id >= NET_SHM_LANES + 8) {
		st->bad_data++;
		return;
	}
	if (seq != st->next[id])
		st->bad_order++;
	st->next[id] = seq + 1;
	for (uint32_t i = 8; i < m->len; i++)
		if (m->buf[i] != (uint8_t)(id * 31 + seq + i)) {
			st->bad_data++;
			break;
		}
	if (m->from.family != AF_INET || m->from.port != 4242 || m->from.ip[0] != 127 ||
	    m->to.ip[3] != 2 || m->to.port != 1234)
		st->bad_addr++;
}

/* Hostile content: only touch every byte handed over. */
static void rx_touch(void *arg, struct net_udp_msg *m)
{
	struct rx_state *st = arg;

	st->got++;
	if (m->len > NET_SHM_PKT_MAX)
		st->bad_data++;
	for (uint32_t i = 0; i < m->len && i <= NET_SHM_PKT_MAX; i++)
		st->sum += m->buf[i];
}

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_single(struct net_shm_inbox *in, struct net_shm_peer *p)
{
	struct rx_state st = { 0 };

	CHECK(!net_shm_inbox_pending(in), "fresh inbox empty");
	CHECK(send_pkt(p, 0, 0, 100, 1000) == 0, "send");
	CHECK(send_pkt(p, 0, 1, NET_SHM_PKT_MAX, 1000) == 0, "send max");
	{
		uint8_t big[NET_SHM_PKT_MAX + 1];
		struct iovec iov = { big, sizeof(big) };

		CHECK(net_shm_send(p, &from, to_ip, &iov, 1, 1000) == -EMSGSIZE, "too long");
	}
	CHECK(net_shm_inbox_pending(in), "pending after send");
	CHECK(net_shm_inbox_drain(in, 64, rx_check, &st) == 2, "drain 2");
	CHECK(st.got == 2 && !st.bad_order && !st.bad_data && !st.bad_addr,
	      "single: got %llu order %llu data %llu addr %llu", (unsigned long long)st.got,
	      (unsigned long long)st.bad_order, (unsigned long long)st.bad_data,
	      (unsigned long long)st.bad_addr);
	CHECK(!net_shm_inbox_pending(in), "empty after drain");
	printf("single lane: 2 packets (100 B and the %d-byte maximum) out in order with "
	       "their addresses; oversize refused\n", NET_SHM_PKT_MAX);
}

static void test_full_and_wrap(struct net_shm_inbox *in, struct net_shm_peer *p)
{
	struct rx_state st = { 0 };
	uint32_t seq = 0;
	int ok = 0, r;

	for (int i = 0; i < NET_SHM_SLOTS; i++)
		ok += send_pkt(p, 1, seq++, 64, 1000) == 0;
	CHECK(ok == NET_SHM_SLOTS, "filled %d of %d", ok, NET_SHM_SLOTS);
	r = send_pkt(p, 1, seq, 64, 20000);
	CHECK(r == -EAGAIN, "full lane: %d", r);
	CHECK(net_shm_inbox_drain(in, 1, rx_check, &st) == 1, "drain one");
	CHECK(send_pkt(p, 1, seq++, 64, 1000) == 0, "room again");
	CHECK(net_shm_inbox_drain(in, 100000, rx_check, &st) == NET_SHM_SLOTS, "drain rest");
	printf("full lane: %d slots, the next send -EAGAIN after a bounded wait, room again "
	       "after one is taken\n", NET_SHM_SLOTS);

	/* 10k packets through, bursts of varying size */
	uint64_t t0 = ms_now();
	uint32_t sent = 0;

	while (sent < 10000 && ms_now() - t0 < 10000) {
		uint32_t burst = 1 + (sent * 7919u) % (NET_SHM_SLOTS - 1);

		for (uint32_t k = 0; k < burst && sent < 10000; k++, sent++)
			CHECK(send_pkt(p, 1, seq++, 8 + (sent * 131u) % 4000, 1000) == 0,
			      "wrap send %u", sent);
		net_shm_inbox_drain(in, 100000, rx_check, &st);
	}
	CHECK(st.got == NET_SHM_SLOTS + 1 + 10000 && !st.bad_order && !st.bad_data &&
	      !st.bad_addr, "wrap: got %llu order %llu data %llu", (unsigned long long)st.got,
	      (unsigned long long)st.bad_order, (unsigned long long)st.bad_data);
	printf("wraparound: 10000 packets of 8..4007 B in bursts, all in order and intact\n");
}

static void test_sleeping(struct net_shm_inbox *in, struct net_shm_peer *p)
{
	struct rx_state st = { 0 };

	net_shm_inbox_set_sleeping(in, true);
	CHECK(send_pkt(p, 2, 0, 16, 1000) == 1, "first send to a sleeper: ring");
	CHECK(send_pkt(p, 2, 1, 16, 1000) == 0, "second: flag already down");
	net_shm_inbox_set_sleeping(in, false);
	CHECK(send_pkt(p, 2, 2, 16, 1000) == 0, "awake: no doorbell");
	CHECK(net_shm_inbox_drain(in, 100, rx_check, &st) == 3, "drain");
	printf("sleeping flag: exactly one sender is told to ring the doorbell\n");
}

static void test_multi(struct net_shm_inbox *in)
{
	enum { PROCS = 4, PER = 3000 };
	struct rx_state st = { 0 };
	pid_t pids[PROCS];
	uint64_t t0 = ms_now();
	int lanes_ok = 0;

	for (int c = 0; c < PROCS; c++) {
		pids[c] = fork();
		if (pids[c] == 0) {
			struct net_shm_peer *q = net_shm_peer_get(dev, 1234);
			uint64_t end = ms_now() + 20000;

			if (!q)
				_exit(100);
			for (uint32_t s = 0; s < PER && ms_now() < end;)
				if (send_pkt(q, 10 + (uint32_t)c, s, 8 + s % 1500, 100000) >= 0)
					s++;
			_exit(net_shm_peer_lane(q));
		}
	}
	while (st.got < PROCS * PER && ms_now() - t0 < 30000)
		net_shm_inbox_drain(in, 64, rx_check, &st);
	for (int c = 0; c < PROCS; c++) {
		int status = 0;

		waitpid(pids[c], &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) > 0 && WEXITSTATUS(status) < 64)
			lanes_ok++;
	}
	CHECK(lanes_ok == PROCS, "every child claimed a lane (%d)", lanes_ok);
	CHECK(st.got == PROCS * PER && !st.bad_order && !st.bad_data,
	      "multi: got %llu of %d, order %llu data %llu", (unsigned long long)st.got,
	      PROCS * PER, (unsigned long long)st.bad_order, (unsigned long long)st.bad_data);
	printf("multi-lane: %d producer processes x %d packets, each in order\n", PROCS, PER);
}

static void test_reclaim(struct net_shm_inbox *in)
{
	struct rx_state st = { 0 };
	int lane[2] = { -1, -1 };

	for (int k = 0; k < 2; k++) {
		pid_t pid = fork();
		int status = 0;

		if (pid == 0) {
			struct net_shm_peer *q = net_shm_peer_get(dev, 1234);

			if (!q || send_pkt(q, 20, (uint32_t)k, 32, 100000) < 0)
				_exit(100);
			_exit(net_shm_peer_lane(q));
		}
		waitpid(pid, &status, 0);
		lane[k] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	}
	CHECK(lane[0] > 0 && lane[0] < NET_SHM_LANES && lane[1] == lane[0],
	      "dead producer's lane reclaimed: %d then %d", lane[0], lane[1]);
	CHECK(net_shm_inbox_drain(in, 100, rx_check, &st) == 2 && !st.bad_order,
	      "both packets, in order");
	printf("dead producer: its lane (%d) is claimed by the next process, its packet kept\n",
	       lane[0]);
}

/* Map the inbox file directly, as a hostile process would. */
static uint8_t *raw_map(size_t *len)
{
	char path[160];
	struct stat st;
	void *p;
	int fd;

	net_shm_inbox_path(path, sizeof(path), dev, 1234);
	fd = open(path, O_RDWR);
	if (fd < 0 || fstat(fd, &st) < 0)
		return NULL;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	*len = (size_t)st.st_size;
	return p == MAP_FAILED ? NULL : p;
}

static void test_hostile(struct net_shm_inbox *in, struct net_shm_peer *p)
{
	struct rx_state st = { 0 };
	size_t len = 0;
	uint8_t *raw = raw_map(&len);
	unsigned seed = 12345;
	uint64_t bad0 = net_shm_inbox_bad(in);

	CHECK(raw != NULL, "raw map");
	if (!raw)
		return;
	for (int round = 0; round < 200; round++) {
		/* garbage over the lane words (and, every other round, the
		 * header's bitmap/sleeping lines but not the magic), then over
		 * the slot headers of the first slots of every lane */
		for (size_t off = round % 2 ? 64 : 4096; off < 16384; off += 4)
			if (rand_r(&seed) % 3 == 0) {
				uint32_t v = (uint32_t)rand_r(&seed) * 2654435761u;

				if (rand_r(&seed) % 4 == 0)
					v = (uint32_t)rand_r(&seed) % 64;
				memcpy(raw + off, &v, 4);
			}
		for (int l = 0; l < NET_SHM_LANES; l++)
			for (int s = 0; s < 4; s++) {
				size_t off = 16384 + ((size_t)l * NET_SHM_SLOTS + (size_t)s) *
						      NET_SHM_SLOT_BYTES;
				uint32_t v = rand_r(&seed) % 2 ? (uint32_t)rand_r(&seed) * 7919u
							      : (uint32_t)rand_r(&seed) % 5000;

				if (off + 8 <= len) {
					memcpy(raw + off, &v, 4);
					v = (uint32_t)rand_r(&seed);
					memcpy(raw + off + 4, &v, 4);
				}
			}
		for (int k = 0; k < 4; k++)
			net_shm_inbox_drain(in, 1000, rx_touch, &st);
		(void)net_shm_inbox_pending(in);
		(void)send_pkt(p, 3, (uint32_t)round, 64, 2000); /* may say full */
	}
	CHECK(!st.bad_data, "a length beyond the slot was handed over");
	CHECK(net_shm_inbox_bad(in) > bad0, "nonsense was noticed (%llu)",
	      (unsigned long long)(net_shm_inbox_bad(in) - bad0));
	printf("hostile file: 200 rounds of garbage in heads, tails, bitmap and slot headers: "
	       "no crash, %llu packets handed over (all within a slot), %llu slots/lanes "
	       "rejected\n", (unsigned long long)st.got,
	       (unsigned long long)(net_shm_inbox_bad(in) - bad0));
	munmap(raw, len);
}

static void test_stale(void)
{
	char path[160];
	struct net_shm_inbox *in2;
	pid_t pid;
	int fd, status;

	/* an inbox whose owner dies without removing it */
	pid = fork();
	if (pid == 0) {
		struct net_shm_inbox *x = net_shm_inbox_create(dev, 777);

		_exit(x ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	net_shm_inbox_path(path, sizeof(path), dev, 777);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && access(path, F_OK) == 0,
	      "child left its inbox behind");
	CHECK(net_shm_peer_get(dev, 777) == NULL, "no sending into a dead process's inbox");
	in2 = net_shm_inbox_create(dev, 777);
	CHECK(in2 != NULL, "stale inbox replaced: %s", strerror(errno));
	errno = 0;
	CHECK(net_shm_inbox_create(dev, 777) == NULL && errno == EBUSY,
	      "a live owner's inbox is not taken over");
	net_shm_inbox_destroy(in2);
	CHECK(access(path, F_OK) != 0, "destroy unlinks");

	/* a truncated leftover (creator died before sizing it) */
	fd = open(path, O_RDWR | O_CREAT, 0600);
	CHECK(fd >= 0 && write(fd, "junk", 4) == 4, "junk file");
	if (fd >= 0)
		close(fd);
	in2 = net_shm_inbox_create(dev, 777);
	CHECK(in2 != NULL, "junk file replaced");
	net_shm_inbox_destroy(in2);
	printf("stale inbox: a dead owner's file and a truncated one are replaced, a live "
	       "owner's is not (EBUSY)\n");
}

static void test_no_lane(void)
{
	struct net_shm_inbox *in = net_shm_inbox_create(dev, 778);
	size_t len = 0;
	char path[160];
	pid_t pid;
	int status = 0;

	CHECK(in != NULL, "inbox 778");
	if (!in)
		return;
	/* every lane owned by a live process (us, as seen from a child) */
	pid = fork();
	if (pid == 0) {
		struct net_shm_peer *q0 = net_shm_peer_get(dev, 778);
		int same = 0;

		for (int i = 0; i < NET_SHM_LANES; i++)
			same += q0 && net_shm_peer_get(dev, 778) == q0;
		_exit(same == NET_SHM_LANES ? 0 : 1);  /* one lane per process, cached */
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "one lane per process");
	net_shm_inbox_path(path, sizeof(path), dev, 778);
	{
		int fd = open(path, O_RDWR);
		uint8_t *raw = fd >= 0 ? mmap(NULL, 16384, PROT_READ | PROT_WRITE, MAP_SHARED,
					      fd, 0) : MAP_FAILED;
		uint64_t me = 0;

		if (fd >= 0)
			close(fd);
		CHECK(raw != MAP_FAILED, "map");
		if (raw != MAP_FAILED) {
			/* the inbox's owner word (ours) as every lane's owner */
			memcpy(&me, raw + 24, 8);
			for (int l = 0; l < NET_SHM_LANES; l++)
				memcpy(raw + 4096 + (size_t)l * 192, &me, 8);
			munmap(raw, 16384);
		}
		(void)len;
	}
	pid = fork();
	if (pid == 0)
		_exit(net_shm_peer_get(dev, 778) == NULL && errno == ENOSPC ? 0 : 1);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "no free lane: the producer gets NULL/ENOSPC (and would use UDP)");
	net_shm_inbox_destroy(in);
	printf("all lanes held by live processes: a new producer is refused (ENOSPC)\n");
}

int main(void)
{
	struct net_shm_inbox *in;
	struct net_shm_peer *p;

	snprintf(dev, sizeof(dev), "srnut%d", (int)getpid());
	in = net_shm_inbox_create(dev, 1234);
	if (!in) {
		printf("SKIP: no inbox in /dev/shm: %s\n", strerror(errno));
		return 77;
	}
	p = net_shm_peer_get(dev, 1234);
	CHECK(p != NULL && net_shm_peer_lane(p) == 0, "producer lane 0");
	if (!p) {
		net_shm_inbox_destroy(in);
		return 1;
	}
	CHECK(net_shm_peer_get(dev, 1234) == p, "cached per process");
	test_single(in, p);
	test_full_and_wrap(in, p);
	test_sleeping(in, p);
	test_multi(in);
	test_reclaim(in);
	test_hostile(in, p);
	net_shm_inbox_destroy(in);
	test_stale();
	test_no_lane();
	if (failures) {
		printf("FAIL: %d checks failed\n", failures);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
