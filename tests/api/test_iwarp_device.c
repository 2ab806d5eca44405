/* The iWARP device SOFTRNIC_DEVICES=IFNAME:iwarp makes, beside a RoCE
 * device on the same interface: its name, node and transport type, the
 * siw-style GID (the MAC, or a made-up locally administered one on lo,
 * then zeros) and node GUID (that MAC as EUI-64), the capabilities iWARP
 * does not have (atomics, MWs, multicast, AHs, UC/UD), renaming, and QPs
 * refused until the TCP data path exists.  The RoCE device next to it
 * must be unchanged. */
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_util.h"

static struct ibv_device *find(struct ibv_device **l, const char *name)
{
	for (int i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			return l[i];
	return NULL;
}

/* An interface other than lo that is up with an IPv4 address and has a
 * MAC in sysfs (its iWARP device shows that MAC), or "" if none. */
static void pick_ether(char name[IF_NAMESIZE], uint8_t mac[6])
{
	struct ifaddrs *ifa_list = NULL;

	name[0] = '\0';
	if (getifaddrs(&ifa_list))
		return;
	for (struct ifaddrs *ifa = ifa_list; ifa; ifa = ifa->ifa_next) {
		char path[96];
		unsigned int m[6];
		FILE *f;
		int n = 0;

		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET ||
		    (ifa->ifa_flags & IFF_LOOPBACK) || !(ifa->ifa_flags & IFF_UP) ||
		    strchr(ifa->ifa_name, ':') || strlen(ifa->ifa_name) >= IF_NAMESIZE)
			continue;
		snprintf(path, sizeof(path), "/sys/class/net/%s/address", ifa->ifa_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		n = fscanf(f, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]);
		fclose(f);
		if (n != 6 || !(m[0] | m[1] | m[2] | m[3] | m[4] | m[5]))
			continue;
		for (int i = 0; i < 6; i++)
			mac[i] = (uint8_t)m[i];
		snprintf(name, IF_NAMESIZE, "%s", ifa->ifa_name);
		break;
	}
	freeifaddrs(ifa_list);
}

/* GID bytes 0-5 the MAC, the rest zero; node GUID its EUI-64. */
static void check_gid_guid(struct ibv_context *ctx, const char *what, const uint8_t *want_mac)
{
	struct ibv_device_attr a;
	union ibv_gid g, g1;
	uint8_t guid[8];
	static const uint8_t zero[10];

	T_OK(ibv_query_gid(ctx, 1, 0, &g) == 0, "%s: GID[0] readable", what);
	T_OK(memcmp(g.raw + 6, zero, 10) == 0, "%s: GID bytes 6-15 are zero", what);
	if (want_mac)
		T_OK(memcmp(g.raw, want_mac, 6) == 0, "%s: GID holds the interface MAC", what);
	else
		T_OK((g.raw[0] & 0x03) == 0x02, "%s: made-up MAC is unicast, locally administered",
		     what);
	errno = 0;
	T_OK(ibv_query_gid(ctx, 1, 1, &g1) == -1 && errno == EINVAL,
	     "%s: GID[1] is past the one-entry table", what);
	T_OK(ibv_query_device(ctx, &a) == 0, "%s: query_device", what);
	memcpy(guid, &a.node_guid, 8);
	T_OK(guid[0] == (g.raw[0] ^ 0x02) && guid[1] == g.raw[1] && guid[2] == g.raw[2] &&
	     guid[3] == 0xff && guid[4] == 0xfe && guid[5] == g.raw[3] && guid[6] == g.raw[4] &&
	     guid[7] == g.raw[5], "%s: node GUID is the GID's MAC as EUI-64", what);
}

