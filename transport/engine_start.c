/* transport/engine_start: an engine's birth and death, and the settings
 * it reads (SOFTRNIC_ENGINE_SPIN_US, _RT, _NICE, SOFTRNIC_PCAP): sockets,
 * inbox, epoll set, the thread started and joined. */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "net/clock.h"
#include "net/mode.h"
#include "net/pcap.h"
#include "net/settings.h"
#include "net/shm_ring.h"
#include "net/thread.h"
#include "transport/link_watch.h"
#include "transport/steer.h"
#include "transport/engine_priv.h"

/* A receive slot holds a whole GRO buffer (up to 64 KiB of packets). */
enum { ENGINE_BUF = 65536 };

const char *const srn_counter_names[SRN_CNT_MAX] = {
#define SRN_CNT_NAME(n) #n,
	SRN_COUNTERS(SRN_CNT_NAME)
#undef SRN_CNT_NAME
};

uint64_t srn_now_ns(void)
{
	return net_now_ns();
}

void srn_dbg(struct srn_engine *eng, const char *fmt, ...)
{
	static struct srn_ratelimit rl = { .reason = "debug", .per_sec = 200 };
	char msg[512];
	va_list ap;

	if (!srn_log_on(eng, SRN_LOG_DEBUG))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	srn_log(eng, SRN_LOG_DEBUG, &rl, "%s", msg); /* (one write per line) */
}

/* After work the engine keeps polling the socket (yielding its CPU
 * between reads that found nothing) for up to linger_ns since the last
 * packet before it goes back to sleep: under a stream of
 * packets it then never pays a wake-up (10-40 us on this kind of VM), nor
 * does the sender's sendmsg have to wake and yield to it.  Bounded, so an
 * idle engine still sleeps (0% CPU); never on a single CPU, where it would
 * only take the CPU from the thread that sends the next packet; and it
 * stops as soon as an application thread receives inline.
 * SOFTRNIC_ENGINE_SPIN_US overrides the default. */
uint64_t eng_linger_ns;
int eng_linger_ncpu;
/* Each engine thread reads these: set once, before any reads them. */
static pthread_once_t linger_once = PTHREAD_ONCE_INIT;

static void linger_init(void)
{
	bool given;
	long us = srn_setting(SRN_SET_ENGINE_SPIN_US, &given);
	cpu_set_t set;
	int ncpu = 1;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		ncpu = CPU_COUNT(&set);
	eng_linger_ncpu = ncpu;
	/* On by default: a target whose application does not poll (ib_read_lat,
	 * ib_atomic_lat) then answers the next request without a wake-up
	 * (measured here: 31-40 -> 8-9 us a round trip).  It used to hurt
	 * ib_write_lat (4 spinners on 2 CPUs); now that the engine threads
	 * stay out of a polled exchange, and cpu_is_free() stops it while
	 * threads wait for a CPU, it does not (measured). */
	eng_linger_ns = ncpu > 1 ? ENG_LINGER_NS : 0;
	if (given)
		eng_linger_ns = (uint64_t)us * 1000;
}

/* SOFTRNIC_ENGINE_RT=P (experimental): run the engine thread SCHED_FIFO
 * at priority P so a packet wakes it at once even when application
 * threads spin on every core; it never spins, so it cannot starve them. */
static void engine_sched(struct srn_engine *eng)
{
	long rt = srn_setting(SRN_SET_ENGINE_RT, NULL);
	struct sched_param sp = { 0 };
	int e;

	if (rt <= 0)
		return;
	sp.sched_priority = (int)rt;
	e = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	if (e)
		srn_dbg(eng, "SOFTRNIC_ENGINE_RT=%ld: %s", rt, strerror(e));
}

