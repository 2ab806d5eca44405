/* rdma_get_devices / rdma_free_devices over a process-wide cache of open
 * contexts (see devices.h). */
#include <errno.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <string.h>

#include "cm/devices.h"
#include "verbs/export.h"

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context **devices;  /* open contexts, never closed */
static int num_devices;

/* Called with devices_lock held.  Keeps whatever opened; a device that
 * fails to open is skipped, as a device that vanished would be. */
static int devices_open(void)
{
	struct ibv_device **list;
	int n = 0, err = ENODEV;

	list = ibv_get_device_list(&n);
	if (!list)
		return errno ? errno : ENODEV;
	if (n > 0) {
		devices = calloc((size_t)n, sizeof(*devices));
		if (!devices) {
			ibv_free_device_list(list);
			return ENOMEM;
		}
	}
	for (int i = 0; i < n; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);

		if (ctx)
			devices[num_devices++] = ctx;
		else
			err = errno ? errno : ENODEV;
	}
	/* Open contexts keep their device alive; the list itself can go. */
	ibv_free_device_list(list);
	if (num_devices == 0) {
		free(devices);
		devices = NULL;
		return err;
	}
	return 0;
}

struct ibv_context **cm_devices(int *count)
{
	int err = 0;

	pthread_mutex_lock(&devices_lock);
	if (!devices)
		err = devices_open();
	*count = num_devices;
	pthread_mutex_unlock(&devices_lock);
	if (err) {
		errno = err;
		return NULL;
	}
	return devices;
}

SRN_EXPORT struct ibv_context **rdma_get_devices(int *num)
{
	struct ibv_context **ctxs, **out;
	int n = 0;

	ctxs = cm_devices(&n);
	if (!ctxs) {
		if (num)
			*num = 0;
		return NULL;
	}
	/* The caller owns the array (NULL-terminated), not the contexts. */
	out = calloc((size_t)n + 1, sizeof(*out));
	if (!out) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(out, ctxs, (size_t)n * sizeof(*out));
	if (num)
		*num = n;
	return out;
}

SRN_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}
