/* net/stats_shm: an engine's counters in a shared-memory file, so that
 * `softrnic stats` reads them while the program runs.
 *
 * /dev/shm/softrnic-<dev>-stats-<pid>-<n> (mode 0600): a header, a table
 * naming the counters, then the counters themselves (one 64-bit word
 * each, written with relaxed atomics by the engine).  The file exists
 * while the engine does; one a dead process left is removed by
 * `softrnic clean` (no process maps it any more).  A reader needs no
 * knowledge of the counter list: the file names its counters. */
#ifndef NET_STATS_SHM_H
#define NET_STATS_SHM_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

enum {
	NET_STATS_MAGIC = 0x53524e53,   /* "SRNS" */
	NET_STATS_VERSION = 1,
	NET_STATS_NAME_LEN = 32,        /* bytes per name, NUL-terminated */
	NET_STATS_MAX = 1024,           /* a reader's bound on the count */
};

struct net_stats_head {
	_Atomic uint32_t magic;         /* set last: the rest is valid */
	uint32_t version;
	uint32_t count;                 /* counters (and names) */
	uint32_t names_off;             /* byte offsets from the start */
	uint32_t values_off;
	_Atomic uint32_t port;          /* the engine's UDP port (0: not yet) */
	uint64_t owner;                 /* net_proc_word of the creator */
	char dev[64];                   /* device name */
	/* set by `softrnic capture` (net/capture_ring.h): the running
	 * capture's gen, 0 when none */
	_Atomic uint32_t capture;
};

struct net_stats;                       /* the engine's (writer's) handle */

/* Create the file for device dev with the count counters named names,
 * zeroed.  NULL + errno. */
struct net_stats *net_stats_create(const char *dev, const char *const *names,
				   uint32_t count);
/* The counters (count words, shared). */
_Atomic uint64_t *net_stats_values(struct net_stats *s);
void net_stats_set_port(struct net_stats *s, uint16_t port);
/* The word `softrnic capture` sets (never NULL: a shared dummy when s
 * is). */
_Atomic uint32_t *net_stats_capture_word(const struct net_stats *s);
/* Unlink and unmap.  NULL is fine. */
void net_stats_destroy(struct net_stats *s);

/* ---- readers (softrnic stats) ---- */

/* A read-only mapping of one stats file. */
struct net_stats_view {
	const struct net_stats_head *h;
	const char *names;              /* count * NET_STATS_NAME_LEN */
	const _Atomic uint64_t *values;
	uint32_t count;                 /* as checked at open */
	size_t len;
};

/* Is name a stats file name ("softrnic-*-stats-*")? */
int net_stats_is_file(const char *name);
/* Map path and check its layout.  0, or -errno (-EPROTO: not a stats
 * file of a version we read, or not yet complete).  Names are at most
 * NET_STATS_NAME_LEN bytes, not necessarily NUL-terminated. */
int net_stats_view_open(const char *path, struct net_stats_view *v);
void net_stats_view_close(struct net_stats_view *v);

/* softrnic capture: in the stats file at path, swap the capture word
 * from `from` (NET_STATS_CAPTURE_ANY: whatever it holds but `to`) to
 * `to`.  1 if swapped, 0 if it held something else (or `to` already),
 * -errno if the file is not a stats file it may write. */
#define NET_STATS_CAPTURE_ANY UINT32_MAX
int net_stats_mark_capture(const char *path, uint32_t from, uint32_t to);

#endif
