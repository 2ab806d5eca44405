/* libFuzzer target for the connection manager's receive side: every input
 * becomes up to four CM MADs, each wrapped as the UD SEND_ONLY to QP1 a
 * peer would send, sent over loopback to a GSI socket of our own, taken in
 * by cm_gsi_recv and handed to cm_conn_mad_in: the two functions the CM
 * agent thread runs on every datagram.  Behind them live a TCP and a UDP
 * port-space listener on 127.0.0.1, so REQs and SIDR_REQs reach the state
 * machine, and what the CM answers (REP, REJ, MRA, DREP, SIDR_REP) comes
 * back to a socket of ours: its comm ids are learned so that later MADs of
 * the same input can name the connection (REQ -> accept -> RTU -> DREQ).
 * The CONNECT_REQUESTs are accepted, rejected or left pending as the input
 * says, and every id made is destroyed before the next input.
 *
 * Message form: byte 0 picks the attribute (low nibble), whether to patch
 * the comm ids / service id / CMA header so the MAD reaches live state
 * (bit 4), what to do with a CONNECT_REQUEST (bits 5-6) and whether to
 * spoil the ICRC (bit 7); byte 1 is how many MAD bytes follow (<= 232,
 * or the whole 256 for attribute slot 15: the header too).
 * Built by `make fuzz` (clang); tests/e2e/fuzz_smoke.sh runs it briefly. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm/cm.h"
#include "wire/mad.h"
#include "wire/wire.h"

#define MAX_IDS 16
#define OUR_COMM_ID 0x5eed0001u

static struct rdma_event_channel *ch;
static struct rdma_cm_id *tcp_l, *udp_l;
static uint16_t tcp_port, udp_port, peer_port, gsi_port;
static int peer_fd = -1, gsi_fd = -1;
static struct rdma_cm_id *ids[MAX_IDS];
static int nids;
static uint32_t learned;             /* the CM's comm id in its last answer */

static const uint16_t attrs[16] = {
	WIRE_CM_ATTR_REQ, WIRE_CM_ATTR_REQ, WIRE_CM_ATTR_REP, WIRE_CM_ATTR_RTU,
	WIRE_CM_ATTR_REJ, WIRE_CM_ATTR_MRA, WIRE_CM_ATTR_DREQ, WIRE_CM_ATTR_DREP,
	WIRE_CM_ATTR_SIDR_REQ, WIRE_CM_ATTR_SIDR_REP, WIRE_CM_ATTR_CLASS_PORT_INFO,
	WIRE_CM_ATTR_LAP, WIRE_CM_ATTR_APR, WIRE_CM_ATTR_DREQ, WIRE_CM_ATTR_RTU, 0,
};

static void die(const char *what)
{
	fprintf(stderr, "fuzz_cm_mad: %s failed (%s)\n", what, strerror(errno));
	abort();
}

static uint16_t listen_on(struct rdma_cm_id **id, enum rdma_port_space ps)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (rdma_create_id(ch, id, NULL, ps) ||
	    rdma_bind_addr(*id, (struct sockaddr *)&sin) || rdma_listen(*id, 4))
		die("listen");
	return ntohs(rdma_get_src_port(*id));
}

static void setup(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);
	int fl;

	ch = rdma_create_event_channel();
	if (!ch)
		die("event channel");
	fl = fcntl(ch->fd, F_GETFL);
	if (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK))
		die("O_NONBLOCK");
	tcp_port = listen_on(&tcp_l, RDMA_PS_TCP);
	udp_port = listen_on(&udp_l, RDMA_PS_UDP);
	/* the peer: where the CM's answers go (127.0.0.1, not port 4791) */
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	peer_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (peer_fd < 0 || bind(peer_fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    getsockname(peer_fd, (struct sockaddr *)&sin, &sl))
		die("peer socket");
	peer_port = ntohs(sin.sin_port);
	gsi_port = 0;
	gsi_fd = cm_gsi_open(AF_INET, &gsi_port);
	if (gsi_fd < 0)
		die("gsi socket");
}

/* What the CM sent back: remember the comm id it gave itself. */
static void drain_answers(void)
{
	uint8_t buf[512];

	for (int i = 0; i < 64; i++) {
		ssize_t n = recv(peer_fd, buf, sizeof(buf), 0);
		struct wire_pkt p;

		if (n < 0)
			break;
		if (wire_decode(buf, (size_t)n, &p) || p.payload_len != WIRE_MAD_LEN ||
		    wire_mad_get(p.payload, WIRE_CM_HDR_attr_id) == WIRE_CM_ATTR_SIDR_REP)
			continue;
		/* every other answer starts with its sender's comm id */
		learned = (uint32_t)wire_mad_get(p.payload, WIRE_CM_REP_local_comm_id);
	}
}

static void take_events(uint8_t how)
{
	struct rdma_cm_event *ev;

	for (int i = 0; i < 16 && rdma_get_cm_event(ch, &ev) == 0; i++) {
		struct rdma_cm_id *id = ev->id;
		enum rdma_cm_event_type t = ev->event;

		rdma_ack_cm_event(ev);
		if (t != RDMA_CM_EVENT_CONNECT_REQUEST)
			continue;
		if (nids == MAX_IDS) {
			rdma_destroy_id(id);
			continue;
		}
		ids[nids++] = id;
		if (how == 1) {
			struct rdma_conn_param cp = { .qp_num = 0x42, .retry_count = 7,
						      .rnr_retry_count = 7 };

			rdma_accept(id, &cp);
		} else if (how == 2) {
			rdma_reject(id, NULL, 0);
		}
	}
}

