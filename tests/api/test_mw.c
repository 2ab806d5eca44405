/* Memory windows, type 1 and type 2, between two RC QPs on srn_lo: the
 * rkey of a window reaches only what the window grants (range, rights,
 * PD, for type 2 the QP it was bound through) and nothing once it is
 * unbound, invalidated (locally or by the peer's SEND with Invalidate)
 * or deallocated: a remote access then completes IBV_WC_REM_ACCESS_ERR
 * at the requester.  Binds that break a rule complete IBV_WC_MW_BIND_ERR.
 * Also the ibv_wr_* forms (bind_mw, local_inv, send_inv) and RDMA ATOMIC
 * WRITE.  Every error puts a QP in error, so each case has a fresh pair. */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t_rc.h"

#define WIN_OFF 4096u    /* window: [buf + 4096, buf + 4096 + 8192) */
#define WIN_LEN 8192u

static struct t_end a, b;    /* a: requester, b: owns the windows */
static struct ibv_mr *mwmr;  /* b's MR with MW_BIND and no remote rights */

static void fresh(void)
{
	if (mwmr)
		ibv_dereg_mr(mwmr);
	t_end_fini(&a);
	t_end_fini(&b);
	/* retries: a lost packet is not what is tested here */
	t_pair(&a, &b, 8, 7, 1);
	mwmr = ibv_reg_mr(b.pd, b.buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	if (!mwmr) {
		fprintf(stderr, "FAIL: reg_mr with MW_BIND\n");
		exit(1);
	}
}

static uint64_t win_addr(void)
{
	return (uintptr_t)b.buf + WIN_OFF;
}

/* One RDMA op of len bytes from a at raddr under rkey; its status. */
static enum ibv_wc_status rdma(enum ibv_wr_opcode op, uint32_t rkey, uint64_t raddr, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)a.buf, .length = len, .lkey = a.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	wr.wr.rdma.rkey = rkey;
	wr.wr.rdma.remote_addr = raddr;
	if (ibv_post_send(a.qp, &wr, &bad) || t_wait(a.cq, &wc))
		return IBV_WC_GENERAL_ERR;
	return wc.status;
}

/* Binds type 1 window mw on b's QP; the bind's completion status. */
static enum ibv_wc_status bind1(struct ibv_mw *mw, struct ibv_mr *mr, uint64_t addr,
				uint64_t len, unsigned int access)
{
	struct ibv_mw_bind mb = { .wr_id = 11, .send_flags = IBV_SEND_SIGNALED,
				  .bind_info = { .mr = mr, .addr = addr, .length = len,
						 .mw_access_flags = access } };
	struct ibv_wc wc;
	int err = ibv_bind_mw(b.qp, mw, &mb);

	if (err) {
		fprintf(stderr, "ibv_bind_mw: %d\n", err);
		return IBV_WC_GENERAL_ERR;
	}
	if (t_wait(b.cq, &wc))
		return IBV_WC_GENERAL_ERR;
	CHECK(wc.wr_id == 11 && (wc.status || wc.opcode == IBV_WC_BIND_MW),
	      "bind completion: wr_id %llu opcode %d", (unsigned long long)wc.wr_id, wc.opcode);
	return wc.status;
}

/* A fresh pair and a type 1 window over the window range, bound. */
static struct ibv_mw *fresh_bound1(unsigned int access)
{
	struct ibv_mw *mw;

	fresh();
	mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
	if (!mw || bind1(mw, mwmr, win_addr(), WIN_LEN, access) != IBV_WC_SUCCESS) {
		fprintf(stderr, "FAIL: type 1 window\n");
		exit(1);
	}
	return mw;
}

/* Binds type 2 window mw through qp with a new rkey (post_send). */
static enum ibv_wc_status bind2(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mw *mw,
				struct ibv_mr *mr, unsigned int access, uint32_t *rkey)
{
	struct ibv_send_wr wr = { .wr_id = 12, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	*rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = *rkey;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = mr, .addr = win_addr(), .length = WIN_LEN, .mw_access_flags = access };
	if (ibv_post_send(qp, &wr, &bad) || t_wait(cq, &wc))
		return IBV_WC_GENERAL_ERR;
	CHECK(wc.status || wc.opcode == IBV_WC_BIND_MW, "type 2 bind opcode %d", wc.opcode);
	return wc.status;
}

/* A fresh pair and a type 2 window bound through b's QP; *rkey its key. */
static struct ibv_mw *fresh_bound2(unsigned int access, uint32_t *rkey)
{
	struct ibv_mw *mw;

