/* RC data path as a matrix, two QPs of one process on srn_lo:
 *   path MTU 256/1024/4096
 *   x opcode SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM, RDMA_READ
 *   x SGE layout: 1 SGE; max_sge SGEs of uneven lengths with zero-length
 *     ones (same split both sides); max_sge SGEs with a different split on
 *     the receiving side
 *   x size 0, 1, MTU-1, MTU, MTU+1, 1 MiB (64 MiB: WRITE and READ, MTU 4096)
 * data verified by a hash of what was gathered against a hash of what
 * landed; plus both atomics per MTU, INLINE (source scribbled right after
 * the post), FENCE, SOLICITED events, selective signalling and sq_sig_all,
 * *bad_wr on a list with one bad WR in the middle, send and receive queue
 * full -> ENOMEM. */
#include <arpa/inet.h>
#include <poll.h>
#include <stdlib.h>

#include "tests/lib/t_verbs.h"

#define AREA (65u << 20)            /* gather/send area, then target area */
#define BUF (2 * (size_t)AREA)
#define MAXSGE 32

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_comp_channel *ch;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	uint32_t max_inline;
};

static int nsge;                    /* SGEs of the multi-SGE layouts */

static uint64_t hash_bytes(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;   /* FNV-1a 64 */
	return h;
}

#define HASH0 0xcbf29ce484222325ull

static uint64_t hash_sges(const struct ibv_sge *s, int k, uint32_t n)
{
	uint64_t h = HASH0;

	for (int i = 0; i < k && n; i++) {
		uint32_t l = s[i].length < n ? s[i].length : n;

		h = hash_bytes(h, (const uint8_t *)(uintptr_t)s[i].addr, l);
		n -= l;
	}
	return h;
}

static void fill_rand(uint8_t *p, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t v = t_rand64();

		memcpy(p + i, &v, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)t_rand();
}

/* Splits n bytes over k SGEs from base: variant 0/1 give different uneven
 * weights with zero-length SGEs; gaps between SGEs so a wrong gather shows.
 * extra bytes go to the last SGE (receive side may be larger). */
static int split(struct end *e, uint8_t *base, uint32_t n, int k, int variant,
		 uint32_t extra, struct ibv_sge *s)
{
	uint64_t w[MAXSGE], wsum = 0, used = 0;
	uint8_t *cur = base;

	for (int i = 0; i < k; i++) {
		w[i] = variant == 0 ? (i % 3 == 1 ? 0 : (uint64_t)i + 1)
				    : (i % 4 == 2 ? 0 : (uint64_t)(k - i) * 2 + 1);
		if (k == 1)
			w[i] = 1;
		wsum += w[i];
	}
	for (int i = 0; i < k; i++) {
		uint32_t l = (uint32_t)((uint64_t)n * w[i] / wsum);

		s[i].length = l;
		used += l;
	}
	s[0].length += (uint32_t)(n - used);     /* w[0] != 0 in both variants */
	s[k - 1].length += extra;
	for (int i = 0; i < k; i++) {
		s[i].addr = (uintptr_t)cur;
		s[i].lkey = e->mr->lkey;
		cur += s[i].length + 64 + 8 * (unsigned)i;
	}
	return k;
}

static void fill_sges(struct ibv_sge *s, int k)
{
	for (int i = 0; i < k; i++)
		fill_rand((uint8_t *)(uintptr_t)s[i].addr, s[i].length);
}

static void end_open(struct end *e)
{
	memset(e, 0, sizeof(*e));
	e->ctx = t_lo_open();
	e->pd = ibv_alloc_pd(e->ctx);
	e->ch = ibv_create_comp_channel(e->ctx);
	e->scq = ibv_create_cq(e->ctx, 1024, NULL, NULL, 0);
	e->rcq = ibv_create_cq(e->ctx, 1024, NULL, e->ch, 0);
	e->buf = aligned_alloc(4096, BUF);
	if (!e->pd || !e->ch || !e->scq || !e->rcq || !e->buf)
		t_bail("device objects: %s", strerror(errno));
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!e->mr || ibv_query_gid(e->ctx, 1, 0, &e->gid))
		t_bail("reg_mr/query_gid: %s", strerror(errno));
}

