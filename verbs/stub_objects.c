/* Weak defaults (see stub.h) for the verbs objects: PD, MR, CQ, QP, SRQ,
 * AH, multicast, ECE and object import.  verbs/pd.c, mr.c, cq.c, qp.c,
 * ... replace them (SRQ, AH, multicast: verbs/srq.c, ah.c, mcast.c, whose
 * stubs are gone); import stays unsupported (no kernel objects to
 * share; ECE is verbs/ece.c). */
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#include "verbs/stub.h"

/* Stubs accept and ignore every argument. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* v44's header turns these into inline selectors; define the symbols. */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* ---- PD ---------------------------------------------------------------- */

SRN_STUB struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB int ibv_dealloc_pd(struct ibv_pd *pd)
{
	return EOPNOTSUPP;
}

/* ---- MR ---------------------------------------------------------------- */

SRN_STUB struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				   size_t length, int access)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
					size_t length, uint64_t iova, int access)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
					 size_t length, uint64_t iova,
					 unsigned int access)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
					  size_t length, uint64_t iova, int fd,
					  int access)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			  void *addr, size_t length, int access)
{
	/* Documented: a negative enum ibv_rereg_mr_err_code, errno says why. */
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_CMD;
}

SRN_STUB int ibv_dereg_mr(struct ibv_mr *mr)
{
	return EOPNOTSUPP;
}

/* ---- CQ ---------------------------------------------------------------- */

SRN_STUB struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
				      void *cq_context,
				      struct ibv_comp_channel *channel,
				      int comp_vector)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	return EOPNOTSUPP;
}

SRN_STUB int ibv_destroy_cq(struct ibv_cq *cq)
{
	return EOPNOTSUPP;
}

/* ---- QP ---------------------------------------------------------------- */

SRN_STUB struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
				      struct ibv_qp_init_attr *qp_init_attr)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			   int attr_mask)
{
	return EOPNOTSUPP;
}

SRN_STUB int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			  int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	return EOPNOTSUPP;
}

SRN_STUB int ibv_destroy_qp(struct ibv_qp *qp)
{
	return EOPNOTSUPP;
}

SRN_STUB struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
					uint32_t flags)
{
	return 0; /* "not guaranteed in order": the safe answer */
}

/* ---- import (sharing kernel objects between processes) ------------------ */

SRN_STUB struct ibv_pd *ibv_import_pd(struct ibv_context *context,
				      uint32_t pd_handle)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB void ibv_unimport_pd(struct ibv_pd *pd)
{
	/* Nothing can have been imported. */
}

SRN_STUB struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB void ibv_unimport_mr(struct ibv_mr *mr)
{
	/* Nothing can have been imported. */
}

SRN_STUB struct ibv_dm *ibv_import_dm(struct ibv_context *context,
				      uint32_t dm_handle)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB void ibv_unimport_dm(struct ibv_dm *dm)
{
	/* Nothing can have been imported. */
}
