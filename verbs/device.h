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

/* The iWARP RNIC flavour (verbs/iwarp_dev.c).  spec_strip removes a
 * ":iwarp" suffix from an interface name in SOFTRNIC_DEVICES and says
 * whether there was one; dev_init turns a device into an iWARP one; the
 * others adjust what the query verbs report for it. */
bool srn_iwarp_spec_strip(char *ifname);
void srn_iwarp_dev_init(struct srn_device *dev);
void srn_iwarp_device_attr(struct ibv_device_attr_ex *a);
void srn_iwarp_port_attr(const struct srn_device *dev, struct ibv_port_attr *p);
void srn_iwarp_gid(const struct srn_device *dev, union ibv_gid *gid);

#endif
