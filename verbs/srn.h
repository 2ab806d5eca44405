/* softrnic object model: one header for the objects every layer above the
 * wire shares.  Each verbs object embeds the rdma-core struct the
 * application sees as its first member, so the pointer handed out and the
 * softrnic object are the same address (srn_from_ibv()).
 *
 * Locking: each CQ, QP and SRQ has its own mutex; the context's object
 * tables have one mutex.  Lock order: qp -> cq (a QP completes into its CQs).
 */
#ifndef SRN_H
#define SRN_H

#include <infiniband/verbs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define srn_container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

#define SRN_VENDOR_ID 0x5352 /* "SR": not a PCI vendor; software device */
#define SRN_VENDOR_PART 0x0001
#define SRN_MAX_GID 16
#define SRN_ROCE_UDP_PORT 4791

/* Engine limits, reported by ibv_query_device and enforced at creation. */
enum srn_limits {
	SRN_MAX_QP = 65536,
	SRN_MAX_QP_WR = 16384,
	SRN_MAX_SGE = 32,
	SRN_MAX_INLINE = 256,
	SRN_MAX_CQ = 16384,
	SRN_MAX_CQE = 1 << 20,
	SRN_MAX_MR = 1 << 20,
	SRN_MAX_PD = 1 << 16,
	SRN_MAX_SRQ = 16384,
	SRN_MAX_SRQ_WR = 16384,
	SRN_MAX_AH = 1 << 16,
	SRN_MAX_RD_ATOM = 128, /* max_qp_rd_atom and max_qp_init_rd_atom */
	SRN_MAX_MCAST_GRP = 8192,
	SRN_MAX_MCAST_QP_ATTACH = 56,
};
#define SRN_MAX_MR_SIZE (1ULL << 40)
#define SRN_MAX_MSG_SIZE (1U << 31) /* 2 GiB, as IBTA's DMA length allows */
/* Completion timestamps tick in ns: a 1 GHz "core clock" (in kHz). */
#define SRN_HCA_CORE_CLOCK_KHZ 1000000ULL
/* Device memory one context may hold (verbs/dm.c): small, as on a NIC. */
#define SRN_MAX_DM_SIZE (256ULL << 10)

/* ---- device ------------------------------------------------------------ */

/* One per network interface that is up and has an address (verbs/device.c). */
struct srn_device {
	struct ibv_device ibdev;     /* what ibv_get_device_list hands out */
	char ifname[IF_NAMESIZE];    /* the interface, e.g. "lo" */
	int ifindex;                 /* kernel interface index */
	unsigned int if_mtu;         /* interface MTU in bytes */
	uint8_t mac[6];              /* zero for loopback */
	__be64 node_guid;            /* EUI-64 from the MAC (or from the name) */
	int index;                   /* ibv_get_device_index() */
	int num_gids;                /* valid entries in gid[] */
	union ibv_gid gid[SRN_MAX_GID]; /* [0] = IPv4-mapped address, then IPv6 */
	int gid_family[SRN_MAX_GID]; /* AF_INET or AF_INET6 per entry */
	/* The port as an engine's link watch last saw the interface
	 * (transport/link_watch.c): 0 = not watched (loopback, no netlink):
	 * active; else enum ibv_port_state | phys_state << 8. */
	_Atomic uint16_t port_link;
	bool iwarp;                  /* an iWARP RNIC (IFNAME:iwarp), verbs/iwarp_dev.c */
	uint8_t guid_mac[6];         /* the MAC node_guid derives from (made up
				      * when the interface has none) */
};

static inline struct srn_device *srn_dev(struct ibv_device *d)
{
	return srn_container_of(d, struct srn_device, ibdev);
}

/* IB MTU enum for the largest payload that fits the interface MTU after
 * IP(v4 20 / v6 40) + UDP 8 + BTH 12 + largest ext header + ICRC. */
enum ibv_mtu srn_dev_active_mtu(const struct srn_device *dev);
/* The GID the device's IPv6 packets leave from: its first IPv6 entry that
 * is not link-local (those need an interface scope the GID cannot carry),
 * or -1. */
int srn_dev_ipv6_src(const struct srn_device *dev);

/* ---- context ----------------------------------------------------------- */

