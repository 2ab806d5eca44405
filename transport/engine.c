/* transport/engine: the per-context NIC engine (see engine.h).  Receives
 * in batches, checks each packet (decode, ICRC, QP) and routes it on one
 * bit: requests to the responder, responses to the completer. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "net/mode.h"
#include "net/clock.h"
#include "net/pcap.h"
#include "net/shm_ring.h"
#include "net/thread.h"
#include "transport/rc.h"
#include "transport/gsi_forward.h"
#include "transport/link_watch.h"
#include "transport/qp_forward.h"
#include "transport/steer.h"
#include "net/settings.h"

/* A receive slot holds a whole GRO buffer (up to 64 KiB of packets). */
enum { ENGINE_BUF = 65536, ENGINE_BATCHES_PER_WAKE = 16 };

const char *const srn_counter_names[SRN_CNT_MAX] = {
#define SRN_CNT_NAME(n) #n,
	SRN_COUNTERS(SRN_CNT_NAME)
#undef SRN_CNT_NAME
};

uint64_t srn_now_ns(void)
{
	return net_now_ns();
}

void srn_dbg(struct srn_engine *eng, const char *fmt, ...)
{
	static struct srn_ratelimit rl = { .reason = "debug", .per_sec = 200 };
	char msg[512];
	va_list ap;

	if (!srn_log_on(eng, SRN_LOG_DEBUG))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	srn_log(eng, SRN_LOG_DEBUG, &rl, "%s", msg); /* (one write per line) */
}

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

/* The application polls now: its last poll is under ENGINE_APP_ACTIVE_NS
 * old (its stamp may be later than now). */
enum { ENGINE_APP_ACTIVE_NS = 10 * 1000 };

static bool app_polling(struct srn_engine *eng, uint64_t now)
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

static bool app_gone(struct srn_engine *eng, uint64_t now)
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

static bool app_sending(struct srn_engine *eng, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&eng->app_send_ns, memory_order_relaxed);

	return last + ENGINE_APP_SEND_NS > now;
}

/* The last sign of an application thread at work: a poll or a send. */
static uint64_t app_active_ns(struct srn_engine *eng)
{
	uint64_t p = atomic_load_explicit(&eng->app_poll_ns, memory_order_relaxed);
	uint64_t s = atomic_load_explicit(&eng->app_send_ns, memory_order_relaxed);

	return p > s ? p : s;
}

/* A QP deadline: the QPs are scanned once it has passed (run_qp_timers).
 * While the engine defers to an application thread that polls (or did
 * within ENGINE_APP_GONE_NS), that thread runs them
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

/* ---- QP table ------------------------------------------------------------ */

int srn_engine_add_qp(struct srn_engine *eng, struct srn_rc_state *rc)
{
	int ret = 0;

	if (rc->qpn >= NET_REG_SLOTS)
		return EINVAL;
	pthread_mutex_lock(&eng->qps_lock);
	if (eng->n_all == eng->cap_all) {
		uint32_t cap = eng->cap_all ? eng->cap_all * 2 : 16;
		void *p = realloc(eng->all, cap * sizeof(*eng->all));

		if (!p) {
			ret = ENOMEM;
			goto out;
		}
		eng->all = p;
		eng->cap_all = cap;
	}
	eng->all[eng->n_all++] = rc;
	eng->by_qpn[rc->qpn] = rc;
out:
	pthread_mutex_unlock(&eng->qps_lock);
	return ret;
}

void srn_engine_del_qp(struct srn_engine *eng, struct srn_rc_state *rc)
{
	pthread_mutex_lock(&eng->qps_lock);
	if (rc->qpn < NET_REG_SLOTS && eng->by_qpn[rc->qpn] == rc)
		eng->by_qpn[rc->qpn] = NULL;
	for (uint32_t i = 0; i < eng->n_all; i++)
		if (eng->all[i] == rc) {
			eng->all[i] = eng->all[--eng->n_all];
			break;
		}
	pthread_mutex_unlock(&eng->qps_lock);
}

/* Get a QP by number and pin it (inflight) so destroy waits for us. */
static struct srn_rc_state *get_qp(struct srn_engine *eng, uint32_t qpn)
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

static void put_qp(struct srn_rc_state *rc)
{
	atomic_fetch_sub(&rc->inflight, 1);
}

/* ---- receive ------------------------------------------------------------- */

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
		put_qp(h->rc);
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
	if (svc != WIRE_RC && svc != WIRE_UC && svc != WIRE_UD) {
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
	rc = get_qp(eng, pkt.dqpn);
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
		put_qp(rc);
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
			   rc->type == IBV_QPT_UC ? WIRE_UC : WIRE_RC)) {
		rc_count(rc, SRN_CNT_rx_drop_not_rc); /* wrong service for the QP */
	} else if (svc == WIRE_UD) {
		ud_rx(rc, &pkt, &l3, m->len);
	} else if (!rc->path_ok) {
		rc_count(rc, SRN_CNT_rx_drop_no_path);
	} else if (svc == WIRE_UC) {
		uc_responder_rx(rc, &pkt);
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
	return get_qp(eng, qpn);
}

void srn_engine_put_qp(struct srn_rc_state *rc)
{
	put_qp(rc);
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

/* This thread is an engine thread (engine_main). */
/* The engine this thread runs, if it is an engine thread. */
static __thread const struct srn_engine *thread_engine;

bool srn_engine_on_thread(const struct srn_engine *eng)
{
	return thread_engine == eng;
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

/* ---- timers -------------------------------------------------------------- */

/* Every QP is looked at (under its lock, which an application thread may
 * hold) only once the earliest QP deadline has passed: the engine's
 * deferral steps fire far more often.  Any thread, no lock held. */
/* [IPv6]:4791 has no takeover FIFO (net/roce_port.h): an engine with an
 * IPv6 socket but not the port tries to bind it again, at most every
 * ROCE6_RETRY_NS while its QPs have timers due or talk to another host
 * (after the holder went, what other hosts send it goes unanswered until
 * then, and is resent).
 * From the engine or an application thread: set under rx_lock, as roce. */
#define ROCE6_RETRY_NS (100 * 1000 * 1000ull)

static int epoll_add(int epfd, int fd, uint32_t events);

/* A QP of ours talks to another host while [IPv6]:4791 is not ours. */
static bool roce6_wanted(struct srn_engine *eng)
{
	return __builtin_expect(eng->udp6.fd >= 0, 0) && eng->roce6.fd < 0 &&
	       atomic_load_explicit(&eng->remote_qps, memory_order_relaxed) > 0;
}

static void roce6_retry(struct srn_engine *eng, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&eng->roce6_try_ns, memory_order_relaxed);
	struct net_udp u;

	if (eng->udp6.fd < 0 || eng->roce6.fd >= 0 || now - last < ROCE6_RETRY_NS ||
	    !atomic_compare_exchange_strong(&eng->roce6_try_ns, &last, now))
		return;
	if (net_udp_open_at(&u, AF_INET6, eng->udp6.local.ip, SRN_ROCE_UDP_PORT))
		return;
	if (epoll_add(eng->epfd, u.fd, EPOLLIN | EPOLLONESHOT)) {
		net_udp_close(&u);
		return;
	}
	pthread_mutex_lock(&eng->rx_lock);
	eng->roce6 = u;
	pthread_mutex_unlock(&eng->rx_lock);
	srn_dbg(eng, "IPv6 UDP port %u taken", SRN_ROCE_UDP_PORT);
}

void srn_engine_run_qp_timers(struct srn_engine *eng, uint64_t now)
{
	roce6_retry(eng, now);
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

		pthread_mutex_lock(&rc->qp->lock);
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
		put_qp(rc);
	}
	free(snap);
	if (next)
		srn_engine_arm(eng, next);
}

