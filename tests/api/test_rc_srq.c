/* RC receives through a shared receive queue: two requesters SEND (single
 * and multi-packet) to two responder QPs attached to one SRQ; every
 * message lands in a WQE taken from the SRQ in order, with the data, the
 * right qp_num and src_qp.  A responder QP on the SRQ moved to ERR reports
 * IBV_EVENT_QP_LAST_WQE_REACHED. */
#include <poll.h>
#include <stdbool.h>
#include "t_rc.h"

int main(void)
{
	struct t_end a1, a2, r;
	struct ibv_srq *srq;
	struct ibv_qp *rq[2];
	struct ibv_wc wc;
	struct t_conn ia[2], ir[2];
	struct t_end *req[2] = { &a1, &a2 };
	enum { N = 8, SZ = 3000 };

	setvbuf(stdout, NULL, _IONBF, 0);
	alarm(60);
	if (t_end_init(&a1) || t_end_init(&a2) || t_end_init(&r)) {
		printf("SKIP: srn_lo or a verb it needs is not available\n");
		return 77;
	}
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 64, .max_sge = 2 } };

	srq = ibv_create_srq(r.pd, &sa);
	if (!srq) {
		printf("SKIP: ibv_create_srq: %s\n", strerror(errno));
		return 77;
	}
	for (int i = 0; i < 2; i++) {
		rq[i] = t_srq_qp(&r, srq);
		CHECK(rq[i], "srq qp");
		/* reuse t_connect through a t_end view of this QP */
		struct t_end view = r;

		view.qp = rq[i];
		ia[i] = t_info(req[i], 10 + i);
		ir[i] = t_info(&view, 20 + i);
		CHECK(!t_connect(req[i], 10 + i, &ir[i], 14, 7, 7) &&
		      !t_connect(&view, 20 + i, &ia[i], 14, 7, 7), "connect %d", i);
	}
	for (int k = 0; k < 2 * N; k++) {
		struct ibv_sge sge = { (uintptr_t)r.buf + (uint64_t)k * 4096, 4096, r.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 1000 + k, .sg_list = &sge, .num_sge = 1 }, *bad;

		CHECK(!ibv_post_srq_recv(srq, &wr, &bad), "post_srq_recv");
	}
	/* interleave the two senders; MTU 1024 makes 3000 bytes 3 packets */
	for (int k = 0; k < N; k++)
		for (int i = 0; i < 2; i++) {
			uint32_t len = (k & 1) ? SZ : 100;

			fill(req[i]->buf + k * 4096, len, (unsigned)(k * 2 + i));
			CHECK(!post_send(req[i], IBV_WR_SEND, (uint64_t)k * 4096, len, 0, 0, 0,
					 (uint64_t)k), "post_send");
		}
	int seen[2] = { 0, 0 };

	for (int k = 0; k < 2 * N; k++) {
		CHECK(!t_wait(r.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV,
		      "srq recv %d: %s", k, ibv_wc_status_str(wc.status));
		if (wc.status != IBV_WC_SUCCESS)
			break;
		int i = wc.qp_num == rq[0]->qp_num ? 0 : 1;
		int m = seen[i]++;
		uint32_t len = (m & 1) ? SZ : 100;
		uint8_t expect[SZ];
		uint64_t slot = wc.wr_id - 1000;

		CHECK(wc.qp_num == rq[i]->qp_num && wc.src_qp == req[i]->qp->qp_num,
		      "qp_num/src_qp");
		CHECK(wc.wr_id == 1000 + (uint64_t)k, "SRQ WQEs taken in order (%llu at %d)",
		      (unsigned long long)wc.wr_id, k);
		CHECK(wc.byte_len == len, "byte_len %u want %u", wc.byte_len, len);
		fill(expect, len, (unsigned)(m * 2 + i));
		CHECK(!memcmp(expect, r.buf + slot * 4096, len), "data of message %d from %d", m, i);
	}
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < N; k++)
			CHECK(!t_wait(req[i]->cq, &wc) && wc.status == IBV_WC_SUCCESS, "send wc");
	printf("2 requesters x %d SENDs (1 and 3 packets) through one SRQ: data, order, qp_num ok\n", N);

	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	struct pollfd pf = { .fd = r.ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	bool got = false;

	CHECK(!ibv_modify_qp(rq[0], &at, IBV_QP_STATE), "to ERR");
	for (int k = 0; k < 4 && !got && poll(&pf, 1, 2000) == 1; k++) {
		if (ibv_get_async_event(r.ctx, &ev))
			break;
		printf("async event: %s\n", ibv_event_type_str(ev.event_type));
		got = ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ev.element.qp == rq[0];
		ibv_ack_async_event(&ev);
	}
	CHECK(got, "LAST_WQE_REACHED");
	printf("SRQ QP moved to ERR: IBV_EVENT_QP_LAST_WQE_REACHED\n");
	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
