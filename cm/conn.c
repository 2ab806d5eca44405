/* The IB CM protocol for rdma_cm connections (IBTA Vol 1 ch. 12):
 *
 *   active                         passive
 *   rdma_connect  -- REQ -->       CONNECT_REQUEST   (MRA if REQ repeats)
 *   CONNECT_RESPONSE / (QP: RTR, RTS)
 *                 <-- REP --       rdma_accept (QP: RTR, RTS)
 *   ESTABLISHED   -- RTU -->       ESTABLISHED
 *   rdma_disconnect -- DREQ -->    DISCONNECTED (QP: ERR)
 *   DISCONNECTED  <-- DREP --
 *
 * One transaction id covers REQ/REP/RTU; a DREQ picks a new one.  MADs that
 * expect an answer are retransmitted every CM response timeout (capped to
 * 1 s: loopback loses little) up to max CM retries; a peer CM agent on this
 * host that died is noticed at once from the directory, so a crashed peer
 * is a prompt UNREACHABLE / DISCONNECTED, never a hang.  Everything here
 * runs with cm_lock held.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "cm/conn.h"
#include "cm/devices.h"
#include "cm/iwarp_cm.h"
#include "verbs/export.h"

/* ---- listening --------------------------------------------------------- */

SRN_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cm_id *c = cm_id(id);
	int err = 0;

	if (!id) {
		errno = EINVAL;
		return -1;
	}
	/* A RoCE peer's REQ comes to this host's port 4791, which a verbs
	 * engine owns and hands on (transport/gsi_forward.h): a wildcard
	 * listener that opened no device yet opens them now, so an engine
	 * runs (each takes 4791 on its address if nobody has it). */
	{
		int n;

		(void)cm_devices(&n);
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state == CM_IDLE) {
		/* Listening unbound: the wildcard address, a free port. */
		struct sockaddr_in any = { .sin_family = AF_INET }; /* as Linux */

		err = cm_id_bind_locked(c, (struct sockaddr *)&any);
	}
	if (!err && c->state == CM_LISTEN) {
		c->backlog = backlog > 0 ? backlog : 1024;
		goto out;
	}
	if (!err && c->state != CM_BOUND)
		err = EINVAL;
	if (!err)
		err = -cm_dir_listen(c->dir_slot, cm_agent_port());
	if (!err) {
		c->state = CM_LISTEN;
		c->backlog = backlog > 0 ? backlog : 1024;
		err = cm_iw_listen(c); /* TCP too, for iWARP devices */
	}
	cm_dbg("listen id %p on port %u: %d\n", (void *)id, cm_src_port(c), err);
	if (!err)
		cm_req_hold_release();
out:
	pthread_mutex_unlock(&cm_lock);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

SRN_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cm_id *l = cm_id(listen);
	struct rdma_cm_event *ev;
	struct cm_id *c;

	if (!listen || !id || !l->sync) {
		errno = EINVAL;
		return -1;
	}
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	if (rdma_get_cm_event(listen->channel, &ev))
		return -1;
	if (ev->status) {
		errno = ev->status < 0 ? -ev->status : ev->status;
		rdma_ack_cm_event(ev);
		return -1;
	}
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		rdma_ack_cm_event(ev);
		errno = EINVAL;
		return -1;
	}
	c = cm_id(ev->id);
	if (l->ep_qp_attr) {
		struct ibv_qp_init_attr attr = *l->ep_qp_attr;

		if (rdma_create_qp(&c->id, l->ep_pd, &attr)) {
			int err = errno;

			rdma_ack_cm_event(ev);
			rdma_destroy_id(&c->id);
			errno = err;
			return -1;
		}
	}
	*id = &c->id;
	c->id.event = ev;
	return 0;
}

