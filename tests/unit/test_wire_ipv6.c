/* Kernel Soft-RoCE over IPv6 (tests/vectors/rxe-rc-send-ipv6.pcap), each
 * packet rebuilt from what a receiver knows (addresses, ports, hop limit,
 * the decoded BTH and extension headers, the payload): IPv6 and UDP
 * headers as the kernel wrote them, the RoCE headers, pad and the ICRC
 * over the IPv6 pseudo-header must equal the captured bytes exactly.  A
 * flipped bit in a field the ICRC covers must fail the check, one in a
 * field it masks (traffic class, flow label, hop limit) must not. */
#include <sys/socket.h>

#include "t_wire_vectors.h"
#include "tests/lib/t_util.h"

enum { IP6_LEN = 40, UDP_LEN = 8 };

struct counts {
	unsigned pkts, v6, masked_ok, covered_bad;
};

/* Where the IPv6 header starts in the captured frame. */
static const uint8_t *ip_start(const struct t_vec_pkt *p)
{
	return p->roce - UDP_LEN - IP6_LEN;
}

static void check(const struct t_vec_pkt *p, void *arg)
{
	struct counts *c = arg;
	uint8_t frame[T_FRAME_MAX], hdrs[WIRE_MAX_HDR_LEN];
	struct wire_pkt pkt;
	struct wire_l3 l3;
	struct iovec iov;
	size_t n, body;
	uint32_t icrc;
	int hlen;

	c->pkts++;
	if (p->l3.family != AF_INET6)
		return;
	c->v6++;
	T_CHECK(p->roce >= p->frame + IP6_LEN + UDP_LEN, "#%u: headers inside the frame",
		p->index);
	T_CHECK(wire_decode(p->roce, p->roce_len, &pkt) == 0, "#%u: decodes", p->index);
	hlen = wire_encode_hdrs(hdrs, &pkt);
	T_CHECK(hlen > 0, "#%u: encodes", p->index);
	if (hlen <= 0)
		return;

	/* the receiver's view: only addresses, ports and the hop limit */
	memset(&l3, 0, sizeof(l3));
	l3.family = AF_INET6;
	memcpy(l3.src, p->l3.src, 16);
	memcpy(l3.dst, p->l3.dst, 16);
	l3.sport = p->l3.sport;
	l3.dport = p->l3.dport;
	l3.ttl_hop = p->l3.ttl_hop;
	n = wire_l3_hdrs(frame, &l3, p->roce_len, false);
	T_CHECK(n == IP6_LEN + UDP_LEN, "#%u: IPv6 + UDP is %zu bytes", p->index, n);
	memcpy(frame + n, hdrs, (size_t)hlen);
	body = (size_t)hlen;
	memcpy(frame + n + body, pkt.payload, pkt.payload_len);
	body += pkt.payload_len;
	memset(frame + n + body, 0, pkt.padcnt);
	body += pkt.padcnt;
	iov.iov_base = frame + n;
	iov.iov_len = body;
	icrc = wire_icrc(&l3, &iov, 1);
	for (int i = 0; i < 4; i++)
		frame[n + body + (size_t)i] = (uint8_t)(icrc >> (8 * i));
	body += WIRE_ICRC_LEN;
	T_CHECK(n + body == IP6_LEN + UDP_LEN + p->roce_len &&
		!memcmp(frame, ip_start(p), n + body),
		"#%u: %s rebuilt byte for byte (%zu bytes, ICRC %08x)", p->index,
		wire_opcodes[pkt.opcode].name, n + body, icrc);

	/* masked fields: traffic class, flow label, hop limit change nothing */
	l3.ttl_hop = (uint8_t)(l3.ttl_hop ^ 0x5a);
	if (wire_icrc_verify(&l3, p->roce, p->roce_len, NULL) == 0)
		c->masked_ok++;
	/* a covered one: the source address's last byte */
	l3.src[15] ^= 1;
	if (wire_icrc_verify(&l3, p->roce, p->roce_len, NULL) != 0)
		c->covered_bad++;
}

int main(void)
{
	static const char file[] = "rxe-rc-send-ipv6.pcap";
	struct counts c = { 0 };
	int n = t_vector_each(file, check, &c);

	if (n < 0)
		t_bail("cannot read %s in %s (set SRN_SOURCE)", file, t_vectors_dir());
	printf("%s: %u RoCEv2 packets, %u over IPv6; %u verify with the hop limit changed, "
	       "%u fail with the source changed\n", file, c.pkts, c.v6, c.masked_ok, c.covered_bad);
	/* tests/vectors/README.md: 40 packets */
	T_CHECK(c.pkts == 40 && c.v6 == 40, "40 IPv6 packets (%u of %u)", c.v6, c.pkts);
	T_CHECK(c.masked_ok == c.v6, "hop limit is masked (%u of %u)", c.masked_ok, c.v6);
	T_CHECK(c.covered_bad == c.v6, "source address is covered (%u of %u)", c.covered_bad,
		c.v6);
	return t_summary();
}
