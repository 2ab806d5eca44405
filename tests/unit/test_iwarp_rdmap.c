/* The RDMAP receive rules (transport/iwarp_rx.h) and send side
 * (transport/iwarp_tx.h) against fake QPs: a region table and a queue
 * of posted receives each.  Segments come from the
 * real sender path (srn_iw_send_message cuts, the decoder reads back)
 * over a socketpair, so what is checked is what a peer's stream does:
 * a Send in pieces placed by MO and completed once, Send with
 * Invalidate, Writes, a Read Request within IRD and one beyond, Read
 * Responses with and without a Read outstanding, out-of-order MSN and
 * MO, no receive posted, a Write outside its region, a Terminate; then
 * the send side between two such QPs: siw's work request opcodes, a
 * Send gathered from SGEs, a Write of many tiny SGEs, a Read answered
 * by the peer's Read Response, ORD holding a second Read back. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/t_util.h"
#include "transport/iwarp_rx.h"
#include "transport/iwarp_tcp.h"
#include "transport/iwarp_tx.h"

#include <sys/uio.h>

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

/* A is the sending end of the rule tests (tx, socket sv[0]), B the
 * receiving one (rx, sv[1]); the send-side tests use both ways. */
static struct srn_iw_conn tx, rx;
static int last_segs; /* segments the last message became */
static struct srn_iw_rx st, st_a;
static struct fake_qp qp, qp_a;

/* Reads the segments of one message on conn (until its L segment, at
 * most max) and applies them to (s, q).  The first non-zero rule answer
 * (or 0); -2000 if the stream failed. */
static int apply_message(struct srn_iw_conn *conn, struct srn_iw_rx *s, struct fake_qp *q,
			 int max, struct iwarp_term_code *err)
{
	int rc = 0;

	last_segs = 0;
	for (int i = 0; i < max; i++) {
		struct iwarp_hdr h;

		if (srn_iw_recv_segment(conn, &h, err, TMO))
			return -2000;
		last_segs++;
		if (!rc)
			rc = srn_iw_rx_segment(s, &ops, q, &h, err);
		if (h.last)
			break;
	}
	return rc;
}

/* Sends one message from A through the real sender; B applies it. */
static int deliver(const struct iwarp_hdr *h, const void *data, size_t len,
		   struct iwarp_term_code *err)
{
	if (srn_iw_send_message(&tx, h, data, len, TMO))
		return -1000;
	return apply_message(&rx, &st, &qp, (int)(len / 400) + 2, err);
}

/* ---- the send side -------------------------------------------------- */

static uint8_t src[6000];

