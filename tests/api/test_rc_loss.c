/* RC recovery: the same opcode x size matrix as test_rc_basic, with the
 * test hook in net/udp.c dropping 2% and duplicating 2% of all packets
 * (requests, ACKs, read responses, atomic ACKs).  Go-back-N, PSN-sequence
 * NAKs, read re-requests, duplicate detection and the atomic replay cache
 * must deliver every byte exactly once. */
#include "t_rc.h"

int main(void)
{
	struct t_end a, b;
	struct t_conn ia, ib;

	setvbuf(stdout, NULL, _IONBF, 0);
	alarm(200);
	setenv("SOFTRNIC_TEST_DROP", getenv("T_DROP") ? getenv("T_DROP") : "20", 1);
	setenv("SOFTRNIC_TEST_DUP", "20", 1);
	if (t_end_init(&a) || t_end_init(&b)) {
		printf("SKIP: srn_lo or a verb it needs is not available\n");
		return 77;
	}
	ia = t_info(&a, 0x10);
	ib = t_info(&b, 0xffff00);
	/* timeout 14 = 67 ms: lost tails are recovered by the timer, and 8
	 * timeouts in a row (retry_cnt 7) outlast a responder starved of CPU
	 * on a loaded host */
	CHECK(!t_connect(&a, 0x10, &ib, 14, 7, 7) && !t_connect(&b, 0xffff00, &ia, 14, 7, 7),
	      "connect");
	printf("2%% loss + 2%% duplication on every packet\n");
	run_ops(&a, &b, &ib, "lossy a->b");
	run_ops(&b, &a, &ia, "lossy b->a");
	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
