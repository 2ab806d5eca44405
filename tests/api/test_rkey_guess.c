/* rkeys cannot be guessed (issue 24): a target registers 1000 MRs, all over
 * one page, and an initiator tries 100,000 uniformly random rkeys plus the
 * neighbours of every valid key (key + 1, key - 1 and each of its 32
 * single-bit flips) through real RDMA WRITEs and READs at that page.
 * Every guess that is not a key of the target must complete with
 * IBV_WC_REM_ACCESS_ERR (both QPs are then reconnected) and leave the page
 * as it was; a guess that is a key must succeed.  Hits among the random
 * guesses are pure chance: 1000 keys of 2^32 make ~0.023 expected in
 * 100,000, asserted <= 2; neighbours never hit (the library keeps every
 * new key away from the live ones).  The keys' non-slot bits must look
 * random: each of bits 10-30 is set in 40-60% of the keys (6 sigma);
 * bit 31 is clear in all (it marks a memory window's key, verbs/mw.h).
 * On the default path the initiator checks each rkey against the
 * target's MR directory first (transport/direct.c), then the packet
 * path's responder does (srn_mr_resolve); under SOFTRNIC_TRANSPORT=udp
 * only the responder does.  Both must refuse the same guesses. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "tests/lib/t_util.h"
#include "tests/lib/t_verbs.h"

#define NMR 1000
#ifndef GUESSES
#define GUESSES 100000              /* (a build for a quick look may set fewer) */
#endif
#define PAGE 4096
#define DEADLINE_S 240.0

static struct ibv_context *ctx;
static struct ibv_pd *pd_a, *pd_t;
static struct ibv_cq *cq_a, *cq_t;
static struct ibv_qp *qp_a, *qp_t;
static struct ibv_mr *mr_a, *mrs[NMR];
static uint8_t *page, *local;
static uint32_t keys[NMR];           /* sorted */
static struct t_rc_attr rc;
static unsigned long reconnects;

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static bool is_key(uint32_t k)
{
	return bsearch(&k, keys, NMR, sizeof(k), cmp_u32) != NULL;
}

static void connect_pair(void)
{
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };

	if (ibv_modify_qp(qp_a, &reset, IBV_QP_STATE) || ibv_modify_qp(qp_t, &reset, IBV_QP_STATE))
		t_bail("reset: %s", strerror(errno));
	rc.dest_qpn = qp_t->qp_num;
	if (t_qp_rc_connect(qp_a, &rc))
		t_bail("connect initiator: %s", strerror(errno));
	rc.dest_qpn = qp_a->qp_num;
	if (t_qp_rc_connect(qp_t, &rc))
		t_bail("connect target: %s", strerror(errno));
}

/* The initiator's next completion, spinning at first (a completion takes
 * microseconds; t_poll_cq's 100 us naps would dominate): 1, or 0 after 5 s. */
static int poll_one(struct ibv_wc *wc)
{
	double end = 0;

	for (unsigned long spins = 0;; spins++) {
		int n = ibv_poll_cq(cq_a, 1, wc);

		if (n)
			return n;
		if (spins < 20000)
			continue;
		if (!end)
			end = t_now() + 5;
		if (t_now() > end)
			return 0;
		usleep(20);
	}
}

/* One WRITE (even n) or READ (odd n) of 8 bytes at the page with rkey:
 * true if it succeeded, false if refused (anything else fails). */
static bool try_key(uint32_t rkey, unsigned long n)
{
	struct ibv_sge sge = { (uintptr_t)local, 8, mr_a->lkey };
	struct ibv_send_wr wr = { .wr_id = n, .sg_list = &sge, .num_sge = 1,
				  .opcode = n & 1 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	wr.wr.rdma.remote_addr = (uintptr_t)page;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(qp_a, &wr, &bad))
		t_bail("post_send: %s", strerror(errno));
	if (poll_one(&wc) != 1)
		t_bail("no completion for rkey %#x in 5 s", rkey);
	if (wc.status == IBV_WC_SUCCESS)
		return true;
	T_CHECK(wc.status == IBV_WC_REM_ACCESS_ERR, "rkey %#x: %s, not REM_ACCESS_ERR", rkey,
		ibv_wc_status_str(wc.status));
	connect_pair();
	reconnects++;
	return false;
}

