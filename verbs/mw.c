/* Memory windows (see mw.h).  Facts followed, as rxe has them: binding
 * needs IBV_ACCESS_MW_BIND on the MR, the MR and the window in one PD, a
 * range inside the MR, and for remote write or atomic rights the MR's
 * local write; a window may grant remote rights the MR itself lacks (the
 * point of windows).  A type 1 window is bound with ibv_bind_mw and is
 * valid on every QP of its PD; length 0 unbinds it.  A type 2 window is
 * bound with a BIND_MW work request, only while free, and then only the
 * QP it was bound through may use its rkey; LOCAL_INV or a peer's SEND
 * with Invalidate frees it again.  Deallocation unbinds either type.
 *
 * The table and every window's binding are guarded by one process-wide
 * mutex; each change bumps the context's mr_gen, which makes a responder
 * in the middle of a multi-packet WRITE check its rkey again. */
#include "verbs/mw.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "verbs/datapath.h"
#include "verbs/key_random.h"

struct srn_mw {
	struct ibv_mw ibv;
	struct srn_context *ctx;
	struct srn_pd *pd;
	/* binding (tab_lock) */
	bool bound;
	uint32_t mr_key;             /* lkey of the MR it opens onto */
	uint64_t addr, length;       /* iova range of the MR it exposes */
	unsigned int access;         /* IBV_ACCESS_REMOTE_* it grants */
	uint32_t qpn;                /* type 2: the QP bound through */
};

#define SLOT_SHIFT 8
#define SLOT_MASK (SRN_MAX_MW - 1)
#define MW_REMOTE (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)

static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_mw *tab[SRN_MAX_MW];
static uint32_t tab_live;

static uint32_t key_slot(uint32_t key)
{
	return (key >> SLOT_SHIFT) & SLOT_MASK;
}

/* The window whose key is key in ctx (tab_lock held), or NULL. */
static struct srn_mw *mw_of_key(const struct srn_context *ctx, uint32_t key)
{
	struct srn_mw *m;

	if (!srn_key_is_mw(key))
		return NULL;
	m = tab[key_slot(key)];
	return m && m->ctx == ctx && m->ibv.rkey == key ? m : NULL;
}

static struct srn_mw *mw_of(struct ibv_mw *mw)
{
	return srn_container_of(mw, struct srn_mw, ibv);
}

static void changed(struct srn_context *ctx)
{
	atomic_fetch_add(&ctx->mr_gen, 1);
}

struct ibv_mw *srn_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct srn_mw *m;
	uint32_t r, slot;

	if (!pd || (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)) {
		errno = EINVAL;
		return NULL;
	}
	if (!srn_key_random32(&r)) {
		errno = ENOMEM;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&tab_lock);
	slot = SRN_MAX_MW;
	if (tab_live < SRN_MAX_MW)
		for (uint32_t i = 0; i < SRN_MAX_MW; i++)
			if (!tab[(r + i) & SLOT_MASK]) {
				slot = (r + i) & SLOT_MASK;
				break;
			}
	if (slot == SRN_MAX_MW) {
		pthread_mutex_unlock(&tab_lock);
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	m->ibv.context = pd->context;
	m->ibv.pd = pd;
	m->ibv.type = type;
	/* random bits 20..30 and 0..7 around the slot */
	m->ibv.rkey = SRN_MW_KEY_BIT | (r & 0x7ff000ffu) | (slot << SLOT_SHIFT);
	m->ibv.handle = m->ibv.rkey;
	m->ctx = srn_ctx(pd->context);
	m->pd = srn_pd(pd);
	tab[slot] = m;
	tab_live++;
	pthread_mutex_unlock(&tab_lock);
	atomic_fetch_add(&m->pd->users, 1);
	atomic_fetch_add(&m->ctx->num_objects, 1);
	return &m->ibv;
}

