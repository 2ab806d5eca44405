/* transport/completer: responses (ACK, NAK, read responses, atomic ACKs)
 * -> retire send WQEs in order -> completions; retransmission on
 * PSN-sequence NAK and timeout (go-back-N), RNR waits, error completions.
 * IBTA Vol 1 9.7.5 (requester side). */
#include <string.h>

#include "transport/rc.h"
#include "verbs/shared_rings.h"

/* IBTA Table 45: RNR NAK timer codes, in units of 10 us. */
static const uint32_t rnr_10us[32] = {
	65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
	256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192,
	12288, 16384, 24576, 32768, 49152,
};

static void push_send_wc(struct srn_rc_state *rc, struct srn_send_wqe *w,
			 enum ibv_wc_status st)
{
	struct srn_qp *qp = rc->qp;
	struct ibv_wc wc;

	if (st == IBV_WC_SUCCESS && !qp->sq_sig_all &&
	    !(w->send_flags & IBV_SEND_SIGNALED))
		return;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr_id;
	wc.status = st;
	wc.opcode = rc_wc_opcode(w->opcode);
	wc.qp_num = rc->qpn;
	if (rc_is_atomic(w))
		wc.byte_len = 8;
	else
		wc.byte_len = (uint32_t)w->length;
	srn_cq_push(qp->send_cq, &wc, false);
}

void completer_fail(struct srn_rc_state *rc, enum ibv_wc_status st)
{
	struct srn_qp *qp = rc->qp;

	if (qp->sq.head != qp->sq.tail) {
		struct srn_send_wqe *w = rc_sq(qp, qp->sq.head);

		push_send_wc(rc, w, st);
		w->state = WQE_NEW;
		qp->sq.head++;
		if ((int32_t)(qp->sq.next - qp->sq.head) < 0)
			qp->sq.next = qp->sq.head;
	}
	srn_log_qp(rc, SRN_LOG_INFO, NULL, rc->una_psn, "error completion %s",
		   ibv_wc_status_str(st));
	rc_qp_error(rc, IBV_EVENT_QP_FATAL);
}

/* Retire finished WQEs from the head, in order. */
static void retire(struct srn_rc_state *rc)
{
	struct srn_qp *qp = rc->qp;

	while (qp->sq.head != qp->sq.next) {
		struct srn_send_wqe *w = rc_sq(qp, qp->sq.head);

		if (rc_is_rd_atomic(w)) {
			if (!(w->state & WQE_DONE))
				break;
			rc->rd_out--;
		} else if (wire_psn_diff(w->last_psn, rc->una_psn) >= 0) {
			break;
		}
		push_send_wc(rc, w, IBV_WC_SUCCESS);
		w->state = WQE_NEW;
		qp->sq.head++;
		rc->resp_off = 0;
	}
	if (qp->sq.head == qp->sq.next && qp->sq.head != qp->sq.tail &&
	    (rc_sq(qp, qp->sq.head)->state & WQE_LOC_ERR))
		completer_fail(rc, IBV_WC_LOC_PROT_ERR);
}

void completer_retire_sent(struct srn_rc_state *rc)
{
	retire(rc);
}

/* SR: a NAK for the gap resent less than a round trip ago was sent
 * before the resend could arrive (a responder that NAKs again sooner):
 * the resend is on its way, another would be wasted. */
static bool sr_nak_repeated(struct srn_rc_state *rc, uint32_t psn)
{
	uint64_t now = srn_now_ns();

	if (psn == rc->sr_rx_nak_psn && now - rc->sr_rx_nak_at < rc->cc.srtt_ns) {
		rc_count(rc, SRN_CNT_comp_nak_seq_stale);
		return true;
	}
	rc->sr_rx_nak_psn = psn;
	rc->sr_rx_nak_at = now;
	return false;
}

static void progress_made(struct srn_rc_state *rc)
{
	rc->gap_valid = false;
	rc->rewound = false;
	rc->retry_left = rc->retry_cnt;
	rc->rnr_left = rc->rnr_retry;
	rc->retry_at = 0;
}

