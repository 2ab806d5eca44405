/* transport/direct: RDMA WRITE / READ / atomics executed by the initiator
 * on a same-host target's memory (see direct.h).
 *
 * Checks, in the order the responder makes them (responder.c): the target
 * QP (registry info: RC, RTR/RTS, connected to exactly us, access flags),
 * the atomic's alignment, then the rkey (the target's MR directory entry:
 * key, PD == the target QP's PD, access, bounds), and our own SGEs as the
 * requester and completer check them.  Only when all pass is anything
 * read or written; otherwise nothing happened and the packet path takes
 * the WQE and produces the protocol's answer (a NAK, an error WC).
 *
 * Cost: the views of the target QP and of its last few rkeys are cached
 * per QP with the generation numbers of the seqlocks they were read under;
 * an operation revalidates them with one load each, then copies.  No
 * system call unless memory has no shared mapping (process_vm_*).
 */
#include "transport/direct.h"
#include "net/clock.h"
#include "transport/direct_priv.h"
#include "net/life.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/mode.h"
#include "net/registry.h"
#include "transport/peer_map.h"
#include "transport/place.h"
#include "transport/rc.h"
#include "verbs/shared_rings.h"
#include "verbs/mr_dir.h"

/* ---- publishing (target side) -------------------------------------- */

/* Every state change publishes the QP's state, type and peer (what
 * `softrnic qps` shows); only a QP a same-host peer may act on carries
 * NET_REG_QP_DIRECT and what that peer needs. */
void direct_publish(struct srn_rc_state *rc)
{
	struct srn_qp *qp = rc->qp;
	enum ibv_qp_state st = rc_state(rc);
	struct net_reg_qpinfo in;
	bool ud = rc->type == IBV_QPT_UD;

	if (!rc->eng || !rc->eng->reg)
		return;
	memset(&in, 0, sizeof(in));
	in.pid = getpid();
	in.state = (uint8_t)st;
	in.type = (uint8_t)qp->ex.qp_base.qp_type; /* (XRC: not rc->type) */
	if (ud) {
		/* any sender may come: it checks our address and Q_Key */
		in.dfamily = (uint16_t)rc->eng->udp.local.family;
		memcpy(in.dip, rc->eng->udp.local.ip, sizeof(in.dip));
		in.qkey = rc->qkey;
	} else {
		in.dfamily = (uint16_t)rc->peer.family;
		in.dqpn = rc->dqpn;
		memcpy(in.dip, rc->peer.ip, sizeof(in.dip));
	}
	if (!rc->xrc && (ud || (rc_connected(rc) && rc->path_ok)) && net_shm_allowed() &&
	    (st == IBV_QPS_RTR || st == IBV_QPS_RTS || st == IBV_QPS_SQD)) {
		in.flags = NET_REG_QP_DIRECT;
		in.mrdir_nonce = qp->ctx->mrdir_nonce;
		in.pd_handle = qp->pd ? qp->pd->ibv.handle : 0;
		in.access = qp->a.attr.qp_access_flags;
		direct_send_publish(qp, &in);
	}
	net_registry_publish(rc->eng->reg, rc->qpn, &in);
}

void direct_unpublish(struct srn_rc_state *rc)
{
	if (rc->eng && rc->eng->reg)
		net_registry_publish(rc->eng->reg, rc->qpn, NULL);
}

/* ---- the initiator's cached view of its target ---------------------- */

static void mr_release(struct peer *p, struct direct_mr *m)
{
	if (m->mh)
		peer_unmap_memfd(p, m->mh);
	m->mh = NULL;
	m->map = NULL;
	m->map_lo = 0;
	m->map_len = 0;
}

static void mr_cache_clear(struct direct_qp *d)
{
	for (int i = 0; i < DIRECT_MRS; i++)
		mr_release(d->peer, &d->mr[i]);
	memset(d->mr, 0, sizeof(d->mr));
}

void direct_qp_free(struct direct_qp *d)
{
	if (!d)
		return;
	mr_cache_clear(d);
	direct_send_forget(d);
	peer_put(d->peer);
	peer_put(d->self); /* (its mappings are our own memory: none held) */
	free(d);
}

