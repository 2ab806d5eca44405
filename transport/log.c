/* transport/log: see log.h. */
#include "transport/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "transport/engine.h"
#include "transport/rc.h"

bool srn_ratelimit_allow(struct srn_ratelimit *rl, uint64_t now_ns, uint32_t per_sec,
			 uint32_t *suppressed)
{
	uint64_t start = atomic_load_explicit(&rl->start_ns, memory_order_relaxed);

	*suppressed = 0;
	if (start == 0 || now_ns - start >= 1000000000ull) {
		/* a new window: one thread opens it, the others count in it */
		if (atomic_compare_exchange_strong(&rl->start_ns, &start, now_ns ? now_ns : 1))
			atomic_store(&rl->used, 0);
	}
	if (atomic_fetch_add(&rl->used, 1) >= per_sec) {
		atomic_fetch_add(&rl->suppressed, 1);
		return false;
	}
	*suppressed = atomic_exchange(&rl->suppressed, 0);
	return true;
}

const char *srn_qp_state_name(enum ibv_qp_state s)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS",     [IBV_QPS_SQD] = "SQD",   [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	return (unsigned int)s < sizeof(names) / sizeof(names[0]) && names[s] ? names[s] : "?";
}

const char *srn_log_level_name(enum srn_log_level l)
{
	static const char *const names[] = { "error", "warn", "info", "debug", "trace" };

	return (unsigned int)l < sizeof(names) / sizeof(names[0]) ? names[l] : "?";
}

bool srn_log_on(const struct srn_engine *eng, enum srn_log_level level)
{
	return eng && eng->log_level >= level;
}

int srn_log_format(char *buf, size_t n, int pid, const char *dev, enum srn_log_level level,
		   const char *qp_part, const char *msg)
{
	return snprintf(buf, n, "softrnic[%d]: %s %s: %s%s\n", pid, dev,
			srn_log_level_name(level), qp_part ? qp_part : "", msg);
}

/* One write(2) per line: lines of several threads and processes sharing
 * stderr do not interleave. */
static void emit(struct srn_engine *eng, enum srn_log_level level, struct srn_ratelimit *rl,
		 const char *qp_part, const char *fmt, va_list ap)
{
	const char *dev = eng->ctx && eng->ctx->dev ? eng->ctx->dev->ibdev.name : "?";
	char msg[512], line[768];
	uint32_t held = 0;
	int len;

	if (rl && !srn_ratelimit_allow(rl, srn_now_ns(), rl->per_sec ? rl->per_sec : SRN_LOG_RATE,
				       &held))
		return;
	if (held) {
		snprintf(msg, sizeof(msg), "%s: %u similar lines suppressed", rl->reason, held);
		len = srn_log_format(line, sizeof(line), (int)getpid(), dev, level, NULL, msg);
		if (len > 0)
			(void)!write(2, line, (size_t)len < sizeof(line) ? (size_t)len : sizeof(line) - 1);
	}
	vsnprintf(msg, sizeof(msg), fmt, ap);
	len = srn_log_format(line, sizeof(line), (int)getpid(), dev, level, qp_part, msg);
	if (len > 0)
		(void)!write(2, line, (size_t)len < sizeof(line) ? (size_t)len : sizeof(line) - 1);
}

void srn_log(struct srn_engine *eng, enum srn_log_level level, struct srn_ratelimit *rl,
	     const char *fmt, ...)
{
	va_list ap;

	if (!srn_log_on(eng, level))
		return;
	va_start(ap, fmt);
	emit(eng, level, rl, NULL, fmt, ap);
	va_end(ap);
}

void srn_log_qp(struct srn_rc_state *rc, enum srn_log_level level, struct srn_ratelimit *rl,
		uint32_t psn, const char *fmt, ...)
{
	char qp_part[64];
	va_list ap;

	if (!rc || !srn_log_on(rc->eng, level))
		return;
	snprintf(qp_part, sizeof(qp_part), "qp %u (%s) psn %u: ", rc->qpn,
		 srn_qp_state_name(rc_state(rc)), psn & 0xffffff);
	va_start(ap, fmt);
	emit(rc->eng, level, rl, qp_part, fmt, ap);
	va_end(ap);
}
