/* libFuzzer target for the receive side of the NIC: every input becomes
 * one RoCE packet handed to the engine (srn_engine_rx_msg, the function the
 * socket and the shared-memory inbox feed) of a live context whose QPs are
 * connected on srn_lo: an RC pair (requests to b, responses to a), a UC
 * pair, a UD QP and an XRC pair (requests to the target, which places into
 * an XRC SRQ; the XRCETH names it, another domain's SRQ or any number).  Registered memory sits between PROT_NONE guard pages,
 * so a write outside an MR faults at once; ASan and UBSan catch the rest.
 * Built by `make fuzz` (clang); tests/e2e/fuzz_smoke.sh runs it briefly.
 *
 * Input: byte 0 picks the target QP (bits 0-1; bit 4: the XRC pair, bit 0
 * then picks its side) and the form (bit 2):
 *   structured: fields to fill a header the codec encodes (so most inputs
 *     pass decoding and reach the responder's checks): opcode, PSN offset
 *     from the QP's expected PSN, rkey choice, address offset, DMA length,
 *     payload length, flags, immediate/atomic operands;
 *   raw: the rest of the input is the packet itself, the destination QPN
 *     patched in and the ICRC recomputed half of the time.
 * After each input: QPs in ERR are rebuilt, CQs drained, receives reposted,
 * and the guard pages and the unregistered bytes checked unchanged. */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/lib/t_verbs.h"
#include "transport/rc.h"
#include "wire/wire.h"
#include "tests/fuzz/fuzz_cursor.h"

#define PG 4096
#define MRLEN (8 * PG)
#define QKEY 0x11111111u

static struct ibv_context *ctx;
static struct ibv_pd *pd, *pd2;
static struct ibv_cq *cq;
static uint8_t *area;                 /* guard | MR | gap | MR2 | guard */
static uint8_t *mrbuf, *mr2buf;
static struct ibv_mr *mr, *mr2;
static union ibv_gid gid;
static struct ibv_qp *rc_a, *rc_b, *uc_a, *uc_b, *ud;
static struct ibv_xrcd *xrcd, *xrcd2;
static struct ibv_srq *xsrq, *xsrq_other;   /* in xrcd (pd), in xrcd2 */
static uint32_t xsrqn, xsrqn_other;
static struct ibv_qp *xrc_ini, *xrc_tgt;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_responder: %s failed\n", what);
	abort();
}

/* UC takes no read/atomic or retry attributes. */
static void uc_connect(struct ibv_qp *qp, uint32_t dqpn)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("uc init");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
		die("uc rtr");
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("uc rts");
}

static void pair(struct ibv_qp **a, struct ibv_qp **b, enum ibv_qp_type t)
{
	struct t_rc_attr r = { .access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					 IBV_ACCESS_REMOTE_ATOMIC,
			       .dgid = gid, .hop_limit = 64, .min_rnr_timer = 1,
			       .rd_atomic = 4, .timeout = 14 };

	if (*a)
		ibv_destroy_qp(*a);
	if (*b)
		ibv_destroy_qp(*b);
	*a = t_qp_create(pd, cq, t, 64);
	*b = t_qp_create(pd, cq, t, 64);
	if (!*a || !*b)
		die("create_qp");
	if (t == IBV_QPT_UC) {
		uc_connect(*a, (*b)->qp_num);
		uc_connect(*b, (*a)->qp_num);
		return;
	}
	r.dest_qpn = (*b)->qp_num;
	if (t_qp_rc_connect(*a, &r))
		die("connect a");
	r.dest_qpn = (*a)->qp_num;
	if (t_qp_rc_connect(*b, &r))
		die("connect b");
}

/* An XRC initiator and target of this context, connected (t_qp_rc_connect:
 * XRC QPs ignore the attributes of the half they lack). */
static void xrc_pair(void)
{
	struct t_rc_attr r = { .access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					 IBV_ACCESS_REMOTE_ATOMIC,
			       .dgid = gid, .hop_limit = 64, .min_rnr_timer = 1,
			       .rd_atomic = 4, .timeout = 14 };
	struct ibv_qp_init_attr_ex a;

	if (xrc_ini)
		ibv_destroy_qp(xrc_ini);
	if (xrc_tgt)
		ibv_destroy_qp(xrc_tgt);
	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_RECV;
	a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	a.xrcd = xrcd;
	xrc_tgt = ibv_create_qp_ex(ctx, &a);
	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_SEND;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd;
	a.send_cq = cq;
	a.cap.max_send_wr = 64;
	a.cap.max_send_sge = 1;
	xrc_ini = ibv_create_qp_ex(ctx, &a);
	if (!xrc_ini || !xrc_tgt)
		die("create xrc qps");
	r.dest_qpn = xrc_tgt->qp_num;
	if (t_qp_rc_connect(xrc_ini, &r))
		die("connect xrc ini");
	r.dest_qpn = xrc_ini->qp_num;
	if (t_qp_rc_init(xrc_tgt, &r) || t_qp_rc_rtr(xrc_tgt, &r))
		die("connect xrc tgt");
}

