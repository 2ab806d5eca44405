/* MAD dispatch, requests held until their listener comes, the protocol
 * timers (retransmission, same-host peer liveness, time wait) and protocol
 * teardown when an id is destroyed. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm/conn.h"
#include "verbs/export.h"

/* ---- requests that came before their listener ----------------------------
 * A server that listens again for its next connection (perftest -R: one
 * connection to exchange parameters, a fresh listener on the same port for
 * the test's own) races the client's REQ.  On Linux the server's side of
 * that race is short and never waits for a user thread: the ACK that
 * completes its last send and the completion itself come from the NIC (or
 * rxe's softirq).  Here both need user-space threads (the peer's responder,
 * the engine that owns the RoCE port and hands packets over), which a
 * 2-CPU host with busy-polling applications can leave unscheduled for
 * milliseconds: the client's REQ then arrives before rdma_listen.
 *
 * So a REQ that finds no listener is held here for a grace period
 * (CM_REQ_HOLD_MS; the active side gives a same-host listener its own,
 * CM_LISTEN_GRACE_MS) and handed on when a listener for it appears; only
 * when the grace ends is it refused as Linux refuses it (REJ invalid
 * service id, a SIDR refusal).  The peer sees nothing but a later answer, well within its CM
 * response timeout.  A few are held at once (a flood of REQs for ports
 * nobody serves gets its refusals at once beyond that); a repeat of a held
 * REQ is dropped, the held one answers for both.  All with cm_lock held. */
enum { CM_HOLD_MAX = 16 };

struct held_req {
	bool used;
	struct wire_cm_msg m;        /* decoded REQ / SIDR_REQ */
	struct cm_peer from;
	uint8_t to_ip[16];
	uint16_t ps, port;           /* service the listener must serve */
	uint8_t dst[16];
	bool ud;                     /* SIDR_REQ: a UD listener */
	uint64_t until_ms;
};

static struct held_req held[CM_HOLD_MAX];
static bool refusing;                /* handlers refuse now, they do not hold */

/* The sender's id for the request: its comm id, or SIDR's request id. */
static uint32_t request_of(const struct wire_cm_msg *m)
{
	return m->hdr.attr_id == WIRE_CM_ATTR_SIDR_REQ ? m->sidr_req.request_id :
							 m->req.local_comm_id;
}

bool cm_req_hold(const struct wire_cm_msg *m, const struct cm_peer *from,
		 const uint8_t to_ip[16], uint16_t ps, uint16_t port, const uint8_t dst[16],
		 bool ud)
{
	struct held_req *free_slot = NULL;

	if (refusing)
		return false;
	for (int i = 0; i < CM_HOLD_MAX; i++) {
		struct held_req *h = &held[i];

		if (!h->used) {
			if (!free_slot)
				free_slot = h;
			continue;
		}
		/* The peer repeated it: the held one answers for both. */
		if (h->m.hdr.attr_id == m->hdr.attr_id && request_of(&h->m) == request_of(m) &&
		    !memcmp(h->from.ip, from->ip, 16))
			return true;
	}
	if (!free_slot)
		return false;
	free_slot->used = true;
	free_slot->m = *m;
	free_slot->from = *from;
	memcpy(free_slot->to_ip, to_ip, 16);
	free_slot->ps = ps;
	free_slot->port = port;
	memcpy(free_slot->dst, dst, 16);
	free_slot->ud = ud;
	free_slot->until_ms = cm_now_ms() + CM_REQ_HOLD_MS;
	cm_agent_wake(); /* its timers now include this deadline */
	cm_dbg("%s for port %u: no listener yet, held %d ms\n",
	       ud ? "SIDR_REQ" : "REQ", port, CM_REQ_HOLD_MS);
	return true;
}

/* Take h out and run it through its handler again: it finds its listener
 * now, or (refusing) is answered as nobody listens. */
static void redo(struct held_req *h, bool refuse)
{
	struct held_req r = *h;

	h->used = false;
	refusing = refuse;
	if (r.m.hdr.attr_id == WIRE_CM_ATTR_SIDR_REQ)
		cm_sidr_req_in(&r.m, &r.from, r.to_ip);
	else
		cm_req_in(&r.m, &r.from, r.to_ip);
	refusing = false;
}

