/* verbs/shared_rings: where CQ and RQ rings live (see shared_rings.h). */
#include "verbs/shared_rings.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "verbs/mr_dir.h"
#include "verbs/mr_share.h"
#include "verbs/pd_buf.h"

static size_t page_round(size_t bytes)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (bytes + pg - 1) & ~(pg - 1);
}

void *srn_rings_alloc(struct srn_context *ctx, size_t bytes, struct srn_mr_share **share)
{
	void *b;

	*share = NULL;
	/* whole pages of private anonymous memory: what mr_share can
	 * re-back, and zeroed */
	b = mmap(NULL, page_round(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (b == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	/* Unshared rings work as well, for this process only. */
	if (ctx && srn_mrdir_active(ctx))
		*share = srn_mr_share_get(b, page_round(bytes)); /* every page */
	return b;
}

void srn_rings_free(void *block, size_t bytes, struct srn_mr_share *share)
{
	if (!block)
		return;
	srn_mr_share_put(share);
	munmap(block, page_round(bytes));
}

void *srn_rings_alloc_pd(struct srn_context *ctx, struct ibv_pd *pd, uint64_t code,
			 size_t bytes, struct srn_mr_share **share, struct srn_pd_buf *rec)
{
	rec->p = NULL;
	/* a ring peers map must be memfd-backed: never the allocator's */
	if (!(ctx && srn_mrdir_active(ctx))) {
		void *b = srn_pd_buf_alloc(pd, code, bytes, (size_t)sysconf(_SC_PAGESIZE), rec);

		*share = NULL;
		if (b != IBV_ALLOCATOR_USE_DEFAULT)
			return b;
	}
	return srn_rings_alloc(ctx, bytes, share);
}

void srn_rings_free_pd(struct srn_pd_buf *rec, void *block, size_t bytes,
		       struct srn_mr_share *share)
{
	if (!srn_pd_buf_free(rec, block))
		srn_rings_free(block, bytes, share);
}

uint32_t srn_ring_tag(void)
{
	static _Atomic uint32_t tags;
	uint32_t t;

	while (!(t = atomic_fetch_add(&tags, 1) + 1))
		; /* (0 means none) */
	return t;
}
