/* verbs <-> transport hooks (declared in verbs/srn.h): the only entry
 * points the verbs layer calls into the NIC engine. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "net/mode.h"
#include "net/registry.h"
#include "net/shm_ring.h"
#include "transport/direct.h"
#include "transport/engine_policy.h"
#include "transport/iwarp_qp.h"
#include "transport/rc.h"
#include "transport/steer.h"
#include "verbs/shared_rings.h"

int srn_engine_attach(struct srn_context *ctx)
{
	return srn_engine_start(ctx);
}

void srn_engine_detach(struct srn_context *ctx)
{
	mcast_engine_stop(ctx->engine);
	srn_engine_stop(ctx);
}

int srn_qpn_alloc(struct srn_context *ctx, uint32_t *qpn)
{
	struct srn_engine *eng = ctx->engine;

	int ret;

	if (!eng)
		return ENODEV;
	ret = -net_registry_alloc(eng->reg, eng->udp.local.port, eng->udp.local.family, qpn);
	if (!ret)
		srn_steer_qpn(eng, *qpn);
	return ret;
}

void srn_qpn_free(struct srn_context *ctx, uint32_t qpn)
{
	if (ctx->engine)
		net_registry_free(ctx->engine->reg, qpn);
}

int srn_transport_qp_create(struct srn_qp *qp)
{
	struct srn_engine *eng = qp->ctx->engine;
	struct srn_rc_state *rc;
	int ret;

	if (!eng)
		return ENODEV;
	if (qp->ctx->dev->iwarp)
		return srn_iwqp_create(qp);
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return ENOMEM;
	rc->qp = qp;
	rc->eng = eng;
	rc->qpn = qp->ex.qp_base.qp_num;
	rc->type = qp->ex.qp_base.qp_type;
	if (rc->type == IBV_QPT_XRC_SEND || rc->type == IBV_QPT_XRC_RECV) {
		rc->type = IBV_QPT_RC; /* RC's engines, XRC's opcodes */
		rc->xrc = true;
	}
	rc->pmtu = 1024;
	if (rc->type == IBV_QPT_UD) {
		rc->pmtu = 128u << srn_dev_active_mtu(qp->ctx->dev);
		/* a datagram may come from anywhere */
		rc->remote_counted = true;
		atomic_fetch_add(&eng->remote_qps, 1);
	}
	/* grown to max_dest_rd_atomic at modify_qp (replay_fit): 128
	 * entries for every QP were 3 KiB of its ~13 */
	rc->replay_n = rc->replay_cap = 1;
	rc->replay = calloc(1, sizeof(*rc->replay));
	if (!rc->replay) {
		free(rc);
		return ENOMEM;
	}
	ret = srn_engine_add_qp(eng, rc);
	if (ret) {
		free(rc->replay);
		free(rc);
		return ret;
	}
	qp->rc = rc;
	direct_publish(rc); /* RESET, for softrnic qps */
	return 0;
}

void srn_transport_qp_destroy(struct srn_qp *qp)
{
	struct srn_rc_state *rc = qp->rc;

	srn_iwqp_destroy(qp);
	if (!rc)
		return;
	responder_ack_owed(rc); /* held back (responder.c): send it now */
	direct_unpublish(rc);
	srn_engine_del_qp(rc->eng, rc);
	rc->dead = true;
	requester_win_sync(rc); /* dead: its share of the window goes back */
	/* A receiver or the timer may hold rc and be waiting for qp->lock:
	 * let it in, it sees dead and leaves. */
	while (atomic_load(&rc->inflight) > 0) {
		pthread_mutex_unlock(&qp->lock);
		sched_yield();
		pthread_mutex_lock(&qp->lock);
	}
	qp->rc = NULL;
	if (rc->remote_counted)
		atomic_fetch_sub(&rc->eng->remote_qps, 1);
	direct_qp_forget(rc);
	sr_free(rc);
	free(rc->replay);
	free(rc);
}

