/* RC errors provoked on purpose (the ones test_rc_errors.c does not cover)
 * and the read/atomic bounds, over srn_lo, two QPs of one process:
 *  - receive buffer too small for a SEND: receiver IBV_WC_LOC_LEN_ERR,
 *    sender IBV_WC_REM_INV_REQ_ERR (as rxe), later WRs WR_FLUSH_ERR, both
 *    QPs in ERR, an async QP error event on each
 *  - receive SGE with a bad lkey: receiver LOC_PROT_ERR, sender
 *    REM_OP_ERR, flushes, ERR, events
 *  - rnr_retry 7 (infinite): a SEND with no receive waits, then completes
 *    once a receive is posted 300 ms later
 *  - max_rd_atomic 1: 16 READs posted at once all complete, in order, with
 *    the right data
 *  - duplicates (SOFTRNIC_TEST_DUP=500, re-executed child): 200 FETCH_ADDs
 *    leave exactly the sum (no atomic executes twice) and each returns a
 *    distinct original value.
 * IBV_WC_LOC_QP_OP_ERR is not provokable through the verbs API: every
 * condition that leads to it (unsupported opcode, message > 2 GiB) is
 * refused by ibv_post_send with EINVAL first. */
#include <errno.h>
#include <poll.h>
#include "t_rc.h"

static void pair(struct t_end *a, struct t_end *b, int rnr, int rd_atomic)
{
	t_pair(a, b, 14, 7, rnr);
	if (rd_atomic != 16) {
		struct t_conn ib = t_info(b, 200);

		/* max_rd_atomic is an RTR->RTS (or SQD) attribute: redo a's
		 * connection through RESET with the smaller value */
		struct ibv_qp_attr qa = { .qp_state = IBV_QPS_RESET };

		CHECK(!ibv_modify_qp(a->qp, &qa, IBV_QP_STATE), "a to RESET");
		qa = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1,
			.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
		CHECK(!ibv_modify_qp(a->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS), "a to INIT");
		qa = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR, .path_mtu = MTU_ENUM,
			.dest_qp_num = ib.qpn, .rq_psn = 100, .max_dest_rd_atomic = 16,
			.min_rnr_timer = 1,
			.ah_attr = { .is_global = 1, .port_num = 1,
				     .grh = { .dgid = ib.gid, .hop_limit = 64 } } };
		CHECK(!ibv_modify_qp(a->qp, &qa, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER), "a to RTR");
		qa = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 100, .timeout = 14,
			.retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = (uint8_t)rd_atomic };
		CHECK(!ibv_modify_qp(a->qp, &qa, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
		      "a to RTS with max_rd_atomic %d", rd_atomic);
	}
}

static void unpair(struct t_end *a, struct t_end *b)
{
	struct t_end *e[2] = { a, b };

	for (int i = 0; i < 2; i++) {
		ibv_destroy_qp(e[i]->qp);
		ibv_dereg_mr(e[i]->mr);
		ibv_destroy_cq(e[i]->cq);
		ibv_dealloc_pd(e[i]->pd);
		ibv_close_device(e[i]->ctx);
		free(e[i]->buf);
	}
}

static enum ibv_qp_state qstate(struct ibv_qp *qp)
{
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	if (ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi))
		return (enum ibv_qp_state)-1;
	return qa.qp_state;
}

/* The first async event for qp within 2 s, or -1. */
static int qp_event(struct ibv_context *ctx, struct ibv_qp *qp)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	uint64_t end = now_ms() + 2000;

	while (now_ms() < end) {
		if (poll(&p, 1, 200) != 1)
			continue;
		if (ibv_get_async_event(ctx, &ev))
			return -1;
		int t = ev.event_type;
		int mine = ev.element.qp == qp;

		ibv_ack_async_event(&ev);
		if (mine && (t == IBV_EVENT_QP_FATAL || t == IBV_EVENT_QP_REQ_ERR ||
			     t == IBV_EVENT_QP_ACCESS_ERR))
			return t;
	}
	return -1;
}

/* A SEND that fails at the responder (what posting the receive does
 * decides how); the sender gets want_snd, the receiver want_rcv. */
static void send_fail(const char *what, uint32_t rlen, uint32_t lkey_xor,
		      enum ibv_wc_status want_snd, enum ibv_wc_status want_rcv)
{
	struct t_end a, b;
	struct ibv_wc wc;

