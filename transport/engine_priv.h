/* transport/engine_*.c share these: the engine's parts (see
 * docs/engine.md for the map).  Not for the rest of transport/: its
 * interface is engine.h. */
#ifndef TRANSPORT_ENGINE_PRIV_H
#define TRANSPORT_ENGINE_PRIV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "transport/engine.h"
#include "transport/engine_policy.h"
#include "transport/rc.h"

/* ---- what the application threads show the engine ------------------------ */

static inline bool app_gone(struct srn_engine *eng, uint64_t now)
{
	return eng_app_gone(atomic_load_explicit(&eng->app_poll_ns, memory_order_relaxed), now);
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
	struct eng_rxp pol;          /* the policy's state (engine_policy.h) */
	bool parked;                 /* sockets out of the epoll set */
};

/* What woke the engine thread, for the receive policy: ENG_EV_SOCKET,
 * _STEP_END, _TIMER or _CQ_ARMED. */
void eng_rx_event(struct srn_engine *eng, struct engine_defer *d, enum eng_rx_event ev);
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
/* [IPv6]:4791: wanted (a QP talks to another host and we lack it), and
 * the bind retried at most every ROCE6_RETRY_NS (any thread). */
#define ROCE6_RETRY_NS (100 * 1000 * 1000ull)
bool eng_roce6_wanted(struct srn_engine *eng);
void eng_roce6_retry(struct srn_engine *eng, uint64_t now);

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
