/* The CM's inputs are hostile: white-box test of cm/ (its sources are
 * compiled in here, since librdmacm is not part of the static core).
 *
 * 1. The GSI socket: a MAD sent with cm_gsi_send arrives intact; datagrams
 *    that are not a valid UD SEND_ONLY to QP1 with QP1's Q_Key, a 256-byte
 *    MAD and a good ICRC (truncated, wrong opcode/QPN/Q_Key, one flipped
 *    bit, random bytes) are dropped, never delivered.
 * 2. Duplicates and retransmission against a scripted peer: a repeated
 *    REQ is one CONNECT_REQUEST (MRA, then the same REP, answer repeats),
 *    RTU and DREQ likewise; an unanswered REQ is sent again with the same
 *    transaction id, an MRA holds it off, the REP completes it.
 * 3. The protocol: thousands of random MADs (random fields behind a valid
 *    CM header, and REQs aimed at a real listener) go through the state
 *    machine of a process with a listener; nothing crashes, every
 *    CONNECT_REQUEST it yields is well formed, and afterwards a real
 *    connection through the same listener still works.
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

static int failures;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (cond) {                                                   \
			printf("ok   - " __VA_ARGS__);                        \
		} else {                                                      \
			failures++;                                           \
			printf("FAIL - %s:%d: ", __FILE__, __LINE__);         \
			printf(__VA_ARGS__);                                  \
		}                                                             \
		printf("\n");                                                 \
	} while (0)

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t xr(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void gsi_cases(void)
{
	static const uint8_t lo[16] = T_LO16;
	uint8_t mad[WIRE_MAD_LEN], got[WIRE_MAD_LEN], to_ip[16];
	struct cm_peer from, to = { .ip = T_LO16, .port = 0 };
	uint16_t pa, pb;
	int a = gsi_open4(&pa), b = gsi_open4(&pb);
	int delivered = 0, dropped = 0;

	CHECK(a >= 0 && b >= 0, "two GSI sockets (ports %u, %u)", pa, pb);
	if (a < 0 || b < 0)
		return;
	to.port = pb;
	for (int i = 0; i < WIRE_MAD_LEN; i++)
		mad[i] = (uint8_t)xr();
	CHECK(cm_gsi_send(a, pa, lo, &to, 7, mad) == 0, "send a MAD");
	usleep(10000);
	CHECK(cm_gsi_recv(b, got, &from, to_ip) == 1 && !memcmp(got, mad, WIRE_MAD_LEN) &&
	      from.port == pa && !memcmp(to_ip, lo, 16),
	      "it arrives intact, with sender port and destination address");

	/* Mutations of a valid packet: every one must be dropped. */
	{
		struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(pb) };
		struct wire_pkt pkt = { .opcode = WIRE_UD | WIRE_SEND_ONLY, .pkey = 0xffff,
					.dqpn = 1, .qkey = WIRE_GSI_QKEY, .sqpn = 1 };
		struct wire_l3 l3 = { .family = AF_INET, .sport = pa, .dport = pb };
		uint8_t good[WIRE_MAX_HDR_LEN + WIRE_MAD_LEN + 4], bad[sizeof(good) + 64];
		struct iovec iov[2];
		int hlen, len;
		uint32_t crc;

		memcpy(&sin.sin_addr, lo + 12, 4);
		memcpy(l3.src, lo + 12, 4);
		memcpy(l3.dst, lo + 12, 4);
		for (int kind = 0; kind < 7; kind++) {
			for (int n = 0; n < 200; n++) {
				struct wire_pkt p = pkt;

				if (kind == 1)
					p.opcode = (uint8_t)(WIRE_RC | WIRE_SEND_ONLY);
				if (kind == 2)
					p.dqpn = 2 + (uint32_t)(xr() % 1000);
				if (kind == 3)
					p.qkey = (uint32_t)xr() | 1;
				hlen = wire_encode_hdrs(good, &p);
				memcpy(good + hlen, mad, WIRE_MAD_LEN);
				iov[0] = (struct iovec){ good, (size_t)hlen };
				iov[1] = (struct iovec){ mad, WIRE_MAD_LEN };
				crc = wire_icrc(&l3, iov, 2);
				len = hlen + WIRE_MAD_LEN;
				for (int i = 0; i < 4; i++)
					good[len + i] = (uint8_t)(crc >> (8 * i));
				len += 4;
				memcpy(bad, good, (size_t)len);
				if (kind == 4) /* one flipped bit anywhere */
					bad[xr() % (uint64_t)len] ^= (uint8_t)(1u << (xr() % 8));
				if (kind == 5) /* truncated */
					len = (int)(xr() % (uint64_t)len);
				if (kind == 6) { /* random bytes */
					len = (int)(xr() % sizeof(bad));
					for (int i = 0; i < len; i++)
						bad[i] = (uint8_t)xr();
				}
				if (kind == 0 && n > 0)
					continue;
				sendto(a, bad, (size_t)len, 0, (struct sockaddr *)&sin, sizeof(sin));
				usleep(50);
				for (;;) {
					int r = cm_gsi_recv(b, got, &from, to_ip);

					if (r < 0)
						break;
					if (r == 1)
						delivered++;
					else
						dropped++;
				}
			}
		}
	}
	CHECK(delivered == 1, "of 1201 datagrams only the one valid MAD is delivered "
	      "(%d delivered, %d dropped)", delivered, dropped);
	close(a);
	close(b);
}

