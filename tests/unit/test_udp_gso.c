/* net/udp: a batch of RoCE packets sent in one UDP GSO sendmsg
 * (net_udp_send_segs) arrives as the same packets, in order, whether the
 * receiver gets them coalesced (UDP_GRO: one buffer + segment size) or one
 * by one; each packet's ICRC, computed with its index in the send as IPv4
 * ID (docs/wire.md), verifies and yields that ID.  The one-by-one fallback
 * (GSO refused) delivers the same.  Functional only: no timing asserts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "net/udp.h"
#include "tests/lib/t_util.h"
#include "wire/wire.h"

enum { MAXSEG = 64, RXCAP = 65536, RXN = 16 };

static struct wire_l3 l3_of(const struct net_udp *from, const struct net_udp *to)
{
	struct wire_l3 l3;

	memset(&l3, 0, sizeof(l3));
	l3.family = AF_INET;
	memcpy(l3.src, from->local.ip, 4);
	memcpy(l3.dst, to->local.ip, 4);
	l3.sport = from->local.port;
	l3.dport = to->local.port;
	l3.ttl_hop = 64;
	return l3;
}

/* Packet k: 12-byte "BTH" (opcode, PSN = k), payload bytes = k + tag,
 * ICRC with IPv4 ID id.  Returns its length. */
static uint32_t make_pkt(uint8_t *p, uint32_t len, int k, int id, uint8_t tag,
			 const struct wire_l3 *l3)
{
	struct wire_l3 l = *l3;
	struct iovec iov = { p, len - WIRE_ICRC_LEN };
	uint32_t icrc;

	memset(p, (uint8_t)(k + tag), len);
	memset(p, 0, 12);
	p[0] = WIRE_WRITE_MIDDLE;
	p[2] = p[3] = 0xff;
	p[11] = (uint8_t)k;
	l.ip_id = (uint16_t)id;
	icrc = wire_icrc(&l, &iov, 1);
	p[len - 4] = (uint8_t)icrc;
	p[len - 3] = (uint8_t)(icrc >> 8);
	p[len - 2] = (uint8_t)(icrc >> 16);
	p[len - 1] = (uint8_t)(icrc >> 24);
	return len;
}

/* How the packets are handed to the socket. */
enum send_as {
	ONE_IOV,   /* each packet one iovec, one GSO send */
	SPLIT,     /* header, payload, ICRC apart, the way transport/tx.c
		    * lays them out: each ICRC right before the next header,
		    * so net/udp.c joins them (net_udp_iov_join) */
	TWO_SENDS, /* SPLIT, in two GSO sends of one sendmmsg (the second
		    * half's IPv4 IDs start again at 0) */
};

/* Send nseg packets (seg bytes, the last last_len) in one call; receive
 * them; check each.  Returns how many datagrams carried them. */
static int round_trip(struct net_udp *a, struct net_udp *b, int nseg, uint32_t seg,
		      uint32_t last_len, uint8_t tag, enum send_as as, const char *what)
{
	static uint8_t tx[MAXSEG][8192];
	static uint8_t rxbuf[RXN][RXCAP];
	static uint8_t ht[MAXSEG * 16];
	struct iovec iov[3 * MAXSEG];
	int seg_iov[MAXSEG], niov = 0, got = 0, dgrams = 0, bad_len = 0, bad_data = 0,
	    bad_icrc = 0, half = as == TWO_SENDS ? nseg / 2 : 0;
	struct wire_l3 l3 = l3_of(a, b), rl3;
	struct net_udp_msg m[RXN];
	struct timespec t0, t1;
	int ret;

	for (int k = 0; k < nseg; k++) {
		uint32_t len = k == nseg - 1 ? last_len : seg;
		uint8_t *h = ht + 16 * k;

		/* the IPv4 ID is the index in its send */
		make_pkt(tx[k], len, k, k < half ? k : k - half, tag, &l3);
		seg_iov[k] = niov;
		if (as == ONE_IOV) {
			iov[niov].iov_base = tx[k];
			iov[niov++].iov_len = len;
			continue;
		}
		memcpy(h, tx[k], 12);
		memcpy(h + 12, tx[k] + len - 4, 4);
		iov[niov].iov_base = h;
		iov[niov++].iov_len = 12;
		iov[niov].iov_base = tx[k] + 12;
		iov[niov++].iov_len = len - 16;
		iov[niov].iov_base = h + 12;
		iov[niov++].iov_len = 4;
	}
	if (as == TWO_SENDS) {
		struct net_udp_gso g[2] = {
			{ .iov0 = 0, .niov = seg_iov[half], .seg0 = 0, .nseg = half, .seg = seg },
			{ .iov0 = seg_iov[half], .niov = niov - seg_iov[half], .seg0 = half,
			  .nseg = nseg - half, .seg = seg },
		};

		ret = net_udp_send_gso(a, &b->local, iov, seg_iov, g, 2);
		T_OK(ret == 2, "%s: %d packets of %u bytes in two sends (ret %d)", what, nseg,
		     seg, ret);
	} else {
		ret = net_udp_send_segs(a, &b->local, iov, niov, seg, nseg, seg_iov);
		T_OK(ret == 0, "%s: %d packets of %u bytes in one send (ret %d)", what, nseg,
		     seg, ret);
	}

	rl3 = l3;
	rl3.ip_id = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < nseg) {
		int n;

		for (int i = 0; i < RXN; i++) {
			m[i].buf = rxbuf[i];
			m[i].cap = RXCAP;
		}
		n = net_udp_recv_batch(b, m, RXN);
		if (n < 0)
			break;
		for (int i = 0; i < n; i++) {
			uint32_t s = m[i].seg ? m[i].seg : m[i].len;

			dgrams++;
			for (uint32_t off = 0; off < m[i].len && got < nseg; off += s, got++) {
				uint32_t len = m[i].len - off < s ? m[i].len - off : s;
				uint32_t want = got == nseg - 1 ? last_len : seg;
				const uint8_t *p = m[i].buf + off;
				uint16_t id = 0xffff;

				if (len != want) {
					bad_len++;
					continue;
				}
				if (p[11] != (uint8_t)got || p[12] != (uint8_t)(got + tag))
					bad_data++;
				if (wire_icrc_verify(&rl3, p, len, &id) < 0 ||
				    id != (got < half ? got : got - half))
					bad_icrc++;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) > 2000000000L)
			break;
	}
	T_OK(got == nseg, "%s: all %d packets arrived (%d) in %d datagram(s)", what, nseg, got,
	     dgrams);
	T_OK(bad_len == 0, "%s: every packet has its length (%d wrong)", what, bad_len);
	T_OK(bad_data == 0, "%s: in order, contents intact (%d wrong)", what, bad_data);
	T_OK(bad_icrc == 0, "%s: each ICRC verifies with its index as IPv4 ID (%d wrong)",
	     what, bad_icrc);
	return dgrams;
}

