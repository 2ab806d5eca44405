/* verbs/span_set: the sorted set mr_share.c finds backings in.  Against
 * a plain array searched linearly, over random adds and deletes of
 * disjoint spans: the first span ending after an address, and the set
 * kept sorted. */
#include "verbs/span_set.h"

#include <stdbool.h>

#include "tests/lib/t_util.h"

enum { SLOTS = 512, ROUNDS = 20000 };

/* Slot k is the span [k * 16 + 4, k * 16 + 12): disjoint, gaps between. */
static uintptr_t lo_of(int k) { return (uintptr_t)k * 16 + 4; }
static uintptr_t hi_of(int k) { return (uintptr_t)k * 16 + 12; }

int main(void)
{
	struct srn_span_set s = { 0 };
	static bool in[SLOTS];
	int n = 0;

	t_rand_seed(24);
	for (int r = 0; r < ROUNDS; r++) {
		int k = (int)(t_rand() % SLOTS);

		if (in[k]) {
			srn_span_del(&s, lo_of(k));
			in[k] = false;
			n--;
		} else {
			T_CHECK(srn_span_add(&s, lo_of(k), hi_of(k), &in[k]) == 0, "add %d", k);
			in[k] = true;
			n++;
		}
		T_CHECK(s.n == (size_t)n, "round %d: %zu spans, want %d", r, s.n, n);
		/* an address in a gap, at a span's start, inside, at its end */
		uintptr_t a = (uintptr_t)(t_rand() % (SLOTS * 16 + 8));
		size_t i = srn_span_first_after(&s, a);
		int want = -1;

		for (int j = 0; j < SLOTS && want < 0; j++)
			if (in[j] && hi_of(j) > a)
				want = j;
		if (want < 0)
			T_CHECK(i == s.n, "round %d: nothing ends after %lu, got index %zu", r,
				(unsigned long)a, i);
		else
			T_CHECK(i < s.n && s.v[i].lo == lo_of(want) && s.v[i].obj == &in[want],
				"round %d: first span after %lu is slot %d", r, (unsigned long)a,
				want);
	}
	for (size_t i = 1; i < s.n; i++)
		T_CHECK(s.v[i - 1].hi <= s.v[i].lo, "sorted and disjoint at %zu", i);
	srn_span_del(&s, 3); /* not a span's start: nothing happens */
	T_CHECK(s.n == (size_t)n, "deleting an unknown start changes nothing");
	srn_span_clear(&s);
	T_CHECK(s.n == 0 && s.v == NULL, "cleared");
	printf("%d rounds, %d spans at the end\n", ROUNDS, n);
	return t_summary();
}
