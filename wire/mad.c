/* wire/mad.c: CM MAD field access and the message codec.  Everything goes
 * through wire_cm_fields[], generated from the lists in mad.h, so a field's
 * place is written down exactly once. */
#include <errno.h>
#include <string.h>

#include "wire/mad.h"

/* The header's pseudo attribute in the table. */
#define WIRE_CM_ATTR_HDR 0

/* Where a list's byte offsets count from. */
#define BASE_OF(MSG) (WIRE_CM_ATTR_##MSG ? WIRE_MAD_HDR_LEN : 0)

/* Member of struct wire_cm_msg that holds message MSG. */
#define UNION_HDR hdr
#define UNION_REQ req
#define UNION_MRA mra
#define UNION_REJ rej
#define UNION_REP rep
#define UNION_RTU rtu
#define UNION_DREQ dreq
#define UNION_DREP drep
#define UNION_SIDR_REQ sidr_req
#define UNION_SIDR_REP sidr_rep
#define UNION_LAP lap
#define UNION_APR apr
#define MEMBER(MSG, m) UNION_##MSG.m

#define ROW_F(MSG, m, t, by, bi, w)                                           \
	[WIRE_CM_##MSG##_##m] = {                                           \
		.name = #MSG "." #m,                                        \
		.attr = WIRE_CM_ATTR_##MSG,                                 \
		.bit = (uint16_t)((BASE_OF(MSG) + (by)) * 8 + (bi)),        \
		.width = (w),                                               \
		.bytes = false,                                             \
		.off = (uint16_t)offsetof(struct wire_cm_msg, MEMBER(MSG, m)), \
		.size = (uint16_t)sizeof(t),                                \
	},
#define ROW_B(MSG, m, by, len)                                                \
	[WIRE_CM_##MSG##_##m] = {                                           \
		.name = #MSG "." #m,                                        \
		.attr = WIRE_CM_ATTR_##MSG,                                 \
		.bit = (uint16_t)((BASE_OF(MSG) + (by)) * 8),               \
		.width = (len) * 8,                                         \
		.bytes = true,                                              \
		.off = (uint16_t)offsetof(struct wire_cm_msg, MEMBER(MSG, m)), \
		.size = (len),                                              \
	},
#define ROWS_M(MSG, u, LIST) LIST(ROW_F, ROW_B)

const struct wire_cm_field_info wire_cm_fields[WIRE_CM_NFIELDS] = {
	WIRE_MAD_HDR_FIELDS(ROW_F, ROW_B)
	WIRE_CM_MESSAGES(ROWS_M)
};

/* The typed struct's members must be wide enough for their fields; the
 * unit test checks the rest of the table (bounds, overlaps). */
