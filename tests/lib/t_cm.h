/* Helpers the rdma_cm tests share: wait for one expected event, the
 * loopback address of a port, a small RC QP on an id, and tearing an id
 * down with its QP.  Header-only, like t_util.h. */
#ifndef T_CM_H
#define T_CM_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

/* The next event on ch within ms, or NULL (timeout or error). */
static inline struct rdma_cm_event *t_cm_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&p, 1, ms) != 1 || rdma_get_cm_event(ch, &ev))
		return NULL;
	return ev;
}

/* The next event must be want: 0 (the event in *out if out, else acked),
 * or -1 with what came instead printed and acked. */
static inline int t_cm_expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want,
			      int ms, struct rdma_cm_event **out)
{
	struct rdma_cm_event *ev = t_cm_event(ch, ms);

	if (!ev) {
		printf("  # no event (wanted %s)\n", rdma_event_str(want));
		return -1;
	}
	if (ev->event != want) {
		printf("  # got %s status %d, wanted %s\n", rdma_event_str(ev->event),
		       ev->status, rdma_event_str(want));
		rdma_ack_cm_event(ev);
		return -1;
	}
	if (out)
		*out = ev;
	else
		rdma_ack_cm_event(ev);
	return 0;
}

/* A port for a test to listen on, from r: 20000-31999, below the
 * ephemeral range (32768-60999) that the kernel picks TCP and UDP ports
 * from for connect() and the CM directory picks from for ids that never
 * bound (cm/directory.c).  A port that a test running beside this one got
 * that way then cannot be the one we want (seen: ibv_srq_pingpong's
 * "Couldn't listen to port 39162", about 1 run in 300). */
static inline int t_listen_port(uint32_t r)
{
	return 20000 + (int)(r % 12000);
}

static inline struct sockaddr_in t_cm_loopback(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sin;
}

/* An RC QP with depth WRs each way on id's own PD and CQs. */
static inline int t_cm_make_qp(struct rdma_cm_id *id, uint32_t depth)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = depth, .max_recv_wr = depth,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	return rdma_create_qp(id, NULL, &qa);
}

static inline void t_cm_close_id(struct rdma_cm_id *id)
{
	if (id->qp)
		rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

#endif
