/* transport/engine_owner: who reads the sockets, and when.  While an
 * application thread polls, it receives inline (hooks.c,
 * srn_transport_progress) and the engine thread defers; otherwise the
 * engine thread reads, lingers a little after work, and sleeps in epoll. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "net/shm_ring.h"
#include "transport/engine_priv.h"

enum { ENGINE_BATCHES_PER_WAKE = 16 };

/* Drain the socket (bounded).  A blocking lock, not trylock: the socket
 * is re-armed after this, and re-armed with packets still waiting it
 * would wake us again at once. */
static void engine_rx(struct srn_engine *eng)
{
	pthread_mutex_lock(&eng->rx_lock);
	for (int b = 0; b < ENGINE_BATCHES_PER_WAKE; b++) {
		atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_rx_batches], 1,
					  memory_order_relaxed);
		if (srn_engine_rx_batch(eng) < ENGINE_BATCH)
			break;
	}
	srn_engine_rx_done(eng);
	pthread_mutex_unlock(&eng->rx_lock);
}

/* One batch if no application thread is receiving right now (it holds
 * rx_lock a few microseconds at a time: wait for it that long, no more).
 * Returns the packets read. */
static int engine_rx_try(struct srn_engine *eng, uint64_t wait_ns)
{
	uint64_t end = 0;
	int n;

	while (pthread_mutex_trylock(&eng->rx_lock)) {
		uint64_t now = srn_now_ns();

		if (!end)
			end = now + wait_ns;
		else if (now >= end)
			return 0;
		sched_yield();
	}
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_rx_batches], 1, memory_order_relaxed);
	n = srn_engine_rx_batch(eng);
	srn_engine_rx_done(eng);
	pthread_mutex_unlock(&eng->rx_lock);
	return n;
}

/* While an application thread polls its CQ it receives inline
 * (srn_transport_progress); the engine thread then stays out of the way:
 * waking it for every packet would only steal a CPU from the poller (this
 * machine may have 2 cores: two spinning applications and one engine
 * thread woken per packet time-slice, the applications' polls go stale,
 * and the engine keeps being woken) and contend with it for rx_lock and
 * the QP locks.  The socket is in the epoll set one-shot.  When a packet
 * wakes the engine and an application thread polled within
 * ENGINE_APP_IDLE_NS, the engine reads what is there (awake anyway) and
 * leaves the socket disarmed; it looks in again when a deferral step ends
 * (the timeout of its epoll wait): the next step is twice as long (up to
 * ENGINE_DEFER_MAX_NS), or the shortest again when packets were waiting
 * and the application had not polled for ENGINE_APP_IDLE_NS (it does not
 * drain the socket: it spins on memory between its polls, like
 * ib_write_lat's target; see also requester_ack_rides, and
 * srn_engine_kick_spin for a poller that hands the socket back when it
 * may go to spin on memory).  The engine takes
 * over (reads and re-arms the socket) when a whole step passed without a
 * poll and either the application waits for a completion event (a CQ of
 * ours is armed) or its last poll is ENGINE_APP_GONE_NS old (it went
 * away, or computes); a poller only descheduled for a while keeps its
 * socket (see app_gone). */
enum {
	ENGINE_APP_IDLE_NS = 50 * 1000,
	ENGINE_DEFER_MIN_NS = 10 * 1000,
	/* Each look costs a wake-up, and on a 2-CPU host with two pollers
	 * takes a CPU from one of them for 10-20 us (measured: at 200 us
	 * steps, ~1 ping-pong in 20 on each side paid it; ib_send_lat 2 B
	 * avg 10-15 us for a typical 5.5; at 1 ms steps, the 1 % of UDP
	 * ib_send_lat's exchanges that met one made its 99th percentile
	 * 12-14 us for a median of 2.8, at 4 ms 4.2-5.7).  The longest
	 * step is about what a packet may wait when the application stops
	 * polling without arming a CQ (the first step end after that reads
	 * the socket; arming one brings the engine at once,
	 * srn_transport_cq_armed): at most half the shortest ACK timeout
	 * of the engine's RC QPs, whose peers likely use the same (see
	 * defer_max_ns), and never below the 1 ms this transport clamps
	 * ACK timeouts to.  With same-host peers (an inbox) the engine is
	 * also the inbox's reader when the application stops: shorter. */
	ENGINE_DEFER_MAX_NS = 4000 * 1000,
	ENGINE_DEFER_FLOOR_NS = 1000 * 1000,
	/* Only for applications that never left packets to a step's end
	 * in the last ENGINE_FOUND_RECENT_NS: one that spins on memory now
	 * and then (UDP ib_write_lat: ~30 exchanges in 20000 waited for a
	 * step's end, up to 4 ms each) keeps 1 ms steps. */
	ENGINE_FOUND_RECENT_NS = 100 * 1000 * 1000,
	ENGINE_DEFER_MAX_SHM_NS = 200 * 1000,
	/* how long the engine waits for an application thread's receive */
	ENGINE_RX_WAIT_NS = 5 * 1000,
};


