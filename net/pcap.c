/* SOFTRNIC_PCAP: one pcapng file per process (net/pcapng.h), each packet
 * once with its direction; shared by every thread under one mutex:
 * captures are a debugging aid, not a fast path.  The reader below takes
 * classic pcap (either byte order, us or ns stamps) and pcapng. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "net/pcap.h"
#include "net/pcapng.h"
#include "net/settings.h"

enum {
	PCAP_MAGIC_US = 0xa1b2c3d4,
	PCAP_MAGIC_NS = 0xa1b23c4d,
	PCAP_SNAPLEN = PCAPNG_SNAPLEN,
	LOCAL_MAX = 64,
};

struct pcap_global_hdr {
	uint32_t magic;
	uint16_t version_major, version_minor;
	int32_t thiszone;
	uint32_t sigfigs;
	uint32_t snaplen;
	uint32_t linktype;
};

struct pcap_rec_hdr {
	uint32_t ts_sec, ts_frac, incl_len, orig_len;
};

/* The engines of this process, by address and port: a packet one of
 * them sent to another is in the file already as sent. */
struct local_end {
	int family;
	uint8_t ip[16];
	uint16_t port;
};

static pthread_mutex_t pcap_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *pcap_file;            /* guarded by pcap_lock */
static atomic_bool pcap_on;        /* mirrors pcap_file != NULL, lock-free */
static struct local_end locals[LOCAL_MAX]; /* guarded by pcap_lock */
static int nlocals;

int net_pcap_open(const char *path)
{
	FILE *f = fopen(path, "we");
	int err;

	if (!f)
		return -errno;
	err = pcapng_write_head(f);
	if (!err && fflush(f) != 0)
		err = -(errno ? errno : EIO);
	if (err) {
		fclose(f);
		return err;
	}
	pthread_mutex_lock(&pcap_lock);
	if (pcap_file)
		fclose(pcap_file);
	pcap_file = f;
	atomic_store(&pcap_on, true);
	pthread_mutex_unlock(&pcap_lock);
	return 0;
}

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int env_result;

static void pcap_open_env_once(void)
{
	const char *path = srn_setting_str(SRN_SET_PCAP);

	if (path)
		env_result = net_pcap_open(path);
}

int net_pcap_open_env(void)
{
	pthread_once(&env_once, pcap_open_env_once);
	return env_result;
}

bool net_pcap_enabled(void)
{
	return atomic_load_explicit(&pcap_on, memory_order_relaxed);
}

static void pcap_stop_locked(void)
{
	if (pcap_file)
		fclose(pcap_file);
	pcap_file = NULL;
	atomic_store(&pcap_on, false);
}

static size_t ip_len(int family)
{
	return family == AF_INET ? 4 : 16;
}

void net_pcap_local(int family, const uint8_t *ip, uint16_t port, bool add)
{
	pthread_mutex_lock(&pcap_lock);
	for (int i = 0; i < nlocals; i++) {
		if (locals[i].family == family && locals[i].port == port &&
		    !memcmp(locals[i].ip, ip, ip_len(family))) {
			if (!add)
				locals[i] = locals[--nlocals];
			pthread_mutex_unlock(&pcap_lock);
			return;
		}
	}
	if (add && nlocals < LOCAL_MAX) {
		locals[nlocals].family = family;
		memcpy(locals[nlocals].ip, ip, ip_len(family));
		locals[nlocals++].port = port;
	}
	pthread_mutex_unlock(&pcap_lock);
}

static bool from_local_locked(const struct wire_l3 *l3)
{
	for (int i = 0; i < nlocals; i++)
		if (locals[i].family == l3->family && locals[i].port == l3->sport &&
		    !memcmp(locals[i].ip, l3->src, ip_len(l3->family)))
			return true;
	return false;
}

