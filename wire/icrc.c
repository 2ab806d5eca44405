/* ICRC: the Ethernet CRC-32 (not CRC32C) of a masked copy of the packet
 * (IBTA Vol 1 A17.3.3; facts in docs/wire.md), computed with ISA-L.
 *
 * Covered, in order: 8 bytes of ones standing for the LRH, the IP header,
 * the UDP header, BTH .. pad.  Masked to ones: IPv4 TOS, TTL, checksum;
 * IPv6 traffic class, flow label, hop limit; UDP checksum; BTH byte 4.
 *
 * The IPv4 Identification is covered but a UDP socket never shows it to the
 * receiver.  CRC is linear over GF(2), so wire_icrc_verify recovers it: the
 * difference between the received ICRC and the ICRC computed with a guessed
 * ID depends only on (real ID ^ guess) and on how many bytes follow the ID
 * field; undo those bytes' effect with one multiplication mod P and the
 * result must look like a 16-bit message, else the packet is corrupt.
 */
#include <errno.h>
#include <isa-l/crc.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "wire/wire.h"

/* The masked LRH every RoCEv2 ICRC starts with is 8 bytes of 0xff; rxe
 * seeds its CRC register with their CRC, 0xdebb20e3.  crc32_gzip_refl takes
 * and returns the inverted register (zlib semantics), hence the ~. */
#define ICRC_SEED (~0xdebb20e3u)

/* The polynomial and GF(2)[x] mod P arithmetic in the reflected bit order
 * CRC-32 uses: bit 31 is x^0, bit 0 is x^31. */
#define CRC32_POLY 0xedb88320u
#define GF_ONE 0x80000000u
#define GF_X 0x40000000u
/* x^-1 mod P: (P + 1) / x, i.e. P without its x^0 term shifted down one
 * degree, with P's x^32 becoming x^31.  The unit test checks x * x^-1 = 1. */
#define GF_X_INV ((((CRC32_POLY & ~GF_ONE) << 1) | 1u))

/* a * b mod P. */
static uint32_t gf_mul(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;

	for (uint32_t m = GF_ONE; m && a; m >>= 1) {
		if (a & m) {
			prod ^= b;
			a &= ~m;
		}
		b = (b & 1) ? (b >> 1) ^ CRC32_POLY : b >> 1;
	}
	return prod;
}

/* inv_bytes[k] = x^-(8 * 2^k) mod P: "remove 2^k trailing zero bytes". */
static uint32_t inv_bytes[32];
static pthread_once_t inv_once = PTHREAD_ONCE_INIT;

static void inv_bytes_init(void)
{
	uint32_t v = GF_X_INV;

	for (int i = 0; i < 3; i++) /* x^-1 -> x^-8 */
		v = gf_mul(v, v);
	for (int k = 0; k < 32; k++) {
		inv_bytes[k] = v;
		v = gf_mul(v, v);
	}
}

/* x^-(8 n) mod P, in O(log n) multiplications. */
static uint32_t gf_inv_bytes(uint64_t n)
{
	uint32_t r = GF_ONE;

	pthread_once(&inv_once, inv_bytes_init);
	for (int k = 0; n; k++, n >>= 1)
		if (n & 1)
			r = gf_mul(r, inv_bytes[k]);
	return r;
}

/* ISA-L's CRC runs in AVX-512 on CPUs that have it and returns with the
 * vector registers' upper halves dirty: the next SSE instruction, in
 * whatever code runs after us (a struct cleared with pxor, a memcpy),
 * then pays a state transition of ~250 cycles (measured here: 300 vs 50
 * for the first SSE instruction after a 4 KiB CRC).  That was 10 % of the
 * UDP sender's time, one per packet.  vzeroupper after the CRC ends it;
 * it is an AVX instruction, so only where the CPU has AVX. */
static bool cpu_avx;

__attribute__((constructor)) static void icrc_cpu_init(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_cpu_init();
	cpu_avx = __builtin_cpu_supports("avx");
#endif
}

static inline void vector_upper_clean(void)
{
#if defined(__x86_64__) || defined(__i386__)
	if (cpu_avx)
		__asm__ __volatile__("vzeroupper" ::: "memory");
#endif
}

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;

	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* memcpy() for the few bytes of a header or a short payload: inline
 * fixed-size moves (two that may overlap) instead of a library call per
 * iovec, which cost as much as the CRC of a small packet. */
