/* rdma_getaddrinfo and the synchronous endpoint helpers rdma_create_ep /
 * rdma_destroy_ep (rdma_cm(7) "synchronous operation"). */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <rdma/rdma_verbs.h>
#include <string.h>

#include "cm/cm.h"
#include "verbs/export.h"

static struct sockaddr *dup_addr(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr *d = malloc(len);

	if (d)
		memcpy(d, sa, len);
	return d;
}

SRN_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

/* The getaddrinfo(3) hints an rdma_addrinfo's hints stand for; an
 * unspecified family stays unspecified (IPv4 or IPv6), as in librdmacm. */
static void to_ai_hints(const struct rdma_addrinfo *hints, struct addrinfo *h)
{
	memset(h, 0, sizeof(*h));
	h->ai_family = hints ? hints->ai_family : AF_UNSPEC;
	h->ai_socktype = hints && hints->ai_qp_type == IBV_QPT_UD ? SOCK_DGRAM : SOCK_STREAM;
	if (hints && (hints->ai_flags & RAI_NUMERICHOST))
		h->ai_flags |= AI_NUMERICHOST;
	if (hints && (hints->ai_flags & RAI_PASSIVE))
		h->ai_flags |= AI_PASSIVE;
}

/* node or service named: the first address getaddrinfo gives, as the
 * source of a passive endpoint or the destination of an active one. */
static int resolve_name(const char *node, const char *service,
			const struct rdma_addrinfo *hints, struct rdma_addrinfo *r)
{
	struct addrinfo h, *ai = NULL;
	struct sockaddr **addr;
	socklen_t *len;
	int ret;

	to_ai_hints(hints, &h);
	if (h.ai_family == AF_IB) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	ret = getaddrinfo(node, service, &h, &ai);
	if (ret)
		return ret;
	r->ai_flags = (h.ai_flags & AI_PASSIVE) ? RAI_PASSIVE : 0;
	r->ai_family = ai->ai_family;
	r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type :
			(ai->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD : IBV_QPT_RC);
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space :
			   (r->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP);
	addr = r->ai_flags ? &r->ai_src_addr : &r->ai_dst_addr;
	len = r->ai_flags ? &r->ai_src_len : &r->ai_dst_len;
	*addr = dup_addr(ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	if (!*addr) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* Returns 0, a getaddrinfo EAI_* code (as rdma-core passes them on), or
 * -1 with errno.  With neither node nor service the hints are the answer:
 * their flags, family, QP type, port space and addresses (libfabric's verbs
 * provider asks so with the destination it learnt from its peer). */
SRN_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				const struct rdma_addrinfo *hints,
				struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *r;
	int ret = 0;

	if (!res || (!node && !service && !hints)) {
		errno = EINVAL;
		return -1;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return -1;
	}
	if (node || service) {
		ret = resolve_name(node, service, hints, r);
	} else {
		r->ai_flags = hints->ai_flags;
		r->ai_family = hints->ai_family;
		r->ai_qp_type = hints->ai_qp_type;
		r->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len && hints->ai_dst_addr) {
			r->ai_dst_addr = dup_addr(hints->ai_dst_addr, hints->ai_dst_len);
			r->ai_dst_len = hints->ai_dst_len;
			if (!r->ai_dst_addr) {
				errno = ENOMEM;
				ret = -1;
			}
		}
	}
	if (!ret && !r->ai_src_len && hints && hints->ai_src_len && hints->ai_src_addr) {
		r->ai_src_addr = dup_addr(hints->ai_src_addr, hints->ai_src_len);
		r->ai_src_len = hints->ai_src_len;
		if (!r->ai_src_addr) {
			errno = ENOMEM;
			ret = -1;
		}
	}
	if (ret) {
		rdma_freeaddrinfo(r);
		return ret;
	}
	*res = r;
	return 0;
}

SRN_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
			      struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;
	struct cm_id *c;
	int err;

	if (!id || !res) {
		errno = EINVAL;
		return -1;
	}
	if (rdma_create_id(NULL, &cid, NULL, (enum rdma_port_space)res->ai_port_space))
		return -1;
	c = cm_id(cid);
	cid->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	if (pd)
		cid->pd = pd;
	if (qp_init_attr)
		qp_init_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	if (res->ai_flags & RAI_PASSIVE) {
		if (res->ai_src_addr && rdma_bind_addr(cid, res->ai_src_addr))
			goto fail;
		if (qp_init_attr) {
			/* rdma_get_request creates each connection's QP. */
			c->ep_qp_attr = malloc(sizeof(*qp_init_attr));
			if (!c->ep_qp_attr)
				goto fail;
			*c->ep_qp_attr = *qp_init_attr;
			c->ep_pd = pd;
		}
	} else {
		if (rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000) ||
		    rdma_resolve_route(cid, 2000))
			goto fail;
		if (qp_init_attr && rdma_create_qp(cid, pd, qp_init_attr))
			goto fail;
	}
	*id = cid;
	return 0;
fail:
	err = errno;
	rdma_destroy_id(cid);
	errno = err;
	return -1;
}

SRN_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}
