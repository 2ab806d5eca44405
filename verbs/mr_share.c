/* Registered memory a same-host peer can map (docs/same-host.md).
 *
 * A peer reaches an unshared MR only with process_vm_writev/readv: one
 * system call per access (~1.2 us here).  To let it map the memory
 * instead, registration re-backs the MR's pages by a memfd at the same
 * virtual addresses, contents kept: copy the pages into a window of the
 * process's memfd, then mmap that window MAP_SHARED|MAP_FIXED over the
 * range (an atomic replace: the range is never unmapped in between).  The
 * peer opens /proc/<pid>/fd/<memfd> (published with the window's offset
 * in the MR directory, mr_dir.c) and maps it; its stores and atomics land
 * in our pages.
 *
 * One memfd per process, SHARE_FILE_SIZE (64 GiB) sparse: one descriptor
 * however many MRs, and a peer can map it whole once.  Each backing is a
 * window of it, handed out in address order; the last dereg punches the
 * window back to a hole.  At most SHARE_MAX_BACKINGS backings (each splits
 * a mapping into up to three VMAs; vm.max_map_count is 65530).
 *
 * Only private anonymous read-write memory is re-backed: every page of
 * the range must be in an "rw-p" mapping with no file (anonymous, [heap]
 * or [anon:name]) and base pages; [stack], file mappings, MAP_SHARED,
 * hugetlb and device memory stay unshared.  So does a range over
 * SOFTRNIC_SHM_MR_MAX_MB (default 1024; 0 turns re-backing off), a range
 * that partly overlaps an existing backing, and everything under
 * SOFTRNIC_TRANSPORT=udp.  Unshared is never an error: the peer falls
 * back to process_vm_* (or UDP).  An MR entirely inside an existing
 * backing takes a reference on it (two MRs in one page share it); the
 * last dereg gives the range back as private anonymous memory with the
 * contents (pread into a fresh anonymous mapping, mremap it over).
 *
 * Cost, measured on this 2-core machine (busy, so +-50%): 4 KiB ~10 us
 * to register and ~10 us to deregister; 1 MiB ~0.3-0.5 ms and ~0.5 ms;
 * 64 MiB ~30-50 ms and ~45-70 ms (unregistered: 0.1 us whatever the
 * size).  It goes to: a look at the mappings (PROCMAP_QUERY ioctl, or the
 * /proc/self/maps text before Linux 6.11), /proc/self/pagemap (pages
 * never touched are neither present nor swapped: zeros, not copied, they
 * stay holes and cost nothing), one copy of the touched bytes, and
 * mapping the copied pages in advance (MADV_POPULATE_WRITE: one call
 * instead of a fault per page at the application's next touch, which
 * costs ~5x more in total).
 *
 * Hazards and how each is handled:
 * - fork(): a MAP_SHARED range would be shared with the child, so a child
 *   writing "its" buffer would write the parent's.  A pthread_atfork child
 *   handler replaces every backed range, in the child, by a private
 *   anonymous copy and closes the child's memfd: the child gets a private
 *   copy, as pinned pages get on current kernels, and neither side sees
 *   the other's later writes.  fork() costs one copy of the shared bytes
 *   in the child.  Raw clone() without the handlers (not fork; vfork and
 *   posix_spawn exec at once) would leave the range shared.
 * - MADV_DONTNEED on a backed range no longer zero-fills: on a shared
 *   mapping it drops only our page-table entries, and the next access
 *   sees the memfd page again, contents kept.  (MADV_REMOVE would punch
 *   the hole.)  Programs relying on zero-fill after DONTNEED on
 *   registered memory see old data.
 * - munmap/free of the range while registered: the memfd pages live on
 *   (peers' mappings stay valid; their writes land in memory no one
 *   reads).  Every reuse and the last dereg first check the mappings:
 *   still our memfd at the right offsets?  If not, the reuse is refused
 *   (unshared) and the last dereg touches no mapping and keeps the window
 *   (whatever now lives there, or what is left of the mapping, is left
 *   alone; the window's pages leak until exit).  free() of heap memory
 *   usually unmaps nothing: the range stays shared until the dereg.
 * - Concurrent writers during registration (or the last dereg): a store
 *   by another thread into a page between its copy and the remap is
 *   lost.  So only pages the MR covers whole are re-backed: an edge page
 *   it shares with other objects (heap neighbours, malloc metadata, a
 *   library's locks and queues) stays private, and a peer reaches the
 *   MR's bytes there with process_vm_* or packets (its directory entry
 *   says which part is mapped: srn_mr_share_span).  Seen before this
 *   rule: rping's client hung in teardown because its buffers' dereg
 *   swapped back the page holding the CM's event queue while the CM
 *   thread queued an event into it.  Stores into the MR's own pages
 *   during its registration can still be lost (the application races
 *   with itself); swap_in() keeps that window at one page copy plus a
 *   one-page remap (~10-20 us) for the first and last page.  Closing it
 *   entirely would need userfaultfd write-protection (privileged or
 *   user-mode-only, where a system call writing the range would fail
 *   with EFAULT): not done.
 * - mlock()ed ranges lose the lock (the replacing mapping is new);
 *   ranges registered with userfaultfd or madvise flags lose them too.
 */
