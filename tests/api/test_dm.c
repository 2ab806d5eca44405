/* Device memory: ibv_alloc_dm / ibv_free_dm, ibv_memcpy_to_dm / from_dm
 * and ibv_reg_dm_mr (zero-based) with their bad inputs, then a DM MR as
 * the local SGE of a SEND and a receive, and as the remote target of
 * WRITE, READ and both atomics between two RC QPs.  On the same-host path
 * (default) the peer reaches the DM directly, as any shared MR
 * (direct_write/read/atomic counted); with SOFTRNIC_TRANSPORT=udp as
 * packets. */
#include "t_rc.h"

#include <errno.h>

#define DM_LEN 256u                  /* not a whole page: shared all the same */
#define DM_ACC (IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static struct ibv_dm *dm_alloc(struct ibv_context *ctx, size_t len, uint32_t mask, int *err)
{
	struct ibv_alloc_dm_attr at = { .length = len, .comp_mask = mask };
	struct ibv_dm *dm;

	errno = 0;
	dm = ibv_alloc_dm(ctx, &at);
	*err = errno;
	return dm;
}

/* Allocation, copies and registration, and what each refuses. */
static void api(struct ibv_context *ctx, struct ibv_pd *pd, uint64_t max)
{
	uint8_t in[64], out[64];
	struct ibv_dm *dm, *d2, *d3;
	struct ibv_mr *mr;
	int err;

	dm = dm_alloc(ctx, 0, 0, &err);
	CHECK(!dm && err == EINVAL, "length 0 -> EINVAL (%d)", err);
	dm = dm_alloc(ctx, 64, 1, &err);
	CHECK(!dm && err == EINVAL, "unknown comp_mask -> EINVAL (%d)", err);
	dm = dm_alloc(ctx, max + 1, 0, &err);
	CHECK(!dm && err == ENOMEM, "max_dm_size + 1 -> ENOMEM (%d)", err);
	/* the budget is max_dm_size in all */
	dm = dm_alloc(ctx, max / 2, 0, &err);
	d2 = dm_alloc(ctx, max / 2, 0, &err);
	CHECK(dm && d2, "two halves of max_dm_size");
	d3 = dm_alloc(ctx, 64, 0, &err);
	CHECK(!d3 && err == ENOMEM, "a third allocation past the budget -> ENOMEM (%d)", err);
	CHECK(d2 && ibv_free_dm(d2) == 0, "free_dm");
	d3 = dm_alloc(ctx, 64, 0, &err);
	CHECK(d3 != NULL, "room again after a free");
	if (d3)
		ibv_free_dm(d3);

	/* copies: 4-byte units inside the DM */
	fill(in, sizeof(in), 3);
	CHECK(ibv_memcpy_to_dm(dm, 8, in, sizeof(in)) == 0, "memcpy_to_dm");
	memset(out, 0, sizeof(out));
	CHECK(ibv_memcpy_from_dm(out, dm, 8, sizeof(out)) == 0 && !memcmp(in, out, sizeof(in)),
	      "memcpy_from_dm reads back what was written");
	CHECK(ibv_memcpy_to_dm(dm, 2, in, 8) == EINVAL, "unaligned offset -> EINVAL");
	CHECK(ibv_memcpy_to_dm(dm, 4, in, 6) == EINVAL, "unaligned length -> EINVAL");
	CHECK(ibv_memcpy_from_dm(out, dm, max / 2, 4) == EINVAL, "offset past the end -> EINVAL");
	CHECK(ibv_memcpy_from_dm(out, dm, max / 2 - 4, 8) == EINVAL, "length past the end -> EINVAL");

	/* registration */
	errno = 0;
	mr = ibv_reg_dm_mr(pd, dm, 0, 64, IBV_ACCESS_LOCAL_WRITE);
	CHECK(!mr && errno == EINVAL, "reg_dm_mr without ZERO_BASED -> EINVAL (%d)", errno);
	errno = 0;
	mr = ibv_reg_dm_mr(pd, dm, 0, max / 2 + 4, DM_ACC);
	CHECK(!mr && errno == EINVAL, "reg_dm_mr past the DM -> EINVAL (%d)", errno);
	errno = 0;
	mr = ibv_reg_dm_mr(pd, dm, 0, 64, DM_ACC | IBV_ACCESS_ON_DEMAND);
	CHECK(!mr && errno == EINVAL, "reg_dm_mr with ON_DEMAND -> EINVAL (%d)", errno);
	mr = ibv_reg_dm_mr(pd, dm, 4, 0, DM_ACC);
	CHECK(mr != NULL, "a zero-length DM MR is accepted (as mlx5)");
	if (mr)
		ibv_dereg_mr(mr);
	mr = ibv_reg_dm_mr(pd, dm, 64, 128, DM_ACC);
	CHECK(mr && mr->addr == (void *)64 && mr->length == 128,
	      "reg_dm_mr at offset 64: addr is the offset, length 128");
	CHECK(ibv_free_dm(dm) == EBUSY, "free_dm while an MR uses it -> EBUSY");
	CHECK(mr && ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, in, sizeof(in), 0) ==
			    IBV_REREG_MR_ERR_INPUT, "rereg of a DM MR onto host memory refused");
	CHECK(mr && ibv_dereg_mr(mr) == 0, "dereg the DM MR");
	CHECK(ibv_free_dm(dm) == 0, "free_dm once no MR uses it");
	printf("DM API: budget %llu bytes, copies and registration checked\n",
	       (unsigned long long)max);
}

