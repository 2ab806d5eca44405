/* transport/ud: Unreliable Datagram (IBTA Vol 1 9.8.4, RoCEv2 Annex A17).
 * Every message is one SEND_ONLY packet with a DETH (Q_Key, source QPN),
 * addressed per WR by an address handle and a remote QPN; nothing is
 * acknowledged.  The receiver checks the Q_Key and fills the 40-byte GRH
 * slot at the start of the receive buffer with the IP header the packet
 * came in, which ibv_init_ah_from_wc (verbs/ah.c) reads back. */
#include <errno.h>
#include <string.h>

#include "transport/direct.h"
#include "transport/rc.h"

enum { UD_RESUME_NS = 50 * 1000, UD_MAX_MCAST_COPIES = SRN_MAX_MCAST_QP_ATTACH };

static void ud_send_wc(struct srn_rc_state *rc, struct srn_send_wqe *w,
		       enum ibv_wc_status st)
{
	struct srn_qp *qp = rc->qp;
	struct ibv_wc wc;

	if (st == IBV_WC_SUCCESS && !qp->sq_sig_all && !(w->send_flags & IBV_SEND_SIGNALED))
		return;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr_id;
	wc.status = st;
	wc.opcode = IBV_WC_SEND;
	wc.qp_num = rc->qpn;
	wc.byte_len = (uint32_t)w->length;
	srn_cq_push(qp->send_cq, &wc, false);
}

bool ud_route(struct srn_rc_state *rc, struct ibv_ah *ah, uint32_t remote_qpn)
{
	struct srn_engine *eng = rc->eng;
	const union ibv_gid *dgid = srn_ah_dgid(ah);
	struct net_addr to = { 0 };
	const struct net_addr *me;
	uint16_t port;
	int fam;

	if (srn_ah(ah)->mcast) {
		if (!mcast_gid_to_ip(dgid, &to.family, to.ip))
			return false;
		to.port = SRN_ROCE_UDP_PORT;
		rc->dqpn = WIRE_PSN_MASK; /* RoCEv2 multicast QPN 0xFFFFFF */
		if (mcast_send_prepare(eng))
			return false;
	} else {
		if (srn_gid_is_v4mapped(dgid)) {
			to.family = AF_INET;
			memcpy(to.ip, dgid->raw + 12, 4);
		} else {
			to.family = AF_INET6;
			memcpy(to.ip, dgid->raw, 16);
		}
		to.port = SRN_ROCE_UDP_PORT;
		rc->dqpn = remote_qpn & WIRE_PSN_MASK;
		/* a QP of this host listens where its engine registered it
		 * (an IPv4 engine hears IPv6 at the same port: engine.h) */
		if (srn_engine_local(eng, to.family) && net_addr_is_local(to.family, to.ip) &&
		    net_registry_lookup(eng->reg, rc->dqpn, &port, &fam) == 0 &&
		    (fam == to.family || (to.family == AF_INET6 && fam == AF_INET)))
			to.port = port;
	}
	me = srn_engine_local(eng, to.family);
	if (!me)
		return false;
	rc->peer = to;
	memset(&rc->l3, 0, sizeof(rc->l3));
	rc->l3.family = to.family;
	memcpy(rc->l3.src, me->ip, 16);
	memcpy(rc->l3.dst, to.ip, 16);
	rc->l3.sport = me->port;
	rc->l3.dport = to.port;
	rc->l3.ttl_hop = 64;
	return true;
}

uint32_t ud_qkey(const struct srn_rc_state *rc, uint32_t wr_qkey)
{
	/* the QP's Q_Key when the WR's has the high bit set (IBTA 10.2.5) */
	return (wr_qkey & 0x80000000u) ? rc->qkey : wr_qkey;
}

uint32_t ud_wire_len(bool imm, uint32_t len)
{
	return WIRE_BTH_LEN + WIRE_DETH_LEN + (imm ? WIRE_IMMDT_LEN : 0) + len +
	       (-len & 3) + WIRE_ICRC_LEN;
}

/* Send the WQE at sq.next.  0 sent (or lost), 1 done in a same-host
 * target's memory (direct_ud_send), -EAGAIN, or -EINVAL (opcode),
 * -EMSGSIZE (larger than the MTU), -EFAULT (local protection error). */
