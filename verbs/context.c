/* Opening and closing a device: the context is a struct verbs_context
 * (abi_compat = the "extended" marker) so the inline functions of
 * <infiniband/verbs.h> dispatch through vctx's slots into softrnic. */
#include "verbs/srn.h"
#include "verbs/async.h"
#include "verbs/device.h"
#include "verbs/export.h"
#include "verbs/mr_dir.h"
#include "transport/iwarp_qp.h"
#include "net/settings.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Random bits for lkey/rkey key fields: a peer must not guess keys. */
static uint32_t random_seed(void)
{
	uint32_t seed;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed)) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed = (uint32_t)ts.tv_nsec ^ (uint32_t)getpid() * 2654435761u;
	}
	return seed;
}

/* A new context on device, with its own engine and async queue.
 * NULL + errno on failure. */
SRN_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct srn_context *ctx;
	struct ibv_context *ic;
	int err;

	if (!device || !srn_device_valid(device)) {
		errno = EINVAL;
		return NULL;
	}
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	ic = &ctx->vctx.context;
	ic->cmd_fd = -1;
	ctx->dev = srn_dev(device);
	ctx->iw_ops = ctx->dev->iwarp ? &srn_iwqp_ops : NULL;
	do
		ctx->mrdir_nonce = random_seed();
	while (ctx->mrdir_nonce == 0);
	ctx->max_qp = (uint32_t)srn_setting(SRN_SET_MAX_QP, NULL);
	ctx->max_mr = (uint32_t)srn_setting(SRN_SET_MAX_MR, NULL);
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->notify_lock, NULL);
	atomic_init(&ctx->num_objects, 0);

	ctx->async = srn_async_create();
	if (!ctx->async) {
		err = errno;
		goto fail;
	}
	ic->device = device;
	ic->async_fd = srn_async_fd(ctx->async);
	/* No kernel command channel, but programs print, poll or close
	 * cmd_fd as an ordinary descriptor: give them a harmless real one. */
	ic->cmd_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (ic->cmd_fd < 0) {
		err = errno;
		goto fail;
	}
	/* One completion engine per context: one completion vector. */
	ic->num_comp_vectors = 1;
	pthread_mutex_init(&ic->mutex, NULL);
	ic->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->vctx.sz = sizeof(struct verbs_context);

	srn_ops_init_unsupported(&ctx->vctx);
	srn_ops_init_device(&ctx->vctx);
	srn_ops_init_datapath(&ctx->vctx);
	srn_ops_init_dm(&ctx->vctx);
	srn_ops_init_odp(&ctx->vctx);
	srn_ops_init_parent_domain(&ctx->vctx);

	err = srn_engine_attach(ctx);
	if (err) {
		err = err < 0 ? -err : err;
		pthread_mutex_destroy(&ic->mutex);
		goto fail;
	}
	/* Not fatal: without it, same-host peers take the UDP path. */
	srn_mrdir_open(ctx);
	return ic;

fail:
	if (ic->cmd_fd >= 0)
		close(ic->cmd_fd);
	srn_async_destroy(ctx->async);
	pthread_mutex_destroy(&ctx->lock);
	pthread_mutex_destroy(&ctx->notify_lock);
	free(ctx);
	errno = err;
	return NULL;
}

/* Stops the context's engine and frees it.  Like rdma-core, objects the
 * application did not destroy are not reclaimed (their memory leaks). */
SRN_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct srn_context *ctx;

	if (!context)
		return EINVAL;
	ctx = srn_ctx(context);
	srn_engine_detach(ctx);
	srn_mrdir_close(ctx);
	srn_async_destroy(ctx->async);
	if (context->cmd_fd >= 0)
		close(context->cmd_fd);
	pthread_mutex_destroy(&context->mutex);
	pthread_mutex_destroy(&ctx->lock);
	pthread_mutex_destroy(&ctx->notify_lock);
	free(ctx->mrs);
	free(ctx->qps);
	free(ctx);
	return 0;
}
