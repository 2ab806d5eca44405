/* The CM's GSI socket: the only file of cm/ that knows sockets.
 *
 * A CM MAD travels as a RoCEv2 UD SEND_ONLY packet to QP1: BTH + DETH
 * (Q_Key 0x80010000, source QP 1) + the 256-byte MAD + ICRC, in a UDP
 * datagram.  Each process's agent owns one IPv4 UDP socket on an ephemeral
 * port (4791 belongs to the verbs engine); peers on this host find a
 * listener's port through the directory, and every answer goes back to the
 * port a MAD came from.  A MAD for a remote host goes to its port 4791. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm/cm.h"
#include "wire/wire.h"

int cm_gsi_open(uint16_t *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
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
	struct wire_pkt pkt = {
		.opcode = WIRE_UD | WIRE_SEND_ONLY,
		.pkey = 0xffff,
		.dqpn = WIRE_GSI_QPN,
		.psn = psn & WIRE_PSN_MASK,
		.qkey = WIRE_GSI_QKEY,
		.sqpn = WIRE_GSI_QPN,
	};
	struct wire_l3 l3 = { .family = AF_INET, .sport = sport, .dport = to->port };
	uint8_t hdr[WIRE_MAX_HDR_LEN], icrc[4];
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(to->port) };
	struct iovec iov[3];
	uint32_t crc;
	int hlen;

	hlen = wire_encode_hdrs(hdr, &pkt);
	if (hlen < 0)
		return hlen;
	memcpy(l3.src, src_ip, 4);
	memcpy(l3.dst, to->ip, 4);
	iov[0] = (struct iovec){ hdr, (size_t)hlen };
	iov[1] = (struct iovec){ (void *)mad, WIRE_MAD_LEN };
	crc = wire_icrc(&l3, iov, 2);
	for (int i = 0; i < 4; i++)
		icrc[i] = (uint8_t)(crc >> (8 * i));
	iov[2] = (struct iovec){ icrc, 4 };
	memcpy(&sin.sin_addr, to->ip, 4);
	struct msghdr mh = { .msg_name = &sin, .msg_namelen = sizeof(sin),
			     .msg_iov = iov, .msg_iovlen = 3 };
	if (sendmsg(fd, &mh, 0) < 0)
		return -errno;
	return 0;
}

int cm_gsi_recv(int fd, uint8_t mad[WIRE_MAD_LEN], struct cm_peer *from,
		uint8_t to_ip[4])
{
	uint8_t buf[512], cbuf[256];
	struct sockaddr_in sin;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_name = &sin, .msg_namelen = sizeof(sin),
			     .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct wire_l3 l3 = { .family = AF_INET };
	struct wire_pkt pkt;
	struct cmsghdr *cm;
	ssize_t n;

	n = recvmsg(fd, &mh, 0);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (sin.sin_family != AF_INET || (mh.msg_flags & MSG_TRUNC))
		return 0;
	memset(to_ip, 0, 4);
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
			memcpy(to_ip, &pi.ipi_addr, 4);
		}
	}
	/* Hostile input: a valid UD SEND_ONLY to QP1 with QP1's Q_Key, a
	 * 256-byte payload and a good ICRC, or nothing. */
	if (wire_decode(buf, (size_t)n, &pkt) ||
	    pkt.opcode != (WIRE_UD | WIRE_SEND_ONLY) || pkt.dqpn != WIRE_GSI_QPN ||
	    pkt.qkey != WIRE_GSI_QKEY || pkt.payload_len != WIRE_MAD_LEN)
		return 0;
	memcpy(l3.src, &sin.sin_addr, 4);
	memcpy(l3.dst, to_ip, 4);
	l3.sport = ntohs(sin.sin_port);
	l3.dport = 0;
	{
		struct sockaddr_in me;
		socklen_t ml = sizeof(me);

		if (getsockname(fd, (struct sockaddr *)&me, &ml) == 0)
			l3.dport = ntohs(me.sin_port);
	}
	if (wire_icrc_verify(&l3, buf, (size_t)n, NULL))
		return 0;
	memcpy(mad, pkt.payload, WIRE_MAD_LEN);
	memcpy(from->ip, &sin.sin_addr, 4);
	from->port = ntohs(sin.sin_port);
	return 1;
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
