/* XRC, black-box (docs/xrc.md): domains (ibv_open_xrcd's fd/oflags rules,
 * one inode's domain across processes, EBUSY while in use), XRC SRQ
 * numbers, traffic from an initiator in one context to a target in
 * another (SEND, WRITE with immediate, READ, atomics), ibv_open_qp, and
 * the target's protection checks: an SRQ number that does not exist, one
 * of another domain, one destroyed, an rkey of a PD other than the SRQ's,
 * a receive WQE whose lkey is outside the SRQ's PD.
 * A child process (this program again) checks the cross-process domain. */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/t_verbs.h"

extern char **environ;

enum { BUF = 4096, WR = 16 };

/* The target side: a domain, two SRQs in it (PD pd), an SRQ of another
 * domain, MRs in pd and in pd2. */
struct tgt {
	struct ibv_context *ctx;
	struct ibv_pd *pd, *pd2;
	struct ibv_cq *cq;
	struct ibv_xrcd *xrcd, *xrcd2;
	struct ibv_srq *srq, *srq_b, *srq_other;
	uint32_t srqn, srqn_b, srqn_other;
	struct ibv_mr *mr, *mr2;
	uint8_t *buf, *buf2;
};

struct ini {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static struct ibv_xrcd *xrcd_open(struct ibv_context *ctx, int fd, int oflags)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = fd, .oflags = oflags,
	};

	return ibv_open_xrcd(ctx, &a);
}

static struct ibv_srq *xrc_srq(struct tgt *t, struct ibv_xrcd *x, uint32_t *num)
{
	struct ibv_srq_init_attr_ex a = {
		.attr = { .max_wr = WR, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
			     IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_XRC, .xrcd = x, .cq = t->cq, .pd = t->pd,
	};
	struct ibv_srq *s = ibv_create_srq_ex(t->ctx, &a);

