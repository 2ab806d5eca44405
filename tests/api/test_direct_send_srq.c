/* SENDs into same-host QPs that receive through a shared receive queue,
 * delivered by the sender itself (transport/direct_send.c) into the SRQ's
 * ring and each QP's receive CQ:
 *  - two requesters interleave SENDs (0, 100 and 3000 bytes) to two QPs on
 *    one SRQ: WQEs taken in order, data, byte_len, qp_num, src_qp
 *  - srq_limit armed while the receiver neither polls nor takes from the
 *    SRQ itself: the senders' takes bring it below the limit and
 *    IBV_EVENT_SRQ_LIMIT_REACHED fires (a sender rings the receiver's
 *    doorbell); ibv_query_srq then shows it disarmed
 *  - ibv_modify_srq grows it with WQEs posted: they are kept, in order,
 *    and the next SENDs land in them (as packets: the senders had the old
 *    ring)
 *  - posting beyond max_wr is ENOMEM, however far the peers took
 * Under SOFTRNIC_TRANSPORT=udp the same must pass with no direct SEND.
 * Counters: the engines print them at ibv_close_device with
 * SOFTRNIC_LOG=debug; stderr goes to a file read at the end. */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>

#include "t_rc.h"

enum { N = 8, SZ = 3000, SLOT = 4096 };

static struct t_end a1, a2, r;
static struct t_end *req[2] = { &a1, &a2 };
static struct ibv_srq *srq;
static struct ibv_qp *rq[2];
static uint64_t next_wr = 1000;      /* wr_id of the next SRQ WQE posted */
static uint64_t next_take = 1000;    /* wr_id the next receive must carry */

static int post_srq(int n)
{
	for (int k = 0; k < n; k++) {
		uint64_t slot = (next_wr - 1000) % 512;
		struct ibv_sge sge = { (uintptr_t)r.buf + slot * SLOT, SLOT, r.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = next_wr, .sg_list = &sge, .num_sge = 1 }, *bad;
		int err = ibv_post_srq_recv(srq, &wr, &bad);

		if (err)
			return err;
		next_wr++;
	}
	return 0;
}

static uint32_t msg_len(int k)
{
	static const uint32_t lens[] = { 100, SZ, 0 };

	return lens[k % 3];
}

/* n SENDs from each requester, interleaved (tag: seeds the data), then
 * every receive checked in SRQ order. */
static void exchange(int n, unsigned tag, const char *what)
{
	struct ibv_wc wc;
	int seen[2] = { 0, 0 };

	for (int k = 0; k < n; k++)
		for (int i = 0; i < 2; i++) {
			fill(req[i]->buf + (uint64_t)k * SLOT, msg_len(k), tag + (unsigned)(k * 2 + i));
			CHECK(!post_send(req[i], IBV_WR_SEND, (uint64_t)k * SLOT, msg_len(k), 0, 0, 0,
					 (uint64_t)k), "%s: post_send", what);
		}
	for (int k = 0; k < 2 * n; k++) {
		CHECK(!t_wait(r.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV,
		      "%s: recv %d: %s", what, k, ibv_wc_status_str(wc.status));
		if (wc.status != IBV_WC_SUCCESS)
			break;
		int i = wc.qp_num == rq[0]->qp_num ? 0 : 1;
		int m = seen[i]++;
		uint8_t expect[SZ];
		uint64_t slot = (wc.wr_id - 1000) % 512;

		CHECK(wc.qp_num == rq[i]->qp_num && wc.src_qp == req[i]->qp->qp_num,
		      "%s: qp_num %u src_qp %u", what, wc.qp_num, wc.src_qp);
		CHECK(wc.wr_id == next_take, "%s: SRQ WQEs taken in order (%llu, want %llu)", what,
		      (unsigned long long)wc.wr_id, (unsigned long long)next_take);
		next_take = wc.wr_id + 1;
		CHECK(wc.byte_len == msg_len(m), "%s: byte_len %u want %u", what, wc.byte_len,
		      msg_len(m));
		fill(expect, msg_len(m), tag + (unsigned)(m * 2 + i));
		CHECK(!memcmp(expect, r.buf + slot * SLOT, msg_len(m)), "%s: data of message %d from %d",
		      what, m, i);
	}
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < n; k++)
			CHECK(!t_wait(req[i]->cq, &wc) && wc.status == IBV_WC_SUCCESS, "%s: send wc",
			      what);
}

