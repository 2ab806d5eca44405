/* UD on the same host (transport/direct_ud.c): SENDs between the UD QPs
 * of two contexts are delivered by the sender in the receiver's memory:
 *  - 0, 1, 100 and 4096 B, with and without immediate: the payload after
 *    the GRH slot, byte_len (+40), qp_num, src_qp, IBV_WC_GRH, the
 *    immediate; the slot's IPv4 header (addresses, the length the
 *    datagram has, a valid checksum), as the datagram's receiver fills it
 *  - a receive of two SGEs, the GRH slot in a 40-byte buffer of its own
 *  - no receive posted: the SEND is dropped at once, the next one lands
 *  - a receive too small for GRH + message: IBV_WC_LOC_LEN_ERR there
 *  - a wrong Q_Key: nothing arrives
 *  - a receiver asleep in its completion channel is woken, in this
 *    process and in another; SENDs to that one once it has exited (its
 *    CQ armed, its channel's pipe without a reader) do not hurt us
 * Under SOFTRNIC_TRANSPORT=udp all of it holds, with no direct SEND.
 * Counters: the engines print them at ibv_close_device with
 * SOFTRNIC_LOG=debug; stderr goes to a file read at the end. */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "t_rc.h"
#include "t_ud.h"

static struct tu_end a, b;
static struct ibv_ah *ah;
static bool udp;

/* Send len bytes of byte v from a's slot 0 to b (Q_Key qkey), with imm
 * if imm_on; waits for a's completion. */
