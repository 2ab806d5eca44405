/* wire/: the RoCEv2 packet codec.  Pure functions: no I/O, no allocation,
 * every function safe on hostile input (fuzzable).
 *
 * A "RoCE packet" here is what follows the UDP header: BTH, extension
 * headers, payload, pad, ICRC.  Facts: docs/wire.md, IBTA Vol 1 ch. 9.
 */
#ifndef WIRE_H
#define WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

enum {
	WIRE_BTH_LEN = 12,
	WIRE_DETH_LEN = 8,
	WIRE_RETH_LEN = 16,
	WIRE_ATMETH_LEN = 28,
	WIRE_AETH_LEN = 4,
	WIRE_ATMACK_LEN = 8,
	WIRE_IMMDT_LEN = 4,
	WIRE_IETH_LEN = 4,
	WIRE_XRCETH_LEN = 4,
	WIRE_ICRC_LEN = 4,
	WIRE_GRH_LEN = 40,
	WIRE_MAX_HDR_LEN = WIRE_BTH_LEN + WIRE_ATMETH_LEN + WIRE_DETH_LEN + WIRE_IMMDT_LEN,
};

/* Capability bits of an opcode: the state machines test these, not opcodes. */
enum wire_cap {
	WIRE_HAS_RETH = 1u << 0,
	WIRE_HAS_AETH = 1u << 1,
	WIRE_HAS_ATMETH = 1u << 2,
	WIRE_HAS_ATMACK = 1u << 3,
	WIRE_HAS_IMMDT = 1u << 4,
	WIRE_HAS_DETH = 1u << 5,
	WIRE_HAS_IETH = 1u << 6,
	WIRE_HAS_PAYLOAD = 1u << 7,  /* may carry payload bytes */
	WIRE_IS_REQ = 1u << 8,       /* requester -> responder */
	WIRE_IS_RESP = 1u << 9,      /* responder -> requester (ACK, read resp) */
	WIRE_IS_SEND = 1u << 10,
	WIRE_IS_WRITE = 1u << 11,
	WIRE_IS_READ = 1u << 12,     /* read request or read response */
	WIRE_IS_ATOMIC = 1u << 13,   /* atomic request or atomic ack */
	WIRE_IS_FIRST = 1u << 14,
	WIRE_IS_MIDDLE = 1u << 15,
	WIRE_IS_LAST = 1u << 16,     /* ONLY opcodes are FIRST|LAST */
	WIRE_IS_ACK = 1u << 17,      /* ACKNOWLEDGE */
	WIRE_IS_ATOMIC_WRITE = 1u << 18, /* RDMA ATOMIC WRITE (IBTA 1.5) */
	WIRE_HAS_XRCETH = 1u << 19,  /* XRC request: the target SRQ number */
};

/* Transport service in the opcode's top 3 bits. */
enum wire_service {
	WIRE_RC = 0x00,
	WIRE_UC = 0x20,
	WIRE_RD = 0x40,
	WIRE_UD = 0x60,
	WIRE_XRC = 0xa0,             /* eXtended RC (IBTA Vol 1 Annex A14) */
};

/* Low 5 bits of the opcode (IBTA Table 36). */
enum wire_op {
	WIRE_SEND_FIRST = 0x00,
	WIRE_SEND_MIDDLE = 0x01,
	WIRE_SEND_LAST = 0x02,
	WIRE_SEND_LAST_IMM = 0x03,
	WIRE_SEND_ONLY = 0x04,
	WIRE_SEND_ONLY_IMM = 0x05,
	WIRE_WRITE_FIRST = 0x06,
	WIRE_WRITE_MIDDLE = 0x07,
	WIRE_WRITE_LAST = 0x08,
	WIRE_WRITE_LAST_IMM = 0x09,
	WIRE_WRITE_ONLY = 0x0a,
	WIRE_WRITE_ONLY_IMM = 0x0b,
	WIRE_READ_REQ = 0x0c,
	WIRE_READ_RESP_FIRST = 0x0d,
	WIRE_READ_RESP_MIDDLE = 0x0e,
	WIRE_READ_RESP_LAST = 0x0f,
	WIRE_READ_RESP_ONLY = 0x10,
	WIRE_ACK = 0x11,
	WIRE_ATOMIC_ACK = 0x12,
	WIRE_CMP_SWAP = 0x13,
	WIRE_FETCH_ADD = 0x14,
	WIRE_SEND_LAST_INV = 0x16,
	WIRE_SEND_ONLY_INV = 0x17,
	WIRE_ATOMIC_WRITE = 0x1d,    /* RETH + exactly 8 bytes of payload */
};

