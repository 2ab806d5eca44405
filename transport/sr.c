/* transport/sr: selective retransmission between two softrnic RC QPs
 * (in the spirit of IRN), and the rule deciding when a QP uses it.
 *
 * Go-back-N makes a responder drop everything after a lost packet, so the
 * requester resends a whole window per loss.  With SR the responder holds
 * packets that arrive ahead of the expected PSN (up to SR_WIN of them, a
 * copy each), NAKs the gap at once (a PSN-sequence NAK whose MSN field
 * carries the gap's length in PSNs), and once the gap is filled runs the
 * held packets through the state machine in PSN order, as if they had
 * just arrived: every check and every side effect happens in order, as
 * before.  A further gap among the held packets is NAKed when the
 * expected PSN reaches it.  The requester resends the gap alone, then
 * carries on where it was (requester_resend).  A NAK with length 0 (held
 * ones lost for want of room) asks for plain go-back-N from there; an ACK
 * timeout always goes back N.
 *
 * The NAK's MSN field is the only change on the wire, so SR is used only
 * with a peer known to speak it (sr_decide): after ECE named softrnic's
 * SR option on both sides (ibv_set_ece, which rdma_cm calls for its
 * QPs), with a same-host softrnic peer found in the QPN registry, or for
 * QPs connected out of band when SOFTRNIC_SELECTIVE_RETX=1 says every
 * peer is softrnic.  Anything else (kernel rxe, hardware) gets plain
 * go-back-N, unchanged. */
#include <stdlib.h>
#include <string.h>

#include "net/settings.h"
#include "transport/rc.h"

/* PSNs ahead of epsn held, at most: a whole window (a gap at its front
 * must not turn what follows into a go-back-N); the slots are allocated
 * at the first gap */
enum { SR_WIN = RC_MAX_WINDOW_PKTS };

struct rc_sr_buf {
	uint32_t held;           /* packets held */
	uint32_t pmtu;           /* slot size */
	bool overflow;           /* one ahead was dropped: no room */
	uint64_t bits[SR_WIN / 64];
	struct wire_pkt pkt[SR_WIN];
	uint8_t data[];          /* SR_WIN slots of pmtu bytes */
};

/* How long a NAKed gap may stay open before it is NAKed again: its
 * resend takes a round trip, which the time NAKed gaps took to fill
 * measures (at 5 ms of delay, a re-NAK every 1 ms resent each gap ten
 * times) */
static uint64_t renak_ns(const struct srn_rc_state *rc)
{
	uint64_t t = 2 * rc->sr_fill_ns;

	return t > RC_RENAK_NS ? t : RC_RENAK_NS;
}

bool sr_decide(const struct srn_rc_state *rc)
{
	if (rc->type != IBV_QPT_RC)
		return false;
	return rc->sr_want || rc->peer_softrnic || srn_setting(SRN_SET_SELECTIVE_RETX, NULL);
}

static bool held(const struct rc_sr_buf *b, uint32_t slot)
{
	return b->bits[slot / 64] >> (slot % 64) & 1;
}

static void set_held(struct rc_sr_buf *b, uint32_t slot, bool on)
{
	uint64_t m = 1ull << (slot % 64);

	if (on) {
		b->bits[slot / 64] |= m;
		b->held++;
	} else {
		b->bits[slot / 64] &= ~m;
		b->held--;
	}
}

bool sr_hold(struct srn_rc_state *rc, const struct wire_pkt *pkt, uint32_t ahead)
{
	struct rc_sr_buf *b = rc->sr_buf;
	uint32_t slot = pkt->psn % SR_WIN;

	if (b && b->pmtu != rc->pmtu) {
		sr_free(rc);
		b = NULL;
	}
	if (ahead >= SR_WIN || pkt->payload_len > rc->pmtu) {
		if (b)
			b->overflow = true;
		rc_count(rc, SRN_CNT_sr_overflow);
		return false;
	}
	if (!b) {
		b = calloc(1, sizeof(*b) + (size_t)SR_WIN * rc->pmtu);
		if (!b)
			return false;
		b->pmtu = rc->pmtu;
		rc->sr_buf = b;
	}
	if (held(b, slot))
		return false; /* a copy of one held */
	b->pkt[slot] = *pkt;
	if (pkt->payload_len) {
		memcpy(b->data + (size_t)slot * b->pmtu, pkt->payload, pkt->payload_len);
		b->pkt[slot].payload = b->data + (size_t)slot * b->pmtu;
	}
	set_held(b, slot, true);
	rc_count(rc, SRN_CNT_sr_held);
	return true;
}

