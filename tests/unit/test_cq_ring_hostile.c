/* A CQ's ring is shared memory a same-host peer writes (shared_rings.h):
 * whatever it leaves in cons and prod, destroying a QP (which cleans the
 * QP's completions out of its CQ), resizing and destroying the CQ return
 * promptly.  prod far past cons once made each of them walk 2^40
 * entries (found by tests/fuzz/fuzz_shared_rings.c). */
#include <stdio.h>
#include <unistd.h>

#include "tests/lib/t_verbs.h"
#include "verbs/datapath.h"
#include "verbs/shared_rings.h"

static void corrupt(struct ibv_cq *cq, uint64_t cons, uint64_t prod)
{
	struct srn_cq_ring *r = srn_cq(cq)->ring;

	atomic_store(&r->cons, cons);
	atomic_store(&r->prod, prod);
}

int main(void)
{
	static const struct { uint64_t cons, prod; const char *what; } cases[] = {
		{ 0, 1ull << 40, "prod 2^40 past cons" },
		{ 5, (1ull << 62) + 3, "prod 2^62 past cons" },
		{ 1ull << 40, 7, "cons past prod" },
	};
	struct ibv_context *ctx;
	struct ibv_pd *pd;

	alarm(60); /* the backstop: a walk of 2^40 entries would take hours */
	ctx = t_lo_open();
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		t_bail("alloc_pd");
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
		struct ibv_qp *qp = cq ? t_qp_create(pd, cq, IBV_QPT_RC, 8) : NULL;
		double t0;

		if (!qp)
			t_bail("create cq/qp");
		corrupt(cq, cases[i].cons, cases[i].prod);
		t0 = t_now();
		T_OK(ibv_destroy_qp(qp) == 0 && t_now() - t0 < 2, "%s: destroy_qp in %.3f s",
		     cases[i].what, t_now() - t0);
		t0 = t_now();
		T_OK(ibv_resize_cq(cq, 32) == EINVAL && t_now() - t0 < 2,
		     "%s: resize refused (more waiting than fits) in %.3f s", cases[i].what,
		     t_now() - t0);
		corrupt(cq, cases[i].cons, cases[i].prod);
		t0 = t_now();
		T_OK(ibv_destroy_cq(cq) == 0 && t_now() - t0 < 2, "%s: destroy_cq in %.3f s",
		     cases[i].what, t_now() - t0);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	t_lo_free();
	return t_summary();
}
