/* Scale probe (issue 24): memory and time per QP and per MR on srn_lo.
 *
 *   scale limits                 ibv_query_device's limits
 *   scale qp [-n 10000] [-c 64]  n RC QPs, c per shared CQ, connected in
 *                                pairs, one SEND each way, destroyed
 *   scale mr [-n 100000] [-a]    n 4 KiB MRs over one buffer (-a: n separate
 *                                page-sized allocations), deregistered
 *   scale procs [-p 8] [-n 4]    p processes, n QPs each, half connected to
 *                                each neighbour, one SEND each way
 *
 * Memory counted: VmRSS (RssShmem, the memfd and /dev/shm pages mapped, is
 * part of it) plus the allocated size of /dev/shm files the process holds
 * that are not mapped into it.  Prints one "key=value ..." line per phase;
 * exits 1 if any QP's message or any registration failed. */
#include "tests/lib/t_scale.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;

static void open_dev(void)
{
	ctx = t_lo_open();
	pd = ibv_alloc_pd(ctx);
	if (!pd || ibv_query_gid(ctx, 1, 0, &gid)) {
		perror("scale: pd/gid");
		exit(1);
	}
}

static void close_dev(void)
{
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	t_lo_free();
}

/* Bytes per object from a before/after pair: RSS, and the /dev/shm
 * files' allocated size (pages other processes touched count there). */
static double per_rss(const struct sc_mem *a, const struct sc_mem *b, int n)
{
	return (double)(b->rss_kb - a->rss_kb) * 1024 / n;
}

static double per_shm(const struct sc_mem *a, const struct sc_mem *b, int n)
{
	return (double)(b->shm_bytes - a->shm_bytes) / n;
}

static void print_mem(const char *tag, const struct sc_mem *m)
{
	printf("%s: rss_kb=%ld shmem_kb=%ld shm_files=%d shm_kb=%lld fds=%d vmas=%d\n", tag,
	       m->rss_kb, m->shmem_kb, m->shm_files, m->shm_bytes / 1024, m->fds, m->maps);
}

static int cmd_limits(void)
{
	struct ibv_device_attr a;

	open_dev();
	if (ibv_query_device(ctx, &a))
		return 1;
	printf("limits: max_qp=%d max_cq=%d max_cqe=%d max_mr=%d max_pd=%d max_qp_wr=%d "
	       "max_srq=%d\n", a.max_qp, a.max_cq, a.max_cqe, a.max_mr, a.max_pd, a.max_qp_wr,
	       a.max_srq);
	close_dev();
	return 0;
}

static int cmd_qp(int n, int per_cq)
{
	struct sc_mem m0, m1, m2, m3;
	struct sc_qps s;
	double t0, t1, t2, t3, t4;
	int ok;

	open_dev();
	sc_mem_read(&m0);
	t0 = t_now();
	if (sc_qps_create(&s, ctx, pd, n, per_cq)) {
		int i = 0;

		while (s.qp && i < n && s.qp[i])
			i++;
		fprintf(stderr, "scale qp: %d of %d QPs created: %s\n", i, n, strerror(errno));
		return 1;
	}
	t1 = t_now();
	sc_mem_read(&m1);
	if (sc_qps_connect(&s, &gid)) {
		perror("scale qp: connect");
		return 1;
	}
	t2 = t_now();
	ok = sc_qps_ping(&s, 60000);
	t3 = t_now();
	sc_mem_read(&m2);
	int derr = sc_qps_destroy_qps(&s);
	t4 = t_now();
	sc_qps_free(&s);
	sc_mem_read(&m3);
	print_mem("qp before", &m0);
	print_mem("qp created", &m1);
	print_mem("qp connected+pinged", &m2);
	print_mem("qp destroyed", &m3);
	printf("qp: n=%d per_cq=%d create_us=%.2f connect_us=%.2f ping_ms=%.1f destroy_us=%.2f "
	       "rss_per_qp=%.0f shm_per_qp=%.0f rss_per_qp_used=%.0f shm_per_qp_used=%.0f ok=%d\n",
	       n, per_cq, (t1 - t0) * 1e6 / n, (t2 - t1) * 1e6 / n, (t3 - t2) * 1e3,
	       (t4 - t3) * 1e6 / n, per_rss(&m0, &m1, n), per_shm(&m0, &m1, n),
	       per_rss(&m0, &m2, n), per_shm(&m0, &m2, n), ok);
	close_dev();
	return ok == n && !derr ? 0 : 1;
}

