/* wire/mad.h: the IB CM MAD codec (IBTA Vol 1 ch. 12, "Communication
 * Management").  rdma_cm connects by exchanging 256-byte MADs as UD
 * SEND_ONLY payloads to QP1 (docs/wire.md "rdma_cm on the wire").
 *
 * Pure functions: no I/O, no allocation, safe on hostile input.
 *
 * Every field is described ONCE, in the X-macro lists below, by its place
 * in the spec's Byte[Bit] notation (bit 0 = most significant bit of the
 * byte, fields run big-endian across bytes) and its width in bits.  The
 * lists generate the field ids, the typed structs and the field table that
 * both the by-id accessors and the struct codec go through.
 */
#ifndef WIRE_MAD_H
#define WIRE_MAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sockaddr;
struct sockaddr_storage;

enum {
	WIRE_MAD_LEN = 256,          /* every CM MAD, UD payload of exactly this */
	WIRE_MAD_HDR_LEN = 24,       /* common MAD header */
	WIRE_CM_DATA_LEN = WIRE_MAD_LEN - WIRE_MAD_HDR_LEN,  /* 232 */
	WIRE_MAD_BASE_VERSION = 1,
	WIRE_MAD_CLASS_CM = 0x07,
	WIRE_MAD_CM_CLASS_VERSION = 2,
	WIRE_MAD_METHOD_GET = 0x01,
	WIRE_MAD_METHOD_SET = 0x02,
	WIRE_MAD_METHOD_SEND = 0x03, /* every CM message (seen in the captures) */
	WIRE_MAD_METHOD_RESP = 0x80, /* R bit: GetResp = 0x81 */
	WIRE_GSI_QPN = 1,
};
#define WIRE_GSI_QKEY 0x80010000u    /* QP1's well-known Q_Key */

/* Attribute IDs of the CM messages (IBTA Table 104). */
enum wire_cm_attr {
	WIRE_CM_ATTR_CLASS_PORT_INFO = 0x0001,
	WIRE_CM_ATTR_REQ = 0x0010,
	WIRE_CM_ATTR_MRA = 0x0011,
	WIRE_CM_ATTR_REJ = 0x0012,
	WIRE_CM_ATTR_REP = 0x0013,
	WIRE_CM_ATTR_RTU = 0x0014,
	WIRE_CM_ATTR_DREQ = 0x0015,
	WIRE_CM_ATTR_DREP = 0x0016,
	WIRE_CM_ATTR_SIDR_REQ = 0x0017,
	WIRE_CM_ATTR_SIDR_REP = 0x0018,
	WIRE_CM_ATTR_LAP = 0x0019,
	WIRE_CM_ATTR_APR = 0x001a,
};

/* ---- the field lists ------------------------------------------------------
 * F(MSG, member, ctype, byte, bit, width): a number of width <= 64 bits.
 * B(MSG, member, byte, len): len whole bytes (GIDs, ARI, private data).
 * HDR offsets count from the MAD start, message offsets from byte 24 (the
 * spec's tables count that way too).  Reserved bits are not listed: they
 * are sent as zero and ignored on receipt.
 */
#define WIRE_MAD_HDR_FIELDS(F, B)                                            \
	F(HDR, base_version, uint8_t, 0, 0, 8)                              \
	F(HDR, mgmt_class, uint8_t, 1, 0, 8)                                \
	F(HDR, class_version, uint8_t, 2, 0, 8)                             \
	F(HDR, method, uint8_t, 3, 0, 8)                                    \
	F(HDR, status, uint16_t, 4, 0, 16)                                  \
	F(HDR, class_specific, uint16_t, 6, 0, 16)                          \
	F(HDR, tid, uint64_t, 8, 0, 64)                                     \
	F(HDR, attr_id, uint16_t, 16, 0, 16)                                \
	F(HDR, attr_mod, uint32_t, 20, 0, 32)

