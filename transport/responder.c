/* transport/responder: request packets -> memory, ACK/NAK, read responses,
 * atomic ACKs (IBTA Vol 1 9.7.4, 9.7.5.2).  A state machine: each step
 * checks one thing and names the next state; protocol errors are states.
 * Nothing is written to memory before every check has passed. */
#include <pthread.h>
#include <string.h>

#include "net/udp.h"
#include "transport/place.h"
#include "transport/rc.h"
#include "verbs/mw.h"
#include "verbs/shared_rings.h"

#define RESP_STATES(X)                                                     \
	X(CHECK_QP) X(CHECK_PSN) X(DUPLICATE) X(CHECK_OP_SEQ) X(CHECK_LEN)  \
	X(CHECK_RESOURCE) X(CHECK_RKEY) X(EXECUTE) X(ACK) X(NAK_SEQ)      \
	X(NAK_RNR) X(ERR_INV_REQ) X(ERR_ACCESS) X(ERR_LOC_LEN)             \
	X(ERR_LOC_PROT) X(DROP) X(DONE)

enum resp_state {
#define RS_ENUM(n) RS_##n,
	RESP_STATES(RS_ENUM)
#undef RS_ENUM
};

static const char *const rs_names[] = {
#define RS_NAME(n) #n,
	RESP_STATES(RS_NAME)
#undef RS_NAME
};

/* What the steps learn about one packet. */
struct resp_pkt {
	const struct wire_pkt *pkt;
	uint32_t caps;
	struct srn_recv_wqe *rwqe;   /* receive WQE a SEND/WRITE_IMM lands in */
	struct iovec iov[SRN_MAX_SGE]; /* where the payload goes */
	int niov;
	void *target;                /* READ / ATOMIC / WRITE target */
};

/* Every ACK or NAK we send acknowledges everything before epsn, so it
 * also settles an ACK held back (below). */
static int tx_retry(struct srn_rc_state *rc, struct wire_pkt *h,
		    const struct iovec *iov, int n, uint32_t len);

/* An ACK or NAK.  Retried like a response when the socket or the peer's
 * inbox is full: a lost ACK costs the requester a whole timeout, and an
 * application that exits right after its last receive completion (as
 * ibv_srq_pingpong's client does) never answers the retransmission. */
static void send_aeth_msn(struct srn_rc_state *rc, uint32_t psn, uint8_t syndrome,
			  uint32_t msn)
{
	struct wire_pkt h;

	wire_pkt_clear(&h);
	h.opcode = WIRE_RC | WIRE_ACK;
	h.psn = psn;
	h.syndrome = syndrome;
	h.msn = msn;
	rc->ack_pending = false;
	if ((syndrome >> 5) != 0)
		rc_count(rc, SRN_CNT_nak_tx);
	tx_retry(rc, &h, NULL, 0, 0);
	rc_tx_batch_note_ack();
}

static void send_aeth(struct srn_rc_state *rc, uint32_t psn, uint8_t syndrome)
{
	send_aeth_msn(rc, psn, syndrome, rc->msn);
}

/* The PSN-sequence NAK for a gap at epsn, once per gap (IBTA 9.7.5.2.2).
 * With SR its MSN field says how long the gap is (sr.c). */
static uint64_t responder_held_ack_timer(struct srn_rc_state *rc, uint64_t now);

static void send_nak_seq_msn(struct srn_rc_state *rc, uint32_t psn, uint32_t msn)
{
	rc_count(rc, SRN_CNT_resp_nak_seq);
	if (psn == rc->epsn) {
		rc->nak_sent = true;
		if (rc->sr)
			sr_renak_arm(rc, srn_now_ns(), true);
	}
	send_aeth_msn(rc, psn, WIRE_AETH_NAK_PSN_SEQ, msn);
}

static void send_nak_seq(struct srn_rc_state *rc)
{
	send_nak_seq_msn(rc, rc->epsn, rc->sr ? sr_gap_len(rc) : rc->msn);
}

