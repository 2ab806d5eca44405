/* rdma_cm connect/disconnect cycles under valgrind: no definite leak and
 * no memory error in either process, no descriptor growth.
 *
 * This program is the driver and both ends: it starts "server PORT N" and
 * "client PORT N" (itself re-executed) each under
 *   valgrind --leak-check=full --errors-for-leak-kinds=definite
 *            --error-exitcode=42
 * The client connects (with a QP), sees ESTABLISHED, disconnects, sees
 * DISCONNECTED and destroys QP and id, N times; the server accepts each
 * and destroys each connection after DISCONNECTED.  Each end counts its
 * open descriptors after the first cycle (devices, agent and engines are
 * open by then) and after the last: they must be equal.
 *
 * Cycles: SRN_CM_LEAK_CYCLES, default 100 (measured here: the whole run,
 * valgrind start-up included, takes 2-8 s; lower it on a slow machine to
 * stay within a minute).  Skips (77) when valgrind is not installed.
 * In an ASan build (valgrind cannot run one) the ends run alone and
 * LeakSanitizer checks them at exit instead.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "tests/lib/t_cm.h"
#include "tests/lib/t_util.h"

extern char **environ;

enum {
	VG_ERROR_EXIT = 42,          /* valgrind's status when it found errors */
	EV_MS = 20000,               /* an event under valgrind can be slow */
};

/* Port 4791 (README): an engine of ours may take it over mid-test when
 * another test's process that held it exits, and then keeps one more
 * socket open (bound to 4791); a holder also keeps a FIFO open.  Neither
 * is a leak of the connection cycles. */
static bool port4791_machinery(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char path[64], target[256];
	ssize_t n;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
		return (ss.ss_family == AF_INET &&
			ntohs(((struct sockaddr_in *)&ss)->sin_port) == 4791) ||
		       (ss.ss_family == AF_INET6 &&
			ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) == 4791);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = 0;
	return strstr(target, "softrnic-port4791") != NULL;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d) &&
		    !port4791_machinery(atoi(e->d_name)))
			n++;
	closedir(d);
	return n;
}

/* Exit codes of the ends: 0 = fine, 2.. = which step failed. */
static int server_main(int port, int cycles, int ready_fd)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = t_cm_loopback(port);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c;
	int fds0 = -1, fds1;

	alarm(300);
	if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 8))
		return 2;
	/* "listening" on the pipe the driver named (not a fixed fd 3:
	 * valgrind's start-up takes low descriptors for itself) */
	if (write(ready_fd, "L", 1) != 1)
		return 3;
	close(ready_fd);
	for (int i = 0; i < cycles; i++) {
		struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
					      .rnr_retry_count = 7 };

		if (t_cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, EV_MS, &ev))
			return 4;
		c = ev->id;
		rdma_ack_cm_event(ev);
		if (t_cm_make_qp(c, 4) || rdma_accept(c, &cp))
			return 5;
		if (t_cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, EV_MS, NULL) ||
		    t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, EV_MS, NULL))
			return 6;
		t_cm_close_id(c);
		if (i == 0)
			fds0 = count_fds();
	}
	fds1 = count_fds();
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	if (fds1 != fds0) {
		printf("  # server: %d descriptors after the first cycle, %d after the last\n",
		       fds0, fds1);
		return 7;
	}
	return 0;
}

static int client_main(int port, int cycles)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in dst = t_cm_loopback(port);
	int fds0 = -1, fds1;

	alarm(300);
	if (!ch)
		return 2;
	for (int i = 0; i < cycles; i++) {
		struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
					      .retry_count = 7, .rnr_retry_count = 7 };
		struct rdma_cm_id *id;

		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
			return 3;
		if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) ||
		    t_cm_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, EV_MS, NULL) ||
		    rdma_resolve_route(id, 2000) ||
		    t_cm_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, EV_MS, NULL) || t_cm_make_qp(id, 4))
			return 4;
		if (rdma_connect(id, &cp) || t_cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, EV_MS, NULL))
			return 5;
		if (rdma_disconnect(id) || t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, EV_MS, NULL))
			return 6;
		t_cm_close_id(id);
		if (i == 0)
			fds0 = count_fds();
	}
	fds1 = count_fds();
	rdma_destroy_event_channel(ch);
	if (fds1 != fds0) {
		printf("  # client: %d descriptors after the first cycle, %d after the last\n",
		       fds0, fds1);
		return 7;
	}
	return 0;
}

