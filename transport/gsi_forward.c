/* transport/gsi_forward: hand QP1 packets that reach this engine (the
 * host's RoCE port) to the CM agent they belong to (see gsi_forward.h).
 *
 * The directory is opened, read under a shared flock and closed for each
 * MAD: MADs are rare (a handful per connection), and keeping nothing open
 * means an engine that never sees one costs nothing. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "net/cm_dir.h"
#include "net/udp.h"
#include "transport/gsi_forward.h"
#include "transport/rc.h"
#include "wire/mad.h"

/* A read-only view of the directory, under a shared lock, as our network
 * namespace sees it. */
struct dir_view {
	const struct net_cmdir *d;
	int fd;
	uint32_t ns;
};

static bool dir_open(struct dir_view *v)
{
	struct stat st;
	void *m;

	v->fd = open(NET_CMDIR_PATH, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (v->fd < 0)
		return false; /* no rdma_cm process on this host yet */
	/* Anyone could have created the file: trust only its exact size. */
	if (fstat(v->fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (size_t)st.st_size != sizeof(struct net_cmdir))
		goto fail;
	m = mmap(NULL, sizeof(struct net_cmdir), PROT_READ, MAP_SHARED, v->fd, 0);
	if (m == MAP_FAILED)
		goto fail;
	v->d = m;
	while (flock(v->fd, LOCK_SH) < 0 && errno == EINTR)
		;
	v->ns = net_cmdir_netns();
	return true;
fail:
	close(v->fd);
	return false;
}

static void dir_close(struct dir_view *v)
{
	flock(v->fd, LOCK_UN);
	munmap((void *)v->d, sizeof(struct net_cmdir));
	close(v->fd);
}

/* The agent of the live listener on (ps, ip, port): an exact address wins
 * over the wildcard, as cm_dir_lookup decides for same-host connects. */
static uint16_t listener_agent(const struct dir_view *v, uint16_t ps, const uint8_t ip[16],
			       uint16_t port)
{
	const struct net_cmdir *d = v->d;
	uint16_t found = 0;

	for (int i = 0; i < NET_CMDIR_BINDS; i++) {
		const struct net_cmdir_bind *b = &d->binds[i];

		if (!b->owner || !b->listening || b->ps != ps || b->port != port ||
		    !net_cmdir_ip_takes(b->ip, b->afonly, ip) ||
		    !net_cmdir_same_ns(b->netns, v->ns) || !net_cmdir_owner_alive(b->owner, 0))
			continue;
		found = b->gsi_port;
		if (!memcmp(b->ip, ip, 16))
			break;
	}
	return found;
}

/* The agent whose slot the top bits of comm_id name, if it lives. */
static uint16_t comm_id_agent(const struct dir_view *v, uint32_t comm_id)
{
	const struct net_cmdir *d = v->d;
	uint32_t slot = comm_id >> NET_CMDIR_COMM_ID_SHIFT;

	if (!comm_id || slot >= NET_CMDIR_AGENTS || !d->agents[slot].owner ||
	    !net_cmdir_same_ns(d->agents[slot].netns, v->ns) ||
	    !net_cmdir_owner_alive(d->agents[slot].owner, 0))
		return 0;
	return d->agents[slot].gsi_port;
}

/* Any live agent: it answers a REQ nobody listens for with the REJ Linux
 * sends (invalid service id), instead of leaving the peer to time out. */
static uint16_t any_agent(const struct dir_view *v)
{
	const struct net_cmdir *d = v->d;

	for (int i = 0; i < NET_CMDIR_AGENTS; i++)
		if (d->agents[i].owner && d->agents[i].gsi_port &&
		    net_cmdir_same_ns(d->agents[i].netns, v->ns) &&
		    net_cmdir_owner_alive(d->agents[i].owner, 0))
			return d->agents[i].gsi_port;
	return 0;
}

/* A request (REQ, SIDR_REQ): the listener of its service id on the address
 * in the IP CM header, else anyone who can refuse it. */
static uint16_t request_agent(const struct dir_view *d, uint64_t sid, const uint8_t *pdata,
			      size_t len)
{
	struct wire_cma_hdr h;
	uint8_t dst[16];
	uint16_t port = 0;

	if (wire_cm_service_id_is_cma(sid) && !wire_cma_hdr_decode(pdata, len, &h)) {
		/* the directory's form: IPv4 as ::ffff:a.b.c.d */
		memcpy(dst, h.dst, 16);
		if (h.ip_version == 4) {
			memcpy(dst, net_cmdir_v4_prefix, 12);
			memcpy(dst + 12, &h.dst[12], 4);
		}
		port = listener_agent(d, wire_cm_service_id_ps(sid), dst,
				      wire_cm_service_id_port(sid));
	}
	return port ? port : any_agent(d);
}

/* Which agent port the MAD m goes to; 0 = nobody. */
static uint16_t route(const struct dir_view *d, const struct wire_cm_msg *m)
{
	switch (m->hdr.attr_id) {
	case WIRE_CM_ATTR_REQ:
		return request_agent(d, m->req.service_id, m->req.private_data,
				     sizeof(m->req.private_data));
	case WIRE_CM_ATTR_SIDR_REQ:
		return request_agent(d, m->sidr_req.service_id, m->sidr_req.private_data,
				     sizeof(m->sidr_req.private_data));
	case WIRE_CM_ATTR_REP: return comm_id_agent(d, m->rep.remote_comm_id);
	case WIRE_CM_ATTR_RTU: return comm_id_agent(d, m->rtu.remote_comm_id);
	case WIRE_CM_ATTR_REJ: return comm_id_agent(d, m->rej.remote_comm_id);
	case WIRE_CM_ATTR_MRA: return comm_id_agent(d, m->mra.remote_comm_id);
	case WIRE_CM_ATTR_DREQ: return comm_id_agent(d, m->dreq.remote_comm_id);
	case WIRE_CM_ATTR_DREP: return comm_id_agent(d, m->drep.remote_comm_id);
	case WIRE_CM_ATTR_SIDR_REP: return comm_id_agent(d, m->sidr_rep.request_id);
	default: return 0; /* LAP/APR: no path migration on RoCE */
	}
}

/* Each MAD costs a directory read (and /proc reads for liveness): a flood
 * of QP1 packets from the network must not starve the data path, so at
 * most GSI_FWD_PER_SEC are handed on per second; the CM retransmits. */
enum { GSI_FWD_PER_SEC = 2000 };

static bool within_rate(void)
{
	static _Atomic uint64_t window_start, count;
	uint64_t now = srn_now_ns();

	if (now - atomic_load(&window_start) > 1000000000ull) {
		atomic_store(&window_start, now);
		atomic_store(&count, 0);
	}
	return atomic_fetch_add(&count, 1) < GSI_FWD_PER_SEC;
}

/* "a.b.c.d" or "x::y" of a, for the debug log. */
static const char *addr_str(const struct net_addr *a, char buf[INET6_ADDRSTRLEN])
{
	return inet_ntop(a->family, a->ip, buf, INET6_ADDRSTRLEN) ? buf : "?";
}

/* A REQ that no CM agent of our network namespace can take (no process
 * here uses rdma_cm): refuse it at once, as Linux's CM does for a service
 * id nobody listens on, instead of leaving the peer to time out. */
static void refuse_req(struct srn_engine *eng, const struct wire_cm_msg *req,
		       const struct net_udp_msg *m)
{
	static _Atomic uint32_t psn;
	struct net_udp *u = srn_engine_sock(eng, m->from.family);
	struct wire_cm_msg rej;
	struct wire_l3 l3 = { .family = m->from.family };
	struct net_addr to = m->from;
	uint8_t mad[WIRE_MAD_LEN], hdr[WIRE_MAX_HDR_LEN], icrc[4];
	char as[INET6_ADDRSTRLEN];
	struct iovec iov[3];
	int hlen;

	if (!u)
		return;
	memset(&rej, 0, sizeof(rej));
	wire_cm_hdr_init(&rej.hdr, WIRE_CM_ATTR_REJ, req->hdr.tid);
	rej.rej.remote_comm_id = req->req.local_comm_id;
	rej.rej.message_rejected = WIRE_CM_MSG_REQ;
	rej.rej.reason = WIRE_CM_REJ_INVALID_SERVICE_ID;
	/* a peer on another host listens at 4791; one of ours (another
	 * namespace's agent is another host too) at the port it sent from */
	if (!net_addr_is_local(m->from.family, m->from.ip))
		to.port = SRN_ROCE_UDP_PORT;
	l3.sport = u->local.port;
	memcpy(l3.src, u->local.ip, 16);
	memcpy(l3.dst, to.ip, 16);
	l3.dport = to.port;
	if (wire_cm_encode(&rej, mad) != WIRE_MAD_LEN ||
	    (hlen = wire_gsi_frame(&l3, atomic_fetch_add(&psn, 1), mad, hdr, icrc)) < 0)
		return;
	iov[0] = (struct iovec){ hdr, (size_t)hlen };
	iov[1] = (struct iovec){ mad, WIRE_MAD_LEN };
	iov[2] = (struct iovec){ icrc, 4 };
	if (net_udp_send(u, &to, iov, 3) < 0)
		eng->cnt[SRN_CNT_tx_error]++;
	srn_dbg(eng, "CM REQ from %s:%u: no rdma_cm process here, REJ sent",
		addr_str(&m->from, as), m->from.port);
}

void srn_gsi_forward(struct srn_engine *eng, const struct wire_pkt *pkt,
		     const struct net_udp_msg *m)
{
	struct wire_cm_msg msg;
	struct gsi_fwd_hdr fh;
	struct dir_view v;
	struct net_addr to = eng->udp.local;
	uint8_t hdr[GSI_FWD_HDR_LEN];
	char as[INET6_ADDRSTRLEN];
	struct iovec iov[2];
	uint16_t port = 0;

	/* A MAD is a UD SEND_ONLY of exactly 256 bytes with QP1's Q_Key,
	 * nothing else is worth an agent's time. */
	if ((m->from.family != AF_INET && m->from.family != AF_INET6) ||
	    pkt->opcode != (WIRE_UD | WIRE_SEND_ONLY) || pkt->qkey != WIRE_GSI_QKEY ||
	    pkt->payload_len != WIRE_MAD_LEN ||
	    wire_cm_decode(pkt->payload, WIRE_MAD_LEN, &msg)) {
		eng->cnt[SRN_CNT_rx_drop_no_qp]++;
		srn_dbg(eng, "drop: not a CM MAD for QP1");
		return;
	}
	if (!within_rate()) {
		eng->cnt[SRN_CNT_rx_drop_no_qp]++;
		srn_dbg(eng, "drop: CM MAD over the rate limit");
		return;
	}
	if (dir_open(&v)) {
		port = route(&v, &msg);
		dir_close(&v);
	}
	if (!port && msg.hdr.attr_id == WIRE_CM_ATTR_REQ) {
		refuse_req(eng, &msg, m);
		return;
	}
	if (!port) {
		eng->cnt[SRN_CNT_rx_drop_no_qp]++;
		srn_dbg(eng, "drop: CM MAD 0x%x for no agent of this host", msg.hdr.attr_id);
		return;
	}
	memset(&fh, 0, sizeof(fh));
	fh.ip_version = m->from.family == AF_INET6 ? 6 : 4;
	memcpy(fh.src_ip, m->from.ip, 16);
	if (m->to.family == m->from.family)
		memcpy(fh.dst_ip, m->to.ip, 16);
	else if (srn_engine_local(eng, m->from.family))
		memcpy(fh.dst_ip, srn_engine_local(eng, m->from.family)->ip, 16);
	fh.src_port = m->from.port;
	fh.dst_port = m->to.port ? m->to.port : eng->udp.local.port;
	gsi_fwd_hdr_encode(hdr, &fh);
	/* The agent has a socket of each family on its port, taking any
	 * local address: our main socket's is one, whatever the MAD's. */
	to.port = port;
	iov[0] = (struct iovec){ hdr, sizeof(hdr) };
	iov[1] = (struct iovec){ m->buf, m->len };
	if (net_udp_send(&eng->udp, &to, iov, 2) < 0)
		eng->cnt[SRN_CNT_tx_error]++;
	srn_dbg(eng, "CM MAD 0x%x from %s:%u handed to agent port %u",
		msg.hdr.attr_id, addr_str(&m->from, as), fh.src_port, port);
}
