/* UDP port 4791 moves to a surviving engine when its holder goes
 * (net/roce_port.h).  In a network namespace of its own (so no other test's
 * engine holds 127.0.0.1:4791), three processes open srn_lo in turn:
 *
 *   A first: it holds 4791 (a socket of its own is bound there);
 *   B, C after it: ephemeral ports; each has a UD QP with receives posted.
 *
 * 1. A is SIGKILLed (a crash: nothing but the kernel closes its files).
 *    Within TAKEOVER_MS one of B and C (X: whichever binds first) holds
 *    4791, and a "remote" peer -- a plain UDP socket sending a valid
 *    RoCEv2 UD SEND (ICRC and all, built with wire/) to 127.0.0.1:4791,
 *    as another host would -- reaches X's QP (a receive completion with
 *    the bytes), and through X (qp_forward) the other's, Y's.
 * 2. X closes its device while it lives on: Y takes 4791 over within
 *    TAKEOVER_MS and the remote-style packet for Y's QP reaches it.
 *    At the end Y closes its device too, and removes the FIFO.
 *
 * With steering (net/steer.h, the default) B and C join 4791's group as
 * they open the device, so the "takeover" is instant, and the packet for
 * Y's QP reaches Y straight from the kernel, also under
 * SOFTRNIC_TRANSPORT=udp, where there are no inboxes to forward through.
 * With SOFTRNIC_STEER=0 (CTest's unit/test_port_takeover_nosteer) B and C
 * listen on ephemeral ports until they take 4791 over.
 *
 * Root only (the namespace); skips (77) otherwise.  Every wait is bounded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"
#include "wire/wire.h"

enum { ROCE_PORT = 4791, NODES = 3, TAKEOVER_MS = 200, QKEY = 0x11111111, MSG = 64, RBUF = 40 + MSG };

enum cmd { CMD_NONE, CMD_OPEN, CMD_CHECK, CMD_RECV, CMD_CLOSE, CMD_EXIT };

struct node {
	_Atomic int cmd, seq, done;  /* parent writes cmd then seq; child done = seq */
	uint32_t qpn;
	int holds;                   /* a socket of ours is bound to 4791 */
	int port;                    /* our main socket's port (first non-4791) */
	double hold_at;              /* CLOCK_MONOTONIC s when we saw 4791 ours */
	int wc_ok;                   /* a receive completed with the bytes sent */
	char wc_what[96];
};

static struct node *board;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Ports of the UDP sockets this process has on 127.0.0.1: does one have
 * 4791?  *other gets another one's port (our engine's own). */
static int holds_4791(int *other)
{
	int found = 0;

	for (int fd = 0; fd < 256; fd++) {
		struct sockaddr_in sa;
		socklen_t len = sizeof(sa);
		int type = 0;
		socklen_t tl = sizeof(type);

		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_DGRAM)
			continue;
		if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0 || sa.sin_family != AF_INET)
			continue;
		if (ntohs(sa.sin_port) == ROCE_PORT)
			found = 1;
		else if (other && ntohs(sa.sin_port))
			*other = ntohs(sa.sin_port);
	}
	return found;
}

/* ---- a node (child process) -------------------------------------------- */

struct res {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	uint8_t buf[4 * RBUF];
};

static void node_open(struct node *me, struct res *r)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	r->ctx = t_lo_open();
	r->pd = ibv_alloc_pd(r->ctx);
	r->cq = r->pd ? ibv_create_cq(r->ctx, 8, NULL, NULL, 0) : NULL;
	r->mr = r->cq ? ibv_reg_mr(r->pd, r->buf, sizeof(r->buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	r->qp = r->mr ? t_qp_create(r->pd, r->cq, IBV_QPT_UD, 4) : NULL;
	T_ASSERT(r->qp, "UD QP: %s", strerror(errno));
	T_ASSERT(!ibv_modify_qp(r->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				IBV_QP_QKEY), "UD QP to INIT");
	a.qp_state = IBV_QPS_RTR;
	T_ASSERT(!ibv_modify_qp(r->qp, &a, IBV_QP_STATE), "UD QP to RTR");
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sge = { (uintptr_t)(r->buf + i * RBUF), RBUF, r->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 },
				   *bad;

		T_ASSERT(!ibv_post_recv(r->qp, &wr, &bad), "post_recv");
	}
	me->qpn = r->qp->qp_num;
	me->holds = holds_4791(&me->port);
}

static void node_check(struct node *me)
{
	me->holds = holds_4791(NULL);
	me->hold_at = now_s();
}

static void node_recv(struct node *me, struct res *r)
{
	double end = now_s() + 3.0;
	struct ibv_wc wc;
	int n = 0;

	me->wc_ok = 0;
	snprintf(me->wc_what, sizeof(me->wc_what), "no completion in 3 s");
	while (now_s() < end && (n = ibv_poll_cq(r->cq, 1, &wc)) == 0)
		usleep(100);
	if (n != 1)
		return;
	snprintf(me->wc_what, sizeof(me->wc_what), "status %s, %u bytes",
		 ibv_wc_status_str(wc.status), wc.byte_len);
	if (wc.status == IBV_WC_SUCCESS && wc.byte_len == 40 + MSG && wc.wr_id < 4) {
		const uint8_t *p = r->buf + wc.wr_id * RBUF + 40;

		me->wc_ok = 1;
		for (int i = 0; i < MSG; i++)
			me->wc_ok &= p[i] == (uint8_t)(me->qpn + (uint32_t)i);
	}
}

