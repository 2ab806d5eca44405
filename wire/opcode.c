/* The opcode table: which headers each IB opcode carries and where they
 * sit, for the services softrnic speaks (RC, UC, UD, XRC).
 *
 * Nothing here is summed by hand: an opcode lists its capability bits, and
 * every offset is computed at compile time from the ordered list of
 * extension headers below (IBTA Vol 1 9.2-9.5: BTH, then DETH, XRCETH,
 * RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH, in that order).
 */
#include "wire/wire.h"

/* The extension headers in wire order: X(caps, rank, its position, its
 * presence bit, its length); caps and rank pass through to X. */
#define WIRE_EXT_HEADERS(X, caps, rank)                       \
	X(caps, rank, 1, WIRE_HAS_DETH, WIRE_DETH_LEN)        \
	X(caps, rank, 2, WIRE_HAS_XRCETH, WIRE_XRCETH_LEN)    \
	X(caps, rank, 3, WIRE_HAS_RETH, WIRE_RETH_LEN)        \
	X(caps, rank, 4, WIRE_HAS_ATMETH, WIRE_ATMETH_LEN)    \
	X(caps, rank, 5, WIRE_HAS_AETH, WIRE_AETH_LEN)        \
	X(caps, rank, 6, WIRE_HAS_ATMACK, WIRE_ATMACK_LEN)    \
	X(caps, rank, 7, WIRE_HAS_IMMDT, WIRE_IMMDT_LEN)      \
	X(caps, rank, 8, WIRE_HAS_IETH, WIRE_IETH_LEN)

/* Length of the present headers that come before position `rank`. */
#define LEN_BEFORE(caps, rank, r, bit, len) \
	+(((r) < (rank) && ((caps) & (bit))) ? (len) : 0)
#define OFFSET_AT(caps, rank) \
	(WIRE_BTH_LEN WIRE_EXT_HEADERS(LEN_BEFORE, caps, rank))
#define OFF_IF(caps, bit, rank) (((caps) & (bit)) ? OFFSET_AT(caps, rank) : 0)

/* Capabilities of each operation, shared by every service that has it. */
#define REQ WIRE_IS_REQ
#define RESP WIRE_IS_RESP
#define DATA WIRE_HAS_PAYLOAD
#define ONLY (WIRE_IS_FIRST | WIRE_IS_LAST)
#define SEND_CAPS (REQ | DATA | WIRE_IS_SEND)
#define WRITE_CAPS (REQ | DATA | WIRE_IS_WRITE)
#define RRESP_CAPS (RESP | DATA | WIRE_IS_READ)

/* X(op, caps): send and write, the operations of every service. */
#define WIRE_SEND_OPS(X)                                                       \
	X(SEND_FIRST, SEND_CAPS | WIRE_IS_FIRST)                               \
	X(SEND_MIDDLE, SEND_CAPS | WIRE_IS_MIDDLE)                             \
	X(SEND_LAST, SEND_CAPS | WIRE_IS_LAST)                                 \
	X(SEND_LAST_IMM, SEND_CAPS | WIRE_IS_LAST | WIRE_HAS_IMMDT)            \
	X(SEND_ONLY, SEND_CAPS | ONLY)                                         \
	X(SEND_ONLY_IMM, SEND_CAPS | ONLY | WIRE_HAS_IMMDT)
#define WIRE_WRITE_OPS(X)                                                      \
	X(WRITE_FIRST, WRITE_CAPS | WIRE_IS_FIRST | WIRE_HAS_RETH)             \
	X(WRITE_MIDDLE, WRITE_CAPS | WIRE_IS_MIDDLE)                           \
	X(WRITE_LAST, WRITE_CAPS | WIRE_IS_LAST)                               \
	X(WRITE_LAST_IMM, WRITE_CAPS | WIRE_IS_LAST | WIRE_HAS_IMMDT)          \
	X(WRITE_ONLY, WRITE_CAPS | ONLY | WIRE_HAS_RETH)                       \
	X(WRITE_ONLY_IMM, WRITE_CAPS | ONLY | WIRE_HAS_RETH | WIRE_HAS_IMMDT)
