/* The CM MAD codec against real rdma_cm traffic: every UD SEND_ONLY to QP1
 * in the captures (Linux rxe + kernel rdma_cm, rping and ib_write_bw -R)
 * must decode, re-encode byte for byte, and tell a consistent story: comm
 * ids and transaction ids pair REQ/REP/RTU and DREQ/DREP, the QPNs and
 * starting PSNs exchanged are the ones the RC data packets then carry, the
 * REQ's IP addressing header names the guests.  Then hostile input: every
 * truncation, bad versions, unknown attributes, random byte flips. */
#include <arpa/inet.h>
#include <sys/socket.h>

#include "t_wire_vectors.h"
#include "tests/lib/t_util.h"
#include "wire/mad.h"

static unsigned n_send, n_mads, n_rep, n_rep_empty;
#define MAX_PKTS 512
#define MAX_MADS 32

/* One RoCE packet of a capture, reduced to what the correlation needs. */
struct rec {
	uint8_t src[16], dst[16];
	uint8_t opcode;
	uint32_t dqpn, psn;
	uint16_t sport;              /* UDP source port */
	int mad;                     /* index in mads[], or -1 */
};

struct capture {
	const char *file;
	struct rec recs[MAX_PKTS];
	unsigned nrecs;
	struct wire_cm_msg mads[MAX_MADS];
	uint8_t raw[MAX_MADS][WIRE_MAD_LEN];
	unsigned nmads;
	unsigned by_attr[0x20];
};

static const char *ip4(const uint8_t *a, char *buf)
{
	snprintf(buf, 16, "%u.%u.%u.%u", a[0], a[1], a[2], a[3]);
	return buf;
}

static bool is_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void print_mad(const struct capture *c, unsigned pkt, const struct wire_cm_msg *m)
{
	char s[16], d[16];

	printf("    #%-3u %s -> %s %-4s tid %016llx", pkt, ip4(c->recs[pkt].src, s),
	       ip4(c->recs[pkt].dst, d), wire_cm_attr_name(m->hdr.attr_id),
	       (unsigned long long)m->hdr.tid);
	switch (m->hdr.attr_id) {
	case WIRE_CM_ATTR_REQ:
		printf(" comm %08x sid %016llx guid %016llx qpn 0x%x psn 0x%06x mtu %u "
		       "rr %u id %u retry %u rnr %u cm_to %u/%u max_cm %u ack_to %u "
		       "lids %04x/%04x hop %u fl 0x%x tc %u rate %u sl %u subnet_local %u\n",
		       m->req.local_comm_id, (unsigned long long)m->req.service_id,
		       (unsigned long long)m->req.local_ca_guid, m->req.local_qpn,
		       m->req.starting_psn, m->req.path_mtu, m->req.responder_resources,
		       m->req.initiator_depth, m->req.retry_count, m->req.rnr_retry_count,
		       m->req.local_cm_response_timeout, m->req.remote_cm_response_timeout,
		       m->req.max_cm_retries, m->req.primary_local_ack_timeout,
		       m->req.primary_local_lid, m->req.primary_remote_lid,
		       m->req.primary_hop_limit, m->req.primary_flow_label,
		       m->req.primary_traffic_class, m->req.primary_packet_rate,
		       m->req.primary_sl, m->req.primary_subnet_local);
		break;
	case WIRE_CM_ATTR_REP:
		printf(" comm %08x/%08x guid %016llx qpn 0x%x psn 0x%06x rr %u id %u "
		       "ack_delay %u rnr %u srq %u\n",
		       m->rep.local_comm_id, m->rep.remote_comm_id,
		       (unsigned long long)m->rep.local_ca_guid, m->rep.local_qpn,
		       m->rep.starting_psn, m->rep.responder_resources, m->rep.initiator_depth,
		       m->rep.target_ack_delay, m->rep.rnr_retry_count, m->rep.srq);
		break;
	case WIRE_CM_ATTR_RTU:
		printf(" comm %08x/%08x\n", m->rtu.local_comm_id, m->rtu.remote_comm_id);
		break;
	case WIRE_CM_ATTR_DREQ:
		printf(" comm %08x/%08x remote qpn 0x%x\n", m->dreq.local_comm_id,
		       m->dreq.remote_comm_id, m->dreq.remote_qpn_eecn);
		break;
	case WIRE_CM_ATTR_DREP:
		printf(" comm %08x/%08x\n", m->drep.local_comm_id, m->drep.remote_comm_id);
		break;
	case WIRE_CM_ATTR_REJ:
		printf(" comm %08x/%08x reason %u\n", m->rej.local_comm_id,
		       m->rej.remote_comm_id, m->rej.reason);
		break;
	default:
		printf("\n");
	}
}

