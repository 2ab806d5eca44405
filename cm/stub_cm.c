/* Weak "not supported" defaults (see verbs/stub.h) for the connection
 * manager, until the real CM lands (issue 5).  Every int call follows
 * librdmacm's convention: 0 on success, -1 with errno on failure; pointer
 * results are NULL with errno; void calls do nothing (nothing can have
 * been created). */
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "verbs/stub.h"

/* Stubs accept and ignore every argument. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define CM_UNSUPPORTED SRN_STUB_MINUS1(EOPNOTSUPP)

/* ---- ids and events ---------------------------------------------------- */

SRN_STUB int rdma_create_id(struct rdma_event_channel *channel,
			    struct rdma_cm_id **id, void *context,
			    enum rdma_port_space ps)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_destroy_id(struct rdma_cm_id *id)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_migrate_id(struct rdma_cm_id *id,
			     struct rdma_event_channel *channel)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_get_cm_event(struct rdma_event_channel *channel,
			       struct rdma_cm_event **event)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
			     void *optval, size_t optlen)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	CM_UNSUPPORTED;
}

/* No id exists, so there is no port: 0 as for an unbound id. */
SRN_STUB __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return 0;
}

SRN_STUB __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return 0;
}

/* ---- addresses and routes ---------------------------------------------- */

SRN_STUB int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
			       struct sockaddr *dst_addr, int timeout_ms)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_getaddrinfo(const char *node, const char *service,
			      const struct rdma_addrinfo *hints,
			      struct rdma_addrinfo **res)
{
	CM_UNSUPPORTED;
}

SRN_STUB void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	/* The stub rdma_getaddrinfo never allocates. */
}

/* ---- connections ------------------------------------------------------- */

SRN_STUB int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_establish(struct rdma_cm_id *id)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			 uint8_t private_data_len)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			     uint8_t private_data_len)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_disconnect(struct rdma_cm_id *id)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
			       int *qp_attr_mask)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	CM_UNSUPPORTED;
}

/* ---- endpoints, QPs and SRQs on an id ---------------------------------- */

SRN_STUB int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
			    struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	CM_UNSUPPORTED;
}

SRN_STUB void rdma_destroy_ep(struct rdma_cm_id *id)
{
}

SRN_STUB int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			    struct ibv_qp_init_attr *qp_init_attr)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_create_qp_ex(struct rdma_cm_id *id,
			       struct ibv_qp_init_attr_ex *qp_init_attr)
{
	CM_UNSUPPORTED;
}

SRN_STUB void rdma_destroy_qp(struct rdma_cm_id *id)
{
}

SRN_STUB int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			     struct ibv_srq_init_attr *attr)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_create_srq_ex(struct rdma_cm_id *id,
				struct ibv_srq_init_attr_ex *attr)
{
	CM_UNSUPPORTED;
}

SRN_STUB void rdma_destroy_srq(struct rdma_cm_id *id)
{
}

/* ---- multicast --------------------------------------------------------- */

SRN_STUB int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
				 void *context)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_join_multicast_ex(struct rdma_cm_id *id,
				    struct rdma_cm_join_mc_attr_ex *mc_join_attr,
				    void *context)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	CM_UNSUPPORTED;
}
