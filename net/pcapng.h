/* pcapng output: one Section Header Block, one Ethernet interface, then
 * Enhanced Packet Blocks with nanosecond stamps, a direction flag and an
 * optional comment (tshark: frame.packet_flags_direction, pkt_comment).
 * Used by SOFTRNIC_PCAP (net/pcap.c) and `softrnic capture`. */
#ifndef NET_PCAPNG_H
#define NET_PCAPNG_H

#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

enum {
	PCAPNG_SHB = 0x0a0d0d0a,
	PCAPNG_IDB = 0x00000001,
	PCAPNG_EPB = 0x00000006,
	PCAPNG_BYTE_ORDER = 0x1a2b3c4d,
	PCAPNG_SNAPLEN = 262144,
	/* EPB flags, bits 0-1 */
	PCAPNG_DIR_NONE = 0,
	PCAPNG_DIR_IN = 1,
	PCAPNG_DIR_OUT = 2,
};

/* The section and interface headers (nanosecond resolution).  0 or
 * -errno. */
int pcapng_write_head(FILE *f);

/* One packet: the bytes of iov[0..n) (the first is the frame's
 * Ethernet/IP/UDP header), stamped ts_ns, with the direction dir and the
 * comment (NULL: none).  Not flushed.  0 or -errno. */
int pcapng_write_packet(FILE *f, uint64_t ts_ns, unsigned int dir, const char *comment,
			const struct iovec *iov, int n);

#endif
