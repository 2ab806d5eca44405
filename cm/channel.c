/* Event channels: a queue of cm_events per channel.  Applications poll
 * channel->fd, so it is a real descriptor: an eventfd that holds a token
 * exactly while the queue is non-empty (level-triggered, like rdma-core's
 * /dev/infiniband/rdma_cm).  A descriptor the application made O_NONBLOCK
 * makes rdma_get_cm_event fail with EAGAIN on an empty queue. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cm/cm.h"
#include "verbs/export.h"

/* Called with ch->lock held. */
static void chan_signal(struct cm_channel *ch, bool on)
{
	uint64_t v = 1;

	if (on == ch->signalled)
		return;
	if (on) {
		if (write(ch->ch.fd, &v, sizeof(v)) == sizeof(v))
			ch->signalled = true;
	} else {
		/* The fd may be non-blocking or not: read only when a token is
		 * known to be there, so this never blocks. */
		if (read(ch->ch.fd, &v, sizeof(v)) == sizeof(v))
			ch->signalled = false;
	}
}

SRN_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cm_channel *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return NULL;
	ch->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (ch->ch.fd < 0) {
		int err = errno;

		free(ch);
		errno = err;
		return NULL;
	}
	pthread_mutex_init(&ch->lock, NULL);
	pthread_cond_init(&ch->cond, NULL);
	return &ch->ch;
}

/* The application must have destroyed every id on it first (documented);
 * queued events are freed. */
SRN_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct cm_channel *ch;
	struct cm_event *e;

	if (!channel)
		return;
	ch = cm_chan(channel);
	pthread_mutex_lock(&ch->lock);
	while ((e = ch->head)) {
		ch->head = e->next;
		free(e);
	}
	ch->tail = NULL;
	close(ch->ch.fd);
	if (ch->waiters) {
		/* Another thread still sleeps in rdma_get_cm_event (rping's cm
		 * thread does at exit).  With rdma-core it would sleep in read()
		 * forever; here it sleeps on the condition, so the struct must
		 * outlive it: leak it rather than free memory it waits on. */
		pthread_mutex_unlock(&ch->lock);
		return;
	}
	pthread_mutex_unlock(&ch->lock);
	pthread_mutex_destroy(&ch->lock);
	pthread_cond_destroy(&ch->cond);
	free(ch);
}

struct cm_event *cm_event_new(struct cm_id *id, enum rdma_cm_event_type t, int st)
{
	struct cm_event *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->ev.id = &id->id;
	e->ev.event = t;
	e->ev.status = st;
	e->owner = id;
	return e;
}

struct cm_event *cm_event_connect_request(struct cm_id *c, struct cm_id *l,
					  const uint8_t *pdata, size_t len)
{
	struct cm_event *e;

	c->state = CM_REQ_RCVD;
	l->pending++;
	e = cm_event_new(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e)
		return NULL;
	e->owner = l;
	e->ev.listen_id = &l->id;
	memcpy(e->pdata, pdata, len);
	return e;
}

void cm_event_queue(struct cm_channel *ch, struct cm_event *ev)
{
	cm_post_held(ch); /* (events keep the order of their causes) */
	ev->owner->unacked++;
	pthread_mutex_lock(&ch->lock);
	ev->next = NULL;
	if (ch->tail)
		ch->tail->next = ev;
	else
		ch->head = ev;
	ch->tail = ev;
	chan_signal(ch, true);
	pthread_cond_broadcast(&ch->cond);
	pthread_mutex_unlock(&ch->lock);
}

void cm_channel_purge(struct cm_channel *ch, struct cm_id *id)
{
	struct cm_event **pp, *e, *prev = NULL;

	pthread_mutex_lock(&ch->lock);
	pp = &ch->head;
	while ((e = *pp)) {
		if (e->owner == id || e->ev.id == &id->id) {
			*pp = e->next;
			if (e->owner)
				e->owner->unacked--;
			free(e);
			continue;
		}
		prev = e;
		pp = &e->next;
	}
	ch->tail = prev;
	if (!ch->head)
		chan_signal(ch, false);
	pthread_mutex_unlock(&ch->lock);
}

/* A thread cancelled in pthread_cond_wait leaves it holding the mutex:
 * rping cancels its CM thread asleep in rdma_get_cm_event, and the next
 * rdma_destroy_id then waited forever for ch->lock.  (rdma-core sleeps in
 * read(), which holds no lock.) */
static void chan_sleep_cancelled(void *arg)
{
	struct cm_channel *ch = arg;

	ch->waiters--;
	pthread_mutex_unlock(&ch->lock);
}

/* Sleep until signalled (ch->lock held; a cancellation point). */
static void chan_sleep(struct cm_channel *ch)
{
	ch->waiters++;
	pthread_cleanup_push(chan_sleep_cancelled, ch);
	pthread_cond_wait(&ch->cond, &ch->lock);
	pthread_cleanup_pop(0);
	ch->waiters--;
}

/* Pop the head, blocking unless the fd is non-blocking. */
static int chan_pop(struct cm_channel *ch, struct cm_event **out)
{
	int fl = fcntl(ch->ch.fd, F_GETFL);

	pthread_mutex_lock(&ch->lock);
	while (!ch->head) {
		if (fl >= 0 && (fl & O_NONBLOCK)) {
			pthread_mutex_unlock(&ch->lock);
			errno = EAGAIN;
			return -1;
		}
		chan_sleep(ch);
	}
	*out = ch->head;
	ch->head = (*out)->next;
	if (!ch->head) {
		ch->tail = NULL;
		chan_signal(ch, false);
	}
	pthread_mutex_unlock(&ch->lock);
	return 0;
}

int cm_channel_wait(struct cm_channel *ch, struct rdma_cm_event **ev)
{
	struct cm_event *e;

	pthread_mutex_lock(&ch->lock);
	while (!ch->head) {
		chan_sleep(ch);
	}
	e = ch->head;
	ch->head = e->next;
	if (!ch->head) {
		ch->tail = NULL;
		chan_signal(ch, false);
	}
	pthread_mutex_unlock(&ch->lock);
	*ev = &e->ev;
	return 0;
}

SRN_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel,
				 struct rdma_cm_event **event)
{
	struct cm_event *e;

	if (!channel || !event) {
		errno = EINVAL;
		return -1;
	}
	if (chan_pop(cm_chan(channel), &e))
		return -1;
	*event = &e->ev;
	return 0;
}

SRN_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct cm_event *e = (struct cm_event *)event;

	if (!event) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (e->owner) {
		e->owner->unacked--;
		/* rdma_destroy_id may be waiting for this ack. */
		pthread_cond_broadcast(&cm_ack_cond);
	}
	pthread_mutex_unlock(&cm_lock);
	free(e);
	return 0;
}
