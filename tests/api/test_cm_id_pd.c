/* The PD an rdma_cm id carries, and the address handles its UD events
 * give, across two processes on 127.0.0.1 (a forked server, this process
 * the client):
 *  - once an id has a device (rdma_bind_addr to an address,
 *    rdma_resolve_addr, a connection request) id->pd is that device's PD,
 *    one PD for every id on it, as librdmacm's: a listener's and its
 *    connections' are the same, so an MR registered on the listener's
 *    serves the QP rdma_create_qp makes for a connection;
 *  - a QP the application creates itself on id->pd (the "external QP" of
 *    rdma-core's test_rdmacm) connects and carries a SEND;
 *  - rdma_create_qp with the application's PD makes that the id's PD;
 *  - the ah_attr of a UD ESTABLISHED event and of a MULTICAST_JOIN event
 *    gives an AH on id->pd, and a datagram sent with it arrives.
 * Every wait is bounded (poll timeouts, alarm()); the child is reaped. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/lib/t_cm.h"
#include "tests/lib/t_util.h"

#define MSG "datagram over an rdma_cm address"
#define GRH 40

static int to_parent = -1, from_child = -1;
static pid_t child = -1;

/* A registered buffer of one end. */
struct side {
	char buf[256];
	struct ibv_mr *mr;
};

static int post_recv_buf(struct ibv_qp *qp, struct side *s)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, sizeof(s->buf), s->mr->lkey };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/* One completion on cq within 5 s: its status, or -1. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (int i = 0; i < 5000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			return -1;
		if (n == 1)
			return wc->status;
		usleep(1000);
	}
	return -1;
}

static void tell(const void *p, size_t n)
{
	if (write(to_parent, p, n) != (ssize_t)n)
		exit(90);
}

/* A listener on 127.0.0.1 (port chosen by the CM), its port told. */
static struct rdma_cm_id *listen_on(struct rdma_event_channel *ch, enum rdma_port_space ps)
{
	struct sockaddr_in sin = t_cm_loopback(0);
	struct rdma_cm_id *l;
	uint16_t port;

	if (rdma_create_id(ch, &l, NULL, ps) || rdma_bind_addr(l, (struct sockaddr *)&sin) ||
	    rdma_listen(l, 4))
		exit(10);
	port = ntohs(rdma_get_src_port(l));
	tell(&port, sizeof(port));
	return l;
}

/* ---- the server (forked child): a status byte per case, 0 = as wanted -- */

/* RC (RDMA_PS_TCP) or UD (RDMA_PS_UDP): accept one connection with a QP
 * rdma_create_qp makes on the id's own PD and a receive in an MR of the
 * listener's PD; the client's message must land there. */
static uint8_t server_conn(struct rdma_event_channel *ch, enum rdma_port_space ps)
{
	struct rdma_cm_id *l = listen_on(ch, ps), *c;
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .rnr_retry_count = 7 };
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC,
	};
	struct rdma_cm_event *ev;
	struct side s = { .buf = "" };
	struct ibv_wc wc;
	uint8_t st = 0;

	if (!l->pd || l->pd->context != l->verbs)
		return 1; /* bound to an address: the device's PD */
	if (t_cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, &ev))
		return 2;
	c = ev->id;
	rdma_ack_cm_event(ev);
	if (c->pd != l->pd)
		return 3; /* one PD per device */
	s.mr = ibv_reg_mr(l->pd, s.buf, sizeof(s.buf), IBV_ACCESS_LOCAL_WRITE);
	if (!s.mr || rdma_create_qp(c, NULL, &qa) || c->qp->pd != l->pd)
		return 4;
	if (post_recv_buf(c->qp, &s) || rdma_accept(c, &cp) ||
	    (ps == RDMA_PS_TCP && t_cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL)))
		return 5;
	if (wait_wc(c->recv_cq, &wc) != IBV_WC_SUCCESS ||
	    strcmp(s.buf + (ps == RDMA_PS_UDP ? GRH : 0), MSG))
		st = 6;
	else if (ps == RDMA_PS_TCP && t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL))
		st = 7;
	t_cm_close_id(c);
	ibv_dereg_mr(s.mr);
	rdma_destroy_id(l);
	return st;
}

