/* QPs and SRQs on a cm id, and the QP state changes the CM makes: INIT at
 * creation, RTR + RTS when the connection is accepted or answered, ERR at
 * disconnection.  Like rdma-core, rdma_create_qp creates completion
 * channels and CQs when the application gives none (the inline helpers of
 * <rdma/rdma_verbs.h> use id->send_cq / recv_cq and their channels). */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <rdma/rdma_verbs.h>
#include <string.h>

#include "cm/cm.h"
#include "cm/devices.h"
#include "verbs/ece.h"
#include "verbs/export.h"

/* One PD per device, shared by every id on it that was given none, as
 * librdmacm's device PD is (an MR registered on a listener's id->pd then
 * serves the QPs of its connections).  Kept while the device's context
 * is, for the life of the process (cm/devices.c). */
static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
} default_pds[16];
static pthread_mutex_t default_pds_lock = PTHREAD_MUTEX_INITIALIZER;

/* Callers may hold cm_lock or not: the table has its own lock. */
struct ibv_pd *cm_default_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = NULL;
	int i;

	pthread_mutex_lock(&default_pds_lock);
	for (i = 0; i < 16 && default_pds[i].ctx && default_pds[i].ctx != ctx; i++)
		;
	if (i == 16) {
		errno = ENOMEM;
	} else if (default_pds[i].ctx) {
		pd = default_pds[i].pd;
	} else {
		pd = ibv_alloc_pd(ctx);
		if (pd) {
			default_pds[i].ctx = ctx;
			default_pds[i].pd = pd;
		}
	}
	pthread_mutex_unlock(&default_pds_lock);
	return pd;
}

void cm_id_set_device(struct cm_id *c, struct ibv_context *ctx)
{
	c->id.verbs = ctx;
	c->id.port_num = ctx ? 1 : 0;
	if (ctx && !c->id.pd)
		c->id.pd = cm_default_pd(ctx);
}

static int init_attr(struct cm_id *c, struct ibv_qp_attr *a, int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_INIT;
	a->pkey_index = 0;
	a->port_num = 1;
	*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (c->id.qp_type == IBV_QPT_UD) {
		a->qkey = RDMA_UDP_QKEY;
		*mask |= IBV_QP_QKEY;
	} else {
		a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		*mask |= IBV_QP_ACCESS_FLAGS;
	}
	return 0;
}

static int rtr_attr(struct cm_id *c, struct ibv_qp_attr *a, int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	*mask = IBV_QP_STATE;
	if (c->id.qp_type == IBV_QPT_UD)
		return 0;
	if (c->state < CM_REQ_SENT)
		return EINVAL;
	a->path_mtu = c->path.mtu ? (enum ibv_mtu)c->path.mtu : IBV_MTU_1024;
	a->dest_qp_num = c->remote_qpn;
	a->rq_psn = c->rq_psn;
	a->max_dest_rd_atomic = c->responder_resources;
	/* 0: 655.36 ms, what the kernel's CM gives every RC connection
	 * (cm_init_qp_rtr_attr).  A peer whose SENDs meet no receive then
	 * waits that long per retry, so rnr_retry_count 5 spans seconds, not
	 * milliseconds: applications written against Linux post a receive
	 * late within that span. */
	a->min_rnr_timer = 0;
	a->ah_attr.is_global = 1;
	a->ah_attr.port_num = 1;
	a->ah_attr.grh.dgid = c->id.route.addr.addr.ibaddr.dgid;
	a->ah_attr.grh.sgid_index = cm_gid_index(c->id.verbs, &c->id.route.addr.addr.ibaddr.sgid);
	a->ah_attr.grh.hop_limit = 64;
	a->ah_attr.grh.traffic_class = c->tos;
	a->ah_attr.grh.flow_label = ntohl(c->path.flow_label);
	*mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (c->id.qp && c->id.qp->qp_type == IBV_QPT_UC)
		return 0;
	*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	return 0;
}

static int rts_attr(struct cm_id *c, struct ibv_qp_attr *a, int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTS;
	a->sq_psn = c->sq_psn;
	*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (c->id.qp_type == IBV_QPT_UD)
		return 0;
	if (c->state < CM_REQ_SENT)
		return EINVAL;
	if (c->id.qp && c->id.qp->qp_type == IBV_QPT_UC)
		return 0;
	a->timeout = c->ack_timeout;
	a->retry_cnt = c->retry_count;
	a->rnr_retry = c->rnr_retry_count;
	a->max_rd_atomic = c->initiator_depth;
	*mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	return 0;
}