/* Collect a packet; decode and re-encode it when it is a CM MAD. */
static void collect(const struct t_vec_pkt *p, void *arg)
{
	struct capture *c = arg;
	struct wire_pkt pkt;
	struct rec *r;
	uint8_t out[WIRE_MAD_LEN];
	int rc;

	if (c->nrecs >= MAX_PKTS)
		return;
	rc = wire_decode(p->roce, p->roce_len, &pkt);
	T_CHECK(rc == 0, "%s #%u: RoCE decode %d", p->file, p->index, rc);
	if (rc)
		return;
	r = &c->recs[c->nrecs];
	memcpy(r->src, p->l3.src, 16);
	memcpy(r->dst, p->l3.dst, 16);
	r->opcode = pkt.opcode;
	r->dqpn = pkt.dqpn;
	r->psn = pkt.psn;
	r->sport = p->l3.sport;
	r->mad = -1;
	if (pkt.opcode == (WIRE_UD | WIRE_SEND_ONLY) && pkt.dqpn == WIRE_GSI_QPN &&
	    c->nmads < MAX_MADS) {
		struct wire_cm_msg *m = &c->mads[c->nmads];

		T_CHECK(pkt.qkey == WIRE_GSI_QKEY && pkt.sqpn == WIRE_GSI_QPN &&
			pkt.pkey == 0xffff, "%s #%u: GSI qkey %08x sqpn %u pkey %04x", p->file,
			p->index, pkt.qkey, pkt.sqpn, pkt.pkey);
		T_CHECK(pkt.payload_len == WIRE_MAD_LEN, "%s #%u: MAD of %u bytes", p->file,
			p->index, pkt.payload_len);
		rc = wire_cm_decode(pkt.payload, pkt.payload_len, m);
		T_CHECK(rc == 0, "%s #%u: CM decode %d", p->file, p->index, rc);
		if (rc == 0) {
			memcpy(c->raw[c->nmads], pkt.payload, WIRE_MAD_LEN);
			rc = wire_cm_encode(m, out);
			T_CHECK(rc == WIRE_MAD_LEN && !memcmp(out, pkt.payload, WIRE_MAD_LEN),
				"%s #%u: %s re-encode differs (rc %d)", p->file, p->index,
				wire_cm_attr_name(m->hdr.attr_id), rc);
			T_CHECK(m->hdr.method == WIRE_MAD_METHOD_SEND && m->hdr.status == 0 &&
				m->hdr.class_specific == 0 && m->hdr.attr_mod == 0,
				"%s #%u: method %02x status %x", p->file, p->index,
				m->hdr.method, m->hdr.status);
			c->by_attr[m->hdr.attr_id & 0x1f]++;
			n_mads++;
			n_send += m->hdr.method == WIRE_MAD_METHOD_SEND;
			r->mad = (int)c->nmads++;
		}
	}
	c->nrecs++;
}

static int find_mad(const struct capture *c, uint16_t attr, uint32_t local, uint32_t remote)
{
	for (unsigned i = 0; i < c->nrecs; i++) {
		const struct wire_cm_msg *m;

		if (c->recs[i].mad < 0)
			continue;
		m = &c->mads[c->recs[i].mad];
		if (m->hdr.attr_id != attr)
			continue;
		/* RTU/DREQ/DREP/REP share the first two words' layout. */
		if (m->rep.local_comm_id == local && m->rep.remote_comm_id == remote)
			return (int)i;
	}
	return -1;
}

/* First RC request packet after record `from`, from src to dst IP, to dqpn. */
static int first_request(const struct capture *c, unsigned from, const uint8_t *src,
			 uint32_t dqpn)
{
	for (unsigned i = from; i < c->nrecs; i++) {
		const struct rec *r = &c->recs[i];

		if (r->mad >= 0 || (r->opcode & 0xe0) != WIRE_RC ||
		    !(wire_opcodes[r->opcode].caps & WIRE_IS_REQ))
			continue;
		if (!memcmp(r->src, src, 4) && r->dqpn == dqpn)
			return (int)i;
	}
	return -1;
}

static void v4_mapped(uint8_t gid[16], const uint8_t *a)
{
	memset(gid, 0, 10);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, a, 4);
}