/* The MAD of one message: header, data from the input, live fields. */
static void build_mad(uint8_t *mad, uint8_t sel, const uint8_t *d, size_t n, uint16_t attr)
{
	uint8_t *m = mad + WIRE_MAD_HDR_LEN;

	memset(mad, 0, WIRE_MAD_LEN);
	if (attr == 0) { /* anything at all, header included */
		memcpy(mad, d, n);
		return;
	}
	memcpy(m, d, n);
	wire_mad_set(mad, WIRE_CM_HDR_base_version, WIRE_MAD_BASE_VERSION);
	wire_mad_set(mad, WIRE_CM_HDR_mgmt_class, WIRE_MAD_CLASS_CM);
	wire_mad_set(mad, WIRE_CM_HDR_class_version, WIRE_MAD_CM_CLASS_VERSION);
	wire_mad_set(mad, WIRE_CM_HDR_method, WIRE_MAD_METHOD_SEND);
	wire_mad_set(mad, WIRE_CM_HDR_tid, 0x1000u + sel);
	wire_mad_set(mad, WIRE_CM_HDR_attr_id, attr);
	if (!(sel & 0x10))
		return;
	if (attr == WIRE_CM_ATTR_REQ || attr == WIRE_CM_ATTR_SIDR_REQ) {
		bool req = attr == WIRE_CM_ATTR_REQ;
		struct wire_cma_hdr c = { .version = 0, .ip_version = 4, .src_port = 7471 };
		uint16_t ps = req ? RDMA_PS_TCP : RDMA_PS_UDP;

		c.src[12] = c.dst[12] = 127;
		c.src[15] = c.dst[15] = 1;
		wire_mad_set(mad, req ? WIRE_CM_REQ_local_comm_id : WIRE_CM_SIDR_REQ_request_id,
			     OUR_COMM_ID);
		wire_mad_set(mad, req ? WIRE_CM_REQ_service_id : WIRE_CM_SIDR_REQ_service_id,
			     wire_cm_service_id(ps & 0xffff, req ? tcp_port : udp_port));
		wire_cma_hdr_encode(m + (req ? 140 : 36), &c);
	} else {
		uint32_t a = htonl(OUR_COMM_ID), b = htonl(learned);

		memcpy(m, &a, 4);
		memcpy(m + 4, &b, 4);
	}
}

/* The MAD as a peer's GSI sends it, through the socket, into the CM. */
static void deliver(const uint8_t *mad, bool spoil)
{
	static uint8_t pkt[WIRE_MAX_HDR_LEN + WIRE_MAD_LEN + 4];
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(gsi_port) };
	struct wire_l3 l3 = { .family = AF_INET, .sport = peer_port, .dport = gsi_port };
	struct wire_pkt h;
	struct iovec iov;
	struct cm_peer from;
	uint8_t m[WIRE_MAD_LEN], to_ip[16];
	uint32_t icrc;
	int hl;

	wire_pkt_clear(&h);
	h.opcode = WIRE_UD | WIRE_SEND_ONLY;
	h.pkey = 0xffff;
	h.dqpn = WIRE_GSI_QPN;
	h.qkey = WIRE_GSI_QKEY;
	h.sqpn = WIRE_GSI_QPN;
	hl = wire_encode_hdrs(pkt, &h);
	memcpy(pkt + hl, mad, WIRE_MAD_LEN);
	l3.src[0] = l3.dst[0] = 127;
	l3.src[3] = l3.dst[3] = 1;
	iov.iov_base = pkt;
	iov.iov_len = (size_t)hl + WIRE_MAD_LEN;
	icrc = wire_icrc(&l3, &iov, 1) ^ (spoil ? 1u : 0u);
	for (int i = 0; i < 4; i++)
		pkt[iov.iov_len + (size_t)i] = (uint8_t)(icrc >> (8 * i));
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (sendto(peer_fd, pkt, iov.iov_len + 4, 0, (struct sockaddr *)&to, sizeof(to)) < 0)
		return;
	/* loopback delivers at once; a few tries cover a busy machine */
	for (int i = 0; i < 100; i++) {
		int r = cm_gsi_recv(gsi_fd, m, &from, to_ip);

		if (r == -EAGAIN) {
			poll(&(struct pollfd){ gsi_fd, POLLIN, 0 }, 1, 1);
			continue;
		}
		if (r == 1) {
			pthread_mutex_lock(&cm_lock);
			cm_conn_mad_in(m, &from, to_ip);
			pthread_mutex_unlock(&cm_lock);
		}
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t mad[WIRE_MAD_LEN];

	if (!ch)
		setup();
	learned = 0;
	for (int k = 0; k < 4 && size >= 2; k++) {
		uint8_t sel = data[0];
		size_t n = data[1] % (WIRE_MAD_LEN + 1);

		data += 2;
		size -= 2;
		if (n > size)
			n = size;
		if (n > WIRE_CM_DATA_LEN && (sel & 15) != 15)
			n = WIRE_CM_DATA_LEN;
		build_mad(mad, sel, data, n, attrs[sel & 15]);
		data += n;
		size -= n;
		deliver(mad, sel & 0x80);
		drain_answers();
		take_events((uint8_t)(sel >> 5 & 3));
	}
	/* Nothing carries over: every id made here goes (its DREQ or REJ
	 * lands on our socket, drained next time). */
	while (nids)
		rdma_destroy_id(ids[--nids]);
	drain_answers();
	return 0;
}
