/* SRQ internals driven through srn_srq_take (what the transport calls
 * for every receive on a QP attached to an SRQ): FIFO order, -ENOENT
 * when empty, IBV_EVENT_SRQ_LIMIT_REACHED exactly once when the count
 * drops below an armed limit (then the limit reads 0), re-arming, order
 * kept across a resize with WQEs wrapped in the ring, and destroy
 * waiting until the event was acked. */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/t_verbs.h"
#include "verbs/datapath.h"

static int post(struct ibv_srq *srq, uint64_t first, int n)
{
	static char buf[64];
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = sizeof(buf) };
	struct ibv_recv_wr wr, *bad;
	int i, err;

	for (i = 0; i < n; i++) {
		wr = (struct ibv_recv_wr){ .wr_id = first + (uint64_t)i,
					   .sg_list = &sge, .num_sge = 1 };
		err = ibv_post_srq_recv(srq, &wr, &bad);
		if (err)
			return err;
	}
	return 0;
}

/* Limit events queued for srq (non-blocking async_fd); acks them. */
static int limit_events(struct ibv_context *ctx, struct ibv_srq *srq)
{
	struct ibv_async_event ev;
	int n = 0;

	while (ibv_get_async_event(ctx, &ev) == 0) {
		if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq)
			n++;
		ibv_ack_async_event(&ev);
	}
	return n;
}

static int destroy_srq(void *srq)
{
	return ibv_destroy_srq(srq);
}

int main(void)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_srq *srq;
	struct ibv_srq_init_attr ia = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq_attr sa;
	struct srn_recv_wqe w;
	struct ibv_async_event ev;
	struct t_bg bg;
	uint64_t expect;
	int i, ok, fl;

	ctx = t_lo_open();
	fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	pd = ibv_alloc_pd(ctx);
	srq = pd ? ibv_create_srq(pd, &ia) : NULL;
	T_OK(srq && ia.attr.max_wr == 8, "SRQ of 8");
	if (!srq)
		return 1;

	T_OK(srn_srq_take(srn_srq(srq), &w) == -ENOENT, "take from empty -> -ENOENT");
	T_OK(post(srq, 100, 8) == 0 && srn_srq_count(srn_srq(srq)) == 8, "post 8");
	sa.srq_limit = 4;
	T_OK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == 0, "arm limit 4");
	ok = 1;
	for (i = 0; i < 4; i++)
		ok &= srn_srq_take(srn_srq(srq), &w) == 0 && w.wr_id == 100 + (uint64_t)i &&
		      w.num_sge == 1 && w.length == 64;
	T_OK(ok, "take 4 in FIFO order with their scatter lists");
	T_OK(limit_events(ctx, srq) == 0, "4 left (not below 4): no event");
	T_OK(srn_srq_take(srn_srq(srq), &w) == 0 && w.wr_id == 104, "take the 5th");
	T_OK(limit_events(ctx, srq) == 1, "3 left: one SRQ_LIMIT_REACHED naming the SRQ");
	T_OK(ibv_query_srq(srq, &sa) == 0 && sa.srq_limit == 0, "limit disarmed (reads 0)");
	srn_srq_take(srn_srq(srq), &w);
	srn_srq_take(srn_srq(srq), &w);
	T_OK(limit_events(ctx, srq) == 0, "no second event while disarmed");

	/* re-arm: 1 left, limit 2 -> next take fires (0 < 2) */
	sa.srq_limit = 2;
	T_OK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == 0, "re-arm limit 2 with 1 posted");
	T_OK(limit_events(ctx, srq) == 0, "arming alone raises nothing");
	T_OK(srn_srq_take(srn_srq(srq), &w) == 0 && w.wr_id == 107, "take the last");
	T_OK(limit_events(ctx, srq) == 1, "event again after re-arming");
	T_OK(srn_srq_take(srn_srq(srq), &w) == -ENOENT, "empty again");

	/* wrap the ring, then grow it: order must survive */
	T_OK(post(srq, 200, 8) == 0, "post 8 more (ring wraps)");
	for (i = 0; i < 3; i++)
		srn_srq_take(srn_srq(srq), &w);
	sa.max_wr = 64;
	T_OK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) == 0 && sa.max_wr == 64, "grow to 64");
	T_OK(post(srq, 208, 20) == 0, "post 20 into the larger ring");
	ok = 1;
	expect = 203;
	while (srn_srq_take(srn_srq(srq), &w) == 0 && expect < 300)
		ok &= w.wr_id == expect++;
	T_OK(ok && expect == 228, "FIFO across the resize (203..227, got up to %llu)",
	     (unsigned long long)expect);

	/* destroy waits for the ack of a reported event */
	post(srq, 300, 2);
	sa.srq_limit = 2;
	ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT);
	srn_srq_take(srn_srq(srq), &w);
	T_OK(ibv_get_async_event(ctx, &ev) == 0 &&
	     ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED, "event taken, not acked yet");
	t_bg_start(&bg, destroy_srq, srq);
	usleep(100 * 1000);
	T_OK(!t_bg_done(&bg), "destroy blocks while the event is unacked");
	ibv_ack_async_event(&ev);
	T_OK(t_bg_wait(&bg, 2000) && bg.ret == 0, "destroy completes after the ack");

	T_OK(ibv_dealloc_pd(pd) == 0, "PD free");
	ibv_close_device(ctx);
	t_lo_free();
	return t_summary();
}
