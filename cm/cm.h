/* cm/: the connection manager's object model (librdmacm.so.1).
 *
 * One process-wide lock (cm_lock) guards every cm id, the MAD agent and the
 * timers: connection setup is rare and slow next to the data path, so one
 * lock keeps the state machine simple.  Lock order: cm_lock -> channel lock.
 * The IB CM protocol (REQ/REP/RTU/REJ/MRA/DREQ/DREP on QP1, IBTA Vol 1
 * ch. 12) runs in cm/conn.c, its MADs move through cm/gsi_net.c, a
 * background thread (cm/agent.c) receives them and fires retransmissions.
 */
#ifndef CM_H
#define CM_H

#include <netinet/in.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "cm/addr.h"
#include "wire/mad.h"

/* SOFTRNIC_LOG=debug traces every MAD, state change and connection call
 * on stderr, stamped with CLOCK_MONOTONIC (us): one clock for every
 * process of the host and its network namespaces, so the logs of both
 * sides of a connection merge into one timeline. */
extern int cm_debug_on;
uint64_t cm_dbg_stamp_us(void);
#define cm_dbg(...)                                                          \
	do {                                                                 \
		if (cm_debug_on) {                                           \
			uint64_t us_ = cm_dbg_stamp_us();                    \
			fprintf(stderr, "softrnic cm[%d] %llu.%06llu: ",     \
				(int)getpid(),                               \
				(unsigned long long)(us_ / 1000000),         \
				(unsigned long long)(us_ % 1000000));        \
			fprintf(stderr, __VA_ARGS__);                        \
		}                                                            \
	} while (0)

/* ---- event channels (cm/channel.c) ----------------------------------- */

struct cm_id;

struct cm_event {
	struct rdma_cm_event ev;     /* what the application sees: first */
	struct cm_event *next;       /* channel queue */
	struct cm_id *owner;         /* id whose unacked count this holds */
	uint8_t pdata[WIRE_CM_DATA_LEN]; /* event private data lives here */
};

struct cm_channel {
	struct rdma_event_channel ch; /* ch.fd: readable iff events queued */
	pthread_mutex_t lock;        /* guards the queue */
	pthread_cond_t cond;         /* signalled when an event is queued */
	struct cm_event *head, *tail;
	bool signalled;              /* fd holds a token */
	unsigned int waiters;        /* threads asleep on cond */
};

static inline struct cm_channel *cm_chan(struct rdma_event_channel *c)
{
	return (struct cm_channel *)c;
}

/* Queue ev on its owner's channel (ev->ev.id must be set).  Counts it as
 * unacked on ev->owner.  Called with cm_lock held. */
void cm_event_queue(struct cm_channel *ch, struct cm_event *ev);
/* Posts now every DISCONNECTED that a DREQ's grace holds back on ch (before
 * any later event of ch; cm_lock held). */
void cm_post_held(struct cm_channel *ch);
/* A zeroed event for id of type t and status st; NULL on ENOMEM. */
struct cm_event *cm_event_new(struct cm_id *id, enum rdma_cm_event_type t, int st);
/* The CONNECT_REQUEST a listener l gets for its new id c (REQ or
 * SIDR_REQ): c enters CM_REQ_RCVD, counts as pending on l, and the event
 * carries len bytes of pdata (the caller points the conn or ud union
 * member at e->pdata and queues it).  NULL on ENOMEM. */
struct cm_event *cm_event_connect_request(struct cm_id *c, struct cm_id *l,
					  const uint8_t *pdata, size_t len);
/* Drop queued events of id (destroy); called with cm_lock held. */
void cm_channel_purge(struct cm_channel *ch, struct cm_id *id);
/* Take the first event of id's channel that belongs to id; blocking.
 * (synchronous ids own their channel).  0 or -1 + errno. */
int cm_channel_wait(struct cm_channel *ch, struct rdma_cm_event **ev);

/* ---- ids (cm/id.c) ---------------------------------------------------- */

