/* Shared helpers of the tests/api/test_rc_*.c tests (static: each test
 * is its own executable). */
#ifndef T_RC_H
#define T_RC_H

#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (8u << 20)
#define MTU_ENUM IBV_MTU_1024
#define MTU 1024

static int failures __attribute__((unused));

#define CHECK(cond, ...)                                                    \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			failures++;                                         \
		}                                                           \
	} while (0)

struct t_end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch; /* the CQ's, when t_with_channel */
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
};

struct t_conn {                      /* what one side tells the other */
	uint32_t qpn, psn;
	uint64_t addr;
	uint32_t rkey;
	union ibv_gid gid;
};

static __attribute__((unused)) struct ibv_context *t_open(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "srn_lo"))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

/* Set: the ends opened next get a completion channel for their CQ. */
static bool t_with_channel __attribute__((unused));
/* Nonzero: the ends opened next get an ibv_create_cq_ex CQ with these
 * wc_flags. */
static uint64_t t_cq_wc_flags __attribute__((unused));

static __attribute__((unused)) struct ibv_cq *t_cq_open(struct t_end *e)
{
	struct ibv_cq_init_attr_ex cx = { .cqe = 4096, .channel = e->ch,
					  .wc_flags = t_cq_wc_flags };
	struct ibv_cq_ex *x;

	if (!t_cq_wc_flags)
		return ibv_create_cq(e->ctx, 4096, NULL, e->ch, 0);
	x = ibv_create_cq_ex(e->ctx, &cx);
	return x ? ibv_cq_ex_to_cq(x) : NULL;
}

/* Context, PD, CQ, registered buffer and a QP of type (RC or UC), in
 * RESET. */
static __attribute__((unused)) int t_end_open(struct t_end *e, enum ibv_qp_type type)
{
	memset(e, 0, sizeof(*e));
	e->ctx = t_open();
	if (!e->ctx)
		return -1;
	e->pd = ibv_alloc_pd(e->ctx);
	if (t_with_channel && !(e->ch = ibv_create_comp_channel(e->ctx)))
		return -1;
	e->cq = t_cq_open(e);
	e->buf = aligned_alloc(4096, BUF_SIZE);
	if (!e->pd || !e->cq || !e->buf)
		return -1;
	memset(e->buf, 0, BUF_SIZE);
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	struct ibv_qp_init_attr qa = {
		.send_cq = e->cq, .recv_cq = e->cq, .qp_type = type,
		.cap = { .max_send_wr = 256, .max_recv_wr = 256,
			 .max_send_sge = 4, .max_recv_sge = 4, .max_inline_data = 64 },
	};
	e->qp = ibv_create_qp(e->pd, &qa);
	return !e->mr || !e->qp || ibv_query_gid(e->ctx, 1, 0, &e->gid) ? -1 : 0;
}

/* t_end_open with an RC QP, moved to INIT with every remote access. */
static __attribute__((unused)) int t_end_init(struct t_end *e)
{
	if (t_end_open(e, IBV_QPT_RC))
		return -1;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};
	return ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ? -1 : 0;
}

/* Everything t_end_init made, in reverse order (NULLs skipped). */
static __attribute__((unused)) void t_end_fini(struct t_end *e)
{
	if (e->qp)
		ibv_destroy_qp(e->qp);
	if (e->mr)
		ibv_dereg_mr(e->mr);
	if (e->cq)
		ibv_destroy_cq(e->cq);
	if (e->ch)
		ibv_destroy_comp_channel(e->ch);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
	if (e->ctx)
		ibv_close_device(e->ctx);
	free(e->buf);
	memset(e, 0, sizeof(*e));
}

static __attribute__((unused)) struct t_conn t_info(struct t_end *e, uint32_t psn)
{
	struct t_conn c = { .qpn = e->qp->qp_num, .psn = psn,
			    .addr = (uintptr_t)e->buf, .rkey = e->mr->rkey, .gid = e->gid };
	return c;
}