/* The limit event, with nobody on the receiving side taking or polling. */
static void limit(void)
{
	struct ibv_srq_attr at = { .srq_limit = 4 };
	struct pollfd pf = { .fd = r.ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	struct ibv_wc wc;
	bool got = false;

	CHECK(!post_srq(8), "post 8");
	CHECK(!ibv_modify_srq(srq, &at, IBV_SRQ_LIMIT), "arm srq_limit 4");
	/* 8 -> 4 posted: not below the limit yet */
	for (int k = 0; k < 4; k++)
		CHECK(!post_send(&a1, IBV_WR_SEND, 0, 8, 0, 0, 0, 50 + (uint64_t)k), "post_send");
	for (int k = 0; k < 4; k++)
		CHECK(!t_wait(a1.cq, &wc) && wc.status == IBV_WC_SUCCESS, "send wc");
	CHECK(poll(&pf, 1, 200) == 0, "no event while 4 are posted");
	CHECK(!post_send(&a1, IBV_WR_SEND, 0, 8, 0, 0, 0, 60), "post_send");
	CHECK(!t_wait(a1.cq, &wc) && wc.status == IBV_WC_SUCCESS, "send wc");
	for (int k = 0; k < 4 && !got && poll(&pf, 1, 2000) == 1; k++) {
		if (ibv_get_async_event(r.ctx, &ev))
			break;
		got = ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq;
		ibv_ack_async_event(&ev);
	}
	CHECK(got, "IBV_EVENT_SRQ_LIMIT_REACHED when the 5th SEND left 3 posted");
	memset(&at, 0xff, sizeof(at));
	CHECK(!ibv_query_srq(srq, &at) && at.srq_limit == 0, "limit disarmed (%u)", at.srq_limit);
	for (int k = 0; k < 5; k++) {
		CHECK(!t_wait(r.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == next_take &&
		      wc.qp_num == rq[0]->qp_num, "limit recv %d", k);
		next_take++;
	}
	printf("srq_limit 4: IBV_EVENT_SRQ_LIMIT_REACHED after the peer's 5th take\n");
}

/* Grow the SRQ with 3 (from limit) + 6 WQEs posted: kept, in order. */
static void resize(void)
{
	struct ibv_srq_attr at = { .max_wr = 256 };

	CHECK(!post_srq(6), "post 6");
	CHECK(!ibv_modify_srq(srq, &at, IBV_SRQ_MAX_WR) && at.max_wr >= 256, "resize to %u",
	      at.max_wr);
	CHECK(!post_srq(20), "post 20 more");
	exchange(8, 77, "after resize");
	printf("resized with 9 WQEs posted: kept in order, 16 SENDs land after it\n");
}

/* Posting beyond max_wr is refused, however far the peers took. */
static void full(void)
{
	struct ibv_srq_attr at;
	uint32_t posted = (uint32_t)(next_wr - next_take), n = 0;

	CHECK(!ibv_query_srq(srq, &at), "query");
	while (n < at.max_wr + 8 && !post_srq(1))
		n++;
	CHECK(posted + n == at.max_wr, "ENOMEM after %u posts with %u posted (max_wr %u)", n,
	      posted, at.max_wr);
	printf("max_wr %u: ENOMEM at %u posted\n", at.max_wr, posted + n);
}

static void setup(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 64, .max_sge = 2 } };

	srq = ibv_create_srq(r.pd, &sa);
	CHECK(srq, "ibv_create_srq: %s", strerror(errno));
	if (!srq)
		exit(1);
	for (int i = 0; i < 2; i++) {
		struct t_end view = r;
		struct t_conn ia, ir;

		rq[i] = t_srq_qp(&r, srq);
		CHECK(rq[i], "srq qp");
		if (!rq[i])
			exit(1);
		view.qp = rq[i]; /* t_connect through a t_end view of this QP */
		ia = t_info(req[i], 10 + i);
		ir = t_info(&view, 20 + i);
		CHECK(!t_connect(req[i], 10 + i, &ir, 14, 7, 7) &&
		      !t_connect(&view, 20 + i, &ia, 14, 7, 7), "connect %d", i);
	}
}

int main(void)
{
	const char *mode = getenv("SOFTRNIC_TRANSPORT");
	bool udp = mode && !strcmp(mode, "udp");
	struct t_log log;

	setvbuf(stdout, NULL, _IONBF, 0);
	alarm(60);
	if (t_log_begin(&log))
		return 1;
	if (t_end_init(&a1) || t_end_init(&a2) || t_end_init(&r)) {
		t_log_end(&log);
		printf("SKIP: srn_lo or a verb it needs is not available\n");
		return 77;
	}
	setup();
	CHECK(!post_srq(2 * N), "post_srq_recv");
	exchange(N, 1, "two senders");
	printf("2 requesters x %d SENDs (0, 1 and 3 packets) into one SRQ: order, data ok\n", N);
	limit();
	resize();
	full();
	for (int i = 0; i < 2; i++)
		ibv_destroy_qp(rq[i]);
	CHECK(!ibv_destroy_srq(srq), "destroy srq");
	t_end_fini(&a1);
	t_end_fini(&a2);
	t_end_fini(&r);
	/* the two senders' 16 and the limit's 5; after the resize, packets */
	t_check_direct_sends(&log, udp, 2 * N + 5);
	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
