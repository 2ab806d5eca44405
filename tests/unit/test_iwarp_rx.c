/* The RDMAP receive rules (transport/iwarp_rx.h) against a fake QP: a
 * region table and a queue of posted receives.  Segments come from the
 * real sender path (srn_iw_send_message cuts, the decoder reads back)
 * over a socketpair, so what is checked is what a peer's stream does:
 * a Send in pieces placed by MO and completed once, Send with
 * Invalidate, Writes, a Read Request within IRD and one beyond, Read
 * Responses with and without a Read outstanding, out-of-order MSN and
 * MO, no receive posted, a Write outside its region, a Terminate. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/t_util.h"
#include "transport/iwarp_rx.h"
#include "transport/iwarp_tcp.h"

#define TMO 2000

struct fake_qp {
	uint8_t region[8192];     /* STag 0x100, write access */
	uint8_t sink[4096];       /* STag 0x200, a Read's sink */
	uint8_t recv[2][3000];    /* posted receives */
	int recv_posted, recv_taken;
	uint32_t cur_msn;
	int sends_done, reads_requested, reads_done, terms;
	uint32_t last_len, last_inval;
	uint8_t last_op;
};

static int place_send(void *q, uint32_t msn, uint32_t mo, const uint8_t *d, size_t n,
		      struct iwarp_term_code *err)
{
	struct fake_qp *qp = q;

	if (mo == 0) {
		if (qp->recv_taken >= qp->recv_posted) {
			*err = (struct iwarp_term_code){ IWARP_LAYER_DDP, IWARP_DDP_ET_UNTAGGED,
							 IWARP_DDP_EC_U_MSN_NOBUF };
			return -1;
		}
		qp->recv_taken++;
		qp->cur_msn = msn;
	}
	if (mo + n > sizeof(qp->recv[0])) {
		*err = (struct iwarp_term_code){ IWARP_LAYER_DDP, IWARP_DDP_ET_UNTAGGED,
						 IWARP_DDP_EC_U_TOO_LONG };
		return -1;
	}
	memcpy(qp->recv[qp->recv_taken - 1] + mo, d, n);
	return 0;
}

static int place_tagged(void *q, uint32_t stag, uint64_t to, const uint8_t *d, size_t n,
			bool rresp, struct iwarp_term_code *err)
{
	struct fake_qp *qp = q;
	uint8_t *base = rresp ? qp->sink : qp->region;
	size_t cap = rresp ? sizeof(qp->sink) : sizeof(qp->region);

	if (stag != (rresp ? 0x200u : 0x100u)) {
		*err = (struct iwarp_term_code){ IWARP_LAYER_RDMAP, IWARP_RDMAP_ET_PROTECTION,
						 IWARP_RDMAP_EC_INVALID_STAG };
		return -1;
	}
	if (to > cap || n > cap - to) {
		*err = (struct iwarp_term_code){ IWARP_LAYER_RDMAP, IWARP_RDMAP_ET_PROTECTION,
						 IWARP_RDMAP_EC_BASE_BOUNDS };
		return -1;
	}
	memcpy(base + to, d, n);
	return 0;
}

static void send_done(void *q, uint32_t msn, uint32_t len, uint8_t op, uint32_t inval)
{
	struct fake_qp *qp = q;

	qp->sends_done += msn == qp->cur_msn;
	qp->last_len = len;
	qp->last_op = op;
	qp->last_inval = inval;
}

static void read_request(void *q, const struct iwarp_hdr *h)
{
	((struct fake_qp *)q)->reads_requested += h->read_size == 4096;
}

static void read_done(void *q)
{
	((struct fake_qp *)q)->reads_done++;
}

static void terminated(void *q, const struct iwarp_hdr *h)
{
	((struct fake_qp *)q)->terms += h->term.layer == IWARP_LAYER_RDMAP;
}

static const struct srn_iw_rx_ops ops = { place_send, place_tagged, send_done, read_request,
					  read_done, terminated };

static struct srn_iw_conn tx, rx;
static int last_segs; /* segments the last message became */
static struct srn_iw_rx st;
static struct fake_qp qp;

/* Sends one message through the real sender; applies every segment it
 * became.  Returns the first non-zero rule answer (or 0). */
static int deliver(const struct iwarp_hdr *h, const void *data, size_t len,
		   struct iwarp_term_code *err)
{
	int segs = (int)(len / 400) + 2, rc = 0; /* mulpdu 400: an upper bound */

	if (srn_iw_send_message(&tx, h, data, len, TMO))
		return -1000;
	/* read until the L segment of this message */
	last_segs = 0;
	for (int i = 0; i < segs; i++) {
		struct iwarp_hdr s;
		int r = srn_iw_recv_segment(&rx, &s, err, TMO);

		if (r)
			return -2000;
		last_segs++;
		if (!rc)
			rc = srn_iw_rx_segment(&st, &ops, &qp, &s, err);
		if (s.last)
			break;
	}
	return rc;
}

