/* SENDs delivered by the sender itself into a same-host receiver's RQ and
 * CQ rings (transport/direct_send.c), against the packet path's answers:
 *  - SEND, SEND_WITH_IMM (0 B, 2 B, 4 KiB, 1 MiB; 2 receive SGEs): data,
 *    byte_len, imm, qp_num, src_qp, wr_id; counted as direct_send
 *  - 200 SENDs posted in one chain before the receiver polls: every one
 *    arrives, in order
 *  - SEND, WRITE_WITH_IMM, SEND in one chain: each delivered directly,
 *    the WRITE's data in place, receive completions in order
 *  - the same chain with no receive posted: the first waits in the packet
 *    path's RNR retry and the rest queue behind it as packets; once
 *    receives are posted all arrive in order, and the next SEND is
 *    delivered directly again
 *  - the receiver resizes its CQ with completions waiting: none lost, and
 *    later SENDs still arrive (as packets)
 *  - a receive CQ with a completion channel, delivered directly too: an
 *    armed CQ's event fires (the sender writes into the channel's pipe);
 *    armed for solicited only, an unsolicited SEND fires nothing and a
 *    solicited one does
 *  - SENDs one at a time on an idle send queue (taken straight from the
 *    WR, verbs/qp_post.c post_now): an unsignaled one gives no send
 *    completion, an INLINE one carries the bytes as they were at post
 *    time; a bad lkey is refused there and the packet path reports
 *    LOC_PROT_ERR (on a pair of its own: the QP goes to error)
 * Under SOFTRNIC_TRANSPORT=udp the same must pass with no direct SEND.
 * Counters: the engines print them at ibv_close_device with
 * SOFTRNIC_LOG=debug; stderr goes to a file read at the end. */
#include "t_rc.h"

#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>

/* A signaled SEND-type WR from e's buffer at off. */
static int send_wr(struct t_end *e, enum ibv_wr_opcode op, uint64_t off, uint32_t len,
		   uint32_t imm, uint64_t wr_id)
{
	return post_send(e, op, off, len, 0, 0, imm, wr_id);
}

static void basic(struct t_end *a, struct t_end *b)
{
	static const uint32_t lens[] = { 0, 2, 4096, 1u << 20 };
	struct ibv_wc wc;

	for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		for (int imm = 0; imm < 2; imm++) {
			uint32_t n = lens[i], half = n / 2;
			struct ibv_sge rs[2] = {
				{ (uintptr_t)b->buf + RECV_OFF, half, b->mr->lkey },
				{ (uintptr_t)b->buf + RECV_OFF + RECV_LEN / 2 + 8, RECV_LEN / 2 - 8, b->mr->lkey },
			};
			struct ibv_recv_wr rwr = { .wr_id = 500 + i, .sg_list = rs, .num_sge = 2 }, *bad;

			fill(a->buf, n, i + imm);
			memset(b->buf + RECV_OFF, 0, RECV_LEN);
			CHECK(!ibv_post_recv(b->qp, &rwr, &bad), "post_recv");
			CHECK(!send_wr(a, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, 0, n,
				       0x5150 + i, 10 + i), "post_send");
			CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
			      wc.wr_id == 10 + i && wc.opcode == IBV_WC_SEND,
			      "send %u: %s", n, ibv_wc_status_str(wc.status));
			CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
			      wc.wr_id == 500 + i && wc.opcode == IBV_WC_RECV && wc.byte_len == n &&
			      wc.qp_num == b->qp->qp_num && wc.src_qp == a->qp->qp_num,
			      "recv %u: %s len %u qp %u src %u", n, ibv_wc_status_str(wc.status),
			      wc.byte_len, wc.qp_num, wc.src_qp);
			CHECK(!!(wc.wc_flags & IBV_WC_WITH_IMM) == imm &&
			      (!imm || ntohl(wc.imm_data) == 0x5150 + i), "recv %u imm", n);
			CHECK(!memcmp(b->buf + RECV_OFF, a->buf, half) &&
			      !memcmp(b->buf + RECV_OFF + RECV_LEN / 2 + 8, a->buf + half, n - half),
			      "recv %u data across 2 SGEs", n);
		}
	}
	printf("SEND / SEND_WITH_IMM 0 B..1 MiB into 2 receive SGEs: data, length, imm, QPNs ok\n");
}