/* A random MAD with a valid CM header (so the decoder passes it on). */
static void random_mad(uint8_t *mad, uint16_t port, uint32_t listener_comm_hint)
{
	static const uint16_t attrs[] = { WIRE_CM_ATTR_REQ, WIRE_CM_ATTR_MRA, WIRE_CM_ATTR_REJ,
					  WIRE_CM_ATTR_REP, WIRE_CM_ATTR_RTU, WIRE_CM_ATTR_DREQ,
					  WIRE_CM_ATTR_DREP, WIRE_CM_ATTR_SIDR_REQ,
					  WIRE_CM_ATTR_SIDR_REP, WIRE_CM_ATTR_LAP, 0x99 };
	uint16_t attr = attrs[xr() % (sizeof(attrs) / sizeof(attrs[0]))];

	for (int i = 0; i < WIRE_MAD_LEN; i++)
		mad[i] = (uint8_t)xr();
	mad[0] = 1;
	mad[1] = WIRE_MAD_CLASS_CM;
	mad[2] = 2;
	mad[3] = WIRE_MAD_METHOD_SEND;
	mad[16] = (uint8_t)(attr >> 8);
	mad[17] = (uint8_t)attr;
	if (xr() % 2) {
		/* Aim at something real: our listener, or ids it created. */
		if (attr == WIRE_CM_ATTR_REQ || attr == WIRE_CM_ATTR_SIDR_REQ) {
			struct wire_cma_hdr h = { .version = 0, .ip_version = 4,
						  .src_port = (uint16_t)xr() };
			uint8_t *pd;

			h.src[12] = 127; h.src[15] = 1;
			h.dst[12] = 127; h.dst[15] = 1;
			wire_mad_set(mad, attr == WIRE_CM_ATTR_REQ ? WIRE_CM_REQ_service_id :
				     WIRE_CM_SIDR_REQ_service_id,
				     wire_cm_service_id(WIRE_CM_PS_TCP, port));
			pd = mad + WIRE_MAD_HDR_LEN + (attr == WIRE_CM_ATTR_REQ ? 140 : 16);
			wire_cma_hdr_encode(pd, &h);
		} else if (attr != 0x99 && attr != WIRE_CM_ATTR_LAP) {
			/* remote comm id = one of ours (field at byte 4 of most) */
			uint32_t id = listener_comm_hint;

			mad[28] = (uint8_t)(id >> 24);
			mad[29] = (uint8_t)(id >> 16);
			mad[30] = (uint8_t)(id >> 8);
			mad[31] = (uint8_t)id;
		}
	}
}

