/* cm/conn.h: what the CM protocol files share (internal to cm/). */
#ifndef CM_CONN_H
#define CM_CONN_H

#include "cm/cm.h"

enum {
	CM_RESPONSE_TIMEOUT = 20,    /* 4.096 us * 2^20 = 4.3 s, as Linux */
	CM_MAX_RETRIES = 15,
	CM_MRA_SERVICE_TIMEOUT = 24, /* ~68 s: the application is slow */
	CM_TARGET_ACK_DELAY = 15,
	CM_LIVENESS_MS = 300,        /* how often same-host peers are checked */
	CM_PROBE_MS = 1000,          /* how often other hosts are probed */
	/* two "port unreachable" this far apart (but within
	 * CM_UNREACH_MAX_MS) end a connection: the first may have met the
	 * moment between one engine letting 4791 go and the next taking it */
	CM_UNREACH_GAP_MS = 300,
	CM_UNREACH_MAX_MS = 5000,
	CM_LISTEN_GRACE_MS = 250,    /* a same-host REQ waits this for a listener */
	/* A REQ that reached us before its listener waits this for it: many
	 * times the lag seen on a busy host (<= 90 ms), within the sender's
	 * retransmission interval (1 s here, 4.3 s on Linux). */
	CM_REQ_HOLD_MS = 500,
	CM_TIMEWAIT_MS = 2000,       /* ~ 2 x packet life time, as Linux's order */
	CM_DREQ_GRACE_MS = 20,       /* a DREQ's DISCONNECTED waits this long
				      * (cm_dreq_in) */
	CM_REQ_PDATA = 92 - WIRE_CMA_HDR_LEN,  /* 56 */
	CM_REP_PDATA = 196,
	CM_REJ_PDATA = 148,
	CM_DREQ_PDATA = 220,
	CM_SIDR_REQ_PDATA = 216 - WIRE_CMA_HDR_LEN,
	CM_SIDR_REP_PDATA = 136,
};

extern uint64_t cm_last_liveness_ms; /* last same-host liveness pass */

/* ms of a CM timeout code (4.096 us * 2^t), kept within 50 ms .. 1 s */
int cm_timeout_ms(unsigned int t);
uint32_t cm_rand32(void);
/* a local comm id no live id of ours uses */
uint32_t cm_new_comm_id(void);
bool cm_peer_is_local(const struct cm_peer *p);
/* encode m, send it to c's peer; out keeps the bytes */
void cm_send_msg(struct cm_id *c, struct wire_cm_msg *m, uint8_t out[WIRE_MAD_LEN]);
/* send and retransmit until answered (or give up) */
void cm_send_tracked(struct cm_id *c, struct wire_cm_msg *m, unsigned int tmo);
/* send once, keep it to answer a duplicate of what it answers */
void cm_send_reply(struct cm_id *c, struct wire_cm_msg *m);
void cm_msg_init(struct wire_cm_msg *m, uint16_t attr, uint64_t tid);
void cm_leave_backlog(struct cm_id *c);
void cm_send_rej(struct cm_id *c, uint16_t reason, uint8_t msg_rejected,
		const void *pdata, size_t len);
/* a REJ to a MAD that matches no id */
void cm_rej_unknown(const struct wire_cm_msg *in, const struct cm_peer *from,
		const uint8_t to_ip[16], uint32_t remote_comm_id, uint16_t reason, uint8_t msg_rejected);
/* queue e (may be NULL: allocation failed) on c's channel */
void cm_post(struct cm_id *c, struct cm_event *e);
/* an event with private data and the peer's conn params */
struct cm_event *cm_event_conn(struct cm_id *c, enum rdma_cm_event_type t, int st,
		const uint8_t *pdata, size_t len);
/* the listener for (ps, port) on ip: exact address first, then wildcard */
struct cm_id *cm_find_listener(uint16_t ps, uint16_t port, const uint8_t ip[16], bool ud);
struct cm_id *cm_find_by_local(uint32_t comm_id);
/* The addresses of a REQ's IP CM header in cm/addr.h form. */
void cm_cma_hdr_ips(const struct wire_cma_hdr *h, uint8_t src[16], uint8_t dst[16]);
void cm_fill_path(struct cm_id *c, unsigned int mtu);
/* ---- MAD handlers (cm_conn_mad_in dispatches) ---- */
void cm_req_in(const struct wire_cm_msg *m, const struct cm_peer *from,
		const uint8_t to_ip[16]);
void cm_rep_in(const struct wire_cm_msg *m, const struct cm_peer *from,
		const uint8_t to_ip[16]);
void cm_rtu_in(const struct wire_cm_msg *m);
void cm_rej_in(const struct wire_cm_msg *m, const struct cm_peer *from);
void cm_mra_in(const struct wire_cm_msg *m);
void cm_send_dreq(struct cm_id *c, bool tracked);
void cm_post_disconnected(struct cm_id *c);
void cm_dreq_in(const struct wire_cm_msg *m, const struct cm_peer *from,
		const uint8_t to_ip[16]);
void cm_drep_in(const struct wire_cm_msg *m);
int cm_sidr_connect(struct cm_id *c, const struct rdma_conn_param *p);
void cm_sidr_req_in(const struct wire_cm_msg *m, const struct cm_peer *from,
		const uint8_t to_ip[16]);
int cm_sidr_accept(struct cm_id *c, const struct rdma_conn_param *p);
void cm_sidr_rep_in(const struct wire_cm_msg *m);
/* ---- requests that came before their listener (cm/dispatch.c) ---- */
/* Hold m (a REQ or SIDR_REQ for ps/port on dst nobody listens on) until a
 * listener appears or CM_REQ_HOLD_MS pass; false: refuse it now. */
bool cm_req_hold(const struct wire_cm_msg *m, const struct cm_peer *from,
		const uint8_t to_ip[16], uint16_t ps, uint16_t port, const uint8_t dst[16],
		bool ud);
/* A listener appeared: hand it what it was waited for. */
void cm_req_hold_release(void);
/* Refuse what waited its grace out; ms until the next deadline, -1 none. */
int cm_req_hold_timers(uint64_t now);

#endif
