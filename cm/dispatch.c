/* MAD dispatch, the protocol timers (retransmission, same-host peer
 * liveness, time wait) and protocol teardown when an id is destroyed. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm/conn.h"
#include "verbs/export.h"

/* ---- dispatch, timers, teardown ------------------------------------------ */

void cm_conn_mad_in(const uint8_t mad[WIRE_MAD_LEN], const struct cm_peer *from,
		    const uint8_t to_ip[4])
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
				if (c->state == CM_ESTABLISHED && c->id.qp_type != IBV_QPT_UD) {
					cm_qp_to_err(c);
					c->state = CM_TIMEWAIT;
					cm_post_disconnected(c);
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
