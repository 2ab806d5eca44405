/* rdma_cm over TCP + MPA for iWARP devices (cm/iwarp_cm.h).
 *
 *   active                               passive
 *   rdma_connect: a thread connects     listener thread: accept, read the
 *     TCP, sends the MPA request,          MPA request -> CONNECT_REQUEST
 *     waits for the reply                rdma_accept: MPA reply, QP to RTS,
 *     -> ESTABLISHED (QP to RTS)           ESTABLISHED
 *     or REJECTED (-ECONNREFUSED)        rdma_reject: MPA reply with R set
 *   rdma_disconnect: QP to ERR, socket shut: DISCONNECTED here, and at the
 *     peer when its QP's thread sees the stream end.
 *
 * The state of each id's connection lives in a list here (guarded by
 * cm_lock), not in struct cm_id.  A thread that owns an entry (listener,
 * MPA initiator) frees it once the id is gone. */
#include "cm/iwarp_cm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm/addr.h"
#include "cm/conn.h"
#include "cm/devices.h"
#include "net/settings.h"
#include "transport/iwarp_tcp.h"
#include "verbs/srn.h"

enum {
	CM_IW_MPA_MS = 10000,      /* the peer's MPA request or reply */
	/* siw (Linux 6.1 siw_accept) sends its MPA reply before it hands
	 * the socket's data_ready to the QP; an FPDU arriving in between is
	 * left unread until more bytes come (docs/iwarp.md).  The active
	 * side towards another host so sends nothing for this long. */
	CM_IW_FIRST_FPDU_HOLD_MS = 50,
	CM_IW_POLL_MS = 10000,     /* a bound only: shutdown() wakes a listener */
	CM_IW_CONNECT_S = 3,       /* TCP connect, as the caller waits in it */
	CM_IW_RD_MAX = 128,        /* SRN_MAX_RD_ATOM */
	CM_IW_PDATA_MAX = IWARP_MPA_PD_MAX - IWARP_MPA_V2_LEN,
};

struct cm_iw {
	struct cm_iw *next;
	struct cm_id *id;            /* NULL: the id is gone (a thread frees) */
	uint64_t serial;             /* names it for the QP's on_close */
	int lfd;                     /* listener socket, or -1 */
	bool thread;                 /* a thread owns the entry */
	struct srn_iw_conn conn;     /* until handed to a QP; fd -1: none */
	struct iwarp_mpa_rr req;     /* passive: the request (in reqbuf) */
	uint8_t reqbuf[IWARP_MPA_RR_HDR_LEN + IWARP_MPA_PD_MAX];
	struct srn_iw_mpa_params ap; /* active: what the request offers */
	struct sockaddr_in src, dst; /* active: the TCP connection's ends */
	uint8_t apd[CM_IW_PDATA_MAX];
};

static struct cm_iw *iw_list;
static uint64_t iw_serial;

static bool ctx_iwarp(struct ibv_context *ctx)
{
	return ctx && srn_ctx(ctx)->dev->iwarp;
}

bool cm_iw_id(const struct cm_id *c)
{
	return ctx_iwarp(c->id.verbs);
}

struct ibv_context *cm_iw_device_for_ip(const uint8_t ip[16])
{
	struct ibv_context **ctxs;
	struct ifaddrs *ifa, *i;
	struct ibv_context *found = NULL;
	int n = 0;

	if (!cm_ip_is_v4(ip)) /* (IPv4 only for now) */
		return NULL;
	ctxs = cm_devices(&n);
	if (!ctxs || getifaddrs(&ifa))
		return NULL;
	for (i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip + 12, 4))
			continue;
		for (int d = 0; d < n && !found; d++)
			if (ctx_iwarp(ctxs[d]) &&
			    !strcmp(srn_ctx(ctxs[d])->dev->ifname, i->ifa_name))
				found = ctxs[d];
	}
	freeifaddrs(ifa);
	return found;
}

static struct cm_iw *iw_find(const struct cm_id *c)
{
	for (struct cm_iw *e = iw_list; e; e = e->next)
		if (e->id == c)
			return e;
	return NULL;
}