uint32_t sr_gap_len(const struct srn_rc_state *rc)
{
	const struct rc_sr_buf *b = rc->sr_buf;

	if (!b || !b->held)
		return 0;
	for (uint32_t k = 1; k < SR_WIN; k++) {
		uint32_t psn = wire_psn_add(rc->epsn, k);

		if (held(b, psn % SR_WIN) && b->pkt[psn % SR_WIN].psn == psn)
			return k;
	}
	return 0;
}

bool sr_take(struct srn_rc_state *rc, struct wire_pkt *out)
{
	struct rc_sr_buf *b = rc->sr_buf;
	uint32_t slot = rc->epsn % SR_WIN;

	if (!b || !b->held || !held(b, slot))
		return false;
	if (b->pkt[slot].psn != rc->epsn) {
		set_held(b, slot, false); /* stale: from an earlier lap */
		return false;
	}
	*out = b->pkt[slot]; /* (its payload stays in the slot: nothing is
			      * held at epsn while it is processed) */
	set_held(b, slot, false);
	return true;
}

bool sr_lost_room(struct srn_rc_state *rc)
{
	struct rc_sr_buf *b = rc->sr_buf;
	bool o = b && b->overflow && !b->held;

	if (o)
		b->overflow = false;
	return o;
}

void sr_seen(struct srn_rc_state *rc, uint32_t psn,
	     void (*nak)(struct srn_rc_state *rc, uint32_t psn, uint32_t msn))
{
	uint32_t hi = wire_psn_diff(rc->sr_hi, rc->epsn) < 0 ? rc->epsn : rc->sr_hi;
	int32_t d = wire_psn_diff(psn, hi);
	uint64_t now;

	if (d >= 0) {
		/* the front moved; past a gap that is not the first (which
		 * the caller NAKs), NAK it now, acknowledging nothing */
		if (d > 0 && hi != rc->epsn)
			nak(rc, hi, (uint32_t)d | RC_SR_NAK_LATER);
		rc->sr_hi = wire_psn_add(psn, 1);
		return;
	}
	if (!rc->nak_sent || psn == rc->epsn)
		return;
	/* the first gap's resend may be lost too: NAK it again, not more
	 * often than renak_ns, rather than wait for the ACK timeout */
	now = srn_now_ns();
	if (now - rc->sr_nak_at > renak_ns(rc))
		nak(rc, rc->epsn, sr_gap_len(rc));
}

void sr_renak_arm(struct srn_rc_state *rc, uint64_t now, bool timed)
{
	/* timed from its first NAK even when NAKed again: a fill time
	 * too long only makes a lost resend wait longer; timing only gaps
	 * NAKed once would never time one while every gap is NAKed again
	 * before its resend can come */
	if (rc->sr_gap_psn != rc->epsn) {
		rc->sr_gap_psn = rc->epsn;
		rc->sr_gap_t0 = timed ? now : 0;
	}
	rc->sr_nak_at = now;
	srn_engine_arm(rc->eng, now + renak_ns(rc));
}

void sr_filled(struct srn_rc_state *rc)
{
	if (rc->sr_gap_psn == rc->epsn && rc->sr_gap_t0) {
		uint64_t s = srn_now_ns() - rc->sr_gap_t0;

		/* at most the interval in force: a gap whose resend was
		 * lost waited that long more, and fed whole, the interval
		 * would grow on itself */
		if (s > renak_ns(rc))
			s = renak_ns(rc);
		rc->sr_fill_ns = rc->sr_fill_ns ? (7 * rc->sr_fill_ns + s) / 8 : s;
	}
	rc->sr_gap_t0 = 0;
}

uint64_t sr_renak_timer(struct srn_rc_state *rc, uint64_t now,
			void (*nak)(struct srn_rc_state *rc, uint32_t psn, uint32_t msn))
{
	enum ibv_qp_state st = rc_state(rc);

	/* (the requester's window may be full, waiting on the gap: no
	 * packet would come to make sr_seen NAK it again) */
	if (!rc->nak_sent || !rc->sr_buf || !sr_gap_len(rc) ||
	    (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD))
		return 0;
	if (now - rc->sr_nak_at >= renak_ns(rc))
		nak(rc, rc->epsn, sr_gap_len(rc));
	return rc->sr_nak_at + renak_ns(rc);
}

void sr_clear(struct srn_rc_state *rc)
{
	struct rc_sr_buf *b = rc->sr_buf;

	if (b) {
		memset(b->bits, 0, sizeof(b->bits));
		b->held = 0;
		b->overflow = false;
	}
}

void sr_free(struct srn_rc_state *rc)
{
	free(rc->sr_buf);
	rc->sr_buf = NULL;
}
