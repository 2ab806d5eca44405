/* An RC QP on an iWARP device (transport/iwarp_qp.h).
 *
 * Two threads per connected QP: the receive thread reads the socket and
 * places what arrives; the sender thread does every write (the send
 * queue's WQEs and the answers to the peer's Read Requests, whole
 * messages one after the other, in the order each queue gives them).
 * Neither waits for TCP while holding a lock another needs, so a peer
 * that pushes back in both directions at once (bidirectional READ or
 * WRITE floods) never stops the receive thread draining the socket.
 *
 * Locks: qp->lock guards the send queue as for every QP, and is never
 * held across a socket write; iw->lock, taken after it, guards the
 * receive and shared RDMAP state (Read Response queue, ORD/IRD counts);
 * iw->wlock serialises writes to the socket (the sender's messages and
 * a Terminate from the receive thread). */
#include "transport/iwarp_qp.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "transport/iwarp_rx.h"
#include "transport/iwarp_tx.h"
#include "transport/rc.h"
#include "verbs/shared_rings.h"

enum {
	IWQP_TX_TIMEOUT_MS = 30000, /* a peer that takes no bytes this long is gone */
	IWQP_TERM_TIMEOUT_MS = 1000,
	IWQP_RX_POLL_MS = 10000,    /* a bound only: shutdown() wakes the thread */
};

/* srn_send_wqe.state of a WQE on an iWARP QP */
enum { IW_WQE_NEW = 0, IW_WQE_SENDING, IW_WQE_SENT, IW_WQE_DONE, IW_WQE_FAILED };

/* A Read Request to answer: the sink (peer's) STag/TO and our bytes. */
struct iw_rresp {
	uint32_t stag;
	uint64_t to;
	const void *src;
	uint32_t len;
};

struct srn_iwqp {
	struct srn_qp *qp;
	pthread_mutex_t lock;
	struct srn_iw_conn conn;
	bool attached;               /* conn holds a stream */
	bool errored;                /* has been through iw_error */
	struct srn_iw_tx tx;
	struct srn_iw_rx rx;
	pthread_t thread;
	bool thread_on;
	pthread_t sender;
	bool sender_on;
	pthread_mutex_t wlock;       /* socket writes, a message at a time */
	pthread_cond_t tx_cond;      /* (iw->lock) work for the sender */
	bool tx_kick;                /* (iw->lock) the send queue may move */
	uint32_t gen;                /* (qp->lock) bumped when the SQ flushes */
	/* Read Requests to answer, in order (iw->lock); at most IRD */
	struct iw_rresp *rr;
	uint32_t rr_cap, rr_head, rr_tail;
	atomic_bool stop;            /* closed locally: no on_close */
	void (*on_close)(void *arg);
	void *arg;
	/* receive side (iw->lock) */
	struct srn_recv_wqe rwqe;    /* the receive a Send goes into */
	bool rwqe_have;
	enum ibv_wc_status rwqe_status; /* its status if the stream dies */
	bool term_due;               /* a callback refused: send term */
	struct iwarp_term_code term;
	unsigned int reads_done;     /* READs answered, not yet completed */
	enum ibv_wc_status read_status; /* the oldest READ's, after a
					 * Terminate or a placement error */
};

static struct srn_send_wqe *sq_slot(struct srn_qp *qp, uint32_t i)
{
	return (struct srn_send_wqe *)qp->sq.wqe + (i & (qp->sq.max_wr - 1));
}

/* ---- memory ------------------------------------------------------------ */

static void prot_term(struct iwarp_term_code *t, enum srn_mr_check r)
{
	t->layer = IWARP_LAYER_RDMAP;
	t->etype = IWARP_RDMAP_ET_PROTECTION;
	t->ecode = r == SRN_MR_BAD_KEY       ? IWARP_RDMAP_EC_INVALID_STAG :
		   r == SRN_MR_PD_MISMATCH   ? IWARP_RDMAP_EC_STAG_NOT_ASSOC :
		   r == SRN_MR_NO_ACCESS     ? IWARP_RDMAP_EC_ACCESS :
					       IWARP_RDMAP_EC_BASE_BOUNDS;
}

