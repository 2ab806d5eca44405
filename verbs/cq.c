/* Completion queues: a ring of struct ibv_wc that the transport fills
 * (srn_cq_push) and the application drains (ibv_poll_cq or the
 * ibv_start_poll/next_poll/end_poll path of ibv_cq_ex). */
#include "verbs/datapath.h"
#include "net/clock.h"
#include "verbs/export.h"
#include "verbs/pd_buf.h"
#include "verbs/shared_rings.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* wc_flags we can report: the standard set and completion timestamps
 * (CLOCK_MONOTONIC ns as the free-running clock: hca_core_clock is
 * 1 GHz, verbs/query.c).  CVLAN, flow tag and tag matching have no
 * source in a software NIC. */
#define CQ_WC_FLAGS_TS                                                    \
	(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
#define CQ_WC_FLAGS_SUPPORTED (IBV_WC_STANDARD_FLAGS | CQ_WC_FLAGS_TS)

static uint32_t round_pow2(uint32_t v)
{
	uint32_t r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

/* ---- the ibv_cq_ex read_* accessors (cq->lock held by start_poll) ---- */

static struct srn_cq *cq_of_ex(struct ibv_cq_ex *c)
{
	return srn_container_of(c, struct srn_cq, ibv);
}

/* The current ring and its size without the lock, or NULL while a
 * resize is swapping them (cq->ring, then cq->size: a pair that does not
 * match the ring's own size is not used).  A ring a resize replaced stays
 * mapped until destroy, so one read here remains readable. */
static struct srn_cq_ring *cq_ring_now(struct srn_cq *cq, uint32_t *size)
{
	struct srn_cq_ring *r = __atomic_load_n(&cq->ring, __ATOMIC_ACQUIRE);

	*size = __atomic_load_n(&cq->size, __ATOMIC_ACQUIRE);
	return r->size == *size ? r : NULL;
}

/* A poll found nothing: run the engine inline (a recvmmsg, ~1 us here)?
 * While same-host peers deliver into this CQ themselves, only every
 * CQ_PROGRESS_GAP_NS: other traffic still arrives through the engine
 * thread, and a system call per empty poll would dominate the latency. */
enum {
	CQ_PEER_RECENT_NS = 10 * 1000 * 1000,
	CQ_PROGRESS_GAP_NS = 20 * 1000,
	CQ_CLOCK_EVERY = 64,
};

/* While same-host peers deliver (peer mode), the hot paths read a clock
 * only every `every`-th call (a power of two): true means skip this one.
 * The count may miss increments under concurrent polls (no locked
 * instruction per spin); cq_progress and cq_saw_peer share it, either
 * only spaces out clock reads. */
static bool cq_peer_skip(struct srn_cq *cq, unsigned int every)
{
	unsigned int n;

	if (!atomic_load_explicit(&cq->peer_mode, memory_order_relaxed))
		return false;
	n = atomic_load_explicit(&cq->empty_polls, memory_order_relaxed) + 1;
	atomic_store_explicit(&cq->empty_polls, n, memory_order_relaxed);
	return n & (every - 1);
}

static bool cq_progress(struct srn_cq *cq)
{
	uint64_t now;

	if (cq_peer_skip(cq, CQ_CLOCK_EVERY))
		return false;
	now = net_now_ns();
	if (now - atomic_load_explicit(&cq->peer_ns, memory_order_relaxed) >= CQ_PEER_RECENT_NS)
		atomic_store_explicit(&cq->peer_mode, false, memory_order_relaxed);
	else if (now - atomic_load_explicit(&cq->progress_ns, memory_order_relaxed) <
		 CQ_PROGRESS_GAP_NS)
		return false;
	atomic_store_explicit(&cq->progress_ns, now, memory_order_relaxed);
	srn_transport_progress(srn_ctx(cq->ibv.context), now);
	return true;
}

/* (the coarse clock: no counter read per message; its few ms of lag
 * only stretch CQ_PEER_RECENT_NS a little) */
static void cq_saw_peer(struct srn_cq *cq)
{
	/* The clock (~10 ns) only every 16th time in peer mode: peer_ns
	 * then lags a little more, and a mode that lapsed is renewed at the
	 * next peer completion. */
	if (cq_peer_skip(cq, 16))
		return;
	atomic_store_explicit(&cq->peer_ns, net_coarse_ns(), memory_order_relaxed);
	atomic_store_explicit(&cq->peer_mode, true, memory_order_relaxed);
}

void srn_cq_recv_qp(struct srn_cq *cq, struct srn_qp *qp, bool added)
{
	pthread_mutex_lock(&cq->lock);
	if (added) {
		cq->recv_qps++;
		cq->rq_owner = cq->recv_qps == 1 && qp->rqs ? qp : NULL;
	} else {
		cq->recv_qps--;
		if (cq->rq_owner == qp)
			cq->rq_owner = NULL;
	}
	pthread_mutex_unlock(&cq->lock);
}

/* A peer's completion (any poller): its RQ was taken up to rq_head, so
 * post_recv need not read head (a cache line the peer owns) to see room
 * (shared_rings.h rq_hint; qp_post.c).  Pollers racing may store an
 * older one last: a hint that lags only costs post_recv a read of head. */
static void cq_peer_entry(struct srn_cq_ring *r, uint32_t rq_tag, uint32_t rq_head)
{
	atomic_store_explicit(&r->rq_hint, (uint64_t)rq_tag << 32 | rq_head, memory_order_relaxed);
}

/* Next completion into cq->cur (lock held); false if none. */
static bool cq_load_cur(struct srn_cq *cq)
{
	struct srn_cq_ring *r = cq->ring;
	struct srn_cqe_slot *s;
	uint32_t flags, rq_head, rq_tag;
	uint64_t c;

	do {
		s = srn_cq_ring_peek_at(r, cq->size, &c);
		if (!s)
			return false;
		cq->cur = s->wc;
		cq->cur_ts = *srn_cq_ring_ts(r, cq->size, c);
		flags = s->flags;
		rq_head = s->rq_head;
		rq_tag = s->rq_tag;
	} while (!srn_cq_ring_claim(r, c, 1)); /* a lock-free poll took it */
	if (flags & SRN_CQE_PEER) {
		cq_peer_entry(r, rq_tag, rq_head);
		cq_saw_peer(cq);
	}
	cq->ibv.wr_id = cq->cur.wr_id;
	cq->ibv.status = cq->cur.status;
	return true;
}

static int cq_start_poll(struct ibv_cq_ex *c, struct ibv_poll_cq_attr *attr)
{
	struct srn_cq *cq = cq_of_ex(c);

	if (attr && attr->comp_mask)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	if (!cq_load_cur(cq)) {
		/* Empty: let the engine run inline once, then look again. */
		pthread_mutex_unlock(&cq->lock);
		if (!cq_progress(cq))
			return ENOENT;
		pthread_mutex_lock(&cq->lock);
		if (!cq_load_cur(cq)) {
			pthread_mutex_unlock(&cq->lock);
			return ENOENT; /* end_poll must not be called */
		}
	}
	return 0; /* the lock stays held until end_poll */
}

static int cq_next_poll(struct ibv_cq_ex *c)
{
	return cq_load_cur(cq_of_ex(c)) ? 0 : ENOENT;
}

static void cq_end_poll(struct ibv_cq_ex *c)
{
	pthread_mutex_unlock(&cq_of_ex(c)->lock);
}

/* ibv_cq_ex read_* accessors: each returns one field of the current
 * entry (start_poll/next_poll put it in cq->cur). */
#define CQ_READERS(X)                                                     \
	X(enum ibv_wc_opcode, opcode) X(uint32_t, vendor_err)             \
	X(uint32_t, byte_len) X(__be32, imm_data) X(uint32_t, qp_num)     \
	X(uint32_t, src_qp) X(unsigned int, wc_flags) X(uint32_t, slid)   \
	X(uint8_t, sl) X(uint8_t, dlid_path_bits)

#define CQ_READER(type, field)                                            \
	static type cq_read_##field(struct ibv_cq_ex *c)                  \
	{                                                                 \
		return cq_of_ex(c)->cur.field;                            \
	}
CQ_READERS(CQ_READER)
#undef CQ_READER

static uint64_t cq_read_completion_ts(struct ibv_cq_ex *c)
{
	return cq_of_ex(c)->cur_ts;
}

/* The same instant on CLOCK_REALTIME: the two clocks' offset now (a
 * clock step between completion and poll moves it, as it would move a
 * NIC's translated wall-clock stamp). */
static uint64_t cq_read_completion_wallclock_ns(struct ibv_cq_ex *c)
{
	uint64_t real = net_clock_ns(CLOCK_REALTIME), mono = net_now_ns();

	return real - (mono - cq_of_ex(c)->cur_ts);
}

/* ---- create / resize / destroy --------------------------------------- */

static struct srn_cq *cq_create(struct ibv_context *context, uint32_t cqe,
				void *cq_context, struct ibv_comp_channel *channel,
				uint32_t comp_vector, uint64_t wc_flags, struct ibv_pd *parent)
{
	struct srn_context *ctx;
	struct srn_cq *cq;
	int nvec;

	if (!context || cqe < 1 || cqe > SRN_MAX_CQE) {
		errno = EINVAL;
		return NULL;
	}
	nvec = context->num_comp_vectors > 0 ? context->num_comp_vectors : 1;
	if (comp_vector >= (uint32_t)nvec ||
	    (channel && channel->context != context)) {
		errno = EINVAL;
		return NULL;
	}
	ctx = srn_ctx(context);
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	cq->size = round_pow2(cqe);
	cq->ring = srn_rings_alloc_pd(ctx, parent, SRN_RES_TYPE_CQ, srn_cq_ring_bytes(cq->size),
				      &cq->share, &cq->ring_buf);
	if (!cq->ring) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->ring->magic = SRN_RINGS_MAGIC;
	cq->ring->size = cq->size;
	cq->ring->channel = channel != NULL;
	cq->ring->stamp = (wc_flags & CQ_WC_FLAGS_TS) != 0;
	if (channel && cq->share) {
		/* where a peer that fires the channel writes its byte */
		cq->ring->wake_pid = (int32_t)getpid();
		cq->ring->wake_fd = channel->fd;
		cq->ring->wake_ino = srn_chan(channel)->ino;
	}
	pthread_mutex_init(&cq->lock, NULL);
	atomic_init(&cq->users, 0);
	cq->wc_flags = wc_flags;
	if (parent) {
		cq->parent = srn_pd(parent);
		atomic_fetch_add(&cq->parent->users, 1);
	}

	cq->ibv.context = context;
	cq->ibv.channel = channel;
	cq->ibv.cq_context = cq_context;
	cq->ibv.handle = 0;
	cq->ibv.cqe = (int)cq->size;
	pthread_mutex_init(&cq->ibv.mutex, NULL);
	pthread_cond_init(&cq->ibv.cond, NULL);
	cq->ibv.start_poll = cq_start_poll;
	cq->ibv.next_poll = cq_next_poll;
	cq->ibv.end_poll = cq_end_poll;
#define CQ_SET_READER(type, field) cq->ibv.read_##field = cq_read_##field;
	CQ_READERS(CQ_SET_READER)
#undef CQ_SET_READER
	cq->ibv.read_completion_ts = cq_read_completion_ts;
	cq->ibv.read_completion_wallclock_ns = cq_read_completion_wallclock_ns;

	if (channel) {
		struct srn_comp_channel *ch = srn_chan(channel);

		pthread_mutex_lock(&ch->lock);
		channel->refcnt++;
		pthread_mutex_unlock(&ch->lock);
		if (cq->share) {
			pthread_mutex_lock(&ctx->notify_lock);
			cq->notify_next = ctx->notify_cqs;
			ctx->notify_cqs = cq;
			pthread_mutex_unlock(&ctx->notify_lock);
		}
	}
	atomic_fetch_add(&ctx->num_objects, 1);
	return cq;
}

/* A CQ with at least cqe entries (rounded up to a power of two; the real
 * size is in cq->cqe).  NULL + errno (EINVAL for cqe outside
 * 1..SRN_MAX_CQE or comp_vector >= num_comp_vectors). */
SRN_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
					void *cq_context,
					struct ibv_comp_channel *channel,
					int comp_vector)
{
	struct srn_cq *cq;

	if (cqe < 1 || comp_vector < 0) {
		errno = EINVAL;
		return NULL;
	}
	cq = cq_create(context, (uint32_t)cqe, cq_context, channel,
		       (uint32_t)comp_vector, 0, NULL);
	return cq ? ibv_cq_ex_to_cq(&cq->ibv) : NULL;
}

/* vctx->create_cq_ex: ibv_create_cq_ex().  Unknown wc_flags, comp_mask
 * bits or creation flags we cannot honour -> EOPNOTSUPP. */
struct ibv_cq_ex *srn_create_cq_ex(struct ibv_context *context,
				   struct ibv_cq_init_attr_ex *attr)
{
	const uint32_t known_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS |
				    IBV_CQ_INIT_ATTR_MASK_PD;
	struct srn_cq *cq;

	if (!attr) {
		errno = EINVAL;
		return NULL;
	}
	if ((attr->comp_mask & ~known_mask) ||
	    (attr->wc_flags & ~(uint64_t)CQ_WC_FLAGS_SUPPORTED)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* SINGLE_THREADED is a hint (we lock anyway); IGNORE_OVERRUN would
	 * need silent loss of completions, which we do not do. */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* MASK_PD names a parent domain (its allocator gives the ring) */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!attr->parent_domain || attr->parent_domain->context != context ||
	     srn_pd(attr->parent_domain)->prot == srn_pd(attr->parent_domain))) {
		errno = EINVAL;
		return NULL;
	}
	cq = cq_create(context, attr->cqe, attr->cq_context, attr->channel,
		       attr->comp_vector, attr->wc_flags,
		       (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) ? attr->parent_domain : NULL);
	return cq ? &cq->ibv : NULL;
}

