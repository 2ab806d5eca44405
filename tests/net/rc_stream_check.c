/* rc_stream_check: moves a stream of sequence-numbered, checksummed
 * messages from a client (the sender) to a server (the receiver) over one
 * QP, and checks at the receiver that every byte arrives, exactly once
 * and in order, for the fault tests in tests/net/fault_*.sh.
 *
 *   server: rc_stream_check [-d DEV] [-g GIDX] [-p PORT] [-T SECS]
 *   client: rc_stream_check [-d DEV] [-g GIDX] [-p PORT] [-T SECS] [-t rc|uc|ud]
 *           [-o send|write|mix] [-m MIB] [-s MSG_BYTES] [-w WINDOW]
 *           [-u QP_TIMEOUT] [-r RETRY_CNT] [-L MIN_DELIVERED_PCT]
 *           [-b MB_PER_S] [-X corrupt|dup|skip] SERVER_IP
 *
 * The client sends its parameters over TCP (SERVER_IP:PORT); both sides
 * then exchange QPNs and GIDs there, and the server returns credits (its
 * receive WQEs consumed) and finally its verdict.  The server keeps
 * WINDOW receive buffers posted; the client keeps at most WINDOW
 * messages beyond the last credit, so an RC stream never meets an RNR
 * NAK and a WRITE never lands in a buffer still being checked.
 *   rc  SENDs, WRITE_WITH_IMMs (imm = sequence number, into the slot of
 *       the receive WQE it consumes) or both alternating: every message
 *       must arrive intact, once, in order.
 *   uc, ud  SENDs only: messages may be lost (a credit that stalls for
 *       20 ms is given up: what was outstanding counts as lost), but a
 *       delivered one is never corrupted nor delivered twice, and on UC
 *       never out of order; at least MIN_DELIVERED_PCT must arrive.
 * -b paces the sender (a stream that must still be running when a test
 * cuts the link).  -X proves the checks bite: the sender flips a byte of the middle
 * message, sends it twice (and the last one never), or skips it.
 * Both sides print a verdict line, the client its rate; async events
 * (port events among them) are printed as they come.  Exit 0 pass,
 * 1 the stream was damaged or an RDMA operation failed, 2 set-up error
 * or the time (SECS, default 60) ran out.  -g: the local GID index (default
 * 0; Linux rxe's IPv4-mapped GID is 1, for tests/interop). */
#include <getopt.h>
#include <infiniband/verbs.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream_msg.h"
#include "stream_oob.h"

#define UD_GRH 40
#define UD_QKEY 0x11111111u
#define STALL_S 0.02

enum qtype { Q_RC, Q_UC, Q_UD };
enum op { OP_SEND, OP_WRITE, OP_MIX };
static const char *const qtype_name[] = { "rc", "uc", "ud" };
static const char *const op_name[] = { "send", "write", "mix" };
static const char *const inject_name[] = { "none", "corrupt", "dup", "skip" };

/* Client -> server first, then server -> client: what both need. */
struct hello {
	uint32_t type, op, msg, window, min_pct, pad;
	uint64_t count, seed;
	uint32_t qpn, psn, rkey, mtu;
	uint64_t addr;
	uint8_t gid[16];
};

/* What the receiver saw; sent back as OOB_RESULT's v[]. */
struct tally {
	uint64_t delivered, corrupt, duplicate, out_of_order, missing, errors, port_events;
};

static struct {
	const char *dev, *host;
	uint16_t port;
	double secs;
	enum qtype type;
	enum op op;
	uint64_t mib;
	uint32_t msg, window;
	uint8_t timeout, retry, gidx;
	unsigned int min_pct;
	double pace_mbs;
	enum { X_NONE, X_CORRUPT, X_DUP, X_SKIP } inject;
} opt = { .port = 18515, .secs = 60, .mib = 16, .msg = 65536, .window = 32,
	  .timeout = 17, .retry = 7, .min_pct = 1 };

