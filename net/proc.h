/* net/proc: telling a live process from a dead one or a recycled pid, for
 * every shared-memory table that records owners (QPN registry, inboxes,
 * CM directory).  Header-only: librdmacm uses it too, and the verbs
 * library exports nothing but the ibv_* API. */
#ifndef NET_PROC_H
#define NET_PROC_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Start time of pid in clock ticks since boot (field 22 of /proc/PID/stat);
 * 0 when the process is gone or a zombie (a SIGKILLed process its parent
 * has not reaped yet owns nothing any more). */
static inline uint64_t net_proc_start_time(pid_t pid)
{
	char path[48], buf[1024], *p;
	unsigned long long t = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The command name (field 2) may hold spaces and parens: skip to
	 * the last ')'; from field 3 on, fields are space separated. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
		return 0;
	for (int f = 2; f < 22 && p; f++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &t) != 1)
		return 0;
	return t;
}

/* An owner word: pid in the high 32 bits, the low 32 bits of its start
 * time below, so that a recycled pid does not pass for the owner. */
static inline uint64_t net_proc_word(pid_t pid)
{
	return (uint64_t)(uint32_t)pid << 32 | (uint32_t)net_proc_start_time(pid);
}

static inline bool net_proc_word_alive(uint64_t w)
{
	pid_t pid = (pid_t)(w >> 32);

	if (pid <= 0)
		return false;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return false;
	/* EPERM (another user's) or alive: the start time decides */
	return (uint32_t)net_proc_start_time(pid) == (uint32_t)w;
}

#endif
