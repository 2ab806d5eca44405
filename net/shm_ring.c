/* net/shm_ring: shared-memory inboxes between engines on one host (see
 * shm_ring.h).
 *
 * Layout of /dev/shm/softrnic-<dev>-inbox-<port> (sparse: only pages of
 * lanes in use cost memory):
 *   [0, 4 KiB)        header: magic (written last), geometry, owner word
 *                     (pid << 32 | start time, like net/registry.c), the
 *                     sleeping flag and the bitmap of claimed lanes, each
 *                     on its own cache line;
 *   [4 KiB, 16 KiB)   NET_SHM_LANES lane words: owner, head, tail, each on
 *                     its own cache line;
 *   [16 KiB, end)     NET_SHM_LANES x NET_SHM_SLOTS slots of
 *                     NET_SHM_SLOT_BYTES: a 64-byte header (length, the
 *                     sender's family, port and address, the address it
 *                     sent to) and the packet.
 *
 * Lanes.  A producer process claims a lane by compare-and-swap of its owner
 * word (free = 0, or a dead process's word), sets its bit in the active
 * bitmap and from then on is the lane's only producer: its threads take a
 * process-local mutex.  The owner of the inbox is the only consumer (the
 * engine serialises it with rx_lock).  So each lane is a single-producer
 * single-consumer ring of free-running 32-bit counters: the producer fills
 * slot head % SLOTS and publishes head + 1 with a release store; the
 * consumer reads head with an acquire load, processes the slot in place
 * and gives it back with a release store of tail.  No lock is shared
 * between processes, and a producer that dies mid-write has published
 * nothing: its lane stays consistent and a later process reclaims it.
 *
 * Everything in the file is hostile input.  Each side keeps its own copy
 * of the counter it owns (the consumer's tails, the producer's head) and
 * only trusts the other one as far as: head - tail <= SLOTS (else the
 * consumer discards the lane's content, the producer sees it as full),
 * slot index masked, length <= NET_SHM_PKT_MAX, family IPv4 or IPv6.  The
 * packet itself then goes through rx_one's checks like a datagram.
 *
 * Waking the consumer.  The owner's engine thread, before blocking in
 * epoll_wait with nothing else due to wake it, raises the sleeping flag,
 * issues a full fence and checks every lane again (so a packet published
 * just before is seen); after waking it lowers the flag.  A producer,
 * after publishing, issues a full fence and reads the flag: the two fences
 * guarantee that at least one side sees the other's store.  If the flag is
 * up the producer takes it down with an exchange and, only if it was the
 * one to do so, sends the owner a zero-length UDP datagram (the doorbell)
 * on its socket.  The engine treats a zero-length datagram as a wake-up
 * only (see transport/engine_owner.c for how an application thread that reads
 * the doorbell itself passes it on).
 *
 * Inbox files are created 0600: only processes of the same user share the
 * fast path; others fall back to UDP.  A stale inbox (its owner is dead)
 * is unlinked and created anew; senders that still map the old one notice
 * on their next path resolution (inode changed or owner dead).  Known
 * limit: a process of the same user that truncates the file makes the
 * next access fault (SIGBUS); a memfd sealed with F_SEAL_SHRINK, found
 * through /proc/PID/fd, would close that.
 *
 * A process that fork()s: the child drops the parent's lanes from its
 * cache and claims its own on its next path resolution.
 */
#include "net/shm_ring.h"
#include "net/clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "net/proc.h"
#include "net/shm_ring_layout.h"
#include "net/shm_sweep.h"

struct shm_map {
	uint8_t *base;
	struct shm_head *h;
	struct shm_lane *lanes;
};

static struct shm_slot *slot_at(const struct shm_map *m, unsigned lane, uint32_t idx)
{
	size_t i = (size_t)(lane % NET_SHM_LANES) * NET_SHM_SLOTS + (idx & (NET_SHM_SLOTS - 1));

	return (struct shm_slot *)(m->base + SHM_SLOTS_OFF + i * NET_SHM_SLOT_BYTES);
}

static void map_set(struct shm_map *m, void *base)
{
	m->base = base;
	m->h = base;
	m->lanes = (struct shm_lane *)((uint8_t *)base + SHM_HEAD_BYTES);
}

/* ---- process identity (owner words) -------------------------------------- */

