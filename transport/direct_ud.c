/* transport/direct_ud: UD SENDs to a QP of this host, delivered by the
 * sender in the target's memory (direct_send.c's delivery, with the GRH
 * slot in front) instead of as a datagram through the loopback device.
 *
 * A UD QP names its destination per work request, so it keeps a view of
 * each of its last few targets (DIRECT_UD_DESTS, replaced round robin),
 * each revalidated with one load as an RC QP's single target is.  The
 * target publishes its address and Q_Key with its rings; a SEND whose
 * Q_Key or address does not match, or that fails any other check, goes
 * as a datagram, and the target's ud_rx answers it as ever (drops it, or
 * completes the receive with an error). */
#include <stdlib.h>
#include <string.h>

#include "transport/direct.h"
#include "transport/direct_priv.h"
#include "transport/rc.h"

enum { DIRECT_UD_DESTS = 4 };

struct direct_ud {
	struct direct_qp *dest[DIRECT_UD_DESTS];
	unsigned int next;           /* the slot a new target takes */
};

void direct_ud_forget(struct srn_rc_state *rc)
{
	struct direct_ud *u = rc->direct_ud;

	if (!u)
		return;
	for (int i = 0; i < DIRECT_UD_DESTS; i++)
		direct_qp_free(u->dest[i]);
	free(u);
	rc->direct_ud = NULL;
}

/* The view of rc->dqpn at rc->peer (as ud_route set them), made on first
 * use; NULL where memory is not the way there (kept only for targets of
 * this host). */
static struct direct_qp *ud_dest(struct srn_rc_state *rc)
{
	struct direct_ud *u = rc->direct_ud;
	struct direct_qp *d;

	/* (a destination elsewhere costs no entry: it would push out the
	 * views of this host's targets among which a QP may be sending) */
	if (!direct_reachable(rc))
		return NULL;
	if (!u) {
		u = rc->direct_ud = calloc(1, sizeof(*u));
		if (!u)
			return NULL;
	}
	for (int i = 0; i < DIRECT_UD_DESTS; i++) {
		d = u->dest[i];
		if (d && d->dqpn == rc->dqpn && d->peer_family == rc->peer.family &&
		    !memcmp(d->peer_ip, rc->peer.ip, sizeof(d->peer_ip)))
			return d;
	}
	d = direct_qp_new(rc);
	if (!d || d->off) {
		direct_qp_free(d); /* (a QPN the registry cannot hold) */
		return NULL;
	}
	d->peer_family = rc->peer.family;
	memcpy(d->peer_ip, rc->peer.ip, sizeof(d->peer_ip));
	direct_qp_free(u->dest[u->next]);
	u->dest[u->next] = d;
	u->next = (u->next + 1) % DIRECT_UD_DESTS;
	return d;
}

/* The target's view, checked: still there, taking our Q_Key. */
static struct direct_qp *ud_target(struct srn_rc_state *rc, uint32_t qkey)
{
	struct direct_qp *d = ud_dest(rc);

	if (!d || !direct_qp_check(rc, d) || d->qkey != qkey)
		return NULL; /* (a wrong Q_Key: the target drops the datagram) */
	return d;
}

int direct_ud_send(struct srn_rc_state *rc, bool imm, uint32_t imm_be, bool solicited,
		   uint32_t qkey, uint32_t len, const struct iovec *pay, int npay)
{
	struct direct_qp *d = ud_target(rc, qkey);
	enum srn_counter c;

	if (!d || !direct_send_ud(rc, d, imm, imm_be, solicited, len, pay, npay, &c))
		return 0;
	rc_count(rc, c);
	return 1;
}

int direct_ud_post_now(struct srn_rc_state *rc, const struct ibv_send_wr *wr, uint32_t len)
{
	struct srn_qp *qp = rc->qp;
	bool imm = wr->opcode == IBV_WR_SEND_WITH_IMM;
	uint32_t qkey = ud_qkey(rc, wr->wr.ud.remote_qkey);
	struct iovec src[1];
	struct direct_qp *d;
	enum srn_counter c;

	/* (larger than the MTU, a group, no route: the general path's
	 * errors and datagrams) */
	if (len > rc->pmtu || srn_ah(wr->wr.ud.ah)->mcast ||
	    !ud_route(rc, wr->wr.ud.ah, wr->wr.ud.remote_qpn) || !(d = ud_target(rc, qkey)))
		return 0;
	if (!direct_wr_payload(d, wr, len, src))
		return 0;
	if (!direct_send_ud(rc, d, imm, imm ? wr->imm_data : 0,
			    (wr->send_flags & IBV_SEND_SOLICITED) != 0, len, src, len ? 1 : 0, &c))
		return 0;
	direct_done(rc, wr->wr_id, wr->opcode, len,
		    qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED), c);
	return 1;
}
