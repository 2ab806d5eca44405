/* net/thread: starting the library's own threads (engines, multicast
 * receivers, the CM agent).  Header-only, like net/proc.h: librdmacm uses
 * it too. */
#ifndef NET_THREAD_H
#define NET_THREAD_H

#include <pthread.h>
#include <signal.h>

/* pthread_create with every signal blocked in the new thread: signals
 * belong to the application.  A process-directed one (qperf's SIGALRM,
 * which must interrupt the thread waiting in ibv_get_cq_event) is then
 * never taken by a thread of ours, nor is a handler run there.  0 or the
 * pthread_create error. */
static inline int net_thread_start(pthread_t *t, const pthread_attr_t *attr,
				   void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(t, attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

#endif
