/* The MR directory of a context (format and reader protocol: mr_dir.h).
 *
 * Created with the context, removed with it; also removed at exit (a
 * destructor) for contexts the program never closed.  A process that dies
 * without exiting leaves its file behind: every new directory first
 * sweeps files whose owner pid no longer exists.  The file is sparse:
 * room for every possible MR, but only written entries take memory.
 *
 * Only the process that created a directory writes it: after fork() the
 * child inherits the shared mapping, and its registrations must not land
 * in the parent's directory (they are skipped; the child's MRs are then
 * reachable over UDP only). */
#include "verbs/mr_dir.h"
#include "verbs/mr_share.h"
#include "verbs/srn.h"
#include "net/life.h"
#include "net/mode.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

_Static_assert(sizeof(struct srn_mrdir_hdr) == 64, "header is one cache line");
_Static_assert(sizeof(struct srn_mrdir_entry) == 64, "an entry is one cache line");

#define MRDIR_PREFIX "softrnic-mrdir-"

struct srn_mrdir {
	struct srn_mrdir *next;      /* open directories (unlinked at exit) */
	struct srn_mrdir_hdr *hdr;   /* the shared mapping */
	struct srn_mrdir_entry *ent; /* hdr->nslots entries after it */
	size_t map_len;
	pid_t pid;                   /* creator: the only writer */
	pthread_mutex_t lock;        /* one writer per entry at a time */
	char name[64];
};

static pthread_mutex_t dirs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_mrdir *dirs;

