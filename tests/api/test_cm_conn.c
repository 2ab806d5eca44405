/* rdma_cm over softrnic, black-box, across processes on 127.0.0.1: the
 * server side of each case is this program re-executed ("server CASE
 * PORT"), so both ends run the real library in separate processes.
 *
 * Checks: connecting to a port nobody listens on -> REJECTED status 8
 * (IB_CM_REJ_INVALID_SERVICE_ID); reject with private data -> REJECTED
 * status 28 (consumer defined) carrying it; accept with private data ->
 * ESTABLISHED on both sides with the data, conn params, then disconnect
 * from either side -> DISCONNECTED on both; the listener backlog; a peer
 * SIGKILLed while connected (-> DISCONNECTED) and while the REQ is
 * unanswered (-> UNREACHABLE), each within seconds; 100 connect/disconnect
 * cycles without leaking descriptors; crossing DREQs -> one DISCONNECTED
 * each, then TIMEWAIT_EXIT; a non-blocking channel -> EAGAIN;
 * EADDRINUSE across processes; options, getaddrinfo, multicast ENOSYS;
 * an application-owned QP moved with rdma_init_qp_attr (qp_num in the
 * conn param, CONNECT_RESPONSE, rdma_establish) carries a SEND.
 * Every wait is bounded (poll timeouts, alarm()).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "tests/lib/t_cm.h"

extern char **environ;

static int failures;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (cond) {                                                   \
			printf("ok   - " __VA_ARGS__);                        \
			printf("\n");                                         \
		} else {                                                      \
			failures++;                                           \
			printf("FAIL - %s:%d: ", __FILE__, __LINE__);         \
			printf(__VA_ARGS__);                                  \
			printf(" (errno %d %s)\n", errno, strerror(errno));   \
		}                                                             \
		fflush(stdout);                                               \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Client: resolve + route + QP + connect with private data.  Returns the id
 * (connect sent) or NULL. */
static struct rdma_cm_id *t_connect(struct rdma_event_channel *ch, int port, const char *pdata,
				    bool with_qp)
{
	struct sockaddr_in dst = t_cm_loopback(port);
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return NULL;
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) ||
	    t_cm_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000, NULL) ||
	    rdma_resolve_route(id, 2000) ||
	    t_cm_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 2000, NULL) ||
	    (with_qp && t_cm_make_qp(id, 4))) {
		rdma_destroy_id(id);
		return NULL;
	}
	if (pdata) {
		cp.private_data = pdata;
		cp.private_data_len = (uint8_t)(strlen(pdata) + 1);
	}
	if (rdma_connect(id, &cp)) {
		if (id->qp)
			rdma_destroy_qp(id);
		rdma_destroy_id(id);
		return NULL;
	}
	return id;
}

static void t_close(struct rdma_cm_id *id)
{
	if (id->qp)
		rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the DIR's own descriptor */
}

/* An application-owned QP (not rdma_create_qp) on id's device. */
struct own {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char buf[64];
};

