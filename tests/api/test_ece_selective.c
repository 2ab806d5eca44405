/* ECE for selective retransmission (verbs/ece.c, transport/sr.c):
 * ibv_query_ece offers softrnic's tag with the SR option on an RC QP and
 * nothing on a UD QP; ibv_set_ece refuses NULLs and a comp_mask (EINVAL)
 * and options of softrnic's tag it does not know (EOPNOTSUPP), and takes
 * another vendor's ECE (which leaves go-back-N).  Then two QPs that both
 * set SR move every opcode of test_rc_basic's matrix one way with 2% of
 * all packets dropped and 2% duplicated (on the UDP path; the same-host
 * path loses nothing), every byte checked. */
#include "t_rc.h"

#include <errno.h>

enum { SRN_VENDOR = 0x53524e, SR_OPTION = 0x1 };

int main(void)
{
	struct t_end a, b, u;
	struct t_conn ib;
	struct ibv_ece e, sr = { .vendor_id = SRN_VENDOR, .options = SR_OPTION };
	struct ibv_ece other = { .vendor_id = 0x15b3, .options = 0x7 };
	struct ibv_ece bad = { .vendor_id = SRN_VENDOR, .options = 0x2 };
	struct ibv_ece masked = { .vendor_id = SRN_VENDOR, .comp_mask = 1 };

	setvbuf(stdout, NULL, _IONBF, 0);
	alarm(120);
	setenv("SOFTRNIC_TEST_DROP", "20", 1);
	setenv("SOFTRNIC_TEST_DUP", "20", 1);
	if (t_end_init(&a) || t_end_init(&b) || t_end_open(&u, IBV_QPT_UD)) {
		printf("SKIP: srn_lo or a verb it needs is not available\n");
		return 77;
	}
	memset(&e, 0xee, sizeof(e));
	CHECK(ibv_query_ece(a.qp, &e) == 0 && e.vendor_id == SRN_VENDOR &&
	      e.options == SR_OPTION && e.comp_mask == 0,
	      "query_ece on RC: vendor %#x options %#x", e.vendor_id, e.options);
	CHECK(ibv_query_ece(u.qp, &e) == 0 && e.vendor_id == SRN_VENDOR && e.options == 0,
	      "query_ece on UD: vendor %#x options %#x", e.vendor_id, e.options);
	CHECK(ibv_query_ece(a.qp, NULL) == EINVAL, "query_ece NULL");
	CHECK(ibv_set_ece(a.qp, NULL) == EINVAL, "set_ece NULL");
	CHECK(ibv_set_ece(a.qp, &masked) == EINVAL, "set_ece comp_mask");
	CHECK(ibv_set_ece(a.qp, &bad) == EOPNOTSUPP, "set_ece unknown option");
	CHECK(ibv_set_ece(a.qp, &other) == 0, "set_ece of another vendor");
	CHECK(ibv_set_ece(a.qp, &sr) == 0 && ibv_set_ece(b.qp, &sr) == 0, "set_ece SR");
	t_end_fini(&u);

	ib = t_info(&b, 0xfff000);
	{
		struct t_conn ia = t_info(&a, 0x20);

		/* timeout 14 = 67 ms, retry 7: as test_rc_loss */
		CHECK(!t_connect(&a, 0x20, &ib, 14, 7, 7) && !t_connect(&b, 0xfff000, &ia, 14, 7, 7),
		      "connect");
	}
	printf("SR negotiated; 2%% loss + 2%% duplication on every packet\n");
	run_ops(&a, &b, &ib, "SR a->b");
	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