static void protocol_cases(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct rdma_cm_id *l, *cli, *srv = NULL;
	struct rdma_cm_event *ev;
	uint16_t port = (uint16_t)t_listen_port((uint32_t)getpid());
	int reqs = 0, bad_events = 0;
	struct cm_peer from = { .ip = T_LO16, .port = 9 };
	static const uint8_t lo[16] = T_LO16;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 4096)) {
		printf("SKIP: cannot listen on 127.0.0.1 (no srn_lo device?): %s\n", strerror(errno));
		exit(77);
	}
	fcntl(ch->fd, F_SETFL, O_NONBLOCK);
	for (int i = 0; i < 5000; i++) {
		uint8_t mad[WIRE_MAD_LEN];
		uint32_t hint = 0;

		pthread_mutex_lock(&cm_lock);
		/* a comm id some id of ours really has */
		for (struct cm_id *c = cm_ids; c; c = c->next)
			if (c->local_comm_id && xr() % 4 == 0)
				hint = c->local_comm_id;
		random_mad(mad, port, hint);
		from.port = (uint16_t)(1 + xr() % 3); /* nobody listens there */
		cm_conn_mad_in(mad, &from, lo);
		pthread_mutex_unlock(&cm_lock);
		/* Take what the listener got, like an application would. */
		while (rdma_get_cm_event(ch, &ev) == 0) {
			if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
				reqs++;
				if (ev->listen_id != l || !ev->id ||
				    ev->param.conn.private_data_len != 56)
					bad_events++;
				else if (xr() % 2)
					rdma_reject(ev->id, "x", 1);
				else
					rdma_accept(ev->id, NULL);
				rdma_ack_cm_event(ev);
			} else {
				rdma_ack_cm_event(ev);
			}
		}
	}
	CHECK(bad_events == 0, "5000 random MADs: %d CONNECT_REQUESTs, all well formed", reqs);
	fcntl(ch->fd, F_SETFL, 0);
	/* Tear down every id the fuzz created (not the listener). */
	for (;;) {
		struct cm_id *victim = NULL;

		pthread_mutex_lock(&cm_lock);
		for (struct cm_id *c = cm_ids; c; c = c->next)
			if (&c->id != l && c->passive)
				victim = c;
		pthread_mutex_unlock(&cm_lock);
		if (!victim)
			break;
		rdma_destroy_id(&victim->id);
	}

	/* The listener still serves a real connection (same process). */
	{
		struct rdma_conn_param cp = { .qp_num = 1234, .private_data = "hi",
					      .private_data_len = 3, .retry_count = 7 };
		struct rdma_cm_event *e2;
		int ok = 0;

		if (rdma_create_id(ch, &cli, NULL, RDMA_PS_TCP) == 0 &&
		    rdma_resolve_addr(cli, NULL, (struct sockaddr *)&sin, 1000) == 0 &&
		    rdma_get_cm_event(ch, &e2) == 0 && !rdma_ack_cm_event(e2) &&
		    rdma_resolve_route(cli, 1000) == 0 &&
		    rdma_get_cm_event(ch, &e2) == 0 && !rdma_ack_cm_event(e2) &&
		    rdma_connect(cli, &cp) == 0) {
			for (int i = 0; i < 10 && ok < 3; i++) {
				struct pollfd p = { .fd = ch->fd, .events = POLLIN };

				if (poll(&p, 1, 1000) != 1 || rdma_get_cm_event(ch, &e2))
					break;
				if (e2->event == RDMA_CM_EVENT_CONNECT_REQUEST && e2->listen_id == l &&
				    !strcmp(e2->param.conn.private_data, "hi") &&
				    e2->param.conn.qp_num == 1234) {
					struct rdma_conn_param ap = { .qp_num = 4321 };

					srv = e2->id;
					ok += rdma_accept(srv, &ap) == 0;
				} else if (e2->event == RDMA_CM_EVENT_CONNECT_RESPONSE && e2->id == cli &&
					   e2->param.conn.qp_num == 4321) {
					ok += rdma_establish(cli) == 0;
				} else if (e2->event == RDMA_CM_EVENT_ESTABLISHED && e2->id == srv) {
					ok++;
				}
				rdma_ack_cm_event(e2);
			}
		}
		CHECK(ok == 3, "afterwards a real REQ/REP/RTU through the same listener works "
		      "(CONNECT_REQUEST, CONNECT_RESPONSE + rdma_establish, ESTABLISHED)");
		if (srv)
			rdma_destroy_id(srv);
		rdma_destroy_id(cli);
	}
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