/* Removes directories of processes that are gone. */
static void sweep_stale(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char *end;
		long pid;

		if (strncmp(e->d_name, MRDIR_PREFIX, sizeof(MRDIR_PREFIX) - 1))
			continue;
		pid = strtol(e->d_name + sizeof(MRDIR_PREFIX) - 1, &end, 10);
		if (*end != '-' || pid <= 0 || pid == getpid())
			continue;
		if (kill((pid_t)pid, 0) == -1 && errno == ESRCH)
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

int srn_mrdir_open(struct srn_context *ctx)
{
	struct srn_mrdir *dir;
	uint32_t nslots = (uint32_t)SRN_MAX_MR;
	int fd, err;
	void *p;

	ctx->mrdir = NULL;
	/* Under SOFTRNIC_TRANSPORT=udp no peer may reach our memory
	 * directly: publish nothing. */
	if (!net_shm_allowed())
		return 0;
	sweep_stale();
	dir = calloc(1, sizeof(*dir));
	if (!dir)
		return -ENOMEM;
	dir->pid = getpid();
	srn_mrdir_name(dir->name, sizeof(dir->name), dir->pid, ctx->mrdir_nonce);
	dir->map_len = sizeof(struct srn_mrdir_hdr) + (size_t)nslots * sizeof(struct srn_mrdir_entry);
	fd = open(dir->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		err = -errno;
		free(dir);
		return err;
	}
	if (ftruncate(fd, (off_t)dir->map_len) ||
	    (p = mmap(NULL, dir->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		err = -errno;
		close(fd);
		unlink(dir->name);
		free(dir);
		return err;
	}
	close(fd);
	dir->hdr = p;
	dir->ent = (struct srn_mrdir_entry *)(dir->hdr + 1);
	dir->hdr->version = SRN_MRDIR_VERSION;
	dir->hdr->pid = dir->pid;
	dir->hdr->nslots = nslots;
	/* without a life page peers fall back to polling a pidfd */
	if (net_life_publish(&dir->hdr->life_fd, &dir->hdr->life_ino)) {
		dir->hdr->life_fd = -1;
		dir->hdr->life_ino = 0;
	}
	/* Pairs with a reader's acquire load of magic: a reader that sees
	 * the magic sees the header filled. */
	atomic_thread_fence(memory_order_release);
	*(volatile uint32_t *)&dir->hdr->magic = SRN_MRDIR_MAGIC;
	pthread_mutex_init(&dir->lock, NULL);

	pthread_mutex_lock(&dirs_lock);
	dir->next = dirs;
	dirs = dir;
	pthread_mutex_unlock(&dirs_lock);
	ctx->mrdir = dir;
	return 0;
}

void srn_mrdir_close(struct srn_context *ctx)
{
	struct srn_mrdir *dir = ctx->mrdir, **pp;

	if (!dir)
		return;
	ctx->mrdir = NULL;
	pthread_mutex_lock(&dirs_lock);
	for (pp = &dirs; *pp; pp = &(*pp)->next)
		if (*pp == dir) {
			*pp = dir->next;
			break;
		}
	pthread_mutex_unlock(&dirs_lock);
	if (dir->pid == getpid())
		unlink(dir->name);
	munmap(dir->hdr, dir->map_len);
	pthread_mutex_destroy(&dir->lock);
	free(dir);
}

/* At exit: no file outlives its process (mappings go with it). */
__attribute__((destructor)) static void mrdir_unlink_all(void)
{
	pthread_mutex_lock(&dirs_lock);
	for (struct srn_mrdir *d = dirs; d; d = d->next)
		if (d->pid == getpid())
			unlink(d->name);
	pthread_mutex_unlock(&dirs_lock);
}

/* Writes entry idx under its seqlock: seq odd, fields, seq even
 * (dir->lock held). */
static void entry_write(struct srn_mrdir *dir, uint32_t idx, const struct srn_mrdir_entry *v)
{
	struct srn_mrdir_entry *e = &dir->ent[idx];
	uint32_t s;

	s = atomic_load_explicit(&e->seq, memory_order_relaxed);
	atomic_store_explicit(&e->seq, s + 1, memory_order_relaxed);
	/* The odd seq is visible before any field changes; pairs with the
	 * reader's acquire fence before its second seq load. */
	atomic_thread_fence(memory_order_release);
	e->key = v->key;
	e->pd_handle = v->pd_handle;
	e->access = v->access;
	e->iova = v->iova;
	e->length = v->length;
	e->vaddr = v->vaddr;
	e->memfd = v->memfd;
	e->map_head = v->map_head;
	e->map_tail = v->map_tail;
	e->memfd_ino = v->memfd_ino;
	e->memfd_off = v->memfd_off;
	/* Fields before the even seq; pairs with the reader's acquire load
	 * of seq before it copies the fields. */
	atomic_store_explicit(&e->seq, s + 2, memory_order_release);
}

/* Writes key's entry: at key & mask, read under dir->lock so that a
 * resize comes wholly before or after. */
static void entry_put(struct srn_mrdir *dir, uint32_t key, const struct srn_mrdir_entry *v)
{
	pthread_mutex_lock(&dir->lock);
	entry_write(dir, key & atomic_load_explicit(&dir->hdr->mask, memory_order_relaxed), v);
	pthread_mutex_unlock(&dir->lock);
}

bool srn_mrdir_active(const struct srn_context *ctx)
{
	return ctx->mrdir && ctx->mrdir->pid == getpid();
}

static struct srn_mrdir *writable(struct srn_context *ctx)
{
	struct srn_mrdir *dir = ctx->mrdir;

	if (!dir || dir->pid != getpid())
		return NULL;
	return dir;
}

void srn_mrdir_publish(struct srn_context *ctx, const struct srn_mr *mr)
{
	struct srn_mrdir *dir = writable(ctx);
	struct srn_mrdir_entry v = { .memfd = -1 };

	if (!dir)
		return;
	v.key = mr->ibv.lkey;
	v.pd_handle = mr->pd->ibv.handle;
	v.access = mr->access;
	v.iova = mr->iova;
	v.length = mr->length;
	v.vaddr = mr->vaddr;
	if (mr->share) {
		uint64_t head, held = srn_mr_share_span(mr->share, mr->vaddr, mr->length, &head);

		/* the edges are less than a page each (mr_share.c) */
		if (held && head <= UINT16_MAX && mr->length - head - held <= UINT16_MAX) {
			v.memfd = srn_mr_share_fd(mr->share);
			v.memfd_ino = srn_mr_share_ino(mr->share);
			v.map_head = (uint16_t)head;
			v.map_tail = (uint16_t)(mr->length - head - held);
			v.memfd_off = srn_mr_share_offset(mr->share, mr->vaddr + head);
		}
	}
	entry_put(dir, mr->ibv.lkey, &v);
}

void srn_mrdir_retract(struct srn_context *ctx, const struct srn_mr *mr)
{
	struct srn_mrdir *dir = writable(ctx);
	struct srn_mrdir_entry v = { .memfd = -1 };

	if (dir)
		entry_put(dir, mr->ibv.lkey, &v);
}

void srn_mrdir_resize(struct srn_context *ctx, uint32_t mask)
{
	struct srn_mrdir *dir = writable(ctx);
	struct srn_mrdir_entry none = { .memfd = -1 };
	uint32_t old;

	if (!dir || mask >= dir->hdr->nslots)
		return;
	pthread_mutex_lock(&dir->lock);
	old = atomic_load_explicit(&dir->hdr->mask, memory_order_relaxed);
	/* new places first: a reader with either mask finds the entry */
	for (uint32_t i = 0; i <= old && mask > old; i++) {
		struct srn_mrdir_entry *e = &dir->ent[i];

		if (e->key && (e->key & mask) != i)
			entry_write(dir, e->key & mask, e);
	}
	atomic_store_explicit(&dir->hdr->mask, mask, memory_order_release);
	for (uint32_t i = 0; i <= old && mask > old; i++) {
		struct srn_mrdir_entry *e = &dir->ent[i];

		if (e->key && (e->key & mask) != i)
			entry_write(dir, i, &none);
	}
	pthread_mutex_unlock(&dir->lock);
}
