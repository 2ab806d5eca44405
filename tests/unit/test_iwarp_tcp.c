/* iWARP over a real TCP connection on 127.0.0.1 (transport/iwarp_tcp.h):
 * the MPA exchange (private data both ways, CRC and IRD/ORD negotiation,
 * a reject with its reason, a request for markers refused), then a
 * 100 kB RDMA Write cut into FPDUs and placed by TO, a segmented Send
 * placed by MO, a Read Request, a Terminate back; the same stream written
 * one byte at a time; and a hostile peer: a bad CRC, garbage, a close in
 * mid-FPDU, silence (timeout).  The active side runs on a thread of its
 * own, joined before each scenario ends. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/t_util.h"
#include "transport/iwarp_tcp.h"

#define TMO 5000
#define WRITE_LEN 100000
#define SEND_LEN 3000

static int listen_fd;
static struct sockaddr_in listen_addr;

static void listen_setup(void)
{
	socklen_t sl = sizeof(listen_addr);

	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(listen_fd >= 0, "socket");
	memset(&listen_addr, 0, sizeof(listen_addr));
	listen_addr.sin_family = AF_INET;
	listen_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_ASSERT(bind(listen_fd, (struct sockaddr *)&listen_addr, sizeof(listen_addr)) == 0, "bind");
	T_ASSERT(listen(listen_fd, 4) == 0, "listen");
	T_ASSERT(getsockname(listen_fd, (struct sockaddr *)&listen_addr, &sl) == 0, "getsockname");
}

static int dial(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0 || connect(fd, (struct sockaddr *)&listen_addr, sizeof(listen_addr)) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 131 + (i >> 8));
}

/* ---- the active side: one thread per scenario -------------------------- */

enum scenario { SC_DATA, SC_REJECT, SC_MARKERS, SC_TRICKLE, SC_BADCRC, SC_GARBAGE,
		SC_CLOSE_MID, SC_SILENT };

struct active {
	enum scenario sc;
	int rc;                 /* what initiate returned */
	uint8_t peer_pd[IWARP_MPA_PD_MAX];
	uint16_t peer_pd_len;
	struct srn_iw_conn conn;
	struct iwarp_hdr term;  /* the Terminate the passive side sent */
	int term_rc;
};

static uint8_t wbuf[WRITE_LEN], sbuf[SEND_LEN];

/* A Write of the pattern and a Read Request, framed by hand with CRC, as
 * the bytes a peer would send after MPA. */
static size_t build_stream(uint8_t *out, size_t cap, size_t mulpdu)
{
	size_t off = 0, pos = 0;

	while (off < 5000) {
		size_t n = 5000 - off < mulpdu - IWARP_TAGGED_HDR_LEN ? 5000 - off
								      : mulpdu - IWARP_TAGGED_HDR_LEN;
		struct iwarp_hdr h = { .opcode = IWARP_OP_WRITE, .stag = 7, .to = off,
				       .last = off + n == 5000 };
		int hl = iwarp_hdr_encode(out + pos + 2, cap - pos - 2, &h);

		memcpy(out + pos + 2 + hl, wbuf + off, n);
		pos += (size_t)iwarp_fpdu_frame(out + pos, cap - pos, (size_t)hl + n, true);
		off += n;
	}
	return pos;
}

