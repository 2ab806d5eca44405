/* transport/capture: see capture.h. */
#include "transport/capture.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/clock.h"
#include "net/proc.h"
#include "transport/engine.h"
#include "transport/rc.h"

/* Our sockets' addresses: SOFTRNIC_PCAP writes a packet between two of
 * this process's engines once (net/pcap.h). */
static void local_ends(struct srn_engine *eng, bool add)
{
	const struct net_udp *socks[2] = { &eng->udp, &eng->udp6 };

	for (int i = 0; i < 2; i++)
		if (socks[i]->fd >= 0)
			net_pcap_local(socks[i]->local.family, socks[i]->local.ip,
				       socks[i]->local.port, add);
}

void srn_cap_init(struct srn_engine *eng)
{
	struct srn_capture *c = &eng->cap;
	struct net_cap ring;

	pthread_mutex_init(&c->lock, NULL);
	snprintf(c->dev, sizeof(c->dev), "%s", eng->ctx->dev->ibdev.name);
	c->pid = (uint32_t)getpid();
	c->word = eng->stats ? net_stats_capture_word(eng->stats) : &c->own_word;
	local_ends(eng, true);
	/* A capture that began before this engine: the tool marks the
	 * stats files it finds, ours may be too new; join it now. */
	if (net_cap_attach(&ring, c->dev) == 0) {
		uint32_t gen = ring.h->gen;

		if (atomic_load(&ring.h->active) && net_proc_word_alive(ring.h->owner)) {
			uint32_t zero = 0;

			atomic_compare_exchange_strong(c->word, &zero, gen);
		}
		net_cap_detach(&ring);
	}
}

void srn_cap_fini(struct srn_engine *eng)
{
	struct srn_capture *c = &eng->cap;

	if (!c->dev[0])
		return; /* srn_cap_init did not run */
	local_ends(eng, false);
	for (int i = 0; i < c->nmaps; i++)
		net_cap_detach(&c->maps[i]);
	c->nmaps = 0;
	atomic_store(&c->cur_gen, 0);
	pthread_mutex_destroy(&c->lock);
}

/* The ring of capture gen, mapped once per gen. */
static struct net_cap *ring_for(struct srn_capture *c, uint32_t gen)
{
	struct net_cap *r = NULL;

	if (atomic_load_explicit(&c->cur_gen, memory_order_acquire) == gen)
		return &c->maps[atomic_load_explicit(&c->cur, memory_order_relaxed)];
	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->cur_gen) == gen) {
		r = &c->maps[atomic_load(&c->cur)];
	} else if (c->bad_gen != gen && c->nmaps < SRN_CAP_MAPS &&
		   net_cap_attach(&c->maps[c->nmaps], c->dev) == 0) {
		if (c->maps[c->nmaps].h->gen == gen) {
			r = &c->maps[c->nmaps];
			atomic_store(&c->cur, c->nmaps++);
			atomic_store_explicit(&c->cur_gen, gen, memory_order_release);
		} else {
			net_cap_detach(&c->maps[c->nmaps]);
		}
	}
	if (!r)
		c->bad_gen = gen; /* not again for every packet */
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* How often a producer that meets a full ring looks whether its tool
 * still lives: the look reads /proc, and a slow tool fills the ring on
 * every packet. */
enum { OWNER_LOOK_NS = 100 * 1000 * 1000 };

/* Full: a slow tool, or one killed before it could unmark us; in that
 * case stop here (another capture marks us again). */
static void ring_full(struct srn_capture *c, struct net_cap *ring, uint32_t gen)
{
	uint64_t now = net_clock_ns(CLOCK_MONOTONIC);
	uint64_t seen = atomic_load_explicit(&c->owner_seen_ns, memory_order_relaxed);

	if (now - seen < OWNER_LOOK_NS ||
	    !atomic_compare_exchange_strong(&c->owner_seen_ns, &seen, now))
		return;
	if (!net_proc_word_alive(ring->h->owner))
		atomic_compare_exchange_strong(c->word, &gen, 0);
}

static void to_ring(struct srn_engine *eng, unsigned int kind, uint32_t flags, uint32_t qpn,
		    uint32_t pid, uint32_t peer_pid, const struct wire_l3 *l3,
		    const struct iovec *iov, int n)
{
	uint32_t gen = atomic_load_explicit(eng->cap.word, memory_order_relaxed);
	struct net_cap_rec meta;
	struct net_cap *ring;

	if (!gen || !(ring = ring_for(&eng->cap, gen)))
		return;
	memset(&meta, 0, sizeof(meta));
	meta.kind = (uint8_t)kind;
	meta.flags = flags;
	meta.family = (uint8_t)l3->family;
	meta.ip_id = l3->ip_id;
	meta.ts_ns = net_clock_ns(CLOCK_REALTIME);
	meta.pid = pid;
	meta.peer_pid = peer_pid;
	meta.qpn = qpn;
	meta.sport = l3->sport;
	meta.dport = l3->dport;
	memcpy(meta.src, l3->src, 16);
	memcpy(meta.dst, l3->dst, 16);
	if (!net_cap_put(ring, &meta, iov, n))
		ring_full(&eng->cap, ring, gen);
}

