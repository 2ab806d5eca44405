/* examples/cm_server: the passive side of an rdma_cm connection.
 *
 * rdma_cm replaces the hand-made exchange of QPN, PSN and GID (see
 * ex_connect in ex_common.c) with a connection protocol that looks like
 * sockets: listen, accept.  The server
 *
 *   1. binds an rdma_cm id to an IP address and port and listens;
 *   2. gets RDMA_CM_EVENT_CONNECT_REQUEST with a new id for the client,
 *      already tied to the device that owns the address;
 *   3. creates PD, MR, CQ and QP on it, posts a receive, and accepts,
 *      handing the client its buffer's address and rkey as private data;
 *   4. after RDMA_CM_EVENT_ESTABLISHED, gets the client's WRITE followed
 *      by a SEND with immediate data, checks the data, replies "pong";
 *   5. waits for RDMA_CM_EVENT_DISCONNECTED and frees everything.
 *
 * Run: softrnic run -- build/examples/cm_server [-a 127.0.0.1] [-p PORT]
 * then cm_client with the port it prints.
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
	struct ex_side s = { .role = "server" };
	const char *addr = "127.0.0.1", *port = "0"; /* 0: any free port */
	struct rdma_cm_id *listen_id, *id;
	struct rdma_cm_event *ev;
	struct addrinfo *ai;

	cm_args(argc, argv, &addr, &port);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch)
		ex_fail(&s, "rdma_create_event_channel: %s", strerror(errno));
	if (rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP))
		ex_fail(&s, "rdma_create_id: %s", strerror(errno));
	struct addrinfo hints = { .ai_family = AF_INET, .ai_flags = AI_NUMERICHOST };
	if (getaddrinfo(addr, port, &hints, &ai))
		ex_fail(&s, "bad address %s port %s", addr, port);
	if (rdma_bind_addr(listen_id, ai->ai_addr))
		ex_fail(&s, "rdma_bind_addr(%s): %s", addr, strerror(errno));
	freeaddrinfo(ai);
	if (rdma_listen(listen_id, 1))
		ex_fail(&s, "rdma_listen: %s", strerror(errno));
	/* The test that runs this reads the port from this line. */
	ex_say(&s, "listening on %s port %u", addr, ntohs(rdma_get_src_port(listen_id)));

	ev = cm_expect(&s, ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id; /* the client's connection, not listen_id */
	rdma_ack_cm_event(ev);

	cm_make_qp(&s, id, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	/* The receive must be there before the client can send. */
	ex_post_recv(&s, 0, CM_BUF, 1);

	struct cm_offer offer = { .addr = htobe64((uintptr_t)s.buf),
				  .rkey = htonl(s.mr->rkey), .len = htonl(CM_BUF) };
	struct rdma_conn_param cp = {
		.private_data = &offer, .private_data_len = sizeof(offer),
		.responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7,
	};
	if (rdma_accept(id, &cp))
		ex_fail(&s, "rdma_accept: %s", strerror(errno));
	rdma_ack_cm_event(cm_expect(&s, ch, RDMA_CM_EVENT_ESTABLISHED));

	/* The client's WRITE lands at offset 1024; its SEND (immediate = the
	 * WRITE's length) lands in the posted receive at offset 0 and tells
	 * us the WRITE is complete: RC delivers in order. */
	struct ibv_wc wc = ex_wait_wc(&s, IBV_WC_RECV);
	if (!(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != sizeof(CM_MSG))
		ex_fail(&s, "the SEND carried no immediate, or not the WRITE's length");
	if (memcmp(s.buf + 1024, CM_MSG, sizeof(CM_MSG)))
		ex_fail(&s, "the WRITE's data is not in the buffer: \"%.40s\"",
			(char *)s.buf + 1024);
	ex_say(&s, "client wrote \"%s\"", (char *)s.buf + 1024);

	memcpy(s.buf + 2048, CM_REPLY, sizeof(CM_REPLY));
	struct ibv_sge sge = { .addr = (uintptr_t)s.buf + 2048, .length = sizeof(CM_REPLY),
			       .lkey = s.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	ex_post_send(&s, &wr);
	ex_wait_wc(&s, IBV_WC_SEND);
	ex_say(&s, "replied \"%s\"", CM_REPLY);

	/* The client hangs up; then the QP may go. */
	rdma_ack_cm_event(cm_expect(&s, ch, RDMA_CM_EVENT_DISCONNECTED));
	cm_free_qp(&s, id);
	rdma_destroy_id(id);
	rdma_destroy_id(listen_id);
	rdma_destroy_event_channel(ch);
	ex_say(&s, "done");
	return 0;
}
