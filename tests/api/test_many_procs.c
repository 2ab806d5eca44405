/* Eight processes open srn_lo at the same time and connect RC queue pairs
 * all-to-all (56 QPs): QPNs must be unique across processes, and every
 * process SENDs to and RDMA WRITEs into every other, data verified.
 * A ninth process is SIGKILLed while holding QPs first: it must leave
 * nothing that breaks the others. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

#define NPROC 8
#define MSG 64

struct board {
	pthread_barrier_t barrier;
	uint32_t qpn[NPROC][NPROC];   /* qpn[i][j]: i's QP that talks to j */
	uint32_t rkey[NPROC];
	uint64_t addr[NPROC];
	union ibv_gid gid;
};

static struct board *b;

static int me;

/* srn_lo opened, or NULL. */
static struct ibv_context *open_lo(void)
{
	struct ibv_device *dev = t_lo_find();

	return dev ? ibv_open_device(dev) : NULL;
}

static void wait_wcs(struct ibv_cq *cq, int want, enum ibv_wc_opcode op)
{
	struct ibv_wc wc[NPROC];
	int got;

	T_ASSERT(want <= NPROC, "want %d", want);
	got = t_poll_cq(cq, wc, want, 20000);
	T_ASSERT(got == want, "poll_cq: %d of %d completions in 20 s", got, want);
	for (int i = 0; i < got; i++) {
		T_ASSERT(wc[i].status == IBV_WC_SUCCESS, "wc status %s",
			 ibv_wc_status_str(wc[i].status));
		T_ASSERT(wc[i].opcode == op, "wc opcode %d want %d", wc[i].opcode, op);
	}
}

static void child(void)
{
	t_set_tag("proc %d", me);
	struct ibv_context *ctx = open_lo();
	T_ASSERT(ctx, "open srn_lo: %s", strerror(errno));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	T_ASSERT(pd, "alloc_pd");
	size_t sz = 2 * NPROC * MSG;
	char *buf = calloc(1, sz);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sz, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE);
	T_ASSERT(mr, "reg_mr");
	struct ibv_cq *scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	T_ASSERT(scq && rcq, "create_cq");
	struct ibv_qp *qp[NPROC] = { 0 };
	for (int j = 0; j < NPROC; j++) {
		if (j == me)
			continue;
		struct ibv_qp_init_attr ia = { .send_cq = scq, .recv_cq = rcq,
			.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 4,
			.max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
		qp[j] = ibv_create_qp(pd, &ia);
		T_ASSERT(qp[j], "create_qp: %s", strerror(errno));
		struct t_rc_attr r = { .access = IBV_ACCESS_REMOTE_WRITE };
		T_ASSERT(!t_qp_rc_init(qp[j], &r), "INIT");
		b->qpn[me][j] = qp[j]->qp_num;
	}
	b->rkey[me] = mr->rkey;
	b->addr[me] = (uintptr_t)buf;
	if (me == 0)
		T_ASSERT(!ibv_query_gid(ctx, 1, 0, &b->gid), "query_gid");
	pthread_barrier_wait(&b->barrier);

	for (int j = 0; j < NPROC; j++) {
		if (j == me)
			continue;
		struct t_rc_attr r = { .dest_qpn = b->qpn[j][me], .dgid = b->gid, .hop_limit = 1,
				       .min_rnr_timer = 1, .rd_atomic = 1, .timeout = 14 };
		T_ASSERT(!t_qp_rc_rtr(qp[j], &r), "RTR");
		T_ASSERT(!t_qp_rc_rts(qp[j], &r), "RTS");
		struct ibv_sge sge = { (uintptr_t)buf + j * MSG, MSG, mr->lkey };
		struct ibv_recv_wr rw = { .wr_id = j, .sg_list = &sge, .num_sge = 1 }, *bad;
		T_ASSERT(!ibv_post_recv(qp[j], &rw, &bad), "post_recv");
	}
	pthread_barrier_wait(&b->barrier);

	char out[NPROC][2][MSG];
	for (int j = 0; j < NPROC; j++) {
		if (j == me)
			continue;
		snprintf(out[j][0], MSG, "send %d->%d", me, j);
		snprintf(out[j][1], MSG, "write %d->%d", me, j);
		struct ibv_mr *omr = ibv_reg_mr(pd, out[j], sizeof(out[j]), 0);
		T_ASSERT(omr, "reg out");
		struct ibv_sge s0 = { (uintptr_t)out[j][0], MSG, omr->lkey };
		struct ibv_sge s1 = { (uintptr_t)out[j][1], MSG, omr->lkey };
		struct ibv_send_wr w1 = { .wr_id = 100 + j, .sg_list = &s1, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { b->addr[j] + (NPROC + me) * MSG, b->rkey[j] } };
		struct ibv_send_wr w0 = { .wr_id = j, .sg_list = &s0, .num_sge = 1,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED, .next = &w1 };
		struct ibv_send_wr *bad;
		T_ASSERT(!ibv_post_send(qp[j], &w0, &bad), "post_send");
		wait_wcs(scq, 1, IBV_WC_SEND);
		wait_wcs(scq, 1, IBV_WC_RDMA_WRITE);
		T_ASSERT(!ibv_dereg_mr(omr), "dereg out");
	}
	wait_wcs(rcq, NPROC - 1, IBV_WC_RECV);
	pthread_barrier_wait(&b->barrier);
	for (int j = 0; j < NPROC; j++) {
		if (j == me)
			continue;
		char want[MSG];
		snprintf(want, MSG, "send %d->%d", j, me);
		T_ASSERT(!strcmp(buf + j * MSG, want), "send data from %d: '%s'", j, buf + j * MSG);
		snprintf(want, MSG, "write %d->%d", j, me);
		T_ASSERT(!strcmp(buf + (NPROC + j) * MSG, want), "write data from %d", j);
	}
	pthread_barrier_wait(&b->barrier);
	for (int j = 0; j < NPROC; j++)
		if (qp[j])
			T_ASSERT(!ibv_destroy_qp(qp[j]), "destroy_qp");
	T_ASSERT(!ibv_destroy_cq(scq) && !ibv_destroy_cq(rcq), "destroy_cq");
	T_ASSERT(!ibv_dereg_mr(mr) && !ibv_dealloc_pd(pd), "dereg/dealloc");
	T_ASSERT(!ibv_close_device(ctx), "close");
	free(buf);
	exit(0);
}

