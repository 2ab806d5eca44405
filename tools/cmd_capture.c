/* softrnic capture -w FILE [-d DEV] [-t SECONDS]: every RoCEv2 packet of
 * every softrnic process of this host on one device, into one pcapng file
 * (docs/capture.md).  The tool makes the device's capture ring
 * (net/capture_ring.h), marks each engine's stats file so that its
 * process starts writing into it, drains it, pairs the two records of a
 * packet between two processes (capture_merge.h), and on the way out
 * unmarks them and removes the ring. */
#include <dirent.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net/capture_ring.h"
#include "net/pcapng.h"
#include "net/proc.h"
#include "net/registry.h"
#include "net/stats_shm.h"
#include "tools/capture_merge.h"
#include "tools/cli.h"

#define SHM_DIR "/dev/shm"

enum {
	RING_MIB_DEFAULT = 64,
	RING_MIB_MAX = 1024,
	MARK_EVERY_NS = 100 * 1000 * 1000,  /* look for new engines */
	STALL_NS = 1000 * 1000 * 1000,      /* a record half-written this long */
	MAX_SECONDS = 24 * 3600,
	DRAIN_BATCH = 8192,
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void capture_usage(FILE *out)
{
	fprintf(out, "usage: softrnic capture -w FILE [-d DEV] [-t SECONDS] [-b MIB]\n"
		"Writes every RoCEv2 packet that any softrnic process of this host sends or\n"
		"receives on device DEV (default: the first device) to FILE (pcapng), each\n"
		"once, until SECONDS pass or it is interrupted (Ctrl-C).  Each packet's\n"
		"comment names the processes; same-host direct operations, which send no\n"
		"packet, appear as the packets they stand for, marked \"synthesized\".\n"
		"-b sets the shared ring the processes write into (MiB, a power of 2,\n"
		"default %d): a full ring drops records, counted at the end.\n"
		"  tshark -r FILE -d udp.port==4791,infiniband -Y infiniband \\\n"
		"         -T fields -e frame.packet_flags_direction -e frame.comment -e infiniband.bth.opcode\n"
		"Exit status: 0, 1 on an error, 2 on bad usage.\n", RING_MIB_DEFAULT);
}

/* Swap the capture word of every live engine of dev from `from` to `to`. */
static int mark_engines(const char *dev, uint32_t from, uint32_t to)
{
	DIR *d = opendir(SHM_DIR);
	struct dirent *e;
	size_t dl = strlen(dev);
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[300];

		/* "softrnic-<dev>-stats-..." */
		if (!net_stats_is_file(e->d_name) || strncmp(e->d_name + 9, dev, dl) ||
		    strncmp(e->d_name + 9 + dl, "-stats-", 7))
			continue;
		snprintf(path, sizeof(path), SHM_DIR "/%s", e->d_name);
		if (net_stats_mark_capture(path, from, to) == 1)
			n++;
	}
	closedir(d);
	return n;
}

static int first_device(char *out, size_t n)
{
	int num = 0;
	struct ibv_device **list = ibv_get_device_list(&num);

	if (!list || num < 1) {
		if (list)
			ibv_free_device_list(list);
		return -1;
	}
	snprintf(out, n, "%s", ibv_get_device_name(list[0]));
	ibv_free_device_list(list);
	return 0;
}

/* 24-bit big-endian field at off in the record's RoCE bytes, or 0. */
static uint32_t roce_u24(const struct net_cap_rec *r, uint32_t off)
{
	const uint8_t *b = (const uint8_t *)(r + 1);

	return off + 3 <= r->roce_len ? (uint32_t)b[off] << 16 | b[off + 1] << 8 | b[off + 2] : 0;
}

/* The registry's last answer for each connected QPN: a record may be
 * read after its QP is gone (the ring lags), and the answer it had while
 * it lived is then the right one. */
enum { PEER_CACHE = 4096 };
struct peer_cache {
	struct net_registry *reg;
	struct peer_answer {
		uint32_t qpn, pid, peer_qpn;
	} e[PEER_CACHE];
};

/* The registry now: 1 and the peer; 0: none on this host; -1: r's QP is
 * not published (gone).  A connected QP's peer counts if that is a live
 * QP of this host connected back to it; for UD, the destination (sent)
 * or source (DETH, received) QPN if a live UD QP of this host owns it. */
