/* rtnetlink link state (net/netlink_link.h).  Only the fixed header of
 * RTM_NEWLINK (struct ifinfomsg) is read: its flags say all we need, so no
 * attribute is parsed.  Every length comes from the datagram, so each is
 * checked against what was received before it is used. */
#include "net/netlink_link.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ifi_flags bits (the kernel's ABI; glibc's <net/if.h> lacks LOWER_UP and
 * <linux/if.h> clashes with it). */
enum { FLAG_UP = 0x1, FLAG_LOOPBACK = 0x8, FLAG_LOWER_UP = 0x10000 };

/* A link notice is a few KiB (more with many VFs); one that does not fit
 * is read cut short: its fixed header is all we need (clamp_cut). */
enum { READ_BUF = 8192 };

int net_link_parse(const void *buf, size_t len, int ifindex, unsigned int *bits)
{
	const unsigned char *p = buf;
	size_t off = 0;
	int found = 0;

	if (!p)
		return len ? -1 : 0;
	while (len - off >= sizeof(struct nlmsghdr)) {
		struct nlmsghdr h;
		struct ifinfomsg ifi;
		size_t step;

		memcpy(&h, p + off, sizeof(h));
		if (h.nlmsg_len < sizeof(h) || h.nlmsg_len > len - off)
			return found ? 1 : -1;
		if (h.nlmsg_type == RTM_NEWLINK || h.nlmsg_type == RTM_DELLINK) {
			if (h.nlmsg_len < NLMSG_LENGTH(sizeof(ifi)))
				return found ? 1 : -1;
			memcpy(&ifi, p + off + NLMSG_HDRLEN, sizeof(ifi));
			if (ifi.ifi_index == ifindex) {
				unsigned int b = 0;

				if (ifi.ifi_flags & FLAG_UP)
					b |= NET_LINK_ADMIN_UP;
				if (ifi.ifi_flags & FLAG_LOWER_UP)
					b |= NET_LINK_CARRIER;
				if (ifi.ifi_flags & FLAG_LOOPBACK)
					b |= NET_LINK_LOOPBACK;
				if (h.nlmsg_type == RTM_DELLINK)
					b |= NET_LINK_GONE;
				*bits = b;
				found = 1;
			}
		}
		/* the last message of a datagram may lack its padding */
		step = NLMSG_ALIGN((size_t)h.nlmsg_len);
		if (step >= len - off)
			return found;
		off += step;
	}
	if (off != len && !found)
		return -1;
	return found;
}

/* A datagram the kernel cut at len: the message that runs past the end
 * is made to end there, so the parser reads its fixed header (or drops it
 * if even that was cut). */
static void clamp_cut(unsigned char *buf, size_t len)
{
	size_t off = 0;

	while (len - off >= sizeof(struct nlmsghdr)) {
		struct nlmsghdr h;

		memcpy(&h, buf + off, sizeof(h));
		if (h.nlmsg_len < sizeof(h))
			return;
		if (h.nlmsg_len > len - off) {
			h.nlmsg_len = (uint32_t)(len - off);
			memcpy(buf + off, &h, sizeof(h));
			return;
		}
		if (NLMSG_ALIGN((size_t)h.nlmsg_len) >= len - off)
			return;
		off += NLMSG_ALIGN((size_t)h.nlmsg_len);
	}
}

int net_link_open(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = RTMGRP_LINK };
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

int net_link_request(int fd, int ifindex, unsigned int seq)
{
	struct {
		struct nlmsghdr h;
		struct ifinfomsg ifi;
	} req;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };

	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = NLMSG_LENGTH(sizeof(req.ifi));
	req.h.nlmsg_type = RTM_GETLINK;
	req.h.nlmsg_flags = NLM_F_REQUEST;
	req.h.nlmsg_seq = seq;
	req.ifi.ifi_family = AF_UNSPEC;
	req.ifi.ifi_index = ifindex;
	if (sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return -errno;
	return 0;
}

int net_link_read(int fd, int ifindex, unsigned int *bits, int max)
{
	_Alignas(struct nlmsghdr) unsigned char buf[READ_BUF];
	int found = 0;

	for (int i = 0; i < max; i++) {
		struct sockaddr_nl from;
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from),
				     .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return -errno;
		}
		/* only the kernel speaks for the interface */
		if (mh.msg_namelen < sizeof(from) || from.nl_family != AF_NETLINK ||
		    from.nl_pid != 0)
			continue;
		if (mh.msg_flags & MSG_TRUNC)
			clamp_cut(buf, (size_t)n);
		if (net_link_parse(buf, (size_t)n, ifindex, bits) > 0)
			found = 1;
	}
	return found;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int net_link_query(int fd, int ifindex, unsigned int *bits, int timeout_ms)
{
	uint64_t end = mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	int r = net_link_request(fd, ifindex, 1);

	if (r)
		return r;
	for (int tries = 0; tries < 64; tries++) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		uint64_t now = mono_ms();

		if (now >= end)
			return 0;
		if (poll(&pf, 1, (int)(end - now)) < 0 && errno != EINTR)
			return -errno;
		r = net_link_read(fd, ifindex, bits, 16);
		if (r == -ENOBUFS)
			r = net_link_request(fd, ifindex, 1);
		else if (r)
			return r;
		if (r < 0)
			return r;
	}
	return 0;
}
