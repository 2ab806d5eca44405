/* The data-path slots of the context's ops table: what the inline
 * functions of <infiniband/verbs.h> (ibv_post_send, ibv_poll_cq,
 * ibv_req_notify_cq, ibv_create_cq_ex, ibv_create_qp_ex) call. */
#include "verbs/datapath.h"
#include "verbs/mw.h"

void srn_ops_init_datapath(struct verbs_context *vctx)
{
	struct ibv_context_ops *ops = &vctx->context.ops;

	ops->poll_cq = srn_poll_cq;
	ops->req_notify_cq = srn_req_notify_cq;
	ops->post_send = srn_post_send;
	ops->post_recv = srn_post_recv;
	ops->alloc_mw = srn_alloc_mw; /* memory windows: verbs/mw.c */
	ops->bind_mw = srn_bind_mw;
	ops->dealloc_mw = srn_dealloc_mw;
	vctx->create_cq_ex = srn_create_cq_ex;
	vctx->create_qp_ex = srn_create_qp_ex;
	srn_ops_init_srq(vctx); /* post_srq_recv, create_srq_ex: verbs/srq.c */
}
