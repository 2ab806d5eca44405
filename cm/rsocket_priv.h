/* rsockets: stream sockets over an RC QP (librdmacm's rsocket(7) API).
 *
 * Our own wire protocol, written from the API's documented behaviour: it
 * does NOT interoperate with rdma-core's rsockets (both ends must be
 * softrnic).  Each side posts RS_RQ_DEPTH receive buffers of rs_seg bytes;
 * every message is a SEND_WITH_IMM whose immediate says what it is (data,
 * credit update, FIN) and how many of the peer's messages we have consumed
 * since we last said so (the credits we give back).  A sender may have at
 * most `window` data messages not yet given back; credit updates and the
 * FIN ride on RS_RQ_EXTRA spare receives (at most 3 updates can be
 * unprocessed at once, since each gives back >= window/2, plus one FIN).
 * Receive buffers are handed to rrecv in place and reposted once read.
 * riowrite is an RDMA WRITE into a window the peer announced (riomap, an
 * RS_MSG_IOMAP message), ordered before whatever is sent after it.
 *
 * The descriptor the application sees is the rsocket's rdma_cm event
 * channel fd: a real descriptor, so numbers never collide with ordinary
 * fds and rpoll can sleep on it together with the CQ's completion channel.
 * All progress (CQ polling, cm events) happens inside rsocket calls; the
 * NIC's engine thread keeps ACKing and placing data in between.
 */
#ifndef CM_RSOCKET_PRIV_H
#define CM_RSOCKET_PRIV_H

#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

enum {
	RS_SEG = 64 * 1024,          /* bytes per message (receive buffer) */
	RS_WINDOW = 32,              /* data messages in flight per direction */
	RS_RQ_EXTRA = 8,             /* spare receives for updates and FIN */
	RS_RQ_DEPTH = RS_WINDOW + RS_RQ_EXTRA,
	RS_SQ_DEPTH = RS_WINDOW + RS_RQ_EXTRA,
	RS_PDATA_MAGIC = 0x53524e52, /* "SRNR" */
	RS_PDATA_VERSION = 1,
};

/* The immediate: type in the top byte, credits given back below.  DATA
 * and IOMAP take a data credit (and a receive buffer until handled);
 * CREDIT and FIN ride on the spare receives. */
enum rs_msg { RS_MSG_DATA = 1, RS_MSG_CREDIT = 2, RS_MSG_FIN = 3, RS_MSG_IOMAP = 4 };

enum { WR_DATA = 1, WR_CTRL = 2 }; /* send wr_id kinds: buffer or none */
#define WR_ID(kind, idx) (((uint64_t)(kind) << 32) | (idx))

/* riomap: a window of our memory the peer may riowrite into, announced
 * in-band (RS_MSG_IOMAP) so it applies to what the peer sends after. */
enum { RS_MAX_IOMAP = 16 };
struct rs_iomap_msg {            /* payload of RS_MSG_IOMAP, network order */
	uint64_t offset;             /* the application's offset */
	uint64_t addr;               /* where it is in our memory */
	uint64_t len;                /* 0: unmapped */
	uint32_t rkey;
	uint32_t reserved;
};
struct rs_lmap { void *buf; size_t len; uint64_t offset; struct ibv_mr *mr; bool remote; };
struct rs_rmap { uint64_t offset, addr, len; uint32_t rkey; };
#define RS_IMM(type, credits) (((uint32_t)(type) << 24) | ((credits) & 0xffffff))

/* Connection private data (REQ and REP): what the sender may send us. */
struct rs_pdata {
	uint32_t magic;              /* RS_PDATA_MAGIC, network order */
	uint8_t version;
	uint8_t reserved[3];
	uint32_t window;             /* data messages we accept in flight */
	uint32_t seg;                /* bytes per message we accept */
};

enum rs_state {
	RS_NEW,                      /* rsocket(): id created, maybe bound */
	RS_LISTENING,
	RS_CONNECTING,               /* rconnect in progress (see conn_step) */
	RS_ACCEPTING,                /* accepted, ESTABLISHED not yet seen */
	RS_CONNECTED,
	RS_FAILED,                   /* connect failed or connection broken */
};

enum rs_conn_step { RS_STEP_ADDR, RS_STEP_ROUTE, RS_STEP_CONN };

struct rs_ready {                /* a received data message not yet read */
	uint32_t idx;                /* receive buffer index */
	uint32_t len, off;           /* bytes in it, bytes already read */
};

struct rs_pending {              /* a connection request not yet raccept'ed */
	struct rdma_cm_id *id;
	struct rs_pdata pdata;       /* as the client sent it */
	struct rs_pending *next;
};