/* Copies len bytes to offset off of a receive's scatter list. */
static int scatter(struct srn_qp *qp, const struct srn_recv_wqe *r, uint64_t off,
		   const uint8_t *data, size_t len)
{
	for (uint32_t i = 0; i < r->num_sge && len; i++) {
		const struct ibv_sge *s = &r->sge[i];
		uint64_t n;
		void *p;

		if (off >= s->length) {
			off -= s->length;
			continue;
		}
		n = s->length - off < len ? s->length - off : len;
		if (srn_mr_resolve(qp->ctx, qp->pd, s->lkey, false, s->addr + off, n,
				   IBV_ACCESS_LOCAL_WRITE, &p) != SRN_MR_OK)
			return -1;
		memcpy(p, data, n);
		data += n;
		len -= n;
		off = 0;
	}
	return len ? -1 : 0;
}

/* The WQE's payload as iov (its SGEs resolved, or its inline bytes). */
static int gather(struct srn_qp *qp, struct srn_send_wqe *w, struct iovec *iov)
{
	int n = 0;

	if (w->num_sge == 0) {
		iov[0].iov_base = w->inline_data;
		iov[0].iov_len = (size_t)w->length;
		return w->length ? 1 : 0;
	}
	for (uint32_t i = 0; i < w->num_sge; i++) {
		void *p;

		if (!w->sge[i].length)
			continue;
		if (srn_mr_resolve(qp->ctx, qp->pd, w->sge[i].lkey, false, w->sge[i].addr,
				   w->sge[i].length, 0, &p) != SRN_MR_OK)
			return -EFAULT;
		iov[n].iov_base = p;
		iov[n++].iov_len = w->sge[i].length;
	}
	return n;
}

/* ---- the receive rules' callbacks (iw->lock held) ---------------------- */

static int cb_place_send(void *arg, uint32_t msn, uint32_t mo, const uint8_t *data, size_t len,
			 struct iwarp_term_code *err)
{
	struct srn_iwqp *iw = arg;
	struct srn_qp *qp = iw->qp;

	(void)msn;
	if (mo == 0) {
		int r = qp->srq ? srn_srq_take(qp->srq, &iw->rwqe) :
			qp->rqs ? srn_rq_ring_take(qp->rqs, qp->rq.max_wr, &iw->rwqe) : -ENOENT;

		if (r) {
			*err = (struct iwarp_term_code){ IWARP_LAYER_DDP, IWARP_DDP_ET_UNTAGGED,
							 IWARP_DDP_EC_U_MSN_NOBUF };
			return -1;
		}
		iw->rwqe_have = true;
		iw->rwqe_status = IBV_WC_WR_FLUSH_ERR;
	}
	if ((uint64_t)mo + len > iw->rwqe.length) {
		iw->rwqe_status = IBV_WC_LOC_LEN_ERR;
		*err = (struct iwarp_term_code){ IWARP_LAYER_DDP, IWARP_DDP_ET_UNTAGGED,
						 IWARP_DDP_EC_U_TOO_LONG };
		return -1;
	}
	if (scatter(qp, &iw->rwqe, mo, data, len)) {
		iw->rwqe_status = IBV_WC_LOC_PROT_ERR;
		*err = (struct iwarp_term_code){ IWARP_LAYER_RDMAP, IWARP_RDMAP_ET_CATASTROPHIC,
						 IWARP_RDMAP_EC_UNSPECIFIED };
		return -1;
	}
	return 0;
}