static int registry_peer_now(struct net_registry *reg, const struct net_cap_rec *r,
			     uint32_t *pid, uint32_t *qpn, int *ud)
{
	struct net_reg_qpinfo in, peer;
	uint32_t other;
	int owner;

	if (net_registry_qpinfo(reg, r->qpn, &in, NULL))
		return -1;
	*ud = in.type == IBV_QPT_UD;
	if (!*ud) {
		if (net_registry_local_peer(reg, r->qpn, &in, &peer))
			return 0;
		*pid = (uint32_t)peer.pid;
		*qpn = in.dqpn;
		return 1;
	}
	/* BTH: destination QP at byte 5; DETH after it: source QP at 17 */
	other = r->kind == NET_CAP_TX ? roce_u24(r, 5) : roce_u24(r, 17);
	owner = other ? net_registry_live_owner(reg, other) : 0;
	if (!owner || net_registry_qpinfo(reg, other, &peer, NULL) || peer.type != IBV_QPT_UD)
		return 0;
	*pid = (uint32_t)owner;
	*qpn = other;
	return 1;
}

static int registry_peer(void *ctx, const struct net_cap_rec *r, uint32_t *pid, uint32_t *qpn)
{
	struct peer_cache *c = ctx;
	struct peer_answer *e = &c->e[r->qpn % PEER_CACHE];
	int ud = 0, got;

	if (!r->qpn)
		return 0;
	got = registry_peer_now(c->reg, r, pid, qpn, &ud);
	if (got > 0 && !ud) {
		e->qpn = r->qpn;
		e->pid = *pid;
		e->peer_qpn = *qpn;
	}
	if (got >= 0)
		return got;
	if (e->qpn != r->qpn || !e->pid)
		return 0;
	*pid = e->pid;
	*qpn = e->peer_qpn;
	return 1;
}

/* What is complete in the ring into the merge, at most DRAIN_BATCH
 * records (producers may be faster than us: the file must still move).
 * 1 if a record stalls. */
static int drain(struct net_cap *ring, struct capture_merge *m, uint64_t *stall_since)
{
	const struct net_cap_rec *r;
	uint64_t now = mono_ns();
	int n;

	for (n = 0; n < DRAIN_BATCH && (r = net_cap_next(ring)); n++) {
		capture_merge_add(m, r, now);
		net_cap_next_done(ring, r);
	}
	/* a stall: records reserved, the next one not committed for long */
	if (n || atomic_load(&ring->h->tail) == atomic_load(&ring->h->head)) {
		*stall_since = 0;
		return 0;
	}
	if (!*stall_since)
		*stall_since = now;
	return now - *stall_since > STALL_NS;
}

