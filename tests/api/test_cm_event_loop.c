/* qperf's verbs pattern (rdma.c of qperf 0.4.11, its RC tests with -cm1),
 * reproduced between two processes on 127.0.0.1: a connection per test
 * through rdma_cm (initiator depth and responder resources 1), a CQ with
 * a completion channel shared by both queues, completion events (get the
 * event, re-arm, ack, then poll), 1-byte inline messages in page-aligned
 * buffers of 1 or 8 bytes, and a test that ends when an interval timer's
 * SIGALRM (a handler without SA_RESTART) interrupts ibv_get_cq_event.
 *
 * Checks: ibv_get_cq_event returns -1/EINTR when a handler without
 * SA_RESTART runs and keeps waiting across one with SA_RESTART (as
 * rdma-core's read() does); the library's own threads block SIGALRM, so
 * the process's timer signal reaches the waiting thread; then, for each of the nine tests qperf runs
 * (SEND and WRITE-with-immediate ping-pongs, a READ loop, FETCH_ADD and
 * CMP_AND_SWP streams against an idle peer, SEND, bidirectional SEND,
 * WRITE-with-immediate and READ streams), every completion is a success
 * with the right opcode, length, immediate and bytes, atomics return
 * the values their order implies, both sides stop when their timer
 * fires and exchange their counts (the step qperf reports as "failed to
 * receive results: timed out" when a side stays in ibv_get_cq_event),
 * and the counts agree.  Exchange rates are printed, never judged.
 * Every wait is bounded: the parent kills both sides after 120 s.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "tests/lib/t_cm.h"
#include "tests/lib/t_util.h"

enum {
	NCQE = 1024,         /* qperf's queue depth for streams */
	TEST_MS = 250,       /* each test's duration (qperf's -t) */
	RESULT_MS = 10000,   /* how long a side waits for the peer's counts */
	SIDE_LIMIT_S = 120,  /* the parent kills a side still running then */
	K64 = 65536,
	SLOTS = 1024,        /* atomic result slots of the client */
};

enum op { PP_SEND, PP_WRITE_IMM, READ_LAT, FETCH_ADD, CMP_SWAP, BW_SEND, BI_BW, BW_WRITE_IMM,
	  BW_READ };

/* One of qperf's tests: the queue depths and buffer size of each side. */
struct test {
	const char *name;
	enum op op;
	int c_send, c_recv, s_send, s_recv; /* client's and server's depths */
	size_t c_size, s_size;              /* their buffers */
};

static const struct test tests[] = {
	{ "rc_lat", PP_SEND, 1, 1, 1, 1, 1, 1 },
	{ "rc_rdma_write_lat", PP_WRITE_IMM, 1, 1, 1, 1, 1, 1 },
	{ "rc_rdma_read_lat", READ_LAT, 1, 0, 0, 1, 1, 1 },
	{ "rc_fetch_add_mr", FETCH_ADD, NCQE, 0, 0, 1, SLOTS * 8, 8 },
	{ "rc_compare_swap_mr", CMP_SWAP, NCQE, 0, 0, 1, SLOTS * 8, 8 },
	{ "rc_bw", BW_SEND, NCQE, 0, 0, NCQE, K64, K64 },
	{ "rc_bi_bw", BI_BW, NCQE, NCQE, NCQE, NCQE, K64, K64 },
	{ "rc_rdma_write_bw", BW_WRITE_IMM, NCQE, 0, 0, NCQE, K64, K64 },
	{ "rc_rdma_read_bw", BW_READ, NCQE, 0, 0, 1, K64, K64 },
};

enum { WRID_SEND = 1, WRID_RECV, WRID_RDMA };

static volatile sig_atomic_t finished;

static void on_alarm(int sig)
{
	(void)sig;
	finished = 1;
}