/* The timerfd fired: nothing is programmed any more. */
static void timer_fired(struct srn_engine *eng)
{
	pthread_mutex_lock(&eng->timer_lock);
	eng->timer_armed_ns = 0;
	pthread_mutex_unlock(&eng->timer_lock);
	srn_engine_run_qp_timers(eng, srn_now_ns());
}

/* Before the engine sleeps: the timer must fire by the next QP deadline,
 * unless an application thread that polls takes care of it (see
 * srn_engine_arm). */
static void timer_rearm(struct srn_engine *eng)
{
	pthread_mutex_lock(&eng->timer_lock);
	if (eng->qp_due_ns && (!atomic_load_explicit(&eng->deferring, memory_order_relaxed) ||
			       app_gone(eng, srn_now_ns())))
		timer_program_locked(eng, eng->qp_due_ns);
	pthread_mutex_unlock(&eng->timer_lock);
}

/* ---- thread -------------------------------------------------------------- */

/* Drain the socket (bounded).  A blocking lock, not trylock: the socket
 * is re-armed after this, and re-armed with packets still waiting it
 * would wake us again at once. */
static void engine_rx(struct srn_engine *eng)
{
	pthread_mutex_lock(&eng->rx_lock);
	for (int b = 0; b < ENGINE_BATCHES_PER_WAKE; b++) {
		atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_rx_batches], 1,
					  memory_order_relaxed);
		if (srn_engine_rx_batch(eng) < ENGINE_BATCH)
			break;
	}
	srn_engine_rx_done(eng);
	pthread_mutex_unlock(&eng->rx_lock);
}

/* One batch if no application thread is receiving right now (it holds
 * rx_lock a few microseconds at a time: wait for it that long, no more).
 * Returns the packets read. */
static int engine_rx_try(struct srn_engine *eng, uint64_t wait_ns)
{
	uint64_t end = 0;
	int n;

	while (pthread_mutex_trylock(&eng->rx_lock)) {
		uint64_t now = srn_now_ns();

		if (!end)
			end = now + wait_ns;
		else if (now >= end)
			return 0;
		sched_yield();
	}
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_rx_batches], 1, memory_order_relaxed);
	n = srn_engine_rx_batch(eng);
	srn_engine_rx_done(eng);
	pthread_mutex_unlock(&eng->rx_lock);
	return n;
}

/* While an application thread polls its CQ it receives inline
 * (srn_transport_progress); the engine thread then stays out of the way:
 * waking it for every packet would only steal a CPU from the poller (this
 * machine may have 2 cores: two spinning applications and one engine
 * thread woken per packet time-slice, the applications' polls go stale,
 * and the engine keeps being woken) and contend with it for rx_lock and
 * the QP locks.  The socket is in the epoll set one-shot.  When a packet
 * wakes the engine and an application thread polled within
 * ENGINE_APP_IDLE_NS, the engine reads what is there (awake anyway) and
 * leaves the socket disarmed; it looks in again when a deferral step ends
 * (the timeout of its epoll wait): the next step is twice as long (up to
 * ENGINE_DEFER_MAX_NS), or the shortest again when packets were waiting
 * and the application had not polled for ENGINE_APP_IDLE_NS (it does not
 * drain the socket: it spins on memory between its polls, like
 * ib_write_lat's target; see also requester_ack_rides, and
 * srn_engine_kick_spin for a poller that hands the socket back when it
 * may go to spin on memory).  The engine takes
 * over (reads and re-arms the socket) when a whole step passed without a
 * poll and either the application waits for a completion event (a CQ of
 * ours is armed) or its last poll is ENGINE_APP_GONE_NS old (it went
 * away, or computes); a poller only descheduled for a while keeps its
 * socket (see app_gone). */
enum {
	ENGINE_APP_IDLE_NS = 50 * 1000,
	ENGINE_DEFER_MIN_NS = 10 * 1000,
	/* Each look costs a wake-up, and on a 2-CPU host with two pollers
	 * takes a CPU from one of them for 10-20 us (measured: at 200 us
	 * steps, ~1 ping-pong in 20 on each side paid it; ib_send_lat 2 B
	 * avg 10-15 us for a typical 5.5; at 1 ms steps, the 1 % of UDP
	 * ib_send_lat's exchanges that met one made its 99th percentile
	 * 12-14 us for a median of 2.8, at 4 ms 4.2-5.7).  The longest
	 * step is about what a packet may wait when the application stops
	 * polling without arming a CQ (the first step end after that reads
	 * the socket; arming one brings the engine at once,
	 * srn_transport_cq_armed): at most half the shortest ACK timeout
	 * of the engine's RC QPs, whose peers likely use the same (see
	 * defer_max_ns), and never below the 1 ms this transport clamps
	 * ACK timeouts to.  With same-host peers (an inbox) the engine is
	 * also the inbox's reader when the application stops: shorter. */
	ENGINE_DEFER_MAX_NS = 4000 * 1000,
	ENGINE_DEFER_FLOOR_NS = 1000 * 1000,
	/* Only for applications that never left packets to a step's end
	 * in the last ENGINE_FOUND_RECENT_NS: one that spins on memory now
	 * and then (UDP ib_write_lat: ~30 exchanges in 20000 waited for a
	 * step's end, up to 4 ms each) keeps 1 ms steps. */
	ENGINE_FOUND_RECENT_NS = 100 * 1000 * 1000,
	ENGINE_DEFER_MAX_SHM_NS = 200 * 1000,
	/* how long the engine waits for an application thread's receive */
	ENGINE_RX_WAIT_NS = 5 * 1000,
};

