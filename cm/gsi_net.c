/* The CM's GSI socket: the only file of cm/ that knows sockets.
 *
 * A CM MAD travels as a RoCEv2 UD SEND_ONLY packet to QP1: BTH + DETH
 * (Q_Key 0x80010000, source QP 1) + the 256-byte MAD + ICRC, in a UDP
 * datagram.  Each process's agent owns one IPv4 UDP socket on an ephemeral
 * port (4791 belongs to the verbs engine); peers on this host find a
 * listener's port through the directory, and every answer goes back to the
 * port a MAD came from.  A MAD for a remote host goes to its port 4791; a
 * MAD from a RoCE peer reaches us through the engine that owns this host's
 * port 4791 (transport/gsi_forward.h) and is answered at the peer's 4791. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/errqueue.h>
#include <netinet/ip_icmp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm/cm.h"
#include "transport/gsi_forward.h"
#include "wire/wire.h"

int cm_gsi_open(uint16_t *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int one = 1, pmtu = IP_PMTUDISC_DO, fd;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	/* DF: the kernel then sends IPv4 ID 0 on this unconnected socket,
	 * the ID our ICRC is computed with (docs/wire.md); a RoCE peer checks it. */
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	*port = ntohs(sin.sin_port);
	return fd;
}

int cm_gsi_send(int fd, uint16_t sport, const uint8_t src_ip[4],
		const struct cm_peer *to, uint32_t psn,
		const uint8_t mad[WIRE_MAD_LEN])
{
	struct wire_l3 l3 = { .family = AF_INET, .sport = sport, .dport = to->port };
	uint8_t hdr[WIRE_MAX_HDR_LEN], icrc[4];
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(to->port) };
	struct iovec iov[3];
	int hlen;

	memcpy(l3.src, src_ip, 4);
	memcpy(l3.dst, to->ip, 4);
	hlen = wire_gsi_frame(&l3, psn, mad, hdr, icrc);
	if (hlen < 0)
		return hlen;
	iov[0] = (struct iovec){ hdr, (size_t)hlen };
	iov[1] = (struct iovec){ (void *)mad, WIRE_MAD_LEN };
	iov[2] = (struct iovec){ icrc, 4 };
	memcpy(&sin.sin_addr, to->ip, 4);
	struct msghdr mh = { .msg_name = &sin, .msg_namelen = sizeof(sin),
			     .msg_iov = iov, .msg_iovlen = 3 };
	/* Leave from src_ip, the address the ICRC covers: the kernel's own
	 * choice (127.0.0.1 toward any 127/8 peer, the primary address of
	 * an interface) may differ when the id is bound to another one. */
	union {
		char buf[CMSG_SPACE(sizeof(struct in_pktinfo))];
		struct cmsghdr align;
	} cbuf;
	static const uint8_t any[4];

	if (memcmp(src_ip, any, 4)) {
		struct in_pktinfo pi = { 0 };
		struct cmsghdr *cm;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = sizeof(cbuf.buf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(&pi.ipi_spec_dst, src_ip, 4);
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
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
		uint8_t to_ip[4])
{
	uint8_t buf[512], cbuf[256];
	struct sockaddr_in sin, me;
	socklen_t ml = sizeof(me);
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_name = &sin, .msg_namelen = sizeof(sin),
			     .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct wire_l3 l3 = { .family = AF_INET };
	struct gsi_fwd_hdr fh;
	struct wire_pkt pkt;
	struct cmsghdr *cm;
	const uint8_t *p = buf;
	size_t len;
	ssize_t n;

	n = recvmsg(fd, &mh, 0);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (sin.sin_family != AF_INET || (mh.msg_flags & MSG_TRUNC))
		return 0;
	len = (size_t)n;
	memset(to_ip, 0, 4);
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
			memcpy(to_ip, &pi.ipi_addr, 4);
		}
	}
	memcpy(l3.src, &sin.sin_addr, 4);
	memcpy(l3.dst, to_ip, 4);
	l3.sport = ntohs(sin.sin_port);
	l3.dport = getsockname(fd, (struct sockaddr *)&me, &ml) == 0 ? ntohs(me.sin_port) : 0;
	memcpy(from->ip, &sin.sin_addr, 4);
	from->port = ntohs(sin.sin_port);
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
		memcpy(l3.src, fh.src_ip, 4);
		memcpy(l3.dst, fh.dst_ip, 4);
		memcpy(to_ip, fh.dst_ip, 4);
		l3.sport = fh.src_port;
		l3.dport = fh.dst_port;
		memcpy(from->ip, fh.src_ip, 4);
		from->port = CM_ROCE_PORT;
	} else if (l3.dport == CM_ROCE_PORT || !cm_ip_is_local(from->ip)) {
		from->port = CM_ROCE_PORT;
	}
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

int cm_probe_open(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* ICMP errors for what we sent come back on the error queue
	 * (cm_gsi_recv_err).  Not on the GSI socket: a burst of them (MADs
	 * to ports that closed) would take its receive buffer from MADs. */
	if (setsockopt(fd, IPPROTO_IP, IP_RECVERR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

int cm_gsi_probe(int fd, const struct cm_peer *to)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(to->port) };

	memcpy(&sin.sin_addr, to->ip, 4);
	if (sendto(fd, "", 0, 0, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		return -errno;
	return 0;
}

int cm_gsi_recv_err(int fd, struct cm_peer *to)
{
	uint8_t buf[64], cbuf[256];
	struct sockaddr_in sin;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_name = &sin, .msg_namelen = sizeof(sin),
			     .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	int found = 0;

	memset(&sin, 0, sizeof(sin));
	if (recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (sin.sin_family != AF_INET || mh.msg_namelen < sizeof(sin))
		return 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		struct sock_extended_err ee;

		if (cm->cmsg_level != IPPROTO_IP || cm->cmsg_type != IP_RECVERR ||
		    cm->cmsg_len < CMSG_LEN(sizeof(ee)))
			continue;
		memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
		if (ee.ee_origin == SO_EE_ORIGIN_ICMP && ee.ee_type == ICMP_DEST_UNREACH &&
		    ee.ee_code == ICMP_PORT_UNREACH)
			found = 1;
	}
	if (found) {
		memcpy(to->ip, &sin.sin_addr, 4);
		to->port = ntohs(sin.sin_port);
	}
	return found;
}

int cm_route_src(const uint8_t dst[4], uint8_t src[4])
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(4791) };
	socklen_t len = sizeof(sin);
	int fd, ret = 0;

	/* A connected UDP socket asks the kernel's routing table which
	 * source address it would use: nothing is sent. */
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memcpy(&sin.sin_addr, dst, 4);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) < 0)
		ret = errno == ENETUNREACH ? -ENETUNREACH : -EADDRNOTAVAIL;
	else
		memcpy(src, &sin.sin_addr, 4);
	close(fd);
	return ret;
}

bool cm_ip_is_local(const uint8_t ip[4])
{
	struct ifaddrs *ifa, *i;
	bool local = ip[0] == 127;

	if (local || getifaddrs(&ifa) < 0)
		return local;
	for (i = ifa; i && !local; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    !memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip, 4))
			local = true;
	freeifaddrs(ifa);
	return local;
}