struct res {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	uint8_t *buf;
	size_t stride;
	enum ibv_mtu active_mtu;
	pthread_t async_thread;
	bool async_running;
	atomic_bool async_stop;
	atomic_uint port_events;
	atomic_bool port_down;       /* the last port event was PORT_ERR */
};

static void *async_main(void *p)
{
	struct res *r = p;
	int fl = fcntl(r->ctx->async_fd, F_GETFL);

	fcntl(r->ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	while (!atomic_load(&r->async_stop)) {
		struct pollfd pf = { .fd = r->ctx->async_fd, .events = POLLIN };
		struct ibv_async_event ev;

		if (poll(&pf, 1, 100) != 1 || ibv_get_async_event(r->ctx, &ev))
			continue;
		if (ev.event_type == IBV_EVENT_PORT_ERR || ev.event_type == IBV_EVENT_PORT_ACTIVE) {
			struct ibv_port_attr pa;

			/* the port's state as the event left it, for the test */
			if (ibv_query_port(r->ctx, ev.element.port_num, &pa))
				memset(&pa, 0, sizeof(pa));
			fprintf(stderr, "rc_stream_check: async event: %s (port %d: %s, phys %u)\n",
				ibv_event_type_str(ev.event_type), ev.element.port_num,
				ibv_port_state_str(pa.state), pa.phys_state);
			atomic_fetch_add(&r->port_events, 1);
			atomic_store(&r->port_down, ev.event_type == IBV_EVENT_PORT_ERR);
		} else {
			fprintf(stderr, "rc_stream_check: async event: %s\n",
				ibv_event_type_str(ev.event_type));
		}
		ibv_ack_async_event(&ev);
	}
	return NULL;
}

static int die(const char *what)
{
	fprintf(stderr, "rc_stream_check: %s: %s\n", what, strerror(errno));
	return 2;
}

static struct ibv_device *pick_device(struct ibv_device **list)
{
	for (int i = 0; list && list[i]; i++)
		if (!opt.dev || !strcmp(ibv_get_device_name(list[i]), opt.dev))
			return list[i];
	return NULL;
}

/* Device, PD, CQs, a buffer of window slots registered, the QP in
 * RESET; the async watcher started.  0, or 2 with a message. */
static int res_open(struct res *r, const struct hello *h)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *d = pick_device(list);
	struct ibv_port_attr pa;
	enum qtype t = (enum qtype)h->type;
	struct ibv_qp_init_attr ia = {
		.qp_type = t == Q_RC ? IBV_QPT_RC : t == Q_UC ? IBV_QPT_UC : IBV_QPT_UD,
		.cap = { .max_send_wr = h->window, .max_recv_wr = h->window,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	if (!d)
		return ibv_free_device_list(list), errno = ENODEV, die(opt.dev ? opt.dev : "no device");
	r->ctx = ibv_open_device(d);
	ibv_free_device_list(list);
	if (!r->ctx)
		return die("ibv_open_device");
	if (ibv_query_port(r->ctx, 1, &pa))
		return die("ibv_query_port");
	r->active_mtu = pa.active_mtu;
	r->stride = h->msg + (t == Q_UD ? UD_GRH : 0);
	r->buf = aligned_alloc(4096, (r->stride * h->window + 4095) / 4096 * 4096);
	r->pd = ibv_alloc_pd(r->ctx);
	r->scq = ibv_create_cq(r->ctx, (int)h->window * 2, NULL, NULL, 0);
	r->rcq = ibv_create_cq(r->ctx, (int)h->window * 2, NULL, NULL, 0);
	if (!r->buf || !r->pd || !r->scq || !r->rcq)
		return die("PD, CQ or buffer");
	memset(r->buf, 0, r->stride * h->window);
	r->mr = ibv_reg_mr(r->pd, r->buf, r->stride * h->window,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ia.send_cq = r->scq;
	ia.recv_cq = r->rcq;
	r->qp = r->mr ? ibv_create_qp(r->pd, &ia) : NULL;
	if (!r->qp)
		return die("ibv_reg_mr or ibv_create_qp");
	r->async_running = !pthread_create(&r->async_thread, NULL, async_main, r);
	return 0;
}

static void res_close(struct res *r)
{
	if (r->async_running) {
		/* a port that went down during the run: see it come back (the
		 * kernel may hold a carrier notice for a second), at most 3 s */
		for (int i = 0; i < 60 && atomic_load(&r->port_down); i++)
			usleep(50 * 1000);
		atomic_store(&r->async_stop, true);
		pthread_join(r->async_thread, NULL);
	}
	if (r->ah)
		ibv_destroy_ah(r->ah);
	if (r->qp)
		ibv_destroy_qp(r->qp);
	if (r->mr)
		ibv_dereg_mr(r->mr);
	if (r->scq)
		ibv_destroy_cq(r->scq);
	if (r->rcq)
		ibv_destroy_cq(r->rcq);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	if (r->ctx)
		ibv_close_device(r->ctx);
	free(r->buf);
}

/* Fills h's QPN, PSN, GID, MR and MTU from r. */
static int hello_self(struct res *r, struct hello *h)
{
	union ibv_gid gid;

	if (ibv_query_gid(r->ctx, 1, opt.gidx, &gid))
		return die("ibv_query_gid");
	h->qpn = r->qp->qp_num;
	h->psn = (uint32_t)(h->seed >> 40) & 0xffffff;
	h->rkey = r->mr->rkey;
	h->addr = (uintptr_t)r->buf;
	h->mtu = r->active_mtu;
	memcpy(h->gid, gid.raw, 16);
	return 0;
}

/* RESET -> RTS towards peer (the receiving side needs only RTR; RTS
 * does no harm), sending from me->psn. */
static int qp_connect(struct res *r, const struct hello *me, const struct hello *peer)
{
	enum qtype t = (enum qtype)me->type;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	enum ibv_mtu mtu = me->mtu < peer->mtu ? me->mtu : peer->mtu;

	if (t == Q_UD) {
		a.qkey = UD_QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(r->qp, &a, mask))
		return die("modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (t != Q_UD) {
		a.path_mtu = mtu;
		a.dest_qp_num = peer->qpn;
		a.rq_psn = peer->psn;
		a.ah_attr = (struct ibv_ah_attr){ .is_global = 1, .port_num = 1,
						  .grh = { .hop_limit = 64, .sgid_index = opt.gidx } };
		memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (t == Q_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 1;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	if (ibv_modify_qp(r->qp, &a, mask))
		return die("modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = me->psn;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (t == Q_RC) {
		a.timeout = opt.timeout;
		a.retry_cnt = opt.retry;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (ibv_modify_qp(r->qp, &a, mask))
		return die("modify to RTS");
	return 0;
}

static int post_recv(struct res *r, uint32_t slot)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(r->buf + slot * r->stride),
			       .length = (uint32_t)r->stride, .lkey = r->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(r->qp, &wr, &bad);
}

/* The receiver's bookkeeping of sequence numbers: a bitmap of those seen
 * tells a duplicate from a message out of order. */
struct seqbook {
	uint64_t *seen;
	uint64_t count, next, highest;
	struct tally t;
	unsigned int reported;
};

static void report(struct seqbook *b, const char *fmt, uint64_t a, uint64_t c)
{
	if (b->reported++ < 10) {
		fprintf(stderr, "rc_stream_check: ");
		fprintf(stderr, fmt, (unsigned long long)a, (unsigned long long)c);
		fputc('\n', stderr);
	}
}

static void account(struct seqbook *b, const uint8_t *msg, uint32_t len, uint64_t seed,
		    const struct ibv_wc *wc)
{
	static const char *const why[] = { "ok", "short", "bad header", "bad checksum",
					   "bad payload" };
	enum stream_verdict v;
	uint64_t seq = 0;

	v = stream_check(msg, len, seed, &seq);
	if (v == STREAM_OK && seq >= b->count)
		v = STREAM_BAD_HDR;
	if (v == STREAM_OK && wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
	    ntohl(wc->imm_data) != (uint32_t)seq) {
		report(b, "message %llu came with immediate %llu", seq, ntohl(wc->imm_data));
		v = STREAM_BAD_HDR;
	}
	if (v != STREAM_OK) {
		b->t.corrupt++;
		if (b->reported++ < 10)
			fprintf(stderr, "rc_stream_check: corrupt message (%s), %u bytes, "
				"after %llu delivered\n", why[v], len,
				(unsigned long long)b->t.delivered);
		return;
	}
	if (b->seen[seq / 64] >> (seq % 64) & 1) {
		b->t.duplicate++;
		report(b, "message %llu delivered again (expected %llu)", seq, b->next);
		return;
	}
	b->seen[seq / 64] |= 1ull << (seq % 64);
	b->t.delivered++;
	if (seq != b->next) {
		if (seq < b->highest)
			b->t.out_of_order++;
		report(b, "message %llu where %llu was expected", seq, b->next);
	}
	b->next = seq + 1;
	if (seq > b->highest)
		b->highest = seq;
}

/* Polls the receive CQ once: checks, reposts; -1 on an error completion. */
static int drain_recv(struct res *r, struct seqbook *b, const struct hello *h, uint64_t *consumed)
{
	struct ibv_wc wc[16];
	size_t grh = h->type == Q_UD ? UD_GRH : 0;
	int n = ibv_poll_cq(r->rcq, 16, wc);

	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		uint8_t *slot = r->buf + wc[i].wr_id * r->stride;
		uint32_t len = wc[i].byte_len < grh ? 0 : wc[i].byte_len - (uint32_t)grh;

		if (wc[i].status != IBV_WC_SUCCESS) {
			fprintf(stderr, "rc_stream_check: receive completion: %s\n",
				ibv_wc_status_str(wc[i].status));
			b->t.errors++;
			return -1;
		}
		account(b, slot + grh, len, h->seed, &wc[i]);
		/* a message that never lands here again cannot pass as new */
		memset(slot, 0, grh + sizeof(struct stream_hdr));
		(*consumed)++;
		if (post_recv(r, (uint32_t)wc[i].wr_id))
			return die("ibv_post_recv"), -1;
	}
	return n;
}

static bool verdict(const struct tally *t, const struct hello *h)
{
	uint64_t want = h->type == Q_RC ? h->count : (h->count * h->min_pct + 99) / 100;

	return !t->corrupt && !t->duplicate && !t->errors && t->delivered >= want &&
	       (h->type == Q_UD || !t->out_of_order);
}

static void print_tally(const char *who, const struct tally *t, const struct hello *h)
{
	printf("%s: %s %s, %llu x %u B: delivered %llu, corrupt %llu, duplicate %llu, "
	       "out_of_order %llu, missing %llu, errors %llu, port_events %llu\n", who,
	       qtype_name[h->type], op_name[h->op], (unsigned long long)h->count, h->msg,
	       (unsigned long long)t->delivered, (unsigned long long)t->corrupt,
	       (unsigned long long)t->duplicate, (unsigned long long)t->out_of_order,
	       (unsigned long long)t->missing, (unsigned long long)t->errors,
	       (unsigned long long)t->port_events);
}

static int server(void)
{
	double deadline = t_now() + opt.secs, idle_since, end_at = 0;
	struct hello h, me;
	struct res r = { 0 };
	struct seqbook b = { 0 };
	struct oob_reader rd = { 0 };
	struct oob_rec rec;
	uint64_t consumed = 0, credited = 0, sent = UINT64_MAX;
	int fd = oob_accept(opt.port, deadline), rc = 2;

	if (fd < 0)
		return die("no client connected");
	if (oob_xfer(fd, &h, sizeof(h), deadline, 0))
		return close(fd), die("client hello");
	if (h.type > Q_UD || h.op > OP_MIX || h.msg < sizeof(struct stream_hdr) ||
	    h.msg > (1u << 24) || !h.window || h.window > 4096 || h.min_pct > 100 ||
	    (uint64_t)h.msg * h.window > (1ull << 30) || !h.count ||
	    h.count > (1ull << 32))
		return close(fd), errno = EINVAL, die("client parameters");
	me = h;
	b.count = h.count;
	b.seen = calloc((h.count + 63) / 64, 8);
	if (!b.seen || res_open(&r, &h) || hello_self(&r, &me) || qp_connect(&r, &me, &h))
		goto out;
	for (uint32_t i = 0; i < h.window; i++)
		if (post_recv(&r, i)) {
			die("ibv_post_recv");
			goto out;
		}
	if (oob_xfer(fd, &me, sizeof(me), deadline, 1)) {
		die("server hello");
		goto out;
	}
	idle_since = t_now();
	while (t_now() < deadline) {
		int n = drain_recv(&r, &b, &h, &consumed), got;
		double now = t_now();

		if (n < 0)
			break;
		if (n > 0)
			idle_since = now;
		if (consumed - credited >= h.window / 4 + 1 || (n == 0 && consumed != credited)) {
			rec = (struct oob_rec){ .kind = OOB_CREDIT, .v = { consumed } };
			if (oob_xfer(fd, &rec, sizeof(rec), deadline, 1))
				break;
			credited = consumed;
		}
		got = oob_read_rec(fd, &rd, 0, &rec);
		if (got < 0)
			break;
		if (got && rec.kind == OOB_END) {
			sent = rec.v[0];
			end_at = now;
		}
		/* done: all arrived, or (UC, UD) the rest is lost; then a
		 * last look for anything delivered twice */
		if (sent != UINT64_MAX &&
		    (consumed >= sent || (h.type != Q_RC && now - idle_since > 0.3 && now - end_at > 0.3))) {
			double linger = t_now() + 0.2;

			while (t_now() < linger && drain_recv(&r, &b, &h, &consumed) >= 0)
				usleep(1000);
			rc = 0;
			break;
		}
	}
	b.t.missing = b.count - b.t.delivered;
	b.t.port_events = atomic_load(&r.port_events);
	rec = (struct oob_rec){ .kind = OOB_RESULT };
	memcpy(rec.v, &b.t, sizeof(b.t));
	if (oob_xfer(fd, &rec, sizeof(rec), t_now() + 5, 1))
		fprintf(stderr, "rc_stream_check: could not send the verdict\n");
	print_tally("server", &b.t, &h);
	if (rc == 0)
		rc = verdict(&b.t, &h) ? 0 : 1;
	else if (b.t.errors || b.t.corrupt || b.t.duplicate)
		rc = 1;
	else
		fprintf(stderr, "rc_stream_check: server gave up (time or channel)\n");
out:
	close(fd);
	res_close(&r);
	free(b.seen);
	return rc;
}

/* The message the k-th send carries: k, but for what -X injects. */
static uint64_t message_of(uint64_t k, uint64_t count)
{
	uint64_t mid = count / 2;

	if (opt.inject == X_DUP && k > mid)
		return k - 1;
	if (opt.inject == X_SKIP && k >= mid && k + 1 < count)
		return k + 1;
	return k;
}

static int post_send(struct res *r, const struct hello *me, const struct hello *peer, uint64_t k)
{
	uint64_t seq = message_of(k, me->count);
	uint32_t slot = (uint32_t)(k % me->window);
	uint8_t *p = r->buf + slot * r->stride;
	struct ibv_sge sge = { .addr = (uintptr_t)p, .length = me->msg, .lkey = r->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = k, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	bool write = me->op == OP_WRITE || (me->op == OP_MIX && seq % 2);

	stream_fill(p, me->msg, seq, me->seed);
	if (opt.inject == X_CORRUPT && seq == me->count / 2)
		p[me->msg - 1] ^= 0x10;
	if (write) {
		/* the slot of the receive WQE this message consumes */
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htonl((uint32_t)seq);
		wr.wr.rdma.remote_addr = peer->addr + (k % peer->window) * me->msg;
		wr.wr.rdma.rkey = peer->rkey;
	}
	if (me->type == Q_UD) {
		wr.wr.ud.ah = r->ah;
		wr.wr.ud.remote_qpn = peer->qpn;
		wr.wr.ud.remote_qkey = UD_QKEY;
	}
	return ibv_post_send(r->qp, &wr, &bad);
}

static int client(void)
{
	double deadline = t_now() + opt.secs, t0, t1, stalled = 0;
	struct hello me = { .type = opt.type, .op = opt.op, .msg = opt.msg, .window = opt.window,
			    .min_pct = opt.min_pct },
		     peer;
	struct res r = { 0 };
	struct oob_reader rd = { 0 };
	struct oob_rec rec;
	struct tally t = { 0 };
	uint64_t posted = 0, done = 0, credit = 0, skipped = 0;
	struct timespec ts;
	int fd = -1, rc = 2, got;

	clock_gettime(CLOCK_REALTIME, &ts);
	me.seed = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid() << 40;
	me.count = (opt.mib << 20) / opt.msg;
	if (me.count < 4)
		me.count = 4;
	if (res_open(&r, &me) || hello_self(&r, &me))
		goto out;
	fd = oob_connect(opt.host, opt.port, deadline);
	if (fd < 0 || oob_xfer(fd, &me, sizeof(me), deadline, 1) ||
	    oob_xfer(fd, &peer, sizeof(peer), deadline, 0)) {
		die("no server");
		goto out;
	}
	if (me.type == Q_UD && me.msg > (128u << (peer.mtu < me.mtu ? peer.mtu : me.mtu))) {
		fprintf(stderr, "rc_stream_check: UD messages of %u B exceed the path MTU\n", me.msg);
		goto out;
	}
	if (qp_connect(&r, &me, &peer))
		goto out;
	if (me.type == Q_UD) {
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
					  .grh = { .hop_limit = 64, .sgid_index = opt.gidx } };

		memcpy(aa.grh.dgid.raw, peer.gid, 16);
		r.ah = ibv_create_ah(r.pd, &aa);
		if (!r.ah) {
			die("ibv_create_ah");
			goto out;
		}
	}
	t0 = t_now();
	while (done < me.count - (opt.inject == X_SKIP) && t_now() < deadline) {
		struct ibv_wc wc[16];
		uint64_t base = credit + skipped < posted ? credit + skipped : posted;
		bool window_shut = posted - base >= me.window;
		int n;

		bool paced = false;

		while (posted < me.count - (opt.inject == X_SKIP) && posted - done < me.window &&
		       !window_shut) {
			if (opt.pace_mbs > 0 &&
			    (double)posted * me.msg > (t_now() - t0) * opt.pace_mbs * 1e6) {
				paced = true;
				break;
			}
			if (post_send(&r, &me, &peer, posted)) {
				die("ibv_post_send");
				goto out;
			}
			posted++;
			window_shut = posted - base >= me.window;
		}
		n = ibv_poll_cq(r.scq, 16, wc);
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "rc_stream_check: send completion of message %llu: %s\n",
					(unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
				rc = 1;
				goto out;
			}
			done++;
		}
		got = oob_read_rec(fd, &rd, n > 0 || (!window_shut && !paced) ? 0 : 1, &rec);
		if (got < 0) {
			die("server went");
			goto out;
		}
		if (got && rec.kind == OOB_CREDIT && rec.v[0] > credit) {
			credit = rec.v[0];
			stalled = 0;
		} else if (window_shut && me.type != Q_RC && !n) {
			/* UC, UD: a credit that does not come means loss */
			if (!stalled)
				stalled = t_now();
			else if (t_now() - stalled > STALL_S) {
				skipped = posted - credit;
				stalled = 0;
			}
		}
	}
	if (done < me.count - (opt.inject == X_SKIP)) {
		fprintf(stderr, "rc_stream_check: time out, %llu of %llu messages sent\n",
			(unsigned long long)done, (unsigned long long)me.count);
		goto out;
	}
	rec = (struct oob_rec){ .kind = OOB_END, .v = { posted } };
	if (oob_xfer(fd, &rec, sizeof(rec), deadline, 1))
		goto out;
	while ((got = oob_read_rec(fd, &rd, oob_ms_left(deadline), &rec)) == 1 &&
	       rec.kind != OOB_RESULT)
		;
	t1 = t_now();
	if (got != 1) {
		die("no verdict from the server");
		goto out;
	}
	memcpy(&t, rec.v, sizeof(t));
	t.port_events += atomic_load(&r.port_events);
	print_tally("client", &t, &me);
	printf("client: %.1f MiB in %.3f s: %.2f MB/s\n", (double)(me.count * me.msg) / (1 << 20),
	       t1 - t0, (double)(me.count * me.msg) / (t1 - t0) / 1e6);
	rc = verdict(&t, &me) ? 0 : 1;
	printf("client: %s\n", rc ? "FAIL" : "PASS");
out:
	if (fd >= 0)
		close(fd);
	res_close(&r);
	return rc;
}

static int usage(void)
{
	fprintf(stderr, "usage: rc_stream_check [-d DEV] [-g GIDX] [-p PORT] [-T SECS] [-t rc|uc|ud] "
			"[-o send|write|mix] [-m MIB] [-s MSG_BYTES] [-w WINDOW] [-u QP_TIMEOUT] "
			"[-r RETRY_CNT] [-L MIN_DELIVERED_PCT] [-b MB_PER_S] [-X corrupt|dup|skip] "
			"[SERVER_IP]\n");
	return 2;
}

static int pick(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

int main(int argc, char **argv)
{
	int c, v;

	while ((c = getopt(argc, argv, "d:g:p:T:t:o:m:s:w:u:r:L:b:X:")) != -1) {
		switch (c) {
		case 'd': opt.dev = optarg; break;
		case 'g': opt.gidx = (uint8_t)atoi(optarg); break;
		case 'p': opt.port = (uint16_t)atoi(optarg); break;
		case 'T': opt.secs = atof(optarg); break;
		case 't':
			if ((v = pick(optarg, qtype_name, 3)) < 0)
				return usage();
			opt.type = (enum qtype)v;
			break;
		case 'o':
			if ((v = pick(optarg, op_name, 3)) < 0)
				return usage();
			opt.op = (enum op)v;
			break;
		case 'm': opt.mib = strtoull(optarg, NULL, 0); break;
		case 's': opt.msg = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'w': opt.window = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'u': opt.timeout = (uint8_t)atoi(optarg); break;
		case 'r': opt.retry = (uint8_t)atoi(optarg); break;
		case 'b': opt.pace_mbs = atof(optarg); break;
		case 'L': opt.min_pct = (unsigned int)atoi(optarg); break;
		case 'X':
			if ((v = pick(optarg, inject_name, 4)) < 1)
				return usage();
			opt.inject = v;
			break;
		default: return usage();
		}
	}
	if (optind < argc)
		opt.host = argv[optind];
	if (opt.msg < sizeof(struct stream_hdr) || opt.msg > (1u << 24) || !opt.window ||
	    opt.window > 4096 || (uint64_t)opt.msg * opt.window > (1ull << 30) ||
	    (opt.type != Q_RC && opt.op != OP_SEND) || opt.min_pct > 100)
		return usage();
	return opt.host ? client() : server();
}
