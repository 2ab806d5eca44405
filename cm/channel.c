/* Event channels.  Applications poll channel->fd and may make it
 * non-blocking (cmtime, rping -P ...), so it must be a real descriptor;
 * an eventfd is the cheapest one that can later be signalled when CM
 * events are queued (issue 5).  Until then nothing ever fires on it. */
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "verbs/stub.h"

/* Weak: the real CM's channel.c replaces both with its own struct. */
SRN_STUB struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct rdma_event_channel *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return NULL; /* errno = ENOMEM from calloc */
	ch->fd = eventfd(0, EFD_CLOEXEC);
	if (ch->fd < 0) {
		int err = errno;

		free(ch);
		errno = err;
		return NULL;
	}
	return ch;
}

SRN_STUB void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (!channel)
		return;
	close(channel->fd);
	free(channel);
}
