/* transport/direct: the same-host direct path (docs/same-host.md).
 * When an RC QP's destination QP lives in a process on this host (or in
 * this one), the initiator executes RDMA WRITE, READ and atomics itself on
 * the target's memory, mapped through the target's memfd (or with
 * process_vm_readv/writev), after every check the responder would make;
 * no packet, no work for the target's CPU.  Anything that fails a check
 * is left to the packet path, which produces the exact protocol error.
 * Direct operations consume no PSN: both ends are ours, and the packet
 * path keeps its own sequence.  A UD SEND to a QP of this host is
 * delivered the same way (direct_ud.c). */
#ifndef TRANSPORT_DIRECT_H
#define TRANSPORT_DIRECT_H

#include <stdbool.h>
#include <stdint.h>

struct srn_rc_state;
struct srn_send_wqe;

/* requester.c, qp->lock held: w is the new WQE at sq.next and nothing is
 * outstanding before it (sq.head == sq.next).  Executes and completes it
 * (sq.head and sq.next advance, a WC if signaled) and returns 1; returns
 * 0 having changed nothing (the packet path takes it); or -EAGAIN: a SEND
 * found no receive posted, try again in DIRECT_WAIT_NS (for up to
 * DIRECT_RNR_WAIT_NS, then the packet path's RNR retries take over). */
int direct_try(struct srn_rc_state *rc, struct srn_send_wqe *w);

enum { DIRECT_WAIT_NS = 20 * 1000 };

/* Forget the QP's cached view of its peer (attributes changed, reset,
 * destroy).  qp->lock held. */
void direct_qp_forget(struct srn_rc_state *rc);

/* ud.c, qp->lock held: a UD SEND (imm: with immediate imm_be) of len
 * bytes gathered in pay[0..npay) to rc->dqpn at rc->peer (ud_route),
 * Q_Key qkey.  1: done in the target's memory, or dropped there as its
 * responder would (no receive WQE), and counted: the SEND is complete;
 * 0: nothing changed, packets take it. */
struct iovec;
int direct_ud_send(struct srn_rc_state *rc, bool imm, uint32_t imm_be, bool solicited,
		   uint32_t qkey, uint32_t len, const struct iovec *pay, int npay);
/* direct.c (srn_transport_post_now), qp->lock held: wr, a UD SEND of
 * len bytes in one SGE on an idle send queue, done at once in a
 * same-host target's memory with its completion: 1; else 0. */
struct ibv_send_wr;
int direct_ud_post_now(struct srn_rc_state *rc, const struct ibv_send_wr *wr, uint32_t len);
/* direct_ud.c: forget every destination a UD QP cached. */
void direct_ud_forget(struct srn_rc_state *rc);

/* hooks.c, qp->lock held: publish the QP's state, type and peer in the
 * registry (softrnic qps), and in RTR/RTS/SQD what a same-host peer
 * checks before executing on it (access, PD; NET_REG_QP_DIRECT). */
void direct_publish(struct srn_rc_state *rc);
/* hooks.c: the QP is going away: clear its published info. */
void direct_unpublish(struct srn_rc_state *rc);

#endif
