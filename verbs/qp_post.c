/* ibv_post_send / ibv_post_recv (ops slots): check each work request,
 * copy it into the QP's ring as a WQE (the application may reuse the WR
 * and, for INLINE, the buffer as soon as the call returns), then kick the
 * transport.  On failure *bad_wr is the first WR not posted; those before
 * it are posted. */
#include "transport/iwarp_qp.h"
#include "verbs/datapath.h"
#include "verbs/mw.h"
#include "verbs/shared_rings.h"

#include <string.h>

#define OP(o) (1u << (o))

uint32_t srn_sq_opcodes(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC:
		return OP(IBV_WR_SEND) | OP(IBV_WR_SEND_WITH_IMM) |
		       OP(IBV_WR_RDMA_WRITE) | OP(IBV_WR_RDMA_WRITE_WITH_IMM) |
		       OP(IBV_WR_RDMA_READ) | OP(IBV_WR_ATOMIC_CMP_AND_SWP) |
		       OP(IBV_WR_ATOMIC_FETCH_AND_ADD) | OP(IBV_WR_ATOMIC_WRITE) |
		       OP(IBV_WR_SEND_WITH_INV) | OP(IBV_WR_BIND_MW) |
		       OP(IBV_WR_LOCAL_INV);
	case IBV_QPT_UC:
		return OP(IBV_WR_SEND) | OP(IBV_WR_SEND_WITH_IMM) |
		       OP(IBV_WR_RDMA_WRITE) | OP(IBV_WR_RDMA_WRITE_WITH_IMM) |
		       OP(IBV_WR_BIND_MW) | OP(IBV_WR_LOCAL_INV);
	case IBV_QPT_UD:
		return OP(IBV_WR_SEND) | OP(IBV_WR_SEND_WITH_IMM);
	case IBV_QPT_XRC_SEND:
		return OP(IBV_WR_SEND) | OP(IBV_WR_SEND_WITH_IMM) |
		       OP(IBV_WR_RDMA_WRITE) | OP(IBV_WR_RDMA_WRITE_WITH_IMM) |
		       OP(IBV_WR_RDMA_READ) | OP(IBV_WR_ATOMIC_CMP_AND_SWP) |
		       OP(IBV_WR_ATOMIC_FETCH_AND_ADD);
	default:
		return 0;
	}
}

/* IBTA 10.3.1 (and rxe): the send queue takes work requests in RTS and
 * later states (SQD holds them, SQE/ERR flush them), not before. */
int srn_sq_check_state(const struct srn_qp *qp)
{
	switch (qp->ex.qp_base.state) {
	case IBV_QPS_RTS:
	case IBV_QPS_SQD:
	case IBV_QPS_SQE:
	case IBV_QPS_ERR:
		return 0;
	default:
		return EINVAL;
	}
}

static bool is_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* Checks a filled WQE (sge[] holds the gather list, INLINE not yet
 * gathered) against the QP; gathers INLINE data.  0 or errno. */
int srn_sq_check_wqe(const struct srn_qp *qp, struct srn_send_wqe *w)
{
	const unsigned int flags_ok = IBV_SEND_FENCE | IBV_SEND_SIGNALED |
				      IBV_SEND_SOLICITED | IBV_SEND_INLINE;
	uint64_t len = 0;
	uint32_t i;

	if ((unsigned int)w->opcode >= 32 ||
	    !(srn_sq_opcodes(qp->ex.qp_base.qp_type) & OP(w->opcode)))
		return EINVAL;
	if (qp->iw && srn_iwqp_wqe_check(w))
		return EINVAL; /* what siw's provider refuses */
	if (w->send_flags & ~flags_ok)
		return EINVAL;
	if (w->num_sge > qp->cap.max_send_sge)
		return EINVAL;
	if (qp->ex.qp_base.qp_type == IBV_QPT_UD && !w->ah)
		return EINVAL;
	/* INLINE only means something for data the requester sends; on a
	 * READ or atomic it is ignored (there is no payload to copy). */
	if (w->opcode == IBV_WR_RDMA_READ || is_atomic(w->opcode) ||
	    w->opcode == IBV_WR_BIND_MW || w->opcode == IBV_WR_LOCAL_INV)
		w->send_flags &= ~(unsigned int)IBV_SEND_INLINE;

	if ((w->send_flags & IBV_SEND_INLINE) && w->num_sge == 0) {
		/* Gathered already (ibv_wr_set_inline_data*) or empty. */
		len = w->length;
	} else {
		for (i = 0; i < w->num_sge; i++)
			len += w->sge[i].length;
	}
	if (len > SRN_MAX_MSG_SIZE)
		return EINVAL;
	if (is_atomic(w->opcode) || w->opcode == IBV_WR_ATOMIC_WRITE) {
		/* IBTA 9.4.5: 8-byte operand, 8-byte aligned target. */
		if (len != 8 || (w->remote_addr & 7))
			return EINVAL;
	}
	if (w->send_flags & IBV_SEND_INLINE) {
		uint64_t off = 0;

		/* (an ATOMIC WRITE's operand is inline whatever the cap) */
		if (len > qp->cap.max_inline_data && w->opcode != IBV_WR_ATOMIC_WRITE)
			return EINVAL;
		for (i = 0; i < w->num_sge; i++) {
			/* an empty SGE may carry a NULL address (UCX's
			 * zero-length active messages): memcpy must not see it */
			if (!w->sge[i].length)
				continue;
			memcpy(w->inline_data + off,
			       (const void *)(uintptr_t)w->sge[i].addr,
			       w->sge[i].length);
			off += w->sge[i].length;
		}
		/* The payload is now inline_data[0..length): no lkeys. */
		w->num_sge = 0;
	}
	w->length = len;
	return 0;
}

