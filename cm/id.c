/* cm ids: creation, destruction, binding and address/route resolution.
 * Addressing is RoCEv2: an id binds to an IPv4 or IPv6 address; the
 * softrnic device that has that address as a GID (IPv4 as ::ffff:a.b.c.d)
 * serves it, and the path names that GID. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cm/cm.h"
#include "net/clock.h"
#include "cm/devices.h"
#include "cm/iwarp_cm.h"
#include "verbs/export.h"

pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t cm_ack_cond = PTHREAD_COND_INITIALIZER;
struct cm_id *cm_ids;

uint64_t cm_now_ms(void)
{
	return net_now_ns() / 1000000;
}

uint64_t cm_dbg_stamp_us(void)
{
	return net_now_ns() / 1000;
}

uint16_t cm_ps_code(enum rdma_port_space ps)
{
	return (uint16_t)ps;
}

struct ibv_context *cm_device_for_ip(const uint8_t ip[16])
{
	struct ibv_context **ctxs;
	int n = 0;

	ctxs = cm_devices(&n);
	for (int d = 0; ctxs && d < n; d++) {
		struct ibv_port_attr pa;

		if (ibv_query_port(ctxs[d], 1, &pa))
			continue;
		for (int i = 0; i < pa.gid_tbl_len && i < 256; i++) {
			union ibv_gid g;

			if (ibv_query_gid(ctxs[d], 1, i, &g) == 0 && !memcmp(g.raw, ip, 16))
				return ctxs[d];
		}
	}
	return cm_iw_device_for_ip(ip); /* an iWARP device has no IP GID */
}

uint8_t cm_gid_index(struct ibv_context *ctx, const union ibv_gid *gid)
{
	struct ibv_port_attr pa;

	if (!ctx || ibv_query_port(ctx, 1, &pa))
		return 0;
	for (int i = 0; i < pa.gid_tbl_len && i < 256; i++) {
		union ibv_gid g;

		if (ibv_query_gid(ctx, 1, i, &g) == 0 && !memcmp(&g, gid, sizeof(g)))
			return (uint8_t)i;
	}
	return 0;
}

const uint8_t *cm_src_ip(const struct cm_id *c)
{
	return c->sip;
}

const uint8_t *cm_dst_ip(const struct cm_id *c)
{
	return c->dip;
}

/* (sin_port and sin6_port sit at the same offset) */
uint16_t cm_src_port(const struct cm_id *c)
{
	return ntohs(c->id.route.addr.src_sin.sin_port);
}

uint16_t cm_dst_port(const struct cm_id *c)
{
	return ntohs(c->id.route.addr.dst_sin.sin_port);
}

void cm_id_set_src(struct cm_id *c, const uint8_t ip[16], uint16_t port, uint32_t scope)
{
	memcpy(c->sip, ip, 16);
	c->sscope = scope;
	cm_ip_to_sa(&c->id.route.addr.src_storage, ip, port, scope);
}

void cm_id_set_dst(struct cm_id *c, const uint8_t ip[16], uint16_t port, uint32_t scope)
{
	memcpy(c->dip, ip, 16);
	c->dscope = scope;
	cm_ip_to_sa(&c->id.route.addr.dst_storage, ip, port, scope);
}

/* The GIDs are the addresses themselves (cm/addr.h). */
void cm_id_fill_gids(struct cm_id *c)
{
	memcpy(c->id.route.addr.addr.ibaddr.sgid.raw, c->sip, 16);
	memcpy(c->id.route.addr.addr.ibaddr.dgid.raw, c->dip, 16);
	c->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
}

struct cm_id *cm_id_alloc(struct cm_channel *ch, void *context,
			  enum rdma_port_space ps, bool sync)
{
	struct cm_id *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (sync) {
		struct rdma_event_channel *own = rdma_create_event_channel();