/* A path in a REQ (Table 106), 44 bytes from base; p is primary/alternate. */
#define WIRE_CM_PATH_FIELDS(F, B, MSG, p, base)                              \
	F(MSG, p##_local_lid, uint16_t, (base) + 0, 0, 16)                  \
	F(MSG, p##_remote_lid, uint16_t, (base) + 2, 0, 16)                 \
	B(MSG, p##_local_gid, (base) + 4, 16)                               \
	B(MSG, p##_remote_gid, (base) + 20, 16)                             \
	F(MSG, p##_flow_label, uint32_t, (base) + 36, 0, 20)                \
	F(MSG, p##_packet_rate, uint8_t, (base) + 39, 2, 6)                 \
	F(MSG, p##_traffic_class, uint8_t, (base) + 40, 0, 8)               \
	F(MSG, p##_hop_limit, uint8_t, (base) + 41, 0, 8)                   \
	F(MSG, p##_sl, uint8_t, (base) + 42, 0, 4)                          \
	F(MSG, p##_subnet_local, uint8_t, (base) + 42, 4, 1)                \
	F(MSG, p##_local_ack_timeout, uint8_t, (base) + 43, 0, 5)

/* Table 106.  Seen from Linux rdma_cm over rxe (tests/vectors): LIDs are
 * 0xFFFF (permissive), GIDs IPv4-mapped (::ffff:a.b.c.d), hop limit 64,
 * path MTU 3 (1024), retry and RNR retry 7, CM response timeouts 20, max CM
 * retries 15, local ACK timeout 19, Q_Key 0, flow label see
 * wire_cm_flow_label().  starting_psn is the PSN the SENDER of the REQ
 * (and of the REP) will expect to RECEIVE: the peer starts its send queue
 * there (the kernel sets rq_psn from its own REQ, sq_psn from the peer's). */
#define WIRE_CM_REQ_FIELDS(F, B)                                             \
	F(REQ, local_comm_id, uint32_t, 0, 0, 32)                           \
	F(REQ, vendor_id, uint32_t, 5, 0, 24)    /* ECE, with hdr.attr_mod */ \
	F(REQ, service_id, uint64_t, 8, 0, 64)                              \
	F(REQ, local_ca_guid, uint64_t, 16, 0, 64)                          \
	F(REQ, local_qkey, uint32_t, 28, 0, 32)                             \
	F(REQ, local_qpn, uint32_t, 32, 0, 24)                              \
	F(REQ, responder_resources, uint8_t, 35, 0, 8)                      \
	F(REQ, local_eecn, uint32_t, 36, 0, 24)                             \
	F(REQ, initiator_depth, uint8_t, 39, 0, 8)                          \
	F(REQ, remote_eecn, uint32_t, 40, 0, 24)                            \
	F(REQ, remote_cm_response_timeout, uint8_t, 43, 0, 5)               \
	F(REQ, transport_service_type, uint8_t, 43, 5, 2)                   \
	F(REQ, end_to_end_flow_control, uint8_t, 43, 7, 1)                  \
	F(REQ, starting_psn, uint32_t, 44, 0, 24)                           \
	F(REQ, local_cm_response_timeout, uint8_t, 47, 0, 5)                \
	F(REQ, retry_count, uint8_t, 47, 5, 3)                              \
	F(REQ, pkey, uint16_t, 48, 0, 16)                                   \
	F(REQ, path_mtu, uint8_t, 50, 0, 4)                                 \
	F(REQ, rdc_exists, uint8_t, 50, 4, 1)                               \
	F(REQ, rnr_retry_count, uint8_t, 50, 5, 3)                          \
	F(REQ, max_cm_retries, uint8_t, 51, 0, 4)                           \
	F(REQ, srq, uint8_t, 51, 4, 1)                                      \
	F(REQ, extended_transport_type, uint8_t, 51, 5, 3)                  \
	WIRE_CM_PATH_FIELDS(F, B, REQ, primary, 52)                         \
	WIRE_CM_PATH_FIELDS(F, B, REQ, alternate, 96)                       \
	F(REQ, sap_supported, uint8_t, 139, 5, 1)                           \
	B(REQ, private_data, 140, 92)

/* Table 107 */
#define WIRE_CM_MRA_FIELDS(F, B)                                             \
	F(MRA, local_comm_id, uint32_t, 0, 0, 32)                           \
	F(MRA, remote_comm_id, uint32_t, 4, 0, 32)                          \
	F(MRA, message_mraed, uint8_t, 8, 0, 2)                             \
	F(MRA, service_timeout, uint8_t, 9, 0, 5)                           \
	B(MRA, private_data, 10, 222)

/* Table 108 */
#define WIRE_CM_REJ_FIELDS(F, B)                                             \
	F(REJ, local_comm_id, uint32_t, 0, 0, 32)                           \
	F(REJ, remote_comm_id, uint32_t, 4, 0, 32)                          \
	F(REJ, message_rejected, uint8_t, 8, 0, 2)                          \
	F(REJ, reject_info_length, uint8_t, 9, 0, 7)                        \
	F(REJ, reason, uint16_t, 10, 0, 16)                                 \
	B(REJ, ari, 12, 72)                                                 \
	B(REJ, private_data, 84, 148)

/* Table 110 (starting_psn: see the REQ's) */
#define WIRE_CM_REP_FIELDS(F, B)                                             \
	F(REP, local_comm_id, uint32_t, 0, 0, 32)                           \
	F(REP, remote_comm_id, uint32_t, 4, 0, 32)                          \
	F(REP, local_qkey, uint32_t, 8, 0, 32)                              \
	F(REP, local_qpn, uint32_t, 12, 0, 24)                              \
	F(REP, vendor_id_h, uint8_t, 15, 0, 8)   /* ECE vendor id, bits 23:16 */ \
	F(REP, local_eecn, uint32_t, 16, 0, 24)                             \
	F(REP, vendor_id_m, uint8_t, 19, 0, 8)   /* bits 15:8 */             \
	F(REP, starting_psn, uint32_t, 20, 0, 24)                           \
	F(REP, vendor_id_l, uint8_t, 23, 0, 8)   /* bits 7:0 */              \
	F(REP, responder_resources, uint8_t, 24, 0, 8)                      \
	F(REP, initiator_depth, uint8_t, 25, 0, 8)                          \
	F(REP, target_ack_delay, uint8_t, 26, 0, 5)                         \
	F(REP, failover_accepted, uint8_t, 26, 5, 2)                        \
	F(REP, end_to_end_flow_control, uint8_t, 26, 7, 1)                  \
	F(REP, rnr_retry_count, uint8_t, 27, 0, 3)                          \
	F(REP, srq, uint8_t, 27, 3, 1)                                      \
	F(REP, local_ca_guid, uint64_t, 28, 0, 64)                          \
	B(REP, private_data, 36, 196)

/* Table 111 */
#define WIRE_CM_RTU_FIELDS(F, B)                                             \
	F(RTU, local_comm_id, uint32_t, 0, 0, 32)                           \
	F(RTU, remote_comm_id, uint32_t, 4, 0, 32)                          \
	B(RTU, private_data, 8, 224)

/* Table 112 */
#define WIRE_CM_DREQ_FIELDS(F, B)                                            \
	F(DREQ, local_comm_id, uint32_t, 0, 0, 32)                          \
	F(DREQ, remote_comm_id, uint32_t, 4, 0, 32)                         \
	F(DREQ, remote_qpn_eecn, uint32_t, 8, 0, 24)                        \
	B(DREQ, private_data, 12, 220)

/* Table 113 */
#define WIRE_CM_DREP_FIELDS(F, B)                                            \
	F(DREP, local_comm_id, uint32_t, 0, 0, 32)                          \
	F(DREP, remote_comm_id, uint32_t, 4, 0, 32)                         \
	B(DREP, private_data, 8, 224)

/* Table 119 */
#define WIRE_CM_SIDR_REQ_FIELDS(F, B)                                        \
	F(SIDR_REQ, request_id, uint32_t, 0, 0, 32)                         \
	F(SIDR_REQ, pkey, uint16_t, 4, 0, 16)                               \
	F(SIDR_REQ, service_id, uint64_t, 8, 0, 64)                         \
	B(SIDR_REQ, private_data, 16, 216)

/* Table 120 */
#define WIRE_CM_SIDR_REP_FIELDS(F, B)                                        \
	F(SIDR_REP, request_id, uint32_t, 0, 0, 32)                         \
	F(SIDR_REP, status, uint8_t, 4, 0, 8)                               \
	F(SIDR_REP, additional_info_length, uint8_t, 5, 0, 8)               \
	F(SIDR_REP, qpn, uint32_t, 8, 0, 24)                                \
	F(SIDR_REP, service_id, uint64_t, 12, 0, 64)                        \
	F(SIDR_REP, qkey, uint32_t, 20, 0, 32)                              \
	B(SIDR_REP, additional_info, 24, 72)                                \
	B(SIDR_REP, private_data, 96, 136)

/* Table 115 (path migration; rdma_cm on RoCE does not send it) */
#define WIRE_CM_LAP_FIELDS(F, B)                                             \
	F(LAP, local_comm_id, uint32_t, 0, 0, 32)                           \
	F(LAP, remote_comm_id, uint32_t, 4, 0, 32)                          \
	F(LAP, remote_qpn_eecn, uint32_t, 12, 0, 24)                        \
	F(LAP, remote_cm_response_timeout, uint8_t, 15, 0, 5)               \
	F(LAP, alternate_local_lid, uint16_t, 20, 0, 16)                    \
	F(LAP, alternate_remote_lid, uint16_t, 22, 0, 16)                   \
	B(LAP, alternate_local_gid, 24, 16)                                 \
	B(LAP, alternate_remote_gid, 40, 16)                                \
	F(LAP, alternate_flow_label, uint32_t, 56, 0, 20)                   \
	F(LAP, alternate_traffic_class, uint8_t, 59, 0, 8)                  \
	F(LAP, alternate_hop_limit, uint8_t, 60, 0, 8)                      \
	F(LAP, alternate_packet_rate, uint8_t, 61, 2, 6)                    \
	F(LAP, alternate_sl, uint8_t, 62, 0, 4)                             \
	F(LAP, alternate_subnet_local, uint8_t, 62, 4, 1)                   \
	F(LAP, alternate_local_ack_timeout, uint8_t, 63, 0, 5)              \
	B(LAP, private_data, 64, 168)

/* Table 116 */
#define WIRE_CM_APR_FIELDS(F, B)                                             \
	F(APR, local_comm_id, uint32_t, 0, 0, 32)                           \
	F(APR, remote_comm_id, uint32_t, 4, 0, 32)                          \
	F(APR, additional_info_length, uint8_t, 8, 0, 8)                    \
	F(APR, ap_status, uint8_t, 9, 0, 8)                                 \
	B(APR, additional_info, 12, 72)                                     \
	B(APR, private_data, 84, 148)

/* Every message: M(MSG, member of the union in struct wire_cm_msg, list). */
#define WIRE_CM_MESSAGES(M)                                                  \
	M(REQ, req, WIRE_CM_REQ_FIELDS)                                     \
	M(MRA, mra, WIRE_CM_MRA_FIELDS)                                     \
	M(REJ, rej, WIRE_CM_REJ_FIELDS)                                     \
	M(REP, rep, WIRE_CM_REP_FIELDS)                                     \
	M(RTU, rtu, WIRE_CM_RTU_FIELDS)                                     \
	M(DREQ, dreq, WIRE_CM_DREQ_FIELDS)                                  \
	M(DREP, drep, WIRE_CM_DREP_FIELDS)                                  \
	M(SIDR_REQ, sidr_req, WIRE_CM_SIDR_REQ_FIELDS)                      \
	M(SIDR_REP, sidr_rep, WIRE_CM_SIDR_REP_FIELDS)                      \
	M(LAP, lap, WIRE_CM_LAP_FIELDS)                                     \
	M(APR, apr, WIRE_CM_APR_FIELDS)

/* ---- generated: field ids ------------------------------------------------ */

#define WIRE_MAD_X_ID_F(MSG, m, t, by, bi, w) WIRE_CM_##MSG##_##m,
#define WIRE_MAD_X_ID_B(MSG, m, by, len) WIRE_CM_##MSG##_##m,
#define WIRE_MAD_X_ID_M(MSG, u, LIST) LIST(WIRE_MAD_X_ID_F, WIRE_MAD_X_ID_B)

/* Field ids read as "message.member": WIRE_CM_REQ_local_qpn. */
enum wire_cm_field {
	WIRE_MAD_HDR_FIELDS(WIRE_MAD_X_ID_F, WIRE_MAD_X_ID_B)
	WIRE_CM_MESSAGES(WIRE_MAD_X_ID_M)
	WIRE_CM_NFIELDS
};

/* ---- generated: typed structs (host order numbers, raw byte strings) ----- */

#define WIRE_MAD_X_MEMBER_F(MSG, m, t, by, bi, w) t m;
#define WIRE_MAD_X_MEMBER_B(MSG, m, by, len) uint8_t m[len];

struct wire_mad_hdr {
	WIRE_MAD_HDR_FIELDS(WIRE_MAD_X_MEMBER_F, WIRE_MAD_X_MEMBER_B)
};

#define WIRE_MAD_X_STRUCT(MSG, u, LIST)                                       \
	struct wire_cm_##u {                                                \
		LIST(WIRE_MAD_X_MEMBER_F, WIRE_MAD_X_MEMBER_B)              \
	};
WIRE_CM_MESSAGES(WIRE_MAD_X_STRUCT)

/* A whole CM MAD: hdr.attr_id says which union member is valid. */
struct wire_cm_msg {
	struct wire_mad_hdr hdr;
	union {
#define WIRE_MAD_X_UNION(MSG, u, LIST) struct wire_cm_##u u;
		WIRE_CM_MESSAGES(WIRE_MAD_X_UNION)
#undef WIRE_MAD_X_UNION
	};
};

/* ---- the field table ----------------------------------------------------- */

struct wire_cm_field_info {
	const char *name;            /* "REQ.local_qpn", "HDR.tid" */
	uint16_t attr;               /* enum wire_cm_attr; 0 = MAD header */
	uint16_t bit;                /* from the MAD start, bit 0 = MSB of byte 0 */
	uint16_t width;              /* bits; > 64 only for byte strings */
	bool bytes;                  /* a byte string (B), not a number (F) */
	uint16_t off;                /* offsetof the member in struct wire_cm_msg */
	uint16_t size;               /* sizeof the member */
};

extern const struct wire_cm_field_info wire_cm_fields[WIRE_CM_NFIELDS];

/* Number field f of a 256-byte MAD (0 for a byte-string field). */
uint64_t wire_mad_get(const uint8_t *mad, enum wire_cm_field f);

/* Store v in number field f, leaving every other bit alone.  Returns 0,
 * -ERANGE if v does not fit the field's width, -EINVAL for a byte string. */
int wire_mad_set(uint8_t *mad, enum wire_cm_field f, uint64_t v);

/* Byte-string field f: a pointer into mad and its length (NULL, 0 for a
 * number field). */
const uint8_t *wire_mad_bytes(const uint8_t *mad, enum wire_cm_field f, size_t *len);

/* Copy len bytes into byte-string field f, zero-filling the rest.
 * Returns 0, -EMSGSIZE if len exceeds the field, -EINVAL for a number. */
int wire_mad_set_bytes(uint8_t *mad, enum wire_cm_field f, const void *src, size_t len);

/* ---- whole messages ------------------------------------------------------ */

/* Decode the 24-byte common header of any MAD (len >= 24).  Returns 0 or
 * -EBADMSG when short. */
int wire_mad_hdr_decode(const uint8_t *buf, size_t len, struct wire_mad_hdr *hdr);

/* A header for a CM message: base version 1, class CM, class version 2,
 * method SEND, status 0. */
void wire_cm_hdr_init(struct wire_mad_hdr *hdr, uint16_t attr_id, uint64_t tid);

/* Transaction ids seen: one per connection for REQ/REP/RTU and for the
 * DREQ/DREP that follow when the same side disconnects; a side that sends
 * its own DREQ picks a new tid.  Linux puts the MAD agent's id in the top
 * 32 bits (2 in the captures). */

/* Decode a CM MAD (the UD payload, exactly 256 bytes).  Returns 0, or
 * -EBADMSG (wrong length; REJ/SIDR_REP/APR info length over 72),
 * -EPROTONOSUPPORT (base version, class or class version not CM's),
 * -EOPNOTSUPP (method is not SEND, or attribute not a CM message).  On
 * error msg->hdr is filled when at least 24 bytes were given, so a caller
 * can answer with the transaction id. */
int wire_cm_decode(const uint8_t *buf, size_t len, struct wire_cm_msg *msg);

/* Encode msg (hdr.attr_id picks the message) into out[256]: reserved bits
 * zero.  Returns WIRE_MAD_LEN, -EOPNOTSUPP for an unknown attribute, or
 * -ERANGE if a value does not fit its field (nothing useful in out then). */
int wire_cm_encode(const struct wire_cm_msg *msg, uint8_t *out);

/* A MAD as it travels on RoCEv2: a UD SEND_ONLY from QP1 to QP1 (Q_Key
 * 0x80010000) with PSN psn, carrying mad, between the addresses and ports
 * of l3.  Fills hdr (WIRE_MAX_HDR_LEN bytes) and icrc (4 bytes, to follow
 * the MAD); returns the header's length or a negative errno. */
struct wire_l3;
int wire_gsi_frame(const struct wire_l3 *l3, uint32_t psn, const uint8_t mad[WIRE_MAD_LEN],
		   uint8_t *hdr, uint8_t icrc[4]);

/* The private data array of msg's message (by hdr.attr_id) and its size;
 * NULL and 0 for an unknown attribute.  For REQ and SIDR_REQ of the TCP and
 * UDP port spaces it starts with the 36-byte cma header (below). */
uint8_t *wire_cm_private_data(struct wire_cm_msg *msg, size_t *len);

/* "REQ", "REP", ... or NULL for an attribute that is not a CM message. */
const char *wire_cm_attr_name(uint16_t attr_id);

/* Bits of the MAD that attribute attr_id defines (header included): mask
 * bit set = covered by some field.  Returns 0 or -EOPNOTSUPP.  For tests:
 * decode+encode must reproduce exactly buf & mask. */
int wire_cm_coverage(uint16_t attr_id, uint8_t mask[WIRE_MAD_LEN]);

/* ---- field values ---------------------------------------------------------- */

/* REQ transport service type (with extended transport type 0). */
enum wire_cm_transport {
	WIRE_CM_TRANSPORT_RC = 0,
	WIRE_CM_TRANSPORT_UC = 1,
	WIRE_CM_TRANSPORT_RD = 2,
	WIRE_CM_TRANSPORT_EXT = 3,   /* see extended transport type: 1 = XRC */
};

/* MRA message_mraed / REJ message_rejected. */
enum wire_cm_msg_ref {
	WIRE_CM_MSG_REQ = 0,
	WIRE_CM_MSG_REP = 1,
	WIRE_CM_MSG_OTHER = 2,       /* LAP for MRA, "other" for REJ */
};

/* REJ reason (IBTA Table 109). */
enum wire_cm_rej_reason {
	WIRE_CM_REJ_NO_QP = 1,
	WIRE_CM_REJ_NO_EEC = 2,
	WIRE_CM_REJ_NO_RESOURCES = 3,
	WIRE_CM_REJ_TIMEOUT = 4,
	WIRE_CM_REJ_UNSUPPORTED = 5,
	WIRE_CM_REJ_INVALID_COMM_ID = 6,
	WIRE_CM_REJ_INVALID_COMM_INSTANCE = 7,
	WIRE_CM_REJ_INVALID_SERVICE_ID = 8,
	WIRE_CM_REJ_INVALID_TRANSPORT_TYPE = 9,
	WIRE_CM_REJ_STALE_CONN = 10,
	WIRE_CM_REJ_RDC_NOT_EXIST = 11,
	WIRE_CM_REJ_INVALID_GID = 12,
	WIRE_CM_REJ_INVALID_LID = 13,
	WIRE_CM_REJ_INVALID_SL = 14,
	WIRE_CM_REJ_INVALID_TRAFFIC_CLASS = 15,
	WIRE_CM_REJ_INVALID_HOP_LIMIT = 16,
	WIRE_CM_REJ_INVALID_PACKET_RATE = 17,
	WIRE_CM_REJ_INVALID_ALT_GID = 18,
	WIRE_CM_REJ_INVALID_ALT_LID = 19,
	WIRE_CM_REJ_INVALID_ALT_SL = 20,
	WIRE_CM_REJ_INVALID_ALT_TRAFFIC_CLASS = 21,
	WIRE_CM_REJ_INVALID_ALT_HOP_LIMIT = 22,
	WIRE_CM_REJ_INVALID_ALT_PACKET_RATE = 23,
	WIRE_CM_REJ_PORT_CM_REDIRECT = 24,
	WIRE_CM_REJ_PORT_REDIRECT = 25,
	WIRE_CM_REJ_INVALID_MTU = 26,
	WIRE_CM_REJ_INSUFFICIENT_RESP_RESOURCES = 27,
	WIRE_CM_REJ_CONSUMER_DEFINED = 28,
	WIRE_CM_REJ_INVALID_RNR_RETRY = 29,
	WIRE_CM_REJ_DUPLICATE_LOCAL_COMM_ID = 30,
	WIRE_CM_REJ_INVALID_CLASS_VERSION = 31,
	WIRE_CM_REJ_INVALID_FLOW_LABEL = 32,
	WIRE_CM_REJ_INVALID_ALT_FLOW_LABEL = 33,
	WIRE_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED = 35,
};

/* SIDR_REP status (IBTA Table 121). */
enum wire_cm_sidr_status {
	WIRE_CM_SIDR_SUCCESS = 0,
	WIRE_CM_SIDR_UNSUPPORTED = 1,  /* no such service id */
	WIRE_CM_SIDR_REJECT = 2,
	WIRE_CM_SIDR_NO_QP = 3,
	WIRE_CM_SIDR_REDIRECT = 4,
	WIRE_CM_SIDR_UNSUPPORTED_VERSION = 5,
};

enum {
	WIRE_CM_INFO_MAX = 72,         /* REJ ARI, SIDR_REP and APR info */
};

/* ---- rdma_cm conventions (mad_cma.c) --------------------------------------
 * Service ID = (port space << 16) + port; all of them lie under
 * 0x0000000001000000 / mask 0xFFFFFFFFFF000000 (the kernel's
 * IB_CMA_SERVICE_ID), because every port space is 0x01xx. */
enum {
	WIRE_CM_PS_TCP = 0x0106,
	WIRE_CM_PS_UDP = 0x0111,     /* resolved with SIDR, Q_Key below */
	WIRE_CM_PS_IB = 0x013f,
};
#define WIRE_CM_UDP_QKEY 0x01234567u
#define WIRE_CM_SERVICE_ID_BASE 0x0000000001000000ull
#define WIRE_CM_SERVICE_ID_MASK 0xffffffffff000000ull

static inline uint64_t wire_cm_service_id(uint16_t ps, uint16_t port)
{
	return ((uint64_t)ps << 16) + port;
}

/* True if sid is an rdma_cm IP service id (some port space, some port). */
static inline bool wire_cm_service_id_is_cma(uint64_t sid)
{
	return (sid & WIRE_CM_SERVICE_ID_MASK) == WIRE_CM_SERVICE_ID_BASE;
}

static inline uint16_t wire_cm_service_id_ps(uint64_t sid)
{
	return (uint16_t)(sid >> 16);
}

static inline uint16_t wire_cm_service_id_port(uint64_t sid)
{
	return (uint16_t)sid;
}

/* The flow label the kernel's rdma_cm puts in a RoCE REQ's primary path
 * for IPv4 (and IPv6 without a flow label of its own): (src port * 31 +
 * dst port) mod 2^20, the rdma_cm ports.  Both sides then send the RC
 * packets of the connection from UDP port wire_cm_flow_label_sport(). */
static inline uint32_t wire_cm_flow_label(uint16_t src_port, uint16_t dst_port)
{
	return ((uint32_t)src_port * 31u + dst_port) & 0xfffffu;
}

/* RoCEv2 UDP source port of a flow label: its low 14 bits XOR its top 6,
 * | 0xC000 (docs/wire.md "Encapsulation"). */
static inline uint16_t wire_cm_flow_label_sport(uint32_t fl)
{
	return (uint16_t)(0xc000u | ((fl & 0x3fffu) ^ ((fl >> 14) & 0x3fu)));
}

/* The IP addressing header that starts a REQ's (and SIDR_REQ's) private
 * data for the TCP and UDP port spaces: IBTA annex A11 "RDMA IP CM
 * Service".  Not present in REP, RTU, REJ or DREQ/DREP private data. */
enum { WIRE_CMA_HDR_LEN = 36 };

struct wire_cma_hdr {
	uint8_t version;             /* 0 */
	uint8_t ip_version;          /* 4 or 6 (upper nibble of byte 1) */
	uint16_t src_port;           /* host order; dst port is in the service id */
	uint8_t src[16];             /* IPv4: last 4 bytes, first 12 zero */
	uint8_t dst[16];
};

/* Decode the header from the first bytes of private data.  Returns 0,
 * -EBADMSG if len < 36, -EPROTONOSUPPORT if the version is not 0 or the IP
 * version is neither 4 nor 6. */
int wire_cma_hdr_decode(const uint8_t *pd, size_t len, struct wire_cma_hdr *h);

/* Write the 36 bytes (reserved bits zero). */
void wire_cma_hdr_encode(uint8_t *out, const struct wire_cma_hdr *h);

/* Fill h from two sockaddrs of the same family (AF_INET or AF_INET6; the
 * port of src goes in).  Returns 0 or -EAFNOSUPPORT. */
int wire_cma_hdr_from_sockaddr(struct wire_cma_hdr *h, const struct sockaddr *src,
			       const struct sockaddr *dst);

/* Source and destination addresses of h as sockaddrs; the destination
 * port comes from the REQ's service id.  Returns 0 or -EAFNOSUPPORT. */
int wire_cma_hdr_to_sockaddr(const struct wire_cma_hdr *h, uint64_t service_id,
			     struct sockaddr_storage *src, struct sockaddr_storage *dst);

#endif
