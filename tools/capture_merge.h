/* The capture tool's merge of ring records into one pcapng file
 * (docs/capture.md): a packet sent by one softrnic process of the host
 * and received by another arrives twice (once from each); the two are
 * paired by their bytes and written once, with both processes named.
 * Records wait CAPTURE_WINDOW_NS for their partner, then are written in
 * the order they came. */
#ifndef SRN_CAPTURE_MERGE_H
#define SRN_CAPTURE_MERGE_H

#include <stdint.h>
#include <stdio.h>

#include "net/capture_ring.h"

enum { CAPTURE_WINDOW_NS = 200 * 1000 * 1000 };

/* The end of a synthesized packet's comment. */
#define CAPTURE_SYNTH_NOTE "(synthesized: same-host direct operation, no packet was sent)"
/* The end of one whose other record is missing (capture_peer_fn). */
#define CAPTURE_NO_RX_NOTE "(receive record missing: ring full, dropped, or at the capture's edge)"
#define CAPTURE_NO_TX_NOTE "(send record missing: ring full, or at the capture's edge)"

struct capture_counts {
	uint64_t written, paired, sent_only, received_only, direct, extra_rx;
	uint64_t half_missing;          /* both ends here, one record missing */
};

struct capture_merge;

/* For a record that arrives without its partner: the process and QP of
 * this host at the other end of r's packet, if softrnic knows one (1),
 * else 0.  If no partner arrives either,
 * the packet's other record went missing (the capture ring was
 * full, or the packet was in flight when the capture began or ended),
 * rather than the packet having come from, or gone to, another host. */
typedef int capture_peer_fn(void *ctx, const struct net_cap_rec *r, uint32_t *pid,
			    uint32_t *qpn);

struct capture_merge *capture_merge_new(FILE *out);
void capture_merge_set_peer_fn(struct capture_merge *m, capture_peer_fn *fn, void *ctx);
/* A record from the ring (copied); now_ns on a monotonic clock. */
int capture_merge_add(struct capture_merge *m, const struct net_cap_rec *r, uint64_t now_ns);
/* Write what waited longer than the window (all: everything).  0 or
 * -errno of the file. */
int capture_merge_flush(struct capture_merge *m, uint64_t now_ns, int all);
const struct capture_counts *capture_merge_counts(const struct capture_merge *m);
void capture_merge_free(struct capture_merge *m);

#endif