/* ---- driver ---------------------------------------------------------------- */

static const char *find_valgrind(void)
{
	static const char *const where[] = { "/usr/bin/valgrind", "/usr/local/bin/valgrind" };

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
		if (access(where[i], X_OK) == 0)
			return where[i];
	return NULL;
}

/* Start "self ROLE PORT N FD" under valgrind; with wait_ready, wait until
 * the child writes a byte to the pipe whose write end is its FD.  The
 * pid, or -1. */
static pid_t spawn_end(const char *vg, const char *role, int port, int cycles, bool wait_ready)
{
	char self[4096], portstr[16], nstr[16], fdstr[16];
	char *argv[] = { (char *)vg, "--quiet", "--leak-check=full",
			 "--show-leak-kinds=definite", "--errors-for-leak-kinds=definite",
			 "--error-exitcode=42", self, (char *)role, portstr, nstr, fdstr, NULL };
	int p[2] = { -1, -1 };
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pid_t pid;

	if (n <= 0 || (wait_ready && pipe2(p, O_CLOEXEC)))
		return -1;
	self[n] = '\0';
	snprintf(portstr, sizeof(portstr), "%d", port);
	snprintf(nstr, sizeof(nstr), "%d", cycles);
	snprintf(fdstr, sizeof(fdstr), "%d", p[1]);
	/* the write end alone crosses exec (it is the child's FD) */
	if (wait_ready && fcntl(p[1], F_SETFD, 0) < 0)
		return -1;
	/* without valgrind (an ASan build) the child runs itself: LSan checks */
	if (posix_spawn(&pid, vg ? vg : self, NULL, NULL, vg ? argv : argv + 6, environ))
		pid = -1;
	if (wait_ready) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		char b;

		close(p[1]);
		if (pid > 0 && (poll(&pf, 1, 30000) != 1 || read(p[0], &b, 1) != 1)) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			pid = -1;
		}
		close(p[0]);
	}
	return pid;
}

/* Exit status of pid within ms (killed after), or -1. */
static int reap(pid_t pid, int ms)
{
	int st;

	for (int i = 0; i < ms / 20; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(20000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static const char *verdict(int st)
{
	switch (st) {
	case 0: return "clean";
	case VG_ERROR_EXIT: return "valgrind found a definite leak or a memory error";
	case 7: return "descriptors grew";
	case -1: return "timed out";
	default: return "a step failed";
	}
}

int main(int argc, char **argv)
{
	const char *vg, *env = getenv("SRN_CM_LEAK_CYCLES");
	int cycles = env && atoi(env) > 0 ? atoi(env) : 100;
	int port, cst, sst;
	pid_t srv, cli;
	double t0;

	if (argc == 5 && !strcmp(argv[1], "server"))
		return server_main(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client_main(atoi(argv[2]), atoi(argv[3]));

	vg = find_valgrind();
#if defined(__SANITIZE_ADDRESS__)
	/* valgrind cannot run an ASan build; LeakSanitizer checks each end at
	 * exit instead and aborts it (a failed status) on any leak */
	vg = NULL;
#elif defined(__SANITIZE_THREAD__)
	t_skip("valgrind cannot run a TSan build");
#else
	if (!vg)
		t_skip("valgrind is not installed (apt-get install valgrind)");
#endif
	port = t_listen_port((uint32_t)getpid());
	t0 = t_now();
	srv = spawn_end(vg, "server", port, cycles, true);
	T_OK(srv > 0, "server listens under %s", vg ? "valgrind" : "LeakSanitizer");
	if (srv <= 0)
		return t_summary();
	cli = spawn_end(vg, "client", port, cycles, false);
	T_OK(cli > 0, "client starts under %s", vg ? "valgrind" : "LeakSanitizer");
	cst = cli > 0 ? reap(cli, 240000) : -1;
	sst = reap(srv, cst == 0 ? 60000 : 2000);
	T_OK(cst == 0, "client: %d connect/disconnect cycles, %s (status %d)", cycles,
	     verdict(cst), cst);
	T_OK(sst == 0, "server: %d accepted connections, %s (status %d)", cycles, verdict(sst),
	     sst);
	printf("# %d cycles under %s in %.1f s\n", cycles, vg ? "valgrind" : "LeakSanitizer",
	       t_now() - t0);
	return t_summary();
}
