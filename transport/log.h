/* transport/log: what softrnic says on stderr, by SOFTRNIC_LOG level
 * (error, warn, info, debug, trace; net/settings.h).  One line per event:
 *   softrnic[PID]: DEV LEVEL: qp QPN (STATE) psn PSN: what happened
 * QP states by name (RESET, INIT, RTR, RTS, SQD, SQE, ERR).  Lines from
 * the receive path, where a peer decides how many events there are, go
 * through a rate limiter per reason: at most a few a second, then one
 * line saying how many were suppressed. */
#ifndef TRANSPORT_LOG_H
#define TRANSPORT_LOG_H

#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/settings.h"

/* One reason's limiter: static at its call site, zero-initialized but
 * for the reason. */
struct srn_ratelimit {
	const char *reason;             /* named in the "suppressed" line */
	uint32_t per_sec;               /* 0: SRN_LOG_RATE */
	_Atomic uint64_t start_ns;      /* this window's start */
	_Atomic uint32_t used;          /* lines let out in it */
	_Atomic uint32_t suppressed;    /* lines held back since the last report */
};

enum { SRN_LOG_RATE = 10 };             /* lines a second per reason */

/* May a line of rl's reason go out at now_ns (at most per_sec in each
 * second-long window)?  When it may and lines were held back before it,
 * *suppressed is their count (else 0): report it first. */
bool srn_ratelimit_allow(struct srn_ratelimit *rl, uint64_t now_ns, uint32_t per_sec,
			 uint32_t *suppressed);

/* "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"; "UNKNOWN(n)" is
 * not given: any other value is "?". */
const char *srn_qp_state_name(enum ibv_qp_state s);
/* "error" .. "trace". */
const char *srn_log_level_name(enum srn_log_level l);

struct srn_engine;
struct srn_rc_state;

/* Is level on for eng (NULL: no)? */
bool srn_log_on(const struct srn_engine *eng, enum srn_log_level level);

/* A line about the device of eng; rl NULL for no rate limit. */
void srn_log(struct srn_engine *eng, enum srn_log_level level, struct srn_ratelimit *rl,
	     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A line about rc, with its QPN, state and the PSN the event concerns. */
void srn_log_qp(struct srn_rc_state *rc, enum srn_log_level level, struct srn_ratelimit *rl,
		uint32_t psn, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Format one line into buf (n bytes) as srn_log does, for tests. */
int srn_log_format(char *buf, size_t n, int pid, const char *dev, enum srn_log_level level,
		   const char *qp_part, const char *msg);

#endif