/* Next MAD the fake peer received within 500 ms: its attribute, or 0. */
static uint16_t peer_rx(int fd, struct wire_cm_msg *m)
{
	uint8_t mad[WIRE_MAD_LEN], to_ip[16];
	struct cm_peer from;

	for (int i = 0; i < 50; i++) {
		if (cm_gsi_recv(fd, mad, &from, to_ip) == 1 && wire_cm_decode(mad, WIRE_MAD_LEN, m) == 0)
			return m->hdr.attr_id;
		usleep(10000);
	}
	return 0;
}

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&p, 1, 1000) != 1 || rdma_get_cm_event(ch, &ev))
		return NULL;
	return ev;
}

/* The passive side against a scripted active peer: duplicates answered
 * from state (MRA while the application thinks, the same REP again after
 * accepting, DREP again after disconnecting), each reported to the
 * application once. */
static void duplicate_cases(void)
{
	static const uint8_t lo[16] = T_LO16;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = { .sin_family = AF_INET };
	uint16_t port = (uint16_t)(30000 + (getpid() + 7) % 20000), pport;
	int pfd = gsi_open4(&pport);
	struct cm_peer me = { .ip = T_LO16, .port = pport };
	struct wire_cm_msg req, m;
	struct wire_cma_hdr h = { .ip_version = 4, .src_port = 5555 };
	uint8_t raw[WIRE_MAD_LEN];
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c = NULL;
	int nreq = 0;
	uint32_t their_id;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	/* The scripted peer is on this host: the CM drops connections to a
	 * same-host peer whose agent is not in the directory (a dead
	 * process), once its periodic check looks.  Register its socket as
	 * an agent of ours, or that check fails the cases below now and
	 * then (~1 run in 30). */
	if (pfd >= 0 && cm_dir_agent_register(pport)) {
		CHECK(0, "the scripted peer registered as a CM agent");
		return;
	}
	if (!ch || pfd < 0 || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 8)) {
		CHECK(0, "listener for the duplicate cases");
		return;
	}
	memset(&req, 0, sizeof(req));
	wire_cm_hdr_init(&req.hdr, WIRE_CM_ATTR_REQ, 0x1234);
	req.req.local_comm_id = 0xabcdef01;
	req.req.service_id = wire_cm_service_id(WIRE_CM_PS_TCP, port);
	req.req.local_qpn = 77;
	req.req.starting_psn = 100;
	req.req.responder_resources = 2;
	req.req.initiator_depth = 3;
	req.req.retry_count = 7;
	req.req.rnr_retry_count = 7;
	req.req.path_mtu = 3;
	req.req.remote_cm_response_timeout = 20;
	h.src[12] = 127; h.src[15] = 1;
	h.dst[12] = 127; h.dst[15] = 1;
	wire_cma_hdr_encode(req.req.private_data, &h);
	memcpy(req.req.private_data + WIRE_CMA_HDR_LEN, "dup?", 5);
	wire_cm_encode(&req, raw);
	for (int i = 0; i < 3; i++) {
		pthread_mutex_lock(&cm_lock);
		cm_conn_mad_in(raw, &me, lo);
		pthread_mutex_unlock(&cm_lock);
	}
	while ((ev = next_event(ch))) {
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			nreq++;
			c = ev->id;
			CHECK(ev->param.conn.responder_resources == 3 &&
			      ev->param.conn.initiator_depth == 2 && ev->param.conn.qp_num == 77 &&
			      !strcmp(ev->param.conn.private_data, "dup?"),
			      "CONNECT_REQUEST: the initiator's depths swapped to our view, QPN, data");
		}
		rdma_ack_cm_event(ev);
		if (nreq)
			break;
	}
	CHECK(nreq == 1, "a REQ received 3 times is one CONNECT_REQUEST");
	CHECK(peer_rx(pfd, &m) == WIRE_CM_ATTR_MRA && m.mra.message_mraed == WIRE_CM_MSG_REQ &&
	      m.mra.remote_comm_id == 0xabcdef01 && peer_rx(pfd, &m) == WIRE_CM_ATTR_MRA,
	      "each repeat of the REQ before accepting is answered with an MRA");
	if (!c)
		return;
	{
		struct rdma_conn_param ap = { .qp_num = 99, .responder_resources = 3,
					      .initiator_depth = 2, .rnr_retry_count = 6 };

		CHECK(rdma_accept(c, &ap) == 0, "rdma_accept (application-owned QP 99)");
	}
	CHECK(peer_rx(pfd, &m) == WIRE_CM_ATTR_REP && m.hdr.tid == 0x1234 &&
	      m.rep.remote_comm_id == 0xabcdef01 && m.rep.local_qpn == 99 &&
	      m.rep.initiator_depth == 2 && m.rep.responder_resources == 3 &&
	      m.rep.rnr_retry_count == 6,
	      "REP: same transaction id, comm ids, QPN and depths");
	their_id = m.rep.local_comm_id;
	pthread_mutex_lock(&cm_lock);
	cm_conn_mad_in(raw, &me, lo);
	pthread_mutex_unlock(&cm_lock);
	CHECK(peer_rx(pfd, &m) == WIRE_CM_ATTR_REP && m.rep.local_comm_id == their_id,
	      "the REQ again after accepting: the same REP again");
	memset(&m, 0, sizeof(m));
	wire_cm_hdr_init(&m.hdr, WIRE_CM_ATTR_RTU, 0x1234);
	m.rtu.local_comm_id = 0xabcdef01;
	m.rtu.remote_comm_id = their_id;
	wire_cm_encode(&m, raw);
	for (int i = 0; i < 2; i++) {
		pthread_mutex_lock(&cm_lock);
		cm_conn_mad_in(raw, &me, lo);
		pthread_mutex_unlock(&cm_lock);
	}
	ev = next_event(ch);
	CHECK(ev && ev->event == RDMA_CM_EVENT_ESTABLISHED && ev->id == c,
	      "RTU (twice): one ESTABLISHED");
	if (ev)
		rdma_ack_cm_event(ev);
	memset(&m, 0, sizeof(m));
	wire_cm_hdr_init(&m.hdr, WIRE_CM_ATTR_DREQ, 0x5678);
	m.dreq.local_comm_id = 0xabcdef01;
	m.dreq.remote_comm_id = their_id;
	m.dreq.remote_qpn_eecn = 99;
	wire_cm_encode(&m, raw);
	for (int i = 0; i < 2; i++) {
		pthread_mutex_lock(&cm_lock);
		cm_conn_mad_in(raw, &me, lo);
		pthread_mutex_unlock(&cm_lock);
	}
	ev = next_event(ch);
	CHECK(ev && ev->event == RDMA_CM_EVENT_DISCONNECTED && ev->id == c,
	      "DREQ (twice): one DISCONNECTED");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(peer_rx(pfd, &m) == WIRE_CM_ATTR_DREP && m.hdr.tid == 0x5678 &&
	      m.drep.remote_comm_id == 0xabcdef01 && peer_rx(pfd, &m) == WIRE_CM_ATTR_DREP,
	      "each DREQ answered with a DREP (same transaction id)");
	{
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };

		CHECK(poll(&p, 1, 200) == 0, "no other event");
	}
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	close(pfd);
}

