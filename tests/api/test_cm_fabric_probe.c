/* The librdmacm calls libfabric's verbs provider makes to find its devices
 * and endpoints, with the arguments it passes, answered as rdma-core over
 * the kernel's rdma_cm answers them:
 *  - rdma_getaddrinfo with neither node nor service: the hints are the
 *    answer (the provider passes the destination it learnt from its peer);
 *    no node, no service and no hints: EINVAL;
 *  - rdma_getaddrinfo("localhost") passive, RAI_FAMILY AF_INET: 127.0.0.1
 *    as the source;
 *  - rdma_bind_addr of a loopback address no device owns attaches no
 *    device, as the wildcard does (the provider reads id->verbs == NULL
 *    as "every device"); 127.0.0.1 attaches srn_lo, the device that owns
 *    it, and the provider then keeps srn_lo's domains only;
 *  - rdma_create_ep passive: bound, no device, listens;
 *  - rdma_migrate_id of a synchronous id that holds its last event (the
 *    provider's connecting endpoint): returns, and later events come on
 *    the new channel (it used to wait forever for that event's ack);
 *  - a DREQ leaves the receiver's QP as it is until its application
 *    disconnects (RxM's last rendezvous message can be read after the
 *    DREQ; the QP in error flushed the send waiting for it).
 * A watchdog alarm turns a hang into a failure. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "tests/lib/t_cm.h"
#include "tests/lib/t_util.h"

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "FAIL: hung (watchdog)\n";

	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(T_EXIT_FAIL);
	_exit(T_EXIT_FAIL);
}

static void addrinfo_from_hints(int port)
{
	struct sockaddr_in dst = t_cm_loopback(port), src = t_cm_loopback(0);
	struct rdma_addrinfo hints, *res = NULL;

	errno = 0;
	T_OK(rdma_getaddrinfo(NULL, NULL, NULL, &res) == -1 && errno == EINVAL,
	     "rdma_getaddrinfo(NULL, NULL, NULL): EINVAL");

	/* What the provider's active endpoint asks: RC, TCP port space,
	 * RAI_FAMILY AF_INET, the peer's address as ai_dst_addr. */
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_FAMILY;
	hints.ai_family = AF_INET;
	hints.ai_qp_type = IBV_QPT_RC;
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_dst_addr = (struct sockaddr *)&dst;
	hints.ai_dst_len = sizeof(dst);
	res = NULL;
	T_OK(rdma_getaddrinfo(NULL, NULL, &hints, &res) == 0 && res, "no node, no service, "
	     "a destination in the hints: answered");
	if (res) {
		T_OK(res->ai_dst_addr && res->ai_dst_len == sizeof(dst) &&
		     !memcmp(res->ai_dst_addr, &dst, sizeof(dst)) && res->ai_dst_addr != hints.ai_dst_addr,
		     "the destination is a copy of the hints'");
		T_OK(!res->ai_src_addr && res->ai_src_len == 0, "no source address");
		T_OK(res->ai_flags == RAI_FAMILY && res->ai_family == AF_INET &&
		     res->ai_qp_type == IBV_QPT_RC && res->ai_port_space == RDMA_PS_TCP,
		     "flags, family, QP type and port space are the hints' (flags %#x)",
		     res->ai_flags);
		rdma_freeaddrinfo(res);
	}

	/* A source in the hints comes along too. */
	hints.ai_src_addr = (struct sockaddr *)&src;
	hints.ai_src_len = sizeof(src);
	res = NULL;
	T_OK(rdma_getaddrinfo(NULL, NULL, &hints, &res) == 0 && res && res->ai_src_addr &&
	     res->ai_src_len == sizeof(src) && !memcmp(res->ai_src_addr, &src, sizeof(src)) &&
	     res->ai_dst_addr, "hints with source and destination: both copied");
	rdma_freeaddrinfo(res);

	/* The provider's probe for its default address. */
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE | RAI_FAMILY;
	hints.ai_family = AF_INET;
	hints.ai_qp_type = IBV_QPT_RC;
	hints.ai_port_space = RDMA_PS_TCP;
	res = NULL;
	T_OK(rdma_getaddrinfo("localhost", NULL, &hints, &res) == 0 && res && res->ai_src_addr &&
	     !res->ai_dst_addr && res->ai_family == AF_INET && res->ai_flags == RAI_PASSIVE &&
	     ((struct sockaddr_in *)res->ai_src_addr)->sin_addr.s_addr == htonl(INADDR_LOOPBACK),
	     "rdma_getaddrinfo(\"localhost\") passive: source 127.0.0.1, flags RAI_PASSIVE");
	rdma_freeaddrinfo(res);

	/* A UD hint without port space: the UDP one. */
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_NUMERICHOST;
	hints.ai_qp_type = IBV_QPT_UD;
	res = NULL;
	T_OK(rdma_getaddrinfo("127.0.0.1", "7174", &hints, &res) == 0 && res && res->ai_dst_addr &&
	     res->ai_qp_type == IBV_QPT_UD && res->ai_port_space == RDMA_PS_UDP,
	     "UD hints, no port space: RDMA_PS_UDP");
	rdma_freeaddrinfo(res);
}

