/* transport/mcast: UD multicast over IP multicast.  A multicast GID names
 * an IP group; RoCEv2 sends to group:4791 with destination QPN 0xFFFFFF.
 *
 * Every process on the host has its own engine socket on its own port, so
 * the group cannot be received there.  Instead each engine with a local
 * QP attached opens one socket bound to group:4791 with SO_REUSEADDR and
 * joins the group on the device's interface: Linux hands a multicast
 * datagram to every socket bound to its address and port, so each engine
 * (each process) gets exactly one copy, and ud.c gives one to each of its
 * attached QPs.  The sender's own copy comes back through
 * IP_MULTICAST_LOOP, as rxe loops back its own multicast sends.  A small
 * thread per engine reads the group sockets; the engine's epoll loop stays
 * as it is. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "net/thread.h"
#include "transport/rc.h"

enum { MC_MAX_GROUPS = 64, MC_BATCH = 8, MC_BUF = 4608 };

struct mc_group {
	union ibv_gid gid;
	struct net_udp u;            /* fd -1 = free slot */
};

struct srn_mcast {
	pthread_mutex_t lock;        /* groups[] and their sockets */
	struct mc_group groups[MC_MAX_GROUPS];
	int epfd, efd;
	pthread_t thread;
	bool running;
	bool send_ready;             /* engine socket set up to send to groups */
	struct net_udp_msg msgs[MC_BATCH];
	uint8_t *buf;
};

static pthread_mutex_t mc_create_lock = PTHREAD_MUTEX_INITIALIZER;

bool mcast_gid_to_ip(const union ibv_gid *gid, int *family, uint8_t ip[16])
{
	static const uint8_t zero10[10];
	const uint8_t *g = gid->raw;

	memset(ip, 0, 16);
	if (g[10] == 0xff && g[11] == 0xff && (g[12] & 0xf0) == 0xe0 &&
	    (!memcmp(g, zero10, 10) ||
	     (g[0] == 0xff && g[1] == 0x0e && !memcmp(g + 2, zero10, 8)))) {
		*family = AF_INET;
		memcpy(ip, g + 12, 4);
		return true;
	}
	if (g[0] == 0xff) {
		*family = AF_INET6;
		memcpy(ip, g, 16);
		return true;
	}
	return false;
}

static struct srn_mcast *mc_get(struct srn_engine *eng)
{
	struct srn_mcast *mc;

	pthread_mutex_lock(&mc_create_lock);
	mc = eng->mcast;
	if (!mc) {
		mc = calloc(1, sizeof(*mc));
		if (mc) {
			pthread_mutex_init(&mc->lock, NULL);
			mc->epfd = mc->efd = -1;
			for (int i = 0; i < MC_MAX_GROUPS; i++)
				mc->groups[i].u.fd = -1;
			eng->mcast = mc;
		}
	}
	pthread_mutex_unlock(&mc_create_lock);
	return mc;
}

int mcast_send_prepare(struct srn_engine *eng)
{
	struct srn_mcast *mc = mc_get(eng);
	int one = 1, fd = eng->udp.fd, ret;

	if (!mc)
		return ENOMEM;
	if (mc->send_ready)
		return 0;
	if (eng->udp.local.family == AF_INET) {
		struct ip_mreqn mr = { .imr_ifindex = eng->ctx->dev->ifindex };

		memcpy(&mr.imr_address, eng->udp.local.ip, 4);
		ret = setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mr, sizeof(mr));
		if (!ret)
			ret = setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof(one));
	} else {
		int ifx = eng->ctx->dev->ifindex;

		ret = setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifx, sizeof(ifx));
		if (!ret)
			ret = setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &one, sizeof(one));
	}
	if (ret)
		return errno;
	mc->send_ready = true;
	return 0;
}

static void *mc_main(void *arg)
{
	struct srn_engine *eng = arg;
	struct srn_mcast *mc = eng->mcast;
	struct epoll_event ev[8];

	for (;;) {
		int n = epoll_wait(mc->epfd, ev, 8, -1);

		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			uint32_t slot = (uint32_t)ev[i].data.u64;
			int got = 0;

			if (slot == MC_MAX_GROUPS)
				return NULL; /* stop */
			/* receive under the lock (leave may close the socket),
			 * process outside it (processing takes ctx->lock,
			 * which join/leave hold when they take ours) */
			pthread_mutex_lock(&mc->lock);
			if (slot < MC_MAX_GROUPS && mc->groups[slot].u.fd >= 0)
				got = net_udp_recv_batch(&mc->groups[slot].u, mc->msgs, MC_BATCH);
			pthread_mutex_unlock(&mc->lock);
			for (int k = 0; k < got; k++)
				srn_engine_rx_msg(eng, &mc->msgs[k]);
		}
	}
	return NULL;
}

