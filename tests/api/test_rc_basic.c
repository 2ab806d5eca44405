/* RC data path over srn_lo: two RC QPs (each on its own context, so two
 * engines and two UDP sockets) connected to each other through GID 0
 * (::ffff:127.0.0.1).  Every opcode x sizes 0, 1, MTU-1, MTU, MTU+1,
 * 1 MiB with the data verified; then the same from a fork()ed second
 * process (QPN/PSN exchanged over a socketpair). */
#include "t_rc.h"

static const uint32_t sizes[] = { 0, 1, MTU - 1, MTU, MTU + 1, 1u << 20 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define RX_OFF (1u << 20)   /* RDMA target area of each buffer */
#define RECV_OFF (2u << 20) /* receive buffers */
#define RECV_LEN (2u << 20)

/* Requester side of every op against a peer whose buffer is described by
 * peer.  When the peer end is in this process (b != NULL) it is checked
 * directly; otherwise the peer checks its side itself (see passive()). */
static void run_ops(struct t_end *a, struct t_end *b, const struct t_conn *peer,
		    const char *tag)
{
	struct ibv_wc wc;
	uint64_t raddr = peer->addr + RX_OFF;

	for (unsigned s = 0; s < NSIZES; s++) {
		uint32_t n = sizes[s];

		/* SEND and SEND_WITH_IMM */
		for (int imm = 0; imm < 2; imm++) {
			fill(a->buf, n, s + imm);
			if (b)
				CHECK(!post_recv(b, RECV_OFF, RECV_LEN, 100 + s), "post_recv");
			CHECK(!post_send(a, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, 0, n,
					 0, 0, 0xabc0 + s, 1), "post_send");
			CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
			      wc.opcode == IBV_WC_SEND && wc.wr_id == 1,
			      "%s SEND%s %u: send wc status %s", tag, imm ? "_IMM" : "", n,
			      ibv_wc_status_str(wc.status));
			if (b) {
				CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
				      wc.opcode == IBV_WC_RECV && wc.byte_len == n &&
				      wc.wr_id == 100 + s && wc.qp_num == b->qp->qp_num &&
				      wc.src_qp == a->qp->qp_num,
				      "%s SEND %u: recv wc st %s op %d len %u", tag, n,
				      ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len);
				CHECK(imm ? (wc.wc_flags & IBV_WC_WITH_IMM) &&
						    ntohl(wc.imm_data) == 0xabc0 + s
					  : !(wc.wc_flags & IBV_WC_WITH_IMM),
				      "%s SEND imm %d", tag, imm);
				CHECK(!memcmp(a->buf, b->buf + RECV_OFF, n), "%s SEND %u data", tag, n);
			}
		}
		printf("%s: SEND, SEND_WITH_IMM %u bytes ok\n", tag, n);

		/* RDMA WRITE, then READ it back into another spot */
		fill(a->buf, n, s + 50);
		CHECK(!post_send(a, IBV_WR_RDMA_WRITE, 0, n, raddr, peer->rkey, 0, 2), "post");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_RDMA_WRITE && wc.wr_id == 2,
		      "%s WRITE %u: %s", tag, n, ibv_wc_status_str(wc.status));
		if (b)
			CHECK(!memcmp(a->buf, b->buf + RX_OFF, n), "%s WRITE %u data", tag, n);
		memset(a->buf + RX_OFF, 0xee, n);
		CHECK(!post_send(a, IBV_WR_RDMA_READ, RX_OFF, n, raddr, peer->rkey, 0, 3), "post");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_RDMA_READ && wc.byte_len == n && wc.wr_id == 3,
		      "%s READ %u: %s len %u", tag, n, ibv_wc_status_str(wc.status), wc.byte_len);
		CHECK(!memcmp(a->buf, a->buf + RX_OFF, n), "%s WRITE+READ %u data", tag, n);
		printf("%s: RDMA_WRITE, RDMA_READ %u bytes ok (read back equals written)\n", tag, n);

		/* WRITE_WITH_IMM consumes a receive WQE (here with no SGE) */
		fill(a->buf, n, s + 90);
		if (b) {
			struct ibv_recv_wr wr = { .wr_id = 200 + s }, *bad;

			CHECK(!ibv_post_recv(b->qp, &wr, &bad), "post_recv");
		}
		CHECK(!post_send(a, IBV_WR_RDMA_WRITE_WITH_IMM, 0, n, raddr, peer->rkey,
				 0x5150 + s, 4), "post");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 4,
		      "%s WRITE_IMM %u: %s", tag, n, ibv_wc_status_str(wc.status));
		if (b) {
			CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
			      wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
			      (wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0x5150 + s &&
			      wc.byte_len == n && wc.wr_id == 200 + s,
			      "%s WRITE_IMM %u: recv wc %s op %d len %u", tag, n,
			      ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len);
			CHECK(!memcmp(a->buf, b->buf + RX_OFF, n), "%s WRITE_IMM data", tag);
		}
		printf("%s: RDMA_WRITE_WITH_IMM %u bytes ok\n", tag, n);
	}

	/* Atomics on an 8-byte word at the start of the peer's target half. */
	uint64_t *res = (uint64_t *)(a->buf + 64);
	uint64_t word = 1000;

	/* outside the WRITE area, which the peer may still be checking */
	raddr = peer->addr + 512;

	fill(a->buf, 8, 0);
	memcpy(a->buf + 128, &word, 8);
	CHECK(!post_send(a, IBV_WR_RDMA_WRITE, 128, 8, raddr, peer->rkey, 0, 5), "post");
	CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS, "atomic setup");
	{
		struct ibv_sge sge = { (uintptr_t)res, 8, a->mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 6, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = peer->rkey;
		wr.wr.atomic.compare_add = 5;
		*res = 0;
		CHECK(!ibv_post_send(a->qp, &wr, &bad), "post fadd");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_FETCH_ADD && wc.byte_len == 8 && *res == 1000,
		      "%s FETCH_ADD: %s orig %llu", tag, ibv_wc_status_str(wc.status),
		      (unsigned long long)*res);
		wr.wr_id = 7;
		wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.compare_add = 1005;
		wr.wr.atomic.swap = 77;
		*res = 0;
		CHECK(!ibv_post_send(a->qp, &wr, &bad), "post cas");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_COMP_SWAP && *res == 1005,
		      "%s CMP_SWAP (hit): %s orig %llu", tag, ibv_wc_status_str(wc.status),
		      (unsigned long long)*res);
		wr.wr_id = 8;
		wr.wr.atomic.compare_add = 1;
		wr.wr.atomic.swap = 99;
		CHECK(!ibv_post_send(a->qp, &wr, &bad), "post cas");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS && *res == 77,
		      "%s CMP_SWAP (miss): orig %llu", tag, (unsigned long long)*res);
		if (b) {
			memcpy(&word, b->buf + 512, 8);
			CHECK(word == 77, "%s atomic target %llu", tag, (unsigned long long)word);
		}
		/* read the word back */
		CHECK(!post_send(a, IBV_WR_RDMA_READ, 256, 8, raddr, peer->rkey, 0, 9), "post");
		CHECK(!t_wait(a->cq, &wc) && wc.status == IBV_WC_SUCCESS, "read word");
		memcpy(&word, a->buf + 256, 8);
		CHECK(word == 77, "%s atomic result read back %llu", tag, (unsigned long long)word);
	}
	printf("%s: FETCH_ADD, CMP_SWAP (hit and miss) ok\n", tag);
}

