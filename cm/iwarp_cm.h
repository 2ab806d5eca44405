/* rdma_cm on an iWARP device (srn_iw_*), as over siw: the connection is
 * a TCP connection to the peer's rdma_cm port carrying the MPA request
 * and reply (with the rdma_cm private data), then the QP's FPDU stream
 * (cm/iwarp_cm.c).  Each hook is called with cm_lock held from the
 * librdmacm call of its name; positive errno on failure. */
#ifndef CM_IWARP_CM_H
#define CM_IWARP_CM_H

#include "cm/cm.h"

/* Does c belong to an iWARP device? */
bool cm_iw_id(const struct cm_id *c);
/* The iWARP device whose interface holds ip (cm/addr.h form; IPv4 only),
 * or NULL. */
struct ibv_context *cm_iw_device_for_ip(const uint8_t ip[16]);
/* c now listens: a TCP listener on its address and port if c is on an
 * iWARP device, or is a wildcard listener and an iWARP device exists. */
int cm_iw_listen(struct cm_id *c);
int cm_iw_connect(struct cm_id *c, const struct rdma_conn_param *p);
int cm_iw_accept(struct cm_id *c, const struct rdma_conn_param *p);
int cm_iw_reject(struct cm_id *c, const void *pdata, uint8_t len);
/* *wait: a synchronous id is to wait for its DISCONNECTED */
int cm_iw_disconnect(struct cm_id *c, bool *wait);
/* c is being destroyed: its sockets go (before cm_conn_destroy, which
 * then has no IB CM message to send for it). */
void cm_iw_forget(struct cm_id *c);

#endif
