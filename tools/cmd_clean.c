/* softrnic clean [-n]: removes the shared-memory state in /dev/shm that no
 * live process uses any more.  softrnic keeps its registries, MR
 * directories, inboxes and port hand-over FIFOs there; a process that
 * crashed leaves its own behind.  A file is in use while any process has it
 * open or mapped, which /proc/PID/fd and /proc/PID/maps show; only files
 * no process holds, and that nobody changed in the last few seconds (a
 * process may be opening it right now), are removed. */
#include "tools/cli.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define SHM_DIR "/dev/shm"
#define STATE_PREFIX "softrnic-"
#define QUIET_SECONDS 10

struct file_id {
	dev_t dev;
	ino_t ino;
};

struct id_set {
	struct file_id *v;
	size_t n, cap;
};

static int id_add(struct id_set *s, dev_t dev, ino_t ino)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct file_id *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -1;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = (struct file_id){ dev, ino };
	return 0;
}

static int id_has(const struct id_set *s, dev_t dev, ino_t ino)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].dev == dev && s->v[i].ino == ino)
			return 1;
	return 0;
}

static int is_pid(const char *name)
{
	if (!*name)
		return 0;
	for (; *name; name++)
		if (!isdigit((unsigned char)*name))
			return 0;
	return 1;
}

/* Every file the process has open: stat() through /proc/PID/fd/N. */
static void scan_fds(const char *pid, dev_t shm_dev, struct id_set *used)
{
	char path[PATH_MAX];
	struct dirent *e;
	struct stat st;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%s/fd", pid);
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (snprintf(path, sizeof(path), "/proc/%s/fd/%s", pid, e->d_name) >=
		    (int)sizeof(path))
			continue;
		if (stat(path, &st) == 0 && st.st_dev == shm_dev)
			id_add(used, st.st_dev, st.st_ino);
	}
	closedir(d);
}

/* Every file the process has mapped: the device and inode columns of
 * /proc/PID/maps (a mapping outlives the fd it was made from). */
static void scan_maps(const char *pid, dev_t shm_dev, struct id_set *used)
{
	char path[PATH_MAX], line[PATH_MAX + 128];
	unsigned int major, minor;
	unsigned long long ino;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/maps", pid);
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %*s %*s %x:%x %llu", &major, &minor, &ino) != 3 || !ino)
			continue;
		if (makedev(major, minor) == shm_dev)
			id_add(used, shm_dev, (ino_t)ino);
	}
	fclose(f);
}

/* Processes of other users are not readable without privilege; they are
 * counted, not scanned: softrnic's files are private to their owner (or
 * only readable by others).  Returns how many were skipped. */
static int scan_processes(dev_t shm_dev, struct id_set *used)
{
	char path[PATH_MAX];
	struct dirent *e;
	int unreadable = 0;
	DIR *d = opendir("/proc");

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (!is_pid(e->d_name))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/maps", e->d_name);
		if (access(path, R_OK) != 0) {
			struct stat st;

			/* Not one that exited meanwhile: another user's. */
			snprintf(path, sizeof(path), "/proc/%s", e->d_name);
			if (stat(path, &st) == 0 && st.st_uid != getuid())
				unreadable++;
			continue;
		}
		scan_fds(e->d_name, shm_dev, used);
		scan_maps(e->d_name, shm_dev, used);
	}
	closedir(d);
	return unreadable;
}

static void clean_usage(FILE *out)
{
	fprintf(out, "usage: softrnic clean [-n]\n"
		"Removes softrnic's files in " SHM_DIR " that no running process has open\n"
		"or mapped (left behind by processes that crashed or were killed), and\n"
		"says what it removed.  Only the caller's own files are touched.\n"
		"  -n   list what would be removed, remove nothing\n");
}

static int clean_run(int argc, char **argv)
{
	int dry = 0, removed = 0, kept = 0, failed = 0, unreadable;
	struct id_set used = { 0 };
	struct stat shm;
	struct dirent *e;
	uid_t me = getuid();
	time_t now = time(NULL);
	DIR *d;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-n") == 0) {
			dry = 1;
		} else {
			cli_err("clean: unknown option '%s'", argv[i]);
			clean_usage(stderr);
			return 2;
		}
	}
	if (stat(SHM_DIR, &shm) != 0) {
		cli_err("clean: %s: %s", SHM_DIR, strerror(errno));
		return 1;
	}
	unreadable = scan_processes(shm.st_dev, &used);
	if (unreadable < 0) {
		cli_err("clean: cannot read /proc: %s", strerror(errno));
		return 1;
	}
	d = opendir(SHM_DIR);
	if (!d) {
		cli_err("clean: %s: %s", SHM_DIR, strerror(errno));
		free(used.v);
		return 1;
	}
	while ((e = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;

		if (strncmp(e->d_name, STATE_PREFIX, strlen(STATE_PREFIX)) != 0)
			continue;
		snprintf(path, sizeof(path), SHM_DIR "/%s", e->d_name);
		if (lstat(path, &st) != 0 || st.st_uid != me ||
		    !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode)))
			continue;
		if (id_has(&used, st.st_dev, st.st_ino) || now - st.st_mtime < QUIET_SECONDS) {
			kept++;
			continue;
		}
		if (dry) {
			printf("would remove %s (%jd bytes)\n", path, (intmax_t)st.st_size);
			removed++;
		} else if (unlink(path) == 0) {
			printf("removed %s (%jd bytes)\n", path, (intmax_t)st.st_size);
			removed++;
		} else {
			cli_err("clean: %s: %s", path, strerror(errno));
			failed++;
		}
	}
	closedir(d);
	free(used.v);
	printf("%s%d file%s, kept %d in use\n", dry ? "would remove " : "removed ", removed,
	       removed == 1 ? "" : "s", kept);
	if (unreadable)
		printf("(%d processes of other users not inspected)\n", unreadable);
	return failed ? 1 : 0;
}

const struct cli_cmd cli_clean = {
	.name = "clean",
	.summary = "remove shared-memory state that dead processes left behind",
	.run = clean_run,
	.usage = clean_usage,
};