static int own_create(struct rdma_cm_id *id, struct own *o)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	o->pd = ibv_alloc_pd(id->verbs);
	o->cq = o->pd ? ibv_create_cq(id->verbs, 8, NULL, NULL, 0) : NULL;
	if (!o->cq)
		return -1;
	qa.send_cq = qa.recv_cq = o->cq;
	o->qp = ibv_create_qp(o->pd, &qa);
	o->mr = o->qp ? ibv_reg_mr(o->pd, o->buf, sizeof(o->buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	return o->mr ? 0 : -1;
}

/* Move o's QP to state with the attributes rdma_init_qp_attr gives. */
static int own_move(struct rdma_cm_id *id, struct own *o, enum ibv_qp_state state)
{
	struct ibv_qp_attr a = { .qp_state = state };
	int mask;

	if (rdma_init_qp_attr(id, &a, &mask))
		return -1;
	return ibv_modify_qp(o->qp, &a, mask);
}

static int own_wait(struct own *o)
{
	struct ibv_wc wc;

	for (int i = 0; i < 5000; i++) {
		int n = ibv_poll_cq(o->cq, 1, &wc);

		if (n < 0)
			return -1;
		if (n == 1)
			return wc.status == IBV_WC_SUCCESS ? 0 : -1;
		usleep(1000);
	}
	return -1;
}

static void own_free(struct own *o)
{
	if (o->mr)
		ibv_dereg_mr(o->mr);
	if (o->qp)
		ibv_destroy_qp(o->qp);
	if (o->cq)
		ibv_destroy_cq(o->cq);
	if (o->pd)
		ibv_dealloc_pd(o->pd);
}

/* ---- the server process ---------------------------------------------------- */

/* Tells the parent it listens, and on which port, by writing the port on
 * fd 3 (a pipe). */
static int server_main(const char *what, int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = t_cm_loopback(port);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c;
	int backlog = strcmp(what, "backlog") ? 8 : 1;
	int cycles = strcmp(what, "cycles") ? 1 : 101;

	alarm(30);
	if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, backlog))
		return 10;
	{
		/* port 0: the CM picks a free one, so two copies of this test
		 * (or other tests) running at once never collide */
		uint16_t got = ntohs(rdma_get_src_port(l));

		if (!got || write(3, &got, sizeof(got)) != sizeof(got))
			return 11;
	}
	close(3);
	if (!strcmp(what, "reject")) {
		if (t_cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, &ev))
			return 12;
		if (ev->param.conn.private_data_len != 56 ||
		    strcmp(ev->param.conn.private_data, "may I?"))
			return 13;
		c = ev->id;
		rdma_ack_cm_event(ev);
		if (rdma_reject(c, "go away", 8))
			return 14;
		rdma_destroy_id(c);
		rdma_destroy_id(l);
		rdma_destroy_event_channel(ch);
		return 0;
	}
	if (!strcmp(what, "ownqp")) {
		/* The application owns its QP: rdma_init_qp_attr + qp_num. */
		struct own o = { 0 };
		struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
					      .rnr_retry_count = 7 };
		struct ibv_sge sge;
		struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;

		if (t_cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, &ev))
			return 12;
		c = ev->id;
		rdma_ack_cm_event(ev);
		if (own_create(c, &o) || own_move(c, &o, IBV_QPS_INIT))
			return 13;
		sge = (struct ibv_sge){ (uintptr_t)o.buf, sizeof(o.buf), o.mr->lkey };
		if (ibv_post_recv(o.qp, &wr, &bad) || own_move(c, &o, IBV_QPS_RTR) ||
		    own_move(c, &o, IBV_QPS_RTS))
			return 14;
		cp.qp_num = o.qp->qp_num;
		if (rdma_accept(c, &cp) || t_cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL))
			return 15;
		if (own_wait(&o) || strcmp(o.buf, "ping over an app-owned QP"))
			return 16;
		if (t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL))
			return 17;
		rdma_destroy_id(c);
		own_free(&o);
		rdma_destroy_id(l);
		rdma_destroy_event_channel(ch);
		return 0;
	}
	if (!strcmp(what, "abandon")) {
		/* The client destroys its id before we answer: we hear so. */
		if (t_cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, &ev))
			return 12;
		c = ev->id;
		rdma_ack_cm_event(ev);
		if (t_cm_expect(ch, RDMA_CM_EVENT_REJECTED, 3000, &ev))
			return 13;
		if (ev->id != c)
			return 14;
		rdma_ack_cm_event(ev);
		rdma_destroy_id(c);
		rdma_destroy_id(l);
		rdma_destroy_event_channel(ch);
		return 0;
	}
	if (!strcmp(what, "backlog")) {
		/* Hold the first request unanswered; the second must bounce. */
		if (t_cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, &ev))
			return 12;
		c = ev->id;
		rdma_ack_cm_event(ev);
		sleep(2);
		rdma_reject(c, NULL, 0);
		rdma_destroy_id(c);
		rdma_destroy_id(l);
		rdma_destroy_event_channel(ch);
		return 0;
	}
	for (int i = 0; i < cycles; i++) {
		struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
					      .rnr_retry_count = 7,
					      .private_data = "welcome", .private_data_len = 8 };

		if (t_cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, &ev))
			return 20;
		c = ev->id;
		if (ev->param.conn.initiator_depth != 1 || ev->param.conn.responder_resources != 1 ||
		    ev->listen_id != l)
			return 21;
		rdma_ack_cm_event(ev);
		if (t_cm_make_qp(c, 4) || rdma_accept(c, &cp))
			return 22;
		if (t_cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL))
			return 23;
		if (!strcmp(what, "kill"))
			pause(); /* the parent SIGKILLs us now */
		if (!strcmp(what, "srvdisc") || !strcmp(what, "bothdisc")) {
			if (rdma_disconnect(c))
				return 24;
		}
		if (t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL))
			return 25;
		if (strcmp(what, "srvdisc") && strcmp(what, "bothdisc") && rdma_disconnect(c))
			return 26;
		t_close(c);
	}
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* Start "server WHAT PORT"; returns its pid after it listens, or -1. */
static pid_t spawn_server(const char *what, int *port)
{
	char portstr[16], self[4096];
	char *argv[] = { self, "server", (char *)what, portstr, NULL };
	posix_spawn_file_actions_t fa;
	int p[2];
	pid_t pid;
	uint16_t got = 0;
	ssize_t n;

	snprintf(portstr, sizeof(portstr), "%d", 0);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0 || pipe(p))
		return -1;
	self[n] = '\0';
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 3);
	posix_spawn_file_actions_addclose(&fa, p[0]);
	if (posix_spawn(&pid, self, &fa, NULL, argv, environ)) {
		posix_spawn_file_actions_destroy(&fa);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	{
		struct pollfd pf = { .fd = p[0], .events = POLLIN };

		if (poll(&pf, 1, 5000) != 1 || read(p[0], &got, sizeof(got)) != sizeof(got)) {
			close(p[0]);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return -1;
		}
	}
	close(p[0]);
	*port = got;
	return pid;
}