int srn_dealloc_mw(struct ibv_mw *ibmw)
{
	struct srn_mw *m;

	if (!ibmw)
		return EINVAL;
	m = mw_of(ibmw);
	pthread_mutex_lock(&tab_lock);
	if (tab[key_slot(ibmw->rkey)] != m) {
		pthread_mutex_unlock(&tab_lock);
		return EINVAL;
	}
	tab[key_slot(ibmw->rkey)] = NULL;
	tab_live--;
	changed(m->ctx);
	pthread_mutex_unlock(&tab_lock);
	atomic_fetch_sub(&m->pd->users, 1);
	atomic_fetch_sub(&m->ctx->num_objects, 1);
	free(m);
	return 0;
}

/* The WQE's fields, reused: rkey = new key, remote_addr/compare_add =
 * range, swap = MR lkey (0: unbind), imm_data = access, remote_qkey =
 * window type. */
void srn_mw_bind_to_wqe(struct srn_send_wqe *w, struct ibv_mw *mw, uint32_t rkey,
			const struct ibv_mw_bind_info *info)
{
	bool ok = mw && info && key_slot(rkey) == key_slot(mw->rkey) && srn_key_is_mw(rkey);

	w->rkey = ok ? rkey : 0;
	w->remote_addr = info ? info->addr : 0;
	w->compare_add = info ? info->length : 0;
	w->swap = info && info->mr ? info->mr->lkey : 0;
	w->imm_data = info ? info->mw_access_flags : 0;
	w->remote_qkey = mw ? (uint32_t)mw->type : 0;
}

int srn_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	struct ibv_send_wr wr = { 0 }, *bad;
	uint32_t rkey;
	int err;

	if (!qp || !mw || !bind || mw->type != IBV_MW_TYPE_1)
		return EINVAL;
	if (qp->qp_type != IBV_QPT_RC && qp->qp_type != IBV_QPT_UC)
		return EINVAL;
	/* a fresh consumer part at every bind (as ibv_inc_rkey) */
	rkey = (mw->rkey & ~0xffu) | ((mw->rkey + 1) & 0xffu);
	wr.wr_id = bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = bind->bind_info;
	err = qp->context->ops.post_send(qp, &wr, &bad);
	if (!err)
		mw->rkey = rkey;
	return err;
}