/* qperf's timer: SIGALRM after ms, then every 10 ms; no SA_RESTART. */
static void timer_start(int ms)
{
	struct itimerval it = { .it_value = { ms / 1000, (ms % 1000) * 1000 },
				.it_interval = { 0, 10000 } };

	finished = 0;
	setitimer(ITIMER_REAL, &it, NULL);
}

static void timer_stop(void)
{
	struct itimerval it = { { 0, 0 }, { 0, 0 } };

	setitimer(ITIMER_REAL, &it, NULL);
}

/* ---- ibv_get_cq_event and signals ----------------------------------- */

struct waiter {
	struct ibv_comp_channel *ch;
	int err;
};

static int wait_event(void *p)
{
	struct waiter *w = p;
	struct ibv_cq *cq;
	void *ctx;
	int r = ibv_get_cq_event(w->ch, &cq, &ctx);

	w->err = r ? errno : 0;
	return r;
}

static void check_signals(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct waiter w;
	struct t_bg bg;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "srn_lo"))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx)
		t_skip("no srn_lo device");
	ch = ibv_create_comp_channel(ctx);
	cq = ch ? ibv_create_cq(ctx, 4, NULL, ch, 0) : NULL;
	T_ASSERT(cq && !ibv_req_notify_cq(cq, 0), "CQ with a channel, armed");
	w.ch = ch;
	t_sig_noop(SIGUSR1, SA_RESTART);
	T_ASSERT(!t_bg_start(&bg, wait_event, &w), "waiter thread");
	usleep(50000);
	pthread_kill(bg.th, SIGUSR1);
	T_OK(!t_bg_wait(&bg, 200), "ibv_get_cq_event keeps waiting across a SA_RESTART handler");
	t_sig_noop(SIGUSR1, 0);
	for (int i = 0; i < 50 && !t_bg_done(&bg); i++) {
		pthread_kill(bg.th, SIGUSR1);
		t_bg_wait(&bg, 100);
	}
	T_OK(t_bg_wait(&bg, 1000) && bg.ret == -1 && w.err == EINTR,
	     "a handler without SA_RESTART ends it: -1, errno EINTR (got %d, %s)", bg.ret,
	     strerror(w.err));
	signal(SIGUSR1, SIG_DFL);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	ibv_close_device(ctx);
}

/* Every thread but ours (the library's engine, CM agent) blocks SIGALRM,
 * so the timer's signal always reaches the thread in ibv_get_cq_event.
 * Returns the threads that do not (their count), -1 if unreadable. */
static int threads_taking_sigalrm(int *others)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int bad = 0;

	*others = 0;
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char path[300], line[128];
		unsigned long long blk = 0;
		FILE *f;

		if (de->d_name[0] == '.' || atoi(de->d_name) == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "SigBlk: %llx", &blk) == 1)
				break;
		fclose(f);
		(*others)++;
		if (!(blk & (1ull << (SIGALRM - 1))))
			bad++;
	}
	closedir(d);
	return bad;
}

/* ---- one side of a test --------------------------------------------- */

struct node {                /* what qperf's sides exchange */
	uint64_t vaddr;
	uint32_t rkey;
};

struct counts {              /* what they report after the test */
	uint64_t sent, recv, posted, last;
};

struct side {
	const struct test *t;
	bool client;
	int ctl;                     /* stream socket to the other side */
	struct rdma_event_channel *cmch;
	struct rdma_cm_id *lid, *id;
	struct ibv_comp_channel *ch;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t size;
	uint32_t max_inline;
	struct node peer;
	struct counts n;
	uint64_t eintr;              /* waits the timer ended */
	bool broken;                 /* a failed check: stop the loop */
};

static bool ctl_send(struct side *s, const void *p, size_t n)
{
	return write(s->ctl, p, n) == (ssize_t)n;
}

