/* RC QPs on the iWARP device (SOFTRNIC_DEVICES=lo:iwarp) connected by
 * rdma_cm over TCP + MPA in one process: private data both ways, SEND,
 * RDMA WRITE and RDMA READ with their completions, the work requests siw
 * refuses in ibv_post_send, a READ of a bad rkey (the peer's Terminate:
 * IBV_WC_REM_ACCESS_ERR, QP_FATAL here, QP_ACCESS_ERR there, both ends
 * DISCONNECTED), rdma_disconnect (DISCONNECTED both sides, receives
 * flushed) and rdma_reject (REJECTED, -ECONNREFUSED, its private data).  docs/iwarp.md has the mapping. */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "tests/lib/t_cm.h"
#include "tests/lib/t_util.h"
#include "tests/lib/t_verbs.h"

enum { BUF = 128 * 1024, MS = 5000 };

struct end {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	uint8_t *buf;
	struct ibv_mr *mr;
};

static void end_mr(struct end *e)
{
	e->buf = calloc(1, BUF);
	e->mr = ibv_reg_mr(e->id->pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
}

static int post_recv(struct end *e, uint64_t id, uint32_t off, uint32_t len)
{
	struct ibv_sge s = { (uintptr_t)e->buf + off, len, e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;

	return ibv_post_recv(e->id->qp, &wr, &bad);
}

static int post_send(struct end *e, enum ibv_wr_opcode op, uint32_t off, uint32_t len,
		     uint64_t raddr, uint32_t rkey, struct ibv_send_wr **bad)
{
	struct ibv_sge s = { (uintptr_t)e->buf + off, len, e->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = &s, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED };

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(e->id->qp, &wr, bad);
}

static int one_wc(struct rdma_cm_id *id, bool send, struct ibv_wc *wc)
{
	return t_poll_cq(send ? id->send_cq : id->recv_cq, wc, 1, MS) == 1 ? 0 : -1;
}

static int async_event(struct ibv_context *ctx, enum ibv_event_type *t, struct ibv_qp **qp)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	if (poll(&p, 1, MS) != 1 || ibv_get_async_event(ctx, &ev))
		return -1;
	*t = ev.event_type;
	*qp = ev.element.qp;
	ibv_ack_async_event(&ev);
	return 0;
}

/* A connected pair: cli (active) and srv (passive), listener l. */
static int connect_pair(struct end *l, struct end *cli, struct end *srv, int port)
{
	struct sockaddr_in sin = t_cm_loopback(port);
	struct rdma_conn_param cp = { .private_data = "hello", .private_data_len = 6,
				      .responder_resources = 4, .initiator_depth = 4 };
	struct rdma_conn_param ap = { .private_data = "world", .private_data_len = 6,
				      .responder_resources = 4, .initiator_depth = 4 };
	struct rdma_cm_event *ev;
	int ok;

	if (rdma_create_id(cli->ch, &cli->id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(cli->id, NULL, (struct sockaddr *)&sin, MS) ||
	    t_cm_expect(cli->ch, RDMA_CM_EVENT_ADDR_RESOLVED, MS, NULL) ||
	    rdma_resolve_route(cli->id, MS) ||
	    t_cm_expect(cli->ch, RDMA_CM_EVENT_ROUTE_RESOLVED, MS, NULL) ||
	    t_cm_make_qp(cli->id, 8))
		return -1;
	T_OK(!strcmp(ibv_get_device_name(cli->id->verbs->device), "srn_iw_lo"),
	     "the client's id is on srn_iw_lo");
	end_mr(cli);
	if (!cli->mr || rdma_connect(cli->id, &cp) ||
	    t_cm_expect(l->ch, RDMA_CM_EVENT_CONNECT_REQUEST, MS, &ev))
		return -1;
	T_OK(ev->param.conn.private_data_len >= 6 &&
	     !memcmp(ev->param.conn.private_data, "hello", 6) &&
	     ev->param.conn.responder_resources == 4 && ev->param.conn.initiator_depth == 4,
	     "CONNECT_REQUEST carries the MPA request's private data and IRD/ORD 4/4");
	srv->id = ev->id;
	rdma_ack_cm_event(ev);
	if (t_cm_make_qp(srv->id, 8))
		return -1;
	end_mr(srv);
	if (!srv->mr || post_recv(srv, 1, 0, 4096) || rdma_accept(srv->id, &ap) ||
	    t_cm_expect(cli->ch, RDMA_CM_EVENT_ESTABLISHED, MS, &ev))
		return -1;
	ok = ev->param.conn.private_data_len >= 6 &&
	     !memcmp(ev->param.conn.private_data, "world", 6);
	rdma_ack_cm_event(ev);
	T_OK(ok, "the client's ESTABLISHED carries the MPA reply's private data");
	return t_cm_expect(srv->ch, RDMA_CM_EVENT_ESTABLISHED, MS, NULL);
}

/* rdma_reject: the client hears REJECTED, -ECONNREFUSED, with the
 * reject's private data (the MPA reply's). */
static void rejected(struct end *l, struct end *cli, int port)
{
	struct sockaddr_in sin = t_cm_loopback(port);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *sid;
	int ok;

	T_ASSERT(!rdma_create_id(cli->ch, &cli->id, NULL, RDMA_PS_TCP) &&
		 !rdma_resolve_addr(cli->id, NULL, (struct sockaddr *)&sin, MS) &&
		 !t_cm_expect(cli->ch, RDMA_CM_EVENT_ADDR_RESOLVED, MS, NULL) &&
		 !rdma_resolve_route(cli->id, MS) &&
		 !t_cm_expect(cli->ch, RDMA_CM_EVENT_ROUTE_RESOLVED, MS, NULL) &&
		 !t_cm_make_qp(cli->id, 8) && !rdma_connect(cli->id, NULL) &&
		 !t_cm_expect(l->ch, RDMA_CM_EVENT_CONNECT_REQUEST, MS, &ev), "third connection");
	sid = ev->id;
	rdma_ack_cm_event(ev);
	T_OK(!rdma_reject(sid, "nope", 5), "rdma_reject");
	ev = t_cm_event(cli->ch, MS);
	ok = ev && ev->event == RDMA_CM_EVENT_REJECTED && ev->status == -ECONNREFUSED &&
	     ev->param.conn.private_data_len >= 5 &&
	     !memcmp(ev->param.conn.private_data, "nope", 5);
	T_OK(ok, "the client: REJECTED, status -ECONNREFUSED, the reject's private data "
	     "(%s, %d)", ev ? rdma_event_str(ev->event) : "none", ev ? ev->status : 0);
	if (ev)
		rdma_ack_cm_event(ev);
	rdma_destroy_id(sid);
}

static void close_end(struct end *e)
{
	if (e->mr)
		ibv_dereg_mr(e->mr);
	if (e->id)
		t_cm_close_id(e->id);
	free(e->buf);
	memset(&e->buf, 0, sizeof(*e) - offsetof(struct end, buf));
	e->id = NULL;
}

static void data_moves(struct end *cli, struct end *srv)
{
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc;
	int r;

	getrandom(cli->buf, BUF, 0);
	/* SEND 3000 bytes into the 4096-byte receive */
	T_OK(!post_send(cli, IBV_WR_SEND, 0, 3000, 0, 0, &bad) && !one_wc(cli->id, true, &wc) &&
	     wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "SEND completes");
	T_OK(!one_wc(srv->id, false, &wc) && wc.status == IBV_WC_SUCCESS &&
	     wc.opcode == IBV_WC_RECV && wc.byte_len == 3000 && wc.wr_id == 1 &&
	     !memcmp(srv->buf, cli->buf, 3000), "RECV of 3000 bytes, data equal (byte_len %u)",
	     wc.byte_len);
	/* WRITE 100000 bytes at offset 8192; a SEND behind it says it landed */
	T_OK(!post_recv(srv, 2, 0, 16) &&
	     !post_send(cli, IBV_WR_RDMA_WRITE, 4096, 100000, (uintptr_t)srv->buf + 8192,
			srv->mr->rkey, &bad) && !one_wc(cli->id, true, &wc) &&
	     wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE,
	     "RDMA WRITE of 100000 bytes completes");
	T_OK(!post_send(cli, IBV_WR_SEND, 0, 16, 0, 0, &bad) && !one_wc(cli->id, true, &wc) &&
	     !one_wc(srv->id, false, &wc) && wc.wr_id == 2 &&
	     !memcmp(srv->buf + 8192, cli->buf + 4096, 100000), "the WRITE's bytes are there");
	/* READ 100000 bytes back from the server */
	getrandom(srv->buf, BUF, 0);
	T_OK(!post_send(cli, IBV_WR_RDMA_READ, 0, 100000, (uintptr_t)srv->buf + 1000,
			srv->mr->rkey, &bad) && !one_wc(cli->id, true, &wc) &&
	     wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ &&
	     !memcmp(cli->buf, srv->buf + 1000, 100000),
	     "RDMA READ of 100000 bytes completes with the data (status %d)", wc.status);
	/* what siw's provider refuses in ibv_post_send */
	r = post_send(cli, IBV_WR_SEND_WITH_IMM, 0, 8, 0, 0, &bad);
	T_OK(r == EINVAL && bad, "SEND_WITH_IMM refused with EINVAL (%d)", r);
	r = post_send(cli, IBV_WR_RDMA_WRITE_WITH_IMM, 0, 8, (uintptr_t)srv->buf,
		      srv->mr->rkey, &bad);
	T_OK(r == EINVAL, "RDMA_WRITE_WITH_IMM refused with EINVAL (%d)", r);
	T_OK(t_poll_cq(cli->id->send_cq, &wc, 1, 50) == 0, "no completion for refused WRs");
}

int main(void)
{
	struct end l = { 0 }, cli = { 0 }, srv = { 0 };
	struct sockaddr_in sin;
	enum ibv_event_type et;
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	uint32_t r;
	int port;

	setenv("SOFTRNIC_DEVICES", "lo:iwarp", 1);
	getrandom(&r, sizeof(r), 0);
	port = t_listen_port(r);
	sin = t_cm_loopback(port);
	l.ch = rdma_create_event_channel();
	cli.ch = rdma_create_event_channel();
	T_ASSERT(l.ch && cli.ch && !rdma_create_id(l.ch, &l.id, NULL, RDMA_PS_TCP) &&
		 !rdma_bind_addr(l.id, (struct sockaddr *)&sin) && !rdma_listen(l.id, 4),
		 "listen on 127.0.0.1:%d", port);
	srv.ch = l.ch;

	T_ASSERT(!connect_pair(&l, &cli, &srv, port), "first connection");
	data_moves(&cli, &srv);
	/* rdma_disconnect: DISCONNECTED both sides, the posted receive flushed */
	T_OK(!post_recv(&srv, 3, 0, 64) && !rdma_disconnect(cli.id) &&
	     !t_cm_expect(cli.ch, RDMA_CM_EVENT_DISCONNECTED, MS, NULL) &&
	     !t_cm_expect(srv.ch, RDMA_CM_EVENT_DISCONNECTED, MS, NULL),
	     "rdma_disconnect: DISCONNECTED at both ends");
	T_OK(!one_wc(srv.id, false, &wc) && wc.wr_id == 3 && wc.status == IBV_WC_WR_FLUSH_ERR,
	     "the server's posted receive flushes (status %d)", wc.status);
	close_end(&srv);
	close_end(&cli);

	/* A READ of a key the peer does not have: it answers with a
	 * Terminate; the READ completes with IBV_WC_REM_ACCESS_ERR. */
	T_ASSERT(!connect_pair(&l, &cli, &srv, port), "second connection");
	T_OK(!post_send(&cli, IBV_WR_RDMA_READ, 0, 64, (uintptr_t)srv.buf,
			srv.mr->rkey ^ 0x5a5a00, &bad) && !one_wc(cli.id, true, &wc) &&
	     wc.status == IBV_WC_REM_ACCESS_ERR,
	     "READ of a bad rkey: IBV_WC_REM_ACCESS_ERR (%s)", ibv_wc_status_str(wc.status));
	/* (one process, one device: both QPs' events come on one context) */
	for (int i = 0; i < 2; i++) {
		struct ibv_qp *qp = NULL;

		et = IBV_EVENT_DEVICE_FATAL;
		T_OK(!async_event(cli.id->verbs, &et, &qp) &&
		     ((qp == cli.id->qp && et == IBV_EVENT_QP_FATAL) ||
		      (qp == srv.id->qp && et == IBV_EVENT_QP_ACCESS_ERR)),
		     "%s: %s (requester: QP_FATAL, responder: QP_ACCESS_ERR)",
		     qp == cli.id->qp ? "requester" : qp == srv.id->qp ? "responder" : "?",
		     ibv_event_type_str(et));
	}
	T_OK(!one_wc(srv.id, false, &wc) && wc.status == IBV_WC_WR_FLUSH_ERR,
	     "responder's receive flushes");
	T_OK(!t_cm_expect(cli.ch, RDMA_CM_EVENT_DISCONNECTED, MS, NULL) &&
	     !t_cm_expect(srv.ch, RDMA_CM_EVENT_DISCONNECTED, MS, NULL),
	     "the stream's end: DISCONNECTED at both ends");
	close_end(&srv);
	close_end(&cli);
	rejected(&l, &cli, port);
	close_end(&cli);
	rdma_destroy_id(l.id);
	rdma_destroy_event_channel(cli.ch);
	rdma_destroy_event_channel(l.ch);
	return t_summary();
}
