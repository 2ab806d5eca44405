/* transport/direct_send: a SEND to a same-host QP delivered by the sender
 * (docs/same-host.md): it takes the oldest receive WQE the target
 * posted, copies the message into that WQE's buffers and adds the
 * completion to the target's receive CQ, all in the target's rings
 * (verbs/shared_rings.h) mapped here.  No packet, no ACK, no work for the
 * target's CPU: the target sees the completion at its next poll.
 *
 * Only when the target published its rings (an RC, UC or UD QP).  If
 * the target armed its CQ's completion channel, the sender fires it (a
 * byte into the channel's pipe; or a doorbell datagram to the target's
 * engine, which fires it).  Every check the responder
 * would make comes first (a WQE posted, its lkeys in the QP's PD with
 * local write access, room for the message, room in the CQ); any failure
 * leaves the WQE to the packet path, which answers as the protocol says
 * (RNR NAK, a length or protection error).
 *
 * Order of the claims: a CQ entry first, then the receive WQE, so a taken
 * WQE always completes; an entry reserved for nothing is published as
 * skipped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/mode.h"
#include "net/clock.h"
#include "net/registry.h"
#include "transport/direct_priv.h"
#include "transport/rc.h"
#include "verbs/mr_share.h"
#include "verbs/shared_rings.h"

enum { SEND_TAKE_TRIES = 4 }; /* lost races for the WQE before giving up */

/* ---- target side ------------------------------------------------------- */

void direct_send_publish(struct srn_qp *qp, struct net_reg_qpinfo *in)
{
	struct srn_cq *cq = qp->recv_cq;
	struct srn_rq_ring *hdr = srn_qp_rq_hdr(qp);
	struct srn_mr_share *share = qp->srq ? qp->srq_hdr_share : qp->rq_share;
	int fd;

	in->rq_off = 0;
	if (!hdr || !share || !cq || !cq->share ||
	    (cq->ibv.channel && !net_direct_channel_enabled()))
		return;
	fd = srn_mr_share_fd(share);
	if (fd < 0 || fd != srn_mr_share_fd(cq->share))
		return;
	if (qp->srq) {
		/* the SRQ's ring as it is now (a resize closes it: peers
		 * then send packets until this is published again); its
		 * receive buffers are in the SRQ's PD, which peers check as
		 * the QP's */
		struct srn_srq *srq = qp->srq;

		pthread_mutex_lock(&srq->lock);
		if (!srn_pd_same(srq->pd, qp->pd) || srn_mr_share_fd(srq->ring_share) != fd) {
			pthread_mutex_unlock(&srq->lock);
			return;
		}
		hdr->srq_off = srn_mr_share_offset(srq->ring_share, (uintptr_t)srq->ring);
		in->rq_max_wr = srq->slots;
		pthread_mutex_unlock(&srq->lock);
	} else {
		in->rq_max_wr = qp->rq.max_wr;
	}
	/* where the peer completes into; written before the info is */
	if (!hdr->tag)
		hdr->tag = srn_ring_tag();
	hdr->cq_off = srn_mr_share_offset(cq->share, (uintptr_t)cq->ring);
	hdr->cq_size = cq->size;
	atomic_store(&hdr->open, 1);
	in->rq_memfd = fd;
	in->rq_ino = srn_mr_share_ino(share);
	in->rq_off = srn_mr_share_offset(share, (uintptr_t)hdr);
}

/* ---- initiator side ----------------------------------------------------- */

void direct_send_forget(struct direct_qp *d)
{
	d->wake_state = 0; /* (the fd is the peer's) */
	if (d->rq_mh)
		peer_unmap_memfd(d->peer, d->rq_mh);
	d->rq_mh = NULL;
	d->rq = NULL;
	d->wq = NULL;
	d->cq = NULL;
}

static bool pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* Rings start on their struct's alignment (they begin whole pages of the
 * owner's memfd): an offset that does not is nonsense, and using it
 * would be a misaligned access to the ring's words. */
static bool ring_aligned(uint64_t off)
{
	return !(off & (SRN_RING_HOT_ALIGN - 1));
}