struct srn_engine;   /* transport/engine.h: packet I/O and timers */
struct srn_async;    /* verbs/async.c: async event queue behind async_fd */
struct srn_cq_ring;  /* verbs/shared_rings.h: CQ and RQ rings a peer may fill */
struct srn_rq_ring;
struct srn_mr_share; /* verbs/mr_share.h: memfd backing */

struct srn_iw_conn;  /* transport/iwarp_tcp.h */
/* What librdmacm calls on an iWARP QP (transport/iwarp_qp.h): the
 * libraries export no internals to each other. */
struct srn_iwqp_ops {
	int (*attach)(struct ibv_qp *qp, struct srn_iw_conn *c, void (*on_close)(void *arg),
		      void *arg);
	void (*disconnect)(struct ibv_qp *qp);
};

struct srn_context {
	struct verbs_context vctx;   /* ibv_context is vctx.context */
	struct srn_device *dev;      /* the device this context opened */
	struct srn_engine *engine;   /* this process's NIC engine for dev */
	const struct srn_iwqp_ops *iw_ops; /* iWARP device: its QPs' hooks */
	struct srn_async *async;     /* async events queue */
	pthread_mutex_t lock;        /* guards the object tables below */
	struct srn_mr **mrs;         /* MR table: slot key & (mrs_cap - 1) */
	uint32_t mrs_cap;            /* slots in mrs[]: 0 or a power of two */
	uint32_t mrs_hint;           /* every slot below it holds a live MR */
	uint32_t mrs_live;           /* live MRs in mrs[] */
	uint32_t max_qp, max_mr;     /* limits of this context (SOFTRNIC_MAX_*) */
	_Atomic uint32_t mr_gen;     /* bumped by every dereg and rereg (under
				      * lock): a pointer srn_mr_resolve gave
				      * stays good while this reads the same */
	struct srn_qp **qps;         /* local QPs, open-addressed by QPN */
	uint32_t qps_cap;            /* slots in qps[] (power of two) */
	uint32_t qps_used;           /* slots of qps[] not NULL (QPs + tombstones) */
	uint32_t qps_live;           /* QPs in qps[] */
	atomic_uint num_objects;     /* live PDs, MRs, CQs, QPs... (leak check) */
	uint32_t mrdir_nonce;        /* names this context's MR directory
				      * (verbs/mr_dir.h); random, never 0 */
	struct srn_mrdir *mrdir;     /* the published MR directory, or NULL */
	pthread_mutex_t notify_lock; /* guards notify_cqs and srqs */
	struct srn_cq *notify_cqs;   /* CQs with a completion channel that
				      * same-host peers complete into: a
				      * doorbell makes the engine look at them */
	struct srn_srq *srqs;        /* every SRQ: a doorbell also checks
				      * their armed limits (peers take WQEs) */
	_Atomic uint64_t dm_bytes;   /* device memory allocated (verbs/dm.c) */
};

static inline struct srn_context *srn_ctx(struct ibv_context *c)
{
	return srn_container_of(c, struct srn_context, vctx.context);
}

/* Ops table setup; each area fills the slots it implements.  Order in
 * srn_open_device(): unsupported defaults first, then the areas. */
void srn_ops_init_unsupported(struct verbs_context *vctx); /* verbs/unsupported.c */
void srn_ops_init_device(struct verbs_context *vctx);      /* verbs/query.c */
void srn_ops_init_datapath(struct verbs_context *vctx);    /* verbs/qp.c etc. */
void srn_ops_init_dm(struct verbs_context *vctx);          /* verbs/dm.c */
void srn_ops_init_odp(struct verbs_context *vctx);         /* verbs/mr_odp.c */
void srn_ops_init_parent_domain(struct verbs_context *vctx); /* verbs/parent_domain.c */

/* ---- PD, MR ------------------------------------------------------------ */

/* A thread domain (verbs/parent_domain.c): only counted, see there. */
struct srn_td {
	struct ibv_td ibv;
	atomic_uint users;           /* parent domains holding it (EBUSY) */
};

/* A PD, or a parent domain (ibv_alloc_parent_domain), which has the
 * identity of the PD it was made from: prot and ibv.handle are that PD's,
 * so every protection check compares prot (srn_pd_same). */
