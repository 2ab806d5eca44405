/* A sorted set of disjoint address spans [lo, hi), each naming an object:
 * the registered-memory backings (mr_share.c) are found by address in
 * O(log n) instead of a walk of every backing per registration. */
#ifndef SRN_SPAN_SET_H
#define SRN_SPAN_SET_H

#include <stddef.h>
#include <stdint.h>

struct srn_span {
	uintptr_t lo, hi;
	void *obj;
};

struct srn_span_set {
	struct srn_span *v;          /* sorted by lo; spans never overlap */
	size_t n, cap;
};

/* Adds [lo, hi) (overlapping no span of s).  0 or -ENOMEM. */
int srn_span_add(struct srn_span_set *s, uintptr_t lo, uintptr_t hi, void *obj);

/* Removes the span that starts at lo, if any. */
void srn_span_del(struct srn_span_set *s, uintptr_t lo);

/* Index of the first span ending after addr (s->n if none). */
size_t srn_span_first_after(const struct srn_span_set *s, uintptr_t addr);

/* Empties s (the objects are the caller's). */
void srn_span_clear(struct srn_span_set *s);

#endif
