/* The iWARP codec (wire/iwarp.h) against hand-assembled vectors: CRC32c
 * known answers from RFC 3720 B.4, an MPA v2 request and reply and a v1
 * reject, a Write and a Read Request FPDU (CRCs from an independent
 * bitwise CRC32c), a Terminate; then hostile input: every truncation,
 * flipped bytes and garbage, in buffers malloc'd to their exact length so
 * a sanitized build catches any read past the end.  Last, frames Linux
 * siw (6.1) sent in the interop bed (tests/interop, phase iwarp). */
#include <errno.h>
#include <string.h>

#include "tests/lib/t_util.h"
#include "wire/iwarp.h"

/* ---- vectors ----------------------------------------------------------- */

static const uint8_t mpa_req_v2[] = {
	'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e',
	0x50, 0x02, 0x00, 0x07,  /* C | ENHANCED, rev 2, 7 bytes of private data */
	0x80, 0x10, 0x40, 0x10,  /* IRD 16 + peer-to-peer, ORD 16 + READ RTR */
	'a', 'b', 'c',
};

static const uint8_t mpa_rep_v2[] = {
	'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e',
	0x50, 0x02, 0x00, 0x04, /* C | ENHANCED, rev 2 */
	0x00, 0x08, 0x00, 0x04, /* IRD 8, ORD 4, no RTR */
};

static const uint8_t mpa_rep_reject_v1[] = {
	'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e',
	0x20, 0x01, 0x00, 0x02, 'n', 'o',
};

/* RDMA Write of "hello" to STag 0x12345678, TO 0x100002000, with CRC. */
static const uint8_t fpdu_write[] = {
	0x00, 0x13,                                     /* ULPDU length 19 */
	0xc1, 0x40,                                     /* T L DV=1 | RV=1 op 0 */
	0x12, 0x34, 0x56, 0x78,                         /* STag */
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x20, 0x00, /* TO */
	'h', 'e', 'l', 'l', 'o',
	0x00, 0x00, 0x00,                               /* pad to 4 */
	0xfb, 0xcc, 0x0b, 0xe9,                         /* CRC32c, LE */
};

/* RDMA Read Request: 0x2000 bytes from (0x11223344, 0xfeedface00000000)
 * into (0xaabbccdd, 0x1000), MSN 1. */
static const uint8_t fpdu_rreq[] = {
	0x00, 0x2e,                                     /* ULPDU length 46 */
	0x41, 0x41,                                     /* L DV=1 | RV=1 op 1 */
	0x00, 0x00, 0x00, 0x00,                         /* RsvdULP */
	0x00, 0x00, 0x00, 0x01,                         /* QN 1 */
	0x00, 0x00, 0x00, 0x01,                         /* MSN 1 */
	0x00, 0x00, 0x00, 0x00,                         /* MO 0 */
	0xaa, 0xbb, 0xcc, 0xdd,                         /* sink STag */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, /* sink TO */
	0x00, 0x00, 0x20, 0x00,                         /* size */
	0x11, 0x22, 0x33, 0x44,                         /* source STag */
	0xfe, 0xed, 0xfa, 0xce, 0x00, 0x00, 0x00, 0x00, /* source TO */
	0xe0, 0x40, 0x79, 0x92,                         /* CRC32c, LE */
};

static uint8_t *dup_exact(const uint8_t *src, size_t len)
{
	uint8_t *p = malloc(len ? len : 1);

	if (!p)
		t_bail("out of memory");
	memcpy(p, src, len);
	return p;
}

/* ---- CRC32c ------------------------------------------------------------ */

static void test_crc32c(void)
{
	static const uint8_t read_pdu[48] = {
		0x01, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x14, 0, 0, 0, 0, 0, 0x04, 0, 0, 0, 0, 0x14, 0, 0, 0, 0x18,
		0x28, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0,
	};
	uint8_t b[32];

	memset(b, 0, sizeof(b));
	T_OK(iwarp_crc32c(b, 32) == 0x8a9136aa, "CRC32c 32 x 00 = aa 36 91 8a");
	memset(b, 0xff, sizeof(b));
	T_OK(iwarp_crc32c(b, 32) == 0x62a8ab43, "CRC32c 32 x ff = 43 ab a8 62");
	for (int i = 0; i < 32; i++)
		b[i] = (uint8_t)i;
	T_OK(iwarp_crc32c(b, 32) == 0x46dd794e, "CRC32c 00..1f = 4e 79 dd 46");
	for (int i = 0; i < 32; i++)
		b[i] = (uint8_t)(31 - i);
	T_OK(iwarp_crc32c(b, 32) == 0x113fdb5c, "CRC32c 1f..00 = 5c db 3f 11");
	T_OK(iwarp_crc32c(read_pdu, 48) == 0xd9963a56, "CRC32c iSCSI read PDU = 56 3a 96 d9");
}