static struct cm_iw *iw_new(struct cm_id *c)
{
	struct cm_iw *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->id = c;
	e->serial = ++iw_serial;
	e->lfd = -1;
	e->conn.fd = -1;
	e->next = iw_list;
	iw_list = e;
	return e;
}

static void iw_unlink(struct cm_iw *e)
{
	for (struct cm_iw **pp = &iw_list; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			return;
		}
}

static void conn_close(struct srn_iw_conn *c)
{
	if (c->fd < 0)
		return;
	close(c->fd);
	srn_iw_conn_fini(c);
	c->fd = -1;
}

static int conn_open(struct srn_iw_conn *c, int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (srn_iw_conn_init(c, fd, srn_iw_mulpdu_for(fd))) {
		close(fd);
		c->fd = -1;
		return ENOMEM;
	}
	return 0;
}

static uint16_t depth(uint8_t want, uint8_t max_code)
{
	/* RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH: the device's limit */
	return want == max_code || want > CM_IW_RD_MAX ? CM_IW_RD_MAX : want;
}

/* The QP's stream ended without rdma_disconnect here: DISCONNECTED. */
static void iw_on_close(void *arg)
{
	uint64_t serial = (uint64_t)(uintptr_t)arg;

	pthread_mutex_lock(&cm_lock);
	for (struct cm_iw *e = iw_list; e; e = e->next) {
		struct cm_id *c = e->id;

		if (e->serial != serial || !c || c->state != CM_ESTABLISHED || c->destroying)
			continue;
		c->state = CM_TIMEWAIT;
		if (c->sync)
			c->sync_disc_wait = true;
		cm_post(c, cm_event_conn(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0));
		break;
	}
	pthread_mutex_unlock(&cm_lock);
}

static int attach_qp(struct cm_id *c, struct cm_iw *e)
{
	c->responder_resources = (uint8_t)(e->conn.ird > 255 ? 255 : e->conn.ird);
	c->initiator_depth = (uint8_t)(e->conn.ord > 255 ? 255 : e->conn.ord);
	if (!c->id.qp)
		return 0;
	return srn_ctx(c->id.verbs)->iw_ops->attach(c->id.qp, &e->conn, iw_on_close,
						    (void *)(uintptr_t)e->serial);
}

/* ---- passive side -------------------------------------------------------- */

static void ip_of(uint8_t ip[16], uint16_t *port, const struct sockaddr_storage *ss)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;

	cm_ip_from_v4(ip, &sin->sin_addr);
	*port = ntohs(sin->sin_port);
}

/* A connection came to listener e: read its MPA request (without
 * cm_lock), then make the CONNECT_REQUEST. */
static void passive_in(struct cm_iw *le, int fd)
{
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);
	struct srn_iw_conn conn;
	struct cm_id *l, *c;
	struct cm_event *ev;
	struct cm_iw *e;
	uint8_t *reqbuf = malloc(sizeof(e->reqbuf));
	struct iwarp_mpa_rr req;
	uint8_t ip[16];
	uint16_t port;
	size_t len;

	if (!reqbuf || conn_open(&conn, fd)) {
		free(reqbuf);
		if (reqbuf)
			close(fd);
		return;
	}
	if (getsockname(fd, (struct sockaddr *)&me, &ml) || me.ss_family != AF_INET ||
	    getpeername(fd, (struct sockaddr *)&peer, &pl) ||
	    srn_iw_mpa_read_request(&conn, &req, reqbuf, CM_IW_MPA_MS)) {
		conn_close(&conn);
		free(reqbuf);
		return;
	}
	pthread_mutex_lock(&cm_lock);
	l = le->id;
	if (!l || l->state != CM_LISTEN || l->destroying || l->pending >= l->backlog)
		goto refuse;
	c = cm_id_alloc(l->sync ? NULL : l->chan, l->id.context, l->id.ps, l->sync);
	if (!c)
		goto refuse;
	c->listener = l;
	c->passive = true;
	ip_of(ip, &port, &me);
	cm_id_set_src(c, ip, port, 0);
	ip_of(ip, &port, &peer);
	cm_id_set_dst(c, ip, port, 0);
	c->id.pd = l->ep_pd;
	cm_id_set_device(c, ctx_iwarp(l->id.verbs) ? l->id.verbs :
			 cm_iw_device_for_ip(cm_src_ip(c)));
	e = c->id.verbs ? iw_new(c) : NULL;
	if (!e) {
		cm_id_free_unreported(c);
		goto refuse;
	}
	cm_id_fill_gids(c);
	e->conn = conn;
	memcpy(e->reqbuf, reqbuf, sizeof(e->reqbuf));
	e->req = req;
	if (req.pdata)
		e->req.pdata = e->reqbuf + (req.pdata - reqbuf);
	/* MPA v1 carries no IRD/ORD: one Read each way */
	c->remote_resp_res = req.v2 ? (uint8_t)(req.ird > 255 ? 255 : req.ird) : 1;
	c->remote_init_depth = req.v2 ? (uint8_t)(req.ord > 255 ? 255 : req.ord) : 1;
	c->responder_resources = c->remote_init_depth;
	c->initiator_depth = c->remote_resp_res;
	len = req.pdata_len < WIRE_CM_DATA_LEN ? req.pdata_len : WIRE_CM_DATA_LEN;
	/* (never NULL for memcpy, even with no data) */
	ev = cm_event_connect_request(c, l, len ? e->req.pdata : e->reqbuf, len);
	if (ev) {
		ev->ev.param.conn.private_data = len ? ev->pdata : NULL;
		ev->ev.param.conn.private_data_len = (uint8_t)(len > 255 ? 255 : len);
		ev->ev.param.conn.responder_resources = c->remote_init_depth;
		ev->ev.param.conn.initiator_depth = c->remote_resp_res;
		cm_event_queue(l->chan, ev);
	}
	pthread_mutex_unlock(&cm_lock);
	free(reqbuf);
	return;
