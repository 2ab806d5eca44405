/* srn_place (transport/place.h), the copy RDMA WRITEs are placed with:
 *  - every length 0..300 at every alignment 0..15 of source and
 *    destination: the bytes arrive, and nothing outside the range moves
 *  - a poller thread waits for the last byte of each 64-byte placement,
 *    then writes its own value there at once (riostream's ping-pong):
 *    its value must survive, i.e. the placement wrote that byte once.
 *    glibc's AVX-512 memcpy of 64 bytes stores them twice and loses the
 *    poller's value now and then (it made riostream stall; this check
 *    failed 2 runs in 3 here with memcpy in place of srn_place).
 *  - a watcher thread reads a 2- and a 4-byte value while they are placed
 *    over and over with values that differ in every byte: it must never
 *    see a mix of old and new bytes (byte-by-byte stores let
 *    test_direct_path's polling target echo values nobody wrote).
 * Bounded: ROUNDS placements, each wait at most a second. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tests/lib/t_util.h"
#include "transport/place.h"

enum { ROUNDS = 20000, LEN = 64 };

static uint8_t region[LEN] __attribute__((aligned(64)));
static _Atomic int poller_done;       /* rounds the poller answered */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Round r places a buffer ending in 2r+1 (odd); the poller answers with
 * 2r+2 (even) in the same byte, as soon as it sees the odd one. */
static void *poller(void *arg)
{
	(void)arg;
	for (int r = 0; r < ROUNDS; r++) {
		uint8_t want = (uint8_t)(2 * r + 1);
		double end = now_s() + 1.0;

		while (((volatile uint8_t *)region)[LEN - 1] != want)
			if ((r & 15) == 0 && now_s() > end)
				return NULL;
		((volatile uint8_t *)region)[LEN - 1] = (uint8_t)(want + 1);
		atomic_store(&poller_done, r + 1);
	}
	return NULL;
}

static void sizes(void)
{
	uint8_t src[300 + 16], dst[300 + 32], ref[300 + 32];
	int bad = 0;

	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 7 + 3);
	for (size_t n = 0; n <= 300; n++)
		for (int so = 0; so < 16; so++)
			for (int dof = 0; dof < 16; dof++) {
				memset(dst, 0xee, sizeof(dst));
				memcpy(ref, dst, sizeof(ref));
				memcpy(ref + dof, src + so, n);
				srn_place(dst + dof, src + so, n);
				bad += memcmp(dst, ref, sizeof(dst)) != 0;
			}
	T_OK(bad == 0, "lengths 0..300 at 16x16 alignments: bytes in place, none outside "
		       "(%d wrong)", bad);
}

/* Small placements land whole: WATCH_ROUNDS placements of a value of
 * width w alternating between two that differ in every byte; the watcher
 * counts reads that are neither. */
enum { WATCH_ROUNDS = 2000000 };

static union {
	uint16_t h;
	uint32_t w;
	uint8_t line[64];              /* (srn_place may store up to 8 bytes) */
} watched __attribute__((aligned(64)));
static _Atomic int watch_on;
static _Atomic long watch_reads;

static void *watcher(void *arg)
{
	long torn = 0, reads = 0;
	int w = *(int *)arg;

	while (!atomic_load(&watch_on))
		;
	while (atomic_load_explicit(&watch_on, memory_order_relaxed) == 1) {
		uint32_t v = w == 2 ? ((volatile uint16_t *)&watched.h)[0] :
				      ((volatile uint32_t *)&watched.w)[0];

		torn += w == 2 ? v != 0x00ff && v != 0xff00 : v != 0x00ff00ffu && v != 0xff00ff00u;
		reads++;
	}
	atomic_store(&watch_reads, reads);
	return (void *)torn;
}

static void small_whole(int w)
{
	uint32_t vals[2] = { w == 2 ? 0x00ffu : 0x00ff00ffu, w == 2 ? 0xff00u : 0xff00ff00u };
	void *torn = NULL;
	pthread_t t;

	memset(&watched, 0, sizeof(watched));
	if (w == 2)
		watched.h = (uint16_t)vals[0];
	else
		watched.w = vals[0];
	atomic_store(&watch_on, 0);
	T_ASSERT(!pthread_create(&t, NULL, watcher, &w), "watcher thread");
	atomic_store(&watch_on, 1);
	for (int r = 0; r < WATCH_ROUNDS; r++)
		srn_place(watched.line, &vals[(r + 1) & 1], (size_t)w);
	atomic_store(&watch_on, 2);
	pthread_join(t, &torn);
	T_OK(torn == NULL, "%d-byte placements land whole: %ld of %ld reads saw a mix", w,
	     (long)(intptr_t)torn, atomic_load(&watch_reads));
}

int main(void)
{
	uint8_t buf[LEN];
	pthread_t t;
	int lost = 0, r;

	setvbuf(stdout, NULL, _IONBF, 0);
	sizes();
	small_whole(2);
	small_whole(4);
	memset(region, 0, sizeof(region));
	T_ASSERT(!pthread_create(&t, NULL, poller, NULL), "poller thread");
	for (r = 0; r < ROUNDS; r++) {
		double end = now_s() + 1.0;

		memset(buf, r, sizeof(buf));
		buf[LEN - 1] = (uint8_t)(2 * r + 1);
		srn_place(region, buf, LEN);
		/* the poller's answer, and it must stay */
		while (atomic_load(&poller_done) < r + 1 && now_s() < end)
			;
		if (atomic_load(&poller_done) < r + 1)
			break;
		if (((volatile uint8_t *)region)[LEN - 1] != (uint8_t)(2 * r + 2))
			lost++;
	}
	pthread_join(t, NULL);
	T_OK(r == ROUNDS, "%d of %d 64-byte placements seen and answered by the poller", r,
	     ROUNDS);
	T_OK(lost == 0, "the poller's answer to the last byte was never overwritten (%d lost)",
	     lost);
	return t_summary();
}
