/* UC on the same host (transport/direct.c, direct_send.c): SENDs, SENDs
 * with immediate, RDMA WRITEs and WRITEs with immediate between the UC QPs
 * of two contexts are carried out by the sender in the receiver's memory:
 *  - 0 B, 100 B, 4 KiB and 64 KiB of each: data, byte_len, imm, qp_num,
 *    src_qp
 *  - a SEND that finds no receive posted is dropped at once, as UC's
 *    responder drops it: the sender completes it, nothing arrives, and the
 *    next SEND (a receive posted meanwhile) lands whole
 *  - a WRITE with a bad rkey goes as packets (the responder drops it);
 *    the SENDs after it arrive in order, and once its packet has landed
 *    the QP goes direct again
 * Under SOFTRNIC_TRANSPORT=udp all of it holds, with no direct operation.
 * Counters: the engines print them at ibv_close_device with
 * SOFTRNIC_LOG=debug; stderr goes to a file read at the end. */
#include <errno.h>
#include <stdbool.h>

#include "t_rc.h"
#include "t_ud.h"

enum { SLOT = 65536 };             /* receive slots in t_end's buffer */

static struct t_end a, b;
static bool udp;
static uint64_t next_rid = 100;

/* A receive of the whole slot i of b; its wr_id. */
static uint64_t recv_slot(int i)
{
	struct ibv_sge s = { (uintptr_t)b.buf + (uint64_t)i * SLOT, SLOT, b.mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = next_rid, .sg_list = &s, .num_sge = 1 }, *bad;

	CHECK(!ibv_post_recv(b.qp, &wr, &bad), "post_recv");
	return next_rid++;
}

/* op of len bytes from a's slot 0 (to b's slot i for a WRITE, with rkey),
 * waiting for a's completion. */
