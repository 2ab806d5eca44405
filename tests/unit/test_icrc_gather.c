/* wire_icrc gathers a packet's first bytes behind the pseudo-header and
 * runs one CRC call over them (then the rest straight from the iovecs).
 * Checks it against a reference built the slow, obvious way: the whole
 * masked pseudo-packet laid out by hand (8 x 0xff for the LRH, IP and UDP
 * headers with the masked fields all ones, BTH with byte 4 all ones, the
 * rest) and its CRC-32 computed bit by bit, independent of ISA-L; and
 * against ISA-L over the same buffer.  Random lengths 0..300 (both sides
 * of the gather limit), random contents, random iovec splits including
 * empty iovecs, IPv4 and IPv6; then wire_icrc_verify on such packets with
 * the right and a wrong IPv4 ID guess.  And on x86 CPUs that report it
 * (XGETBV with ECX=1), that wire_icrc leaves the vector registers' upper
 * halves unused: ISA-L's AVX-512 CRC left them dirty, and the next SSE
 * instruction in softrnic paid ~250 cycles for it, once per packet. */
#include <isa-l/crc.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "tests/lib/t_util.h"
#include "wire/wire.h"

enum { MAX_LEN = 300, MAX_IOV = 6 };

/* CRC-32 (Ethernet, reflected, zlib conventions), one bit at a time. */
static uint32_t crc_bitwise(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
	}
	return ~c;
}

static void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* The masked pseudo-packet for a RoCE packet of len bytes (ICRC
 * excluded) at pkt, as IBTA A17.3.3 / docs/wire.md list the masks. */
static size_t ref_layout(uint8_t *out, const struct wire_l3 *l3, const uint8_t *pkt,
			 size_t len)
{
	size_t udp_len = 8 + len + WIRE_ICRC_LEN, n = 0;

	memset(out, 0xff, 8); /* LRH */
	n = 8;
	if (l3->family == AF_INET) {
		uint8_t *ip = out + n;

		memset(ip, 0, 20);
		ip[0] = 0x45;
		ip[1] = 0xff;                    /* TOS */
		put16(ip + 2, (uint32_t)(20 + udp_len));
		put16(ip + 4, l3->ip_id);
		put16(ip + 6, 0x4000);           /* DF */
		ip[8] = 0xff;                    /* TTL */
		ip[9] = 17;
		ip[10] = ip[11] = 0xff;          /* checksum */
		memcpy(ip + 12, l3->src, 4);
		memcpy(ip + 16, l3->dst, 4);
		n += 20;
	} else {
		uint8_t *ip = out + n;

		ip[0] = 0x6f;                    /* version, traffic class */
		ip[1] = ip[2] = ip[3] = 0xff;    /* traffic class, flow label */
		put16(ip + 4, (uint32_t)udp_len);
		ip[6] = 17;
		ip[7] = 0xff;                    /* hop limit */
		memcpy(ip + 8, l3->src, 16);
		memcpy(ip + 24, l3->dst, 16);
		n += 40;
	}
	put16(out + n, l3->sport);
	put16(out + n + 2, l3->dport);
	put16(out + n + 4, (uint32_t)udp_len);
	out[n + 6] = out[n + 7] = 0xff;          /* UDP checksum */
	n += 8;
	memcpy(out + n, pkt, len);
	if (len > 4)
		out[n + 4] = 0xff;               /* BTH byte 4 */
	return n + len;
}

static struct wire_l3 rand_l3(bool v6)
{
	struct wire_l3 l3;

	memset(&l3, 0, sizeof(l3));
	l3.family = v6 ? AF_INET6 : AF_INET;
	for (int i = 0; i < 16; i++) {
		l3.src[i] = (uint8_t)t_rand();
		l3.dst[i] = (uint8_t)t_rand();
	}
	l3.ip_id = v6 ? 0 : (uint16_t)t_rand();
	l3.sport = (uint16_t)t_rand();
	l3.dport = (uint16_t)t_rand();
	return l3;
}

/* Cut [0, len) into up to MAX_IOV pieces at random points (empty pieces
 * allowed, with a NULL base as a caller may give them). */
static int rand_split(uint8_t *pkt, size_t len, struct iovec *iov)
{
	int n = 1 + (int)(t_rand() % MAX_IOV);
	size_t at = 0;

	for (int i = 0; i < n; i++) {
		size_t take = i == n - 1 ? len - at : (len - at ? t_rand() % (len - at + 1) : 0);

		iov[i].iov_base = take ? pkt + at : NULL;
		iov[i].iov_len = take;
		at += take;
	}
	return n;
}

