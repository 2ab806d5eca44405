/* verbs/mr_share: re-backing registered memory by a memfd (white-box).
 * Heap and mmap'd buffers keep their contents; another process maps the
 * memfd through /proc/<pid>/fd and its stores and atomics land in ours;
 * two MRs in one page share a backing; partial overlap, file mappings,
 * MAP_SHARED, read-only memory, the stack and sizes over the limit stay
 * unshared; after fork neither side sees the other's writes; MADV_DONTNEED
 * keeps contents; munmap/free while registered then the last put does not
 * crash nor touch what now lives there; the last put gives back private
 * anonymous memory.  Under SOFTRNIC_TRANSPORT=udp nothing is re-backed. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/mode.h"
#include "tests/lib/t_util.h"
#include "verbs/mr_share.h"

#define PG 4096u

/* The /proc/self/maps line holding addr into out ("" if none). */
static void maps_line(const void *addr, char *out, size_t size)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];

	out[0] = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)addr >= lo &&
		    (uintptr_t)addr < hi) {
			line[strcspn(line, "\n")] = 0;
			snprintf(out, size, "%s", line);
			break;
		}
	}
	fclose(f);
}

static bool is_memfd(const void *addr)
{
	char l[512];

	maps_line(addr, l, sizeof(l));
	return strstr(l, " rw-s ") && strstr(l, "/memfd:softrnic-mr");
}

/* rw-p with no file: private anonymous ([heap] counts). */
static bool is_private_anon(const void *addr)
{
	char l[512], perms[8] = "";
	unsigned long ino = 1;

	maps_line(addr, l, sizeof(l));
	if (sscanf(l, "%*x-%*x %7s %*x %*x:%*x %lu", perms, &ino) != 2)
		return false;
	return !strcmp(perms, "rw-p") && ino == 0 && !strchr(l, '/');
}

static bool has_pattern(const unsigned char *p, size_t n, unsigned char seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed + i * 7))
			return false;
	return true;
}

static void fill(unsigned char *p, size_t n, unsigned char seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 7);
}

static void *anon(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		t_bail("mmap %zu: %s", n, strerror(errno));
	return p;
}

/* A second process maps the memfd like transport/direct.c would, writes a
 * pattern and adds to a counter while we add to it too. */
static void test_peer(void)
{
	enum { ADDS = 100000 };
	unsigned char *p = anon(16 * PG);
	struct srn_mr_share *s;
	uint64_t *ctr, ino, off;
	int status = -1, mfd;
	pid_t kid;

	fill(p, 16 * PG, 3);
	ctr = (uint64_t *)(p + 5 * PG + 64);
	*ctr = 1000;
	s = srn_mr_share_get(p, 16 * PG);
	T_OK(s && srn_mr_share_fd(s) >= 0 &&
	     srn_mr_share_offset(s, (uintptr_t)p + 100) == srn_mr_share_offset(s, (uintptr_t)p) + 100,
	     "peer: backed; byte 100 is 100 bytes into the window");
	if (!s)
		return;
	/* In a fork child our backings are detached (fd -1): take the
	 * parent's numbers before. */
	mfd = srn_mr_share_fd(s);
	ino = srn_mr_share_ino(s);
	off = srn_mr_share_offset(s, (uintptr_t)p);
	kid = fork();
	if (kid == 0) {
		char path[64];
		unsigned char *q;
		struct stat st;
		int fd;

		alarm(20);
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getppid(), mfd);
		fd = open(path, O_RDWR);
		if (fd < 0 || fstat(fd, &st) || (uint64_t)st.st_ino != ino)
			_exit(2);
		q = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
		if (q == MAP_FAILED)
			_exit(3);
		if (!has_pattern(q, 5 * PG, 3))
			_exit(4);       /* the peer sees what the owner wrote */
		fill(q, PG, 99);
		for (int i = 0; i < ADDS; i++)
			__atomic_fetch_add((uint64_t *)(q + 5 * PG + 64), 1, __ATOMIC_SEQ_CST);
		_exit(0);
	}
	for (int i = 0; i < ADDS; i++)
		__atomic_fetch_add(ctr, 1, __ATOMIC_SEQ_CST);
	waitpid(kid, &status, 0);
	T_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	     "peer: opened /proc/<pid>/fd/<memfd> (inode matches), saw our data (status %d)", status);
	T_OK(has_pattern(p, PG, 99), "peer: its writes are in our memory");
	T_OK(*ctr == 1000 + 2 * ADDS, "peer: concurrent fetch_add from both processes: %llu",
	     (unsigned long long)*ctr);
	srn_mr_share_put(s);
	T_OK(is_private_anon(p) && has_pattern(p, PG, 99) && *ctr == 1000 + 2 * ADDS,
	     "peer: after the last put, private anonymous with the contents");
	munmap(p, 16 * PG);
}

