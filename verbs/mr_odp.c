/* On-demand paging.  softrnic pins nothing, so every MR already reads the
 * process's memory as it is at the moment of each access; what
 * IBV_ACCESS_ON_DEMAND changes here:
 *  - the MR is not re-backed for same-host peers (verbs/mr_share.c): they
 *    reach it with process_vm_*, which follows the page tables, so memory
 *    unmapped and mapped again, or first mapped after an implicit MR was
 *    registered, is the memory they see;
 *  - each access first faults the range in (srn_odp_fault_in): an address
 *    with nothing mapped, or a write into a read-only mapping, fails the
 *    access (a remote access error, a local protection error) instead of
 *    crashing the process, as a NIC's unresolvable page fault would;
 *  - an implicit MR, ibv_reg_mr(pd, NULL, SIZE_MAX, ...|ON_DEMAND), covers
 *    the whole address space (verbs/mr.c).
 * ibv_advise_mr prefetches: it faults the ranges in now. */
#include "verbs/datapath.h"

#include <sys/mman.h>
#include <unistd.h>

bool srn_odp_fault_in(uintptr_t p, uint64_t len, bool write)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), lo = p & ~(pg - 1), hi;

	if (len == 0)
		return true;
	if (p + len < p || p + len > UINTPTR_MAX - pg)
		return false;
	hi = (p + len + pg - 1) & ~(pg - 1);
	/* one system call: present pages cost a page-table walk, missing
	 * ones a fault each; ENOMEM (a hole) or EFAULT (no such right) */
	return madvise((void *)lo, hi - lo, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0;
}

/* vctx->advise_mr.  As ibv_advise_mr(3): EINVAL for flags other than
 * FLUSH or an empty list, EOPNOTSUPP for an advice it does not know,
 * EFAULT for an lkey that is not an ODP MR of pd with the access the
 * advice needs, a range outside it, or pages that cannot be faulted in.
 * PREFETCH_NO_FAULT only checks (it must not fault).  Always synchronous,
 * so FLUSH asks for nothing more. */
static int srn_advise_mr(struct ibv_pd *ibpd, enum ibv_advise_mr_advice advice, uint32_t flags,
			 struct ibv_sge *sg, uint32_t n)
{
	struct srn_context *ctx;
	bool write, fault;

	if (!ibpd || (flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH) || !sg || n == 0)
		return EINVAL;
	switch (advice) {
	case IBV_ADVISE_MR_ADVICE_PREFETCH:
		write = false;
		fault = true;
		break;
	case IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE:
		write = true;
		fault = true;
		break;
	case IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT:
		write = false;
		fault = false;
		break;
	default:
		return EOPNOTSUPP;
	}
	ctx = srn_ctx(ibpd->context);
	for (uint32_t i = 0; i < n; i++) {
		bool odp = false;
		void *p;

		if (!sg[i].length)
			continue;
		if (srn_mr_lookup(ctx, srn_pd(ibpd), sg[i].lkey, false, sg[i].addr, sg[i].length,
				  write ? IBV_ACCESS_LOCAL_WRITE : 0, &p, &odp) != SRN_MR_OK ||
		    !odp)
			return EFAULT;
		if (fault && !srn_odp_fault_in((uintptr_t)p, sg[i].length, write))
			return EFAULT;
	}
	return 0;
}

void srn_ops_init_odp(struct verbs_context *vctx)
{
	vctx->advise_mr = srn_advise_mr;
}
