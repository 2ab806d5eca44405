/* transport/log: the rate limiter (on a clock the test moves, then from
 * four threads at once), QP state and level names, and the lines
 * themselves: srn_log_qp writing into a file in place of stderr must
 * give "softrnic[PID]: DEV LEVEL: qp N (STATE) psn P: ...", at most
 * SRN_LOG_RATE a second for one reason, then one "suppressed" line with
 * the count, and nothing below the level asked for. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/t_util.h"
#include "transport/engine.h"
#include "transport/log.h"
#include "transport/rc.h"

enum { SEC = 1000000000, THREADS = 4, CALLS = 1000 };

static void limiter_clock(void)
{
	struct srn_ratelimit rl = { .reason = "test" };
	uint64_t t0 = 5ull * SEC;
	uint32_t held;
	int allowed = 0;

	printf("rate limiter, 3 a second, on a test clock\n");
	for (int i = 0; i < 10; i++)
		allowed += srn_ratelimit_allow(&rl, t0 + (uint64_t)i * 1000, 3, &held);
	T_CHECK(allowed == 3, "%d of 10 allowed in one second", allowed);
	T_CHECK(!srn_ratelimit_allow(&rl, t0 + SEC / 2, 3, &held), "allowed within the second");
	T_CHECK(srn_ratelimit_allow(&rl, t0 + SEC, 3, &held), "refused in the next second");
	T_CHECK(held == 8, "suppressed %u, want 8", held);
	T_CHECK(srn_ratelimit_allow(&rl, t0 + SEC + 1, 3, &held) && held == 0,
		"count reported twice (%u)", held);
	/* a long quiet: the next line goes out at once */
	T_CHECK(srn_ratelimit_allow(&rl, t0 + 100ull * SEC, 3, &held) && held == 0,
		"after a quiet minute");
}

static struct srn_ratelimit shared = { .reason = "threads" };
static _Atomic int allowed_total;
static _Atomic uint32_t held_total;

static void *hammer(void *arg)
{
	(void)arg;
	for (int i = 0; i < CALLS; i++) {
		uint32_t held;

		if (srn_ratelimit_allow(&shared, 7ull * SEC, 20, &held))
			atomic_fetch_add(&allowed_total, 1);
		atomic_fetch_add(&held_total, held);
	}
	return NULL;
}

static void limiter_threads(void)
{
	pthread_t th[THREADS];
	uint32_t held;

	printf("rate limiter, 20 a second, %d threads x %d lines in one instant\n", THREADS,
	       CALLS);
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, hammer, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	T_CHECK(atomic_load(&allowed_total) == 20, "%d allowed", atomic_load(&allowed_total));
	T_CHECK(srn_ratelimit_allow(&shared, 8ull * SEC, 20, &held), "next second");
	T_CHECK(held + atomic_load(&held_total) == THREADS * CALLS - 20,
		"suppressed %u, want %d", held + atomic_load(&held_total), THREADS * CALLS - 20);
}

static void names(void)
{
	static const char *const want[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	printf("state and level names\n");
	for (int s = IBV_QPS_RESET; s <= IBV_QPS_ERR; s++)
		T_CHECK(!strcmp(srn_qp_state_name((enum ibv_qp_state)s), want[s]), "state %d: %s", s,
			srn_qp_state_name((enum ibv_qp_state)s));
	T_CHECK(!strcmp(srn_qp_state_name((enum ibv_qp_state)99), "?"), "state 99");
	T_CHECK(!strcmp(srn_log_level_name(SRN_LOG_ERROR), "error") &&
		!strcmp(srn_log_level_name(SRN_LOG_TRACE), "trace"), "level names");
}

static int count_lines(const char *path, const char *has)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int n = 0;

	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, has) != NULL;
	if (f)
		fclose(f);
	return n;
}

static void lines(void)
{
	static struct srn_device dev;
	static struct srn_context ctx;
	static struct srn_engine eng;
	static struct srn_qp qp;
	static struct srn_rc_state rc;
	static struct srn_ratelimit rl = { .reason = "drop: test" };
	char path[] = "/tmp/srn_test_log_XXXXXX", want[128];
	struct timespec gap = { 1, 100 * 1000 * 1000 };
	int fd = mkstemp(path), saved = dup(2);

	printf("lines through srn_log_qp into %s\n", path);
	if (fd < 0 || saved < 0)
		return;
	snprintf(dev.ibdev.name, sizeof(dev.ibdev.name), "srn_test");
	ctx.dev = &dev;
	eng.ctx = &ctx;
	eng.log_level = SRN_LOG_DEBUG;
	qp.a.attr.qp_state = IBV_QPS_RTS;
	rc.qp = &qp;
	rc.eng = &eng;
	rc.qpn = 77;
	dup2(fd, 2);
	for (int i = 0; i < 25; i++)
		srn_log_qp(&rc, SRN_LOG_DEBUG, &rl, 5, "drop: test %d", i);
	srn_log_qp(&rc, SRN_LOG_TRACE, NULL, 5, "below the level");
	srn_log(NULL, SRN_LOG_ERROR, NULL, "no engine");
	nanosleep(&gap, NULL); /* the next window */
	srn_log_qp(&rc, SRN_LOG_DEBUG, &rl, 6, "drop: test last");
	dup2(saved, 2);
	close(saved);
	close(fd);
	snprintf(want, sizeof(want), "softrnic[%d]: srn_test debug: qp 77 (RTS) psn 5: drop: test ",
		 (int)getpid());
	T_CHECK(count_lines(path, want) == SRN_LOG_RATE, "%d lines in the first second, want %d",
		count_lines(path, want), SRN_LOG_RATE);
	T_CHECK(count_lines(path, "srn_test debug: drop: test: 15 similar lines suppressed") == 1,
		"no suppressed line with the count");
	T_CHECK(count_lines(path, "qp 77 (RTS) psn 6: drop: test last") == 1, "last line");
	T_CHECK(count_lines(path, "below the level") == 0, "a trace line at debug");
	T_CHECK(count_lines(path, "no engine") == 0, "a line without an engine");
	unlink(path);
}

int main(void)
{
	limiter_clock();
	limiter_threads();
	names();
	lines();
	return t_summary();
}
