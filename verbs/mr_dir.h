/* verbs/mr_dir: a context's MR directory, published in shared memory so
 * that a same-host peer can check an rkey and reach the memory itself
 * (docs/same-host.md; the shared-memory path of transport/direct.c).
 *
 * One file per context, /dev/shm/softrnic-mrdir-<pid>-<nonce> (nonce:
 * srn_context.mrdir_nonce, random), written only by its owner, mapped
 * read-only by peers.  The entry of an MR is at index key & mask, its
 * slot in the owner's MR table (verbs/mr.c).  mask grows with that table:
 * the owner first writes the entries that move at their new index, then
 * publishes the new mask, then clears the old entries; so a reader whose
 * entry no longer holds its key reads mask again and, if it changed,
 * looks once more.  Peers read an entry under its seqlock: read seq
 * (even), copy the fields, re-read seq; if it changed or is odd, the
 * entry was being rewritten: retry or give up. */
#ifndef VERBS_MR_DIR_H
#define VERBS_MR_DIR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define SRN_MRDIR_MAGIC 0x52444d53u  /* "SMDR" */
#define SRN_MRDIR_VERSION 4u

struct srn_mrdir_hdr {
	uint32_t magic, version;
	int32_t pid;                 /* owner */
	uint32_t nslots;             /* entries that follow */
	int32_t life_fd;             /* owner's life page (net/life.h), */
	_Atomic uint32_t mask;       /* an MR's entry: key & mask */
	uint64_t life_ino;           /* -1 / 0: none */
	uint8_t pad[32];             /* entries start on a cache line */
};

struct srn_mrdir_entry {
	_Atomic uint32_t seq;        /* odd while the owner rewrites it */
	uint32_t key;                /* lkey == rkey; 0 = no MR */
	uint32_t pd_handle;          /* srn_pd.ibv.handle (unique per process) */
	uint32_t access;             /* IBV_ACCESS_* */
	uint64_t iova;               /* first address peers use */
	uint64_t length;
	uint64_t vaddr;              /* owner's address of iova's byte
				      * (process_vm_readv/writev) */
	int32_t memfd;               /* owner's fd backing the MR, -1: none
				      * (then only process_vm_* reaches it) */
	uint16_t map_head, map_tail; /* bytes at the MR's start and end that
				      * the memfd does not hold (in an edge
				      * page shared with other data; less
				      * than a page each) */
	uint64_t memfd_ino;          /* st_ino of that memfd: a reused fd
				      * number never matches a stale cache */
	uint64_t memfd_off;          /* offset in the memfd of the byte at
				      * iova + map_head */
};

/* "/dev/shm/softrnic-mrdir-<pid>-<nonce>" into buf (>= 64 bytes). */
static inline void srn_mrdir_name(char *buf, size_t size, int pid, uint32_t nonce)
{
	snprintf(buf, size, "/dev/shm/softrnic-mrdir-%d-%08x", pid, nonce);
}

/* Owner side (verbs/mr_dir.c). */
struct srn_context;
struct srn_mr;

/* Creates the context's directory (ctx->mrdir; NULL under
 * SOFTRNIC_TRANSPORT=udp or on failure).  0 or -errno; a failure is not
 * fatal: peers then take the UDP path. */
int srn_mrdir_open(struct srn_context *ctx);
/* Unmaps and removes it (a no-op when there is none). */
void srn_mrdir_close(struct srn_context *ctx);
/* True when this process publishes ctx's MRs (a directory exists and is
 * ours, not a fork parent's): only then is sharing an MR worth its cost. */
bool srn_mrdir_active(const struct srn_context *ctx);
/* Writes mr's entry (after registration or any change to it). */
void srn_mrdir_publish(struct srn_context *ctx, const struct srn_mr *mr);
/* Clears mr's entry (key 0), before the MR goes away. */
void srn_mrdir_retract(struct srn_context *ctx, const struct srn_mr *mr);
/* The MR table grew to mask + 1 slots: entries move (ctx->lock held). */
void srn_mrdir_resize(struct srn_context *ctx, uint32_t mask);

#endif