static __attribute__((unused)) int t_connect(struct t_end *e, uint32_t my_psn, const struct t_conn *peer,
		     int timeout, int retry, int rnr_retry)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = MTU_ENUM,
		.dest_qp_num = peer->qpn, .rq_psn = peer->psn,
		.max_dest_rd_atomic = 16, .min_rnr_timer = 1,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = peer->gid, .sgid_index = 0, .hop_limit = 64 } },
	};
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry;
	a.rnr_retry = rnr_retry;
	a.sq_psn = my_psn;
	a.max_rd_atomic = 16;
	return ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)
		       ? -1 : 0;
}

/* Two ends on srn_lo connected to each other (PSNs 100 and 200) with
 * these timeout, retry_cnt and rnr_retry; skips (77) without srn_lo. */
static __attribute__((unused)) void t_pair(struct t_end *a, struct t_end *b, int timeout,
					   int retry, int rnr)
{
	struct t_conn ia, ib;

	if (t_end_init(a) || t_end_init(b)) {
		printf("SKIP: srn_lo or a verb it needs is not available\n");
		exit(77);
	}
	ia = t_info(a, 100);
	ib = t_info(b, 200);
	if (t_connect(a, 100, &ib, timeout, retry, rnr) ||
	    t_connect(b, 200, &ia, timeout, retry, rnr)) {
		fprintf(stderr, "FAIL: connect\n");
		exit(1);
	}
}

/* The sum of counter name as the engines printed it at
 * ibv_close_device with SOFTRNIC_LOG=debug (stderr redirected to f). */
static __attribute__((unused)) unsigned long long t_counter_sum(FILE *f, const char *name)
{
	char line[512], n[64];
	unsigned long long v, sum = 0;

	rewind(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "softrnic[%*d]: %63s %llu", n, &v) == 2 && !strcmp(n, name))
			sum += v;
	return sum;
}

/* The engines print their counters at ibv_close_device with
 * SOFTRNIC_LOG=debug: t_log_begin sends stderr (so those, and what CHECK
 * prints) to an unlinked file, t_log_end gives it back and returns that
 * file to read (NULL if it cannot). */
struct t_log {
	int fd, err2;
};

static __attribute__((unused)) int t_log_begin(struct t_log *l)
{
	char path[] = "/tmp/softrnic-test-log.XXXXXX";

	l->fd = mkstemp(path);
	l->err2 = dup(2);
	if (l->fd < 0 || l->err2 < 0)
		return -1;
	unlink(path);
	setenv("SOFTRNIC_LOG", "debug", 1);
	dup2(l->fd, 2);
	return 0;
}

static __attribute__((unused)) FILE *t_log_end(struct t_log *l)
{
	fflush(stderr);
	dup2(l->err2, 2);
	return fdopen(l->fd, "r");
}

/* Echo to stdout what CHECK and t_wait wrote into f while stderr went
 * there. */
static __attribute__((unused)) void t_echo_failures(FILE *f)
{
	char line[512];

	rewind(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "FAIL", 4) || !strncmp(line, "t_wait", 6))
			fputs(line, stdout);
}

/* After the last ibv_close_device: give stderr back (t_log_end), echo
 * the failures, and check the engines' direct_send counter: 0 under
 * SOFTRNIC_TRANSPORT=udp, else want. */
static __attribute__((unused)) void t_check_direct_sends(struct t_log *l, bool udp,
							 unsigned long long want)
{
	FILE *f = t_log_end(l);
	unsigned long long direct = f ? t_counter_sum(f, "direct_send") : 0;

	printf("direct_send %llu\n", direct);
	if (f)
		t_echo_failures(f);
	if (udp)
		CHECK(direct == 0, "no direct SEND under SOFTRNIC_TRANSPORT=udp (%llu)", direct);
	else
		CHECK(direct == want, "direct SENDs %llu (expected %llu)", direct, want);
	if (f)
		fclose(f);
}

