/* Completion timestamps of an extended CQ (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP
 * and _WALLCLOCK) and ibv_query_rt_values_ex: each stamp is taken when the
 * completion is made, not when it is polled (a completion left waiting
 * keeps its early stamp, also across ibv_resize_cq), on the clock
 * query_rt_values reports; both ends of an RC pair, SENDs and WRITEs. */
#include "t_rc.h"

#include <errno.h>

#define TS_FLAGS (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | \
		  IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
#define ROUNDS 40
#define WAIT_NS (30ull * 1000 * 1000) /* a completion left unpolled */

static uint64_t ns_of(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* One completion through the extended interface, up to 10 s; its stamps. */
static int poll_ex(struct ibv_cq *cq, enum ibv_wc_status *st, uint64_t *ts, uint64_t *wall)
{
	/* an ibv_cq_ex begins with the ibv_cq ibv_cq_ex_to_cq gave */
	struct ibv_cq_ex *x = (struct ibv_cq_ex *)(void *)cq;
	struct ibv_poll_cq_attr pa = { 0 };
	uint64_t end = now_ms() + 10000;

	while (now_ms() < end) {
		int r = ibv_start_poll(x, &pa);

		if (r == ENOENT)
			continue;
		if (r)
			return -1;
		*st = x->status;
		*ts = ibv_wc_read_completion_ts(x);
		*wall = ibv_wc_read_completion_wallclock_ns(x);
		ibv_end_poll(x);
		return 0;
	}
	return -1;
}

static void rt_values(struct ibv_context *ctx)
{
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	uint64_t before = ns_of(CLOCK_MONOTONIC), t, after;
	int r = ibv_query_rt_values_ex(ctx, &v);

	after = ns_of(CLOCK_MONOTONIC);
	t = (uint64_t)v.raw_clock.tv_sec * 1000000000ull + (uint64_t)v.raw_clock.tv_nsec;
	CHECK(r == 0 && v.comp_mask == IBV_VALUES_MASK_RAW_CLOCK && t >= before && t <= after,
	      "query_rt_values: %d, mask %u, raw clock inside the call", r, v.comp_mask);
	v.comp_mask = IBV_VALUES_MASK_RESERVED;
	r = ibv_query_rt_values_ex(ctx, &v);
	CHECK(r == 0 && v.comp_mask == 0, "a mask bit it does not know is cleared (%d, %u)", r,
	      v.comp_mask);
	printf("query_rt_values: raw clock is CLOCK_MONOTONIC (%llu ns inside a %llu ns call)\n",
	       (unsigned long long)(t - before), (unsigned long long)(after - before));
}

/* A stamp in [lo, hi] on CLOCK_MONOTONIC, and the wall-clock one the same
 * instant on CLOCK_REALTIME (within 1 ms: the two clocks are read apart). */
static void check_stamp(const char *what, uint64_t ts, uint64_t wall, uint64_t lo, uint64_t hi)
{
	int64_t off = (int64_t)(ns_of(CLOCK_REALTIME) - ns_of(CLOCK_MONOTONIC));
	int64_t d = (int64_t)(wall - ts) - off;

	CHECK(ts >= lo && ts <= hi, "%s: stamp %llu outside [%llu, %llu]", what,
	      (unsigned long long)ts, (unsigned long long)lo, (unsigned long long)hi);
	CHECK(d > -1000000 && d < 1000000, "%s: wall clock off by %lld ns", what, (long long)d);
}

int main(void)
{
	struct t_end a, b;
	struct t_conn ib;
	enum ibv_wc_status st;
	uint64_t ts, wall, t0, t1, send_ts = 0, recv_ts = 0, prev = 0;
	int mono = 1;

	t_cq_wc_flags = IBV_WC_STANDARD_FLAGS | TS_FLAGS;
	t_pair(&a, &b, 14, 7, 7);
	ib = t_info(&b, 200);
	rt_values(a.ctx);

	/* Stamped between post and poll; the requester's completions of one
	 * QP come in order, so their stamps do not go back. */
	for (int i = 0; i < ROUNDS; i++) {
		t0 = ns_of(CLOCK_MONOTONIC);
		CHECK(!post_recv(&b, RECV_OFF, 64, 10), "post_recv");
		CHECK(!post_send(&a, i & 1 ? IBV_WR_RDMA_WRITE : IBV_WR_SEND, 0, 64,
				 ib.addr + RX_OFF, ib.rkey, 0, 1), "post_send");
		CHECK(!poll_ex(a.cq, &st, &ts, &wall) && st == IBV_WC_SUCCESS, "send completion");
		t1 = ns_of(CLOCK_MONOTONIC);
		check_stamp("send", ts, wall, t0, t1);
		mono &= ts >= prev;
		prev = ts;
		if (!(i & 1)) {
			CHECK(!poll_ex(b.cq, &st, &ts, &wall) && st == IBV_WC_SUCCESS, "recv");
			check_stamp("recv", ts, wall, t0, ns_of(CLOCK_MONOTONIC));
		} else {
			/* the WRITE left its receive WQE: take it back with a SEND */
			CHECK(!post_send(&a, IBV_WR_SEND, 0, 8, 0, 0, 0, 2), "post_send");
			CHECK(!poll_ex(a.cq, &st, &ts, &wall) && st == IBV_WC_SUCCESS, "send");
			CHECK(!poll_ex(b.cq, &st, &ts, &wall) && st == IBV_WC_SUCCESS, "recv");
			prev = 0;
		}
	}
	CHECK(mono, "the send completions' stamps never go back");
	printf("%d rounds: every stamp between post and poll, wall clock agrees\n", ROUNDS);

	/* Left unpolled for WAIT_NS, then resized: the stamps are still the
	 * completion's own, WAIT_NS before the poll. */
	CHECK(!post_recv(&b, RECV_OFF, 64, 11), "post_recv");
	t0 = ns_of(CLOCK_MONOTONIC);
	CHECK(!post_send(&a, IBV_WR_SEND, 0, 64, 0, 0, 0, 3), "post_send");
	{
		struct timespec d = { 0, (long)WAIT_NS };

		nanosleep(&d, NULL);
	}
	CHECK(ibv_resize_cq(b.cq, 8192) == 0, "resize the receiver's CQ");
	t1 = ns_of(CLOCK_MONOTONIC);
	CHECK(!poll_ex(a.cq, &st, &send_ts, &wall) && st == IBV_WC_SUCCESS, "send");
	CHECK(!poll_ex(b.cq, &st, &recv_ts, &wall) && st == IBV_WC_SUCCESS, "recv after resize");
	check_stamp("late-polled recv", recv_ts, wall, t0, t1);
	CHECK(send_ts >= t0 && send_ts + WAIT_NS / 2 < t1 && recv_ts + WAIT_NS / 2 < t1,
	      "stamps are when the completions were made: send %lld ns, recv %lld ns "
	      "before a poll %llu ns after the post",
	      (long long)(t1 - send_ts), (long long)(t1 - recv_ts), (unsigned long long)(t1 - t0));
	printf("completions polled %.1f ms late keep their stamps (send %.3f ms, recv %.3f ms "
	       "after the post)\n", (t1 - t0) / 1e6, (send_ts - t0) / 1e6, (recv_ts - t0) / 1e6);

	t_end_fini(&a);
	t_end_fini(&b);
	printf(failures ? "FAIL (%d)\n" : "PASS\n", failures);
	return failures ? 1 : 0;
}
