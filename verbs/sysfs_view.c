/* The sysfs/devfs view (docs/sysfs-view.md): the files a kernel RDMA
 * device keeps under /sys/class/infiniband, /sys/class/infiniband_verbs
 * and /dev/infiniband, written for softrnic's devices into a per-user,
 * per-network-namespace tree (net/sysfs_root.h).  Programs that read them
 * (UCX, hwloc, rdma-core's tests) find them through ibdev_path, through
 * ibv_get_sysfs_path, or under their usual names with the path-mapping
 * preload `softrnic run` adds (preload/sysfs_map.c).
 *
 * Several processes refresh the tree at once: every file is written to a
 * temporary name and renamed into place, so a reader sees the old or the
 * new content, never part of one; a file whose content is already right
 * is left alone. */
#include "verbs/srn.h"
#include "verbs/device.h"
#include "verbs/version.h"
#include "net/sysfs_root.h"
#include "net/settings.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct view {
	char root[128];   /* net_sysfs_root() */
	bool ok;           /* every write so far succeeded */
};

static bool mkdir_p(const char *path)
{
	char tmp[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(tmp))
		return false;
	memcpy(tmp, path, len + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
			return false;
		*p = '/';
	}
	return mkdir(tmp, 0755) == 0 || errno == EEXIST;
}

/* True when path holds exactly len bytes equal to text. */
static bool same_content(const char *path, const char *text, size_t len)
{
	char buf[512];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	return n == (ssize_t)len && memcmp(buf, text, len) == 0;
}

/* root/rel gets text, atomically (temporary file + rename). */
static void put_file(struct view *v, const char *rel, const char *text)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32];
	size_t len = strlen(text);
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", v->root, rel) >= (int)sizeof(path)) {
		v->ok = false;
		return;
	}
	if (same_content(path, text, len))
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		v->ok = false;
		return;
	}
	if (write(fd, text, len) != (ssize_t)len || close(fd) != 0 ||
	    rename(tmp, path) != 0) {
		unlink(tmp);
		v->ok = false;
	}
}

static void putf(struct view *v, const char *rel, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void putf(struct view *v, const char *rel, const char *fmt, ...)
{
	char text[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	put_file(v, rel, text);
}

static void put_dir(struct view *v, const char *rel)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", v->root, rel) >= (int)sizeof(path) ||
	    !mkdir_p(path))
		v->ok = false;
}

/* root/rel is a symlink to target (replaced atomically when it differs). */
static void put_link(struct view *v, const char *rel, const char *target)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32], cur[PATH_MAX];
	ssize_t n;

	if (snprintf(path, sizeof(path), "%s/%s", v->root, rel) >= (int)sizeof(path)) {
		v->ok = false;
		return;
	}
	n = readlink(path, cur, sizeof(cur) - 1);
	if (n >= 0) {
		cur[n] = '\0';
		if (strcmp(cur, target) == 0)
			return;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
	unlink(tmp);
	if (symlink(target, tmp) != 0 || rename(tmp, path) != 0) {
		unlink(tmp);
		v->ok = false;
	}
}

/* GUIDs as sysfs prints them: four groups of four hex digits. */
static void guid_text(__be64 guid, char out[20])
{
	uint64_t g = be64toh(guid);

	snprintf(out, 20, "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff,
		 (unsigned)g & 0xffff);
}

/* The kernel's port rate line, e.g. "100 Gb/sec (4X EDR)". */
static void rate_text(uint8_t width, uint8_t speed, char *out, size_t size)
{
	static const struct { uint8_t code; unsigned tenths; const char *name; } sp[] = {
		{ 1, 25, " SDR" }, { 2, 50, " DDR" }, { 4, 100, " QDR" },
		{ 8, 100, " FDR10" }, { 16, 140, " FDR" }, { 32, 250, " EDR" },
		{ 64, 500, " HDR" }, { 128, 1000, " NDR" },
	};
	static const struct { uint8_t code, lanes; } wd[] = {
		{ 1, 1 }, { 2, 4 }, { 4, 8 }, { 8, 12 }, { 16, 2 },
	};
	unsigned tenths = 25, lanes = 1;
	const char *name = " SDR";

	for (size_t i = 0; i < sizeof(sp) / sizeof(sp[0]); i++)
		if (sp[i].code == speed) {
			tenths = sp[i].tenths;
			name = sp[i].name;
		}
	for (size_t i = 0; i < sizeof(wd) / sizeof(wd[0]); i++)
		if (wd[i].code == width)
			lanes = wd[i].lanes;
	tenths *= lanes;
	if (tenths % 10)
		snprintf(out, size, "%u.%u Gb/sec (%uX%s)\n", tenths / 10, tenths % 10, lanes, name);
	else
		snprintf(out, size, "%u Gb/sec (%uX%s)\n", tenths / 10, lanes, name);
}

