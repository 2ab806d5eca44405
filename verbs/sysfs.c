/* rdma-core's sysfs accessors.  softrnic's devices have no kernel sysfs
 * entries; their files live in the sysfs view (verbs/sysfs_view.c,
 * docs/sysfs-view.md), whose root plays the part of /sys: it holds
 * class/infiniband/DEV and class/infiniband_verbs/srn_uverbsN, and every
 * device's ibdev_path and dev_path point into it. */
#include "verbs/export.h"
#include "net/sysfs_root.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size);
int ibv_read_ibdev_sysfs_file(char *buf, size_t size, const void *sysfs_dev,
			      const char *fnfmt, ...);

static char view_root[128];
static pthread_once_t view_root_once = PTHREAD_ONCE_INIT;

static void find_view_root(void)
{
	struct stat st;
	char root[sizeof(view_root)];

	if (net_sysfs_root(root, sizeof(root)) && lstat(root, &st) == 0 &&
	    net_sysfs_root_trusted(&st))
		snprintf(view_root, sizeof(view_root), "%s", root);
}

/* The view's root, or NULL (ENOENT) when it could not be written. */
SRN_EXPORT const char *ibv_get_sysfs_path(void)
{
	pthread_once(&view_root_once, find_view_root);
	if (!view_root[0]) {
		errno = ENOENT;
		return NULL;
	}
	return view_root;
}

/* dir/file's content as a string without its trailing newline; returns
 * its length, or -1 with errno (ENOENT for a file the device lacks). */
SRN_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
				   size_t size)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	if (!dir || !file || !buf || size == 0 ||
	    snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path)) {
		errno = EINVAL;
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return (int)n;
}

/* sysfs_dev is rdma-core's private per-device record, which only its
 * kernel providers have; softrnic's devices never hand one out. */
SRN_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
					 const void *sysfs_dev,
					 const char *fnfmt, ...)
{
	(void)buf, (void)size, (void)sysfs_dev, (void)fnfmt;
	errno = ENOENT;
	return -1;
}