static int cb_place_tagged(void *arg, uint32_t stag, uint64_t to, const uint8_t *data,
			   size_t len, bool read_resp, struct iwarp_term_code *err)
{
	struct srn_iwqp *iw = arg;
	enum srn_mr_check r;
	void *p;

	/* a Read Response lands where our READ's SGE (its lkey) said */
	r = srn_mr_resolve(iw->qp->ctx, iw->qp->pd, stag, !read_resp, to, len,
			   read_resp ? IBV_ACCESS_LOCAL_WRITE : IBV_ACCESS_REMOTE_WRITE, &p);
	if (r != SRN_MR_OK) {
		prot_term(err, r);
		if (read_resp)
			iw->read_status = IBV_WC_LOC_PROT_ERR;
		return -1;
	}
	memcpy(p, data, len);
	return 0;
}

static void cb_send_done(void *arg, uint32_t msn, uint32_t len, uint8_t opcode,
			 uint32_t inval_stag)
{
	struct srn_iwqp *iw = arg;
	struct ibv_wc wc = {
		.wr_id = iw->rwqe.wr_id,
		.opcode = IBV_WC_RECV,
		.byte_len = len,
		.qp_num = iw->qp->ex.qp_base.qp_num,
	};

	(void)msn;
	if (opcode == IWARP_OP_SEND_INV || opcode == IWARP_OP_SEND_SE_INV) {
		wc.wc_flags = IBV_WC_WITH_INV;
		wc.invalidated_rkey = inval_stag;
	}
	iw->rwqe_have = false;
	srn_cq_push(iw->qp->recv_cq, &wc,
		    opcode == IWARP_OP_SEND_SE || opcode == IWARP_OP_SEND_SE_INV);
}

static void cb_read_request(void *arg, const struct iwarp_hdr *h)
{
	struct srn_iwqp *iw = arg;
	enum srn_mr_check r = SRN_MR_OK;
	void *p = NULL;

	if (h->read_size)
		r = srn_mr_resolve(iw->qp->ctx, iw->qp->pd, h->src_stag, true, h->src_to,
				   h->read_size, IBV_ACCESS_REMOTE_READ, &p);
	if (r != SRN_MR_OK) {
		prot_term(&iw->term, r);
		iw->term_due = true;
		return;
	}
	/* the receive rules keep IRD, so this holds; a guard all the same */
	if (iw->rr_tail - iw->rr_head >= iw->rr_cap) {
		iw->term = (struct iwarp_term_code){ IWARP_LAYER_RDMAP, IWARP_RDMAP_ET_OPERATION,
						     IWARP_RDMAP_EC_CATASTROPHIC_STREAM };
		iw->term_due = true;
		return;
	}
	iw->rr[iw->rr_tail++ % iw->rr_cap] = (struct iw_rresp){ h->sink_stag, h->sink_to, p,
								 h->read_size };
	pthread_cond_signal(&iw->tx_cond);
}

static void cb_read_done(void *arg)
{
	((struct srn_iwqp *)arg)->reads_done++;
}

/* The peer gave up the stream: its verdict on our oldest READ, as siw's
 * (a protection error there is the remote access error). */
static void cb_terminated(void *arg, const struct iwarp_hdr *h)
{
	struct srn_iwqp *iw = arg;
	bool prot = (h->term.layer == IWARP_LAYER_RDMAP &&
		     h->term.etype == IWARP_RDMAP_ET_PROTECTION) ||
		    (h->term.layer == IWARP_LAYER_DDP && h->term.etype == IWARP_DDP_ET_TAGGED);

	iw->read_status = prot ? IBV_WC_REM_ACCESS_ERR : IBV_WC_REM_OP_ERR;
}

static const struct srn_iw_rx_ops iw_rx_ops = {
	.place_send = cb_place_send,
	.place_tagged = cb_place_tagged,
	.send_done = cb_send_done,
	.read_request = cb_read_request,
	.read_done = cb_read_done,
	.terminated = cb_terminated,
};

/* From the receive thread, no lock held: a sender stuck in a write
 * longer than the Terminate's deadline means the stream is lost anyway. */
