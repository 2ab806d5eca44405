/* The same-host packet path (net/shm_ring): two processes on srn_lo, RC
 * SEND of 0 B .. 1 MiB (with and without immediate) and RDMA WRITE with
 * immediate, checked by hash; UC SEND; a receiver asleep in
 * ibv_get_cq_event is woken; a receiver that stops polling for a while
 * still gets everything.  Both processes run with SOFTRNIC_LOG=debug, so
 * their engines print their counters when the device closes: by default
 * every packet must have gone through the shared-memory rings
 * (tx_shm_packets == tx_packets), under SOFTRNIC_TRANSPORT=udp none may.
 * Prints a 2-byte SEND ping-pong latency (not asserted). */
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUF (4u << 20)
#define RECV_AT (2u << 20)

static int failures;

#define CHECK(cond, ...)                                                    \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			printf("FAIL: ");                                   \
			printf(__VA_ARGS__);                                \
			printf("\n");                                       \
			failures++;                                         \
		}                                                           \
	} while (0)

static const uint32_t sizes[] = { 0, 1, 1023, 1024, 4096, 4097, 65536, 1u << 20 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

enum { Q_RC, Q_UC, Q_WAKE, NQ };

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *wcq;             /* wcq: the Q_WAKE QP's, with a channel */
	struct ibv_qp *qp[NQ];
	struct ibv_mr *mr;
	uint8_t *buf;
};

struct conn {
	uint32_t qpn[NQ];
	uint64_t addr;
	uint32_t rkey;
	union ibv_gid gid;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void fill(uint8_t *p, uint32_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (uint32_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

static uint64_t hash(const uint8_t *p, uint32_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (uint32_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static uint64_t expect_hash(uint32_t n, uint32_t seed)
{
	static uint8_t tmp[1u << 20];

	fill(tmp, n, seed);
	return hash(tmp, n);
}

static int wait_cq(struct ibv_cq *cq, struct ibv_wc *wc, uint64_t ms)
{
	uint64_t end = now_ns() + ms * 1000000ull;

	while (now_ns() < end) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			return -1;
		if (n == 1)
			return 0;
	}
	memset(wc, 0, sizeof(*wc));
	wc->status = IBV_WC_GENERAL_ERR;
	return -1;
}

static struct ibv_qp *mkqp(struct side *s, struct ibv_cq *cq, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = t,
		.cap = { .max_send_wr = 128, .max_recv_wr = 128, .max_send_sge = 2,
			 .max_recv_sge = 2 },
	};
	struct ibv_qp *qp = ibv_create_qp(s->pd, &qa);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	if (!qp || ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				 IBV_QP_ACCESS_FLAGS))
		return NULL;
	return qp;
}

static int side_init(struct side *s)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	memset(s, 0, sizeof(*s));
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "srn_lo"))
			s->ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!s->ctx)
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->ch = ibv_create_comp_channel(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 1024, NULL, NULL, 0);
	s->wcq = s->ch ? ibv_create_cq(s->ctx, 64, NULL, s->ch, 0) : NULL;
	s->buf = aligned_alloc(4096, BUF);
	if (!s->pd || !s->cq || !s->wcq || !s->buf)
		return -1;
	memset(s->buf, 0, BUF);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	s->qp[Q_RC] = mkqp(s, s->cq, IBV_QPT_RC);
	s->qp[Q_UC] = mkqp(s, s->cq, IBV_QPT_UC);
	s->qp[Q_WAKE] = mkqp(s, s->wcq, IBV_QPT_RC);
	return s->mr && s->qp[Q_RC] && s->qp[Q_UC] && s->qp[Q_WAKE] ? 0 : -1;
}

static struct conn side_info(struct side *s)
{
	struct conn c = { .addr = (uintptr_t)s->buf, .rkey = s->mr->rkey };

	for (int q = 0; q < NQ; q++)
		c.qpn[q] = s->qp[q]->qp_num;
	ibv_query_gid(s->ctx, 1, 0, &c.gid);
	return c;
}

