/* ICRC on synthetic packets: the seed fact, iovec-split invariance, the
 * IPv4-ID solve (every one of the 65536 IDs, many lengths, random guesses),
 * its false-accept rate on corrupted packets (~2^-16 expected), IPv6, the
 * rebuilt IP/UDP headers, and the UDP source port hash. */
#include <errno.h>
#include <isa-l/crc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "tests/lib/t_util.h"
#include "wire/wire.h"

static struct wire_l3 t_l3_v4(uint16_t id)
{
	struct wire_l3 l3 = { .family = AF_INET, .ip_id = id, .sport = 0xc123, .dport = 4791 };

	memcpy(l3.src, (uint8_t[]){ 10, 0, 0, 1 }, 4);
	memcpy(l3.dst, (uint8_t[]){ 10, 0, 0, 2 }, 4);
	return l3;
}

/* A RC SEND_ONLY of payload_len bytes with a correct ICRC for l3; returns
 * the packet length. */
static size_t t_make_pkt(uint8_t *buf, const struct wire_l3 *l3, uint32_t payload_len)
{
	struct wire_pkt p = { .opcode = WIRE_RC | WIRE_SEND_ONLY, .pkey = 0xffff,
			      .dqpn = 0x11, .psn = t_rand() & WIRE_PSN_MASK,
			      .padcnt = wire_padcnt(payload_len), .ackreq = true };
	size_t n = (size_t)wire_encode_hdrs(buf, &p);
	struct iovec iov;
	uint32_t icrc;

	for (uint32_t i = 0; i < payload_len; i++)
		buf[n++] = (uint8_t)t_rand();
	memset(buf + n, 0, p.padcnt);
	n += p.padcnt;
	iov = (struct iovec){ buf, n };
	icrc = wire_icrc(l3, &iov, 1);
	for (int i = 0; i < 4; i++)
		buf[n++] = (uint8_t)(icrc >> (8 * i));
	return n;
}

static void test_seed(void)
{
	uint8_t ff[8];

	memset(ff, 0xff, sizeof(ff));
	printf("seed: CRC-32 of 8 x 0xff register is 0xdebb20e3 (docs/wire.md)\n");
	T_CHECK(crc32_gzip_refl(0, ff, 8) == ~0xdebb20e3u, "seed");
}

static void test_iov_split(void)
{
	uint8_t buf[600];
	struct wire_l3 l3 = t_l3_v4(7);
	size_t n = t_make_pkt(buf, &l3, 517) - WIRE_ICRC_LEN;
	struct iovec one = { buf, n };
	uint32_t want = wire_icrc(&l3, &one, 1);

	printf("iovec splits: every 1- and 2-cut split of a 529-byte packet\n");
	for (size_t a = 0; a <= n; a++) {
		struct iovec two[3] = { { buf, a }, { NULL, 0 }, { buf + a, n - a } };

		T_CHECK(wire_icrc(&l3, two, 3) == want, "split at %zu", a);
		if (a > 40)
			continue;
		for (size_t b = a; b <= 40; b++) {
			struct iovec three[3] = { { buf, a }, { buf + a, b - a },
						  { buf + b, n - b } };

			T_CHECK(wire_icrc(&l3, three, 3) == want, "split at %zu,%zu", a, b);
		}
	}
}

static void test_id_solve(void)
{
	uint8_t buf[9100];
	struct wire_l3 l3 = t_l3_v4(0);
	size_t n = t_make_pkt(buf, &l3, 64);
	unsigned found = 0, accepted = 0;
	uint16_t id;
	int rc;

	printf("ID solve: all 65536 IDs on a 76-byte packet, guess 0\n");
	for (uint32_t real = 0; real < 65536; real++) {
		struct wire_l3 sent = t_l3_v4((uint16_t)real);
		struct iovec iov = { buf, n - 4 };
		uint32_t icrc = wire_icrc(&sent, &iov, 1);

		for (int i = 0; i < 4; i++)
			buf[n - 4 + i] = (uint8_t)(icrc >> (8 * i));
		rc = wire_icrc_verify(&l3, buf, n, &id);
		if (rc == 0 && id == real)
			found++;
	}
	T_CHECK(found == 65536, "found %u of 65536 IDs", found);

	printf("ID solve: 2000 packets of 0..9000 bytes, random IDs and guesses\n");
	found = 0;
	for (int i = 0; i < 2000; i++) {
		uint16_t real = (uint16_t)t_rand();
		struct wire_l3 sent = t_l3_v4(real), guess = t_l3_v4((uint16_t)t_rand());
		uint32_t len = i < 1000 ? (uint32_t)i : t_rand() % 9001;

		n = t_make_pkt(buf, &sent, len);
		rc = wire_icrc_verify(&guess, buf, n, &id);
		if (rc == 0 && id == real)
			found++;
	}
	T_CHECK(found == 2000, "found %u of 2000", found);

	printf("false accepts: 50000 packets with one random covered bit flipped\n");
	for (int i = 0; i < 50000; i++) {
		struct wire_l3 sent = t_l3_v4((uint16_t)t_rand());
		size_t bit;

		n = t_make_pkt(buf, &sent, t_rand() % 300);
		do /* BTH byte 4 is masked: flipping it is no corruption */
			bit = t_rand() % (n * 8);
		while (bit / 8 == 4);
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		if (wire_icrc_verify(&l3, buf, n, &id) == 0)
			accepted++;
	}
	/* at most 50000 / 65536 = 0.76 expected; 6 or more is p < 1e-4 */
	printf("  %u accepted (chance at most 2^-16 each)\n", accepted);
	T_CHECK(accepted <= 5, "%u corrupted packets accepted", accepted);

	/* A random ICRC is explained by some ID with probability 2^-16: the
	 * solve leaves a 16-bit check, no more. */
	printf("false accepts: 200000 random ICRCs\n");
	accepted = 0;
	n = t_make_pkt(buf, &l3, 200);
	for (int i = 0; i < 200000; i++) {
		uint32_t v = t_rand() ^ t_rand() << 16;

		memcpy(buf + n - 4, &v, 4);
		if (wire_icrc_verify(&l3, buf, n, &id) == 0)
			accepted++;
	}
	/* 200000 / 65536 = 3.05 expected; 12 or more is p < 1e-4. */
	printf("  %u accepted (expected about 3)\n", accepted);
	T_CHECK(accepted <= 11, "%u random ICRCs accepted", accepted);
}