/* An RC QP of e's PD and CQ receiving through srq, in INIT; NULL on
 * failure. */
static __attribute__((unused)) struct ibv_qp *t_srq_qp(struct t_end *e, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr qa = {
		.send_cq = e->cq, .recv_cq = e->cq, .srq = srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 },
	};
	struct ibv_qp_attr at = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &qa);

	if (qp && ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				IBV_QP_ACCESS_FLAGS)) {
		ibv_destroy_qp(qp);
		qp = NULL;
	}
	return qp;
}

static __attribute__((unused)) uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static __attribute__((unused)) uint64_t now_ms(void)
{
	return now_us() / 1000;
}

/* Poll cq for one completion, up to limit_ms: 0, or -1. */
static __attribute__((unused)) int t_wait_ms(struct ibv_cq *cq, struct ibv_wc *wc,
					     uint64_t limit_ms)
{
	uint64_t end = now_ms() + limit_ms;

	while (now_ms() < end) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			return -1;
		if (n == 1)
			return 0;
	}
	return -1;
}

/* Wait up to 10 s for one completion. */
static __attribute__((unused)) int t_wait(struct ibv_cq *cq, struct ibv_wc *wc)
{
	if (!t_wait_ms(cq, wc, 10000))
		return 0;
	/* timed out: make sure no stale completion is mistaken for one */
	memset(wc, 0, sizeof(*wc));
	wc->status = IBV_WC_GENERAL_ERR;
	wc->wr_id = UINT64_MAX;
	fprintf(stderr, "t_wait: no completion within 10 s\n");
	return -1;
}

static __attribute__((unused)) void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + seed * 13 + (i >> 8));
}

/* Post wr with its remote address and key where its opcode reads them. */
static __attribute__((unused)) int t_post_remote(struct ibv_qp *qp, struct ibv_send_wr *wr,
						 uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr *bad;

	if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr->wr.atomic.remote_addr = raddr;
		wr->wr.atomic.rkey = rkey;
	} else {
		wr->wr.rdma.remote_addr = raddr;
		wr->wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, wr, &bad);
}

static __attribute__((unused)) int post_send(struct t_end *e, enum ibv_wr_opcode op, uint64_t loff, uint32_t len,
		     uint64_t raddr, uint32_t rkey, uint32_t imm, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf + loff, .length = len,
			       .lkey = e->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = len ? 1 : 0,
				  .opcode = op, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(imm) };

	return t_post_remote(e->qp, &wr, raddr, rkey);
}

static __attribute__((unused)) int post_recv(struct t_end *e, uint64_t off, uint32_t len, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf + off, .length = len,
			       .lkey = e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(e->qp, &wr, &bad);
}

