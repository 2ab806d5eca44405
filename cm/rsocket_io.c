/* rsockets data path: the CQ, credits, rsend/rrecv's shared core, and the
 * sleep that blocking calls and rpoll use (see cm/rsocket_priv.h for the
 * protocol). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "cm/rsocket_priv.h"

int rs_post(struct rs *rs, enum rs_msg type, int idx, uint32_t len)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	int err;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(RS_IMM(type, rs->owed));
	if (idx >= 0) {
		sge.addr = (uintptr_t)(rs->sbuf + (size_t)idx * RS_SEG);
		sge.length = len;
		sge.lkey = rs->smr->lkey;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.wr_id = WR_ID(WR_DATA, (uint32_t)idx);
	} else {
		wr.wr_id = WR_ID(WR_CTRL, 0);
	}
	err = ibv_post_send(rs->id->qp, &wr, &bad);
	if (err)
		return err;
	rs->owed = 0;
	rs->sq_free--;
	return 0;
}

static void recv_done(struct rs *rs, const struct ibv_wc *wc)
{
	uint32_t idx = (uint32_t)wc->wr_id, imm, type, give;

	if (wc->status != IBV_WC_SUCCESS || idx >= RS_RQ_DEPTH) {
		rs->qp_err = true;
		return;
	}
	if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
		rs->qp_err = true; /* not our protocol */
		return;
	}
	imm = ntohl(wc->imm_data);
	type = imm >> 24;
	give = imm & 0xffffff;
	/* Credits beyond the window would be a broken peer: clamp. */
	rs->credits = rs->credits + give > rs->peer_window ? rs->peer_window : rs->credits + give;
	if (type == RS_MSG_DATA && wc->byte_len > 0 && wc->byte_len <= RS_SEG &&
	    rs->ready_count < RS_RQ_DEPTH) {
		struct rs_ready *r = &rs->ready[(rs->ready_head + rs->ready_count) % RS_RQ_DEPTH];

		r->idx = idx;
		r->len = wc->byte_len;
		r->off = 0;
		rs->ready_count++;
		return;
	}
	if (type == RS_MSG_IOMAP) {
		rs_iomap_in(rs, rs->rbuf + (size_t)idx * RS_SEG, wc->byte_len);
		if (rs_repost(rs, idx) == 0)
			rs->owed++; /* it took a data credit */
		return;
	}
	if (type == RS_MSG_FIN)
		rs->fin_rcvd = true;
	else if (type != RS_MSG_CREDIT)
		rs->qp_err = true;
	rs_repost(rs, idx);
}

static void send_done(struct rs *rs, const struct ibv_wc *wc)
{
	uint32_t kind = (uint32_t)(wc->wr_id >> 32), idx = (uint32_t)wc->wr_id;

	if (rs->sq_free < RS_SQ_DEPTH)
		rs->sq_free++;
	if (kind == WR_DATA && idx < RS_WINDOW && rs->nsfree < RS_WINDOW)
		rs->sfree[rs->nsfree++] = idx;
	if (wc->status != IBV_WC_SUCCESS)
		rs->qp_err = true;
}

static void poll_cq(struct rs *rs)
{
	struct ibv_wc wc[16];
	int n, i, rounds;

	for (rounds = 0; rounds < 16; rounds++) {
		n = ibv_poll_cq(rs->cq, 16, wc);
		if (n <= 0)
			break;
		for (i = 0; i < n; i++) {
			/* By wr_id, not opcode: a flushed completion's opcode
			 * is undefined (receive wr_ids are bare indexes). */
			if ((wc[i].wr_id >> 32) == 0)
				recv_done(rs, &wc[i]);
			else
				send_done(rs, &wc[i]);
		}
		if (n < 16)
			break;
	}
}

/* Give credits back on a bare message once half the window is owed (data
 * messages carry them for free before that). */
