/* Async events: a mutex-protected FIFO of struct ibv_async_event and a
 * pipe (verbs/wait_pipe.h) that holds a byte exactly while the FIFO is
 * non-empty, so the context's async_fd works with poll/epoll like
 * rdma-core's, and ibv_get_async_event waits in read() on it as
 * rdma-core's does (a handler without SA_RESTART ends the wait: EINTR).
 *
 * Invariant (kept under a->lock): a byte in the pipe == queue non-empty.
 * Post writes it when the queue goes from empty to non-empty; taking the
 * last event drains it; a wait that took it while events remain puts it
 * back.  Blocking vs non-blocking is the application's choice: it sets
 * O_NONBLOCK on async_fd with fcntl().
 *
 * Acks: ibv_ack_async_event counts the ack on the object the event names
 * (events_completed in the public ibv_qp/ibv_srq/ibv_wq, and
 * async_events_completed in ibv_cq) under that object's public mutex and
 * signals its cond.  A destroy waits, as rdma-core's does, until every
 * event on the object that the application took was acked (the ack
 * touches the object), and drops the ones still queued:
 * srn_async_settle.
 */
#include "verbs/async.h"
#include "verbs/export.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "verbs/wait_pipe.h"

/* Bounded so a stuck application cannot make a peer grow our memory;
 * beyond it the oldest events are kept and new ones dropped (a NIC's
 * event queue overflows the same way). */
#define SRN_ASYNC_MAX 4096

struct srn_async_node {
	struct srn_async_node *next;
	struct ibv_async_event ev;
};

struct srn_async {
	pthread_mutex_t lock;            /* guards the list and the pipe's byte */
	struct srn_async_node *head, *tail;
	unsigned int count;              /* queued events */
	unsigned long dropped;           /* events lost to SRN_ASYNC_MAX */
	struct srn_wait_pipe pipe;       /* readable while count > 0 */
};

struct srn_async *srn_async_create(void)
{
	struct srn_async *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	/* Blocking by default like rdma-core's async_fd: O_NONBLOCK is the
	 * application's choice. */
	if (srn_wait_pipe_open(&a->pipe)) {
		int err = errno;

		free(a);
		errno = err;
		return NULL;
	}
	pthread_mutex_init(&a->lock, NULL);
	return a;
}

int srn_async_fd(const struct srn_async *a)
{
	return a->pipe.rfd;
}

