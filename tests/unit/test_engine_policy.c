/* The receive-ownership policy (transport/engine_policy.h) driven with a
 * fake clock and fake application threads, one transition at a time:
 *  - a socket wake-up while the application polls: defer (shortest step),
 *    read unless it sends; while it is idle or waits for an event: take
 *    over
 *  - spin kick: a socket wake-up while deferring keeps the step and reads
 *    even while the application sends
 *  - step ends: the ramp doubles to the cap (the QPs' timeouts, the
 *    inbox's), a QP timer before the end changes nothing, a look that
 *    finds packets left behind shortens the steps (twice in a row: the
 *    shortest), the cap stays at the floor for a while after a find
 *  - takeover when the application stopped (gone, or a CQ armed) and not
 *    for a poller only off its CPU
 *  - CQ-arm kick, the same-host inbox's idle (defer or sleep), the linger
 *    (start, go on, stop on a poll, a send, a busy CPU, time up, rx_lock)
 *  - the application side: quiet peer, spin kick and yield predicates
 *  - costly inputs are asked for only when they decide; every state and
 *    event has a name
 * Pure functions: no thread, no time taken, nothing to bound. */
#include <string.h>

#include "tests/lib/t_util.h"
#include "transport/engine_policy.h"

enum { US = 1000, MS = 1000 * 1000 };

/* The fake engine around the policy: its costly inputs, counted. */
static bool armed, cpu_free_now = true;
static uint64_t defer_max = 4 * MS;
static int asked_armed, asked_max, asked_cpu;

static bool fake_cq_armed(void *arg)
{
	(void)arg;
	asked_armed++;
	return armed;
}

static uint64_t fake_defer_max(void *arg)
{
	(void)arg;
	asked_max++;
	return defer_max;
}

static bool fake_cpu_free(void *arg)
{
	(void)arg;
	asked_cpu++;
	return cpu_free_now;
}

static struct eng_rxp_in inputs(uint64_t poll, uint64_t send)
{
	return (struct eng_rxp_in){
		.app_poll_ns = poll,
		.app_send_ns = send,
		.linger_ns = ENG_LINGER_NS,
		.cq_armed = fake_cq_armed,
		.defer_max_ns = fake_defer_max,
		.cpu_free = fake_cpu_free,
	};
}

static struct eng_rxp deferring(uint64_t since, uint64_t step)
{
	return (struct eng_rxp){ .owner = ENG_RX_DEFER, .since = since, .step = step };
}

static void reset_fakes(void)
{
	armed = false;
	cpu_free_now = true;
	defer_max = 4 * MS;
	asked_armed = asked_max = asked_cpu = 0;
}

static void test_names(void)
{
	for (int i = 0; i < ENG_RX_OWNERS; i++) {
		T_CHECK(eng_rx_owner_names[i] && eng_rx_owner_names[i][0], "state %d named", i);
		for (int j = 0; j < i; j++)
			T_CHECK(strcmp(eng_rx_owner_names[i], eng_rx_owner_names[j]),
				"states %d and %d named apart", i, j);
	}
	for (int i = 0; i < ENG_EVENTS; i++) {
		T_CHECK(eng_rx_event_names[i] && eng_rx_event_names[i][0], "event %d named", i);
		for (int j = 0; j < i; j++)
			T_CHECK(strcmp(eng_rx_event_names[i], eng_rx_event_names[j]),
				"events %d and %d named apart", i, j);
	}
}

