/* tests/fuzz: fields pulled out of a fuzz input in order, big-endian,
 * zeros once it runs dry (so every input is a complete script). */
#ifndef TESTS_FUZZ_CURSOR_H
#define TESTS_FUZZ_CURSOR_H

#include <stddef.h>
#include <stdint.h>

struct cursor {
	const uint8_t *p;
	size_t n;
};

static inline uint64_t take(struct cursor *c, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes; i++) {
		v = v << 8 | (c->n ? *c->p : 0);
		if (c->n) {
			c->p++;
			c->n--;
		}
	}
	return v;
}

#endif
