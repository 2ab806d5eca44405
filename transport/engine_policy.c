/* transport/engine_policy: the receive-ownership state machine (see
 * engine_policy.h; the reasons for each duration are in docs/engine.md).
 * Pure: everything it knows comes in the arguments. */
#include "transport/engine_policy.h"

const char *const eng_rx_owner_names[ENG_RX_OWNERS] = {
	[ENG_RX_ENGINE] = "engine",
	[ENG_RX_LINGER] = "linger",
	[ENG_RX_DEFER] = "defer",
};

const char *const eng_rx_event_names[ENG_EVENTS] = {
	[ENG_EV_SOCKET] = "socket",
	[ENG_EV_STEP_END] = "step_end",
	[ENG_EV_TIMER] = "timer",
	[ENG_EV_LOOKED] = "looked",
	[ENG_EV_CQ_ARMED] = "cq_armed",
	[ENG_EV_IDLE] = "idle",
	[ENG_EV_DRAINED] = "drained",
	[ENG_EV_LINGER_TICK] = "linger_tick",
	[ENG_EV_LINGER_READ] = "linger_read",
	[ENG_EV_LINGER_FAIL] = "linger_fail",
};

static struct eng_rxp_out stay(const struct eng_rxp *p, unsigned int todo)
{
	return (struct eng_rxp_out){ *p, todo };
}

/* A deferral step of step ns from now. */
static struct eng_rxp_out defer_for(struct eng_rxp p, uint64_t now, uint64_t step,
				    unsigned int todo)
{
	p.owner = ENG_RX_DEFER;
	p.since = now;
	p.step = step;
	return (struct eng_rxp_out){ p, todo | ENG_DO_DEFER };
}

/* The engine takes the sockets back: drains them, then lingers or sleeps
 * on them (ENG_EV_DRAINED). */
static struct eng_rxp_out take_over(struct eng_rxp p)
{
	p.owner = ENG_RX_ENGINE;
	p.found_run = 0;
	return (struct eng_rxp_out){ p, ENG_DO_TAKE_OVER };
}

/* The last sign of an application thread at work: a poll or a send. */
static uint64_t app_active_ns(const struct eng_rxp_in *in)
{
	return in->app_poll_ns > in->app_send_ns ? in->app_poll_ns : in->app_send_ns;
}

/* A deferral step ended (watchdog: the engine's wait timed out at it; else
 * the QP timer woke the engine, maybe before it).  The next step is twice
 * as long, capped; the engine takes over when the whole step passed
 * without a sign of the application and it went away or waits for an
 * event; else it looks whether the application left packets (unless it
 * is polling or sending right now). */
static struct eng_rxp_out step_end(const struct eng_rxp *cur, const struct eng_rxp_in *in,
				   uint64_t now, bool watchdog)
{
	struct eng_rxp p = *cur;
	uint64_t step = p.step * 2, last = app_active_ns(in);

	if (p.owner != ENG_RX_DEFER)
		return stay(cur, ENG_DO_NOTHING);
	if (!watchdog && now < p.since + p.step)
		return stay(cur, ENG_DO_NOTHING); /* the step still runs */
	/* the QP list is looked at only for steps past the floor; steps stay
	 * at the floor a while after one found packets left behind */
	if (step > (in->inbox ? ENG_DEFER_MAX_SHM_NS : ENG_DEFER_FLOOR_NS)) {
		uint64_t max = p.found_ns && now - p.found_ns < ENG_FOUND_RECENT_NS ?
				       ENG_DEFER_FLOOR_NS : in->defer_max_ns(in->arg);

		if (step > max)
			step = max;
	}
	if (last <= p.since && (eng_app_gone(in->app_poll_ns, now) || in->cq_armed(in->arg)))
		return take_over(p);
	if (!eng_app_sending(in->app_send_ns, now) && !eng_app_polling(in->app_poll_ns, now)) {
		p.look_step = step;
		p.look_counts = last + ENG_APP_IDLE_NS <= now;
		return stay(&p, ENG_DO_LOOK);
	}
	p.found_run = 0;
	return defer_for(p, now, step, ENG_DO_NOTHING);
}

/* The look at a step's end: packets the application left there (it had
 * not polled for ENG_APP_IDLE_NS) make the next step short, and at two
 * step ends in a row the shortest (it spins on memory between polls). */
static struct eng_rxp_out looked(const struct eng_rxp *cur, const struct eng_rxp_in *in,
				 uint64_t now)
{
	struct eng_rxp p = *cur;
	uint64_t step = p.look_step;

	if (in->found && p.look_counts) {
		p.found_ns = now;
		if (step > ENG_DEFER_FLOOR_NS)
			step = ENG_DEFER_FLOOR_NS;
		if (++p.found_run >= 2)
			step = ENG_DEFER_MIN_NS;
	} else {
		p.found_run = 0;
	}
	return defer_for(p, now, step, ENG_DO_NOTHING);
}

