/* rdma_event_str: the enum's own identifier, as rdma-core prints it
 * (rping and friends log these verbatim). */
#include <rdma/rdma_cma.h>

#include "verbs/export.h"

SRN_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
#define CM_EVENT_NAME(e) [e] = #e
	static const char *const names[] = {
		CM_EVENT_NAME(RDMA_CM_EVENT_ADDR_RESOLVED),
		CM_EVENT_NAME(RDMA_CM_EVENT_ADDR_ERROR),
		CM_EVENT_NAME(RDMA_CM_EVENT_ROUTE_RESOLVED),
		CM_EVENT_NAME(RDMA_CM_EVENT_ROUTE_ERROR),
		CM_EVENT_NAME(RDMA_CM_EVENT_CONNECT_REQUEST),
		CM_EVENT_NAME(RDMA_CM_EVENT_CONNECT_RESPONSE),
		CM_EVENT_NAME(RDMA_CM_EVENT_CONNECT_ERROR),
		CM_EVENT_NAME(RDMA_CM_EVENT_UNREACHABLE),
		CM_EVENT_NAME(RDMA_CM_EVENT_REJECTED),
		CM_EVENT_NAME(RDMA_CM_EVENT_ESTABLISHED),
		CM_EVENT_NAME(RDMA_CM_EVENT_DISCONNECTED),
		CM_EVENT_NAME(RDMA_CM_EVENT_DEVICE_REMOVAL),
		CM_EVENT_NAME(RDMA_CM_EVENT_MULTICAST_JOIN),
		CM_EVENT_NAME(RDMA_CM_EVENT_MULTICAST_ERROR),
		CM_EVENT_NAME(RDMA_CM_EVENT_ADDR_CHANGE),
		CM_EVENT_NAME(RDMA_CM_EVENT_TIMEWAIT_EXIT),
	};
#undef CM_EVENT_NAME
	if ((unsigned int)event >= sizeof(names) / sizeof(names[0]) || !names[event])
		return "UNKNOWN EVENT";
	return names[event];
}
