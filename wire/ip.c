/* The IP and UDP headers around a RoCE packet, rebuilt from struct wire_l3.
 * One builder serves two readers: the ICRC (which covers these headers with
 * some fields masked to ones) and the pcap writer (which wants what the
 * kernel would really have sent).  IPv4: RFC 791; IPv6: RFC 8200. */
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "wire/wire.h"

enum { IP4_LEN = 20, IP6_LEN = 40, UDP_LEN = 8, IP_TTL_DEFAULT = 64 };

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t ip4_checksum(const uint8_t *h)
{
	uint32_t sum = 0;

	for (int i = 0; i < IP4_LEN; i += 2)
		sum += (uint32_t)h[i] << 8 | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

size_t wire_l3_hdrs(uint8_t *out, const struct wire_l3 *l3, size_t roce_len,
		    bool icrc_mask)
{
	uint8_t ttl = icrc_mask ? 0xff : (l3->ttl_hop ? l3->ttl_hop : IP_TTL_DEFAULT);
	size_t udp_len = UDP_LEN + roce_len;
	size_t ip_len;
	uint8_t *udp;

	if (l3->family == AF_INET) {
		ip_len = IP4_LEN;
		memset(out, 0, IP4_LEN);
		out[0] = 0x45;                          /* version 4, IHL 5 */
		out[1] = icrc_mask ? 0xff : 0;          /* TOS */
		put16(out + 2, (uint16_t)(IP4_LEN + udp_len));
		put16(out + 4, l3->ip_id);              /* covered by the ICRC */
		put16(out + 6, 0x4000);                 /* DF, as rxe and Linux send */
		out[8] = ttl;
		out[9] = IPPROTO_UDP;
		memcpy(out + 12, l3->src, 4);
		memcpy(out + 16, l3->dst, 4);
		put16(out + 10, icrc_mask ? 0xffff : ip4_checksum(out));
	} else if (l3->family == AF_INET6) {
		ip_len = IP6_LEN;
		/* version 6; traffic class and flow label masked or 0 */
		out[0] = icrc_mask ? 0x6f : 0x60;
		memset(out + 1, icrc_mask ? 0xff : 0, 3);
		put16(out + 4, (uint16_t)udp_len);
		out[6] = IPPROTO_UDP;
		out[7] = ttl;
		memcpy(out + 8, l3->src, 16);
		memcpy(out + 24, l3->dst, 16);
	} else {
		return 0;
	}
	udp = out + ip_len;
	put16(udp, l3->sport);
	put16(udp + 2, l3->dport);
	put16(udp + 4, (uint16_t)udp_len);
	/* rxe sends checksum 0; the ICRC sees it as all ones */
	put16(udp + 6, icrc_mask ? 0xffff : 0);
	return ip_len + UDP_LEN;
}