static int ud_send_one(struct srn_rc_state *rc, struct srn_send_wqe *w)
{
	struct srn_qp *qp = rc->qp;
	struct iovec pay[SRN_MAX_SGE];
	struct wire_pkt h;
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM;
	int npay = 0, ret;

	if (w->opcode != IBV_WR_SEND && !imm) {
		return -EINVAL;
	}
	if (w->length > rc->pmtu) {
		/* a datagram is one packet: larger is a local length error */
		rc_count(rc, SRN_CNT_ud_too_long);
		return -EMSGSIZE;
	}
	if (w->length) {
		if (w->send_flags & IBV_SEND_INLINE) {
			pay[0].iov_base = w->inline_data;
			pay[0].iov_len = w->length;
			npay = 1;
		} else {
			npay = rc_sge_map(rc, qp->pd, w->sge, w->num_sge, 0, w->length, 0,
					  pay, SRN_MAX_SGE);
			if (npay < 0)
				return -EFAULT;
		}
	}
	if (!ud_route(rc, w->ah, w->remote_qpn)) {
		/* nowhere to go: lost, like a datagram without a route */
		rc_count(rc, SRN_CNT_rx_drop_no_path);
		return 0;
	}
	memset(&h, 0, sizeof(h));
	h.opcode = WIRE_UD | (imm ? WIRE_SEND_ONLY_IMM : WIRE_SEND_ONLY);
	h.psn = rc->req_psn;
	h.qkey = ud_qkey(rc, w->remote_qkey);
	/* a QP of this host: straight into its memory (consumes no PSN:
	 * nobody checks a UD PSN) */
	if (!srn_ah(w->ah)->mcast && direct_ud_send(rc, imm, w->imm_data,
						    (w->send_flags & IBV_SEND_SOLICITED) != 0,
						    h.qkey, (uint32_t)w->length, pay, npay))
		return 1;
	h.sqpn = rc->qpn;
	h.imm_be = w->imm_data;
	h.se = (w->send_flags & IBV_SEND_SOLICITED) != 0;
	ret = rc_tx(rc, &h, pay, npay, (uint32_t)w->length);
	if (ret == -EAGAIN)
		return ret;
	rc->req_psn = wire_psn_add(rc->req_psn, 1);
	return 0;
}

/* Complete the WQEs whose packet left (tx.c may hold it in a batch until
 * the flush: the application may reuse the buffer after the completion). */
static void ud_retire(struct srn_rc_state *rc)
{
	struct srn_qp *qp = rc->qp;

	if (qp->sq.head == qp->sq.next)
		return;
	rc_tx_batch_flush();
	for (; qp->sq.head != qp->sq.next; qp->sq.head++) {
		struct srn_send_wqe *w = rc_sq(qp, qp->sq.head);

		ud_send_wc(rc, w, IBV_WC_SUCCESS);
		w->state = WQE_NEW;
	}
}

void ud_requester_run(struct srn_rc_state *rc)
{
	struct srn_qp *qp = rc->qp;

	if (rc->resume_at || rc_state(rc) != IBV_QPS_RTS)
		return;
	while (qp->sq.next != qp->sq.tail) {
		struct srn_send_wqe *w = rc_sq(qp, qp->sq.next);
		int ret = ud_send_one(rc, w);

		if (ret == 1) {
			/* done in memory: what left as packets before it
			 * completes first */
			ud_retire(rc);
			ud_send_wc(rc, w, IBV_WC_SUCCESS);
			w->state = WQE_NEW;
			qp->sq.head = ++qp->sq.next;
			continue;
		}
		if (ret == -EAGAIN) {
			ud_retire(rc);
			rc->resume_at = srn_now_ns() + UD_RESUME_NS;
			srn_engine_arm(rc->eng, rc->resume_at);
			return;
		}
		if (ret < 0) {
			/* what went before completes first; then this one
			 * fails and the QP goes to ERR, as on rxe */
			ud_retire(rc);
			completer_fail(rc, ret == -EMSGSIZE ? IBV_WC_LOC_LEN_ERR :
					   ret == -EFAULT ? IBV_WC_LOC_PROT_ERR :
					   IBV_WC_LOC_QP_OP_ERR);
			return;
		}
		qp->sq.next++;
	}
	ud_retire(rc);
}

/* The 40-byte GRH slot as RoCEv2 receivers present it: for IPv4, 20
 * zero bytes then the IPv4 header; for IPv6 the IPv6 header. */
void ud_grh(const struct wire_l3 *l3, uint32_t len, uint8_t out[WIRE_GRH_LEN])
{
	uint8_t hdrs[48];
	struct wire_l3 a = *l3;

	memset(out, 0, WIRE_GRH_LEN);
	a.ttl_hop = 64;
	if (wire_l3_hdrs(hdrs, &a, len, false) == 0)
		return;
	if (a.family == AF_INET)
		memcpy(out + 20, hdrs, 20);
	else
		memcpy(out, hdrs, 40);
}

uint8_t ud_wc_sl(int family)
{
	return family == AF_INET ? 2 : 1;
}

static bool ud_place(struct srn_rc_state *rc, struct srn_pd *pd, struct srn_recv_wqe *r,
		     uint64_t off, const uint8_t *src, uint32_t len)
{
	struct iovec iov[SRN_MAX_SGE];
	int n;

	if (!len)
		return true;
	n = rc_sge_map(rc, pd, r->sge, r->num_sge, off, len, IBV_ACCESS_LOCAL_WRITE,
		       iov, SRN_MAX_SGE);
	if (n < 0)
		return false;
	for (int i = 0; i < n; i++) {
		memcpy(iov[i].iov_base, src, iov[i].iov_len);
		src += iov[i].iov_len;
	}
	return true;
}

