/* Raw packet QPs: creating one needs CAP_NET_RAW, as on hardware (the
 * kernel's EPERM), and softrnic, which has no raw Ethernet path, then
 * answers EOPNOTSUPP.  Both ways (ibv_create_qp, ibv_create_qp_ex) are
 * tried with CAP_NET_RAW in the effective set and without it: a process
 * that has it drops it for the second half (and takes it back); one that
 * has not checks EPERM only and says so. */
#include <errno.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/lib/t_verbs.h"

/* CAP_NET_RAW on (true) or off in this thread's effective set; returns
 * whether it is now as asked. */
static bool net_raw(bool on)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = { { 0 } };
	uint32_t bit = 1u << (CAP_NET_RAW % 32);

	if (syscall(SYS_capget, &h, d))
		return false;
	if (on && !(d[CAP_NET_RAW / 32].permitted & bit))
		return false;
	if (on)
		d[CAP_NET_RAW / 32].effective |= bit;
	else
		d[CAP_NET_RAW / 32].effective &= ~bit;
	return syscall(SYS_capset, &h, d) == 0;
}

static bool has_net_raw(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = { { 0 } };

	return !syscall(SYS_capget, &h, d) &&
	       (d[CAP_NET_RAW / 32].effective >> (CAP_NET_RAW % 32) & 1);
}

static void try_raw(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, int want,
		    const char *how)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RAW_PACKET,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_init_attr_ex ix = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RAW_PACKET,
		.cap = ia.cap, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
	};
	struct ibv_qp *qp;

	errno = 0;
	qp = ibv_create_qp(pd, &ia);
	T_CHECK(!qp && errno == want, "%s: ibv_create_qp raw: %p errno %d, want %d", how,
		(void *)qp, errno, want);
	if (qp)
		ibv_destroy_qp(qp);
	errno = 0;
	qp = ibv_create_qp_ex(ctx, &ix);
	T_CHECK(!qp && errno == want, "%s: ibv_create_qp_ex raw: %p errno %d, want %d", how,
		(void *)qp, errno, want);
	if (qp)
		ibv_destroy_qp(qp);
	printf("%s: raw packet QP refused with %s\n", how, want == EPERM ? "EPERM" : "EOPNOTSUPP");
}

int main(void)
{
	struct ibv_context *ctx = t_lo_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);

	T_ASSERT(pd && cq, "PD, CQ");
	if (has_net_raw()) {
		try_raw(ctx, pd, cq, EOPNOTSUPP, "with CAP_NET_RAW");
		T_ASSERT(net_raw(false) && !has_net_raw(), "drop CAP_NET_RAW");
		try_raw(ctx, pd, cq, EPERM, "without CAP_NET_RAW");
		T_CHECK(net_raw(true) && has_net_raw(), "take CAP_NET_RAW back");
	} else {
		try_raw(ctx, pd, cq, EPERM, "without CAP_NET_RAW");
		printf("note: no CAP_NET_RAW here; the EOPNOTSUPP half needs it\n");
	}
	/* an ordinary QP is unaffected by either */
	{
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};
		struct ibv_qp *qp = ibv_create_qp(pd, &ia);

		T_CHECK(qp != NULL, "UD QP: %s", qp ? "ok" : strerror(errno));
		if (qp)
			ibv_destroy_qp(qp);
	}
	T_CHECK(!ibv_destroy_cq(cq) && !ibv_dealloc_pd(pd), "destroy");
	T_CHECK(!ibv_close_device(ctx), "close");
	t_lo_free();
	return t_summary();
}
