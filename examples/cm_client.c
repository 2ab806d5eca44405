/* examples/cm_client: the active side of an rdma_cm connection.
 *
 *   1. rdma_resolve_addr: which device and port reach the server's IP
 *      address (RDMA_CM_EVENT_ADDR_RESOLVED);
 *   2. rdma_resolve_route: the path to it (RDMA_CM_EVENT_ROUTE_RESOLVED);
 *   3. PD, MR, CQ, QP on the id; a receive for the reply; rdma_connect,
 *      which runs the CM handshake (REQ, REP, RTU) and moves the QP to
 *      RTS (RDMA_CM_EVENT_ESTABLISHED, carrying the server's private data:
 *      its buffer's address and rkey);
 *   4. RDMA WRITE a message there, then a SEND with immediate data to
 *      say so; receive the server's reply;
 *   5. rdma_disconnect (RDMA_CM_EVENT_DISCONNECTED) and free everything.
 *
 * Run: softrnic run -- build/examples/cm_client -a 127.0.0.1 -p PORT
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "cm_common.h"

int main(int argc, char **argv)
{
	struct ex_side s = { .role = "client" };
	const char *addr = "127.0.0.1", *port = NULL;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct addrinfo *ai;

	cm_args(argc, argv, &addr, &port);
	if (!port)
		ex_fail(&s, "which port? (-p, as cm_server printed it)");
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch)
		ex_fail(&s, "rdma_create_event_channel: %s", strerror(errno));
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		ex_fail(&s, "rdma_create_id: %s", strerror(errno));
	struct addrinfo hints = { .ai_family = AF_INET, .ai_flags = AI_NUMERICHOST };
	if (getaddrinfo(addr, port, &hints, &ai))
		ex_fail(&s, "bad address %s port %s", addr, port);
	if (rdma_resolve_addr(id, NULL, ai->ai_addr, 2000))
		ex_fail(&s, "rdma_resolve_addr(%s): %s", addr, strerror(errno));
	freeaddrinfo(ai);
	rdma_ack_cm_event(cm_expect(&s, ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(id, 2000))
		ex_fail(&s, "rdma_resolve_route: %s", strerror(errno));
	rdma_ack_cm_event(cm_expect(&s, ch, RDMA_CM_EVENT_ROUTE_RESOLVED));

	cm_make_qp(&s, id, IBV_ACCESS_LOCAL_WRITE);
	ex_post_recv(&s, 0, 64, 1);
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7 };
	if (rdma_connect(id, &cp))
		ex_fail(&s, "rdma_connect: %s", strerror(errno));
	ev = cm_expect(&s, ch, RDMA_CM_EVENT_ESTABLISHED);
	struct cm_offer offer;
	if (ev->param.conn.private_data_len < sizeof(offer))
		ex_fail(&s, "the server's accept carried %u bytes of private data",
			ev->param.conn.private_data_len);
	memcpy(&offer, ev->param.conn.private_data, sizeof(offer));
	rdma_ack_cm_event(ev);
	uint64_t raddr = be64toh(offer.addr);
	uint32_t rkey = ntohl(offer.rkey);
	ex_say(&s, "server offers %u bytes at 0x%llx, rkey 0x%x", ntohl(offer.len),
	       (unsigned long long)raddr, rkey);

	/* WRITE, then SEND: both posted at once; RC executes them in order,
	 * so when the server sees the SEND, the WRITE's data is there. */
	memcpy(s.buf + 1024, CM_MSG, sizeof(CM_MSG));
	struct ibv_sge sge = { .addr = (uintptr_t)s.buf + 1024, .length = sizeof(CM_MSG),
			       .lkey = s.mr->lkey };
	struct ibv_send_wr send = { .wr_id = 3, .opcode = IBV_WR_SEND_WITH_IMM,
				    .send_flags = IBV_SEND_SIGNALED,
				    .imm_data = htonl(sizeof(CM_MSG)) };
	struct ibv_send_wr write = {
		.wr_id = 2, .next = &send, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr + 1024, .rkey = rkey },
	};
	ex_post_send(&s, &write); /* posts the chain: WRITE then SEND */
	ex_wait_wc(&s, IBV_WC_RDMA_WRITE);
	ex_wait_wc(&s, IBV_WC_SEND);
	ex_say(&s, "wrote \"%s\" and sent the notice", CM_MSG);

	struct ibv_wc wc = ex_wait_wc(&s, IBV_WC_RECV);
	if (wc.byte_len != sizeof(CM_REPLY) || memcmp(s.buf, CM_REPLY, sizeof(CM_REPLY)))
		ex_fail(&s, "reply of %u bytes: \"%.*s\"", wc.byte_len, (int)wc.byte_len,
			(char *)s.buf);
	ex_say(&s, "server replied \"%s\"", (char *)s.buf);

	if (rdma_disconnect(id))
		ex_fail(&s, "rdma_disconnect: %s", strerror(errno));
	rdma_ack_cm_event(cm_expect(&s, ch, RDMA_CM_EVENT_DISCONNECTED));
	cm_free_qp(&s, id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	ex_say(&s, "done");
	return 0;
}