struct dm_end {
	struct ibv_dm *dm;
	struct ibv_mr *mr;
};

static int dm_end_open(struct t_end *e, struct dm_end *d)
{
	uint8_t zero[DM_LEN] = { 0 };
	int err;

	d->dm = dm_alloc(e->ctx, DM_LEN, 0, &err);
	d->mr = d->dm ? ibv_reg_dm_mr(e->pd, d->dm, 0, DM_LEN, DM_ACC) : NULL;
	return d->mr && !ibv_memcpy_to_dm(d->dm, 0, zero, DM_LEN) ? 0 : -1;
}

static int post_dm(struct t_end *e, enum ibv_wr_opcode op, struct ibv_sge *sge,
		   uint64_t raddr, uint32_t rkey, uint64_t cmp, uint64_t swap)
{
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED };

	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.compare_add = cmp;
		wr.wr.atomic.swap = swap;
	}
	return t_post_remote(e->qp, &wr, raddr, rkey);
}

static enum ibv_wc_status done(struct t_end *e)
{
	struct ibv_wc wc;

	return t_wait(e->cq, &wc) ? IBV_WC_GENERAL_ERR : wc.status;
}

/* a's host buffer and DM against b's DM. */
static void traffic(struct t_end *a, struct dm_end *da, struct t_end *b, struct dm_end *db)
{
	uint8_t got[DM_LEN];
	uint64_t v;
	struct ibv_sge host = { .addr = (uintptr_t)a->buf, .length = 64, .lkey = a->mr->lkey };
	struct ibv_sge dsge = { .addr = 0, .length = 64, .lkey = da->mr->lkey };
	struct ibv_sge rsge = { .addr = 32, .length = 96, .lkey = db->mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 9, .sg_list = &rsge, .num_sge = 1 }, *rbad;

	/* SEND from a's DM into a receive buffer in b's DM */
	fill(got, 64, 1);
	CHECK(!ibv_memcpy_to_dm(da->dm, 0, got, 64), "stage in a's DM");
	CHECK(!ibv_post_recv(b->qp, &rwr, &rbad), "post_recv into DM");
	CHECK(!post_dm(a, IBV_WR_SEND, &dsge, 0, 0, 0, 0) && done(a) == IBV_WC_SUCCESS &&
	      done(b) == IBV_WC_SUCCESS, "SEND from DM into DM");
	CHECK(!ibv_memcpy_from_dm(got + 64, db->dm, 32, 64) && !memcmp(got, got + 64, 64),
	      "the SEND's bytes in b's DM at the receive offset");

	/* WRITE host -> b's DM at 128, READ it back into a's DM at 64 */
	fill(a->buf, 64, 2);
	CHECK(!post_dm(a, IBV_WR_RDMA_WRITE, &host, 128, db->mr->rkey, 0, 0) &&
	      done(a) == IBV_WC_SUCCESS, "WRITE into DM");
	CHECK(!ibv_memcpy_from_dm(got, db->dm, 128, 64) && !memcmp(got, a->buf, 64),
	      "WRITE landed in b's DM at zero-based offset 128");
	dsge.addr = 64;
	CHECK(!post_dm(a, IBV_WR_RDMA_READ, &dsge, 128, db->mr->rkey, 0, 0) &&
	      done(a) == IBV_WC_SUCCESS, "READ from DM into DM");
	CHECK(!ibv_memcpy_from_dm(got, da->dm, 64, 64) && !memcmp(got, a->buf, 64),
	      "READ brought the same bytes into a's DM");

	/* atomics on b's DM at 200 (8-aligned), results into a's DM */
	v = 40;
	CHECK(!ibv_memcpy_to_dm(db->dm, 200, &v, 8), "seed");
	dsge.addr = 0;
	dsge.length = 8;
	CHECK(!post_dm(a, IBV_WR_ATOMIC_FETCH_AND_ADD, &dsge, 200, db->mr->rkey, 2, 0) &&
	      done(a) == IBV_WC_SUCCESS, "FETCH_AND_ADD on DM");
	CHECK(!ibv_memcpy_from_dm(&v, da->dm, 0, 8) && v == 40, "fetched 40 (%llu)",
	      (unsigned long long)v);
	CHECK(!post_dm(a, IBV_WR_ATOMIC_CMP_AND_SWP, &dsge, 200, db->mr->rkey, 42, 7) &&
	      done(a) == IBV_WC_SUCCESS, "CMP_AND_SWP on DM");
	CHECK(!ibv_memcpy_from_dm(&v, db->dm, 200, 8) && v == 7, "swapped to 7 (%llu)",
	      (unsigned long long)v);
	printf("DM traffic: SEND DM->DM, WRITE, READ, FETCH_AND_ADD, CMP_AND_SWP ok\n");

	/* past the DM MR: a remote access error, b's DM untouched */
	host.length = 16;
	CHECK(!post_dm(a, IBV_WR_RDMA_WRITE, &host, DM_LEN - 8, db->mr->rkey, 0, 0) &&
	      done(a) == IBV_WC_REM_ACCESS_ERR, "WRITE past the DM MR -> REM_ACCESS_ERR");
	printf("DM traffic: a WRITE past the MR ends in REM_ACCESS_ERR\n");
}

