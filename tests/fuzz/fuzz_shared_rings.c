/* libFuzzer target for the shared CQ and RQ rings (verbs/shared_rings.h):
 * the receive queue and completion queue of a QP live in memory a
 * same-host peer maps read-write, takes receive WQEs from and writes
 * completions into (transport/direct_send.c), and that the owner's
 * post_recv, poll_cq and engine read back.  Whatever a peer writes there
 * must not make either side crash, hang or write outside an MR.
 *
 * One process, two RC QPs on srn_lo connected to each other over the
 * same-host direct path: A sends, T receives.  The input is a script of
 * steps: A's SENDs and WRITEs with immediate (delivered by A into T's
 * rings), T's post_recv and polls, arming T's CQ, and hostile 32- or
 * 64-bit writes anywhere in the headers of T's RQ and CQ rings and in
 * their WQE and completion slots, and in what T's QP publishes in the
 * host's QPN registry (what a malicious or corrupted peer can do).  T's
 * MR sits between a PROT_NONE guard page and an unregistered page whose
 * pattern is checked after every input; ASan and UBSan catch the rest.  An input that wrote the rings, left a QP in ERR or a send
 * pending ends with fresh QPs (and a fresh CQ for T when its ring was
 * written): a wrecked ring does not outlive the input that wrecked it.
 * Built by `make fuzz` (clang); tests/e2e/fuzz_smoke.sh runs it briefly. */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tests/fuzz/fuzz_cursor.h"
#include "tests/lib/t_verbs.h"
#include "net/registry.h"
#include "transport/engine.h"
#include "verbs/datapath.h"
#include "verbs/shared_rings.h"

#define PG 4096
#define MRLEN (8 * PG)
#define NWR 16

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq_a, *cq_t;
static struct ibv_qp *qp_a, *qp_t;
static struct ibv_mr *mr_t, *mr_a;
static uint8_t *area, *tbuf, *abuf, *gap;    /* guard | T | gap | A | guard */
static union ibv_gid gid;
static uint32_t rq_slots, cq_slots;          /* as created: the ring's own
					      * words may be overwritten */
static struct srn_rq_ring *rq;
static struct srn_cq_ring *cr;
static bool cq_dirty, rq_dirty;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_shared_rings: %s\n", what);
	abort();
}

static void make_cq_t(void)
{
	if (cq_t && ibv_destroy_cq(cq_t))
		die("destroy cq");
	cq_t = ibv_create_cq(ctx, NWR, NULL, NULL, 0);
	if (!cq_t)
		die("create cq");
	cr = srn_cq(cq_t)->ring;
	cq_slots = srn_cq(cq_t)->size;
	cq_dirty = false;
}

static void make_pair(void)
{
	struct t_rc_attr r = { .access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE,
			       .dgid = gid, .hop_limit = 64, .min_rnr_timer = 1,
			       .rd_atomic = 1, .timeout = 14 };

	if (qp_a)
		ibv_destroy_qp(qp_a);
	if (qp_t)
		ibv_destroy_qp(qp_t);
	if (cq_dirty)
		make_cq_t();
	qp_a = t_qp_create(pd, cq_a, IBV_QPT_RC, NWR);
	qp_t = t_qp_create(pd, cq_t, IBV_QPT_RC, NWR);
	if (!qp_a || !qp_t)
		die("create qp");
	r.dest_qpn = qp_t->qp_num;
	if (t_qp_rc_connect(qp_a, &r))
		die("connect a");
	r.dest_qpn = qp_a->qp_num;
	if (t_qp_rc_connect(qp_t, &r))
		die("connect t");
	rq = srn_qp(qp_t)->rqs;
	if (!rq)
		die("T has no RQ ring");
	rq_slots = rq->max_wr;
	rq_dirty = false;
}

/* The pair must be rebuilt: its rings were written, a QP is in ERR or A
 * still waits for a receive (RNR retries are endless with rnr_retry 7). */
static bool pair_spent(void)
{
	struct srn_qp *a = srn_qp(qp_a);
	uint32_t pending;

	pthread_mutex_lock(&a->lock);
	pending = a->sq.tail - a->sq.head;
	pthread_mutex_unlock(&a->lock);
	return rq_dirty || cq_dirty || pending ||
	       a->a.attr.qp_state == IBV_QPS_ERR ||
	       srn_qp(qp_t)->a.attr.qp_state == IBV_QPS_ERR;
}