	pair(&a, &b, 7, 16);
	struct ibv_sge rs = { (uintptr_t)b.buf + RECV_OFF, rlen, b.mr->lkey ^ lkey_xor };
	struct ibv_recv_wr rw = { .wr_id = 10, .sg_list = &rs, .num_sge = 1 }, *rbad;

	CHECK(!ibv_post_recv(b.qp, &rw, &rbad), "post_recv");
	CHECK(!post_recv(&b, RECV_OFF, RECV_LEN, 11), "post_recv 2");
	CHECK(!post_send(&a, IBV_WR_SEND, 0, 64, 0, 0, 0, 1), "post");
	CHECK(!post_send(&a, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)b.buf, b.mr->rkey, 0, 2), "post");
	CHECK(!post_send(&a, IBV_WR_SEND, 0, 8, 0, 0, 0, 3), "post");

	int ok_r1 = !t_wait(b.cq, &wc) && wc.wr_id == 10 && wc.status == want_rcv;
	enum ibv_wc_status r1 = wc.status;
	int ok_r2 = !t_wait(b.cq, &wc) && wc.wr_id == 11 && wc.status == IBV_WC_WR_FLUSH_ERR;
	int ok_s1 = !t_wait(a.cq, &wc) && wc.wr_id == 1 && wc.status == want_snd;
	enum ibv_wc_status s1 = wc.status;
	int ok_s2 = !t_wait(a.cq, &wc) && wc.wr_id == 2 && wc.status == IBV_WC_WR_FLUSH_ERR;
	int ok_s3 = !t_wait(a.cq, &wc) && wc.wr_id == 3 && wc.status == IBV_WC_WR_FLUSH_ERR;

	CHECK(ok_r1, "%s: receiver status %s, want %s", what, ibv_wc_status_str(r1),
	      ibv_wc_status_str(want_rcv));
	CHECK(ok_s1, "%s: sender status %s, want %s", what, ibv_wc_status_str(s1),
	      ibv_wc_status_str(want_snd));
	CHECK(ok_r2 && ok_s2 && ok_s3, "%s: the rest flushed (recv %d, send %d %d)", what,
	      ok_r2, ok_s2, ok_s3);
	CHECK(qstate(a.qp) == IBV_QPS_ERR && qstate(b.qp) == IBV_QPS_ERR,
	      "%s: both QPs in ERR (%d, %d)", what, qstate(a.qp), qstate(b.qp));
	int ea = qp_event(a.ctx, a.qp), eb = qp_event(b.ctx, b.qp);

	CHECK(ea >= 0 && eb >= 0, "%s: async QP error events (sender %d, receiver %d)", what,
	      ea, eb);
	printf("%s: receiver %s, sender %s, rest WR_FLUSH_ERR, QPs in ERR, events %s / %s\n",
	       what, ibv_wc_status_str(r1), ibv_wc_status_str(s1),
	       ea >= 0 ? ibv_event_type_str((enum ibv_event_type)ea) : "none",
	       eb >= 0 ? ibv_event_type_str((enum ibv_event_type)eb) : "none");
	unpair(&a, &b);
}

static void rnr_infinite(void)
{
	struct t_end a, b;
	struct ibv_wc wc;
	uint64_t t0;

	pair(&a, &b, 7, 16);
	fill(a.buf, 512, 3);
	t0 = now_ms();
	CHECK(!post_send(&a, IBV_WR_SEND, 0, 512, 0, 0, 0, 1), "post");
	usleep(300000);
	CHECK(ibv_poll_cq(a.cq, 1, &wc) == 0, "rnr 7: no completion while no receive is posted");
	CHECK(!post_recv(&b, RECV_OFF, RECV_LEN, 5), "post_recv");
	CHECK(!t_wait(a.cq, &wc) && wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS,
	      "rnr 7: send %s", ibv_wc_status_str(wc.status));
	CHECK(!t_wait(b.cq, &wc) && wc.wr_id == 5 && wc.status == IBV_WC_SUCCESS &&
	      wc.byte_len == 512 && !memcmp(a.buf, b.buf + RECV_OFF, 512),
	      "rnr 7: receive %s len %u", ibv_wc_status_str(wc.status), wc.byte_len);
	printf("rnr_retry 7: SEND waited for the receive posted 300 ms later, then succeeded "
	       "(%llu ms)\n", (unsigned long long)(now_ms() - t0));
	unpair(&a, &b);
}

