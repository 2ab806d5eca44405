/* fork() support state (verbs/fork.c). */
#ifndef SRN_FORK_H
#define SRN_FORK_H

#include <stdbool.h>

/* True once the application called ibv_fork_init() (or set RDMAV_FORK_SAFE
 * / IBV_FORK_SAFE): it intends to fork while memory is registered.  An MR
 * scheme that changes how registered pages behave across fork (e.g.
 * re-backing them with shared memory) must consult this. */
bool srn_fork_requested(void);

#endif