struct engine_defer {
	bool on;                     /* socket left disarmed */
	bool parked;                 /* sockets out of the epoll set */
	unsigned int found_run;      /* step ends in a row that found packets
	                              * the application left in the socket */
	uint64_t found_ns;           /* the last such step end */
	uint64_t since;              /* start of the current deferral */
	uint64_t step;               /* its length */
};

static void arm_fd(struct srn_engine *eng, int fd, int op)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.fd = fd };

	/* (ADD finds it in the set when a 4791 socket taken over while
	 * parked went in already, or a poller put it back meanwhile:
	 * srn_engine_kick_spin) */
	if (epoll_ctl(eng->epfd, op, fd, &ev) && op == EPOLL_CTL_ADD && errno == EEXIST)
		epoll_ctl(eng->epfd, EPOLL_CTL_MOD, fd, &ev);
}

/* The sockets, one-shot: the main one and a taken-over 4791 (both are
 * read by every receive, so they are deferred and re-armed together). */
static void arm_socket(struct srn_engine *eng, struct engine_defer *d)
{
	int op = d->parked ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;

	d->parked = false;
	arm_fd(eng, eng->udp.fd, op);
	if (eng->udp6.fd >= 0)
		arm_fd(eng, eng->udp6.fd, op);
	if (eng->roce6.fd >= 0)
		arm_fd(eng, eng->roce6.fd, op);
	if (eng->roce.fd >= 0)
		arm_fd(eng, eng->roce.fd, op);
	/* (after the arm: see srn_engine_sock_unpark) */
	atomic_store(&eng->sock_parked, false);
}

/* While a poller has the sockets they leave the epoll set, not just stay
 * disarmed: a disarmed one-shot entry still hangs on the socket's wait
 * queue, and every datagram that arrives then walks it (a wake-up call
 * under irq-off locks).  Measured with a plain UDP ping-pong (GSO pair
 * each way): sendmsg 1.50 -> 1.87 us and 2.11 -> 2.31 us one way with a
 * disarmed entry on each socket.  Costs an epoll_ctl when a deferral
 * starts and one when the engine takes over, both off the data path. */
static void park_socket(struct srn_engine *eng, struct engine_defer *d)
{
	if (d->parked)
		return;
	d->parked = true;
	epoll_ctl(eng->epfd, EPOLL_CTL_DEL, eng->udp.fd, NULL);
	if (eng->udp6.fd >= 0)
		epoll_ctl(eng->epfd, EPOLL_CTL_DEL, eng->udp6.fd, NULL);
	if (eng->roce6.fd >= 0)
		epoll_ctl(eng->epfd, EPOLL_CTL_DEL, eng->roce6.fd, NULL);
	if (eng->roce.fd >= 0)
		epoll_ctl(eng->epfd, EPOLL_CTL_DEL, eng->roce.fd, NULL);
	/* (after the removal: see srn_engine_sock_unpark) */
	atomic_store(&eng->sock_parked, true);
}

/* The longest deferral step now (see ENGINE_DEFER_MAX_NS). */
static uint64_t defer_max_ns(struct srn_engine *eng)
{
	uint64_t max = ENGINE_DEFER_MAX_NS;

	if (eng->inbox)
		return ENGINE_DEFER_MAX_SHM_NS;
	pthread_mutex_lock(&eng->qps_lock);
	for (uint32_t i = 0; i < eng->n_all; i++) {
		/* 0: waits for ever; a hint, read without the QP's lock */
		uint64_t t = __atomic_load_n(&eng->all[i]->timeout_ns, __ATOMIC_RELAXED);

		if (t && t / 2 < max)
			max = t / 2;
	}
	pthread_mutex_unlock(&eng->qps_lock);
	return max < ENGINE_DEFER_FLOOR_NS ? ENGINE_DEFER_FLOOR_NS : max;
}

/* A deferral step of step ns from now.  Its end is the timeout of the
 * engine's epoll wait (engine_main), not a timerfd: no system call to
 * set it, none to read it. */
static void defer_for(struct srn_engine *eng, struct engine_defer *d, uint64_t now,
		      uint64_t step)
{
	d->on = true;
	atomic_store_explicit(&eng->deferring, true, memory_order_relaxed);
	d->since = now;
	d->step = step;
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_defers], 1, memory_order_relaxed);
}

/* Is an application thread waiting for a completion event (one of our
 * QPs' CQs is armed)?  Then it sleeps in its completion channel rather
 * than polling, and the engine must take every packet at once. */
static bool app_waits_event(struct srn_engine *eng)
{
	bool armed = false;

	pthread_mutex_lock(&eng->qps_lock);
	for (uint32_t i = 0; i < eng->n_all && !armed; i++) {
		struct srn_qp *qp = eng->all[i]->qp;

		armed = (qp->send_cq && srn_cq_armed(qp->send_cq)) ||
			(qp->recv_cq && srn_cq_armed(qp->recv_cq));
	}
	pthread_mutex_unlock(&eng->qps_lock);
	return armed;
}

/* After work the engine keeps polling the socket (yielding its CPU
 * between reads that found nothing) for up to linger_ns since the last
 * packet before it goes back to sleep: under a stream of
 * packets it then never pays a wake-up (10-40 us on this kind of VM), nor
 * does the sender's sendmsg have to wake and yield to it.  Bounded, so an
 * idle engine still sleeps (0% CPU); never on a single CPU, where it would
 * only take the CPU from the thread that sends the next packet; and it
 * stops as soon as an application thread receives inline.
 * SOFTRNIC_ENGINE_SPIN_US overrides the default. */
enum { ENGINE_LINGER_NS = 30 * 1000 };
static uint64_t linger_ns;
static int linger_ncpu;
/* Each engine thread reads these: set once, before any reads them. */
static pthread_once_t linger_once = PTHREAD_ONCE_INIT;

static void linger_init(void)
{
	bool given;
	long us = srn_setting(SRN_SET_ENGINE_SPIN_US, &given);
	cpu_set_t set;
	int ncpu = 1;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		ncpu = CPU_COUNT(&set);
	linger_ncpu = ncpu;
	/* On by default: a target whose application does not poll (ib_read_lat,
	 * ib_atomic_lat) then answers the next request without a wake-up
	 * (measured here: 31-40 -> 8-9 us a round trip).  It used to hurt
	 * ib_write_lat (4 spinners on 2 CPUs); now that the engine threads
	 * stay out of a polled exchange, and cpu_is_free() stops it while
	 * threads wait for a CPU, it does not (measured). */
	linger_ns = ncpu > 1 ? ENGINE_LINGER_NS : 0;
	if (given)
		linger_ns = (uint64_t)us * 1000;
}

