/* rsockets remote IO mapping: riomap exposes a buffer of ours at an offset
 * (registered for remote write, announced to the peer in-band with an
 * RS_MSG_IOMAP message that takes a data credit); riowrite copies into a
 * send buffer and RDMA-WRITEs it to the peer's mapping, so the data lands
 * without the peer calling in, ordered before anything sent after it
 * (RC ordering).  PROT_NONE (local-only) mappings are accepted and used
 * for nothing: every riowrite copies anyway. */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "cm/rsocket_priv.h"
#include "verbs/export.h"

void rs_iomap_in(struct rs *rs, const void *msg, uint32_t len)
{
	struct rs_iomap_msg m;
	struct rs_rmap *free_slot = NULL;
	uint64_t off, mlen;

	if (len < sizeof(m))
		return; /* malformed: ignored */
	memcpy(&m, msg, sizeof(m));
	off = be64toh(m.offset);
	mlen = be64toh(m.len);
	for (int i = 0; i < RS_MAX_IOMAP; i++) {
		struct rs_rmap *r = &rs->rmap[i];

		if (r->len && r->offset == off) {
			/* remapped at the same offset, or unmapped */
			r->len = mlen;
			r->addr = be64toh(m.addr);
			r->rkey = ntohl(m.rkey);
			return;
		}
		if (!r->len && !free_slot)
			free_slot = r;
	}
	if (mlen && free_slot) {
		free_slot->offset = off;
		free_slot->addr = be64toh(m.addr);
		free_slot->len = mlen;
		free_slot->rkey = ntohl(m.rkey);
	}
}

void rs_iomap_free(struct rs *rs)
{
	for (int i = 0; i < RS_MAX_IOMAP; i++) {
		if (rs->lmap[i].mr)
			ibv_dereg_mr(rs->lmap[i].mr);
		memset(&rs->lmap[i], 0, sizeof(rs->lmap[i]));
	}
	memset(rs->rmap, 0, sizeof(rs->rmap));
}

static bool connected(const struct rs *rs)
{
	return (rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING) && rs->qp_ready &&
	       !rs->qp_err && !rs->peer_gone;
}

/* Announce a mapping (len 0: its removal).  Waits (bounded) for a data
 * credit and a send buffer, whatever O_NONBLOCK says: riomap has no
 * EAGAIN in its contract.  0 or errno. */
static int announce(struct rs *rs, uint64_t offset, uint64_t addr, uint64_t len, uint32_t rkey)
{
	struct rs_iomap_msg m = {
		.offset = htobe64(offset), .addr = htobe64(addr), .len = htobe64(len),
		.rkey = htonl(rkey),
	};
	uint64_t end = rs_now_ms() + 10000;
	uint32_t idx;
	int err;

	for (;;) {
		rs_progress(rs);
		if (!connected(rs))
			return ENOTCONN;
		if (rs->state == RS_CONNECTED && rs->credits && rs->nsfree && rs->sq_free)
			break;
		if (rs_now_ms() > end)
			return ETIMEDOUT;
		rs_wait(rs, POLLOUT, 100);
	}
	idx = rs->sfree[rs->nsfree - 1];
	memcpy(rs->sbuf + (size_t)idx * RS_SEG, &m, sizeof(m));
	err = rs_post(rs, RS_MSG_IOMAP, (int)idx, sizeof(m));
	if (err)
		return err;
	rs->nsfree--;
	rs->credits--;
	return 0;
}

SRN_EXPORT off_t riomap(int s, void *buf, size_t len, int prot, int flags, off_t offset)
{
	struct rs *rs = rs_get(s);
	struct rs_lmap *slot = NULL;
	uint64_t off;
	int err = 0;

	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->lock);
	if (!buf || !len || flags || (prot != PROT_NONE && prot != PROT_WRITE) ||
	    (offset < 0 && offset != -1)) {
		err = EINVAL;
		goto out;
	}
	if (!connected(rs)) {
		err = ENOTCONN;
		goto out;
	}
	off = (uint64_t)offset;
	if (offset == -1) {
		/* Pick one: past every mapping we have. */
		off = 0;
		for (int i = 0; i < RS_MAX_IOMAP; i++)
			if (rs->lmap[i].len && rs->lmap[i].offset + rs->lmap[i].len > off)
				off = rs->lmap[i].offset + rs->lmap[i].len;
	}
	for (int i = 0; i < RS_MAX_IOMAP; i++) {
		struct rs_lmap *l = &rs->lmap[i];

		if (l->len && off < l->offset + l->len && l->offset < off + len) {
			err = EADDRINUSE; /* overlaps a mapping */
			goto out;
		}
		if (!l->len && !slot)
			slot = l;
	}
	if (!slot) {
		err = ENOMEM;
		goto out;
	}
	slot->mr = ibv_reg_mr(rs->pd, buf, len,
			      IBV_ACCESS_LOCAL_WRITE |
			      (prot == PROT_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0));
	if (!slot->mr) {
		err = errno ? errno : ENOMEM;
		goto out;
	}
	slot->buf = buf;
	slot->len = len;
	slot->offset = off;
	slot->remote = prot == PROT_WRITE;
	if (slot->remote) {
		err = announce(rs, off, (uintptr_t)buf, len, slot->mr->rkey);
		if (err) {
			ibv_dereg_mr(slot->mr);
			memset(slot, 0, sizeof(*slot));
		}
	}
