/* Helpers shared by the softrnic subcommands: they use only the public
 * verbs API, so the CLI works against any libibverbs it is run with. */
#include "tools/util.h"

#include <arpa/inet.h>
#include <endian.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>

const char *util_guid_str(__be64 guid, char out[20])
{
	uint64_t g = be64toh(guid);

	snprintf(out, 20, "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff,
		 (unsigned)g & 0xffff);
	return out;
}

const char *util_device_ifname(struct ibv_device *dev)
{
	static char name[IF_NAMESIZE];
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_gid_entry e;

	snprintf(name, sizeof(name), "?");
	if (!ctx)
		return name;
	if (ibv_query_gid_ex(ctx, 1, 0, &e, 0) == 0 &&
	    !if_indextoname(e.ndev_ifindex, name))
		snprintf(name, sizeof(name), "?");
	ibv_close_device(ctx);
	return name;
}

const char *util_gid_str(const union ibv_gid *gid, char out[64])
{
	if (!inet_ntop(AF_INET6, gid->raw, out, 64))
		snprintf(out, 64, "?");
	return out;
}

const char *util_proc_comm(int pid, char out[32])
{
	char path[48];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	snprintf(out, 32, "?");
	f = fopen(path, "r");
	if (!f)
		return out;
	if (fgets(out, 32, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
	return out;
}