static void setup(void)
{
	unsigned int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	ctx = t_lo_open();
	pd = ibv_alloc_pd(ctx);
	cq_a = ibv_create_cq(ctx, 4 * NWR, NULL, NULL, 0);
	if (!pd || !cq_a || ibv_query_gid(ctx, 1, 0, &gid))
		die("pd/cq/gid");
	area = mmap(NULL, 2 * MRLEN + 3 * PG, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		die("mmap");
	tbuf = area + PG;
	gap = tbuf + MRLEN;
	abuf = gap + PG;
	for (int i = 0; i < PG; i++)
		gap[i] = (uint8_t)(0x3c + i * 7);
	if (mprotect(area, PG, PROT_NONE) || mprotect(abuf + MRLEN, PG, PROT_NONE))
		die("guard pages");
	mr_t = ibv_reg_mr(pd, tbuf, MRLEN, acc);
	mr_a = ibv_reg_mr(pd, abuf, MRLEN, acc);
	if (!mr_t || !mr_a)
		die("reg_mr");
	make_cq_t();
	make_pair();
}

static void check_gap(void)
{
	for (int i = 0; i < PG; i++)
		if (gap[i] != (uint8_t)(0x3c + i * 7))
			die("unregistered page changed: a write escaped its MR");
}

static void a_post(struct cursor *c, enum ibv_wr_opcode op)
{
	uint32_t len = (uint32_t)take(c, 2) % (3 * PG);
	struct ibv_sge sge = { (uintptr_t)abuf, len, mr_a->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	uint8_t f = (uint8_t)take(c, 1);

	if (f & 1)
		wr.send_flags |= IBV_SEND_SOLICITED;
	if ((f & 2) && len <= 64)
		wr.send_flags |= IBV_SEND_INLINE;
	wr.imm_data = (uint32_t)take(c, 4);
	wr.wr.rdma.remote_addr = (uintptr_t)tbuf + (uint32_t)take(c, 2) % MRLEN;
	wr.wr.rdma.rkey = mr_t->rkey;
	if (wr.wr.rdma.remote_addr + len > (uintptr_t)tbuf + MRLEN)
		sge.length = (uint32_t)((uintptr_t)tbuf + MRLEN - wr.wr.rdma.remote_addr);
	(void)ibv_post_send(qp_a, &wr, &bad); /* a full SQ: refused, fine */
}

static void t_recv_at(uint32_t off, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)tbuf + off, len, mr_t->lkey };
	struct ibv_recv_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *bad;

	(void)ibv_post_recv(qp_t, &wr, &bad); /* a full RQ: refused, fine */
}

static void t_recv(struct cursor *c)
{
	uint32_t off = (uint32_t)take(c, 2) % MRLEN;

	t_recv_at(off, (uint32_t)take(c, 2) % (MRLEN - off));
}

/* Receives waiting, so that most SENDs land at once (without one, the
 * direct path waits a while for the receiver before sending packets). */
static void t_recvs(void)
{
	for (int i = 0; i < NWR / 2; i++)
		t_recv_at(0, 3 * PG);
}

static void poll_some(struct ibv_cq *cq, int rounds)
{
	struct ibv_wc wc[16];

	for (int i = 0; i < rounds; i++)
		if (ibv_poll_cq(cq, 16, wc) < 0)
			break;
}

/* A 4- or 8-byte write of the input's value at an offset in [0, span). */
static void hostile(struct cursor *c, void *base, size_t span)
{
	size_t off = (size_t)take(c, 2) % span;
	uint64_t v = take(c, 8);

	if (take(c, 1) & 1 && span >= 8) {
		off &= ~(size_t)7;
		if (off + 8 > span)
			off = span - 8;
		memcpy((char *)base + off, &v, 8);
	} else {
		uint32_t w = (uint32_t)v;

		off &= ~(size_t)3;
		memcpy((char *)base + off, &w, 4);
	}
}

/* What T's QP tells same-host peers in the host's QPN registry (where its
 * RQ ring is, its state, PD, peer): the same word-write, republished. */
static void hostile_qpinfo(struct cursor *c)
{
	struct net_registry *reg = srn_ctx(ctx)->engine->reg;
	struct net_reg_qpinfo in;
	size_t off = (size_t)take(c, 1) % sizeof(in) & ~(size_t)3;
	uint32_t v = (uint32_t)take(c, 4);

	if (!reg || net_registry_qpinfo(reg, qp_t->qp_num, &in, NULL))
		return;
	memcpy((char *)&in + off, &v, 4);
	net_registry_publish(reg, qp_t->qp_num, &in);
	rq_dirty = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };

	if (!ctx) {
		setup();
		t_recvs();
	}
	for (int step = 0; step < 48 && c.n; step++) {
		uint8_t op = (uint8_t)take(&c, 1);

		switch (op % 12) {
		case 0: a_post(&c, IBV_WR_SEND); break;
		case 1: a_post(&c, IBV_WR_SEND_WITH_IMM); break;
		case 2: a_post(&c, IBV_WR_RDMA_WRITE_WITH_IMM); break;
		case 3: t_recv(&c); break;
		case 4:
			hostile(&c, rq, offsetof(struct srn_rq_ring, wqe));
			rq_dirty = true;
			break;
		case 5:
			hostile(&c, &rq->wqe[take(&c, 1) % rq_slots], sizeof(struct srn_recv_wqe));
			rq_dirty = true;
			break;
		case 6:
			hostile(&c, cr, offsetof(struct srn_cq_ring, ent));
			cq_dirty = true;
			break;
		case 7:
			hostile(&c, &cr->ent[take(&c, 1) % cq_slots], sizeof(struct srn_cqe_slot));
			cq_dirty = true;
			break;
		case 8: poll_some(cq_t, 1 + (int)(take(&c, 1) % 4)); break;
		case 9: poll_some(cq_a, 1 + (int)(take(&c, 1) % 4)); break;
		case 10: hostile_qpinfo(&c); break;
		default: (void)ibv_req_notify_cq(cq_t, (int)(take(&c, 1) & 1)); break;
		}
	}
	poll_some(cq_a, 4);
	poll_some(cq_t, 4);
	if (pair_spent()) {
		make_pair();
		poll_some(cq_a, 4);
	}
	t_recvs();
	check_gap();
	return 0;
}