static void bind_loopback(int port)
{
	struct sockaddr_in a = t_cm_loopback(0);
	struct rdma_cm_id *id;

	/* Every address of 127.0.0.0/8 is loopback, not only 127.0.0.1. */
	a.sin_addr.s_addr = htonl(0x7f000001);
	T_OK(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0 &&
	     rdma_bind_addr(id, (struct sockaddr *)&a) == 0 && id->verbs &&
	     !strcmp(ibv_get_device_name(id->verbs->device), "srn_lo") &&
	     ntohs(rdma_get_src_port(id)) != 0,
	     "rdma_bind_addr(127.0.0.1:0): bound (port %u) to its device, srn_lo",
	     ntohs(rdma_get_src_port(id)));
	T_OK(((struct sockaddr_in *)rdma_get_local_addr(id))->sin_addr.s_addr == a.sin_addr.s_addr,
	     "the local address stays 127.0.0.1");
	rdma_destroy_id(id);
	a.sin_addr.s_addr = htonl(0x7f000002);
	T_OK(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0 &&
	     rdma_bind_addr(id, (struct sockaddr *)&a) == 0 && id->verbs == NULL,
	     "rdma_bind_addr(127.0.0.2), an address no device owns: bound, no device");
	rdma_destroy_id(id);

	/* The sync id's resolution then takes the loopback address's device. */
	a = t_cm_loopback(port);
	T_OK(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0 &&
	     rdma_bind_addr(id, (struct sockaddr *)&(struct sockaddr_in){
		     .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) }) == 0 &&
	     rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000) == 0 && id->verbs &&
	     !strcmp(ibv_get_device_name(id->verbs->device), "srn_lo"),
	     "resolving 127.0.0.1 from a loopback-bound id: device srn_lo");
	rdma_destroy_id(id);
}

static void passive_ep(int port)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE | RAI_FAMILY, .ai_family = AF_INET,
				       .ai_qp_type = IBV_QPT_RC, .ai_port_space = RDMA_PS_TCP };
	struct rdma_addrinfo *res = NULL;
	struct rdma_cm_id *ep = NULL, *ep2 = NULL;
	char svc[16];

	snprintf(svc, sizeof(svc), "%d", port);
	T_OK(rdma_getaddrinfo(NULL, svc, &hints, &res) == 0 && res && res->ai_src_addr &&
	     ((struct sockaddr_in *)res->ai_src_addr)->sin_addr.s_addr == htonl(INADDR_ANY),
	     "rdma_getaddrinfo(NULL, port) passive: the wildcard");
	if (!res)
		return;
	T_OK(rdma_create_ep(&ep, res, NULL, NULL) == 0 && ep && ep->verbs == NULL &&
	     ntohs(rdma_get_src_port(ep)) == port,
	     "rdma_create_ep passive: bound to port %d, no device", port);
	T_OK(ep && rdma_listen(ep, 4) == 0, "rdma_listen on it");
	errno = 0;
	T_OK(rdma_create_ep(&ep2, res, NULL, NULL) == -1 && errno == EADDRINUSE,
	     "a second passive endpoint on the port: EADDRINUSE");
	if (ep)
		rdma_destroy_ep(ep);
	rdma_freeaddrinfo(res);
}

static void migrate_sync(int port)
{
	struct sockaddr_in dst = t_cm_loopback(port);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;

	T_OK(ch && rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0 &&
	     rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0 && id->event &&
	     id->event->event == RDMA_CM_EVENT_ADDR_RESOLVED,
	     "sync id: rdma_resolve_addr keeps ADDR_RESOLVED as id->event");
	if (!id || !ch)
		return;
	alarm(10);
	T_OK(rdma_migrate_id(id, ch) == 0 && id->channel == ch,
	     "rdma_migrate_id of the sync id holding its event: returns");
	alarm(0);
	T_OK(rdma_resolve_route(id, 2000) == 0 &&
	     t_cm_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 2000, NULL) == 0,
	     "the next event (ROUTE_RESOLVED) comes on the new channel");
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	double end = t_now() + 5;
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && t_now() < end)
		;
	return n;
}

