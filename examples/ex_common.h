/* examples/ex_common.h: the set-up every example shares.
 *
 * An RC connection needs the same steps whatever it then does, so they
 * live once in ex_common.c, each step commented there:
 *
 *   ex_run()      socketpair + fork: the parent is the "server", the child
 *                 the "client"; the socket stands in for the TCP connection
 *                 real programs swap their QP details over
 *   ex_open()     device -> protection domain -> memory region -> CQ -> QP,
 *                 and the QP to INIT
 *   ex_connect()  swap QPN, PSN, GID, buffer address and rkey with the
 *                 peer; the QP to RTR, then RTS
 *   ex_wait_wc()  poll the CQ for one completion (bounded in time)
 *   ex_close()    tear down in reverse order
 *   (ex_run)      the server reaps the client; the exit status says whether
 *                 both sides passed
 */
#ifndef EX_COMMON_H
#define EX_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

/* What one side tells the other before any RDMA can happen. */
struct ex_peer_info {
	uint32_t qpn;   /* which QP to talk to */
	uint32_t psn;   /* the first packet sequence number it will send */
	uint32_t rkey;  /* the key that lets the peer touch our buffer */
	uint64_t addr;  /* where our buffer is, in our address space */
	union ibv_gid gid; /* our address on the network (GID index 0) */
};

struct ex_side {
	const char *role; /* "server" or "client", for messages */
	int sock;         /* to the other process */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint8_t *buf;
	size_t len;
	struct ex_peer_info me, peer;
};

/* Print a step ("[client] ...") on stdout. */
void ex_say(const struct ex_side *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Print why on stderr and exit 1: every example stops at its first failure. */
_Noreturn void ex_fail(const struct ex_side *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Parses [-d DEVICE] and forks: SERVER runs in the parent, CLIENT in the
 * child, each ending with ex_close; exits 0 only if both passed. */
_Noreturn int ex_run(int argc, char **argv, void (*server)(struct ex_side *),
		     void (*client)(struct ex_side *));
/* On CTX: a PD, an MR over a new LEN-byte buffer with the given access
 * flags, and a CQ. */
void ex_alloc(struct ex_side *s, struct ibv_context *ctx, size_t len, int mr_access);
/* Opens the device and creates PD, an MR over a LEN-byte buffer with the
 * given access flags, a CQ and an RC QP, moved to INIT. */
void ex_open(struct ex_side *s, size_t len, int mr_access, int qp_access);
/* Swaps ex_peer_info with the peer over the socket, then ex_qp_connect. */
void ex_connect(struct ex_side *s);
/* INIT -> RTR -> RTS towards PEER (GID index 0, the path MTU given, RD_ATOMIC
 * READs/atomics in flight each way): 0, or the errno of the step named in
 * *STEP. */
int ex_qp_connect(struct ibv_qp *qp, const struct ex_peer_info *me,
		  const struct ex_peer_info *peer, enum ibv_mtu mtu, uint8_t rd_atomic,
		  const char **step);
/* Waits for one completion, which must succeed with opcode WANT. */
struct ibv_wc ex_wait_wc(struct ex_side *s, enum ibv_wc_opcode want);
void ex_post_send(struct ex_side *s, struct ibv_send_wr *wr);
void ex_post_recv(struct ex_side *s, size_t off, uint32_t len, uint64_t wr_id);
/* Both sides block here until the other arrives too. */
void ex_sync(struct ex_side *s);
void ex_close(struct ex_side *s);

#endif
