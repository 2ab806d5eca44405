/* ECE (rdma_set_local_ece / rdma_get_remote_ece / rdma_reject_ece)
 * between two softrnic processes on 127.0.0.1.  The ECE travels as Linux
 * carries it: vendor id in the REQ / REP, options in the MAD header's
 * attribute modifier.
 *
 * Checks: the listener sees the client's offer (vendor 0x15b3, options
 * 0x10000003) in CONNECT_REQUEST's id; it answers with what it accepts
 * (0x15b3, 0x00000001) and the client reads that after ESTABLISHED; a
 * client without ECE is seen as offering none (0, 0); rdma_reject_ece
 * makes the client see REJECTED with status 35 (vendor option not
 * supported).  The server is a fork()ed child; every wait is bounded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "tests/lib/t_cm.h"
#include "tests/lib/t_util.h"

enum { OFFER_VENDOR = 0x15b3, OFFER_OPTIONS = 0x10000003, ACCEPT_OPTIONS = 0x1 };

/* The server: 3 requests (offer + accept, no offer + accept, reject_ece).
 * Exit status 0, or the step that failed. */
static int server(int port, int ready)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = t_cm_loopback(port);
	struct rdma_cm_id *l, *c;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .rnr_retry_count = 7 };
	struct ibv_ece got, mine = { .vendor_id = OFFER_VENDOR, .options = ACCEPT_OPTIONS };

	alarm(30);
	if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 4))
		return 2;
	if (write(ready, "L", 1) != 1)
		return 3;
	close(ready);
	for (int round = 0; round < 3; round++) {
		if (t_cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000, &ev))
			return 10 + round;
		c = ev->id;
		rdma_ack_cm_event(ev);
		memset(&got, 0xee, sizeof(got));
		if (rdma_get_remote_ece(c, &got))
			return 20 + round;
		if (round == 1 ? (got.vendor_id || got.options) :
		    (got.vendor_id != OFFER_VENDOR || got.options != OFFER_OPTIONS)) {
			printf("  # server round %d: remote ECE vendor 0x%x options 0x%x\n", round,
			       got.vendor_id, got.options);
			return 30 + round;
		}
		if (round == 2) {
			if (rdma_reject_ece(c, NULL, 0))
				return 40;
			rdma_destroy_id(c);
			break;
		}
		if (t_cm_make_qp(c, 2) || (round == 0 && rdma_set_local_ece(c, &mine)) ||
		    rdma_accept(c, &cp) || t_cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 10000, NULL) ||
		    t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 10000, NULL))
			return 50 + round;
		t_cm_close_id(c);
	}
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* Connect, offering ECE if offer; returns the id after the outcome event
 * (ESTABLISHED or REJECTED, in *what / *status), or NULL. */
static struct rdma_cm_id *client(struct rdma_event_channel *ch, int port, bool offer,
				 enum rdma_cm_event_type *what, int *status)
{
	struct sockaddr_in dst = t_cm_loopback(port);
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7 };
	struct ibv_ece ece = { .vendor_id = OFFER_VENDOR, .options = OFFER_OPTIONS };
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return NULL;
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) ||
	    t_cm_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000, NULL) ||
	    rdma_resolve_route(id, 2000) ||
	    t_cm_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000, NULL) || t_cm_make_qp(id, 2) ||
	    (offer && rdma_set_local_ece(id, &ece)) || rdma_connect(id, &cp) ||
	    poll(&p, 1, 10000) != 1 || rdma_get_cm_event(ch, &ev)) {
		t_cm_close_id(id);
		return NULL;
	}
	*what = ev->event;
	*status = ev->status;
	rdma_ack_cm_event(ev);
	return id;
}

int main(void)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	enum rdma_cm_event_type what;
	struct ibv_ece got;
	int port = t_listen_port((uint32_t)getpid()), status = 0, pr[2], st;
	pid_t pid;
	char b;

	if (pipe(pr))
		t_bail("pipe");
	pid = fork();
	if (pid == 0) {
		close(pr[0]);
		_exit(server(port, pr[1]));
	}
	close(pr[1]);
	{
		struct pollfd pf = { .fd = pr[0], .events = POLLIN };

		if (pid < 0 || poll(&pf, 1, 10000) != 1 || read(pr[0], &b, 1) != 1) {
			if (pid > 0)
				kill(pid, SIGKILL);
			t_bail("server did not listen");
		}
	}
	alarm(60);
	ch = rdma_create_event_channel();
	if (!ch)
		t_bail("rdma_create_event_channel");

	id = client(ch, port, true, &what, &status);
	T_OK(id && what == RDMA_CM_EVENT_ESTABLISHED, "connect offering ECE: ESTABLISHED");
	if (id) {
		memset(&got, 0, sizeof(got));
		T_OK(rdma_get_remote_ece(id, &got) == 0 && got.vendor_id == OFFER_VENDOR &&
		     got.options == ACCEPT_OPTIONS,
		     "client reads the accepted ECE from the REP (vendor 0x%x options 0x%x)",
		     got.vendor_id, got.options);
		T_OK(rdma_disconnect(id) == 0 &&
		     t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL) == 0, "disconnect");
		t_cm_close_id(id);
	}

	id = client(ch, port, false, &what, &status);
	T_OK(id && what == RDMA_CM_EVENT_ESTABLISHED, "connect without ECE: ESTABLISHED");
	if (id) {
		memset(&got, 0xee, sizeof(got));
		T_OK(rdma_get_remote_ece(id, &got) == 0 && !got.vendor_id && !got.options,
		     "a server that set no ECE answers none (vendor 0x%x options 0x%x)",
		     got.vendor_id, got.options);
		T_OK(rdma_disconnect(id) == 0 &&
		     t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL) == 0, "disconnect");
		t_cm_close_id(id);
	}

	id = client(ch, port, true, &what, &status);
	T_OK(id && what == RDMA_CM_EVENT_REJECTED && status == 35,
	     "rdma_reject_ece: REJECTED with status 35 (got %s, %d)",
	     id ? rdma_event_str(what) : "nothing", status);
	if (id)
		t_cm_close_id(id);

	st = -1;
	for (int i = 0; i < 500 && waitpid(pid, &st, WNOHANG) != pid; i++)
		usleep(10000);
	if (st == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	T_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	     "server saw the offer, no offer, and rejected (status %d)",
	     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	rdma_destroy_event_channel(ch);
	return t_summary();
}
