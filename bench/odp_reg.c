/* Registration cost of an ODP MR (IBV_ACCESS_ON_DEMAND) against a plain
 * one, in the same run: for each size, reg_mr and dereg_mr of a buffer
 * whose pages are all touched, plain and ODP alternating, REPS times;
 * prints the medians and their ratio (plain / ODP), and what an implicit
 * ODP MR (the whole address space) costs.  On the default path a plain
 * MR's pages are re-backed by shared memory for same-host peers (and
 * copied back at dereg); an ODP MR's never are.  Run it under
 * SOFTRNIC_TRANSPORT=udp too, where no MR is re-backed.
 *
 *   odp_reg [REPS]        (default 7; sizes 4 KiB .. 64 MiB) */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <sys/mman.h>

#include "bench_util.h"

#define MAX_REPS 64

static struct ibv_context *open_lo(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *c = NULL;

	for (int i = 0; l && l[i] && !c; i++)
		if (!strcmp(ibv_get_device_name(l[i]), "srn_lo"))
			c = ibv_open_device(l[i]);
	if (l)
		ibv_free_device_list(l);
	return c;
}

/* One reg + dereg: the seconds each took; -1 on failure. */
static int once(struct ibv_pd *pd, void *buf, size_t len, unsigned int acc, double *reg,
		double *dereg)
{
	double t0 = bench_now_s(), t1;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, (int)acc);

	t1 = bench_now_s();
	if (!mr)
		return -1;
	*reg = t1 - t0;
	if (ibv_dereg_mr(mr))
		return -1;
	*dereg = bench_now_s() - t1;
	return 0;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 4096, 65536, 1u << 20, 16u << 20, 64u << 20 };
	const unsigned int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ;
	int reps = argc > 1 ? atoi(argv[1]) : 7;
	const char *tr = getenv("SOFTRNIC_TRANSPORT");
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	double pr[MAX_REPS], pd_[MAX_REPS], or[MAX_REPS], od[MAX_REPS], ir[MAX_REPS];

	if (reps < 1 || reps > MAX_REPS || !pd) {
		fprintf(stderr, "odp_reg: need srn_lo and 1..%d repetitions\n", MAX_REPS);
		return 1;
	}
	printf("# odp_reg: path %s, %d repetitions, medians (us); pages touched before each\n",
	       tr && *tr ? tr : "auto", reps);
	printf("%10s %12s %12s %12s %12s %14s %14s\n", "bytes", "plain reg", "plain dereg",
	       "odp reg", "odp dereg", "reg plain/odp", "reg+dereg p/o");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t len = sizes[s];
		uint8_t *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				    -1, 0);
		double a, b, c, d;

		if (buf == MAP_FAILED)
			return 1;
		memset(buf, 1, len);
		for (int r = 0; r < reps; r++) {
			/* alternating, so drift lands on both alike */
			if (once(pd, buf, len, acc, &pr[r], &pd_[r]) ||
			    once(pd, buf, len, acc | IBV_ACCESS_ON_DEMAND, &or[r], &od[r])) {
				fprintf(stderr, "odp_reg: reg_mr of %zu bytes failed\n", len);
				return 1;
			}
		}
		a = bench_median(pr, reps);
		b = bench_median(pd_, reps);
		c = bench_median(or, reps);
		d = bench_median(od, reps);
		printf("%10zu %12.2f %12.2f %12.2f %12.2f %14.1f %14.1f\n", len, a * 1e6, b * 1e6,
		       c * 1e6, d * 1e6, a / c, (a + b) / (c + d));
		munmap(buf, len);
	}
	for (int r = 0; r < reps; r++) {
		double t0 = bench_now_s();
		struct ibv_mr *mr = ibv_reg_mr(pd, NULL, SIZE_MAX, (int)(acc | IBV_ACCESS_ON_DEMAND));

		ir[r] = bench_now_s() - t0;
		if (!mr || ibv_dereg_mr(mr))
			return 1;
	}
	printf("implicit ODP MR (whole address space): reg %.2f us\n", bench_median(ir, reps) * 1e6);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
