/* transport/requester: send WQEs -> request packets (RC).
 *
 * WQEs between sq.head and sq.next have been fully transmitted; the one
 * at sq.next may be partly sent (wqe->sent bytes).  Each packet is sent
 * before the state advances (save-state-then-transmit: on -EAGAIN nothing
 * moved, and the engine resumes later), so PSNs never run ahead of what
 * went out.  Go-back-N (requester_rewind) only moves sq.next and the sent
 * offsets back: PSN ranges once assigned stay the same.
 */
#include <errno.h>
#include <string.h>

#include "transport/direct.h"
#include "transport/rc.h"

enum { RESUME_DELAY_NS = 50 * 1000 };

/* What may be in flight toward the peer's socket, in packets: small
 * enough that it always fits the receiver's socket buffer, so the receive
 * queue never overruns (a drop costs a go-back-N of the whole window).
 * A peer on this host opened its socket like ours, so it has the buffer
 * ours has: a quarter of the reported size (which is twice what Linux
 * accounts), leaving room for per-packet overhead and other senders.  A
 * remote peer's buffer is unknown: stay conservative.  *pool: which of
 * the engine's shared windows the peer's packets count in. */
static uint32_t peer_window_pkts(const struct srn_rc_state *rc, uint8_t *pool)
{
	uint64_t bytes = RC_REMOTE_WINDOW_BYTES;
	uint32_t w;

	*pool = 1;
	if (net_addr_is_local(rc->peer.family, rc->peer.ip)) {
		*pool = 0;
		if (rc->eng->udp.rcvbuf > 0)
			bytes = (uint64_t)rc->eng->udp.rcvbuf / 4;
	}
	/* A remote softrnic peer that speaks SR opened its socket as ours
	 * did (16 MiB asked, 4 MiB at a default rmem_max), and a loss costs
	 * it one packet, not a window: a bandwidth-delay product of 5-10 ms
	 * needs more than 1 MiB in flight, and the congestion window
	 * (cc.c) bounds it by what the path delivers. */
	if (*pool == 1 && rc->sr)
		bytes = RC_SR_REMOTE_WINDOW_BYTES;
	w = (uint32_t)rc_pmtu_div(rc, bytes);
	/* A remote QP may belong to an engine beside the one holding port
	 * 4791 there, which hands its packets on through a shared-memory
	 * inbox of NET_SHM_SLOTS per sender (qp_forward.c): more in flight
	 * than that overruns it whenever that engine waits for a CPU.  (A
	 * softrnic peer steers them to their owner's socket (net/steer.h);
	 * with SR, one overrun there costs the packets lost, not a window.) */
	if (*pool == 1 && !rc->sr && w > RC_REMOTE_WINDOW_PKTS)
		w = RC_REMOTE_WINDOW_PKTS;
	return w < RC_MIN_WINDOW_PKTS ? RC_MIN_WINDOW_PKTS : w;
}

/* The QP's own window: the peer's, and at most rc->win_pkts. */
static uint32_t window_pkts(const struct srn_rc_state *rc, uint32_t peer_win)
{
	uint32_t w = peer_win < rc->win_pkts ? peer_win : rc->win_pkts;

	return w < RC_MIN_WINDOW_PKTS ? RC_MIN_WINDOW_PKTS : w;
}

/* ---- Shared window -------------------------------------------------------
 * The peer's socket is shared by all QPs sending to it, and each QP's
 * window alone fills it: ib_write_bw -q 8 -s 1 MiB overran it and lost
 * half its rate to go-back-N retransmissions and ACK timeouts.  So the
 * packets in flight from all of an engine's RC QPs together also stay
 * within the peer's window (counted per class, peers on this host and
 * elsewhere, in eng->win_inflight; each QP adds its own count at the end
 * of every requester run and completer pass, requester_win_sync).  A QP
 * with fewer than RC_MIN_WINDOW_PKTS in flight may always send, so none
 * starves.  A QP stopped by the shared window has at least that many in
 * flight, one of which asked for an ACK (ackreq_every), so an ACK is on
 * its way to reopen the window, even in the middle of a long message. */
