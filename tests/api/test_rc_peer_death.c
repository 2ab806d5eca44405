/* A peer that stops answering fails the survivor's work requests in
 * bounded time, on both paths (the same-host direct path by default,
 * packets with SOFTRNIC_TRANSPORT=udp):
 *  - the peer process SIGKILLed in the middle of a WRITE stream, retry_cnt
 *    7 and timeout 14 as perftest sets them: the head WR completes with
 *    IBV_WC_RETRY_EXC_ERR, every later one with IBV_WC_WR_FLUSH_ERR, the
 *    QP is in ERR (7 is seven retries, not infinite: only rnr_retry's 7
 *    means that);
 *  - the peer QP moved to RESET: the same, with retry_cnt 3;
 *  - no receive posted and rnr_retry 2: IBV_WC_RNR_RETRY_EXC_ERR, the
 *    rest flushed.
 * "Bounded" is asserted with a generous limit (30 s); the times are
 * printed. */
#include <poll.h>
#include "t_rc.h"

enum { LIMIT_MS = 30000, STREAM_WRS = 64, MSG = 65536 };

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	return ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi) ? IBV_QPS_UNKNOWN : qa.qp_state;
}

/* Wait for the completions of wr_ids [first, last): the first error must
 * be want; every one after it must be a flush.  Returns the number of
 * successes before the error (-1 if the error never came). */
static int expect_error_then_flush(struct t_end *e, uint64_t first, uint64_t last,
				   enum ibv_wc_status want, const char *what)
{
	struct ibv_wc wc;
	int ok = 0;
	bool err = false;

	for (uint64_t id = first; id < last; id++) {
		if (t_wait_ms(e->cq, &wc, LIMIT_MS)) {
			CHECK(0, "%s: no completion for wr %llu within %d ms", what,
			      (unsigned long long)id, LIMIT_MS);
			return -1;
		}
		CHECK(wc.wr_id == id, "%s: completion for wr %llu, expected %llu", what,
		      (unsigned long long)wc.wr_id, (unsigned long long)id);
		if (!err && wc.status == IBV_WC_SUCCESS) {
			ok++;
			continue;
		}
		if (!err) {
			CHECK(wc.status == want, "%s: wr %llu: %s, expected %s", what,
			      (unsigned long long)id, ibv_wc_status_str(wc.status),
			      ibv_wc_status_str(want));
			err = true;
			continue;
		}
		CHECK(wc.status == IBV_WC_WR_FLUSH_ERR, "%s: wr %llu after the error: %s", what,
		      (unsigned long long)id, ibv_wc_status_str(wc.status));
	}
	CHECK(err, "%s: no error completion", what);
	CHECK(qp_state(e->qp) == IBV_QPS_ERR, "%s: QP in ERR (state %d)", what, qp_state(e->qp));
	return err ? ok : -1;
}

