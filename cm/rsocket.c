/* rsockets, the socket-shaped calls: descriptors, socket/bind/listen/
 * accept/connect/shutdown/close, options, names and fcntl.  The protocol
 * and the data path are in cm/rsocket_io.c (see cm/rsocket_priv.h); it is
 * softrnic's own and does not interoperate with rdma-core's rsockets.
 * IPv4 only underneath (rdma_cm takes IPv6, rsockets not yet): AF_INET6
 * sockets work with "::" and IPv4-mapped addresses, carried as IPv4.
 * riomap/riounmap/riowrite are in cm/rsocket_iomap.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cm/rsocket_priv.h"
#include "verbs/export.h"

/* ---- descriptor table ----------------------------------------------------- */

static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rs **tab;          /* indexed by descriptor */
static int tab_len;

static int tab_insert(struct rs *rs)
{
	int fd = rs->fd;

	pthread_mutex_lock(&tab_lock);
	if (fd >= tab_len) {
		int n = tab_len ? tab_len : 64;
		struct rs **t;

		while (n <= fd)
			n *= 2;
		t = realloc(tab, (size_t)n * sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&tab_lock);
			return ENOMEM;
		}
		memset(t + tab_len, 0, (size_t)(n - tab_len) * sizeof(*t));
		tab = t;
		tab_len = n;
	}
	tab[fd] = rs;
	rs->refs = 1;
	pthread_mutex_unlock(&tab_lock);
	return 0;
}

struct rs *rs_get(int fd)
{
	struct rs *rs = NULL;

	pthread_mutex_lock(&tab_lock);
	if (fd >= 0 && fd < tab_len && tab[fd] && !tab[fd]->closing) {
		rs = tab[fd];
		rs->refs++;
	}
	pthread_mutex_unlock(&tab_lock);
	if (!rs)
		errno = EBADF;
	return rs;
}

void rs_put(struct rs *rs)
{
	bool last;

	pthread_mutex_lock(&tab_lock);
	last = --rs->refs == 0;
	pthread_mutex_unlock(&tab_lock);
	if (last) {
		pthread_mutex_destroy(&rs->lock);
		free(rs);
	}
}

/* Take fd out of the table (rclose): the caller's reference is the
 * table's.  NULL + EBADF if fd is not an rsocket. */
static struct rs *tab_remove(int fd)
{
	struct rs *rs = NULL;

	pthread_mutex_lock(&tab_lock);
	if (fd >= 0 && fd < tab_len && tab[fd] && !tab[fd]->closing) {
		rs = tab[fd];
		rs->closing = true;
		tab[fd] = NULL;
	}
	pthread_mutex_unlock(&tab_lock);
	if (!rs)
		errno = EBADF;
	return rs;
}

static int fail(int err)
{
	errno = err;
	return -1;
}

/* A new rsocket with its own event channel (the descriptor); the id is
 * created here too unless the caller brings one (raccept). */
static struct rs *rs_new(int domain, bool with_id)
{
	struct rs *rs = calloc(1, sizeof(*rs));
	int err;

	if (!rs) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&rs->lock, NULL);
	rs->domain = domain;
	rs->opt_sndbuf = rs->opt_rcvbuf = RS_WINDOW * RS_SEG;
	rs->opt_sqsize = RS_SQ_DEPTH;
	rs->opt_rqsize = RS_RQ_DEPTH;
	rs->opt_maxseg = RS_SEG;
	rs->ch = rdma_create_event_channel();
	if (!rs->ch)
		goto fail;
	/* Never block inside rdma_get_cm_event: waits poll the fd. */
	if (fcntl(rs->ch->fd, F_SETFL, fcntl(rs->ch->fd, F_GETFL) | O_NONBLOCK) < 0)
		goto fail;
	rs->fd = rs->ch->fd;
	if (with_id && rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP))
		goto fail;
	return rs;
fail:
	err = errno;
	if (rs->ch)
		rdma_destroy_event_channel(rs->ch);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
	errno = err;
	return NULL;
}

/* Release everything but the struct (which the table's refs keep). */
static void rs_teardown(struct rs *rs)
{
	struct rs_pending *p;

	while ((p = rs->acceptq)) {
		rs->acceptq = p->next;
		rdma_reject(p->id, NULL, 0);
		rdma_destroy_id(p->id);
		free(p);
	}
	rs->acceptq_tail = NULL;
	rs_free_qp(rs);
	if (rs->id)
		rdma_destroy_id(rs->id);
	rs->id = NULL;
	if (rs->ch)
		rdma_destroy_event_channel(rs->ch);
	rs->ch = NULL;
}

