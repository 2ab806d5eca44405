/* rdma_cm over IPv6, black-box, both ends in this process on ::1.
 *
 * Checks: a bind to [::1] attaches srn_lo and keeps the AF_INET6 address;
 * addresses no device owns (fd00:dead::1), an IPv4-mapped AF_INET6
 * address and a link-local one without a scope are refused with
 * EADDRNOTAVAIL / EADDRNOTAVAIL / EINVAL, and so is an IPv4 destination
 * for an id bound to [::] (EINVAL); the resolved route's source GID
 * is the device's ::1 GID and the connected QP's AV uses its index (not
 * 0, the IPv4 GID) with ::1 as destination; CONNECT_REQUEST carries
 * AF_INET6 addresses with the client's port; a 4 KiB SEND crosses and
 * arrives intact; DISCONNECTED on both sides; an IPv6 wildcard listener
 * takes an IPv4 connection (as Linux with bindv6only 0) while an IPv4
 * wildcard listener refuses an IPv6 one; with RDMA_OPTION_ID_AFONLY [::]
 * and 0.0.0.0 share a port and [::] refuses IPv4 (without it they clash:
 * EADDRINUSE; after bind the option is EINVAL); a connect to a port nobody
 * listens on is REJECTED within 2 s; rdma_getaddrinfo("::1") gives an
 * AF_INET6 destination.  Every wait is bounded (poll timeouts, alarm()).
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/t_cm.h"
#include "tests/lib/t_util.h"

static struct sockaddr_in6 addr6(const char *s, int port)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };

	inet_pton(AF_INET6, s, &a.sin6_addr);
	return a;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The GID index of ::1 on id's device, -1 if none. */
static int loop6_index(struct rdma_cm_id *id)
{
	struct in6_addr lo = IN6ADDR_LOOPBACK_INIT;

	for (int i = 0; i < 16; i++) {
		union ibv_gid g;

		if (ibv_query_gid(id->verbs, 1, i, &g) == 0 && !memcmp(g.raw, &lo, 16))
			return i;
	}
	return -1;
}

static void bind_errors(struct rdma_event_channel *ch)
{
	struct sockaddr_in6 a;
	struct rdma_cm_id *id;
	int r;

	a = addr6("fd00:dead::1", 0);
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	r = rdma_bind_addr(id, (struct sockaddr *)&a);
	T_OK(r == -1 && errno == EADDRNOTAVAIL, "bind to fd00:dead::1 (no device): EADDRNOTAVAIL");
	rdma_destroy_id(id);

	a = addr6("::ffff:127.0.0.1", 0);
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	r = rdma_bind_addr(id, (struct sockaddr *)&a);
	T_OK(r == -1 && errno == EADDRNOTAVAIL,
	     "bind to AF_INET6 ::ffff:127.0.0.1 (IPv4-mapped): EADDRNOTAVAIL");
	rdma_destroy_id(id);

	{
		struct sockaddr_in6 any6 = addr6("::", 0);
		struct sockaddr_in lo4 = t_cm_loopback(7000);

		rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
		r = rdma_bind_addr(id, (struct sockaddr *)&any6);
		if (!r)
			r = rdma_resolve_addr(id, NULL, (struct sockaddr *)&lo4, 1000);
		T_OK(r == -1 && errno == EINVAL, "bound to [::], resolving 127.0.0.1: EINVAL");
		rdma_destroy_id(id);
	}

	a = addr6("fe80::1", 7000);
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	r = rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 1000);
	T_OK(r == -1 && errno == EINVAL, "resolve fe80::1 without a scope id: EINVAL");
	rdma_destroy_id(id);
}

/* A new id in *cli resolved to dst, with a QP, its REQ sent: 0 or -1. */
static int start_connect(struct rdma_event_channel *ch, struct rdma_cm_id **cli,
			 const struct sockaddr *dst, struct rdma_conn_param *cp)
{
	if (rdma_create_id(ch, cli, NULL, RDMA_PS_TCP))
		return -1;
	if (rdma_resolve_addr(*cli, NULL, (struct sockaddr *)dst, 1000) ||
	    t_cm_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000, NULL) ||
	    rdma_resolve_route(*cli, 1000) ||
	    t_cm_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 2000, NULL) ||
	    t_cm_make_qp(*cli, 8) || rdma_connect(*cli, cp))
		return -1;
	return 0;
}

