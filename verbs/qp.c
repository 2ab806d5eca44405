/* Queue pairs: creation (caps checked against srn_limits and reported
 * back), query, destroy, and the context's QP table that the transport
 * searches by QPN for every incoming packet.  modify_qp is qp_state.c,
 * posting is qp_post.c and qp_wr.c. */
#include "verbs/datapath.h"
#include "verbs/pd_buf.h"
#include "verbs/shared_rings.h"
#include "verbs/export.h"

#include <stdlib.h>
#include <string.h>

/* ---- QP table: open addressing by QPN, linear probing --------------- */

#define QP_TOMB ((struct srn_qp *)(uintptr_t)1)

static uint32_t round_pow2(uint32_t v)
{
	uint32_t r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

static uint32_t qpn_hash(uint32_t qpn, uint32_t cap)
{
	return (qpn * 2654435761u) & (cap - 1);
}

/* ctx->lock held.  O(1), O(cap) when rebuilding (counted, not walked:
 * a walk per create made 10k QPs quadratic). */
static int qp_table_insert(struct srn_context *ctx, struct srn_qp *qp)
{
	uint32_t used = ctx->qps_used, live = ctx->qps_live, i;

	if (live >= ctx->max_qp)
		return ENOMEM;       /* max_qp, as a NIC out of QP contexts */
	/* Rebuild (dropping tombstones) when half full, sized to the live
	 * QPs so that create/destroy churn does not grow it forever. */
	if ((used + 1) * 2 > ctx->qps_cap) {
		uint32_t cap = round_pow2((live + 1) * 4 > 64 ? (live + 1) * 4 : 64);
		struct srn_qp **old = ctx->qps, **t;
		uint32_t ocap = ctx->qps_cap;

		t = calloc(cap, sizeof(*t));
		if (!t)
			return ENOMEM;
		ctx->qps = t;
		ctx->qps_cap = cap;
		for (i = 0; i < ocap; i++) {
			if (old[i] && old[i] != QP_TOMB) {
				uint32_t h = qpn_hash(old[i]->ex.qp_base.qp_num, cap);

				while (t[h])
					h = (h + 1) & (cap - 1);
				t[h] = old[i];
			}
		}
		free(old);
		ctx->qps_used = live;
	}
	i = qpn_hash(qp->ex.qp_base.qp_num, ctx->qps_cap);
	while (ctx->qps[i] && ctx->qps[i] != QP_TOMB)
		i = (i + 1) & (ctx->qps_cap - 1);
	ctx->qps_used += !ctx->qps[i];
	ctx->qps_live++;
	ctx->qps[i] = qp;
	return 0;
}

static void qp_table_remove(struct srn_context *ctx, struct srn_qp *qp)
{
	uint32_t i, n;

	if (!ctx->qps_cap)
		return;
	i = qpn_hash(qp->ex.qp_base.qp_num, ctx->qps_cap);
	for (n = 0; n < ctx->qps_cap && ctx->qps[i]; n++) {
		if (ctx->qps[i] == qp) {
			ctx->qps[i] = QP_TOMB;
			ctx->qps_live--;
			return;
		}
		i = (i + 1) & (ctx->qps_cap - 1);
	}
}

struct srn_qp *srn_qp_lookup(struct srn_context *ctx, uint32_t qpn)
{
	struct srn_qp *found = NULL;
	uint32_t i, n;

	pthread_mutex_lock(&ctx->lock);
	if (ctx->qps_cap) {
		i = qpn_hash(qpn, ctx->qps_cap);
		for (n = 0; n < ctx->qps_cap && ctx->qps[i]; n++) {
			struct srn_qp *q = ctx->qps[i];

			if (q != QP_TOMB && q->ex.qp_base.qp_num == qpn) {
				found = q;
				break;
			}
			i = (i + 1) & (ctx->qps_cap - 1);
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	return found;
}

/* ---- create ---------------------------------------------------------- */

/* Send opcodes the ibv_wr_* API may be asked for, per QP type. */
static uint64_t send_ops_supported(enum ibv_qp_type type)
{
	uint64_t f = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;

	if (type == IBV_QPT_RC || type == IBV_QPT_UC)
		f |= IBV_QP_EX_WITH_RDMA_WRITE |
		     IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
		     IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
	if (type == IBV_QPT_XRC_SEND)
		f |= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
		     IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
		     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	if (type == IBV_QPT_RC)
		f |= IBV_QP_EX_WITH_RDMA_READ |
		     IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
		     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
		     IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_ATOMIC_WRITE;
	return f;
}

static int check_init_attr(struct ibv_context *context,
			   const struct ibv_qp_init_attr_ex *a)
{
	const struct ibv_qp_cap *c = &a->cap;

	switch (a->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
		break;
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		/* (iWARP has RC only, as siw) */
		return srn_ctx(context)->dev->iwarp ? EOPNOTSUPP
						    : srn_xrc_check_init_attr(context, a);
	case IBV_QPT_RAW_PACKET:
		return srn_raw_qp_refusal();
	default:
		return EOPNOTSUPP; /* driver QPs */
	}
	/* iWARP has RC only, as siw (transport/iwarp_qp.c) */
	if (srn_ctx(context)->dev->iwarp && a->qp_type != IBV_QPT_RC)
		return EOPNOTSUPP;
	if (!a->pd || a->pd->context != context)
		return EINVAL;
	if (!a->send_cq || a->send_cq->context != context)
		return EINVAL;
	/* A QP on an SRQ still completes its receives into recv_cq. */
	if (!a->recv_cq || a->recv_cq->context != context)
		return EINVAL;
	if (a->srq && a->srq->context != context)
		return EINVAL;
	if (c->max_send_wr > SRN_MAX_QP_WR || c->max_send_sge > SRN_MAX_SGE ||
	    c->max_inline_data > SRN_MAX_INLINE)
		return EINVAL;
	if (!a->srq && (c->max_recv_wr > SRN_MAX_QP_WR ||
			c->max_recv_sge > SRN_MAX_SGE))
		return EINVAL;
	return 0;
}

static void qp_free(struct srn_qp *qp)
{
	pthread_cond_destroy(&qp->ex.qp_base.cond);
	pthread_mutex_destroy(&qp->ex.qp_base.mutex);
	pthread_mutex_destroy(&qp->lock);
	if (!srn_pd_buf_free(&qp->sq_buf, qp->sq.wqe))
		free(qp->sq.wqe);
	if (qp->rqs)
		srn_rings_free_pd(&qp->rq_buf, qp->rqs, srn_rq_ring_bytes(qp->rq.max_wr),
				  qp->rq_share);
	if (qp->srq_hdr) {
		atomic_store(&qp->srq_hdr->open, 0);
		srn_rings_free(qp->srq_hdr, srn_rq_ring_bytes(0), qp->srq_hdr_share);
	}
	free(qp);
}

/* Can a same-host peer deliver a SEND to this QP itself (an RC, UC or
 * UD QP whose receive CQ is in memory the peer maps)? */
static bool peer_completes(const struct ibv_qp_init_attr_ex *a)
{
	return (a->qp_type == IBV_QPT_RC || a->qp_type == IBV_QPT_UC ||
		a->qp_type == IBV_QPT_UD) &&
	       a->recv_cq && srn_cq(a->recv_cq)->share;
}

/* What a QP holds on to: PD and send CQ (an XRC target: its domain). */
static void qp_hold(struct srn_qp *qp, int d)
{
	if (qp->pd)
		atomic_fetch_add(&qp->pd->users, (unsigned int)d);
	if (qp->send_cq)
		atomic_fetch_add(&qp->send_cq->users, (unsigned int)d);
	if (qp->xrcd)
		atomic_fetch_add(&qp->xrcd->users, (unsigned int)d);
}

static struct ibv_qp *qp_create(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *a)
{
	struct srn_context *ctx = srn_ctx(context);
	struct ibv_qp_init_attr_ex xa, *orig = a;
	struct srn_qp *qp;
	struct ibv_qp *q;
	uint32_t qpn;
	int err;

	err = check_init_attr(context, a);
	if (err) {
		errno = err;
		return NULL;
	}
	if (srn_qp_type_xrc(a->qp_type)) {
		/* no receive side of its own; a target has no PD or CQs (what
		 * the caller passed there is ignored, as by the kernel) */
		xa = *a;
		xa.recv_cq = NULL;
		xa.srq = NULL;
		if (a->qp_type == IBV_QPT_XRC_RECV) {
			xa.pd = NULL;
			xa.send_cq = NULL;
		}
		a = &xa;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	q = &qp->ex.qp_base;
	pthread_mutex_init(&qp->lock, NULL);
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);

	/* Granted caps: queue depths rounded up to a power of two (a ring
	 * indexed by free-running counters); SGEs and inline as asked. */
	qp->cap = a->cap;
	qp->sq.max_wr = round_pow2(a->cap.max_send_wr ? a->cap.max_send_wr : 1);
	qp->sq.max_sge = a->cap.max_send_sge;
	qp->cap.max_send_wr = qp->sq.max_wr;
	if (a->srq) {
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = 0;
		/* what a same-host peer needs to deliver a SEND itself: where
		 * the recv CQ and the SRQ's ring are (direct_send_publish) */
		if (peer_completes(a) && srn_srq(a->srq)->ring_share) {
			qp->srq_hdr = srn_rings_alloc(srn_ctx(context), srn_rq_ring_bytes(0),
						      &qp->srq_hdr_share);
			if (qp->srq_hdr)
				qp->srq_hdr->magic = SRN_RINGS_MAGIC;
		}
	} else if (a->qp_type == IBV_QPT_XRC_SEND || a->qp_type == IBV_QPT_XRC_RECV) {
		qp->cap.max_recv_wr = 0; /* XRC: receives come from XRC SRQs */
		qp->cap.max_recv_sge = 0;
	} else {
		qp->cap.max_recv_wr = round_pow2(a->cap.max_recv_wr ? a->cap.max_recv_wr : 1);
		/* the ring has twice the slots the application may fill (see
		 * srn_rq_ring_slots) */
		qp->rq.max_wr = srn_rq_ring_slots(qp->cap.max_recv_wr);
		qp->rq.max_sge = a->cap.max_recv_sge;
		/* a ring a same-host peer can take from (verbs/shared_rings.h)
		 * when its receive CQ is one the peer can complete into */
		qp->rqs = srn_rings_alloc_pd(peer_completes(a) ? srn_ctx(context) : NULL, a->pd,
					     SRN_RES_TYPE_QP_RQ, srn_rq_ring_bytes(qp->rq.max_wr),
					     &qp->rq_share, &qp->rq_buf);
		if (qp->rqs) {
			qp->rqs->magic = SRN_RINGS_MAGIC;
			qp->rqs->max_wr = qp->rq.max_wr;
			qp->rqs->max_sge = qp->rq.max_sge;
			qp->rq.wqe = qp->rqs->wqe;
		}
	}
	qp->sq.wqe = srn_pd_buf_alloc(a->pd, SRN_RES_TYPE_QP_SQ,
				      qp->sq.max_wr * sizeof(struct srn_send_wqe), 64, &qp->sq_buf);
	if (qp->sq.wqe == IBV_ALLOCATOR_USE_DEFAULT)
		qp->sq.wqe = calloc(qp->sq.max_wr, sizeof(struct srn_send_wqe));
	if (!qp->sq.wqe || (!a->srq && !qp->rq.wqe && !srn_qp_type_xrc(a->qp_type))) {
		qp_free(qp);
		errno = ENOMEM;
		return NULL;
	}
	orig->cap = qp->cap; /* reported back, as rdma-core does */

	qp->ctx = ctx;
	qp->pd = a->pd ? srn_pd(a->pd) : NULL; /* (none: an XRC target) */
	qp->send_cq = a->send_cq ? srn_cq(a->send_cq) : NULL;
	qp->xrcd = a->qp_type == IBV_QPT_XRC_RECV ? srn_xrcd(a->xrcd) : NULL;
	qp->recv_cq = a->recv_cq ? srn_cq(a->recv_cq) : NULL;
	qp->srq = a->srq ? srn_srq(a->srq) : NULL;
	qp->sq_sig_all = a->sq_sig_all != 0;
	qp->a.attr.qp_state = IBV_QPS_RESET;
	qp->a.attr.cur_qp_state = IBV_QPS_RESET;
	qp->a.attr.cap = qp->cap;
	qp->a.attr.port_num = 1;

	q->context = context;
	q->qp_context = a->qp_context;
	q->pd = a->pd;
	q->send_cq = a->send_cq;
	q->recv_cq = a->recv_cq;
	q->srq = a->srq;
	q->state = IBV_QPS_RESET;
	q->qp_type = a->qp_type;
	q->events_completed = 0;
	srn_qp_ex_init(qp);

	err = srn_qpn_alloc(ctx, &qpn);
	if (err) {
		qp_free(qp);
		errno = err < 0 ? -err : err;
		return NULL;
	}
	q->qp_num = qpn;
	q->handle = qpn;

	pthread_mutex_lock(&ctx->lock);
	err = qp_table_insert(ctx, qp);
	pthread_mutex_unlock(&ctx->lock);
	if (err)
		goto fail_qpn;

	pthread_mutex_lock(&qp->lock);
	err = srn_transport_qp_create(qp);
	srn_qp_unlock(qp);
	if (err) {
		err = err < 0 ? -err : err;
		pthread_mutex_lock(&ctx->lock);
		qp_table_remove(ctx, qp);
		pthread_mutex_unlock(&ctx->lock);
		goto fail_qpn;
	}

	qp_hold(qp, 1);
	if (qp->recv_cq) {
		atomic_fetch_add(&qp->recv_cq->users, 1);
		srn_cq_recv_qp(qp->recv_cq, qp, true);
	}
	if (qp->srq)
		srn_srq_attach(qp->srq, qp->recv_cq, true); /* ibv_destroy_srq: EBUSY */
	atomic_fetch_add(&ctx->num_objects, 1);
	return q;

fail_qpn:
	srn_qpn_free(ctx, qpn);
	qp_free(qp);
	errno = err;
	return NULL;
}

/* A QP (RC, UC or UD) in RESET; the granted caps are written back to
 * init_attr->cap.  NULL + errno on failure. */
SRN_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
					struct ibv_qp_init_attr *init_attr)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp *q;

	if (!pd || !init_attr) {
		errno = EINVAL;
		return NULL;
	}
	memset(&a, 0, sizeof(a));
	memcpy(&a, init_attr, sizeof(*init_attr)); /* same leading layout */
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd;
	q = qp_create(pd->context, &a);
	if (q)
		init_attr->cap = a.cap;
	return q;
}

/* vctx->create_qp_ex: ibv_create_qp_ex().  comp_mask PD (required) and
 * SEND_OPS_FLAGS; anything else -> EOPNOTSUPP. */
struct ibv_qp *srn_create_qp_ex(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *attr)
{
	const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
			       IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			       IBV_QP_INIT_ATTR_CREATE_FLAGS;

	if (!attr || !(attr->comp_mask & (attr->qp_type == IBV_QPT_XRC_RECV ? IBV_QP_INIT_ATTR_XRCD
									  : IBV_QP_INIT_ATTR_PD))) {
		errno = EINVAL;
		return NULL;
	}
	if ((attr->comp_mask & ~known) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	     attr->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (attr->send_ops_flags & ~send_ops_supported(attr->qp_type))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return qp_create(context, attr);
}

/* The extended view of qp (every softrnic QP has one). */
SRN_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	return qp ? &srn_qp(qp)->ex : NULL;
}

/* ---- query / destroy ------------------------------------------------- */

/* All attributes (whatever attr_mask asks, like rxe) and the creation
 * attributes.  0 or errno. */
SRN_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			    int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct srn_qp *qp;

	(void)attr_mask;
	if (!ibqp || !attr || !init_attr)
		return EINVAL;
	qp = srn_qp(ibqp);
	pthread_mutex_lock(&qp->lock);
	*attr = qp->a.attr;
	attr->qp_state = ibqp->state;
	attr->cur_qp_state = ibqp->state;
	attr->cap = qp->cap;
	/* sq_draining: SQD until the transport has nothing in flight. */
	attr->sq_draining = ibqp->state == IBV_QPS_SQD &&
			    qp->sq.head != qp->sq.next;
	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->qp_context = ibqp->qp_context;
	init_attr->send_cq = ibqp->send_cq;
	init_attr->recv_cq = ibqp->recv_cq;
	init_attr->srq = ibqp->srq;
	init_attr->cap = qp->cap;
	init_attr->qp_type = ibqp->qp_type;
	init_attr->sq_sig_all = qp->sq_sig_all;
	srn_qp_unlock(qp);
	return 0;
}

