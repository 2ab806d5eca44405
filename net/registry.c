/* net/registry: cross-process QPN table in shared memory (see registry.h).
 *
 * A slot is claimed with one 64-bit compare-and-swap of its owner word:
 * pid in the high 32 bits, low 32 bits of the process start time (field 22
 * of /proc/PID/stat, clock ticks since boot) below.  The start time tells a
 * recycled pid from the process that claimed the slot.  Word 0 = free.
 * The file is sparse: only pages with used slots cost memory.
 *
 * Each slot also carries the owner's net_reg_qpinfo under a seqlock (the
 * pattern of verbs/mr_dir.h): the owner makes seq odd, rewrites the info,
 * makes it even again; a reader copies between two reads of an even seq.
 * seq also serves as the info's generation: it moves on every publish, on
 * claim and on free, so a peer revalidates its cached copy with one load.
 */
#include "net/registry.h"

#include <assert.h>
#include <infiniband/verbs.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/proc.h"

struct net_reg_slot {
	_Atomic uint64_t owner;      /* pid << 32 | start time low 32; 0 = free */
	_Atomic uint32_t where;      /* udp port << 16 | family; 0 = not yet set */
	_Atomic uint32_t seq;        /* info seqlock: odd while rewritten */
	struct net_reg_qpinfo info;  /* written by the owner only */
	uint8_t pad[128 - 16 - sizeof(struct net_reg_qpinfo)];
};

/* Two cache lines per slot: a peer polling one QP's generation does not
 * share a line with its neighbours' writers. */
static_assert(sizeof(struct net_reg_slot) == 128, "registry slot is two cache lines");

struct net_registry {
	struct net_reg_slot *slots;  /* NET_REG_SLOTS entries, shared */
	uint64_t me;                 /* our owner word */
	_Atomic uint32_t next;       /* where our next claim looks first; 0: anywhere */
};

#define REG_BYTES (sizeof(struct net_reg_slot) * (size_t)NET_REG_SLOTS)

static uint64_t owner_word(pid_t pid, uint64_t start)
{
	return (uint64_t)(uint32_t)pid << 32 | (uint32_t)start;
}

static bool owner_alive(uint64_t word)
{
	pid_t pid = (pid_t)(word >> 32);

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return false;
	/* EPERM (other user) or alive: compare start times. */
	return (uint32_t)net_proc_start_time(pid) == (uint32_t)word;
}

struct net_registry *net_registry_open(const char *devname)
{
	struct net_registry *reg;
	char path[128];
	struct stat st;
	void *map;
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/softrnic-%s-v3", devname);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		return NULL;
	/* Two processes may race here: both extend to the same size. */
	if (fstat(fd, &st) < 0 ||
	    ((size_t)st.st_size < REG_BYTES && ftruncate(fd, REG_BYTES) < 0)) {
		int e = errno;

		close(fd);
		errno = e;
		return NULL;
	}
	map = mmap(NULL, REG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return NULL;
	reg = calloc(1, sizeof(*reg));
	if (!reg) {
		munmap(map, REG_BYTES);
		errno = ENOMEM;
		return NULL;
	}
	reg->slots = map;
	reg->me = owner_word(getpid(), net_proc_start_time(getpid()));
	return reg;
}

void net_registry_close(struct net_registry *reg)
{
	if (!reg)
		return;
	munmap(reg->slots, REG_BYTES);
	free(reg);
}

/* Seqlock writer: the owner of the slot (or its claimer) only. */
static void write_info(struct net_reg_slot *s, const struct net_reg_qpinfo *info)
{
	uint32_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);

	atomic_store_explicit(&s->seq, q | 1, memory_order_relaxed);
	/* pairs with the reader's acquire fence: odd is seen before any
	 * new field */
	atomic_thread_fence(memory_order_release);
	if (info)
		memcpy(&s->info, info, sizeof(s->info));
	else
		memset(&s->info, 0, sizeof(s->info));
	/* the fields before the even value (pairs with the reader's
	 * acquire load of seq) */
	atomic_store_explicit(&s->seq, (q | 1) + 1, memory_order_release);
}

static bool try_claim(struct net_registry *reg, uint32_t i, uint32_t where)
{
	struct net_reg_slot *s = &reg->slots[i];
	uint64_t cur = atomic_load(&s->owner);

	if (cur != 0 && (cur == reg->me || owner_alive(cur)))
		return false;
	if (!atomic_compare_exchange_strong(&s->owner, &cur, reg->me))
		return false;
	/* a dead owner's info must not pass for ours */
	write_info(s, NULL);
	/* Readers treat where == 0 as "not ready"; set after the claim. */
	atomic_store_explicit(&s->where, where, memory_order_release);
	return true;
}