refuse:
	pthread_mutex_unlock(&cm_lock);
	{
		struct srn_iw_mpa_params no = { 0 };

		(void)srn_iw_mpa_respond(&conn, &req, &no, true, 1000);
	}
	conn_close(&conn);
	free(reqbuf);
}

static void *listen_main(void *arg)
{
	struct cm_iw *e = arg;

	for (;;) {
		struct pollfd pfd = { .fd = e->lfd, .events = POLLIN };
		bool gone;
		int fd;

		pthread_mutex_lock(&cm_lock);
		gone = !e->id;
		pthread_mutex_unlock(&cm_lock);
		if (gone)
			break;
		if (poll(&pfd, 1, CM_IW_POLL_MS) <= 0)
			continue;
		fd = accept4(e->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			passive_in(e, fd);
	}
	close(e->lfd);
	free(e);
	return NULL;
}

static bool any_iwarp_device(void)
{
	int n = 0;
	struct ibv_context **ctxs = cm_devices(&n);

	for (int d = 0; ctxs && d < n; d++)
		if (ctx_iwarp(ctxs[d]))
			return true;
	return false;
}

int cm_iw_listen(struct cm_id *c)
{
	struct sockaddr_in sin = c->id.route.addr.src_sin;
	struct cm_iw *e;
	pthread_attr_t ta;
	pthread_t t;
	int one = 1, err;

	if (iw_find(c) || c->id.route.addr.src_addr.sa_family != AF_INET)
		return 0;
	if (!cm_iw_id(c) && (c->id.verbs || !any_iwarp_device()))
		return 0;
	e = iw_new(c);
	if (!e)
		return ENOMEM;
	e->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* (SO_REUSEADDR: a listener just closed must not hold the port) */
	if (e->lfd < 0 || setsockopt(e->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(e->lfd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(e->lfd, c->backlog > 0 ? c->backlog : 128))
		goto fail;
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&t, &ta, listen_main, e);
	pthread_attr_destroy(&ta);
	if (err) {
		errno = err;
		goto fail;
	}
	e->thread = true;
	return 0;
fail:
	err = errno ? errno : EINVAL;
	if (e->lfd >= 0)
		close(e->lfd);
	iw_unlink(e);
	free(e);
	return err;
}

int cm_iw_accept(struct cm_id *c, const struct rdma_conn_param *p)
{
	struct cm_iw *e = iw_find(c);
	struct srn_iw_mpa_params ap = { 0 };
	int r;

	if (!e || c->state != CM_REQ_RCVD || e->conn.fd < 0 || !c->id.qp)
		return EINVAL;
	if (p && p->private_data_len && !p->private_data)
		return EINVAL;
	ap.ird = p ? depth(p->responder_resources, RDMA_MAX_RESP_RES) : 1;
	ap.ord = p ? depth(p->initiator_depth, RDMA_MAX_INIT_DEPTH) : 1;
	ap.pdata = p ? p->private_data : NULL;
	ap.pdata_len = p ? p->private_data_len : 0;
	ap.want_crc = srn_setting(SRN_SET_IWARP_CRC, NULL);
	r = srn_iw_mpa_respond(&e->conn, &e->req, &ap, false, CM_IW_MPA_MS);
	cm_leave_backlog(c);
	if (!r)
		r = -attach_qp(c, e);
	if (r) {
		conn_close(&e->conn);
		c->state = CM_TIMEWAIT;
		return -r;
	}
	c->state = CM_ESTABLISHED;
	cm_post(c, cm_event_conn(c, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0));
	return 0;
}

int cm_iw_reject(struct cm_id *c, const void *pdata, uint8_t len)
{
	struct cm_iw *e = iw_find(c);
	struct srn_iw_mpa_params ap = { .pdata = pdata, .pdata_len = len };

	if (!e || c->state != CM_REQ_RCVD || e->conn.fd < 0)
		return EINVAL;
	(void)srn_iw_mpa_respond(&e->conn, &e->req, &ap, true, 1000);
	conn_close(&e->conn);
	cm_leave_backlog(c);
	c->state = CM_TIMEWAIT;
	return 0;
}

/* ---- active side --------------------------------------------------------- */

/* The TCP connection to the peer's rdma_cm port: 0 or -errno. */
static int tcp_connect_once(struct cm_iw *e)
{
	struct timeval tv = { .tv_sec = CM_IW_CONNECT_S };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), err;

	if (fd < 0)
		return -errno;
	/* (a send timeout bounds connect too) */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
	    bind(fd, (struct sockaddr *)&e->src, sizeof(e->src)) ||
	    connect(fd, (struct sockaddr *)&e->dst, sizeof(e->dst))) {
		err = errno == EINPROGRESS || errno == EAGAIN ? ETIMEDOUT : errno;
		close(fd);
		return -err;
	}
	return -conn_open(&e->conn, fd);
}

