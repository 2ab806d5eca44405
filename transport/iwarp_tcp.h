/* iWARP over one TCP connection: the MPA request/reply exchange that
 * starts it (transport/iwarp_mpa_conn.c) and the FPDU stream after it
 * (transport/iwarp_fpdu_io.c), on a connected socket the caller owns.
 * docs/iwarp.md describes what is and is not wired to QPs yet.
 *
 * Every call is bounded by timeout_ms and never blocks past it (the
 * socket may be blocking or not: each read or write waits in poll first
 * and then does not block).  Errors are negative errno values:
 *   -ETIMEDOUT     the peer did not send or take the bytes in time
 *   -ECONNRESET    the peer closed the connection (or reset it)
 *   -ECONNREFUSED  the peer's MPA reply rejected the connection
 *   -EPROTO        malformed MPA frame or DDP/RDMAP header
 *   -EBADMSG       an FPDU whose CRC32c does not match
 *   -EOPNOTSUPP    the peer insists on MPA markers
 * and the socket's own errors. */
#ifndef SRN_TRANSPORT_IWARP_TCP_H
#define SRN_TRANSPORT_IWARP_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/iwarp.h"

/* The largest FPDU: a 16-bit ULPDU length, pad and CRC. */
#define SRN_IW_FPDU_MAX (IWARP_FPDU_LEN_BYTES + 0xffff + 3 + IWARP_FPDU_CRC_LEN)

struct srn_iw_conn {
	int fd;                 /* connected TCP socket (the caller's) */
	bool crc;               /* CRC32c negotiated (either side asked) */
	uint16_t ird, ord;      /* negotiated: Read Requests we serve at once,
				 * Read Requests we may have outstanding */
	uint8_t rev;            /* MPA revision in use */
	size_t mulpdu;          /* largest ULPDU this side sends */
	int64_t tx_hold_until;  /* no FPDU before this (srn_iw_deadline
				 * clock, ms; 0: none): see cm/iwarp_cm.c */
	/* receive side: bytes read from the socket, not yet handed out */
	uint8_t *rx;            /* SRN_IW_FPDU_MAX bytes */
	size_t rx_start, rx_end;
};

/* What one side offers in its MPA frame. */
struct srn_iw_mpa_params {
	bool want_crc;
	uint16_t ird, ord;      /* at most IWARP_MPA_IRD_ORD_MAX */
	const void *pdata;      /* the ULP's private data (rdma_cm's) */
	uint16_t pdata_len;     /* at most IWARP_MPA_PD_MAX - 4 */
};

/* fd is kept (not closed by srn_iw_conn_fini); mulpdu is clamped to what a
 * 16-bit ULPDU length allows.  0 or -ENOMEM. */
int srn_iw_conn_init(struct srn_iw_conn *c, int fd, size_t mulpdu);
void srn_iw_conn_fini(struct srn_iw_conn *c);
/* The largest ULPDU for a connected socket: one FPDU per TCP segment
 * (TCP_MAXSEG), with no pad. */
size_t srn_iw_mulpdu_for(int fd);

/* ---- MPA (transport/iwarp_mpa_conn.c) ---------------------------------- */

/* Active side, once TCP is connected: sends an MPA v2 request and reads
 * the reply.  On 0 the connection is in full operation (c->crc, ird, ord
 * set); peer_pd (IWARP_MPA_PD_MAX bytes) gets the reply's private data,
 * also on -ECONNREFUSED (the rejecting peer's reason). */
int srn_iw_mpa_initiate(struct srn_iw_conn *c, const struct srn_iw_mpa_params *p,
			uint8_t *peer_pd, uint16_t *peer_pd_len, int timeout_ms);

/* Passive side: reads the MPA request (buf: IWARP_MPA_RR_HDR_LEN +
 * IWARP_MPA_PD_MAX bytes, req points into it).  A request for markers
 * is answered with a reject here and returns -EOPNOTSUPP. */
int srn_iw_mpa_read_request(struct srn_iw_conn *c, struct iwarp_mpa_rr *req, uint8_t *buf,
			    int timeout_ms);

/* Passive side: answers req, accepting (the connection is then in full
 * operation) or rejecting with p's private data. */
int srn_iw_mpa_respond(struct srn_iw_conn *c, const struct iwarp_mpa_rr *req,
		       const struct srn_iw_mpa_params *p, bool reject, int timeout_ms);

/* ---- FPDUs (transport/iwarp_fpdu_io.c) --------------------------------- */

/* Sends one message as FPDUs of at most c->mulpdu: h is the first
 * segment's header (opcode, STag/TO or MSN, ...); later segments advance
 * TO (tagged) or MO (untagged); L is set on the last one only.  Read
 * Requests and Terminates go whole, in one FPDU. */
int srn_iw_send_message(struct srn_iw_conn *c, const struct iwarp_hdr *h,
			const void *payload, size_t len, int timeout_ms);
/* The same gathering the payload from iov (a work request's SGEs); a
 * segment takes at most SRN_IW_SEG_IOV_MAX pieces, so many tiny pieces
 * make shorter segments. */
#define SRN_IW_SEG_IOV_MAX 32
struct iovec;
int srn_iw_send_message_iov(struct srn_iw_conn *c, const struct iwarp_hdr *h,
			    const struct iovec *iov, int iovcnt, int timeout_ms);

/* Reads the next FPDU and decodes its DDP segment into h; h->payload
 * points into c->rx and is good until the next call.  -EPROTO with *err
 * the Terminate to answer; -EBADMSG (CRC) answers with LLP CRC error. */
int srn_iw_recv_segment(struct srn_iw_conn *c, struct iwarp_hdr *h,
			struct iwarp_term_code *err, int timeout_ms);

/* Shared by both files: all n bytes, or an error, within the deadline
 * (an absolute CLOCK_MONOTONIC time in ms, srn_iw_deadline()). */
int srn_iw_write_all(int fd, const void *buf, size_t n, int64_t deadline);
int srn_iw_read_all(int fd, void *buf, size_t n, int64_t deadline);
int64_t srn_iw_deadline(int timeout_ms);

#endif
