/* The CM MAD field table and codec without captures: the table is sane
 * (inside the MAD, no overlaps, private data where IBTA puts it), the
 * by-id accessors touch exactly their bits, every message round-trips
 * through its typed struct, out-of-range values and bad lengths are
 * refused, and the rdma_cm helpers (service ids, cma_hdr) agree with
 * <rdma/rdma_cma.h> and the annex layout. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "tests/lib/t_util.h"
#include "wire/mad.h"

_Static_assert((int)WIRE_CM_PS_TCP == (int)RDMA_PS_TCP, "PS_TCP");
_Static_assert((int)WIRE_CM_PS_UDP == (int)RDMA_PS_UDP, "PS_UDP");
_Static_assert((int)WIRE_CM_PS_IB == (int)RDMA_PS_IB, "PS_IB");
_Static_assert(WIRE_CM_UDP_QKEY == RDMA_UDP_QKEY, "UDP Q_Key");

static const uint16_t attrs[] = {
	WIRE_CM_ATTR_REQ, WIRE_CM_ATTR_MRA, WIRE_CM_ATTR_REJ, WIRE_CM_ATTR_REP,
	WIRE_CM_ATTR_RTU, WIRE_CM_ATTR_DREQ, WIRE_CM_ATTR_DREP, WIRE_CM_ATTR_SIDR_REQ,
	WIRE_CM_ATTR_SIDR_REP, WIRE_CM_ATTR_LAP, WIRE_CM_ATTR_APR,
};
#define NATTRS (sizeof(attrs) / sizeof(attrs[0]))

/* Private data sizes from docs/wire.md (and ib_cm.h's IB_CM_*_PRIVATE_DATA_SIZE). */
static const struct {
	enum wire_cm_field f;
	unsigned len;
} private_sizes[] = {
	{ WIRE_CM_REQ_private_data, 92 },      { WIRE_CM_REP_private_data, 196 },
	{ WIRE_CM_REJ_private_data, 148 },     { WIRE_CM_RTU_private_data, 224 },
	{ WIRE_CM_DREQ_private_data, 220 },    { WIRE_CM_DREP_private_data, 224 },
	{ WIRE_CM_MRA_private_data, 222 },     { WIRE_CM_SIDR_REQ_private_data, 216 },
	{ WIRE_CM_SIDR_REP_private_data, 136 }, { WIRE_CM_LAP_private_data, 168 },
	{ WIRE_CM_APR_private_data, 148 },     { WIRE_CM_REJ_ari, 72 },
	{ WIRE_CM_SIDR_REP_additional_info, 72 }, { WIRE_CM_APR_additional_info, 72 },
};

static uint64_t width_mask(unsigned w)
{
	return w >= 64 ? UINT64_MAX : (UINT64_C(1) << w) - 1;
}