/* A refused connection is tried again for the grace the IB CM gives a
 * listener (CM_LISTEN_GRACE_MS, cm/conn.c), whatever host it is on: the
 * kernel's address and route resolution take a while, and perftest -R
 * relies on that when it connects a second time while its server is
 * still on the way to listening again (siw's, in a slow guest, too). */
static int tcp_connect(struct cm_iw *e)
{
	uint64_t until = cm_now_ms() + CM_LISTEN_GRACE_MS;
	int r;

	while ((r = tcp_connect_once(e)) == -ECONNREFUSED && cm_now_ms() < until)
		usleep(10000);
	return r;
}

static void *active_main(void *arg)
{
	struct cm_iw *e = arg;
	uint8_t ppd[IWARP_MPA_PD_MAX];
	uint16_t plen = 0;
	struct cm_event *ev;
	struct cm_id *c;
	int r = tcp_connect(e);
	size_t len;

	if (!r)
		r = srn_iw_mpa_initiate(&e->conn, &e->ap, ppd, &plen, CM_IW_MPA_MS);
	if (!r) {
		uint8_t ip[16];

		cm_ip_from_v4(ip, &e->dst.sin_addr);
		if (!cm_ip_is_local(ip))
			e->conn.tx_hold_until = srn_iw_deadline(CM_IW_FIRST_FPDU_HOLD_MS);
	}
	len = plen < WIRE_CM_DATA_LEN ? plen : WIRE_CM_DATA_LEN;
	pthread_mutex_lock(&cm_lock);
	e->thread = false;
	c = e->id;
	if (!c || c->destroying || c->state != CM_REQ_SENT) {
		conn_close(&e->conn);
		if (!c) /* unlinked by cm_iw_forget */
			free(e);
		pthread_mutex_unlock(&cm_lock);
		return NULL;
	}
	if (!r)
		r = -attach_qp(c, e);
	if (!r) {
		c->state = CM_ESTABLISHED;
		ev = cm_event_conn(c, RDMA_CM_EVENT_ESTABLISHED, 0, ppd, len > 255 ? 255 : len);
	} else {
		/* the kernel's iWARP CM: refused or reset is REJECTED, a
		 * timeout UNREACHABLE, the rest CONNECT_ERROR; status -errno.
		 * The QP goes to ERR, so its posted receives flush. */
		enum rdma_cm_event_type t = r == -ECONNREFUSED || r == -ECONNRESET ?
						    RDMA_CM_EVENT_REJECTED :
					    r == -ETIMEDOUT ? RDMA_CM_EVENT_UNREACHABLE :
							      RDMA_CM_EVENT_CONNECT_ERROR;

		conn_close(&e->conn);
		cm_qp_to_err(c);
		c->state = CM_TIMEWAIT;
		ev = cm_event_conn(c, t, r, r == -ECONNREFUSED ? ppd : NULL,
				   len > 255 ? 255 : len);
	}
	cm_post(c, ev);
	pthread_mutex_unlock(&cm_lock);
	return NULL;
}

