/* The CM's GSI socket: the only file of cm/ that knows sockets.
 *
 * A CM MAD travels as a RoCEv2 UD SEND_ONLY packet to QP1: BTH + DETH
 * (Q_Key 0x80010000, source QP 1) + the 256-byte MAD + ICRC, in a UDP
 * datagram.  Each process's agent owns a UDP socket of each family on one
 * ephemeral port number (4791 belongs to the verbs engine); peers on this host find a
 * listener's port through the directory, and every answer goes back to the
 * port a MAD came from.  A MAD for a remote host goes to its port 4791; a
 * MAD from a RoCE peer reaches us through the engine that owns this host's
 * port 4791 (transport/gsi_forward.h) and is answered at the peer's 4791. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/errqueue.h>
#include <netinet/icmp6.h>
#include <netinet/ip_icmp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm/cm.h"
#include "transport/gsi_forward.h"
#include "wire/wire.h"

/* A sockaddr for to (family by its address form). */
static socklen_t peer_sa(struct sockaddr_storage *ss, const struct cm_peer *to)
{
	cm_ip_to_sa(ss, to->ip, to->port, to->scope);
	return cm_ip_is_v4(to->ip) ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

/* The l3 of a packet of family between two cm/addr.h addresses. */
static void l3_of(struct wire_l3 *l3, int family, const uint8_t src[16], const uint8_t dst[16])
{
	l3->family = family;
	if (family == AF_INET) {
		memcpy(l3->src, src + 12, 4);
		memcpy(l3->dst, dst + 12, 4);
	} else {
		memcpy(l3->src, src, 16);
		memcpy(l3->dst, dst, 16);
	}
}

int cm_gsi_open(int family, uint16_t *port)
{
	struct sockaddr_storage ss = { .ss_family = (sa_family_t)family };
	socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int one = 1, pmtu = IP_PMTUDISC_DO, fd;

	((struct sockaddr_in *)&ss)->sin_port = htons(*port); /* same offset in both */
	fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (family == AF_INET) {
		setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
		/* DF: the kernel then sends IPv4 ID 0 on this unconnected socket,
		 * the ID our ICRC is computed with (docs/wire.md); a RoCE peer
		 * checks it. */
		setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	} else {
		/* IPv4 has its own socket (same port number): this one IPv6 only */
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
	}
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	*port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

/* Leave from src (the address the ICRC covers; the kernel's own choice
 * may differ when the id is bound to another of ours): a pktinfo control
 * message of src's family in cbuf. */
static void set_src(struct msghdr *mh, void *cbuf, size_t clen, const uint8_t src[16],
		    uint32_t scope)
{
	struct cmsghdr *cm;

	memset(cbuf, 0, clen);
	mh->msg_control = cbuf;
	mh->msg_controllen = clen;
	cm = CMSG_FIRSTHDR(mh);
	if (cm_ip_is_v4(src)) {
		struct in_pktinfo pi = { 0 };

		memcpy(&pi.ipi_spec_dst, src + 12, 4);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	} else {
		struct in6_pktinfo pi = { .ipi6_ifindex = scope };

		memcpy(&pi.ipi6_addr, src, 16);
		cm->cmsg_level = IPPROTO_IPV6;
		cm->cmsg_type = IPV6_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	}
	mh->msg_controllen = cm->cmsg_len;
}

int cm_gsi_send(int fd, uint16_t sport, const uint8_t src_ip[16],
		const struct cm_peer *to, uint32_t psn,
		const uint8_t mad[WIRE_MAD_LEN])
{
	struct wire_l3 l3 = { .sport = sport, .dport = to->port };
	uint8_t hdr[WIRE_MAX_HDR_LEN], icrc[4];
	struct sockaddr_storage ss;
	struct iovec iov[3];
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
		struct cmsghdr align;
	} cbuf;
	struct msghdr mh = { .msg_name = &ss, .msg_iov = iov, .msg_iovlen = 3 };
	int hlen;

	if (!cm_ip_is_any(src_ip) && cm_ip_family(src_ip) != cm_ip_family(to->ip))
		return -EAFNOSUPPORT;
	l3_of(&l3, cm_ip_family(to->ip), src_ip, to->ip);
	hlen = wire_gsi_frame(&l3, psn, mad, hdr, icrc);
	if (hlen < 0)
		return hlen;
	iov[0] = (struct iovec){ hdr, (size_t)hlen };
	iov[1] = (struct iovec){ (void *)mad, WIRE_MAD_LEN };
	iov[2] = (struct iovec){ icrc, 4 };
	mh.msg_namelen = peer_sa(&ss, to);
	if (!cm_ip_is_any(src_ip)) {
		set_src(&mh, cbuf.buf, sizeof(cbuf.buf), src_ip, to->scope);
		if (sendmsg(fd, &mh, 0) >= 0)
			return 0;
		if (errno != EINVAL && errno != EADDRNOTAVAIL)
			return -errno;
		/* not an address of ours after all: let the kernel choose */
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
	}
	if (sendmsg(fd, &mh, 0) < 0)
		return -errno;
	return 0;
}

int cm_gsi_recv(int fd, uint8_t mad[WIRE_MAD_LEN], struct cm_peer *from,
		uint8_t to_ip[16])
{
	uint8_t buf[512], cbuf[256];
	struct sockaddr_storage ss, me;
	socklen_t ml = sizeof(me);
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_name = &ss, .msg_namelen = sizeof(ss),
			     .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct wire_l3 l3;
	struct gsi_fwd_hdr fh;
	struct wire_pkt pkt;
	struct cmsghdr *cm;
	const uint8_t *p = buf;
	uint16_t dport = 0;
	size_t len;
	ssize_t n;

	n = recvmsg(fd, &mh, 0);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (mh.msg_flags & MSG_TRUNC)
		return 0;
	memset(from, 0, sizeof(*from));
	if (cm_ip_from_sa((struct sockaddr *)&ss, from->ip, &from->port, &from->scope))
		return 0;
	len = (size_t)n;
	memset(to_ip, 0, 16);
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
			cm_ip_from_v4(to_ip, &pi.ipi_addr);
		} else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;

			memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
			memcpy(to_ip, &pi.ipi6_addr, 16);
		}
	}
	if (getsockname(fd, (struct sockaddr *)&me, &ml) == 0)
		dport = ntohs(((struct sockaddr_in *)&me)->sin_port);
	/* A MAD sent to RoCE's port (our own socket has it, or the engine
	 * that has it handed the packet over, with its original addresses),
	 * or from another host, comes from a RoCE GSI, answered at its port
	 * 4791 whatever source port it used; only a local engine hands
	 * packets over.  Every handler takes the peer from here. */
	if (gsi_fwd_hdr_decode(buf, len, &fh)) {
		if (!cm_ip_is_local(from->ip))
			return 0;
		p += GSI_FWD_HDR_LEN;
		len -= GSI_FWD_HDR_LEN;
		if (fh.ip_version == 4) {
			cm_ip_from_v4(from->ip, fh.src_ip);
			cm_ip_from_v4(to_ip, fh.dst_ip);
		} else {
			memcpy(from->ip, fh.src_ip, 16);
			memcpy(to_ip, fh.dst_ip, 16);
		}
		from->scope = 0; /* (a link-local peer's scope is not handed on) */
		from->port = CM_ROCE_PORT;
		dport = fh.dst_port;
		l3.sport = fh.src_port;
	} else {
		l3.sport = from->port;
		if (dport == CM_ROCE_PORT || !cm_ip_is_local(from->ip))
			from->port = CM_ROCE_PORT;
	}
	l3_of(&l3, cm_ip_family(from->ip), from->ip, to_ip);
	l3.ip_id = 0;
	l3.dport = dport;
	/* Hostile input: a valid UD SEND_ONLY to QP1 with QP1's Q_Key, a
	 * 256-byte payload and a good ICRC, or nothing. */
	if (wire_decode(p, len, &pkt) ||
	    pkt.opcode != (WIRE_UD | WIRE_SEND_ONLY) || pkt.dqpn != WIRE_GSI_QPN ||
	    pkt.qkey != WIRE_GSI_QKEY || pkt.payload_len != WIRE_MAD_LEN)
		return 0;
	if (wire_icrc_verify(&l3, p, len, NULL))
		return 0;
	memcpy(mad, pkt.payload, WIRE_MAD_LEN);
	return 1;
}

