/* softrnic-demo: RDMA between two processes on one host, through every verb
 * the mission names.  The parent is the "server", a forked child the
 * "client"; they swap QP numbers, GIDs, addresses and rkeys over a
 * socketpair (as real programs do over TCP), then the client drives the
 * one-sided and two-sided operations and both print what they did.
 *
 * Usage: softrnic-demo [-d DEVICE] [-q]   (default device: the first one)
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "ex_common.h"

#define BUF_SIZE (4u << 20)
#define TIMEOUT_SEC 20

static const char *role = "server";
static int quiet;

static void step(const char *fmt, ...)
{
	va_list ap;

	if (quiet)
		return;
	printf("[%s] ", role);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void die(const char *what, int err)
{
	fprintf(stderr, "[%s] FAILED: %s: %s\n", role, what, strerror(err));
	exit(1);
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void xfer(int sock, const void *out, void *in, size_t len)
{
	if (write(sock, out, len) != (ssize_t)len)
		die("socket write", errno);
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(sock, (char *)in + got, len - got);
		if (n <= 0)
			die("socket read (peer gone?)", n < 0 ? errno : EPIPE);
		got += (size_t)n;
	}
}

static void sync_peer(struct ex_side *s)
{
	char a = 'x', b;
	xfer(s->sock, &a, &b, 1);
}

/* Poll until one completion arrives; checks its status and opcode. */
static struct ibv_wc wait_wc(struct ex_side *s, enum ibv_wc_opcode want)
{
	struct ibv_wc wc;
	double deadline = now_us() + TIMEOUT_SEC * 1e6;

	for (;;) {
		int n = ibv_poll_cq(s->cq, 1, &wc);
		if (n < 0)
			die("ibv_poll_cq", EIO);
		if (n == 1)
			break;
		if (now_us() > deadline)
			die("waiting for a completion", ETIMEDOUT);
	}
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "[%s] FAILED: completion status %s\n", role,
			ibv_wc_status_str(wc.status));
		exit(1);
	}
	if (wc.opcode != want) {
		fprintf(stderr, "[%s] FAILED: completion opcode %d, wanted %d\n",
			role, wc.opcode, want);
		exit(1);
	}
	return wc;
}

static void post_send(struct ex_side *s, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int err = ibv_post_send(s->qp, wr, &bad);
	if (err)
		die("ibv_post_send", err);
}

static void post_recv(struct ex_side *s, uint64_t off, uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)s->buf + off, .length = len, .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = off, .sg_list = &sge, .num_sge = 1 }, *bad;
	int err = ibv_post_recv(s->qp, &wr, &bad);
	if (err)
		die("ibv_post_recv", err);
}

static void open_device(struct ex_side *s, const char *want)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = NULL;

	if (!list || n == 0)
		die("ibv_get_device_list (no devices)", ENODEV);
	for (int i = 0; i < n; i++)
		if (!want || !strcmp(ibv_get_device_name(list[i]), want))
			dev = dev ? dev : list[i];
	if (!dev)
		die("no such device", ENODEV);
	s->ctx = ibv_open_device(dev);
	if (!s->ctx)
		die("ibv_open_device", errno);
	step("opened %s (node GUID %016" PRIx64 ")", ibv_get_device_name(dev),
	     be64toh(ibv_get_device_guid(dev)));
	ibv_free_device_list(list);

	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	int err = ibv_query_device(s->ctx, &da);
	if (err)
		die("ibv_query_device", err);
	err = ibv_query_port(s->ctx, 1, &pa);
	if (err)
		die("ibv_query_port", err);
	if (ibv_query_gid(s->ctx, 1, 0, &s->me.gid))
		die("ibv_query_gid", errno);
	step("device: max_qp %d max_qp_wr %d max_sge %d atomic_cap %s; port %s, "
	     "link layer %s, active MTU %d", da.max_qp, da.max_qp_wr, da.max_sge,
	     da.atomic_cap == IBV_ATOMIC_HCA ? "HCA" : "other",
	     ibv_port_state_str(pa.state),
	     pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "IB",
	     128 << pa.active_mtu);
}

static void setup(struct ex_side *s, const char *dev)
{
	open_device(s, dev);
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd)
		die("ibv_alloc_pd", errno);
	step("allocated protection domain");
	s->buf = aligned_alloc(4096, BUF_SIZE);
	if (!s->buf)
		die("aligned_alloc", ENOMEM);
	memset(s->buf, 0, BUF_SIZE);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!s->mr)
		die("ibv_reg_mr", errno);
	step("registered %u KiB memory region: lkey 0x%x rkey 0x%x", BUF_SIZE >> 10,
	     s->mr->lkey, s->mr->rkey);
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	if (!s->cq)
		die("ibv_create_cq", errno);
	step("created completion queue (%d entries)", s->cq->cqe);
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 128, .max_recv_wr = 128,
			 .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 64 },
	};
	s->qp = ibv_create_qp(s->pd, &ia);
	if (!s->qp)
		die("ibv_create_qp", errno);
	step("created RC queue pair %u", s->qp->qp_num);

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC };
	int err = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		die("ibv_modify_qp INIT", err);
	s->me.qpn = s->qp->qp_num;
	s->me.psn = (uint32_t)getpid() & 0xffffff;
	s->me.rkey = s->mr->rkey;
	s->me.addr = (uintptr_t)s->buf;
}

