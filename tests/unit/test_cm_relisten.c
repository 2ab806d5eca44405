/* A REQ that arrives before its listener: white-box test of cm/ (its
 * sources are compiled in here, since librdmacm is not part of the static
 * core), against a scripted active peer that sends its MADs straight into
 * the CM as its agent thread would hand them over.
 *
 * perftest -R connects twice to one port: a connection to exchange its
 * parameters, then the test's own, for which the server destroys its first
 * listener and listens again once the exchange is over.  The client's
 * second REQ can reach the server before that rdma_listen (the server
 * waits for threads of ours that a busy host schedules late; see
 * cm/dispatch.c).  The CM holds such a REQ for CM_REQ_HOLD_MS:
 *
 * 1. the perftest -R sequence (listener, accept, destroy the listener
 *    right after accepting, REQ, then a new listener on the same port),
 *    20 rounds: the second REQ is never refused, it becomes the new
 *    listener's CONNECT_REQUEST and is answered with a REP;
 * 2. the same REQ received 3 times while held: one CONNECT_REQUEST;
 * 3. a REQ nobody listens for: the REJ Linux sends (invalid service id),
 *    once the grace is over (not before it, within 1.5 s after);
 * 4. a SIDR_REQ before its UD listener: a CONNECT_REQUEST once it listens;
 * 5. 40 REQs at once for ports nobody serves: only a few are held, the
 *    rest refused at once; all 40 refused by the end of the grace.
 */
#include "cm/addr.c"
#include "cm/agent.c"
#include "cm/channel.c"
#include "cm/conn.c"
#include "cm/conn_common.c"
#include "cm/disconnect.c"
#include "cm/dispatch.c"
#include "cm/sidr.c"
#include "cm/devices.c"
#include "cm/directory.c"
#include "cm/endpoint.c"
#include "cm/gsi_net.c"
#include "cm/id.c"
#include "cm/iwarp_cm.c"
#include "cm/multicast.c"
#include "cm/peer_probe.c"
#include "cm/qp.c"
#include "cm/strings.c"

/* 127.0.0.1 as cm/ holds it (cm/addr.h) */
#define T_LO16 { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 }

/* An IPv4 GSI socket on an ephemeral port, as the agent opens one. */
static int gsi_open4(uint16_t *port)
{
	*port = 0;
	return cm_gsi_open(AF_INET, port);
}

#include <poll.h>

#include "tests/lib/t_cm.h"
#include "tests/lib/t_util.h"

#define CHECK(cond, ...) T_OK(cond, __VA_ARGS__)

static const uint8_t lo[16] = T_LO16;
static int pfd = -1;                 /* the scripted peer's GSI socket */
static struct cm_peer peer = { .ip = T_LO16, .port = 0 };

/* Deliver a MAD from the peer as the agent thread does. */
static void peer_send(const struct wire_cm_msg *m)
{
	uint8_t raw[WIRE_MAD_LEN];

	wire_cm_encode(m, raw);
	pthread_mutex_lock(&cm_lock);
	cm_conn_mad_in(raw, &peer, lo);
	pthread_mutex_unlock(&cm_lock);
}

/* Next MAD the peer receives within ms: its attribute, or 0. */
static uint16_t peer_rx(struct wire_cm_msg *m, int ms)
{
	uint8_t mad[WIRE_MAD_LEN], to_ip[16];
	struct cm_peer from;

	for (int waited = 0; waited <= ms; waited += 2) {
		if (cm_gsi_recv(pfd, mad, &from, to_ip) == 1 &&
		    wire_cm_decode(mad, WIRE_MAD_LEN, m) == 0)
			return m->hdr.attr_id;
		usleep(2000);
	}
	return 0;
}

/* The remote comm id a REP or REJ names (the peer's own). */
static uint32_t names(const struct wire_cm_msg *m)
{
	return m->hdr.attr_id == WIRE_CM_ATTR_REP ? m->rep.remote_comm_id :
	       m->hdr.attr_id == WIRE_CM_ATTR_REJ ? m->rej.remote_comm_id : 0;
}

static int refusals;                 /* REJs seen for a comm id waited on */

