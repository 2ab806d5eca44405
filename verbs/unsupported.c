/* The "not supported" ops table: srn_ops_init_unsupported() points every
 * function slot of a verbs_context (and of its ibv_context_ops) at a stub
 * that fails by the slot's documented convention.  srn_open_device()
 * calls it first and each area then overwrites the slots it implements,
 * so the header's inline dispatchers (ibv_post_send, ibv_poll_cq,
 * ibv_close_xrcd, ...) never jump through NULL.
 *
 * The header's inline wrappers fall back to a legacy path on EOPNOTSUPP
 * where rdma-core defines one (ibv_query_device_ex -> ibv_query_device),
 * so returning EOPNOTSUPP here keeps those fallbacks working.
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>

#include "verbs/srn.h"

/* Layout facts this file and srn.h rely on (pinned against the header). */
static_assert(offsetof(struct verbs_context, context) + sizeof(struct ibv_context) ==
	      sizeof(struct verbs_context),
	      "ibv_context must be the last member of verbs_context");
static_assert(offsetof(struct verbs_context, sz) + sizeof(size_t) ==
	      offsetof(struct verbs_context, context),
	      "sz must sit immediately before the ibv_context");
static_assert(offsetof(struct ibv_context, ops) == sizeof(void *),
	      "ibv_context_ops follows the device pointer");
static_assert(offsetof(struct srn_context, vctx) == 0,
	      "srn_context starts with its verbs_context");

/* Stubs ignore their arguments by definition. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* ---- struct ibv_context_ops -------------------------------------------- */

static int uns_compat_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	return EOPNOTSUPP;
}

static int uns_compat_query_port(struct ibv_context *c, uint8_t port,
				 struct _compat_ibv_port_attr *a)
{
	return EOPNOTSUPP;
}

/* The _compat_* slots of ibv_context_ops are unused since rdma-core v18;
 * nothing calls them, but a slot that is never NULL costs nothing. */
static void *uns_compat(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static struct ibv_mw *uns_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int uns_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b)
{
	return EOPNOTSUPP;
}

static int uns_dealloc_mw(struct ibv_mw *mw)
{
	return EOPNOTSUPP;
}

/* ibv_poll_cq: negative on failure. */
static int uns_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	errno = EOPNOTSUPP;
	return -EOPNOTSUPP;
}

static int uns_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return EOPNOTSUPP;
}

/* Post calls: errno value returned, *bad_wr = the first WR not posted. */
static int uns_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr)
{
	if (bad_wr)
		*bad_wr = wr;
	return EOPNOTSUPP;
}

static int uns_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr)
{
	if (bad_wr)
		*bad_wr = wr;
	return EOPNOTSUPP;
}

static int uns_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr)
{
	if (bad_wr)
		*bad_wr = wr;
	return EOPNOTSUPP;
}

static void ops_init_unsupported(struct ibv_context_ops *o)
{
	o->_compat_query_device = uns_compat_query_device;
	o->_compat_query_port = uns_compat_query_port;
	o->_compat_alloc_pd = uns_compat;
	o->_compat_dealloc_pd = uns_compat;
	o->_compat_reg_mr = uns_compat;
	o->_compat_rereg_mr = uns_compat;
	o->_compat_dereg_mr = uns_compat;
	o->alloc_mw = uns_alloc_mw;
	o->bind_mw = uns_bind_mw;
	o->dealloc_mw = uns_dealloc_mw;
	o->_compat_create_cq = uns_compat;
	o->poll_cq = uns_poll_cq;
	o->req_notify_cq = uns_req_notify_cq;
	o->_compat_cq_event = uns_compat;
	o->_compat_resize_cq = uns_compat;
	o->_compat_destroy_cq = uns_compat;
	o->_compat_create_srq = uns_compat;
	o->_compat_modify_srq = uns_compat;
	o->_compat_query_srq = uns_compat;
	o->_compat_destroy_srq = uns_compat;
	o->post_srq_recv = uns_post_srq_recv;
	o->_compat_create_qp = uns_compat;
	o->_compat_query_qp = uns_compat;
	o->_compat_modify_qp = uns_compat;
	o->_compat_destroy_qp = uns_compat;
	o->post_send = uns_post_send;
	o->post_recv = uns_post_recv;
	o->_compat_create_ah = uns_compat;
	o->_compat_destroy_ah = uns_compat;
	o->_compat_attach_mcast = uns_compat;
	o->_compat_detach_mcast = uns_compat;
	o->_compat_async_event = uns_compat;
}

