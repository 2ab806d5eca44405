/* examples/atomics: FETCH_AND_ADD and COMPARE_AND_SWAP.
 *
 * An atomic works on one aligned 64-bit word in the peer's memory and
 * returns the value it found there into the requester's own buffer (8
 * bytes, so that buffer must allow LOCAL_WRITE).  No other atomic on the
 * same device sees the word half updated.
 *
 *   FETCH_AND_ADD(add):          old = *p; *p = old + add; return old
 *   COMPARE_AND_SWAP(cmp, swap): old = *p; if (old == cmp) *p = swap; return old
 *
 * The caller tells whether a compare-and-swap won by comparing the
 * returned old value with cmp.
 *
 * Run: softrnic run -- build/examples/atomics [-d srn_lo]
 * Set-up (device, PD, MR, CQ, QP, connection) is in ex_common.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ex_common.h"

#define START 1000u /* the server's counter before the client starts */

/* Posts one atomic on the server's counter; returns the value it found. */
static uint64_t atomic_op(struct ex_side *s, enum ibv_wr_opcode op, uint64_t a, uint64_t b)
{
	uint64_t *result = (uint64_t *)s->buf;
	struct ibv_sge sge = { .addr = (uintptr_t)result, .length = 8, .lkey = s->mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED,
		.wr.atomic = { .remote_addr = s->peer.addr, .rkey = s->peer.rkey,
			       .compare_add = a, .swap = b },
	};

	*result = 0xdeadbeef;
	ex_post_send(s, &wr);
	ex_wait_wc(s, op == IBV_WR_ATOMIC_FETCH_AND_ADD ? IBV_WC_FETCH_ADD : IBV_WC_COMP_SWAP);
	return *result; /* the old value, in host byte order */
}

static void expect(struct ex_side *s, const char *what, uint64_t got, uint64_t want)
{
	if (got != want)
		ex_fail(s, "%s returned %" PRIu64 ", expected %" PRIu64, what, got, want);
	ex_say(s, "%-36s -> old value %" PRIu64, what, got);
}

static void client(struct ex_side *s)
{
	ex_open(s, 4096, IBV_ACCESS_LOCAL_WRITE, 0);
	ex_connect(s);
	ex_sync(s); /* the counter is set */

	expect(s, "FETCH_AND_ADD +5", atomic_op(s, IBV_WR_ATOMIC_FETCH_AND_ADD, 5, 0), START);
	expect(s, "FETCH_AND_ADD +10", atomic_op(s, IBV_WR_ATOMIC_FETCH_AND_ADD, 10, 0),
	       START + 5);
	/* Right guess: the swap happens. */
	expect(s, "COMPARE_AND_SWAP 1015 -> 42",
	       atomic_op(s, IBV_WR_ATOMIC_CMP_AND_SWP, START + 15, 42), START + 15);
	/* Wrong guess: memory unchanged, and the old value says why. */
	expect(s, "COMPARE_AND_SWAP 7 -> 99 (loses)",
	       atomic_op(s, IBV_WR_ATOMIC_CMP_AND_SWP, 7, 99), 42);
	ex_sync(s);
	ex_sync(s); /* the server has checked */
	ex_close(s);
}

static void server(struct ex_side *s)
{
	ex_open(s, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC,
		IBV_ACCESS_REMOTE_ATOMIC);
	ex_connect(s);
	volatile uint64_t *counter = (volatile uint64_t *)s->buf; /* 8-byte aligned */
	*counter = START;
	ex_sync(s);
	ex_sync(s);
	if (*counter != 42)
		ex_fail(s, "counter is %" PRIu64 " after the client's atomics, expected 42",
			(uint64_t)*counter);
	ex_say(s, "counter: %u -> %" PRIu64 " (+5, +10, swapped to 42, swap to 99 refused)",
	       START, (uint64_t)*counter);
	ex_sync(s);
	ex_close(s);
}

int main(int argc, char **argv)
{
	return ex_run(argc, argv, server, client);
}
