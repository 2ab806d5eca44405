/* The scale workload (issue 24) that bench/scale.c measures and
 * tests/api/test_scale.c checks: many RC QPs on shared CQs connected in
 * pairs, one SEND each way per pair, many MRs, and what the process holds
 * (RSS, shared memory, descriptors) before and after.  Header-only and
 * static, like t_verbs.h. */
#ifndef T_SCALE_H
#define T_SCALE_H

#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/t_verbs.h"

/* ---- what the process holds ------------------------------------------ */

struct sc_mem {
	long rss_kb;           /* VmRSS */
	long shmem_kb;         /* RssShmem: memfd and /dev/shm pages mapped */
	long long shm_bytes;   /* allocated bytes of the /dev/shm files held */
	int shm_files;         /* /dev/shm files mapped or open */
	int fds;               /* open descriptors */
	int maps;              /* VMAs */
};

static inline long sc_status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t kl = strlen(key);
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = strtol(line + kl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* Adds path (a /dev/shm file) to the set of inodes seen, counting it once. */
static inline void sc_shm_add(struct sc_mem *m, const char *path, ino_t *seen, int *nseen,
			      int cap)
{
	struct stat st;

	if (strncmp(path, "/dev/shm/", 9) || stat(path, &st))
		return;
	for (int i = 0; i < *nseen; i++)
		if (seen[i] == st.st_ino)
			return;
	if (*nseen < cap)
		seen[(*nseen)++] = st.st_ino;
	m->shm_files++;
	m->shm_bytes += (long long)st.st_blocks * 512;
}

/* The /dev/shm files this process maps (/proc/self/maps) or holds open
 * (/proc/self/fd), each counted once; VMAs and descriptors on the way. */
static inline void sc_mem_read(struct sc_mem *m)
{
	enum { CAP = 4096 };
	static ino_t seen[CAP];
	int nseen = 0;
	char line[512], path[512], link[300];
	FILE *f;
	DIR *d;
	struct dirent *e;

	memset(m, 0, sizeof(*m));
	m->rss_kb = sc_status_kb("VmRSS");
	m->shmem_kb = sc_status_kb("RssShmem");
	f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');

		m->maps++;
		if (p && sscanf(p, "%511s", path) == 1)
			sc_shm_add(m, path, seen, &nseen, CAP);
	}
	if (f)
		fclose(f);
	d = opendir("/proc/self/fd");
	while (d && (e = readdir(d))) {
		ssize_t n;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		m->fds++;
		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		n = readlink(link, path, sizeof(path) - 1);
		if (n > 0) {
			path[n] = 0;
			sc_shm_add(m, path, seen, &nseen, CAP);
		}
	}
	if (d) {
		closedir(d);
		m->fds--; /* the directory's own descriptor */
	}
}

/* /dev/shm files whose name carries this process's pid (softrnic names
 * its per-process files so): what must be gone after close. */
static inline int sc_shm_own_files(void)
{
	char pid[24];
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int n = 0;

	snprintf(pid, sizeof(pid), "-%d-", (int)getpid());
	while (d && (e = readdir(d)))
		n += !strncmp(e->d_name, "softrnic", 8) && strstr(e->d_name, pid) != NULL;
	if (d)
		closedir(d);
	return n;
}

/* ---- many QPs --------------------------------------------------------- */

#define SC_MSG 64              /* bytes per message and per slot */

struct sc_qps {
	int n, ncq, per_cq;
	struct ibv_cq **cq;
	struct ibv_qp **qp;
	uint8_t *buf;          /* n receive slots, then n send slots */
	size_t buf_len;
	struct ibv_mr *mr;
};

/* n QPs (n even), per_cq of them on each CQ (send and receive), 2 WRs
 * each way; one buffer of 2 * n message slots.  0 or -1. */
static inline int sc_qps_create(struct sc_qps *s, struct ibv_context *ctx, struct ibv_pd *pd,
				int n, int per_cq)
{
	memset(s, 0, sizeof(*s));
	s->n = n;
	s->per_cq = per_cq;
	s->ncq = (n + per_cq - 1) / per_cq;
	s->cq = calloc((size_t)s->ncq, sizeof(*s->cq));
	s->qp = calloc((size_t)n, sizeof(*s->qp));
	s->buf_len = ((size_t)n * 2 * SC_MSG + 4095) & ~(size_t)4095;
	s->buf = mmap(NULL, s->buf_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		      -1, 0);
	if (!s->cq || !s->qp || s->buf == MAP_FAILED)
		return -1;
	s->mr = ibv_reg_mr(pd, s->buf, s->buf_len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!s->mr)
		return -1;
	for (int i = 0; i < s->ncq; i++)
		if (!(s->cq[i] = ibv_create_cq(ctx, per_cq * 4, NULL, NULL, 0)))
			return -1;
	for (int i = 0; i < n; i++)
		if (!(s->qp[i] = t_qp_create(pd, s->cq[i / per_cq], IBV_QPT_RC, 2)))
			return -1;
	return 0;
}

/* QP 2k and 2k+1 connected to each other.  0 or -1. */
static inline int sc_qps_connect(struct sc_qps *s, const union ibv_gid *gid)
{
	struct t_rc_attr r = { .access = IBV_ACCESS_REMOTE_WRITE, .dgid = *gid,
			       .hop_limit = 64, .min_rnr_timer = 1, .rd_atomic = 1,
			       .timeout = 14 };

	for (int i = 0; i < s->n; i++) {
		r.dest_qpn = s->qp[i ^ 1]->qp_num;
		if (t_qp_rc_connect(s->qp[i], &r))
			return -1;
	}
	return 0;
}

