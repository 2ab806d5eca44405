/* transport/engine_policy: who reads the sockets, and when, as one pure
 * state machine (docs/engine.md draws it).  The engine thread owns one
 * struct eng_rxp; it reports what happened (an event) with what it knows
 * (struct eng_rxp_in) and the time, and gets back the next state and what
 * to do.  No clock, no lock, no system call here: engine_owner.c does the
 * work, tests/unit/test_engine_policy.c drives this with a fake clock.
 * The application threads' side of the same policy (when a poll reads the
 * socket, hands it back or yields) is here too, as pure predicates that
 * hooks.c asks. */
#ifndef TRANSPORT_ENGINE_POLICY_H
#define TRANSPORT_ENGINE_POLICY_H

#include <stdbool.h>
#include <stdint.h>

/* Who owns the sockets. */
enum eng_rx_owner {
	/* the engine thread: sockets armed in its epoll set, it reads them
	 * when woken */
	ENG_RX_ENGINE,
	/* the engine thread, polling them itself after work for a while
	 * (sockets out of the epoll set), before it sleeps again */
	ENG_RX_LINGER,
	/* an application thread that polls its CQ: it reads inline; the
	 * engine leaves the sockets out of its set and looks at each
	 * deferral step's end */
	ENG_RX_DEFER,
	ENG_RX_OWNERS
};

extern const char *const eng_rx_owner_names[ENG_RX_OWNERS];

/* What happened (engine thread). */
enum eng_rx_event {
	ENG_EV_SOCKET,      /* epoll: a socket is readable (while deferring: a
	                     * poller handed it back, srn_engine_kick_spin) */
	ENG_EV_STEP_END,    /* the wait timed out at the deferral step's end */
	ENG_EV_TIMER,       /* the QP timer fired (a step end only if it passed) */
	ENG_EV_LOOKED,      /* the look ENG_DO_LOOK asked for was done (in.found) */
	ENG_EV_CQ_ARMED,    /* an application armed a CQ (srn_transport_cq_armed) */
	ENG_EV_IDLE,        /* about to sleep, with a same-host inbox */
	ENG_EV_DRAINED,     /* a takeover's drain is done: linger or sleep */
	ENG_EV_LINGER_TICK, /* lingering: may it read once more? */
	ENG_EV_LINGER_READ, /* lingering: a read was done (in.found) */
	ENG_EV_LINGER_FAIL, /* lingering: rx_lock was busy, the read not done */
	ENG_EVENTS
};

extern const char *const eng_rx_event_names[ENG_EVENTS];

/* What the engine thread does next (bits; in this order). */
enum eng_rx_do {
	ENG_DO_NOTHING = 0,
	ENG_DO_DEFER = 1 << 0,     /* a deferral step starts: count it */
	ENG_DO_PARK = 1 << 1,      /* sockets out of the epoll set */
	ENG_DO_READ = 1 << 2,      /* one batch, waiting ENG_RX_WAIT_NS for rx_lock */
	ENG_DO_LOOK = 1 << 3,      /* one batch if rx_lock is free; then
	                            * ENG_EV_LOOKED, or lingering
	                            * ENG_EV_LINGER_READ / _FAIL */
	ENG_DO_TAKE_OVER = 1 << 4, /* count it, drain the sockets, then
	                            * ENG_EV_DRAINED */
	ENG_DO_ARM = 1 << 5,       /* the linger (if any) ends: the sockets
	                            * back in the set, armed */
	ENG_DO_YIELD = 1 << 6,     /* lingering, nothing came: sched_yield */
	ENG_DO_SLEEP = 1 << 7,     /* raise the inbox's sleeping flag */
};

/* The policy's state: the engine thread's alone. */
struct eng_rxp {
	enum eng_rx_owner owner;
	unsigned int found_run;      /* step ends in a row that found packets
	                              * the application left in the socket */
	uint64_t found_ns;           /* the last such step end */
	uint64_t since;              /* start of the current deferral step */
	uint64_t step;               /* its length */
	uint64_t linger_until;       /* ENG_RX_LINGER: the linger's end */
	unsigned int linger_idle;    /* its reads in a row that found nothing */
	uint64_t look_step;          /* ENG_DO_LOOK: the step to go on with */
	bool look_counts;            /* and whether a find counts */
};

/* What the engine knows when it reports.  Inputs that cost a scan of the
 * QP list or a read of /proc are asked for only when a decision needs
 * them (as the code did before this module): a callback each. */
struct eng_rxp_in {
	uint64_t app_poll_ns;        /* an application thread's last poll */
	uint64_t app_send_ns;        /* and its last send that sent packets */
	uint64_t shm_rx_ns;          /* last packet from the inbox (ENG_EV_IDLE) */
	bool inbox;                  /* the engine has a same-host inbox */
	bool found;                  /* ENG_EV_LOOKED, _LINGER_READ: packets read */
	uint64_t linger_ns;          /* SOFTRNIC_ENGINE_SPIN_US or its default */
	bool (*cq_armed)(void *arg);      /* an application waits for an event */
	uint64_t (*defer_max_ns)(void *arg); /* longest step for the QPs' timeouts */
	bool (*cpu_free)(void *arg);      /* a CPU is free to spin on */
	void *arg;
};

