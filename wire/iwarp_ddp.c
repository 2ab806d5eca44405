/* DDP segment headers (RFC 5041 4) and RDMAP messages (RFC 5040 4).
 *
 * The first two bytes of every segment: byte 0 is DDP's (T tagged 0x80,
 * L last 0x40, four reserved bits, DV version in the low two), byte 1 the
 * RDMAP control DDP reserves for its ULP (RV version in the top two bits,
 * two reserved, opcode in the low four).  Reserved bits are sent as zero
 * and not checked on receipt (RFC 5041 4.2). */
#include "wire/iwarp.h"

#include <errno.h>
#include <string.h>

#define DDP_T 0x80
#define DDP_L 0x40

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

uint32_t iwarp_op_qn(uint8_t op)
{
	if (op == IWARP_OP_READ_REQ)
		return IWARP_QN_READ_REQ;
	if (op == IWARP_OP_TERMINATE)
		return IWARP_QN_TERMINATE;
	return IWARP_QN_SEND;
}

const char *iwarp_op_name(uint8_t op)
{
	static const char *const names[IWARP_OP_COUNT] = {
		"RDMA_WRITE", "RDMA_READ_REQUEST", "RDMA_READ_RESPONSE", "SEND",
		"SEND_INVALIDATE", "SEND_SE", "SEND_SE_INVALIDATE", "TERMINATE",
	};
	return op < IWARP_OP_COUNT ? names[op] : "UNKNOWN";
}

static int refuse(struct iwarp_term_code *err, uint8_t layer, uint8_t etype, uint8_t ecode)
{
	if (err) {
		err->layer = layer;
		err->etype = etype;
		err->ecode = ecode;
	}
	return -EPROTO;
}

/* The Terminate message after its untagged header (RFC 5040 4.8): the
 * control word, the DDP segment length if M, then the terminated headers
 * as the peer chose to copy them. */
static int decode_terminate(const uint8_t *p, size_t n, struct iwarp_hdr *h)
{
	uint32_t w;

	if (n < IWARP_TERM_CTRL_LEN)
		return -EPROTO;
	w = get32(p);
	h->term.layer = (uint8_t)(w >> 28);
	h->term.etype = (uint8_t)(w >> 24 & 0xf);
	h->term.ecode = (uint8_t)(w >> 16);
	h->term_flags = (uint16_t)(w & (IWARP_TERM_F_M | IWARP_TERM_F_D | IWARP_TERM_F_R));
	p += IWARP_TERM_CTRL_LEN;
	n -= IWARP_TERM_CTRL_LEN;
	if (h->term_flags & IWARP_TERM_F_M) {
		if (n < 2)
			return -EPROTO;
		h->term_seg_len = get16(p);
		p += 2;
		n -= 2;
	}
	h->term_hdrs = n ? p : NULL;
	h->term_hdrs_len = n;
	return 0;
}

int iwarp_hdr_decode(const uint8_t *buf, size_t len, struct iwarp_hdr *h,
		     struct iwarp_term_code *err)
{
	uint8_t ddp, rdmap;
	const uint8_t *p;
	size_t n;

	memset(h, 0, sizeof(*h));
	if (len < 2)
		return refuse(err, IWARP_LAYER_DDP, IWARP_DDP_ET_CATASTROPHIC, 0);
	ddp = buf[0];
	rdmap = buf[1];
	h->tagged = (ddp & DDP_T) != 0;
	h->last = (ddp & DDP_L) != 0;
	h->opcode = rdmap & 0x0f;
	if ((ddp & 0x03) != IWARP_DDP_VERSION)
		return h->tagged ? refuse(err, IWARP_LAYER_DDP, IWARP_DDP_ET_TAGGED,
					  IWARP_DDP_EC_T_VERSION)
				 : refuse(err, IWARP_LAYER_DDP, IWARP_DDP_ET_UNTAGGED,
					  IWARP_DDP_EC_U_VERSION);
	if ((len < IWARP_TAGGED_HDR_LEN) ||
	    (!h->tagged && len < IWARP_UNTAGGED_HDR_LEN))
		return refuse(err, IWARP_LAYER_DDP, IWARP_DDP_ET_CATASTROPHIC, 0);
	if (rdmap >> 6 != IWARP_RDMAP_VERSION)
		return refuse(err, IWARP_LAYER_RDMAP, IWARP_RDMAP_ET_OPERATION,
			      IWARP_RDMAP_EC_VERSION);
	if (h->opcode >= IWARP_OP_COUNT || h->tagged != iwarp_op_tagged(h->opcode))
		return refuse(err, IWARP_LAYER_RDMAP, IWARP_RDMAP_ET_OPERATION,
			      IWARP_RDMAP_EC_OPCODE);
	if (h->tagged) {
		h->stag = get32(buf + 2);
		h->to = get64(buf + 6);
		h->hdr_len = IWARP_TAGGED_HDR_LEN;
	} else {
		h->rsvdulp = get32(buf + 2);
		h->qn = get32(buf + 6);
		h->msn = get32(buf + 10);
		h->mo = get32(buf + 14);
		h->hdr_len = IWARP_UNTAGGED_HDR_LEN;
		if (h->qn != iwarp_op_qn(h->opcode))
			return refuse(err, IWARP_LAYER_DDP, IWARP_DDP_ET_UNTAGGED,
				      IWARP_DDP_EC_U_INVALID_QN);
	}
	p = buf + h->hdr_len;
	n = len - h->hdr_len;
	if (h->opcode == IWARP_OP_READ_REQ) {
		/* one segment, whole, at offset 0 (RFC 5040 4.4) */
		if (n != IWARP_READ_REQ_LEN || !h->last || h->mo != 0)
			return refuse(err, IWARP_LAYER_RDMAP, IWARP_RDMAP_ET_OPERATION,
				      IWARP_RDMAP_EC_UNSPECIFIED);
		h->sink_stag = get32(p);
		h->sink_to = get64(p + 4);
		h->read_size = get32(p + 12);
		h->src_stag = get32(p + 16);
		h->src_to = get64(p + 20);
		h->hdr_len += IWARP_READ_REQ_LEN;
		p += IWARP_READ_REQ_LEN;
		n = 0;
	} else if (h->opcode == IWARP_OP_TERMINATE) {
		if (!h->last || h->mo != 0 || decode_terminate(p, n, h) != 0)
			return refuse(err, IWARP_LAYER_RDMAP, IWARP_RDMAP_ET_OPERATION,
				      IWARP_RDMAP_EC_UNSPECIFIED);
		h->hdr_len = len;
		p += n;
		n = 0;
	}
	h->payload = p;
	h->payload_len = n;
	return 0;
}

