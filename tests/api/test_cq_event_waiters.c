/* Several threads waiting in ibv_get_cq_event on one completion channel
 * (verbs/comp_channel.c: the waiters sleep in read() on the channel's
 * pipe and take its byte, which must go back while events remain).
 * A QP connected to itself completes WRITEs into a CQ on the channel;
 * WAITERS threads each get an event, re-arm, ack and poll, as qperf's
 * loop does.
 *
 * Checks: every completion is polled exactly once and every event is for
 * our CQ; no waiter stays asleep with events queued (the completions all
 * arrive within the time limit); afterwards, with nothing queued, each
 * waiter is still waiting, and a signal whose handler has no SA_RESTART
 * ends each with -1/EINTR; then the channel is empty and not readable.
 * Bounded: 30 s for the completions, 5 s for the waiters to end.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "tests/lib/t_util.h"
#include "tests/lib/t_verbs.h"

enum { WAITERS = 3, OPS = 3000, BUF = 4096, LIMIT_MS = 30000 };

static struct ibv_comp_channel *ch;
static struct ibv_cq *cq;
static atomic_int polled, events, wrong_cq, bad_wc;

struct waiter {
	pthread_t th;
	atomic_int done;
	int err;                     /* errno of the call that ended it */
};

static void *waiter_main(void *p)
{
	struct waiter *w = p;

	for (;;) {
		struct ibv_cq *ecq;
		struct ibv_wc wc[16];
		void *ctx;
		int n;

		if (ibv_get_cq_event(ch, &ecq, &ctx)) {
			w->err = errno;
			break;
		}
		atomic_fetch_add(&events, 1);
		if (ecq != cq)
			atomic_fetch_add(&wrong_cq, 1);
		ibv_req_notify_cq(cq, 0);
		ibv_ack_cq_events(cq, 1);
		while ((n = ibv_poll_cq(cq, 16, wc)) > 0)
			for (int i = 0; i < n; i++) {
				if (wc[i].status != IBV_WC_SUCCESS)
					atomic_fetch_add(&bad_wc, 1);
				atomic_fetch_add(&polled, 1);
			}
	}
	atomic_store(&w->done, 1);
	return NULL;
}

int main(void)
{
	struct ibv_context *ctx = t_lo_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct waiter w[WAITERS] = { 0 };
	union ibv_gid gid;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct pollfd pfd;
	uint8_t *buf;
	double t0;

	t_sig_noop(SIGUSR1, 0);
	ch = ibv_create_comp_channel(ctx);
	cq = ch ? ibv_create_cq(ctx, 256, NULL, ch, 0) : NULL;
	buf = aligned_alloc(4096, 2 * BUF);
	mr = buf && pd ? ibv_reg_mr(pd, buf, 2 * BUF, IBV_ACCESS_LOCAL_WRITE |
				    IBV_ACCESS_REMOTE_WRITE) : NULL;
	if (!cq || !mr || ibv_query_gid(ctx, 1, 0, &gid))
		t_bail("CQ on a channel, MR, GID");
	qp = t_qp_create(pd, cq, IBV_QPT_RC, 64);
	{
		struct t_rc_attr r = { .access = IBV_ACCESS_REMOTE_WRITE, .dest_qpn = qp ? qp->qp_num : 0,
				       .dgid = gid, .hop_limit = 64, .min_rnr_timer = 1,
				       .rd_atomic = 1, .timeout = 14 };

		if (!qp || t_qp_rc_connect(qp, &r))
			t_bail("QP connected to itself");
	}
	T_ASSERT(!ibv_req_notify_cq(cq, 0), "CQ armed");
	for (int i = 0; i < WAITERS; i++)
		T_ASSERT(!pthread_create(&w[i].th, NULL, waiter_main, &w[i]), "waiter %d", i);

	/* one WRITE at a time, at most 32 not yet polled */
	t0 = t_now();
	for (int i = 0; i < OPS && (t_now() - t0) * 1e3 < LIMIT_MS;) {
		struct ibv_sge sge = { (uintptr_t)buf, 64, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.wr.rdma.remote_addr = (uintptr_t)buf + BUF;
		wr.wr.rdma.rkey = mr->rkey;
		if (i - atomic_load(&polled) >= 32) {
			usleep(50);
			continue;
		}
		T_ASSERT(!ibv_post_send(qp, &wr, &bad), "post WRITE %d", i);
		i++;
	}
	while (atomic_load(&polled) < OPS && (t_now() - t0) * 1e3 < LIMIT_MS)
		usleep(1000);
	T_OK(atomic_load(&polled) == OPS && atomic_load(&bad_wc) == 0,
	     "%d WRITEs completed and polled once each by %d waiting threads (%d polled, "
	     "%d events, %d failed)", OPS, WAITERS, atomic_load(&polled), atomic_load(&events),
	     atomic_load(&bad_wc));
	T_OK(atomic_load(&wrong_cq) == 0 && atomic_load(&events) > 0, "every event names our CQ");

	usleep(100000);
	{
		int waiting = 0;

		for (int i = 0; i < WAITERS; i++)
			waiting += !atomic_load(&w[i].done);
		T_OK(waiting == WAITERS, "with nothing queued all %d waiters still wait (%d)",
		     WAITERS, waiting);
	}
	/* A handler without SA_RESTART ends each wait (signals repeated: one
	 * may come between a waiter's loop turns). */
	for (int k = 0; k < 500; k++) {
		int left = 0;

		for (int i = 0; i < WAITERS; i++)
			if (!atomic_load(&w[i].done)) {
				pthread_kill(w[i].th, SIGUSR1);
				left++;
			}
		if (!left)
			break;
		usleep(10000);
	}
	for (int i = 0; i < WAITERS; i++) {
		T_OK(atomic_load(&w[i].done) && w[i].err == EINTR, "waiter %d ended: %s", i,
		     atomic_load(&w[i].done) ? strerror(w[i].err) : "still waiting");
		if (atomic_load(&w[i].done))
			pthread_join(w[i].th, NULL);
	}
	pfd = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
	T_OK(poll(&pfd, 1, 0) == 0, "the channel is empty: its fd is not readable");

	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	T_CHECK(!ibv_destroy_cq(cq), "destroy CQ");
	T_CHECK(!ibv_destroy_comp_channel(ch), "destroy channel");
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	t_lo_free();
	free(buf);
	return t_summary();
}
