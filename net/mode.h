/* net/mode: which path packets to a same-host peer take.
 * SOFTRNIC_TRANSPORT=udp forces the UDP (RoCEv2) path everywhere; the
 * default (auto, or unset) uses shared memory when both ends are on this
 * host.  Read once per process. */
#ifndef NET_MODE_H
#define NET_MODE_H

#include <stdbool.h>

/* True unless SOFTRNIC_TRANSPORT=udp. */
bool net_shm_allowed(void);

#endif