	*num = 0;
	if (s && ibv_get_srq_num(s, num))
		*num = 0;
	return s;
}

static void post_srq_recv(struct tgt *t, struct ibv_srq *s, uint64_t id)
{
	struct ibv_sge sge = { (uintptr_t)t->buf, BUF, t->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	T_CHECK(ibv_post_srq_recv(s, &wr, &bad) == 0, "post_srq_recv");
}

/* An XRC pair: initiator in i, target in t's domain, both connected. */
struct pair {
	struct ibv_qp *ini, *tgt;
};

static int connect_pair(struct pair *p, struct ibv_context *ictx, struct ibv_context *tctx)
{
	union ibv_gid gid;
	struct ibv_qp_attr a;
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	int err = ibv_query_gid(tctx, 1, 0, &gid);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = acc;
	err = err ?: ibv_modify_qp(p->tgt, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS);
	a.qp_access_flags = 0;
	err = err ?: ibv_modify_qp(p->ini, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.rq_psn = 100;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.hop_limit = 1;
	a.dest_qp_num = p->ini->qp_num;
	err = err ?: ibv_modify_qp(p->tgt, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	(void)ictx;
	a.dest_qp_num = p->tgt->qp_num;
	/* (an initiator's mask may carry the responder half: ignored) */
	err = err ?: ibv_modify_qp(p->ini, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 100;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	err = err ?: ibv_modify_qp(p->ini, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				   IBV_QP_MAX_QP_RD_ATOMIC);
	return err;
}

static int pair_new(struct pair *p, struct ini *i, struct tgt *t)
{
	struct ibv_qp_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_RECV;
	a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	a.xrcd = t->xrcd;
	p->tgt = ibv_create_qp_ex(t->ctx, &a);
	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_SEND;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = i->pd;
	a.send_cq = i->cq;
	a.cap.max_send_wr = WR;
	a.cap.max_send_sge = 1;
	a.sq_sig_all = 1;
	p->ini = ibv_create_qp_ex(i->ctx, &a);
	if (!p->tgt || !p->ini)
		return -1;
	return connect_pair(p, i->ctx, t->ctx);
}

static void pair_free(struct pair *p)
{
	if (p->ini)
		ibv_destroy_qp(p->ini);
	if (p->tgt)
		ibv_destroy_qp(p->tgt);
}

/* One work request on the initiator; its completion's status (or -1). */
static int post_one(struct pair *p, struct ini *i, enum ibv_wr_opcode op, uint32_t srqn,
		    uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)i->buf, len, i->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = op }, *bad;
	struct ibv_wc wc;

	wr.qp_type.xrc.remote_srqn = srqn;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 5 : 0x1111;
		wr.wr.atomic.swap = 0x2222;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (op == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htobe32(0xabcd);
	if (ibv_post_send(p->ini, &wr, &bad))
		return -1;
	if (t_poll_cq(i->cq, &wc, 1, 5000) != 1)
		return -1;
	return wc.status;
}

static void traffic(struct ini *i, struct tgt *t)
{
	struct pair p = { 0 };
	struct ibv_wc wc;
	uint64_t *word = (uint64_t *)(t->buf + 1024);
	int st;

	T_ASSERT(pair_new(&p, i, t) == 0, "XRC pair created and connected (ini %u tgt %u)",
		 p.ini ? p.ini->qp_num : 0, p.tgt ? p.tgt->qp_num : 0);
	/* SEND into the second SRQ: lands in its buffer, completes on its CQ
	 * naming the target QP */
	memset(i->buf, 0x5a, BUF);
	memset(t->buf, 0, BUF);
	post_srq_recv(t, t->srq_b, 42);
	st = post_one(&p, i, IBV_WR_SEND, t->srqn_b, 1500, 0, 0);
	T_OK(st == IBV_WC_SUCCESS, "SEND to SRQ %u: %s", t->srqn_b, ibv_wc_status_str(st));
	T_OK(t_poll_cq(t->cq, &wc, 1, 5000) == 1 && wc.status == IBV_WC_SUCCESS &&
	     wc.wr_id == 42 && wc.opcode == IBV_WC_RECV && wc.byte_len == 1500 &&
	     wc.qp_num == p.tgt->qp_num,
	     "receive completion: wr_id 42, 1500 bytes, qp_num = target's");
	T_OK(t->buf[0] == 0x5a && t->buf[1499] == 0x5a && t->buf[1500] == 0, "SEND data placed");

	/* WRITE with immediate into the SRQ's PD: data, and a receive from SRQ 1 */
	memset(i->buf, 0x33, BUF);
	post_srq_recv(t, t->srq, 43);
	st = post_one(&p, i, IBV_WR_RDMA_WRITE_WITH_IMM, t->srqn, 64,
		      (uintptr_t)t->buf + 2048, t->mr->rkey);
	T_OK(st == IBV_WC_SUCCESS, "WRITE_WITH_IMM: %s", ibv_wc_status_str(st));
	T_OK(t_poll_cq(t->cq, &wc, 1, 5000) == 1 && wc.status == IBV_WC_SUCCESS &&
	     wc.wr_id == 43 && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
	     (wc.wc_flags & IBV_WC_WITH_IMM) && be32toh(wc.imm_data) == 0xabcd,
	     "WRITE_WITH_IMM's receive completion with imm 0xabcd");
	T_OK(t->buf[2048] == 0x33 && t->buf[2048 + 63] == 0x33, "WRITE data placed");

	/* READ back, atomics */
	memset(i->buf, 0, BUF);
	st = post_one(&p, i, IBV_WR_RDMA_READ, t->srqn, 64, (uintptr_t)t->buf + 2048, t->mr->rkey);
	T_OK(st == IBV_WC_SUCCESS && i->buf[0] == 0x33 && i->buf[63] == 0x33, "READ: %s",
	     ibv_wc_status_str(st));
	*word = 0x1111;
	st = post_one(&p, i, IBV_WR_ATOMIC_CMP_AND_SWP, t->srqn, 8, (uintptr_t)word, t->mr->rkey);
	T_OK(st == IBV_WC_SUCCESS && *(uint64_t *)i->buf == 0x1111 && *word == 0x2222,
	     "CMP_AND_SWP: %s, old 0x%llx, now 0x%llx", ibv_wc_status_str(st),
	     (unsigned long long)*(uint64_t *)i->buf, (unsigned long long)*word);
	st = post_one(&p, i, IBV_WR_ATOMIC_FETCH_AND_ADD, t->srqn, 8, (uintptr_t)word,
		      t->mr->rkey);
	T_OK(st == IBV_WC_SUCCESS && *(uint64_t *)i->buf == 0x2222 && *word == 0x2227,
	     "FETCH_AND_ADD: %s", ibv_wc_status_str(st));
	pair_free(&p);
}

/* A request the target must refuse: the initiator's completion status. */
static void refused(struct ini *i, struct tgt *t, const char *what, enum ibv_wr_opcode op,
		    uint32_t srqn, struct ibv_mr *mr, enum ibv_wc_status want)
{
	struct pair p = { 0 };
	struct ibv_wc wc;
	int st;

	T_ASSERT(pair_new(&p, i, t) == 0, "%s: pair", what);
	st = post_one(&p, i, op, srqn, op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : 64,
		      mr ? (uintptr_t)mr->addr : 0, mr ? mr->rkey : 0);
	T_OK(st == (int)want, "%s: %s (want %s)", what, st < 0 ? "no completion" :
	     ibv_wc_status_str(st), ibv_wc_status_str(want));
	T_OK(t_poll_cq(t->cq, &wc, 1, 50) == 0, "%s: nothing completes at the target", what);
	pair_free(&p);
}

static void protection(struct ini *i, struct tgt *t)
{
	struct ibv_srq *gone;
	uint32_t gone_n;

	post_srq_recv(t, t->srq, 50);
	refused(i, t, "SEND to an SRQ number nobody has", IBV_WR_SEND, t->srqn ^ 0x800000, NULL,
		IBV_WC_REM_INV_REQ_ERR);
	refused(i, t, "SEND to an SRQ of another domain", IBV_WR_SEND, t->srqn_other, NULL,
		IBV_WC_REM_INV_REQ_ERR);
	refused(i, t, "WRITE to an SRQ of another domain", IBV_WR_RDMA_WRITE, t->srqn_other,
		t->mr, IBV_WC_REM_INV_REQ_ERR);
	refused(i, t, "WRITE, rkey of an MR in another PD than the SRQ's", IBV_WR_RDMA_WRITE,
		t->srqn, t->mr2, IBV_WC_REM_ACCESS_ERR);
	refused(i, t, "READ, rkey of an MR in another PD than the SRQ's", IBV_WR_RDMA_READ,
		t->srqn, t->mr2, IBV_WC_REM_ACCESS_ERR);
	refused(i, t, "FETCH_ADD, rkey of an MR in another PD than the SRQ's",
		IBV_WR_ATOMIC_FETCH_AND_ADD, t->srqn, t->mr2, IBV_WC_REM_ACCESS_ERR);
	/* a receive WQE whose lkey is in another PD than the SRQ's: taken,
	 * completed in error on the SRQ's CQ */
	{
		struct ibv_sge sge = { (uintptr_t)t->buf2, BUF, t->mr2->lkey };
		struct ibv_recv_wr wr = { .wr_id = 77, .sg_list = &sge, .num_sge = 1 }, *bad;
		struct pair p = { 0 };
		struct ibv_wc wc;
		int st;

		T_ASSERT(ibv_post_srq_recv(t->srq_b, &wr, &bad) == 0 && pair_new(&p, i, t) == 0,
			 "a WQE of pd2 on SRQ b; a pair");
		st = post_one(&p, i, IBV_WR_SEND, t->srqn_b, 64, 0, 0);
		T_OK(st == IBV_WC_REM_OP_ERR, "SEND into a WQE outside the SRQ's PD: %s",
		     st < 0 ? "none" : ibv_wc_status_str(st));
		T_OK(t_poll_cq(t->cq, &wc, 1, 5000) == 1 && wc.wr_id == 77 &&
		     wc.status == IBV_WC_LOC_PROT_ERR,
		     "the target's WQE completes with a local protection error");
		pair_free(&p);
	}
	gone = xrc_srq(t, t->xrcd, &gone_n);
	T_ASSERT(gone && gone_n, "a third SRQ");
	post_srq_recv(t, gone, 51);
	T_OK(ibv_destroy_srq(gone) == 0, "destroyed it (a WQE still posted)");
	refused(i, t, "SEND to a destroyed SRQ", IBV_WR_SEND, gone_n, NULL, IBV_WC_REM_INV_REQ_ERR);
	/* the WQE posted first is still there for a good request */
	{
		struct pair p = { 0 };
		struct ibv_wc wc;
		int st;

		T_ASSERT(pair_new(&p, i, t) == 0, "pair after the refusals");
		st = post_one(&p, i, IBV_WR_SEND, t->srqn, 64, 0, 0);
		T_OK(st == IBV_WC_SUCCESS && t_poll_cq(t->cq, &wc, 1, 5000) == 1 &&
		     wc.wr_id == 50 && wc.status == IBV_WC_SUCCESS,
		     "then a good SEND takes the WQE the refused ones left (%s)",
		     ibv_wc_status_str(st));
		pair_free(&p);
	}
}

static void open_qp(struct ini *i, struct tgt *t)
{
	struct pair p = { 0 };
	struct ibv_qp_open_attr oa = {
		.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE,
		.qp_type = IBV_QPT_XRC_RECV,
	};
	struct ibv_qp *h;
	struct ibv_wc wc;
	int st;

	T_ASSERT(pair_new(&p, i, t) == 0, "open_qp: pair");
	oa.qp_num = p.tgt->qp_num;
	oa.xrcd = t->xrcd2;
	errno = 0;
	T_OK(!ibv_open_qp(t->ctx, &oa), "open_qp in another domain fails (%s)", strerror(errno));
	oa.xrcd = t->xrcd;
	h = ibv_open_qp(t->ctx, &oa);
	T_OK(h && h->qp_num == p.tgt->qp_num, "open_qp of the target QP by number");
	T_OK(h && ibv_destroy_qp(h) == 0, "the opened handle destroyed");
	post_srq_recv(t, t->srq, 60);
	st = post_one(&p, i, IBV_WR_SEND, t->srqn, 64, 0, 0);
	T_OK(st == IBV_WC_SUCCESS && t_poll_cq(t->cq, &wc, 1, 5000) == 1 && wc.wr_id == 60,
	     "the target QP still receives (%s)", st < 0 ? "none" : ibv_wc_status_str(st));
	pair_free(&p);
}

/* The child: opens path's domain with oflags, prints the errno (0: ok). */
static int child(const char *path, int oflags)
{
	struct ibv_context *ctx = t_lo_open();
	int fd = open(path, O_RDONLY);
	struct ibv_xrcd *x = fd >= 0 ? xrcd_open(ctx, fd, oflags) : NULL;
	int err = x ? 0 : errno;

	if (x)
		ibv_close_xrcd(x);
	ibv_close_device(ctx);
	return err;
}

static int run_child(const char *self, const char *path, int oflags)
{
	char of[16];
	char *argv[] = { (char *)self, "--child", (char *)path, of, NULL };
	pid_t pid;
	int status;

	snprintf(of, sizeof(of), "%d", oflags);
	if (posix_spawn(&pid, self, NULL, NULL, argv, environ))
		return -1;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void domains(const char *self, struct ibv_context *c1, struct ibv_context *c2)
{
	char path[] = "/tmp/srn-xrcd-XXXXXX", path2[] = "/tmp/srn-xrcd-XXXXXX";
	int fd = mkstemp(path), fd2 = mkstemp(path2);
	struct ibv_xrcd *a, *b, *x;
	struct ibv_xrcd_init_attr bad = { .comp_mask = IBV_XRCD_INIT_ATTR_FD, .fd = -1 };

	T_ASSERT(fd >= 0 && fd2 >= 0, "temporary files");
	errno = 0;
	T_OK(!ibv_open_xrcd(c1, &bad) && errno == EINVAL, "no OFLAGS in comp_mask: EINVAL");
	errno = 0;
	T_OK(!xrcd_open(c1, -1, 0) && errno == EINVAL, "fd -1 without O_CREAT: EINVAL");
	errno = 0;
	T_OK(!xrcd_open(c1, fd, O_CREAT | O_APPEND) && errno == EINVAL, "oflags O_APPEND: EINVAL");
	x = xrcd_open(c1, -1, O_CREAT);
	T_OK(x && ibv_close_xrcd(x) == 0, "fd -1, O_CREAT: a domain of no inode");
	errno = 0;
	T_OK(!xrcd_open(c1, fd, 0) && errno == ENOENT, "no domain for the inode yet: ENOENT");
	a = xrcd_open(c1, fd, O_CREAT | O_EXCL);
	T_OK(a != NULL, "O_CREAT|O_EXCL creates the inode's domain");
	errno = 0;
	T_OK(!xrcd_open(c2, fd, O_CREAT | O_EXCL) && errno == EEXIST,
	     "again, other context: EEXIST");
	b = xrcd_open(c2, fd, 0);
	T_OK(b != NULL, "other context, oflags 0: joins it");
	T_OK(run_child(self, path, O_CREAT | O_EXCL) == EEXIST,
	     "another process, O_CREAT|O_EXCL: EEXIST");
	T_OK(run_child(self, path, 0) == 0, "another process, oflags 0: joins it");
	T_OK(run_child(self, path2, 0) == ENOENT, "another process, other file, oflags 0: ENOENT");
	T_OK(a && ibv_close_xrcd(a) == 0, "closed in one context");
	T_OK(run_child(self, path, 0) == 0, "still there while the other context holds it");
	T_OK(b && ibv_close_xrcd(b) == 0, "closed in the other");
	errno = 0;
	x = xrcd_open(c1, fd, 0);
	T_OK(!x && errno == ENOENT, "closed everywhere: ENOENT");
	if (x)
		ibv_close_xrcd(x);
	close(fd);
	close(fd2);
	unlink(path);
	unlink(path2);
}

static void tgt_open(struct tgt *t)
{
	t->ctx = t_lo_open();
	t->pd = ibv_alloc_pd(t->ctx);
	t->pd2 = ibv_alloc_pd(t->ctx);
	t->cq = ibv_create_cq(t->ctx, 64, NULL, NULL, 0);
	t->xrcd = xrcd_open(t->ctx, -1, O_CREAT);
	t->xrcd2 = xrcd_open(t->ctx, -1, O_CREAT);
	T_ASSERT(t->pd && t->pd2 && t->cq && t->xrcd && t->xrcd2, "target: PDs, CQ, domains");
	t->srq = xrc_srq(t, t->xrcd, &t->srqn);
	t->srq_b = xrc_srq(t, t->xrcd, &t->srqn_b);
	t->srq_other = xrc_srq(t, t->xrcd2, &t->srqn_other);
	T_ASSERT(t->srq && t->srq_b && t->srq_other, "XRC SRQs created");
	T_OK(t->srqn && t->srqn_b && t->srqn_other && t->srqn != t->srqn_b &&
	     t->srqn != t->srqn_other && t->srqn_b != t->srqn_other,
	     "SRQ numbers %u %u %u: distinct, nonzero", t->srqn, t->srqn_b, t->srqn_other);
	t->buf = aligned_alloc(4096, BUF);
	t->buf2 = aligned_alloc(4096, BUF);
	t->mr = ibv_reg_mr(t->pd, t->buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	t->mr2 = ibv_reg_mr(t->pd2, t->buf2, BUF, IBV_ACCESS_LOCAL_WRITE |
			    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC);
	T_ASSERT(t->mr && t->mr2, "target MRs");
}

static void tgt_close(struct tgt *t)
{
	T_OK(ibv_close_xrcd(t->xrcd) == EBUSY, "close_xrcd with SRQs in it: EBUSY");
	T_OK(ibv_destroy_cq(t->cq) == EBUSY, "destroy_cq of an XRC SRQ's CQ: EBUSY");
	T_OK(ibv_destroy_srq(t->srq) == 0 && ibv_destroy_srq(t->srq_b) == 0 &&
	     ibv_destroy_srq(t->srq_other) == 0, "SRQs destroyed");
	T_OK(ibv_close_xrcd(t->xrcd) == 0 && ibv_close_xrcd(t->xrcd2) == 0, "domains closed");
	ibv_dereg_mr(t->mr);
	ibv_dereg_mr(t->mr2);
	T_OK(ibv_destroy_cq(t->cq) == 0 && ibv_dealloc_pd(t->pd) == 0 &&
	     ibv_dealloc_pd(t->pd2) == 0, "CQ and PDs freed");
	ibv_close_device(t->ctx);
	free(t->buf);
	free(t->buf2);
}

int main(int argc, char **argv)
{
	struct ibv_device_attr da;
	struct tgt t = { 0 };
	struct ini i = { 0 };

	if (argc == 4 && !strcmp(argv[1], "--child"))
		return child(argv[2], atoi(argv[3]));
	i.ctx = t_lo_open();
	T_ASSERT(ibv_query_device(i.ctx, &da) == 0 && (da.device_cap_flags & IBV_DEVICE_XRC),
		 "IBV_DEVICE_XRC claimed");
	tgt_open(&t);
	domains(argv[0], i.ctx, t.ctx);
	i.pd = ibv_alloc_pd(i.ctx);
	i.cq = ibv_create_cq(i.ctx, 64, NULL, NULL, 0);
	i.buf = aligned_alloc(4096, BUF);
	i.mr = i.pd && i.buf ? ibv_reg_mr(i.pd, i.buf, BUF, IBV_ACCESS_LOCAL_WRITE) : NULL;
	T_ASSERT(i.cq && i.mr, "initiator: PD, CQ, MR");
	traffic(&i, &t);
	protection(&i, &t);
	open_qp(&i, &t);
	tgt_close(&t);
	ibv_dereg_mr(i.mr);
	ibv_destroy_cq(i.cq);
	ibv_dealloc_pd(i.pd);
	ibv_close_device(i.ctx);
	free(i.buf);
	t_lo_free();
	return t_summary();
}
