/* Multicast membership of UD QPs.  Each QP keeps the groups it joined
 * (qp->mcast[], guarded by the context lock); the context-wide view —
 * which local QPs get a copy of a packet to a group, and when the
 * process must join or leave the IP group — is computed by scanning the
 * QP table.  O(QPs x groups per QP) on attach/detach and per group
 * packet: fine for the handfuls of QPs that use multicast; a per-group
 * index would fix it.
 *
 * Semantics as the kernel's uverbs layer: attaching a group twice is a
 * no-op, detaching one that is not attached is EINVAL, destroying a QP
 * detaches it from everything.  The LID is ignored (RoCE has none). */
#include "verbs/datapath.h"
#include "verbs/export.h"

#include <string.h>

#define QP_TOMB ((struct srn_qp *)(uintptr_t)1) /* as verbs/qp.c's table */

/* Weak defaults until the UD transport joins IP groups on its socket:
 * the membership is recorded, nothing is received for it yet. */
__attribute__((weak)) int srn_transport_mcast_join(struct srn_context *ctx,
						   const union ibv_gid *mgid)
{
	(void)ctx;
	(void)mgid;
	return 0;
}

__attribute__((weak)) void srn_transport_mcast_leave(struct srn_context *ctx,
						     const union ibv_gid *mgid)
{
	(void)ctx;
	(void)mgid;
}

static int qp_find_group(const struct srn_qp *qp, const union ibv_gid *mgid)
{
	uint32_t i;

	for (i = 0; i < qp->num_mcast; i++)
		if (!memcmp(qp->mcast[i].raw, mgid->raw, sizeof(mgid->raw)))
			return (int)i;
	return -1;
}

/* ctx->lock held.  Local QPs in the table attached to mgid (up to max
 * stored in out, which may be NULL); returns the count. */
static uint32_t scan_group(struct srn_context *ctx, const union ibv_gid *mgid,
			   struct srn_qp **out, uint32_t max)
{
	uint32_t i, n = 0;

	for (i = 0; i < ctx->qps_cap; i++) {
		struct srn_qp *q = ctx->qps[i];

		if (!q || q == QP_TOMB || qp_find_group(q, mgid) < 0)
			continue;
		if (out && n < max)
			out[n] = q;
		n++;
	}
	return n;
}

uint32_t srn_mcast_qps(struct srn_context *ctx, const union ibv_gid *mgid,
		       struct srn_qp **out, uint32_t max)
{
	uint32_t n;

	pthread_mutex_lock(&ctx->lock);
	n = scan_group(ctx, mgid, out, max);
	pthread_mutex_unlock(&ctx->lock);
	return n;
}

static int check_args(struct ibv_qp *ibqp, const union ibv_gid *gid)
{
	if (!ibqp || !gid)
		return EINVAL;
	if (ibqp->qp_type != IBV_QPT_UD || !srn_gid_is_mcast(gid))
		return EINVAL;
	return 0;
}

/* qp receives a copy of every packet sent to group gid.  0, EINVAL (not
 * UD, not a multicast GID), ENOMEM (the QP has SRN_MAX_MCAST_QP_ATTACH
 * groups, or the group has that many local QPs), or the transport's
 * error joining the IP group. */
SRN_EXPORT int ibv_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid,
				uint16_t lid)
{
	struct srn_context *ctx;
	struct srn_qp *qp;
	uint32_t members;
	int err = 0;

	(void)lid;
	err = check_args(ibqp, gid);
	if (err)
		return err;
	qp = srn_qp(ibqp);
	ctx = qp->ctx;
	pthread_mutex_lock(&ctx->lock);
	if (qp_find_group(qp, gid) >= 0)
		goto out; /* already attached: nothing to do */
	if (qp->num_mcast >= SRN_MAX_MCAST_QP_ATTACH) {
		err = ENOMEM;
		goto out;
	}
	members = scan_group(ctx, gid, NULL, 0);
	if (members >= SRN_MAX_MCAST_QP_ATTACH) {
		err = ENOMEM; /* max_mcast_qp_attach: QPs per group */
		goto out;
	}
	if (members == 0) {
		err = srn_transport_mcast_join(ctx, gid);
		if (err)
			goto out;
	}
	qp->mcast[qp->num_mcast++] = *gid;
out:
	pthread_mutex_unlock(&ctx->lock);
	return err;
}

/* ctx->lock held: drop entry i of qp, leave the IP group when qp was the
 * last local member (qp may or may not still be in the table). */
static void qp_drop_group(struct srn_context *ctx, struct srn_qp *qp, uint32_t i)
{
	union ibv_gid g = qp->mcast[i];

	qp->mcast[i] = qp->mcast[qp->num_mcast - 1];
	qp->num_mcast--;
	if (scan_group(ctx, &g, NULL, 0) == 0)
		srn_transport_mcast_leave(ctx, &g);
}

/* Undo ibv_attach_mcast.  0, or EINVAL when qp is not attached to gid
 * (or is not UD / gid is not multicast). */
SRN_EXPORT int ibv_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid,
				uint16_t lid)
{
	struct srn_context *ctx;
	struct srn_qp *qp;
	int i, err;

	(void)lid;
	err = check_args(ibqp, gid);
	if (err)
		return err;
	qp = srn_qp(ibqp);
	ctx = qp->ctx;
	pthread_mutex_lock(&ctx->lock);
	i = qp_find_group(qp, gid);
	if (i < 0)
		err = EINVAL;
	else
		qp_drop_group(ctx, qp, (uint32_t)i);
	pthread_mutex_unlock(&ctx->lock);
	return err;
}

void srn_mcast_qp_detach_all(struct srn_qp *qp)
{
	struct srn_context *ctx = qp->ctx;

	pthread_mutex_lock(&ctx->lock);
	while (qp->num_mcast)
		qp_drop_group(ctx, qp, qp->num_mcast - 1);
	pthread_mutex_unlock(&ctx->lock);
}