/* The WQE ring a QP's header names at off (an SRQ's), checked against
 * the mapping of size bytes at base; NULL if it does not hold together. */
static struct srn_rq_ring *srq_ring_at(char *base, uint64_t size, uint64_t off, uint32_t max_wr)
{
	struct srn_rq_ring *r;

	if (!ring_aligned(off) || off > size || srn_rq_ring_bytes(max_wr) > size - off)
		return NULL;
	r = (struct srn_rq_ring *)(base + off);
	if (r->magic != SRN_RINGS_MAGIC || r->max_wr != max_wr || r->srq_off ||
	    !atomic_load(&r->open))
		return NULL;
	return r;
}

/* Map the target's RQ (or SRQ) and CQ rings as published; false if there
 * are none or what is there does not hold together (never trusted
 * blindly). */
static bool rings_attach(struct direct_qp *d)
{
	struct srn_rq_ring *rq, *wq;
	struct srn_cq_ring *cq;
	uint64_t size, cq_off, srq_off;
	uint32_t cq_size;
	char *base;

	if (d->rq)
		return true;
	if (!d->rq_off || d->rq_memfd < 0 || !pow2(d->rq_max_wr) ||
	    d->rq_max_wr > SRN_MAX_SRQ_WR)
		return false;
	d->rq_mh = peer_map_memfd(d->peer, d->rq_memfd, d->rq_ino, &base, &size);
	if (!d->rq_mh)
		goto fail;
	if (!ring_aligned(d->rq_off) || d->rq_off > size ||
	    srn_rq_ring_bytes(0) > size - d->rq_off)
		goto fail;
	rq = (struct srn_rq_ring *)(base + d->rq_off);
	cq_off = rq->cq_off;
	cq_size = rq->cq_size;
	srq_off = rq->srq_off;
	if (rq->magic != SRN_RINGS_MAGIC || !atomic_load(&rq->open) || !pow2(cq_size) ||
	    cq_size > SRN_MAX_CQE || !ring_aligned(cq_off) || cq_off > size ||
	    srn_cq_ring_bytes(cq_size) > size - cq_off)
		goto fail;
	if (srq_off) {
		/* a QP on an SRQ: its own ring holds no WQEs */
		if (rq->max_wr != 0 || !(wq = srq_ring_at(base, size, srq_off, d->rq_max_wr)))
			goto fail;
	} else {
		if (rq->max_wr != d->rq_max_wr || d->rq_max_wr > SRN_MAX_QP_WR ||
		    srn_rq_ring_bytes(d->rq_max_wr) > size - d->rq_off)
			goto fail;
		wq = rq;
	}
	cq = (struct srn_cq_ring *)(base + cq_off);
	if (cq->magic != SRN_RINGS_MAGIC || cq->size != cq_size)
		goto fail;
	d->rq = rq;
	d->wq = wq;
	d->cq = cq;
	d->cq_size = cq_size;
	d->cq_channel = cq->channel != 0;
	d->wake_pid = cq->wake_pid;
	d->wake_pfd = cq->wake_fd;
	d->wake_ino = cq->wake_ino;
	d->rq_tag = wq->tag; /* (an SRQ's: its owner's post_srq_recv looks) */
	d->cq_cons = 0;
	return true;
fail:
	direct_send_forget(d);
	d->rq_off = 0; /* not again until the target republishes */
	return false;
}

/* The target's buffers for len bytes of the receive WQE at slot into
 * dst (mapped here) and raddr (at the owner's addresses): their count,
 * or -1 where the responder would not accept them.  A buffer not mapped
 * here (file-backed memory, a page the MR shares with other data) is
 * reached with process_vm_writev when vm is given (*vm set), else -1.
 * The slot is read in place before it is claimed: another taker may
 * claim it meanwhile and its owner rewrite it, so each SGE is read once
 * and checked (the claim then fails and the result is dropped). */
