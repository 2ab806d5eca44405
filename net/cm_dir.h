/* net/cm_dir.h: the layout of the host-wide CM directory, a small file in
 * shared memory (/dev/shm/softrnic-cm-v1).  librdmacm's cm/directory.c
 * writes it; the verbs engine that owns the RoCE port reads it
 * (transport/gsi_forward.c) to hand a MAD from the network to the CM agent
 * it belongs to.  Both libraries share this one description of the bytes,
 * guarded by flock() on the file (released by the kernel if a holder dies).
 *
 * Entries carry an owner word, pid << 32 | low 32 bits of the process start
 * time (so a recycled pid is not mistaken for the owner); entries of dead
 * processes count as free.
 */
#ifndef NET_CM_DIR_H
#define NET_CM_DIR_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

enum { NET_CMDIR_BINDS = 4096, NET_CMDIR_AGENTS = 1024 };
#define NET_CMDIR_PATH "/dev/shm/softrnic-cm-v1"

/* A local communication id names its agent: the agent's slot in the
 * table below sits in the top bits, so a MAD from the network that
 * carries our comm id (REP, RTU, REJ, MRA, DREQ, DREP, SIDR_REP) finds
 * its process without any per-connection entry. */
enum { NET_CMDIR_COMM_ID_SHIFT = 22 };  /* 10 bits of slot, 22 random */
_Static_assert(NET_CMDIR_AGENTS <= 1u << (32 - NET_CMDIR_COMM_ID_SHIFT),
	       "every agent slot fits in the top bits of a comm id");

struct net_cmdir_bind {
	uint64_t owner;              /* 0 = free */
	uint16_t ps, port;           /* port space code, port (host order) */
	uint8_t ip[4];               /* 0.0.0.0 = wildcard */
	uint8_t listening, reuse;
	uint16_t gsi_port;           /* owner's CM agent, when listening */
};

struct net_cmdir_agent {
	uint64_t owner;
	uint16_t gsi_port;           /* the agent's UDP port (host order) */
};

struct net_cmdir {
	struct net_cmdir_bind binds[NET_CMDIR_BINDS];
	struct net_cmdir_agent agents[NET_CMDIR_AGENTS];
};

/* Start time of pid (field 22 of /proc/pid/stat), 0 if gone or a zombie. */
static inline uint64_t net_cmdir_start_time(pid_t pid)
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

static inline uint64_t net_cmdir_owner_of(pid_t pid)
{
	uint64_t st = net_cmdir_start_time(pid);

	return (uint64_t)(uint32_t)pid << 32 | (uint32_t)st;
}

/* Is owner a live process's word?  (me: the caller's own word.) */
static inline bool net_cmdir_owner_alive(uint64_t owner, uint64_t me)
{
	if (!owner)
		return false;
	if (owner == me)
		return true;
	if ((uint32_t)owner == 0)
		return false; /* no start time: not a live process's word */
	return net_cmdir_owner_of((pid_t)(owner >> 32)) == owner;
}

#endif
