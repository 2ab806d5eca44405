/* transport/tx: turn a header description plus payload pieces into one
 * RoCE packet (headers, payload straight from registered memory, pad,
 * ICRC) and hand it to the socket.  No allocation per packet. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "net/pcap.h"
#include "net/shm_ring.h"
#include "transport/rc.h"

enum { TX_MAX_IOV = SRN_MAX_SGE + 2 };

uint32_t rc_wqe_npkts(const struct srn_rc_state *rc, const struct srn_send_wqe *w)
{
	if (rc_is_atomic(w))
		return 1;
	return rc_pmtu_div_up(rc, w->length);
}

int rc_sge_map(struct srn_rc_state *rc, struct srn_pd *pd,
	       const struct ibv_sge *sge, uint32_t nsge,
	       uint64_t off, uint64_t len, unsigned int access,
	       struct iovec *iov, int max_iov)
{
	struct srn_qp *qp = rc->qp;
	int n = 0;

	for (uint32_t i = 0; i < nsge && len > 0; i++) {
		uint64_t take;
		void *p;

		if (off >= sge[i].length) {
			off -= sge[i].length;
			continue;
		}
		take = sge[i].length - off;
		if (take > len)
			take = len;
		if (n == max_iov)
			return -1;
		if (srn_mr_resolve(qp->ctx, pd, sge[i].lkey, false,
				   sge[i].addr + off, take, access, &p) != SRN_MR_OK)
			return -1;
		iov[n].iov_base = p;
		iov[n].iov_len = take;
		n++;
		len -= take;
		off = 0;
	}
	return len == 0 ? n : -1;
}

int rc_sge_map_cached(struct srn_rc_state *rc, struct srn_pd *pd, const struct ibv_sge *sge,
		      uint32_t nsge, uint64_t off, uint64_t len, unsigned int access,
		      struct iovec *iov, int max_iov, uint8_t **base, uint32_t *gen)
{
	if (nsge == 1 && len) {
		uint32_t g = atomic_load_explicit(&rc->qp->ctx->mr_gen, memory_order_acquire);

		if (!*base || *gen != g) {
			struct iovec whole;

			*base = NULL;
			if (rc_sge_map(rc, pd, sge, 1, 0, sge[0].length, access, &whole, 1) == 1) {
				*base = whole.iov_base;
				*gen = g;
			}
		}
		if (*base && off <= sge[0].length && len <= sge[0].length - off) {
			iov[0].iov_base = *base + off;
			iov[0].iov_len = len;
			return 1;
		}
	}
	return rc_sge_map(rc, pd, sge, nsge, off, len, access, iov, max_iov);
}

/* ---- GSO batching ----------------------------------------------------------
 * Between rc_tx_batch_begin and rc_tx_batch_end (one requester_run, under
 * the QP's lock) packets to one destination are collected, payload still
 * pointing into registered memory, and leave in UDP_SEGMENT (GSO) sends:
 * one per ~60 KiB instead of one per packet.  Each is a complete RoCE
 * packet whose ICRC uses its index in its send as IPv4 ID, which is what
 * the kernel gives GSO segments (docs/wire.md).  GSO wants equal segments
 * except the last, so a packet of another size starts a new send (a
 * group); the groups of a batch leave together in one sendmmsg (an RDMA
 * WRITE's first packet, with its RETH, is longer than the rest: without
 * this every message cost two system calls).  Per thread, so no locking;
 * flushed before the lock is let go, so a QP's packets keep their order. */
enum {
	TXB_MAX_SEGS = 128,
	TXB_MAX_GROUPS = 8,
	TXB_MAX_BYTES = 65000,       /* per send: under the 65507-byte UDP limit */
	TXB_MAX_GROUP_SEGS = 64,     /* per send: the kernel's UDP_MAX_SEGMENTS */
	TXB_MAX_IOV = 1024,          /* UIO_MAXIOV */
	TXB_TAIL = 8,                /* pad (<= 3) + ICRC */
};

struct tx_batch {
	int depth;                   /* begin/end nesting */
	struct srn_engine *eng;      /* socket and destination of the batch */
	struct net_addr to;
	int nseg, niov;              /* in all groups */
	int ngrp;
	bool grp_closed;             /* the last group ended with a short packet */
	bool faults;                 /* net_udp_faults(), fixed for the process */
	bool ack;                    /* holds a responder's ACK or NAK */
	uint32_t grp_bytes;          /* in the last group */
	uint64_t cnt_pkts, cnt_bytes; /* eng's tx counters, added at the flush */
	struct net_udp_gso grp[TXB_MAX_GROUPS];
	int seg_iov[TXB_MAX_SEGS];   /* where each packet starts in iov */
	struct iovec iov[TXB_MAX_IOV];
	/* Headers and tails, back to back in packet order: a packet's tail
	 * ends where the next one's header begins, so the GSO send carries
	 * them as one iovec (net/udp.c) */
	uint32_t ht_used;
	uint8_t ht[TXB_MAX_SEGS * (WIRE_MAX_HDR_LEN + TXB_TAIL)];
};

