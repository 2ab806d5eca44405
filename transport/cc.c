/* transport/cc: the congestion window of an RC requester on the UDP path.
 *
 * Without it a loss cost a go-back-N of the whole socket window (384
 * packets to a remote peer): at 1% random loss between two namespaces
 * ~11 bytes were resent per byte lost.  The window starts small, doubles
 * per round trip up to ssthresh, then grows by CC_AI_PKTS per round trip;
 * a loss event (the first PSN-sequence NAK for data sent after the last
 * cut) multiplies it by CC_BETA_NUM / CC_BETA_DEN, an ACK timeout drops it
 * to RC_MIN_WINDOW_PKTS.  Growth stops at CC_BDP_MULT times the measured
 * bandwidth-delay product (one RTT sample in flight at a time: the
 * packets delivered while it was out, scaled to the smallest RTT seen),
 * so the window tracks the path rather than the socket buffer alone.
 * Random loss is not congestion: the cut is gentle (0.7, as CUBIC's) so
 * 1% loss does not starve the flow.
 *
 * Not for the same-host paths (direct, shared-memory inbox: nothing is
 * lost there) nor UC/UD (no ACKs). */
#include <stdint.h>

#include "transport/rc.h"

enum {
	CC_INIT_PKTS = 64,
	CC_FLOOR_PKTS = 128,     /* the BDP bound never goes below this */
	CC_BDP_MULT = 4,
	CC_BETA_NUM = 7,
	CC_BETA_DEN = 10,
	CC_AI_PKTS = 8,          /* packets per window ACKed, above ssthresh, */
	CC_AI_DIV = 16,          /* or 1/16 of the window if more */
	CC_MIN_RTT_EPOCH = 64,   /* samples before the min RTT is renewed */
	CC_RETX_BURST = 32,
	CC_RTO_SRTT_MULT = 4,    /* the ACK timeout is at least 4 round trips */
	CC_SR_FLOOR_BDP = CC_BDP_MULT, /* SR: no loss cut below the growth bound */
};
#define CC_PAUSE_MIN_NS (2 * 1000ull)
#define CC_PAUSE_MAX_NS (100 * 1000ull)

bool cc_active(const struct srn_rc_state *rc)
{
	return rc->type == IBV_QPT_RC && !rc->shm_peer && rc->cc.cwnd;
}

static void set_cwnd(struct srn_rc_state *rc, uint32_t w)
{
	if (w < RC_MIN_WINDOW_PKTS)
		w = RC_MIN_WINDOW_PKTS;
	if (w > rc->cc.cap)
		w = rc->cc.cap;
	if (w != rc->cc.cwnd)
		rc_gauge(rc, SRN_CNT_req_cwnd, w);
	rc->cc.cwnd = w;
}

uint32_t cc_window(struct srn_rc_state *rc, uint32_t cap)
{
	if (!cc_active(rc))
		return UINT32_MAX;
	/* beyond the window the socket allows there is nothing to cut */
	rc->cc.cap = cap < RC_MIN_WINDOW_PKTS ? RC_MIN_WINDOW_PKTS : cap;
	if (rc->cc.cwnd > rc->cc.cap)
		set_cwnd(rc, rc->cc.cap);
	return rc->cc.cwnd;
}

void cc_start(struct srn_rc_state *rc)
{
	struct rc_cc *cc = &rc->cc;

	*cc = (struct rc_cc){ .ssthresh = RC_MAX_WINDOW_PKTS, .una_seen = rc->una_psn,
			      .cap = RC_MAX_WINDOW_PKTS };
	if (rc->type == IBV_QPT_RC)
		set_cwnd(rc, CC_INIT_PKTS);
}

void cc_sent(struct srn_rc_state *rc, uint32_t psn, uint64_t now)
{
	struct rc_cc *cc = &rc->cc;

	if (cc->sampling || !cc_active(rc))
		return;
	cc->sampling = true;
	cc->sample_psn = psn;
	cc->sample_t = now ? now : srn_now_ns();
	cc->sample_delivered = cc->delivered;
}