static int recv_map(struct direct_qp *d, const struct srn_recv_wqe *slot, uint32_t nsge,
		    uint64_t len, struct iovec *dst, uint64_t *raddr, bool *vm)
{
	int n = 0;

	if (nsge > SRN_MAX_SGE)
		return -1;
	for (uint32_t i = 0; i < nsge && len; i++) {
		struct ibv_sge g = slot->sge[i];
		uint64_t take = g.length < len ? g.length : len, vaddr;
		char *ptr;

		if (!take)
			continue;
		if (!direct_mr_range(direct_mr_get(d, g.lkey), g.addr, take,
				     IBV_ACCESS_LOCAL_WRITE, &ptr, &vaddr))
			return -1;
		if (!ptr) {
			if (!vm || peer_is_self(d->peer) || !peer_vm_usable(d->peer))
				return -1;
			*vm = true;
		}
		dst[n].iov_base = ptr;
		dst[n].iov_len = take;
		raddr[n] = vaddr;
		n++;
		len -= take;
	}
	return len ? -1 : n; /* too long for the buffers: the responder's error */
}

/* Copy the gather list src into the scatter list dst (same total). */
static void scatter(const struct iovec *src, int ns, const struct iovec *dst, int nd,
		    bool may_overlap)
{
	size_t so = 0, dof = 0;
	int i = 0, j = 0;

	if (ns == 1 && nd == 1 && !may_overlap) {
		/* the common case: one buffer each side */
		memcpy(dst[0].iov_base, src[0].iov_base, src[0].iov_len);
		return;
	}
	while (i < ns && j < nd) {
		size_t a = src[i].iov_len - so, b = dst[j].iov_len - dof, k = a < b ? a : b;
		char *to = (char *)dst[j].iov_base + dof;
		const char *from = (const char *)src[i].iov_base + so;

		if (may_overlap)
			memmove(to, from, k);
		else
			memcpy(to, from, k);
		so += k;
		dof += k;
		if (so == src[i].iov_len) {
			i++;
			so = 0;
		}
		if (dof == dst[j].iov_len) {
			j++;
			dof = 0;
		}
	}
}

/* A message for the target's next receive WQE: src[0..ns) holding len
 * bytes; a WRITE with immediate also names its target. */
struct direct_msg {
	const struct iovec *src;
	int ns;
	uint64_t len;
	bool write, imm, solicited;
	bool grh;                    /* UD: src starts with the GRH slot */
	uint8_t sl;                  /* UD: wc.sl (ud_wc_sl) */
	uint32_t imm_data;
	uint64_t remote_addr;        /* write only */
	uint32_t rkey;
	bool vm_ok;                  /* may use process_vm_writev: into receive
				      * buffers (a WQE: a failure after the
				      * claim can fail it), and for a WRITE's
				      * data (before any claim) */
	/* RC and UC: the sender's WQE, completed once the message is placed
	 * and before the receiver's completion shows (deliver: 2) */
	struct srn_send_wqe *wqe;
	enum srn_counter wqe_cnt;
};

/* RDMA WRITE with immediate: where the data goes (the responder's rkey
 * checks).  Mapped here: dst[0] is it, the data is copied once the
 * receive is taken.  Not mapped (an MR that covers no whole page, say
 * qperf's 1-byte buffer): with m->vm_ok, the data is written now with
 * process_vm_writev, before anything is claimed, and *placed says so; a
 * refusal leaves the whole message to packets, which write it again.
 * (Placed before the receive WQE is known to be there: a retry after
 * -EAGAIN, or the packets, rewrite the same bytes; the target learns of
 * them only from the completion.)  false: packets. */
static bool write_target(struct direct_qp *d, const struct direct_msg *m, struct iovec *dst,
			 bool *placed)
{
	uint64_t vaddr;
	char *ptr = NULL;

	*placed = false;
	dst[0].iov_base = NULL;
	dst[0].iov_len = m->len;
	if (!m->len)
		return true;
	if (!direct_mr_range(direct_mr_get(d, m->rkey), m->remote_addr, m->len,
			     IBV_ACCESS_REMOTE_WRITE, &ptr, &vaddr))
		return false;
	if (ptr) {
		dst[0].iov_base = ptr;
		return true;
	}
	if (!m->vm_ok || peer_is_self(d->peer) || !peer_vm_usable(d->peer) ||
	    peer_vm_write(d->peer, vaddr, m->src, m->ns, m->len))
		return false;
	*placed = true;
	return true;
}