static void flush_credits(struct rs *rs)
{
	if (rs->owed >= RS_WINDOW / 2 && rs->sq_free > 0 && !rs->qp_err && !rs->peer_gone)
		rs_post(rs, RS_MSG_CREDIT, -1, 0);
}

void rs_progress(struct rs *rs)
{
	/* cm events first: completions that preceded a DISCONNECTED are in
	 * the CQ by then, so the FIN is seen before the disconnect counts. */
	rs_cm_progress(rs);
	if (!rs->qp_ready)
		return;
	poll_cq(rs);
	/* After shutdown(SHUT_RD) data is dropped as it comes, so the peer's
	 * window keeps moving instead of filling up for nobody. */
	while (rs->rd_shut && rs->ready_count) {
		uint32_t idx = rs->ready[rs->ready_head].idx;

		rs->ready_head = (rs->ready_head + 1) % RS_RQ_DEPTH;
		rs->ready_count--;
		if (rs_repost(rs, idx) == 0)
			rs->owed++;
	}
	flush_credits(rs);
}

void rs_send_fin(struct rs *rs)
{
	rs_progress(rs);
	if (rs->fin_sent || !rs->qp_ready || rs->qp_err || rs->peer_gone ||
	    (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING))
		return;
	if (rs->sq_free == 0)
		rs_drain_sends(rs, 1000);
	if (rs->sq_free > 0 && !rs_post(rs, RS_MSG_FIN, -1, 0))
		rs->fin_sent = true;
}

void rs_drain_sends(struct rs *rs, int ms)
{
	uint64_t end = rs_now_ms() + (uint64_t)ms;

	for (;;) {
		rs_progress(rs);
		if (!rs->qp_ready || rs->qp_err || rs->peer_gone || rs->sq_free >= RS_SQ_DEPTH)
			return;
		if (rs_now_ms() >= end)
			return;
		rs_wait(rs, 0, 10); /* for completions, not for POLLOUT */
	}
}

/* ---- readiness ---------------------------------------------------------- */

static bool can_send(const struct rs *rs)
{
	return rs->state == RS_CONNECTED && rs->credits > 0 && rs->nsfree > 0 &&
	       rs->sq_free > 0;
}

static bool recv_eof(const struct rs *rs)
{
	return rs->rd_shut || rs->fin_rcvd || rs->peer_gone || rs->qp_err;
}

short rs_poll_events(struct rs *rs, short events)
{
	short rev = 0;

	rs_progress(rs);
	switch (rs->state) {
	case RS_LISTENING:
		if (rs->acceptq)
			rev |= POLLIN;
		break;
	case RS_CONNECTING:
		break;
	case RS_FAILED:
		rev |= POLLERR | POLLHUP | POLLOUT | POLLIN;
		break;
	case RS_ACCEPTING:
	case RS_CONNECTED:
		if (rs->ready_count || recv_eof(rs))
			rev |= POLLIN;
		if (can_send(rs) || rs->wr_shut)
			rev |= POLLOUT;
		/* As TCP: hang-up once nothing is left to read and neither
		 * direction can carry more (the peer's FIN and ours, or the
		 * connection is gone); data still queued is POLLIN first. */
		if (!rs->ready_count &&
		    (rs->peer_gone || rs->qp_err || (rs->fin_rcvd && rs->fin_sent)))
			rev |= POLLHUP;
		if (rs->err)
			rev |= POLLERR;
		if (rs->peer_gone || rs->qp_err)
			rev |= POLLOUT; /* a send fails at once: not a wait */
		break;
	case RS_NEW:
		rev |= POLLOUT | POLLHUP; /* as an unconnected TCP socket */
		break;
	}
	return rev & (events | POLLERR | POLLHUP | POLLNVAL);
}