static bool ctl_recv(struct side *s, void *p, size_t n, int ms)
{
	struct pollfd pfd = { .fd = s->ctl, .events = POLLIN };
	size_t got = 0;

	while (got < n) {
		ssize_t r;

		if (poll(&pfd, 1, ms) != 1)
			return false;
		r = read(s->ctl, (char *)p + got, n - got);
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

static void make_qp(struct side *s, struct rdma_cm_id *id, int send, int recv)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = (uint32_t)send, .max_recv_wr = (uint32_t)recv,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;

	s->ch = ibv_create_comp_channel(id->verbs);
	s->pd = ibv_alloc_pd(id->verbs);
	T_ASSERT(s->ch && s->pd, "%s: channel and PD", s->t->name);
	s->cq = ibv_create_cq(id->verbs, send + recv, NULL, s->ch, 0);
	T_ASSERT(s->cq, "%s: CQ of %d", s->t->name, send + recv);
	qa.send_cq = qa.recv_cq = s->cq;
	T_ASSERT(!rdma_create_qp(id, s->pd, &qa), "%s: rdma_create_qp: %s", s->t->name,
		 strerror(errno));
	T_ASSERT(!ibv_query_qp(id->qp, &attr, IBV_QP_CAP, &init), "%s: query QP", s->t->name);
	s->max_inline = attr.cap.max_inline_data;
}

static void open_side(struct side *s)
{
	const struct test *t = s->t;
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_event *ev = NULL;
	uint32_t port;

	s->cmch = rdma_create_event_channel();
	T_ASSERT(s->cmch, "%s: CM channel", t->name);
	if (s->client) {
		struct sockaddr_in sin;

		T_ASSERT(ctl_recv(s, &port, sizeof(port), RESULT_MS), "%s: server's port", t->name);
		sin = t_cm_loopback((int)port);
		T_ASSERT(!rdma_create_id(s->cmch, &s->id, NULL, RDMA_PS_TCP) &&
				 !rdma_resolve_addr(s->id, NULL, (struct sockaddr *)&sin, 2000) &&
				 !t_cm_expect(s->cmch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000, NULL) &&
				 !rdma_resolve_route(s->id, 2000) &&
				 !t_cm_expect(s->cmch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000, NULL),
			 "%s: address and route", t->name);
		make_qp(s, s->id, t->c_send, t->c_recv);
		T_ASSERT(!rdma_connect(s->id, &cp) &&
				 !t_cm_expect(s->cmch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL),
			 "%s: connected", t->name);
		s->size = t->c_size;
	} else {
		struct sockaddr_in any = { .sin_family = AF_INET };
		struct ibv_qp_attr rnr = { .min_rnr_timer = 12 };

		T_ASSERT(!rdma_create_id(s->cmch, &s->lid, NULL, RDMA_PS_TCP) &&
				 !rdma_bind_addr(s->lid, (struct sockaddr *)&any) &&
				 !rdma_listen(s->lid, 0),
			 "%s: listening", t->name);
		port = ntohs(rdma_get_src_port(s->lid));
		T_ASSERT(ctl_send(s, &port, sizeof(port)), "%s: port to the client", t->name);
		T_ASSERT(!t_cm_expect(s->cmch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000, &ev),
			 "%s: connect request", t->name);
		s->id = ev->id;
		make_qp(s, s->id, t->s_send, t->s_recv);
		T_ASSERT(!rdma_accept(s->id, &cp), "%s: accept", t->name);
		rdma_ack_cm_event(ev);
		T_ASSERT(!t_cm_expect(s->cmch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL),
			 "%s: established", t->name);
		ibv_modify_qp(s->id->qp, &rnr, IBV_QP_MIN_RNR_TIMER);
		s->size = t->s_size;
	}
	/* qperf's buffer: page-aligned, just the message's size */
	T_ASSERT(!posix_memalign((void **)&s->buf, (size_t)sysconf(_SC_PAGESIZE), s->size),
		 "buffer");
	memset(s->buf, 0, s->size);
	s->mr = ibv_reg_mr(s->pd, s->buf, s->size,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	T_ASSERT(s->mr, "%s: MR of %zu bytes", t->name, s->size);
	{
		struct node me = { (uintptr_t)s->buf, s->mr->rkey };

		T_ASSERT(ctl_send(s, &me, sizeof(me)) &&
				 ctl_recv(s, &s->peer, sizeof(s->peer), RESULT_MS),
			 "%s: node information", t->name);
	}
	T_ASSERT(!ibv_req_notify_cq(s->cq, 0), "%s: CQ armed", t->name);
}

static void close_side(struct side *s)
{
	if (s->client)
		T_CHECK(!rdma_disconnect(s->id), "%s: disconnect", s->t->name);
	T_CHECK(!t_cm_expect(s->cmch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL),
		"%s: DISCONNECTED (%s)", s->t->name, s->client ? "client" : "server");
	rdma_destroy_qp(s->id);
	rdma_destroy_id(s->id);
	if (s->lid)
		rdma_destroy_id(s->lid);
	rdma_destroy_event_channel(s->cmch);
	T_CHECK(!ibv_destroy_cq(s->cq), "%s: destroy CQ", s->t->name);
	/* the word atomics hit, once no operation can reach it */
	memcpy(&s->n.last, s->buf, 8 <= s->size ? 8 : s->size);
	T_CHECK(!ibv_dereg_mr(s->mr), "%s: deregister MR", s->t->name);
	/* the PD last: an MR still on it keeps it (EBUSY) */
	T_CHECK(!ibv_dealloc_pd(s->pd), "%s: free PD", s->t->name);
	ibv_destroy_comp_channel(s->ch);
	free(s->buf);
}

/* qperf's rd_poll: wait for an event, re-arm, ack, then poll.  0 when
 * the timer interrupted the wait. */
static int ev_poll(struct side *s, struct ibv_wc *wc, int n)
{
	if (!finished) {
		struct ibv_cq *cq;
		void *ctx;

		if (ibv_get_cq_event(s->ch, &cq, &ctx)) {
			if (errno == EINTR && finished) {
				s->eintr++;
				return 0;
			}
			T_CHECK(0, "%s: ibv_get_cq_event: %s", s->t->name, strerror(errno));
			s->broken = true;
			return 0;
		}
		T_CHECK(cq == s->cq, "%s: event for our CQ", s->t->name);
		T_CHECK(!ibv_req_notify_cq(s->cq, 0), "%s: re-arm", s->t->name);
		ibv_ack_cq_events(s->cq, 1);
	}
	n = ibv_poll_cq(s->cq, n, wc);
	if (n < 0) {
		T_CHECK(0, "%s: poll CQ", s->t->name);
		s->broken = true;
		return 0;
	}
	return n;
}

static void post_recv(struct side *s, int n)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, (uint32_t)s->size, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = WRID_RECV, .sg_list = &sge, .num_sge = 1 }, *bad;

	while (n-- > 0)
		T_CHECK(!ibv_post_recv(s->id->qp, &wr, &bad), "%s: post recv", s->t->name);
}

