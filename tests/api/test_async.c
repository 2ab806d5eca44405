/* Black-box checks of the async event channel: async_fd is a real
 * descriptor that poll/epoll accept, is not readable with no events, and
 * ibv_get_async_event honours O_NONBLOCK set by the application (-1,
 * EAGAIN) and returns no event while none was raised; a thread blocked in
 * it keeps waiting across a signal handler with SA_RESTART and returns
 * -1/EINTR for one without, as rdma-core's read() on async_fd does.  Acking a port
 * event (no object) is harmless.  Then a real event: an RC QP connected
 * to itself overruns a tiny CQ with signalled RDMA WRITEs, which must
 * raise IBV_EVENT_CQ_ERR on that CQ, wake a thread blocked in
 * ibv_get_async_event, and be counted by ibv_ack_async_event (skipped if the data path is missing). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

/* RC QP looped back to itself on GID 0 of port 1. */
static int connect_self_at(struct ibv_qp *qp, struct ibv_context *ctx, uint32_t psn)
{
	struct t_rc_attr r = { .access = IBV_ACCESS_REMOTE_WRITE, .dest_qpn = qp->qp_num,
			       .hop_limit = 64, .min_rnr_timer = 12, .rd_atomic = 1,
			       .timeout = 14, .psn = psn };

	if (ibv_query_gid(ctx, 1, 0, &r.dgid))
		return -1;
	return t_qp_rc_connect(qp, &r) ? -1 : 0;
}

static int connect_self(struct ibv_qp *qp, struct ibv_context *ctx)
{
	return connect_self_at(qp, ctx, 0);
}

struct waiter {
	struct ibv_context *ctx;
	struct ibv_async_event ev;
	int ret;
	int err;                     /* errno when ret is -1 */
};

/* Blocks in ibv_get_async_event until the event arrives. */
static void *wait_event(void *arg)
{
	struct waiter *w = arg;

	int r = ibv_get_async_event(w->ctx, &w->ev);

	w->err = errno;
	__atomic_store_n(&w->ret, r, __ATOMIC_SEQ_CST);
	return NULL;
}

/* A handler with SA_RESTART leaves the wait alone; one without ends it. */
static void t_signals(struct ibv_context *ctx)
{
	struct waiter w = { .ctx = ctx, .ret = 1 };
	pthread_t th;
	int i;

	t_sig_noop(SIGUSR1, SA_RESTART);
	if (pthread_create(&th, NULL, wait_event, &w)) {
		T_OK(0, "waiter thread");
		return;
	}
	usleep(50000);
	pthread_kill(th, SIGUSR1);
	usleep(200000);
	T_OK(__atomic_load_n(&w.ret, __ATOMIC_SEQ_CST) == 1,
	     "ibv_get_async_event keeps waiting across a SA_RESTART handler");
	t_sig_noop(SIGUSR1, 0);
	for (i = 0; i < 100 && __atomic_load_n(&w.ret, __ATOMIC_SEQ_CST) == 1; i++) {
		pthread_kill(th, SIGUSR1);
		usleep(20000);
	}
	if (__atomic_load_n(&w.ret, __ATOMIC_SEQ_CST) == 1) {
		T_OK(0, "a handler without SA_RESTART ends the wait (still waiting: left)");
		return;
	}
	pthread_join(th, NULL);
	T_OK(w.ret == -1 && w.err == EINTR, "a handler without SA_RESTART ends the wait: -1, %s",
	     strerror(w.err));
	signal(SIGUSR1, SIG_DFL);
}

/* What a check made, in reverse order (NULLs skipped). */
static void free_all(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, struct ibv_pd *pd)
{
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
	if (mr)
		ibv_dereg_mr(mr);
	if (pd)
		ibv_dealloc_pd(pd);
}