int rs_arm(struct rs *rs, short events, struct pollfd *out)
{
	int n = 0;

	if (rs->cq && !rs->armed) {
		ibv_req_notify_cq(rs->cq, 0);
		rs->armed = true;
	}
	/* A completion between the last poll and the arming raised no event:
	 * look once more. */
	if (rs_poll_events(rs, events))
		return -1;
	out[n].fd = rs->ch->fd;
	out[n].events = POLLIN;
	out[n++].revents = 0;
	if (rs->cch) {
		out[n].fd = rs->cch->fd;
		out[n].events = POLLIN;
		out[n++].revents = 0;
	}
	return n;
}

void rs_disarm(struct rs *rs)
{
	struct ibv_cq *cq;
	void *ctx;

	if (!rs->cch)
		return;
	while (!ibv_get_cq_event(rs->cch, &cq, &ctx)) {
		ibv_ack_cq_events(cq, 1);
		rs->armed = false;
	}
}

void rs_wait(struct rs *rs, short events, int timeout_ms)
{
	struct pollfd pfd[2];
	int n = rs_arm(rs, events, pfd);

	if (n < 0)
		return;
	pthread_mutex_unlock(&rs->lock);
	poll(pfd, (nfds_t)n, timeout_ms);
	pthread_mutex_lock(&rs->lock);
	rs_disarm(rs);
}

/* ---- send and receive ----------------------------------------------------- */

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t t = 0;

	for (int i = 0; i < iovcnt; i++)
		t += iov[i].iov_len;
	return t;
}

/* Copy n bytes between buf and the iovec's bytes from stream offset pos
 * on: into the iovec (to_iov) or out of it. */
static void iov_copy(const struct iovec *iov, int iovcnt, size_t pos, uint8_t *buf, size_t n,
		     bool to_iov)
{
	for (int i = 0; i < iovcnt && n; i++) {
		size_t l = iov[i].iov_len, c;
		uint8_t *at;

		if (pos >= l) {
			pos -= l;
			continue;
		}
		at = (uint8_t *)iov[i].iov_base + pos;
		c = l - pos < n ? l - pos : n;
		if (to_iov)
			memcpy(at, buf, c);
		else
			memcpy(buf, at, c);
		buf += c;
		n -= c;
		pos = 0;
	}
}

static int check_iov(const struct iovec *iov, int iovcnt)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov))
		return EINVAL;
	return 0;
}

/* The error a data call on rs gets from its connection state, as a
 * socket's (ENOTCONN before a connection; a failed one's pending error,
 * reported once), or 0. */
static int state_error(struct rs *rs)
{
	int err;

	if (rs->state == RS_NEW || rs->state == RS_LISTENING)
		return ENOTCONN;
	if (rs->state != RS_FAILED)
		return 0;
	err = rs->err ? rs->err : ECONNRESET;
	rs->err = 0;
	return err;
}

/* What rs_send_iov and rs_recv_iov check first: the rsocket behind fd,
 * referenced and locked, with *total the bytes iov holds; NULL + errno
 * (EINVAL for a bad iovec, EOPNOTSUPP for a flag outside allowed). */
static struct rs *io_begin(int fd, const struct iovec *iov, int iovcnt, int flags, int allowed,
			   size_t *total)
{
	struct rs *rs;

	if (check_iov(iov, iovcnt)) {
		errno = EINVAL;
		return NULL;
	}
	if (flags & ~allowed) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	rs = rs_get(fd);
	if (!rs)
		return NULL;
	*total = iov_total(iov, iovcnt);
	pthread_mutex_lock(&rs->lock);
	return rs;
}

