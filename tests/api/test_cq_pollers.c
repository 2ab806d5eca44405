/* Several threads polling one CQ at once (ibv_poll_cq claims entries
 * without the CQ lock, verbs/cq.c), while SENDs arrive in it (delivered
 * by the same-host sender itself, or as packets under
 * SOFTRNIC_TRANSPORT=udp) and the CQ is resized twice meanwhile:
 *  - every receive completion is returned exactly once, with status OK
 *  - each poller sees its completions in order (wr_ids increase)
 *  - the resizes succeed and nothing is lost across them
 * Bounded: 6000 messages, 60 s alarm; pollers yield when they find
 * nothing (more threads than cores). */
#include "t_rc.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#define MSGS 6000
#define POLLERS 3

static struct t_end a, b;
static _Atomic int seen[MSGS];
static atomic_int total, bad_status, bad_order, dup_or_range;
static atomic_bool stop;

static void *poller(void *arg)
{
	int batch = (int)(intptr_t)arg;
	struct ibv_wc wc[16];
	long last = -1;

	while (!atomic_load(&stop)) {
		int n = ibv_poll_cq(b.cq, batch, wc);

		if (n < 0) {
			atomic_fetch_add(&bad_status, 1);
			break;
		}
		if (n == 0)
			sched_yield();
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_RECV) {
				atomic_fetch_add(&bad_status, 1);
				continue;
			}
			if (wc[i].wr_id >= MSGS || atomic_fetch_add(&seen[wc[i].wr_id], 1)) {
				atomic_fetch_add(&dup_or_range, 1);
				continue;
			}
			if ((long)wc[i].wr_id <= last)
				atomic_fetch_add(&bad_order, 1);
			last = (long)wc[i].wr_id;
			atomic_fetch_add(&total, 1);
		}
	}
	return NULL;
}

int main(void)
{
	pthread_t th[POLLERS];
	struct ibv_wc wc;
	int sent = 0, missing = 0;
	uint64_t end;

	setvbuf(stdout, NULL, _IONBF, 0);
	alarm(60);
	if (t_end_init(&a) || t_end_init(&b)) {
		printf("SKIP: srn_lo or a verb it needs is not available\n");
		return 77;
	}
	struct t_conn ia = t_info(&a, 0x100), ib = t_info(&b, 0x200);
	CHECK(!t_connect(&a, 0x100, &ib, 14, 7, 7) && !t_connect(&b, 0x200, &ia, 14, 7, 7),
	      "connect");
	for (int i = 0; i < POLLERS; i++)
		pthread_create(&th[i], NULL, poller, (void *)(intptr_t)(i == 0 ? 1 : i == 1 ? 4 : 16));
	end = now_ms() + 50000;
	for (int i = 0; i < MSGS && !failures && now_ms() < end; i++) {
		/* room in b's RQ (256): wait for the pollers to catch up */
		while (i - atomic_load(&total) >= 200 && now_ms() < end)
			sched_yield();
		CHECK(!post_recv(&b, RECV_OFF + (uint64_t)(i % 64) * 64, 64, (uint64_t)i),
		      "post_recv %d", i);
		CHECK(!post_send(&a, IBV_WR_SEND, 0, 8, 0, 0, 0, (uint64_t)i), "post_send %d", i);
		CHECK(!t_wait(a.cq, &wc) && wc.status == IBV_WC_SUCCESS, "send %d: %s", i,
		      ibv_wc_status_str(wc.status));
		sent++;
		if (i == MSGS / 3)
			CHECK(!ibv_resize_cq(b.cq, 8192), "resize up while polled");
		if (i == 2 * MSGS / 3)
			CHECK(!ibv_resize_cq(b.cq, 1024), "resize down while polled");
	}
	while (atomic_load(&total) + atomic_load(&dup_or_range) < sent && now_ms() < end)
		sched_yield();
	atomic_store(&stop, true);
	for (int i = 0; i < POLLERS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < sent; i++)
		missing += atomic_load(&seen[i]) == 0;
	printf("%d SENDs, %d completions taken by %d pollers: missing %d, duplicate %d, "
	       "bad status %d, out of order %d\n", sent, atomic_load(&total), POLLERS, missing,
	       atomic_load(&dup_or_range), atomic_load(&bad_status), atomic_load(&bad_order));
	CHECK(sent == MSGS, "all %d sent (%d)", MSGS, sent);
	CHECK(!missing && !atomic_load(&dup_or_range), "each completion exactly once");
	CHECK(!atomic_load(&bad_status), "all successful RECV completions");
	CHECK(!atomic_load(&bad_order), "each poller sees its completions in order");
	CHECK(ibv_poll_cq(b.cq, 1, &wc) == 0, "nothing left over");
	t_end_fini(&a);
	t_end_fini(&b);
	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