static int qp_modify(struct cm_id *c, int (*fill)(struct cm_id *, struct ibv_qp_attr *, int *))
{
	struct ibv_qp_attr a;
	int mask, err;

	if (!c->id.qp)
		return 0;
	err = fill(c, &a, &mask);
	if (err)
		return err;
	return ibv_modify_qp(c->id.qp, &a, mask);
}

/* Selective retransmission (verbs/ece.c) when both sides' ECE named it:
 * the application set softrnic's offer (rdma_set_local_ece with what
 * ibv_query_ece gives) and the peer's REQ or REP carried it too.  Not
 * offered unasked: a REQ with an unknown vendor's ECE is not every CM's
 * business to accept. */
static void sr_from_ece(struct cm_id *c)
{
	struct ibv_ece e = { 0 };

	if (!c->id.qp || c->id.qp->qp_type != IBV_QPT_RC)
		return;
	if (c->local_ece.vendor_id == SRN_ECE_VENDOR && c->remote_ece.vendor_id == SRN_ECE_VENDOR) {
		e.vendor_id = SRN_ECE_VENDOR;
		e.options = c->local_ece.options & c->remote_ece.options & SRN_ECE_SELECTIVE_RETX;
	}
	ibv_set_ece(c->id.qp, &e);
}

int cm_qp_to_rtr(struct cm_id *c)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	/* A QP the application reset must pass INIT first. */
	if (c->id.qp && ibv_query_qp(c->id.qp, &a, IBV_QP_STATE, &ia) == 0 &&
	    a.qp_state == IBV_QPS_RESET) {
		int err = qp_modify(c, init_attr);

		if (err)
			return err;
	}
	sr_from_ece(c);
	return qp_modify(c, rtr_attr);
}

int cm_qp_to_rts(struct cm_id *c)
{
	return qp_modify(c, rts_attr);
}

void cm_qp_to_err(struct cm_id *c)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	if (c->id.qp && c->own_qp)
		ibv_modify_qp(c->id.qp, &a, IBV_QP_STATE);
}

SRN_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
				 int *qp_attr_mask)
{
	struct cm_id *c = cm_id(id);
	int err;

	if (!id || !qp_attr || !qp_attr_mask) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	switch (qp_attr->qp_state) {
	case IBV_QPS_INIT:
		err = init_attr(c, qp_attr, qp_attr_mask);
		break;
	case IBV_QPS_RTR:
		err = rtr_attr(c, qp_attr, qp_attr_mask);
		break;
	case IBV_QPS_RTS:
		err = rts_attr(c, qp_attr, qp_attr_mask);
		break;
	default:
		err = EINVAL;
	}
	pthread_mutex_unlock(&cm_lock);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/* CQs (and their completion channels) for an attr that has none. */
static int make_cqs(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	if (!attr->send_cq) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			return -1;
		id->send_cq = ibv_create_cq(id->verbs, attr->cap.max_send_wr ? (int)attr->cap.max_send_wr : 1,
					    id, id->send_cq_channel, 0);
		if (!id->send_cq)
			return -1;
		attr->send_cq = id->send_cq;
	}
	if (!attr->recv_cq && !attr->srq) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			return -1;
		id->recv_cq = ibv_create_cq(id->verbs, attr->cap.max_recv_wr ? (int)attr->cap.max_recv_wr : 1,
					    id, id->recv_cq_channel, 0);
		if (!id->recv_cq)
			return -1;
		attr->recv_cq = id->recv_cq;
	} else if (!attr->recv_cq) {
		attr->recv_cq = attr->send_cq;
	}
	return 0;
}

static void free_cqs(struct rdma_cm_id *id)
{
	if (id->recv_cq && id->recv_cq != id->send_cq)
		ibv_destroy_cq(id->recv_cq);
	if (id->recv_cq_channel)
		ibv_destroy_comp_channel(id->recv_cq_channel);
	if (id->send_cq)
		ibv_destroy_cq(id->send_cq);
	if (id->send_cq_channel)
		ibv_destroy_comp_channel(id->send_cq_channel);
	id->recv_cq = id->send_cq = NULL;
	id->recv_cq_channel = id->send_cq_channel = NULL;
}

static int to_ready(struct cm_id *c)
{
	int err = qp_modify(c, init_attr);

	/* A UD QP needs no peer: rdma-core takes it to RTS at once. */
	if (!err && c->id.qp_type == IBV_QPT_UD)
		err = qp_modify(c, rtr_attr);
	if (!err && c->id.qp_type == IBV_QPT_UD)
		err = qp_modify(c, rts_attr);
	return err;
}