/* One byte into the pipe: true if it is in, or the pipe is full (so
 * readable anyway; also what writes to a pipe whose owner is gone come
 * to, peer_wake_fd keeping it open). */
static bool wake_write(int fd)
{
	return write(fd, "", 1) == 1 || errno == EAGAIN;
}

/* The target asked for an event (ibv_req_notify_cq) and may be asleep in
 * its completion channel.  Whoever takes the arm fires it: we, with a
 * byte into the channel's pipe after marking the ring (one wake-up: the
 * application's); or, where the pipe cannot be opened, the target's
 * engine, woken by a doorbell (a zero-length datagram; transport/engine_rx.c
 * passes it to srn_cq_notify_peers), which then wakes the application.
 * The fence pairs with the one after arming: the entry is stored before
 * armed is read. */
static void wake_if_armed(struct srn_rc_state *rc, struct direct_qp *d, bool solicited)
{
	uint32_t armed;

	if (!d->cq_channel)
		return; /* nothing to wake, and no fence to wait for */
	atomic_thread_fence(memory_order_seq_cst);
	armed = atomic_load_explicit(&d->cq->armed, memory_order_relaxed);
	if (armed != 1 && !(armed == 2 && solicited))
		return;
	if (d->wake_state == 0) {
		d->wake_fd = peer_wake_fd(d->peer, d->wake_pid, d->wake_pfd, d->wake_ino);
		d->wake_state = d->wake_fd >= 0 ? 1 : 2;
	}
	if (d->wake_state == 1 &&
	    atomic_compare_exchange_strong(&d->cq->armed, &armed, 0)) {
		atomic_store(&d->cq->peer_fired, 1);
		/* (failed: the doorbell below has the engine collect the
		 * mark) */
		if (wake_write(d->wake_fd)) {
			rc_count(rc, SRN_CNT_direct_wakes);
			return;
		}
	}
	rc_doorbell(rc);
}

/* No receive posted.  A receiver that keeps up reposts within
 * microseconds: look again a while (the spin), then have the requester
 * retry in DIRECT_WAIT_NS; only after DIRECT_RNR_WAIT_NS does the packet
 * path take the WQE and the protocol's RNR NAKs and retry count apply
 * (where min_rnr_timer stalls of 0.01-655 ms would cost far more). */
enum { DIRECT_RNR_SPINS = 32, DIRECT_RNR_WAIT_NS = 2 * 1000 * 1000 };

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause(); /* ~40-140 cycles: the spin stays ~1 us */
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Is the WQE at index h posted? */
static bool rq_posted(const struct srn_recv_wqe *slot, uint32_t h)
{
	return __atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE) == h + 1;
}

static bool rq_wait(const struct srn_recv_wqe *slot, uint32_t h)
{
	for (int i = 0; i < DIRECT_RNR_SPINS; i++) {
		cpu_relax();
		if (rq_posted(slot, h))
			return true;
	}
	return false;
}

/* No receive WQE, or no room in the receive CQ (a receiver that keeps up
 * makes some soon; the packet path would meet an RNR NAK or overrun the
 * CQ): -EAGAIN while within DIRECT_RNR_WAIT_NS, then 0 (packets). */
static int not_now(struct direct_qp *d)
{
	uint64_t now = net_coarse_ns();

	if (!d->rnr_since)
		d->rnr_since = now;
	if (now - d->rnr_since < DIRECT_RNR_WAIT_NS)
		return -EAGAIN;
	d->rnr_since = 0;
	return 0;
}

/* The target polls the completion slot we will write next: ask for it
 * now, so the transfer of its line overlaps our checks instead of
 * stalling the completion's stores at the end (measured: same-host
 * ib_send_lat 0.31-0.35 -> 0.23-0.29 us).  prod's line is ours (only
 * producers touch it); a wrong guess (another producer came first) costs
 * nothing but the prefetch. */
static void cqe_prefetch(const struct direct_qp *d)
{
	if (d->cq)
		srn_prefetch_w(srn_cq_ring_slot(d->cq, d->cq_size,
						atomic_load_explicit(&d->cq->prod,
								     memory_order_relaxed)));
}

