/* XRC domains (ibv_open_xrcd / ibv_close_xrcd), ibv_open_qp for a target
 * QP, ibv_get_srq_num, and the lookup an XRC target QP makes for the SRQ
 * an incoming request names (docs/xrc.md).
 *
 * A domain is an id.  A domain opened with an fd is the inode's: every
 * process of the host that opens the same inode (on the same device) gets
 * the same id.  The host-wide record of it is a small file in /dev/shm,
 * named after the device and the inode, holding the id; each open domain
 * holds a shared flock on it, so "the domain exists" is "someone holds
 * that lock", and a process that dies lets go of it with no clean-up.
 * Opening and closing are serialised by an exclusive flock on a lock file
 * of the device. */
#include "verbs/datapath.h"
#include "verbs/export.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t new_domain_id(void)
{
	static atomic_uint_fast64_t fallback;
	uint64_t id = 0;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id) || !id)
		id = ((uint64_t)getpid() << 32) ^ (atomic_fetch_add(&fallback, 1) + 1);
	return id;
}

/* Does anyone hold the record open at fd?  (Our own shared lock on another
 * open of it counts: flocks belong to open file descriptions.) */
static bool record_held(int fd)
{
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		flock(fd, LOCK_UN);
		return false;
	}
	return true;
}

/* The inode's domain: joined, or created.  Under the device's lock.
 * 0 or errno; on success x->id, hold_fd and path are set. */
