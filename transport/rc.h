/* transport/rc: the Reliable Connected transport state of one QP and the
 * functions the requester, responder and completer share.  Everything
 * here is guarded by qp->lock. */
#ifndef TRANSPORT_RC_H
#define TRANSPORT_RC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/shm_ring.h"
#include "net/udp.h"
#include "transport/engine.h"
#include "verbs/srn.h"
#include "wire/wire.h"

/* send WQE state bits (srn_send_wqe.state) */
enum {
	WQE_NEW = 0,
	WQE_STARTED = 1 << 0,        /* PSNs assigned, counted in rd_out */
	WQE_DONE = 1 << 1,           /* read/atomic response fully placed */
	WQE_LOC_ERR = 1 << 2,        /* local protection error building it */
};

/* Requester window: unacknowledged bytes in flight, so a 1 GiB message
 * does not flood the socket buffers.  RC_WINDOW_BYTES is the most; the
 * requester uses less when the receiver's socket buffer is smaller
 * (requester.c: a peer on this host has a buffer like ours; a remote one
 * gets RC_REMOTE_WINDOW_BYTES). */
enum {
	RC_WINDOW_BYTES = 8 << 20,
	RC_REMOTE_WINDOW_BYTES = 1 << 20,
	RC_REMOTE_WINDOW_PKTS = NET_SHM_SLOTS * 3 / 4,
	/* a remote softrnic peer using SR (see requester.c) */
	RC_SR_REMOTE_WINDOW_BYTES = 4 << 20,
	RC_MIN_WINDOW_PKTS = 16,
	RC_MAX_WINDOW_PKTS = 2048,
};

/* A read re-request for the same PSN is repeated at most this often:
 * once per gap is the rule, but when the resent request's answer is lost
 * as well this beats waiting for the ACK timeout.  (The responder's
 * PSN-sequence NAK is sent once per gap, IBTA 9.7.5.2.2: repeated, it made
 * the requester go back N again for each copy while the first resend was
 * still under way.) */
#define RC_RENAK_NS (1000 * 1000ull)

/* SR (sr.c): gaps a requester queues to resend; a NAK whose MSN field has
 * RC_SR_NAK_LATER set reports a gap past the first (it acknowledges
 * nothing); the rest of the field is the gap's length. */
enum { RC_SR_GAPS = 32 };
#define RC_SR_NAK_LATER (1u << 23)

enum rc_resp_msg { RC_MSG_NONE, RC_MSG_SEND, RC_MSG_WRITE };

struct rc_replay {                   /* responder's atomic replay cache entry */
	uint32_t psn;
	uint64_t orig;
	bool valid;
};

struct direct_qp;
struct direct_ud;

/* Congestion window of an RC requester on the UDP path (cc.c): packets
 * in flight beyond the peer's socket window.  Cut on loss (a PSN-sequence
 * NAK, once per window of data, or an ACK timeout), grown on ACKs, and
 * grown no further than a few measured bandwidth-delay products. */
struct rc_cc {
	uint32_t cwnd;               /* packets; 0 = not started */
	uint32_t cap;                /* the window without it (cc_window) */
	uint32_t ssthresh;           /* slow start below it */
	uint32_t acc;                /* ACKed packets toward the next +1 */
	uint32_t una_seen;           /* una_psn at the last update */
	uint32_t recover_psn;        /* a loss below it is the same event */
	bool recovering;
	bool sampling;               /* an RTT sample is in flight */
	uint32_t sample_psn;         /* its packet */
	uint64_t sample_t;           /* sent then */
	uint64_t sample_delivered;   /* delivered then */
	uint64_t delivered;          /* packets acknowledged, ever */
	uint64_t min_rtt_ns, epoch_min_ns;
	uint64_t srtt_ns;            /* smoothed round trip (7/8 old) */
	uint32_t epoch_samples;
	uint32_t bdp_pkts;           /* delivery rate x min RTT, decaying max */
	uint32_t retx_burst;         /* retransmitted since the last pause */
	/* tail-loss probe (requester_probe): when, for which una_psn, and
	 * how many since the ACK timer was armed */
	uint64_t probe_at;
	uint32_t probe_una;
	uint32_t probe_n;
};

