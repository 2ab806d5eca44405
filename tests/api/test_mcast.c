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

static int fails, checks;

#define CHECK(cond, ...) do {                                         \
	checks++;                                                      \
	if (cond) {                                                    \
		printf("ok   - " __VA_ARGS__);                         \
	} else {                                                       \
		fails++;                                               \
		printf("FAIL - " __VA_ARGS__);                         \
		printf("       (%s:%d: %s)\n", __FILE__, __LINE__, #cond); \
	}                                                              \
	printf("\n");                                                  \
} while (0)

#define MAX_QPS 80

static void gid_v4(union ibv_gid *g, uint32_t ip)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	ip = htonl(ip);
	memcpy(g->raw + 12, &ip, 4);
}

static struct ibv_qp *mk_qp(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = t,
		.cap = { .max_send_wr = 1, .max_send_sge = 1,
			 .max_recv_wr = 1, .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &ia);
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_device_attr da;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *ud, *rc, *uc, *qps[MAX_QPS];
	union ibv_gid g4, g6, uni, g;
	int i, n, ret;

	setenv("SOFTRNIC_DEVICES", "lo", 1);
	list = ibv_get_device_list(NULL);
	ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	if (!ctx) {
		printf("SKIP: no device\n");
		return 77;
	}
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	ud = mk_qp(pd, cq, IBV_QPT_UD);
	rc = mk_qp(pd, cq, IBV_QPT_RC);
	uc = mk_qp(pd, cq, IBV_QPT_UC);
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

	CHECK(ibv_attach_mcast(ud, &g4, 0) == 0, "UD attach ::ffff:224.1.2.3");
	CHECK(ibv_attach_mcast(ud, &g6, 0) == 0, "UD attach ff0e::77");
	CHECK(ibv_attach_mcast(ud, &g4, 0) == 0, "attach the same group again: no-op");
	CHECK(ibv_attach_mcast(rc, &g4, 0) == EINVAL, "RC attach -> EINVAL");
	CHECK(ibv_attach_mcast(uc, &g4, 0) == EINVAL, "UC attach -> EINVAL");
	CHECK(ibv_attach_mcast(ud, &uni, 0) == EINVAL, "unicast GID -> EINVAL");
	gid_v4(&g, 0xf0000001);             /* 240.0.0.1: class E, not multicast */
	CHECK(ibv_attach_mcast(ud, &g, 0) == EINVAL, "::ffff:240.0.0.1 -> EINVAL");
	CHECK(ibv_detach_mcast(ud, &g4, 0) == 0, "detach 224.1.2.3");
	CHECK(ibv_detach_mcast(ud, &g4, 0) == EINVAL,
	      "detach again -> EINVAL (the duplicate attach added nothing)");
	gid_v4(&g, 0xe0000009);
	CHECK(ibv_detach_mcast(ud, &g, 0) == EINVAL, "detach a group never attached -> EINVAL");
	CHECK(ibv_detach_mcast(rc, &g6, 0) == EINVAL, "detach on RC -> EINVAL");
	CHECK(ibv_detach_mcast(ud, &g6, 0) == 0, "detach ff0e::77");

	/* groups per QP */
	ret = 0;
	for (i = 0; i < 200 && ret == 0; i++) {
		gid_v4(&g, 0xe0100000 + (uint32_t)i);
		ret = ibv_attach_mcast(ud, &g, 0);
	}
	n = i - 1;
	CHECK(ret == ENOMEM && n >= 1, "groups per QP bounded: %d attached, then ENOMEM", n);
	CHECK(ibv_detach_mcast(ud, &g, 0) == EINVAL, "the refused group is not attached");
	gid_v4(&g, 0xe0100000);
	CHECK(ibv_detach_mcast(ud, &g, 0) == 0 && ibv_attach_mcast(ud, &g, 0) == 0,
	      "detach one frees a slot for another attach");

	/* QPs per group: max_mcast_qp_attach */
	n = 0;
	ret = 0;
	memset(qps, 0, sizeof(qps));
	for (i = 0; i < MAX_QPS && ret == 0; i++) {
		qps[i] = mk_qp(pd, cq, IBV_QPT_UD);
		if (!qps[i])
			break;
		ret = ibv_attach_mcast(qps[i], &g6, 0);
		n += ret == 0;
	}
	CHECK(ret == ENOMEM && n == da.max_mcast_qp_attach,
	      "QPs per group = max_mcast_qp_attach (%d of %d), then ENOMEM", n,
	      da.max_mcast_qp_attach);
	CHECK(ibv_destroy_qp(qps[0]) == 0, "destroy an attached QP");
	qps[0] = NULL;
	CHECK(ibv_attach_mcast(qps[n], &g6, 0) == 0,
	      "its place in the group is free again (destroy detached it)");
	for (i = 0; i < MAX_QPS; i++)
		if (qps[i])
			ibv_destroy_qp(qps[i]);

	CHECK(ibv_destroy_qp(ud) == 0, "destroy a UD QP still attached to its groups");
	ibv_destroy_qp(rc);
	ibv_destroy_qp(uc);
	ibv_destroy_cq(cq);
	CHECK(ibv_dealloc_pd(pd) == 0, "PD free");
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("%d/%d checks passed\n", checks - fails, checks);
	return fails ? 1 : 0;
}