static int32_t win_now(const struct srn_rc_state *rc)
{
	enum ibv_qp_state st;
	int32_t d;

	if (rc->type != IBV_QPT_RC || rc->dead || !rc->path_ok || rc->shm_peer)
		return 0;
	st = rc_state(rc);
	if (st != IBV_QPS_RTS && st != IBV_QPS_SQD)
		return 0;
	d = wire_psn_diff(rc->req_psn, rc->una_psn);
	return d > 0 ? d : 0;
}

static void win_add(struct srn_rc_state *rc, int32_t delta)
{
	int32_t had = rc->win_counted;

	if (!delta)
		return;
	atomic_fetch_add_explicit(&rc->eng->win_inflight[rc->win_pool], delta,
				  memory_order_relaxed);
	rc->win_counted += delta;
	if (!had != !rc->win_counted)
		atomic_fetch_add_explicit(&rc->eng->win_active[rc->win_pool], had ? -1 : 1,
					  memory_order_relaxed);
}

void requester_win_sync(struct srn_rc_state *rc)
{
	win_add(rc, win_now(rc) - rc->win_counted);
}

/* The QP's peer moved between the classes: its count moves along. */
static void win_pool_set(struct srn_rc_state *rc, uint8_t pool)
{
	int32_t had = rc->win_counted;

	if (pool == rc->win_pool)
		return;
	win_add(rc, -had);
	rc->win_pool = pool;
	win_add(rc, had);
}

/* May the QP send `more` packets with `own` in flight?  Not when that
 * would overfill the shared window, nor past twice its fair share of it
 * (one QP could otherwise hold it all while the others trickle).  *last:
 * this one fills the window, so it must ask for an ACK. */
static bool win_shared_room(const struct srn_rc_state *rc, int32_t own, int32_t more,
			    int32_t peer_win, bool *last)
{
	const struct srn_engine *eng = rc->eng;
	int32_t after = atomic_load_explicit(&eng->win_inflight[rc->win_pool],
					     memory_order_relaxed) - rc->win_counted + own + more;
	int32_t active = atomic_load_explicit(&eng->win_active[rc->win_pool],
					      memory_order_relaxed) + (rc->win_counted ? 0 : 1);
	int32_t fair = active > 1 ? 2 * peer_win / active : peer_win;

	*last = after >= peer_win || own + more >= fair;
	return own < RC_MIN_WINDOW_PKTS || (after <= peer_win && own + more <= fair);
}

static uint8_t req_opcode(const struct srn_send_wqe *w, bool first, bool last)
{
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM ||
		   w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

	switch (w->opcode) {
	case IBV_WR_SEND_WITH_INV:
		if (last)
			return first ? WIRE_SEND_ONLY_INV : WIRE_SEND_LAST_INV;
		return first ? WIRE_SEND_FIRST : WIRE_SEND_MIDDLE;
	case IBV_WR_ATOMIC_WRITE:
		return WIRE_ATOMIC_WRITE;
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		if (first && last)
			return imm ? WIRE_SEND_ONLY_IMM : WIRE_SEND_ONLY;
		if (first)
			return WIRE_SEND_FIRST;
		if (last)
			return imm ? WIRE_SEND_LAST_IMM : WIRE_SEND_LAST;
		return WIRE_SEND_MIDDLE;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		if (first && last)
			return imm ? WIRE_WRITE_ONLY_IMM : WIRE_WRITE_ONLY;
		if (first)
			return WIRE_WRITE_FIRST;
		if (last)
			return imm ? WIRE_WRITE_LAST_IMM : WIRE_WRITE_LAST;
		return WIRE_WRITE_MIDDLE;
	case IBV_WR_RDMA_READ:
		return WIRE_READ_REQ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return WIRE_CMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return WIRE_FETCH_ADD;
	default:
		return 0xff;
	}
}

static bool opcode_supported(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_ATOMIC_WRITE:
		return true;
	default:
		return false;
	}
}

/* *now: the time if read already on this path, else 0 (it is read here
 * if needed and left there for the caller). */
