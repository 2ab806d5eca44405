/* transport/place: copying an RDMA WRITE's bytes into memory the target
 * application may be polling while they land.
 *
 * Applications wait for a WRITE by spinning on its last byte (perftest,
 * riostream), then often write that same byte themselves (riostream's
 * next marker).  A NIC writes each byte once, in address order.  memcpy
 * does neither: glibc's AVX-512 copy of exactly 64 bytes stores the same
 * 64 bytes twice, so a poller can see the new last byte after the first
 * store, write its own, and have it overwritten by the second (seen:
 * riostream's ping-pong stalled, each side waiting for a byte the other
 * had sent); and a copy may store its end before its start.
 *
 * srn_place copies all but the last 8 bytes with memcpy, then the last 8
 * with a single store, after a release fence: the tail lands once, and
 * last.  Only the body may be stored twice, never a byte the poller is
 * waiting for at the end.  Shorter writes go in as few stores as their
 * length allows (4, 2, 1 bytes, in address order): a 2- or 4-byte value
 * lands whole, as from a NIC, never half old and half new (byte stores
 * showed a polling target values nobody wrote, test_direct_path's
 * ping-pong now and then). */
#ifndef TRANSPORT_PLACE_H
#define TRANSPORT_PLACE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint64_t __attribute__((aligned(1), may_alias)) srn_u64_unaligned;
typedef uint32_t __attribute__((aligned(1), may_alias)) srn_u32_unaligned;
typedef uint16_t __attribute__((aligned(1), may_alias)) srn_u16_unaligned;

static inline void srn_place(void *dst, const void *src, size_t n)
{
	size_t body = n > 8 ? n - 8 : 0;
	const uint8_t *s = (const uint8_t *)src + body;
	uint8_t *d = (uint8_t *)dst + body;

	if (body)
		memcpy(dst, src, body);
	atomic_thread_fence(memory_order_release);
	if (n >= 8) {
		uint64_t v;

		memcpy(&v, s, 8);
		*(volatile srn_u64_unaligned *)d = v;
	} else {
		size_t i = 0;

		if (n - i >= 4) {
			uint32_t v;

			memcpy(&v, s + i, 4);
			*(volatile srn_u32_unaligned *)(d + i) = v;
			i += 4;
		}
		if (n - i >= 2) {
			uint16_t v;

			memcpy(&v, s + i, 2);
			*(volatile srn_u16_unaligned *)(d + i) = v;
			i += 2;
		}
		if (n - i >= 1)
			((volatile uint8_t *)d)[i] = s[i];
	}
}

#endif