/* Fill slot w from wr; the checks come after (srn_sq_check_wqe). */
static int wqe_from_wr(const struct srn_qp *qp, struct srn_send_wqe *w,
		       const struct ibv_send_wr *wr)
{
	if (wr->num_sge < 0 || wr->num_sge > SRN_MAX_SGE ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->send_flags = wr->send_flags;
	if (qp->sq_sig_all)
		w->send_flags |= IBV_SEND_SIGNALED;
	w->imm_data = (wr->opcode == IBV_WR_SEND_WITH_IMM ||
		       wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) ? wr->imm_data : 0;
	w->num_sge = (uint32_t)wr->num_sge;
	if (wr->num_sge == 1)
		w->sge[0] = wr->sg_list[0]; /* the common case, without a call */
	else if (wr->num_sge)
		memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(w->sge[0]));
	w->length = 0;
	w->remote_addr = 0;
	w->rkey = 0;
	w->compare_add = 0;
	w->swap = 0;
	w->ah = NULL;
	w->remote_qpn = 0;
	w->remote_qkey = 0;
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_SEND_WITH_INV:
		w->imm_data = wr->invalidate_rkey; /* host order */
		break;
	case IBV_WR_LOCAL_INV:
		/* local operations ignore a gather list, as rxe */
		w->rkey = wr->invalidate_rkey;
		w->num_sge = 0;
		break;
	case IBV_WR_BIND_MW:
		srn_mw_bind_to_wqe(w, wr->bind_mw.mw, wr->bind_mw.rkey,
				   &wr->bind_mw.bind_info);
		w->num_sge = 0;
		break;
	case IBV_WR_ATOMIC_WRITE:
		return EINVAL; /* no ibv_send_wr form: ibv_wr_atomic_write only */
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
		break;
	default:
		break;
	}
	if (qp->ex.qp_base.qp_type == IBV_QPT_UD) {
		w->ah = wr->wr.ud.ah;
		w->remote_qpn = wr->wr.ud.remote_qpn;
		w->remote_qkey = wr->wr.ud.remote_qkey;
	}
	if (qp->ex.qp_base.qp_type == IBV_QPT_XRC_SEND)
		w->remote_qpn = wr->qp_type.xrc.remote_srqn; /* the XRCETH's */
	w->first_psn = w->last_psn = 0;
	w->sent = 0;
	w->sge0_base = NULL;
	w->state = 0;
	return 0;
}

