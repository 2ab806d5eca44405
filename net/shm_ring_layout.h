/* net/shm_ring_layout: the bytes of an inbox file (described in the
 * header comment of net/shm_ring.c).  Apart from shm_ring.c only the
 * fuzzer of the ring reader (tests/fuzz/fuzz_shm_ring.c) reads it: it
 * plays the hostile producer that writes anything anywhere. */
#ifndef NET_SHM_RING_LAYOUT_H
#define NET_SHM_RING_LAYOUT_H

#include <stdatomic.h>
#include <stdint.h>

#include "net/shm_ring.h"

#define SHM_MAGIC 0x31584e4249524e53ull  /* "SNRIBNX1" little-endian */
#define SHM_VERSION 1u

enum {
	SHM_HEAD_BYTES = 4096,
	SHM_LANE_BYTES = 192,
	SHM_SLOTS_OFF = 16384,
};

_Static_assert((NET_SHM_SLOTS & (NET_SHM_SLOTS - 1)) == 0, "slots: power of two");
_Static_assert(NET_SHM_LANES <= 64, "one bitmap word");
_Static_assert(SHM_HEAD_BYTES + NET_SHM_LANES * SHM_LANE_BYTES <= SHM_SLOTS_OFF, "layout");
_Static_assert(NET_SHM_SLOT_BYTES % 64 == 0, "slots on cache lines");

#define SHM_BYTES ((size_t)SHM_SLOTS_OFF + \
		   (size_t)NET_SHM_LANES * NET_SHM_SLOTS * NET_SHM_SLOT_BYTES)

struct shm_head {
	_Atomic uint64_t magic;
	uint32_t version, lanes, slots, slot_bytes;
	_Atomic uint64_t owner;
	uint8_t pad0[64 - 32];
	_Atomic uint32_t sleeping;
	uint8_t pad1[64 - 4];
	_Atomic uint64_t active;             /* bit per claimed lane */
};

struct shm_lane {
	_Atomic uint64_t owner;
	uint8_t pad0[56];
	_Atomic uint32_t head;               /* producer's */
	uint8_t pad1[60];
	_Atomic uint32_t tail;               /* consumer's */
	uint8_t pad2[60];
};
_Static_assert(sizeof(struct shm_lane) == SHM_LANE_BYTES, "lane size");

struct shm_slot {
	_Atomic uint32_t len;
	uint16_t family;
	uint16_t port;
	uint8_t from_ip[16];
	uint8_t to_ip[16];
	uint16_t to_port;            /* 0: the owner's port; else the port a
				      * forwarded packet was sent to (4791) */
	uint8_t pad[NET_SHM_SLOT_HDR - 42];
	uint8_t data[];
};
_Static_assert(sizeof(struct shm_slot) == NET_SHM_SLOT_HDR, "slot header");

#endif