static inline void copy_small(uint8_t *d, const uint8_t *s, size_t n)
{
	if (n >= 8 && n <= 16) {
		memcpy(d, s, 8);
		memcpy(d + n - 8, s + n - 8, 8);
	} else if (n >= 4 && n < 8) {
		memcpy(d, s, 4);
		memcpy(d + n - 4, s + n - 4, 4);
	} else if (n < 4) {
		for (size_t i = 0; i < n; i++)
			d[i] = s[i];
	} else {
		memcpy(d, s, n);
	}
}

/* The first ICRC_GATHER bytes of the packet are gathered behind the
 * pseudo-header and masked there, so a small packet (an ACK, a short
 * SEND) costs one CRC call: ISA-L's setup per call costs more than such a
 * packet's bytes (measured: ~30 cycles for 28 bytes, ~40 for 56, against
 * ~90 for the same 56 bytes in three calls).  Larger packets go on from
 * where the gather stopped, straight from their iovecs. */
enum { ICRC_GATHER = 256 };

uint32_t wire_icrc(const struct wire_l3 *l3, const struct iovec *iov, int iovcnt)
{
	uint8_t buf[48 + ICRC_GATHER];
	size_t roce_len = iov_total(iov, iovcnt) + WIRE_ICRC_LEN;
	size_t hlen = wire_l3_hdrs(buf, l3, roce_len, true);
	size_t n = hlen, off = 0;
	uint32_t crc;
	int i;

	for (i = 0; i < iovcnt; i++) {
		size_t len = iov[i].iov_len, room = ICRC_GATHER - (n - hlen);

		if (len > room) {
			/* full: the rest of this iovec and those after it
			 * go straight from where they are */
			copy_small(buf + n, iov[i].iov_base, room);
			n += room;
			off = room;
			break;
		}
		copy_small(buf + n, iov[i].iov_base, len);
		n += len;
	}
	/* BTH byte 4 (ICRC_GATHER > 4: it is always gathered) */
	if (n - hlen > 4)
		buf[hlen + 4] = 0xff;
	crc = crc32_gzip_refl(ICRC_SEED, buf, n);
	for (; i < iovcnt; i++, off = 0)
		crc = crc32_gzip_refl(crc, (const uint8_t *)iov[i].iov_base + off,
				      iov[i].iov_len - off);
	vector_upper_clean();
	return crc;
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

int wire_icrc_verify(const struct wire_l3 *l3, const uint8_t *pkt, size_t len,
		     uint16_t *id_out)
{
	struct iovec iov;
	uint32_t rx, delta, r;
	size_t after_id;

	if (len < WIRE_BTH_LEN + WIRE_ICRC_LEN)
		return -EBADMSG;
	iov.iov_base = (void *)pkt;
	iov.iov_len = len - WIRE_ICRC_LEN;
	rx = get_le32(pkt + len - WIRE_ICRC_LEN);
	delta = rx ^ wire_icrc(l3, &iov, 1);
	if (delta == 0) {
		if (id_out)
			*id_out = l3->ip_id;
		return 0;
	}
	if (l3->family != AF_INET)
		return -EBADMSG;

	/* delta = (id ^ guess) * x^32 * x^(8 * after_id) mod P, where the
	 * 2 ID bytes end at byte 6 of the IPv4 header and are followed by the
	 * rest of it (14), UDP (8) and BTH .. pad. */
	after_id = 14 + 8 + iov.iov_len;
	r = gf_mul(delta, gf_inv_bytes(after_id + 4));
	/* A 16-bit message fed first-bit-first occupies x^15..x^0, i.e. the
	 * register's top 16 bits; anything below means no ID explains it. */
	if (r & 0xffff)
		return -EBADMSG;
	if (id_out)
		*id_out = l3->ip_id ^ (uint16_t)(((r >> 16) & 0xff) << 8 | r >> 24);
	return 0;
}

/* RoCE flow-label convention (docs/wire.md): a 20-bit flow label folded to 14
 * bits, OR 0xC000.  The label is a multiplicative hash of the QPN, so
 * neighbouring QPs spread over ports (and over receive queues). */
uint16_t wire_udp_sport(uint32_t qpn)
{
	uint32_t fl = ((qpn & WIRE_PSN_MASK) * 0x9e3779b1u) >> 12;

	return (uint16_t)(0xc000 | ((fl & 0x3fff) ^ (fl >> 14)));
}
