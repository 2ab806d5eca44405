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

#include "cm/cm.h"
#include "verbs/export.h"

enum {
	CM_RESPONSE_TIMEOUT = 20,    /* 4.096 us * 2^20 = 4.3 s, as Linux */
	CM_MAX_RETRIES = 15,
	CM_MRA_SERVICE_TIMEOUT = 24, /* ~68 s: the application is slow */
	CM_TARGET_ACK_DELAY = 15,
	CM_LIVENESS_MS = 300,        /* how often same-host peers are checked */
	CM_LISTEN_GRACE_MS = 250,
	CM_TIMEWAIT_MS = 2000,       /* ~ 2 x packet life time, as Linux's order */    /* a same-host REQ waits this for a listener */
	CM_REQ_PDATA = 92 - WIRE_CMA_HDR_LEN,  /* 56 */
	CM_REP_PDATA = 196,
	CM_REJ_PDATA = 148,
	CM_DREQ_PDATA = 220,
	CM_SIDR_REQ_PDATA = 216 - WIRE_CMA_HDR_LEN,
	CM_SIDR_REP_PDATA = 136,
};

static uint64_t last_liveness_ms;

static int timeout_ms(unsigned int t)
{
	uint64_t us = (4096ull << (t > 31 ? 31 : t)) / 1000;
	uint64_t ms = us / 1000;

	if (ms < 50)
		ms = 50;
	if (ms > 1000)
		ms = 1000;
	return (int)ms;
}

static uint32_t rand32(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)random();
	return r;
}

static uint32_t new_comm_id(void)
{
	for (;;) {
		uint32_t id = rand32();
		bool used = !id;

		for (struct cm_id *c = cm_ids; c && !used; c = c->next)
			used = c->local_comm_id == id;
		if (!used)
			return id;
	}
}

static bool peer_is_local(const struct cm_peer *p)
{
	return cm_ip_is_local(p->ip);
}

static void encode_send(struct cm_id *c, struct wire_cm_msg *m, uint8_t out[WIRE_MAD_LEN])
{
	if (wire_cm_encode(m, out) != WIRE_MAD_LEN)
		memset(out, 0, WIRE_MAD_LEN);
	cm_mad_send(&c->peer, cm_src_ip(c), out);
}

/* Send m and retransmit it until answered (or give up). */
static void send_tracked(struct cm_id *c, struct wire_cm_msg *m, unsigned int tmo)
{
	encode_send(c, m, c->mad);
	c->mad_pending = true;
	c->mad_retries = CM_MAX_RETRIES;
	c->mad_timeout_ms = timeout_ms(tmo);
	c->mad_deadline_ms = cm_now_ms() + (uint64_t)c->mad_timeout_ms;
	cm_agent_wake();
}

/* Send m once and keep it to answer a duplicate of what it answers. */
static void send_reply(struct cm_id *c, struct wire_cm_msg *m)
{
	encode_send(c, m, c->last_reply);
	c->have_last_reply = true;
}

static void msg_init(struct wire_cm_msg *m, uint16_t attr, uint64_t tid)
{
	memset(m, 0, sizeof(*m));
	wire_cm_hdr_init(&m->hdr, attr, tid);
}

static void leave_backlog(struct cm_id *c)
{
	if (c->listener && c->state == CM_REQ_RCVD && c->listener->pending > 0)
		c->listener->pending--;
}

static void send_rej(struct cm_id *c, uint16_t reason, uint8_t msg_rejected,
		     const void *pdata, size_t len)
{
	struct wire_cm_msg m;
	uint8_t out[WIRE_MAD_LEN];

	msg_init(&m, WIRE_CM_ATTR_REJ, c->tid);
	m.rej.local_comm_id = c->local_comm_id;
	m.rej.remote_comm_id = c->remote_comm_id;
	m.rej.message_rejected = msg_rejected;
	m.rej.reason = reason;
	if (pdata && len)
		memcpy(m.rej.private_data, pdata, len > CM_REJ_PDATA ? CM_REJ_PDATA : len);
	encode_send(c, &m, out);
}

/* A REJ to a MAD that matches no id (no state kept). */
static void rej_unknown(const struct wire_cm_msg *in, const struct cm_peer *from,
			const uint8_t to_ip[4], uint32_t remote_comm_id, uint16_t reason,
			uint8_t msg_rejected)
{
	struct wire_cm_msg m;
	uint8_t out[WIRE_MAD_LEN];

	msg_init(&m, WIRE_CM_ATTR_REJ, in->hdr.tid);
	m.rej.remote_comm_id = remote_comm_id;
	m.rej.message_rejected = msg_rejected;
	m.rej.reason = reason;
	if (wire_cm_encode(&m, out) == WIRE_MAD_LEN)
		cm_mad_send(from, to_ip, out);
}