static int cmd_mr(int n, bool apart)
{
	struct sc_mem m0, m1, m2;
	uint8_t **addr = calloc((size_t)n, sizeof(*addr));
	struct ibv_mr **mr = calloc((size_t)n, sizeof(*mr));
	uint8_t *one = NULL;
	double t0, t1, t2;
	int got, freed;

	open_dev();
	if (!addr || !mr || (apart ? sc_pages_apart(addr, n) : !(one = sc_pages_one(addr, n)))) {
		perror("scale mr: buffers");
		return 1;
	}
	sc_mem_read(&m0);
	t0 = t_now();
	got = sc_mrs_reg(pd, addr, n, 4096, mr);
	t1 = t_now();
	sc_mem_read(&m1);
	freed = sc_mrs_dereg(mr, n);
	t2 = t_now();
	sc_mem_read(&m2);
	print_mem("mr before", &m0);
	print_mem("mr registered", &m1);
	print_mem("mr deregistered", &m2);
	printf("mr: n=%d layout=%s reg_us=%.2f dereg_us=%.2f rss_per_mr=%.0f shm_per_mr=%.0f "
	       "registered=%d deregistered=%d\n", n, apart ? "apart" : "one-buffer",
	       (t1 - t0) * 1e6 / n, (t2 - t1) * 1e6 / n, per_rss(&m0, &m1, n),
	       per_shm(&m0, &m1, n), got, freed);
	if (got < n)
		fprintf(stderr, "scale mr: %d of %d registered (%s)\n", got, n, strerror(errno));
	close_dev();
	return got == n && freed == n ? 0 : 1;
}

/* ---- many processes --------------------------------------------------- */

#define MAXP 256
#define MAXQ 64

struct board {                     /* shared by the parent and children */
	_Atomic int ready, pinged, done;
	uint32_t qpn[MAXP][MAXQ];
	union ibv_gid gid[MAXP];
	long base_kb[MAXP], rss_kb[MAXP];
	long long shm_bytes[MAXP];
	int ok[MAXP];
};

static int wait_for(_Atomic int *v, int want, double secs)
{
	double end = t_now() + secs;

	while (atomic_load(v) < want)
		if (t_now() > end)
			return -1;
		else
			usleep(200);
	return 0;
}

/* Child p: QPs 0..n/2-1 pair with the right neighbour's n/2..n-1. */
static int child(struct board *b, int p, int np, int n)
{
	struct sc_mem m0, m1;
	struct sc_qps s;
	int right = (p + 1) % np, left = (p + np - 1) % np, ok;

	open_dev();
	sc_mem_read(&m0);
	if (sc_qps_create(&s, ctx, pd, n, n))
		return 1;
	for (int i = 0; i < n; i++)
		b->qpn[p][i] = s.qp[i]->qp_num;
	b->gid[p] = gid;
	atomic_fetch_add(&b->ready, 1);
	if (wait_for(&b->ready, np, 60))
		return 1;
	struct t_rc_attr r = { .access = IBV_ACCESS_REMOTE_WRITE, .dgid = gid, .hop_limit = 64,
			       .min_rnr_timer = 1, .rd_atomic = 1, .timeout = 14 };
	for (int i = 0; i < n; i++) {
		r.dest_qpn = i < n / 2 ? b->qpn[right][i + n / 2] : b->qpn[left][i - n / 2];
		if (t_qp_rc_connect(s.qp[i], &r))
			return 1;
	}
	/* sc_qps_ping checks pairs inside one process: here each QP
	 * sends its index; the neighbour's QP that receives it knows it */
	uint8_t *rx = s.buf, *tx = s.buf + (size_t)n * SC_MSG;
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = { (uintptr_t)(rx + (size_t)i * SC_MSG), SC_MSG, s.mr->lkey };
		struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(s.qp[i], &wr, &bad))
			return 1;
	}
	atomic_fetch_add(&b->pinged, 1); /* every receive posted before any send */
	if (wait_for(&b->pinged, np, 60))
		return 1;
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = { (uintptr_t)(tx + (size_t)i * SC_MSG), SC_MSG, s.mr->lkey };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		memset(tx + (size_t)i * SC_MSG, 0, SC_MSG);
		snprintf((char *)tx + (size_t)i * SC_MSG, SC_MSG, "%d.%d", p, i);
		if (ibv_post_send(s.qp[i], &wr, &bad))
			return 1;
	}
	struct ibv_wc wc[MAXQ * 2];
	int got = t_poll_cq(s.cq[0], wc, 2 * n, 30000), good = 0;
	for (int i = 0; i < got; i++)
		good += wc[i].status == IBV_WC_SUCCESS;
	ok = good == 2 * n;
	for (int i = 0; i < n; i++) {
		char want[SC_MSG];

		snprintf(want, sizeof(want), "%d.%d", i < n / 2 ? right : left,
			 i < n / 2 ? i + n / 2 : i - n / 2);
		ok &= !strcmp((char *)rx + (size_t)i * SC_MSG, want);
	}
	sc_mem_read(&m1);
	b->base_kb[p] = m0.rss_kb;
	b->rss_kb[p] = m1.rss_kb;
	b->shm_bytes[p] = m1.shm_bytes;
	b->ok[p] = ok;
	atomic_fetch_add(&b->done, 1);
	/* stay until all are done: a peer's last ACK may still need us */
	wait_for(&b->done, np, 60);
	sc_qps_free(&s);
	close_dev();
	return ok ? 0 : 1;
}

