/* Private to the verbs data-path files (pd, mr, cq, comp_channel, qp*):
 * the pieces they share that no other layer needs. */
#ifndef SRN_DATAPATH_H
#define SRN_DATAPATH_H

#include "verbs/srn.h"
#include "verbs/wait_pipe.h"

#include <errno.h>

/* A completion channel: the fd handed out is a pipe's read end, readable
 * while events are queued (poll/epoll/O_NONBLOCK work on it as on any
 * fd), or when a same-host peer fired a CQ itself; the events (CQ
 * pointers) wait in q[] so that destroying a CQ can take its unread
 * events back out. */
struct srn_comp_channel {
	struct ibv_comp_channel ibv; /* fd = a pipe's read end; refcnt = CQs
				      * using it */
	struct srn_wait_pipe pipe;   /* ibv.fd is its read end */
	uint64_t ino;                /* the pipe's inode (peers check it) */
	pthread_mutex_t lock;        /* guards q[] and our byte in the pipe */
	struct srn_cq **q;           /* FIFO ring of CQs with an event */
	uint32_t qcap, qhead, qcount;
};

static inline struct srn_comp_channel *srn_chan(struct ibv_comp_channel *c)
{
	return srn_container_of(c, struct srn_comp_channel, ibv);
}

static inline struct srn_cq *srn_cq(struct ibv_cq *c)
{
	return srn_container_of((struct ibv_cq_ex *)c, struct srn_cq, ibv);
}

static inline struct srn_pd *srn_pd(struct ibv_pd *p)
{
	return srn_container_of(p, struct srn_pd, ibv);
}

static inline struct srn_mr *srn_mr(struct ibv_mr *m)
{
	return srn_container_of(m, struct srn_mr, ibv);
}

/* comp_channel.c: queue one event for cq (called with cq->lock held). */
void srn_chan_notify(struct srn_comp_channel *ch, struct srn_cq *cq);
/* cq.c: queue an event for every CQ of ch a same-host peer fired itself
 * (its ring's peer_fired).  ch->lock not held. */
void srn_cq_collect_fired(struct srn_context *ctx, struct srn_comp_channel *ch);
/* comp_channel.c: take cq's unread events back (CQ being destroyed). */
void srn_chan_forget(struct srn_comp_channel *ch, struct srn_cq *cq);

/* cq.c: ops slots. */
int srn_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
int srn_req_notify_cq(struct ibv_cq *cq, int solicited_only);
struct ibv_cq_ex *srn_create_cq_ex(struct ibv_context *context,
				   struct ibv_cq_init_attr_ex *attr);

/* qp.c */
struct ibv_qp *srn_create_qp_ex(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *attr);

/* qp_post.c: ops slots, and the per-WQE check the ibv_wr_* API shares. */
int srn_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad_wr);
int srn_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr);
int srn_sq_check_state(const struct srn_qp *qp);
int srn_sq_check_wqe(const struct srn_qp *qp, struct srn_send_wqe *w);
/* Opcodes the send queue of a QP type accepts (bit per ibv_wr_opcode). */
uint32_t srn_sq_opcodes(enum ibv_qp_type type);

static inline struct srn_send_wqe *srn_sq_slot(struct srn_qp *qp, uint32_t i)
{
	return &((struct srn_send_wqe *)qp->sq.wqe)[i & (qp->sq.max_wr - 1)];
}

/* Validate one receive WR against a queue of max_sge SGEs and append it
 * to ring r (a QP's RQ or an SRQ) of slots entries holding at most cap.
 * *head_seen is the caller's copy of head: when it says full, the hint
 * hint_cq's pollers left (the peers' completions) is looked at, and head
 * itself (a line the peers taking own) read only when that says full too.
 * Returns 0, EINVAL or ENOMEM (full); the caller serialises producers. */
struct srn_rq_ring;
int srn_rq_ring_post(struct srn_rq_ring *r, uint32_t slots, uint32_t cap, uint32_t max_sge,
		     struct srn_cq *hint_cq, uint32_t *head_seen, const struct ibv_recv_wr *wr);

/* qp_wr.c: fill the ibv_wr_* function pointers of qp->ex. */
void srn_qp_ex_init(struct srn_qp *qp);

/* qp_state.c: the IBTA modify_qp rules, pure (unit-testable). */
struct srn_qp_check_env {
	int num_gids;                /* valid GID table entries (sgid_index) */
	enum ibv_mtu active_mtu;     /* the port's; 0: not checked */
	const int *gid_family;       /* AF_INET/AF_INET6 per GID; NULL: not checked */
	bool ipv6;                   /* IPv6 GIDs usable beside IPv4 ones */
};
/* Required and optional attribute masks of cur -> next for type; false if
 * the transition is not allowed at all. */
bool srn_qp_transition(enum ibv_qp_type type, enum ibv_qp_state cur,
		       enum ibv_qp_state next, int *req, int *opt);
/* 0 or EINVAL: mask and every value in attr checked for a QP of type in
 * state cur.  Changes nothing. */
int srn_qp_modify_check(enum ibv_qp_type type, enum ibv_qp_state cur,
			const struct ibv_qp_attr *attr, int mask,
			const struct srn_qp_check_env *env);

#endif