/* ---- MPA --------------------------------------------------------------- */

static void test_mpa_vectors(void)
{
	struct iwarp_mpa_rr rr;
	uint8_t out[64];
	size_t fl = 0;
	int rc;

	rc = iwarp_mpa_rr_decode(mpa_req_v2, sizeof(mpa_req_v2), &rr, &fl);
	T_OK(rc == 0 && fl == sizeof(mpa_req_v2), "v2 request decodes (%d, %zu)", rc, fl);
	T_OK(!rr.reply && rr.rev == 2 && rr.v2 && rr.flags == 0x50, "request: key, rev, flags");
	T_OK(rr.ird == 16 && rr.ord == 16 && rr.p2p && !rr.zero_rtr && rr.read_rtr &&
	     !rr.write_rtr, "request: IRD/ORD 16, p2p, READ RTR");
	T_OK(rr.pdata_len == 3 && rr.pdata && memcmp(rr.pdata, "abc", 3) == 0,
	     "request: 3 bytes of ULP private data after IRD/ORD");
	T_OK(iwarp_mpa_req_acceptable(&rr) == 0, "request without markers is acceptable");
	rc = iwarp_mpa_rr_encode(out, sizeof(out), &rr);
	T_OK(rc == (int)sizeof(mpa_req_v2) && memcmp(out, mpa_req_v2, sizeof(mpa_req_v2)) == 0,
	     "request re-encodes to the same bytes");

	rc = iwarp_mpa_rr_decode(mpa_rep_v2, sizeof(mpa_rep_v2), &rr, &fl);
	T_OK(rc == 0 && rr.reply && rr.v2 && rr.ird == 8 && rr.ord == 4 && !rr.p2p &&
	     rr.pdata_len == 0 && rr.pdata == NULL && (rr.flags & IWARP_MPA_F_CRC),
	     "v2 reply: IRD 8, ORD 4, CRC, no private data");
	rc = iwarp_mpa_rr_encode(out, sizeof(out), &rr);
	T_OK(rc == (int)sizeof(mpa_rep_v2) && memcmp(out, mpa_rep_v2, sizeof(mpa_rep_v2)) == 0,
	     "reply re-encodes");

	rc = iwarp_mpa_rr_decode(mpa_rep_reject_v1, sizeof(mpa_rep_reject_v1), &rr, &fl);
	T_OK(rc == 0 && rr.reply && rr.rev == 1 && !rr.v2 && (rr.flags & IWARP_MPA_F_REJECT) &&
	     rr.pdata_len == 2 && memcmp(rr.pdata, "no", 2) == 0,
	     "v1 reject: R flag and private data, no IRD/ORD");

	/* markers: refused, as siw does */
	{
		uint8_t m[sizeof(mpa_req_v2)];
		uint16_t ptr = 0;

		memcpy(m, mpa_req_v2, sizeof(m));
		m[16] |= IWARP_MPA_F_MARKERS;
		T_OK(iwarp_mpa_rr_decode(m, sizeof(m), &rr, &fl) == 0 &&
		     iwarp_mpa_req_acceptable(&rr) == -EOPNOTSUPP, "a request for markers is refused");
		T_OK(iwarp_mpa_marker_decode((const uint8_t[]){ 0, 0, 0x01, 0x2c }, 4, &ptr) == 0 &&
		     ptr == 300, "marker FPDUPTR 300");
		T_OK(iwarp_mpa_marker_decode((const uint8_t[]){ 0, 0, 0x02, 0x01 }, 4, &ptr) ==
		     -EPROTO, "marker pointing past its interval");
		T_OK(iwarp_mpa_marker_decode(m, 3, &ptr) == -EAGAIN, "short marker");
	}
	/* malformed frames */
	{
		uint8_t m[sizeof(mpa_rep_v2)];

		memcpy(m, mpa_rep_v2, sizeof(m));
		m[17] = 3;
		T_OK(iwarp_mpa_rr_decode(m, sizeof(m), &rr, &fl) == -EPROTO, "rev 3 refused");
		m[17] = 0;
		T_OK(iwarp_mpa_rr_decode(m, sizeof(m), &rr, &fl) == -EPROTO, "rev 0 refused");
		m[17] = 2;
		m[19] = 2; /* rev 2 with room for half of IRD/ORD */
		T_OK(iwarp_mpa_rr_decode(m, sizeof(m), &rr, &fl) == -EPROTO, "rev 2 without IRD/ORD");
		m[16] &= (uint8_t)~IWARP_MPA_F_ENHANCED; /* as siw: no flag, no IRD/ORD */
		T_OK(iwarp_mpa_rr_decode(m, sizeof(m), &rr, &fl) == 0 && rr.rev == 2 && !rr.v2 &&
		     rr.pdata_len == 2, "rev 2 without the ENHANCED flag: plain private data");
		m[18] = 0x02;
		m[19] = 0x01; /* 513 */
		T_OK(iwarp_mpa_rr_decode(m, sizeof(m), &rr, &fl) == -EMSGSIZE, "513 bytes of pdata");
		memcpy(m, mpa_rep_v2, sizeof(m));
		m[8] = 'p'; /* "MPA ID pep" */
		T_OK(iwarp_mpa_rr_decode(m, 9, &rr, &fl) == -EPROTO, "wrong key refused early");
	}
	/* encoder limits */
	{
		static uint8_t big[IWARP_MPA_PD_MAX];
		struct iwarp_mpa_rr e = { .rev = 2, .v2 = true, .pdata = big,
					  .pdata_len = IWARP_MPA_PD_MAX - 3 };
		uint8_t buf[IWARP_MPA_RR_HDR_LEN + IWARP_MPA_PD_MAX];

		T_OK(iwarp_mpa_rr_encode(buf, sizeof(buf), &e) == -EMSGSIZE,
		     "v2 block + 509 bytes is over 512");
		e.pdata_len = IWARP_MPA_PD_MAX - 4;
		T_OK(iwarp_mpa_rr_encode(buf, sizeof(buf), &e) == (int)sizeof(buf),
		     "v2 block + 508 bytes fits");
		T_OK(iwarp_mpa_rr_encode(buf, sizeof(buf) - 1, &e) == -EMSGSIZE, "cap too small");
		e.ird = 0x4000;
		T_OK(iwarp_mpa_rr_encode(buf, sizeof(buf), &e) == -EINVAL, "IRD over 14 bits");
	}
}

