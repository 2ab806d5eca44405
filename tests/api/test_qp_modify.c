/* ibv_modify_qp through the library on real QPs: the RC path
 * RESET->INIT->RTR->RTS->SQD->RTS->ERR->RESET with the attributes read
 * back by ibv_query_qp; a missing required attribute or a bad value fails
 * with EINVAL and leaves state and attributes untouched; the UC and UD
 * paths; transitions outside the graph refused. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

static union ibv_gid gid0;

static enum ibv_qp_state state_of(struct ibv_qp *qp, struct ibv_qp_attr *qa)
{
	struct ibv_qp_init_attr ia;

	memset(qa, 0, sizeof(*qa));
	if (ibv_query_qp(qp, qa, IBV_QP_STATE, &ia))
		return IBV_QPS_UNKNOWN;
	return qa->qp_state;
}

static void to_init(struct ibv_qp_attr *a, enum ibv_qp_type t, int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_INIT;
	a->port_num = 1;
	a->pkey_index = 0;
	if (t == IBV_QPT_UD) {
		a->qkey = 0x11111111;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
	} else {
		a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	}
}

static void to_rtr(struct ibv_qp_attr *a, enum ibv_qp_type t, int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = 0x1234;
	a->rq_psn = 0x100;
	a->max_dest_rd_atomic = 4;
	a->min_rnr_timer = 12;
	a->ah_attr.is_global = 1;
	a->ah_attr.port_num = 1;
	a->ah_attr.grh.dgid = gid0;
	a->ah_attr.grh.sgid_index = 0;
	a->ah_attr.grh.hop_limit = 1;
	if (t == IBV_QPT_RC)
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	else if (t == IBV_QPT_UC)
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
	else
		*mask = IBV_QP_STATE;
}

static void to_rts(struct ibv_qp_attr *a, enum ibv_qp_type t, int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTS;
	a->sq_psn = 0x200;
	a->timeout = 14;
	a->retry_cnt = 7;
	a->rnr_retry = 7;
	a->max_rd_atomic = 4;
	if (t == IBV_QPT_RC)
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	else
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
}

int main(void)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_attr a, q;
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	enum ibv_qp_type types[] = { IBV_QPT_UC, IBV_QPT_UD };
	int mask, t;

	ctx = t_lo_open();
	if (ibv_query_gid(ctx, 1, 0, &gid0))
		t_skip("no GID 0");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	ia.send_cq = cq;
	ia.recv_cq = cq;
	qp = ibv_create_qp(pd, &ia);
	T_OK(qp != NULL, "RC QP");
	if (!qp)
		return 1;

	a.qp_state = IBV_QPS_ERR;
	T_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == EINVAL && state_of(qp, &q) == IBV_QPS_RESET,
	     "RESET->ERR is not a transition (as Linux)");
	a.qp_state = IBV_QPS_RTR;
	T_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == EINVAL, "RESET->RTR refused");

	to_init(&a, IBV_QPT_RC, &mask);
	T_OK(ibv_modify_qp(qp, &a, mask & ~IBV_QP_ACCESS_FLAGS) == EINVAL &&
	     state_of(qp, &q) == IBV_QPS_RESET, "RESET->INIT without ACCESS_FLAGS: EINVAL, still RESET");
	a.port_num = 2;
	T_OK(ibv_modify_qp(qp, &a, mask) == EINVAL && state_of(qp, &q) == IBV_QPS_RESET,
	     "port 2 -> EINVAL");
	a.port_num = 1;
	T_OK(ibv_modify_qp(qp, &a, mask) == 0 && qp->state == IBV_QPS_INIT &&
	     state_of(qp, &q) == IBV_QPS_INIT, "RESET->INIT");
	T_OK(q.qp_access_flags == (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) &&
	     q.port_num == 1, "INIT attributes read back");

	to_rtr(&a, IBV_QPT_RC, &mask);
	T_OK(ibv_modify_qp(qp, &a, mask & ~IBV_QP_MIN_RNR_TIMER) == EINVAL &&
	     state_of(qp, &q) == IBV_QPS_INIT && q.dest_qp_num == 0 && q.rq_psn == 0,
	     "INIT->RTR without MIN_RNR_TIMER: EINVAL, nothing changed");
	T_OK(ibv_modify_qp(qp, &a, mask | IBV_QP_SQ_PSN) == EINVAL && state_of(qp, &q) == IBV_QPS_INIT,
	     "INIT->RTR with SQ_PSN (not allowed there) -> EINVAL");
	a.ah_attr.is_global = 0;
	T_OK(ibv_modify_qp(qp, &a, mask) == EINVAL, "RoCE path without GRH -> EINVAL");
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = 200;
	T_OK(ibv_modify_qp(qp, &a, mask) == EINVAL, "sgid_index beyond the GID table -> EINVAL");
	a.ah_attr.grh.sgid_index = 0;
	a.path_mtu = 7;
	T_OK(ibv_modify_qp(qp, &a, mask) == EINVAL, "path_mtu 7 -> EINVAL");
	a.path_mtu = IBV_MTU_1024;
	a.max_dest_rd_atomic = 255;
	T_OK(ibv_modify_qp(qp, &a, mask) == EINVAL, "max_dest_rd_atomic 255 -> EINVAL");
	a.max_dest_rd_atomic = 4;
	T_OK(ibv_modify_qp(qp, &a, mask) == 0 && state_of(qp, &q) == IBV_QPS_RTR, "INIT->RTR");
	T_OK(q.path_mtu == IBV_MTU_1024 && q.dest_qp_num == 0x1234 && q.rq_psn == 0x100 &&
	     q.max_dest_rd_atomic == 4 && q.min_rnr_timer == 12 && q.ah_attr.is_global &&
	     !memcmp(&q.ah_attr.grh.dgid, &gid0, sizeof(gid0)), "RTR attributes read back");

	to_rts(&a, IBV_QPT_RC, &mask);
	a.retry_cnt = 8;
	T_OK(ibv_modify_qp(qp, &a, mask) == EINVAL && state_of(qp, &q) == IBV_QPS_RTR,
	     "retry_cnt 8 -> EINVAL, still RTR");
	a.retry_cnt = 7;
	a.sq_psn = 0x7f000200;
	T_OK(ibv_modify_qp(qp, &a, mask) == 0 && state_of(qp, &q) == IBV_QPS_RTS, "RTR->RTS");
	T_OK(q.sq_psn == 0x000200 && q.timeout == 14 && q.retry_cnt == 7 && q.rnr_retry == 7 &&
	     q.max_rd_atomic == 4, "RTS attributes read back (PSN kept to 24 bits)");

	a.min_rnr_timer = 3;
	T_OK(ibv_modify_qp(qp, &a, IBV_QP_MIN_RNR_TIMER) == 0 && state_of(qp, &q) == IBV_QPS_RTS &&
	     q.min_rnr_timer == 3, "RTS->RTS attribute change without IBV_QP_STATE");
	T_OK(ibv_modify_qp(qp, &a, IBV_QP_TIMEOUT) == EINVAL, "RTS->RTS TIMEOUT not allowed");
	a.cur_qp_state = IBV_QPS_RTR;
	T_OK(ibv_modify_qp(qp, &a, IBV_QP_MIN_RNR_TIMER | IBV_QP_CUR_STATE) == EINVAL,
	     "CUR_STATE that is not the current state -> EINVAL");
	a.qp_state = IBV_QPS_SQD;
	T_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0 && state_of(qp, &q) == IBV_QPS_SQD, "RTS->SQD");
	a.qp_state = IBV_QPS_SQD;
	a.timeout = 18;
	T_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT) == 0 && state_of(qp, &q) == IBV_QPS_SQD &&
	     q.timeout == 18, "SQD->SQD may change the timeout");
	a.qp_state = IBV_QPS_RTS;
	T_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0 && state_of(qp, &q) == IBV_QPS_RTS, "SQD->RTS");
	a.qp_state = IBV_QPS_INIT;
	T_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == EINVAL && state_of(qp, &q) == IBV_QPS_RTS,
	     "RTS->INIT refused");
	a.qp_state = IBV_QPS_ERR;
	T_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0 && state_of(qp, &q) == IBV_QPS_ERR, "RTS->ERR");
	a.qp_state = IBV_QPS_RTS;
	T_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == EINVAL, "ERR->RTS refused");
	a.qp_state = IBV_QPS_RESET;
	T_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0 && state_of(qp, &q) == IBV_QPS_RESET &&
	     q.dest_qp_num == 0, "ERR->RESET forgets the attributes");
	to_init(&a, IBV_QPT_RC, &mask);
	T_OK(ibv_modify_qp(qp, &a, mask) == 0, "RESET->INIT again");
	to_rtr(&a, IBV_QPT_RC, &mask);
	T_OK(ibv_modify_qp(qp, &a, mask) == 0, "INIT->RTR again");
	to_rts(&a, IBV_QPT_RC, &mask);
	T_OK(ibv_modify_qp(qp, &a, mask) == 0, "RTR->RTS again");
	T_OK(ibv_destroy_qp(qp) == 0, "destroy an RTS QP");

	for (t = 0; t < 2; t++) {
		const char *n = types[t] == IBV_QPT_UC ? "UC" : "UD";

		ia.qp_type = types[t];
		qp = ibv_create_qp(pd, &ia);
		T_OK(qp != NULL, "%s QP", n);
		if (!qp)
			continue;
		to_init(&a, types[t], &mask);
		T_OK(ibv_modify_qp(qp, &a, mask) == 0, "%s RESET->INIT", n);
		to_rtr(&a, types[t], &mask);
		if (types[t] == IBV_QPT_UC)
			T_OK(ibv_modify_qp(qp, &a, mask | IBV_QP_MIN_RNR_TIMER) == EINVAL,
			     "UC has no MIN_RNR_TIMER");
		T_OK(ibv_modify_qp(qp, &a, mask) == 0, "%s INIT->RTR", n);
		to_rts(&a, types[t], &mask);
		if (types[t] == IBV_QPT_UC)
			T_OK(ibv_modify_qp(qp, &a, mask | IBV_QP_RETRY_CNT) == EINVAL,
			     "UC has no RETRY_CNT");
		T_OK(ibv_modify_qp(qp, &a, mask) == 0 && state_of(qp, &q) == IBV_QPS_RTS,
		     "%s RTR->RTS", n);
		T_OK(ibv_destroy_qp(qp) == 0, "%s destroy", n);
	}

	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	t_lo_free();
	return t_summary();
}