static int loadavg_fd = -1;
static pthread_once_t loadavg_once = PTHREAD_ONCE_INIT;

static void loadavg_open(void)
{
	loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
}

/* Is a CPU free for us to spin on?  /proc/loadavg's 4th field is the
 * number of runnable threads right now, us included.  When threads wait
 * for a CPU (say, ib_write_lat spinning on memory on both cores), a
 * spinning engine would be descheduled for a whole time slice: sleeping
 * in epoll and being woken is then far quicker. */
static bool cpu_is_free(void)
{
	char buf[128];
	ssize_t n;
	const char *p;
	int field = 0;

	pthread_once(&loadavg_once, loadavg_open);
	if (loadavg_fd < 0)
		return false;
	n = pread(loadavg_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = 0;
	for (p = buf; *p && field < 3; p++)
		if (*p == ' ')
			field++;
	return atoi(p) <= linger_ncpu;
}

static void engine_linger(struct srn_engine *eng, struct engine_defer *d)
{
	uint64_t now = srn_now_ns(), until = now + linger_ns;
	unsigned int idle = 0;

	if (!linger_ns || !cpu_is_free())
		return;
	/* out of the epoll set while we read it ourselves (park_socket) */
	park_socket(eng, d);
	while (now < until) {
		uint64_t last = atomic_load_explicit(&eng->app_poll_ns, memory_order_relaxed);
		int n;

		if (now - last < ENGINE_APP_ACTIVE_NS || app_sending(eng, now))
			break; /* an application thread receives, or sends */
		if (++idle % 8 == 0 && !cpu_is_free())
			break;
		if (pthread_mutex_trylock(&eng->rx_lock))
			break;
		n = srn_engine_rx_batch(eng);
		pthread_mutex_unlock(&eng->rx_lock);
		now = srn_now_ns();
		if (n > 0) {
			until = now + linger_ns;
			idle = 0;
		} else {
			/* Nothing came: give the CPU to whoever waits for it.
			 * A loopback sender's wake-up can put us on its CPU,
			 * where spinning took its time (ib_write_bw 4 KiB x
			 * 20000 over UDP: 1.8 GB/s lingering, 3.8 without, 4.1
			 * yielding).  Alone on a CPU, the yield returns at
			 * once and we linger as before. */
			sched_yield();
			now = srn_now_ns();
		}
	}
	/* (our own list: no lock needed to send what full batches left) */
	srn_engine_rx_done(eng);
}

/* The engine takes the socket back: reads, then sleeps on it. */
static void take_over(struct srn_engine *eng, struct engine_defer *d)
{
	d->on = false;
	d->found_run = 0;
	atomic_store_explicit(&eng->deferring, false, memory_order_relaxed);
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_takeovers], 1, memory_order_relaxed);
	engine_rx(eng);
	engine_linger(eng, d);
	arm_socket(eng, d);
}

/* The socket has packets (fresh = from epoll), or the timer fired while
 * deferring (watchdog: the deferral step is over). */
static void socket_ready(struct srn_engine *eng, struct engine_defer *d, bool fresh,
			 bool watchdog)
{
	uint64_t now = srn_now_ns();
	uint64_t last = app_active_ns(eng);
	bool kicked;

	if (!fresh) {
		uint64_t step = d->step * 2;

		if (!d->on)
			return;
		if (!watchdog && now < d->since + d->step)
			return; /* a QP timer fired: the deferral still runs */
		/* (the QP list is looked at only for steps past the floor;
		 * and steps stay at the floor for ENGINE_FOUND_RECENT_NS
		 * after one found packets the application had left: such an
		 * application may leave the next ones too, and each waits
		 * for a step's end) */
		if (step > (eng->inbox ? ENGINE_DEFER_MAX_SHM_NS : ENGINE_DEFER_FLOOR_NS)) {
			uint64_t max = d->found_ns && now - d->found_ns < ENGINE_FOUND_RECENT_NS ?
					       ENGINE_DEFER_FLOOR_NS : defer_max_ns(eng);

			if (step > max)
				step = max;
		}
		if (last <= d->since && (app_gone(eng, now) || app_waits_event(eng))) {
			/* no poll for a while, or the application waits
			 * for an event: the engine takes over */
			take_over(eng, d);
			return;
		}
		/* The application polls (or was only off its CPU for a
		 * moment): the next step is twice as long.  Packets
		 * waiting at two step ends in a row: the application does
		 * not drain the socket itself (it spins on memory between
		 * its polls): shortest steps.  Not at the first: that is
		 * mostly a poller the scheduler took off its CPU, which
		 * drains the socket when it is back, and the ~7 wake-ups
		 * of a new ramp of steps would each take a CPU from a
		 * spinner (UDP ib_write_lat, 10 alternating runs: 99th
		 * percentile 44-85 -> 16-21 us, average 5.0-7.0 -> 4.2-5.4;
		 * riostream's memory-spinning ping-pong unchanged).  (An
		 * application thread polling right now takes them itself:
		 * no contention for rx_lock.) */
		if (!app_sending(eng, now) && !app_polling(eng, now) &&
		    engine_rx_try(eng, 0) > 0 && last + ENGINE_APP_IDLE_NS <= now) {
			d->found_ns = now;
			if (step > ENGINE_DEFER_FLOOR_NS)
				step = ENGINE_DEFER_FLOOR_NS;
			if (++d->found_run >= 2)
				step = ENGINE_DEFER_MIN_NS;
		} else {
			d->found_run = 0;
		}
		defer_for(eng, d, now, step);
		return;
	}
	/* Deferring, yet woken by the socket: an application thread put it
	 * back in the set (srn_engine_kick_spin), as it may now spin on its
	 * memory.  The packet is read now, even while that thread sends, and
	 * the current step goes on. */
	kicked = d->on;
	if (kicked)
		d->parked = false;
	if (last + ENGINE_APP_IDLE_NS > now && !app_waits_event(eng)) {
		/* Deferring first: QP deadlines armed while we read are then
		 * left to the poller (srn_engine_arm).  Awake anyway, read
		 * what is there (unless the application is at it). */
		defer_for(eng, d, now, kicked ? d->step : ENGINE_DEFER_MIN_NS);
		park_socket(eng, d);
		if (kicked || !app_sending(eng, now))
			engine_rx_try(eng, ENGINE_RX_WAIT_NS);
		return;
	}
	take_over(eng, d);
}