/* The sample's packet was acknowledged at now: a round trip. */
static void rtt_sample(struct rc_cc *cc, uint64_t now)
{
	uint64_t rtt = now - cc->sample_t, d = cc->delivered - cc->sample_delivered;
	uint64_t bdp, s;

	cc->sampling = false;
	if (!rtt)
		rtt = 1;
	if (!cc->epoch_min_ns || rtt < cc->epoch_min_ns)
		cc->epoch_min_ns = rtt;
	if (!cc->min_rtt_ns || rtt < cc->min_rtt_ns)
		cc->min_rtt_ns = rtt;
	if (++cc->epoch_samples >= CC_MIN_RTT_EPOCH) {
		/* a path that got slower is believed after an epoch */
		cc->min_rtt_ns = cc->epoch_min_ns;
		cc->epoch_min_ns = 0;
		cc->epoch_samples = 0;
	}
	/* A sample that waited out a gap's repair or a timeout is long:
	 * fed whole into the ACK timeout and the probe, that made them
	 * longer, and the stalls they end longer still (seen: no timeout
	 * for a minute at 10% loss).  Taken at most 2 x the smallest. */
	s = rtt < 2 * cc->min_rtt_ns ? rtt : 2 * cc->min_rtt_ns;
	cc->srtt_ns = cc->srtt_ns ? (7 * cc->srtt_ns + s) / 8 : s;
	bdp = d * cc->min_rtt_ns / rtt;
	cc->bdp_pkts -= cc->bdp_pkts / 8;
	if (bdp > cc->bdp_pkts)
		cc->bdp_pkts = bdp > RC_MAX_WINDOW_PKTS ? RC_MAX_WINDOW_PKTS : (uint32_t)bdp;
}

static uint32_t growth_bound(const struct rc_cc *cc)
{
	uint32_t b = cc->bdp_pkts * CC_BDP_MULT;

	return b < CC_FLOOR_PKTS ? CC_FLOOR_PKTS : b;
}

void cc_acked(struct srn_rc_state *rc, uint64_t now)
{
	struct rc_cc *cc = &rc->cc;
	int32_t n = wire_psn_diff(rc->una_psn, cc->una_seen);
	uint32_t w;

	if (!cc_active(rc))
		return;
	if (n <= 0) {
		if (n < 0)
			cc->una_seen = rc->una_psn; /* (a new PSN space) */
		return;
	}
	cc->una_seen = rc->una_psn;
	cc->delivered += (uint32_t)n;
	if (cc->sampling && wire_psn_diff(rc->una_psn, cc->sample_psn) > 0)
		rtt_sample(cc, now ? now : srn_now_ns());
	if (cc->recovering && wire_psn_diff(rc->una_psn, cc->recover_psn) >= 0)
		cc->recovering = false;
	w = cc->cwnd;
	if (w >= growth_bound(cc))
		return;
	if (w < cc->ssthresh) {
		w += (uint32_t)n;
	} else {
		/* +w/16 per round trip: at 10 ms a window of thousands
		 * of packets grows back in tens of round trips, not
		 * hundreds */
		cc->acc += (uint32_t)n * (w / CC_AI_DIV > CC_AI_PKTS ? w / CC_AI_DIV : CC_AI_PKTS);
		w += cc->acc / w;
		cc->acc %= w;
	}
	set_cwnd(rc, w);
}

void cc_loss(struct srn_rc_state *rc, uint32_t psn)
{
	struct rc_cc *cc = &rc->cc;
	uint32_t floor;

	if (!cc_active(rc))
		return;
	/* Go-back-N resends the sample's packet and its ACK may be a
	 * resend's.  With SR the sample's ACK comes later by the time the
	 * gap took to fill, and so many more packets were delivered
	 * meanwhile: the delivery rate stays true (at 1% loss a sample
	 * dropped on every loss would seldom complete). */
	if (!rc->sr)
		cc->sampling = false;
	cc->retx_burst = 0;
	if (cc->recovering && wire_psn_diff(psn, cc->recover_psn) < 0)
		return; /* lost from the window already cut for */
	cc->recovering = true;
	cc->recover_psn = rc->req_hi_psn;
	cc->ssthresh = cc->cwnd * CC_BETA_NUM / CC_BETA_DEN;
	/* SR: a loss costs only the packets lost, and random loss is not
	 * congestion: no cut below the bound growth stops at (4 x what the
	 * path delivered per smallest round trip), as IRN's window is a
	 * bandwidth-delay product and no more.  (Lower floors failed: with
	 * 1% loss at 5 ms +- 1 ms most RTT samples wait for a gap's repair,
	 * a round trip more than the delivery they count, and jitter puts
	 * the smallest round trip 20% below the usual one: 1x and 2x that
	 * figure cut the window at every loss and held it at 80-150
	 * packets.)  A queue, the sign of congestion, makes the round trips
	 * longer: that figure is then the path's, and the window is cut to
	 * within a queue of it. */
	floor = cc->bdp_pkts * CC_SR_FLOOR_BDP;
	if (rc->sr && cc->ssthresh < floor)
		cc->ssthresh = floor < cc->cwnd ? floor : cc->cwnd;
	if (cc->ssthresh < RC_MIN_WINDOW_PKTS)
		cc->ssthresh = RC_MIN_WINDOW_PKTS;
	rc_count(rc, SRN_CNT_cc_cuts);
	set_cwnd(rc, cc->ssthresh);
}