enum cm_state {
	CM_IDLE,                     /* created */
	CM_BOUND,                    /* rdma_bind_addr */
	CM_ADDR_RESOLVED,
	CM_ROUTE_RESOLVED,
	CM_LISTEN,
	CM_REQ_SENT,                 /* active: waiting for REP */
	CM_REQ_RCVD,                 /* passive: CONNECT_REQUEST given out */
	CM_REP_RCVD,                 /* active without QP: app must establish */
	CM_REP_SENT,                 /* passive: waiting for RTU */
	CM_ESTABLISHED,
	CM_DREQ_SENT,                /* waiting for DREP */
	CM_TIMEWAIT,                 /* disconnected */
	CM_SIDR_REQ_SENT,            /* UDP port space: waiting for SIDR_REP */
};

/* Where the peer's CM agent listens: address (cm/addr.h) + UDP port. */
struct cm_peer {
	uint8_t ip[16];
	uint32_t scope;              /* link-local IPv6: interface index */
	uint16_t port;               /* host order; CM_ROCE_PORT: a RoCE GSI
	                              * (kernel rdma_cm, another host), never
	                              * a softrnic agent of this host */
};
enum { CM_ROCE_PORT = 4791 };     /* RoCEv2's UDP port: where a GSI listens */

struct cm_id {
	struct rdma_cm_id id;        /* the application's id: first */
	struct cm_id *next;          /* all ids of the process (cm_ids) */
	enum cm_state state;
	struct cm_channel *chan;     /* == id.channel */
	bool sync;                   /* created with a NULL channel */
	int dir_slot;                /* directory binding, -1 if none */
	bool reuseaddr;
	bool afonly, afonly_set;     /* bound: takes its own family only */
	uint8_t tos, ack_timeout;    /* rdma_set_option */
	bool ack_timeout_set;
	unsigned int unacked;        /* events handed out, not acked */
	bool destroying;
	struct ibv_sa_path_rec path; /* route.path_rec points here */
	/* route.addr's addresses in cm/addr.h form (cm_id_set_src/dst) */
	uint8_t sip[16], dip[16];
	uint32_t sscope, dscope;
	/* listener */
	int backlog;
	int pending;                 /* CONNECT_REQUESTs not yet accepted */
	struct cm_id *listener;      /* passive conn id: its listener */
	bool passive;                /* created by a REQ */
	bool peer_local;             /* peer agent on this host */
	bool sync_disc_wait;         /* sync id: DISCONNECTED still to wait for */
	struct ibv_qp_init_attr *ep_qp_attr; /* rdma_create_ep (passive) */
	struct ibv_pd *ep_pd;
	/* connection */
	uint32_t local_comm_id, remote_comm_id;
	uint64_t tid;                /* REQ/REP/RTU transaction */
	struct cm_peer peer;         /* peer CM agent */
	uint32_t local_qpn;          /* our QP (or conn_param qp_num) */
	uint32_t remote_qpn;
	uint32_t rq_psn;             /* PSN we expect to receive (we sent it) */
	uint32_t sq_psn;             /* PSN we send from (the peer sent it) */
	uint8_t responder_resources, initiator_depth;
	uint8_t retry_count, rnr_retry_count;
	uint8_t srq;
	uint8_t remote_resp_res, remote_init_depth; /* as the peer sent */
	uint8_t peer_cm_timeout;     /* peer's CM response timeout */
	bool own_qp;                 /* QP created with rdma_create_qp */
	uint32_t remote_qkey;        /* SIDR */
	struct ibv_ece local_ece, remote_ece;
	/* MAD retransmission */
	uint8_t mad[WIRE_MAD_LEN];   /* last MAD that expects an answer */
	bool mad_pending;
	int mad_retries;             /* retransmissions left */
	int mad_timeout_ms;
	uint64_t mad_deadline_ms;
	uint64_t timewait_ms;        /* when to report TIMEWAIT_EXIT, 0 = never */
	uint64_t disc_at_ms;         /* a DREQ came: when to report
				      * DISCONNECTED, 0 = not waiting */
	uint64_t lookup_until_ms;
	int dead_strikes;            /* passes that found the peer agent gone */
	uint64_t unreach_ms;         /* first "port unreachable" from the
				      * peer's host (cm_peer_unreachable), 0 = none */    /* REQ with no listener yet: give up then */
	uint8_t last_reply[WIRE_MAD_LEN]; /* REP/RTU/DREP for duplicates */
	bool have_last_reply;
	struct cm_event *rep_event;  /* active: REP data for ESTABLISHED */
};