/* SOFTRNIC_ENGINE_RT=P (experimental): run the engine thread SCHED_FIFO
 * at priority P so a packet wakes it at once even when application
 * threads spin on every core; it never spins, so it cannot starve them. */
static void engine_sched(struct srn_engine *eng)
{
	long rt = srn_setting(SRN_SET_ENGINE_RT, NULL);
	struct sched_param sp = { 0 };
	int e;

	if (rt <= 0)
		return;
	sp.sched_priority = (int)rt;
	e = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	if (e)
		srn_dbg(eng, "SOFTRNIC_ENGINE_RT=%ld: %s", rt, strerror(e));
}

/* Same-host inbox: before the engine blocks, make sure no packet can sit
 * in it while nobody looks (net/shm_ring.c, "Waking the consumer").
 * While an application thread polls and the inbox carries traffic, the
 * application drains it inline; the engine then only looks in again after
 * a deferral, as for the socket, and takes over when the application
 * stops polling.  Otherwise the engine raises the inbox's sleeping flag,
 * so the next sender rings the doorbell, and checks the lanes once more.
 * Returns 1 when the flag is up, 0 when a deferral timer will wake us, -1
 * when packets were waiting (processed: look again). */
enum {
	ENGINE_SHM_RECENT_NS = 10 * 1000 * 1000, /* the inbox carries traffic */
	/* the application polls: even a busy poller may not run for a
	 * while on a loaded 2-CPU host; below this it is not woken by
	 * doorbells (measured: 100 us gave a doorbell every other packet
	 * and 10-100x the ping-pong latency, 1 ms a few per thousand) */
	ENGINE_SHM_APP_NS = 1000 * 1000,
};

static int engine_shm_idle(struct srn_engine *eng, struct engine_defer *d)
{
	uint64_t now, last, rx;

	if (!eng->inbox || d->on)
		return 0;
	now = srn_now_ns();
	last = atomic_load_explicit(&eng->app_poll_ns, memory_order_relaxed);
	rx = atomic_load_explicit(&eng->shm_rx_ns, memory_order_relaxed);
	/* (an application thread may have stamped them after now) */
	if (last + ENGINE_SHM_APP_NS > now && rx + ENGINE_SHM_RECENT_NS > now) {
		/* Short steps: on a loaded host the application is often not
		 * running, and then the engine is the one to take the packets
		 * (measured: 50 us steps cost 10x the ping-pong latency).  The
		 * price: an application that sleeps in its completion channel
		 * right after polling has the engine look every 10 us for up
		 * to ENGINE_SHM_APP_NS. */
		defer_for(eng, d, now, ENGINE_DEFER_MIN_NS);
		return 0;
	}
	atomic_store(&eng->shm_asleep, true);
	net_shm_inbox_set_sleeping(eng->inbox, true);
	if (!net_shm_inbox_pending(eng->inbox))
		return 1;
	net_shm_inbox_set_sleeping(eng->inbox, false);
	atomic_store(&eng->shm_asleep, false);
	engine_rx(eng);
	return -1;
}

/* epoll_wait until end_ns at the latest (a deferral step's end):
 * epoll_pwait2 for its nanoseconds, or where the kernel lacks it (before
 * 5.11) epoll_wait rounded up to the millisecond. */
static int wait_step(struct srn_engine *eng, struct epoll_event *ev, int max, uint64_t end_ns)
{
	static atomic_bool no_pwait2;
	uint64_t now = srn_now_ns(), left = end_ns > now ? end_ns - now : 0;

	if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
		struct timespec to = { (time_t)(left / 1000000000ull),
				       (long)(left % 1000000000ull) };
		int n = epoll_pwait2(eng->epfd, ev, max, &to, NULL);

		if (n >= 0 || errno != ENOSYS)
			return n;
		atomic_store_explicit(&no_pwait2, true, memory_order_relaxed);
	}
	return epoll_wait(eng->epfd, ev, max, (int)((left + 999999) / 1000000));
}

/* ---- port 4791 ------------------------------------------------------------ */

/* Back-off between takeover tries while the holder cannot be watched,
 * from 1 ms doubling to 1 s: it keeps no write end yet (it just won), or
 * went between our bind and our watch (the next try wins), or is no
 * softrnic engine of this kind (kernel Soft-RoCE, an older build): then
 * the engine looks once a second. */
enum { ROCE_RETRY_MIN_NS = 1000 * 1000, ROCE_RETRY_MAX_NS = 1000 * 1000 * 1000 };

static int epoll_add(int epfd, int fd, uint32_t events);

static void roce_retry_later(struct srn_engine *eng, uint64_t now)
{
	uint64_t delay = ROCE_RETRY_MAX_NS;

	if (eng->roce_fails < 10)
		delay = (uint64_t)ROCE_RETRY_MIN_NS << eng->roce_fails;
	if (delay > ROCE_RETRY_MAX_NS)
		delay = ROCE_RETRY_MAX_NS;
	eng->roce_fails++;
	/* the timeout of the engine's epoll wait: no descriptor for it */
	eng->roce_retry_ns = now + delay;
}

/* After a try at 4791 (net_roce_port_begin first): keep a write end if we
 * hold it, else watch its holder (or try again later).  Engine thread, or
 * the starting thread before the engine thread runs. */
static void roce_settle(struct srn_engine *eng)
{
	int fd;

	if (srn_engine_holds_roce_port(eng)) {
		net_roce_port_end(&eng->roce_port, true,
				  eng->roce.fd >= 0 ? eng->roce.fd : eng->udp.fd);
		eng->roce_fails = 0;
		return;
	}
	fd = net_roce_port_end(&eng->roce_port, false, -1);
	if (fd >= 0 && epoll_add(eng->epfd, fd, EPOLLIN) == 0)
		return;
	/* (a read end not watched stays open until the next try: an engine
	 * keeps one descriptor for this whatever its state) */
	roce_retry_later(eng, srn_now_ns());
}