/* SENDs or RDMA operations of the whole buffer; a ping-pong's 1-byte
 * payload carries the sequence number, WRITE's immediate too. */
static void post_op(struct side *s, enum ibv_wr_opcode op, int n)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, (uint32_t)s->size, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = op == IBV_WR_SEND ? WRID_SEND : WRID_RDMA,
				  .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = s->peer.vaddr;
	wr.wr.rdma.rkey = s->peer.rkey;
	if (op != IBV_WR_RDMA_READ && s->size <= s->max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	while (!finished && n-- > 0) {
		if (op != IBV_WR_RDMA_READ) {
			s->buf[0] = (uint8_t)s->n.sent;
			wr.imm_data = htonl((uint32_t)s->n.sent);
		}
		if (ibv_post_send(s->id->qp, &wr, &bad)) {
			T_CHECK(0, "%s: post %d: %s", s->t->name, op, strerror(errno));
			s->broken = true;
			return;
		}
		s->n.posted++;
		if (op != IBV_WR_RDMA_READ)
			s->n.sent++;
	}
}

static void post_atomic(struct side *s)
{
	uint64_t k = s->n.posted;
	struct ibv_sge sge = { (uintptr_t)(s->buf + (k % SLOTS) * 8), 8, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = k, .sg_list = &sge, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.atomic.remote_addr = s->peer.vaddr;
	wr.wr.atomic.rkey = s->peer.rkey;
	/* FETCH_ADD of 1 returns k; the chain of CMP_AND_SWP k -> k + 1
	 * succeeds every time, as the operations run in order */
	wr.opcode = s->t->op == FETCH_ADD ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = s->t->op == FETCH_ADD ? 1 : k;
	wr.wr.atomic.swap = k + 1;
	if (ibv_post_send(s->id->qp, &wr, &bad)) {
		T_CHECK(0, "%s: post atomic: %s", s->t->name, strerror(errno));
		s->broken = true;
		return;
	}
	s->n.posted++;
}

/* A receive's completion: length, opcode, immediate and payload. */
static void check_recv(struct side *s, const struct ibv_wc *wc, bool pp)
{
	bool imm = s->t->op == PP_WRITE_IMM || s->t->op == BW_WRITE_IMM;

	T_CHECK(wc->opcode == (imm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV),
		"%s: receive opcode %d", s->t->name, wc->opcode);
	T_CHECK(wc->byte_len == (imm ? 0 : s->size) || (imm && wc->byte_len == s->size),
		"%s: receive of %u bytes", s->t->name, wc->byte_len);
	if (imm)
		T_CHECK((wc->wc_flags & IBV_WC_WITH_IMM) && ntohl(wc->imm_data) == s->n.recv,
			"%s: immediate %u, want %llu", s->t->name, ntohl(wc->imm_data),
			(unsigned long long)s->n.recv);
	if (pp)
		T_CHECK(s->buf[0] == (uint8_t)s->n.recv, "%s: payload %u, want %u", s->t->name,
			s->buf[0], (uint8_t)s->n.recv);
	s->n.recv++;
}

/* qperf's rd_pp_lat_loop: the next message once ours completed and the
 * peer's arrived. */
static void pingpong(struct side *s)
{
	enum ibv_wr_opcode op = s->t->op == PP_SEND ? IBV_WR_SEND : IBV_WR_RDMA_WRITE_WITH_IMM;
	int done = 1;

	post_recv(s, 1);
	if (s->client) {
		post_op(s, op, 1);
		done = 0;
	}
	while (!finished && !s->broken) {
		struct ibv_wc wc[2];
		int n = ev_poll(s, wc, 2);

		for (int i = 0; i < n && !finished; i++) {
			T_CHECK(wc[i].status == IBV_WC_SUCCESS, "%s: status %s", s->t->name,
				ibv_wc_status_str(wc[i].status));
			if (wc[i].wr_id == WRID_RECV) {
				check_recv(s, &wc[i], true);
				post_recv(s, 1);
				done |= 2;
			} else {
				done |= 1;
			}
		}
		if (done == 3 && !finished) {
			post_op(s, op, 1);
			done = 0;
		}
	}
}

static void streams(struct side *s)
{
	const struct test *t = s->t;
	bool sends = s->client || t->op == BI_BW;
	bool recvs = !s->client || t->op == BI_BW;
	enum ibv_wr_opcode op = t->op == BW_READ ? IBV_WR_RDMA_READ :
				t->op == BW_WRITE_IMM ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_SEND;

	if (recvs)
		post_recv(s, NCQE);
	if (sends)
		post_op(s, op, NCQE);
	while (!finished && !s->broken) {
		struct ibv_wc wc[64];
		int n = ev_poll(s, wc, 64), nsent = 0, nrecv = 0;

		for (int i = 0; i < n; i++) {
			T_CHECK(wc[i].status == IBV_WC_SUCCESS, "%s: status %s", t->name,
				ibv_wc_status_str(wc[i].status));
			if (wc[i].wr_id == WRID_RECV) {
				check_recv(s, &wc[i], false);
				nrecv++;
			} else {
				if (op == IBV_WR_RDMA_READ) {
					T_CHECK(wc[i].opcode == IBV_WC_RDMA_READ &&
							s->buf[s->size - 1] == 0xa5,
						"%s: READ brought the peer's bytes", t->name);
					s->n.recv++;
				}
				nsent++;
			}
		}
		if (finished)
			break;
		post_recv(s, nrecv);
		post_op(s, op, nsent);
	}
}

/* READ one byte, wait, again (qperf's rd_client_rdma_read_lat). */
static void read_loop(struct side *s)
{
	post_op(s, IBV_WR_RDMA_READ, 1);
	while (!finished && !s->broken) {
		struct ibv_wc wc;

		if (ev_poll(s, &wc, 1) != 1 || finished)
			continue;
		T_CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ,
			"%s: READ status %s", s->t->name, ibv_wc_status_str(wc.status));
		T_CHECK(s->buf[0] == 0x5a, "%s: READ brought %#x", s->t->name, s->buf[0]);
		s->buf[0] = 0;
		s->n.recv++;
		post_op(s, IBV_WR_RDMA_READ, 1);
	}
}

