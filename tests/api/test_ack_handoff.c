/* A thread that holds one QP's lock must not stall the NIC's work for the
 * others, nor lose that QP's ACK (transport/rc.h ack_box).
 *
 * ibv_wr_start holds the QP's lock until ibv_wr_complete or ibv_wr_abort,
 * as an application thread inside post_send holds it while its packets
 * leave.  Here a1's lock is held that way while the ACK of a1's WRITE
 * comes back (b1's lock, held the same way until then, keeps the ACK from
 * coming earlier); a receiving thread that slept on a1's lock would hold
 * up the socket meanwhile.  On the UDP path (ACKs exist only there):
 *   - a WRITE on a2, a QP of the same context, completes while a1's lock
 *     is held;
 *   - a1's WRITE does not complete while its lock is held;
 *   - it completes once the lock is let go, long before the 1 s ACK
 *     timeout a lost ACK would wait for;
 *   - both writes' data landed.
 * Four rounds.  Then a SEND from b1 reaches a1 while this thread holds
 * a1's lock that way and polls a1's CQ: the polls return (no inline
 * receive waits for the lock its own thread holds), and the receive
 * completes once the lock is let go. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

enum { ROUNDS = 4, LEN = 3000, HOLD_MS = 30, TIMEOUT_ATTR = 18 /* ~1 s */ };

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char *buf;
	union ibv_gid gid;
};

static int side_open(struct side *s)
{
	s->ctx = t_lo_open();
	s->pd = ibv_alloc_pd(s->ctx);
	s->buf = aligned_alloc(4096, 1 << 16);
	if (!s->pd || !s->buf || ibv_query_gid(s->ctx, 1, 0, &s->gid))
		return -1;
	memset(s->buf, 0, 1 << 16);
	s->mr = ibv_reg_mr(s->pd, s->buf, 1 << 16,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	return s->mr ? 0 : -1;
}

static struct ibv_qp *qp_new(struct side *s, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = s->pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE,
	};

	return ibv_create_qp_ex(s->ctx, &ia);
}

static int connect_pair(struct ibv_qp *x, struct side *sx, struct ibv_qp *y, struct side *sy)
{
	struct t_rc_attr rx = { .access = IBV_ACCESS_REMOTE_WRITE, .dest_qpn = y->qp_num,
				.dgid = sy->gid, .hop_limit = 1, .min_rnr_timer = 1,
				.rd_atomic = 1, .timeout = TIMEOUT_ATTR };
	struct t_rc_attr ry = rx;

	ry.dest_qpn = x->qp_num;
	ry.dgid = sx->gid;
	return t_qp_rc_connect(x, &rx) || t_qp_rc_connect(y, &ry) ? -1 : 0;
}

static int post_op(struct ibv_qp *qp, enum ibv_wr_opcode op, struct side *s, size_t off,
		   struct side *to, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf + off, .length = LEN,
			       .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)to->buf + off;
	wr.wr.rdma.rkey = to->mr->rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static int write_to(struct ibv_qp *qp, struct side *s, size_t off, struct side *to,
		    uint64_t wr_id)
{
	return post_op(qp, IBV_WR_RDMA_WRITE, s, off, to, wr_id);
}

static void fill(char *p, unsigned seed)
{
	for (int i = 0; i < LEN; i++)
		p[i] = (char)(i * 31 + seed * 7 + 1);
}

