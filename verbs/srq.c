/* Shared receive queues: one ring of receive WQEs that several QPs (RC,
 * UC, UD) take from.  The verbs layer produces (ibv_post_srq_recv); the
 * transport consumes with srn_srq_take(), which also fires the srq_limit
 * event.  Only the basic SRQ type: XRC and tag matching need objects we
 * do not have. */
#include "verbs/datapath.h"
#include "verbs/export.h"

#include <stdlib.h>
#include <string.h>

static uint32_t round_pow2(uint32_t v)
{
	uint32_t r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

static struct srn_recv_wqe *srq_slot(struct srn_srq *srq, uint32_t i)
{
	return srn_wq_recv_slot(&srq->rq, i);
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
	srq->rq.max_wr = round_pow2(attr->max_wr ? attr->max_wr : 1);
	srq->rq.max_sge = attr->max_sge ? attr->max_sge : 1;
	srq->rq.wqe = calloc(srq->rq.max_wr, sizeof(struct srn_recv_wqe));
	if (!srq->rq.wqe) {
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
	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = 0;
	atomic_fetch_add(&srq->pd->users, 1);
	atomic_fetch_add(&ctx->num_objects, 1);
	return &srq->ibv;
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
	/* XRC (xrcd, cq), tag matching: not implemented. */
	if ((a->comp_mask & ~known) ||
	    ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	     a->srq_type != IBV_SRQT_BASIC)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd ||
	    a->pd->context != context) {
		errno = EINVAL;
		return NULL;
	}
	return srq_create(a->pd, a->srq_context, &a->attr);
}

/* ---- modify / query -------------------------------------------------- */

/* Resize the ring to at least want entries, keeping the posted WQEs in
 * order.  srq->lock held.  0 or errno. */
static int srq_resize(struct srn_srq *srq, uint32_t want)
{
	uint32_t cap = round_pow2(want ? want : 1);
	uint32_t count = srq->rq.tail - srq->rq.head, i;
	struct srn_recv_wqe *ring;

	if (cap == srq->rq.max_wr)
		return 0;
	ring = calloc(cap, sizeof(*ring));
	if (!ring)
		return ENOMEM;
	for (i = 0; i < count; i++)
		ring[i] = *srq_slot(srq, srq->rq.head + i);
	free(srq->rq.wqe);
	srq->rq.wqe = ring;
	srq->rq.max_wr = cap;
	srq->rq.head = 0;
	srq->rq.tail = count;
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
	max_wr = srq->rq.max_wr;
	limit = srq->limit;
	if (mask & IBV_SRQ_MAX_WR) {
		if (attr->max_wr == 0 || attr->max_wr > SRN_MAX_SRQ_WR ||
		    attr->max_wr < srq->rq.tail - srq->rq.head)
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
		if (mask & IBV_SRQ_MAX_WR)
			attr->max_wr = srq->rq.max_wr;
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
	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->limit;
	pthread_mutex_unlock(&srq->lock);
	return 0;
}

/* ---- post / take ----------------------------------------------------- */

/* ops.post_srq_recv.  EINVAL for a bad scatter list, ENOMEM when full;
 * *bad_wr = the first WR not posted (those before it are posted). */
static int srn_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr)
{
	struct srn_srq *srq = srn_srq(ibsrq);
	int err = 0;

	pthread_mutex_lock(&srq->lock);
	for (; wr; wr = wr->next) {
		err = srn_wq_post_recv(&srq->rq, srq->rq.max_sge, wr);
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

int srn_srq_take(struct srn_srq *srq, struct srn_recv_wqe *out)
{
	struct ibv_async_event ev;
	bool fire = false;

	pthread_mutex_lock(&srq->lock);
	if (srq->rq.head == srq->rq.tail) {
		pthread_mutex_unlock(&srq->lock);
		return -ENOENT;
	}
	*out = *srq_slot(srq, srq->rq.head);
	srq->rq.head++;
	/* The event fires when the WQE count drops below the armed limit,
	 * once; the limit then reads 0 (disarmed) until armed again. */
	if (srq->limit && srq->rq.tail - srq->rq.head < srq->limit) {
		srq->limit = 0;
		fire = true;
	}
	pthread_mutex_unlock(&srq->lock);
	if (fire) {
		memset(&ev, 0, sizeof(ev));
		ev.element.srq = &srq->ibv;
		ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
		atomic_fetch_add(&srq->events_reported, 1);
		srn_async_post(srq->ctx, &ev);
	}
	return 0;
}

uint32_t srn_srq_count(struct srn_srq *srq)
{
	uint32_t n;

	pthread_mutex_lock(&srq->lock);
	n = srq->rq.tail - srq->rq.head;
	pthread_mutex_unlock(&srq->lock);
	return n;
}

/* ---- destroy --------------------------------------------------------- */

/* Frees srq: 0, or EBUSY while a QP is attached to it.  Like rdma-core,
 * waits until every async event reported on it was acknowledged. */
SRN_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct srn_srq *srq;

	if (!ibsrq)
		return EINVAL;
	srq = srn_srq(ibsrq);
	if (atomic_load(&srq->users) != 0)
		return EBUSY;
	pthread_mutex_lock(&ibsrq->mutex);
	while (ibsrq->events_completed != atomic_load(&srq->events_reported))
		pthread_cond_wait(&ibsrq->cond, &ibsrq->mutex);
	pthread_mutex_unlock(&ibsrq->mutex);

	atomic_fetch_sub(&srq->pd->users, 1);
	atomic_fetch_sub(&srq->ctx->num_objects, 1);
	pthread_cond_destroy(&ibsrq->cond);
	pthread_mutex_destroy(&ibsrq->mutex);
	pthread_mutex_destroy(&srq->lock);
	free(srq->rq.wqe);
	free(srq);
	return 0;
}

void srn_ops_init_srq(struct verbs_context *vctx)
{
	vctx->context.ops.post_srq_recv = srn_post_srq_recv;
	vctx->create_srq_ex = srn_create_srq_ex;
	/* get_srq_num stays EOPNOTSUPP: only XRC SRQs have a number. */
}
