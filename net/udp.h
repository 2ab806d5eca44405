/* net/udp: the only code that knows sockets.  One non-blocking UDP socket
 * per engine, bound to the device's address; packets leave with sendmsg
 * (gathered straight from registered memory) and arrive in recvmmsg
 * batches together with the address they were sent to (IP_PKTINFO). */
#ifndef NET_UDP_H
#define NET_UDP_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* An IP endpoint: family + address bytes (IPv4 in the first 4) + port. */
struct net_addr {
	int family;                  /* AF_INET or AF_INET6 */
	uint8_t ip[16];
	uint16_t port;               /* host order */
};

struct net_udp {
	int fd;                      /* -1 when closed */
	struct net_addr local;       /* bound address and port */
	int rcvbuf, sndbuf;          /* as granted by the kernel */
	bool gro;                    /* UDP_GRO on: a datagram may hold several packets */
	bool gso_off;                /* UDP_SEGMENT refused once: send one by one */
};

/* How net_udp_open binds. */
enum {
	NET_UDP_ROCE_FIRST = 1,      /* port 4791 if free, else ephemeral */
	NET_UDP_REUSEPORT = 2,       /* 4791 joins the address's SO_REUSEPORT
				      * group of engines (net/steer.h) */
};

/* Bind to ip (family AF_INET: 4 bytes; AF_INET6: 16), as flags say (0:
 * an ephemeral port).  0 or -errno. */
int net_udp_open(struct net_udp *u, int family, const uint8_t *ip, unsigned int flags);
/* The same socket, but port 4791 only: 0, -EADDRINUSE while another socket
 * holds it (one not in our group), or another -errno (transport/engine.c
 * takes the port over with it when its holder goes, see net/roce_port.h,
 * or joins the group with NET_UDP_REUSEPORT). */
int net_udp_open_roce(struct net_udp *u, int family, const uint8_t *ip, unsigned int flags);
/* Bound to ip:port exactly (no fallback, no group): an engine's IPv6
 * socket takes its IPv4 socket's port number, so one registered port
 * reaches it in either family.  0 or -errno (-EADDRINUSE). */
int net_udp_open_at(struct net_udp *u, int family, const uint8_t *ip, uint16_t port);
void net_udp_close(struct net_udp *u);

/* Send one datagram gathered from iov.  0, -EAGAIN (socket buffer full:
 * try again later) or another -errno. */
int net_udp_send(struct net_udp *u, const struct net_addr *to,
		 const struct iovec *iov, int iovcnt);

/* Send nseg packets of seg bytes each (the last may be shorter), laid out
 * back to back in iov, in one system call (UDP GSO).  The kernel gives the
 * segments of one send IPv4 IDs 0, 1, 2, ... (docs/wire.md).  Where GSO is
 * refused it falls back to one datagram per segment, seg_iov[k] being the
 * index in iov where segment k starts.  0, -EAGAIN or another -errno. */
int net_udp_send_segs(struct net_udp *u, const struct net_addr *to,
		      const struct iovec *iov, int iovcnt, uint32_t seg, int nseg,
		      const int *seg_iov);

/* One GSO send of several (net_udp_send_gso): iov[iov0 .. iov0 + niov)
 * holds nseg packets of seg bytes (the last may be shorter); packet k
 * starts at iov index seg_iov[seg0 + k]. */
struct net_udp_gso {
	int iov0, niov;
	int seg0, nseg;
	uint32_t seg;
};

/* Several GSO sends (each as net_udp_send_segs) in one system call
 * (sendmmsg), all to one destination.  Returns how many of the ngrp sends
 * left, in order (>= 1), or -EAGAIN / -errno when none did. */
int net_udp_send_gso(struct net_udp *u, const struct net_addr *to, const struct iovec *iov,
		     const int *seg_iov, const struct net_udp_gso *grp, int ngrp);

/* in[0..n) into out with neighbours that touch in memory joined: the same
 * bytes, in order, in fewer iovecs (GSO sends go out this way).  out has
 * room for n.  Returns how many it holds. */
int net_udp_iov_join(const struct iovec *in, int n, struct iovec *out);

/* True while SOFTRNIC_TEST_DROP/DUP fault injection is on (senders then
 * send packet by packet so each can be dropped or duplicated alone). */
bool net_udp_faults(void);

/* Wait until the socket can take more (bounded by timeout_ms).  True if it can. */
bool net_udp_wait_writable(struct net_udp *u, int timeout_ms);

/* One received datagram. */
struct net_udp_msg {
	uint8_t *buf;                /* caller-owned buffer */
	uint32_t cap;                /* its size */
	uint32_t len;                /* bytes received */
	uint32_t seg;                /* GRO segment size: buf holds packets of
	                              * seg bytes (last shorter); 0 = one packet */
	bool truncated;              /* datagram was longer than cap */
	uint16_t id_hint;            /* the IPv4 ID it was likely sent with (a
	                              * GSO send's k-th segment has ID k): the
	                              * ICRC check is quickest with the right one */
	struct net_addr from;        /* sender */
	struct net_addr to;          /* address it was sent to (port = ours) */
};

/* Receive up to n datagrams without blocking.  Returns how many (0 when
 * nothing is waiting) or -errno. */
int net_udp_recv_batch(struct net_udp *u, struct net_udp_msg *msgs, int n);

/* True if ip is an address of this host (127.0.0.0/8, ::1, or any
 * interface's address; the list is read once). */
bool net_addr_is_local(int family, const uint8_t *ip);

#endif
