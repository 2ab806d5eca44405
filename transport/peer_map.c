/* transport/peer_map: same-host peers' memory (see peer_map.h).
 *
 * One list per process, under one mutex: peers are few (one per context
 * we talk to) and everything here runs once per peer or per MR, never per
 * operation.  Directory mappings live as long as the peer entry, memfd
 * mappings as long as their references, so the pointers the direct path
 * caches stay valid while it holds them.
 */
#include "transport/peer_map.h"
#include "net/life.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

enum { PEER_OLD_DIRS = 8 };

struct peer_memfd {
	struct peer_memfd *next;
	uint64_t ino;                /* memfd_ino of the directory entry */
	int memfd;                   /* the owner's fd number */
	int refs;                    /* direct-path MR caches holding it */
	void *base;                  /* whole memfd mapped here */
	uint64_t size;               /* bytes mapped */
};

struct peer {
	struct peer *next;
	int pid;
	uint32_t nonce;
	int refs;                    /* direct-path QP caches holding it */
	bool self;                   /* the peer is this process */
	bool vm_denied;              /* process_vm_* refused: don't retry */
	bool vm_ok;                  /* process_vm_* worked once */
	const _Atomic uint32_t *life; /* its life page's word; NULL: none */
	int pidfd;                   /* readable once pid exits; -1: none */
	int dirfd;                   /* MR directory file, kept to remap */
	struct srn_mrdir_entry *ent; /* directory entries (read-only) */
	void *dir;                   /* its mapping */
	size_t dir_len;
	uint32_t nent;               /* entries reachable in the mapping */
	/* Mappings replaced when the directory grew: pointers into them
	 * may still be cached, so they live as long as the peer. */
	void *old_dir[PEER_OLD_DIRS];
	size_t old_len[PEER_OLD_DIRS];
	int n_old;
	struct peer_memfd *maps;     /* list */
	/* its completion channels' pipes, opened for writing (peer_wake_fd):
	 * shared by every QP that completes into them */
	struct {
		int32_t pfd;         /* the fd number in the peer */
		uint64_t ino;        /* the pipe */
		int fd;              /* ours */
	} wake[PEER_WAKES];
	int n_wake;
};

static pthread_mutex_t peers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct peer *peers;
static int peers_pid;                /* process that built the list */

static void peer_free(struct peer *p)
{
	while (p->maps) {
		struct peer_memfd *m = p->maps;

		p->maps = m->next;
		munmap(m->base, m->size);
		free(m);
	}
	for (int i = 0; i < p->n_old; i++)
		munmap(p->old_dir[i], p->old_len[i]);
	if (p->dir)
		munmap(p->dir, p->dir_len);
	if (p->dirfd >= 0)
		close(p->dirfd);
	if (p->pidfd >= 0)
		close(p->pidfd);
	net_life_unmap(p->life);
	for (int i = 0; i < p->n_wake; i++)
		close(p->wake[i].fd);
	free(p);
}

/* Map (or remap, grown) the directory: 0 or -1.  peers_lock held. */
static int map_dir(struct peer *p)
{
	struct stat st;
	const struct srn_mrdir_hdr *h;
	uint64_t n;
	void *m;

	if (fstat(p->dirfd, &st) < 0 || (size_t)st.st_size < sizeof(struct srn_mrdir_hdr))
		return -1;
	if (p->dir && (size_t)st.st_size <= p->dir_len)
		return 0; /* not grown */
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, p->dirfd, 0);
	if (m == MAP_FAILED)
		return -1;
	h = m;
	if (h->magic != SRN_MRDIR_MAGIC || h->version != SRN_MRDIR_VERSION || h->pid != p->pid) {
		munmap(m, (size_t)st.st_size);
		return -1;
	}
	n = ((uint64_t)st.st_size - sizeof(*h)) / sizeof(struct srn_mrdir_entry);
	if (n > h->nslots)
		n = h->nslots;
	if (p->dir) {
		if (p->n_old == PEER_OLD_DIRS) {
			munmap(m, (size_t)st.st_size);
			return -1;
		}
		p->old_dir[p->n_old] = p->dir;
		p->old_len[p->n_old++] = p->dir_len;
	}
	p->dir = m;
	p->dir_len = (size_t)st.st_size;
	p->ent = (struct srn_mrdir_entry *)((char *)m + sizeof(*h));
	p->nent = (uint32_t)n;
	return 0;
}

static bool alive_locked(struct peer *p)
{
	struct pollfd pf;

	if (p->self)
		return true;
	if (p->life)
		return net_life_alive(p->life);
	if (p->pidfd >= 0) {
		pf.fd = p->pidfd;
		pf.events = POLLIN;
		pf.revents = 0;
		/* a pidfd turns readable when its process exits */
		return poll(&pf, 1, 0) == 0;
	}
	return kill(p->pid, 0) == 0 || errno == EPERM;
}

