/* ibv_modify_qp: the IBTA QP state machine (IBTA vol 1, 10.3 and Table 91
 * "QP state transition properties"; the same facts as Linux's
 * ib_modify_qp_is_ok).  For every (current, next) state pair and QP type
 * the table gives the attributes a caller must pass and those it may pass;
 * a call that breaks either rule, or passes a value out of range, fails
 * with EINVAL and changes nothing. */
#include "verbs/datapath.h"
#include "verbs/shared_rings.h"
#include "verbs/export.h"

#include <string.h>
#include <sys/socket.h>

enum { T_RC, T_UC, T_UD, T_NUM };

struct transition {
	bool valid;
	int req[T_NUM];              /* attributes that must be in the mask */
	int opt[T_NUM];              /* attributes that may be in the mask */
};

#define NSTATES (IBV_QPS_ERR + 1)

/* Indexed [current][next].  Any state may go to RESET or ERR except that
 * RESET only goes to RESET or INIT (as Linux enforces). */
static const struct transition qp_table[NSTATES][NSTATES] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_INIT] = {
			.valid = true,
			.req = {
				[T_RC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS,
				[T_UC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS,
				[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_QKEY,
			},
		},
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_INIT] = {
			.valid = true,
			.opt = {
				[T_RC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS,
				[T_UC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS,
				[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_QKEY,
			},
		},
		[IBV_QPS_RTR] = {
			.valid = true,
			.req = {
				[T_RC] = IBV_QP_AV | IBV_QP_PATH_MTU |
					 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					 IBV_QP_MAX_DEST_RD_ATOMIC |
					 IBV_QP_MIN_RNR_TIMER,
				[T_UC] = IBV_QP_AV | IBV_QP_PATH_MTU |
					 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
			},
			.opt = {
				[T_RC] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
					 IBV_QP_PKEY_INDEX,
				[T_UC] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
					 IBV_QP_PKEY_INDEX,
				[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY,
			},
		},
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = {
			.valid = true,
			.req = {
				[T_RC] = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					 IBV_QP_MAX_QP_RD_ATOMIC,
				[T_UC] = IBV_QP_SQ_PSN,
				[T_UD] = IBV_QP_SQ_PSN,
			},
			.opt = {
				[T_RC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH |
					 IBV_QP_ACCESS_FLAGS |
					 IBV_QP_MIN_RNR_TIMER |
					 IBV_QP_PATH_MIG_STATE,
				[T_UC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH |
					 IBV_QP_ACCESS_FLAGS |
					 IBV_QP_PATH_MIG_STATE,
				[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY,
			},
		},
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = {
			.valid = true,
			.opt = {
				[T_RC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS |
					 IBV_QP_ALT_PATH |
					 IBV_QP_PATH_MIG_STATE |
					 IBV_QP_MIN_RNR_TIMER,
				[T_UC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS |
					 IBV_QP_ALT_PATH |
					 IBV_QP_PATH_MIG_STATE,
				[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY,
			},
		},
		[IBV_QPS_SQD] = {
			.valid = true,
			.opt = {
				[T_RC] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
				[T_UC] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
				[T_UD] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
			},
		},
	},
	[IBV_QPS_SQD] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = {
			.valid = true,
			.opt = {
				[T_RC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH |
					 IBV_QP_ACCESS_FLAGS |
					 IBV_QP_MIN_RNR_TIMER |
					 IBV_QP_PATH_MIG_STATE,
				[T_UC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH |
					 IBV_QP_ACCESS_FLAGS |
					 IBV_QP_PATH_MIG_STATE,
				[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY,
			},
		},
		[IBV_QPS_SQD] = {
			.valid = true,
			.opt = {
				[T_RC] = IBV_QP_PORT | IBV_QP_AV |
					 IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					 IBV_QP_RNR_RETRY |
					 IBV_QP_MAX_QP_RD_ATOMIC |
					 IBV_QP_MAX_DEST_RD_ATOMIC |
					 IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
					 IBV_QP_PKEY_INDEX |
					 IBV_QP_MIN_RNR_TIMER |
					 IBV_QP_PATH_MIG_STATE,
				[T_UC] = IBV_QP_AV | IBV_QP_ALT_PATH |
					 IBV_QP_ACCESS_FLAGS |
					 IBV_QP_PKEY_INDEX |
					 IBV_QP_PATH_MIG_STATE,
				[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY,
			},
		},
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = {
			.valid = true,
			.opt = {
				/* RC never enters SQE (its send errors go
				 * straight to ERR): nothing optional. */
				[T_UC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS,
				[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY,
			},
		},
	},
	[IBV_QPS_ERR] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
	},
};

static int type_index(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC: return T_RC;
	case IBV_QPT_UC: return T_UC;
	case IBV_QPT_UD: return T_UD;
	case IBV_QPT_XRC_SEND: return T_RC;
	case IBV_QPT_XRC_RECV: return T_RC;
	default: return -1;
	}
}

/* XRC QPs follow RC's table without the attributes of the half they lack
 * (an initiator receives nothing, a target sends no requests); those bits
 * of a mask are ignored, as the kernel's uverbs drops them. */
static int xrc_ignored(enum ibv_qp_type type)
{
	if (type == IBV_QPT_XRC_SEND)
		return IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (type == IBV_QPT_XRC_RECV)
		return IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
	return 0;
}

bool srn_qp_transition(enum ibv_qp_type type, enum ibv_qp_state cur,
		       enum ibv_qp_state next, int *req, int *opt)
{
	int t = type_index(type);
	const struct transition *tr;

	if (t < 0 || (unsigned int)cur >= NSTATES ||
	    (unsigned int)next >= NSTATES)
		return false;
	tr = &qp_table[cur][next];
	if (!tr->valid)
		return false;
	*req = tr->req[t] & ~xrc_ignored(type);
	*opt = tr->opt[t] & ~xrc_ignored(type);
	return true;
}

/* RoCE addressing: every connected QP's path needs a GRH whose source GID
 * exists (the packets are UDP/IP, addressed by GID).  The engine sends
 * from one address per family: GID 0's, and beside an IPv4 GID 0 the
 * device's IPv6 source (srn_dev_ipv6_src, env->ipv6).  Source and
 * destination must be of one family, one the engine has: anything else
 * has no path and would leave the QP sending nothing, so it is refused
 * here.  A link-local IPv6 destination beside IPv4 needs an interface
 * scope a GID cannot carry: refused too. */
static int check_ah(const struct ibv_ah_attr *ah, const struct srn_qp_check_env *env)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	const uint8_t *d = ah->grh.dgid.raw;
	int dfamily;

	if (ah->port_num != 1)
		return EINVAL;
	if (!ah->is_global)
		return EINVAL;
	if (ah->grh.sgid_index >= env->num_gids)
		return EINVAL;
	if (!env->gid_family)
		return 0;
	dfamily = memcmp(d, v4mapped, 12) ? AF_INET6 : AF_INET;
	if (env->gid_family[ah->grh.sgid_index] != dfamily)
		return EINVAL;
	if (dfamily == env->gid_family[0])
		return 0;
	if (dfamily != AF_INET6 || !env->ipv6)
		return EINVAL;
	return d[0] == 0xfe && (d[1] & 0xc0) == 0x80 ? EINVAL : 0;
}

/* ON_DEMAND is an MR's property; programs that pass their MR flags to
 * the QP too (rdma-core's ODP tests) get it ignored, as on mlx5. */
#define QP_ACCESS_OK (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
		      IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND)

static int check_values(const struct ibv_qp_attr *a, int mask,
			const struct srn_qp_check_env *env)
{
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
		return EINVAL; /* one P_Key: the default 0xffff */
	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (a->qp_access_flags & ~(unsigned int)QP_ACCESS_OK))
		return EINVAL;
	if ((mask & IBV_QP_PATH_MTU) &&
	    (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
		return EINVAL;
	/* Above the port's active MTU the packets would not fit the link
	 * (IP_PMTUDISC_DO: the kernel refuses to send them) and the QP would
	 * hang: refused, as RoCE NICs refuse it, rather than clamped. */
	if ((mask & IBV_QP_PATH_MTU) && env->active_mtu && a->path_mtu > env->active_mtu)
		return EINVAL;
	if ((mask & IBV_QP_AV) && check_ah(&a->ah_attr, env))
		return EINVAL;
	if ((mask & IBV_QP_ALT_PATH) &&
	    (check_ah(&a->alt_ah_attr, env) || a->alt_port_num != 1 ||
	     a->alt_pkey_index != 0 || a->alt_timeout > 31))
		return EINVAL;
	if ((mask & IBV_QP_PATH_MIG_STATE) && a->path_mig_state > IBV_MIG_ARMED)
		return EINVAL;
	/* Local ACK timeout is 5 bits: 4.096 us * 2^timeout (0 = none). */
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) &&
	    a->max_rd_atomic > SRN_MAX_RD_ATOM)
		return EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) &&
	    a->max_dest_rd_atomic > SRN_MAX_RD_ATOM)
		return EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff)
		return EINVAL;
	return 0;
}

int srn_qp_modify_check(enum ibv_qp_type type, enum ibv_qp_state cur,
			const struct ibv_qp_attr *attr, int mask,
			const struct srn_qp_check_env *env)
{
	enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	int req, opt;

	mask &= ~xrc_ignored(type);
	if (!srn_qp_transition(type, cur, next, &req, &opt))
		return EINVAL;
	if ((mask & req) != req)
		return EINVAL;
	if (mask & ~(req | opt | IBV_QP_STATE))
		return EINVAL;
	/* Where allowed, CUR_STATE is an assertion about the QP's state. */
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		return EINVAL;
	return check_values(attr, mask, env);
}

/* Copy the attributes of mask from src into the cache. */
static void apply_attrs(struct ibv_qp_attr *dst, const struct ibv_qp_attr *src,
			int mask)
{
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		dst->en_sqd_async_notify = src->en_sqd_async_notify;
	if (mask & IBV_QP_ACCESS_FLAGS)
		dst->qp_access_flags = src->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		dst->pkey_index = src->pkey_index;
	if (mask & IBV_QP_PORT)
		dst->port_num = src->port_num;
	if (mask & IBV_QP_QKEY)
		dst->qkey = src->qkey;
	if (mask & IBV_QP_AV)
		dst->ah_attr = src->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		dst->path_mtu = src->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		dst->timeout = src->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		dst->retry_cnt = src->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		dst->rnr_retry = src->rnr_retry;
	/* PSNs are 24 bits; higher bits are ignored, as rxe does. */
	if (mask & IBV_QP_RQ_PSN)
		dst->rq_psn = src->rq_psn & 0xffffff;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		dst->max_rd_atomic = src->max_rd_atomic;
	if (mask & IBV_QP_ALT_PATH) {
		dst->alt_ah_attr = src->alt_ah_attr;
		dst->alt_pkey_index = src->alt_pkey_index;
		dst->alt_port_num = src->alt_port_num;
		dst->alt_timeout = src->alt_timeout;
	}
	if (mask & IBV_QP_MIN_RNR_TIMER)
		dst->min_rnr_timer = src->min_rnr_timer;
	if (mask & IBV_QP_SQ_PSN)
		dst->sq_psn = src->sq_psn & 0xffffff;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	if (mask & IBV_QP_PATH_MIG_STATE)
		dst->path_mig_state = src->path_mig_state;
	if (mask & IBV_QP_DEST_QPN)
		dst->dest_qp_num = src->dest_qp_num;
}

/* IBTA 10.3.1: entering RESET empties both work queues without
 * completions and forgets the attributes. */
static void qp_reset(struct srn_qp *qp)
{
	qp->sq.head = qp->sq.next = qp->sq.tail = 0;
	if (qp->rqs) {
		/* empty: tail back to head (counters run freely), and the
		 * discarded WQEs no longer look posted to a peer */
		uint32_t h = atomic_load(&qp->rqs->head), t = atomic_load(&qp->rqs->tail);

		atomic_store(&qp->rqs->tail, h);
		for (; h != t; h++)
			__atomic_store_n(&qp->rqs->wqe[h & (qp->rq.max_wr - 1)].seq, 0,
					 __ATOMIC_RELEASE);
	}
	qp->wr_pending = 0;
	memset(&qp->a, 0, sizeof(qp->a));
	qp->a.attr.cap = qp->cap;
	qp->a.attr.port_num = 1;
}

/* Moves qp through the state machine and/or changes attributes.  0, or
 * EINVAL (nothing changed) for a transition, mask or value the rules
 * above refuse. */
SRN_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			     int attr_mask)
{
	struct srn_qp_check_env env;
	enum ibv_qp_state old, next;
	struct srn_qp *qp;
	int err;

	if (!ibqp || !attr)
		return EINVAL;
	qp = srn_qp(ibqp);
	env.num_gids = qp->ctx->dev ? qp->ctx->dev->num_gids : 0;
	env.active_mtu = qp->ctx->dev ? srn_dev_active_mtu(qp->ctx->dev) : 0;
	env.gid_family = qp->ctx->dev && env.num_gids ? qp->ctx->dev->gid_family : NULL;
	env.ipv6 = qp->ctx->dev && srn_dev_ipv6_src(qp->ctx->dev) >= 0;

	attr_mask &= ~xrc_ignored(ibqp->qp_type);
	pthread_mutex_lock(&qp->lock);
	old = ibqp->state;
	err = srn_qp_modify_check(ibqp->qp_type, old, attr, attr_mask, &env);
	if (err) {
		srn_qp_unlock(qp);
		return err;
	}
	next = (attr_mask & IBV_QP_STATE) ? attr->qp_state : old;
	if (next == IBV_QPS_RESET)
		qp_reset(qp);
	else
		apply_attrs(&qp->a.attr, attr, attr_mask);
	qp->a.mask |= attr_mask & ~(IBV_QP_STATE | IBV_QP_CUR_STATE);
	qp->a.attr.qp_state = next;
	qp->a.attr.cur_qp_state = next;
	ibqp->state = next;
	srn_transport_qp_modified(qp, old, attr_mask);
	if (next == IBV_QPS_RESET && old != IBV_QPS_RESET) {
		if (ibqp->send_cq)
			srn_cq_clean_qp(srn_cq(ibqp->send_cq), ibqp->qp_num);
		if (ibqp->recv_cq && ibqp->recv_cq != ibqp->send_cq)
			srn_cq_clean_qp(srn_cq(ibqp->recv_cq), ibqp->qp_num);
	}
	srn_qp_unlock(qp);
	return 0;
}
