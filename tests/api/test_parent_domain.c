/* Thread domains and parent domains (ibv_alloc_td, ibv_alloc_parent_domain):
 *  - bad input: EINVAL for a TD comp_mask, a parent without PD, made from
 *    a parent, with a TD or PD of another context, unknown comp_mask bits,
 *    ALLOCATORS without free; a CQ whose MASK_PD names a plain PD
 *  - a parent domain has its PD's context and handle; EBUSY for the PD,
 *    the TD and the parent while something holds them
 *  - traffic between a side whose QPs, SRQ and CQ are made in a parent
 *    domain with custom allocators (its MR in the plain PD) and a side
 *    whose MR is in a parent domain without allocators (its QPs in the
 *    plain PD): SENDs into a QP's RQ and into the SRQ, a SEND back,
 *    WRITE and READ each way; the data and byte counts are checked
 *  - the allocator is called for what lives in the process only: every
 *    QP's send queue; the RQ, SRQ and CQ rings too under
 *    SOFTRNIC_TRANSPORT=udp, where no peer maps them (on the same-host
 *    path they are memfd rings, and SENDs are delivered into them
 *    directly: the direct_send counter says so).  Each free matches an
 *    alloc (pointer, type, pd, pd_context) and all are freed at the end.
 *  - an allocator answering IBV_ALLOCATOR_USE_DEFAULT is asked and never
 *    given anything to free; one answering NULL fails ibv_create_qp with
 *    ENOMEM. */
#include <errno.h>
#include <stdbool.h>

#include "t_rc.h"

enum { TYPES = 5, MAXBUF = 64, SZ = 3000 };

/* What one parent domain's allocator saw. */
struct acct {
	const char *name;
	struct ibv_pd *parent;       /* the pd alloc and free must be given */
	int mode;                    /* 0 allocate, 1 USE_DEFAULT, 2 NULL,
				      * 3 misaligned by one byte */
	int allocs[TYPES], frees[TYPES], calls;
	void *ptr[MAXBUF];
	uint64_t type[MAXBUF];
	int live, bad;
};

static void *my_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t align,
		      uint64_t type)
{
	struct acct *a = pd_context;
	void *p;

	a->calls++;
	if (pd != a->parent || !size || (align & (align - 1)) || (type >> 32) != 0 ||
	    (type & 0xffffffff) == 0 || (type & 0xffffffff) >= TYPES) {
		a->bad++;
		return NULL;
	}
	if (a->mode == 1)
		return IBV_ALLOCATOR_USE_DEFAULT;
	if (a->mode == 2)
		return NULL;
	if (a->live == MAXBUF || posix_memalign(&p, align < 64 ? 64 : align, size + 1))
		return NULL;
	if (a->mode == 3)
		p = (char *)p + 1;
	memset(p, 0xa5, size); /* softrnic must not rely on zeroes from us */
	a->ptr[a->live] = p;
	a->type[a->live++] = type;
	a->allocs[type & 0xffffffff]++;
	return p;
}

static void my_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t type)
{
	struct acct *a = pd_context;

	for (int i = 0; i < a->live; i++) {
		if (a->ptr[i] != ptr)
			continue;
		if (a->type[i] != type || pd != a->parent)
			a->bad++;
		else
			a->frees[type & 0xffffffff]++;
		a->ptr[i] = a->ptr[--a->live];
		a->type[i] = a->type[a->live];
		free(a->mode == 3 ? (char *)ptr - 1 : ptr);
		return;
	}
	a->bad++; /* never allocated here */
}

static struct ibv_pd *parent_new(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_td *td,
				 struct acct *a)
{
	struct ibv_parent_domain_init_attr pa = { .pd = pd, .td = td };
	struct ibv_pd *p;

	if (a) {
		pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			       IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
		pa.alloc = my_alloc;
		pa.free = my_free;
		pa.pd_context = a;
	}
	p = ibv_alloc_parent_domain(ctx, &pa);
	if (a)
		a->parent = p;
	return p;
}