static void arm_fd(struct srn_engine *eng, int fd, int op)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.fd = fd };

	/* (ADD finds it in the set when a 4791 socket taken over while
	 * parked went in already, or a poller put it back meanwhile:
	 * srn_engine_kick_spin) */
	if (epoll_ctl(eng->epfd, op, fd, &ev) && op == EPOLL_CTL_ADD && errno == EEXIST)
		epoll_ctl(eng->epfd, EPOLL_CTL_MOD, fd, &ev);
}

/* The sockets, one-shot: the main one and a taken-over 4791 (both are
 * read by every receive, so they are deferred and re-armed together). */
static void arm_socket(struct srn_engine *eng, struct engine_defer *d)
{
	int op = d->parked ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;

	d->parked = false;
	arm_fd(eng, eng->udp.fd, op);
	if (eng->roce.fd >= 0)
		arm_fd(eng, eng->roce.fd, op);
	/* (after the arm: see srn_engine_sock_unpark) */
	atomic_store(&eng->sock_parked, false);
}

/* While a poller has the sockets they leave the epoll set, not just stay
 * disarmed: a disarmed one-shot entry still hangs on the socket's wait
 * queue, and every datagram that arrives then walks it (a wake-up call
 * under irq-off locks).  Measured with a plain UDP ping-pong (GSO pair
 * each way): sendmsg 1.50 -> 1.87 us and 2.11 -> 2.31 us one way with a
 * disarmed entry on each socket.  Costs an epoll_ctl when a deferral
 * starts and one when the engine takes over, both off the data path. */
static void park_socket(struct srn_engine *eng, struct engine_defer *d)
{
	if (d->parked)
		return;
	d->parked = true;
	epoll_ctl(eng->epfd, EPOLL_CTL_DEL, eng->udp.fd, NULL);
	if (eng->roce.fd >= 0)
		epoll_ctl(eng->epfd, EPOLL_CTL_DEL, eng->roce.fd, NULL);
	/* (after the removal: see srn_engine_sock_unpark) */
	atomic_store(&eng->sock_parked, true);
}

/* The longest deferral step now (see ENGINE_DEFER_MAX_NS). */
static uint64_t defer_max_ns(struct srn_engine *eng)
{
	uint64_t max = ENGINE_DEFER_MAX_NS;

	if (eng->inbox)
		return ENGINE_DEFER_MAX_SHM_NS;
	pthread_mutex_lock(&eng->qps_lock);
	for (uint32_t i = 0; i < eng->n_all; i++) {
		/* 0: waits for ever; a hint, read without the QP's lock */
		uint64_t t = __atomic_load_n(&eng->all[i]->timeout_ns, __ATOMIC_RELAXED);

		if (t && t / 2 < max)
			max = t / 2;
	}
	pthread_mutex_unlock(&eng->qps_lock);
	return max < ENGINE_DEFER_FLOOR_NS ? ENGINE_DEFER_FLOOR_NS : max;
}

/* A deferral step of step ns from now.  Its end is the timeout of the
 * engine's epoll wait (eng_main), not a timerfd: no system call to
 * set it, none to read it. */
static void defer_for(struct srn_engine *eng, struct engine_defer *d, uint64_t now,
		      uint64_t step)
{
	d->on = true;
	atomic_store_explicit(&eng->deferring, true, memory_order_relaxed);
	d->since = now;
	d->step = step;
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_defers], 1, memory_order_relaxed);
}

/* Is an application thread waiting for a completion event (one of our
 * QPs' CQs is armed)?  Then it sleeps in its completion channel rather
 * than polling, and the engine must take every packet at once. */