void cm_req_in(const struct wire_cm_msg *m, const struct cm_peer *from, const uint8_t to_ip[16])
{
	const struct wire_cm_req *r = &m->req;
	struct wire_cma_hdr h;
	struct cm_id *l, *c;
	struct cm_event *e;
	uint8_t dst[16], src[16];
	uint16_t ps, port;

	/* A repeated REQ: the answer was lost or the application is slow. */
	for (c = cm_ids; c; c = c->next) {
		if (c->remote_comm_id != r->local_comm_id || !c->passive ||
		    memcmp(c->peer.ip, from->ip, 16))
			continue;
		if (c->state == CM_REQ_RCVD) {
			struct wire_cm_msg mra;
			uint8_t out[WIRE_MAD_LEN];

			cm_msg_init(&mra, WIRE_CM_ATTR_MRA, c->tid);
			mra.mra.local_comm_id = c->local_comm_id;
			mra.mra.remote_comm_id = c->remote_comm_id;
			mra.mra.message_mraed = WIRE_CM_MSG_REQ;
			mra.mra.service_timeout = CM_MRA_SERVICE_TIMEOUT;
			cm_send_msg(c, &mra, out);
		} else if (c->state == CM_REP_SENT) {
			cm_mad_send(&c->peer, cm_src_ip(c), c->mad);
		}
		return;
	}
	if (!wire_cm_service_id_is_cma(r->service_id))
		goto bad_sid;
	ps = wire_cm_service_id_ps(r->service_id);
	port = wire_cm_service_id_port(r->service_id);
	if (wire_cma_hdr_decode(r->private_data, sizeof(r->private_data), &h))
		goto bad_sid;
	cm_cma_hdr_ips(&h, src, dst);
	l = cm_find_listener(ps, port, dst, false);
	if (!l && cm_req_hold(m, from, to_ip, ps, port, dst, false))
		return; /* rdma_listen may come yet */
	if (!l)
		goto bad_sid;
	if (l->pending >= l->backlog) {
		cm_rej_unknown(m, from, to_ip, r->local_comm_id, WIRE_CM_REJ_CONSUMER_DEFINED,
			    WIRE_CM_MSG_REQ);
		return;
	}
	c = cm_id_alloc(l->sync ? NULL : l->chan, l->id.context, l->id.ps, l->sync);
	if (!c) {
		cm_rej_unknown(m, from, to_ip, r->local_comm_id, WIRE_CM_REJ_NO_RESOURCES,
			    WIRE_CM_MSG_REQ);
		return;
	}
	c->listener = l;
	c->passive = true;
	/* (a link-local pair shares the link the REQ came over) */
	cm_id_set_src(c, dst, port, cm_ip_is_linklocal(dst) ? from->scope : 0);
	cm_id_set_dst(c, src, h.src_port, cm_ip_is_linklocal(src) ? from->scope : 0);
	c->id.pd = l->ep_pd;
	cm_id_set_device(c, l->id.verbs ? l->id.verbs : cm_device_for_ip(dst));
	cm_id_fill_gids(c);
	cm_fill_path(c, r->path_mtu);
	c->path.flow_label = htonl(r->primary_flow_label);
	c->path.traffic_class = r->primary_traffic_class;
	c->tos = r->primary_traffic_class;
	c->local_comm_id = cm_new_comm_id();
	c->remote_comm_id = r->local_comm_id;
	c->tid = m->hdr.tid;
	c->peer = *from;
	c->remote_qpn = r->local_qpn;
	c->sq_psn = r->starting_psn;
	c->rq_psn = cm_rand32() & 0xffffff;
	c->remote_resp_res = r->responder_resources;
	c->remote_init_depth = r->initiator_depth;
	/* Until rdma_accept says otherwise (rdma_init_qp_attr may ask). */
	c->responder_resources = r->initiator_depth;
	c->initiator_depth = r->responder_resources;
	c->retry_count = r->retry_count;
	c->rnr_retry_count = r->rnr_retry_count;
	c->srq = r->srq;
	c->peer_cm_timeout = r->remote_cm_response_timeout;
	c->ack_timeout = r->primary_local_ack_timeout;
	c->remote_ece.vendor_id = r->vendor_id;
	c->remote_ece.options = m->hdr.attr_mod;
	if (!c->id.verbs) {
		cm_send_rej(c, WIRE_CM_REJ_INVALID_GID, WIRE_CM_MSG_REQ, NULL, 0);
		cm_id_free_unreported(c); /* never handed out */
		return;
	}
	e = cm_event_connect_request(c, l, r->private_data + WIRE_CMA_HDR_LEN, CM_REQ_PDATA);
	if (!e)
		return;
	e->ev.param.conn.private_data = e->pdata;
	e->ev.param.conn.private_data_len = CM_REQ_PDATA;
	e->ev.param.conn.responder_resources = r->initiator_depth;
	e->ev.param.conn.initiator_depth = r->responder_resources;
	e->ev.param.conn.flow_control = r->end_to_end_flow_control;
	e->ev.param.conn.retry_count = r->retry_count;
	e->ev.param.conn.rnr_retry_count = r->rnr_retry_count;
	e->ev.param.conn.srq = r->srq;
	e->ev.param.conn.qp_num = r->local_qpn;
	cm_event_queue(l->chan, e);
	return;
bad_sid:
	cm_dbg("REQ for service 0x%llx: no listener\n", (unsigned long long)r->service_id);
	/* Nobody listens there (and the grace for one is over, or none was
	 * given): what Linux answers (status 8 at the peer). */
	cm_rej_unknown(m, from, to_ip, r->local_comm_id, WIRE_CM_REJ_INVALID_SERVICE_ID,
		    WIRE_CM_MSG_REQ);
}