/* Where a walk over the entries [c, p) starts: cons and prod are words a
 * same-host peer can write, and the ring never holds more than size
 * entries, so a wider window is nonsense of which only the last size
 * entries are looked at (c past p: none).  Bounds every such walk. */
static uint64_t cq_walk_start(uint64_t c, uint64_t p, uint32_t size)
{
	if (c > p)
		return p;
	return p - c > size ? p - size : c;
}

/* Stop new reservations in r and wait (bounded) for the reserved ones to
 * be written; one never written (its producer died) is marked skipped. */
static void cq_ring_close(struct srn_cq_ring *r, uint32_t size)
{
	uint64_t p = atomic_fetch_or(&r->prod, SRN_CQ_CLOSED) & ~SRN_CQ_CLOSED;
	uint64_t c = cq_walk_start(atomic_load(&r->cons), p, size), t0 = net_now_ns();

	for (uint64_t i = c; i < p; i++) {
		struct srn_cqe_slot *s = &r->ent[i & (size - 1)];

		while (atomic_load_explicit(&s->seq, memory_order_acquire) != (uint32_t)(i + 1)) {
			if (net_now_ns() - t0 > 100 * 1000 * 1000u) {
				srn_cq_ring_publish(r, size, i, NULL, 0);
				break;
			}
			sched_yield();
		}
	}
}