static void test_fork(void)
{
	unsigned char *p = anon(4 * PG);
	struct srn_mr_share *s;
	int to_kid[2], to_par[2], status = -1;
	char c = 0;
	pid_t kid;

	fill(p, 4 * PG, 1);
	s = srn_mr_share_get(p, 4 * PG);
	T_OK(s != NULL, "fork: backed");
	if (!s || pipe(to_kid) || pipe(to_par))
		return;
	kid = fork();
	if (kid == 0) {
		alarm(20);
		/* The child has a private copy: its own writes stay its own,
		 * and it no longer sees the parent's. */
		if (is_memfd(p) || !is_private_anon(p) || !has_pattern(p, 4 * PG, 1))
			_exit(2);
		fill(p, PG, 50);
		if (write(to_par[1], "w", 1) != 1 || read(to_kid[0], &c, 1) != 1)
			_exit(3);
		if (!has_pattern(p + PG, PG, (unsigned char)(1 + PG * 7)))
			_exit(4);       /* parent wrote page 1 meanwhile */
		srn_mr_share_put(s);    /* in the child: frees, touches nothing */
		_exit(has_pattern(p, PG, 50) ? 0 : 5);
	}
	T_OK(read(to_par[0], &c, 1) == 1, "fork: child wrote");
	fill(p + PG, PG, 77);
	T_OK(has_pattern(p, PG, 1), "fork: the child's writes are not seen by the parent");
	T_OK(write(to_kid[1], "p", 1) == 1, "fork: parent wrote");
	waitpid(kid, &status, 0);
	T_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	     "fork: child had a private copy, did not see the parent's writes (status %d)", status);
	T_OK(is_memfd(p), "fork: the parent's range is still shared");
	srn_mr_share_put(s);
	T_OK(is_private_anon(p) && has_pattern(p + PG, PG, 77), "fork: parent restored");
	close(to_kid[0]), close(to_kid[1]), close(to_par[0]), close(to_par[1]);
	munmap(p, 4 * PG);
}