int cm_probe_open(int family)
{
	struct sockaddr_storage ss = { .ss_family = (sa_family_t)family };
	socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int one = 1, fd, r;

	fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* ICMP errors for what we sent come back on the error queue
	 * (cm_gsi_recv_err).  Not on the GSI socket: a burst of them (MADs
	 * to ports that closed) would take its receive buffer from MADs. */
	if (family == AF_INET)
		r = setsockopt(fd, IPPROTO_IP, IP_RECVERR, &one, sizeof(one));
	else
		r = setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) ||
		    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVERR, &one, sizeof(one));
	if (r < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

int cm_gsi_probe(int fd, const struct cm_peer *to)
{
	struct sockaddr_storage ss;
	socklen_t len = peer_sa(&ss, to);

	if (sendto(fd, "", 0, 0, (struct sockaddr *)&ss, len) < 0)
		return -errno;
	return 0;
}

int cm_gsi_recv_err(int fd, struct cm_peer *to)
{
	uint8_t buf[64], cbuf[256];
	struct sockaddr_storage ss;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_name = &ss, .msg_namelen = sizeof(ss),
			     .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	int found = 0;

	memset(&ss, 0, sizeof(ss));
	if (recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		struct sock_extended_err ee;

		if (!((cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_RECVERR) ||
		      (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_RECVERR)) ||
		    cm->cmsg_len < CMSG_LEN(sizeof(ee)))
			continue;
		memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
		if (ee.ee_origin == SO_EE_ORIGIN_ICMP && ee.ee_type == ICMP_DEST_UNREACH)
			found = ee.ee_code == ICMP_PORT_UNREACH ? CM_UNREACH_PORT :
				ee.ee_code == ICMP_HOST_UNREACH || ee.ee_code == ICMP_NET_UNREACH ?
				CM_UNREACH_HOST : 0;
		else if (ee.ee_origin == SO_EE_ORIGIN_ICMP6 && ee.ee_type == ICMP6_DST_UNREACH)
			found = ee.ee_code == ICMP6_DST_UNREACH_NOPORT ? CM_UNREACH_PORT :
				ee.ee_code == ICMP6_DST_UNREACH_ADDR ||
				ee.ee_code == ICMP6_DST_UNREACH_NOROUTE ? CM_UNREACH_HOST : 0;
	}
	if (found && cm_ip_from_sa((struct sockaddr *)&ss, to->ip, &to->port, &to->scope))
		found = 0;
	return found;
}

int cm_route_src(const uint8_t dst[16], uint32_t scope, uint8_t src[16])
{
	struct sockaddr_storage ss;
	socklen_t len = cm_ip_is_v4(dst) ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int fd, ret = 0;

	/* A connected UDP socket asks the kernel's routing table which
	 * source address it would use: nothing is sent. */
	cm_ip_to_sa(&ss, dst, 4791, scope);
	fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    cm_ip_from_sa((struct sockaddr *)&ss, src, NULL, NULL))
		ret = errno == ENETUNREACH ? -ENETUNREACH : -EADDRNOTAVAIL;
	close(fd);
	return ret;
}

bool cm_ip_is_local(const uint8_t ip[16])
{
	struct ifaddrs *ifa, *i;
	bool local = cm_ip_is_loopback(ip);

	if (local || getifaddrs(&ifa) < 0)
		return local;
	for (i = ifa; i && !local; i = i->ifa_next) {
		uint8_t a[16];

		if (i->ifa_addr && !cm_ip_from_sa(i->ifa_addr, a, NULL, NULL) &&
		    !memcmp(a, ip, 16))
			local = true;
	}
	freeifaddrs(ifa);
	return local;
}
