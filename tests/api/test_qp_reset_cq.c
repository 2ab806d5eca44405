/* A QP that enters RESET leaves none of its completions in its CQs (as
 * mlx4, mlx5, hns and mthca do), while other QPs' completions in the same
 * CQ stay; brought back to RTS, its first completion is its new work.
 * Over srn_lo, two RC QPs of one process (both paths: CTest runs it
 * again with SOFTRNIC_TRANSPORT=udp):
 *  - local: a's receives flushed by a move to ERR, then RESET: the CQ
 *    holds only the flushed receive of a bystander QP c;
 *  - remote (rdma-core's test_mr_rereg_pd): b's receive lies in an MR
 *    moved to another PD (ibv_rereg_mr), a's SEND ends in
 *    IBV_WC_REM_OP_ERR with a's posted receive flushed behind it; both
 *    QPs through RESET back to RTS, the MR back to b's PD: the SEND and
 *    the answer complete with success, no stale flush first;
 *  - concurrent: while b's thread SENDs 2000 messages into a (by default
 *    its thread writes the completions into a's CQ itself), the main
 *    thread polls that CQ and takes a bystander QP on it through
 *    INIT, a flushed receive, ERR and RESET again and again: every one
 *    of a's receives completes, with success, none lost to a reset. */
#include <errno.h>
#include <pthread.h>
#include "t_rc.h"

#define MSG_LEN 64

static void die_skip(void)
{
	printf("SKIP: srn_lo or a verb it needs is not available\n");
	exit(77);
}

static void to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS), "to INIT");
}

static void to_state(struct ibv_qp *qp, enum ibv_qp_state s, const char *what)
{
	struct ibv_qp_attr a = { .qp_state = s };

	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE), "%s", what);
}

/* a and b (RC) connected: a's PSN 100, b's 200. */
static void connect_pair(struct t_end *a, struct t_end *b)
{
	struct t_conn ia = t_info(a, 100), ib = t_info(b, 200);

	if (t_connect(a, 100, &ib, 14, 7, 7) || t_connect(b, 200, &ia, 14, 7, 7)) {
		fprintf(stderr, "FAIL: connect\n");
		exit(1);
	}
}

/* Everything cq holds now (the engine has had its turn): at most max,
 * polled until empty twice in a row 20 ms apart. */
static int drain(struct ibv_cq *cq, struct ibv_wc *wc, int max)
{
	int n = 0;

	for (int empty = 0; empty < 2 && n < max;) {
		int k = ibv_poll_cq(cq, max - n, wc + n);

		if (k < 0)
			return -1;
		if (k == 0) {
			empty++;
			usleep(20000);
		} else {
			n += k;
			empty = 0;
		}
	}
	return n;
}

static void local_err_then_reset(void)
{
	struct t_end a, b;
	struct ibv_wc wc[8];
	struct ibv_qp *c;
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	int n;

	if (t_end_init(&a) || t_end_init(&b))
		die_skip();
	connect_pair(&a, &b);
	qa.send_cq = qa.recv_cq = a.cq;
	c = ibv_create_qp(a.pd, &qa);
	CHECK(c != NULL, "bystander QP on a's CQ");
	if (!c)
		exit(1);
	to_init(c);

	CHECK(!post_recv(&a, RECV_OFF, MSG_LEN, 21) && !post_recv(&a, RECV_OFF, MSG_LEN, 22),
	      "a: two receives");
	{
		struct ibv_sge sge = { (uintptr_t)a.buf + RECV_OFF, MSG_LEN, a.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 91, .sg_list = &sge, .num_sge = 1 }, *bad;

		CHECK(!ibv_post_recv(c, &wr, &bad), "c: one receive");
	}
	/* a's flushes first in the ring, c's after them */
	to_state(a.qp, IBV_QPS_ERR, "a to ERR");
	to_state(c, IBV_QPS_ERR, "c to ERR");
	to_state(a.qp, IBV_QPS_RESET, "a to RESET");
	n = drain(a.cq, wc, 8);
	CHECK(n == 1 && wc[0].qp_num == c->qp_num && wc[0].wr_id == 91 &&
	      wc[0].status == IBV_WC_WR_FLUSH_ERR,
	      "after a's RESET the CQ holds c's flushed receive only (%d completions, first "
	      "wr_id %llu qp %u)", n, n > 0 ? (unsigned long long)wc[0].wr_id : 0ull,
	      n > 0 ? wc[0].qp_num : 0);

	/* a back to RTS: b has seen nothing from it, so the PSNs still fit */
	to_init(a.qp);
	{
		struct t_conn ib = t_info(&b, 200);

		CHECK(!t_connect(&a, 100, &ib, 14, 7, 7), "a back to RTS");
	}
	CHECK(!post_recv(&b, RECV_OFF, MSG_LEN, 31), "b: receive");
	fill(a.buf, MSG_LEN, 3);
	CHECK(!post_send(&a, IBV_WR_SEND, 0, MSG_LEN, 0, 0, 0, 1), "a: SEND");
	CHECK(!t_wait(a.cq, &wc[0]) && wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS,
	      "a's first completion after RTS is its SEND, success (wr_id %llu, %s)",
	      (unsigned long long)wc[0].wr_id, ibv_wc_status_str(wc[0].status));
	CHECK(!t_wait(b.cq, &wc[0]) && wc[0].wr_id == 31 && wc[0].status == IBV_WC_SUCCESS &&
	      !memcmp(b.buf + RECV_OFF, a.buf, MSG_LEN), "b received it intact");
	printf("local ERR then RESET: %s\n", failures ? "FAIL" : "ok");
	ibv_destroy_qp(c);
	t_end_fini(&a);
	t_end_fini(&b);
}

