/* verbs/shared_rings: a CQ's completions and a QP's receive queue laid
 * out so that a same-host peer can deliver a SEND itself (docs/same-host.md;
 * host"; transport/direct_send.c): take the oldest posted receive WQE,
 * copy the message into its buffers, add the completion to the CQ.
 *
 * Both live in memory re-backed by the process's memfd (verbs/mr_share)
 * when the context publishes its MRs, so the peer maps them at an offset
 * the owner publishes with the QP (net_reg_qpinfo.rq_*); otherwise they
 * are plain private memory and only this process uses them.  Either way
 * the owner uses the same code, so both paths are the same rings.
 *
 * CQ: any number of producers (this process's engine and application
 * threads, a peer) reserve an entry with one compare-and-swap of prod,
 * write it, then publish it by storing its sequence number; the owner
 * consumes in order.  A reserved entry that ends up unused is published
 * with SRN_CQE_SKIP and stepped over.  Setting SRN_CQ_CLOSED in prod stops
 * new reservations (resize, destroy; a moment while a QP's reset turns its
 * completions into skipped entries).
 *
 * RQ: the owner's post_recv is the only producer (tail; each WQE's seq is
 * stored last); every taker (the owner's responder and flush, a peer)
 * copies the WQE at head out and then claims it with a compare-and-swap
 * of head: the copy is valid because an entry is rewritten only after
 * head has passed it.  A peer tells a posted WQE by its seq alone, so the
 * tail's cache line stays with the owner.  An SRQ is the same ring (its
 * producers serialised by the SRQ's lock); each QP on it has a ring of no
 * WQEs that names its own receive CQ and the SRQ's ring (srq_off).
 *
 * What a peer reads here is checked before use (sizes, SGE counts; keys
 * against the MR directory): a corrupt ring must not crash it.
 */
#ifndef VERBS_SHARED_RINGS_H
#define VERBS_SHARED_RINGS_H

#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/clock.h"
#include "verbs/srn.h"

struct srn_mr_share;

#define SRN_CQ_CLOSED (1ull << 63)
/* (a new layout gets a new magic: a peer running another build of the
 * library refuses the rings and sends packets) */
#define SRN_RINGS_MAGIC 0x354e5252u  /* "RRN5" */
#define SRN_RING_HOT_ALIGN 128

enum {
	SRN_CQE_SKIP = 1u << 0,      /* reserved, never used: step over it */
	SRN_CQE_PEER = 1u << 1,      /* written by a same-host peer */
};

struct srn_cqe_slot {
	_Atomic uint32_t seq;        /* low 32 bits of (index + 1) once written */
	uint32_t flags;              /* SRN_CQE_* */
	struct ibv_wc wc;
	uint32_t rq_head;            /* SRN_CQE_PEER: the RQ's head after the
				      * WQE of this completion was taken */
	uint32_t rq_tag;             /* SRN_CQE_PEER: that RQ ring's tag */
	uint8_t pad[64 - 16 - sizeof(struct ibv_wc)];
};
_Static_assert(sizeof(struct srn_cqe_slot) == 64, "one completion per cache line");

struct srn_cq_ring {
	uint32_t magic;
	uint32_t size;               /* entries, a power of two */
	_Atomic uint32_t armed;      /* the owner's ibv_req_notify_cq: 0, 1 any,
				      * 2 solicited only; whoever fires the
				      * channel for it takes it back to 0 with
				      * a compare-and-swap (one event per arm) */
	uint32_t channel;            /* 1: the CQ has a completion channel (a
				      * peer need not look at armed otherwise) */
	struct srn_cq_ring *retired; /* private rings only: the ring this one
				      * replaced (ibv_resize_cq), kept mapped
				      * until destroy for lock-free pollers
				      * and producers that still look at it */
	/* A peer that took the arm wakes the owner itself: it sets
	 * peer_fired, then writes a byte into the channel's pipe, which it
	 * opens as /proc/wake_pid/fd/wake_fd (checked: a FIFO of inode
	 * wake_ino).  wake_ino 0: no such pipe, ring the doorbell. */
	_Atomic uint32_t peer_fired;
	int32_t wake_pid, wake_fd;
	uint64_t wake_ino;
	uint32_t stamp;              /* 1: each producer stamps its entries
				      * (ibv_create_cq_ex asked for completion
				      * timestamps): srn_cq_ring_ts */
	/* Each hot word alone in an aligned pair of lines: the CPU's
	 * adjacent-line prefetcher fetches lines in 128-byte pairs, so a
	 * reader of the neighbouring line takes a copy of this one too, and
	 * the next compare-and-swap from another core must take it back
	 * (measured: a peer's CAS of prod or head 60 -> 130-200 cycles). */
	_Alignas(SRN_RING_HOT_ALIGN) _Atomic uint64_t prod; /* entries
				      * reserved; | SRN_CQ_CLOSED */
	_Alignas(SRN_RING_HOT_ALIGN) _Atomic uint64_t cons; /* entries
				      * consumed (the owner's pollers,
				      * each claim a compare-and-swap) */
	_Atomic uint64_t rq_hint;    /* the last peer completion consumed:
				      * its RQ ring's tag << 32 | that RQ's
				      * head after its WQE was taken
				      * (post_recv sees room without reading
				      * head, a line the peer owns); may lag,
				      * never leads */
	_Alignas(SRN_RING_HOT_ALIGN) struct srn_cqe_slot ent[];
	/* then uint64_t ts[size]: each entry's completion time (CLOCK_MONOTONIC
	 * ns, a clock every process of the host shares), kept apart so a
	 * completion still fits one cache line */
};