/* initial-exec: an offset from the thread pointer, where the default
 * model for a shared library calls __tls_get_addr at every use (a few
 * per packet).  One pointer: fits the static TLS room glibc keeps for a
 * library that is dlopen()ed. */
static __thread struct tx_batch *txb __attribute__((tls_model("initial-exec")));

/* Each thread's batch is freed when the thread exits: the key's
 * destructor gets the pointer registered with pthread_setspecific. */
static pthread_key_t txb_key;
static pthread_once_t txb_key_once = PTHREAD_ONCE_INIT;
static bool txb_key_ok;

static void txb_free(void *p)
{
	if (p == txb)
		txb = NULL; /* a later send in this thread allocates anew */
	free(p);
}

static void txb_key_init(void)
{
	txb_key_ok = pthread_key_create(&txb_key, txb_free) == 0;
}

static void txb_flush(void)
{
	struct tx_batch *b = txb;
	struct net_udp *u;
	int done = 0, ret = 0;

	if (!b || b->ngrp == 0)
		return;
	/* (rc_resolve_path gave every batched QP a path: u is there) */
	u = srn_engine_sock(b->eng, b->to.family);
	while (u && done < b->ngrp) {
		ret = net_udp_send_gso(u, &b->to, b->iov, b->seg_iov,
				       b->grp + done, b->ngrp - done);
		if (ret == -EAGAIN && net_udp_wait_writable(u, 5))
			ret = net_udp_send_gso(u, &b->to, b->iov, b->seg_iov,
					       b->grp + done, b->ngrp - done);
		if (ret <= 0)
			break;
		done += ret;
	}
	if (ret == -EAGAIN)
		atomic_fetch_add_explicit(&b->eng->cnt[SRN_CNT_tx_eagain], 1,
					  memory_order_relaxed);
	else if (ret < 0)
		atomic_fetch_add_explicit(&b->eng->cnt[SRN_CNT_tx_error], 1,
					  memory_order_relaxed);
	/* What could not go is lost like on a wire; the ACK timeout resends
	 * it. */
	atomic_fetch_add_explicit(&b->eng->cnt[SRN_CNT_tx_packets], b->cnt_pkts,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&b->eng->cnt[SRN_CNT_tx_bytes], b->cnt_bytes,
				  memory_order_relaxed);
	b->cnt_pkts = b->cnt_bytes = 0;
	b->nseg = b->niov = b->ngrp = 0;
	b->ht_used = 0;
	b->grp_bytes = 0;
	b->grp_closed = false;
	b->ack = false;
}

void rc_tx_batch_begin(void)
{
	if (!txb) {
		/* one per thread that ever sends, freed at its exit */
		pthread_once(&txb_key_once, txb_key_init);
		txb = calloc(1, sizeof(*txb));
		if (!txb)
			return;
		txb->faults = net_udp_faults();
		if (txb_key_ok)
			pthread_setspecific(txb_key, txb);
	}
	txb->depth++;
}

void rc_tx_batch_end(void)
{
	if (!txb || txb->depth == 0)
		return;
	if (--txb->depth == 0)
		txb_flush();
}

void rc_tx_batch_note_ack(void)
{
	if (txb && txb->depth)
		txb->ack = true;
}

bool rc_tx_batch_has_ack(void)
{
	return txb && txb->ack;
}

/* UC and UD complete a WQE once its packets have left: send what is
 * queued now (the batch stays open). */
void rc_tx_batch_flush(void)
{
	txb_flush();
}

static bool same_addr(const struct net_addr *a, const struct net_addr *b)
{
	return a->family == b->family && a->port == b->port && !memcmp(a->ip, b->ip, 16);
}

/* Queue a packet described by iov[0..n) (header first, tail last).  The
 * header and tail are copied; the payload stays where it is. */