out:
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	if (err) {
		errno = err;
		return -1;
	}
	return (off_t)off;
}

SRN_EXPORT int riounmap(int s, void *buf, size_t len)
{
	struct rs *rs = rs_get(s);
	int err = EINVAL;

	if (!rs)
		return -1;
	pthread_mutex_lock(&rs->lock);
	for (int i = 0; i < RS_MAX_IOMAP; i++) {
		struct rs_lmap *l = &rs->lmap[i];

		if (!l->len || l->buf != buf || l->len != len)
			continue;
		/* Tell the peer first, so it stops writing there; a write
		 * already in flight hits a deregistered region and breaks the
		 * connection, as on rdma-core. */
		if (l->remote && connected(rs))
			announce(rs, l->offset, 0, 0, 0);
		ibv_dereg_mr(l->mr);
		memset(l, 0, sizeof(*l));
		err = 0;
		break;
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/* Returns size_t, so the error is (size_t)-1 like rdma-core's. */
SRN_EXPORT size_t riowrite(int s, const void *buf, size_t count, off_t offset, int flags)
{
	struct rs *rs = rs_get(s);
	size_t done = 0;
	bool dontwait;
	int err = 0;

	if (!rs)
		return (size_t)-1;
	pthread_mutex_lock(&rs->lock);
	dontwait = rs->nonblock || (flags & MSG_DONTWAIT);
	if ((!buf && count) || offset < 0 || (flags & ~(MSG_DONTWAIT | MSG_WAITALL))) {
		err = EINVAL;
		goto out;
	}
	while (done < count) {
		const struct rs_rmap *m = NULL;
		uint64_t at = (uint64_t)offset + done;
		struct ibv_sge sge;
		struct ibv_send_wr wr, *bad;
		uint32_t idx;
		size_t n;

		rs_progress(rs);
		if (rs->wr_shut || rs->fin_sent) {
			err = EPIPE;
			break;
		}
		if (!connected(rs)) {
			err = rs->state == RS_NEW || rs->state == RS_LISTENING ? ENOTCONN : ECONNRESET;
			break;
		}
		for (int i = 0; i < RS_MAX_IOMAP; i++)
			if (rs->rmap[i].len && at >= rs->rmap[i].offset &&
			    at - rs->rmap[i].offset < rs->rmap[i].len)
				m = &rs->rmap[i];
		if (!m) {
			err = EINVAL; /* nothing of the peer's is mapped there */
			break;
		}
		if (rs->state != RS_CONNECTED || !rs->nsfree || !rs->sq_free) {
			if (dontwait) {
				err = EAGAIN;
				break;
			}
			rs_wait(rs, POLLOUT, 100);
			continue;
		}
		n = count - done;
		if (n > RS_SEG)
			n = RS_SEG;
		if (n > m->len - (at - m->offset))
			n = m->len - (at - m->offset);
		idx = rs->sfree[rs->nsfree - 1];
		memcpy(rs->sbuf + (size_t)idx * RS_SEG, (const uint8_t *)buf + done, n);
		sge.addr = (uintptr_t)(rs->sbuf + (size_t)idx * RS_SEG);
		sge.length = (uint32_t)n;
		sge.lkey = rs->smr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = WR_ID(WR_DATA, idx);
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.wr.rdma.remote_addr = m->addr + (at - m->offset);
		wr.wr.rdma.rkey = m->rkey;
		if (ibv_post_send(rs->id->qp, &wr, &bad)) {
			rs->qp_err = true;
			err = ECONNRESET;
			break;
		}
		rs->nsfree--;
		rs->sq_free--;
		done += n;
	}
out:
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	if (done)
		return done;
	if (err == EAGAIN)
		sched_yield();
	errno = err;
	return err ? (size_t)-1 : 0;
}