static void send_op(enum ibv_wr_opcode op, uint32_t len, int i, uint32_t rkey, uint32_t imm)
{
	struct ibv_sge s = { (uintptr_t)a.buf, len, a.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &s, .num_sge = len ? 1 : 0,
				  .opcode = op, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(imm) }, *bad;
	struct ibv_wc wc;

	wr.wr.rdma.remote_addr = (uintptr_t)b.buf + (uint64_t)i * SLOT;
	wr.wr.rdma.rkey = rkey;
	CHECK(!ibv_post_send(a.qp, &wr, &bad), "post_send");
	CHECK(!t_wait(a.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7,
	      "send completion: %s", ibv_wc_status_str(wc.status));
}

/* The next receive completion of b: want_id, len bytes of seed in slot i. */
static void expect_recv(uint64_t want_id, int i, uint32_t len, unsigned seed, bool imm,
			uint32_t imm_v, const char *what)
{
	uint8_t *want = malloc(len ? len : 1);
	struct ibv_wc wc;

	fill(want, len, seed);
	CHECK(!t_wait(b.cq, &wc) && wc.status == IBV_WC_SUCCESS, "%s: receive: %s", what,
	      ibv_wc_status_str(wc.status));
	CHECK(wc.wr_id == want_id && wc.byte_len == len && wc.qp_num == b.qp->qp_num &&
	      wc.src_qp == a.qp->qp_num, "%s: wr_id %llu (want %llu) len %u (want %u)", what,
	      (unsigned long long)wc.wr_id, (unsigned long long)want_id, wc.byte_len, len);
	CHECK(!!(wc.wc_flags & IBV_WC_WITH_IMM) == imm && (!imm || ntohl(wc.imm_data) == imm_v),
	      "%s: immediate", what);
	CHECK(!memcmp(b.buf + (uint64_t)i * SLOT, want, len), "%s: data", what);
	free(want);
}

static void every_op(void)
{
	static const uint32_t lens[] = { 0, 100, 4096, 65536 };

	for (unsigned k = 0; k < 4; k++) {
		uint32_t n = lens[k];
		uint64_t id;
		unsigned seed = 10 + k;

		fill(a.buf, n, seed);
		id = recv_slot(1);
		send_op(IBV_WR_SEND, n, 0, 0, 0);
		expect_recv(id, 1, n, seed, false, 0, "SEND");
		id = recv_slot(2);
		send_op(IBV_WR_SEND_WITH_IMM, n, 0, 0, 0x1000 + k);
		expect_recv(id, 2, n, seed, true, 0x1000 + k, "SEND_WITH_IMM");
		/* a plain WRITE completes nothing at b: look at its memory
		 * (the packet path's may land after a's completion) */
		fill(a.buf, n, seed + 50);
		send_op(IBV_WR_RDMA_WRITE, n, 3, b.mr->rkey, 0);
		{
			uint8_t *want = malloc(n ? n : 1);
			uint64_t end = now_ms() + 2000;

			fill(want, n, seed + 50);
			while (memcmp(b.buf + 3 * SLOT, want, n) && now_ms() < end)
				usleep(100);
			CHECK(!memcmp(b.buf + 3 * SLOT, want, n), "WRITE %u: data", n);
			free(want);
		}
		id = recv_slot(5);
		send_op(IBV_WR_RDMA_WRITE_WITH_IMM, n, 4, b.mr->rkey, 0x2000 + k);
		expect_recv(id, 4, n, seed + 50, true, 0x2000 + k, "WRITE_WITH_IMM");
	}
	printf("SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM of 0 B .. 64 KiB: data, length, "
	       "immediate\n");
}

/* No receive posted: the SEND is dropped, the next one lands. */
static void dropped(void)
{
	struct ibv_wc wc;
	uint64_t id;

	fill(a.buf, 100, 77);
	send_op(IBV_WR_SEND, 100, 0, 0, 0);
	if (udp)
		usleep(50 * 1000); /* (its packet reaches b's responder first) */
	CHECK(ibv_poll_cq(b.cq, 1, &wc) == 0, "nothing arrives for a SEND without a receive");
	id = recv_slot(6);
	fill(a.buf, 200, 78);
	send_op(IBV_WR_SEND, 200, 0, 0, 0);
	expect_recv(id, 6, 200, 78, false, 0, "the SEND after a dropped one");
	printf("a SEND with no receive posted is dropped; the next one lands whole\n");
}

/* A WRITE with a bad rkey goes as packets and is dropped there; the
 * SENDs after it keep their order; direct again once it landed. */
static void after_packets(void)
{
	uint64_t id[3];

	fill(a.buf, 64, 90);
	send_op(IBV_WR_RDMA_WRITE, 64, 7, b.mr->rkey ^ 0x5a00, 0);
	for (int k = 0; k < 2; k++) {
		id[k] = recv_slot(8 + k);
		fill(a.buf, 300 + k, 91 + k);
		send_op(IBV_WR_SEND, 300 + k, 0, 0, 0);
	}
	for (int k = 0; k < 2; k++)
		expect_recv(id[k], 8 + k, 300 + k, 91 + k, false, 0, "SEND after packets");
	usleep(20 * 1000);
	id[2] = recv_slot(10);
	fill(a.buf, 400, 95);
	send_op(IBV_WR_SEND, 400, 0, 0, 0);
	expect_recv(id[2], 10, 400, 95, false, 0, "SEND once the packets landed");
	printf("a WRITE with a bad rkey (packets, dropped) and the SENDs after it: in order\n");
}

int main(void)
{
	const char *mode = getenv("SOFTRNIC_TRANSPORT");
	struct t_log log;
	unsigned long long direct_s, direct_w, dropped_n, no_rwqe, fallback;
	FILE *f;

	udp = mode && !strcmp(mode, "udp");
	setvbuf(stdout, NULL, _IONBF, 0);
	alarm(60);
	if (t_log_begin(&log))
		return 1;
	if (t_end_open(&a, IBV_QPT_UC) || t_end_open(&b, IBV_QPT_UC)) {
		t_log_end(&log);
		printf("SKIP: srn_lo or a verb it needs is not available\n");
		return 77;
	}
	CHECK(!tu_uc_connect(a.qp, b.qp->qp_num, &b.gid) &&
	      !tu_uc_connect(b.qp, a.qp->qp_num, &a.gid), "connect");
	every_op();
	dropped();
	after_packets();
	t_end_fini(&a);
	t_end_fini(&b);
	f = t_log_end(&log);
	if (!f)
		return 1;
	direct_s = t_counter_sum(f, "direct_send");
	direct_w = t_counter_sum(f, "direct_write");
	dropped_n = t_counter_sum(f, "uc_msg_dropped");
	no_rwqe = t_counter_sum(f, "rx_drop_no_rwqe");
	fallback = t_counter_sum(f, "direct_fallback");
	printf("direct_send %llu, direct_write %llu, uc_msg_dropped %llu, rx_drop_no_rwqe %llu, "
	       "direct_fallback %llu\n", direct_s, direct_w, dropped_n, no_rwqe, fallback);
	t_echo_failures(f);
	if (udp) {
		CHECK(direct_s + direct_w == 0, "no direct operation under SOFTRNIC_TRANSPORT=udp");
		CHECK(no_rwqe >= 1, "the SEND without a receive dropped by the responder");
	} else {
		/* every_op's 8 SENDs and 8 WRITEs, the dropped SEND's
		 * successor, the last SEND; those between may go either way */
		CHECK(direct_s >= 10 && direct_w >= 8, "direct SENDs %llu (>= 10), WRITEs %llu "
		      "(>= 8)", direct_s, direct_w);
		/* (the responder counts the bad WRITE's drop there too) */
		CHECK(dropped_n >= 1 && no_rwqe == 0,
		      "the SEND without a receive dropped by its sender (%llu, %llu)", dropped_n,
		      no_rwqe);
		CHECK(fallback >= 1, "the WRITE with a bad rkey went as packets");
	}
	fclose(f);
	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
