/* rsockets over softrnic, black-box, between two processes on 127.0.0.1
 * (the server is a fork taken before any rsocket call).
 *
 * Checks: errno for bad input (EBADF on a descriptor that is no rsocket,
 * EAFNOSUPPORT, ENOSYS for SOCK_DGRAM, EPROTONOSUPPORT, ENOTCONN, EINVAL,
 * ENOPROTOOPT); options stored and read back; rfcntl
 * O_NONBLOCK; rpoll on ordinary fds alone; connect to a port nobody
 * listens on -> ECONNREFUSED; then a connection whose server echoes what
 * it reads in odd-sized partial reads: sizes 1 B .. 1 MiB come back intact
 * through rsend/rrecv, rwrite/rread, rwritev/rreadv, rsendmsg/rrecvmsg;
 * MSG_PEEK; rgetsockname/rgetpeername; non-blocking rrecv -> EAGAIN and
 * rpoll timeout -> 0, then POLLIN when data comes; rpoll mixing an rsocket
 * with a pipe; rselect; rshutdown(SHUT_WR) -> the peer's rrecv returns 0
 * after the data, rsend after it -> EPIPE; a second connection whose
 * reader stalls: non-blocking rsend fills the window -> EAGAIN and no
 * POLLOUT, and everything arrives once the reader drains; rclose; a
 * third connection: the server riomaps a buffer, the client riowrites
 * 200 kB into it and rsends "done", the server finds every byte there
 * (riowrite where nothing is mapped -> EINVAL).
 * Bounded: alarm(30) in both processes, every wait has a timeout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/rsocket.h>

#include "tests/lib/t_util.h"

/* T_OK, and errno as the check left it when it fails */
#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		int ok_ = !!(cond), e_ = errno;                               \
		t_ok_(ok_, __FILE__, __LINE__, #cond, __VA_ARGS__);           \
		if (!ok_)                                                     \
			printf("       (errno %d %s)\n", e_, strerror(e_));    \
	} while (0)

#define ERRNO_IS(call, e) ((call) < 0 && errno == (e))

static uint8_t pat(size_t i, unsigned seed)
{
	return (uint8_t)(i * 131 + seed * 7 + (i >> 8));
}

/* Blocking: exactly len bytes or fail. */
static int send_all(int s, const void *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = rsend(s, (const char *)buf + off, len - off, 0);

		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

static int recv_all(int s, void *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = rrecv(s, (char *)buf + off, len - off, 0);

		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

/* ---- server (the child) ---------------------------------------------- */

/* Echo in odd-sized partial reads until EOF, then shut down writing. */
static int serve_echo(int c)
{
	static const size_t chunks[] = { 1, 7, 100, 4096, 70000, 3 };
	static uint8_t buf[70000];
	size_t k = 0;

	for (;;) {
		ssize_t n = rrecv(c, buf, chunks[k++ % 6], 0);

		if (n == 0)
			break;
		if (n < 0 || send_all(c, buf, (size_t)n))
			return 1;
	}
	return rshutdown(c, SHUT_WR) ? 1 : 0;
}

/* Stall until the client says so on the pipe, then count to EOF and
 * answer the count. */
static int serve_sink(int c, int go)
{
	static uint8_t buf[65536];
	uint64_t total = 0;
	char b;

	if (read(go, &b, 1) != 1)
		return 1;
	for (;;) {
		ssize_t n = rrecv(c, buf, sizeof(buf), 0);

		if (n == 0)
			break;
		if (n < 0)
			return 1;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != pat((size_t)total + (size_t)i, 9))
				return 2;
		total += (uint64_t)n;
	}
	return send_all(c, &total, sizeof(total)) ? 1 : 0;
}

/* Map a buffer for the client's riowrite, send its offset in-band, wait
 * for the client's "done" (sent after its riowrite), check, answer. */
static int serve_iomap(int c)
{
	enum { LEN = 200000 };
	uint8_t *buf = calloc(1, LEN);
	int64_t off;
	char done[4], ok;

	if (!buf)
		return 1;
	off = riomap(c, buf, LEN, PROT_WRITE, 0, -1);
	if (off < 0 || send_all(c, &off, sizeof(off)) || recv_all(c, done, 4) ||
	    memcmp(done, "done", 4))
		return 2;
	ok = 'y';
	for (size_t i = 0; i < LEN; i++)
		if (buf[i] != pat(i, 5))
			ok = 'n';
	if (send_all(c, &ok, 1) || riounmap(c, buf, LEN))
		return 3;
	/* wait for the client's close */
	if (rrecv(c, done, 1, 0) != 0)
		return 4;
	free(buf);
	return 0;
}

static int server(int portpipe, int go)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int l, c, one = 1, rc;

	alarm(30);
	l = rsocket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		return 10;
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	if (rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    rbind(l, (struct sockaddr *)&sin, sizeof(sin)) || rlisten(l, 4) ||
	    rgetsockname(l, (struct sockaddr *)&sin, &len))
		return 11;
	if (write(portpipe, &sin.sin_port, sizeof(sin.sin_port)) != sizeof(sin.sin_port))
		return 12;
	c = raccept(l, NULL, NULL);
	if (c < 0)
		return 13;
	rc = serve_echo(c);
	rclose(c);
	if (rc)
		return 20 + rc;
	c = raccept(l, NULL, NULL);
	if (c < 0)
		return 14;
	rc = serve_sink(c, go);
	rclose(c);
	if (rc)
		return 30 + rc;
	c = raccept(l, NULL, NULL);
	if (c < 0)
		return 15;
	rc = serve_iomap(c);
	rclose(c);
	rclose(l);
	return rc ? 40 + rc : 0;
}