/* ---- FPDUs and headers -------------------------------------------------- */

/* Parses the vector as one FPDU with CRC and decodes its segment. */
static int fpdu_decode(const uint8_t *v, size_t n, struct iwarp_hdr *h, size_t *ul, size_t *fl)
{
	const uint8_t *u = NULL;
	struct iwarp_term_code err;
	int rc = iwarp_fpdu_parse(v, n, true, 65535, &u, ul, fl);

	if (rc == 0 && u != v + 2)
		rc = -EFAULT;
	return rc ? rc : iwarp_hdr_decode(u, *ul, h, &err);
}

static void test_write_fpdu(void)
{
	const uint8_t *u;
	size_t ul = 0, fl = 0;
	struct iwarp_hdr h;
	uint8_t out[64];
	int rc;

	rc = fpdu_decode(fpdu_write, sizeof(fpdu_write), &h, &ul, &fl);
	T_OK(rc == 0 && ul == 19 && fl == sizeof(fpdu_write), "Write FPDU parses with its CRC (%d)", rc);
	T_OK(h.opcode == IWARP_OP_WRITE && h.tagged && h.last &&
	     h.stag == 0x12345678 && h.to == 0x100002000ull, "Write: STag, TO, flags");
	T_OK(h.payload_len == 5 && memcmp(h.payload, "hello", 5) == 0, "Write payload");
	T_OK(iwarp_fpdu_pad(19) == 3 && iwarp_fpdu_total(19) == 28, "pad 3, 28 bytes");

	/* build it again from the struct */
	memset(out, 0xee, sizeof(out));
	rc = iwarp_hdr_encode(out + 2, sizeof(out) - 2, &h);
	T_OK(rc == IWARP_TAGGED_HDR_LEN, "Write header encodes to 14 bytes");
	memcpy(out + 2 + rc, "hello", 5);
	rc = iwarp_fpdu_frame(out, sizeof(out), 19, true);
	T_OK(rc == (int)sizeof(fpdu_write) && memcmp(out, fpdu_write, sizeof(fpdu_write)) == 0,
	     "framed Write equals the vector, pad and CRC included");
	rc = iwarp_fpdu_frame(out, sizeof(out), 19, false);
	T_OK(rc == 28 && memcmp(out + 24, "\0\0\0\0", 4) == 0, "without CRC the field is 0");
	T_OK(iwarp_fpdu_parse(out, 28, false, 65535, &u, &ul, &fl) == 0,
	     "a zero CRC is ignored when CRC is off");
	T_OK(iwarp_fpdu_parse(out, 28, true, 65535, &u, &ul, &fl) == -EBADMSG,
	     "a zero CRC fails when CRC is on");
	T_OK(iwarp_fpdu_parse(fpdu_write, sizeof(fpdu_write), true, 18, &u, &ul, &fl) ==
	     -EMSGSIZE, "ULPDU over the receiver's limit");
	T_OK(iwarp_fpdu_frame(out, 27, 19, true) == -EMSGSIZE, "frame past cap");
}