/* ---- Deferred ACKs ---------------------------------------------------------
 * An ACK costs a sendmsg.  Sent at once, it delays everything behind it:
 * on an application thread that receives inline, the completion the
 * application waits for; on the engine thread, the next packets.  So an
 * ACK is held back (per QP, only the newest PSN: one ACK covers all
 * before it) and sent
 *  - at the end of the receive batch on the engine thread, one per QP;
 *  - on an application thread, with the application's next send on the
 *    QP (requester_run: often in the same GSO send as the reply) or at
 *    the end of its next receive batch;
 *    (a full batch, with more packets waiting, leaves its ACKs to the
 *    next one: srn_engine_rx_sock; a stream then gets one ACK per
 *    RESP_ACK_COALESCE_PKTS, each a sendmsg on the receiver's CPU)
 *  - at once when it covers RESP_ACK_COALESCE_PKTS packets, so the
 *    requester's window keeps moving (it asks for an ACK every quarter
 *    window, at most 512 packets; 128 is half a batch of 16 GRO buffers);
 *  - by the engine timer after RESP_ACK_DEFER_NS in any case, far below
 *    any requester's ACK timeout (>= 1 ms here; 4.096 us * 2^timeout).
 * A same-host peer's traffic through the shared-memory inbox is not
 * batched like this: its ACKs go at once. */
enum {
	RESP_ACK_DEFER_NS = 200 * 1000,
	RESP_ACK_COALESCE_PKTS = 128,
	RESP_ACK_LIST = 64,
};

struct ack_list {
	uint32_t gen;                /* receive batches ended on this thread */
	int n;
	struct {
		struct srn_engine *eng;
		uint32_t qpn;
		uint32_t gen;        /* batch that held it back */
	} e[RESP_ACK_LIST];
};

static __thread struct ack_list acks;
/* &acks, kept where it costs one load: the list is too big for the
 * initial-exec TLS model in a library that may be dlopen()ed, and under
 * the default model every use is a __tls_get_addr call (the compiler
 * repeats it after each call it makes). */
static __thread struct ack_list *acks_here __attribute__((tls_model("initial-exec")));

static struct ack_list *ack_list(void)
{
	struct ack_list *al = acks_here;

	if (__builtin_expect(!al, 0))
		al = acks_here = &acks;
	return al;
}


/* Send the held-back ACK; a QP that left the receiving states (error,
 * reset) owes nothing any more. */
void responder_ack_flush(struct srn_rc_state *rc)
{
	enum ibv_qp_state st = rc_state(rc);

	if (!rc->ack_pending)
		return;
	if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD &&
	    st != IBV_QPS_SQE) {
		rc->ack_pending = false;
		return;
	}
	rc_count(rc, SRN_CNT_resp_acks);
	send_aeth(rc, rc->ack_psn, WIRE_AETH_ACK | 0x1f);
}

void responder_ack_owed(struct srn_rc_state *rc)
{
	if (!rc->ack_pending)
		return;
	if (rc->type != IBV_QPT_RC || !rc->path_ok) {
		rc->ack_pending = false;
		return;
	}
	rc_count(rc, SRN_CNT_resp_acks);
	send_aeth(rc, rc->ack_psn, WIRE_AETH_ACK | 0x1f);
}

static void ack_later(struct srn_rc_state *rc, uint32_t psn)
{
	if (!rc->ack_pending) {
		struct ack_list *al = ack_list();

		if (rc->shm_peer || al->n == RESP_ACK_LIST) {
			rc->ack_pending = true;
			rc->ack_psn = psn;
			responder_ack_flush(rc);
			return;
		}
		al->e[al->n].eng = rc->eng;
		al->e[al->n].qpn = rc->qpn;
		al->e[al->n].gen = al->gen;
		al->n++;
		rc->ack_pending = true;
		rc->ack_first = psn;
		if (srn_engine_on_thread(rc->eng)) {
			rc->ack_due = srn_now_ns() + RESP_ACK_DEFER_NS;
		} else {
			/* An application thread receives only in
			 * srn_transport_progress, which stamped app_poll_ns
			 * with its clock read just before: a deadline from
			 * there is at most as late as one from a clock read
			 * here (which costs as much as the rest of this
			 * function), and one that passes early only sends
			 * the ACK on its own. */
			uint64_t t = atomic_load_explicit(&rc->eng->app_poll_ns,
							  memory_order_relaxed);

			rc->ack_due = (t ? t : srn_now_ns()) + RESP_ACK_DEFER_NS;
			/* The safety net, for application threads (the engine
			 * thread always ends its batch in
			 * responder_rx_batch_end); a no-op while an earlier
			 * deadline is armed. */
			srn_engine_arm(rc->eng, rc->ack_due);
		}
	}
	rc->ack_psn = psn;
	if (wire_psn_diff(psn, rc->ack_first) + 1 >= RESP_ACK_COALESCE_PKTS)
		responder_ack_flush(rc);
}

