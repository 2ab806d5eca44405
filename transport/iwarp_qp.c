/* An RC QP on an iWARP device (transport/iwarp_qp.h).
 *
 * Locks: qp->lock guards the send queue as for every QP; iw->lock, taken
 * after it, guards the stream (socket writes, the send and receive
 * state).  The receive thread places segments holding only iw->lock (so
 * a sender holding qp->lock while TCP pushes back never stops it from
 * draining the socket) and takes qp->lock afterwards, on its own, to
 * complete READs and to move the QP to ERR. */
#include "transport/iwarp_qp.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
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
enum { IW_WQE_NEW = 0, IW_WQE_SENT, IW_WQE_DONE, IW_WQE_FAILED };

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
	if (srn_iw_tx_read_response(&iw->conn, &iw->rx, h, p, IWQP_TX_TIMEOUT_MS)) {
		iw->term = (struct iwarp_term_code){ IWARP_LAYER_LLP, 0, IWARP_LLP_EC_STREAM_LOST };
		iw->term_due = true;
	}
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

static void send_term(struct srn_iwqp *iw, const struct iwarp_term_code *t)
{
	struct iwarp_hdr h = { .opcode = IWARP_OP_TERMINATE, .qn = IWARP_QN_TERMINATE,
			       .msn = 1, .term = *t };

	(void)srn_iw_send_message(&iw->conn, &h, NULL, 0, IWQP_TERM_TIMEOUT_MS);
}

/* ---- send queue (qp->lock held) ---------------------------------------- */

/* Puts w on the wire (iw->lock held): 0, -EAGAIN (ORD reached), -EFAULT
 * (a local key failed), or the stream's error. */
static int tx_one(struct srn_iwqp *iw, struct srn_send_wqe *w)
{
	struct iovec iov[SRN_MAX_SGE];
	int n;

	if (w->opcode == IBV_WR_RDMA_READ) {
		const struct ibv_sge *s = &w->sge[0];
		void *p;

		if (w->num_sge && s->length &&
		    srn_mr_resolve(iw->qp->ctx, iw->qp->pd, s->lkey, false, s->addr, s->length,
				   IBV_ACCESS_LOCAL_WRITE, &p) != SRN_MR_OK)
			return -EFAULT;
		return srn_iw_tx_read(&iw->conn, &iw->tx, &iw->rx, w->num_sge ? s->lkey : 0,
				      w->num_sge ? s->addr : 0, w->num_sge ? s->length : 0, w->rkey,
				      w->remote_addr, IWQP_TX_TIMEOUT_MS);
	}
	n = gather(iw->qp, w, iov);
	if (n < 0)
		return n;
	if (w->opcode == IBV_WR_RDMA_WRITE)
		return srn_iw_tx_write(&iw->conn, w->rkey, w->remote_addr, iov, n,
				       IWQP_TX_TIMEOUT_MS);
	return srn_iw_tx_send(&iw->conn, &iw->tx, w->send_flags & IBV_SEND_SOLICITED,
			      w->opcode == IBV_WR_SEND_WITH_INV, (uint32_t)w->imm_data, iov, n,
			      IWQP_TX_TIMEOUT_MS);
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

static void sq_run(struct srn_qp *qp)
{
	struct srn_iwqp *iw = qp->iw;
	int fail = 0;

	while (qp->ex.qp_base.state == IBV_QPS_RTS && iw->attached &&
	       qp->sq.next != qp->sq.tail) {
		struct srn_send_wqe *w = sq_slot(qp, qp->sq.next);
		int r;

		pthread_mutex_lock(&iw->lock);
		r = tx_one(iw, w);
		pthread_mutex_unlock(&iw->lock);
		if (r == -EAGAIN)
			break;
		qp->sq.next++;
		if (r == 0) {
			w->state = w->opcode == IBV_WR_RDMA_READ ? IW_WQE_SENT : IW_WQE_DONE;
			continue;
		}
		/* a bad local key fails its WR; a broken stream, the QP */
		w->state = IW_WQE_FAILED;
		w->sent = r == -EFAULT ? IBV_WC_LOC_PROT_ERR : IBV_WC_WR_FLUSH_ERR;
		fail = r == -EFAULT ? IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_FATAL;
		break;
	}
	sq_retire(qp, false);
	if (fail)
		iw_error(qp, fail);
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
		if (r == -EPROTO || r == -EBADMSG) {
			send_term(iw, &err);
			ev = err.layer == IWARP_LAYER_RDMAP && err.etype == IWARP_RDMAP_ET_PROTECTION
				     ? IBV_EVENT_QP_ACCESS_ERR
				     : IBV_EVENT_QP_FATAL;
		}
		reads = iw->reads_done;
		iw->reads_done = 0;
		pthread_mutex_unlock(&iw->lock);
		if (r == 0 && !reads)
			continue;
		pthread_mutex_lock(&qp->lock);
		reads_complete(qp, reads);
		if (r == 0) {
			sq_run(qp);
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
	if (iw->thread_on) {
		/* the thread may be waiting for qp->lock */
		pthread_mutex_unlock(&qp->lock);
		pthread_join(iw->thread, NULL);
		pthread_mutex_lock(&qp->lock);
	}
	if (iw->attached) {
		close(iw->conn.fd);
		srn_iw_conn_fini(&iw->conn);
	}
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
	else
		sq_run(qp);
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
	if (pthread_create(&iw->thread, NULL, rx_main, iw)) {
		iw_error(qp, -1);
		srn_qp_unlock(qp);
		return EAGAIN;
	}
	iw->thread_on = true;
	sq_run(qp);
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
