/* UC under loss: the net/udp.c test hook drops 8% of all packets.  200
 * four-packet SENDs and 200 four-packet WRITE_WITH_IMMs go from one UC
 * QP to another.  The sender completes every one (nothing is
 * acknowledged); the receiver completes only intact messages, in order,
 * each exactly as sent (a lost packet loses its message, never corrupts
 * it), some are lost, and a message right after a lost one arrives whole
 * (the receiver resynchronises at the next FIRST/ONLY).  Then READ on UC
 * is refused at post time. */
#include <arpa/inet.h>
#include <errno.h>

#include "t_ud.h"

enum { N = 200, MSG = 4096, MTU_BYTES = 1024 };

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *scq, *rcq;
static struct ibv_qp *qs, *qr;
static struct ibv_mr *smr, *rmr;
static uint8_t *sbuf, *rbuf;

/* Send N messages of op; message i is MSG bytes of (i + 1).  Returns
 * how many arrived intact. */
static int run(enum ibv_wr_opcode op, const char *name)
{
	struct ibv_wc wc[16];
	int sent_ok = 0, got = 0, lost_then_ok = 0, bad = 0, last = -1;
	double end;

	for (int i = 0; i < N; i++) {
		struct ibv_sge s = { (uintptr_t)(rbuf + (size_t)i * MSG), MSG, rmr->lkey };
		struct ibv_recv_wr rw = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1 }, *rb;

		if (ibv_post_recv(qr, &rw, &rb))
			return -1;
	}
	memset(rbuf, 0, (size_t)N * MSG);
	for (int i = 0; i < N; i++) {
		uint8_t *p = sbuf + (size_t)i * MSG;
		struct ibv_sge s = { (uintptr_t)p, MSG, smr->lkey };
		struct ibv_send_wr w = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1,
					 .opcode = op, .send_flags = IBV_SEND_SIGNALED,
					 .imm_data = htonl((uint32_t)i) }, *wb;

		memset(p, i + 1, MSG);
		w.wr.rdma.remote_addr = (uintptr_t)(rbuf + (size_t)i * MSG);
		w.wr.rdma.rkey = rmr->rkey;
		if (ibv_post_send(qs, &w, &wb))
			return -1;
		/* a few in flight, so the send queue never overflows */
		if (i % 8 == 7) {
			int n = t_poll_cq(scq, wc, 8, 2000);

			for (int k = 0; k < n; k++)
				sent_ok += wc[k].status == IBV_WC_SUCCESS;
		}
	}
	/* every receive that completes is checked; then the rest is lost */
	end = t_now() + 1.0;
	while (t_now() < end) {
		int n = ibv_poll_cq(rcq, 16, wc);

		for (int k = 0; k < n; k++) {
			int i = (int)ntohl(wc[k].imm_data), slot = (int)wc[k].wr_id;
			const uint8_t *p;

			if (wc[k].status != IBV_WC_SUCCESS || wc[k].byte_len != MSG) {
				bad++;
				continue;
			}
			if (op == IBV_WR_SEND) {
				/* receive WQEs are used in order by intact
				 * messages only: content says which message */
				p = rbuf + (size_t)slot * MSG;
				i = p[0] - 1;
			} else {
				p = rbuf + (size_t)i * MSG;
			}
			for (int b = 0; b < MSG; b++)
				if (p[b] != (uint8_t)(i + 1)) {
					bad++;
					break;
				}
			if (i <= last)
				bad++;
			if (i > last + 1)
				lost_then_ok++;
			last = i;
			got++;
		}
		if (n == 0)
			usleep(1000);
	}
	T_OK(sent_ok == N, "%s: all %d sends complete successfully at the sender", name, N);
	T_OK(bad == 0, "%s: every received message intact, in order (%d bad)", name, bad);
	T_OK(got > 0 && got < N, "%s: %d of %d arrived, the rest was lost", name, got, N);
	T_OK(lost_then_ok > 0, "%s: %d times a message right after a loss arrived whole",
	     name, lost_then_ok);
	return got;
}

int main(void)
{
	union ibv_gid gid;
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_RESET };

	alarm(60);
	/* (the packet path: same-host UC goes direct, where nothing is lost) */
	setenv("SOFTRNIC_DIRECT", "0", 1);
	setenv("SOFTRNIC_TEST_DROP", "80", 1);
	ctx = t_lo_open();
	if (!ctx)
		t_skip("srn_lo not available");
	pd = ibv_alloc_pd(ctx);
	scq = ibv_create_cq(ctx, 512, NULL, NULL, 0);
	rcq = ibv_create_cq(ctx, 512, NULL, NULL, 0);
	{
		struct ibv_qp_init_attr ia = { .send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_UC,
					       .cap = { .max_send_wr = 16, .max_recv_wr = N,
							.max_send_sge = 1, .max_recv_sge = 1 } };

		qs = ibv_create_qp(pd, &ia);
		qr = ibv_create_qp(pd, &ia);
	}
	sbuf = calloc(N, MSG);
	rbuf = calloc(N, MSG);
	smr = ibv_reg_mr(pd, sbuf, (size_t)N * MSG, 0);
	rmr = ibv_reg_mr(pd, rbuf, (size_t)N * MSG, IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_WRITE);
	T_ASSERT(qs && qr && smr && rmr && !ibv_query_gid(ctx, 1, 0, &gid), "setup");
	T_OK(tu_uc_connect(qs, qr->qp_num, &gid) == 0 && tu_uc_connect(qr, qs->qp_num, &gid) == 0,
	     "two UC QPs connected (MTU 1024: 4 packets per message)");
	printf("8%% of packets dropped\n");
	run(IBV_WR_SEND, "SEND");
	/* fresh receive queue for the next round: leftover WQEs from the
	 * lost messages would shift slots */
	T_OK(ibv_modify_qp(qr, &qa, IBV_QP_STATE) == 0 && ibv_modify_qp(qs, &qa, IBV_QP_STATE) == 0 &&
	     tu_uc_connect(qs, qr->qp_num, &gid) == 0 && tu_uc_connect(qr, qs->qp_num, &gid) == 0,
	     "reset and reconnect");
	run(IBV_WR_RDMA_WRITE_WITH_IMM, "WRITE_WITH_IMM");
	{
		struct ibv_sge s = { (uintptr_t)sbuf, 8, smr->lkey };
		struct ibv_send_wr w = { .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_READ },
				   *wb;

		w.wr.rdma.remote_addr = (uintptr_t)rbuf;
		w.wr.rdma.rkey = rmr->rkey;
		T_OK(ibv_post_send(qs, &w, &wb) == EINVAL, "RDMA READ on UC: EINVAL at post");
	}
	return t_summary();
}