#include "verbs/mr_share.h"
#include "verbs/span_set.h"
#include "net/mode.h"
#include "net/settings.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Re-backing is invisible to the application (same addresses, same
 * contents), so it must stay invisible to the hooks some install on
 * mmap/mremap/munmap/madvise too: UCX's memory events (ucm) took the
 * MAP_FIXED replace inside ibv_reg_mr for the application unmapping its
 * buffer, and its registration cache then deregistered and re-registered
 * live buffers (io_demo read back zeros).  Hence system calls, not the
 * libc symbols such hooks patch. */
static void *vm_mmap(void *at, size_t n, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, at, n, prot, flags, fd, off);
}

static void *vm_mremap(void *old, size_t n, void *at)
{
	return (void *)syscall(SYS_mremap, old, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, at);
}

static void vm_munmap(void *p, size_t n)
{
	syscall(SYS_munmap, p, n);
}

static void vm_madvise(void *p, size_t n, int advice)
{
	syscall(SYS_madvise, p, n, advice);
}

#define SHARE_DEFAULT_MAX_MB 1024u
/* Each backing splits its mapping into up to three VMAs: bounded well
 * below vm.max_map_count (65530), beyond it MRs stay unshared. */
#define SHARE_MAX_BACKINGS 4096u
#define PAGEMAP_PRESENT (1ull << 63)
#define PAGEMAP_SWAPPED (1ull << 62)

struct srn_mr_share {
	uintptr_t start;             /* page-aligned */
	size_t len;                  /* bytes, whole pages */
	uint64_t off;                /* where start is in the memfd */
	uint64_t ino;                /* that memfd's st_ino (share_ino then) */
	unsigned int refs;           /* MRs using it */
	bool detached;               /* fork child: no longer shared, not
				      * in the set; freed by the last put */
};

/* Guards everything below and every backing's fields; held across a
 * whole re-back or restore, and by fork() (atfork handlers). */
static pthread_mutex_t share_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_span_set share_set; /* every live backing, by address */
static unsigned int share_count; /* backings in share_set */
/* One memfd for the whole process (one descriptor however many MRs;
 * applications run with 1024 by default), of a fixed sparse size so that
 * a peer can map it whole, once.  Each backing gets a window of it; a
 * freed window becomes a hole again, and windows are handed out in
 * address order, so one is reused only after SHARE_FILE_SIZE bytes of
 * registrations (a late write by a stale peer then hits nobody's MR). */
#define SHARE_FILE_SIZE (64ull << 30)
static int share_fd = -1;
static uint64_t share_ino;       /* st_ino of share_fd */
static uint64_t share_dev;       /* st_dev of share_fd */
static uint64_t share_next;      /* next window, bump allocated */
static bool share_wrapped;       /* share_next went back to 0 once */
static pthread_once_t share_once = PTHREAD_ONCE_INIT;
static size_t share_max;         /* bytes; SIZE_MAX: no limit */
static bool share_debug;
static size_t page_size;

__attribute__((format(printf, 1, 2)))
static void share_log(const char *fmt, ...)
{
	va_list ap;

	if (!share_debug)
		return;
	char line[512];

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* one write per line: the application may print to stderr too */
	fprintf(stderr, "softrnic: mr_share: %s\n", line);
}

/* share_fd is still the memfd we created.  An application that closes
 * descriptors it does not own (or dup2s over them) must not make us write
 * into its file: every use that writes or reads through share_fd first
 * checks (one fstat). */
