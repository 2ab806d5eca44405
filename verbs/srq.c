/* Shared receive queues: one ring of receive WQEs that several QPs (RC,
 * UC, UD) take from.  The verbs layer produces (ibv_post_srq_recv); the
 * transport consumes with srn_srq_take(), which also fires the srq_limit
 * event.  Basic and XRC SRQs (an XRC SRQ also has a domain, a CQ and a
 * host-wide number: verbs/xrcd.c); no tag matching. */
#include "verbs/datapath.h"
#include "verbs/export.h"
#include "verbs/pd_buf.h"
#include "verbs/shared_rings.h"

#include <stdlib.h>
#include <string.h>

static uint32_t round_pow2(uint32_t v)
{
	uint32_t r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

/* A ring replaced by ibv_modify_srq: kept, closed, until destroy. */
struct srn_srq_old {
	struct srn_rq_ring *ring;
	struct srn_mr_share *share;
	uint32_t slots;
	struct srn_srq_old *next;
};

/* A ring of slots entries, shared with same-host peers when ctx publishes
 * its MRs (srn_rings_alloc); else from pd's allocator if pd is a parent
 * domain with one (*rec).  NULL + errno. */
static struct srn_rq_ring *srq_ring_new(struct srn_context *ctx, struct ibv_pd *pd,
					uint32_t slots, uint32_t max_sge,
					struct srn_mr_share **share, struct srn_pd_buf *rec)
{
	struct srn_rq_ring *r = srn_rings_alloc_pd(ctx, pd, SRN_RES_TYPE_SRQ,
						   srn_rq_ring_bytes(slots), share, rec);

	if (!r)
		return NULL;
	r->magic = SRN_RINGS_MAGIC;
	r->max_wr = slots;
	r->tag = srn_ring_tag();
	r->max_sge = max_sge;
	atomic_store(&r->open, 1);
	return r;
}

/* ---- create ---------------------------------------------------------- */

static struct ibv_srq *srq_create(struct ibv_pd *pd, void *srq_context,
				  struct ibv_srq_attr *attr)
{
	struct srn_context *ctx = srn_ctx(pd->context);
	struct srn_srq *srq;

	/* max_wr 0 is a valid request (rxe grants its minimum); srq_limit is
	 * ignored at creation (man ibv_create_srq). */
	if (attr->max_wr > SRN_MAX_SRQ_WR || attr->max_sge > SRN_MAX_SGE) {
		errno = EINVAL;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}
	srq->max_wr = round_pow2(attr->max_wr ? attr->max_wr : 1);
	srq->max_sge = attr->max_sge ? attr->max_sge : 1;
	srq->slots = srn_rq_ring_slots(srq->max_wr);
	srq->ring = srq_ring_new(ctx, pd, srq->slots, srq->max_sge, &srq->ring_share,
				 &srq->ring_buf);
	if (!srq->ring) {
		free(srq);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&srq->lock, NULL);
	pthread_mutex_init(&srq->ibv.mutex, NULL);
	pthread_cond_init(&srq->ibv.cond, NULL);
	srq->ibv.context = pd->context;
	srq->ibv.srq_context = srq_context;
	srq->ibv.pd = pd;
	srq->ibv.handle = 0; /* no kernel object behind it */
	srq->ibv.events_completed = 0;
	srq->ctx = ctx;
	srq->pd = srn_pd(pd);
	atomic_init(&srq->users, 0);
	atomic_init(&srq->events_reported, 0);

	/* Granted values go back to the caller, as rdma-core does. */
	attr->max_wr = srq->max_wr;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = 0;
	atomic_fetch_add(&srq->pd->users, 1);
	atomic_fetch_add(&ctx->num_objects, 1);
	pthread_mutex_lock(&ctx->notify_lock);
	srq->next = ctx->srqs;
	ctx->srqs = srq;
	pthread_mutex_unlock(&ctx->notify_lock);
	return &srq->ibv;
}

/* An XRC SRQ: a basic one that also has a domain, the CQ its receives
 * complete into and a number, drawn from the host's QPN space so that it
 * is unique across processes (a request names it: transport/xrc.c). */
static struct ibv_srq *xrc_srq_create(struct ibv_srq_init_attr_ex *a)
{
	struct srn_context *ctx = srn_ctx(a->pd->context);
	struct ibv_srq *ib;
	struct srn_srq *srq;
	uint32_t num;
	int err;

	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) ||
	    !a->xrcd || !a->cq || a->cq->context != a->pd->context ||
	    a->xrcd->context != a->pd->context) {
		errno = EINVAL;
		return NULL;
	}
	err = srn_qpn_alloc(ctx, &num);
	if (err) {
		errno = err < 0 ? -err : err;
		return NULL;
	}
	ib = srq_create(a->pd, a->srq_context, &a->attr);
	if (!ib) {
		srn_qpn_free(ctx, num);
		return NULL;
	}
	srq = srn_srq(ib);
	pthread_mutex_lock(&ctx->notify_lock); /* (the target's lookup reads them) */
	srq->xrcd = srn_xrcd(a->xrcd);
	srq->xrc_cq = srn_cq(a->cq);
	srq->srq_num = num;
	pthread_mutex_unlock(&ctx->notify_lock);
	atomic_fetch_add(&srq->xrcd->users, 1);
	atomic_fetch_add(&srq->xrc_cq->users, 1);
	return ib;
}