int main(void)
{
	struct t_end a, b;
	struct dm_end da, db;
	struct ibv_device_attr_ex ax;
	struct t_log log;
	unsigned long long w, r, at;
	bool udp = getenv("SOFTRNIC_TRANSPORT") && !strcmp(getenv("SOFTRNIC_TRANSPORT"), "udp");
	FILE *f;

	if (t_log_begin(&log))
		return 1;
	t_pair(&a, &b, 14, 7, 7);
	CHECK(!ibv_query_device_ex(a.ctx, NULL, &ax) && ax.max_dm_size >= 4096,
	      "max_dm_size reported");
	api(a.ctx, a.pd, ax.max_dm_size);
	CHECK(!dm_end_open(&a, &da) && !dm_end_open(&b, &db), "a DM MR on each end");
	if (!failures)
		traffic(&a, &da, &b, &db);
	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	a.qp = b.qp = NULL;
	CHECK(!ibv_dereg_mr(da.mr) && !ibv_dereg_mr(db.mr) && !ibv_free_dm(da.dm) &&
	      !ibv_free_dm(db.dm), "teardown");
	t_end_fini(&a);
	t_end_fini(&b);
	f = t_log_end(&log);
	w = f ? t_counter_sum(f, "direct_write") : 0;
	r = f ? t_counter_sum(f, "direct_read") : 0;
	at = f ? t_counter_sum(f, "direct_atomic") : 0;
	if (f)
		t_echo_failures(f);
	printf("direct_write %llu, direct_read %llu, direct_atomic %llu\n", w, r, at);
	if (udp)
		CHECK(w + r + at == 0, "nothing direct under SOFTRNIC_TRANSPORT=udp");
	else
		CHECK(w >= 1 && r >= 1 && at >= 2,
		      "the peer reached the DM directly (WRITE, READ, both atomics)");
	printf(failures ? "FAIL (%d)\n" : "PASS\n", failures);
	return failures ? 1 : 0;
}
