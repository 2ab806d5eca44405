/* rsockets: connection resources and the cm event side of a socket's life
 * (resolve address -> resolve route -> connect -> ESTABLISHED; listeners
 * collecting CONNECT_REQUESTs; DISCONNECTED).  Never blocks: the callers
 * in cm/rsocket.c and cm/rsocket_io.c sleep on the channel fd. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "cm/rsocket_priv.h"

uint64_t rs_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void rs_pdata_fill(struct rs_pdata *p)
{
	memset(p, 0, sizeof(*p));
	p->magic = htonl(RS_PDATA_MAGIC);
	p->version = RS_PDATA_VERSION;
	p->window = htonl(RS_WINDOW);
	p->seg = htonl(RS_SEG);
}

int rs_pdata_take(struct rs *rs, const void *data, uint8_t len)
{
	struct rs_pdata p;
	uint32_t w, seg;

	if (!data || len < sizeof(p))
		return EPROTO;
	memcpy(&p, data, sizeof(p));
	w = ntohl(p.window);
	seg = ntohl(p.seg);
	/* A peer that is not a softrnic rsocket (rdma-core's rsockets speak
	 * another protocol) or asks for nonsense is refused. */
	if (ntohl(p.magic) != RS_PDATA_MAGIC || p.version != RS_PDATA_VERSION ||
	    w == 0 || w > RS_WINDOW || seg == 0)
		return EPROTO;
	rs->credits = w;
	rs->peer_window = w;
	rs->peer_seg = seg < RS_SEG ? seg : RS_SEG;
	return 0;
}

static int post_recv(struct rs *rs, uint32_t idx)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(rs->rbuf + (size_t)idx * RS_SEG),
		.length = RS_SEG,
		.lkey = rs->rmr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = idx, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(rs->id->qp, &wr, &bad);
}

int rs_repost(struct rs *rs, uint32_t idx)
{
	if (rs->qp_err || !rs->id || !rs->id->qp)
		return EPIPE;
	return post_recv(rs, idx);
}

static void *map_buf(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int rs_setup_qp(struct rs *rs)
{
	struct ibv_context *ctx = rs->id->verbs;
	struct ibv_qp_init_attr qa;
	uint32_t i;
	int err;

	if (!ctx)
		return ENODEV;
	rs->pd = ibv_alloc_pd(ctx);
	if (!rs->pd)
		goto fail;
	rs->cch = ibv_create_comp_channel(ctx);
	if (!rs->cch)
		goto fail;
	if (fcntl(rs->cch->fd, F_SETFL, fcntl(rs->cch->fd, F_GETFL) | O_NONBLOCK) < 0)
		goto fail;
	rs->cq = ibv_create_cq(ctx, RS_SQ_DEPTH + RS_RQ_DEPTH, rs, rs->cch, 0);
	if (!rs->cq)
		goto fail;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = rs->cq;
	qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = RS_SQ_DEPTH;
	qa.cap.max_recv_wr = RS_RQ_DEPTH;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(rs->id, rs->pd, &qa))
		goto fail;
	rs->rbuf = map_buf((size_t)RS_RQ_DEPTH * RS_SEG);
	rs->sbuf = map_buf((size_t)RS_WINDOW * RS_SEG);
	if (!rs->rbuf || !rs->sbuf) {
		errno = ENOMEM;
		goto fail;
	}
	rs->rmr = ibv_reg_mr(rs->pd, rs->rbuf, (size_t)RS_RQ_DEPTH * RS_SEG,
			     IBV_ACCESS_LOCAL_WRITE);
	rs->smr = ibv_reg_mr(rs->pd, rs->sbuf, (size_t)RS_WINDOW * RS_SEG, 0);
	if (!rs->rmr || !rs->smr)
		goto fail;
	for (i = 0; i < RS_RQ_DEPTH; i++) {
		err = post_recv(rs, i);
		if (err) {
			errno = err;
			goto fail;
		}
	}
	for (i = 0; i < RS_WINDOW; i++)
		rs->sfree[i] = RS_WINDOW - 1 - i;
	rs->nsfree = RS_WINDOW;
	rs->sq_free = RS_SQ_DEPTH;
	rs->qp_ready = true;
	return 0;
fail:
	err = errno ? errno : ENOMEM;
	rs_free_qp(rs);
	return err;
}

