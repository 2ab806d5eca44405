/* srn_ops_init_unsupported() fills every function slot of a verbs_context
 * (and of its ibv_context_ops) and each slot fails by its convention:
 * EOPNOTSUPP, NULL + errno, negative for poll_cq, *bad_wr for posts. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tests/lib/t_util.h"
#include "verbs/srn.h"

/* The unit under test is compiled into this test: in the static archive a
 * weak placeholder of srn_ops_init_unsupported (verbs/context.c) could be
 * picked before verbs/unsupported.c, since archive members are chosen by
 * the first definition of a name, weak or not. */
#include "verbs/unsupported.c"

int main(void)
{
	static struct verbs_context v; /* zeroed: every slot starts NULL */
	struct ibv_context *c = &v.context;
	struct ibv_send_wr swr = { 0 }, *bad_s = NULL;
	struct ibv_recv_wr rwr = { 0 }, *bad_r = NULL;
	struct ibv_ops_wr owr = { 0 }, *bad_o = NULL;
	struct ibv_wc wc;
	size_t nslots = 0;

	srn_ops_init_unsupported(&v);

	printf("every ibv_context_ops slot is filled\n");
	{
		void **slot = (void **)&c->ops;
		size_t n = sizeof(c->ops) / sizeof(void *);

		for (size_t i = 0; i < n; i++, nslots++)
			T_CHECK(slot[i] != NULL, "ibv_context_ops slot %zu is NULL", i);
	}

	printf("every verbs_context function slot is filled\n");
	{
		/* Function slots run from the start to _ABI_placeholder3; priv
		 * is the one data pointer among them. */
		void **slot = (void **)&v;
		size_t n = offsetof(struct verbs_context, _ABI_placeholder3) / sizeof(void *);
		size_t priv = offsetof(struct verbs_context, priv) / sizeof(void *);

		for (size_t i = 0; i < n; i++) {
			if (i == priv)
				continue;
			nslots++;
			T_CHECK(slot[i] != NULL, "verbs_context slot %zu is NULL", i);
		}
	}
	printf("  %zu slots checked\n", nslots);

	printf("extended-context marker and size are set\n");
	T_CHECK(c->abi_compat == __VERBS_ABI_IS_EXTENDED, "abi_compat");
	T_CHECK(v.sz == sizeof(v), "sz");
	T_CHECK(verbs_get_ctx(c) == &v, "verbs_get_ctx");

	printf("conventions: poll_cq negative, post_* set *bad_wr, ctors NULL+errno\n");
	T_CHECK(c->ops.poll_cq(NULL, 1, &wc) < 0, "poll_cq negative");
	T_CHECK(c->ops.post_send(NULL, &swr, &bad_s) == EOPNOTSUPP && bad_s == &swr, "post_send");
	T_CHECK(c->ops.post_recv(NULL, &rwr, &bad_r) == EOPNOTSUPP && bad_r == &rwr, "post_recv");
	bad_r = NULL;
	T_CHECK(c->ops.post_srq_recv(NULL, &rwr, &bad_r) == EOPNOTSUPP && bad_r == &rwr,
		"post_srq_recv");
	T_CHECK(v.post_srq_ops(NULL, &owr, &bad_o) == EOPNOTSUPP && bad_o == &owr, "post_srq_ops");
	T_CHECK(c->ops.req_notify_cq(NULL, 0) == EOPNOTSUPP, "req_notify_cq");
	errno = 0;
	T_CHECK(c->ops.alloc_mw(NULL, IBV_MW_TYPE_1) == NULL && errno == EOPNOTSUPP, "alloc_mw");
	errno = 0;
	T_CHECK(v.create_qp_ex(c, NULL) == NULL && errno == EOPNOTSUPP, "create_qp_ex");
	errno = 0;
	T_CHECK(v.open_xrcd(c, NULL) == NULL && errno == EOPNOTSUPP, "open_xrcd");
	T_CHECK(v.close_xrcd(NULL) == EOPNOTSUPP, "close_xrcd");
	T_CHECK(v.query_device_ex(c, NULL, NULL, 0) == EOPNOTSUPP, "query_device_ex");
	T_CHECK(v.query_port(c, 1, NULL, 0) == EOPNOTSUPP, "query_port");
	T_CHECK(v.modify_cq(NULL, NULL) == EOPNOTSUPP, "modify_cq");

	return t_summary();
}