static void pipeline(struct t_end *a, struct t_end *b)
{
	enum { N = 200 };
	struct ibv_wc wc;
	int got = 0, sent = 0;

	for (int i = 0; i < N; i++)
		CHECK(!post_recv(b, RECV_OFF + (uint64_t)i * 64, 64, 1000 + i), "post_recv %d", i);
	for (int i = 0; i < N; i++) {
		a->buf[i * 8] = (uint8_t)i;
		CHECK(!send_wr(a, IBV_WR_SEND, (uint64_t)i * 8, 8, 0, 2000 + i), "send %d", i);
		/* drain our send CQ as we go: max_send_wr is 256 */
		while (ibv_poll_cq(a->cq, 1, &wc) == 1) {
			CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2000u + sent, "send wc %d", sent);
			sent++;
		}
	}
	while (sent < N && !t_wait(a->cq, &wc)) {
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2000u + sent, "send wc %d", sent);
		sent++;
	}
	for (; got < N && !t_wait(b->cq, &wc); got++)
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1000u + got &&
		      b->buf[RECV_OFF + got * 64] == (uint8_t)got, "recv %d in order", got);
	CHECK(got == N && sent == N, "all %d arrived (%d, %d)", N, got, sent);
	printf("%d SENDs posted before the receiver polls: all arrive, in order\n", N);
}

/* One SEND-type WR with the given flags from addr/lkey. */
static int send_flags(struct t_end *e, void *addr, uint32_t len, uint32_t lkey,
		      unsigned int flags, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = flags }, *bad;

	return ibv_post_send(e->qp, &wr, &bad);
}

/* Returns the direct SENDs it expects (when not udp). */
static int one_by_one(struct t_end *a, struct t_end *b)
{
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_wc wc;
	uint8_t msg[2] = { 0xa5, 0x5a };
	int expect = 2;

	CHECK(!post_recv(b, RECV_OFF, 64, 7101) && !post_recv(b, RECV_OFF + 64, 64, 7102),
	      "post_recv");
	memcpy(a->buf, "wxyz", 4);
	CHECK(!send_flags(a, a->buf, 4, a->mr->lkey, 0, 7001), "unsignaled send");
	CHECK(!send_flags(a, a->buf, 4, a->mr->lkey, IBV_SEND_SIGNALED, 7002), "signaled send");
	CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7002,
	      "only the signaled SEND completes (wr_id %llu)", (unsigned long long)wc.wr_id);
	for (int i = 0; i < 2; i++)
		CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
		      wc.wr_id == 7101u + i && wc.byte_len == 4 &&
		      !memcmp(b->buf + RECV_OFF + i * 64, "wxyz", 4), "recv %d", i);
	CHECK(ibv_poll_cq(a->cq, 1, &wc) == 0, "no completion for the unsignaled SEND");
	if (!ibv_query_qp(a->qp, &qa, IBV_QP_CAP, &qi) && qa.cap.max_inline_data >= sizeof(msg)) {
		CHECK(!post_recv(b, RECV_OFF, 64, 7103), "post_recv");
		CHECK(!send_flags(a, msg, sizeof(msg), 0, IBV_SEND_INLINE | IBV_SEND_SIGNALED,
				  7003), "inline send");
		msg[0] = msg[1] = 0; /* the application may reuse it at once */
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7003,
		      "inline send completes");
		CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == 2 &&
		      b->buf[RECV_OFF] == 0xa5 && b->buf[RECV_OFF + 1] == 0x5a,
		      "inline data as posted");
		expect++;
	}
	/* a WRITE with immediate alone: data in place, imm in the receive */
	CHECK(!post_recv(b, RECV_OFF, 64, 7104), "post_recv");
	memcpy(a->buf + 64, "0123456789abcdef", 16);
	CHECK(!post_send(a, IBV_WR_RDMA_WRITE_WITH_IMM, 64, 16, (uintptr_t)b->buf + RX_OFF + 32,
			 b->mr->rkey, 0x7e57, 7004), "write with imm");
	CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7004 &&
	      wc.opcode == IBV_WC_RDMA_WRITE, "write with imm completes");
	CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7104 &&
	      wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc.wc_flags & IBV_WC_WITH_IMM) &&
	      ntohl(wc.imm_data) == 0x7e57 && !memcmp(b->buf + RX_OFF + 32, "0123456789abcdef", 16),
	      "write with imm: data and imm");
	printf("SENDs one at a time: unsignaled, signaled%s, WRITE_WITH_IMM ok\n",
	       expect == 3 ? ", INLINE" : " (no inline data granted)");
	return expect;
}

