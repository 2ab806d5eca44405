/* Device discovery: one softrnic device per network interface that is up
 * and has an IPv4 or IPv6 address, loopback first, then in ifindex order,
 * named "srn_" + ifname.  The list is built once per process (the NIC
 * "hardware" does not come and go) and the devices live until exit.
 *
 * SOFTRNIC_DEVICES overrides discovery: a comma-separated list of IFNAME or
 * IFNAME=DEVNAME, e.g. "lo,eth0=rnic0".  Only the listed interfaces become
 * devices, in that order, optionally renamed.  IFNAME:iwarp makes an
 * iWARP RNIC instead, named srn_iw_IFNAME (verbs/iwarp_dev.c).  A listed
 * interface that is not up with an address is skipped with a one-line
 * warning on stderr.
 * Unset or empty means automatic discovery.
 */
#include "verbs/srn.h"
#include "verbs/device.h"
#include "verbs/export.h"
#include "wire/wire.h"
#include "net/settings.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if_arp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define SRN_MAX_DEVICES 64

static struct srn_device *srn_devices[SRN_MAX_DEVICES];
static int srn_num_devices;
static pthread_once_t srn_devices_once = PTHREAD_ONCE_INIT;

/* ---- building one device from getifaddrs() ---------------------------- */

static bool gid_is_v4_mapped(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

static bool gid_present(const struct srn_device *dev, const union ibv_gid *g)
{
	for (int i = 0; i < dev->num_gids; i++)
		if (memcmp(dev->gid[i].raw, g->raw, sizeof(g->raw)) == 0)
			return true;
	return false;
}

static void gid_add(struct srn_device *dev, const union ibv_gid *g, int family)
{
	if (dev->num_gids >= SRN_MAX_GID || gid_present(dev, g))
		return;
	dev->gid[dev->num_gids] = *g;
	dev->gid_family[dev->num_gids] = family;
	dev->num_gids++;
}

/* getifaddrs() names an IPv4 address with a label like "eth0:1"; the
 * interface is the part before the colon. */
static void base_ifname(const char *name, char out[IF_NAMESIZE])
{
	size_t n = strcspn(name, ":");

	if (n >= IF_NAMESIZE)
		n = IF_NAMESIZE - 1;
	memcpy(out, name, n);
	out[n] = '\0';
}

/* GID table: [0] = the first IPv4 address as IPv4-mapped IPv6, then every
 * IPv6 address, then further IPv4 addresses.  So "-g 0" means IPv4, as
 * users of rxe expect, and an interface without IPv4 starts with IPv6. */
static void collect_gids(struct srn_device *dev, const struct ifaddrs *ifa_list)
{
	for (int pass = 0; pass < 3; pass++) {
		int v4_seen = 0;

		for (const struct ifaddrs *ifa = ifa_list; ifa; ifa = ifa->ifa_next) {
			char name[IF_NAMESIZE];
			union ibv_gid g;

			if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP))
				continue;
			base_ifname(ifa->ifa_name, name);
			if (strcmp(name, dev->ifname) != 0)
				continue;
			memset(&g, 0, sizeof(g));
			if (ifa->ifa_addr->sa_family == AF_INET) {
				const struct sockaddr_in *sin = (const void *)ifa->ifa_addr;
				bool first = ++v4_seen == 1;

				if (!((pass == 0 && first) || (pass == 2 && !first)))
					continue;
				g.raw[10] = 0xff;
				g.raw[11] = 0xff;
				memcpy(&g.raw[12], &sin->sin_addr, 4);
				gid_add(dev, &g, AF_INET);
			} else if (ifa->ifa_addr->sa_family == AF_INET6 && pass == 1) {
				const struct sockaddr_in6 *sin6 = (const void *)ifa->ifa_addr;

				memcpy(g.raw, &sin6->sin6_addr, 16);
				/* A v4-mapped address configured as IPv6 would be
				 * ambiguous with entry 0's meaning; skip it. */
				if (!gid_is_v4_mapped(&g))
					gid_add(dev, &g, AF_INET6);
			}
		}
	}
}

/* 64-bit FNV-1a: a stable, dependency-free hash for name-derived GUIDs. */
static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* EUI-64 from a 48-bit MAC (IEEE: insert ff:fe in the middle, flip the
 * universal/local bit), as RoCE NICs and rxe derive their node GUID.
 * Without a MAC (loopback, tun), hash host and interface name into a
 * locally administered MAC first, so the GUID is stable across runs. */
