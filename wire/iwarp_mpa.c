/* MPA connection frames and FPDU framing (RFC 5044, RFC 6581). */
#include "wire/iwarp.h"

#include <errno.h>
#include <isa-l/crc.h>
#include <string.h>

const char iwarp_mpa_key_req[IWARP_MPA_KEY_LEN + 1] = "MPA ID Req Frame";
const char iwarp_mpa_key_rep[IWARP_MPA_KEY_LEN + 1] = "MPA ID Rep Frame";

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* ---- request / reply --------------------------------------------------- */

int iwarp_mpa_rr_decode(const uint8_t *buf, size_t len, struct iwarp_mpa_rr *rr,
			size_t *frame_len)
{
	uint16_t pd_len;
	const uint8_t *pd;

	memset(rr, 0, sizeof(*rr));
	/* A wrong key is refused as soon as its bytes are in, so a stream of
	 * FPDUs or junk never waits for a length it does not carry. */
	for (size_t i = 0; i < IWARP_MPA_KEY_LEN && i < len; i++)
		if (buf[i] != (uint8_t)iwarp_mpa_key_req[i] &&
		    buf[i] != (uint8_t)iwarp_mpa_key_rep[i])
			return -EPROTO;
	if (len < IWARP_MPA_RR_HDR_LEN)
		return -EAGAIN;
	/* the keys differ in one byte only, so what passed is one of them */
	rr->reply = memcmp(buf, iwarp_mpa_key_rep, IWARP_MPA_KEY_LEN) == 0;
	rr->flags = buf[16];
	rr->rev = buf[17];
	pd_len = get16(buf + 18);
	if (rr->rev != 1 && rr->rev != 2)
		return -EPROTO;
	if (pd_len > IWARP_MPA_PD_MAX)
		return -EMSGSIZE;
	if (len < IWARP_MPA_RR_HDR_LEN + (size_t)pd_len)
		return -EAGAIN;
	pd = buf + IWARP_MPA_RR_HDR_LEN;
	/* siw reads IRD/ORD only when the flag says they are there */
	if (rr->rev == 2 && (rr->flags & IWARP_MPA_F_ENHANCED)) {
		uint16_t ird, ord;

		if (pd_len < IWARP_MPA_V2_LEN)
			return -EPROTO;
		ird = get16(pd);
		ord = get16(pd + 2);
		rr->v2 = true;
		rr->ird = ird & IWARP_MPA_IRD_ORD_MAX;
		rr->ord = ord & IWARP_MPA_IRD_ORD_MAX;
		rr->p2p = (ird & IWARP_MPA_V2_P2P) != 0;
		rr->zero_rtr = (ird & IWARP_MPA_V2_ZERO_RTR) != 0;
		rr->write_rtr = (ord & IWARP_MPA_V2_WRITE_RTR) != 0;
		rr->read_rtr = (ord & IWARP_MPA_V2_READ_RTR) != 0;
		pd += IWARP_MPA_V2_LEN;
		pd_len -= IWARP_MPA_V2_LEN;
	}
	rr->pdata = pd_len ? pd : NULL;
	rr->pdata_len = pd_len;
	*frame_len = (size_t)(pd + pd_len - buf);
	return 0;
}