struct srn_rc_state {
	bool remote_counted;         /* counted in eng->remote_qps */
	struct srn_qp *qp;
	struct srn_engine *eng;
	uint32_t qpn;
	/* our share of eng->win_inflight[win_pool] (requester_win_sync);
	 * kept across reset_state, which must not forget what it counted */
	int32_t win_counted;
	uint8_t win_pool;
	atomic_int inflight;         /* receivers/timer holding a pointer */
	bool dead;                   /* being destroyed: touch nothing */
	enum ibv_qp_type type;       /* RC, UC or UD: picks the engines */
	/* selective retransmission (sr.c): ECE asked for it (ibv_set_ece),
	 * and the responder's packets held ahead of epsn (kept across a
	 * reset, emptied by it) */
	bool sr_want;
	struct rc_sr_buf *sr_buf;

	/* path, from RTR */
	bool path_ok;
	bool path_unresolved;        /* same host, dqpn not registered yet */
	bool errored;                /* rc_qp_error ran (events posted) */
	bool peer_softrnic;          /* the peer QP is in this host's registry */
	bool sr;                     /* selective retransmission in use */
	struct net_addr peer;        /* where packets go */
	struct wire_l3 l3;           /* ICRC pseudo-header for our sends */
	uint32_t dqpn;
	uint32_t pmtu;               /* path MTU in bytes */

	/* requester (RTS) */
	uint32_t req_psn;            /* PSN of the next new packet */
	uint32_t cap_psn;            /* captures: next PSN shown for a direct */
	bool cap_psn_set;            /* operation (transport/capture.c) */
	uint32_t una_psn;            /* oldest PSN not yet acknowledged */
	uint32_t rd_out;             /* reads/atomics started, not complete */
	uint32_t max_rd;             /* max_rd_atomic (>= 1) */
	uint32_t win_pkts;           /* window in packets (most) */
	uint32_t ackreq_every;       /* AckReq inside long messages */
	uint32_t since_ackreq;
	uint64_t rd_chunk;           /* bytes per READ request */
	uint64_t timeout_ns;         /* local ACK timeout, 0 = infinite */
	int retry_cnt, rnr_retry;    /* as set; rnr_retry 7 = infinite */
	int retry_left, rnr_left;
	uint64_t retry_at;           /* retransmit deadline, 0 = off */
	uint64_t rnr_at;             /* end of an RNR wait, 0 = off */
	uint64_t resume_at;          /* retry after a full socket, 0 = off */
	uint32_t rnr_psn;            /* resend from here after the RNR wait */
	bool rnr_wait;
	/* go-back-N: once per NAK or timeout.  A PSN-sequence NAK for the
	 * PSN we went back to, with nothing acknowledged since, is stale
	 * (sent before our resent packets arrived) or duplicated */
	bool rewound;
	uint32_t rewound_psn;
	/* SR: resending a gap up to sr_end, then the gaps queued in
	 * sr_gaps, then on from req_hi_psn */
	bool sr_resending;
	uint32_t sr_end;
	uint8_t sr_gap_first, sr_gap_n;
	struct { uint32_t psn, n; } sr_gaps[RC_SR_GAPS];
	uint32_t sr_rx_nak_psn;      /* the last gap resent for a NAK, */
	uint64_t sr_rx_nak_at;       /* and when */
	bool probing;                /* the resend under way is a probe */
	uint32_t req_hi_psn;         /* 1 + the highest PSN sent (retransmits
				      * are the packets below it) */
	struct rc_cc cc;

	/* completer */
	uint64_t resp_off;           /* bytes of the head READ placed */
	uint32_t gap_psn;            /* re-requested from here already */
	uint64_t gap_at;             /* when */
	bool gap_valid;