void srn_cap_packet(struct srn_engine *eng, unsigned int kind, uint32_t qpn,
		    const struct wire_l3 *l3, const struct iovec *iov, int n)
{
	if (net_pcap_enabled()) {
		/* Several processes share one IP, so engines listen on their
		 * own ports; a capture shows each as a RoCE NIC at 4791 so
		 * that `-d udp.port==4791,infiniband` decodes every packet.
		 * (The ICRC in the file was computed over the real ports.) */
		struct wire_l3 shown = *l3;

		shown.dport = SRN_ROCE_UDP_PORT;
		net_pcap_write(kind == NET_CAP_RX ? PCAPNG_DIR_IN : PCAPNG_DIR_OUT, &shown, iov, n,
			       NULL);
	}
	to_ring(eng, kind, 0, qpn, eng->cap.pid, 0, l3, iov, n);
}

/* ---- direct operations as packets ---------------------------------------- */

enum { SYN_MAX_IOV = 2 + SRN_MAX_SGE + 1 };

const char *const srn_cap_direct_comment =
	"softrnic: synthesized for a same-host direct operation (no packet was sent)";

/* The pieces of pay[0..npay) covering [off, off + len) into out (at most
 * max); their count. */
static int slice(const struct iovec *pay, int npay, uint64_t off, uint64_t len,
		 struct iovec *out, int max)
{
	int k = 0;