/* Bind 4791 for this engine's address if it is free (engine thread). */
static void roce_try(struct srn_engine *eng)
{
	struct net_udp u;

	net_roce_port_begin(&eng->roce_port, eng->udp.local.family, eng->udp.local.ip);
	if (!srn_engine_holds_roce_port(eng) &&
	    net_udp_open_roce(&u, eng->udp.local.family, eng->udp.local.ip,
			      srn_steer_roce_flags(eng)) == 0) {
		if (epoll_add(eng->epfd, u.fd, EPOLLIN | EPOLLONESHOT)) {
			net_udp_close(&u);
		} else {
			/* application threads receive from it under rx_lock */
			pthread_mutex_lock(&eng->rx_lock);
			eng->roce = u;
			pthread_mutex_unlock(&eng->rx_lock);
			atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_roce_port_taken], 1,
						  memory_order_relaxed);
			srn_dbg(eng, "%s UDP port %u (our own port: %u)",
				srn_steer_roce_flags(eng) ? "joined" : "took over",
				SRN_ROCE_UDP_PORT, eng->udp.local.port);
			srn_steer_joined(eng);
		}
	}
	if (!srn_engine_holds_roce_port(eng))
		eng->roce_fail_ns = srn_now_ns();
	roce_settle(eng);
}

/* The watched FIFO reported ev: a hang-up is the holder letting go. */
static void roce_watch_event(struct srn_engine *eng, uint32_t ev)
{
	uint64_t now = srn_now_ns();

	if (!(ev & (EPOLLHUP | EPOLLERR))) {
		net_roce_port_drain(&eng->roce_port);
		return;
	}
	/* (closed by the next try's net_roce_port_begin) */
	epoll_ctl(eng->epfd, EPOLL_CTL_DEL, eng->roce_port.fd, NULL);
	/* A holder that went: try at once.  But a hang-up within a second
	 * of a lost try backs off: the holder keeps no write end (the
	 * hang-up came when our own closed), or engines trying together
	 * keep waking each other with their passing write ends. */
	if (now - eng->roce_fail_ns > ROCE_RETRY_MAX_NS) {
		eng->roce_fails = 0;
		roce_try(eng);
	} else {
		roce_retry_later(eng, now);
	}
}

/* engine_main's wait: until the deferral step's end or the next takeover
 * try, whichever is first (*step_end: the step's).  0: neither, no
 * timeout. */
static uint64_t wait_end(struct srn_engine *eng, const struct engine_defer *d, bool *step_end)
{
	uint64_t end = d->on ? d->since + d->step : 0;

	*step_end = d->on;
	if (__builtin_expect(eng->roce_retry_ns != 0, 0) && (!end || eng->roce_retry_ns < end)) {
		end = eng->roce_retry_ns;
		*step_end = false;
	}
	if (roce6_wanted(eng)) {
		uint64_t r6 = atomic_load_explicit(&eng->roce6_try_ns, memory_order_relaxed) +
			      ROCE6_RETRY_NS;

		if (!end || r6 < end) {
			end = r6;
			*step_end = false;
		}
	}
	return end;
}

/* The takeover try due (engine thread). */
static void roce_retry_due(struct srn_engine *eng)
{
	if (__builtin_expect(eng->roce_retry_ns != 0, 0) && srn_now_ns() >= eng->roce_retry_ns) {
		eng->roce_retry_ns = 0;
		roce_try(eng);
	}
	if (roce6_wanted(eng))
		roce6_retry(eng, srn_now_ns());
}

static void *engine_main(void *arg)
{
	struct srn_engine *eng = arg;
	struct epoll_event ev[8];
	struct engine_defer defer = { 0 };
	uint64_t end;
	bool step_end;

	/* SOFTRNIC_ENGINE_NICE=N: the engine does the NIC's work for peers
	 * while local threads may spin on memory (ib_write_lat); a negative
	 * nice lets it preempt them instead of waiting out their time slice
	 * (measured here: ib_write_lat average 160-210 -> ~50 us), at some
	 * cost to CQ-polling latency tests.  Off by default; needs
	 * CAP_SYS_NICE for values below 0 (failure keeps the default). */
	bool nice_set;
	long nice_val = srn_setting(SRN_SET_ENGINE_NICE, &nice_set);

	thread_engine = eng;
	if (nice_set && setpriority(PRIO_PROCESS, (id_t)gettid(), (int)nice_val) < 0)
		srn_dbg(eng, "SOFTRNIC_ENGINE_NICE=%ld: %s", nice_val, strerror(errno));
	engine_sched(eng);
	pthread_once(&linger_once, linger_init);

	for (;;) {
		int idle = engine_shm_idle(eng, &defer), n;

		if (idle < 0)
			continue;
		timer_rearm(eng);
		end = wait_end(eng, &defer, &step_end);
		if (end)
			n = wait_step(eng, ev, 8, end);
		else
			n = epoll_wait(eng->epfd, ev, 8, -1);
		atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_wakes], 1, memory_order_relaxed);
		if (idle > 0) {
			net_shm_inbox_set_sleeping(eng->inbox, false);
			atomic_store(&eng->shm_asleep, false);
		}
		roce_retry_due(eng);
		if (n == 0 && step_end) {
			/* the step is over (QP deadlines passed meanwhile
			 * too, if the application stopped running them) */
			srn_engine_run_qp_timers(eng, srn_now_ns());
			socket_ready(eng, &defer, false, true);
		}
		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;

			if (fd == eng->efd)
				return NULL;
			if (fd == eng->kfd) {
				uint64_t x;

				if (read(eng->kfd, &x, sizeof(x)) < 0 && errno != EAGAIN)
					continue;
				/* a CQ was armed while we deferred */
				if (defer.on && app_waits_event(eng))
					take_over(eng, &defer);
				continue;
			}
			if (fd == eng->tfd) {
				uint64_t x;

				if (read(eng->tfd, &x, sizeof(x)) < 0 && errno != EAGAIN)
					continue;
				timer_fired(eng);
				if (defer.on)
					socket_ready(eng, &defer, false, false);
			} else if (fd == eng->udp.fd ||
				   (eng->udp6.fd >= 0 && fd == eng->udp6.fd) ||
				   (eng->roce6.fd >= 0 && fd == eng->roce6.fd) ||
				   (eng->roce.fd >= 0 && fd == eng->roce.fd)) {
				socket_ready(eng, &defer, true, false);
			} else if (eng->link_fd >= 0 && fd == eng->link_fd) {
				srn_link_watch_event(eng);
			} else if (!eng->roce_port.held && eng->roce_port.fd >= 0 &&
				   fd == eng->roce_port.fd) {
				roce_watch_event(eng, ev[i].events);
			}
		}
	}
	return NULL;
}