static bool app_waits_event(struct srn_engine *eng)
{
	bool armed = false;

	pthread_mutex_lock(&eng->qps_lock);
	for (uint32_t i = 0; i < eng->n_all && !armed; i++) {
		struct srn_qp *qp = eng->all[i]->qp;

		armed = (qp->send_cq && srn_cq_armed(qp->send_cq)) ||
			(qp->recv_cq && srn_cq_armed(qp->recv_cq));
	}
	pthread_mutex_unlock(&eng->qps_lock);
	return armed;
}

static int loadavg_fd = -1;
static pthread_once_t loadavg_once = PTHREAD_ONCE_INIT;

static void loadavg_open(void)
{
	loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
}

/* Is a CPU free for us to spin on?  /proc/loadavg's 4th field is the
 * number of runnable threads right now, us included.  When threads wait
 * for a CPU (say, ib_write_lat spinning on memory on both cores), a
 * spinning engine would be descheduled for a whole time slice: sleeping
 * in epoll and being woken is then far quicker. */
static bool cpu_is_free(void)
{
	char buf[128];
	ssize_t n;
	const char *p;
	int field = 0;

	pthread_once(&loadavg_once, loadavg_open);
	if (loadavg_fd < 0)
		return false;
	n = pread(loadavg_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = 0;
	for (p = buf; *p && field < 3; p++)
		if (*p == ' ')
			field++;
	return atoi(p) <= eng_linger_ncpu;
}

static void engine_linger(struct srn_engine *eng, struct engine_defer *d)
{
	uint64_t now = srn_now_ns(), until = now + eng_linger_ns;
	unsigned int idle = 0;

	if (!eng_linger_ns || !cpu_is_free())
		return;
	/* out of the epoll set while we read it ourselves (park_socket) */
	park_socket(eng, d);
	while (now < until) {
		uint64_t last = atomic_load_explicit(&eng->app_poll_ns, memory_order_relaxed);
		int n;

		if (now - last < ENGINE_APP_ACTIVE_NS || app_sending(eng, now))
			break; /* an application thread receives, or sends */
		if (++idle % 8 == 0 && !cpu_is_free())
			break;
		if (pthread_mutex_trylock(&eng->rx_lock))
			break;
		n = srn_engine_rx_batch(eng);
		pthread_mutex_unlock(&eng->rx_lock);
		now = srn_now_ns();
		if (n > 0) {
			until = now + eng_linger_ns;
			idle = 0;
		} else {
			/* Nothing came: give the CPU to whoever waits for it.
			 * A loopback sender's wake-up can put us on its CPU,
			 * where spinning took its time (ib_write_bw 4 KiB x
			 * 20000 over UDP: 1.8 GB/s lingering, 3.8 without, 4.1
			 * yielding).  Alone on a CPU, the yield returns at
			 * once and we linger as before. */
			sched_yield();
			now = srn_now_ns();
		}
	}
	/* (our own list: no lock needed to send what full batches left) */
	srn_engine_rx_done(eng);
}

/* The engine takes the socket back: reads, then sleeps on it. */
static void take_over(struct srn_engine *eng, struct engine_defer *d)
{
	d->on = false;
	d->found_run = 0;
	atomic_store_explicit(&eng->deferring, false, memory_order_relaxed);
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_takeovers], 1, memory_order_relaxed);
	engine_rx(eng);
	engine_linger(eng, d);
	arm_socket(eng, d);
}

/* The socket has packets (fresh = from epoll), or the timer fired while
 * deferring (watchdog: the deferral step is over). */
