/* Helpers every C test shares: check counters, the final
 * "N passed, N failed" line, skip, a deterministic random source, a
 * monotonic clock and a call run on a thread of its own.  Header-only and
 * static, because each test is one executable built from one .c file. */
#ifndef T_UTIL_H
#define T_UTIL_H

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Exit statuses, as CTest's SKIP_RETURN_CODE and liburing use them. */
enum { T_EXIT_PASS = 0, T_EXIT_FAIL = 1, T_EXIT_SKIP = 77 };

/* Failures printed before the rest are only counted: loops of a million
 * checks must not flood the log. */
#ifndef T_FAIL_PRINT_MAX
#define T_FAIL_PRINT_MAX 50
#endif

static int t_checks __attribute__((unused)); /* checks run */
static int t_fails __attribute__((unused));  /* checks failed */
static char t_tag[32] __attribute__((unused)); /* who failed, in forked tests */

/* Line-buffered stdout: output survives a crash and is not duplicated by
 * fork() (tests fork children and re-exec themselves). */
__attribute__((constructor)) static inline void t_stdout_setup(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* Names the process in its FAIL lines ("FAIL [proc 3] ..."). */
__attribute__((format(printf, 1, 2), unused))
static inline void t_set_tag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t_tag, sizeof(t_tag), fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 4, 0)))
static inline void t_vreport(const char *what, const char *file, int line, const char *fmt,
			     va_list ap)
{
	printf("%s%s%s%s %s:%d: ", what, t_tag[0] ? " [" : "", t_tag, t_tag[0] ? "]" : "",
	       file, line);
	vprintf(fmt, ap);
}

/* Counts a failed check and prints it (the first T_FAIL_PRINT_MAX). */
__attribute__((format(printf, 4, 5)))
static inline void t_fail_(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;

	if (++t_fails > T_FAIL_PRINT_MAX) {
		if (t_fails == T_FAIL_PRINT_MAX + 1)
			printf("(further failures are counted, not printed)\n");
		return;
	}
	va_start(ap, fmt);
	t_vreport("FAIL", file, line, fmt, ap);
	va_end(ap);
	printf(" (%s)\n", cond);
	fflush(stdout);
}

/* T_CHECK(cond, fmt, ...): counts the check; prints only a failure, with
 * where it is and the condition.  The message arguments are evaluated
 * only on failure, so a check in a tight loop costs a compare. */
#define T_CHECK(cond, ...)                                              \
	do {                                                            \
		t_checks++;                                             \
		if (!(cond))                                            \
			t_fail_(__FILE__, __LINE__, #cond, __VA_ARGS__); \
	} while (0)

/* Prints "ok   - message" or "FAIL - message" with where and what failed. */
__attribute__((format(printf, 5, 6)))
static inline void t_ok_(int ok, const char *file, int line, const char *cond,
			 const char *fmt, ...)
{
	va_list ap;

	t_checks++;
	if (!ok)
		t_fails++;
	printf("%s - ", ok ? "ok  " : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!ok)
		printf("       (%s:%d: %s)\n", file, line, cond);
	fflush(stdout);
}

/* T_OK(cond, fmt, ...): like T_CHECK, but a passing check is printed too
 * (one line per check, TAP-like).  cond is evaluated before the message
 * arguments, which may show what cond changed. */
#define T_OK(cond, ...)                                                 \
	do {                                                            \
		int t_ok_v_ = !!(cond);                                 \
		t_ok_(t_ok_v_, __FILE__, __LINE__, #cond, __VA_ARGS__); \
	} while (0)

/* T_ASSERT(cond, fmt, ...): a check that ends the process (status 1)
 * when it fails, for children whose parent judges them by exit status. */
#define T_ASSERT(cond, ...)                                             \
	do {                                                            \
		int t_fails_before_ = t_fails;                          \
		T_CHECK(cond, __VA_ARGS__);                             \
		if (t_fails != t_fails_before_)                         \
			exit(T_EXIT_FAIL);                              \
	} while (0)

/* Prints "N passed, N failed" (what CI reads) and returns the exit
 * status: return t_summary(); ends main. */
static inline int t_summary(void)
{
	printf("%d passed, %d failed\n", t_checks - t_fails, t_fails);
	return t_fails ? T_EXIT_FAIL : T_EXIT_PASS;
}

/* Prints "SKIP: reason" and exits 77. */
__attribute__((format(printf, 1, 2), noreturn, unused))
static inline void t_skip(const char *fmt, ...)
{
	va_list ap;

	printf("SKIP: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(T_EXIT_SKIP);
}

/* A failure the test cannot go on from (setup, missing input): counts and
 * prints it as "FAIL: reason", then the summary, and exits 1. */
__attribute__((format(printf, 1, 2), noreturn, unused))
static inline void t_bail(const char *fmt, ...)
{
	va_list ap;

	t_checks++;
	t_fails++;
	printf("FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(t_summary());
}

/* xorshift64 (Marsaglia): fast and seeded, so a failing run repeats. */
static uint64_t t_rng __attribute__((unused)) = 0x9e3779b97f4a7c15ull;

static inline void t_rand_seed(uint64_t seed)
{
	t_rng = seed;
}

static inline uint64_t t_rand64(void)
{
	t_rng ^= t_rng << 13;
	t_rng ^= t_rng >> 7;
	t_rng ^= t_rng << 17;
	return t_rng;
}

/* 32 bits from the middle of the state. */
static inline uint32_t t_rand(void)
{
	return (uint32_t)(t_rand64() >> 16);
}

/* Monotonic time in seconds. */
static inline double t_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline void t_sig_noop_(int sig)
{
	(void)sig;
}

/* A handler that does nothing for sig, installed with sigaction flags
 * (SA_RESTART or 0): the signal then only ends (or, with SA_RESTART,
 * does not end) the system call the thread it hits waits in. */
static inline void t_sig_noop(int sig, int flags)
{
	struct sigaction sa = { .sa_handler = t_sig_noop_, .sa_flags = flags };

	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

/* A call run on a thread of its own, to check that it blocks (a destroy
 * waiting for an ack, say): start it, look at done, unblock it, wait. */
struct t_bg {
	int (*fn)(void *arg);
	void *arg;
	atomic_int done;             /* 1 once fn has returned */
	int ret;                     /* what fn returned */
	pthread_t th;
};

static inline void *t_bg_main_(void *p)
{
	struct t_bg *b = p;

	b->ret = b->fn(b->arg);
	atomic_store(&b->done, 1);
	return NULL;
}

/* Returns 0, or the pthread_create error. */
static inline int t_bg_start(struct t_bg *b, int (*fn)(void *), void *arg)
{
	b->fn = fn;
	b->arg = arg;
	b->ret = -1;
	atomic_store(&b->done, 0);
	return pthread_create(&b->th, NULL, t_bg_main_, b);
}

static inline int t_bg_done(struct t_bg *b)
{
	return atomic_load(&b->done);
}

/* Waits up to ms for fn to return and, if it did, joins the thread;
 * returns 1 if it returned.  A call still blocked is left running. */
static inline int t_bg_wait(struct t_bg *b, int ms)
{
	for (int i = 0; i < ms && !t_bg_done(b); i++)
		usleep(1000);
	if (!t_bg_done(b))
		return 0;
	pthread_join(b->th, NULL);
	return 1;
}

#endif
