/* SIDR (IBTA 12.11): RDMA_PS_UDP ids find the peer's UD QP number and
 * Q_Key with SIDR_REQ / SIDR_REP instead of a connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm/conn.h"
#include "verbs/export.h"

/* ---- SIDR (RDMA_PS_UDP): service id resolution for UD QPs ---------------- */

int cm_sidr_connect(struct cm_id *c, const struct rdma_conn_param *p)
{
	struct wire_cma_hdr h;
	struct wire_cm_msg m;
	uint16_t lport;

	if (p && p->private_data_len > CM_SIDR_REQ_PDATA)
		return EINVAL;
	c->local_comm_id = cm_new_comm_id();
	c->tid = (uint64_t)cm_rand32() << 32 | cm_rand32();
	memcpy(c->peer.ip, cm_dst_ip(c), 16);
	c->peer.scope = c->dscope;
	c->peer_local = cm_ip_is_local(c->peer.ip);
	lport = c->peer_local ?
		cm_dir_lookup(cm_ps_code(c->id.ps), cm_dst_ip(c), cm_dst_port(c)) : CM_ROCE_PORT;
	cm_msg_init(&m, WIRE_CM_ATTR_SIDR_REQ, c->tid);
	m.sidr_req.request_id = c->local_comm_id;
	m.sidr_req.pkey = 0xffff;
	m.sidr_req.service_id = wire_cm_service_id(cm_ps_code(c->id.ps), cm_dst_port(c));
	wire_cma_hdr_from_sockaddr(&h, &c->id.route.addr.src_addr, &c->id.route.addr.dst_addr);
	wire_cma_hdr_encode(m.sidr_req.private_data, &h);
	if (p && p->private_data_len)
		memcpy(m.sidr_req.private_data + WIRE_CMA_HDR_LEN, p->private_data,
		       p->private_data_len);
	c->state = CM_SIDR_REQ_SENT;
	if (!lport) {
		struct cm_event *e = cm_event_new(c, RDMA_CM_EVENT_UNREACHABLE, -ECONNREFUSED);

		c->state = CM_TIMEWAIT;
		cm_post(c, e);
		return 0;
	}
	c->peer.port = lport;
	cm_send_tracked(c, &m, CM_RESPONSE_TIMEOUT);
	return 0;
}

static void ud_param(struct cm_id *c, struct cm_event *e, uint32_t qpn, uint32_t qkey)
{
	struct ibv_ah_attr *ah = &e->ev.param.ud.ah_attr;

	e->ev.param.ud.qp_num = qpn;
	e->ev.param.ud.qkey = qkey;
	ah->is_global = 1;
	ah->port_num = 1;
	ah->grh.dgid = c->id.route.addr.addr.ibaddr.dgid;
	ah->grh.sgid_index = cm_gid_index(c->id.verbs, &c->id.route.addr.addr.ibaddr.sgid);
	ah->grh.hop_limit = 64;
	ah->grh.traffic_class = c->tos;
	ah->grh.flow_label = wire_cm_flow_label(cm_src_port(c), cm_dst_port(c));
}