static void send_term(struct srn_iwqp *iw, const struct iwarp_term_code *t)
{
	struct iwarp_hdr h = { .opcode = IWARP_OP_TERMINATE, .qn = IWARP_QN_TERMINATE,
			       .msn = 1, .term = *t };
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts); /* timedlock's clock */
	ts.tv_sec += IWQP_TERM_TIMEOUT_MS / 1000;
	if (pthread_mutex_timedlock(&iw->wlock, &ts))
		return;
	(void)srn_iw_send_message(&iw->conn, &h, NULL, 0, IWQP_TERM_TIMEOUT_MS);
	pthread_mutex_unlock(&iw->wlock);
}

/* ---- send queue (qp->lock held) ---------------------------------------- */

/* Writes w (a copy the sender owns; its MR bytes resolved already) as
 * one message, holding iw->wlock.  0 or the stream's error. */
static int tx_write_wqe(struct srn_iwqp *iw, const struct srn_send_wqe *w,
			const struct iovec *iov, int n)
{
	const struct ibv_sge *s = &w->sge[0];
	int r;

	pthread_mutex_lock(&iw->wlock);
	if (w->opcode == IBV_WR_RDMA_READ)
		r = srn_iw_tx_read_request(&iw->conn, &iw->tx, w->num_sge ? s->lkey : 0,
					   w->num_sge ? s->addr : 0, w->num_sge ? s->length : 0,
					   w->rkey, w->remote_addr, IWQP_TX_TIMEOUT_MS);
	else if (w->opcode == IBV_WR_RDMA_WRITE)
		r = srn_iw_tx_write(&iw->conn, w->rkey, w->remote_addr, iov, n,
				    IWQP_TX_TIMEOUT_MS);
	else
		r = srn_iw_tx_send(&iw->conn, &iw->tx, w->send_flags & IBV_SEND_SOLICITED,
				   w->opcode == IBV_WR_SEND_WITH_INV, (uint32_t)w->imm_data, iov, n,
				   IWQP_TX_TIMEOUT_MS);
	pthread_mutex_unlock(&iw->wlock);
	return r;
}

/* The local keys of w (qp->lock held): its gather list as iov (n
 * pieces), or for a READ its sink checked.  -EFAULT if one fails. */
static int tx_resolve(struct srn_iwqp *iw, struct srn_send_wqe *w, struct iovec *iov, int *n)
{
	*n = 0;
	if (w->opcode == IBV_WR_RDMA_READ) {
		const struct ibv_sge *s = &w->sge[0];
		void *p;

		if (w->num_sge && s->length &&
		    srn_mr_resolve(iw->qp->ctx, iw->qp->pd, s->lkey, false, s->addr, s->length,
				   IBV_ACCESS_LOCAL_WRITE, &p) != SRN_MR_OK)
			return -EFAULT;
		return 0;
	}
	*n = gather(iw->qp, w, iov);
	return *n < 0 ? *n : 0;
}

/* Completes, in order, what is done; with flush, everything (the QP is
 * in ERR): the oldest READ gets what a Terminate said, the rest
 * IBV_WC_WR_FLUSH_ERR. */
static void sq_retire(struct srn_qp *qp, bool flush)
{
	struct srn_iwqp *iw = qp->iw;
	uint32_t end = flush ? qp->sq.tail : qp->sq.next;

	while (qp->sq.head != end) {
		struct srn_send_wqe *w = sq_slot(qp, qp->sq.head);
		bool sig = true;
		struct ibv_wc wc = {
			.wr_id = w->wr_id,
			.opcode = rc_wc_opcode(w->opcode),
			.qp_num = qp->ex.qp_base.qp_num,
		};

		if (w->state == IW_WQE_DONE) {
			sig = w->send_flags & IBV_SEND_SIGNALED;
			wc.byte_len = w->opcode == IBV_WR_RDMA_READ ? (uint32_t)w->length : 0;
		} else if (w->state == IW_WQE_FAILED) {
			wc.status = (enum ibv_wc_status)w->sent;
		} else if (!flush) {
			break;
		} else if (w->state == IW_WQE_SENT && iw->read_status != IBV_WC_SUCCESS) {
			wc.status = iw->read_status;
			iw->read_status = IBV_WC_SUCCESS;
		} else {
			wc.status = IBV_WC_WR_FLUSH_ERR;
		}
		w->state = IW_WQE_NEW;
		qp->sq.head++;
		if (sig)
			srn_cq_push(qp->send_cq, &wc, false);
	}
	if (flush)
		qp->sq.next = qp->sq.head;
}