static void send_ud(uint32_t len, uint8_t v, bool imm_on, uint32_t imm, uint32_t qkey)
{
	struct ibv_sge s = { (uintptr_t)a.buf, len, a.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &s, .num_sge = len ? 1 : 0,
				  .opcode = imm_on ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(imm) }, *bad;
	struct ibv_wc wc;

	memset(a.buf, v, len);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = b.qp->qp_num;
	wr.wr.ud.remote_qkey = qkey;
	CHECK(!ibv_post_send(a.qp, &wr, &bad), "post_send");
	CHECK(tu_poll(&a, &wc, 2000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7,
	      "send completion: %s", ibv_wc_status_str(wc.status));
}

/* The next completion of b, within ms; false if none came. */
static bool recv_wc(struct ibv_wc *wc, int ms)
{
	return tu_poll(&b, wc, ms);
}

static uint16_t be16_at(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* The IPv4 header in the GRH slot g as the datagram of len payload bytes
 * would have carried it. */
static bool grh_ok(const uint8_t *g, uint32_t len, bool imm)
{
	const uint8_t *ip = g + 20;
	uint32_t roce = 12 + 8 + (imm ? 4 : 0) + len + (-len & 3) + 4, sum = 0;

	for (int i = 0; i < 20; i += 2)
		sum += be16_at(ip + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ip[0] == 0x45 && ip[9] == 17 && be16_at(ip + 2) == 20 + 8 + roce &&
	       sum == 0xffff && !memcmp(ip + 12, a.gid.raw + 12, 4) &&
	       !memcmp(ip + 16, b.gid.raw + 12, 4);
}

static void every_size(void)
{
	static const uint32_t lens[] = { 0, 1, 100, 4096 };

	for (unsigned k = 0; k < 4; k++) {
		for (int imm = 0; imm < 2; imm++) {
			uint32_t n = lens[k];
			uint8_t v = (uint8_t)(0x10 + k * 2 + imm);
			int slot = 1 + (int)k * 2 + imm;
			struct ibv_wc wc;

			memset(b.buf + (size_t)slot * TU_SLOT, 0, TU_SLOT);
			CHECK(!tu_recv(&b, slot), "post_recv");
			send_ud(n, v, imm, 0x3000 + k, TU_QKEY);
			CHECK(recv_wc(&wc, 2000) && wc.status == IBV_WC_SUCCESS,
			      "%u B%s: received", n, imm ? " + imm" : "");
			CHECK(wc.wr_id == (uint64_t)slot && wc.opcode == IBV_WC_RECV &&
			      wc.byte_len == 40 + n && wc.qp_num == b.qp->qp_num &&
			      wc.src_qp == a.qp->qp_num && (wc.wc_flags & IBV_WC_GRH) && wc.sl == 2,
			      "%u B: wr_id %llu byte_len %u qp_num %u src_qp %u flags %#x sl %u", n,
			      (unsigned long long)wc.wr_id, wc.byte_len, wc.qp_num, wc.src_qp,
			      wc.wc_flags, wc.sl);
			CHECK(!!(wc.wc_flags & IBV_WC_WITH_IMM) == imm &&
			      (!imm || ntohl(wc.imm_data) == 0x3000 + k), "%u B: immediate", n);
			CHECK(tu_payload_ok(&b, slot, n, v), "%u B: payload after the GRH slot", n);
			CHECK(grh_ok(b.buf + (size_t)slot * TU_SLOT, n, imm),
			      "%u B: the GRH slot holds the datagram's IPv4 header", n);
		}
	}
	printf("UD SEND of 0, 1, 100, 4096 B, with and without immediate: payload, GRH, "
	       "completion\n");
}

/* Another UD QP of b's PD on cq (receives of up to 2 SGEs), in RTR. */
static struct ibv_qp *b_qp(struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 2 },
	};
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = TU_QKEY };
	struct ibv_qp *qp = ibv_create_qp(b.pd, &ia);

	if (!qp)
		return NULL;
	if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_QKEY) ||
	    (at.qp_state = IBV_QPS_RTR, ibv_modify_qp(qp, &at, IBV_QP_STATE))) {
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

/* Send len bytes of byte v from a's slot 0 to qp; true once a's
 * completion says it went. */
static bool send_to(struct ibv_qp *qp, uint32_t len, uint8_t v)
{
	struct ibv_sge s = { (uintptr_t)a.buf, len, a.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 8, .sg_list = &s, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	memset(a.buf, v, len);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qp->qp_num;
	wr.wr.ud.remote_qkey = TU_QKEY;
	return !ibv_post_send(a.qp, &wr, &bad) && tu_poll(&a, &wc, 2000) &&
	       wc.status == IBV_WC_SUCCESS;
}

/* GRH in a 40-byte buffer, the message in a second one. */
static void two_sges(void)
{
	uint8_t *g = b.buf + 20 * TU_SLOT, *p = b.buf + 21 * TU_SLOT;
	struct ibv_sge s[2] = { { (uintptr_t)g, 40, b.mr->lkey },
				{ (uintptr_t)p, 1000, b.mr->lkey } };
	struct ibv_recv_wr wr = { .wr_id = 20, .sg_list = s, .num_sge = 2 }, *bad;
	struct ibv_qp *qp = b_qp(b.cq);
	struct ibv_wc wc;
	bool same = true;

	CHECK(qp != NULL, "a UD QP with 2 receive SGEs");
	if (!qp)
		return;
	memset(g, 0, 80);
	CHECK(!ibv_post_recv(qp, &wr, &bad), "post_recv of two SGEs");
	CHECK(send_to(qp, 1000, 0x6b), "send 1000 B");
	CHECK(recv_wc(&wc, 2000) && wc.status == IBV_WC_SUCCESS && wc.byte_len == 1040 &&
	      wc.qp_num == qp->qp_num, "two SGEs: received");
	for (int i = 0; i < 1000; i++)
		same = same && p[i] == 0x6b;
	CHECK(same && grh_ok(g, 1000, false) && g[40] == 0,
	      "two SGEs: GRH in the first, the message in the second");
	ibv_destroy_qp(qp);
	printf("a receive of two SGEs: the GRH slot in the first, the message in the second\n");
}

/* No receive posted: dropped, the next SEND lands. */
static void dropped(void)
{
	struct ibv_wc wc;

	send_ud(100, 0x71, false, 0, TU_QKEY);
	CHECK(!recv_wc(&wc, udp ? 200 : 50), "nothing arrives for a SEND without a receive");
	CHECK(!tu_recv(&b, 30), "post_recv");
	send_ud(200, 0x72, false, 0, TU_QKEY);
	CHECK(recv_wc(&wc, 2000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 30 &&
	      wc.byte_len == 240 && tu_payload_ok(&b, 30, 200, 0x72),
	      "the SEND after a dropped one lands whole");
	printf("a SEND with no receive posted is dropped; the next one lands\n");
}

/* A receive of 100 bytes for a 100-byte message (+ 40 of GRH): a local
 * length error at the receiver; the sender's SEND completes. */
static void too_long(void)
{
	struct ibv_sge s = { (uintptr_t)(b.buf + 31 * TU_SLOT), 100, b.mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 31, .sg_list = &s, .num_sge = 1 }, *bad;
	struct ibv_wc wc;

	CHECK(!ibv_post_recv(b.qp, &wr, &bad), "post_recv of 100 bytes");
	send_ud(100, 0x73, false, 0, TU_QKEY);
	CHECK(recv_wc(&wc, 2000) && wc.wr_id == 31 && wc.status == IBV_WC_LOC_LEN_ERR,
	      "GRH + 100 B into 100 B: %s", ibv_wc_status_str(wc.status));
	printf("a receive too small for GRH + message: local length error\n");
}

/* A wrong Q_Key: nothing arrives; the receive waits for the next. */
static void wrong_qkey(void)
{
	struct ibv_wc wc;

	CHECK(!tu_recv(&b, 32), "post_recv");
	send_ud(10, 0x74, false, 0, TU_QKEY + 1);
	CHECK(!recv_wc(&wc, 200), "wrong Q_Key: nothing received");
	send_ud(10, 0x75, false, 0, TU_QKEY);
	CHECK(recv_wc(&wc, 2000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 32 &&
	      tu_payload_ok(&b, 32, 10, 0x75), "the right Q_Key: received");
	printf("a wrong Q_Key: dropped\n");
}

/* A receiver waiting in its completion channel (CQ armed) is woken. */
static void wakes_sleeper(void)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(b.ctx);
	struct ibv_cq *cq = ch ? ibv_create_cq(b.ctx, 16, NULL, ch, 0) : NULL;
	struct ibv_qp *qp = cq ? b_qp(cq) : NULL;
	struct ibv_sge s = { (uintptr_t)(b.buf + 40 * TU_SLOT), TU_SLOT, b.mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 40, .sg_list = &s, .num_sge = 1 }, *rbad;
	struct ibv_cq *ev_cq;
	struct ibv_wc wc;
	void *ev_ctx;
	struct pollfd pfd;

	CHECK(qp != NULL, "a UD QP on a CQ with a channel");
	if (!qp)
		return;
	CHECK(!ibv_post_recv(qp, &rwr, &rbad) && !ibv_req_notify_cq(cq, 0), "receive, armed");
	CHECK(send_to(qp, 64, 0x76), "send to the sleeper");
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	CHECK(poll(&pfd, 1, 2000) == 1, "the completion channel fires");
	CHECK(!ibv_get_cq_event(ch, &ev_cq, &ev_ctx) && ev_cq == cq, "the event is the CQ's");
	ibv_ack_cq_events(cq, 1);
	CHECK(t_poll_cq(cq, &wc, 1, 1000) == 1 && wc.status == IBV_WC_SUCCESS &&
	      wc.byte_len == 104, "and the message is there");
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	printf("a receiver asleep in its completion channel is woken\n");
}

/* Another process, asleep in its completion channel, is woken by our
 * SEND; then it arms again and exits: SENDs to it now write into its
 * channel's pipe with its owner gone, which must not kill us with
 * SIGPIPE.  Child side: its QPN to the parent on wfd, then one message
 * awaited by event; "done" when armed again. */
static int sleeper_child(int wfd)
{
	struct tu_end c;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *ev_cq;
	struct ibv_qp *qp;
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = TU_QKEY };
	struct ibv_wc wc;
	void *ev_ctx;
	uint32_t qpn;

	alarm(20);
	if (tu_open(&c, TU_QKEY) || !(ch = ibv_create_comp_channel(c.ctx)) ||
	    !(cq = ibv_create_cq(c.ctx, 16, NULL, ch, 0)) ||
	    !(qp = t_qp_create(c.pd, cq, IBV_QPT_UD, 16)) ||
	    ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return 2;
	at.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &at, IBV_QP_STATE))
		return 2;
	{
		struct ibv_sge s = { (uintptr_t)c.buf, TU_SLOT, c.mr->lkey };
		struct ibv_recv_wr r = { .wr_id = 1, .sg_list = &s, .num_sge = 1 }, *bad;

		if (ibv_post_recv(qp, &r, &bad) || ibv_post_recv(qp, &r, &bad) ||
		    ibv_req_notify_cq(cq, 0))
			return 3;
	}
	qpn = qp->qp_num;
	if (write(wfd, &qpn, 4) != 4)
		return 4;
	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx) || ev_cq != cq)
		return 5;
	ibv_ack_cq_events(cq, 1);
	if (t_poll_cq(cq, &wc, 1, 1000) != 1 || wc.status != IBV_WC_SUCCESS ||
	    wc.byte_len != 40 + 64 || c.buf[40] != 0x77)
		return 6;
	if (ibv_req_notify_cq(cq, 0) || write(wfd, "done", 4) != 4)
		return 7;
	_exit(0); /* (no clean-up: gone as a crash would be) */
}