/* Passive peer of the two-process test: serves receives the initiator's
 * SENDs and WRITE_WITH_IMMs need, checking each one. */
static void passive(struct t_end *b, const struct t_conn *peer, int sock)
{
	struct ibv_wc wc;
	uint8_t *expect = malloc(RECV_LEN);

	for (unsigned s = 0; s < NSIZES; s++) {
		uint32_t n = sizes[s];

		for (int imm = 0; imm < 2; imm++) {
			CHECK(!post_recv(b, RECV_OFF, RECV_LEN, 100 + s), "post_recv");
			char go = 1;

			CHECK(write(sock, &go, 1) == 1, "sync");
			CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
			      wc.opcode == IBV_WC_RECV && wc.byte_len == n &&
			      wc.src_qp == peer->qpn, "child SEND %u recv %s len %u", n,
			      ibv_wc_status_str(wc.status), wc.byte_len);
			fill(expect, n, s + imm);
			CHECK(!memcmp(expect, b->buf + RECV_OFF, n), "child SEND %u data", n);
			CHECK(!imm || ntohl(wc.imm_data) == 0xabc0 + s, "child imm");
		}
		struct ibv_recv_wr wr = { .wr_id = 200 + s }, *bad;
		char go = 1;

		CHECK(!ibv_post_recv(b->qp, &wr, &bad), "post_recv");
		CHECK(write(sock, &go, 1) == 1, "sync");
		CHECK(!t_wait(b->cq, &wc) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len == n,
		      "child WRITE_IMM %u: %s", n, ibv_wc_status_str(wc.status));
		fill(expect, n, s + 90);
		CHECK(!memcmp(expect, b->buf + RX_OFF, n), "child WRITE_IMM %u data", n);
	}
	free(expect);
}