/* ---- struct verbs_context (extended ops) ------------------------------- */

static int uns_query_port(struct ibv_context *c, uint8_t port,
			  struct ibv_port_attr *a, size_t len)
{
	return EOPNOTSUPP;
}

static int uns_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
			 uint32_t flags, struct ibv_sge *sg, uint32_t n)
{
	return EOPNOTSUPP;
}

static struct ibv_mr *uns_alloc_null_mr(struct ibv_pd *pd)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int uns_read_counters(struct ibv_counters *c, uint64_t *v, uint32_t n,
			     uint32_t flags)
{
	return EOPNOTSUPP;
}

static int uns_attach_counters_point_flow(struct ibv_counters *c,
					  struct ibv_counter_attach_attr *a,
					  struct ibv_flow *f)
{
	return EOPNOTSUPP;
}

static struct ibv_counters *uns_create_counters(struct ibv_context *c,
						struct ibv_counters_init_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int uns_destroy_counters(struct ibv_counters *c)
{
	return EOPNOTSUPP;
}

static struct ibv_mr *uns_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm,
				    uint64_t off, size_t len, unsigned int access)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static struct ibv_dm *uns_alloc_dm(struct ibv_context *c, struct ibv_alloc_dm_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int uns_free_dm(struct ibv_dm *dm)
{
	return EOPNOTSUPP;
}

static int uns_modify_flow_action_esp(struct ibv_flow_action *f,
				      struct ibv_flow_action_esp_attr *a)
{
	return EOPNOTSUPP;
}

static int uns_destroy_flow_action(struct ibv_flow_action *f)
{
	return EOPNOTSUPP;
}

static struct ibv_flow_action *uns_create_flow_action_esp(struct ibv_context *c,
							  struct ibv_flow_action_esp_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int uns_modify_qp_rate_limit(struct ibv_qp *qp, struct ibv_qp_rate_limit_attr *a)
{
	return EOPNOTSUPP;
}

static struct ibv_pd *uns_alloc_parent_domain(struct ibv_context *c,
					      struct ibv_parent_domain_init_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int uns_dealloc_td(struct ibv_td *td)
{
	return EOPNOTSUPP;
}

static struct ibv_td *uns_alloc_td(struct ibv_context *c, struct ibv_td_init_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int uns_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *a)
{
	return EOPNOTSUPP;
}

static int uns_post_srq_ops(struct ibv_srq *srq, struct ibv_ops_wr *op,
			    struct ibv_ops_wr **bad_op)
{
	if (bad_op)
		*bad_op = op;
	return EOPNOTSUPP;
}

static int uns_destroy_rwq_ind_table(struct ibv_rwq_ind_table *t)
{
	return EOPNOTSUPP;
}

static struct ibv_rwq_ind_table *uns_create_rwq_ind_table(struct ibv_context *c,
							  struct ibv_rwq_ind_table_init_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int uns_destroy_wq(struct ibv_wq *wq)
{
	return EOPNOTSUPP;
}

static int uns_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *a)
{
	return EOPNOTSUPP;
}

static struct ibv_wq *uns_create_wq(struct ibv_context *c, struct ibv_wq_init_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int uns_query_rt_values(struct ibv_context *c, struct ibv_values_ex *v)
{
	return EOPNOTSUPP;
}

static struct ibv_cq_ex *uns_create_cq_ex(struct ibv_context *c,
					  struct ibv_cq_init_attr_ex *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* EOPNOTSUPP makes ibv_query_device_ex() fall back to ibv_query_device(). */
static int uns_query_device_ex(struct ibv_context *c,
			       const struct ibv_query_device_ex_input *in,
			       struct ibv_device_attr_ex *a, size_t len)
{
	return EOPNOTSUPP;
}

static int uns_destroy_flow(struct ibv_flow *f)
{
	return EOPNOTSUPP;
}

static void uns_placeholder(void)
{
	/* Reserved slot in rdma-core's ABI; never called. */
}

static struct ibv_flow *uns_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static struct ibv_qp *uns_open_qp(struct ibv_context *c, struct ibv_qp_open_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static struct ibv_qp *uns_create_qp_ex(struct ibv_context *c,
				       struct ibv_qp_init_attr_ex *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int uns_get_srq_num(struct ibv_srq *srq, uint32_t *n)
{
	return EOPNOTSUPP;
}

static struct ibv_srq *uns_create_srq_ex(struct ibv_context *c,
					 struct ibv_srq_init_attr_ex *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static struct ibv_xrcd *uns_open_xrcd(struct ibv_context *c,
				      struct ibv_xrcd_init_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int uns_close_xrcd(struct ibv_xrcd *x)
{
	return EOPNOTSUPP;
}

void srn_ops_init_unsupported(struct verbs_context *v)
{
	/* What makes the header treat this as an extended context
	 * (verbs_get_ctx, verbs_get_ctx_op): the marker and the size. */
	v->context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	v->sz = sizeof(*v);

	ops_init_unsupported(&v->context.ops);

	v->query_port = uns_query_port;
	v->advise_mr = uns_advise_mr;
	v->alloc_null_mr = uns_alloc_null_mr;
	v->read_counters = uns_read_counters;
	v->attach_counters_point_flow = uns_attach_counters_point_flow;
	v->create_counters = uns_create_counters;
	v->destroy_counters = uns_destroy_counters;
	v->reg_dm_mr = uns_reg_dm_mr;
	v->alloc_dm = uns_alloc_dm;
	v->free_dm = uns_free_dm;
	v->modify_flow_action_esp = uns_modify_flow_action_esp;
	v->destroy_flow_action = uns_destroy_flow_action;
	v->create_flow_action_esp = uns_create_flow_action_esp;
	v->modify_qp_rate_limit = uns_modify_qp_rate_limit;
	v->alloc_parent_domain = uns_alloc_parent_domain;
	v->dealloc_td = uns_dealloc_td;
	v->alloc_td = uns_alloc_td;
	v->modify_cq = uns_modify_cq;
	v->post_srq_ops = uns_post_srq_ops;
	v->destroy_rwq_ind_table = uns_destroy_rwq_ind_table;
	v->create_rwq_ind_table = uns_create_rwq_ind_table;
	v->destroy_wq = uns_destroy_wq;
	v->modify_wq = uns_modify_wq;
	v->create_wq = uns_create_wq;
	v->query_rt_values = uns_query_rt_values;
	v->create_cq_ex = uns_create_cq_ex;
	/* v->priv: rdma-core's private data pointer, not an op; left as is. */
	v->query_device_ex = uns_query_device_ex;
	v->ibv_destroy_flow = uns_destroy_flow;
	v->ABI_placeholder2 = uns_placeholder;
	v->ibv_create_flow = uns_create_flow;
	v->ABI_placeholder1 = uns_placeholder;
	v->open_qp = uns_open_qp;
	v->create_qp_ex = uns_create_qp_ex;
	v->get_srq_num = uns_get_srq_num;
	v->create_srq_ex = uns_create_srq_ex;
	v->open_xrcd = uns_open_xrcd;
	v->close_xrcd = uns_close_xrcd;
}