/* ---- active side --------------------------------------------------------- */

static uint8_t dev_max_rd_atom(struct ibv_context *ctx, bool init)
{
	struct ibv_device_attr a;

	if (!ctx || ibv_query_device(ctx, &a))
		return 16;
	return (uint8_t)((init ? a.max_qp_init_rd_atom : a.max_qp_rd_atom) > 255 ? 255 :
			 (init ? a.max_qp_init_rd_atom : a.max_qp_rd_atom));
}

/* rdma-core: RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH mean "device max". */
static void take_depths(struct cm_id *c, const struct rdma_conn_param *p)
{
	uint8_t rmax = dev_max_rd_atom(c->id.verbs, false);
	uint8_t imax = dev_max_rd_atom(c->id.verbs, true);

	c->responder_resources = rmax;
	c->initiator_depth = imax;
	if (p && p->responder_resources != RDMA_MAX_RESP_RES)
		c->responder_resources = p->responder_resources < rmax ? p->responder_resources : rmax;
	if (p && p->initiator_depth != RDMA_MAX_INIT_DEPTH)
		c->initiator_depth = p->initiator_depth < imax ? p->initiator_depth : imax;
}

/* What rdma_connect and rdma_accept check before anything moves: private
 * data present if a length is given, the id in the state the call needs,
 * and (connected ids) the data within the message's limit; a UD id's SIDR
 * limits are sidr.c's.  cm_lock held; 0 or EINVAL. */
static int conn_call_check(const struct cm_id *c, enum cm_state want,
			   const struct rdma_conn_param *p, unsigned int max_pdata)
{
	if (p && p->private_data_len && !p->private_data)
		return EINVAL;
	if (c->state != want)
		return EINVAL;
	if (c->id.qp_type != IBV_QPT_UD && p && p->private_data_len > max_pdata)
		return EINVAL;
	return 0;
}