int iwarp_mpa_rr_encode(uint8_t *buf, size_t cap, const struct iwarp_mpa_rr *rr)
{
	size_t v2 = rr->v2 ? IWARP_MPA_V2_LEN : 0;
	size_t pd_len = v2 + rr->pdata_len;
	uint8_t *p;

	if ((rr->rev != 1 && rr->rev != 2) || (rr->v2 && rr->rev != 2) ||
	    (rr->pdata_len && !rr->pdata) ||
	    rr->ird > IWARP_MPA_IRD_ORD_MAX || rr->ord > IWARP_MPA_IRD_ORD_MAX)
		return -EINVAL;
	if (pd_len > IWARP_MPA_PD_MAX || cap < IWARP_MPA_RR_HDR_LEN + pd_len)
		return -EMSGSIZE;
	memcpy(buf, rr->reply ? iwarp_mpa_key_rep : iwarp_mpa_key_req, IWARP_MPA_KEY_LEN);
	buf[16] = (uint8_t)(rr->flags | (rr->v2 ? IWARP_MPA_F_ENHANCED : 0));
	buf[17] = rr->rev;
	put16(buf + 18, (uint16_t)pd_len);
	p = buf + IWARP_MPA_RR_HDR_LEN;
	if (v2) {
		put16(p, (uint16_t)(rr->ird | (rr->p2p ? IWARP_MPA_V2_P2P : 0) |
				    (rr->zero_rtr ? IWARP_MPA_V2_ZERO_RTR : 0)));
		put16(p + 2, (uint16_t)(rr->ord | (rr->write_rtr ? IWARP_MPA_V2_WRITE_RTR : 0) |
					(rr->read_rtr ? IWARP_MPA_V2_READ_RTR : 0)));
		p += IWARP_MPA_V2_LEN;
	}
	if (rr->pdata_len)
		memcpy(p, rr->pdata, rr->pdata_len);
	return (int)(IWARP_MPA_RR_HDR_LEN + pd_len);
}

int iwarp_mpa_req_acceptable(const struct iwarp_mpa_rr *req)
{
	return (req->flags & IWARP_MPA_F_MARKERS) ? -EOPNOTSUPP : 0;
}

int iwarp_mpa_marker_decode(const uint8_t *buf, size_t len, uint16_t *fpduptr)
{
	if (len < IWARP_MPA_MARKER_LEN)
		return -EAGAIN;
	*fpduptr = get16(buf + 2);
	/* FPDUPTR counts back to an FPDU's length field, which lies inside
	 * the last marker interval; anything further is not a marker. */
	if (*fpduptr > IWARP_MPA_MARKER_SPACING)
		return -EPROTO;
	return 0;
}

/* ---- FPDUs ------------------------------------------------------------- */

uint32_t iwarp_crc32c_update(uint32_t c, const uint8_t *buf, size_t len)
{
	/* isa-l takes an int length: feed it in pieces below 2 GiB. */
	while (len) {
		size_t n = len > (1u << 30) ? (1u << 30) : len;

		c = crc32_iscsi((unsigned char *)buf, (int)n, c);
		buf += n;
		len -= n;
	}
	return c;
}

uint32_t iwarp_crc32c(const uint8_t *buf, size_t len)
{
	return ~iwarp_crc32c_update(IWARP_CRC32C_INIT, buf, len);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

int iwarp_fpdu_frame(uint8_t *buf, size_t cap, size_t ulpdu_len, bool crc)
{
	size_t pad = iwarp_fpdu_pad(ulpdu_len), total = iwarp_fpdu_total(ulpdu_len);
	size_t body = IWARP_FPDU_LEN_BYTES + ulpdu_len + pad;

	if (ulpdu_len > 0xffff || cap < total)
		return -EMSGSIZE;
	put16(buf, (uint16_t)ulpdu_len);
	memset(buf + IWARP_FPDU_LEN_BYTES + ulpdu_len, 0, pad);
	put_le32(buf + body, crc ? iwarp_crc32c(buf, body) : 0);
	return (int)total;
}

int iwarp_fpdu_parse(const uint8_t *buf, size_t len, bool crc, size_t max_ulpdu,
		     const uint8_t **ulpdu, size_t *ulpdu_len, size_t *fpdu_len)
{
	size_t n, body, total;

	if (len < IWARP_FPDU_LEN_BYTES)
		return -EAGAIN;
	n = get16(buf);
	/* the smallest DDP segment is a tagged header with no payload */
	if (n < IWARP_TAGGED_HDR_LEN)
		return -EPROTO;
	if (n > max_ulpdu)
		return -EMSGSIZE;
	total = iwarp_fpdu_total(n);
	if (len < total)
		return -EAGAIN;
	body = total - IWARP_FPDU_CRC_LEN;
	if (crc && get_le32(buf + body) != iwarp_crc32c(buf, body))
		return -EBADMSG;
	*ulpdu = buf + IWARP_FPDU_LEN_BYTES;
	*ulpdu_len = n;
	*fpdu_len = total;
	return 0;
}