		if (!own) {
			free(c);
			return NULL;
		}
		ch = cm_chan(own);
	}
	c->sync = sync;
	c->chan = ch;
	c->id.channel = &ch->ch;
	c->id.context = context;
	c->id.ps = ps;
	c->id.qp_type = (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) ? IBV_QPT_UD : IBV_QPT_RC;
	c->dir_slot = -1;
	c->ack_timeout = 19;
	/* unbound: the IPv4 wildcard, as before any bind */
	cm_ip_from_v4(c->sip, "\0\0\0\0");
	cm_ip_from_v4(c->dip, "\0\0\0\0");
	cm_id_set_src(c, c->sip, 0, 0);
	cm_id_set_dst(c, c->dip, 0, 0);
	c->next = cm_ids;
	cm_ids = c;
	return c;
}

SRN_EXPORT int rdma_create_id(struct rdma_event_channel *channel,
			      struct rdma_cm_id **id, void *context,
			      enum rdma_port_space ps)
{
	struct cm_id *c;
	int err;

	if (!id || (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB &&
		    ps != RDMA_PS_IPOIB)) {
		errno = EINVAL;
		return -1;
	}
	err = cm_agent_start();
	if (err) {
		errno = err;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	c = cm_id_alloc(channel ? cm_chan(channel) : NULL, context, ps, !channel);
	pthread_mutex_unlock(&cm_lock);
	if (!c)
		return -1;
	*id = &c->id;
	return 0;
}

static void id_unlink(struct cm_id *c)
{
	for (struct cm_id **pp = &cm_ids; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	for (struct cm_id *o = cm_ids; o; o = o->next)
		if (o->listener == c)
			o->listener = NULL;
}

void cm_id_free_unreported(struct cm_id *c)
{
	id_unlink(c);
	if (c->dir_slot >= 0)
		cm_dir_unbind(c->dir_slot);
	if (c->sync)
		rdma_destroy_event_channel(&c->chan->ch);
	free(c->rep_event);
	free(c);
}

SRN_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_id(id);
	struct rdma_cm_event *last;

	if (!id) {
		errno = EINVAL;
		return -1;
	}
	/* A synchronous id keeps its last event until the next call. */
	last = id->event;
	id->event = NULL;
	if (last)
		rdma_ack_cm_event(last);
	pthread_mutex_lock(&cm_lock);
	cm_dbg("destroy id %p (state %d, port %u)\n", (void *)id, (int)c->state, cm_src_port(c));
	c->destroying = true;
	cm_iw_forget(c);
	cm_conn_destroy(c);
	if (c->dir_slot >= 0)
		cm_dir_unbind(c->dir_slot);
	c->dir_slot = -1;
	cm_channel_purge(c->chan, c);
	/* Events already handed out must be acked first (rdma_destroy_id(3)). */
	while (c->unacked > 0)
		pthread_cond_wait(&cm_ack_cond, &cm_lock);
	id_unlink(c);
	free(c->rep_event);
	pthread_mutex_unlock(&cm_lock);
	if (c->sync)
		rdma_destroy_event_channel(&c->chan->ch);
	free(c->ep_qp_attr);
	free(c);
	return 0;
}

/* net.ipv6.bindv6only, the default of an IPv6 bind's AFONLY. */
static bool bindv6only(void)
{
	FILE *f = fopen("/proc/sys/net/ipv6/bindv6only", "re");
	int v = 0;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v != 0;
}

int cm_id_bind_locked(struct cm_id *c, const struct sockaddr *addr)
{
	struct ibv_context *ctx = NULL;
	uint16_t port;
	uint32_t scope;
	uint8_t ip[16];
	int slot, err;

	if (c->state != CM_IDLE)
		return EINVAL;
	err = cm_ip_from_sa(addr, ip, &port, &scope);
	if (err)
		return -err;
	if (cm_ip_is_linklocal(ip) && !scope)
		return EINVAL; /* which link?  (Linux: EINVAL too) */
	if (!cm_ip_is_any(ip)) {
		ctx = cm_device_for_ip(ip);
		/* Linux binds a loopback address like the wildcard (no device
		 * until a destination is resolved): no kernel RDMA device owns
		 * one.  srn_lo owns 127.0.0.1 and ::1, and a bind to an address
		 * a device owns attaches it (pyverbs opens id->verbs right after
		 * bind); other loopback addresses bind as Linux binds them. */
		if (!ctx && !cm_ip_is_loopback(ip))
			return EADDRNOTAVAIL;
	}
	/* Linux: an IPv4 bind takes IPv4 only; an IPv6 one takes both
	 * unless RDMA_OPTION_ID_AFONLY (or the bindv6only sysctl) says so. */
	if (!c->afonly_set)
		c->afonly = cm_ip_is_v4(ip) || bindv6only();
	slot = cm_dir_bind(cm_ps_code(c->id.ps), ip, c->afonly, &port, c->reuseaddr);
	if (slot < 0)
		return -slot;
	c->dir_slot = slot;
	cm_id_set_src(c, ip, port, scope);
	cm_id_set_device(c, ctx);
	cm_id_fill_gids(c);
	c->state = CM_BOUND;
	return 0;
}

SRN_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	int err;

