/* rdma-core's sysfs accessors.  Real RDMA devices describe themselves in
 * /sys/class/infiniband; softrnic's devices exist only in user space, so
 * there is no sysfs tree to report or read.  Failing with ENOENT is what
 * a caller would see for a device whose sysfs entry is gone, a case they
 * already handle (ibv_devinfo just omits the optional fields). */
#include <errno.h>
#include <stddef.h>

#include "verbs/export.h"

const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size);
int ibv_read_ibdev_sysfs_file(char *buf, size_t size, const void *sysfs_dev,
			      const char *fnfmt, ...);

SRN_EXPORT const char *ibv_get_sysfs_path(void)
{
	errno = ENOENT;
	return NULL;
}

/* Returns the byte count read, or -1 with errno. */
SRN_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
				   size_t size)
{
	(void)dir, (void)file, (void)buf, (void)size;
	errno = ENOENT;
	return -1;
}

SRN_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
					 const void *sysfs_dev,
					 const char *fnfmt, ...)
{
	(void)buf, (void)size, (void)sysfs_dev, (void)fnfmt;
	errno = ENOENT;
	return -1;
}
