/* transport/engine_rx: packet dispatch.  Whichever thread receives (the
 * engine thread or an application thread under rx_lock) reads a batch
 * from the socket or the same-host inbox, checks each packet (decode,
 * ICRC, QP) and routes it on one bit: requests to the responder,
 * responses to the completer. */
#include <string.h>

#include "net/clock.h"
#include "net/pcap.h"
#include "net/shm_ring.h"
#include "transport/gsi_forward.h"
#include "transport/qp_forward.h"
#include "transport/steer.h"
#include "transport/engine_priv.h"

/* The QP the last packet went to, still locked and pinned: the packets of
 * one GRO buffer almost always go to one QP, which is then looked up and
 * locked once for all of them. */
struct rx_hold {
	struct srn_rc_state *rc;
	uint64_t pkts, bytes;        /* eng's rx counters, added at rx_end */
};

static void rx_release(struct rx_hold *h)
{
	if (h->rc) {
		/* what the QP's packets made it send (rx_sock_read's batch)
		 * leaves before its lock does, as tx.c wants */
		rc_tx_batch_flush();
		srn_qp_unlock(h->rc->qp);
		eng_put_qp(h->rc);
		h->rc = NULL;
	}
}

/* Take rc's lock to deliver pkt.  A plain ACK does not wait for it:
 * while an application thread holds it (sending), the ACK goes in the
 * QP's box for that thread (rc.h ack_box, srn_qp_unlock).  RX_LOCKED:
 * deliver pkt; RX_TAKEN: locked, and pkt was delivered from the box;
 * RX_HANDED_OFF: not locked, the holder has it. */
enum rx_lock { RX_LOCKED, RX_TAKEN, RX_HANDED_OFF };

static enum rx_lock rx_lock_qp(struct srn_rc_state *rc, const struct wire_pkt *pkt)
{
	bool boxed = false;

	if (!rc_ack_boxable(rc, pkt)) {
		pthread_mutex_lock(&rc->qp->lock);
	} else if (pthread_mutex_trylock(&rc->qp->lock)) {
		completer_ack_box_post(rc, pkt->psn);
		/* (see srn_qp_unlock: the holder may have looked already) */
		atomic_thread_fence(memory_order_seq_cst);
		if (pthread_mutex_trylock(&rc->qp->lock))
			return RX_HANDED_OFF;
		boxed = true;
	}
	/* what was boxed before goes first: responses keep their order */
	completer_ack_box_take(rc);
	return boxed ? RX_TAKEN : RX_LOCKED;
}

