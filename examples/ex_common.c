/* examples/ex_common.c: the steps every RC example takes before and after
 * its own verbs (see ex_common.h for the order).  Read it once; each
 * example then shows only what differs: the MR's access flags and the
 * work requests it posts. */
#include "ex_common.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EX_WAIT_SEC 20  /* longest wait for a completion or the peer */
#define EX_ALARM_SEC 60 /* the whole run, whatever happens */

static const char *ex_device;
static pid_t ex_child; /* in the server: the client's pid */

void ex_say(const struct ex_side *s, const char *fmt, ...)
{
	va_list ap;

	printf("[%s] ", s->role);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

void ex_fail(const struct ex_side *s, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[%s] FAILED: ", s->role);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	if (ex_child > 0) { /* the server does not leave its client behind */
		kill(ex_child, SIGKILL);
		waitpid(ex_child, NULL, 0);
	}
	exit(1);
}

static int start(struct ex_side *s, int argc, char **argv)
{
	int opt, sv[2];

	s->role = "server";
	while ((opt = getopt(argc, argv, "d:")) != -1) {
		if (opt != 'd') {
			fprintf(stderr, "usage: %s [-d DEVICE]\n", argv[0]);
			exit(2);
		}
		ex_device = optarg;
	}
	/* Fork before any verbs call: a verbs context belongs to one process. */
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		ex_fail(s, "socketpair: %s", strerror(errno));
	struct timeval tv = { .tv_sec = EX_WAIT_SEC };
	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	alarm(EX_ALARM_SEC);
	ex_child = fork();
	if (ex_child < 0)
		ex_fail(s, "fork: %s", strerror(errno));
	if (ex_child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan if the server dies */
		s->role = "client";
		s->sock = sv[1];
		close(sv[0]);
		return 1;
	}
	s->sock = sv[0];
	close(sv[1]);
	return 0;
}

/* Step 1: the device.  Each softrnic device is a network interface
 * (srn_lo is loopback); prefer it, so the example needs no network. */
static struct ibv_context *open_device(struct ex_side *s)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = NULL;

	if (!list || n == 0)
		ex_fail(s, "no RDMA device (ibv_get_device_list)");
	const char *want = ex_device ? ex_device : "srn_lo";
	for (int i = 0; i < n && !dev; i++)
		if (!strcmp(ibv_get_device_name(list[i]), want))
			dev = list[i];
	if (!dev && !ex_device)
		dev = list[0];
	if (!dev)
		ex_fail(s, "no device named %s", want);
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		ex_fail(s, "ibv_open_device(%s): %s", ibv_get_device_name(dev), strerror(errno));
	ex_say(s, "opened device %s", ibv_get_device_name(dev));
	ibv_free_device_list(list);
	return ctx;
}

void ex_alloc(struct ex_side *s, struct ibv_context *ctx, size_t len, int mr_access)
{
	s->ctx = ctx;

	/* Step 2: a protection domain.  MRs and QPs of one PD may be used
	 * together; a QP cannot use an MR of another PD. */
	s->pd = ibv_alloc_pd(ctx);
	if (!s->pd)
		ex_fail(s, "ibv_alloc_pd: %s", strerror(errno));

	/* Step 3: register the buffer.  The NIC may touch only registered
	 * memory: lkey names it in our own work requests, rkey is what the
	 * peer must present to read, write or update it remotely, and only
	 * as far as the access flags allow. */
	s->len = len;
	s->buf = aligned_alloc(4096, len);
	if (!s->buf)
		ex_fail(s, "aligned_alloc(%zu)", len);
	memset(s->buf, 0, len);
	s->mr = ibv_reg_mr(s->pd, s->buf, len, mr_access);
	if (!s->mr)
		ex_fail(s, "ibv_reg_mr: %s", strerror(errno));
	ex_say(s, "registered %zu bytes: lkey 0x%x rkey 0x%x", len, s->mr->lkey, s->mr->rkey);

	/* Step 4: a completion queue, where finished work requests are
	 * reported.  One CQ may serve both the send and the receive queue. */
	s->cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!s->cq)
		ex_fail(s, "ibv_create_cq: %s", strerror(errno));
}

void ex_open(struct ex_side *s, size_t len, int mr_access, int qp_access)
{
	ex_alloc(s, open_device(s), len, mr_access);

	/* Step 5: a reliable-connected queue pair: a send queue and a receive
	 * queue, each at most max_*_wr work requests deep. */
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	s->qp = ibv_create_qp(s->pd, &ia);
	if (!s->qp)
		ex_fail(s, "ibv_create_qp: %s", strerror(errno));

	/* RESET -> INIT: which port, and what the peer may do through this QP
	 * (checked as well as the MR's own flags). */
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = qp_access };
	int err = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		ex_fail(s, "ibv_modify_qp(INIT): %s", strerror(err));
	ex_say(s, "created PD, CQ and RC QP %u (state INIT)", s->qp->qp_num);

	s->me.qpn = s->qp->qp_num;
	s->me.psn = (uint32_t)rand_r(&(unsigned){ (unsigned)getpid() }) & 0xffffff;
	s->me.rkey = s->mr->rkey;
	s->me.addr = (uintptr_t)s->buf;
	/* GID index 0: on softrnic the interface's IPv4 address, as ::ffff:a.b.c.d */
	if (ibv_query_gid(s->ctx, 1, 0, &s->me.gid))
		ex_fail(s, "ibv_query_gid(port 1, index 0): %s", strerror(errno));
}

