/* net/udp: UDP socket I/O for the engine (see udp.h). */
#include "net/udp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/ip.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verbs/srn.h"
#include "net/settings.h"

/* Socket buffers: what we ask for, and below what (as getsockopt reports
 * it, doubled) the user is told that bandwidth will suffer. */
enum { UDP_BUF_WANT = 16 << 20, UDP_BUF_MIN_OK = 8 << 20, UDP_BATCH_MAX = 64,
       UDP_GSO_MAX_SEGS = 128, UDP_GSO_MAX_GROUPS = 16,
       UDP_IOV_MAX = 1024 /* UIO_MAXIOV: iovecs in one send */ };

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif

#ifndef UDP_NO_CHECK6_RX
#define UDP_NO_CHECK6_RX 102
#endif

static socklen_t to_sockaddr(const struct net_addr *a, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(a->port);
		memcpy(&s4->sin_addr, a->ip, 4);
		return sizeof(*s4);
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons(a->port);
	memcpy(&s6->sin6_addr, a->ip, 16);
	return sizeof(*s6);
}

static void from_sockaddr(const struct sockaddr_storage *ss, struct net_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;

		a->family = AF_INET;
		a->port = ntohs(s4->sin_port);
		memcpy(a->ip, &s4->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

		a->family = AF_INET6;
		a->port = ntohs(s6->sin6_port);
		memcpy(a->ip, &s6->sin6_addr, 16);
	}
}

static bool is_wildcard(const uint8_t *ip, int len)
{
	for (int i = 0; i < len; i++)
		if (ip[i])
			return false;
	return true;
}

/* Ask for big buffers.  With CAP_NET_ADMIN (root) the FORCE variant goes
 * past net.core.[rw]mem_max: a bigger receive buffer lets the requester
 * keep a bigger window in flight without the queue overrunning (see
 * requester.c); otherwise the kernel caps the plain request at the max. */
static int grow_buf(int fd, int opt, int force_opt, const char *name)
{
	static bool warned;
	int v = UDP_BUF_WANT, got = 0;
	socklen_t l = sizeof(got);

	if (setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof(v)) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
	getsockopt(fd, SOL_SOCKET, opt, &got, &l);
	/* Linux reports twice the value it accounts against. */
	if (got < UDP_BUF_MIN_OK && !__atomic_exchange_n(&warned, true, __ATOMIC_RELAXED))
		fprintf(stderr, "softrnic: UDP %s capped at %d bytes (raise "
			"net.core.%s_max for more bandwidth)\n", name, got,
			opt == SO_RCVBUF ? "rmem" : "wmem");
	return got;
}

/* Bind to ip:port (4791 or a chosen one), with an ephemeral port as
 * fallback, or (port 0) to an ephemeral port alone. */
static int udp_open(struct net_udp *u, int family, const uint8_t *ip, uint16_t port,
		    bool fallback, bool reuse)
{
	struct sockaddr_storage ss;
	struct net_addr a = { .family = family, .port = port };
	bool roce = port == SRN_ROCE_UDP_PORT;
	socklen_t len;
	int fd, on = 1;

	u->fd = -1;
	fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (family == AF_INET) {
		/* DF: the kernel then gives unconnected sends IPv4 ID 0, the
		 * value the ICRC is computed with (docs/wire.md). */
		int pmtu = IP_PMTUDISC_DO;

		memcpy(a.ip, ip, 4);
		setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
		/* Bound to one unicast address, the socket only receives what
		 * was sent to it: no need to be told (a control message per
		 * receive costs time on the latency path). */
		if (is_wildcard(ip, 4))
			setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on));
	} else {
		int pmtu = IPV6_PMTUDISC_DO;

		memcpy(a.ip, ip, 16);
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
		setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof(pmtu));
		if (is_wildcard(ip, 16))
			setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on));
		/* RoCE peers send UDP checksum 0 (docs/wire.md). */
		setsockopt(fd, IPPROTO_UDP, UDP_NO_CHECK6_RX, &on, sizeof(on));
	}
	/* GRO: a burst of same-size packets from one peer arrives as one
	 * buffer (segment size in a cmsg): one copy-out instead of one
	 * system call per 4 KiB packet. */
	u->gro = setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof(on)) == 0;
	u->gso_off = false;
	u->sndbuf = grow_buf(fd, SO_SNDBUF, SO_SNDBUFFORCE, "wmem");
	u->rcvbuf = grow_buf(fd, SO_RCVBUF, SO_RCVBUFFORCE, "rmem");

	/* No SO_REUSEADDR: on UDP it would let a second process bind 4791
	 * too and steal our packets.  4791 goes to whoever is first, or to
	 * the group of our engines, where a program steers each datagram
	 * (net/steer.h; only sockets of one user can join it). */
	if (roce && reuse)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on));
	len = to_sockaddr(&a, &ss);
	if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
		if (!fallback) {
			int e = errno;

			close(fd);
			return -e;
		}
		/* an ephemeral port shared with another socket of ours
		 * would make a group of two: not reusable */
		int off = 0;

		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &off, sizeof(off));
		a.port = 0;
		len = to_sockaddr(&a, &ss);
		if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
	}
	len = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &len);
	from_sockaddr(&ss, &u->local);
	u->fd = fd;
	return 0;
}