static void arm_retry(struct srn_rc_state *rc, uint64_t *now)
{
	if (rc->type != IBV_QPT_RC || rc->timeout_ns == 0 || rc->una_psn == rc->req_psn) {
		rc->retry_at = 0;
		return;
	}
	if (rc->retry_at == 0) {
		if (!*now)
			*now = srn_now_ns();
		rc->retry_at = *now + cc_rto(rc, rc->timeout_ns);
		srn_engine_arm(rc->eng, rc->retry_at);
		cc_probe_arm(rc, *now);
	}
}

void requester_arm_retry(struct srn_rc_state *rc)
{
	uint64_t now = 0;

	arm_retry(rc, &now);
}

/* Bytes per READ request: at most half the window, so responses to two
 * requests can be in flight. */
static uint64_t read_chunk(const struct srn_rc_state *rc, uint32_t win)
{
	uint64_t half = (uint64_t)(win / 2 ? win / 2 : 1) * rc->pmtu;

	return rc->rd_chunk && rc->rd_chunk < half ? rc->rd_chunk : half;
}

/* Bytes of w's READ request from w->sent on: up to the next chunk
 * boundary.  A request re-issued after a loss (from any packet) ends where
 * the original did: the responder re-executes it as a duplicate, which
 * does not move its expected PSN, so one running past the original's end
 * would answer PSNs the responder then still expects (IBTA 9.7.5.1.3:
 * the re-issued request asks for the rest of the original).  So win is
 * the window without the congestion window, which changes meanwhile. */
static uint32_t read_len(const struct srn_rc_state *rc, const struct srn_send_wqe *w,
			 uint32_t win)
{
	uint64_t chunk = read_chunk(rc, win), left = w->length - w->sent;
	uint64_t len = chunk - w->sent % chunk;

	return (uint32_t)(left < len ? left : len);
}

/* AckReq in a long message every quarter window: the window reopens in
 * steps while the sender keeps streaming.  And at least every
 * RC_MIN_WINDOW_PKTS: a QP the shared window stops has that many in
 * flight, so one of them asked for an ACK, which will reopen it (the
 * responder coalesces what is asked: this costs no ACK packets). */
static uint32_t ackreq_every(const struct srn_rc_state *rc, uint32_t win)
{
	uint32_t q = win / 4 ? win / 4 : 1;

	if (q > RC_MIN_WINDOW_PKTS)
		q = RC_MIN_WINDOW_PKTS;

	return rc->ackreq_every && rc->ackreq_every < q ? rc->ackreq_every : q;
}

/* The len bytes of w's payload from w->sent on, into pay: their count,
 * or < 0 (local protection error); a one-SGE WQE is resolved once. */
static int wqe_payload(struct srn_rc_state *rc, struct srn_send_wqe *w, uint32_t len,
		       struct iovec *pay)
{
	return rc_sge_map_cached(rc, rc->qp->pd, w->sge, w->num_sge, w->sent, len, 0, pay,
				 SRN_MAX_SGE, &w->sge0_base, &w->sge0_gen);
}

/* n PSNs from psn went out, with bytes of payload: the next is after
 * them; below the highest sent before, they were retransmissions. */
static void sent_psns(struct srn_rc_state *rc, uint32_t psn, uint32_t n, uint32_t bytes)
{
	uint32_t end = wire_psn_add(psn, n);

	rc->req_psn = end;
	if (wire_psn_diff(end, rc->req_hi_psn) > 0) {
		if (wire_psn_diff(psn, rc->req_hi_psn) < 0)
			rc_count_n(rc, SRN_CNT_req_retx_packets,
				   (uint32_t)wire_psn_diff(rc->req_hi_psn, psn));
		rc->req_hi_psn = end;
	} else {
		rc_count_n(rc, SRN_CNT_req_retx_packets, n);
		rc_count_n(rc, SRN_CNT_req_retx_bytes, bytes);
	}
}

