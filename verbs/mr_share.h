/* verbs/mr_share: registered memory that a same-host peer can map (see
 * mr_share.c for how and for the hazards). */
#ifndef VERBS_MR_SHARE_H
#define VERBS_MR_SHARE_H

#include <stddef.h>
#include <stdint.h>

struct srn_mr_share;             /* one memfd backing, refcounted */

/* The backing of [addr, addr+len): re-backs it by a memfd when every page
 * is private anonymous memory within the size limit, or takes one more
 * reference on a backing that already holds the whole range.  NULL when
 * the range stays unshared (never an error for the registration). */
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

#endif