	/* responder (RTR) */
	uint32_t epsn;               /* expected PSN */
	uint32_t sr_hi;              /* SR: 1 + the highest PSN received */
	uint64_t sr_nak_at;          /* SR: when the gap at epsn was NAKed */
	/* SR: the gap a NAK timed, when its (only) NAK went out (0: not
	 * timed), and the smoothed time from such a NAK to the gap filled,
	 * a round trip (sr.c) */
	uint32_t sr_gap_psn;
	uint64_t sr_gap_t0, sr_fill_ns;
	uint32_t drain_epsn;         /* epsn when an ACK last emptied the SQ */
	uint32_t msn;                /* message sequence number */
	bool nak_sent;               /* sequence/RNR NAK sent for epsn */
	enum rc_resp_msg in_msg;     /* multi-packet message in progress */
	uint64_t msg_off;            /* bytes of it received */
	uint64_t wr_va;              /* RDMA WRITE in progress */
	uint32_t wr_rkey, wr_len;
	uint8_t *wr_base;            /* where wr_va is, as resolved for the
				      * whole DMA length at the first packet */
	uint32_t wr_gen;             /* ctx->mr_gen then */
	uint8_t min_rnr;             /* min_rnr_timer code */
	struct srn_recv_wqe rwqe;    /* taken from the RQ or SRQ for the message */
	uint8_t *rwqe_base;          /* its one SGE, resolved (rc_sge_map_cached) */
	uint32_t rwqe_gen;
	bool rwqe_have;              /* rwqe holds one */
	struct rc_replay *replay;    /* replay_cap entries, replay_n in use */
	uint32_t replay_n, replay_next, replay_cap;
	/* responder: an ACK owed but held back (responder.c, "Deferred
	 * ACKs"): for ack_psn, first owed for ack_first, due by ack_due */
	bool ack_pending;
	uint32_t ack_psn, ack_first;
	uint64_t ack_due;
	/* requester: when its last run sent a packet.  A QP that sent
	 * lately is likely to answer a request soon, and its held-back ACK
	 * rides on that answer (requester_ack_rides). */
	uint64_t req_tx_ns;

	/* UD */
	uint32_t qkey;               /* the QP's Q_Key (IBV_QP_QKEY) */

	/* UC pacing: nothing tells a UC sender that the receiver's socket
	 * is full, and a burst larger than it loses whole messages; so a UC
	 * QP sends at most uc_burst_max bytes per UC_PACE_NS. */
	uint64_t uc_burst_start;
	uint64_t uc_burst_bytes;

	/* same-host direct path (direct.c): cached view of the target,
	 * NULL until first used; freed by direct_qp_forget */
	struct direct_qp *direct;
	/* UD: the same, per destination QP (direct_ud.c) */
	struct direct_ud *direct_ud;

	/* same-host peer's inbox (net/shm_ring.h) from rc_resolve_path;
	 * NULL: packets go to the socket */
	struct net_shm_peer *shm_peer;

	/* A plain ACK a receiving thread could not deliver because another
	 * thread held qp->lock (usually an application thread inside
	 * sendmmsg for ~10 us): that thread takes it when it lets the lock
	 * go (srn_qp_unlock), instead of the receiver sleeping on the lock
	 * and the holder paying a futex wake.  ACKs are cumulative, so one
	 * word holds the newest: RC_ACK_BOX_FULL | count << 24 | PSN.
	 * The only field written without the lock. */
	_Atomic uint64_t ack_box;

	_Atomic uint64_t cnt[SRN_CNT_MAX];
};

#define RC_ACK_BOX_FULL (1ull << 63)

/* completer.c: the boxed ACK, if any, taken (qp->lock held); true if
 * there was one */
bool completer_ack_box_take(struct srn_rc_state *rc);
/* completer.c: put a positive ACK for psn in the box (no lock) */
void completer_ack_box_post(struct srn_rc_state *rc, uint32_t psn);
/* Is pkt an ACK that may go through the box? */
static inline bool rc_ack_boxable(const struct srn_rc_state *rc, const struct wire_pkt *pkt)
{
	return rc->type == IBV_QPT_RC && pkt->opcode == (WIRE_RC | WIRE_ACK) &&
	       (pkt->syndrome >> 5) == 0;
}

