/* The FPDU stream of an iWARP connection (RFC 5044 4): messages cut into
 * DDP segments of at most mulpdu bytes, each framed with its length, pad
 * and CRC32c and written with one writev; on receive, bytes gathered
 * from the socket until a whole FPDU is there, however TCP split them. */
#include "transport/iwarp_tcp.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

size_t srn_iw_mulpdu_for(int fd)
{
	int mss = 0;
	socklen_t l = sizeof(mss);

	if (getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &l) || mss < 256)
		mss = 1460;
	/* length field + ULPDU a multiple of 4 (no pad), then the CRC */
	return (size_t)(((mss - IWARP_FPDU_LEN_BYTES - IWARP_FPDU_CRC_LEN) & ~3) -
			IWARP_FPDU_LEN_BYTES);
}

int64_t srn_iw_deadline(int timeout_ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + (timeout_ms > 0 ? timeout_ms : 0);
}

/* Waits until fd is readable/writable or the deadline passes. */
static int wait_fd(int fd, short ev, int64_t deadline)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = ev };
		int64_t left = deadline - srn_iw_deadline(0);
		int n;

		if (left < 0)
			left = 0;
		n = poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n == 0 && left == 0)
			return -ETIMEDOUT;
	}
}

static int writev_all(int fd, struct iovec *iov, int cnt, int64_t deadline)
{
	while (cnt > 0) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)cnt };
		ssize_t n;
		int rc = wait_fd(fd, POLLOUT, deadline);

		if (rc)
			return rc;
		n = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return errno == EPIPE ? -ECONNRESET : -errno;
		}
		while (cnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

int srn_iw_write_all(int fd, const void *buf, size_t n, int64_t deadline)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = n };

	return writev_all(fd, &iov, 1, deadline);
}