_Static_assert(offsetof(struct srn_cq_ring, ent) == 3 * SRN_RING_HOT_ALIGN, "CQ ring header");

/* The timestamp of entry idx (the array after ent[]). */
static inline uint64_t *srn_cq_ring_ts(struct srn_cq_ring *r, uint32_t size, uint64_t idx)
{
	return (uint64_t *)(void *)&r->ent[size] + (idx & (size - 1));
}

/* Stamp reserved entry idx before it is published, if the CQ asked. */
static inline void srn_cq_ring_stamp(struct srn_cq_ring *r, uint32_t size, uint64_t idx)
{
	if (r->stamp)
		*srn_cq_ring_ts(r, size, idx) = net_now_ns();
}

struct srn_rq_ring {
	uint32_t magic;
	uint32_t max_wr;             /* entries, a power of two */
	uint32_t max_sge;            /* as the QP was created */
	_Atomic uint32_t open;       /* 0 once the QP is being destroyed */
	uint64_t cq_off;             /* recv CQ ring in the same memfd; 0: none */
	uint32_t cq_size;            /* its entries */
	uint32_t tag;                /* nonzero, unique among this process's
				      * rings (direct_send_publish): names it
				      * in the receive CQ's rq_hint */
	uint64_t srq_off;            /* a QP on an SRQ: its ring holds no
				      * WQEs (max_wr 0) and only says where
				      * its CQ is; the WQEs are in the SRQ's
				      * ring at srq_off in the same memfd */
	_Atomic uint32_t limit_armed; /* an SRQ's ring: its owner armed
				      * srq_limit; a peer that takes a WQE
				      * rings the owner's doorbell, which
				      * checks the limit (verbs/srq.c) */
	/* (as in srn_cq_ring: a pair of lines each) */
	_Alignas(SRN_RING_HOT_ALIGN) _Atomic uint32_t head; /* next to take
				      * (every taker, by CAS) */
	_Alignas(SRN_RING_HOT_ALIGN) _Atomic uint32_t tail; /* next free (the
				      * owner's post_recv) */
	_Atomic uint32_t uc_epsn;    /* a UC QP's ring: the PSN its responder
				      * expects next, stored once a packet's
				      * effects are in place (a UC sender
				      * that sent packets delivers here again
				      * only once they all landed) */
	_Alignas(SRN_RING_HOT_ALIGN) struct srn_recv_wqe wqe[];
};

_Static_assert(offsetof(struct srn_rq_ring, wqe) == 3 * SRN_RING_HOT_ALIGN, "RQ ring header");

/* Fetch the line at p for writing (a line another core has: its copy is
 * invalidated now, not at the store).  __builtin_prefetch(p, 1) emits a
 * plain prefetch unless the compiler targets PRFCHW; the instruction is
 * a no-op on x86-64 CPUs that lack it. */
static inline void srn_prefetch_w(const void *p)
{
#if defined(__x86_64__)
	__asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1);
#endif
}

/* Slots of the RQ ring of a QP granted max_recv_wr receives (a power of
 * two): twice as many for up to SRN_RQ_SPARE_MAX.  With a ring the
 * application can fill, its next post_recv rewrites the very slot a
 * same-host peer has just taken (and read): the write waits for that
 * line to come back from the peer's cache, on the path of every
 * ping-pong (~100 ns here).  With room to spare the slot written was
 * taken half a ring ago.  (Larger rings keep their size: a WQE slot is
 * 536 bytes.) */
