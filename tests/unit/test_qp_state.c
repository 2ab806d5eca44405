/* The modify_qp rules of verbs/qp_state.c, white-box: for RC, UC and UD,
 * every allowed (cur, next) pair passes with exactly its required
 * attributes, fails when any one of them is missing, accepts each optional
 * attribute, and refuses any other attribute; every pair outside the
 * IBTA/Linux state graph is refused; out-of-range values are refused. */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "tests/lib/t_util.h"
#include "verbs/datapath.h"

static const char *sname[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };
static const char *tname(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC ? "RC" : t == IBV_QPT_UC ? "UC" : "UD";
}

/* The state graph written out independently of the table under test. */
static bool expected_valid(enum ibv_qp_state c, enum ibv_qp_state n)
{
	if (c == IBV_QPS_RESET)
		return n == IBV_QPS_RESET || n == IBV_QPS_INIT;
	if (n == IBV_QPS_RESET || n == IBV_QPS_ERR)
		return true;
	switch (c) {
	case IBV_QPS_INIT: return n == IBV_QPS_INIT || n == IBV_QPS_RTR;
	case IBV_QPS_RTR: return n == IBV_QPS_RTS;
	case IBV_QPS_RTS: return n == IBV_QPS_RTS || n == IBV_QPS_SQD;
	case IBV_QPS_SQD: return n == IBV_QPS_RTS || n == IBV_QPS_SQD;
	case IBV_QPS_SQE: return n == IBV_QPS_RTS;
	default: return false;
	}
}

/* Attribute values that are all valid. */
static void good_attr(struct ibv_qp_attr *a, enum ibv_qp_state cur,
		      enum ibv_qp_state next)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = next;
	a->cur_qp_state = cur;
	a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	a->pkey_index = 0;
	a->port_num = 1;
	a->qkey = 0x11111111;
	a->ah_attr.is_global = 1;
	a->ah_attr.port_num = 1;
	a->ah_attr.grh.sgid_index = 0;
	a->ah_attr.grh.hop_limit = 64;
	a->alt_ah_attr = a->ah_attr;
	a->alt_port_num = 1;
	a->path_mtu = IBV_MTU_1024;
	a->timeout = 14;
	a->retry_cnt = 7;
	a->rnr_retry = 7;
	a->min_rnr_timer = 12;
	a->rq_psn = 0x123456;
	a->sq_psn = 0x654321;
	a->max_rd_atomic = 16;
	a->max_dest_rd_atomic = 16;
	a->dest_qp_num = 0x42;
	a->path_mig_state = IBV_MIG_MIGRATED;
}

static const struct srn_qp_check_env env = { .num_gids = 2 };

static void check_pair(enum ibv_qp_type t, enum ibv_qp_state c, enum ibv_qp_state n)
{
	struct ibv_qp_attr a;
	int req = 0, opt = 0, bit;
	bool valid = srn_qp_transition(t, c, n, &req, &opt);

	good_attr(&a, c, n);
	T_CHECK(valid == expected_valid(c, n), "%s %s->%s validity", tname(t), sname[c], sname[n]);
	if (!valid) {
		T_CHECK(srn_qp_modify_check(t, c, &a, IBV_QP_STATE, &env) == EINVAL,
			"%s %s->%s refused", tname(t), sname[c], sname[n]);
		return;
	}
	T_CHECK(srn_qp_modify_check(t, c, &a, IBV_QP_STATE | req, &env) == 0,
		"%s %s->%s with required mask 0x%x", tname(t), sname[c], sname[n], req);
	for (bit = 1; bit <= IBV_QP_RATE_LIMIT; bit <<= 1) {
		int m = IBV_QP_STATE | req;

		if (bit == IBV_QP_STATE)
			continue;
		if (req & bit) {
			T_CHECK(srn_qp_modify_check(t, c, &a, m & ~bit, &env) == EINVAL,
				"%s %s->%s without required 0x%x", tname(t), sname[c], sname[n], bit);
		} else if (opt & bit) {
			T_CHECK(srn_qp_modify_check(t, c, &a, m | bit, &env) == 0,
				"%s %s->%s optional 0x%x accepted", tname(t), sname[c], sname[n], bit);
		} else {
			T_CHECK(srn_qp_modify_check(t, c, &a, m | bit, &env) == EINVAL,
				"%s %s->%s extra 0x%x refused", tname(t), sname[c], sname[n], bit);
		}
	}
	/* Without IBV_QP_STATE the call is a cur->cur transition. */
	if (c == n)
		T_CHECK(srn_qp_modify_check(t, c, &a, req, &env) == 0,
			"%s %s attribute-only modify", tname(t), sname[c]);
}

