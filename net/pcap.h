/* Packet captures: SOFTRNIC_PCAP=FILE writes every packet the process's
 * transport sends or receives, once, as an Ethernet frame (fake MACs) in
 * a pcapng file with its direction (sent: outbound, received: inbound),
 * so that `tshark -r FILE -d udp.port==4791,infiniband` dissects it as
 * RoCEv2.  A packet between two QPs of the process is written as sent
 * only.  Also a small reader of classic pcap and pcapng files, for tests
 * and tools. */
#ifndef NET_PCAP_H
#define NET_PCAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

#include "net/pcapng.h"
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

enum { NET_PCAP_MAX_IOV = 64 };

/* Append one RoCE packet (iov covers BTH .. ICRC inclusive, at most
 * NET_PCAP_MAX_IOV pieces) as a frame with the IP/UDP headers rebuilt
 * from l3, dir a PCAPNG_DIR_* (net/pcapng.h), comment NULL for a real
 * packet or a note for one that stands for something else.  Flushed per packet, so a
 * killed process leaves a readable file.  No-op when no capture is open,
 * and for a real received packet whose source is an engine of this
 * process (net_pcap_local); write errors stop the capture rather than the data
 * path. */
void net_pcap_write(unsigned int dir, const struct wire_l3 *l3, const struct iovec *iov,
		    int iovcnt, const char *comment);

/* An engine of this process listens at ip:port (add) or no longer does. */
void net_pcap_local(int family, const uint8_t *ip, uint16_t port, bool add);

/* Stop capturing and close the file. */
void net_pcap_close(void);

/* ---- reading (classic pcap, either byte order, us or ns stamps; pcapng) - */

struct net_pcap_reader {
	FILE *f;
	bool ng;        /* pcapng */
	int ng_idbs;    /* interface blocks seen */
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
