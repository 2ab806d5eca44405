/* transport/steer: see steer.h. */
#include "transport/steer.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/settings.h"
#include "net/steer.h"
#include "transport/engine.h"

/* QPNs reserved ahead of allocation: an engine that creates QPs one after
 * the other compiles the program once per this many. */
enum { STEER_AHEAD = 64 };

unsigned int srn_steer_open(struct srn_engine *eng, int family, const uint8_t *ip)
{
	eng->steer.fd = -1;
	if (!srn_setting(SRN_SET_STEER, NULL))
		return NET_UDP_ROCE_FIRST;
	if (net_steer_open(&eng->steer, family, ip) < 0)
		return NET_UDP_ROCE_FIRST; /* as before steering: first come */
	return 0;
}

unsigned int srn_steer_roce_flags(const struct srn_engine *eng)
{
	return eng->steer.fd >= 0 ? NET_UDP_REUSEPORT : 0;
}

/* Our socket in the group. */
static int group_fd(const struct srn_engine *eng)
{
	return eng->roce.fd;
}

/* Send the probes of a new census to <address>:4791, from a socket of
 * their own: the one leaving has closed its 4791 socket already. */
static void census(struct srn_engine *eng)
{
	uint8_t probes[NET_STEER_MEMBERS][NET_STEER_PROBE_LEN];
	struct sockaddr_storage ss;
	socklen_t len;
	int n, fd;

	atomic_store_explicit(&eng->steer_census_ns, srn_now_ns(), memory_order_relaxed);
	n = net_steer_census_begin(&eng->steer, probes);
	if (n <= 0)
		return;
	memset(&ss, 0, sizeof(ss));
	if (eng->udp.local.family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(SRN_ROCE_UDP_PORT);
		memcpy(&s4->sin_addr, eng->udp.local.ip, 4);
		len = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(SRN_ROCE_UDP_PORT);
		memcpy(&s6->sin6_addr, eng->udp.local.ip, 16);
		len = sizeof(*s6);
	}
	fd = socket(eng->udp.local.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	for (int i = 0; i < n; i++)
		(void)sendto(fd, probes[i], NET_STEER_PROBE_LEN, 0, (struct sockaddr *)&ss, len);
	close(fd);
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_steer_census], 1, memory_order_relaxed);
	srn_dbg(eng, "port %u group: census of %d", SRN_ROCE_UDP_PORT, n);
}

static int qpn_owner(void *arg, uint32_t qpn, uint16_t *port)
{
	struct srn_engine *eng = arg;
	int family, pid = net_registry_owner(eng->reg, qpn);

	if (!pid || net_registry_lookup(eng->reg, qpn, port, &family) != 0)
		return 0;
	return pid;
}

/* A census at most this often from one engine when compiling finds a
 * member without an index: the last one started is usually in flight. */
#define STEER_RECENSUS_GAP_NS (20ull * 1000 * 1000)

/* Compile the program from the census and attach it.  There is always a
 * program once an engine has joined, if only the probe branch: without
 * one the kernel spreads datagrams by address hash, and the probes of a
 * census, all from one socket, would all reach one member. */
static void compile(struct srn_engine *eng)
{
	struct net_steer_span *spans = malloc(sizeof(*spans) * NET_STEER_MAX_SPANS);
	int fd = group_fd(eng), n;
	bool stale = false;
	uint64_t last;

	if (!spans || fd < 0) {
		free(spans);
		return;
	}
	net_steer_lock(&eng->steer);
	n = net_steer_spans(&eng->steer, qpn_owner, eng, NET_REG_SLOTS, spans,
			    NET_STEER_MAX_SPANS, &stale);
	if (n >= 0) {
		int ret = net_steer_attach(fd, spans, n);

		if (!ret)
			atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_steer_programs], 1,
						  memory_order_relaxed);
		srn_dbg(eng, "port %u group: program of %d spans%s: %s", SRN_ROCE_UDP_PORT, n,
			stale ? " (a census pending)" : "", strerror(-ret));
	}
	net_steer_unlock(&eng->steer);
	free(spans);
	last = atomic_load_explicit(&eng->steer_census_ns, memory_order_relaxed);
	if (stale && (!last || srn_now_ns() - last >= STEER_RECENSUS_GAP_NS))
		census(eng);
}

void srn_steer_joined(struct srn_engine *eng)
{
	if (eng->steer.fd < 0 || group_fd(eng) < 0 ||
	    net_steer_join(&eng->steer, eng->udp.local.port) < 0)
		return;
	compile(eng); /* we have no index yet: this starts a census */
}

bool srn_steer_probe(struct srn_engine *eng, const struct net_udp_msg *m)
{
	bool complete;

	if (!net_steer_probe_in(&eng->steer, m->buf, m->len, &complete))
		return false;
	if (complete)
		compile(eng);
	return true;
}

void srn_steer_misplaced(struct srn_engine *eng)
{
	uint64_t last = atomic_load_explicit(&eng->steer_census_ns, memory_order_relaxed);
	uint64_t now = srn_now_ns();

	if (eng->steer.fd < 0 || now - last < NET_STEER_CENSUS_GAP_NS ||
	    !atomic_compare_exchange_strong(&eng->steer_census_ns, &last, now))
		return;
	census(eng);
}

void srn_steer_qpn(struct srn_engine *eng, uint32_t qpn)
{
	uint32_t hi;

	if (eng->steer.fd < 0 || eng->steer.slot < 0 ||
	    (qpn >= atomic_load(&eng->steer_lo) && qpn <= atomic_load(&eng->steer_hi)))
		return;
	hi = qpn + STEER_AHEAD - 1 < NET_REG_SLOTS ? qpn + STEER_AHEAD - 1 : NET_REG_SLOTS - 1;
	atomic_store(&eng->steer_lo, qpn);
	atomic_store(&eng->steer_hi, hi);
	net_steer_reserve(&eng->steer, qpn, hi);
	compile(eng);
}

void srn_steer_leave(struct srn_engine *eng)
{
	if (eng->steer.fd < 0 || eng->steer.slot < 0)
		return;
	net_steer_leave(&eng->steer);
	census(eng);
}

void srn_steer_close(struct srn_engine *eng)
{
	if (eng->steer.fd >= 0)
		net_steer_close(&eng->steer);
}