int main(int argc, char **argv)
{
	struct side x, y;
	struct ibv_cq *cq1, *cq2, *ycq;
	struct ibv_qp *a1, *a2, *b1, *b2;
	struct ibv_qp_ex *a1x, *b1x;
	struct ibv_wc wc;

	/* ACKs, and so the box, exist only on the packet path; the library
	 * reads the setting when it loads, so run again with it */
	(void)argc;
	if (!getenv("SOFTRNIC_TRANSPORT") || strcmp(getenv("SOFTRNIC_TRANSPORT"), "udp")) {
		setenv("SOFTRNIC_TRANSPORT", "udp", 1);
		execv("/proc/self/exe", argv);
		t_bail("re-exec with SOFTRNIC_TRANSPORT=udp");
	}
	if (side_open(&x) || side_open(&y))
		t_bail("contexts, PDs, MRs");
	cq1 = ibv_create_cq(x.ctx, 16, NULL, NULL, 0);
	cq2 = ibv_create_cq(x.ctx, 16, NULL, NULL, 0);
	ycq = ibv_create_cq(y.ctx, 16, NULL, NULL, 0);
	if (!cq1 || !cq2 || !ycq)
		t_bail("CQs");
	a1 = qp_new(&x, cq1);
	a2 = qp_new(&x, cq2);
	b1 = qp_new(&y, ycq);
	b2 = qp_new(&y, ycq);
	T_OK(a1 && a2 && b1 && b2, "four RC QPs: a1, a2 on one context, b1, b2 on another");
	if (!a1 || !a2 || !b1 || !b2)
		return t_summary();
	T_OK(!connect_pair(a1, &x, b1, &y) && !connect_pair(a2, &x, b2, &y),
	     "a1-b1 and a2-b2 connected (ACK timeout ~1 s)");
	a1x = ibv_qp_to_qp_ex(a1);
	b1x = ibv_qp_to_qp_ex(b1);

	for (unsigned r = 0; r < ROUNDS; r++) {
		size_t o1 = 0, o2 = 1 << 15;
		double t0, held, waited;
		int n1, n2;

		fill(x.buf + o1, 2 * r);
		fill(x.buf + o2, 2 * r + 1);
		/* b1's lock first, so that no ACK can come back before a1's
		 * lock is held: b1's responder waits for it */
		ibv_wr_start(b1x);
		T_OK(!write_to(a1, &x, o1, &y, 100 + r), "round %u: WRITE on a1 posted", r);
		ibv_wr_start(a1x);
		t0 = t_now();
		ibv_wr_abort(b1x);
		usleep(HOLD_MS * 1000); /* its ACK comes back meanwhile */
		T_OK(!write_to(a2, &x, o2, &y, 200 + r), "round %u: WRITE on a2 posted", r);
		n2 = t_poll_cq(cq2, &wc, 1, 2000);
		held = t_now() - t0;
		T_OK(n2 == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 200 + r,
		     "round %u: a2's WRITE completes while a1's lock is held (%d, %s, %.1f ms)",
		     r, n2, n2 == 1 ? ibv_wc_status_str(wc.status) : "-", held * 1e3);
		n1 = ibv_poll_cq(cq1, 1, &wc);
		T_OK(n1 == 0, "round %u: a1's WRITE not completed while its lock is held", r);
		ibv_wr_abort(a1x);
		t0 = t_now();
		n1 = n1 ? n1 : t_poll_cq(cq1, &wc, 1, 3000);
		waited = t_now() - t0;
		T_OK(n1 == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 100 + r &&
			     waited < 0.5,
		     "round %u: a1's WRITE completes once the lock is let go (%.1f ms; a lost "
		     "ACK: >= 1000)", r, waited * 1e3);
		T_OK(!memcmp(x.buf + o1, y.buf + o1, LEN) && !memcmp(x.buf + o2, y.buf + o2, LEN),
		     "round %u: both writes' data landed", r);
	}

	{
		struct ibv_sge sge = { .addr = (uintptr_t)x.buf + 40000, .length = LEN,
				       .lkey = x.mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 300, .sg_list = &sge, .num_sge = 1 }, *rbad;
		double t0;
		int n;

		fill(y.buf + 40000, 99);
		T_OK(!ibv_post_recv(a1, &rwr, &rbad), "a receive posted on a1");
		ibv_wr_start(a1x);
		T_OK(!post_op(b1, IBV_WR_SEND, &y, 40000, &x, 400),
		     "b1 SENDs to a1 while a1's lock is held through ibv_wr_start");
		t0 = t_now();
		n = t_poll_cq(cq1, &wc, 1, HOLD_MS);
		T_OK(n == 0 && t_now() - t0 < 2.0,
		     "polling a1's CQ meanwhile returns, with nothing (%d)", n);
		ibv_wr_abort(a1x);
		n = t_poll_cq(cq1, &wc, 1, 3000);
		T_OK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 300 &&
			     wc.opcode == IBV_WC_RECV && wc.byte_len == LEN,
		     "the SEND is received once the lock is let go");
		T_OK(!memcmp(x.buf + 40000, y.buf + 40000, LEN), "its data landed");
		n = t_poll_cq(ycq, &wc, 1, 3000);
		T_OK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 400,
		     "b1's SEND completes");
	}

	ibv_destroy_qp(a1);
	ibv_destroy_qp(a2);
	ibv_destroy_qp(b1);
	ibv_destroy_qp(b2);
	ibv_destroy_cq(cq1);
	ibv_destroy_cq(cq2);
	ibv_destroy_cq(ycq);
	ibv_dereg_mr(x.mr);
	ibv_dereg_mr(y.mr);
	ibv_dealloc_pd(x.pd);
	ibv_dealloc_pd(y.pd);
	ibv_close_device(x.ctx);
	ibv_close_device(y.ctx);
	free(x.buf);
	free(y.buf);
	t_lo_free();
	return t_summary();
}