static void test_rreq_fpdu(void)
{
	size_t ul = 0, fl = 0;
	struct iwarp_hdr h;
	uint8_t out[64];
	int rc;

	rc = fpdu_decode(fpdu_rreq, sizeof(fpdu_rreq), &h, &ul, &fl);
	T_OK(rc == 0 && ul == 46 && fl == 52 && iwarp_fpdu_pad(46) == 0,
	     "Read Request FPDU parses, no pad (%d)", rc);
	T_OK(h.opcode == IWARP_OP_READ_REQ && !h.tagged && h.last &&
	     h.qn == 1 && h.msn == 1 && h.mo == 0, "Read Request: QN 1, MSN 1, MO 0");
	T_OK(h.sink_stag == 0xaabbccdd && h.sink_to == 0x1000 && h.read_size == 0x2000 &&
	     h.src_stag == 0x11223344 && h.src_to == 0xfeedface00000000ull,
	     "Read Request: sink, size, source");
	T_OK(h.hdr_len == 46 && h.payload_len == 0, "Read Request carries no payload");
	rc = iwarp_hdr_encode(out + 2, sizeof(out) - 2, &h);
	T_OK(rc == 46, "Read Request encodes to 46 bytes");
	rc = iwarp_fpdu_frame(out, sizeof(out), 46, true);
	T_OK(rc == 52 && memcmp(out, fpdu_rreq, 52) == 0, "framed Read Request equals the vector");
}