static void post_qp_event_iw(struct srn_qp *qp, enum ibv_event_type type)
{
	struct ibv_async_event ev = { .element.qp = &qp->ex.qp_base, .event_type = type };

	srn_async_post_counted(qp->ctx, &ev, &qp->events_reported);
}

/* The QP enters ERR: the stream is shut, every WR completes (ev >= 0:
 * the async event to raise). */
static void iw_error(struct srn_qp *qp, int ev)
{
	struct srn_iwqp *iw = qp->iw;
	bool was_err = iw->errored;
	struct ibv_wc wc = { .status = IBV_WC_WR_FLUSH_ERR, .opcode = IBV_WC_RECV,
			     .qp_num = qp->ex.qp_base.qp_num };
	struct srn_recv_wqe r;

	iw->errored = true;
	iw->gen++;
	qp->a.attr.qp_state = qp->a.attr.cur_qp_state = IBV_QPS_ERR;
	qp->ex.qp_base.state = IBV_QPS_ERR;
	sq_retire(qp, true);
	pthread_mutex_lock(&iw->lock);
	if (iw->rwqe_have) {
		wc.wr_id = iw->rwqe.wr_id;
		wc.status = iw->rwqe_status;
		srn_cq_push(qp->recv_cq, &wc, false);
		iw->rwqe_have = false;
		wc.status = IBV_WC_WR_FLUSH_ERR;
	}
	iw->rr_head = iw->rr_tail; /* no one is waiting for these now */
	if (iw->attached)
		shutdown(iw->conn.fd, SHUT_RDWR);
	pthread_mutex_unlock(&iw->lock);
	/* an SRQ's WQEs are other QPs' too: they stay */
	for (uint32_t n = 0; !qp->srq && qp->rqs && n < qp->rq.max_wr &&
			     srn_rq_ring_take(qp->rqs, qp->rq.max_wr, &r) == 0; n++) {
		wc.wr_id = r.wr_id;
		srn_cq_push(qp->recv_cq, &wc, false);
	}
	if (ev >= 0 && !was_err)
		post_qp_event_iw(qp, (enum ibv_event_type)ev);
	if (qp->srq && !was_err)
		post_qp_event_iw(qp, IBV_EVENT_QP_LAST_WQE_REACHED);
}

/* The sender has work (qp->lock may be held: iw->lock comes after it). */
static void kick_sender(struct srn_iwqp *iw)
{
	pthread_mutex_lock(&iw->lock);
	iw->tx_kick = true;
	pthread_cond_signal(&iw->tx_cond);
	pthread_mutex_unlock(&iw->lock);
}

/* The sender puts the next send queue WQE on the wire: chosen and its
 * keys checked under qp->lock, written without it.  true if it went
 * (there may be more). */
