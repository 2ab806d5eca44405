/* transport/engine: one per context.  Owns the UDP socket, the device's
 * QPN registry mapping, the table of this context's QPs (by QPN) and the
 * engine thread, which sleeps in epoll_wait on the socket, a timerfd and a
 * stop eventfd: idle means 0% CPU (the timer is armed only while some QP
 * has work outstanding).  An engine that did not get port 4791 also
 * watches for its holder to go (net/roce_port.h), and then takes the
 * port over with a second socket. */
#ifndef TRANSPORT_ENGINE_H
#define TRANSPORT_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/registry.h"
#include "net/roce_port.h"
#include "net/stats_shm.h"
#include "net/steer.h"
#include "net/udp.h"
#include "net/settings.h"
#include "transport/capture.h"
#include "transport/log.h"
#include "verbs/srn.h"

/* Every drop, NAK and retry has a named counter (per engine and per QP). */
#define SRN_COUNTERS(X)                                                   \
	X(rx_packets) X(tx_packets) X(rx_bytes) X(tx_bytes)               \
	X(rx_drop_truncated) X(rx_drop_decode) X(rx_drop_icrc)            \
	X(rx_drop_not_rc) X(rx_drop_no_qp) X(rx_drop_qp_state)            \
	X(rx_drop_no_path)                                                \
	X(resp_dup_request) X(resp_psn_ahead) X(resp_drop)                \
	X(resp_nak_seq) X(resp_nak_rnr) X(resp_nak_inv) X(resp_nak_access) \
	X(resp_nak_op) X(resp_acks) X(resp_read_resp)                     \
	X(comp_acks) X(comp_dup_resp) X(comp_bad_resp) X(comp_nak_seq)    \
	X(comp_nak_rnr) X(comp_nak_err) X(comp_read_gap)                  \
	X(req_timeouts) X(req_retransmits) X(req_rnr_retries) X(req_waits) \
	X(tx_eagain) X(tx_error)                                          \
	X(rx_drop_qkey) X(rx_drop_no_rwqe) X(uc_msg_dropped) X(ud_msg_dropped) X(ud_too_long) \
	X(mcast_rx) X(mcast_no_member)                                    \
	X(tx_shm_packets) X(rx_shm_packets) X(shm_ring_full) X(shm_doorbells) X(direct_wakes) \
	X(direct_write) X(direct_read) X(direct_atomic) X(direct_send) X(direct_fallback) \
	X(direct_vm)                                                       \
	X(rx_forwarded)                                                    \
	X(engine_wakes) X(engine_rx_batches) X(engine_defers) X(engine_takeovers) \
	X(ack_held) X(roce_port_taken) X(comp_ack_handoffs) X(engine_spin_kicks) \
	X(req_retx_packets) X(comp_nak_seq_stale) X(engine_sock_unparks) \
	X(poll_sock_reads) X(steer_census) X(steer_programs)              \
	X(req_retx_bytes) X(req_cwnd) X(cc_cuts) X(req_retx_pauses)        \
	X(nak_tx) X(nak_rx) X(sr_held) X(sr_overflow) X(sr_resends) X(req_probes)

enum srn_counter {
#define SRN_CNT_ENUM(n) SRN_CNT_##n,
	SRN_COUNTERS(SRN_CNT_ENUM)
#undef SRN_CNT_ENUM
	SRN_CNT_MAX
};

extern const char *const srn_counter_names[SRN_CNT_MAX];

struct srn_rc_state;
struct srn_mcast;

struct srn_engine {
	struct srn_context *ctx;
	struct net_udp udp;          /* the socket and our bound address */
	/* IPv6 beside an IPv4 udp: bound to the device's IPv6 source
	 * address (srn_dev_ipv6_src) at udp's port number; fd -1 when udp
	 * is IPv6 already or the device has no such address.  Read and
	 * armed with udp. */
	struct net_udp udp6;
	/* [IPv6 source]:4791 when free: the first engine of the address
	 * takes it (no group, no takeover) so other hosts reach its QPs
	 * over IPv6; fd -1 otherwise.  Read and armed with udp6. */
	struct net_udp roce6;
	_Atomic uint64_t roce6_try_ns; /* last bind try of roce6 (engine_roce.c) */
	struct net_registry *reg;    /* device-wide QPN -> port table */
	/* Port 4791 as a second socket, received on like udp (what we
	 * send leaves from udp): our place in the address's group of
	 * engines (net/steer.h), or the port taken over from an engine of
	 * this host that went (net/roce_port.h).  fd -1 for the holder
	 * (udp is 4791) and while neither applies; set under rx_lock by the
	 * engine thread, or before it starts. */
	struct net_udp roce;
	struct net_steer steer;      /* the group's table (transport/steer.c) */
	_Atomic uint64_t steer_census_ns; /* our last census */
	_Atomic uint32_t steer_lo, steer_hi; /* QPNs the program sends us ahead */
	/* QPs that may hear from another host, so at roce when we have a
	 * second socket: UD ones, and RC/UC ones whose peer is elsewhere
	 * (hooks.c).  Without any, an application thread's poll leaves
	 * roce to the engine thread: one system call less per poll. */
	atomic_int remote_qps;
	struct net_roce_port roce_port; /* we hold 4791 and say so, or watch its holder */
	uint64_t roce_retry_ns;      /* next takeover try (engine thread), 0 = none */
	uint64_t roce_fail_ns;       /* last takeover try that lost the bind */
	unsigned int roce_fails;     /* tries in a row that could not watch the holder */
	int epfd, tfd, efd;          /* epoll, timerfd, stop eventfd */
	int kfd;                     /* eventfd: a CQ was armed (srn_transport_cq_armed) */
	int link_fd;                 /* the interface's link notices (link_watch.h), or -1 */
	bool link_up;                /* the link as last seen (engine thread) */
	pthread_t thread;
	bool thread_running;