/* qperf's ib_client_atomic: NCQE posted, one more per completion. */
static void atomics(struct side *s)
{
	for (int i = 0; i < NCQE && !finished; i++)
		post_atomic(s);
	while (!finished && !s->broken) {
		struct ibv_wc wc[64];
		int n = ev_poll(s, wc, 64);

		for (int i = 0; i < n; i++) {
			uint64_t k = wc[i].wr_id, got;

			T_CHECK(wc[i].status == IBV_WC_SUCCESS, "%s: status %s", s->t->name,
				ibv_wc_status_str(wc[i].status));
			T_CHECK(k == s->n.recv, "%s: completion %llu in order (want %llu)",
				s->t->name, (unsigned long long)k, (unsigned long long)s->n.recv);
			memcpy(&got, s->buf + (k % SLOTS) * 8, 8);
			T_CHECK(got == k, "%s: operation %llu returned %llu", s->t->name,
				(unsigned long long)k, (unsigned long long)got);
			s->n.recv++;
			if (!finished)
				post_atomic(s);
		}
	}
}

/* The server of a one-sided test sleeps until its timer fires (qperf:
 * pause()); its buffer holds what READs must bring. */
static void idle(struct side *s)
{
	(void)s;
	while (!finished)
		pause();
}

static void run_test(struct side *s)
{
	const struct test *t = s->t;
	struct counts peer;
	double t0;
	char go = 'g';

	open_side(s);
	if (t == tests) {
		int others, bad = threads_taking_sigalrm(&others);

		T_OK(bad == 0 && others > 0, "%s: the library's %d threads block SIGALRM (%d do not)",
		     s->client ? "client" : "server", others, bad);
	}
	if (t->op == READ_LAT)
		s->buf[0] = 0x5a;
	if (t->op == BW_READ && !s->client)
		memset(s->buf, 0xa5, s->size);
	/* qperf's sync_test, then its timer */
	T_ASSERT(ctl_send(s, &go, 1) && ctl_recv(s, &go, 1, RESULT_MS), "%s: sync", t->name);
	t0 = t_now();
	timer_start(TEST_MS);
	if (t->op == PP_SEND || t->op == PP_WRITE_IMM)
		pingpong(s);
	else if (!s->client && t->op != BI_BW && t->op != BW_SEND && t->op != BW_WRITE_IMM)
		idle(s);
	else if (t->op == READ_LAT)
		read_loop(s);
	else if (t->op == FETCH_ADD || t->op == CMP_SWAP)
		atomics(s);
	else
		streams(s);
	timer_stop();
	finished = 0;
	/* qperf's exchange_results */
	T_CHECK(ctl_send(s, &s->n, sizeof(s->n)) && ctl_recv(s, &peer, sizeof(peer), RESULT_MS),
		"%s: %s got the peer's results (it left its loop)", t->name,
		s->client ? "client" : "server");
	if (s->client) {
		double secs = t_now() - t0;
		uint64_t ops = s->n.recv ? s->n.recv : s->n.sent;

		T_CHECK(s->n.recv > 0 || s->n.sent > 0, "%s: something completed", t->name);
		printf("# %-20s %8llu operations in %.2f s: %.1f us each\n", t->name,
		       (unsigned long long)ops, secs, ops ? secs * 1e6 / (double)ops : 0.0);
		if (t->op == PP_SEND || t->op == PP_WRITE_IMM || t->op == BW_SEND ||
		    t->op == BW_WRITE_IMM || t->op == BI_BW)
			T_CHECK(peer.recv <= s->n.sent && s->n.recv <= peer.sent,
				"%s: no more received than sent (%llu/%llu, %llu/%llu)", t->name,
				(unsigned long long)peer.recv, (unsigned long long)s->n.sent,
				(unsigned long long)s->n.recv, (unsigned long long)peer.sent);
		if (t->op == PP_SEND || t->op == PP_WRITE_IMM)
			T_CHECK(peer.recv + 1 >= s->n.sent && s->n.recv + 1 >= peer.sent,
				"%s: ping-pong counts agree", t->name);
	}
	close_side(s);
	if (!s->client && (t->op == FETCH_ADD || t->op == CMP_SWAP)) {
		/* (the client's counts came before its last operations
		 * stopped; the word is read once the QP is gone) */
		T_CHECK(s->n.last >= peer.recv && s->n.last <= peer.posted,
			"%s: the word is %llu after %llu completed of %llu posted", t->name,
			(unsigned long long)s->n.last, (unsigned long long)peer.recv,
			(unsigned long long)peer.posted);
	}
	printf("# %s %s: %llu timer interrupts in ibv_get_cq_event\n", t->name,
	       s->client ? "client" : "server", (unsigned long long)s->eintr);
}