/* Deliver m: 1 done (the target's completion is published), 0 nothing
 * changed (packets), -EAGAIN no receive WQE or no room in its CQ yet,
 * -ENOENT (UC) no receive WQE: the message is dropped, -EIO the receive
 * buffers could not be written after the WQE was taken (its completion
 * says IBV_WC_LOC_PROT_ERR). */
/* A capture runs: the packets m stands for (transport/capture.h). */
static void cap_msg(struct srn_rc_state *rc, const struct direct_qp *d,
		    const struct direct_msg *m)
{
	int skip = m->grh ? 1 : 0; /* UD: not the GRH slot */
	struct srn_cap_op op = {
		.opcode = m->write ? IBV_WR_RDMA_WRITE_WITH_IMM
			  : m->imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
		.dqpn = rc->type == IBV_QPT_UD ? d->dqpn : rc->dqpn,
		.peer_pid = (uint32_t)d->peer_pid,
		.len = m->len - (m->grh ? WIRE_GRH_LEN : 0),
		.pay = m->src + skip,
		.npay = m->ns - skip,
		.va = m->remote_addr,
		.rkey = m->rkey,
		.imm_be = m->imm_data,
		.qkey = d->qkey,
	};

	srn_cap_direct(rc, &op);
}

static int deliver(struct srn_rc_state *rc, struct direct_qp *d, const struct direct_msg *m)
{
	struct iovec dst[SRN_MAX_SGE];
	uint64_t raddr[SRN_MAX_SGE];
	uint64_t len = m->len, idx, r_wr_id = 0;
	struct srn_rq_ring *rq;
	struct srn_cqe_slot *cqe;
	uint32_t r_head = 0;
	bool rnr = false, limit = false, vm = false, failed = false, placed = false;
	/* UC and UD have no RNR: no receive WQE drops the message, and a
	 * full CQ means packets (the responder's answer, not ours) */
	bool reliable = rc->type == IBV_QPT_RC;
	int nd = -1, ret;

	if (!rings_attach(d) || !atomic_load_explicit(&d->rq->open, memory_order_relaxed))
		return 0;
	rq = d->wq;
	if (rq != d->rq && !atomic_load_explicit(&rq->open, memory_order_relaxed)) {
		/* the SRQ was resized (or is going): packets until its QP's
		 * info names the new ring */
		direct_send_forget(d);
		d->rq_off = 0;
		return 0;
	}
	/* a WRITE's target is checked before anything is claimed */
	if (m->write && !write_target(d, m, dst, &placed))
		return 0;
	ret = srn_cq_ring_reserve_cached(d->cq, d->cq_size, &d->cq_cons, &idx);
	if (ret == -ENOSPC) /* the receiver has yet to poll (UC, UD: packets) */
		return reliable ? not_now(d) : 0;
	if (ret)
		return 0; /* closed (resized): packets */
	for (int t = 0; t < SEND_TAKE_TRIES; t++) {
		uint32_t h = atomic_load_explicit(&rq->head, memory_order_acquire);
		const struct srn_recv_wqe *slot = &rq->wqe[h & (d->rq_max_wr - 1)];

		if (!rq_posted(slot, h) && !rq_wait(slot, h)) {
			rnr = true;
			break;
		}
		/* what is used of it, read in place (recv_map): not all
		 * SRN_MAX_SGE entries (a WRITE's immediate uses only its
		 * wr_id) */
		r_wr_id = slot->wr_id;
		vm = false; /* (this slot's buffers decide) */
		if (m->write)
			nd = len && !placed ? 1 : 0;
		else
			nd = recv_map(d, slot, slot->num_sge, len, dst, raddr,
				      m->vm_ok ? &vm : NULL);
		/* (process_vm_* known to work with this peer before a WQE
		 * is taken: a refusal then means packets, not a failed WQE) */
		if (nd < 0 || (vm && !peer_vm_proven(d->peer, raddr[0])))
			break;
		if (atomic_compare_exchange_strong_explicit(&rq->head, &h, h + 1,
							    memory_order_seq_cst,
							    memory_order_relaxed)) {
			r_head = h + 1;
			/* An SRQ's owner armed its limit: only it can raise
			 * the event, and it may not take from the SRQ itself
			 * for a long time, so it hears from us.  Read after
			 * the take, both sequentially consistent (as the
			 * owner's store): a take made before it armed is not
			 * one it asks about; one made after sees it armed. */
			limit = rq != d->rq &&
				atomic_load_explicit(&rq->limit_armed, memory_order_seq_cst);
			goto take;
		}
		nd = -1; /* the target's own engine took it first */
	}
	srn_cq_ring_unreserve(d->cq, d->cq_size, idx, SRN_CQE_PEER);
	/* UC and UD have no RNR: a message that finds no receive WQE is
	 * dropped, as their responders would (not sent as packets, which
	 * could land after a later message delivered here) */
	if (rnr && !reliable)
		return -ENOENT;
	if (rnr)
		return not_now(d);
	d->rnr_since = 0;
	return 0;

take:
	if (placed)
		rc_count(rc, SRN_CNT_direct_vm);
	if (vm) {
		for (int i = 0; i < nd; i++)
			dst[i].iov_base = (void *)(uintptr_t)raddr[i];
		failed = peer_vm_writev(d->peer, m->src, m->ns, dst, nd) != 0;
		rc_count(rc, SRN_CNT_direct_vm);
	} else {
		scatter(m->src, m->ns, dst, nd, peer_is_self(d->peer));
	}
	/* the completion is written in place, every field (the owner copies
	 * the whole struct): no copy of a half-written one on the stack */
	cqe = srn_cq_ring_slot(d->cq, d->cq_size, idx);
	cqe->wc.wr_id = r_wr_id;
	cqe->wc.status = failed ? IBV_WC_LOC_PROT_ERR : IBV_WC_SUCCESS;
	cqe->wc.opcode = m->write ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
	cqe->wc.vendor_err = 0;
	cqe->wc.byte_len = failed ? 0 : (uint32_t)len;
	cqe->wc.imm_data = m->imm ? m->imm_data : 0;
	cqe->wc.wc_flags = (m->imm ? IBV_WC_WITH_IMM : 0) | (m->grh ? IBV_WC_GRH : 0);
	cqe->wc.qp_num = rc->dqpn;
	cqe->wc.src_qp = rc->qpn;
	cqe->wc.pkey_index = 0;
	cqe->wc.slid = 0;
	cqe->wc.sl = m->sl;
	cqe->wc.dlid_path_bits = 0;
	cqe->rq_head = r_head;
	cqe->rq_tag = d->rq_tag;
	/* Our completion first, as a NIC's ACK would come before the
	 * receiver can answer: a receiver that sees the message, replies
	 * and disconnects must not find us with the send still pending
	 * (libfabric's RxM then closes the connection, and the destroyed
	 * QP's completion is gone). */
	if (!failed && srn_cap_active(&rc->eng->cap))
		cap_msg(rc, d, m);
	if (m->wqe && !failed)
		direct_complete(rc, m->wqe, m->wqe_cnt);
	srn_cq_ring_stamp(d->cq, d->cq_size, idx);
	/* the release store makes the data visible before the completion */
	srn_cq_ring_commit(cqe, idx, SRN_CQE_PEER);
	wake_if_armed(rc, d, m->solicited);
	if (limit)
		rc_doorbell(rc);
	/* The next receive WQE was most likely posted long ago and is not
	 * written again until taken: fetching it now takes its cache miss
	 * off the next SEND's path. */
	__builtin_prefetch(&rq->wqe[r_head & (d->rq_max_wr - 1)]);
	__builtin_prefetch((const char *)&rq->wqe[r_head & (d->rq_max_wr - 1)] + 31);
	d->rnr_since = 0;
	return failed ? -EIO : m->wqe ? 2 : 1;
}

