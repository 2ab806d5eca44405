/* net/capture_ring: see capture_ring.h. */
#include "net/capture_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/proc.h"
#include <time.h>

static void ring_path(char *buf, size_t n, const char *dev)
{
	snprintf(buf, n, "/dev/shm/softrnic-%s-capture", dev);
}

static uint32_t rec_len(uint32_t roce_len)
{
	return (uint32_t)((sizeof(struct net_cap_rec) + roce_len + 15u) & ~15u);
}

/* The ring of a tool that died is free again, even while engines still
 * write into it (so not net_shm_sweep, which waits for quiet): complete
 * (magic set) or old, with an owner that is gone. */
static bool ring_stale(const char *path)
{
	struct net_cap_head h;
	struct stat st;
	bool stale = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h))
		stale = (atomic_load(&h.magic) == NET_CAP_MAGIC || st.st_mtime + 5 < time(NULL)) &&
			!net_proc_word_alive(h.owner);
	close(fd);
	return stale;
}

int net_cap_create(struct net_cap *c, const char *dev, uint64_t size, uint32_t gen)
{
	char path[160];
	size_t len = NET_CAP_DATA_OFF + size;
	void *base;
	int fd, e;

	memset(c, 0, sizeof(*c));
	if (!gen || size < 65536 || (size & (size - 1)))
		return -EINVAL;
	ring_path(path, sizeof(path), dev);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == EEXIST && ring_stale(path)) {
		unlink(path);
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd < 0)
		return errno == EEXIST ? -EBUSY : -errno;
	if (ftruncate(fd, (off_t)len) < 0) {
		e = errno;
		close(fd);
		unlink(path);
		return -e;
	}
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	e = errno;
	close(fd);
	if (base == MAP_FAILED) {
		unlink(path);
		return -e;
	}
	c->h = base;
	c->data = (uint8_t *)base + NET_CAP_DATA_OFF;
	c->map_len = len;
	c->h->version = NET_CAP_VERSION;
	c->h->gen = gen;
	c->h->owner = net_proc_word(getpid());
	c->h->size = size;
	snprintf(c->h->dev, sizeof(c->h->dev), "%s", dev);
	atomic_store(&c->h->active, 1);
	atomic_store_explicit(&c->h->magic, NET_CAP_MAGIC, memory_order_release);
	return 0;
}

void net_cap_destroy(struct net_cap *c, const char *dev)
{
	char path[160];

	if (!c->h)
		return;
	atomic_store(&c->h->active, 0);
	ring_path(path, sizeof(path), dev);
	unlink(path);
	net_cap_detach(c);
}

int net_cap_attach(struct net_cap *c, const char *dev)
{
	char path[160];
	struct net_cap_head *h;
	struct stat st;
	void *base;
	int fd, e;

	memset(c, 0, sizeof(*c));
	ring_path(path, sizeof(path), dev);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size < NET_CAP_DATA_OFF + 65536) {
		close(fd);
		return -EPROTO;
	}
	base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	e = errno;
	close(fd);
	if (base == MAP_FAILED)
		return -e;
	h = base;
	if (atomic_load_explicit(&h->magic, memory_order_acquire) != NET_CAP_MAGIC ||
	    h->version != NET_CAP_VERSION || h->size & (h->size - 1) ||
	    h->size > (uint64_t)st.st_size - NET_CAP_DATA_OFF) {
		munmap(base, (size_t)st.st_size);
		return -EPROTO;
	}
	c->h = h;
	c->data = (uint8_t *)base + NET_CAP_DATA_OFF;
	c->map_len = (size_t)st.st_size;
	return 0;
}

void net_cap_detach(struct net_cap *c)
{
	if (c->h)
		munmap(c->h, c->map_len);
	memset(c, 0, sizeof(*c));
}

bool net_cap_put(struct net_cap *c, const struct net_cap_rec *meta, const struct iovec *iov,
		 int n)
{
	struct net_cap_head *h = c->h;
	uint64_t size, pos, off, pad, tail;
	uint32_t roce = 0, len;
	struct net_cap_rec *r;
	uint8_t *p;

	if (!h || !atomic_load_explicit(&h->active, memory_order_relaxed))
		return false;
	for (int i = 0; i < n; i++)
		roce += (uint32_t)iov[i].iov_len;
	if (roce > NET_CAP_MAX_PACKET)
		roce = NET_CAP_MAX_PACKET;
	len = rec_len(roce);
	size = h->size;
	pos = atomic_load_explicit(&h->head, memory_order_relaxed);
	do {
		off = pos & (size - 1);
		/* a record never wraps: a filler takes the rest of the ring */
		pad = off + len > size ? size - off : 0;
		tail = atomic_load_explicit(&h->tail, memory_order_acquire);
		if (pos + pad + len - tail > size) {
			atomic_fetch_add_explicit(&h->dropped, 1, memory_order_relaxed);
			return false;
		}
	} while (!atomic_compare_exchange_weak_explicit(&h->head, &pos, pos + pad + len,
							memory_order_relaxed,
							memory_order_relaxed));
	if (pad) {
		r = (struct net_cap_rec *)(c->data + off);
		r->len = (uint32_t)pad;
		r->kind = NET_CAP_PAD;
		atomic_store_explicit(&r->commit, pos + 1, memory_order_release);
		pos += pad;
		off = 0;
	}
	r = (struct net_cap_rec *)(c->data + off);
	memcpy((char *)r + sizeof(r->commit), (const char *)meta + sizeof(meta->commit),
	       sizeof(*r) - sizeof(r->commit));
	r->len = len;
	r->roce_len = roce;
	p = (uint8_t *)(r + 1);
	for (int i = 0; i < n && roce; i++) {
		uint32_t k = iov[i].iov_len < roce ? (uint32_t)iov[i].iov_len : roce;

		memcpy(p, iov[i].iov_base, k);
		p += k;
		roce -= k;
	}
	atomic_store_explicit(&r->commit, pos + 1, memory_order_release);
	return true;
}

const struct net_cap_rec *net_cap_next(struct net_cap *c)
{
	struct net_cap_head *h = c->h;
	uint64_t size = h->size;

	for (int i = 0; i < 2; i++) {
		uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
		const struct net_cap_rec *r = (const struct net_cap_rec *)(c->data + (tail & (size - 1)));

		if (tail == atomic_load_explicit(&h->head, memory_order_acquire))
			return NULL;
		/* the commit word names this lap's position: a stale one
		 * from an earlier lap, or bytes of an old record, do not */
		if (atomic_load_explicit(&((struct net_cap_rec *)r)->commit, memory_order_acquire) !=
		    tail + 1)
			return NULL;
		if (r->len < 16 || r->len > size - (tail & (size - 1)))
			return NULL; /* damaged: the tool reports a stall */
		if (r->kind != NET_CAP_PAD)
			return r;
		atomic_store_explicit(&h->tail, tail + r->len, memory_order_release);
	}
	return NULL;
}

void net_cap_next_done(struct net_cap *c, const struct net_cap_rec *r)
{
	atomic_store_explicit(&c->h->tail, atomic_load(&c->h->tail) + r->len,
			      memory_order_release);
}