int main(void)
{
	struct srn_mr_share *s, *s2, *s3;
	unsigned char *p, *h;
	char tmpl[] = "/tmp/test_mr_share.XXXXXX", tmpl2[] = "/tmp/test_mr_share.XXXXXX";
	char stackbuf[3 * PG];
	int fd;

	/* Read once, at the first registration. */
	setenv("SOFTRNIC_SHM_MR_MAX_MB", "8", 1);
	alarm(60);

	if (!net_shm_allowed()) {
		p = anon(4 * PG);
		h = aligned_alloc(PG, 4 * PG);
		s = srn_mr_share_get(p, 4 * PG);
		s2 = h ? srn_mr_share_get(h, 4 * PG) : NULL;
		T_OK(!s && !s2 && !is_memfd(p), "SOFTRNIC_TRANSPORT=udp: nothing is re-backed");
		free(h);
		munmap(p, 4 * PG);
		return t_summary();
	}

	/* heap: small aligned_alloc comes from [heap] (brk) */
	h = aligned_alloc(PG, 8 * PG);
	if (!h)
		t_bail("aligned_alloc");
	fill(h, 8 * PG, 5);
	s = srn_mr_share_get(h, 8 * PG);
	T_OK(s && is_memfd(h) && is_memfd(h + 7 * PG), "heap buffer re-backed by the memfd");
	T_OK(has_pattern(h, 8 * PG, 5), "heap buffer keeps its contents");
	h[3] = 42;
	srn_mr_share_put(s);
	T_OK(is_private_anon(h) && h[3] == 42, "heap: last put restores private anonymous memory");
	h[3] = (unsigned char)(5 + 3 * 7);
	T_OK(has_pattern(h, 8 * PG, 5), "heap: contents after restore");

	/* Edge pages the MR shares with other data are never re-backed:
	 * a store into a neighbour there during the re-back would be lost
	 * (rping's CM queue was). */
	s = srn_mr_share_get(h + 10, 8 * PG - 20);
	{
		uint64_t head = 0, held = srn_mr_share_span(s, (uintptr_t)h + 10, 8 * PG - 20, &head);

		T_OK(s && !is_memfd(h) && is_memfd(h + PG) && is_memfd(h + 6 * PG) &&
		     !is_memfd(h + 7 * PG), "unaligned MR: only the 6 pages it covers whole are re-backed");
		T_OK(head == PG - 10 && held == 6 * PG, "span: %llu bytes held after a head of %llu",
		     (unsigned long long)held, (unsigned long long)head);
	}
	T_OK(has_pattern(h, 8 * PG, 5), "unaligned MR: contents kept");
	srn_mr_share_put(s);
	T_OK(is_private_anon(h + PG) && has_pattern(h, 8 * PG, 5), "unaligned MR: restored");
	T_OK(!srn_mr_share_get(h + 100, PG) && !is_memfd(h) && !is_memfd(h + PG),
	     "an MR covering no whole page stays unshared");
	free(h);

	/* mmap'd buffer, partly touched: untouched pages stay zeros */
	p = anon(64 * PG);
	fill(p, 8 * PG, 9);
	fill(p + 40 * PG, PG, 11);
	s = srn_mr_share_get(p, 64 * PG);
	T_OK(s && is_memfd(p + 63 * PG), "mmap'd buffer re-backed");
	T_OK(has_pattern(p, 8 * PG, 9) && has_pattern(p + 40 * PG, PG, 11),
	     "mmap'd buffer keeps its touched pages");
	{
		bool zero = true;

		for (size_t i = 8 * PG; i < 40 * PG; i++)
			zero &= p[i] == 0;
		T_OK(zero, "untouched pages read as zeros");
	}
	/* MADV_DONTNEED on a shared mapping drops PTEs only */
	T_OK(madvise(p, 4 * PG, MADV_DONTNEED) == 0 && has_pattern(p, 4 * PG, 9),
	     "MADV_DONTNEED on a backed range keeps the contents (no zero-fill)");

	/* two MRs inside one backing share it; a partial overlap does not */
	s2 = srn_mr_share_get(p + 100, 50);
	s3 = srn_mr_share_get(p + 10 * PG, 3 * PG);
	T_OK(s2 == s && s3 == s, "MRs inside an existing backing reuse it");
	T_OK(srn_mr_share_offset(s3, (uintptr_t)p + 10 * PG) ==
		     srn_mr_share_offset(s, (uintptr_t)p) + 10 * PG &&
	     srn_mr_share_offset(s, (uintptr_t)p) % PG == 0, "offsets in a shared backing");
	srn_mr_share_put(s);
	srn_mr_share_put(s2);
	T_OK(is_memfd(p), "still backed while one MR holds it");
	srn_mr_share_put(s3);
	T_OK(is_private_anon(p) && has_pattern(p, 8 * PG, 9) && has_pattern(p + 40 * PG, PG, 11),
	     "restored after the third put, contents kept");

	s = srn_mr_share_get(p, PG);
	s2 = srn_mr_share_get(p + 300, 200);
	T_OK(s && s == s2, "an MR inside a backed page shares its backing");
	s3 = srn_mr_share_get(p + 20 * PG, 2 * PG);
	T_OK(s3 && s3 != s && srn_mr_share_fd(s3) == srn_mr_share_fd(s) &&
	     srn_mr_share_ino(s3) == srn_mr_share_ino(s),
	     "separate backings are windows of one memfd (one descriptor per process)");
	if (s3) {
		int mfd = srn_mr_share_fd(s3);
		off_t w = (off_t)srn_mr_share_offset(s3, (uintptr_t)p + 20 * PG), d;

		srn_mr_share_put(s3);
		errno = 0;
		d = lseek(mfd, w, SEEK_DATA);
		T_OK((d < 0 && errno == ENXIO) || d >= w + 2 * (off_t)PG,
		     "the last put frees the window (a hole again)");
	}
	srn_mr_share_put(s);
	srn_mr_share_put(s2);
	s = srn_mr_share_get(p, 4 * PG);
	s2 = srn_mr_share_get(p + 2 * PG, 4 * PG);
	T_OK(s && !s2, "an MR partly overlapping a backing stays unshared");
	T_OK(!is_memfd(p + 5 * PG), "the overlapping part beyond the backing is untouched");
	srn_mr_share_put(s);
	munmap(p, 64 * PG);

	/* over the limit (8 MiB here), and just under */
	p = anon(9u << 20);
	p[0] = 1;
	T_OK(srn_mr_share_get(p, 9u << 20) == NULL, "9 MiB over SOFTRNIC_SHM_MR_MAX_MB=8: unshared");
	s = srn_mr_share_get(p, 8u << 20);
	T_OK(s && p[0] == 1, "8 MiB (the limit) re-backed");
	srn_mr_share_put(s);
	munmap(p, 9u << 20);

	/* memory that is not private anonymous read-write */
	fd = mkstemp(tmpl);
	if (fd < 0 || ftruncate(fd, 4 * PG))
		t_bail("temp file");
	unlink(tmpl);
	p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	T_OK(p != MAP_FAILED && !srn_mr_share_get(p, 4 * PG), "private file mapping: unshared");
	munmap(p, 4 * PG);
	p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	T_OK(p != MAP_FAILED && !srn_mr_share_get(p, 4 * PG), "shared file mapping: unshared");
	munmap(p, 4 * PG);
	close(fd);
	p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	T_OK(p != MAP_FAILED && !srn_mr_share_get(p, 4 * PG), "MAP_SHARED anonymous: unshared");
	munmap(p, 4 * PG);
	p = mmap(NULL, 4 * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	T_OK(p != MAP_FAILED && !srn_mr_share_get(p, 4 * PG), "read-only anonymous: unshared");
	munmap(p, 4 * PG);
	memset(stackbuf, 1, sizeof(stackbuf));
	T_OK(!srn_mr_share_get(stackbuf, sizeof(stackbuf)), "the stack: unshared");
	p = anon(4 * PG);
	munmap(p + PG, PG);
	T_OK(!srn_mr_share_get(p, 4 * PG), "a range with a hole: unshared");
	munmap(p, 4 * PG);

	test_peer();
	test_fork();

	/* munmap while registered, something new mapped there, then put */
	p = anon(4 * PG);
	fill(p, 4 * PG, 13);
	s = srn_mr_share_get(p, 4 * PG);
	T_OK(s != NULL, "munmap: backed");
	munmap(p, 4 * PG);
	h = mmap(p, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
		 -1, 0);
	if (h == p) {
		fill(p, 4 * PG, 21);
		T_OK(!srn_mr_share_get(p + PG, PG), "munmap: a new MR on the stale range is unshared");
		srn_mr_share_put(s);
		T_OK(is_private_anon(p) && has_pattern(p, 4 * PG, 21),
		     "munmap: the last put left the new mapping alone");
		munmap(p, 4 * PG);
	} else {
		srn_mr_share_put(s);
		T_OK(true, "munmap: the last put after munmap did not crash");
	}

	/* the application closes our memfd and reuses its number */
	p = anon(4 * PG);
	fill(p, 4 * PG, 17);
	s = srn_mr_share_get(p, PG);
	fd = mkstemp(tmpl2);
	if (s && fd >= 0) {
		int mfd = srn_mr_share_fd(s);
		uint64_t ino = srn_mr_share_ino(s);
		struct stat st;

		unlink(tmpl2);
		T_OK(dup2(fd, mfd) == mfd, "app: dup2 over our memfd's number");
		s2 = srn_mr_share_get(p + 2 * PG, PG);
		T_OK(s2 && srn_mr_share_ino(s2) != ino && srn_mr_share_fd(s2) != mfd &&
		     has_pattern(p + 2 * PG, PG, (unsigned char)(17 + 2 * PG * 7)),
		     "app: the next registration makes a new memfd");
		srn_mr_share_put(s);
		T_OK(has_pattern(p, PG, 17), "app: the old backing stays shared, contents intact");
		T_OK(fstat(mfd, &st) == 0 && st.st_size == 0, "app: nothing written into its file");
		srn_mr_share_put(s2);
		T_OK(is_private_anon(p + 2 * PG), "app: the new backing is restored normally");
		close(fd);
		close(mfd);
	}
	munmap(p, 4 * PG);

	/* free while registered (heap) */
	h = aligned_alloc(PG, 2 * PG);
	if (h) {
		memset(h, 7, 2 * PG);
		s = srn_mr_share_get(h, 2 * PG);
		free(h);
		h = malloc(100);     /* the allocator may hand the memory out again */
		if (h)
			memset(h, 1, 100);
		srn_mr_share_put(s);
		free(h);
		T_OK(s != NULL, "free while registered, then put: no crash");
	}
	return t_summary();
}