static void post(struct cm_id *c, struct cm_event *e)
{
	if (e)
		cm_event_queue(c->chan, e);
}

static struct cm_event *event_conn(struct cm_id *c, enum rdma_cm_event_type t, int st,
				   const uint8_t *pdata, size_t len)
{
	struct cm_event *e = cm_event_new(c, t, st);

	if (!e)
		return NULL;
	if (pdata && len) {
		memcpy(e->pdata, pdata, len);
		e->ev.param.conn.private_data = e->pdata;
		e->ev.param.conn.private_data_len = (uint8_t)len;
	}
	e->ev.param.conn.responder_resources = c->remote_init_depth;
	e->ev.param.conn.initiator_depth = c->remote_resp_res;
	e->ev.param.conn.retry_count = c->retry_count;
	e->ev.param.conn.rnr_retry_count = c->rnr_retry_count;
	e->ev.param.conn.srq = c->srq;
	e->ev.param.conn.qp_num = c->remote_qpn;
	return e;
}

/* ---- listening --------------------------------------------------------- */

SRN_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cm_id *c = cm_id(id);
	int err = 0;

	if (!id) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state == CM_IDLE) {
		/* Listening unbound: the wildcard address, a free port. */
		struct sockaddr_in any = { .sin_family = AF_INET };

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
	}
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

/* Find the listener for (ps, port) on ip, as the kernel does: an exact
 * address first, then the wildcard. */
static struct cm_id *find_listener(uint16_t ps, uint16_t port, const uint8_t ip[4])
{
	static const uint8_t any[4];
	struct cm_id *wild = NULL;

	for (struct cm_id *c = cm_ids; c; c = c->next) {
		if (c->state != CM_LISTEN || cm_ps_code(c->id.ps) != ps || cm_src_port(c) != port)
			continue;
		if (!memcmp(cm_src_ip(c), ip, 4))
			return c;
		if (!memcmp(cm_src_ip(c), any, 4))
			wild = c;
	}
	return wild;
}

static struct cm_id *find_by_local(uint32_t comm_id)
{
	if (!comm_id)
		return NULL;
	for (struct cm_id *c = cm_ids; c; c = c->next)
		if (c->local_comm_id == comm_id && !c->destroying)
			return c;
	return NULL;
}

static void fill_path(struct cm_id *c, unsigned int mtu)
{
	struct ibv_port_attr pa;

	memset(&c->path, 0, sizeof(c->path));
	c->path.sgid = c->id.route.addr.addr.ibaddr.sgid;
	c->path.dgid = c->id.route.addr.addr.ibaddr.dgid;
	c->path.pkey = htons(0xffff);
	c->path.hop_limit = 64;
	c->path.reversible = 1;
	c->path.numb_path = 1;
	c->path.mtu_selector = 2;
	c->path.mtu = (uint8_t)mtu;
	if (c->id.verbs && ibv_query_port(c->id.verbs, 1, &pa) == 0 &&
	    (mtu == 0 || pa.active_mtu < mtu))
		c->path.mtu = pa.active_mtu;
	c->path.rate_selector = 2;
	c->path.rate = 3;
	c->path.packet_life_time = 18;
	c->id.route.path_rec = &c->path;
	c->id.route.num_paths = 1;
}

