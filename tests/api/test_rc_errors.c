/* RC error paths and progress without the target's help, over srn_lo:
 *  - bad rkey -> IBV_WC_REM_ACCESS_ERR, later WQEs IBV_WC_WR_FLUSH_ERR,
 *    QP in ERR, IBV_EVENT_QP_FATAL
 *  - no receive posted, rnr_retry 0 -> IBV_WC_RNR_RETRY_EXC_ERR
 *  - peer QP gone, small timeout/retry_cnt -> IBV_WC_RETRY_EXC_ERR
 *  - bad lkey on a local SGE -> IBV_WC_LOC_PROT_ERR
 *  - target process asleep in pause(): WRITE, READ, both atomics complete,
 *    and the sleeping process uses ~0 CPU. */
#include <poll.h>
#include "t_rc.h"

static void check_fatal_event(struct ibv_context *ctx, struct ibv_qp *qp, const char *what)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	CHECK(poll(&p, 1, 2000) == 1, "%s: async event within 2 s", what);
	if (p.revents & POLLIN) {
		CHECK(!ibv_get_async_event(ctx, &ev), "get_async_event");
		CHECK(ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == qp,
		      "%s: event %s", what, ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
	}
}

static void bad_rkey(void)
{
	struct t_end a, b;
	struct ibv_wc wc;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	t_pair(&a, &b, 14, 7, 7);
	CHECK(!post_send(&a, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)b.buf, b.mr->rkey ^ 0x100, 0, 1),
	      "post");
	CHECK(!post_send(&a, IBV_WR_SEND, 0, 8, 0, 0, 0, 2), "post");
	CHECK(!post_send(&a, IBV_WR_RDMA_READ, 0, 8, (uintptr_t)b.buf, b.mr->rkey, 0, 3), "post");
	CHECK(!t_wait(a.cq, &wc) && wc.wr_id == 1 && wc.status == IBV_WC_REM_ACCESS_ERR,
	      "bad rkey: status %s", ibv_wc_status_str(wc.status));
	CHECK(!t_wait(a.cq, &wc) && wc.wr_id == 2 && wc.status == IBV_WC_WR_FLUSH_ERR,
	      "flush 2: %s", ibv_wc_status_str(wc.status));
	CHECK(!t_wait(a.cq, &wc) && wc.wr_id == 3 && wc.status == IBV_WC_WR_FLUSH_ERR,
	      "flush 3: %s", ibv_wc_status_str(wc.status));
	CHECK(!ibv_query_qp(a.qp, &qa, IBV_QP_STATE, &qi) && qa.qp_state == IBV_QPS_ERR,
	      "QP in ERR (state %d)", qa.qp_state);
	CHECK(!post_send(&a, IBV_WR_SEND, 0, 8, 0, 0, 0, 4), "post in ERR");
	CHECK(!t_wait(a.cq, &wc) && wc.wr_id == 4 && wc.status == IBV_WC_WR_FLUSH_ERR,
	      "post after ERR: %s", ibv_wc_status_str(wc.status));
	check_fatal_event(a.ctx, a.qp, "bad rkey");
	printf("bad rkey: REM_ACCESS_ERR, then WR_FLUSH_ERR for the rest, QP in ERR, QP_FATAL\n");
	t_end_fini(&a);
	t_end_fini(&b);
}

static void rnr(void)
{
	struct t_end a, b;
	struct ibv_wc wc;

	t_pair(&a, &b, 14, 7, 0);
	CHECK(!post_send(&a, IBV_WR_SEND, 0, 8, 0, 0, 0, 1), "post");
	CHECK(!t_wait(a.cq, &wc) && wc.wr_id == 1 && wc.status == IBV_WC_RNR_RETRY_EXC_ERR,
	      "rnr: status %s", ibv_wc_status_str(wc.status));
	printf("no receive posted, rnr_retry 0: RNR_RETRY_EXC_ERR\n");
	t_end_fini(&a);
	t_end_fini(&b);

	/* with rnr_retry 7 the send waits until a receive appears */
	struct t_end c, d;

	t_pair(&c, &d, 14, 7, 7);
	CHECK(!post_send(&c, IBV_WR_SEND, 0, 8, 0, 0, 0, 1), "post");
	usleep(50000);
	CHECK(ibv_poll_cq(c.cq, 1, &wc) == 0, "still waiting for a receive");
	CHECK(!post_recv(&d, 0, 64, 9), "post_recv");
	CHECK(!t_wait(c.cq, &wc) && wc.status == IBV_WC_SUCCESS, "rnr retry: %s",
	      ibv_wc_status_str(wc.status));
	CHECK(!t_wait(d.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9, "recv");
	printf("rnr_retry 7: the SEND completes once a receive is posted\n");
	t_end_fini(&c);
	t_end_fini(&d);
}

static void peer_gone(void)
{
	struct t_end a, b;
	struct ibv_wc wc;
	uint64_t t0;

	/* timeout 10 = 4.2 ms, 2 retries */
	t_pair(&a, &b, 10, 2, 7);
	CHECK(!ibv_destroy_qp(b.qp), "destroy peer");
	b.qp = NULL;
	t0 = now_ms();
	CHECK(!post_send(&a, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)b.buf, b.mr->rkey, 0, 1), "post");
	CHECK(!t_wait(a.cq, &wc) && wc.wr_id == 1 && wc.status == IBV_WC_RETRY_EXC_ERR,
	      "peer gone: status %s", ibv_wc_status_str(wc.status));
	printf("peer QP destroyed: RETRY_EXC_ERR after %llu ms\n",
	       (unsigned long long)(now_ms() - t0));
	t_end_fini(&a);
	t_end_fini(&b);
}