void direct_qp_forget(struct srn_rc_state *rc)
{
	direct_qp_free(rc->direct);
	rc->direct = NULL;
	direct_ud_forget(rc);
}

static size_t ip_len(int family)
{
	return family == AF_INET ? 4 : 16;
}

bool direct_reachable(const struct srn_rc_state *rc)
{
	const struct srn_engine *eng = rc->eng;

	/* Only a destination on this host can be reached in memory; the
	 * registry is this host's, so its QPN must be too. */
	return net_direct_enabled() && eng->reg && srn_engine_local(eng, rc->peer.family) &&
	       net_addr_is_local(rc->peer.family, rc->peer.ip);
}

struct direct_qp *direct_qp_new(struct srn_rc_state *rc)
{
	struct direct_qp *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->dqpn = rc->dqpn;
	d->off = rc->xrc || !direct_reachable(rc) ||
		 !(d->qgen = net_registry_qpinfo_seq(rc->eng->reg, rc->dqpn));
	/* our own directory, for our gather lists (direct_gather) */
	if (!d->off && rc->qp->pd && srn_mrdir_active(rc->qp->ctx)) {
		d->self = peer_get(getpid(), rc->qp->ctx->mrdir_nonce);
		d->self_pd = rc->qp->pd->ibv.handle;
	}
	return d;
}

/* The QP's cache, created on first use; NULL when direct is not for it. */
static struct direct_qp *direct_qp_get(struct srn_rc_state *rc)
{
	struct direct_qp *d = rc->direct;

	if (!d && rc_connected(rc))
		d = rc->direct = direct_qp_new(rc);
	return d && !d->off ? d : NULL;
}


/* Re-read the target QP's info after its generation moved: the verdict
 * for that generation. */
static bool qp_revalidate(struct srn_rc_state *rc, struct direct_qp *d, uint64_t now)
{
	struct srn_engine *eng = rc->eng;
	const struct net_addr *me = NULL;
	struct net_reg_qpinfo in;
	uint32_t gen;

	d->qp_ok = false;
	d->have = false;
	mr_cache_clear(d);
	direct_send_forget(d);
	if (net_registry_qpinfo(eng->reg, rc->dqpn, &in, &gen) || !(in.flags & NET_REG_QP_DIRECT)) {
		/* not (yet) open to us, or its owner runs with
		 * SOFTRNIC_TRANSPORT=udp: packets meanwhile */
		srn_dbg(eng, "qp %u: direct: no info for qpn %u", rc->qpn, rc->dqpn);
		d->retry_at = now + DIRECT_NOINFO_NS;
		return false;
	}
	d->have = true;
	d->gen = gen;
	/* RC, UC: connected to exactly this QP at this address, and able
	 * to receive (a responder executes in RTR and RTS); UD: at the
	 * address we send to, receiving (ud_rx: RTR, RTS, SQD) */
	if (rc->type == IBV_QPT_UD
		    ? in.type != IBV_QPT_UD ||
			      (in.state != IBV_QPS_RTR && in.state != IBV_QPS_RTS &&
			       in.state != IBV_QPS_SQD) ||
			      in.dfamily != rc->peer.family ||
			      memcmp(in.dip, rc->peer.ip, ip_len(in.dfamily))
		    : in.type != rc->type ||
			      (in.state != IBV_QPS_RTR && in.state != IBV_QPS_RTS) ||
			      in.dqpn != rc->qpn || !(me = srn_engine_local(eng, in.dfamily)) ||
			      memcmp(in.dip, me->ip, ip_len(in.dfamily))) {
		srn_dbg(eng, "qp %u: direct: qpn %u not usable (type %u state %u dqpn %u)",
			rc->qpn, rc->dqpn, in.type, in.state, in.dqpn);
		return false;
	}
	if (!d->peer || d->peer_pid != in.pid || d->peer_nonce != in.mrdir_nonce) {
		peer_put(d->peer);
		d->life = NULL;
		d->peer = peer_get(in.pid, in.mrdir_nonce);
		d->peer_pid = in.pid;
		d->peer_nonce = in.mrdir_nonce;
		if (!d->peer) {
			srn_dbg(eng, "qp %u: direct: no MR directory of pid %d", rc->qpn, in.pid);
			/* no directory (yet, or none: SOFTRNIC_TRANSPORT=udp
			 * over there): ask again later, not per operation */
			d->have = false;
			d->retry_at = now + DIRECT_RETRY_NS;
			return false;
		}
		d->life = peer_life(d->peer);
		d->alive_at = now + DIRECT_ALIVE_NS;
	}
	d->access = in.access;
	d->pd_handle = in.pd_handle;
	d->qkey = in.qkey;
	d->rq_memfd = in.rq_memfd;
	d->rq_max_wr = in.rq_max_wr;
	d->rq_ino = in.rq_ino;
	d->rq_off = in.rq_off;
	d->qp_ok = true;
	srn_dbg(eng, "qp %u: direct: qpn %u of pid %d reachable in memory", rc->qpn, rc->dqpn,
		in.pid);
	return true;
}

