/* transport/steer: the engine's part in steering port 4791 by QPN
 * (net/steer.h): which socket joins the group, when a census runs, and
 * when the program is compiled again. */
#ifndef TRANSPORT_STEER_H
#define TRANSPORT_STEER_H

#include <stdbool.h>
#include <stdint.h>

#include "net/udp.h"

struct srn_engine;

/* Before the engine's own socket is bound: open the table.  Returns the
 * net_udp_open flags for that socket: an ephemeral port when steering
 * (4791 is joined by a second socket), else 4791 if it is free. */
unsigned int srn_steer_open(struct srn_engine *eng, int family, const uint8_t *ip);
/* Flags for a second socket at 4791 (net_udp_open_roce). */
unsigned int srn_steer_roce_flags(const struct srn_engine *eng);
/* The engine's 4791 socket (its own, or a second one) is bound: join,
 * and count the group again. */
void srn_steer_joined(struct srn_engine *eng);
/* A datagram that may be a census probe: true if it was one. */
bool srn_steer_probe(struct srn_engine *eng, const struct net_udp_msg *m);
/* A datagram for another engine's QP reached us at 4791: the program is
 * stale or does not know the QP yet. */
void srn_steer_misplaced(struct srn_engine *eng);
/* We allocated qpn: make sure the program sends its packets to us. */
void srn_steer_qpn(struct srn_engine *eng, uint32_t qpn);
/* Leave the group, after the 4791 socket is closed. */
void srn_steer_leave(struct srn_engine *eng);
void srn_steer_close(struct srn_engine *eng);

#endif