void net_pcap_write(unsigned int dir, const struct wire_l3 *l3, const struct iovec *iov,
		    int iovcnt, const char *comment)
{
	uint8_t hdr[WIRE_FRAME_HDR_MAX];
	struct iovec v[1 + NET_PCAP_MAX_IOV];
	struct timespec now;
	size_t roce_len = 0, hlen;

	if (!net_pcap_enabled() || iovcnt > NET_PCAP_MAX_IOV)
		return;
	for (int i = 0; i < iovcnt; i++)
		roce_len += iov[i].iov_len;
	hlen = wire_frame_build(hdr, l3, roce_len);
	if (!hlen)
		return;
	v[0].iov_base = hdr;
	v[0].iov_len = hlen;
	memcpy(v + 1, iov, sizeof(*iov) * (size_t)iovcnt);
	clock_gettime(CLOCK_REALTIME, &now);

	pthread_mutex_lock(&pcap_lock);
	if (!pcap_file || (dir == PCAPNG_DIR_IN && !comment && from_local_locked(l3))) {
		pthread_mutex_unlock(&pcap_lock);
		return;
	}
	/* A full disk stops the capture, never the NIC. */
	if (pcapng_write_packet(pcap_file, (uint64_t)now.tv_sec * 1000000000u +
				(uint64_t)now.tv_nsec, dir, comment, v, 1 + iovcnt) ||
	    fflush(pcap_file) != 0)
		pcap_stop_locked();
	pthread_mutex_unlock(&pcap_lock);
}

void net_pcap_close(void)
{
	pthread_mutex_lock(&pcap_lock);
	pcap_stop_locked();
	pthread_mutex_unlock(&pcap_lock);
}

/* ---- reader ------------------------------------------------------------ */

static uint32_t fix32(const struct net_pcap_reader *r, uint32_t v)
{
	return r->swap ? __builtin_bswap32(v) : v;
}

static int read_exact(struct net_pcap_reader *r, void *p, size_t n)
{
	return n == 0 || fread(p, n, 1, r->f) == 1 ? 0 : -EBADMSG;
}

static int skip(struct net_pcap_reader *r, size_t n)
{
	return n == 0 || fseek(r->f, (long)n, SEEK_CUR) == 0 ? 0 : -EBADMSG;
}

/* The first Interface Description Block gives the link type and the stamp
 * unit (if_tsresol, option 9: 10^-N s; default microseconds). */
static int ng_idb(struct net_pcap_reader *r, uint32_t body)
{
	uint8_t b[512];
	uint32_t off = 8;

	if (body < 8 || body > sizeof(b) || read_exact(r, b, body))
		return -EBADMSG;
	if (r->ng_idbs++)
		return 0;
	r->linktype = (r->swap ? __builtin_bswap16(*(uint16_t *)b) : *(uint16_t *)b);
	r->snaplen = fix32(r, *(uint32_t *)(b + 4));
	while (off + 4 <= body) {
		uint16_t code = *(uint16_t *)(b + off), len = *(uint16_t *)(b + off + 2);

		if (r->swap)
			code = __builtin_bswap16(code), len = __builtin_bswap16(len);
		if (code == 0 || off + 4 + len > body)
			break;
		if (code == 9 && len >= 1)
			r->nsec = b[off + 4] == 9;
		off += 4 + ((len + 3u) & ~3u);
	}
	return 0;
}

static int ng_open(struct net_pcap_reader *r)
{
	uint32_t len, bom;

	if (read_exact(r, &len, 4) || read_exact(r, &bom, 4))
		return -EBADMSG;
	if (bom == __builtin_bswap32(PCAPNG_BYTE_ORDER))
		r->swap = true;
	else if (bom != PCAPNG_BYTE_ORDER)
		return -EBADMSG;
	len = fix32(r, len);
	if (len < 28 || len % 4)
		return -EBADMSG;
	r->ng = true;
	r->linktype = 1;
	return skip(r, len - 12);
}

