/* net/roce_port: hand-over of UDP port 4791 between the engines of one
 * address (see roce_port.h). */
#include "net/roce_port.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Port 4791 is per address and per network namespace: so is the FIFO
 * (/dev/shm is shared by namespaces). */
static void fifo_path(struct net_roce_port *p, int family, const uint8_t *ip)
{
	struct stat st;
	unsigned long long ns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
	int len = family == AF_INET ? 4 : 16;
	char hex[33];

	for (int i = 0; i < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", ip[i]);
	snprintf(p->path, sizeof(p->path), "/dev/shm/softrnic-port4791-%llx-%s", ns, hex);
}

/* Open the FIFO (creating it), non-blocking; -1 if it is not one. */
static int fifo_open(const char *path, int flags)
{
	struct stat st;
	bool made = false;
	int fd = -1;

	/* bounded: a holder may remove it between our mkfifo and open */
	for (int tries = 0; tries < 3 && fd < 0; tries++) {
		fd = open(path, flags | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 && errno != ENOENT)
			return -1;
		if (fd < 0)
			made = mkfifo(path, 0666) == 0; /* EEXIST: a racing engine's */
	}
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode)) {
		close(fd);
		return -1;
	}
	/* every user's engines share the address: past the umask */
	if (made)
		(void)fchmod(fd, 0666);
	return fd;
}

void net_roce_port_begin(struct net_roce_port *p, int family, const uint8_t *ip)
{
	net_roce_port_close(p);
	fifo_path(p, family, ip);
	/* O_RDWR: a FIFO opened for writing alone, non-blocking, needs a
	 * reader already (ENXIO); this end is both */
	p->fd = fifo_open(p->path, O_RDWR);
}

int net_roce_port_end(struct net_roce_port *p, bool held, int sock_fd)
{
	int fd;

	if (p->fd < 0)
		return -1;
	if (held) {
		fd = fcntl(p->fd, F_DUPFD_CLOEXEC, sock_fd + 1);
		if (fd >= 0) {
			close(p->fd);
			p->fd = fd;
		}
		p->held = true;
		return -1;
	}
	/* the read end while our write end is still open (see roce_port.h) */
	fd = fifo_open(p->path, O_RDONLY);
	close(p->fd);
	p->fd = fd;
	p->held = false;
	return fd;
}

void net_roce_port_close(struct net_roce_port *p)
{
	bool held = p->held;
	int w;

	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	p->held = false;
	if (!held)
		return;
	/* Nobody waits (a write-only open finds no reader: ENXIO): remove
	 * the file, rather than leave one per address and namespace ever
	 * used.  An engine that opens it meanwhile makes its own again. */
	w = open(p->path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	if (w >= 0)
		close(w);
	else if (errno == ENXIO)
		unlink(p->path);
}

void net_roce_port_drain(struct net_roce_port *p)
{
	char buf[256];

	/* bounded: the pipe holds at most its buffer */
	for (int i = 0; i < 1024 && p->fd >= 0; i++)
		if (read(p->fd, buf, sizeof(buf)) <= 0)
			break;
}
