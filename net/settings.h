/* net/settings: every SOFTRNIC_* environment variable, defined and checked
 * in one place.  Each setting has a kind, a range or a list of words, a
 * default and a line of help; a value that does not parse gets one message
 * on stderr naming the variable and what it accepts, and the default is
 * used.  Values are read from the environment at each call (tests and
 * programs may change them between device opens); callers that want a
 * value once cache it themselves. */
#ifndef NET_SETTINGS_H
#define NET_SETTINGS_H

#include <stdbool.h>
#include <stdio.h>

enum srn_setting_id {
	SRN_SET_LOG,
	SRN_SET_DEVICES,
	SRN_SET_TRANSPORT,
	SRN_SET_DIRECT,
	SRN_SET_DIRECT_CHANNEL,
	SRN_SET_SHM_RING,
	SRN_SET_SHM_MR_MAX_MB,
	SRN_SET_PCAP,
	SRN_SET_SYSFS_VIEW,
	SRN_SET_STEER,
	SRN_SET_ENGINE_SPIN_US,
	SRN_SET_ENGINE_NICE,
	SRN_SET_ENGINE_RT,
	SRN_SET_TEST_DROP,
	SRN_SET_TEST_DUP,
	SRN_SET_SELECTIVE_RETX,
	SRN_SET_MAX_QP,
	SRN_SET_MAX_MR,
	SRN_SET_IWARP_CRC,
	SRN_SET_COUNT
};

enum srn_log_level { SRN_LOG_ERROR, SRN_LOG_WARN, SRN_LOG_INFO, SRN_LOG_DEBUG, SRN_LOG_TRACE };
enum srn_transport { SRN_TRANSPORT_AUTO, SRN_TRANSPORT_UDP };

enum srn_setting_kind {
	SRN_KIND_WORD,      /* one of words[]: the value is its index */
	SRN_KIND_BOOL,      /* 0/1, no/yes, off/on, false/true */
	SRN_KIND_INT,       /* a decimal integer in [min, max] */
	SRN_KIND_STRING,    /* free text (a path, a list the user of it checks) */
};

struct srn_setting {
	const char *name;
	enum srn_setting_kind kind;
	long min, max;              /* SRN_KIND_INT */
	const char *const *words;   /* SRN_KIND_WORD, NULL-terminated */
	long dflt;                  /* the default value (an index for WORD) */
	bool has_dflt;              /* false: unset means "not used" */
	const char *dflt_text;      /* the default as the user reads it */
	const char *help;
};

extern const struct srn_setting srn_settings[SRN_SET_COUNT];

/* The value of a WORD, BOOL or INT setting; *set (may be NULL) tells
 * whether the variable was given with a valid value.  A bad value is
 * reported once per process and the default is returned. */
long srn_setting(enum srn_setting_id id, bool *set);

/* A STRING setting: the variable's text, NULL when unset or empty. */
const char *srn_setting_str(enum srn_setting_id id);

/* Checks every variable without the once-only guard; writes one line per
 * bad value to out (if not NULL).  Returns how many are bad. */
int srn_settings_check(FILE *out);

/* Parses text as setting id; 0 and the value in *val, or -1. */
int srn_setting_parse(enum srn_setting_id id, const char *text, long *val);

/* Shorthands. */
static inline enum srn_log_level srn_log_level(void)
{
	return (enum srn_log_level)srn_setting(SRN_SET_LOG, NULL);
}

static inline bool srn_log_debug(void)
{
	return srn_log_level() >= SRN_LOG_DEBUG;
}

#endif