/* Connect to dst and wait for the answer (3 s): the event's name (its
 * status in *status), or "no event"; the id is gone afterwards. */
static const char *connect_answer(struct rdma_event_channel *ch, const struct sockaddr *dst,
				  int *status)
{
	struct rdma_conn_param cp = { .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *cli = NULL;
	const char *name = "no event";

	*status = 0;
	if (start_connect(ch, &cli, dst, &cp) == 0)
		ev = t_cm_event(ch, 3000);
	if (ev) {
		name = rdma_event_str(ev->event);
		*status = ev->status;
		rdma_ack_cm_event(ev);
	}
	if (cli)
		t_cm_close_id(cli);
	return name;
}

/* Listener on srv (bound), client to dst: the pair connected, or -1. */
static int connect_pair(struct rdma_event_channel *ch, struct rdma_cm_id *lid,
			const struct sockaddr *dst, struct rdma_cm_id **cli,
			struct rdma_cm_id **srv, struct rdma_cm_event **req_out)
{
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_event *ev;

	if (start_connect(ch, cli, dst, &cp))
		return -1;
	if (t_cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 2000, &ev))
		return -1;
	*srv = ev->id;
	(void)lid;
	if (req_out)
		*req_out = ev;
	else
		rdma_ack_cm_event(ev);
	if (t_cm_make_qp(*srv, 8) || rdma_accept(*srv, &cp))
		return -1;
	/* both ESTABLISHED, in either order */
	for (int n = 0; n < 2; n++)
		if (t_cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 2000, NULL))
			return -1;
	return 0;
}

static void disconnect_pair(struct rdma_event_channel *ch, struct rdma_cm_id *cli,
			    struct rdma_cm_id *srv)
{
	int ok = rdma_disconnect(cli) == 0 &&
		 !t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 3000, NULL) &&
		 !t_cm_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 3000, NULL);

	T_OK(ok, "rdma_disconnect: DISCONNECTED on both sides");
	t_cm_close_id(cli);
	t_cm_close_id(srv);
}