/* Holds QPs and dies by SIGKILL without cleaning up. */
static void doomed(int fd)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *cq = ctx ? ibv_create_cq(ctx, 8, NULL, NULL, 0) : NULL;
	char ok = 0;

	if (pd && cq) {
		struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq,
			.qp_type = IBV_QPT_RC, .cap = { 1, 1, 1, 1, 0 } };
		ok = 1;
		for (int i = 0; i < 16; i++)
			ok &= ibv_create_qp(pd, &ia) != NULL;
	}
	if (write(fd, &ok, 1) != 1)
		_exit(1);
	pause();
	_exit(0);
}

int main(void)
{
	struct ibv_context *probe = t_lo_open();
	ibv_close_device(probe);

	int p[2];
	if (pipe(p))
		return 1;
	pid_t d = fork();
	if (d == 0)
		doomed(p[1]);
	char ok = 0;
	int held = read(p[0], &ok, 1) == 1 && ok;
	kill(d, SIGKILL);
	waitpid(d, NULL, 0);
	T_OK(held, "a process created 16 QPs and was SIGKILLed");
	if (!held)
		return t_summary();

	b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (b == MAP_FAILED)
		return 1;
	pthread_barrierattr_t ba;
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(&b->barrier, &ba, NPROC);

	pid_t kids[NPROC];
	for (int i = 0; i < NPROC; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			me = i;
			alarm(60);
			child();
		}
	}
	int fails = 0;
	for (int i = 0; i < NPROC; i++) {
		int st;
		waitpid(kids[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fails++;
			/* A dead child leaves the others stuck in a barrier. */
			for (int k = 0; k < NPROC; k++)
				kill(kids[k], SIGKILL);
		}
	}
	/* QPNs unique across all processes. */
	int dup = 0;
	for (int i = 0; i < NPROC * NPROC; i++)
		for (int j = i + 1; j < NPROC * NPROC; j++) {
			uint32_t x = b->qpn[i / NPROC][i % NPROC], y = b->qpn[j / NPROC][j % NPROC];
			if (x && x == y)
				dup++;
		}
	T_OK(!fails, "%d processes, all-to-all RC SEND + WRITE, data verified", NPROC);
	T_OK(!dup, "QPNs unique across processes (%d duplicates)", dup);
	return t_summary();
}