uint64_t cc_rto(const struct srn_rc_state *rc, uint64_t timeout_ns)
{
	uint64_t floor = (uint64_t)CC_RTO_SRTT_MULT * rc->cc.srtt_ns;

	/* (0: the application asked to wait for ever) */
	return timeout_ns && cc_active(rc) && timeout_ns < floor ? floor : timeout_ns;
}

void cc_timeout(struct srn_rc_state *rc)
{
	struct rc_cc *cc = &rc->cc;

	if (!cc_active(rc))
		return;
	cc->sampling = false;
	cc->retx_burst = 0;
	cc->recovering = true;
	cc->recover_psn = rc->req_hi_psn;
	cc->ssthresh = cc->cwnd / 2;
	if (cc->ssthresh < RC_MIN_WINDOW_PKTS)
		cc->ssthresh = RC_MIN_WINDOW_PKTS;
	rc_count(rc, SRN_CNT_cc_cuts);
	set_cwnd(rc, RC_MIN_WINDOW_PKTS);
}

bool cc_retx_pause(struct srn_rc_state *rc, uint64_t *pause_ns)
{
	struct rc_cc *cc = &rc->cc;
	uint64_t p = CC_PAUSE_MAX_NS;

	if (!cc_active(rc) || ++cc->retx_burst < CC_RETX_BURST)
		return false;
	cc->retx_burst = 0;
	/* a burst at the delivery rate: burst * min RTT / BDP */
	if (cc->bdp_pkts && cc->min_rtt_ns)
		p = (uint64_t)CC_RETX_BURST * cc->min_rtt_ns / cc->bdp_pkts;
	if (p < CC_PAUSE_MIN_NS)
		p = CC_PAUSE_MIN_NS;
	if (p > CC_PAUSE_MAX_NS)
		p = CC_PAUSE_MAX_NS;
	*pause_ns = p;
	rc_count(rc, SRN_CNT_req_retx_pauses);
	return true;
}

/* Tail-loss probe.  A loss among the last packets sent, or of the ACK
 * for them, leaves the responder nothing to NAK: the sender waited for
 * the ACK timeout (67 ms for perftest, 0.5 s for rc_stream_check), ~100
 * times per 256 MiB at 10% loss.  With SR, the last packet resent with
 * AckReq a few round trips after the last progress makes the responder
 * NAK the gap or acknowledge again; a few probes, each twice as late,
 * then the ACK timeout as before. */
enum { CC_PROBE_MAX = 4 };
#define CC_PROBE_SLACK_NS (2 * 1000 * 1000ull)

void cc_probe_arm(struct srn_rc_state *rc, uint64_t now)
{
	struct rc_cc *cc = &rc->cc;

	cc->probe_at = 0;
	cc->probe_n = 0;
	/* (not to a peer on this host: nothing is lost on the way there,
	 * and an ACK late by a scheduling delay would be answered by a
	 * useless resend) */
	if (!rc->sr || !cc_active(rc) || !cc->srtt_ns || rc->peer_softrnic)
		return;
	cc->probe_una = rc->una_psn;
	cc->probe_at = now + 2 * cc->srtt_ns + CC_PROBE_SLACK_NS;
	srn_engine_arm(rc->eng, cc->probe_at);
}

bool cc_probe_fire(struct srn_rc_state *rc, uint64_t now)
{
	struct rc_cc *cc = &rc->cc;

	cc->probe_at = 0;
	/* progress since (the timer is armed anew), or nothing out */
	if (rc->una_psn != cc->probe_una || rc->una_psn == rc->req_psn ||
	    cc->probe_n >= CC_PROBE_MAX)
		return false;
	cc->probe_n++;
	cc->probe_at = now + ((2 * cc->srtt_ns + CC_PROBE_SLACK_NS) << cc->probe_n);
	srn_engine_arm(rc->eng, cc->probe_at);
	rc_count(rc, SRN_CNT_req_probes);
	return true;
}