struct srn_pd {
	struct ibv_pd ibv;           /* handle = unique id within the context */
	atomic_uint users;           /* MRs, QPs, AHs, SRQs, CQs, parent
				      * domains holding it (EBUSY) */
	struct srn_pd *prot;         /* the protection domain: itself, or a
				      * parent domain's PD */
	struct srn_td *td;           /* parent domain: its thread domain */
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t resource_type);
	void *pd_context;            /* parent domain: handed to alloc/free */
};

/* Do two PDs (or parent domains) protect the same memory? */
static inline bool srn_pd_same(const struct srn_pd *a, const struct srn_pd *b)
{
	return a->prot == b->prot;
}

/* A buffer of an object that came from a parent domain's allocator
 * (verbs/parent_domain.c): p is NULL when softrnic allocated it. */
struct srn_pd_buf {
	struct srn_pd *pd;           /* the parent domain */
	void *p;
	uint64_t type;               /* the resource type alloc was given */
};

struct srn_mr {
	struct ibv_mr ibv;           /* addr/length/lkey/rkey as the app sees */
	struct srn_pd *pd;           /* owning protection domain */
	uint64_t iova;               /* first virtual address peers use */
	uintptr_t vaddr;             /* where iova maps in this process */
	uint64_t length;             /* bytes */
	unsigned int access;         /* IBV_ACCESS_* flags */
	struct srn_mr_share *share;  /* memfd backing peers can map
				      * (verbs/mr_share.c), or NULL */
	struct srn_dm *dm;           /* ibv_reg_dm_mr: the device memory */
};

/* Device memory (verbs/dm.c): pages of the same shareable memory MRs use,
 * so same-host peers reach a DM MR as they reach any other. */
struct srn_dm {
	struct ibv_dm ibv;
	uint8_t *base;               /* page-aligned, zeroed at allocation */
	uint64_t length;             /* what ibv_alloc_dm asked for */
	struct srn_mr_share *share;  /* its memfd backing, or NULL */
	atomic_uint mrs;             /* MRs registered on it (free: EBUSY) */
};

/* Registers an MR whose pd, access and range the caller has checked
 * (verbs/mr.c; ibv_reg_mr_iova2 is it with rdma-core's checks).  NULL +
 * errno (ENOMEM). */
struct ibv_mr *srn_mr_register(struct ibv_pd *pd, void *addr, uint64_t length, uint64_t iova,
			       unsigned int access);

/* An ODP MR's pages [p, p + len) present with the right to read (write
 * false) or write, faulting them in as a NIC's page fault would: false
 * where nothing is mapped or the mapping forbids it (verbs/mr_odp.c). */
bool srn_odp_fault_in(uintptr_t p, uint64_t len, bool write);

/* Result of a memory check: one place maps it to NAK and WC status. */
enum srn_mr_check {
	SRN_MR_OK = 0,
	SRN_MR_BAD_KEY,              /* no MR with this key */
	SRN_MR_PD_MISMATCH,          /* MR belongs to another PD */
	SRN_MR_NO_ACCESS,            /* access flag missing */
	SRN_MR_OUT_OF_BOUNDS,        /* range not inside the MR, or (ODP) not
				      * mapped with the access it needs */
};

/* Resolve (key, iova, len) for an access in pd; on SRN_MR_OK *out is the
 * local pointer.  lkey checks pass access 0 (local read) or
 * IBV_ACCESS_LOCAL_WRITE; rkey checks pass IBV_ACCESS_REMOTE_*.
 * Takes and releases the context lock. */
enum srn_mr_check srn_mr_resolve(struct srn_context *ctx, struct srn_pd *pd,
				 uint32_t key, bool remote, uint64_t iova,
				 uint64_t len, unsigned int access, void **out);
/* srn_mr_resolve's checks without faulting an ODP MR's pages in; *odp
 * says whether the MR is one. */
enum srn_mr_check srn_mr_lookup(struct srn_context *ctx, struct srn_pd *pd, uint32_t key,
				bool remote, uint64_t iova, uint64_t len, unsigned int access,
				void **out, bool *odp);

/* ---- CQ ---------------------------------------------------------------- */