/* Resizes cq to at least cqe entries, keeping its completions.  EINVAL if
 * cqe is out of range or below the number of completions waiting.  The
 * new ring is this process's only: peers that filled the old one go back
 * to packets for QPs completing here. */
SRN_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct srn_cq_ring *ring, *old;
	struct srn_mr_share *new_share;
	struct srn_cqe_slot *s;
	struct srn_cq *cq;
	uint32_t size, n = 0, old_size;
	uint64_t p;

	if (!ibcq || cqe < 1 || cqe > SRN_MAX_CQE)
		return EINVAL;
	cq = srn_cq(ibcq);
	size = round_pow2((uint32_t)cqe);
	pthread_mutex_lock(&cq->lock);
	old = cq->ring;
	old_size = cq->size;
	ring = srn_rings_alloc(NULL, srn_cq_ring_bytes(size), &new_share);
	if (!ring) {
		pthread_mutex_unlock(&cq->lock);
		return ENOMEM;
	}
	ring->magic = SRN_RINGS_MAGIC;
	ring->size = size;
	ring->channel = old->channel;
	ring->stamp = old->stamp;
	/* closed first: then nothing can arrive between counting and copying */
	cq_ring_close(old, old_size);
	p = atomic_load(&old->prod) & ~SRN_CQ_CLOSED;
	if ((uint64_t)cqe < p - atomic_load(&old->cons)) {
		atomic_fetch_and(&old->prod, ~SRN_CQ_CLOSED);
		pthread_mutex_unlock(&cq->lock);
		srn_rings_free(ring, srn_cq_ring_bytes(size), new_share);
		return EINVAL;
	}
	/* (lock-free pollers may still take some meanwhile: each copy
	 * counts once its claim succeeds) */
	for (uint64_t c; n < size && (s = srn_cq_ring_peek_at(old, old_size, &c));) {
		struct srn_cqe_slot *d = &ring->ent[n];

		d->wc = s->wc;
		*srn_cq_ring_ts(ring, size, n) = *srn_cq_ring_ts(old, old_size, c);
		d->flags = s->flags;
		d->rq_head = s->rq_head;
		d->rq_tag = s->rq_tag;
		if (srn_cq_ring_claim(old, c, 1))
			atomic_store_explicit(&d->seq, (uint32_t)(++n), memory_order_release);
	}
	atomic_store(&ring->prod, n);
	/* the arm moves along (a peer that took it from the old ring has
	 * marked that one: srn_cq_collect_fired looks at both) */
	atomic_store(&ring->armed, atomic_exchange(&old->armed, 0));
	if (cq->share && !cq->closed) {
		__atomic_store_n(&cq->closed, old, __ATOMIC_RELEASE);
		cq->closed_share = cq->share;
	} else {
		/* private: chained for destroy (lock-free readers may still
		 * hold it, see cq_ring_now) */
		ring->retired = old;
	}
	__atomic_store_n(&cq->ring, ring, __ATOMIC_RELEASE);
	cq->share = NULL;
	__atomic_store_n(&cq->size, size, __ATOMIC_RELEASE);
	cq->ibv.cqe = (int)size;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