enum { SRN_RQ_SPARE_MAX = 4096 };

static inline uint32_t srn_rq_ring_slots(uint32_t max_recv_wr)
{
	return max_recv_wr <= SRN_RQ_SPARE_MAX ? 2 * max_recv_wr : max_recv_wr;
}

static inline size_t srn_cq_ring_bytes(uint32_t size)
{
	return sizeof(struct srn_cq_ring) + (size_t)size * (sizeof(struct srn_cqe_slot) + 8);
}

static inline size_t srn_rq_ring_bytes(uint32_t max_wr)
{
	return sizeof(struct srn_rq_ring) + (size_t)max_wr * sizeof(struct srn_recv_wqe);
}

/* ---- CQ: producers --------------------------------------------------- */

/* Reserve one entry: 0 and *idx; -ENOSPC when full, -EPIPE when closed.
 * *cons is the caller's copy of cons (a peer keeps one): cons itself is
 * read (a cache miss) only when the copy says the ring may be full. */
static inline int srn_cq_ring_reserve_cached(struct srn_cq_ring *r, uint32_t size,
					     uint64_t *cons, uint64_t *idx)
{
	uint64_t p = atomic_load_explicit(&r->prod, memory_order_relaxed);

	do {
		if (p & SRN_CQ_CLOSED)
			return -EPIPE;
		if (p - *cons >= size) {
			*cons = atomic_load_explicit(&r->cons, memory_order_acquire);
			if (p - *cons >= size)
				return -ENOSPC;
		}
	} while (!atomic_compare_exchange_weak_explicit(&r->prod, &p, p + 1,
							memory_order_acq_rel,
							memory_order_relaxed));
	*idx = p;
	return 0;
}

/* The same, reading cons first (the owner's producers). */
static inline int srn_cq_ring_reserve(struct srn_cq_ring *r, uint32_t size, uint64_t *idx)
{
	uint64_t cons = atomic_load_explicit(&r->cons, memory_order_acquire);

	return srn_cq_ring_reserve_cached(r, size, &cons, idx);
}

/* Reserved entry idx, for the producer to fill in place ... */
static inline struct srn_cqe_slot *srn_cq_ring_slot(struct srn_cq_ring *r, uint32_t size,
						    uint64_t idx)
{
	return &r->ent[idx & (size - 1)];
}

/* ... and publish once its wc is written. */
static inline void srn_cq_ring_commit(struct srn_cqe_slot *s, uint64_t idx, uint32_t flags)
{
	s->flags = flags;
	atomic_store_explicit(&s->seq, (uint32_t)(idx + 1), memory_order_release);
}

/* Publish reserved entry idx (wc NULL: a skipped one). */
static inline void srn_cq_ring_publish(struct srn_cq_ring *r, uint32_t size, uint64_t idx,
				       const struct ibv_wc *wc, uint32_t flags)
{
	struct srn_cqe_slot *s = &r->ent[idx & (size - 1)];

	if (wc) {
		s->wc = *wc;
		srn_cq_ring_stamp(r, size, idx);
	}
	s->flags = wc ? flags : flags | SRN_CQE_SKIP;
	atomic_store_explicit(&s->seq, (uint32_t)(idx + 1), memory_order_release);
}

/* Give back reserved entry idx unused: the reservation itself if nobody
 * reserved after it, else a skipped entry (the owner steps over it; its
 * srn_cq_push does so when the ring looks full). */
static inline void srn_cq_ring_unreserve(struct srn_cq_ring *r, uint32_t size, uint64_t idx,
					 uint32_t flags)
{
	uint64_t p = idx + 1;

	if (!atomic_compare_exchange_strong_explicit(&r->prod, &p, idx, memory_order_acq_rel,
						     memory_order_relaxed))
		srn_cq_ring_publish(r, size, idx, NULL, flags);
}

/* ---- CQ: the owner's consumers --------------------------------------
 * Any number of pollers, with or without srn_cq.lock: each reads the
 * entries at cons and claims them with a compare-and-swap of cons.  The
 * copy is valid when the claim succeeds: no producer reuses a slot until
 * cons has passed it.  A failed claim means another poller took them. */

/* The entry at cons if it is published, else NULL; *c is that cons.
 * Skipped entries are consumed on the way. */