struct srn_cq {
	struct ibv_cq_ex ibv;        /* first fields are a struct ibv_cq */
	pthread_mutex_t lock;        /* guards consuming, resizing, arming */
	struct srn_cq_ring *ring;    /* completions (verbs/shared_rings.h) */
	struct srn_mr_share *share;  /* the ring's memfd backing; NULL: private */
	uint32_t size;               /* ring capacity (>= cqe requested) */
	struct srn_cq_ring *closed;  /* a shared ring replaced by resize: peers
				      * may still look at it, so it stays
				      * (closed) until destroy */
	struct srn_mr_share *closed_share;
	_Atomic uint64_t peer_ns;    /* last completion a same-host peer added */
	struct srn_qp *rq_owner;     /* the only QP receiving into this CQ, if
				      * one: a peer's completion tells it how
				      * far its RQ was taken (cq->lock) */
	uint32_t recv_qps;           /* QPs receiving into it (cq->lock) */
	struct srn_cq *notify_next;  /* ctx->notify_cqs list */
	_Atomic uint64_t progress_ns; /* last inline engine run from a poll */
	atomic_uint empty_polls;     /* polls that found nothing */
	atomic_bool peer_mode;       /* peer_ns recent as of the last look */
	bool overrun;                /* a completion was lost: CQ in error */
	atomic_uint users;           /* QPs and SRQs using it (EBUSY) */
	struct ibv_wc cur;           /* start_poll/next_poll current entry */
	uint64_t cur_ts;             /* its completion time (CLOCK_MONOTONIC ns) */
	uint64_t wc_flags;           /* ibv_create_cq_ex wc_flags */
	uint32_t comp_events_reported; /* events ibv_get_cq_event handed out
					* (destroy waits until all are acked) */
	atomic_uint async_events_reported; /* CQ_ERR events posted (destroy
					    * waits for their acks) */
	struct srn_pd *parent;       /* ibv_create_cq_ex's parent domain (a
				      * user of it), or NULL */
	struct srn_pd_buf ring_buf;  /* the first ring, if parent's allocator
				      * gave it */
};

/* Is cq armed (ibv_req_notify_cq, no event since)?  Any thread. */
bool srn_cq_armed(struct srn_cq *cq);
/* Add one completion.  Fires the completion channel when armed (solicited
 * only needs IBV_WC_... solicited).  On a full ring: marks overrun, raises
 * IBV_EVENT_CQ_ERR once and returns -ENOSPC.  Takes cq->lock. */
int srn_cq_push(struct srn_cq *cq, const struct ibv_wc *wc, bool solicited);
/* A same-host peer's doorbell came (transport/engine_rx.c): fire the
 * channel of every armed CQ a peer has completed into. */
void srn_cq_notify_peers(struct srn_context *ctx);
/* Drop the completions of QP qpn waiting in cq (the QP went to RESET).
 * Takes cq->lock. */
void srn_cq_clean_qp(struct srn_cq *cq, uint32_t qpn);
/* qp starts (added) or stops receiving into cq (verbs/cq.c). */
void srn_cq_recv_qp(struct srn_cq *cq, struct srn_qp *qp, bool added);

/* ---- QP ---------------------------------------------------------------- */

/* A send WQE as the transport sees it: a copy of the application's WR
 * (the WR itself may be reused as soon as post_send returns). */
struct srn_send_wqe {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	unsigned int send_flags;     /* IBV_SEND_* */
	__be32 imm_data;             /* network order, as in the WR */
	uint32_t num_sge;
	struct ibv_sge sge[SRN_MAX_SGE]; /* lkey-based gather list */
	uint64_t length;             /* sum of sge lengths (or inline bytes) */
	uint8_t inline_data[SRN_MAX_INLINE]; /* copied when IBV_SEND_INLINE:
				      * then num_sge == 0 and the payload is
				      * inline_data[0..length) */
	uint64_t remote_addr;        /* RDMA and atomics */
	uint32_t rkey;
	uint64_t compare_add;        /* atomic compare (CAS) or add (FADD) */
	uint64_t swap;               /* atomic swap (CAS) */
	struct ibv_ah *ah;           /* UD destination */
	uint32_t remote_qpn, remote_qkey; /* UD destination (XRC: remote_qpn
				      * is the remote SRQ number) */
	/* transport state of this WQE */
	uint32_t first_psn, last_psn;/* PSN range once started */
	uint64_t sent;               /* bytes handed to the wire */
	int state;                   /* transport/requester.c's WQE state */
	uint8_t *sge0_base;          /* one SGE: where it is, resolved for its
				      * whole length (requester.c), NULL: not */
	uint32_t sge0_gen;           /* ctx->mr_gen then */
};

