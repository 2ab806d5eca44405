/* A QP's RQ ring is shared memory a same-host peer writes (it takes
 * receive WQEs there: shared_rings.h).  Whatever it leaves in head and
 * tail, moving the QP to ERR (which flushes the posted receives) and a
 * post_recv in ERR return promptly, with at most a ring's worth of
 * flushed completions.  A tail 2^31 past head once made the flush take
 * 2^31 "WQEs" (found by tests/fuzz/fuzz_shared_rings.c). */
#include <stdio.h>
#include <unistd.h>

#include "tests/lib/t_verbs.h"
#include "verbs/datapath.h"
#include "verbs/shared_rings.h"

int main(void)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	struct t_rc_attr rc = { .access = IBV_ACCESS_LOCAL_WRITE, .hop_limit = 64,
				.rd_atomic = 1, .timeout = 14 };
	struct ibv_recv_wr wr = { .wr_id = 7 }, *bad;
	struct srn_rq_ring *r;
	struct ibv_wc wc[64];
	uint32_t slots;
	int n = 0, got;
	double t0;

	alarm(60); /* the backstop: a flush of 2^31 would take hours */
	ctx = t_lo_open();
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	qp = pd && cq ? t_qp_create(pd, cq, IBV_QPT_RC, 8) : NULL;
	if (!qp || ibv_query_gid(ctx, 1, 0, &rc.dgid))
		t_bail("pd/cq/qp");
	rc.dest_qpn = qp->qp_num; /* (connected to itself: never used) */
	if (t_qp_rc_connect(qp, &rc))
		t_bail("connect");
	for (int i = 0; i < 2; i++)
		if (ibv_post_recv(qp, &wr, &bad))
			t_bail("post_recv");
	r = srn_qp(qp)->rqs;
	slots = r->max_wr;
	atomic_store(&r->tail, atomic_load(&r->head) + (1u << 31));

	t0 = t_now();
	T_OK(ibv_modify_qp(qp, &err, IBV_QP_STATE) == 0 && t_now() - t0 < 2,
	     "to ERR with a tail 2^31 past head: %.3f s", t_now() - t0);
	t0 = t_now();
	(void)ibv_post_recv(qp, &wr, &bad);
	T_OK(t_now() - t0 < 2, "post_recv in ERR: %.3f s", t_now() - t0);
	while (n < 4 * (int)slots && (got = ibv_poll_cq(cq, 64, wc)) > 0)
		n += got;
	T_OK(n <= 2 * (int)slots + 1, "%d flushed completions for a ring of %u slots", n, slots);

	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	t_lo_free();
	return t_summary();
}
