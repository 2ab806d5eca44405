/* Many producers into one CQ ring (verbs/shared_rings.h): four sender
 * threads, each with its own context and RC QP, SEND 4-byte sequence
 * numbers as fast as they can to four QPs of one receiver context whose
 * receives all complete into ONE CQ; the receiver reposts as it polls and
 * every 50 messages SENDs a credit back on the same QP, so its own send
 * completions (pushed by this process) land in that CQ too, between the
 * peers' entries.  Checked: every message arrives exactly once, in order
 * per QP, with the right qp_num/src_qp/byte_len; no completion is lost or
 * doubled; all credits complete.  Runs on both paths (under
 * SOFTRNIC_TRANSPORT=udp the same traffic goes as packets). */
#include "t_rc.h"

#include <pthread.h>
#include <stdbool.h>

enum { NS = 4, N = 5000, RQ_DEPTH = 128, CREDIT_EVERY = 50 };

struct sender {
	struct t_end e;
	struct t_conn peer;
	pthread_t th;
	int errors;
	int credits;                 /* credits received */
};

static struct ibv_qp *rqp[NS];       /* the receiver's QPs */
static struct ibv_mr *rmr;
static uint8_t *rbuf;

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	struct ibv_wc wc[16];
	uint64_t end = now_ms() + 60000;
	int sent = 0, done = 0;

	/* receives for the credits */
	for (int i = 0; i < 64; i++)
		if (post_recv(&s->e, RECV_OFF + (uint64_t)i * 64, 64, 1000 + i))
			s->errors++;
	while ((done < N || s->credits < N / CREDIT_EVERY) && now_ms() < end) {
		if (sent < N && sent - done < 200) {
			uint32_t v = (uint32_t)sent;

			memcpy(s->e.buf + (uint64_t)(sent % 256) * 8, &v, 4);
			if (post_send(&s->e, IBV_WR_SEND, (uint64_t)(sent % 256) * 8, 4, 0, 0, 0,
				      (uint64_t)sent)) {
				s->errors++;
				break;
			}
			sent++;
		}
		int n = ibv_poll_cq(s->e.cq, 16, wc);

		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "sender: %s\n", ibv_wc_status_str(wc[i].status));
				s->errors++;
			} else if (wc[i].opcode == IBV_WC_RECV) {
				s->credits++;
				if (post_recv(&s->e, RECV_OFF, 64, wc[i].wr_id))
					s->errors++;
			} else {
				done++;
			}
		}
	}
	if (done != N || s->credits != N / CREDIT_EVERY)
		s->errors++;
	return NULL;
}

static int rpost(int q, uint64_t slot)
{
	struct ibv_sge sg = { (uintptr_t)rbuf + RECV_OFF + ((uint64_t)q * RQ_DEPTH + slot) * 16, 16,
			      rmr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)q << 32 | slot, .sg_list = &sg, .num_sge = 1 },
			   *bad;

	return ibv_post_recv(rqp[q], &wr, &bad);
}

