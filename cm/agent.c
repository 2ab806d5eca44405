/* The process's CM agent: a GSI socket per IP family, both on one port
 * number (the one the directory names), and one background thread that
 * receives MADs and fires the protocol timers.  It blocks in poll() when
 * idle; an eventfd wakes it when a new deadline is armed. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm/cm.h"
#include "net/thread.h"
#include "net/settings.h"

static pthread_mutex_t agent_mutex = PTHREAD_MUTEX_INITIALIZER;
static int gsi_fd = -1, wake_fd = -1;
static int gsi6_fd = -1;             /* IPv6, same port; -1: no IPv6 */
static int probe_fd = -1;            /* cm/peer_probe.c; -1: no probes */
static int probe6_fd = -1;
static uint16_t gsi_port;
static int gsi_slot = -1;            /* our directory slot */
static uint32_t gsi_psn;             /* UD PSN of our GSI "QP" */
static pid_t agent_pid;
int cm_debug_on;

/* Up to 64 MADs waiting on fd, each to the protocol. */
static void drain_mads(int fd)
{
	for (int i = 0; fd >= 0 && i < 64; i++) {
		uint8_t mad[WIRE_MAD_LEN], to_ip[16];
		struct cm_peer from;
		char as[64];
		int r = cm_gsi_recv(fd, mad, &from, to_ip);

		if (r < 0)
			break;
		if (r == 0)
			continue;
		cm_dbg("rx %s from %s:%u\n", wire_cm_attr_name(
			       (uint16_t)(mad[16] << 8 | mad[17])) ?: "?",
		       cm_ip_str(from.ip, from.scope, as), from.port);
		pthread_mutex_lock(&cm_lock);
		cm_conn_mad_in(mad, &from, to_ip);
		pthread_mutex_unlock(&cm_lock);
	}
}

/* Up to 64 ICMP errors from probe socket fd. */
static void drain_probe_errors(int fd)
{
	for (int i = 0; fd >= 0 && i < 64; i++) {
		struct cm_peer to;
		int r = cm_gsi_recv_err(fd, &to);

		if (r < 0)
			break;
		if (r == 0)
			continue;
		pthread_mutex_lock(&cm_lock);
		cm_peer_unreachable(&to, r);
		pthread_mutex_unlock(&cm_lock);
	}
}

static void *agent_main(void *arg)
{
	(void)arg;
	for (;;) {
		/* the probe sockets wake us with POLLERR (asked or not); a
		 * negative fd is ignored by poll */
		struct pollfd p[5] = { { gsi_fd, POLLIN, 0 }, { wake_fd, POLLIN, 0 },
				       { gsi6_fd, POLLIN, 0 }, { probe_fd, 0, 0 },
				       { probe6_fd, 0, 0 } };
		int timeout;

		/* MADs first, timers after: a peer's last answer (say a REJ
		 * just before it exited) must win over noticing its death. */
		drain_mads(gsi_fd);
		drain_mads(gsi6_fd);
		drain_probe_errors(probe_fd);
		drain_probe_errors(probe6_fd);
		pthread_mutex_lock(&cm_lock);
		timeout = cm_conn_timers(cm_now_ms());
		pthread_mutex_unlock(&cm_lock);
		if (poll(p, 5, timeout) < 0 && errno != EINTR)
			continue;
		if (p[1].revents & POLLIN) {
			uint64_t v;

			if (read(wake_fd, &v, sizeof(v)) < 0)
				(void)0; /* spurious: nothing to drain */
		}
	}
	return NULL;
}

/* The GSI sockets: IPv4 on an ephemeral port and IPv6 on the same number
 * (peers know one port per agent).  A number IPv6 has taken already is
 * given back and another tried; after a few tries the agent has no IPv6. */
