/* Small helpers shared by the baseline programs in bench/ (header only so
 * each program stays a single translation unit). */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static inline double bench_now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of n samples (sorts them in place). */
static inline double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Parses sizes such as 64, 64K, 1M. */
static inline size_t bench_parse_size(const char *s)
{
	char *end;
	size_t v = strtoull(s, &end, 0);

	if (*end == 'k' || *end == 'K')
		v <<= 10;
	else if (*end == 'm' || *end == 'M')
		v <<= 20;
	return v;
}

/* A UDP socket bound to 127.0.0.1 on a free port; *sa gets its address.
 * Exits with a message naming the program on failure. */
static inline int bench_udp_loopback(struct sockaddr_in *sa, const char *who)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	socklen_t l = sizeof(*sa);

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)sa, sizeof(*sa)) ||
	    getsockname(fd, (struct sockaddr *)sa, &l)) {
		fprintf(stderr, "%s: socket: ", who);
		perror(NULL);
		exit(1);
	}
	return fd;
}

#endif
