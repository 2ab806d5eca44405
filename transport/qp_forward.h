/* transport/qp_forward: packets another host sends to this host's RoCE
 * port 4791 for a QP owned by another engine of this host. */
#ifndef TRANSPORT_QP_FORWARD_H
#define TRANSPORT_QP_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "net/udp.h"

struct srn_engine;

/* m arrived at eng for dqpn, which eng does not own.  If eng holds port
 * 4791 and the registry names another engine on this host as dqpn's
 * owner, hand the packet over unchanged through that engine's inbox and
 * return true; otherwise false (the caller drops it). */
bool srn_qp_forward(struct srn_engine *eng, const struct net_udp_msg *m, uint32_t dqpn);

#endif