/* A basic SRQ; the granted max_wr/max_sge are written back.  NULL +
 * errno (EINVAL beyond the device limits). */
SRN_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
					  struct ibv_srq_init_attr *init_attr)
{
	if (!pd || !init_attr) {
		errno = EINVAL;
		return NULL;
	}
	return srq_create(pd, init_attr->srq_context, &init_attr->attr);
}

/* vctx->create_srq_ex: ibv_create_srq_ex() sends here whatever is not a
 * plain basic SRQ (the header's inline routes that to ibv_create_srq). */
static struct ibv_srq *srn_create_srq_ex(struct ibv_context *context,
					 struct ibv_srq_init_attr_ex *a)
{
	const uint32_t known = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;

	if (!a) {
		errno = EINVAL;
		return NULL;
	}
	const uint32_t xrc = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	bool is_xrc = a && (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
		      a->srq_type == IBV_SRQT_XRC;

	if (!a) {
		errno = EINVAL;
		return NULL;
	}
	/* tag matching: not implemented */
	if ((a->comp_mask & ~(known | (is_xrc ? xrc : 0))) ||
	    ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	     a->srq_type != IBV_SRQT_BASIC && !is_xrc)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd ||
	    a->pd->context != context) {
		errno = EINVAL;
		return NULL;
	}
	if (is_xrc)
		return xrc_srq_create(a);
	return srq_create(a->pd, a->srq_context, &a->attr);
}

/* ---- modify / query -------------------------------------------------- */

static uint32_t srq_posted(struct srn_srq *srq)
{
	return atomic_load_explicit(&srq->ring->tail, memory_order_acquire) -
	       atomic_load_explicit(&srq->ring->head, memory_order_acquire);
}

/* Move the posted WQEs, in order, to a new ring of at least want slots.
 * srq->lock held.  The old ring is closed first and each WQE taken from
 * it as any taker does (a same-host peer that looked before the close
 * may still take one: it is then delivered, not copied); peers go back
 * to packets until the QP's info is published again.  0 or errno. */
static int srq_resize(struct srn_srq *srq, uint32_t want)
{
	uint32_t cap = round_pow2(want ? want : 1), slots = srn_rq_ring_slots(cap);
	struct srn_srq_old *old;
	struct srn_rq_ring *ring;
	struct srn_mr_share *share;
	struct srn_recv_wqe w;
	struct srn_pd_buf own; /* (a resize's ring is softrnic's own) */

	if (cap == srq->max_wr)
		return 0;
	old = calloc(1, sizeof(*old));
	ring = old ? srq_ring_new(srq->ctx, NULL, slots, srq->max_sge, &share, &own) : NULL;
	if (!ring) {
		free(old);
		return ENOMEM;
	}
	atomic_store(&ring->limit_armed, atomic_load(&srq->ring->limit_armed));
	atomic_store(&srq->ring->open, 0);
	/* (at most cap: posts wait for our lock, and cap >= what was posted) */
	for (uint32_t t = 0; t < cap && srn_rq_ring_take(srq->ring, srq->slots, &w) == 0; t++) {
		w.seq = t + 1;
		ring->wqe[t] = w;
		atomic_store_explicit(&ring->tail, t + 1, memory_order_release);
	}
	old->ring = srq->ring;
	old->share = srq->ring_share;
	old->slots = srq->slots;
	old->next = srq->retired;
	srq->retired = old;
	__atomic_store_n(&srq->ring, ring, __ATOMIC_RELEASE);
	srq->ring_share = share;
	srq->max_wr = cap;
	srq->slots = slots;
	srq->head_seen = 0;
	return 0;
}

