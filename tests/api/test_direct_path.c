/* The same-host direct path (issue 6, transport/direct.c): an initiator
 * executes RDMA WRITE / READ / atomics itself on a target QP's memory in
 * another process on this host.  Three processes on srn_lo:
 *   T  the target: one MR, two RC QPs (one per initiator); between the
 *      commands A sends it over a socket it sleeps in a blocking read(),
 *      so whatever lands in its memory meanwhile was put there by A;
 *   A  the initiator, run with SOFTRNIC_LOG=debug: its engine prints its
 *      counters when it closes the device, and the parent reads them
 *      (direct_write, direct_read, direct_atomic, direct_fallback);
 *   B1, B2  two more initiators, for atomics racing A's on the same
 *      words; B2 runs with SOFTRNIC_TRANSPORT=udp, so the target's
 *      responder executes its atomics while A's and B1's go direct.
 * Checks: WRITE/READ of 0 B .. 4 MiB with data hashes, multi-SGE, inline
 * WRITE, SEND-WRITE-SEND ordering, concurrent fetch-add and cmp-swap
 * totals, and the protocol errors (bad rkey, no access, out of bounds,
 * misaligned atomic) that the direct path leaves to packets; memory with
 * no memfd (file-backed) reached by process_vm_* (WRITE, READ, SENDs, a
 * WRITE with immediate), its atomics by packets.  Prints a
 * 2 B WRITE ping-pong latency and a 1 MiB WRITE bandwidth (not asserted).
 * Under SOFTRNIC_TRANSPORT=udp the same must pass with no direct op. */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/t_util.h"
#include "tests/lib/t_verbs.h"

#define BUF (16u << 20)
#define MiB (1u << 20)
#define TGT_OFF 0u                   /* T: WRITE/READ target (4 MiB) */
#define ATOM_OFF (8 * MiB)           /* T: fetch-add word, CAS word at +64 */
#define PP_OFF (8 * MiB + 4096)      /* both: ping-pong word */
#define PP_SRC (8 * MiB + 8192)      /* both: ping-pong source */
#define RES_OFF (8 * MiB + 16384)    /* A, B: atomic results */
#define ORD_OFF (9 * MiB)            /* T: ordering test WRITE */
#define RECV_OFF (10 * MiB)          /* T: receive buffers */
#define SGE_OFF (11 * MiB)           /* T: multi-SGE target */
#define RB_OFF (4 * MiB)             /* A: read-back area (4 MiB) */
#define LSGE_OFF (12 * MiB)          /* A: multi-SGE pieces */
#define RO_SIZE 65536u               /* T: MR without remote write/atomic */
#define FB_SIZE (1u << 20)           /* T: file-backed MR (no memfd) */

#define PONG_STOP 0xffff              /* ends the target's echo loop */
#define MEASURE_SECS 1.0             /* per timing loop */
#define NB 2                         /* initiators racing A's atomics */
#define N_FA 3000                    /* fetch-adds per initiator */
#define K_CAS 500                    /* successful CAS per initiator */

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp[1 + NB];
	uint8_t *buf, *ro, *fb;
	struct ibv_mr *mr, *mr_ro, *mr_fb;
	union ibv_gid gid;
};

struct info {                        /* what one side tells the other */
	uint32_t qpn, rkey, rkey_ro, rkey_fb;
	uint64_t addr, ro_addr, fb_addr;
	union ibv_gid gid;
};

enum { C_HASH = 1, C_FILL, C_RECV, C_RECV_FB, C_WAITRECV, C_PONG, C_RECONNECT, C_EXIT };

struct cmd {
	uint32_t op, arg;
	uint64_t off, len;
};

