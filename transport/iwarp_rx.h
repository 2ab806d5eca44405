/* The receive side of one iWARP QP's RDMAP stream (RFC 5040 5-6, RFC 5041
 * 5): what each decoded DDP segment means, in order, checked against the
 * stream's state (Send MSN and MO, Read Request MSN, IRD and ORD), with
 * the QP's memory and queues reached through callbacks so the rules can
 * be tested alone (transport/iwarp_rx.c).  Every refusal names the
 * Terminate to send, with siw's codes where siw's source shows them. */
#ifndef SRN_TRANSPORT_IWARP_RX_H
#define SRN_TRANSPORT_IWARP_RX_H

#include "wire/iwarp.h"

struct srn_iw_rx_ops {
	/* Copies a Send segment into the receive of message msn at offset
	 * mo (mo 0: the message starts; take the next posted receive).
	 * 0, or -1 with *err (no receive posted, past its end). */
	int (*place_send)(void *qp, uint32_t msn, uint32_t mo, const uint8_t *data, size_t len,
			  struct iwarp_term_code *err);
	/* Copies a Write (read_resp false) or Read Response segment to TO
	 * of the region STag names, checking its access.  0 or -1 + *err. */
	int (*place_tagged)(void *qp, uint32_t stag, uint64_t to, const uint8_t *data,
			    size_t len, bool read_resp, struct iwarp_term_code *err);
	/* A whole Send message arrived (opcode: which Send; inval_stag for
	 * the Invalidate variants). */
	void (*send_done)(void *qp, uint32_t msn, uint32_t len, uint8_t opcode, uint32_t inval_stag);
	/* A Read Request to answer (its fields in h). */
	void (*read_request)(void *qp, const struct iwarp_hdr *h);
	/* The oldest outstanding Read has all its response. */
	void (*read_done)(void *qp);
	/* The peer sent a Terminate. */
	void (*terminated)(void *qp, const struct iwarp_hdr *h);
};

struct srn_iw_rx {
	uint32_t send_msn;    /* the Send message in progress or next (from 1) */
	uint32_t send_mo;     /* its bytes so far */
	uint32_t rreq_msn;    /* the next Read Request's MSN (from 1) */
	uint32_t ird;         /* Read Requests this side serves at once */
	uint32_t irq_used;    /* ... being served now */
	uint32_t orq_out;     /* our Reads awaiting a response (the send side
			       * counts them up) */
	bool in_rresp;        /* a Read Response is part way in */
};

void srn_iw_rx_init(struct srn_iw_rx *st, uint32_t ird);

/* Applies one decoded segment.  0; 1 when it was a Terminate (the QP
 * goes to error); -EPROTO with *err the Terminate to send. */
int srn_iw_rx_segment(struct srn_iw_rx *st, const struct srn_iw_rx_ops *ops, void *qp,
		      const struct iwarp_hdr *h, struct iwarp_term_code *err);

/* The send side finished answering one Read Request. */
void srn_iw_rx_rresp_sent(struct srn_iw_rx *st);

#endif
