/* Hostile input: every truncation of every vector packet and frame, random
 * byte changes, random garbage, every opcode byte, and the specific
 * malformations decode must reject (TVer, pad, trailing bytes on ACKs).
 * Buffers are malloc'd at their exact length, so a build with
 * -DSOFTRNIC_SANITIZE=ON turns any read past the end into a failure. */
#include <sys/socket.h>

#include "t_wire_vectors.h"
#include "tests/lib/t_util.h"

struct stats {
	unsigned long decoded, rejected, frames, icrc_rejected;
};

/* A decode that succeeded must describe exactly the bytes it was given. */
static int t_consistent(const uint8_t *buf, size_t len, const struct wire_pkt *p)
{
	const struct wire_opcode_info *o = &wire_opcodes[p->opcode];

	return o->name && p->opcode == buf[0] && p->tver == 0 &&
	       p->payload == buf + o->hdr_len &&
	       (size_t)o->hdr_len + p->payload_len + p->padcnt + WIRE_ICRC_LEN == len &&
	       ((o->caps & WIRE_HAS_PAYLOAD) || (p->payload_len == 0 && p->padcnt == 0));
}

/* Decoded headers must re-encode to the same bytes, except the reserved
 * bytes of DETH and XRCETH, which the struct does not keep. */
static int t_round_trip(const uint8_t *buf, const struct wire_pkt *p)
{
	const struct wire_opcode_info *o = &wire_opcodes[p->opcode];
	uint8_t hdrs[WIRE_MAX_HDR_LEN];
	int n = wire_encode_hdrs(hdrs, p);

	if (n != o->hdr_len)
		return 0;
	for (int i = 0; i < n; i++)
		if (hdrs[i] != buf[i] && !(o->off_deth && i == o->off_deth + 4) &&
		    !(o->off_xrceth && i == o->off_xrceth))
			return 0;
	return 1;
}

static void t_decode_copy(const uint8_t *src, size_t len, struct stats *st, int want_ok)
{
	uint8_t *buf = malloc(len ? len : 1);
	struct wire_pkt p;
	uint16_t id;
	struct wire_l3 l3 = { .family = AF_INET, .dport = 4791 };
	int rc;

	memcpy(buf, src, len);
	rc = wire_decode(buf, len, &p);
	if (rc == 0) {
		st->decoded++;
		T_CHECK(t_consistent(buf, len, &p), "inconsistent decode, len %zu op 0x%02x", len,
			buf[0]);
		T_CHECK(t_round_trip(buf, &p), "round trip, len %zu op 0x%02x", len, buf[0]);
	} else {
		st->rejected++;
		T_CHECK(rc == -EBADMSG, "decode returned %d", rc);
	}
	if (want_ok >= 0)
		T_CHECK((rc == 0) == want_ok, "len %zu: rc %d, want %s", len, rc,
			want_ok ? "ok" : "error");
	if (wire_icrc_verify(&l3, buf, len, &id) != 0)
		st->icrc_rejected++;
	free(buf);
}

static void per_packet(const struct t_vec_pkt *v, void *arg)
{
	struct stats *st = arg;
	uint8_t tmp[T_FRAME_MAX];
	const uint8_t *roce;
	struct wire_l3 l3;
	size_t rl;

	/* Every truncation of the RoCE packet. */
	for (size_t len = 0; len <= v->roce_len; len++) {
		size_t hdr = wire_opcodes[v->roce[0]].hdr_len;
		int want = len == v->roce_len ? 1 : len < hdr + WIRE_ICRC_LEN ? 0 : -1;

		t_decode_copy(v->roce, len, st, want);
	}
	/* Every truncation of the frame. */
	for (size_t len = 0; len <= v->frame_len; len++) {
		uint8_t *f = malloc(len ? len : 1);
		int rc;

		memcpy(f, v->frame, len);
		rc = wire_frame_parse(f, len, v->linktype, &l3, &roce, &rl);
		st->frames++;
		if (rc == 0)
			T_CHECK(roce >= f && roce + rl <= f + len, "frame parse out of bounds");
		else
			T_CHECK(rc == -EBADMSG || rc == -ENOENT, "frame parse rc %d", rc);
		free(f);
	}
	/* Random changes of 1..4 bytes, 40 per packet, in headers mostly. */
	for (int i = 0; i < 40; i++) {
		size_t span = v->roce_len < 64 ? v->roce_len : 64;

		memcpy(tmp, v->roce, v->roce_len);
		for (int k = 1 + (int)(t_rand() % 4); k > 0; k--)
			tmp[t_rand() % span] = (uint8_t)t_rand();
		t_decode_copy(tmp, v->roce_len, st, -1);
	}
}