static bool sq_step(struct srn_iwqp *iw)
{
	struct srn_qp *qp = iw->qp;
	struct iovec iov[SRN_MAX_SGE];
	struct srn_send_wqe copy, *w;
	bool read;
	uint32_t gen;
	int n, r;

	pthread_mutex_lock(&qp->lock);
	if (atomic_load(&iw->stop) || qp->ex.qp_base.state != IBV_QPS_RTS || !iw->attached ||
	    qp->sq.next == qp->sq.tail) {
		srn_qp_unlock(qp);
		return false;
	}
	w = sq_slot(qp, qp->sq.next);
	read = w->opcode == IBV_WR_RDMA_READ;
	if (read) { /* within ORD: counted now, the response cannot come first */
		bool full;

		pthread_mutex_lock(&iw->lock);
		full = iw->rx.orq_out >= iw->tx.ord;
		if (!full)
			iw->rx.orq_out++;
		pthread_mutex_unlock(&iw->lock);
		if (full) { /* the receive thread kicks when a response is in */
			srn_qp_unlock(qp);
			return false;
		}
	}
	copy = *w; /* inline bytes stay put while we write */
	r = tx_resolve(iw, &copy, iov, &n);
	qp->sq.next++;
	if (r) { /* a bad local key fails its WR, then the QP */
		if (read) {
			pthread_mutex_lock(&iw->lock);
			iw->rx.orq_out--;
			pthread_mutex_unlock(&iw->lock);
		}
		w->state = IW_WQE_FAILED;
		w->sent = IBV_WC_LOC_PROT_ERR;
		sq_retire(qp, false);
		iw_error(qp, IBV_EVENT_QP_ACCESS_ERR);
		srn_qp_unlock(qp);
		return false;
	}
	/* a READ is SENT before it goes: its response may beat our relock */
	w->state = read ? IW_WQE_SENT : IW_WQE_SENDING;
	gen = iw->gen;
	srn_qp_unlock(qp);

	r = tx_write_wqe(iw, &copy, iov, n);

	pthread_mutex_lock(&qp->lock);
	if (iw->gen == gen) { /* else flushed meanwhile: w is not ours */
		if (r) {
			w->state = IW_WQE_FAILED;
			w->sent = IBV_WC_WR_FLUSH_ERR;
		} else if (!read) {
			w->state = IW_WQE_DONE;
		}
		sq_retire(qp, false);
		if (r && !atomic_load(&iw->stop))
			iw_error(qp, IBV_EVENT_QP_FATAL);
	}
	srn_qp_unlock(qp);
	return r == 0;
}

/* Answers one queued Read Request (iw->lock held on entry and return). */
static void rresp_step(struct srn_iwqp *iw)
{
	struct iw_rresp j = iw->rr[iw->rr_head % iw->rr_cap];
	struct iwarp_hdr req = { .sink_stag = j.stag, .sink_to = j.to, .read_size = j.len };
	int r;

	pthread_mutex_unlock(&iw->lock);
	pthread_mutex_lock(&iw->wlock);
	r = srn_iw_tx_read_response(&iw->conn, NULL, &req, j.src, IWQP_TX_TIMEOUT_MS);
	pthread_mutex_unlock(&iw->wlock);
	if (r && !atomic_load(&iw->stop)) { /* the peer takes no bytes */
		pthread_mutex_lock(&iw->qp->lock);
		iw_error(iw->qp, IBV_EVENT_QP_FATAL);
		srn_qp_unlock(iw->qp);
	}
	pthread_mutex_lock(&iw->lock);
	if (r == 0 && iw->rr_head != iw->rr_tail) {
		iw->rr_head++;
		srn_iw_rx_rresp_sent(&iw->rx);
	}
}

/* The sender thread: Read Responses first (the peer's READs wait on
 * them), then the send queue, one message at a time. */
static void *tx_main(void *arg)
{
	struct srn_iwqp *iw = arg;

	/* the connection manager may hold the first FPDU back a moment */
	for (int64_t left; !atomic_load(&iw->stop) &&
			   (left = iw->conn.tx_hold_until - srn_iw_deadline(0)) > 0;)
		usleep((useconds_t)(left < 10 ? left : 10) * 1000);
	pthread_mutex_lock(&iw->lock);
	while (!atomic_load(&iw->stop)) {
		if (iw->rr_head != iw->rr_tail) {
			rresp_step(iw);
		} else if (iw->tx_kick) {
			iw->tx_kick = false;
			pthread_mutex_unlock(&iw->lock);
			if (sq_step(iw)) {
				pthread_mutex_lock(&iw->lock);
				iw->tx_kick = true;
			} else {
				pthread_mutex_lock(&iw->lock);
			}
		} else {
			pthread_cond_wait(&iw->tx_cond, &iw->lock);
		}
	}
	pthread_mutex_unlock(&iw->lock);
	return NULL;
}