static void rx_pkt(struct srn_engine *eng, struct net_udp_msg *m, struct rx_hold *h)
{
	struct wire_pkt pkt;
	struct wire_l3 l3;
	struct srn_rc_state *rc;
	uint16_t id;
	uint32_t caps;
	uint8_t svc;

	if (m->len == 0 && !m->truncated) {
		rx_release(h);
		/* a same-host sender's doorbell (net/shm_ring.c).  Meant for
		 * the engine thread: if an application thread read it, pass
		 * the wake-up on through the timer. */
		if (atomic_load(&eng->shm_asleep))
			srn_engine_arm(eng, srn_now_ns());
		/* or a peer completed into an armed CQ of ours itself, or
		 * took from an SRQ of ours with its limit armed
		 * (transport/direct_send.c) */
		srn_cq_notify_peers(eng->ctx);
		srn_srq_notify_peers(eng->ctx);
		return;
	}
	if (m->len == NET_STEER_PROBE_LEN && m->buf[0] == 0xff && srn_steer_probe(eng, m))
		return; /* a census of port 4791's group (net/steer.h) */
	h->pkts++;
	h->bytes += m->len;
	if (m->truncated) {
		eng->cnt[SRN_CNT_rx_drop_truncated]++;
		return;
	}
	if (wire_decode(m->buf, m->len, &pkt) < 0) {
		eng->cnt[SRN_CNT_rx_drop_decode]++;
		static struct srn_ratelimit rl = { .reason = "drop: undecodable" };

		srn_log(eng, SRN_LOG_DEBUG, &rl, "drop: undecodable packet of %u bytes from port %u",
			m->len, m->from.port);
		return;
	}
	if (eng->log_level >= SRN_LOG_TRACE) {
		static struct srn_ratelimit rl = { .reason = "rx" };

		srn_log(eng, SRN_LOG_TRACE, &rl, "qp %u psn %u: rx %s, %u bytes from port %u",
			pkt.dqpn, pkt.psn, wire_opcodes[pkt.opcode].name, m->len, m->from.port);
	}
	memset(&l3, 0, sizeof(l3));
	l3.family = m->from.family;
	memcpy(l3.src, m->from.ip, 16);
	memcpy(l3.dst, m->to.ip, 16);
	l3.sport = m->from.port;
	/* a multicast group socket receives at 4791 (mcast.c) */
	l3.dport = m->to.port ? m->to.port : eng->udp.local.port;
	l3.ttl_hop = 64;
	l3.ip_id = m->id_hint;
	if (srn_cap_active(&eng->cap)) {
		struct iovec iov = { m->buf, m->len };

		srn_cap_packet(eng, NET_CAP_RX, pkt.dqpn, &l3, &iov, 1);
	}
	if (wire_icrc_verify(&l3, m->buf, m->len, &id) < 0) {
		eng->cnt[SRN_CNT_rx_drop_icrc]++;
		static struct srn_ratelimit rl = { .reason = "drop: bad ICRC" };

		srn_log(eng, SRN_LOG_DEBUG, &rl, "qp %u psn %u: drop: bad ICRC (%s)", pkt.dqpn,
			pkt.psn, wire_opcodes[pkt.opcode].name);
		return;
	}
	svc = pkt.opcode & 0xe0;
	if (svc != WIRE_RC && svc != WIRE_UC && svc != WIRE_UD && svc != WIRE_XRC) {
		eng->cnt[SRN_CNT_rx_drop_not_rc]++;
		return;
	}
	l3.ip_id = id; /* the UD GRH slot shows the IPv4 header as sent */
	if (h->rc && h->rc->qpn == pkt.dqpn) {
		rc = h->rc; /* locked already */
		goto deliver;
	}
	rx_release(h);
	if (pkt.dqpn == WIRE_GSI_QPN) {
		/* QP1: a CM MAD for one of this host's CM agents */
		srn_gsi_forward(eng, &pkt, m);
		return;
	}
	if (pkt.dqpn == WIRE_PSN_MASK) {
		/* RoCEv2 multicast: QPN 0xFFFFFF, the group is the IP destination */
		if (svc == WIRE_UD)
			ud_mcast_rx(eng, &pkt, &l3, m->len);
		else
			eng->cnt[SRN_CNT_rx_drop_not_rc]++;
		return;
	}
	rc = eng_get_qp(eng, pkt.dqpn);
	if (!rc && srn_qp_forward(eng, m, pkt.dqpn))
		return; /* another engine of this host owns the QP */
	if (!rc) {
		eng->cnt[SRN_CNT_rx_drop_no_qp]++;
		static struct srn_ratelimit rl = { .reason = "drop: no such QP" };

		srn_log(eng, SRN_LOG_DEBUG, &rl, "qp %u psn %u: drop: no such QP (%s)", pkt.dqpn,
			pkt.psn, wire_opcodes[pkt.opcode].name);
		return;
	}
	switch (rx_lock_qp(rc, &pkt)) {
	case RX_HANDED_OFF:
		eng_put_qp(rc);
		return;
	case RX_TAKEN:
		h->rc = rc;
		return;
	case RX_LOCKED:
		break;
	}
	h->rc = rc;
deliver:
	if (rc->dead) {
		rc_count(rc, SRN_CNT_rx_drop_no_qp);
	} else if (svc != (rc->type == IBV_QPT_UD ? WIRE_UD :
			   rc->type == IBV_QPT_UC ? WIRE_UC : rc->xrc ? WIRE_XRC : WIRE_RC)) {
		rc_count(rc, SRN_CNT_rx_drop_not_rc); /* wrong service for the QP */
	} else if (svc == WIRE_UD) {
		ud_rx(rc, &pkt, &l3, m->len);
	} else if (!rc->path_ok) {
		rc_count(rc, SRN_CNT_rx_drop_no_path);
	} else if (svc == WIRE_UC) {
		uc_responder_rx(rc, &pkt);
	} else if (svc == WIRE_XRC && (wire_opcodes[pkt.opcode].caps & WIRE_IS_REQ)) {
		eng->rx_reqs++;
		xrc_responder_rx(rc, &pkt);
	} else {
		caps = wire_opcodes[pkt.opcode].caps;
		if (caps & WIRE_IS_REQ) {
			eng->rx_reqs++;
			responder_rx(rc, &pkt);
		} else
			completer_rx(rc, &pkt);
	}
}

