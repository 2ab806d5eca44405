/* Object tables under concurrency: four threads create and destroy QPs
 * and register and deregister MRs on one context at the same time; every
 * call succeeds, and no two live QPs share a QPN and no two live MRs share
 * a key (checked against a shared record of what is live).  Meant to be
 * run under ThreadSanitizer too. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

#define THREADS 4
#define ROUNDS 5
#define PER 20

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static char buf[4096];

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t live_qpn[THREADS * PER], live_key[THREADS * PER];
static int n_qpn, n_key, clashes, failures;

static void add_live(uint32_t *set, int *n, uint32_t v)
{
	pthread_mutex_lock(&live_lock);
	for (int i = 0; i < *n; i++)
		if (set[i] == v)
			clashes++;
	set[(*n)++] = v;
	pthread_mutex_unlock(&live_lock);
}

static void del_live(uint32_t *set, int *n, uint32_t v)
{
	pthread_mutex_lock(&live_lock);
	for (int i = 0; i < *n; i++)
		if (set[i] == v) {
			set[i] = set[--(*n)];
			break;
		}
	pthread_mutex_unlock(&live_lock);
}

static void *worker(void *arg)
{
	struct ibv_qp *qp[PER];
	struct ibv_mr *mr[PER];
	int bad = 0;

	(void)arg;
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < PER; i++) {
			struct ibv_qp_init_attr ia = {
				.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				.cap = { .max_send_wr = 2, .max_recv_wr = 2,
					 .max_send_sge = 1, .max_recv_sge = 1 },
			};

			qp[i] = ibv_create_qp(pd, &ia);
			mr[i] = ibv_reg_mr(pd, buf + i, 64, IBV_ACCESS_LOCAL_WRITE);
			if (!qp[i] || !mr[i]) {
				bad++;
				continue;
			}
			add_live(live_qpn, &n_qpn, qp[i]->qp_num);
			add_live(live_key, &n_key, mr[i]->lkey);
		}
		for (int i = 0; i < PER; i++) {
			if (qp[i]) {
				del_live(live_qpn, &n_qpn, qp[i]->qp_num);
				bad += ibv_destroy_qp(qp[i]) != 0;
			}
			if (mr[i]) {
				del_live(live_key, &n_key, mr[i]->lkey);
				bad += ibv_dereg_mr(mr[i]) != 0;
			}
		}
	}
	pthread_mutex_lock(&live_lock);
	failures += bad;
	pthread_mutex_unlock(&live_lock);
	return NULL;
}

int main(void)
{
	pthread_t th[THREADS];

	ctx = t_lo_open();
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!pd || !cq)
		return 1;
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	T_OK(failures == 0, "%d threads x %d rounds x %d QPs + MRs: %d failed calls",
	     THREADS, ROUNDS, PER, failures);
	T_OK(clashes == 0, "no QPN or key shared by two live objects (%d clashes)", clashes);
	T_OK(ibv_destroy_cq(cq) == 0 && ibv_dealloc_pd(pd) == 0,
	     "CQ and PD free again afterwards");
	ibv_close_device(ctx);
	t_lo_free();
	return t_summary();
}