int direct_send(struct srn_rc_state *rc, struct direct_qp *d, struct srn_send_wqe *w)
{
	struct iovec src[SRN_MAX_SGE];
	struct direct_msg m = {
		.src = src,
		.len = w->length,
		.write = w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM,
		.imm = w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM,
		.solicited = (w->send_flags & IBV_SEND_SOLICITED) != 0,
		.imm_data = w->imm_data,
		.remote_addr = w->remote_addr,
		.rkey = w->rkey,
		.vm_ok = true,
		.wqe = w,
		.wqe_cnt = w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? SRN_CNT_direct_write
								 : SRN_CNT_direct_send,
	};
	int ret;

	cqe_prefetch(d);
	/* (any check failing means packets, which give the exact error:
	 * their order here does not matter) */
	m.ns = direct_gather(rc, d, w, src);
	if (m.ns < 0)
		return 0; /* the packet path reports LOC_PROT_ERR */
	ret = deliver(rc, d, &m);
	if (ret == 2)
		ret = 1; /* (completed in deliver) */
	if (ret == -ENOENT) {
		/* UC, dropped: sent, as far as the sender can tell */
		direct_complete(rc, w, SRN_CNT_uc_msg_dropped);
		ret = 1;
	}
	if (ret == -EIO) {
		/* The target's memory went away under a registered MR (it
		 * failed its receive): the protocol's answer to a responder's
		 * local error, w (at the head) failed and the QP in error. */
		completer_fail(rc, IBV_WC_REM_OP_ERR);
		ret = 1;
	}
	return ret;
}

