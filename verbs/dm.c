/* Device memory (ibv_alloc_dm, ibv_memcpy_to/from_dm, ibv_reg_dm_mr).  A
 * software NIC has no memory of its own, so "device memory" is a block of
 * the shareable pages rings and MRs live in (verbs/shared_rings.c): a DM
 * MR is then an ordinary zero-based MR over it, reached by same-host peers
 * through the memfd and by the engine directly.  What keeps it a device
 * resource: a small budget per context (max_dm_size), copies in 4-byte
 * units as NICs require, and no freeing while an MR uses it. */
#include "verbs/datapath.h"
#include "verbs/shared_rings.h"

#include <stdlib.h>
#include <string.h>

#define DM_UNIT 4u               /* offsets and lengths of copies */
#define DM_MAX_LOG_ALIGN 12      /* blocks are page-aligned */

/* What a DM MR may ask for (no ODP: the memory is always present). */
#define DM_MR_ACCESS                                                    \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED)

static struct srn_dm *dm_of(struct ibv_dm *d)
{
	return srn_container_of(d, struct srn_dm, ibv);
}

/* 0 or EINVAL: [off, off + len) in units inside dm. */
static int dm_range(const struct srn_dm *dm, uint64_t off, size_t len)
{
	if ((off | len) & (DM_UNIT - 1))
		return EINVAL;
	if (off > dm->length || len > dm->length - off)
		return EINVAL;
	return 0;
}

static int dm_copy_to(struct ibv_dm *d, uint64_t off, const void *src, size_t len)
{
	struct srn_dm *dm = dm_of(d);
	int err = dm_range(dm, off, len);

	if (!err && len)
		memcpy(dm->base + off, src, len);
	return err;
}

static int dm_copy_from(void *dst, struct ibv_dm *d, uint64_t off, size_t len)
{
	struct srn_dm *dm = dm_of(d);
	int err = dm_range(dm, off, len);

	if (!err && len)
		memcpy(dst, dm->base + off, len);
	return err;
}

/* vctx->alloc_dm: EINVAL for a zero length, a comp_mask or an alignment
 * we do not know; ENOMEM past the context's max_dm_size. */
static struct ibv_dm *srn_alloc_dm(struct ibv_context *context, struct ibv_alloc_dm_attr *attr)
{
	struct srn_context *ctx = srn_ctx(context);
	struct srn_dm *dm;
	uint64_t used;

	if (!attr || attr->comp_mask || attr->length == 0 ||
	    attr->log_align_req > DM_MAX_LOG_ALIGN) {
		errno = EINVAL;
		return NULL;
	}
	used = atomic_fetch_add(&ctx->dm_bytes, attr->length);
	if (attr->length > SRN_MAX_DM_SIZE || used > SRN_MAX_DM_SIZE - attr->length) {
		atomic_fetch_sub(&ctx->dm_bytes, attr->length);
		errno = ENOMEM;
		return NULL;
	}
	dm = calloc(1, sizeof(*dm));
	if (dm)
		dm->base = srn_rings_alloc(ctx, attr->length, &dm->share);
	if (!dm || !dm->base) {
		free(dm);
		atomic_fetch_sub(&ctx->dm_bytes, attr->length);
		errno = ENOMEM;
		return NULL;
	}
	dm->length = attr->length;
	atomic_init(&dm->mrs, 0);
	dm->ibv.context = context;
	dm->ibv.memcpy_to_dm = dm_copy_to;
	dm->ibv.memcpy_from_dm = dm_copy_from;
	dm->ibv.comp_mask = 0;
	atomic_fetch_add(&ctx->num_objects, 1);
	return &dm->ibv;
}

/* vctx->free_dm: EBUSY while an MR is registered on it. */
static int srn_free_dm(struct ibv_dm *d)
{
	struct srn_dm *dm;
	struct srn_context *ctx;

	if (!d)
		return EINVAL;
	dm = dm_of(d);
	if (atomic_load(&dm->mrs))
		return EBUSY;
	ctx = srn_ctx(d->context);
	srn_rings_free(dm->base, dm->length, dm->share);
	atomic_fetch_sub(&ctx->dm_bytes, dm->length);
	atomic_fetch_sub(&ctx->num_objects, 1);
	free(dm);
	return 0;
}

/* vctx->reg_dm_mr: a zero-based MR over [off, off + len) of dm (len 0
 * too, as mlx5: an MR every access of a byte or more is out of).  EINVAL
 * without IBV_ACCESS_ZERO_BASED, for other flags, a range outside dm or
 * a PD of another context. */
static struct ibv_mr *srn_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *d, uint64_t off,
				    size_t len, unsigned int access)
{
	struct srn_dm *dm;
	struct ibv_mr *mr;

	if (!pd || !d || pd->context != d->context || !(access & IBV_ACCESS_ZERO_BASED) ||
	    (access & ~(unsigned int)DM_MR_ACCESS)) {
		errno = EINVAL;
		return NULL;
	}
	dm = dm_of(d);
	if (off > dm->length || len > dm->length - off) {
		errno = EINVAL;
		return NULL;
	}
	atomic_fetch_add(&dm->mrs, 1); /* before it can be used or freed */
	mr = srn_mr_register(pd, dm->base + off, len, 0, access);
	if (!mr) {
		atomic_fetch_sub(&dm->mrs, 1);
		return NULL;
	}
	srn_mr(mr)->dm = dm;
	mr->addr = (void *)(uintptr_t)off; /* as rdma-core reports a DM MR */
	return mr;
}

void srn_ops_init_dm(struct verbs_context *vctx)
{
	vctx->alloc_dm = srn_alloc_dm;
	vctx->free_dm = srn_free_dm;
	vctx->reg_dm_mr = srn_reg_dm_mr;
}
