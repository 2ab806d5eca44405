/* The RDMAP receive rules of one iWARP stream (transport/iwarp_rx.h).
 * TCP delivers in order, so every untagged segment must continue the
 * message in progress exactly: the expected MSN, MO the bytes so far. */
#include "transport/iwarp_rx.h"

#include <errno.h>
#include <string.h>

void srn_iw_rx_init(struct srn_iw_rx *st, uint32_t ird)
{
	memset(st, 0, sizeof(*st));
	st->send_msn = 1; /* RFC 5041 5.1: MSN starts at 1 on each queue */
	st->rreq_msn = 1;
	st->ird = ird;
}

void srn_iw_rx_rresp_sent(struct srn_iw_rx *st)
{
	if (st->irq_used)
		st->irq_used--;
}

static int term(struct iwarp_term_code *err, uint8_t layer, uint8_t etype, uint8_t ecode)
{
	err->layer = layer;
	err->etype = etype;
	err->ecode = ecode;
	return -EPROTO;
}

static int rx_send(struct srn_iw_rx *st, const struct srn_iw_rx_ops *ops, void *qp,
		   const struct iwarp_hdr *h, struct iwarp_term_code *err)
{
	if (h->msn != st->send_msn)
		return term(err, IWARP_LAYER_DDP, IWARP_DDP_ET_UNTAGGED,
			    IWARP_DDP_EC_U_MSN_RANGE);
	if (h->mo != st->send_mo)
		return term(err, IWARP_LAYER_DDP, IWARP_DDP_ET_UNTAGGED,
			    IWARP_DDP_EC_U_INVALID_MO);
	if ((uint64_t)st->send_mo + h->payload_len > UINT32_MAX)
		return term(err, IWARP_LAYER_DDP, IWARP_DDP_ET_UNTAGGED, IWARP_DDP_EC_U_TOO_LONG);
	/* an empty first segment still takes its receive */
	if ((h->payload_len || h->mo == 0) &&
	    ops->place_send(qp, h->msn, h->mo, h->payload, h->payload_len, err))
		return -EPROTO;
	st->send_mo += (uint32_t)h->payload_len;
	if (h->last) {
		ops->send_done(qp, h->msn, st->send_mo, h->opcode,
			       h->opcode == IWARP_OP_SEND_INV || h->opcode == IWARP_OP_SEND_SE_INV
				       ? h->rsvdulp : 0);
		st->send_msn++;
		st->send_mo = 0;
	}
	return 0;
}

static int rx_read_request(struct srn_iw_rx *st, const struct srn_iw_rx_ops *ops, void *qp,
			   const struct iwarp_hdr *h, struct iwarp_term_code *err)
{
	if (h->msn != st->rreq_msn)
		return term(err, IWARP_LAYER_DDP, IWARP_DDP_ET_UNTAGGED,
			    IWARP_DDP_EC_U_MSN_RANGE);
	/* more than IRD at once: siw terminates the stream */
	if (st->irq_used >= st->ird)
		return term(err, IWARP_LAYER_RDMAP, IWARP_RDMAP_ET_OPERATION,
			    IWARP_RDMAP_EC_CATASTROPHIC_STREAM);
	st->irq_used++;
	st->rreq_msn++;
	ops->read_request(qp, h);
	return 0;
}

static int rx_tagged(struct srn_iw_rx *st, const struct srn_iw_rx_ops *ops, void *qp,
		     const struct iwarp_hdr *h, struct iwarp_term_code *err)
{
	bool rresp = h->opcode == IWARP_OP_READ_RESP;

	/* a Read Response nobody asked for */
	if (rresp && !st->in_rresp && st->orq_out == 0)
		return term(err, IWARP_LAYER_RDMAP, IWARP_RDMAP_ET_OPERATION, IWARP_RDMAP_EC_OPCODE);
	if (h->payload_len &&
	    ops->place_tagged(qp, h->stag, h->to, h->payload, h->payload_len, rresp, err))
		return -EPROTO;
	if (rresp) {
		st->in_rresp = !h->last;
		if (h->last) {
			st->orq_out--;
			ops->read_done(qp);
		}
	}
	return 0;
}

int srn_iw_rx_segment(struct srn_iw_rx *st, const struct srn_iw_rx_ops *ops, void *qp,
		      const struct iwarp_hdr *h, struct iwarp_term_code *err)
{
	switch (h->opcode) {
	case IWARP_OP_SEND:
	case IWARP_OP_SEND_INV:
	case IWARP_OP_SEND_SE:
	case IWARP_OP_SEND_SE_INV:
		return rx_send(st, ops, qp, h, err);
	case IWARP_OP_READ_REQ:
		return rx_read_request(st, ops, qp, h, err);
	case IWARP_OP_WRITE:
	case IWARP_OP_READ_RESP:
		return rx_tagged(st, ops, qp, h, err);
	case IWARP_OP_TERMINATE:
		ops->terminated(qp, h);
		return 1;
	default:
		return term(err, IWARP_LAYER_RDMAP, IWARP_RDMAP_ET_OPERATION, IWARP_RDMAP_EC_OPCODE);
	}
}