	if (!id || !addr) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	err = cm_id_bind_locked(cm_id(id), addr);
	cm_dbg("bind id %p to port %u: %d\n", (void *)id, cm_src_port(cm_id(id)), err);
	pthread_mutex_unlock(&cm_lock);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

int cm_sync_complete(struct cm_id *c, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;

	if (c->id.event) {
		rdma_ack_cm_event(c->id.event);
		c->id.event = NULL;
	}
	cm_channel_wait(c->chan, &ev);
	c->id.event = ev;
	if (ev->status) {
		if (ev->event == RDMA_CM_EVENT_REJECTED)
			errno = ECONNREFUSED;
		else
			errno = ev->status < 0 ? -ev->status : ev->status;
		return -1;
	}
	if (ev->event != want) {
		errno = ev->event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED : EINVAL;
		return -1;
	}
	return 0;
}

/* Queue an event with no payload on c (cm_lock held). */
static int post_simple(struct cm_id *c, enum rdma_cm_event_type t, int st)
{
	struct cm_event *e = cm_event_new(c, t, st);

	if (!e)
		return ENOMEM;
	cm_event_queue(c->chan, e);
	return 0;
}

/* The source of an id bound to the wildcard or a loopback address,
 * toward dst: the address the host routes from, and its device. */
static int pick_source(struct cm_id *c, const uint8_t dst[16], uint32_t dscope)
{
	uint8_t ip[16];
	int err;

	memcpy(ip, cm_src_ip(c), 16);
	if (cm_ip_is_loopback(ip) && cm_ip_family(ip) == cm_ip_family(dst))
		cm_id_set_device(c, cm_device_for_ip(ip));
	if (!c->id.verbs) {
		err = -cm_route_src(dst, dscope, ip);
		if (err)
			return err;
		cm_id_set_device(c, cm_device_for_ip(ip));
	}
	if (!c->id.verbs)
		return EADDRNOTAVAIL; /* no softrnic device has that address */
	cm_id_set_src(c, ip, cm_src_port(c), cm_ip_is_linklocal(ip) ? dscope : 0);
	return 0;
}

SRN_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				 struct sockaddr *dst_addr, int timeout_ms)
{
	struct cm_id *c = cm_id(id);
	uint8_t dst[16];
	uint16_t dport;
	uint32_t dscope;
	int err = 0;

	(void)timeout_ms; /* resolution is local and immediate */
	if (!id || !dst_addr) {
		errno = EINVAL;
		return -1;
	}
	err = -cm_ip_from_sa(dst_addr, dst, &dport, &dscope);
	if (!err && cm_ip_is_linklocal(dst) && !dscope)
		err = EINVAL; /* a link-local destination names its link */
	if (err) {
		errno = err;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state == CM_IDLE) {
		/* Bind first: to src_addr, the wildcard standing for the
		 * address the host routes from toward dst. */
		struct sockaddr_storage src;
		uint8_t sip[16] = { 0 };
		uint16_t sport = 0;
		uint32_t sscope = 0;

		if (src_addr && src_addr->sa_family != AF_UNSPEC) {
			if (src_addr->sa_family != dst_addr->sa_family) {
				err = EINVAL;
				goto out;
			}
			err = -cm_ip_from_sa(src_addr, sip, &sport, &sscope);
			if (err)
				goto out;
		}
		if (cm_ip_is_any(sip)) {
			err = -cm_route_src(dst, dscope, sip);
			if (err)
				goto out;
			sscope = cm_ip_is_linklocal(sip) ? dscope : 0;
		}
		cm_ip_to_sa(&src, sip, sport, sscope);
		err = cm_id_bind_locked(c, (struct sockaddr *)&src);
		if (err)
			goto out;
	} else if (c->state != CM_BOUND && c->state != CM_ADDR_RESOLVED) {
		err = EINVAL;
		goto out;
	}
	/* An id bound in the other family (its wildcard too) cannot reach
	 * dst: EINVAL, as Linux's rdma_cm. */
	if (cm_ip_family(cm_src_ip(c)) != cm_ip_family(dst)) {
		err = EINVAL;
		goto out;
	}
	if (!c->id.verbs || cm_ip_is_any(cm_src_ip(c))) {
		err = pick_source(c, dst, dscope);
		if (err)
			goto out;
	}
	cm_id_set_dst(c, dst, dport, dscope);
	cm_id_fill_gids(c);
	c->state = CM_ADDR_RESOLVED;
	err = post_simple(c, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	cm_dbg("resolve_addr id %p to port %u\n", (void *)id, cm_dst_port(c));
out:
	pthread_mutex_unlock(&cm_lock);
	if (err) {
		errno = err;
		return -1;
	}
	return c->sync ? cm_sync_complete(c, RDMA_CM_EVENT_ADDR_RESOLVED) : 0;
}

SRN_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct cm_id *c = cm_id(id);
	struct ibv_port_attr pa;
	int err = 0;

	(void)timeout_ms;
	if (!id) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state != CM_ADDR_RESOLVED && c->state != CM_ROUTE_RESOLVED) {
		err = EINVAL;
		goto out;
	}
	memset(&c->path, 0, sizeof(c->path));
	c->path.sgid = c->id.route.addr.addr.ibaddr.sgid;
	c->path.dgid = c->id.route.addr.addr.ibaddr.dgid;
	c->path.pkey = htons(0xffff);
	c->path.flow_label = htonl(wire_cm_flow_label(cm_src_port(c), cm_dst_port(c)));
	c->path.hop_limit = 64;
	c->path.traffic_class = c->tos;
	c->path.reversible = 1;
	c->path.numb_path = 1;
	c->path.mtu_selector = 2; /* exactly */
	c->path.mtu = IBV_MTU_1024;
	if (ibv_query_port(c->id.verbs, 1, &pa) == 0)
		c->path.mtu = pa.active_mtu;
	c->path.rate_selector = 2;
	c->path.rate = 3; /* 10 Gb/s */
	c->path.packet_life_time_selector = 2;
	c->path.packet_life_time = 18;
	c->id.route.path_rec = &c->path;
	c->id.route.num_paths = 1;
	c->state = CM_ROUTE_RESOLVED;
	err = post_simple(c, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
out:
	pthread_mutex_unlock(&cm_lock);
	if (err) {
		errno = err;
		return -1;
	}
	return c->sync ? cm_sync_complete(c, RDMA_CM_EVENT_ROUTE_RESOLVED) : 0;
}