/* Frees cq: EBUSY while a QP or SRQ uses it.  Like rdma-core, blocks until
 * every completion event the application received is acknowledged. */
SRN_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct srn_cq *cq;
	struct srn_comp_channel *ch = NULL;

	if (!ibcq)
		return EINVAL;
	cq = srn_cq(ibcq);
	if (atomic_load(&cq->users) != 0)
		return EBUSY;
	if (ibcq->channel) {
		struct srn_context *ctx = srn_ctx(ibcq->context);

		pthread_mutex_lock(&ctx->notify_lock);
		for (struct srn_cq **p = &ctx->notify_cqs; *p; p = &(*p)->notify_next)
			if (*p == cq) {
				*p = cq->notify_next;
				break;
			}
		pthread_mutex_unlock(&ctx->notify_lock);
		ch = srn_chan(ibcq->channel);
		srn_chan_forget(ch, cq);
	}
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->comp_events_completed != cq->comp_events_reported)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);
	srn_async_settle(srn_ctx(ibcq->context), ibcq, atomic_load(&cq->async_events_reported),
			 &ibcq->mutex, &ibcq->cond, &ibcq->async_events_completed);
	if (ch) {
		pthread_mutex_lock(&ch->lock);
		ch->ibv.refcnt--;
		pthread_mutex_unlock(&ch->lock);
	}
	atomic_fetch_sub(&srn_ctx(ibcq->context)->num_objects, 1);
	pthread_cond_destroy(&ibcq->cond);
	pthread_mutex_destroy(&ibcq->mutex);
	pthread_mutex_destroy(&cq->lock);
	cq_ring_close(cq->ring, cq->size);
	/* rings a resize replaced (only ever private ones are chained, and
	 * only a private ring's link is followed: a peer may write a shared
	 * one) */
	if (!cq->share) {
		for (struct srn_cq_ring *r = cq->ring->retired, *next; r; r = next) {
			next = r->retired;
			srn_rings_free_pd(&cq->ring_buf, r, srn_cq_ring_bytes(r->size), NULL);
		}
	}
	srn_rings_free_pd(&cq->ring_buf, cq->ring, srn_cq_ring_bytes(cq->size), cq->share);
	if (cq->parent)
		atomic_fetch_sub(&cq->parent->users, 1);
	if (cq->closed)
		srn_rings_free(cq->closed, srn_cq_ring_bytes(cq->closed->size), cq->closed_share);
	free(cq);
	return 0;
}

