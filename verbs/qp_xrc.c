/* XRC QPs at creation and destruction (the rest of their life is a
 * connected QP's: verbs/qp.c, qp_state.c; the wire: transport/xrc.c).
 * An initiator (XRC_SEND) has a PD and a send CQ and no receive side; a
 * target (XRC_RECV) has only its domain: what it receives goes to the
 * XRC SRQ each request names. */
#include "verbs/datapath.h"

int srn_xrc_check_init_attr(struct ibv_context *context, const struct ibv_qp_init_attr_ex *a)
{
	const struct ibv_qp_cap *c = &a->cap;

	if (a->qp_type == IBV_QPT_XRC_RECV)
		return (a->comp_mask & IBV_QP_INIT_ATTR_XRCD) && a->xrcd &&
			       a->xrcd->context == context ? 0 : EINVAL;
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || a->pd->context != context)
		return EINVAL;
	if (!a->send_cq || a->send_cq->context != context)
		return EINVAL;
	if (c->max_send_wr > SRN_MAX_QP_WR || c->max_send_sge > SRN_MAX_SGE ||
	    c->max_inline_data > SRN_MAX_INLINE)
		return EINVAL;
	return 0;
}

bool srn_xrc_drop_open(struct srn_qp *qp)
{
	unsigned int n = atomic_load(&qp->xrc_opens);

	while (n && !atomic_compare_exchange_weak(&qp->xrc_opens, &n, n - 1))
		;
	return n != 0;
}
