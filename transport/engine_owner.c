/* transport/engine_owner: who reads the sockets, and when: the engine
 * thread's side.  transport/engine_policy.c decides (pure); this file
 * does what it decides: drains, parks and arms the sockets, lingers, and
 * gives the policy its inputs (docs/engine.md). */
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
	if (eng->udp6.fd >= 0)
		arm_fd(eng, eng->udp6.fd, op);
	if (eng->roce6.fd >= 0)
		arm_fd(eng, eng->roce6.fd, op);
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
	if (eng->udp6.fd >= 0)
		epoll_ctl(eng->epfd, EPOLL_CTL_DEL, eng->udp6.fd, NULL);
	if (eng->roce6.fd >= 0)
		epoll_ctl(eng->epfd, EPOLL_CTL_DEL, eng->roce6.fd, NULL);
	if (eng->roce.fd >= 0)
		epoll_ctl(eng->epfd, EPOLL_CTL_DEL, eng->roce.fd, NULL);
	/* (after the removal: see srn_engine_sock_unpark) */
	atomic_store(&eng->sock_parked, true);
}

/* The longest deferral step now (see ENG_DEFER_MAX_NS). */
static uint64_t defer_max_ns(void *arg)
{
	struct srn_engine *eng = arg;
	uint64_t max = ENG_DEFER_MAX_NS;

	if (eng->inbox)
		return ENG_DEFER_MAX_SHM_NS;
	pthread_mutex_lock(&eng->qps_lock);
	for (uint32_t i = 0; i < eng->n_all; i++) {
		/* 0: waits for ever; a hint, read without the QP's lock */
		uint64_t t = __atomic_load_n(&eng->all[i]->timeout_ns, __ATOMIC_RELAXED);

		if (t && t / 2 < max)
			max = t / 2;
	}
	pthread_mutex_unlock(&eng->qps_lock);
	return max < ENG_DEFER_FLOOR_NS ? ENG_DEFER_FLOOR_NS : max;
}

/* Is an application thread waiting for a completion event (one of our
 * QPs' CQs is armed)?  Then it sleeps in its completion channel rather
 * than polling, and the engine must take every packet at once. */
static bool app_waits_event(void *arg)
{
	struct srn_engine *eng = arg;
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
static bool cpu_is_free(void *arg)
{
	char buf[128];
	ssize_t n;
	const char *p;
	int field = 0;

	(void)arg;

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


/* What the engine knows for the policy: the application threads' stamps
 * now, the costly inputs as callbacks. */
static struct eng_rxp_in policy_inputs(struct srn_engine *eng)
{
	return (struct eng_rxp_in){
		.app_poll_ns = atomic_load_explicit(&eng->app_poll_ns, memory_order_relaxed),
		.app_send_ns = atomic_load_explicit(&eng->app_send_ns, memory_order_relaxed),
		.inbox = eng->inbox != NULL,
		.linger_ns = eng_linger_ns,
		.cq_armed = app_waits_event,
		.defer_max_ns = defer_max_ns,
		.cpu_free = cpu_is_free,
		.arg = eng,
	};
}

/* Take the policy's next state; the deferring flag the application
 * threads read follows it. */
static unsigned int policy_apply(struct srn_engine *eng, struct engine_defer *d,
				 struct eng_rxp_out out)
{
	bool was = d->pol.owner == ENG_RX_DEFER, now_deferring = out.next.owner == ENG_RX_DEFER;

	d->pol = out.next;
	if (was != now_deferring || (out.todo & ENG_DO_DEFER))
		atomic_store_explicit(&eng->deferring, now_deferring, memory_order_relaxed);
	if (out.todo & ENG_DO_DEFER)
		atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_defers], 1,
					  memory_order_relaxed);
	return out.todo;
}

static void take_over(struct srn_engine *eng, struct engine_defer *d);

/* Report ev to the policy (in: what the engine knew) and do its bidding. */
static void policy_run(struct srn_engine *eng, struct engine_defer *d, enum eng_rx_event ev,
		       struct eng_rxp_in *in, uint64_t now)
{
	unsigned int todo = policy_apply(eng, d, eng_rxp_next(&d->pol, ev, in, now));

	if (todo & ENG_DO_PARK)
		park_socket(eng, d);
	if (todo & ENG_DO_READ)
		engine_rx_try(eng, ENG_RX_WAIT_NS);
	if (todo & ENG_DO_LOOK) {
		/* a step's end: did the application leave packets? */
		in->found = engine_rx_try(eng, 0) > 0;
		policy_apply(eng, d, eng_rxp_next(&d->pol, ENG_EV_LOOKED, in, now));
	}
	if (todo & ENG_DO_TAKE_OVER)
		take_over(eng, d);
}

/* Lingering (the policy's ENG_RX_LINGER): read the sockets ourselves,
 * out of the epoll set, until the policy says stop. */
static void engine_linger(struct srn_engine *eng, struct engine_defer *d)
{
	struct eng_rxp_in in = policy_inputs(eng);
	uint64_t now = srn_now_ns();
	unsigned int todo;

	todo = policy_apply(eng, d, eng_rxp_next(&d->pol, ENG_EV_DRAINED, &in, now));
	if (!(todo & ENG_DO_PARK))
		return;
	park_socket(eng, d);
	for (;;) {
		int n;

		in = policy_inputs(eng);
		todo = policy_apply(eng, d, eng_rxp_next(&d->pol, ENG_EV_LINGER_TICK, &in, now));
		if (!(todo & ENG_DO_LOOK))
			break;
		if (pthread_mutex_trylock(&eng->rx_lock)) {
			policy_apply(eng, d, eng_rxp_next(&d->pol, ENG_EV_LINGER_FAIL, &in, now));
			break;
		}
		n = srn_engine_rx_batch(eng);
		pthread_mutex_unlock(&eng->rx_lock);
		now = srn_now_ns();
		in.found = n > 0;
		todo = policy_apply(eng, d, eng_rxp_next(&d->pol, ENG_EV_LINGER_READ, &in, now));
		if (todo & ENG_DO_YIELD) {
			/* nothing came: the CPU to whoever waits for it */
			sched_yield();
			now = srn_now_ns();
		}
	}
	/* (our own list: no lock needed to send what full batches left) */
	srn_engine_rx_done(eng);
}