void eng_thread_setup(struct srn_engine *eng)
{
	/* SOFTRNIC_ENGINE_NICE=N: the engine does the NIC's work for peers
	 * while local threads may spin on memory (ib_write_lat); a negative
	 * nice lets it preempt them instead of waiting out their time slice
	 * (measured here: ib_write_lat average 160-210 -> ~50 us), at some
	 * cost to CQ-polling latency tests.  Off by default; needs
	 * CAP_SYS_NICE for values below 0 (failure keeps the default). */
	bool nice_set;
	long nice_val = srn_setting(SRN_SET_ENGINE_NICE, &nice_set);

	if (nice_set && setpriority(PRIO_PROCESS, (id_t)gettid(), (int)nice_val) < 0)
		srn_dbg(eng, "SOFTRNIC_ENGINE_NICE=%ld: %s", nice_val, strerror(errno));
	engine_sched(eng);
	pthread_once(&linger_once, linger_init);
}
static void engine_free(struct srn_engine *eng)
{
	srn_cap_fini(eng);
	if (eng->epfd >= 0)
		close(eng->epfd);
	if (eng->tfd >= 0)
		close(eng->tfd);
	if (eng->efd >= 0)
		close(eng->efd);
	if (eng->kfd >= 0)
		close(eng->kfd);
	srn_link_watch_stop(eng);
	net_shm_inbox_destroy(eng->inbox);
	net_udp_close(&eng->udp);
	net_udp_close(&eng->udp6);
	net_udp_close(&eng->roce6);
	/* the sockets before the FIFO: an engine woken finds 4791 free */
	net_udp_close(&eng->roce);
	/* out of the group: the others count themselves again */
	srn_steer_leave(eng);
	srn_steer_close(eng);
	net_roce_port_close(&eng->roce_port);
	net_registry_close(eng->reg);
	pthread_mutex_destroy(&eng->rx_lock);
	pthread_mutex_destroy(&eng->qps_lock);
	pthread_mutex_destroy(&eng->timer_lock);
	free(eng->msgs);
	free(eng->rxbuf);
	free(eng->by_qpn);
	free(eng->all);
	if (eng->stats)
		net_stats_destroy(eng->stats);
	else
		free(eng->cnt);
	free(eng);
}