static void bad_lkey(void)
{
	struct t_end a, b;
	struct ibv_wc wc;
	struct ibv_sge sge = { 0, 8, 0 };

	t_pair(&a, &b, 14, 7, 7);
	sge.addr = (uintptr_t)a.buf;
	sge.lkey = a.mr->lkey ^ 0x100;
	struct ibv_send_wr wr = { .wr_id = 5, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;

	CHECK(!post_recv(&b, 0, 64, 1), "post_recv");
	CHECK(!ibv_post_send(a.qp, &wr, &bad), "post");
	CHECK(!t_wait(a.cq, &wc) && wc.wr_id == 5 && wc.status == IBV_WC_LOC_PROT_ERR,
	      "bad lkey: %s", ibv_wc_status_str(wc.status));
	printf("bad lkey: LOC_PROT_ERR\n");
	t_end_fini(&a);
	t_end_fini(&b);
}

static unsigned long long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	p = strrchr(buf, ')');
	if (p)
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st);
	return ut + st;
}

static void sleeping_target(void)
{
	int sv[2];
	pid_t pid;
	struct t_end a;
	struct t_conn me, peer;
	struct ibv_wc wc;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return;
	pid = fork();
	if (pid == 0) {
		struct t_end b;

		close(sv[0]);
		alarm(30);
		if (t_end_init(&b))
			_exit(2);
		me = t_info(&b, 7);
		uint64_t init = 4242;

		memcpy(b.buf + 4096, &init, 8);
		fill(b.buf + 8192, 65536, 3);
		if (write(sv[1], &me, sizeof(me)) != sizeof(me) ||
		    read(sv[1], &peer, sizeof(peer)) != sizeof(peer) ||
		    t_connect(&b, 7, &peer, 14, 7, 7))
			_exit(2);
		for (;;)
			pause(); /* never calls into the library again */
	}
	close(sv[1]);
	if (t_end_init(&a))
		return;
	me = t_info(&a, 9);
	if (read(sv[0], &peer, sizeof(peer)) != sizeof(peer) ||
	    write(sv[0], &me, sizeof(me)) != sizeof(me) || t_connect(&a, 9, &peer, 14, 7, 7)) {
		CHECK(0, "sleeping target setup");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		t_end_fini(&a);
		return;
	}
	/* READ what the target prepared, WRITE, read it back, both atomics */
	CHECK(!post_send(&a, IBV_WR_RDMA_READ, 0, 65536, peer.addr + 8192, peer.rkey, 0, 1), "post");
	CHECK(!t_wait(a.cq, &wc) && wc.status == IBV_WC_SUCCESS, "READ from sleeper: %s",
	      ibv_wc_status_str(wc.status));
	fill(a.buf + 65536, 65536, 3);
	CHECK(!memcmp(a.buf, a.buf + 65536, 65536), "READ data");
	fill(a.buf, 65536, 11);
	CHECK(!post_send(&a, IBV_WR_RDMA_WRITE, 0, 65536, peer.addr + 100000, peer.rkey, 0, 2),
	      "post");
	CHECK(!post_send(&a, IBV_WR_RDMA_READ, 200000, 65536, peer.addr + 100000, peer.rkey, 0, 3),
	      "post");
	CHECK(!t_wait(a.cq, &wc) && wc.wr_id == 2 && wc.status == IBV_WC_SUCCESS, "WRITE");
	CHECK(!t_wait(a.cq, &wc) && wc.wr_id == 3 && wc.status == IBV_WC_SUCCESS, "READ back");
	CHECK(!memcmp(a.buf, a.buf + 200000, 65536), "WRITE data read back");
	{
		uint64_t *res = (uint64_t *)(a.buf + 300000);
		struct ibv_sge sge = { (uintptr_t)res, 8, a.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 4, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.wr.atomic.remote_addr = peer.addr + 4096;
		wr.wr.atomic.rkey = peer.rkey;
		wr.wr.atomic.compare_add = 8;
		CHECK(!ibv_post_send(a.qp, &wr, &bad), "post");
		CHECK(!t_wait(a.cq, &wc) && wc.status == IBV_WC_SUCCESS && *res == 4242, "FADD");
		wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.compare_add = 4250;
		wr.wr.atomic.swap = 1;
		CHECK(!ibv_post_send(a.qp, &wr, &bad), "post");
		CHECK(!t_wait(a.cq, &wc) && wc.status == IBV_WC_SUCCESS && *res == 4250, "CAS");
	}
	printf("target asleep in pause(): READ, WRITE, FETCH_ADD, CMP_SWAP complete with the right data\n");

	unsigned long long t0 = cpu_ticks(pid);
	usleep(500000);
	unsigned long long t1 = cpu_ticks(pid);

	CHECK(t1 - t0 <= 1, "idle target used %llu ticks in 0.5 s", t1 - t0);
	printf("idle target process: %llu clock ticks of CPU in 0.5 s\n", t1 - t0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	t_end_fini(&a);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	alarm(120);
	bad_rkey();
	rnr();
	peer_gone();
	bad_lkey();
	sleeping_target();
	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