void eng_socket_ready(struct srn_engine *eng, struct engine_defer *d, bool fresh,
			 bool watchdog)
{
	uint64_t now = srn_now_ns();
	uint64_t last = app_active_ns(eng);
	bool kicked;

	if (!fresh) {
		uint64_t step = d->step * 2;

		if (!d->on)
			return;
		if (!watchdog && now < d->since + d->step)
			return; /* a QP timer fired: the deferral still runs */
		/* (the QP list is looked at only for steps past the floor;
		 * and steps stay at the floor for ENGINE_FOUND_RECENT_NS
		 * after one found packets the application had left: such an
		 * application may leave the next ones too, and each waits
		 * for a step's end) */
		if (step > (eng->inbox ? ENGINE_DEFER_MAX_SHM_NS : ENGINE_DEFER_FLOOR_NS)) {
			uint64_t max = d->found_ns && now - d->found_ns < ENGINE_FOUND_RECENT_NS ?
					       ENGINE_DEFER_FLOOR_NS : defer_max_ns(eng);

			if (step > max)
				step = max;
		}
		if (last <= d->since && (app_gone(eng, now) || app_waits_event(eng))) {
			/* no poll for a while, or the application waits
			 * for an event: the engine takes over */
			take_over(eng, d);
			return;
		}
		/* The application polls (or was only off its CPU for a
		 * moment): the next step is twice as long.  Packets
		 * waiting at two step ends in a row: the application does
		 * not drain the socket itself (it spins on memory between
		 * its polls): shortest steps.  Not at the first: that is
		 * mostly a poller the scheduler took off its CPU, which
		 * drains the socket when it is back, and the ~7 wake-ups
		 * of a new ramp of steps would each take a CPU from a
		 * spinner (UDP ib_write_lat, 10 alternating runs: 99th
		 * percentile 44-85 -> 16-21 us, average 5.0-7.0 -> 4.2-5.4;
		 * riostream's memory-spinning ping-pong unchanged).  (An
		 * application thread polling right now takes them itself:
		 * no contention for rx_lock.) */
		if (!app_sending(eng, now) && !app_polling(eng, now) &&
		    engine_rx_try(eng, 0) > 0 && last + ENGINE_APP_IDLE_NS <= now) {
			d->found_ns = now;
			if (step > ENGINE_DEFER_FLOOR_NS)
				step = ENGINE_DEFER_FLOOR_NS;
			if (++d->found_run >= 2)
				step = ENGINE_DEFER_MIN_NS;
		} else {
			d->found_run = 0;
		}
		defer_for(eng, d, now, step);
		return;
	}
	/* Deferring, yet woken by the socket: an application thread put it
	 * back in the set (srn_engine_kick_spin), as it may now spin on its
	 * memory.  The packet is read now, even while that thread sends, and
	 * the current step goes on. */
	kicked = d->on;
	if (kicked)
		d->parked = false;
	if (last + ENGINE_APP_IDLE_NS > now && !app_waits_event(eng)) {
		/* Deferring first: QP deadlines armed while we read are then
		 * left to the poller (srn_engine_arm).  Awake anyway, read
		 * what is there (unless the application is at it). */
		defer_for(eng, d, now, kicked ? d->step : ENGINE_DEFER_MIN_NS);
		park_socket(eng, d);
		if (kicked || !app_sending(eng, now))
			engine_rx_try(eng, ENGINE_RX_WAIT_NS);
		return;
	}
	take_over(eng, d);
}

/* The CQ-armed eventfd (srn_transport_cq_armed): a CQ was armed while we
 * deferred. */
void eng_cq_armed_kick(struct srn_engine *eng, struct engine_defer *d)
{
	if (d->on && app_waits_event(eng))
		take_over(eng, d);
}

/* Same-host inbox: before the engine blocks, make sure no packet can sit
 * in it while nobody looks (net/shm_ring.c, "Waking the consumer").
 * While an application thread polls and the inbox carries traffic, the
 * application drains it inline; the engine then only looks in again after
 * a deferral, as for the socket, and takes over when the application
 * stops polling.  Otherwise the engine raises the inbox's sleeping flag,
 * so the next sender rings the doorbell, and checks the lanes once more.
 * Returns 1 when the flag is up, 0 when a deferral timer will wake us, -1
 * when packets were waiting (processed: look again). */
enum {
	ENGINE_SHM_RECENT_NS = 10 * 1000 * 1000, /* the inbox carries traffic */
	/* the application polls: even a busy poller may not run for a
	 * while on a loaded 2-CPU host; below this it is not woken by
	 * doorbells (measured: 100 us gave a doorbell every other packet
	 * and 10-100x the ping-pong latency, 1 ms a few per thousand) */
	ENGINE_SHM_APP_NS = 1000 * 1000,
};