void rs_free_qp(struct rs *rs)
{
	if (rs->id && rs->id->qp)
		rdma_destroy_qp(rs->id);
	rs_iomap_free(rs);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	rs->rmr = rs->smr = NULL;
	if (rs->rbuf)
		munmap(rs->rbuf, (size_t)RS_RQ_DEPTH * RS_SEG);
	if (rs->sbuf)
		munmap(rs->sbuf, (size_t)RS_WINDOW * RS_SEG);
	rs->rbuf = rs->sbuf = NULL;
	if (rs->cq) {
		/* Events taken were acked at once (rs_disarm): none pending. */
		ibv_destroy_cq(rs->cq);
		rs->cq = NULL;
	}
	if (rs->cch)
		ibv_destroy_comp_channel(rs->cch);
	rs->cch = NULL;
	if (rs->pd)
		ibv_dealloc_pd(rs->pd);
	rs->pd = NULL;
	rs->qp_ready = false;
}

static void fail_conn(struct rs *rs, int err)
{
	rs->state = RS_FAILED;
	if (!rs->err)
		rs->err = err;
}

static int event_errno(const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		return ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return ev->status == -ETIMEDOUT ? ETIMEDOUT : EHOSTUNREACH;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return ENODEV;
	default:
		return ECONNABORTED;
	}
}

/* Active side: one step per event. */
static void connect_event(struct rs *rs, const struct rdma_cm_event *ev)
{
	struct rdma_conn_param cp;
	struct rs_pdata pd;
	int err;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rs->conn_step != RS_STEP_ADDR)
			break;
		if (rdma_resolve_route(rs->id, 2000)) {
			fail_conn(rs, errno);
			break;
		}
		rs->conn_step = RS_STEP_ROUTE;
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (rs->conn_step != RS_STEP_ROUTE)
			break;
		err = rs_setup_qp(rs);
		if (err) {
			fail_conn(rs, err);
			break;
		}
		rs_pdata_fill(&pd);
		memset(&cp, 0, sizeof(cp));
		cp.private_data = &pd;
		cp.private_data_len = sizeof(pd);
		cp.retry_count = 7;
		cp.rnr_retry_count = 7; /* receives are always posted: RNR is brief */
		if (rdma_connect(rs->id, &cp)) {
			fail_conn(rs, errno);
			break;
		}
		rs->conn_step = RS_STEP_CONN;
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rs->conn_step != RS_STEP_CONN)
			break;
		err = rs_pdata_take(rs, ev->param.conn.private_data,
				    ev->param.conn.private_data_len);
		if (err) {
			rdma_disconnect(rs->id);
			fail_conn(rs, err);
			break;
		}
		rs->state = RS_CONNECTED;
		break;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		break;
	default:
		fail_conn(rs, event_errno(ev));
		break;
	}
}

/* Listener: keep each request (id + pdata) for raccept. */
static void listen_event(struct rs *rs, struct rdma_cm_event *ev)
{
	struct rs_pending *p;

	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		return;
	p = calloc(1, sizeof(*p));
	if (!p) {
		rdma_reject(ev->id, NULL, 0);
		rdma_destroy_id(ev->id);
		return;
	}
	p->id = ev->id;
	if (ev->param.conn.private_data && ev->param.conn.private_data_len >= sizeof(p->pdata))
		memcpy(&p->pdata, ev->param.conn.private_data, sizeof(p->pdata));
	if (rs->acceptq_tail)
		rs->acceptq_tail->next = p;
	else
		rs->acceptq = p;
	rs->acceptq_tail = p;
}

/* A connected (or accepted) socket: only disconnects matter. */
static void conn_event(struct rs *rs, const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rs->state == RS_ACCEPTING)
			rs->state = RS_CONNECTED;
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		rs->peer_gone = true;
		break;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		rs->peer_gone = true;
		if (rs->state == RS_ACCEPTING)
			fail_conn(rs, event_errno(ev));
		break;
	default:
		break;
	}
}

void rs_cm_progress(struct rs *rs)
{
	struct rdma_cm_event *ev;
	int n;

	/* Bounded: a flood of events cannot keep a caller here. */
	for (n = 0; n < 64 && rs->ch; n++) {
		if (rdma_get_cm_event(rs->ch, &ev))
			break;
		if (rs->state == RS_LISTENING)
			listen_event(rs, ev);
		else if (rs->state == RS_CONNECTING)
			connect_event(rs, ev);
		else
			conn_event(rs, ev);
		rdma_ack_cm_event(ev);
	}
}