static void test_send_and_terminate(void)
{
	struct iwarp_hdr h = { .opcode = IWARP_OP_SEND_SE_INV, .last = true, .rsvdulp = 0xabcd,
			       .msn = 7, .mo = 4096 }, d;
	struct iwarp_term_code err;
	uint8_t buf[64];
	int rc;

	rc = iwarp_hdr_encode(buf, sizeof(buf), &h);
	T_OK(rc == 18 && buf[0] == 0x41 && buf[1] == 0x46, "Send w/ SE+Inv ctrl bytes 41 46");
	T_OK(iwarp_hdr_decode(buf, 18, &d, &err) == 0 && d.rsvdulp == 0xabcd && d.qn == 0 &&
	     d.msn == 7 && d.mo == 4096, "Send w/ SE+Inv: STag to invalidate, MSN, MO");
	h.opcode = IWARP_OP_SEND;
	iwarp_hdr_encode(buf, sizeof(buf), &h);
	T_OK(iwarp_hdr_decode(buf, 18, &d, &err) == 0 && d.rsvdulp == 0,
	     "plain Send sends RsvdULP 0");

	/* Terminate: DDP untagged error, invalid QN, with seg length and
	 * the offending header */
	{
		uint8_t bad[18];
		struct iwarp_hdr t = { .opcode = IWARP_OP_TERMINATE, .msn = 1,
				       .term = { IWARP_LAYER_DDP, IWARP_DDP_ET_UNTAGGED,
						 IWARP_DDP_EC_U_INVALID_QN },
				       .term_flags = IWARP_TERM_F_M | IWARP_TERM_F_D,
				       .term_seg_len = 18, .term_hdrs = bad,
				       .term_hdrs_len = sizeof(bad) };

		memcpy(bad, buf, sizeof(bad));
		bad[9] = 9; /* QN 9 */
		rc = iwarp_hdr_encode(buf, sizeof(buf), &t);
		T_OK(rc == 18 + 4 + 2 + 18, "Terminate encodes to %d", rc);
		T_OK(buf[1] == 0x47 && buf[9] == 2 && buf[18] == 0x12 && buf[19] == 0x01 &&
		     buf[20] == 0xc0 && buf[21] == 0x00, "Terminate: QN 2, word 1201c000");
		rc = iwarp_hdr_decode(buf, (size_t)rc, &d, &err);
		T_OK(rc == 0 && d.term.layer == 1 && d.term.etype == 2 && d.term.ecode == 1 &&
		     d.term_flags == (IWARP_TERM_F_M | IWARP_TERM_F_D) && d.term_seg_len == 18 &&
		     d.term_hdrs_len == 18 && memcmp(d.term_hdrs, bad, 18) == 0,
		     "Terminate decodes layer/etype/ecode, M, D, the header");
		T_OK(iwarp_hdr_decode(buf, 18 + 3, &d, &err) == -EPROTO,
		     "Terminate without its control word");
	}
	/* errors map to the Terminate to send */
	iwarp_hdr_encode(buf, sizeof(buf), &h);
	buf[0] = (buf[0] & ~3) | 2;
	T_OK(iwarp_hdr_decode(buf, 18, &d, &err) == -EPROTO && err.layer == IWARP_LAYER_DDP &&
	     err.etype == IWARP_DDP_ET_UNTAGGED && err.ecode == IWARP_DDP_EC_U_VERSION,
	     "DDP version 2 -> DDP untagged version error");
	buf[0] = (buf[0] & ~3) | 1;
	buf[1] = 0x80 | IWARP_OP_SEND;
	T_OK(iwarp_hdr_decode(buf, 18, &d, &err) == -EPROTO && err.layer == IWARP_LAYER_RDMAP &&
	     err.ecode == IWARP_RDMAP_EC_VERSION, "RDMAP version 2 -> RDMAP version error");
	buf[1] = 0x40 | 8;
	T_OK(iwarp_hdr_decode(buf, 18, &d, &err) == -EPROTO &&
	     err.ecode == IWARP_RDMAP_EC_OPCODE, "opcode 8 -> invalid opcode");
	buf[1] = 0x40 | IWARP_OP_WRITE; /* untagged Write */
	T_OK(iwarp_hdr_decode(buf, 18, &d, &err) == -EPROTO &&
	     err.ecode == IWARP_RDMAP_EC_OPCODE, "untagged Write -> invalid opcode");
	buf[1] = 0x40 | IWARP_OP_SEND;
	buf[9] = 1;
	T_OK(iwarp_hdr_decode(buf, 18, &d, &err) == -EPROTO && err.layer == IWARP_LAYER_DDP &&
	     err.ecode == IWARP_DDP_EC_U_INVALID_QN, "Send to QN 1 -> invalid QN");
	T_OK(iwarp_hdr_decode(buf, 17, &d, &err) == -EPROTO, "17-byte untagged segment");
	T_OK(strcmp(iwarp_op_name(IWARP_OP_READ_RESP), "RDMA_READ_RESPONSE") == 0 &&
	     strcmp(iwarp_op_name(200), "UNKNOWN") == 0, "opcode names");
}

/* ---- hostile input ------------------------------------------------------ */