/* Where packets to the QP's destination go: GID (IPv4-mapped or IPv6) +
 * QPN.  A destination on this host is reached at the UDP port its owner
 * registered for that QPN; anything else at dst:4791. */
void rc_resolve_path(struct srn_rc_state *rc)
{
	struct srn_qp *qp = rc->qp;
	struct srn_engine *eng = rc->eng;
	const struct ibv_ah_attr *ah = &qp->a.attr.ah_attr;
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	struct net_addr to = { 0 };
	const struct net_addr *me;
	uint16_t port;
	int fam;
	bool local, found;

	if (ah->is_global) {
		const uint8_t *g = ah->grh.dgid.raw;

		if (!memcmp(g, v4mapped, 12)) {
			to.family = AF_INET;
			memcpy(to.ip, g + 12, 4);
		} else {
			to.family = AF_INET6;
			memcpy(to.ip, g, 16);
		}
	} else {
		/* No GRH (LID-only addressing, e.g. ibv_rc_pingpong without
		 * -g): RoCE needs an IP; assume the peer is on this device. */
		to = eng->udp.local;
	}
	to.port = SRN_ROCE_UDP_PORT;
	rc->shm_peer = NULL;
	me = srn_engine_local(eng, to.family);
	local = me && net_addr_is_local(to.family, to.ip);
	/* an IPv4 engine registers IPv4 and has IPv6 at the same port
	 * number (engine.h, udp6) */
	found = local && net_registry_lookup(eng->reg, rc->dqpn, &port, &fam) == 0 &&
		(fam == to.family || (to.family == AF_INET6 && fam == AF_INET));
	rc->peer_softrnic = found;
	if (found) {
		to.port = port;
		/* Same host: through the owner's inbox when there is one
		 * (not under fault injection, which acts on datagrams). */
		if (eng->inbox && net_shm_ring_enabled() && !net_udp_faults())
			rc->shm_peer = net_shm_peer_get(qp->ctx->dev->ibdev.name, port);
	}
	/* A QP on this host whose number the registry does not show (yet):
	 * rc_tx resolves again before each packet until it does, rather
	 * than sending for good to whoever holds port 4791.  Only then: a
	 * peer engine may hold 4791 itself, and its QPs are resolved. */
	rc->path_unresolved = local && !found;
	if (rc->remote_counted == local) {
		rc->remote_counted = !local;
		atomic_fetch_add(&eng->remote_qps, local ? -1 : 1);
	}
	if (rc->path_unresolved)
		srn_dbg(eng, "qp %u: dest QPN %u not in the registry yet", rc->qpn, rc->dqpn);
	rc->peer = to;
	memset(&rc->l3, 0, sizeof(rc->l3));
	rc->l3.family = to.family;
	if (!me)
		me = &eng->udp.local; /* (no path: nothing is sent) */
	memcpy(rc->l3.src, me->ip, 16);
	memcpy(rc->l3.dst, to.ip, 16);
	rc->l3.sport = me->port;
	rc->l3.dport = to.port;
	rc->l3.ttl_hop = 64;
	rc->path_ok = to.family == me->family;
	if (!rc->path_ok)
		srn_dbg(eng, "qp %u: destination family differs from the device's", rc->qpn);
}

/* Room in the replay cache for replay_n entries (qp->lock held, so no
 * responder reads it meanwhile); kept entries stay.  Out of memory: the
 * cache keeps the size it has. */
static void replay_fit(struct srn_rc_state *rc)
{
	struct rc_replay *r;

	if (rc->replay_n <= rc->replay_cap)
		return;
	r = calloc(rc->replay_n, sizeof(*r));
	if (!r) {
		rc->replay_n = rc->replay_cap;
		return;
	}
	memcpy(r, rc->replay, rc->replay_cap * sizeof(*r));
	free(rc->replay);
	rc->replay = r;
	rc->replay_cap = rc->replay_n;
}

