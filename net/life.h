/* net/life: a word in shared memory that says, with one load and no system
 * call, whether a same-host peer process is still alive.
 *
 * Each process that publishes memory to peers owns one small memfd, its
 * life page.  A thread of its own (started once per process, signals
 * blocked, asleep forever) registers the page's word in the kernel's
 * robust-futex list for that thread and writes its thread id into it.
 * When that thread ends (the process exits, is killed, or execs), the
 * kernel itself rewrites the word: thread id cleared, FUTEX_OWNER_DIED
 * set, before the process's parent can reap it.  A peer that maps the
 * page reads the word on every operation: a dead process's memory, still
 * mapped by the peer, can no longer pass for a live QP's.
 */
#ifndef NET_LIFE_H
#define NET_LIFE_H

#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* This process's life page: its fd and inode, for peers to open as
 * /proc/<pid>/fd/<fd>.  Created (and its thread started) on the first
 * call in each process (a fork child gets its own).  0, or -errno. */
int net_life_publish(int32_t *fd, uint64_t *ino);

/* Maps pid's life page (fd, ino as it published them), read-only: the
 * word, or NULL (not that file, no access, pid gone). */
const _Atomic uint32_t *net_life_map(int pid, int32_t fd, uint64_t ino);
void net_life_unmap(const _Atomic uint32_t *word);

/* Hot: false once the owner process is gone. */
static inline bool net_life_alive(const _Atomic uint32_t *word)
{
	uint32_t w = atomic_load_explicit(word, memory_order_acquire);

	return (w & FUTEX_TID_MASK) != 0 && !(w & FUTEX_OWNER_DIED);
}

#endif
