/* The host-wide CM directory: which process holds which rdma_cm port and
 * where its CM agent receives MADs, so that a listener in one process
 * serves connections from any process on the host (there is no kernel
 * rdma_cm to demultiplex for us).
 *
 * One small shared-memory file, /dev/shm/softrnic-cm-v1, guarded by
 * flock() (released by the kernel if its holder dies).  Entries carry an
 * owner word, pid << 32 | low 32 bits of the process start time (so a
 * recycled pid is not mistaken for the owner); entries of dead processes
 * count as free.  Linear scans: fine for the few thousand ids a host has.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "cm/cm.h"

enum { DIR_BINDS = 4096, DIR_AGENTS = 1024 };
#define DIR_PATH "/dev/shm/softrnic-cm-v1"

struct dir_bind {
	uint64_t owner;              /* 0 = free */
	uint16_t ps, port;           /* port space code, port (host order) */
	uint8_t ip[4];               /* 0.0.0.0 = wildcard */
	uint8_t listening, reuse;
	uint16_t gsi_port;           /* owner's CM agent, when listening */
};

struct dir_agent {
	uint64_t owner;
	uint16_t gsi_port;
};

struct dir {
	struct dir_bind binds[DIR_BINDS];
	struct dir_agent agents[DIR_AGENTS];
};

static pthread_mutex_t dir_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct dir *dir;
static int dir_fd = -1;
static uint64_t dir_me;

static uint64_t start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;
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
	p = strrchr(buf, ')'); /* the name may contain spaces */
	if (!p || (p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X')))
		return 0;
	/* p + 1 is the space before field 3; start time is field 22 */
	for (int f = 2; f < 22 && p; f++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &st) != 1)
		return 0;
	return st;
}

static uint64_t owner_of(pid_t pid)
{
	uint64_t st = start_time(pid);

	return (uint64_t)(uint32_t)pid << 32 | (uint32_t)st;
}

static bool alive(uint64_t owner)
{
	if (!owner)
		return false;
	if (owner == dir_me)
		return true;
	if ((uint32_t)owner == 0)
		return false; /* no start time: not a live process's word */
	return owner_of((pid_t)(owner >> 32)) == owner;
}