static void parent_einval(struct ibv_context *ctx, struct ibv_parent_domain_init_attr *pa,
			  const char *what)
{
	struct ibv_pd *p;

	errno = 0;
	p = ibv_alloc_parent_domain(ctx, pa);
	CHECK(!p && errno == EINVAL, "%s: EINVAL (got %p, errno %d)", what, (void *)p, errno);
	if (p)
		ibv_dealloc_pd(p);
}

static void bad_input(struct ibv_context *ctx, struct ibv_context *other, struct ibv_pd *pd)
{
	struct ibv_td_init_attr tda = { .comp_mask = 1 };
	struct ibv_td *td = NULL, *otd;
	struct ibv_pd *parent, *p;
	struct ibv_parent_domain_init_attr pa;
	struct ibv_cq_init_attr_ex cx = { .cqe = 8, .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD };
	struct ibv_pd *opd = ibv_alloc_pd(other);

	errno = 0;
	CHECK(!ibv_alloc_td(ctx, &tda) && errno == EINVAL, "TD comp_mask 1: EINVAL (%d)", errno);
	tda.comp_mask = 0;
	td = ibv_alloc_td(ctx, &tda);
	otd = ibv_alloc_td(other, &tda);
	CHECK(td && otd && opd, "alloc_td, a PD of another context");
	parent = parent_new(ctx, pd, td, NULL);
	CHECK(parent && parent->context == ctx && parent->handle == pd->handle,
	      "parent domain: its PD's context and handle");

	memset(&pa, 0, sizeof(pa));
	parent_einval(ctx, &pa, "no PD");
	pa.pd = parent;
	parent_einval(ctx, &pa, "made from a parent");
	pa.pd = opd;
	parent_einval(ctx, &pa, "PD of another context");
	pa.pd = pd;
	pa.td = otd;
	parent_einval(ctx, &pa, "TD of another context");
	pa.td = NULL;
	pa.comp_mask = 1u << 5;
	parent_einval(ctx, &pa, "unknown comp_mask");
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
	pa.alloc = my_alloc;
	parent_einval(ctx, &pa, "ALLOCATORS without free");

	cx.parent_domain = pd;
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &cx) && errno == EINVAL, "CQ MASK_PD with a plain PD: EINVAL (%d)",
	      errno);
	cx.parent_domain = NULL;
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &cx) && errno == EINVAL, "CQ MASK_PD without PD: EINVAL (%d)",
	      errno);

	CHECK(ibv_dealloc_td(td) == EBUSY, "dealloc_td while a parent holds it: EBUSY");
	CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd while a parent holds it: EBUSY");
	p = parent_new(ctx, pd, NULL, NULL); /* a second parent of one PD */
	CHECK(p && !ibv_dealloc_pd(p), "second parent, dealloc");
	CHECK(!ibv_dealloc_pd(parent), "dealloc parent");
	CHECK(!ibv_dealloc_td(td) && !ibv_dealloc_td(otd), "dealloc_td");
	CHECK(!ibv_dealloc_pd(opd), "dealloc other PD");
	printf("bad input: EINVAL/EBUSY as documented\n");
}

static struct ibv_qp *plain_qp(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = t,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &ia);
}

/* The other allocator answers: USE_DEFAULT (asked, nothing to free),
 * NULL (ENOMEM), misaligned memory (ENOMEM, given back). */
