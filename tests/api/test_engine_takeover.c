/* The engine thread takes over when an application stops polling.  Two RC
 * QPs on two contexts of this process: a polled ping-pong first, so that
 * B's engine leaves its socket to B's polls (it defers), then B's
 * application goes quiet (this thread only polls A) while A sends to B:
 * an RDMA WRITE, whose completion needs B to place it and ACK it, and a
 * SEND, whose completion needs B's ACK.  Both must complete without B
 * ever polling, and soon (the engine looks at least every deferral step);
 * B's receive completion is there when B polls again.  And after a polled
 * exchange, B arms its CQ and waits on its completion channel (a poller
 * turning to events, as UCX's progress-then-wait does) while A sends: the
 * event comes, and A's SEND completes.  Repeated, so each round goes from
 * polled exchange to takeover and back. */
#include <poll.h>

#include "t_rc.h"

enum { ROUNDS = 20, PINGS = 200, QUIET_LIMIT_MS = 200 };

/* B, which polled until now, arms its CQ and waits for the event of A's
 * SEND.  Returns the microseconds from A's post to B's event. */
static uint64_t send_to_waiter(struct t_end *a, struct t_end *b, int r)
{
	struct pollfd p = { .fd = b->ch->fd, .events = POLLIN };
	struct ibv_cq *cq = NULL;
	struct ibv_wc wc;
	void *cq_ctx;
	uint64_t t0, dt;

	CHECK(!post_recv(b, RECV_OFF, 64, 11), "round %d: waiter's post_recv", r);
	CHECK(!ibv_req_notify_cq(b->cq, 0), "round %d: arm", r);
	t0 = now_us();
	CHECK(!post_send(a, IBV_WR_SEND, 0, 2, 0, 0, 0, 10), "round %d: SEND to waiter", r);
	CHECK(poll(&p, 1, QUIET_LIMIT_MS) == 1 && !ibv_get_cq_event(b->ch, &cq, &cq_ctx),
	      "round %d: no event for a SEND to a waiting peer within %d ms", r,
	      QUIET_LIMIT_MS);
	dt = now_us() - t0;
	if (cq)
		ibv_ack_cq_events(cq, 1);
	CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 11 &&
	      wc.byte_len == 2, "round %d: waiter's receive completion", r);
	CHECK(!t_wait_ms(a->cq, &wc, QUIET_LIMIT_MS) && wc.status == IBV_WC_SUCCESS &&
	      wc.wr_id == 10, "round %d: SEND to a waiting peer not acknowledged", r);
	return dt;
}

/* A SEND from s to r and back, both polled by this thread. */
static void ping(struct t_end *s, struct t_end *r, uint64_t id)
{
	struct ibv_wc wc;
	int got_send = 0, got_recv = 0;
	uint64_t end = now_ms() + 10000;

	CHECK(!post_recv(r, RECV_OFF, 64, id), "ping post_recv");
	CHECK(!post_send(s, IBV_WR_SEND, 0, 2, 0, 0, 0, id), "ping post_send");
	while ((!got_send || !got_recv) && now_ms() < end) {
		if (ibv_poll_cq(s->cq, 1, &wc) == 1)
			got_send += wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND;
		if (ibv_poll_cq(r->cq, 1, &wc) == 1)
			got_recv += wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV;
	}
	CHECK(got_send == 1 && got_recv == 1, "ping %llu: send %d recv %d",
	      (unsigned long long)id, got_send, got_recv);
}

int main(void)
{
	struct t_end a, b;
	struct t_conn ia, ib;
	struct ibv_wc wc;
	uint64_t worst = 0, worst_ev = 0;

	alarm(120);
	t_with_channel = true;
	if (t_end_init(&a) || t_end_init(&b)) {
		fprintf(stderr, "SKIP: no srn_lo device\n");
		return 77;
	}
	ia = t_info(&a, 0x10);
	ib = t_info(&b, 0x20);
	if (t_connect(&a, 0x10, &ib, 14, 7, 7) || t_connect(&b, 0x20, &ia, 14, 7, 7)) {
		fprintf(stderr, "FAIL: connect\n");
		return 1;
	}
	for (int r = 0; r < ROUNDS && !failures; r++) {
		uint64_t t0, dt;

		/* polled exchange: both sides' applications poll */
		for (int i = 0; i < PINGS; i++) {
			ping(&a, &b, 1000 + (uint64_t)i);
			ping(&b, &a, 5000 + (uint64_t)i);
		}

		/* B turns from polling to waiting for an event */
		dt = send_to_waiter(&a, &b, r);
		worst_ev = dt > worst_ev ? dt : worst_ev;
		for (int i = 0; i < PINGS; i++) {
			ping(&a, &b, 3000 + (uint64_t)i);
			ping(&b, &a, 7000 + (uint64_t)i);
		}

		/* B goes quiet: A's WRITE into B must complete anyway */
		fill(a.buf, 256, (unsigned)r);
		memset(b.buf + RX_OFF, 0, 256);
		t0 = now_ms();
		CHECK(!post_send(&a, IBV_WR_RDMA_WRITE, 0, 256, ib.addr + RX_OFF, ib.rkey, 0, 7),
		      "post WRITE");
		CHECK(!t_wait_ms(a.cq, &wc, QUIET_LIMIT_MS) && wc.status == IBV_WC_SUCCESS &&
		      wc.wr_id == 7, "round %d: WRITE to a quiet peer not complete within %d ms",
		      r, QUIET_LIMIT_MS);
		dt = now_ms() - t0;
		worst = dt > worst ? dt : worst;
		CHECK(!memcmp(a.buf, b.buf + RX_OFF, 256), "round %d: WRITE data", r);

		/* and a SEND: its completion needs B's ACK */
		CHECK(!post_recv(&b, RECV_OFF, 64, 9), "post_recv");
		t0 = now_ms();
		CHECK(!post_send(&a, IBV_WR_SEND, 0, 2, 0, 0, 0, 8), "post SEND");
		CHECK(!t_wait_ms(a.cq, &wc, QUIET_LIMIT_MS) && wc.status == IBV_WC_SUCCESS &&
		      wc.wr_id == 8, "round %d: SEND to a quiet peer not acknowledged within %d ms",
		      r, QUIET_LIMIT_MS);
		dt = now_ms() - t0;
		worst = dt > worst ? dt : worst;
		/* B polls again: its receive completion is there */
		CHECK(!t_wait(b.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9 &&
		      wc.byte_len == 2, "round %d: B's receive completion", r);
	}
	printf("%d rounds of %d polled ping-pongs, then a WRITE and a SEND to a quiet "
	       "peer: slowest %llu ms (limit %d)\n", ROUNDS, PINGS,
	       (unsigned long long)worst, QUIET_LIMIT_MS);
	printf("a SEND to a peer that turned from polling to waiting for an event: "
	       "slowest event %llu us\n", (unsigned long long)worst_ev);
	t_end_fini(&a);
	t_end_fini(&b);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