/* Hot: does the target QP still accept direct operations from us? */
bool direct_qp_check(struct srn_rc_state *rc, struct direct_qp *d)
{
	uint64_t now = net_coarse_ns();

	if (d->have && atomic_load_explicit(d->qgen, memory_order_acquire) == d->gen) {
		if (!d->qp_ok)
			return false;
	} else if (d->retry_at && now < d->retry_at) {
		return false;
	} else if (!qp_revalidate(rc, d, now)) {
		return false;
	}
	/* A dead target's memory is still mapped here: writing it would
	 * "succeed" where packets would time out.  Checked on every
	 * operation where a load tells; rate-limited where it takes a poll. */
	if (d->life ? !net_life_alive(d->life) : now >= d->alive_at) {
		if (!peer_alive(d->peer)) {
			d->qp_ok = false;
			return false;
		}
		d->alive_at = now + DIRECT_ALIVE_NS;
	}
	return true;
}

/* (Re)read the cached key's entry in p's directory (pd: the PD handle
 * the MR must be in). */
static void mr_refresh(struct peer *p, uint32_t pd, struct direct_mr *m)
{
	struct srn_mrdir_entry s;
	uint64_t size;
	char *base;

	m->ok = false;
	mr_release(p, m); /* a changed MR may be another memfd */
	/* twice: the owner's table may have grown and moved the entry */
	for (int look = 0; look < 2; look++) {
		if (!m->e)
			m->e = peer_mr_entry(p, m->rkey);
		if (!m->e || !peer_mr_snapshot(m->e, &s, &m->gen)) {
			m->e = NULL; /* look again next time */
			return;
		}
		if (s.key == m->rkey)
			break;
		m->e = NULL;
	}
	if (!m->e || s.key == 0 || s.pd_handle != pd)
		return;
	m->ok = true;
	m->access = s.access;
	m->iova = s.iova;
	m->length = s.length;
	m->vaddr = s.vaddr;
	if (peer_is_self(p) && (s.access & IBV_ACCESS_ON_DEMAND)) {
		/* our own ODP MR: each access faults its pages in first (the
		 * packet path's srn_mr_resolve; direct_gather_sge) */
	} else if (peer_is_self(p)) {
		/* our own memory: the owner's address is ours */
		m->map = (char *)(uintptr_t)s.vaddr;
		m->map_lo = 0;
		m->map_len = s.length;
	} else if (s.memfd >= 0 &&
		   (m->mh = peer_map_memfd(p, s.memfd, s.memfd_ino, &base, &size))) {
		uint64_t held = s.length - s.map_head - s.map_tail;

		if (s.memfd_off < size && (uint64_t)s.map_head + s.map_tail < s.length) {
			m->map = base + s.memfd_off;
			m->map_lo = s.map_head;
			m->map_len = size - s.memfd_off < held ? size - s.memfd_off : held;
		}
	}
}

/* Hot: the cached view of key in cache c (n entries) of p's MRs,
 * revalidated. */
