/* transport/qp_forward: see qp_forward.h.
 *
 * A remote RoCE peer (another host, a kernel's Soft-RoCE, a NIC) always
 * sends to <our IP>:4791, whatever process owns the destination QP.  Every
 * engine of the address receives there, and the group's program
 * (net/steer.h) sends each datagram to the QP's owner; what reaches
 * another engine (a program not compiled yet, an engine that could not
 * join the group and took the port over when its holder went:
 * net/roce_port.h) is handed on here.  The packet goes through the
 * owner's shared-memory inbox with its original source and destination
 * (port 4791 included), so the owner checks its ICRC exactly as if the
 * wire had brought it.  Only what came to 4791 is handed on, and only to
 * the engine the registry names, so a packet moves at most once.  The
 * same for [IPv6]:4791, which has no group: its one holder (engine.h,
 * roce6) hands on everything for the other engines. */
#include "transport/qp_forward.h"

#include "net/mode.h"
#include "net/registry.h"
#include "net/shm_ring.h"
#include "transport/engine.h"
#include "transport/steer.h"

bool srn_qp_forward(struct srn_engine *eng, const struct net_udp_msg *m, uint32_t dqpn)
{
	struct net_shm_peer *peer;
	struct iovec iov = { m->buf, m->len };
	uint16_t port;
	int family, ret;

	bool v6 = m->from.family == AF_INET6 && eng->roce6.fd >= 0 &&
		  eng->udp.local.family == AF_INET;

	if (!(v6 || srn_engine_holds_roce_port(eng)) || m->to.port != SRN_ROCE_UDP_PORT)
		return false;
	/* our own port: a QP of ours just destroyed.  An IPv4 owner hears
	 * IPv6 too (its udp6 at the same port: engine.h). */
	if (net_registry_lookup(eng->reg, dqpn, &port, &family) != 0 ||
	    port == eng->udp.local.port || (family != m->from.family && !v6))
		return false;
	/* the group's program did not send it to its owner (net/steer.h) */
	if (!v6)
		srn_steer_misplaced(eng);
	if (!net_shm_allowed())
		return false;
	peer = net_shm_peer_get(eng->ctx->dev->ibdev.name, port);
	if (!peer)
		return false;
	ret = net_shm_send_to(peer, &m->from, m->to.ip, m->to.port, &iov, 1, 20 * 1000);
	if (ret < 0)
		return false;
	if (ret == 1) {
		/* the owner sleeps: its doorbell is a zero-length datagram */
		struct net_addr to = eng->udp.local;

		to.port = port;
		net_udp_send(&eng->udp, &to, NULL, 0);
	}
	atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_rx_forwarded], 1, memory_order_relaxed);
	return true;
}