static const char *port_state_text(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_DOWN: return "1: DOWN";
	case IBV_PORT_INIT: return "2: INIT";
	case IBV_PORT_ARMED: return "3: ARMED";
	case IBV_PORT_ACTIVE: return "4: ACTIVE";
	case IBV_PORT_ACTIVE_DEFER: return "5: ACTIVE_DEFER";
	default: return "0: NOP";
	}
}

static void write_port(struct view *v, struct srn_device *dev, const char *d)
{
	struct ibv_port_attr pa;
	char rel[256], text[128];

	srn_dev_port_attr(dev, &pa);
	snprintf(rel, sizeof(rel), "%s/ports/1/gid_attrs/types", d);
	put_dir(v, rel);
	snprintf(rel, sizeof(rel), "%s/ports/1/gid_attrs/ndevs", d);
	put_dir(v, rel);
	snprintf(rel, sizeof(rel), "%s/ports/1/gids", d);
	put_dir(v, rel);
	snprintf(rel, sizeof(rel), "%s/ports/1/pkeys", d);
	put_dir(v, rel);

#define PORT_FILE(name, ...) do { \
		snprintf(rel, sizeof(rel), "%s/ports/1/" name, d); \
		putf(v, rel, __VA_ARGS__); \
	} while (0)
	PORT_FILE("state", "%s\n", port_state_text(pa.state));
	PORT_FILE("phys_state", "%u: %s\n", pa.phys_state,
		  pa.phys_state == 5 ? "LinkUp" : "Disabled");
	rate_text(pa.active_width, pa.active_speed, text, sizeof(text));
	PORT_FILE("rate", "%s", text);
	PORT_FILE("link_layer", "%s\n",
		  pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
	PORT_FILE("lid", "0x%x\n", pa.lid);
	PORT_FILE("lid_mask_count", "%u\n", pa.lmc);
	PORT_FILE("sm_lid", "0x%x\n", pa.sm_lid);
	PORT_FILE("sm_sl", "%u\n", pa.sm_sl);
	PORT_FILE("cap_mask", "0x%08x\n", pa.port_cap_flags);
	PORT_FILE("pkeys/0", "0xffff\n");
#undef PORT_FILE

	/* Every table entry has a gids file (zeros when empty, as the
	 * kernel shows); type and netdev only for populated ones. */
	for (int i = 0; i < (int)pa.gid_tbl_len && i < SRN_MAX_GID; i++) {
		const uint8_t *g = dev->gid[i].raw;
		static const uint8_t zero[16];
		union ibv_gid iw;

		if (i >= dev->num_gids)
			g = zero;
		if (dev->iwarp) {
			srn_iwarp_gid(dev, &iw);
			g = iw.raw;
		}
		snprintf(rel, sizeof(rel), "%s/ports/1/gids/%d", d, i);
		putf(v, rel, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x\n",
		     g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7],
		     g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]);
		if (i >= dev->num_gids)
			continue;
		snprintf(rel, sizeof(rel), "%s/ports/1/gid_attrs/types/%d", d, i);
		putf(v, rel, dev->iwarp ? "IB/RoCE v1\n" : "RoCE v2\n");
		snprintf(rel, sizeof(rel), "%s/ports/1/gid_attrs/ndevs/%d", d, i);
		putf(v, rel, "%s\n", dev->ifname);
	}
}

static void write_device(struct view *v, struct srn_device *dev)
{
	const char *name = dev->ibdev.name, *uv = dev->ibdev.dev_name;
	char d[128], rel[256], guid[20];

	snprintf(d, sizeof(d), "class/infiniband/%s", name);
	guid_text(dev->node_guid, guid);
	snprintf(rel, sizeof(rel), "%s/device/net/%s", d, dev->ifname);
	put_dir(v, rel);

#define DEV_FILE(file, ...) do { \
		snprintf(rel, sizeof(rel), "%s/" file, d); \
		putf(v, rel, __VA_ARGS__); \
	} while (0)
	DEV_FILE("node_type", dev->iwarp ? "4: RNIC\n" : "1: CA\n");
	DEV_FILE("node_guid", "%s\n", guid);
	DEV_FILE("sys_image_guid", "%s\n", guid);
	DEV_FILE("fw_ver", "%s\n", SRN_VERSION);
	DEV_FILE("hca_type", "softrnic\n");
	DEV_FILE("hw_rev", "1\n");
	DEV_FILE("board_id", "softrnic\n");
	DEV_FILE("node_desc", "softrnic %s\n", name);
	/* A software device has no NUMA node of its own (as a virtual
	 * interface reports) and no PCI identity. */
	DEV_FILE("device/numa_node", "-1\n");
