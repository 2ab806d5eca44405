/* A memory window between two processes of this host: B binds a type 2
 * window onto its buffer and hands its rkey to A over a pipe; A writes
 * and reads through it; B invalidates it (LOCAL_INV) and A's next WRITE
 * completes IBV_WC_REM_ACCESS_ERR at once, on the default (same-host)
 * path as on the UDP path: a window's key is never in the MR directory,
 * so a same-host peer cannot reach the memory past the window's owner. */
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t_rc.h"

#define WIN_OFF 8192u
#define WIN_LEN 4096u

struct msg {
	struct t_conn conn;
	uint32_t win_rkey;
	uint64_t win_addr;
};

static void xfer(int fd, void *p, size_t n, bool out)
{
	ssize_t r = out ? write(fd, p, n) : read(fd, p, n);

	if (r != (ssize_t)n) {
		fprintf(stderr, "FAIL: pipe %s\n", out ? "write" : "read");
		exit(1);
	}
}

/* B: owns the window. */
static int owner(int rd, int wr)
{
	struct t_end b;
	struct msg me, peer;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	struct ibv_send_wr w = { .wr_id = 1, .opcode = IBV_WR_BIND_MW,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	char go;

	if (t_end_init(&b))
		return 77;
	mr = ibv_reg_mr(b.pd, b.buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
	CHECK(mr && mw, "B: MR and window");
	if (!mr || !mw)
		return 1;
	me.conn = t_info(&b, 200);
	xfer(wr, &me, sizeof(me), true);
	xfer(rd, &peer, sizeof(peer), false);
	CHECK(!t_connect(&b, 200, &peer.conn, 8, 7, 1), "B: connect");
	w.bind_mw.mw = mw;
	w.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	w.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = mr, .addr = (uintptr_t)b.buf + WIN_OFF, .length = WIN_LEN,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
	CHECK(!ibv_post_send(b.qp, &w, &bad) && !t_wait(b.cq, &wc) && wc.status == IBV_WC_SUCCESS,
	      "B: bind");
	me.win_rkey = w.bind_mw.rkey;
	me.win_addr = (uintptr_t)b.buf + WIN_OFF;
	xfer(wr, &me, sizeof(me), true);
	xfer(rd, &go, 1, false);     /* A wrote 'W' at the window's start */
	CHECK(b.buf[WIN_OFF] == 'W', "B: A's WRITE landed (0x%02x)", b.buf[WIN_OFF]);
	w = (struct ibv_send_wr){ .wr_id = 2, .opcode = IBV_WR_LOCAL_INV,
				  .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = me.win_rkey };
	CHECK(!ibv_post_send(b.qp, &w, &bad) && !t_wait(b.cq, &wc) && wc.status == IBV_WC_SUCCESS,
	      "B: LOCAL_INV");
	xfer(wr, &go, 1, true);
	xfer(rd, &go, 1, false);     /* A is done */
	CHECK(b.buf[WIN_OFF + 8] == 0, "B: nothing written after the invalidation");
	ibv_dealloc_mw(mw);
	ibv_dereg_mr(mr);
	t_end_fini(&b);
	return failures ? 1 : 0;
}

static enum ibv_wc_status op(struct t_end *a, enum ibv_wr_opcode opc, uint32_t rkey,
			     uint64_t raddr, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)a->buf, .length = len, .lkey = a->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = opc,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	wr.wr.rdma.rkey = rkey;
	wr.wr.rdma.remote_addr = raddr;
	if (ibv_post_send(a->qp, &wr, &bad) || t_wait(a->cq, &wc))
		return IBV_WC_GENERAL_ERR;
	return wc.status;
}

int main(void)
{
	int to_a[2], to_b[2], st = 0;
	struct t_end a;
	struct msg me, peer;
	enum ibv_wc_status s;
	pid_t pid;
	char go = 'g';

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(to_a) || pipe(to_b))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(to_b[1]);
		close(to_a[0]);
		_exit(owner(to_b[0], to_a[1]));
	}
	close(to_b[0]);
	close(to_a[1]);
	if (t_end_init(&a)) {
		printf("SKIP: srn_lo not available\n");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return 77;
	}
	xfer(to_a[0], &peer, sizeof(peer), false);
	me.conn = t_info(&a, 100);
	xfer(to_b[1], &me, sizeof(me), true);
	CHECK(!t_connect(&a, 100, &peer.conn, 8, 7, 1), "A: connect");
	xfer(to_a[0], &peer, sizeof(peer), false);
	printf("window rkey 0x%x from process %d\n", peer.win_rkey, (int)pid);

	a.buf[0] = 'W';
	s = op(&a, IBV_WR_RDMA_WRITE, peer.win_rkey, peer.win_addr, 1);
	printf("  WRITE through the window: %s\n", ibv_wc_status_str(s));
	CHECK(s == IBV_WC_SUCCESS, "WRITE through the window");
	a.buf[0] = 0;
	s = op(&a, IBV_WR_RDMA_READ, peer.win_rkey, peer.win_addr, 1);
	CHECK(s == IBV_WC_SUCCESS && a.buf[0] == 'W', "READ it back: %s", ibv_wc_status_str(s));
	s = op(&a, IBV_WR_RDMA_WRITE, peer.conn.rkey, peer.conn.addr, 8);
	CHECK(s == IBV_WC_SUCCESS, "WRITE through B's plain MR: %s", ibv_wc_status_str(s));
	xfer(to_b[1], &go, 1, true);
	xfer(to_a[0], &go, 1, false); /* B invalidated it */
	a.buf[0] = 'X';
	s = op(&a, IBV_WR_RDMA_WRITE, peer.win_rkey, peer.win_addr + 8, 1);
	printf("  WRITE after B's LOCAL_INV: %s\n", ibv_wc_status_str(s));
	CHECK(s == IBV_WC_REM_ACCESS_ERR, "WRITE after LOCAL_INV: %s", ibv_wc_status_str(s));
	xfer(to_b[1], &go, 1, true);
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "B exits 0 (status 0x%x)", st);
	t_end_fini(&a);
	printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