/* ---- data path ------------------------------------------------------- */

/* Hardware providers (mlx4, mlx5, hns, mthca) remove a QP's completions
 * from its CQs when it enters RESET: a QP brought back from ERR through
 * RESET must not hand its earlier flushed work requests to the new
 * traffic.  The entries become skipped ones, which every poller steps
 * over.  Reservations stop meanwhile (closed, as resize does; a peer
 * sends packets for that moment, a local producer waits for the lock):
 * then no slot between cons and prod can be reused under us, even if
 * the application's pollers consume it.  Entries still being written (a
 * same-host peer's delivery racing the reset, as a NIC's DMA would) are
 * left alone. */
void srn_cq_clean_qp(struct srn_cq *cq, uint32_t qpn)
{
	struct srn_cq_ring *r;
	uint64_t c, p;
	bool closed;

	pthread_mutex_lock(&cq->lock);
	r = cq->ring;
	p = atomic_fetch_or(&r->prod, SRN_CQ_CLOSED);
	closed = p & SRN_CQ_CLOSED;
	p &= ~SRN_CQ_CLOSED;
	c = cq_walk_start(atomic_load(&r->cons), p, cq->size);
	for (uint64_t i = c; i < p; i++) {
		struct srn_cqe_slot *s = &r->ent[i & (cq->size - 1)];

		if (atomic_load_explicit(&s->seq, memory_order_acquire) == (uint32_t)(i + 1) &&
		    !(s->flags & SRN_CQE_SKIP) && s->wc.qp_num == qpn)
			__atomic_store_n(&s->flags, s->flags | SRN_CQE_SKIP, __ATOMIC_RELEASE);
	}
	if (!closed)
		atomic_fetch_and(&r->prod, ~SRN_CQ_CLOSED);
	pthread_mutex_unlock(&cq->lock);
}

