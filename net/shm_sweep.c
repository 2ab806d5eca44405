/* net/shm_sweep: see shm_sweep.h. */
#include "net/shm_sweep.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>

#include "net/proc.h"

enum { SWEEP_MAX = 256, SWEEP_QUIET_S = 5 };

bool net_shm_file_owned(const char *path, size_t owner_off)
{
	uint64_t owner;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return errno != ENOENT && errno != ELOOP;
	n = pread(fd, &owner, sizeof(owner), (off_t)owner_off);
	close(fd);
	return n == (ssize_t)sizeof(owner) && net_proc_word_alive(owner);
}

void net_shm_sweep(const char *prefix, size_t owner_off)
{
	size_t plen = strlen(prefix);
	struct dirent *de;
	char path[400];
	int seen = 0;
	DIR *d = opendir("/dev/shm");

	if (!d)
		return;
	while ((de = readdir(d)) && seen < SWEEP_MAX) {
		struct stat st;

		if (strncmp(de->d_name, prefix, plen))
			continue;
		seen++;
		snprintf(path, sizeof(path), "/dev/shm/%s", de->d_name);
		if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
		    time(NULL) - st.st_ctime < SWEEP_QUIET_S)
			continue;
		if (!net_shm_file_owned(path, owner_off))
			unlink(path);
	}
	closedir(d);
}
