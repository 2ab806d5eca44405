/* The opcode table: which opcodes exist per service, their header sizes
 * and offsets (checked against hand-written IBTA values and against an
 * independent sum), and the consistency of the capability bits. */
#include <stdio.h>
#include <string.h>

#include "tests/lib/t_util.h"
#include "wire/wire.h"

/* Hand-written from IBTA Vol 1 Table 36 / 9.2-9.5: opcode, total header
 * length and the offsets the table must give. */
static const struct {
	uint8_t opcode;
	const char *name;
	uint8_t hdr_len;
	uint8_t off_reth, off_aeth, off_atmeth, off_atmack, off_immdt, off_deth, off_ieth;
} expect[] = {
	{ 0x00, "RC SEND_FIRST", 12, 0, 0, 0, 0, 0, 0, 0 },
	{ 0x01, "RC SEND_MIDDLE", 12, 0, 0, 0, 0, 0, 0, 0 },
	{ 0x03, "RC SEND_LAST_IMM", 16, 0, 0, 0, 0, 12, 0, 0 },
	{ 0x04, "RC SEND_ONLY", 12, 0, 0, 0, 0, 0, 0, 0 },
	{ 0x05, "RC SEND_ONLY_IMM", 16, 0, 0, 0, 0, 12, 0, 0 },
	{ 0x06, "RC WRITE_FIRST", 28, 12, 0, 0, 0, 0, 0, 0 },
	{ 0x07, "RC WRITE_MIDDLE", 12, 0, 0, 0, 0, 0, 0, 0 },
	{ 0x09, "RC WRITE_LAST_IMM", 16, 0, 0, 0, 0, 12, 0, 0 },
	{ 0x0a, "RC WRITE_ONLY", 28, 12, 0, 0, 0, 0, 0, 0 },
	{ 0x0b, "RC WRITE_ONLY_IMM", 32, 12, 0, 0, 0, 28, 0, 0 },
	{ 0x0c, "RC READ_REQ", 28, 12, 0, 0, 0, 0, 0, 0 },
	{ 0x0d, "RC READ_RESP_FIRST", 16, 0, 12, 0, 0, 0, 0, 0 },
	{ 0x0e, "RC READ_RESP_MIDDLE", 12, 0, 0, 0, 0, 0, 0, 0 },
	{ 0x0f, "RC READ_RESP_LAST", 16, 0, 12, 0, 0, 0, 0, 0 },
	{ 0x10, "RC READ_RESP_ONLY", 16, 0, 12, 0, 0, 0, 0, 0 },
	{ 0x11, "RC ACK", 16, 0, 12, 0, 0, 0, 0, 0 },
	{ 0x12, "RC ATOMIC_ACK", 24, 0, 12, 0, 16, 0, 0, 0 },
	{ 0x13, "RC CMP_SWAP", 40, 0, 0, 12, 0, 0, 0, 0 },
	{ 0x14, "RC FETCH_ADD", 40, 0, 0, 12, 0, 0, 0, 0 },
	{ 0x16, "RC SEND_LAST_INV", 16, 0, 0, 0, 0, 0, 0, 12 },
	{ 0x17, "RC SEND_ONLY_INV", 16, 0, 0, 0, 0, 0, 0, 12 },
	{ 0x1d, "RC ATOMIC_WRITE", 28, 12, 0, 0, 0, 0, 0, 0 },
	{ 0x20, "UC SEND_FIRST", 12, 0, 0, 0, 0, 0, 0, 0 },
	{ 0x25, "UC SEND_ONLY_IMM", 16, 0, 0, 0, 0, 12, 0, 0 },
	{ 0x26, "UC WRITE_FIRST", 28, 12, 0, 0, 0, 0, 0, 0 },
	{ 0x2b, "UC WRITE_ONLY_IMM", 32, 12, 0, 0, 0, 28, 0, 0 },
	{ 0x64, "UD SEND_ONLY", 20, 0, 0, 0, 0, 0, 12, 0 },
	{ 0x65, "UD SEND_ONLY_IMM", 24, 0, 0, 0, 0, 20, 12, 0 },
	/* XRC (Annex A14): RC's headers after a 4-byte XRCETH on requests */
	{ 0xa4, "XRC SEND_ONLY", 16, 0, 0, 0, 0, 0, 0, 0 },
	{ 0xa5, "XRC SEND_ONLY_IMM", 20, 0, 0, 0, 0, 16, 0, 0 },
	{ 0xa6, "XRC WRITE_FIRST", 32, 16, 0, 0, 0, 0, 0, 0 },
	{ 0xab, "XRC WRITE_ONLY_IMM", 36, 16, 0, 0, 0, 32, 0, 0 },
	{ 0xac, "XRC READ_REQ", 32, 16, 0, 0, 0, 0, 0, 0 },
	{ 0xad, "XRC READ_RESP_FIRST", 16, 0, 12, 0, 0, 0, 0, 0 },
	{ 0xb1, "XRC ACK", 16, 0, 12, 0, 0, 0, 0, 0 },
	{ 0xb2, "XRC ATOMIC_ACK", 24, 0, 12, 0, 16, 0, 0, 0 },
	{ 0xb3, "XRC CMP_SWAP", 44, 0, 0, 16, 0, 0, 0, 0 },
	{ 0xb7, "XRC SEND_ONLY_INV", 20, 0, 0, 0, 0, 0, 0, 16 },
};

