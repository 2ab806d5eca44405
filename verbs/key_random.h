/* verbs/key_random: unpredictable bits for MR keys (verbs/mr.c).  A key is
 * the only thing a remote peer must present to write our memory, so its
 * free bits come from the kernel's CSPRNG (getrandom), drawn in blocks
 * into a per-process pool: registration does not pay a system call per
 * key.  The pool is dropped in a fork()ed child, which must not hand out
 * the keys its parent will. */
#ifndef VERBS_KEY_RANDOM_H
#define VERBS_KEY_RANDOM_H

#include <stdbool.h>
#include <stdint.h>

/* 32 random bits into *out: true, or false when the kernel gives none
 * (getrandom and /dev/urandom both failed). */
bool srn_key_random32(uint32_t *out);

#endif
