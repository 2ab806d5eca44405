/* An rdma_cm stream whose server the test kills (net/cm_peer_killed.sh).
 *
 *   cm_peer_stream -s -a ADDR -p PORT [-T SECS]   server: accepts one
 *       connection and receives SENDs until DISCONNECTED or SECS.
 *   cm_peer_stream -c -a ADDR -p PORT [-T SECS]   client: connects and
 *       streams 4 KiB SENDs (up to 16 outstanding) until one completes in
 *       error, SIGUSR1 comes or SECS pass; then, as an application does,
 *       rdma_disconnect and wait (up to SECS) for
 *       RDMA_CM_EVENT_DISCONNECTED.
 *
 * Each side prints "NAME: established", and the client, with the time
 * since it started the stream or called rdma_disconnect,
 *   client: error completion STATUS (N) after T ms, M sends completed
 *   client: SIGUSR1 after N sends completed       (instead)
 *   client: DISCONNECTED T ms after rdma_disconnect
 * Exit 0 when the client saw both (the server when it saw DISCONNECTED);
 * 2 on a setup failure, 3 if no error came, 4 if no DISCONNECTED came. */
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/t_cm.h"

enum { MSG = 4096, DEPTH = 16, RECVS = 64, CM_MS = 5000 };

static volatile sig_atomic_t usr1;

static void on_usr1(int sig)
{
	(void)sig;
	usr1 = 1;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int die(const char *who, const char *what)
{
	printf("%s: %s failed: %s\n", who, what, strerror(errno));
	return 2;
}

static int post_recv(struct rdma_cm_id *id, struct ibv_mr *mr, char *buf, int slot)
{
	return rdma_post_recv(id, (void *)(uintptr_t)slot, buf + (size_t)slot * MSG, MSG, mr);
}

/* Waits for the next event and prints it; 0 if it is want. */
static int expect(const char *who, struct rdma_event_channel *ch,
		  enum rdma_cm_event_type want, int ms, struct rdma_cm_event **out)
{
	if (t_cm_expect(ch, want, ms, out) == 0)
		return 0;
	printf("%s: no %s\n", who, rdma_event_str(want));
	return -1;
}

static int server(struct rdma_event_channel *ch, struct rdma_cm_id *lid, int secs)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	char *buf;
	uint64_t end, got = 0;

	if (rdma_listen(lid, 1))
		return die("server", "rdma_listen");
	printf("server: listening\n");
	fflush(stdout);
	if (expect("server", ch, RDMA_CM_EVENT_CONNECT_REQUEST, secs * 1000, &ev))
		return 2;
	id = ev->id;
	rdma_ack_cm_event(ev);
	buf = calloc(RECVS, MSG);
	if (!buf || t_cm_make_qp(id, RECVS))
		return die("server", "rdma_create_qp");
	mr = rdma_reg_msgs(id, buf, (size_t)RECVS * MSG);
	if (!mr)
		return die("server", "rdma_reg_msgs");
	for (int i = 0; i < RECVS; i++)
		if (post_recv(id, mr, buf, i))
			return die("server", "rdma_post_recv");
	if (rdma_accept(id, NULL))
		return die("server", "rdma_accept");
	if (expect("server", ch, RDMA_CM_EVENT_ESTABLISHED, CM_MS, NULL))
		return 2;
	printf("server: established\n");
	fflush(stdout);
	end = now_ms() + (uint64_t)secs * 1000;
	while (now_ms() < end) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(id->recv_cq, 16, wc);

		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				printf("server: receive %s after %llu messages\n",
				       ibv_wc_status_str(wc[i].status), (unsigned long long)got);
				return 3;
			}
			got++;
			if (post_recv(id, mr, buf, (int)wc[i].wr_id))
				return die("server", "rdma_post_recv");
		}
		if (n == 0) {
			ev = t_cm_event(ch, 0);
			if (ev) {
				printf("server: %s after %llu messages\n", rdma_event_str(ev->event),
				       (unsigned long long)got);
				rdma_ack_cm_event(ev);
				return 0;
			}
			usleep(100);
		}
	}
	printf("server: no DISCONNECTED in %d s\n", secs);
	return 4;
}