/* A fresh pair: one SEND (the peer's rings get mapped), then one with an
 * lkey that is no MR's.  Returns the direct SENDs it expects. */
static int bad_lkey(void)
{
	struct t_end c, d;
	struct t_conn ic, id;
	struct ibv_wc wc;

	CHECK(!t_end_init(&c) && !t_end_init(&d), "second pair");
	ic = t_info(&c, 0x30);
	id = t_info(&d, 0x40);
	CHECK(!t_connect(&c, 0x30, &id, 14, 7, 7) && !t_connect(&d, 0x40, &ic, 14, 7, 7),
	      "connect");
	CHECK(!post_recv(&d, RECV_OFF, 64, 1) && !post_recv(&d, RECV_OFF + 64, 64, 2),
	      "post_recv");
	CHECK(!send_flags(&c, c.buf, 8, c.mr->lkey, IBV_SEND_SIGNALED, 11) &&
	      !t_wait(c.cq, &wc) && wc.status == IBV_WC_SUCCESS, "first SEND");
	CHECK(!t_wait(d.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1, "received");
	CHECK(!send_flags(&c, c.buf, 8, c.mr->lkey ^ 0x5a5a00, IBV_SEND_SIGNALED, 12),
	      "post with a bad lkey (checked when executed)");
	CHECK(!t_wait(c.cq, &wc) && wc.wr_id == 12 && wc.status == IBV_WC_LOC_PROT_ERR,
	      "bad lkey: %s", ibv_wc_status_str(wc.status));
	CHECK(ibv_poll_cq(d.cq, 1, &wc) == 0, "nothing received");
	printf("SEND with a bad lkey after direct ones: LOC_PROT_ERR, nothing delivered\n");
	t_end_fini(&c);
	t_end_fini(&d);
	return 1;
}

/* SEND, WRITE_WITH_IMM (16 B at RX_OFF), SEND; with post_first, the
 * receives are posted first, else only after 30 ms. */
static void chain(struct t_end *a, struct t_end *b, bool post_first, const char *tag)
{
	struct ibv_sge s = { (uintptr_t)a->buf, 16, a->mr->lkey };
	struct ibv_send_wr w[3], *bad;
	struct ibv_wc wc;

	fill(a->buf, 16, post_first ? 3 : 4);
	memset(b->buf + RX_OFF, 0, 16);
	memset(w, 0, sizeof(w));
	for (int i = 0; i < 3; i++) {
		w[i].wr_id = 30 + i;
		w[i].sg_list = &s;
		w[i].num_sge = 1;
		w[i].opcode = i == 1 ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_SEND;
		w[i].send_flags = IBV_SEND_SIGNALED;
		w[i].imm_data = htonl(77);
		w[i].wr.rdma.remote_addr = (uintptr_t)b->buf + RX_OFF;
		w[i].wr.rdma.rkey = b->mr->rkey;
		w[i].next = i < 2 ? &w[i + 1] : NULL;
	}
	for (int i = 0; i < 3 && post_first; i++)
		CHECK(!post_recv(b, RECV_OFF + (uint64_t)i * 64, 64, 300 + i), "post_recv");
	CHECK(!ibv_post_send(a->qp, w, &bad), "post chain");
	if (!post_first) {
		usleep(30 * 1000);
		CHECK(ibv_poll_cq(a->cq, 1, &wc) == 0, "no completion while no receive is posted");
		for (int i = 0; i < 3; i++)
			CHECK(!post_recv(b, RECV_OFF + (uint64_t)i * 64, 64, 300 + i), "post_recv");
	}
	for (int i = 0; i < 3; i++) {
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 30u + i,
		      "chain send wc %d", i);
		CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 300u + i &&
		      wc.opcode == (i == 1 ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV),
		      "%s recv wc %d: wr_id %llu opcode %d", tag, i,
		      (unsigned long long)wc.wr_id, wc.opcode);
		CHECK(i != 1 || (wc.byte_len == 16 && ntohl(wc.imm_data) == 77 &&
				 !memcmp(b->buf + RX_OFF, a->buf, 16)), "%s WRITE_WITH_IMM", tag);
		CHECK(i == 1 || !memcmp(b->buf + RECV_OFF + (uint64_t)i * 64, a->buf, 16),
		      "%s SEND %d data", tag, i);
	}
	if (!post_first) {
		/* and the next one is direct again (counted at the end) */
		CHECK(!post_recv(b, RECV_OFF, 4096, 42) && !send_wr(a, IBV_WR_SEND, 0, 10, 0, 43),
		      "post");
		CHECK(!t_wait(a->cq, &wc) && wc.wr_id == 43 && !t_wait(b->cq, &wc) &&
		      wc.wr_id == 42, "send after the RNR one");
	}
	printf("%s: SEND, WRITE_WITH_IMM, SEND in one chain: data, receive completions in "
	       "order\n", tag);
}

