/* The MPA request/reply exchange on a connected TCP socket (RFC 5044 7.1,
 * RFC 6581), with siw's choices: revision 2 with IRD/ORD, CRC if either
 * side asks, markers refused with a reject, the reply's IRD/ORD fitted to
 * the request's (a side never has more Read Requests outstanding than the
 * other serves at once). */
#include "transport/iwarp_tcp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int srn_iw_conn_init(struct srn_iw_conn *c, int fd, size_t mulpdu)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->rev = 2;
	c->mulpdu = mulpdu > 0xffff ? 0xffff : mulpdu;
	/* room for the largest header and a byte of payload */
	if (c->mulpdu < IWARP_UNTAGGED_HDR_LEN + IWARP_READ_REQ_LEN)
		c->mulpdu = IWARP_UNTAGGED_HDR_LEN + IWARP_READ_REQ_LEN;
	c->rx = malloc(SRN_IW_FPDU_MAX);
	return c->rx ? 0 : -ENOMEM;
}

void srn_iw_conn_fini(struct srn_iw_conn *c)
{
	free(c->rx);
	c->rx = NULL;
}

static uint16_t min16(uint16_t a, uint16_t b)
{
	return a < b ? a : b;
}

static int send_rr(struct srn_iw_conn *c, const struct iwarp_mpa_rr *rr, int64_t deadline)
{
	uint8_t buf[IWARP_MPA_RR_HDR_LEN + IWARP_MPA_PD_MAX];
	int n = iwarp_mpa_rr_encode(buf, sizeof(buf), rr);

	return n < 0 ? n : srn_iw_write_all(c->fd, buf, (size_t)n, deadline);
}

/* Reads exactly one MPA frame (header, then its private data), so bytes
 * after it (the first FPDUs) stay in the socket for the FPDU reader. */
static int read_rr(struct srn_iw_conn *c, struct iwarp_mpa_rr *rr, uint8_t *buf,
		   int64_t deadline)
{
	size_t fl = 0;
	int rc = srn_iw_read_all(c->fd, buf, IWARP_MPA_RR_HDR_LEN, deadline);

	if (rc)
		return rc;
	rc = iwarp_mpa_rr_decode(buf, IWARP_MPA_RR_HDR_LEN, rr, &fl);
	if (rc == -EAGAIN) {
		size_t pd = (size_t)(buf[18] << 8 | buf[19]); /* checked <= 512 by decode */

		rc = srn_iw_read_all(c->fd, buf + IWARP_MPA_RR_HDR_LEN, pd, deadline);
		if (rc)
			return rc;
		rc = iwarp_mpa_rr_decode(buf, IWARP_MPA_RR_HDR_LEN + pd, rr, &fl);
	}
	return rc == -EMSGSIZE ? -EPROTO : rc;
}

static void fill_rr(struct iwarp_mpa_rr *rr, const struct srn_iw_mpa_params *p, bool reply,
		    uint8_t rev)
{
	memset(rr, 0, sizeof(*rr));
	rr->reply = reply;
	rr->rev = rev;
	rr->v2 = rev == 2;
	rr->flags = p->want_crc ? IWARP_MPA_F_CRC : 0;
	rr->ird = min16(p->ird, IWARP_MPA_IRD_ORD_MAX);
	rr->ord = min16(p->ord, IWARP_MPA_IRD_ORD_MAX);
	rr->pdata = p->pdata;
	rr->pdata_len = p->pdata_len;
}

int srn_iw_mpa_initiate(struct srn_iw_conn *c, const struct srn_iw_mpa_params *p,
			uint8_t *peer_pd, uint16_t *peer_pd_len, int timeout_ms)
{
	int64_t deadline = srn_iw_deadline(timeout_ms);
	uint8_t buf[IWARP_MPA_RR_HDR_LEN + IWARP_MPA_PD_MAX];
	struct iwarp_mpa_rr req, rep;
	int rc;

	*peer_pd_len = 0;
	fill_rr(&req, p, false, 2);
	rc = send_rr(c, &req, deadline);
	if (rc)
		return rc;
	rc = read_rr(c, &rep, buf, deadline);
	if (rc)
		return rc;
	if (!rep.reply)
		return -EPROTO;
	if (rep.pdata_len) {
		memcpy(peer_pd, rep.pdata, rep.pdata_len);
		*peer_pd_len = rep.pdata_len;
	}
	if (rep.flags & IWARP_MPA_F_REJECT)
		return -ECONNREFUSED;
	if (rep.flags & IWARP_MPA_F_MARKERS)
		return -EOPNOTSUPP;
	c->rev = rep.rev;
	c->crc = p->want_crc || (rep.flags & IWARP_MPA_F_CRC);
	c->ird = req.ird;
	c->ord = req.ord;
	if (rep.v2) /* our reads are bounded by what the peer serves */
		c->ord = min16(req.ord, rep.ird);
	return 0;
}

int srn_iw_mpa_read_request(struct srn_iw_conn *c, struct iwarp_mpa_rr *req, uint8_t *buf,
			    int timeout_ms)
{
	int64_t deadline = srn_iw_deadline(timeout_ms);
	int rc = read_rr(c, req, buf, deadline);

	if (rc)
		return rc;
	if (req->reply)
		return -EPROTO;
	if (iwarp_mpa_req_acceptable(req) != 0) {
		struct iwarp_mpa_rr rej = { .reply = true, .rev = req->rev,
					    .flags = IWARP_MPA_F_REJECT };

		(void)send_rr(c, &rej, deadline);
		return -EOPNOTSUPP;
	}
	return 0;
}

int srn_iw_mpa_respond(struct srn_iw_conn *c, const struct iwarp_mpa_rr *req,
		       const struct srn_iw_mpa_params *p, bool reject, int timeout_ms)
{
	int64_t deadline = srn_iw_deadline(timeout_ms);
	struct iwarp_mpa_rr rep;
	int rc;

	/* answer in the request's revision; v1 has no IRD/ORD to fit */
	fill_rr(&rep, p, true, req->rev == 1 ? 1 : 2);
	if (reject) {
		rep.flags |= IWARP_MPA_F_REJECT;
	} else {
		/* CRC MUST be used if the peer asks (RFC 5044 7.1) */
		if (req->flags & IWARP_MPA_F_CRC)
			rep.flags |= IWARP_MPA_F_CRC;
		if (req->v2) /* read no more than the peer serves */
			rep.ord = min16(rep.ord, req->ird);
	}
	rc = send_rr(c, &rep, deadline);
	if (rc || reject)
		return rc;
	c->rev = rep.rev;
	c->crc = (rep.flags & IWARP_MPA_F_CRC) != 0;
	c->ird = rep.ird;
	c->ord = rep.ord;
	return 0;
}
