/* An RC QP on an iWARP device (srn_iw_*): bound by the connection
 * manager to a TCP connection whose MPA exchange is done, it drives the
 * RDMAP send side (transport/iwarp_tx.h) from ibv_post_send and runs the
 * receive side (transport/iwarp_rx.h) in a thread of its own reading the
 * socket (transport/iwarp_qp.c).  docs/iwarp.md says how stream errors
 * map to work completions and async events. */
#ifndef SRN_TRANSPORT_IWARP_QP_H
#define SRN_TRANSPORT_IWARP_QP_H

#include <stdbool.h>

#include "transport/iwarp_tcp.h"
#include "verbs/srn.h"

/* The verbs hooks (transport/hooks.c calls them for a QP of an iWARP
 * device); qp->lock held, as for the hooks they stand in for. */
int srn_iwqp_create(struct srn_qp *qp);
void srn_iwqp_destroy(struct srn_qp *qp);
void srn_iwqp_kick_sq(struct srn_qp *qp);
void srn_iwqp_kick_rq(struct srn_qp *qp);
void srn_iwqp_modified(struct srn_qp *qp, enum ibv_qp_state old);
/* post_send's check of one WQE: siw's opcodes, a READ into one SGE. */
int srn_iwqp_wqe_check(const struct srn_send_wqe *w);

/* Hands the connection c (MPA done) to qp, which owns it from now on
 * (c is left empty), and moves the QP to RTS as siw's connection
 * manager does.  on_close(arg) runs, from the QP's thread and without
 * any lock, when the stream ends for a reason other than
 * srn_iwqp_disconnect or destroy (peer closed, reset, Terminate).
 * 0, or a positive errno (the QP is not in INIT, RTR or RTS). */
int srn_iwqp_attach(struct ibv_qp *qp, struct srn_iw_conn *c, void (*on_close)(void *arg),
		    void *arg);
/* The local end closes the stream: the QP goes to ERR (its work
 * requests flushed) and the socket is shut down. */
void srn_iwqp_disconnect(struct ibv_qp *qp);

/* The two above as librdmacm reaches them (srn_context.iw_ops): the
 * libraries export no internals to each other. */
extern const struct srn_iwqp_ops srn_iwqp_ops;

#endif