/* Map the file and take the lock; false on failure (errno). */
static bool dir_lock(void)
{
	pthread_mutex_lock(&dir_mutex);
	if (!dir) {
		int fd = open(DIR_PATH, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		void *m;

		if (fd < 0 || ftruncate(fd, sizeof(struct dir)) < 0) {
			if (fd >= 0)
				close(fd);
			pthread_mutex_unlock(&dir_mutex);
			return false;
		}
		m = mmap(NULL, sizeof(struct dir), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			close(fd);
			pthread_mutex_unlock(&dir_mutex);
			return false;
		}
		dir = m;
		dir_fd = fd;
		dir_me = owner_of(getpid());
	}
	while (flock(dir_fd, LOCK_EX) < 0 && errno == EINTR)
		;
	return true;
}

static void dir_unlock(void)
{
	flock(dir_fd, LOCK_UN);
	pthread_mutex_unlock(&dir_mutex);
}

static bool ip_overlap(const uint8_t a[4], const uint8_t b[4])
{
	static const uint8_t any[4];

	return !memcmp(a, b, 4) || !memcmp(a, any, 4) || !memcmp(b, any, 4);
}

static bool port_taken(uint16_t ps, const uint8_t ip[4], uint16_t port, bool reuse)
{
	for (int i = 0; i < DIR_BINDS; i++) {
		struct dir_bind *b = &dir->binds[i];

		if (!b->owner || b->ps != ps || b->port != port || !ip_overlap(b->ip, ip))
			continue;
		if (!alive(b->owner)) {
			memset(b, 0, sizeof(*b));
			continue;
		}
		/* REUSEADDR on both sides lets non-listening ids share. */
		if (reuse && b->reuse && !b->listening)
			continue;
		return true;
	}
	return false;
}

int cm_dir_bind(uint16_t ps, const uint8_t ip[4], uint16_t *port, bool reuse)
{
	int slot = -1, ret;

	if (!dir_lock())
		return -errno;
	if (*port == 0) {
		/* An ephemeral port, as the kernel's ip_local_port_range. */
		for (int t = 0; t < 2000 && *port == 0; t++) {
			uint32_t r;

			if (getrandom(&r, sizeof(r), 0) != sizeof(r))
				r = (uint32_t)rand();
			uint16_t p = (uint16_t)(32768 + r % (61000 - 32768));

			if (!port_taken(ps, ip, p, false))
				*port = p;
		}
		if (*port == 0) {
			ret = -EADDRINUSE;
			goto out;
		}
	} else if (port_taken(ps, ip, *port, reuse)) {
		ret = -EADDRINUSE;
		goto out;
	}
	for (int i = 0; i < DIR_BINDS; i++) {
		struct dir_bind *b = &dir->binds[i];

		if (!b->owner || !alive(b->owner)) {
			slot = i;
			break;
		}
	}
	if (slot < 0) {
		ret = -ENOSPC;
		goto out;
	}
	dir->binds[slot] = (struct dir_bind){ .owner = dir_me, .ps = ps, .port = *port,
					      .reuse = reuse };
	memcpy(dir->binds[slot].ip, ip, 4);
	ret = slot;
out:
	dir_unlock();
	return ret;
}

void cm_dir_unbind(int slot)
{
	if (slot < 0 || slot >= DIR_BINDS || !dir_lock())
		return;
	if (dir->binds[slot].owner == dir_me)
		memset(&dir->binds[slot], 0, sizeof(dir->binds[slot]));
	dir_unlock();
}

int cm_dir_listen(int slot, uint16_t gsi_port)
{
	struct dir_bind *b;
	int ret = 0;

	if (slot < 0 || slot >= DIR_BINDS)
		return -EINVAL;
	if (!dir_lock())
		return -errno;
	b = &dir->binds[slot];
	/* Another live listener on an overlapping address (e.g. a REUSEADDR
	 * sharer) makes this listen fail, as in Linux. */
	for (int i = 0; i < DIR_BINDS; i++) {
		struct dir_bind *o = &dir->binds[i];

		if (i != slot && o->owner && o->listening && o->ps == b->ps &&
		    o->port == b->port && ip_overlap(o->ip, b->ip) && alive(o->owner)) {
			ret = -EADDRINUSE;
			break;
		}
	}
	if (!ret) {
		b->listening = 1;
		b->gsi_port = gsi_port;
	}
	dir_unlock();
	return ret;
}

uint16_t cm_dir_lookup(uint16_t ps, const uint8_t ip[4], uint16_t port)
{
	uint16_t found = 0;

	if (!dir_lock())
		return 0;
	for (int i = 0; i < DIR_BINDS; i++) {
		struct dir_bind *b = &dir->binds[i];

		if (!b->owner || !b->listening || b->ps != ps || b->port != port ||
		    !ip_overlap(b->ip, ip) || !alive(b->owner))
			continue;
		found = b->gsi_port;
		if (!memcmp(b->ip, ip, 4))
			break; /* an exact address wins over a wildcard */
	}
	dir_unlock();
	return found;
}

int cm_dir_agent_register(uint16_t gsi_port)
{
	int slot = -1;

	if (!dir_lock())
		return -errno;
	/* A never-used slot first: a dead agent's entry is what tells its
	 * peers it died, so it is recycled only when the table is full. */
	for (int i = 0; i < DIR_AGENTS && slot < 0; i++)
		if (!dir->agents[i].owner || dir->agents[i].gsi_port == gsi_port)
			slot = i;
	for (int i = 0; i < DIR_AGENTS && slot < 0; i++)
		if (!alive(dir->agents[i].owner))
			slot = i;
	if (slot >= 0) {
		dir->agents[slot].owner = dir_me;
		dir->agents[slot].gsi_port = gsi_port;
	}
	dir_unlock();
	return slot >= 0 ? 0 : -ENOSPC;
}

bool cm_dir_agent_alive(uint16_t gsi_port)
{
	bool ok = false;

	if (!dir_lock())
		return true; /* cannot tell: let the protocol timers decide */
	for (int i = 0; i < DIR_AGENTS; i++) {
		struct dir_agent *a = &dir->agents[i];

		if (a->owner && a->gsi_port == gsi_port) {
			ok = alive(a->owner);
			break;
		}
	}
	dir_unlock();
	return ok;
}