/* ---- addresses ------------------------------------------------------------- */

/* The IPv4 address a socket address of this rsocket's family names. */
static int to_ipv4(const struct rs *rs, const struct sockaddr *a, socklen_t len,
		   struct sockaddr_in *out)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (!a)
		return EFAULT;
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	if (a->sa_family == AF_INET) {
		if (len < sizeof(struct sockaddr_in))
			return EINVAL;
		if (rs->domain != AF_INET)
			return EAFNOSUPPORT;
		memcpy(out, a, sizeof(*out));
		return 0;
	}
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)a;

		if (len < sizeof(struct sockaddr_in6))
			return EINVAL;
		if (rs->domain != AF_INET6)
			return EAFNOSUPPORT;
		out->sin_port = s6->sin6_port;
		if (IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr))
			return 0;
		if (!memcmp(&s6->sin6_addr, mapped, 12)) {
			memcpy(&out->sin_addr, s6->sin6_addr.s6_addr + 12, 4);
			return 0;
		}
		return EADDRNOTAVAIL; /* native IPv6: our rdma_cm is IPv4 only */
	}
	return EAFNOSUPPORT;
}

/* Write sin as this rsocket's family into (a, *len), truncating like
 * getsockname(2). */
static int from_ipv4(const struct rs *rs, const struct sockaddr_in *sin,
		     struct sockaddr *a, socklen_t *len)
{
	struct sockaddr_in6 s6;
	const void *src = sin;
	socklen_t n = sizeof(*sin);

	if (!a || !len)
		return EFAULT;
	if (rs->domain == AF_INET6) {
		memset(&s6, 0, sizeof(s6));
		s6.sin6_family = AF_INET6;
		s6.sin6_port = sin->sin_port;
		if (sin->sin_addr.s_addr != htonl(INADDR_ANY)) {
			s6.sin6_addr.s6_addr[10] = 0xff;
			s6.sin6_addr.s6_addr[11] = 0xff;
			memcpy(s6.sin6_addr.s6_addr + 12, &sin->sin_addr, 4);
		}
		src = &s6;
		n = sizeof(s6);
	}
	memcpy(a, src, *len < n ? *len : n);
	*len = n;
	return 0;
}

/* ---- lifecycle --------------------------------------------------------------- */

SRN_EXPORT int rsocket(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct rs *rs;
	int err;

	if (domain != AF_INET && domain != AF_INET6)
		return fail(EAFNOSUPPORT);
	if (base == SOCK_DGRAM)
		return fail(ENOSYS); /* datagram rsockets are not implemented */
	if (base != SOCK_STREAM)
		return fail(ESOCKTNOSUPPORT);
	if (protocol != 0 && protocol != IPPROTO_TCP)
		return fail(EPROTONOSUPPORT);
	rs = rs_new(domain, true);
	if (!rs)
		return -1;
	rs->nonblock = type & SOCK_NONBLOCK;
	err = tab_insert(rs);
	if (err) {
		rs_teardown(rs);
		pthread_mutex_destroy(&rs->lock);
		free(rs);
		return fail(err);
	}
	return rs->fd;
}

static int do_bind(struct rs *rs, const struct sockaddr_in *sin)
{
	if (rs->opt_reuseaddr) {
		int one = 1;

		rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one));
	}
	if (rdma_bind_addr(rs->id, (struct sockaddr *)sin))
		return errno;
	rs->bound = true;
	return 0;
}

SRN_EXPORT int rbind(int s, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rs *rs = rs_get(s);
	struct sockaddr_in sin;
	int err;

	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->lock);
	err = to_ipv4(rs, addr, addrlen, &sin);
	if (!err && (rs->bound || rs->state != RS_NEW))
		err = EINVAL;
	if (!err)
		err = do_bind(rs, &sin);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return err ? fail(err) : 0;
}

SRN_EXPORT int rlisten(int s, int backlog)
{
	struct rs *rs = rs_get(s);
	int err = 0;

	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->lock);
	if (rs->state == RS_LISTENING)
		goto out; /* listen again: only the backlog would change */
	if (rs->state != RS_NEW) {
		err = EINVAL;
		goto out;
	}
	if (!rs->bound) {
		/* As TCP: an unbound listener gets the wildcard and a port. */
		struct sockaddr_in any = { .sin_family = AF_INET };

		err = do_bind(rs, &any);
		if (err)
			goto out;
	}
	if (backlog <= 0 || backlog > 1024)
		backlog = backlog <= 0 ? 1 : 1024;
	if (rdma_listen(rs->id, backlog)) {
		err = errno;
		goto out;
	}
	rs->backlog = backlog;
	rs->state = RS_LISTENING;