static const uint32_t sizes[] = { 0, 1, MTU - 1, MTU, MTU + 1, 1u << 20 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define RX_OFF (1u << 20)   /* RDMA target area of each buffer */
#define RECV_OFF (2u << 20) /* receive buffers */
#define RECV_LEN (2u << 20)

/* Requester side of every op against a peer whose buffer is described by
 * peer.  When the peer end is in this process (b != NULL) it is checked
 * directly; otherwise the peer checks its side itself (see passive()). */
static __attribute__((unused)) void run_ops(struct t_end *a, struct t_end *b, const struct t_conn *peer,
		    const char *tag)
{
	struct ibv_wc wc;
	uint64_t raddr = peer->addr + RX_OFF;

	for (unsigned s = 0; s < NSIZES; s++) {
		uint32_t n = sizes[s];

		/* SEND and SEND_WITH_IMM */
		for (int imm = 0; imm < 2; imm++) {
			fill(a->buf, n, s + imm);
			if (b)
				CHECK(!post_recv(b, RECV_OFF, RECV_LEN, 100 + s), "post_recv");
			CHECK(!post_send(a, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, 0, n,
					 0, 0, 0xabc0 + s, 1), "post_send");
			CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
			      wc.opcode == IBV_WC_SEND && wc.wr_id == 1,
			      "%s SEND%s %u: send wc status %s", tag, imm ? "_IMM" : "", n,
			      ibv_wc_status_str(wc.status));
			if (b) {
				CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
				      wc.opcode == IBV_WC_RECV && wc.byte_len == n &&
				      wc.wr_id == 100 + s && wc.qp_num == b->qp->qp_num &&
				      wc.src_qp == a->qp->qp_num,
				      "%s SEND %u: recv wc st %s op %d len %u", tag, n,
				      ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len);
				CHECK(imm ? (wc.wc_flags & IBV_WC_WITH_IMM) &&
						    ntohl(wc.imm_data) == 0xabc0 + s
					  : !(wc.wc_flags & IBV_WC_WITH_IMM),
				      "%s SEND imm %d", tag, imm);
				CHECK(!memcmp(a->buf, b->buf + RECV_OFF, n), "%s SEND %u data", tag, n);
			}
		}
		printf("%s: SEND, SEND_WITH_IMM %u bytes ok\n", tag, n);

		/* RDMA WRITE, then READ it back into another spot */
		fill(a->buf, n, s + 50);
		CHECK(!post_send(a, IBV_WR_RDMA_WRITE, 0, n, raddr, peer->rkey, 0, 2), "post");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_RDMA_WRITE && wc.wr_id == 2,
		      "%s WRITE %u: %s", tag, n, ibv_wc_status_str(wc.status));
		if (b)
			CHECK(!memcmp(a->buf, b->buf + RX_OFF, n), "%s WRITE %u data", tag, n);
		memset(a->buf + RX_OFF, 0xee, n);
		CHECK(!post_send(a, IBV_WR_RDMA_READ, RX_OFF, n, raddr, peer->rkey, 0, 3), "post");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_RDMA_READ && wc.byte_len == n && wc.wr_id == 3,
		      "%s READ %u: %s len %u wr_id %llu opcode %d", tag, n,
		      ibv_wc_status_str(wc.status), wc.byte_len, (unsigned long long)wc.wr_id,
		      wc.opcode);
		CHECK(!memcmp(a->buf, a->buf + RX_OFF, n), "%s WRITE+READ %u data", tag, n);
		printf("%s: RDMA_WRITE, RDMA_READ %u bytes ok (read back equals written)\n", tag, n);

		/* WRITE_WITH_IMM consumes a receive WQE (here with no SGE) */
		fill(a->buf, n, s + 90);
		if (b) {
			struct ibv_recv_wr wr = { .wr_id = 200 + s }, *bad;

			CHECK(!ibv_post_recv(b->qp, &wr, &bad), "post_recv");
		}
		CHECK(!post_send(a, IBV_WR_RDMA_WRITE_WITH_IMM, 0, n, raddr, peer->rkey,
				 0x5150 + s, 4), "post");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 4,
		      "%s WRITE_IMM %u: %s", tag, n, ibv_wc_status_str(wc.status));
		if (b) {
			CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
			      wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
			      (wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0x5150 + s &&
			      wc.byte_len == n && wc.wr_id == 200 + s,
			      "%s WRITE_IMM %u: recv wc %s op %d len %u", tag, n,
			      ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len);
			CHECK(!memcmp(a->buf, b->buf + RX_OFF, n), "%s WRITE_IMM data", tag);
		}
		printf("%s: RDMA_WRITE_WITH_IMM %u bytes ok\n", tag, n);
	}

	/* Atomics on an 8-byte word at the start of the peer's target half. */
	uint64_t *res = (uint64_t *)(a->buf + 64);
	uint64_t word = 1000;

	/* outside the WRITE area, which the peer may still be checking */
	raddr = peer->addr + 512;

	fill(a->buf, 8, 0);
	memcpy(a->buf + 128, &word, 8);
	CHECK(!post_send(a, IBV_WR_RDMA_WRITE, 128, 8, raddr, peer->rkey, 0, 5), "post");
	CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 5,
	      "atomic setup: %s wr_id %llu", ibv_wc_status_str(wc.status),
	      (unsigned long long)wc.wr_id);
	{
		struct ibv_sge sge = { (uintptr_t)res, 8, a->mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 6, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = peer->rkey;
		wr.wr.atomic.compare_add = 5;
		*res = 0;
		CHECK(!ibv_post_send(a->qp, &wr, &bad), "post fadd");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_FETCH_ADD && wc.byte_len == 8 && *res == 1000,
		      "%s FETCH_ADD: %s orig %llu", tag, ibv_wc_status_str(wc.status),
		      (unsigned long long)*res);
		wr.wr_id = 7;
		wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.compare_add = 1005;
		wr.wr.atomic.swap = 77;
		*res = 0;
		CHECK(!ibv_post_send(a->qp, &wr, &bad), "post cas");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_COMP_SWAP && *res == 1005,
		      "%s CMP_SWAP (hit): %s orig %llu", tag, ibv_wc_status_str(wc.status),
		      (unsigned long long)*res);
		wr.wr_id = 8;
		wr.wr.atomic.compare_add = 1;
		wr.wr.atomic.swap = 99;
		CHECK(!ibv_post_send(a->qp, &wr, &bad), "post cas");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 8 &&
		      *res == 77,
		      "%s CMP_SWAP (miss): orig %llu", tag, (unsigned long long)*res);
		if (b) {
			memcpy(&word, b->buf + 512, 8);
			CHECK(word == 77, "%s atomic target %llu", tag, (unsigned long long)word);
		}
		/* read the word back */
		CHECK(!post_send(a, IBV_WR_RDMA_READ, 256, 8, raddr, peer->rkey, 0, 9), "post");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9,
		      "read word: %s wr_id %llu", ibv_wc_status_str(wc.status),
		      (unsigned long long)wc.wr_id);
		memcpy(&word, a->buf + 256, 8);
		CHECK(word == 77, "%s atomic result read back %llu", tag, (unsigned long long)word);
	}
	printf("%s: FETCH_ADD, CMP_SWAP (hit and miss) ok\n", tag);
}