/* IBV_SRQ_MAX_WR resizes (never below the WQEs posted or an armed
 * limit), IBV_SRQ_LIMIT arms the limit event (0 disarms; above max_wr is
 * EINVAL).  Nothing changes unless every attribute is valid.  The
 * granted max_wr is written back.  0 or errno. */
SRN_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
			      int mask)
{
	struct srn_srq *srq;
	uint32_t max_wr, limit;
	int err = 0;

	if (!ibsrq || !attr)
		return EINVAL;
	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	srq = srn_srq(ibsrq);
	pthread_mutex_lock(&srq->lock);
	max_wr = srq->max_wr;
	limit = srq->limit;
	if (mask & IBV_SRQ_MAX_WR) {
		if (attr->max_wr == 0 || attr->max_wr > SRN_MAX_SRQ_WR ||
		    attr->max_wr < srq_posted(srq))
			err = EINVAL;
		max_wr = round_pow2(attr->max_wr);
	}
	if (mask & IBV_SRQ_LIMIT)
		limit = attr->srq_limit;
	/* The limit counts WQEs in the queue, so it cannot exceed it. */
	if (!err && limit > max_wr)
		err = EINVAL;
	if (!err && (mask & IBV_SRQ_MAX_WR))
		err = srq_resize(srq, max_wr);
	if (!err) {
		srq->limit = limit;
		/* seen by a peer after its take: it then rings our doorbell */
		atomic_store(&srq->ring->limit_armed, limit != 0);
		if (mask & IBV_SRQ_MAX_WR)
			attr->max_wr = srq->max_wr;
	}
	pthread_mutex_unlock(&srq->lock);
	return err;
}

/* Current max_wr, max_sge and srq_limit (0 once the event fired). */
SRN_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct srn_srq *srq;

	if (!ibsrq || !attr)
		return EINVAL;
	srq = srn_srq(ibsrq);
	pthread_mutex_lock(&srq->lock);
	attr->max_wr = srq->max_wr;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = srq->limit;
	pthread_mutex_unlock(&srq->lock);
	return 0;
}

/* ---- post / take ----------------------------------------------------- */

void srn_srq_attach(struct srn_srq *srq, struct srn_cq *recv_cq, bool attach)
{
	pthread_mutex_lock(&srq->lock);
	if (attach) {
		if (atomic_fetch_add(&srq->users, 1) == 0) {
			srq->hint_cq = recv_cq;
			srq->hint_cq_qps = 0;
		}
		if (recv_cq == srq->hint_cq)
			srq->hint_cq_qps++;
		else
			srq->hint_cq = NULL; /* several CQs: no hint */
	} else {
		if (srq->hint_cq && recv_cq == srq->hint_cq && !--srq->hint_cq_qps)
			srq->hint_cq = NULL;
		atomic_fetch_sub(&srq->users, 1);
	}
	pthread_mutex_unlock(&srq->lock);
}

/* ops.post_srq_recv.  EINVAL for a bad scatter list, ENOMEM when full;
 * *bad_wr = the first WR not posted (those before it are posted). */
static int srn_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr)
{
	struct srn_srq *srq = srn_srq(ibsrq);
	int err = 0;

	pthread_mutex_lock(&srq->lock);
	for (; wr; wr = wr->next) {
		err = srn_rq_ring_post(srq->ring, srq->slots, srq->max_wr, srq->max_sge,
				       srq->hint_cq, &srq->head_seen, wr);
		if (err)
			break;
	}
	if (err && bad_wr)
		*bad_wr = wr;
	pthread_mutex_unlock(&srq->lock);
	/* A responder waiting in RNR for this SRQ resumes when the
	 * transport next polls it; there is no per-SRQ kick hook yet. */
	return err;
}

/* Raise the limit event if the WQEs fell below the armed limit: once,
 * then the limit reads 0 (disarmed) until armed again. */