ssize_t rs_send_iov(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	struct rs *rs;
	size_t total, sent = 0;
	bool dontwait;
	int err = 0;

	rs = io_begin(fd, iov, iovcnt, flags,
		      MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE | MSG_EOR | MSG_WAITALL, &total);
	if (!rs)
		return -1;
	dontwait = rs->nonblock || (flags & MSG_DONTWAIT);
	while (sent < total || total == 0) {
		rs_progress(rs);
		if (rs->wr_shut || rs->fin_sent) {
			err = EPIPE;
			break;
		}
		err = state_error(rs);
		if (err)
			break;
		if (rs->peer_gone || rs->qp_err) {
			err = ECONNRESET;
			break;
		}
		if (total == 0)
			break; /* connected: a zero-length send sends nothing */
		if (!can_send(rs)) {
			if (dontwait) {
				err = EAGAIN;
				break;
			}
			rs_wait(rs, POLLOUT, 100);
			continue;
		}
		{
			size_t n = total - sent;
			uint32_t idx = rs->sfree[rs->nsfree - 1];

			if (n > rs->peer_seg)
				n = rs->peer_seg;
			iov_copy(iov, iovcnt, sent, rs->sbuf + (size_t)idx * RS_SEG, n, false);
			err = rs_post(rs, RS_MSG_DATA, (int)idx, (uint32_t)n);
			if (err) {
				rs->qp_err = true;
				err = ECONNRESET;
				break;
			}
			rs->nsfree--;
			rs->credits--;
			sent += n;
		}
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	if (err == EAGAIN)
		sched_yield(); /* see rs_recv_iov */
	if (sent)
		return (ssize_t)sent;
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/* Copy up to want bytes from the ready FIFO (consuming unless peek). */
static size_t take_ready(struct rs *rs, const struct iovec *iov, int iovcnt, size_t pos,
			 size_t want, bool peek)
{
	size_t got = 0;
	uint32_t i = 0;

	while (got < want && i < rs->ready_count) {
		struct rs_ready *r = &rs->ready[(rs->ready_head + i) % RS_RQ_DEPTH];
		uint32_t off = r->off;
		size_t n = r->len - off;

		if (n > want - got)
			n = want - got;
		iov_copy(iov, iovcnt, pos + got, rs->rbuf + (size_t)r->idx * RS_SEG + off, n, true);
		got += n;
		if (peek) {
			i++;
			continue;
		}
		r->off += (uint32_t)n;
		if (r->off == r->len) {
			uint32_t idx = r->idx;

			rs->ready_head = (rs->ready_head + 1) % RS_RQ_DEPTH;
			rs->ready_count--;
			if (rs_repost(rs, idx) == 0)
				rs->owed++;
		}
	}
	return got;
}

ssize_t rs_recv_iov(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	struct rs *rs;
	size_t total, got = 0;
	bool dontwait, peek = flags & MSG_PEEK;
	int err = 0;

	rs = io_begin(fd, iov, iovcnt, flags,
		      MSG_DONTWAIT | MSG_PEEK | MSG_WAITALL | MSG_NOSIGNAL | MSG_TRUNC, &total);
	if (!rs)
		return -1;
	dontwait = rs->nonblock || (flags & MSG_DONTWAIT);
	for (;;) {
		rs_progress(rs);
		err = state_error(rs);
		if (err)
			break;
		if (rs->rd_shut || total == 0)
			break;
		if (rs->ready_count) {
			got += take_ready(rs, iov, iovcnt, got, total - got, peek);
			flush_credits(rs);
			if (got == total || peek || !(flags & MSG_WAITALL) || dontwait)
				break;
			continue;
		}
		if (recv_eof(rs)) {
			/* Data first, then EOF; a connection that broke without
			 * the peer's FIN is a reset. */
			if (!rs->fin_rcvd && !rs->rd_shut && !got)
				err = ECONNRESET;
			break;
		}
		if (got && !(flags & MSG_WAITALL))
			break;
		if (dontwait) {
			if (!got)
				err = EAGAIN;
			break;
		}
		rs_wait(rs, POLLIN, 100);
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	/* Busy-polling applications (rstream's default) call again at once:
	 * on a small machine they would starve the NIC's engine threads,
	 * which they are waiting for. */
	if (err == EAGAIN)
		sched_yield();
	if (got)
		return (ssize_t)got;
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}
