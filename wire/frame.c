/* Whole frames around RoCE packets: only for captures (pcap writing, the
 * test vectors).  The data path never sees an Ethernet or IP header: a UDP
 * socket strips them. */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "wire/wire.h"

enum {
	ETH_HLEN_ = 14,
	VLAN_HLEN = 4,
	ETHERTYPE_IPV4 = 0x0800,
	ETHERTYPE_IPV6 = 0x86dd,
	ETHERTYPE_VLAN = 0x8100,
	LINKTYPE_ETHERNET = 1,
	LINKTYPE_RAW = 101,
	ROCE_V2_PORT = 4791,
};

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* Parse the UDP header at udp (avail bytes up to the end of the IP
 * payload) into l3 ports and the RoCE bounds. */
static int parse_udp(const uint8_t *udp, size_t avail, struct wire_l3 *l3,
		     const uint8_t **roce, size_t *roce_len)
{
	size_t ulen;

	if (avail < 8)
		return -EBADMSG;
	l3->sport = get16(udp);
	l3->dport = get16(udp + 2);
	ulen = get16(udp + 4);
	if (l3->dport != ROCE_V2_PORT)
		return -ENOENT;
	if (ulen < 8 || ulen > avail)
		return -EBADMSG;
	*roce = udp + 8;
	*roce_len = ulen - 8;
	return 0;
}

static int parse_ip(const uint8_t *ip, size_t len, struct wire_l3 *l3,
		    const uint8_t **roce, size_t *roce_len)
{
	size_t ihl, tot;

	if (len < 1)
		return -EBADMSG;
	switch (ip[0] >> 4) {
	case 4:
		if (len < 20)
			return -EBADMSG;
		ihl = (size_t)(ip[0] & 0xf) * 4;
		tot = get16(ip + 2);
		if (ihl < 20 || tot < ihl || tot > len)
			return -EBADMSG;
		if (ip[9] != IPPROTO_UDP)
			return -ENOENT;
		/* A fragment is not a whole RoCE packet (MF or offset set). */
		if (get16(ip + 6) & 0x3fff)
			return -ENOENT;
		l3->family = AF_INET;
		l3->ip_id = get16(ip + 4);
		l3->ttl_hop = ip[8];
		memcpy(l3->src, ip + 12, 4);
		memcpy(l3->dst, ip + 16, 4);
		return parse_udp(ip + ihl, tot - ihl, l3, roce, roce_len);
	case 6:
		if (len < 40)
			return -EBADMSG;
		tot = 40 + (size_t)get16(ip + 4);
		if (tot > len)
			return -EBADMSG;
		if (ip[6] != IPPROTO_UDP) /* extension headers: not supported */
			return -ENOENT;
		l3->family = AF_INET6;
		l3->ip_id = 0;
		l3->ttl_hop = ip[7];
		memcpy(l3->src, ip + 8, 16);
		memcpy(l3->dst, ip + 24, 16);
		return parse_udp(ip + 40, tot - 40, l3, roce, roce_len);
	default:
		return -ENOENT;
	}
}

int wire_frame_parse(const uint8_t *frame, size_t len, int linktype,
		     struct wire_l3 *l3, const uint8_t **roce, size_t *roce_len)
{
	size_t off = 12;
	uint16_t type;

	memset(l3, 0, sizeof(*l3));
	if (linktype == LINKTYPE_RAW)
		return parse_ip(frame, len, l3, roce, roce_len);
	if (linktype != LINKTYPE_ETHERNET)
		return -ENOENT;
	if (len < ETH_HLEN_)
		return -EBADMSG;
	type = get16(frame + off);
	off += 2;
	if (type == ETHERTYPE_VLAN) {
		if (len < ETH_HLEN_ + VLAN_HLEN)
			return -EBADMSG;
		type = get16(frame + off + 2);
		off += VLAN_HLEN;
	}
	if (type != ETHERTYPE_IPV4 && type != ETHERTYPE_IPV6)
		return -ENOENT;
	/* Ethernet pads short frames to 60 bytes: the IP length bounds the
	 * packet, never the frame length. */
	return parse_ip(frame + off, len - off, l3, roce, roce_len);
}

/* Locally administered MAC carrying the address's last 4 bytes, so a
 * capture's conversations read naturally. */
static void fake_mac(uint8_t *mac, const struct wire_l3 *l3, const uint8_t *addr)
{
	size_t alen = l3->family == AF_INET ? 4 : 16;

	mac[0] = 0x02;
	mac[1] = 0x00;
	memcpy(mac + 2, addr + alen - 4, 4);
}

size_t wire_frame_build(uint8_t *out, const struct wire_l3 *l3, size_t roce_len)
{
	size_t n;

	fake_mac(out, l3, l3->dst);
	fake_mac(out + 6, l3, l3->src);
	out[12] = (l3->family == AF_INET6 ? ETHERTYPE_IPV6 : ETHERTYPE_IPV4) >> 8;
	out[13] = (l3->family == AF_INET6 ? ETHERTYPE_IPV6 : ETHERTYPE_IPV4) & 0xff;
	n = wire_l3_hdrs(out + ETH_HLEN_, l3, roce_len, false);
	return n ? ETH_HLEN_ + n : 0;
}