struct eng_rxp_out {
	struct eng_rxp next;
	unsigned int todo;           /* enum eng_rx_do bits */
};

/* The transition function: pure. */
struct eng_rxp_out eng_rxp_next(const struct eng_rxp *cur, enum eng_rx_event ev,
				const struct eng_rxp_in *in, uint64_t now);

/* The end of the engine's wait: the current step's, 0 when none. */
static inline uint64_t eng_rxp_step_end(const struct eng_rxp *p)
{
	return p->owner == ENG_RX_DEFER ? p->since + p->step : 0;
}

/* Durations the policy uses (ns); docs/engine.md gives their reasons. */
enum {
	ENG_APP_ACTIVE_NS = 10 * 1000,
	ENG_APP_SEND_NS = 50 * 1000,
	ENG_APP_IDLE_NS = 50 * 1000,
	ENG_APP_GONE_NS = 1000 * 1000,
	ENG_DEFER_MIN_NS = 10 * 1000,
	ENG_DEFER_MAX_NS = 4000 * 1000,
	ENG_DEFER_FLOOR_NS = 1000 * 1000,
	ENG_DEFER_MAX_SHM_NS = 200 * 1000,
	ENG_FOUND_RECENT_NS = 100 * 1000 * 1000,
	ENG_RX_WAIT_NS = 5 * 1000,
	ENG_SHM_RECENT_NS = 10 * 1000 * 1000,
	ENG_SHM_APP_NS = 1000 * 1000,
	ENG_SOCK_QUIET_NS = 100 * 1000 * 1000,
	ENG_LINGER_NS = 30 * 1000,
};

/* ---- the application threads' side (hooks.c, engine_timer.c) -------------- */

/* An application thread polls now (its stamp may be later than now). */
static inline bool eng_app_polling(uint64_t app_poll_ns, uint64_t now)
{
	return app_poll_ns + ENG_APP_ACTIVE_NS > now;
}

/* It has not polled for ENG_APP_GONE_NS: it stopped, as opposed to a
 * poller the scheduler took off its CPU for a while. */
static inline bool eng_app_gone(uint64_t app_poll_ns, uint64_t now)
{
	return app_poll_ns + ENG_APP_GONE_NS <= now;
}

/* It sent within ENG_APP_SEND_NS: likely in post_send again. */
static inline bool eng_app_sending(uint64_t app_send_ns, uint64_t now)
{
	return app_send_ns + ENG_APP_SEND_NS > now;
}

/* May a poll leave the sockets alone: nothing read for
 * ENG_SOCK_QUIET_NS, no RC packet of ours awaiting its response, and an
 * engine thread to watch them. */
static inline bool eng_sock_quiet(bool engine_thread, uint64_t sock_rx_ns, int inflight_here,
				  int inflight_away, uint64_t now)
{
	return engine_thread && now - sock_rx_ns >= ENG_SOCK_QUIET_NS && inflight_here <= 0 &&
	       inflight_away <= 0;
}

/* After a poll's receive: hand the sockets back to a deferring engine (a
 * plain ACK alone emptied the send queue of a QP conversing over
 * one-sided operations, and the application may now spin on memory). */
static inline bool eng_poll_kicks(bool ack_drained, uint32_t requests)
{
	return ack_drained && !requests;
}

/* With same-host traffic in the last ENG_SHM_RECENT_NS, a poll reads the
 * socket only after a gap since its last look there: 0 while socket reads
 * bring packets, else doubling from ENG_POLL_SOCK_MIN_NS up to
 * ENG_POLL_SOCK_MAX_NS.  A recvmmsg costs more than a whole ring round
 * trip, and a packet that arrives while the poller is in it waits. */
enum { ENG_POLL_SOCK_MIN_NS = 20 * 1000, ENG_POLL_SOCK_MAX_NS = 160 * 1000 };

static inline bool eng_poll_skips_sock(uint64_t shm_rx_ns, uint64_t last_look, uint64_t gap,
				       uint64_t now)
{
	/* (the inbox's stamp may be later than now) */
	return shm_rx_ns + ENG_SHM_RECENT_NS > now && now - last_look < gap;
}

/* The gap after a socket read that got packets, or none. */
static inline uint64_t eng_poll_sock_gap(uint64_t gap, bool got)
{
	gap *= 2;
	if (got)
		return 0;
	return gap < ENG_POLL_SOCK_MIN_NS ? ENG_POLL_SOCK_MIN_NS :
	       gap > ENG_POLL_SOCK_MAX_NS ? ENG_POLL_SOCK_MAX_NS : gap;
}

/* A poll whose socket reads found nothing ENG_POLL_YIELD_EVERY times in a
 * row yields its CPU once (run: that count, after this poll). */
enum { ENG_POLL_YIELD_EVERY = 32 };

static inline bool eng_poll_yields(unsigned int empty_run)
{
	return empty_run % ENG_POLL_YIELD_EVERY == 0;
}

#endif
