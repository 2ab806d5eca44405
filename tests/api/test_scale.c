/* Scale (issue 24), at a size that runs in seconds: 2,000 RC QPs on
 * shared CQs, connected in pairs, each moving one SEND each way; 20,000
 * 4 KiB MRs (half over one buffer, half separate pages), a sample of
 * whose rkeys a remote WRITE must reach (and a flipped key must not);
 * everything destroyed, and the process then holds as many descriptors,
 * /dev/shm files and VMAs as before.  Then the limits: with
 * SOFTRNIC_MAX_QP / SOFTRNIC_MAX_MR lowered, ibv_query_device reports them
 * and the QP or MR past them fails with ENOMEM (rdma-core's documented
 * errno for "not enough resources"), and one more fits after a destroy. */
#include "tests/lib/t_scale.h"

#include <errno.h>

enum { NQP = 2000, PER_CQ = 50, NMR = 20000, SAMPLE = 97, SMALL_QP = 16, SMALL_MR = 64 };

/* One RDMA WRITE of 8 bytes from QP a's send slot 0 to addr/rkey; the
 * completion's status (or -1 if none came within 5 s). */
static int write_to(struct sc_qps *s, struct ibv_qp *a, struct ibv_cq *cq, uint64_t addr,
		    uint32_t rkey, uint64_t val)
{
	uint8_t *src = s->buf + (size_t)s->n * SC_MSG;
	struct ibv_sge sge = { (uintptr_t)src, 8, s->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = addr, .rkey = rkey } }, *bad;
	struct ibv_wc wc;

	memcpy(src, &val, 8);
	if (ibv_post_send(a, &wr, &bad))
		return -2;
	return t_poll_cq(cq, &wc, 1, 5000) == 1 ? (int)wc.status : -1;
}

/* A small cycle of everything the big one does: the library's
 * process-wide state (the registered-memory memfd, the maps reader)
 * exists from then on and is not counted as a leak. */
static void warm_up(void)
{
	struct ibv_context *ctx = t_lo_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct sc_qps s;

	T_ASSERT(pd && !sc_qps_create(&s, ctx, pd, 2, 2), "warm-up objects");
	sc_qps_free(&s);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	t_lo_free();
}

static void many(void)
{
	struct sc_mem m0, m1;
	int own0 = sc_shm_own_files();
	struct ibv_device_attr da;
	union ibv_gid gid;
	struct sc_qps s;

	sc_mem_read(&m0);
	struct ibv_context *ctx = t_lo_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	T_ASSERT(pd && !ibv_query_device(ctx, &da) && !ibv_query_gid(ctx, 1, 0, &gid),
		 "pd, query");
	T_OK(da.max_qp >= NQP && da.max_mr >= NMR && da.max_cq >= NQP / PER_CQ &&
	     da.max_cqe >= PER_CQ * 4, "limits fit: max_qp %d max_mr %d max_cq %d max_cqe %d",
	     da.max_qp, da.max_mr, da.max_cq, da.max_cqe);

	double t0 = t_now();
	int err = sc_qps_create(&s, ctx, pd, NQP, PER_CQ);
	T_ASSERT(!err, "%d QPs on %d CQs: %s", NQP, NQP / PER_CQ, strerror(errno));
	T_ASSERT(!sc_qps_connect(&s, &gid), "QPs connected in pairs: %s", strerror(errno));
	double t1 = t_now();
	int ok = sc_qps_ping(&s, 30000);
	T_OK(ok == NQP, "%d of %d QPs got their pair's SEND (created+connected in %.2f s, "
	     "ping %.2f s)", ok, NQP, t1 - t0, t_now() - t1);

	/* MRs: half over one buffer, half separate pages */
	uint8_t **addr = calloc(NMR, sizeof(*addr));
	struct ibv_mr **mr = calloc(NMR, sizeof(*mr));
	T_ASSERT(addr && mr, "arrays");
	uint8_t *one = sc_pages_one(addr, NMR / 2);
	T_ASSERT(one && !sc_pages_apart(addr + NMR / 2, NMR / 2), "buffers");
	t0 = t_now();
	int got = sc_mrs_reg(pd, addr, NMR, 4096, mr);
	T_OK(got == NMR, "%d of %d MRs registered (%.1f us each)%s%s", got, NMR,
	     (t_now() - t0) * 1e6 / NMR, got == NMR ? "" : ": ",
	     got == NMR ? "" : strerror(errno));
	uint32_t keys_differ = 0;
	for (int i = 1; i < NMR; i++)
		keys_differ += mr[i] && mr[i - 1] && mr[i]->rkey != mr[i - 1]->rkey;
	T_CHECK(keys_differ == (uint32_t)(got - 1), "neighbouring rkeys differ");

	/* every SAMPLE-th MR reached through its own rkey, at its last bytes */
	int reached = 0, tried = 0;
	for (int i = 0; i < NMR; i += SAMPLE) {
		uint64_t v = 0x5ca1e00000000000ull | (uint64_t)i, back;

		if (!mr[i])
			continue;
		tried++;
		int st = write_to(&s, s.qp[0], s.cq[0], (uintptr_t)addr[i] + 4088, mr[i]->rkey, v);
		memcpy(&back, addr[i] + 4088, 8);
		reached += st == IBV_WC_SUCCESS && back == v;
	}
	T_OK(tried > 200 && reached == tried, "remote WRITEs by rkey: %d of %d landed", reached,
	     tried);
	/* a key one bit off a live key is never live: refused (QP 2 then errs) */
	int st = write_to(&s, s.qp[2], s.cq[0], (uintptr_t)addr[0], mr[0]->rkey ^ 0x80000000u, 1);
	T_OK(st == IBV_WC_REM_ACCESS_ERR, "flipped rkey: %s",
	     st < 0 ? "no completion" : ibv_wc_status_str((enum ibv_wc_status)st));

	t0 = t_now();
	int freed = sc_mrs_dereg(mr, NMR);
	T_OK(freed == got, "%d MRs deregistered (%.1f us each)", freed,
	     (t_now() - t0) * 1e6 / NMR);
	t0 = t_now();
	T_OK(!sc_qps_destroy_qps(&s), "%d QPs destroyed (%.1f us each)", NQP,
	     (t_now() - t0) * 1e6 / NQP);
	sc_qps_free(&s);
	munmap(one, (size_t)NMR / 2 * 4096);
	for (int i = NMR / 2; i < NMR; i++)
		free(addr[i]);
	free(addr);
	free(mr);
	T_CHECK(!ibv_dealloc_pd(pd), "dealloc_pd");
	T_CHECK(!ibv_close_device(ctx), "close_device");
	t_lo_free();

	sc_mem_read(&m1);
	T_OK(m1.fds == m0.fds, "descriptors back to the start: %d -> %d", m0.fds, m1.fds);
	T_OK(m1.shm_files == m0.shm_files && sc_shm_own_files() == own0,
	     "/dev/shm files back to the start: %d -> %d held, %d -> %d named for us",
	     m0.shm_files, m1.shm_files, own0, sc_shm_own_files());
#ifdef __SANITIZE_ADDRESS__
	/* (ASan's allocator maps memory of its own as the test goes) */
	printf("VMAs: %d -> %d (not checked under ASan)\n", m0.maps, m1.maps);
#else
	T_OK(m1.maps <= m0.maps + 8, "VMAs back to the start: %d -> %d", m0.maps, m1.maps);
#endif
}