/* The whole REQ .. RTU (.. DREQ/DREP) exchange of one connection. */
static void check_connection(struct capture *c, unsigned ireq, uint16_t port,
			     unsigned *conns)
{
	const struct rec *rq = &c->recs[ireq];
	const struct wire_cm_req *req = &c->mads[rq->mad].req;
	uint64_t tid = c->mads[rq->mad].hdr.tid;
	const struct wire_cm_rep *rep;
	struct wire_cma_hdr cma;
	struct sockaddr_storage ss, sd;
	uint8_t gid[16];
	int irep, irtu, idreq, idrep, i;
	char a[16], b[16];

	/* The REQ itself. */
	T_CHECK(wire_cm_service_id_is_cma(req->service_id) &&
		wire_cm_service_id_ps(req->service_id) == WIRE_CM_PS_TCP,
		"REQ service id %016llx is not RDMA_PS_TCP", (unsigned long long)req->service_id);
	T_CHECK(wire_cm_service_id(WIRE_CM_PS_TCP, port) == req->service_id,
		"REQ service id %016llx, want port %u", (unsigned long long)req->service_id, port);
	T_CHECK(req->transport_service_type == WIRE_CM_TRANSPORT_RC && req->local_qkey == 0,
		"REQ transport %u qkey %x", req->transport_service_type, req->local_qkey);
	T_CHECK(req->pkey == 0xffff, "REQ pkey %04x", req->pkey);
	T_CHECK(req->primary_local_lid == 0xffff && req->primary_remote_lid == 0xffff,
		"RoCE REQ LIDs %04x/%04x, Linux sends the permissive LID 0xffff",
		req->primary_local_lid, req->primary_remote_lid);
	T_CHECK(req->path_mtu == 3, "REQ path MTU %u, rxe on 1500-byte Ethernet uses 1024 (3)",
		req->path_mtu);
	v4_mapped(gid, rq->src);
	T_CHECK(!memcmp(req->primary_local_gid, gid, 16), "REQ local GID is not ::ffff:%s",
		ip4(rq->src, a));
	v4_mapped(gid, rq->dst);
	T_CHECK(!memcmp(req->primary_remote_gid, gid, 16), "REQ remote GID is not ::ffff:%s",
		ip4(rq->dst, a));
	T_CHECK(is_zero(req->alternate_local_gid, 16) && req->alternate_local_lid == 0,
		"REQ has an alternate path");
	i = wire_cma_hdr_decode(req->private_data, sizeof(req->private_data), &cma);
	T_CHECK(i == 0 && cma.ip_version == 4, "cma_hdr decode %d ipver %u", i, cma.ip_version);
	T_CHECK(!memcmp(cma.src + 12, rq->src, 4) && !memcmp(cma.dst + 12, rq->dst, 4) &&
		is_zero(cma.src, 12) && is_zero(cma.dst, 12),
		"cma_hdr addresses are not the frame's IPs");
	T_CHECK(rq->src[0] == 10 && rq->src[1] == 77 && rq->src[2] == 0, "not a 10.77.0.x guest");
	T_CHECK(wire_cma_hdr_to_sockaddr(&cma, req->service_id, &ss, &sd) == 0 &&
		ss.ss_family == AF_INET, "cma_hdr to sockaddr");
	{
		struct sockaddr_in *s4 = (void *)&ss, *d4 = (void *)&sd;
		uint8_t again[WIRE_CMA_HDR_LEN];
		struct wire_cma_hdr back;

		printf("      cma_hdr: %s:%u -> %s:%u (service id port space 0x%04x)\n",
		       inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a)), ntohs(s4->sin_port),
		       inet_ntop(AF_INET, &d4->sin_addr, b, sizeof(b)), ntohs(d4->sin_port),
		       wire_cm_service_id_ps(req->service_id));
		T_CHECK(ntohs(d4->sin_port) == wire_cm_service_id_port(req->service_id),
			"destination port");
		T_CHECK(wire_cma_hdr_from_sockaddr(&back, (void *)&ss, (void *)&sd) == 0,
			"cma_hdr from sockaddr");
		wire_cma_hdr_encode(again, &back);
		T_CHECK(!memcmp(again, req->private_data, WIRE_CMA_HDR_LEN),
			"cma_hdr rebuilt from sockaddrs differs");
	}

	/* REP: answers the REQ's comm id from the other side, same tid. */
	irep = -1;
	for (unsigned k = ireq + 1; k < c->nrecs && irep < 0; k++)
		if (c->recs[k].mad >= 0 && c->mads[c->recs[k].mad].hdr.attr_id == WIRE_CM_ATTR_REP &&
		    c->mads[c->recs[k].mad].rep.remote_comm_id == req->local_comm_id)
			irep = (int)k;
	T_CHECK(irep >= 0, "no REP for REQ comm id %08x", req->local_comm_id);
	if (irep < 0)
		return;
	rep = &c->mads[c->recs[irep].mad].rep;
	T_CHECK(c->mads[c->recs[irep].mad].hdr.tid == tid, "REP tid differs");
	T_CHECK(!memcmp(c->recs[irep].src, rq->dst, 4), "REP not from the REQ's target");
	T_CHECK(rep->local_ca_guid != req->local_ca_guid, "REP from the same CA");
	/* checked against the vectors: the REP carries no IP addressing header. */
	n_rep++;
	n_rep_empty += is_zero(rep->private_data, sizeof(rep->private_data));
	T_CHECK(is_zero(rep->private_data, sizeof(rep->private_data)),
		"REP private data is not empty (a cma header?)");

	irtu = find_mad(c, WIRE_CM_ATTR_RTU, req->local_comm_id, rep->local_comm_id);
	T_CHECK(irtu > irep, "no RTU after the REP");
	if (irtu >= 0)
		T_CHECK(c->mads[c->recs[irtu].mad].hdr.tid == tid, "RTU tid differs");

	/* The data path then uses what the CM exchanged.  Starting PSN is the
	 * one the SENDER of the message expects to receive (the kernel sets
	 * rq_psn from its own REQ, sq_psn from the peer's): the client sends to
	 * the REP's QPN starting at the REP's PSN, the server to the REQ's QPN
	 * starting at the REQ's PSN.  (ib_write_bw's server never sends a
	 * request on the data connection, only ACKs.) */
	i = first_request(c, (unsigned)irep, rq->src, rep->local_qpn);
	T_CHECK(i >= 0 && c->recs[i].psn == rep->starting_psn,
		"client's first request to QP 0x%x: psn 0x%06x, REP said 0x%06x", rep->local_qpn,
		i >= 0 ? c->recs[i].psn : 0, rep->starting_psn);
	if (i >= 0)
		printf("      client -> QP 0x%x starts at PSN 0x%06x = REP starting PSN\n",
		       rep->local_qpn, c->recs[i].psn);
	i = first_request(c, (unsigned)irep, rq->dst, req->local_qpn);
	T_CHECK(i < 0 || c->recs[i].psn == req->starting_psn,
		"server's first request to QP 0x%x: psn 0x%06x, REQ said 0x%06x", req->local_qpn,
		c->recs[i].psn, req->starting_psn);
	if (i >= 0)
		printf("      server -> QP 0x%x starts at PSN 0x%06x = REQ starting PSN\n",
		       req->local_qpn, c->recs[i].psn);

	/* The REQ's flow label hashes the rdma_cm ports, and both sides take
	 * the RC packets' UDP source port from it. */
	{
		uint32_t fl = req->primary_flow_label;
		uint16_t sport = wire_cm_flow_label_sport(fl);
		unsigned seen = 0, bad = 0;

		for (unsigned k = (unsigned)irep; k < c->nrecs; k++) {
			const struct rec *r = &c->recs[k];

			if (r->mad >= 0 || (r->opcode & 0xe0) != WIRE_RC ||
			    (r->dqpn != req->local_qpn && r->dqpn != rep->local_qpn))
				continue;
			seen++;
			bad += r->sport != sport;
		}
		T_CHECK(fl == wire_cm_flow_label(cma.src_port,
					       wire_cm_service_id_port(req->service_id)),
			"flow label 0x%05x is not the hash of ports %u, %u", fl, cma.src_port,
			wire_cm_service_id_port(req->service_id));
		T_CHECK(seen > 0 && bad == 0, "%u of %u RC packets not from UDP port 0x%04x", bad,
			seen, sport);
		printf("      %u RC packets, both directions, from UDP port 0x%04x = folded "
		       "REQ flow label 0x%05x = (%u * 31 + %u) mod 2^20\n", seen, sport, fl,
		       cma.src_port, wire_cm_service_id_port(req->service_id));
	}

	/* Disconnect, from either side: DREQ names the peer's QPN, DREP swaps ids. */
	idreq = find_mad(c, WIRE_CM_ATTR_DREQ, req->local_comm_id, rep->local_comm_id);
	if (idreq >= 0) {
		T_CHECK(c->mads[c->recs[idreq].mad].dreq.remote_qpn_eecn == rep->local_qpn,
			"client DREQ remote QPN");
		idrep = find_mad(c, WIRE_CM_ATTR_DREP, rep->local_comm_id, req->local_comm_id);
		T_CHECK(idrep > idreq, "no DREP for the client's DREQ");
	}
	i = find_mad(c, WIRE_CM_ATTR_DREQ, rep->local_comm_id, req->local_comm_id);
	if (i >= 0) {
		T_CHECK(c->mads[c->recs[i].mad].dreq.remote_qpn_eecn == req->local_qpn,
			"server DREQ remote QPN");
		idrep = find_mad(c, WIRE_CM_ATTR_DREP, req->local_comm_id, rep->local_comm_id);
		T_CHECK(idrep > i, "no DREP for the server's DREQ");
	}
	T_CHECK(idreq >= 0 || i >= 0, "connection %08x never disconnected", req->local_comm_id);
	(*conns)++;
}