static uint64_t me_word(void)
{
	static _Atomic uint64_t cached;
	uint64_t w = atomic_load(&cached);

	if (w && (pid_t)(w >> 32) == getpid())
		return w;
	w = net_proc_word(getpid());
	atomic_store(&cached, w);
	return w;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

void net_shm_inbox_path(char *out, size_t n, const char *dev, uint16_t port)
{
	snprintf(out, n, "/dev/shm/softrnic-%s-inbox-%u", dev, (unsigned)port);
}

/* ---- the owner's side ---------------------------------------------------- */

struct net_shm_inbox {
	struct shm_map m;
	char path[160];
	uint16_t port;
	unsigned next_lane;                  /* round robin start */
	uint64_t bad;
	uint32_t tail[NET_SHM_LANES];        /* ours; the file's copy is for producers */
};

/* A file at path whose owner is alive (or unreadable: leave it alone). */
static bool inbox_in_use(const char *path)
{
	return net_shm_file_owned(path, offsetof(struct shm_head, owner));
}

/* Inboxes of processes that exited without closing their device stay in
 * /dev/shm; each costs the pages its producers touched. */
static void sweep_stale(const char *dev)
{
	char prefix[96];

	snprintf(prefix, sizeof(prefix), "softrnic-%s-inbox-", dev);
	net_shm_sweep(prefix, offsetof(struct shm_head, owner));
}

struct net_shm_inbox *net_shm_inbox_create(const char *dev, uint16_t port)
{
	struct net_shm_inbox *in = calloc(1, sizeof(*in));
	void *base;
	int fd = -1;

	if (!in)
		return NULL;
	net_shm_inbox_path(in->path, sizeof(in->path), dev, port);
	in->port = port;
	sweep_stale(dev);
	for (int attempt = 0; attempt < 3 && fd < 0; attempt++) {
		fd = open(in->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0 || errno != EEXIST)
			break;
		if (inbox_in_use(in->path)) {
			free(in);
			errno = EBUSY;
			return NULL;
		}
		unlink(in->path);   /* stale: its owner is dead */
	}
	if (fd < 0)
		goto fail;
	if (ftruncate(fd, (off_t)SHM_BYTES) < 0) {
		close(fd);
		unlink(in->path);
		goto fail;
	}
	base = mmap(NULL, SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED) {
		unlink(in->path);
		goto fail;
	}
	map_set(&in->m, base);
	in->m.h->version = SHM_VERSION;
	in->m.h->lanes = NET_SHM_LANES;
	in->m.h->slots = NET_SHM_SLOTS;
	in->m.h->slot_bytes = NET_SHM_SLOT_BYTES;
	atomic_store(&in->m.h->owner, me_word());
	atomic_store_explicit(&in->m.h->magic, SHM_MAGIC, memory_order_release);
	return in;
fail:
	{
		int e = errno;

		free(in);
		errno = e;
	}
	return NULL;
}

void net_shm_inbox_destroy(struct net_shm_inbox *in)
{
	if (!in)
		return;
	/* only our own file: a successor may already have replaced it */
	{
		struct shm_head h;
		int fd = open(in->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

		if (fd >= 0) {
			if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
			    h.owner == atomic_load(&in->m.h->owner))
				unlink(in->path);
			close(fd);
		}
	}
	atomic_store(&in->m.h->owner, 0);
	munmap(in->m.base, SHM_BYTES);
	free(in);
}

int net_shm_inbox_drain(struct net_shm_inbox *in, int max, net_shm_rx_fn fn, void *arg)
{
	uint64_t act = atomic_load_explicit(&in->m.h->active, memory_order_acquire);
	unsigned start = in->next_lane;
	int done = 0;

	if (!act)
		return 0;
	in->next_lane = (start + 1) % NET_SHM_LANES;
	for (unsigned k = 0; k < NET_SHM_LANES && done < max; k++) {
		unsigned l = (start + k) % NET_SHM_LANES;
		struct shm_lane *lane = &in->m.lanes[l];
		uint32_t head, tail = in->tail[l];

		if (!(act >> l & 1))
			continue;
		head = atomic_load_explicit(&lane->head, memory_order_acquire);
		if (head == tail)
			continue;
		if (head - tail > NET_SHM_SLOTS) {
			/* nonsense head: drop what is there, resynchronise */
			in->bad++;
			in->tail[l] = head;
			atomic_store_explicit(&lane->tail, head, memory_order_release);
			continue;
		}
		while (tail != head && done < max) {
			struct shm_slot *s = slot_at(&in->m, l, tail);
			uint32_t len = atomic_load_explicit(&s->len, memory_order_relaxed);
			uint16_t fam = s->family;
			struct net_udp_msg msg;

			if (len <= NET_SHM_PKT_MAX && (fam == AF_INET || fam == AF_INET6)) {
				memset(&msg, 0, sizeof(msg));
				msg.buf = s->data;
				msg.cap = NET_SHM_PKT_MAX;
				msg.len = len;
				msg.from.family = fam;
				msg.from.port = s->port;
				memcpy(msg.from.ip, s->from_ip, 16);
				msg.to.family = fam;
				msg.to.port = s->to_port ? s->to_port : in->port;
				memcpy(msg.to.ip, s->to_ip, 16);
				fn(arg, &msg);
				done++;
			} else {
				in->bad++;
			}
			tail++;
			in->tail[l] = tail;
			atomic_store_explicit(&lane->tail, tail, memory_order_release);
		}
	}
	return done;
}

bool net_shm_inbox_pending(struct net_shm_inbox *in)
{
	uint64_t act = atomic_load_explicit(&in->m.h->active, memory_order_acquire);

	for (unsigned l = 0; act && l < NET_SHM_LANES; l++)
		if ((act >> l & 1) &&
		    atomic_load_explicit(&in->m.lanes[l].head, memory_order_acquire) != in->tail[l])
			return true;
	return false;
}

void net_shm_inbox_set_sleeping(struct net_shm_inbox *in, bool on)
{
	atomic_store_explicit(&in->m.h->sleeping, on ? 1 : 0, memory_order_relaxed);
	if (on)
		atomic_thread_fence(memory_order_seq_cst);
}

uint64_t net_shm_inbox_bad(const struct net_shm_inbox *in)
{
	return in->bad;
}

const void *net_shm_inbox_base(const struct net_shm_inbox *in)
{
	return in->m.base;
}

/* ---- the producers' side ------------------------------------------------- */

struct net_shm_peer {
	struct net_shm_peer *next;
	struct shm_map m;
	char path[160];
	dev_t st_dev;
	ino_t st_ino;
	uint64_t owner;                      /* the inbox owner's word at open */
	pthread_mutex_t lock;                /* our threads on our lane */
	int lane;
	uint32_t head;                       /* ours; the file's copy is for the consumer */
};

static pthread_mutex_t peers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct net_shm_peer *peers;
static pid_t peers_pid;

static bool header_ok(const struct shm_head *h)
{
	return atomic_load_explicit(&((struct shm_head *)h)->magic, memory_order_acquire) ==
		       SHM_MAGIC &&
	       h->version == SHM_VERSION && h->lanes == NET_SHM_LANES &&
	       h->slots == NET_SHM_SLOTS && h->slot_bytes == NET_SHM_SLOT_BYTES;
}

static int claim_lane(struct net_shm_peer *p)
{
	uint64_t me = me_word();

	for (int l = 0; l < NET_SHM_LANES; l++) {
		struct shm_lane *lane = &p->m.lanes[l];
		uint64_t cur = atomic_load(&lane->owner);

		/* ours already: another (stale) view of this inbox in this
		 * process writes there; two producers would break SPSC */
		if (cur == me || (cur != 0 && net_proc_word_alive(cur)))
			continue;
		if (!atomic_compare_exchange_strong(&lane->owner, &cur, me))
			continue;
		/* continue where the previous producer stopped: the consumer
		 * may still have its packets to take */
		p->head = atomic_load_explicit(&lane->head, memory_order_acquire);
		atomic_fetch_or(&p->m.h->active, 1ull << l);
		return l;
	}
	return -1;
}

static struct net_shm_peer *peer_open(const char *path)
{
	struct net_shm_peer *p = calloc(1, sizeof(*p));
	struct stat st;
	void *base;
	int fd;

	if (!p)
		return NULL;
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		goto fail;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size < SHM_BYTES) {
		close(fd);
		errno = EINVAL;
		goto fail;
	}
	base = mmap(NULL, SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED)
		goto fail;
	map_set(&p->m, base);
	p->owner = atomic_load(&p->m.h->owner);
	if (!header_ok(p->m.h) || !net_proc_word_alive(p->owner)) {
		munmap(base, SHM_BYTES);
		errno = ENOENT;
		goto fail;
	}
	p->lane = claim_lane(p);
	if (p->lane < 0) {
		munmap(base, SHM_BYTES);
		errno = ENOSPC;
		goto fail;
	}
	snprintf(p->path, sizeof(p->path), "%s", path);
	p->st_dev = st.st_dev;
	p->st_ino = st.st_ino;
	pthread_mutex_init(&p->lock, NULL);
	return p;
fail:
	{
		int e = errno;

		free(p);
		errno = e;
	}
	return NULL;
}