static void connect_qp(struct ex_side *s)
{
	xfer(s->sock, &s->me, &s->peer, sizeof(s->me));
	step("exchanged QP info: peer QPN %u PSN %u", s->peer.qpn, s->peer.psn);

	const char *what;
	int err = ex_qp_connect(s->qp, &s->me, &s->peer, IBV_MTU_4096, 16, &what);
	if (err)
		die(what, err);
	step("connected: INIT -> RTR -> RTS");
}

static void teardown(struct ex_side *s)
{
	int err;

	if ((err = ibv_destroy_qp(s->qp)))
		die("ibv_destroy_qp", err);
	if ((err = ibv_destroy_cq(s->cq)))
		die("ibv_destroy_cq", err);
	if ((err = ibv_dereg_mr(s->mr)))
		die("ibv_dereg_mr", err);
	if ((err = ibv_dealloc_pd(s->pd)))
		die("ibv_dealloc_pd", err);
	if ((err = ibv_close_device(s->ctx)))
		die("ibv_close_device", err);
	free(s->buf);
	step("destroyed QP, CQ, MR, PD; closed device");
}

/* ---- the exchanges ------------------------------------------------------ */

enum { OFF_WRITE = 0, OFF_READ = 1 << 20, OFF_SEND = 2 << 20, OFF_ATOMIC = 3 << 20 };
#define PATTERN(i) ((uint8_t)((i) * 7 + 3))

static void client(struct ex_side *s)
{
	struct ibv_sge sge = { .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_wc wc;

	/* RDMA WRITE 64 KiB into the server's buffer. */
	for (uint32_t i = 0; i < 65536; i++)
		s->buf[OFF_WRITE + i] = PATTERN(i);
	sge.addr = (uintptr_t)s->buf + OFF_WRITE;
	sge.length = 65536;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = s->peer.addr + OFF_WRITE;
	wr.wr.rdma.rkey = s->peer.rkey;
	post_send(s, &wr);
	wc = wait_wc(s, IBV_WC_RDMA_WRITE);
	step("RDMA WRITE 65536 bytes -> completed");

	/* RDMA READ 64 KiB the server prepared. */
	sync_peer(s);
	sge.addr = (uintptr_t)s->buf + OFF_READ;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = s->peer.addr + OFF_READ;
	post_send(s, &wr);
	wc = wait_wc(s, IBV_WC_RDMA_READ);
	for (uint32_t i = 0; i < 65536; i++)
		if (s->buf[OFF_READ + i] != (uint8_t)~PATTERN(i))
			die("RDMA READ data mismatch", EIO);
	step("RDMA READ %u bytes -> data verified", wc.byte_len);

	/* SEND with immediate data. */
	memcpy(s->buf + OFF_SEND, "hello from the client", 22);
	sge.addr = (uintptr_t)s->buf + OFF_SEND;
	sge.length = 22;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(0xC0FFEE);
	sync_peer(s); /* server has posted its receive */
	post_send(s, &wr);
	wait_wc(s, IBV_WC_SEND);
	step("SEND_WITH_IMM 22 bytes, imm 0xC0FFEE -> completed");

	/* RDMA WRITE with immediate: consumes a receive on the server. */
	sge.length = 8;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htonl(42);
	wr.wr.rdma.remote_addr = s->peer.addr + OFF_WRITE;
	post_send(s, &wr);
	wait_wc(s, IBV_WC_RDMA_WRITE);
	step("RDMA WRITE_WITH_IMM 8 bytes, imm 42 -> completed");

	/* Atomics on the server's 8-byte counter (initialised to 100). */
	sync_peer(s);
	uint64_t *old = (uint64_t *)(s->buf + OFF_ATOMIC);
	sge.addr = (uintptr_t)old;
	sge.length = 8;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = s->peer.addr + OFF_ATOMIC;
	wr.wr.atomic.rkey = s->peer.rkey;
	wr.wr.atomic.compare_add = 5;
	post_send(s, &wr);
	wait_wc(s, IBV_WC_FETCH_ADD);
	if (*old != 100)
		die("FETCH_AND_ADD returned the wrong old value", EIO);
	step("ATOMIC FETCH_AND_ADD +5 -> old value %" PRIu64, *old);
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 105;
	wr.wr.atomic.swap = 7777;
	post_send(s, &wr);
	wait_wc(s, IBV_WC_COMP_SWAP);
	if (*old != 105)
		die("CMP_AND_SWP returned the wrong old value", EIO);
	step("ATOMIC CMP_AND_SWP 105 -> 7777 -> old value %" PRIu64, *old);
	sync_peer(s);

	/* Latency: 2-byte WRITE round trips; bandwidth: 64 KiB and 1 MiB WRITEs. */
	const int lat_iters = 2000;
	sge.addr = (uintptr_t)s->buf + OFF_WRITE;
	sge.length = 2;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = s->peer.addr + OFF_WRITE;
	wr.wr.rdma.rkey = s->peer.rkey;
	double t0 = now_us();
	for (int i = 0; i < lat_iters; i++) {
		post_send(s, &wr);
		wait_wc(s, IBV_WC_RDMA_WRITE);
	}
	double lat = (now_us() - t0) / lat_iters;

	printf("\n  %-28s %12s\n", "operation", "result");
	printf("  %-28s %9.2f us\n", "2 B RDMA WRITE (posted->completed)", lat);
	uint32_t sizes[] = { 65536, 1u << 20 };
	for (int k = 0; k < 2; k++) {
		int iters = sizes[k] == 65536 ? 400 : 40, inflight = 0, done = 0;
		sge.length = sizes[k];
		t0 = now_us();
		while (done < iters) {
			while (inflight < 16 && done + inflight < iters) {
				post_send(s, &wr);
				inflight++;
			}
			int n = ibv_poll_cq(s->cq, 1, &wc);
			if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS))
				die("bandwidth completion", EIO);
			done += n;
			inflight -= n;
		}
		double secs = (now_us() - t0) / 1e6;
		printf("  %-28s %9.2f GB/s\n",
		       sizes[k] == 65536 ? "64 KiB RDMA WRITE bandwidth" : "1 MiB RDMA WRITE bandwidth",
		       (double)sizes[k] * iters / secs / 1e9);
	}
	printf("\n");
	sync_peer(s);
}

