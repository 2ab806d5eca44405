/* A poller whose socket has been quiet: A spins on its empty CQ while B
 * sends it SENDs, first a burst (A polling as they come), then nothing for
 * QUIET_MS, then one more.  On the default path the SENDs go by the direct
 * path and A's socket carries nothing: its polls must not read it (a
 * recvmmsg per empty poll cost more than the peer's whole delivery; UCX
 * polls CQs that stay empty, its send CQ and, under one-sided traffic,
 * its receive CQ).  Over UDP A's engine left the socket to A's polls
 * during the burst; once quiet, A's polls stop reading it, and the SEND
 * after the quiet spell must still arrive (the engine thread watches the
 * socket again) within ARRIVE_LIMIT_MS, not stay in the socket for as long
 * as A polls. */
#include <pthread.h>
#include <stdatomic.h>

#include "t_rc.h"

enum {
	BURST = 50,
	QUIET_MS = 250,
	ARRIVE_LIMIT_MS = 2000,
	/* socket reads per empty poll allowed on the direct path */
	READS_PER_POLLS = 100,
};

static struct t_end a, b;
static atomic_int phase; /* 1: burst; 2: quiet; 3: the last SEND */

static void *sender(void *arg)
{
	const struct t_conn *peer = arg;
	struct ibv_wc wc;

	(void)peer;
	while (atomic_load(&phase) != 1)
		;
	for (uint32_t i = 0; i < BURST; i++) {
		CHECK(!post_send(&b, IBV_WR_SEND, 0, 8, 0, 0, 0, i), "post SEND %u", i);
		CHECK(!t_wait(b.cq, &wc) && wc.status == IBV_WC_SUCCESS, "SEND %u completion", i);
	}
	while (atomic_load(&phase) != 3)
		;
	CHECK(!post_send(&b, IBV_WR_SEND, 0, 8, 0, 0, 0, BURST), "post last SEND");
	CHECK(!t_wait(b.cq, &wc) && wc.status == IBV_WC_SUCCESS, "last SEND completion");
	return NULL;
}

int main(void)
{
	const char *tr = getenv("SOFTRNIC_TRANSPORT");
	bool udp = tr && !strcmp(tr, "udp");
	unsigned long long reads = 0, unparks = 0, polls = 0;
	uint64_t end, t0, waited = 0;
	struct ibv_wc wc;
	struct t_log log;
	pthread_t tb;
	FILE *f;
	int got = 0;

	alarm(120);
	if (t_log_begin(&log)) {
		printf("FAIL: log file\n");
		return 1;
	}
	t_pair(&a, &b, 14, 7, 7);
	for (uint32_t i = 0; i <= BURST; i++)
		CHECK(!post_recv(&a, RECV_OFF + i * 64, 64, 1000 + i), "post_recv %u", i);
	CHECK(!pthread_create(&tb, NULL, sender, NULL), "thread");
	atomic_store(&phase, 1);
	for (end = now_ms() + ARRIVE_LIMIT_MS; got < BURST && now_ms() < end;) {
		int n = ibv_poll_cq(a.cq, 1, &wc);

		if (n == 1) {
			CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV,
			      "burst receive: status %d opcode %d", wc.status, wc.opcode);
			got++;
		}
	}
	CHECK(got == BURST, "burst: %d of %d SENDs received", got, BURST);
	atomic_store(&phase, 2);
	for (end = now_ms() + QUIET_MS; now_ms() < end; polls++)
		CHECK(ibv_poll_cq(a.cq, 1, &wc) == 0, "a completion while nothing was sent");
	atomic_store(&phase, 3);
	t0 = now_ms();
	CHECK(!t_wait_ms(a.cq, &wc, ARRIVE_LIMIT_MS) && wc.status == IBV_WC_SUCCESS &&
	      wc.wr_id == 1000 + BURST, "the SEND after %d quiet ms did not arrive within %d ms",
	      QUIET_MS, ARRIVE_LIMIT_MS);
	waited = now_ms() - t0;
	pthread_join(tb, NULL);
	t_end_fini(&a);
	t_end_fini(&b);
	f = t_log_end(&log);
	if (f) {
		reads = t_counter_sum(f, "poll_sock_reads");
		unparks = t_counter_sum(f, "engine_sock_unparks");
		t_echo_failures(f);
	}
	printf("%s path: %llu empty polls in %d ms of quiet; socket reads by polls in all "
	       "%llu, sockets handed back %llu; the SEND after the quiet spell arrived in "
	       "%llu ms\n", udp ? "udp" : "default", polls, QUIET_MS, reads, unparks,
	       (unsigned long long)waited);
	if (!udp && f)
		CHECK(reads * READS_PER_POLLS < polls,
		      "polls read the socket %llu times for %llu empty polls", reads, polls);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
