/* net/clock: the monotonic clocks every layer reads (vDSO, no system
 * call).  The coarse one has a few ms resolution but costs no counter
 * read: enough for liveness and "recently" checks on hot paths. */
#ifndef NET_CLOCK_H
#define NET_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t net_clock_ns(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static inline uint64_t net_now_ns(void)
{
	return net_clock_ns(CLOCK_MONOTONIC);
}

static inline uint64_t net_coarse_ns(void)
{
	return net_clock_ns(CLOCK_MONOTONIC_COARSE);
}

#endif