static void test_tx(void)
{
	static const enum ibv_wr_opcode ok_ops[] = { IBV_WR_SEND, IBV_WR_SEND_WITH_INV,
						     IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ };
	static const enum ibv_wr_opcode bad_ops[] = {
		IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND_WITH_IMM, IBV_WR_ATOMIC_CMP_AND_SWP,
		IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_LOCAL_INV, IBV_WR_BIND_MW, IBV_WR_TSO,
		IBV_WR_DRIVER1, IBV_WR_ATOMIC_WRITE,
	};
	struct srn_iw_tx ta, tb;
	struct iwarp_term_code err;
	struct iovec iov[45];
	struct iwarp_hdr req;
	int good = 0, rc;

	for (size_t i = 0; i < sizeof(ok_ops) / sizeof(ok_ops[0]); i++)
		good += srn_iw_wr_opcode_check(ok_ops[i]) == 0;
	for (size_t i = 0; i < sizeof(bad_ops) / sizeof(bad_ops[0]); i++)
		good += srn_iw_wr_opcode_check(bad_ops[i]) == EINVAL;
	T_OK(good == (int)(sizeof(ok_ops) / sizeof(ok_ops[0]) + sizeof(bad_ops) / sizeof(bad_ops[0])),
	     "SEND, SEND_WITH_INV, WRITE, READ taken; immediate, atomics, LOCAL_INV, BIND_MW, "
	     "TSO: EINVAL");

	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 13 + 5);
	memset(&qp, 0, sizeof(qp));
	srn_iw_rx_init(&st, 2);
	srn_iw_rx_init(&st_a, 2);
	srn_iw_tx_init(&ta, 1);
	srn_iw_tx_init(&tb, 2);
	qp.recv_posted = 2;

	/* a Send gathered from four SGEs, one empty; then a second Send
	 * (MSN 2: B's rules refuse anything else) */
	iov[0] = (struct iovec){ src, 1 };
	iov[1] = (struct iovec){ src + 1, 0 };
	iov[2] = (struct iovec){ src + 1, 1500 };
	iov[3] = (struct iovec){ src + 1501, 7 };
	rc = srn_iw_tx_send(&tx, &ta, true, true, 0x77, iov, 4, TMO);
	rc = rc ? rc : apply_message(&rx, &st, &qp, 10, &err);
	T_OK(rc == 0 && qp.sends_done == 1 && qp.last_len == 1508 &&
	     qp.last_op == IWARP_OP_SEND_SE_INV && qp.last_inval == 0x77 &&
	     !memcmp(qp.recv[0], src, 1508), "Send with SE and Invalidate from 4 SGEs (%d)", rc);
	rc = srn_iw_tx_send(&tx, &ta, false, false, 0x77, iov + 2, 1, TMO);
	rc = rc ? rc : apply_message(&rx, &st, &qp, 10, &err);
	T_OK(rc == 0 && qp.sends_done == 2 && qp.last_op == IWARP_OP_SEND && qp.last_inval == 0,
	     "a second Send carries MSN 2 and no STag (%d)", rc);

	/* a Write of 40 one-byte SGEs and one of 3000: a segment takes at
	 * most SRN_IW_SEG_IOV_MAX pieces */
	for (int i = 0; i < 40; i++)
		iov[i] = (struct iovec){ src + i, 1 };
	iov[40] = (struct iovec){ src + 40, 3000 };
	rc = srn_iw_tx_write(&tx, 0x100, 100, iov, 41, TMO);
	rc = rc ? rc : apply_message(&rx, &st, &qp, 20, &err);
	T_OK(rc == 0 && !memcmp(qp.region + 100, src, 3040),
	     "Write of 41 SGEs placed whole, in %d segments (%d)", last_segs, rc);
	T_OK(last_segs == 1 + (3040 - SRN_IW_SEG_IOV_MAX + 400 - IWARP_TAGGED_HDR_LEN - 1) /
			      (400 - IWARP_TAGGED_HDR_LEN),
	     "the first segment stopped at %d pieces", SRN_IW_SEG_IOV_MAX);

	/* A reads 5000 bytes of B's region into its sink; B answers */
	memcpy(qp.region, src, 5000);
	rc = srn_iw_tx_read(&tx, &ta, &st_a, 0x200, 0, 4096, 0x100, 0, TMO);
	T_OK(rc == 0 && st_a.orq_out == 1, "Read Request sent, one Read outstanding");
	T_OK(srn_iw_tx_read(&tx, &ta, &st_a, 0x200, 0, 4096, 0x100, 0, TMO) == -EAGAIN,
	     "a second Read waits: ORD 1");
	memset(&req, 0, sizeof(req));
	rc = srn_iw_recv_segment(&rx, &req, &err, TMO);
	rc = rc ? rc : srn_iw_rx_segment(&st, &ops, &qp, &req, &err);
	T_OK(rc == 0 && qp.reads_requested == 1 && st.irq_used == 1 && req.src_stag == 0x100,
	     "B: the Read Request within its IRD (%d)", rc);
	rc = srn_iw_tx_read_response(&rx, &st, &req, qp.region + req.src_to, TMO);
	T_OK(rc == 0 && st.irq_used == 0, "B: Read Response sent, IRD slot free");
	memset(qp_a.sink, 0, sizeof(qp_a.sink));
	rc = apply_message(&tx, &st_a, &qp_a, 20, &err);
	T_OK(rc == 0 && qp_a.reads_done == 1 && st_a.orq_out == 0 &&
	     !memcmp(qp_a.sink, src, 4096), "A: 4096 bytes placed in its sink, Read done (%d)", rc);
	T_OK(srn_iw_tx_read(&tx, &ta, &st_a, 0x200, 0, 16, 0x100, 0, TMO) == 0,
	     "then the next Read goes out (MSN 2)");
	rc = srn_iw_recv_segment(&rx, &req, &err, TMO);
	rc = rc ? rc : srn_iw_rx_segment(&st, &ops, &qp, &req, &err);
	T_OK(rc == 0 && req.msn == 2, "B takes it in sequence");
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

	test_tx();
	srn_iw_conn_fini(&tx);
	srn_iw_conn_fini(&rx);
	close(sv[0]);
	close(sv[1]);
	return t_summary();
}