static struct direct_mr *mr_cache_get(struct peer *p, uint32_t pd, struct direct_mr *c,
				      unsigned int n, unsigned int *next, uint32_t key)
{
	struct direct_mr *m;

	for (unsigned int i = 0; i < n; i++) {
		m = &c[i];
		if (m->rkey != key || m->rkey == 0)
			continue;
		if (!m->e || peer_mr_gen(m->e) != m->gen)
			mr_refresh(p, pd, m);
		return m;
	}
	m = &c[(*next)++ % n];
	mr_release(p, m);
	memset(m, 0, sizeof(*m));
	m->rkey = key;
	mr_refresh(p, pd, m);
	return m;
}

struct direct_mr *direct_mr_get(struct direct_qp *d, uint32_t rkey)
{
	return mr_cache_get(d->peer, d->pd_handle, d->mr, DIRECT_MRS, &d->mr_next, rkey);
}

/* Where [va, va+len) of the MR is: *ptr mapped here, else *vaddr in the
 * owner (process_vm_*).  false if the responder would refuse it. */
bool direct_mr_range(const struct direct_mr *m, uint64_t va, uint64_t len,
			     unsigned int access, char **ptr, uint64_t *vaddr)
{
	uint64_t off;

	if (!m->ok || (access & ~m->access))
		return false;
	/* overflow-safe, as srn_mr_resolve */
	if (va < m->iova || len > m->length || (off = va - m->iova) > m->length - len)
		return false;
	*ptr = m->map && off >= m->map_lo && off - m->map_lo <= m->map_len &&
			       len <= m->map_len - (off - m->map_lo)
		       ? m->map + (off - m->map_lo)
		       : NULL;
	*vaddr = m->vaddr + off;
	return true;
}