SRN_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct cm_id *c = cm_id(id);
	struct wire_cma_hdr h;
	struct wire_cm_msg m;
	struct wire_cm_req *r = &m.req;
	uint16_t lport;
	int err = 0;

	if (!id) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (cm_iw_id(c)) {
		err = cm_iw_connect(c, p);
		goto out;
	}
	err = conn_call_check(c, CM_ROUTE_RESOLVED, p, CM_REQ_PDATA);
	if (err)
		goto out;
	if (id->qp_type == IBV_QPT_UD) {
		err = cm_sidr_connect(c, p);
		goto out;
	}
	take_depths(c, p);
	c->retry_count = p ? (p->retry_count > 7 ? 7 : p->retry_count) : 7;
	c->rnr_retry_count = p ? (p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count) : 7;
	c->own_qp = id->qp != NULL;
	c->local_qpn = id->qp ? id->qp->qp_num : (p ? p->qp_num & 0xffffff : 0);
	c->srq = id->qp ? (id->qp->srq != NULL) : (p ? p->srq != 0 : 0);
	c->rq_psn = cm_rand32() & 0xffffff;
	c->local_comm_id = cm_new_comm_id();
	c->tid = (uint64_t)cm_rand32() << 32 | cm_rand32();
	/* Where the listener's agent is: the directory for this host,
	 * RoCE's UDP port for another. */
	memcpy(c->peer.ip, cm_dst_ip(c), 16);
	c->peer.scope = c->dscope;
	c->peer_local = cm_ip_is_local(c->peer.ip);
	lport = c->peer_local ? cm_dir_lookup(cm_ps_code(id->ps), cm_dst_ip(c), cm_dst_port(c)) :
				CM_ROCE_PORT;
	cm_msg_init(&m, WIRE_CM_ATTR_REQ, c->tid);
	r->local_comm_id = c->local_comm_id;
	r->service_id = wire_cm_service_id(cm_ps_code(id->ps), cm_dst_port(c));
	r->local_ca_guid = be64toh(ibv_get_device_guid(id->verbs->device));
	r->local_qpn = c->local_qpn;
	r->responder_resources = c->responder_resources;
	r->initiator_depth = c->initiator_depth;
	r->remote_cm_response_timeout = CM_RESPONSE_TIMEOUT;
	r->transport_service_type = id->qp && id->qp->qp_type == IBV_QPT_UC ?
				    WIRE_CM_TRANSPORT_UC : WIRE_CM_TRANSPORT_RC;
	r->end_to_end_flow_control = p ? (p->flow_control != 0) : 0;
	r->starting_psn = c->rq_psn;
	r->local_cm_response_timeout = CM_RESPONSE_TIMEOUT;
	r->retry_count = c->retry_count;
	r->pkey = 0xffff;
	r->path_mtu = c->path.mtu;
	r->rnr_retry_count = c->rnr_retry_count;
	r->max_cm_retries = CM_MAX_RETRIES;
	r->srq = c->srq;
	r->primary_local_lid = 0xffff;
	r->primary_remote_lid = 0xffff;
	memcpy(r->primary_local_gid, id->route.addr.addr.ibaddr.sgid.raw, 16);
	memcpy(r->primary_remote_gid, id->route.addr.addr.ibaddr.dgid.raw, 16);
	r->primary_flow_label = wire_cm_flow_label(cm_src_port(c), cm_dst_port(c));
	r->primary_packet_rate = 3;
	r->primary_traffic_class = c->tos;
	r->primary_hop_limit = 64;
	r->primary_subnet_local = 1;
	r->primary_local_ack_timeout = c->ack_timeout;
	/* ECE as Linux carries it: vendor id in the REQ, options in the
	 * MAD header's attribute modifier (zero when none was set). */
	r->vendor_id = c->local_ece.vendor_id & 0xffffff;
	m.hdr.attr_mod = c->local_ece.options;
	wire_cma_hdr_from_sockaddr(&h, &id->route.addr.src_addr, &id->route.addr.dst_addr);
	wire_cma_hdr_encode(r->private_data, &h);
	if (p && p->private_data_len)
		memcpy(r->private_data + WIRE_CMA_HDR_LEN, p->private_data, p->private_data_len);
	c->state = CM_REQ_SENT;
	cm_dbg("connect to port %u: listener agent port %u\n", cm_dst_port(c), lport);
	if (!lport) {
		/* No listener yet.  Linux answers a REQ for a service nobody
		 * listens on with a REJ (invalid service id); a kernel's address
		 * and route resolution take a little while, and applications
		 * (perftest) rely on that to win their listen-vs-connect race,
		 * so look again for a short grace period before rejecting.  (A
		 * REQ from another host gets the same grace where it arrives:
		 * cm_req_hold.) */
		if (wire_cm_encode(&m, c->mad) != WIRE_MAD_LEN)
			memset(c->mad, 0, WIRE_MAD_LEN);
		c->peer.port = 0;
		c->mad_pending = true;
		c->lookup_until_ms = cm_now_ms() + CM_LISTEN_GRACE_MS;
		c->mad_deadline_ms = cm_now_ms() + 10;
		cm_agent_wake();
		goto out;
	}
	c->peer.port = lport;
	cm_send_tracked(c, &m, CM_RESPONSE_TIMEOUT);