/* A 4 KiB SEND from cli to srv, checked byte for byte. */
static void send_check(struct rdma_cm_id *cli, struct rdma_cm_id *srv)
{
	static uint8_t out[4096], in[4096];
	struct ibv_mr *mo = rdma_reg_msgs(cli, out, sizeof(out));
	struct ibv_mr *mi = rdma_reg_msgs(srv, in, sizeof(in));
	struct ibv_wc wc;
	int got = 0;

	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (uint8_t)(i * 7 + 3);
	memset(in, 0, sizeof(in));
	if (mo && mi && !rdma_post_recv(srv, NULL, in, sizeof(in), mi) &&
	    !rdma_post_send(cli, NULL, out, sizeof(out), mo, IBV_SEND_SIGNALED) &&
	    rdma_get_send_comp(cli, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
	    rdma_get_recv_comp(srv, &wc) == 1 && wc.status == IBV_WC_SUCCESS)
		got = (int)wc.byte_len;
	T_OK(got == (int)sizeof(in) && !memcmp(in, out, sizeof(in)),
	     "a 4 KiB SEND over the IPv6 connection arrives intact (%d bytes)", got);
	if (mo)
		rdma_dereg_mr(mo);
	if (mi)
		rdma_dereg_mr(mi);
}

static void connect_ipv6(struct rdma_event_channel *ch, int port)
{
	struct sockaddr_in6 la = addr6("::1", port), *sa;
	struct rdma_cm_id *lid, *cli = NULL, *srv = NULL;
	struct rdma_cm_event *req = NULL;
	struct in6_addr lo = IN6ADDR_LOOPBACK_INIT;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	int idx;

	if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(lid, (struct sockaddr *)&la)) {
		if (errno == EADDRNOTAVAIL)
			t_skip("no device owns ::1 (no IPv6 on lo?)");
		t_bail("bind to [::1]:%d: %s", port, strerror(errno));
	}
	sa = (struct sockaddr_in6 *)rdma_get_local_addr(lid);
	T_OK(lid->verbs && sa->sin6_family == AF_INET6 && ntohs(sa->sin6_port) == port,
	     "bind to [::1]:%d attaches %s, keeps the AF_INET6 address", port,
	     lid->verbs ? ibv_get_device_name(lid->verbs->device) : "no device");
	idx = loop6_index(lid);
	T_OK(idx > 0, "::1 is GID %d of the device (0 is IPv4's)", idx);
	if (rdma_listen(lid, 8))
		t_bail("listen: %s", strerror(errno));
	if (connect_pair(ch, lid, (struct sockaddr *)&la, &cli, &srv, &req)) {
		T_OK(0, "connect over [::1]:%d", port);
		return;
	}
	{
		struct sockaddr_in6 *p = (struct sockaddr_in6 *)rdma_get_peer_addr(req->id);
		struct sockaddr_in6 *l = (struct sockaddr_in6 *)rdma_get_local_addr(req->id);

		T_OK(p->sin6_family == AF_INET6 && !memcmp(&p->sin6_addr, &lo, 16) &&
		     p->sin6_port == rdma_get_src_port(cli) && l->sin6_family == AF_INET6 &&
		     ntohs(l->sin6_port) == port,
		     "CONNECT_REQUEST: peer [::1]:%u, local [::1]:%u", ntohs(p->sin6_port),
		     ntohs(l->sin6_port));
		rdma_ack_cm_event(req);
	}
	T_OK(cli->route.num_paths == 1 &&
	     !memcmp(cli->route.path_rec->sgid.raw, &lo, 16) &&
	     !memcmp(cli->route.path_rec->dgid.raw, &lo, 16),
	     "the route's path names the ::1 GID at both ends");
	T_OK(ibv_query_qp(cli->qp, &qa, IBV_QP_AV, &qia) == 0 && qa.ah_attr.is_global &&
	     qa.ah_attr.grh.sgid_index == idx && !memcmp(qa.ah_attr.grh.dgid.raw, &lo, 16),
	     "the client QP's AV: source GID index %d (::1), destination ::1",
	     qa.ah_attr.grh.sgid_index);
	send_check(cli, srv);
	disconnect_pair(ch, cli, srv);
	rdma_destroy_id(lid);
}

/* [::] takes IPv4 too; 0.0.0.0 takes IPv4 only. */
static void wildcards(struct rdma_event_channel *ch, int port)
{
	struct sockaddr_in6 any6 = addr6("::", port), lo6 = addr6("::1", port + 1);
	struct sockaddr_in any4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(port + 1)) };
	struct sockaddr_in lo4 = t_cm_loopback(port);
	struct rdma_cm_id *lid, *cli = NULL, *srv = NULL;
	struct rdma_cm_event *req = NULL;

	if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(lid, (struct sockaddr *)&any6) || rdma_listen(lid, 8))
		t_bail("listen on [::]:%d: %s", port, strerror(errno));
	if (connect_pair(ch, lid, (struct sockaddr *)&lo4, &cli, &srv, &req) == 0) {
		T_OK(rdma_get_peer_addr(req->id)->sa_family == AF_INET,
		     "an IPv6 wildcard listener takes an IPv4 connection (AF_INET addresses)");
		rdma_ack_cm_event(req);
		disconnect_pair(ch, cli, srv);
	} else {
		T_OK(0, "IPv4 connection to an IPv6 wildcard listener");
	}
	rdma_destroy_id(lid);

	if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(lid, (struct sockaddr *)&any4) || rdma_listen(lid, 8))
		t_bail("listen on 0.0.0.0:%d: %s", port + 1, strerror(errno));
	{
		int st;
		const char *got = connect_answer(ch, (struct sockaddr *)&lo6, &st);

		T_OK(!strcmp(got, "RDMA_CM_EVENT_REJECTED"),
		     "an IPv4 wildcard listener does not take an IPv6 connection (%s)", got);
	}
	rdma_destroy_id(lid);
}