static void srq_check_limit(struct srn_srq *srq)
{
	struct ibv_async_event ev;
	bool fire = false;

	pthread_mutex_lock(&srq->lock);
	if (srq->limit && srq_posted(srq) < srq->limit) {
		srq->limit = 0;
		atomic_store(&srq->ring->limit_armed, 0);
		fire = true;
	}
	pthread_mutex_unlock(&srq->lock);
	if (fire) {
		memset(&ev, 0, sizeof(ev));
		ev.element.srq = &srq->ibv;
		ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
		srn_async_post_counted(srq->ctx, &ev, &srq->events_reported);
	}
}

int srn_srq_take(struct srn_srq *srq, struct srn_recv_wqe *out)
{
	bool armed;
	int err;

	/* (the lock keeps ring and slots together across a resize; a
	 * same-host peer takes from the ring without it, by the same
	 * compare-and-swap) */
	pthread_mutex_lock(&srq->lock);
	err = srn_rq_ring_take(srq->ring, srq->slots, out);
	armed = srq->limit != 0;
	pthread_mutex_unlock(&srq->lock);
	if (err)
		return -ENOENT;
	if (armed)
		srq_check_limit(srq);
	return 0;
}

uint32_t srn_srq_count(struct srn_srq *srq)
{
	uint32_t n;

	pthread_mutex_lock(&srq->lock);
	n = srq_posted(srq);
	pthread_mutex_unlock(&srq->lock);
	return n;
}

void srn_srq_notify_peers(struct srn_context *ctx)
{
	pthread_mutex_lock(&ctx->notify_lock);
	for (struct srn_srq *srq = ctx->srqs; srq; srq = srq->next) {
		/* (without srq->lock: a ring a resize replaces stays mapped
		 * until destroy, which unlinks the SRQ first) */
		struct srn_rq_ring *r = __atomic_load_n(&srq->ring, __ATOMIC_ACQUIRE);

		if (atomic_load(&r->limit_armed))
			srq_check_limit(srq);
	}
	pthread_mutex_unlock(&ctx->notify_lock);
}

/* ---- destroy --------------------------------------------------------- */

/* Frees srq: 0, or EBUSY while a QP is attached to it.  Like rdma-core,
 * waits until every async event on it that the application took was
 * acknowledged; its events still queued are dropped. */
SRN_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct srn_srq *srq;

	if (!ibsrq)
		return EINVAL;
	srq = srn_srq(ibsrq);
	if (atomic_load(&srq->users) != 0)
		return EBUSY;
	srn_async_settle(srq->ctx, ibsrq, atomic_load(&srq->events_reported), &ibsrq->mutex,
			 &ibsrq->cond, &ibsrq->events_completed);

	pthread_mutex_lock(&srq->ctx->notify_lock);
	for (struct srn_srq **pp = &srq->ctx->srqs; *pp; pp = &(*pp)->next)
		if (*pp == srq) {
			*pp = srq->next;
			break;
		}
	pthread_mutex_unlock(&srq->ctx->notify_lock);
	if (srq->xrcd) {
		srn_xrc_srq_quiesce(srq);
		srn_qpn_free(srq->ctx, srq->srq_num);
		atomic_fetch_sub(&srq->xrcd->users, 1);
		atomic_fetch_sub(&srq->xrc_cq->users, 1);
	}
	atomic_fetch_sub(&srq->pd->users, 1);
	atomic_fetch_sub(&srq->ctx->num_objects, 1);
	pthread_cond_destroy(&ibsrq->cond);
	pthread_mutex_destroy(&ibsrq->mutex);
	pthread_mutex_destroy(&srq->lock);
	atomic_store(&srq->ring->open, 0);
	srn_rings_free_pd(&srq->ring_buf, srq->ring, srn_rq_ring_bytes(srq->slots),
			  srq->ring_share);
	while (srq->retired) {
		struct srn_srq_old *o = srq->retired;

		srq->retired = o->next;
		srn_rings_free_pd(&srq->ring_buf, o->ring, srn_rq_ring_bytes(o->slots), o->share);
		free(o);
	}
	free(srq);
	return 0;
}

void srn_ops_init_srq(struct verbs_context *vctx)
{
	vctx->context.ops.post_srq_recv = srn_post_srq_recv;
	vctx->create_srq_ex = srn_create_srq_ex;
	srn_ops_init_xrc(vctx); /* open_xrcd, get_srq_num, open_qp: verbs/xrcd.c */
}