/* ---- client checks ------------------------------------------------------ */

static void check_bad_input(void)
{
	int p[2], s, v = 0, fl;
	socklen_t vl = sizeof(v);
	char b = 0;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);

	if (pipe(p))
		return;
	CHECK(ERRNO_IS(rsend(p[1], &b, 1, 0), EBADF), "rsend on a pipe -> EBADF");
	CHECK(ERRNO_IS(rrecv(-1, &b, 1, 0), EBADF), "rrecv on -1 -> EBADF");
	CHECK(ERRNO_IS(rclose(p[0]), EBADF), "rclose on a pipe -> EBADF (pipe left open)");
	CHECK(fcntl(p[0], F_GETFD) >= 0, "the pipe is still open");
	CHECK(ERRNO_IS(rsocket(AF_UNIX, SOCK_STREAM, 0), EAFNOSUPPORT), "AF_UNIX -> EAFNOSUPPORT");
	CHECK(ERRNO_IS(rsocket(AF_INET, SOCK_DGRAM, 0), ENOSYS), "SOCK_DGRAM -> ENOSYS");
	CHECK(ERRNO_IS(rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT),
	      "IPPROTO_UDP -> EPROTONOSUPPORT");
	s = rsocket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
	CHECK(s >= 0, "rsocket(AF_INET, SOCK_STREAM, IPPROTO_TCP) = %d", s);
	if (s < 0)
		goto out;
	CHECK(ERRNO_IS(rrecv(s, &b, 1, 0), ENOTCONN), "rrecv unconnected -> ENOTCONN");
	CHECK(ERRNO_IS(rsend(s, &b, 1, 0), ENOTCONN), "rsend unconnected -> ENOTCONN");
	CHECK(ERRNO_IS(rgetpeername(s, (struct sockaddr *)&sin, &sl), ENOTCONN),
	      "rgetpeername unconnected -> ENOTCONN");
	CHECK(ERRNO_IS(rshutdown(s, SHUT_RDWR), ENOTCONN), "rshutdown unconnected -> ENOTCONN");
	CHECK(ERRNO_IS(raccept(s, NULL, NULL), EINVAL), "raccept on a non-listener -> EINVAL");
	CHECK(ERRNO_IS(rsetsockopt(s, SOL_SOCKET, SO_BROADCAST, &v, sizeof(v)), ENOPROTOOPT),
	      "unknown option -> ENOPROTOOPT");
	CHECK(ERRNO_IS(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, 1), EINVAL),
	      "short optlen -> EINVAL");
	v = 1 << 19;
	CHECK(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) == 0 &&
	      rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &vl) == 0 && v == 1 << 19,
	      "SO_RCVBUF stored and read back (%d)", v);
	v = 1;
	CHECK(rsetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v)) == 0, "TCP_NODELAY accepted");
	v = 64;
	CHECK(rsetsockopt(s, SOL_RDMA, RDMA_INLINE, &v, sizeof(v)) == 0, "RDMA_INLINE accepted");
	vl = sizeof(v);
	CHECK(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &v, &vl) == 0 && v == 0, "SO_ERROR 0");
	fl = rfcntl(s, F_GETFL);
	CHECK(fl >= 0 && !(fl & O_NONBLOCK), "F_GETFL: blocking");
	CHECK(rfcntl(s, F_SETFL, fl | O_NONBLOCK) == 0 && (rfcntl(s, F_GETFL) & O_NONBLOCK),
	      "F_SETFL O_NONBLOCK");
	CHECK(ERRNO_IS(riomap(s, &b, 1, PROT_WRITE, 0, -1), ENOTCONN),
	      "riomap unconnected -> ENOTCONN");
	CHECK(riowrite(s, &b, 1, 0, 0) == (size_t)-1 && errno == ENOTCONN,
	      "riowrite unconnected -> ENOTCONN");
	CHECK(rclose(s) == 0, "rclose");
	CHECK(ERRNO_IS(rclose(s), EBADF) || fcntl(s, F_GETFD) >= 0,
	      "rclose twice -> EBADF");