out:
	pthread_mutex_unlock(&cm_lock);
	if (err) {
		errno = err;
		return -1;
	}
	if (c->sync)
		return cm_sync_complete(c, id->qp ? RDMA_CM_EVENT_ESTABLISHED :
					RDMA_CM_EVENT_CONNECT_RESPONSE);
	return 0;
}

static void send_rtu(struct cm_id *c)
{
	struct wire_cm_msg m;

	cm_msg_init(&m, WIRE_CM_ATTR_RTU, c->tid);
	m.rtu.local_comm_id = c->local_comm_id;
	m.rtu.remote_comm_id = c->remote_comm_id;
	cm_send_reply(c, &m);
}

void cm_rep_in(const struct wire_cm_msg *m, const struct cm_peer *from,
		   const uint8_t to_ip[16])
{
	const struct wire_cm_rep *r = &m->rep;
	struct cm_id *c = cm_find_by_local(r->remote_comm_id);
	struct cm_event *e;

	if (!c) {
		cm_rej_unknown(m, from, to_ip, r->local_comm_id, WIRE_CM_REJ_INVALID_COMM_ID,
			    WIRE_CM_MSG_REP);
		return;
	}
	if (c->state == CM_ESTABLISHED && c->remote_comm_id == r->local_comm_id) {
		if (c->have_last_reply) /* our RTU was lost */
			cm_mad_send(&c->peer, cm_src_ip(c), c->last_reply);
		return;
	}
	if (c->state != CM_REQ_SENT)
		return;
	c->mad_pending = false;
	c->remote_comm_id = r->local_comm_id;
	c->peer = *from;
	if (!c->peer.scope)
		c->peer.scope = c->dscope; /* (a handed-on MAD has none) */
	c->remote_qpn = r->local_qpn;
	c->sq_psn = r->starting_psn;
	c->remote_resp_res = r->responder_resources;
	c->remote_init_depth = r->initiator_depth;
	c->rnr_retry_count = r->rnr_retry_count;
	c->remote_ece.vendor_id = (uint32_t)r->vendor_id_h << 16 |
				  (uint32_t)r->vendor_id_m << 8 | r->vendor_id_l;
	c->remote_ece.options = m->hdr.attr_mod;
	/* Never ask the peer for more reads than it will serve. */
	if (c->initiator_depth > r->responder_resources)
		c->initiator_depth = r->responder_resources;
	e = cm_event_conn(c, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, r->private_data, CM_REP_PDATA);
	if (!c->id.qp) {
		c->state = CM_REP_RCVD;
		cm_post(c, e);
		return;
	}
	if (cm_qp_to_rtr(c) || cm_qp_to_rts(c)) {
		cm_send_rej(c, WIRE_CM_REJ_CONSUMER_DEFINED, WIRE_CM_MSG_REP, NULL, 0);
		cm_qp_to_err(c);
		c->state = CM_TIMEWAIT;
		if (e) {
			e->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
			e->ev.status = -EINVAL;
		}
		cm_post(c, e);
		return;
	}
	send_rtu(c);
	c->state = CM_ESTABLISHED;
	if (e)
		e->ev.event = RDMA_CM_EVENT_ESTABLISHED;
	cm_post(c, e);
}

SRN_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_id(id);
	int err = 0;

	if (!id) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state != CM_REP_RCVD) {
		err = EINVAL;
	} else {
		send_rtu(c);
		c->state = CM_ESTABLISHED;
	}
	pthread_mutex_unlock(&cm_lock);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/* ---- passive side -------------------------------------------------------- */


