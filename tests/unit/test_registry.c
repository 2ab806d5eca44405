/* net/registry: QPNs unique across processes; a SIGKILLed owner's QPNs
 * are reclaimed; lookups return the owner's port. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/registry.h"

#define NPROC 4
#define PER 200

static int failures;
#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "FAIL %d: ", __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } } while (0)

int main(void)
{
	char dev[64];
	int pipes[NPROC][2];
	pid_t pids[NPROC];
	static uint32_t all[NPROC * PER];
	static unsigned char seen[NET_REG_SLOTS];
	struct net_registry *reg;
	uint16_t port;
	int fam, n = 0;

	snprintf(dev, sizeof(dev), "test%d", (int)getpid());
	alarm(60);
	/* Several processes allocate at once: no QPN handed out twice. */
	for (int p = 0; p < NPROC; p++) {
		if (pipe(pipes[p]))
			return 1;
		pids[p] = fork();
		if (pids[p] == 0) {
			struct net_registry *r = net_registry_open(dev);

			if (!r)
				_exit(2);
			for (int i = 0; i < PER; i++) {
				uint32_t q;

				if (net_registry_alloc(r, (uint16_t)(5000 + p), AF_INET, &q))
					_exit(3);
				if (write(pipes[p][1], &q, sizeof(q)) != sizeof(q))
					_exit(4);
			}
			close(pipes[p][1]);
			/* Stay alive owning the QPNs (a dead owner's slots are
			 * fair game); killed below. */
			pause();
			_exit(0);
		}
		close(pipes[p][1]);
	}
	for (int p = 0; p < NPROC; p++) {
		uint32_t q;

		while (read(pipes[p][0], &q, sizeof(q)) == sizeof(q))
			all[n++] = q;
	}
	CHECK(n == NPROC * PER, "got %d QPNs", n);
	for (int i = 0; i < n; i++) {
		CHECK(all[i] >= NET_REG_FIRST_QPN && all[i] < NET_REG_SLOTS, "qpn %u range", all[i]);
		CHECK(!seen[all[i]], "qpn %u handed out twice", all[i]);
		seen[all[i]] = 1;
	}
	printf("%d processes x %d QPNs: all distinct, none is 0 or 1\n", NPROC, PER);

	reg = net_registry_open(dev);
	CHECK(reg != NULL, "open");
	/* process 0 is alive (paused): its QPNs resolve to its port */
	CHECK(net_registry_lookup(reg, all[0], &port, &fam) == 0 && port == 5000 &&
	      fam == AF_INET, "lookup live owner");
	CHECK(net_registry_owner(reg, all[0]) == pids[0], "owner pid");
	printf("lookup of a live process's QPN gives its port\n");

	for (int p = 0; p < NPROC; p++) {
		int st;

		kill(pids[p], SIGKILL);
		waitpid(pids[p], &st, 0);
		CHECK(WIFSIGNALED(st), "child %d status %d", p, st);
	}
	/* Every process is gone now: allocating the whole space must reuse
	 * their slots (dead owners are reclaimed lazily). */
	{
		uint32_t q, got = 0, want = NET_REG_SLOTS - NET_REG_FIRST_QPN;

		while (got < want && net_registry_alloc(reg, 6000, AF_INET, &q) == 0)
			got++;
		CHECK(got == want, "reclaimed the whole space: %u of %u", got, want);
		CHECK(net_registry_alloc(reg, 6000, AF_INET, &q) == -ENOSPC, "full -> ENOSPC");
		CHECK(net_registry_lookup(reg, all[0], &port, &fam) == 0 && port == 6000,
		      "SIGKILLed process's QPN now ours");
		net_registry_free(reg, all[0]);
		CHECK(net_registry_lookup(reg, all[0], &port, &fam) == -ENOENT, "freed");
		CHECK(net_registry_alloc(reg, 6001, AF_INET, &q) == 0 && q == all[0],
		      "freed slot reused");
	}
	printf("SIGKILLed owner's QPNs reclaimed; free/lookup/ENOSPC ok\n");
	net_registry_close(reg);
	{
		char path[128];

		snprintf(path, sizeof(path), "/dev/shm/softrnic-%s-v3", dev);
		unlink(path);
	}
	printf("%s\n", failures ? "FAILED" : "PASS");
	return failures ? 1 : 0;
}