static void check_table(void)
{
	unsigned reserved[NATTRS], nfields = 0;

	printf("field table: %d fields\n", WIRE_CM_NFIELDS);
	for (int f = 0; f < WIRE_CM_NFIELDS; f++) {
		const struct wire_cm_field_info *fi = &wire_cm_fields[f];
		const char *an = fi->attr ? wire_cm_attr_name(fi->attr) : "HDR";
		unsigned end = (unsigned)fi->bit + fi->width;

		T_CHECK(fi->name && an && !strncmp(fi->name, an, strlen(an)) &&
			fi->name[strlen(an)] == '.', "field %d named %s, attr %x", f,
			fi->name ? fi->name : "(null)", fi->attr);
		T_CHECK(fi->width > 0 && end <= 8 * WIRE_MAD_LEN, "%s outside the MAD", fi->name);
		if (fi->attr)
			T_CHECK(fi->bit >= 8 * WIRE_MAD_HDR_LEN, "%s inside the header", fi->name);
		else
			T_CHECK(end <= 8 * WIRE_MAD_HDR_LEN, "%s past the header", fi->name);
		if (fi->bytes) {
			T_CHECK(fi->bit % 8 == 0 && fi->width == 8u * fi->size, "%s bytes misaligned",
				fi->name);
		} else {
			T_CHECK(fi->width <= 64 && fi->width <= 8u * fi->size &&
				(fi->size == 1 || fi->size == 2 || fi->size == 4 || fi->size == 8),
				"%s width %u in %u bytes", fi->name, fi->width, fi->size);
			/* wire_mad_get reads the span into 64 bits. */
			T_CHECK((fi->bit % 8) + fi->width <= 64, "%s spans 9 bytes", fi->name);
		}
	}
	/* No two fields of a message (header included) share a bit. */
	for (size_t a = 0; a < NATTRS; a++) {
		int owner[8 * WIRE_MAD_LEN];
		unsigned used = 0;

		for (int b = 0; b < 8 * WIRE_MAD_LEN; b++)
			owner[b] = -1;
		for (int f = 0; f < WIRE_CM_NFIELDS; f++) {
			const struct wire_cm_field_info *fi = &wire_cm_fields[f];

			if (fi->attr && fi->attr != attrs[a])
				continue;
			nfields += fi->attr != 0;
			for (unsigned b = fi->bit; b < (unsigned)fi->bit + fi->width &&
			     b < 8 * WIRE_MAD_LEN; b++) {
				T_CHECK(owner[b] < 0, "%s overlaps %s at bit %u", fi->name,
					owner[b] >= 0 ? wire_cm_fields[owner[b]].name : "", b);
				owner[b] = f;
				used++;
			}
		}
		reserved[a] = 8 * WIRE_MAD_LEN - used;
		/* Every message ends with its private data, on the MAD's last byte. */
		T_CHECK(owner[8 * WIRE_MAD_LEN - 1] >= 0 &&
			strstr(wire_cm_fields[owner[8 * WIRE_MAD_LEN - 1]].name, ".private_data"),
			"%s does not end with private data", wire_cm_attr_name(attrs[a]));
	}
	for (size_t i = 0; i < sizeof(private_sizes) / sizeof(private_sizes[0]); i++)
		T_CHECK(wire_cm_fields[private_sizes[i].f].size == private_sizes[i].len,
			"%s is %u bytes, want %u", wire_cm_fields[private_sizes[i].f].name,
			wire_cm_fields[private_sizes[i].f].size, private_sizes[i].len);
	printf("  %u message fields; no overlaps; private data sizes as IBTA; reserved bits:",
	       nfields);
	for (size_t a = 0; a < NATTRS; a++)
		printf(" %s %u", wire_cm_attr_name(attrs[a]), reserved[a]);
	printf("\n");
	T_CHECK(wire_cm_attr_name(0x0001) == NULL && wire_cm_attr_name(0x1b) == NULL &&
		wire_cm_attr_name(0) == NULL, "non-CM attributes named");
}

/* Offsets written out by hand from IBTA's tables, independent of mad.h:
 * (MAD byte, mask) of a value that sets every bit of the field. */