static void req_in(const struct wire_cm_msg *m, const uint8_t *raw, const struct cm_peer *from,
		   const uint8_t to_ip[4])
{
	const struct wire_cm_req *r = &m->req;
	struct wire_cma_hdr h;
	struct cm_id *l, *c;
	struct cm_event *e;
	uint8_t dst[4];
	uint16_t ps, port;

	(void)raw;
	/* A repeated REQ: the answer was lost or the application is slow. */
	for (c = cm_ids; c; c = c->next) {
		if (c->remote_comm_id != r->local_comm_id || !c->passive ||
		    memcmp(c->peer.ip, from->ip, 4))
			continue;
		if (c->state == CM_REQ_RCVD) {
			struct wire_cm_msg mra;
			uint8_t out[WIRE_MAD_LEN];

			msg_init(&mra, WIRE_CM_ATTR_MRA, c->tid);
			mra.mra.local_comm_id = c->local_comm_id;
			mra.mra.remote_comm_id = c->remote_comm_id;
			mra.mra.message_mraed = WIRE_CM_MSG_REQ;
			mra.mra.service_timeout = CM_MRA_SERVICE_TIMEOUT;
			encode_send(c, &mra, out);
		} else if (c->state == CM_REP_SENT) {
			cm_mad_send(&c->peer, cm_src_ip(c), c->mad);
		}
		return;
	}
	if (!wire_cm_service_id_is_cma(r->service_id))
		goto bad_sid;
	ps = wire_cm_service_id_ps(r->service_id);
	port = wire_cm_service_id_port(r->service_id);
	if (wire_cma_hdr_decode(r->private_data, sizeof(r->private_data), &h) || h.ip_version != 4)
		goto bad_sid;
	memcpy(dst, &h.dst[12], 4);
	l = find_listener(ps, port, dst);
	if (!l)
		goto bad_sid;
	if (l->pending >= l->backlog) {
		rej_unknown(m, from, to_ip, r->local_comm_id, WIRE_CM_REJ_CONSUMER_DEFINED,
			    WIRE_CM_MSG_REQ);
		return;
	}
	c = cm_id_alloc(l->sync ? NULL : l->chan, l->id.context, l->id.ps, l->sync);
	if (!c) {
		rej_unknown(m, from, to_ip, r->local_comm_id, WIRE_CM_REJ_NO_RESOURCES,
			    WIRE_CM_MSG_REQ);
		return;
	}
	c->listener = l;
	c->passive = true;
	c->id.route.addr.src_sin.sin_family = AF_INET;
	memcpy(&c->id.route.addr.src_sin.sin_addr, dst, 4);
	c->id.route.addr.src_sin.sin_port = htons(port);
	c->id.route.addr.dst_sin.sin_family = AF_INET;
	memcpy(&c->id.route.addr.dst_sin.sin_addr, &h.src[12], 4);
	c->id.route.addr.dst_sin.sin_port = htons(h.src_port);
	c->id.verbs = l->id.verbs ? l->id.verbs : cm_device_for_ip(dst);
	c->id.port_num = 1;
	c->id.pd = l->ep_pd;
	cm_id_fill_gids(c);
	fill_path(c, r->path_mtu);
	c->path.flow_label = htonl(r->primary_flow_label);
	c->path.traffic_class = r->primary_traffic_class;
	c->tos = r->primary_traffic_class;
	c->local_comm_id = new_comm_id();
	c->remote_comm_id = r->local_comm_id;
	c->tid = m->hdr.tid;
	c->peer = *from;
	if (!peer_is_local(from))
		c->peer.port = 4791;
	c->remote_qpn = r->local_qpn;
	c->sq_psn = r->starting_psn;
	c->remote_resp_res = r->responder_resources;
	c->remote_init_depth = r->initiator_depth;
	c->retry_count = r->retry_count;
	c->rnr_retry_count = r->rnr_retry_count;
	c->srq = r->srq;
	c->peer_cm_timeout = r->remote_cm_response_timeout;
	c->ack_timeout = r->primary_local_ack_timeout;
	if (!c->id.verbs) {
		send_rej(c, WIRE_CM_REJ_INVALID_GID, WIRE_CM_MSG_REQ, NULL, 0);
		cm_id_free_unreported(c); /* never handed out */
		return;
	}
	c->state = CM_REQ_RCVD;
	l->pending++;
	e = cm_event_new(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e)
		return;
	e->owner = l;
	e->ev.listen_id = &l->id;
	memcpy(e->pdata, r->private_data + WIRE_CMA_HDR_LEN, CM_REQ_PDATA);
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
	/* Nobody listens there: what Linux answers (status 8 at the peer). */
	rej_unknown(m, from, to_ip, r->local_comm_id, WIRE_CM_REJ_INVALID_SERVICE_ID,
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

static int sidr_connect(struct cm_id *c, const struct rdma_conn_param *p);

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
	if (p && p->private_data_len && !p->private_data) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state != CM_ROUTE_RESOLVED) {
		err = EINVAL;
		goto out;
	}
	if (id->qp_type == IBV_QPT_UD) {
		err = sidr_connect(c, p);
		goto out;
	}
	if (p && p->private_data_len > CM_REQ_PDATA) {
		err = EINVAL;
		goto out;
	}
	take_depths(c, p);
	c->retry_count = p ? (p->retry_count > 7 ? 7 : p->retry_count) : 7;
	c->rnr_retry_count = p ? (p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count) : 7;
	c->own_qp = id->qp != NULL;
	c->local_qpn = id->qp ? id->qp->qp_num : (p ? p->qp_num & 0xffffff : 0);
	c->srq = id->qp ? (id->qp->srq != NULL) : (p ? p->srq != 0 : 0);
	c->rq_psn = rand32() & 0xffffff;
	c->local_comm_id = new_comm_id();
	c->tid = (uint64_t)rand32() << 32 | rand32();
	/* Where the listener's agent is: the directory for this host,
	 * RoCE's UDP port for another. */
	memcpy(c->peer.ip, cm_dst_ip(c), 4);
	c->peer_local = cm_ip_is_local(c->peer.ip);
	lport = c->peer_local ? cm_dir_lookup(cm_ps_code(id->ps), cm_dst_ip(c), cm_dst_port(c)) : 4791;
	msg_init(&m, WIRE_CM_ATTR_REQ, c->tid);
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
		 * so look again for a short grace period before rejecting. */
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
	send_tracked(c, &m, CM_RESPONSE_TIMEOUT);
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

	msg_init(&m, WIRE_CM_ATTR_RTU, c->tid);
	m.rtu.local_comm_id = c->local_comm_id;
	m.rtu.remote_comm_id = c->remote_comm_id;
	send_reply(c, &m);
}

