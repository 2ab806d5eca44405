/* Multicast joins need UD multicast in the transport (another issue).
 * Until then the calls fail honestly with ENOSYS, what librdmacm reports
 * when the kernel below it lacks a command; -1 with errno, librdmacm's
 * convention.  mckey therefore stops at its join. */
#include <errno.h>
#include <rdma/rdma_cma.h>

#include "verbs/export.h"

SRN_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
				   void *context)
{
	(void)addr;
	(void)context;
	errno = id ? ENOSYS : EINVAL;
	return -1;
}

SRN_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id,
				      struct rdma_cm_join_mc_attr_ex *mc_join_attr,
				      void *context)
{
	(void)mc_join_attr;
	(void)context;
	errno = id ? ENOSYS : EINVAL;
	return -1;
}

SRN_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	(void)addr;
	/* Nothing can have been joined. */
	errno = id ? EADDRNOTAVAIL : EINVAL;
	return -1;
}