static inline struct cm_id *cm_id(struct rdma_cm_id *id)
{
	return (struct cm_id *)id;
}

extern pthread_mutex_t cm_lock;
extern pthread_cond_t cm_ack_cond;  /* an event was acked (with cm_lock) */
extern struct cm_id *cm_ids;         /* guarded by cm_lock */

struct cm_id *cm_id_alloc(struct cm_channel *ch, void *context,
			  enum rdma_port_space ps, bool sync);
/* Bind to addr's device (if not wildcard) and directory; cm_lock held.
 * 0 or positive errno. */
int cm_id_bind_locked(struct cm_id *c, const struct sockaddr *addr);
/* The device that has ip (cm/addr.h form) as a GID; NULL if none. */
struct ibv_context *cm_device_for_ip(const uint8_t ip[16]);
/* The index of GID gid on port 1 of ctx (0 if it has none). */
uint8_t cm_gid_index(struct ibv_context *ctx, const union ibv_gid *gid);
/* Set c's source / destination address (route.addr, sip/dip). */
void cm_id_set_src(struct cm_id *c, const uint8_t ip[16], uint16_t port, uint32_t scope);
void cm_id_set_dst(struct cm_id *c, const uint8_t ip[16], uint16_t port, uint32_t scope);
void cm_id_fill_gids(struct cm_id *c);
/* Unlink and free an id no application has seen (cm_lock held). */
void cm_id_free_unreported(struct cm_id *c);
uint16_t cm_src_port(const struct cm_id *c);   /* host order */
uint16_t cm_dst_port(const struct cm_id *c);
const uint8_t *cm_src_ip(const struct cm_id *c); /* 16 bytes, cm/addr.h */
const uint8_t *cm_dst_ip(const struct cm_id *c);
uint16_t cm_ps_code(enum rdma_port_space ps);
uint64_t cm_now_ms(void);
/* Wait (cm_lock NOT held) for the next event of a sync id; returns 0 when
 * it is of type want with status 0, else -1 + errno (rdma-core's rules). */
int cm_sync_complete(struct cm_id *c, enum rdma_cm_event_type want);

/* ---- the MAD agent (cm/agent.c, cm/gsi_net.c) ------------------------ */

/* Start the agent (socket + thread) once.  0 or positive errno. */
int cm_agent_start(void);
uint16_t cm_agent_port(void);        /* our GSI UDP port, host order */
/* Our agent's directory slot (the top bits of our comm ids), -1 if none. */
int cm_agent_slot(void);
void cm_agent_wake(void);            /* re-evaluate timers now */
/* Send a MAD to peer from local address src.  0 or -errno. */
int cm_mad_send(const struct cm_peer *peer, const uint8_t src_ip[16],
		const uint8_t mad[WIRE_MAD_LEN]);

/* The GSI socket of family (AF_INET or AF_INET6, IPv6 only) on *port
 * (0: any, then set): fd or -errno. */
int cm_gsi_open(int family, uint16_t *port);
/* Send one UD MAD packet; 0 or -errno. */
int cm_gsi_send(int fd, uint16_t sport, const uint8_t src_ip[16],
		const struct cm_peer *to, uint32_t psn,
		const uint8_t mad[WIRE_MAD_LEN]);
/* Receive one packet; returns 1 and the MAD (copied to mad) with sender,
 * 0 if nothing valid is waiting (a bad packet is dropped), -errno. */
int cm_gsi_recv(int fd, uint8_t mad[WIRE_MAD_LEN], struct cm_peer *from,
		uint8_t to_ip[16]);
/* The socket of family probes go from, which reports ICMP errors: fd or
 * -errno. */
int cm_probe_open(int family);
/* An empty datagram to to (cm/peer_probe.c): a live engine takes it for
 * a doorbell; a host with nobody at the port answers ICMP. 0 or -errno. */
