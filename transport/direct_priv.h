/* transport/direct_priv: what direct.c (RDMA WRITE/READ/atomics) and
 * direct_send.c (SEND) share: the initiator's cached view of its target. */
#ifndef TRANSPORT_DIRECT_PRIV_H
#define TRANSPORT_DIRECT_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "transport/engine.h"
#include "transport/peer_map.h"

struct srn_rc_state;
struct srn_send_wqe;
struct srn_rq_ring;
struct srn_cq_ring;

enum {
	DIRECT_MRS = 4,                          /* rkeys cached per QP */
	DIRECT_LMRS = 2,                         /* own lkeys cached per QP */
	DIRECT_ALIVE_NS = 10 * 1000 * 1000,      /* peer liveness re-check */
	DIRECT_RETRY_NS = 100 * 1000 * 1000,     /* after "no peer found" */
	DIRECT_NOINFO_NS = 1000 * 1000,          /* after "no QP info" */
};

struct direct_mr {
	uint32_t rkey;               /* 0: empty slot */
	const struct srn_mrdir_entry *e; /* the target's entry, NULL: none */
	uint32_t gen;                /* e's generation when read */
	bool ok;                     /* key and PD matched at gen */
	uint32_t access;             /* the MR's IBV_ACCESS_* */
	uint64_t iova, length;       /* as the peer addresses it */
	uint64_t vaddr;              /* owner's address of iova's byte */
	char *map;                   /* the MR's byte at iova + map_lo mapped
				      * here, or NULL */
	uint64_t map_lo;             /* bytes before it that are not mapped
				      * (an edge page the owner shares with
				      * other data: process_vm_* or packets) */
	uint64_t map_len;            /* bytes mapped from there */
	struct peer_memfd *mh;       /* the memfd mapping held, or NULL */
};

/* A UC packet to a same-host peer is taken in (or dropped) long before
 * this; one sent before the target was ready may never be counted. */
enum { DIRECT_UC_STALE_NS = 100 * 1000 * 1000 };

struct direct_qp {
	bool off;                    /* not a same-host peer: never */
	uint32_t dqpn;               /* the target QP, */
	int peer_family;             /* UD: at this address (RC and UC: */
	uint8_t peer_ip[16];         /* the QP's own path) */
	uint32_t qkey;               /* UD: the target's Q_Key at gen */
	bool uc_packets;             /* UC: a message went as packets; the
				      * next go so too until they landed (so
				      * they keep their order) */
	uint64_t uc_packets_ns;      /* when (coarse clock) */
	const _Atomic uint32_t *qgen; /* target slot's seqlock word */
	bool have;                   /* gen/qp_ok hold a verdict */
	uint32_t gen;                /* generation of that verdict */
	bool qp_ok;                  /* target QP accepts us at gen */
	uint64_t retry_at;           /* no info or no peer yet: look again then */
	uint32_t access;             /* target QP's access flags */
	uint32_t pd_handle;          /* target QP's PD */
	struct peer *peer;           /* target context's memory */
	int peer_pid;                /* whose (pid, MR directory nonce) */
	uint32_t peer_nonce;
	const _Atomic uint32_t *life; /* peer's life word (no system call) */
	uint64_t alive_at;           /* else: next liveness check (pidfd) */
	struct direct_mr mr[DIRECT_MRS];
	unsigned int mr_next;        /* round-robin replacement */
	/* our own side: the lkeys of our gather lists, checked in our own
	 * MR directory (no context lock per WQE as srn_mr_resolve) */
	struct peer *self;           /* NULL: none (rc_sge_map does it) */
	uint32_t self_pd;            /* our QP's PD handle */
	struct direct_mr lmr[DIRECT_LMRS];
	unsigned int lmr_next;
	/* the target's receive side, as published at gen (direct_send.c) */
	int32_t rq_memfd;            /* rq_off 0: SENDs go as packets */
	uint32_t rq_max_wr;
	uint64_t rq_ino, rq_off;
	struct peer_memfd *rq_mh;    /* memfd mapping holding rq and cq */
	struct srn_rq_ring *rq;      /* mapped; NULL until first SEND */
	struct srn_rq_ring *wq;      /* where its WQEs are: rq, or the SRQ's
				      * ring that rq names */
	struct srn_cq_ring *cq;      /* its receive CQ's ring */
	uint32_t cq_size;
	bool cq_channel;             /* cq's owner may arm it (wake_if_armed) */
	uint8_t wake_state;          /* its channel's pipe: 0 not looked up
				      * yet, 1 wake_fd (peer_wake_fd: the
				      * peer's), 2 not to be had (the doorbell
				      * wakes the owner) */
	int wake_fd;
	int32_t wake_pid, wake_pfd;  /* as cq names it: /proc/pid/fd/pfd, */
	uint64_t wake_ino;           /* a pipe of this inode */
	uint64_t cq_cons;            /* cq's cons as last read (<= the real one) */
	uint32_t rq_tag;             /* rq's tag (its completions carry it) */
	uint64_t rnr_since;          /* no receive posted since (coarse ns), 0 */
};

