/* Async event queue of a context (verbs/async.c): what
 * ibv_get_async_event() returns, behind the context's async_fd. */
#ifndef SRN_ASYNC_H
#define SRN_ASYNC_H

#include "verbs/srn.h"

/* A queue and its eventfd (readable while events are queued).  NULL +
 * errno on failure.  The fd is the context's async_fd. */
struct srn_async *srn_async_create(void);
int srn_async_fd(const struct srn_async *a);
/* Frees undelivered events and closes the fd. */
void srn_async_destroy(struct srn_async *a);

#endif