	fresh();
	mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
	if (!mw || bind2(b.qp, b.cq, mw, mwmr, access, rkey) != IBV_WC_SUCCESS) {
		fprintf(stderr, "FAIL: type 2 window\n");
		exit(1);
	}
	return mw;
}

static enum ibv_wc_status post_local(struct ibv_qp *qp, struct ibv_cq *cq,
				     enum ibv_wr_opcode op, uint32_t rkey)
{
	struct ibv_send_wr wr = { .wr_id = 13, .opcode = op, .send_flags = IBV_SEND_SIGNALED,
				  .invalidate_rkey = rkey }, *bad;
	struct ibv_wc wc;

	if (ibv_post_send(qp, &wr, &bad) || t_wait(cq, &wc))
		return IBV_WC_GENERAL_ERR;
	CHECK(wc.status || wc.opcode == IBV_WC_LOCAL_INV, "local inv opcode %d", wc.opcode);
	return wc.status;
}

#define EXPECT(got, want, what)                                                        \
	do {                                                                           \
		enum ibv_wc_status g_ = (got);                                         \
		printf("  %-52s %s\n", what, ibv_wc_status_str(g_));                   \
		CHECK(g_ == (want), "%s: %s, want %s", what, ibv_wc_status_str(g_),  \
		      ibv_wc_status_str(want));                                        \
	} while (0)

static void t_caps(void)
{
	struct ibv_device_attr da;
	struct ibv_mw *mw;

	CHECK(!ibv_query_device(b.ctx, &da), "query_device");
	printf("caps: max_mw %d, MEM_WINDOW %d, TYPE_2B %d\n", da.max_mw,
	       !!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW),
	       !!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B));
	CHECK(da.max_mw > 0 && (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) &&
	      (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B), "window caps");
	errno = 0;
	mw = ibv_alloc_mw(b.pd, (enum ibv_mw_type)3);
	CHECK(!mw && errno == EINVAL, "type 3 -> EINVAL (errno %d)", errno);
	mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
	CHECK(mw && mw->type == IBV_MW_TYPE_1 && mw->rkey != b.mr->rkey, "alloc type 1");
	CHECK(ibv_dealloc_pd(b.pd) == EBUSY, "PD with a window -> EBUSY");
	CHECK(mw && !ibv_dealloc_mw(mw), "dealloc");
}