static void *active_main(void *arg)
{
	struct active *a = arg;
	static const char req_pd[] = "hello-from-active";
	struct srn_iw_mpa_params p = { .want_crc = a->sc != SC_DATA, .ird = 16, .ord = 8,
				       .pdata = req_pd, .pdata_len = sizeof(req_pd) };
	int fd = dial();

	a->rc = -1;
	if (fd < 0)
		return NULL;
	if (srn_iw_conn_init(&a->conn, fd, 1000)) {
		close(fd);
		return NULL;
	}
	if (a->sc == SC_MARKERS) { /* a raw request for markers */
		uint8_t buf[64];
		struct iwarp_mpa_rr rr = { .rev = 2, .v2 = true, .flags = IWARP_MPA_F_MARKERS };
		int n = iwarp_mpa_rr_encode(buf, sizeof(buf), &rr);

		if (srn_iw_write_all(fd, buf, (size_t)n, srn_iw_deadline(TMO)) == 0 &&
		    srn_iw_read_all(fd, buf, IWARP_MPA_RR_HDR_LEN, srn_iw_deadline(TMO)) == 0)
			a->rc = buf[16]; /* the reply's flags */
		goto out;
	}
	if (a->sc == SC_SILENT) { /* connect, say nothing, wait for the close */
		uint8_t b;

		a->rc = srn_iw_read_all(fd, &b, 1, srn_iw_deadline(TMO));
		goto out;
	}
	a->rc = srn_iw_mpa_initiate(&a->conn, &p, a->peer_pd, &a->peer_pd_len, TMO);
	if (a->rc)
		goto out;
	if (a->sc == SC_DATA) {
		struct iwarp_hdr w = { .opcode = IWARP_OP_WRITE, .stag = 0x1234, .to = 0x10000 };
		struct iwarp_hdr s = { .opcode = IWARP_OP_SEND_SE, .msn = 1 };
		struct iwarp_hdr r = { .opcode = IWARP_OP_READ_REQ, .msn = 1, .sink_stag = 0x55,
				       .sink_to = 0x2000, .read_size = 4096, .src_stag = 0x66,
				       .src_to = 0x3000 };
		struct iwarp_term_code err;

		if (srn_iw_send_message(&a->conn, &w, wbuf, WRITE_LEN, TMO) ||
		    srn_iw_send_message(&a->conn, &s, sbuf, SEND_LEN, TMO) ||
		    srn_iw_send_message(&a->conn, &r, NULL, 0, TMO))
			a->rc = -100;
		a->term_rc = srn_iw_recv_segment(&a->conn, &a->term, &err, TMO);
	} else if (a->sc == SC_TRICKLE || a->sc == SC_BADCRC || a->sc == SC_GARBAGE ||
		   a->sc == SC_CLOSE_MID) {
		static uint8_t st[8192];
		size_t n = build_stream(st, sizeof(st), a->conn.mulpdu);

		if (a->sc == SC_BADCRC)
			st[n - 1] ^= 0x01; /* last FPDU's CRC */
		if (a->sc == SC_GARBAGE)
			memset(st + 40, 0xa5, 60); /* inside the first FPDU */
		if (a->sc == SC_CLOSE_MID)
			n -= 7;
		for (size_t i = 0; i < n; i++)
			if (srn_iw_write_all(fd, st + i, 1, srn_iw_deadline(TMO))) {
				a->rc = -101;
				break;
			}
	}
out:
	shutdown(fd, SHUT_WR);
	/* wait for the passive side to be done reading, then close */
	{
		uint8_t b;

		(void)srn_iw_read_all(fd, &b, 1, srn_iw_deadline(TMO));
	}
	close(fd);
	return NULL;
}

/* ---- the passive side -------------------------------------------------- */

static int accept_one(struct srn_iw_conn *c)
{
	int fd = accept(listen_fd, NULL, NULL);

	T_ASSERT(fd >= 0, "accept");
	T_ASSERT(srn_iw_conn_init(c, fd, 1400) == 0, "conn init");
	return fd;
}

static void finish(pthread_t th, struct srn_iw_conn *c, int fd, struct active *a)
{
	close(fd); /* the active side's last read sees EOF */
	pthread_join(th, NULL);
	srn_iw_conn_fini(c);
	srn_iw_conn_fini(&a->conn);
}

