/* wire/gsi_frame: a CM MAD framed for QP1 (see mad.h). */
#include <sys/uio.h>

#include "wire/mad.h"
#include "wire/wire.h"

int wire_gsi_frame(const struct wire_l3 *l3, uint32_t psn, const uint8_t mad[WIRE_MAD_LEN],
		   uint8_t *hdr, uint8_t icrc[4])
{
	struct wire_pkt pkt = {
		.opcode = WIRE_UD | WIRE_SEND_ONLY,
		.pkey = 0xffff,
		.dqpn = WIRE_GSI_QPN,
		.psn = psn & WIRE_PSN_MASK,
		.qkey = WIRE_GSI_QKEY,
		.sqpn = WIRE_GSI_QPN,
	};
	struct iovec iov[2];
	uint32_t crc;
	int hlen = wire_encode_hdrs(hdr, &pkt);

	if (hlen < 0)
		return hlen;
	iov[0] = (struct iovec){ hdr, (size_t)hlen };
	iov[1] = (struct iovec){ (void *)mad, WIRE_MAD_LEN };
	crc = wire_icrc(l3, iov, 2);
	for (int i = 0; i < 4; i++)
		icrc[i] = (uint8_t)(crc >> (8 * i));
	return hlen;
}
