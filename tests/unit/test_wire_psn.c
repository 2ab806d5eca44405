/* 24-bit PSN arithmetic: addition wraps at 2^24, the signed distance is
 * right across the wrap and at the edges of the half circle. */
#include <stdio.h>

#include "tests/lib/t_util.h"
#include "wire/wire.h"

int main(void)
{
	t_rand_seed(88172645463325252ull);

	printf("fixed cases: wrap, half circle\n");
	T_CHECK(wire_psn_add(0xffffff, 1) == 0, "add wraps");
	T_CHECK(wire_psn_add(0xfffffe, 5) == 3, "add wraps by 5");
	T_CHECK(wire_psn_add(7, 0) == 7, "add 0");
	T_CHECK(wire_psn_diff(0, 0xffffff) == 1, "0 is after 0xffffff");
	T_CHECK(wire_psn_diff(0xffffff, 0) == -1, "0xffffff is before 0");
	T_CHECK(wire_psn_diff(5, 3) == 2 && wire_psn_diff(3, 5) == -2, "small");
	T_CHECK(wire_psn_diff(9, 9) == 0, "equal");
	T_CHECK(wire_psn_diff(0x7fffff, 0) == 0x7fffff, "largest positive");
	T_CHECK(wire_psn_diff(0x800000, 0) == -0x800000, "half circle counts as behind");
	T_CHECK(wire_psn_diff(0, 0x800001) == 0x7fffff, "across the wrap, positive");
	T_CHECK(wire_psn_diff(2, 0xfffffe) == 4, "across the wrap");

	printf("1e6 random cases: diff(add(a, n), a) == n for |n| < 2^23\n");
	for (int i = 0; i < 1000000; i++) {
		uint64_t rng = t_rand64();
		int32_t n;
		uint32_t a, b;

		a = (uint32_t)rng & WIRE_PSN_MASK;
		n = (int32_t)((rng >> 24) % 0xffffff) - 0x7fffff; /* -2^23+1 .. 2^23-1 */
		b = wire_psn_add(a, (uint32_t)n);
		T_CHECK(b <= WIRE_PSN_MASK, "add stays in 24 bits");
		T_CHECK(wire_psn_diff(b, a) == n, "diff(add(%u, %d), ...) = %d", a, n,
			wire_psn_diff(b, a));
		T_CHECK(wire_psn_diff(a, b) == -n, "antisymmetric");
	}
	return t_summary();
}
