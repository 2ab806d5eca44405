/* CQs and completion channels, black-box: cqe range and rounding,
 * comp_vector range, resize, destroy EBUSY while a QP uses the CQ, channel
 * EBUSY while a CQ uses it, the channel fd with poll/epoll and O_NONBLOCK
 * (ibv_get_cq_event -> -1/EAGAIN), ibv_create_cq_ex flag checks and the
 * start_poll path on an empty CQ, and a completion produced for real: a
 * receive posted on a QP in ERR is flushed into the CQ, wakes the armed
 * channel, and is acked before the CQ is destroyed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

static struct ibv_cq *mkcq(struct ibv_context *c, int cqe, struct ibv_comp_channel *ch,
			   int vec, int *err)
{
	struct ibv_cq *cq;

	errno = 0;
	cq = ibv_create_cq(c, cqe, NULL, ch, vec);
	*err = cq ? 0 : errno;
	return cq;
}

int main(void)
{
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *cq2, *evcq;
	struct ibv_cq_ex *cqx;
	struct ibv_cq_init_attr_ex cx;
	struct ibv_poll_cq_attr pa = { 0 };
	struct ibv_pd *pd;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	struct pollfd pfd;
	void *evctx;
	int err, fl, ep, n;

	ctx = t_lo_open();
	pd = ibv_alloc_pd(ctx);

	/* create / resize */
	cq = mkcq(ctx, 0, NULL, 0, &err);
	T_OK(!cq && err == EINVAL, "cqe 0 -> EINVAL");
	cq = mkcq(ctx, (1 << 20) + 1, NULL, 0, &err);
	T_OK(!cq && err == EINVAL, "cqe above max_cqe -> EINVAL");
	cq = mkcq(ctx, 4, NULL, ctx->num_comp_vectors, &err);
	T_OK(!cq && err == EINVAL, "comp_vector == num_comp_vectors -> EINVAL");
	cq = mkcq(ctx, 5, NULL, 0, &err);
	T_OK(cq && cq->cqe >= 5 && cq->context == ctx, "cqe 5 -> cq->cqe %d", cq ? cq->cqe : -1);
	if (!cq)
		return 1;
	T_OK(ibv_poll_cq(cq, 4, &wc) == 0, "empty CQ polls 0");
	T_OK(ibv_resize_cq(cq, 100) == 0 && cq->cqe >= 100, "resize to 100 -> %d", cq->cqe);
	T_OK(ibv_resize_cq(cq, 0) == EINVAL, "resize to 0 -> EINVAL");
	T_OK(ibv_req_notify_cq(cq, 0) == 0 && ibv_req_notify_cq(cq, 1) == 0,
	     "req_notify_cq without a channel is accepted");

	/* EBUSY while a QP uses it */
	qp = t_qp_create(pd, cq, IBV_QPT_RC, 4);
	T_OK(qp != NULL, "QP on the CQ");
	T_OK(ibv_destroy_cq(cq) == EBUSY, "destroy_cq while a QP uses it -> EBUSY");
	T_OK(qp && ibv_destroy_qp(qp) == 0, "destroy QP");
	T_OK(ibv_destroy_cq(cq) == 0, "destroy_cq after the QP is gone");

	/* channel */
	ch = ibv_create_comp_channel(ctx);
	T_OK(ch && ch->fd >= 0 && ch->context == ctx, "create_comp_channel");
	if (!ch)
		return 1;
	cq = mkcq(ctx, 16, ch, 0, &err);
	T_OK(cq && cq->channel == ch, "CQ on the channel");
	if (!cq)
		return 1;
	T_OK(ibv_destroy_comp_channel(ch) == EBUSY, "destroy_comp_channel with a CQ -> EBUSY");
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	T_OK(poll(&pfd, 1, 20) == 0, "channel fd not readable without events");
	ep = epoll_create1(EPOLL_CLOEXEC);
	{
		struct epoll_event ee = { .events = EPOLLIN }, out;

		T_OK(epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ee) == 0, "epoll accepts the channel fd");
		T_OK(epoll_wait(ep, &out, 1, 10) == 0, "epoll: nothing pending");
	}
	fl = fcntl(ch->fd, F_GETFL);
	T_OK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0, "set O_NONBLOCK");
	errno = 0;
	T_OK(ibv_get_cq_event(ch, &evcq, &evctx) == -1 && errno == EAGAIN,
	     "get_cq_event on an empty non-blocking channel -> -1/EAGAIN");

	/* A real completion: receive on a QP in ERR is flushed. */
	qp = t_qp_create(pd, cq, IBV_QPT_RC, 4);
	if (qp) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		struct ibv_recv_wr rwr = { .wr_id = 77 }, *bad = NULL;
		struct epoll_event out;

		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.qp_access_flags = 0;
		T_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_ACCESS_FLAGS) == 0, "QP to INIT");
		a.qp_state = IBV_QPS_ERR;
		T_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0, "QP to ERR");
		T_OK(ibv_req_notify_cq(cq, 0) == 0, "arm CQ");
		T_OK(ibv_post_recv(qp, &rwr, &bad) == 0, "post_recv in ERR is accepted");
		n = t_poll_cq(cq, &wc, 1, 2000);
		T_OK(n == 1 && wc.wr_id == 77 && wc.status == IBV_WC_WR_FLUSH_ERR &&
		     wc.qp_num == qp->qp_num,
		     "flush completion (n=%d wr_id=%llu status=%s)", n,
		     (unsigned long long)wc.wr_id, n == 1 ? ibv_wc_status_str(wc.status) : "-");
		T_OK(poll(&pfd, 1, 100) == 1 && epoll_wait(ep, &out, 1, 0) == 1,
		     "armed channel fd readable after the completion");
		T_OK(ibv_get_cq_event(ch, &evcq, &evctx) == 0 && evcq == cq,
		     "get_cq_event returns the CQ");
		T_OK(poll(&pfd, 1, 0) == 0, "fd quiet again once the event is taken");
		ibv_ack_cq_events(cq, 1);
		T_OK(ibv_destroy_qp(qp) == 0, "destroy QP in ERR");
	}
	close(ep);
	T_OK(ibv_destroy_cq(cq) == 0, "destroy_cq with all events acked");
	T_OK(ibv_destroy_comp_channel(ch) == 0, "destroy_comp_channel once unused");

	/* cq_ex */
	memset(&cx, 0, sizeof(cx));
	cx.cqe = 8;
	cx.wc_flags = IBV_WC_EX_WITH_CVLAN;
	errno = 0;
	cqx = ibv_create_cq_ex(ctx, &cx);
	T_OK(!cqx && errno == EOPNOTSUPP, "create_cq_ex with a CVLAN flag -> EOPNOTSUPP");
	cx.wc_flags = IBV_WC_STANDARD_FLAGS;
	cqx = ibv_create_cq_ex(ctx, &cx);
	T_OK(cqx != NULL, "create_cq_ex with the standard wc_flags");
	if (cqx) {
		T_OK(ibv_start_poll(cqx, &pa) == ENOENT, "start_poll on an empty CQ -> ENOENT");
		cq2 = ibv_cq_ex_to_cq(cqx);
		T_OK(ibv_poll_cq(cq2, 1, &wc) == 0, "the ex CQ polls the classic way too");
		T_OK(ibv_destroy_cq(cq2) == 0, "destroy ex CQ");
	}

	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	t_lo_free();
	return t_summary();
}