/* n READs have all their response: the oldest ones are done. */
static void reads_complete(struct srn_qp *qp, unsigned int n)
{
	for (uint32_t i = qp->sq.head; n && i != qp->sq.next; i++) {
		struct srn_send_wqe *w = sq_slot(qp, i);

		if (w->state == IW_WQE_SENT) {
			w->state = IW_WQE_DONE;
			n--;
		}
	}
}

/* ---- the receive thread ------------------------------------------------ */

static void *rx_main(void *arg)
{
	struct srn_iwqp *iw = arg;
	struct srn_qp *qp = iw->qp;
	bool ended = false;

	while (!ended && !atomic_load(&iw->stop)) {
		struct iwarp_term_code err = { 0 };
		struct iwarp_hdr h;
		unsigned int reads;
		int ev = -1;
		int r = srn_iw_recv_segment(&iw->conn, &h, &err, IWQP_RX_POLL_MS);

		if (r == -ETIMEDOUT)
			continue;
		pthread_mutex_lock(&iw->lock);
		if (r == 0) {
			r = srn_iw_rx_segment(&iw->rx, &iw_rx_ops, iw, &h, &err);
			if (r == 0 && iw->term_due) {
				err = iw->term;
				r = -EPROTO;
			}
			if (r == 1)
				ev = IBV_EVENT_QP_FATAL;
		}
		reads = iw->reads_done;
		iw->reads_done = 0;
		pthread_mutex_unlock(&iw->lock);
		if (r == -EPROTO || r == -EBADMSG) {
			send_term(iw, &err);
			ev = err.layer == IWARP_LAYER_RDMAP && err.etype == IWARP_RDMAP_ET_PROTECTION
				     ? IBV_EVENT_QP_ACCESS_ERR
				     : IBV_EVENT_QP_FATAL;
		}
		if (r == 0 && !reads)
			continue;
		pthread_mutex_lock(&qp->lock);
		reads_complete(qp, reads);
		if (r == 0) {
			sq_retire(qp, false);
			kick_sender(iw); /* an ORD slot is free */
		} else if (!atomic_load(&iw->stop)) {
			iw_error(qp, ev);
			ended = true;
		}
		srn_qp_unlock(qp);
	}
	if (ended && !atomic_load(&iw->stop) && iw->on_close)
		iw->on_close(iw->arg);
	return NULL;
}

/* ---- hooks ------------------------------------------------------------- */

int srn_iwqp_create(struct srn_qp *qp)
{
	struct srn_iwqp *iw;

	if (qp->ex.qp_base.qp_type != IBV_QPT_RC)
		return EOPNOTSUPP; /* siw has RC only */
	iw = calloc(1, sizeof(*iw));
	if (!iw)
		return ENOMEM;
	iw->qp = qp;
	iw->conn.fd = -1;
	pthread_mutex_init(&iw->lock, NULL);
	pthread_mutex_init(&iw->wlock, NULL);
	pthread_cond_init(&iw->tx_cond, NULL);
	qp->iw = iw;
	return 0;
}