static void resize(struct t_end *a, struct t_end *b)
{
	struct ibv_wc wc;
	int got = 0;

	for (int i = 0; i < 5; i++)
		CHECK(!post_recv(b, RECV_OFF + (uint64_t)i * 64, 64, 700 + i) &&
		      !send_wr(a, IBV_WR_SEND, 0, 4, 0, 60 + i) && !t_wait(a->cq, &wc),
		      "send %d", i);
	CHECK(!ibv_resize_cq(b->cq, 8192), "resize_cq with 5 completions waiting");
	for (int i = 5; i < 8; i++)
		CHECK(!post_recv(b, RECV_OFF + (uint64_t)i * 64, 64, 700 + i) &&
		      !send_wr(a, IBV_WR_SEND, 0, 4, 0, 60 + i) && !t_wait(a->cq, &wc),
		      "send %d after resize", i);
	for (; got < 8 && !t_wait(b->cq, &wc); got++)
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 700u + got, "recv %d after resize",
		      got);
	CHECK(got == 8, "8 receive completions across the resize (%d)", got);
	printf("resize_cq with completions waiting: none lost, later SENDs arrive\n");
}

/* b's receive CQ has a completion channel: the event fires. */
static void channel(struct t_end *a, struct t_end *b)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(b->ctx);
	struct ibv_cq *rcq = ch ? ibv_create_cq(b->ctx, 16, NULL, ch, 0) : NULL;
	struct ibv_qp_init_attr qa = {
		.send_cq = b->cq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = rcq ? ibv_create_qp(b->pd, &qa) : NULL;
	struct ibv_qp *saved = b->qp;
	struct ibv_cq *ev_cq;
	struct ibv_wc wc;
	void *ev_ctx;

	CHECK(qp, "QP with a channel CQ");
	if (!qp)
		return;
	struct ibv_qp_attr at = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	CHECK(!ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					      IBV_QP_ACCESS_FLAGS), "init");
	/* a fresh QP of a's to pair with it */
	struct t_end a2 = *a;
	struct ibv_qp_init_attr qa2 = {
		.send_cq = a->cq, .recv_cq = a->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	a2.qp = ibv_create_qp(a->pd, &qa2);
	CHECK(a2.qp && !ibv_modify_qp(a2.qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), "a2");
	b->qp = qp;
	struct t_conn ia = t_info(&a2, 0x40), ib = t_info(b, 0x50);
	CHECK(!t_connect(&a2, 0x40, &ib, 14, 7, 7) && !t_connect(b, 0x50, &ia, 14, 7, 7),
	      "connect");
	CHECK(!ibv_req_notify_cq(rcq, 0), "arm");
	CHECK(!post_recv(b, RECV_OFF, 64, 90) && !send_wr(&a2, IBV_WR_SEND, 0, 8, 0, 91),
	      "post");
	CHECK(!t_wait(a->cq, &wc) && wc.wr_id == 91 && wc.status == IBV_WC_SUCCESS, "send");
	CHECK(!ibv_get_cq_event(ch, &ev_cq, &ev_ctx) && ev_cq == rcq, "completion event");
	ibv_ack_cq_events(rcq, 1);
	CHECK(!t_wait(rcq, &wc) && wc.wr_id == 90 && wc.status == IBV_WC_SUCCESS, "recv");
	/* solicited only: the first (unsolicited) SEND must not wake us */
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct ibv_sge sg = { (uintptr_t)a->buf, 8, a->mr->lkey };
	struct ibv_send_wr sw = { .wr_id = 92, .sg_list = &sg, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *sbad;

	CHECK(!ibv_req_notify_cq(rcq, 1), "arm solicited only");
	CHECK(!post_recv(b, RECV_OFF, 64, 93) && !post_recv(b, RECV_OFF + 64, 64, 94) &&
	      !ibv_post_send(a2.qp, &sw, &sbad) && !t_wait(a->cq, &wc) && wc.wr_id == 92,
	      "unsolicited send");
	CHECK(poll(&pfd, 1, 50) == 0, "no event for an unsolicited SEND");
	sw.wr_id = 95;
	sw.send_flags |= IBV_SEND_SOLICITED;
	CHECK(!ibv_post_send(a2.qp, &sw, &sbad) && !t_wait(a->cq, &wc) && wc.wr_id == 95,
	      "solicited send");
	CHECK(poll(&pfd, 1, 5000) == 1, "an event for the solicited SEND");
	CHECK(!ibv_get_cq_event(ch, &ev_cq, &ev_ctx) && ev_cq == rcq, "solicited event");
	ibv_ack_cq_events(rcq, 1);
	CHECK(!t_wait(rcq, &wc) && wc.wr_id == 93 && !t_wait(rcq, &wc) && wc.wr_id == 94,
	      "both received");
	printf("receive CQ with a completion channel: events fire (any, solicited only)\n");
	b->qp = saved;
	ibv_destroy_qp(a2.qp);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(rcq);
	ibv_destroy_comp_channel(ch);
}

int main(void)
{
	const char *mode = getenv("SOFTRNIC_TRANSPORT");
	bool udp = mode && !strcmp(mode, "udp");
	struct t_log log;
	struct t_end a, b;
	struct t_conn ia, ib;
	unsigned long long direct, direct_w, fallback, wakes;
	int expect = 219;
	FILE *f;

	setvbuf(stdout, NULL, _IONBF, 0);
	alarm(120);
	/* the channel case below is about direct delivery into such CQs */
	setenv("SOFTRNIC_DIRECT_CHANNEL", "1", 1);
	if (t_log_begin(&log))
		return 1;
	if (t_end_init(&a) || t_end_init(&b)) {
		t_log_end(&log);
		printf("SKIP: srn_lo or a verb it needs is not available\n");
		return 77;
	}
	ia = t_info(&a, 0x10);
	ib = t_info(&b, 0x20);
	CHECK(!t_connect(&a, 0x10, &ib, 14, 7, 7) && !t_connect(&b, 0x20, &ia, 14, 7, 7),
	      "connect");
	basic(&a, &b);
	pipeline(&a, &b);
	chain(&a, &b, true, "receives posted");
	chain(&a, &b, false, "no receive posted (RNR)");
	expect += one_by_one(&a, &b);
	channel(&a, &b);
	resize(&a, &b);
	t_end_fini(&a);
	t_end_fini(&b);
	expect += bad_lkey();
	f = t_log_end(&log);
	direct = f ? t_counter_sum(f, "direct_send") : 0;
	direct_w = f ? t_counter_sum(f, "direct_write") : 0;
	fallback = f ? t_counter_sum(f, "direct_fallback") : 0;
	wakes = f ? t_counter_sum(f, "direct_wakes") : 0;
	printf("direct_send %llu, direct_write %llu, direct_fallback %llu, direct_wakes %llu\n",
	       direct, direct_w, fallback, wakes);
	/* what CHECK wrote while stderr went to the file */
	if (f)
		t_echo_failures(f);
	/* basic 8 + pipeline 200 + the first chain's 2 (and its WRITE) + 1
	 * after the RNR chain (which went as packets) + one at a time 2-3 +
	 * the channel QP's 3 + resize 5 (after it, packets) + the bad lkey
	 * pair's first */
	if (udp)
		CHECK(direct == 0 && direct_w == 0,
		      "no direct SEND or WRITE under SOFTRNIC_TRANSPORT=udp (%llu, %llu)", direct,
		      direct_w);
	else
		CHECK(direct == (unsigned long long)expect && direct_w == 2,
		      "direct SENDs %llu (expected %d), WRITE_WITH_IMMs %llu (expected 2)", direct,
		      expect, direct_w);
	/* the channel case's two events: fired by the sender itself, a byte
	 * into the channel's pipe (no doorbell, no engine in between) */
	CHECK(wakes == (udp ? 0 : 2), "the sender woke the receiver itself %llu times (want %d)",
	      wakes, udp ? 0 : 2);
	if (f)
		fclose(f);
	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