/* Build and send the next packet of w (at byte offset w->sent); base:
 * the window without the congestion window, win: with it.
 * Returns 0 and advances on success; -EAGAIN; -EFAULT on a local
 * protection error (bad lkey / bounds). */
static int send_one(struct srn_rc_state *rc, struct srn_send_wqe *w, uint32_t base,
		    uint32_t win, bool ask_ack)
{
	struct iovec pay[SRN_MAX_SGE];
	struct wire_pkt h;
	uint32_t npkts = rc_wqe_npkts(rc, w);
	uint32_t idx = (uint32_t)rc_pmtu_div(rc, w->sent);
	uint32_t psn = wire_psn_add(w->first_psn, idx);
	uint32_t len = 0, adv = 1;
	int npay = 0, ret;

	wire_pkt_clear(&h);
	h.psn = psn;
	h.xrcsrq = w->remote_qpn; /* XRC's XRCETH (other opcodes have none) */
	if (w->opcode == IBV_WR_RDMA_READ) {
		len = read_len(rc, w, base);
		adv = rc_pmtu_div_up(rc, len);
		h.opcode = WIRE_READ_REQ;
		h.va = w->remote_addr + w->sent;
		h.rkey = w->rkey;
		h.dma_len = len;
		h.ackreq = true;
		ret = rc_tx(rc, &h, NULL, 0, 0);
		if (ret)
			return ret;
		w->sent += len;
		sent_psns(rc, psn, adv, 0);
		cc_sent(rc, psn, 0);
		return 0;
	}
	if (rc_is_atomic(w)) {
		h.opcode = req_opcode(w, true, true);
		h.va = w->remote_addr;
		h.rkey = w->rkey;
		h.swap_add = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->swap : w->compare_add;
		h.compare = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->compare_add : 0;
		h.ackreq = true;
		ret = rc_tx(rc, &h, NULL, 0, 0);
		if (ret)
			return ret;
		w->sent = 8;
		sent_psns(rc, psn, 1, 0);
		cc_sent(rc, psn, 0);
		return 0;
	}

	/* SEND / WRITE */
	{
		uint64_t left = w->length - w->sent;
		bool first = w->sent == 0, last;

		len = (uint32_t)(left < rc->pmtu ? left : rc->pmtu);
		last = idx + 1 >= npkts;
		h.opcode = req_opcode(w, first, last);
		if (rc->type == IBV_QPT_UC)
			h.opcode |= WIRE_UC; /* same operations, UC service bits */
		if (len) {
			if (w->send_flags & IBV_SEND_INLINE) {
				pay[0].iov_base = w->inline_data + w->sent;
				pay[0].iov_len = len;
				npay = 1;
			} else {
				npay = wqe_payload(rc, w, len, pay);
				if (npay < 0)
					return -EFAULT;
			}
		}
		if (first && (w->opcode == IBV_WR_RDMA_WRITE ||
			      w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
			      w->opcode == IBV_WR_ATOMIC_WRITE)) {
			h.va = w->remote_addr;
			h.rkey = w->rkey;
			h.dma_len = (uint32_t)w->length;
		}
		if (w->opcode == IBV_WR_SEND_WITH_INV)
			h.ieth_rkey = w->imm_data; /* (host order) */
		else
			h.imm_be = w->imm_data;
		h.se = last && (w->send_flags & IBV_SEND_SOLICITED);
		/* UC has no acknowledgements to ask for */
		h.ackreq = rc->type == IBV_QPT_RC &&
			   (last || ask_ack || rc->probing ||
			    rc->since_ackreq + 1 >= ackreq_every(rc, win));
		ret = rc_tx(rc, &h, pay, npay, len);
		if (ret)
			return ret;
		rc->since_ackreq = h.ackreq ? 0 : rc->since_ackreq + 1;
		rc->probing = false;
		w->sent += len;
		if (last)
			w->sent = w->length; /* zero-length message: one packet */
		sent_psns(rc, psn, 1, len);
		if (h.ackreq)
			cc_sent(rc, psn, 0);
		return 0;
	}
}

static void sr_next_gap(struct srn_rc_state *rc);

