/* The process's CM agent: one GSI socket and one background thread that
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
static int probe_fd = -1;            /* cm/peer_probe.c; -1: no probes */
static uint16_t gsi_port;
static int gsi_slot = -1;            /* our directory slot */
static uint32_t gsi_psn;             /* UD PSN of our GSI "QP" */
static pid_t agent_pid;
int cm_debug_on;

static void *agent_main(void *arg)
{
	(void)arg;
	for (;;) {
		/* the probe socket wakes us with POLLERR (asked or not) */
		struct pollfd p[3] = { { gsi_fd, POLLIN, 0 }, { wake_fd, POLLIN, 0 },
				       { probe_fd, 0, 0 } };
		int timeout;

		/* MADs first, timers after: a peer's last answer (say a REJ
		 * just before it exited) must win over noticing its death. */
		for (int i = 0; i < 64; i++) {
			uint8_t mad[WIRE_MAD_LEN], to_ip[4];
			struct cm_peer from;
			int r = cm_gsi_recv(gsi_fd, mad, &from, to_ip);

			if (r < 0)
				break;
			if (r == 0)
				continue;
			cm_dbg("rx %s from %u.%u.%u.%u:%u\n", wire_cm_attr_name(
				       (uint16_t)(mad[16] << 8 | mad[17])) ?: "?",
			       from.ip[0], from.ip[1], from.ip[2], from.ip[3], from.port);
			pthread_mutex_lock(&cm_lock);
			cm_conn_mad_in(mad, &from, to_ip);
			pthread_mutex_unlock(&cm_lock);
		}
		for (int i = 0; i < 64; i++) {
			struct cm_peer to;
			int r = probe_fd >= 0 ? cm_gsi_recv_err(probe_fd, &to) : -EAGAIN;

			if (r < 0)
				break;
			if (r == 0)
				continue;
			pthread_mutex_lock(&cm_lock);
			cm_peer_unreachable(&to);
			pthread_mutex_unlock(&cm_lock);
		}
		pthread_mutex_lock(&cm_lock);
		timeout = cm_conn_timers(cm_now_ms());
		pthread_mutex_unlock(&cm_lock);
		if (poll(p, probe_fd >= 0 ? 3 : 2, timeout) < 0 && errno != EINTR)
			continue;
		if (p[1].revents & POLLIN) {
			uint64_t v;

			if (read(wake_fd, &v, sizeof(v)) < 0)
				(void)0; /* spurious: nothing to drain */
		}
	}
	return NULL;
}

int cm_agent_start(void)
{
	pthread_attr_t attr;
	pthread_t t;
	int err = 0, fd;

	pthread_mutex_lock(&agent_mutex);
	/* After fork the child has no agent thread: start a fresh one. */
	if (gsi_fd >= 0 && agent_pid == getpid())
		goto out;
	cm_debug_on = srn_log_debug();
	fd = cm_gsi_open(&gsi_port);
	if (fd < 0) {
		err = -fd;
		goto out;
	}
	wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (wake_fd < 0) {
		err = errno;
		close(fd);
		goto out;
	}
	gsi_fd = fd;
	/* (a child's copy of its parent's probe socket is the parent's) */
	if (probe_fd >= 0)
		close(probe_fd);
	probe_fd = cm_probe_open();
	if (probe_fd < 0)
		cm_dbg("no probe socket (%s): a peer on another host that dies goes unnoticed "
		       "until its QP's retries\n", strerror(-probe_fd));
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
		close(gsi_fd);
		close(wake_fd);
		if (probe_fd >= 0)
			close(probe_fd);
		gsi_fd = wake_fd = probe_fd = -1;
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

int cm_mad_send(const struct cm_peer *peer, const uint8_t src_ip[4],
		const uint8_t mad[WIRE_MAD_LEN])
{
	cm_dbg("tx %s to %u.%u.%u.%u:%u\n", wire_cm_attr_name((uint16_t)(mad[16] << 8 | mad[17])) ?: "?",
	       peer->ip[0], peer->ip[1], peer->ip[2], peer->ip[3], peer->port);
	return cm_gsi_send(gsi_fd, gsi_port, src_ip, peer, gsi_psn++, mad);
}

int cm_probe_send(const struct cm_peer *peer)
{
	return probe_fd >= 0 ? cm_gsi_probe(probe_fd, peer) : -ENOTCONN;
}
