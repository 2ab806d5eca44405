/* Memory regions.  Registration records (address, length, access, PD) in
 * the context's MR table and pins nothing, so it costs the same for 4 KiB
 * and for 1 TiB.  Like rxe, lkey == rkey.  The transport checks every
 * access with srn_mr_resolve(), the one place that turns a key into a
 * pointer.
 *
 * Keys are what a remote peer presents to reach our memory, so they must
 * not be guessable.  A key's low bits, as many as the table has slots (a
 * power of two from 256 to SRN_MAX_MR), name its slot; every other bit is
 * drawn from the kernel's CSPRNG (verbs/key_random.c): 24 random bits with
 * up to 256 MRs, 22 with 1k, 12 at the 1M limit.  A lookup takes the slot
 * from the key and compares the whole key: O(1).  A full table doubles
 * and each entry whose key has the new index bit set moves to the upper
 * half (keys never change); the MR directory follows (mr_dir.c).
 *
 * A new key is never one off (key +- 1) or one bit flip away from a live
 * key, nor the last key of its slot (kept in a tombstone when freed): a
 * stale or slightly wrong key never reaches another MR. */
#include "verbs/datapath.h"
#include "verbs/export.h"
#include "verbs/key_random.h"
#include "verbs/mr_dir.h"
#include "verbs/mr_share.h"
#include "verbs/mw.h"

#include <stdlib.h>

/* v44's header turns these names into inline selectors; we define the
 * symbols themselves (abi/libibverbs.map). */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define MR_MIN_SLOTS 256u
#define MR_MAX_SLOTS ((uint32_t)SRN_MAX_MR)
_Static_assert((SRN_MAX_MR & (SRN_MAX_MR - 1)) == 0, "slots: a power of two");

/* Flags we act on.  The rest of the optional range (RELAXED_ORDERING and
 * friends) are performance hints: rdma-core silently drops them when the
 * device does not support them, and so do we.  HUGETLB and MW_BIND are
 * accepted as rxe does (MW_BIND lets windows be bound: verbs/mw.c).
 * ON_DEMAND is kept: such an MR is faulted in at each access and never
 * re-backed for peers (verbs/mr_odp.c). */
#define MR_ACCESS_KNOWN                                                  \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |               \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |              \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_HUGETLB | \
	 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_OPTIONAL_RANGE)
#define MR_ACCESS_KEPT                                                   \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |               \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |              \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND)

static bool slot_is_free(const struct srn_mr *m)
{
	return !m || ((uintptr_t)m & 1);
}

/* Tombstone: odd "pointer" carrying the slot's last key. */
static struct srn_mr *tombstone(uint32_t key)
{
	return (struct srn_mr *)(((uintptr_t)key << 1) | 1);
}

static uint32_t tombstone_key(const struct srn_mr *m)
{
	return (uint32_t)((uintptr_t)m >> 1);
}

/* The slot key maps to (ctx->lock held; the table is not empty). */
static uint32_t key_slot(const struct srn_context *ctx, uint32_t key)
{
	return key & (ctx->mrs_cap - 1);
}

/* The live MR whose key is key, or NULL (ctx->lock held). */
static struct srn_mr *mr_of_key(const struct srn_context *ctx, uint32_t key)
{
	struct srn_mr *m = ctx->mrs_cap ? ctx->mrs[key_slot(ctx, key)] : NULL;

	return !slot_is_free(m) && m->ibv.lkey == key ? m : NULL;
}

/* True if key +- 1 or key with one bit flipped is a live key. */
static bool near_live_key(const struct srn_context *ctx, uint32_t key)
{
	if (mr_of_key(ctx, key + 1) || mr_of_key(ctx, key - 1))
		return true;
	for (int b = 0; b < 32; b++)
		if (mr_of_key(ctx, key ^ (1u << b)))
			return true;
	return false;
}

/* A fresh key for free slot idx (ctx->lock held): random where the slot
 * bits are not; 0 if the kernel gives no random bits. */
static uint32_t new_key(struct srn_context *ctx, uint32_t idx)
{
	uint32_t mask = ctx->mrs_cap - 1, last = ctx->mrs[idx] ? tombstone_key(ctx->mrs[idx]) : 0;
	uint32_t r, key;

	/* a rejected draw is rare (a neighbour of one of up to 2^20 keys
	 * among 2^32): 64 tries never run out in practice */
	for (int tries = 0; tries < 64; tries++) {
		if (!srn_key_random32(&r))
			return 0;
		/* bit 31 clear: set marks a memory window's key (verbs/mw.h) */
		key = (r & ~mask & ~SRN_MW_KEY_BIT) | idx;
		if (key != 0 && key != last && !near_live_key(ctx, key))
			return key;
	}
	return 0;
}