/* What end_open made (each test destroyed its QPs), in reverse order. */
static void end_close(struct end *e)
{
	T_CHECK(!ibv_dereg_mr(e->mr) && !ibv_destroy_cq(e->rcq) && !ibv_destroy_cq(e->scq) &&
		!ibv_destroy_comp_channel(e->ch) && !ibv_dealloc_pd(e->pd) &&
		!ibv_close_device(e->ctx), "close the device objects");
	free(e->buf);
}

static struct ibv_qp *qp_new(struct end *e, int sig_all, uint32_t wr)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = e->scq, .recv_cq = e->rcq, .qp_type = IBV_QPT_RC,
		.sq_sig_all = sig_all,
		.cap = { .max_send_wr = wr, .max_recv_wr = wr, .max_send_sge = (uint32_t)nsge,
			 .max_recv_sge = (uint32_t)nsge, .max_inline_data = 256 },
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);

	if (!qp)
		t_bail("create_qp (sge %d): %s", nsge, strerror(errno));
	e->max_inline = ia.cap.max_inline_data;
	return qp;
}

static int qp_connect(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *dgid,
		      enum ibv_mtu mtu, uint8_t timeout)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0x123;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x123;
	a.timeout = timeout;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 16;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static void pair_up(struct end *a, struct end *b, enum ibv_mtu mtu, int sig_all)
{
	a->qp = qp_new(a, sig_all, 256);
	b->qp = qp_new(b, sig_all, 256);
	if (qp_connect(a->qp, b->qp->qp_num, &b->gid, mtu, 14) ||
	    qp_connect(b->qp, a->qp->qp_num, &a->gid, mtu, 14))
		t_bail("connect at mtu %d: %s", 128 << mtu, strerror(errno));
}

static void pair_down(struct end *a, struct end *b)
{
	T_CHECK(!ibv_destroy_qp(a->qp) && !ibv_destroy_qp(b->qp), "destroy_qp");
}

static int wait1(struct ibv_cq *cq, struct ibv_wc *wc)
{
	if (t_poll_cq(cq, wc, 1, 10000) == 1)
		return 0;
	memset(wc, 0, sizeof(*wc));
	wc->status = IBV_WC_GENERAL_ERR;
	return -1;
}

static int post(struct end *e, enum ibv_wr_opcode op, struct ibv_sge *s, int k,
		unsigned flags, uint64_t raddr, uint32_t rkey, uint64_t id)
{
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = s, .num_sge = k, .opcode = op,
				  .send_flags = flags, .imm_data = htonl((uint32_t)id) }, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

static int post_rx(struct end *e, struct ibv_sge *s, int k, uint64_t id)
{
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = s, .num_sge = k }, *bad;

	return ibv_post_recv(e->qp, &wr, &bad);
}

static const char *const opname[] = { "WRITE", "WRITE_IMM", "SEND", "SEND_IMM", "READ" };