/* Reliable-only operations (IBTA Table 36: RC column; ATOMIC_WRITE from
 * the 1.5 memory placement extensions, in rdma-core v44's verbs.h).
 * FLUSH (0x1c) needs a FETH and has no verb in v44: not supported. */
#define WIRE_RC_ONLY_OPS(X)                                                    \
	X(READ_REQ, REQ | WIRE_IS_READ | ONLY | WIRE_HAS_RETH)                 \
	X(READ_RESP_FIRST, RRESP_CAPS | WIRE_IS_FIRST | WIRE_HAS_AETH)         \
	X(READ_RESP_MIDDLE, RRESP_CAPS | WIRE_IS_MIDDLE)                       \
	X(READ_RESP_LAST, RRESP_CAPS | WIRE_IS_LAST | WIRE_HAS_AETH)           \
	X(READ_RESP_ONLY, RRESP_CAPS | ONLY | WIRE_HAS_AETH)                   \
	X(ACK, RESP | WIRE_IS_ACK | ONLY | WIRE_HAS_AETH)                      \
	X(ATOMIC_ACK, RESP | WIRE_IS_ATOMIC | ONLY | WIRE_HAS_AETH |            \
			      WIRE_HAS_ATMACK)                                 \
	X(CMP_SWAP, REQ | WIRE_IS_ATOMIC | ONLY | WIRE_HAS_ATMETH)             \
	X(FETCH_ADD, REQ | WIRE_IS_ATOMIC | ONLY | WIRE_HAS_ATMETH)            \
	X(SEND_LAST_INV, SEND_CAPS | WIRE_IS_LAST | WIRE_HAS_IETH)             \
	X(SEND_ONLY_INV, SEND_CAPS | ONLY | WIRE_HAS_IETH)                     \
	X(ATOMIC_WRITE, REQ | DATA | WIRE_IS_ATOMIC_WRITE | ONLY | WIRE_HAS_RETH)
/* UD has only the unsegmented sends, each with a DETH. */
#define WIRE_UD_OPS(X)                                                         \
	X(SEND_ONLY, SEND_CAPS | ONLY | WIRE_HAS_DETH)                         \
	X(SEND_ONLY_IMM, SEND_CAPS | ONLY | WIRE_HAS_DETH | WIRE_HAS_IMMDT)

#define OPCODE(svc, op, c)                                                 \
	[WIRE_##svc | WIRE_##op] = {                                       \
		.name = #svc " " #op,                                      \
		.caps = (c),                                               \
		.hdr_len = OFFSET_AT(c, 99),                               \
		.off_deth = OFF_IF(c, WIRE_HAS_DETH, 1),                   \
		.off_xrceth = OFF_IF(c, WIRE_HAS_XRCETH, 2),               \
		.off_reth = OFF_IF(c, WIRE_HAS_RETH, 3),                   \
		.off_atmeth = OFF_IF(c, WIRE_HAS_ATMETH, 4),               \
		.off_aeth = OFF_IF(c, WIRE_HAS_AETH, 5),                   \
		.off_atmack = OFF_IF(c, WIRE_HAS_ATMACK, 6),               \
		.off_immdt = OFF_IF(c, WIRE_HAS_IMMDT, 7),                 \
		.off_ieth = OFF_IF(c, WIRE_HAS_IETH, 8),                   \
	},
#define RC_OP(op, c) OPCODE(RC, op, c)
#define UC_OP(op, c) OPCODE(UC, op, c)
#define UD_OP(op, c) OPCODE(UD, op, c)
/* XRC: RC's operations; every request also names the SRQ its message is
 * for in an XRCETH (responses carry none). */
#define XRC_OP(op, c) OPCODE(XRC, op, ((c) & WIRE_IS_REQ) ? (c) | WIRE_HAS_XRCETH : (c))

const struct wire_opcode_info wire_opcodes[256] = {
	WIRE_SEND_OPS(RC_OP)
	WIRE_WRITE_OPS(RC_OP)
	WIRE_RC_ONLY_OPS(RC_OP)
	WIRE_SEND_OPS(UC_OP)
	WIRE_WRITE_OPS(UC_OP)
	WIRE_UD_OPS(UD_OP)
	WIRE_SEND_OPS(XRC_OP)
	WIRE_WRITE_OPS(XRC_OP)
	WIRE_RC_ONLY_OPS(XRC_OP)
};