static bool share_fd_ours(void)
{
	struct stat st;

	return share_fd >= 0 && !fstat(share_fd, &st) && (uint64_t)st.st_ino == share_ino &&
	       (uint64_t)st.st_dev == share_dev;
}

/* b's window is in the memfd share_fd holds (a backing made before the
 * application took that descriptor away is reachable only by mapping). */
static bool backing_reachable(const struct srn_mr_share *b)
{
	return b->ino == share_ino && share_fd_ours();
}

/* ---- /proc/self/maps, without malloc (the fork child handler uses it) */

struct maps_line {
	uintptr_t lo, hi;
	char perms[5];
	uint64_t off;
	uint64_t ino;
	bool dev_zero;               /* device 00:00 */
	const char *path;            /* "" when none; may be truncated */
};

static const char *parse_hex(const char *s, uint64_t *v)
{
	uint64_t x = 0;
	int d;

	for (;; s++) {
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else
			break;
		x = x << 4 | (uint64_t)d;
	}
	*v = x;
	return s;
}

/* "lo-hi perms off maj:min ino   path" into *m; false if malformed. */
static bool parse_maps_line(const char *s, struct maps_line *m)
{
	uint64_t v, maj, min;

	s = parse_hex(s, &v);
	m->lo = (uintptr_t)v;
	if (*s++ != '-')
		return false;
	s = parse_hex(s, &v);
	m->hi = (uintptr_t)v;
	if (*s++ != ' ')
		return false;
	for (int i = 0; i < 4; i++)
		if (!(m->perms[i] = *s++))
			return false;
	m->perms[4] = 0;
	if (*s++ != ' ')
		return false;
	s = parse_hex(s, &m->off);
	if (*s++ != ' ')
		return false;
	s = parse_hex(s, &maj);
	if (*s++ != ':')
		return false;
	s = parse_hex(s, &min);
	m->dev_zero = maj == 0 && min == 0;
	if (*s++ != ' ')
		return false;
	for (v = 0; *s >= '0' && *s <= '9'; s++)
		v = v * 10 + (uint64_t)(*s - '0');
	m->ino = v;
	while (*s == ' ')
		s++;
	m->path = s;
	return true;
}

/* PROCMAP_QUERY (Linux 6.11, <linux/fs.h>; Debian 12's headers predate
 * it): one ioctl on /proc/self/maps describes the mapping at an address,
 * ~10x cheaper than formatting and parsing the whole text. */