static void killed_peer(void)
{
	int sv[2];
	pid_t pid;
	struct t_end a;
	struct t_conn me, peer;
	uint64_t t0, id = 0;
	int ok;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		CHECK(0, "socketpair");
		return;
	}
	pid = fork();
	if (pid == 0) {
		struct t_end b;
		char c;

		close(sv[0]);
		alarm(60);
		if (t_end_init(&b))
			_exit(2);
		me = t_info(&b, 7);
		if (write(sv[1], &me, sizeof(me)) != sizeof(me) ||
		    read(sv[1], &peer, sizeof(peer)) != sizeof(peer) ||
		    t_connect(&b, 7, &peer, 14, 7, 7) || write(sv[1], "r", 1) != 1)
			_exit(2);
		while (read(sv[1], &c, 1) == 1)
			; /* killed while here */
		_exit(0);
	}
	close(sv[1]);
	if (t_end_init(&a)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		printf("SKIP: srn_lo not available\n");
		exit(77);
	}
	me = t_info(&a, 9);
	char c = 0;

	if (read(sv[0], &peer, sizeof(peer)) != sizeof(peer) ||
	    write(sv[0], &me, sizeof(me)) != sizeof(me) || t_connect(&a, 9, &peer, 14, 7, 7) ||
	    read(sv[0], &c, 1) != 1) {
		CHECK(0, "killed peer: setup");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		t_end_fini(&a);
		return;
	}
	/* a stream in progress: half the WRs posted, then the peer dies */
	for (; id < STREAM_WRS / 2; id++)
		CHECK(!post_send(&a, IBV_WR_RDMA_WRITE, (id % 64) * MSG, MSG,
				 peer.addr + (id % 64) * MSG, peer.rkey, 0, id),
		      "post %llu", (unsigned long long)id);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	t0 = now_ms();
	for (; id < STREAM_WRS; id++)
		CHECK(!post_send(&a, IBV_WR_RDMA_WRITE, (id % 64) * MSG, MSG,
				 peer.addr + (id % 64) * MSG, peer.rkey, 0, id),
		      "post %llu", (unsigned long long)id);
	ok = expect_error_then_flush(&a, 0, STREAM_WRS, IBV_WC_RETRY_EXC_ERR, "killed peer");
	printf("peer process SIGKILLed (timeout 14, retry_cnt 7): %d WRITEs done, then "
	       "RETRY_EXC_ERR and %d flushed, %llu ms after the kill\n",
	       ok, ok < 0 ? 0 : STREAM_WRS - ok - 1, (unsigned long long)(now_ms() - t0));
	/* a WR posted in ERR is flushed too */
	CHECK(!post_send(&a, IBV_WR_RDMA_WRITE, 0, 64, peer.addr, peer.rkey, 0, 1000), "post");
	expect_error_then_flush(&a, 1000, 1001, IBV_WC_WR_FLUSH_ERR, "post in ERR");
	close(sv[0]);
	t_end_fini(&a);
}

static void reset_peer(void)
{
	struct t_end a, b;
	struct ibv_qp_attr ra = { .qp_state = IBV_QPS_RESET };
	uint64_t t0;
	int ok;

	/* timeout 12 = 16.8 ms, 3 retries */
	t_pair(&a, &b, 12, 3, 7);
	CHECK(!ibv_modify_qp(b.qp, &ra, IBV_QP_STATE), "peer QP to RESET");
	t0 = now_ms();
	CHECK(!post_send(&a, IBV_WR_RDMA_WRITE, 0, 4096, (uintptr_t)b.buf, b.mr->rkey, 0, 0),
	      "post");
	CHECK(!post_send(&a, IBV_WR_RDMA_READ, 8192, 4096, (uintptr_t)b.buf, b.mr->rkey, 0, 1),
	      "post");
	CHECK(!post_send(&a, IBV_WR_SEND, 0, 64, 0, 0, 0, 2), "post");
	ok = expect_error_then_flush(&a, 0, 3, IBV_WC_RETRY_EXC_ERR, "peer QP in RESET");
	CHECK(ok == 0, "peer QP in RESET: %d WRs succeeded", ok);
	printf("peer QP in RESET (timeout 12, retry_cnt 3): RETRY_EXC_ERR, 2 flushed, after "
	       "%llu ms\n", (unsigned long long)(now_ms() - t0));
	t_end_fini(&a);
	t_end_fini(&b);
}

static void rnr_finite(void)
{
	struct t_end a, b;
	uint64_t t0;
	int ok;

	/* min_rnr_timer 1 (10 us) as t_connect sets it, 2 RNR retries */
	t_pair(&a, &b, 14, 7, 2);
	t0 = now_ms();
	CHECK(!post_send(&a, IBV_WR_SEND, 0, 64, 0, 0, 0, 0), "post");
	CHECK(!post_send(&a, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)b.buf, b.mr->rkey, 0, 1),
	      "post");
	ok = expect_error_then_flush(&a, 0, 2, IBV_WC_RNR_RETRY_EXC_ERR, "rnr_retry 2");
	CHECK(ok == 0, "rnr_retry 2: %d WRs succeeded", ok);
	printf("no receive posted (rnr_retry 2): RNR_RETRY_EXC_ERR, 1 flushed, after %llu ms\n",
	       (unsigned long long)(now_ms() - t0));
	t_end_fini(&a);
	t_end_fini(&b);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	alarm(240);
	killed_peer();
	reset_peer();
	rnr_finite();
	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