/* 0, or EINVAL / EOPNOTSUPP for an access combination we refuse. */
static int check_access(unsigned int access)
{
	if (access & ~(unsigned int)MR_ACCESS_KNOWN)
		return EINVAL;
	/* IBTA 10.6.3.1 / ibv_reg_mr(3): remote write or atomic access
	 * needs local write access. */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	return 0;
}

/* 0 or EINVAL: a range the kernel would accept (rxe pins pages, and a
 * zero-length region has no page, so length 0 is EINVAL there too). */
static int check_range(const void *addr, size_t length, uint64_t iova,
		       unsigned int access)
{
	uintptr_t a = (uintptr_t)addr;

	if (length == 0 || length > SRN_MAX_MR_SIZE)
		return EINVAL;
	if (a + length < a || iova + length < iova)
		return EINVAL;
	/* ib_uverbs_reg_mr: address and iova share the page offset. */
	if (!(access & IBV_ACCESS_ZERO_BASED) && ((a ^ iova) & 4095))
		return EINVAL;
	return 0;
}

/* Doubles the table (ctx->lock held): an entry (or tombstone) whose key
 * has the new index bit set moves to the new upper half.  false if full. */
static bool mr_table_grow(struct srn_context *ctx)
{
	uint32_t old = ctx->mrs_cap, cap = old ? old * 2 : MR_MIN_SLOTS;
	struct srn_mr **t;

	if (cap > MR_MAX_SLOTS)
		return false;
	t = realloc(ctx->mrs, cap * sizeof(*t));
	if (!t)
		return false;
	for (uint32_t i = old; i < cap; i++)
		t[i] = NULL;
	for (uint32_t i = 0; i < old; i++) {
		struct srn_mr *m = t[i];

		if (m && ((slot_is_free(m) ? tombstone_key(m) : m->ibv.lkey) & old)) {
			t[i + old] = m;
			t[i] = NULL;
		}
	}
	ctx->mrs = t;
	ctx->mrs_cap = cap;
	ctx->mrs_hint = 0;           /* entries moved up: slots below freed */
	srn_mrdir_resize(ctx, cap - 1);
	return true;
}

/* A free slot index (growing the table); ctx->lock held.  UINT32_MAX if
 * full.  The scan starts at mrs_hint, below which every slot is taken, so
 * n registrations in a row cost O(n), not O(n^2) (100k MRs: seconds). */
static uint32_t mr_slot_alloc(struct srn_context *ctx)
{
	do
		for (uint32_t i = ctx->mrs_hint; i < ctx->mrs_cap; i++)
			if (slot_is_free(ctx->mrs[i])) {
				ctx->mrs_hint = i + 1;
				return i;
			}
	while (mr_table_grow(ctx));
	return UINT32_MAX;
}

/* ibv_reg_mr(pd, NULL, SIZE_MAX, ...|ON_DEMAND): an implicit ODP MR, the
 * whole address space (verbs/mr_odp.c faults each access in). */
static bool mr_implicit(const void *addr, uint64_t length, unsigned int access)
{
	return !addr && length == SIZE_MAX && (access & IBV_ACCESS_ON_DEMAND);
}

/* Same-host peers may map an MR's pages (verbs/mr_share.c) unless it is
 * ODP: those they reach through the page tables.  NULL = they can't. */
static struct srn_mr_share *mr_share_for(struct srn_context *ctx, void *addr, uint64_t length,
					 unsigned int access)
{
	if ((access & IBV_ACCESS_ON_DEMAND) || !length || !srn_mrdir_active(ctx))
		return NULL;
	return srn_mr_share_get(addr, length);
}

/* Registers [addr, addr+length) so that peers see it at iova.  NULL +
 * errno on failure. */
SRN_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *ibpd, void *addr,
					   size_t length, uint64_t iova,
					   unsigned int access)
{
	int err;

	if (!ibpd) {
		errno = EINVAL;
		return NULL;
	}
	err = check_access(access);
	if (!err && mr_implicit(addr, length, access))
		err = iova ? EINVAL : 0;
	else if (!err)
		err = check_range(addr, length, iova, access);
	if (err) {
		errno = err;
		return NULL;
	}
	return srn_mr_register(ibpd, addr, length, iova, access);
}