int net_udp_open(struct net_udp *u, int family, const uint8_t *ip, unsigned int flags)
{
	return udp_open(u, family, ip, (flags & NET_UDP_ROCE_FIRST) ? SRN_ROCE_UDP_PORT : 0,
			true, flags & NET_UDP_REUSEPORT);
}

int net_udp_open_roce(struct net_udp *u, int family, const uint8_t *ip, unsigned int flags)
{
	return udp_open(u, family, ip, SRN_ROCE_UDP_PORT, false, flags & NET_UDP_REUSEPORT);
}

int net_udp_open_at(struct net_udp *u, int family, const uint8_t *ip, uint16_t port)
{
	return udp_open(u, family, ip, port, false, false);
}

void net_udp_close(struct net_udp *u)
{
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
}

/* Test hook: SOFTRNIC_TEST_DROP=N drops N per mille of outgoing packets,
 * SOFTRNIC_TEST_DUP=N sends N per mille twice, so tests can exercise
 * retransmission and duplicate handling on loopback.  Read once. */
static struct {
	pthread_once_t once;
	unsigned int drop, dup;
} fault = { .once = PTHREAD_ONCE_INIT };

static void fault_init(void)
{
	fault.drop = (unsigned int)srn_setting(SRN_SET_TEST_DROP, NULL);
	fault.dup = (unsigned int)srn_setting(SRN_SET_TEST_DUP, NULL);
}

static unsigned int fault_roll(void)
{
	static __thread unsigned int seed;

	if (!seed)
		seed = (unsigned int)getpid() ^ (unsigned int)(uintptr_t)&seed;
	return (unsigned int)rand_r(&seed) % 1000;
}

int net_udp_send(struct net_udp *u, const struct net_addr *to,
		 const struct iovec *iov, int iovcnt)
{
	struct sockaddr_storage ss;
	struct msghdr mh = { 0 };

	pthread_once(&fault.once, fault_init);
	if (fault.drop && fault_roll() < fault.drop)
		return 0; /* lost on the "wire" */
	if (fault.dup && fault_roll() < fault.dup) {
		mh.msg_namelen = to_sockaddr(to, &ss);
		mh.msg_name = &ss;
		mh.msg_iov = (struct iovec *)iov;
		mh.msg_iovlen = (size_t)iovcnt;
		(void)sendmsg(u->fd, &mh, MSG_DONTWAIT);
	}

	mh.msg_namelen = to_sockaddr(to, &ss);
	mh.msg_name = &ss;
	mh.msg_iov = (struct iovec *)iov;
	mh.msg_iovlen = (size_t)iovcnt;
	for (;;) {
		if (sendmsg(u->fd, &mh, MSG_DONTWAIT) >= 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == EWOULDBLOCK || errno == ENOBUFS)
			return -EAGAIN;
		return -errno;
	}
}

bool net_udp_faults(void)
{
	pthread_once(&fault.once, fault_init);
	return fault.drop || fault.dup;
}

/* The kernel's copy pays per iovec (measured on a 15-packet GSO send of
 * real data: 3 iovecs per packet 6.1 GB/s, 2 per packet 6.4, 1 per
 * packet 6.7), and tx.c lays each packet's ICRC right before the next
 * packet's header. */
int net_udp_iov_join(const struct iovec *in, int n, struct iovec *out)
{
	int m = 0;

	for (int i = 0; i < n; i++) {
		if (m && (const char *)out[m - 1].iov_base + out[m - 1].iov_len ==
			 (const char *)in[i].iov_base)
			out[m - 1].iov_len += in[i].iov_len;
		else
			out[m++] = in[i];
	}
	return m;
}