static void test_data(void)
{
	struct active a = { .sc = SC_DATA };
	static const char rep_pd[] = "welcome";
	struct srn_iw_mpa_params p = { .want_crc = true, .ird = 4, .ord = 32, .pdata = rep_pd,
				       .pdata_len = sizeof(rep_pd) };
	uint8_t buf[IWARP_MPA_RR_HDR_LEN + IWARP_MPA_PD_MAX];
	static uint8_t wplace[WRITE_LEN], splace[SEND_LEN];
	struct iwarp_mpa_rr req;
	struct srn_iw_conn c;
	pthread_t th;
	int fd, rc, segs = 0, wlast = 0, slast = 0, rreq = 0, bad = 0;
	size_t wbytes = 0, sbytes = 0;

	pthread_create(&th, NULL, active_main, &a);
	fd = accept_one(&c);
	rc = srn_iw_mpa_read_request(&c, &req, buf, TMO);
	T_OK(rc == 0 && req.rev == 2 && req.v2 && req.ird == 16 && req.ord == 8 &&
	     !(req.flags & IWARP_MPA_F_CRC), "request: rev 2, IRD 16, ORD 8, no CRC (%d)", rc);
	T_OK(req.pdata_len == 18 && !memcmp(req.pdata, "hello-from-active", 18),
	     "request carries the active side's private data");
	rc = srn_iw_mpa_respond(&c, &req, &p, false, TMO);
	T_OK(rc == 0 && c.crc && c.ird == 4 && c.ord == 16,
	     "passive: CRC on (it asked), IRD 4, ORD 32 fitted to the peer's IRD 16");
	/* everything the active side sends, placed */
	for (int i = 0; i < 1000 && !rreq; i++) {
		struct iwarp_hdr h;
		struct iwarp_term_code err;

		rc = srn_iw_recv_segment(&c, &h, &err, TMO);
		if (rc) {
			T_OK(0, "segment %d: %d", i, rc);
			break;
		}
		segs++;
		if (h.opcode == IWARP_OP_WRITE) {
			if (h.stag != 0x1234 || h.to < 0x10000 ||
			    h.to - 0x10000 + h.payload_len > WRITE_LEN || wlast)
				bad++;
			else
				memcpy(wplace + (h.to - 0x10000), h.payload, h.payload_len);
			wbytes += h.payload_len;
			wlast += h.last;
		} else if (h.opcode == IWARP_OP_SEND_SE) {
			if (h.msn != 1 || (size_t)h.mo + h.payload_len > SEND_LEN || slast)
				bad++;
			else
				memcpy(splace + h.mo, h.payload, h.payload_len);
			sbytes += h.payload_len;
			slast += h.last;
		} else if (h.opcode == IWARP_OP_READ_REQ) {
			rreq = h.sink_stag == 0x55 && h.sink_to == 0x2000 && h.read_size == 4096 &&
			       h.src_stag == 0x66 && h.src_to == 0x3000 && h.msn == 1;
			if (!rreq)
				bad++;
		}
	}
	T_OK(bad == 0 && wbytes == WRITE_LEN && wlast == 1 &&
	     !memcmp(wplace, wbuf, WRITE_LEN), "100 kB Write placed by TO, L once");
	T_OK(sbytes == SEND_LEN && slast == 1 && !memcmp(splace, sbuf, SEND_LEN),
	     "3000-byte Send placed by MO, L once");
	T_OK(rreq, "Read Request: sink, size, source, MSN");
	{ /* the sender's MULPDU is 1000: so many segments per message */
		int tw = 1000 - IWARP_TAGGED_HDR_LEN, ts = 1000 - IWARP_UNTAGGED_HDR_LEN;
		int want = (WRITE_LEN + tw - 1) / tw + (SEND_LEN + ts - 1) / ts + 1;

		printf("# %d segments received, %d expected\n", segs, want);
		T_OK(segs == want, "messages cut at MULPDU 1000 (%d segments)", segs);
	}
	{
		struct iwarp_hdr t = { .opcode = IWARP_OP_TERMINATE, .msn = 1,
				       .term = { IWARP_LAYER_RDMAP, IWARP_RDMAP_ET_PROTECTION,
						 IWARP_RDMAP_EC_INVALID_STAG } };

		T_OK(srn_iw_send_message(&c, &t, NULL, 0, TMO) == 0, "Terminate sent");
	}
	finish(th, &c, fd, &a);
	T_OK(a.rc == 0 && a.conn.crc && a.conn.ord == 4 && a.conn.ird == 16,
	     "active: connected, CRC on, ORD 8 fitted to the peer's IRD 4 (%d)", a.rc);
	T_OK(a.peer_pd_len == sizeof(rep_pd) && !memcmp(a.peer_pd, rep_pd, sizeof(rep_pd)),
	     "active got the reply's private data");
	T_OK(a.term_rc == 0 && a.term.opcode == IWARP_OP_TERMINATE &&
	     a.term.term.layer == IWARP_LAYER_RDMAP &&
	     a.term.term.etype == IWARP_RDMAP_ET_PROTECTION && a.term.term.ecode == 0,
	     "active received the Terminate: RDMAP, protection, invalid STag");
}

static void test_reject(void)
{
	struct active a = { .sc = SC_REJECT };
	struct srn_iw_mpa_params p = { .pdata = "busy", .pdata_len = 4 };
	uint8_t buf[IWARP_MPA_RR_HDR_LEN + IWARP_MPA_PD_MAX];
	struct iwarp_mpa_rr req;
	struct srn_iw_conn c;
	pthread_t th;
	int fd;

	pthread_create(&th, NULL, active_main, &a);
	fd = accept_one(&c);
	T_OK(srn_iw_mpa_read_request(&c, &req, buf, TMO) == 0 &&
	     (req.flags & IWARP_MPA_F_CRC), "request asks for CRC");
	T_OK(srn_iw_mpa_respond(&c, &req, &p, true, TMO) == 0, "reject sent");
	finish(th, &c, fd, &a);
	T_OK(a.rc == -ECONNREFUSED && a.peer_pd_len == 4 && !memcmp(a.peer_pd, "busy", 4),
	     "active: -ECONNREFUSED with the reason 'busy' (%d)", a.rc);
}

