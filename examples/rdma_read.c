/* examples/rdma_read: a one-sided RDMA READ.
 *
 * The server fills a buffer and publishes its address and rkey; the
 * client pulls it into its own buffer.  The roles are the mirror of a
 * WRITE: the reader's MR must allow LOCAL_WRITE (the NIC writes the
 * response into it), the target's must allow REMOTE_READ.  The server's
 * CPU again does nothing: on a real NIC it would not even be woken.
 *
 * Run: softrnic run -- build/examples/rdma_read [-d srn_lo]
 * Set-up (device, PD, MR, CQ, QP, connection) is in ex_common.c.
 */
#include <stdio.h>
#include <string.h>

#include "ex_common.h"

#define LEN 65536u
#define PATTERN(i) ((uint8_t)((i) * 7 + 1))

static void client(struct ex_side *s)
{
	ex_open(s, LEN, IBV_ACCESS_LOCAL_WRITE, 0);
	ex_connect(s);
	ex_sync(s); /* the server's buffer is filled */

	/* Two READs: the first 100 bytes, then the rest.  A READ's response
	 * lands in the sge; the completion says how much (byte_len). */
	uint32_t cut = 100;
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf, .length = cut, .lkey = s->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = s->peer.addr, .rkey = s->peer.rkey },
	};
	ex_post_send(s, &wr);
	struct ibv_wc wc = ex_wait_wc(s, IBV_WC_RDMA_READ);
	if (wc.byte_len != cut)
		ex_fail(s, "READ completed with byte_len %u, expected %u", wc.byte_len, cut);

	sge.addr += cut;
	sge.length = LEN - cut;
	wr.wr_id = 2;
	wr.wr.rdma.remote_addr += cut;
	ex_post_send(s, &wr);
	ex_wait_wc(s, IBV_WC_RDMA_READ);

	for (uint32_t i = 0; i < LEN; i++)
		if (s->buf[i] != PATTERN(i))
			ex_fail(s, "byte %u read as 0x%02x, the server holds 0x%02x", i, s->buf[i],
				PATTERN(i));
	ex_say(s, "read %u bytes in two READs, all as the server wrote them", LEN);
	ex_sync(s);
	ex_close(s);
}

static void server(struct ex_side *s)
{
	ex_open(s, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ,
		IBV_ACCESS_REMOTE_READ);
	ex_connect(s);
	for (uint32_t i = 0; i < LEN; i++)
		s->buf[i] = PATTERN(i);
	ex_say(s, "buffer filled; waiting while the client reads it");
	ex_sync(s);
	ex_sync(s); /* the client is done: only now may the buffer go */
	ex_close(s);
}

int main(int argc, char **argv)
{
	return ex_run(argc, argv, server, client);
}