static void node_close(struct node *me, struct res *r)
{
	ibv_destroy_qp(r->qp);
	ibv_dereg_mr(r->mr);
	ibv_destroy_cq(r->cq);
	ibv_dealloc_pd(r->pd);
	ibv_close_device(r->ctx);
	r->ctx = NULL;
	me->holds = holds_4791(NULL);
}

static void node_main(int i)
{
	struct node *me = &board[i];
	struct res r = { 0 };
	int seen = 0;
	double end = now_s() + 30;

	t_set_tag("node %c", 'A' + i);
	alarm(40);
	while (now_s() < end) {
		int s = atomic_load(&me->seq);

		if (s == seen) {
			usleep(100);
			continue;
		}
		seen = s;
		switch (atomic_load(&me->cmd)) {
		case CMD_OPEN: node_open(me, &r); break;
		case CMD_CHECK: node_check(me); break;
		case CMD_RECV: node_recv(me, &r); break;
		case CMD_CLOSE: node_close(me, &r); break;
		case CMD_EXIT:
			if (r.ctx)
				node_close(me, &r); /* the holder removes the FIFO */
			_exit(0);
		default: break;
		}
		atomic_store(&me->done, s);
	}
	_exit(1);
}

/* ---- the parent: a remote peer and the judge ---------------------------- */

static int run(pid_t pid, int i, enum cmd c, double timeout_s)
{
	struct node *n = &board[i];
	int s = atomic_load(&n->seq) + 1;
	double end = now_s() + timeout_s;

	atomic_store(&n->cmd, c);
	atomic_store(&n->seq, s);
	while (atomic_load(&n->done) != s) {
		int st;

		if (now_s() > end || waitpid(pid, &st, WNOHANG) == pid)
			return -1;
		usleep(200);
	}
	return 0;
}

/* Which of B and C holds 4791 (polled for up to 2 s); 0 = neither.  Its
 * hold_at is when it saw so, at most one round trip late. */
static int wait_holder(const pid_t *pid, double t0)
{
	while (now_s() < t0 + 2) {
		for (int i = 1; i < NODES; i++) {
			if (board[i].qpn == 0 || run(pid[i], i, CMD_CHECK, 1) < 0)
				continue;
			if (board[i].holds)
				return i;
		}
		usleep(200);
	}
	return 0;
}

/* What a RoCEv2 peer on another host does: a UD SEND_ONLY to dqpn at
 * 127.0.0.1:4791 from a UDP socket of its own (DF set, so IPv4 ID 0, the
 * one the ICRC is computed with). */
static int remote_send(uint32_t dqpn)
{
	struct sockaddr_in me = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
	struct wire_pkt pkt = { 0 };
	struct wire_l3 l3 = { .family = AF_INET };
	uint8_t buf[WIRE_MAX_HDR_LEN + MSG + WIRE_ICRC_LEN];
	socklen_t len = sizeof(me);
	int fd, pmtu = IP_PMTUDISC_DO, hl;
	uint32_t icrc;
	struct iovec iov;
	ssize_t sent;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_port = htons(ROCE_PORT);
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&me, &len) < 0) {
		close(fd);
		return -1;
	}
	pkt.opcode = WIRE_UD | WIRE_SEND_ONLY;
	pkt.pkey = 0xffff;
	pkt.dqpn = dqpn;
	pkt.psn = 7;
	pkt.qkey = QKEY;
	pkt.sqpn = 0x1234;
	pkt.padcnt = wire_padcnt(MSG);
	hl = wire_encode_hdrs(buf, &pkt);
	for (int i = 0; i < MSG; i++)
		buf[hl + i] = (uint8_t)(dqpn + (uint32_t)i);
	memcpy(l3.src, &me.sin_addr, 4);
	memcpy(l3.dst, &to.sin_addr, 4);
	l3.sport = ntohs(me.sin_port);
	l3.dport = ROCE_PORT;
	iov = (struct iovec){ buf, (size_t)hl + MSG };
	icrc = wire_icrc(&l3, &iov, 1);
	for (int i = 0; i < 4; i++)
		buf[hl + MSG + i] = (uint8_t)(icrc >> (8 * i));
	sent = sendto(fd, buf, (size_t)hl + MSG + WIRE_ICRC_LEN, 0, (struct sockaddr *)&to,
		      sizeof(to));
	close(fd);
	return sent == hl + MSG + WIRE_ICRC_LEN ? 0 : -1;
}

/* Our own network namespace with loopback up: 127.0.0.1:4791 is ours. */
static void private_net(void)
{
	struct ifreq ifr = { 0 };
	int fd;

	if (unshare(CLONE_NEWNET) < 0)
		t_skip("unshare(CLONE_NEWNET): %s (root only)", strerror(errno));
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		t_skip("lo in the new namespace: %s", strerror(errno));
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		t_skip("lo up: %s", strerror(errno));
	close(fd);
}

