/* Helpers shared by the CM protocol files (conn.c, disconnect.c, sidr.c,
 * dispatch.c): message building and sending, retransmission bookkeeping,
 * event construction, id lookups.  All run with cm_lock held. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "cm/conn.h"
#include "net/cm_dir.h"

uint64_t cm_last_liveness_ms;

int cm_timeout_ms(unsigned int t)
{
	uint64_t us = (4096ull << (t > 31 ? 31 : t)) / 1000;
	uint64_t ms = us / 1000;

	if (ms < 50)
		ms = 50;
	if (ms > 1000)
		ms = 1000;
	return (int)ms;
}

uint32_t cm_rand32(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)random();
	return r;
}

uint32_t cm_new_comm_id(void)
{
	int slot = cm_agent_slot();

	for (;;) {
		uint32_t id = cm_rand32();

		/* The top bits name our agent, so the engine that owns the
		 * RoCE port can hand us MADs carrying this id (net/cm_dir.h). */
		if (slot >= 0)
			id = (uint32_t)slot << NET_CMDIR_COMM_ID_SHIFT |
			     (id & ((1u << NET_CMDIR_COMM_ID_SHIFT) - 1));
		bool used = !id;

		for (struct cm_id *c = cm_ids; c && !used; c = c->next)
			used = c->local_comm_id == id;
		if (!used)
			return id;
	}
}

/* A softrnic agent of this host (found in the directory, watched for
 * death), as opposed to a RoCE GSI reached at its port 4791 (through the
 * engine that owns this host's RoCE port, or on another host). */
bool cm_peer_is_local(const struct cm_peer *p)
{
	return p->port != CM_ROCE_PORT && cm_ip_is_local(p->ip);
}

void cm_send_msg(struct cm_id *c, struct wire_cm_msg *m, uint8_t out[WIRE_MAD_LEN])
{
	if (wire_cm_encode(m, out) != WIRE_MAD_LEN)
		memset(out, 0, WIRE_MAD_LEN);
	cm_mad_send(&c->peer, cm_src_ip(c), out);
}

/* Send m and retransmit it until answered (or give up). */
void cm_send_tracked(struct cm_id *c, struct wire_cm_msg *m, unsigned int tmo)
{
	cm_send_msg(c, m, c->mad);
	c->mad_pending = true;
	c->mad_retries = CM_MAX_RETRIES;
	c->mad_timeout_ms = cm_timeout_ms(tmo);
	c->mad_deadline_ms = cm_now_ms() + (uint64_t)c->mad_timeout_ms;
	cm_agent_wake();
}

/* Send m once and keep it to answer a duplicate of what it answers. */
void cm_send_reply(struct cm_id *c, struct wire_cm_msg *m)
{
	cm_send_msg(c, m, c->last_reply);
	c->have_last_reply = true;
}

void cm_msg_init(struct wire_cm_msg *m, uint16_t attr, uint64_t tid)
{
	memset(m, 0, sizeof(*m));
	wire_cm_hdr_init(&m->hdr, attr, tid);
}

void cm_leave_backlog(struct cm_id *c)
{
	if (c->listener && c->state == CM_REQ_RCVD && c->listener->pending > 0)
		c->listener->pending--;
}

void cm_send_rej(struct cm_id *c, uint16_t reason, uint8_t msg_rejected,
		     const void *pdata, size_t len)
{
	struct wire_cm_msg m;
	uint8_t out[WIRE_MAD_LEN];

	cm_msg_init(&m, WIRE_CM_ATTR_REJ, c->tid);
	m.rej.local_comm_id = c->local_comm_id;
	m.rej.remote_comm_id = c->remote_comm_id;
	m.rej.message_rejected = msg_rejected;
	m.rej.reason = reason;
	if (pdata && len)
		memcpy(m.rej.private_data, pdata, len > CM_REJ_PDATA ? CM_REJ_PDATA : len);
	cm_send_msg(c, &m, out);
}

/* A REJ to a MAD that matches no id (no state kept). */
void cm_rej_unknown(const struct wire_cm_msg *in, const struct cm_peer *from,
			const uint8_t to_ip[16], uint32_t remote_comm_id, uint16_t reason,
			uint8_t msg_rejected)
{
	struct wire_cm_msg m;
	uint8_t out[WIRE_MAD_LEN];

	cm_msg_init(&m, WIRE_CM_ATTR_REJ, in->hdr.tid);
	m.rej.remote_comm_id = remote_comm_id;
	m.rej.message_rejected = msg_rejected;
	m.rej.reason = reason;
	if (wire_cm_encode(&m, out) == WIRE_MAD_LEN)
		cm_mad_send(from, to_ip, out);
}

void cm_post(struct cm_id *c, struct cm_event *e)
{
	if (e)
		cm_event_queue(c->chan, e);
}

struct cm_event *cm_event_conn(struct cm_id *c, enum rdma_cm_event_type t, int st,
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

/* Find the listener for (ps, port) on ip, as the kernel does: an exact
 * address first, then a wildcard that takes ip's family. */
struct cm_id *cm_find_listener(uint16_t ps, uint16_t port, const uint8_t ip[16], bool ud)
{
	struct cm_id *wild = NULL;

	for (struct cm_id *c = cm_ids; c; c = c->next) {
		/* SIDR serves UD ids only, REQ the connected ones. */
		if (c->state != CM_LISTEN || cm_ps_code(c->id.ps) != ps || cm_src_port(c) != port ||
		    (c->id.qp_type == IBV_QPT_UD) != ud)
			continue;
		if (!memcmp(cm_src_ip(c), ip, 16))
			return c;
		if (cm_ip_is_any(cm_src_ip(c)) && net_cmdir_ip_takes(cm_src_ip(c), c->afonly, ip))
			wild = c;
	}
	return wild;
}

void cm_cma_hdr_ips(const struct wire_cma_hdr *h, uint8_t src[16], uint8_t dst[16])
{
	if (h->ip_version == 4) {
		cm_ip_from_v4(src, &h->src[12]);
		cm_ip_from_v4(dst, &h->dst[12]);
	} else {
		memcpy(src, h->src, 16);
		memcpy(dst, h->dst, 16);
	}
}

struct cm_id *cm_find_by_local(uint32_t comm_id)
{
	if (!comm_id)
		return NULL;
	for (struct cm_id *c = cm_ids; c; c = c->next)
		if (c->local_comm_id == comm_id && !c->destroying)
			return c;
	return NULL;
}

void cm_fill_path(struct cm_id *c, unsigned int mtu)
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