int main(void)
{
	int sv[2], rc;
	static uint8_t data[6000];
	struct iwarp_term_code err;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 3);
	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	T_ASSERT(srn_iw_conn_init(&tx, sv[0], 400) == 0 && srn_iw_conn_init(&rx, sv[1], 400) == 0,
		 "conns");
	tx.crc = rx.crc = true;
	srn_iw_rx_init(&st, 1);
	qp.recv_posted = 1;

	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_SEND, .msn = 1 }, data, 2500, &err);
	T_OK(last_segs == (2500 + 400 - IWARP_UNTAGGED_HDR_LEN - 1) / (400 - IWARP_UNTAGGED_HDR_LEN),
	     "2500 bytes at MULPDU 400: %d segments", last_segs);
	T_OK(rc == 0 && qp.sends_done == 1 && qp.last_len == 2500 &&
	     qp.last_op == IWARP_OP_SEND && !memcmp(qp.recv[0], data, 2500),
	     "2500-byte Send placed by MO, completed once (%d)", rc);
	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_SEND_INV, .msn = 2,
					  .rsvdulp = 0xabcd }, data, 10, &err);
	T_OK(rc == -EPROTO && err.layer == IWARP_LAYER_DDP && err.ecode == IWARP_DDP_EC_U_MSN_NOBUF,
	     "Send with no receive posted: DDP untagged 'no buffer'");
	qp.recv_posted = 2;
	srn_iw_rx_init(&st, 1); /* a fresh stream for each refusal */
	st.send_msn = 2;
	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_SEND_INV, .msn = 2,
					  .rsvdulp = 0xabcd }, data, 10, &err);
	T_OK(rc == 0 && qp.sends_done == 2 && qp.last_inval == 0xabcd,
	     "Send with Invalidate hands on the STag to invalidate");
	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_SEND, .msn = 5 }, data, 10, &err);
	T_OK(rc == -EPROTO && err.ecode == IWARP_DDP_EC_U_MSN_RANGE, "Send with MSN 5 for 3");
	srn_iw_rx_init(&st, 1);
	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_SEND, .msn = 1, .mo = 8 }, data, 10,
		     &err);
	T_OK(rc == -EPROTO && err.ecode == IWARP_DDP_EC_U_INVALID_MO, "Send starting at MO 8");

	srn_iw_rx_init(&st, 1);
	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_WRITE, .stag = 0x100, .to = 1000 },
		     data, 6000, &err);
	T_OK(rc == 0 && !memcmp(qp.region + 1000, data, 6000), "6000-byte Write placed at TO 1000");
	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_WRITE, .stag = 0x100, .to = 8000 },
		     data, 400, &err);
	T_OK(rc == -EPROTO && err.layer == IWARP_LAYER_RDMAP &&
	     err.etype == IWARP_RDMAP_ET_PROTECTION && err.ecode == IWARP_RDMAP_EC_BASE_BOUNDS,
	     "Write past the region: RDMAP protection, base/bounds");

	srn_iw_rx_init(&st, 1);
	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_READ_REQ, .msn = 1, .read_size = 4096 },
		     NULL, 0, &err);
	T_OK(rc == 0 && qp.reads_requested == 1, "Read Request within IRD 1 handed on");
	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_READ_REQ, .msn = 2, .read_size = 4096 },
		     NULL, 0, &err);
	T_OK(rc == -EPROTO && err.layer == IWARP_LAYER_RDMAP &&
	     err.ecode == IWARP_RDMAP_EC_CATASTROPHIC_STREAM, "a second one beyond IRD 1: refused");
	srn_iw_rx_rresp_sent(&st);
	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_READ_REQ, .msn = 2, .read_size = 4096 },
		     NULL, 0, &err);
	T_OK(rc == 0 && qp.reads_requested == 2, "after its response went out, the next one fits");
	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_READ_REQ, .msn = 9 }, NULL, 0, &err);
	T_OK(rc == -EPROTO && err.ecode == IWARP_DDP_EC_U_MSN_RANGE, "Read Request MSN 9 for 3");

	srn_iw_rx_init(&st, 1);
	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_READ_RESP, .stag = 0x200 }, data, 100,
		     &err);
	T_OK(rc == -EPROTO && err.ecode == IWARP_RDMAP_EC_OPCODE,
	     "a Read Response with no Read outstanding: unexpected opcode");
	st.orq_out = 1;
	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_READ_RESP, .stag = 0x200 }, data, 4096,
		     &err);
	T_OK(rc == 0 && qp.reads_done == 1 && st.orq_out == 0 && !memcmp(qp.sink, data, 4096),
	     "4096-byte Read Response in segments placed, Read done once");

	rc = deliver(&(struct iwarp_hdr){ .opcode = IWARP_OP_TERMINATE,
					  .term = { IWARP_LAYER_RDMAP, 1, 0 } }, NULL, 0, &err);
	T_OK(rc == 1 && qp.terms == 1, "Terminate reported");

	srn_iw_conn_fini(&tx);
	srn_iw_conn_fini(&rx);
	close(sv[0]);
	close(sv[1]);
	return t_summary();
}