int main(void)
{
	pid_t pid[NODES];
	double t0;
	int st, x, y;
	const char *tr = getenv("SOFTRNIC_TRANSPORT"), *sv = getenv("SOFTRNIC_STEER");
	bool steer = !sv || strcmp(sv, "0"), udp = tr && !strcmp(tr, "udp");

	private_net();
	board = mmap(NULL, sizeof(*board) * NODES, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	T_ASSERT(board != MAP_FAILED, "shared board");
	memset(board, 0, sizeof(*board) * NODES);
	for (int i = 0; i < NODES; i++) {
		pid[i] = fork();
		T_ASSERT(pid[i] >= 0, "fork");
		if (pid[i] == 0)
			node_main(i);
	}

	/* A, then B and C */
	for (int i = 0; i < NODES; i++)
		T_ASSERT(run(pid[i], i, CMD_OPEN, 10) == 0, "node %c opened srn_lo", 'A' + i);
	T_OK(board[0].holds, "A, first on 127.0.0.1, holds port 4791");
	for (int i = 1; i < NODES; i++) {
		if (steer)
			T_OK(board[i].holds && board[i].port, "%c joined 4791's group beside its "
			     "own port (%d)", 'A' + i, board[i].port);
		else
			T_OK(!board[i].holds && board[i].port, "%c listens on an ephemeral port (%d)",
			     'A' + i, board[i].port);
	}

	/* 1. A crashes: B or C takes 4791 over, whichever binds first */
	t0 = now_s();
	kill(pid[0], SIGKILL);
	waitpid(pid[0], &st, 0);
	x = wait_holder(pid, t0);
	T_OK(x > 0, "B or C holds port 4791 after A was SIGKILLed (%c)", x > 0 ? 'A' + x : '-');
	if (x <= 0)
		return t_summary();
	T_OK((board[x].hold_at - t0) * 1000 <= TAKEOVER_MS, "%c took it over in %.1f ms (bound %d ms)",
	     'A' + x, (board[x].hold_at - t0) * 1000, TAKEOVER_MS);
	y = 3 - x;
	T_OK(!holds_4791(NULL), "(the test process holds no 4791 socket)");

	T_ASSERT(remote_send(board[x].qpn) == 0, "remote-style UD SEND to %c's QP %u sent to 4791",
		 'A' + x, board[x].qpn);
	T_ASSERT(run(pid[x], x, CMD_RECV, 5) == 0, "%c polled", 'A' + x);
	T_OK(board[x].wc_ok, "%c's QP received it (%s)", 'A' + x, board[x].wc_what);
	if (udp && !steer) {
		printf("(SOFTRNIC_TRANSPORT=udp: no inboxes, no forwarding to %c)\n", 'A' + y);
	} else {
		/* A's socket left the group: the program is stale until a
		 * census, which the first datagram that reaches the wrong
		 * engine starts.  UD loses what comes before: a few tries. */
		for (int t = 0; t < 4 && !board[y].wc_ok; t++) {
			T_ASSERT(remote_send(board[y].qpn) == 0,
				 "remote-style UD SEND to %c's QP %u sent to 4791", 'A' + y,
				 board[y].qpn);
			T_ASSERT(run(pid[y], y, CMD_RECV, 5) == 0, "%c polled", 'A' + y);
			if (!steer)
				break;
		}
		T_OK(board[y].wc_ok, "%c's QP received it, %s (%s)", 'A' + y,
		     steer ? "steered to it" : "forwarded", board[y].wc_what);
	}

	/* 2. the new holder closes its device but lives on: the other
	 * takes 4791 over */
	t0 = now_s();
	T_ASSERT(run(pid[x], x, CMD_CLOSE, 5) == 0, "%c closed srn_lo", 'A' + x);
	T_OK(!board[x].holds, "%c holds no 4791 socket after ibv_close_device", 'A' + x);
	T_OK(wait_holder(pid, t0) == y, "%c holds port 4791 after %c closed its device", 'A' + y,
	     'A' + x);
	if (board[y].holds)
		T_OK((board[y].hold_at - t0) * 1000 <= TAKEOVER_MS,
		     "%c took it over in %.1f ms (bound %d ms)", 'A' + y,
		     (board[y].hold_at - t0) * 1000, TAKEOVER_MS);
	T_ASSERT(remote_send(board[y].qpn) == 0, "remote-style UD SEND to %c's QP sent to 4791",
		 'A' + y);
	T_ASSERT(run(pid[y], y, CMD_RECV, 5) == 0, "%c polled", 'A' + y);
	T_OK(board[y].wc_ok, "%c's QP received it (%s)", 'A' + y, board[y].wc_what);

	for (int i = 1; i < NODES; i++) {
		if (run(pid[i], i, CMD_EXIT, 2) < 0)
			kill(pid[i], SIGKILL);
		waitpid(pid[i], &st, 0);
	}
	return t_summary();
}