/* The group: 239.193.x.y from our pid, so that tests running beside this
 * one (other groups) never see our datagram. */
static struct sockaddr_in group_addr(pid_t server)
{
	struct sockaddr_in g = { .sin_family = AF_INET };

	g.sin_addr.s_addr = htonl(0xefc10000u | ((uint32_t)server & 0xffff));
	return g;
}

/* A UD id bound to 127.0.0.1 with a QP and a receive posted, joined to
 * the group; the JOIN event in *out. */
static struct rdma_cm_id *mc_member(struct rdma_event_channel *ch, struct side *s,
				    struct sockaddr_in *g, struct rdma_cm_event **out)
{
	struct sockaddr_in sin = t_cm_loopback(0);
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD,
	};
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_UDP))
		return NULL;
	if (rdma_bind_addr(id, (struct sockaddr *)&sin) || !id->pd ||
	    !(s->mr = ibv_reg_mr(id->pd, s->buf, sizeof(s->buf), IBV_ACCESS_LOCAL_WRITE)) ||
	    rdma_create_qp(id, NULL, &qa) || post_recv_buf(id->qp, s) ||
	    rdma_join_multicast(id, (struct sockaddr *)g, NULL) ||
	    t_cm_expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN, 5000, out)) {
		t_cm_close_id(id);
		return NULL;
	}
	return id;
}

static uint8_t server_mc(struct rdma_event_channel *ch)
{
	struct sockaddr_in g = group_addr(getpid());
	struct rdma_cm_event *ev;
	struct side s = { .buf = "" };
	struct rdma_cm_id *id = mc_member(ch, &s, &g, &ev);
	struct ibv_wc wc;
	uint16_t ready = 1;
	uint8_t st = 0;

	if (!id)
		return 1;
	rdma_ack_cm_event(ev);
	tell(&ready, sizeof(ready));
	if (wait_wc(id->recv_cq, &wc) != IBV_WC_SUCCESS || strcmp(s.buf + GRH, MSG))
		st = 2;
	rdma_leave_multicast(id, (struct sockaddr *)&g);
	t_cm_close_id(id);
	ibv_dereg_mr(s.mr);
	return st;
}

static int server_main(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	uint8_t st;

	alarm(60);
	if (!ch)
		return 10;
	st = server_conn(ch, RDMA_PS_TCP);
	tell(&st, 1);
	st = server_conn(ch, RDMA_PS_UDP);
	tell(&st, 1);
	st = server_mc(ch);
	tell(&st, 1);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* ---- the client (this process) -------------------------------------- */

static int hear(void *p, size_t n)
{
	struct pollfd pf = { .fd = from_child, .events = POLLIN };

	return poll(&pf, 1, 10000) == 1 && read(from_child, p, n) == (ssize_t)n ? 0 : -1;
}

/* An id resolved (address and route) toward 127.0.0.1:port. */
static struct rdma_cm_id *resolved(struct rdma_event_channel *ch, enum rdma_port_space ps,
				   int port)
{
	struct sockaddr_in dst = t_cm_loopback(port);
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, ps))
		return NULL;
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) ||
	    t_cm_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000, NULL) ||
	    rdma_resolve_route(id, 2000) ||
	    t_cm_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 2000, NULL)) {
		rdma_destroy_id(id);
		return NULL;
	}
	return id;
}

static int move_qp(struct rdma_cm_id *id, struct ibv_qp *qp, enum ibv_qp_state state)
{
	struct ibv_qp_attr a = { .qp_state = state };
	int mask;

	return rdma_init_qp_attr(id, &a, &mask) || ibv_modify_qp(qp, &a, mask) ? -1 : 0;
}

