/* Baseline: process_vm_writev bandwidth from one process into another (the
 * single-copy fallback a same-host RDMA WRITE can use without mapping the
 * target's memory).  A forked child owns the destination buffer and waits.
 * Usage: vm_writev_bw [-s SIZE (default 1M)] [-t SECONDS (default 0.5)]
 * Prints: vm_writev_bw size S: X.XX GB/s; exits 3 when the kernel refuses
 * process_vm_writev (ptrace restrictions). */
#include "bench_util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	size_t size = 1 << 20;
	double secs = 0.5;
	int opt, ready[2], done[2], rc = 0;

	while ((opt = getopt(argc, argv, "s:t:")) != -1) {
		if (opt == 's')
			size = bench_parse_size(optarg);
		else if (opt == 't')
			secs = atof(optarg);
		else
			return 2;
	}
	char *src = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	char *dst = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	if (!src || !dst || pipe(ready) || pipe(done)) {
		perror("vm_writev_bw: setup");
		return 1;
	}
	memset(src, 0x5a, size);
	pid_t pid = fork();
	if (pid < 0) {
		perror("vm_writev_bw: fork");
		return 1;
	}
	if (pid == 0) {
		char c = 1;
		/* Own copies of the pages, so the timed writes see no COW faults. */
		memset(dst, 0, size);
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		alarm(30);	/* never outlive a lost parent by long */
		ssize_t n = read(done[0], &c, 1);
		_exit(n == 1 ? 0 : 1);
	}
	char c;
	if (read(ready[0], &c, 1) != 1) {
		fprintf(stderr, "vm_writev_bw: child did not start\n");
		rc = 1;
		goto out;
	}
	struct iovec l = { src, size }, r = { dst, size };
	double t0 = bench_now_s(), t;
	unsigned long long bytes = 0, calls = 0;
	do {
		ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);
		if (n < 0) {
			fprintf(stderr, "vm_writev_bw: process_vm_writev refused: %s\n",
				strerror(errno));
			rc = 3;
			goto out;
		}
		bytes += (unsigned long long)n;
		calls++;
		t = bench_now_s();
	} while (t - t0 < secs);
	printf("vm_writev_bw size %zu calls %llu: %.2f GB/s\n", size, calls,
	       (double)bytes / (t - t0) / 1e9);
out:
	c = 0;
	if (write(done[1], &c, 1) != 1)
		kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return rc;
}
