/* transport/tx: turn a header description plus payload pieces into one
 * RoCE packet (headers, payload straight from registered memory, pad,
 * ICRC) and hand it to the socket.  No allocation per packet. */
#include <errno.h>
#include <string.h>

#include "net/pcap.h"
#include "transport/rc.h"

enum { TX_MAX_IOV = SRN_MAX_SGE + 2 };

uint32_t rc_wqe_npkts(const struct srn_rc_state *rc, const struct srn_send_wqe *w)
{
	if (rc_is_atomic(w))
		return 1;
	return rc_div_up(w->length, rc->pmtu);
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

int rc_tx(struct srn_rc_state *rc, struct wire_pkt *h, const struct iovec *pay,
	  int npay, uint32_t paylen)
{
	struct srn_engine *eng = rc->eng;
	uint8_t hdr[WIRE_MAX_HDR_LEN];
	uint8_t tail[3 + WIRE_ICRC_LEN] = { 0 };
	struct iovec iov[TX_MAX_IOV + 1];
	uint32_t icrc;
	int hlen, n = 0, ret;

	if (npay > TX_MAX_IOV - 1)
		return -EINVAL;
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
	icrc = wire_icrc(&rc->l3, iov, n + (h->padcnt ? 1 : 0));
	tail[h->padcnt + 0] = (uint8_t)icrc;
	tail[h->padcnt + 1] = (uint8_t)(icrc >> 8);
	tail[h->padcnt + 2] = (uint8_t)(icrc >> 16);
	tail[h->padcnt + 3] = (uint8_t)(icrc >> 24);
	iov[n++].iov_len = h->padcnt + WIRE_ICRC_LEN;

	ret = net_udp_send(&eng->udp, &rc->peer, iov, n);
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
	if (net_pcap_enabled()) {
		/* Captures show the RoCE view: the receiving NIC at 4791,
		 * whatever local port the peer's engine really listens on
		 * (see rx_one in engine.c). */
		struct wire_l3 l3 = rc->l3;

		l3.dport = SRN_ROCE_UDP_PORT;
		net_pcap_write(&l3, iov, n);
	}
	return 0;
}
