/* A softrnic rdma_listen()er connected by a peer that speaks like the Linux
 * kernel's rdma_cm over Soft-RoCE: its CM MADs go to QP1 at UDP port 4791
 * of the listener's address, which belongs to a softrnic verbs engine, not
 * to the CM agent (transport/gsi_forward.h).
 *
 * The fake kernel peer is two plain UDP sockets on 127.0.0.x: one sends
 * from an ephemeral port (as rxe sends from 0xC000 | hash), one receives
 * at port 4791 (where a RoCE GSI listens).  It sends the REQ captured from
 * a real rping in tests/vectors/rxe-rdmacm-rping.pcap, with its addresses,
 * service id and ids patched.
 *
 * Checks: the listener gets CONNECT_REQUEST with the peer's private data
 * and QPN; after rdma_accept the REP comes back to the peer's port 4791
 * (not its source port), names both comm ids and the listener's QPN, and
 * carries a valid ICRC (IPv4 ID 0: the agent sends with DF); the peer's
 * RTU brings ESTABLISHED; the peer's DREQ brings DISCONNECTED and a DREP
 * with both comm ids; a REQ for a port nobody listens on gets the REJ
 * Linux sends (invalid service id); a SIDR_REQ reaches a RDMA_PS_UDP
 * listener and its SIDR_REP (QPN, Q_Key) comes back to the peer's 4791.
 * Skips (77) when no 127.0.0.x:4791 can be bound for
 * the peer, or when 127.0.0.1:4791 is free or held by a process that does
 * not run this build's libibverbs (a shared development machine).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "tests/lib/t_cm.h"
#include "tests/lib/t_util.h"

enum {
	ROCE_PORT = 4791,
	BTH_DETH = 20,               /* BTH 12 + DETH 8 */
	MAD = 256,
	PKT = BTH_DETH + MAD + 4,    /* + ICRC */
	M = 24,                      /* CM message fields count from here */
};

static const char peer_pdata[] = "hello from a kernel-like peer";

/* ---- ICRC (our own CRC-32, the Ethernet one, as docs/wire.md describes) ---- */

static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
	crc = ~crc;
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = crc >> 1 ^ (0xedb88320u & -(crc & 1));
	}
	return ~crc;
}

/* ICRC of a RoCEv2 packet (BTH .. payload, len bytes without the ICRC)
 * carried in IPv4 with ID 0 and DF, between the given addresses. */
static uint32_t icrc(const uint8_t src[4], uint16_t sport, const uint8_t dst[4],
		     uint16_t dport, const uint8_t *pkt, size_t len)
{
	uint8_t ph[8 + 20 + 8 + 12];
	uint16_t tot = (uint16_t)(20 + 8 + len + 4), ulen = (uint16_t)(8 + len + 4);
	uint32_t crc;

	memset(ph, 0xff, 8);                  /* the masked LRH */
	uint8_t *ip = ph + 8, *udp = ip + 20;

	ip[0] = 0x45;
	ip[1] = 0xff;                         /* TOS masked */
	ip[2] = (uint8_t)(tot >> 8), ip[3] = (uint8_t)tot;
	ip[4] = ip[5] = 0;                    /* ID 0 */
	ip[6] = 0x40, ip[7] = 0;              /* DF */
	ip[8] = 0xff;                         /* TTL masked */
	ip[9] = 17;
	ip[10] = ip[11] = 0xff;               /* checksum masked */
	memcpy(ip + 12, src, 4);
	memcpy(ip + 16, dst, 4);
	udp[0] = (uint8_t)(sport >> 8), udp[1] = (uint8_t)sport;
	udp[2] = (uint8_t)(dport >> 8), udp[3] = (uint8_t)dport;
	udp[4] = (uint8_t)(ulen >> 8), udp[5] = (uint8_t)ulen;
	udp[6] = udp[7] = 0xff;               /* UDP checksum masked */
	memcpy(udp + 8, pkt, 12);
	udp[8 + 4] = 0xff;                    /* BTH FECN/BECN/reserved */
	crc = crc32_update(0, ph, sizeof(ph));
	return crc32_update(crc, pkt + 12, len - 12);
}

/* ---- the captured REQ ---------------------------------------------------- */