struct srn_recv_wqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t seq;                /* in a QP's RQ ring: low 32 bits of its
				      * index + 1 once posted (release-stored
				      * last), so a peer needs no tail */
	struct ibv_sge sge[SRN_MAX_SGE];
	uint64_t length;             /* sum of sge lengths */
};

/* Ring of WQEs: the verbs layer produces, the transport consumes. */
struct srn_wq {
	void *wqe;                   /* array of max_wr entries */
	uint32_t max_wr;             /* capacity (always a power of two) */
	uint32_t max_sge;            /* as created */
	uint32_t head;               /* next to retire (completed) */
	uint32_t next;               /* next to start (transport) */
	uint32_t tail;               /* next free (producer) */
};

struct srn_qp_attr_cache {
	struct ibv_qp_attr attr;     /* last values set through modify_qp */
	int mask;                    /* attributes ever set */
};

struct srn_rc_state;             /* transport/: requester/responder/completer */
struct srn_iwqp;
struct srn_srq;                  /* below: shared receive queue */
struct srn_srq_old;

/* ---- XRC domain (verbs/xrcd.c) -------------------------------------- */

struct srn_xrcd {
	struct ibv_xrcd ibv;         /* what the application holds */
	uint64_t id;                 /* the domain: equal ids, one domain
				      * (one inode shares it host-wide) */
	int hold_fd;                 /* shared lock on the inode's record, -1:
				      * a domain of no inode */
	char path[96];               /* that record */
	atomic_uint users;           /* SRQs and QPs in it (close: EBUSY) */
};

static inline struct srn_xrcd *srn_xrcd(struct ibv_xrcd *x)
{
	return srn_container_of(x, struct srn_xrcd, ibv);
}

struct srn_qp {
	struct ibv_qp_ex ex;         /* ex.qp_base is the ibv_qp */
	pthread_mutex_t lock;        /* guards everything below */
	struct srn_context *ctx;
	struct srn_pd *pd;
	struct srn_cq *send_cq, *recv_cq;
	struct srn_srq *srq;         /* NULL unless attached to an SRQ (then
				      * no rq: receives come from srq) */
	struct srn_xrcd *xrcd;       /* XRC target: its domain (no PD, CQs) */
	atomic_uint xrc_opens;       /* XRC target: ibv_open_qp handles */
	struct srn_qp_attr_cache a;  /* attributes (state, PSNs, path, ...) */
	struct ibv_qp_cap cap;       /* as granted */
	bool sq_sig_all;
	struct srn_wq sq;            /* struct srn_send_wqe */
	struct srn_wq rq;            /* struct srn_recv_wqe: wqe, max_wr and
				      * max_sge; head and tail are rqs's */
	struct srn_rq_ring *rqs;     /* RQ ring (verbs/shared_rings.h); NULL
				      * with an SRQ */
	struct srn_mr_share *rq_share; /* rqs's memfd backing; NULL: private */
	struct srn_rq_ring *srq_hdr; /* with an SRQ: a ring of no WQEs naming
				      * the recv CQ and the SRQ's ring, for
				      * same-host peers; NULL: not shared */
	struct srn_mr_share *srq_hdr_share;
	uint32_t rq_head_seen;       /* rqs->head or less, as last learnt
				      * (post_recv, under lock: head, or the
				      * hint a peer's completion in the recv CQ
				      * left): head is re-read only when both
				      * look full, so its line stays with the
				      * peer taking */
	struct srn_send_wqe *wr_cur; /* ibv_wr_* API: WQE being built */
	int wr_err;                  /* ibv_wr_* API: first error in batch */
	uint32_t wr_pending;         /* ibv_wr_* API: WQEs built since wr_start
				      * (at sq.tail .. sq.tail + wr_pending) */
	struct srn_rc_state *rc;     /* transport state, created at INIT */
	struct srn_iwqp *iw;         /* iWARP device: its stream instead of rc
				      * (transport/iwarp_qp.h) */
	union ibv_gid mcast[SRN_MAX_MCAST_QP_ATTACH]; /* UD: groups attached
				      * (verbs/mcast.c); guarded by ctx->lock,
				      * not qp->lock, so one lock scans all QPs */
	uint32_t num_mcast;          /* valid entries in mcast[] */
	atomic_uint events_reported; /* async events posted on it (destroy
				      * waits for their acks) */
	struct srn_pd_buf sq_buf, rq_buf; /* sq.wqe, rqs: if a parent
				      * domain's allocator gave them */
};