static int post_send_buf(struct ibv_qp *qp, struct side *s, size_t len, struct ibv_ah *ah,
			 uint32_t qpn, uint32_t qkey)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, (uint32_t)len, s->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* RC through a QP the application made on id->pd, moved by
 * rdma_init_qp_attr. */
static void client_rc(struct rdma_event_channel *ch)
{
	struct rdma_cm_id *id = NULL, *other = NULL;
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct rdma_cm_event *ev;
	struct side s = { .buf = MSG };
	struct ibv_cq *cq = NULL;
	struct ibv_qp *qp = NULL;
	struct ibv_pd *own = NULL;
	struct ibv_wc wc;
	uint16_t port;
	uint8_t st = 99;

	T_ASSERT(hear(&port, sizeof(port)) == 0, "server listens (RC)");
	id = resolved(ch, RDMA_PS_TCP, port);
	T_ASSERT(id, "RC id resolved");
	T_OK(id->pd && id->pd->context == id->verbs, "rdma_resolve_addr: id->pd is a PD of id->verbs");
	cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
	qa.send_cq = qa.recv_cq = cq;
	qp = cq && id->pd ? ibv_create_qp(id->pd, &qa) : NULL;
	T_OK(qp != NULL, "ibv_create_qp on id->pd (errno %d)", qp ? 0 : errno);
	s.mr = id->pd ? ibv_reg_mr(id->pd, s.buf, sizeof(s.buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (qp && s.mr && move_qp(id, qp, IBV_QPS_INIT) == 0) {
		struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
					      .retry_count = 7, .rnr_retry_count = 7,
					      .qp_num = qp->qp_num };
		int ok = rdma_connect(id, &cp) == 0 &&
			 t_cm_expect(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, 5000, &ev) == 0;

		if (ok)
			rdma_ack_cm_event(ev);
		ok = ok && move_qp(id, qp, IBV_QPS_RTR) == 0 && move_qp(id, qp, IBV_QPS_RTS) == 0 &&
		     rdma_establish(id) == 0;
		T_OK(ok, "the external QP connects (rdma_init_qp_attr, rdma_establish)");
		T_OK(ok && post_send_buf(qp, &s, sizeof(MSG), NULL, 0, 0) == 0 &&
		     wait_wc(cq, &wc) == IBV_WC_SUCCESS, "a SEND over it completes");
		rdma_disconnect(id);
	}
	T_OK(hear(&st, 1) == 0 && st == 0,
	     "server: listener and connection share the device PD; rdma_create_qp(NULL pd) "
	     "uses it; the SEND landed in an MR of the listener's PD (status %u)", st);
	if (qp)
		ibv_destroy_qp(qp);
	if (s.mr)
		ibv_dereg_mr(s.mr);
	if (cq)
		ibv_destroy_cq(cq);
	rdma_destroy_id(id);

	/* the application's PD given to rdma_create_qp becomes id->pd */
	other = resolved(ch, RDMA_PS_TCP, port);
	T_ASSERT(other, "second RC id resolved");
	own = ibv_alloc_pd(other->verbs);
	qa.send_cq = qa.recv_cq = NULL;
	T_OK(own && rdma_create_qp(other, own, &qa) == 0 && other->pd == own,
	     "rdma_create_qp with the application's PD: id->pd is that PD");
	t_cm_close_id(other);
	if (own)
		ibv_dealloc_pd(own);
}

/* An AH from the ud.ah_attr of ev (NULL: the event did not come) on
 * id->pd, and a datagram with it to ud.qp_num; acks ev. */
static void send_by_event(struct rdma_cm_id *id, struct rdma_cm_event *ev, struct side *s,
			  const char *what)
{
	struct ibv_ah *ah = NULL;
	uint32_t qpn = 0, qkey = 0;
	struct ibv_wc wc;

	if (ev) {
		ah = ibv_create_ah(id->pd, &ev->param.ud.ah_attr);
		qpn = ev->param.ud.qp_num;
		qkey = ev->param.ud.qkey;
		rdma_ack_cm_event(ev);
	}
	T_OK(ah != NULL, "ibv_create_ah(id->pd, %s's ud.ah_attr) (errno %d)", what,
	     ah ? 0 : errno);
	strcpy(s->buf, MSG);
	T_OK(ah && post_send_buf(id->qp, s, sizeof(MSG), ah, qpn, qkey) == 0 &&
	     wait_wc(id->send_cq, &wc) == IBV_WC_SUCCESS, "a datagram with it completes");
	if (ah)
		ibv_destroy_ah(ah);
}

static void client_ud(struct rdma_event_channel *ch)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD,
	};
	struct rdma_conn_param cp = { 0 };
	struct rdma_cm_event *ev = NULL;
	struct side s = { .buf = "" };
	struct rdma_cm_id *id;
	uint16_t port;
	uint8_t st = 99;

	T_ASSERT(hear(&port, sizeof(port)) == 0, "server listens (UD)");
	id = resolved(ch, RDMA_PS_UDP, port);
	T_ASSERT(id, "UD id resolved");
	T_OK(rdma_create_qp(id, NULL, &qa) == 0 && id->pd, "UD QP on the id");
	s.mr = id->pd ? ibv_reg_mr(id->pd, s.buf, sizeof(s.buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (s.mr && id->qp && rdma_connect(id, &cp) == 0 &&
	    t_cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, &ev) != 0)
		ev = NULL;
	send_by_event(id, ev, &s, "ESTABLISHED");
	T_OK(hear(&st, 1) == 0 && st == 0,
	     "server: connection on the listener's PD, the datagram arrived (status %u)", st);
	t_cm_close_id(id);
	if (s.mr)
		ibv_dereg_mr(s.mr);
}