out:
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return err ? fail(err) : 0;
}

/* Turn one connection request into an accepted rsocket: its own event
 * channel (the new descriptor), QP and buffers, then rdma_accept.
 * Returns the new rsocket or NULL + errno (the request is then refused). */
static struct rs *accept_one(struct rs *l, struct rs_pending *p)
{
	struct rdma_conn_param cp;
	struct rs_pdata pd;
	struct rs *rs = rs_new(l->domain, false);
	int err;

	if (!rs) {
		err = errno;
		goto refuse;
	}
	err = rs_pdata_take(rs, &p->pdata, sizeof(p->pdata));
	if (err)
		goto refuse;
	if (rdma_migrate_id(p->id, rs->ch)) {
		err = errno;
		goto refuse;
	}
	rs->id = p->id;
	rs->id->context = rs;
	p->id = NULL;
	err = rs_setup_qp(rs);
	if (err)
		goto refuse;
	rs_pdata_fill(&pd);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = &pd;
	cp.private_data_len = sizeof(pd);
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (rdma_accept(rs->id, &cp)) {
		err = errno;
		goto destroy;
	}
	/* Our QP is ready to send already, but the peer's may not be until
	 * it sees our REP: sending waits for ESTABLISHED (RS_ACCEPTING). */
	rs->state = RS_ACCEPTING;
	rs->bound = true;
	rs->opt_nodelay = l->opt_nodelay;
	rs->opt_keepalive = l->opt_keepalive;
	rs->opt_linger = l->opt_linger;
	err = tab_insert(rs);
	if (err)
		goto destroy;
	return rs;
refuse:
	if (p->id) {
		rdma_reject(p->id, NULL, 0);
		rdma_destroy_id(p->id);
		p->id = NULL;
	}
destroy:
	if (rs) {
		if (rs->id)
			rdma_reject(rs->id, NULL, 0);
		rs_teardown(rs);
		pthread_mutex_destroy(&rs->lock);
		free(rs);
	}
	errno = err;
	return NULL;
}

SRN_EXPORT int raccept(int s, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rs *l = rs_get(s), *rs = NULL;
	int err = 0;

	if (!l)
		return -1;
	if (addr && !addrlen) {
		rs_put(l);
		return fail(EFAULT);
	}
	pthread_mutex_lock(&l->lock);
	while (!rs) {
		struct rs_pending *p;

		if (l->closing) {
			err = EBADF;
			break;
		}
		if (l->state != RS_LISTENING) {
			err = EINVAL;
			break;
		}
		rs_progress(l);
		p = l->acceptq;
		if (!p) {
			if (l->nonblock) {
				err = EAGAIN;
				break;
			}
			rs_wait(l, POLLIN, 100);
			continue;
		}
		l->acceptq = p->next;
		if (!l->acceptq)
			l->acceptq_tail = NULL;
		rs = accept_one(l, p);
		free(p);
		/* A request we could not take is refused; wait for the next. */
	}
	pthread_mutex_unlock(&l->lock);
	rs_put(l);
	if (!rs)
		return fail(err);
	if (addr)
		from_ipv4(rs, &rs->id->route.addr.dst_sin, addr, addrlen);
	return rs->fd;
}

SRN_EXPORT int rconnect(int s, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rs *rs = rs_get(s);
	struct sockaddr_in sin;
	uint64_t end;
	int err = 0;

	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->lock);
	switch (rs->state) {
	case RS_CONNECTED:
	case RS_ACCEPTING:
		err = EISCONN;
		goto out;
	case RS_LISTENING:
		err = EINVAL;
		goto out;
	case RS_FAILED:
		err = rs->err ? rs->err : ECONNABORTED;
		rs->err = 0;
		goto out;
	case RS_CONNECTING:
		if (rs->nonblock) {
			err = EALREADY;
			goto out;
		}
		break;
	case RS_NEW:
		err = to_ipv4(rs, addr, addrlen, &sin);
		if (err)
			goto out;
		if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)&sin, 2000)) {
			err = errno;
			goto out;
		}
		rs->state = RS_CONNECTING;
		rs->conn_step = RS_STEP_ADDR;
		break;
	}
	/* The cm gives up on its own (REQ retries); the bound is a backstop. */
	end = rs_now_ms() + 60000;
	for (;;) {
		rs_progress(rs);
		if (rs->state == RS_CONNECTED)
			break;
		if (rs->state == RS_FAILED) {
			err = rs->err ? rs->err : ECONNREFUSED;
			rs->err = 0;
			break;
		}
		if (rs->nonblock) {
			err = EINPROGRESS;
			break;
		}
		if (rs_now_ms() > end) {
			rs->state = RS_FAILED;
			err = ETIMEDOUT;
			break;
		}
		rs_wait(rs, POLLOUT, 100);
	}