/* The end of a run of rx_pkt calls: the QP is let go, the counts added. */
static void rx_end(struct srn_engine *eng, struct rx_hold *h)
{
	rx_release(h);
	if (h->pkts) {
		atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_rx_packets], h->pkts,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_rx_bytes], h->bytes,
					  memory_order_relaxed);
		h->pkts = h->bytes = 0;
	}
}

static void rx_one(struct srn_engine *eng, struct net_udp_msg *m)
{
	struct rx_hold h = { NULL, 0, 0 };

	rx_pkt(eng, m, &h);
	rx_end(eng, &h);
}

void srn_engine_rx_msg(struct srn_engine *eng, struct net_udp_msg *m)
{
	rx_one(eng, m);
}

struct srn_rc_state *srn_engine_get_qp(struct srn_engine *eng, uint32_t qpn)
{
	return eng_get_qp(eng, qpn);
}

void srn_engine_put_qp(struct srn_rc_state *rc)
{
	eng_put_qp(rc);
}

static void rx_shm_one(void *arg, struct net_udp_msg *m)
{
	struct srn_engine *eng = arg;

	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_rx_shm_packets], 1, memory_order_relaxed);
	rx_one(eng, m);
}

int srn_engine_rx_shm(struct srn_engine *eng, int max)
{
	int n;

	if (!eng->inbox)
		return 0;
	n = net_shm_inbox_drain(eng->inbox, max, rx_shm_one, eng);
	if (n > 0)
		atomic_store_explicit(&eng->shm_rx_ns, srn_now_ns(), memory_order_relaxed);
	return n;
}

int srn_engine_rx_batch(struct srn_engine *eng)
{
	int r = srn_engine_rx_shm(eng, ENGINE_BATCH);
	int n = srn_engine_rx_sock(eng);

	/* ENGINE_BATCH: either source may have more waiting */
	return r == ENGINE_BATCH || n == ENGINE_SOCK_BATCH ? ENGINE_BATCH : n + r;
}

/* The engine this thread runs, if it is an engine thread. */
static __thread const struct srn_engine *thread_engine;

bool srn_engine_on_thread(const struct srn_engine *eng)
{
	return thread_engine == eng;
}

void eng_rx_set_thread(const struct srn_engine *eng)
{
	thread_engine = eng;
}

/* The engine whose batch-end ACKs this thread still owes (a full batch
 * skipped them: more packets were waiting). */
static __thread struct srn_engine *rx_acks_owed;
/* full batches in a row whose ACKs were left to the next batch */
static __thread unsigned int rx_full_run;
enum { ENGINE_ACK_SKIP_MAX = 4 };

void srn_engine_rx_done(struct srn_engine *eng)
{
	if (rx_acks_owed == eng) {
		rx_acks_owed = NULL;
		rx_full_run = 0; /* (the run of skipped flushes ends here too) */
		responder_rx_batch_end(eng);
	}
}

/* One recvmmsg batch of socket u, processed.  Datagrams read. */
static int rx_sock_read(struct srn_engine *eng, struct net_udp *u, int vlen, struct rx_hold *h)
{
	int n = net_udp_recv_batch(u, eng->msgs, vlen);

	/* One GSO batch for what the datagrams make us send: READ
	 * responses to requests that came together go out together (a
	 * response's last packet and the next one's first, both with an
	 * AETH, share a send; ib_read_bw 64 KiB over UDP, alternating
	 * runs: 3.20 -> 3.68 GiB/s), NAKs and ACKs too. */
	rc_tx_batch_begin();
	for (int i = 0; i < n; i++) {
		struct net_udp_msg *m = &eng->msgs[i];
		struct net_udp_msg one;

		if (!m->seg || m->truncated) {
			rx_pkt(eng, m, h);
			continue;
		}
		/* GRO: several packets back to back, each seg bytes but the
		 * last; each is a whole RoCE packet with its own ICRC.
		 * Responses (ACKs, read and atomic responses) first, then
		 * requests: an ACK that rode with the peer's next request
		 * would have come first from a NIC that acknowledges at once,
		 * so its send completion goes in first too.  Applications
		 * count on that order: perftest's latency tests with -e take
		 * one event and poll one CQ per step, and the other order
		 * left both ends waiting for an event (ib_send_lat -e over
		 * UDP: 1 run in ~3 hung).  The two are separate state machines
		 * (each keeps its own packets' order), so the requests lose
		 * nothing by waiting for the responses of the same buffer. */
		one = *m;
		one.seg = 0;
		for (int pass = 0; pass < 2; pass++) {
			for (uint32_t off = 0; off < m->len; off += m->seg) {
				bool req = wire_opcodes[m->buf[off]].caps & WIRE_IS_REQ;

				if (req != (pass == 1))
					continue;
				one.buf = m->buf + off;
				one.len = m->len - off < m->seg ? m->len - off : m->seg;
				one.id_hint = (uint16_t)(off / m->seg);
				rx_pkt(eng, &one, h);
			}
		}
	}
	rc_tx_batch_end();
	return n > 0 ? n : 0;
}