static void t_type1(void)
{
	struct ibv_mw *mw;
	uint32_t old;

	printf("type 1 (ibv_bind_mw)\n");
	fresh();
	mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
	CHECK(mw != NULL, "alloc_mw type 1");
	if (!mw)
		return;
	old = mw->rkey;
	EXPECT(bind1(mw, mwmr, win_addr(), WIN_LEN,
		     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ), IBV_WC_SUCCESS, "bind");
	CHECK(mw->rkey != old && (mw->rkey >> 8) == (old >> 8), "bind steps the key's low byte");
	fill(a.buf, 64, 5);
	EXPECT(rdma(IBV_WR_RDMA_WRITE, mw->rkey, win_addr() + WIN_LEN - 64, 64),
	       IBV_WC_SUCCESS, "WRITE at the window's end");
	CHECK(!memcmp(b.buf + WIN_OFF + WIN_LEN - 64, a.buf, 64), "data landed");
	memset(a.buf, 0, 64);
	EXPECT(rdma(IBV_WR_RDMA_READ, mw->rkey, win_addr() + WIN_LEN - 64, 64),
	       IBV_WC_SUCCESS, "READ it back");
	CHECK(!memcmp(b.buf + WIN_OFF + WIN_LEN - 64, a.buf, 64), "data read");
	EXPECT(rdma(IBV_WR_RDMA_WRITE, old, win_addr(), 8), IBV_WC_REM_ACCESS_ERR,
	       "the key before the bind");
	ibv_dealloc_mw(mw);

	/* each error below needs a fresh pair */
	static const struct {
		int64_t off;             /* from the window's start */
		uint32_t len;
		unsigned int access;     /* the window grants */
		const char *what;
	} bad[] = {
		{ WIN_LEN - 4, 8, IBV_ACCESS_REMOTE_WRITE, "WRITE past the window's end" },
		{ -8, 8, IBV_ACCESS_REMOTE_WRITE, "WRITE before the window (inside the MR)" },
		{ 0, 8, IBV_ACCESS_REMOTE_READ, "WRITE through a read-only window" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		mw = fresh_bound1(bad[i].access);
		EXPECT(rdma(IBV_WR_RDMA_WRITE, mw->rkey, win_addr() + (uint64_t)bad[i].off,
			    bad[i].len), IBV_WC_REM_ACCESS_ERR, bad[i].what);
		ibv_dealloc_mw(mw);
	}

	mw = fresh_bound1(IBV_ACCESS_REMOTE_WRITE);
	EXPECT(bind1(mw, mwmr, win_addr(), 0, 0), IBV_WC_SUCCESS, "unbind (length 0)");
	EXPECT(rdma(IBV_WR_RDMA_WRITE, mw->rkey, win_addr(), 8),
	       IBV_WC_REM_ACCESS_ERR, "WRITE after unbind");
	ibv_dealloc_mw(mw);

	mw = fresh_bound1(IBV_ACCESS_REMOTE_WRITE);
	old = mw->rkey;
	ibv_dealloc_mw(mw);
	EXPECT(rdma(IBV_WR_RDMA_WRITE, old, win_addr(), 8),
	       IBV_WC_REM_ACCESS_ERR, "WRITE after dealloc");

	fresh();
	mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
	EXPECT(bind1(mw, b.mr, win_addr(), WIN_LEN, IBV_ACCESS_REMOTE_WRITE),
	       IBV_WC_MW_BIND_ERR, "bind on an MR without MW_BIND");
	ibv_dealloc_mw(mw);

	fresh();
	mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
	EXPECT(bind1(mw, mwmr, (uintptr_t)b.buf + BUF_SIZE - 4096, 8192, IBV_ACCESS_REMOTE_WRITE),
	       IBV_WC_MW_BIND_ERR, "bind past the MR's end");
	ibv_dealloc_mw(mw);
}

static void t_wrong_pd(void)
{
	struct ibv_pd *pd2;
	struct ibv_mr *mr2;
	struct ibv_mw *mw;
	struct ibv_mw_bind mb = { .send_flags = IBV_SEND_SIGNALED };
	uint32_t rkey;

	printf("wrong PD at bind\n");
	fresh();
	pd2 = ibv_alloc_pd(b.ctx);
	mr2 = pd2 ? ibv_reg_mr(pd2, b.buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)
		  : NULL;
	mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
	CHECK(pd2 && mr2 && mw, "second PD, its MR, a window");
	if (!pd2 || !mr2 || !mw)
		return;
	mb.bind_info = (struct ibv_mw_bind_info){ .mr = mr2, .addr = win_addr(), .length = WIN_LEN,
						  .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	CHECK(ibv_bind_mw(b.qp, mw, &mb) == EPERM, "type 1: MR of another PD -> EPERM");
	ibv_dealloc_mw(mw);
	mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
	EXPECT(bind2(b.qp, b.cq, mw, mr2, IBV_ACCESS_REMOTE_WRITE, &rkey), IBV_WC_MW_BIND_ERR,
	       "type 2: MR of another PD");
	ibv_dealloc_mw(mw);
	ibv_dereg_mr(mr2);
	ibv_dealloc_pd(pd2);
}

/* A second QP on b's context and PD, connected to a fresh requester c. */
static void t_type2_wrong_qp(void)
{
	struct t_end c = { 0 };
	struct ibv_qp *qp2;
	struct ibv_mw *mw;
	struct t_conn ic, ib2;
	uint32_t rkey;
	struct ibv_qp_init_attr qa = {
		.send_cq = NULL, .recv_cq = NULL, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr at = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	struct t_end b2;

	printf("type 2: only the QP it was bound through\n");
	fresh();
	qa.send_cq = qa.recv_cq = b.cq;
	qp2 = ibv_create_qp(b.pd, &qa);
	CHECK(qp2 && !ibv_modify_qp(qp2, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_ACCESS_FLAGS) && !t_end_init(&c), "second QP and requester");
	if (!qp2 || !c.qp)
		return;
	b2 = b;
	b2.qp = qp2;
	ic = t_info(&c, 300);
	ib2 = t_info(&b2, 400);
	CHECK(!t_connect(&c, 300, &ib2, 10, 1, 1) && !t_connect(&b2, 400, &ic, 10, 1, 1),
	      "connect c <-> b's second QP");
	mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
	EXPECT(bind2(b.qp, b.cq, mw, mwmr, IBV_ACCESS_REMOTE_WRITE, &rkey), IBV_WC_SUCCESS,
	       "bind through b's first QP");
	EXPECT(rdma(IBV_WR_RDMA_WRITE, rkey, win_addr(), 8), IBV_WC_SUCCESS, "WRITE via that QP");
	{
		struct t_end save = a;

		a = c; /* rdma() posts from a */
		EXPECT(rdma(IBV_WR_RDMA_WRITE, rkey, win_addr(), 8), IBV_WC_REM_ACCESS_ERR,
		       "WRITE via b's other QP");
		a = save;
	}
	ibv_dealloc_mw(mw);
	ibv_destroy_qp(qp2);
	t_end_fini(&c);
}

static void t_type2(void)
{
	struct ibv_mw *mw;
	uint32_t rkey, r2;

	printf("type 2 (IBV_WR_BIND_MW)\n");
	fresh();
	mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
	CHECK(mw && mw->type == IBV_MW_TYPE_2, "alloc type 2");
	if (!mw)
		return;
	CHECK(ibv_bind_mw(b.qp, mw, &(struct ibv_mw_bind){ 0 }) == EINVAL,
	      "ibv_bind_mw on type 2 -> EINVAL");
	EXPECT(bind2(b.qp, b.cq, mw, mwmr, IBV_ACCESS_REMOTE_WRITE, &rkey), IBV_WC_SUCCESS, "bind");
	EXPECT(rdma(IBV_WR_RDMA_WRITE, rkey, win_addr(), 64), IBV_WC_SUCCESS, "WRITE");
	EXPECT(bind2(b.qp, b.cq, mw, mwmr, IBV_ACCESS_REMOTE_WRITE, &r2), IBV_WC_MW_BIND_ERR,
	       "bind again while bound");
	ibv_dealloc_mw(mw);

	mw = fresh_bound2(IBV_ACCESS_REMOTE_WRITE, &rkey);
	EXPECT(post_local(b.qp, b.cq, IBV_WR_LOCAL_INV, rkey), IBV_WC_SUCCESS, "LOCAL_INV");
	/* free again: it may be bound anew (before the access error below,
	 * which puts b's QP in error too) */
	EXPECT(bind2(b.qp, b.cq, mw, mwmr, IBV_ACCESS_REMOTE_WRITE, &r2), IBV_WC_SUCCESS,
	       "bind after LOCAL_INV");
	EXPECT(rdma(IBV_WR_RDMA_WRITE, r2, win_addr(), 8), IBV_WC_SUCCESS, "WRITE, new key");
	EXPECT(post_local(b.qp, b.cq, IBV_WR_LOCAL_INV, r2), IBV_WC_SUCCESS, "LOCAL_INV again");
	EXPECT(rdma(IBV_WR_RDMA_WRITE, r2, win_addr(), 8), IBV_WC_REM_ACCESS_ERR,
	       "WRITE after LOCAL_INV");
	ibv_dealloc_mw(mw);

	mw = fresh_bound2(IBV_ACCESS_REMOTE_WRITE, &rkey);
	ibv_dealloc_mw(mw);
	EXPECT(rdma(IBV_WR_RDMA_WRITE, rkey, win_addr(), 8), IBV_WC_REM_ACCESS_ERR,
	       "WRITE after dealloc");

	fresh();
	EXPECT(post_local(b.qp, b.cq, IBV_WR_LOCAL_INV, b.mr->rkey), IBV_WC_MW_BIND_ERR,
	       "LOCAL_INV of an MR's key");
}

static void t_remote_inv(void)
{
	struct ibv_send_wr wr = { .wr_id = 21, .opcode = IBV_WR_SEND_WITH_INV,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	struct ibv_mw *mw;
	uint32_t rkey;

	printf("type 2: remote invalidation (SEND with Invalidate)\n");
	mw = fresh_bound2(IBV_ACCESS_REMOTE_WRITE, &rkey);
	CHECK(!post_recv(&b, 0, 64, 99), "post_recv");
	wr.invalidate_rkey = rkey;
	CHECK(!ibv_post_send(a.qp, &wr, &bad), "post SEND_WITH_INV");
	CHECK(!t_wait(a.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND,
	      "send completes: %s", ibv_wc_status_str(wc.status));
	CHECK(!t_wait(b.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	      (wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == rkey,
	      "receive: status %s flags 0x%x rkey 0x%x", ibv_wc_status_str(wc.status),
	      wc.wc_flags, wc.invalidated_rkey);
	printf("  receive completion WITH_INV, invalidated_rkey 0x%x\n", wc.invalidated_rkey);
	EXPECT(rdma(IBV_WR_RDMA_WRITE, rkey, win_addr(), 8), IBV_WC_REM_ACCESS_ERR,
	       "WRITE after remote invalidation");
	ibv_dealloc_mw(mw);

	fresh();
	CHECK(!post_recv(&b, 0, 64, 99), "post_recv");
	wr.invalidate_rkey = b.mr->rkey;
	CHECK(!ibv_post_send(a.qp, &wr, &bad), "post SEND_WITH_INV of an MR key");
	CHECK(!t_wait(a.cq, &wc) && wc.status == IBV_WC_REM_INV_REQ_ERR,
	      "invalidating an MR's key: %s", ibv_wc_status_str(wc.status));
	printf("  SEND_WITH_INV of an MR's key: %s\n", ibv_wc_status_str(wc.status));
}

/* The ibv_wr_* forms and RDMA ATOMIC WRITE. */
static void t_wr_api(void)
{
	struct ibv_qp_ex *qa, *qb;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint64_t v = 0x1122334455667788ull, got;
	uint32_t rkey;
	int err;

	printf("ibv_wr_*: bind_mw, atomic_write, send_inv, local_inv\n");
	fresh();
	qa = ibv_qp_to_qp_ex(a.qp);
	qb = ibv_qp_to_qp_ex(b.qp);
	mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
	CHECK(qa && qb && mw, "qp_ex and window");
	if (!qa || !qb || !mw)
		return;
	rkey = ibv_inc_rkey(mw->rkey);
	ibv_wr_start(qb);
	qb->wr_id = 31;
	qb->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(qb, mw, rkey, &(struct ibv_mw_bind_info){
		.mr = mwmr, .addr = win_addr(), .length = WIN_LEN,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE });
	err = ibv_wr_complete(qb);
	CHECK(!err && !t_wait(b.cq, &wc) && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_BIND_MW, "wr_bind_mw: err %d status %s", err,
	      ibv_wc_status_str(wc.status));

	ibv_wr_start(qa);
	qa->wr_id = 32;
	qa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(qa, rkey, win_addr() + 16, &v);
	err = ibv_wr_complete(qa);
	CHECK(!err && !t_wait(a.cq, &wc) && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_ATOMIC_WRITE, "atomic write: err %d status %s opcode %d", err,
	      ibv_wc_status_str(wc.status), wc.opcode);
	memcpy(&got, b.buf + WIN_OFF + 16, 8);
	printf("  ATOMIC WRITE through the window: 0x%llx\n", (unsigned long long)got);
	CHECK(got == v, "atomic write landed: 0x%llx", (unsigned long long)got);

	ibv_wr_start(qa);
	ibv_wr_atomic_write(qa, rkey, win_addr() + 4, &v);
	CHECK(ibv_wr_complete(qa) == EINVAL, "atomic write to a misaligned address -> EINVAL");

	CHECK(!post_recv(&b, 0, 64, 98), "post_recv");
	ibv_wr_start(qa);
	qa->wr_id = 33;
	qa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_inv(qa, rkey);
	ibv_wr_set_sge(qa, a.mr->lkey, (uintptr_t)a.buf, 16);
	err = ibv_wr_complete(qa);
	CHECK(!err && !t_wait(a.cq, &wc) && wc.status == IBV_WC_SUCCESS, "wr_send_inv");
	CHECK(!t_wait(b.cq, &wc) && (wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == rkey,
	      "receive WITH_INV");

	/* free again: bind anew and drop it with wr_local_inv */
	rkey = ibv_inc_rkey(rkey);
	ibv_wr_start(qb);
	qb->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(qb, mw, rkey, &(struct ibv_mw_bind_info){
		.mr = mwmr, .addr = win_addr(), .length = WIN_LEN,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE });
	ibv_wr_local_inv(qb, rkey);
	err = ibv_wr_complete(qb);
	CHECK(!err, "bind + local_inv batch");
	CHECK(!t_wait(b.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW,
	      "bind completes first");
	CHECK(!t_wait(b.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_LOCAL_INV,
	      "then local_inv");
	EXPECT(rdma(IBV_WR_RDMA_WRITE, rkey, win_addr(), 8), IBV_WC_REM_ACCESS_ERR,
	       "WRITE after wr_local_inv");
	ibv_dealloc_mw(mw);

	/* without the right to write, an atomic write is refused */
	mw = fresh_bound2(IBV_ACCESS_REMOTE_READ, &rkey);
	qa = ibv_qp_to_qp_ex(a.qp);
	ibv_wr_start(qa);
	qa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(qa, rkey, win_addr(), &v);
	CHECK(!ibv_wr_complete(qa) && !t_wait(a.cq, &wc), "atomic write posted");
	EXPECT(wc.status, IBV_WC_REM_ACCESS_ERR, "ATOMIC WRITE through a read-only window");
	ibv_dealloc_mw(mw);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	fresh();
	t_caps();
	t_type1();
	t_wrong_pd();
	t_type2();
	t_type2_wrong_qp();
	t_remote_inv();
	t_wr_api();
	if (mwmr)
		ibv_dereg_mr(mwmr);
	t_end_fini(&a);
	t_end_fini(&b);
	printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
