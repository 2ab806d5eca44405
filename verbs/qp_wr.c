/* The ibv_wr_* post API (struct ibv_qp_ex): wr_start takes the QP lock,
 * each wr_<opcode> opens a WQE in the next free SQ slot, wr_set_* fill its
 * data, and wr_complete checks and publishes the whole batch at once or
 * none of it (returning the first error); wr_abort drops it.  Built WQEs
 * sit at sq.tail .. sq.tail + wr_pending, invisible to the transport until
 * wr_complete moves sq.tail. */
#include "verbs/datapath.h"
#include "verbs/mw.h"

#include <string.h>

static struct srn_qp *qpx(struct ibv_qp_ex *ex)
{
	return srn_container_of(ex, struct srn_qp, ex);
}

static void wr_fail(struct srn_qp *qp, int err)
{
	if (!qp->wr_err)
		qp->wr_err = err;
}

/* Check the WQE being built (done when the next one opens, or at
 * wr_complete): the same rules as ibv_post_send. */
static void wr_close_cur(struct srn_qp *qp)
{
	int err;

	if (!qp->wr_cur)
		return;
	err = srn_sq_check_wqe(qp, qp->wr_cur);
	if (err)
		wr_fail(qp, err);
	qp->wr_cur = NULL;
}

/* Open a WQE for opcode in the next free slot (NULL when the batch has
 * already failed or the queue is full). */
static struct srn_send_wqe *wr_open(struct srn_qp *qp, enum ibv_wr_opcode op)
{
	struct srn_send_wqe *w;

	wr_close_cur(qp);
	if (qp->wr_err)
		return NULL;
	if (qp->sq.tail + qp->wr_pending - qp->sq.head >= qp->sq.max_wr) {
		wr_fail(qp, ENOMEM);
		return NULL;
	}
	w = srn_sq_slot(qp, qp->sq.tail + qp->wr_pending);
	qp->wr_pending++;
	w->wr_id = qp->ex.wr_id;
	w->opcode = op;
	/* Inline is chosen by wr_set_inline_data*, not by the flag. */
	w->send_flags = qp->ex.wr_flags & ~(unsigned int)IBV_SEND_INLINE;
	if (qp->sq_sig_all)
		w->send_flags |= IBV_SEND_SIGNALED;
	w->imm_data = 0;
	w->num_sge = 0;
	w->length = 0;
	w->remote_addr = 0;
	w->rkey = 0;
	w->compare_add = 0;
	w->swap = 0;
	w->ah = NULL;
	w->remote_qpn = 0;
	w->remote_qkey = 0;
	w->first_psn = w->last_psn = 0;
	w->sent = 0;
	w->sge0_base = NULL;
	w->state = 0;
	qp->wr_cur = w;
	return w;
}

__thread unsigned int srn_wr_locks_held __attribute__((tls_model("initial-exec")));

static void wr_start(struct ibv_qp_ex *ex)
{
	struct srn_qp *qp = qpx(ex);

	pthread_mutex_lock(&qp->lock); /* held until wr_complete/wr_abort */
	srn_wr_locks_held++;
	qp->wr_cur = NULL;
	qp->wr_err = srn_sq_check_state(qp);
	qp->wr_pending = 0;
}

static int wr_complete(struct ibv_qp_ex *ex)
{
	struct srn_qp *qp = qpx(ex);
	int err;

	wr_close_cur(qp);
	err = qp->wr_err;
	if (!err && qp->wr_pending) {
		qp->sq.tail += qp->wr_pending;
		srn_transport_kick_sq(qp);
	}
	qp->wr_pending = 0;
	qp->wr_err = 0;
	srn_wr_locks_held--;
	srn_qp_unlock(qp);
	return err;
}

static void wr_abort(struct ibv_qp_ex *ex)
{
	struct srn_qp *qp = qpx(ex);

	qp->wr_cur = NULL;
	qp->wr_pending = 0;
	qp->wr_err = 0;
	srn_wr_locks_held--;
	srn_qp_unlock(qp);
}

/* ---- opcodes ---- */

