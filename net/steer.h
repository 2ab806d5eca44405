/* net/steer: every engine of an address receives its own QPs' packets
 * at port 4791, straight from the kernel.
 *
 * Peers on other hosts send every RoCE packet to <address>:4791, whatever
 * process owns the destination QP.  Each engine binds 4791 with
 * SO_REUSEPORT beside its own port (which same-host peers and doorbells
 * use: a datagram sent to 4791 by this host is steered too, and one
 * without a QPN would go by hash), and the group carries a classic-BPF program
 * (net/steer_prog.h) that sends each datagram to the socket of the engine
 * owning its destination QPN.  A datagram the program cannot place (a QP
 * created since, a stale program) lands on some engine of the group,
 * which hands it on through the owner's shared-memory inbox
 * (transport/qp_forward.c): steering only saves that hop.
 *
 * The program needs each engine's index in the kernel's group, which the
 * kernel does not tell and changes when a socket closes (the last one
 * takes the closed one's place).  So the engines find it out: a census.
 * The engine that starts one sends, from its own socket, one probe per
 * member to <address>:4791; probe i carries i, and the program delivers
 * it to the socket at index i.  Each engine records the index of the
 * probe it got in this table; the engine whose record completes the
 * census (every live member has a distinct index) compiles and attaches
 * the program.  A member attaches one as it joins too, from the indexes
 * of the last complete census (sockets join at the group's end, so they
 * still hold): with no program at all the kernel spreads datagrams by
 * address hash, and every probe, all sent from one socket, would reach
 * the same member.  A census runs when an engine joins or leaves, and when
 * an engine hands on a datagram that reached it wrongly (at most every
 * NET_STEER_CENSUS_GAP_NS): after a crash the survivors find out so.
 *
 * The table is a file in /dev/shm per user, address and network
 * namespace (the kernel groups sockets only within one user), mapped
 * by every member; changes are made under its flock.  A probe carries the
 * table's secret, so a datagram from elsewhere cannot pass for one.
 */
#ifndef NET_STEER_H
#define NET_STEER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/steer_prog.h"

enum { NET_STEER_MEMBERS = 64, NET_STEER_PROBE_LEN = 16 };
#define NET_STEER_CENSUS_GAP_NS (100ull * 1000 * 1000)

struct net_steer_table;

struct net_steer {
	int fd;                      /* the table file; -1: no steering */
	struct net_steer_table *t;
	int slot;                    /* our entry; -1: not a member */
	pthread_mutex_t mu;          /* the flock is per open file, not per thread */
	char path[112];
};

/* Map the table of (family, ip):4791, creating it.  0 or -errno; on
 * failure s->fd stays -1 and nothing steers. */
int net_steer_open(struct net_steer *s, int family, const uint8_t *ip);
/* Leave (if a member) and unmap. */
void net_steer_close(struct net_steer *s);

/* Record our engine (its own UDP port, as the QPN registry has it) as a
 * member, once its 4791 socket is bound.  0 or -ENOSPC / -EBADF. */
int net_steer_join(struct net_steer *s, uint16_t port);
/* Remove our entry (before or after closing the 4791 socket). */
void net_steer_leave(struct net_steer *s);

/* QPNs lo..hi are ours ahead of allocation (see transport/steer.c). */
void net_steer_reserve(struct net_steer *s, uint32_t lo, uint32_t hi);

/* Start a census: drop dead members, open a new round and fill probes[i]
 * (room for NET_STEER_MEMBERS) for each index to reach.  Returns their
 * number (0: no member, nothing to send). */
int net_steer_census_begin(struct net_steer *s, uint8_t probes[][NET_STEER_PROBE_LEN]);

/* A datagram that may be a probe: true if it is one (it is then consumed,
 * whether it is valid or not).  *complete: our claim finished the census,
 * and the caller should compile and attach the program. */
bool net_steer_probe_in(struct net_steer *s, const uint8_t *buf, uint32_t len, bool *complete);

/* The spans of the program (caller holds net_steer_lock): from the
 * current census if it is complete, else from the indexes of the last
 * complete one, which still hold for the members it counted (a new
 * socket joins the kernel's group at its end).  owner(arg, qpn, &port)
 * gives the pid owning a QPN in the registry (0: none) and its engine's
 * port.  Returns the number of spans (at most max) or -errno; *stale:
 * some live member has no index yet, and a census should run. */
int net_steer_spans(struct net_steer *s, int (*owner)(void *arg, uint32_t qpn, uint16_t *port),
		    void *arg, uint32_t qpn_limit, struct net_steer_span *out, int max,
		    bool *stale);

/* Compile and attach to sock_fd's group.  0 or -errno. */
int net_steer_attach(int sock_fd, const struct net_steer_span *spans, int n);

/* Serialize compile+attach between engines and threads. */
void net_steer_lock(struct net_steer *s);
void net_steer_unlock(struct net_steer *s);

#endif
