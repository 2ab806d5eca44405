/* examples/send_recv_imm: two-sided messages and immediate data.
 *
 * A SEND needs a receive on the other side: the receiver posts buffers to
 * its receive queue in advance, and each arriving SEND fills the next one
 * and produces a completion there.  Immediate data is 32 bits that travel
 * in the packet header and come out in the receiver's completion
 * (wc.imm_data, in network byte order).
 *
 *   client                               server
 *                                        post 2 receives (RQ)
 *   SEND_WITH_IMM "hello..", imm 0x1234 ->  1st receive: IBV_WC_RECV + imm
 *   RDMA_WRITE_WITH_IMM 64 B, imm 7     ->  data at the rkey address, and
 *                                           2nd receive consumed:
 *                                           IBV_WC_RECV_RDMA_WITH_IMM + imm
 *
 * Run: softrnic run -- build/examples/send_recv_imm [-d srn_lo]
 * Set-up (device, PD, MR, CQ, QP, connection) is in ex_common.c.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "ex_common.h"

#define LEN 8192u
#define MSG "hello over RDMA SEND"
#define RECV_SLOT 256u  /* each posted receive: 256 bytes */
#define WRITE_OFF 4096u /* where the client's WRITE lands */
#define WRITE_LEN 64u

static void client(struct ex_side *s)
{
	ex_open(s, LEN, IBV_ACCESS_LOCAL_WRITE, 0);
	ex_connect(s);
	ex_sync(s); /* the server's receives are posted: no RNR wait */

	struct ibv_sge sge = { .addr = (uintptr_t)s->buf, .length = sizeof(MSG),
			       .lkey = s->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(0x1234),
	};
	memcpy(s->buf, MSG, sizeof(MSG));
	ex_post_send(s, &wr);
	ex_wait_wc(s, IBV_WC_SEND);
	ex_say(s, "sent \"%s\" with immediate 0x1234", MSG);

	for (uint32_t i = 0; i < WRITE_LEN; i++)
		s->buf[WRITE_OFF + i] = (uint8_t)(0xa0 + i);
	sge.addr = (uintptr_t)s->buf + WRITE_OFF;
	sge.length = WRITE_LEN;
	wr.wr_id = 2;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htonl(7);
	wr.wr.rdma.remote_addr = s->peer.addr + WRITE_OFF;
	wr.wr.rdma.rkey = s->peer.rkey;
	ex_post_send(s, &wr);
	ex_wait_wc(s, IBV_WC_RDMA_WRITE);
	ex_say(s, "wrote %u bytes with immediate 7", WRITE_LEN);
	ex_sync(s); /* the server has checked */
	ex_close(s);
}

static void check_imm(struct ex_side *s, const struct ibv_wc *wc, uint32_t want)
{
	if (!(wc->wc_flags & IBV_WC_WITH_IMM))
		ex_fail(s, "completion without IBV_WC_WITH_IMM");
	if (ntohl(wc->imm_data) != want)
		ex_fail(s, "immediate 0x%x, expected 0x%x", ntohl(wc->imm_data), want);
}

static void server(struct ex_side *s)
{
	ex_open(s, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		IBV_ACCESS_REMOTE_WRITE);
	/* Receives may be posted from INIT on: before the peer can send. */
	ex_post_recv(s, 0, RECV_SLOT, 10);
	ex_post_recv(s, RECV_SLOT, RECV_SLOT, 11);
	ex_connect(s);
	ex_sync(s);

	struct ibv_wc wc = ex_wait_wc(s, IBV_WC_RECV);
	check_imm(s, &wc, 0x1234);
	if (wc.wr_id != 10 || wc.byte_len != sizeof(MSG) || memcmp(s->buf, MSG, sizeof(MSG)))
		ex_fail(s, "first receive: wr_id %llu, %u bytes, \"%.*s\"",
			(unsigned long long)wc.wr_id, wc.byte_len, (int)sizeof(MSG), s->buf);
	ex_say(s, "received \"%s\" (%u bytes), immediate 0x%x", (char *)s->buf, wc.byte_len,
	       ntohl(wc.imm_data));

	/* The WRITE's data went to the address it named, not to the receive
	 * buffer; the receive only carries the notification. */
	wc = ex_wait_wc(s, IBV_WC_RECV_RDMA_WITH_IMM);
	check_imm(s, &wc, 7);
	if (wc.wr_id != 11)
		ex_fail(s, "the WRITE consumed receive %llu, expected 11",
			(unsigned long long)wc.wr_id);
	for (uint32_t i = 0; i < WRITE_LEN; i++)
		if (s->buf[WRITE_OFF + i] != (uint8_t)(0xa0 + i))
			ex_fail(s, "written byte %u is 0x%02x", i, s->buf[WRITE_OFF + i]);
	ex_say(s, "WRITE_WITH_IMM: %u bytes at offset %u, immediate %u", WRITE_LEN, WRITE_OFF,
	       ntohl(wc.imm_data));
	ex_sync(s);
	ex_close(s);
}

int main(int argc, char **argv)
{
	return ex_run(argc, argv, server, client);
}