SRN_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? id->route.addr.src_sin.sin_port : 0;
}

SRN_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? id->route.addr.dst_sin.sin_port : 0;
}

SRN_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
			       void *optval, size_t optlen)
{
	struct cm_id *c = cm_id(id);
	int err = 0;

	if (!id || !optval) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
			if (optlen != sizeof(uint8_t))
				err = EINVAL;
			else
				c->tos = *(uint8_t *)optval;
			break;
		case RDMA_OPTION_ID_REUSEADDR:
			if (optlen != sizeof(int))
				err = EINVAL;
			else if (c->state != CM_IDLE)
				err = EINVAL; /* only before binding, as Linux */
			else
				c->reuseaddr = *(int *)optval != 0;
			break;
		case RDMA_OPTION_ID_AFONLY:
			if (optlen != sizeof(int))
				err = EINVAL;
			else if (c->state != CM_IDLE)
				err = EINVAL; /* only before binding, as Linux */
			else {
				c->afonly = *(int *)optval != 0;
				c->afonly_set = true;
			}
			break;
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (optlen != sizeof(uint8_t))
				err = EINVAL;
			else {
				c->ack_timeout = *(uint8_t *)optval;
				c->ack_timeout_set = true;
			}
			break;
		default:
			err = ENOSYS;
		}
	} else if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) {
		/* A path given by the application: RoCE paths are implied by
		 * the addresses, so accept and keep ours (sgid/dgid). */
		if (optlen == 0 || optlen % sizeof(struct ibv_path_data))
			err = EINVAL;
	} else {
		err = ENOSYS;
	}
	pthread_mutex_unlock(&cm_lock);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

