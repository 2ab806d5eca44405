/* transport/xrc: the XRC target's receive side.  An XRC QP is an RC QP to
 * the engines (requester, responder, completer; rc->xrc set), with XRC's
 * opcodes (rc_tx) and packets only, never the same-host direct path.
 * What differs is where a request lands: each carries an XRCETH naming an
 * XRC SRQ, which must exist in the target QP's XRC domain (else: NAK
 * Invalid Request); the SRQ supplies the receive WQE, the CQ and the PD
 * that rkeys and lkeys are checked in (responder.c, through rc->xsrq). */
#include "transport/rc.h"

void xrc_responder_rx(struct srn_rc_state *rc, const struct wire_pkt *pkt)
{
	if (rc->qp->ex.qp_base.qp_type != IBV_QPT_XRC_RECV) {
		rc_count(rc, SRN_CNT_rx_drop_not_rc); /* a request to an initiator */
		return;
	}
	rc->xsrq = srn_xrc_srq_get(rc->qp, pkt->xrcsrq);
	responder_rx(rc, pkt);
	srn_xrc_srq_put(rc->xsrq);
	rc->xsrq = NULL;
}
