/* UD multicast end to end: group ::ffff:239.1.2.3, three member QPs in
 * two processes (two QPs on one context here, one in a child process)
 * and a sender that is not a member.  Each member receives exactly one
 * copy of each datagram (dest QPN 0xFFFFFF), with the group address as
 * the GRH's destination; after a detach the detached QP receives nothing
 * while the others still do. */
#include <arpa/inet.h>
#include <sys/wait.h>

#include "t_ud.h"

#define MCAST_QPN 0xffffffu

static union ibv_gid group(void)
{
	union ibv_gid g;

	memset(&g, 0, sizeof(g));
	g.raw[10] = g.raw[11] = 0xff;
	g.raw[12] = 239, g.raw[13] = 1, g.raw[14] = 2, g.raw[15] = 3;
	return g;
}

/* Copies on cq within ms (polls the whole time, so duplicates count). */
static int copies(struct ibv_cq *cq, int ms, int *bad)
{
	struct ibv_wc wc[8];
	double end = t_now() + ms / 1e3;
	int n = 0;

	while (t_now() < end) {
		int k = ibv_poll_cq(cq, 8, wc);

		for (int i = 0; i < k; i++) {
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len != 40 + 256)
				(*bad)++;
			n++;
		}
		if (k == 0)
			usleep(500);
	}
	return n;
}

static int child(int rfd, int wfd)
{
	struct tu_end c;
	union ibv_gid g = group();
	char cmd;
	int bad = 0;

	T_ASSERT(tu_open(&c, TU_QKEY) == 0, "child UD QP");
	for (int i = 0; i < 8; i++)
		T_ASSERT(tu_recv(&c, i) == 0, "child receives posted");
	T_ASSERT(ibv_attach_mcast(c.qp, &g, 0) == 0, "child attaches");
	cmd = 'a';
	T_ASSERT(write(wfd, &cmd, 1) == 1, "child ready");
	while (read(rfd, &cmd, 1) == 1 && cmd != 'q') {
		char n;

		if (cmd == 'd') {
			n = (char)ibv_detach_mcast(c.qp, &g, 0);
		} else {
			n = (char)copies(c.cq, 1000, &bad);
			if (bad)
				n = 100;
		}
		T_ASSERT(write(wfd, &n, 1) == 1, "child answers");
	}
	return 0;
}

static int child_do(int wfd, int rfd, char cmd)
{
	char n = -1;

	if (write(wfd, &cmd, 1) != 1 || read(rfd, &n, 1) != 1)
		return -1;
	return n;
}

int main(void)
{
	struct tu_end a, s;
	struct ibv_cq *cq2;
	struct ibv_qp *p2;
	struct ibv_ah *ah;
	struct ibv_qp_attr qa;
	union ibv_gid g = group();
	int to_c[2], from_c[2], st, bad = 0, n1, n2, nc;
	pid_t pid;
	char ready;

	alarm(60);
	if (!t_lo_device())
		t_skip("srn_lo not available");
	T_ASSERT(pipe(to_c) == 0 && pipe(from_c) == 0, "pipes");
	pid = fork();
	if (pid == 0) {
		close(to_c[1]);
		close(from_c[0]);
		exit(child(to_c[0], from_c[1]));
	}
	close(to_c[0]);
	close(from_c[1]);

	T_OK(tu_open(&a, TU_QKEY) == 0 && tu_open(&s, TU_QKEY) == 0, "member and sender UD QPs");
	cq2 = ibv_create_cq(a.ctx, 64, NULL, NULL, 0);
	p2 = cq2 ? t_qp_create(a.pd, cq2, IBV_QPT_UD, 64) : NULL;
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_INIT;
	qa.port_num = 1;
	qa.qkey = TU_QKEY;
	T_OK(p2 && !ibv_modify_qp(p2, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_QKEY) &&
	     !ibv_modify_qp(p2, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR }, IBV_QP_STATE),
	     "second member QP on the same context (RTR: receive only)");
	for (int i = 0; i < 8; i++) {
		struct ibv_sge sg = { (uintptr_t)(a.buf + (size_t)(32 + i) * TU_SLOT), TU_SLOT,
				      a.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 32u + (uint64_t)i, .sg_list = &sg, .num_sge = 1 },
				   *bw;

		T_CHECK(tu_recv(&a, i) == 0 && ibv_post_recv(p2, &wr, &bw) == 0, "receives");
	}
	T_OK(ibv_attach_mcast(a.qp, &g, 0) == 0 && ibv_attach_mcast(p2, &g, 0) == 0,
	     "two QPs of this process attach to ::ffff:239.1.2.3");
	T_OK(read(from_c[0], &ready, 1) == 1 && ready == 'a', "the child's QP attached");
	ah = tu_ah(&s, &g);
	T_OK(ah != NULL, "AH to the group");

	/* round 1: three members */
	T_OK(tu_send(&s, 0, 256, 0x11, ah, MCAST_QPN, TU_QKEY) == 0 &&
	     t_poll_cq(s.cq, (struct ibv_wc[1]){ 0 }, 1, 2000) == 1, "send to the group");
	nc = child_do(to_c[1], from_c[0], 'r');
	n1 = copies(a.cq, 200, &bad);
	n2 = copies(cq2, 200, &bad);
	T_OK(n1 == 1 && n2 == 1 && nc == 1 && bad == 0,
	     "3 members, 2 processes: one copy each (%d, %d, child %d)", n1, n2, nc);
	T_OK(tu_payload_ok(&a, 0, 256, 0x11) && a.buf[20] == 0x45 &&
	     a.buf[20 + 16] == 239 && a.buf[20 + 19] == 3,
	     "payload intact, GRH destination is the group address");

	/* round 2: the second QP here detaches */
	T_OK(ibv_detach_mcast(p2, &g, 0) == 0, "detach the second QP");
	T_OK(tu_send(&s, 1, 256, 0x22, ah, MCAST_QPN, TU_QKEY) == 0 &&
	     t_poll_cq(s.cq, (struct ibv_wc[1]){ 0 }, 1, 2000) == 1, "send again");
	nc = child_do(to_c[1], from_c[0], 'r');
	n1 = copies(a.cq, 200, &bad);
	n2 = copies(cq2, 200, &bad);
	T_OK(n1 == 1 && n2 == 0 && nc == 1 && bad == 0,
	     "after detach: (%d, %d, child %d) = (1, 0, 1)", n1, n2, nc);

	/* round 3: the child detaches */
	T_OK(child_do(to_c[1], from_c[0], 'd') == 0, "the child detaches");
	T_OK(tu_send(&s, 2, 256, 0x33, ah, MCAST_QPN, TU_QKEY) == 0 &&
	     t_poll_cq(s.cq, (struct ibv_wc[1]){ 0 }, 1, 2000) == 1, "send again");
	nc = child_do(to_c[1], from_c[0], 'r');
	n1 = copies(a.cq, 200, &bad);
	T_OK(n1 == 1 && nc == 0 && bad == 0, "only the remaining member: (%d, child %d)", n1, nc);

	/* wrong Q_Key to the group: nobody */
	T_OK(tu_send(&s, 3, 256, 0x44, ah, MCAST_QPN, 0x1234) == 0 &&
	     t_poll_cq(s.cq, (struct ibv_wc[1]){ 0 }, 1, 2000) == 1 && copies(a.cq, 200, &bad) == 0,
	     "wrong Q_Key to the group: dropped");

	child_do(to_c[1], from_c[0], 'q');
	T_OK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	     "child passed its checks");
	T_OK(ibv_detach_mcast(a.qp, &g, 0) == 0, "last member detaches");
	return t_summary();
}