static int side_connect(struct side *s, const struct conn *peer)
{
	for (int q = 0; q < NQ; q++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096,
			.dest_qp_num = peer->qpn[q], .rq_psn = 7,
			.max_dest_rd_atomic = 1, .min_rnr_timer = 1,
			.ah_attr = { .is_global = 1, .port_num = 1,
				     .grh = { .dgid = peer->gid, .hop_limit = 64 } },
		};
		int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			   IBV_QP_RQ_PSN;

		if (q != Q_UC)
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		if (ibv_modify_qp(s->qp[q], &a, mask))
			return -1;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 7;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (q != Q_UC)
			mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_MAX_QP_RD_ATOMIC;
		if (ibv_modify_qp(s->qp[q], &a, mask))
			return -1;
	}
	return 0;
}

static int post_recv(struct side *s, int q, uint64_t off, uint32_t len, uint64_t id)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + off, len, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = len ? 1 : 0 }, *bad;

	return ibv_post_recv(s->qp[q], &wr, &bad);
}

static int post_send(struct side *s, int q, enum ibv_wr_opcode op, uint64_t off, uint32_t len,
		     uint32_t imm, uint64_t raddr, uint32_t rkey, uint64_t id)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + off, len, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = len ? 1 : 0,
				  .opcode = op, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(imm) }, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(s->qp[q], &wr, &bad);
}

static void sync_wr(int fd)
{
	char c = 1;

	CHECK(write(fd, &c, 1) == 1, "sync write");
}

static void sync_rd(int fd)
{
	char c;

	CHECK(read(fd, &c, 1) == 1, "sync read");
}

/* ---- the receiving side (B) ---------------------------------------------- */

