/* Small helpers shared by the softrnic subcommands. */
#ifndef SRN_CLI_UTIL_H
#define SRN_CLI_UTIL_H

#include <infiniband/verbs.h>

/* "xxxx:xxxx:xxxx:xxxx" (needs 20 bytes), as ibv_devinfo prints GUIDs. */
const char *util_guid_str(__be64 guid, char out[20]);

/* Interface a device sits on (from GID 0's ifindex, public API only),
 * or "?".  Opens the device briefly.  Returns a static buffer. */
const char *util_device_ifname(struct ibv_device *dev);

/* GID as text: IPv4-mapped as "::ffff:a.b.c.d", others as IPv6. */
const char *util_gid_str(const union ibv_gid *gid, char out[64]);

/* The command name of process pid (/proc/PID/comm), or "?". */
const char *util_proc_comm(int pid, char out[32]);

#endif