/* One bad value at a time on a transition that takes the attribute. */
static void check_value(enum ibv_qp_type t, enum ibv_qp_state c, enum ibv_qp_state n,
			int extra, void (*spoil)(struct ibv_qp_attr *), const char *what)
{
	struct ibv_qp_attr a;
	int req = 0, opt = 0;

	srn_qp_transition(t, c, n, &req, &opt);
	good_attr(&a, c, n);
	T_CHECK(srn_qp_modify_check(t, c, &a, IBV_QP_STATE | req | extra, &env) == 0,
		"%s baseline", what);
	spoil(&a);
	T_CHECK(srn_qp_modify_check(t, c, &a, IBV_QP_STATE | req | extra, &env) == EINVAL,
		"%s refused", what);
}

static void s_port(struct ibv_qp_attr *a) { a->port_num = 2; }
static void s_port0(struct ibv_qp_attr *a) { a->port_num = 0; }
static void s_pkey(struct ibv_qp_attr *a) { a->pkey_index = 1; }
static void s_access(struct ibv_qp_attr *a) { a->qp_access_flags |= IBV_ACCESS_ZERO_BASED; }
static void s_mtu0(struct ibv_qp_attr *a) { a->path_mtu = 0; }
static void s_mtu6(struct ibv_qp_attr *a) { a->path_mtu = 6; }
static void s_noglobal(struct ibv_qp_attr *a) { a->ah_attr.is_global = 0; }
static void s_sgid(struct ibv_qp_attr *a) { a->ah_attr.grh.sgid_index = 2; }
static void s_ahport(struct ibv_qp_attr *a) { a->ah_attr.port_num = 3; }
static void s_qpn(struct ibv_qp_attr *a) { a->dest_qp_num = 1u << 24; }
static void s_dest_rd(struct ibv_qp_attr *a) { a->max_dest_rd_atomic = SRN_MAX_RD_ATOM + 1; }
static void s_rnr_timer(struct ibv_qp_attr *a) { a->min_rnr_timer = 32; }
static void s_timeout(struct ibv_qp_attr *a) { a->timeout = 32; }
static void s_retry(struct ibv_qp_attr *a) { a->retry_cnt = 8; }
static void s_rnr_retry(struct ibv_qp_attr *a) { a->rnr_retry = 8; }
static void s_rd(struct ibv_qp_attr *a) { a->max_rd_atomic = SRN_MAX_RD_ATOM + 1; }
static void s_cur(struct ibv_qp_attr *a) { a->cur_qp_state = IBV_QPS_SQD; }
static void s_mig(struct ibv_qp_attr *a) { a->path_mig_state = 3; }
static void s_alt(struct ibv_qp_attr *a) { a->alt_ah_attr.is_global = 0; }