static void hostile_one(const uint8_t *src, size_t len)
{
	uint8_t *b = dup_exact(src, len);
	struct iwarp_mpa_rr rr;
	struct iwarp_hdr h;
	const uint8_t *u;
	size_t ul, fl;
	int rc;

	rc = iwarp_mpa_rr_decode(b, len, &rr, &fl);
	T_CHECK(rc == 0 || rc == -EAGAIN || rc == -EPROTO || rc == -EMSGSIZE, "mpa rc %d", rc);
	if (rc == 0)
		T_CHECK(fl <= len && (!rr.pdata || rr.pdata + rr.pdata_len <= b + len),
			"MPA frame inside the buffer");
	for (int crc = 0; crc < 2; crc++) {
		rc = iwarp_fpdu_parse(b, len, crc, 65535, &u, &ul, &fl);
		T_CHECK(rc == 0 || rc == -EAGAIN || rc == -EPROTO || rc == -EBADMSG,
			"fpdu rc %d", rc);
		if (rc == 0)
			T_CHECK(fl <= len && u + ul <= b + len, "FPDU inside the buffer");
	}
	rc = iwarp_hdr_decode(b, len, &h, NULL);
	T_CHECK(rc == 0 || rc == -EPROTO, "hdr rc %d", rc);
	if (rc == 0)
		T_CHECK(h.payload + h.payload_len == b + len && h.hdr_len <= len &&
			(!h.term_hdrs || h.term_hdrs + h.term_hdrs_len <= b + len),
			"decoded segment inside the buffer");
	free(b);
}

static void test_hostile(void)
{
	static const struct { const uint8_t *p; size_t n; } v[] = {
		{ mpa_req_v2, sizeof(mpa_req_v2) }, { mpa_rep_v2, sizeof(mpa_rep_v2) },
		{ mpa_rep_reject_v1, sizeof(mpa_rep_reject_v1) },
		{ fpdu_write, sizeof(fpdu_write) }, { fpdu_rreq, sizeof(fpdu_rreq) },
		{ fpdu_write + 2, 19 }, { fpdu_rreq + 2, 46 },
	};
	int trunc_again = 0, trunc_total = 0;
	uint8_t g[96];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		for (size_t n = 0; n <= v[i].n; n++)
			hostile_one(v[i].p, n);
		for (int k = 0; k < 2000; k++) {
			uint8_t *m = dup_exact(v[i].p, v[i].n);

			m[t_rand() % v[i].n] ^= (uint8_t)(1 + t_rand() % 255);
			hostile_one(m, v[i].n);
			free(m);
		}
	}
	/* a truncated MPA frame or FPDU asks for more, never succeeds */
	for (size_t i = 0; i < 5; i++)
		for (size_t n = 0; n < v[i].n; n++) {
			struct iwarp_mpa_rr rr;
			const uint8_t *u;
			size_t ul, fl;
			int rc = i < 3 ? iwarp_mpa_rr_decode(v[i].p, n, &rr, &fl)
				       : iwarp_fpdu_parse(v[i].p, n, true, 65535, &u, &ul, &fl);

			trunc_total++;
			trunc_again += rc == -EAGAIN;
		}
	T_OK(trunc_again == trunc_total, "%d/%d truncations answer -EAGAIN", trunc_again,
	     trunc_total);
	for (int k = 0; k < 20000; k++) {
		size_t n = t_rand() % sizeof(g);

		for (size_t j = 0; j < n; j++)
			g[j] = (uint8_t)t_rand();
		if (k & 1) { /* plausible ctrl bytes so decode gets past them */
			if (n > 1)
				g[1] = (uint8_t)(0x40 | (g[1] & 0x0f));
			if (n > 0)
				g[0] = (uint8_t)((g[0] & 0xc0) | 1);
		}
		hostile_one(g, n);
	}
	T_OK(t_fails == 0, "hostile input: every answer an error code or a consistent decode");
}

/* ---- what siw sent (captured on the interop bridge) --------------------- */

/* siw's MPA request as rping's client: ENHANCED flag only (siw asks for
 * no CRC), rev 2, IRD 1 / ORD 1, no RTR, no ULP private data. */
static const uint8_t siw_mpa_req[] = {
	'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e',
	0x10, 0x02, 0x00, 0x04, 0x00, 0x01, 0x00, 0x01,
};
/* siw's reply to softrnic's request with C set (SOFTRNIC_IWARP_CRC=1):
 * C | ENHANCED, ORD 128 / IRD 128 as ib_read_bw asked. */
