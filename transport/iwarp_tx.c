/* The RDMAP send side of one iWARP stream (transport/iwarp_tx.h). */
#include "transport/iwarp_tx.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

void srn_iw_tx_init(struct srn_iw_tx *tx, uint32_t ord)
{
	memset(tx, 0, sizeof(*tx));
	tx->send_msn = 1;
	tx->rreq_msn = 1;
	tx->ord = ord;
}

int srn_iw_wr_opcode_check(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_READ:
		return 0;
	default:
		return EINVAL;
	}
}

int srn_iw_tx_send(struct srn_iw_conn *c, struct srn_iw_tx *tx, bool solicited, bool inv,
		   uint32_t inval_stag, const struct iovec *iov, int iovcnt, int timeout_ms)
{
	struct iwarp_hdr h = { .msn = tx->send_msn, .rsvdulp = inv ? inval_stag : 0 };
	int rc;

	h.opcode = inv ? (solicited ? IWARP_OP_SEND_SE_INV : IWARP_OP_SEND_INV)
		       : (solicited ? IWARP_OP_SEND_SE : IWARP_OP_SEND);
	rc = srn_iw_send_message_iov(c, &h, iov, iovcnt, timeout_ms);
	if (rc == 0)
		tx->send_msn++;
	return rc;
}

int srn_iw_tx_write(struct srn_iw_conn *c, uint32_t rstag, uint64_t rto,
		    const struct iovec *iov, int iovcnt, int timeout_ms)
{
	struct iwarp_hdr h = { .opcode = IWARP_OP_WRITE, .stag = rstag, .to = rto };

	return srn_iw_send_message_iov(c, &h, iov, iovcnt, timeout_ms);
}

int srn_iw_tx_read_request(struct srn_iw_conn *c, struct srn_iw_tx *tx, uint32_t sink_stag,
			   uint64_t sink_to, uint32_t len, uint32_t rstag, uint64_t rto,
			   int timeout_ms)
{
	struct iwarp_hdr h = { .opcode = IWARP_OP_READ_REQ, .msn = tx->rreq_msn,
			       .sink_stag = sink_stag, .sink_to = sink_to, .read_size = len,
			       .src_stag = rstag, .src_to = rto };
	int rc = srn_iw_send_message(c, &h, NULL, 0, timeout_ms);

	if (rc == 0)
		tx->rreq_msn++;
	return rc;
}

int srn_iw_tx_read(struct srn_iw_conn *c, struct srn_iw_tx *tx, struct srn_iw_rx *rx,
		   uint32_t sink_stag, uint64_t sink_to, uint32_t len, uint32_t rstag,
		   uint64_t rto, int timeout_ms)
{
	int rc;

	if (rx->orq_out >= tx->ord)
		return -EAGAIN;
	rc = srn_iw_tx_read_request(c, tx, sink_stag, sink_to, len, rstag, rto, timeout_ms);
	if (rc == 0)
		rx->orq_out++;
	return rc;
}

int srn_iw_tx_read_response(struct srn_iw_conn *c, struct srn_iw_rx *rx,
			    const struct iwarp_hdr *req, const void *src, int timeout_ms)
{
	struct iwarp_hdr h = { .opcode = IWARP_OP_READ_RESP, .stag = req->sink_stag,
			       .to = req->sink_to };
	int rc = srn_iw_send_message(c, &h, src, req->read_size, timeout_ms);

	if (rc == 0 && rx)
		srn_iw_rx_rresp_sent(rx);
	return rc;
}