/* Exit status of pid within ms, or -1 (then it is killed). */
static int reap(pid_t pid, int ms)
{
	int st;

	for (int i = 0; i < ms / 10; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static int base_port(void)
{
	return t_listen_port((uint32_t)getpid());
}

/* ---- the cases ------------------------------------------------------------- */

static void case_no_listener(struct rdma_event_channel *ch, int port)
{
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *id = t_connect(ch, port, NULL, true);
	double t0 = now_s();

	CHECK(id != NULL, "connect to an unused port is sent");
	if (!id)
		return;
	CHECK(t_cm_expect(ch, RDMA_CM_EVENT_REJECTED, 3000, &ev) == 0 && ev->status == 8,
	      "nobody listening: REJECTED with status 8 (invalid service id) in %.2f s",
	      now_s() - t0);
	if (ev)
		rdma_ack_cm_event(ev);
	t_close(id);
}

static void case_reject(struct rdma_event_channel *ch, int port)
{
	pid_t srv = spawn_server("reject", &port);
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *id;

	CHECK(srv > 0, "reject server listens");
	if (srv <= 0)
		return;
	id = t_connect(ch, port, "may I?", true);
	CHECK(id != NULL, "connect with 7 bytes of private data");
	if (id) {
		int ok = t_cm_expect(ch, RDMA_CM_EVENT_REJECTED, 5000, &ev) == 0;

		CHECK(ok && ev->status == 28, "REJECTED with status 28 (consumer reject)");
		CHECK(ok && ev->param.conn.private_data_len == 148 &&
		      !memcmp(ev->param.conn.private_data, "go away", 8),
		      "the reject's private data arrives (148 bytes, \"go away\")");
		if (ev)
			rdma_ack_cm_event(ev);
		t_close(id);
	}
	CHECK(reap(srv, 5000) == 0, "reject server saw the REQ's 56 bytes of private data and exits 0");
}

/* Connect, check both ESTABLISHED, disconnect from client or server. */
static void case_connect(struct rdma_event_channel *ch, int port, bool client_disconnects)
{
	pid_t srv = spawn_server(client_disconnects ? "clidisc" : "srvdisc", &port);
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *id;
	const char *who = client_disconnects ? "client" : "server";

	CHECK(srv > 0, "server listens");
	if (srv <= 0)
		return;
	id = t_connect(ch, port, "hello", true);
	CHECK(id != NULL, "connect sent");
	if (id) {
		int ok = t_cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, &ev) == 0;

		CHECK(ok && ev->param.conn.private_data_len >= 8 &&
		      !strcmp(ev->param.conn.private_data, "welcome"),
		      "ESTABLISHED carries the accept's private data");
		CHECK(ok && id->qp && ev->param.conn.qp_num != 0, "peer QP number reported");
		if (ev)
			rdma_ack_cm_event(ev);
		if (client_disconnects)
			CHECK(rdma_disconnect(id) == 0, "client rdma_disconnect");
		CHECK(t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL) == 0,
		      "client gets DISCONNECTED (%s disconnected)", who);
		if (!client_disconnects)
			CHECK(rdma_disconnect(id) == 0, "rdma_disconnect after DISCONNECTED is fine");
		t_close(id);
	}
	CHECK(reap(srv, 5000) == 0, "server saw ESTABLISHED and DISCONNECTED and exits 0 (%s side disconnected)", who);
}

