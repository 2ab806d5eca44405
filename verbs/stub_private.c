/* IBVERBS_PRIVATE_34: the provider-driver interface of rdma-core.
 *
 * Provider libraries (libmlx5, libefa, ...) import these names, so they
 * must exist for such a library to load at all; softrnic never loads a
 * provider, so none of them is ever reached through a provider.  No
 * public header declares them (Debian ships no <infiniband/driver.h>),
 * hence the local prototypes: only the name and version node matter to
 * the dynamic linker.  Weak (see stub.h) so that an area wanting one of
 * them for real (e.g. ibv_query_gid_type for ibv_devinfo -v) just
 * defines it.
 */
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "verbs/stub.h"

/* The ibv_cmd_* family: "issue this uverbs command to the kernel".  Each
 * returns 0 or a positive errno; with no kernel device there is none to
 * issue.  Arguments are irrelevant, so one prototype serves all. */
#define SRN_STUB_CMD(name) \
	SRN_STUB int name(void); \
	SRN_STUB int name(void) { return EOPNOTSUPP; }

SRN_STUB_CMD(ibv_cmd_advise_mr)
SRN_STUB_CMD(ibv_cmd_alloc_dm)
SRN_STUB_CMD(ibv_cmd_alloc_mw)
SRN_STUB_CMD(ibv_cmd_alloc_pd)
SRN_STUB_CMD(ibv_cmd_attach_mcast)
SRN_STUB_CMD(ibv_cmd_close_xrcd)
SRN_STUB_CMD(ibv_cmd_create_ah)
SRN_STUB_CMD(ibv_cmd_create_counters)
SRN_STUB_CMD(ibv_cmd_create_cq)
SRN_STUB_CMD(ibv_cmd_create_cq_ex)
SRN_STUB_CMD(ibv_cmd_create_flow)
SRN_STUB_CMD(ibv_cmd_create_flow_action_esp)
SRN_STUB_CMD(ibv_cmd_create_qp)
SRN_STUB_CMD(ibv_cmd_create_qp_ex)
SRN_STUB_CMD(ibv_cmd_create_qp_ex2)
SRN_STUB_CMD(ibv_cmd_create_rwq_ind_table)
SRN_STUB_CMD(ibv_cmd_create_srq)
SRN_STUB_CMD(ibv_cmd_create_srq_ex)
SRN_STUB_CMD(ibv_cmd_create_wq)
SRN_STUB_CMD(ibv_cmd_dealloc_mw)
SRN_STUB_CMD(ibv_cmd_dealloc_pd)
SRN_STUB_CMD(ibv_cmd_dereg_mr)
SRN_STUB_CMD(ibv_cmd_destroy_ah)
SRN_STUB_CMD(ibv_cmd_destroy_counters)
SRN_STUB_CMD(ibv_cmd_destroy_cq)
SRN_STUB_CMD(ibv_cmd_destroy_flow)
SRN_STUB_CMD(ibv_cmd_destroy_flow_action)
SRN_STUB_CMD(ibv_cmd_destroy_qp)
SRN_STUB_CMD(ibv_cmd_destroy_rwq_ind_table)
SRN_STUB_CMD(ibv_cmd_destroy_srq)
SRN_STUB_CMD(ibv_cmd_destroy_wq)
SRN_STUB_CMD(ibv_cmd_detach_mcast)
SRN_STUB_CMD(ibv_cmd_free_dm)
SRN_STUB_CMD(ibv_cmd_get_context)
SRN_STUB_CMD(ibv_cmd_modify_cq)
SRN_STUB_CMD(ibv_cmd_modify_flow_action_esp)
SRN_STUB_CMD(ibv_cmd_modify_qp)
SRN_STUB_CMD(ibv_cmd_modify_qp_ex)
SRN_STUB_CMD(ibv_cmd_modify_srq)
SRN_STUB_CMD(ibv_cmd_modify_wq)
SRN_STUB_CMD(ibv_cmd_open_qp)
SRN_STUB_CMD(ibv_cmd_open_xrcd)
SRN_STUB_CMD(ibv_cmd_poll_cq)
SRN_STUB_CMD(ibv_cmd_post_recv)
SRN_STUB_CMD(ibv_cmd_post_send)
SRN_STUB_CMD(ibv_cmd_post_srq_recv)
SRN_STUB_CMD(ibv_cmd_query_context)
SRN_STUB_CMD(ibv_cmd_query_device_any)
SRN_STUB_CMD(ibv_cmd_query_mr)
SRN_STUB_CMD(ibv_cmd_query_port)
SRN_STUB_CMD(ibv_cmd_query_qp)
SRN_STUB_CMD(ibv_cmd_query_srq)
SRN_STUB_CMD(ibv_cmd_read_counters)
SRN_STUB_CMD(ibv_cmd_reg_dmabuf_mr)
SRN_STUB_CMD(ibv_cmd_reg_dm_mr)
SRN_STUB_CMD(ibv_cmd_reg_mr)
SRN_STUB_CMD(ibv_cmd_req_notify_cq)
SRN_STUB_CMD(ibv_cmd_rereg_mr)
SRN_STUB_CMD(ibv_cmd_resize_cq)

