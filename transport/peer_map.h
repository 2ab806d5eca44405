/* transport/peer_map: this process's view of same-host peers' memory, for
 * the direct path (transport/direct.c).  A peer is one context of another
 * process (or of this one): its MR directory (verbs/mr_dir.h) mapped
 * read-only, the memfds backing its MRs mapped read-write, and, where
 * there is no memfd, process_vm_readv/writev at the owner's addresses.
 *
 * Everything here is a slow path (open, mmap, fstat) except the helpers
 * marked hot.  Peers are shared by every QP of the process and
 * refcounted; so is each memfd mapping.
 */
#ifndef TRANSPORT_PEER_MAP_H
#define TRANSPORT_PEER_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "verbs/mr_dir.h"

struct peer;
struct peer_memfd;

/* The peer context (pid, MR directory nonce), referenced: maps its MR
 * directory on first use, unmaps everything at the last put.  NULL if it
 * has no directory (yet) or it is gone. */
struct peer *peer_get(int pid, uint32_t nonce);
void peer_put(struct peer *p);

/* The pipe of one of the peer's completion channels (verbs/comp_channel.c),
 * named by a CQ ring as /proc/pid/fd/pfd, a FIFO of inode ino, opened here
 * to write into (only): the fd (the peer's: valid while it is held); a
 * write never raises SIGPIPE (we hold a read end too), or -1 (not
 * this peer's pid, not that pipe, no access, or PEER_WAKES open already).
 * A ring is never trusted blindly: nothing but that FIFO is opened. */
enum { PEER_WAKES = 8 };
int peer_wake_fd(struct peer *p, int32_t pid, int32_t pfd, uint64_t ino);
/* What peer_wake_fd opens: /proc/pid/fd/pfd if it is a FIFO of inode ino
 * (looked at with stat first: nothing else is ever opened), non-blocking,
 * or -1. */
int peer_pipe_open(int pid, int32_t pfd, uint64_t ino);

/* True if the peer is this process (its addresses are ours). */
bool peer_is_self(const struct peer *p);

/* False once the peer's process has exited: one load of its life page's
 * word (net/life.h) or, where it published none, a poll on its pidfd (a
 * system call: callers rate-limit it). */
bool peer_alive(struct peer *p);
/* The life page's word (hot: net_life_alive on it), or NULL: the peer is
 * this process, or has none. */
const _Atomic uint32_t *peer_life(const struct peer *p);

/* The entry of key in the peer's MR directory (key & the mask it
 * publishes; remapping if it grew), or NULL if there is no such slot.
 * The entry may hold another key: the caller compares. */
const struct srn_mrdir_entry *peer_mr_entry(struct peer *p, uint32_t key);

/* Consistent copy of e under its seqlock: true and *seq = its generation;
 * false if the owner kept rewriting it. */
bool peer_mr_snapshot(const struct srn_mrdir_entry *e, struct srn_mrdir_entry *out,
		      uint32_t *seq);

/* Hot: the generation of e now (compare with a snapshot's). */
static inline uint32_t peer_mr_gen(const struct srn_mrdir_entry *e)
{
	return atomic_load_explicit(&((struct srn_mrdir_entry *)e)->seq,
				    memory_order_acquire);
}

/* The peer's memfd (its fd number memfd, inode ino) mapped read-write in
 * this process, referenced: *base and *size; NULL if it cannot be mapped
 * (then the process_vm_* calls below are the way).  The mapping is shared
 * by every holder and goes at the last peer_unmap_memfd: holding it keeps
 * the peer's memory allocated, so holders let go when the MR changes. */
struct peer_memfd *peer_map_memfd(struct peer *p, int memfd, uint64_t ino, char **base,
				  uint64_t *size);
void peer_unmap_memfd(struct peer *p, struct peer_memfd *m);

/* False once process_vm_* proved impossible for this peer (ptrace rules,
 * seccomp): the direct path then leaves unmapped memory to packets. */
bool peer_vm_usable(const struct peer *p);

/* Copy between local iovecs and the peer's [addr, addr+len).  0, or -1
 * (nothing can be assumed about the target range; the caller falls back
 * to the packet path, which rewrites it all). */
int peer_vm_write(struct peer *p, uint64_t addr, const struct iovec *iov, int n,
		  size_t len);
int peer_vm_read(struct peer *p, uint64_t addr, const struct iovec *iov, int n,
		 size_t len);
/* The same into the peer's ranges to[0..nt) (their total = iov's). */
int peer_vm_writev(struct peer *p, const struct iovec *iov, int n, const struct iovec *to,
		   int nt);
/* Has process_vm_* worked with p?  If not yet, tries a read of one byte
 * at addr (the peer's) and says whether that worked. */
bool peer_vm_proven(struct peer *p, uint64_t addr);

#endif