SRN_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct cm_id *c = cm_id(id);
	struct wire_cm_msg m;
	struct wire_cm_rep *r = &m.rep;
	int err = 0;

	if (!id) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (cm_iw_id(c)) {
		err = cm_iw_accept(c, p);
		goto out;
	}
	err = conn_call_check(c, CM_REQ_RCVD, p, CM_REP_PDATA);
	if (err)
		goto out;
	if (id->qp_type == IBV_QPT_UD) {
		err = cm_sidr_accept(c, p);
		goto out;
	}
	take_depths(c, p);
	if (c->responder_resources > c->remote_init_depth)
		c->responder_resources = c->remote_init_depth;
	if (c->initiator_depth > c->remote_resp_res)
		c->initiator_depth = c->remote_resp_res;
	if (p)
		c->rnr_retry_count = p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count;
	c->own_qp = id->qp != NULL;
	c->local_qpn = id->qp ? id->qp->qp_num : (p ? p->qp_num & 0xffffff : 0);
	/* rq_psn was chosen with the id: an application that moved its own
	 * QP with rdma_init_qp_attr already used it. */
	if (id->qp && (cm_qp_to_rtr(c) || cm_qp_to_rts(c))) {
		err = EINVAL;
		goto out;
	}
	cm_msg_init(&m, WIRE_CM_ATTR_REP, c->tid);
	r->local_comm_id = c->local_comm_id;
	r->remote_comm_id = c->remote_comm_id;
	r->local_qpn = c->local_qpn;
	r->starting_psn = c->rq_psn;
	r->responder_resources = c->responder_resources;
	r->initiator_depth = c->initiator_depth;
	r->target_ack_delay = CM_TARGET_ACK_DELAY;
	r->end_to_end_flow_control = p ? (p->flow_control != 0) : 0;
	r->rnr_retry_count = c->rnr_retry_count;
	r->srq = id->qp ? (id->qp->srq != NULL) : (p ? p->srq != 0 : 0);
	r->local_ca_guid = id->verbs ? be64toh(ibv_get_device_guid(id->verbs->device)) : 0;
	/* ECE: what the application accepts of the peer's offer */
	r->vendor_id_h = (uint8_t)(c->local_ece.vendor_id >> 16);
	r->vendor_id_m = (uint8_t)(c->local_ece.vendor_id >> 8);
	r->vendor_id_l = (uint8_t)c->local_ece.vendor_id;
	m.hdr.attr_mod = c->local_ece.options;
	if (p && p->private_data_len)
		memcpy(r->private_data, p->private_data, p->private_data_len);
	cm_leave_backlog(c);
	cm_dbg("accept id %p (port %u)\n", (void *)id, cm_src_port(c));
	c->state = CM_REP_SENT;
	c->peer_local = cm_peer_is_local(&c->peer);
	cm_send_tracked(c, &m, c->peer_cm_timeout ? c->peer_cm_timeout : CM_RESPONSE_TIMEOUT);
out:
	pthread_mutex_unlock(&cm_lock);
	if (err) {
		errno = err;
		return -1;
	}
	if (c->sync && id->qp_type != IBV_QPT_UD)
		return cm_sync_complete(c, RDMA_CM_EVENT_ESTABLISHED);
	return 0;
}

