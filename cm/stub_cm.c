/* Multicast needs UD multicast in the transport (another issue): until
 * then the calls fail honestly with ENOSYS, as librdmacm does when the
 * kernel lacks support.  -1 with errno, librdmacm's convention. */
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "verbs/stub.h"

/* Stubs accept and ignore every argument. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define CM_UNSUPPORTED SRN_STUB_MINUS1(ENOSYS)

/* ---- multicast --------------------------------------------------------- */

SRN_STUB int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
				 void *context)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_join_multicast_ex(struct rdma_cm_id *id,
				    struct rdma_cm_join_mc_attr_ex *mc_join_attr,
				    void *context)
{
	CM_UNSUPPORTED;
}

SRN_STUB int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	CM_UNSUPPORTED;
}