static void wakes_other_process(pid_t pid, int rfd)
{
	struct ibv_qp fake;
	uint32_t qpn = 0;
	char done[4];
	int st = -1;

	CHECK(read(rfd, &qpn, 4) == 4, "the sleeper's QPN");
	fake.qp_num = qpn;
	CHECK(send_to(&fake, 64, 0x77), "send to the sleeping process");
	CHECK(read(rfd, done, 4) == 4 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	      WEXITSTATUS(st) == 0, "the other process woke, received, armed again (status %d)",
	      st);
	/* it is gone, its CQ armed: at once, so our view of it may not know */
	for (int i = 0; i < 3; i++)
		CHECK(send_to(&fake, 8, 0x78), "send to the process that is gone (%d)", i);
	printf("another process asleep in its channel is woken; SENDs to it once it is gone "
	       "do not hurt the sender\n");
}

static void fini(struct tu_end *e)
{
	ibv_destroy_qp(e->qp);
	ibv_dereg_mr(e->mr);
	ibv_destroy_cq(e->cq);
	ibv_dealloc_pd(e->pd);
	ibv_close_device(e->ctx);
	free(e->buf);
}

int main(void)
{
	const char *mode = getenv("SOFTRNIC_TRANSPORT");
	unsigned long long direct_s, dropped_n, no_rwqe, qkey_n, wakes;
	struct t_log log;
	int pfd[2];
	pid_t child;
	FILE *f;

	udp = mode && !strcmp(mode, "udp");
	setvbuf(stdout, NULL, _IONBF, 0);
	alarm(60);
	/* the other process first: forked before this one opens anything */
	if (pipe(pfd))
		return 1;
	child = fork();
	if (child == 0) {
		close(pfd[0]);
		exit(sleeper_child(pfd[1]));
	}
	close(pfd[1]);
	if (t_log_begin(&log))
		return 1;
	if (tu_open(&a, TU_QKEY) || tu_open(&b, TU_QKEY) || !(ah = tu_ah(&a, &b.gid))) {
		t_log_end(&log);
		printf("SKIP: srn_lo or a verb it needs is not available\n");
		return 77;
	}
	every_size();
	two_sges();
	dropped();
	too_long();
	wrong_qkey();
	wakes_sleeper();
	wakes_other_process(child, pfd[0]);
	ibv_destroy_ah(ah);
	fini(&a);
	fini(&b);
	f = t_log_end(&log);
	if (!f)
		return 1;
	direct_s = t_counter_sum(f, "direct_send");
	dropped_n = t_counter_sum(f, "ud_msg_dropped");
	no_rwqe = t_counter_sum(f, "rx_drop_no_rwqe");
	qkey_n = t_counter_sum(f, "rx_drop_qkey");
	wakes = t_counter_sum(f, "direct_wakes");
	printf("direct_send %llu, ud_msg_dropped %llu, rx_drop_no_rwqe %llu, rx_drop_qkey %llu, "
	       "direct_wakes %llu\n", direct_s, dropped_n, no_rwqe, qkey_n, wakes);
	t_echo_failures(f);
	CHECK(qkey_n == 1, "the wrong Q_Key dropped by the receiver (a datagram)");
	if (udp) {
		CHECK(direct_s == 0 && wakes == 0, "no direct SEND under SOFTRNIC_TRANSPORT=udp");
		CHECK(no_rwqe == 1 && dropped_n == 0, "the SEND without a receive dropped by "
		      "the receiver");
	} else {
		/* every_size's 8, two_sges, dropped's second, wrong_qkey's
		 * second, the sleeper's */
		CHECK(direct_s >= 13, "direct SENDs %llu (>= 13)", direct_s);
		/* this process's sleeper and the other process: each woken
		 * by the sender itself */
		CHECK(wakes >= 2, "the sender woke the sleepers itself (%llu)", wakes);
		/* dropped(); and the two SENDs to the process that is gone
		 * after the first took its last receive, when our view of it
		 * still held (else datagrams, to nobody) */
		CHECK((dropped_n == 1 || dropped_n == 3) && no_rwqe == 0,
		      "the SEND without a receive dropped by its sender (%llu)", dropped_n);
	}
	fclose(f);
	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