/* Checks of a bind (tab_lock held; ctx->lock taken for the MR). */
static enum ibv_wc_status bind_check(struct srn_qp *qp, struct srn_mw *m,
				     const struct srn_send_wqe *w)
{
	struct srn_context *ctx = qp->ctx;
	unsigned int acc = w->imm_data;
	void *p;

	if (!srn_pd_same(m->pd, qp->pd))
		return IBV_WC_MW_BIND_ERR;
	if (m->ibv.type == IBV_MW_TYPE_2 && m->bound)
		return IBV_WC_MW_BIND_ERR;
	/* local write means nothing for a window (rdma-core's tests ask for
	 * it): ignored; zero-based windows are not offered */
	if (acc & ~(MW_REMOTE | IBV_ACCESS_LOCAL_WRITE))
		return IBV_WC_MW_BIND_ERR;
	if (!w->swap || w->compare_add == 0)
		return m->ibv.type == IBV_MW_TYPE_1 ? IBV_WC_SUCCESS : IBV_WC_MW_BIND_ERR;
	/* the MR: this PD, MW_BIND, local write for remote write/atomic,
	 * and the whole range inside it */
	if (srn_mr_resolve(ctx, m->pd, (uint32_t)w->swap, false, w->remote_addr,
			   w->compare_add, IBV_ACCESS_MW_BIND, &p) != SRN_MR_OK)
		return IBV_WC_MW_BIND_ERR;
	if ((acc & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    srn_mr_resolve(ctx, m->pd, (uint32_t)w->swap, false, w->remote_addr,
			   w->compare_add, IBV_ACCESS_LOCAL_WRITE, &p) != SRN_MR_OK)
		return IBV_WC_MW_BIND_ERR;
	return IBV_WC_SUCCESS;
}

enum ibv_wc_status srn_mw_bind_exec(struct srn_qp *qp, const struct srn_send_wqe *w)
{
	enum ibv_wc_status st = IBV_WC_MW_BIND_ERR;
	struct srn_mw *m;

	pthread_mutex_lock(&tab_lock);
	m = w->rkey ? tab[key_slot(w->rkey)] : NULL;
	if (m && m->ctx == qp->ctx && (uint32_t)m->ibv.type == w->remote_qkey)
		st = bind_check(qp, m, w);
	if (st == IBV_WC_SUCCESS) {
		m->bound = w->swap && w->compare_add;
		m->mr_key = (uint32_t)w->swap;
		m->addr = w->remote_addr;
		m->length = w->compare_add;
		m->access = w->imm_data & MW_REMOTE;
		m->qpn = qp->ex.qp_base.qp_num;
		m->ibv.rkey = w->rkey; /* the old key stops resolving */
		changed(m->ctx);
	}
	pthread_mutex_unlock(&tab_lock);
	return st;
}

/* Frees the bound type 2 window rkey names in qp's PD; false if none. */
static bool invalidate(struct srn_qp *qp, uint32_t rkey)
{
	struct srn_mw *m;
	bool ok = false;

	pthread_mutex_lock(&tab_lock);
	m = mw_of_key(qp->ctx, rkey);
	if (m && m->ibv.type == IBV_MW_TYPE_2 && srn_pd_same(m->pd, qp->pd) && m->bound) {
		m->bound = false;
		changed(m->ctx);
		ok = true;
	}
	pthread_mutex_unlock(&tab_lock);
	return ok;
}

enum ibv_wc_status srn_mw_local_inv(struct srn_qp *qp, uint32_t rkey)
{
	return invalidate(qp, rkey) ? IBV_WC_SUCCESS : IBV_WC_MW_BIND_ERR;
}

bool srn_mw_remote_inv(struct srn_qp *qp, uint32_t rkey)
{
	return invalidate(qp, rkey);
}

enum srn_mr_check srn_rkey_resolve(struct srn_qp *qp, uint32_t rkey, uint64_t iova,
				   uint64_t len, unsigned int access, void **out)
{
	return srn_rkey_resolve_pd(qp, qp->pd, rkey, iova, len, access, out);
}

enum srn_mr_check srn_rkey_resolve_pd(struct srn_qp *qp, struct srn_pd *pd, uint32_t rkey,
				      uint64_t iova, uint64_t len, unsigned int access,
				      void **out)
{
	enum srn_mr_check r = SRN_MR_OK;
	struct srn_mw *m;
	uint32_t mr_key = 0;

	if (!srn_key_is_mw(rkey) || len == 0)
		return srn_mr_resolve(qp->ctx, pd, rkey, true, iova, len, access, out);
	*out = NULL;
	pthread_mutex_lock(&tab_lock);
	m = mw_of_key(qp->ctx, rkey);
	if (!m || !m->bound)
		r = SRN_MR_BAD_KEY;
	else if (!srn_pd_same(m->pd, pd) ||
		 (m->ibv.type == IBV_MW_TYPE_2 && m->qpn != qp->ex.qp_base.qp_num))
		r = SRN_MR_PD_MISMATCH;
	else if (access & ~m->access)
		r = SRN_MR_NO_ACCESS;
	else if (iova < m->addr || len > m->length || iova - m->addr > m->length - len)
		r = SRN_MR_OUT_OF_BOUNDS;
	else
		mr_key = m->mr_key;
	pthread_mutex_unlock(&tab_lock);
	if (r != SRN_MR_OK)
		return r;
	/* the MR may have gone since the bind: then the key is dead too */
	return srn_mr_resolve(qp->ctx, pd, mr_key, false, iova, len, 0, out);
}
