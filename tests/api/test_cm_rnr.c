/* The RNR timer of an rdma_cm RC connection is the kernel CM's: min_rnr_timer
 * 0 (655.36 ms per RNR NAK), so a SEND whose receive is posted a fraction
 * of a second late still completes with rnr_retry_count 5 (rdma-core's
 * test_rdmacm external-QP traffic posts its receive after its own send
 * completes, and a loaded host delays that by milliseconds).
 * Both ends in this process on 127.0.0.1, each with its own event channel;
 * CTest runs it on both paths. */
#include <errno.h>
#include <string.h>

#include "tests/lib/t_cm.h"
#include "tests/lib/t_util.h"

#define LATE_MS 200
#define MSG "sent before any receive was posted"

static struct rdma_cm_id *listener(struct rdma_event_channel *ch, int *port)
{
	struct sockaddr_in sin = t_cm_loopback(0);
	struct rdma_cm_id *l;

	if (rdma_create_id(ch, &l, NULL, RDMA_PS_TCP))
		return NULL;
	if (rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 2)) {
		rdma_destroy_id(l);
		return NULL;
	}
	*port = ntohs(rdma_get_src_port(l));
	return l;
}

/* One completion on cq within 10 s (the retries may take seconds). */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	double end = t_now() + 10;

	while (t_now() < end) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			return -1;
		if (n == 1)
			return 0;
		usleep(1000);
	}
	return -1;
}

int main(void)
{
	struct rdma_event_channel *sch, *cch;
	struct rdma_cm_id *l, *c = NULL, *id = NULL;
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 5, .rnr_retry_count = 5 };
	struct rdma_cm_event *ev;
	struct sockaddr_in dst;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_mr *smr, *rmr;
	struct ibv_wc wc;
	char sbuf[64] = MSG, rbuf[64] = "";
	int port, mask = 0;
	double t0;

	alarm(60);
	sch = rdma_create_event_channel();
	cch = rdma_create_event_channel();
	if (!sch || !cch)
		t_skip("no rdma_cm event channel");
	l = listener(sch, &port);
	if (!l)
		t_skip("cannot listen on 127.0.0.1 (no srn_lo?)");
	dst = t_cm_loopback(port);
	T_ASSERT(rdma_create_id(cch, &id, NULL, RDMA_PS_TCP) == 0 &&
		 rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0 &&
		 t_cm_expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000, NULL) == 0 &&
		 rdma_resolve_route(id, 2000) == 0 &&
		 t_cm_expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, 2000, NULL) == 0 &&
		 t_cm_make_qp(id, 4) == 0 && rdma_connect(id, &cp) == 0,
		 "client resolves, makes its QP, connects");
	T_ASSERT(t_cm_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, &ev) == 0,
		 "server: CONNECT_REQUEST");
	c = ev->id;
	rdma_ack_cm_event(ev);
	T_ASSERT(t_cm_make_qp(c, 4) == 0 && rdma_accept(c, &cp) == 0 &&
		 t_cm_expect(sch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL) == 0 &&
		 t_cm_expect(cch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL) == 0,
		 "server accepts (no receive posted): ESTABLISHED on both");

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTR;
	T_OK(rdma_init_qp_attr(c, &qa, &mask) == 0 && (mask & IBV_QP_MIN_RNR_TIMER) &&
	     qa.min_rnr_timer == 0,
	     "rdma_init_qp_attr(RTR): min_rnr_timer %u (0 = 655.36 ms, as the kernel's CM)",
	     qa.min_rnr_timer);
	memset(&qa, 0, sizeof(qa));
	T_OK(ibv_query_qp(c->qp, &qa, IBV_QP_MIN_RNR_TIMER, &qi) == 0 && qa.min_rnr_timer == 0,
	     "the accepted connection's QP has it (min_rnr_timer %u)", qa.min_rnr_timer);

	smr = rdma_reg_msgs(id, sbuf, sizeof(sbuf));
	rmr = rdma_reg_msgs(c, rbuf, sizeof(rbuf));
	T_ASSERT(smr && rmr, "MRs on the ids' PDs");
	T_ASSERT(rdma_post_send(id, NULL, sbuf, sizeof(MSG), smr, IBV_SEND_SIGNALED) == 0,
		 "client SENDs");
	t0 = t_now();
	usleep(LATE_MS * 1000);
	T_OK(rdma_post_recv(c, NULL, rbuf, sizeof(rbuf), rmr) == 0,
	     "server posts the receive %d ms later", LATE_MS);
	T_OK(wait_wc(id->send_cq, &wc) == 0 && wc.status == IBV_WC_SUCCESS,
	     "the SEND completes: %s after %.0f ms (rnr_retry_count 5)",
	     ibv_wc_status_str(wc.status), (t_now() - t0) * 1e3);
	T_OK(wait_wc(c->recv_cq, &wc) == 0 && wc.status == IBV_WC_SUCCESS && !strcmp(rbuf, MSG),
	     "the server received it intact");

	rdma_disconnect(id);
	t_cm_expect(cch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL);
	t_cm_expect(sch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL);
	rdma_dereg_mr(smr);
	rdma_dereg_mr(rmr);
	t_cm_close_id(c);
	t_cm_close_id(id);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
	return t_summary();
}
