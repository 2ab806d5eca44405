/* The MR directory and memfd-backed MRs, black-box through our
 * libibverbs, as a same-host peer sees them: process A registers MRs;
 * process B finds A's directory by globbing /dev/shm/softrnic-mrdir-<A>-*,
 * reads the entries under their seqlock, checks every field, maps the
 * memfd through /proc/<A>/fd and writes and adds into A's buffer; an MR
 * that cannot be shared is published with memfd -1; after dereg the entry
 * is gone (key 0), after ibv_close_device the file is.  600 more MRs make
 * A's table double twice: the entries that move are found at key & the
 * new mask and no longer at the old place.  Under
 * SOFTRNIC_TRANSPORT=udp there is no directory and nothing is re-backed. */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"
#include "verbs/mr_dir.h"

#define PG 4096u
#define BUF (16 * PG)
#define NFILL 600                    /* MRs that make the table grow */
#define NFILL_ASKED 40               /* of them, the ones the peer checks */

/* What A tells B about an MR over the pipe. */
struct mr_msg {
	uint32_t key, pd_handle, access;
	uint64_t iova, length, vaddr;
	int32_t want_memfd;          /* 1: must be shared, 0: must not be */
};

static int dir_files(pid_t pid, char *first, size_t size)
{
	char pat[64];
	glob_t g;
	int n;

	snprintf(pat, sizeof(pat), "/dev/shm/softrnic-mrdir-%d-*", (int)pid);
	if (glob(pat, 0, NULL, &g))
		return 0;
	n = (int)g.gl_pathc;
	if (first && n)
		snprintf(first, size, "%s", g.gl_pathv[0]);
	globfree(&g);
	return n;
}

/* One consistent copy of entry idx; false if it kept changing. */
static bool entry_read(const struct srn_mrdir_hdr *h, uint32_t idx, struct srn_mrdir_entry *out)
{
	struct srn_mrdir_entry *e = (struct srn_mrdir_entry *)(h + 1) + idx;

	for (int tries = 0; tries < 1000; tries++) {
		uint32_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire), s2;

		if (s1 & 1)
			continue;
		memcpy((char *)out + sizeof(out->seq), (char *)e + sizeof(e->seq),
		       sizeof(*e) - sizeof(e->seq));
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&e->seq, memory_order_relaxed);
		if (s1 == s2)
			return true;
	}
	return false;
}

/* Process B: check each MR A announces; exit status = failures. */
static int peer(pid_t a, int rd, int wr)
{
	struct srn_mrdir_hdr *h;
	struct mr_msg m;
	char name[96];
	struct stat st;
	int fd, bad = 0;

	t_set_tag("peer");
	if (dir_files(a, name, sizeof(name)) != 1)
		return 10;
	fd = open(name, O_RDONLY);
	if (fd < 0 || fstat(fd, &st))
		return 11;
	h = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (h == MAP_FAILED)
		return 12;
	T_CHECK(h->magic == SRN_MRDIR_MAGIC && h->version == SRN_MRDIR_VERSION && h->pid == a &&
		h->nslots > 1 && (uint64_t)st.st_size >= sizeof(*h) + (uint64_t)h->nslots * 64,
		"directory header");
	while (read(rd, &m, sizeof(m)) == sizeof(m)) {
		struct srn_mrdir_entry e;
		uint32_t mask = atomic_load(&h->mask), idx = m.key & mask;
		char ack = 0;

		if (idx >= h->nslots || !entry_read(h, idx, &e)) {
			bad++;
		} else if (m.want_memfd < 0) {
			/* A deregistered it */
			T_CHECK(e.key == 0, "entry %u cleared after dereg (key %#x)", idx, e.key);
		} else {
			T_CHECK(e.key == m.key && e.pd_handle == m.pd_handle && e.access == m.access &&
				e.iova == m.iova && e.length == m.length && e.vaddr == m.vaddr,
				"entry %u fields (key %#x/%#x)", idx, e.key, m.key);
			T_CHECK((e.memfd >= 0) == (m.want_memfd == 1), "entry %u memfd %d", idx,
				e.memfd);
			/* where smaller tables put it: not there (any more) */
			for (uint32_t om = mask >> 1; om >= 255; om >>= 1) {
				struct srn_mrdir_entry o;

				if ((m.key & om) != idx && entry_read(h, m.key & om, &o))
					T_CHECK(o.key != m.key, "key %#x also at %u (mask %#x)",
						m.key, m.key & om, om);
			}
			if (e.memfd >= 0) {
				char path[64];
				unsigned char *q;
				uint64_t pre;
				int mfd;

				snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)a, e.memfd);
				mfd = open(path, O_RDWR);
				T_CHECK(mfd >= 0 && !fstat(mfd, &st) && (uint64_t)st.st_ino == e.memfd_ino,
					"memfd opens and its inode matches");
				/* map just the MR's pages of the memfd */
				pre = e.memfd_off % PG;
				q = mfd >= 0 ? mmap(NULL, pre + e.length, PROT_READ | PROT_WRITE,
						    MAP_SHARED, mfd, (off_t)(e.memfd_off - pre))
					     : MAP_FAILED;
				T_CHECK(q != MAP_FAILED, "memfd maps");
				if (q != MAP_FAILED) {
					unsigned char *b = q + pre;

					T_CHECK(b[0] == 0xa5 && b[e.length - 1] == 0x5a,
						"peer sees A's data at memfd_off");
					memset(b + 1, 0x77, 100);
					__atomic_fetch_add((uint64_t *)(b + 512), 5, __ATOMIC_SEQ_CST);
					munmap(q, pre + e.length);
				}
				if (mfd >= 0)
					close(mfd);
			}
		}
		if (write(wr, &ack, 1) != 1)
			return 13;
	}
	return t_fails + bad;
}

