/* Post-time rules of the send queue for UD and UC QPs (no packet leaves:
 * every WR here is refused before it reaches the transport): UD needs
 * an AH and takes only SEND / SEND_WITH_IMM; UC refuses RDMA READ and
 * atomics (EINVAL, *bad_wr), as rdma-core's providers do. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

static int to_rts(struct ibv_qp *qp, const union ibv_gid *gid)
{
	struct ibv_qp_attr a;
	int ud = qp->qp_type == IBV_QPT_UD;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = 0x1234;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ud) {
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
			return -2;
	} else {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = qp->qp_num;
		a.rq_psn = 1;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = *gid;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = 1;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
			return -3;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) ? -4 : 0;
}

int main(void)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *ud, *uc;
	struct ibv_ah *ah;
	struct ibv_ah_attr aa;
	struct ibv_mr *mr;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	union ibv_gid gid;
	static uint64_t buf[8];
	int r1, r2;

	ctx = t_lo_open();
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	ud = t_qp_create(pd, cq, IBV_QPT_UD, 4);
	uc = t_qp_create(pd, cq, IBV_QPT_UC, 4);
	if (!pd || !cq || !mr || !ud || !uc || ibv_query_gid(ctx, 1, 0, &gid)) {
		printf("FAIL: setup\n");
		return 1;
	}
	r1 = to_rts(ud, &gid);
	r2 = to_rts(uc, &gid);
	T_OK(r1 == 0 && r2 == 0, "UD and UC QPs to RTS (%d, %d)", r1, r2);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.grh.dgid = gid;
	aa.port_num = 1;
	ah = ibv_create_ah(pd, &aa);
	T_OK(ah != NULL, "AH to GID 0");

	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.wr.ud.remote_qpn = ud->qp_num;
	wr.wr.ud.remote_qkey = 0x1234;
	bad = NULL;
	T_OK(ibv_post_send(ud, &wr, &bad) == EINVAL && bad == &wr, "UD SEND without AH -> EINVAL");
	wr.wr.ud.ah = ah;
	wr.opcode = IBV_WR_RDMA_WRITE;
	bad = NULL;
	T_OK(ibv_post_send(ud, &wr, &bad) == EINVAL && bad == &wr, "UD RDMA WRITE -> EINVAL");
	wr.opcode = IBV_WR_RDMA_READ;
	T_OK(ibv_post_send(ud, &wr, &bad) == EINVAL, "UD RDMA READ -> EINVAL");

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = (uintptr_t)buf;
	wr.wr.rdma.rkey = mr->rkey;
	bad = NULL;
	T_OK(ibv_post_send(uc, &wr, &bad) == EINVAL && bad == &wr, "UC RDMA READ -> EINVAL");
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = (uintptr_t)buf;
	wr.wr.atomic.rkey = mr->rkey;
	T_OK(ibv_post_send(uc, &wr, &bad) == EINVAL, "UC FETCH_AND_ADD -> EINVAL");
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	T_OK(ibv_post_send(uc, &wr, &bad) == EINVAL, "UC CMP_AND_SWP -> EINVAL");

	T_OK(ibv_destroy_qp(ud) == 0 && ibv_destroy_qp(uc) == 0, "destroy QPs");
	T_OK(ibv_destroy_ah(ah) == 0, "destroy AH");
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	T_OK(ibv_dealloc_pd(pd) == 0, "PD free");
	ibv_close_device(ctx);
	t_lo_free();
	return t_summary();
}
