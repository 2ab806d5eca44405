/* softrnic stats [-d DEV] [-w SECONDS [-c COUNT]] [-a]: the live counters
 * of every engine (one per open device context) of every process on this
 * host, like `rdma statistic`.  Each engine keeps them in its stats file
 * in /dev/shm (net/stats_shm.h), which names them; files of dead
 * processes are skipped. */
#include "tools/cli.h"
#include "tools/util.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/proc.h"
#include "net/stats_shm.h"

#define SHM_DIR "/dev/shm"
enum { MAX_ENGINES = 4096, MAX_WATCHES = 1000000 };

/* One engine's counters at one moment. */
struct snap {
	char file[256];
	uint64_t owner;
	uint16_t port;
	char dev[64];
	uint32_t count;
	char (*names)[NET_STATS_NAME_LEN + 1];
	uint64_t *vals;
};

struct sample {
	struct snap *v;
	int n;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void stats_usage(FILE *out)
{
	fprintf(out, "usage: softrnic stats [-d DEV] [-a] [-w SECONDS [-c COUNT]]\n"
		"Shows the counters of every engine (one per open device context) of every\n"
		"process on this host, read while the programs run: packets and bytes each\n"
		"way, retransmissions, timeouts, RNR and other NAKs, duplicates, drops by\n"
		"reason, same-host operations.  Only non-zero counters unless -a.\n"
		"  -d DEV       only the engines of device DEV\n"
		"  -a           all counters, zero ones too\n"
		"  -w SECONDS   repeat every SECONDS (0.1 to 3600), with rates per second,\n"
		"               until interrupted (Ctrl-C) or COUNT times\n"
		"  -c COUNT     with -w: stop after COUNT intervals\n");
}

static void snap_free(struct snap *s)
{
	free(s->names);
	free(s->vals);
}

static void sample_free(struct sample *m)
{
	for (int i = 0; i < m->n; i++)
		snap_free(&m->v[i]);
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

/* Copy a name from the file: printable identifier characters only (the
 * file belongs to another process). */
static void copy_name(char *out, const char *in)
{
	int i;

	for (i = 0; i < NET_STATS_NAME_LEN && in[i]; i++)
		out[i] = (in[i] == '_' || (in[i] >= 'a' && in[i] <= 'z') ||
			  (in[i] >= '0' && in[i] <= '9')) ? in[i] : '?';
	out[i] = '\0';
}

static int snap_take(const char *name, const char *only, struct snap *s)
{
	struct net_stats_view v;
	char path[300];

	memset(s, 0, sizeof(*s));
	snprintf(path, sizeof(path), SHM_DIR "/%s", name);
	if (net_stats_view_open(path, &v))
		return -1;
	s->owner = v.h->owner;
	copy_name(s->dev, v.h->dev);
	if ((only && strcmp(only, s->dev)) || !net_proc_word_alive(s->owner)) {
		net_stats_view_close(&v);
		return -1;
	}
	snprintf(s->file, sizeof(s->file), "%s", name);
	s->port = (uint16_t)atomic_load(&v.h->port);
	s->count = v.count;
	s->names = calloc(v.count, sizeof(*s->names));
	s->vals = calloc(v.count, sizeof(*s->vals));
	if (!s->names || !s->vals) {
		net_stats_view_close(&v);
		snap_free(s);
		return -1;
	}
	for (uint32_t i = 0; i < v.count; i++) {
		copy_name(s->names[i], v.names + (size_t)i * NET_STATS_NAME_LEN);
		s->vals[i] = atomic_load_explicit(&v.values[i], memory_order_relaxed);
	}
	net_stats_view_close(&v);
	return 0;
}

static int sample_take(const char *only, struct sample *m)
{
	struct dirent **ents;
	int n = scandir(SHM_DIR, &ents, NULL, alphasort);

	m->v = NULL;
	m->n = 0;
	if (n < 0)
		return -1;
	m->v = calloc(n ? (size_t)n : 1, sizeof(*m->v));
	for (int i = 0; i < n; i++) {
		if (m->v && m->n < MAX_ENGINES && net_stats_is_file(ents[i]->d_name) &&
		    snap_take(ents[i]->d_name, only, &m->v[m->n]) == 0)
			m->n++;
		free(ents[i]);
	}
	free(ents);
	return m->v ? 0 : -1;
}

static const struct snap *find_prev(const struct sample *prev, const struct snap *s)
{
	for (int i = 0; prev && i < prev->n; i++)
		if (prev->v[i].owner == s->owner && !strcmp(prev->v[i].file, s->file) &&
		    prev->v[i].count == s->count)
			return &prev->v[i];
	return NULL;
}

static void print_sample(const struct sample *m, const struct sample *prev, double secs,
			 int all)
{
	for (int i = 0; i < m->n; i++) {
		const struct snap *s = &m->v[i], *p = find_prev(prev, s);
		int pid = (int)(s->owner >> 32), shown = 0;
		char comm[32];

		printf("pid %d (%s) %s port %u\n", pid, util_proc_comm(pid, comm), s->dev,
		       (unsigned)s->port);
		for (uint32_t k = 0; k < s->count; k++) {
			if (!all && !s->vals[k])
				continue;
			shown++;
			if (prev && p && p->vals[k] <= s->vals[k])
				printf("  %-22s %16" PRIu64 " %14.1f/s\n", s->names[k], s->vals[k],
				       (double)(s->vals[k] - p->vals[k]) / secs);
			else
				printf("  %-22s %16" PRIu64 "\n", s->names[k], s->vals[k]);
		}
		if (!shown)
			printf("  (all counters zero)\n");
	}
	if (!m->n)
		printf("(no engines running)\n");
	fflush(stdout);
}

static int stats_run(int argc, char **argv)
{
	const char *only = NULL;
	double every = 0;
	long count = 0;
	int all = 0;
	struct sample cur, prev = { 0 };
	struct sigaction sa;

	for (int i = 1; i < argc; i++) {
		char *end = NULL;

		if (strcmp(argv[i], "-d") == 0 && i + 1 < argc) {
			only = argv[++i];
		} else if (strcmp(argv[i], "-a") == 0) {
			all = 1;
		} else if (strcmp(argv[i], "-w") == 0 && i + 1 < argc) {
			every = strtod(argv[++i], &end);
			if (*end || !(every >= 0.1 && every <= 3600)) {
				cli_err("stats: -w takes SECONDS from 0.1 to 3600, not '%s'", argv[i]);
				return 2;
			}
		} else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
			count = strtol(argv[++i], &end, 10);
			if (*end || count < 1 || count > MAX_WATCHES) {
				cli_err("stats: -c takes a COUNT from 1 to %d, not '%s'", MAX_WATCHES,
					argv[i]);
				return 2;
			}
		} else {
			cli_err("stats: unknown option '%s'", argv[i]);
			stats_usage(stderr);
			return 2;
		}
	}
	if (count && !every) {
		cli_err("stats: -c needs -w");
		return 2;
	}
	if (sample_take(only, &cur)) {
		cli_err("stats: %s: %s", SHM_DIR, strerror(errno));
		return 1;
	}
	print_sample(&cur, NULL, 0, all);
	if (!every) {
		sample_free(&cur);
		return 0;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (long k = 0; !stop && (!count || k < count) && k < MAX_WATCHES; k++) {
		struct timespec ts = { (time_t)every, (long)((every - (time_t)every) * 1e9) };
		char when[16];
		time_t now;

		/* a signal cuts the sleep short (no SA_RESTART) */
		while (!stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		if (stop)
			break;
		sample_free(&prev);
		prev = cur;
		if (sample_take(only, &cur)) {
			cur = (struct sample){ 0 };
			break;
		}
		now = time(NULL);
		strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
		printf("--- %s, rates over %g s\n", when, every);
		print_sample(&cur, &prev, every, all);
	}
	sample_free(&prev);
	sample_free(&cur);
	return 0;
}

const struct cli_cmd cli_stats = {
	.name = "stats",
	.summary = "live counters of every process's engines (like rdma statistic)",
	.run = stats_run,
	.usage = stats_usage,
};