static int popcount(uint32_t v)
{
	return __builtin_popcount(v);
}

int main(void)
{
	static const struct {
		uint32_t bit;
		int len;
	} hdrs[] = {
		{ WIRE_HAS_DETH, WIRE_DETH_LEN }, { WIRE_HAS_XRCETH, WIRE_XRCETH_LEN },
		{ WIRE_HAS_RETH, WIRE_RETH_LEN },
		{ WIRE_HAS_ATMETH, WIRE_ATMETH_LEN }, { WIRE_HAS_AETH, WIRE_AETH_LEN },
		{ WIRE_HAS_ATMACK, WIRE_ATMACK_LEN }, { WIRE_HAS_IMMDT, WIRE_IMMDT_LEN },
		{ WIRE_HAS_IETH, WIRE_IETH_LEN },
	};
	int n_rc = 0, n_uc = 0, n_ud = 0, n_xrc = 0, n_other = 0;

	printf("checking %zu hand-written opcode entries\n", sizeof(expect) / sizeof(expect[0]));
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
		const struct wire_opcode_info *o = &wire_opcodes[expect[i].opcode];

		T_CHECK(o->name && !strcmp(o->name, expect[i].name), "0x%02x named %s, want %s",
			expect[i].opcode, o->name ? o->name : "(none)", expect[i].name);
		T_CHECK(o->hdr_len == expect[i].hdr_len, "%s hdr_len %u want %u",
			expect[i].name, o->hdr_len, expect[i].hdr_len);
		T_CHECK(o->off_reth == expect[i].off_reth && o->off_aeth == expect[i].off_aeth &&
			      o->off_atmeth == expect[i].off_atmeth &&
			      o->off_atmack == expect[i].off_atmack &&
			      o->off_immdt == expect[i].off_immdt &&
			      o->off_deth == expect[i].off_deth && o->off_ieth == expect[i].off_ieth,
			"%s offsets", expect[i].name);
	}

	printf("checking every valid opcode: sizes, offsets in IBTA order, caps\n");
	for (int op = 0; op < 256; op++) {
		const struct wire_opcode_info *o = &wire_opcodes[op];
		uint8_t offs[8] = { o->off_deth, o->off_xrceth, o->off_reth, o->off_atmeth, o->off_aeth,
				    o->off_atmack, o->off_immdt, o->off_ieth };
		uint32_t c = o->caps, pos = WIRE_BTH_LEN;
		uint32_t position = c & (WIRE_IS_FIRST | WIRE_IS_MIDDLE | WIRE_IS_LAST);
		char svc[3];

		if (!o->name) {
			T_CHECK(o->caps == 0 && o->hdr_len == 0, "invalid 0x%02x has data", op);
			continue;
		}
		switch (op & 0xe0) {
		case WIRE_RC: n_rc++; memcpy(svc, "RC", 3); break;
		case WIRE_UC: n_uc++; memcpy(svc, "UC", 3); break;
		case WIRE_UD: n_ud++; memcpy(svc, "UD", 3); break;
		case WIRE_XRC: n_xrc++; memcpy(svc, "XR", 3); break;
		default: n_other++; memcpy(svc, "??", 3); break;
		}
		T_CHECK(!strncmp(o->name, svc, 2), "0x%02x %s in service %s", op, o->name, svc);
		/* Offsets: present headers back to back, in IBTA order. */
		for (int h = 0; h < 8; h++) {
			if (c & hdrs[h].bit) {
				T_CHECK(offs[h] == pos, "%s header %d at %u, want %u", o->name, h,
					offs[h], pos);
				pos += (uint32_t)hdrs[h].len;
			} else {
				T_CHECK(offs[h] == 0, "%s absent header %d has offset", o->name, h);
			}
		}
		T_CHECK(o->hdr_len == pos, "%s hdr_len %u, sum %u", o->name, o->hdr_len, pos);
		T_CHECK(o->hdr_len <= WIRE_MAX_HDR_LEN, "%s longer than WIRE_MAX_HDR_LEN", o->name);
		/* Direction: exactly one. */
		T_CHECK(popcount(c & (WIRE_IS_REQ | WIRE_IS_RESP)) == 1, "%s direction", o->name);
		/* Position: FIRST, MIDDLE, LAST or ONLY (FIRST|LAST). */
		T_CHECK(position == WIRE_IS_FIRST || position == WIRE_IS_MIDDLE ||
			      position == WIRE_IS_LAST ||
			      position == (WIRE_IS_FIRST | WIRE_IS_LAST),
			"%s position bits %x", o->name, position);
		/* Exactly one kind of operation. */
		T_CHECK(popcount(c & (WIRE_IS_SEND | WIRE_IS_WRITE | WIRE_IS_READ |
				    WIRE_IS_ATOMIC | WIRE_IS_ACK | WIRE_IS_ATOMIC_WRITE)) == 1,
			"%s operation kind", o->name);
		/* Payload: sends, writes and read responses only. */
		T_CHECK(!!(c & WIRE_HAS_PAYLOAD) ==
			      !!((c & (WIRE_IS_SEND | WIRE_IS_WRITE | WIRE_IS_ATOMIC_WRITE)) ||
				 ((c & WIRE_IS_READ) && (c & WIRE_IS_RESP))),
			"%s payload bit", o->name);
		/* RETH starts a write, and a read request. */
		if (c & WIRE_IS_WRITE)
			T_CHECK(!!(c & WIRE_HAS_RETH) == !!(c & WIRE_IS_FIRST), "%s RETH", o->name);
		if (c & WIRE_IS_ATOMIC_WRITE)
			T_CHECK((c & WIRE_HAS_RETH) && position == (WIRE_IS_FIRST | WIRE_IS_LAST),
				"%s: RETH, single packet", o->name);
		/* Immediate data only where the message ends. */
		if (c & WIRE_HAS_IMMDT)
			T_CHECK(c & WIRE_IS_LAST, "%s ImmDt not on a last packet", o->name);
		/* DETH on UD and only there. */
		T_CHECK(!!(c & WIRE_HAS_DETH) == ((op & 0xe0) == WIRE_UD), "%s DETH", o->name);
		/* XRCETH on XRC requests and only there. */
		T_CHECK(!!(c & WIRE_HAS_XRCETH) ==
			      ((op & 0xe0) == WIRE_XRC && (c & WIRE_IS_REQ)),
			"%s XRCETH", o->name);
		if (c & WIRE_HAS_XRCETH)
			T_CHECK(o->off_xrceth == WIRE_BTH_LEN, "%s XRCETH right after BTH",
				o->name);
		/* Unreliable services: no reads, atomics, ACKs, invalidates. */
		if ((op & 0xe0) != WIRE_RC && (op & 0xe0) != WIRE_XRC)
			T_CHECK(!(c & (WIRE_IS_READ | WIRE_IS_ATOMIC | WIRE_IS_ACK | WIRE_HAS_IETH |
				     WIRE_IS_RESP | WIRE_IS_ATOMIC_WRITE)),
				"%s is RC-only", o->name);
		if ((op & 0xe0) == WIRE_UD)
			T_CHECK((c & WIRE_IS_SEND) && (position == (WIRE_IS_FIRST | WIRE_IS_LAST)),
				"%s: UD has only SEND_ONLY*", o->name);
		/* The name says what the bits say. */
		T_CHECK(!!strstr(o->name, "_IMM") == !!(c & WIRE_HAS_IMMDT), "%s imm", o->name);
		T_CHECK(!!strstr(o->name, "_INV") == !!(c & WIRE_HAS_IETH), "%s inv", o->name);
		T_CHECK(!!strstr(o->name, "FIRST") == (position == WIRE_IS_FIRST), "%s first",
			o->name);
		T_CHECK(!!strstr(o->name, "LAST") == (position == WIRE_IS_LAST), "%s last", o->name);
		T_CHECK(!!strstr(o->name, "MIDDLE") == (position == WIRE_IS_MIDDLE), "%s middle",
			o->name);
	}
	printf("valid opcodes: RC %d, UC %d, UD %d, XRC %d, other %d\n", n_rc, n_uc, n_ud, n_xrc,
	       n_other);
	T_CHECK(n_rc == 24 && n_uc == 12 && n_ud == 2 && n_xrc == 24 && n_other == 0,
		"opcode counts");
	T_CHECK(!wire_opcodes[0x15].name && !wire_opcodes[0x40].name && !wire_opcodes[0x80].name &&
		      !wire_opcodes[0x81].name && !wire_opcodes[0x2c].name &&
		      !wire_opcodes[0x1c].name && !wire_opcodes[0x3d].name &&
		      !wire_opcodes[0x60].name && !wire_opcodes[0xb5].name &&
		      !wire_opcodes[0xbc].name && !wire_opcodes[0xc0].name,
		"reserved/unsupported opcodes must be invalid");

	return t_summary();
}
