/* The out-of-band TCP channel of tests/net/rc_stream_check: connection
 * set-up with a deadline, and fixed-size records (credits, the end of the
 * stream, the receiver's verdict) read without blocking the data path.
 * TCP rides the same impaired link as the RDMA traffic and recovers on
 * its own.  Header-only and static. */
#ifndef STREAM_OOB_H
#define STREAM_OOB_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/t_util.h"

static inline int oob_ms_left(double deadline)
{
	double left = deadline - t_now();

	return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

/* The listening side: one connection accepted before deadline, or -1. */
static inline int oob_accept(uint16_t port, double deadline)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct pollfd pf;
	int one = 1, ls, fd = -1;

	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0)
		return -1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1)) {
		close(ls);
		return -1;
	}
	pf = (struct pollfd){ .fd = ls, .events = POLLIN };
	if (poll(&pf, 1, oob_ms_left(deadline)) == 1)
		fd = accept(ls, NULL, NULL);
	close(ls);
	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* The connecting side: retries (the listener may not be up yet) until
 * deadline; the socket, or -1. */
static inline int oob_connect(const char *host, uint16_t port, double deadline)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, fd;

	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		return -1;
	while (t_now() < deadline) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			return -1;
		if (!connect(fd, (struct sockaddr *)&a, sizeof(a))) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			return fd;
		}
		close(fd);
		usleep(50000);
	}
	return -1;
}

/* All n bytes to or from fd before deadline: 0, or -1. */
static inline int oob_xfer(int fd, void *buf, size_t n, double deadline, int out)
{
	uint8_t *p = buf;

	while (n) {
		struct pollfd pf = { .fd = fd, .events = out ? POLLOUT : POLLIN };
		ssize_t r;

		if (poll(&pf, 1, oob_ms_left(deadline)) != 1)
			return -1;
		r = out ? send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL) : recv(fd, p, n, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			return -1;
		if (r > 0) {
			p += r;
			n -= (size_t)r;
		}
	}
	return 0;
}

enum oob_kind { OOB_CREDIT = 1, OOB_END, OOB_RESULT };

/* v[] meaning by kind: CREDIT v[0] receive WQEs consumed; END v[0]
 * messages sent; RESULT see rc_stream_check.c's struct tally. */
struct oob_rec {
	uint32_t kind;
	uint32_t pad;
	uint64_t v[7];
};

struct oob_reader {
	uint8_t buf[sizeof(struct oob_rec)];
	size_t have;
};

/* Waits up to ms for one whole record; 1 with *out, 0 none yet, -1 the
 * peer closed or failed. */
static inline int oob_read_rec(int fd, struct oob_reader *r, int ms, struct oob_rec *out)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (poll(&pf, 1, ms) != 1)
		return 0;
	n = recv(fd, r->buf + r->have, sizeof(r->buf) - r->have, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return -1;
	if (n < 0)
		return 0;
	r->have += (size_t)n;
	if (r->have < sizeof(r->buf))
		return 0;
	memcpy(out, r->buf, sizeof(*out));
	r->have = 0;
	return 1;
}

#endif
