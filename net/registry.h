/* net/registry: the device-wide QPN table shared by every process on the
 * host (DESIGN.md "No daemon").  One shared-memory file per device,
 * /dev/shm/softrnic-<devname>-v1, holds a slot per QPN saying which
 * process owns it and on which UDP port that process's engine listens.
 * Slots of dead processes (even SIGKILLed ones) are reclaimed lazily.
 */
#ifndef NET_REGISTRY_H
#define NET_REGISTRY_H

#include <stdint.h>

/* QPNs are slot indexes: 2 .. NET_REG_SLOTS-1 (0 and 1 are reserved:
 * QP0/SMI does not exist on RoCE, QP1 is the GSI used by rdma_cm). */
enum { NET_REG_SLOTS = 1 << 16, NET_REG_FIRST_QPN = 2 };

struct net_registry;

/* Map (creating if needed) the registry of device devname.  NULL + errno. */
struct net_registry *net_registry_open(const char *devname);
void net_registry_close(struct net_registry *reg);

/* Claim a free (or dead process's) QPN for this process, recording the UDP
 * port and address family where its packets go.  0 or -ENOSPC. */
int net_registry_alloc(struct net_registry *reg, uint16_t port, int family,
		       uint32_t *qpn);
/* Release a QPN this process owns (no effect on someone else's). */
void net_registry_free(struct net_registry *reg, uint32_t qpn);
/* Where QPN's packets go: 0 and *port, *family; -ENOENT if unowned. */
int net_registry_lookup(struct net_registry *reg, uint32_t qpn,
			uint16_t *port, int *family);
/* Pid owning qpn, or 0 (tests and `softrnic stats`). */
int net_registry_owner(struct net_registry *reg, uint32_t qpn);

#endif