static int rx_sock(struct srn_engine *eng, int vlen)
{
	struct rx_hold h = { NULL, 0, 0 };
	int n = rx_sock_read(eng, &eng->udp, vlen, &h);
	bool full = n == ENGINE_SOCK_BATCH;

	/* IPv6 beside IPv4 (engine.h): read after udp, as roce below */
	for (int k = 0; k < 2 && !full; k++) {
		struct net_udp *u6 = k ? &eng->roce6 : &eng->udp6;
		int r;

		if (u6->fd < 0)
			continue;
		r = rx_sock_read(eng, u6, vlen, &h);
		full = r == ENGINE_SOCK_BATCH;
		n = full ? ENGINE_SOCK_BATCH : n + r;
		if (!full && n >= ENGINE_SOCK_BATCH)
			n = ENGINE_SOCK_BATCH - 1;
	}

	/* Port 4791 as a second socket (net/steer.h, or taken over): its
	 * datagrams too, when one may come from another host for us (a
	 * probe or a stray one waits for the engine thread).  A plain load
	 * when there is none, no system call. */
	if (__builtin_expect(eng->roce.fd >= 0, 0) &&
	    (thread_engine == eng || atomic_load_explicit(&eng->remote_qps, memory_order_relaxed) > 0)) {
		int r = rx_sock_read(eng, &eng->roce, vlen, &h);

		full = full || r == ENGINE_SOCK_BATCH;
		n += r;
		if (!full && n >= ENGINE_SOCK_BATCH)
			n = ENGINE_SOCK_BATCH - 1; /* ENGINE_SOCK_BATCH says "more waiting" */
		else if (full)
			n = ENGINE_SOCK_BATCH;
	}
	/* RoCE packets make the socket busy; a census probe or a doorbell
	 * (zero length: the inbox has data) does not (srn_engine_sock_quiet) */
	if (h.pkts)
		atomic_store_explicit(&eng->sock_rx_ns, net_coarse_ns(), memory_order_relaxed);
	rx_end(eng, &h);
	/* ACKs held back in the batch; after a full one, with the next, but
	 * not for ever: under a stream that keeps every batch full, a QP
	 * whose last packets are in it waits for its ACK (one stopped by the
	 * shared window, requester.c, would wait for its ACK timeout). */
	if (full && ++rx_full_run < ENGINE_ACK_SKIP_MAX) {
		rx_acks_owed = eng;
	} else {
		rx_full_run = 0;
		rx_acks_owed = NULL;
		responder_rx_batch_end(eng);
	}
	return n;
}

int srn_engine_rx_sock(struct srn_engine *eng)
{
	return rx_sock(eng, ENGINE_SOCK_BATCH);
}

/* recvmmsg asks for up to vlen datagrams without waiting: when fewer are
 * queued it returns only after one more receive that finds none (~0.3 us
 * here), which a polling application would wait for before it sees its
 * completion.  So an application thread's poll asks for one datagram
 * while they come one at a time (a ping-pong: a message and its ACK
 * arrive as one GRO datagram, with empty polls in between), and for a
 * whole batch once two polls in a row found one (a stream) until a batch
 * brings just one again. */
int srn_engine_rx_poll(struct srn_engine *eng)
{
	int vlen = eng->rx_poll_one ? 1 : ENGINE_SOCK_BATCH;
	int n = rx_sock(eng, vlen);

	if (n <= 0)
		eng->rx_poll_streak = 0;
	else if (vlen > 1)
		eng->rx_poll_one = n == 1;
	else if (++eng->rx_poll_streak >= 2)
		eng->rx_poll_one = false;
	return n;
}