/* Returns true when the caller is to (re)arm the retransmission timer
 * (requester_arm_retry): the run went to its end. */
static bool requester_run_locked(struct srn_rc_state *rc, bool direct_tried)
{
	struct srn_qp *qp = rc->qp;
	bool shared = rc->type == IBV_QPT_RC;
	uint32_t win, base, peer_win;
	uint8_t pool;

	if (rc->type == IBV_QPT_UD) {
		ud_requester_run(rc);
		return false;
	}
	if (!rc->path_ok || rc->rnr_wait || rc->resume_at)
		return false;
	if (rc_state(rc) != IBV_QPS_RTS)
		return false;
	peer_win = peer_window_pkts(rc, &pool);
	base = window_pkts(rc, peer_win);
	win = cc_window(rc, base);
	if (win > base)
		win = base;
	if (shared)
		win_pool_set(rc, pool);

	while (qp->sq.next != qp->sq.tail) {
		struct srn_send_wqe *w;
		int32_t own, more;
		bool ask_ack, retx;
		uint64_t pause;
		int ret;

		/* SR: a gap is resent; the next, or on from the furthest */
		if (rc->sr_resending && wire_psn_diff(rc->req_psn, rc->sr_end) >= 0) {
			sr_next_gap(rc);
			if (qp->sq.next == qp->sq.tail)
				break;
		}
		w = rc_sq(qp, qp->sq.next);
		if (w->state & WQE_LOC_ERR)
			break;
		if (rc_is_local_op(w)) {
			int lr = rc_local_op_run(rc, w);

			if (lr == 0 && rc->type == IBV_QPT_UC) {
				/* UC: what left is done (see the end) */
				rc_tx_batch_flush();
				completer_retire_sent(rc);
				lr = rc_local_op_run(rc, w);
			}
			if (lr > 0)
				continue;
			if (lr < 0)
				return false;
			break;
		}
		/* Same-host target: executed in its memory, no packet.  Only
		 * with nothing outstanding before it, so order and completion
		 * order stay exact. */
		if (!(w->state & WQE_STARTED) && qp->sq.head == qp->sq.next && !direct_tried) {
			int dr = direct_try(rc, w);

			if (dr > 0)
				continue;
			if (dr == -EAGAIN) {
				/* no receive posted yet: look again soon */
				rc->resume_at = srn_now_ns() + DIRECT_WAIT_NS;
				srn_engine_arm(rc->eng, rc->resume_at);
				break;
			}
		}

		direct_tried = false; /* (only ever the first WQE) */
		if (!(w->state & WQE_STARTED)) {
			if (!opcode_supported(w->opcode) || w->length > SRN_MAX_MSG_SIZE ||
			    (rc->type == IBV_QPT_UC && rc_is_rd_atomic(w))) {
				/* complete everything before it first */
				if (qp->sq.head != qp->sq.next)
					break;
				completer_fail(rc, IBV_WC_LOC_QP_OP_ERR);
				return false;
			}
			if ((w->send_flags & IBV_SEND_FENCE) && rc->rd_out > 0)
				break;
			if (rc_is_rd_atomic(w) && rc->rd_out >= rc->max_rd)
				break;
			w->first_psn = rc->req_psn;
			w->last_psn = wire_psn_add(rc->req_psn, rc_wqe_npkts(rc, w) - 1);
			w->sent = 0;
			w->state = WQE_STARTED;
			if (rc_is_rd_atomic(w))
				rc->rd_out++;
		}
		/* window: unacknowledged packets in flight */
		own = wire_psn_diff(rc->req_psn, rc->una_psn);
		if (own >= (int32_t)win)
			break;
		more = 1;
		if (w->opcode == IBV_WR_RDMA_READ) {
			more = (int32_t)rc_pmtu_div_up(rc, read_len(rc, w, base));
			if (own > 0 && own + more > (int32_t)win)
				break;
		}
		/* shared window (see above) */
		ask_ack = false;
		if (shared && !win_shared_room(rc, own, more, (int32_t)peer_win, &ask_ack))
			break;
		if (rc->type == IBV_QPT_UC && uc_paced(rc))
			break;
		retx = wire_psn_diff(rc->req_psn, rc->req_hi_psn) < 0;
		ret = send_one(rc, w, base, win, ask_ack);
		if (ret == -EAGAIN) {
			rc->resume_at = srn_now_ns() + RESUME_DELAY_NS;
			srn_engine_arm(rc->eng, rc->resume_at);
			break;
		}
		if (ret == -EFAULT) {
			/* Local protection error: what precedes it completes
			 * normally first; the completer fails it at the head. */
			w->state |= WQE_LOC_ERR;
			if (qp->sq.head == qp->sq.next) {
				completer_fail(rc, IBV_WC_LOC_PROT_ERR);
				return false;
			}
			break;
		}
		if (ret < 0)
			break;
		if (rc->type == IBV_QPT_UC) {
			/* nothing comes back: a packet out is a packet done,
			 * and a message completes once its last one left */
			rc->una_psn = rc->req_psn;
			rc->uc_burst_bytes += rc->pmtu;
			/* no GSO for UC: segments of a GSO send are charged to
			 * the receiving socket far above their size, which
			 * defeats uc_pace.c's look at its queue */
			rc_tx_batch_flush();
		}
		if (wire_psn_diff(rc->req_psn, wire_psn_add(w->last_psn, 1)) >= 0)
			qp->sq.next++;
		if (retx && cc_retx_pause(rc, &pause)) {
			/* resent in paced bursts (cc.c) */
			rc->resume_at = srn_now_ns() + pause;
			srn_engine_arm(rc->eng, rc->resume_at);
			break;
		}
	}
	if (rc->type == IBV_QPT_UC && qp->sq.head != qp->sq.next) {
		/* complete only what really left (GSO batches wait in tx.c) */
		rc_tx_batch_flush();
		completer_retire_sent(rc);
	}
	return true;
}

