/* rpoll and rselect: rsockets and ordinary descriptors in one wait.  An
 * rsocket is checked by progressing it; to sleep, it contributes its cm
 * event channel fd and its CQ's completion channel fd (armed) to one real
 * poll(2) with the ordinary fds.  Sleeps are cut into 100 ms slices, so a
 * missed wakeup costs at most that. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "cm/rsocket_priv.h"
#include "verbs/export.h"

enum { RS_POLL_SLICE_MS = 100 };

/* rs_get without touching errno for ordinary descriptors. */
static struct rs *lookup(int fd)
{
	int e = errno;
	struct rs *rs = fd >= 0 ? rs_get(fd) : NULL;

	errno = e;
	return rs;
}

static short check(struct rs *rs, short events)
{
	short rev;

	pthread_mutex_lock(&rs->lock);
	rev = rs_poll_events(rs, events);
	pthread_mutex_unlock(&rs->lock);
	return rev;
}

SRN_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct rs **rss;
	struct pollfd *set;
	nfds_t i, nrs = 0;
	uint64_t end = timeout > 0 ? rs_now_ms() + (uint64_t)timeout : 0;
	int ret = -1;

	if (nfds && !fds) {
		errno = EFAULT;
		return -1;
	}
	rss = calloc(nfds ? nfds : 1, sizeof(*rss));
	set = calloc(nfds ? 3 * nfds : 1, sizeof(*set));
	if (!rss || !set) {
		free(rss);
		free(set);
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < nfds; i++) {
		rss[i] = lookup(fds[i].fd);
		nrs += rss[i] != NULL;
	}
	if (!nrs) {
		/* Only ordinary descriptors: exactly poll(2). */
		ret = poll(fds, nfds, timeout);
		goto out;
	}
	for (;;) {
		int nready = 0, n, wait;
		nfds_t nset = 0;
		bool armed = false;

		for (i = 0; i < nfds; i++) {
			fds[i].revents = 0;
			if (rss[i]) {
				fds[i].revents = check(rss[i], fds[i].events);
				nready += fds[i].revents != 0;
			}
		}
		/* Ordinary fds first in the set: set[k] is fds' k-th of them. */
		for (i = 0; i < nfds; i++) {
			if (!rss[i]) {
				set[nset] = fds[i];
				set[nset++].revents = 0;
			}
		}
		if (!nready && timeout != 0) {
			armed = true;
			for (i = 0; i < nfds; i++) {
				if (!rss[i])
					continue;
				pthread_mutex_lock(&rss[i]->lock);
				n = rs_arm(rss[i], fds[i].events, &set[nset]);
				if (n < 0) {
					fds[i].revents = rs_poll_events(rss[i], fds[i].events);
					nready += fds[i].revents != 0;
				} else {
					nset += (nfds_t)n;
				}
				pthread_mutex_unlock(&rss[i]->lock);
			}
		}
		wait = 0;
		if (!nready && timeout != 0) {
			wait = RS_POLL_SLICE_MS;
			if (timeout > 0) {
				uint64_t now = rs_now_ms();

				wait = now >= end ? 0 : (int)(end - now < RS_POLL_SLICE_MS ?
							      end - now : RS_POLL_SLICE_MS);
			}
		}
		n = poll(set, nset, wait);
		if (n < 0) {
			ret = -1; /* EINTR and the like, as poll(2) */
			goto out;
		}
		{
			nfds_t k = 0;

			for (i = 0; i < nfds; i++) {
				if (rss[i])
					continue;
				fds[i].revents = set[k++].revents;
				nready += fds[i].revents != 0;
			}
		}
		for (i = 0; armed && i < nfds; i++) {
			if (!rss[i])
				continue;
			pthread_mutex_lock(&rss[i]->lock);
			rs_disarm(rss[i]);
			if (!fds[i].revents) {
				fds[i].revents = rs_poll_events(rss[i], fds[i].events);
				nready += fds[i].revents != 0;
			}
			pthread_mutex_unlock(&rss[i]->lock);
		}
		if (nready || timeout == 0 || (timeout > 0 && rs_now_ms() >= end)) {
			/* rpoll(..., 0) in a loop is how rstream waits: let the
			 * NIC's engine threads run (2 cores may be all there is). */
			if (!nready)
				sched_yield();
			ret = nready;
			break;
		}
	}
out:
	for (i = 0; i < nfds; i++)
		if (rss[i])
			rs_put(rss[i]);
	free(rss);
	free(set);
	return ret;
}

SRN_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds,
		       fd_set *exceptfds, struct timeval *timeout)
{
	struct pollfd *pfd;
	int i, n = 0, ret, ms = -1;

	if (nfds < 0 || nfds > FD_SETSIZE) {
		errno = EINVAL;
		return -1;
	}
	if (timeout) {
		if (timeout->tv_sec < 0 || timeout->tv_usec < 0) {
			errno = EINVAL;
			return -1;
		}
		ms = (int)(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000);
	}
	pfd = calloc(nfds ? (size_t)nfds : 1, sizeof(*pfd));
	if (!pfd) {
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < nfds; i++) {
		short ev = 0;

		if (readfds && FD_ISSET(i, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(i, writefds))
			ev |= POLLOUT;
		if (exceptfds && FD_ISSET(i, exceptfds))
			ev |= POLLPRI;
		if (ev) {
			pfd[n].fd = i;
			pfd[n++].events = ev;
		}
	}
	ret = rpoll(pfd, (nfds_t)n, ms);
	if (ret < 0)
		goto out;
	for (i = 0; i < n; i++) {
		if (pfd[i].revents & POLLNVAL) {
			errno = EBADF;
			ret = -1;
			goto out;
		}
	}
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	ret = 0;
	for (i = 0; i < n; i++) {
		short r = pfd[i].revents;

		if (readfds && (pfd[i].events & POLLIN) && (r & (POLLIN | POLLHUP | POLLERR))) {
			FD_SET(pfd[i].fd, readfds);
			ret++;
		}
		if (writefds && (pfd[i].events & POLLOUT) && (r & (POLLOUT | POLLERR))) {
			FD_SET(pfd[i].fd, writefds);
			ret++;
		}
		if (exceptfds && (pfd[i].events & POLLPRI) && (r & POLLPRI)) {
			FD_SET(pfd[i].fd, exceptfds);
			ret++;
		}
	}
out:
	free(pfd);
	return ret;
}