/* Streams SENDs until one fails; 0 with the failure printed. */
static int stream(struct rdma_cm_id *id, int secs)
{
	char *buf = calloc(DEPTH, MSG);
	struct ibv_mr *mr;
	uint64_t t0 = now_ms(), end = t0 + (uint64_t)secs * 1000, done = 0, last_ok = t0;
	int out = 0, slot = 0;

	if (!buf)
		return die("client", "calloc");
	mr = rdma_reg_msgs(id, buf, (size_t)DEPTH * MSG);
	if (!mr)
		return die("client", "rdma_reg_msgs");
	while (now_ms() < end) {
		struct ibv_wc wc[DEPTH];
		int n;

		if (usr1) {
			printf("client: SIGUSR1 after %llu sends completed\n",
			       (unsigned long long)done);
			return 0;
		}
		while (out < DEPTH) {
			if (rdma_post_send(id, NULL, buf + (size_t)slot * MSG, MSG, mr,
					   IBV_SEND_SIGNALED))
				return die("client", "rdma_post_send");
			slot = (slot + 1) % DEPTH;
			out++;
		}
		n = ibv_poll_cq(id->send_cq, DEPTH, wc);
		for (int i = 0; i < n; i++) {
			out--;
			if (wc[i].status != IBV_WC_SUCCESS) {
				printf("client: error completion %s (%d) after %llu ms of silence, "
				       "%llu sends completed\n", ibv_wc_status_str(wc[i].status),
				       wc[i].status, (unsigned long long)(now_ms() - last_ok),
				       (unsigned long long)done);
				return 0;
			}
			done++;
			last_ok = now_ms();
		}
		if (n == 0)
			usleep(50);
	}
	printf("client: no error completion in %d s (%llu sends)\n", secs, (unsigned long long)done);
	return 3;
}

static int client(struct rdma_event_channel *ch, struct rdma_cm_id *id,
		  struct sockaddr *dst, int secs)
{
	struct rdma_cm_event *ev = NULL;
	uint64_t t0, end;
	int r;

	if (rdma_resolve_addr(id, NULL, dst, CM_MS) ||
	    expect("client", ch, RDMA_CM_EVENT_ADDR_RESOLVED, CM_MS, NULL) ||
	    rdma_resolve_route(id, CM_MS) ||
	    expect("client", ch, RDMA_CM_EVENT_ROUTE_RESOLVED, CM_MS, NULL))
		return 2;
	if (t_cm_make_qp(id, DEPTH))
		return die("client", "rdma_create_qp");
	if (rdma_connect(id, NULL) || expect("client", ch, RDMA_CM_EVENT_ESTABLISHED, CM_MS, NULL))
		return 2;
	printf("client: established\n");
	fflush(stdout);
	r = stream(id, secs);
	fflush(stdout);
	if (r)
		return r;
	t0 = now_ms();
	if (rdma_disconnect(id))
		return die("client", "rdma_disconnect");
	/* Events other than DISCONNECTED (none expected) are printed and
	 * skipped, within the same bound. */
	end = t0 + (uint64_t)secs * 1000;
	for (uint64_t now = t0; now < end; now = now_ms()) {
		ev = t_cm_event(ch, (int)(end - now));
		if (!ev)
			break;
		if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
			break;
		printf("client: %s (status %d) while waiting\n", rdma_event_str(ev->event),
		       ev->status);
		rdma_ack_cm_event(ev);
		ev = NULL;
	}
	if (!ev) {
		printf("client: no DISCONNECTED %llu ms after rdma_disconnect\n",
		       (unsigned long long)(now_ms() - t0));
		return 4;
	}
	printf("client: DISCONNECTED %llu ms after rdma_disconnect\n",
	       (unsigned long long)(now_ms() - t0));
	rdma_ack_cm_event(ev);
	return 0;
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
	const char *addr = NULL, *port = NULL;
	bool srv = false, cli = false;
	int secs = 60, o, r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGUSR1, on_usr1);
	while ((o = getopt(argc, argv, "sca:p:T:")) != -1) {
		switch (o) {
		case 's': srv = true; break;
		case 'c': cli = true; break;
		case 'a': addr = optarg; break;
		case 'p': port = optarg; break;
		case 'T': secs = atoi(optarg); break;
		default: return 2;
		}
	}
	if (srv == cli || !addr || !port || secs <= 0 || secs > 3600) {
		fprintf(stderr, "usage: %s -s|-c -a ADDR -p PORT [-T SECS]\n", argv[0]);
		return 2;
	}
	if (getaddrinfo(addr, port, &hints, &ai))
		return die(srv ? "server" : "client", "getaddrinfo");
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return die(srv ? "server" : "client", "rdma_create_id");
	if (srv) {
		if (rdma_bind_addr(id, ai->ai_addr))
			return die("server", "rdma_bind_addr");
		r = server(ch, id, secs);
	} else {
		r = client(ch, id, ai->ai_addr, secs);
	}
	freeaddrinfo(ai);
	/* the client tears down, which must not wait for the dead peer */
	if (cli) {
		t_cm_close_id(id);
		rdma_destroy_event_channel(ch);
		printf("client: torn down\n");
	}
	return r;
}