/* The engine owns the sockets and one wakes it. */
static void test_socket_from_engine(void)
{
	struct eng_rxp p = { .owner = ENG_RX_ENGINE };
	uint64_t now = 100 * MS;
	struct eng_rxp_in in = inputs(now - 20 * US, 0);
	struct eng_rxp_out o;

	reset_fakes();
	o = eng_rxp_next(&p, ENG_EV_SOCKET, &in, now);
	T_CHECK(o.next.owner == ENG_RX_DEFER && o.next.since == now &&
		o.next.step == ENG_DEFER_MIN_NS, "a poller active 20 us ago gets the socket: %s %llu",
		eng_rx_owner_names[o.next.owner], (unsigned long long)o.next.step);
	T_CHECK(o.todo == (ENG_DO_DEFER | ENG_DO_PARK | ENG_DO_READ),
		"defer, park and read what is there: %#x", o.todo);
	T_CHECK(asked_armed == 1, "armed CQs asked once: %d", asked_armed);

	in = inputs(now - 20 * US, now - 10 * US);
	o = eng_rxp_next(&p, ENG_EV_SOCKET, &in, now);
	T_CHECK(o.next.owner == ENG_RX_DEFER && o.todo == (ENG_DO_DEFER | ENG_DO_PARK),
		"the application sends: defer without reading (%#x)", o.todo);

	/* a send alone counts as activity */
	in = inputs(0, now - 30 * US);
	o = eng_rxp_next(&p, ENG_EV_SOCKET, &in, now);
	T_CHECK(o.next.owner == ENG_RX_DEFER, "a sender active 30 us ago gets the socket");

	reset_fakes();
	in = inputs(now - ENG_APP_IDLE_NS, now - ENG_APP_IDLE_NS);
	o = eng_rxp_next(&p, ENG_EV_SOCKET, &in, now);
	T_CHECK(o.next.owner == ENG_RX_ENGINE && o.todo == ENG_DO_TAKE_OVER,
		"idle for %d us: take over (%#x)", ENG_APP_IDLE_NS / US, o.todo);
	T_CHECK(asked_armed == 0, "armed CQs not asked when idle decides: %d", asked_armed);

	armed = true;
	in = inputs(now - 1 * US, 0);
	o = eng_rxp_next(&p, ENG_EV_SOCKET, &in, now);
	T_CHECK(o.next.owner == ENG_RX_ENGINE && o.todo == ENG_DO_TAKE_OVER,
		"an application waiting for an event: take over");
}

/* A poller put the sockets back in the set (srn_engine_kick_spin). */
static void test_spin_kick(void)
{
	uint64_t now = 200 * MS;
	struct eng_rxp p = deferring(now - 300 * US, 640 * US);
	struct eng_rxp_in in = inputs(now - 5 * US, now - 1 * US);
	struct eng_rxp_out o;

	reset_fakes();
	p.found_run = 1;
	o = eng_rxp_next(&p, ENG_EV_SOCKET, &in, now);
	T_CHECK(o.next.owner == ENG_RX_DEFER && o.next.step == 640 * US && o.next.since == now,
		"kicked: the step goes on from now (%llu us)",
		(unsigned long long)(o.next.step / US));
	T_CHECK(o.todo == (ENG_DO_DEFER | ENG_DO_PARK | ENG_DO_READ),
		"kicked: read even while the application sends (%#x)", o.todo);
	T_CHECK(o.next.found_run == 1, "kicked: the found run is kept");

	in = inputs(now - 2 * MS, 0);
	o = eng_rxp_next(&p, ENG_EV_SOCKET, &in, now);
	T_CHECK(o.next.owner == ENG_RX_ENGINE && o.todo == ENG_DO_TAKE_OVER &&
		o.next.found_run == 0, "kicked by a poller gone since: take over");
}

/* A deferral ramp with an application that polls all along. */
static void test_ramp(void)
{
	uint64_t now = 1000 * MS;
	struct eng_rxp p = deferring(now, ENG_DEFER_MIN_NS);
	struct eng_rxp_out o;
	uint64_t want = ENG_DEFER_MIN_NS;
	int steps = 0;

	reset_fakes();
	defer_max = 2 * MS;
	for (int i = 0; i < 20; i++) {
		struct eng_rxp_in in;

		now = p.since + p.step;
		in = inputs(now - 2 * US, 0); /* polling right now */
		o = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now);
		want = want * 2 > defer_max ? defer_max : want * 2;
		T_CHECK(o.next.owner == ENG_RX_DEFER && o.todo == ENG_DO_DEFER &&
			o.next.step == want, "step %d: %llu us, want %llu", i,
			(unsigned long long)(o.next.step / US), (unsigned long long)(want / US));
		p = o.next;
		steps++;
	}
	T_CHECK(p.step == 2 * MS, "the ramp ends at the QPs' cap: %llu us",
		(unsigned long long)(p.step / US));
	T_CHECK(asked_armed == 0, "a poller never has its CQs asked about: %d", asked_armed);
	T_CHECK(asked_max > 0 && asked_max < steps, "the cap asked only past the floor: %d of %d",
		asked_max, steps);

	/* the inbox's cap: its steps are short, and capped past 200 us */
	reset_fakes();
	defer_max = ENG_DEFER_MAX_SHM_NS;
	p = deferring(now, 160 * US);
	now += 160 * US;
	{
		struct eng_rxp_in in = inputs(now - 1 * US, 0);

		in.inbox = true;
		o = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now);
	}
	T_CHECK(o.next.step == ENG_DEFER_MAX_SHM_NS && asked_max == 1,
		"with an inbox, 320 us capped to %d us", ENG_DEFER_MAX_SHM_NS / US);
}

