/* Disconnection (IBTA 12.9.7): rdma_disconnect sends a DREQ and moves the
 * QP to error; the peer answers DREP (its QP goes to error when its
 * application disconnects too) and both sides report DISCONNECTED,
 * then TIMEWAIT_EXIT after the time wait.  Crossing DREQs, repeats and
 * DREQs for connections already gone are all answered with a DREP. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm/conn.h"
#include "cm/iwarp_cm.h"
#include "verbs/export.h"

/* ---- disconnection ------------------------------------------------------- */

void cm_send_dreq(struct cm_id *c, bool tracked)
{
	struct wire_cm_msg m;
	uint8_t out[WIRE_MAD_LEN];

	c->tid = (uint64_t)cm_rand32() << 32 | cm_rand32();
	cm_msg_init(&m, WIRE_CM_ATTR_DREQ, c->tid);
	m.dreq.local_comm_id = c->local_comm_id;
	m.dreq.remote_comm_id = c->remote_comm_id;
	m.dreq.remote_qpn_eecn = c->remote_qpn;
	if (tracked) {
		/* a dead host's answer to a probe ends the wait for a DREP */
		if (!c->peer_local)
			cm_probe_soon(&c->peer);
		cm_send_tracked(c, &m, c->peer_cm_timeout ? c->peer_cm_timeout : CM_RESPONSE_TIMEOUT);
	}
	else
		cm_send_msg(c, &m, out);
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
	if (cm_iw_id(c))
		err = cm_iw_disconnect(c, &wait);
	else switch (c->state) {
	case CM_ESTABLISHED:
	case CM_REP_SENT:
		cm_qp_to_err(c);
		cm_send_dreq(c, true);
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

void cm_post_disconnected(struct cm_id *c)
{
	/* The connection's comm ids stay reserved for the time wait, then
	 * the application hears TIMEWAIT_EXIT (if the id still exists). */
	c->timewait_ms = cm_now_ms() + CM_TIMEWAIT_MS;
	cm_agent_wake();
	if (c->sync)
		c->sync_disc_wait = true;
	cm_post(c, cm_event_conn(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0));
}

void cm_post_held(struct cm_channel *ch)
{
	for (struct cm_id *c = cm_ids; c; c = c->next)
		if (c->disc_at_ms && c->chan == ch) {
			c->disc_at_ms = 0;
			if (c->state == CM_TIMEWAIT && !c->destroying)
				cm_post_disconnected(c);
		}
}

void cm_dreq_in(const struct wire_cm_msg *m, const struct cm_peer *from,
		    const uint8_t to_ip[16])
{
	struct cm_id *c = cm_find_by_local(m->dreq.remote_comm_id);
	struct wire_cm_msg rep;

	cm_msg_init(&rep, WIRE_CM_ATTR_DREP, m->hdr.tid);
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
	cm_send_reply(c, &rep);
	/* The QP stays as it is until the application disconnects or
	 * destroys it, as with Linux's rdma_cm: what the peer sent before its
	 * DREQ still lands (its packets come through the engine's socket and
	 * may be read after this MAD). */
	switch (c->state) {
	case CM_ESTABLISHED:
	case CM_REP_SENT:
	case CM_DREQ_SENT: {
		/* (crossing DREQs: we disconnected first, nothing to wait for) */
		bool grace = c->state != CM_DREQ_SENT && c->id.qp && !c->sync;

		c->mad_pending = false;
		c->state = CM_TIMEWAIT;
		if (!grace) {
			cm_post_disconnected(c);
			break;
		}
		/* The peer's last messages are in our CQ already, but an
		 * application that read its CQ empty just before they came
		 * and reads its events next would see DISCONNECTED first
		 * (libfabric's RxM then destroys the QP, and with it those
		 * completions).  A moment's grace lets it poll them, as a
		 * NIC's DREQ comes a network round trip after the data. */
		c->disc_at_ms = cm_now_ms() + CM_DREQ_GRACE_MS;
		cm_agent_wake();
		break;
	}
	default:
		break;
	}
}

void cm_drep_in(const struct wire_cm_msg *m)
{
	struct cm_id *c = cm_find_by_local(m->drep.remote_comm_id);

	if (!c || c->state != CM_DREQ_SENT || c->remote_comm_id != m->drep.local_comm_id)
		return;
	c->mad_pending = false;
	c->state = CM_TIMEWAIT;
	cm_post_disconnected(c);
}
