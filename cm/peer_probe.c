/* Noticing that a peer on another host died.  On Linux the kernel sends
 * the DREQ of a process that dies; here nobody is left to send it, so a
 * client that waits for the peer's next message (rping's client, with
 * nothing outstanding to time out) would wait for ever.  While a
 * connection to another host is established, the agent sends that host's
 * port 4791 an empty datagram every CM_PROBE_MS, one per host whatever
 * the number of connections: a softrnic engine there takes it for a
 * doorbell and ignores it, a kernel or hardware RoCE port drops it as too
 * short; a host where nobody holds 4791 answers ICMP "port unreachable",
 * which the agent reads from its probe socket's error queue
 * (cm_peer_unreachable: twice ends the connections; once ends the wait
 * for the DREP of a DREQ sent there, which nobody will send).  A REQ or
 * SIDR_REQ to another host is probed too: "port unreachable" (no RoCE
 * there) or "host unreachable" (no neighbour answers) ends it at once
 * with UNREACHABLE instead of after every retransmission.  A peer whose host
 * still runs another softrnic process is not noticed this way: its QP's
 * retries or the application's own timeout have to. */
#include <string.h>

#include "cm/conn.h"

enum { PROBE_HOSTS = 32 };

static struct {
	uint8_t ip[16];
	uint64_t next_ms;            /* 0 = free slot */
} hosts[PROBE_HOSTS];

/* The slot of ip, or a free (or the most overdue) one taken for it. */
static int host_slot(const uint8_t ip[16])
{
	int pick = 0;

	for (int i = 0; i < PROBE_HOSTS; i++) {
		if (hosts[i].next_ms && !memcmp(hosts[i].ip, ip, 16))
			return i;
		if (hosts[pick].next_ms && (!hosts[i].next_ms || hosts[i].next_ms < hosts[pick].next_ms))
			pick = i;
	}
	memcpy(hosts[pick].ip, ip, 16);
	hosts[pick].next_ms = 1; /* due now */
	return pick;
}

int cm_probe_timers(uint64_t now)
{
	int next = -1;

	for (struct cm_id *c = cm_ids; c; c = c->next) {
		int h, left;

		/* (a DREQ's host too: its answer ends the wait for a DREP; a
		 * request's: no RoCE port, or no host, there ends it now) */
		if (c->destroying || (c->state != CM_ESTABLISHED && c->state != CM_DREQ_SENT &&
				      c->state != CM_REQ_SENT && c->state != CM_SIDR_REQ_SENT) ||
		    c->peer_local || c->peer.port != CM_ROCE_PORT ||
		    (c->id.qp_type == IBV_QPT_UD && c->state != CM_SIDR_REQ_SENT))
			continue;
		h = host_slot(c->peer.ip);
		if (hosts[h].next_ms <= now) {
			struct cm_peer to = c->peer;

			cm_probe_send(&to);
			hosts[h].next_ms = now + CM_PROBE_MS;
		}
		left = (int)(hosts[h].next_ms - now);
		if (next < 0 || left < next)
			next = left;
	}
	return next;
}

void cm_probe_soon(const struct cm_peer *peer)
{
	if (peer->port == CM_ROCE_PORT)
		hosts[host_slot(peer->ip)].next_ms = 1;
}
