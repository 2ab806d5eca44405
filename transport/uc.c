/* transport/uc: the Unreliable Connected responder (IBTA Vol 1 9.7.5.1,
 * 9.8).  Same packets as RC SEND/WRITE but nothing is acknowledged: a
 * missing packet (PSN gap) or a packet that does not continue the message
 * in progress drops that message silently; the receiver then waits for the
 * next FIRST or ONLY packet.  A dropped SEND keeps its receive WQE for the
 * next message, so nothing corrupted is ever completed.  The requester is
 * requester.c (no window, no retry, completes when the last packet left). */
#include <string.h>

#include "transport/rc.h"
#include "verbs/mw.h"
#include "verbs/shared_rings.h"

/* Abandon the message in progress (its receive WQE stays posted). */
static void uc_drop_msg(struct srn_rc_state *rc)
{
	if (rc->in_msg != RC_MSG_NONE)
		rc_count(rc, SRN_CNT_uc_msg_dropped);
	rc->in_msg = RC_MSG_NONE;
	rc->msg_off = 0;
}

static bool uc_rkey_ok(struct srn_rc_state *rc, uint32_t rkey, uint64_t va, uint64_t len,
		       void **out)
{
	struct srn_qp *qp = rc->qp;

	return srn_rkey_resolve(qp, rkey, va, len, IBV_ACCESS_REMOTE_WRITE, out) == SRN_MR_OK;
}

/* One SEND packet that continues (or starts) the message; false = drop. */
static bool uc_send(struct srn_rc_state *rc, const struct wire_pkt *k, uint32_t c)
{
	struct srn_qp *qp = rc->qp;
	struct srn_recv_wqe *r = responder_recv_wqe(rc);
	struct iovec iov[SRN_MAX_SGE];
	const uint8_t *src = k->payload;
	int n = 0;

	if (!r) {
		rc_count(rc, SRN_CNT_rx_drop_no_rwqe);
		return false;
	}
	if (rc->msg_off + k->payload_len > r->length) {
		/* the message does not fit the posted buffer: a local
		 * length error, as on RC (the QP stops) */
		responder_push_recv_wc(rc, r, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, k, 0);
		rc_qp_error(rc, IBV_EVENT_QP_FATAL);
		return true;
	}
	if (k->payload_len) {
		n = rc_sge_map(rc, qp->srq ? qp->srq->pd : qp->pd, r->sge, r->num_sge,
			       rc->msg_off, k->payload_len, IBV_ACCESS_LOCAL_WRITE,
			       iov, SRN_MAX_SGE);
		if (n < 0) {
			responder_push_recv_wc(rc, r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, k, 0);
			rc_qp_error(rc, IBV_EVENT_QP_FATAL);
			return true;
		}
	}
	for (int i = 0; i < n; i++) {
		memcpy(iov[i].iov_base, src, iov[i].iov_len);
		src += iov[i].iov_len;
	}
	rc->msg_off += k->payload_len;
	rc->in_msg = RC_MSG_SEND;
	if (c & WIRE_IS_LAST) {
		responder_push_recv_wc(rc, r, IBV_WC_SUCCESS, IBV_WC_RECV, k,
				       (uint32_t)rc->msg_off);
		rc->in_msg = RC_MSG_NONE;
		rc->msg_off = 0;
	}
	return true;
}