/* Checks wr against max_sge and the message size limit and fills r. */
static int recv_wqe_fill(struct srn_recv_wqe *r, uint32_t max_sge, const struct ibv_recv_wr *wr)
{
	uint64_t len = 0;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	for (int i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if (len > SRN_MAX_MSG_SIZE)
		return EINVAL;
	r->wr_id = wr->wr_id;
	r->num_sge = (uint32_t)wr->num_sge;
	if (wr->num_sge == 1)
		r->sge[0] = wr->sg_list[0]; /* the common case, without a call */
	else if (wr->num_sge)
		memcpy(r->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(r->sge[0]));
	r->length = len;
	return 0;
}

/* How far same-host peers took ring r, as the last of their completions
 * that cq's pollers consumed told (cq.c rq_hint): at most head, so never
 * room that is not there; t - slots - 1 ("full") when there is none, or it
 * is about another ring (another QP's or SRQ's on the same CQ, or one
 * before: tags are never reused in a process). */
static uint32_t ring_head_hint(const struct srn_rq_ring *r, struct srn_cq *cq, uint32_t t,
			       uint32_t slots)
{
	struct srn_cq_ring *cr = cq ? __atomic_load_n(&cq->ring, __ATOMIC_ACQUIRE) : NULL;
	uint64_t v = cr ? atomic_load_explicit(&cr->rq_hint, memory_order_relaxed) : 0;

	if (!r->tag || (uint32_t)(v >> 32) != r->tag || t - (uint32_t)v > slots)
		return t - slots - 1;
	return (uint32_t)v;
}

int srn_rq_ring_post(struct srn_rq_ring *r, uint32_t slots, uint32_t cap, uint32_t max_sge,
		     struct srn_cq *hint_cq, uint32_t *head_seen, const struct ibv_recv_wr *wr)
{
	uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
	struct srn_recv_wqe *slot;
	int err;

	/* the application's capacity, which may be less than the ring's
	 * slots (srn_rq_ring_slots) */
	if (t - *head_seen >= cap) {
		uint32_t h = ring_head_hint(r, hint_cq, t, slots);

		if (t - h >= cap)
			h = atomic_load_explicit(&r->head, memory_order_acquire);
		*head_seen = h;
		if (t - h >= cap)
			return ENOMEM;
	}
	/* (the slot at tail is no taker's until tail moves past it) */
	slot = &r->wqe[t & (slots - 1)];
	err = recv_wqe_fill(slot, max_sge, wr);
	if (err)
		return err;
	/* a peer tells a posted WQE by its seq, the owner's takers by tail;
	 * the release stores publish it */
	__atomic_store_n(&slot->seq, t + 1, __ATOMIC_RELEASE);
	atomic_store_explicit(&r->tail, t + 1, memory_order_release);
	/* The next slot was last read by the same-host peer that took it,
	 * half a ring ago (srn_rq_ring_slots): claim the lines the next post
	 * writes now, or the unlock after it waits for them (on a ping-pong,
	 * right before the reply).  Not the slot the peer takes next: only
	 * with room to spare in the ring. */
	if (slots > cap) {
		slot = &r->wqe[(t + 1) & (slots - 1)];
		srn_prefetch_w(slot);
		srn_prefetch_w((char *)slot + 31); /* to sge[0]'s end */
		srn_prefetch_w(&slot->length);
	}
	return 0;
}

/* The ping-pong case: one SEND or RDMA WRITE, one SGE, on an idle send
 * queue of an RC or UC QP (or a SEND of a UD QP).  On a same-host peer
 * it is carried out straight from the WR, without a WQE built, checked
 * and run through the requester (measured: that is most of the sender's
 * part of a same-host SEND's latency).
 * Everything else, and anything the transport declines, takes the
 * general path below, which makes every check and gives every error. */
static bool post_now(struct srn_qp *qp, const struct ibv_send_wr *wr)
{
	const unsigned int flags_ok = IBV_SEND_FENCE | IBV_SEND_SIGNALED |
				      IBV_SEND_SOLICITED | IBV_SEND_INLINE;
	uint32_t len;

	enum ibv_qp_type t = qp->ex.qp_base.qp_type;
	bool send = wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM;

	if (wr->next || wr->num_sge != 1 || !wr->sg_list || !qp->rc ||
	    (!send && wr->opcode != IBV_WR_RDMA_WRITE &&
	     wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) ||
	    (wr->send_flags & ~flags_ok) ||
	    (t != IBV_QPT_RC && t != IBV_QPT_UC && !(t == IBV_QPT_UD && send && wr->wr.ud.ah)) ||
	    qp->ex.qp_base.state != IBV_QPS_RTS || qp->cap.max_send_sge < 1 ||
	    qp->sq.head != qp->sq.tail || qp->sq.next != qp->sq.tail || qp->wr_pending)
		return false;
	len = wr->sg_list[0].length;
	if (len > SRN_MAX_MSG_SIZE ||
	    ((wr->send_flags & IBV_SEND_INLINE) && len > qp->cap.max_inline_data))
		return false;
	return srn_transport_post_now(qp, wr, len) == 1;
}

int srn_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad_wr)
{
	struct srn_qp *qp = srn_qp(ibqp);
	uint32_t posted = 0;
	int err = 0;

	pthread_mutex_lock(&qp->lock);
	if (wr && post_now(qp, wr)) {
		srn_qp_unlock(qp);
		return 0;
	}
	err = srn_sq_check_state(qp);
	for (; wr && !err; wr = wr->next) {
		struct srn_send_wqe *w;

		/* Slots the ibv_wr_* API has reserved count as used. */
		if (qp->sq.tail + qp->wr_pending - qp->sq.head >= qp->sq.max_wr) {
			err = ENOMEM;
			break;
		}
		w = srn_sq_slot(qp, qp->sq.tail);
		err = wqe_from_wr(qp, w, wr);
		if (!err)
			err = srn_sq_check_wqe(qp, w);
		if (err)
			break;
		qp->sq.tail++;
		posted++;
	}
	if (err && bad_wr)
		*bad_wr = wr;
	if (posted)
		srn_transport_kick_sq(qp);
	srn_qp_unlock(qp);
	return err;
}

int srn_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr)
{
	struct srn_qp *qp = srn_qp(ibqp);
	uint32_t posted = 0;
	int err = 0;

	pthread_mutex_lock(&qp->lock);
	/* Receives may be posted from INIT on; a QP on an SRQ has no RQ. */
	if (ibqp->state == IBV_QPS_RESET || qp->srq || !qp->rqs)
		err = EINVAL;
	for (; wr && !err; wr = wr->next) {
		err = srn_rq_ring_post(qp->rqs, qp->rq.max_wr, qp->cap.max_recv_wr,
				       qp->cap.max_recv_sge, qp->recv_cq, &qp->rq_head_seen, wr);
		if (err)
			break;
		posted++;
	}
	if (err && bad_wr)
		*bad_wr = wr;
	if (posted)
		srn_transport_kick_rq(qp);
	srn_qp_unlock(qp);
	return err;
}