bool peer_alive(struct peer *p)
{
	return alive_locked(p);
}

const _Atomic uint32_t *peer_life(const struct peer *p)
{
	return p->life;
}

struct peer *peer_get(int pid, uint32_t nonce)
{
	struct peer *p;
	char path[96];

	pthread_mutex_lock(&peers_lock);
	if (peers_pid != getpid()) {
		/* A fork()ed child inherited the parent's list: its "self"
		 * is wrong and its references belong to the parent's QPs.
		 * Forget it (the inherited mappings stay, harmlessly). */
		peers = NULL;
		peers_pid = getpid();
	}
	for (p = peers; p; p = p->next)
		if (p->pid == pid && p->nonce == nonce)
			break;
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			goto out;
		p->pid = pid;
		p->nonce = nonce;
		p->self = pid == peers_pid;
		p->pidfd = -1;
		srn_mrdir_name(path, sizeof(path), pid, nonce);
		p->dirfd = open(path, O_RDONLY | O_CLOEXEC);
		if (p->dirfd < 0 || map_dir(p) < 0) {
			peer_free(p);
			p = NULL;
			goto out;
		}
		if (!p->self) {
			const struct srn_mrdir_hdr *h = p->dir;

			p->life = net_life_map(pid, h->life_fd, h->life_ino);
		}
#ifdef SYS_pidfd_open
		if (!p->self && !p->life)
			p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
#endif
		if (!alive_locked(p)) {
			peer_free(p);
			p = NULL;
			goto out;
		}
		p->next = peers;
		peers = p;
	}
	p->refs++;
out:
	pthread_mutex_unlock(&peers_lock);
	return p;
}

void peer_put(struct peer *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&peers_lock);
	/* The last holder unmaps it all: an idle cache must not keep a
	 * peer's memory (its memfds) alive after it let go of it. */
	if (--p->refs == 0 && peers_pid == getpid()) {
		for (struct peer **pp = &peers; *pp; pp = &(*pp)->next)
			if (*pp == p) {
				*pp = p->next;
				break;
			}
		peer_free(p);
	}
	pthread_mutex_unlock(&peers_lock);
}

/* (peer_map.h) Opened for reading too, though we never read: a pipe
 * with a reader never raises SIGPIPE, so a write after its owner died or
 * closed the channel cannot kill the application, and needs no signal
 * masking around it (two system calls per wake-up). */
int peer_pipe_open(int pid, int32_t pfd, uint64_t ino)
{
	char path[48];
	struct stat st;
	int fd;

	if (pid <= 0 || pfd < 0 || !ino)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, (int)pfd);
	if (stat(path, &st) || !S_ISFIFO(st.st_mode) || (uint64_t)st.st_ino != ino)
		return -1;
	fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, &st) || !S_ISFIFO(st.st_mode) || (uint64_t)st.st_ino != ino)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int peer_wake_fd(struct peer *p, int32_t pid, int32_t pfd, uint64_t ino)
{
	int fd = -1;

	if (pid != p->pid)
		return -1;
	pthread_mutex_lock(&peers_lock);
	for (int i = 0; i < p->n_wake && fd < 0; i++)
		if (p->wake[i].pfd == pfd && p->wake[i].ino == ino)
			fd = p->wake[i].fd;
	if (fd < 0 && p->n_wake < PEER_WAKES && (fd = peer_pipe_open(p->pid, pfd, ino)) >= 0) {
		p->wake[p->n_wake].pfd = pfd;
		p->wake[p->n_wake].ino = ino;
		p->wake[p->n_wake].fd = fd;
		p->n_wake++;
	}
	pthread_mutex_unlock(&peers_lock);
	return fd;
}

bool peer_is_self(const struct peer *p)
{
	return p->self;
}

const struct srn_mrdir_entry *peer_mr_entry(struct peer *p, uint32_t key)
{
	const struct srn_mrdir_entry *e = NULL;
	uint32_t idx;

	pthread_mutex_lock(&peers_lock);
	if (!p->dir)
		map_dir(p);
	if (p->dir) {
		/* the peer's word: bounded by nent below, whatever it says */
		idx = key & atomic_load_explicit(&((struct srn_mrdir_hdr *)p->dir)->mask,
						 memory_order_acquire);
		if (idx >= p->nent)
			map_dir(p);
		if (idx < p->nent)
			e = &p->ent[idx];
	}
	pthread_mutex_unlock(&peers_lock);
	return e;
}