static void test_specific(void)
{
	uint8_t buf[128];
	struct wire_pkt p;
	int ok_count = 0;

	printf("every opcode byte at its exact header length: valid iff in the table\n");
	for (int op = 0; op < 256; op++) {
		const struct wire_opcode_info *o = &wire_opcodes[op];
		size_t len = (o->name ? o->hdr_len : 12) + WIRE_ICRC_LEN;

		if (o->caps & WIRE_IS_ATOMIC_WRITE) /* its 8-byte word */
			len += 8;
		int rc;

		memset(buf, 0, sizeof(buf));
		buf[0] = (uint8_t)op;
		rc = wire_decode(buf, len, &p);
		T_CHECK((rc == 0) == (o->name != NULL), "opcode 0x%02x rc %d", op, rc);
		ok_count += rc == 0;
		if (o->name) {
			/* one byte short of the headers */
			T_CHECK(wire_decode(buf, len - 1, &p) == -EBADMSG, "0x%02x short", op);
			/* one byte more: payload opcodes take it as data (with a
			 * pad count of 0), the others must refuse it */
			rc = wire_decode(buf, len + 1, &p);
			T_CHECK((rc == 0) == ((o->caps & WIRE_HAS_PAYLOAD) &&
					    !(o->caps & WIRE_IS_ATOMIC_WRITE)),
				"0x%02x +1 rc %d", op, rc);
		}
	}
	printf("  %d opcodes decode\n", ok_count);

	printf("TVer != 0, pad longer than payload, pad on an ACK, atomic write not 8 bytes: rejected\n");
	memset(buf, 0, sizeof(buf));
	buf[0] = WIRE_RC | WIRE_SEND_ONLY;
	T_CHECK(wire_decode(buf, 12 + 3 + 4, &p) == 0, "baseline");
	buf[1] = 0x01; /* TVer 1 */
	T_CHECK(wire_decode(buf, 12 + 3 + 4, &p) == -EBADMSG, "tver");
	buf[1] = 0x30; /* pad 3 with 3 bytes after the BTH: payload 0 */
	T_CHECK(wire_decode(buf, 12 + 3 + 4, &p) == 0 && p.payload_len == 0, "pad 3 of 3");
	T_CHECK(wire_decode(buf, 12 + 2 + 4, &p) == -EBADMSG, "pad 3 of 2");
	T_CHECK(wire_decode(buf, 12 + 4, &p) == -EBADMSG, "pad 3 of 0");
	buf[0] = WIRE_RC | WIRE_ACK;
	buf[1] = 0x10; /* pad 1 on an ACK */
	T_CHECK(wire_decode(buf, 16 + 1 + 4, &p) == -EBADMSG, "ACK with pad");
	T_CHECK(wire_decode(buf, 16 + 4, &p) == -EBADMSG, "ACK pad beyond");
	buf[1] = 0;
	T_CHECK(wire_decode(buf, 16 + 4, &p) == 0, "ACK");
	buf[0] = WIRE_RC | WIRE_ATOMIC_WRITE;
	T_CHECK(wire_decode(buf, 28 + 8 + 4, &p) == 0 && p.payload_len == 8, "atomic write");
	T_CHECK(wire_decode(buf, 28 + 4 + 4, &p) == -EBADMSG, "atomic write of 4 bytes");
	buf[1] = 0x10; /* 7 bytes + pad 1 */
	T_CHECK(wire_decode(buf, 28 + 8 + 4, &p) == -EBADMSG, "atomic write of 7 bytes");
	buf[1] = 0;
	T_CHECK(wire_encode_hdrs(buf, &(struct wire_pkt){ .opcode = 0x15 }) == -EINVAL,
		"encode invalid opcode");
}

static void test_garbage(struct stats *st)
{
	uint8_t buf[200];

	printf("random garbage: 200000 buffers of 0..199 bytes\n");
	for (int i = 0; i < 200000; i++) {
		size_t len = t_rand() % sizeof(buf);

		for (size_t k = 0; k < len; k++)
			buf[k] = (uint8_t)t_rand();
		/* make a valid opcode and TVer likely, to get past the first checks */
		if (len && (i & 1)) {
			do
				buf[0] = (uint8_t)t_rand();
			while (!wire_opcodes[buf[0]].name);
			if (len > 1)
				buf[1] &= 0xf0;
		}
		t_decode_copy(buf, len, st, -1);
	}
}

int main(void)
{
	char *files[T_MAX_FILES];
	struct stats st = { 0 }, g = { 0 };
	int nfiles = t_vector_files(files), total = 0;

	if (nfiles <= 0)
		t_bail("no vectors in %s (set SRN_SOURCE)", t_vectors_dir());
	t_rand_seed(0x2545f4914f6cdd1dull);
	test_specific();
	printf("truncations and byte changes of every vector packet (%d captures)\n", nfiles);
	for (int i = 0; i < nfiles; i++) {
		int n = t_vector_each(files[i], per_packet, &st);

		T_CHECK(n > 0, "%s: no packets", files[i]);
		total += n > 0 ? n : 0;
		free(files[i]);
	}
	printf("  %d packets: %lu decodes ok, %lu rejected, %lu ICRC rejects, %lu frame parses\n",
	       total, st.decoded, st.rejected, st.icrc_rejected, st.frames);
	test_garbage(&g);
	printf("  %lu decodes ok, %lu rejected\n", g.decoded, g.rejected);
	T_CHECK(g.decoded > 1000, "garbage never decoded: the test does not reach deep");
	return t_summary();
}