/* The engine takes the sockets back: reads, lingers, then sleeps on them. */
static void take_over(struct srn_engine *eng, struct engine_defer *d)
{
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_takeovers], 1, memory_order_relaxed);
	engine_rx(eng);
	engine_linger(eng, d);
	arm_socket(eng, d);
}

void eng_rx_event(struct srn_engine *eng, struct engine_defer *d, enum eng_rx_event ev)
{
	struct eng_rxp_in in;

	/* (a socket event while deferring: a poller put the sockets back in
	 * the set, srn_engine_kick_spin) */
	if (ev == ENG_EV_SOCKET && d->pol.owner == ENG_RX_DEFER)
		d->parked = false;
	/* (but for the socket, events matter only while deferring: no clock
	 * read otherwise) */
	if (ev != ENG_EV_SOCKET && d->pol.owner != ENG_RX_DEFER)
		return;
	in = policy_inputs(eng);
	policy_run(eng, d, ev, &in, srn_now_ns());
}

/* Same-host inbox: before the engine blocks, make sure no packet can sit
 * in it while nobody looks (net/shm_ring.c, "Waking the consumer"): the
 * policy either defers (the application drains it) or has the engine
 * raise the inbox's sleeping flag, so the next sender rings the doorbell,
 * and check the lanes once more.  Returns 1 when the flag is up, 0 when a
 * step's end will wake us, -1 when packets were waiting (processed: look
 * again). */
int eng_shm_idle(struct srn_engine *eng, struct engine_defer *d)
{
	struct eng_rxp_in in;
	unsigned int todo;

	if (!eng->inbox || d->pol.owner == ENG_RX_DEFER)
		return 0;
	in = policy_inputs(eng);
	in.shm_rx_ns = atomic_load_explicit(&eng->shm_rx_ns, memory_order_relaxed);
	todo = policy_apply(eng, d, eng_rxp_next(&d->pol, ENG_EV_IDLE, &in, srn_now_ns()));
	if (!(todo & ENG_DO_SLEEP))
		return 0;
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
 * the peer's next packet wakes the engine, and the policy (ENG_EV_SOCKET) reads it at
 * once.  Not an eventfd write that wakes the engine now, as
 * srn_transport_cq_armed does: that cost a wake-up per kick and a new
 * ramp of short deferral steps, each taking a CPU from a spinner (UDP
 * ib_write_lat, 3 runs each: average 3.8-4.4 us and 99th percentile
 * 27-40 us that way, 2.9-3.1 and 7-15 this way).  From any thread: the
 * engine copes with the socket in the set while it thinks it parked it
 * (arm_fd's EEXIST, eng_rx_event).  A taken-over 4791 socket (cross-host
 * traffic, rare) is left to the step's end. */
void srn_engine_kick_spin(struct srn_engine *eng)
{
	if (!atomic_load_explicit(&eng->deferring, memory_order_relaxed))
		return;
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_spin_kicks], 1, memory_order_relaxed);
	arm_fd(eng, eng->udp.fd, EPOLL_CTL_ADD);
	if (eng->udp6.fd >= 0)
		arm_fd(eng, eng->udp6.fd, EPOLL_CTL_ADD);
	if (eng->roce6.fd >= 0)
		arm_fd(eng, eng->roce6.fd, EPOLL_CTL_ADD);
	if (eng->roce.fd >= 0 && atomic_load_explicit(&eng->remote_qps, memory_order_relaxed) > 0)
		arm_fd(eng, eng->roce.fd, EPOLL_CTL_ADD);
}

/* Quiet sockets (srn_engine_sock_quiet): an application thread that polls
 * an empty CQ whose completions come by the direct path (a peer's WRITEs
 * land in memory it spins on; its send CQ while it posts unsignaled
 * sends, as UCX does) would otherwise make a recvmmsg that finds nothing
 * on every poll, costlier than the peer's whole delivery.  The quiet
 * spell starts ENG_SOCK_QUIET_NS after the last datagram, so a
 * conversation over packets keeps its pollers reading, and only the
 * first packet after such a spell waits for the engine thread's
 * wake-up. */
bool srn_engine_sock_quiet(struct srn_engine *eng, uint64_t now)
{
	return eng_sock_quiet(eng->thread_running,
			      atomic_load_explicit(&eng->sock_rx_ns, memory_order_relaxed),
			      atomic_load_explicit(&eng->win_inflight[0], memory_order_relaxed),
			      atomic_load_explicit(&eng->win_inflight[1], memory_order_relaxed),
			      now);
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
	if (eng->udp6.fd >= 0)
		arm_fd(eng, eng->udp6.fd, EPOLL_CTL_ADD);
	if (eng->roce6.fd >= 0)
		arm_fd(eng, eng->roce6.fd, EPOLL_CTL_ADD);
	if (eng->roce.fd >= 0)
		arm_fd(eng, eng->roce.fd, EPOLL_CTL_ADD);
}

