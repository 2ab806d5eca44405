/* peer_pipe_open (transport/peer_map.c): how a same-host sender opens the
 * completion-channel pipe a CQ ring names (/proc/PID/fd/N plus the pipe's
 * inode) to wake its owner.  The ring is the peer's to write, so the
 * names are hostile until checked:
 *  - the right pipe opens, and a byte written through it reaches the
 *    owner's read end
 *  - a regular file, a wrong inode, a closed descriptor, a negative one,
 *    inode 0 and a pid that does not exist are refused, and the file is
 *    not written (its size stays 0)
 *  - once the owner closed both of its ends, writes still return (the
 *    pipe is full at worst) and raise no SIGPIPE: this test would die. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/t_util.h"
#include "transport/peer_map.h"

static uint64_t ino_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? 0 : (uint64_t)st.st_ino;
}

int main(void)
{
	char path[] = "/tmp/softrnic-wake-pipe.XXXXXX", c = 0;
	int p[2], file, fd, n = 0;
	struct stat st;
	ssize_t r;

	signal(SIGPIPE, SIG_DFL); /* (a SIGPIPE must kill us: the check) */
	T_ASSERT(pipe(p) == 0, "pipe");
	file = mkstemp(path);
	T_ASSERT(file >= 0, "temporary file");
	unlink(path);

	fd = peer_pipe_open(getpid(), p[0], ino_of(p[0]));
	T_OK(fd >= 0, "the pipe the ring names opens");
	T_OK(fd >= 0 && write(fd, "x", 1) == 1 && read(p[0], &c, 1) == 1 && c == 'x',
	     "a byte written through it reaches the owner's read end");

	T_OK(peer_pipe_open(getpid(), file, ino_of(file)) < 0, "a regular file: refused");
	T_OK(fstat(file, &st) == 0 && st.st_size == 0, "and nothing written to it");
	T_OK(peer_pipe_open(getpid(), p[0], ino_of(p[0]) + 1) < 0, "a wrong inode: refused");
	T_OK(peer_pipe_open(getpid(), p[1] + 100, ino_of(p[0])) < 0, "a closed descriptor: refused");
	T_OK(peer_pipe_open(getpid(), -1, ino_of(p[0])) < 0, "a negative descriptor: refused");
	T_OK(peer_pipe_open(getpid(), p[0], 0) < 0, "inode 0 (no pipe published): refused");
	T_OK(peer_pipe_open(0x7ffffff0, p[0], ino_of(p[0])) < 0, "a pid that is not there: refused");

	/* the owner goes: its ends close; our writes must neither block
	 * nor raise SIGPIPE (bounded: a pipe holds at most a megabyte) */
	close(p[0]);
	close(p[1]);
	while (fd >= 0 && n < (1 << 20) && (r = write(fd, "y", 1)) == 1)
		n++;
	T_OK(fd >= 0 && (n == (1 << 20) || errno == EAGAIN),
	     "with the owner gone, writes go in (%d) until the pipe is full (EAGAIN), no SIGPIPE",
	     n);
	if (fd >= 0)
		close(fd);
	close(file);
	return t_summary();
}
