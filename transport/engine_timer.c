/* transport/engine_timer: QP deadlines (retransmit, RNR, ACK timeouts).
 * One timerfd per engine, programmed for the earliest deadline; whoever
 * runs the timers (the engine thread, or a polling application thread)
 * scans every QP once it has passed. */
#include <stdlib.h>
#include <sys/timerfd.h>
#include <time.h>

#include "transport/engine_priv.h"

/* Program the timerfd for at_ns unless it fires earlier already
 * (timer_lock held).  Costly on a VM: a deadline before the next
 * scheduler tick reprograms the clock event device (measured here: ~6 us
 * per timerfd_settime, ~0.3 us for one past the tick). */
static void timer_program_locked(struct srn_engine *eng, uint64_t at_ns)
{
	if (eng->timer_armed_ns == 0 || at_ns < eng->timer_armed_ns) {
		struct itimerspec its = { 0 };

		eng->timer_armed_ns = at_ns;
		its.it_value.tv_sec = (time_t)(at_ns / 1000000000ull);
		its.it_value.tv_nsec = (long)(at_ns % 1000000000ull);
		if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
			its.it_value.tv_nsec = 1;
		timerfd_settime(eng->tfd, TFD_TIMER_ABSTIME, &its, NULL);
	}
}

/* A QP deadline: the QPs are scanned once it has passed (run_qp_timers).
 * While the engine defers to an application thread that polls (or did
 * within ENG_APP_GONE_NS), that thread runs them
 * (srn_transport_progress) and the timer is left alone: a wake-up of the
 * engine thread would take a CPU from the poller, and setting a timer
 * costs ~6 us here; the deferral's step ends cover the case where the
 * application stops.
 * An earlier deadline already pending covers a later one without the
 * lock: its scan looks at every QP (under the QP's lock, which the caller
 * holds while it stores its deadline) and arms what is left; and the
 * engine programs the timer for it before it sleeps (timer_rearm). */
void srn_engine_arm(struct srn_engine *eng, uint64_t at_ns)
{
	uint64_t due = atomic_load_explicit(&eng->qp_due_ns, memory_order_relaxed);

	if (due && due <= at_ns)
		return;
	pthread_mutex_lock(&eng->timer_lock);
	if (!eng->qp_due_ns || at_ns < eng->qp_due_ns)
		atomic_store_explicit(&eng->qp_due_ns, at_ns, memory_order_relaxed);
	if (!atomic_load_explicit(&eng->deferring, memory_order_relaxed) ||
	    app_gone(eng, srn_now_ns()))
		timer_program_locked(eng, at_ns);
	pthread_mutex_unlock(&eng->timer_lock);
}


/* Every QP is looked at (under its lock, which an application thread may
 * hold) only once the earliest QP deadline has passed: the engine's
 * deferral steps fire far more often.  Any thread, no lock held. */
/* How soon a QP found locked by another thread is looked at again. */
#define TIMER_BUSY_RETRY_NS (200 * 1000ull)

void srn_engine_run_qp_timers(struct srn_engine *eng, uint64_t now)
{
	eng_roce6_retry(eng, now);
	struct srn_rc_state **snap;
	uint64_t next = 0, due;
	uint32_t n;

	due = atomic_load_explicit(&eng->qp_due_ns, memory_order_relaxed);
	if (!due || due > now)
		return;
	pthread_mutex_lock(&eng->timer_lock);
	due = eng->qp_due_ns;
	if (due && due <= now)
		atomic_store_explicit(&eng->qp_due_ns, 0, memory_order_relaxed);
	pthread_mutex_unlock(&eng->timer_lock);
	if (!due || due > now)
		return;

	pthread_mutex_lock(&eng->qps_lock);
	n = eng->n_all;
	snap = malloc(sizeof(*snap) * (n ? n : 1));
	if (!snap) {
		pthread_mutex_unlock(&eng->qps_lock);
		srn_engine_arm(eng, srn_now_ns() + 1000000);
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		snap[i] = eng->all[i];
		atomic_fetch_add(&snap[i]->inflight, 1);
	}
	pthread_mutex_unlock(&eng->qps_lock);

	/* O(QPs) per expiry: fine for hundreds; a timer wheel would fix it. */
	for (uint32_t i = 0; i < n; i++) {
		struct srn_rc_state *rc = snap[i];

		/* A QP whose lock a thread holds (in post_send, or between
		 * ibv_wr_start and ibv_wr_complete) is looked at again shortly:
		 * waiting for it here would stop this thread from reading the
		 * socket, and the other QPs' ACKs with it. */
		if (pthread_mutex_trylock(&rc->qp->lock)) {
			uint64_t t = srn_now_ns() + TIMER_BUSY_RETRY_NS;

			if (!next || t < next)
				next = t;
			eng_put_qp(rc);
			continue;
		}
		/* (an ACK left in the box first: no retry for what it acks) */
		completer_ack_box_take(rc);
		if (!rc->dead) {
			uint64_t t;

			now = srn_now_ns();
			t = completer_timer(rc, now);
			if (t && (!next || t < next))
				next = t;
		}
		srn_qp_unlock(rc->qp);
		eng_put_qp(rc);
	}
	free(snap);
	if (next)
		srn_engine_arm(eng, next);
}

/* The timerfd fired: nothing is programmed any more. */
void eng_timer_fired(struct srn_engine *eng)
{
	pthread_mutex_lock(&eng->timer_lock);
	eng->timer_armed_ns = 0;
	pthread_mutex_unlock(&eng->timer_lock);
	srn_engine_run_qp_timers(eng, srn_now_ns());
}

/* Before the engine sleeps: the timer must fire by the next QP deadline,
 * unless an application thread that polls takes care of it (see
 * srn_engine_arm). */
void eng_timer_rearm(struct srn_engine *eng)
{
	pthread_mutex_lock(&eng->timer_lock);
	if (eng->qp_due_ns && (!atomic_load_explicit(&eng->deferring, memory_order_relaxed) ||
			       app_gone(eng, srn_now_ns())))
		timer_program_locked(eng, eng->qp_due_ns);
	pthread_mutex_unlock(&eng->timer_lock);
}