#define CHECK_F(MSG, m, t, by, bi, w)                                         \
	_Static_assert((w) <= 8 * sizeof(t), #MSG "." #m " too wide for its type");
#define CHECK_B(MSG, m, by, len)                                              \
	_Static_assert(BASE_OF(MSG) + (by) + (len) <= WIRE_MAD_LEN, #MSG "." #m " past the MAD");
#define CHECK_M(MSG, u, LIST) LIST(CHECK_F, CHECK_B)
WIRE_MAD_HDR_FIELDS(CHECK_F, CHECK_B)
WIRE_CM_MESSAGES(CHECK_M)

static bool field_ok(enum wire_cm_field f)
{
	return (unsigned)f < WIRE_CM_NFIELDS;
}

/* A number field spans at most 8 bytes: fields wider than 57 bits are
 * byte-aligned (the table test checks), so the span fits a uint64_t. */
uint64_t wire_mad_get(const uint8_t *mad, enum wire_cm_field f)
{
	const struct wire_cm_field_info *fi;
	unsigned first, last, tail;
	uint64_t v = 0;

	if (!field_ok(f) || wire_cm_fields[f].bytes)
		return 0;
	fi = &wire_cm_fields[f];
	first = fi->bit / 8u;
	last = (fi->bit + fi->width - 1u) / 8u;
	tail = (8u - (fi->bit + fi->width) % 8u) % 8u;  /* bits after the field */
	for (unsigned i = first; i <= last; i++)
		v = v << 8 | mad[i];
	v >>= tail;
	if (fi->width < 64)
		v &= (UINT64_C(1) << fi->width) - 1;
	return v;
}

int wire_mad_set(uint8_t *mad, enum wire_cm_field f, uint64_t v)
{
	const struct wire_cm_field_info *fi;
	unsigned first, last, tail;
	uint64_t mask;

	if (!field_ok(f) || wire_cm_fields[f].bytes)
		return -EINVAL;
	fi = &wire_cm_fields[f];
	mask = fi->width < 64 ? (UINT64_C(1) << fi->width) - 1 : UINT64_MAX;
	if (v & ~mask)
		return -ERANGE;
	first = fi->bit / 8u;
	last = (fi->bit + fi->width - 1u) / 8u;
	tail = (8u - (fi->bit + fi->width) % 8u) % 8u;
	mask <<= tail;
	v <<= tail;
	/* From the last byte backwards, one byte of mask and value at a time. */
	for (unsigned i = last + 1; i-- > first;) {
		uint8_t m = (uint8_t)mask;

		mad[i] = (uint8_t)((mad[i] & ~m) | ((uint8_t)v & m));
		mask >>= 8;
		v >>= 8;
	}
	return 0;
}

const uint8_t *wire_mad_bytes(const uint8_t *mad, enum wire_cm_field f, size_t *len)
{
	if (!field_ok(f) || !wire_cm_fields[f].bytes) {
		*len = 0;
		return NULL;
	}
	*len = wire_cm_fields[f].size;
	return mad + wire_cm_fields[f].bit / 8u;
}

int wire_mad_set_bytes(uint8_t *mad, enum wire_cm_field f, const void *src, size_t len)
{
	const struct wire_cm_field_info *fi;
	uint8_t *dst;

	if (!field_ok(f) || !wire_cm_fields[f].bytes)
		return -EINVAL;
	fi = &wire_cm_fields[f];
	if (len > fi->size)
		return -EMSGSIZE;
	dst = mad + fi->bit / 8u;
	if (len)
		memcpy(dst, src, len);
	memset(dst + len, 0, fi->size - len);
	return 0;
}

/* ---- struct <-> table ------------------------------------------------------ */

static uint64_t member_load(const struct wire_cm_msg *msg, const struct wire_cm_field_info *fi)
{
	const uint8_t *p = (const uint8_t *)msg + fi->off;
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (fi->size) {
	case 1: memcpy(&u8, p, 1); return u8;
	case 2: memcpy(&u16, p, 2); return u16;
	case 4: memcpy(&u32, p, 4); return u32;
	default: memcpy(&u64, p, 8); return u64;
	}
}

static void member_store(struct wire_cm_msg *msg, const struct wire_cm_field_info *fi,
			 uint64_t v)
{
	uint8_t *p = (uint8_t *)msg + fi->off;
	uint8_t u8 = (uint8_t)v;
	uint16_t u16 = (uint16_t)v;
	uint32_t u32 = (uint32_t)v;

	switch (fi->size) {
	case 1: memcpy(p, &u8, 1); break;
	case 2: memcpy(p, &u16, 2); break;
	case 4: memcpy(p, &u32, 4); break;
	default: memcpy(p, &v, 8); break;
	}
}

/* Fields of attr (0 = the header) from buf into msg. */
static void fields_decode(const uint8_t *buf, uint16_t attr, struct wire_cm_msg *msg)
{
	for (int f = 0; f < WIRE_CM_NFIELDS; f++) {
		const struct wire_cm_field_info *fi = &wire_cm_fields[f];

		if (fi->attr != attr)
			continue;
		if (fi->bytes)
			memcpy((uint8_t *)msg + fi->off, buf + fi->bit / 8u, fi->size);
		else
			member_store(msg, fi, wire_mad_get(buf, (enum wire_cm_field)f));
	}
}

static int fields_encode(const struct wire_cm_msg *msg, uint16_t attr, uint8_t *out)
{
	for (int f = 0; f < WIRE_CM_NFIELDS; f++) {
		const struct wire_cm_field_info *fi = &wire_cm_fields[f];

		if (fi->attr != attr)
			continue;
		if (fi->bytes)
			memcpy(out + fi->bit / 8u, (const uint8_t *)msg + fi->off, fi->size);
		else if (wire_mad_set(out, (enum wire_cm_field)f, member_load(msg, fi)))
			return -ERANGE;
	}
	return 0;
}

const char *wire_cm_attr_name(uint16_t attr_id)
{
	switch (attr_id) {
#define NAME_M(MSG, u, LIST)                                                  \
	case WIRE_CM_ATTR_##MSG:                                            \
		return #MSG;
		WIRE_CM_MESSAGES(NAME_M)
#undef NAME_M
	default:
		return NULL;
	}
}

uint8_t *wire_cm_private_data(struct wire_cm_msg *msg, size_t *len)
{
	switch (msg->hdr.attr_id) {
#define PD_M(MSG, u, LIST)                                                    \
	case WIRE_CM_ATTR_##MSG:                                            \
		*len = sizeof(msg->u.private_data);                         \
		return msg->u.private_data;
		WIRE_CM_MESSAGES(PD_M)
#undef PD_M
	default:
		*len = 0;
		return NULL;
	}
}

int wire_mad_hdr_decode(const uint8_t *buf, size_t len, struct wire_mad_hdr *hdr)
{
	struct wire_cm_msg tmp;

	if (len < WIRE_MAD_HDR_LEN)
		return -EBADMSG;
	memset(&tmp.hdr, 0, sizeof(tmp.hdr));
	fields_decode(buf, WIRE_CM_ATTR_HDR, &tmp);
	*hdr = tmp.hdr;
	return 0;
}

void wire_cm_hdr_init(struct wire_mad_hdr *hdr, uint16_t attr_id, uint64_t tid)
{
	memset(hdr, 0, sizeof(*hdr));
	hdr->base_version = WIRE_MAD_BASE_VERSION;
	hdr->mgmt_class = WIRE_MAD_CLASS_CM;
	hdr->class_version = WIRE_MAD_CM_CLASS_VERSION;
	hdr->method = WIRE_MAD_METHOD_SEND;
	hdr->tid = tid;
	hdr->attr_id = attr_id;
}

int wire_cm_decode(const uint8_t *buf, size_t len, struct wire_cm_msg *msg)
{
	uint16_t attr;

	memset(msg, 0, sizeof(*msg));
	if (len < WIRE_MAD_HDR_LEN)
		return -EBADMSG;
	fields_decode(buf, WIRE_CM_ATTR_HDR, msg);
	if (len != WIRE_MAD_LEN)
		return -EBADMSG;
	if (msg->hdr.base_version != WIRE_MAD_BASE_VERSION ||
	    msg->hdr.mgmt_class != WIRE_MAD_CLASS_CM ||
	    msg->hdr.class_version != WIRE_MAD_CM_CLASS_VERSION)
		return -EPROTONOSUPPORT;
	attr = msg->hdr.attr_id;
	if (msg->hdr.method != WIRE_MAD_METHOD_SEND || !wire_cm_attr_name(attr))
		return -EOPNOTSUPP;
	fields_decode(buf, attr, msg);
	/* The info lengths index fixed 72-byte arrays: a larger one is a lie
	 * a consumer must never act on. */
	if ((attr == WIRE_CM_ATTR_REJ && msg->rej.reject_info_length > WIRE_CM_INFO_MAX) ||
	    (attr == WIRE_CM_ATTR_SIDR_REP &&
	     msg->sidr_rep.additional_info_length > WIRE_CM_INFO_MAX) ||
	    (attr == WIRE_CM_ATTR_APR && msg->apr.additional_info_length > WIRE_CM_INFO_MAX))
		return -EBADMSG;
	return 0;
}

int wire_cm_encode(const struct wire_cm_msg *msg, uint8_t *out)
{
	uint16_t attr = msg->hdr.attr_id;

	if (!wire_cm_attr_name(attr))
		return -EOPNOTSUPP;
	memset(out, 0, WIRE_MAD_LEN);
	if (fields_encode(msg, WIRE_CM_ATTR_HDR, out) || fields_encode(msg, attr, out))
		return -ERANGE;
	return WIRE_MAD_LEN;
}

int wire_cm_coverage(uint16_t attr_id, uint8_t mask[WIRE_MAD_LEN])
{
	if (!wire_cm_attr_name(attr_id))
		return -EOPNOTSUPP;
	memset(mask, 0, WIRE_MAD_LEN);
	for (int f = 0; f < WIRE_CM_NFIELDS; f++) {
		const struct wire_cm_field_info *fi = &wire_cm_fields[f];

		if (fi->attr != attr_id && fi->attr != WIRE_CM_ATTR_HDR)
			continue;
		for (unsigned b = fi->bit; b < (unsigned)fi->bit + fi->width; b++)
			mask[b / 8] |= (uint8_t)(0x80u >> (b % 8));
	}
	return 0;
}