static int parse(int argc, char **argv, const char **file, char *dev, size_t devlen,
		 double *secs, unsigned long *ring_mib)
{
	for (int i = 1; i < argc; i++) {
		char *end = NULL;

		if (!strcmp(argv[i], "-w") && i + 1 < argc) {
			*file = argv[++i];
			if (!**file || (*file)[0] == '-') {
				cli_err("capture: -w needs a FILE, not '%s'", *file);
				return 2;
			}
		} else if (!strcmp(argv[i], "-d") && i + 1 < argc) {
			snprintf(dev, devlen, "%s", argv[++i]);
		} else if (!strcmp(argv[i], "-b") && i + 1 < argc) {
			*ring_mib = strtoul(argv[++i], &end, 10);
			if (*end || !*ring_mib || *ring_mib > RING_MIB_MAX ||
			    (*ring_mib & (*ring_mib - 1))) {
				cli_err("capture: -b takes MiB, a power of 2 from 1 to %d, not '%s'",
					RING_MIB_MAX, argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "-t") && i + 1 < argc) {
			*secs = strtod(argv[++i], &end);
			if (*end || !(*secs > 0 && *secs <= MAX_SECONDS)) {
				cli_err("capture: -t takes SECONDS from 0 to %d, not '%s'",
					MAX_SECONDS, argv[i]);
				return 2;
			}
		} else {
			cli_err("capture: unknown option '%s'", argv[i]);
			capture_usage(stderr);
			return 2;
		}
	}
	if (!*file) {
		cli_err("capture: -w FILE is needed");
		capture_usage(stderr);
		return 2;
	}
	return 0;
}

static int capture_run(int argc, char **argv)
{
	const char *file = NULL;
	char dev[64] = "";
	double secs = 0;
	unsigned long ring_mib = RING_MIB_DEFAULT;
	struct peer_cache *peers = NULL;
	struct net_cap ring;
	struct capture_merge *m;
	struct sigaction sa;
	uint64_t start, next_mark = 0, stall = 0;
	uint32_t gen;
	int ret, stalled = 0, werr = 0;
	FILE *out;

	ret = parse(argc, argv, &file, dev, sizeof(dev), &secs, &ring_mib);
	if (ret)
		return ret;
	if (!dev[0] && first_device(dev, sizeof(dev)) < 0) {
		cli_err("capture: no softrnic device (softrnic devices)");
		return 1;
	}
	out = fopen(file, "we");
	if (!out || pcapng_write_head(out) || fflush(out)) {
		cli_err("capture: %s: %s", file, strerror(errno));
		if (out)
			fclose(out);
		return 1;
	}
	m = capture_merge_new(out);
	gen = ((uint32_t)getpid() << 12 ^ (uint32_t)mono_ns()) | 1;
	ret = m ? net_cap_create(&ring, dev, (uint64_t)ring_mib << 20, gen) : -ENOMEM;
	if (ret) {
		cli_err("capture: %s: %s", dev,
			ret == -EBUSY ? "another softrnic capture of this device runs"
				      : strerror(-ret));
		capture_merge_free(m);
		fclose(out);
		return 1;
	}
	/* (no registry yet: no QP, so no packet, on the device) */
	peers = calloc(1, sizeof(*peers));
	if (peers && (peers->reg = net_registry_open(dev)))
		capture_merge_set_peer_fn(m, registry_peer, peers);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	fprintf(stderr, "softrnic: capturing %s into %s%s\n", dev, file,
		secs ? "" : " (Ctrl-C stops)");
	start = mono_ns();
	while (!stop && !stalled && !werr &&
	       (!secs || mono_ns() - start < (uint64_t)(secs * 1e9))) {
		struct timespec nap = { 0, 1000 * 1000 };
		uint64_t now = mono_ns();

		if (now >= next_mark) {
			/* (a word a killed capture left set is ours now:
			 * only one capture of a device lives at a time) */
			mark_engines(dev, NET_STATS_CAPTURE_ANY, gen);
			next_mark = now + MARK_EVERY_NS;
		}
		stalled = drain(&ring, m, &stall);
		werr = capture_merge_flush(m, mono_ns(), 0);
		if (atomic_load(&ring.h->tail) == atomic_load(&ring.h->head))
			nanosleep(&nap, NULL);
	}
	/* unmark, then what was on its way */
	mark_engines(dev, gen, 0);
	atomic_store(&ring.h->active, 0);
	for (int i = 0; i < 50 && !stalled; i++) {
		struct timespec nap = { 0, 1000 * 1000 };

		stalled = drain(&ring, m, &stall);
		if (atomic_load(&ring.h->tail) == atomic_load(&ring.h->head))
			nanosleep(&nap, NULL);
	}
	/* (bounded: producers stopped at active = 0; what they began is
	 * committed within microseconds) */
	for (int i = 0; i < 1000 && !stalled &&
	     atomic_load(&ring.h->tail) != atomic_load(&ring.h->head); i++)
		stalled = drain(&ring, m, &stall);
	if (!werr)
		werr = capture_merge_flush(m, 0, 1);
	if (fclose(out) && !werr)
		werr = -errno;
	{
		const struct capture_counts *c = capture_merge_counts(m);

		fprintf(stderr,
			"softrnic: %llu packets written (%llu sent and received here, %llu sent "
			"only, %llu received only, %llu synthesized for direct operations); "
			"%llu lost to a full ring",
			(unsigned long long)c->written, (unsigned long long)c->paired,
			(unsigned long long)c->sent_only, (unsigned long long)c->received_only,
			(unsigned long long)c->direct,
			(unsigned long long)atomic_load(&ring.h->dropped));
		if (c->half_missing)
			fprintf(stderr, "; %llu between two processes here with one record missing",
				(unsigned long long)c->half_missing);
		fputc('\n', stderr);
	}
	if (stalled)
		cli_err("capture: a process stopped half-way through a record; the capture "
			"ends there");
	if (werr)
		cli_err("capture: %s: %s", file, strerror(-werr));
	net_cap_destroy(&ring, dev);
	capture_merge_free(m);
	if (peers && peers->reg)
		net_registry_close(peers->reg);
	free(peers);
	return werr || stalled ? 1 : 0;
}

const struct cli_cmd cli_capture = {
	.name = "capture",
	.summary = "every RoCEv2 packet of this host's processes into one pcapng file",
	.run = capture_run,
	.usage = capture_usage,
};
