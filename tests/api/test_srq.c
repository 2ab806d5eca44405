/* Shared receive queues, black-box: creation limits and granted values,
 * ibv_create_srq_ex (basic through both routes; XRC without its domain
 * and CQ EINVAL (test_xrc covers XRC); tag matching EOPNOTSUPP), query, modify (limit arming, resize up and not below the
 * posted WQEs, all-or-nothing), ibv_post_srq_recv errors and *bad_wr,
 * RC/UC/UD QPs attached to one SRQ (no RQ of their own: post_recv
 * EINVAL), EBUSY rules (SRQ with QPs, PD with an SRQ).  The limit event
 * needs a consumer: tests/unit/test_srq_limit.c drives it (the RC
 * transport does not take from SRQs yet). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

static struct ibv_srq *mk_srq(struct ibv_pd *pd, uint32_t wr, uint32_t sge, int *err)
{
	struct ibv_srq_init_attr ia = { .srq_context = (void *)0x5a,
					.attr = { .max_wr = wr, .max_sge = sge } };
	struct ibv_srq *s;

	errno = 0;
	s = ibv_create_srq(pd, &ia);
	*err = s ? 0 : errno;
	return s;
}

static struct ibv_qp *mk_qp(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_cq *rcq,
			    struct ibv_srq *srq, enum ibv_qp_type t,
			    struct ibv_qp_init_attr *out, int *err)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = rcq, .srq = srq, .qp_type = t,
		.cap = { .max_send_wr = 4, .max_send_sge = 1,
			 .max_recv_wr = 16, .max_recv_sge = 2 },
	};
	struct ibv_qp *qp;

	errno = 0;
	qp = ibv_create_qp(pd, &ia);
	*err = qp ? 0 : errno;
	if (out)
		*out = ia;
	return qp;
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .pkey_index = 0, .qkey = 0x11111111,
				 .qp_access_flags = 0 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	mask |= qp->qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
	return ibv_modify_qp(qp, &a, mask);
}

int main(void)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd, *pd2;
	struct ibv_cq *cq;
	struct ibv_srq *srq, *s2;
	struct ibv_srq_attr sa;
	struct ibv_srq_init_attr_ex iax;
	struct ibv_qp *qps[3];
	struct ibv_qp_init_attr got;
	struct ibv_qp_attr qa;
	struct ibv_recv_wr wr[40], *bad;
	struct ibv_sge sge[4];
	static char buf[4096];
	enum ibv_qp_type types[3] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	uint32_t n;
	int err, i, ret;

	ctx = t_lo_open();
	pd = ibv_alloc_pd(ctx);
	pd2 = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!pd || !pd2 || !cq) {
		printf("FAIL: setup\n");
		return 1;
	}

	/* ---- create ---- */
	{
		struct ibv_device_attr da;

		ibv_query_device(ctx, &da);
		T_OK(!mk_srq(pd, (uint32_t)da.max_srq_wr + 1, 1, &err) && err == EINVAL,
		     "max_wr > max_srq_wr -> EINVAL (%d)", err);
		T_OK(!mk_srq(pd, 4, (uint32_t)da.max_srq_sge + 1, &err) && err == EINVAL,
		     "max_sge > max_srq_sge -> EINVAL (%d)", err);
	}
	{
		struct ibv_srq_init_attr ia = { .srq_context = (void *)0x5a,
						.attr = { .max_wr = 10, .max_sge = 2,
							  .srq_limit = 3 } };

		srq = ibv_create_srq(pd, &ia);
		T_OK(srq && ia.attr.max_wr >= 10 && ia.attr.max_sge == 2,
		     "create: granted max_wr %u >= 10, max_sge 2", ia.attr.max_wr);
		T_OK(srq && srq->context == ctx && srq->pd == pd &&
		     srq->srq_context == (void *)0x5a, "public fields set");
	}
	if (!srq)
		return 1;
	T_OK(ibv_query_srq(srq, &sa) == 0 && sa.max_wr >= 10 && sa.max_sge == 2 &&
	     sa.srq_limit == 0, "query: max_wr %u, max_sge %u, limit 0 (ignored at create)",
	     sa.max_wr, sa.max_sge);
	T_OK(ibv_get_srq_num(srq, &n) == EOPNOTSUPP, "get_srq_num: only XRC SRQs have one");

	/* ---- create_srq_ex ---- */
	memset(&iax, 0, sizeof(iax));
	iax.attr.max_wr = 4;
	iax.attr.max_sge = 1;
	iax.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
	iax.srq_type = IBV_SRQT_BASIC;
	iax.pd = pd;
	s2 = ibv_create_srq_ex(ctx, &iax);
	T_OK(s2 != NULL, "create_srq_ex basic (inline route)");
	if (s2)
		ibv_destroy_srq(s2);
	iax.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	iax.cq = cq;
	errno = 0;
	s2 = ibv_create_srq_ex(ctx, &iax);
	T_OK(!s2 && errno == EOPNOTSUPP, "create_srq_ex basic + CQ mask -> EOPNOTSUPP (%d)", errno);
	iax.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
	iax.srq_type = IBV_SRQT_XRC;
	errno = 0;
	s2 = ibv_create_srq_ex(ctx, &iax);
	T_OK(!s2 && errno == EINVAL, "create_srq_ex XRC without XRCD and CQ -> EINVAL (%d)",
	     errno);
	iax.srq_type = IBV_SRQT_TM;
	errno = 0;
	s2 = ibv_create_srq_ex(ctx, &iax);
	T_OK(!s2 && errno == EOPNOTSUPP, "create_srq_ex tag matching -> EOPNOTSUPP (%d)", errno);

	/* ---- modify ---- */
	ibv_query_srq(srq, &sa);
	memset(&qa, 0, sizeof(qa));
	{
		struct ibv_srq_attr m = { .srq_limit = sa.max_wr + 1 };

		T_OK(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT) == EINVAL,
		     "limit above max_wr -> EINVAL");
		m.srq_limit = 5;
		T_OK(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT) == 0, "arm limit 5");
		T_OK(ibv_query_srq(srq, &sa) == 0 && sa.srq_limit == 5, "query shows limit 5");
		m.max_wr = 100000;
		m.srq_limit = 1;
		T_OK(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) == EINVAL,
		     "bad max_wr + good limit -> EINVAL ...");
		T_OK(ibv_query_srq(srq, &sa) == 0 && sa.srq_limit == 5,
		     "... and nothing changed (limit still 5)");
		T_OK(ibv_modify_srq(srq, &m, 1 << 7) == EINVAL, "unknown mask bit -> EINVAL");
		m.max_wr = 0;
		T_OK(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR) == EINVAL, "max_wr 0 -> EINVAL");
		m.srq_limit = 0;
		T_OK(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT) == 0 &&
		     ibv_query_srq(srq, &sa) == 0 && sa.srq_limit == 0, "limit 0 disarms");
	}

	/* ---- post ---- */
	for (i = 0; i < 4; i++)
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 64, .lkey = 0 };
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 40; i++) {
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = sge;
		wr[i].num_sge = 1;
		wr[i].next = i + 1 < 40 ? &wr[i + 1] : NULL;
	}
	wr[2].num_sge = 3; /* more than max_sge 2 */
	bad = NULL;
	ret = ibv_post_srq_recv(srq, &wr[0], &bad);
	T_OK(ret == EINVAL && bad == &wr[2], "num_sge > max_sge -> EINVAL, bad_wr = 3rd WR");
	wr[2].num_sge = 2;
	ibv_query_srq(srq, &sa);
	bad = NULL;
	/* 2 posted already; fill the rest and one more */
	ret = ibv_post_srq_recv(srq, &wr[2], &bad);
	T_OK(ret == ENOMEM && bad == &wr[sa.max_wr], "full -> ENOMEM, bad_wr = WR #%u",
	     sa.max_wr);

	/* ---- resize ---- */
	{
		struct ibv_srq_attr m = { .max_wr = sa.max_wr - 1 };

		T_OK(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR) == EINVAL,
		     "resize below the %u posted WQEs -> EINVAL", sa.max_wr);
		m.max_wr = 32;
		T_OK(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR) == 0 && m.max_wr >= 32,
		     "resize up to 32 (granted %u)", m.max_wr);
		T_OK(ibv_query_srq(srq, &sa) == 0 && sa.max_wr >= 32, "query shows %u", sa.max_wr);
		wr[39].next = NULL;
		bad = NULL;
		ret = ibv_post_srq_recv(srq, &wr[30], &bad);
		T_OK(ret == 0, "posting continues after the resize (%d)", ret);
	}

	/* ---- QPs on the SRQ ---- */
	for (i = 0; i < 3; i++) {
		qps[i] = mk_qp(pd, cq, cq, srq, types[i], &got, &err);
		T_OK(qps[i] && got.cap.max_recv_wr == 0 && got.cap.max_recv_sge == 0,
		     "%s QP on the SRQ (recv caps 0) (%d)", i == 0 ? "RC" : i == 1 ? "UC" : "UD", err);
	}
	if (qps[0]) {
		struct ibv_qp_attr qattr;

		T_OK(ibv_query_qp(qps[0], &qattr, 0, &got) == 0 && got.srq == srq,
		     "query_qp reports the SRQ");
		T_OK(to_init(qps[0]) == 0, "RC QP to INIT");
		wr[0].next = NULL;
		wr[0].num_sge = 1;
		bad = NULL;
		T_OK(ibv_post_recv(qps[0], &wr[0], &bad) == EINVAL && bad == &wr[0],
		     "post_recv on a QP with an SRQ -> EINVAL");
	}
	T_OK(!mk_qp(pd, cq, NULL, srq, IBV_QPT_RC, NULL, &err) && err == EINVAL,
	     "SRQ QP without recv_cq -> EINVAL (%d)", err);
	T_OK(ibv_destroy_srq(srq) == EBUSY, "destroy SRQ with QPs -> EBUSY");
	for (i = 0; i < 3; i++)
		if (qps[i])
			ibv_destroy_qp(qps[i]);
	T_OK(ibv_dealloc_pd(pd) == EBUSY, "dealloc PD with an SRQ -> EBUSY");
	T_OK(ibv_destroy_srq(srq) == 0, "destroy SRQ once its QPs are gone");

	/* A fresh SRQ and QP after the old ones are gone. */
	srq = mk_srq(pd2, 4, 1, &err);
	qps[0] = srq ? mk_qp(pd2, cq, cq, srq, IBV_QPT_UD, NULL, &err) : NULL;
	T_OK(qps[0] != NULL, "new UD QP on a new SRQ");
	if (qps[0])
		ibv_destroy_qp(qps[0]);
	if (srq)
		ibv_destroy_srq(srq);

	T_OK(ibv_dealloc_pd(pd) == 0 && ibv_dealloc_pd(pd2) == 0, "PDs free");
	ibv_destroy_cq(cq);
	ibv_close_device(ctx);
	t_lo_free();
	return t_summary();
}