/* Both sides call rdma_disconnect at once: DREQs cross; each side hears
 * DISCONNECTED exactly once, then TIMEWAIT_EXIT after the time wait. */
static void case_both_disconnect(struct rdma_event_channel *ch, int port)
{
	pid_t srv = spawn_server("bothdisc", &port);
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *id;
	double t0;

	CHECK(srv > 0, "server listens");
	if (srv <= 0)
		return;
	id = t_connect(ch, port, NULL, true);
	CHECK(id && t_cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL) == 0, "connected");
	if (!id) {
		reap(srv, 100);
		return;
	}
	CHECK(rdma_disconnect(id) == 0 && t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL) == 0,
	      "crossing DREQs: DISCONNECTED");
	t0 = now_s();
	ev = t_cm_event(ch, 4000);
	CHECK(ev && ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT && ev->id == id,
	      "then only TIMEWAIT_EXIT, after %.1f s", now_s() - t0);
	if (ev)
		rdma_ack_cm_event(ev);
	t_close(id);
	CHECK(reap(srv, 5000) == 0, "server got one DISCONNECTED too, exits 0");
}

static void case_abandon(struct rdma_event_channel *ch, int port)
{
	pid_t srv = spawn_server("abandon", &port);
	struct rdma_cm_id *id;

	CHECK(srv > 0, "server listens");
	if (srv <= 0)
		return;
	id = t_connect(ch, port, NULL, true);
	usleep(200000);
	if (id)
		t_close(id);
	CHECK(id && reap(srv, 5000) == 0,
	      "client destroys its id before the server answers: the server's id gets REJECTED");
}

