/* examples/rdma_write: a one-sided RDMA WRITE.
 *
 * The client copies 64 KiB from its own registered buffer straight into
 * the server's, naming the destination by address and rkey.  The server's
 * CPU takes no part: no receive is posted, no completion appears on its
 * CQ.  It learns that the data is there only because the client says so
 * (here over the socket; a WRITE with immediate data or a SEND after the
 * WRITE would do it in-band, see send_recv_imm.c).
 *
 * Run: softrnic run -- build/examples/rdma_write [-d srn_lo]
 * Set-up (device, PD, MR, CQ, QP, connection) is in ex_common.c.
 */
#include <stdio.h>
#include <string.h>

#include "ex_common.h"

#define LEN 65536u
#define PATTERN(i) ((uint8_t)((i) * 13 + 5))

static void client(struct ex_side *s)
{
	/* Only local access: the client's buffer is a source, nobody writes it. */
	ex_open(s, LEN, 0, 0);
	ex_connect(s);
	for (uint32_t i = 0; i < LEN; i++)
		s->buf[i] = PATTERN(i);

	/* The work request: gather LEN bytes at lkey/addr here, write them at
	 * rkey/remote_addr there.  SIGNALED asks for a completion. */
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf, .length = LEN, .lkey = s->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = s->peer.addr, .rkey = s->peer.rkey },
	};
	ex_post_send(s, &wr);
	/* On RC the completion means the peer acknowledged: the data is in
	 * the server's memory. */
	ex_wait_wc(s, IBV_WC_RDMA_WRITE);
	ex_say(s, "RDMA WRITE of %u bytes completed", LEN);
	ex_sync(s); /* "it's there" */
	ex_sync(s); /* the server has checked */
	ex_close(s);
}

static void server(struct ex_side *s)
{
	/* REMOTE_WRITE on both the MR and the QP, or the write is refused
	 * (the client would see IBV_WC_REM_ACCESS_ERR).  Remote write needs
	 * local write too. */
	ex_open(s, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		IBV_ACCESS_REMOTE_WRITE);
	ex_connect(s);
	ex_sync(s);
	for (uint32_t i = 0; i < LEN; i++)
		if (s->buf[i] != PATTERN(i))
			ex_fail(s, "byte %u is 0x%02x, the client wrote 0x%02x", i, s->buf[i],
				PATTERN(i));
	ex_say(s, "all %u bytes arrived, and no completion was needed here", LEN);
	struct ibv_wc wc;
	if (ibv_poll_cq(s->cq, 1, &wc) != 0)
		ex_fail(s, "a plain WRITE produced a completion at its target");
	ex_sync(s);
	ex_close(s);
}

int main(int argc, char **argv)
{
	return ex_run(argc, argv, server, client);
}