/* The same-host fast path: WQEs a same-host target takes in memory are
 * done here, with none of the packet path's set-up (GSO batch, window,
 * ACK piggybacking).  Only while nothing is outstanding, as in
 * requester_run_locked.  Returns true when the run is over (the SQ is
 * empty, or a SEND waits for a receive); *tried when the WQE at sq.next
 * was offered to direct_try and refused (the packet path takes it). */
static bool requester_direct_run(struct srn_rc_state *rc, bool *tried)
{
	struct srn_qp *qp = rc->qp;

	*tried = false;
	if (!rc_connected(rc) || !rc->path_ok || rc->rnr_wait || rc->resume_at ||
	    rc_state(rc) != IBV_QPS_RTS)
		return false;
	while (qp->sq.head == qp->sq.next && qp->sq.next != qp->sq.tail) {
		struct srn_send_wqe *w = rc_sq(qp, qp->sq.next);
		int dr;

		if (w->state & (WQE_LOC_ERR | WQE_STARTED))
			return false;
		dr = direct_try(rc, w);
		if (dr == -EAGAIN) {
			/* no receive posted yet: look again soon */
			rc->resume_at = srn_now_ns() + DIRECT_WAIT_NS;
			srn_engine_arm(rc->eng, rc->resume_at);
			requester_arm_retry(rc);
			return true;
		}
		if (dr <= 0) {
			*tried = true;
			return false;
		}
	}
	if (qp->sq.next != qp->sq.tail)
		return false;
	requester_arm_retry(rc);
	return true;
}

/* Packets built in one run leave in GSO batches (tx.c).  An ACK the
 * responder held back for this QP goes with them, ahead of them: before
 * the reply an application sends when a message arrived, in the same
 * system call.  Only when the run sent something: a run with
 * nothing to send (say, the completer's after an ACK that came in the
 * same GRO buffer as a request) would otherwise cost a system call of
 * its own just before the application's reply, which carries it free. */