static inline struct srn_qp *srn_qp(struct ibv_qp *q)
{
	return srn_container_of(q, struct srn_qp, ex.qp_base);
}

static inline bool srn_qp_type_xrc(enum ibv_qp_type t)
{
	return t == IBV_QPT_XRC_SEND || t == IBV_QPT_XRC_RECV;
}

/* verbs/qp_xrc.c: create_qp's checks for the XRC types (0 or errno); a
 * destroy that only drops an ibv_open_qp handle (true: the QP stays). */
int srn_xrc_check_init_attr(struct ibv_context *context, const struct ibv_qp_init_attr_ex *a);
bool srn_xrc_drop_open(struct srn_qp *qp);

/* Why ibv_create_qp refuses a raw packet QP: EPERM without CAP_NET_RAW
 * (as the kernel answers for hardware), else EOPNOTSUPP (verbs/raw_qp.c). */
int srn_raw_qp_refusal(void);

/* Local QP by number, or NULL.  Takes the context lock. */
struct srn_qp *srn_qp_lookup(struct srn_context *ctx, uint32_t qpn);

/* ---- SRQ (verbs/srq.c) ------------------------------------------------- */

struct srn_srq {
	struct ibv_srq ibv;          /* what the application holds */
	pthread_mutex_t lock;        /* guards rq and limit; lock order:
				      * qp -> srq (the transport takes from
				      * an SRQ with the QP lock held) */
	struct srn_context *ctx;
	struct srn_pd *pd;
	struct srn_rq_ring *ring;    /* the WQEs (verbs/shared_rings.h): a
				      * same-host peer takes from it too */
	struct srn_mr_share *ring_share; /* its memfd backing; NULL: private */
	uint32_t max_wr, max_sge;    /* capacity (a power of two), SGEs */
	uint32_t slots;              /* the ring's (srn_rq_ring_slots) */
	uint32_t head_seen;          /* ring's head or less, as last learnt:
				      * post reads head (a line the peer
				      * taking owns) only when this and the
				      * hint in hint_cq say full */
	struct srn_cq *hint_cq;      /* the recv CQ of every QP on it (NULL:
				      * none, or more than one) */
	uint32_t hint_cq_qps;        /* QPs on it completing into hint_cq */
	struct srn_srq_old *retired; /* rings replaced by ibv_modify_srq,
				      * kept until destroy (a peer may still
				      * look at them) */
	uint32_t limit;              /* srq_limit; 0 = not armed */
	struct srn_srq *next;        /* ctx->srqs (under ctx->notify_lock) */
	/* XRC SRQ: its domain, CQ and number (host-wide: a QPN) */
	struct srn_xrcd *xrcd;
	struct srn_cq *xrc_cq;
	uint32_t srq_num;
	atomic_uint xrc_busy;        /* target QPs placing into it now */
	atomic_uint users;           /* QPs attached to it (EBUSY) */
	atomic_uint events_reported; /* async events posted on it (destroy
				      * waits until all are acked) */
	struct srn_pd_buf ring_buf;  /* the first ring, if a parent domain's
				      * allocator gave it */
};

static inline struct srn_srq *srn_srq(struct ibv_srq *s)
{
	return srn_container_of(s, struct srn_srq, ibv);
}

/* The transport's receive side: take the oldest posted WQE into *out.
 * 0, or -ENOENT when the SRQ is empty.  When this leaves fewer WQEs than
 * an armed srq_limit, raises IBV_EVENT_SRQ_LIMIT_REACHED once and
 * disarms.  Takes srq->lock (callers may hold the QP lock); a same-host
 * peer takes from the ring without it, by the same compare-and-swap. */