struct rs {
	int fd;                      /* descriptor: ch->fd */
	int refs;                    /* table + callers inside (rs_table_lock) */
	bool closing;
	pthread_mutex_t lock;        /* everything below */
	int domain;                  /* AF_INET or AF_INET6, as created */
	enum rs_state state;
	enum rs_conn_step conn_step;
	int err;                     /* SO_ERROR: pending error (positive) */
	bool nonblock;               /* O_NONBLOCK */
	bool bound;
	/* stored options (accepted, mostly advisory) */
	int opt_reuseaddr, opt_keepalive, opt_oobinline, opt_sndbuf, opt_rcvbuf;
	int opt_nodelay, opt_maxseg, opt_keepidle, opt_v6only;
	int opt_sqsize, opt_rqsize, opt_inline, opt_iomapsize;
	struct linger opt_linger;
	/* cm */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rs_pending *acceptq, *acceptq_tail; /* listener */
	int backlog;
	/* verbs resources (connected sockets) */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	struct ibv_mr *rmr, *smr;
	uint8_t *rbuf, *sbuf;        /* RS_RQ_DEPTH and RS_WINDOW segments */
	bool qp_ready;               /* QP created and receives posted */
	/* receive side */
	struct rs_ready ready[RS_RQ_DEPTH]; /* FIFO of unread data messages */
	uint32_t ready_head, ready_count;
	uint32_t owed;               /* consumed, not yet given back */
	bool fin_rcvd;               /* peer sent FIN: EOF after the data */
	bool rd_shut;                /* shutdown(SHUT_RD) */
	/* send side */
	uint32_t credits;            /* data messages we may still send */
	uint32_t peer_window;        /* the most the peer grants at once */
	uint32_t peer_seg;           /* bytes per message the peer accepts */
	uint32_t sfree[RS_WINDOW];   /* free send buffer indexes (stack) */
	uint32_t nsfree;
	uint32_t sq_free;            /* free send queue slots */
	bool fin_sent, wr_shut;
	bool peer_gone;              /* DISCONNECTED seen */
	bool qp_err;                 /* a completion failed: QP is dead */
	bool armed;                  /* CQ armed for an event */
	/* remote IO mappings (cm/rsocket_iomap.c) */
	struct rs_lmap lmap[RS_MAX_IOMAP]; /* ours (len 0 = free) */
	struct rs_rmap rmap[RS_MAX_IOMAP]; /* the peer's (len 0 = free) */
};

/* ---- descriptor table (cm/rsocket.c) ---- */
/* The rsocket behind fd with a reference, or NULL + errno EBADF. */
struct rs *rs_get(int fd);
void rs_put(struct rs *rs);

/* ---- connections (cm/rsocket_conn.c) ---- */
/* Create QP, CQ, buffers and post receives on rs->id (rs->lock held).
 * 0 or positive errno. */
int rs_setup_qp(struct rs *rs);
void rs_free_qp(struct rs *rs);
void rs_pdata_fill(struct rs_pdata *p);
/* Check the peer's pdata and take its window: 0 or EPROTO. */
int rs_pdata_take(struct rs *rs, const void *data, uint8_t len);
/* Advance a connecting / accepting / listening socket with the cm events
 * queued on its channel (never blocks; rs->lock held). */
void rs_cm_progress(struct rs *rs);

/* ---- data path (cm/rsocket_io.c) ---- */
/* Poll cm events and the CQ, post owed credits (never blocks). */
void rs_progress(struct rs *rs);
/* Events ready on rs for the poll bits in `events` (progresses first). */
short rs_poll_events(struct rs *rs, short events);
/* Arm rs so that any change wakes a poll on the fds it fills in (up to 2);
 * returns how many, or -1 if something is ready already (do not sleep). */
int rs_arm(struct rs *rs, short events, struct pollfd *out);
/* After a sleep: consume completion-channel events. */
void rs_disarm(struct rs *rs);
/* Sleep until rs may have changed (rs->lock held; dropped while asleep). */
void rs_wait(struct rs *rs, short events, int timeout_ms);
ssize_t rs_send_iov(int fd, const struct iovec *iov, int iovcnt, int flags);
ssize_t rs_recv_iov(int fd, const struct iovec *iov, int iovcnt, int flags);
/* Send a FIN (if possible) and wait up to ms for the send queue to drain. */
void rs_send_fin(struct rs *rs);
void rs_drain_sends(struct rs *rs, int ms);

uint64_t rs_now_ms(void);

/* Post one SEND_WITH_IMM of type from send buffer idx (len bytes), or a
 * bare control message (idx < 0); gives back owed credits.  0 or errno. */
int rs_post(struct rs *rs, enum rs_msg type, int idx, uint32_t len);
int rs_repost(struct rs *rs, uint32_t idx);

/* ---- remote IO mapping (cm/rsocket_iomap.c) ---- */
/* The peer's RS_MSG_IOMAP payload (len bytes) arrived. */
void rs_iomap_in(struct rs *rs, const void *msg, uint32_t len);
/* Deregister our mappings (before the PD goes). */
void rs_iomap_free(struct rs *rs);

#endif