/* One transfer of n bytes, opcode op, layout lay; a sends, b is the peer. */
static void one(struct end *a, struct end *b, enum ibv_wr_opcode op, int lay, uint32_t n,
		int mtu, int inl)
{
	struct ibv_sge ls[MAXSGE], rs[MAXSGE];
	int lk = lay == 0 ? 1 : nsge;
	int rk = lay == 0 ? 1 : nsge;
	uint8_t *remote = b->buf + AREA;
	uint64_t want, got;
	struct ibv_wc wc;
	static uint64_t id = 1000;
	unsigned flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
	int is_send = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
	int has_rx = is_send || op == IBV_WR_RDMA_WRITE_WITH_IMM;

	id++;
	if (op == IBV_WR_RDMA_READ) {
		/* local scatter list in a's target area, remote contiguous */
		split(a, a->buf + AREA, n, lk, lay == 2 ? 1 : 0, 0, ls);
		fill_rand(remote, n);
		want = hash_bytes(HASH0, remote, n);
	} else {
		split(a, a->buf, n, lk, 0, 0, ls);
		fill_sges(ls, lk);
		want = hash_sges(ls, lk, n);
	}
	if (is_send) {
		split(b, remote, n, rk, lay == 2 ? 1 : 0, 100, rs);
		T_CHECK(!post_rx(b, rs, rk, id), "post_recv");
	} else if (has_rx) {
		T_CHECK(!post_rx(b, NULL, 0, id), "post_recv (no SGE)");
	}
	int ret = post(a, op, ls, lk, flags, (uintptr_t)remote, b->mr->rkey, id);

	T_CHECK(!ret, "post_send %s: %s", opname[op], strerror(ret));
	if (inl)
		fill_sges(ls, lk);          /* INLINE: the post copied the data */
	T_CHECK(!wait1(a->scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == id &&
		(op != IBV_WR_RDMA_READ || wc.byte_len == n),
		"mtu %d %s lay %d n %u%s: send wc %s wr_id %llu len %u", mtu, opname[op], lay, n,
		inl ? " INLINE" : "", ibv_wc_status_str(wc.status),
		(unsigned long long)wc.wr_id, wc.byte_len);
	if (has_rx) {
		T_CHECK(!wait1(b->rcq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == id &&
			wc.byte_len == n && wc.src_qp == a->qp->qp_num &&
			wc.opcode == (is_send ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM) &&
			(op == IBV_WR_SEND ? !(wc.wc_flags & IBV_WC_WITH_IMM)
					   : (wc.wc_flags & IBV_WC_WITH_IMM) &&
						     ntohl(wc.imm_data) == (uint32_t)id),
			"mtu %d %s lay %d n %u: recv wc %s op %d len %u flags %x", mtu, opname[op],
			lay, n, ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len,
			wc.wc_flags);
	}
	if (op == IBV_WR_RDMA_READ)
		got = hash_sges(ls, lk, n);
	else if (is_send)
		got = hash_sges(rs, rk, n);
	else
		got = hash_bytes(HASH0, remote, n);
	T_CHECK(got == want, "mtu %d %s lay %d n %u%s: data hash differs", mtu, opname[op],
		lay, n, inl ? " INLINE" : "");
}

static void atomics(struct end *a, struct end *b, int mtu)
{
	uint64_t *target = (uint64_t *)(b->buf + AREA + 4096);
	uint64_t *res = (uint64_t *)(a->buf + 8192);
	struct ibv_sge s = { (uintptr_t)res, 8, a->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &s, .num_sge = 1,
				  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	*target = 0x1000000000ull;
	wr.wr.atomic.remote_addr = (uintptr_t)target;
	wr.wr.atomic.rkey = b->mr->rkey;
	wr.wr.atomic.compare_add = 0x42;
	T_CHECK(!ibv_post_send(a->qp, &wr, &bad), "post fetch_add");
	T_CHECK(!wait1(a->scq, &wc) && wc.status == IBV_WC_SUCCESS &&
		wc.opcode == IBV_WC_FETCH_ADD && *res == 0x1000000000ull &&
		*target == 0x1000000042ull, "mtu %d FETCH_ADD: %s old %llx new %llx", mtu,
		ibv_wc_status_str(wc.status), (unsigned long long)*res,
		(unsigned long long)*target);
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 0x1000000042ull;
	wr.wr.atomic.swap = 7;
	T_CHECK(!ibv_post_send(a->qp, &wr, &bad), "post cmp_swap");
	T_CHECK(!wait1(a->scq, &wc) && wc.status == IBV_WC_SUCCESS &&
		wc.opcode == IBV_WC_COMP_SWAP && *res == 0x1000000042ull && *target == 7,
		"mtu %d CMP_SWAP: %s", mtu, ibv_wc_status_str(wc.status));
}

static void matrix(struct end *a, struct end *b)
{
	static const enum ibv_mtu mtus[] = { IBV_MTU_256, IBV_MTU_1024, IBV_MTU_4096 };
	static const enum ibv_wr_opcode ops[] = { IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
		IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ };

	for (unsigned m = 0; m < 3; m++) {
		int mtu = 128 << mtus[m];
		uint32_t sizes[] = { 0, 1, (uint32_t)mtu - 1, (uint32_t)mtu, (uint32_t)mtu + 1,
				     1u << 20 };
		int f0 = t_fails;
		double t0 = t_now();

		pair_up(a, b, mtus[m], 0);
		for (unsigned o = 0; o < 5; o++)
			for (int lay = 0; lay < 3; lay++)
				for (unsigned s = 0; s < 6; s++)
					one(a, b, ops[o], lay, sizes[s], mtu, 0);
		atomics(a, b, mtu);
		T_OK(t_fails == f0, "mtu %d: 5 opcodes x 3 SGE layouts (1, %d uneven incl. 0-length, "
		     "different receive split) x 6 sizes + FETCH_ADD/CMP_SWAP, data hashed (%.1f s)",
		     mtu, nsge, t_now() - t0);
		if (mtus[m] == IBV_MTU_4096) {
			t0 = t_now();
			f0 = t_fails;
			one(a, b, IBV_WR_RDMA_WRITE, 1, 64u << 20, mtu, 0);
			one(a, b, IBV_WR_RDMA_READ, 2, 64u << 20, mtu, 0);
			T_OK(t_fails == f0, "mtu %d: 64 MiB WRITE and READ over %d SGEs, hashed (%.1f s)",
			     mtu, nsge, t_now() - t0);
		}
		if (mtus[m] == IBV_MTU_1024) {
			uint32_t inl_sizes[] = { 0, 1, 63, a->max_inline };

			f0 = t_fails;
			for (int lay = 0; lay < 2; lay++)
				for (unsigned s = 0; s < 4; s++) {
					one(a, b, IBV_WR_SEND, lay, inl_sizes[s], mtu, 1);
					one(a, b, IBV_WR_SEND_WITH_IMM, lay, inl_sizes[s], mtu, 1);
					one(a, b, IBV_WR_RDMA_WRITE, lay, inl_sizes[s], mtu, 1);
					one(a, b, IBV_WR_RDMA_WRITE_WITH_IMM, lay, inl_sizes[s], mtu, 1);
				}
			T_OK(t_fails == f0, "INLINE SEND/SEND_IMM/WRITE/WRITE_IMM 0..%u bytes, 1 and %d "
			     "SGEs; source overwritten after post does not change the data",
			     a->max_inline, nsge);
		}
		pair_down(a, b);
	}
}

/* READ of region R, then a FENCEd WRITE over R: the READ returns the old
 * bytes.  Then SOLICITED: with req_notify(solicited_only) an unsolicited
 * SEND raises no event, a solicited one does. */
static void fence_solicited(struct end *a, struct end *b)
{
	uint8_t *r = b->buf + AREA, *old = a->buf + AREA, *neu = a->buf;
	struct ibv_sge rs = { (uintptr_t)old, 65536, a->mr->lkey };
	struct ibv_sge ws = { (uintptr_t)neu, 65536, a->mr->lkey };
	struct ibv_wc wc[2];
	uint64_t h_old;

	pair_up(a, b, IBV_MTU_1024, 0);
	fill_rand(r, 65536);
	fill_rand(neu, 65536);
	h_old = hash_bytes(HASH0, r, 65536);
	T_CHECK(!post(a, IBV_WR_RDMA_READ, &rs, 1, IBV_SEND_SIGNALED, (uintptr_t)r,
		      b->mr->rkey, 1), "post read");
	T_CHECK(!post(a, IBV_WR_RDMA_WRITE, &ws, 1, IBV_SEND_SIGNALED | IBV_SEND_FENCE,
		      (uintptr_t)r, b->mr->rkey, 2), "post fenced write");
	int n = t_poll_cq(a->scq, wc, 2, 10000);

	T_OK(n == 2 && wc[0].wr_id == 1 && wc[1].wr_id == 2 && wc[0].status == IBV_WC_SUCCESS &&
	     wc[1].status == IBV_WC_SUCCESS && hash_bytes(HASH0, old, 65536) == h_old &&
	     !memcmp(r, neu, 65536),
	     "FENCE: READ then fenced WRITE of the same 64 KiB: READ saw the old bytes, "
	     "WRITE landed, completions in order");

	struct ibv_sge s = { (uintptr_t)a->buf, 16, a->mr->lkey };
	struct ibv_sge rx = { (uintptr_t)b->buf + AREA, 64, b->mr->lkey };
	struct pollfd p = { .fd = b->ch->fd, .events = POLLIN };
	struct ibv_cq *ecq;
	void *ectx;

	T_CHECK(!ibv_req_notify_cq(b->rcq, 1), "req_notify solicited_only");
	T_CHECK(!post_rx(b, &rx, 1, 10) && !post_rx(b, &rx, 1, 11), "post_recv");
	T_CHECK(!post(a, IBV_WR_SEND, &s, 1, IBV_SEND_SIGNALED, 0, 0, 3), "post send");
	T_CHECK(!wait1(a->scq, wc) && wc[0].status == IBV_WC_SUCCESS, "send 3");
	usleep(100000);
	int ev1 = poll(&p, 1, 200);

	T_CHECK(!post(a, IBV_WR_SEND, &s, 1, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, 0, 0, 4),
		"post solicited send");
	T_CHECK(!wait1(a->scq, wc) && wc[0].status == IBV_WC_SUCCESS, "send 4");
	int ev2 = poll(&p, 1, 3000);

	if (ev2 == 1 && !ibv_get_cq_event(b->ch, &ecq, &ectx))
		ibv_ack_cq_events(ecq, 1);
	T_OK(ev1 == 0 && ev2 == 1, "SOLICITED: no event for an unsolicited SEND (%d), one for "
	     "the solicited SEND (%d)", ev1, ev2);
	n = t_poll_cq(b->rcq, wc, 2, 3000);
	T_CHECK(n == 2 && wc[0].wr_id == 10 && wc[1].wr_id == 11, "both receives done");
	pair_down(a, b);
}

/* Selective signalling: 10 WRITEs, only the last signaled -> exactly one
 * completion; with sq_sig_all every WR completes although none asks. */
static void signalling(struct end *a, struct end *b)
{
	struct ibv_sge s = { (uintptr_t)a->buf, 256, a->mr->lkey };
	struct ibv_wc wc[16];

	for (int all = 0; all < 2; all++) {
		pair_up(a, b, IBV_MTU_1024, all);
		for (int i = 0; i < 10; i++)
			T_CHECK(!post(a, IBV_WR_RDMA_WRITE, &s, 1,
				      !all && i == 9 ? IBV_SEND_SIGNALED : 0,
				      (uintptr_t)b->buf + AREA, b->mr->rkey, (uint64_t)i), "post");
		int n = t_poll_cq(a->scq, wc, all ? 10 : 1, 5000);

		usleep(100000);
		n += ibv_poll_cq(a->scq, 16 - n, wc + n);
		if (all)
			T_OK(n == 10 && wc[0].wr_id == 0 && wc[9].wr_id == 9,
			     "sq_sig_all: 10 unsignaled WRITEs give 10 completions (%d)", n);
		else
			T_OK(n == 1 && wc[0].wr_id == 9 && wc[0].status == IBV_WC_SUCCESS,
			     "selective: 9 unsignaled + 1 signaled WRITE give 1 completion (%d)", n);
		pair_down(a, b);
	}
}

/* *bad_wr: a 3-WR list whose middle WR is bad (too many SGEs): the post
 * fails, bad_wr points at it, the first WR runs, the third does not. Then
 * ENOMEM when the send queue (peer QP that never answers) and the receive
 * queue are full. */
static void bad_wr_and_full(struct end *a, struct end *b)
{
	struct ibv_sge s[MAXSGE + 1], bs[MAXSGE + 1];
	struct ibv_send_wr w[3], *bad = NULL;
	struct ibv_recv_wr r[3], *rbad = NULL;
	struct ibv_wc wc[4];

	pair_up(a, b, IBV_MTU_1024, 0);
	for (int i = 0; i <= MAXSGE; i++)
{
		s[i] = (struct ibv_sge){ (uintptr_t)a->buf + 64 * (unsigned)i, 8, a->mr->lkey };
		bs[i] = (struct ibv_sge){ (uintptr_t)b->buf + AREA + 64 * (unsigned)i, 8,
					  b->mr->lkey };
	}
	memset(w, 0, sizeof(w));
	for (int i = 0; i < 3; i++) {
		w[i].wr_id = 50 + (uint64_t)i;
		w[i].sg_list = s;
		w[i].num_sge = 1;
		w[i].opcode = IBV_WR_RDMA_WRITE;
		w[i].send_flags = IBV_SEND_SIGNALED;
		w[i].wr.rdma.remote_addr = (uintptr_t)b->buf + AREA;
		w[i].wr.rdma.rkey = b->mr->rkey;
		w[i].next = i < 2 ? &w[i + 1] : NULL;
	}
	w[1].num_sge = nsge + 1;
	int ret = ibv_post_send(a->qp, w, &bad);
	int n = t_poll_cq(a->scq, wc, 2, 1000);

	T_OK(ret == EINVAL && bad == &w[1] && n == 1 && wc[0].wr_id == 50,
	     "post_send list with a bad middle WR: %s, bad_wr = WR %d, only the first "
	     "completes (%d completions)", strerror(ret), bad ? (int)(bad - w) : -1, n);
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 3; i++) {
		r[i].wr_id = 60 + (uint64_t)i;
		r[i].sg_list = bs;
		r[i].num_sge = 1;
		r[i].next = i < 2 ? &r[i + 1] : NULL;
	}
	r[1].num_sge = nsge + 1;
	ret = ibv_post_recv(b->qp, r, &rbad);
	T_OK(ret == EINVAL && rbad == &r[1], "post_recv list with a bad middle WR: %s, "
	     "bad_wr = WR %d", strerror(ret), rbad ? (int)(rbad - r) : -1);
	/* one receive (wr 60) is posted; consume it so the pair is clean */
	T_CHECK(!post(a, IBV_WR_SEND, s, 1, IBV_SEND_SIGNALED, 0, 0, 70), "post send");
	T_CHECK(t_poll_cq(a->scq, wc, 1, 3000) == 1 && wc[0].status == IBV_WC_SUCCESS &&
		t_poll_cq(b->rcq, wc + 1, 1, 3000) == 1 && wc[1].wr_id == 60,
		"the receive posted before the bad one is used");

	/* receive queue full */
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	int posted = 0;

	ibv_query_qp(b->qp, &qa, IBV_QP_CAP, &qi);
	for (uint32_t i = 0; i < qi.cap.max_recv_wr + 1; i++) {
		struct ibv_recv_wr one = { .wr_id = i, .sg_list = bs, .num_sge = 1 };

		ret = ibv_post_recv(b->qp, &one, &rbad);
		if (ret)
			break;
		posted++;
	}
	T_OK(ret == ENOMEM && (uint32_t)posted == qi.cap.max_recv_wr,
	     "receive queue full after max_recv_wr %u posts: %s", qi.cap.max_recv_wr,
	     strerror(ret));
	pair_down(a, b);

	/* send queue full: the peer QP stays in INIT (it drops everything), so
	 * nothing completes within the 4 s ACK timeout */
	struct ibv_qp *dead = qp_new(b, 0, 16);

	a->qp = qp_new(a, 0, 16);
	if (qp_connect(a->qp, dead->qp_num, &b->gid, IBV_MTU_1024, 20))
		t_bail("connect to dead: %s", strerror(errno));
	ibv_query_qp(a->qp, &qa, IBV_QP_CAP, &qi);
	posted = 0;
	for (uint32_t i = 0; i < qi.cap.max_send_wr + 1; i++) {
		ret = post(a, IBV_WR_RDMA_WRITE, s, 1, IBV_SEND_SIGNALED,
			   (uintptr_t)b->buf + AREA, b->mr->rkey, i);
		if (ret)
			break;
		posted++;
	}
	T_OK(ret == ENOMEM && (uint32_t)posted == qi.cap.max_send_wr,
	     "send queue full after max_send_wr %u posts: %s", qi.cap.max_send_wr,
	     strerror(ret));
	T_CHECK(!ibv_destroy_qp(a->qp) && !ibv_destroy_qp(dead), "destroy");
}

int main(void)
{
	struct end a, b;
	struct ibv_device_attr da;
	double t0 = t_now();

	t_rand_seed(0x5eed1234);
	end_open(&a);
	end_open(&b);
	if (ibv_query_device(a.ctx, &da))
		t_bail("query_device");
	nsge = da.max_sge < MAXSGE ? da.max_sge : MAXSGE;
	if (getenv("T_NSGE"))
		nsge = atoi(getenv("T_NSGE"));
	printf("max_sge %d (using %d)\n", da.max_sge, nsge);
	matrix(&a, &b);
	fence_solicited(&a, &b);
	signalling(&a, &b);
	bad_wr_and_full(&a, &b);
	end_close(&a);
	end_close(&b);
	printf("total %.1f s\n", t_now() - t0);
	return t_summary();
}