struct ibv_mr *srn_mr_register(struct ibv_pd *ibpd, void *addr, uint64_t length, uint64_t iova,
			       unsigned int access)
{
	struct srn_context *ctx;
	struct srn_mr *mr;
	uint32_t idx, key;

	ctx = srn_ctx(ibpd->context);
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	mr->pd = srn_pd(ibpd);
	/* ZERO_BASED: peers address the region by offset from 0. */
	mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
	mr->vaddr = (uintptr_t)addr;
	mr->length = length;
	mr->access = access & MR_ACCESS_KEPT;
	mr->share = mr_share_for(ctx, addr, length, access);

	pthread_mutex_lock(&ctx->lock);
	idx = ctx->mrs_live < ctx->max_mr ? mr_slot_alloc(ctx) : UINT32_MAX;
	key = idx == UINT32_MAX ? 0 : new_key(ctx, idx);
	if (!key) {
		if (idx < ctx->mrs_hint)
			ctx->mrs_hint = idx;
		pthread_mutex_unlock(&ctx->lock);
		srn_mr_share_put(mr->share);
		free(mr);
		errno = ENOMEM;
		return NULL;
	}
	mr->ibv.context = ibpd->context;
	mr->ibv.pd = ibpd;
	mr->ibv.addr = addr;
	mr->ibv.length = length;
	mr->ibv.handle = key; /* unique while it lives; its slot may move */
	mr->ibv.lkey = key;
	mr->ibv.rkey = key;
	ctx->mrs[idx] = mr;
	ctx->mrs_live++;
	pthread_mutex_unlock(&ctx->lock);
	srn_mrdir_publish(ctx, mr);

	atomic_fetch_add(&mr->pd->users, 1);
	atomic_fetch_add(&ctx->num_objects, 1);
	return &mr->ibv;
}

SRN_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				     size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr,
				(unsigned int)access);
}

SRN_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
					  size_t length, uint64_t iova,
					  int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

/* Changes translation, PD and/or access of mr in place; the keys stay.
 * 0, or IBV_REREG_MR_ERR_INPUT with errno (mr unchanged and still valid:
 * everything is checked before anything changes). */
