/* Multicast attach/detach rules, black-box: UD QPs only, multicast GIDs
 * only (ff00::/8 and IPv4-mapped 224.0.0.0/4), attaching twice is a
 * no-op, detaching a group not attached is EINVAL, SRN's limits (groups
 * per QP, QPs per group) give ENOMEM, destroying an attached QP is fine.
 * Delivery of multicast packets is the UD transport's (not tested here). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

#define MAX_QPS 80

static void gid_v4(union ibv_gid *g, uint32_t ip)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	ip = htonl(ip);
	memcpy(g->raw + 12, &ip, 4);
}

int main(void)
{
	struct ibv_context *ctx;
	struct ibv_device_attr da;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *ud, *rc, *uc, *qps[MAX_QPS];
	union ibv_gid g4, g6, uni, g;
	int i, n, ret;

	ctx = t_lo_open();
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	ud = t_qp_create(pd, cq, IBV_QPT_UD, 1);
	rc = t_qp_create(pd, cq, IBV_QPT_RC, 1);
	uc = t_qp_create(pd, cq, IBV_QPT_UC, 1);
	if (!pd || !cq || !ud || !rc || !uc || ibv_query_device(ctx, &da)) {
		printf("FAIL: setup\n");
		return 1;
	}
	gid_v4(&g4, 0xe0010203);            /* ::ffff:224.1.2.3 */
	memset(&g6, 0, sizeof(g6));
	g6.raw[0] = 0xff;
	g6.raw[1] = 0x0e;
	g6.raw[15] = 0x77;                  /* ff0e::77 */
	gid_v4(&uni, 0x7f000001);           /* ::ffff:127.0.0.1 */

	T_OK(ibv_attach_mcast(ud, &g4, 0) == 0, "UD attach ::ffff:224.1.2.3");
	T_OK(ibv_attach_mcast(ud, &g6, 0) == 0, "UD attach ff0e::77");
	T_OK(ibv_attach_mcast(ud, &g4, 0) == 0, "attach the same group again: no-op");
	T_OK(ibv_attach_mcast(rc, &g4, 0) == EINVAL, "RC attach -> EINVAL");
	T_OK(ibv_attach_mcast(uc, &g4, 0) == EINVAL, "UC attach -> EINVAL");
	T_OK(ibv_attach_mcast(ud, &uni, 0) == EINVAL, "unicast GID -> EINVAL");
	gid_v4(&g, 0xf0000001);             /* 240.0.0.1: class E, not multicast */
	T_OK(ibv_attach_mcast(ud, &g, 0) == EINVAL, "::ffff:240.0.0.1 -> EINVAL");
	T_OK(ibv_detach_mcast(ud, &g4, 0) == 0, "detach 224.1.2.3");
	T_OK(ibv_detach_mcast(ud, &g4, 0) == EINVAL,
	     "detach again -> EINVAL (the duplicate attach added nothing)");
	gid_v4(&g, 0xe0000009);
	T_OK(ibv_detach_mcast(ud, &g, 0) == EINVAL, "detach a group never attached -> EINVAL");
	T_OK(ibv_detach_mcast(rc, &g6, 0) == EINVAL, "detach on RC -> EINVAL");
	T_OK(ibv_detach_mcast(ud, &g6, 0) == 0, "detach ff0e::77");

	/* groups per QP */
	ret = 0;
	for (i = 0; i < 200 && ret == 0; i++) {
		gid_v4(&g, 0xe0100000 + (uint32_t)i);
		ret = ibv_attach_mcast(ud, &g, 0);
	}
	n = i - 1;
	T_OK(ret == ENOMEM && n >= 1, "groups per QP bounded: %d attached, then ENOMEM", n);
	T_OK(ibv_detach_mcast(ud, &g, 0) == EINVAL, "the refused group is not attached");
	gid_v4(&g, 0xe0100000);
	T_OK(ibv_detach_mcast(ud, &g, 0) == 0 && ibv_attach_mcast(ud, &g, 0) == 0,
	     "detach one frees a slot for another attach");

	/* QPs per group: max_mcast_qp_attach */
	n = 0;
	ret = 0;
	memset(qps, 0, sizeof(qps));
	for (i = 0; i < MAX_QPS && ret == 0; i++) {
		qps[i] = t_qp_create(pd, cq, IBV_QPT_UD, 1);
		if (!qps[i])
			break;
		ret = ibv_attach_mcast(qps[i], &g6, 0);
		n += ret == 0;
	}
	T_OK(ret == ENOMEM && n == da.max_mcast_qp_attach,
	     "QPs per group = max_mcast_qp_attach (%d of %d), then ENOMEM", n,
	     da.max_mcast_qp_attach);
	T_OK(ibv_destroy_qp(qps[0]) == 0, "destroy an attached QP");
	qps[0] = NULL;
	T_OK(ibv_attach_mcast(qps[n], &g6, 0) == 0,
	     "its place in the group is free again (destroy detached it)");
	for (i = 0; i < MAX_QPS; i++)
		if (qps[i])
			ibv_destroy_qp(qps[i]);

	T_OK(ibv_destroy_qp(ud) == 0, "destroy a UD QP still attached to its groups");
	ibv_destroy_qp(rc);
	ibv_destroy_qp(uc);
	ibv_destroy_cq(cq);
	T_OK(ibv_dealloc_pd(pd) == 0, "PD free");
	ibv_close_device(ctx);
	t_lo_free();
	return t_summary();
}