struct net_shm_peer *net_shm_peer_get(const char *dev, uint16_t port)
{
	struct net_shm_peer *p;
	char path[160];
	struct stat st;

	net_shm_inbox_path(path, sizeof(path), dev, port);
	if (stat(path, &st) < 0)
		return NULL;
	pthread_mutex_lock(&peers_lock);
	if (peers_pid != getpid()) {
		/* fork()ed: the lanes in the list are the parent's (the
		 * mappings are left alone, the parent's QPs may use them) */
		peers = NULL;
		peers_pid = getpid();
	}
	for (p = peers; p; p = p->next)
		if (!strcmp(p->path, path) && p->st_dev == st.st_dev && p->st_ino == st.st_ino &&
		    atomic_load(&p->m.h->owner) == p->owner)
			break;
	if (p && !net_proc_word_alive(p->owner))
		p = NULL;   /* the owner died; a successor will make a new file */
	if (!p) {
		/* Entries of replaced inboxes stay listed (never unmapped):
		 * QPs resolved earlier may still point at them. */
		p = peer_open(path);
		if (p) {
			p->next = peers;
			peers = p;
		}
	}
	pthread_mutex_unlock(&peers_lock);
	return p;
}

int net_shm_peer_lane(const struct net_shm_peer *p)
{
	return p->lane;
}

