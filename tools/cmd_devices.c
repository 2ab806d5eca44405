/* softrnic devices: the device list, like ibv_devices, plus the
 * interface each device sits on. */
#include "tools/cli.h"
#include "tools/util.h"

#include <infiniband/verbs.h>

static void devices_usage(FILE *out)
{
	fprintf(out, "usage: softrnic devices\n"
		"Lists softrnic's RDMA devices: name, node GUID, interface.\n"
		"SOFTRNIC_DEVICES=IFNAME[:iwarp][=DEVNAME],... selects and renames them\n"
		"(:iwarp: an iWARP device srn_iw_IFNAME instead).\n");
}

static int devices_run(int argc, char **argv)
{
	struct ibv_device **list;
	int n = 0;

	(void)argv;
	if (argc > 1) {
		cli_err("devices: takes no arguments (see softrnic devices --help)");
		return 2;
	}
	list = ibv_get_device_list(&n);
	if (!list) {
		cli_err("cannot list devices: %m");
		return 1;
	}
	printf("%-16s  %-19s  %s\n", "device", "node GUID", "interface");
	for (int i = 0; i < n; i++) {
		char guid[24];

		util_guid_str(ibv_get_device_guid(list[i]), guid);
		printf("%-16s  %-19s  %s\n", ibv_get_device_name(list[i]), guid,
		       util_device_ifname(list[i]));
	}
	ibv_free_device_list(list);
	return 0;
}

const struct cli_cmd cli_devices = {
	.name = "devices",
	.summary = "list the RDMA devices (like ibv_devices)",
	.run = devices_run,
	.usage = devices_usage,
};