static int txb_add(struct srn_rc_state *rc, const struct iovec *iov, int n,
		   uint32_t len, int hlen, int tlen)
{
	struct tx_batch *b = txb;
	struct wire_l3 l3 = rc->l3;
	struct net_udp_gso *g;
	uint32_t icrc;
	uint8_t *hdr, *tail;
	int k;

	if (b->nseg && (b->eng != rc->eng || !same_addr(&b->to, &rc->peer) ||
			b->nseg == TXB_MAX_SEGS || b->niov + n > TXB_MAX_IOV))
		txb_flush();
	g = b->ngrp ? &b->grp[b->ngrp - 1] : NULL;
	if (g && (b->grp_closed || len > g->seg || g->nseg == TXB_MAX_GROUP_SEGS ||
		  b->grp_bytes + len > TXB_MAX_BYTES)) {
		if (b->ngrp == TXB_MAX_GROUPS)
			txb_flush();
		g = NULL;
	}
	if (b->nseg == 0) {
		b->eng = rc->eng;
		b->to = rc->peer;
	}
	if (!g) {
		g = &b->grp[b->ngrp++];
		g->seg0 = b->nseg;
		g->iov0 = b->niov;
		g->nseg = 0;
		g->seg = len;
		b->grp_bytes = 0;
		b->grp_closed = false;
	}
	k = b->nseg;
	b->seg_iov[k] = b->niov;
	hdr = b->ht + b->ht_used;
	memcpy(hdr, iov[0].iov_base, (size_t)hlen);
	b->iov[b->niov].iov_base = hdr;
	b->iov[b->niov++].iov_len = (size_t)hlen;
	for (int i = 1; i < n - 1; i++)
		b->iov[b->niov++] = iov[i];
	tail = hdr + hlen;
	b->ht_used += (uint32_t)(hlen + tlen);
	memset(tail, 0, (size_t)tlen);
	b->iov[b->niov].iov_base = tail;
	b->iov[b->niov].iov_len = (size_t)tlen - WIRE_ICRC_LEN;
	/* ICRC over header + payload + pad, with this packet's index in its
	 * send as IPv4 ID (0 when the batch will go packet by packet: see
	 * net_udp_send_gso) */
	l3.ip_id = b->eng->udp.gso_off || b->faults ? 0 : (uint16_t)g->nseg;
	icrc = wire_icrc(&l3, &b->iov[b->seg_iov[k]], b->niov - b->seg_iov[k] +
			 (tlen > WIRE_ICRC_LEN ? 1 : 0));
	tail[tlen - 4] = (uint8_t)icrc;
	tail[tlen - 3] = (uint8_t)(icrc >> 8);
	tail[tlen - 2] = (uint8_t)(icrc >> 16);
	tail[tlen - 1] = (uint8_t)(icrc >> 24);
	b->iov[b->niov++].iov_len = (size_t)tlen;
	b->nseg++;
	g->nseg++;
	g->niov = b->niov - g->iov0;
	b->grp_bytes += len;
	if (srn_cap_active(&b->eng->cap))
		srn_cap_packet(b->eng, NET_CAP_TX, rc->qpn, &l3, &b->iov[b->seg_iov[k]],
			       b->niov - b->seg_iov[k]);
	if (len < g->seg)
		b->grp_closed = true; /* a shorter packet can only be the last */
	return 0;
}

/* How long a sender waits for room in a full lane of a same-host peer's
 * inbox before it reports -EAGAIN like a full socket (the requester then
 * retries later).  Short: the consumer may be blocked on us. */
enum { TX_SHM_SPIN_NS = 20 * 1000 };

/* The same packet as rc_tx would send (header, payload, pad, ICRC over
 * the same pseudo-header) into the peer's inbox instead of the socket;
 * tail has room for the ICRC after the pad. */
void rc_doorbell(struct srn_rc_state *rc)
{
	net_udp_send(&rc->eng->udp, &rc->peer, NULL, 0);
	rc_count(rc, SRN_CNT_shm_doorbells);
}

static int tx_shm(struct srn_rc_state *rc, struct iovec *iov, int n, uint8_t *tail,
		  uint32_t padcnt, uint32_t bytes)
{
	struct srn_engine *eng = rc->eng;
	uint32_t icrc;
	int ret;

	/* what an open GSO batch holds left first */
	if (txb && txb->ngrp)
		txb_flush();
	icrc = wire_icrc(&rc->l3, iov, n + (padcnt ? 1 : 0));
	tail[padcnt + 0] = (uint8_t)icrc;
	tail[padcnt + 1] = (uint8_t)(icrc >> 8);
	tail[padcnt + 2] = (uint8_t)(icrc >> 16);
	tail[padcnt + 3] = (uint8_t)(icrc >> 24);
	iov[n++].iov_len = padcnt + WIRE_ICRC_LEN;
	ret = net_shm_send(rc->shm_peer, srn_engine_local(eng, rc->peer.family), rc->peer.ip,
			   iov, n, TX_SHM_SPIN_NS);
	if (ret == -EAGAIN) {
		rc_count(rc, SRN_CNT_shm_ring_full);
		rc_count(rc, SRN_CNT_tx_eagain);
		return ret;
	}
	if (ret < 0) {
		rc_count(rc, SRN_CNT_tx_error);
		return 0; /* lost like on a wire */
	}
	if (ret == 1)
		rc_doorbell(rc); /* the owner's engine sleeps */
	rc_count(rc, SRN_CNT_tx_packets);
	rc_count(rc, SRN_CNT_tx_shm_packets);
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_tx_bytes], bytes, memory_order_relaxed);
	if (srn_cap_active(&eng->cap))
		srn_cap_packet(eng, NET_CAP_TX, rc->qpn, &rc->l3, iov, n);
	return 0;
}