int srn_srq_take(struct srn_srq *srq, struct srn_recv_wqe *out);
/* WQEs currently posted (takes srq->lock). */
uint32_t srn_srq_count(struct srn_srq *srq);
/* A QP using srq, its receive CQ recv_cq, is created (attach true) or
 * destroyed: counts users (ibv_destroy_srq's EBUSY) and keeps track of
 * whether they all complete into one CQ, whose peer completions then
 * tell post_srq_recv how far peers took the ring. */
void srn_srq_attach(struct srn_srq *srq, struct srn_cq *recv_cq, bool attach);
/* A same-host peer took from one of ctx's SRQs with a limit armed (its
 * doorbell): raise the limit events now due. */
void srn_srq_notify_peers(struct srn_context *ctx);
/* Ops slots (post_srq_recv, create_srq_ex); from srn_ops_init_datapath. */
void srn_ops_init_srq(struct verbs_context *vctx);

/* XRC (verbs/xrcd.c): open/close_xrcd, open_qp, get_srq_num. */
void srn_ops_init_xrc(struct verbs_context *vctx);
/* The XRC SRQ numbered srqn in the domain of target QP tgt, held until
 * srn_xrc_srq_put (destroy waits); NULL: none there. */
struct srn_srq *srn_xrc_srq_get(struct srn_qp *tgt, uint32_t srqn);
void srn_xrc_srq_put(struct srn_srq *srq);
/* An SRQ being destroyed: wait until no target QP holds it. */
void srn_xrc_srq_quiesce(struct srn_srq *srq);

/* ---- AH (verbs/ah.c) -------------------------------------------------- */

struct srn_ah {
	struct ibv_ah ibv;           /* what the application holds */
	struct ibv_ah_attr attr;     /* as created: is_global, port 1 */
	union ibv_gid sgid;          /* local GID at attr.grh.sgid_index */
	int family;                  /* AF_INET when dgid is IPv4-mapped
				      * (RoCEv2 over IPv4), else AF_INET6 */
	bool mcast;                  /* dgid is a multicast group: send to
				      * QPN 0xFFFFFF (the WR's remote_qpn) */
};

static inline struct srn_ah *srn_ah(struct ibv_ah *a)
{
	return srn_container_of(a, struct srn_ah, ibv);
}

/* Transport accessors: destination GID, source GID, full attributes. */
static inline const union ibv_gid *srn_ah_dgid(struct ibv_ah *a)
{
	return &srn_ah(a)->attr.grh.dgid;
}

static inline const union ibv_gid *srn_ah_sgid(struct ibv_ah *a)
{
	return &srn_ah(a)->sgid;
}

static inline const struct ibv_ah_attr *srn_ah_attr(struct ibv_ah *a)
{
	return &srn_ah(a)->attr;
}

/* True for ::ffff:a.b.c.d (RoCEv2 GID of an IPv4 address). */
bool srn_gid_is_v4mapped(const union ibv_gid *gid);
/* True for a multicast GID: ff00::/8, or IPv4-mapped 224.0.0.0/4. */
bool srn_gid_is_mcast(const union ibv_gid *gid);

/* ---- multicast (verbs/mcast.c) ---------------------------------------- */

/* The local UD QPs attached to group mgid: up to max pointers in out[],
 * returns how many are attached (may exceed max).  Takes ctx->lock; the
 * pointers are valid while the caller keeps QPs from being destroyed
 * (as for srn_qp_lookup). */
uint32_t srn_mcast_qps(struct srn_context *ctx, const union ibv_gid *mgid,
		       struct srn_qp **out, uint32_t max);
/* ibv_destroy_qp: detach qp from every group (after it left the QP
 * table).  Takes ctx->lock. */
void srn_mcast_qp_detach_all(struct srn_qp *qp);

/* ---- verbs <-> transport hooks (transport/hooks.c implements) ----------- */

/* Engine of a context: started by ibv_open_device, stopped at close. */
int srn_engine_attach(struct srn_context *ctx);
void srn_engine_detach(struct srn_context *ctx);

