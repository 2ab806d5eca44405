/* Post-time validation, black-box: wrong QP state -> EINVAL (send before
 * RTS, receive in RESET), too many SGEs, inline above max_inline_data,
 * opcode or flag the QP cannot do, atomics with a wrong length or a
 * misaligned address, queue full -> ENOMEM, each with *bad_wr on exactly
 * the first WR not posted; the ibv_wr_* API posts a batch whole or not at
 * all and returns the first error; a post in ERR completes with
 * IBV_WC_WR_FLUSH_ERR.  Sends go to a QPN nobody owns with the longest
 * ACK timeout, so posted WQEs stay outstanding during the test. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid gid0;

static struct ibv_qp *mkqp(uint32_t swr, uint32_t rwr, uint32_t inl)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = swr, .max_recv_wr = rwr, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = inl },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
				  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
	};

	return ibv_create_qp_ex(ctx, &ia);
}

static int move(struct ibv_qp *qp, enum ibv_qp_state to)
{
	struct t_rc_attr r = {
		.access = IBV_ACCESS_REMOTE_WRITE,
		.dest_qpn = 0xabcde, /* nobody's */
		.dgid = gid0, .hop_limit = 1, .min_rnr_timer = 12, .rd_atomic = 1,
		.timeout = 31, /* 2.4 hours: WQEs stay outstanding */
	};
	struct ibv_qp_attr a = { .qp_state = to };

	switch (to) {
	case IBV_QPS_INIT:
		return t_qp_rc_init(qp, &r);
	case IBV_QPS_RTR:
		return t_qp_rc_rtr(qp, &r);
	case IBV_QPS_RTS:
		return t_qp_rc_rts(qp, &r);
	default:
		return ibv_modify_qp(qp, &a, IBV_QP_STATE);
	}
}

static int to_rts(struct ibv_qp *qp)
{
	return move(qp, IBV_QPS_INIT) || move(qp, IBV_QPS_RTR) || move(qp, IBV_QPS_RTS);
}

static char buf[4096] __attribute__((aligned(64)));
static struct ibv_mr *mr;