static void case_backlog(struct rdma_event_channel *ch, int port)
{
	pid_t srv = spawn_server("backlog", &port);
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *a, *b;

	CHECK(srv > 0, "backlog-1 server listens");
	if (srv <= 0)
		return;
	a = t_connect(ch, port, NULL, true);
	usleep(200000); /* let the server take the first request */
	b = t_connect(ch, port, NULL, true);
	CHECK(a && b, "two connects sent");
	/* b bounces at once (backlog full); a is rejected later by the app. */
	CHECK(t_cm_expect(ch, RDMA_CM_EVENT_REJECTED, 3000, &ev) == 0 && ev->id == b &&
	      ev->status == 28, "second connect over the backlog of 1: REJECTED");
	if (ev)
		rdma_ack_cm_event(ev);
	ev = NULL;
	CHECK(t_cm_expect(ch, RDMA_CM_EVENT_REJECTED, 5000, &ev) == 0 && ev->id == a,
	      "first connect (held in the backlog) rejected by the server later");
	if (ev)
		rdma_ack_cm_event(ev);
	if (a)
		t_close(a);
	if (b)
		t_close(b);
	CHECK(reap(srv, 5000) == 0, "backlog server exits 0");
}

static void case_killed(struct rdma_event_channel *ch, int port)
{
	pid_t srv = spawn_server("kill", &port);
	struct rdma_cm_id *id;
	double t0;

	CHECK(srv > 0, "server listens");
	if (srv <= 0)
		return;
	id = t_connect(ch, port, NULL, true);
	CHECK(id && t_cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL) == 0, "connected");
	kill(srv, SIGKILL);
	reap(srv, 2000);
	t0 = now_s();
	CHECK(t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL) == 0,
	      "peer SIGKILLed while connected: DISCONNECTED after %.2f s", now_s() - t0);
	if (id)
		t_close(id);
}

/* A listener that dies before answering: REQ retransmissions end. */
static void case_killed_before_rep(struct rdma_event_channel *ch, int port)
{
	pid_t srv = spawn_server("backlog", &port);
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *id;
	double t0;

	CHECK(srv > 0, "server listens");
	if (srv <= 0)
		return;
	id = t_connect(ch, port, NULL, true);
	usleep(300000); /* the REQ is taken, the server sits on it */
	kill(srv, SIGKILL);
	reap(srv, 2000);
	t0 = now_s();
	CHECK(t_cm_expect(ch, RDMA_CM_EVENT_UNREACHABLE, 6000, &ev) == 0 && ev->status == -ETIMEDOUT,
	      "listener SIGKILLed before accepting: UNREACHABLE (-ETIMEDOUT) after %.2f s",
	      now_s() - t0);
	if (ev)
		rdma_ack_cm_event(ev);
	if (id)
		t_close(id);
}

static void case_own_qp(struct rdma_event_channel *ch, int port)
{
	pid_t srv = spawn_server("ownqp", &port);
	struct sockaddr_in dst = t_cm_loopback(port);
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *id = NULL;
	struct own o = { 0 };
	int ok;

	CHECK(srv > 0, "server listens");
	if (srv <= 0)
		return;
	ok = rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0 &&
	     rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0 &&
	     t_cm_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000, NULL) == 0 &&
	     rdma_resolve_route(id, 2000) == 0 &&
	     t_cm_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 2000, NULL) == 0 &&
	     own_create(id, &o) == 0 && own_move(id, &o, IBV_QPS_INIT) == 0;
	CHECK(ok, "own QP on the resolved device, INIT from rdma_init_qp_attr");
	if (ok) {
		struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
					      .retry_count = 7, .rnr_retry_count = 7,
					      .qp_num = o.qp->qp_num };

		ok = rdma_connect(id, &cp) == 0 &&
		     t_cm_expect(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, 5000, &ev) == 0;
		CHECK(ok, "no QP on the id: CONNECT_RESPONSE");
		if (ev)
			rdma_ack_cm_event(ev);
	}
	if (ok) {
		struct ibv_sge sge = { (uintptr_t)o.buf, 0, o.mr->lkey };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		strcpy(o.buf, "ping over an app-owned QP");
		sge.length = (uint32_t)strlen(o.buf) + 1;
		ok = own_move(id, &o, IBV_QPS_RTR) == 0 && own_move(id, &o, IBV_QPS_RTS) == 0 &&
		     rdma_establish(id) == 0;
		CHECK(ok, "RTR and RTS from rdma_init_qp_attr, rdma_establish (RTU)");
		CHECK(ok && ibv_post_send(o.qp, &wr, &bad) == 0 && own_wait(&o) == 0,
		      "a SEND over the application's QP completes (PSNs/QPNs agree)");
		CHECK(rdma_disconnect(id) == 0 &&
		      t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL) == 0,
		      "disconnect: DISCONNECTED");
	}
	if (id)
		rdma_destroy_id(id);
	own_free(&o);
	CHECK(reap(srv, 5000) == 0, "server received the SEND intact on its own QP, exits 0");
}

