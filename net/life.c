/* The life page (see life.h).
 *
 * The kernel's robust-futex ABI: each thread may register one list head
 * (set_robust_list); at the thread's end the kernel walks the list and,
 * for each entry whose word holds the thread's id, stores
 * FUTEX_OWNER_DIED in it.  glibc registers a head per thread for robust
 * mutexes; the holder thread here never locks one, so it may register
 * its own head instead, holding just the one entry.  The entry and the
 * word sit in the shared page, so the kernel's store is what peers see.
 */
#include "net/life.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { LIFE_LEN = 4096 };

struct life_page {
	struct robust_list entry;    /* the only entry of the holder's list */
	_Atomic uint32_t word;       /* holder's tid; OWNER_DIED once gone */
};

static pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t life_pid;               /* process the page below belongs to */
static int life_fd = -1;
static uint64_t life_ino;
static struct life_page *life_page;
static struct robust_list_head life_head;
static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static int ready;                    /* 1: word holds the tid, -1: failed */

static void *holder(void *arg)
{
	struct life_page *pg = arg;
	int ok;

	life_head.list.next = &pg->entry;
	life_head.futex_offset = (long)offsetof(struct life_page, word);
	life_head.list_op_pending = NULL;
	pg->entry.next = &life_head.list;
	ok = syscall(SYS_set_robust_list, &life_head, sizeof(life_head)) == 0;
	if (ok)
		atomic_store_explicit(&pg->word, (uint32_t)syscall(SYS_gettid),
				      memory_order_release);
	pthread_mutex_lock(&ready_lock);
	ready = ok ? 1 : -1;
	pthread_cond_broadcast(&ready_cond);
	pthread_mutex_unlock(&ready_lock);
	if (!ok)
		return NULL;
	for (;;)
		pause(); /* every signal is blocked: sleeps until the process ends */
	return NULL;
}

/* Creates the page and its holder thread: 0 or -errno.  life_lock held. */
static int life_start(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	struct stat st;
	void *p;
	int fd, err;

	fd = (int)syscall(SYS_memfd_create, "softrnic-life", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, LIFE_LEN) || fstat(fd, &st) ||
	    (p = mmap(NULL, LIFE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		err = -errno;
		close(fd);
		return err;
	}
	ready = 0;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the holder inherits it */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	err = -pthread_create(&t, &attr, holder, p);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!err) {
		pthread_mutex_lock(&ready_lock);
		while (!ready)
			pthread_cond_wait(&ready_cond, &ready_lock);
		if (ready < 0)
			err = -ENOSYS;
		pthread_mutex_unlock(&ready_lock);
	}
	if (err) {
		munmap(p, LIFE_LEN);
		close(fd);
		return err;
	}
	life_page = p;
	life_fd = fd;
	life_ino = (uint64_t)st.st_ino;
	return 0;
}

int net_life_publish(int32_t *fd, uint64_t *ino)
{
	int err = 0;

	pthread_mutex_lock(&life_lock);
	if (life_pid != getpid()) {
		/* a fork child: the inherited page speaks for the parent
		 * (its holder thread was not copied); keep the mapping and
		 * fd, harmlessly, and make our own */
		life_page = NULL;
		life_fd = -1;
		err = life_start();
		if (!err)
			life_pid = getpid();
	}
	if (!err) {
		*fd = life_fd;
		*ino = life_ino;
	}
	pthread_mutex_unlock(&life_lock);
	return err;
}

const _Atomic uint32_t *net_life_map(int pid, int32_t fd, uint64_t ino)
{
	char path[48];
	struct stat st;
	void *p;
	int f;

	if (pid <= 0 || fd < 0 || !ino)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, (int)fd);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return NULL;
	if (fstat(f, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_ino != ino ||
	    st.st_size < LIFE_LEN) {
		close(f);
		return NULL;
	}
	p = mmap(NULL, LIFE_LEN, PROT_READ, MAP_SHARED, f, 0);
	close(f);
	if (p == MAP_FAILED)
		return NULL;
	return &((struct life_page *)p)->word;
}

void net_life_unmap(const _Atomic uint32_t *word)
{
	if (word)
		munmap((char *)(uintptr_t)word - offsetof(struct life_page, word), LIFE_LEN);
}
