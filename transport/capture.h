/* transport/capture: what an engine shows a packet capture
 * (docs/capture.md): every packet it sends or receives, and, for each
 * same-host direct operation, the RoCEv2 packets it stands for, built
 * here with their ICRC.  They go to the process's SOFTRNIC_PCAP file
 * (net/pcap.h) and, while `softrnic capture` runs on the device, into its
 * ring (net/capture_ring.h).  With neither, srn_cap_on costs two relaxed
 * loads. */
#ifndef TRANSPORT_CAPTURE_H
#define TRANSPORT_CAPTURE_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "net/capture_ring.h"
#include "net/pcap.h"
#include "wire/wire.h"

enum { SRN_CAP_MAPS = 4 };

struct srn_capture {
	_Atomic uint32_t *word;         /* our stats file's capture gen */
	_Atomic uint32_t own_word;      /* the word when there is no stats file */
	pthread_mutex_t lock;           /* attaching */
	_Atomic uint32_t cur_gen;       /* maps[cur] is that capture's ring */
	_Atomic int cur;
	uint32_t bad_gen;               /* a gen whose ring could not be had */
	int nmaps;                      /* rings mapped; kept until the engine
					 * stops (another thread may be in one) */
	struct net_cap maps[SRN_CAP_MAPS];
	char dev[64];
	uint32_t pid;                   /* ours (getpid is a system call) */
	_Atomic uint64_t owner_seen_ns; /* last look at a full ring's tool */
};

struct srn_engine;
struct srn_rc_state;

/* engine_start.c: after the stats file is made / before it goes. */
void srn_cap_init(struct srn_engine *eng);
void srn_cap_fini(struct srn_engine *eng);

static inline bool srn_cap_active(const struct srn_capture *c)
{
	return net_pcap_enabled() || atomic_load_explicit(c->word, memory_order_relaxed) != 0;
}

/* A packet (BTH .. ICRC in iov) sent (NET_CAP_TX) or received (NET_CAP_RX)
 * on l3 (its real ports), by local QP qpn (0 if unknown). */
void srn_cap_packet(struct srn_engine *eng, unsigned int kind, uint32_t qpn,
		    const struct wire_l3 *l3, const struct iovec *iov, int n);

/* A direct operation done: the message and, for RC, its answer. */
struct srn_cap_op {
	enum ibv_wr_opcode opcode;      /* WRITE(_IMM), SEND(_IMM), READ, atomics */
	uint32_t dqpn;                  /* the target QP */
	uint32_t peer_pid;
	uint64_t len;
	const struct iovec *pay;        /* the data moved (READ: as read) */
	int npay;
	uint64_t va;                    /* RETH / AtomicETH */
	uint32_t rkey;
	uint32_t imm_be;
	uint32_t qkey;                  /* UD */
	uint64_t swap_add, compare, orig; /* atomics */
};

/* qp->lock held. */
extern const char *const srn_cap_direct_comment;
void srn_cap_direct(struct srn_rc_state *rc, const struct srn_cap_op *op);

#endif
