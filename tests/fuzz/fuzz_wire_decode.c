/* libFuzzer target for the packet codec: decode, re-encode, ICRC verify
 * and frame parsing on arbitrary bytes.  Not built by default:
 *
 *   clang -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -I. \
 *     tests/fuzz/fuzz_wire_decode.c wire/[a-z]*.c -lisal -lpthread -o fuzz_wire_decode
 *   ./fuzz_wire_decode -max_total_time=60
 *
 * The first input byte picks what to fuzz, so one corpus covers all.
 * Invariants are checked with abort(), which libFuzzer reports. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "wire/wire.h"

static void fuzz_decode(const uint8_t *buf, size_t len)
{
	struct wire_pkt p;
	uint8_t hdrs[WIRE_MAX_HDR_LEN];
	struct wire_l3 l3 = { .family = AF_INET, .dport = 4791 };
	const struct wire_opcode_info *o;
	uint16_t id;
	int n;

	(void)wire_icrc_verify(&l3, buf, len, &id);
	if (wire_decode(buf, len, &p) != 0)
		return;
	o = &wire_opcodes[p.opcode];
	if (!o->name || p.tver || p.payload != buf + o->hdr_len ||
	    (size_t)o->hdr_len + p.payload_len + p.padcnt + WIRE_ICRC_LEN != len)
		abort();
	n = wire_encode_hdrs(hdrs, &p);
	if (n != o->hdr_len)
		abort();
	for (int i = 0; i < n; i++) /* DETH's and XRCETH's reserved bytes are not kept */
		if (hdrs[i] != buf[i] && !(o->off_deth && i == o->off_deth + 4) &&
		    !(o->off_xrceth && i == o->off_xrceth))
			abort();
}

static void fuzz_frame(const uint8_t *buf, size_t len, int linktype)
{
	const uint8_t *roce;
	struct wire_l3 l3;
	size_t rl;

	if (wire_frame_parse(buf, len, linktype, &l3, &roce, &rl) != 0)
		return;
	if (roce < buf || roce + rl > buf + len)
		abort();
	fuzz_decode(roce, rl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	if (size < 1)
		return 0;
	/* exact-size copy so ASan sees any read past the end */
	copy = malloc(size - 1 ? size - 1 : 1);
	memcpy(copy, data + 1, size - 1);
	switch (data[0] % 3) {
	case 0:
		fuzz_decode(copy, size - 1);
		break;
	case 1:
		fuzz_frame(copy, size - 1, 1);
		break;
	default:
		fuzz_frame(copy, size - 1, 101);
		break;
	}
	free(copy);
	return 0;
}