void srn_iwqp_destroy(struct srn_qp *qp)
{
	struct srn_iwqp *iw = qp->iw;

	if (!iw)
		return;
	atomic_store(&iw->stop, true);
	if (iw->attached)
		shutdown(iw->conn.fd, SHUT_RDWR);
	pthread_mutex_lock(&iw->lock);
	pthread_cond_signal(&iw->tx_cond);
	pthread_mutex_unlock(&iw->lock);
	/* the threads may be waiting for qp->lock */
	pthread_mutex_unlock(&qp->lock);
	if (iw->thread_on)
		pthread_join(iw->thread, NULL);
	if (iw->sender_on)
		pthread_join(iw->sender, NULL);
	pthread_mutex_lock(&qp->lock);
	if (iw->attached) {
		close(iw->conn.fd);
		srn_iw_conn_fini(&iw->conn);
	}
	free(iw->rr);
	pthread_cond_destroy(&iw->tx_cond);
	pthread_mutex_destroy(&iw->wlock);
	pthread_mutex_destroy(&iw->lock);
	qp->iw = NULL;
	free(iw);
}

int srn_iwqp_wqe_check(const struct srn_send_wqe *w)
{
	if (srn_iw_wr_opcode_check(w->opcode))
		return EINVAL;
	/* siw: a READ lands in one SGE (max_sge_rd 1) */
	if (w->opcode == IBV_WR_RDMA_READ && w->num_sge > 1)
		return EINVAL;
	return 0;
}

void srn_iwqp_kick_sq(struct srn_qp *qp)
{
	if (!qp->iw)
		return;
	if (qp->ex.qp_base.state == IBV_QPS_ERR)
		sq_retire(qp, true);
	else if (qp->iw->sender_on)
		kick_sender(qp->iw);
}

void srn_iwqp_kick_rq(struct srn_qp *qp)
{
	if (qp->iw && qp->ex.qp_base.state == IBV_QPS_ERR)
		iw_error(qp, -1);
}

void srn_iwqp_modified(struct srn_qp *qp, enum ibv_qp_state old)
{
	(void)old;
	if (qp->iw && qp->a.attr.qp_state == IBV_QPS_ERR)
		iw_error(qp, -1);
}

int srn_iwqp_attach(struct ibv_qp *ibqp, struct srn_iw_conn *c, void (*on_close)(void *arg),
		    void *arg)
{
	struct srn_qp *qp = srn_qp(ibqp);
	struct srn_iwqp *iw = qp->iw;
	enum ibv_qp_state s;

	pthread_mutex_lock(&qp->lock);
	s = qp->ex.qp_base.state;
	if (!iw || iw->attached ||
	    (s != IBV_QPS_INIT && s != IBV_QPS_RTR && s != IBV_QPS_RTS)) {
		srn_qp_unlock(qp);
		return EINVAL;
	}
	iw->rr_cap = c->ird ? c->ird : 1;
	iw->rr = calloc(iw->rr_cap, sizeof(*iw->rr));
	if (!iw->rr) {
		srn_qp_unlock(qp);
		return ENOMEM;
	}
	iw->conn = *c;
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	srn_iw_tx_init(&iw->tx, iw->conn.ord);
	srn_iw_rx_init(&iw->rx, iw->conn.ird);
	iw->on_close = on_close;
	iw->arg = arg;
	iw->attached = true;
	qp->a.attr.qp_state = qp->a.attr.cur_qp_state = IBV_QPS_RTS;
	qp->ex.qp_base.state = IBV_QPS_RTS;
	iw->sender_on = !pthread_create(&iw->sender, NULL, tx_main, iw);
	iw->thread_on = iw->sender_on && !pthread_create(&iw->thread, NULL, rx_main, iw);
	if (!iw->thread_on) {
		iw_error(qp, -1);
		srn_qp_unlock(qp);
		return EAGAIN;
	}
	kick_sender(iw);
	srn_qp_unlock(qp);
	return 0;
}

const struct srn_iwqp_ops srn_iwqp_ops = {
	.attach = srn_iwqp_attach,
	.disconnect = srn_iwqp_disconnect,
};

void srn_iwqp_disconnect(struct ibv_qp *ibqp)
{
	struct srn_qp *qp = srn_qp(ibqp);

	pthread_mutex_lock(&qp->lock);
	if (qp->iw) {
		atomic_store(&qp->iw->stop, true);
		iw_error(qp, -1);
	}
	srn_qp_unlock(qp);
}