struct procmap_query {
	uint64_t size;               /* sizeof(struct procmap_query) */
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start, vma_end;
	uint64_t vma_flags;          /* PMQ_VMA_* */
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	uint32_t vma_name_size;      /* in: buffer size; out: name length + 1, or 0 */
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
_Static_assert(sizeof(struct procmap_query) == 104, "uapi layout");
#define PMQ_IOCTL 0xc0686611ul   /* _IOWR('f', 17, struct procmap_query) */
#define PMQ_VMA_READ 0x01
#define PMQ_VMA_WRITE 0x02
#define PMQ_VMA_EXEC 0x04
#define PMQ_VMA_SHARED 0x08
#define PMQ_COVERING_OR_NEXT 0x10

/* /proc/self/maps kept open for the ioctl (share_lock held; reset in a
 * fork child: the open file describes the parent's address space). */
static int maps_fd = -1;
static bool pmq_unsupported;

/* maps_walk by ioctl: 1 done, 0 not available (use the text). */
static int maps_walk_ioctl(uintptr_t from, bool (*fn)(const struct maps_line *, void *),
			   void *arg)
{
	char name[128];
	uintptr_t cur = from;

	if (pmq_unsupported)
		return 0;
	if (maps_fd < 0)
		maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (maps_fd < 0)
		return 0;
	for (;;) {
		struct procmap_query q = {
			.size = sizeof(q), .query_flags = PMQ_COVERING_OR_NEXT, .query_addr = cur,
			.vma_name_size = sizeof(name), .vma_name_addr = (uintptr_t)name,
		};
		struct maps_line m;

		if (ioctl(maps_fd, PMQ_IOCTL, &q)) {
			if (errno == ENOENT)
				return 1;    /* no mapping at or after cur */
			if (errno == ENAMETOOLONG) {
				/* only file paths are that long: not ours */
				q.vma_name_size = 0;
				q.vma_name_addr = 0;
				if (ioctl(maps_fd, PMQ_IOCTL, &q))
					return errno == ENOENT ? 1 : 0;
				snprintf(name, sizeof(name), "/(long path)");
				q.vma_name_size = 1;
			} else {
				if (errno == ENOTTY || errno == EINVAL)
					pmq_unsupported = true;
				return 0;
			}
		}
		m.lo = (uintptr_t)q.vma_start;
		m.hi = (uintptr_t)q.vma_end;
		m.perms[0] = (q.vma_flags & PMQ_VMA_READ) ? 'r' : '-';
		m.perms[1] = (q.vma_flags & PMQ_VMA_WRITE) ? 'w' : '-';
		m.perms[2] = (q.vma_flags & PMQ_VMA_EXEC) ? 'x' : '-';
		m.perms[3] = (q.vma_flags & PMQ_VMA_SHARED) ? 's' : 'p';
		m.perms[4] = 0;
		m.off = q.vma_offset;
		m.ino = q.inode;
		/* hugetlb pages: reported as a device-less mapping of 2M pages */
		m.dev_zero = q.dev_major == 0 && q.dev_minor == 0 &&
			     q.vma_page_size == page_size;
		if (!q.vma_name_size)
			name[0] = 0;
		name[sizeof(name) - 1] = 0;
		m.path = name;
		if (!fn(&m, arg) || m.hi <= cur)
			return 1;
		cur = m.hi;
	}
}

/* Calls fn on every line whose mapping ends after from, in address order,
 * until fn returns false.  false if the maps cannot be read. */
static bool maps_walk(uintptr_t from, bool (*fn)(const struct maps_line *, void *),
		      void *arg)
{
	char buf[4096], line[512];
	size_t ll = 0;
	bool more = true;
	ssize_t n;
	int fd;

	if (maps_walk_ioctl(from, fn, arg))
		return true;
	fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	while (more && (n = read(fd, buf, sizeof(buf))) > 0) {
		const char *p = buf, *end = buf + n;

		while (more && p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t take = (size_t)((nl ? nl : end) - p);
			struct maps_line m;

			/* A line longer than line[] (a long path) keeps its
			 * head: the fields we need come first. */
			if (take > sizeof(line) - 1 - ll) {
				take = sizeof(line) - 1 - ll;
			}
			memcpy(line + ll, p, take);
			ll += take;
			if (!nl)
				break;
			p = nl + 1;
			line[ll] = 0;
			ll = 0;
			if (parse_maps_line(line, &m) && m.hi > from)
				more = fn(&m, arg);
		}
	}
	close(fd);
	return true;
}

/* ---- checks on a range ------------------------------------------------ */

struct cover {
	uintptr_t cur, end;          /* next address to cover, stop */
	uint64_t ino;                /* backing check: our memfd's inode */
	uintptr_t base;              /* backing check: this address ... */
	uint64_t base_off;           /* ... is at this memfd offset */
	bool ok;
};

/* Private anonymous read-write memory a memfd may replace. */
static bool anon_line(const struct maps_line *m)
{
	const char *p = m->path;

	if (strcmp(m->perms, "rw-p") || m->ino != 0 || !m->dev_zero)
		return false;
	return !*p || !strcmp(p, "[heap]") || !strncmp(p, "[anon:", 6);
}

static bool cover_anon(const struct maps_line *m, void *arg)
{
	struct cover *c = arg;

	if (m->lo > c->cur || !anon_line(m)) {
		c->ok = false;               /* hole, or not ours to replace */
		return false;
	}
	c->cur = m->hi;
	if (c->cur >= c->end) {
		c->ok = true;
		return false;
	}
	return true;
}

/* Our memfd at the right offsets, shared and writable. */
static bool cover_backing(const struct maps_line *m, void *arg)
{
	struct cover *c = arg;

	if (m->lo > c->cur || strcmp(m->perms, "rw-s") || m->ino != c->ino ||
	    m->off != c->base_off + (uint64_t)(m->lo - c->base)) {
		c->ok = false;
		return false;
	}
	c->cur = m->hi;
	if (c->cur >= c->end) {
		c->ok = true;
		return false;
	}
	return true;
}

static bool range_is_anon(uintptr_t start, uintptr_t end)
{
	struct cover c = { .cur = start, .end = end };

	return maps_walk(start, cover_anon, &c) && c.ok;
}

/* [start, end) still mapped to b's memfd (not munmapped or replaced). */
static bool range_is_backed(const struct srn_mr_share *b, uintptr_t start, uintptr_t end)
{
	struct cover c = { .cur = start, .end = end, .ino = b->ino, .base = b->start,
			   .base_off = b->off };

	return maps_walk(start, cover_backing, &c) && c.ok;
}

/* ---- copies ----------------------------------------------------------- */

/* pwrite (to_fd) or pread of exactly n bytes at offset off of fd,
 * retrying short transfers.  0 or -errno. */
static int xfer(int fd, void *mem, size_t n, uint64_t off, bool to_fd)
{
	while (n) {
		/* Raw system calls: whole pages are copied, malloc's neighbours
		 * and redzones included, which ASan's pread/pwrite interceptors
		 * would report as overflows. */
		ssize_t r = syscall(to_fd ? SYS_pwrite64 : SYS_pread64, fd, mem, n, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		mem = (char *)mem + r;
		off += (uint64_t)r;
		n -= (size_t)r;
	}
	return 0;
}

/* Copies the touched pages of [start, start+len) into share_fd at off.
 * Untouched pages (neither present nor swapped in /proc/self/pagemap)
 * read as zeros and stay holes.  0 or -errno. */
static int copy_in(uintptr_t start, size_t len, uint64_t off)
{
	const uint64_t used = PAGEMAP_PRESENT | PAGEMAP_SWAPPED;
	uint64_t pm[512];
	size_t npages = len / page_size, i, j, k;
	/* Opened each time, not cached: an application that closes
	 * descriptors it does not own must not make us read its file. */
	int err = 0, pmfd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	for (i = 0; i < npages && !err; i += 512) {
		size_t chunk = npages - i < 512 ? npages - i : 512;

		if (pmfd < 0 || pread(pmfd, pm, chunk * 8, (off_t)((start / page_size + i) * 8)) !=
		    (ssize_t)(chunk * 8))
			for (j = 0; j < chunk; j++)
				pm[j] = PAGEMAP_PRESENT; /* unknown: copy all */
		for (j = 0; j < chunk && !err; j = k) {
			for (k = j; k < chunk && (pm[k] & used); k++)
				;
			if (k > j)
				err = xfer(share_fd, (void *)(start + (i + j) * page_size),
					   (k - j) * page_size, off + (i + j) * page_size, true);
			else
				k++;
		}
	}
	if (pmfd >= 0)
		close(pmfd);
	return err;
}

/* Puts the new backing of [at, at+n): share_fd at offset off (to_fd),
 * or else the anonymous pages at t (moved).  Either is one atomic
 * replace: the range is never unmapped in between. */
static int place(uintptr_t at, size_t n, uint64_t off, char *t, bool to_fd)
{
	void *r = to_fd ? vm_mmap((void *)at, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
				  share_fd, (off_t)off)
			: vm_mremap(t, n, (void *)at);

	return r == MAP_FAILED ? -errno : 0;
}

/* Switches [start, start+len), whose contents were copied already, to
 * its new backing: share_fd from off (to_fd), or the anonymous copy at t.
 * The first and last page usually hold other objects too (heap
 * neighbours, allocator metadata) that other threads may write at any
 * time, and a replace takes effect for them only at its TLB flush, which
 * comes after all of a large range is torn down.  So the interior goes
 * first, then the edge pages are copied once more and replaced alone:
 * their window for a lost write is one page copy plus a one-page remap,
 * ~10-20 us here, whatever the size.  (Measured with a thread
 * incrementing a counter in the edge page: a 1 MiB re-back takes 560 us
 * and loses ~15 us worth of increments, not 560.)  Ranges of one or two
 * pages are all edge: one step. */
static int swap_in(uintptr_t start, size_t len, uint64_t off, char *t, bool to_fd)
{
	size_t pg = page_size, last = len - pg;
	char *mem = to_fd ? (char *)start : t;   /* the side copied from */
	int err;

	if (len <= 2 * pg)
		return place(start, len, off, t, to_fd);
	err = place(start + pg, len - 2 * pg, off + pg, t + pg, to_fd);
	if (!err)
		err = xfer(share_fd, mem, pg, off, to_fd);
	if (!err)
		err = xfer(share_fd, mem + last, pg, off + last, to_fd);
	if (!err)
		err = place(start, pg, off, t, to_fd);
	if (!err)
		err = place(start + last, pg, off + last, t + last, to_fd);
	return err;
}

/* Replaces b's range by private anonymous memory holding its window of
 * the memfd (only data extents are read: holes are zeros).  No malloc:
 * the fork child handler calls it.  0 or -errno. */
static int restore_anon(const struct srn_mr_share *b)
{
	char *t = vm_mmap(NULL, b->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	off_t pos = (off_t)b->off, end = (off_t)(b->off + b->len), d, h;
	int err = 0;

	if (t == MAP_FAILED)
		return -errno;
	while (!err && pos < end) {
		d = lseek(share_fd, pos, SEEK_DATA);
		if (d < 0 || d >= end)
			break;               /* ENXIO: no data after pos */
		h = lseek(share_fd, d, SEEK_HOLE);
		if (h < 0 || h > end)
			h = end;
		/* fault the pages in by the batch, then copy (best effort) */
		vm_madvise(t + (d - (off_t)b->off), (size_t)(h - d), MADV_POPULATE_WRITE);
		err = xfer(share_fd, t + (d - (off_t)b->off), (size_t)(h - d), (uint64_t)d, false);
		pos = h;
	}
	if (!err)
		err = swap_in(b->start, b->len, b->off, t, false);
	if (err)
		vm_munmap(t, b->len);   /* what was not moved yet */
	return err;
}

/* Maps in advance the pages of the new backing that hold data (the ones
 * copied), all in one call instead of one fault per page at the
 * application's next touch.  Best effort (Linux 5.14+). */
static void populate(uintptr_t start, size_t len, uint64_t off)
{
	off_t pos = (off_t)off, end = (off_t)(off + len), d, h;

	while (pos < end) {
		d = lseek(share_fd, pos, SEEK_DATA);
		if (d < 0 || d >= end)
			break;
		h = lseek(share_fd, d, SEEK_HOLE);
		if (h < 0 || h > end)
			h = end;
		vm_madvise((void *)(start + (uint64_t)d - off), (size_t)(h - d), MADV_POPULATE_WRITE);
		pos = h;
	}
}

/* Gives b's window of the memfd back to the system. */
static void punch(const struct srn_mr_share *b)
{
	fallocate(share_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)b->off,
		  (off_t)b->len);
}

/* ---- fork ------------------------------------------------------------- */

static void atfork_prepare(void)
{
	pthread_mutex_lock(&share_lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&share_lock);
}

/* In the child: every backed range becomes a private copy, so parent and
 * child stop sharing it (see the header comment), and the child drops
 * the parent's memfd (a registration in the child makes its own). */
static void atfork_child(void)
{
	if (maps_fd >= 0)
		close(maps_fd);
	maps_fd = -1;
	for (size_t i = 0; i < share_set.n; i++) {
		struct srn_mr_share *b = share_set.v[i].obj;

		if (backing_reachable(b) && range_is_backed(b, b->start, b->start + b->len))
			restore_anon(b);
		b->detached = true;
	}
	srn_span_clear(&share_set);
	share_count = 0;
	share_wrapped = false;
	if (share_fd_ours())
		close(share_fd);
	share_fd = -1;
	share_next = 0;
	pthread_mutex_unlock(&share_lock);
}

static void share_init(void)
{
	unsigned long long mb = (unsigned long long)srn_setting(SRN_SET_SHM_MR_MAX_MB, NULL);

	share_debug = srn_log_debug();
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	/* 0: no limit */
	share_max = !mb || mb > (SIZE_MAX >> 20) ? SIZE_MAX : (size_t)mb << 20;
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* ---- API -------------------------------------------------------------- */

/* First offset >= from where len bytes overlap no live window, or
 * UINT64_MAX.  Until the bump allocator first wraps (after SHARE_FILE_SIZE
 * bytes of registrations) every live window lies below share_next, so
 * from there on is free: O(1).  After, O(n^2) in backings. */
static uint64_t window_gap(uint64_t from, size_t len)
{
	uint64_t c = from;
	bool moved = !(from == share_next && !share_wrapped);

	while (moved && c + len <= SHARE_FILE_SIZE) {
		moved = false;
		for (size_t i = 0; i < share_set.n; i++) {
			const struct srn_mr_share *b = share_set.v[i].obj;

			if (c < b->off + b->len && b->off < c + len) {
				c = b->off + b->len;
				moved = true;
			}
		}
	}
	return c + len <= SHARE_FILE_SIZE ? c : UINT64_MAX;
}

/* A window of len bytes in the memfd (created at the first call);
 * share_lock held.  0 or -errno. */
static int window_alloc(size_t len, uint64_t *off)
{
	struct stat st;
	uint64_t o;

	if (share_fd >= 0 && !share_fd_ours()) {
		share_log("memfd %d closed or replaced by the application: a new one", share_fd);
		share_fd = -1;       /* not ours to close any more */
	}
	if (share_fd < 0) {
		share_fd = memfd_create("softrnic-mr", MFD_CLOEXEC);
		if (share_fd < 0)
			return -errno;
		if (fstat(share_fd, &st) || ftruncate(share_fd, (off_t)SHARE_FILE_SIZE)) {
			int e = errno;

			close(share_fd);
			share_fd = -1;
			return -e;
		}
		share_ino = (uint64_t)st.st_ino;
		share_dev = (uint64_t)st.st_dev;
		share_next = 0;
	}
	o = window_gap(share_next, len);
	if (o == UINT64_MAX) {
		share_wrapped = true;
		o = window_gap(0, len);
	}
	if (o == UINT64_MAX)
		return -ENOSPC;
	*off = o;
	share_next = o + len;
	return 0;
}

/* A new backing of [start, end); share_lock held.  NULL on failure, with
 * the range as it was (or, after a failure half-way, partly on the
 * memfd: contents right, the range just stays unshared). */
static struct srn_mr_share *share_create(uintptr_t start, uintptr_t end)
{
	size_t len = end - start;
	struct srn_mr_share *b;
	int err;

	if (share_count >= SHARE_MAX_BACKINGS) {
		share_log("%#lx+%zu: %u backings already: unshared", (unsigned long)start, len,
			  share_count);
		return NULL;
	}
	if (!range_is_anon(start, end)) {
		share_log("%#lx+%zu: not all private anonymous memory: unshared",
			  (unsigned long)start, len);
		return NULL;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->start = start;
	b->len = len;
	err = window_alloc(len, &b->off);
	if (err) {
		share_log("%#lx+%zu: no memfd window (%s): unshared", (unsigned long)start, len,
			  strerror(-err));
		free(b);
		return NULL;
	}
	b->ino = share_ino;
	err = copy_in(start, len, b->off);
	if (!err)
		err = swap_in(start, len, b->off, (char *)start, true);
	if (err) {
		share_log("%#lx+%zu: re-backing failed (%s): unshared", (unsigned long)start, len,
			  strerror(-err));
		if (range_is_anon(start, end))
			punch(b);    /* nothing of it got mapped */
		free(b);
		return NULL;
	}
	populate(start, len, b->off);
	b->refs = 1;
	if (srn_span_add(&share_set, start, end, b)) {
		/* cannot be found again: give the range back unshared */
		if (!restore_anon(b))
			punch(b);
		free(b);
		return NULL;
	}
	share_count++;
	share_log("%#lx+%zu: backed by memfd %d at %#llx", (unsigned long)start, len, share_fd,
		  (unsigned long long)b->off);
	return b;
}

/* Clips [*lo, *hi) to what backing b holds: false if nothing is left. */
static bool backing_clip(const struct srn_mr_share *b, uintptr_t *lo, uintptr_t *hi)
{
	if (*lo < b->start)
		*lo = b->start;
	if (*hi > b->start + b->len)
		*hi = b->start + b->len;
	return *lo < *hi;
}

/* The backing holding all of [start, end), or NULL; share_lock held.
 * *overlap is set when some backing holds part of it. */
static struct srn_mr_share *backing_of(uintptr_t start, uintptr_t end, bool *overlap)
{
	size_t i = srn_span_first_after(&share_set, start);
	struct srn_mr_share *b;

	/* backings are disjoint: only the first one ending after start can
	 * hold the whole range; any that begins before end overlaps it */
	*overlap = false;
	if (i == share_set.n || share_set.v[i].lo >= end)
		return NULL;
	b = share_set.v[i].obj;
	if (start >= b->start && end <= b->start + b->len)
		return b;
	*overlap = true;
	return NULL;
}

struct srn_mr_share *srn_mr_share_get(void *addr, size_t len)
{
	struct srn_mr_share *found;
	uintptr_t a = (uintptr_t)addr, out_start, out_end, start, end;
	bool overlap;

	if (!net_shm_allowed() || !addr || !len)
		return NULL;
	pthread_once(&share_once, share_init);
	if (a + len < a || a + len > UINTPTR_MAX - page_size)
		return NULL;
	/* The pages the MR touches (out_) and those it covers whole: only
	 * the latter are re-backed, so that no store another thread makes
	 * into a neighbour sharing an edge page can be lost (see above). */
	out_start = a & ~(uintptr_t)(page_size - 1);
	out_end = (a + len + page_size - 1) & ~(uintptr_t)(page_size - 1);
	start = (a + page_size - 1) & ~(uintptr_t)(page_size - 1);
	end = (a + len) & ~(uintptr_t)(page_size - 1);

	pthread_mutex_lock(&share_lock);
	/* A backing that already holds every page the MR touches costs no
	 * re-back (two MRs in one page, or one inside a larger one). */
	found = backing_of(out_start, out_end, &overlap);
	if (!found && start < end)
		found = backing_of(start, end, &overlap);
	if (found) {
		/* munmap + a new mapping at the same place leaves a stale
		 * backing: reuse only what is still ours. */
		uintptr_t lo = out_start, hi = out_end;

		if (backing_clip(found, &lo, &hi) && range_is_backed(found, lo, hi))
			found->refs++;
		else {
			share_log("%p+%zu: backing no longer mapped: unshared", addr, len);
			found = NULL;
		}
	} else if (overlap) {
		share_log("%p+%zu: partly overlaps a backing: unshared", addr, len);
	} else if (start >= end) {
		share_log("%p+%zu: covers no whole page: unshared", addr, len);
	} else if (end - start > share_max) {
		share_log("%p+%zu: over SOFTRNIC_SHM_MR_MAX_MB: unshared", addr, len);
	} else {
		found = share_create(start, end);
	}
	pthread_mutex_unlock(&share_lock);
	return found;
}

void srn_mr_share_put(struct srn_mr_share *s)
{
	int err;

	if (!s)
		return;
	pthread_mutex_lock(&share_lock);
	if (--s->refs) {
		pthread_mutex_unlock(&share_lock);
		return;
	}
	if (!s->detached) {
		srn_span_del(&share_set, s->start);
		share_count--;
		/* The window is freed only when nothing of ours maps it any
		 * more: a range partly unmapped keeps the rest (leaked until
		 * exit, rather than zeroed under the application). */
		if (!backing_reachable(s))
			share_log("%#lx+%zu: memfd descriptor lost: stays shared",
				  (unsigned long)s->start, s->len);
		else if (!range_is_backed(s, s->start, s->start + s->len))
			share_log("%#lx+%zu: unmapped or replaced while registered: left alone",
				  (unsigned long)s->start, s->len);
		else if ((err = restore_anon(s)))
			share_log("%#lx+%zu: restoring private memory failed (%s): stays shared",
				  (unsigned long)s->start, s->len, strerror(-err));
		else
			punch(s);
	}
	pthread_mutex_unlock(&share_lock);
	free(s);
}

int srn_mr_share_fd(const struct srn_mr_share *s)
{
	return s && !s->detached && s->ino == share_ino ? share_fd : -1;
}

uint64_t srn_mr_share_ino(const struct srn_mr_share *s)
{
	return s && !s->detached ? s->ino : 0;
}

uint64_t srn_mr_share_offset(const struct srn_mr_share *s, uintptr_t vaddr)
{
	return s ? s->off + (uint64_t)(vaddr - s->start) : 0;
}

uint64_t srn_mr_share_span(const struct srn_mr_share *s, uintptr_t vaddr, uint64_t len,
			   uint64_t *head)
{
	uintptr_t lo = vaddr, hi;

	*head = 0;
	if (!s || len > UINTPTR_MAX - vaddr)
		return 0;
	hi = vaddr + len;
	if (!backing_clip(s, &lo, &hi))
		return 0;
	*head = lo - vaddr;
	return hi - lo;
}
