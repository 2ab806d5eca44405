/* net/shm_ring: the same-host packet path (issue 6).  Every engine owns an
 * inbox in /dev/shm; other engines on this host put whole RoCE packets
 * (exactly the bytes that would have gone to the socket) into it instead
 * of calling sendmsg, and the owner takes them out without a system call.
 * Protocol and layout: see the header comment of shm_ring.c. */
#ifndef NET_SHM_RING_H
#define NET_SHM_RING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "net/udp.h"

enum {
	NET_SHM_LANES = 64,          /* producer processes per inbox */
	NET_SHM_SLOTS = 512,         /* packets per lane (power of two) */
	NET_SHM_SLOT_BYTES = 4352,   /* slot stride: 64 B header + data */
	NET_SHM_SLOT_HDR = 64,
	NET_SHM_PKT_MAX = NET_SHM_SLOT_BYTES - NET_SHM_SLOT_HDR, /* 4 KiB MTU + headers */
};

struct net_shm_inbox;                /* the owner's (consumer's) view */
struct net_shm_peer;                 /* a producer's view of someone's inbox */

/* Path of the inbox of device dev's engine listening on port. */
void net_shm_inbox_path(char *out, size_t n, const char *dev, uint16_t port);

/* Create this engine's inbox, replacing a stale file left by a dead
 * process.  NULL + errno (EBUSY: a live process owns that name). */
struct net_shm_inbox *net_shm_inbox_create(const char *dev, uint16_t port);
/* Unmap and unlink.  NULL is fine. */
void net_shm_inbox_destroy(struct net_shm_inbox *in);

/* Take up to max packets out of the lanes (round robin), calling fn for
 * each with a message laid out as net_udp_recv_batch would fill it; buf
 * points into the ring and is valid only during the call.  Single
 * consumer: the caller serialises calls.  Returns the number of packets
 * handed to fn. */
typedef void (*net_shm_rx_fn)(void *arg, struct net_udp_msg *m);
int net_shm_inbox_drain(struct net_shm_inbox *in, int max, net_shm_rx_fn fn, void *arg);
/* True if some lane holds a packet (acquire loads only). */
bool net_shm_inbox_pending(struct net_shm_inbox *in);
/* The owner's thread is about to block (on = true: raise the sleeping
 * flag, then a full fence; call pending() after it) or is awake again. */
void net_shm_inbox_set_sleeping(struct net_shm_inbox *in, bool on);
/* Slots dropped because the shared file held nonsense (tests, debug). */
uint64_t net_shm_inbox_bad(const struct net_shm_inbox *in);
/* Where the owner maps the file (the fuzzer checks packets lie inside). */
const void *net_shm_inbox_base(const struct net_shm_inbox *in);

/* The inbox of dev's engine at port, mapped once per process and cached;
 * a cached one is checked against the file (same inode, owner alive) and
 * reopened if the owner changed.  Claims a lane on first use.  NULL +
 * errno when there is none or no lane is free (the caller uses UDP). */
struct net_shm_peer *net_shm_peer_get(const char *dev, uint16_t port);
/* The lane this process writes into (tests). */
int net_shm_peer_lane(const struct net_shm_peer *p);

/* Copy one packet (gathered from iov, at most NET_SHM_PKT_MAX bytes) into
 * our lane with the addresses the receiver must see (from = the sender's
 * bound address, to_ip = the address it was sent to).  Waits at most
 * ~spin_ns for room.  Returns 0, 1 (published, and the owner was asleep:
 * the caller must ring the doorbell, a zero-length datagram to the
 * owner's port), -EAGAIN (lane full) or -EMSGSIZE. */
int net_shm_send(struct net_shm_peer *p, const struct net_addr *from,
		 const uint8_t to_ip[16], const struct iovec *iov, int iovcnt,
		 uint64_t spin_ns);
/* The same, for a packet another host sent to this host's port 4791 that
 * belongs to a QP of the owner (transport/qp_forward.c): the receiver
 * sees to_port as the destination port, so the packet's ICRC, computed
 * by the remote sender over 4791, still verifies. */
int net_shm_send_to(struct net_shm_peer *p, const struct net_addr *from,
		    const uint8_t to_ip[16], uint16_t to_port,
		    const struct iovec *iov, int iovcnt, uint64_t spin_ns);

#endif
