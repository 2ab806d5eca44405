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
 */
#include "cm/gsi_net.c"

#include <poll.h>
#include <stdio.h>

#include "tests/lib/t_util.h"

int cm_debug_on;

static const uint8_t lo[4] = { 127, 0, 0, 1 }, peer_ip[4] = { 127, 0, 0, 9 };

/* A UD SEND_ONLY to QP1 carrying mad, with the ICRC for src:sport ->
 * dst:dport; returns its length. */
static int gsi_packet(uint8_t *out, const uint8_t mad[WIRE_MAD_LEN], const uint8_t src[4],
		      uint16_t sport, const uint8_t dst[4], uint16_t dport)
{
	struct wire_pkt pkt = { .opcode = WIRE_UD | WIRE_SEND_ONLY, .pkey = 0xffff,
				.dqpn = WIRE_GSI_QPN, .qkey = WIRE_GSI_QKEY,
				.sqpn = WIRE_GSI_QPN, .psn = 77 };
	struct wire_l3 l3 = { .family = AF_INET, .sport = sport, .dport = dport };
	struct iovec iov[2];
	uint32_t crc;
	int hlen = wire_encode_hdrs(out, &pkt);

	memcpy(l3.src, src, 4);
	memcpy(l3.dst, dst, 4);
	memcpy(out + hlen, mad, WIRE_MAD_LEN);
	iov[0] = (struct iovec){ out, (size_t)hlen };
	iov[1] = (struct iovec){ (void *)mad, WIRE_MAD_LEN };
	crc = wire_icrc(&l3, iov, 2);
	for (int i = 0; i < 4; i++)
		out[hlen + WIRE_MAD_LEN + i] = (uint8_t)(crc >> (8 * i));
	return hlen + WIRE_MAD_LEN + 4;
}

/* Send len bytes from fd a to port; 1 if cm_gsi_recv delivers a MAD on b
 * (got, from, to_ip filled), 0 if it drops it. */
static int deliver(int a, int b, uint16_t port, const uint8_t *buf, size_t len,
		   uint8_t got[WIRE_MAD_LEN], struct cm_peer *from, uint8_t to_ip[4])
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
	uint8_t mad[WIRE_MAD_LEN], got[WIRE_MAD_LEN], to_ip[4];
	uint8_t buf[GSI_FWD_HDR_LEN + WIRE_MAX_HDR_LEN + WIRE_MAD_LEN + 4 + 64];
	struct gsi_fwd_hdr h = { .src_port = 49321, .dst_port = 4791 }, h2;
	struct cm_peer from;
	uint16_t pa, pb;
	int a = cm_gsi_open(&pa), b = cm_gsi_open(&pb), len;

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
	T_OK(!memcmp(from.ip, peer_ip, 4) && from.port == 4791,
	     "its sender is the RoCE peer at port 4791 (got %u.%u.%u.%u:%u), not source port %u",
	     from.ip[0], from.ip[1], from.ip[2], from.ip[3], from.port, h.src_port);
	T_OK(!memcmp(to_ip, lo, 4), "its destination is the address the peer sent to");

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