static void server(struct ex_side *s)
{
	struct ibv_wc wc;

	/* WRITE lands without the server doing anything. */
	for (uint32_t i = 0; i < 65536; i++)
		s->buf[OFF_READ + i] = (uint8_t)~PATTERN(i);
	sync_peer(s);
	for (uint32_t i = 0; i < 65536; i++)
		if (s->buf[OFF_WRITE + i] != PATTERN(i))
			die("RDMA WRITE data mismatch", EIO);
	step("RDMA WRITE from the client arrived: 65536 bytes verified (no CPU involved)");

	post_recv(s, OFF_SEND, 4096);
	post_recv(s, OFF_SEND + 4096, 4096);
	sync_peer(s);
	wc = wait_wc(s, IBV_WC_RECV);
	if (!(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != 0xC0FFEE ||
	    wc.byte_len != 22 || strcmp((char *)s->buf + OFF_SEND, "hello from the client"))
		die("RECV contents", EIO);
	step("RECV %u bytes \"%s\", imm 0x%X, from QP %u", wc.byte_len,
	     (char *)s->buf + OFF_SEND, ntohl(wc.imm_data), wc.src_qp);
	wc = wait_wc(s, IBV_WC_RECV_RDMA_WITH_IMM);
	if (ntohl(wc.imm_data) != 42)
		die("RECV_RDMA_WITH_IMM immediate", EIO);
	step("RECV_RDMA_WITH_IMM: imm %u", ntohl(wc.imm_data));

	uint64_t *counter = (uint64_t *)(s->buf + OFF_ATOMIC);
	*counter = 100;
	sync_peer(s);
	sync_peer(s);
	if (*counter != 7777)
		die("atomic result", EIO);
	step("atomics applied: counter is now %" PRIu64, *counter);
	sync_peer(s); /* client's benchmark done */
}

int main(int argc, char **argv)
{
	const char *dev = NULL;
	int opt, sv[2];

	while ((opt = getopt(argc, argv, "d:qh")) != -1) {
		switch (opt) {
		case 'd': dev = optarg; break;
		case 'q': quiet = 1; break;
		default:
			fprintf(stderr, "usage: %s [-d DEVICE] [-q]\n", argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		die("socketpair", errno);
	pid_t child = fork();
	if (child < 0)
		die("fork", errno);
	struct ex_side s = { 0 };
	if (child == 0) {
		role = "client";
		close(sv[0]);
		s.sock = sv[1];
		alarm(TIMEOUT_SEC * 3);
		setup(&s, dev);
		connect_qp(&s);
		client(&s);
		teardown(&s);
		return 0;
	}
	close(sv[1]);
	s.sock = sv[0];
	alarm(TIMEOUT_SEC * 3);
	step("softrnic demo: server pid %d, client pid %d", getpid(), child);
	setup(&s, dev);
	connect_qp(&s);
	server(&s);
	teardown(&s);
	int status;
	if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "[server] FAILED: client did not finish cleanly\n");
		return 1;
	}
	printf("demo complete: both processes exited cleanly\n");
	return 0;
}