/* Hostile copies of one real MAD. */
static void check_malformed(const uint8_t *raw, unsigned *flips_ok, unsigned *flips_err)
{
	struct wire_cm_msg m, ref;
	uint8_t buf[WIRE_MAD_LEN + 8], out[WIRE_MAD_LEN], mask[WIRE_MAD_LEN];
	int rc;

	T_CHECK(wire_cm_decode(raw, WIRE_MAD_LEN, &ref) == 0, "seed decode");
	/* Every truncation, and one byte too many. */
	for (size_t len = 0; len < WIRE_MAD_LEN; len++) {
		/* exactly len bytes on the heap, so ASan sees any over-read */
		uint8_t *cut = malloc(len ? len : 1);

		memcpy(cut, raw, len);
		rc = wire_cm_decode(cut, len, &m);
		T_CHECK(rc == -EBADMSG, "truncated to %zu: rc %d", len, rc);
		free(cut);
	}
	memcpy(buf, raw, WIRE_MAD_LEN);
	buf[WIRE_MAD_LEN] = 0;
	T_CHECK(wire_cm_decode(buf, WIRE_MAD_LEN + 1, &m) == -EBADMSG, "257 bytes accepted");

	/* Header checks, one field at a time; the tid still comes back. */
	static const struct {
		enum wire_cm_field f;
		uint64_t v;
		int want;
	} bad[] = {
		{ WIRE_CM_HDR_base_version, 2, -EPROTONOSUPPORT },
		{ WIRE_CM_HDR_base_version, 0, -EPROTONOSUPPORT },
		{ WIRE_CM_HDR_mgmt_class, 0x04, -EPROTONOSUPPORT },  /* PerfMgt */
		{ WIRE_CM_HDR_mgmt_class, 0x81, -EPROTONOSUPPORT },  /* directed SMP */
		{ WIRE_CM_HDR_class_version, 1, -EPROTONOSUPPORT },
		{ WIRE_CM_HDR_class_version, 3, -EPROTONOSUPPORT },
		{ WIRE_CM_HDR_method, WIRE_MAD_METHOD_GET, -EOPNOTSUPP },
		{ WIRE_CM_HDR_method, 0x83, -EOPNOTSUPP },
		{ WIRE_CM_HDR_attr_id, 0x0000, -EOPNOTSUPP },
		{ WIRE_CM_HDR_attr_id, WIRE_CM_ATTR_CLASS_PORT_INFO, -EOPNOTSUPP },
		{ WIRE_CM_HDR_attr_id, 0x001b, -EOPNOTSUPP },
		{ WIRE_CM_HDR_attr_id, 0x1000, -EOPNOTSUPP },
		{ WIRE_CM_HDR_attr_id, 0xffff, -EOPNOTSUPP },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(buf, raw, WIRE_MAD_LEN);
		wire_mad_set(buf, bad[i].f, bad[i].v);
		rc = wire_cm_decode(buf, WIRE_MAD_LEN, &m);
		T_CHECK(rc == bad[i].want && m.hdr.tid == ref.hdr.tid, "%s = 0x%llx: rc %d, want %d",
			wire_cm_fields[bad[i].f].name, (unsigned long long)bad[i].v, rc,
			bad[i].want);
	}

	/* Random flips: decode either fails cleanly or re-encodes to exactly
	 * the flipped bytes minus the reserved bits. */
	for (int n = 0; n < 3000; n++) {
		int nflip = 1 + (int)(t_rand64() % 4);

		memcpy(buf, raw, WIRE_MAD_LEN);
		for (int k = 0; k < nflip; k++)
			buf[t_rand64() % WIRE_MAD_LEN] ^= (uint8_t)(1u + t_rand64() % 255);
		rc = wire_cm_decode(buf, WIRE_MAD_LEN, &m);
		if (rc) {
			T_CHECK(rc == -EBADMSG || rc == -EPROTONOSUPPORT || rc == -EOPNOTSUPP,
				"flip: rc %d", rc);
			(*flips_err)++;
			continue;
		}
		(*flips_ok)++;
		T_CHECK(wire_cm_encode(&m, out) == WIRE_MAD_LEN, "flip: re-encode failed");
		T_CHECK(wire_cm_coverage(m.hdr.attr_id, mask) == 0, "coverage");
		for (int i = 0; i < WIRE_MAD_LEN; i++)
			T_CHECK(out[i] == (buf[i] & mask[i]), "flip: byte %d %02x, want %02x", i,
				out[i], buf[i] & mask[i]);
		if (m.hdr.attr_id == WIRE_CM_ATTR_REQ) {
			struct wire_cma_hdr h;

			(void)wire_cma_hdr_decode(m.req.private_data, sizeof(m.req.private_data), &h);
		}
	}
}