/* Only entries of eng are looked at: it is alive (we are in its receive
 * path), while another engine in an application thread's list may be
 * gone.  Those wait for their own engine's batch a little, then are let
 * go (their timer sends the ACK).
 * The ACKs leave together, in one GSO send per peer (transport/tx.c),
 * after the QPs' locks are let go: an ACK that another thread's newer
 * response overtakes meanwhile acknowledges nothing new, which the
 * completer ignores. */
void responder_rx_batch_end(struct srn_engine *eng)
{
	struct ack_list *al = ack_list();
	bool all = srn_engine_on_thread(eng);
	int keep = 0;

	rc_tx_batch_begin();
	for (int i = 0; i < al->n; i++) {
		struct srn_rc_state *rc;

		if (al->e[i].eng != eng) {
			if (al->gen - al->e[i].gen < 4)
				al->e[keep++] = al->e[i];
			continue;
		}
		if (!all && al->e[i].gen == al->gen) {
			al->e[keep++] = al->e[i];
			continue;
		}
		rc = srn_engine_get_qp(eng, al->e[i].qpn);
		if (!rc)
			continue;
		pthread_mutex_lock(&rc->qp->lock);
		/* (the engine thread may leave it for the application's
		 * answer: requester_ack_rides) */
		if (!rc->dead && rc->type == IBV_QPT_RC && !(all && requester_ack_rides(rc)))
			responder_ack_flush(rc);
		srn_qp_unlock(rc->qp);
		srn_engine_put_qp(rc);
	}
	al->n = keep;
	al->gen++;
	rc_tx_batch_end();
}

uint64_t responder_ack_timer(struct srn_rc_state *rc, uint64_t now)
{
	uint64_t sr = rc->sr ? sr_renak_timer(rc, now, send_nak_seq_msn) : 0;
	uint64_t ack = responder_held_ack_timer(rc, now);

	return sr && (!ack || sr < ack) ? sr : ack;
}

static uint64_t responder_held_ack_timer(struct srn_rc_state *rc, uint64_t now)
{
	if (!rc->ack_pending)
		return 0;
	if (now < rc->ack_due)
		return rc->ack_due;
	responder_ack_flush(rc);
	return 0;
}

/* A response that must go out: if the socket is full, wait a little;
 * if it stays full the requester's retry recovers. */
static int tx_retry(struct srn_rc_state *rc, struct wire_pkt *h,
		    const struct iovec *iov, int n, uint32_t len)
{
	for (int tries = 0; tries < 50; tries++) {
		int ret = rc_tx(rc, h, iov, n, len);

		if (ret != -EAGAIN)
			return ret;
		net_udp_wait_writable(&rc->eng->udp, 2);
	}
	return -EAGAIN;
}

/* The response packets leave in GSO sends (transport/tx.c), flushed
 * before we return, under the QP's lock: a 64 KiB response is 3 sends
 * (first and last carry an AETH, so each is a group of its own) instead
 * of 16, each of which cost the receiving side a datagram too. */
static void send_read_resp(struct srn_rc_state *rc, uint32_t psn, const uint8_t *src,
			   uint32_t len)
{
	uint32_t n = rc_pmtu_div_up(rc, len);

	rc_tx_batch_begin();
	for (uint32_t k = 0; k < n; k++) {
		uint32_t off = k * rc->pmtu;
		uint32_t l = len - off < rc->pmtu ? len - off : rc->pmtu;
		/* a zero-length READ has no target (src NULL) */
		struct iovec iov = { .iov_base = l ? (void *)(src + off) : NULL, .iov_len = l };
		struct wire_pkt h;

		wire_pkt_clear(&h);
		if (n == 1)
			h.opcode = WIRE_READ_RESP_ONLY;
		else if (k == 0)
			h.opcode = WIRE_READ_RESP_FIRST;
		else if (k == n - 1)
			h.opcode = WIRE_READ_RESP_LAST;
		else
			h.opcode = WIRE_READ_RESP_MIDDLE;
		h.psn = wire_psn_add(psn, k);
		h.syndrome = WIRE_AETH_ACK | 0x1f;
		h.msn = rc->msn;
		rc_count(rc, SRN_CNT_resp_read_resp);
		if (tx_retry(rc, &h, &iov, l ? 1 : 0, l) < 0)
			break;
	}
	rc_tx_batch_end();
}