#undef DEV_FILE
	snprintf(rel, sizeof(rel), "%s/device/net/%s/ifindex", d, dev->ifname);
	putf(v, rel, "%d\n", dev->ifindex);
	write_port(v, dev, d);

	snprintf(rel, sizeof(rel), "class/infiniband_verbs/%s", uv);
	put_dir(v, rel);
	snprintf(rel, sizeof(rel), "class/infiniband_verbs/%s/ibdev", uv);
	putf(v, rel, "%s\n", name);
	snprintf(rel, sizeof(rel), "class/infiniband_verbs/%s/abi_version", uv);
	putf(v, rel, "1\n");
	/* The device node: any character device the user may open for
	 * reading and writing.  Nothing opens it (no kernel driver behind
	 * softrnic); programs stat it to see the device is usable. */
	snprintf(rel, sizeof(rel), "dev/infiniband/%s", uv);
	put_link(v, rel, "/dev/null");
}

static void remove_tree(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *dir;
	struct dirent *e;

	if (fd < 0) {
		unlinkat(parent, name, 0);
		return;
	}
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return;
	}
	while ((e = readdir(dir)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			remove_tree(dirfd(dir), e->d_name);
	closedir(dir);
	unlinkat(parent, name, AT_REMOVEDIR);
}

/* Removes entries of root/rel that no device of the list names: which
 * selects ibdev names (0) or dev_names (1). */
static void prune(struct view *v, const char *rel, struct srn_device *const *devs,
		  int n, int which)
{
	char path[PATH_MAX];
	DIR *dir;
	struct dirent *e;

	snprintf(path, sizeof(path), "%s/%s", v->root, rel);
	dir = opendir(path);
	if (!dir)
		return;
	while ((e = readdir(dir))) {
		bool keep = e->d_name[0] == '.' || strcmp(e->d_name, "abi_version") == 0;

		for (int i = 0; i < n && !keep; i++)
			keep = strcmp(e->d_name, which ? devs[i]->ibdev.dev_name
						    : devs[i]->ibdev.name) == 0;
		if (!keep)
			remove_tree(dirfd(dir), e->d_name);
	}
	closedir(dir);
}

void srn_sysfs_view_refresh(struct srn_device *const *devs, int n, bool complete)
{
	struct view v = { .ok = true };
	struct stat st;
	if (!srn_setting(SRN_SET_SYSFS_VIEW, NULL) || !net_sysfs_root(v.root, sizeof(v.root)))
		return;
	if (mkdir(v.root, 0755) != 0 && errno != EEXIST)
		return;
	if (lstat(v.root, &st) != 0 || !net_sysfs_root_trusted(&st))
		return;
	put_dir(&v, "class/infiniband");
	put_dir(&v, "class/infiniband_verbs");
	put_dir(&v, "dev/infiniband");
	put_file(&v, "class/infiniband_verbs/abi_version", "6\n");
	if (complete) {
		prune(&v, "class/infiniband", devs, n, 0);
		prune(&v, "class/infiniband_verbs", devs, n, 1);
		prune(&v, "dev/infiniband", devs, n, 1);
	}
	for (int i = 0; i < n; i++) {
		struct srn_device *dev = devs[i];
		char ib[sizeof(dev->ibdev.ibdev_path)], uv[sizeof(dev->ibdev.dev_path)];

		v.ok = true;
		write_device(&v, dev);
		if (!v.ok)
			continue;
		if (snprintf(ib, sizeof(ib), "%s/class/infiniband/%s", v.root,
			     dev->ibdev.name) >= (int)sizeof(ib) ||
		    snprintf(uv, sizeof(uv), "%s/class/infiniband_verbs/%s", v.root,
			     dev->ibdev.dev_name) >= (int)sizeof(uv))
			continue;
		memcpy(dev->ibdev.ibdev_path, ib, sizeof(ib));
		memcpy(dev->ibdev.dev_path, uv, sizeof(uv));
	}
}