void cm_req_hold_release(void)
{
	for (int i = 0; i < CM_HOLD_MAX; i++) {
		struct held_req *h = &held[i];

		if (h->used && cm_find_listener(h->ps, h->port, h->dst, h->ud)) {
			cm_dbg("%s for port %u: listener now, handed on\n",
			       h->ud ? "SIDR_REQ" : "REQ", h->port);
			redo(h, false);
		}
	}
}

int cm_req_hold_timers(uint64_t now)
{
	int next = -1;

	cm_req_hold_release();
	for (int i = 0; i < CM_HOLD_MAX; i++) {
		struct held_req *h = &held[i];

		if (!h->used)
			continue;
		if (h->until_ms <= now) {
			redo(h, true);
			continue;
		}
		if (next < 0 || (int)(h->until_ms - now) < next)
			next = (int)(h->until_ms - now);
	}
	return next;
}

/* ---- dispatch, timers, teardown ------------------------------------------ */

void cm_conn_mad_in(const uint8_t mad[WIRE_MAD_LEN], const struct cm_peer *from,
		    const uint8_t to_ip[16])
{
	struct wire_cm_msg m;

	if (wire_cm_decode(mad, WIRE_MAD_LEN, &m))
		return;
	switch (m.hdr.attr_id) {
	case WIRE_CM_ATTR_REQ: cm_req_in(&m, from, to_ip); break;
	case WIRE_CM_ATTR_REP: cm_rep_in(&m, from, to_ip); break;
	case WIRE_CM_ATTR_RTU: cm_rtu_in(&m); break;
	case WIRE_CM_ATTR_REJ: cm_rej_in(&m, from); break;
	case WIRE_CM_ATTR_MRA: cm_mra_in(&m); break;
	case WIRE_CM_ATTR_DREQ: cm_dreq_in(&m, from, to_ip); break;
	case WIRE_CM_ATTR_DREP: cm_drep_in(&m); break;
	case WIRE_CM_ATTR_SIDR_REQ: cm_sidr_req_in(&m, from, to_ip); break;
	case WIRE_CM_ATTR_SIDR_REP: cm_sidr_rep_in(&m); break;
	default: break; /* LAP/APR: no path migration on RoCE */
	}
}

/* The REJ Linux would send for a service nobody listens on. */
static void no_listener(struct cm_id *c)
{
	struct cm_event *e = cm_event_conn(c, RDMA_CM_EVENT_REJECTED,
					WIRE_CM_REJ_INVALID_SERVICE_ID, NULL, 0);

	c->mad_pending = false;
	if (e) {
		memset(e->pdata, 0, CM_REJ_PDATA);
		e->ev.param.conn.private_data = e->pdata;
		e->ev.param.conn.private_data_len = CM_REJ_PDATA;
	}
	c->state = CM_TIMEWAIT;
	cm_post(c, e);
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
			cm_send_rej(c, WIRE_CM_REJ_TIMEOUT, WIRE_CM_MSG_REP, NULL, 0);
		cm_qp_to_err(c);
		c->state = CM_TIMEWAIT;
		cm_post(c, cm_event_conn(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0));
		break;
	case CM_DREQ_SENT:
		c->state = CM_TIMEWAIT;
		cm_post_disconnected(c);
		break;
	default:
		break;
	}
}

/* The peer's process is gone: its connection drops as a DREQ would
 * drop it (the kernel sends one for a process that dies). */
static void peer_gone(struct cm_id *c)
{
	if (c->state == CM_ESTABLISHED && c->id.qp_type != IBV_QPT_UD) {
		cm_qp_to_err(c);
		c->state = CM_TIMEWAIT;
		cm_post_disconnected(c);
	} else if (c->mad_pending) {
		give_up(c);
	}
}

/* ICMP "port unreachable" for a probe (cm/peer_probe.c): nobody holds
 * that host's port 4791 (no engine: the peer's process died with nobody
 * else there).  A DREQ sent there will get no DREP: the disconnect
 * completes now, not after every retry.  An established connection ends
 * at the second such answer. */
