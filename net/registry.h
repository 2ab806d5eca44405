/* net/registry: the device-wide QPN table shared by every process on the
 * host (docs/architecture.md).  One shared-memory file per device,
 * /dev/shm/softrnic-<devname>-v3, holds a slot per QPN saying which
 * process owns it and on which UDP port that process's engine listens.
 * Slots of dead processes (even SIGKILLed ones) are reclaimed lazily.
 * The owner also publishes what a same-host peer needs to check an RDMA
 * operation it executes itself (transport/direct.c): net_reg_qpinfo,
 * under a per-slot seqlock.
 */
#ifndef NET_REGISTRY_H
#define NET_REGISTRY_H

#include <stdatomic.h>
#include <stdint.h>

/* QPNs are slot indexes: 2 .. NET_REG_SLOTS-1 (0 and 1 are reserved:
 * QP0/SMI does not exist on RoCE, QP1 is the GSI used by rdma_cm). */
enum { NET_REG_SLOTS = 1 << 16, NET_REG_FIRST_QPN = 2 };

struct net_registry;

/* Map (creating if needed) the registry of device devname.  NULL + errno. */
struct net_registry *net_registry_open(const char *devname);
void net_registry_close(struct net_registry *reg);

/* Claim a free (or dead process's) QPN for this process, recording the UDP
 * port and address family where its packets go.  0 or -ENOSPC. */
int net_registry_alloc(struct net_registry *reg, uint16_t port, int family,
		       uint32_t *qpn);
/* Release a QPN this process owns (no effect on someone else's). */
void net_registry_free(struct net_registry *reg, uint32_t qpn);
/* Where QPN's packets go: 0 and *port, *family; -ENOENT if unowned. */
int net_registry_lookup(struct net_registry *reg, uint32_t qpn,
			uint16_t *port, int *family);
/* Pid owning qpn, or 0 (tests and `softrnic stats`). */
int net_registry_owner(struct net_registry *reg, uint32_t qpn);
/* Pid owning qpn if that process is alive (not a recycled pid), else 0
 * (`softrnic qps`: a dead process's slot waits to be reclaimed). */
int net_registry_live_owner(struct net_registry *reg, uint32_t qpn);

/* What the owner of a QPN publishes about its QP, on every state change:
 * for a same-host peer that executes RDMA operations on its memory
 * directly (only with NET_REG_QP_DIRECT set), and for `softrnic qps`. */
enum { NET_REG_QP_DIRECT = 1 };
struct net_reg_qpinfo {
	int32_t pid;                 /* owner (== the slot's owner pid) */
	uint32_t mrdir_nonce;        /* names the owner's MR directory */
	uint32_t pd_handle;          /* QP's PD (srn_pd.ibv.handle) */
	uint32_t access;             /* qp_access_flags (IBV_ACCESS_REMOTE_*) */
	uint8_t state;               /* enum ibv_qp_state */
	uint8_t type;                /* enum ibv_qp_type */
	uint16_t dfamily;            /* AF_INET/AF_INET6 of the connected peer
				      * (UD: of its own address) */
	uint32_t dqpn;               /* QPN it is connected to (UD: 0) */
	uint8_t dip[16];             /* peer's IP, IPv4 in the first 4 bytes
				      * (UD: its own, where datagrams reach it) */
	/* Where a peer may deliver a SEND itself (verbs/shared_rings.h):
	 * the RQ ring at rq_off in the owner's memfd rq_memfd (inode
	 * rq_ino); rq_off 0: not possible, use packets. */
	int32_t rq_memfd;
	uint32_t rq_max_wr;          /* its entries */
	uint64_t rq_ino;
	uint64_t rq_off;
	uint32_t qkey;               /* UD: the Q_Key a SEND must carry */
	uint32_t flags;              /* NET_REG_QP_DIRECT: a same-host peer
				      * may act on it (the fields above from
				      * mrdir_nonce on are valid) */
};

/* Publish (owner only, one writer per QPN at a time) the info of qpn;
 * info == NULL clears it (state RESET).  0 or -ENOENT if not ours. */
int net_registry_publish(struct net_registry *reg, uint32_t qpn,
			 const struct net_reg_qpinfo *info);
/* Consistent snapshot of qpn's info: 0; -ENOENT if unowned or nothing
 * published; -EAGAIN if the owner kept rewriting it (retry later).
 * *seq (if not NULL) receives the generation the snapshot belongs to. */
int net_registry_qpinfo(struct net_registry *reg, uint32_t qpn,
			struct net_reg_qpinfo *info, uint32_t *seq);
/* The connected QP on this host that qpn (an RC or UC QP in RTR, RTS or
 * SQD, given its info) talks to: a live QP connected back to exactly qpn,
 * of the same type.  0 and *peer, or -ENOENT (a remote peer, or none). */
int net_registry_local_peer(struct net_registry *reg, uint32_t qpn,
			    const struct net_reg_qpinfo *in, struct net_reg_qpinfo *peer);
/* The seqlock word of qpn's slot: a cached snapshot taken at generation
 * g is still current while *word == g (one load, no system call).
 * NULL for a QPN out of range. */
const _Atomic uint32_t *net_registry_qpinfo_seq(struct net_registry *reg,
						uint32_t qpn);

#endif
