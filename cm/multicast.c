/* rdma_cm multicast over RoCEv2: an IPv4 group address maps to the GID
 * ::ffff:a.b.c.d (what the kernel's rdma_cm uses for RoCEv2), the id's UD
 * QP attaches to it (verbs ibv_attach_mcast; the transport joins the IP
 * group) and MULTICAST_JOIN reports the AH attributes, QPN 0xFFFFFF and
 * the Q_Key to send to the group with.  There is no SA: the join is
 * local, so the event is queued at once.  -1 + errno, librdmacm's
 * convention.  IPv6 groups: EAFNOSUPPORT (the CM here is IPv4 only). */
#include <errno.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <string.h>

#include "cm/conn.h"
#include "verbs/export.h"

#define CM_MCAST_QPN 0xffffffu

/* Groups joined by ids of this process (cm_lock). */
struct cm_mc {
	struct cm_mc *next;
	struct cm_id *c;
	union ibv_gid mgid;
	bool attached;               /* the id's QP is attached */
};

static struct cm_mc *cm_mcs;

static int mc_gid(const struct sockaddr *addr, union ibv_gid *g)
{
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)addr;
	const uint8_t *ip = (const uint8_t *)&s4->sin_addr;

	if (!addr)
		return EINVAL;
	if (addr->sa_family != AF_INET)
		return EAFNOSUPPORT;
	if ((ip[0] & 0xf0) != 0xe0)
		return EINVAL; /* not a multicast address */
	memset(g, 0, sizeof(*g));
	g->raw[10] = g->raw[11] = 0xff;
	memcpy(g->raw + 12, ip, 4);
	return 0;
}

static struct cm_mc **mc_find(struct cm_id *c, const union ibv_gid *g)
{
	struct cm_mc **p;

	for (p = &cm_mcs; *p; p = &(*p)->next)
		if ((*p)->c == c && !memcmp(&(*p)->mgid, g, sizeof(*g)))
			return p;
	return NULL;
}

static int mc_join(struct rdma_cm_id *id, const struct sockaddr *addr, bool send_only,
		   void *context)
{
	struct cm_id *c;
	struct cm_event *e;
	struct cm_mc *m;
	union ibv_gid g;
	int err;

	if (!id) {
		errno = EINVAL;
		return -1;
	}
	c = cm_id(id);
	err = mc_gid(addr, &g);
	if (!err && !id->verbs)
		err = EINVAL; /* not bound to a device yet */
	if (!err && id->qp && id->qp->qp_type != IBV_QPT_UD)
		err = EINVAL;
	if (err) {
		errno = err;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (mc_find(c, &g)) {
		pthread_mutex_unlock(&cm_lock);
		errno = EADDRINUSE;
		return -1;
	}
	m = calloc(1, sizeof(*m));
	e = m ? cm_event_new(c, RDMA_CM_EVENT_MULTICAST_JOIN, 0) : NULL;
	if (!e) {
		free(m);
		pthread_mutex_unlock(&cm_lock);
		errno = ENOMEM;
		return -1;
	}
	m->c = c;
	m->mgid = g;
	if (id->qp && !send_only) {
		err = ibv_attach_mcast(id->qp, &g, 0);
		if (err) {
			free(m);
			free(e);
			pthread_mutex_unlock(&cm_lock);
			errno = err;
			return -1;
		}
		m->attached = true;
	}
	m->next = cm_mcs;
	cm_mcs = m;
	e->ev.param.ud.private_data = context; /* librdmacm hands back the context here */
	e->ev.param.ud.qp_num = CM_MCAST_QPN;
	e->ev.param.ud.qkey = RDMA_UDP_QKEY;
	e->ev.param.ud.ah_attr.is_global = 1;
	e->ev.param.ud.ah_attr.port_num = id->port_num ? id->port_num : 1;
	e->ev.param.ud.ah_attr.grh.dgid = g;
	e->ev.param.ud.ah_attr.grh.sgid_index = 0;
	e->ev.param.ud.ah_attr.grh.hop_limit = 64;
	e->ev.param.ud.ah_attr.grh.traffic_class = c->tos;
	cm_post(c, e);
	pthread_mutex_unlock(&cm_lock);
	return c->sync ? cm_sync_complete(c, RDMA_CM_EVENT_MULTICAST_JOIN) : 0;
}

SRN_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
				   void *context)
{
	return mc_join(id, addr, false, context);
}

SRN_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id,
				      struct rdma_cm_join_mc_attr_ex *attr,
				      void *context)
{
	if (!id || !attr || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
	    (attr->comp_mask & ~(uint32_t)(RDMA_CM_JOIN_MC_ATTR_ADDRESS |
					   RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS))) {
		errno = EINVAL;
		return -1;
	}
	if ((attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) &&
	    attr->join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
	    attr->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
		errno = EINVAL;
		return -1;
	}
	return mc_join(id, attr->addr,
		       (attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) &&
		       attr->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, context);
}

SRN_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_mc **p, *m;
	union ibv_gid g;
	int err;

	if (!id) {
		errno = EINVAL;
		return -1;
	}
	err = mc_gid(addr, &g);
	if (err) {
		errno = err == EAFNOSUPPORT ? EADDRNOTAVAIL : err;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	p = mc_find(cm_id(id), &g);
	if (!p) {
		pthread_mutex_unlock(&cm_lock);
		errno = EADDRNOTAVAIL;
		return -1;
	}
	m = *p;
	*p = m->next;
	pthread_mutex_unlock(&cm_lock);
	/* the QP may be gone already (destroying it detached it) */
	if (m->attached && id->qp)
		ibv_detach_mcast(id->qp, &g, 0);
	free(m);
	return 0;
}