static inline void rc_count_n(struct srn_rc_state *rc, enum srn_counter c, uint64_t n)
{
	atomic_fetch_add_explicit(&rc->cnt[c], n, memory_order_relaxed);
	atomic_fetch_add_explicit(&rc->eng->cnt[c], n, memory_order_relaxed);
}

static inline void rc_count(struct srn_rc_state *rc, enum srn_counter c)
{
	rc_count_n(rc, c, 1);
}

/* A counter that is a level, not a sum (the engine's: the QP that last
 * set it). */
static inline void rc_gauge(struct srn_rc_state *rc, enum srn_counter c, uint64_t v)
{
	atomic_store_explicit(&rc->cnt[c], v, memory_order_relaxed);
	atomic_store_explicit(&rc->eng->cnt[c], v, memory_order_relaxed);
}

enum { UC_PACE_NS = 250 * 1000, UC_PACE_BYTES = 256 * 1024 };

/* Ring access.  head/next/tail are free-running counters; the slot is the
 * counter modulo the ring size. */
static inline struct srn_send_wqe *rc_sq(struct srn_qp *qp, uint32_t i)
{
	uint32_t m = qp->sq.max_wr;

	/* a power of two (verbs/qp.c rounds it): a mask, not a division */
	return &((struct srn_send_wqe *)qp->sq.wqe)[(m & (m - 1)) ? i % m : i & (m - 1)];
}

/* A connected service (RC or UC): one peer QP, a same-host one reachable
 * in memory (transport/direct.c). */
static inline bool rc_connected(const struct srn_rc_state *rc)
{
	return rc->type == IBV_QPT_RC || rc->type == IBV_QPT_UC;
}