/* The QP timer fired during a step, or after it. */
static void test_timer(void)
{
	uint64_t since = 50 * MS, now = since + 5 * US;
	struct eng_rxp p = deferring(since, 40 * US);
	struct eng_rxp_in in = inputs(now - 1 * US, 0);
	struct eng_rxp_out o;

	reset_fakes();
	o = eng_rxp_next(&p, ENG_EV_TIMER, &in, now);
	T_CHECK(o.todo == ENG_DO_NOTHING && !memcmp(&o.next, &p, sizeof(p)),
		"a QP timer mid-step changes nothing");
	now = since + 40 * US;
	in = inputs(now - 1 * US, 0);
	o = eng_rxp_next(&p, ENG_EV_TIMER, &in, now);
	T_CHECK(o.next.step == 80 * US && o.next.since == now, "a QP timer at the end: next step");
	/* the wait's timeout is the step end even a little early */
	o = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now - 2 * US);
	T_CHECK(o.next.step == 80 * US && o.next.since == now - 2 * US,
		"the wait timed out 2 us early: next step all the same");
	p.owner = ENG_RX_ENGINE;
	o = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now);
	T_CHECK(o.todo == ENG_DO_NOTHING, "no step end while the engine owns the socket");
}

/* The application stopped polling: gone, waiting on an event, or only
 * off its CPU for a moment. */
static void test_takeover(void)
{
	uint64_t since = 70 * MS;
	struct eng_rxp p = deferring(since, 1 * MS);
	uint64_t now = since + 1 * MS;
	struct eng_rxp_in in = inputs(since - 1 * US, 0);
	struct eng_rxp_out o;

	reset_fakes();
	o = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now);
	T_CHECK(o.next.owner == ENG_RX_ENGINE && o.todo == ENG_DO_TAKE_OVER,
		"no poll for a whole step of 1 ms (gone): take over");
	T_CHECK(asked_armed == 0, "gone decides without asking about CQs");
	in = inputs(since, 0);
	o = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now);
	T_CHECK(o.todo == ENG_DO_TAKE_OVER, "a last poll at the step's start counts as none");

	p = deferring(since, 40 * US);
	now = since + 40 * US;
	in = inputs(since - 1 * US, 0);
	o = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now);
	T_CHECK(o.next.owner == ENG_RX_DEFER && o.todo == ENG_DO_LOOK,
		"no poll for 41 us (off its CPU?): look, no takeover (%#x)", o.todo);
	T_CHECK(asked_armed == 1, "CQs asked once");

	armed = true;
	o = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now);
	T_CHECK(o.next.owner == ENG_RX_ENGINE && o.todo == ENG_DO_TAKE_OVER,
		"no poll during the step and a CQ armed: take over");

	/* a poll during the step keeps the deferral even with a CQ armed */
	in = inputs(since + 1 * US, 0);
	o = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now);
	T_CHECK(o.next.owner == ENG_RX_DEFER, "polled during the step: still deferring");
}