/* net_udp_iov_join: neighbours that touch are joined, nothing else. */
static void iov_join_cases(void)
{
	static char m[64];
	const struct iovec in[] = {
		{ m, 4 }, { m + 4, 8 },   /* touch: joined */
		{ m + 20, 4 },            /* a gap before it */
		{ m + 24, 0 },            /* empty, touching: joined (adds nothing) */
		{ m + 24, 6 },            /* touches the empty one's end */
		{ m, 2 },                 /* goes back: apart */
		{ m + 40, 3 },
	};
	struct iovec out[8];
	int n = net_udp_iov_join(in, 7, out);

	T_OK(n == 4, "iov_join: 7 iovecs -> 4 (%d)", n);
	T_OK(n == 4 && out[0].iov_base == m && out[0].iov_len == 12 &&
	     out[1].iov_base == m + 20 && out[1].iov_len == 10 &&
	     out[2].iov_base == m && out[2].iov_len == 2 &&
	     out[3].iov_base == m + 40 && out[3].iov_len == 3,
	     "iov_join: the same bytes in the same order");
	T_OK(net_udp_iov_join(in, 0, out) == 0, "iov_join: none -> none");
}

int main(void)
{
	static const uint8_t lo[4] = { 127, 0, 0, 1 };
	struct net_udp a, b;
	int d;

	alarm(30);
	if (net_udp_open(&a, AF_INET, lo, NET_UDP_ROCE_FIRST) || net_udp_open(&b, AF_INET, lo, NET_UDP_ROCE_FIRST))
		t_skip("no UDP on 127.0.0.1");
	printf("sockets: %u -> %u, receiver GRO %s\n", a.local.port, b.local.port,
	       b.gro ? "on" : "off");

	round_trip(&a, &b, 6, 1040, 540, 1, ONE_IOV, "GSO 1040-byte packets, short last");
	d = round_trip(&a, &b, 15, 4112, 4112, 2, ONE_IOV, "GSO 15 full-MTU (4096 B) packets");
	T_OK(d >= 1 && d <= 15, "coalesced or not, at most one datagram per packet (%d)", d);
	round_trip(&a, &b, 1, 4112, 4112, 3, ONE_IOV, "a single packet");
	round_trip(&a, &b, 15, 4112, 4112, 5, SPLIT, "header, payload, ICRC apart");
	round_trip(&a, &b, 7, 1040, 300, 6, SPLIT, "apart, short last");
	round_trip(&a, &b, 12, 1040, 1040, 7, TWO_SENDS, "apart, two sends");
	a.gso_off = true; /* as after the kernel refused UDP_SEGMENT */
	d = round_trip(&a, &b, 5, 1040, 100, 4, ONE_IOV, "fallback: packet by packet");
	T_OK(d >= 1, "fallback delivered (%d datagrams)", d);
	d = round_trip(&a, &b, 5, 1040, 100, 8, SPLIT, "fallback, apart");
	T_OK(d >= 1, "fallback delivered (%d datagrams)", d);

	iov_join_cases();
	net_udp_close(&a);
	net_udp_close(&b);
	return t_summary();
}