/* One WRITE packet; false = drop the message. */
static bool uc_write(struct srn_rc_state *rc, const struct wire_pkt *k, uint32_t c)
{
	void *target = NULL, *whole;
	struct srn_recv_wqe *r = NULL;

	if (!(rc->qp->a.attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
		return false;
	if (c & WIRE_IS_FIRST) {
		if ((c & WIRE_IS_LAST) ? k->dma_len != k->payload_len :
					 k->dma_len <= k->payload_len)
			return false;
		if (k->dma_len && !uc_rkey_ok(rc, k->rkey, k->va, k->dma_len, &whole))
			return false;
		rc->wr_va = k->va;
		rc->wr_rkey = k->rkey;
		rc->wr_len = k->dma_len;
		rc->msg_off = 0;
	} else if ((c & WIRE_IS_LAST) ? rc->msg_off + k->payload_len != rc->wr_len :
					rc->msg_off + k->payload_len >= rc->wr_len) {
		return false;
	}
	if (k->payload_len &&
	    !uc_rkey_ok(rc, rc->wr_rkey, rc->wr_va + rc->msg_off, k->payload_len, &target))
		return false;
	if ((c & WIRE_IS_LAST) && (c & WIRE_HAS_IMMDT)) {
		/* checked before anything lands: no WQE, no write */
		r = responder_recv_wqe(rc);
		if (!r) {
			rc_count(rc, SRN_CNT_rx_drop_no_rwqe);
			return false;
		}
	}
	if (k->payload_len)
		memcpy(target, k->payload, k->payload_len);
	rc->msg_off += k->payload_len;
	rc->in_msg = RC_MSG_WRITE;
	if (c & WIRE_IS_LAST) {
		if (r)
			responder_push_recv_wc(rc, r, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
					       k, rc->wr_len);
		rc->in_msg = RC_MSG_NONE;
		rc->msg_off = 0;
	}
	return true;
}

static void uc_rx(struct srn_rc_state *rc, const struct wire_pkt *k);

void uc_responder_rx(struct srn_rc_state *rc, const struct wire_pkt *k)
{
	struct srn_rq_ring *hdr = srn_qp_rq_hdr(rc->qp);

	uc_rx(rc, k);
	/* what a same-host sender back from packets waits for (its message
	 * and this one landed: transport/direct_send.c) */
	if (hdr)
		atomic_store_explicit(&hdr->uc_epsn, rc->epsn, memory_order_release);
}

static void uc_rx(struct srn_rc_state *rc, const struct wire_pkt *k)
{
	uint32_t c = wire_opcodes[k->opcode].caps;
	enum ibv_qp_state st = rc_state(rc);
	bool ok;

	if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) {
		rc_count(rc, SRN_CNT_rx_drop_qp_state);
		return;
	}
	if (!(c & WIRE_IS_REQ) || !(c & (WIRE_IS_SEND | WIRE_IS_WRITE)) ||
	    (c & WIRE_HAS_IETH)) {
		rc_count(rc, SRN_CNT_resp_drop);
		return;
	}
	if (k->psn != rc->epsn) {
		/* lost or reordered packets: the message in progress is
		 * gone; resynchronise on this packet's PSN */
		rc_count(rc, SRN_CNT_resp_psn_ahead);
		uc_drop_msg(rc);
	}
	rc->epsn = wire_psn_add(k->psn, 1);
	if (c & WIRE_IS_FIRST) {
		uc_drop_msg(rc); /* a new message ends an unfinished one */
	} else if (rc->in_msg == RC_MSG_NONE ||
		   (rc->in_msg == RC_MSG_SEND) != !!(c & WIRE_IS_SEND)) {
		rc_count(rc, SRN_CNT_resp_drop);
		uc_drop_msg(rc);
		return; /* waiting for a FIRST/ONLY */
	}
	if (k->payload_len > rc->pmtu ||
	    (!(c & WIRE_IS_LAST) && k->payload_len != rc->pmtu) ||
	    ((c & WIRE_IS_SEND) && rc->msg_off + k->payload_len > SRN_MAX_MSG_SIZE)) {
		rc_count(rc, SRN_CNT_resp_drop);
		uc_drop_msg(rc);
		return;
	}
	ok = (c & WIRE_IS_SEND) ? uc_send(rc, k, c) : uc_write(rc, k, c);
	if (!ok) {
		rc_count(rc, SRN_CNT_resp_drop);
		/* count it even if it was the message's first packet */
		rc->in_msg = RC_MSG_SEND;
		uc_drop_msg(rc);
	}
}
