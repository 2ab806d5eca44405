/* net/cm_dir.h: the layout of the host-wide CM directory, a small file in
 * shared memory (/dev/shm/softrnic-cm-v1).  librdmacm's cm/directory.c
 * writes it; the verbs engine that owns the RoCE port reads it
 * (transport/gsi_forward.c) to hand a MAD from the network to the CM agent
 * it belongs to.  Both libraries share this one description of the bytes,
 * guarded by flock() on the file (released by the kernel if a holder dies).
 *
 * Entries carry an owner word, pid << 32 | low 32 bits of the process start
 * time (so a recycled pid is not mistaken for the owner); entries of dead
 * processes count as free.  They also carry the network namespace they were
 * made in: /dev/shm is shared by every namespace of the host, but an rdma_cm
 * port, a listener and an agent's UDP port exist in one namespace only, so
 * each process sees the entries of its own (0: unknown, seen by all).
 */
#ifndef NET_CM_DIR_H
#define NET_CM_DIR_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "net/proc.h"

enum { NET_CMDIR_BINDS = 4096, NET_CMDIR_AGENTS = 1024 };
/* v2: bind entries hold 16-byte addresses (IPv6; IPv4 as ::ffff:a.b.c.d) */
#define NET_CMDIR_PATH "/dev/shm/softrnic-cm-v2"

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
	uint8_t ip[16];              /* IPv6, or IPv4 as ::ffff:a.b.c.d;
	                              * :: / ::ffff:0.0.0.0 = wildcard */
	uint8_t listening, reuse;
	uint16_t gsi_port;           /* owner's CM agent, when listening */
	uint32_t netns;              /* net_cmdir_netns() of the owner */
	uint8_t afonly;              /* takes its own family only (an IPv4
	                              * bind always; IPv6: RDMA_OPTION_ID_AFONLY
	                              * or the bindv6only sysctl) */
	uint8_t reserved[3];
};

struct net_cmdir_agent {
	uint64_t owner;
	uint16_t gsi_port;           /* the agent's UDP port (host order) */
	uint32_t netns;              /* net_cmdir_netns() of the owner */
};

_Static_assert(sizeof(struct net_cmdir_bind) == 40, "bind entry layout");
_Static_assert(sizeof(struct net_cmdir_agent) == 16, "agent entry layout");

struct net_cmdir {
	struct net_cmdir_bind binds[NET_CMDIR_BINDS];
	struct net_cmdir_agent agents[NET_CMDIR_AGENTS];
};

static inline uint64_t net_cmdir_owner_of(pid_t pid)
{
	uint64_t st = net_proc_start_time(pid);

	return (uint64_t)(uint32_t)pid << 32 | (uint32_t)st;
}

/* This process's network namespace: the low 32 bits of its inode. */
static inline uint32_t net_cmdir_netns(void)
{
	struct stat st;

	return stat("/proc/self/ns/net", &st) == 0 ? (uint32_t)st.st_ino : 0;
}

/* Does an entry made in namespace ns belong to ours (me)? */
static inline bool net_cmdir_same_ns(uint32_t ns, uint32_t me)
{
	return !ns || !me || ns == me;
}

static const uint8_t net_cmdir_v4_prefix[12] = { [10] = 0xff, [11] = 0xff };

/* :: (IPv6 wildcard, which takes IPv4 too) or ::ffff:0.0.0.0 (IPv4's) */
static inline bool net_cmdir_ip_any(const uint8_t ip[16])
{
	static const uint8_t zero[16];

	return !memcmp(ip, zero, 16) ||
	       (!memcmp(ip, net_cmdir_v4_prefix, 12) && !memcmp(ip + 12, zero, 4));
}

static inline bool net_cmdir_ip_v4(const uint8_t ip[16])
{
	return !memcmp(ip, net_cmdir_v4_prefix, 12);
}

/* Does a listener bound to bound take a request for want?  Its address,
 * a wildcard of want's family, or the IPv6 wildcard unless afonly (then
 * it takes IPv4 too, as Linux's rdma_cm with bindv6only 0). */
static inline bool net_cmdir_ip_takes(const uint8_t bound[16], bool afonly,
				      const uint8_t want[16])
{
	if (!memcmp(bound, want, 16))
		return true;
	if (!net_cmdir_ip_any(bound))
		return false;
	return net_cmdir_ip_v4(bound) == net_cmdir_ip_v4(want) || !afonly;
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
