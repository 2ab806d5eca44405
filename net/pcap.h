/* Packet captures: SOFTRNIC_PCAP=FILE writes every packet the transport
 * sends or receives as an Ethernet frame (fake MACs), so that
 * `tshark -r FILE -d udp.port==4791,infiniband` dissects it as RoCEv2.
 * Also a small reader of classic pcap files, for tests and tools. */
#ifndef NET_PCAP_H
#define NET_PCAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

#include "wire/wire.h"

/* Start writing a capture to path (truncated).  Thread-safe; a second call
 * switches to the new file.  Returns 0 or -errno. */
int net_pcap_open(const char *path);

/* Open $SOFTRNIC_PCAP if it is set; only the first call in a process does
 * anything (call it from every context creation).  Returns 0 when unset or
 * opened, else the -errno of the first open. */
int net_pcap_open_env(void);

/* True once net_pcap_open succeeded: a cheap test for the data path. */
bool net_pcap_enabled(void);

/* Append one RoCE packet (iov covers BTH .. ICRC inclusive) as a frame
 * with the IP/UDP headers rebuilt from l3.  Flushed per packet, so a
 * killed process leaves a readable file.  No-op when no capture is open;
 * write errors stop the capture rather than the data path. */
void net_pcap_write(const struct wire_l3 *l3, const struct iovec *iov, int iovcnt);

/* Stop capturing and close the file. */
void net_pcap_close(void);

/* ---- reading (classic pcap, either byte order, us or ns stamps) --------- */

struct net_pcap_reader {
	FILE *f;
	bool swap;      /* file written on the other endianness */
	bool nsec;      /* nanosecond timestamps */
	uint32_t linktype;
	uint32_t snaplen;
};

/* Open path and read its global header.  Returns 0 or -errno (-EBADMSG
 * for a file that is not a classic pcap). */
int net_pcap_reader_open(struct net_pcap_reader *r, const char *path);

/* Read the next record into buf (cap bytes); *len = captured length.
 * Returns 1 for a record, 0 at end of file, -EBADMSG for a damaged file or
 * a record longer than cap.  *ts_ns may be NULL. */
int net_pcap_reader_next(struct net_pcap_reader *r, uint8_t *buf, size_t cap,
			 size_t *len, uint64_t *ts_ns);

void net_pcap_reader_close(struct net_pcap_reader *r);

#endif