static void engine_free(struct srn_engine *eng)
{
	srn_cap_fini(eng);
	if (eng->epfd >= 0)
		close(eng->epfd);
	if (eng->tfd >= 0)
		close(eng->tfd);
	if (eng->efd >= 0)
		close(eng->efd);
	if (eng->kfd >= 0)
		close(eng->kfd);
	srn_link_watch_stop(eng);
	net_shm_inbox_destroy(eng->inbox);
	net_udp_close(&eng->udp);
	net_udp_close(&eng->udp6);
	net_udp_close(&eng->roce6);
	/* the sockets before the FIFO: an engine woken finds 4791 free */
	net_udp_close(&eng->roce);
	/* out of the group: the others count themselves again */
	srn_steer_leave(eng);
	srn_steer_close(eng);
	net_roce_port_close(&eng->roce_port);
	net_registry_close(eng->reg);
	pthread_mutex_destroy(&eng->rx_lock);
	pthread_mutex_destroy(&eng->qps_lock);
	pthread_mutex_destroy(&eng->timer_lock);
	free(eng->msgs);
	free(eng->rxbuf);
	free(eng->by_qpn);
	free(eng->all);
	if (eng->stats)
		net_stats_destroy(eng->stats);
	else
		free(eng->cnt);
	free(eng);
}

static int epoll_add(int epfd, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* IPv6 beside IPv4 (engine.h, udp6): at udp's port number, so the port
 * the registry holds for our QPs reaches us in both families.  Without
 * it (the number taken in IPv6 by someone else) this engine speaks IPv4
 * only and QPs with IPv6 paths see no answer: said in the debug log.
 * Then [IPv6]:4791 if no one holds it (roce6). */
static void open_udp6(struct srn_engine *eng, const struct srn_device *dev)
{
	int i = srn_dev_ipv6_src(dev), ret;

	if (eng->udp.local.family != AF_INET || i < 0)
		return;
	ret = net_udp_open_at(&eng->udp6, AF_INET6, dev->gid[i].raw, eng->udp.local.port);
	if (ret) {
		srn_dbg(eng, "no IPv6 socket at port %u: %s", eng->udp.local.port,
			strerror(-ret));
		return;
	}
	if (net_udp_open_at(&eng->roce6, AF_INET6, dev->gid[i].raw, SRN_ROCE_UDP_PORT) == 0)
		srn_dbg(eng, "IPv6 UDP port %u taken", SRN_ROCE_UDP_PORT);
}

int srn_engine_start(struct srn_context *ctx)
{
	struct srn_device *dev = ctx->dev;
	struct srn_engine *eng;
	const char *pcap = srn_setting_str(SRN_SET_PCAP);
	uint8_t ip[16];
	int family, ret;

	eng = calloc(1, sizeof(*eng));
	if (!eng)
		return ENOMEM;
	eng->ctx = ctx;
	eng->cap.word = &eng->cap.own_word; /* (until srn_cap_init) */
	eng->epfd = eng->tfd = eng->efd = eng->kfd = eng->link_fd = -1;
	eng->udp.fd = -1;
	eng->udp6.fd = -1;
	eng->roce6.fd = -1;
	eng->roce.fd = -1;
	eng->steer.fd = -1;
	eng->roce_port.fd = -1;
	eng->log_level = srn_log_level();
	eng->debug = eng->log_level >= SRN_LOG_DEBUG;
	pthread_mutex_init(&eng->rx_lock, NULL);
	pthread_mutex_init(&eng->qps_lock, NULL);
	pthread_mutex_init(&eng->timer_lock, NULL);

	if (pcap && !net_pcap_enabled()) {
		static atomic_flag warned = ATOMIC_FLAG_INIT;

		ret = net_pcap_open(pcap);
		if (ret && !atomic_flag_test_and_set(&warned))
			fprintf(stderr, "softrnic: SOFTRNIC_PCAP=%s: %s; not capturing\n", pcap,
				strerror(-ret));
	}

	eng->stats = net_stats_create(dev->ibdev.name, srn_counter_names, SRN_CNT_MAX);
	if (eng->stats) {
		eng->cnt = net_stats_values(eng->stats);
	} else {
		srn_dbg(eng, "no stats file (%s): softrnic stats will not see this engine",
			strerror(errno));
		eng->cnt = calloc(SRN_CNT_MAX, sizeof(*eng->cnt));
		if (!eng->cnt) {
			ret = ENOMEM;
			goto fail;
		}
	}
	eng->msgs = calloc(ENGINE_SOCK_BATCH, sizeof(*eng->msgs));
	eng->rxbuf = malloc((size_t)ENGINE_SOCK_BATCH * ENGINE_BUF);
	eng->by_qpn = calloc(NET_REG_SLOTS, sizeof(*eng->by_qpn));
	if (!eng->msgs || !eng->rxbuf || !eng->by_qpn) {
		ret = ENOMEM;
		goto fail;
	}
	for (int i = 0; i < ENGINE_SOCK_BATCH; i++) {
		eng->msgs[i].buf = eng->rxbuf + (size_t)i * ENGINE_BUF;
		eng->msgs[i].cap = ENGINE_BUF;
	}

	eng->reg = net_registry_open(dev->ibdev.name);
	if (!eng->reg) {
		ret = errno ? errno : EIO;
		goto fail;
	}
	/* GID 0 is the interface's address (IPv4-mapped for IPv4). */
	if (dev->num_gids > 0 && dev->gid_family[0] == AF_INET6) {
		family = AF_INET6;
		memcpy(ip, dev->gid[0].raw, 16);
	} else if (dev->num_gids > 0) {
		family = AF_INET;
		memcpy(ip, dev->gid[0].raw + 12, 4);
	} else {
		family = AF_INET;
		ip[0] = 127, ip[1] = 0, ip[2] = 0, ip[3] = 1;
	}
	/* a write end first (net/roce_port.h), for the case we do not get
	 * 4791 and must watch its holder */
	net_roce_port_begin(&eng->roce_port, family, ip);
	ret = -net_udp_open(&eng->udp, family, ip, srn_steer_open(eng, family, ip));
	if (ret)
		goto fail;
	open_udp6(eng, dev);
	if (eng->stats)
		net_stats_set_port(eng->stats, eng->udp.local.port);
	srn_cap_init(eng);
	/* Same-host peers send through our inbox (net/shm_ring.h); without
	 * one they use the socket. */
	if (net_shm_allowed()) {
		eng->inbox = net_shm_inbox_create(dev->ibdev.name, eng->udp.local.port);
		if (!eng->inbox)
			srn_dbg(eng, "no shared-memory inbox (%s): same-host peers use UDP",
				strerror(errno));
	}

	eng->epfd = epoll_create1(EPOLL_CLOEXEC);
	eng->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	eng->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	eng->kfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (eng->epfd < 0 || eng->tfd < 0 || eng->efd < 0 || eng->kfd < 0 ||
	    epoll_add(eng->epfd, eng->udp.fd, EPOLLIN | EPOLLONESHOT) ||
	    (eng->udp6.fd >= 0 && epoll_add(eng->epfd, eng->udp6.fd, EPOLLIN | EPOLLONESHOT)) ||
	    (eng->roce6.fd >= 0 && epoll_add(eng->epfd, eng->roce6.fd, EPOLLIN | EPOLLONESHOT)) ||
	    epoll_add(eng->epfd, eng->tfd, EPOLLIN) ||
	    epoll_add(eng->epfd, eng->efd, EPOLLIN) ||
	    epoll_add(eng->epfd, eng->kfd, EPOLLIN)) {
		ret = errno;
		goto fail;
	}
	srn_link_watch_start(eng);
	/* Steering: every engine joins 4791's group with a second socket
	 * (net/steer.h).  Else 4791 went to the first engine on the address,
	 * which keeps the FIFO's write end; the others, and engines that
	 * cannot join, watch for it to let go. */
	if (srn_engine_holds_roce_port(eng))
		roce_settle(eng);
	else if (srn_steer_roce_flags(eng)) {
		roce_try(eng);
	} else {
		roce_settle(eng);
	}
	ret = net_thread_start(&eng->thread, NULL, engine_main, eng);
	if (ret)
		goto fail;
	eng->thread_running = true;
	ctx->engine = eng;
	return 0;
fail:
	engine_free(eng);
	return ret ? ret : EIO;
}

void srn_transport_cq_armed(struct srn_context *ctx)
{
	struct srn_engine *eng = ctx->engine;
	uint64_t one = 1;

	/* Only while the engine leaves the socket to a poller: an engine
	 * that reads it itself already sees every packet (an application
	 * that waits for events arms its CQs all the time; no system call
	 * then). */
	if (eng && atomic_load_explicit(&eng->deferring, memory_order_relaxed) &&
	    write(eng->kfd, &one, sizeof(one)) < 0)
		(void)0;
}

/* Put the socket back in the engine's epoll set, armed, while it defers:
 * the peer's next packet wakes the engine, and socket_ready reads it at
 * once.  Not an eventfd write that wakes the engine now, as
 * srn_transport_cq_armed does: that cost a wake-up per kick and a new
 * ramp of short deferral steps, each taking a CPU from a spinner (UDP
 * ib_write_lat, 3 runs each: average 3.8-4.4 us and 99th percentile
 * 27-40 us that way, 2.9-3.1 and 7-15 this way).  From any thread: the
 * engine copes with the socket in the set while it thinks it parked it
 * (arm_fd's EEXIST, socket_ready).  A taken-over 4791 socket (cross-host
 * traffic, rare) is left to the step's end. */
void srn_engine_kick_spin(struct srn_engine *eng)
{
	if (!atomic_load_explicit(&eng->deferring, memory_order_relaxed))
		return;
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_spin_kicks], 1, memory_order_relaxed);
	arm_fd(eng, eng->udp.fd, EPOLL_CTL_ADD);
	if (eng->udp6.fd >= 0)
		arm_fd(eng, eng->udp6.fd, EPOLL_CTL_ADD);
	if (eng->roce6.fd >= 0)
		arm_fd(eng, eng->roce6.fd, EPOLL_CTL_ADD);
	if (eng->roce.fd >= 0 && atomic_load_explicit(&eng->remote_qps, memory_order_relaxed) > 0)
		arm_fd(eng, eng->roce.fd, EPOLL_CTL_ADD);
}

