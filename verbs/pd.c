/* Protection domains: a PD is only an identity that MRs, QPs, AHs and
 * SRQs point at; the memory checks compare the PDs' prot (a parent
 * domain, verbs/parent_domain.c, has its PD's). */
#include "verbs/datapath.h"
#include "verbs/export.h"

#include <stdlib.h>

/* A new PD on context.  NULL + errno on failure. */
SRN_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	static atomic_uint next_handle = 1;
	struct srn_context *ctx;
	struct srn_pd *pd;

	if (!context) {
		errno = EINVAL;
		return NULL;
	}
	ctx = srn_ctx(context);
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->ibv.context = context;
	pd->ibv.handle = atomic_fetch_add(&next_handle, 1);
	pd->prot = pd;
	atomic_init(&pd->users, 0);
	atomic_fetch_add(&ctx->num_objects, 1);
	return &pd->ibv;
}

/* Frees pd or a parent domain: 0, or EBUSY while an MR, QP, AH, SRQ,
 * CQ or parent domain still uses it. */
SRN_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct srn_pd *pd;

	if (!ibpd)
		return EINVAL;
	pd = srn_pd(ibpd);
	if (atomic_load(&pd->users) != 0)
		return EBUSY;
	if (pd->prot != pd) /* a parent domain lets go of its PD and TD */
		atomic_fetch_sub(&pd->prot->users, 1);
	if (pd->td)
		atomic_fetch_sub(&pd->td->users, 1);
	atomic_fetch_sub(&srn_ctx(ibpd->context)->num_objects, 1);
	free(pd);
	return 0;
}