static const uint8_t siw_mpa_rep_crc[] = {
	'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e',
	0x50, 0x02, 0x00, 0x04, 0x00, 0x80, 0x00, 0x80,
};
/* rping's server on siw: its RDMA READ of 4000 bytes, then a 16-byte
 * Send, each FPDU with siw's CRC32c (kernel crc32c shash bytes). */
static const uint8_t siw_rreq_crc[] = {
	0x00, 0x2e, 0x41, 0x41, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x57, 0x55, 0x12, 0x00,
	0x00, 0x00, 0x56, 0x18, 0x49, 0x4a, 0x44, 0xc0, 0x00, 0x00, 0x0f, 0xa0,
	0x37, 0x0e, 0x62, 0x03, 0x00, 0x00, 0x55, 0x75, 0x25, 0xc9, 0x26, 0x50,
	0xf4, 0x24, 0xe7, 0xca,
};
static const uint8_t siw_send_crc[] = {
	0x00, 0x22, 0x41, 0x43, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x84, 0x60, 0x9a, 0x12,
};

static void test_siw_frames(void)
{
	struct iwarp_mpa_rr rr;
	struct iwarp_hdr h;
	const uint8_t *u;
	size_t ul = 0, fl = 0;
	uint8_t bad[sizeof(siw_rreq_crc)];
	int rc;

	rc = iwarp_mpa_rr_decode(siw_mpa_req, sizeof(siw_mpa_req), &rr, &fl);
	T_OK(rc == 0 && fl == sizeof(siw_mpa_req) && !rr.reply && rr.v2 && rr.ird == 1 &&
	     rr.ord == 1 && !(rr.flags & IWARP_MPA_F_CRC) && !rr.p2p && !rr.write_rtr &&
	     !rr.read_rtr && rr.pdata_len == 0, "siw's request: v2, IRD/ORD 1, no CRC, no RTR");
	T_OK(iwarp_mpa_req_acceptable(&rr) == 0, "siw's request is acceptable");
	rc = iwarp_mpa_rr_decode(siw_mpa_rep_crc, sizeof(siw_mpa_rep_crc), &rr, &fl);
	T_OK(rc == 0 && rr.reply && rr.v2 && (rr.flags & IWARP_MPA_F_CRC) && rr.ird == 128 &&
	     rr.ord == 128 && !(rr.flags & IWARP_MPA_F_REJECT),
	     "siw's reply to a CRC request: C set, IRD/ORD 128");

	rc = iwarp_fpdu_parse(siw_rreq_crc, sizeof(siw_rreq_crc), true, 0xffff, &u, &ul, &fl);
	T_OK(rc == 0 && fl == sizeof(siw_rreq_crc), "siw's Read Request FPDU: CRC checks (%d)", rc);
	rc = rc ? rc : iwarp_hdr_decode(u, ul, &h, NULL);
	T_OK(rc == 0 && h.opcode == IWARP_OP_READ_REQ && h.last && h.qn == 1 && h.msn == 1 &&
	     h.mo == 0 && h.sink_stag == 0x57551200 && h.sink_to == 0x00005618494a44c0ull &&
	     h.read_size == 4000 && h.src_stag == 0x370e6203 &&
	     h.src_to == 0x0000557525c92650ull, "siw's Read Request: queue 1, MSN 1, 4000 bytes");
	memcpy(bad, siw_rreq_crc, sizeof(bad));
	bad[30] ^= 0x01;
	T_OK(iwarp_fpdu_parse(bad, sizeof(bad), true, 0xffff, &u, &ul, &fl) == -EBADMSG,
	     "one flipped bit in it fails the CRC");

	rc = iwarp_fpdu_parse(siw_send_crc, sizeof(siw_send_crc), true, 0xffff, &u, &ul, &fl);
	rc = rc ? rc : iwarp_hdr_decode(u, ul, &h, NULL);
	T_OK(rc == 0 && h.opcode == IWARP_OP_SEND && h.last && h.qn == 0 && h.msn == 1 &&
	     h.payload_len == 16, "siw's 16-byte Send: CRC checks, queue 0, MSN 1");
}

int main(void)
{
	t_rand_seed(5044);
	test_crc32c();
	test_mpa_vectors();
	test_write_fpdu();
	test_rreq_fpdu();
	test_send_and_terminate();
	test_hostile();
	test_siw_frames();
	return t_summary();
}