static int mc_start(struct srn_engine *eng, struct srn_mcast *mc)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = MC_MAX_GROUPS };

	if (mc->running)
		return 0;
	if (!mc->buf) {
		mc->buf = malloc((size_t)MC_BATCH * MC_BUF);
		if (!mc->buf)
			return ENOMEM;
		for (int i = 0; i < MC_BATCH; i++) {
			mc->msgs[i].buf = mc->buf + (size_t)i * MC_BUF;
			mc->msgs[i].cap = MC_BUF;
		}
	}
	if (mc->epfd < 0)
		mc->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (mc->efd < 0)
		mc->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (mc->epfd < 0 || mc->efd < 0 || epoll_ctl(mc->epfd, EPOLL_CTL_ADD, mc->efd, &ev))
		return errno ? errno : EIO;
	if (net_thread_start(&mc->thread, NULL, mc_main, eng))
		return EAGAIN;
	mc->running = true;
	return 0;
}

/* A socket receiving group ip:4791 on the device's interface. */
static int mc_open(struct srn_engine *eng, int family, const uint8_t *ip, struct net_udp *u)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1, fd, ifx = eng->ctx->dev->ifindex;

	fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	memset(&ss, 0, sizeof(ss));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		struct ip_mreqn mr = { .imr_ifindex = ifx };

		s4->sin_family = AF_INET;
		s4->sin_port = htons(SRN_ROCE_UDP_PORT);
		memcpy(&s4->sin_addr, ip, 4);
		len = sizeof(*s4);
		memcpy(&mr.imr_multiaddr, ip, 4);
		memcpy(&mr.imr_address, eng->udp.local.ip, 4);
		setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&ss, len) < 0 ||
		    setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)) < 0)
			goto fail;
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		struct ipv6_mreq mr = { .ipv6mr_interface = (unsigned int)ifx };

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(SRN_ROCE_UDP_PORT);
		memcpy(&s6->sin6_addr, ip, 16);
		len = sizeof(*s6);
		memcpy(&mr.ipv6mr_multiaddr, ip, 16);
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&ss, len) < 0 ||
		    setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &mr, sizeof(mr)) < 0)
			goto fail;
	}
	memset(u, 0, sizeof(*u));
	u->fd = fd;
	u->local.family = family;
	memcpy(u->local.ip, ip, 16);
	u->local.port = SRN_ROCE_UDP_PORT;
	return 0;
fail:
	{
		int e = errno;

		close(fd);
		return e ? e : EIO;
	}
}

int srn_transport_mcast_join(struct srn_context *ctx, const union ibv_gid *mgid)
{
	struct srn_engine *eng = ctx->engine;
	struct srn_mcast *mc;
	uint8_t ip[16];
	int family, ret, slot = -1;

	if (!eng)
		return ENODEV;
	/* a group of the other family is joined on the interface too (it
	 * can receive from hosts that send to it; this engine's socket
	 * cannot send there) */
	if (!mcast_gid_to_ip(mgid, &family, ip))
		return EINVAL;
	mc = mc_get(eng);
	if (!mc)
		return ENOMEM;
	pthread_mutex_lock(&mc->lock);
	ret = mc_start(eng, mc);
	for (int i = 0; !ret && i < MC_MAX_GROUPS; i++) {
		if (mc->groups[i].u.fd >= 0 && !memcmp(&mc->groups[i].gid, mgid, 16))
			goto out; /* already joined */
		if (slot < 0 && mc->groups[i].u.fd < 0)
			slot = i;
	}
	if (!ret && slot < 0)
		ret = ENOMEM;
	if (!ret)
		ret = mc_open(eng, family, ip, &mc->groups[slot].u);
	if (!ret) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)slot };

		mc->groups[slot].gid = *mgid;
		if (epoll_ctl(mc->epfd, EPOLL_CTL_ADD, mc->groups[slot].u.fd, &ev)) {
			ret = errno;
			close(mc->groups[slot].u.fd);
			mc->groups[slot].u.fd = -1;
		}
	}
out:
	pthread_mutex_unlock(&mc->lock);
	return ret;
}

void srn_transport_mcast_leave(struct srn_context *ctx, const union ibv_gid *mgid)
{
	struct srn_engine *eng = ctx->engine;
	struct srn_mcast *mc = eng ? eng->mcast : NULL;

	if (!mc)
		return;
	pthread_mutex_lock(&mc->lock);
	for (int i = 0; i < MC_MAX_GROUPS; i++) {
		struct mc_group *g = &mc->groups[i];

		if (g->u.fd >= 0 && !memcmp(&g->gid, mgid, 16)) {
			/* closing the socket leaves the group */
			epoll_ctl(mc->epfd, EPOLL_CTL_DEL, g->u.fd, NULL);
			close(g->u.fd);
			g->u.fd = -1;
		}
	}
	pthread_mutex_unlock(&mc->lock);
}

void mcast_engine_stop(struct srn_engine *eng)
{
	struct srn_mcast *mc = eng ? eng->mcast : NULL;
	uint64_t one = 1;

	if (!mc)
		return;
	if (mc->running) {
		if (write(mc->efd, &one, sizeof(one)) < 0)
			(void)0;
		pthread_join(mc->thread, NULL);
	}
	for (int i = 0; i < MC_MAX_GROUPS; i++)
		if (mc->groups[i].u.fd >= 0)
			close(mc->groups[i].u.fd);
	if (mc->epfd >= 0)
		close(mc->epfd);
	if (mc->efd >= 0)
		close(mc->efd);
	pthread_mutex_destroy(&mc->lock);
	free(mc->buf);
	free(mc);
	eng->mcast = NULL;
}
