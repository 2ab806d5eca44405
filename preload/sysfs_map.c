/* libsoftrnic_sysfs_map.so: the LD_PRELOAD library `softrnic run` adds so
 * that programs reading a device's files under their kernel names find
 * softrnic's view of them (docs/sysfs-view.md, verbs/sysfs_view.c).
 *
 * Only absolute paths under /sys/class/infiniband, /sys/class/infiniband_verbs
 * and /dev/infiniband are looked at, and only those naming an entry the
 * view holds are redirected (the bare directories too, when the real one
 * does not exist); real devices' paths and every other path reach libc
 * unchanged after a few byte compares.  The calls wrapped are the libc
 * path calls the programs that read these files use on glibc 2.36 (UCX's
 * open/stat/realpath, CPython's open64/stat/lstat/opendir/readlink,
 * hwloc's open/opendir, ls's statx and xattr calls). */
#include "net/sysfs_root.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* The next definition of a libc function (libc's own), looked up once. */
#define REAL(name) \
	static __typeof__(name) *real_##name; \
	if (!real_##name) \
		real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

static const struct {
	const char *real;
	size_t len;
	const char *view;
} prefixes[] = {
	{ "/sys/class/infiniband_verbs", 27, "class/infiniband_verbs" },
	{ "/sys/class/infiniband", 21, "class/infiniband" },
	{ "/dev/infiniband", 15, "dev/infiniband" },
};

/* libc's lstat, never this library's (which would map again). */
static int raw_lstat(const char *path, struct stat *st)
{
	REAL(fstatat);
	return real_fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

/* A wrapper that calls libc's function with the path mapped. */
#define MAPPED map_path(path, buf)
#define WRAP(ret, name, params, args) \
	EXPORT ret name params \
	{ \
		char buf[PATH_MAX]; \
		REAL(name); \
		return real_##name args; \
	}

/* The view's root, found once per process: the namespace's inode costs a
 * stat of /proc/self/ns/net, ~20 us here.  A process that moves to
 * another network namespace later keeps the first one's view. */
static char view_root[128];
static pthread_once_t view_root_once = PTHREAD_ONCE_INIT;

static void find_view_root(void)
{
	if (!net_sysfs_root(view_root, sizeof(view_root)))
		view_root[0] = '\0';
}

/* Returns path itself, or its counterpart in the view written into buf. */
static const char *map_path(const char *path, char buf[PATH_MAX])
{
	char probe[PATH_MAX];
	const char *root = view_root;
	const char *rest = NULL, *view = NULL, *end;
	struct stat st;
	size_t first;

	if (!path || path[0] != '/' || (path[1] != 's' && path[1] != 'd'))
		return path;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		if (strncmp(path, prefixes[i].real, prefixes[i].len) == 0 &&
		    (path[prefixes[i].len] == '/' || path[prefixes[i].len] == '\0')) {
			rest = path + prefixes[i].len;
			view = prefixes[i].view;
			break;
		}
	}
	if (!rest)
		return path;
	while (*rest == '/')
		rest++;
	pthread_once(&view_root_once, find_view_root);
	if (!root[0] || raw_lstat(root, &st) != 0 || !net_sysfs_root_trusted(&st))
		return path;
	end = strchr(rest, '/');
	first = end ? (size_t)(end - rest) : strlen(rest);
	if (first == 0) {
		/* The directory itself: the real one wins where it exists. */
		if (raw_lstat(path, &st) == 0)
			return path;
	} else {
		if (snprintf(probe, PATH_MAX, "%s/%s/%.*s", root, view, (int)first, rest) >= PATH_MAX ||
		    raw_lstat(probe, &st) != 0)
			return path;
	}
	if (snprintf(buf, PATH_MAX, "%s/%s%s%s", root, view, *rest ? "/" : "", rest) >= PATH_MAX)
		return path;
	return buf;
}

/* ---- open ---------------------------------------------------------------- */

static mode_t open_mode(int flags, va_list ap)
{
	return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

/* open's mode argument is there only with O_CREAT or O_TMPFILE. */
#define WRAP_OPEN(name, params, args) \
	EXPORT int name params \
	{ \
		char buf[PATH_MAX]; \
		va_list ap; \
		mode_t mode; \
		REAL(name); \
		va_start(ap, flags); \
		mode = open_mode(flags, ap); \
		va_end(ap); \
		return real_##name args; \
	}

WRAP_OPEN(open, (const char *path, int flags, ...), (MAPPED, flags, mode))
WRAP_OPEN(open64, (const char *path, int flags, ...), (MAPPED, flags, mode))
WRAP_OPEN(openat, (int dirfd, const char *path, int flags, ...), (dirfd, MAPPED, flags, mode))
WRAP_OPEN(openat64, (int dirfd, const char *path, int flags, ...), (dirfd, MAPPED, flags, mode))

/* The _FORTIFY_SOURCE entry points programs built with it call. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

WRAP(int, __open_2, (const char *path, int flags),
     (MAPPED, flags))

WRAP(int, __open64_2, (const char *path, int flags),
     (MAPPED, flags))

WRAP(int, __openat_2, (int dirfd, const char *path, int flags),
     (dirfd, MAPPED, flags))

WRAP(int, __openat64_2, (int dirfd, const char *path, int flags),
     (dirfd, MAPPED, flags))

WRAP(FILE *, fopen, (const char *path, const char *mode),
     (MAPPED, mode))

WRAP(FILE *, fopen64, (const char *path, const char *mode),
     (MAPPED, mode))

WRAP(FILE *, freopen, (const char *path, const char *mode, FILE *f),
     (MAPPED, mode, f))

WRAP(FILE *, freopen64, (const char *path, const char *mode, FILE *f),
     (MAPPED, mode, f))

/* ---- stat family ------------------------------------------------------- */

WRAP(int, stat, (const char *path, struct stat *st),
     (MAPPED, st))

WRAP(int, stat64, (const char *path, struct stat64 *st),
     (MAPPED, st))

WRAP(int, lstat, (const char *path, struct stat *st),
     (MAPPED, st))

WRAP(int, lstat64, (const char *path, struct stat64 *st),
     (MAPPED, st))

WRAP(int, fstatat, (int dirfd, const char *path, struct stat *st, int flags),
     (dirfd, MAPPED, st, flags))

WRAP(int, fstatat64, (int dirfd, const char *path, struct stat64 *st, int flags),
     (dirfd, MAPPED, st, flags))

WRAP(int, statx, (int dirfd, const char *path, int flags, unsigned int mask, struct statx *stx),
     (dirfd, MAPPED, flags, mask, stx))

/* Programs built against glibc before 2.33 call the versioned wrappers;
 * on x86_64 their struct is the one stat() fills (ver is always 1). */
#if defined(__x86_64__)
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);

EXPORT int __xstat(int ver, const char *path, struct stat *st)
{
	(void)ver;
	return stat(path, st);
}

EXPORT int __xstat64(int ver, const char *path, struct stat64 *st)
{
	(void)ver;
	return stat64(path, st);
}

EXPORT int __lxstat(int ver, const char *path, struct stat *st)
{
	(void)ver;
	return lstat(path, st);
}

EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st)
{
	(void)ver;
	return lstat64(path, st);
}

EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	(void)ver;
	return fstatat(dirfd, path, st, flags);
}

EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
	(void)ver;
	return fstatat64(dirfd, path, st, flags);
}
#endif

/* ---- access, directories, links ---------------------------------------- */

WRAP(int, access, (const char *path, int mode),
     (MAPPED, mode))

WRAP(int, faccessat, (int dirfd, const char *path, int mode, int flags),
     (dirfd, MAPPED, mode, flags))

WRAP(int, euidaccess, (const char *path, int mode),
     (MAPPED, mode))

WRAP(int, eaccess, (const char *path, int mode),
     (MAPPED, mode))

WRAP(DIR *, opendir, (const char *path),
     (MAPPED))

WRAP(int, scandir, (const char *path, struct dirent ***list, int (*filter)(const struct dirent *), int (*cmp)(const struct dirent **, const struct dirent **)),
     (MAPPED, list, filter, cmp))

WRAP(int, scandir64, (const char *path, struct dirent64 ***list, int (*filter)(const struct dirent64 *), int (*cmp)(const struct dirent64 **, const struct dirent64 **)),
     (MAPPED, list, filter, cmp))

WRAP(char *, realpath, (const char *path, char *resolved),
     (MAPPED, resolved))

char *__realpath_chk(const char *path, char *resolved, size_t resolved_len);

WRAP(char *, __realpath_chk, (const char *path, char *resolved, size_t resolved_len),
     (MAPPED, resolved, resolved_len))

WRAP(char *, canonicalize_file_name, (const char *path),
     (MAPPED))

WRAP(ssize_t, readlink, (const char *path, char *out, size_t size),
     (MAPPED, out, size))

WRAP(ssize_t, readlinkat, (int dirfd, const char *path, char *out, size_t size),
     (dirfd, MAPPED, out, size))

ssize_t __readlink_chk(const char *path, char *out, size_t size, size_t outlen);
ssize_t __readlinkat_chk(int dirfd, const char *path, char *out, size_t size,
			 size_t outlen);

WRAP(ssize_t, __readlink_chk, (const char *path, char *out, size_t size, size_t outlen),
     (MAPPED, out, size, outlen))

WRAP(ssize_t, __readlinkat_chk, (int dirfd, const char *path, char *out, size_t size, size_t outlen),
     (dirfd, MAPPED, out, size, outlen))

/* ls -l asks for ACLs and security labels of what it lists. */
WRAP(ssize_t, getxattr, (const char *path, const char *name, void *value, size_t size),
     (MAPPED, name, value, size))

WRAP(ssize_t, lgetxattr, (const char *path, const char *name, void *value, size_t size),
     (MAPPED, name, value, size))

WRAP(ssize_t, listxattr, (const char *path, char *list, size_t size),
     (MAPPED, list, size))

WRAP(ssize_t, llistxattr, (const char *path, char *list, size_t size),
     (MAPPED, list, size))