static void rep_in(const struct wire_cm_msg *m, const struct cm_peer *from,
		   const uint8_t to_ip[4])
{
	const struct wire_cm_rep *r = &m->rep;
	struct cm_id *c = find_by_local(r->remote_comm_id);
	struct cm_event *e;

	if (!c) {
		rej_unknown(m, from, to_ip, r->local_comm_id, WIRE_CM_REJ_INVALID_COMM_ID,
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
	if (!c->peer_local)
		c->peer.port = 4791;
	c->remote_qpn = r->local_qpn;
	c->sq_psn = r->starting_psn;
	c->remote_resp_res = r->responder_resources;
	c->remote_init_depth = r->initiator_depth;
	c->rnr_retry_count = r->rnr_retry_count;
	/* Never ask the peer for more reads than it will serve. */
	if (c->initiator_depth > r->responder_resources)
		c->initiator_depth = r->responder_resources;
	e = event_conn(c, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, r->private_data, CM_REP_PDATA);
	if (!c->id.qp) {
		c->state = CM_REP_RCVD;
		post(c, e);
		return;
	}
	if (cm_qp_to_rtr(c) || cm_qp_to_rts(c)) {
		send_rej(c, WIRE_CM_REJ_CONSUMER_DEFINED, WIRE_CM_MSG_REP, NULL, 0);
		cm_qp_to_err(c);
		c->state = CM_TIMEWAIT;
		if (e) {
			e->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
			e->ev.status = -EINVAL;
		}
		post(c, e);
		return;
	}
	send_rtu(c);
	c->state = CM_ESTABLISHED;
	if (e)
		e->ev.event = RDMA_CM_EVENT_ESTABLISHED;
	post(c, e);
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

static int sidr_accept(struct cm_id *c, const struct rdma_conn_param *p);

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
	if (c->state != CM_REQ_RCVD) {
		err = EINVAL;
		goto out;
	}
	if (id->qp_type == IBV_QPT_UD) {
		err = sidr_accept(c, p);
		goto out;
	}
	if (p && (p->private_data_len > CM_REP_PDATA || (p->private_data_len && !p->private_data))) {
		err = EINVAL;
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
	c->rq_psn = rand32() & 0xffffff;
	if (id->qp && (cm_qp_to_rtr(c) || cm_qp_to_rts(c))) {
		err = EINVAL;
		goto out;
	}
	msg_init(&m, WIRE_CM_ATTR_REP, c->tid);
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
	if (p && p->private_data_len)
		memcpy(r->private_data, p->private_data, p->private_data_len);
	leave_backlog(c);
	c->state = CM_REP_SENT;
	c->peer_local = cm_ip_is_local(c->peer.ip);
	send_tracked(c, &m, c->peer_cm_timeout ? c->peer_cm_timeout : CM_RESPONSE_TIMEOUT);
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

static int do_reject(struct rdma_cm_id *id, const void *pdata, uint8_t len)
{
	struct cm_id *c = cm_id(id);
	int err = 0;

	if (!id || (len && !pdata)) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state == CM_REQ_RCVD && id->qp_type == IBV_QPT_UD) {
		struct wire_cm_msg m;
		uint8_t out[WIRE_MAD_LEN];

		msg_init(&m, WIRE_CM_ATTR_SIDR_REP, c->tid);
		m.sidr_rep.request_id = c->remote_comm_id;
		m.sidr_rep.status = WIRE_CM_SIDR_REJECT;
		m.sidr_rep.service_id = wire_cm_service_id(cm_ps_code(id->ps), cm_src_port(c));
		if (len)
			memcpy(m.sidr_rep.private_data, pdata,
			       len > CM_SIDR_REP_PDATA ? CM_SIDR_REP_PDATA : len);
		encode_send(c, &m, out);
		leave_backlog(c);
		c->state = CM_TIMEWAIT;
	} else if (c->state == CM_REQ_RCVD || c->state == CM_REP_RCVD) {
		if (len > CM_REJ_PDATA) {
			err = EINVAL;
			goto out;
		}
		send_rej(c, WIRE_CM_REJ_CONSUMER_DEFINED,
			 c->state == CM_REQ_RCVD ? WIRE_CM_MSG_REQ : WIRE_CM_MSG_REP, pdata, len);
		leave_backlog(c);
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
	return do_reject(id, private_data, private_data_len);
}

/* ECE is not carried in our MADs (see rdma_get_remote_ece): a reject is
 * a plain consumer reject. */
SRN_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			       uint8_t private_data_len)
{
	return do_reject(id, private_data, private_data_len);
}

static void rtu_in(const struct wire_cm_msg *m)
{
	struct cm_id *c = find_by_local(m->rtu.remote_comm_id);

	if (!c || c->state != CM_REP_SENT || c->remote_comm_id != m->rtu.local_comm_id)
		return;
	c->mad_pending = false;
	c->state = CM_ESTABLISHED;
	post(c, event_conn(c, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0));
}

static void rej_in(const struct wire_cm_msg *m)
{
	const struct wire_cm_rej *r = &m->rej;
	struct cm_id *c = find_by_local(r->remote_comm_id);
	struct cm_event *e;

	if (!c || (c->state != CM_REQ_SENT && c->state != CM_REP_SENT &&
		   c->state != CM_REP_RCVD && c->state != CM_REQ_RCVD))
		return;
	/* A REJ for a REQ carries the rejecter's comm id, if any. */
	if (c->state != CM_REQ_SENT && c->remote_comm_id != r->local_comm_id)
		return;
	c->mad_pending = false;
	cm_qp_to_err(c);
	e = event_conn(c, RDMA_CM_EVENT_REJECTED, r->reason, r->private_data, CM_REJ_PDATA);
	leave_backlog(c);
	c->state = CM_TIMEWAIT;
	post(c, e);
}

static void mra_in(const struct wire_cm_msg *m)
{
	struct cm_id *c = find_by_local(m->mra.remote_comm_id);

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

/* ---- disconnection ------------------------------------------------------- */

static void send_dreq(struct cm_id *c, bool tracked)
{
	struct wire_cm_msg m;
	uint8_t out[WIRE_MAD_LEN];

	c->tid = (uint64_t)rand32() << 32 | rand32();
	msg_init(&m, WIRE_CM_ATTR_DREQ, c->tid);
	m.dreq.local_comm_id = c->local_comm_id;
	m.dreq.remote_comm_id = c->remote_comm_id;
	m.dreq.remote_qpn_eecn = c->remote_qpn;
	if (tracked)
		send_tracked(c, &m, c->peer_cm_timeout ? c->peer_cm_timeout : CM_RESPONSE_TIMEOUT);
	else
		encode_send(c, &m, out);
}

SRN_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_id(id);
	bool wait = false;
	int err = 0;

	if (!id) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	switch (c->state) {
	case CM_ESTABLISHED:
	case CM_REP_SENT:
		cm_qp_to_err(c);
		send_dreq(c, true);
		c->state = CM_DREQ_SENT;
		wait = c->sync;
		break;
	case CM_REQ_SENT:
	case CM_REQ_RCVD:
	case CM_REP_RCVD:
	case CM_DREQ_SENT:
	case CM_TIMEWAIT:
		/* Nothing (more) to send; the QP still goes to error. */
		cm_qp_to_err(c);
		wait = c->sync && c->sync_disc_wait;
		break;
	default:
		err = EINVAL;
	}
	pthread_mutex_unlock(&cm_lock);
	if (err) {
		errno = err;
		return -1;
	}
	if (wait) {
		int r = cm_sync_complete(c, RDMA_CM_EVENT_DISCONNECTED);

		pthread_mutex_lock(&cm_lock);
		c->sync_disc_wait = false;
		pthread_mutex_unlock(&cm_lock);
		return r;
	}
	return 0;
}

static void post_disconnected(struct cm_id *c)
{
	/* The connection's comm ids stay reserved for the time wait, then
	 * the application hears TIMEWAIT_EXIT (if the id still exists). */
	c->timewait_ms = cm_now_ms() + CM_TIMEWAIT_MS;
	cm_agent_wake();
	if (c->sync)
		c->sync_disc_wait = true;
	post(c, event_conn(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0));
}

static void dreq_in(const struct wire_cm_msg *m, const struct cm_peer *from,
		    const uint8_t to_ip[4])
{
	struct cm_id *c = find_by_local(m->dreq.remote_comm_id);
	struct wire_cm_msg rep;

	msg_init(&rep, WIRE_CM_ATTR_DREP, m->hdr.tid);
	rep.drep.local_comm_id = m->dreq.remote_comm_id;
	rep.drep.remote_comm_id = m->dreq.local_comm_id;
	if (!c || c->remote_comm_id != m->dreq.local_comm_id) {
		/* Already gone: answer so the peer need not time out. */
		uint8_t out[WIRE_MAD_LEN];

		if (wire_cm_encode(&rep, out) == WIRE_MAD_LEN)
			cm_mad_send(from, to_ip, out);
		return;
	}
	c->tid = m->hdr.tid;
	send_reply(c, &rep);
	switch (c->state) {
	case CM_ESTABLISHED:
	case CM_REP_SENT:
	case CM_DREQ_SENT:
		c->mad_pending = false;
		cm_qp_to_err(c);
		c->state = CM_TIMEWAIT;
		post_disconnected(c);
		break;
	default:
		break;
	}
}

static void drep_in(const struct wire_cm_msg *m)
{
	struct cm_id *c = find_by_local(m->drep.remote_comm_id);

	if (!c || c->state != CM_DREQ_SENT || c->remote_comm_id != m->drep.local_comm_id)
		return;
	c->mad_pending = false;
	c->state = CM_TIMEWAIT;
	post_disconnected(c);
}

/* ---- SIDR (RDMA_PS_UDP): service id resolution for UD QPs ---------------- */

static int sidr_connect(struct cm_id *c, const struct rdma_conn_param *p)
{
	struct wire_cma_hdr h;
	struct wire_cm_msg m;
	uint16_t lport;

	if (p && p->private_data_len > CM_SIDR_REQ_PDATA)
		return EINVAL;
	c->local_comm_id = new_comm_id();
	c->tid = (uint64_t)rand32() << 32 | rand32();
	memcpy(c->peer.ip, cm_dst_ip(c), 4);
	c->peer_local = cm_ip_is_local(c->peer.ip);
	lport = c->peer_local ? cm_dir_lookup(cm_ps_code(c->id.ps), cm_dst_ip(c), cm_dst_port(c)) : 4791;
	msg_init(&m, WIRE_CM_ATTR_SIDR_REQ, c->tid);
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
		post(c, e);
		return 0;
	}
	c->peer.port = lport;
	send_tracked(c, &m, CM_RESPONSE_TIMEOUT);
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
	ah->grh.sgid_index = 0;
	ah->grh.hop_limit = 64;
	ah->grh.traffic_class = c->tos;
	ah->grh.flow_label = wire_cm_flow_label(cm_src_port(c), cm_dst_port(c));
}

static void sidr_req_in(const struct wire_cm_msg *m, const struct cm_peer *from,
			const uint8_t to_ip[4])
{
	const struct wire_cm_sidr_req *r = &m->sidr_req;
	struct wire_cma_hdr h;
	struct wire_cm_msg rep;
	struct cm_event *e;
	struct cm_id *l, *c;
	uint8_t dst[4], out[WIRE_MAD_LEN];

	for (c = cm_ids; c; c = c->next)
		if (c->passive && c->remote_comm_id == r->request_id &&
		    !memcmp(c->peer.ip, from->ip, 4) && c->peer.port == from->port)
			return; /* repeated: the answer follows when accepted */
	msg_init(&rep, WIRE_CM_ATTR_SIDR_REP, m->hdr.tid);
	rep.sidr_rep.request_id = r->request_id;
	rep.sidr_rep.service_id = r->service_id;
	rep.sidr_rep.status = WIRE_CM_SIDR_UNSUPPORTED;
	if (!wire_cm_service_id_is_cma(r->service_id) ||
	    wire_cma_hdr_decode(r->private_data, sizeof(r->private_data), &h) || h.ip_version != 4)
		goto refuse;
	memcpy(dst, &h.dst[12], 4);
	l = find_listener(wire_cm_service_id_ps(r->service_id),
			  wire_cm_service_id_port(r->service_id), dst);
	if (!l)
		goto refuse;
	c = cm_id_alloc(l->sync ? NULL : l->chan, l->id.context, l->id.ps, l->sync);
	if (!c) {
		rep.sidr_rep.status = WIRE_CM_SIDR_REJECT;
		goto refuse;
	}
	c->listener = l;
	c->passive = true;
	memcpy(&c->id.route.addr.src_sin.sin_addr, dst, 4);
	c->id.route.addr.src_sin.sin_port = htons(wire_cm_service_id_port(r->service_id));
	memcpy(&c->id.route.addr.dst_sin.sin_addr, &h.src[12], 4);
	c->id.route.addr.dst_sin.sin_port = htons(h.src_port);
	c->id.verbs = l->id.verbs ? l->id.verbs : cm_device_for_ip(dst);
	c->id.port_num = 1;
	cm_id_fill_gids(c);
	fill_path(c, 0);
	c->remote_comm_id = r->request_id;
	c->tid = m->hdr.tid;
	c->peer = *from;
	if (!peer_is_local(from))
		c->peer.port = 4791;
	c->state = CM_REQ_RCVD;
	l->pending++;
	e = cm_event_new(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e)
		return;
	e->owner = l;
	e->ev.listen_id = &l->id;
	memcpy(e->pdata, r->private_data + WIRE_CMA_HDR_LEN, CM_SIDR_REQ_PDATA);
	e->ev.param.ud.private_data = e->pdata;
	e->ev.param.ud.private_data_len = CM_SIDR_REQ_PDATA;
	cm_event_queue(l->chan, e);
	return;
refuse:
	if (wire_cm_encode(&rep, out) == WIRE_MAD_LEN)
		cm_mad_send(from, to_ip, out);
}

static int sidr_accept(struct cm_id *c, const struct rdma_conn_param *p)
{
	struct wire_cm_msg m;
	uint8_t out[WIRE_MAD_LEN];

	if (p && p->private_data_len > CM_SIDR_REP_PDATA)
		return EINVAL;
	msg_init(&m, WIRE_CM_ATTR_SIDR_REP, c->tid);
	m.sidr_rep.request_id = c->remote_comm_id;
	m.sidr_rep.status = WIRE_CM_SIDR_SUCCESS;
	m.sidr_rep.qpn = c->id.qp ? c->id.qp->qp_num : (p ? p->qp_num & 0xffffff : 0);
	m.sidr_rep.service_id = wire_cm_service_id(cm_ps_code(c->id.ps), cm_src_port(c));
	m.sidr_rep.qkey = RDMA_UDP_QKEY;
	if (p && p->private_data_len)
		memcpy(m.sidr_rep.private_data, p->private_data, p->private_data_len);
	encode_send(c, &m, out);
	leave_backlog(c);
	c->state = CM_ESTABLISHED;
	return 0;
}

static void sidr_rep_in(const struct wire_cm_msg *m)
{
	const struct wire_cm_sidr_rep *r = &m->sidr_rep;
	struct cm_id *c = find_by_local(r->request_id);
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
	post(c, e);
}

/* ---- dispatch, timers, teardown ------------------------------------------ */

void cm_conn_mad_in(const uint8_t mad[WIRE_MAD_LEN], const struct cm_peer *from,
		    const uint8_t to_ip[4])
{
	struct wire_cm_msg m;

	if (wire_cm_decode(mad, WIRE_MAD_LEN, &m))
		return;
	switch (m.hdr.attr_id) {
	case WIRE_CM_ATTR_REQ: req_in(&m, mad, from, to_ip); break;
	case WIRE_CM_ATTR_REP: rep_in(&m, from, to_ip); break;
	case WIRE_CM_ATTR_RTU: rtu_in(&m); break;
	case WIRE_CM_ATTR_REJ: rej_in(&m); break;
	case WIRE_CM_ATTR_MRA: mra_in(&m); break;
	case WIRE_CM_ATTR_DREQ: dreq_in(&m, from, to_ip); break;
	case WIRE_CM_ATTR_DREP: drep_in(&m); break;
	case WIRE_CM_ATTR_SIDR_REQ: sidr_req_in(&m, from, to_ip); break;
	case WIRE_CM_ATTR_SIDR_REP: sidr_rep_in(&m); break;
	default: break; /* LAP/APR: no path migration on RoCE */
	}
}

/* The REJ Linux would send for a service nobody listens on. */
static void no_listener(struct cm_id *c)
{
	struct cm_event *e = event_conn(c, RDMA_CM_EVENT_REJECTED,
					WIRE_CM_REJ_INVALID_SERVICE_ID, NULL, 0);

	c->mad_pending = false;
	if (e) {
		memset(e->pdata, 0, CM_REJ_PDATA);
		e->ev.param.conn.private_data = e->pdata;
		e->ev.param.conn.private_data_len = CM_REJ_PDATA;
	}
	c->state = CM_TIMEWAIT;
	post(c, e);
}

/* The peer did not answer (or its process is gone). */
static void give_up(struct cm_id *c)
{
	c->mad_pending = false;
	switch (c->state) {
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_SIDR_REQ_SENT:
		if (c->state == CM_REP_SENT)
			send_rej(c, WIRE_CM_REJ_TIMEOUT, WIRE_CM_MSG_REP, NULL, 0);
		cm_qp_to_err(c);
		c->state = CM_TIMEWAIT;
		post(c, event_conn(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0));
		break;
	case CM_DREQ_SENT:
		c->state = CM_TIMEWAIT;
		post_disconnected(c);
		break;
	default:
		break;
	}
}

int cm_conn_timers(uint64_t now)
{
	int next = -1;
	bool check = now - last_liveness_ms >= CM_LIVENESS_MS;
	bool want_check = false;

	if (check)
		last_liveness_ms = now;
	for (struct cm_id *c = cm_ids; c; c = c->next) {
		bool local_peer = c->peer_local && c->peer.port;

		if (c->destroying)
			continue;
		if (c->timewait_ms) {
			if (c->state != CM_TIMEWAIT) {
				c->timewait_ms = 0;
			} else if (c->timewait_ms <= now) {
				c->timewait_ms = 0;
				post(c, cm_event_new(c, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0));
			} else if (next < 0 || (int)(c->timewait_ms - now) < next) {
				next = (int)(c->timewait_ms - now);
			}
		}
		if (c->mad_pending && c->state == CM_REQ_SENT && !c->peer.port &&
		    c->mad_deadline_ms <= now) {
			uint16_t lport = cm_dir_lookup(cm_ps_code(c->id.ps), cm_dst_ip(c),
						       cm_dst_port(c));

			if (lport) {
				c->peer.port = lport;
				cm_mad_send(&c->peer, cm_src_ip(c), c->mad);
				c->mad_retries = CM_MAX_RETRIES;
				c->mad_timeout_ms = timeout_ms(CM_RESPONSE_TIMEOUT);
				c->mad_deadline_ms = now + (uint64_t)c->mad_timeout_ms;
			} else if (now >= c->lookup_until_ms) {
				no_listener(c);
				continue;
			} else {
				c->mad_deadline_ms = now + 10;
			}
		}
		if (c->mad_pending) {
			if (c->mad_deadline_ms <= now) {
				if (c->mad_retries <= 0) {
					give_up(c);
					continue;
				}
				c->mad_retries--;
				cm_mad_send(&c->peer, cm_src_ip(c), c->mad);
				c->mad_deadline_ms = now + (uint64_t)c->mad_timeout_ms;
			}
			int left = (int)(c->mad_deadline_ms - now);

			if (next < 0 || left < next)
				next = left;
		}
		/* A same-host peer process that died: its connections drop
		 * now instead of waiting for the QP's retries (or forever). */
		if (local_peer && (c->state == CM_ESTABLISHED || c->state == CM_REQ_RCVD ||
				   c->state == CM_REP_RCVD || c->mad_pending)) {
			want_check = true;
			if (!check && !c->dead_strikes)
				continue;
			if (cm_dir_agent_alive(c->peer.port)) {
				c->dead_strikes = 0;
			} else {
				/* Seen dead twice, with our socket drained in
				 * between: its last MADs (a REJ, a DREQ) were
				 * processed first and win. */
				if (++c->dead_strikes < 2) {
					if (next < 0 || next > 10)
						next = 10;
					continue;
				}
				if (c->state == CM_ESTABLISHED && c->id.qp_type != IBV_QPT_UD) {
					cm_qp_to_err(c);
					c->state = CM_TIMEWAIT;
					post_disconnected(c);
				} else if (c->mad_pending) {
					give_up(c);
				}
			}
		}
	}
	if (want_check && (next < 0 || next > CM_LIVENESS_MS))
		next = CM_LIVENESS_MS;
	return next;
}

void cm_conn_destroy(struct cm_id *c)
{
	c->mad_pending = false;
	switch (c->state) {
	case CM_REQ_SENT:
		send_rej(c, WIRE_CM_REJ_TIMEOUT, WIRE_CM_MSG_REQ, NULL, 0);
		break;
	case CM_REQ_RCVD:
		if (c->id.qp_type != IBV_QPT_UD)
			send_rej(c, WIRE_CM_REJ_CONSUMER_DEFINED, WIRE_CM_MSG_REQ, NULL, 0);
		leave_backlog(c);
		break;
	case CM_REP_SENT:
	case CM_REP_RCVD:
		send_rej(c, WIRE_CM_REJ_CONSUMER_DEFINED, WIRE_CM_MSG_OTHER, NULL, 0);
		break;
	case CM_ESTABLISHED:
		if (c->id.qp_type != IBV_QPT_UD)
			send_dreq(c, false); /* the peer sees DISCONNECTED */
		break;
	case CM_LISTEN: {
		/* CONNECT_REQUESTs never handed out die with the listener. */
		struct cm_channel *ch = c->chan;
		struct cm_event **pp, *e, *prev = NULL;

		pthread_mutex_lock(&ch->lock);
		for (pp = &ch->head; (e = *pp);) {
			if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->owner == c) {
				struct cm_id *child = cm_id(e->ev.id);

				*pp = e->next;
				c->unacked--;
				free(e);
				send_rej(child, WIRE_CM_REJ_CONSUMER_DEFINED, WIRE_CM_MSG_REQ, NULL, 0);
				child->listener = NULL;
				cm_id_free_unreported(child);
				continue;
			}
			prev = e;
			pp = &e->next;
		}
		ch->tail = prev;
		pthread_mutex_unlock(&ch->lock);
		break;
	}
	default:
		break;
	}
	c->state = CM_TIMEWAIT;
}
