/* The iWARP wire codec: MPA connection frames and FPDU framing (RFC 5044,
 * MPA v2 enhanced connection setup RFC 6581), DDP segment headers
 * (RFC 5041) and RDMAP messages (RFC 5040), as Linux siw sends them.
 * docs/iwarp.md lists the facts with their RFC sections.
 *
 * Pure functions over byte buffers: no sockets, no state.  Every decoder
 * bounds-checks what it reads and returns a negative errno:
 *   -EAGAIN   the bytes so far are a valid prefix, more are needed
 *             (MPA frames and FPDUs arrive over a TCP byte stream)
 *   -EPROTO   malformed (bad key, version, opcode, queue number, length)
 *   -EBADMSG  an FPDU whose CRC32c does not match
 *   -EMSGSIZE longer than this side accepts
 *   -EOPNOTSUPP well formed but asks for what softrnic does not do
 *             (MPA markers) */
#ifndef SRN_WIRE_IWARP_H
#define SRN_WIRE_IWARP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- MPA request / reply (RFC 5044 7.1, RFC 6581 5) -------------------- */

#define IWARP_MPA_KEY_LEN 16
#define IWARP_MPA_RR_HDR_LEN 20       /* key, flags, rev, private data length */
#define IWARP_MPA_PD_MAX 512          /* RFC 5044 7.1: private data limit */
#define IWARP_MPA_V2_LEN 4            /* RFC 6581: IRD and ORD words */
#define IWARP_MPA_IRD_ORD_MAX 0x3fff  /* 14-bit fields */

extern const char iwarp_mpa_key_req[IWARP_MPA_KEY_LEN + 1]; /* "MPA ID Req Frame" */
extern const char iwarp_mpa_key_rep[IWARP_MPA_KEY_LEN + 1]; /* "MPA ID Rep Frame" */

/* Byte 16 of the frame. */
enum {
	IWARP_MPA_F_MARKERS = 0x80,  /* M: the sender wants markers */
	IWARP_MPA_F_CRC = 0x40,      /* C: the sender wants CRC32c */
	IWARP_MPA_F_REJECT = 0x20,   /* R: reply only, connection refused */
	IWARP_MPA_F_ENHANCED = 0x10, /* siw: rev 2 and IRD/ORD follow */
	IWARP_MPA_F_GSO_EXP = 0x08,  /* siw's private experiment; ignored */
};

/* RFC 6581 5: top bits of the IRD and ORD words. */
enum {
	IWARP_MPA_V2_P2P = 0x8000,       /* IRD word: peer-to-peer mode */
	IWARP_MPA_V2_ZERO_RTR = 0x4000,  /* IRD word: zero-length SEND as RTR */
	IWARP_MPA_V2_WRITE_RTR = 0x8000, /* ORD word: zero-length WRITE as RTR */
	IWARP_MPA_V2_READ_RTR = 0x4000,  /* ORD word: zero-length READ as RTR */
};

struct iwarp_mpa_rr {
	bool reply;             /* key "Rep" (else "Req") */
	uint8_t flags;          /* byte 16 as received (IWARP_MPA_F_*) */
	uint8_t rev;            /* 1, or 2 for enhanced setup */
	bool v2;                /* IRD/ORD words present: rev 2 with the
				 * ENHANCED flag (encode sets the flag) */
	uint16_t ird, ord;      /* 14-bit values */
	bool p2p, zero_rtr, write_rtr, read_rtr;
	const uint8_t *pdata;   /* the ULP's private data (after IRD/ORD) */
	uint16_t pdata_len;
};

/* Decodes one MPA request or reply at the start of buf.  *frame_len gets
 * the bytes it spans (header + private data).  -EAGAIN until all of it is
 * there; -EPROTO for a wrong key, a revision other than 1 or 2, or
 * IRD/ORD announced without room for them; -EMSGSIZE for private data
 * over 512 bytes. */
int iwarp_mpa_rr_decode(const uint8_t *buf, size_t len, struct iwarp_mpa_rr *rr,
			size_t *frame_len);

/* Encodes rr (flags, rev, v2 fields, pdata) into buf.  The length, or
 * -EMSGSIZE (private data too long, or cap too small) / -EINVAL. */
int iwarp_mpa_rr_encode(uint8_t *buf, size_t cap, const struct iwarp_mpa_rr *rr);

/* Whether softrnic can serve a request as received: -EOPNOTSUPP if the
 * peer insists on markers (siw refuses them too), 0 otherwise. */
int iwarp_mpa_req_acceptable(const struct iwarp_mpa_rr *req);

/* A marker (RFC 5044 5): 16 reserved bits, then FPDUPTR, the distance
 * back to the FPDU's header.  Decoded only to say what a stream holds. */