int main(void)
{
	static struct sender s[NS];
	struct ibv_context *rctx;
	struct ibv_pd *rpd;
	struct ibv_cq *rcq;
	uint32_t next[NS] = { 0 }, credits_done = 0, credits_sent = 0;
	struct ibv_wc wc[32];
	uint64_t end;
	int got = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	alarm(120);
	rctx = t_open();
	if (!rctx) {
		printf("SKIP: srn_lo not available\n");
		return 77;
	}
	rpd = ibv_alloc_pd(rctx);
	rcq = ibv_create_cq(rctx, 4096, NULL, NULL, 0);
	rbuf = aligned_alloc(4096, BUF_SIZE);
	memset(rbuf, 0, BUF_SIZE);
	rmr = ibv_reg_mr(rpd, rbuf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!rpd || !rcq || !rmr)
		return 1;
	for (int q = 0; q < NS; q++) {
		struct ibv_qp_init_attr qa = {
			.send_cq = rcq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 64, .max_recv_wr = RQ_DEPTH, .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};
		struct t_end re = { .ctx = rctx, .pd = rpd, .cq = rcq, .mr = rmr, .buf = rbuf };
		struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

		rqp[q] = ibv_create_qp(rpd, &qa);
		CHECK(rqp[q] && !ibv_modify_qp(rqp[q], &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
							       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		      "receiver QP %d", q);
		CHECK(!t_end_init(&s[q].e), "sender %d", q);
		if (failures)
			return 1;
		re.qp = rqp[q];
		CHECK(!ibv_query_gid(rctx, 1, 0, &re.gid), "gid");
		s[q].peer = t_info(&re, 0x100 + q);
		struct t_conn me = t_info(&s[q].e, 0x200 + q);

		CHECK(!t_connect(&re, 0x100 + q, &me, 14, 7, 7) &&
		      !t_connect(&s[q].e, 0x200 + q, &s[q].peer, 14, 7, 7), "connect %d", q);
		for (int i = 0; i < RQ_DEPTH; i++)
			CHECK(!rpost(q, (uint64_t)i), "post_recv");
	}
	for (int q = 0; q < NS; q++)
		pthread_create(&s[q].th, NULL, sender_main, &s[q]);

	end = now_ms() + 60000;
	while ((got < NS * N || credits_done < credits_sent) && now_ms() < end && !failures) {
		int n = ibv_poll_cq(rcq, 32, wc);

		for (int i = 0; i < n; i++) {
			struct ibv_wc *c = &wc[i];
			int q = (int)(c->wr_id >> 32);
			uint32_t v;

			if (c->status != IBV_WC_SUCCESS) {
				CHECK(0, "receiver wc: %s", ibv_wc_status_str(c->status));
				continue;
			}
			if (c->opcode == IBV_WC_SEND) {
				credits_done++;
				continue;
			}
			CHECK(c->opcode == IBV_WC_RECV && q >= 0 && q < NS &&
			      c->qp_num == rqp[q]->qp_num && c->src_qp == s[q].e.qp->qp_num &&
			      c->byte_len == 4, "recv wc fields (qp %d, len %u)", q, c->byte_len);
			if (q < 0 || q >= NS)
				continue;
			memcpy(&v, rbuf + RECV_OFF + ((uint64_t)q * RQ_DEPTH + (c->wr_id & 0xffffffff)) * 16,
			       4);
			CHECK(v == next[q], "QP %d: message %u where %u was due", q, v, next[q]);
			next[q] = v + 1;
			got++;
			CHECK(!rpost(q, c->wr_id & 0xffffffff), "repost");
			if (next[q] % CREDIT_EVERY == 0) {
				struct t_end re = { .qp = rqp[q], .mr = rmr, .buf = rbuf };

				CHECK(!post_send(&re, IBV_WR_SEND, 0, 8, 0, 0, 0, 7), "credit");
				credits_sent++;
			}
		}
	}
	for (int q = 0; q < NS; q++) {
		pthread_join(s[q].th, NULL);
		CHECK(!s[q].errors && next[q] == N, "sender %d: %d errors, %u of %d arrived", q,
		      s[q].errors, next[q], N);
	}
	CHECK(got == NS * N && credits_done == credits_sent, "%d of %d messages, %u of %u credits",
	      got, NS * N, credits_done, credits_sent);
	CHECK(ibv_poll_cq(rcq, 32, wc) == 0, "no completion left over (none doubled)");
	printf("%d senders x %d SENDs into one CQ with %u of our own completions between: "
	       "each once, in order per QP\n", NS, N, credits_sent);
	for (int q = 0; q < NS; q++) {
		ibv_destroy_qp(s[q].e.qp);
		ibv_destroy_qp(rqp[q]);
		ibv_dereg_mr(s[q].e.mr);
		ibv_destroy_cq(s[q].e.cq);
		ibv_dealloc_pd(s[q].e.pd);
		ibv_close_device(s[q].e.ctx);
		free(s[q].e.buf);
	}
	ibv_dereg_mr(rmr);
	ibv_destroy_cq(rcq);
	ibv_dealloc_pd(rpd);
	ibv_close_device(rctx);
	free(rbuf);
	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