static int two_process(void)
{
	int sv[2];
	pid_t pid;
	int status;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct t_end b;
		struct t_conn me, peer;

		close(sv[0]);
		alarm(60);
		if (t_end_init(&b))
			_exit(2);
		me = t_info(&b, 0x300);
		if (write(sv[1], &me, sizeof(me)) != sizeof(me) ||
		    read(sv[1], &peer, sizeof(peer)) != sizeof(peer))
			_exit(2);
		if (t_connect(&b, 0x300, &peer, 14, 7, 7))
			_exit(2);
		passive(&b, &peer, sv[1]);
		/* stay until the initiator is done (one-sided ops need us) */
		char done;
		if (read(sv[1], &done, 1) != 1)
			failures++;
		printf("child: passive side %s\n", failures ? "FAILED" : "ok");
		_exit(failures ? 1 : 0);
	}
	close(sv[1]);
	struct t_end a;
	struct t_conn me, peer;

	if (t_end_init(&a))
		return -1;
	me = t_info(&a, 0x123);
	if (read(sv[0], &peer, sizeof(peer)) != sizeof(peer) ||
	    write(sv[0], &me, sizeof(me)) != sizeof(me))
		return -1;
	if (t_connect(&a, 0x123, &peer, 14, 7, 7))
		return -1;
	/* The child posts each receive before it says go: wrap run_ops'
	 * sends by reading a sync byte first.  Simplest: let RNR retry
	 * (rnr_retry 7) absorb the race instead. */
	run_ops(&a, NULL, &peer, "2proc");
	char done = 1;
	CHECK(write(sv[0], &done, 1) == 1, "done");
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit status %d", status);
	return 0;
}

int main(void)
{
	struct t_end a, b;
	struct t_conn ia, ib;

	setvbuf(stdout, NULL, _IONBF, 0);
	alarm(120);
	if (t_end_init(&a) || t_end_init(&b)) {
		printf("SKIP: srn_lo or a verb it needs is not available\n");
		return 77;
	}
	ia = t_info(&a, 0x10);
	ib = t_info(&b, 0xfffff0); /* wraps the 24-bit PSN during the test */
	CHECK(!t_connect(&a, 0x10, &ib, 14, 7, 7) && !t_connect(&b, 0xfffff0, &ia, 14, 7, 7),
	      "connect");
	printf("one process: QP %u <-> QP %u over srn_lo\n", a.qp->qp_num, b.qp->qp_num);
	run_ops(&a, &b, &ib, "1proc a->b");
	run_ops(&b, &a, &ia, "1proc b->a");

	CHECK(!two_process(), "two-process setup");

	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