/* direct.c: can rc->peer be reached in memory (direct execution on, a
 * registry, an address of this host in the engine's family)? */
bool direct_reachable(const struct srn_rc_state *rc);
/* direct.c: a cache for the target rc->dqpn at rc->peer (d->off: that
 * one is not reached in memory), or NULL without memory. */
struct direct_qp *direct_qp_new(struct srn_rc_state *rc);
/* direct.c: d and what it holds, gone (NULL: nothing). */
void direct_qp_free(struct direct_qp *d);
/* direct.c, hot: does the target QP still accept direct operations?
 * (d's target must be rc->dqpn at rc->peer.) */
bool direct_qp_check(struct srn_rc_state *rc, struct direct_qp *d);
/* direct.c, hot: the cached view of key (an rkey, or a receive lkey). */
struct direct_mr *direct_mr_get(struct direct_qp *d, uint32_t key);
/* direct.c: where [va, va+len) of m is (*ptr mapped here, else *vaddr in
 * the owner); false if the responder would refuse it. */
bool direct_mr_range(const struct direct_mr *m, uint64_t va, uint64_t len,
		     unsigned int access, char **ptr, uint64_t *vaddr);
/* direct.c: w's payload (inline or its SGEs) as iovecs into iov
 * (SRN_MAX_SGE): their count, or < 0 if an SGE fails the local checks. */
int direct_gather(struct srn_rc_state *rc, struct direct_qp *d, struct srn_send_wqe *w,
		  struct iovec *iov);
/* direct.c: one SGE of len bytes of our own, checked in our own MR
 * directory through d (no context lock), as iov[0]: 1, or -1 if not
 * found there or refused (rc_sge_map gives the exact answer). */
int direct_gather_sge(struct direct_qp *d, const struct ibv_sge *sge, uint64_t len,
		      struct iovec *iov);
/* direct.c: the payload of wr (len bytes in its one SGE) as src[0]
 * (nothing when len is 0): inline data where it is, an SGE checked in our
 * own directory; false where rc_sge_map must give the answer. */
struct ibv_send_wr;
bool direct_wr_payload(struct direct_qp *d, const struct ibv_send_wr *wr, uint32_t len,
		       struct iovec *src);
/* direct.c: w is done: its WC if signaled, the SQ moves on, c counted. */
void direct_complete(struct srn_rc_state *rc, struct srn_send_wqe *w, enum srn_counter c);
/* direct.c: the same for a work request that never was a WQE
 * (srn_transport_post_now): its WC if signaled, c counted. */
void direct_done(struct srn_rc_state *rc, uint64_t wr_id, enum ibv_wr_opcode op,
		 uint32_t byte_len, bool signaled, enum srn_counter c);

/* direct_send.c: SEND / SEND with immediate / WRITE with immediate
 * straight into the target's posted receive buffer and receive CQ: 1
 * done, 0 nothing changed, -EAGAIN no receive posted (direct_try). */
int direct_send(struct srn_rc_state *rc, struct direct_qp *d, struct srn_send_wqe *w);
/* direct_send.c: a UD SEND (imm: with immediate imm_be) of len bytes
 * gathered in pay[0..npay) to d's QP (rc->dqpn at rc->peer, Q_Key
 * checked): 1 done (delivered, or dropped for want of a receive WQE, as
 * the target's ud_rx would; *c says which), 0 nothing changed (packets). */
int direct_send_ud(struct srn_rc_state *rc, struct direct_qp *d, bool imm, uint32_t imm_be,
		   bool solicited, uint32_t len, const struct iovec *pay, int npay,
		   enum srn_counter *c);
/* direct_send.c: the same for wr itself (srn_transport_post_now: a
 * SEND, with immediate, or a WRITE with immediate of len bytes gathered
 * in src[0]): 1 done (the sender's WC is the caller's), 0 not done. */
int direct_send_wr(struct srn_rc_state *rc, struct direct_qp *d, const struct ibv_send_wr *wr,
		   uint32_t len, const struct iovec *src);
/* direct_send.c: has the UC target's responder taken in every packet
 * before psn (its uc_epsn)? */
bool direct_send_uc_landed(struct direct_qp *d, uint32_t psn);
/* direct_send.c: ask now for the line of the peer's next completion slot
 * (the peer spins on it; it moves while we check). */
void direct_send_prefetch(const struct direct_qp *d);
/* direct_send.c, target side: where our RQ ring is, into *in (rq_off 0
 * when SENDs must come as packets). */
struct srn_qp;
struct net_reg_qpinfo;
void direct_send_publish(struct srn_qp *qp, struct net_reg_qpinfo *in);
/* direct_send.c: let go of the target's rings (its info changed). */
void direct_send_forget(struct direct_qp *d);

#endif