static void other_answers(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct acct def = { .name = "default", .mode = 1 }, fail = { .name = "fail", .mode = 2 };
	struct ibv_pd *pdef = parent_new(ctx, pd, NULL, &def);
	struct acct mis = { .name = "misaligned", .mode = 3 };
	struct ibv_pd *pfail = parent_new(ctx, pd, NULL, &fail);
	struct ibv_pd *pmis = parent_new(ctx, pd, NULL, &mis);
	struct ibv_qp *qp;

	CHECK(pdef && pfail && pmis, "parents");
	qp = plain_qp(pdef, cq, IBV_QPT_RC);
	CHECK(qp && def.calls > 0 && !def.bad, "USE_DEFAULT: QP made, alloc asked %d times", def.calls);
	if (qp)
		ibv_destroy_qp(qp);
	CHECK(def.live == 0 && def.frees[1] + def.frees[2] == 0, "USE_DEFAULT: nothing freed");
	errno = 0;
	qp = plain_qp(pfail, cq, IBV_QPT_UD);
	CHECK(!qp && errno == ENOMEM && fail.calls > 0, "alloc NULL: create_qp ENOMEM (%d)", errno);
	if (qp)
		ibv_destroy_qp(qp);
	errno = 0;
	qp = plain_qp(pmis, cq, IBV_QPT_RC);
	CHECK(!qp && errno == ENOMEM && mis.allocs[1] == 1 && mis.frees[1] == 1 && !mis.live &&
	      !mis.bad, "misaligned: create_qp ENOMEM (%d), buffer given back (%d/%d)", errno,
	      mis.allocs[1], mis.frees[1]);
	if (qp)
		ibv_destroy_qp(qp);
	CHECK(!ibv_dealloc_pd(pdef) && !ibv_dealloc_pd(pfail) && !ibv_dealloc_pd(pmis),
	      "dealloc parents");
	printf("USE_DEFAULT asked %d times, nothing freed; NULL -> ENOMEM; misaligned -> "
	       "ENOMEM, freed\n", def.calls);
}

static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = srq ? 0 : 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr at = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);

	if (qp && ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				IBV_QP_ACCESS_FLAGS)) {
		ibv_destroy_qp(qp);
		qp = NULL;
	}
	return qp;
}

/* e's QP becomes qp, connected to peer's qp pq. */
static int connect_qp(struct t_end *e, struct ibv_qp *qp, struct t_end *peer, struct ibv_qp *pq,
		uint32_t psn, uint32_t ppsn)
{
	struct t_conn c = { .qpn = pq->qp_num, .psn = ppsn, .gid = peer->gid };

	e->qp = qp;
	return t_connect(e, psn, &c, 14, 7, 7);
}