/* Quiet sockets (srn_engine_sock_quiet): an application thread that polls
 * an empty CQ whose completions come by the direct path (a peer's WRITEs
 * land in memory it spins on; its send CQ while it posts unsignaled
 * sends, as UCX does) would otherwise make a recvmmsg that finds nothing
 * on every poll, costlier than the peer's whole delivery.  The quiet
 * spell starts ENGINE_SOCK_QUIET_NS after the last datagram, so a
 * conversation over packets keeps its pollers reading, and only the
 * first packet after such a spell waits for the engine thread's
 * wake-up. */
enum { ENGINE_SOCK_QUIET_NS = 100 * 1000 * 1000 };

bool srn_engine_sock_quiet(struct srn_engine *eng, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&eng->sock_rx_ns, memory_order_relaxed);

	return eng->thread_running && now - last >= ENGINE_SOCK_QUIET_NS &&
	       atomic_load_explicit(&eng->win_inflight[0], memory_order_relaxed) <= 0 &&
	       atomic_load_explicit(&eng->win_inflight[1], memory_order_relaxed) <= 0;
}

/* The engine removes the sockets from its set, then says so (park_socket);
 * it puts them back, then says so (arm_socket); a poller that finds the
 * flag up takes it down, then puts them back.  Every removal is followed
 * by the flag going up, so the flag is down only while the sockets are
 * in the set or the engine is reading them itself.  An engine that
 * deferred is woken by the next datagram as by srn_engine_kick_spin. */
void srn_engine_sock_unpark(struct srn_engine *eng)
{
	if (!atomic_load_explicit(&eng->sock_parked, memory_order_relaxed) ||
	    !atomic_exchange(&eng->sock_parked, false))
		return;
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_sock_unparks], 1, memory_order_relaxed);
	arm_fd(eng, eng->udp.fd, EPOLL_CTL_ADD);
	if (eng->udp6.fd >= 0)
		arm_fd(eng, eng->udp6.fd, EPOLL_CTL_ADD);
	if (eng->roce6.fd >= 0)
		arm_fd(eng, eng->roce6.fd, EPOLL_CTL_ADD);
	if (eng->roce.fd >= 0)
		arm_fd(eng, eng->roce.fd, EPOLL_CTL_ADD);
}

void srn_engine_stop(struct srn_context *ctx)
{
	struct srn_engine *eng = ctx->engine;
	uint64_t one = 1;

	if (!eng)
		return;
	if (eng->thread_running) {
		if (write(eng->efd, &one, sizeof(one)) < 0)
			(void)0;
		pthread_join(eng->thread, NULL);
	}
	if (eng->debug) {
		for (int i = 0; i < SRN_CNT_MAX; i++)
			if (eng->cnt[i])
				fprintf(stderr, "softrnic[%d]: %s %llu\n", (int)getpid(),
					srn_counter_names[i],
					(unsigned long long)eng->cnt[i]);
	}
	ctx->engine = NULL;
	engine_free(eng);
}