/* RDMA_OPTION_ID_AFONLY on an IPv6 id: [::] then shares its port with
 * 0.0.0.0 and takes IPv6 only; the option after bind is EINVAL. */
static void afonly(struct rdma_event_channel *ch, int port)
{
	struct sockaddr_in6 any6 = addr6("::", port);
	struct sockaddr_in any4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_in lo4 = t_cm_loopback(port);
	struct rdma_cm_id *l6, *l4, *other;
	int one = 1, r;

	if (rdma_create_id(ch, &l6, NULL, RDMA_PS_TCP) || rdma_create_id(ch, &l4, NULL, RDMA_PS_TCP))
		t_bail("rdma_create_id: %s", strerror(errno));
	r = rdma_set_option(l6, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof(one));
	T_OK(r == 0 && rdma_bind_addr(l6, (struct sockaddr *)&any6) == 0 &&
	     rdma_bind_addr(l4, (struct sockaddr *)&any4) == 0 &&
	     rdma_listen(l6, 4) == 0 && rdma_listen(l4, 4) == 0,
	     "AFONLY [::]:%d and 0.0.0.0:%d bind and listen side by side", port, port);
	T_OK(rdma_set_option(l6, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof(one)) == -1 &&
	     errno == EINVAL, "AFONLY after bind: EINVAL");
	rdma_destroy_id(l4);
	/* only the AFONLY [::] listener now: an IPv4 REQ finds nobody */
	{
		const char *got = connect_answer(ch, (struct sockaddr *)&lo4, &r);

		T_OK(!strcmp(got, "RDMA_CM_EVENT_REJECTED"),
		     "an AFONLY [::] listener does not take an IPv4 connection (%s)", got);
	}
	/* without AFONLY, [::] and 0.0.0.0 on one port clash */
	rdma_create_id(ch, &other, NULL, RDMA_PS_TCP);
	any4.sin_port = htons((uint16_t)(port + 1));
	any6.sin6_port = htons((uint16_t)(port + 1));
	r = rdma_bind_addr(other, (struct sockaddr *)&any4);
	rdma_create_id(ch, &l4, NULL, RDMA_PS_TCP);
	T_OK(r == 0 && rdma_bind_addr(l4, (struct sockaddr *)&any6) == -1 && errno == EADDRINUSE,
	     "[::]:%d beside 0.0.0.0:%d without AFONLY: EADDRINUSE", port + 1, port + 1);
	rdma_destroy_id(l4);
	rdma_destroy_id(other);
	rdma_destroy_id(l6);
}

static void no_listener(struct rdma_event_channel *ch, int port)
{
	struct sockaddr_in6 a = addr6("::1", port);
	double t0 = now_s();
	int st;
	const char *got = connect_answer(ch, (struct sockaddr *)&a, &st);

	T_OK(!strcmp(got, "RDMA_CM_EVENT_REJECTED") && st == 8 && now_s() - t0 < 2.0,
	     "nobody listens on [::1]:%d: %s status %d after %.2f s", port, got, st,
	     now_s() - t0);
}

static void getaddrinfo_v6(void)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res = NULL;
	int r = rdma_getaddrinfo("::1", "7471", &hints, &res);

	T_OK(r == 0 && res && res->ai_family == AF_INET6 && res->ai_dst_addr &&
	     res->ai_dst_addr->sa_family == AF_INET6 &&
	     ntohs(((struct sockaddr_in6 *)res->ai_dst_addr)->sin6_port) == 7471,
	     "rdma_getaddrinfo(\"::1\", \"7471\"): AF_INET6 destination");
	if (res)
		rdma_freeaddrinfo(res);
}

int main(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	int port = t_listen_port((uint32_t)getpid() * 7u);

	alarm(60);
	if (!ch)
		t_bail("rdma_create_event_channel: %s", strerror(errno));
	bind_errors(ch);
	connect_ipv6(ch, port);
	wildcards(ch, port + 2);
	no_listener(ch, port + 4);
	afonly(ch, port + 5);
	getaddrinfo_v6();
	rdma_destroy_event_channel(ch);
	return t_summary();
}
