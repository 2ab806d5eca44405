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
 * signals its cond.  A destroy that wants rdma-core's "wait until every
 * event on me was acked" compares that count with the number it posted.
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

void srn_async_post(struct srn_context *ctx, const struct ibv_async_event *ev)
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

/* Count the ack on the object the event names (see the header comment). */
SRN_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	pthread_mutex_t *m = NULL;
	pthread_cond_t *c = NULL;
	uint32_t *cnt = NULL;

	if (!event)
		return;
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR:
		if (event->element.cq) {
			m = &event->element.cq->mutex;
			c = &event->element.cq->cond;
			cnt = &event->element.cq->async_events_completed;
		}
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		if (event->element.qp) {
			m = &event->element.qp->mutex;
			c = &event->element.qp->cond;
			cnt = &event->element.qp->events_completed;
		}
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		if (event->element.srq) {
			m = &event->element.srq->mutex;
			c = &event->element.srq->cond;
			cnt = &event->element.srq->events_completed;
		}
		break;
	case IBV_EVENT_WQ_FATAL:
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
