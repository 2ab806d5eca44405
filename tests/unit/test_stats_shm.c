/* net/stats_shm: an engine's counters as `softrnic stats` reads them.
 * The file names its counters, a reader sees the writer's values, a
 * file of another layout or a truncated one is refused, a fork()ed
 * child's destroy leaves the parent's file, the creator's removes it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/stats_shm.h"

static int failures;
#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "FAIL %d: ", __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } } while (0)

/* The newest stats file of this process for device dev (path out). */
static int find_file(const char *dev, char *out, size_t n)
{
	for (int k = 0; k < 16; k++) {
		snprintf(out, n, "/dev/shm/softrnic-%s-stats-%d-%d", dev, (int)getpid(), k);
		if (access(out, F_OK) == 0)
			return 0;
	}
	return -1;
}

int main(void)
{
	static const char *const names[] = { "rx_packets", "tx_packets", "req_timeouts" };
	char dev[32], path[128], bad[160];
	struct net_stats_view v;
	struct net_stats *s;
	_Atomic uint64_t *c;
	pid_t child;
	int fd, st;

	snprintf(dev, sizeof(dev), "statstest%d", (int)getpid());
	s = net_stats_create(dev, names, 3);
	CHECK(s != NULL, "create: %s", strerror(errno));
	if (!s)
		return 1;
	CHECK(find_file(dev, path, sizeof(path)) == 0, "file in /dev/shm");
	c = net_stats_values(s);
	atomic_fetch_add(&c[0], 41);
	atomic_fetch_add(&c[0], 1);
	atomic_store(&c[2], 7);
	net_stats_set_port(s, 4791);

	CHECK(net_stats_view_open(path, &v) == 0, "view opens");
	CHECK(v.count == 3, "3 counters, not %u", v.count);
	CHECK(v.count == 3 && !strcmp(v.names + 2 * NET_STATS_NAME_LEN, "req_timeouts"),
	      "third counter named");
	CHECK(v.count == 3 && v.values[0] == 42 && v.values[1] == 0 && v.values[2] == 7,
	      "values as written");
	CHECK(v.h && v.h->port == 4791 && !strcmp(v.h->dev, dev), "port and device");
	atomic_fetch_add(&c[1], 5);
	CHECK(v.count == 3 && v.values[1] == 5, "a later write is seen live");
	net_stats_view_close(&v);
	printf("counters named and read live\n");

	CHECK(net_stats_is_file("softrnic-srn_lo-stats-12-0") &&
	      !net_stats_is_file("softrnic-srn_lo-inbox-4791") && !net_stats_is_file("x-stats-1"),
	      "file names");
	snprintf(bad, sizeof(bad), "/dev/shm/softrnic-%s-stats-bad", dev);
	fd = open(bad, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, "nonsense", 8) == 8, "write a bad file");
	if (fd >= 0)
		close(fd);
	CHECK(net_stats_view_open(bad, &v) == -EPROTO, "a short file is refused");
	fd = open(bad, O_RDWR | O_TRUNC);
	if (fd >= 0) {
		struct net_stats_head h = { .version = NET_STATS_VERSION, .count = 1000,
					    .names_off = 128, .values_off = 40 * 1024 };

		atomic_store(&h.magic, NET_STATS_MAGIC);
		CHECK(write(fd, &h, sizeof(h)) == (ssize_t)sizeof(h), "write header");
		CHECK(ftruncate(fd, 4096) == 0, "size");
		close(fd);
	}
	CHECK(net_stats_view_open(bad, &v) == -EPROTO, "counters beyond the file are refused");
	unlink(bad);
	printf("bad files refused\n");

	child = fork();
	if (child == 0) {
		net_stats_destroy(s);
		_exit(0);
	}
	CHECK(child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st), "child");
	CHECK(access(path, F_OK) == 0, "a child's destroy leaves the parent's file");
	net_stats_destroy(s);
	CHECK(access(path, F_OK) != 0, "destroy removes the file");
	printf("destroy removes the creator's file only\n");
	if (failures) {
		printf("%d failures\n", failures);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