#define IWARP_MPA_MARKER_LEN 4
#define IWARP_MPA_MARKER_SPACING 512
int iwarp_mpa_marker_decode(const uint8_t *buf, size_t len, uint16_t *fpduptr);

/* ---- FPDU framing (RFC 5044 4) ----------------------------------------- */

#define IWARP_FPDU_LEN_BYTES 2
#define IWARP_FPDU_CRC_LEN 4

/* Pad bytes so that length field + ULPDU + pad is a multiple of 4. */
static inline size_t iwarp_fpdu_pad(size_t ulpdu_len)
{
	return (4 - ((IWARP_FPDU_LEN_BYTES + ulpdu_len) & 3)) & 3;
}

static inline size_t iwarp_fpdu_total(size_t ulpdu_len)
{
	return IWARP_FPDU_LEN_BYTES + ulpdu_len + iwarp_fpdu_pad(ulpdu_len) +
	       IWARP_FPDU_CRC_LEN;
}

/* CRC32c (Castagnoli, reflected, ~0 in and out) of buf, the value whose
 * little-endian bytes MPA sends (RFC 3720 B.4 shows them in that order). */
uint32_t iwarp_crc32c(const uint8_t *buf, size_t len);
/* The same over pieces: state starts at IWARP_CRC32C_INIT, the CRC is
 * ~state after the last piece. */
#define IWARP_CRC32C_INIT 0xffffffffu
uint32_t iwarp_crc32c_update(uint32_t state, const uint8_t *buf, size_t len);

/* Frames an FPDU in place: the ULPDU of ulpdu_len bytes is already at
 * buf + 2.  Writes the length, zero pad and the CRC (0 without crc).
 * The FPDU's length, or -EMSGSIZE (ulpdu over 65535 or past cap). */
int iwarp_fpdu_frame(uint8_t *buf, size_t cap, size_t ulpdu_len, bool crc);

/* Parses the FPDU at the start of buf.  *ulpdu / *ulpdu_len: the DDP
 * segment; *fpdu_len: bytes to consume.  With crc the trailer is checked
 * (-EBADMSG); without, it is ignored as RFC 5044 4.4 says.  -EMSGSIZE
 * above max_ulpdu, -EPROTO below the smallest DDP header. */
int iwarp_fpdu_parse(const uint8_t *buf, size_t len, bool crc, size_t max_ulpdu,
		     const uint8_t **ulpdu, size_t *ulpdu_len, size_t *fpdu_len);

/* ---- DDP and RDMAP headers (RFC 5041 4, RFC 5040 4) -------------------- */

#define IWARP_DDP_VERSION 1
#define IWARP_RDMAP_VERSION 1
#define IWARP_TAGGED_HDR_LEN 14   /* DDP/RDMAP ctrl 2, STag 4, TO 8 */
#define IWARP_UNTAGGED_HDR_LEN 18 /* ctrl 2, RsvdULP 4, QN 4, MSN 4, MO 4 */
#define IWARP_READ_REQ_LEN 28     /* sink STag, sink TO, size, src STag, src TO */
#define IWARP_TERM_CTRL_LEN 4

/* RDMAP opcodes (RFC 5040 4.3). */
enum iwarp_opcode {
	IWARP_OP_WRITE = 0,
	IWARP_OP_READ_REQ = 1,
	IWARP_OP_READ_RESP = 2,
	IWARP_OP_SEND = 3,
	IWARP_OP_SEND_INV = 4,
	IWARP_OP_SEND_SE = 5,
	IWARP_OP_SEND_SE_INV = 6,
	IWARP_OP_TERMINATE = 7,
	IWARP_OP_COUNT = 8,
};

/* Untagged queue numbers (RFC 5040 5). */
enum { IWARP_QN_SEND = 0, IWARP_QN_READ_REQ = 1, IWARP_QN_TERMINATE = 2 };

/* Terminate layers, error types and codes (RFC 5040 7, RFC 5041 7,
 * RFC 5044 8 and RFC 6581 for the enhanced-setup LLP codes). */