void srn_async_destroy(struct srn_async *a)
{
	struct srn_async_node *n, *next;

	if (!a)
		return;
	for (n = a->head; n; n = next) {
		next = n->next;
		free(n);
	}
	srn_wait_pipe_close(&a->pipe);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

void srn_async_post(struct srn_context *ctx, const struct ibv_async_event *ev,
		    atomic_uint *reported)
{
	struct srn_async *a = ctx->async;
	struct srn_async_node *n;

	if (!a)
		return;
	n = malloc(sizeof(*n));
	pthread_mutex_lock(&a->lock);
	if (!n || a->count >= SRN_ASYNC_MAX) {
		a->dropped++;
		pthread_mutex_unlock(&a->lock);
		free(n);
		return;
	}
	n->next = NULL;
	n->ev = *ev;
	if (a->tail)
		a->tail->next = n;
	else
		a->head = n;
	a->tail = n;
	atomic_fetch_add(reported, 1);
	if (a->count++ == 0)
		srn_wait_pipe_set(&a->pipe);
	pthread_mutex_unlock(&a->lock);
}

/* Take the oldest event; false if none.  took: the caller's wait took
 * the pipe's byte, which goes back if events remain. */
static bool async_take(struct srn_async *a, struct ibv_async_event *out, bool took)
{
	struct srn_async_node *n;

	pthread_mutex_lock(&a->lock);
	n = a->head;
	if (n) {
		a->head = n->next;
		if (!a->head)
			a->tail = NULL;
		if (--a->count == 0)
			srn_wait_pipe_drain(&a->pipe);
		else if (took)
			srn_wait_pipe_set(&a->pipe);
	}
	pthread_mutex_unlock(&a->lock);
	if (!n)
		return false;
	*out = n->ev;
	free(n);
	return true;
}

/* Next async event.  Blocks until one arrives unless the application made
 * async_fd non-blocking (then -1 with errno EAGAIN); a signal handler
 * without SA_RESTART ends the wait (-1, EINTR).  0 on success. */
SRN_EXPORT int ibv_get_async_event(struct ibv_context *context,
				   struct ibv_async_event *event)
{
	struct srn_async *a;
	bool took = false;

	if (!context || !event) {
		errno = EINVAL;
		return -1;
	}
	a = srn_ctx(context)->async;
	for (;;) {
		int r;

		if (async_take(a, event, took))
			return 0;
		/* Another thread may take the event we were woken for: loop. */
		r = srn_wait_pipe_wait(&a->pipe);
		if (r < 0)
			return -1;
		took = took || r == 1;
	}
}

enum event_kind { EV_NONE, EV_CQ, EV_QP, EV_SRQ, EV_WQ };

/* Which object an event names: none for port and device events. */
static enum event_kind event_kind(const struct ibv_async_event *ev)
{
	switch (ev->event_type) {
	case IBV_EVENT_CQ_ERR:
		return EV_CQ;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return EV_QP;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return EV_SRQ;
	case IBV_EVENT_WQ_FATAL:
		return EV_WQ;
	default:
		return EV_NONE;
	}
}

static const void *event_object(const struct ibv_async_event *ev)
{
	switch (event_kind(ev)) {
	case EV_CQ: return ev->element.cq;
	case EV_QP: return ev->element.qp;
	case EV_SRQ: return ev->element.srq;
	case EV_WQ: return ev->element.wq;
	default: return NULL;
	}
}

/* Unlink the queued events that name obj; how many. */
static unsigned int async_drop(struct srn_async *a, const void *obj)
{
	struct srn_async_node **pp, *n, *prev = NULL;
	unsigned int dropped = 0;

	pthread_mutex_lock(&a->lock);
	for (pp = &a->head; (n = *pp);) {
		if (event_object(&n->ev) != obj) {
			prev = n;
			pp = &n->next;
			continue;
		}
		*pp = n->next;
		if (a->tail == n)
			a->tail = prev;
		free(n);
		dropped++;
		if (--a->count == 0)
			srn_wait_pipe_drain(&a->pipe);
	}
	pthread_mutex_unlock(&a->lock);
	return dropped;
}

void srn_async_settle(struct srn_context *ctx, const void *obj, unsigned int reported,
		      pthread_mutex_t *m, pthread_cond_t *c, const uint32_t *completed)
{
	unsigned int dropped = ctx->async ? async_drop(ctx->async, obj) : 0;

	pthread_mutex_lock(m);
	while (*completed != reported - dropped)
		pthread_cond_wait(c, m);
	pthread_mutex_unlock(m);
}

/* Count the ack on the object the event names (see the header comment). */
SRN_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	pthread_mutex_t *m = NULL;
	pthread_cond_t *c = NULL;
	uint32_t *cnt = NULL;

	if (!event)
		return;
	switch (event_kind(event)) {
	case EV_CQ:
		if (event->element.cq) {
			m = &event->element.cq->mutex;
			c = &event->element.cq->cond;
			cnt = &event->element.cq->async_events_completed;
		}
		break;
	case EV_QP:
		if (event->element.qp) {
			m = &event->element.qp->mutex;
			c = &event->element.qp->cond;
			cnt = &event->element.qp->events_completed;
		}
		break;
	case EV_SRQ:
		if (event->element.srq) {
			m = &event->element.srq->mutex;
			c = &event->element.srq->cond;
			cnt = &event->element.srq->events_completed;
		}
		break;
	case EV_WQ:
		if (event->element.wq) {
			m = &event->element.wq->mutex;
			c = &event->element.wq->cond;
			cnt = &event->element.wq->events_completed;
		}
		break;
	default: /* port and device events: nothing to count */
		break;
	}
	if (!cnt)
		return;
	pthread_mutex_lock(m);
	++*cnt;
	pthread_cond_signal(c);
	pthread_mutex_unlock(m);
}