void cm_sidr_req_in(const struct wire_cm_msg *m, const struct cm_peer *from,
			const uint8_t to_ip[16])
{
	const struct wire_cm_sidr_req *r = &m->sidr_req;
	struct wire_cma_hdr h;
	struct wire_cm_msg rep;
	struct cm_event *e;
	struct cm_id *l, *c;
	uint8_t src[16], dst[16], out[WIRE_MAD_LEN];

	for (c = cm_ids; c; c = c->next)
		if (c->passive && c->remote_comm_id == r->request_id &&
		    !memcmp(c->peer.ip, from->ip, 16) && c->peer.port == from->port)
			return; /* repeated: the answer follows when accepted */
	cm_msg_init(&rep, WIRE_CM_ATTR_SIDR_REP, m->hdr.tid);
	rep.sidr_rep.request_id = r->request_id;
	rep.sidr_rep.service_id = r->service_id;
	rep.sidr_rep.status = WIRE_CM_SIDR_UNSUPPORTED;
	if (!wire_cm_service_id_is_cma(r->service_id) ||
	    wire_cma_hdr_decode(r->private_data, sizeof(r->private_data), &h))
		goto refuse;
	cm_cma_hdr_ips(&h, src, dst);
	l = cm_find_listener(wire_cm_service_id_ps(r->service_id),
			  wire_cm_service_id_port(r->service_id), dst, true);
	if (!l && cm_req_hold(m, from, to_ip, wire_cm_service_id_ps(r->service_id),
			      wire_cm_service_id_port(r->service_id), dst, true))
		return; /* rdma_listen may come yet */
	if (!l)
		goto refuse;
	c = cm_id_alloc(l->sync ? NULL : l->chan, l->id.context, l->id.ps, l->sync);
	if (!c) {
		rep.sidr_rep.status = WIRE_CM_SIDR_REJECT;
		goto refuse;
	}
	c->listener = l;
	c->passive = true;
	cm_id_set_src(c, dst, wire_cm_service_id_port(r->service_id),
		      cm_ip_is_linklocal(dst) ? from->scope : 0);
	cm_id_set_dst(c, src, h.src_port, cm_ip_is_linklocal(src) ? from->scope : 0);
	cm_id_set_device(c, l->id.verbs ? l->id.verbs : cm_device_for_ip(dst));
	cm_id_fill_gids(c);
	cm_fill_path(c, 0);
	c->remote_comm_id = r->request_id;
	c->tid = m->hdr.tid;
	c->peer = *from;
	e = cm_event_connect_request(c, l, r->private_data + WIRE_CMA_HDR_LEN,
				     CM_SIDR_REQ_PDATA);
	if (!e)
		return;
	e->ev.param.ud.private_data = e->pdata;
	e->ev.param.ud.private_data_len = CM_SIDR_REQ_PDATA;
	cm_event_queue(l->chan, e);
	return;
refuse:
	if (wire_cm_encode(&rep, out) == WIRE_MAD_LEN)
		cm_mad_send(from, to_ip, out);
}

int cm_sidr_accept(struct cm_id *c, const struct rdma_conn_param *p)
{
	struct wire_cm_msg m;
	uint8_t out[WIRE_MAD_LEN];

	if (p && p->private_data_len > CM_SIDR_REP_PDATA)
		return EINVAL;
	cm_msg_init(&m, WIRE_CM_ATTR_SIDR_REP, c->tid);
	m.sidr_rep.request_id = c->remote_comm_id;
	m.sidr_rep.status = WIRE_CM_SIDR_SUCCESS;
	m.sidr_rep.qpn = c->id.qp ? c->id.qp->qp_num : (p ? p->qp_num & 0xffffff : 0);
	m.sidr_rep.service_id = wire_cm_service_id(cm_ps_code(c->id.ps), cm_src_port(c));
	m.sidr_rep.qkey = RDMA_UDP_QKEY;
	if (p && p->private_data_len)
		memcpy(m.sidr_rep.private_data, p->private_data, p->private_data_len);
	cm_send_msg(c, &m, out);
	cm_leave_backlog(c);
	c->state = CM_ESTABLISHED;
	return 0;
}

void cm_sidr_rep_in(const struct wire_cm_msg *m)
{
	const struct wire_cm_sidr_rep *r = &m->sidr_rep;
	struct cm_id *c = cm_find_by_local(r->request_id);
	struct cm_event *e;

	if (!c || c->state != CM_SIDR_REQ_SENT)
		return;
	c->mad_pending = false;
	if (r->status != WIRE_CM_SIDR_SUCCESS) {
		e = cm_event_new(c, RDMA_CM_EVENT_UNREACHABLE, -ECONNREFUSED);
		if (r->status == WIRE_CM_SIDR_REJECT && e) {
			e->ev.event = RDMA_CM_EVENT_REJECTED;
			e->ev.status = WIRE_CM_REJ_CONSUMER_DEFINED;
		}
		c->state = CM_TIMEWAIT;
	} else {
		e = cm_event_new(c, RDMA_CM_EVENT_ESTABLISHED, 0);
		c->remote_qpn = r->qpn;
		c->remote_qkey = r->qkey;
		c->state = CM_ESTABLISHED;
		if (e)
			ud_param(c, e, r->qpn, r->qkey);
	}
	if (e) {
		memcpy(e->pdata, r->private_data, CM_SIDR_REP_PDATA);
		e->ev.param.ud.private_data = e->pdata;
		e->ev.param.ud.private_data_len = CM_SIDR_REP_PDATA;
	}
	cm_post(c, e);
}