static void wr_send(struct ibv_qp_ex *ex)
{
	wr_open(qpx(ex), IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *ex, __be32 imm)
{
	struct srn_send_wqe *w = wr_open(qpx(ex), IBV_WR_SEND_WITH_IMM);

	if (w)
		w->imm_data = imm;
}

static void wr_rdma(struct ibv_qp_ex *ex, enum ibv_wr_opcode op,
		    uint32_t rkey, uint64_t raddr, __be32 imm)
{
	struct srn_send_wqe *w = wr_open(qpx(ex), op);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = raddr;
		w->imm_data = imm;
	}
}

static void wr_rdma_write(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t raddr)
{
	wr_rdma(ex, IBV_WR_RDMA_WRITE, rkey, raddr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *ex, uint32_t rkey,
			      uint64_t raddr, __be32 imm)
{
	wr_rdma(ex, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, raddr, imm);
}

static void wr_rdma_read(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t raddr)
{
	wr_rdma(ex, IBV_WR_RDMA_READ, rkey, raddr, 0);
}

static void wr_atomic(struct ibv_qp_ex *ex, enum ibv_wr_opcode op,
		      uint32_t rkey, uint64_t raddr, uint64_t cmp_add,
		      uint64_t swap)
{
	struct srn_send_wqe *w = wr_open(qpx(ex), op);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = raddr;
		w->compare_add = cmp_add;
		w->swap = swap;
	}
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *ex, uint32_t rkey,
			      uint64_t raddr, uint64_t compare, uint64_t swap)
{
	wr_atomic(ex, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, raddr, compare, swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *ex, uint32_t rkey,
				uint64_t raddr, uint64_t add)
{
	wr_atomic(ex, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, raddr, add, 0);
}

/* Operations this NIC does not have: the batch fails at wr_complete. */
static void wr_unsupported(struct srn_qp *qp)
{
	wr_close_cur(qp);
	wr_fail(qp, EOPNOTSUPP);
}

static void wr_send_inv(struct ibv_qp_ex *ex, uint32_t rkey)
{
	struct srn_send_wqe *w = wr_open(qpx(ex), IBV_WR_SEND_WITH_INV);

	if (w)
		w->imm_data = rkey; /* host order, as invalidate_rkey */
}

static void wr_local_inv(struct ibv_qp_ex *ex, uint32_t rkey)
{
	struct srn_send_wqe *w = wr_open(qpx(ex), IBV_WR_LOCAL_INV);

	if (w)
		w->rkey = rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *ex, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct srn_send_wqe *w = wr_open(qpx(ex), IBV_WR_BIND_MW);

	if (w)
		srn_mw_bind_to_wqe(w, mw, rkey, info);
}

static void wr_send_tso(struct ibv_qp_ex *ex, void *hdr, uint16_t hdr_sz,
			uint16_t mss)
{
	(void)hdr;
	(void)hdr_sz;
	(void)mss;
	wr_unsupported(qpx(ex));
}

/* RDMA ATOMIC WRITE: the 8 bytes are taken now, as inline data. */
static void wr_atomic_write(struct ibv_qp_ex *ex, uint32_t rkey,
			    uint64_t raddr, const void *data)
{
	struct srn_send_wqe *w = wr_open(qpx(ex), IBV_WR_ATOMIC_WRITE);

	if (!w)
		return;
	if (!data)
		return wr_fail(qpx(ex), EINVAL);
	w->rkey = rkey;
	w->remote_addr = raddr;
	memcpy(w->inline_data, data, 8);
	w->length = 8;
	w->send_flags |= IBV_SEND_INLINE;
}

/* The XRC SRQ the open WQE's message is for (in remote_qpn, which only
 * UD uses otherwise). */
static void wr_set_xrc_srqn(struct ibv_qp_ex *ex, uint32_t srqn)
{
	struct srn_qp *qp = qpx(ex);

	if (!qp->wr_cur || ex->qp_base.qp_type != IBV_QPT_XRC_SEND)
		return wr_fail(qp, EINVAL);
	qp->wr_cur->remote_qpn = srqn;
}

/* ---- data of the open WQE ---- */

static void wr_set_ud_addr(struct ibv_qp_ex *ex, struct ibv_ah *ah,
			   uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct srn_qp *qp = qpx(ex);
	struct srn_send_wqe *w = qp->wr_cur;

	if (!w)
		return wr_fail(qp, EINVAL);
	if (ex->qp_base.qp_type != IBV_QPT_UD)
		return; /* ignored on connected QPs */
	w->ah = ah;
	w->remote_qpn = remote_qpn;
	w->remote_qkey = remote_qkey;
}

static void wr_set_sge(struct ibv_qp_ex *ex, uint32_t lkey, uint64_t addr,
		       uint32_t length)
{
	struct srn_qp *qp = qpx(ex);
	struct srn_send_wqe *w = qp->wr_cur;

	if (!w)
		return wr_fail(qp, EINVAL);
	w->send_flags &= ~(unsigned int)IBV_SEND_INLINE;
	w->sge[0].lkey = lkey;
	w->sge[0].addr = addr;
	w->sge[0].length = length;
	w->num_sge = 1;
}

static void wr_set_sge_list(struct ibv_qp_ex *ex, size_t n,
			    const struct ibv_sge *list)
{
	struct srn_qp *qp = qpx(ex);
	struct srn_send_wqe *w = qp->wr_cur;

	if (!w)
		return wr_fail(qp, EINVAL);
	if (n > qp->cap.max_send_sge || n > SRN_MAX_SGE || (n && !list))
		return wr_fail(qp, EINVAL);
	w->send_flags &= ~(unsigned int)IBV_SEND_INLINE;
	if (n)
		memcpy(w->sge, list, n * sizeof(*list));
	w->num_sge = (uint32_t)n;
}

/* Inline data is copied now: the buffers may be reused after return.
 * srn_sq_check_wqe sees INLINE with no SGEs and takes w->length as the
 * already gathered inline length. */
static void wr_set_inline_data_list(struct ibv_qp_ex *ex, size_t n,
				    const struct ibv_data_buf *bufs)
{
	struct srn_qp *qp = qpx(ex);
	struct srn_send_wqe *w = qp->wr_cur;
	uint64_t len = 0;
	size_t i;

	if (!w)
		return wr_fail(qp, EINVAL);
	if (n && !bufs)
		return wr_fail(qp, EINVAL);
	for (i = 0; i < n; i++)
		len += bufs[i].length;
	if (len > qp->cap.max_inline_data || len > SRN_MAX_INLINE)
		return wr_fail(qp, EINVAL);
	len = 0;
	for (i = 0; i < n; i++) {
		if (!bufs[i].length) /* its address may be NULL */
			continue;
		memcpy(w->inline_data + len, bufs[i].addr, bufs[i].length);
		len += bufs[i].length;
	}
	w->num_sge = 0;
	w->length = len;
	w->send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *ex, void *addr, size_t length)
{
	struct ibv_data_buf b = { .addr = addr, .length = length };

	wr_set_inline_data_list(ex, 1, &b);
}

void srn_qp_ex_init(struct srn_qp *qp)
{
	struct ibv_qp_ex *ex = &qp->ex;

	ex->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	ex->wr_atomic_fetch_add = wr_atomic_fetch_add;
	ex->wr_bind_mw = wr_bind_mw;
	ex->wr_local_inv = wr_local_inv;
	ex->wr_rdma_read = wr_rdma_read;
	ex->wr_rdma_write = wr_rdma_write;
	ex->wr_rdma_write_imm = wr_rdma_write_imm;
	ex->wr_send = wr_send;
	ex->wr_send_imm = wr_send_imm;
	ex->wr_send_inv = wr_send_inv;
	ex->wr_send_tso = wr_send_tso;
	ex->wr_set_ud_addr = wr_set_ud_addr;
	ex->wr_set_xrc_srqn = wr_set_xrc_srqn;
	ex->wr_set_inline_data = wr_set_inline_data;
	ex->wr_set_inline_data_list = wr_set_inline_data_list;
	ex->wr_set_sge = wr_set_sge;
	ex->wr_set_sge_list = wr_set_sge_list;
	ex->wr_start = wr_start;
	ex->wr_complete = wr_complete;
	ex->wr_abort = wr_abort;
	ex->wr_atomic_write = wr_atomic_write;
}