static void case_cycles(struct rdma_event_channel *ch, int port)
{
	pid_t srv = spawn_server("cycles", &port);
	int fds0 = -1, ok = 0;
	double t0 = now_s();

	CHECK(srv > 0, "cycle server listens");
	if (srv <= 0)
		return;
	for (int i = 0; i < 101; i++) {
		struct rdma_cm_id *id = t_connect(ch, port, NULL, true);

		if (!id || t_cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL) ||
		    rdma_disconnect(id) || t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL)) {
			if (id)
				t_close(id);
			break;
		}
		t_close(id);
		if (i == 0)
			fds0 = count_fds(); /* after the first: devices and agent open */
		ok++;
	}
	CHECK(ok == 101, "101 connect/disconnect cycles (%d done) in %.2f s", ok, now_s() - t0);
	CHECK(count_fds() == fds0, "no descriptor leaked over 100 cycles (%d before, %d after)",
	      fds0, count_fds());
	CHECK(reap(srv, 5000) == 0, "cycle server exits 0");
}

static void case_api(struct rdma_event_channel *ch, int port)
{
	struct rdma_event_channel *nb = rdma_create_event_channel();
	struct sockaddr_in sin = t_cm_loopback(port);
	struct rdma_addrinfo hints = { .ai_flags = RAI_NUMERICHOST, .ai_port_space = RDMA_PS_TCP };
	struct rdma_addrinfo *res = NULL;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id, *id2;
	uint8_t tos = 32;
	int big = 1;
	pid_t srv;

	(void)ch;
	CHECK(nb && fcntl(nb->fd, F_SETFL, O_NONBLOCK) == 0, "channel fd can be made non-blocking");
	errno = 0;
	CHECK(rdma_get_cm_event(nb, &ev) == -1 && errno == EAGAIN,
	      "empty non-blocking channel: EAGAIN");
	CHECK(rdma_create_id(nb, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1) == 0, "set TOS");
	errno = 0;
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, 99, &big, sizeof(big)) == -1 && errno == ENOSYS,
	      "unknown option: ENOSYS");
	errno = 0;
	CHECK(rdma_join_multicast(id, (struct sockaddr *)&sin, NULL) == -1 && errno == EINVAL,
	      "joining a unicast address as a multicast group: EINVAL");
	/* The port is held by a listener in another process. */
	srv = spawn_server("reject", &port);
	sin.sin_port = htons((uint16_t)port);
	errno = 0;
	CHECK(srv > 0 && rdma_bind_addr(id, (struct sockaddr *)&sin) == -1 && errno == EADDRINUSE,
	      "binding a port another process listens on: EADDRINUSE");
	if (srv > 0) {
		kill(srv, SIGKILL);
		reap(srv, 2000);
	}
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&sin) == 0,
	      "the port is free again once that process died");
	CHECK(ntohs(rdma_get_src_port(id)) == port && rdma_get_local_addr(id)->sa_family == AF_INET,
	      "rdma_get_src_port / rdma_get_local_addr");
	/* 127.0.0.1 is srn_lo's address: the bind attaches it. */
	CHECK(id->verbs && !strcmp(ibv_get_device_name(id->verbs->device), "srn_lo"),
	      "bound to 127.0.0.1: device srn_lo");
	{
		struct sockaddr_in lo = t_cm_loopback(port);

		CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&lo, 1000) == 0 &&
		      t_cm_expect(nb, RDMA_CM_EVENT_ADDR_RESOLVED, 2000, NULL) == 0 &&
		      id->verbs && !strcmp(ibv_get_device_name(id->verbs->device), "srn_lo") &&
		      ntohs(rdma_get_src_port(id)) == port,
		      "resolving 127.0.0.1 from it: device srn_lo, the bound port kept");
	}
	{
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };

		CHECK(rdma_create_srq(id, NULL, &sa) == 0 && id->srq && id->pd,
		      "rdma_create_srq on the id (default PD)");
		rdma_destroy_srq(id);
		CHECK(id->srq == NULL, "rdma_destroy_srq");
	}
	CHECK(rdma_create_id(nb, &id2, NULL, RDMA_PS_TCP) == 0 &&
	      rdma_bind_addr(id2, (struct sockaddr *)&sin) == -1 && errno == EADDRINUSE,
	      "same port twice in one process: EADDRINUSE");
	rdma_destroy_id(id2);
	rdma_destroy_id(id);
	CHECK(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res) == 0 && res->ai_dst_addr &&
	      ((struct sockaddr_in *)res->ai_dst_addr)->sin_port == htons(7471) &&
	      res->ai_port_space == RDMA_PS_TCP && res->ai_qp_type == IBV_QPT_RC,
	      "rdma_getaddrinfo numeric host: destination, port, RC/TCP");
	rdma_freeaddrinfo(res);
	res = NULL;
	hints.ai_flags = RAI_PASSIVE;
	CHECK(rdma_getaddrinfo(NULL, "7471", &hints, &res) == 0 && res->ai_src_addr &&
	      !res->ai_dst_addr, "rdma_getaddrinfo passive: a source address only");
	rdma_freeaddrinfo(res);
	/* rdma_migrate_id: later events of the id arrive on the new channel. */
	{
		struct rdma_event_channel *other = rdma_create_event_channel();
		struct sockaddr_in dst = t_cm_loopback(port);

		CHECK(other && rdma_create_id(nb, &id, NULL, RDMA_PS_TCP) == 0 &&
		      rdma_migrate_id(id, other) == 0 && id->channel == other,
		      "rdma_migrate_id to another channel");
		CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 1000) == 0 &&
		      t_cm_expect(other, RDMA_CM_EVENT_ADDR_RESOLVED, 1000, NULL) == 0,
		      "ADDR_RESOLVED arrives on the new channel");
		errno = 0;
		CHECK(rdma_get_cm_event(nb, &ev) == -1 && errno == EAGAIN, "and not on the old one");
		rdma_destroy_id(id);
		rdma_destroy_event_channel(other);
	}
	rdma_destroy_event_channel(nb);
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch;
	int port = base_port();
	int n = 0;
	struct ibv_device **devs;

	if (argc == 4 && !strcmp(argv[1], "server"))
		return server_main(argv[2], atoi(argv[3]));
	alarm(120);
	devs = ibv_get_device_list(&n);
	if (!devs || n == 0) {
		printf("SKIP: no softrnic device\n");
		return 77;
	}
	ibv_free_device_list(devs);
	ch = rdma_create_event_channel();
	if (!ch) {
		printf("FAIL: rdma_create_event_channel\n");
		return 1;
	}
	case_api(ch, port++);
	case_no_listener(ch, port++);
	case_reject(ch, port++);
	case_connect(ch, port++, true);
	case_connect(ch, port++, false);
	case_both_disconnect(ch, port++);
	case_backlog(ch, port++);
	case_abandon(ch, port++);
	case_killed(ch, port++);
	case_killed_before_rep(ch, port++);
	case_own_qp(ch, port++);
	case_cycles(ch, port++);
	rdma_destroy_event_channel(ch);
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