/* Up to n completions, oldest first: read them where they are, then claim
 * them all with one compare-and-swap of cons (no lock: see
 * shared_rings.h).  Only while a resize swaps the ring does it wait for
 * the lock. */
static int cq_take(struct srn_cq *cq, int n, struct ibv_wc *wc)
{
	struct srn_cq_ring *r;
	uint32_t size, rq_head = 0, rq_tag = 0;
	bool peer;
	uint64_t c;
	int got;

	r = cq_ring_now(cq, &size);
	if (!r) {
		/* a resize in progress: it holds the lock until done */
		pthread_mutex_lock(&cq->lock);
		pthread_mutex_unlock(&cq->lock);
		r = cq_ring_now(cq, &size);
		if (!r)
			return 0;
	}
	/* empty (the common case when spinning) */
	if (!srn_cq_ring_ready(r, size))
		return 0;
	do {
		struct srn_cqe_slot *s = srn_cq_ring_peek_at(r, size, &c);
		uint64_t i = c;

		got = 0;
		peer = false;
		/* consecutive published entries; a skipped one ends the batch
		 * (the next call steps over it) */
		while (s && got < n) {
			uint32_t flags = s->flags;

			if (flags & SRN_CQE_SKIP)
				break;
			wc[got++] = s->wc;
			if (flags & SRN_CQE_PEER) {
				peer = true;
				rq_head = s->rq_head;
				rq_tag = s->rq_tag;
			}
			i++;
			s = &r->ent[i & (size - 1)];
			if (atomic_load_explicit(&s->seq, memory_order_acquire) != (uint32_t)(i + 1))
				s = NULL;
		}
		if (!got)
			return 0;
	} while (!srn_cq_ring_claim(r, c, (uint64_t)got));
	if (peer) {
		cq_peer_entry(r, rq_tag, rq_head);
		cq_saw_peer(cq);
	}
	return got;
}