static void recv_side(struct side *b, int fd)
{
	struct ibv_wc wc;

	/* RC SEND (imm on odd sizes) */
	for (unsigned i = 0; i < NSIZES; i++) {
		uint32_t n = sizes[i];

		CHECK(!post_recv(b, Q_RC, RECV_AT, 1u << 20, 100 + i), "post_recv");
		sync_wr(fd);
		CHECK(!wait_cq(b->cq, &wc, 10000) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_RECV && wc.byte_len == n && wc.wr_id == 100 + i,
		      "RC SEND %u: %s len %u", n, ibv_wc_status_str(wc.status), wc.byte_len);
		CHECK(i % 2 ? (wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0x1000 + i
			    : !(wc.wc_flags & IBV_WC_WITH_IMM), "RC SEND %u imm", n);
		CHECK(hash(b->buf + RECV_AT, n) == expect_hash(n, i), "RC SEND %u data hash", n);
	}
	printf("B: RC SEND/SEND_WITH_IMM 0 B .. 1 MiB received, hashes match\n");

	/* RDMA WRITE with immediate */
	for (unsigned i = 0; i < NSIZES; i++) {
		uint32_t n = sizes[i];

		CHECK(!post_recv(b, Q_RC, 0, 0, 200 + i), "post_recv");
		sync_wr(fd);
		CHECK(!wait_cq(b->cq, &wc, 10000) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len == n &&
		      ntohl(wc.imm_data) == 0x2000 + i,
		      "WRITE_IMM %u: %s op %d len %u", n, ibv_wc_status_str(wc.status), wc.opcode,
		      wc.byte_len);
		CHECK(hash(b->buf, n) == expect_hash(n, 50 + i), "WRITE_IMM %u data hash", n);
	}
	printf("B: RDMA_WRITE_WITH_IMM 0 B .. 1 MiB received, hashes match\n");

	/* UC SEND */
	for (unsigned i = 0; i < NSIZES - 1; i++) {
		uint32_t n = sizes[i];

		CHECK(!post_recv(b, Q_UC, RECV_AT, 1u << 20, 300 + i), "post_recv");
		sync_wr(fd);
		CHECK(!wait_cq(b->cq, &wc, 10000) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_RECV && wc.byte_len == n && wc.wr_id == 300 + i,
		      "UC SEND %u: %s len %u", n, ibv_wc_status_str(wc.status), wc.byte_len);
		CHECK(hash(b->buf + RECV_AT, n) == expect_hash(n, 90 + i), "UC SEND %u hash", n);
	}
	printf("B: UC SEND 0 B .. 64 KiB received, hashes match\n");

	/* asleep in ibv_get_cq_event */
	{
		struct ibv_cq *ecq;
		void *ectx;
		struct pollfd pfd = { .fd = b->ch->fd, .events = POLLIN };
		uint64_t t0;
		int ready;

		CHECK(!post_recv(b, Q_WAKE, RECV_AT, 4096, 400), "post_recv");
		CHECK(!ibv_req_notify_cq(b->wcq, 0), "req_notify");
		CHECK(ibv_poll_cq(b->wcq, 1, &wc) == 0, "nothing yet");
		sync_wr(fd);
		t0 = now_ns();
		/* bounded: the channel fd is pollable */
		ready = poll(&pfd, 1, 10000);
		CHECK(ready == 1, "woken within 10 s");
		if (ready == 1) {
			CHECK(!ibv_get_cq_event(b->ch, &ecq, &ectx) && ecq == b->wcq, "cq event");
			ibv_ack_cq_events(b->wcq, 1);
			CHECK(!wait_cq(b->wcq, &wc, 1000) && wc.status == IBV_WC_SUCCESS &&
			      wc.byte_len == 64, "woken receive: %s", ibv_wc_status_str(wc.status));
			CHECK(hash(b->buf + RECV_AT, 64) == expect_hash(64, 400), "woken data");
		}
		printf("B: asleep in the completion channel, woken by a SEND %.1f ms after "
		       "telling A to go (A waits 100 ms first)\n", (double)(now_ns() - t0) / 1e6);
	}

	/* stop polling for a while */
	{
		enum { M = 64 };
		int got = 0;

		for (int k = 0; k < M; k++)
			CHECK(!post_recv(b, Q_RC, RECV_AT + (uint64_t)k * 8192, 8192, 500 + k),
			      "post_recv");
		sync_wr(fd);
		usleep(300 * 1000);
		for (int k = 0; k < M; k++) {
			if (wait_cq(b->cq, &wc, 10000) || wc.status != IBV_WC_SUCCESS)
				break;
			if (wc.wr_id == 500u + k && wc.byte_len == 4000 &&
			    hash(b->buf + RECV_AT + (uint64_t)k * 8192, 4000) ==
				    expect_hash(4000, 500 + k))
				got++;
		}
		CHECK(got == M, "after 300 ms without polling: %d of %d intact, in order", got, M);
		printf("B: stopped polling for 300 ms while A sent %d messages: got all %d\n", M,
		       got);
	}

	/* ping-pong: echo */
	{
		enum { N = 2000 };
		int recvd = 0, sent = 0;

		/* the next receive is posted before the echo goes out */
		CHECK(!post_recv(b, Q_RC, RECV_AT, 64, 600), "post_recv");
		sync_wr(fd);
		while (recvd < N) {
			if (wait_cq(b->cq, &wc, 5000) || wc.status != IBV_WC_SUCCESS)
				break;
			if (wc.opcode != IBV_WC_RECV) {
				sent++;
				continue;
			}
			if (++recvd < N)
				CHECK(!post_recv(b, Q_RC, RECV_AT, 64, 600), "post_recv");
			CHECK(!post_send(b, Q_RC, IBV_WR_SEND, 0, 2, 0, 0, 0, 601), "post_send");
		}
		while (sent < recvd && !wait_cq(b->cq, &wc, 5000) && wc.status == IBV_WC_SUCCESS)
			sent++;
		CHECK(recvd == N && sent == N, "ping-pong echoes %d/%d of %d", recvd, sent, N);
	}
	/* our last echo is acknowledged: A may close now (not before, or
	 * an ACK it still holds back would never come) */
	sync_wr(fd);
}

/* ---- the sending side (A) ------------------------------------------------ */

static void send_side(struct side *a, const struct conn *peer, int fd)
{
	struct ibv_wc wc;

	for (unsigned i = 0; i < NSIZES; i++) {
		uint32_t n = sizes[i];

		fill(a->buf, n, i);
		sync_rd(fd);
		CHECK(!post_send(a, Q_RC, i % 2 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, 0, n,
				 0x1000 + i, 0, 0, 1), "post_send");
		CHECK(!wait_cq(a->cq, &wc, 10000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1,
		      "A: RC SEND %u: %s", n, ibv_wc_status_str(wc.status));
	}
	for (unsigned i = 0; i < NSIZES; i++) {
		uint32_t n = sizes[i];

		fill(a->buf, n, 50 + i);
		sync_rd(fd);
		CHECK(!post_send(a, Q_RC, IBV_WR_RDMA_WRITE_WITH_IMM, 0, n, 0x2000 + i,
				 peer->addr, peer->rkey, 2), "post_send");
		CHECK(!wait_cq(a->cq, &wc, 10000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2,
		      "A: WRITE_IMM %u: %s", n, ibv_wc_status_str(wc.status));
	}
	for (unsigned i = 0; i < NSIZES - 1; i++) {
		uint32_t n = sizes[i];

		fill(a->buf, n, 90 + i);
		sync_rd(fd);
		CHECK(!post_send(a, Q_UC, IBV_WR_SEND, 0, n, 0, 0, 0, 3), "post_send");
		CHECK(!wait_cq(a->cq, &wc, 10000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 3,
		      "A: UC SEND %u: %s", n, ibv_wc_status_str(wc.status));
	}
	printf("A: RC SEND, WRITE_WITH_IMM and UC SEND of every size completed\n");

	/* B sleeps in its completion channel: let its engine go to sleep */
	fill(a->buf, 64, 400);
	sync_rd(fd);
	usleep(100 * 1000);
	CHECK(!post_send(a, Q_WAKE, IBV_WR_SEND, 0, 64, 0, 0, 0, 4), "post_send");
	CHECK(!wait_cq(a->wcq, &wc, 10000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 4,
	      "A: SEND to a sleeper: %s", ibv_wc_status_str(wc.status));

	/* B stops polling: its engine must take over (ACKs, receives) */
	sync_rd(fd);
	for (int k = 0; k < 64; k++) {
		fill(a->buf + (uint64_t)k * 4096, 4000, 500 + k);
		CHECK(!post_send(a, Q_RC, IBV_WR_SEND, (uint64_t)k * 4096, 4000, 0, 0, 0, 700 + k),
		      "post_send");
	}
	for (int k = 0; k < 64; k++)
		CHECK(!wait_cq(a->cq, &wc, 10000) && wc.status == IBV_WC_SUCCESS &&
		      wc.wr_id == 700u + k, "A: send %d to a non-polling peer: %s", k,
		      ibv_wc_status_str(wc.status));

	/* 2-byte SEND ping-pong, both sides polling */
	{
		enum { N = 2000, WARM = 200 };
		uint64_t t0 = 0;
		int k;

		sync_rd(fd);
		for (k = 0; k < N; k++) {
			if (k == WARM)
				t0 = now_ns();
			CHECK(!post_recv(a, Q_RC, RECV_AT, 64, 800), "post_recv");
			CHECK(!post_send(a, Q_RC, IBV_WR_SEND, 0, 2, 0, 0, 0, 801), "post_send");
			/* our send completion and the echo, in either order */
			int seen = 0;

			for (int c = 0; c < 2; c++) {
				if (wait_cq(a->cq, &wc, 5000) || wc.status != IBV_WC_SUCCESS)
					break;
				seen++;
			}
			if (seen != 2)
				break;
		}
		CHECK(k == N, "ping-pong: %d of %d round trips", k, N);
		if (k == N)
			printf("A: 2-byte SEND ping-pong: %.2f us one way (half round trip, "
			       "average of %d; not asserted)\n",
			       (double)(now_ns() - t0) / 1e3 / (N - WARM) / 2, N - WARM);
	}
	sync_rd(fd); /* B has all its completions */
}

static void side_close(struct side *s)
{
	for (int q = 0; q < NQ; q++)
		if (s->qp[q])
			ibv_destroy_qp(s->qp[q]);
	ibv_dereg_mr(s->mr);
	ibv_destroy_cq(s->cq);
	ibv_destroy_cq(s->wcq);
	ibv_destroy_comp_channel(s->ch);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx); /* the engine prints its counters (debug) */
}

static int child(int fd, int errfd, bool is_a)
{
	struct side s;
	struct conn me, peer;

	alarm(90);
	dup2(errfd, 2);
	if (side_init(&s)) {
		printf("%s: setup failed: %s\n", is_a ? "A" : "B", strerror(errno));
		return 2;
	}
	me = side_info(&s);
	if (write(fd, &me, sizeof(me)) != sizeof(me) || read(fd, &peer, sizeof(peer)) != sizeof(peer))
		return 2;
	if (side_connect(&s, &peer))
		return 2;
	if (is_a)
		send_side(&s, &peer, fd);
	else
		recv_side(&s, fd);
	side_close(&s);
	return failures ? 1 : 0;
}

/* Sum of counter name over the engines (one per process here) that
 * printed into file. */
static long long counter(const char *file, const char *name)
{
	FILE *f = fopen(file, "r");
	char line[512], nm[64];
	long long v, sum = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "]: ");
		int pid;

		if (!p || sscanf(line, "softrnic[%d]", &pid) != 1)
			continue;
		if (sscanf(p + 3, "%63s %lld", nm, &v) == 2 && !strcmp(nm, name) &&
		    !strchr(p + 3 + strlen(nm) + 1, ' '))
			sum = (sum < 0 ? 0 : sum) + v;
	}
	fclose(f);
	return sum < 0 ? 0 : sum;
}

int main(void)
{
	const char *tr = getenv("SOFTRNIC_TRANSPORT");
	bool udp = tr && !strcmp(tr, "udp");

	/* the rings are opt-in (net/mode.h); this test is about them */
	setenv("SOFTRNIC_SHM_RING", "1", 1);
	/* packets through the rings, not delivery by the sender itself */
	setenv("SOFTRNIC_DIRECT", "0", 1);
	char ef[2][64];
	int efd[2], sv[2];
	pid_t pid[2];

	setvbuf(stdout, NULL, _IOLBF, 0);
	setenv("SOFTRNIC_LOG", "debug", 1);
	for (int i = 0; i < 2; i++) {
		snprintf(ef[i], sizeof(ef[i]), "/tmp/srn-shmpath-%d-%c.XXXXXX", (int)getpid(),
			 'a' + i);
		efd[i] = mkstemp(ef[i]);
		if (efd[i] < 0)
			return 1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	printf("path: %s\n", udp ? "UDP (SOFTRNIC_TRANSPORT=udp)" : "default (shared memory)");
	pid[1] = fork();
	if (pid[1] == 0) {
		close(sv[0]);
		_exit(child(sv[1], efd[1], false));
	}
	pid[0] = fork();
	if (pid[0] == 0) {
		close(sv[1]);
		_exit(child(sv[0], efd[0], true));
	}
	close(sv[0]);
	close(sv[1]);
	for (int i = 0; i < 2; i++) {
		int st = 0;
		uint64_t end = now_ns() + 120 * 1000000000ull;

		while (waitpid(pid[i], &st, WNOHANG) == 0) {
			if (now_ns() > end) {
				kill(pid[i], SIGKILL);
				waitpid(pid[i], &st, 0);
				break;
			}
			usleep(10000);
		}
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exit status 0x%x",
		      i ? "B (receiver)" : "A (sender)", st);
	}

	long long tx[2], txs[2], rxs[2], db[2], full[2];

	for (int i = 0; i < 2; i++) {
		tx[i] = counter(ef[i], "tx_packets");
		txs[i] = counter(ef[i], "tx_shm_packets");
		rxs[i] = counter(ef[i], "rx_shm_packets");
		db[i] = counter(ef[i], "shm_doorbells");
		full[i] = counter(ef[i], "shm_ring_full");
		printf("%c: tx_packets %lld tx_shm_packets %lld rx_shm_packets %lld "
		       "shm_doorbells %lld shm_ring_full %lld\n", 'A' + i, tx[i], txs[i], rxs[i],
		       db[i], full[i]);
	}
	if (udp) {
		CHECK(tx[0] > 1000 && tx[1] > 100, "traffic went out (UDP)");
		CHECK(txs[0] == 0 && txs[1] == 0 && rxs[0] == 0 && rxs[1] == 0 &&
		      db[0] == 0 && db[1] == 0, "SOFTRNIC_TRANSPORT=udp: the rings were not used");
	} else {
		CHECK(tx[0] > 1000 && txs[0] == tx[0], "A: every packet through the rings");
		CHECK(tx[1] > 100 && txs[1] == tx[1], "B: every packet (ACKs, echoes) through the rings");
		CHECK(rxs[1] >= txs[0] && rxs[0] >= txs[1], "each side took what the other put");
		CHECK(db[0] >= 1, "A rang B's doorbell at least once (B slept)");
	}
	for (int i = 0; i < 2; i++) {
		if (failures) {
			char cmd[256];

			printf("--- stderr of %c (tail) ---\n", 'A' + i);
			snprintf(cmd, sizeof(cmd), "grep -v ': qp ' %s | tail -40", ef[i]);
			if (system(cmd) < 0)
				(void)0;
		}
		unlink(ef[i]);
	}
	if (failures) {
		printf("FAIL: %d checks failed\n", failures);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