void requester_run(struct srn_rc_state *rc)
{
	uint64_t sent, now = 0;
	bool tried, arm;

	if (requester_direct_run(rc, &tried))
		return;
	sent = atomic_load_explicit(&rc->cnt[SRN_CNT_tx_packets], memory_order_relaxed);
	rc_tx_batch_begin();
	/* The held ACK goes ahead of new requests: a peer that reads our
	 * reply before the ACK it answers would complete its receive before
	 * its send (ib_send_lat -e then polls an empty send CQ). */
	if (rc->ack_pending && rc->type == IBV_QPT_RC && rc->qp->sq.next != rc->qp->sq.tail)
		responder_ack_flush(rc);
	arm = requester_run_locked(rc, tried);
	requester_win_sync(rc);
	/* one clock read for both the send's time stamp and the retry
	 * deadline (the ACK below moves neither PSN the timer looks at) */
	if (atomic_load_explicit(&rc->cnt[SRN_CNT_tx_packets], memory_order_relaxed) != sent) {
		now = srn_now_ns();
		rc->req_tx_ns = now;
		if (rc->ack_pending && rc->type == IBV_QPT_RC)
			responder_ack_flush(rc);
	}
	if (arm)
		arm_retry(rc, &now);
	rc_tx_batch_end();
}

/* Ping-pong over RDMA WRITE (ib_write_lat): the target's application
 * spins on memory, so its engine thread places each write; an ACK sent
 * at once reaches the requester alone, and the requester's application,
 * done polling, spins on memory when the answer comes: the answer then
 * needs the requester's engine thread too, a wake-up (10-40 us here, a
 * 4 ms tick when spinners hold both CPUs) per message.  Held back, the
 * ACK leaves with the answer (requester_run), the requester's poll for it
 * finds the answer in the same GRO buffer, and no engine thread has to
 * run.  Only for a QP that sent within RC_ANSWER_RECENT_NS (it converses),
 * and for RC_ACK_RIDE_NS at most: then the timer sends it. */
enum {
	RC_ANSWER_RECENT_NS = 1000 * 1000,
	RC_ACK_RIDE_NS = 50 * 1000,
};

bool requester_ack_rides(struct srn_rc_state *rc)
{
	uint64_t now, due;

	if (!rc->ack_pending || rc->type != IBV_QPT_RC || rc->shm_peer || !rc->req_tx_ns ||
	    rc_state(rc) != IBV_QPS_RTS)
		return false;
	now = srn_now_ns();
	if (now - rc->req_tx_ns > RC_ANSWER_RECENT_NS)
		return false;
	due = now + RC_ACK_RIDE_NS;
	if (due < rc->ack_due)
		rc->ack_due = due;
	srn_engine_arm(rc->eng, rc->ack_due);
	rc_count(rc, SRN_CNT_ack_held);
	return true;
}

/* Put the send point at psn, a PSN already assigned: sq.next at the WQE
 * holding it, that WQE's offset at psn and those after it at their start.
 * PSN ranges once assigned stay the same.  When no started WQE holds psn
 * or follows it, psn is past all that was sent: sq.next goes past them.
 * Returns the WQE holding psn, or NULL. */
static struct srn_send_wqe *seek(struct srn_rc_state *rc, uint32_t psn)
{
	struct srn_qp *qp = rc->qp;
	struct srn_send_wqe *w;
	uint32_t i;
	int32_t d;

	for (i = qp->sq.head; i != qp->sq.tail; i++) {
		w = rc_sq(qp, i);
		if (!(w->state & WQE_STARTED))
			break;
		if (wire_psn_diff(psn, w->last_psn) <= 0)
			break;
	}
	qp->sq.next = i;
	rc->since_ackreq = 0;
	if (i == qp->sq.tail || !(rc_sq(qp, i)->state & WQE_STARTED)) {
		rc->req_psn = psn;
		return NULL;
	}
	for (uint32_t j = i; j != qp->sq.tail; j++) {
		w = rc_sq(qp, j);
		if (!(w->state & WQE_STARTED))
			break;
		w->sent = 0;
	}
	w = rc_sq(qp, i);
	d = wire_psn_diff(psn, w->first_psn);
	if (d < 0)
		d = 0;
	if (!rc_is_atomic(w))
		w->sent = (uint64_t)d * rc->pmtu;
	if (w->sent > w->length)
		w->sent = w->length;
	rc->req_psn = wire_psn_add(w->first_psn, (uint32_t)d);
	return w;
}

