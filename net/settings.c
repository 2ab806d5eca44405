/* net/settings: the table of SOFTRNIC_* variables and their parsing (see
 * settings.h).  Compiled into each of softrnic's binaries that reads them:
 * libibverbs, librdmacm and the CLI. */
#include "net/settings.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

_Static_assert(SRN_SET_COUNT <= 32, "one bit per setting in srn_setting's warned mask");

static const char *const log_words[] = { "error", "warn", "info", "debug", "trace", NULL };
static const char *const transport_words[] = { "auto", "udp", NULL };

const struct srn_setting srn_settings[SRN_SET_COUNT] = {
	[SRN_SET_LOG] = { "SOFTRNIC_LOG", SRN_KIND_WORD, 0, 0, log_words, SRN_LOG_WARN, true,
		"warn", "how much softrnic says on stderr, one line per event (device, QP, state, "
		"PSN); info adds QP state changes and error completions, debug drops, resends, "
		"CM MADs and every counter when a device closes, trace every packet received; "
		"receive-path lines at most 10 a second per reason" },
	[SRN_SET_DEVICES] = { "SOFTRNIC_DEVICES", SRN_KIND_STRING, 0, 0, NULL, 0, false,
		"every interface that is up with an address",
		"comma-separated IFNAME or IFNAME=DEVNAME: which interfaces become devices, "
		"in that order, and their names; IFNAME:iwarp makes an iWARP device "
		"srn_iw_IFNAME instead (docs/iwarp.md)" },
	[SRN_SET_TRANSPORT] = { "SOFTRNIC_TRANSPORT", SRN_KIND_WORD, 0, 0, transport_words,
		SRN_TRANSPORT_AUTO, true, "auto",
		"auto: operations on a QP of this host run directly in its memory; udp: "
		"everything as RoCEv2 packets over UDP, as between two hosts" },
	[SRN_SET_DIRECT] = { "SOFTRNIC_DIRECT", SRN_KIND_BOOL, 0, 1, NULL, 1, true, "1",
		"0: no direct execution in same-host peers' memory (packets instead)" },
	[SRN_SET_DIRECT_CHANNEL] = { "SOFTRNIC_DIRECT_CHANNEL", SRN_KIND_BOOL, 0, 1, NULL, 1, true,
		"1", "0: SENDs to a same-host QP whose receive CQ has a completion channel go as "
		"packets" },
	[SRN_SET_SHM_RING] = { "SOFTRNIC_SHM_RING", SRN_KIND_BOOL, 0, 1, NULL, 0, true, "0",
		"1: other same-host packets go through shared-memory inboxes instead of the socket" },
	[SRN_SET_SHM_MR_MAX_MB] = { "SOFTRNIC_SHM_MR_MAX_MB", SRN_KIND_INT, 0, 1L << 30, NULL,
		1024, true, "1024", "largest MR (MiB) made mappable by same-host peers; 0 = no limit" },
	[SRN_SET_PCAP] = { "SOFTRNIC_PCAP", SRN_KIND_STRING, 0, 0, NULL, 0, false, "no capture",
		"write every RoCEv2 packet sent and received to this pcap file" },
	[SRN_SET_SYSFS_VIEW] = { "SOFTRNIC_SYSFS_VIEW", SRN_KIND_BOOL, 0, 1, NULL, 1, true, "1",
		"0: no sysfs view (no tree in /dev/shm, softrnic run preloads nothing)" },
	[SRN_SET_STEER] = { "SOFTRNIC_STEER", SRN_KIND_BOOL, 0, 1, NULL, 1, true, "1",
		"0: only one engine per address receives at port 4791 and hands the others' packets on" },
	[SRN_SET_ENGINE_SPIN_US] = { "SOFTRNIC_ENGINE_SPIN_US", SRN_KIND_INT, 0, 1000000, NULL,
		0, false, "30 with more than one CPU, 0 with one",
		"how long an engine thread polls its socket after the last packet before it sleeps" },
	[SRN_SET_ENGINE_NICE] = { "SOFTRNIC_ENGINE_NICE", SRN_KIND_INT, -20, 19, NULL, 0, false,
		"unchanged", "experiment: nice value of the engine threads" },
	[SRN_SET_ENGINE_RT] = { "SOFTRNIC_ENGINE_RT", SRN_KIND_INT, 0, 99, NULL, 0, true, "0",
		"experiment: SCHED_FIFO priority of the engine threads (0 = off)" },
	[SRN_SET_TEST_DROP] = { "SOFTRNIC_TEST_DROP", SRN_KIND_INT, 0, 1000, NULL, 0, true, "0",
		"tests only: drop N per mille of outgoing packets" },
	[SRN_SET_TEST_DUP] = { "SOFTRNIC_TEST_DUP", SRN_KIND_INT, 0, 1000, NULL, 0, true, "0",
		"tests only: send N per mille of outgoing packets twice" },
	[SRN_SET_SELECTIVE_RETX] = { "SOFTRNIC_SELECTIVE_RETX", SRN_KIND_BOOL, 0, 1, NULL, 0, true,
		"0", "1: RC QPs connected out of band resend only what their peer lost "
		"(every peer must be softrnic; rdma_cm and ibv_set_ece negotiate it per QP)" },
	/* the upper bounds are SRN_MAX_QP and SRN_MAX_MR (verbs/srn.h) */
	[SRN_SET_MAX_QP] = { "SOFTRNIC_MAX_QP", SRN_KIND_INT, 1, 65536, NULL, 65536, true,
		"65536", "QPs one opened device may hold (max_qp); more fail with ENOMEM" },
	[SRN_SET_MAX_MR] = { "SOFTRNIC_MAX_MR", SRN_KIND_INT, 1, 1L << 20, NULL, 1L << 20, true,
		"1048576", "MRs one opened device may hold (max_mr); more fail with ENOMEM" },
	[SRN_SET_IWARP_CRC] = { "SOFTRNIC_IWARP_CRC", SRN_KIND_BOOL, 0, 1, NULL, 0, true, "0",
		"1: iWARP connections ask for the MPA CRC32c (the peer must then use it); 0: only "
		"when the peer asks" },
};

