/* verbs/wait_pipe: see wait_pipe.h.  Waiters sleep in read() on rfd and
 * take the byte; every other read goes through rfd_nb, so a drain can
 * never sleep because a waiter took the byte first.  Without /proc there
 * is no rfd_nb: waiters then poll() instead of reading, so that nobody
 * but the owner, under its lock, ever reads the pipe. */
#include "verbs/wait_pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

enum { DRAIN_CHUNK = 256 };

int srn_wait_pipe_open(struct srn_wait_pipe *p)
{
	int fd[2];
	char path[64];

	if (pipe2(fd, O_CLOEXEC))
		return -1;
	fcntl(fd[1], F_SETFL, O_NONBLOCK);
	p->rfd = fd[0];
	p->wfd = fd[1];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd[0]);
	p->rfd_nb = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	return 0;
}

void srn_wait_pipe_close(struct srn_wait_pipe *p)
{
	close(p->rfd);
	close(p->wfd);
	if (p->rfd_nb >= 0)
		close(p->rfd_nb);
	p->rfd = p->wfd = p->rfd_nb = -1;
}

void srn_wait_pipe_set(struct srn_wait_pipe *p)
{
	ssize_t r = write(p->wfd, "", 1);

	(void)r; /* (full: readable anyway) */
}

/* Up to DRAIN_CHUNK bytes without sleeping: through rfd_nb, or without
 * /proc through rfd after poll() (no waiter reads it then). */
static ssize_t read_now(struct srn_wait_pipe *p)
{
	struct pollfd pfd = { .fd = p->rfd, .events = POLLIN };
	char buf[DRAIN_CHUNK];

	if (p->rfd_nb >= 0)
		return read(p->rfd_nb, buf, sizeof(buf));
	if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLIN))
		return 0;
	return read(p->rfd, buf, sizeof(buf));
}

void srn_wait_pipe_drain(struct srn_wait_pipe *p)
{
	while (read_now(p) == DRAIN_CHUNK)
		;
}

int srn_wait_pipe_wait(struct srn_wait_pipe *p)
{
	int fl = fcntl(p->rfd, F_GETFL);
	char b;
	ssize_t r;

	if (fl < 0)
		return -1;
	if (fl & O_NONBLOCK) {
		errno = EAGAIN;
		return -1;
	}
	if (p->rfd_nb < 0) {
		struct pollfd pfd = { .fd = p->rfd, .events = POLLIN };

		return poll(&pfd, 1, -1) < 0 ? -1 : 0;
	}
	r = read(p->rfd, &b, 1);
	if (r < 0)
		return -1;
	return r == 1;
}
