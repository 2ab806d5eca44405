/* examples/cm_common.c: waiting for rdma_cm events, and the resources
 * of an rdma_cm connection (see cm_common.h). */
#include "cm_common.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CM_WAIT_MS 20000

struct rdma_cm_event *cm_expect(struct ex_side *s, struct rdma_event_channel *ch,
				enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };

	/* The channel is a file descriptor: poll it with a timeout rather than
	 * block in rdma_get_cm_event for ever if the peer never answers. */
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	if (poll(&p, 1, CM_WAIT_MS) != 1)
		ex_fail(s, "no rdma_cm event within %d ms (waiting for %s)", CM_WAIT_MS,
			rdma_event_str(want));
	if (rdma_get_cm_event(ch, &ev))
		ex_fail(s, "rdma_get_cm_event: %s", strerror(errno));
	if (ev->event != want)
		ex_fail(s, "got %s (status %d), expected %s", rdma_event_str(ev->event),
			ev->status, rdma_event_str(want));
	ex_say(s, "event %s", rdma_event_str(ev->event));
	return ev;
}

void cm_make_qp(struct ex_side *s, struct rdma_cm_id *id, int access)
{
	/* rdma_cm has already picked the device (id->verbs) from the address. */
	ex_alloc(s, id->verbs, CM_BUF, access);
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	if (rdma_create_qp(id, s->pd, &ia))
		ex_fail(s, "rdma_create_qp: %s", strerror(errno));
	s->qp = id->qp;
	ex_say(s, "QP %u on %s, MR rkey 0x%x", s->qp->qp_num,
	       ibv_get_device_name(id->verbs->device), s->mr->rkey);
}

void cm_free_qp(struct ex_side *s, struct rdma_cm_id *id)
{
	rdma_destroy_qp(id);
	if (ibv_destroy_cq(s->cq) || ibv_dereg_mr(s->mr) || ibv_dealloc_pd(s->pd))
		ex_fail(s, "teardown: %s", strerror(errno));
	free(s->buf);
}

void cm_args(int argc, char **argv, const char **addr, const char **port)
{
	int opt;

	while ((opt = getopt(argc, argv, "a:p:")) != -1) {
		if (opt == 'a')
			*addr = optarg;
		else if (opt == 'p')
			*port = optarg;
		else {
			fprintf(stderr, "usage: %s [-a ADDR] [-p PORT]\n", argv[0]);
			exit(2);
		}
	}
}