static void expect(struct ibv_cq *cq, enum ibv_wc_opcode op, uint64_t wr_id, uint32_t len,
		   const char *what)
{
	struct ibv_wc wc;

	CHECK(!t_wait(cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == op &&
	      wc.wr_id == wr_id && (op != IBV_WC_RECV || wc.byte_len == len),
	      "%s: status %d opcode %d wr_id %llu len %u", what, wc.status, wc.opcode,
	      (unsigned long long)wc.wr_id, wc.byte_len);
}

static void send_one(struct t_end *from, struct ibv_qp *qp, struct t_end *to, uint64_t roff,
		     unsigned seed, const char *what)
{
	fill(from->buf, SZ, seed);
	from->qp = qp;
	CHECK(!post_send(from, IBV_WR_SEND, 0, SZ, 0, 0, 0, seed), "post SEND %s", what);
	expect(from->cq, IBV_WC_SEND, seed, SZ, what);
	expect(to->cq, IBV_WC_RECV, 500 + seed, SZ, what);
	CHECK(!memcmp(from->buf, to->buf + roff, SZ), "%s: data", what);
}

/* A WRITE or READ on from's qp between from's buffer at loff and to's
 * at roff; the data is checked. */
static void one_sided(struct t_end *from, struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t loff,
		      struct t_end *to, uint64_t roff, unsigned seed, const char *what)
{
	bool rd = op == IBV_WR_RDMA_READ;

	fill(rd ? to->buf + roff : from->buf + loff, SZ, seed);
	from->qp = qp;
	CHECK(!post_send(from, op, loff, SZ, (uintptr_t)to->buf + roff, to->mr->rkey, 0, seed),
	      "post %s", what);
	expect(from->cq, rd ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE, seed, SZ, what);
	CHECK(!memcmp(from->buf + loff, to->buf + roff, SZ), "%s: data", what);
}

static void traffic(struct ibv_context *ca, struct ibv_context *cb, struct acct *acc, bool udp)
{
	struct t_end a = { .ctx = ca }, b = { .ctx = cb };
	struct ibv_cq_init_attr_ex cx = { .cqe = 64, .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD };
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_td_init_attr tda = { 0 };
	struct ibv_pd *pa, *pb;
	struct ibv_td *td = ibv_alloc_td(ca, &tda);
	struct ibv_qp *qa1, *qa2, *qb1, *qb2;
	struct ibv_srq *srq;
	struct ibv_cq_ex *cqx;
	int sq, rq, srqs, cqs;

	a.pd = ibv_alloc_pd(ca);
	b.pd = ibv_alloc_pd(cb);
	pa = parent_new(ca, a.pd, td, acc);     /* allocators, a thread domain */
	pb = parent_new(cb, b.pd, NULL, NULL);  /* none */
	a.buf = aligned_alloc(4096, BUF_SIZE);
	b.buf = aligned_alloc(4096, BUF_SIZE);
	if (!td || !a.pd || !b.pd || !pa || !pb || !a.buf || !b.buf) {
		CHECK(0, "TD, PDs, parents, buffers");
		return;
	}
	memset(a.buf, 0, BUF_SIZE);
	memset(b.buf, 0, BUF_SIZE);
	/* the MR in the plain PD on the side whose QPs are in the parent,
	 * and the other way round on the other side: interchangeable */
	a.mr = ibv_reg_mr(a.pd, a.buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ);
	b.mr = ibv_reg_mr(pb, b.buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ);
	cx.parent_domain = pa;
	cqx = ibv_create_cq_ex(ca, &cx);
	a.cq = cqx ? ibv_cq_ex_to_cq(cqx) : NULL;
	b.cq = ibv_create_cq(cb, 64, NULL, NULL, 0);
	srq = ibv_create_srq(pa, &sa);
	CHECK(a.mr && b.mr && a.cq && b.cq && srq && b.mr->pd == pb && srq->pd == pa,
	      "MRs, CQs (A's in the parent), SRQ in the parent");
	if (!a.mr || !b.mr || !a.cq || !b.cq || !srq)
		goto out;
	qa1 = rc_qp(pa, a.cq, NULL);
	qa2 = rc_qp(pa, a.cq, srq);
	qb1 = rc_qp(b.pd, b.cq, NULL);
	qb2 = rc_qp(b.pd, b.cq, NULL);
	CHECK(qa1 && qa2 && qb1 && qb2 && qa1->pd == pa, "QPs");
	if (!qa1 || !qa2 || !qb1 || !qb2)
		goto qps;
	CHECK(ibv_dealloc_pd(pa) == EBUSY, "dealloc parent in use: EBUSY");
	ibv_query_gid(ca, 1, 0, &a.gid);
	ibv_query_gid(cb, 1, 0, &b.gid);
	CHECK(!connect_qp(&a, qa1, &b, qb1, 1, 2) && !connect_qp(&b, qb1, &a, qa1, 2, 1) &&
	      !connect_qp(&a, qa2, &b, qb2, 3, 4) && !connect_qp(&b, qb2, &a, qa2, 4, 3), "connect");

	for (unsigned i = 0; i < 4; i++) {
		struct ibv_sge s = { (uintptr_t)a.buf + RECV_OFF + i * 4096, 4096, a.mr->lkey };
		struct ibv_recv_wr w = { .wr_id = 500 + 10 + i, .sg_list = &s, .num_sge = 1 }, *bad;

		a.qp = qa1;
		CHECK(!post_recv(&a, RECV_OFF + 0x10000 + i * 4096, 4096, 500 + i), "post_recv A");
		CHECK(!ibv_post_srq_recv(srq, &w, &bad), "post_srq_recv");
	}
	b.qp = qb1;
	CHECK(!post_recv(&b, RECV_OFF, 4096, 500 + 20), "post_recv B");
	for (unsigned i = 0; i < 4; i++)
		send_one(&b, qb1, &a, RECV_OFF + 0x10000 + i * 4096, i, "SEND B -> A's RQ");
	for (unsigned i = 0; i < 4; i++)
		send_one(&b, qb2, &a, RECV_OFF + i * 4096, 10 + i, "SEND B -> A's SRQ");
	send_one(&a, qa1, &b, RECV_OFF, 20, "SEND A -> B");

	one_sided(&b, qb1, IBV_WR_RDMA_WRITE, 4096, &a, RX_OFF, 30, "WRITE B -> A");
	one_sided(&a, qa2, IBV_WR_RDMA_WRITE, 8192, &b, RX_OFF, 31, "WRITE A -> B");
	one_sided(&a, qa2, IBV_WR_RDMA_READ, 3 * 4096, &b, 4096, 32, "READ A <- B");
	printf("SENDs into the RQ and the SRQ, SEND back, WRITE, READ: data ok\n");

	sq = acc->allocs[1], rq = acc->allocs[2], srqs = acc->allocs[3], cqs = acc->allocs[4];
	printf("allocator (%s): send queues %d, RQ rings %d, SRQ rings %d, CQ rings %d, live %d\n",
	       udp ? "udp" : "same-host", sq, rq, srqs, cqs, acc->live);
	CHECK(sq == 2 && rq == (udp ? 1 : 0) && srqs == (udp ? 1 : 0) && cqs == (udp ? 1 : 0) &&
	      acc->live == sq + rq + srqs + cqs && !acc->bad,
	      "allocator asked for what lives in the process only (bad %d)", acc->bad);
qps:
	if (qa1)
		ibv_destroy_qp(qa1);
	if (qa2)
		ibv_destroy_qp(qa2);
	if (qb1)
		ibv_destroy_qp(qb1);
	if (qb2)
		ibv_destroy_qp(qb2);
out:
	if (srq)
		CHECK(!ibv_destroy_srq(srq), "destroy SRQ");
	if (a.cq)
		ibv_destroy_cq(a.cq);
	if (b.cq)
		ibv_destroy_cq(b.cq);
	if (a.mr)
		ibv_dereg_mr(a.mr);
	if (b.mr)
		ibv_dereg_mr(b.mr);
	CHECK(acc->live == 0 && !acc->bad && acc->frees[1] == acc->allocs[1] &&
	      acc->frees[4] == acc->allocs[4], "every buffer freed, each as allocated (live %d bad %d)",
	      acc->live, acc->bad);
	CHECK(!ibv_dealloc_pd(pa) && !ibv_dealloc_pd(pb) && !ibv_dealloc_td(td) &&
	      !ibv_dealloc_pd(a.pd) && !ibv_dealloc_pd(b.pd), "dealloc parents, TD, PDs");
	free(a.buf);
	free(b.buf);
}

int main(void)
{
	const char *mode = getenv("SOFTRNIC_TRANSPORT");
	bool udp = mode && !strcmp(mode, "udp");
	struct acct acc = { .name = "A" };
	struct ibv_context *ca, *cb;
	struct t_log log;

	setvbuf(stdout, NULL, _IONBF, 0);
	alarm(60);
	if (t_log_begin(&log))
		return 1;
	ca = t_open();
	cb = t_open();
	if (!ca || !cb) {
		t_log_end(&log);
		printf("SKIP: srn_lo is not available\n");
		return 77;
	}
	{
		struct ibv_pd *pd = ibv_alloc_pd(ca);
		struct ibv_cq *cq = ibv_create_cq(ca, 8, NULL, NULL, 0);

		CHECK(pd && cq, "PD, CQ");
		if (pd && cq) {
			bad_input(ca, cb, pd);
			other_answers(ca, pd, cq);
		}
		if (cq)
			ibv_destroy_cq(cq);
		if (pd)
			CHECK(!ibv_dealloc_pd(pd), "dealloc_pd");
	}
	traffic(ca, cb, &acc, udp);
	ibv_close_device(ca);
	ibv_close_device(cb);
	/* the 8 SENDs into A (RQ and SRQ rings peers map) and the one back */
	t_check_direct_sends(&log, udp, 9);
	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