	/* Held for a whole recv+process batch so one QP's packets are
	 * processed in arrival order, whichever thread receives. */
	pthread_mutex_t rx_lock;
	struct net_udp_msg *msgs;    /* ENGINE_SOCK_BATCH receive slots */
	bool rx_poll_one;            /* srn_engine_rx_poll asks for one datagram */
	int rx_poll_streak;          /* its polls in a row that found one */
	unsigned int poll_empty_run; /* application polls in a row that found
	                              * nothing (hooks.c; under rx_lock) */
	/* An application thread's receive (hooks.c; under rx_lock): requests
	 * it delivered, and whether a plain ACK emptied the send queue of a
	 * QP that also receives requests (completer.c) */
	uint32_t rx_reqs;
	bool rx_drained;
	uint8_t *rxbuf;              /* their buffers */

	/* This context's QPs.  by_qpn indexes the registry's QPN space. */
	pthread_mutex_t qps_lock;
	struct srn_rc_state **by_qpn;
	struct srn_rc_state **all;   /* compact list for the timer scan */
	uint32_t n_all, cap_all;

	_Atomic uint64_t app_poll_ns; /* last srn_transport_progress call */
	_Atomic uint64_t app_send_ns; /* last post_send that sent packets */

	pthread_mutex_t timer_lock;
	uint64_t timer_armed_ns;     /* CLOCK_MONOTONIC deadline, 0 = off */
	_Atomic uint64_t qp_due_ns;  /* earliest QP deadline asked for, 0 = none */
	atomic_bool deferring;       /* the engine leaves the socket to a poller */
	/* The sockets are out of the engine thread's epoll set
	 * (park_socket); srn_engine_sock_unpark puts them back. */
	atomic_bool sock_parked;
	_Atomic uint64_t sock_rx_ns; /* last datagram read (coarse clock) */

	struct srn_mcast *mcast;     /* multicast groups joined (mcast.c) */

	/* Same-host inbox (net/shm_ring.h), NULL when not used.  shm_rx_ns
	 * and shm_sock_ns are written under rx_lock; shm_asleep is set while
	 * the engine thread blocks with the inbox's sleeping flag up. */
	struct net_shm_inbox *inbox;
	_Atomic uint64_t shm_rx_ns;  /* last packet taken from the inbox */
	uint64_t shm_sock_ns;        /* last socket receive by an app thread */
	uint64_t shm_sock_gap;       /* and the wait before the next one */
	atomic_bool shm_asleep;

	bool debug;                  /* SOFTRNIC_LOG=debug or trace */
	enum srn_log_level log_level; /* SOFTRNIC_LOG (transport/log.h) */
	/* Unacknowledged packets in flight from all this engine's RC QPs,
	 * to peers on this host [0] and elsewhere [1]: the requesters'
	 * shared window (requester.c, "Shared window"). */
	atomic_int win_inflight[2];
	atomic_int win_active[2];    /* QPs with packets in flight there */
	/* SRN_CNT_MAX counters: in the engine's stats file (net/stats_shm.h)
	 * for `softrnic stats`, or private memory if it could not be made. */
	_Atomic uint64_t *cnt;
	struct net_stats *stats;
	struct srn_capture cap;      /* packet captures (transport/capture.h) */
};

uint64_t srn_now_ns(void);

/* True if eng receives what peers send to this host's port 4791: it bound
 * it first, or took it over.  (rx_lock held, or the engine thread.) */
static inline bool srn_engine_holds_roce_port(const struct srn_engine *eng)
{
	return eng->udp.local.port == SRN_ROCE_UDP_PORT || eng->roce.fd >= 0;
}

/* Events for the receive policy (transport/engine_policy.h), from the
 * application threads and the protocol code, which write no engine field
 * themselves.  An application thread polls (srn_transport_progress): */
static inline void srn_engine_ev_poll(struct srn_engine *eng, uint64_t now)
{
	atomic_store_explicit(&eng->app_poll_ns, now, memory_order_relaxed);
}

