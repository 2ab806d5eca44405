/* net/capture_ring: the shared-memory ring through which every softrnic
 * process of the host hands the packets of one device to a running
 * `softrnic capture` (docs/capture.md).
 *
 * /dev/shm/softrnic-<dev>-capture (mode 0600), made by the tool while it
 * runs: a header, then a ring of records.  Many producers (any thread of
 * any process) reserve space with a compare-and-swap on head and commit a
 * record by writing its commit word (its ring position + 1) last; one
 * consumer (the tool) reads them in order and moves tail.  A record that
 * does not fit is dropped and counted, never waited for.  Engines learn
 * that a capture runs from a word in their stats file that the tool sets
 * (net/stats_shm.h), so a process without a capture pays one relaxed load
 * per packet. */
#ifndef NET_CAPTURE_RING_H
#define NET_CAPTURE_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

enum {
	NET_CAP_MAGIC = 0x53524e43,     /* "SRNC" */
	NET_CAP_VERSION = 1,
	NET_CAP_DATA_OFF = 4096,
	NET_CAP_MAX_PACKET = 9216,      /* RoCE bytes kept of one packet */
	/* record kinds */
	NET_CAP_PAD = 0,                /* filler to the ring's end */
	NET_CAP_TX = 1,                 /* sent by an engine */
	NET_CAP_RX = 2,                 /* received by an engine */
	NET_CAP_DIRECT = 3,             /* stands for a same-host direct operation */
};

struct net_cap_head {
	_Atomic uint32_t magic;         /* set last: the rest is valid */
	uint32_t version;
	uint32_t gen;                   /* this capture's nonzero id */
	_Atomic uint32_t active;        /* 0: producers stop */
	uint64_t owner;                 /* net_proc_word of the tool */
	uint64_t size;                  /* ring bytes, a power of 2 */
	_Atomic uint64_t head;          /* reserved up to (producers) */
	_Atomic uint64_t tail;          /* consumed up to (the tool) */
	_Atomic uint64_t dropped;       /* records that found no room */
	char dev[64];
};

/* One record, 16-byte aligned in the ring; RoCE bytes (BTH .. ICRC)
 * follow the header. */
struct net_cap_rec {
	_Atomic uint64_t commit;        /* ring position + 1 once complete */
	uint32_t len;                   /* whole record, header included */
	uint8_t kind;                   /* NET_CAP_* */
	uint8_t family;                 /* AF_INET or AF_INET6 */
	uint16_t ip_id;
	uint64_t ts_ns;                 /* CLOCK_REALTIME */
	uint32_t pid, peer_pid;         /* peer_pid: the direct target's, else 0 */
	uint32_t qpn;                   /* the local QP (0: unknown) */
	uint16_t sport, dport;
	uint8_t src[16], dst[16];
	uint32_t roce_len;
	uint32_t flags;                 /* NET_CAP_F_* */
};

enum { NET_CAP_F_ANSWER = 1 };          /* DIRECT: from the target (ACK, read data) */

struct net_cap {
	struct net_cap_head *h;
	uint8_t *data;
	size_t map_len;
};

/* The tool: make the ring of dev with size bytes (a power of 2) for
 * capture gen.  0, or -errno (-EBUSY: a live capture of dev runs). */
int net_cap_create(struct net_cap *c, const char *dev, uint64_t size, uint32_t gen);
/* The tool: stop producers, unmap, unlink. */
void net_cap_destroy(struct net_cap *c, const char *dev);

/* An engine: map the running capture of dev.  0, or -errno (-ENOENT:
 * none runs). */
int net_cap_attach(struct net_cap *c, const char *dev);
void net_cap_detach(struct net_cap *c);

/* A producer: append one record; meta's commit, len and roce_len are
 * filled in, the RoCE bytes come from iov (cut at NET_CAP_MAX_PACKET).
 * true if written, false if dropped (inactive or full). */
bool net_cap_put(struct net_cap *c, const struct net_cap_rec *meta, const struct iovec *iov,
		 int n);

/* The consumer: the next complete record, or NULL (none yet, or the
 * next one is still being written).  Call net_cap_next_done after
 * using it. */
const struct net_cap_rec *net_cap_next(struct net_cap *c);
void net_cap_next_done(struct net_cap *c, const struct net_cap_rec *r);

#endif