/* The BTH + DETH + MAD of the first REQ in the rping capture. */
static int captured_req(uint8_t out[BTH_DETH + MAD])
{
	char path[512];
	const char *src = getenv("SRN_SOURCE");
	uint8_t frame[2048], gh[24], rh[16];
	FILE *f;
	int found = -1;

	snprintf(path, sizeof(path), "%s/tests/vectors/rxe-rdmacm-rping.pcap", src ? src : ".");
	f = fopen(path, "rb");
	if (!f)
		return -1;
	if (fread(gh, 1, sizeof(gh), f) != sizeof(gh)) {
		fclose(f);
		return -1;
	}
	for (int i = 0; i < 200 && found < 0; i++) {
		uint32_t cap;

		if (fread(rh, 1, sizeof(rh), f) != sizeof(rh))
			break;
		memcpy(&cap, rh + 8, 4); /* written little-endian on x86 */
		if (cap > sizeof(frame) || fread(frame, 1, cap, f) != cap)
			break;
		/* Ethernet (14) + IPv4 (20) + UDP (8) + BTH/DETH + MAD + ICRC */
		if (cap < 14 + 20 + 8 + PKT || frame[12] != 0x08 || frame[13] != 0x00 ||
		    frame[14] != 0x45 || frame[23] != 17)
			continue;
		const uint8_t *udp = frame + 34, *bth = udp + 8;

		if ((udp[2] << 8 | udp[3]) != ROCE_PORT || bth[0] != 0x64 ||
		    (bth[5] << 16 | bth[6] << 8 | bth[7]) != 1 ||
		    (bth[BTH_DETH + 16] << 8 | bth[BTH_DETH + 17]) != 0x0010)
			continue;
		memcpy(out, bth, BTH_DETH + MAD);
		found = 0;
	}
	fclose(f);
	return found;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

/* ---- who holds 127.0.0.1:4791 ------------------------------------------ */

/* The pid whose socket is bound to 127.0.0.1:4791, or -1. */
static int roce_port_owner(void)
{
	char line[512], path[300], link[64], want[48];
	unsigned long inode = 0;
	FILE *f = fopen("/proc/net/udp", "r");
	DIR *d;
	struct dirent *e;
	int pid = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char local[32];
		unsigned long ino;

		/* sl local rem st tx:rx tr:when retr uid timeout inode */
		if (sscanf(line, " %*s %31s %*s %*s %*s %*s %*s %*s %*s %lu", local, &ino) == 2 &&
		    !strcmp(local, "0100007F:12B7")) {
			inode = ino;
			break;
		}
	}
	fclose(f);
	if (!inode || !(d = opendir("/proc")))
		return -1;
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	while (pid < 0 && (e = readdir(d))) {
		DIR *fd_dir;
		struct dirent *fe;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fd", e->d_name);
		fd_dir = opendir(path);
		while (fd_dir && pid < 0 && (fe = readdir(fd_dir))) {
			char fp[600];
			ssize_t n;

			snprintf(fp, sizeof(fp), "/proc/%s/fd/%s", e->d_name, fe->d_name);
			n = readlink(fp, link, sizeof(link) - 1);
			if (n > 0 && (link[n] = '\0', !strcmp(link, want)))
				pid = atoi(e->d_name);
		}
		if (fd_dir)
			closedir(fd_dir);
	}
	closedir(d);
	return pid;
}

/* Does pid run the libibverbs this test runs (so its engine hands QP1
 * packets over)?  1 yes, 0 no, -1 cannot tell. */
static int runs_our_verbs(int pid)
{
	Dl_info info;
	char ours[4096], path[64], line[4608];
	FILE *f;
	int found = 0;

	if (pid == (int)getpid())
		return 1;
	if (!dladdr((void *)ibv_get_device_list, &info) || !info.dli_fname ||
	    !realpath(info.dli_fname, ours))
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, ours) != NULL;
	fclose(f);
	return found;
}

/* ---- the fake peer ----------------------------------------------------- */

struct peer {
	int tx, rx;                  /* send from an ephemeral port, receive at 4791 */
	uint8_t ip[4];
	uint16_t tx_port;
	uint8_t hdr[BTH_DETH];       /* BTH + DETH as rxe sent them */
	uint32_t psn;
};