int rc_tx(struct srn_rc_state *rc, struct wire_pkt *h, const struct iovec *pay,
	  int npay, uint32_t paylen)
{
	struct srn_engine *eng = rc->eng;
	uint8_t hdr[WIRE_MAX_HDR_LEN];
	uint8_t tail[3 + WIRE_ICRC_LEN] = { 0 };
	struct iovec iov[TX_MAX_IOV + 1];
	struct net_udp *u;
	uint32_t icrc;
	int hlen, n = 0, ret;

	if (npay > TX_MAX_IOV - 1)
		return -EINVAL;
	if (rc->path_unresolved && rc->type != IBV_QPT_UD)
		rc_resolve_path(rc);
	h->padcnt = wire_padcnt(paylen);
	h->pkey = 0xffff;
	h->dqpn = rc->dqpn;
	hlen = wire_encode_hdrs(hdr, h);
	if (hlen < 0)
		return hlen;
	iov[n].iov_base = hdr;
	iov[n++].iov_len = (size_t)hlen;
	for (int i = 0; i < npay; i++)
		if (pay[i].iov_len)
			iov[n++] = pay[i];
	iov[n].iov_base = tail;
	iov[n].iov_len = h->padcnt;
	if (rc->shm_peer && rc->type != IBV_QPT_UD)
		return tx_shm(rc, iov, n, tail, h->padcnt, (uint32_t)hlen + paylen);
	if (txb && txb->depth > 0) {
		uint32_t len = (uint32_t)hlen + paylen + h->padcnt + WIRE_ICRC_LEN;

		iov[n].iov_len = h->padcnt + WIRE_ICRC_LEN;
		txb_add(rc, iov, n + 1, len, hlen, h->padcnt + WIRE_ICRC_LEN);
		/* the QP's counter now (the requester looks at it; its lock
		 * is held, so no locked add is needed), the engine's at the
		 * flush: one locked add per send instead of per packet */
		atomic_store_explicit(&rc->cnt[SRN_CNT_tx_packets],
				      atomic_load_explicit(&rc->cnt[SRN_CNT_tx_packets],
							   memory_order_relaxed) + 1,
				      memory_order_relaxed);
		txb->cnt_pkts++;
		txb->cnt_bytes += (uint64_t)hlen + paylen;
		return 0;
	}
	icrc = wire_icrc(&rc->l3, iov, n + (h->padcnt ? 1 : 0));
	tail[h->padcnt + 0] = (uint8_t)icrc;
	tail[h->padcnt + 1] = (uint8_t)(icrc >> 8);
	tail[h->padcnt + 2] = (uint8_t)(icrc >> 16);
	tail[h->padcnt + 3] = (uint8_t)(icrc >> 24);
	iov[n++].iov_len = h->padcnt + WIRE_ICRC_LEN;

	u = srn_engine_sock(eng, rc->peer.family);
	ret = u ? net_udp_send(u, &rc->peer, iov, n) : -ENETUNREACH;
	if (ret == -EAGAIN) {
		rc_count(rc, SRN_CNT_tx_eagain);
		return ret;
	}
	if (ret < 0) {
		/* e.g. ECONNREFUSED from an earlier ICMP: the packet is
		 * lost like on a wire; retransmission deals with it. */
		rc_count(rc, SRN_CNT_tx_error);
		srn_dbg(eng, "qp %u: send failed: %s", rc->qpn, strerror(-ret));
	}
	rc_count(rc, SRN_CNT_tx_packets);
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_tx_bytes],
				  (uint64_t)hlen + paylen, memory_order_relaxed);
	if (srn_cap_active(&eng->cap))
		srn_cap_packet(eng, NET_CAP_TX, rc->qpn, &rc->l3, iov, n);
	return 0;
}