static void send_atomic_ack(struct srn_rc_state *rc, uint32_t psn, uint64_t orig)
{
	struct wire_pkt h;

	wire_pkt_clear(&h);
	h.opcode = WIRE_ATOMIC_ACK;
	h.psn = psn;
	h.syndrome = WIRE_AETH_ACK | 0x1f;
	h.msn = rc->msn;
	h.orig = orig;
	tx_retry(rc, &h, NULL, 0, 0);
}

void responder_push_recv_wc(struct srn_rc_state *rc, struct srn_recv_wqe *r,
			    enum ibv_wc_status st, enum ibv_wc_opcode op,
			    const struct wire_pkt *pkt, uint32_t byte_len)
{
	struct srn_qp *qp = rc->qp;
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = r->wr_id;
	wc.status = st;
	wc.opcode = op;
	wc.byte_len = byte_len;
	wc.qp_num = rc->qpn;
	wc.src_qp = rc->dqpn;
	if (st == IBV_WC_SUCCESS && (wire_opcodes[pkt->opcode].caps & WIRE_HAS_IMMDT)) {
		wc.imm_data = pkt->imm_be;
		wc.wc_flags |= IBV_WC_WITH_IMM;
	}
	if (st == IBV_WC_SUCCESS && (wire_opcodes[pkt->opcode].caps & WIRE_HAS_IETH)) {
		wc.invalidated_rkey = pkt->ieth_rkey;
		wc.wc_flags |= IBV_WC_WITH_INV;
	}
	srn_cq_push(qp->recv_cq, &wc, pkt->se);
	rc->rwqe_have = false;
}

/* The receive WQE the current message lands in: taken (copied out) from
 * the SRQ or the RQ at the message's first use and kept in rc until the
 * completion (a same-host peer may take from the RQ ring too).  NULL:
 * none posted (RNR). */
struct srn_recv_wqe *responder_recv_wqe(struct srn_rc_state *rc)
{
	struct srn_qp *qp = rc->qp;

	if (!rc->rwqe_have) {
		if (qp->srq)
			rc->rwqe_have = srn_srq_take(qp->srq, &rc->rwqe) == 0;
		else if (qp->rqs)
			rc->rwqe_have = srn_rq_ring_take(qp->rqs, qp->rq.max_wr, &rc->rwqe) == 0;
		rc->rwqe_base = NULL; /* (rc_sge_map_cached: a new list) */
	}
	return rc->rwqe_have ? &rc->rwqe : NULL;
}

static enum resp_state check_qp(struct srn_rc_state *rc, struct resp_pkt *p)
{
	enum ibv_qp_state st = rc_state(rc);

	(void)p;
	if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) {
		rc_count(rc, SRN_CNT_rx_drop_qp_state);
		return RS_DROP;
	}
	return RS_CHECK_PSN;
}

static enum resp_state check_psn(struct srn_rc_state *rc, struct resp_pkt *p)
{
	int32_t d = wire_psn_diff(p->pkt->psn, rc->epsn);

	if (d < 0)
		return RS_DUPLICATE;
	if (d > 0) {
		rc_count(rc, SRN_CNT_resp_psn_ahead);
		/* SR: held for when the gap is filled (sr.c) */
		if (rc->sr) {
			sr_hold(rc, p->pkt, (uint32_t)d);
			sr_seen(rc, p->pkt->psn, send_nak_seq_msn);
		}
		/* one NAK per gap, until epsn arrives (IBTA 9.7.5.2.2) */
		if (rc->nak_sent)
			return RS_DROP;
		return RS_NAK_SEQ;
	}
	if (rc->sr && rc->nak_sent)
		sr_filled(rc);
	rc->nak_sent = false;
	if (rc->sr)
		sr_seen(rc, p->pkt->psn, send_nak_seq_msn);
	if (rc->sr_buf) {
		struct wire_pkt copy;

		(void)sr_take(rc, &copy); /* this one supersedes a copy held */
	}
	return RS_CHECK_OP_SEQ;
}

static enum resp_state check_op_seq(struct srn_rc_state *rc, struct resp_pkt *p)
{
	uint32_t c = p->caps;
	unsigned int acc = rc->qp->a.attr.qp_access_flags;