int eng_epoll_add(int epfd, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* IPv6 beside IPv4 (engine.h, udp6): at udp's port number, so the port
 * the registry holds for our QPs reaches us in both families.  Without
 * it (the number taken in IPv6 by someone else) this engine speaks IPv4
 * only and QPs with IPv6 paths see no answer: said in the debug log.
 * Then [IPv6]:4791 if no one holds it (roce6). */
static void open_udp6(struct srn_engine *eng, const struct srn_device *dev)
{
	int i = srn_dev_ipv6_src(dev), ret;

	if (eng->udp.local.family != AF_INET || i < 0)
		return;
	ret = net_udp_open_at(&eng->udp6, AF_INET6, dev->gid[i].raw, eng->udp.local.port);
	if (ret) {
		srn_dbg(eng, "no IPv6 socket at port %u: %s", eng->udp.local.port,
			strerror(-ret));
		return;
	}
	if (net_udp_open_at(&eng->roce6, AF_INET6, dev->gid[i].raw, SRN_ROCE_UDP_PORT) == 0)
		srn_dbg(eng, "IPv6 UDP port %u taken", SRN_ROCE_UDP_PORT);
}

int srn_engine_start(struct srn_context *ctx)
{
	struct srn_device *dev = ctx->dev;
	struct srn_engine *eng;
	const char *pcap = srn_setting_str(SRN_SET_PCAP);
	uint8_t ip[16];
	int family, ret;

	eng = calloc(1, sizeof(*eng));
	if (!eng)
		return ENOMEM;
	eng->ctx = ctx;
	eng->cap.word = &eng->cap.own_word; /* (until srn_cap_init) */
	eng->epfd = eng->tfd = eng->efd = eng->kfd = eng->link_fd = -1;
	eng->udp.fd = -1;
	eng->udp6.fd = -1;
	eng->roce6.fd = -1;
	eng->roce.fd = -1;
	eng->steer.fd = -1;
	eng->roce_port.fd = -1;
	eng->log_level = srn_log_level();
	eng->debug = eng->log_level >= SRN_LOG_DEBUG;
	pthread_mutex_init(&eng->rx_lock, NULL);
	pthread_mutex_init(&eng->qps_lock, NULL);
	pthread_mutex_init(&eng->timer_lock, NULL);

	if (pcap && !net_pcap_enabled()) {
		static atomic_flag warned = ATOMIC_FLAG_INIT;

		ret = net_pcap_open(pcap);
		if (ret && !atomic_flag_test_and_set(&warned))
			fprintf(stderr, "softrnic: SOFTRNIC_PCAP=%s: %s; not capturing\n", pcap,
				strerror(-ret));
	}

	eng->stats = net_stats_create(dev->ibdev.name, srn_counter_names, SRN_CNT_MAX);
	if (eng->stats) {
		eng->cnt = net_stats_values(eng->stats);
	} else {
		srn_dbg(eng, "no stats file (%s): softrnic stats will not see this engine",
			strerror(errno));
		eng->cnt = calloc(SRN_CNT_MAX, sizeof(*eng->cnt));
		if (!eng->cnt) {
			ret = ENOMEM;
			goto fail;
		}
	}
	eng->msgs = calloc(ENGINE_SOCK_BATCH, sizeof(*eng->msgs));
	eng->rxbuf = malloc((size_t)ENGINE_SOCK_BATCH * ENGINE_BUF);
	eng->by_qpn = calloc(NET_REG_SLOTS, sizeof(*eng->by_qpn));
	if (!eng->msgs || !eng->rxbuf || !eng->by_qpn) {
		ret = ENOMEM;
		goto fail;
	}
	for (int i = 0; i < ENGINE_SOCK_BATCH; i++) {
		eng->msgs[i].buf = eng->rxbuf + (size_t)i * ENGINE_BUF;
		eng->msgs[i].cap = ENGINE_BUF;
	}

	eng->reg = net_registry_open(dev->ibdev.name);
	if (!eng->reg) {
		ret = errno ? errno : EIO;
		goto fail;
	}
	/* GID 0 is the interface's address (IPv4-mapped for IPv4). */
	if (dev->num_gids > 0 && dev->gid_family[0] == AF_INET6) {
		family = AF_INET6;
		memcpy(ip, dev->gid[0].raw, 16);
	} else if (dev->num_gids > 0) {
		family = AF_INET;
		memcpy(ip, dev->gid[0].raw + 12, 4);
	} else {
		family = AF_INET;
		ip[0] = 127, ip[1] = 0, ip[2] = 0, ip[3] = 1;
	}
	/* a write end first (net/roce_port.h), for the case we do not get
	 * 4791 and must watch its holder */
	net_roce_port_begin(&eng->roce_port, family, ip);
	ret = -net_udp_open(&eng->udp, family, ip, srn_steer_open(eng, family, ip));
	if (ret)
		goto fail;
	open_udp6(eng, dev);
	if (eng->stats)
		net_stats_set_port(eng->stats, eng->udp.local.port);
	srn_cap_init(eng);
	/* Same-host peers send through our inbox (net/shm_ring.h); without
	 * one they use the socket. */
	if (net_shm_allowed()) {
		eng->inbox = net_shm_inbox_create(dev->ibdev.name, eng->udp.local.port);
		if (!eng->inbox)
			srn_dbg(eng, "no shared-memory inbox (%s): same-host peers use UDP",
				strerror(errno));
	}

	eng->epfd = epoll_create1(EPOLL_CLOEXEC);
	eng->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	eng->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	eng->kfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (eng->epfd < 0 || eng->tfd < 0 || eng->efd < 0 || eng->kfd < 0 ||
	    eng_epoll_add(eng->epfd, eng->udp.fd, EPOLLIN | EPOLLONESHOT) ||
	    (eng->udp6.fd >= 0 && eng_epoll_add(eng->epfd, eng->udp6.fd, EPOLLIN | EPOLLONESHOT)) ||
	    (eng->roce6.fd >= 0 && eng_epoll_add(eng->epfd, eng->roce6.fd, EPOLLIN | EPOLLONESHOT)) ||
	    eng_epoll_add(eng->epfd, eng->tfd, EPOLLIN) ||
	    eng_epoll_add(eng->epfd, eng->efd, EPOLLIN) ||
	    eng_epoll_add(eng->epfd, eng->kfd, EPOLLIN)) {
		ret = errno;
		goto fail;
	}
	srn_link_watch_start(eng);
	/* Steering: every engine joins 4791's group with a second socket
	 * (net/steer.h).  Else 4791 went to the first engine on the address,
	 * which keeps the FIFO's write end; the others, and engines that
	 * cannot join, watch for it to let go. */
	if (srn_engine_holds_roce_port(eng))
		eng_roce_settle(eng);
	else if (srn_steer_roce_flags(eng)) {
		eng_roce_try(eng);
	} else {
		eng_roce_settle(eng);
	}
	ret = net_thread_start(&eng->thread, NULL, eng_main, eng);
	if (ret)
		goto fail;
	eng->thread_running = true;
	ctx->engine = eng;
	return 0;
fail:
	engine_free(eng);
	return ret ? ret : EIO;
}

void srn_engine_stop(struct srn_context *ctx)
{
	struct srn_engine *eng = ctx->engine;
	uint64_t one = 1;

	if (!eng)
		return;
	if (eng->thread_running) {
		if (write(eng->efd, &one, sizeof(one)) < 0)
			(void)0;
		pthread_join(eng->thread, NULL);
	}
	if (eng->debug) {
		for (int i = 0; i < SRN_CNT_MAX; i++)
			if (eng->cnt[i])
				fprintf(stderr, "softrnic[%d]: %s %llu\n", (int)getpid(),
					srn_counter_names[i],
					(unsigned long long)eng->cnt[i]);
	}
	ctx->engine = NULL;
	engine_free(eng);
}
