/* transport/engine_*.c share these: the engine's parts (see
 * docs/engine.md for the map).  Not for the rest of transport/: its
 * interface is engine.h. */
#ifndef TRANSPORT_ENGINE_PRIV_H
#define TRANSPORT_ENGINE_PRIV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "transport/engine.h"
#include "transport/rc.h"

/* ---- what the application threads show the engine ------------------------ */

/* The application polls now: its last poll is under ENGINE_APP_ACTIVE_NS
 * old (its stamp may be later than now). */
enum { ENGINE_APP_ACTIVE_NS = 10 * 1000 };

static inline bool app_polling(struct srn_engine *eng, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&eng->app_poll_ns, memory_order_relaxed);

	return last + ENGINE_APP_ACTIVE_NS > now;
}

/* The application has not polled for ENGINE_APP_GONE_NS: it stopped (it
 * sleeps, computes, or spins on memory), as opposed to a poller that the
 * scheduler took off its CPU for a while, which on a 2-CPU host with two
 * spinning applications happens every few milliseconds for 50-500 us.
 * Mistaking the second for the first costs: the engine then takes the
 * socket back, every packet wakes it, and each wake-up takes a CPU from
 * a poller. */
enum { ENGINE_APP_GONE_NS = 1000 * 1000 };

static inline bool app_gone(struct srn_engine *eng, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&eng->app_poll_ns, memory_order_relaxed);

	return last + ENGINE_APP_GONE_NS <= now;
}

/* An application thread posted sends that left within
 * ENGINE_APP_ACTIVE_NS: it is likely in post_send again, holding the QP
 * lock for the next message's packets (a 64 KiB WRITE: ~10 us), and will
 * poll its CQ, which receives, once its queue is full (ENGINE_APP_SEND_NS:
 * a few messages' time).  The engine thread
 * then does not receive: a response would only wait for that lock, and
 * unlocking it would cost the sender a futex wake per message. */
enum { ENGINE_APP_SEND_NS = 50 * 1000 };

static inline bool app_sending(struct srn_engine *eng, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&eng->app_send_ns, memory_order_relaxed);

	return last + ENGINE_APP_SEND_NS > now;
}

/* The last sign of an application thread at work: a poll or a send. */
static inline uint64_t app_active_ns(struct srn_engine *eng)
{
	uint64_t p = atomic_load_explicit(&eng->app_poll_ns, memory_order_relaxed);
	uint64_t s = atomic_load_explicit(&eng->app_send_ns, memory_order_relaxed);

	return p > s ? p : s;
}

/* ---- QP table (engine_qps.c) ---------------------------------------------- */

/* Get a QP by number and pin it (inflight) so destroy waits for us. */
static inline struct srn_rc_state *eng_get_qp(struct srn_engine *eng, uint32_t qpn)
{
	struct srn_rc_state *rc = NULL;

	if (qpn >= NET_REG_SLOTS)
		return NULL;
	pthread_mutex_lock(&eng->qps_lock);
	rc = eng->by_qpn[qpn];
	if (rc)
		atomic_fetch_add(&rc->inflight, 1);
	pthread_mutex_unlock(&eng->qps_lock);
	return rc;
}

static inline void eng_put_qp(struct srn_rc_state *rc)
{
	atomic_fetch_sub(&rc->inflight, 1);
}


/* ---- receive ownership (engine_owner.c) ----------------------------------- */

/* The engine thread's own view of who reads the sockets. */
struct engine_defer {
	bool on;                     /* socket left disarmed */
	bool parked;                 /* sockets out of the epoll set */
	unsigned int found_run;      /* step ends in a row that found packets
	                              * the application left in the socket */
	uint64_t found_ns;           /* the last such step end */
	uint64_t since;              /* start of the current deferral */
	uint64_t step;               /* its length */
};

/* The engine thread's receive: the socket ready (fresh: epoll said so) or
 * a deferral step's end (watchdog: the wait timed out at it). */
void eng_socket_ready(struct srn_engine *eng, struct engine_defer *d, bool fresh,
		      bool watchdog);
/* The CQ-armed eventfd fired. */
void eng_cq_armed_kick(struct srn_engine *eng, struct engine_defer *d);
/* Before the engine blocks with a same-host inbox (see its comment). */
int eng_shm_idle(struct srn_engine *eng, struct engine_defer *d);

/* ---- receive path (engine_rx.c) ------------------------------------------- */

/* This thread is eng's engine thread (eng_main's first instruction). */
void eng_rx_set_thread(const struct srn_engine *eng);

/* ---- timers (engine_timer.c) ---------------------------------------------- */

void eng_timer_fired(struct srn_engine *eng);
void eng_timer_rearm(struct srn_engine *eng);

/* ---- port 4791 (engine_roce.c) -------------------------------------------- */

void eng_roce_settle(struct srn_engine *eng);
void eng_roce_try(struct srn_engine *eng);
void eng_roce_watch_event(struct srn_engine *eng, uint32_t ev);
void eng_roce_retry_due(struct srn_engine *eng);

/* ---- thread and settings (engine_start.c, engine_main.c) ------------------ */

/* SOFTRNIC_ENGINE_SPIN_US and the CPUs we may run on, read once before
 * any engine thread reads them (eng_thread_setup). */
extern uint64_t eng_linger_ns;
extern int eng_linger_ncpu;

/* The engine thread's scheduling and settings (first thing it does). */
void eng_thread_setup(struct srn_engine *eng);
int eng_epoll_add(int epfd, int fd, uint32_t events);
void *eng_main(void *arg);

#endif
