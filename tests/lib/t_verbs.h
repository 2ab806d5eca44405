/* Verbs helpers the API tests (and white-box tests that go through the
 * verbs API) share: finding and opening srn_lo, a plain QP, polling a CQ
 * with a deadline.  Header-only and static, like t_util.h. */
#ifndef T_VERBS_H
#define T_VERBS_H

#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "tests/lib/t_util.h"

/* The device list t_lo_find() got; devices live in it, so it is freed
 * last, by t_lo_free(). */
static struct ibv_device **t_lo_list __attribute__((unused));

/* srn_lo, the loopback device the tests run on, or NULL.  Sets
 * SOFTRNIC_DEVICES=lo first (the library reads it once per process, when
 * the list is first built), so srn_lo is the only device. */
static inline struct ibv_device *t_lo_find(void)
{
	if (!t_lo_list) {
		setenv("SOFTRNIC_DEVICES", "lo", 1);
		t_lo_list = ibv_get_device_list(NULL);
	}
	for (int i = 0; t_lo_list && t_lo_list[i]; i++)
		if (!strcmp(ibv_get_device_name(t_lo_list[i]), "srn_lo"))
			return t_lo_list[i];
	return NULL;
}

/* srn_lo; skips the test (exit 77) when there is none. */
static inline struct ibv_device *t_lo_device(void)
{
	struct ibv_device *d = t_lo_find();

	if (!d)
		t_skip("no srn_lo (ibv_get_device_list: %s)",
		       t_lo_list ? "srn_lo not listed" : strerror(errno));
	return d;
}

/* srn_lo opened; skips the test (exit 77) when it cannot be. */
static inline struct ibv_context *t_lo_open(void)
{
	struct ibv_context *ctx = ibv_open_device(t_lo_device());

	if (!ctx)
		t_skip("ibv_open_device(srn_lo): %s", strerror(errno));
	return ctx;
}

/* Frees the device list; after the last ibv_close_device. */
static inline void t_lo_free(void)
{
	ibv_free_device_list(t_lo_list);
	t_lo_list = NULL;
}

/* A QP of type t with cq for both queues, wr WRs and one SGE each way. */
static inline struct ibv_qp *t_qp_create(struct ibv_pd *pd, struct ibv_cq *cq,
					 enum ibv_qp_type t, uint32_t wr)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = t,
		.cap = { .max_send_wr = wr, .max_recv_wr = wr,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &ia);
}

/* How an RC QP is brought to RTS by t_qp_rc_*: every value the tests vary.
 * The rest is fixed: port 1, P_Key index 0, a GRH from GID 0, MTU 1024,
 * both PSNs 0, retry_cnt and rnr_retry 7. */
struct t_rc_attr {
	unsigned int access;         /* qp_access_flags (INIT) */
	uint32_t dest_qpn;           /* the peer QP (RTR) */
	union ibv_gid dgid;          /* the peer's GID (RTR) */
	uint8_t hop_limit;           /* GRH hop limit (RTR) */
	uint8_t min_rnr_timer;       /* (RTR) */
	uint8_t rd_atomic;           /* max_dest_rd_atomic (RTR), max_rd_atomic (RTS) */
	uint8_t timeout;             /* local ACK timeout (RTS) */
	uint32_t psn;                /* rq_psn (RTR) and sq_psn (RTS) */
};

/* RESET -> INIT; returns ibv_modify_qp's result. */
static inline int t_qp_rc_init(struct ibv_qp *qp, const struct t_rc_attr *r)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = r->access };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS);
}

/* INIT -> RTR. */
static inline int t_qp_rc_rtr(struct ibv_qp *qp, const struct t_rc_attr *r)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = r->dest_qpn, .rq_psn = r->psn,
		.max_dest_rd_atomic = r->rd_atomic, .min_rnr_timer = r->min_rnr_timer,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = r->dgid, .hop_limit = r->hop_limit } },
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			     IBV_QP_MIN_RNR_TIMER);
}

/* RTR -> RTS. */
static inline int t_qp_rc_rts(struct ibv_qp *qp, const struct t_rc_attr *r)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .sq_psn = r->psn, .timeout = r->timeout,
				 .retry_cnt = 7, .rnr_retry = 7,
				 .max_rd_atomic = r->rd_atomic };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* RESET -> INIT -> RTR -> RTS; 0, or the first step's error. */
static inline int t_qp_rc_connect(struct ibv_qp *qp, const struct t_rc_attr *r)
{
	int ret = t_qp_rc_init(qp, r);

	if (!ret)
		ret = t_qp_rc_rtr(qp, r);
	if (!ret)
		ret = t_qp_rc_rts(qp, r);
	return ret;
}

/* Polls until want completions are in wc or ms have passed; returns how
 * many it got, or the negative ibv_poll_cq error. */
static inline int t_poll_cq(struct ibv_cq *cq, struct ibv_wc *wc, int want, int ms)
{
	double end = t_now() + ms / 1e3;
	int got = 0;

	while (got < want) {
		int n = ibv_poll_cq(cq, want - got, wc + got);

		if (n < 0)
			return n;
		got += n;
		if (got < want) {
			if (t_now() > end)
				break;
			usleep(100);
		}
	}
	return got;
}

#endif