int net_udp_send_segs(struct net_udp *u, const struct net_addr *to,
		      const struct iovec *iov, int iovcnt, uint32_t seg, int nseg,
		      const int *seg_iov)
{
	struct sockaddr_storage ss;
	struct msghdr mh = { 0 };
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctl;
	struct cmsghdr *c;
	uint16_t gso = (uint16_t)seg;
	int ret = 0;

	if (nseg > 1 && !u->gso_off && !net_udp_faults() && iovcnt <= UDP_IOV_MAX) {
		struct iovec joined[UDP_IOV_MAX];

		mh.msg_namelen = to_sockaddr(to, &ss);
		mh.msg_name = &ss;
		mh.msg_iov = joined;
		mh.msg_iovlen = (size_t)net_udp_iov_join(iov, iovcnt, joined);
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof(gso));
		memcpy(CMSG_DATA(c), &gso, sizeof(gso));
		for (;;) {
			if (sendmsg(u->fd, &mh, MSG_DONTWAIT) >= 0)
				return 0;
			if (errno == EINTR)
				continue;
			if (errno == EWOULDBLOCK || errno == ENOBUFS)
				return -EAGAIN;
			break;
		}
		if (errno != EINVAL && errno != EIO && errno != EOPNOTSUPP &&
		    errno != ENOPROTOOPT)
			return -errno;
		/* no GSO on this path (e.g. segment above the device MTU
		 * or an old kernel): packet by packet from now on */
		u->gso_off = true;
	}
	for (int k = 0; k < nseg; k++) {
		int first = seg_iov[k], end = k + 1 < nseg ? seg_iov[k + 1] : iovcnt;
		int r = net_udp_send(u, to, iov + first, end - first);

		if (r == -EAGAIN && k > 0) {
			/* keep what went out: wait a little for room, since
			 * the caller already counts these packets as sent */
			if (net_udp_wait_writable(u, 5))
				r = net_udp_send(u, to, iov + first, end - first);
		}
		if (r < 0 && !ret)
			ret = r;
	}
	return ret;
}

/* One group on its own: net_udp_send_segs with its packets' iov indexes
 * made relative to the group. */
static int send_group(struct net_udp *u, const struct net_addr *to, const struct iovec *iov,
		      const int *seg_iov, const struct net_udp_gso *g)
{
	int rel[UDP_GSO_MAX_SEGS];

	if (g->nseg > UDP_GSO_MAX_SEGS)
		return -EINVAL;
	for (int k = 0; k < g->nseg; k++)
		rel[k] = seg_iov[g->seg0 + k] - g->iov0;
	return net_udp_send_segs(u, to, iov + g->iov0, g->niov, g->seg, g->nseg, rel);
}

int net_udp_send_gso(struct net_udp *u, const struct net_addr *to, const struct iovec *iov,
		     const int *seg_iov, const struct net_udp_gso *grp, int ngrp)
{
	struct sockaddr_storage ss;
	struct mmsghdr mm[UDP_GSO_MAX_GROUPS];
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctl[UDP_GSO_MAX_GROUPS];
	struct iovec joined[UDP_IOV_MAX];
	socklen_t sl;
	int r, used = 0;

	if (ngrp <= 0)
		return -EINVAL;
	/* one send, or no GSO (faults, refused): as before, send by send */
	if (ngrp == 1 || u->gso_off || net_udp_faults()) {
		r = send_group(u, to, iov, seg_iov, &grp[0]);
		return r < 0 ? r : 1;
	}
	if (ngrp > UDP_GSO_MAX_GROUPS)
		ngrp = UDP_GSO_MAX_GROUPS;
	sl = to_sockaddr(to, &ss);
	memset(mm, 0, sizeof(mm[0]) * (size_t)ngrp);
	for (int i = 0; i < ngrp; i++) {
		struct msghdr *mh = &mm[i].msg_hdr;

		if (grp[i].niov > UDP_IOV_MAX - used) {
			ngrp = i; /* the rest in the next call */
			break;
		}
		mh->msg_name = &ss;
		mh->msg_namelen = sl;
		mh->msg_iov = joined + used;
		mh->msg_iovlen = (size_t)net_udp_iov_join(iov + grp[i].iov0, grp[i].niov, joined + used);
		used += (int)mh->msg_iovlen;
		if (grp[i].nseg > 1) {
			uint16_t gso = (uint16_t)grp[i].seg;
			struct cmsghdr *c;

			memset(&ctl[i], 0, sizeof(ctl[i]));
			mh->msg_control = ctl[i].buf;
			mh->msg_controllen = sizeof(ctl[i].buf);
			c = CMSG_FIRSTHDR(mh);
			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(gso));
			memcpy(CMSG_DATA(c), &gso, sizeof(gso));
		}
	}
	if (ngrp == 0) { /* a first group of more iovecs than a send takes */
		r = send_group(u, to, iov, seg_iov, &grp[0]);
		return r < 0 ? r : 1;
	}
	do
		r = sendmmsg(u->fd, mm, (unsigned int)ngrp, MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r > 0)
		return r;
	if (errno == EWOULDBLOCK || errno == ENOBUFS)
		return -EAGAIN;
	/* GSO refused (or another error on the first send): that one alone,
	 * the way net_udp_send_segs handles it */
	r = send_group(u, to, iov, seg_iov, &grp[0]);
	return r < 0 ? r : 1;
}