enum { IWARP_LAYER_RDMAP = 0, IWARP_LAYER_DDP = 1, IWARP_LAYER_LLP = 2 };
enum {
	IWARP_RDMAP_ET_CATASTROPHIC = 0,
	IWARP_RDMAP_ET_PROTECTION = 1,
	IWARP_RDMAP_ET_OPERATION = 2,
};
enum {
	IWARP_RDMAP_EC_INVALID_STAG = 0x00,
	IWARP_RDMAP_EC_BASE_BOUNDS = 0x01,
	IWARP_RDMAP_EC_ACCESS = 0x02,
	IWARP_RDMAP_EC_STAG_NOT_ASSOC = 0x03,
	IWARP_RDMAP_EC_TO_WRAP = 0x04,
	IWARP_RDMAP_EC_VERSION = 0x05,
	IWARP_RDMAP_EC_OPCODE = 0x06,
	IWARP_RDMAP_EC_CATASTROPHIC_STREAM = 0x07,
	IWARP_RDMAP_EC_CATASTROPHIC_GLOBAL = 0x08,
	IWARP_RDMAP_EC_CANNOT_INVALIDATE = 0x09,
	IWARP_RDMAP_EC_UNSPECIFIED = 0xff,
};
enum {
	IWARP_DDP_ET_CATASTROPHIC = 0,
	IWARP_DDP_ET_TAGGED = 1,
	IWARP_DDP_ET_UNTAGGED = 2,
};
enum {
	IWARP_DDP_EC_T_INVALID_STAG = 0x00,
	IWARP_DDP_EC_T_BASE_BOUNDS = 0x01,
	IWARP_DDP_EC_T_STAG_NOT_ASSOC = 0x02,
	IWARP_DDP_EC_T_TO_WRAP = 0x03,
	IWARP_DDP_EC_T_VERSION = 0x04,
	IWARP_DDP_EC_U_INVALID_QN = 0x01,
	IWARP_DDP_EC_U_MSN_NOBUF = 0x02,
	IWARP_DDP_EC_U_MSN_RANGE = 0x03,
	IWARP_DDP_EC_U_INVALID_MO = 0x04,
	IWARP_DDP_EC_U_TOO_LONG = 0x05,
	IWARP_DDP_EC_U_VERSION = 0x06,
};
enum {
	IWARP_LLP_EC_STREAM_LOST = 0x01,
	IWARP_LLP_EC_CRC = 0x02,
	IWARP_LLP_EC_FPDU_START = 0x03,
	IWARP_LLP_EC_INVALID_REQ_REP = 0x04,
	IWARP_LLP_EC_LOCAL_CATASTROPHIC = 0x05,
	IWARP_LLP_EC_INSUFFICIENT_IRD = 0x06,
	IWARP_LLP_EC_NO_MATCHING_RTR = 0x07,
};

/* Terminate control word flags (RFC 5040 4.8). */
enum {
	IWARP_TERM_F_M = 0x8000, /* DDP segment length field follows */
	IWARP_TERM_F_D = 0x4000, /* the terminated DDP header follows */
	IWARP_TERM_F_R = 0x2000, /* the terminated RDMAP header follows */
};

/* Why a segment was refused: the Terminate to send back. */
struct iwarp_term_code {
	uint8_t layer, etype, ecode;
};

struct iwarp_hdr {
	uint8_t opcode;          /* enum iwarp_opcode */
	bool tagged, last;
	/* tagged: Write, Read Response */
	uint32_t stag;
	uint64_t to;
	/* untagged: the rest */
	uint32_t rsvdulp;        /* STag to invalidate for SEND_*INV, else 0 */
	uint32_t qn, msn, mo;
	/* Read Request (RFC 5040 4.4) */
	uint32_t sink_stag, read_size, src_stag;
	uint64_t sink_to, src_to;
	/* Terminate (RFC 5040 4.8) */
	struct iwarp_term_code term;
	uint16_t term_flags;     /* IWARP_TERM_F_* */
	uint16_t term_seg_len;   /* when F_M */
	const uint8_t *term_hdrs;/* the terminated headers (F_D / F_R), raw */
	size_t term_hdrs_len;
	/* filled by decode */
	size_t hdr_len;          /* bytes up to the payload */
	const uint8_t *payload;
	size_t payload_len;
};

/* Decodes the DDP segment (the FPDU's ULPDU).  0, or -EPROTO with *err
 * set (if err is not NULL) to the Terminate RFC 5040/5041 prescribe: bad
 * DDP version, bad RDMAP version, unknown opcode, tagged flag or queue
 * number that does not fit the opcode, short Read Request or Terminate. */
int iwarp_hdr_decode(const uint8_t *buf, size_t len, struct iwarp_hdr *h,
		     struct iwarp_term_code *err);

/* Encodes h's headers (not the payload; for Terminate the control word,
 * the segment length if F_M and term_hdrs) into buf.  The length written
 * or -EMSGSIZE / -EINVAL (unknown opcode). */
int iwarp_hdr_encode(uint8_t *buf, size_t cap, const struct iwarp_hdr *h);

/* Whether the opcode is carried in a tagged DDP segment. */
static inline bool iwarp_op_tagged(uint8_t op)
{
	return op == IWARP_OP_WRITE || op == IWARP_OP_READ_RESP;
}

/* The untagged queue an opcode goes to (meaningless for tagged ones). */
uint32_t iwarp_op_qn(uint8_t op);

const char *iwarp_op_name(uint8_t op);

#endif