static int open_gsi(void)
{
	for (int t = 0; t < 16; t++) {
		uint16_t port = 0, p6;
		int fd = cm_gsi_open(AF_INET, &port), fd6;

		if (fd < 0)
			return -fd;
		p6 = port;
		fd6 = cm_gsi_open(AF_INET6, &p6);
		if (fd6 >= 0 || fd6 == -EAFNOSUPPORT || t == 15) {
			if (fd6 < 0)
				cm_dbg("no IPv6 GSI socket (%s)\n", strerror(-fd6));
			gsi_fd = fd;
			gsi6_fd = fd6 >= 0 ? fd6 : -1;
			gsi_port = port;
			return 0;
		}
		close(fd);
	}
	return EADDRINUSE;
}

int cm_agent_start(void)
{
	pthread_attr_t attr;
	pthread_t t;
	int err = 0;

	pthread_mutex_lock(&agent_mutex);
	/* After fork the child has no agent thread: start a fresh one. */
	if (gsi_fd >= 0 && agent_pid == getpid())
		goto out;
	cm_debug_on = srn_log_debug();
	err = open_gsi();
	if (err)
		goto out;
	wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (wake_fd < 0) {
		err = errno;
		close(gsi_fd);
		if (gsi6_fd >= 0)
			close(gsi6_fd);
		gsi_fd = gsi6_fd = -1;
		goto out;
	}
	/* (a child's copy of its parent's probe sockets is the parent's) */
	if (probe_fd >= 0)
		close(probe_fd);
	if (probe6_fd >= 0)
		close(probe6_fd);
	probe_fd = cm_probe_open(AF_INET);
	probe6_fd = cm_probe_open(AF_INET6);
	if (probe_fd < 0)
		cm_dbg("no probe socket (%s): a peer on another host that dies goes unnoticed "
		       "until its QP's retries\n", strerror(-probe_fd));
	probe_fd = probe_fd < 0 ? -1 : probe_fd;
	probe6_fd = probe6_fd < 0 ? -1 : probe6_fd;
	agent_pid = getpid();
	if (getrandom(&gsi_psn, sizeof(gsi_psn), 0) != sizeof(gsi_psn))
		gsi_psn = (uint32_t)getpid();
	{
		int slot = cm_dir_agent_register(gsi_port) ? -1 :
			   cm_dir_agent_slot(gsi_port);

		gsi_slot = slot >= 0 ? slot : -1;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = net_thread_start(&t, &attr, agent_main, NULL);
	pthread_attr_destroy(&attr);
	if (err) {
		int *fds[] = { &gsi_fd, &gsi6_fd, &wake_fd, &probe_fd, &probe6_fd };

		for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
			if (*fds[i] >= 0)
				close(*fds[i]);
			*fds[i] = -1;
		}
	}
out:
	pthread_mutex_unlock(&agent_mutex);
	return err;
}

uint16_t cm_agent_port(void)
{
	return gsi_port;
}

int cm_agent_slot(void)
{
	return gsi_slot;
}

void cm_agent_wake(void)
{
	uint64_t v = 1;

	if (wake_fd >= 0 && write(wake_fd, &v, sizeof(v)) < 0)
		(void)0; /* counter full: the thread is awake anyway */
}

int cm_mad_send(const struct cm_peer *peer, const uint8_t src_ip[16],
		const uint8_t mad[WIRE_MAD_LEN])
{
	int fd = cm_ip_is_v4(peer->ip) ? gsi_fd : gsi6_fd;
	char as[64];

	cm_dbg("tx %s to %s:%u\n", wire_cm_attr_name((uint16_t)(mad[16] << 8 | mad[17])) ?: "?",
	       cm_ip_str(peer->ip, peer->scope, as), peer->port);
	if (fd < 0)
		return -EAFNOSUPPORT;
	return cm_gsi_send(fd, gsi_port, src_ip, peer, gsi_psn++, mad);
}

int cm_probe_send(const struct cm_peer *peer)
{
	int fd = cm_ip_is_v4(peer->ip) ? probe_fd : probe6_fd;

	return fd >= 0 ? cm_gsi_probe(fd, peer) : -ENOTCONN;
}
