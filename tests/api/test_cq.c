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
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static int fails, checks;

#define CHECK(cond, ...) do {                                         \
	checks++;                                                      \
	if (cond) {                                                    \
		printf("ok   - " __VA_ARGS__);                         \
	} else {                                                       \
		fails++;                                               \
		printf("FAIL - " __VA_ARGS__);                         \
		printf("       (%s:%d: %s)\n", __FILE__, __LINE__, #cond); \
	}                                                              \
	printf("\n");                                                  \
} while (0)

static struct ibv_cq *mkcq(struct ibv_context *c, int cqe, struct ibv_comp_channel *ch,
			   int vec, int *err)
{
	struct ibv_cq *cq;

	errno = 0;
	cq = ibv_create_cq(c, cqe, NULL, ch, vec);
	*err = cq ? 0 : errno;
	return cq;
}

static struct ibv_qp *mkqp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &ia);
}

int main(void)
{
	struct ibv_device **list;
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
	int err, fl, ep, n, i;

	setenv("SOFTRNIC_DEVICES", "lo", 1);
	list = ibv_get_device_list(NULL);
	if (!list || !list[0]) {
		printf("SKIP: no device\n");
		return 77;
	}
	ctx = ibv_open_device(list[0]);
	if (!ctx) {
		printf("SKIP: ibv_open_device: %s\n", strerror(errno));
		return 77;
	}
	pd = ibv_alloc_pd(ctx);

	/* create / resize */
	cq = mkcq(ctx, 0, NULL, 0, &err);
	CHECK(!cq && err == EINVAL, "cqe 0 -> EINVAL");
	cq = mkcq(ctx, (1 << 20) + 1, NULL, 0, &err);
	CHECK(!cq && err == EINVAL, "cqe above max_cqe -> EINVAL");
	cq = mkcq(ctx, 4, NULL, ctx->num_comp_vectors, &err);
	CHECK(!cq && err == EINVAL, "comp_vector == num_comp_vectors -> EINVAL");
	cq = mkcq(ctx, 5, NULL, 0, &err);
	CHECK(cq && cq->cqe >= 5 && cq->context == ctx, "cqe 5 -> cq->cqe %d", cq ? cq->cqe : -1);
	if (!cq)
		return 1;
	CHECK(ibv_poll_cq(cq, 4, &wc) == 0, "empty CQ polls 0");
	CHECK(ibv_resize_cq(cq, 100) == 0 && cq->cqe >= 100, "resize to 100 -> %d", cq->cqe);
	CHECK(ibv_resize_cq(cq, 0) == EINVAL, "resize to 0 -> EINVAL");
	CHECK(ibv_req_notify_cq(cq, 0) == 0 && ibv_req_notify_cq(cq, 1) == 0,
	      "req_notify_cq without a channel is accepted");

	/* EBUSY while a QP uses it */
	qp = mkqp(pd, cq, cq);
	CHECK(qp != NULL, "QP on the CQ");
	CHECK(ibv_destroy_cq(cq) == EBUSY, "destroy_cq while a QP uses it -> EBUSY");
	CHECK(qp && ibv_destroy_qp(qp) == 0, "destroy QP");
	CHECK(ibv_destroy_cq(cq) == 0, "destroy_cq after the QP is gone");

	/* channel */
	ch = ibv_create_comp_channel(ctx);
	CHECK(ch && ch->fd >= 0 && ch->context == ctx, "create_comp_channel");
	if (!ch)
		return 1;
	cq = mkcq(ctx, 16, ch, 0, &err);
	CHECK(cq && cq->channel == ch, "CQ on the channel");
	if (!cq)
		return 1;
	CHECK(ibv_destroy_comp_channel(ch) == EBUSY, "destroy_comp_channel with a CQ -> EBUSY");
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	CHECK(poll(&pfd, 1, 20) == 0, "channel fd not readable without events");
	ep = epoll_create1(EPOLL_CLOEXEC);
	{
		struct epoll_event ee = { .events = EPOLLIN }, out;

		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ee) == 0, "epoll accepts the channel fd");
		CHECK(epoll_wait(ep, &out, 1, 10) == 0, "epoll: nothing pending");
	}
	fl = fcntl(ch->fd, F_GETFL);
	CHECK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0, "set O_NONBLOCK");
	errno = 0;
	CHECK(ibv_get_cq_event(ch, &evcq, &evctx) == -1 && errno == EAGAIN,
	      "get_cq_event on an empty non-blocking channel -> -1/EAGAIN");

	/* A real completion: receive on a QP in ERR is flushed. */
	qp = mkqp(pd, cq, cq);
	if (qp) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		struct ibv_recv_wr rwr = { .wr_id = 77 }, *bad = NULL;
		struct timespec t0, t1;
		struct epoll_event out;

		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.qp_access_flags = 0;
		CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_ACCESS_FLAGS) == 0, "QP to INIT");
		a.qp_state = IBV_QPS_ERR;
		CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0, "QP to ERR");
		CHECK(ibv_req_notify_cq(cq, 0) == 0, "arm CQ");
		CHECK(ibv_post_recv(qp, &rwr, &bad) == 0, "post_recv in ERR is accepted");
		clock_gettime(CLOCK_MONOTONIC, &t0);
		n = 0;
		for (i = 0; i < 2000 && n == 0; i++) {
			n = ibv_poll_cq(cq, 1, &wc);
			if (!n)
				usleep(1000);
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		CHECK(n == 1 && wc.wr_id == 77 && wc.status == IBV_WC_WR_FLUSH_ERR &&
		      wc.qp_num == qp->qp_num,
		      "flush completion (n=%d wr_id=%llu status=%s)", n,
		      (unsigned long long)wc.wr_id, n == 1 ? ibv_wc_status_str(wc.status) : "-");
		CHECK(poll(&pfd, 1, 100) == 1 && epoll_wait(ep, &out, 1, 0) == 1,
		      "armed channel fd readable after the completion");
		CHECK(ibv_get_cq_event(ch, &evcq, &evctx) == 0 && evcq == cq,
		      "get_cq_event returns the CQ");
		CHECK(poll(&pfd, 1, 0) == 0, "fd quiet again once the event is taken");
		ibv_ack_cq_events(cq, 1);
		CHECK(ibv_destroy_qp(qp) == 0, "destroy QP in ERR");
	}
	close(ep);
	CHECK(ibv_destroy_cq(cq) == 0, "destroy_cq with all events acked");
	CHECK(ibv_destroy_comp_channel(ch) == 0, "destroy_comp_channel once unused");

	/* cq_ex */
	memset(&cx, 0, sizeof(cx));
	cx.cqe = 8;
	cx.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	errno = 0;
	cqx = ibv_create_cq_ex(ctx, &cx);
	CHECK(!cqx && errno == EOPNOTSUPP, "create_cq_ex with a timestamp flag -> EOPNOTSUPP");
	cx.wc_flags = IBV_WC_STANDARD_FLAGS;
	cqx = ibv_create_cq_ex(ctx, &cx);
	CHECK(cqx != NULL, "create_cq_ex with the standard wc_flags");
	if (cqx) {
		CHECK(ibv_start_poll(cqx, &pa) == ENOENT, "start_poll on an empty CQ -> ENOENT");
		cq2 = ibv_cq_ex_to_cq(cqx);
		CHECK(ibv_poll_cq(cq2, 1, &wc) == 0, "the ex CQ polls the classic way too");
		CHECK(ibv_destroy_cq(cq2) == 0, "destroy ex CQ");
	}

	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("%d checks, %d failed\n", checks, fails);
	return fails ? 1 : 0;
}