/* Looks at step ends: an application that leaves packets behind. */
static void test_found(void)
{
	uint64_t since = 300 * MS, now;
	struct eng_rxp p = deferring(since, 2 * MS);
	struct eng_rxp_in in;
	struct eng_rxp_out o;

	reset_fakes();
	now = since + 2 * MS;
	in = inputs(now - 100 * US, 0); /* polled during the step, not now */
	o = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now);
	T_CHECK(o.todo == ENG_DO_LOOK, "not polling now: look (%#x)", o.todo);
	in.found = true;
	o = eng_rxp_next(&o.next, ENG_EV_LOOKED, &in, now);
	T_CHECK(o.next.step == ENG_DEFER_FLOOR_NS && o.next.found_run == 1 &&
		o.next.found_ns == now && o.todo == ENG_DO_DEFER,
		"first find: the floor (%llu us)", (unsigned long long)(o.next.step / US));
	p = o.next;

	now = p.since + p.step;
	in = inputs(now - 100 * US, 0);
	o = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now);
	T_CHECK(o.todo == ENG_DO_LOOK && asked_max == 1,
		"second step end: look, the cap not asked again (%d)", asked_max);
	asked_max = 0;
	in.found = true;
	o = eng_rxp_next(&o.next, ENG_EV_LOOKED, &in, now);
	T_CHECK(o.next.step == ENG_DEFER_MIN_NS && o.next.found_run == 2,
		"second find in a row: the shortest step");
	p = o.next;

	/* the ramp after a recent find stops at the floor, without asking */
	for (int i = 0; i < 12; i++) {
		now = p.since + p.step;
		in = inputs(now - 1 * US, 0);
		p = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now).next;
	}
	T_CHECK(p.step == ENG_DEFER_FLOOR_NS && asked_max == 0,
		"after a recent find the steps stop at the floor (%llu us, cap asked %d)",
		(unsigned long long)(p.step / US), asked_max);
	T_CHECK(p.found_run == 0, "a step end with a poller ends the found run");

	/* a find by a poller active within ENG_APP_IDLE_NS does not count */
	p = deferring(since, 80 * US);
	now = since + 80 * US;
	in = inputs(now - 20 * US, 0);
	o = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now);
	in.found = true;
	o = eng_rxp_next(&o.next, ENG_EV_LOOKED, &in, now);
	T_CHECK(o.next.step == 160 * US && o.next.found_run == 0,
		"packets behind a poller active 20 us ago: the ramp goes on");
	/* nothing found: the ramp goes on */
	in = inputs(now - 100 * US, 0);
	o = eng_rxp_next(&p, ENG_EV_STEP_END, &in, now);
	in.found = false;
	o = eng_rxp_next(&o.next, ENG_EV_LOOKED, &in, now);
	T_CHECK(o.next.step == 160 * US && o.next.found_run == 0, "nothing found: doubled");
}

static void test_cq_armed_kick(void)
{
	struct eng_rxp p = deferring(10 * MS, 1 * MS);
	struct eng_rxp_in in = inputs(10 * MS, 0);
	struct eng_rxp_out o;

	reset_fakes();
	o = eng_rxp_next(&p, ENG_EV_CQ_ARMED, &in, 10 * MS + 5 * US);
	T_CHECK(o.todo == ENG_DO_NOTHING && o.next.owner == ENG_RX_DEFER,
		"a kick with no CQ armed any more: nothing");
	armed = true;
	o = eng_rxp_next(&p, ENG_EV_CQ_ARMED, &in, 10 * MS + 5 * US);
	T_CHECK(o.todo == ENG_DO_TAKE_OVER && o.next.owner == ENG_RX_ENGINE,
		"a CQ armed while deferring: take over at once");
	p.owner = ENG_RX_ENGINE;
	asked_armed = 0;
	o = eng_rxp_next(&p, ENG_EV_CQ_ARMED, &in, 10 * MS + 5 * US);
	T_CHECK(o.todo == ENG_DO_NOTHING && asked_armed == 0,
		"the engine owns the socket: nothing, nothing asked");
}

static void test_inbox_idle(void)
{
	uint64_t now = 500 * MS;
	struct eng_rxp p = { .owner = ENG_RX_ENGINE };
	struct eng_rxp_in in = inputs(now - 500 * US, 0);
	struct eng_rxp_out o;

	reset_fakes();
	in.inbox = true;
	in.shm_rx_ns = now - 5 * MS;
	o = eng_rxp_next(&p, ENG_EV_IDLE, &in, now);
	T_CHECK(o.next.owner == ENG_RX_DEFER && o.next.step == ENG_DEFER_MIN_NS &&
		o.todo == ENG_DO_DEFER, "inbox busy, application polling: shortest steps");
	in.shm_rx_ns = now - ENG_SHM_RECENT_NS;
	o = eng_rxp_next(&p, ENG_EV_IDLE, &in, now);
	T_CHECK(o.next.owner == ENG_RX_ENGINE && o.todo == ENG_DO_SLEEP,
		"inbox quiet for 10 ms: sleep with the flag up");
	in.shm_rx_ns = now;
	in.app_poll_ns = now - ENG_SHM_APP_NS;
	o = eng_rxp_next(&p, ENG_EV_IDLE, &in, now);
	T_CHECK(o.todo == ENG_DO_SLEEP, "no poll for 1 ms: sleep with the flag up");
	in.inbox = false;
	o = eng_rxp_next(&p, ENG_EV_IDLE, &in, now);
	T_CHECK(o.todo == ENG_DO_NOTHING, "no inbox: nothing to do");
	in.inbox = true;
	p = deferring(now, 20 * US);
	o = eng_rxp_next(&p, ENG_EV_IDLE, &in, now);
	T_CHECK(o.todo == ENG_DO_NOTHING, "deferring already: nothing");
}