int net_pcap_reader_open(struct net_pcap_reader *r, const char *path)
{
	struct pcap_global_hdr g;

	memset(r, 0, sizeof(*r));
	r->f = fopen(path, "rbe");
	if (!r->f)
		return -errno;
	if (fread(&g.magic, 4, 1, r->f) != 1)
		goto bad;
	if (g.magic == PCAPNG_SHB) {
		if (ng_open(r) < 0)
			goto bad;
		return 0;
	}
	if (fread((char *)&g + 4, sizeof(g) - 4, 1, r->f) != 1)
		goto bad;
	switch (g.magic) {
	case PCAP_MAGIC_US:
		break;
	case PCAP_MAGIC_NS:
		r->nsec = true;
		break;
	default:
		r->swap = true;
		if (g.magic == __builtin_bswap32(PCAP_MAGIC_NS))
			r->nsec = true;
		else if (g.magic != __builtin_bswap32(PCAP_MAGIC_US))
			goto bad;
	}
	r->snaplen = fix32(r, g.snaplen);
	r->linktype = fix32(r, g.linktype) & 0x0fffffff; /* top bits: FCS info */
	return 0;
bad:
	fclose(r->f);
	r->f = NULL;
	return -EBADMSG;
}

/* pcapng: skip to the next Enhanced Packet Block and read it. */
static int ng_next(struct net_pcap_reader *r, uint8_t *buf, size_t cap, size_t *len,
		   uint64_t *ts_ns)
{
	for (int guard = 0; guard < 1000000; guard++) {
		uint32_t bh[2], epb[5], blen, body;
		size_t got = fread(bh, 1, sizeof(bh), r->f);

		if (got == 0 && feof(r->f))
			return 0;
		if (got != sizeof(bh))
			return -EBADMSG;
		blen = fix32(r, bh[1]);
		if (blen < 12 || blen % 4)
			return -EBADMSG;
		body = blen - 12;
		if (fix32(r, bh[0]) == PCAPNG_IDB) {
			if (ng_idb(r, body) < 0 || skip(r, 4))
				return -EBADMSG;
			continue;
		}
		if (fix32(r, bh[0]) != PCAPNG_EPB) {
			if (skip(r, body + 4))
				return -EBADMSG;
			continue;
		}
		if (body < sizeof(epb) || read_exact(r, epb, sizeof(epb)))
			return -EBADMSG;
		*len = fix32(r, epb[3]);
		if (*len > cap || *len > body - sizeof(epb) || read_exact(r, buf, *len) ||
		    skip(r, body - sizeof(epb) - *len + 4))
			return -EBADMSG;
		if (ts_ns) {
			uint64_t t = (uint64_t)fix32(r, epb[1]) << 32 | fix32(r, epb[2]);

			*ts_ns = r->nsec ? t : t * 1000;
		}
		return 1;
	}
	return -EBADMSG;
}

int net_pcap_reader_next(struct net_pcap_reader *r, uint8_t *buf, size_t cap,
			 size_t *len, uint64_t *ts_ns)
{
	struct pcap_rec_hdr rec;
	size_t got;

	if (r->ng)
		return ng_next(r, buf, cap, len, ts_ns);
	got = fread(&rec, 1, sizeof(rec), r->f);
	if (got == 0 && feof(r->f))
		return 0;
	if (got != sizeof(rec))
		return -EBADMSG;
	rec.incl_len = fix32(r, rec.incl_len);
	if (rec.incl_len > cap)
		return -EBADMSG;
	if (rec.incl_len && fread(buf, rec.incl_len, 1, r->f) != 1)
		return -EBADMSG;
	*len = rec.incl_len;
	if (ts_ns)
		*ts_ns = (uint64_t)fix32(r, rec.ts_sec) * 1000000000u +
			 (uint64_t)fix32(r, rec.ts_frac) * (r->nsec ? 1 : 1000);
	return 1;
}

void net_pcap_reader_close(struct net_pcap_reader *r)
{
	if (r->f)
		fclose(r->f);
	r->f = NULL;
}