static void make_guid(struct srn_device *dev)
{
	static const uint8_t zero[6];
	uint8_t mac[6], g[8];

	if (memcmp(dev->mac, zero, sizeof(zero)) != 0) {
		memcpy(mac, dev->mac, 6);
	} else {
		char host[256] = "";
		uint64_t h;

		gethostname(host, sizeof(host) - 1);
		h = fnv1a(0xcbf29ce484222325ULL, host);
		h = fnv1a(h, "/");
		h = fnv1a(h, dev->ifname);
		for (int i = 0; i < 6; i++)
			mac[i] = (uint8_t)(h >> (8 * i));
		mac[0] = (mac[0] & ~0x01) | 0x02; /* unicast, locally administered */
	}
	memcpy(dev->guid_mac, mac, 6);
	g[0] = mac[0] ^ 0x02;
	g[1] = mac[1];
	g[2] = mac[2];
	g[3] = 0xff;
	g[4] = 0xfe;
	g[5] = mac[3];
	g[6] = mac[4];
	g[7] = mac[5];
	memcpy(&dev->node_guid, g, sizeof(g));
}

/* MTU and MAC through the classic ioctls on any datagram socket. */
static void read_link(struct srn_device *dev)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	dev->if_mtu = 1500;
	if (s < 0)
		return;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev->ifname);
	if (ioctl(s, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0)
		dev->if_mtu = (unsigned int)ifr.ifr_mtu;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev->ifname);
	if (ioctl(s, SIOCGIFHWADDR, &ifr) == 0 &&
	    ifr.ifr_hwaddr.sa_family == ARPHRD_ETHER)
		memcpy(dev->mac, ifr.ifr_hwaddr.sa_data, 6);
	close(s);
}

static struct srn_device *make_device(const struct ifaddrs *ifa_list,
				      const char *ifname, const char *devname, bool iwarp)
{
	struct srn_device *dev = calloc(1, sizeof(*dev));
	int idx = srn_num_devices;

	if (!dev)
		return NULL;
	snprintf(dev->ifname, sizeof(dev->ifname), "%s", ifname);
	dev->ifindex = (int)if_nametoindex(ifname);
	collect_gids(dev, ifa_list);
	if (dev->ifindex == 0 || dev->num_gids == 0) {
		free(dev);
		return NULL;
	}
	read_link(dev);
	make_guid(dev);
	dev->index = idx;

	/* The ibv_device fields programs print.  The paths are the kernel's
	 * until the sysfs view (verbs/sysfs_view.c) points them into its
	 * tree; dev_name has softrnic's prefix, so it never names a kernel
	 * device's node in /dev/infiniband. */
	dev->ibdev.node_type = IBV_NODE_CA;
	dev->ibdev.transport_type = IBV_TRANSPORT_IB; /* RoCE reports IB, as rxe */
	if (devname)
		snprintf(dev->ibdev.name, sizeof(dev->ibdev.name), "%s", devname);
	else
		snprintf(dev->ibdev.name, sizeof(dev->ibdev.name), "srn_%s%s",
			 iwarp ? "iw_" : "", ifname);
	if (iwarp)
		srn_iwarp_dev_init(dev);
	snprintf(dev->ibdev.dev_name, sizeof(dev->ibdev.dev_name), "srn_uverbs%d", idx);
	snprintf(dev->ibdev.dev_path, sizeof(dev->ibdev.dev_path),
		 "/sys/class/infiniband_verbs/srn_uverbs%d", idx);
	snprintf(dev->ibdev.ibdev_path, sizeof(dev->ibdev.ibdev_path),
		 "/sys/class/infiniband/%.*s", IBV_SYSFS_NAME_MAX, dev->ibdev.name);
	return dev;
}

static void add_device(struct srn_device *dev)
{
	if (!dev)
		return;
	for (int i = 0; i < srn_num_devices; i++) {
		if (strcmp(srn_devices[i]->ibdev.name, dev->ibdev.name) == 0) {
			fprintf(stderr, "softrnic: SOFTRNIC_DEVICES: duplicate device name '%s' skipped\n",
				dev->ibdev.name);
			free(dev);
			return;
		}
	}
	if (srn_num_devices >= SRN_MAX_DEVICES) {
		free(dev);
		return;
	}
	srn_devices[srn_num_devices++] = dev;
}

/* ---- discovery --------------------------------------------------------- */

/* Interfaces that are up and have an address, as (loopback, ifindex). */
struct candidate {
	char name[IF_NAMESIZE];
	unsigned int index;
	bool loopback;
};

static int cand_cmp(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;

	if (x->loopback != y->loopback)
		return x->loopback ? -1 : 1;
	return (x->index > y->index) - (x->index < y->index);
}

static void discover_all(const struct ifaddrs *ifa_list)
{
	struct candidate c[SRN_MAX_DEVICES];
	int n = 0;

	for (const struct ifaddrs *ifa = ifa_list; ifa; ifa = ifa->ifa_next) {
		char name[IF_NAMESIZE];
		int i;

		if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP))
			continue;
		if (ifa->ifa_addr->sa_family != AF_INET &&
		    ifa->ifa_addr->sa_family != AF_INET6)
			continue;
		base_ifname(ifa->ifa_name, name);
		for (i = 0; i < n; i++)
			if (strcmp(c[i].name, name) == 0)
				break;
		if (i < n || n >= SRN_MAX_DEVICES)
			continue;
		snprintf(c[n].name, sizeof(c[n].name), "%s", name);
		c[n].index = if_nametoindex(name);
		c[n].loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
		n++;
	}
	qsort(c, (size_t)n, sizeof(c[0]), cand_cmp);
	for (int i = 0; i < n; i++)
		add_device(make_device(ifa_list, c[i].name, NULL, false));
}