	switch (rc->in_msg) {
	case RC_MSG_SEND:
		if (!(c & WIRE_IS_SEND) || (c & WIRE_IS_FIRST))
			return RS_ERR_INV_REQ;
		return RS_CHECK_LEN;
	case RC_MSG_WRITE:
		if (!(c & WIRE_IS_WRITE) || (c & WIRE_IS_FIRST))
			return RS_ERR_INV_REQ;
		return RS_CHECK_LEN;
	case RC_MSG_NONE:
		break;
	}
	if (!(c & WIRE_IS_FIRST))
		return RS_ERR_INV_REQ;
	if ((c & (WIRE_IS_WRITE | WIRE_IS_ATOMIC_WRITE)) && !(acc & IBV_ACCESS_REMOTE_WRITE))
		return RS_ERR_ACCESS;
	if ((c & WIRE_IS_READ) && !(acc & IBV_ACCESS_REMOTE_READ))
		return RS_ERR_ACCESS;
	if ((c & WIRE_IS_ATOMIC) && !(acc & IBV_ACCESS_REMOTE_ATOMIC))
		return RS_ERR_ACCESS;
	if (!(c & (WIRE_IS_SEND | WIRE_IS_WRITE | WIRE_IS_READ | WIRE_IS_ATOMIC |
		   WIRE_IS_ATOMIC_WRITE)))
		return RS_ERR_INV_REQ;
	return RS_CHECK_LEN;
}

static enum resp_state check_len(struct srn_rc_state *rc, struct resp_pkt *p)
{
	const struct wire_pkt *k = p->pkt;
	uint32_t c = p->caps, len = k->payload_len;

	if (len > rc->pmtu)
		return RS_ERR_INV_REQ;
	if ((c & (WIRE_IS_SEND | WIRE_IS_WRITE)) && !(c & WIRE_IS_LAST) && len != rc->pmtu)
		return RS_ERR_INV_REQ;
	if (c & WIRE_IS_WRITE) {
		if (c & WIRE_IS_FIRST) {
			if ((c & WIRE_IS_LAST) ? k->dma_len != len : k->dma_len <= len)
				return RS_ERR_INV_REQ;
		} else if (c & WIRE_IS_LAST) {
			if (rc->msg_off + len != rc->wr_len)
				return RS_ERR_INV_REQ;
		} else if (rc->msg_off + len >= rc->wr_len) {
			return RS_ERR_INV_REQ;
		}
	}
	if ((c & WIRE_IS_READ) && k->dma_len > SRN_MAX_MSG_SIZE)
		return RS_ERR_INV_REQ;
	if ((c & (WIRE_IS_ATOMIC | WIRE_IS_ATOMIC_WRITE)) && (k->va & 7))
		return RS_ERR_INV_REQ;
	if ((c & WIRE_IS_SEND) && rc->msg_off + len > SRN_MAX_MSG_SIZE)
		return RS_ERR_INV_REQ;
	return RS_CHECK_RESOURCE;
}

static enum resp_state check_resource(struct srn_rc_state *rc, struct resp_pkt *p)
{
	struct srn_qp *qp = rc->qp;
	uint32_t c = p->caps;
	bool needs_rwqe = (c & WIRE_IS_SEND) ||
			  ((c & WIRE_IS_WRITE) && (c & WIRE_HAS_IMMDT));

	if (!needs_rwqe)
		return RS_CHECK_RKEY;
	/* A SEND takes its receive WQE at its first packet; a WRITE with
	 * immediate at its last (the only one carrying ImmDt). */
	p->rwqe = responder_recv_wqe(rc);
	if (!p->rwqe)
		return RS_NAK_RNR;
	if ((c & WIRE_IS_SEND) && rc->msg_off + p->pkt->payload_len > p->rwqe->length)
		return RS_ERR_LOC_LEN;
	if (c & WIRE_IS_SEND) {
		p->niov = rc_sge_map_cached(rc, qp->srq ? qp->srq->pd : qp->pd,
					    p->rwqe->sge, p->rwqe->num_sge, rc->msg_off,
					    p->pkt->payload_len, IBV_ACCESS_LOCAL_WRITE,
					    p->iov, SRN_MAX_SGE, &rc->rwqe_base, &rc->rwqe_gen);
		if (p->niov < 0)
			return RS_ERR_LOC_PROT;
	}
	return RS_CHECK_RKEY;
}

static bool rkey_ok(struct srn_rc_state *rc, uint32_t rkey, uint64_t va, uint64_t len,
		    unsigned int access, void **out)
{
	struct srn_qp *qp = rc->qp;

	return srn_rkey_resolve(qp, rkey, va, len, access, out) == SRN_MR_OK;
}

static enum resp_state check_rkey(struct srn_rc_state *rc, struct resp_pkt *p)
{
	const struct wire_pkt *k = p->pkt;
	uint32_t c = p->caps;
	void *whole;