bool peer_mr_snapshot(const struct srn_mrdir_entry *e, struct srn_mrdir_entry *out,
		      uint32_t *seq)
{
	struct srn_mrdir_entry *w = (struct srn_mrdir_entry *)e;

	for (int tries = 0; tries < 1000; tries++) {
		uint32_t q1 = atomic_load_explicit(&w->seq, memory_order_acquire), q2;

		if (q1 & 1)
			continue;
		memcpy((char *)out + sizeof(out->seq), (const char *)e + sizeof(e->seq),
		       sizeof(*out) - sizeof(out->seq));
		/* the copy before the re-read (pairs with the owner's
		 * release ordering around its rewrite) */
		atomic_thread_fence(memory_order_acquire);
		q2 = atomic_load_explicit(&w->seq, memory_order_relaxed);
		if (q1 == q2) {
			atomic_store_explicit(&out->seq, q1, memory_order_relaxed);
			*seq = q1;
			return true;
		}
	}
	return false;
}

struct peer_memfd *peer_map_memfd(struct peer *p, int memfd, uint64_t ino, char **base,
				  uint64_t *size)
{
	struct peer_memfd *m;
	char path[64];
	struct stat st;
	void *b;
	int fd;

	pthread_mutex_lock(&peers_lock);
	for (m = p->maps; m; m = m->next)
		if (m->ino == ino && m->memfd == memfd)
			goto found;
	pthread_mutex_unlock(&peers_lock);

	/* The owner's fd through /proc: same user, no ptrace needed.  The
	 * inode check makes sure the fd number was not reused for
	 * something else since the directory entry was written. */
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", p->pid, memfd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_ino != ino || !S_ISREG(st.st_mode) ||
	    st.st_size <= 0) {
		close(fd);
		return NULL;
	}
	b = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (b == MAP_FAILED)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m) {
		munmap(b, (size_t)st.st_size);
		return NULL;
	}
	m->ino = ino;
	m->memfd = memfd;
	m->base = b;
	m->size = (uint64_t)st.st_size;
	pthread_mutex_lock(&peers_lock);
	m->next = p->maps;
	p->maps = m;
found:
	m->refs++;
	*base = m->base;
	*size = m->size;
	pthread_mutex_unlock(&peers_lock);
	return m;
}

void peer_unmap_memfd(struct peer *p, struct peer_memfd *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&peers_lock);
	if (--m->refs == 0) {
		for (struct peer_memfd **pp = &p->maps; *pp; pp = &(*pp)->next)
			if (*pp == m) {
				*pp = m->next;
				break;
			}
		munmap(m->base, m->size);
		free(m);
	}
	pthread_mutex_unlock(&peers_lock);
}

bool peer_vm_usable(const struct peer *p)
{
	return !p->vm_denied;
}

/* process_vm_* refused for good: say so once per process, stop trying
 * for this peer. */
static void vm_denied(struct peer *p, const char *what, int err)
{
	static atomic_bool said;

	p->vm_denied = true;
	if (!atomic_exchange(&said, true))
		fprintf(stderr, "softrnic: %s to pid %d: %s; same-host memory without a "
			"shared mapping goes by packets\n", what, p->pid, strerror(err));
}

/* Copy between local iov[0..n) and the peer's to[0..nt) (the same
 * total): 0, or -1. */
static int vm_copy(struct peer *p, bool write, const struct iovec *iov, int n,
		   const struct iovec *to, int nt)
{
	size_t len = 0;
	ssize_t got;

	for (int i = 0; i < nt; i++)
		len += to[i].iov_len;
	if (len == 0)
		return 0;
	if (p->vm_denied)
		return -1;
	got = write ? process_vm_writev(p->pid, iov, (unsigned long)n, to, (unsigned long)nt, 0)
		    : process_vm_readv(p->pid, iov, (unsigned long)n, to, (unsigned long)nt, 0);
	if (got == (ssize_t)len) {
		p->vm_ok = true;
		return 0;
	}
	if (got < 0 && (errno == EPERM || errno == ENOSYS))
		vm_denied(p, write ? "process_vm_writev" : "process_vm_readv", errno);
	return -1;
}

int peer_vm_write(struct peer *p, uint64_t addr, const struct iovec *iov, int n, size_t len)
{
	struct iovec r = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };

	return vm_copy(p, true, iov, n, &r, 1);
}

int peer_vm_writev(struct peer *p, const struct iovec *iov, int n, const struct iovec *to,
		   int nt)
{
	return vm_copy(p, true, iov, n, to, nt);
}

bool peer_vm_proven(struct peer *p, uint64_t addr)
{
	char c;
	struct iovec l = { &c, 1 };

	if (p->vm_ok)
		return true;
	/* a harmless look (a read of one byte the MR lets us write) */
	return peer_vm_read(p, addr, &l, 1, 1) == 0;
}

int peer_vm_read(struct peer *p, uint64_t addr, const struct iovec *iov, int n, size_t len)
{
	struct iovec r = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };

	return vm_copy(p, false, iov, n, &r, 1);
}