static void check_capture(const char *file, unsigned want_mads, unsigned want_conns,
			  uint16_t port)
{
	static struct capture c;
	unsigned conns = 0, ok = 0, err = 0;
	int n;

	memset(&c, 0, sizeof(c));
	c.file = file;
	n = t_vector_each(file, collect, &c);
	printf("  %s: %d RoCEv2 packets, %u CM MADs\n", file, n, c.nmads);
	T_CHECK(n > 0 && c.nmads == want_mads, "%s: %u MADs, want %u", file, c.nmads, want_mads);
	for (unsigned i = 0; i < c.nrecs; i++)
		if (c.recs[i].mad >= 0)
			print_mad(&c, i, &c.mads[c.recs[i].mad]);
	for (unsigned i = 0; i < c.nrecs; i++)
		if (c.recs[i].mad >= 0 && c.mads[c.recs[i].mad].hdr.attr_id == WIRE_CM_ATTR_REQ)
			check_connection(&c, i, port, &conns);
	T_CHECK(conns == want_conns, "%s: %u connections checked, want %u", file, conns,
		want_conns);
	for (unsigned i = 0; i < c.nmads; i++)
		check_malformed(c.raw[i], &ok, &err);
	printf("    %u connections consistent; every MAD: 256 truncations rejected, "
	       "bad headers rejected, %u random flips decoded and re-encoded exactly, "
	       "%u rejected\n", conns, ok, err);
}