static void load_attrs(struct srn_rc_state *rc, int mask)
{
	const struct ibv_qp_attr *a = &rc->qp->a.attr;

	if (mask & IBV_QP_QKEY)
		rc->qkey = a->qkey;
	if (rc->type != IBV_QPT_UD && a->path_mtu >= IBV_MTU_256 && a->path_mtu <= IBV_MTU_4096)
		rc->pmtu = 128u << a->path_mtu;
	rc->win_pkts = RC_WINDOW_BYTES / rc->pmtu;
	if (rc->win_pkts < RC_MIN_WINDOW_PKTS)
		rc->win_pkts = RC_MIN_WINDOW_PKTS;
	if (rc->win_pkts > RC_MAX_WINDOW_PKTS)
		rc->win_pkts = RC_MAX_WINDOW_PKTS;
	rc->ackreq_every = rc->win_pkts / 4 ? rc->win_pkts / 4 : 1;
	rc->rd_chunk = (uint64_t)(rc->win_pkts / 2) * rc->pmtu;
	rc->min_rnr = a->min_rnr_timer & 0x1f;
	rc->replay_n = a->max_dest_rd_atomic ? a->max_dest_rd_atomic : 1;
	if (rc->replay_n > SRN_MAX_RD_ATOM)
		rc->replay_n = SRN_MAX_RD_ATOM;
	replay_fit(rc);
	rc->max_rd = a->max_rd_atomic ? a->max_rd_atomic : 1;
	/* 4.096 us * 2^timeout; 0 = wait forever (IBTA 9.7.6.1.3).  Below
	 * ~1 ms spurious retries on a busy 2-core host cost more than
	 * they save: clamp. */
	{
		uint64_t t = a->timeout ? 4096ull << (a->timeout > 31 ? 31 : a->timeout) : 0;

		if (t && t < 1000000)
			t = 1000000;
		/* (the engine's defer_max_ns reads it without the QP's lock) */
		__atomic_store_n(&rc->timeout_ns, t, __ATOMIC_RELAXED);
	}
	if (mask & IBV_QP_RETRY_CNT)
		rc->retry_cnt = rc->retry_left = a->retry_cnt & 7;
	if (mask & IBV_QP_RNR_RETRY)
		rc->rnr_retry = rc->rnr_left = a->rnr_retry & 7;
	if (mask & IBV_QP_DEST_QPN)
		rc->dqpn = a->dest_qp_num & WIRE_PSN_MASK;
}

static void reset_state(struct srn_rc_state *rc)
{
	size_t keep = offsetof(struct srn_rc_state, path_ok);
	struct rc_replay *replay = rc->replay;
	uint32_t cap = rc->replay_cap;

	/* Everything from path_ok to the counters starts over. */
	memset((char *)rc + keep, 0, offsetof(struct srn_rc_state, cnt) - keep);
	rc->replay = replay;
	rc->replay_cap = cap;
	memset(replay, 0, cap * sizeof(*replay));
	rc->pmtu = 1024;
	if (rc->type == IBV_QPT_UD)
		rc->pmtu = 128u << srn_dev_active_mtu(rc->qp->ctx->dev);
	rc->replay_n = 1;
}

