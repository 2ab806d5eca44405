/* net/sysfs_root: where softrnic keeps its view of the files a kernel RDMA
 * device has in sysfs and devfs (docs/sysfs-view.md).  One tree per user
 * and network namespace, since the device list follows the namespace's
 * interfaces.  Header-only: the verbs library writes the tree and the
 * path-mapping preload library (preload/) reads it; neither exports it. */
#ifndef NET_SYSFS_ROOT_H
#define NET_SYSFS_ROOT_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* The tree's top: class/infiniband, class/infiniband_verbs and
 * dev/infiniband live under it. */
#define NET_SYSFS_ROOT_FMT "/dev/shm/softrnic-sysfs-%u-%llu"

/* The namespace's inode number (0 without /proc: one shared tree). */
static inline unsigned long long net_sysfs_netns_id(void)
{
	struct stat st;

	if (stat("/proc/self/ns/net", &st) != 0)
		return 0;
	return (unsigned long long)st.st_ino;
}

/* Writes the root path for this process into out (size bytes); returns
 * false if it does not fit. */
static inline bool net_sysfs_root(char *out, size_t size)
{
	int n = snprintf(out, size, NET_SYSFS_ROOT_FMT, (unsigned)getuid(),
			 net_sysfs_netns_id());

	return n > 0 && (size_t)n < size;
}

/* The root is usable only as a real directory of this user: a name in
 * /dev/shm another user made first (or a symlink) is never followed. */
static inline bool net_sysfs_root_trusted(const struct stat *st)
{
	return S_ISDIR(st->st_mode) && st->st_uid == getuid();
}

#endif