static int udp_bound(const uint8_t ip[4], uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, pmtu = IP_PMTUDISC_DO;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	memcpy(&a.sin_addr, ip, 4);
	setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	/* DF: ID 0 on an unconnected socket, what our ICRC assumes */
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static const uint8_t lo[4] = { 127, 0, 0, 1 };

/* Send a MAD to the listener's 127.0.0.1:4791 as a UD packet to QP1. */
static int peer_send(struct peer *p, const uint8_t mad[MAD])
{
	uint8_t pkt[PKT];
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(ROCE_PORT) };
	uint32_t c;

	memcpy(pkt, p->hdr, BTH_DETH);
	pkt[9] = (uint8_t)(p->psn >> 16), pkt[10] = (uint8_t)(p->psn >> 8);
	pkt[11] = (uint8_t)p->psn;
	p->psn++;
	memcpy(pkt + BTH_DETH, mad, MAD);
	c = icrc(p->ip, p->tx_port, lo, ROCE_PORT, pkt, BTH_DETH + MAD);
	for (int i = 0; i < 4; i++)
		pkt[BTH_DETH + MAD + i] = (uint8_t)(c >> (8 * i));
	memcpy(&to.sin_addr, lo, 4);
	return sendto(p->tx, pkt, sizeof(pkt), 0, (struct sockaddr *)&to, sizeof(to)) ==
	       (ssize_t)sizeof(pkt) ? 0 : -1;
}

/* Receive the next MAD of attribute attr at the peer's 4791 (others are
 * skipped: an MRA, a retransmission).  0 and the MAD, or -1 after ms.
 * *icrc_ok tells whether its ICRC was right for the addresses it came
 * with; *tx_seen whether anything arrived at the peer's source port. */
static int peer_recv(struct peer *p, uint16_t attr, uint8_t mad[MAD], int ms,
		     bool *icrc_ok, bool *tx_seen)
{
	double end = t_now() + ms / 1000.0;

	while (t_now() < end) {
		struct pollfd pf[2] = { { p->rx, POLLIN, 0 }, { p->tx, POLLIN, 0 } };
		uint8_t buf[1024], cbuf[128], dst[4] = { 0 };
		struct sockaddr_in from;
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from),
				     .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		ssize_t n;

		if (poll(pf, 2, 50) <= 0)
			continue;
		if (pf[1].revents & POLLIN) {
			if (recv(p->tx, buf, sizeof(buf), 0) >= 0 && tx_seen)
				*tx_seen = true;
			continue;
		}
		n = recvmsg(p->rx, &mh, 0);
		if (n != PKT || buf[0] != 0x64 || get24(buf + 5) != 1)
			continue;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
				struct in_pktinfo pi;

				memcpy(&pi, CMSG_DATA(c), sizeof(pi));
				memcpy(dst, &pi.ipi_addr, 4);
			}
		if ((buf[BTH_DETH + 16] << 8 | buf[BTH_DETH + 17]) != attr)
			continue;
		if (icrc_ok) {
			uint32_t want = icrc((uint8_t *)&from.sin_addr, ntohs(from.sin_port), dst,
					     ROCE_PORT, buf, BTH_DETH + MAD);
			uint32_t got = (uint32_t)buf[PKT - 4] | (uint32_t)buf[PKT - 3] << 8 |
				       (uint32_t)buf[PKT - 2] << 16 | (uint32_t)buf[PKT - 1] << 24;

			*icrc_ok = want == got;
		}
		memcpy(mad, buf + BTH_DETH, MAD);
		return 0;
	}
	return -1;
}

/* A CM MAD header like the REQ's (class, versions, method) for attr. */
static void mad_init(uint8_t mad[MAD], const uint8_t req[MAD], uint16_t attr, uint64_t tid)
{
	memset(mad, 0, MAD);
	memcpy(mad, req, 8);
	for (int i = 0; i < 8; i++)
		mad[8 + i] = (uint8_t)(tid >> (56 - 8 * i));
	mad[16] = (uint8_t)(attr >> 8), mad[17] = (uint8_t)attr;
}

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&p, 1, ms) != 1 || rdma_get_cm_event(ch, &ev))
		return NULL;
	return ev;
}

static bool expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want, int ms,
		   struct rdma_cm_event **out)
{
	struct rdma_cm_event *ev = next_event(ch, ms);