static void announce(int wr, int rd, struct ibv_mr *mr, uint64_t iova, int want)
{
	struct mr_msg m = {
		.key = mr->rkey, .pd_handle = mr->pd->handle,
		.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			  IBV_ACCESS_REMOTE_ATOMIC,
		.iova = iova, .length = mr->length, .vaddr = (uintptr_t)mr->addr, .want_memfd = want,
	};
	char ack;

	T_CHECK(write(wr, &m, sizeof(m)) == sizeof(m) && read(rd, &ack, 1) == 1, "peer answered");
}

static bool maps_has_memfd(const void *addr)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	bool found = false;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)addr >= lo &&
		    (uintptr_t)addr < hi)
			found = strstr(line, "memfd:softrnic-mr") != NULL;
	}
	if (f)
		fclose(f);
	return found;
}

int main(void)
{
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_ATOMIC;
	const char *tr = getenv("SOFTRNIC_TRANSPORT");
	bool udp = tr && !strcmp(tr, "udp");
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr, *mr2, *mr3;
	unsigned char *buf, *buf3, *fbuf, *fill;
	struct ibv_mr *fillers[NFILL];
	char tmpl[] = "/tmp/test_mr_share_peer.XXXXXX";
	int to_b[2], to_a[2], status = -1, ffd;
	uint32_t key;
	char stale[96] = "";
	pid_t b;

	alarm(60);
	/* a directory left by a process that died without closing */
	if (!udp) {
		pid_t dead = fork();
		int st;

		if (dead == 0)
			_exit(0);
		waitpid(dead, &st, 0);
		snprintf(stale, sizeof(stale), "/dev/shm/softrnic-mrdir-%d-0badf00d", (int)dead);
		st = open(stale, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
		if (st >= 0)
			close(st);
	}
	ctx = t_lo_open();
	if (!udp)
		T_OK(access(stale, F_OK) != 0, "a dead process's directory is swept at open");
	pd = ibv_alloc_pd(ctx);
	buf = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pd || buf == MAP_FAILED)
		t_bail("alloc_pd / mmap");
	memset(buf, 0, BUF);
	buf[PG] = 0xa5;
	buf[BUF - 1] = 0x5a;

	if (udp) {
		T_OK(dir_files(getpid(), NULL, 0) == 0, "udp: no MR directory");
		mr = ibv_reg_mr(pd, buf + PG, BUF - PG, acc);
		T_OK(mr && !maps_has_memfd(buf + PG), "udp: the MR is not re-backed");
		T_OK(mr && ibv_dereg_mr(mr) == 0, "udp: dereg");
		ibv_dealloc_pd(pd);
		ibv_close_device(ctx);
		t_lo_free();
		return t_summary();
	}

	T_OK(dir_files(getpid(), NULL, 0) == 1, "one MR directory after ibv_open_device");
	if (pipe(to_b) || pipe(to_a))
		t_bail("pipe");
	b = fork();
	if (b == 0) {
		close(to_b[1]);
		close(to_a[0]);
		_exit(peer(getppid(), to_b[0], to_a[1]));
	}
	close(to_b[0]);
	close(to_a[1]);

	/* shared: a plain anonymous buffer, iova shifted */
	mr = ibv_reg_mr_iova(pd, buf + PG, BUF - PG, 0x7000001000ull, acc);
	T_OK(mr && maps_has_memfd(buf + PG) && buf[PG] == 0xa5, "reg_mr re-backs the buffer");
	if (!mr)
		t_bail("reg_mr: %s", strerror(errno));
	announce(to_b[1], to_a[0], mr, 0x7000001000ull, 1);
	T_OK(buf[PG] == 0xa5 && buf[PG + 1] == 0x77 && buf[PG + 100] == 0x77 && buf[PG + 101] == 0 &&
	     buf[PG + 512] == 5, "the peer's writes and atomic add are in our buffer");

	/* a second MR inside the first one's pages */
	mr2 = ibv_reg_mr(pd, buf + 2 * PG, PG, acc);
	buf[2 * PG] = 0xa5;
	buf[3 * PG - 1] = 0x5a;
	T_OK(mr2 != NULL, "second MR in the same backing");
	if (mr2)
		announce(to_b[1], to_a[0], mr2, (uintptr_t)buf + 2 * PG, 1);
	T_OK(buf[2 * PG + 1] == 0x77, "the peer wrote through the second MR's entry");

	/* rereg to another buffer: the entry follows (new vaddr, window) */
	buf3 = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf3 == MAP_FAILED)
		t_bail("mmap");
	memset(buf3, 0, 2 * PG);
	buf3[0] = 0xa5;
	buf3[2 * PG - 1] = 0x5a;
	T_OK(mr2 && ibv_rereg_mr(mr2, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf3, 2 * PG, acc) == 0 &&
	     maps_has_memfd(buf3), "rereg moves the MR to a new backing");
	if (mr2)
		announce(to_b[1], to_a[0], mr2, (uintptr_t)buf3, 1);
	T_OK(buf3[1] == 0x77 && buf3[512] == 5, "the peer wrote through the updated entry");

	/* unshared: a file mapping is published with memfd -1 */
	ffd = mkstemp(tmpl);
	if (ffd < 0 || ftruncate(ffd, PG))
		t_bail("temp file");
	unlink(tmpl);
	fbuf = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED, ffd, 0);
	mr3 = fbuf != MAP_FAILED ? ibv_reg_mr(pd, fbuf, PG, acc) : NULL;
	T_OK(mr3 && !maps_has_memfd(fbuf), "file-backed MR registered, not re-backed");
	if (mr3)
		announce(to_b[1], to_a[0], mr3, (uintptr_t)fbuf, 0);

	/* growth: 600 more MRs; the first ones registered (in a 256-slot
	 * table) have moved about half the time at each doubling */
	fill = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fill == MAP_FAILED)
		t_bail("mmap");
	memset(fill, 0, PG);
	fill[0] = 0xa5;
	fill[PG - 1] = 0x5a;
	for (int i = 0; i < NFILL; i++)
		if (!(fillers[i] = ibv_reg_mr(pd, fill, PG, acc)))
			t_bail("reg_mr %d: %s", i, strerror(errno));
	for (int i = 0; i < NFILL_ASKED; i++)
		announce(to_b[1], to_a[0], fillers[i], (uintptr_t)fill, 1);
	T_OK(fill[1] == 0x77 && fill[512] == 5 * NFILL_ASKED,
	     "after the table grew the peer found %d MRs at key & its new mask", NFILL_ASKED);
	for (int i = 0; i < NFILL; i++)
		ibv_dereg_mr(fillers[i]);

	/* dereg: entries cleared (the peer looks at the old key's index);
	 * the buffer is private again */
	key = mr->rkey;
	T_OK(ibv_dereg_mr(mr) == 0, "dereg first MR");
	{
		struct mr_msg m = { .key = key, .want_memfd = -1 };
		char ack;

		T_CHECK(write(to_b[1], &m, sizeof(m)) == sizeof(m) && read(to_a[0], &ack, 1) == 1,
			"peer answered");
	}
	T_OK(!maps_has_memfd(buf + PG) && buf[PG + 512] == 5 && buf[2 * PG + 1] == 0x77,
	     "last dereg of the first buffer: private memory again, contents kept");
	T_OK(mr2 && ibv_dereg_mr(mr2) == 0 && !maps_has_memfd(buf3) && buf3[512] == 5,
	     "dereg of the moved MR: private again");
	T_OK(mr3 && ibv_dereg_mr(mr3) == 0, "dereg file-backed MR");
	close(to_b[1]);
	waitpid(b, &status, 0);
	T_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "peer checks passed (status %d)", status);

	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	T_OK(dir_files(getpid(), NULL, 0) == 0, "directory removed by ibv_close_device");
	close(to_a[0]);
	close(ffd);
	munmap(fbuf, PG);
	munmap(buf, BUF);
	munmap(buf3, 2 * PG);
	munmap(fill, PG);
	t_lo_free();
	return t_summary();
}