int net_registry_alloc(struct net_registry *reg, uint16_t port, int family,
		       uint32_t *qpn)
{
	const uint32_t span = NET_REG_SLOTS - NET_REG_FIRST_QPN;
	uint32_t where = (uint32_t)port << 16 | (uint16_t)family;
	uint32_t start;

	/* A fork()ed child inherits the parent's owner word: refresh it. */
	if ((pid_t)(reg->me >> 32) != getpid())
		reg->me = owner_word(getpid(), net_proc_start_time(getpid()));
	/* An engine's QPNs follow each other from a random start: few
	 * spans for the port-4791 program (net/steer.h), and a freed QPN is
	 * not handed out again until the engine has gone round the table. */
	start = atomic_load_explicit(&reg->next, memory_order_relaxed);
	if (start) {
		start -= NET_REG_FIRST_QPN;
	} else {
		if (getrandom(&start, sizeof(start), GRND_NONBLOCK) != sizeof(start))
			start = (uint32_t)time(NULL) ^ (uint32_t)getpid() * 2654435761u;
		start %= span;
	}
	for (uint32_t k = 0; k < span; k++) {
		uint32_t i = NET_REG_FIRST_QPN + (start + k) % span;

		if (try_claim(reg, i, where)) {
			*qpn = i;
			atomic_store_explicit(&reg->next, i + 1 < NET_REG_SLOTS ? i + 1 : NET_REG_FIRST_QPN,
					      memory_order_relaxed);
			return 0;
		}
	}
	return -ENOSPC;
}

void net_registry_free(struct net_registry *reg, uint32_t qpn)
{
	struct net_reg_slot *s;
	uint64_t me = reg->me;

	if (qpn < NET_REG_FIRST_QPN || qpn >= NET_REG_SLOTS)
		return;
	s = &reg->slots[qpn];
	if (atomic_load(&s->owner) != me)
		return;
	write_info(s, NULL);
	atomic_store(&s->where, 0);
	atomic_compare_exchange_strong(&s->owner, &me, 0);
}

int net_registry_lookup(struct net_registry *reg, uint32_t qpn,
			uint16_t *port, int *family)
{
	uint32_t where;

	if (qpn < NET_REG_FIRST_QPN || qpn >= NET_REG_SLOTS)
		return -ENOENT;
	if (atomic_load(&reg->slots[qpn].owner) == 0)
		return -ENOENT;
	where = atomic_load_explicit(&reg->slots[qpn].where, memory_order_acquire);
	if (where == 0)
		return -ENOENT;
	*port = (uint16_t)(where >> 16);
	*family = (int)(where & 0xffff);
	return 0;
}

int net_registry_owner(struct net_registry *reg, uint32_t qpn)
{
	if (qpn >= NET_REG_SLOTS)
		return 0;
	return (int)(atomic_load(&reg->slots[qpn].owner) >> 32);
}

int net_registry_live_owner(struct net_registry *reg, uint32_t qpn)
{
	uint64_t w;

	if (qpn >= NET_REG_SLOTS)
		return 0;
	w = atomic_load(&reg->slots[qpn].owner);
	return w && owner_alive(w) ? (int)(w >> 32) : 0;
}

int net_registry_local_peer(struct net_registry *reg, uint32_t qpn,
			    const struct net_reg_qpinfo *in, struct net_reg_qpinfo *peer)
{
	if (in->type == IBV_QPT_UD || !in->dqpn ||
	    (in->state != IBV_QPS_RTR && in->state != IBV_QPS_RTS && in->state != IBV_QPS_SQD))
		return -ENOENT;
	if (!net_registry_live_owner(reg, in->dqpn) ||
	    net_registry_qpinfo(reg, in->dqpn, peer, NULL) || peer->dqpn != qpn ||
	    peer->type != (in->type == IBV_QPT_XRC_SEND   ? IBV_QPT_XRC_RECV /* XRC: */
			   : in->type == IBV_QPT_XRC_RECV ? IBV_QPT_XRC_SEND /* the other */
							  : in->type))
		return -ENOENT;
	return 0;
}

int net_registry_publish(struct net_registry *reg, uint32_t qpn,
			 const struct net_reg_qpinfo *info)
{
	struct net_reg_slot *s;

	if (qpn < NET_REG_FIRST_QPN || qpn >= NET_REG_SLOTS)
		return -ENOENT;
	s = &reg->slots[qpn];
	if (atomic_load(&s->owner) != reg->me)
		return -ENOENT;
	write_info(s, info);
	return 0;
}

int net_registry_qpinfo(struct net_registry *reg, uint32_t qpn,
			struct net_reg_qpinfo *info, uint32_t *seq)
{
	struct net_reg_slot *s;
	uint64_t owner;

	if (qpn < NET_REG_FIRST_QPN || qpn >= NET_REG_SLOTS)
		return -ENOENT;
	s = &reg->slots[qpn];
	/* bounded: a writer holds seq odd for a few stores only */
	for (int tries = 0; tries < 1000; tries++) {
		uint32_t q1 = atomic_load_explicit(&s->seq, memory_order_acquire), q2;

		if (q1 & 1)
			continue;
		owner = atomic_load_explicit(&s->owner, memory_order_relaxed);
		memcpy(info, &s->info, sizeof(*info));
		/* the copy before the re-read (pairs with the writer's
		 * release fence) */
		atomic_thread_fence(memory_order_acquire);
		q2 = atomic_load_explicit(&s->seq, memory_order_relaxed);
		if (q1 != q2)
			continue;
		if (owner == 0 || info->pid == 0 || (uint32_t)info->pid != (uint32_t)(owner >> 32))
			return -ENOENT;
		if (seq)
			*seq = q1;
		return 0;
	}
	return -EAGAIN;
}

const _Atomic uint32_t *net_registry_qpinfo_seq(struct net_registry *reg, uint32_t qpn)
{
	if (qpn < NET_REG_FIRST_QPN || qpn >= NET_REG_SLOTS)
		return NULL;
	return &reg->slots[qpn].seq;
}