SRN_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct cm_id *c = cm_id(id);
	struct cm_channel *old, *nw;
	unsigned int moved = 0;
	bool sync = !channel;

	if (!id) {
		errno = EINVAL;
		return -1;
	}
	if (sync) {
		channel = rdma_create_event_channel();
		if (!channel)
			return -1;
	}
	/* A synchronous id keeps its last event until the next call: this
	 * call is the next one (else the wait for acks below never ends). */
	if (c->sync && id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	nw = cm_chan(channel);
	pthread_mutex_lock(&cm_lock);
	old = c->chan;
	/* Move the id's queued events; wait for those already handed out. */
	pthread_mutex_lock(&old->lock);
	{
		struct cm_event **pp = &old->head, *e, *prev = NULL, *list = NULL, **lt = &list;

		while ((e = *pp)) {
			if (e->owner == c) {
				*pp = e->next;
				e->next = NULL;
				*lt = e;
				lt = &e->next;
				moved++;
				continue;
			}
			prev = e;
			pp = &e->next;
		}
		old->tail = prev;
		if (!old->head) {
			uint64_t v;

			if (old->signalled && read(old->ch.fd, &v, sizeof(v)) == sizeof(v))
				old->signalled = false;
		}
		pthread_mutex_unlock(&old->lock);
		while (c->unacked > moved)
			pthread_cond_wait(&cm_ack_cond, &cm_lock);
		c->chan = nw;
		c->id.channel = channel;
		while (list) {
			e = list;
			list = e->next;
			c->unacked--;
			cm_event_queue(nw, e);
		}
	}
	pthread_mutex_unlock(&cm_lock);
	if (c->sync)
		rdma_destroy_event_channel(&old->ch);
	c->sync = sync;
	return 0;
}

SRN_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct cm_id *c = cm_id(id);
	int err = 0;

	if (!id) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (event == IBV_EVENT_COMM_EST) {
		/* Data arrived before the RTU: the connection is up. */
		if (c->state == CM_REP_SENT) {
			struct cm_event *e = cm_event_new(c, RDMA_CM_EVENT_ESTABLISHED, 0);

			c->state = CM_ESTABLISHED;
			c->mad_pending = false;
			if (e)
				cm_event_queue(c->chan, e);
		}
	} else if (event != IBV_EVENT_PATH_MIG && event != IBV_EVENT_PATH_MIG_ERR) {
		err = EINVAL;
	}
	pthread_mutex_unlock(&cm_lock);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

SRN_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || !ece || ece->comp_mask) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	cm_id(id)->local_ece = *ece;
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

/* The ECE the peer sent: its REQ's (passive side, from CONNECT_REQUEST
 * on) or its REP's (active side); vendor 0, options 0 when it sent none
 * ("no enhancements"). */
SRN_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || !ece) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	*ece = cm_id(id)->remote_ece;
	pthread_mutex_unlock(&cm_lock);
	return 0;
}