/* Raw ioctl command execution: 0 or positive errno. */
SRN_STUB_CMD(execute_ioctl)

/* Attribute counting for ioctl command buffers: nothing to count. */
SRN_STUB unsigned int __ioctl_final_num_attrs(void);
SRN_STUB unsigned int __ioctl_final_num_attrs(void)
{
	return 0;
}

/* A data symbol (a bool in rdma-core): providers read it. */
SRN_STUB bool verbs_allow_disassociate_destroy;

/* Provider registration: there is no provider registry to join. */
SRN_STUB void verbs_register_driver_34(const void *ops);
SRN_STUB void verbs_register_driver_34(const void *ops)
{
	(void)ops;
}

/* Context construction for providers: constructor convention. */
SRN_STUB void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
					     size_t alloc_size,
					     struct verbs_context *context_offset,
					     uint32_t driver_id);
SRN_STUB void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
					     size_t alloc_size,
					     struct verbs_context *context_offset,
					     uint32_t driver_id)
{
	(void)device, (void)cmd_fd, (void)alloc_size, (void)context_offset;
	(void)driver_id;
	SRN_STUB_NULL(EOPNOTSUPP);
}

SRN_STUB struct ibv_context *verbs_open_device(struct ibv_device *device,
					       void *private_data);
SRN_STUB struct ibv_context *verbs_open_device(struct ibv_device *device,
					       void *private_data)
{
	(void)device, (void)private_data;
	SRN_STUB_NULL(EOPNOTSUPP);
}

/* Provider-side bookkeeping with nothing to do here. */
SRN_STUB void verbs_uninit_context(struct verbs_context *context);
SRN_STUB void verbs_uninit_context(struct verbs_context *context)
{
	(void)context;
}

SRN_STUB void verbs_set_ops(struct verbs_context *vctx, const void *ops);
SRN_STUB void verbs_set_ops(struct verbs_context *vctx, const void *ops)
{
	(void)vctx, (void)ops;
}

SRN_STUB void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
			    struct ibv_comp_channel *channel, void *cq_context);
SRN_STUB void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
			    struct ibv_comp_channel *channel, void *cq_context)
{
	(void)cq, (void)context, (void)channel, (void)cq_context;
}

/* Provider debug log; providers are never loaded, so drop the message. */
SRN_STUB void __verbs_log(struct verbs_context *ctx, uint32_t level,
			  const char *fmt, ...);
SRN_STUB void __verbs_log(struct verbs_context *ctx, uint32_t level,
			  const char *fmt, ...)
{
	(void)ctx, (void)level, (void)fmt;
}

/* GID type of a table entry: 0 or a positive errno (as rdma-core v44).
 * *type is an enum ibv_gid_type_sysfs: 0 = IB/RoCE v1, 1 = RoCE v2.
 * verbs/query.c may define it for real (ibv_devinfo -v uses it). */
SRN_STUB int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
				unsigned int index, int *type);
SRN_STUB int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
				unsigned int index, int *type)
{
	(void)context, (void)port_num, (void)index, (void)type;
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}
