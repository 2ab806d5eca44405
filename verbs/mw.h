/* verbs/mw: memory windows (type 1 and type 2).  A window is a second
 * rkey onto part of an MR: the responder checks a window's rkey against
 * the window (bound or not, bounds, access, PD, and for type 2 the QP it
 * was bound through) and then reaches the memory through the MR's lkey.
 *
 * Window keys have bit 31 set, MR keys never do (verbs/mr.c), so either
 * kind is recognised from the key alone.  Bits 8..19 name the window's
 * slot in a per-process table, bits 20..30 are random, bits 0..7 are the
 * consumer's part that ibv_inc_rkey() steps at each bind. */
#ifndef VERBS_MW_H
#define VERBS_MW_H

#include <stdbool.h>
#include <stdint.h>

#include "verbs/srn.h"

#define SRN_MW_KEY_BIT 0x80000000u
#define SRN_MAX_MW 4096u             /* slots: bits 8..19 of a key */

static inline bool srn_key_is_mw(uint32_t key)
{
	return (key & SRN_MW_KEY_BIT) != 0;
}

/* ops slots (verbs/mw.c) */
struct ibv_mw *srn_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int srn_dealloc_mw(struct ibv_mw *mw);
int srn_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);

/* How a BIND_MW WQE carries its request (no mw pointer: the window may be
 * deallocated before the WQE runs; its slot is in the new rkey).  rkey 0
 * means a request already known to be bad (fails as a bind error). */
void srn_mw_bind_to_wqe(struct srn_send_wqe *w, struct ibv_mw *mw, uint32_t rkey,
			const struct ibv_mw_bind_info *info);

/* Executed in send-queue order by the requester (transport/local_op.c):
 * IBV_WC_SUCCESS or the completion status of the failure. */
enum ibv_wc_status srn_mw_bind_exec(struct srn_qp *qp, const struct srn_send_wqe *w);
enum ibv_wc_status srn_mw_local_inv(struct srn_qp *qp, uint32_t rkey);

/* SEND with Invalidate arriving at qp: true if rkey named a type 2
 * window of qp's PD, now invalidated. */
bool srn_mw_remote_inv(struct srn_qp *qp, uint32_t rkey);

/* The responder's rkey check: a window's key through the window, any
 * other key through srn_mr_resolve in qp's PD. */
enum srn_mr_check srn_rkey_resolve(struct srn_qp *qp, uint32_t rkey, uint64_t iova,
				   uint64_t len, unsigned int access, void **out);
/* The same in pd (an XRC target: its SRQ's PD, not a PD of its own). */
enum srn_mr_check srn_rkey_resolve_pd(struct srn_qp *qp, struct srn_pd *pd, uint32_t rkey,
				      uint64_t iova, uint64_t len, unsigned int access,
				      void **out);

#endif