/* Next REP / REJ for the peer's comm id within ms (other MADs, such as
 * the DREQs of torn-down rounds, skipped; a REJ for it while waiting for
 * something else is counted in refusals); 0 if none. */
static uint16_t peer_rx_for(struct wire_cm_msg *m, uint16_t attr, uint32_t comm, int ms)
{
	uint64_t until = cm_now_ms() + (uint64_t)ms;

	while (cm_now_ms() <= until) {
		uint16_t a = peer_rx(m, (int)(until - cm_now_ms()));

		if (a && names(m) == comm) {
			if (a == attr)
				return attr;
			refusals += a == WIRE_CM_ATTR_REJ;
		}
	}
	return 0;
}

/* The next event of type t on ch (others acked and skipped), or NULL. */
static struct rdma_cm_event *wait_event(struct rdma_event_channel *ch,
					enum rdma_cm_event_type t, int ms)
{
	uint64_t until = cm_now_ms() + (uint64_t)ms;
	struct rdma_cm_event *ev;

	while (cm_now_ms() <= until && (ev = t_cm_event(ch, (int)(until - cm_now_ms()) + 1))) {
		if (ev->event == t)
			return ev;
		rdma_ack_cm_event(ev);
	}
	return NULL;
}

static void make_req(struct wire_cm_msg *m, uint32_t comm_id, uint16_t port, uint64_t tid)
{
	struct wire_cma_hdr h = { .ip_version = 4, .src_port = 5555 };

	memset(m, 0, sizeof(*m));
	wire_cm_hdr_init(&m->hdr, WIRE_CM_ATTR_REQ, tid);
	m->req.local_comm_id = comm_id;
	m->req.service_id = wire_cm_service_id(WIRE_CM_PS_TCP, port);
	m->req.local_qpn = 77;
	m->req.starting_psn = 100;
	m->req.responder_resources = 1;
	m->req.initiator_depth = 1;
	m->req.retry_count = 7;
	m->req.rnr_retry_count = 7;
	m->req.path_mtu = 3;
	m->req.remote_cm_response_timeout = 20;
	h.src[12] = 127; h.src[15] = 1;
	h.dst[12] = 127; h.dst[15] = 1;
	wire_cma_hdr_encode(m->req.private_data, &h);
}

static struct rdma_cm_id *listener(struct rdma_event_channel *ch, enum rdma_port_space ps,
				   uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct rdma_cm_id *l;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (rdma_create_id(ch, &l, NULL, ps))
		return NULL;
	if (rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 4)) {
		rdma_destroy_id(l);
		return NULL;
	}
	return l;
}

/* Accept the CONNECT_REQUEST ev for the peer's comm id; true when the
 * peer then gets a REP naming it (and answers with the RTU). */
static bool accept_it(struct rdma_cm_event *ev, uint32_t comm_id, struct rdma_cm_id **conn)
{
	struct rdma_conn_param ap = { .qp_num = 99, .responder_resources = 1,
				      .initiator_depth = 1, .rnr_retry_count = 7 };
	struct wire_cm_msg m, rtu;

	*conn = ev->id;
	rdma_ack_cm_event(ev);
	if (rdma_accept(*conn, &ap) ||
	    peer_rx_for(&m, WIRE_CM_ATTR_REP, comm_id, 1000) != WIRE_CM_ATTR_REP)
		return false;
	memset(&rtu, 0, sizeof(rtu));
	wire_cm_hdr_init(&rtu.hdr, WIRE_CM_ATTR_RTU, m.hdr.tid);
	rtu.rtu.local_comm_id = comm_id;
	rtu.rtu.remote_comm_id = m.rep.local_comm_id;
	peer_send(&rtu);
	return true;
}

/* A port of 127.0.0.1 no listener of this host holds now (the CM
 * directory is host-wide: other tests bind theirs meanwhile). */
static uint16_t free_port(enum rdma_port_space ps)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();

	for (int i = 0; ch && i < 100; i++) {
		uint16_t port = (uint16_t)t_listen_port(cm_rand32());
		struct rdma_cm_id *l = listener(ch, ps, port);

		if (l) {
			rdma_destroy_id(l);
			rdma_destroy_event_channel(ch);
			return port;
		}
	}
	if (ch)
		rdma_destroy_event_channel(ch);
	return 0;
}

