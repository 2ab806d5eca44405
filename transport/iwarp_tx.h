/* The send side of one iWARP QP's RDMAP stream: which work requests an
 * iWARP QP takes (siw's list), and the messages that carry SEND, WRITE,
 * READ and the answers to the peer's Read Requests, with the MSNs and
 * the ORD limit they need (transport/iwarp_tx.c).  The receive side's
 * state (transport/iwarp_rx.h) is shared: a READ counts up its
 * outstanding Reads, a Read Response sent frees a slot of its IRD. */
#ifndef SRN_TRANSPORT_IWARP_TX_H
#define SRN_TRANSPORT_IWARP_TX_H

#include <infiniband/verbs.h>

#include "transport/iwarp_rx.h"
#include "transport/iwarp_tcp.h"

struct srn_iw_tx {
	uint32_t send_msn;   /* the next Send's MSN (from 1) */
	uint32_t rreq_msn;   /* the next Read Request's MSN (from 1) */
	uint32_t ord;        /* Reads we may have outstanding */
};

void srn_iw_tx_init(struct srn_iw_tx *tx, uint32_t ord);

/* 0 for a work request opcode an iWARP QP takes (SEND, SEND with
 * Invalidate, RDMA WRITE, RDMA READ); EINVAL for the rest, as siw's
 * provider answers in ibv_post_send (immediate data, atomics, local
 * invalidate, MW bind, TSO), so no completion is made for them. */
int srn_iw_wr_opcode_check(enum ibv_wr_opcode op);

/* SEND (solicited: the SE variants; inval_stag != 0 with inv: the
 * Invalidate variants) from the pieces of iov. */
int srn_iw_tx_send(struct srn_iw_conn *c, struct srn_iw_tx *tx, bool solicited, bool inv,
		   uint32_t inval_stag, const struct iovec *iov, int iovcnt, int timeout_ms);

int srn_iw_tx_write(struct srn_iw_conn *c, uint32_t rstag, uint64_t rto,
		    const struct iovec *iov, int iovcnt, int timeout_ms);

/* RDMA READ of len bytes at (rstag, rto) into our (sink_stag, sink_to).
 * -EAGAIN while ORD Reads are outstanding (post it when one is done). */
int srn_iw_tx_read(struct srn_iw_conn *c, struct srn_iw_tx *tx, struct srn_iw_rx *rx,
		   uint32_t sink_stag, uint64_t sink_to, uint32_t len, uint32_t rstag,
		   uint64_t rto, int timeout_ms);

/* The Read Request alone, with the next MSN: for a caller that counts
 * the outstanding Reads itself (under its own lock, before sending). */
int srn_iw_tx_read_request(struct srn_iw_conn *c, struct srn_iw_tx *tx, uint32_t sink_stag,
			   uint64_t sink_to, uint32_t len, uint32_t rstag, uint64_t rto,
			   int timeout_ms);

/* Answers the peer's Read Request req with the bytes at src (the region
 * its source STag/TO named, resolved and checked by the caller).  rx
 * NULL: the caller frees the IRD slot itself (srn_iw_rx_rresp_sent). */
int srn_iw_tx_read_response(struct srn_iw_conn *c, struct srn_iw_rx *rx,
			    const struct iwarp_hdr *req, const void *src, int timeout_ms);

#endif