int iwarp_hdr_encode(uint8_t *buf, size_t cap, const struct iwarp_hdr *h)
{
	bool tagged;
	size_t need;

	if (h->opcode >= IWARP_OP_COUNT)
		return -EINVAL;
	tagged = iwarp_op_tagged(h->opcode);
	need = tagged ? IWARP_TAGGED_HDR_LEN : IWARP_UNTAGGED_HDR_LEN;
	if (h->opcode == IWARP_OP_READ_REQ)
		need += IWARP_READ_REQ_LEN;
	if (h->opcode == IWARP_OP_TERMINATE) {
		if (h->term_hdrs_len && !h->term_hdrs)
			return -EINVAL;
		need += IWARP_TERM_CTRL_LEN + h->term_hdrs_len +
			((h->term_flags & IWARP_TERM_F_M) ? 2 : 0);
	}
	if (cap < need)
		return -EMSGSIZE;
	/* Read Requests and Terminates are single-segment messages */
	buf[0] = (uint8_t)((tagged ? DDP_T : 0) |
			   (h->last || h->opcode == IWARP_OP_READ_REQ ||
			    h->opcode == IWARP_OP_TERMINATE ? DDP_L : 0) |
			   IWARP_DDP_VERSION);
	buf[1] = (uint8_t)(IWARP_RDMAP_VERSION << 6 | h->opcode);
	if (tagged) {
		put32(buf + 2, h->stag);
		put64(buf + 6, h->to);
		return (int)need;
	}
	put32(buf + 2, h->opcode == IWARP_OP_SEND_INV || h->opcode == IWARP_OP_SEND_SE_INV
			       ? h->rsvdulp : 0);
	put32(buf + 6, iwarp_op_qn(h->opcode));
	put32(buf + 10, h->msn);
	put32(buf + 14, h->opcode == IWARP_OP_READ_REQ || h->opcode == IWARP_OP_TERMINATE
				? 0 : h->mo);
	if (h->opcode == IWARP_OP_READ_REQ) {
		uint8_t *p = buf + IWARP_UNTAGGED_HDR_LEN;

		put32(p, h->sink_stag);
		put64(p + 4, h->sink_to);
		put32(p + 12, h->read_size);
		put32(p + 16, h->src_stag);
		put64(p + 20, h->src_to);
	} else if (h->opcode == IWARP_OP_TERMINATE) {
		uint8_t *p = buf + IWARP_UNTAGGED_HDR_LEN;
		uint16_t flags = h->term_flags & (IWARP_TERM_F_M | IWARP_TERM_F_D | IWARP_TERM_F_R);

		put32(p, (uint32_t)(h->term.layer & 0xf) << 28 |
			 (uint32_t)(h->term.etype & 0xf) << 24 |
			 (uint32_t)h->term.ecode << 16 | flags);
		p += IWARP_TERM_CTRL_LEN;
		if (flags & IWARP_TERM_F_M) {
			put16(p, h->term_seg_len);
			p += 2;
		}
		if (h->term_hdrs_len)
			memcpy(p, h->term_hdrs, h->term_hdrs_len);
	}
	return (int)need;
}
