/* net/steer_prog: the classic-BPF program that steers the datagrams
 * arriving at this host's UDP port 4791 to the socket of the process that
 * owns their destination QP (net/steer.h tells when and why).
 *
 * Every engine of an address binds 4791 with SO_REUSEPORT; the kernel
 * then runs the group's program on each datagram, with the UDP payload at
 * offset 0, and delivers it to the socket at the index the program
 * returns (an index past the group's end: the kernel's own hash picks
 * one).  The program reads the destination QPN from the BTH (bytes 5-7)
 * and looks it up in a sorted table of QPN intervals, as a binary search
 * compiled into compares.  A second branch answers the census probes
 * (net/steer.h): a probe names the index it wants to reach.
 */
#ifndef NET_STEER_PROG_H
#define NET_STEER_PROG_H

#include <linux/filter.h>
#include <stdint.h>

/* The probe's first word: a manufacturer-specific BTH opcode (0xff) no
 * RoCE peer sends to QPs, then "SRN". */
#define NET_STEER_PROBE_MAGIC 0xff53524eu
/* What the program returns for a datagram no interval claims: past any
 * group's end, so the kernel's hash chooses. */
#define NET_STEER_ANY 0xffffffffu

/* QPNs lo..hi (inclusive) go to the socket at index idx. */
struct net_steer_span {
	uint32_t lo, hi;
	uint32_t idx;
};

/* Room for the program of n spans: what net_steer_prog_build needs. */
#define NET_STEER_PROG_LEN(n) (10 + 6 * (n))
/* Largest n a program may hold (BPF_MAXINSNS is 4096). */
enum { NET_STEER_MAX_SPANS = 600 };

/* Compile spans (sorted by lo, not overlapping, n <= NET_STEER_MAX_SPANS)
 * into out (room for NET_STEER_PROG_LEN(n) instructions).  Returns the
 * instruction count, or -EINVAL for unsorted, overlapping or too many
 * spans. */
int net_steer_prog_build(const struct net_steer_span *spans, int n, struct sock_filter *out);

/* Run prog on a payload as the kernel would (tests). */
uint32_t net_steer_prog_run(const struct sock_filter *prog, int len, const uint8_t *pkt,
			    uint32_t pkt_len);

#endif