static void reads_bounded(void)
{
	struct t_end a, b;
	struct ibv_wc wc[16];
	enum { N = 16, LEN = 8192 };
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	pair(&a, &b, 7, 1);
	CHECK(!ibv_query_qp(a.qp, &qa, IBV_QP_MAX_QP_RD_ATOMIC, &qi) && qa.max_rd_atomic == 1,
	      "max_rd_atomic reads back 1 (%d)", qa.max_rd_atomic);
	fill(b.buf + RX_OFF, N * LEN, 9);
	for (int i = 0; i < N; i++)
		CHECK(!post_send(&a, IBV_WR_RDMA_READ, RX_OFF + (uint64_t)i * LEN, LEN,
				 (uintptr_t)b.buf + RX_OFF + (uint64_t)i * LEN, b.mr->rkey, 0,
				 (uint64_t)i), "post read %d", i);
	int n = 0;
	uint64_t end = now_ms() + 10000;

	while (n < N && now_ms() < end) {
		int k = ibv_poll_cq(a.cq, N - n, wc + n);

		if (k > 0)
			n += k;
	}
	int order = n == N;

	for (int i = 0; i < n; i++)
		if (wc[i].wr_id != (uint64_t)i || wc[i].status != IBV_WC_SUCCESS ||
		    wc[i].byte_len != LEN)
			order = 0;
	CHECK(order, "16 READs with max_rd_atomic 1: %d completed, in order and successful", n);
	CHECK(!memcmp(a.buf + RX_OFF, b.buf + RX_OFF, N * LEN), "16 READs: data");
	printf("max_rd_atomic 1: 16 READs posted at once all complete in order with the right data\n");
	unpair(&a, &b);
}

/* Runs in a child with SOFTRNIC_TEST_DUP=500 set before the device opens. */
static int dup_atomics(void)
{
	struct t_end a, b;
	struct ibv_wc wc;
	enum { N = 200 };
	uint64_t *target, *res, sum = 0;
	static uint64_t seen[N];

	pair(&a, &b, 7, 16);
	target = (uint64_t *)(b.buf + 4096);
	res = (uint64_t *)(a.buf + 4096);
	*target = 1ull << 40;
	for (int i = 0; i < N; i++) {
		struct ibv_sge s = { (uintptr_t)res, 8, a.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1,
					  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.wr.atomic.remote_addr = (uintptr_t)target;
		wr.wr.atomic.rkey = b.mr->rkey;
		wr.wr.atomic.compare_add = (uint64_t)i + 1;
		sum += (uint64_t)i + 1;
		CHECK(!ibv_post_send(a.qp, &wr, &bad), "post fadd %d", i);
		CHECK(!t_wait(a.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)i,
		      "fadd %d: %s", i, ibv_wc_status_str(wc.status));
		seen[i] = *res;
	}
	int distinct = 1;

	for (int i = 0; i < N; i++)
		if (seen[i] != (1ull << 40) + (uint64_t)i * (i + 1) / 2)
			distinct = 0;
	CHECK(*target == (1ull << 40) + sum, "dup 50%%: target %llu, want %llu (an atomic "
	      "executed twice?)", (unsigned long long)*target,
	      (unsigned long long)((1ull << 40) + sum));
	CHECK(distinct, "dup 50%%: each FETCH_ADD returned the running sum before it");
	printf("SOFTRNIC_TEST_DUP=500: 200 FETCH_ADDs, final value exactly the sum, "
	       "each original value right\n");
	unpair(&a, &b);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "dup")) {
		alarm(60);
		return dup_atomics();
	}
	send_fail("receive buffer too small", 16, 0, IBV_WC_REM_INV_REQ_ERR, IBV_WC_LOC_LEN_ERR);
	send_fail("receive SGE with a bad lkey", 4096, 0x100, IBV_WC_REM_OP_ERR,
		  IBV_WC_LOC_PROT_ERR);
	rnr_infinite();
	reads_bounded();

	pid_t pid = fork();

	if (pid == 0) {
		setenv("SOFTRNIC_TEST_DUP", "500", 1);
		execl("/proc/self/exe", argv[0], "dup", (char *)NULL);
		_exit(127);
	}
	int st = 0;

	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "duplicate-atomic child: status %#x", st);
	printf(failures ? "FAIL (%d)\n" : "PASS\n", failures);
	return failures ? 1 : 0;
}
