/* The capture ring (net/capture_ring.h): four producer threads, through
 * their own mapping, race to append numbered records to a 64 KiB ring
 * while this thread drains it.  Every record must arrive intact and in
 * each producer's order, none twice; what did not fit is counted as
 * dropped, never half-written; the ring must wrap.  Then: a stopped
 * capture takes nothing, a second capture of the device is refused
 * while the first lives, and a removed one cannot be attached. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net/capture_ring.h"
#include "net/clock.h"
#include "tests/lib/t_util.h"

enum { PRODUCERS = 4, PER = 20000, RING = 65536, MAX_LEN = 1500, DEADLINE_S = 30 };

static char dev[64];
static _Atomic int done_producers;
static _Atomic uint64_t dropped_seen;

static uint8_t pattern(uint32_t who, uint32_t seq, uint32_t i)
{
	return (uint8_t)(who * 31 + seq * 7 + i);
}

static uint32_t len_of(uint32_t seq)
{
	return 1 + (seq * 97) % MAX_LEN;
}

static void *producer(void *arg)
{
	uint32_t who = (uint32_t)(uintptr_t)arg;
	static uint8_t bufs[PRODUCERS][MAX_LEN];
	uint8_t *buf = bufs[who];
	struct net_cap c;
	uint64_t lost = 0;

	if (net_cap_attach(&c, dev) != 0) {
		atomic_fetch_add(&done_producers, 1);
		return NULL;
	}
	for (uint32_t seq = 0; seq < PER; seq++) {
		struct net_cap_rec meta = { .kind = NET_CAP_TX, .pid = who, .qpn = seq };
		uint32_t len = len_of(seq);
		struct iovec iov[2];

		for (uint32_t i = 0; i < len; i++)
			buf[i] = pattern(who, seq, i);
		/* two pieces: the ring gathers */
		iov[0].iov_base = buf;
		iov[0].iov_len = len / 2;
		iov[1].iov_base = buf + len / 2;
		iov[1].iov_len = len - len / 2;
		if (!net_cap_put(&c, &meta, iov, 2)) {
			/* full: let the reader catch up, as a real sender's
			 * pace would (the ring must still wrap many times) */
			struct timespec nap = { 0, 20000 };

			lost++;
			nanosleep(&nap, NULL);
		}
	}
	atomic_fetch_add(&dropped_seen, lost);
	net_cap_detach(&c);
	atomic_fetch_add(&done_producers, 1);
	return NULL;
}

static void race(void)
{
	struct net_cap ring;
	pthread_t th[PRODUCERS];
	int64_t last[PRODUCERS];
	uint64_t got = 0, bad = 0, order = 0, deadline;

	T_CHECK(net_cap_create(&ring, dev, RING, 42) == 0, "create");
	if (!ring.h)
		return;
	for (int i = 0; i < PRODUCERS; i++) {
		last[i] = -1;
		pthread_create(&th[i], NULL, producer, (void *)(uintptr_t)i);
	}
	deadline = net_now_ns() + DEADLINE_S * 1000000000ull;
	while (net_now_ns() < deadline) {
		const struct net_cap_rec *r = net_cap_next(&ring);

		if (!r) {
			if (atomic_load(&done_producers) == PRODUCERS &&
			    atomic_load(&ring.h->tail) == atomic_load(&ring.h->head))
				break;
			continue;
		}
		if (r->pid >= PRODUCERS || r->roce_len != len_of(r->qpn)) {
			bad++;
		} else {
			const uint8_t *p = (const uint8_t *)(r + 1);

			for (uint32_t i = 0; i < r->roce_len; i++)
				if (p[i] != pattern(r->pid, r->qpn, i)) {
					bad++;
					break;
				}
			if ((int64_t)r->qpn <= last[r->pid])
				order++;
			last[r->pid] = r->qpn;
		}
		got++;
		net_cap_next_done(&ring, r);
	}
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(th[i], NULL);
	printf("%d producers x %d records through a %d-byte ring: %llu read, %llu dropped "
	       "(ring says %llu), %llu bytes passed (%.1f laps)\n", PRODUCERS, PER, RING,
	       (unsigned long long)got, (unsigned long long)atomic_load(&dropped_seen),
	       (unsigned long long)atomic_load(&ring.h->dropped),
	       (unsigned long long)atomic_load(&ring.h->head),
	       (double)atomic_load(&ring.h->head) / RING);
	T_CHECK(bad == 0, "%llu damaged records", (unsigned long long)bad);
	T_CHECK(order == 0, "%llu records out of their producer's order", (unsigned long long)order);
	T_CHECK(got + atomic_load(&dropped_seen) == (uint64_t)PRODUCERS * PER,
		"read %llu + dropped %llu != %d", (unsigned long long)got,
		(unsigned long long)atomic_load(&dropped_seen), PRODUCERS * PER);
	T_CHECK(atomic_load(&ring.h->dropped) == atomic_load(&dropped_seen), "drop counts differ");
	T_CHECK(got > 0, "nothing read");
	T_CHECK(atomic_load(&ring.h->head) > 4 * RING, "the ring did not wrap");
	net_cap_destroy(&ring, dev);
}

static void lifecycle(void)
{
	struct net_cap a, b, p;
	uint8_t byte = 1;
	struct iovec iov = { &byte, 1 };
	struct net_cap_rec meta = { .kind = NET_CAP_RX };

	printf("life of a capture: stop, a second one, removal\n");
	T_CHECK(net_cap_create(&a, dev, 1000, 1) == -EINVAL, "size not a power of 2 taken");
	T_CHECK(net_cap_create(&a, dev, RING, 0) == -EINVAL, "gen 0 taken");
	T_CHECK(net_cap_create(&a, dev, RING, 5) == 0, "create");
	T_CHECK(net_cap_create(&b, dev, RING, 6) == -EBUSY, "second capture not refused");
	T_CHECK(net_cap_attach(&p, dev) == 0 && p.h->gen == 5, "attach");
	T_CHECK(net_cap_put(&p, &meta, &iov, 1), "put on a running capture");
	atomic_store(&a.h->active, 0);
	T_CHECK(!net_cap_put(&p, &meta, &iov, 1), "put on a stopped capture");
	T_CHECK(net_cap_next(&a) != NULL, "the record before the stop is lost");
	net_cap_detach(&p);
	net_cap_destroy(&a, dev);
	T_CHECK(net_cap_attach(&p, dev) == -ENOENT, "a removed capture attached");
}

int main(void)
{
	snprintf(dev, sizeof(dev), "captest%d", (int)getpid());
	race();
	lifecycle();
	return t_summary();
}