static void check_known_offsets(void)
{
	static const struct {
		enum wire_cm_field f;
		uint64_t v;
		unsigned byte;
		uint8_t bits[8];
		unsigned n;
	} known[] = {
		{ WIRE_CM_HDR_tid, 0x0102030405060708ull, 8, { 1, 2, 3, 4, 5, 6, 7, 8 }, 8 },
		{ WIRE_CM_HDR_attr_id, 0x0013, 16, { 0x00, 0x13 }, 2 },
		{ WIRE_CM_REQ_service_id, 0x01061c06, 32, { 0, 0, 0, 0, 1, 6, 0x1c, 6 }, 8 },
		{ WIRE_CM_REQ_local_qpn, 0xabcdef, 56, { 0xab, 0xcd, 0xef, 0 }, 4 },
		{ WIRE_CM_REQ_remote_cm_response_timeout, 31, 67, { 0xf8 }, 1 },
		{ WIRE_CM_REQ_transport_service_type, 3, 67, { 0x06 }, 1 },
		{ WIRE_CM_REQ_end_to_end_flow_control, 1, 67, { 0x01 }, 1 },
		{ WIRE_CM_REQ_retry_count, 7, 71, { 0x07 }, 1 },
		{ WIRE_CM_REQ_path_mtu, 5, 74, { 0x50 }, 1 },
		{ WIRE_CM_REQ_rdc_exists, 1, 74, { 0x08 }, 1 },
		{ WIRE_CM_REQ_rnr_retry_count, 7, 74, { 0x07 }, 1 },
		{ WIRE_CM_REQ_max_cm_retries, 15, 75, { 0xf0 }, 1 },
		{ WIRE_CM_REQ_srq, 1, 75, { 0x08 }, 1 },
		{ WIRE_CM_REQ_primary_flow_label, 0xfffff, 112, { 0xff, 0xff, 0xf0, 0 }, 4 },
		{ WIRE_CM_REQ_primary_packet_rate, 0x3f, 115, { 0x3f }, 1 },
		{ WIRE_CM_REQ_primary_sl, 0xf, 118, { 0xf0 }, 1 },
		{ WIRE_CM_REQ_primary_subnet_local, 1, 118, { 0x08 }, 1 },
		{ WIRE_CM_REQ_primary_local_ack_timeout, 31, 119, { 0xf8 }, 1 },
		{ WIRE_CM_REQ_alternate_local_ack_timeout, 31, 163, { 0xf8 }, 1 },
		{ WIRE_CM_REP_local_ca_guid, 0x1122334455667788ull, 52,
		  { 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88 }, 8 },
		{ WIRE_CM_REP_failover_accepted, 3, 50, { 0x06 }, 1 },
		{ WIRE_CM_REP_rnr_retry_count, 7, 51, { 0xe0 }, 1 },
		{ WIRE_CM_REP_srq, 1, 51, { 0x10 }, 1 },
		{ WIRE_CM_REJ_reject_info_length, 0x7f, 33, { 0xfe }, 1 },
		{ WIRE_CM_MRA_message_mraed, 3, 32, { 0xc0 }, 1 },
		{ WIRE_CM_DREQ_remote_qpn_eecn, 0x123456, 32, { 0x12, 0x34, 0x56, 0 }, 4 },
		{ WIRE_CM_SIDR_REP_qpn, 0xffffff, 32, { 0xff, 0xff, 0xff, 0 }, 4 },
		{ WIRE_CM_SIDR_REP_service_id, 0x0000000001110001ull, 36,
		  { 0, 0, 0, 0, 1, 0x11, 0, 1 }, 8 },
	};
	unsigned ok = 0;

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		uint8_t mad[WIRE_MAD_LEN] = { 0 };
		int rc = wire_mad_set(mad, known[i].f, known[i].v);

		T_CHECK(rc == 0, "%s set %d", wire_cm_fields[known[i].f].name, rc);
		T_CHECK(!memcmp(mad + known[i].byte, known[i].bits, known[i].n),
			"%s not at MAD byte %u", wire_cm_fields[known[i].f].name, known[i].byte);
		ok += !memcmp(mad + known[i].byte, known[i].bits, known[i].n);
	}
	printf("hand-written IBTA offsets: %u of %zu fields land on the expected bits\n", ok,
	       sizeof(known) / sizeof(known[0]));
}

/* wire_mad_set changes exactly the field's bits; wire_mad_get reads them back. */
static void check_accessors(void)
{
	unsigned n = 0;

	for (int f = 0; f < WIRE_CM_NFIELDS; f++) {
		const struct wire_cm_field_info *fi = &wire_cm_fields[f];
		enum wire_cm_field id = (enum wire_cm_field)f;
		uint8_t mad[WIRE_MAD_LEN], before[WIRE_MAD_LEN], src[WIRE_MAD_LEN];
		const uint8_t *p;
		size_t len;

		for (int rep = 0; rep < 20; rep++) {
			for (int i = 0; i < WIRE_MAD_LEN; i++)
				mad[i] = (uint8_t)t_rand64();
			memcpy(before, mad, sizeof(mad));
			if (fi->bytes) {
				for (int i = 0; i < WIRE_MAD_LEN; i++)
					src[i] = (uint8_t)t_rand64();
				len = t_rand64() % (fi->size + 1u);
				T_CHECK(wire_mad_set_bytes(mad, id, src, len) == 0, "%s set_bytes",
					fi->name);
				p = wire_mad_bytes(mad, id, &len);
				T_CHECK(p == mad + fi->bit / 8 && len == fi->size, "%s bytes", fi->name);
				T_CHECK(wire_mad_set_bytes(mad, id, src, fi->size + 1u) == -EMSGSIZE,
					"%s overlong bytes", fi->name);
				T_CHECK(wire_mad_set(mad, id, 0) == -EINVAL && wire_mad_get(mad, id) == 0,
					"%s as a number", fi->name);
			} else {
				uint64_t v = t_rand64() & width_mask(fi->width);

				T_CHECK(wire_mad_set(mad, id, v) == 0 && wire_mad_get(mad, id) == v,
					"%s: set/get 0x%llx", fi->name, (unsigned long long)v);
				if (fi->width < 64)
					T_CHECK(wire_mad_set(mad, id, width_mask(fi->width) + 1) == -ERANGE,
						"%s: too-wide value accepted", fi->name);
				T_CHECK(wire_mad_bytes(mad, id, &len) == NULL && len == 0 &&
					wire_mad_set_bytes(mad, id, src, 1) == -EINVAL,
					"%s as bytes", fi->name);
			}
			/* Only the field's bits moved. */
			for (unsigned b = 0; b < 8 * WIRE_MAD_LEN; b++) {
				bool in = b >= fi->bit && b < (unsigned)fi->bit + fi->width;
				uint8_t m = (uint8_t)(0x80u >> (b % 8));

				if (!in && (mad[b / 8] & m) != (before[b / 8] & m)) {
					T_CHECK(0, "%s: set changed bit %u", fi->name, b);
					break;
				}
			}
			n++;
		}
	}
	T_CHECK(wire_mad_get((const uint8_t *)"", WIRE_CM_NFIELDS) == 0, "bad id get");
	printf("accessors: %u random set/get rounds, each touching only its field\n", n);
}