int main(void)
{
	char *files[T_MAX_FILES];
	int nfiles = t_vector_files(files), found = 0;

	for (int i = 0; i < nfiles; i++) {
		found += !strncmp(files[i], "rxe-rdmacm-", 11);
		free(files[i]);
	}
	if (found < 2)
		t_bail("rdma_cm captures missing in %s (set SRN_SOURCE)", t_vectors_dir());
	t_rand_seed(0x9e3779b97f4a7c15ull);
	printf("decoding the CM MADs (UD SEND_ONLY to QP1) in the rdma_cm captures\n");
	/* rping: REQ REP RTU DREQ DREP.  ib_write_bw -R: two connections to
	 * one listener; the first is torn down from both sides at once.  The
	 * captures ran on ports 18610 and 18601 (not the defaults 7174, 18515):
	 * every REQ of a capture must name that port in the TCP port space. */
	check_capture("rxe-rdmacm-rping.pcap", 5, 1, 18610);
	check_capture("rxe-rdmacm-write-bw.pcap", 12, 2, 18601);
	printf("facts checked against the vectors: method SEND (0x03) in %u of %u MADs; %u of %u REPs "
	       "carry all-zero private data (no cma header)\n", n_send, n_mads, n_rep_empty,
	       n_rep);
	T_CHECK(n_mads == 17 && n_send == n_mads && n_rep == 3 && n_rep_empty == n_rep,
		"facts not confirmed by the vectors");
	return t_summary();
}
