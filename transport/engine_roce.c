/* transport/engine_roce: port 4791.  An engine that did not bind it
 * watches its holder (net/roce_port.h) and takes the port over with a
 * second socket when the holder goes; with steering every engine joins
 * the port's group instead (net/steer.h). */
#include <sys/epoll.h>

#include "net/roce_port.h"
#include "transport/steer.h"
#include "transport/engine_priv.h"

/* Back-off between takeover tries while the holder cannot be watched,
 * from 1 ms doubling to 1 s: it keeps no write end yet (it just won), or
 * went between our bind and our watch (the next try wins), or is no
 * softrnic engine of this kind (kernel Soft-RoCE, an older build): then
 * the engine looks once a second. */
enum { ROCE_RETRY_MIN_NS = 1000 * 1000, ROCE_RETRY_MAX_NS = 1000 * 1000 * 1000 };

static void roce_retry_later(struct srn_engine *eng, uint64_t now)
{
	uint64_t delay = ROCE_RETRY_MAX_NS;

	if (eng->roce_fails < 10)
		delay = (uint64_t)ROCE_RETRY_MIN_NS << eng->roce_fails;
	if (delay > ROCE_RETRY_MAX_NS)
		delay = ROCE_RETRY_MAX_NS;
	eng->roce_fails++;
	/* the timeout of the engine's epoll wait: no descriptor for it */
	eng->roce_retry_ns = now + delay;
}

/* After a try at 4791 (net_roce_port_begin first): keep a write end if we
 * hold it, else watch its holder (or try again later).  Engine thread, or
 * the starting thread before the engine thread runs. */
void eng_roce_settle(struct srn_engine *eng)
{
	int fd;

	if (srn_engine_holds_roce_port(eng)) {
		net_roce_port_end(&eng->roce_port, true,
				  eng->roce.fd >= 0 ? eng->roce.fd : eng->udp.fd);
		eng->roce_fails = 0;
		return;
	}
	fd = net_roce_port_end(&eng->roce_port, false, -1);
	if (fd >= 0 && eng_epoll_add(eng->epfd, fd, EPOLLIN) == 0)
		return;
	/* (a read end not watched stays open until the next try: an engine
	 * keeps one descriptor for this whatever its state) */
	roce_retry_later(eng, srn_now_ns());
}

/* Bind 4791 for this engine's address if it is free (engine thread). */
void eng_roce_try(struct srn_engine *eng)
{
	struct net_udp u;

	net_roce_port_begin(&eng->roce_port, eng->udp.local.family, eng->udp.local.ip);
	if (!srn_engine_holds_roce_port(eng) &&
	    net_udp_open_roce(&u, eng->udp.local.family, eng->udp.local.ip,
			      srn_steer_roce_flags(eng)) == 0) {
		if (eng_epoll_add(eng->epfd, u.fd, EPOLLIN | EPOLLONESHOT)) {
			net_udp_close(&u);
		} else {
			/* application threads receive from it under rx_lock */
			pthread_mutex_lock(&eng->rx_lock);
			eng->roce = u;
			pthread_mutex_unlock(&eng->rx_lock);
			atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_roce_port_taken], 1,
						  memory_order_relaxed);
			srn_dbg(eng, "%s UDP port %u (our own port: %u)",
				srn_steer_roce_flags(eng) ? "joined" : "took over",
				SRN_ROCE_UDP_PORT, eng->udp.local.port);
			srn_steer_joined(eng);
		}
	}
	if (!srn_engine_holds_roce_port(eng))
		eng->roce_fail_ns = srn_now_ns();
	eng_roce_settle(eng);
}

/* The watched FIFO reported ev: a hang-up is the holder letting go. */
void eng_roce_watch_event(struct srn_engine *eng, uint32_t ev)
{
	uint64_t now = srn_now_ns();

	if (!(ev & (EPOLLHUP | EPOLLERR))) {
		net_roce_port_drain(&eng->roce_port);
		return;
	}
	/* (closed by the next try's net_roce_port_begin) */
	epoll_ctl(eng->epfd, EPOLL_CTL_DEL, eng->roce_port.fd, NULL);
	/* A holder that went: try at once.  But a hang-up within a second
	 * of a lost try backs off: the holder keeps no write end (the
	 * hang-up came when our own closed), or engines trying together
	 * keep waking each other with their passing write ends. */
	if (now - eng->roce_fail_ns > ROCE_RETRY_MAX_NS) {
		eng->roce_fails = 0;
		eng_roce_try(eng);
	} else {
		roce_retry_later(eng, now);
	}
}

/* [IPv6]:4791 has no takeover FIFO (net/roce_port.h): an engine with an
 * IPv6 socket but not the port tries to bind it again, at most every
 * ROCE6_RETRY_NS while its QPs have timers due or talk to another host
 * (after the holder went, what other hosts send it goes unanswered until
 * then, and is resent).
 * From the engine or an application thread: set under rx_lock, as roce. */
bool eng_roce6_wanted(struct srn_engine *eng)
{
	return __builtin_expect(eng->udp6.fd >= 0, 0) && eng->roce6.fd < 0 &&
	       atomic_load_explicit(&eng->remote_qps, memory_order_relaxed) > 0;
}

void eng_roce6_retry(struct srn_engine *eng, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&eng->roce6_try_ns, memory_order_relaxed);
	struct net_udp u;

	if (eng->udp6.fd < 0 || eng->roce6.fd >= 0 || now - last < ROCE6_RETRY_NS ||
	    !atomic_compare_exchange_strong(&eng->roce6_try_ns, &last, now))
		return;
	if (net_udp_open_at(&u, AF_INET6, eng->udp6.local.ip, SRN_ROCE_UDP_PORT))
		return;
	if (eng_epoll_add(eng->epfd, u.fd, EPOLLIN | EPOLLONESHOT)) {
		net_udp_close(&u);
		return;
	}
	pthread_mutex_lock(&eng->rx_lock);
	eng->roce6 = u;
	pthread_mutex_unlock(&eng->rx_lock);
	srn_dbg(eng, "IPv6 UDP port %u taken", SRN_ROCE_UDP_PORT);
}

/* The takeover try due (engine thread). */
void eng_roce_retry_due(struct srn_engine *eng)
{
	if (__builtin_expect(eng->roce_retry_ns != 0, 0) && srn_now_ns() >= eng->roce_retry_ns) {
		eng->roce_retry_ns = 0;
		eng_roce_try(eng);
	}
	if (eng_roce6_wanted(eng))
		eng_roce6_retry(eng, srn_now_ns());
}

