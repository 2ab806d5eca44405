/* Helpers for the UD tests: one endpoint = context, PD, CQ, UD QP in RTS
 * and a registered buffer with slots for receives and sends. */
#ifndef T_UD_H
#define T_UD_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tests/lib/t_util.h"
#include "tests/lib/t_verbs.h"

enum { TU_SLOT = 8192, TU_SLOTS = 64, TU_QKEY = 0x11111111 };

struct tu_end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
};

static inline int tu_open(struct tu_end *e, uint32_t qkey)
{
	struct ibv_qp_attr a;

	memset(e, 0, sizeof(*e));
	e->ctx = t_lo_open();
	if (!e->ctx)
		return -1;
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = e->pd ? ibv_create_cq(e->ctx, 256, NULL, NULL, 0) : NULL;
	e->qp = e->cq ? t_qp_create(e->pd, e->cq, IBV_QPT_UD, 64) : NULL;
	e->buf = calloc(TU_SLOTS, TU_SLOT);
	e->mr = e->qp && e->buf ? ibv_reg_mr(e->pd, e->buf, (size_t)TU_SLOTS * TU_SLOT,
					      IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!e->mr || ibv_query_gid(e->ctx, 1, 0, &e->gid))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = qkey;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) ? -1 : 0;
}

/* Post a receive into slot i (whole slot). */
static inline int tu_recv(struct tu_end *e, int i)
{
	struct ibv_sge s = { (uintptr_t)(e->buf + (size_t)i * TU_SLOT), TU_SLOT, e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1 }, *bad;

	return ibv_post_recv(e->qp, &wr, &bad);
}

static inline struct ibv_ah *tu_ah(struct tu_end *e, const union ibv_gid *dgid)
{
	struct ibv_ah_attr a = { .is_global = 1, .port_num = 1,
				 .grh = { .dgid = *dgid, .hop_limit = 64 } };

	return ibv_create_ah(e->pd, &a);
}

/* Send len bytes from slot i (filled with byte v) to (ah, qpn, qkey). */
static inline int tu_send(struct tu_end *e, int i, uint32_t len, uint8_t v, struct ibv_ah *ah,
			  uint32_t qpn, uint32_t qkey)
{
	uint8_t *p = e->buf + (size_t)i * TU_SLOT;
	struct ibv_sge s = { (uintptr_t)p, len, e->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1000u + (uint64_t)i, .sg_list = &s, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	memset(p, v, len);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

/* One completion (status checked by the caller) within ms; 1 or 0. */
static inline int tu_poll(struct tu_end *e, struct ibv_wc *wc, int ms)
{
	return t_poll_cq(e->cq, wc, 1, ms) == 1;
}

/* True if slot i holds a GRH then len bytes of v. */
static inline bool tu_payload_ok(struct tu_end *e, int i, uint32_t len, uint8_t v)
{
	const uint8_t *p = e->buf + (size_t)i * TU_SLOT + 40;

	for (uint32_t k = 0; k < len; k++)
		if (p[k] != v)
			return false;
	return true;
}

/* A UC QP (INIT with remote write) connected to dqpn at gid, in RTS (MTU
 * 1024, both PSNs 0). */
static inline int tu_uc_connect(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *gid)
{
	const struct t_rc_attr init = { .access = IBV_ACCESS_REMOTE_WRITE };
	struct ibv_qp_attr a;

	/* (INIT is as an RC QP's; RTR and RTS take fewer attributes) */
	if (t_qp_rc_init(qp, &init))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

#endif
