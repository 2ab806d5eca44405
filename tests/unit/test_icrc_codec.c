/* The codec without memset(): wire_decode clears struct wire_pkt member by
 * member (wire_pkt_clear) and wire_encode_hdrs zeroes its whole
 * WIRE_MAX_HDR_LEN output.  Checks that nothing depends on what was there
 * before: wire_pkt_clear zeroes every member of a struct full of ones;
 * for every valid opcode, random headers decode the same into a struct
 * full of ones as into a zeroed one, and encode to the same bytes into a
 * buffer full of ones as into a zeroed one (zeros after the headers);
 * and a decode/encode round trip gives back the packet's header bytes
 * (DETH's reserved byte aside: the struct does not keep it). */
#include <stdio.h>
#include <string.h>

#include "tests/lib/t_util.h"
#include "wire/wire.h"

static void test_clear(void)
{
	struct wire_pkt p;

	printf("wire_pkt_clear zeroes every member\n");
	memset(&p, 0xff, sizeof(p));
	wire_pkt_clear(&p);
	T_CHECK(p.opcode == 0 && !p.se && !p.mig && p.padcnt == 0 && p.tver == 0 &&
		p.pkey == 0 && p.resv8 == 0 && p.dqpn == 0 && !p.ackreq && p.resv7 == 0 &&
		p.psn == 0, "BTH members");
	T_CHECK(p.va == 0 && p.rkey == 0 && p.dma_len == 0 && p.swap_add == 0 &&
		p.compare == 0, "RETH / AtomicETH members");
	T_CHECK(p.syndrome == 0 && p.msn == 0 && p.orig == 0, "AETH / AtomicAckETH members");
	T_CHECK(p.imm_be == 0 && p.ieth_rkey == 0 && p.qkey == 0 && p.sqpn == 0,
		"ImmDt / IETH / DETH members");
	T_CHECK(p.payload == NULL && p.payload_len == 0 && p.icrc == 0, "payload members");
}

/* Member-wise equality (padding may differ). */
static bool same_pkt(const struct wire_pkt *a, const struct wire_pkt *b)
{
	return a->opcode == b->opcode && a->se == b->se && a->mig == b->mig &&
	       a->padcnt == b->padcnt && a->tver == b->tver && a->pkey == b->pkey &&
	       a->resv8 == b->resv8 && a->dqpn == b->dqpn && a->ackreq == b->ackreq &&
	       a->resv7 == b->resv7 && a->psn == b->psn && a->va == b->va &&
	       a->rkey == b->rkey && a->dma_len == b->dma_len && a->swap_add == b->swap_add &&
	       a->compare == b->compare && a->syndrome == b->syndrome && a->msn == b->msn &&
	       a->orig == b->orig && a->imm_be == b->imm_be && a->ieth_rkey == b->ieth_rkey &&
	       a->qkey == b->qkey && a->sqpn == b->sqpn && a->payload == b->payload &&
	       a->payload_len == b->payload_len && a->icrc == b->icrc;
}

static void test_dirty_buffers(void)
{
	int opcodes = 0;

	printf("every opcode, 64 random header sets each: decode into a dirty struct, encode\n"
	       "  into a dirty buffer, round trip\n");
	for (int op = 0; op < 256; op++) {
		const struct wire_opcode_info *o = &wire_opcodes[op];

		if (!o->name)
			continue;
		opcodes++;
		for (int round = 0; round < 64; round++) {
			uint8_t pkt[WIRE_MAX_HDR_LEN + 8 + WIRE_ICRC_LEN];
			uint8_t clean[WIRE_MAX_HDR_LEN], dirty[WIRE_MAX_HDR_LEN];
			struct wire_pkt a, b;
			size_t len;
			int ra, rb, na, nb;

			for (size_t i = 0; i < sizeof(pkt); i++)
				pkt[i] = (uint8_t)t_rand();
			pkt[0] = (uint8_t)op;
			pkt[1] &= 0xf0; /* TVer 0 */
			/* payload-carrying opcodes get 8 bytes (an atomic write
			 * needs exactly that), pad 0; the rest none */
			pkt[1] &= 0xcf;
			len = o->hdr_len + ((o->caps & WIRE_HAS_PAYLOAD) ? 8 : 0) + WIRE_ICRC_LEN;
			memset(&a, 0, sizeof(a));
			memset(&b, 0xff, sizeof(b));
			ra = wire_decode(pkt, len, &a);
			rb = wire_decode(pkt, len, &b);
			T_CHECK(ra == 0 && rb == 0, "%s: decode %d %d", o->name, ra, rb);
			T_CHECK(same_pkt(&a, &b), "%s: decode depends on the struct's old bytes",
				o->name);
			memset(clean, 0, sizeof(clean));
			memset(dirty, 0xff, sizeof(dirty));
			na = wire_encode_hdrs(clean, &a);
			nb = wire_encode_hdrs(dirty, &a);
			T_CHECK(na == o->hdr_len && nb == na, "%s: encode %d %d", o->name, na, nb);
			T_CHECK(!memcmp(clean, dirty, sizeof(clean)),
				"%s: encode depends on the buffer's old bytes", o->name);
			for (int i = 0; i < na; i++)
				/* (reserved bytes of DETH and XRCETH are not kept) */
				if (!(o->off_deth && i == o->off_deth + 4) &&
				    !(o->off_xrceth && i == o->off_xrceth))
					T_CHECK(clean[i] == pkt[i], "%s: round trip byte %d", o->name, i);
			for (int i = na; i < WIRE_MAX_HDR_LEN; i++)
				T_CHECK(dirty[i] == 0, "%s: byte %d after the headers", o->name, i);
		}
	}
	printf("  %d opcodes\n", opcodes);
}

int main(void)
{
	t_rand_seed(0xc0dec0deull);
	test_clear();
	test_dirty_buffers();
	return t_summary();
}