/* perftest -R's server, as its connection calls go. */
static void perftest_rounds(uint16_t port)
{
	int second_ok = 0, first_ok = 0, rounds = 20;
	uint32_t comm = 0x10000000u | (uint32_t)getpid();

	for (int r = 0; r < rounds; r++) {
		struct rdma_event_channel *ca = rdma_create_event_channel(),
					  *cb = rdma_create_event_channel();
		struct rdma_cm_id *l1 = ca ? listener(ca, RDMA_PS_TCP, port) : NULL, *l2;
		struct rdma_cm_id *c1 = NULL, *c2 = NULL;
		struct rdma_cm_event *ev;
		struct wire_cm_msg m;

		if (!l1 || !cb) {
			CHECK(0, "round %d: listener on 127.0.0.1:%u", r, port);
			return;
		}
		/* 1st connection: the parameter exchange. */
		make_req(&m, ++comm, port, 0x100 + (uint64_t)r);
		peer_send(&m);
		ev = wait_event(ca, RDMA_CM_EVENT_CONNECT_REQUEST, 1000);
		if (ev && accept_it(ev, comm, &c1))
			first_ok++;
		/* perftest destroys the listener right after rdma_accept. */
		rdma_destroy_id(l1);
		/* The client's 2nd REQ, before the server listens again (a
		 * REJ for it is counted while the REP is waited for). */
		make_req(&m, ++comm, port, 0x200 + (uint64_t)r);
		peer_send(&m);
		if (r == 0)
			usleep(50 * 1000); /* once: a refusal has time to come */
		l2 = listener(cb, RDMA_PS_TCP, port);
		ev = l2 ? wait_event(cb, RDMA_CM_EVENT_CONNECT_REQUEST, 500) : NULL;
		if (ev && accept_it(ev, comm, &c2))
			second_ok++;
		else if (peer_rx_for(&m, WIRE_CM_ATTR_REJ, comm, 20))
			refusals++;
		if (c2)
			rdma_destroy_id(c2);
		if (c1)
			rdma_destroy_id(c1);
		if (l2)
			rdma_destroy_id(l2);
		rdma_destroy_event_channel(ca);
		rdma_destroy_event_channel(cb);
	}
	CHECK(first_ok == rounds, "perftest -R sequence: the 1st connection's REQ accepted, "
	      "REP sent (%d/%d rounds)", first_ok, rounds);
	CHECK(refusals == 0, "the 2nd REQ, before the new listener, is never refused "
	      "(%d REJs in %d rounds)", refusals, rounds);
	CHECK(second_ok == rounds, "it becomes the new listener's CONNECT_REQUEST and is "
	      "answered with a REP (%d/%d rounds)", second_ok, rounds);
}

static void repeated_held(uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *l, *c = NULL;
	struct rdma_cm_event *ev;
	struct wire_cm_msg m;
	int n = 0;

	make_req(&m, 0x2badcafe, port, 0x300);
	for (int i = 0; i < 3; i++)
		peer_send(&m);
	l = ch ? listener(ch, RDMA_PS_TCP, port) : NULL;
	while (l && (ev = t_cm_event(ch, 200))) {
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			n++;
			if (!c) {
				accept_it(ev, 0x2badcafe, &c);
				continue;
			}
		}
		rdma_ack_cm_event(ev);
	}
	CHECK(l && n == 1, "a held REQ received 3 times is one CONNECT_REQUEST (%d)", n);
	if (c)
		rdma_destroy_id(c);
	if (l)
		rdma_destroy_id(l);
	if (ch)
		rdma_destroy_event_channel(ch);
}