static void t_cq_overrun(struct ibv_context *ctx)
{
	enum { NWR = 40 };
	static char buf[4096];
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf),
					    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
	struct ibv_cq *cq = mr ? ibv_create_cq(ctx, 1, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = NWR, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = cq ? ibv_create_qp(pd, &qa) : NULL;
	struct ibv_async_event ev;
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	int posted = 0;
	struct waiter w = { .ctx = ctx, .ret = -1 };
	pthread_t th;
	bool joined = false;

	if (!qp || cq->cqe >= NWR - 2 || connect_self(qp, ctx)) {
		printf("SKIP: CQ overrun event (data path not available: %s)\n", strerror(errno));
		goto out;
	}
	if (pthread_create(&th, NULL, wait_event, &w)) {
		printf("SKIP: pthread_create\n");
		goto out;
	}
	usleep(50000); /* let it block first */
	for (int i = 0; i < NWR - 1 && i < cq->cqe + 4; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = (uintptr_t)buf + 2048, .rkey = mr->rkey },
		}, *bad;

		if (ibv_post_send(qp, &wr, &bad))
			break;
		posted++;
	}
	T_OK(posted > cq->cqe, "posted %d signalled WRITEs to a CQ of %d", posted, cq->cqe);
	/* Never polling the CQ: the engine completes the WRITEs on its own,
	 * and wakes the thread blocked in ibv_get_async_event. */
	{
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 3;
		joined = pthread_timedjoin_np(th, NULL, &until) == 0;
		if (!joined) {
			pthread_cancel(th);
			pthread_join(th, NULL);
		}
	}
	T_OK(joined && w.ret == 0, "blocked ibv_get_async_event woke up with an event");
	ev = w.ev;
	T_OK(ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == cq,
	     "event is IBV_EVENT_CQ_ERR on our CQ (type %d)", ev.event_type);
	if (ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == cq) {
		ibv_ack_async_event(&ev);
		T_OK(cq->async_events_completed == 1, "ack counted on the CQ");
	}
	/* Drain what else the overrun may legitimately raise (QP events). */
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	for (int i = 0; i < 100 && ibv_get_async_event(ctx, &ev) == 0; i++) {
		printf("       (then event type %d)\n", ev.event_type);
		ibv_ack_async_event(&ev);
	}
	T_OK(errno == EAGAIN, "drained: -1/EAGAIN");
	T_OK(poll(&pfd, 1, 0) == 0, "async_fd not readable once the queue is empty");
out:
	free_all(qp, cq, mr, pd);
}

/* The next event on qp within 3 s (async_fd non-blocking); 0 if one came. */
static int qp_event(struct ibv_context *ctx, struct ibv_qp *qp, struct ibv_async_event *ev)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };

	for (int i = 0; i < 300; i++) {
		if (ibv_get_async_event(ctx, ev) == 0) {
			if (ev->element.qp == qp && ev->event_type != IBV_EVENT_CQ_ERR)
				return 0;
			ibv_ack_async_event(ev);
			continue;
		}
		poll(&pfd, 1, 10);
	}
	return -1;
}

/* A WRITE with a wrong rkey to itself: the QP's responder raises an
 * access error event on it.  The QP, or NULL (skip). */
/* A signalled 8-byte WRITE to mr with a wrong rkey; ibv_post_send's result. */
static int post_faulted_write(struct ibv_qp *qp, struct ibv_mr *mr)
{
	struct ibv_sge sge = { .addr = mr->addr ? (uintptr_t)mr->addr : 0, .length = 8,
			       .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)mr->addr, .rkey = mr->rkey ^ 0x5a5a00 },
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

static struct ibv_qp *faulted_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq,
				 struct ibv_mr *mr)
{
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);

	if (qp && (connect_self(qp, ctx) || post_faulted_write(qp, mr))) {
		ibv_destroy_qp(qp);
		qp = NULL;
	}
	return qp;
}