/* Both QPs through RESET to RTS again with fresh PSNs. */
static void restate(struct t_end *a, struct t_end *b, uint32_t psn)
{
	struct t_conn ia = t_info(a, psn), ib = t_info(b, psn + 100);

	to_state(a->qp, IBV_QPS_RESET, "a to RESET");
	to_state(b->qp, IBV_QPS_RESET, "b to RESET");
	to_init(a->qp);
	to_init(b->qp);
	CHECK(!t_connect(a, psn, &ib, 14, 7, 7) && !t_connect(b, psn + 100, &ia, 14, 7, 7),
	      "both back to RTS");
}

static void remote_err_then_reset(void)
{
	struct t_end a, b;
	struct ibv_pd *other;
	struct ibv_wc wc;
	int got_send = 0;

	if (t_end_init(&a) || t_end_init(&b))
		die_skip();
	connect_pair(&a, &b);
	other = ibv_alloc_pd(b.ctx);
	CHECK(other && !ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, other, NULL, 0, 0),
	      "b's MR moved to another PD");

	CHECK(!post_recv(&a, RECV_OFF, MSG_LEN, 41), "a: receive (for the answer)");
	CHECK(!post_recv(&b, RECV_OFF, MSG_LEN, 51), "b: receive in the moved MR");
	CHECK(!post_send(&a, IBV_WR_SEND, 0, MSG_LEN, 0, 0, 0, 2), "a: SEND");
	/* as the suite does: poll until the send's completion, leave the rest */
	for (int i = 0; i < 4 && !got_send; i++) {
		if (t_wait(a.cq, &wc))
			break;
		got_send = wc.wr_id == 2;
	}
	CHECK(got_send && wc.status == IBV_WC_REM_OP_ERR, "a's SEND: %s, want %s",
	      ibv_wc_status_str(wc.status), ibv_wc_status_str(IBV_WC_REM_OP_ERR));
	CHECK(!t_wait(b.cq, &wc) && wc.wr_id == 51 && wc.status == IBV_WC_LOC_PROT_ERR,
	      "b's receive: %s, want %s", ibv_wc_status_str(wc.status),
	      ibv_wc_status_str(IBV_WC_LOC_PROT_ERR));
	usleep(20000); /* a's flush of 41 is in its CQ by now */

	restate(&a, &b, 1000);
	CHECK(!ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, b.pd, NULL, 0, 0), "b's MR back");
	CHECK(!post_recv(&a, RECV_OFF, MSG_LEN, 42) && !post_recv(&b, RECV_OFF, MSG_LEN, 52),
	      "receives again");
	fill(a.buf, MSG_LEN, 5);
	CHECK(!post_send(&a, IBV_WR_SEND, 0, MSG_LEN, 0, 0, 0, 3), "a: SEND again");
	CHECK(!t_wait(a.cq, &wc) && wc.wr_id == 3 && wc.status == IBV_WC_SUCCESS,
	      "a's first completion after the restart is the SEND, success (wr_id %llu, %s)",
	      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	CHECK(!t_wait(b.cq, &wc) && wc.wr_id == 52 && wc.status == IBV_WC_SUCCESS &&
	      !memcmp(b.buf + RECV_OFF, a.buf, MSG_LEN), "b received it intact");
	fill(b.buf, MSG_LEN, 6);
	CHECK(!post_send(&b, IBV_WR_SEND, 0, MSG_LEN, 0, 0, 0, 4), "b: answer");
	CHECK(!t_wait(b.cq, &wc) && wc.wr_id == 4 && wc.status == IBV_WC_SUCCESS, "b's answer sent");
	CHECK(!t_wait(a.cq, &wc) && wc.wr_id == 42 && wc.status == IBV_WC_SUCCESS &&
	      !memcmp(a.buf + RECV_OFF, b.buf, MSG_LEN),
	      "a received the answer (wr_id %llu, %s)", (unsigned long long)wc.wr_id,
	      ibv_wc_status_str(wc.status));
	printf("remote error (MR in another PD) then RESET: %s\n", failures ? "FAIL" : "ok");
	/* before b's device closes: the PD lives in b's context */
	CHECK(!other || !ibv_dealloc_pd(other), "the other PD freed");
	t_end_fini(&a);
	t_end_fini(&b);
}