/* PSN where the first unfinished read/atomic expects its next response,
 * or false if none is outstanding. */
static bool pending_rd_psn(struct srn_rc_state *rc, uint32_t *psn)
{
	struct srn_qp *qp = rc->qp;

	/* The WQE at sq.next may be a READ with requests still to send. */
	for (uint32_t i = qp->sq.head; i != qp->sq.tail; i++) {
		struct srn_send_wqe *w = rc_sq(qp, i);

		if (!(w->state & WQE_STARTED))
			break;
		if (rc_is_rd_atomic(w) && !(w->state & WQE_DONE)) {
			uint32_t off = i == qp->sq.head && !rc_is_atomic(w) ?
				       (uint32_t)rc_pmtu_div(rc, rc->resp_off) : 0;

			*psn = wire_psn_add(w->first_psn, off);
			return true;
		}
	}
	return false;
}

/* Everything up to and including PSN a is acknowledged.  Returns false
 * if nothing could be done (stale, or a response must be re-requested). */
static bool ack_upto(struct srn_rc_state *rc, uint32_t a)
{
	uint32_t lim;

	if (wire_psn_diff(wire_psn_add(a, 1), rc->una_psn) <= 0)
		return true; /* nothing new */
	if (wire_psn_diff(a, rc->req_hi_psn) >= 0) {
		rc_count(rc, SRN_CNT_comp_bad_resp);
		return false; /* acknowledges what was never sent */
	}
	/* An ACK beyond an unanswered read/atomic means its responses were
	 * lost (IBTA 9.7.5.1.3 implied NAK): ask again from there. */
	if (pending_rd_psn(rc, &lim) && wire_psn_diff(a, lim) >= 0) {
		if (wire_psn_diff(lim, rc->una_psn) > 0) {
			rc->una_psn = lim;
			progress_made(rc);
			retire(rc);
		}
		/* Once per gap: responses still in flight behind the lost one
		 * must not trigger a re-request each.  If the re-request's
		 * answer loses its first packet too, ask again after a short
		 * while rather than waiting for the full ACK timeout. */
		uint64_t now = srn_now_ns();

		if (!rc->gap_valid || rc->gap_psn != lim || now - rc->gap_at > RC_RENAK_NS) {
			rc_count(rc, SRN_CNT_comp_read_gap);
			rc->gap_valid = true;
			rc->gap_psn = lim;
			rc->gap_at = now;
			cc_loss(rc, lim);
			requester_rewind(rc, lim);
		}
		return false;
	}
	rc->una_psn = wire_psn_add(a, 1);
	/* past where a go-back resends from: it all arrived */
	requester_skip(rc, rc->una_psn);
	progress_made(rc);
	retire(rc);
	return true;
}

/* With SR the responder may NAK a gap past where a resend is (it holds
 * what followed): anything sent counts. */
static bool psn_outstanding(struct srn_rc_state *rc, uint32_t psn)
{
	return wire_psn_diff(psn, rc->una_psn) >= 0 &&
	       wire_psn_diff(psn, rc->sr ? rc->req_hi_psn : rc->req_psn) < 0;
}

/* No receive WQE posted: the peer's next request cannot complete
 * anything here (a SEND would meet an RNR NAK). */
static bool rq_empty(const struct srn_rc_state *rc)
{
	const struct srn_qp *qp = rc->qp;

	if (rc->rwqe_have || qp->srq)
		return false;
	return !qp->rqs || atomic_load_explicit(&qp->rqs->head, memory_order_relaxed) ==
				   atomic_load_explicit(&qp->rqs->tail, memory_order_relaxed);
}