/* The socket woke the engine.  Deferring, that means a poller handed it
 * back (the current step goes on, and the packet is read now); else an
 * application thread active within ENG_APP_IDLE_NS that waits for no
 * event gets the socket (the engine reads what is there unless the
 * application sends right now), and otherwise the engine takes over. */
static struct eng_rxp_out socket_ready(const struct eng_rxp *cur, const struct eng_rxp_in *in,
				       uint64_t now)
{
	bool kicked = cur->owner == ENG_RX_DEFER;

	if (app_active_ns(in) + ENG_APP_IDLE_NS > now && !in->cq_armed(in->arg)) {
		unsigned int todo = ENG_DO_PARK;

		if (kicked || !eng_app_sending(in->app_send_ns, now))
			todo |= ENG_DO_READ;
		return defer_for(*cur, now, kicked ? cur->step : ENG_DEFER_MIN_NS, todo);
	}
	return take_over(*cur);
}

/* About to sleep with a same-host inbox: while the application polls and
 * the inbox carries traffic, short steps (the engine takes the packets
 * when the application is off its CPU); else the inbox's sleeping flag. */
static struct eng_rxp_out idle(const struct eng_rxp *cur, const struct eng_rxp_in *in,
			       uint64_t now)
{
	if (!in->inbox || cur->owner == ENG_RX_DEFER)
		return stay(cur, ENG_DO_NOTHING);
	if (in->app_poll_ns + ENG_SHM_APP_NS > now && in->shm_rx_ns + ENG_SHM_RECENT_NS > now)
		return defer_for(*cur, now, ENG_DEFER_MIN_NS, ENG_DO_NOTHING);
	return stay(cur, ENG_DO_SLEEP);
}

static struct eng_rxp_out linger_end(struct eng_rxp p)
{
	p.owner = ENG_RX_ENGINE;
	return (struct eng_rxp_out){ p, ENG_DO_ARM };
}

/* After a takeover's drain: linger for linger_ns since the last packet,
 * if configured and a CPU is free; else sleep on the sockets. */
static struct eng_rxp_out drained(const struct eng_rxp *cur, const struct eng_rxp_in *in,
				  uint64_t now)
{
	struct eng_rxp p = *cur;

	if (!in->linger_ns || !in->cpu_free(in->arg))
		return linger_end(p);
	p.owner = ENG_RX_LINGER;
	p.linger_until = now + in->linger_ns;
	p.linger_idle = 0;
	return stay(&p, ENG_DO_PARK);
}

/* Lingering: read again, unless the time is up, an application thread
 * receives or sends, or (every 8th empty read) no CPU is free. */
static struct eng_rxp_out linger_tick(const struct eng_rxp *cur, const struct eng_rxp_in *in,
				      uint64_t now)
{
	struct eng_rxp p = *cur;

	if (p.owner != ENG_RX_LINGER)
		return stay(cur, ENG_DO_NOTHING);
	if (now >= p.linger_until)
		return linger_end(p);
	/* (unsigned: a poll stamped after now does not count here) */
	if (now - in->app_poll_ns < ENG_APP_ACTIVE_NS || eng_app_sending(in->app_send_ns, now))
		return linger_end(p);
	if (++p.linger_idle % 8 == 0 && !in->cpu_free(in->arg))
		return linger_end(p);
	return stay(&p, ENG_DO_LOOK);
}

static struct eng_rxp_out linger_read(const struct eng_rxp *cur, const struct eng_rxp_in *in,
				      uint64_t now)
{
	struct eng_rxp p = *cur;

	if (!in->found)
		return stay(&p, ENG_DO_YIELD);
	p.linger_until = now + in->linger_ns;
	p.linger_idle = 0;
	return stay(&p, ENG_DO_NOTHING);
}

struct eng_rxp_out eng_rxp_next(const struct eng_rxp *cur, enum eng_rx_event ev,
				const struct eng_rxp_in *in, uint64_t now)
{
	switch (ev) {
	case ENG_EV_SOCKET:
		return socket_ready(cur, in, now);
	case ENG_EV_STEP_END:
		return step_end(cur, in, now, true);
	case ENG_EV_TIMER:
		return step_end(cur, in, now, false);
	case ENG_EV_LOOKED:
		return looked(cur, in, now);
	case ENG_EV_CQ_ARMED:
		if (cur->owner == ENG_RX_DEFER && in->cq_armed(in->arg))
			return take_over(*cur);
		return stay(cur, ENG_DO_NOTHING);
	case ENG_EV_IDLE:
		return idle(cur, in, now);
	case ENG_EV_DRAINED:
		return drained(cur, in, now);
	case ENG_EV_LINGER_TICK:
		return linger_tick(cur, in, now);
	case ENG_EV_LINGER_READ:
		return linger_read(cur, in, now);
	case ENG_EV_LINGER_FAIL:
		return cur->owner == ENG_RX_LINGER ? linger_end(*cur) : stay(cur, ENG_DO_NOTHING);
	case ENG_EVENTS:
		break;
	}
	return stay(cur, ENG_DO_NOTHING);
}