static void test_against_reference(void)
{
	uint8_t pkt[MAX_LEN], ref[8 + 40 + 8 + MAX_LEN];
	int bad_ref = 0, bad_isal = 0, bad_split = 0;

	printf("wire_icrc = bitwise CRC of the hand-built masked layout = ISA-L over it,\n"
	       "  lengths 0..%d, random contents and splits, IPv4 and IPv6\n", MAX_LEN);
	for (int round = 0; round < 4; round++) {
		for (size_t len = 0; len <= MAX_LEN; len++) {
			bool v6 = (len + (size_t)round) & 1;
			struct wire_l3 l3 = rand_l3(v6);
			struct iovec one = { pkt, len }, iov[MAX_IOV];
			size_t rn;
			uint32_t want, got;
			int niov;

			for (size_t i = 0; i < len; i++)
				pkt[i] = (uint8_t)t_rand();
			rn = ref_layout(ref, &l3, pkt, len);
			/* the LRH is the seed: the CRC starts over 8 x 0xff */
			want = crc_bitwise(ref, rn);
			got = wire_icrc(&l3, &one, 1);
			bad_ref += got != want;
			T_CHECK(got == want, "len %zu v6 %d: 0x%08x want 0x%08x", len, v6, got, want);
			bad_isal += crc32_gzip_refl(0, ref, rn) != want;
			niov = rand_split(pkt, len, iov);
			got = wire_icrc(&l3, iov, niov);
			bad_split += got != want;
			T_CHECK(got == want, "len %zu split in %d: 0x%08x want 0x%08x", len, niov,
				got, want);
		}
	}
	T_CHECK(bad_isal == 0, "ISA-L disagrees with the bitwise CRC %d times", bad_isal);
	printf("  mismatches: reference %d, split %d, ISA-L %d\n", bad_ref, bad_split, bad_isal);
}

static void test_verify(void)
{
	uint8_t pkt[MAX_LEN + WIRE_ICRC_LEN];
	int bad = 0;

	printf("wire_icrc_verify on packets of 12..%d bytes: right ID guess, wrong guess "
	       "(solved), one flipped bit (rejected, bar the 2^-16 chance)\n", MAX_LEN);
	for (size_t len = WIRE_BTH_LEN; len <= MAX_LEN; len++) {
		struct wire_l3 l3 = rand_l3(false);
		struct iovec one = { pkt, len };
		uint16_t real = l3.ip_id, id = 0;
		uint32_t icrc;
		size_t at;

		for (size_t i = 0; i < len; i++)
			pkt[i] = (uint8_t)t_rand();
		icrc = wire_icrc(&l3, &one, 1);
		for (int i = 0; i < 4; i++)
			pkt[len + (size_t)i] = (uint8_t)(icrc >> (8 * i));
		T_CHECK(wire_icrc_verify(&l3, pkt, len + 4, &id) == 0 && id == real,
			"len %zu right guess", len);
		l3.ip_id = (uint16_t)(real ^ (1 + t_rand() % 0xffff));
		id = 0;
		T_CHECK(wire_icrc_verify(&l3, pkt, len + 4, &id) == 0 && id == real,
			"len %zu wrong guess: id %u want %u", len, id, real);
		/* (not BTH byte 4: masked, a flip there is invisible) */
		at = t_rand() % len;
		pkt[at == 4 ? 5 : at] ^= (uint8_t)(1u << (t_rand() % 8));
		bad += wire_icrc_verify(&l3, pkt, len + 4, NULL) == 0;
	}
	/* ~0.005 expected */
	T_CHECK(bad <= 1, "%d corrupted packets accepted", bad);
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* XINUSE bits 2 (upper halves of YMM0-15) and 6 (upper halves of
 * ZMM0-15), or -1 where the CPU cannot tell. */
static long vector_upper_in_use(void)
{
	unsigned int a, b, c, d, lo, hi;

	if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & (1u << 2)))
		return -1;
	__asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
	(void)hi;
	return lo & ((1u << 2) | (1u << 6));
}

static void test_upper_clean(void)
{
	static uint8_t pay[4096];
	struct iovec iov = { pay, sizeof(pay) };
	struct wire_l3 l3;
	long before;

	memset(&l3, 0, sizeof(l3));
	l3.family = AF_INET;
	/* dirty the upper halves ourselves first (where AVX is there) */
	if (__builtin_cpu_supports("avx"))
		__asm__ __volatile__("vpcmpeqd %%ymm1, %%ymm1, %%ymm1" ::: "xmm1");
	before = vector_upper_in_use();
	if (before < 0) {
		printf("skip - XGETBV(1) not available: upper-state check not run\n");
		return;
	}
	(void)wire_icrc(&l3, &iov, 1);
	T_OK(vector_upper_in_use() == 0,
	     "wire_icrc of 4 KiB leaves the vector registers' upper halves clean "
	     "(XINUSE before %#lx, after %#lx)", before, vector_upper_in_use());
}
#else
static void test_upper_clean(void)
{
}
#endif

int main(void)
{
	t_rand_seed(0x1cc7a11e5ull);
	test_against_reference();
	test_verify();
	test_upper_clean();
	return t_summary();
}
