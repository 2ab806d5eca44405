/* net/stats_shm: an engine's counters in shared memory (see stats_shm.h). */
#include "net/stats_shm.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/proc.h"
#include "net/shm_sweep.h"

struct net_stats {
	struct net_stats_head *h;
	size_t len;
	/* the creator: a fork()ed child's copy does not remove the file */
	pid_t pid;
	char path[160];
};

enum { NAMES_OFF = 128 };

static uint32_t values_off(uint32_t count)
{
	/* the counters on their own cache lines, after the names */
	return (NAMES_OFF + count * NET_STATS_NAME_LEN + 63u) & ~63u;
}

/* A process killed before its engine stopped leaves its stats file. */
static void sweep_dead(const char *dev)
{
	char prefix[96];

	snprintf(prefix, sizeof(prefix), "softrnic-%s-stats-", dev);
	net_shm_sweep(prefix, offsetof(struct net_stats_head, owner));
}

struct net_stats *net_stats_create(const char *dev, const char *const *names,
				   uint32_t count)
{
	static _Atomic uint32_t seq;
	struct net_stats *s;
	size_t len = values_off(count) + (size_t)count * sizeof(uint64_t);
	char *base;
	int fd, e;

	if (count == 0 || count > NET_STATS_MAX) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	/* pid and a per-process number: unique among live engines */
	snprintf(s->path, sizeof(s->path), "/dev/shm/softrnic-%s-stats-%d-%u", dev,
		 (int)getpid(), (unsigned)atomic_fetch_add(&seq, 1));
	sweep_dead(dev);
	/* a dead process of the same pid may have left one: ours now */
	unlink(s->path);
	fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		goto fail;
	if (ftruncate(fd, (off_t)len) < 0) {
		e = errno;
		close(fd);
		unlink(s->path);
		errno = e;
		goto fail;
	}
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	e = errno;
	close(fd);
	if (base == MAP_FAILED) {
		unlink(s->path);
		errno = e;
		goto fail;
	}
	s->h = (struct net_stats_head *)base;
	s->len = len;
	s->pid = getpid();
	s->h->version = NET_STATS_VERSION;
	s->h->count = count;
	s->h->names_off = NAMES_OFF;
	s->h->values_off = values_off(count);
	s->h->owner = net_proc_word(getpid());
	snprintf(s->h->dev, sizeof(s->h->dev), "%s", dev);
	for (uint32_t i = 0; i < count; i++)
		snprintf(base + NAMES_OFF + (size_t)i * NET_STATS_NAME_LEN, NET_STATS_NAME_LEN,
			 "%s", names[i]);
	atomic_store_explicit(&s->h->magic, NET_STATS_MAGIC, memory_order_release);
	return s;
fail:
	e = errno;
	free(s);
	errno = e;
	return NULL;
}

_Atomic uint64_t *net_stats_values(struct net_stats *s)
{
	return (_Atomic uint64_t *)((char *)s->h + s->h->values_off);
}

void net_stats_set_port(struct net_stats *s, uint16_t port)
{
	atomic_store_explicit(&s->h->port, port, memory_order_relaxed);
}

_Atomic uint32_t *net_stats_capture_word(const struct net_stats *s)
{
	static _Atomic uint32_t none;

	return s ? &s->h->capture : &none;
}

void net_stats_destroy(struct net_stats *s)
{
	if (!s)
		return;
	if (s->pid == getpid())
		unlink(s->path);
	munmap(s->h, s->len);
	free(s);
}

int net_stats_is_file(const char *name)
{
	return strncmp(name, "softrnic-", 9) == 0 && strstr(name + 9, "-stats-") != NULL;
}

int net_stats_view_open(const char *path, struct net_stats_view *v)
{
	struct net_stats_head h;
	struct stat st;
	void *base;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int e;

	memset(v, 0, sizeof(*v));
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
		close(fd);
		return -EPROTO;
	}
	/* the file is untrusted: every offset within what it holds */
	if (atomic_load(&h.magic) != NET_STATS_MAGIC || h.version != NET_STATS_VERSION ||
	    h.count == 0 || h.count > NET_STATS_MAX || h.names_off < sizeof(h) ||
	    h.names_off > h.values_off ||
	    h.values_off - h.names_off < (uint64_t)h.count * NET_STATS_NAME_LEN ||
	    h.values_off % 8 || (uint64_t)h.values_off + h.count * 8ull > (uint64_t)st.st_size) {
		close(fd);
		return -EPROTO;
	}
	base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	e = errno;
	close(fd);
	if (base == MAP_FAILED)
		return -e;
	v->h = base;
	v->len = (size_t)st.st_size;
	v->count = h.count;
	/* from our own copy: the file may change under us */
	v->names = (const char *)base + h.names_off;
	v->values = (const _Atomic uint64_t *)((const char *)base + h.values_off);
	return 0;
}

void net_stats_view_close(struct net_stats_view *v)
{
	if (v->h)
		munmap((void *)v->h, v->len);
	memset(v, 0, sizeof(*v));
}

int net_stats_mark_capture(const char *path, uint32_t from, uint32_t to)
{
	struct net_stats_head *h;
	struct stat st;
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	int e, ret;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(*h)) {
		close(fd);
		return -EPROTO;
	}
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	e = errno;
	close(fd);
	if (h == MAP_FAILED)
		return -e;
	if (atomic_load(&h->magic) != NET_STATS_MAGIC || h->version != NET_STATS_VERSION)
		ret = -EPROTO;
	else if (from == NET_STATS_CAPTURE_ANY)
		ret = atomic_exchange(&h->capture, to) != to;
	else
		ret = atomic_compare_exchange_strong(&h->capture, &from, to);
	munmap(h, sizeof(*h));
	return ret;
}
