/* PD and MR, black-box through our libibverbs: access-flag rules
 * (remote write/atomic need local write, unknown flags, ON_DEMAND accepted),
 * length/iova rules, lkey == rkey, keys unique with random key bits that
 * differ between contexts, rereg (translation, PD, access, bad input leaves
 * the MR intact), dereg, EBUSY on a PD in use, and registration cost that
 * does not grow with size (nothing is pinned). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

/* Access flags passed through a variable so the header's inline selector
 * takes the ibv_reg_mr_iova2 path too. */
static volatile unsigned int opt_flag = IBV_ACCESS_RELAXED_ORDERING;

static struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t len, int access, int *err)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr(pd, addr, len, access);
	*err = mr ? 0 : errno;
	return mr;
}

int main(void)
{
	struct ibv_context *ctx, *ctx2;
	struct ibv_pd *pd, *pd2, *pdx;
	struct ibv_mr *mr, *mrs[64], *mx;
	static char buf[1 << 16] __attribute__((aligned(4096)));
	static char buf2[8192] __attribute__((aligned(4096)));
	uint8_t bits1[8], bits2[8];
	int err, i, j, dup, same_bits;
	double t0, t_small, t_big;
	void *huge;

	ctx = t_lo_open();
	pd = ibv_alloc_pd(ctx);
	pd2 = ibv_alloc_pd(ctx);
	T_OK(pd && pd2 && pd != pd2, "two PDs");
	if (!pd || !pd2)
		return 1;
	T_OK(pd->context == ctx && pd->handle != pd2->handle, "PD context and distinct handles");

	/* access rules */
	mr = reg(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE, &err);
	T_OK(mr != NULL, "reg_mr LOCAL_WRITE");
	T_OK(mr && mr->lkey == mr->rkey, "lkey == rkey (as rxe)");
	T_OK(mr && mr->addr == buf && mr->length == sizeof(buf) && mr->pd == pd &&
	     mr->context == ctx, "MR reports addr, length, pd, context");
	T_OK(mr && ibv_dereg_mr(mr) == 0, "dereg_mr");
	mr = reg(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE, &err);
	T_OK(!mr && err == EINVAL, "REMOTE_WRITE without LOCAL_WRITE -> EINVAL (%d)", err);
	mr = reg(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_ATOMIC, &err);
	T_OK(!mr && err == EINVAL, "REMOTE_ATOMIC without LOCAL_WRITE -> EINVAL (%d)", err);
	mr = reg(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_READ, &err);
	T_OK(mr != NULL, "REMOTE_READ alone is fine");
	if (mr)
		ibv_dereg_mr(mr);
	mr = reg(pd, buf, sizeof(buf), 1 << 14, &err);
	T_OK(!mr && err == EINVAL, "unknown access bit -> EINVAL (%d)", err);
	mr = reg(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND, &err);
	T_OK(mr != NULL, "ON_DEMAND is accepted (test_odp covers it) (%d)", err);
	if (mr)
		ibv_dereg_mr(mr);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | opt_flag);
	T_OK(mr != NULL, "all remote rights + RELAXED_ORDERING (optional hint) via reg_mr_iova2");
	if (mr)
		ibv_dereg_mr(mr);
	mr = reg(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE, &err);
	T_OK(!mr && err == EINVAL, "length 0 -> EINVAL, as rxe (%d)", err);
	mr = reg(pd, (void *)(uintptr_t)(UINTPTR_MAX - 100), 4096, IBV_ACCESS_LOCAL_WRITE, &err);
	T_OK(!mr && err == EINVAL, "address range wraps -> EINVAL (%d)", err);

	/* iova */
	mr = ibv_reg_mr_iova(pd, buf, 8192, 0x7000000000ull, IBV_ACCESS_LOCAL_WRITE);
	T_OK(mr != NULL, "reg_mr_iova with the same page offset");
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr_iova(pd, buf, 8192, 0x7000000010ull, IBV_ACCESS_LOCAL_WRITE);
	T_OK(!mr && errno == EINVAL, "reg_mr_iova with another page offset -> EINVAL");
	mr = ibv_reg_mr_iova2(pd, buf + 16, 100, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED);
	T_OK(mr != NULL, "ZERO_BASED region");
	if (mr)
		ibv_dereg_mr(mr);

	/* keys */
	for (i = 0; i < 64; i++)
		mrs[i] = ibv_reg_mr(pd, buf + i, 64, IBV_ACCESS_LOCAL_WRITE);
	dup = 0;
	same_bits = 0;
	for (i = 0; i < 64; i++) {
		if (!mrs[i]) {
			dup++;
			continue;
		}
		for (j = 0; j < i; j++)
			if (mrs[j] && mrs[j]->lkey == mrs[i]->lkey)
				dup++;
		/* the random bits: all but the slot's (8 while the table has
		 * 256 slots, verbs/mr.c) */
		if (i && mrs[i - 1] && (mrs[i]->lkey >> 8) == (mrs[i - 1]->lkey >> 8))
			same_bits++;
	}
	T_OK(dup == 0, "64 MRs, 64 distinct keys");
	T_OK(same_bits < 8, "key bits vary between MRs (%d repeats of 63)", same_bits);
	for (i = 0; i < 8; i++)
		bits1[i] = mrs[i] ? (uint8_t)(mrs[i]->lkey >> 24) : 0;
	/* Reuse of a slot gets new key bits: a stale key never works again. */
	{
		uint32_t old = mrs[5]->lkey;

		ibv_dereg_mr(mrs[5]);
		mrs[5] = ibv_reg_mr(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE);
		T_OK(mrs[5] && mrs[5]->lkey != old, "re-registration never reuses a key (0x%x -> 0x%x)",
		     old, mrs[5] ? mrs[5]->lkey : 0);
	}
	ctx2 = ibv_open_device(t_lo_device());
	pdx = ctx2 ? ibv_alloc_pd(ctx2) : NULL;
	for (i = 0; i < 8; i++) {
		mx = pdx ? ibv_reg_mr(pdx, buf, 64, IBV_ACCESS_LOCAL_WRITE) : NULL;
		bits2[i] = mx ? (uint8_t)(mx->lkey >> 24) : 0;
		if (mx)
			ibv_dereg_mr(mx); /* its slot gets new bits next time */
	}
	if (pdx)
		ibv_dealloc_pd(pdx);
	T_OK(pdx && memcmp(bits1, bits2, 8) != 0,
	     "another context (another run) draws other key bits");
	printf("       key bits ctx1 %02x%02x%02x%02x%02x%02x%02x%02x ctx2 %02x%02x%02x%02x%02x%02x%02x%02x\n",
	       bits1[0], bits1[1], bits1[2], bits1[3], bits1[4], bits1[5], bits1[6], bits1[7],
	       bits2[0], bits2[1], bits2[2], bits2[3], bits2[4], bits2[5], bits2[6], bits2[7]);

	/* PD busy */
	T_OK(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd with MRs -> EBUSY");
	err = 0;
	for (i = 0; i < 64; i++)
		if (mrs[i] && ibv_dereg_mr(mrs[i]) != 0)
			err++;
	T_OK(err == 0, "dereg 64 MRs");

	/* rereg */
	mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	T_OK(mr != NULL, "reg for rereg");
	if (mr) {
		uint32_t key = mr->lkey;

		errno = 0;
		T_OK(ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL,
		     "rereg with no flags -> ERR_INPUT/EINVAL");
		errno = 0;
		T_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				   IBV_ACCESS_REMOTE_WRITE) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL,
		     "rereg to REMOTE_WRITE without LOCAL_WRITE -> ERR_INPUT/EINVAL");
		errno = 0;
		T_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, buf2, 0,
				   IBV_ACCESS_LOCAL_WRITE) == IBV_REREG_MR_ERR_INPUT,
		     "rereg with an address but no CHANGE_TRANSLATION -> ERR_INPUT");
		T_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) == 0,
		     "rereg access");
		T_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf2, sizeof(buf2), 0) == 0 &&
		     mr->addr == buf2 && mr->length == sizeof(buf2),
		     "rereg translation moves addr/length");
		T_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0) == 0 && mr->pd == pd2,
		     "rereg PD");
		T_OK(mr->lkey == key && mr->rkey == key, "keys survive rereg");
		T_OK(ibv_dealloc_pd(pd2) == EBUSY, "new PD now busy");
		T_OK(ibv_dereg_mr(mr) == 0, "dereg after rereg");
	}

	/* cost independent of size: nothing is pinned or touched */
	huge = mmap(NULL, 1ull << 36, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	t0 = t_now();
	for (i = 0; i < 100; i++) {
		mx = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
		if (mx)
			ibv_dereg_mr(mx);
	}
	t_small = (t_now() - t0) * 1e6 / 100;
	t_big = -1;
	if (huge != MAP_FAILED) {
		t0 = t_now();
		for (i = 0; i < 100; i++) {
			mx = ibv_reg_mr(pd, huge, 1ull << 36, IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE);
			if (mx)
				ibv_dereg_mr(mx);
			else
				break;
		}
		t_big = i == 100 ? (t_now() - t0) * 1e6 / 100 : -1;
		munmap(huge, 1ull << 36);
	}
	printf("       reg+dereg: 4 KiB %.2f us, 64 GiB %.2f us\n", t_small, t_big);
	T_OK(t_big >= 0 && t_big < 100 && t_big < 20 * t_small + 20,
	     "registering 64 GiB costs about what 4 KiB does");

	T_OK(ibv_dealloc_pd(pd) == 0, "dealloc_pd after all MRs are gone");
	T_OK(ibv_dealloc_pd(pd2) == 0, "dealloc second PD");
	ibv_close_device(ctx);
	if (ctx2)
		ibv_close_device(ctx2);
	t_lo_free();
	return t_summary();
}
