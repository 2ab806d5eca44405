/* net/roce_port: which engine of this host holds UDP port 4791 (RoCEv2's
 * port, where every peer on another host sends) on an address, and a
 * wake-up for the others when it lets go.
 *
 * Engines of several processes share one address; the first binds 4791
 * (net_udp_open), the others ephemeral ports.  The holder also keeps open
 * the write end of a FIFO named after the address and the network
 * namespace; every other engine keeps a read end in its epoll set.  When
 * the last write end closes -- the holder closed its context, exited, or
 * was killed: the kernel closes its files in every case -- each read end
 * reports EPOLLHUP, and those engines try to bind 4791
 * (net_udp_open_roce): bind is atomic, one wins.  No polling: a waiting
 * engine costs nothing until then.
 *
 * No wake-up is lost: a candidate holds a write end of its own while it
 * tries the bind and opens its read end, so a holder that goes at any
 * moment after the attempt leaves a hang-up to see (Linux reports POLLHUP
 * on a FIFO's read end once the last writer goes, provided a writer was
 * there when it was opened).  A hang-up while the holder lives (it keeps
 * no write end: not a softrnic engine of this kind) makes the engines try
 * again after a back-off (transport/engine_roce.c).
 *
 * Why a FIFO and not an abstract Unix socket (no file): its listener
 * would keep one never-accepted connection per engine that ever waited,
 * up to the backlog.  The FIFO file stays in /dev/shm, empty; the last
 * holder to close its context with nobody waiting removes it.
 */
#ifndef NET_ROCE_PORT_H
#define NET_ROCE_PORT_H

#include <stdbool.h>
#include <stdint.h>

struct net_roce_port {
	int fd;                      /* write end (held) or read end; -1: none */
	bool held;                   /* we hold 4791: fd is a write end */
	char path[96];               /* the FIFO, from net_roce_port_begin */
};

/* Before a bind to (family, ip):4791: take a write end.  Where the FIFO
 * cannot be had (no /dev/shm, someone else's file), fd stays -1. */
void net_roce_port_begin(struct net_roce_port *p, int family, const uint8_t *ip);

/* After the attempt.  held (we hold 4791 with socket sock_fd): keep the
 * write end, moved to a descriptor above sock_fd, so a dying process's
 * socket closes before it (the kernel closes files in ascending order)
 * and an engine woken finds the port free; returns -1.  Not held: trade
 * the write end for a read end and return it, to be watched for
 * EPOLLHUP; -1 when there is none. */
int net_roce_port_end(struct net_roce_port *p, bool held, int sock_fd);

/* Let go of the FIFO (after closing the 4791 socket, see above). */
void net_roce_port_close(struct net_roce_port *p);

/* A read end reported EPOLLIN without EPOLLHUP: someone wrote to the FIFO
 * (nobody should): empty it, so the level-triggered event stops. */
void net_roce_port_drain(struct net_roce_port *p);

#endif