static void setup(void)
{
	unsigned int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ;

	ctx = t_lo_open();
	pd_a = ibv_alloc_pd(ctx);
	pd_t = ibv_alloc_pd(ctx);
	cq_a = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	cq_t = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	page = aligned_alloc(PAGE, PAGE);
	local = aligned_alloc(PAGE, PAGE);
	if (!pd_a || !pd_t || !cq_a || !cq_t || !page || !local)
		t_bail("resources: %s", strerror(errno));
	memset(page, 0x5a, PAGE);
	memset(local, 0xa5, PAGE);
	mr_a = ibv_reg_mr(pd_a, local, PAGE, acc);
	for (int i = 0; i < NMR; i++) {
		mrs[i] = ibv_reg_mr(pd_t, page, PAGE, acc);
		if (!mrs[i])
			t_bail("reg_mr %d: %s", i, strerror(errno));
		T_CHECK(mrs[i]->rkey == mrs[i]->lkey, "lkey == rkey");
		keys[i] = mrs[i]->rkey;
	}
	if (!mr_a)
		t_bail("reg_mr: %s", strerror(errno));
	qsort(keys, NMR, sizeof(keys[0]), cmp_u32);
	qp_a = t_qp_create(pd_a, cq_a, IBV_QPT_RC, 16);
	qp_t = t_qp_create(pd_t, cq_t, IBV_QPT_RC, 16);
	if (!qp_a || !qp_t || ibv_query_gid(ctx, 1, 0, &rc.dgid))
		t_bail("qp/gid: %s", strerror(errno));
	rc.access = acc;
	rc.hop_limit = 64;
	rc.rd_atomic = 1;
	rc.timeout = 14;
	rc.min_rnr_timer = 1;
	connect_pair();
	reconnects = 0;
}

static void check_keys_random(void)
{
	int dup = 0, lopsided = 0, top = 0;

	for (int i = 1; i < NMR; i++)
		dup += keys[i] == keys[i - 1] || keys[i] == 0;
	T_OK(dup == 0 && keys[0] != 0, "%d keys, distinct and nonzero", NMR);
	for (int b = 10; b < 31; b++) {
		int ones = 0;

		for (int i = 0; i < NMR; i++)
			ones += keys[i] >> b & 1;
		if (ones < NMR * 4 / 10 || ones > NMR * 6 / 10) {
			printf("bit %d set in %d of %d keys\n", b, ones, NMR);
			lopsided++;
		}
	}
	T_OK(lopsided == 0, "bits 10-30 of the keys each set in 40-60%% of them");
	for (int i = 0; i < NMR; i++)
		top += keys[i] >> 31 & 1;
	T_OK(top == 0, "bit 31 clear in every MR key (set in %d)", top);
}

int main(void)
{
	unsigned long n = 0, hits = 0, wrong = 0, nb_hits = 0, nb = 0;
	uint64_t seed;
	double t0, t1;

	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint64_t)time(NULL);
	t_rand_seed(seed);
	printf("seed %#llx\n", (unsigned long long)seed);
	setup();
	check_keys_random();

	/* the valid keys themselves: each must reach the page */
	for (int i = 0; i < NMR; i++, n++)
		wrong += !try_key(keys[i], n);
	T_OK(wrong == 0, "all %d valid rkeys accepted (WRITE and READ)", NMR);

	t0 = t_now();
	wrong = 0;
	for (int g = 0; g < GUESSES && t_now() - t0 < DEADLINE_S; g++, n++) {
		uint32_t k = t_rand();
		bool hit = try_key(k, n);

		hits += hit;
		wrong += hit != is_key(k);
	}
	t1 = t_now();
	printf("%d random rkeys in %.1f s (%.0f/s): %lu hits (expected %.3f)\n", GUESSES,
	       t1 - t0, GUESSES / (t1 - t0), hits, (double)GUESSES * NMR / 4294967296.0);
	T_OK(n == NMR + GUESSES, "all %d guesses tried within %.0f s", GUESSES, DEADLINE_S);
	T_OK(wrong == 0, "every random guess refused unless it is a key (%lu wrong)", wrong);
	T_OK(hits <= 2, "%lu hits among %d random rkeys: chance", hits, GUESSES);

	for (int i = 0; i < NMR && t_now() - t0 < DEADLINE_S; i++) {
		uint32_t k = keys[i], near[34];

		near[0] = k + 1;
		near[1] = k - 1;
		for (int b = 0; b < 32; b++)
			near[2 + b] = k ^ (1u << b);
		for (int j = 0; j < 34; j++, n++, nb++) {
			nb_hits += is_key(near[j]);
			nb_hits += try_key(near[j], n);
		}
	}
	printf("%lu neighbours in %.1f s; %lu reconnects in all\n", nb, t_now() - t1, reconnects);
	T_OK(nb == NMR * 34ul, "all %lu neighbours tried", nb);
	T_OK(nb_hits == 0, "no neighbour (key +- 1, one bit flipped) is a key or reaches the page");

	/* every refused WRITE left the page alone; the accepted ones wrote
	 * the initiator's bytes (0xa5), READs changed nothing */
	{
		int bad = 0;

		for (int i = 8; i < PAGE; i++)
			bad += page[i] != 0x5a;
		T_OK(bad == 0, "page beyond the 8 bytes WRITEs may reach unchanged");
	}

	ibv_destroy_qp(qp_a);
	ibv_destroy_qp(qp_t);
	for (int i = 0; i < NMR; i++)
		ibv_dereg_mr(mrs[i]);
	ibv_dereg_mr(mr_a);
	ibv_destroy_cq(cq_a);
	ibv_destroy_cq(cq_t);
	ibv_dealloc_pd(pd_a);
	ibv_dealloc_pd(pd_t);
	ibv_close_device(ctx);
	t_lo_free();
	free(page);
	free(local);
	return t_summary();
}