static struct ibv_srq *xrc_srq(struct ibv_xrcd *x, uint32_t *num)
{
	struct ibv_srq_init_attr_ex a = {
		.attr = { .max_wr = 64, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
			     IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_XRC, .xrcd = x, .cq = cq, .pd = pd,
	};
	struct ibv_srq *s = ibv_create_srq_ex(ctx, &a);

	if (!s || ibv_get_srq_num(s, num))
		die("xrc srq");
	return s;
}

static void xrc_up(void)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1, .oflags = O_CREAT,
	};

	xrcd = ibv_open_xrcd(ctx, &a);
	xrcd2 = ibv_open_xrcd(ctx, &a);
	if (!xrcd || !xrcd2)
		die("open_xrcd");
	xsrq = xrc_srq(xrcd, &xsrqn);
	xsrq_other = xrc_srq(xrcd2, &xsrqn_other);
	xrc_pair();
}

static void ud_up(void)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	if (ud)
		ibv_destroy_qp(ud);
	ud = t_qp_create(pd, cq, IBV_QPT_UD, 64);
	if (!ud || ibv_modify_qp(ud, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				 IBV_QP_QKEY))
		die("ud init");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(ud, &a, IBV_QP_STATE))
		die("ud rtr");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(ud, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("ud rts");
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* The bytes between the two MRs are not registered: never written. */
static void check_gap(void)
{
	uint8_t *gap = mrbuf + MRLEN;

	for (size_t i = 0; i < PG; i++)
		if (gap[i] != (uint8_t)(0x3c + i * 7))
			die("unregistered gap changed: a write escaped its MR");
}

static void setup(void)
{
	ctx = t_lo_open();
	if (!ctx)
		die("open srn_lo");
	pd = ibv_alloc_pd(ctx);
	pd2 = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 1024, NULL, NULL, 0);
	if (!pd || !pd2 || !cq || ibv_query_gid(ctx, 1, 0, &gid))
		die("pd/cq/gid");
	area = mmap(NULL, 2 * MRLEN + 3 * PG, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		die("mmap");
	mrbuf = area + PG;
	mr2buf = mrbuf + MRLEN + PG;
	fill(mrbuf + MRLEN, PG, 0x3c);
	if (mprotect(area, PG, PROT_NONE) ||
	    mprotect(mr2buf + MRLEN, PG, PROT_NONE))
		die("guard pages");
	mr = ibv_reg_mr(pd, mrbuf, MRLEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	mr2 = ibv_reg_mr(pd2, mr2buf, MRLEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr || !mr2)
		die("reg_mr");
	pair(&rc_a, &rc_b, IBV_QPT_RC);
	pair(&uc_a, &uc_b, IBV_QPT_UC);
	ud_up();
	xrc_up();
}

static void post_recvs(struct ibv_qp *qp)
{
	struct srn_qp *q = srn_qp(qp);
	uint32_t have = q->rq.tail - q->rq.head;

	for (; have < 16; have++) {
		struct ibv_sge sge = { (uintptr_t)mrbuf + (have % 4) * 2 * PG, 2 * PG, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = have, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(qp, &wr, &bad))
			return; /* QP in ERR: rebuilt below */
	}
}

static void post_srq_recvs(struct ibv_srq *s)
{
	uint32_t have = srn_srq_count(srn_srq(s));

	for (; have < 16; have++) {
		struct ibv_sge sge = { (uintptr_t)mrbuf + (have % 4) * 2 * PG, 2 * PG, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = have, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_srq_recv(s, &wr, &bad))
			die("post_srq_recv");
	}
}

static bool in_err(struct ibv_qp *qp)
{
	return srn_qp(qp)->a.attr.qp_state == IBV_QPS_ERR;
}

static void tidy(void)
{
	struct ibv_wc wc[64];

	while (ibv_poll_cq(cq, 64, wc) > 0)
		;
	if (in_err(rc_a) || in_err(rc_b))
		pair(&rc_a, &rc_b, IBV_QPT_RC);
	if (in_err(uc_a) || in_err(uc_b))
		pair(&uc_a, &uc_b, IBV_QPT_UC);
	if (in_err(ud))
		ud_up();
	if (in_err(xrc_ini) || in_err(xrc_tgt))
		xrc_pair();
	post_srq_recvs(xsrq);
	post_recvs(rc_b);
	post_recvs(uc_b);
	post_recvs(ud);
	check_gap();
}

static uint32_t expected_psn(struct ibv_qp *qp)
{
	struct srn_rc_state *rc = srn_qp(qp)->rc;

	return rc ? rc->epsn : 0;
}

static size_t build_structured(struct cursor *c, struct ibv_qp *dst, struct ibv_qp *src,
			       uint8_t *pkt)
{
	static const uint8_t svc[4] = { WIRE_RC, WIRE_RC, WIRE_UC, WIRE_UD };
	bool xrc = dst == xrc_ini || dst == xrc_tgt;
	struct wire_pkt h;
	uint8_t kind = (uint8_t)take(c, 1);
	uint8_t rk = (uint8_t)take(c, 1);
	uint32_t paylen;
	int hl;

	memset(&h, 0, sizeof(h));
	h.opcode = (uint8_t)((take(c, 1) & 0x1f) | (xrc ? WIRE_XRC : svc[kind & 3]));
	if (kind & 0x80)
		h.opcode = (uint8_t)take(c, 1); /* any service, any opcode */
	h.dqpn = dst->qp_num;
	h.psn = (expected_psn(dst) + (uint32_t)(int8_t)take(c, 1)) & WIRE_PSN_MASK;
	h.ackreq = kind & 0x40;
	h.se = kind & 0x20;
	h.pkey = 0xffff;
	h.rkey = rk == 0 ? mr->rkey : rk == 1 ? mr2->rkey : (uint32_t)take(c, 4);
	h.va = (uintptr_t)(rk == 1 ? mr2buf : mrbuf) + (int64_t)(int32_t)take(c, 4);
	h.dma_len = (uint32_t)take(c, 4);
	if (kind & 0x10)
		h.dma_len &= 0x3fff;
	h.swap_add = take(c, 8);
	h.compare = take(c, 8);
	h.imm_be = (uint32_t)take(c, 4);
	h.syndrome = (uint8_t)take(c, 1);
	h.msn = (uint32_t)take(c, 3);
	h.orig = take(c, 8);
	h.qkey = (kind & 0x08) ? (uint32_t)take(c, 4) : QKEY;
	h.sqpn = src ? src->qp_num : 0;
	/* the XRCETH: the target's SRQ, another domain's, or any number */
	h.xrcsrq = (kind & 6) == 0 ? xsrqn : (kind & 6) == 2 ? xsrqn_other
		   : (uint32_t)take(c, 3);
	paylen = (uint32_t)take(c, 2) % 4200;
	h.padcnt = wire_padcnt(paylen);
	hl = wire_encode_hdrs(pkt, &h);
	if (hl < 0)
		return 0;
	for (uint32_t i = 0; i < paylen; i++)
		pkt[hl + i] = (uint8_t)(c->n ? c->p[i % c->n] : i);
	memset(pkt + hl + paylen, 0, h.padcnt);
	return (size_t)hl + paylen + h.padcnt;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t pkt[8192 + 64];
	struct srn_engine *eng;
	struct ibv_qp *dst, *src;
	struct cursor c = { data, size };
	struct net_udp_msg m;
	struct wire_l3 l3;
	size_t len;
	uint8_t sel;
	bool fix = true;

	if (!ctx)
		setup();
	eng = srn_ctx(ctx)->engine;
	sel = (uint8_t)take(&c, 1);
	switch (sel & 0x10 ? 4 + (sel & 1) : sel & 3) {
	case 4: dst = xrc_tgt; src = xrc_ini; break; /* XRC requests */
	case 5: dst = xrc_ini; src = xrc_tgt; break; /* XRC responses */
	case 0: dst = rc_b; src = rc_a; break;  /* requests */
	case 1: dst = rc_a; src = rc_b; break;  /* responses */
	case 2: dst = uc_b; src = uc_a; break;
	default: dst = ud; src = NULL; break;
	}
	if (sel & 4) {
		len = build_structured(&c, dst, src, pkt);
		if (!len)
			return 0;
	} else {
		len = c.n > sizeof(pkt) - 4 ? sizeof(pkt) - 4 : c.n;
		memcpy(pkt, c.p, len);
		fix = sel & 8;
		if (fix && len >= 12) {
			pkt[5] = (uint8_t)(dst->qp_num >> 16);
			pkt[6] = (uint8_t)(dst->qp_num >> 8);
			pkt[7] = (uint8_t)dst->qp_num;
		}
	}

	memset(&m, 0, sizeof(m));
	m.from.family = m.to.family = AF_INET;
	m.from.ip[0] = m.to.ip[0] = 127;
	m.from.ip[3] = m.to.ip[3] = 1;
	m.from.port = 4791;
	m.to.port = eng->udp.local.port;
	if (fix) {
		struct iovec iov = { pkt, len };
		uint32_t icrc;

		memset(&l3, 0, sizeof(l3));
		l3.family = AF_INET;
		memcpy(l3.src, m.from.ip, 16);
		memcpy(l3.dst, m.to.ip, 16);
		l3.sport = m.from.port;
		l3.dport = m.to.port;
		icrc = wire_icrc(&l3, &iov, 1);
		for (int i = 0; i < 4; i++)
			pkt[len++] = (uint8_t)(icrc >> (8 * i));
	}
	m.buf = pkt;
	m.cap = sizeof(pkt);
	m.len = (uint32_t)len;
	srn_engine_rx_msg(eng, &m);
	tidy();
	return 0;
}