static int domain_of_inode(struct srn_xrcd *x, const char *dev, const struct stat *st,
			   int oflags)
{
	uint64_t id = 0;
	bool exists;
	int fd;

	snprintf(x->path, sizeof(x->path), "/dev/shm/softrnic-%s-xrcd-%llx-%llx", dev,
		 (unsigned long long)st->st_dev, (unsigned long long)st->st_ino);
	fd = open(x->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	exists = record_held(fd) && pread(fd, &id, sizeof(id), 0) == (ssize_t)sizeof(id) && id;
	if (exists && (oflags & O_CREAT) && (oflags & O_EXCL)) {
		close(fd);
		return EEXIST;
	}
	if (!exists && !(oflags & O_CREAT)) {
		close(fd);
		return ENOENT;
	}
	if (!exists) {
		id = new_domain_id();
		if (pwrite(fd, &id, sizeof(id), 0) != (ssize_t)sizeof(id)) {
			close(fd);
			return EIO;
		}
	}
	if (flock(fd, LOCK_SH) != 0) {
		int err = errno;

		close(fd);
		return err;
	}
	x->id = id;
	x->hold_fd = fd;
	return 0;
}

/* The device's lock for opening and closing domains: an fd, or -1. */
static int dev_lock(const char *dev)
{
	char path[96];
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/softrnic-%s-xrcd.lock", dev);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static struct ibv_xrcd *srn_open_xrcd(struct ibv_context *context,
				      struct ibv_xrcd_init_attr *a)
{
	const char *dev = srn_ctx(context)->dev ? srn_ctx(context)->dev->ibdev.name : "srn";
	struct srn_xrcd *x;
	struct stat st;
	int err = 0, lock;

	if (srn_ctx(context)->dev && srn_ctx(context)->dev->iwarp) {
		errno = EOPNOTSUPP; /* iWARP has RC only, as siw */
		return NULL;
	}
	if (!a || (a->comp_mask & ~(uint32_t)(IBV_XRCD_INIT_ATTR_RESERVED - 1))) {
		errno = a ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	if (!(a->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
	    !(a->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) ||
	    (a->oflags & ~(O_CREAT | O_EXCL)) || (a->fd == -1 && !(a->oflags & O_CREAT))) {
		errno = EINVAL;
		return NULL;
	}
	if (a->fd != -1 && fstat(a->fd, &st) != 0) {
		errno = EBADF;
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	x->ibv.context = context;
	x->hold_fd = -1;
	atomic_init(&x->users, 0);
	if (a->fd == -1) {
		x->id = new_domain_id();
	} else {
		lock = dev_lock(dev);
		err = lock < 0 ? errno : domain_of_inode(x, dev, &st, a->oflags);
		if (lock >= 0)
			close(lock);
	}
	if (err) {
		free(x);
		errno = err;
		return NULL;
	}
	atomic_fetch_add(&srn_ctx(context)->num_objects, 1);
	return &x->ibv;
}

/* EBUSY while an SRQ or QP is in it (as the kernel).  The last closer of
 * an inode's domain removes its record. */
static int srn_close_xrcd(struct ibv_xrcd *ib)
{
	struct srn_xrcd *x;
	const char *dev;
	int lock;

	if (!ib)
		return EINVAL;
	x = srn_xrcd(ib);
	if (atomic_load(&x->users))
		return EBUSY;
	if (x->hold_fd >= 0) {
		dev = srn_ctx(ib->context)->dev ? srn_ctx(ib->context)->dev->ibdev.name : "srn";
		lock = dev_lock(dev);
		flock(x->hold_fd, LOCK_UN);
		if (lock >= 0 && !record_held(x->hold_fd))
			unlink(x->path);
		close(x->hold_fd);
		if (lock >= 0)
			close(lock);
	}
	atomic_fetch_sub(&srn_ctx(ib->context)->num_objects, 1);
	free(x);
	return 0;
}

/* ---- the SRQs of a domain --------------------------------------------- */

struct srn_srq *srn_xrc_srq_get(struct srn_qp *tgt, uint32_t srqn)
{
	struct srn_context *ctx = tgt->ctx;
	struct srn_srq *found = NULL;

	if (!tgt->xrcd)
		return NULL;
	pthread_mutex_lock(&ctx->notify_lock);
	for (struct srn_srq *s = ctx->srqs; s; s = s->next)
		if (s->xrcd && s->srq_num == srqn) {
			if (s->xrcd->id == tgt->xrcd->id) {
				atomic_fetch_add(&s->xrc_busy, 1);
				found = s;
			}
			break;
		}
	pthread_mutex_unlock(&ctx->notify_lock);
	return found;
}

void srn_xrc_srq_put(struct srn_srq *srq)
{
	if (srq)
		atomic_fetch_sub(&srq->xrc_busy, 1);
}

void srn_xrc_srq_quiesce(struct srn_srq *srq)
{
	/* out of ctx->srqs already: no new holder; the ones there finish
	 * one packet each */
	for (int i = 0; atomic_load(&srq->xrc_busy) && i < 1000000; i++)
		sched_yield();
}

static int srn_get_srq_num(struct ibv_srq *ib, uint32_t *num)
{
	struct srn_srq *srq = srn_srq(ib);

	if (!srq->xrcd)
		return EOPNOTSUPP; /* only XRC SRQs have a number */
	*num = srq->srq_num;
	return 0;
}

/* ---- ibv_open_qp -------------------------------------------------------- */

/* Another handle on an XRC target QP of this context, in the same domain
 * (the handle is the QP itself: ibv_destroy_qp drops handles first). */
static struct ibv_qp *srn_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *a)
{
	const uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			      IBV_QP_OPEN_ATTR_TYPE;
	struct srn_qp *qp;

	if (!a || (a->comp_mask & need) != need || !a->xrcd ||
	    a->qp_type != IBV_QPT_XRC_RECV || a->xrcd->context != context) {
		errno = EINVAL;
		return NULL;
	}
	qp = srn_qp_lookup(srn_ctx(context), a->qp_num);
	if (!qp || !qp->xrcd || qp->xrcd->id != srn_xrcd(a->xrcd)->id) {
		errno = ENOENT;
		return NULL;
	}
	atomic_fetch_add(&qp->xrc_opens, 1);
	return &qp->ex.qp_base;
}

void srn_ops_init_xrc(struct verbs_context *vctx)
{
	vctx->open_xrcd = srn_open_xrcd;
	vctx->close_xrcd = srn_close_xrcd;
	vctx->get_srq_num = srn_get_srq_num;
	vctx->open_qp = srn_open_qp;
}