struct wire_opcode_info {
	const char *name;            /* e.g. "RC SEND_FIRST"; NULL = invalid */
	uint32_t caps;               /* enum wire_cap bits */
	uint8_t hdr_len;             /* BTH + all extension headers */
	/* offset from the BTH start of each extension header, 0 = absent */
	uint8_t off_reth, off_aeth, off_atmeth, off_atmack, off_immdt, off_deth, off_ieth,
		off_xrceth;
};

/* The table, indexed by the full 8-bit opcode. */
extern const struct wire_opcode_info wire_opcodes[256];

/* AETH syndromes (docs/wire.md). */
enum {
	WIRE_AETH_ACK = 0x00,        /* | credit count (0x1f = unlimited) */
	WIRE_AETH_RNR_NAK = 0x20,    /* | 5-bit RNR timer code */
	WIRE_AETH_NAK_PSN_SEQ = 0x60,
	WIRE_AETH_NAK_INV_REQ = 0x61,
	WIRE_AETH_NAK_REM_ACCESS = 0x62,
	WIRE_AETH_NAK_REM_OP = 0x63,
	WIRE_AETH_NAK_INV_RD_REQ = 0x64,
};

/* A decoded packet: host-order values; payload points into the buffer. */
struct wire_pkt {
	uint8_t opcode;
	bool se, mig;
	uint8_t padcnt, tver;
	uint16_t pkey;
	uint8_t resv8;               /* BTH byte 4 (FECN/BECN/reserved) */
	uint32_t dqpn;               /* 24 bits */
	bool ackreq;
	uint8_t resv7;               /* reserved bits beside AckReq */
	uint32_t psn;                /* 24 bits */
	/* RETH / AtomicETH */
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len;
	uint64_t swap_add, compare;
	/* AETH */
	uint8_t syndrome;
	uint32_t msn;                /* 24 bits */
	/* AtomicAckETH */
	uint64_t orig;
	/* ImmDt: kept in network order, as ibv_wc.imm_data wants it */
	uint32_t imm_be;
	/* IETH: host order, like ibv_wc.invalidated_rkey */
	uint32_t ieth_rkey;
	/* XRCETH: the XRC SRQ number (24 bits) */
	uint32_t xrcsrq;
	/* DETH */
	uint32_t qkey;
	uint32_t sqpn;               /* 24 bits */
	/* payload (excludes pad and ICRC) */
	const uint8_t *payload;
	uint32_t payload_len;
	uint32_t icrc;               /* as on the wire, decoded little-endian */
};

/* Zero every member of pkt: what memset() does, minus its cost on this
 * struct (see codec.c).  Padding bytes are left as they are. */
void wire_pkt_clear(struct wire_pkt *pkt);

/* Decode a RoCE packet of len bytes (BTH .. ICRC inclusive).  Checks the
 * opcode is known, headers and pad fit, TVer is 0, and that opcodes without
 * payload (ACK, READ_REQ, atomics) have nothing after their headers.  Does
 * not check the ICRC (see wire_icrc_*).  Never reads outside buf[0..len).
 * Returns 0 or -EBADMSG (pkt is then unspecified). */
int wire_decode(const uint8_t *buf, size_t len, struct wire_pkt *pkt);

/* Encode BTH and the extension headers the opcode carries, from pkt.
 * Returns the header length (wire_opcodes[op].hdr_len), or -EINVAL for an
 * invalid opcode.  out must hold WIRE_MAX_HDR_LEN bytes: all of them are
 * written (zeros after the headers), so put the payload after encoding.
 * padcnt in pkt is written as given (use wire_padcnt()). */
int wire_encode_hdrs(uint8_t *out, const struct wire_pkt *pkt);

