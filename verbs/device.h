/* Device list internals shared inside verbs/ (verbs/device.c). */
#ifndef SRN_DEVICE_H
#define SRN_DEVICE_H

#include "verbs/srn.h"

/* d is a device of this process's list (not a foreign pointer). */
bool srn_device_valid(const struct ibv_device *d);

/* The port attributes ibv_query_port reports (verbs/query.c); the sysfs
 * view writes the same facts. */
void srn_dev_port_attr(struct srn_device *dev, struct ibv_port_attr *p);

/* Writes this namespace's sysfs/devfs view of the devices and points
 * their ibdev_path/dev_path into it (verbs/sysfs_view.c).  complete: the
 * list is the default discovery, so devices missing from it are removed. */
void srn_sysfs_view_refresh(struct srn_device *const *devs, int n, bool complete);

#endif