static inline struct srn_cqe_slot *srn_cq_ring_peek_at(struct srn_cq_ring *r, uint32_t size,
						       uint64_t *c)
{
	uint64_t i = atomic_load_explicit(&r->cons, memory_order_acquire);

	for (;;) {
		struct srn_cqe_slot *s = &r->ent[i & (size - 1)];

		if (atomic_load_explicit(&s->seq, memory_order_acquire) != (uint32_t)(i + 1))
			return NULL;
		if (!(s->flags & SRN_CQE_SKIP)) {
			*c = i;
			return s;
		}
		/* failed: i is the new cons, look there */
		if (atomic_compare_exchange_weak_explicit(&r->cons, &i, i + 1,
							  memory_order_acq_rel,
							  memory_order_acquire))
			i++;
	}
}

/* Claim entries [c, c + n) (their copies taken): false if another poller
 * took them first (the copies are then void). */
static inline bool srn_cq_ring_claim(struct srn_cq_ring *r, uint64_t c, uint64_t n)
{
	return atomic_compare_exchange_strong_explicit(&r->cons, &c, c + n, memory_order_acq_rel,
						       memory_order_relaxed);
}

/* Step over skipped entries at cons. */
static inline void srn_cq_ring_skip(struct srn_cq_ring *r, uint32_t size)
{
	uint64_t c;

	(void)srn_cq_ring_peek_at(r, size, &c);
}

/* Lock-free look (any thread): is the entry at cons published?  A hint:
 * another poller may take it first. */
static inline bool srn_cq_ring_ready(struct srn_cq_ring *r, uint32_t size)
{
	uint64_t c = atomic_load_explicit(&r->cons, memory_order_acquire);

	return atomic_load_explicit(&r->ent[c & (size - 1)].seq, memory_order_acquire) ==
	       (uint32_t)(c + 1);
}

/* ---- RQ -------------------------------------------------------------- */

/* Take the oldest posted WQE into *out: 0, or -ENOENT if none. */
static inline int srn_rq_ring_take(struct srn_rq_ring *r, uint32_t max_wr,
				   struct srn_recv_wqe *out)
{
	uint32_t h = atomic_load_explicit(&r->head, memory_order_acquire);

	for (;;) {
		const struct srn_recv_wqe *w;
		uint32_t n;

		if (h == atomic_load_explicit(&r->tail, memory_order_acquire))
			return -ENOENT;
		/* Only the SGEs in use: a WQE has room for SRN_MAX_SGE, and
		 * copying all of it is ~9 cache lines the poster just wrote.
		 * num_sge is clamped (the ring is shared memory), the slot
		 * is re-validated by the compare-and-swap below. */
		w = &r->wqe[h & (max_wr - 1)];
		out->wr_id = w->wr_id;
		out->seq = w->seq;
		out->length = w->length;
		n = w->num_sge;
		out->num_sge = n = n < SRN_MAX_SGE ? n : SRN_MAX_SGE;
		memcpy(out->sge, w->sge, n * sizeof(w->sge[0]));
		if (atomic_compare_exchange_strong_explicit(&r->head, &h, h + 1,
							    memory_order_acq_rel,
							    memory_order_acquire))
			return 0;
	}
}

/* The ring a same-host peer looks at for qp (its RQ's, or with an SRQ the
 * one naming it); NULL if none. */
static inline struct srn_rq_ring *srn_qp_rq_hdr(const struct srn_qp *qp)
{
	return qp->srq ? qp->srq_hdr : qp->rqs;
}

/* ---- allocation (shared_rings.c) -------------------------------------- */

/* A ring's tag: nonzero, never reused in this process. */
uint32_t srn_ring_tag(void);

/* A ring block of bytes (zeroed), shared with same-host peers when ctx
 * publishes its MRs: *share is then its mr_share backing.  NULL + errno. */
void *srn_rings_alloc(struct srn_context *ctx, size_t bytes, struct srn_mr_share **share);
void srn_rings_free(void *block, size_t bytes, struct srn_mr_share *share);
/* The same for an object made in pd: a ring that will not be shared
 * comes from pd's allocator when pd is a parent domain with one
 * (SRN_RES_TYPE_* code, verbs/pd_buf.h; recorded in *rec). */
void *srn_rings_alloc_pd(struct srn_context *ctx, struct ibv_pd *pd, uint64_t code,
			 size_t bytes, struct srn_mr_share **share, struct srn_pd_buf *rec);
/* Frees block, into rec's allocator if it came from there. */
void srn_rings_free_pd(struct srn_pd_buf *rec, void *block, size_t bytes,
		       struct srn_mr_share *share);

#endif
