/* The process's open device contexts, shared by rdma_get_devices() and
 * (later) every cm_id: librdmacm opens each device once and keeps the
 * contexts for the life of the process, so ibv_context pointers handed to
 * the application stay valid after rdma_free_devices(). */
#ifndef CM_DEVICES_H
#define CM_DEVICES_H

#include <infiniband/verbs.h>

/* Opens every device on first use.  Returns the contexts (not to be freed)
 * and sets *count, or returns NULL with errno (ENODEV: no device). */
struct ibv_context **cm_devices(int *count);

#endif