static void test_ipv6(void)
{
	struct wire_l3 l3 = { .family = AF_INET6, .sport = 0xc001, .dport = 4791 };
	uint8_t buf[300];
	size_t n;

	printf("IPv6: verify accepts, and rejects a flipped bit or address\n");
	memset(l3.src, 0, 16);
	l3.src[15] = 1;
	memcpy(l3.dst, l3.src, 16);
	l3.dst[0] = 0xfe;
	n = t_make_pkt(buf, &l3, 100);
	T_CHECK(wire_icrc_verify(&l3, buf, n, NULL) == 0, "v6 verify");
	l3.ip_id = 1234; /* no such field in IPv6: must not matter */
	T_CHECK(wire_icrc_verify(&l3, buf, n, NULL) == 0, "v6 verify ignores ip_id");
	l3.dst[1] ^= 1;
	T_CHECK(wire_icrc_verify(&l3, buf, n, NULL) == -EBADMSG, "v6 wrong address");
	l3.dst[1] ^= 1;
	buf[20] ^= 4;
	T_CHECK(wire_icrc_verify(&l3, buf, n, NULL) == -EBADMSG, "v6 flipped bit");
	T_CHECK(wire_icrc_verify(&l3, buf, 15, NULL) == -EBADMSG, "v6 too short");
}

static void test_l3_hdrs(void)
{
	struct wire_l3 l3 = t_l3_v4(0x1234);
	uint8_t h[48];
	uint32_t sum = 0;
	size_t n;

	printf("IP/UDP headers: lengths from the RoCE length, IPv4 checksum valid\n");
	l3.ttl_hop = 0;
	n = wire_l3_hdrs(h, &l3, 1000, false);
	T_CHECK(n == 28, "v4 length %zu", n);
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)h[i] << 8 | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	T_CHECK(sum == 0xffff, "IPv4 checksum");
	T_CHECK((h[2] << 8 | h[3]) == 1028 && (h[24] << 8 | h[25]) == 1008, "v4 lengths");
	T_CHECK(h[8] == 64 && h[6] == 0x40 && h[26] == 0 && h[27] == 0, "TTL 64, DF, csum 0");
	T_CHECK((h[4] << 8 | h[5]) == 0x1234 && (h[22] << 8 | h[23]) == 4791, "id, dport");
	n = wire_l3_hdrs(h, &l3, 1000, true);
	T_CHECK(n == 28 && h[1] == 0xff && h[8] == 0xff && h[10] == 0xff && h[11] == 0xff &&
		      h[26] == 0xff && h[27] == 0xff,
		"ICRC mask v4");
	l3.family = AF_INET6;
	n = wire_l3_hdrs(h, &l3, 1000, true);
	T_CHECK(n == 48 && h[0] == 0x6f && h[1] == 0xff && h[2] == 0xff && h[3] == 0xff &&
		      h[7] == 0xff && (h[4] << 8 | h[5]) == 1008 && h[6] == 17,
		"ICRC mask v6");
	l3.family = 12345;
	T_CHECK(wire_l3_hdrs(h, &l3, 1000, true) == 0, "bad family");
}

static void test_sport(void)
{
	static uint8_t seen[16384];
	unsigned distinct = 0;

	printf("UDP source port: 0xC000 | 14 bits, spread over QPNs\n");
	for (uint32_t qpn = 0; qpn < 4096; qpn++) {
		uint16_t p = wire_udp_sport(qpn);

		T_CHECK((p & 0xc000) == 0xc000, "qpn %u port %x", qpn, p);
		T_CHECK(p == wire_udp_sport(qpn), "stable");
		if (!seen[p & 0x3fff]++)
			distinct++;
	}
	printf("  %u distinct ports for 4096 QPNs\n", distinct);
	T_CHECK(distinct > 3000, "poor spread: %u", distinct);
}

static void test_speed(void)
{
	uint8_t buf[4200];
	struct wire_l3 sent = t_l3_v4(4321), guess = t_l3_v4(0);
	size_t n = t_make_pkt(buf, &sent, 4096);
	struct timespec a, b;
	uint16_t id = 0;
	double crc_ns, solve_ns;
	struct iovec iov = { buf, n - 4 };

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < 2000; i++)
		(void)wire_icrc(&sent, &iov, 1);
	clock_gettime(CLOCK_MONOTONIC, &b);
	crc_ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 2000;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < 2000; i++)
		(void)wire_icrc_verify(&guess, buf, n, &id);
	clock_gettime(CLOCK_MONOTONIC, &b);
	solve_ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 2000;
	printf("cost (4 KiB packet, informational): ICRC %.0f ns, verify with ID solve %.0f ns\n",
	       crc_ns, solve_ns);
	T_CHECK(id == 4321, "speed loop id");
}

int main(void)
{
	t_rand_seed(0x9e3779b97f4a7c15ull);
	test_seed();
	test_iov_split();
	test_id_solve();
	test_ipv6();
	test_l3_hdrs();
	test_sport();
	test_speed();
	return t_summary();
}
