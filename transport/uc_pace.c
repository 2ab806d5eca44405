/* transport/uc_pace: flow control for UC senders, which get no ACKs.  A
 * burst larger than the receiving socket's buffer loses whole messages
 * (on loopback, silently).  So a UC QP sends at most UC_PACE_BYTES per
 * UC_PACE_NS; when the peer's socket is on this host, the budget is
 * renewed at once as long as that socket's receive queue (read from
 * /proc/net/udp, which lists every socket of the network namespace) is
 * less than half full, and the sender waits a little while it is not. */
#include <stdio.h>
#include <string.h>

#include "transport/rc.h"

enum { UC_RECHECK_NS = 30 * 1000 };

/* Bytes queued on the local UDP socket bound to (ip, port), or -1 when
 * it cannot be told. */
static long local_rx_queue(const struct net_addr *to)
{
	const char *path = to->family == AF_INET ? "/proc/net/udp" : "/proc/net/udp6";
	char line[512];
	long found = -1;
	FILE *f = fopen(path, "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char addr[40];
		unsigned int port;
		unsigned long txq, rxq;

		if (sscanf(line, " %*d: %39[0-9A-Fa-f]:%x %*s %*x %lx:%lx", addr, &port,
			   &txq, &rxq) != 4)
			continue;
		if (port != to->port)
			continue;
		if (to->family == AF_INET) {
			unsigned int a;
			uint8_t ip[4];

			/* the kernel prints the address as a host-order u32
			 * of its network-order bytes */
			if (sscanf(addr, "%x", &a) != 1)
				continue;
			memcpy(ip, &a, 4);
			if (memcmp(ip, to->ip, 4) && a != 0)
				continue;
		}
		found = (long)rxq;
		break;
	}
	fclose(f);
	return found;
}

bool uc_paced(struct srn_rc_state *rc)
{
	uint64_t now = srn_now_ns();

	if (rc->uc_burst_bytes < UC_PACE_BYTES)
		return false;
	/* budget spent: a peer on this host says how full it is */
	if (net_addr_is_local(rc->peer.family, rc->peer.ip)) {
		long q = local_rx_queue(&rc->peer);

		if (q >= 0 && q < rc->eng->udp.rcvbuf / 2) {
			rc->uc_burst_start = now;
			rc->uc_burst_bytes = 0;
			return false;
		}
		if (q >= 0) {
			rc->resume_at = now + UC_RECHECK_NS;
			srn_engine_arm(rc->eng, rc->resume_at);
			return true;
		}
	}
	/* otherwise by time */
	if (now - rc->uc_burst_start >= UC_PACE_NS) {
		rc->uc_burst_start = now;
		rc->uc_burst_bytes = 0;
		return false;
	}
	rc->resume_at = rc->uc_burst_start + UC_PACE_NS;
	srn_engine_arm(rc->eng, rc->resume_at);
	return true;
}
