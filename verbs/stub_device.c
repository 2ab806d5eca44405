/* Weak defaults (see stub.h) for the device, context, query, async-event
 * and completion-channel calls.  verbs/device.c, verbs/context.c,
 * verbs/query.c, verbs/async.c and verbs/cq.c replace them. */
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "verbs/stub.h"

/* Stubs accept and ignore every argument. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* The header may wrap these names in macros; we define the real symbols. */
#undef ibv_get_device_list
#undef ibv_query_port

/* ---- device list ------------------------------------------------------- */

SRN_STUB struct ibv_device **ibv_get_device_list(int *num_devices)
{
	if (num_devices)
		*num_devices = 0;
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB void ibv_free_device_list(struct ibv_device **list)
{
	/* The stub list constructor never allocates anything. */
}

SRN_STUB const char *ibv_get_device_name(struct ibv_device *device)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB __be64 ibv_get_device_guid(struct ibv_device *device)
{
	errno = EOPNOTSUPP;
	return 0;
}

SRN_STUB int ibv_get_device_index(struct ibv_device *device)
{
	/* Documented: -1 when indexes are not supported. */
	return -1;
}

/* ---- context ----------------------------------------------------------- */

SRN_STUB struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB int ibv_close_device(struct ibv_context *context)
{
	SRN_STUB_MINUS1(EOPNOTSUPP); /* documented: -1 on failure */
}

SRN_STUB struct ibv_context *ibv_import_device(int cmd_fd)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

/* ---- queries ----------------------------------------------------------- */

SRN_STUB int ibv_query_device(struct ibv_context *context,
			      struct ibv_device_attr *device_attr)
{
	return EOPNOTSUPP;
}

SRN_STUB int ibv_query_port(struct ibv_context *context, uint8_t port_num,
			    struct _compat_ibv_port_attr *port_attr)
{
	return EOPNOTSUPP;
}

SRN_STUB int ibv_query_gid(struct ibv_context *context, uint8_t port_num,
			   int index, union ibv_gid *gid)
{
	SRN_STUB_MINUS1(EOPNOTSUPP); /* documented: -1 on error */
}

SRN_STUB int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
			       uint32_t gid_index, struct ibv_gid_entry *entry,
			       uint32_t flags, size_t entry_size)
{
	return EOPNOTSUPP; /* documented: errno value on error */
}

SRN_STUB ssize_t _ibv_query_gid_table(struct ibv_context *context,
				      struct ibv_gid_entry *entries,
				      size_t max_entries, uint32_t flags,
				      size_t entry_size)
{
	return -EOPNOTSUPP; /* documented: negative errno on error */
}

SRN_STUB int ibv_query_pkey(struct ibv_context *context, uint8_t port_num,
			    int index, __be16 *pkey)
{
	SRN_STUB_MINUS1(EOPNOTSUPP); /* documented: -1 on error */
}

SRN_STUB int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num,
				__be16 pkey)
{
	SRN_STUB_MINUS1(EOPNOTSUPP); /* documented: -1 on error */
}

SRN_STUB int ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
					 struct ibv_ah_attr *attr,
					 uint8_t eth_mac[ETHERNET_LL_SIZE],
					 uint16_t *vid)
{
	return EOPNOTSUPP;
}

/* ---- async events ------------------------------------------------------ */

SRN_STUB int ibv_get_async_event(struct ibv_context *context,
				 struct ibv_async_event *event)
{
	SRN_STUB_MINUS1(EOPNOTSUPP); /* documented: -1 on error */
}

SRN_STUB void ibv_ack_async_event(struct ibv_async_event *event)
{
	/* No event was ever handed out, so there is nothing to acknowledge. */
}

/* ---- completion channel ------------------------------------------------ */

SRN_STUB struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	return EOPNOTSUPP;
}

SRN_STUB int ibv_get_cq_event(struct ibv_comp_channel *channel,
			      struct ibv_cq **cq, void **cq_context)
{
	SRN_STUB_MINUS1(EOPNOTSUPP); /* documented: -1 on error */
}

SRN_STUB void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	/* No event was ever handed out. */
}