static void test_linger(void)
{
	uint64_t now = 900 * MS;
	struct eng_rxp p = { .owner = ENG_RX_ENGINE };
	struct eng_rxp_in in = inputs(now - 5 * MS, 0);
	struct eng_rxp_out o;
	int ticks;

	reset_fakes();
	in.linger_ns = 0;
	o = eng_rxp_next(&p, ENG_EV_DRAINED, &in, now);
	T_CHECK(o.next.owner == ENG_RX_ENGINE && o.todo == ENG_DO_ARM && asked_cpu == 0,
		"SPIN_US=0: arm and sleep");
	in.linger_ns = ENG_LINGER_NS;
	cpu_free_now = false;
	o = eng_rxp_next(&p, ENG_EV_DRAINED, &in, now);
	T_CHECK(o.todo == ENG_DO_ARM, "no CPU free: arm and sleep");
	cpu_free_now = true;
	o = eng_rxp_next(&p, ENG_EV_DRAINED, &in, now);
	T_CHECK(o.next.owner == ENG_RX_LINGER && o.todo == ENG_DO_PARK &&
		o.next.linger_until == now + ENG_LINGER_NS, "CPU free: linger, sockets parked");
	p = o.next;

	o = eng_rxp_next(&p, ENG_EV_LINGER_TICK, &in, now);
	T_CHECK(o.todo == ENG_DO_LOOK && o.next.linger_idle == 1, "lingering: read");
	p = o.next;
	in.found = false;
	o = eng_rxp_next(&p, ENG_EV_LINGER_READ, &in, now + 1 * US);
	T_CHECK(o.todo == ENG_DO_YIELD && o.next.linger_until == p.linger_until,
		"nothing read: yield, same end");
	in.found = true;
	o = eng_rxp_next(&p, ENG_EV_LINGER_READ, &in, now + 20 * US);
	T_CHECK(o.todo == ENG_DO_NOTHING && o.next.linger_until == now + 20 * US + ENG_LINGER_NS &&
		o.next.linger_idle == 0, "packets read: the linger runs on from them");
	p = o.next;
	in.found = false;

	/* the 8th empty tick asks whether a CPU is still free */
	asked_cpu = 0;
	for (ticks = 1; ticks <= 8; ticks++) {
		o = eng_rxp_next(&p, ENG_EV_LINGER_TICK, &in, now + 21 * US);
		if (o.todo != ENG_DO_LOOK)
			break;
		p = o.next;
	}
	T_CHECK(asked_cpu == 1 && o.todo == ENG_DO_LOOK, "8 ticks, CPU asked once (%d)",
		asked_cpu);
	cpu_free_now = false;
	for (ticks = 1; ticks <= 8; ticks++) {
		o = eng_rxp_next(&p, ENG_EV_LINGER_TICK, &in, now + 22 * US);
		if (o.todo != ENG_DO_LOOK)
			break;
		p = o.next;
	}
	T_CHECK(o.todo == ENG_DO_ARM && o.next.owner == ENG_RX_ENGINE && ticks == 8,
		"CPU busy at the 8th tick: stop (after %d)", ticks);
	cpu_free_now = true;

	p.owner = ENG_RX_LINGER;
	p.linger_until = now + 100 * US;
	o = eng_rxp_next(&p, ENG_EV_LINGER_TICK, &in, now + 100 * US);
	T_CHECK(o.todo == ENG_DO_ARM && o.next.owner == ENG_RX_ENGINE, "time up: stop");
	in = inputs(now + 50 * US - 3 * US, 0);
	o = eng_rxp_next(&p, ENG_EV_LINGER_TICK, &in, now + 50 * US);
	T_CHECK(o.todo == ENG_DO_ARM, "an application thread polls: stop");
	in = inputs(now + 60 * US, 0); /* stamped after our clock read */
	o = eng_rxp_next(&p, ENG_EV_LINGER_TICK, &in, now + 50 * US);
	T_CHECK(o.todo == ENG_DO_LOOK, "a poll stamped after now does not stop it");
	in = inputs(0, now + 10 * US);
	o = eng_rxp_next(&p, ENG_EV_LINGER_TICK, &in, now + 50 * US);
	T_CHECK(o.todo == ENG_DO_ARM, "an application thread sends: stop");
	o = eng_rxp_next(&p, ENG_EV_LINGER_FAIL, &in, now + 50 * US);
	T_CHECK(o.todo == ENG_DO_ARM && o.next.owner == ENG_RX_ENGINE,
		"rx_lock busy (an application receives): stop");
}