/* QPN unique on the device across every process on the host (registry). */
int srn_qpn_alloc(struct srn_context *ctx, uint32_t *qpn);
void srn_qpn_free(struct srn_context *ctx, uint32_t qpn);

/* Called with qp->lock held. */
int srn_transport_qp_create(struct srn_qp *qp);   /* after the QP is built */
void srn_transport_qp_destroy(struct srn_qp *qp); /* before it is freed */
/* The QP's peer agreed to selective retransmission (ECE), or not; used
 * from the next modify_qp on.  qp->lock held. */
void srn_transport_qp_set_sr(struct srn_qp *qp, bool on);
/* After modify_qp applied attributes; old = previous state. */
void srn_transport_qp_modified(struct srn_qp *qp, enum ibv_qp_state old, int mask);
/* How many QPs' locks this thread holds through ibv_wr_start (until
 * ibv_wr_complete or ibv_wr_abort; verbs/qp_wr.c).  It must not receive
 * inline meanwhile (srn_transport_progress): a packet or a timer for such
 * a QP would wait for the lock its own thread holds. */
extern __thread unsigned int srn_wr_locks_held __attribute__((tls_model("initial-exec")));

/* Let go of qp->lock: every holder does it this way.  A receiving thread
 * that found the lock held may have left an ACK for the holder
 * (transport/rc.h ack_box); it is taken first, and looked for once more
 * after the unlock, when the receiver may have left it too late. */
void srn_qp_unlock(struct srn_qp *qp);
/* New send WQEs are between sq.next and sq.tail: start them. */
void srn_transport_kick_sq(struct srn_qp *qp);
/* qp->lock held, the QP in RTS with an empty send queue: carry out wr, a
 * valid SEND or RDMA WRITE (with immediate or not) of one SGE holding
 * len bytes, on a same-host peer at once, without a WQE
 * (transport/direct.c).  1: done (its WC pushed if signaled); 0: nothing
 * happened, post it. */
int srn_transport_post_now(struct srn_qp *qp, const struct ibv_send_wr *wr, uint32_t len);
/* New receive WQEs were posted (a responder in RNR may resume). */
void srn_transport_kick_rq(struct srn_qp *qp);
/* Called without the QP lock by poll_cq on an empty CQ: give the engine a
 * chance to run inline (receive and process packets) instead of waiting.
 * now: CLOCK_MONOTONIC ns, just read by the caller. */
void srn_transport_progress(struct srn_context *ctx, uint64_t now);
/* A CQ of ctx was armed (ibv_req_notify_cq): its application is about to
 * wait for an event, not poll; the engine, if it left the socket to a
 * poller, takes it back now. */
void srn_transport_cq_armed(struct srn_context *ctx);

/* Multicast membership of this context changed (verbs/mcast.c calls,
 * with ctx->lock held, so the hook must not take it): join when the
 * first local QP attaches to mgid, leave when the last one detaches.
 * join returns 0 or a positive errno (attach then fails with it).
 * verbs/mcast.c holds weak defaults that join nothing (no UD transport
 * yet); the transport's strong definitions replace them. */
int srn_transport_mcast_join(struct srn_context *ctx, const union ibv_gid *mgid);
void srn_transport_mcast_leave(struct srn_context *ctx, const union ibv_gid *mgid);

/* ---- async events ------------------------------------------------------ */

/* Queue an async event for ibv_get_async_event; wakes async_fd.  A full
 * queue (an application that never reads them) drops it. */
void srn_async_post(struct srn_context *ctx, const struct ibv_async_event *ev);
/* The same for an event on an object: *reported (the count its destroy
 * waits to see acked) grows only if the event was queued. */
void srn_async_post_counted(struct srn_context *ctx, const struct ibv_async_event *ev,
			    atomic_uint *reported);
/* For the destroy of obj (a CQ, QP or SRQ) once no more events can be
 * posted on it: drop its queued events, then wait under m/c until
 * *completed (its public ack count) covers the rest of the reported ones. */
void srn_async_settle(struct srn_context *ctx, const void *obj, unsigned int reported,
		      pthread_mutex_t *m, pthread_cond_t *c, const uint32_t *completed);

#endif