/* Frees qp (any state): it leaves the QP table first so no new packet
 * finds it, then the transport lets go of it.  Its completions still in
 * the CQs are dropped, as ConnectX providers do at destroy: their wr_ids
 * name the application's per-QP contexts, which it frees right after
 * (libfabric's RxM did, and then polled them).  Receive completions of a
 * QP on an SRQ stay: they are the SRQ's buffers, which still exist.
 * Like rdma-core's, it waits until each async event on the QP that the
 * application took was acked (the ack touches the QP); its events still
 * queued are dropped. */
SRN_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct srn_context *ctx;
	struct srn_qp *qp;

	if (!ibqp)
		return EINVAL;
	qp = srn_qp(ibqp);
	ctx = qp->ctx;
	if (srn_xrc_drop_open(qp))
		return 0; /* a handle of ibv_open_qp: the QP stays */
	pthread_mutex_lock(&ctx->lock);
	qp_table_remove(ctx, qp);
	pthread_mutex_unlock(&ctx->lock);
	srn_mcast_qp_detach_all(qp); /* out of the table: last-member test */

	pthread_mutex_lock(&qp->lock);
	srn_transport_qp_destroy(qp);
	srn_qp_unlock(qp);
	srn_qpn_free(ctx, ibqp->qp_num);
	if (qp->send_cq)
		srn_cq_clean_qp(qp->send_cq, ibqp->qp_num);
	if (qp->recv_cq && qp->recv_cq != qp->send_cq && !qp->srq)
		srn_cq_clean_qp(qp->recv_cq, ibqp->qp_num);

	qp_hold(qp, -1);
	if (qp->recv_cq) {
		srn_cq_recv_qp(qp->recv_cq, qp, false);
		atomic_fetch_sub(&qp->recv_cq->users, 1);
	}
	if (qp->srq)
		srn_srq_attach(qp->srq, qp->recv_cq, false);
	/* the transport has let go: no event can be posted on it now */
	srn_async_settle(ctx, ibqp, atomic_load(&qp->events_reported), &ibqp->mutex,
			 &ibqp->cond, &ibqp->events_completed);
	atomic_fetch_sub(&ctx->num_objects, 1);
	qp_free(qp);
	return 0;
}