static void ud_recv_wc(struct srn_rc_state *rc, struct srn_recv_wqe *r, enum ibv_wc_status st,
		       const struct wire_pkt *k, const struct wire_l3 *l3, uint32_t byte_len)
{
	struct srn_qp *qp = rc->qp;
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = r->wr_id;
	wc.status = st;
	wc.opcode = IBV_WC_RECV;
	wc.qp_num = rc->qpn;
	if (st == IBV_WC_SUCCESS) {
		wc.byte_len = byte_len;
		wc.src_qp = k->sqpn;
		wc.wc_flags = IBV_WC_GRH;
		wc.sl = ud_wc_sl(l3->family);
		if (wire_opcodes[k->opcode].caps & WIRE_HAS_IMMDT) {
			wc.imm_data = k->imm_be;
			wc.wc_flags |= IBV_WC_WITH_IMM;
		}
	}
	srn_cq_push(qp->recv_cq, &wc, k->se);
	rc->rwqe_have = false;
}

void ud_rx(struct srn_rc_state *rc, const struct wire_pkt *k, const struct wire_l3 *l3,
	   uint32_t len)
{
	struct srn_qp *qp = rc->qp;
	uint32_t c = wire_opcodes[k->opcode].caps;
	enum ibv_qp_state st = rc_state(rc);
	struct srn_recv_wqe *r;
	struct srn_pd *pd;
	uint8_t grh[WIRE_GRH_LEN];

	if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) {
		rc_count(rc, SRN_CNT_rx_drop_qp_state);
		return;
	}
	if (!(c & WIRE_IS_SEND) || !(c & WIRE_IS_FIRST) || !(c & WIRE_IS_LAST) ||
	    !(c & WIRE_HAS_DETH) || k->payload_len > 4096) {
		rc_count(rc, SRN_CNT_resp_drop);
		return;
	}
	if (k->qkey != rc->qkey) {
		rc_count(rc, SRN_CNT_rx_drop_qkey);
		return;
	}
	r = responder_recv_wqe(rc);
	if (!r) {
		rc_count(rc, SRN_CNT_rx_drop_no_rwqe);
		return;
	}
	if (WIRE_GRH_LEN + (uint64_t)k->payload_len > r->length) {
		ud_recv_wc(rc, r, IBV_WC_LOC_LEN_ERR, k, l3, 0);
		return;
	}
	pd = qp->srq ? qp->srq->pd : qp->pd;
	ud_grh(l3, len, grh);
	if (!ud_place(rc, pd, r, 0, grh, WIRE_GRH_LEN) ||
	    !ud_place(rc, pd, r, WIRE_GRH_LEN, k->payload, k->payload_len)) {
		ud_recv_wc(rc, r, IBV_WC_LOC_PROT_ERR, k, l3, 0);
		return;
	}
	ud_recv_wc(rc, r, IBV_WC_SUCCESS, k, l3, WIRE_GRH_LEN + k->payload_len);
}

void ud_mcast_rx(struct srn_engine *eng, const struct wire_pkt *pkt,
		 const struct wire_l3 *l3, uint32_t len)
{
	struct srn_qp *qps[UD_MAX_MCAST_COPIES];
	struct srn_rc_state *pinned[UD_MAX_MCAST_COPIES];
	union ibv_gid g;
	uint32_t n, m;

	/* the group's GID, in the forms rdma_cm (RoCEv2, RoCEv1) and
	 * applications use */
	memset(&g, 0, sizeof(g));
	if (l3->family == AF_INET) {
		g.raw[10] = g.raw[11] = 0xff;
		memcpy(g.raw + 12, l3->dst, 4);
	} else {
		memcpy(g.raw, l3->dst, 16);
	}
	n = srn_mcast_qps(eng->ctx, &g, qps, UD_MAX_MCAST_COPIES);
	if (n == 0 && l3->family == AF_INET) {
		g.raw[0] = 0xff;
		g.raw[1] = 0x0e;
		n = srn_mcast_qps(eng->ctx, &g, qps, UD_MAX_MCAST_COPIES);
	}
	if (n > UD_MAX_MCAST_COPIES)
		n = UD_MAX_MCAST_COPIES;
	if (n == 0)
		atomic_fetch_add(&eng->cnt[SRN_CNT_mcast_no_member], 1);
	/* The QPs may be destroyed meanwhile: find them in the engine's
	 * table by pointer (no dereference) and pin them there. */
	m = 0;
	pthread_mutex_lock(&eng->qps_lock);
	for (uint32_t j = 0; j < eng->n_all && m < n; j++)
		for (uint32_t i = 0; i < n; i++)
			if (eng->all[j]->qp == qps[i]) {
				pinned[m++] = eng->all[j];
				atomic_fetch_add(&eng->all[j]->inflight, 1);
				break;
			}
	pthread_mutex_unlock(&eng->qps_lock);
	for (uint32_t i = 0; i < m; i++) {
		struct srn_rc_state *rc = pinned[i];

		pthread_mutex_lock(&rc->qp->lock);
		if (!rc->dead && rc->type == IBV_QPT_UD) {
			rc_count(rc, SRN_CNT_mcast_rx);
			ud_rx(rc, pkt, l3, len);
		}
		srn_qp_unlock(rc->qp);
		srn_engine_put_qp(rc);
	}
}