out:
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return err ? fail(err) : 0;
}

SRN_EXPORT int rshutdown(int s, int how)
{
	struct rs *rs = rs_get(s);
	int err = 0;

	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->lock);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		err = EINVAL;
	} else if (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING &&
		   rs->state != RS_FAILED) {
		err = ENOTCONN;
	} else {
		if (how != SHUT_WR)
			rs->rd_shut = true;
		if (how != SHUT_RD && !rs->wr_shut) {
			rs_send_fin(rs);
			rs->wr_shut = true;
		}
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return err ? fail(err) : 0;
}

SRN_EXPORT int rclose(int s)
{
	struct rs *rs = tab_remove(s);

	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->lock);
	if (rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING) {
		/* An orderly close: FIN after the data, and the data delivered
		 * (every send acknowledged) before the QP goes away.  SO_LINGER
		 * bounds the wait; without it, 2 s. */
		int ms = rs->opt_linger.l_onoff ? rs->opt_linger.l_linger * 1000 : 2000;

		if (ms > 0) {
			rs_send_fin(rs);
			rs_drain_sends(rs, ms);
		}
	}
	if (rs->id && (rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING ||
		       (rs->state == RS_CONNECTING && rs->conn_step == RS_STEP_CONN)))
		rdma_disconnect(rs->id);
	rs_teardown(rs);
	/* A thread still inside a call on s wakes up to a dead socket. */
	rs->state = RS_FAILED;
	rs->err = EBADF;
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return 0;
}

/* ---- data: every variant maps onto one iovec core ------------------------------ */

SRN_EXPORT ssize_t rrecv(int s, void *buf, size_t len, int flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return rs_recv_iov(s, &iov, 1, flags);
}

SRN_EXPORT ssize_t rrecvfrom(int s, void *buf, size_t len, int flags,
			     struct sockaddr *src, socklen_t *l)
{
	ssize_t r = rrecv(s, buf, len, flags);

	/* A stream socket names no sender (as TCP's recvfrom). */
	if (r >= 0 && src && l)
		*l = 0;
	return r;
}

SRN_EXPORT ssize_t rrecvmsg(int s, struct msghdr *msg, int flags)
{
	ssize_t r;

	if (!msg)
		return fail(EFAULT);
	r = rs_recv_iov(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
	if (r >= 0) {
		msg->msg_namelen = 0;
		msg->msg_controllen = 0;
		msg->msg_flags = 0;
	}
	return r;
}

SRN_EXPORT ssize_t rsend(int s, const void *buf, size_t len, int flags)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return rs_send_iov(s, &iov, 1, flags);
}

SRN_EXPORT ssize_t rsendto(int s, const void *buf, size_t len, int flags,
			   const struct sockaddr *dst, socklen_t l)
{
	(void)dst; /* connected stream: the address is ignored, as TCP does */
	(void)l;
	return rsend(s, buf, len, flags);
}

SRN_EXPORT ssize_t rsendmsg(int s, const struct msghdr *msg, int flags)
{
	if (!msg)
		return fail(EFAULT);
	return rs_send_iov(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

SRN_EXPORT ssize_t rread(int s, void *buf, size_t count)
{
	return rrecv(s, buf, count, 0);
}

SRN_EXPORT ssize_t rreadv(int s, const struct iovec *iov, int iovcnt)
{
	return rs_recv_iov(s, iov, iovcnt, 0);
}

SRN_EXPORT ssize_t rwrite(int s, const void *buf, size_t count)
{
	return rsend(s, buf, count, 0);
}

SRN_EXPORT ssize_t rwritev(int s, const struct iovec *iov, int iovcnt)
{
	return rs_send_iov(s, iov, iovcnt, 0);
}

/* ---- names, options, fcntl --------------------------------------------------------- */

SRN_EXPORT int rgetpeername(int s, struct sockaddr *a, socklen_t *l)
{
	struct rs *rs = rs_get(s);
	int err;

	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING)
		err = ENOTCONN;
	else
		err = from_ipv4(rs, &rs->id->route.addr.dst_sin, a, l);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return err ? fail(err) : 0;
}

SRN_EXPORT int rgetsockname(int s, struct sockaddr *a, socklen_t *l)
{
	struct rs *rs = rs_get(s);
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int err;

	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->lock);
	if (rs->id && (rs->bound || rs->state != RS_NEW))
		sin = rs->id->route.addr.src_sin;
	sin.sin_family = AF_INET;
	err = from_ipv4(rs, &sin, a, l);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return err ? fail(err) : 0;
}