static void client_mc(struct rdma_event_channel *ch, pid_t server)
{
	struct sockaddr_in g = group_addr(server);
	struct rdma_cm_event *ev = NULL;
	struct side s = { .buf = "" };
	struct rdma_cm_id *id;
	uint16_t ready;
	uint8_t st = 99;

	T_ASSERT(hear(&ready, sizeof(ready)) == 0, "server joined the group");
	id = mc_member(ch, &s, &g, &ev);
	T_ASSERT(id, "client joined the group");
	send_by_event(id, ev, &s, "MULTICAST_JOIN");
	T_OK(hear(&st, 1) == 0 && st == 0, "server: the group's datagram arrived (status %u)", st);
	rdma_leave_multicast(id, (struct sockaddr *)&g);
	t_cm_close_id(id);
	ibv_dereg_mr(s.mr);
}

/* (atexit: a T_ASSERT that ends the client ends the server too) */
static void reap_child(void)
{
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
}

int main(void)
{
	struct rdma_event_channel *ch;
	struct ibv_device **devs;
	int p[2], st, n = 0;
	pid_t pid;

	/* the child first, before either process opens anything */
	if (pipe(p))
		t_bail("pipe");
	pid = fork();
	if (pid < 0)
		t_bail("fork");
	if (pid == 0) {
		close(p[0]);
		to_parent = p[1];
		_exit(server_main());
	}
	close(p[1]);
	from_child = p[0];
	child = pid;
	atexit(reap_child);
	alarm(90);
	devs = ibv_get_device_list(&n);
	if (devs)
		ibv_free_device_list(devs);
	ch = n > 0 ? rdma_create_event_channel() : NULL;
	if (!ch)
		t_skip("no softrnic device or rdma_cm event channel");
	client_rc(ch);
	client_ud(ch);
	client_mc(ch, pid);
	rdma_destroy_event_channel(ch);
	T_OK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	     "server exits 0 (status %d)", st);
	child = -1;
	return t_summary();
}