/* One receive posted on every QP, then one SEND from each: QP i's slot
 * must hold what QP i^1 sent.  The number of QPs whose message arrived
 * intact with both completions successful (n when all work). */
static inline int sc_qps_ping(struct sc_qps *s, int ms)
{
	uint8_t *rx = s->buf, *tx = s->buf + (size_t)s->n * SC_MSG;
	struct ibv_wc wc[64];
	int done = 0, unposted = 0, bad = 0, ok = 0, first = -1;
	double end = t_now() + ms / 1e3;

	for (int i = 0; i < s->n; i++) {
		struct ibv_sge sge = { (uintptr_t)(rx + (size_t)i * SC_MSG), SC_MSG, s->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr *b;

		memset(rx + (size_t)i * SC_MSG, 0, SC_MSG);
		for (int k = 0; k < SC_MSG; k++)
			tx[(size_t)i * SC_MSG + (size_t)k] = (uint8_t)(i * 7 + k + 1);
		if (ibv_post_recv(s->qp[i], &wr, &b))
			unposted++;
	}
	for (int i = 0; i < s->n; i++) {
		struct ibv_sge sge = { (uintptr_t)(tx + (size_t)i * SC_MSG), SC_MSG, s->mr->lkey };
		struct ibv_send_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
		struct ibv_send_wr *b;

		if (ibv_post_send(s->qp[i], &wr, &b))
			unposted++;
	}
	while (done < 2 * s->n - unposted && t_now() < end) {
		int got = 0;

		for (int c = 0; c < s->ncq; c++) {
			int k = ibv_poll_cq(s->cq[c], 64, wc);

			for (int j = 0; j < k; j++)
				if (wc[j].status != IBV_WC_SUCCESS) {
					bad++;
					first = first < 0 ? (int)wc[j].status : first;
				}
			done += k > 0 ? k : 0;
			got += k > 0 ? k : 0;
		}
		if (!got)
			usleep(50);
	}
	for (int i = 0; i < s->n; i++) {
		int p = i ^ 1, same = 1;

		for (int k = 0; k < SC_MSG; k++)
			same &= rx[(size_t)i * SC_MSG + (size_t)k] == (uint8_t)(p * 7 + k + 1);
		ok += same;
	}
	if (bad || done != 2 * s->n)
		fprintf(stderr, "sc_qps_ping: %d of %d completions, %d failed (first: %s), "
			"%d not posted\n", done, 2 * s->n, bad,
			first < 0 ? "none" : ibv_wc_status_str((enum ibv_wc_status)first), unposted);
	return bad || done != 2 * s->n ? 0 : ok;
}

/* Destroys what sc_qps_create made (NULLs skipped); 0 or the first error. */
static inline int sc_qps_destroy_qps(struct sc_qps *s)
{
	int err = 0;

	for (int i = 0; s->qp && i < s->n; i++)
		if (s->qp[i]) {
			int e = ibv_destroy_qp(s->qp[i]);

			err = err ? err : e;
			s->qp[i] = NULL;
		}
	return err;
}

static inline void sc_qps_free(struct sc_qps *s)
{
	sc_qps_destroy_qps(s);
	for (int i = 0; s->cq && i < s->ncq; i++)
		if (s->cq[i])
			ibv_destroy_cq(s->cq[i]);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->buf && s->buf != MAP_FAILED)
		munmap(s->buf, s->buf_len);
	free(s->cq);
	free(s->qp);
	memset(s, 0, sizeof(*s));
}

/* ---- many MRs --------------------------------------------------------- */

#define SC_MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

/* Registers n MRs of len bytes at addr[i]; mr[i] NULL where it failed.
 * How many were registered. */
static inline int sc_mrs_reg(struct ibv_pd *pd, uint8_t **addr, int n, size_t len,
			     struct ibv_mr **mr)
{
	int ok = 0;

	for (int i = 0; i < n; i++) {
		mr[i] = ibv_reg_mr(pd, addr[i], len, SC_MR_ACCESS);
		ok += mr[i] != NULL;
	}
	return ok;
}

/* How many of n MRs deregistered with 0. */
static inline int sc_mrs_dereg(struct ibv_mr **mr, int n)
{
	int ok = 0;

	for (int i = 0; i < n; i++)
		if (mr[i]) {
			ok += ibv_dereg_mr(mr[i]) == 0;
			mr[i] = NULL;
		}
	return ok;
}

/* addr[i] = base + i * 4096 in one mapping of n pages (touched). */
static inline uint8_t *sc_pages_one(uint8_t **addr, int n)
{
	size_t len = (size_t)n * 4096;
	uint8_t *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (b == MAP_FAILED)
		return NULL;
	for (int i = 0; i < n; i++) {
		addr[i] = b + (size_t)i * 4096;
		addr[i][0] = (uint8_t)i;
	}
	return b;
}

/* addr[i]: n separate page-aligned 4 KiB allocations (touched).  0 or -1. */
static inline int sc_pages_apart(uint8_t **addr, int n)
{
	for (int i = 0; i < n; i++) {
		void *p = NULL;

		if (posix_memalign(&p, 4096, 4096))
			return -1;
		addr[i] = p;
		addr[i][0] = (uint8_t)i;
	}
	return 0;
}

#endif
