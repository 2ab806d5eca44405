/* The messages tests/net/rc_stream_check moves: a header (magic, length,
 * sequence number, checksum) and a payload that is a pure function of
 * (seed, sequence number), so the receiver can regenerate and compare
 * every byte without keeping a copy.  The checksum is redundant with the
 * comparison on purpose: it tells a corrupted payload from a message that
 * is intact but not the one expected.  Header-only and static. */
#ifndef STREAM_MSG_H
#define STREAM_MSG_H

#include <stdint.h>
#include <string.h>

#define STREAM_MAGIC 0x5354524du /* "STRM" */

struct stream_hdr {
	uint32_t magic;
	uint32_t len;   /* whole message, header included */
	uint64_t seq;
	uint64_t sum;   /* over the payload, seeded with seq */
	uint64_t seed;
};

enum stream_verdict { STREAM_OK, STREAM_SHORT, STREAM_BAD_HDR, STREAM_BAD_SUM, STREAM_BAD_DATA };

/* xorshift64*: the payload's bytes, 8 at a time */
static inline uint64_t stream_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

static inline uint64_t stream_state(uint64_t seed, uint64_t seq)
{
	uint64_t s = seed ^ (seq * 0x9e3779b97f4a7c15ull);

	return s ? s : 1;
}

/* FNV-1a over 64-bit words (the tail zero-padded) */
static inline uint64_t stream_sum(const uint8_t *p, size_t n, uint64_t seq)
{
	uint64_t h = 0xcbf29ce484222325ull ^ seq, w;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
	}
	if (i < n) {
		w = 0;
		memcpy(&w, p + i, n - i);
		h = (h ^ w) * 0x100000001b3ull;
	}
	return h;
}

/* Writes message seq (len bytes, len >= sizeof(struct stream_hdr)) at buf. */
static inline void stream_fill(uint8_t *buf, uint32_t len, uint64_t seq, uint64_t seed)
{
	struct stream_hdr h = { .magic = STREAM_MAGIC, .len = len, .seq = seq, .seed = seed };
	uint8_t *p = buf + sizeof(h);
	size_t n = len - sizeof(h), i;
	uint64_t s = stream_state(seed, seq), w;

	for (i = 0; i + 8 <= n; i += 8) {
		w = stream_next(&s);
		memcpy(p + i, &w, 8);
	}
	if (i < n) {
		w = stream_next(&s);
		memcpy(p + i, &w, n - i);
	}
	h.sum = stream_sum(p, n, seq);
	memcpy(buf, &h, sizeof(h));
}

/* Checks the message of len bytes at buf; its sequence number in *seq
 * once the header is sound. */
static inline enum stream_verdict stream_check(const uint8_t *buf, uint32_t len, uint64_t seed,
					       uint64_t *seq)
{
	struct stream_hdr h;
	const uint8_t *p = buf + sizeof(h);
	size_t n, i;
	uint64_t s, w, v;

	if (len < sizeof(h))
		return STREAM_SHORT;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != STREAM_MAGIC || h.len != len || h.seed != seed)
		return STREAM_BAD_HDR;
	*seq = h.seq;
	n = len - sizeof(h);
	if (stream_sum(p, n, h.seq) != h.sum)
		return STREAM_BAD_SUM;
	s = stream_state(seed, h.seq);
	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&v, p + i, 8);
		if (v != stream_next(&s))
			return STREAM_BAD_DATA;
	}
	if (i < n) {
		w = stream_next(&s);
		if (memcmp(p + i, &w, n - i))
			return STREAM_BAD_DATA;
	}
	return STREAM_OK;
}

#endif
