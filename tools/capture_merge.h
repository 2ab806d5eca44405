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

struct capture_counts {
	uint64_t written, paired, sent_only, received_only, direct, extra_rx;
};

struct capture_merge;

struct capture_merge *capture_merge_new(FILE *out);
/* A record from the ring (copied); now_ns on a monotonic clock. */
int capture_merge_add(struct capture_merge *m, const struct net_cap_rec *r, uint64_t now_ns);
/* Write what waited longer than the window (all: everything).  0 or
 * -errno of the file. */
int capture_merge_flush(struct capture_merge *m, uint64_t now_ns, int all);
const struct capture_counts *capture_merge_counts(const struct capture_merge *m);
void capture_merge_free(struct capture_merge *m);

#endif
