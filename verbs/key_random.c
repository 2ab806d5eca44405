/* The per-process pool of random bits for MR keys (key_random.h). */
#include "verbs/key_random.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <unistd.h>

#define POOL_WORDS 64

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t pool[POOL_WORDS];
static unsigned int left;            /* unused words at the pool's start */
static pid_t pool_pid;

/* getrandom blocks only until the kernel's pool is first seeded (early
 * boot); /dev/urandom is for kernels without the system call. */
static bool refill(void)
{
	size_t got = 0;
	int fd;

	while (got < sizeof(pool)) {
		ssize_t n = getrandom((char *)pool + got, sizeof(pool) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof(pool) && (fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) >= 0) {
		for (int tries = 0; got < sizeof(pool) && tries < 16; tries++) {
			ssize_t n = read(fd, (char *)pool + got, sizeof(pool) - got);

			if (n > 0)
				got += (size_t)n;
			else if (n == 0 || errno != EINTR)
				break;
		}
		close(fd);
	}
	if (got < sizeof(pool))
		return false;
	left = POOL_WORDS;
	return true;
}

bool srn_key_random32(uint32_t *out)
{
	bool ok = true;

	pthread_mutex_lock(&pool_lock);
	if (pool_pid != getpid()) {
		left = 0;
		pool_pid = getpid();
	}
	if (!left)
		ok = refill();
	if (ok) {
		*out = pool[--left];
		pool[left] = 0; /* a used word is not kept around */
	}
	pthread_mutex_unlock(&pool_lock);
	return ok;
}
