/* net/netlink_link: the link state of one network interface, from the
 * kernel's rtnetlink (NETLINK_ROUTE): an answer to RTM_GETLINK, then the
 * RTM_NEWLINK/RTM_DELLINK notices of group RTMGRP_LINK.  The engine's
 * link watch (transport/link_watch.c) follows it so that a device's port
 * goes down and up with its interface, as rxe's does. */
#ifndef NET_NETLINK_LINK_H
#define NET_NETLINK_LINK_H

#include <stddef.h>

/* What a message says about the interface. */
enum {
	NET_LINK_ADMIN_UP = 1u << 0, /* IFF_UP: configured up */
	NET_LINK_CARRIER = 1u << 1,  /* IFF_LOWER_UP: the link has carrier */
	NET_LINK_LOOPBACK = 1u << 2, /* IFF_LOOPBACK */
	NET_LINK_GONE = 1u << 3,     /* RTM_DELLINK: the interface was removed */
};

/* Is a link with these bits usable (rxe: running and carrier)? */
static inline int net_link_is_up(unsigned int bits)
{
	return (bits & (NET_LINK_ADMIN_UP | NET_LINK_CARRIER | NET_LINK_GONE)) ==
	       (NET_LINK_ADMIN_UP | NET_LINK_CARRIER);
}

/* Walk the netlink messages in buf[0..len) (one datagram) for those about
 * interface ifindex; *bits gets what the last of them says.  1 if one was
 * found, 0 if none, -1 if none and the datagram is malformed (a message
 * that runs past the end or is too short for its type ends the walk). */
int net_link_parse(const void *buf, size_t len, int ifindex, unsigned int *bits);

/* A non-blocking, close-on-exec NETLINK_ROUTE socket joined to
 * RTMGRP_LINK.  The fd, or -errno. */
int net_link_open(void);
/* Ask for ifindex's state (RTM_GETLINK); the answer arrives on fd like a
 * notice.  0 or -errno. */
int net_link_request(int fd, int ifindex, unsigned int seq);
/* Read every datagram waiting on fd (at most max) and parse them for
 * ifindex (one too long for the buffer is read cut short: the header
 * says all).  1 if *bits was set, 0 if nothing about ifindex came,
 * -ENOBUFS if the kernel dropped notices (ask again: the state may have
 * changed unseen), other -errno on error.  Datagrams not from the kernel
 * are ignored. */
int net_link_read(int fd, int ifindex, unsigned int *bits, int max);
/* net_link_request, then wait up to timeout_ms for the answer. 1 with
 * *bits set, 0 if none came in time, -errno. */
int net_link_query(int fd, int ifindex, unsigned int *bits, int timeout_ms);

#endif
