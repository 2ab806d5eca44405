/* Classic pcap files (the libpcap format: 24-byte global header, then
 * 16-byte record headers), written in host byte order with microsecond
 * stamps, read in either byte order.  One writer per process, shared by
 * every thread under one mutex: captures are a debugging aid, not a fast
 * path. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/pcap.h"
#include "net/settings.h"

enum {
	PCAP_MAGIC_US = 0xa1b2c3d4,
	PCAP_MAGIC_NS = 0xa1b23c4d,
	PCAP_LINKTYPE_ETHERNET = 1,
	PCAP_SNAPLEN = 262144,
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

static pthread_mutex_t pcap_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *pcap_file;            /* guarded by pcap_lock */
static atomic_bool pcap_on;        /* mirrors pcap_file != NULL, lock-free */

int net_pcap_open(const char *path)
{
	struct pcap_global_hdr g = {
		.magic = PCAP_MAGIC_US,
		.version_major = 2,
		.version_minor = 4,
		.snaplen = PCAP_SNAPLEN,
		.linktype = PCAP_LINKTYPE_ETHERNET,
	};
	FILE *f = fopen(path, "we");
	int err = 0;

	if (!f)
		return -errno;
	if (fwrite(&g, sizeof(g), 1, f) != 1 || fflush(f) != 0) {
		err = errno ? -errno : -EIO;
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

void net_pcap_write(const struct wire_l3 *l3, const struct iovec *iov, int iovcnt)
{
	uint8_t hdr[WIRE_FRAME_HDR_MAX];
	struct pcap_rec_hdr rec;
	struct timespec now;
	size_t roce_len = 0, hlen;
	bool ok;

	if (!net_pcap_enabled())
		return;
	for (int i = 0; i < iovcnt; i++)
		roce_len += iov[i].iov_len;
	hlen = wire_frame_build(hdr, l3, roce_len);
	if (!hlen)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	rec.ts_sec = (uint32_t)now.tv_sec;
	rec.ts_frac = (uint32_t)(now.tv_nsec / 1000);
	rec.orig_len = (uint32_t)(hlen + roce_len);
	rec.incl_len = rec.orig_len < PCAP_SNAPLEN ? rec.orig_len : PCAP_SNAPLEN;

	pthread_mutex_lock(&pcap_lock);
	if (!pcap_file) {
		pthread_mutex_unlock(&pcap_lock);
		return;
	}
	ok = fwrite(&rec, sizeof(rec), 1, pcap_file) == 1 &&
	     fwrite(hdr, hlen, 1, pcap_file) == 1;
	for (int i = 0, left = (int)(rec.incl_len - hlen); ok && i < iovcnt && left > 0; i++) {
		size_t n = iov[i].iov_len < (size_t)left ? iov[i].iov_len : (size_t)left;

		ok = n == 0 || fwrite(iov[i].iov_base, n, 1, pcap_file) == 1;
		left -= (int)n;
	}
	/* A full disk stops the capture, never the NIC. */
	if (!ok || fflush(pcap_file) != 0)
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

int net_pcap_reader_open(struct net_pcap_reader *r, const char *path)
{
	struct pcap_global_hdr g;

	memset(r, 0, sizeof(*r));
	r->f = fopen(path, "rbe");
	if (!r->f)
		return -errno;
	if (fread(&g, sizeof(g), 1, r->f) != 1)
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

int net_pcap_reader_next(struct net_pcap_reader *r, uint8_t *buf, size_t cap,
			 size_t *len, uint64_t *ts_ns)
{
	struct pcap_rec_hdr rec;
	size_t got = fread(&rec, 1, sizeof(rec), r->f);

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