/* ops.poll_cq: up to num_entries completions, oldest first; 0 if none.
 * An empty CQ first gives the engine one inline run (no CQ lock held). */
int srn_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct srn_cq *cq = srn_cq(ibcq);
	int got;

	if (num_entries < 0)
		return -EINVAL;
	if (num_entries == 0)
		return 0;
	got = cq_take(cq, num_entries, wc);
	if (got == 0) {
		if (cq_progress(cq))
			got = cq_take(cq, num_entries, wc);
	}
	return got;
}

/* ops.req_notify_cq: arm for the next completion (or the next solicited
 * or error one).  Arming for "any" is never narrowed by a later
 * solicited-only request before it fires. */
int srn_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct srn_cq *cq = srn_cq(ibcq);
	uint32_t a;

	pthread_mutex_lock(&cq->lock);
	a = atomic_load(&cq->ring->armed);
	if (!solicited_only)
		a = 1;
	else if (a == 0)
		a = 2;
	/* Seen by a peer completing into the ring: it stores the entry,
	 * then reads armed; we store armed, then the application polls.
	 * With a full fence on both sides one of us sees the other. */
	atomic_store(&cq->ring->armed, a);
	pthread_mutex_unlock(&cq->lock);
	srn_transport_cq_armed(srn_ctx(cq->ibv.context));
	return 0;
}

bool srn_cq_armed(struct srn_cq *cq)
{
	struct srn_cq_ring *r = __atomic_load_n(&cq->ring, __ATOMIC_ACQUIRE);

	return atomic_load_explicit(&r->armed, memory_order_relaxed) != 0;
}

/* Take cq's arm (0 after): true if it asked for this completion (any;
 * or solicited only and it is solicited); whoever takes it fires. */
static bool arm_take(struct srn_cq_ring *r, bool solicited)
{
	uint32_t a = atomic_load_explicit(&r->armed, memory_order_relaxed);

	return (a == 1 || (a == 2 && solicited)) && atomic_compare_exchange_strong(&r->armed, &a, 0);
}

/* Has a peer marked cq fired?  A look without the lock (a ring a resize
 * replaced stays mapped until destroy). */
static bool peer_fired_seen(struct srn_cq *cq)
{
	struct srn_cq_ring *r = __atomic_load_n(&cq->ring, __ATOMIC_ACQUIRE);
	struct srn_cq_ring *c = __atomic_load_n(&cq->closed, __ATOMIC_ACQUIRE);

	return atomic_load_explicit(&r->peer_fired, memory_order_acquire) ||
	       (c && atomic_load_explicit(&c->peer_fired, memory_order_acquire));
}

