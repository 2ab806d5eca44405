/* softrnic qps [-d DEV]: the QPs of every process on this host, like
 * `rdma resource show qp`.  Read from each device's QPN registry
 * (net/registry.h), where every QP's owner publishes its state, type and
 * peer on each state change; slots of dead processes are skipped. */
#include "tools/cli.h"
#include "tools/util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/registry.h"

#define SHM_DIR "/dev/shm"
#define REG_PREFIX "softrnic-"
#define REG_SUFFIX "-v3"

static void qps_usage(FILE *out)
{
	fprintf(out, "usage: softrnic qps [-d DEV]\n"
		"Lists the QPs of every process on this host: pid, command, device, QPN,\n"
		"type, state, the peer's address and QPN, and the path the traffic takes:\n"
		"  same-host  through shared memory between two processes (docs/same-host.md)\n"
		"  udp-local  over UDP to a process of this host (SOFTRNIC_TRANSPORT=udp)\n"
		"  udp        over UDP to another host\n"
		"  -d DEV   only the QPs of device DEV\n");
}

static const char *state_name(unsigned s)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS",     [IBV_QPS_SQD] = "SQD",   [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	return s < sizeof(names) / sizeof(names[0]) && names[s] ? names[s] : "?";
}

static const char *type_name(unsigned t)
{
	switch (t) {
	case IBV_QPT_RC: return "RC";
	case IBV_QPT_UC: return "UC";
	case IBV_QPT_UD: return "UD";
	case IBV_QPT_XRC_SEND: return "XRCI"; /* XRC initiator */
	case IBV_QPT_XRC_RECV: return "XRCT"; /* XRC target */
	default: return "?";
	}
}

static const char *peer_addr(const struct net_reg_qpinfo *in, char out[INET6_ADDRSTRLEN])
{
	int family = in->dfamily == AF_INET6 ? AF_INET6 : AF_INET;

	if (in->dfamily != AF_INET && in->dfamily != AF_INET6)
		return "-";
	if (!inet_ntop(family, in->dip, out, INET6_ADDRSTRLEN))
		return "?";
	return out;
}

/* Same host if the peer QPN is a live QP of this registry connected back
 * to exactly this one; then in memory if both may be reached that way. */
static const char *path_name(struct net_registry *reg, uint32_t qpn,
			     const struct net_reg_qpinfo *in)
{
	struct net_reg_qpinfo peer;

	if (in->type == IBV_QPT_UD)
		return in->flags & NET_REG_QP_DIRECT ? "same-host" : "udp";
	if (in->state != IBV_QPS_RTR && in->state != IBV_QPS_RTS && in->state != IBV_QPS_SQD)
		return "-";
	if (net_registry_local_peer(reg, qpn, in, &peer))
		return "udp";
	return in->flags & peer.flags & NET_REG_QP_DIRECT ? "same-host" : "udp-local";
}

static int list_device(const char *dev, int *shown)
{
	struct net_registry *reg = net_registry_open(dev);

	if (!reg) {
		cli_err("qps: %s: %s", dev, strerror(errno));
		return -1;
	}
	for (uint32_t qpn = NET_REG_FIRST_QPN; qpn < NET_REG_SLOTS; qpn++) {
		struct net_reg_qpinfo in;
		char comm[32], ip[INET6_ADDRSTRLEN], dqpn[16];
		int pid = net_registry_live_owner(reg, qpn);

		if (!pid)
			continue;
		if (net_registry_qpinfo(reg, qpn, &in, NULL)) {
			/* just claimed, or being rewritten right now */
			memset(&in, 0, sizeof(in));
			in.type = 0xff;
			in.state = 0xff;
		}
		util_proc_comm(pid, comm);
		snprintf(dqpn, sizeof(dqpn), "%u", (unsigned)in.dqpn);
		printf("%-7d %-15s %-10s %-7u %-4s %-5s %-24s %-8s %s\n", pid, comm, dev,
		       (unsigned)qpn, type_name(in.type), state_name(in.state),
		       in.type == IBV_QPT_UD ? "-" : peer_addr(&in, ip),
		       in.type == IBV_QPT_UD || !in.dqpn ? "-" : dqpn, path_name(reg, qpn, &in));
		(*shown)++;
	}
	net_registry_close(reg);
	return 0;
}

/* The device of a registry file's name, or NULL. */
static const char *registry_device(const char *name, char *dev, size_t n)
{
	size_t len = strlen(name), pl = strlen(REG_PREFIX), sl = strlen(REG_SUFFIX);

	if (len <= pl + sl || strncmp(name, REG_PREFIX, pl) ||
	    strcmp(name + len - sl, REG_SUFFIX) || len - pl - sl >= n)
		return NULL;
	memcpy(dev, name + pl, len - pl - sl);
	dev[len - pl - sl] = '\0';
	return dev;
}

static int qps_run(int argc, char **argv)
{
	const char *only = NULL;
	struct dirent **ents;
	int n, shown = 0, failed = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-d") == 0 && i + 1 < argc) {
			only = argv[++i];
		} else {
			cli_err("qps: unknown option '%s'", argv[i]);
			qps_usage(stderr);
			return 2;
		}
	}
	n = scandir(SHM_DIR, &ents, NULL, alphasort);
	if (n < 0) {
		cli_err("qps: %s: %s", SHM_DIR, strerror(errno));
		return 1;
	}
	printf("%-7s %-15s %-10s %-7s %-4s %-5s %-24s %-8s %s\n", "PID", "COMMAND", "DEVICE",
	       "QPN", "TYPE", "STATE", "PEER", "PEER-QPN", "PATH");
	for (int i = 0; i < n; i++) {
		char dev[IBV_SYSFS_NAME_MAX];

		if (registry_device(ents[i]->d_name, dev, sizeof(dev)) &&
		    (!only || strcmp(only, dev) == 0) && list_device(dev, &shown))
			failed++;
		free(ents[i]);
	}
	free(ents);
	if (!shown)
		printf("(no QPs%s%s)\n", only ? " on " : "", only ? only : "");
	return failed ? 1 : 0;
}

const struct cli_cmd cli_qps = {
	.name = "qps",
	.summary = "list the QPs of every process (like rdma resource show qp)",
	.run = qps_run,
	.usage = qps_usage,
};