void direct_done(struct srn_rc_state *rc, uint64_t wr_id, enum ibv_wr_opcode op,
		 uint32_t byte_len, bool signaled, enum srn_counter c)
{
	/* as the completer does for a successful WQE */
	if (signaled) {
		struct ibv_wc wc;

		memset(&wc, 0, sizeof(wc));
		wc.wr_id = wr_id;
		wc.status = IBV_WC_SUCCESS;
		wc.opcode = rc_wc_opcode(op);
		wc.qp_num = rc->qpn;
		wc.byte_len = byte_len;
		srn_cq_push(rc->qp->send_cq, &wc, false);
	}
	/* the QP's own count: every writer of it holds qp->lock, so no
	 * locked instruction (the engine's is shared by all its QPs) */
	atomic_store_explicit(&rc->cnt[c], atomic_load_explicit(&rc->cnt[c], memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_fetch_add_explicit(&rc->eng->cnt[c], 1, memory_order_relaxed);
}

void direct_complete(struct srn_rc_state *rc, struct srn_send_wqe *w, enum srn_counter c)
{
	struct srn_qp *qp = rc->qp;

	direct_done(rc, w->wr_id, w->opcode, rc_is_atomic(w) ? 8 : (uint32_t)w->length,
		    qp->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED), c);
	w->state = WQE_NEW;
	qp->sq.head++;
	qp->sq.next++;
}

static void copy_out(char *dst, const struct iovec *iov, int n, bool may_overlap)
{
	for (int i = 0; i < n; i++) {
		if (may_overlap)
			memmove(dst, iov[i].iov_base, iov[i].iov_len);
		else /* (the target may poll its last byte) */
			srn_place(dst, iov[i].iov_base, iov[i].iov_len);
		dst += iov[i].iov_len;
	}
}

static void copy_in(const char *src, const struct iovec *iov, int n, bool may_overlap)
{
	for (int i = 0; i < n; i++) {
		if (may_overlap)
			memmove(iov[i].iov_base, src, iov[i].iov_len);
		else
			memcpy(iov[i].iov_base, src, iov[i].iov_len);
		src += iov[i].iov_len;
	}
}

int direct_gather_sge(struct direct_qp *d, const struct ibv_sge *sge, uint64_t len,
		      struct iovec *iov)
{
	struct direct_mr *m;
	uint64_t vaddr;
	char *ptr;

	/* the lkey in our own directory: the checks srn_mr_resolve makes
	 * (key, PD, bounds; a gather needs no access right) */
	if (!d || !d->self)
		return -1;
	m = mr_cache_get(d->self, d->self_pd, d->lmr, DIRECT_LMRS, &d->lmr_next, sge->lkey);
	if (!direct_mr_range(m, sge->addr, len, 0, &ptr, &vaddr))
		return -1;
	/* our own ODP MR is never mapped for peers: its pages are here */
	if (!ptr && (m->access & IBV_ACCESS_ON_DEMAND) && srn_odp_fault_in(vaddr, len, false))
		ptr = (char *)(uintptr_t)vaddr;
	if (!ptr)
		return -1;
	iov[0].iov_base = ptr;
	iov[0].iov_len = len;
	return 1;
}

bool direct_wr_payload(struct direct_qp *d, const struct ibv_send_wr *wr, uint32_t len,
		       struct iovec *src)
{
	if (!len)
		return true;
	if (wr->send_flags & IBV_SEND_INLINE) {
		/* the caller's buffer, read now: as INLINE allows */
		src[0].iov_base = (void *)(uintptr_t)wr->sg_list[0].addr;
		src[0].iov_len = len;
		return true;
	}
	return direct_gather_sge(d, &wr->sg_list[0], len, src) == 1;
}

int direct_gather(struct srn_rc_state *rc, struct direct_qp *d, struct srn_send_wqe *w,
		  struct iovec *iov)
{
	if (!w->length)
		return 0;
	if (w->send_flags & IBV_SEND_INLINE) {
		iov[0].iov_base = w->inline_data;
		iov[0].iov_len = w->length;
		return 1;
	}
	/* One SGE (the common case) without the context lock; anything
	 * else, or a verdict of no, goes the usual way, which gives the
	 * exact answer. */
	if (w->num_sge == 1 && w->sge[0].length >= w->length &&
	    direct_gather_sge(d, &w->sge[0], w->length, iov) == 1)
		return 1;
	return rc_sge_map(rc, rc->qp->pd, w->sge, w->num_sge, 0, w->length, 0, iov, SRN_MAX_SGE);
}

/* A capture runs: the packets w stands for (transport/capture.h). */
static void cap_rdma(struct srn_rc_state *rc, const struct direct_qp *d,
		     const struct srn_send_wqe *w, const struct iovec *pay, int npay, uint64_t orig)
{
	struct srn_cap_op op = {
		.opcode = w->opcode,
		.dqpn = rc->dqpn,
		.peer_pid = (uint32_t)d->peer_pid,
		.len = w->length,
		.pay = pay,
		.npay = npay,
		.va = w->remote_addr,
		.rkey = w->rkey,
		.swap_add = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->swap : w->compare_add,
		.compare = w->compare_add,
		.orig = orig,
	};

	srn_cap_direct(rc, &op);
}

static bool do_write(struct srn_rc_state *rc, struct direct_qp *d, struct srn_send_wqe *w)
{
	struct iovec iov[SRN_MAX_SGE];
	struct direct_mr *m;
	uint64_t len = w->length, vaddr = 0;
	char *dst = NULL;
	int n = 0;

	if (len) {
		m = direct_mr_get(d, w->rkey);
		if (!direct_mr_range(m, w->remote_addr, len, IBV_ACCESS_REMOTE_WRITE, &dst, &vaddr))
			return false;
		if (!dst && (peer_is_self(d->peer) || !peer_vm_usable(d->peer)))
			return false;
		n = direct_gather(rc, d, w, iov);
		if (n < 0)
			return false; /* the packet path reports LOC_PROT_ERR */
		if (dst) {
			copy_out(dst, iov, n, peer_is_self(d->peer));
		} else {
			if (peer_vm_write(d->peer, vaddr, iov, n, len))
				return false; /* rewritten whole by the packet path */
			rc_count(rc, SRN_CNT_direct_vm);
		}
	}
	if (srn_cap_active(&rc->eng->cap))
		cap_rdma(rc, d, w, iov, n, 0);
	direct_complete(rc, w, SRN_CNT_direct_write);
	return true;
}

static bool do_read(struct srn_rc_state *rc, struct direct_qp *d, struct srn_send_wqe *w)
{
	struct iovec iov[SRN_MAX_SGE];
	struct direct_mr *m;
	uint64_t len = w->length, vaddr = 0;
	char *src = NULL;
	int n;

	if (len) {
		m = direct_mr_get(d, w->rkey);
		if (!direct_mr_range(m, w->remote_addr, len, IBV_ACCESS_REMOTE_READ, &src, &vaddr))
			return false;
		if (!src && (peer_is_self(d->peer) || !peer_vm_usable(d->peer)))
			return false;
		n = rc_sge_map(rc, rc->qp->pd, w->sge, w->num_sge, 0, len,
			       IBV_ACCESS_LOCAL_WRITE, iov, SRN_MAX_SGE);
		if (n < 0)
			return false;
		if (src) {
			copy_in(src, iov, n, peer_is_self(d->peer));
		} else {
			if (peer_vm_read(d->peer, vaddr, iov, n, len))
				return false;
			rc_count(rc, SRN_CNT_direct_vm);
		}
	}
	if (srn_cap_active(&rc->eng->cap))
		cap_rdma(rc, d, w, iov, len ? n : 0, 0);
	direct_complete(rc, w, SRN_CNT_direct_read);
	return true;
}

static bool do_atomic(struct srn_rc_state *rc, struct direct_qp *d, struct srn_send_wqe *w)
{
	struct iovec res[1];
	struct direct_mr *m;
	uint64_t vaddr, orig, *t;
	char *ptr = NULL;
	bool want_res = w->num_sge > 0 && w->sge[0].length > 0;

	if (w->remote_addr & 7)
		return false; /* the responder's INV_REQ */
	m = direct_mr_get(d, w->rkey);
	/* process_vm_* is no atomic: without a mapping, packets do it */
	if (!direct_mr_range(m, w->remote_addr, 8, IBV_ACCESS_REMOTE_ATOMIC, &ptr, &vaddr) || !ptr ||
	    ((uintptr_t)ptr & 7))
		return false;
	if (want_res && rc_sge_map(rc, rc->qp->pd, w->sge, 1, 0, 8, IBV_ACCESS_LOCAL_WRITE,
				   res, 1) != 1)
		return false;
	t = (uint64_t *)ptr;
	/* __atomic as the responder's do_atomic: operations from both
	 * paths on one word are atomic with each other */
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		orig = w->compare_add;
		__atomic_compare_exchange_n(t, &orig, w->swap, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		orig = __atomic_fetch_add(t, w->compare_add, __ATOMIC_SEQ_CST);
	}
	if (want_res)
		memcpy(res[0].iov_base, &orig, 8); /* host order, as the completer */
	if (srn_cap_active(&rc->eng->cap))
		cap_rdma(rc, d, w, NULL, 0, orig);
	direct_complete(rc, w, SRN_CNT_direct_atomic);
	return true;
}

int direct_try(struct srn_rc_state *rc, struct srn_send_wqe *w)
{
	struct direct_qp *d;
	unsigned int need;
	int done;

	switch (w->opcode) {
	case IBV_WR_RDMA_WRITE:
		need = IBV_ACCESS_REMOTE_WRITE;
		break;
	case IBV_WR_RDMA_READ:
		need = IBV_ACCESS_REMOTE_READ;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		need = IBV_ACCESS_REMOTE_ATOMIC;
		break;
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		need = 0; /* a receive needs no remote access right */
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		need = IBV_ACCESS_REMOTE_WRITE; /* and a receive WQE */
		break;
	default:
		return false;
	}
	d = direct_qp_get(rc);
	if (!d)
		return false;
	/* (UC after packets: once the target took them all in, or they are
	 * old enough that none can still be on their way: one sent before
	 * the target was ready may have been dropped and never counted) */
	if (d->uc_packets && direct_qp_check(rc, d) &&
	    (direct_send_uc_landed(d, rc->req_psn) ||
	     net_coarse_ns() - d->uc_packets_ns > DIRECT_UC_STALE_NS))
		d->uc_packets = false;
	if (d->uc_packets)
		return false;
	if (w->length > SRN_MAX_MSG_SIZE || !direct_qp_check(rc, d) ||
	    (need && !(d->access & need))) {
		done = 0;
	} else if (!need || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
		done = direct_send(rc, d, w);
	} else if (w->opcode == IBV_WR_RDMA_WRITE) {
		done = do_write(rc, d, w);
	} else if (w->opcode == IBV_WR_RDMA_READ) {
		done = do_read(rc, d, w);
	} else {
		done = do_atomic(rc, d, w);
	}
	if (!done) {
		rc_count(rc, SRN_CNT_direct_fallback);
		/* UC: no ACK says when packets sent now have landed, so a
		 * later message delivered here could overtake them: the QP
		 * stays on packets until the target's responder has taken
		 * them all in (its uc_epsn). */
		if (rc->type == IBV_QPT_UC) {
			d->uc_packets = true;
			d->uc_packets_ns = net_coarse_ns();
		}
	}
	return done;
}

/* Where a WRITE of len bytes at va with rkey lands, as the cache says
 * now, without refreshing it: only a guess to prefetch (a stale or wrong
 * one costs nothing; the real checks come after). */
static const char *write_guess(const struct direct_qp *d, uint32_t rkey, uint64_t va,
			       uint64_t len)
{
	for (int i = 0; i < DIRECT_MRS; i++) {
		uint64_t vaddr;
		char *ptr;

		if (d->mr[i].rkey == rkey)
			return direct_mr_range(&d->mr[i], va, len, IBV_ACCESS_REMOTE_WRITE, &ptr,
					       &vaddr) ? ptr : NULL;
	}
	return NULL;
}

int srn_transport_post_now(struct srn_qp *qp, const struct ibv_send_wr *wr, uint32_t len)
{
	struct srn_rc_state *rc = qp->rc;
	struct direct_qp *d = rc ? rc->direct : NULL;
	bool write = wr->opcode == IBV_WR_RDMA_WRITE;
	struct iovec src[1];
	uint64_t vaddr;
	char *dst = NULL;

	if (rc && rc->type == IBV_QPT_UD)
		return direct_ud_post_now(rc, wr, len);
	if (!d || d->off || d->uc_packets)
		return 0;
	/* The target may be spinning on the lines we are about to write:
	 * ask for them first, so they move while we check. */
	if (write) {
		const char *g = len ? write_guess(d, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len)
				    : NULL;

		if (g) {
			srn_prefetch_w(g);
			srn_prefetch_w(g + len - 1);
		}
	} else {
		direct_send_prefetch(d);
	}
	/* nothing that would hold a new WQE back */
	if (!rc_connected(rc) || !rc->path_ok || rc->rnr_wait || rc->resume_at ||
	    rc_state(rc) != IBV_QPS_RTS || !direct_qp_check(rc, d))
		return 0;
	if (write && !(d->access & IBV_ACCESS_REMOTE_WRITE))
		return 0;
	if (write && len) {
		/* (process_vm_* and every refusal: the general path) */
		if (!direct_mr_range(direct_mr_get(d, wr->wr.rdma.rkey), wr->wr.rdma.remote_addr, len,
				     IBV_ACCESS_REMOTE_WRITE, &dst, &vaddr) || !dst)
			return 0;
	}
	if (!direct_wr_payload(d, wr, len, src))
		return 0;
	if (write) {
		if (len)
			copy_out(dst, src, 1, peer_is_self(d->peer));
		if (srn_cap_active(&rc->eng->cap)) {
			struct srn_cap_op op = {
				.opcode = IBV_WR_RDMA_WRITE, .dqpn = rc->dqpn,
				.peer_pid = (uint32_t)d->peer_pid, .len = len, .pay = src,
				.npay = len ? 1 : 0, .va = wr->wr.rdma.remote_addr,
				.rkey = wr->wr.rdma.rkey,
			};

			srn_cap_direct(rc, &op);
		}
	} else if (!direct_send_wr(rc, d, wr, len, src)) {
		return 0;
	}
	direct_done(rc, wr->wr_id, wr->opcode, len,
		    qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED),
		    wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM
			    ? SRN_CNT_direct_send : SRN_CNT_direct_write);
	return 1;
}