/* Is psn held by a WQE that started (a PSN sent, or about to be)? */
static bool psn_assigned(struct srn_rc_state *rc, uint32_t psn)
{
	struct srn_qp *qp = rc->qp;

	for (uint32_t i = qp->sq.head; i != qp->sq.tail; i++) {
		struct srn_send_wqe *w = rc_sq(qp, i);

		if (!(w->state & WQE_STARTED))
			return false;
		if (wire_psn_diff(psn, w->last_psn) <= 0)
			return true;
	}
	return false;
}

void requester_rewind(struct srn_rc_state *rc, uint32_t psn)
{
	struct srn_send_wqe *w;

	if (!psn_assigned(rc, psn)) {
		/* nothing sent at or after psn: just resume */
		rc->una_psn = rc->req_psn;
		return;
	}
	rc_count(rc, SRN_CNT_req_retransmits);
	rc->rewound = true;
	rc->rewound_psn = psn;
	rc->sr_resending = false;
	rc->sr_gap_n = 0;
	w = seek(rc, psn);
	/* a READ's responses are taken from there on again */
	if (w && w == rc_sq(rc->qp, rc->qp->sq.head) && w->opcode == IBV_WR_RDMA_READ)
		rc->resp_off = w->sent;
	rc->una_psn = rc->req_psn;
}

void requester_resend(struct srn_rc_state *rc, uint32_t psn, uint32_t n)
{
	uint32_t end = wire_psn_add(psn, n);

	if (wire_psn_diff(end, rc->una_psn) <= 0 || wire_psn_diff(end, rc->req_hi_psn) > 0)
		return;
	rc_count(rc, SRN_CNT_sr_resends);
	if (rc->sr_resending) {
		if (rc->sr_gap_n < RC_SR_GAPS) {
			uint32_t i = (rc->sr_gap_first + rc->sr_gap_n++) % RC_SR_GAPS;

			rc->sr_gaps[i].psn = psn;
			rc->sr_gaps[i].n = n;
		}
		return; /* (a full queue: the responder NAKs it again) */
	}
	rc->sr_resending = true;
	rc->sr_end = end;
	seek(rc, wire_psn_diff(psn, rc->una_psn) < 0 ? rc->una_psn : psn);
}

/* The gap being resent is done: start on the next one queued still
 * unacknowledged, or go on from the furthest PSN sent. */
static void sr_next_gap(struct srn_rc_state *rc)
{
	while (rc->sr_gap_n) {
		uint32_t i = rc->sr_gap_first;
		uint32_t psn = rc->sr_gaps[i].psn, end = wire_psn_add(psn, rc->sr_gaps[i].n);

		rc->sr_gap_first = (uint8_t)((i + 1) % RC_SR_GAPS);
		rc->sr_gap_n--;
		if (wire_psn_diff(end, rc->una_psn) <= 0)
			continue;
		rc->sr_end = end;
		seek(rc, wire_psn_diff(psn, rc->una_psn) < 0 ? rc->una_psn : psn);
		return;
	}
	rc->sr_resending = false;
	requester_skip(rc, rc->req_hi_psn);
}

void requester_probe(struct srn_rc_state *rc)
{
	/* (not while a READ or atomic is out: its request is re-issued
	 * whole, and the ACK timer covers it) */
	if (!rc->sr || rc->rd_out || rc->sr_resending || rc->req_psn != rc->req_hi_psn ||
	    rc->una_psn == rc->req_psn)
		return;
	rc->probing = true;
	requester_resend(rc, wire_psn_add(rc->req_hi_psn, WIRE_PSN_MASK), 1);
}

void requester_skip(struct srn_rc_state *rc, uint32_t psn)
{
	if (wire_psn_diff(psn, rc->req_psn) > 0 && wire_psn_diff(psn, rc->req_hi_psn) <= 0)
		seek(rc, psn);
}