	if (c & WIRE_IS_WRITE) {
		uint64_t va = (c & WIRE_IS_FIRST) ? k->va : rc->wr_va + rc->msg_off;
		uint32_t rkey = (c & WIRE_IS_FIRST) ? k->rkey : rc->wr_rkey;
		struct srn_context *ctx = rc->qp->ctx;

		/* The first packet checks the whole range the RETH names;
		 * the next ones land in it without the MR table's lock while
		 * no MR changed since (the same guarantee as a lookup of their
		 * own, which an MR changed after it would not see either). */
		if (c & WIRE_IS_FIRST) {
			rc->wr_base = NULL;
			rc->wr_gen = atomic_load_explicit(&ctx->mr_gen, memory_order_acquire);
			if (k->dma_len) {
				if (!rkey_ok(rc, k->rkey, k->va, k->dma_len,
					     IBV_ACCESS_REMOTE_WRITE, &whole))
					return RS_ERR_ACCESS;
				rc->wr_base = whole;
			}
		} else if (rc->wr_base && k->payload_len &&
			   rc->msg_off + k->payload_len <= rc->wr_len &&
			   atomic_load_explicit(&ctx->mr_gen, memory_order_acquire) == rc->wr_gen) {
			p->target = rc->wr_base + rc->msg_off;
			return RS_EXECUTE;
		}
		if (k->payload_len && !rkey_ok(rc, rkey, va, k->payload_len,
					       IBV_ACCESS_REMOTE_WRITE, &p->target))
			return RS_ERR_ACCESS;
	} else if (c & WIRE_IS_READ) {
		if (k->dma_len && !rkey_ok(rc, k->rkey, k->va, k->dma_len,
					   IBV_ACCESS_REMOTE_READ, &p->target))
			return RS_ERR_ACCESS;
	} else if (c & WIRE_IS_ATOMIC) {
		if (!rkey_ok(rc, k->rkey, k->va, 8, IBV_ACCESS_REMOTE_ATOMIC, &p->target))
			return RS_ERR_ACCESS;
	} else if (c & WIRE_IS_ATOMIC_WRITE) {
		/* as rxe: the right to write, not the atomic one */
		if (!rkey_ok(rc, k->rkey, k->va, 8, IBV_ACCESS_REMOTE_WRITE, &p->target))
			return RS_ERR_ACCESS;
	}
	return RS_EXECUTE;
}

