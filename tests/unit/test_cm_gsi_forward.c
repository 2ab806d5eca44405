/* The CM agent's side of the hand-over from the engine that owns port 4791
 * (transport/gsi_forward.h), white-box: cm/gsi_net.c compiled in.
 *
 * Checks: a forwarded MAD (header with the original addresses, then the
 * packet as the RoCE peer sent it) is delivered with the peer's address
 * and port 4791 as the sender (where a RoCE GSI gets its answers, whatever
 * source port it used) and the original destination as to_ip; the same
 * packet is dropped when its ICRC does not match the addresses in the
 * header, when the header's version is unknown, when it is cut short, and
 * when random bytes follow a valid header; the header codec round-trips.
 * The same for a MAD that came over IPv6 (header IP version 6), handed
 * over through the IPv4 socket as the engine does.
 */
#include "cm/addr.c"
#include "cm/gsi_net.c"

#include <poll.h>
#include <stdio.h>

#include "tests/lib/t_util.h"

int cm_debug_on;

static const uint8_t lo[4] = { 127, 0, 0, 1 }, peer_ip[4] = { 127, 0, 0, 9 };
static const uint8_t ula_me[16] = { 0xfd, 0, 0, 0x77, [15] = 1 },
		     ula_peer[16] = { 0xfd, 0, 0, 0x77, [15] = 2 };

/* A UD SEND_ONLY to QP1 carrying mad, with the ICRC for src:sport ->
 * dst:dport; returns its length. */
static int gsi_packet_fam(int family, uint8_t *out, const uint8_t mad[WIRE_MAD_LEN],
			  const uint8_t *src, uint16_t sport, const uint8_t *dst, uint16_t dport)
{
	struct wire_pkt pkt = { .opcode = WIRE_UD | WIRE_SEND_ONLY, .pkey = 0xffff,
				.dqpn = WIRE_GSI_QPN, .qkey = WIRE_GSI_QKEY,
				.sqpn = WIRE_GSI_QPN, .psn = 77 };
	struct wire_l3 l3 = { .family = family, .sport = sport, .dport = dport };
	struct iovec iov[2];
	uint32_t crc;
	int hlen = wire_encode_hdrs(out, &pkt);
	size_t alen = family == AF_INET ? 4 : 16;

	memcpy(l3.src, src, alen);
	memcpy(l3.dst, dst, alen);
	memcpy(out + hlen, mad, WIRE_MAD_LEN);
	iov[0] = (struct iovec){ out, (size_t)hlen };
	iov[1] = (struct iovec){ (void *)mad, WIRE_MAD_LEN };
	crc = wire_icrc(&l3, iov, 2);
	for (int i = 0; i < 4; i++)
		out[hlen + WIRE_MAD_LEN + i] = (uint8_t)(crc >> (8 * i));
	return hlen + WIRE_MAD_LEN + 4;
}

static int gsi_packet(uint8_t *out, const uint8_t mad[WIRE_MAD_LEN], const uint8_t src[4],
		      uint16_t sport, const uint8_t dst[4], uint16_t dport)
{
	return gsi_packet_fam(AF_INET, out, mad, src, sport, dst, dport);
}

/* Send len bytes from fd a to port; 1 if cm_gsi_recv delivers a MAD on b
 * (got, from, to_ip filled), 0 if it drops it. */
static int deliver(int a, int b, uint16_t port, const uint8_t *buf, size_t len,
		   uint8_t got[WIRE_MAD_LEN], struct cm_peer *from, uint8_t to_ip[16])
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct pollfd p = { .fd = b, .events = POLLIN };

	memcpy(&sin.sin_addr, lo, 4);
	if (sendto(a, buf, len, 0, (struct sockaddr *)&sin, sizeof(sin)) != (ssize_t)len ||
	    poll(&p, 1, 2000) != 1)
		return -1;
	return cm_gsi_recv(b, got, from, to_ip);
}