static int side_main(bool client, int ctl, const char *only)
{
	struct sigaction sa = { .sa_handler = on_alarm };

	t_set_tag("%s", client ? "client" : "server");
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		struct side s = { .t = &tests[i], .client = client, .ctl = ctl };

		if (only && strcmp(only, tests[i].name))
			continue;
		run_test(&s);
	}
	return t_summary();
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	int sv[2], status;
	pid_t pid[2];
	double t0;

	check_signals();
	T_ASSERT(!socketpair(AF_UNIX, SOCK_STREAM, 0, sv), "socketpair");
	for (int c = 0; c < 2; c++) {
		pid[c] = fork();
		T_ASSERT(pid[c] >= 0, "fork");
		if (pid[c] == 0) {
			close(sv[!c]);
			exit(side_main(c == 1, sv[c], only));
		}
	}
	close(sv[0]);
	close(sv[1]);
	t0 = t_now();
	for (int left = 2; left > 0;) {
		pid_t p = waitpid(-1, &status, WNOHANG);

		if (p > 0) {
			left--;
			T_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s exited with 0 (%#x)",
			     p == pid[1] ? "client" : "server", status);
			continue;
		}
		if (t_now() - t0 > SIDE_LIMIT_S) {
			T_OK(0, "both sides done within %d s", SIDE_LIMIT_S);
			kill(pid[0], SIGKILL);
			kill(pid[1], SIGKILL);
			while (waitpid(-1, &status, 0) > 0)
				;
			break;
		}
		usleep(20000);
	}
	return t_summary();
}