/* Where an option lives in struct rs: an int, or NULL if unknown. */
static int *opt_int(struct rs *rs, int level, int name, bool *readonly)
{
	*readonly = false;
	switch (level) {
	case SOL_SOCKET:
		switch (name) {
		case SO_REUSEADDR: return &rs->opt_reuseaddr;
		case SO_KEEPALIVE: return &rs->opt_keepalive;
		case SO_OOBINLINE: return &rs->opt_oobinline;
		case SO_SNDBUF: return &rs->opt_sndbuf;
		case SO_RCVBUF: return &rs->opt_rcvbuf;
		case SO_ERROR: *readonly = true; return &rs->err;
		}
		break;
	case IPPROTO_TCP:
		switch (name) {
		case TCP_NODELAY: return &rs->opt_nodelay;
		case TCP_MAXSEG: return &rs->opt_maxseg;
		case TCP_KEEPIDLE: return &rs->opt_keepidle;
		}
		break;
	case IPPROTO_IPV6:
		if (name == IPV6_V6ONLY && rs->domain == AF_INET6)
			return &rs->opt_v6only;
		break;
	case SOL_RDMA:
		/* Sizes are fixed by the protocol here (RS_WINDOW...): the
		 * values are kept and reported, not applied. */
		switch (name) {
		case RDMA_SQSIZE: return &rs->opt_sqsize;
		case RDMA_RQSIZE: return &rs->opt_rqsize;
		case RDMA_INLINE: return &rs->opt_inline;
		case RDMA_IOMAPSIZE: return &rs->opt_iomapsize;
		}
		break;
	}
	return NULL;
}

SRN_EXPORT int rsetsockopt(int s, int level, int optname, const void *optval,
			   socklen_t optlen)
{
	struct rs *rs = rs_get(s);
	bool ro;
	int *p, err = 0;

	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->lock);
	if (!optval && optlen) {
		err = EFAULT;
	} else if (level == SOL_SOCKET && optname == SO_LINGER) {
		if (optlen < sizeof(struct linger))
			err = EINVAL;
		else
			memcpy(&rs->opt_linger, optval, sizeof(struct linger));
	} else if (level == SOL_RDMA && optname == RDMA_ROUTE) {
		/* Our rdma_cm resolves the route itself: a given path record
		 * is checked for size and not needed. */
		if (optlen < sizeof(struct ibv_path_data))
			err = EINVAL;
	} else if (!(p = opt_int(rs, level, optname, &ro)) || ro) {
		err = ENOPROTOOPT;
	} else if (optlen < sizeof(int)) {
		err = EINVAL;
	} else {
		memcpy(p, optval, sizeof(int));
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return err ? fail(err) : 0;
}

SRN_EXPORT int rgetsockopt(int s, int level, int optname, void *optval,
			   socklen_t *optlen)
{
	struct rs *rs = rs_get(s);
	bool ro;
	int *p, err = 0;

	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->lock);
	if (!optval || !optlen) {
		err = EFAULT;
	} else if (level == SOL_SOCKET && optname == SO_LINGER) {
		socklen_t n = *optlen < sizeof(struct linger) ? *optlen : sizeof(struct linger);

		memcpy(optval, &rs->opt_linger, n);
		*optlen = n;
	} else if (!(p = opt_int(rs, level, optname, &ro))) {
		err = ENOPROTOOPT;
	} else if (*optlen < sizeof(int)) {
		err = EINVAL;
	} else {
		if (level == SOL_SOCKET && optname == SO_ERROR)
			rs_progress(rs); /* a failed connect shows up here */
		memcpy(optval, p, sizeof(int));
		*optlen = sizeof(int);
		if (ro)
			rs->err = 0; /* SO_ERROR is read-and-clear */
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return err ? fail(err) : 0;
}

SRN_EXPORT int rfcntl(int s, int cmd, ...)
{
	struct rs *rs = rs_get(s);
	va_list ap;
	int ret = 0, arg;

	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->lock);
	switch (cmd) {
	case F_GETFL:
		ret = O_RDWR | (rs->nonblock ? O_NONBLOCK : 0);
		break;
	case F_SETFL:
		va_start(ap, cmd);
		arg = va_arg(ap, int);
		va_end(ap);
		rs->nonblock = arg & O_NONBLOCK;
		break;
	default:
		ret = -1;
		errno = EINVAL;
		break;
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return ret;
}
