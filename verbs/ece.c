/* verbs/ece: Enhanced Connection Establishment.  softrnic offers one
 * option, selective retransmission between two softrnic RC QPs
 * (transport/sr.c); a QP uses it only when ibv_set_ece gives it back with
 * softrnic's vendor tag, i.e. when both sides named it (rdma_cm does this
 * for its QPs: cm/qp.c).  Any other ECE leaves plain go-back-N. */
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>

#include "verbs/ece.h"
#include "verbs/export.h"
#include "verbs/srn.h"

SRN_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	if (!qp || !ece)
		return EINVAL;
	ece->vendor_id = SRN_ECE_VENDOR;
	ece->options = qp->qp_type == IBV_QPT_RC ? SRN_ECE_SELECTIVE_RETX : 0;
	ece->comp_mask = 0;
	return 0;
}

SRN_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	struct srn_qp *q;

	if (!qp || !ece || ece->comp_mask)
		return EINVAL;
	/* options of another vendor are not ours to judge: none used */
	if (ece->vendor_id == SRN_ECE_VENDOR && (ece->options & ~SRN_ECE_SELECTIVE_RETX))
		return EOPNOTSUPP;
	q = srn_qp(qp);
	pthread_mutex_lock(&q->lock);
	srn_transport_qp_set_sr(q, qp->qp_type == IBV_QPT_RC &&
				       ece->vendor_id == SRN_ECE_VENDOR &&
				       (ece->options & SRN_ECE_SELECTIVE_RETX));
	srn_qp_unlock(q);
	return 0;
}
