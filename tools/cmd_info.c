/* softrnic info [-d DEV] [-v]: what ibv_devinfo shows, through the public
 * verbs API, with GIDs as addresses (the numbers -g/-x options take). */
#include "tools/cli.h"
#include "tools/util.h"

#include <getopt.h>
#include <inttypes.h>
#include <net/if.h>
#include <string.h>

static void info_usage(FILE *out)
{
	fprintf(out, "usage: softrnic info [-d DEV] [-v]\n"
		"Shows device and port attributes and the GID table.\n"
		"  -d, --device DEV   only this device (default: all)\n"
		"  -v, --verbose      also limits, capability flags, port details\n");
}

static const char *mtu_str(enum ibv_mtu m)
{
	static const char *const s[] = { "?", "256", "512", "1024", "2048", "4096" };

	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? s[m] : "?";
}

static const char *state_str(enum ibv_port_state st)
{
	switch (st) {
	case IBV_PORT_DOWN: return "PORT_DOWN";
	case IBV_PORT_INIT: return "PORT_INIT";
	case IBV_PORT_ARMED: return "PORT_ARMED";
	case IBV_PORT_ACTIVE: return "PORT_ACTIVE";
	default: return "?";
	}
}

static void print_limits(const struct ibv_device_attr *a)
{
	printf("\tmax_mr_size:\t\t0x%" PRIx64 "\n", (uint64_t)a->max_mr_size);
	printf("\tpage_size_cap:\t\t0x%" PRIx64 "\n", (uint64_t)a->page_size_cap);
	printf("\tdevice_cap_flags:\t0x%08x\n", a->device_cap_flags);
	printf("\tatomic_cap:\t\t%s\n", a->atomic_cap == IBV_ATOMIC_HCA ? "ATOMIC_HCA" :
	       a->atomic_cap == IBV_ATOMIC_GLOB ? "ATOMIC_GLOB" : "ATOMIC_NONE");
	printf("\tmax_qp:\t\t\t%d\n\tmax_qp_wr:\t\t%d\n\tmax_sge:\t\t%d\n",
	       a->max_qp, a->max_qp_wr, a->max_sge);
	printf("\tmax_cq:\t\t\t%d\n\tmax_cqe:\t\t%d\n\tmax_mr:\t\t\t%d\n\tmax_pd:\t\t\t%d\n",
	       a->max_cq, a->max_cqe, a->max_mr, a->max_pd);
	printf("\tmax_qp_rd_atom:\t\t%d\n\tmax_qp_init_rd_atom:\t%d\n",
	       a->max_qp_rd_atom, a->max_qp_init_rd_atom);
	printf("\tmax_srq:\t\t%d\n\tmax_srq_wr:\t\t%d\n\tmax_srq_sge:\t\t%d\n",
	       a->max_srq, a->max_srq_wr, a->max_srq_sge);
	printf("\tmax_ah:\t\t\t%d\n\tmax_mcast_grp:\t\t%d\n\tmax_mcast_qp_attach:\t%d\n",
	       a->max_ah, a->max_mcast_grp, a->max_mcast_qp_attach);
	printf("\tmax_pkeys:\t\t%u\n\tlocal_ca_ack_delay:\t%u\n",
	       a->max_pkeys, a->local_ca_ack_delay);
}

