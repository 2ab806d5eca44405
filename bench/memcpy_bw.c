/* Baseline: single-core memcpy bandwidth between two buffers, the ceiling
 * for a same-host copy of a message whose size is SIZE.
 * Usage: memcpy_bw [-s SIZE (default 1M)] [-t SECONDS (default 0.5)]
 * Prints: memcpy_bw size S: X.XX GB/s   (GB = 1e9 bytes) */
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	size_t size = 1 << 20;
	double secs = 0.5;
	int opt;

	while ((opt = getopt(argc, argv, "s:t:")) != -1) {
		if (opt == 's')
			size = bench_parse_size(optarg);
		else if (opt == 't')
			secs = atof(optarg);
		else
			return 2;
	}
	if (size == 0 || secs <= 0) {
		fprintf(stderr, "memcpy_bw: bad size or time\n");
		return 2;
	}
	char *src = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	char *dst = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	if (!src || !dst) {
		perror("memcpy_bw: alloc");
		return 1;
	}
	memset(src, 0x5a, size);
	memset(dst, 0, size);	/* fault the pages in before timing */

	/* Copy in rounds of about 64 MiB so the clock is read rarely. */
	size_t per_round = size >= (64u << 20) ? 1 : (64u << 20) / size;
	double t0 = bench_now_s(), t;
	unsigned long long copies = 0;
	volatile char sink = 0;
	do {
		for (size_t i = 0; i < per_round; i++) {
			memcpy(dst, src, size);
			/* Keeps the compiler from dropping repeated copies. */
			sink = sink + dst[copies % size];
			src[0]++;
			copies++;
		}
		t = bench_now_s();
	} while (t - t0 < secs);
	printf("memcpy_bw size %zu copies %llu: %.2f GB/s\n", size, copies,
	       (double)copies * (double)size / (t - t0) / 1e9);
	free(src);
	free(dst);
	return 0;
}