/* Did a peer fire cq itself (ring or the shared ring a resize closed)?
 * Takes the marks.  cq->lock held. */
static bool peer_fired_take(struct srn_cq *cq)
{
	bool f = atomic_exchange(&cq->ring->peer_fired, 0) != 0;

	if (cq->closed)
		f = (atomic_exchange(&cq->closed->peer_fired, 0) != 0) || f;
	return f;
}

void srn_cq_notify_peers(struct srn_context *ctx)
{
	pthread_mutex_lock(&ctx->notify_lock);
	for (struct srn_cq *cq = ctx->notify_cqs; cq; cq = cq->notify_next) {
		pthread_mutex_lock(&cq->lock);
		/* (the peer rang only for an entry its arming asked for; or it
		 * took the arm and could not write into our pipe) */
		if (peer_fired_take(cq) ||
		    (srn_cq_ring_ready(cq->ring, cq->size) && arm_take(cq->ring, true)))
			srn_chan_notify(srn_chan(cq->ibv.channel), cq);
		pthread_mutex_unlock(&cq->lock);
	}
	pthread_mutex_unlock(&ctx->notify_lock);
}

void srn_cq_collect_fired(struct srn_context *ctx, struct srn_comp_channel *ch)
{
	pthread_mutex_lock(&ctx->notify_lock);
	for (struct srn_cq *cq = ctx->notify_cqs; cq; cq = cq->notify_next) {
		if (srn_chan(cq->ibv.channel) != ch || !peer_fired_seen(cq))
			continue;
		pthread_mutex_lock(&cq->lock);
		if (peer_fired_take(cq))
			srn_chan_notify(ch, cq);
		pthread_mutex_unlock(&cq->lock);
	}
	pthread_mutex_unlock(&ctx->notify_lock);
}

int srn_cq_push(struct srn_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	bool raise = false, fire = false;
	uint64_t idx;

	/* No completion channel: nothing to fire, so a producer needs only
	 * its reservation (the ring is multi-producer); the lock is for a
	 * full ring (skipped entries to step over, overrun).  The channel
	 * is fixed at creation; resize swaps the ring under the lock, so
	 * the reservation is made in whatever ring is current and a closed
	 * one sends us to the locked path. */
	if (!cq->ibv.channel) {
		uint32_t size;
		struct srn_cq_ring *r = cq_ring_now(cq, &size);

		if (r && !srn_cq_ring_reserve(r, size, &idx)) {
			srn_cq_ring_publish(r, size, idx, wc, 0);
			return 0;
		}
	}
	pthread_mutex_lock(&cq->lock);
	/* full: skipped entries at its head may be all that fills it (the
	 * consumer's lock is ours: step over them) */
	if (srn_cq_ring_reserve(cq->ring, cq->size, &idx) &&
	    (srn_cq_ring_skip(cq->ring, cq->size), srn_cq_ring_reserve(cq->ring, cq->size, &idx))) {
		/* IBTA 11.4.2.1: overrun puts the CQ in error; say it once. */
		raise = !cq->overrun;
		cq->overrun = true;
		pthread_mutex_unlock(&cq->lock);
		if (raise) {
			struct ibv_async_event ev = {
				.element.cq = ibv_cq_ex_to_cq(&cq->ibv),
				.event_type = IBV_EVENT_CQ_ERR,
			};

			srn_async_post_counted(srn_ctx(cq->ibv.context), &ev,
					       &cq->async_events_reported);
		}
		return -ENOSPC;
	}
	srn_cq_ring_publish(cq->ring, cq->size, idx, wc, 0);
	/* IBTA 11.4.2.2: a solicited-only arm fires on a solicited or an
	 * error completion. */
	fire = cq->ibv.channel && arm_take(cq->ring, solicited || wc->status != IBV_WC_SUCCESS);
	if (fire)
		srn_chan_notify(srn_chan(cq->ibv.channel), cq);
	pthread_mutex_unlock(&cq->lock);
	return 0;
}