static void nobody_listens(uint16_t port)
{
	struct wire_cm_msg m;
	uint64_t t0 = cm_now_ms(), dt;
	bool rej;

	make_req(&m, 0x3badcafe, port, 0x400);
	peer_send(&m);
	rej = peer_rx_for(&m, WIRE_CM_ATTR_REJ, 0x3badcafe, CM_REQ_HOLD_MS + 1500) ==
	      WIRE_CM_ATTR_REJ;
	dt = cm_now_ms() - t0;
	CHECK(rej && m.rej.reason == WIRE_CM_REJ_INVALID_SERVICE_ID &&
	      m.rej.remote_comm_id == 0x3badcafe && m.rej.message_rejected == WIRE_CM_MSG_REQ,
	      "a REQ nobody listens for: REJ invalid service id (8) naming its comm id");
	CHECK(rej && dt >= CM_REQ_HOLD_MS - 50 && dt <= CM_REQ_HOLD_MS + 1500,
	      "refused once the grace is over: after %llu ms (%d ms grace)",
	      (unsigned long long)dt, CM_REQ_HOLD_MS);
}

static void sidr_before_listen(uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct wire_cma_hdr h = { .ip_version = 4, .src_port = 5556 };
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *l = NULL;
	struct wire_cm_msg m;

	memset(&m, 0, sizeof(m));
	wire_cm_hdr_init(&m.hdr, WIRE_CM_ATTR_SIDR_REQ, 0x500);
	m.sidr_req.request_id = 0x4badcafe;
	m.sidr_req.pkey = 0xffff;
	m.sidr_req.service_id = wire_cm_service_id(WIRE_CM_PS_UDP, port);
	h.src[12] = 127; h.src[15] = 1;
	h.dst[12] = 127; h.dst[15] = 1;
	wire_cma_hdr_encode(m.sidr_req.private_data, &h);
	peer_send(&m);
	CHECK(peer_rx(&m, 50) == 0, "a SIDR_REQ before its UD listener: no refusal yet");
	l = ch ? listener(ch, RDMA_PS_UDP, port) : NULL;
	if (l)
		ev = wait_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 1000);
	CHECK(ev != NULL, "once the UD id listens, the SIDR_REQ is its CONNECT_REQUEST");
	if (ev) {
		struct rdma_cm_id *c = ev->id;

		rdma_ack_cm_event(ev);
		rdma_destroy_id(c);
	}
	if (l)
		rdma_destroy_id(l);
	if (ch)
		rdma_destroy_event_channel(ch);
}

static void flood(uint16_t port0)
{
	enum { N = 40 };
	struct wire_cm_msg m;
	int early = 0, all = 0;
	uint64_t t0 = cm_now_ms();

	for (int i = 0; i < N; i++) {
		make_req(&m, 0x50000000u + (uint32_t)i, (uint16_t)(port0 + i), 0x600 + (uint64_t)i);
		peer_send(&m);
	}
	while (all < N && cm_now_ms() - t0 <= CM_REQ_HOLD_MS + 1500 &&
	       peer_rx(&m, (int)(CM_REQ_HOLD_MS + 1500 - (cm_now_ms() - t0))) != 0) {
		if (m.hdr.attr_id != WIRE_CM_ATTR_REJ ||
		    m.rej.remote_comm_id - 0x50000000u >= (uint32_t)N)
			continue;
		all++;
		if (cm_now_ms() - t0 < 100)
			early++;
	}
	CHECK(early >= N - 16 && early < N,
	      "%d REQs for ports nobody serves: %d refused at once, the rest held", N, early);
	CHECK(all == N && cm_now_ms() - t0 <= CM_REQ_HOLD_MS + 1500,
	      "all %d refused within the grace + 1.5 s (%d)", N, all);
}

int main(void)
{
	alarm(60);
	setvbuf(stdout, NULL, _IOLBF, 0);
	pfd = gsi_open4(&peer.port);
	/* The scripted peer is on this host: the CM drops connections to a
	 * same-host peer whose agent is not in the directory (a dead
	 * process), so its socket is registered as an agent of ours. */
	if (pfd < 0 || cm_agent_start() || cm_dir_agent_register(peer.port)) {
		CHECK(0, "the scripted peer's GSI socket, registered as a CM agent");
		return 1;
	}
	perftest_rounds(free_port(RDMA_PS_TCP));
	repeated_held(free_port(RDMA_PS_TCP));
	nobody_listens(free_port(RDMA_PS_TCP));
	sidr_before_listen(free_port(RDMA_PS_UDP));
	flood(free_port(RDMA_PS_TCP));
	return t_summary();
}
