/* CQ internals driven through srn_cq_push (what the transport calls):
 * FIFO order, arming (next completion / solicited-only, which an error
 * completion also fires), one event per arm, overrun -> -ENOSPC and one
 * IBV_EVENT_CQ_ERR, resize keeping entries, the ibv_cq_ex
 * start_poll/next_poll/end_poll/read_* path, destroy blocking until the
 * received events are acked, and destroy taking back unread events. */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/t_verbs.h"
#include "verbs/datapath.h"

static int push(struct ibv_cq *cq, uint64_t id, enum ibv_wc_status st, bool sol)
{
	struct ibv_wc wc = { .wr_id = id, .status = st, .opcode = IBV_WC_RECV,
			     .byte_len = (uint32_t)id * 10, .qp_num = 0x99 };

	return srn_cq_push(srn_cq(cq), &wc, sol);
}

static int readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0);
}

static int destroy_cq(void *cq)
{
	return ibv_destroy_cq(cq);
}

int main(void)
{
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *ev;
	struct ibv_wc wc[8];
	struct ibv_async_event ae;
	void *evctx;
	int i, n, fl, cq_errs;

	ctx = t_lo_open();
	ch = ibv_create_comp_channel(ctx);
	cq = ibv_create_cq(ctx, 4, (void *)0x1234, ch, 0);
	T_OK(ch && cq && cq->cqe == 4, "channel and a 4-entry CQ");
	if (!ch || !cq)
		return 1;
	fl = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);

	/* arming */
	T_OK(push(cq, 1, IBV_WC_SUCCESS, false) == 0 && !readable(ch->fd), "unarmed push: no event");
	ibv_req_notify_cq(cq, 0);
	T_OK(push(cq, 2, IBV_WC_SUCCESS, false) == 0 && readable(ch->fd) == 1, "armed push: event");
	T_OK(ibv_get_cq_event(ch, &ev, &evctx) == 0 && ev == cq && evctx == (void *)0x1234,
	     "event names the CQ and its context");
	T_OK(!readable(ch->fd), "one event per arm");
	n = ibv_poll_cq(cq, 8, wc);
	T_OK(n == 2 && wc[0].wr_id == 1 && wc[1].wr_id == 2 && wc[1].byte_len == 20,
	     "FIFO order (%d entries)", n);
	T_OK(push(cq, 3, IBV_WC_SUCCESS, false) == 0 && !readable(ch->fd), "disarmed after firing");
	ibv_req_notify_cq(cq, 1);
	T_OK(push(cq, 4, IBV_WC_SUCCESS, false) == 0 && !readable(ch->fd),
	     "solicited-only arm ignores an unsolicited success");
	T_OK(push(cq, 5, IBV_WC_SUCCESS, true) == 0 && readable(ch->fd) == 1,
	     "solicited completion fires it");
	T_OK(ibv_get_cq_event(ch, &ev, &evctx) == 0, "take event");
	ibv_poll_cq(cq, 8, wc);
	ibv_req_notify_cq(cq, 1);
	T_OK(push(cq, 6, IBV_WC_REM_ACCESS_ERR, false) == 0 && readable(ch->fd) == 1,
	     "an error completion fires a solicited-only arm");
	T_OK(ibv_get_cq_event(ch, &ev, &evctx) == 0, "take event");
	ibv_poll_cq(cq, 8, wc);

	/* overrun */
	for (i = 0; i < 4; i++)
		push(cq, 10 + i, IBV_WC_SUCCESS, false);
	T_OK(push(cq, 20, IBV_WC_SUCCESS, false) == -ENOSPC, "push into a full CQ -> -ENOSPC");
	T_OK(push(cq, 21, IBV_WC_SUCCESS, false) == -ENOSPC, "still full -> -ENOSPC");
	fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	cq_errs = 0;
	while (ibv_get_async_event(ctx, &ae) == 0) {
		if (ae.event_type == IBV_EVENT_CQ_ERR && ae.element.cq == cq)
			cq_errs++;
		ibv_ack_async_event(&ae);
	}
	T_OK(cq_errs == 1, "exactly one IBV_EVENT_CQ_ERR (%d)", cq_errs);
	n = ibv_poll_cq(cq, 8, wc);
	T_OK(n == 4 && wc[0].wr_id == 10 && wc[3].wr_id == 13, "the 4 queued entries survive");

	/* destroy waits for acks (3 events taken, none acked yet) */
	{
		struct t_bg bg;

		t_bg_start(&bg, destroy_cq, cq);
		usleep(50000);
		T_OK(!t_bg_done(&bg), "destroy_cq blocks while received events are unacked");
		ibv_ack_cq_events(cq, 2);
		usleep(20000);
		T_OK(!t_bg_done(&bg), "still blocked with one unacked");
		ibv_ack_cq_events(cq, 1);
		T_OK(t_bg_wait(&bg, 1000) && bg.ret == 0, "destroy_cq returns once all are acked");
	}

	/* destroy takes back an unread event */
	cq = ibv_create_cq(ctx, 8, NULL, ch, 0);
	ibv_req_notify_cq(cq, 0);
	push(cq, 1, IBV_WC_SUCCESS, false);
	T_OK(readable(ch->fd) == 1, "event pending");
	T_OK(ibv_destroy_cq(cq) == 0, "destroy with an unread event does not block");
	T_OK(!readable(ch->fd), "the unread event is gone with its CQ");
	errno = 0;
	T_OK(ibv_get_cq_event(ch, &ev, &evctx) == -1 && errno == EAGAIN, "nothing to get");

	/* resize keeps entries */
	cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	for (i = 0; i < 5; i++)
		push(cq, 100 + i, IBV_WC_SUCCESS, false);
	ibv_poll_cq(cq, 2, wc); /* head moves: entries wrap in the new ring */
	for (i = 5; i < 9; i++)
		push(cq, 100 + i, IBV_WC_SUCCESS, false);
	T_OK(ibv_resize_cq(cq, 4) == EINVAL, "resize below the 7 waiting entries -> EINVAL");
	T_OK(ibv_resize_cq(cq, 30) == 0 && cq->cqe >= 30, "resize up");
	n = ibv_poll_cq(cq, 8, wc);
	T_OK(n == 7 && wc[0].wr_id == 102 && wc[6].wr_id == 108, "entries kept in order (%d)", n);
	ibv_destroy_cq(cq);

	/* ibv_cq_ex polling */
	{
		struct ibv_cq_init_attr_ex ca = { .cqe = 8, .wc_flags = IBV_WC_STANDARD_FLAGS };
		struct ibv_poll_cq_attr pa = { 0 };
		struct ibv_cq_ex *cx = ibv_create_cq_ex(ctx, &ca);
		struct ibv_wc w = { .wr_id = 7, .status = IBV_WC_SUCCESS,
				    .opcode = IBV_WC_RECV_RDMA_WITH_IMM, .byte_len = 4096,
				    .imm_data = htobe32(0xabcd), .qp_num = 0x42, .src_qp = 0x43,
				    .wc_flags = IBV_WC_WITH_IMM, .slid = 0, .sl = 3 };

		T_OK(cx != NULL, "create_cq_ex");
		if (!cx)
			return 1;
		T_OK(ibv_start_poll(cx, &pa) == ENOENT, "empty -> ENOENT");
		srn_cq_push(srn_cq(ibv_cq_ex_to_cq(cx)), &w, false);
		w.wr_id = 8;
		w.status = IBV_WC_LOC_LEN_ERR;
		srn_cq_push(srn_cq(ibv_cq_ex_to_cq(cx)), &w, false);
		T_OK(ibv_start_poll(cx, &pa) == 0 && cx->wr_id == 7 && cx->status == IBV_WC_SUCCESS,
		     "start_poll: first entry");
		T_OK(ibv_wc_read_opcode(cx) == IBV_WC_RECV_RDMA_WITH_IMM &&
		     ibv_wc_read_byte_len(cx) == 4096 &&
		     ibv_wc_read_imm_data(cx) == htobe32(0xabcd) &&
		     ibv_wc_read_qp_num(cx) == 0x42 && ibv_wc_read_src_qp(cx) == 0x43 &&
		     (ibv_wc_read_wc_flags(cx) & IBV_WC_WITH_IMM) && ibv_wc_read_sl(cx) == 3,
		     "read_* accessors");
		T_OK(ibv_next_poll(cx) == 0 && cx->wr_id == 8 && cx->status == IBV_WC_LOC_LEN_ERR,
		     "next_poll: second entry");
		T_OK(ibv_next_poll(cx) == ENOENT, "next_poll at the end -> ENOENT");
		ibv_end_poll(cx);
		T_OK(ibv_start_poll(cx, &pa) == ENOENT, "consumed");
		T_OK(ibv_destroy_cq(ibv_cq_ex_to_cq(cx)) == 0, "destroy cq_ex");
	}

	T_OK(ibv_destroy_comp_channel(ch) == 0, "destroy channel");
	ibv_close_device(ctx);
	t_lo_free();
	return t_summary();
}
