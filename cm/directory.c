/* The host-wide CM directory: which process holds which rdma_cm port and
 * where its CM agent receives MADs, so that a listener in one process
 * serves connections from any process on the host (there is no kernel
 * rdma_cm to demultiplex for us).
 *
 * One small shared-memory file whose layout net/cm_dir.h describes (the
 * verbs engine that owns the RoCE port reads it too, to forward MADs from
 * the network).  Linear scans: fine for the few thousand ids a host has.
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
#include "net/cm_dir.h"

static pthread_mutex_t dir_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct net_cmdir *dir;
static int dir_fd = -1;
static uint64_t dir_me;
static uint32_t dir_ns;      /* our network namespace (net_cmdir_netns) */

static uint64_t owner_of(pid_t pid)
{
	return net_cmdir_owner_of(pid);
}

static bool alive(uint64_t owner)
{
	return net_cmdir_owner_alive(owner, dir_me);
}

/* Map the file and take the lock; false on failure (errno). */
static bool dir_lock(void)
{
	pthread_mutex_lock(&dir_mutex);
	if (!dir) {
		int fd = open(NET_CMDIR_PATH, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		void *m;

		if (fd < 0 || ftruncate(fd, sizeof(struct net_cmdir)) < 0) {
			if (fd >= 0)
				close(fd);
			pthread_mutex_unlock(&dir_mutex);
			return false;
		}
		m = mmap(NULL, sizeof(struct net_cmdir), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			close(fd);
			pthread_mutex_unlock(&dir_mutex);
			return false;
		}
		dir = m;
		dir_fd = fd;
		dir_me = owner_of(getpid());
		dir_ns = net_cmdir_netns();
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

/* Two binds clash on a port when their addresses are equal or either is
 * a wildcard, unless both take their own family only and the families
 * differ (Linux's rdma_cm port check). */
static bool ip_overlap(const uint8_t a[16], bool a_only, const uint8_t b[16], bool b_only)
{
	if (a_only && b_only && net_cmdir_ip_v4(a) != net_cmdir_ip_v4(b))
		return false;
	return !memcmp(a, b, 16) || net_cmdir_ip_any(a) || net_cmdir_ip_any(b);
}

static bool port_taken(uint16_t ps, const uint8_t ip[16], bool afonly, uint16_t port,
		       bool reuse)
{
	for (int i = 0; i < NET_CMDIR_BINDS; i++) {
		struct net_cmdir_bind *b = &dir->binds[i];

		if (!b->owner || b->ps != ps || b->port != port ||
		    !ip_overlap(b->ip, b->afonly, ip, afonly))
			continue;
		if (!alive(b->owner)) {
			memset(b, 0, sizeof(*b));
			continue;
		}
		if (!net_cmdir_same_ns(b->netns, dir_ns))
			continue; /* the same port in another namespace */
		/* REUSEADDR on both sides lets non-listening ids share. */
		if (reuse && b->reuse && !b->listening)
			continue;
		return true;
	}
	return false;
}

int cm_dir_bind(uint16_t ps, const uint8_t ip[16], bool afonly, uint16_t *port, bool reuse)
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

			if (!port_taken(ps, ip, afonly, p, false))
				*port = p;
		}
		if (*port == 0) {
			ret = -EADDRINUSE;
			goto out;
		}
	} else if (port_taken(ps, ip, afonly, *port, reuse)) {
		ret = -EADDRINUSE;
		goto out;
	}
	for (int i = 0; i < NET_CMDIR_BINDS; i++) {
		struct net_cmdir_bind *b = &dir->binds[i];

		if (!b->owner || !alive(b->owner)) {
			slot = i;
			break;
		}
	}
	if (slot < 0) {
		ret = -ENOSPC;
		goto out;
	}
	dir->binds[slot] = (struct net_cmdir_bind){ .owner = dir_me, .ps = ps, .port = *port,
					      .reuse = reuse, .netns = dir_ns,
					      .afonly = afonly };
	memcpy(dir->binds[slot].ip, ip, 16);
	ret = slot;
out:
	dir_unlock();
	return ret;
}

void cm_dir_unbind(int slot)
{
	if (slot < 0 || slot >= NET_CMDIR_BINDS || !dir_lock())
		return;
	if (dir->binds[slot].owner == dir_me)
		memset(&dir->binds[slot], 0, sizeof(dir->binds[slot]));
	dir_unlock();
}

int cm_dir_listen(int slot, uint16_t gsi_port)
{
	struct net_cmdir_bind *b;
	int ret = 0;

	if (slot < 0 || slot >= NET_CMDIR_BINDS)
		return -EINVAL;
	if (!dir_lock())
		return -errno;
	b = &dir->binds[slot];
	/* Another live listener on an overlapping address (e.g. a REUSEADDR
	 * sharer) makes this listen fail, as in Linux. */
	for (int i = 0; i < NET_CMDIR_BINDS; i++) {
		struct net_cmdir_bind *o = &dir->binds[i];

		if (i != slot && o->owner && o->listening && o->ps == b->ps &&
		    o->port == b->port && ip_overlap(o->ip, o->afonly, b->ip, b->afonly) &&
		    net_cmdir_same_ns(o->netns, dir_ns) && alive(o->owner)) {
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

uint16_t cm_dir_lookup(uint16_t ps, const uint8_t ip[16], uint16_t port)
{
	uint16_t found = 0;

	if (!dir_lock())
		return 0;
	for (int i = 0; i < NET_CMDIR_BINDS; i++) {
		struct net_cmdir_bind *b = &dir->binds[i];

		if (!b->owner || !b->listening || b->ps != ps || b->port != port ||
		    !net_cmdir_ip_takes(b->ip, b->afonly, ip) || !net_cmdir_same_ns(b->netns, dir_ns) ||
		    !alive(b->owner))
			continue;
		found = b->gsi_port;
		if (!memcmp(b->ip, ip, 16))
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
	for (int i = 0; i < NET_CMDIR_AGENTS && slot < 0; i++)
		if (!dir->agents[i].owner ||
		    (dir->agents[i].gsi_port == gsi_port &&
		     (dir->agents[i].owner == dir_me || !alive(dir->agents[i].owner))))
			slot = i;
	for (int i = 0; i < NET_CMDIR_AGENTS && slot < 0; i++)
		if (!alive(dir->agents[i].owner))
			slot = i;
	if (slot >= 0) {
		dir->agents[slot].owner = dir_me;
		dir->agents[slot].gsi_port = gsi_port;
		dir->agents[slot].netns = dir_ns;
	}
	dir_unlock();
	return slot >= 0 ? 0 : -ENOSPC;
}

int cm_dir_agent_slot(uint16_t gsi_port)
{
	int slot = -ENOENT;

	if (!dir_lock())
		return -errno;
	for (int i = 0; i < NET_CMDIR_AGENTS && slot < 0; i++)
		if (dir->agents[i].owner == dir_me && dir->agents[i].gsi_port == gsi_port)
			slot = i;
	dir_unlock();
	return slot;
}

bool cm_dir_agent_alive(uint16_t gsi_port)
{
	bool ok = false;

	if (!dir_lock())
		return true; /* cannot tell: let the protocol timers decide */
	for (int i = 0; i < NET_CMDIR_AGENTS; i++) {
		struct net_cmdir_agent *a = &dir->agents[i];

		if (a->owner && a->gsi_port == gsi_port && net_cmdir_same_ns(a->netns, dir_ns)) {
			ok = alive(a->owner);
			break;
		}
	}
	dir_unlock();
	return ok;
}
