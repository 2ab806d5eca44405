/* verbs/pd_buf: an object's buffers from a parent domain's allocator
 * (ibv_alloc_parent_domain(3), IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS).
 * Only buffers that live in this process go there: a ring that same-host
 * peers map must be memfd-backed memory softrnic allocates itself
 * (docs/verbs-extended.md, "Parent domains"). */
#ifndef VERBS_PD_BUF_H
#define VERBS_PD_BUF_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "verbs/srn.h"

/* The resource_type alloc and free are given: the upper 32 bits are the
 * rdma_driver_id (softrnic has none of its own: RDMA_DRIVER_UNKNOWN),
 * the lower a softrnic code. */
#define SRN_RES_TYPE(code) (((uint64_t)RDMA_DRIVER_UNKNOWN << 32) | (code))
enum {
	SRN_RES_TYPE_QP_SQ = 1,      /* a QP's send queue */
	SRN_RES_TYPE_QP_RQ = 2,      /* a QP's receive ring */
	SRN_RES_TYPE_SRQ = 3,        /* an SRQ's ring */
	SRN_RES_TYPE_CQ = 4,         /* a CQ's ring */
};

/* bytes of memory, aligned to align (a power of two), zeroed, from the
 * allocator of pd if pd is a parent domain with one; recorded in *rec.
 * IBV_ALLOCATOR_USE_DEFAULT: softrnic allocates it (no allocator, or the
 * allocator asked so).  NULL + errno ENOMEM: the allocator failed, or
 * returned memory not aligned as asked (given back). */
void *srn_pd_buf_alloc(struct ibv_pd *pd, uint64_t code, size_t bytes, size_t align,
		       struct srn_pd_buf *rec);

/* If p is the buffer rec holds, give it back to its allocator: true.
 * False: p is softrnic's own, for the caller to free. */
bool srn_pd_buf_free(struct srn_pd_buf *rec, void *p);

#endif
