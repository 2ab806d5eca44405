/* rdma_get_devices() returns a NULL-terminated array with one open context
 * per verbs device; the contexts belong to librdmacm and stay valid (and
 * identical) across rdma_free_devices() and later calls.  Skips (77)
 * while no device can be listed or opened. */
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <string.h>

#include "tests/lib/t_util.h"

int main(void)
{
	struct ibv_context **a, **b, *first[64];
	struct ibv_device **devs;
	int ndev = 0, na = -1, nb = -1;

	devs = ibv_get_device_list(&ndev);
	if (!devs || ndev == 0)
		t_skip("no verbs device");
	a = rdma_get_devices(&na);
	if (!a)
		t_skip("rdma_get_devices: %s (devices cannot be opened yet?)", strerror(errno));

	printf("rdma_get_devices: %d contexts for %d verbs devices, NULL-terminated\n", na, ndev);
	T_CHECK(na >= 1 && na <= ndev, "count %d of %d", na, ndev);
	T_CHECK(a[na] == NULL, "array not NULL-terminated");
	for (int i = 0; i < na; i++) {
		int found = 0;

		T_CHECK(a[i] && a[i]->device, "context %d", i);
		if (!a[i] || !a[i]->device)
			continue;
		for (int j = 0; j < ndev; j++)
			found |= strcmp(ibv_get_device_name(a[i]->device),
					ibv_get_device_name(devs[j])) == 0;
		T_CHECK(found, "context %d device %s not in ibv_get_device_list", i,
			ibv_get_device_name(a[i]->device));
	}

	printf("contexts survive rdma_free_devices and are the same next time\n");
	for (int i = 0; i < na && i < 64; i++)
		first[i] = a[i];
	rdma_free_devices(a);
	b = rdma_get_devices(&nb);
	T_CHECK(b && nb == na, "second call: %p, %d", (void *)b, nb);
	if (b) {
		for (int i = 0; i < nb && i < na; i++) {
			struct ibv_device_attr attr;

			int r;

			T_CHECK(i >= 64 || b[i] == first[i], "context %d changed", i);
			if (!b[i])
				continue;
			/* Still usable: the library, not the array, owns it. */
			r = ibv_query_device(b[i], &attr);
			T_CHECK(r == 0 || r == EOPNOTSUPP, "query on kept context %d: %d", i, r);
		}
		rdma_free_devices(b);
	}
	rdma_free_devices(NULL); /* allowed, like free(NULL) */

	ibv_free_device_list(devs);
	return t_summary();
}