out:
	close(p[0]);
	close(p[1]);
}

static void check_poll_plain(void)
{
	int p[2];
	struct pollfd pfd;

	if (pipe(p))
		return;
	pfd.fd = p[0];
	pfd.events = POLLIN;
	CHECK(rpoll(&pfd, 1, 50) == 0, "rpoll on an empty pipe times out");
	CHECK(write(p[1], "x", 1) == 1 && rpoll(&pfd, 1, 1000) == 1 && (pfd.revents & POLLIN),
	      "rpoll on a pipe with data: POLLIN");
	close(p[0]);
	close(p[1]);
}

static void check_refused(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(9) };
	int s = rsocket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	CHECK(s >= 0 && ERRNO_IS(rconnect(s, (struct sockaddr *)&sin, sizeof(sin)), ECONNREFUSED),
	      "rconnect to a port nobody listens on -> ECONNREFUSED");
	if (s >= 0)
		rclose(s);
}

static int connect_to(uint16_t port_be)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = port_be };
	int s = rsocket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	if (s >= 0 && rconnect(s, (struct sockaddr *)&sin, sizeof(sin))) {
		rclose(s);
		return -1;
	}
	return s;
}

static bool echo_round(int s, size_t len, unsigned seed, int how)
{
	uint8_t *out = malloc(len), *in = calloc(1, len);
	bool ok = false;

	if (!out || !in)
		goto done;
	for (size_t i = 0; i < len; i++)
		out[i] = pat(i, seed);
	if (how == 0) {
		ok = !send_all(s, out, len) && !recv_all(s, in, len);
	} else if (how == 1) {
		ok = rwrite(s, out, len) == (ssize_t)len &&
		     rrecv(s, in, len, MSG_WAITALL) == (ssize_t)len;
	} else {
		size_t h = len / 2;
		struct iovec wv[2] = { { out, h }, { out + h, len - h } };
		struct iovec rv[2] = { { in, len - h }, { in + len - h, h } };
		struct msghdr m = { .msg_iov = rv, .msg_iovlen = 2 };

		ok = rwritev(s, wv, 2) == (ssize_t)len &&
		     rrecvmsg(s, &m, MSG_WAITALL) == (ssize_t)len;
	}
	ok = ok && !memcmp(in, out, len);
done:
	free(out);
	free(in);
	return ok;
}

