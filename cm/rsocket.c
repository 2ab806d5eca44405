/* rsockets (sockets over RDMA) are not built yet.  rsocket() fails with
 * ENOSYS, so no rsocket descriptor can exist; the per-descriptor calls
 * therefore fail with ENOSYS as well.  rpoll()/rselect() must still work
 * on ordinary descriptors (rstream and riostream mix them), so they are
 * exactly poll()/select(). */
#include <errno.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>

#include "verbs/stub.h"

/* Stubs accept and ignore every argument. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define R_UNSUPPORTED SRN_STUB_MINUS1(ENOSYS)

SRN_STUB int rsocket(int domain, int type, int protocol) { R_UNSUPPORTED; }
SRN_STUB int rbind(int s, const struct sockaddr *a, socklen_t l) { R_UNSUPPORTED; }
SRN_STUB int rlisten(int s, int backlog) { R_UNSUPPORTED; }
SRN_STUB int raccept(int s, struct sockaddr *a, socklen_t *l) { R_UNSUPPORTED; }
SRN_STUB int rconnect(int s, const struct sockaddr *a, socklen_t l) { R_UNSUPPORTED; }
SRN_STUB int rshutdown(int s, int how) { R_UNSUPPORTED; }
SRN_STUB int rclose(int s) { R_UNSUPPORTED; }

SRN_STUB ssize_t rrecv(int s, void *buf, size_t len, int flags) { R_UNSUPPORTED; }
SRN_STUB ssize_t rrecvfrom(int s, void *buf, size_t len, int flags,
			   struct sockaddr *src, socklen_t *l) { R_UNSUPPORTED; }
SRN_STUB ssize_t rrecvmsg(int s, struct msghdr *msg, int flags) { R_UNSUPPORTED; }
SRN_STUB ssize_t rsend(int s, const void *buf, size_t len, int flags) { R_UNSUPPORTED; }
SRN_STUB ssize_t rsendto(int s, const void *buf, size_t len, int flags,
			 const struct sockaddr *dst, socklen_t l) { R_UNSUPPORTED; }
SRN_STUB ssize_t rsendmsg(int s, const struct msghdr *msg, int flags) { R_UNSUPPORTED; }
SRN_STUB ssize_t rread(int s, void *buf, size_t count) { R_UNSUPPORTED; }
SRN_STUB ssize_t rreadv(int s, const struct iovec *iov, int iovcnt) { R_UNSUPPORTED; }
SRN_STUB ssize_t rwrite(int s, const void *buf, size_t count) { R_UNSUPPORTED; }
SRN_STUB ssize_t rwritev(int s, const struct iovec *iov, int iovcnt) { R_UNSUPPORTED; }

SRN_STUB int rgetpeername(int s, struct sockaddr *a, socklen_t *l) { R_UNSUPPORTED; }
SRN_STUB int rgetsockname(int s, struct sockaddr *a, socklen_t *l) { R_UNSUPPORTED; }
SRN_STUB int rsetsockopt(int s, int level, int optname, const void *optval,
			 socklen_t optlen) { R_UNSUPPORTED; }
SRN_STUB int rgetsockopt(int s, int level, int optname, void *optval,
			 socklen_t *optlen) { R_UNSUPPORTED; }
SRN_STUB int rfcntl(int s, int cmd, ...) { R_UNSUPPORTED; }

SRN_STUB off_t riomap(int s, void *buf, size_t len, int prot, int flags,
		      off_t offset) { R_UNSUPPORTED; }
SRN_STUB int riounmap(int s, void *buf, size_t len) { R_UNSUPPORTED; }

/* Returns size_t, so the error is (size_t)-1 like rdma-core's. */
SRN_STUB size_t riowrite(int s, const void *buf, size_t count, off_t offset,
			 int flags)
{
	errno = ENOSYS;
	return (size_t)-1;
}

SRN_STUB int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return poll(fds, nfds, timeout);
}

SRN_STUB int rselect(int nfds, fd_set *readfds, fd_set *writefds,
		     fd_set *exceptfds, struct timeval *timeout)
{
	return select(nfds, readfds, writefds, exceptfds, timeout);
}
