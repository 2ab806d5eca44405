/* 24-bit PSN arithmetic: addition wraps at 2^24, the signed distance is
 * right across the wrap and at the edges of the half circle. */
#include <stdio.h>

#include "wire/wire.h"

static int failures;

#define CHECK(cond, ...)                                       \
	do {                                                   \
		if (!(cond)) {                                 \
			if (failures++ < 20) {                 \
				fprintf(stderr, "FAIL: " __VA_ARGS__); \
				fputc('\n', stderr);           \
			}                                      \
		}                                              \
	} while (0)

int main(void)
{
	uint64_t rng = 88172645463325252ull;

	printf("fixed cases: wrap, half circle\n");
	CHECK(wire_psn_add(0xffffff, 1) == 0, "add wraps");
	CHECK(wire_psn_add(0xfffffe, 5) == 3, "add wraps by 5");
	CHECK(wire_psn_add(7, 0) == 7, "add 0");
	CHECK(wire_psn_diff(0, 0xffffff) == 1, "0 is after 0xffffff");
	CHECK(wire_psn_diff(0xffffff, 0) == -1, "0xffffff is before 0");
	CHECK(wire_psn_diff(5, 3) == 2 && wire_psn_diff(3, 5) == -2, "small");
	CHECK(wire_psn_diff(9, 9) == 0, "equal");
	CHECK(wire_psn_diff(0x7fffff, 0) == 0x7fffff, "largest positive");
	CHECK(wire_psn_diff(0x800000, 0) == -0x800000, "half circle counts as behind");
	CHECK(wire_psn_diff(0, 0x800001) == 0x7fffff, "across the wrap, positive");
	CHECK(wire_psn_diff(2, 0xfffffe) == 4, "across the wrap");

	printf("1e6 random cases: diff(add(a, n), a) == n for |n| < 2^23\n");
	for (int i = 0; i < 1000000; i++) {
		int32_t n;
		uint32_t a, b;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		a = (uint32_t)rng & WIRE_PSN_MASK;
		n = (int32_t)((rng >> 24) % 0xffffff) - 0x7fffff; /* -2^23+1 .. 2^23-1 */
		b = wire_psn_add(a, (uint32_t)n);
		CHECK(b <= WIRE_PSN_MASK, "add stays in 24 bits");
		CHECK(wire_psn_diff(b, a) == n, "diff(add(%u, %d), ...) = %d", a, n,
		      wire_psn_diff(b, a));
		CHECK(wire_psn_diff(a, b) == -n, "antisymmetric");
	}
	printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