SRN_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd,
			    void *addr, size_t length, int access)
{
	const int known = IBV_REREG_MR_CHANGE_TRANSLATION |
			  IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
	struct srn_context *ctx;
	struct srn_mr *mr;
	struct srn_mr_share *old_share = NULL, *new_share = NULL;
	unsigned int acc;
	bool reshare;
	int err = 0;

	if (!ibmr || flags == 0 || (flags & ~known)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	/* ibv_rereg_mr(3): addr/length only with CHANGE_TRANSLATION. */
	if (!(flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (addr || length)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if ((flags & IBV_REREG_MR_CHANGE_PD) &&
	    (!pd || pd->context != ibmr->context)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	mr = srn_mr(ibmr);
	/* a DM MR stays on its device memory */
	if (mr->dm && (flags & IBV_REREG_MR_CHANGE_TRANSLATION)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	ctx = srn_ctx(ibmr->context);
	acc = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? (unsigned int)access
						    : mr->access;
	err = check_access(acc);
	if (!err && (flags & IBV_REREG_MR_CHANGE_TRANSLATION)) {
		if (!mr_implicit(addr, length, acc))
			err = check_range(addr, length, (uintptr_t)addr, acc);
	} else if (!err && mr_implicit(mr->ibv.addr, mr->length, mr->access) &&
		   !(acc & IBV_ACCESS_ON_DEMAND)) {
		err = EINVAL; /* the whole address space needs ODP */
	}
	if (err) {
		errno = err;
		return IBV_REREG_MR_ERR_INPUT;
	}

	/* a new backing for new pages, or when ODP comes or goes */
	reshare = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ||
		  ((acc ^ mr->access) & IBV_ACCESS_ON_DEMAND);
	if (reshare)
		new_share = (flags & IBV_REREG_MR_CHANGE_TRANSLATION)
				    ? mr_share_for(ctx, addr, length, acc)
				    : mr_share_for(ctx, (void *)mr->vaddr, mr->length, acc);
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		atomic_fetch_add(&srn_pd(pd)->users, 1);
		atomic_fetch_sub(&mr->pd->users, 1);
	}
	/* Under the table lock so srn_mr_resolve sees old or new, whole. */
	pthread_mutex_lock(&ctx->lock);
	atomic_fetch_add(&ctx->mr_gen, 1);
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		mr->pd = srn_pd(pd);
		mr->ibv.pd = pd;
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->vaddr = (uintptr_t)addr;
		mr->length = length;
		mr->iova = (acc & IBV_ACCESS_ZERO_BASED) ? 0 : (uintptr_t)addr;
		mr->ibv.addr = addr;
		mr->ibv.length = length;
	} else if ((acc ^ mr->access) & IBV_ACCESS_ZERO_BASED) {
		mr->iova = (acc & IBV_ACCESS_ZERO_BASED) ? 0 : mr->vaddr;
	}
	if (reshare) {
		old_share = mr->share;
		mr->share = new_share;
	}
	mr->access = acc & MR_ACCESS_KEPT;
	pthread_mutex_unlock(&ctx->lock);
	srn_mrdir_publish(ctx, mr);
	srn_mr_share_put(old_share);
	return 0;
}

/* Unregisters mr: its keys stop resolving at once. */
SRN_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct srn_context *ctx;
	struct srn_mr *mr;
	uint32_t idx;

	if (!ibmr)
		return EINVAL;
	mr = srn_mr(ibmr);
	ctx = srn_ctx(ibmr->context);
	pthread_mutex_lock(&ctx->lock);
	if (mr_of_key(ctx, ibmr->lkey) != mr) {
		pthread_mutex_unlock(&ctx->lock);
		return EINVAL;
	}
	/* Peers stop finding it before the key stops resolving. */
	srn_mrdir_retract(ctx, mr);
	idx = key_slot(ctx, ibmr->lkey);
	ctx->mrs[idx] = tombstone(ibmr->lkey);
	if (idx < ctx->mrs_hint)
		ctx->mrs_hint = idx;
	ctx->mrs_live--;
	atomic_fetch_add(&ctx->mr_gen, 1);
	pthread_mutex_unlock(&ctx->lock);
	atomic_fetch_sub(&mr->pd->users, 1);
	atomic_fetch_sub(&ctx->num_objects, 1);
	srn_mr_share_put(mr->share);
	if (mr->dm)
		atomic_fetch_sub(&mr->dm->mrs, 1);
	free(mr);
	return 0;
}

enum srn_mr_check srn_mr_lookup(struct srn_context *ctx, struct srn_pd *pd, uint32_t key,
				bool remote, uint64_t iova, uint64_t len, unsigned int access,
				void **out, bool *odp)
{
	enum srn_mr_check r = SRN_MR_OK;
	struct srn_mr *mr;
	uint64_t off;

	*out = NULL;
	*odp = false;
	/* IBTA 9.4.1.1 / 9.7.4.1.3: a zero-length access touches no memory
	 * and needs no valid key. */
	if (len == 0)
		return SRN_MR_OK;
	pthread_mutex_lock(&ctx->lock);
	mr = ctx->mrs_cap ? ctx->mrs[key_slot(ctx, key)] : NULL;
	if (slot_is_free(mr) ||
	    (remote ? mr->ibv.rkey : mr->ibv.lkey) != key) {
		r = SRN_MR_BAD_KEY;
	} else if (!srn_pd_same(mr->pd, pd)) {
		r = SRN_MR_PD_MISMATCH;
	} else if (access & ~mr->access) {
		r = SRN_MR_NO_ACCESS;
	} else if (iova < mr->iova || len > mr->length ||
		   (off = iova - mr->iova) > mr->length - len) {
		/* overflow-safe: no iova + len is ever computed */
		r = SRN_MR_OUT_OF_BOUNDS;
	} else {
		*out = (void *)(mr->vaddr + (uintptr_t)off);
		*odp = mr->access & IBV_ACCESS_ON_DEMAND;
	}
	pthread_mutex_unlock(&ctx->lock);
	return r;
}

enum srn_mr_check srn_mr_resolve(struct srn_context *ctx, struct srn_pd *pd,
				 uint32_t key, bool remote, uint64_t iova,
				 uint64_t len, unsigned int access, void **out)
{
	const unsigned int writes = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_ATOMIC;
	bool odp;
	enum srn_mr_check r = srn_mr_lookup(ctx, pd, key, remote, iova, len, access, out, &odp);

	/* ODP: the page fault a NIC would take, outside the table lock */
	if (r == SRN_MR_OK && odp && !srn_odp_fault_in((uintptr_t)*out, len, access & writes)) {
		*out = NULL;
		r = SRN_MR_OUT_OF_BOUNDS;
	}
	return r;
}
