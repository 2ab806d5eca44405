/* libFuzzer target for the iWARP codec (wire/iwarp.h): a byte stream as a
 * TCP peer would send it, cut into MPA request/reply, FPDUs (CRC on or
 * off) and DDP/RDMAP headers.  The first input byte picks the mode.
 * Invariants, checked with abort(): every answer is a documented error or
 * a decode that lies inside the input and re-encodes to the same bytes
 * (reserved bits aside), and a stream walk always makes progress. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/iwarp.h"

static void check_hdr(const uint8_t *buf, size_t len)
{
	struct iwarp_hdr h;
	struct iwarp_term_code err;
	uint8_t out[IWARP_UNTAGGED_HDR_LEN + IWARP_READ_REQ_LEN + 1024];
	int rc = iwarp_hdr_decode(buf, len, &h, &err);
	int n;

	if (rc == -EPROTO)
		return;
	if (rc != 0 || h.hdr_len > len || h.payload + h.payload_len != buf + len ||
	    (h.term_hdrs && h.term_hdrs + h.term_hdrs_len > buf + len))
		abort();
	n = iwarp_hdr_encode(out, sizeof(out), &h);
	if (n == -EMSGSIZE && h.hdr_len > sizeof(out))
		return;
	if (n != (int)h.hdr_len)
		abort();
	/* byte 0's reserved bits, and RsvdULP of opcodes that do not use it,
	 * are not kept; everything else must come back */
	if ((out[0] & 0xc3) != (buf[0] & 0xc3) || (out[1] & 0xcf) != (buf[1] & 0xcf))
		abort();
	for (int i = h.tagged ? 2 : 6; i < n; i++) {
		if (h.opcode == IWARP_OP_TERMINATE && i >= IWARP_UNTAGGED_HDR_LEN &&
		    i < IWARP_UNTAGGED_HDR_LEN + 4)
			continue; /* the control word's reserved bits */
		if (out[i] != buf[i])
			abort();
	}
}

static void walk_stream(const uint8_t *buf, size_t len, bool crc)
{
	size_t off = 0;

	for (int i = 0; i < 4096 && off < len; i++) {
		const uint8_t *u;
		size_t ul, fl;
		int rc = iwarp_fpdu_parse(buf + off, len - off, crc, 65535, &u, &ul, &fl);

		if (rc == -EAGAIN || rc == -EPROTO || rc == -EBADMSG)
			return;
		if (rc != 0 || fl == 0 || fl > len - off || u + ul > buf + len)
			abort();
		check_hdr(u, ul);
		off += fl;
	}
}

static void check_mpa(const uint8_t *buf, size_t len)
{
	struct iwarp_mpa_rr rr;
	uint8_t out[IWARP_MPA_RR_HDR_LEN + IWARP_MPA_PD_MAX];
	size_t fl;
	int rc = iwarp_mpa_rr_decode(buf, len, &rr, &fl);

	if (rc == -EAGAIN || rc == -EPROTO || rc == -EMSGSIZE)
		return;
	if (rc != 0 || fl > len || (rr.pdata && rr.pdata + rr.pdata_len > buf + len))
		abort();
	(void)iwarp_mpa_req_acceptable(&rr);
	if (iwarp_mpa_rr_encode(out, sizeof(out), &rr) != (int)fl || memcmp(out, buf, fl) != 0)
		abort();
	walk_stream(buf + fl, len - fl, (rr.flags & IWARP_MPA_F_CRC) != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	if (size < 1)
		return 0;
	copy = malloc(size - 1 ? size - 1 : 1); /* exact size: ASan sees overreads */
	memcpy(copy, data + 1, size - 1);
	switch (data[0] % 4) {
	case 0:
		check_mpa(copy, size - 1);
		break;
	case 1:
		walk_stream(copy, size - 1, false);
		break;
	case 2:
		walk_stream(copy, size - 1, true);
		break;
	default:
		check_hdr(copy, size - 1);
		break;
	}
	free(copy);
	return 0;
}