void srn_transport_qp_modified(struct srn_qp *qp, enum ibv_qp_state old, int mask)
{
	struct srn_rc_state *rc = qp->rc;
	enum ibv_qp_state now = qp->a.attr.qp_state;

	srn_iwqp_modified(qp, old);
	if (!rc)
		return;
	responder_ack_owed(rc); /* held back (responder.c): send it now */
	/* (RESET and ERR: nothing in flight any more; a new SQ PSN below) */
	requester_win_sync(rc);
	if (now == IBV_QPS_RESET) {
		direct_qp_forget(rc);
		sr_clear(rc);
		reset_state(rc);
		direct_publish(rc); /* RESET, for softrnic qps */
		return;
	}
	if (now == IBV_QPS_ERR) {
		if (old != IBV_QPS_ERR)
			rc_qp_error(rc, -1);
		direct_publish(rc); /* peers stop executing on it */
		return;
	}
	load_attrs(rc, mask);
	if (mask & IBV_QP_RQ_PSN) {
		struct srn_rq_ring *hdr = srn_qp_rq_hdr(qp);

		rc->epsn = qp->a.attr.rq_psn & WIRE_PSN_MASK;
		if (hdr)
			atomic_store(&hdr->uc_epsn, rc->epsn);
		rc->nak_sent = false;
		rc->in_msg = RC_MSG_NONE;
		rc->msg_off = 0;
		sr_clear(rc);
	}
	if (mask & IBV_QP_SQ_PSN) {
		rc->req_psn = rc->una_psn = qp->a.attr.sq_psn & WIRE_PSN_MASK;
		rc->req_hi_psn = rc->req_psn;
		cc_start(rc);
		requester_win_sync(rc);
	}
	if (rc->type != IBV_QPT_UD && (mask & (IBV_QP_AV | IBV_QP_DEST_QPN) ||
					(now == IBV_QPS_RTR && old == IBV_QPS_INIT)))
		rc_resolve_path(rc);
	rc->sr = sr_decide(rc);
	srn_log_qp(rc, SRN_LOG_INFO, NULL, rc->req_psn,
		   "%s -> %s, sr %d, dqpn %u port %u pmtu %u sq_psn %u rq_psn %u max_rd %u "
		   "replay %u timeout %llu ns retry %d rnr %d", srn_qp_state_name(old),
		   srn_qp_state_name(now), rc->sr, rc->dqpn, rc->peer.port, rc->pmtu, rc->req_psn,
		   rc->epsn, rc->max_rd, rc->replay_n, (unsigned long long)rc->timeout_ns,
		   rc->retry_cnt, rc->rnr_retry);
	/* what same-host peers check before executing on this QP, and
	 * our own view of the target, both from the new attributes */
	direct_qp_forget(rc);
	direct_publish(rc);
	if (now == IBV_QPS_RTS)
		requester_run(rc);
}

void srn_transport_qp_set_sr(struct srn_qp *qp, bool on)
{
	if (qp->rc)
		qp->rc->sr_want = on;
}

void srn_qp_unlock(struct srn_qp *qp)
{
	struct srn_rc_state *rc = qp->rc; /* (read under the lock) */

	for (;;) {
		/* What the ACK lets the requester send leaves before the
		 * lock does, as tx.c wants, even where a batch is open
		 * around us (responder_rx_batch_end's); so do the ACKs we
		 * sent (rc_tx_batch_note_ack). */
		bool box = rc && completer_ack_box_take(rc);

		if (box || rc_tx_batch_has_ack())
			rc_tx_batch_flush();
		pthread_mutex_unlock(&qp->lock);
		/* The receiver puts its ACK in the box, then tries the lock
		 * again (engine_rx.c rx_lock_qp); we unlocked, then look in the
		 * box: with a full fence on both sides one of us sees the
		 * other, so an ACK is never left in the box unseen.  (rc is
		 * still ours to read: destroy frees it only under the lock,
		 * and not while a caller of ours holds it.) */
		if (!rc)
			return;
		atomic_thread_fence(memory_order_seq_cst);
		if (!atomic_load_explicit(&rc->ack_box, memory_order_relaxed) ||
		    pthread_mutex_trylock(&qp->lock))
			return; /* empty, or the new holder takes it */
		rc = qp->rc;
	}
}