static inline uint8_t wire_padcnt(uint32_t payload_len)
{
	return (uint8_t)((4 - (payload_len & 3)) & 3);
}

/* ---- ICRC --------------------------------------------------------------- */

/* What the ICRC covers outside the RoCE packet: IP and UDP headers, which
 * a UDP socket neither takes from us nor shows us, so they are rebuilt. */
struct wire_l3 {
	int family;                  /* AF_INET or AF_INET6 */
	uint8_t src[16], dst[16];    /* IPv4 uses the first 4 bytes */
	uint16_t ip_id;              /* IPv4 identification (covered!) */
	uint16_t sport, dport;       /* UDP ports, host order */
	uint8_t ttl_hop;             /* only for building frames (pcap) */
};

/* ICRC of a RoCE packet given as an iovec list covering BTH .. end of pad
 * (the ICRC itself excluded).  Masks the fields docs/wire.md lists.  The value
 * is what goes on the wire little-endian in the last 4 bytes. */
uint32_t wire_icrc(const struct wire_l3 *l3, const struct iovec *iov, int iovcnt);

/* Verify a received packet (BTH .. ICRC, len bytes) whose IPv4 ID is
 * unknown to us (UDP sockets hide it).  Tries l3->ip_id first, then solves
 * for the ID by CRC linearity (one extra ~32-step GF(2) multiply per set bit
 * of the length, no second CRC pass).  Returns 0 and sets *id_out (may be
 * NULL) when some 16-bit ID makes the ICRC match, -EBADMSG otherwise: so
 * for IPv4 the ICRC is a 16-bit check, a random packet passes with chance
 * 2^-16.  For IPv6 it is the full 32-bit check.  Put the found ID in the
 * l3 given to net_pcap_write, so captures of received packets verify. */
int wire_icrc_verify(const struct wire_l3 *l3, const uint8_t *pkt, size_t len,
		     uint16_t *id_out);

/* Write the IP and UDP headers that carry a RoCE packet of roce_len bytes
 * (BTH .. ICRC inclusive): IPv4 (20 bytes, DF, no options) or IPv6 (40),
 * then UDP (8).  With icrc_mask, the fields the ICRC does not cover are all
 * ones (the ICRC's pseudo header); otherwise they are what the kernel sends
 * (TOS 0, TTL l3->ttl_hop or 64, valid IPv4 checksum, UDP checksum 0).
 * out must hold 48 bytes.  Returns the length written, 0 for a bad family. */
size_t wire_l3_hdrs(uint8_t *out, const struct wire_l3 *l3, size_t roce_len,
		    bool icrc_mask);

/* ---- frames (for pcap and the test vectors) ------------------------------ */

/* Locate the RoCE packet inside an Ethernet (linktype 1) or raw-IP
 * (linktype 101) frame; fills l3 (including ip_id) and the RoCE bounds.
 * Returns 0, or -ENOENT if it is not UDP port 4791, -EBADMSG if truncated. */
int wire_frame_parse(const uint8_t *frame, size_t len, int linktype,
		     struct wire_l3 *l3, const uint8_t **roce, size_t *roce_len);

/* Build Ethernet + IP + UDP headers in front of a RoCE packet of roce_len
 * bytes, as the kernel would send it (DF, TTL 64, UDP checksum 0).
 * Returns the header length written to out (<= WIRE_FRAME_HDR_MAX), 0 if
 * l3->family is neither AF_INET nor AF_INET6.  MACs are fake (02:00 + the
 * address's last 4 bytes). */
enum { WIRE_FRAME_HDR_MAX = 14 + 40 + 8 };
size_t wire_frame_build(uint8_t *out, const struct wire_l3 *l3, size_t roce_len);

/* ---- PSN arithmetic (24 bits) ------------------------------------------- */

#define WIRE_PSN_MASK 0xffffffu

static inline uint32_t wire_psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & WIRE_PSN_MASK;
}

/* Signed distance a - b in the 24-bit circle: < 0 means a is before b. */
static inline int32_t wire_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

/* UDP source port for a QP: 0xC000 | 14-bit hash (RoCE flow label convention). */
uint16_t wire_udp_sport(uint32_t qpn);

#endif