/* An application thread's post_send sent packets at at_ns. */
static inline void srn_engine_ev_sent(struct srn_engine *eng, uint64_t at_ns)
{
	atomic_store_explicit(&eng->app_send_ns, at_ns, memory_order_relaxed);
}

/* During a poller's receive (rx_lock held): a plain ACK emptied the send
 * queue of a QP conversing over one-sided operations (completer.c). */
static inline void srn_engine_ev_ack_drained(struct srn_engine *eng)
{
	eng->rx_drained = true;
}

/* Make sure the engine wakes at or before at_ns and runs the QP timers
 * (completer_timer) then. */
void srn_engine_arm(struct srn_engine *eng, uint64_t at_ns);

/* ENGINE_BATCH: packets per look at the same-host inbox.  ENGINE_SOCK_BATCH:
 * datagrams per recvmmsg; with GRO each may hold up to 64 KiB (an RDMA
 * WRITE of 64 KiB arrives as two: its first packet, longer, on its own),
 * and the batch is checked and copied out right after the kernel's copy,
 * so what it holds should stay in the L2 cache (up to 1 MiB). */
enum { ENGINE_BATCH = 32, ENGINE_SOCK_BATCH = 16 };

/* Receive and process one batch without blocking (rx_lock must be held).
 * Returns the number of packets (ENGINE_BATCH: more may be waiting). */
int srn_engine_rx_batch(struct srn_engine *eng);
/* Only the same-host inbox: up to max packets, no system call (rx_lock
 * held).  Returns the number processed. */
int srn_engine_rx_shm(struct srn_engine *eng, int max);
/* Only the socket: one recvmmsg batch (rx_lock held).  Datagrams read
 * (ENGINE_SOCK_BATCH: more may be waiting).  A full batch leaves the ACKs
 * it held back to the next one (a stream then gets one ACK per
 * RESP_ACK_COALESCE_PKTS, not one per batch): a thread that stops
 * receiving after it calls srn_engine_rx_done. */
int srn_engine_rx_sock(struct srn_engine *eng);
/* srn_engine_rx_sock for an application thread's poll (rx_lock held):
 * asks for one datagram at a time while they come one at a time.  Returns
 * the datagrams read; ENGINE_SOCK_BATCH (a full batch): more may wait. */
int srn_engine_rx_poll(struct srn_engine *eng);
/* A poller's receive ended with an ACK alone that emptied the send queue
 * of a QP conversing over one-sided operations (hooks.c): while the engine
 * defers, the socket goes back in its epoll set, so the next packet wakes
 * it (the application may now spin on its memory). */
void srn_engine_kick_spin(struct srn_engine *eng);
/* May an application thread's poll leave the sockets alone (no system
 * call)?  Yes while they are quiet: no datagram read for a while, no RC
 * packet of ours awaiting its response.  Same-host traffic then goes by
 * the direct path (or the inbox) and whatever comes to a socket wakes the
 * engine thread, provided it watches the sockets (sock_parked down;
 * srn_engine_sock_unpark). */
bool srn_engine_sock_quiet(struct srn_engine *eng, uint64_t now);
/* The sockets back in the engine thread's epoll set if it parked them
 * (rx_lock held): a quiet poller no longer reads them. */
void srn_engine_sock_unpark(struct srn_engine *eng);
/* The end of this thread's receiving for now: the ACKs that full batches
 * left (srn_engine_rx_sock) go the way a batch's end sends them. */
void srn_engine_rx_done(struct srn_engine *eng);

/* Run the QP timers (completer_timer) if the earliest deadline passed.
 * Any thread, no lock held. */
void srn_engine_run_qp_timers(struct srn_engine *eng, uint64_t now);
/* True on eng's own engine thread (from its first instruction on). */
bool srn_engine_on_thread(const struct srn_engine *eng);

/* Table of this context's QPs. */
int srn_engine_add_qp(struct srn_engine *eng, struct srn_rc_state *rc);
void srn_engine_del_qp(struct srn_engine *eng, struct srn_rc_state *rc);

/* A debug line about the engine (SOFTRNIC_LOG=debug), at most 200 a
 * second for all reasons together (transport/log.h for the rest). */
void srn_dbg(struct srn_engine *eng, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

int srn_engine_start(struct srn_context *ctx);
void srn_engine_stop(struct srn_context *ctx);

/* The socket that sends to (and receives from) family: udp, or udp6 for
 * IPv6 beside IPv4.  NULL when the engine has none of that family. */
static inline struct net_udp *srn_engine_sock(struct srn_engine *eng, int family)
{
	if (family == eng->udp.local.family)
		return &eng->udp;
	if (family == AF_INET6 && eng->udp6.fd >= 0)
		return &eng->udp6;
	return NULL;
}

/* Our address in family (port included), or NULL. */
static inline const struct net_addr *srn_engine_local(const struct srn_engine *eng, int family)
{
	if (family == eng->udp.local.family)
		return &eng->udp.local;
	if (family == AF_INET6 && eng->udp6.fd >= 0)
		return &eng->udp6.local;
	return NULL;
}

#endif