/* n chained SEND WRs with one SGE each. */
static void chain(struct ibv_send_wr *wr, struct ibv_sge *sge, int n)
{
	int i;

	memset(wr, 0, sizeof(*wr) * n);
	for (i = 0; i < n; i++) {
		sge[i].addr = (uintptr_t)buf;
		sge[i].length = 16;
		sge[i].lkey = mr->lkey;
		wr[i].wr_id = i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
}

static int post1(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	*bad = NULL;
	return ibv_post_send(qp, wr, bad);
}

int main(void)
{
	struct ibv_qp *qp;
	struct ibv_send_wr wr[8], *bad;
	struct ibv_recv_wr rwr[8], *rbad;
	struct ibv_sge sge[8], sg3[3];
	struct ibv_qp_ex *qx;
	struct ibv_wc wc;
	int i, n, ret;

	ctx = t_lo_open();
	if (ibv_query_gid(ctx, 1, 0, &gid0))
		t_skip("no GID 0");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!pd || !cq || !mr)
		return 1;

	/* state rules */
	qp = mkqp(8, 8, 64);
	T_OK(qp != NULL, "QP");
	if (!qp)
		return 1;
	chain(wr, sge, 1);
	T_OK(post1(qp, wr, &bad) == EINVAL && bad == &wr[0], "send in RESET -> EINVAL, bad_wr");
	memset(rwr, 0, sizeof(rwr));
	rwr[0].sg_list = sge;
	rwr[0].num_sge = 1;
	T_OK(ibv_post_recv(qp, rwr, &rbad) == EINVAL && rbad == &rwr[0], "recv in RESET -> EINVAL");
	move(qp, IBV_QPS_INIT);
	T_OK(post1(qp, wr, &bad) == EINVAL && bad == &wr[0], "send in INIT -> EINVAL");
	T_OK(ibv_post_recv(qp, rwr, &rbad) == 0, "recv in INIT");
	move(qp, IBV_QPS_RTR);
	T_OK(post1(qp, wr, &bad) == EINVAL, "send in RTR -> EINVAL");
	T_OK(ibv_post_recv(qp, rwr, &rbad) == 0, "recv in RTR");
	move(qp, IBV_QPS_RTS);
	T_OK(qp->state == IBV_QPS_RTS, "RTS");

	/* per-WR checks, bad_wr on the first failing WR */
	chain(wr, sge, 3);
	wr[1].sg_list = sg3;
	wr[1].num_sge = 3;
	sg3[0] = sg3[1] = sg3[2] = sge[0];
	T_OK(post1(qp, wr, &bad) == EINVAL && bad == &wr[1], "3 SGEs on max_send_sge 2 -> EINVAL at WR 1");
	chain(wr, sge, 2);
	wr[1].send_flags = IBV_SEND_INLINE;
	sge[1].length = 65;
	T_OK(post1(qp, wr, &bad) == EINVAL && bad == &wr[1], "65 inline bytes on max_inline 64 -> EINVAL");
	sge[1].length = 64;
	T_OK(post1(qp, &wr[1], &bad) == 0, "64 inline bytes");
	chain(wr, sge, 1);
	wr[0].opcode = IBV_WR_TSO;
	T_OK(post1(qp, wr, &bad) == EINVAL && bad == wr, "TSO on RC -> EINVAL");
	chain(wr, sge, 1);
	wr[0].send_flags = IBV_SEND_IP_CSUM;
	T_OK(post1(qp, wr, &bad) == EINVAL, "IP_CSUM on RC -> EINVAL");
	chain(wr, sge, 1);
	wr[0].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr[0].wr.atomic.remote_addr = 0x1004;
	wr[0].wr.atomic.rkey = 1;
	sge[0].length = 8;
	T_OK(post1(qp, wr, &bad) == EINVAL && bad == wr, "atomic on a 4-aligned address -> EINVAL");
	wr[0].wr.atomic.remote_addr = 0x1000;
	sge[0].length = 4;
	T_OK(post1(qp, wr, &bad) == EINVAL, "atomic of 4 bytes -> EINVAL");
	sge[0].length = 8;
	T_OK(post1(qp, wr, &bad) == 0, "atomic 8 bytes aligned");
	chain(wr, sge, 1);
	wr[0].num_sge = 0;
	wr[0].sg_list = NULL;
	T_OK(post1(qp, wr, &bad) == 0, "zero-length SEND (no SGE)");
	ibv_destroy_qp(qp);

	/* send queue full */
	qp = mkqp(4, 4, 0);
	to_rts(qp);
	chain(wr, sge, 6);
	ret = post1(qp, wr, &bad);
	T_OK(ret == ENOMEM && bad == &wr[4], "6 WRs into 4 slots -> ENOMEM at WR 4 (ret %d, bad %ld)",
	     ret, bad ? (long)(bad - wr) : -1L);
	T_OK(post1(qp, wr, &bad) == ENOMEM && bad == &wr[0], "full stays full");

	/* receive queue: too many SGEs, full */
	memset(rwr, 0, sizeof(rwr));
	for (i = 0; i < 6; i++) {
		rwr[i].wr_id = i;
		rwr[i].sg_list = sge;
		rwr[i].num_sge = 1;
		rwr[i].next = i < 5 ? &rwr[i + 1] : NULL;
	}
	rwr[1].sg_list = sg3;
	rwr[1].num_sge = 3;
	T_OK(ibv_post_recv(qp, rwr, &rbad) == EINVAL && rbad == &rwr[1],
	     "3 SGEs on max_recv_sge 2 -> EINVAL at WR 1");
	rwr[1].num_sge = 1;
	T_OK(ibv_post_recv(qp, &rwr[1], &rbad) == ENOMEM && rbad == &rwr[4],
	     "receive queue: 1 + 3 fit, the 4th new one -> ENOMEM");
	ibv_destroy_qp(qp);

	/* ibv_wr_* API */
	qp = mkqp(4, 4, 32);
	to_rts(qp);
	qx = ibv_qp_to_qp_ex(qp);
	ibv_wr_start(qx);
	qx->wr_id = 1;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 16);
	qx->wr_id = 2;
	ibv_wr_rdma_write(qx, 0x1234, 0x10000);
	ibv_wr_set_sge_list(qx, 3, sg3);
	T_OK(ibv_wr_complete(qx) == EINVAL, "wr batch with 3 SGEs -> EINVAL at complete");
	ibv_wr_start(qx);
	ibv_wr_atomic_fetch_add(qx, 0x1234, 0x10002, 1);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 8);
	T_OK(ibv_wr_complete(qx) == EINVAL, "wr atomic misaligned -> EINVAL");
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_inline_data(qx, buf, 33);
	T_OK(ibv_wr_complete(qx) == EINVAL, "wr inline 33 bytes on max 32 -> EINVAL");
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 16);
	ibv_wr_abort(qx);
	ibv_wr_start(qx);
	for (i = 0; i < 5; i++) {
		qx->wr_id = 10 + i;
		ibv_wr_send(qx);
		ibv_wr_set_inline_data(qx, buf, 8);
	}
	T_OK(ibv_wr_complete(qx) == ENOMEM, "wr batch of 5 on 4 slots -> ENOMEM");
	/* None of the failed or aborted batches took a slot: 4 fit now. */
	ibv_wr_start(qx);
	for (i = 0; i < 4; i++) {
		ibv_wr_send(qx);
		ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 16);
	}
	T_OK(ibv_wr_complete(qx) == 0, "4 WRs fit: failed batches posted nothing");
	chain(wr, sge, 1);
	T_OK(post1(qp, wr, &bad) == ENOMEM, "and the queue is now full");
	ibv_destroy_qp(qp);

	qp = mkqp(4, 4, 32);
	move(qp, IBV_QPS_INIT);
	qx = ibv_qp_to_qp_ex(qp);
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 16);
	T_OK(ibv_wr_complete(qx) == EINVAL, "wr API on an INIT QP -> EINVAL");

	/* ERR: posts are accepted and flushed */
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;
	move(qp, IBV_QPS_ERR);
	chain(wr, sge, 1);
	wr[0].wr_id = 4242;
	wr[0].send_flags = IBV_SEND_SIGNALED;
	T_OK(post1(qp, wr, &bad) == 0, "send in ERR is accepted");
	n = t_poll_cq(cq, &wc, 1, 2000);
	T_OK(n == 1 && wc.wr_id == 4242 && wc.status == IBV_WC_WR_FLUSH_ERR,
	     "... and completes with WR_FLUSH_ERR");
	ibv_destroy_qp(qp);

	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	t_lo_free();
	return t_summary();
}