/* Write ours, read theirs: the same struct both ways. */
static void swap(struct ex_side *s, const void *out, void *in, size_t len)
{
	if (write(s->sock, out, len) != (ssize_t)len)
		ex_fail(s, "write to peer: %s", strerror(errno));
	for (size_t got = 0; got < len;) {
		ssize_t n = read(s->sock, (char *)in + got, len - got);
		if (n <= 0)
			ex_fail(s, "read from peer: %s", n ? strerror(errno) : "peer gone");
		got += (size_t)n;
	}
}

void ex_sync(struct ex_side *s)
{
	char a = '.', b;

	swap(s, &a, &b, 1);
}

int ex_qp_connect(struct ibv_qp *qp, const struct ex_peer_info *me,
		  const struct ex_peer_info *peer, enum ibv_mtu mtu, uint8_t rd_atomic,
		  const char **step)
{
	/* INIT -> RTR (ready to receive): the peer's address (a GRH with its
	 * GID: RoCE is routed by IP), QPN and first PSN, and how many READs
	 * and atomics it may have outstanding at us. */
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = mtu,
		.dest_qp_num = peer->qpn, .rq_psn = peer->psn,
		.max_dest_rd_atomic = rd_atomic, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = peer->gid, .sgid_index = 0, .hop_limit = 64 } },
	};
	int err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	*step = "ibv_modify_qp(RTR)";
	if (err)
		return err;

	/* RTR -> RTS (ready to send): our first PSN, the ACK timeout
	 * (4.096 us * 2^14, ~67 ms) and how often to retry before giving up
	 * with IBV_WC_RETRY_EXC_ERR (or IBV_WC_RNR_RETRY_EXC_ERR when the
	 * peer had no receive posted; 7 = retry for ever). */
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = me->psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = rd_atomic;
	*step = "ibv_modify_qp(RTS)";
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

void ex_connect(struct ex_side *s)
{
	/* Step 6: out of band, tell the peer who we are. */
	swap(s, &s->me, &s->peer, sizeof(s->me));
	ex_say(s, "peer: QPN %u, buffer 0x%llx, rkey 0x%x", s->peer.qpn,
	       (unsigned long long)s->peer.addr, s->peer.rkey);

	const char *step;
	int err = ex_qp_connect(s->qp, &s->me, &s->peer, IBV_MTU_1024, 4, &step);
	if (err)
		ex_fail(s, "%s: %s", step, strerror(err));
	ex_say(s, "QP %u connected to QP %u (state RTS)", s->qp->qp_num, s->peer.qpn);
}

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct ibv_wc ex_wait_wc(struct ex_side *s, enum ibv_wc_opcode want)
{
	struct ibv_wc wc;
	double deadline = now_sec() + EX_WAIT_SEC;
	int n;

	/* Busy polling: the lowest latency, one CPU busy while waiting.
	 * (ibv_req_notify_cq + a completion channel would sleep instead.) */
	while ((n = ibv_poll_cq(s->cq, 1, &wc)) == 0)
		if (now_sec() > deadline)
			ex_fail(s, "no completion within %d s", EX_WAIT_SEC);
	if (n < 0)
		ex_fail(s, "ibv_poll_cq failed");
	if (wc.status != IBV_WC_SUCCESS)
		ex_fail(s, "work request %llu completed with %s", (unsigned long long)wc.wr_id,
			ibv_wc_status_str(wc.status));
	if (wc.opcode != want)
		ex_fail(s, "completion opcode %d, expected %d", wc.opcode, want);
	return wc;
}

void ex_post_send(struct ex_side *s, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int err = ibv_post_send(s->qp, wr, &bad);

	if (err)
		ex_fail(s, "ibv_post_send: %s", strerror(err));
}

void ex_post_recv(struct ex_side *s, size_t off, uint32_t len, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf + off, .length = len,
			       .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;
	int err = ibv_post_recv(s->qp, &wr, &bad);

	if (err)
		ex_fail(s, "ibv_post_recv: %s", strerror(err));
}

void ex_close(struct ex_side *s)
{
	int err;

	/* Reverse order of creation: a PD cannot go while its MRs and QPs do. */
	if ((err = ibv_destroy_qp(s->qp)) || (err = ibv_destroy_cq(s->cq)) ||
	    (err = ibv_dereg_mr(s->mr)) || (err = ibv_dealloc_pd(s->pd)) ||
	    (err = ibv_close_device(s->ctx)))
		ex_fail(s, "teardown: %s", strerror(err));
	free(s->buf);
}

static _Noreturn void finish(struct ex_side *s)
{
	int status;

	if (ex_child == 0) {
		ex_say(s, "done");
		exit(0);
	}
	if (waitpid(ex_child, &status, 0) != ex_child)
		ex_fail(s, "waitpid: %s", strerror(errno));
	ex_child = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		ex_fail(s, "the client failed (status 0x%x)", status);
	ex_say(s, "done: both sides passed");
	exit(0);
}

int ex_run(int argc, char **argv, void (*server)(struct ex_side *),
	   void (*client)(struct ex_side *))
{
	struct ex_side s = { 0 };

	if (start(&s, argc, argv))
		client(&s);
	else
		server(&s);
	finish(&s);
}