/* Random typed messages: encode, check each field through the by-id getter,
 * decode, compare the structs. */
static void check_messages(void)
{
	unsigned n = 0;

	for (size_t a = 0; a < NATTRS; a++) {
		for (int rep = 0; rep < 50; rep++) {
			struct wire_cm_msg m, back;
			uint8_t out[WIRE_MAD_LEN];
			int rc;

			memset(&m, 0, sizeof(m));
			wire_cm_hdr_init(&m.hdr, attrs[a], t_rand64());
			for (int f = 0; f < WIRE_CM_NFIELDS; f++) {
				const struct wire_cm_field_info *fi = &wire_cm_fields[f];
				uint8_t *p = (uint8_t *)&m + fi->off;

				if (fi->attr != attrs[a])
					continue;
				if (fi->bytes) {
					for (unsigned i = 0; i < fi->size; i++)
						p[i] = (uint8_t)t_rand64();
				} else {
					uint64_t v = t_rand64() & width_mask(fi->width);
					uint8_t u8 = (uint8_t)v;
					uint16_t u16 = (uint16_t)v;
					uint32_t u32 = (uint32_t)v;

					/* info lengths above 72 are refused by decode */
					if (strstr(fi->name, "info_length"))
						v = u8 = (uint8_t)(v % (WIRE_CM_INFO_MAX + 1));
					memcpy(p, fi->size == 1 ? (void *)&u8 : fi->size == 2 ? (void *)&u16 :
					       fi->size == 4 ? (void *)&u32 : (void *)&v, fi->size);
				}
			}
			rc = wire_cm_encode(&m, out);
			T_CHECK(rc == WIRE_MAD_LEN, "%s encode %d", wire_cm_attr_name(attrs[a]), rc);
			T_CHECK(out[0] == 1 && out[1] == 7 && out[2] == 2 && out[3] == 3 &&
				out[16] == 0 && out[17] == attrs[a], "%s header bytes",
				wire_cm_attr_name(attrs[a]));
			rc = wire_cm_decode(out, WIRE_MAD_LEN, &back);
			T_CHECK(rc == 0, "%s decode %d", wire_cm_attr_name(attrs[a]), rc);
			for (int f = 0; f < WIRE_CM_NFIELDS; f++) {
				const struct wire_cm_field_info *fi = &wire_cm_fields[f];

				if (fi->attr && fi->attr != attrs[a])
					continue;
				T_CHECK(!memcmp((uint8_t *)&m + fi->off, (uint8_t *)&back + fi->off,
					      fi->size), "%s differs after the round trip", fi->name);
				if (!fi->bytes) {
					uint64_t v = 0;

					memcpy(&v, (uint8_t *)&m + fi->off, fi->size); /* little-endian host */
					T_CHECK(wire_mad_get(out, (enum wire_cm_field)f) == v,
						"%s on the wire", fi->name);
				}
			}
			n++;
		}
	}
	/* wire_cm_private_data finds the same bytes as the table. */
	for (size_t a = 0; a < NATTRS; a++) {
		struct wire_cm_msg m;
		size_t len = 0;
		uint8_t *pd;

		memset(&m, 0, sizeof(m));
		m.hdr.attr_id = attrs[a];
		pd = wire_cm_private_data(&m, &len);
		for (int f = 0; f < WIRE_CM_NFIELDS; f++)
			if (wire_cm_fields[f].attr == attrs[a] &&
			    strstr(wire_cm_fields[f].name, ".private_data"))
				T_CHECK(pd == (uint8_t *)&m + wire_cm_fields[f].off &&
					len == wire_cm_fields[f].size, "%s private data pointer",
					wire_cm_attr_name(attrs[a]));
		n++;
	}
	{
		struct wire_cm_msg m = { .hdr = { .attr_id = 0x0001 } };
		size_t len = 1;

		T_CHECK(wire_cm_private_data(&m, &len) == NULL && len == 0, "private data of 0x0001");
	}
	printf("typed messages: %u random messages of %zu kinds round-trip\n", n, NATTRS);

	/* Refusals. */
	{
		struct wire_cm_msg m;
		uint8_t out[WIRE_MAD_LEN];

		memset(&m, 0, sizeof(m));
		wire_cm_hdr_init(&m.hdr, 0x0020, 1);
		T_CHECK(wire_cm_encode(&m, out) == -EOPNOTSUPP, "unknown attribute encoded");
		wire_cm_hdr_init(&m.hdr, WIRE_CM_ATTR_REQ, 1);
		m.req.local_qpn = 1u << 24;
		T_CHECK(wire_cm_encode(&m, out) == -ERANGE, "25-bit QPN encoded");
		m.req.local_qpn = 0xffffff;
		m.req.path_mtu = 16;
		T_CHECK(wire_cm_encode(&m, out) == -ERANGE, "5-bit MTU encoded");
		m.req.path_mtu = 5;
		T_CHECK(wire_cm_encode(&m, out) == WIRE_MAD_LEN, "valid REQ refused");

		memset(&m, 0, sizeof(m));
		wire_cm_hdr_init(&m.hdr, WIRE_CM_ATTR_REJ, 2);
		m.rej.reason = WIRE_CM_REJ_CONSUMER_DEFINED;
		m.rej.reject_info_length = WIRE_CM_INFO_MAX;
		T_CHECK(wire_cm_encode(&m, out) == WIRE_MAD_LEN &&
			wire_cm_decode(out, WIRE_MAD_LEN, &m) == 0, "REJ with 72 bytes of ARI");
		wire_mad_set(out, WIRE_CM_REJ_reject_info_length, WIRE_CM_INFO_MAX + 1);
		T_CHECK(wire_cm_decode(out, WIRE_MAD_LEN, &m) == -EBADMSG, "REJ ARI length 73");

		memset(&m, 0, sizeof(m));
		wire_cm_hdr_init(&m.hdr, WIRE_CM_ATTR_SIDR_REP, 3);
		T_CHECK(wire_cm_encode(&m, out) == WIRE_MAD_LEN, "SIDR_REP encode");
		wire_mad_set(out, WIRE_CM_SIDR_REP_additional_info_length, 200);
		T_CHECK(wire_cm_decode(out, WIRE_MAD_LEN, &m) == -EBADMSG, "SIDR_REP info length 200");

		struct wire_mad_hdr h;

		T_CHECK(wire_mad_hdr_decode(out, 23, &h) == -EBADMSG, "short header");
		T_CHECK(wire_mad_hdr_decode(out, 24, &h) == 0 && h.tid == 3 &&
			h.attr_id == WIRE_CM_ATTR_SIDR_REP, "header decode");
		printf("refused: unknown attribute, values wider than their field, "
		       "info lengths over 72, short headers\n");
	}
}