	if (!ev) {
		printf("  # no event (wanted %s)\n", rdma_event_str(want));
		return false;
	}
	if (ev->event != want) {
		printf("  # got %s (status %d), wanted %s\n", rdma_event_str(ev->event),
		       ev->status, rdma_event_str(want));
		rdma_ack_cm_event(ev);
		return false;
	}
	if (out)
		*out = ev;
	else
		rdma_ack_cm_event(ev);
	return true;
}

int main(void)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen_id, *conn = NULL;
	struct rdma_cm_event *ev = NULL;
	struct sockaddr_in la = { .sin_family = AF_INET };
	struct peer p = { .tx = -1, .rx = -1 };
	uint8_t req[BTH_DETH + MAD], *rq = req + BTH_DETH, mad[MAD], rep[MAD];
	uint32_t peer_comm, peer_qpn = 0x000abc, srv_comm = 0;
	uint16_t port;
	bool ok = false, tx_seen = false;
	int owner;

	alarm(60);
	t_rand_seed((uint64_t)getpid() * 2654435761u);
	if (captured_req(req))
		t_bail("no REQ found in tests/vectors/rxe-rdmacm-rping.pcap (SRN_SOURCE?)");

	/* The listener first: it opens the devices, so an engine of this
	 * process takes 127.0.0.1:4791 unless another softrnic process has. */
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP))
		t_bail("rdma_create_id: %s", strerror(errno));
	inet_pton(AF_INET, "127.0.0.1", &la.sin_addr);
	for (int i = 0; i < 50; i++) {
		port = (uint16_t)t_listen_port(t_rand());
		la.sin_port = htons(port);
		if (rdma_bind_addr(listen_id, (struct sockaddr *)&la) == 0)
			break;
		port = 0;
	}
	if (!port || rdma_listen(listen_id, 4))
		t_bail("bind/listen on 127.0.0.1: %s", strerror(errno));
	{
		int probe = udp_bound(lo, ROCE_PORT);

		if (probe >= 0) {
			close(probe);
			t_skip("nobody holds 127.0.0.1:4791 (no softrnic engine took it)");
		}
	}
	/* On a shared machine another build's process may hold the port:
	 * only an engine of this build is known to hand over. */
	owner = roce_port_owner();
	if (owner > 0 && runs_our_verbs(owner) == 0)
		t_skip("127.0.0.1:4791 is held by pid %d, which runs another libibverbs", owner);
	printf("# 127.0.0.1:4791 is held by pid %d%s\n", owner,
	       owner == (int)getpid() ? " (this process)" : "");
	for (int x = 2; x < 40 && p.rx < 0; x++) {
		uint8_t ip[4] = { 127, 0, 0, (uint8_t)x };

		p.rx = udp_bound(ip, ROCE_PORT);
		if (p.rx >= 0)
			memcpy(p.ip, ip, 4);
	}
	if (p.rx < 0)
		t_skip("cannot bind any 127.0.0.x:4791 for the fake kernel peer");
	p.tx = udp_bound(p.ip, 0);
	{
		struct sockaddr_in a;
		socklen_t al = sizeof(a);

		if (p.tx < 0 || getsockname(p.tx, (struct sockaddr *)&a, &al))
			t_bail("peer tx socket: %s", strerror(errno));
		p.tx_port = ntohs(a.sin_port);
	}
	memcpy(p.hdr, req, BTH_DETH);
	p.psn = t_rand() & 0xffffff;
	printf("# listener 127.0.0.1:%u, kernel-like peer %u.%u.%u.%u (tx port %u, GSI 4791)\n",
	       port, p.ip[0], p.ip[1], p.ip[2], p.ip[3], p.tx_port);

	/* Patch the captured REQ: ids, service id, GIDs, IP CM header. */
	peer_comm = t_rand() | 1;
	put32(rq + M + 0, peer_comm);
	rq[M + 14] = (uint8_t)(port >> 8), rq[M + 15] = (uint8_t)port; /* service id */
	rq[M + 32] = (uint8_t)(peer_qpn >> 16), rq[M + 33] = (uint8_t)(peer_qpn >> 8);
	rq[M + 34] = (uint8_t)peer_qpn;
	memcpy(rq + M + 52 + 4 + 12, p.ip, 4);  /* primary local GID ::ffff:peer */
	memcpy(rq + M + 52 + 20 + 12, lo, 4);   /* primary remote GID ::ffff:127.0.0.1 */
	memcpy(rq + M + 140 + 4 + 12, p.ip, 4); /* IP CM header: source address */
	memcpy(rq + M + 140 + 20 + 12, lo, 4);  /* destination address */
	memset(rq + M + 140 + 36, 0, 56);
	memcpy(rq + M + 140 + 36, peer_pdata, sizeof(peer_pdata));

	T_OK(peer_send(&p, rq) == 0, "peer sends the captured-style REQ to 127.0.0.1:4791");
	if (!expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, &ev) && owner != (int)getpid() &&
	    roce_port_owner() != owner)
		/* another test's process held the port and exited meanwhile:
		 * the port moved to another engine (README), maybe not ours */
		t_skip("the owner of 127.0.0.1:4791, pid %d, went away during the test", owner);
	T_OK(ev != NULL, "listener gets CONNECT_REQUEST through the engine that owns 4791");
	if (!ev)
		goto out;
	conn = ev->id;
	T_OK(ev->param.conn.private_data &&
	     !memcmp(ev->param.conn.private_data, peer_pdata, sizeof(peer_pdata)),
	     "the peer's private data arrives");
	T_OK(ev->param.conn.qp_num == peer_qpn, "the peer's QPN arrives (0x%x)",
	     ev->param.conn.qp_num);
	rdma_ack_cm_event(ev);
	{
		struct ibv_qp_init_attr qa = {
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
				 .max_recv_sge = 1 },
			.qp_type = IBV_QPT_RC,
		};
		struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
					      .rnr_retry_count = 7 };

		T_OK(rdma_create_qp(conn, NULL, &qa) == 0, "QP for the passive id");
		T_OK(rdma_accept(conn, &cp) == 0, "rdma_accept");
	}
	{
		bool icrc_ok = false;

		ok = peer_recv(&p, 0x0013, rep, 5000, &icrc_ok, &tx_seen) == 0;
		T_OK(ok, "the REP reaches the peer at its port 4791");
		if (!ok)
			goto out;
		T_OK(icrc_ok, "the REP's ICRC is right (IPv4 ID 0, addresses as received)");
		T_OK(!tx_seen, "nothing was sent to the peer's source port");
		srv_comm = get32(rep + M + 0);
		T_OK(get32(rep + M + 4) == peer_comm, "REP names the peer's comm id");
		T_OK(conn->qp && get24(rep + M + 12) == conn->qp->qp_num,
		     "REP carries the listener's QPN");
	}
	/* RTU: a MAD that names the listener's comm id, routed by it. */
	mad_init(mad, rq, 0x0014, 0);
	memcpy(mad + 8, rq + 8, 8);                      /* REQ's transaction */
	put32(mad + M + 0, peer_comm);
	put32(mad + M + 4, srv_comm);
	T_OK(peer_send(&p, mad) == 0, "peer sends RTU");
	T_OK(expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL), "listener sees ESTABLISHED");

	/* DREQ from the peer -> DISCONNECTED here, DREP there. */
	mad_init(mad, rq, 0x0015, t_rand64());
	put32(mad + M + 0, peer_comm);
	put32(mad + M + 4, srv_comm);
	mad[M + 8] = (uint8_t)(conn->qp->qp_num >> 16);
	mad[M + 9] = (uint8_t)(conn->qp->qp_num >> 8);
	mad[M + 10] = (uint8_t)conn->qp->qp_num;
	T_OK(peer_send(&p, mad) == 0, "peer sends DREQ");
	T_OK(expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000, NULL), "listener sees DISCONNECTED");
	{
		bool icrc_ok = false;

		ok = peer_recv(&p, 0x0016, rep, 5000, &icrc_ok, &tx_seen) == 0;
		T_OK(ok && icrc_ok, "the DREP reaches the peer's 4791 with a valid ICRC");
		T_OK(ok && get32(rep + M + 0) == srv_comm && get32(rep + M + 4) == peer_comm,
		     "DREP names both comm ids");
	}
	/* A REQ for a port nobody listens on: some agent of this host
	 * answers the REJ Linux would (invalid service id, reason 8). */
	{
		uint32_t lost_comm = t_rand() | 1;
		uint16_t none = (uint16_t)(port ^ 0x4000);

		put32(rq + M + 0, lost_comm);
		rq[M + 14] = (uint8_t)(none >> 8), rq[M + 15] = (uint8_t)none;
		T_OK(peer_send(&p, rq) == 0, "peer sends a REQ for port %u (no listener)", none);
		ok = peer_recv(&p, 0x0012, rep, 5000, NULL, NULL) == 0;
		T_OK(ok && get32(rep + M + 4) == lost_comm &&
		     (rep[M + 10] << 8 | rep[M + 11]) == 8,
		     "a REJ comes back: invalid service id (8), naming the peer's comm id");
	}
	/* SIDR (RDMA_PS_UDP): a SIDR_REQ finds the UD listener through the
	 * engine, the SIDR_REP comes back to the peer's 4791. */
	{
		struct rdma_cm_id *ul = NULL, *uc;
		struct sockaddr_in ua = la;
		uint32_t req_id = t_rand() | 1;
		uint16_t uport = 0;

		T_OK(rdma_create_id(ch, &ul, NULL, RDMA_PS_UDP) == 0, "UD listener id");
		for (int i = 0; ul && i < 50 && !uport; i++) {
			uport = (uint16_t)t_listen_port(t_rand());
			ua.sin_port = htons(uport);
			if (rdma_bind_addr(ul, (struct sockaddr *)&ua))
				uport = 0;
		}
		T_OK(uport && rdma_listen(ul, 4) == 0, "UD listener on 127.0.0.1:%u", uport);
		mad_init(mad, rq, 0x0017, t_rand64());
		put32(mad + M + 0, req_id);
		mad[M + 4] = mad[M + 5] = 0xff;                      /* P_Key */
		/* service id (RDMA_PS_UDP 0x0111 << 16) | port: bytes 8..15 */
		mad[M + 12] = 0x01, mad[M + 13] = 0x11;
		mad[M + 14] = (uint8_t)(uport >> 8), mad[M + 15] = (uint8_t)uport;
		memcpy(mad + M + 16, rq + M + 140, 36);              /* the IP CM header */
		T_OK(peer_send(&p, mad) == 0, "peer sends SIDR_REQ");
		ev = NULL;
		T_OK(expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, &ev),
		     "UD listener gets CONNECT_REQUEST");
		if (ev) {
			struct ibv_qp_init_attr qa = {
				.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1,
					 .max_recv_sge = 1 },
				.qp_type = IBV_QPT_UD,
			};
			struct rdma_conn_param cp = { 0 };
			bool icrc_ok = false;

			uc = ev->id;
			rdma_ack_cm_event(ev);
			T_OK(rdma_create_qp(uc, NULL, &qa) == 0 && rdma_accept(uc, &cp) == 0,
			     "UD QP and rdma_accept");
			ok = peer_recv(&p, 0x0018, rep, 5000, &icrc_ok, NULL) == 0;
			T_OK(ok && icrc_ok && get32(rep + M + 0) == req_id && rep[M + 4] == 0 &&
			     uc->qp && get24(rep + M + 8) == uc->qp->qp_num &&
			     get32(rep + M + 20) == RDMA_UDP_QKEY,
			     "SIDR_REP at the peer's 4791: its request id, status 0, the QPN, "
			     "Q_Key 0x%x, valid ICRC", RDMA_UDP_QKEY);
			if (uc->qp)
				rdma_destroy_qp(uc);
			rdma_destroy_id(uc);
		}
		if (ul)
			rdma_destroy_id(ul);
	}
out:
	if (conn) {
		if (conn->qp)
			rdma_destroy_qp(conn);
		rdma_destroy_id(conn);
	}
	rdma_destroy_id(listen_id);
	rdma_destroy_event_channel(ch);
	close(p.tx);
	close(p.rx);
	/* Another process's engine held the port and went away meanwhile:
	 * nobody took 4791 over (engines keep the port they bound), so what
	 * failed after that says nothing about the hand-over. */
	if (t_fails && owner != (int)getpid() && roce_port_owner() != owner)
		t_skip("the process holding 127.0.0.1:4791 (pid %d) left during the test", owner);
	return t_summary();
}