static void check_iwarp(struct ibv_device *d, const char *what)
{
	struct ibv_context *ctx;
	struct ibv_device_attr_ex ax;
	struct ibv_port_attr pa;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	static char buf[4096];
	enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };

	T_OK(d->node_type == IBV_NODE_RNIC, "%s: node type RNIC (%d)", what, d->node_type);
	T_OK(d->transport_type == IBV_TRANSPORT_IWARP, "%s: transport iWARP", what);
	T_OK(!strcmp(ibv_node_type_str(d->node_type), "iWARP NIC"), "%s: ibv_node_type_str", what);
	ctx = ibv_open_device(d);
	T_ASSERT(ctx, "%s: opens", what);
	T_OK(ibv_query_device_ex(ctx, NULL, &ax) == 0, "%s: query_device_ex", what);
	T_OK(ax.orig_attr.atomic_cap == IBV_ATOMIC_NONE, "%s: no atomics", what);
	T_OK(!(ax.orig_attr.device_cap_flags &
	       (IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_RC_RNR_NAK_GEN)),
	     "%s: no MW, no RNR NAK claimed (0x%x)", what, ax.orig_attr.device_cap_flags);
	T_OK(ax.orig_attr.max_mw == 0 && ax.orig_attr.max_ah == 0 &&
	     ax.orig_attr.max_mcast_grp == 0, "%s: no MWs, AHs, multicast", what);
	T_OK(ax.odp_caps.general_caps == 0, "%s: no ODP claimed", what);
	T_OK(ibv_query_port(ctx, 1, &pa) == 0, "%s: query_port", what);
	T_OK(pa.link_layer == IBV_LINK_LAYER_ETHERNET && pa.gid_tbl_len == 1 &&
	     pa.port_cap_flags == IBV_PORT_CM_SUP && pa.state == IBV_PORT_ACTIVE,
	     "%s: Ethernet, one GID, CM only, active", what);

	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE |
			     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) : NULL;
	T_OK(pd && cq && mr, "%s: PD, CQ and MR", what);
	for (size_t i = 0; pd && cq && i < sizeof(types) / sizeof(types[0]); i++) {
		struct ibv_qp_init_attr qa = {
			.send_cq = cq, .recv_cq = cq, .qp_type = types[i],
			.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};
		struct ibv_qp *qp;

		errno = 0;
		qp = ibv_create_qp(pd, &qa);
		if (types[i] == IBV_QPT_RC) /* siw's only type */
			T_OK(qp != NULL, "%s: RC QP created (%s)", what, strerror(errno));
		else
			T_OK(!qp && errno == EOPNOTSUPP,
			     "%s: QP type %d refused with EOPNOTSUPP (%s)", what, types[i],
			     strerror(errno));
		if (qp)
			ibv_destroy_qp(qp);
	}
	if (mr)
		ibv_dereg_mr(mr);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
}

int main(void)
{
	char spec[128], eth[IF_NAMESIZE], ethdev[IF_NAMESIZE + 8];
	uint8_t mac[6];
	struct ibv_device **l;
	struct ibv_device *d;
	struct ibv_context *ctx;
	struct ibv_port_attr pa;

	pick_ether(eth, mac);
	snprintf(spec, sizeof(spec), "lo:iwarp,lo,lo:iwarp=myiw%s%s%s", eth[0] ? "," : "", eth,
		 eth[0] ? ":iwarp" : "");
	setenv("SOFTRNIC_DEVICES", spec, 1);
	printf("SOFTRNIC_DEVICES=%s\n", spec);
	l = ibv_get_device_list(NULL);
	T_ASSERT(l, "device list");

	d = find(l, "srn_iw_lo");
	T_ASSERT(d, "lo:iwarp makes srn_iw_lo");
	check_iwarp(d, "srn_iw_lo");
	ctx = ibv_open_device(d);
	T_ASSERT(ctx, "srn_iw_lo opens");
	check_gid_guid(ctx, "srn_iw_lo", NULL);
	ibv_close_device(ctx);

	d = find(l, "myiw");
	T_OK(d && d->transport_type == IBV_TRANSPORT_IWARP, "lo:iwarp=myiw renames, still iWARP");

	if (eth[0]) {
		snprintf(ethdev, sizeof(ethdev), "srn_iw_%s", eth);
		d = find(l, ethdev);
		T_OK(d != NULL, "%s:iwarp makes %s", eth, ethdev);
		if (d && (ctx = ibv_open_device(d))) {
			check_gid_guid(ctx, ethdev, mac);
			ibv_close_device(ctx);
		}
	} else {
		printf("no interface with a MAC besides lo: MAC-in-GID check on lo only\n");
	}

	/* the RoCE device on the same interface is untouched */
	d = find(l, "srn_lo");
	T_ASSERT(d, "srn_lo listed too");
	T_OK(d->node_type == IBV_NODE_CA && d->transport_type == IBV_TRANSPORT_IB,
	     "srn_lo stays a CA with IB transport");
	ctx = ibv_open_device(d);
	T_ASSERT(ctx, "srn_lo opens");
	T_OK(ibv_query_port(ctx, 1, &pa) == 0 && pa.gid_tbl_len > 1 &&
	     (pa.port_cap_flags & IBV_PORT_IP_BASED_GIDS), "srn_lo keeps IP-based GIDs");
	ibv_close_device(ctx);
	ibv_free_device_list(l);
	return t_summary();
}