/* The application threads' side. */
static void test_app_side(void)
{
	uint64_t now = 2000 * MS;

	T_CHECK(eng_sock_quiet(true, now - ENG_SOCK_QUIET_NS, 0, 0, now),
		"quiet peer: no datagram for 100 ms, nothing in flight");
	T_CHECK(!eng_sock_quiet(true, now - ENG_SOCK_QUIET_NS + 1, 0, 0, now),
		"a datagram within 100 ms: not quiet");
	T_CHECK(!eng_sock_quiet(true, now - 200 * MS, 1, 0, now) &&
		!eng_sock_quiet(true, now - 200 * MS, 0, 3, now),
		"packets in flight here or away: not quiet");
	T_CHECK(!eng_sock_quiet(false, now - 200 * MS, 0, 0, now),
		"no engine thread to watch the socket: not quiet");
	T_CHECK(eng_poll_kicks(true, 0) && !eng_poll_kicks(true, 1) && !eng_poll_kicks(false, 0),
		"spin kick: a drained ACK and no request in the receive");
	for (unsigned int run = 1; run <= 3 * ENG_POLL_YIELD_EVERY; run++)
		T_CHECK(eng_poll_yields(run) == (run % ENG_POLL_YIELD_EVERY == 0),
			"yield on empty poll %u", run);
	T_CHECK(eng_app_polling(now + 5 * US, now) && !eng_app_polling(now - ENG_APP_ACTIVE_NS, now),
		"polling: within 10 us (a later stamp counts)");
	T_CHECK(eng_app_gone(now - ENG_APP_GONE_NS, now) && !eng_app_gone(now - 999 * US, now),
		"gone: no poll for 1 ms");
	T_CHECK(eng_app_sending(now - 49 * US, now) && !eng_app_sending(now - ENG_APP_SEND_NS, now),
		"sending: within 50 us");
	{
		uint64_t gap = 0, want[] = { 20, 40, 80, 160, 160 };

		for (int i = 0; i < 5; i++) {
			gap = eng_poll_sock_gap(gap, false);
			T_CHECK(gap == want[i] * US, "socket gap %d: %llu us, want %llu", i,
				(unsigned long long)(gap / US), (unsigned long long)want[i]);
		}
		T_CHECK(eng_poll_sock_gap(gap, true) == 0, "a read that got packets: no gap");
		T_CHECK(eng_poll_skips_sock(now - 1 * MS, now - 100 * US, 160 * US, now) &&
			!eng_poll_skips_sock(now - 1 * MS, now - 160 * US, 160 * US, now) &&
			!eng_poll_skips_sock(now - ENG_SHM_RECENT_NS, now - 1 * US, 160 * US, now),
			"inbox busy: the socket waits for its gap; inbox quiet for 10 ms: read");
	}
	T_CHECK(eng_rxp_step_end(&(struct eng_rxp){ .owner = ENG_RX_DEFER, .since = 5, .step = 7 }) ==
			12 && eng_rxp_step_end(&(struct eng_rxp){ .owner = ENG_RX_ENGINE }) == 0,
		"the wait ends at the step's end only while deferring");
}

int main(void)
{
	test_names();
	test_socket_from_engine();
	test_spin_kick();
	test_ramp();
	test_timer();
	test_takeover();
	test_found();
	test_cq_armed_kick();
	test_inbox_idle();
	test_linger();
	test_app_side();
	return t_summary();
}