/* Up to cap bytes, at least one; 0 or an error. */
static int read_some(int fd, uint8_t *buf, size_t cap, size_t *got, int64_t deadline)
{
	for (;;) {
		ssize_t n;
		int rc = wait_fd(fd, POLLIN, deadline);

		if (rc)
			return rc;
		n = recv(fd, buf, cap, MSG_DONTWAIT);
		if (n > 0) {
			*got = (size_t)n;
			return 0;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
}

int srn_iw_read_all(int fd, void *buf, size_t n, int64_t deadline)
{
	uint8_t *p = buf;

	while (n) {
		size_t got = 0;
		int rc = read_some(fd, p, n, &got, deadline);

		if (rc)
			return rc;
		p += got;
		n -= got;
	}
	return 0;
}

/* One FPDU: length, the segment's headers, the payload pieces, pad, CRC. */
static int send_fpdu(struct srn_iw_conn *c, const struct iwarp_hdr *h, const struct iovec *pl,
		     int npl, size_t len, int64_t deadline)
{
	uint8_t head[IWARP_FPDU_LEN_BYTES + IWARP_UNTAGGED_HDR_LEN + IWARP_READ_REQ_LEN + 64];
	uint8_t trailer[3 + IWARP_FPDU_CRC_LEN] = { 0 };
	struct iovec iov[SRN_IW_SEG_IOV_MAX + 2];
	size_t ulpdu, pad;
	uint32_t crc = 0;
	int n = iwarp_hdr_encode(head + IWARP_FPDU_LEN_BYTES, sizeof(head) - IWARP_FPDU_LEN_BYTES, h);

	if (n < 0)
		return n;
	ulpdu = (size_t)n + len;
	if (ulpdu > 0xffff || npl > SRN_IW_SEG_IOV_MAX)
		return -EMSGSIZE;
	pad = iwarp_fpdu_pad(ulpdu);
	head[0] = (uint8_t)(ulpdu >> 8);
	head[1] = (uint8_t)ulpdu;
	iov[0] = (struct iovec){ head, IWARP_FPDU_LEN_BYTES + (size_t)n };
	if (c->crc) {
		uint32_t st = iwarp_crc32c_update(IWARP_CRC32C_INIT, head, iov[0].iov_len);

		for (int i = 0; i < npl; i++)
			st = iwarp_crc32c_update(st, pl[i].iov_base, pl[i].iov_len);
		crc = ~iwarp_crc32c_update(st, trailer, pad);
	}
	for (int i = 0; i < 4; i++) /* least significant byte first */
		trailer[pad + (size_t)i] = (uint8_t)(crc >> (8 * i));
	if (npl)
		memcpy(iov + 1, pl, (size_t)npl * sizeof(*pl));
	iov[npl + 1] = (struct iovec){ trailer, pad + IWARP_FPDU_CRC_LEN };
	return writev_all(c->fd, iov, npl + 2, deadline);
}

/* The next up to room bytes of the source list, as pieces; advances
 * (*idx, *off) past them.  Returns the piece count, *len their bytes. */
static int take_pieces(const struct iovec *src, int cnt, int *idx, size_t *off, size_t room,
		       struct iovec *out, size_t *len)
{
	int n = 0;

	*len = 0;
	while (*idx < cnt && room && n < SRN_IW_SEG_IOV_MAX) {
		size_t avail = src[*idx].iov_len - *off, k = avail < room ? avail : room;

		if (k) {
			out[n++] = (struct iovec){ (uint8_t *)src[*idx].iov_base + *off, k };
			*len += k;
			room -= k;
			*off += k;
		}
		if (*off == src[*idx].iov_len) {
			(*idx)++;
			*off = 0;
		}
	}
	return n;
}

int srn_iw_send_message_iov(struct srn_iw_conn *c, const struct iwarp_hdr *h,
			    const struct iovec *iov, int iovcnt, int timeout_ms)
{
	int64_t deadline = srn_iw_deadline(timeout_ms);
	bool tagged = iwarp_op_tagged(h->opcode);
	size_t hdr = tagged ? IWARP_TAGGED_HDR_LEN : IWARP_UNTAGGED_HDR_LEN;
	size_t room = c->mulpdu - hdr, total = 0, off = 0, poff = 0;
	struct iwarp_hdr s = *h;
	int idx = 0;

	if (h->opcode >= IWARP_OP_COUNT || iovcnt < 0 || (iovcnt && !iov))
		return -EINVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	if (h->opcode == IWARP_OP_READ_REQ || h->opcode == IWARP_OP_TERMINATE) {
		s.last = true;
		return send_fpdu(c, &s, NULL, 0, 0, deadline);
	}
	if (!tagged && (uint64_t)h->mo + total > UINT32_MAX)
		return -EMSGSIZE; /* MO is 32 bits */
	do { /* a zero-length message is one empty segment */
		struct iovec pl[SRN_IW_SEG_IOV_MAX];
		size_t n;
		int np = take_pieces(iov, iovcnt, &idx, &poff, room, pl, &n), rc;

		s.last = off + n == total;
		if (tagged)
			s.to = h->to + off;
		else
			s.mo = h->mo + (uint32_t)off;
		rc = send_fpdu(c, &s, pl, np, n, deadline);
		if (rc)
			return rc;
		off += n;
	} while (off < total);
	return 0;
}

int srn_iw_send_message(struct srn_iw_conn *c, const struct iwarp_hdr *h,
			const void *payload, size_t len, int timeout_ms)
{
	struct iovec one = { (void *)payload, len };

	if (len && !payload)
		return -EINVAL;
	return srn_iw_send_message_iov(c, h, &one, len ? 1 : 0, timeout_ms);
}

int srn_iw_recv_segment(struct srn_iw_conn *c, struct iwarp_hdr *h,
			struct iwarp_term_code *err, int timeout_ms)
{
	int64_t deadline = srn_iw_deadline(timeout_ms);

	for (;;) {
		const uint8_t *u;
		size_t ul, fl, got = 0;
		int rc = iwarp_fpdu_parse(c->rx + c->rx_start, c->rx_end - c->rx_start, c->crc,
					  0xffff, &u, &ul, &fl);

		if (rc == 0) {
			c->rx_start += fl;
			return iwarp_hdr_decode(u, ul, h, err);
		}
		if ((rc == -EBADMSG || rc == -EPROTO) && err) {
			err->layer = IWARP_LAYER_LLP;
			err->etype = 0; /* MPA */
			err->ecode = rc == -EBADMSG ? IWARP_LLP_EC_CRC : IWARP_LLP_EC_FPDU_START;
		}
		if (rc != -EAGAIN)
			return rc;
		/* keep the partial FPDU at the front, then read behind it */
		if (c->rx_start) {
			memmove(c->rx, c->rx + c->rx_start, c->rx_end - c->rx_start);
			c->rx_end -= c->rx_start;
			c->rx_start = 0;
		}
		rc = read_some(c->fd, c->rx + c->rx_end, SRN_IW_FPDU_MAX - c->rx_end, &got, deadline);
		if (rc)
			return rc;
		c->rx_end += got;
	}
}
