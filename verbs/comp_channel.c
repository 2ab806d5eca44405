/* Completion channels: how an armed CQ tells a sleeping application that a
 * completion arrived.  Events wait in a FIFO of CQ pointers; the channel's
 * fd is the read end of a pipe that holds a byte while the FIFO is
 * non-empty, so poll/epoll on it and O_NONBLOCK behave as on rdma-core's
 * kernel fd.
 *
 * A pipe and not an eventfd: a same-host peer that completes into an
 * armed CQ wakes us itself, with a byte written through its own opening
 * of the pipe (/proc/PID/fd/N, transport/direct_send.c), one wake-up
 * where the doorbell to our engine took two.  It marks the CQ's ring
 * (peer_fired) first; ibv_get_cq_event turns such marks into events
 * (srn_cq_collect_fired) and drains bytes no event stands for.  The pipe
 * and the wait in it: verbs/wait_pipe.h. */
#include "verbs/datapath.h"
#include "verbs/export.h"

#include <stdlib.h>
#include <sys/stat.h>

/* A new channel on context.  NULL + errno on failure. */
SRN_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct srn_comp_channel *ch;

	if (!context) {
		errno = EINVAL;
		return NULL;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	if (srn_wait_pipe_open(&ch->pipe)) {
		int err = errno;

		free(ch);
		errno = err;
		return NULL;
	}
	{
		struct stat st;

		/* (peers check it; 0 makes them ring our engine instead) */
		ch->ino = fstat(ch->pipe.rfd, &st) ? 0 : (uint64_t)st.st_ino;
	}
	ch->ibv.fd = ch->pipe.rfd;
	ch->ibv.context = context;
	ch->ibv.refcnt = 0;
	pthread_mutex_init(&ch->lock, NULL);
	return &ch->ibv;
}

/* Frees channel: 0, or EBUSY while a CQ still reports to it. */
SRN_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct srn_comp_channel *ch;

	if (!channel)
		return EINVAL;
	ch = srn_chan(channel);
	pthread_mutex_lock(&ch->lock);
	if (channel->refcnt) {
		pthread_mutex_unlock(&ch->lock);
		return EBUSY;
	}
	pthread_mutex_unlock(&ch->lock);
	srn_wait_pipe_close(&ch->pipe);
	pthread_mutex_destroy(&ch->lock);
	free(ch->q);
	free(ch);
	return 0;
}

void srn_chan_notify(struct srn_comp_channel *ch, struct srn_cq *cq)
{
	pthread_mutex_lock(&ch->lock);
	if (ch->qcount == ch->qcap) {
		/* Grow the ring; unrolled copy keeps FIFO order. */
		uint32_t cap = ch->qcap ? ch->qcap * 2 : 16, i;
		struct srn_cq **q = malloc(cap * sizeof(*q));

		if (!q) {
			/* Out of memory: the event is lost, as a kernel
			 * event queue overflow would lose it. */
			pthread_mutex_unlock(&ch->lock);
			return;
		}
		for (i = 0; i < ch->qcount; i++)
			q[i] = ch->q[(ch->qhead + i) % ch->qcap];
		free(ch->q);
		ch->q = q;
		ch->qcap = cap;
		ch->qhead = 0;
	}
	ch->q[(ch->qhead + ch->qcount) % ch->qcap] = cq;
	if (ch->qcount++ == 0)
		srn_wait_pipe_set(&ch->pipe);
	pthread_mutex_unlock(&ch->lock);
}

void srn_chan_forget(struct srn_comp_channel *ch, struct srn_cq *cq)
{
	uint32_t i, n = 0;

	pthread_mutex_lock(&ch->lock);
	for (i = 0; i < ch->qcount; i++) {
		struct srn_cq *c = ch->q[(ch->qhead + i) % ch->qcap];

		if (c != cq)
			ch->q[(ch->qhead + n++) % ch->qcap] = c;
	}
	if (ch->qcount && n == 0)
		srn_wait_pipe_drain(&ch->pipe);
	ch->qcount = n;
	pthread_mutex_unlock(&ch->lock);
}

/* Next completion event: the CQ and its cq_context.  Blocks until one
 * arrives unless the application made channel->fd O_NONBLOCK (then -1 and
 * errno EAGAIN).  0 on success, -1 + errno on failure. */
SRN_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel,
				struct ibv_cq **cq_out, void **cq_context)
{
	struct srn_comp_channel *ch;
	struct srn_cq *cq;

	if (!channel || !cq_out || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	ch = srn_chan(channel);
	for (bool drained = false, took = false;;) {
		int r;

		/* CQs a peer fired itself become events first */
		srn_cq_collect_fired(srn_ctx(channel->context), ch);
		pthread_mutex_lock(&ch->lock);
		if (ch->qcount) {
			cq = ch->q[ch->qhead];
			ch->qhead = (ch->qhead + 1) % ch->qcap;
			if (--ch->qcount == 0)
				srn_wait_pipe_drain(&ch->pipe);
			else if (took)
				srn_wait_pipe_set(&ch->pipe); /* the byte the wait took */
			/* Counted while ch->lock is held, so a concurrent
			 * ibv_destroy_cq either took the event back first or
			 * sees it counted and waits for its ack. */
			pthread_mutex_lock(&cq->ibv.mutex);
			cq->comp_events_reported++;
			pthread_mutex_unlock(&cq->ibv.mutex);
			pthread_mutex_unlock(&ch->lock);
			break;
		}
		if (!drained) {
			/* Nothing queued: bytes in the pipe are peers' wakes
			 * already collected, or a peer's whose mark the next
			 * collect finds (it marks before it writes): drain,
			 * collect once more, then sleep. */
			srn_wait_pipe_drain(&ch->pipe);
			pthread_mutex_unlock(&ch->lock);
			drained = true;
			continue;
		}
		pthread_mutex_unlock(&ch->lock);
		drained = false;
		r = srn_wait_pipe_wait(&ch->pipe);
		if (r < 0)
			return -1; /* EINTR, EAGAIN: as rdma-core's read() */
		took = took || r == 1;
	}
	*cq_out = (struct ibv_cq *)&cq->ibv;
	*cq_context = cq->ibv.cq_context;
	return 0;
}

/* Acknowledges nevents events of cq (ibv_destroy_cq waits for them). */
SRN_EXPORT void ibv_ack_cq_events(struct ibv_cq *ibcq, unsigned int nevents)
{
	if (!ibcq || !nevents)
		return;
	pthread_mutex_lock(&ibcq->mutex);
	ibcq->comp_events_completed += nevents;
	pthread_cond_broadcast(&ibcq->cond);
	pthread_mutex_unlock(&ibcq->mutex);
}