static int do_reject(struct rdma_cm_id *id, const void *pdata, uint8_t len, uint16_t reason)
{
	struct cm_id *c = cm_id(id);
	int err = 0;

	if (!id || (len && !pdata)) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (cm_iw_id(c)) {
		err = cm_iw_reject(c, pdata, len);
		goto out;
	}
	if (c->state == CM_REQ_RCVD && id->qp_type == IBV_QPT_UD) {
		struct wire_cm_msg m;
		uint8_t out[WIRE_MAD_LEN];

		cm_msg_init(&m, WIRE_CM_ATTR_SIDR_REP, c->tid);
		m.sidr_rep.request_id = c->remote_comm_id;
		m.sidr_rep.status = WIRE_CM_SIDR_REJECT;
		m.sidr_rep.service_id = wire_cm_service_id(cm_ps_code(id->ps), cm_src_port(c));
		if (len)
			memcpy(m.sidr_rep.private_data, pdata,
			       len > CM_SIDR_REP_PDATA ? CM_SIDR_REP_PDATA : len);
		cm_send_msg(c, &m, out);
		cm_leave_backlog(c);
		c->state = CM_TIMEWAIT;
	} else if (c->state == CM_REQ_RCVD || c->state == CM_REP_RCVD) {
		if (len > CM_REJ_PDATA) {
			err = EINVAL;
			goto out;
		}
		cm_send_rej(c, reason,
			 c->state == CM_REQ_RCVD ? WIRE_CM_MSG_REQ : WIRE_CM_MSG_REP, pdata, len);
		cm_leave_backlog(c);
		c->state = CM_TIMEWAIT;
	} else {
		err = EINVAL;
	}
out:
	pthread_mutex_unlock(&cm_lock);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

SRN_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			   uint8_t private_data_len)
{
	return do_reject(id, private_data, private_data_len, WIRE_CM_REJ_CONSUMER_DEFINED);
}

/* The peer's ECE offer is refused: the REJ says "vendor option not
 * supported" (the peer sees REJECTED with status 35), as Linux does. */
SRN_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			       uint8_t private_data_len)
{
	return do_reject(id, private_data, private_data_len,
			 WIRE_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED);
}

void cm_rtu_in(const struct wire_cm_msg *m)
{
	struct cm_id *c = cm_find_by_local(m->rtu.remote_comm_id);

	if (!c || c->state != CM_REP_SENT || c->remote_comm_id != m->rtu.local_comm_id)
		return;
	c->mad_pending = false;
	c->state = CM_ESTABLISHED;
	cm_post(c, cm_event_conn(c, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0));
}

void cm_rej_in(const struct wire_cm_msg *m, const struct cm_peer *from)
{
	const struct wire_cm_rej *r = &m->rej;
	struct cm_id *c = cm_find_by_local(r->remote_comm_id);
	struct cm_event *e;

	/* An active side that gave up before learning our comm id names
	 * only its own: find the passive id by it. */
	if (!c && !r->remote_comm_id && r->local_comm_id) {
		for (struct cm_id *o = cm_ids; o; o = o->next)
			if (o->passive && !o->destroying && o->remote_comm_id == r->local_comm_id &&
			    !memcmp(o->peer.ip, from->ip, 16))
				c = o;
	}
	if (!c || (c->state != CM_REQ_SENT && c->state != CM_REP_SENT &&
		   c->state != CM_REP_RCVD && c->state != CM_REQ_RCVD))
		return;
	/* A REJ for a REQ carries the rejecter's comm id, if any. */
	if (c->state != CM_REQ_SENT && r->local_comm_id && c->remote_comm_id != r->local_comm_id)
		return;
	c->mad_pending = false;
	cm_qp_to_err(c);
	e = cm_event_conn(c, RDMA_CM_EVENT_REJECTED, r->reason, r->private_data, CM_REJ_PDATA);
	cm_leave_backlog(c);
	c->state = CM_TIMEWAIT;
	cm_post(c, e);
}

void cm_mra_in(const struct wire_cm_msg *m)
{
	struct cm_id *c = cm_find_by_local(m->mra.remote_comm_id);

	if (!c || !c->mad_pending)
		return;
	if ((c->state == CM_REQ_SENT && m->mra.message_mraed == WIRE_CM_MSG_REQ) ||
	    (c->state == CM_REP_SENT && m->mra.message_mraed == WIRE_CM_MSG_REP)) {
		/* The peer is alive but slow: wait its service timeout
		 * (uncapped) before resending. */
		uint64_t wait = (4096ull << (m->mra.service_timeout & 31)) / 1000000;

		c->mad_retries = CM_MAX_RETRIES;
		c->mad_deadline_ms = cm_now_ms() + wait + (uint64_t)c->mad_timeout_ms;
	}
}
