/* fork() and registered memory.
 *
 * rdma-core needs ibv_fork_init() because a hardware NIC DMAs into pinned
 * pages, and copy-on-write after fork() would leave the NIC writing into
 * the child's page instead of the parent's; it then madvise(DONTFORK)s
 * every registered range.  softrnic pins nothing: the engine writes
 * through the process's own virtual addresses, so after a fork each
 * process keeps seeing its own memory and no call is needed.  That is
 * exactly what IBV_FORK_UNNEEDED means ("fork is safe without
 * ibv_fork_init()"), so it is the honest answer from
 * ibv_is_fork_initialized(), whether or not the application asked.
 *
 * The request is still recorded (srn_fork_requested()) for MR schemes
 * that would change page semantics across fork.
 */
#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "verbs/export.h"
#include "verbs/fork.h"

static atomic_bool fork_requested;

bool srn_fork_requested(void)
{
	/* rdma-core also turns fork support on from these variables. */
	return atomic_load(&fork_requested) || getenv("RDMAV_FORK_SAFE") ||
	       getenv("IBV_FORK_SAFE");
}

SRN_EXPORT int ibv_fork_init(void)
{
	atomic_store(&fork_requested, true);
	return 0;
}

SRN_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

/* Exported for providers, which madvise their own queue buffers; nothing
 * of ours needs protecting, so success is the truth. */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

SRN_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	(void)base, (void)size;
	return 0;
}

SRN_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	(void)base, (void)size;
	return 0;
}