/* Past the (lowered) limits: ENOMEM, and room again after a destroy. */
static void limits(void)
{
	char v[16];
	struct ibv_device_attr da;
	struct ibv_qp *qp[SMALL_QP + 1];
	struct ibv_mr *mr[SMALL_MR + 1];
	static uint8_t page[4096];

	snprintf(v, sizeof(v), "%d", SMALL_QP);
	setenv("SOFTRNIC_MAX_QP", v, 1);
	snprintf(v, sizeof(v), "%d", SMALL_MR);
	setenv("SOFTRNIC_MAX_MR", v, 1);
	struct ibv_context *ctx = t_lo_open();
	unsetenv("SOFTRNIC_MAX_QP");
	unsetenv("SOFTRNIC_MAX_MR");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	T_ASSERT(pd && cq && !ibv_query_device(ctx, &da), "pd, cq, query");
	T_OK(da.max_qp == SMALL_QP && da.max_mr == SMALL_MR, "lowered limits reported: %d %d",
	     da.max_qp, da.max_mr);

	int made = 0;
	for (int i = 0; i < SMALL_QP; i++)
		made += (qp[i] = t_qp_create(pd, cq, IBV_QPT_RC, 2)) != NULL;
	errno = 0;
	qp[SMALL_QP] = t_qp_create(pd, cq, IBV_QPT_RC, 2);
	T_OK(made == SMALL_QP && !qp[SMALL_QP] && errno == ENOMEM,
	     "%d QPs fit, QP %d: %s", made, SMALL_QP + 1, strerror(errno));
	T_CHECK(!ibv_destroy_qp(qp[0]), "destroy");
	qp[0] = t_qp_create(pd, cq, IBV_QPT_RC, 2);
	T_OK(qp[0] != NULL, "after a destroy, one more QP fits");

	made = 0;
	for (int i = 0; i < SMALL_MR; i++)
		made += (mr[i] = ibv_reg_mr(pd, page, sizeof(page), SC_MR_ACCESS)) != NULL;
	errno = 0;
	mr[SMALL_MR] = ibv_reg_mr(pd, page, sizeof(page), SC_MR_ACCESS);
	T_OK(made == SMALL_MR && !mr[SMALL_MR] && errno == ENOMEM,
	     "%d MRs fit, MR %d: %s", made, SMALL_MR + 1, strerror(errno));
	T_CHECK(!ibv_dereg_mr(mr[0]), "dereg");
	mr[0] = ibv_reg_mr(pd, page, sizeof(page), SC_MR_ACCESS);
	T_OK(mr[0] != NULL, "after a dereg, one more MR fits");

	for (int i = 0; i < SMALL_MR; i++)
		if (mr[i])
			ibv_dereg_mr(mr[i]);
	for (int i = 0; i < SMALL_QP; i++)
		if (qp[i])
			ibv_destroy_qp(qp[i]);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	t_lo_free();
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(240);
	warm_up();
	many();
	limits();
	return t_summary();
}