static uint64_t do_atomic(const struct wire_pkt *k, void *target)
{
	uint64_t *t = target;

	if ((k->opcode & 0x1f) == WIRE_CMP_SWAP) {
		uint64_t expected = k->compare;

		/* On failure expected receives the current value; on success
		 * it still holds compare, which was the value: either way it
		 * is the original. */
		__atomic_compare_exchange_n(t, &expected, k->swap_add, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		return expected;
	}
	return __atomic_fetch_add(t, k->swap_add, __ATOMIC_SEQ_CST);
}

static enum resp_state execute(struct srn_rc_state *rc, struct resp_pkt *p)
{
	const struct wire_pkt *k = p->pkt;
	uint32_t c = p->caps;

	if (c & WIRE_IS_READ) {
		uint32_t psn = k->psn;

		rc->epsn = wire_psn_add(rc->epsn, rc_pmtu_div_up(rc, k->dma_len));
		rc->msn = (rc->msn + 1) & WIRE_PSN_MASK;
		send_read_resp(rc, psn, p->target, k->dma_len);
		return RS_DONE;
	}
	if (c & WIRE_IS_ATOMIC) {
		uint64_t orig = do_atomic(k, p->target);
		struct rc_replay *r = &rc->replay[rc->replay_next++ % rc->replay_n];

		r->psn = k->psn;
		r->orig = orig;
		r->valid = true;
		rc->epsn = wire_psn_add(rc->epsn, 1);
		rc->msn = (rc->msn + 1) & WIRE_PSN_MASK;
		send_atomic_ack(rc, k->psn, orig);
		return RS_DONE;
	}
	if (c & WIRE_IS_ATOMIC_WRITE) {
		uint64_t v;

		/* one 8-byte store that no reader sees in halves */
		memcpy(&v, k->payload, 8);
		__atomic_store_n((uint64_t *)p->target, v, __ATOMIC_SEQ_CST);
		rc->msn = (rc->msn + 1) & WIRE_PSN_MASK;
		rc->epsn = wire_psn_add(rc->epsn, 1);
		/* answered as rxe does: an empty READ RESPONSE ONLY (a
		 * duplicate gets a plain ACK, which the requester takes too) */
		send_read_resp(rc, k->psn, NULL, 0);
		return RS_DONE;
	}
	if (c & WIRE_IS_SEND) {
		const uint8_t *src = k->payload;

		for (int i = 0; i < p->niov; i++) {
			memcpy(p->iov[i].iov_base, src, p->iov[i].iov_len);
			src += p->iov[i].iov_len;
		}
		rc->msg_off += k->payload_len;
		rc->in_msg = RC_MSG_SEND;
		if (c & WIRE_IS_LAST) {
			/* SEND with Invalidate: the window goes before the
			 * receive completes (verbs/mw.c) */
			if ((c & WIRE_HAS_IETH) && !srn_mw_remote_inv(rc->qp, k->ieth_rkey))
				return RS_ERR_INV_REQ;
			responder_push_recv_wc(rc, p->rwqe, IBV_WC_SUCCESS, IBV_WC_RECV, k,
				     (uint32_t)rc->msg_off);
			rc->in_msg = RC_MSG_NONE;
			rc->msg_off = 0;
			rc->msn = (rc->msn + 1) & WIRE_PSN_MASK;
		}
	} else { /* WRITE */
		if (c & WIRE_IS_FIRST) {
			rc->wr_va = k->va;
			rc->wr_rkey = k->rkey;
			rc->wr_len = k->dma_len;
			rc->msg_off = 0;
		}
		if (k->payload_len) /* (the target may poll its last byte) */
			srn_place(p->target, k->payload, k->payload_len);
		rc->msg_off += k->payload_len;
		rc->in_msg = RC_MSG_WRITE;
		if (c & WIRE_IS_LAST) {
			if (c & WIRE_HAS_IMMDT)
				responder_push_recv_wc(rc, p->rwqe, IBV_WC_SUCCESS,
					     IBV_WC_RECV_RDMA_WITH_IMM, k, rc->wr_len);
			rc->in_msg = RC_MSG_NONE;
			rc->msg_off = 0;
			rc->msn = (rc->msn + 1) & WIRE_PSN_MASK;
		}
	}
	rc->epsn = wire_psn_add(rc->epsn, 1);
	return RS_ACK;
}

static enum resp_state duplicate(struct srn_rc_state *rc, struct resp_pkt *p)
{
	const struct wire_pkt *k = p->pkt;
	uint32_t c = p->caps;

	rc_count(rc, SRN_CNT_resp_dup_request);
	if (c & WIRE_IS_READ) {
		/* Reads are re-executed (IBTA 9.7.5.2.8): the requester
		 * re-asks for what it is missing. */
		if (k->dma_len > SRN_MAX_MSG_SIZE ||
		    (k->dma_len && !rkey_ok(rc, k->rkey, k->va, k->dma_len,
					    IBV_ACCESS_REMOTE_READ, &p->target)))
			return RS_DROP;
		send_read_resp(rc, k->psn, p->target, k->dma_len);
		return RS_DONE;
	}
	if (c & WIRE_IS_ATOMIC) {
		for (uint32_t i = 0; i < rc->replay_n; i++)
			if (rc->replay[i].valid && rc->replay[i].psn == k->psn) {
				send_atomic_ack(rc, k->psn, rc->replay[i].orig);
				return RS_DONE;
			}
		return RS_DROP;
	}
	/* SEND/WRITE: already executed, acknowledge again. */
	if (k->ackreq) {
		rc_count(rc, SRN_CNT_resp_acks);
		send_aeth(rc, wire_psn_add(rc->epsn, WIRE_PSN_MASK), WIRE_AETH_ACK | 0x1f);
	}
	return RS_DONE;
}

static enum resp_state resp_step(struct srn_rc_state *rc, struct resp_pkt *p,
				 enum resp_state s)
{
	switch (s) {
	case RS_CHECK_QP:
		return check_qp(rc, p);
	case RS_CHECK_PSN:
		return check_psn(rc, p);
	case RS_DUPLICATE:
		return duplicate(rc, p);
	case RS_CHECK_OP_SEQ:
		return check_op_seq(rc, p);
	case RS_CHECK_LEN:
		return check_len(rc, p);
	case RS_CHECK_RESOURCE:
		return check_resource(rc, p);
	case RS_CHECK_RKEY:
		return check_rkey(rc, p);
	case RS_EXECUTE:
		return execute(rc, p);
	case RS_ACK:
		if (p->pkt->ackreq)
			ack_later(rc, p->pkt->psn);
		return RS_DONE;
	case RS_NAK_SEQ:
		/* Once per gap: later packets of the gap are dropped (or,
		 * with SR, held). */
		send_nak_seq(rc);
		return RS_DONE;
	case RS_NAK_RNR:
		rc_count(rc, SRN_CNT_resp_nak_rnr);
		rc->nak_sent = true;
		send_aeth(rc, rc->epsn, WIRE_AETH_RNR_NAK | (rc->min_rnr & 0x1f));
		return RS_DONE;
	case RS_ERR_INV_REQ:
		rc_count(rc, SRN_CNT_resp_nak_inv);
		send_aeth(rc, rc->epsn, WIRE_AETH_NAK_INV_REQ);
		rc_qp_error(rc, IBV_EVENT_QP_REQ_ERR);
		return RS_DONE;
	case RS_ERR_ACCESS:
		rc_count(rc, SRN_CNT_resp_nak_access);
		send_aeth(rc, rc->epsn, WIRE_AETH_NAK_REM_ACCESS);
		rc_qp_error(rc, IBV_EVENT_QP_ACCESS_ERR);
		return RS_DONE;
	case RS_ERR_LOC_LEN:
		rc_count(rc, SRN_CNT_resp_nak_inv);
		responder_push_recv_wc(rc, p->rwqe, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, p->pkt, 0);
		send_aeth(rc, rc->epsn, WIRE_AETH_NAK_INV_REQ);
		rc_qp_error(rc, IBV_EVENT_QP_FATAL);
		return RS_DONE;
	case RS_ERR_LOC_PROT:
		rc_count(rc, SRN_CNT_resp_nak_op);
		responder_push_recv_wc(rc, p->rwqe, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, p->pkt, 0);
		send_aeth(rc, rc->epsn, WIRE_AETH_NAK_REM_OP);
		rc_qp_error(rc, IBV_EVENT_QP_FATAL);
		return RS_DONE;
	case RS_DROP:
		rc_count(rc, SRN_CNT_resp_drop);
		return RS_DONE;
	case RS_DONE:
		break;
	}
	return RS_DONE;
}

static void resp_run(struct srn_rc_state *rc, const struct wire_pkt *pkt)
{
	/* not `= { ... }`: that zeroes iov[] too (~0.5 KiB of `rep stos` per
	 * packet); iov is only read up to niov */
	struct resp_pkt p;
	enum resp_state s = RS_CHECK_QP;

	p.pkt = pkt;
	p.caps = wire_opcodes[pkt->opcode].caps;
	p.rwqe = NULL;
	p.niov = 0;
	p.target = NULL;

	while (s != RS_DONE) {
		enum resp_state n = resp_step(rc, &p, s);

		if (n != RS_DONE && n > RS_ACK && srn_log_on(rc->eng, SRN_LOG_DEBUG)) {
			static struct srn_ratelimit rl = { .reason = "responder" };

			srn_log_qp(rc, SRN_LOG_DEBUG, &rl, pkt->psn, "responder %s: %s -> %s",
				   wire_opcodes[pkt->opcode].name, rs_names[s], rs_names[n]);
		}
		s = n;
	}
}

/* SR: the packets held for the PSNs the gap's filling made expected go
 * through as if they arrived now.  A gap after them was NAKed when it
 * opened (sr_seen): what came before it is acknowledged at once, so the
 * requester's window moves.  One whose packets were dropped for want of
 * room is NAKed now, length 0: go back N from there. */
static void sr_drain(struct srn_rc_state *rc)
{
	struct wire_pkt k;
	enum ibv_qp_state st;
	bool any = false;

	while (sr_take(rc, &k)) {
		resp_run(rc, &k);
		any = true;
	}
	st = rc_state(rc);
	if (rc->nak_sent || (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD))
		return;
	if (sr_gap_len(rc)) {
		rc->nak_sent = true;
		sr_renak_arm(rc, srn_now_ns(), false);
		if (any) {
			rc_count(rc, SRN_CNT_resp_acks);
			send_aeth(rc, wire_psn_add(rc->epsn, WIRE_PSN_MASK), WIRE_AETH_ACK | 0x1f);
		}
	} else if (sr_lost_room(rc)) {
		send_nak_seq(rc);
	}
}

void responder_rx(struct srn_rc_state *rc, const struct wire_pkt *pkt)
{
	resp_run(rc, pkt);
	if (rc->sr_buf)
		sr_drain(rc);
}
