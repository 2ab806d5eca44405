/* Idle check: opens a device, connects two RC QPs to each other (with
 * receives posted, a completion channel armed, no traffic) and measures the
 * process's own CPU time, all threads included, over SECONDS of idling.
 * A NIC in software should cost ~0% here: no polling while nothing moves.
 * Usage: idle_qp [-d DEVICE (default: the first)] [-t SECONDS (default 3)]
 * Prints: idle_qp DEV: X.XX % CPU over S s (user U s, sys Y s) */
#include "bench_util.h"

#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int die(const char *what)
{
	perror(what);
	return 1;
}

/* RESET -> INIT -> RTR -> RTS, aimed at the peer QP on the same port. */
static int connect_qp(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *gid)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

int main(int argc, char **argv)
{
	const char *want = NULL;
	double secs = 3;
	int opt, n;

	while ((opt = getopt(argc, argv, "d:t:")) != -1) {
		if (opt == 'd')
			want = optarg;
		else if (opt == 't')
			secs = atof(optarg);
		else
			return 2;
	}
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = NULL;
	for (int i = 0; list && i < n && !dev; i++)
		if (!want || !strcmp(ibv_get_device_name(list[i]), want))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "idle_qp: no device %s\n", want ? want : "");
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		return die("idle_qp: ibv_open_device");
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 0, &gid))
		return die("idle_qp: ibv_query_gid");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ch ? ibv_create_cq(ctx, 64, NULL, ch, 0) : NULL;
	static char buf[4096];
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) : NULL;
	if (!cq || !mr)
		return die("idle_qp: pd/cq/mr");
	if (ibv_req_notify_cq(cq, 0))
		return die("idle_qp: ibv_req_notify_cq");
	struct ibv_qp_init_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = cq;
	qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 16;
	qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	struct ibv_qp *q1 = ibv_create_qp(pd, &qa), *q2 = ibv_create_qp(pd, &qa);
	if (!q1 || !q2)
		return die("idle_qp: ibv_create_qp");
	if (connect_qp(q1, q2->qp_num, &gid) || connect_qp(q2, q1->qp_num, &gid))
		return die("idle_qp: ibv_modify_qp");
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sge = { (uintptr_t)buf, 64, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 }, *bad;
		if (ibv_post_recv(q1, &wr, &bad) || ibv_post_recv(q2, &wr, &bad))
			return die("idle_qp: ibv_post_recv");
	}
	usleep(200000);	/* let start-up work settle before measuring */
	double c0 = cpu_s(), t0 = bench_now_s();
	struct rusage r0, r1;
	getrusage(RUSAGE_SELF, &r0);
	double end = t0 + secs;
	while (bench_now_s() < end)
		usleep(100000);
	double c1 = cpu_s(), t1 = bench_now_s();
	getrusage(RUSAGE_SELF, &r1);
	printf("idle_qp %s: %.2f %% CPU over %.1f s (user %.3f s, sys %.3f s)\n",
	       ibv_get_device_name(dev), 100 * (c1 - c0) / (t1 - t0), t1 - t0,
	       (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
			(double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6,
	       (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
			(double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6);
	ibv_destroy_qp(q1);
	ibv_destroy_qp(q2);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
