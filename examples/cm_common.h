/* examples/cm_common.h: what cm_server.c and cm_client.c share. */
#ifndef CM_COMMON_H
#define CM_COMMON_H

#include <rdma/rdma_cma.h>

#include "ex_common.h"

/* What the server hands the client in its accept (rdma_cm carries up to
 * 196 bytes of private data with the reply): where the client may WRITE.
 * Fixed-size fields in network byte order: the peer may be another CPU. */
struct cm_offer {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

#define CM_MSG "written by the client over an rdma_cm connection"
#define CM_REPLY "pong"
#define CM_BUF 4096u

/* Waits (bounded) for the next event on CH; it must be WANT.  The caller
 * acknowledges it with rdma_ack_cm_event once done with it. */
struct rdma_cm_event *cm_expect(struct ex_side *s, struct rdma_event_channel *ch,
				enum rdma_cm_event_type want);
/* PD, MR (LEN bytes, ACCESS), CQ, and an RC QP on ID through rdma_create_qp,
 * which also moves it through INIT/RTR/RTS as the connection is made. */
void cm_make_qp(struct ex_side *s, struct rdma_cm_id *id, int access);
void cm_free_qp(struct ex_side *s, struct rdma_cm_id *id);
/* "-a ADDR -p PORT" */
void cm_args(int argc, char **argv, const char **addr, const char **port);

#endif
