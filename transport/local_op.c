/* transport/local_op: the send-queue operations that stay in this NIC
 * (BIND_MW, LOCAL_INV).  They run in queue order: only once every WQE
 * before them has completed, so a bind or invalidation never overtakes
 * an access posted earlier, and their completion keeps its place. */
#include "transport/rc.h"
#include "verbs/mw.h"
#include "verbs/shared_rings.h"

bool rc_is_local_op(const struct srn_send_wqe *w)
{
	return w->opcode == IBV_WR_BIND_MW || w->opcode == IBV_WR_LOCAL_INV;
}

int rc_local_op_run(struct srn_rc_state *rc, struct srn_send_wqe *w)
{
	struct srn_qp *qp = rc->qp;
	enum ibv_wc_status st;

	if (qp->sq.head != qp->sq.next)
		return 0; /* earlier WQEs still outstanding */
	st = w->opcode == IBV_WR_BIND_MW ? srn_mw_bind_exec(qp, w)
					 : srn_mw_local_inv(qp, w->rkey);
	if (st != IBV_WC_SUCCESS) {
		/* as rxe: the WQE fails and the QP goes to error */
		completer_fail(rc, st);
		return -1;
	}
	if (qp->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED)) {
		struct ibv_wc wc = {
			.wr_id = w->wr_id,
			.status = IBV_WC_SUCCESS,
			.opcode = rc_wc_opcode(w->opcode),
			.qp_num = rc->qpn,
		};

		srn_cq_push(qp->send_cq, &wc, false);
	}
	w->state = WQE_NEW;
	qp->sq.head++;
	qp->sq.next++;
	return 1;
}