static inline bool rc_is_rd_atomic(const struct srn_send_wqe *w)
{
	return w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static inline bool rc_is_atomic(const struct srn_send_wqe *w)
{
	return w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* a / pmtu and ceil(a / pmtu) (at least 1: a zero-length message is one
 * packet): the path MTU
 * is a power of two (128 << n), so a shift; a division costs ~20 cycles
 * and the send path used to make four per packet. */
static inline uint64_t rc_pmtu_div(const struct srn_rc_state *rc, uint64_t a)
{
	uint32_t m = rc->pmtu;

	return (m & (m - 1)) ? a / m : a >> __builtin_ctz(m);
}

static inline uint32_t rc_pmtu_div_up(const struct srn_rc_state *rc, uint64_t a)
{
	return a == 0 ? 1 : (uint32_t)rc_pmtu_div(rc, a + rc->pmtu - 1);
}

/* Packets (PSNs) a send WQE occupies. */
uint32_t rc_wqe_npkts(const struct srn_rc_state *rc, const struct srn_send_wqe *w);

static inline enum ibv_qp_state rc_state(const struct srn_rc_state *rc)
{
	return rc->qp->a.attr.qp_state;
}

/* tx.c: build and send one packet to the peer.  h has opcode, flags, PSN
 * and extension header fields; payload is gathered from pay[].
 * 0, -EAGAIN or -errno. */
int rc_tx(struct srn_rc_state *rc, struct wire_pkt *h, const struct iovec *pay,
	  int npay, uint32_t paylen);

/* tx.c: wake the peer's engine, asleep on its socket, with a zero-length
 * datagram (same-host peers: after a put into its inbox or rings). */
void rc_doorbell(struct srn_rc_state *rc);

/* tx.c: between begin and end (nestable, per thread) rc_tx queues packets
 * and sends each destination's run in one UDP GSO send; end flushes.  Call
 * end before letting go of the QP lock. */
void rc_tx_batch_begin(void);
void rc_tx_batch_end(void);
void rc_tx_batch_flush(void);
/* The responder put an ACK or NAK into this thread's open batch: it must
 * leave before the QP's lock does (srn_qp_unlock), or the application,
 * told of the completion the ACK goes with, could send its answer ahead
 * of it; a peer would then see the answer before the ACK (ib_send_lat -e
 * over UDP hung about 1 run in 70: the server's receive event came before
 * its send event). */
void rc_tx_batch_note_ack(void);
bool rc_tx_batch_has_ack(void);

/* tx.c: resolve [off, off+len) of an SGE list (lkeys of pd) with access;
 * fills iov.  Returns the number of iovecs, or -1 on a protection error. */
int rc_sge_map(struct srn_rc_state *rc, struct srn_pd *pd,
	       const struct ibv_sge *sge, uint32_t nsge,
	       uint64_t off, uint64_t len, unsigned int access,
	       struct iovec *iov, int max_iov);
/* tx.c: the same for a message's packets, one after the other: a list
 * of one SGE is resolved once for its whole length, kept in *base and
 * *gen (NULL: none yet) and reused while no MR was deregistered or
 * re-registered since (ctx->mr_gen, read before the lookup): the MR
 * table's lock once per message, not per packet.  Where the whole does
 * not resolve, each part is looked up on its own (and fails where it
 * fails). */
int rc_sge_map_cached(struct srn_rc_state *rc, struct srn_pd *pd, const struct ibv_sge *sge,
		      uint32_t nsge, uint64_t off, uint64_t len, unsigned int access,
		      struct iovec *iov, int max_iov, uint8_t **base, uint32_t *gen);

/* hooks.c: (re)compute where packets to the destination go (registry
 * lookup for a peer on this host). */
void rc_resolve_path(struct srn_rc_state *rc);

/* requester.c */
void requester_run(struct srn_rc_state *rc);
void requester_rewind(struct srn_rc_state *rc, uint32_t psn);
/* requester.c: the peer acknowledged everything before psn, which is past
 * the send point after a go-back (a resend's ACK covering what it had
 * already): resend none of it. */
void requester_skip(struct srn_rc_state *rc, uint32_t psn);
/* SR: resend the last packet sent, asking for an ACK (a tail-loss probe) */
void requester_probe(struct srn_rc_state *rc);
void requester_arm_retry(struct srn_rc_state *rc);
/* requester.c: bring the QP's share of the engine's shared window up to
 * date (its packets in flight; none unless RC in RTS/SQD with a path).
 * Called after anything that moves req_psn or una_psn, and before the QP
 * is reset or freed (QP lock held). */
void requester_win_sync(struct srn_rc_state *rc);
/* requester.c: at the end of an engine-thread receive batch, keep qp's
 * held-back ACK for the application's answer (it then goes in the same
 * GSO send; QP lock held)?  True: held, and a short deadline armed. */
bool requester_ack_rides(struct srn_rc_state *rc);

/* cc.c: the congestion window (struct rc_cc).  cc_active: does the QP
 * send through it (RC, to a socket)?  cc_window: packets it allows in
 * flight (UINT32_MAX when not active) within cap, the socket's. */
bool cc_active(const struct srn_rc_state *rc);
uint32_t cc_window(struct srn_rc_state *rc, uint32_t cap);
/* a new send PSN space (IBV_QP_SQ_PSN) */
void cc_start(struct srn_rc_state *rc);
/* packet psn went out with AckReq set at now (an RTT sample) */
void cc_sent(struct srn_rc_state *rc, uint32_t psn, uint64_t now);
/* after a response: what una_psn moved by is acknowledged */
void cc_acked(struct srn_rc_state *rc, uint64_t now);
/* a go-back to psn for a PSN-sequence NAK (loss), or an ACK timeout */
void cc_loss(struct srn_rc_state *rc, uint32_t psn);
void cc_timeout(struct srn_rc_state *rc);
/* The ACK timeout to use for the application's timeout_ns: at least a
 * few smoothed round trips, so a long path does not time out spuriously */
uint64_t cc_rto(const struct srn_rc_state *rc, uint64_t timeout_ns);
/* The tail-loss probe's timer (SR only): armed from now when the ACK
 * timer is, fired by requester_timers; 0 or when it fires next. */
void cc_probe_arm(struct srn_rc_state *rc, uint64_t now);
/* its time came: probe now? (re-armed, further off, if so) */
bool cc_probe_fire(struct srn_rc_state *rc, uint64_t now);
/* Retransmissions go in bursts spaced at the measured delivery rate:
 * true when the one just sent ends a burst (*pause_ns: how long to wait). */
bool cc_retx_pause(struct srn_rc_state *rc, uint64_t *pause_ns);

/* sr.c: selective retransmission.  sr_decide: may the QP use it with its
 * peer?  The responder's side: sr_hold keeps a packet `ahead` PSNs past
 * epsn (false: not kept, a copy of one held or no room); sr_gap_len: PSNs
 * from epsn to the first held one (0: none held); sr_take: the packet
 * held for epsn, if any, into *out; sr_lost_room: none held, but one was
 * dropped for want of room since the last call. */
struct rc_sr_buf;
bool sr_decide(const struct srn_rc_state *rc);
bool sr_hold(struct srn_rc_state *rc, const struct wire_pkt *pkt, uint32_t ahead);
uint32_t sr_gap_len(const struct srn_rc_state *rc);
bool sr_take(struct srn_rc_state *rc, struct wire_pkt *out);
bool sr_lost_room(struct srn_rc_state *rc);
/* sr.c: the gap at epsn was NAKed at now (timed: a NAK sent as the gap
 * opened, so its filling times a round trip): NAK it again after RC_RENAK_NS or two
 * round trips if it is still open (sr_renak_timer, from the QP's timer;
 * returns its next deadline, 0 = none).  sr_filled: the gap at epsn is
 * filled now. */
void sr_renak_arm(struct srn_rc_state *rc, uint64_t now, bool timed);
void sr_filled(struct srn_rc_state *rc);
uint64_t sr_renak_timer(struct srn_rc_state *rc, uint64_t now,
			void (*nak)(struct srn_rc_state *rc, uint32_t psn, uint32_t msn));
void sr_clear(struct srn_rc_state *rc);
void sr_free(struct srn_rc_state *rc);
/* requester.c: resend the n PSNs from psn alone (after those queued
 * before), then go on (SR) */
void requester_resend(struct srn_rc_state *rc, uint32_t psn, uint32_t n);
/* sr.c: the responder saw PSN psn; a gap it opens past the first is
 * NAKed at once, and the first one again if its NAK is RC_RENAK_NS old */
void sr_seen(struct srn_rc_state *rc, uint32_t psn, void (*nak)(struct srn_rc_state *rc,
						 uint32_t psn, uint32_t msn));

/* responder.c */
void responder_rx(struct srn_rc_state *rc, const struct wire_pkt *pkt);
/* responder.c: the end of a receive batch on this thread: send the ACKs
 * it held back (on an application thread: those of the batch before, so
 * the application sees its completions first).  No QP lock held. */
void responder_rx_batch_end(struct srn_engine *eng);
/* responder.c: send qp's held-back ACK now (QP lock held). */
void responder_ack_flush(struct srn_rc_state *rc);
/* responder.c: the same before the QP changes state or is destroyed: the
 * ACK was owed while it could still receive, so it goes in any state. */
void responder_ack_owed(struct srn_rc_state *rc);
/* responder.c: the held-back ACK's deadline passed?  Sends it; returns
 * its deadline if still held (0 = none). */
uint64_t responder_ack_timer(struct srn_rc_state *rc, uint64_t now);

/* completer.c */
void completer_rx(struct srn_rc_state *rc, const struct wire_pkt *pkt);
/* Timer expiries of this QP; returns its next deadline (0 = none). */
uint64_t completer_timer(struct srn_rc_state *rc, uint64_t now);
/* Complete the head send WQE with an error, then move the QP to ERR. */
void completer_fail(struct srn_rc_state *rc, enum ibv_wc_status st);

/* responder.c, shared with uc.c and ud.c */
struct srn_recv_wqe *responder_recv_wqe(struct srn_rc_state *rc);
void responder_push_recv_wc(struct srn_rc_state *rc, struct srn_recv_wqe *r,
			    enum ibv_wc_status st, enum ibv_wc_opcode op,
			    const struct wire_pkt *pkt, uint32_t byte_len);

/* completer.c: complete every WQE fully sent (UC: nothing to wait for). */
void completer_retire_sent(struct srn_rc_state *rc);

/* uc.c: Unreliable Connected receive side (no ACKs; a gap drops the
 * message in progress and the next FIRST/ONLY resynchronises). */
void uc_responder_rx(struct srn_rc_state *rc, const struct wire_pkt *pkt);
/* uc_pace.c: true when the UC sender must wait (resume_at is armed). */
bool uc_paced(struct srn_rc_state *rc);

/* ud.c: Unreliable Datagram.  l3/len describe the packet as received
 * (for the GRH slot). */
void ud_requester_run(struct srn_rc_state *rc);
void ud_rx(struct srn_rc_state *rc, const struct wire_pkt *pkt,
	   const struct wire_l3 *l3, uint32_t len);
/* ud.c: a packet to QPN 0xFFFFFF that arrived for group address l3->dst:
 * one copy to every local QP attached to it. */
void ud_mcast_rx(struct srn_engine *eng, const struct wire_pkt *pkt,
		 const struct wire_l3 *l3, uint32_t len);
/* ud.c: the 40-byte GRH slot a receive buffer starts with, for a packet
 * of RoCE length len (BTH .. ICRC) that came in as l3 says. */
void ud_grh(const struct wire_l3 *l3, uint32_t len, uint8_t out[WIRE_GRH_LEN]);
/* ud.c: wc.sl of a UD receive completion: the datagram's L3 header type
 * (1 = IPv6, 2 = IPv4), the RoCE packet type ConnectX reports there.  RoCE
 * carries no service level, and UCX's UD transport reads this to find the
 * destination address in the GRH slot (it drops IPv4 datagrams otherwise). */
uint8_t ud_wc_sl(int family);
/* ud.c: point rc->peer / rc->l3 / rc->dqpn at the destination of a WR
 * (rc_tx sends there).  false: unreachable from this device (wrong
 * family, or a group it cannot send to). */
bool ud_route(struct srn_rc_state *rc, struct ibv_ah *ah, uint32_t remote_qpn);
/* ud.c: the Q_Key a UD SEND carries for a WR's remote_qkey. */
uint32_t ud_qkey(const struct srn_rc_state *rc, uint32_t wr_qkey);
/* ud.c: the RoCE length of a UD SEND of len payload bytes. */
uint32_t ud_wire_len(bool imm, uint32_t len);

/* mcast.c: IP group membership of an engine and sending to a group. */
int mcast_send_prepare(struct srn_engine *eng);
/* mcast.c: the IP group of a multicast GID (IPv4-mapped ::ffff:224/4 as
 * RoCEv2 rdma_cm makes them, ff0e::ffff:224/4 as RoCEv1 did, or IPv6
 * ff00::/8).  false if it is none of those. */
bool mcast_gid_to_ip(const union ibv_gid *gid, int *family, uint8_t ip[16]);
void mcast_engine_stop(struct srn_engine *eng);

/* engine_rx.c: process one received datagram (also for mcast.c's sockets). */
void srn_engine_rx_msg(struct srn_engine *eng, struct net_udp_msg *m);
/* engine_rx.c: a QP of this engine by number, pinned (NULL if none). */
struct srn_rc_state *srn_engine_get_qp(struct srn_engine *eng, uint32_t qpn);
void srn_engine_put_qp(struct srn_rc_state *rc);

/* errors.c: move the QP to ERR, flush both queues, post an async event
 * (ev_type < 0: none). */
void rc_qp_error(struct srn_rc_state *rc, int ev_type);
void rc_flush_sq(struct srn_rc_state *rc);
void rc_flush_rq(struct srn_rc_state *rc);
enum ibv_wc_opcode rc_wc_opcode(enum ibv_wr_opcode op);

/* transport/local_op.c: BIND_MW and LOCAL_INV.  rc_local_op_run: 1 done
 * (completed), 0 waits for earlier WQEs, -1 failed (QP in error). */
bool rc_is_local_op(const struct srn_send_wqe *w);
int rc_local_op_run(struct srn_rc_state *rc, struct srn_send_wqe *w);

#endif