static int cmd_procs(int np, int n)
{
	struct board *b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pid[MAXP];
	int bad = 0, status;
	double t0 = t_now();

	if (b == MAP_FAILED || np < 2 || np > MAXP || n < 2 || n > MAXQ || n % 2)
		return 2;
	memset(b, 0, sizeof(*b));
	for (int p = 0; p < np; p++) {
		pid[p] = fork();
		if (pid[p] == 0) {
			alarm(120);
			_exit(child(b, p, np, n));
		}
		if (pid[p] < 0)
			return 1;
	}
	for (int p = 0; p < np; p++) {
		waitpid(pid[p], &status, 0);
		bad += !WIFEXITED(status) || WEXITSTATUS(status) || !b->ok[p];
	}
	long sum = 0, max = 0, min = 0;
	long long shm = 0;
	for (int p = 0; p < np; p++) {
		long r = b->rss_kb[p];

		sum += r;
		max = r > max ? r : max;
		min = !min || r < min ? r : min;
		shm = b->shm_bytes[p] > shm ? b->shm_bytes[p] : shm;
	}
	long delta = 0;
	for (int p = 0; p < np; p++)
		delta += b->rss_kb[p] - b->base_kb[p];
	printf("procs: n=%d qps_each=%d rss_kb_avg=%ld rss_kb_min=%ld rss_kb_max=%ld "
	       "rss_kb_for_qps_avg=%ld shm_kb_max=%lld failed=%d secs=%.2f\n", np, n, sum / np,
	       min, max, delta / np, shm / 1024, bad, t_now() - t0);
	munmap(b, sizeof(*b));
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";
	int n = 0, c = 64, np = 8, opt;
	bool apart = false;

	optind = 2;
	while ((opt = getopt(argc, argv, "n:c:p:a")) != -1) {
		if (opt == 'n')
			n = atoi(optarg);
		else if (opt == 'c')
			c = atoi(optarg);
		else if (opt == 'p')
			np = atoi(optarg);
		else if (opt == 'a')
			apart = true;
		else
			return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(cmd, "limits"))
		return cmd_limits();
	if (!strcmp(cmd, "qp"))
		return cmd_qp(n ? n : 10000, c > 0 ? c : 64);
	if (!strcmp(cmd, "mr"))
		return cmd_mr(n ? n : 100000, apart);
	if (!strcmp(cmd, "procs"))
		return cmd_procs(np, n ? n : 4);
	fprintf(stderr, "usage: scale limits | qp [-n N] [-c PER_CQ] | mr [-n N] [-a] | "
		"procs [-p P] [-n QPS]\n");
	return 2;
}
