/* verbs/mr_share: registered memory that a same-host peer can map (see
 * mr_share.c for how and for the hazards). */
#ifndef VERBS_MR_SHARE_H
#define VERBS_MR_SHARE_H

#include <stddef.h>
#include <stdint.h>

struct srn_mr_share;             /* one memfd backing, refcounted */

/* The backing of [addr, addr+len): takes one more reference on a backing
 * that already holds every page the range touches, else re-backs by a
 * memfd the pages the range covers whole (never an edge page it shares
 * with other data) when they are private anonymous memory within the
 * size limit.  NULL when the range stays unshared (never an error for
 * the registration).  srn_mr_share_span says which part is shared. */
struct srn_mr_share *srn_mr_share_get(void *addr, size_t len);

/* Drops a reference from srn_mr_share_get (NULL is a no-op).  The last
 * one gives the range back as private anonymous memory, contents kept,
 * if it is still mapped to the memfd, and frees its window there. */
void srn_mr_share_put(struct srn_mr_share *s);

/* The process's memfd (one for every backing; -1 for a backing a fork
 * child inherited), its inode, and the offset in it of this process's
 * address vaddr (inside the backing). */
int srn_mr_share_fd(const struct srn_mr_share *s);
uint64_t srn_mr_share_ino(const struct srn_mr_share *s);
uint64_t srn_mr_share_offset(const struct srn_mr_share *s, uintptr_t vaddr);

/* The part of [vaddr, vaddr+len) that s holds: its length (0: none),
 * and in *head how many bytes of the range come before it. */
uint64_t srn_mr_share_span(const struct srn_mr_share *s, uintptr_t vaddr, uint64_t len,
			   uint64_t *head);

#endif