static int parse_bool(const char *t, long *val)
{
	static const char *const no[] = { "0", "no", "off", "false" };
	static const char *const yes[] = { "1", "yes", "on", "true" };

	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		if (!strcasecmp(t, no[i])) {
			*val = 0;
			return 0;
		}
		if (!strcasecmp(t, yes[i])) {
			*val = 1;
			return 0;
		}
	}
	return -1;
}

int srn_setting_parse(enum srn_setting_id id, const char *text, long *val)
{
	const struct srn_setting *s = &srn_settings[id];
	char *end;
	long v;

	switch (s->kind) {
	case SRN_KIND_WORD:
		for (long i = 0; s->words[i]; i++) {
			if (!strcasecmp(text, s->words[i])) {
				*val = i;
				return 0;
			}
		}
		return -1;
	case SRN_KIND_BOOL:
		return parse_bool(text, val);
	case SRN_KIND_INT:
		errno = 0;
		v = strtol(text, &end, 10);
		if (errno || end == text || *end || v < s->min || v > s->max)
			return -1;
		*val = v;
		return 0;
	case SRN_KIND_STRING:
		return -1;
	}
	return -1;
}

/* "one of: error, warn, ...", "0 or 1", "an integer from 0 to 1000". */
static void describe(const struct srn_setting *s, char *buf, size_t n)
{
	size_t off = 0;

	switch (s->kind) {
	case SRN_KIND_WORD:
		off = (size_t)snprintf(buf, n, "one of:");
		for (int i = 0; s->words[i] && off < n; i++)
			off += (size_t)snprintf(buf + off, n - off, "%s %s", i ? "," : "", s->words[i]);
		break;
	case SRN_KIND_BOOL:
		snprintf(buf, n, "0 or 1 (also no/yes, off/on, false/true)");
		break;
	case SRN_KIND_INT:
		snprintf(buf, n, "an integer from %ld to %ld", s->min, s->max);
		break;
	case SRN_KIND_STRING:
		snprintf(buf, n, "any text");
		break;
	}
}

static void report_bad(FILE *out, enum srn_setting_id id, const char *text)
{
	const struct srn_setting *s = &srn_settings[id];
	char what[160];

	describe(s, what, sizeof(what));
	fprintf(out, "softrnic: %s=%s is not valid: it takes %s; using the default (%s)\n",
		s->name, text, what, s->dflt_text);
}

long srn_setting(enum srn_setting_id id, bool *set)
{
	static atomic_uint warned; /* one bit per setting */
	const struct srn_setting *s = &srn_settings[id];
	const char *text = getenv(s->name);
	long v;

	if (set)
		*set = false;
	if (!text || !*text)
		return s->dflt;
	if (srn_setting_parse(id, text, &v) == 0) {
		if (set)
			*set = true;
		return v;
	}
	if (!(atomic_fetch_or(&warned, 1u << id) & (1u << id)))
		report_bad(stderr, id, text);
	return s->dflt;
}

const char *srn_setting_str(enum srn_setting_id id)
{
	const char *text = getenv(srn_settings[id].name);

	return text && *text ? text : NULL;
}

int srn_settings_check(FILE *out)
{
	int bad = 0;

	for (int id = 0; id < SRN_SET_COUNT; id++) {
		const char *text = getenv(srn_settings[id].name);
		long v;

		if (!text || !*text || srn_settings[id].kind == SRN_KIND_STRING)
			continue;
		if (srn_setting_parse((enum srn_setting_id)id, text, &v) != 0) {
			bad++;
			if (out)
				report_bad(out, (enum srn_setting_id)id, text);
		}
	}
	return bad;
}