/* A PD, an MR on buf, a CQ and a faulted QP on them (NULL: skip). */
static struct ibv_qp *faulted_setup(struct ibv_context *ctx, char *buf, size_t len,
				    struct ibv_pd **pd, struct ibv_mr **mr, struct ibv_cq **cq)
{
	*pd = ibv_alloc_pd(ctx);
	*mr = *pd ? ibv_reg_mr(*pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
		  : NULL;
	*cq = *mr ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	return *cq ? faulted_qp(ctx, *pd, *cq, *mr) : NULL;
}

struct late_ack {
	struct ibv_async_event ev;
	_Atomic int acked;
};

static void *ack_later(void *arg)
{
	struct late_ack *l = arg;

	usleep(200000);
	atomic_store(&l->acked, 1);
	ibv_ack_async_event(&l->ev);
	return NULL;
}

/* ibv_destroy_qp waits for the ack of an event the application took
 * (the ack touches the QP: without the wait, a use after free that ASan
 * reports, as UCX's async thread met), and drops the events still queued
 * on it (no wait for an ack that cannot come, no event naming a freed QP). */
static void t_destroy_and_events(struct ibv_context *ctx)
{
	static char buf[4096];
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp = faulted_setup(ctx, buf, sizeof(buf), &pd, &mr, &cq);
	struct late_ack l = { .acked = 0 };
	struct ibv_async_event ev;
	pthread_t th;
	double t0;

	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	if (!qp) {
		printf("SKIP: destroy and events (data path not available)\n");
		goto out;
	}
	T_OK(qp_event(ctx, qp, &l.ev) == 0, "a WRITE with a wrong rkey raised an event on the QP");
	T_ASSERT(!pthread_create(&th, NULL, ack_later, &l), "acking thread");
	t0 = t_now();
	T_OK(ibv_destroy_qp(qp) == 0, "destroy the QP while its event is not acked");
	T_OK(atomic_load(&l.acked) == 1, "destroy returned after the ack (%.0f ms)",
	     (t_now() - t0) * 1000);
	pthread_join(th, NULL);

	qp = faulted_qp(ctx, pd, cq, mr);
	T_ASSERT(qp, "a second faulted QP");
	usleep(200000); /* its event queued, never taken */
	t0 = t_now();
	T_OK(ibv_destroy_qp(qp) == 0 && t_now() - t0 < 2,
	     "destroy with its event still queued returns at once (%.0f ms)", (t_now() - t0) * 1000);
	qp = NULL;
	errno = 0;
	while (ibv_get_async_event(ctx, &ev) == 0) {
		T_OK(ev.event_type == IBV_EVENT_CQ_ERR, "no event left on the destroyed QP (type %d)",
		     ev.event_type);
		ibv_ack_async_event(&ev);
	}
	T_OK(errno == EAGAIN, "queue empty: -1/EAGAIN");
out:
	free_all(qp, cq, mr, pd);
}

/* An application that never reads its async events: past the queue's
 * capacity (4096) they are dropped, and a destroy must not wait for acks
 * of events that were never queued. */
static void t_unread_events(struct ibv_context *ctx)
{
	static char buf[4096];
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp = faulted_setup(ctx, buf, sizeof(buf), &pd, &mr, &cq);
	struct ibv_async_event ev;
	struct ibv_wc wc;
	int n = 0, errs = 0;
	double t0 = t_now();

	if (!qp) {
		printf("SKIP: unread events (data path not available)\n");
		goto out;
	}
	/* each round: the faulted WRITE's error completion, then again */
	while (n < 4300 && t_now() - t0 < 60) {
		struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };

		if (t_poll_cq(cq, &wc, 1, 5000) != 1)
			break;
		errs += wc.status != IBV_WC_SUCCESS;
		n++;
		while (ibv_poll_cq(cq, 1, &wc) > 0)
			;
		/* a PSN per round: a late copy of the last round's WRITE is
		 * then a duplicate, not a new request to refuse */
		if (ibv_modify_qp(qp, &reset, IBV_QP_STATE) ||
		    connect_self_at(qp, ctx, ((uint32_t)n * 4096) & 0xffffff) ||
		    post_faulted_write(qp, mr)) {
			printf("round %d: reset, reconnect or post failed\n", n);
			break;
		}
	}
	T_OK(n >= 4300 && errs == n, "%d refused WRITEs, %d error completions, events unread (%.1f s)",
	     n, errs, t_now() - t0);
	t0 = t_now();
	T_OK(ibv_destroy_qp(qp) == 0 && t_now() - t0 < 2,
	     "destroy returns at once (%.0f ms)", (t_now() - t0) * 1000);
	qp = NULL;
	while (ibv_get_async_event(ctx, &ev) == 0)
		ibv_ack_async_event(&ev);
out:
	free_all(qp, cq, mr, pd);
}

int main(void)
{
	struct ibv_device *dev;
	struct ibv_context *ctx;
	struct ibv_async_event ev;
	struct pollfd pfd;
	struct epoll_event ee = { .events = EPOLLIN }, out;
	int ep, fl;

	alarm(120); /* a destroy that waits for acks never queued would hang */
	dev = t_lo_device();
	ctx = ibv_open_device(dev);
	T_OK(ctx != NULL, "open %s", ibv_get_device_name(dev));
	if (!ctx)
		return 1;
	fl = fcntl(ctx->async_fd, F_GETFL);
	T_OK(fl >= 0, "async_fd is a valid descriptor");
	T_OK(!(fl & O_NONBLOCK), "async_fd is blocking until the application says otherwise");
	pfd.fd = ctx->async_fd;
	pfd.events = POLLIN;
	T_OK(poll(&pfd, 1, 50) == 0, "async_fd not readable without events");
	ep = epoll_create1(EPOLL_CLOEXEC);
	T_OK(epoll_ctl(ep, EPOLL_CTL_ADD, ctx->async_fd, &ee) == 0, "epoll accepts async_fd");
	T_OK(epoll_wait(ep, &out, 1, 20) == 0, "epoll: nothing pending");
	close(ep);
	T_OK(fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0, "set O_NONBLOCK");
	errno = 0;
	T_OK(ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN,
	     "non-blocking ibv_get_async_event with no event -> -1/EAGAIN");
	memset(&ev, 0, sizeof(ev));
	ev.event_type = IBV_EVENT_PORT_ACTIVE;
	ev.element.port_num = 1;
	ibv_ack_async_event(&ev);
	T_OK(1, "acking a port event is harmless");
	T_OK(fcntl(ctx->async_fd, F_SETFL, fl) == 0, "back to blocking");
	t_signals(ctx);
	t_cq_overrun(ctx);
	t_destroy_and_events(ctx);
	t_unread_events(ctx);
	T_OK(ibv_close_device(ctx) == 0, "close");
	t_lo_free();
	return t_summary();
}
