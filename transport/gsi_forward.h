/* transport/gsi_forward: MADs from the network to this host's CM agents.
 *
 * A RoCE peer (the Linux kernel's rdma_cm over Soft-RoCE or a RoCE NIC, or
 * softrnic on another host) sends its CM MADs as UD packets to QP1 at UDP
 * port 4791.  On a softrnic host that port belongs to the first verbs
 * engine, while each process's CM agent (librdmacm, cm/agent.c) receives
 * on its own UDP port.  The engine that gets a QP1 packet hands it to the
 * agent it belongs to, found in the host-wide CM directory
 * (net/cm_dir.h): a REQ / SIDR_REQ goes to the listener of its service id
 * and address, the other messages to the agent named by the top bits of
 * the local communication id they carry.
 *
 * The hand-over is one UDP datagram from the engine's socket to the
 * agent's port: a small header with the packet's original addresses (so
 * the agent checks the ICRC as sent and answers the peer at its port
 * 4791), then the packet unchanged.  The header is layout-only so both
 * libraries (libibverbs sends, librdmacm parses) share it.
 */
#ifndef TRANSPORT_GSI_FORWARD_H
#define TRANSPORT_GSI_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/mad.h"   /* WIRE_GSI_QPN, the MAD this is about */

enum {
	GSI_FWD_HDR_LEN = 44,
	GSI_FWD_VERSION = 2,         /* 2: IPv6 addresses (1 had IPv4 only) */
};

/* "SRNF": 0x53 as a BTH opcode is an RD opcode, never the UD SEND_ONLY a
 * MAD travels in, so a forwarded datagram cannot be taken for a packet. */
#define GSI_FWD_MAGIC "SRNF"

/* Where the forwarded packet came from and went to (ports in host
 * order); IPv4 addresses in the first 4 bytes, as in struct net_addr. */
struct gsi_fwd_hdr {
	uint8_t ip_version;          /* 4 or 6 */
	uint8_t src_ip[16], dst_ip[16];
	uint16_t src_port, dst_port;
};

/* Header bytes: magic (4) | version (1) | IP version (1) | reserved (2) |
 * source IP (16) | destination IP (16) | source port (2) | destination
 * port (2). */
static inline void gsi_fwd_hdr_encode(uint8_t out[GSI_FWD_HDR_LEN],
				      const struct gsi_fwd_hdr *h)
{
	memset(out, 0, GSI_FWD_HDR_LEN);
	memcpy(out, GSI_FWD_MAGIC, 4);
	out[4] = GSI_FWD_VERSION;
	out[5] = h->ip_version;
	memcpy(out + 8, h->src_ip, 16);
	memcpy(out + 24, h->dst_ip, 16);
	out[40] = (uint8_t)(h->src_port >> 8);
	out[41] = (uint8_t)h->src_port;
	out[42] = (uint8_t)(h->dst_port >> 8);
	out[43] = (uint8_t)h->dst_port;
}

/* True (and *h filled) if buf starts with a forwarding header. */
static inline bool gsi_fwd_hdr_decode(const uint8_t *buf, size_t len,
				      struct gsi_fwd_hdr *h)
{
	if (len < GSI_FWD_HDR_LEN || memcmp(buf, GSI_FWD_MAGIC, 4) ||
	    buf[4] != GSI_FWD_VERSION || (buf[5] != 4 && buf[5] != 6))
		return false;
	h->ip_version = buf[5];
	memcpy(h->src_ip, buf + 8, 16);
	memcpy(h->dst_ip, buf + 24, 16);
	h->src_port = (uint16_t)(buf[40] << 8 | buf[41]);
	h->dst_port = (uint16_t)(buf[42] << 8 | buf[43]);
	return true;
}

struct srn_engine;
struct net_udp_msg;
struct wire_pkt;

/* The engine received pkt (decoded, ICRC checked, destination QP1) in m:
 * hand it to its CM agent, or drop it (counted).  Never blocks long: one
 * directory read and one send. */
void srn_gsi_forward(struct srn_engine *eng, const struct wire_pkt *pkt,
		     const struct net_udp_msg *m);

#endif
