/* Thread domains and parent domains (ibv_alloc_td(3),
 * ibv_alloc_parent_domain(3)), and the buffers a parent domain's
 * allocator gives (verbs/pd_buf.h).
 *
 * A parent domain is a struct srn_pd with the identity of the PD it was
 * made from (prot, handle): usable wherever that PD is, interchangeably.
 * A thread domain changes no locking: softrnic's engine thread, pollers
 * receiving inline and same-host peers touch a QP or CQ besides the
 * application's threads, so its locks are not the application's to give
 * up (docs/verbs-extended.md). */
#include "verbs/datapath.h"
#include "verbs/pd_buf.h"

#include <stdlib.h>
#include <string.h>

static struct srn_td *td_of(struct ibv_td *t)
{
	return srn_container_of(t, struct srn_td, ibv);
}

static struct ibv_td *srn_alloc_td(struct ibv_context *context, struct ibv_td_init_attr *a)
{
	struct srn_td *td;

	if (!context || !a || a->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	td = calloc(1, sizeof(*td));
	if (!td) {
		errno = ENOMEM;
		return NULL;
	}
	td->ibv.context = context;
	atomic_init(&td->users, 0);
	atomic_fetch_add(&srn_ctx(context)->num_objects, 1);
	return &td->ibv;
}

/* 0, or EBUSY while a parent domain holds it. */
static int srn_dealloc_td(struct ibv_td *t)
{
	struct srn_td *td;

	if (!t)
		return EINVAL;
	td = td_of(t);
	if (atomic_load(&td->users) != 0)
		return EBUSY;
	atomic_fetch_sub(&srn_ctx(t->context)->num_objects, 1);
	free(td);
	return 0;
}

static int check_parent_attr(struct ibv_context *context,
			     const struct ibv_parent_domain_init_attr *a)
{
	const uint32_t known = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			       IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;

	if (!context || !a || !a->pd || a->pd->context != context)
		return EINVAL;
	if (srn_pd(a->pd)->prot != srn_pd(a->pd))
		return EINVAL; /* made from a PD, not from another parent */
	if (a->td && a->td->context != context)
		return EINVAL;
	if (a->comp_mask & ~known)
		return EINVAL;
	if ((a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) && (!a->alloc || !a->free))
		return EINVAL;
	return 0;
}

/* A parent domain of a->pd (with a->td, allocators, pd_context as
 * comp_mask says).  NULL + errno (EINVAL, ENOMEM). */
static struct ibv_pd *srn_alloc_parent_domain(struct ibv_context *context,
					      struct ibv_parent_domain_init_attr *a)
{
	struct srn_pd *pd, *prot;
	int err = check_parent_attr(context, a);

	if (err) {
		errno = err;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	prot = srn_pd(a->pd);
	pd->ibv.context = context;
	pd->ibv.handle = prot->ibv.handle; /* one identity with its PD */
	pd->prot = prot;
	atomic_init(&pd->users, 0);
	atomic_fetch_add(&prot->users, 1);
	if (a->td) {
		pd->td = td_of(a->td);
		atomic_fetch_add(&pd->td->users, 1);
	}
	if (a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pd->alloc = a->alloc;
		pd->free = a->free;
	}
	if (a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = a->pd_context;
	atomic_fetch_add(&srn_ctx(context)->num_objects, 1);
	return &pd->ibv;
}

void *srn_pd_buf_alloc(struct ibv_pd *ibpd, uint64_t code, size_t bytes, size_t align,
		       struct srn_pd_buf *rec)
{
	struct srn_pd *pd = ibpd ? srn_pd(ibpd) : NULL;
	uint64_t type = SRN_RES_TYPE(code);
	void *p;

	rec->p = NULL;
	if (!pd || !pd->alloc)
		return IBV_ALLOCATOR_USE_DEFAULT;
	p = pd->alloc(ibpd, pd->pd_context, bytes, align, type);
	if (p == IBV_ALLOCATOR_USE_DEFAULT)
		return p;
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	if ((uintptr_t)p & (align - 1)) {
		/* rings hold atomics: misaligned memory is refused */
		pd->free(ibpd, pd->pd_context, p, type);
		errno = ENOMEM;
		return NULL;
	}
	/* zeroed whatever the allocator did (the man page asks it to, not
	 * every allocator does) */
	memset(p, 0, bytes);
	rec->pd = pd;
	rec->p = p;
	rec->type = type;
	return p;
}

bool srn_pd_buf_free(struct srn_pd_buf *rec, void *p)
{
	if (!rec->p || rec->p != p)
		return false;
	rec->pd->free(&rec->pd->ibv, rec->pd->pd_context, p, rec->type);
	rec->p = NULL;
	return true;
}

void srn_ops_init_parent_domain(struct verbs_context *vctx)
{
	vctx->alloc_td = srn_alloc_td;
	vctx->dealloc_td = srn_dealloc_td;
	vctx->alloc_parent_domain = srn_alloc_parent_domain;
}