static void check_echo(int s)
{
	static const size_t sizes[] = { 1, 100, 4095, 65536, 65537, 300000, 1 << 20 };
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	char buf[16];
	int p[2];
	struct pollfd pfd[2];
	fd_set rfds;
	struct timeval tv = { 2, 0 };

	CHECK(rgetpeername(s, (struct sockaddr *)&a, &al) == 0 && a.sin_family == AF_INET &&
	      a.sin_addr.s_addr == htonl(INADDR_LOOPBACK), "rgetpeername: 127.0.0.1");
	al = sizeof(a);
	CHECK(rgetsockname(s, (struct sockaddr *)&a, &al) == 0 && a.sin_family == AF_INET,
	      "rgetsockname: AF_INET");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		CHECK(echo_round(s, sizes[i], (unsigned)i, (int)(i % 3)),
		      "%zu bytes echoed back intact (partial reads on the far side, %s)",
		      sizes[i], i % 3 == 0 ? "rsend/rrecv" : i % 3 == 1 ?
		      "rwrite/MSG_WAITALL" : "rwritev/rrecvmsg");
	/* MSG_PEEK leaves the data for the next read. */
	CHECK(rsend(s, "peekaboo", 8, 0) == 8, "rsend 8");
	memset(buf, 0, sizeof(buf));
	CHECK(rrecv(s, buf, 8, MSG_PEEK | MSG_WAITALL) > 0 && buf[0] == 'p', "MSG_PEEK sees data");
	memset(buf, 0, sizeof(buf));
	CHECK(recv_all(s, buf, 8) == 0 && !memcmp(buf, "peekaboo", 8), "then rrecv gets it all");
	/* Non-blocking: EAGAIN, rpoll timeout, then POLLIN. */
	CHECK(rfcntl(s, F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
	CHECK(ERRNO_IS(rrecv(s, buf, 1, 0), EAGAIN), "rrecv with nothing there -> EAGAIN");
	pfd[0].fd = s;
	pfd[0].events = POLLIN;
	CHECK(rpoll(pfd, 1, 100) == 0, "rpoll POLLIN times out with nothing there");
	pfd[0].events = POLLOUT;
	CHECK(rpoll(pfd, 1, 1000) == 1 && (pfd[0].revents & POLLOUT), "rpoll: POLLOUT");
	if (pipe(p) == 0) {
		CHECK(rsend(s, "abc", 3, 0) == 3, "rsend 3 (non-blocking)");
		pfd[0].events = POLLIN;
		pfd[1].fd = p[0];
		pfd[1].events = POLLIN;
		CHECK(rpoll(pfd, 2, 5000) == 1 && (pfd[0].revents & POLLIN) && !pfd[1].revents,
		      "rpoll on rsocket + pipe: the rsocket has POLLIN");
		{
			/* the echo may come back in pieces: take all 3 bytes */
			ssize_t got = 0, r;

			for (int n = 0; n < 100 && got < 3; n++) {
				if (rpoll(pfd, 1, 50) <= 0)
					continue;
				r = rrecv(s, buf + got, (size_t)(3 - got), 0);
				if (r <= 0)
					break;
				got += r;
			}
			CHECK(got == 3 && !memcmp(buf, "abc", 3), "rrecv after POLLIN: the echo");
		}
		CHECK(write(p[1], "z", 1) == 1 && rpoll(pfd, 2, 5000) == 1 &&
		      (pfd[1].revents & POLLIN) && !(pfd[0].revents & POLLIN),
		      "rpoll on rsocket + pipe: the pipe has POLLIN");
		close(p[0]);
		close(p[1]);
	}
	CHECK(rsend(s, "q", 1, 0) == 1, "rsend 1");
	FD_ZERO(&rfds);
	FD_SET(s, &rfds);
	CHECK(rselect(s + 1, &rfds, NULL, NULL, &tv) == 1 && FD_ISSET(s, &rfds), "rselect: readable");
	CHECK(rrecv(s, buf, 1, 0) == 1 && buf[0] == 'q', "and reads it");
	rfcntl(s, F_SETFL, 0);
	/* Orderly close of our half: the echo server sees EOF, shuts its
	 * half, and we read 0 after its data. */
	CHECK(ERRNO_IS(rshutdown(s, 42), EINVAL), "rshutdown(42) -> EINVAL");
	CHECK(rsend(s, "end", 3, 0) == 3 && rshutdown(s, SHUT_WR) == 0, "rsend, rshutdown(SHUT_WR)");
	CHECK(ERRNO_IS(rsend(s, "x", 1, 0), EPIPE), "rsend after SHUT_WR -> EPIPE");
	CHECK(recv_all(s, buf, 3) == 0 && !memcmp(buf, "end", 3), "the last echo arrives");
	CHECK(rrecv(s, buf, 1, 0) == 0, "then rrecv returns 0 (EOF)");
	CHECK(rclose(s) == 0, "rclose");
}

static void check_window(int s, int go)
{
	static uint8_t buf[4096];
	uint64_t sent = 0, got = 0;
	struct pollfd pfd = { .fd = s, .events = POLLOUT };
	ssize_t n = 0;
	int i;
	uint8_t *big;

	rfcntl(s, F_SETFL, O_NONBLOCK);
	for (i = 0; i < 100000; i++) {
		for (size_t k = 0; k < sizeof(buf); k++)
			buf[k] = pat(sent + k, 9);
		n = rsend(s, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		sent += (uint64_t)n;
	}
	CHECK(n < 0 && errno == EAGAIN && sent > 0 && sent < (64u << 20),
	      "non-blocking rsend to a stalled reader: EAGAIN after %llu bytes",
	      (unsigned long long)sent);
	CHECK(rpoll(&pfd, 1, 50) == 0, "no POLLOUT while the window is full");
	CHECK(write(go, "g", 1) == 1, "reader starts");
	CHECK(rpoll(&pfd, 1, 5000) == 1 && (pfd.revents & POLLOUT), "POLLOUT once it reads");
	rfcntl(s, F_SETFL, 0);
	big = malloc(1 << 20);
	if (big) {
		for (size_t k = 0; k < (1 << 20); k++)
			big[k] = pat(sent + k, 9);
		CHECK(send_all(s, big, 1 << 20) == 0, "then a blocking 1 MiB rsend");
		sent += 1 << 20;
		free(big);
	}
	CHECK(rshutdown(s, SHUT_WR) == 0, "rshutdown(SHUT_WR)");
	CHECK(recv_all(s, &got, sizeof(got)) == 0 && got == sent,
	      "the reader counted every byte, in order (%llu of %llu)",
	      (unsigned long long)got, (unsigned long long)sent);
	CHECK(rclose(s) == 0, "rclose");
}

static void check_iomap(int s)
{
	enum { LEN = 200000 };
	uint8_t *buf = malloc(LEN);
	int64_t off = -1;
	char ok = 0;

	if (!buf)
		return;
	for (size_t i = 0; i < LEN; i++)
		buf[i] = pat(i, 5);
	CHECK(recv_all(s, &off, sizeof(off)) == 0 && off >= 0,
	      "the peer riomap'ed a buffer at offset %lld", (long long)off);
	errno = 0;
	CHECK(riowrite(s, buf, 10, off + LEN + 4096, 0) == (size_t)-1 && errno == EINVAL,
	      "riowrite where nothing is mapped -> EINVAL");
	CHECK(riowrite(s, buf, LEN, off, 0) == LEN, "riowrite %d bytes into it", LEN);
	CHECK(rsend(s, "done", 4, 0) == 4, "rsend after it (ordered behind the data)");
	CHECK(recv_all(s, &ok, 1) == 0 && ok == 'y', "the peer found every byte in place");
	CHECK(ERRNO_IS(riounmap(s, buf, LEN), EINVAL), "riounmap of a buffer never mapped -> EINVAL");
	CHECK(rclose(s) == 0, "rclose");
	free(buf);
}

int main(void)
{
	int portpipe[2], gopipe[2], st = 0, s;
	uint16_t port;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(portpipe) || pipe(gopipe))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(portpipe[0]);
		close(gopipe[1]);
		_exit(server(portpipe[1], gopipe[0]));
	}
	close(portpipe[1]);
	close(gopipe[0]);
	alarm(30);
	check_bad_input();
	check_poll_plain();
	check_refused();
	if (read(portpipe[0], &port, sizeof(port)) != sizeof(port)) {
		CHECK(0, "the server starts");
		goto reap;
	}
	printf("server listens on 127.0.0.1:%u\n", ntohs(port));
	s = connect_to(port);
	CHECK(s >= 0, "rconnect (blocking) to the server");
	if (s >= 0)
		check_echo(s);
	s = connect_to(port);
	CHECK(s >= 0, "second rconnect");
	if (s >= 0)
		check_window(s, gopipe[1]);
	s = connect_to(port);
	CHECK(s >= 0, "third rconnect");
	if (s >= 0)
		check_iomap(s);
reap:
	close(gopipe[1]);
	if (waitpid(pid, &st, 0) != pid)
		st = -1;
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server exited 0 (status %d)",
	      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return t_summary();
}
