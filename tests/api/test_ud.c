/* UD data path, black-box: sends between two UD QPs of one process, to a
 * QP of another process and to the sending QP itself; the receive's GRH
 * slot (IPv4 header at byte 20), IBV_WC_GRH, src_qp and byte_len (+40);
 * a reply through ibv_create_ah_from_wc; a mismatched Q_Key is dropped;
 * the QP's own Q_Key is used when the WR's has the high bit set; a message
 * larger than the MTU completes with IBV_WC_LOC_LEN_ERR. */
#include <sys/wait.h>

#include "t_ud.h"

/* Child: open a UD QP, tell the parent its QPN, answer one message with
 * a reply built from the work completion. */
static int child(int wfd)
{
	struct tu_end c;
	struct ibv_wc wc;
	struct ibv_ah *ah;
	uint32_t qpn;

	T_ASSERT(tu_open(&c, TU_QKEY) == 0 && tu_recv(&c, 0) == 0, "child setup");
	qpn = c.qp->qp_num;
	T_ASSERT(write(wfd, &qpn, 4) == 4, "child tells its QPN");
	T_ASSERT(tu_poll(&c, &wc, 5000) && wc.status == IBV_WC_SUCCESS, "child receives");
	T_ASSERT(wc.byte_len == 40 + 100 && tu_payload_ok(&c, 0, 100, 0x5a), "child payload");
	ah = ibv_create_ah_from_wc(c.pd, &wc, (struct ibv_grh *)c.buf, 1);
	T_ASSERT(ah != NULL, "child: AH from the completion");
	T_ASSERT(tu_send(&c, 1, 200, 0xa5, ah, wc.src_qp, TU_QKEY) == 0, "child replies");
	T_ASSERT(tu_poll(&c, &wc, 5000) && wc.status == IBV_WC_SUCCESS, "child send done");
	ibv_destroy_ah(ah);
	return 0;
}

int main(void)
{
	struct tu_end a, b, x;
	struct ibv_wc wc;
	struct ibv_ah *ah, *ah2;
	const uint8_t *grh;
	int pfd[2], st;
	uint32_t cqpn = 0;
	pid_t pid;

	alarm(60);
	if (!t_lo_device())
		t_skip("srn_lo not available");
	/* another process first (fork before this one opens anything) */
	T_ASSERT(pipe(pfd) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		exit(child(pfd[1]));
	}
	close(pfd[1]);

	T_OK(tu_open(&a, TU_QKEY) == 0 && tu_open(&b, TU_QKEY) == 0, "two UD QPs in RTS");
	ah = tu_ah(&a, &b.gid);
	T_OK(ah != NULL, "AH to GID 0");

	/* same process */
	T_OK(tu_recv(&b, 0) == 0 && tu_send(&a, 1, 1000, 0x33, ah, b.qp->qp_num, TU_QKEY) == 0,
	     "post receive and send 1000 bytes");
	T_OK(tu_poll(&a, &wc, 2000) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND,
	     "send completes");
	T_OK(tu_poll(&b, &wc, 2000) && wc.status == IBV_WC_SUCCESS, "receive completes");
	T_OK(wc.opcode == IBV_WC_RECV && wc.byte_len == 1040, "byte_len %u = 40 + 1000",
	     wc.byte_len);
	T_OK((wc.wc_flags & IBV_WC_GRH) && wc.src_qp == a.qp->qp_num,
	     "IBV_WC_GRH set, src_qp %u is the sender", wc.src_qp);
	T_OK(wc.sl == 2, "wc.sl %u: the RoCE packet type IPv4 (2), as ConnectX reports; UCX's UD reads it",
	     wc.sl);
	T_OK(tu_payload_ok(&b, 0, 1000, 0x33), "payload after the 40-byte GRH slot");
	grh = b.buf;
	T_OK(grh[20] == 0x45 && grh[20 + 9] == 17 && !memcmp(grh + 20 + 12, a.gid.raw + 12, 4) &&
	     !memcmp(grh + 20 + 16, b.gid.raw + 12, 4),
	     "GRH slot: IPv4 header (UDP) at byte 20 with source and destination");
	ah2 = ibv_create_ah_from_wc(b.pd, &wc, (struct ibv_grh *)b.buf, 1);
	T_OK(ah2 != NULL, "ibv_create_ah_from_wc");
	T_OK(tu_recv(&a, 0) == 0 && ah2 &&
	     tu_send(&b, 1, 64, 0x44, ah2, wc.src_qp, TU_QKEY) == 0 &&
	     tu_poll(&b, &wc, 2000) && wc.status == IBV_WC_SUCCESS &&
	     tu_poll(&a, &wc, 2000) && wc.status == IBV_WC_SUCCESS &&
	     tu_payload_ok(&a, 0, 64, 0x44), "reply through the AH from the completion");

	/* Q_Key */
	T_OK(tu_recv(&b, 2) == 0 && tu_send(&a, 3, 10, 0x55, ah, b.qp->qp_num, 0x22222222) == 0 &&
	     tu_poll(&a, &wc, 2000) && wc.status == IBV_WC_SUCCESS,
	     "send with a wrong Q_Key completes at the sender");
	T_OK(!tu_poll(&b, &wc, 300), "wrong Q_Key: nothing received");
	T_OK(tu_send(&a, 3, 10, 0x66, ah, b.qp->qp_num, 0x80000000u) == 0 &&
	     tu_poll(&a, &wc, 2000) && wc.status == IBV_WC_SUCCESS &&
	     tu_poll(&b, &wc, 2000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 &&
	     tu_payload_ok(&b, 2, 10, 0x66),
	     "Q_Key high bit: the QP's Q_Key is used; the waiting receive gets it");

	/* to itself */
	T_OK(tu_recv(&a, 4) == 0 && tu_send(&a, 5, 300, 0x77, ah, a.qp->qp_num, TU_QKEY) == 0 &&
	     t_poll_cq(a.cq, &wc, 1, 2000) == 1 && wc.status == IBV_WC_SUCCESS &&
	     t_poll_cq(a.cq, &wc, 1, 2000) == 1 && wc.status == IBV_WC_SUCCESS &&
	     tu_payload_ok(&a, 4, 300, 0x77), "a QP sends to itself");

	/* another process */
	T_OK(read(pfd[0], &cqpn, 4) == 4, "child's QPN %u", cqpn);
	T_OK(tu_recv(&a, 6) == 0 && tu_send(&a, 7, 100, 0x5a, ah, cqpn, TU_QKEY) == 0 &&
	     tu_poll(&a, &wc, 2000) && wc.status == IBV_WC_SUCCESS, "send to the other process");
	T_OK(tu_poll(&a, &wc, 5000) && wc.status == IBV_WC_SUCCESS && wc.byte_len == 240 &&
	     wc.src_qp == cqpn && tu_payload_ok(&a, 6, 200, 0xa5),
	     "the other process's reply arrives (src_qp %u)", wc.src_qp);
	T_OK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	     "child passed its checks");

	/* larger than the MTU: one packet per datagram */
	T_OK(tu_open(&x, TU_QKEY) == 0, "third UD QP");
	T_OK(tu_send(&x, 0, 4097, 1, ah, b.qp->qp_num, TU_QKEY) == 0 && tu_poll(&x, &wc, 2000) &&
	     wc.status == IBV_WC_LOC_LEN_ERR, "4097 bytes (MTU 4096): %s",
	     ibv_wc_status_str(wc.status));
	T_OK(!tu_poll(&b, &wc, 200), "nothing of it received");
	if (ah2)
		ibv_destroy_ah(ah2);
	ibv_destroy_ah(ah);
	return t_summary();
}