int main(void)
{
	uint8_t mad[WIRE_MAD_LEN], got[WIRE_MAD_LEN], to_ip[16], want[16];
	uint8_t buf[GSI_FWD_HDR_LEN + WIRE_MAX_HDR_LEN + WIRE_MAD_LEN + 4 + 64];
	struct gsi_fwd_hdr h = { .ip_version = 4, .src_port = 49321, .dst_port = 4791 }, h2;
	struct cm_peer from;
	uint16_t pa = 0, pb = 0;
	int a = cm_gsi_open(AF_INET, &pa), b = cm_gsi_open(AF_INET, &pb), len;

	if (a < 0 || b < 0)
		t_bail("GSI sockets: %s", strerror(a < 0 ? -a : -b));
	for (int i = 0; i < WIRE_MAD_LEN; i++)
		mad[i] = (uint8_t)t_rand();
	memcpy(h.src_ip, peer_ip, 4);
	memcpy(h.dst_ip, lo, 4);

	gsi_fwd_hdr_encode(buf, &h);
	T_OK(gsi_fwd_hdr_decode(buf, GSI_FWD_HDR_LEN, &h2) && !memcmp(&h, &h2, sizeof(h)),
	     "forwarding header round-trips");
	T_OK(!gsi_fwd_hdr_decode(buf, GSI_FWD_HDR_LEN - 1, &h2), "a short header is refused");

	/* As the engine hands it over: header + the peer's packet unchanged. */
	len = GSI_FWD_HDR_LEN + gsi_packet(buf + GSI_FWD_HDR_LEN, mad, peer_ip, h.src_port, lo,
					   h.dst_port);
	memset(&from, 0, sizeof(from));
	T_OK(deliver(a, b, pb, buf, (size_t)len, got, &from, to_ip) == 1 &&
	     !memcmp(got, mad, WIRE_MAD_LEN),
	     "a forwarded MAD is delivered intact");
	cm_ip_from_v4(want, peer_ip);
	T_OK(!memcmp(from.ip, want, 16) && from.port == 4791,
	     "its sender is the RoCE peer at port 4791 (got %u.%u.%u.%u:%u), not source port %u",
	     from.ip[12], from.ip[13], from.ip[14], from.ip[15], from.port, h.src_port);
	cm_ip_from_v4(want, lo);
	T_OK(!memcmp(to_ip, want, 16), "its destination is the address the peer sent to");

	/* A MAD that reached the engine over IPv6, handed on over IPv4. */
	{
		struct gsi_fwd_hdr h6 = { .ip_version = 6, .src_port = 49321, .dst_port = 4791 };
		char as[64];

		memcpy(h6.src_ip, ula_peer, 16);
		memcpy(h6.dst_ip, ula_me, 16);
		gsi_fwd_hdr_encode(buf, &h6);
		T_OK(gsi_fwd_hdr_decode(buf, GSI_FWD_HDR_LEN, &h2) && !memcmp(&h6, &h2, sizeof(h6)),
		     "IPv6 forwarding header round-trips");
		len = GSI_FWD_HDR_LEN + gsi_packet_fam(AF_INET6, buf + GSI_FWD_HDR_LEN, mad,
						       ula_peer, h6.src_port, ula_me, 4791);
		T_OK(deliver(a, b, pb, buf, (size_t)len, got, &from, to_ip) == 1 &&
		     !memcmp(got, mad, WIRE_MAD_LEN) && !memcmp(from.ip, ula_peer, 16) &&
		     from.port == 4791 && !memcmp(to_ip, ula_me, 16),
		     "a MAD forwarded from IPv6 is delivered from [%s]:%u",
		     cm_ip_str(from.ip, 0, as), from.port);
		buf[GSI_FWD_HDR_LEN + 20] ^= 1; /* a MAD byte: the ICRC no longer matches */
		T_OK(deliver(a, b, pb, buf, (size_t)len, got, &from, to_ip) == 0,
		     "an IPv6 MAD whose ICRC does not match is dropped");
		gsi_fwd_hdr_encode(buf, &h);
	}

	/* ICRC for other addresses than the header claims: dropped. */
	len = GSI_FWD_HDR_LEN + gsi_packet(buf + GSI_FWD_HDR_LEN, mad, lo, pa, lo, pb);
	T_OK(deliver(a, b, pb, buf, (size_t)len, got, &from, to_ip) == 0,
	     "a forwarded packet whose ICRC does not match the header's addresses is dropped");

	len = GSI_FWD_HDR_LEN + gsi_packet(buf + GSI_FWD_HDR_LEN, mad, peer_ip, h.src_port, lo,
					   h.dst_port);
	buf[4] = GSI_FWD_VERSION + 1;
	T_OK(deliver(a, b, pb, buf, (size_t)len, got, &from, to_ip) == 0,
	     "an unknown header version is dropped");
	buf[4] = GSI_FWD_VERSION;
	T_OK(deliver(a, b, pb, buf, (size_t)len - 5, got, &from, to_ip) == 0,
	     "a forwarded packet cut short is dropped");
	T_OK(deliver(a, b, pb, buf, GSI_FWD_HDR_LEN, got, &from, to_ip) == 0,
	     "a header with no packet is dropped");
	{
		int delivered = 0;

		for (int n = 0; n < 200; n++) {
			int l = GSI_FWD_HDR_LEN + (int)(t_rand() % (sizeof(buf) - GSI_FWD_HDR_LEN));

			for (int i = GSI_FWD_HDR_LEN; i < l; i++)
				buf[i] = (uint8_t)t_rand();
			delivered += deliver(a, b, pb, buf, (size_t)l, got, &from, to_ip) != 0;
		}
		T_OK(delivered == 0, "200 random packets behind a valid header: none delivered");
	}
	close(a);
	close(b);
	return t_summary();
}