static int print_port(struct ibv_context *ctx, uint8_t port, int verbose)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(ctx, port, &pa)) {
		cli_err("%s: cannot query port %u", ibv_get_device_name(ctx->device), port);
		return 1;
	}
	printf("\tport %u:\n", port);
	printf("\t\tstate:\t\t%s\n", state_str(pa.state));
	printf("\t\tmax_mtu:\t%s\n", mtu_str(pa.max_mtu));
	printf("\t\tactive_mtu:\t%s\n", mtu_str(pa.active_mtu));
	printf("\t\tlink_layer:\t%s\n",
	       pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
	if (verbose) {
		printf("\t\tmax_msg_sz:\t0x%x\n", pa.max_msg_sz);
		printf("\t\tport_cap_flags:\t0x%08x\n", pa.port_cap_flags);
		printf("\t\tgid_tbl_len:\t%d\n", pa.gid_tbl_len);
		printf("\t\tpkey_tbl_len:\t%u\n", pa.pkey_tbl_len);
		printf("\t\tactive_width:\t%u\n\t\tactive_speed:\t%u\n",
		       pa.active_width, pa.active_speed);
	}
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		char buf[64];

		if (ibv_query_gid_ex(ctx, port, (uint32_t)i, &e, 0))
			continue; /* empty slot */
		printf("\t\tGID[%d]:\t%s, %s\n", i, util_gid_str(&e.gid, buf),
		       ctx->device->transport_type == IBV_TRANSPORT_IWARP ? "iWARP (MAC)" :
		       e.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" :
		       e.gid_type == IBV_GID_TYPE_ROCE_V1 ? "RoCE v1" : "IB");
	}
	return 0;
}

static int print_device(struct ibv_device *dev, int verbose)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_device_attr_ex ax;
	struct ibv_device_attr *a = &ax.orig_attr;
	char guid[20];
	int rc = 0;

	if (!ctx) {
		cli_err("%s: cannot open device: %m", ibv_get_device_name(dev));
		return 1;
	}
	if (ibv_query_device_ex(ctx, NULL, &ax)) {
		cli_err("%s: cannot query device", ibv_get_device_name(dev));
		ibv_close_device(ctx);
		return 1;
	}
	printf("%s\n", ibv_get_device_name(dev));
	printf("\tinterface:\t\t%s\n", util_device_ifname(dev));
	if (dev->transport_type == IBV_TRANSPORT_IWARP)
		printf("\ttransport:\t\tiWARP (RDMAP/DDP/MPA over TCP; node type RNIC)\n");
	else
		printf("\ttransport:\t\tRoCE v2 (verbs transport %s)\n",
		       dev->transport_type == IBV_TRANSPORT_IB ? "InfiniBand" : "other");
	printf("\tfw_ver:\t\t\t%s\n", a->fw_ver);
	printf("\tnode_guid:\t\t%s\n", util_guid_str(a->node_guid, guid));
	printf("\tsys_image_guid:\t\t%s\n", util_guid_str(a->sys_image_guid, guid));
	printf("\tvendor_id:\t\t0x%04x\n\tvendor_part_id:\t\t%u\n\thw_ver:\t\t\t0x%x\n",
	       a->vendor_id, a->vendor_part_id, a->hw_ver);
	printf("\tphys_port_cnt:\t\t%u\n", a->phys_port_cnt);
	if (verbose)
		print_limits(a);
	for (uint8_t p = 1; p <= a->phys_port_cnt && !rc; p++)
		rc = print_port(ctx, p, verbose);
	ibv_close_device(ctx);
	return rc;
}

static int info_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *want = NULL;
	struct ibv_device **list;
	int verbose = 0, n = 0, c, rc = 0, shown = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "d:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'd': want = optarg; break;
		case 'v': verbose = 1; break;
		case 'h': info_usage(stdout); return 0;
		default: info_usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		cli_err("info: unexpected argument '%s'", argv[optind]);
		return 2;
	}
	list = ibv_get_device_list(&n);
	if (!list) {
		cli_err("cannot list devices: %m");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		if (want && strcmp(ibv_get_device_name(list[i]), want) != 0)
			continue;
		if (shown++)
			printf("\n");
		rc |= print_device(list[i], verbose);
	}
	ibv_free_device_list(list);
	if (want && !shown) {
		cli_err("no device '%s' (see softrnic devices)", want);
		return 1;
	}
	if (!n) {
		cli_err("no devices (no interface is up with an address?)");
		return 1;
	}
	return rc;
}

const struct cli_cmd cli_info = {
	.name = "info",
	.summary = "show device and port attributes (like ibv_devinfo)",
	.run = info_run,
	.usage = info_usage,
};
