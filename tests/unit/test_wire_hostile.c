/* Hostile wire against live RC QPs on srn_lo: a plain UDP socket on
 * 127.0.0.1 sends RoCEv2 packets built with the wire/ codec straight to
 * the engine port of a QP (found in the device's QPN registry).  One fresh
 * connected pair per case (a bad packet may rightly move its QP to ERR):
 *   a valid crafted WRITE lands (so crafted packets do reach the engine);
 *   bad ICRC, unknown dest QPN, PSN far ahead / behind, bad rkey, rkey of
 *   an MR of another PD, beyond the MR, va+len overflowing, payload > MTU,
 *   DMA length != payload, MIDDLE without FIRST, truncated headers, READ
 *   response without a request, ACK for unsent PSNs, 10k random packets.
 * Asserted: canary pages around the MR and the MR itself unchanged by any
 * bad packet, no crash or hang, and afterwards a normal RC exchange on a
 * new pair (and on the ACK-spoofed pair) succeeds. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "tests/lib/t_verbs.h"
#include "net/registry.h"
#include "wire/wire.h"

#define PG 4096
#define MRLEN (16 * PG)

static struct ibv_context *ctx;
static struct ibv_pd *pd, *pd2;
static struct ibv_cq *cq;
static uint8_t *area;               /* guard page | MR | guard page */
static uint8_t *mrbuf;
static struct ibv_mr *mr, *mr2;
static uint8_t *buf2;
static union ibv_gid gid;
static struct net_registry *reg;
static int sock;
static uint16_t sport;

static void pattern(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed ^ (i * 31) ^ (i >> 9));
}

static int intact(void)
{
	static uint8_t want[MRLEN + 2 * PG];

	pattern(want, sizeof(want), 0x5a);
	return !memcmp(area, want, sizeof(want));
}

struct pair {
	struct ibv_qp *a, *b;
	uint16_t port_a, port_b;
	uint32_t psn;                /* what b expects next (a's sq_psn) */
};

static void pair_up(struct pair *p)
{
	struct t_rc_attr r = { .access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
			       .dgid = gid, .hop_limit = 64, .min_rnr_timer = 1,
			       .rd_atomic = 4, .timeout = 12 };
	int fam;

	p->a = t_qp_create(pd, cq, IBV_QPT_RC, 16);
	p->b = t_qp_create(pd, cq, IBV_QPT_RC, 16);
	if (!p->a || !p->b)
		t_bail("create_qp: %s", strerror(errno));
	r.dest_qpn = p->b->qp_num;
	if (t_qp_rc_connect(p->a, &r))
		t_bail("connect a");
	r.dest_qpn = p->a->qp_num;
	if (t_qp_rc_connect(p->b, &r))
		t_bail("connect b");
	p->psn = 0;
	if (net_registry_lookup(reg, p->a->qp_num, &p->port_a, &fam) ||
	    net_registry_lookup(reg, p->b->qp_num, &p->port_b, &fam))
		t_bail("registry lookup of our QPNs");
}

static void pair_down(struct pair *p)
{
	ibv_destroy_qp(p->a);
	ibv_destroy_qp(p->b);
}

/* Encode h (+ payload) with a correct ICRC unless bad_icrc; send only the
 * first cut bytes when cut > 0. */
static void send_pkt(uint16_t port, struct wire_pkt *h, const void *pay, uint32_t plen,
		     int bad_icrc, size_t cut)
{
	uint8_t pkt[WIRE_MAX_HDR_LEN + 8192 + 8];
	struct wire_l3 l3 = { .family = AF_INET, .sport = sport, .dport = port };
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int hl;
	size_t len;

	l3.src[0] = l3.dst[0] = 127;
	l3.src[3] = l3.dst[3] = 1;
	h->padcnt = wire_padcnt(plen);
	h->pkey = 0xffff;
	hl = wire_encode_hdrs(pkt, h);
	if (hl < 0)
		t_bail("encode opcode %#x", h->opcode);
	if (plen)
		memcpy(pkt + hl, pay, plen); /* (pay may be NULL then) */
	len = (size_t)hl + plen;
	memset(pkt + len, 0, h->padcnt);
	len += h->padcnt;
	struct iovec iov = { pkt, len };
	uint32_t icrc = wire_icrc(&l3, &iov, 1) ^ (bad_icrc ? 0x00100000u : 0);

	for (int i = 0; i < 4; i++)
		pkt[len + (size_t)i] = (uint8_t)(icrc >> (8 * i));
	len += 4;
	if (cut && cut < len)
		len = cut;
	sendto(sock, pkt, len, 0, (struct sockaddr *)&to, sizeof(to));
}