int main(void)
{
	const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	int req, opt;
	unsigned int ti, c, n;

	for (ti = 0; ti < 3; ti++)
		for (c = 0; c <= IBV_QPS_ERR; c++)
			for (n = 0; n <= IBV_QPS_ERR; n++)
				check_pair(types[ti], c, n);
	printf("state graph and masks: %d checks\n", t_checks);

	/* Spot checks of the table against IBTA's Table 91 rows that every
	 * RC program depends on. */
	srn_qp_transition(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, &req, &opt);
	T_CHECK(req == (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), "RC RESET->INIT req");
	srn_qp_transition(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, &req, &opt);
	T_CHECK(req == (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER), "RC INIT->RTR req");
	srn_qp_transition(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, &req, &opt);
	T_CHECK(req == (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
		      IBV_QP_MAX_QP_RD_ATOMIC), "RC RTR->RTS req");
	srn_qp_transition(IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, &req, &opt);
	T_CHECK(req == (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), "UD RESET->INIT req");
	/* XRC: RC's table without the half each type lacks */
	T_CHECK(srn_qp_transition(IBV_QPT_XRC_SEND, IBV_QPS_INIT, IBV_QPS_RTR, &req, &opt) &&
		req == (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN),
		"XRC_SEND INIT->RTR req");
	T_CHECK(srn_qp_transition(IBV_QPT_XRC_RECV, IBV_QPS_RTR, IBV_QPS_RTS, &req, &opt) &&
		req == (IBV_QP_TIMEOUT | IBV_QP_SQ_PSN), "XRC_RECV RTR->RTS req");
	T_CHECK(!srn_qp_transition(IBV_QPT_DRIVER, IBV_QPS_RESET, IBV_QPS_INIT, &req, &opt),
		"driver QPs have no table");

	check_value(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, 0, s_port, "port_num 2");
	check_value(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, 0, s_port0, "port_num 0");
	check_value(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, 0, s_pkey, "pkey_index 1");
	check_value(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, 0, s_access, "unknown qp_access_flags");
	check_value(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, 0, s_mtu0, "path_mtu 0");
	check_value(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, 0, s_mtu6, "path_mtu 6");
	{
		/* a 1500-byte link: active MTU 1024; 2048 and 4096 refused */
		const struct srn_qp_check_env e1500 = { .num_gids = 2, .active_mtu = IBV_MTU_1024 };
		struct ibv_qp_attr a;
		int req = 0, ureq = 0, opt = 0;

		srn_qp_transition(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, &req, &opt);
		srn_qp_transition(IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, &ureq, &opt);
		good_attr(&a, IBV_QPS_INIT, IBV_QPS_RTR);
		for (enum ibv_mtu m = IBV_MTU_256; m <= IBV_MTU_4096; m++) {
			a.path_mtu = m;
			T_CHECK(srn_qp_modify_check(IBV_QPT_RC, IBV_QPS_INIT, &a, IBV_QP_STATE | req,
						    &e1500) == (m > IBV_MTU_1024 ? EINVAL : 0),
				"path_mtu %d over active MTU 1024", 128 << m);
			T_CHECK(srn_qp_modify_check(IBV_QPT_UC, IBV_QPS_INIT, &a, IBV_QP_STATE | ureq,
						    &e1500) == (m > IBV_MTU_1024 ? EINVAL : 0),
				"UC path_mtu %d over active MTU 1024", 128 << m);
		}
	}
	{
		/* an IPv4 device (GID 0 IPv4-mapped) also lists ::1 (GID 1):
		 * a path from or to an IPv6 GID is refused, not left silent */
		static const int fam[2] = { AF_INET, AF_INET6 };
		const struct srn_qp_check_env e4 = { .num_gids = 2, .gid_family = fam };
		struct ibv_qp_attr a;
		int req = 0, opt = 0;

		srn_qp_transition(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, &req, &opt);
		good_attr(&a, IBV_QPS_INIT, IBV_QPS_RTR);
		memset(a.ah_attr.grh.dgid.raw, 0, 16);
		a.ah_attr.grh.dgid.raw[10] = a.ah_attr.grh.dgid.raw[11] = 0xff;
		a.ah_attr.grh.dgid.raw[12] = 127, a.ah_attr.grh.dgid.raw[15] = 1;
		a.ah_attr.grh.sgid_index = 0;
		T_CHECK(srn_qp_modify_check(IBV_QPT_RC, IBV_QPS_INIT, &a, IBV_QP_STATE | req, &e4) == 0,
			"IPv4 GID to an IPv4-mapped GID");
		a.ah_attr.grh.sgid_index = 1;
		T_CHECK(srn_qp_modify_check(IBV_QPT_RC, IBV_QPS_INIT, &a, IBV_QP_STATE | req, &e4) ==
			EINVAL, "source GID ::1 on an IPv4 device");
		a.ah_attr.grh.sgid_index = 0;
		memset(a.ah_attr.grh.dgid.raw, 0, 16);
		a.ah_attr.grh.dgid.raw[15] = 1;
		T_CHECK(srn_qp_modify_check(IBV_QPT_RC, IBV_QPS_INIT, &a, IBV_QP_STATE | req, &e4) ==
			EINVAL, "destination GID ::1 from an IPv4 device");
	}
	{
		/* the same device with an IPv6 source address (env.ipv6):
		 * IPv6 to IPv6 is a path, mixed families and a link-local
		 * destination are not */
		static const int fam[3] = { AF_INET, AF_INET6, AF_INET6 };
		const struct srn_qp_check_env e6 = { .num_gids = 3, .gid_family = fam, .ipv6 = true };
		const int st = IBV_QP_STATE;
		struct ibv_qp_attr a;
		int req = 0, opt = 0;

		srn_qp_transition(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, &req, &opt);
		good_attr(&a, IBV_QPS_INIT, IBV_QPS_RTR);
		memset(a.ah_attr.grh.dgid.raw, 0, 16);
		a.ah_attr.grh.dgid.raw[15] = 1;
		for (int sg = 1; sg <= 2; sg++) {
			a.ah_attr.grh.sgid_index = (uint8_t)sg;
			T_CHECK(srn_qp_modify_check(IBV_QPT_RC, IBV_QPS_INIT, &a, st | req, &e6) == 0,
				"IPv6 GID %d to ::1", sg);
		}
		a.ah_attr.grh.sgid_index = 0;
		T_CHECK(srn_qp_modify_check(IBV_QPT_RC, IBV_QPS_INIT, &a, st | req, &e6) == EINVAL,
			"IPv4 source GID to ::1");
		a.ah_attr.grh.sgid_index = 1;
		a.ah_attr.grh.dgid.raw[0] = 0xfe, a.ah_attr.grh.dgid.raw[1] = 0x80;
		T_CHECK(srn_qp_modify_check(IBV_QPT_RC, IBV_QPS_INIT, &a, st | req, &e6) == EINVAL,
			"link-local destination fe80::1");
		memset(a.ah_attr.grh.dgid.raw, 0, 16);
		a.ah_attr.grh.dgid.raw[10] = a.ah_attr.grh.dgid.raw[11] = 0xff;
		a.ah_attr.grh.dgid.raw[12] = 127, a.ah_attr.grh.dgid.raw[15] = 1;
		T_CHECK(srn_qp_modify_check(IBV_QPT_RC, IBV_QPS_INIT, &a, st | req, &e6) == EINVAL,
			"IPv6 source GID to an IPv4-mapped GID");
	}
	check_value(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, 0, s_noglobal, "RoCE AV without GRH");
	check_value(IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, 0, s_noglobal, "UC AV without GRH");
	check_value(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, 0, s_sgid, "sgid_index >= num_gids");
	check_value(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, 0, s_ahport, "ah_attr.port_num 3");
	check_value(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, 0, s_qpn, "dest_qp_num > 24 bits");
	check_value(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, 0, s_dest_rd, "max_dest_rd_atomic too big");
	check_value(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, 0, s_rnr_timer, "min_rnr_timer 32");
	check_value(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_ALT_PATH, s_alt, "alt path without GRH");
	check_value(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, 0, s_timeout, "timeout 32");
	check_value(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, 0, s_retry, "retry_cnt 8");
	check_value(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, 0, s_rnr_retry, "rnr_retry 8");
	check_value(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, 0, s_rd, "max_rd_atomic too big");
	check_value(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_CUR_STATE, s_cur, "cur_qp_state != current");
	check_value(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_PATH_MIG_STATE, s_mig, "path_mig_state 3");

	{
		struct ibv_qp_attr a;

		good_attr(&a, IBV_QPS_RTS, IBV_QPS_UNKNOWN);
		T_CHECK(srn_qp_modify_check(IBV_QPT_RC, IBV_QPS_RTS, &a, IBV_QP_STATE, &env) == EINVAL,
			"qp_state UNKNOWN refused");
		good_attr(&a, IBV_QPS_INIT, IBV_QPS_RTR);
		T_CHECK(srn_qp_modify_check(IBV_QPT_RC, IBV_QPS_INIT, &a, IBV_QP_STATE | IBV_QP_CAP, &env) == EINVAL,
			"IBV_QP_CAP (resize) refused");
	}

	return t_summary();
}