int direct_send_ud(struct srn_rc_state *rc, struct direct_qp *d, bool imm, uint32_t imm_be,
		   bool solicited, uint32_t len, const struct iovec *pay, int npay,
		   enum srn_counter *c)
{
	struct iovec src[1 + SRN_MAX_SGE];
	uint8_t grh[WIRE_GRH_LEN];
	struct direct_msg m = {
		.src = src,
		.ns = 1 + npay,
		.len = WIRE_GRH_LEN + (uint64_t)len,
		.grh = true,
		.sl = ud_wc_sl(rc->l3.family),
		.imm = imm,
		.solicited = solicited,
		.imm_data = imm ? imm_be : 0,
		.vm_ok = true,
	};
	int ret;

	if (npay > SRN_MAX_SGE)
		return 0;
	cqe_prefetch(d);
	/* the receive buffer starts with the GRH slot the packet's IP
	 * header would fill (ud_rx), the RoCE length as on the wire */
	ud_grh(&rc->l3, ud_wire_len(imm, len), grh);
	src[0].iov_base = grh;
	src[0].iov_len = WIRE_GRH_LEN;
	memcpy(src + 1, pay, sizeof(*pay) * (size_t)npay);
	ret = deliver(rc, d, &m);
	/* (-EIO: its receive failed, as ud_rx fails it; an unreliable
	 * sender learns nothing of what became of it) */
	*c = ret == -ENOENT ? SRN_CNT_ud_msg_dropped : SRN_CNT_direct_send;
	return ret == 1 || ret == -ENOENT || ret == -EIO;
}

int direct_send_wr(struct srn_rc_state *rc, struct direct_qp *d, const struct ibv_send_wr *wr,
		   uint32_t len, const struct iovec *src)
{
	struct direct_msg m = {
		.src = src,
		.ns = len ? 1 : 0,
		.len = len,
		.write = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM,
		.imm = true,
		.solicited = (wr->send_flags & IBV_SEND_SOLICITED) != 0,
		.imm_data = wr->imm_data,
		.remote_addr = wr->wr.rdma.remote_addr,
		.rkey = wr->wr.rdma.rkey,
	};

	if (wr->opcode == IBV_WR_SEND)
		m.imm = false, m.imm_data = 0;
	if (!d->rq || (m.write && !(d->access & IBV_ACCESS_REMOTE_WRITE)))
		return 0;
	return deliver(rc, d, &m) == 1; /* (else the general path tries
					  * again, and waits or sends) */
}

bool direct_send_uc_landed(struct direct_qp *d, uint32_t psn)
{
	return rings_attach(d) &&
	       atomic_load_explicit(&d->rq->uc_epsn, memory_order_acquire) == psn;
}

void direct_send_prefetch(const struct direct_qp *d)
{
	cqe_prefetch(d);
}