bool net_udp_wait_writable(struct net_udp *u, int timeout_ms)
{
	struct pollfd p = { .fd = u->fd, .events = POLLOUT };

	return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLOUT);
}

int net_udp_recv_batch(struct net_udp *u, struct net_udp_msg *msgs, int n)
{
	struct mmsghdr mm[UDP_BATCH_MAX];
	struct iovec iov[UDP_BATCH_MAX];
	struct sockaddr_storage from[UDP_BATCH_MAX];
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl[UDP_BATCH_MAX];
	int got;

	if (n > UDP_BATCH_MAX)
		n = UDP_BATCH_MAX;
	memset(mm, 0, sizeof(mm[0]) * (size_t)n);
	for (int i = 0; i < n; i++) {
		iov[i].iov_base = msgs[i].buf;
		iov[i].iov_len = msgs[i].cap;
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
		mm[i].msg_hdr.msg_name = &from[i];
		mm[i].msg_hdr.msg_namelen = sizeof(from[i]);
		mm[i].msg_hdr.msg_control = ctl[i].buf;
		mm[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
	}
	do
		got = recvmmsg(u->fd, mm, (unsigned int)n, MSG_DONTWAIT, NULL);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -errno;

	for (int i = 0; i < got; i++) {
		struct net_udp_msg *m = &msgs[i];

		m->len = mm[i].msg_len;
		m->truncated = mm[i].msg_hdr.msg_flags & MSG_TRUNC;
		from_sockaddr(&from[i], &m->from);
		m->to = u->local;
		m->seg = 0;
		m->id_hint = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mm[i].msg_hdr); c;
		     c = CMSG_NXTHDR(&mm[i].msg_hdr, c)) {
			if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
				struct in_pktinfo pi;

				memcpy(&pi, CMSG_DATA(c), sizeof(pi));
				memcpy(m->to.ip, &pi.ipi_addr, 4);
			} else if (c->cmsg_level == IPPROTO_IPV6 &&
				   c->cmsg_type == IPV6_PKTINFO) {
				struct in6_pktinfo pi;

				memcpy(&pi, CMSG_DATA(c), sizeof(pi));
				memcpy(m->to.ip, &pi.ipi6_addr, 16);
			} else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
				int gs;

				memcpy(&gs, CMSG_DATA(c), sizeof(gs));
				if (gs > 0 && (uint32_t)gs < m->len)
					m->seg = (uint32_t)gs;
			}
		}
	}
	return got;
}

/* ---- local addresses ------------------------------------------------------ */

enum { LOCAL_MAX = 64 };
static struct {
	pthread_once_t once;
	int n;
	struct net_addr a[LOCAL_MAX];
} local_addrs = { .once = PTHREAD_ONCE_INIT };

static void read_local_addrs(void)
{
	struct ifaddrs *ifa, *i;

	if (getifaddrs(&ifa) < 0)
		return;
	for (i = ifa; i && local_addrs.n < LOCAL_MAX; i = i->ifa_next) {
		struct net_addr *a = &local_addrs.a[local_addrs.n];

		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET) {
			a->family = AF_INET;
			memcpy(a->ip, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
			local_addrs.n++;
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			a->family = AF_INET6;
			memcpy(a->ip, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
			local_addrs.n++;
		}
	}
	freeifaddrs(ifa);
}

bool net_addr_is_local(int family, const uint8_t *ip)
{
	static const uint8_t loop6[16] = { [15] = 1 };

	if (family == AF_INET && ip[0] == 127)
		return true;
	if (family == AF_INET6 && !memcmp(ip, loop6, 16))
		return true;
	pthread_once(&local_addrs.once, read_local_addrs);
	for (int i = 0; i < local_addrs.n; i++)
		if (local_addrs.a[i].family == family &&
		    !memcmp(local_addrs.a[i].ip, ip, family == AF_INET ? 4 : 16))
			return true;
	return false;
}