struct rep {
	uint64_t v[4];
};

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static void pattern(uint8_t *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

static int xfer(int fd, void *p, size_t n, bool out)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = out ? write(fd, (char *)p + done, n - done)
				: read(fd, (char *)p + done, n - done);

		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

static void ep_init(struct ep *e, int nqp)
{
	e->ctx = t_lo_open();
	e->pd = ibv_alloc_pd(e->ctx);
	e->scq = ibv_create_cq(e->ctx, 1024, NULL, NULL, 0);
	e->rcq = ibv_create_cq(e->ctx, 1024, NULL, NULL, 0);
	e->buf = aligned_alloc(4096, BUF);
	e->ro = aligned_alloc(4096, RO_SIZE);
	T_ASSERT(e->pd && e->scq && e->rcq && e->buf && e->ro, "resources");
	memset(e->buf, 0, BUF);
	memset(e->ro, 0x5a, RO_SIZE);
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	e->mr_ro = ibv_reg_mr(e->pd, e->ro, RO_SIZE,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	T_ASSERT(e->mr && e->mr_ro && !ibv_query_gid(e->ctx, 1, 0, &e->gid), "mr, gid");
	/* File-backed memory is never re-backed by a memfd: peers reach it
	 * with process_vm_* only. */
	{
		char path[] = "/tmp/test_direct_fb.XXXXXX";
		int fd = mkstemp(path);

		T_ASSERT(fd >= 0 && !unlink(path) && !ftruncate(fd, FB_SIZE), "file");
		e->fb = mmap(NULL, FB_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		T_ASSERT(e->fb != MAP_FAILED, "mmap file");
		e->mr_fb = ibv_reg_mr(e->pd, e->fb, FB_SIZE,
				      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
		T_ASSERT(e->mr_fb, "reg file-backed mr");
	}
	for (int i = 0; i < nqp; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = e->scq, .recv_cq = e->rcq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 256, .max_recv_wr = 64, .max_send_sge = 4,
				 .max_recv_sge = 1, .max_inline_data = 128 },
		};

		e->qp[i] = ibv_create_qp(e->pd, &ia);
		T_ASSERT(e->qp[i], "create qp");
	}
}

static void ep_close(struct ep *e, int nqp)
{
	for (int i = 0; i < nqp; i++)
		ibv_destroy_qp(e->qp[i]);
	ibv_dereg_mr(e->mr);
	ibv_dereg_mr(e->mr_ro);
	ibv_dereg_mr(e->mr_fb);
	munmap(e->fb, FB_SIZE);
	ibv_destroy_cq(e->scq);
	ibv_destroy_cq(e->rcq);
	ibv_dealloc_pd(e->pd);
	ibv_close_device(e->ctx);
	t_lo_free();
}

static struct info ep_info(struct ep *e, int q)
{
	struct info in = { .qpn = e->qp[q]->qp_num, .rkey = e->mr->rkey,
			   .rkey_ro = e->mr_ro->rkey, .rkey_fb = e->mr_fb->rkey,
			   .addr = (uintptr_t)e->buf, .ro_addr = (uintptr_t)e->ro,
			   .fb_addr = (uintptr_t)e->fb, .gid = e->gid };
	return in;
}

static int connect_qp(struct ibv_qp *qp, const struct info *peer)
{
	struct t_rc_attr r = {
		.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			  IBV_ACCESS_REMOTE_ATOMIC,
		.dest_qpn = peer->qpn, .dgid = peer->gid, .hop_limit = 64,
		.min_rnr_timer = 1, .rd_atomic = 16, .timeout = 14,
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	return t_qp_rc_connect(qp, &r);
}

/* Busy-polls one completion (latency matters here), 10 s at most. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	double end = t_now() + 10;
	long spins = 0;

	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			return -1;
		if (n == 1)
			return 0;
		if ((++spins & 1023) == 0 && t_now() > end)
			break;
	}
	memset(wc, 0, sizeof(*wc));
	wc->status = IBV_WC_GENERAL_ERR;
	wc->wr_id = UINT64_MAX;
	printf("wait_wc: no completion within 10 s\n");
	return -1;
}

static int post(struct ibv_qp *qp, enum ibv_wr_opcode op, struct ibv_sge *sge, int nsge,
		uint64_t raddr, uint32_t rkey, uint64_t wr_id, unsigned int flags)
{
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = sge, .num_sge = nsge,
				  .opcode = op, .send_flags = IBV_SEND_SIGNALED | flags }, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static int post_atomic(struct ibv_qp *qp, struct ibv_mr *mr, void *res, enum ibv_wr_opcode op,
		       uint64_t raddr, uint32_t rkey, uint64_t cmp_add, uint64_t swap,
		       uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)res, 8, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	return ibv_post_send(qp, &wr, &bad);
}

/* ---- T: the target ---------------------------------------------------- */

/* Echo every value A writes into PP_OFF back into A's PP_OFF until A
 * writes PONG_STOP; r->v[0] = values echoed. */
static void target_pong(struct ep *e, const struct info *a, struct rep *r)
{
	volatile uint16_t *in = (volatile uint16_t *)(e->buf + PP_OFF);
	uint16_t *src = (uint16_t *)(e->buf + PP_SRC);
	struct ibv_sge sge = { (uintptr_t)src, 2, e->mr->lkey };
	double end = t_now() + 30;
	uint16_t last = 0, v;
	struct ibv_wc wc;
	long spins = 0;

	r->v[0] = 0;
	for (;;) {
		v = *in;
		if (v == last) {
			if ((++spins & 4095) == 0 && t_now() > end)
				return;
			continue;
		}
		if (v == PONG_STOP)
			return;
		*src = v;
		if (post(e->qp[0], IBV_WR_RDMA_WRITE, &sge, 1, a->addr + PP_OFF, a->rkey, v, 0) ||
		    wait_wc(e->scq, &wc) || wc.status != IBV_WC_SUCCESS)
			return;
		last = v;
		r->v[0]++;
	}
}

static int target(int sa, const int sb[NB])
{
	struct info mine[1 + NB], peer[1 + NB];
	struct ep e;
	struct cmd c;

	t_set_tag("target");
	alarm(150);
	setenv("SOFTRNIC_LOG", "debug", 1);
	ep_init(&e, 1 + NB);
	for (int q = 0; q <= NB; q++) {
		int fd = q ? sb[q - 1] : sa;

		mine[q] = ep_info(&e, q);
		T_ASSERT(!xfer(fd, &mine[q], sizeof(mine[q]), true) &&
			 !xfer(fd, &peer[q], sizeof(peer[q]), false), "exchange %d", q);
		T_ASSERT(!connect_qp(e.qp[q], &peer[q]), "connect %d", q);
	}
	/* every QP is in RTS: A may start */
	T_ASSERT(!xfer(sa, &c, 1, true), "ready");
	/* Between commands: asleep in read(). */
	while (!xfer(sa, &c, sizeof(c), false)) {
		struct rep r = { { 0 } };
		struct ibv_wc wc;

		switch (c.op) {
		case C_HASH:
			r.v[0] = fnv((c.arg == 2 ? e.fb : c.arg ? e.ro : e.buf) + c.off, c.len);
			break;
		case C_FILL:
			memset(e.buf + c.off, (int)c.arg, c.len);
			break;
		case C_RECV:
		case C_RECV_FB: /* (in the file-backed MR, wr_ids from 2000) */
			for (uint32_t i = 0; i < c.arg; i++) {
				bool fb = c.op == C_RECV_FB;
				struct ibv_sge sge = { (uintptr_t)(fb ? e.fb : e.buf) + c.off + i * c.len,
						       (uint32_t)c.len, (fb ? e.mr_fb : e.mr)->lkey };
				struct ibv_recv_wr wr = { .wr_id = (fb ? 2000 : 1000) + i,
							  .sg_list = &sge, .num_sge = 1 }, *bad;

				r.v[0] |= (uint64_t)ibv_post_recv(e.qp[0], &wr, &bad);
			}
			break;
		case C_WAITRECV:
			wait_wc(e.rcq, &wc);
			r.v[0] = wc.wr_id;
			r.v[1] = wc.status;
			r.v[2] = wc.byte_len;
			/* what is in memory when the receive completes */
			r.v[3] = c.len ? fnv((c.arg == 2 ? e.fb : e.buf) + c.off, c.len) : 0;
			break;
		case C_PONG:
			target_pong(&e, &peer[0], &r);
			break;
		case C_RECONNECT:
			r.v[0] = (uint64_t)connect_qp(e.qp[0], &peer[0]);
			break;
		case C_EXIT:
			ep_close(&e, 1 + NB); /* prints the engine's counters */
			return t_fails ? 1 : 0;
		}
		if (xfer(sa, &r, sizeof(r), true))
			break;
	}
	return 1;
}

/* ---- B: the second initiator (atomics) ------------------------------- */

/* N_FA fetch-adds of 1 (the originals must rise), then K_CAS increments
 * by compare-and-swap.  0 if all went as expected. */
static int atomics(struct ep *e, const struct info *t, const char *who)
{
	uint64_t *res = (uint64_t *)(e->buf + RES_OFF), last = 0, guess = 0;
	int bad = 0, ok = 0, tries = 0;
	struct ibv_wc wc;

	for (int i = 0; i < N_FA; i++) {
		*res = UINT64_MAX;
		if (post_atomic(e->qp[0], e->mr, res, IBV_WR_ATOMIC_FETCH_AND_ADD,
				t->addr + ATOM_OFF, t->rkey, 1, 0, i) ||
		    wait_wc(e->scq, &wc) || wc.status != IBV_WC_SUCCESS ||
		    wc.opcode != IBV_WC_FETCH_ADD || wc.byte_len != 8) {
			printf("%s: fetch-add %d: %s\n", who, i, ibv_wc_status_str(wc.status));
			return 1;
		}
		if (i > 0 && *res <= last)
			bad++;
		last = *res;
	}
	while (ok < K_CAS && tries++ < 200000) {
		if (post_atomic(e->qp[0], e->mr, res, IBV_WR_ATOMIC_CMP_AND_SWP,
				t->addr + ATOM_OFF + 64, t->rkey, guess, guess + 1, 7) ||
		    wait_wc(e->scq, &wc) || wc.status != IBV_WC_SUCCESS ||
		    wc.opcode != IBV_WC_COMP_SWAP) {
			printf("%s: cmp-swap: %s\n", who, ibv_wc_status_str(wc.status));
			return 1;
		}
		if (*res == guess) {
			ok++;
			guess++;
		} else {
			guess = *res;
		}
	}
	if (bad || ok != K_CAS)
		printf("%s: %d fetch-add originals out of order, %d/%d CAS won\n", who, bad, ok,
		       K_CAS);
	return bad || ok != K_CAS;
}

/* Initiator k of the atomics race; B2 always by packets, so the target's
 * responder and the direct path work on the same words at once. */
static int helper(int sb, int sab, int k)
{
	struct info mine, peer;
	struct ep e;
	char go, who[16];
	int ret;

	snprintf(who, sizeof(who), "B%d", k + 1);
	t_set_tag("%s", who);
	alarm(150);
	if (k == 1)
		setenv("SOFTRNIC_TRANSPORT", "udp", 1);
	ep_init(&e, 1);
	mine = ep_info(&e, 0);
	T_ASSERT(!xfer(sb, &peer, sizeof(peer), false) && !xfer(sb, &mine, sizeof(mine), true),
		 "exchange");
	T_ASSERT(!connect_qp(e.qp[0], &peer), "connect");
	if (xfer(sab, &go, 1, false))
		return 1;
	ret = atomics(&e, &peer, who);
	go = (char)ret;
	xfer(sab, &go, 1, true);
	return ret;
}

/* ---- A: the initiator -------------------------------------------------- */

static int sa_fd;

static struct rep tcmd(uint32_t op, uint32_t arg, uint64_t off, uint64_t len)
{
	struct cmd c = { op, arg, off, len };
	struct rep r = { { UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX } };

	if (xfer(sa_fd, &c, sizeof(c), true) || (op != C_EXIT && xfer(sa_fd, &r, sizeof(r), false)))
		printf("target command %u: no answer\n", op);
	return r;
}

static void write_read_sizes(struct ep *e, const struct info *t)
{
	static const uint32_t sizes[] = { 0, 1, 2, 7, 63, 64, 1023, 1024, 1025, 4096,
					  65537, MiB, 4 * MiB };
	struct ibv_wc wc;

	for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint32_t n = sizes[s];
		struct ibv_sge sge = { (uintptr_t)e->buf, n, e->mr->lkey };
		struct ibv_sge rsge = { (uintptr_t)e->buf + RB_OFF, n, e->mr->lkey };
		uint64_t want;

		pattern(e->buf, n, s + 1);
		want = fnv(e->buf, n);
		T_CHECK(!post(e->qp[0], IBV_WR_RDMA_WRITE, &sge, n ? 1 : 0, t->addr + TGT_OFF,
			      t->rkey, 100 + s, 0) && !wait_wc(e->scq, &wc) &&
			wc.status == IBV_WC_SUCCESS && wc.wr_id == 100 + s &&
			wc.opcode == IBV_WC_RDMA_WRITE && wc.qp_num == e->qp[0]->qp_num,
			"WRITE %u: %s", n, ibv_wc_status_str(wc.status));
		T_CHECK(tcmd(C_HASH, 0, TGT_OFF, n).v[0] == want, "WRITE %u: target's data", n);
		memset(e->buf + RB_OFF, 0xee, n);
		T_CHECK(!post(e->qp[0], IBV_WR_RDMA_READ, &rsge, n ? 1 : 0, t->addr + TGT_OFF,
			      t->rkey, 200 + s, 0) && !wait_wc(e->scq, &wc) &&
			wc.status == IBV_WC_SUCCESS && wc.wr_id == 200 + s &&
			wc.opcode == IBV_WC_RDMA_READ && wc.byte_len == n,
			"READ %u: %s len %u", n, ibv_wc_status_str(wc.status), wc.byte_len);
		T_CHECK(!memcmp(e->buf, e->buf + RB_OFF, n), "READ %u: data read back", n);
	}
	T_OK(t_fails == 0, "WRITE then READ back, 0 B .. 4 MiB (%zu sizes), target asleep in "
	     "read(): data hashes equal", sizeof(sizes) / sizeof(sizes[0]));
}

static void multi_sge_inline(struct ep *e, const struct info *t)
{
	static const uint32_t len[3] = { 100, 5000, 3 };
	struct ibv_sge sg[3];
	uint8_t all[5103];
	struct ibv_wc wc;
	uint64_t off = 0;
	int f = t_fails;

	for (int i = 0; i < 3; i++) {
		uint8_t *p = e->buf + LSGE_OFF + (uint64_t)i * 65536 + 17 * (uint64_t)i;

		pattern(p, len[i], 40 + i);
		memcpy(all + off, p, len[i]);
		off += len[i];
		sg[i] = (struct ibv_sge){ (uintptr_t)p, len[i], e->mr->lkey };
	}
	T_CHECK(!post(e->qp[0], IBV_WR_RDMA_WRITE, sg, 3, t->addr + SGE_OFF, t->rkey, 1, 0) &&
		!wait_wc(e->scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == off,
		"3-SGE WRITE: %s", ibv_wc_status_str(wc.status));
	T_CHECK(tcmd(C_HASH, 0, SGE_OFF, off).v[0] == fnv(all, off), "3-SGE WRITE data");
	/* read it back scattered over 3 other pieces */
	for (int i = 0; i < 3; i++) {
		sg[i].addr += 4 * 65536;
		memset((void *)(uintptr_t)sg[i].addr, 0, len[i]);
	}
	T_CHECK(!post(e->qp[0], IBV_WR_RDMA_READ, sg, 3, t->addr + SGE_OFF, t->rkey, 2, 0) &&
		!wait_wc(e->scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == off,
		"3-SGE READ: %s", ibv_wc_status_str(wc.status));
	off = 0;
	for (int i = 0; i < 3; i++) {
		T_CHECK(!memcmp((void *)(uintptr_t)sg[i].addr, all + off, len[i]),
			"3-SGE READ piece %d", i);
		off += len[i];
	}
	T_OK(t_fails == f, "WRITE from 3 SGEs, READ into 3 SGEs (100+5000+3 B)");

	f = t_fails;
	{
		uint8_t data[100];
		struct ibv_sge s = { (uintptr_t)data, sizeof(data), 0 };

		pattern(data, sizeof(data), 77);
		T_CHECK(!post(e->qp[0], IBV_WR_RDMA_WRITE, &s, 1, t->addr + SGE_OFF + 8192,
			      t->rkey, 3, IBV_SEND_INLINE), "post inline");
		/* the WR's buffer may change as soon as post returns */
		memset(data, 0, sizeof(data));
		T_CHECK(!wait_wc(e->scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 3,
			"inline WRITE: %s", ibv_wc_status_str(wc.status));
		pattern(data, sizeof(data), 77);
		T_CHECK(tcmd(C_HASH, 0, SGE_OFF + 8192, sizeof(data)).v[0] ==
			fnv(data, sizeof(data)), "inline WRITE data");
	}
	T_OK(t_fails == f, "inline WRITE (100 B, lkey 0)");
}

/* Memory with no memfd: WRITE and READ by process_vm_*, the atomic by
 * packets (process_vm is no atomic), all on the same MR. */
static void file_backed(struct ep *e, const struct info *t)
{
	uint32_t n = 256 * 1024;
	struct ibv_sge sge = { (uintptr_t)e->buf, n, e->mr->lkey };
	struct ibv_sge rsge = { (uintptr_t)e->buf + RB_OFF, n, e->mr->lkey };
	uint64_t *res = (uint64_t *)(e->buf + RES_OFF);
	struct ibv_wc wc;
	int f = t_fails;

	pattern(e->buf, n, 31);
	T_CHECK(!post(e->qp[0], IBV_WR_RDMA_WRITE, &sge, 1, t->fb_addr + 4096, t->rkey_fb, 1, 0) &&
		!wait_wc(e->scq, &wc) && wc.status == IBV_WC_SUCCESS,
		"WRITE to file-backed MR: %s", ibv_wc_status_str(wc.status));
	T_CHECK(tcmd(C_HASH, 2, 4096, n).v[0] == fnv(e->buf, n), "file-backed WRITE data");
	memset(e->buf + RB_OFF, 0, n);
	T_CHECK(!post(e->qp[0], IBV_WR_RDMA_READ, &rsge, 1, t->fb_addr + 4096, t->rkey_fb, 2, 0) &&
		!wait_wc(e->scq, &wc) && wc.status == IBV_WC_SUCCESS &&
		!memcmp(e->buf, e->buf + RB_OFF, n), "file-backed READ back");
	for (uint64_t k = 0; k < 2; k++) {
		*res = UINT64_MAX;
		T_CHECK(!post_atomic(e->qp[0], e->mr, res, IBV_WR_ATOMIC_FETCH_AND_ADD, t->fb_addr,
				     t->rkey_fb, 5, 0, 3) && !wait_wc(e->scq, &wc) &&
			wc.status == IBV_WC_SUCCESS && *res == 5 * k,
			"file-backed FETCH_ADD %llu: %s orig %llu", (unsigned long long)k,
			ibv_wc_status_str(wc.status), (unsigned long long)*res);
	}
	/* SENDs into receive buffers there: process_vm_writev, the WQE
	 * taken first (a 2-SGE send: two local pieces into one buffer) */
	T_CHECK(tcmd(C_RECV_FB, 2, 512 * 1024, 65536).v[0] == 0, "receives in file-backed memory");
	for (uint32_t k = 0; k < 2; k++) {
		uint32_t l = k ? 65536 : 100;
		struct ibv_sge s2[2] = {
			{ (uintptr_t)e->buf, l / 2, e->mr->lkey },
			{ (uintptr_t)e->buf + 4096, l - l / 2, e->mr->lkey },
		};
		uint8_t *whole = e->buf + RB_OFF;
		struct rep r;

		pattern(e->buf, l / 2, 40 + k);
		pattern(e->buf + 4096, l - l / 2, 50 + k);
		memcpy(whole, e->buf, l / 2);
		memcpy(whole + l / 2, e->buf + 4096, l - l / 2);
		T_CHECK(!post(e->qp[0], IBV_WR_SEND, s2, 2, 0, 0, 20 + k, 0) &&
			!wait_wc(e->scq, &wc) && wc.status == IBV_WC_SUCCESS,
			"SEND into file-backed memory: %s", ibv_wc_status_str(wc.status));
		r = tcmd(C_WAITRECV, 2, 512 * 1024 + k * 65536, l);
		T_CHECK(r.v[0] == 2000 + k && r.v[1] == IBV_WC_SUCCESS && r.v[2] == l &&
			r.v[3] == fnv(whole, l), "file-backed receive %u: wr_id %llu status %llu "
			"len %llu data %s", k, (unsigned long long)r.v[0], (unsigned long long)r.v[1],
			(unsigned long long)r.v[2], r.v[3] == fnv(whole, l) ? "ok" : "WRONG");
	}
	{
		/* a WRITE with immediate there: its data by process_vm_writev
		 * before the receive is taken (as into qperf's 1-byte MRs,
		 * which are never mapped) */
		uint32_t l = 3000;
		struct ibv_sge ws = { (uintptr_t)e->buf, l, e->mr->lkey };
		struct rep r;

		pattern(e->buf, l, 60);
		T_CHECK(tcmd(C_RECV_FB, 1, 768 * 1024, 16).v[0] == 0, "receive for the immediate");
		T_CHECK(!post(e->qp[0], IBV_WR_RDMA_WRITE_WITH_IMM, &ws, 1, t->fb_addr + 800 * 1024,
			      t->rkey_fb, 22, 0) && !wait_wc(e->scq, &wc) &&
			wc.status == IBV_WC_SUCCESS, "WRITE_WITH_IMM into file-backed memory: %s",
			ibv_wc_status_str(wc.status));
		r = tcmd(C_WAITRECV, 2, 800 * 1024, l);
		T_CHECK(r.v[0] == 2000 && r.v[1] == IBV_WC_SUCCESS && r.v[2] == l &&
			r.v[3] == fnv(e->buf, l), "its receive: wr_id %llu status %llu len %llu "
			"data %s", (unsigned long long)r.v[0], (unsigned long long)r.v[1],
			(unsigned long long)r.v[2], r.v[3] == fnv(e->buf, l) ? "ok" : "WRONG");
	}
	T_OK(t_fails == f, "file-backed MR (no memfd): 256 KiB WRITE, READ back, 2 FETCH_ADDs, "
	     "SENDs of 100 B and 64 KiB into receives there, a WRITE with immediate");
}

static void ordering(struct ep *e, const struct info *t)
{
	struct ibv_sge s1 = { (uintptr_t)e->buf, 64, e->mr->lkey };
	struct ibv_sge w = { (uintptr_t)e->buf + 65536, 65536, e->mr->lkey };
	struct ibv_sge s2 = { (uintptr_t)e->buf + 256, 64, e->mr->lkey };
	struct ibv_send_wr wr[3] = {
		{ .wr_id = 11, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_SEND,
		  .send_flags = IBV_SEND_SIGNALED },
		{ .wr_id = 12, .sg_list = &w, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		  .send_flags = IBV_SEND_SIGNALED },
		{ .wr_id = 13, .sg_list = &s2, .num_sge = 1, .opcode = IBV_WR_SEND,
		  .send_flags = IBV_SEND_SIGNALED },
	}, *bad;
	struct ibv_wc wc;
	struct rep r;
	uint64_t want;
	int f = t_fails;

	pattern(e->buf, 512, 5);
	pattern(e->buf + 65536, 65536, 6);
	want = fnv(e->buf + 65536, 65536);
	wr[0].next = &wr[1];
	wr[1].next = &wr[2];
	wr[1].wr.rdma.remote_addr = t->addr + ORD_OFF;
	wr[1].wr.rdma.rkey = t->rkey;
	T_CHECK(tcmd(C_FILL, 0, ORD_OFF, 65536).v[0] == 0 && tcmd(C_RECV, 2, RECV_OFF, 4096).v[0] == 0,
		"target setup");
	T_CHECK(!ibv_post_send(e->qp[0], wr, &bad), "post SEND, WRITE, SEND");
	for (uint64_t id = 11; id <= 13; id++)
		T_CHECK(!wait_wc(e->scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == id &&
			wc.opcode == (id == 12 ? IBV_WC_RDMA_WRITE : IBV_WC_SEND),
			"completion %llu in order: got %llu %s", (unsigned long long)id,
			(unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	r = tcmd(C_WAITRECV, 0, 0, 0);
	T_CHECK(r.v[0] == 1000 && r.v[1] == IBV_WC_SUCCESS && r.v[2] == 64,
		"first receive %llu", (unsigned long long)r.v[0]);
	r = tcmd(C_WAITRECV, 0, ORD_OFF, 65536);
	T_CHECK(r.v[0] == 1001 && r.v[1] == IBV_WC_SUCCESS && r.v[3] == want,
		"second receive %llu: WRITE before it %s", (unsigned long long)r.v[0],
		r.v[3] == want ? "visible" : "NOT visible");
	T_OK(t_fails == f, "SEND, WRITE, SEND: completions in order, the WRITE visible at the "
	     "second SEND's receive");
}

static void concurrent_atomics(struct ep *e, const struct info *t, const int sab[NB])
{
	uint64_t *w = (uint64_t *)(e->buf + RB_OFF);
	struct ibv_sge sge = { (uintptr_t)w, 72, e->mr->lkey };
	struct ibv_wc wc;
	char go = 1, bres;
	int mine;

	tcmd(C_FILL, 0, ATOM_OFF, 128);
	for (int k = 0; k < NB; k++)
		T_CHECK(xfer(sab[k], &go, 1, true) == 0, "start B%d", k + 1);
	mine = atomics(e, t, "A");
	for (int k = 0; k < NB; k++) {
		bres = 1;
		T_CHECK(!xfer(sab[k], &bres, 1, false) && bres == 0, "B%d's atomics as expected",
			k + 1);
	}
	T_CHECK(mine == 0, "A's atomics as expected");
	T_CHECK(!post(e->qp[0], IBV_WR_RDMA_READ, &sge, 1, t->addr + ATOM_OFF, t->rkey, 9, 0) &&
		!wait_wc(e->scq, &wc) && wc.status == IBV_WC_SUCCESS, "read the words");
	T_OK(w[0] == (1 + NB) * N_FA && w[8] == (1 + NB) * K_CAS,
	     "%d processes x (%d fetch-add + %d CAS increments) on the same words, B2 by packets"
	     ": %llu, %llu", 1 + NB, N_FA, K_CAS, (unsigned long long)w[0],
	     (unsigned long long)w[8]);
}

/* Timing, printed, not asserted (the host may be busy): both loops
 * stop after MEASURE_SECS; every operation must still succeed. */
static void measure(struct ep *e, const struct info *t)
{
	volatile uint16_t *in = (volatile uint16_t *)(e->buf + PP_OFF);
	uint16_t *src = (uint16_t *)(e->buf + PP_SRC);
	struct ibv_sge sge = { (uintptr_t)src, 2, e->mr->lkey };
	uint32_t warm = 200, max = 20000, i, ok = 1;
	struct cmd c = { C_PONG, 0, 0, 0 };
	double t0 = t_now(), stop = t0 + MEASURE_SECS, end = t0 + 20;
	struct ibv_wc wc;
	struct rep r;

	memset(e->buf + PP_OFF, 0, 2);
	T_CHECK(!xfer(sa_fd, &c, sizeof(c), true), "start pong");
	for (i = 1; i <= max && ok; i++) {
		long spins = 0;

		if (i == warm + 1) {
			t0 = t_now();
			stop = t0 + MEASURE_SECS;
		}
		if (i > warm && t_now() > stop)
			break;
		*src = (uint16_t)i;
		if (post(e->qp[0], IBV_WR_RDMA_WRITE, &sge, 1, t->addr + PP_OFF, t->rkey, i, 0) ||
		    wait_wc(e->scq, &wc) || wc.status != IBV_WC_SUCCESS)
			ok = 0;
		while (ok && *in != (uint16_t)i)
			if ((++spins & 4095) == 0 && t_now() > end)
				ok = 0;
	}
	i--; /* round trips done */
	*src = PONG_STOP;
	T_CHECK(!post(e->qp[0], IBV_WR_RDMA_WRITE, &sge, 1, t->addr + PP_OFF, t->rkey, 0, 0) &&
		!wait_wc(e->scq, &wc) && wc.status == IBV_WC_SUCCESS, "stop pong");
	T_CHECK(ok && !xfer(sa_fd, &r, sizeof(r), false) && r.v[0] == i,
		"ping-pong: %u round trips, target echoed %llu", i, (unsigned long long)r.v[0]);
	if (ok && i > warm)
		printf("measured: 2 B RDMA WRITE ping-pong: %.2f us one way (%u round trips)\n",
		       (t_now() - t0) / (i - warm) / 2 * 1e6, i - warm);

	/* 1 MiB WRITEs, 16 in flight */
	{
		int posted = 0, done = 0, depth = 16;
		double b0 = t_now();

		stop = b0 + MEASURE_SECS;
		end = b0 + 20;
		while (t_now() < end && (done < posted || (posted < 4096 && t_now() < stop))) {
			while (posted < 4096 && posted - done < depth && t_now() < stop) {
				/* one buffer each side, as ib_write_bw */
				struct ibv_sge s = { (uintptr_t)e->buf, MiB, e->mr->lkey };

				if (post(e->qp[0], IBV_WR_RDMA_WRITE, &s, 1, t->addr + TGT_OFF,
					 t->rkey, posted, 0))
					break;
				posted++;
			}
			int n = ibv_poll_cq(e->scq, 1, &wc);

			if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS))
				break;
			done += n;
		}
		T_CHECK(done == posted && done > 0, "bandwidth run: %d of %d WRITEs", done, posted);
		if (done == posted && done > 0)
			printf("measured: 1 MiB RDMA WRITE bandwidth: %.2f GB/s (%d writes, %d in "
			       "flight)\n", (double)done * MiB / (t_now() - b0) / 1e9, done, depth);
	}
}

static void reconnect(struct ep *e, const struct info *t)
{
	T_CHECK(tcmd(C_RECONNECT, 0, 0, 0).v[0] == 0 && !connect_qp(e->qp[0], t),
		"reconnect after the error");
}

static void errors(struct ep *e, const struct info *t)
{
	struct ibv_sge sge = { (uintptr_t)e->buf, 8, e->mr->lkey };
	struct {
		const char *what;
		enum ibv_wr_opcode op;
		uint64_t addr;
		uint32_t rkey;
		enum ibv_wc_status want;
	} cases[] = {
		{ "WRITE with a bad rkey", IBV_WR_RDMA_WRITE, t->addr, t->rkey ^ 0x1,
		  IBV_WC_REM_ACCESS_ERR },
		{ "WRITE to an MR without REMOTE_WRITE", IBV_WR_RDMA_WRITE, t->ro_addr,
		  t->rkey_ro, IBV_WC_REM_ACCESS_ERR },
		{ "WRITE past the MR's end", IBV_WR_RDMA_WRITE, t->addr + BUF - 4, t->rkey,
		  IBV_WC_REM_ACCESS_ERR },
		{ "READ past the MR's end", IBV_WR_RDMA_READ, t->addr + BUF - 4, t->rkey,
		  IBV_WC_REM_ACCESS_ERR },
		{ "FETCH_ADD without REMOTE_ATOMIC", IBV_WR_ATOMIC_FETCH_AND_ADD, t->ro_addr,
		  t->rkey_ro, IBV_WC_REM_ACCESS_ERR },
		{ "CMP_SWAP with a bad rkey", IBV_WR_ATOMIC_CMP_AND_SWP, t->addr + ATOM_OFF,
		  t->rkey ^ 0x2, IBV_WC_REM_ACCESS_ERR },
	};
	uint64_t ro_hash = tcmd(C_HASH, 1, 0, RO_SIZE).v[0];

	pattern(e->buf, 8, 99);
	for (unsigned k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;
		struct ibv_wc wc;
		int ret;

		if (cases[k].op != IBV_WR_RDMA_WRITE && cases[k].op != IBV_WR_RDMA_READ)
			ret = post_atomic(e->qp[0], e->mr, e->buf + RES_OFF, cases[k].op,
					  cases[k].addr, cases[k].rkey, 1, 0, 50 + k);
		else
			ret = post(e->qp[0], cases[k].op, &sge, 1, cases[k].addr, cases[k].rkey,
				   50 + k, 0);
		T_CHECK(!ret && !wait_wc(e->scq, &wc), "post/complete %s", cases[k].what);
		T_OK(wc.status == cases[k].want && wc.wr_id == 50 + k &&
		     !ibv_query_qp(e->qp[0], &qa, IBV_QP_STATE, &qia) && qa.qp_state == IBV_QPS_ERR,
		     "%s: %s (want %s), QP in error", cases[k].what, ibv_wc_status_str(wc.status),
		     ibv_wc_status_str(cases[k].want));
		reconnect(e, t);
	}
	/* a misaligned atomic never reaches either path (IBTA 9.4.5) */
	{
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;

		T_OK(post_atomic(e->qp[0], e->mr, e->buf + RES_OFF, IBV_WR_ATOMIC_FETCH_AND_ADD,
				 t->addr + ATOM_OFF + 4, t->rkey, 1, 0, 60) == EINVAL &&
		     !ibv_query_qp(e->qp[0], &qa, IBV_QP_STATE, &qia) && qa.qp_state == IBV_QPS_RTS,
		     "misaligned FETCH_ADD refused at post (EINVAL), QP still RTS");
	}
	T_OK(tcmd(C_HASH, 1, 0, RO_SIZE).v[0] == ro_hash,
	     "the MR without remote write access is unchanged");
	/* and the connection works again */
	{
		struct ibv_wc wc;

		pattern(e->buf, 4096, 123);
		T_OK(!post(e->qp[0], IBV_WR_RDMA_WRITE, &sge, 1, t->addr + TGT_OFF, t->rkey, 70, 0) &&
		     !wait_wc(e->scq, &wc) && wc.status == IBV_WC_SUCCESS &&
		     tcmd(C_HASH, 0, TGT_OFF, 8).v[0] == fnv(e->buf, 8),
		     "after reconnecting, WRITE works again");
	}
}

static int initiator(int sa, const int sab[NB])
{
	struct info mine, t;
	struct ep e;

	t_set_tag("A");
	alarm(150);
	sa_fd = sa;
	/* the engine prints its counters at ibv_close_device */
	setenv("SOFTRNIC_LOG", "debug", 1);
	ep_init(&e, 1);
	mine = ep_info(&e, 0);
	T_ASSERT(!xfer(sa, &t, sizeof(t), false) && !xfer(sa, &mine, sizeof(mine), true),
		 "exchange");
	T_ASSERT(!connect_qp(e.qp[0], &t), "connect");
	T_ASSERT(!xfer(sa, &mine, 1, false), "target ready");

	write_read_sizes(&e, &t);
	multi_sge_inline(&e, &t);
	file_backed(&e, &t);
	ordering(&e, &t);
	concurrent_atomics(&e, &t, sab);
	measure(&e, &t);
	errors(&e, &t);

	tcmd(C_EXIT, 0, 0, 0);
	ep_close(&e, 1);
	return t_summary();
}

/* ---- the parent -------------------------------------------------------- */

/* Engine counters from a child's stderr ("softrnic[PID]: name value" at
 * ibv_close_device under SOFTRNIC_LOG=debug); lines not from the engine
 * are shown.  Returns true if process_vm_* was refused there. */
static bool read_counters(int fd, const char *const *names, int n, unsigned long long *out)
{
	char line[512], name[64];
	unsigned long long v;
	bool denied = false;
	FILE *f;

	lseek(fd, 0, SEEK_SET);
	f = fdopen(fd, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "softrnic[%*d]: %63s %llu", name, &v) == 2)
			for (int i = 0; i < n; i++)
				if (!strcmp(name, names[i]))
					out[i] = v;
		/* not engine debug, or the direct path's (re)validations */
		if (strncmp(line, "softrnic[", 9) || strstr(line, ": direct: "))
			fputs(line, stdout);
		if (strstr(line, "softrnic: process_vm_"))
			denied = true;
	}
	if (f)
		fclose(f);
	return denied;
}

static int reap(pid_t pid, const char *who)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	printf("%s: killed by signal %d\n", who, WTERMSIG(st));
	return -1;
}

int main(void)
{
	const char *mode = getenv("SOFTRNIC_TRANSPORT");
	bool udp = mode && !strcmp(mode, "udp");
	int sa[2], sb[NB][2], sab[NB][2], tsb[NB], asb[NB], st_t, st_a, st_b[NB], logfd;
	char logpath[] = "/tmp/test_direct_path.XXXXXX";
	unsigned long long cnt[5] = { 0 }, tcnt[9] = { 0 };
	static const char *const names[9] = { "direct_write", "direct_read", "direct_atomic",
					      "direct_fallback", "direct_vm", "tx_packets",
					      "rx_packets", "tx_shm_packets", "rx_shm_packets" };
	char logpath_t[] = "/tmp/test_direct_path.XXXXXX";
	int logfd_t;
	bool vm_denied = false;
	pid_t pt, pa, pb[NB];

	if (!t_lo_find())
		t_skip("no srn_lo");
	t_lo_free();
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sa))
		t_bail("socketpair");
	for (int k = 0; k < NB; k++) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sb[k]) ||
		    socketpair(AF_UNIX, SOCK_STREAM, 0, sab[k]))
			t_bail("socketpair");
		tsb[k] = sb[k][1];
		asb[k] = sab[k][0];
	}
	logfd = mkstemp(logpath);
	logfd_t = mkstemp(logpath_t);
	if (logfd < 0 || logfd_t < 0)
		t_bail("mkstemp");
	unlink(logpath);
	unlink(logpath_t);
	alarm(180);
	printf("path: %s\n", udp ? "SOFTRNIC_TRANSPORT=udp (no direct op allowed)"
				 : "default (same-host direct path expected)");
	pt = fork();
	if (pt == 0) {
		dup2(logfd_t, 2);
		_exit(target(sa[1], tsb));
	}
	for (int k = 0; k < NB; k++) {
		pb[k] = fork();
		if (pb[k] == 0)
			_exit(helper(sb[k][0], sab[k][1], k));
	}
	pa = fork();
	if (pa == 0) {
		dup2(logfd, 2);
		_exit(initiator(sa[0], asb));
	}
	close(sa[0]);
	close(sa[1]);
	for (int k = 0; k < NB; k++) {
		close(sb[k][0]);
		close(sb[k][1]);
		close(sab[k][0]);
		close(sab[k][1]);
	}
	st_a = reap(pa, "A");
	for (int k = 0; k < NB; k++)
		st_b[k] = reap(pb[k], "B");
	st_t = reap(pt, "target");
	T_OK(st_a == 0 && st_b[0] == 0 && st_b[1] == 0 && st_t == 0,
	     "initiator %d, B1 %d, B2 (by packets) %d, target %d exited 0", st_a, st_b[0],
	     st_b[1], st_t);

	/* the counters, from their stderr */
	vm_denied = read_counters(logfd, names, 5, cnt);
	read_counters(logfd_t, names, 9, tcnt);
	printf("target's counters: direct_write %llu, direct_fallback %llu, direct_vm %llu, "
	       "tx_packets %llu, rx_packets %llu, tx_shm_packets %llu, rx_shm_packets %llu\n",
	       tcnt[0], tcnt[3], tcnt[4], tcnt[5], tcnt[6], tcnt[7], tcnt[8]);
	printf("initiator's counters: direct_write %llu, direct_read %llu, direct_atomic %llu, "
	       "direct_fallback %llu, direct_vm %llu\n", cnt[0], cnt[1], cnt[2], cnt[3], cnt[4]);
	if (udp) {
		T_OK(cnt[0] + cnt[1] + cnt[2] + cnt[3] + cnt[4] == 0,
		     "SOFTRNIC_TRANSPORT=udp: no direct operation");
	} else {
		T_OK(cnt[0] > 500 && cnt[1] >= 14 && cnt[2] >= N_FA,
		     "WRITEs, READs and atomics went the direct path");
		T_OK(cnt[3] >= 8, "every error case and the atomics on memory without a mapping "
		     "were left to the packet path (%llu fallbacks)", cnt[3]);
		if (vm_denied)
			printf("process_vm_* refused here: file-backed memory went by packets\n");
		else
			T_OK(cnt[4] >= 5, "file-backed memory: WRITE, READ, 2 SENDs and a WRITE "
			     "with immediate by process_vm_* (%llu)", cnt[4]);
	}
	return t_summary();
}