static void dreq_keeps_qp(int port)
{
	struct rdma_event_channel *sch = rdma_create_event_channel(), *cch = rdma_create_event_channel();
	struct sockaddr_in a = t_cm_loopback(port + 1);
	struct rdma_cm_id *l = NULL, *c = NULL, *s = NULL;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = { .retry_count = 7, .rnr_retry_count = 7 };
	char sbuf[8] = "dreq-ok", rbuf[8] = { 0 };
	struct ibv_mr *smr = NULL, *rmr = NULL;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_wc wc;
	int ok;

	ok = sch && cch && rdma_create_id(sch, &l, NULL, RDMA_PS_TCP) == 0 &&
	     rdma_bind_addr(l, (struct sockaddr *)&a) == 0 && rdma_listen(l, 2) == 0 &&
	     rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) == 0 &&
	     rdma_resolve_addr(c, NULL, (struct sockaddr *)&a, 2000) == 0 &&
	     t_cm_expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000, NULL) == 0 &&
	     rdma_resolve_route(c, 2000) == 0 &&
	     t_cm_expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000, NULL) == 0 &&
	     t_cm_make_qp(c, 4) == 0 && rdma_connect(c, &cp) == 0 &&
	     t_cm_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, &ev) == 0;
	T_OK(ok, "in-process connect: CONNECT_REQUEST");
	if (!ok)
		goto out;
	s = ev->id;
	rdma_ack_cm_event(ev);
	rmr = t_cm_make_qp(s, 4) == 0 ? ibv_reg_mr(s->qp->pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	smr = ibv_reg_mr(c->qp->pd, sbuf, sizeof(sbuf), 0);
	ok = rmr && smr;
	if (ok) {
		struct ibv_sge rs = { (uintptr_t)rbuf, sizeof(rbuf), rmr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *rbad;

		ok = ibv_post_recv(s->qp, &rw, &rbad) == 0 && rdma_accept(s, &cp) == 0 &&
		     t_cm_expect(cch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL) == 0 &&
		     t_cm_expect(sch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL) == 0;
	}
	T_OK(ok, "accepted, both ESTABLISHED");
	if (!ok)
		goto out;
	{
		struct ibv_sge ss = { (uintptr_t)sbuf, sizeof(sbuf), smr->lkey };
		struct ibv_send_wr sw = { .wr_id = 2, .sg_list = &ss, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *sbad;

		T_OK(ibv_post_send(c->qp, &sw, &sbad) == 0 && poll_one(c->send_cq, &wc) == 1 &&
		     wc.status == IBV_WC_SUCCESS, "the client's SEND completes");
	}
	T_OK(rdma_disconnect(c) == 0 && t_cm_expect(sch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL) == 0,
	     "client rdma_disconnect: DISCONNECTED on the server");
	T_OK(ibv_query_qp(s->qp, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_RTS,
	     "the server's QP is still RTS after the DREQ (state %d)", (int)qa.qp_state);
	T_OK(poll_one(s->recv_cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 &&
	     !memcmp(rbuf, sbuf, sizeof(sbuf)), "the SEND sent before the DREQ landed (status %d)",
	     (int)wc.status);
	T_OK(rdma_disconnect(s) == 0 && ibv_query_qp(s->qp, &qa, IBV_QP_STATE, &qi) == 0 &&
	     qa.qp_state == IBV_QPS_ERR, "the server's own rdma_disconnect: QP in error");
out:
	if (smr)
		ibv_dereg_mr(smr);
	if (rmr)
		ibv_dereg_mr(rmr);
	if (s)
		t_cm_close_id(s);
	if (c)
		t_cm_close_id(c);
	if (l)
		rdma_destroy_id(l);
	if (sch)
		rdma_destroy_event_channel(sch);
	if (cch)
		rdma_destroy_event_channel(cch);
}

int main(void)
{
	int port;

	signal(SIGALRM, on_alarm);
	alarm(60);
	t_rand_seed((uint64_t)getpid() * 2654435761u);
	port = t_listen_port(t_rand());
	addrinfo_from_hints(port);
	bind_loopback(port);
	passive_ep(port);
	migrate_sync(port);
	dreq_keeps_qp(port);
	return t_summary();
}