	for (int i = 0; i < npay && len && k < max; i++) {
		uint64_t l = pay[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		out[k].iov_base = (char *)pay[i].iov_base + off;
		out[k].iov_len = l - off < len ? l - off : len;
		len -= out[k].iov_len;
		off = 0;
		k++;
	}
	return k;
}

struct syn {
	struct srn_rc_state *rc;
	const struct srn_cap_op *op;
	uint8_t svc;                    /* WIRE_RC, WIRE_UC or WIRE_UD */
};

/* One packet: h's headers, len bytes of the op's payload from off; an
 * answer goes from the target to us. */
static void syn_emit(const struct syn *s, bool answer, struct wire_pkt *h, uint64_t off,
		     uint32_t len)
{
	struct srn_rc_state *rc = s->rc;
	uint8_t hdr[WIRE_MAX_HDR_LEN], tail[3 + WIRE_ICRC_LEN] = { 0 };
	struct iovec iov[SYN_MAX_IOV];
	struct wire_l3 l3 = rc->l3;
	uint32_t icrc, me = rc->eng->cap.pid;
	int hlen, n = 1;

	if (answer) {
		memcpy(l3.src, rc->l3.dst, 16);
		memcpy(l3.dst, rc->l3.src, 16);
		l3.sport = rc->l3.dport;
	}
	/* shown as a NIC at 4791 (as captured packets are), ICRC over that */
	l3.dport = SRN_ROCE_UDP_PORT;
	l3.ip_id = 0;
	l3.ttl_hop = 64;
	h->opcode |= s->svc;
	h->padcnt = wire_padcnt(len);
	h->pkey = 0xffff;
	hlen = wire_encode_hdrs(hdr, h);
	if (hlen < 0)
		return;
	iov[0].iov_base = hdr;
	iov[0].iov_len = (size_t)hlen;
	if (len)
		n += slice(s->op->pay, s->op->npay, off, len, iov + 1, SYN_MAX_IOV - 2);
	iov[n].iov_base = tail;
	iov[n].iov_len = h->padcnt;
	icrc = wire_icrc(&l3, iov, n + (h->padcnt ? 1 : 0));
	for (int i = 0; i < 4; i++)
		tail[h->padcnt + i] = (uint8_t)(icrc >> (8 * i));
	iov[n++].iov_len = h->padcnt + WIRE_ICRC_LEN;
	if (net_pcap_enabled())
		net_pcap_write(answer ? PCAPNG_DIR_IN : PCAPNG_DIR_OUT, &l3, iov, n,
			       srn_cap_direct_comment);
	to_ring(rc->eng, NET_CAP_DIRECT, answer ? NET_CAP_F_ANSWER : 0, rc->qpn,
		answer ? s->op->peer_pid : me, answer ? me : s->op->peer_pid, &l3, iov, n);
}

/* Synthesized PSNs: direct operations take none of the QP's (direct.h),
 * so a capture numbers them on from the send PSN it first saw. */
static uint32_t psn_take(struct srn_rc_state *rc, uint32_t n)
{
	uint32_t p;

	if (!rc->cap_psn_set) {
		rc->cap_psn = rc->req_psn;
		rc->cap_psn_set = true;
	}
	p = rc->cap_psn;
	rc->cap_psn = (p + n) & 0xffffff;
	return p;
}

static void syn_ack(const struct syn *s, uint8_t opcode, uint32_t psn)
{
	struct wire_pkt h;

	wire_pkt_clear(&h);
	h.opcode = opcode;
	h.dqpn = s->rc->qpn;
	h.psn = psn;
	h.syndrome = WIRE_AETH_ACK | 0x1f;
	h.orig = s->op->orig;
	syn_emit(s, true, &h, 0, 0);
}

/* SEND or WRITE: the message in path-MTU packets, then an RC ACK. */
static void syn_message(const struct syn *s, bool write, bool imm)
{
	struct srn_rc_state *rc = s->rc;
	const struct srn_cap_op *op = s->op;
	uint32_t mtu = rc->pmtu ? rc->pmtu : 1024;
	uint32_t npk = op->len ? (uint32_t)((op->len + mtu - 1) / mtu) : 1;
	uint32_t psn = psn_take(rc, npk);

	for (uint32_t i = 0; i < npk; i++) {
		bool first = i == 0, last = i == npk - 1;
		uint64_t off = (uint64_t)i * mtu;
		struct wire_pkt h;

		wire_pkt_clear(&h);
		if (write)
			h.opcode = first && last ? (imm ? WIRE_WRITE_ONLY_IMM : WIRE_WRITE_ONLY)
				   : first     ? WIRE_WRITE_FIRST
				   : last      ? (imm ? WIRE_WRITE_LAST_IMM : WIRE_WRITE_LAST)
					       : WIRE_WRITE_MIDDLE;
		else
			h.opcode = first && last ? (imm ? WIRE_SEND_ONLY_IMM : WIRE_SEND_ONLY)
				   : first     ? WIRE_SEND_FIRST
				   : last      ? (imm ? WIRE_SEND_LAST_IMM : WIRE_SEND_LAST)
					       : WIRE_SEND_MIDDLE;
		h.dqpn = op->dqpn;
		h.psn = (psn + i) & 0xffffff;
		h.ackreq = last && s->svc == WIRE_RC;
		h.va = op->va;
		h.rkey = op->rkey;
		h.dma_len = (uint32_t)op->len;
		h.imm_be = op->imm_be;
		h.qkey = op->qkey;
		h.sqpn = rc->qpn;
		syn_emit(s, false, &h, off, (uint32_t)(op->len - off < mtu ? op->len - off : mtu));
	}
	if (s->svc == WIRE_RC)
		syn_ack(s, WIRE_ACK, (psn + npk - 1) & 0xffffff);
}

static void syn_read(const struct syn *s)
{
	struct srn_rc_state *rc = s->rc;
	const struct srn_cap_op *op = s->op;
	uint32_t mtu = rc->pmtu ? rc->pmtu : 1024;
	uint32_t npk = op->len ? (uint32_t)((op->len + mtu - 1) / mtu) : 1;
	uint32_t psn = psn_take(rc, npk);
	struct wire_pkt h;

	wire_pkt_clear(&h);
	h.opcode = WIRE_READ_REQ;
	h.dqpn = op->dqpn;
	h.psn = psn;
	h.ackreq = true;
	h.va = op->va;
	h.rkey = op->rkey;
	h.dma_len = (uint32_t)op->len;
	syn_emit(s, false, &h, 0, 0);
	for (uint32_t i = 0; i < npk; i++) {
		bool first = i == 0, last = i == npk - 1;
		uint64_t off = (uint64_t)i * mtu;

		wire_pkt_clear(&h);
		h.opcode = first && last ? WIRE_READ_RESP_ONLY
			   : first     ? WIRE_READ_RESP_FIRST
			   : last      ? WIRE_READ_RESP_LAST
				       : WIRE_READ_RESP_MIDDLE;
		h.dqpn = rc->qpn;
		h.psn = (psn + i) & 0xffffff;
		h.syndrome = WIRE_AETH_ACK | 0x1f;
		syn_emit(s, true, &h, off, (uint32_t)(op->len - off < mtu ? op->len - off : mtu));
	}
}

static void syn_atomic(const struct syn *s)
{
	const struct srn_cap_op *op = s->op;
	uint32_t psn = psn_take(s->rc, 1);
	struct wire_pkt h;

	wire_pkt_clear(&h);
	h.opcode = op->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? WIRE_CMP_SWAP : WIRE_FETCH_ADD;
	h.dqpn = op->dqpn;
	h.psn = psn;
	h.ackreq = true;
	h.va = op->va;
	h.rkey = op->rkey;
	h.swap_add = op->swap_add;
	h.compare = op->compare;
	syn_emit(s, false, &h, 0, 0);
	syn_ack(s, WIRE_ATOMIC_ACK, psn);
}

void srn_cap_direct(struct srn_rc_state *rc, const struct srn_cap_op *op)
{
	struct syn s = { rc, op, rc->type == IBV_QPT_UD ? WIRE_UD
				 : rc->type == IBV_QPT_UC ? WIRE_UC : WIRE_RC };

	switch (op->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		syn_message(&s, false, op->opcode == IBV_WR_SEND_WITH_IMM);
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		syn_message(&s, true, op->opcode == IBV_WR_RDMA_WRITE_WITH_IMM);
		break;
	case IBV_WR_RDMA_READ:
		syn_read(&s);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		syn_atomic(&s);
		break;
	default:
		break;
	}
}
