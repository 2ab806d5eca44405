/* transport/engine_qps: the table of a context's QPs, by QPN and as a
 * list for the timer scan (engine.h). */
#include <errno.h>
#include <stdlib.h>

#include "transport/engine_priv.h"
int srn_engine_add_qp(struct srn_engine *eng, struct srn_rc_state *rc)
{
	int ret = 0;

	if (rc->qpn >= NET_REG_SLOTS)
		return EINVAL;
	pthread_mutex_lock(&eng->qps_lock);
	if (eng->n_all == eng->cap_all) {
		uint32_t cap = eng->cap_all ? eng->cap_all * 2 : 16;
		void *p = realloc(eng->all, cap * sizeof(*eng->all));

		if (!p) {
			ret = ENOMEM;
			goto out;
		}
		eng->all = p;
		eng->cap_all = cap;
	}
	eng->all[eng->n_all++] = rc;
	eng->by_qpn[rc->qpn] = rc;
out:
	pthread_mutex_unlock(&eng->qps_lock);
	return ret;
}

void srn_engine_del_qp(struct srn_engine *eng, struct srn_rc_state *rc)
{
	pthread_mutex_lock(&eng->qps_lock);
	if (rc->qpn < NET_REG_SLOTS && eng->by_qpn[rc->qpn] == rc)
		eng->by_qpn[rc->qpn] = NULL;
	for (uint32_t i = 0; i < eng->n_all; i++)
		if (eng->all[i] == rc) {
			eng->all[i] = eng->all[--eng->n_all];
			break;
		}
	pthread_mutex_unlock(&eng->qps_lock);
}