static void test_markers(void)
{
	struct active a = { .sc = SC_MARKERS };
	uint8_t buf[IWARP_MPA_RR_HDR_LEN + IWARP_MPA_PD_MAX];
	struct iwarp_mpa_rr req;
	struct srn_iw_conn c;
	pthread_t th;
	int fd, rc;

	pthread_create(&th, NULL, active_main, &a);
	fd = accept_one(&c);
	rc = srn_iw_mpa_read_request(&c, &req, buf, TMO);
	T_OK(rc == -EOPNOTSUPP, "a request for markers: -EOPNOTSUPP (%d)", rc);
	finish(th, &c, fd, &a);
	T_OK(a.rc >= 0 && (a.rc & IWARP_MPA_F_REJECT) && !(a.rc & IWARP_MPA_F_MARKERS),
	     "the peer got a reject without markers (flags 0x%x)", a.rc);
}

/* The hand-framed stream after an MPA exchange with CRC. */
static int passive_stream(enum scenario sc, int *segs, int *placed_ok)
{
	struct active a = { .sc = sc };
	struct srn_iw_mpa_params p = { .want_crc = true, .ird = 1, .ord = 1 };
	uint8_t buf[IWARP_MPA_RR_HDR_LEN + IWARP_MPA_PD_MAX];
	static uint8_t place[5000];
	struct iwarp_mpa_rr req;
	struct srn_iw_conn c;
	pthread_t th;
	int fd, rc = 0;
	size_t bytes = 0;

	memset(place, 0, sizeof(place));
	*segs = 0;
	pthread_create(&th, NULL, active_main, &a);
	fd = accept_one(&c);
	if (srn_iw_mpa_read_request(&c, &req, buf, TMO) == 0 &&
	    srn_iw_mpa_respond(&c, &req, &p, false, TMO) == 0) {
		for (int i = 0; i < 100; i++) {
			struct iwarp_hdr h;
			struct iwarp_term_code err;

			rc = srn_iw_recv_segment(&c, &h, &err, 2000);
			if (rc) {
				if (rc == -EBADMSG)
					T_OK(err.layer == IWARP_LAYER_LLP &&
					     err.ecode == IWARP_LLP_EC_CRC, "CRC error -> LLP Terminate");
				break;
			}
			(*segs)++;
			if (h.opcode == IWARP_OP_WRITE && h.to + h.payload_len <= sizeof(place)) {
				memcpy(place + h.to, h.payload, h.payload_len);
				bytes += h.payload_len;
			}
		}
	} else {
		rc = -1000;
	}
	*placed_ok = bytes == 5000 && !memcmp(place, wbuf, 5000);
	finish(th, &c, fd, &a);
	return rc;
}

static void test_streams(void)
{
	int segs, ok, rc;

	rc = passive_stream(SC_TRICKLE, &segs, &ok);
	T_OK(rc == -ECONNRESET && ok && segs == 6,
	     "one byte at a time: 6 FPDUs reassembled, 5000 bytes placed, then EOF (%d, %d)", rc,
	     segs);
	rc = passive_stream(SC_BADCRC, &segs, &ok);
	T_OK(rc == -EBADMSG && segs == 5, "bad CRC in the 6th FPDU: -EBADMSG after 5 (%d, %d)", rc,
	     segs);
	rc = passive_stream(SC_GARBAGE, &segs, &ok);
	T_OK((rc == -EBADMSG || rc == -EPROTO) && segs == 0, "garbage in the first FPDU: refused (%d)",
	     rc);
	rc = passive_stream(SC_CLOSE_MID, &segs, &ok);
	T_OK(rc == -ECONNRESET && segs == 5, "close in mid-FPDU: -ECONNRESET after 5 (%d, %d)", rc,
	     segs);
}

static void test_timeout(void)
{
	struct active a = { .sc = SC_SILENT };
	uint8_t buf[IWARP_MPA_RR_HDR_LEN + IWARP_MPA_PD_MAX];
	struct iwarp_mpa_rr req;
	struct srn_iw_conn c;
	pthread_t th;
	double t0;
	int fd, rc;

	pthread_create(&th, NULL, active_main, &a);
	fd = accept_one(&c);
	t0 = t_now();
	rc = srn_iw_mpa_read_request(&c, &req, buf, 200);
	T_OK(rc == -ETIMEDOUT && t_now() - t0 >= 0.19 && t_now() - t0 < 3.0,
	     "silent peer: -ETIMEDOUT after %.3f s", t_now() - t0);
	finish(th, &c, fd, &a);
}

int main(void)
{
	for (size_t i = 0; i < WRITE_LEN; i++)
		wbuf[i] = pattern(i);
	for (size_t i = 0; i < SEND_LEN; i++)
		sbuf[i] = pattern(i + 7);
	listen_setup();
	test_data();
	test_reject();
	test_markers();
	test_streams();
	test_timeout();
	close(listen_fd);
	return t_summary();
}
