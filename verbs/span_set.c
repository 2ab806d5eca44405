/* verbs/span_set: see span_set.h. */
#include "verbs/span_set.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

size_t srn_span_first_after(const struct srn_span_set *s, uintptr_t addr)
{
	size_t lo = 0, hi = s->n;

	/* spans are disjoint and sorted, so their ends are sorted too */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->v[mid].hi > addr)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

int srn_span_add(struct srn_span_set *s, uintptr_t lo, uintptr_t hi, void *obj)
{
	size_t i = srn_span_first_after(s, lo);

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct srn_span *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(*s->v));
	s->v[i] = (struct srn_span){ .lo = lo, .hi = hi, .obj = obj };
	s->n++;
	return 0;
}

void srn_span_del(struct srn_span_set *s, uintptr_t lo)
{
	size_t i = srn_span_first_after(s, lo);

	if (i < s->n && s->v[i].lo == lo) {
		memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(*s->v));
		s->n--;
	}
}

void srn_span_clear(struct srn_span_set *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}