void cm_peer_unreachable(const struct cm_peer *to, int why)
{
	uint64_t now = cm_now_ms();
	char as[64];

	for (struct cm_id *c = cm_ids; c; c = c->next) {
		if (c->destroying || c->peer.port != to->port || memcmp(c->peer.ip, to->ip, 16))
			continue;
		/* A request to a host that has no RoCE port (or is not there)
		 * will get no answer: UNREACHABLE now, not after every retry. */
		if (c->mad_pending && (c->state == CM_REQ_SENT || c->state == CM_SIDR_REQ_SENT)) {
			cm_dbg("request to %s:%u: %s unreachable\n", cm_ip_str(to->ip, to->scope, as),
			       to->port, why == CM_UNREACH_PORT ? "port" : "host");
			c->mad_pending = false;
			cm_qp_to_err(c);
			c->state = CM_TIMEWAIT;
			cm_post(c, cm_event_conn(c, RDMA_CM_EVENT_UNREACHABLE,
						 why == CM_UNREACH_PORT ? -ECONNREFUSED : -EHOSTUNREACH,
						 NULL, 0));
			continue;
		}
		if (why != CM_UNREACH_PORT)
			continue;
		if (c->mad_pending && c->state == CM_DREQ_SENT) {
			cm_dbg("DREQ to %s:%u: port unreachable, disconnected\n",
			       cm_ip_str(to->ip, to->scope, as), to->port);
			give_up(c);
			continue;
		}
		if (c->state != CM_ESTABLISHED || c->peer_local)
			continue;
		if (!c->unreach_ms || now - c->unreach_ms > CM_UNREACH_MAX_MS) {
			c->unreach_ms = now;
		} else if (now - c->unreach_ms >= CM_UNREACH_GAP_MS) {
			cm_dbg("%s:%u: port unreachable twice, peer gone\n",
			       cm_ip_str(to->ip, to->scope, as), to->port);
			peer_gone(c);
		}
	}
}

int cm_conn_timers(uint64_t now)
{
	int next = -1;
	bool check = now - cm_last_liveness_ms >= CM_LIVENESS_MS;
	bool want_check = false;

	if (check)
		cm_last_liveness_ms = now;
	for (struct cm_id *c = cm_ids; c; c = c->next) {
		bool local_peer = c->peer_local && c->peer.port;

		if (c->destroying)
			continue;
		if (c->disc_at_ms) {
			if (c->state != CM_TIMEWAIT) {
				c->disc_at_ms = 0;
			} else if (c->disc_at_ms <= now) {
				c->disc_at_ms = 0;
				cm_post_disconnected(c);
			} else if (next < 0 || (int)(c->disc_at_ms - now) < next) {
				next = (int)(c->disc_at_ms - now);
			}
		}
		if (c->timewait_ms) {
			if (c->state != CM_TIMEWAIT) {
				c->timewait_ms = 0;
			} else if (c->timewait_ms <= now) {
				c->timewait_ms = 0;
				cm_post(c, cm_event_new(c, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0));
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
				c->mad_timeout_ms = cm_timeout_ms(CM_RESPONSE_TIMEOUT);
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
				peer_gone(c);
			}
		}
	}
	if (want_check && (next < 0 || next > CM_LIVENESS_MS))
		next = CM_LIVENESS_MS;
	{
		int probe = cm_probe_timers(now);

		if (probe >= 0 && (next < 0 || probe < next))
			next = probe;
	}
	{
		int held = cm_req_hold_timers(now);

		if (held >= 0 && (next < 0 || held < next))
			next = held;
	}
	return next;
}

void cm_conn_destroy(struct cm_id *c)
{
	c->mad_pending = false;
	switch (c->state) {
	case CM_REQ_SENT:
		cm_send_rej(c, WIRE_CM_REJ_TIMEOUT, WIRE_CM_MSG_REQ, NULL, 0);
		break;
	case CM_REQ_RCVD:
		if (c->id.qp_type != IBV_QPT_UD)
			cm_send_rej(c, WIRE_CM_REJ_CONSUMER_DEFINED, WIRE_CM_MSG_REQ, NULL, 0);
		cm_leave_backlog(c);
		break;
	case CM_REP_SENT:
	case CM_REP_RCVD:
		cm_send_rej(c, WIRE_CM_REJ_CONSUMER_DEFINED, WIRE_CM_MSG_OTHER, NULL, 0);
		break;
	case CM_ESTABLISHED:
		if (c->id.qp_type != IBV_QPT_UD)
			cm_send_dreq(c, false); /* the peer sees DISCONNECTED */
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
				cm_send_rej(child, WIRE_CM_REJ_CONSUMER_DEFINED, WIRE_CM_MSG_REQ, NULL, 0);
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