SRN_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct cm_id *c = cm_id(id);
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp *qp;
	int err;

	if (!id || !attr || !id->verbs || id->qp) {
		cm_dbg("create_qp: id %p verbs %p qp %p\n", (void *)id, id ? (void *)id->verbs : NULL,
		       id ? (void *)id->qp : NULL);
		errno = EINVAL;
		return -1;
	}
	a = *attr;
	if (!(a.comp_mask & IBV_QP_INIT_ATTR_PD) || !a.pd) {
		a.pd = id->pd ? id->pd : cm_default_pd(id->verbs);
		if (!a.pd)
			return -1;
		a.comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (a.pd->context != id->verbs) {
		cm_dbg("create_qp: PD of context %p, id on %p\n", (void *)a.pd->context,
		       (void *)id->verbs);
		errno = EINVAL;
		return -1;
	}
	if (!a.qp_type)
		a.qp_type = id->qp_type;
	if (!a.srq && id->srq)
		a.srq = id->srq;
	if (make_cqs(id, &a))
		goto fail;
	/* Plain attributes take the basic call (its struct is a prefix). */
	if (a.comp_mask & ~IBV_QP_INIT_ATTR_PD)
		qp = ibv_create_qp_ex(id->verbs, &a);
	else
		qp = ibv_create_qp(a.pd, (struct ibv_qp_init_attr *)&a);
	if (!qp)
		goto fail;
	pthread_mutex_lock(&cm_lock);
	id->qp = qp;
	c->own_qp = true;
	err = to_ready(c);
	if (err)
		id->qp = NULL;
	pthread_mutex_unlock(&cm_lock);
	if (err) {
		ibv_destroy_qp(qp);
		errno = err;
		goto fail;
	}
	id->pd = a.pd; /* the QP's, as librdmacm leaves it */
	attr->cap = a.cap;
	attr->send_cq = a.send_cq;
	attr->recv_cq = a.recv_cq;
	return 0;
fail:
	err = errno;
	free_cqs(id);
	errno = err;
	return -1;
}

SRN_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			      struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ex;
	int ret;

	if (!qp_init_attr) {
		errno = EINVAL;
		return -1;
	}
	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, qp_init_attr, sizeof(*qp_init_attr));
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	ret = rdma_create_qp_ex(id, &ex);
	if (!ret) {
		qp_init_attr->cap = ex.cap;
		qp_init_attr->send_cq = ex.send_cq;
		qp_init_attr->recv_cq = ex.recv_cq;
	}
	return ret;
}

SRN_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	struct ibv_qp *qp;

	if (!id)
		return;
	pthread_mutex_lock(&cm_lock);
	qp = id->qp;
	id->qp = NULL;
	cm_id(id)->own_qp = false;
	pthread_mutex_unlock(&cm_lock);
	if (qp)
		ibv_destroy_qp(qp);
	free_cqs(id);
}

SRN_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq_init_attr_ex a;
	struct ibv_srq *srq;

	if (!id || !attr || !id->verbs || id->srq) {
		errno = EINVAL;
		return -1;
	}
	a = *attr;
	if (!(a.comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a.pd) {
		a.pd = id->pd ? id->pd : cm_default_pd(id->verbs);
		if (!a.pd)
			return -1;
		a.comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (!(a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		a.srq_type = IBV_SRQT_BASIC;
	a.comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
	if (a.srq_type == IBV_SRQT_BASIC) {
		struct ibv_srq_init_attr b = { .srq_context = a.srq_context, .attr = a.attr };

		srq = ibv_create_srq(a.pd, &b);
		if (srq)
			attr->attr = b.attr;
	} else {
		srq = ibv_create_srq_ex(id->verbs, &a);
		if (srq)
			attr->attr = a.attr;
	}
	if (!srq)
		return -1;
	id->srq = srq;
	if (!id->pd)
		id->pd = a.pd;
	return 0;
}

SRN_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			       struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ex;
	int ret;

	if (!attr) {
		errno = EINVAL;
		return -1;
	}
	memset(&ex, 0, sizeof(ex));
	ex.srq_context = attr->srq_context;
	ex.attr = attr->attr;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	ex.srq_type = IBV_SRQT_BASIC;
	ex.pd = pd;
	ret = rdma_create_srq_ex(id, &ex);
	if (!ret)
		attr->attr = ex.attr;
	return ret;
}

SRN_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!id || !id->srq)
		return;
	ibv_destroy_srq(id->srq);
	id->srq = NULL;
}