static void write_pkt(struct pair *p, uint8_t op, uint32_t dqpn, uint32_t psn, uint64_t va,
		      uint32_t rkey, uint32_t dlen, uint32_t plen, int bad_icrc, size_t cut)
{
	static uint8_t pay[8192];
	struct wire_pkt h = { .opcode = op, .dqpn = dqpn, .psn = psn & WIRE_PSN_MASK,
			      .va = va, .rkey = rkey, .dma_len = dlen, .ackreq = true };

	memset(pay, 0xAA, sizeof(pay));
	send_pkt(p->port_b, &h, pay, plen, bad_icrc, cut);
}

/* A normal WRITE a -> b through the verbs (both ends use the MR, which
 * is then restored); 0 on success. */
static int exchange(struct pair *p)
{
	uint8_t *src = mrbuf + 8192;
	struct ibv_sge s = { (uintptr_t)src, 256, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 77, .sg_list = &s, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	struct ibv_wc wc;
	int ok;

	wr.wr.rdma.remote_addr = (uintptr_t)mrbuf;
	wr.wr.rdma.rkey = mr->rkey;
	pattern(src, 256, 0x33);
	ok = 0 == ibv_post_send(p->a, &wr, &bad) && t_poll_cq(cq, &wc, 1, 5000) == 1 &&
	     wc.status == IBV_WC_SUCCESS && !memcmp(mrbuf, src, 256);
	pattern(area, MRLEN + 2 * PG, 0x5a);
	return ok ? 0 : -1;
}

static void drain(void)
{
	struct ibv_wc wc[16];

	usleep(30000);
	while (ibv_poll_cq(cq, 16, wc) > 0)
		;
}

int main(void)
{
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t ml = sizeof(me);
	struct pair p;
	uint64_t mva;

	ctx = t_lo_open();
	pd = ibv_alloc_pd(ctx);
	pd2 = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	area = aligned_alloc(PG, MRLEN + 2 * PG);
	buf2 = aligned_alloc(PG, 2 * MRLEN);
	if (!pd || !pd2 || !cq || !area || !buf2 || ibv_query_gid(ctx, 1, 0, &gid))
		t_bail("setup: %s", strerror(errno));
	pattern(area, MRLEN + 2 * PG, 0x5a);
	mrbuf = area + PG;
	mva = (uintptr_t)mrbuf;
	mr = ibv_reg_mr(pd, mrbuf, MRLEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ);
	/* an MR of another PD, also reachable through pd for the exchange */
	mr2 = ibv_reg_mr(pd2, buf2, 2 * MRLEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	reg = net_registry_open("srn_lo");
	sock = socket(AF_INET, SOCK_DGRAM, 0);
	if (!mr || !mr2 || !reg || sock < 0 || bind(sock, (struct sockaddr *)&me, sizeof(me)) ||
	    getsockname(sock, (struct sockaddr *)&me, &ml))
		t_bail("mr/registry/socket: %s", strerror(errno));
	sport = ntohs(me.sin_port);

	/* 0: a valid crafted WRITE lands, so the rest do reach the engine */
	pair_up(&p);
	write_pkt(&p, WIRE_WRITE_ONLY, p.b->qp_num, 0, mva + 100, mr->rkey, 64, 64, 0, 0);
	usleep(50000);
	int landed = mrbuf[100] == 0xAA && mrbuf[163] == 0xAA && mrbuf[164] != 0xAA;

	T_OK(landed, "a valid crafted WRITE_ONLY from a raw UDP socket lands in the MR");
	pattern(area, MRLEN + 2 * PG, 0x5a);
	pair_down(&p);
	drain();

	struct {
		const char *what;
		uint8_t op;
		int dqpn_delta;
		int32_t psn;
		uint64_t va;
		int rkey;            /* 0 mr, 1 bad, 2 other PD */
		uint32_t dlen, plen;
		int bad_icrc;
		size_t cut;
	} cases[] = {
		{ "bad ICRC", WIRE_WRITE_ONLY, 0, 0, mva, 0, 64, 64, 1, 0 },
		{ "unknown dest QPN", WIRE_WRITE_ONLY, 0x7000, 0, mva, 0, 64, 64, 0, 0 },
		{ "PSN far ahead", WIRE_WRITE_ONLY, 0, 100000, mva, 0, 64, 64, 0, 0 },
		{ "PSN behind (duplicate never sent)", WIRE_WRITE_ONLY, 0, -5, mva, 0, 64, 64, 0, 0 },
		{ "bad rkey", WIRE_WRITE_ONLY, 0, 0, mva, 1, 64, 64, 0, 0 },
		{ "rkey of another PD's MR", WIRE_WRITE_ONLY, 0, 0, 0, 2, 64, 64, 0, 0 },
		{ "beyond the MR end", WIRE_WRITE_ONLY, 0, 0, mva + MRLEN - 8, 0, 64, 64, 0, 0 },
		{ "before the MR start", WIRE_WRITE_ONLY, 0, 0, mva - 32, 0, 64, 64, 0, 0 },
		{ "va+len overflowing 2^64", WIRE_WRITE_ONLY, 0, 0, ~0ull - 15, 0, 64, 64, 0, 0 },
		{ "DMA length 2^32-1 (huge)", WIRE_WRITE_ONLY, 0, 0, mva, 0, 0xffffffffu, 64, 0, 0 },
		{ "payload > path MTU", WIRE_WRITE_ONLY, 0, 0, mva, 0, 2048, 2048, 0, 0 },
		{ "DMA length < payload", WIRE_WRITE_ONLY, 0, 0, mva + MRLEN - 16, 0, 8, 64, 0, 0 },
		{ "WRITE_FIRST past the MR", WIRE_WRITE_FIRST, 0, 0, mva + MRLEN - 512, 0, 4096, 1024, 0, 0 },
		{ "MIDDLE without FIRST", WIRE_WRITE_MIDDLE, 0, 0, 0, 0, 0, 1024, 0, 0 },
		{ "LAST without FIRST", WIRE_WRITE_LAST, 0, 0, 0, 0, 0, 64, 0, 0 },
		{ "truncated BTH (8 bytes)", WIRE_WRITE_ONLY, 0, 0, mva, 0, 64, 64, 0, 8 },
		{ "truncated RETH (20 bytes)", WIRE_WRITE_ONLY, 0, 0, mva, 0, 64, 64, 0, 20 },
		{ "truncated payload", WIRE_WRITE_ONLY, 0, 0, mva, 0, 64, 64, 0, 40 },
		{ "SEND with no receive posted", WIRE_SEND_ONLY, 0, 0, 0, 0, 0, 64, 0, 0 },
	};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t rkey = cases[i].rkey == 0 ? mr->rkey
				: cases[i].rkey == 1 ? (mr->rkey ^ 0x5500) : mr2->rkey;
		uint64_t va = cases[i].rkey == 2 ? (uintptr_t)buf2 : cases[i].va;

		pair_up(&p);
		pattern(buf2, 64, 0x11);
		write_pkt(&p, cases[i].op, p.b->qp_num + (uint32_t)cases[i].dqpn_delta,
			  (uint32_t)cases[i].psn, va, rkey, cases[i].dlen, cases[i].plen,
			  cases[i].bad_icrc, cases[i].cut);
		usleep(20000);
		int other_pd_ok = buf2[0] == 0x11;

		T_OK(intact() && other_pd_ok, "%s: MR, guard pages (and the other PD's MR) untouched",
		     cases[i].what);
		pattern(area, MRLEN + 2 * PG, 0x5a);
		pair_down(&p);
		drain();
	}

	/* READ response without a request, ACK for PSNs never sent: to a */
	pair_up(&p);
	{
		static uint8_t pay[1024];
		struct wire_pkt h = { .opcode = WIRE_READ_RESP_ONLY, .dqpn = p.a->qp_num, .psn = 0 };

		memset(pay, 0xAA, sizeof(pay));
		send_pkt(p.port_a, &h, pay, 256, 0, 0);
		h = (struct wire_pkt){ .opcode = WIRE_READ_RESP_FIRST, .dqpn = p.a->qp_num, .psn = 3 };
		send_pkt(p.port_a, &h, pay, 1024, 0, 0);
		h = (struct wire_pkt){ .opcode = WIRE_ACK, .dqpn = p.a->qp_num, .psn = 500,
				       .syndrome = WIRE_AETH_ACK | 0x1f, .msn = 40 };
		send_pkt(p.port_a, &h, NULL, 0, 0, 0);
		h = (struct wire_pkt){ .opcode = WIRE_ATOMIC_ACK, .dqpn = p.a->qp_num, .psn = 7,
				       .syndrome = WIRE_AETH_ACK | 0x1f, .msn = 3, .orig = 99 };
		send_pkt(p.port_a, &h, NULL, 0, 0, 0);
		usleep(30000);
		struct ibv_wc wc;
		int spurious = ibv_poll_cq(cq, 1, &wc);

		T_OK(intact() && spurious == 0, "READ response / ACKs / atomic ACK for nothing "
		     "outstanding: no memory written, no completion (%d)", spurious);
		T_OK(!exchange(&p), "that requester still completes a normal WRITE afterwards");
	}
	pair_down(&p);
	drain();

	/* 10k random packets: pure garbage, and valid BTH+ICRC with random fields */
	pair_up(&p);
	t_rand_seed(0xbad5eed);
	double t0 = t_now();

	for (int i = 0; i < 10000; i++) {
		uint8_t junk[1200];
		uint32_t n = t_rand() % sizeof(junk);
		struct sockaddr_in to = { .sin_family = AF_INET,
			.sin_port = htons((i & 1) ? p.port_b : p.port_a),
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

		for (uint32_t k = 0; k < n; k++)
			junk[k] = (uint8_t)t_rand();
		if (i % 3 == 0) {
			sendto(sock, junk, n, 0, (struct sockaddr *)&to, sizeof(to));
		} else {
			static const uint8_t ops[] = { WIRE_WRITE_ONLY, WIRE_WRITE_FIRST,
				WIRE_WRITE_MIDDLE, WIRE_WRITE_LAST, WIRE_SEND_ONLY, WIRE_READ_REQ,
				WIRE_READ_RESP_ONLY, WIRE_ACK, WIRE_FETCH_ADD, WIRE_CMP_SWAP,
				WIRE_WRITE_ONLY_IMM, WIRE_SEND_FIRST };
			struct wire_pkt h = {
				.opcode = ops[t_rand() % sizeof(ops)],
				.dqpn = (i & 1) ? p.b->qp_num : p.a->qp_num,
				.psn = t_rand() % 8, .va = (t_rand() & 1) ? mva + t_rand() % (2 * MRLEN)
									  : t_rand64(),
				.rkey = (t_rand() & 1) ? mr->rkey : t_rand(), .dma_len = t_rand() % 5000,
				.syndrome = (uint8_t)t_rand(), .msn = t_rand() & 0xffffff,
				.swap_add = t_rand64(), .compare = t_rand64(),
			};
			uint32_t pl = 0;

			if (h.opcode <= WIRE_WRITE_ONLY_IMM || h.opcode == WIRE_READ_RESP_ONLY)
				pl = t_rand() % 1100;
			struct wire_pkt hh = h;

			(void)hh;
			send_pkt((i & 1) ? p.port_b : p.port_a, &h, junk, pl, 0, 0);
		}
		if (t_now() - t0 > 20)
			break;
	}
	usleep(100000);
	/* random valid-looking packets may legally write inside the MR; only
	 * the guard pages must be untouched */
	uint8_t want[PG];

	pattern(want, PG, 0x5a);
	int guards = !memcmp(area, want, PG);

	{
		uint8_t w2[PG];

		pattern(area + PG + MRLEN - (MRLEN + PG), 0, 0); /* no-op, keeps layout obvious */
		for (size_t k = 0; k < PG; k++)
			w2[k] = (uint8_t)(0x5a ^ ((PG + MRLEN + k) * 31) ^ ((PG + MRLEN + k) >> 9));
		guards = guards && !memcmp(area + PG + MRLEN, w2, PG);
	}
	T_OK(guards, "10k random packets (%.1f s): guard pages on both sides of the MR untouched",
	     t_now() - t0);
	pair_down(&p);
	drain();

	pair_up(&p);
	T_OK(!exchange(&p), "after all that, a new pair completes a normal RC WRITE with the data");
	pair_down(&p);
	return t_summary();
}