int eng_shm_idle(struct srn_engine *eng, struct engine_defer *d)
{
	uint64_t now, last, rx;

	if (!eng->inbox || d->on)
		return 0;
	now = srn_now_ns();
	last = atomic_load_explicit(&eng->app_poll_ns, memory_order_relaxed);
	rx = atomic_load_explicit(&eng->shm_rx_ns, memory_order_relaxed);
	/* (an application thread may have stamped them after now) */
	if (last + ENGINE_SHM_APP_NS > now && rx + ENGINE_SHM_RECENT_NS > now) {
		/* Short steps: on a loaded host the application is often not
		 * running, and then the engine is the one to take the packets
		 * (measured: 50 us steps cost 10x the ping-pong latency).  The
		 * price: an application that sleeps in its completion channel
		 * right after polling has the engine look every 10 us for up
		 * to ENGINE_SHM_APP_NS. */
		defer_for(eng, d, now, ENGINE_DEFER_MIN_NS);
		return 0;
	}
	atomic_store(&eng->shm_asleep, true);
	net_shm_inbox_set_sleeping(eng->inbox, true);
	if (!net_shm_inbox_pending(eng->inbox))
		return 1;
	net_shm_inbox_set_sleeping(eng->inbox, false);
	atomic_store(&eng->shm_asleep, false);
	engine_rx(eng);
	return -1;
}
void srn_transport_cq_armed(struct srn_context *ctx)
{
	struct srn_engine *eng = ctx->engine;
	uint64_t one = 1;

	/* Only while the engine leaves the socket to a poller: an engine
	 * that reads it itself already sees every packet (an application
	 * that waits for events arms its CQs all the time; no system call
	 * then). */
	if (eng && atomic_load_explicit(&eng->deferring, memory_order_relaxed) &&
	    write(eng->kfd, &one, sizeof(one)) < 0)
		(void)0;
}

/* Put the socket back in the engine's epoll set, armed, while it defers:
 * the peer's next packet wakes the engine, and socket_ready reads it at
 * once.  Not an eventfd write that wakes the engine now, as
 * srn_transport_cq_armed does: that cost a wake-up per kick and a new
 * ramp of short deferral steps, each taking a CPU from a spinner (UDP
 * ib_write_lat, 3 runs each: average 3.8-4.4 us and 99th percentile
 * 27-40 us that way, 2.9-3.1 and 7-15 this way).  From any thread: the
 * engine copes with the socket in the set while it thinks it parked it
 * (arm_fd's EEXIST, socket_ready).  A taken-over 4791 socket (cross-host
 * traffic, rare) is left to the step's end. */
void srn_engine_kick_spin(struct srn_engine *eng)
{
	if (!atomic_load_explicit(&eng->deferring, memory_order_relaxed))
		return;
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_spin_kicks], 1, memory_order_relaxed);
	arm_fd(eng, eng->udp.fd, EPOLL_CTL_ADD);
	if (eng->roce.fd >= 0 && atomic_load_explicit(&eng->remote_qps, memory_order_relaxed) > 0)
		arm_fd(eng, eng->roce.fd, EPOLL_CTL_ADD);
}

/* Quiet sockets (srn_engine_sock_quiet): an application thread that polls
 * an empty CQ whose completions come by the direct path (a peer's WRITEs
 * land in memory it spins on; its send CQ while it posts unsignaled
 * sends, as UCX does) would otherwise make a recvmmsg that finds nothing
 * on every poll, costlier than the peer's whole delivery.  The quiet
 * spell starts ENGINE_SOCK_QUIET_NS after the last datagram, so a
 * conversation over packets keeps its pollers reading, and only the
 * first packet after such a spell waits for the engine thread's
 * wake-up. */
enum { ENGINE_SOCK_QUIET_NS = 100 * 1000 * 1000 };

bool srn_engine_sock_quiet(struct srn_engine *eng, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&eng->sock_rx_ns, memory_order_relaxed);

	return eng->thread_running && now - last >= ENGINE_SOCK_QUIET_NS &&
	       atomic_load_explicit(&eng->win_inflight[0], memory_order_relaxed) <= 0 &&
	       atomic_load_explicit(&eng->win_inflight[1], memory_order_relaxed) <= 0;
}

/* The engine removes the sockets from its set, then says so (park_socket);
 * it puts them back, then says so (arm_socket); a poller that finds the
 * flag up takes it down, then puts them back.  Every removal is followed
 * by the flag going up, so the flag is down only while the sockets are
 * in the set or the engine is reading them itself.  An engine that
 * deferred is woken by the next datagram as by srn_engine_kick_spin. */
void srn_engine_sock_unpark(struct srn_engine *eng)
{
	if (!atomic_load_explicit(&eng->sock_parked, memory_order_relaxed) ||
	    !atomic_exchange(&eng->sock_parked, false))
		return;
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_sock_unparks], 1, memory_order_relaxed);
	arm_fd(eng, eng->udp.fd, EPOLL_CTL_ADD);
	if (eng->roce.fd >= 0)
		arm_fd(eng, eng->roce.fd, EPOLL_CTL_ADD);
}