int net_shm_send(struct net_shm_peer *p, const struct net_addr *from,
		 const uint8_t to_ip[16], const struct iovec *iov, int iovcnt,
		 uint64_t spin_ns)
{
	return net_shm_send_to(p, from, to_ip, 0, iov, iovcnt, spin_ns);
}

int net_shm_send_to(struct net_shm_peer *p, const struct net_addr *from,
		    const uint8_t to_ip[16], uint16_t to_port,
		    const struct iovec *iov, int iovcnt, uint64_t spin_ns)
{
	struct shm_lane *lane = &p->m.lanes[p->lane];
	struct shm_slot *s;
	size_t len = 0;
	uint32_t head, tail;
	uint8_t *d;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len > NET_SHM_PKT_MAX)
		return -EMSGSIZE;
	pthread_mutex_lock(&p->lock);
	head = p->head;
	tail = atomic_load_explicit(&lane->tail, memory_order_acquire);
	if (head - tail >= NET_SHM_SLOTS) {
		uint64_t t0 = net_now_ns();
		unsigned spins = 0;

		/* full (or a nonsense tail): wait briefly for the consumer */
		for (;;) {
			if (++spins < 64)
				cpu_relax();
			else
				sched_yield();
			tail = atomic_load_explicit(&lane->tail, memory_order_acquire);
			if (head - tail < NET_SHM_SLOTS)
				break;
			/* (sched_yield may take a whole time slice) */
			if ((spins >= 64 || spins % 16 == 0) && net_now_ns() - t0 > spin_ns) {
				pthread_mutex_unlock(&p->lock);
				return -EAGAIN;
			}
		}
	}
	s = slot_at(&p->m, (unsigned)p->lane, head);
	s->family = (uint16_t)from->family;
	s->port = from->port;
	memcpy(s->from_ip, from->ip, 16);
	memcpy(s->to_ip, to_ip, 16);
	s->to_port = to_port;
	d = s->data;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len)
			memcpy(d, iov[i].iov_base, iov[i].iov_len);
		d += iov[i].iov_len;
	}
	atomic_store_explicit(&s->len, (uint32_t)len, memory_order_relaxed);
	p->head = head + 1;
	atomic_store_explicit(&lane->head, head + 1, memory_order_release);
	pthread_mutex_unlock(&p->lock);

	/* pairs with the fence in net_shm_inbox_set_sleeping */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&p->m.h->sleeping, memory_order_relaxed) &&
	    atomic_exchange(&p->m.h->sleeping, 0))
		return 1;
	return 0;
}