/* A work request posted while the QP's earlier packets are still
 * unanswered waits for that answer: the completer's run after it
 * (after_response) sends everything queued meanwhile together, in as few
 * GSO sends as sizes allow, instead of one system call per message.
 * Measured over UDP, alternating runs: 8-byte WRITEs 2.6 -> 17 MiB/s
 * (2.2 Mpps), SENDs 3.0 -> 18, READs 2.6 -> 10-12, fetch-and-adds
 * 2.3 -> 11-16; 4 KiB WRITEs 1.06 -> 2.96 GiB/s, READs 1.33 -> 3.80;
 * 64 KiB WRITEs 3.73 -> 4.10.
 * Only on RC, where the answer is sure to come: every message's last
 * packet asks for an ACK, a READ or an atomic gets its response, and
 * what is lost the retry timer resends.  Only with KICK_WAIT_INFLIGHT
 * packets out (a ping-pong has none: its ACK rode with the reply), up
 * to KICK_WAIT_MAX requests waiting, each up to KICK_WAIT_LEN (a longer
 * one fills GSO sends on its own; 1 MiB WRITEs measured the same either
 * way).  Never a fenced one, nor one behind which an ACK of ours waits
 * to ride (the peer's answer could be waiting for that in turn).
 * Capping WRITE bursts at 512 KiB (8 of 64 KiB) once helped, while the
 * engine thread took the sender's CPU during a long burst; since pollers
 * and the lingering engine yield their CPU it costs: 64 KiB WRITEs 5.87
 * GiB/s with the cap, 6.42 without (alternating runs). */
enum { KICK_WAIT_INFLIGHT = 2, KICK_WAIT_MAX = 32, KICK_WAIT_LEN = 64 << 10 };

static bool kick_can_wait(struct srn_rc_state *rc)
{
	struct srn_qp *qp = rc->qp;
	const struct srn_send_wqe *w = rc_sq(qp, qp->sq.tail - 1);

	return rc->type == IBV_QPT_RC && !rc->ack_pending && !rc->rnr_wait &&
	       rc_state(rc) == IBV_QPS_RTS &&
	       qp->sq.tail - qp->sq.next <= KICK_WAIT_MAX &&
	       wire_psn_diff(rc->req_psn, rc->una_psn) >= KICK_WAIT_INFLIGHT &&
	       w->length <= KICK_WAIT_LEN && !(w->send_flags & IBV_SEND_FENCE);
}

void srn_transport_kick_sq(struct srn_qp *qp)
{
	struct srn_rc_state *rc = qp->rc;

	srn_iwqp_kick_sq(qp);
	if (!rc)
		return;
	if (rc_state(rc) == IBV_QPS_ERR) {
		rc_flush_sq(rc);
	} else if (kick_can_wait(rc)) {
		rc_count(rc, SRN_CNT_req_waits);
	} else {
		uint64_t sent = rc->req_tx_ns;

		requester_run(rc);
		/* tells the engine thread the application is sending (it
		 * keeps off the QP lock meanwhile); the run's own time
		 * stamp, so no clock read here */
		if (rc->req_tx_ns != sent)
			srn_engine_ev_sent(rc->eng, rc->req_tx_ns);
	}
}

void srn_transport_kick_rq(struct srn_qp *qp)
{
	struct srn_rc_state *rc = qp->rc;

	srn_iwqp_kick_rq(qp);
	if (rc && rc_state(rc) == IBV_QPS_ERR)
		rc_flush_rq(rc);
}

/* A poller whose socket reads found nothing ENG_POLL_YIELD_EVERY times in
 * a row yields its CPU once (eng_poll_yields).  What it waits for may need a thread that
 * the scheduler queued behind it on the same CPU: a same-host peer's
 * engine thread, woken by our packets, then waits out our time slice,
 * 1-4 ms here, during which nothing moves (seen over UDP when both ends'
 * threads shared a CPU: ib_write_bw 4 KiB, 20000 messages, 0.55-1.2 GB/s
 * pinned to one CPU, 3.0-3.4 on two; unpinned, until the scheduler
 * spreads them, ~25 ms of such gaps per run).  A ping-pong's polls find
 * their packet after a few tries, so they never yield. */