/* Passive peer of the two-process test: serves receives the initiator's
 * SENDs and WRITE_WITH_IMMs need, checking each one. */
static __attribute__((unused)) void passive(struct t_end *b, const struct t_conn *peer, int sock)
{
	struct ibv_wc wc;
	uint8_t *expect = malloc(RECV_LEN);

	for (unsigned s = 0; s < NSIZES; s++) {
		uint32_t n = sizes[s];

		for (int imm = 0; imm < 2; imm++) {
			CHECK(!post_recv(b, RECV_OFF, RECV_LEN, 100 + s), "post_recv");
			char go = 1;

			CHECK(write(sock, &go, 1) == 1, "sync");
			CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
			      wc.opcode == IBV_WC_RECV && wc.byte_len == n &&
			      wc.src_qp == peer->qpn, "child SEND %u recv %s len %u", n,
			      ibv_wc_status_str(wc.status), wc.byte_len);
			fill(expect, n, s + imm);
			CHECK(!memcmp(expect, b->buf + RECV_OFF, n), "child SEND %u data", n);
			CHECK(!imm || ntohl(wc.imm_data) == 0xabc0 + s, "child imm");
		}
		struct ibv_recv_wr wr = { .wr_id = 200 + s }, *bad;
		char go = 1;

		CHECK(!ibv_post_recv(b->qp, &wr, &bad), "post_recv");
		CHECK(write(sock, &go, 1) == 1, "sync");
		CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len == n,
		      "child WRITE_IMM %u: %s", n, ibv_wc_status_str(wc.status));
		fill(expect, n, s + 90);
		CHECK(!memcmp(expect, b->buf + RX_OFF, n), "child WRITE_IMM %u data", n);
	}
	free(expect);
}

#endif
