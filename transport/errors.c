/* transport/errors: the QP's way into the error state (IBTA 10.3.1: every
 * outstanding and later work request completes with IBV_WC_WR_FLUSH_ERR). */
#include <string.h>

#include "transport/direct.h"
#include "transport/rc.h"
#include "verbs/shared_rings.h"

enum ibv_wc_opcode rc_wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_ATOMIC_WRITE:
		return IBV_WC_ATOMIC_WRITE;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	case IBV_WR_TSO:
		return IBV_WC_TSO;
	default:
		return IBV_WC_SEND;
	}
}

void rc_flush_sq(struct srn_rc_state *rc)
{
	struct srn_qp *qp = rc->qp;

	for (; qp->sq.head != qp->sq.tail; qp->sq.head++) {
		struct srn_send_wqe *w = rc_sq(qp, qp->sq.head);
		struct ibv_wc wc = {
			.wr_id = w->wr_id,
			.status = IBV_WC_WR_FLUSH_ERR,
			.opcode = rc_wc_opcode(w->opcode),
			.qp_num = rc->qpn,
		};

		w->state = WQE_NEW;
		srn_cq_push(qp->send_cq, &wc, false);
	}
	qp->sq.next = qp->sq.head;
	rc->rd_out = 0;
	rc->resp_off = 0;
	rc->retry_at = rc->rnr_at = rc->resume_at = 0;
	rc->rnr_wait = false;
}

void rc_flush_rq(struct srn_rc_state *rc)
{
	struct srn_qp *qp = rc->qp;
	struct ibv_wc wc = {
		.status = IBV_WC_WR_FLUSH_ERR,
		.opcode = IBV_WC_RECV,
		.qp_num = rc->qpn,
	};

	/* first a WQE already taken for a message in progress (an XRC
	 * target's: from the SRQ the message named, completing there) */
	if (rc->rwqe_have) {
		wc.wr_id = rc->rwqe.wr_id;
		srn_cq_push(rc->xrc ? rc->rwqe_cq : qp->recv_cq, &wc, false);
		rc->rwqe_have = false;
	}
	/* an SRQ's WQEs are other QPs' too: they stay.  At most a ring's
	 * worth: head and tail are words a same-host peer can write. */
	if (!qp->srq && qp->rqs) {
		struct srn_recv_wqe r;

		for (uint32_t n = 0; n < qp->rq.max_wr &&
				     srn_rq_ring_take(qp->rqs, qp->rq.max_wr, &r) == 0; n++) {
			wc.wr_id = r.wr_id;
			srn_cq_push(qp->recv_cq, &wc, false);
		}
	}
	rc->in_msg = RC_MSG_NONE;
}

static void post_qp_event(struct srn_qp *qp, enum ibv_event_type type)
{
	struct ibv_async_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.element.qp = &qp->ex.qp_base;
	ev.event_type = type;
	srn_async_post_counted(qp->ctx, &ev, &qp->events_reported);
}

void rc_qp_error(struct srn_rc_state *rc, int ev_type)
{
	struct srn_qp *qp = rc->qp;
	/* not the QP's state: modify_qp has already set it to ERR when it
	 * calls us */
	bool was_err = rc->errored;

	/* verbs keeps the state in both places (ibv_query_qp reads the
	 * ibv_qp's own field) */
	qp->a.attr.qp_state = IBV_QPS_ERR;
	qp->a.attr.cur_qp_state = IBV_QPS_ERR;
	qp->ex.qp_base.state = IBV_QPS_ERR;
	rc->errored = true;
	requester_win_sync(rc); /* what it had in flight is given up */
	direct_publish(rc); /* same-host peers stop executing on it */
	rc_flush_sq(rc);
	rc_flush_rq(rc);
	if (ev_type >= 0 && !was_err)
		post_qp_event(qp, (enum ibv_event_type)ev_type);
	/* IBTA 11.6.3.1 (o11-5.2.5): a QP on an SRQ that enters the error
	 * state reports that no further WQE will be taken for it. */
	if (qp->srq && !was_err)
		post_qp_event(qp, IBV_EVENT_QP_LAST_WQE_REACHED);
}