static void check_cma(void)
{
	struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = htons(40000) };
	struct sockaddr_in d4 = { .sin_family = AF_INET, .sin_port = htons(7174) };
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(1) };
	struct sockaddr_in6 d6 = { .sin6_family = AF_INET6, .sin6_port = htons(2) };
	struct sockaddr_storage ss, sd;
	struct wire_cma_hdr h, back;
	uint8_t buf[WIRE_CMA_HDR_LEN];
	uint64_t sid;
	static const uint8_t want4[WIRE_CMA_HDR_LEN] = {
		0x00, 0x40, 0x9c, 0x40,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 127, 0, 0, 1,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 127, 0, 0, 2,
	};

	/* Service ids: (ps << 16) + port, all under IB_CMA_SERVICE_ID. */
	sid = wire_cm_service_id(RDMA_PS_TCP, 7174);
	T_CHECK(sid == 0x0000000001061c06ull, "TCP service id %llx", (unsigned long long)sid);
	T_CHECK(wire_cm_service_id(RDMA_PS_UDP, 0xffff) == 0x000000000111ffffull, "UDP sid");
	T_CHECK(wire_cm_service_id(RDMA_PS_IB, 1) == 0x00000000013f0001ull, "IB sid");
	T_CHECK(wire_cm_service_id_is_cma(sid) && wire_cm_service_id_ps(sid) == RDMA_PS_TCP &&
		wire_cm_service_id_port(sid) == 7174, "sid parts");
	T_CHECK(!wire_cm_service_id_is_cma(0x0200000000000000ull) &&
		!wire_cm_service_id_is_cma(0x0000000000010000ull) &&
		!wire_cm_service_id_is_cma(0x0000000101060000ull), "non-rdma_cm ids");

	inet_pton(AF_INET, "127.0.0.1", &s4.sin_addr);
	inet_pton(AF_INET, "127.0.0.2", &d4.sin_addr);
	T_CHECK(wire_cma_hdr_from_sockaddr(&h, (void *)&s4, (void *)&d4) == 0, "v4 from sockaddr");
	wire_cma_hdr_encode(buf, &h);
	T_CHECK(!memcmp(buf, want4, sizeof(buf)), "IPv4 cma_hdr bytes");
	T_CHECK(wire_cma_hdr_decode(buf, sizeof(buf), &back) == 0 &&
		!memcmp(&back, &h, sizeof(h)), "IPv4 cma_hdr decode");
	T_CHECK(wire_cma_hdr_to_sockaddr(&back, sid, &ss, &sd) == 0 &&
		!memcmp(&ss, &s4, sizeof(s4)) && !memcmp(&sd, &d4, sizeof(d4)),
		"IPv4 sockaddrs back");

	inet_pton(AF_INET6, "fe80::1", &s6.sin6_addr);
	inet_pton(AF_INET6, "2001:db8::2", &d6.sin6_addr);
	T_CHECK(wire_cma_hdr_from_sockaddr(&h, (void *)&s6, (void *)&d6) == 0, "v6 from sockaddr");
	wire_cma_hdr_encode(buf, &h);
	T_CHECK(buf[1] == 0x60 && buf[2] == 0 && buf[3] == 1 && !memcmp(buf + 4, &s6.sin6_addr, 16) &&
		!memcmp(buf + 20, &d6.sin6_addr, 16), "IPv6 cma_hdr bytes");
	T_CHECK(wire_cma_hdr_decode(buf, sizeof(buf), &back) == 0 &&
		wire_cma_hdr_to_sockaddr(&back, wire_cm_service_id(RDMA_PS_TCP, 2), &ss, &sd) == 0 &&
		!memcmp(&ss, &s6, sizeof(s6)) && !memcmp(&sd, &d6, sizeof(d6)),
		"IPv6 sockaddrs back");

	T_CHECK(wire_cma_hdr_decode(buf, WIRE_CMA_HDR_LEN - 1, &back) == -EBADMSG, "short cma_hdr");
	buf[0] = 1;
	T_CHECK(wire_cma_hdr_decode(buf, sizeof(buf), &back) == -EPROTONOSUPPORT, "cma version 1");
	buf[0] = 0;
	buf[1] = 0x50;
	T_CHECK(wire_cma_hdr_decode(buf, sizeof(buf), &back) == -EPROTONOSUPPORT, "IP version 5");
	T_CHECK(wire_cma_hdr_from_sockaddr(&h, (void *)&s4, (void *)&d6) == -EAFNOSUPPORT,
		"mixed families");
	h.ip_version = 5;
	T_CHECK(wire_cma_hdr_to_sockaddr(&h, sid, &ss, &sd) == -EAFNOSUPPORT, "IP version 5 out");
	printf("rdma_cm: service ids (ps << 16) + port for TCP/UDP/IB, cma_hdr IPv4/IPv6 "
	       "bytes and sockaddrs, bad versions refused\n");
}

int main(void)
{
	t_rand_seed(0x2545f4914f6cdd1dull);
	check_table();
	check_known_offsets();
	check_accessors();
	check_messages();
	check_cma();
	return t_summary();
}