/* The active side against a silent scripted passive peer: the REQ is
 * retransmitted (same transaction and comm id) until answered; an MRA
 * holds retransmission off; the REP then completes it. */
static void retransmit_cases(void)
{
	static const uint8_t lo[16] = T_LO16, any[16];
	struct rdma_event_channel *ch = rdma_create_event_channel();
	uint16_t port = (uint16_t)(30000 + (getpid() + 13) % 20000), pport, bport = port;
	int pfd = gsi_open4(&pport), slot;
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct cm_peer peer = { .ip = T_LO16, .port = 0 };
	struct rdma_conn_param cp = { .qp_num = 555, .retry_count = 7, .rnr_retry_count = 7 };
	struct wire_cm_msg m, first;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	uint8_t raw[WIRE_MAD_LEN];
	double t0, t1;
	struct timespec ts;

	(void)lo;
	/* Our fake peer is the "listener" for port in the directory. */
	slot = cm_dir_bind(WIRE_CM_PS_TCP, any, false, &bport, false);
	if (!ch || pfd < 0 || slot < 0 || cm_dir_listen(slot, pport) || cm_dir_agent_register(pport)) {
		CHECK(0, "fake listener in the directory");
		return;
	}
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 1000) ||
	    !(ev = next_event(ch)) || rdma_ack_cm_event(ev) ||
	    rdma_resolve_route(id, 1000) || !(ev = next_event(ch)) || rdma_ack_cm_event(ev) ||
	    rdma_connect(id, &cp)) {
		CHECK(0, "connect to the fake listener");
		return;
	}
	CHECK(peer_rx(pfd, &first) == WIRE_CM_ATTR_REQ && first.req.local_qpn == 555,
	      "the REQ reaches the listener found in the directory");
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = ts.tv_sec + ts.tv_nsec / 1e9;
	for (int i = 0; i < 200 && cm_gsi_recv(pfd, raw, &peer, (uint8_t[16]){ 0 }) != 1; i++)
		usleep(10000);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t1 = ts.tv_sec + ts.tv_nsec / 1e9;
	CHECK(wire_cm_decode(raw, WIRE_MAD_LEN, &m) == 0 && m.hdr.attr_id == WIRE_CM_ATTR_REQ &&
	      m.hdr.tid == first.hdr.tid && m.req.local_comm_id == first.req.local_comm_id,
	      "unanswered, the same REQ is sent again after %.2f s", t1 - t0);
	/* MRA: "I am slow" -- no retransmission for its service timeout. */
	memset(&m, 0, sizeof(m));
	wire_cm_hdr_init(&m.hdr, WIRE_CM_ATTR_MRA, first.hdr.tid);
	m.mra.local_comm_id = 0x11110000;
	m.mra.remote_comm_id = first.req.local_comm_id;
	m.mra.message_mraed = WIRE_CM_MSG_REQ;
	m.mra.service_timeout = 20; /* 4.3 s */
	peer.port = cm_agent_port();
	wire_cm_encode(&m, raw);
	cm_gsi_send(pfd, pport, (const uint8_t[16])T_LO16, &peer, 1, raw);
	CHECK(peer_rx(pfd, &m) == 0 && peer_rx(pfd, &m) == 0 && peer_rx(pfd, &m) == 0,
	      "after an MRA: no retransmission for 1.5 s");
	memset(&m, 0, sizeof(m));
	wire_cm_hdr_init(&m.hdr, WIRE_CM_ATTR_REP, first.hdr.tid);
	m.rep.local_comm_id = 0x11110000;
	m.rep.remote_comm_id = first.req.local_comm_id;
	m.rep.local_qpn = 666;
	m.rep.starting_psn = 42;
	wire_cm_encode(&m, raw);
	cm_gsi_send(pfd, pport, (const uint8_t[16])T_LO16, &peer, 2, raw);
	ev = next_event(ch);
	CHECK(ev && ev->event == RDMA_CM_EVENT_CONNECT_RESPONSE && ev->param.conn.qp_num == 666,
	      "then the REP: CONNECT_RESPONSE with the peer's QPN");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(rdma_establish(id) == 0 && peer_rx(pfd, &m) == WIRE_CM_ATTR_RTU &&
	      m.rtu.remote_comm_id == 0x11110000 && m.hdr.tid == first.hdr.tid,
	      "rdma_establish sends the RTU (same transaction id)");
	rdma_destroy_id(id);
	cm_dir_unbind(slot);
	rdma_destroy_event_channel(ch);
	close(pfd);
}

int main(void)
{
	alarm(60);
	gsi_cases();
	duplicate_cases();
	retransmit_cases();
	protocol_cases();
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