int cm_gsi_probe(int fd, const struct cm_peer *to);
int cm_probe_send(const struct cm_peer *peer); /* on our agent's probe socket */
/* Probes the hosts of established connections to other hosts
 * (cm/peer_probe.c); ms until the next is due, -1 = none.  cm_lock held. */
int cm_probe_timers(uint64_t now);
/* Probe peer's host at the next timer pass (a DREQ went there). */
void cm_probe_soon(const struct cm_peer *peer);
/* What ICMP said about a probe's destination. */
enum cm_unreach {
	CM_UNREACH_PORT = 1,         /* nobody listens at the port */
	CM_UNREACH_HOST = 2,         /* no such host (no route, no neighbour) */
};
/* One error from the probe socket's error queue: a cm_unreach with the
 * address the probe was sent to, 0 for another error, -EAGAIN when the
 * queue is empty, -errno. */
int cm_gsi_recv_err(int fd, struct cm_peer *to);
/* Nobody listens at to (why: CM_UNREACH_PORT) or there is no such host
 * (CM_UNREACH_HOST): REQs and SIDR_REQs sent there end now
 * (UNREACHABLE); on port unreachable DREQs sent there give up too, and
 * established connections to that host's port 4791 end when it says so
 * twice, at least CM_UNREACH_GAP_MS apart.  cm_lock held. */
void cm_peer_unreachable(const struct cm_peer *to, int why);
/* The source address the host would use toward dst (0 or -errno). */
int cm_route_src(const uint8_t dst[16], uint32_t scope, uint8_t src[16]);
bool cm_ip_is_local(const uint8_t ip[16]);

/* ---- the host-wide directory (cm/directory.c) ------------------------ */

/* Reserve (ps, ip, port): ip a wildcard of either family (cm_ip_is_any)
 * or an address; port 0 picks one.  Returns the slot (>= 0) and sets
 * *port, or -EADDRINUSE / -ENOSPC / -errno. */
int cm_dir_bind(uint16_t ps, const uint8_t ip[16], bool afonly, uint16_t *port, bool reuse);
void cm_dir_unbind(int slot);
int cm_dir_listen(int slot, uint16_t gsi_port);   /* 0 or -EADDRINUSE */
/* GSI port of the live listener for (ps, ip, port), or 0. */
uint16_t cm_dir_lookup(uint16_t ps, const uint8_t ip[16], uint16_t port);
int cm_dir_agent_register(uint16_t gsi_port);   /* 0 or -errno */
/* The slot our agent on gsi_port holds (named in our comm ids, see
 * net/cm_dir.h), or -errno. */
int cm_dir_agent_slot(uint16_t gsi_port);
/* Is the agent on gsi_port (a local process) still alive? */
bool cm_dir_agent_alive(uint16_t gsi_port);

/* ---- the protocol (cm/conn.c) ---------------------------------------- */

void cm_conn_mad_in(const uint8_t mad[WIRE_MAD_LEN], const struct cm_peer *from,
		    const uint8_t to_ip[16]);
/* Retransmit or time out what is due; returns ms until the next deadline
 * (-1 = none).  cm_lock held. */
int cm_conn_timers(uint64_t now);
/* Release a connection's protocol state on destroy (sends DREQ/REJ as
 * needed).  cm_lock held. */
void cm_conn_destroy(struct cm_id *c);

/* ---- QPs (cm/qp.c) ---------------------------------------------------- */

int cm_qp_to_rtr(struct cm_id *c);   /* 0 or positive errno */
int cm_qp_to_rts(struct cm_id *c);
void cm_qp_to_err(struct cm_id *c);
struct ibv_pd *cm_default_pd(struct ibv_context *ctx);
/* c is on device ctx now (NULL: not yet): id.verbs, id.port_num, and
 * unless it has one, id.pd = the device's shared PD (librdmacm sets all
 * three once an id has a device; applications use id->pd before any
 * QP exists). */
void cm_id_set_device(struct cm_id *c, struct ibv_context *ctx);

#endif
