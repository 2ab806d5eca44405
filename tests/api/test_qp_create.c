/* QP creation, query and destruction, black-box: caps above the device
 * limits -> EINVAL, granted caps reported back (>= requested, inline
 * included), missing CQ -> EINVAL, unsupported types -> EOPNOTSUPP, unique
 * QPNs, query_qp's attr and init_attr, ibv_create_qp_ex with send_ops_flags
 * (unsupported ops -> EOPNOTSUPP), ibv_qp_to_qp_ex with the wr_* entry
 * points, and PD/CQ EBUSY while a QP holds them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

static struct ibv_cq *cq;

static struct ibv_qp_init_attr base(void)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 10, .max_recv_wr = 20, .max_send_sge = 3,
			 .max_recv_sge = 2, .max_inline_data = 64 },
	};

	return ia;
}

static int create_err(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	struct ibv_qp *qp;

	errno = 0;
	qp = ibv_create_qp(pd, ia);
	if (qp) {
		ibv_destroy_qp(qp);
		return 0;
	}
	return errno;
}

int main(void)
{
	struct ibv_context *ctx;
	struct ibv_device_attr da;
	struct ibv_pd *pd;
	struct ibv_qp *qps[10], *qp;
	struct ibv_qp_init_attr ia, qia;
	struct ibv_qp_init_attr_ex ix;
	struct ibv_qp_attr qa;
	struct ibv_qp_ex *qx;
	int i, j, dup;

	ctx = t_lo_open();
	T_OK(ibv_query_device(ctx, &da) == 0, "query_device (max_qp_wr %d, max_sge %d)",
	     da.max_qp_wr, da.max_sge);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!pd || !cq)
		return 1;

	ia = base();
	ia.cap.max_send_wr = da.max_qp_wr + 1;
	T_OK(create_err(pd, &ia) == EINVAL, "max_send_wr above max_qp_wr -> EINVAL");
	ia = base();
	ia.cap.max_recv_wr = da.max_qp_wr + 1;
	T_OK(create_err(pd, &ia) == EINVAL, "max_recv_wr above max_qp_wr -> EINVAL");
	ia = base();
	ia.cap.max_send_sge = da.max_sge + 1;
	T_OK(create_err(pd, &ia) == EINVAL, "max_send_sge above max_sge -> EINVAL");
	ia = base();
	ia.cap.max_recv_sge = da.max_sge + 1;
	T_OK(create_err(pd, &ia) == EINVAL, "max_recv_sge above max_sge -> EINVAL");
	ia = base();
	ia.cap.max_inline_data = 257;
	T_OK(create_err(pd, &ia) == EINVAL, "max_inline_data 257 -> EINVAL");
	ia = base();
	ia.send_cq = NULL;
	T_OK(create_err(pd, &ia) == EINVAL, "no send CQ -> EINVAL");
	ia = base();
	ia.recv_cq = NULL;
	T_OK(create_err(pd, &ia) == EINVAL, "no recv CQ (no SRQ) -> EINVAL");
	ia = base();
	ia.qp_type = IBV_QPT_UD;
	T_OK(create_err(pd, &ia) == 0, "UD QP");
	ia = base();
	ia.qp_type = IBV_QPT_UC;
	T_OK(create_err(pd, &ia) == 0, "UC QP");

	ia = base();
	ia.sq_sig_all = 1;
	ia.qp_context = &ia;
	qp = ibv_create_qp(pd, &ia);
	T_OK(qp != NULL, "RC QP");
	if (!qp)
		return 1;
	T_OK(ia.cap.max_send_wr >= 10 && ia.cap.max_recv_wr >= 20 && ia.cap.max_send_sge >= 3 &&
	     ia.cap.max_recv_sge >= 2 && ia.cap.max_inline_data >= 64,
	     "granted caps written back: wr %u/%u sge %u/%u inline %u", ia.cap.max_send_wr,
	     ia.cap.max_recv_wr, ia.cap.max_send_sge, ia.cap.max_recv_sge, ia.cap.max_inline_data);
	T_OK(qp->state == IBV_QPS_RESET && qp->qp_type == IBV_QPT_RC && qp->pd == pd &&
	     qp->send_cq == cq && qp->recv_cq == cq && qp->context == ctx &&
	     qp->qp_context == &ia, "ibv_qp fields");
	T_OK(qp->qp_num > 1 && qp->qp_num <= 0xffffff, "QPN 0x%x is 24-bit and not QP0/QP1", qp->qp_num);
	memset(&qa, 0xff, sizeof(qa));
	memset(&qia, 0, sizeof(qia));
	T_OK(ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_CAP, &qia) == 0, "query_qp");
	T_OK(qa.qp_state == IBV_QPS_RESET && qa.cap.max_send_wr == ia.cap.max_send_wr &&
	     qa.cap.max_inline_data == ia.cap.max_inline_data, "query: state and caps");
	T_OK(qia.qp_type == IBV_QPT_RC && qia.sq_sig_all == 1 && qia.send_cq == cq &&
	     qia.recv_cq == cq && qia.cap.max_recv_sge == ia.cap.max_recv_sge &&
	     qia.qp_context == &ia, "query: init_attr");
	qx = ibv_qp_to_qp_ex(qp);
	T_OK(qx && &qx->qp_base == qp && qx->wr_start && qx->wr_complete && qx->wr_send &&
	     qx->wr_set_sge, "ibv_qp_to_qp_ex gives the wr_* entry points");
	T_OK(ibv_dealloc_pd(pd) == EBUSY, "PD busy while the QP exists");
	T_OK(ibv_destroy_cq(cq) == EBUSY, "CQ busy while the QP exists");
	T_OK(ibv_destroy_qp(qp) == 0, "destroy_qp");

	for (i = 0; i < 10; i++) {
		ia = base();
		qps[i] = ibv_create_qp(pd, &ia);
	}
	dup = 0;
	for (i = 0; i < 10; i++)
		for (j = 0; j < i; j++)
			if (!qps[i] || (qps[j] && qps[i]->qp_num == qps[j]->qp_num))
				dup++;
	T_OK(dup == 0, "10 QPs, 10 distinct QPNs");
	for (i = 0; i < 10; i++)
		if (qps[i])
			ibv_destroy_qp(qps[i]);

	/* ibv_create_qp_ex */
	memset(&ix, 0, sizeof(ix));
	ix.send_cq = cq;
	ix.recv_cq = cq;
	ix.qp_type = IBV_QPT_RC;
	ix.cap.max_send_wr = 4;
	ix.cap.max_recv_wr = 4;
	ix.cap.max_send_sge = 1;
	ix.cap.max_recv_sge = 1;
	ix.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ix.pd = pd;
	ix.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
			    IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	qp = ibv_create_qp_ex(ctx, &ix);
	T_OK(qp != NULL, "create_qp_ex with send_ops_flags");
	if (qp) {
		qx = ibv_qp_to_qp_ex(qp);
		T_OK(qx && qx->wr_rdma_write && qx->wr_atomic_fetch_add, "qp_ex ops filled");
		ibv_destroy_qp(qp);
	}
	ix.send_ops_flags = IBV_QP_EX_WITH_TSO;
	errno = 0;
	T_OK(!ibv_create_qp_ex(ctx, &ix) && errno == EOPNOTSUPP, "TSO op -> EOPNOTSUPP");
	ix.qp_type = IBV_QPT_UD;
	ix.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
	errno = 0;
	T_OK(!ibv_create_qp_ex(ctx, &ix) && errno == EOPNOTSUPP, "RDMA WRITE on UD -> EOPNOTSUPP");
	ix.qp_type = IBV_QPT_RC;
	ix.send_ops_flags = IBV_QP_EX_WITH_SEND;
	ix.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	errno = 0;
	T_OK(!ibv_create_qp_ex(ctx, &ix) && errno == EINVAL, "create_qp_ex without a PD -> EINVAL");
	ix.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
	errno = 0;
	T_OK(!ibv_create_qp_ex(ctx, &ix) && errno == EOPNOTSUPP, "TSO header -> EOPNOTSUPP");

	T_OK(ibv_destroy_cq(cq) == 0, "CQ free again");
	T_OK(ibv_dealloc_pd(pd) == 0, "PD free again");
	ibv_close_device(ctx);
	t_lo_free();
	return t_summary();
}