/* SOFTRNIC_DEVICES="IFNAME[:iwarp][=DEVNAME],..." */
static void discover_listed(const struct ifaddrs *ifa_list, const char *spec)
{
	char *copy = strdup(spec), *save = NULL;

	if (!copy)
		return;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *devname = strchr(tok, '=');
		struct srn_device *dev;
		bool iwarp;

		if (devname)
			*devname++ = '\0';
		iwarp = srn_iwarp_spec_strip(tok);
		if (!*tok)
			continue;
		if (devname && !*devname)
			devname = NULL;
		dev = strlen(tok) < IF_NAMESIZE ? make_device(ifa_list, tok, devname, iwarp) : NULL;
		if (!dev) {
			fprintf(stderr, "softrnic: SOFTRNIC_DEVICES: no interface '%s' that is up with an address; skipped\n",
				tok);
			continue;
		}
		add_device(dev);
	}
	free(copy);
}

static void build_device_list(void)
{
	struct ifaddrs *ifa_list = NULL;
	const char *spec = srn_setting_str(SRN_SET_DEVICES);

	if (getifaddrs(&ifa_list) != 0)
		return;
	if (spec && *spec)
		discover_listed(ifa_list, spec);
	else
		discover_all(ifa_list);
	freeifaddrs(ifa_list);
	srn_sysfs_view_refresh(srn_devices, srn_num_devices, !(spec && *spec));
}

/* ---- helpers shared inside the library ---------------------------------- */

/* Largest IB MTU whose full-size packet fits in one IP datagram of the
 * interface MTU.  The fullest packet carrying an MTU of payload is an
 * RDMA WRITE ONLY with immediate: BTH 12 + RETH 16 + ImmDt 4, then ICRC 4;
 * a full-MTU payload is a multiple of 4 so it has no pad.  Add UDP 8 and
 * the IP header: 20 for IPv4, 40 if the device has IPv6 GIDs (worst case).
 * 1500 -> 1500 - 84 = 1416 -> 1024 (as rxe); lo's 65536 -> 4096. */
enum ibv_mtu srn_dev_active_mtu(const struct srn_device *dev)
{
	unsigned int ip = 20, overhead, room;
	enum ibv_mtu mtu = IBV_MTU_256;

	for (int i = 0; i < dev->num_gids; i++)
		if (dev->gid_family[i] == AF_INET6)
			ip = 40;
	overhead = ip + 8 + WIRE_BTH_LEN + WIRE_RETH_LEN + WIRE_IMMDT_LEN + WIRE_ICRC_LEN;
	room = dev->if_mtu > overhead ? dev->if_mtu - overhead : 0;
	for (enum ibv_mtu m = IBV_MTU_512; m <= IBV_MTU_4096; m++)
		if (room >= (128u << m))
			mtu = m;
	return mtu;
}

int srn_dev_ipv6_src(const struct srn_device *dev)
{
	for (int i = 0; i < dev->num_gids; i++)
		if (dev->gid_family[i] == AF_INET6 &&
		    !(dev->gid[i].raw[0] == 0xfe && (dev->gid[i].raw[1] & 0xc0) == 0x80))
			return i;
	return -1;
}

/* Whether d is one of our devices (ibv_open_device guards against
 * pointers from elsewhere, e.g. another verbs library's list). */
bool srn_device_valid(const struct ibv_device *d)
{
	pthread_once(&srn_devices_once, build_device_list);
	for (int i = 0; i < srn_num_devices; i++)
		if (&srn_devices[i]->ibdev == d)
			return true;
	return false;
}

/* ---- the public device API ---------------------------------------------- */

/* All devices, NULL-terminated, in a fresh array the caller frees with
 * ibv_free_device_list().  No devices is an empty list, not an error. */
SRN_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list;

	pthread_once(&srn_devices_once, build_device_list);
	list = calloc((size_t)srn_num_devices + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < srn_num_devices; i++)
		list[i] = &srn_devices[i]->ibdev;
	if (num_devices)
		*num_devices = srn_num_devices;
	return list;
}

/* Frees the array only: devices persist for the process lifetime. */
SRN_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SRN_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

/* Node GUID in network byte order, as rdma-core returns it. */
SRN_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	return device ? srn_dev(device)->node_guid : 0;
}

/* Position in the device list (also the N of "srn_uverbsN"). */
SRN_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return device ? srn_dev(device)->index : -1;
}