enum { N_SENDS = 2000, RECV_DEPTH = 128 };

struct sender {
	struct t_end *b;
	int ok;                      /* SENDs completed with success */
};

static void *send_all(void *arg)
{
	struct sender *sd = arg;
	struct ibv_wc wc;

	for (int k = 0; k < N_SENDS; k++) {
		if (post_send(sd->b, IBV_WR_SEND, 0, 8, 0, 0, 0, (uint64_t)k) ||
		    t_wait(sd->b->cq, &wc) || wc.status != IBV_WC_SUCCESS)
			break;
		sd->ok++;
	}
	return NULL;
}

static void resets_while_peer_completes(void)
{
	struct t_end a, b;
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct sender sd = { .b = &b };
	struct ibv_sge sge;
	struct ibv_recv_wr crw = { .wr_id = 99, .sg_list = &sge, .num_sge = 1 }, *bad;
	struct ibv_wc wc[16];
	struct ibv_qp *c;
	pthread_t th;
	int got = 0, bad_wc = 0, c_seen = 0, cycles = 0;
	uint64_t end;

	if (t_end_init(&a) || t_end_init(&b))
		die_skip();
	connect_pair(&a, &b);
	qa.send_cq = qa.recv_cq = a.cq;
	c = ibv_create_qp(a.pd, &qa);
	if (!c)
		die_skip();
	sge = (struct ibv_sge){ (uintptr_t)a.buf + RECV_OFF, 8, a.mr->lkey };
	for (int k = 0; k < RECV_DEPTH; k++)
		CHECK(!post_recv(&a, RECV_OFF, 8, 1000), "a: receive");
	if (pthread_create(&th, NULL, send_all, &sd)) {
		printf("SKIP: pthread_create\n");
		exit(77);
	}
	end = now_ms() + 30000;
	while (got < N_SENDS && now_ms() < end) {
		int n;

		to_init(c);
		CHECK(!ibv_post_recv(c, &crw, &bad), "c: receive");
		to_state(c, IBV_QPS_ERR, "c to ERR");
		n = ibv_poll_cq(a.cq, 16, wc);
		to_state(c, IBV_QPS_RESET, "c to RESET");
		cycles++;
		for (int i = 0; i < n; i++) {
			if (wc[i].qp_num == c->qp_num) {
				c_seen++;
				bad_wc += wc[i].status != IBV_WC_WR_FLUSH_ERR;
				continue;
			}
			bad_wc += wc[i].qp_num != a.qp->qp_num || wc[i].status != IBV_WC_SUCCESS;
			got++;
			CHECK(!post_recv(&a, RECV_OFF, 8, 1000), "a: receive again");
		}
	}
	pthread_join(th, NULL);
	CHECK(got == N_SENDS && sd.ok == N_SENDS && bad_wc == 0,
	      "%d of %d receives completed on a (%d SENDs succeeded), %d wrong completions; "
	      "%d resets of the bystander, %d of its flushes polled before one",
	      got, N_SENDS, sd.ok, bad_wc, cycles, c_seen);
	printf("concurrent resets: %d receives, %d resets, %d bystander flushes polled: %s\n",
	       got, cycles, c_seen, failures ? "FAIL" : "ok");
	ibv_destroy_qp(c);
	t_end_fini(&a);
	t_end_fini(&b);
}

int main(void)
{
	alarm(90);
	local_err_then_reset();
	remote_err_then_reset();
	resets_while_peer_completes();
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