void srn_transport_progress(struct srn_context *ctx, uint64_t now)
{
	struct srn_engine *eng = ctx->engine;
	bool yield, kick, quiet, watched;
	int got = 0;

	/* (between ibv_wr_start and ibv_wr_complete: the engine thread
	 * receives, and waits for that QP's lock if it must) */
	if (!eng || srn_wr_locks_held)
		return;
	/* tells the engine thread an application thread is receiving */
	srn_engine_ev_poll(eng, now);
	/* QP deadlines that passed: while we poll, the engine thread leaves
	 * them to us (srn_engine_arm) */
	srn_engine_run_qp_timers(eng, now);
	/* Quiet sockets that the engine thread watches: nothing to read
	 * there (the inbox, if any, is still looked at: no system call) */
	quiet = srn_engine_sock_quiet(eng, now);
	watched = quiet && !atomic_load_explicit(&eng->sock_parked, memory_order_relaxed);
	if (watched && !eng->inbox)
		return;
	if (pthread_mutex_trylock(&eng->rx_lock)) {
		/* Someone else receives: often the engine thread, taken off
		 * the CPU we spin on while it holds the lock (two busy
		 * threads per CPU on a small host).  Spinning on would only
		 * keep it off; giving the CPU back lets it finish (measured
		 * over UDP, ib_send_bw: 1 MiB 2.26 -> 4.20 GiB/s, 64 KiB
		 * 2.9 -> 4.8, the server polling while its engine received;
		 * no latency test moved). */
		sched_yield();
		return;
	}
	if (eng->inbox) {
		/* The same-host inbox first, no system call.  While it carries
		 * the traffic the socket is read only now and then (the engine
		 * thread still sees remote traffic through epoll). */
		srn_engine_rx_shm(eng, 4 * ENGINE_BATCH);
		/* (the inbox's time stamp may be later than now) */
		if (watched ||
		    eng_poll_skips_sock(atomic_load_explicit(&eng->shm_rx_ns, memory_order_relaxed),
					eng->shm_sock_ns, eng->shm_sock_gap, now)) {
			pthread_mutex_unlock(&eng->rx_lock);
			return;
		}
		eng->shm_sock_ns = now;
	}
	/* (read once more: what came before the engine watched them again) */
	if (quiet)
		srn_engine_sock_unpark(eng);
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_poll_sock_reads], 1, memory_order_relaxed);
	eng->rx_reqs = 0;
	eng->rx_drained = false;
	/* a few batches while they come full: keep up with a busy peer */
	for (int b = 0; b < 4; b++) {
		/* (no inbox: the socket is all there is) */
		int n = eng->inbox ? srn_engine_rx_sock(eng) : srn_engine_rx_poll(eng);

		got += n > 0 ? n : 0;
		if (n < ENGINE_SOCK_BATCH)
			break;
	}
	srn_engine_rx_done(eng);
	kick = eng_poll_kicks(eng->rx_drained, eng->rx_reqs);
	yield = !got && eng_poll_yields(++eng->poll_empty_run);
	if (got)
		eng->poll_empty_run = 0;
	if (eng->inbox)
		eng->shm_sock_gap = eng_poll_sock_gap(eng->shm_sock_gap, got > 0);
	pthread_mutex_unlock(&eng->rx_lock);
	/* The receive ended with a plain ACK, alone, that emptied the send
	 * queue of a QP conversing over one-sided operations (completer.c
	 * rx_ack): the application, its WRITE complete, now waits for the
	 * peer's by looking at its memory, as ib_write_lat does, and nobody
	 * polls.  The peer's WRITE usually comes with that ACK; when it does
	 * not (the peer was slow to answer), the engine must place it when it
	 * arrives, not when its deferral step ends (up to milliseconds):
	 * UDP ib_write_lat had ~100 exchanges in 20000 at 0.1-2 ms, average
	 * 4.2-6.0 us for a median of 2.7 (4 runs); none now, 2.8-3.0 us. */
	if (kick)
		srn_engine_kick_spin(eng);
	if (yield)
		sched_yield();
}