static void rx_ack(struct srn_rc_state *rc, const struct wire_pkt *pkt)
{
	uint8_t syn = pkt->syndrome;
	uint32_t psn = pkt->psn;

	switch (syn >> 5) {
	case 0: /* ACK */
		rc_count(rc, SRN_CNT_comp_acks);
		ack_upto(rc, psn);
		/* The send queue is empty, requests came since it last was
		 * and no receive is posted: the application converses over
		 * one-sided operations, so it waits for the peer's next one
		 * by looking at its memory, not by polling (see
		 * srn_transport_progress) */
		if (rc->qp->sq.head == rc->qp->sq.tail && rc->epsn != rc->drain_epsn &&
		    rq_empty(rc)) {
			rc->drain_epsn = rc->epsn;
			srn_engine_ev_ack_drained(rc->eng);
		}
		return;
	case 1: /* RNR NAK: psn is the request that found no receive WQE */
		if (!psn_outstanding(rc, psn))
			break;
		rc_count(rc, SRN_CNT_nak_rx);
		rc_count(rc, SRN_CNT_comp_nak_rnr);
		if (!ack_upto(rc, wire_psn_add(psn, WIRE_PSN_MASK)))
			return;
		if (rc->rnr_left == 0) {
			completer_fail(rc, IBV_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		if (rc->rnr_retry != 7)
			rc->rnr_left--;
		rc_count(rc, SRN_CNT_req_rnr_retries);
		rc->rnr_wait = true;
		rc->rnr_psn = psn;
		rc->retry_at = 0;
		rc->rnr_at = srn_now_ns() + (uint64_t)rnr_10us[syn & 0x1f] * 10000;
		srn_engine_arm(rc->eng, rc->rnr_at);
		return;
	case 3: /* NAK */
		if (!psn_outstanding(rc, psn))
			break;
		rc_count(rc, SRN_CNT_nak_rx);
		if (rc->sr && syn == WIRE_AETH_NAK_PSN_SEQ && (pkt->msn & RC_SR_NAK_LATER)) {
			/* a gap past the first: nothing acknowledged */
			rc_count(rc, SRN_CNT_comp_nak_seq);
			if (sr_nak_repeated(rc, psn))
				return;
			cc_loss(rc, psn);
			requester_resend(rc, psn, pkt->msn & ~RC_SR_NAK_LATER);
			return;
		}
		if (!ack_upto(rc, wire_psn_add(psn, WIRE_PSN_MASK)))
			return;
		switch (syn) {
		case WIRE_AETH_NAK_PSN_SEQ:
			rc_count(rc, SRN_CNT_comp_nak_seq);
			/* once per gap: we went back to psn already and
			 * nothing came since (a copy, or sent before our
			 * resent packets arrived); the timer covers a
			 * resend that is lost */
			if (rc->rewound && rc->rewound_psn == psn && !rc->sr) {
				rc_count(rc, SRN_CNT_comp_nak_seq_stale);
				return;
			}
			if (rc->sr && sr_nak_repeated(rc, psn))
				return;
			cc_loss(rc, psn);
			/* SR: the MSN field is the gap's length (sr.c) */
			if (rc->sr && pkt->msn &&
			    wire_psn_diff(wire_psn_add(psn, pkt->msn), rc->req_hi_psn) <= 0) {
				/* this gap first: those queued follow it */
				rc->sr_resending = false;
				requester_resend(rc, psn, pkt->msn);
			} else {
				requester_rewind(rc, psn);
			}
			return;
		case WIRE_AETH_NAK_INV_REQ:
		case WIRE_AETH_NAK_INV_RD_REQ:
			rc_count(rc, SRN_CNT_comp_nak_err);
			completer_fail(rc, IBV_WC_REM_INV_REQ_ERR);
			return;
		case WIRE_AETH_NAK_REM_ACCESS:
			rc_count(rc, SRN_CNT_comp_nak_err);
			completer_fail(rc, IBV_WC_REM_ACCESS_ERR);
			return;
		case WIRE_AETH_NAK_REM_OP:
			rc_count(rc, SRN_CNT_comp_nak_err);
			completer_fail(rc, IBV_WC_REM_OP_ERR);
			return;
		}
		break;
	}
	rc_count(rc, SRN_CNT_comp_bad_resp);
}

/* Common checks for a read response / atomic ACK at PSN p: acknowledges
 * what precedes p; returns the head WQE it answers, or NULL to drop. */
static struct srn_send_wqe *resp_target(struct srn_rc_state *rc, uint32_t p)
{
	struct srn_qp *qp = rc->qp;
	struct srn_send_wqe *w;
	uint32_t want;

	if (wire_psn_diff(p, rc->una_psn) < 0) {
		rc_count(rc, SRN_CNT_comp_dup_resp);
		return NULL;
	}
	if (wire_psn_diff(p, rc->req_psn) >= 0) {
		rc_count(rc, SRN_CNT_comp_bad_resp);
		return NULL;
	}
	if (!ack_upto(rc, wire_psn_add(p, WIRE_PSN_MASK)))
		return NULL;
	if (qp->sq.head == qp->sq.next && qp->sq.head == qp->sq.tail)
		return NULL;
	w = rc_sq(qp, qp->sq.head);
	if (!(w->state & WQE_STARTED) || !rc_is_rd_atomic(w) || (w->state & WQE_DONE) ||
	    !pending_rd_psn(rc, &want) || want != p) {
		rc_count(rc, SRN_CNT_comp_bad_resp);
		return NULL;
	}
	return w;
}

/* True if the WQE whose request went at PSN p is an RDMA ATOMIC WRITE
 * (searched among those sent and not yet retired). */
static bool atomic_write_at(struct srn_rc_state *rc, uint32_t p)
{
	struct srn_qp *qp = rc->qp;

	for (uint32_t i = qp->sq.head; i != qp->sq.next; i++) {
		const struct srn_send_wqe *w = rc_sq(qp, i);

		if (w->first_psn == p)
			return w->opcode == IBV_WR_ATOMIC_WRITE;
	}
	return false;
}

static void rx_read_resp(struct srn_rc_state *rc, const struct wire_pkt *pkt)
{
	const struct wire_opcode_info *info = &wire_opcodes[pkt->opcode];
	struct srn_send_wqe *w;
	struct iovec iov[SRN_MAX_SGE];
	bool last;
	int n;

	/* An RDMA ATOMIC WRITE is answered with an empty READ RESPONSE ONLY
	 * (as rxe answers it): an acknowledgement up to its PSN. */
	if (pkt->payload_len == 0 && (info->caps & WIRE_IS_FIRST) && (info->caps & WIRE_IS_LAST) &&
	    atomic_write_at(rc, pkt->psn)) {
		ack_upto(rc, pkt->psn);
		return;
	}
	w = resp_target(rc, pkt->psn);
	if (!w)
		return;
	if (w->opcode != IBV_WR_RDMA_READ) {
		rc_count(rc, SRN_CNT_comp_bad_resp);
		return;
	}
	/* Requests may be re-issued from any packet boundary after a loss,
	 * so a response's place is its PSN, not its opcode: every packet but
	 * the last of a request is exactly one MTU, and nothing may run past
	 * the WQE's length. */
	last = info->caps & WIRE_IS_LAST;
	if (pkt->payload_len > rc->pmtu || rc->resp_off + pkt->payload_len > w->length ||
	    ((!last || rc->resp_off + pkt->payload_len != w->length) &&
	     pkt->payload_len != rc->pmtu)) {
		rc_count(rc, SRN_CNT_comp_bad_resp);
		return;
	}
	if (pkt->payload_len) {
		n = rc_sge_map_cached(rc, rc->qp->pd, w->sge, w->num_sge, rc->resp_off,
				      pkt->payload_len, IBV_ACCESS_LOCAL_WRITE, iov, SRN_MAX_SGE,
				      &w->sge0_base, &w->sge0_gen);
		if (n < 0) {
			completer_fail(rc, IBV_WC_LOC_PROT_ERR);
			return;
		}
		const uint8_t *src = pkt->payload;

		for (int i = 0; i < n; i++) {
			memcpy(iov[i].iov_base, src, iov[i].iov_len);
			src += iov[i].iov_len;
		}
	}
	rc->resp_off += pkt->payload_len;
	rc->una_psn = wire_psn_add(pkt->psn, 1);
	progress_made(rc);
	if (rc->resp_off >= w->length) {
		w->state |= WQE_DONE;
		retire(rc);
	}
}

static void rx_atomic_ack(struct srn_rc_state *rc, const struct wire_pkt *pkt)
{
	struct srn_send_wqe *w = resp_target(rc, pkt->psn);
	struct iovec iov[1];

	if (!w)
		return;
	if (!rc_is_atomic(w)) {
		rc_count(rc, SRN_CNT_comp_bad_resp);
		return;
	}
	if (w->num_sge > 0 && w->sge[0].length > 0) {
		uint64_t v = pkt->orig;

		if (rc_sge_map(rc, rc->qp->pd, w->sge, 1, 0, 8, IBV_ACCESS_LOCAL_WRITE, iov, 1) != 1) {
			completer_fail(rc, IBV_WC_LOC_PROT_ERR);
			return;
		}
		memcpy(iov[0].iov_base, &v, 8);
	}
	rc->una_psn = wire_psn_add(pkt->psn, 1);
	progress_made(rc);
	w->state |= WQE_DONE;
	retire(rc);
}

/* What a response may have made possible: more to send, a retry timer. */
static void after_response(struct srn_rc_state *rc)
{
	cc_acked(rc, 0);
	if (rc_state(rc) == IBV_QPS_RTS) {
		requester_run(rc);
		requester_arm_retry(rc);
	} else {
		requester_win_sync(rc); /* (requester_run does it in RTS) */
	}
}

/* Does the QP take responses in its state?  Else n are counted dropped. */
static bool takes_responses(struct srn_rc_state *rc, uint64_t n)
{
	enum ibv_qp_state st = rc_state(rc);

	if (st == IBV_QPS_RTS || st == IBV_QPS_SQD)
		return true;
	rc_count_n(rc, SRN_CNT_rx_drop_qp_state, n);
	return false;
}

void completer_rx(struct srn_rc_state *rc, const struct wire_pkt *pkt)
{
	const struct wire_opcode_info *info = &wire_opcodes[pkt->opcode];

	if (!takes_responses(rc, 1))
		return;
	if (info->caps & WIRE_IS_ACK)
		rx_ack(rc, pkt);
	else if (info->caps & WIRE_IS_READ)
		rx_read_resp(rc, pkt);
	else if (info->caps & WIRE_IS_ATOMIC)
		rx_atomic_ack(rc, pkt);
	else
		rc_count(rc, SRN_CNT_comp_bad_resp);
	after_response(rc);
}

/* ---- the ACK box (rc.h) ---------------------------------------------------
 * Only positive ACKs go in: they are cumulative, so the newest stands for
 * all (the count keeps comp_acks true).  A NAK, a read response or an
 * atomic ACK waits for the lock as before, and whoever takes the lock to
 * deliver a packet empties the box first, so responses keep their order. */
enum { BOX_PSN_MASK = WIRE_PSN_MASK, BOX_COUNT_SHIFT = 24, BOX_COUNT_MAX = 0xffffff };

void completer_ack_box_post(struct srn_rc_state *rc, uint32_t psn)
{
	uint64_t old = atomic_load_explicit(&rc->ack_box, memory_order_relaxed), nv;

	do {
		uint64_t n = 1;
		uint32_t p = psn & BOX_PSN_MASK;

		if (old & RC_ACK_BOX_FULL) {
			uint32_t op = (uint32_t)(old & BOX_PSN_MASK);

			n += (old >> BOX_COUNT_SHIFT) & BOX_COUNT_MAX;
			if (n > BOX_COUNT_MAX)
				n = BOX_COUNT_MAX;
			if (wire_psn_diff(p, op) < 0)
				p = op; /* an older ACK, overtaken (reordered) */
		}
		nv = RC_ACK_BOX_FULL | n << BOX_COUNT_SHIFT | p;
	} while (!atomic_compare_exchange_weak_explicit(&rc->ack_box, &old, nv,
							memory_order_seq_cst,
							memory_order_relaxed));
	rc_count(rc, SRN_CNT_comp_ack_handoffs);
}

bool completer_ack_box_take(struct srn_rc_state *rc)
{
	uint64_t b;
	uint32_t n;

	if (!atomic_load_explicit(&rc->ack_box, memory_order_relaxed))
		return false;
	b = atomic_exchange_explicit(&rc->ack_box, 0, memory_order_acquire);
	if (!(b & RC_ACK_BOX_FULL) || rc->dead)
		return false;
	n = (uint32_t)((b >> BOX_COUNT_SHIFT) & BOX_COUNT_MAX);
	/* what rx_pkt and completer_rx check before an ACK counts */
	if (!rc->path_ok) {
		rc_count_n(rc, SRN_CNT_rx_drop_no_path, n);
		return true;
	}
	if (!takes_responses(rc, n))
		return true;
	rc_count_n(rc, SRN_CNT_comp_acks, n);
	ack_upto(rc, (uint32_t)(b & BOX_PSN_MASK));
	after_response(rc);
	return true;
}

static uint64_t requester_timers(struct srn_rc_state *rc, uint64_t now);

uint64_t completer_timer(struct srn_rc_state *rc, uint64_t now)
{
	/* the responder's held-back ACK (responder.c) rides on this timer */
	uint64_t ack = rc->type == IBV_QPT_RC ? responder_ack_timer(rc, now) : 0;
	uint64_t next = requester_timers(rc, now);

	return ack && (!next || ack < next) ? ack : next;
}

static uint64_t requester_timers(struct srn_rc_state *rc, uint64_t now)
{
	uint64_t next = 0;

	if (rc_state(rc) != IBV_QPS_RTS && rc_state(rc) != IBV_QPS_SQD) {
		rc->retry_at = rc->rnr_at = rc->resume_at = 0;
		return 0;
	}
	if (rc->resume_at && now >= rc->resume_at) {
		rc->resume_at = 0;
		requester_run(rc);
	}
	if (rc->rnr_at && now >= rc->rnr_at) {
		rc->rnr_at = 0;
		rc->rnr_wait = false;
		requester_rewind(rc, rc->rnr_psn);
		requester_run(rc);
	}
	if (rc->cc.probe_at && now >= rc->cc.probe_at && cc_probe_fire(rc, now)) {
		requester_probe(rc);
		requester_run(rc);
	}
	if (rc->retry_at && now >= rc->retry_at) {
		rc->retry_at = 0;
		if (rc->una_psn != rc->req_psn) {
			rc_count(rc, SRN_CNT_req_timeouts);
			srn_log_qp(rc, SRN_LOG_DEBUG, NULL, rc->una_psn,
				   "ACK timeout, resending (next new psn %u, window %u)",
				   rc->req_psn, rc->cc.cwnd);
			if (rc->retry_left == 0) {
				completer_fail(rc, IBV_WC_RETRY_EXC_ERR);
				return 0;
			}
			/* 7 is seven retries: only rnr_retry's 7 means
			 * for ever (ibv_modify_qp(3), IBTA 9.7.6.1.3) */
			rc->retry_left--;
			cc_timeout(rc);
			/* the peer may have been unknown or moved */
			rc_resolve_path(rc);
			requester_rewind(rc, rc->una_psn);
			requester_run(rc);
		}
	}
	if (rc_state(rc) == IBV_QPS_RTS)
		requester_arm_retry(rc);
	if (rc->resume_at)
		next = rc->resume_at;
	if (rc->rnr_at && (!next || rc->rnr_at < next))
		next = rc->rnr_at;
	if (rc->retry_at && (!next || rc->retry_at < next))
		next = rc->retry_at;
	if (rc->cc.probe_at && (!next || rc->cc.probe_at < next))
		next = rc->cc.probe_at;
	return next;
}