int cm_iw_connect(struct cm_id *c, const struct rdma_conn_param *p)
{
	struct cm_iw *e;
	pthread_attr_t ta;
	pthread_t t;
	int err;

	if (p && p->private_data_len && !p->private_data)
		return EINVAL;
	/* (private_data_len, a uint8_t, is within MPA's limit) */
	if (c->state != CM_ROUTE_RESOLVED || iw_find(c) ||
	    c->id.route.addr.dst_addr.sa_family != AF_INET)
		return EINVAL;
	e = iw_new(c);
	if (!e)
		return ENOMEM;
	e->src = c->id.route.addr.src_sin;
	e->src.sin_port = 0;
	e->dst = c->id.route.addr.dst_sin;
	c->own_qp = c->id.qp != NULL;
	e->ap.ird = p ? depth(p->responder_resources, RDMA_MAX_RESP_RES) : 1;
	e->ap.ord = p ? depth(p->initiator_depth, RDMA_MAX_INIT_DEPTH) : 1;
	e->ap.want_crc = srn_setting(SRN_SET_IWARP_CRC, NULL);
	if (p && p->private_data_len) {
		memcpy(e->apd, p->private_data, p->private_data_len);
		e->ap.pdata = e->apd;
		e->ap.pdata_len = p->private_data_len;
	}
	c->state = CM_REQ_SENT;
	e->thread = true;
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&t, &ta, active_main, e);
	pthread_attr_destroy(&ta);
	if (!err)
		return 0;
	c->state = CM_ROUTE_RESOLVED;
	iw_unlink(e);
	free(e);
	return err;
}

/* ---- the end ------------------------------------------------------------- */

int cm_iw_disconnect(struct cm_id *c, bool *wait)
{
	struct cm_iw *e = iw_find(c);

	*wait = false;
	switch (c->state) {
	case CM_ESTABLISHED:
		if (c->id.qp)
			srn_ctx(c->id.verbs)->iw_ops->disconnect(c->id.qp);
		c->state = CM_TIMEWAIT;
		if (c->sync)
			c->sync_disc_wait = *wait = true;
		cm_post(c, cm_event_conn(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0));
		return 0;
	case CM_REQ_SENT:
	case CM_REQ_RCVD:
	case CM_TIMEWAIT:
		if (e && e->conn.fd >= 0)
			shutdown(e->conn.fd, SHUT_RDWR);
		cm_qp_to_err(c);
		*wait = c->sync && c->sync_disc_wait;
		return 0;
	default:
		return EINVAL;
	}
}

void cm_iw_forget(struct cm_id *c)
{
	struct cm_iw *e = iw_find(c);

	if (cm_iw_id(c) && c->state != CM_LISTEN) {
		/* nothing of the IB CM to send for it */
		cm_leave_backlog(c);
		c->state = CM_TIMEWAIT;
	}
	if (!e)
		return;
	iw_unlink(e);
	e->id = NULL;
	if (e->conn.fd >= 0)
		shutdown(e->conn.fd, SHUT_RDWR);
	if (e->lfd >= 0)
		shutdown(e->lfd, SHUT_RDWR);
	if (e->thread)
		return; /* its thread frees it */
	conn_close(&e->conn);
	free(e);
}
