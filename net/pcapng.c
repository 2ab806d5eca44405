/* pcapng writer (see pcapng.h): blocks in host byte order, as the format
 * allows (the byte-order magic tells readers which). */
#include "net/pcapng.h"

#include <errno.h>
#include <string.h>

enum {
	OPT_END = 0,
	OPT_COMMENT = 1,
	OPT_SHB_USERAPPL = 4,
	OPT_IF_NAME = 2,
	OPT_IF_TSRESOL = 9,
	OPT_EPB_FLAGS = 2,
	LINKTYPE_ETHERNET = 1,
};

static uint32_t pad4(size_t n)
{
	return (uint32_t)((4 - (n & 3)) & 3);
}

/* Options are (code, length, value padded to 4). */
static size_t opt_len(size_t vlen)
{
	return 4 + vlen + pad4(vlen);
}

static int put(FILE *f, const void *p, size_t n)
{
	if (n && fwrite(p, n, 1, f) != 1)
		return -(errno ? errno : EIO);
	return 0;
}

static int put_pad(FILE *f, size_t n)
{
	static const uint8_t zero[4];

	return put(f, zero, pad4(n));
}

static int put_opt(FILE *f, uint16_t code, const void *v, size_t vlen)
{
	uint16_t h[2] = { code, (uint16_t)vlen };
	int r = put(f, h, sizeof(h));

	if (!r)
		r = put(f, v, vlen);
	if (!r)
		r = put_pad(f, vlen);
	return r;
}

static int put_end(FILE *f, uint32_t total)
{
	uint32_t end[2] = { 0, total }; /* opt_endofopt, then the length again */

	return put(f, end, sizeof(end));
}

int pcapng_write_head(FILE *f)
{
	static const char appl[] = "softrnic";
	static const char ifname[] = "softrnic";
	uint8_t tsresol = 9;
	struct {
		uint32_t type, len, bom;
		uint16_t major, minor;
		int64_t section_len;
	} shb = { PCAPNG_SHB, 0, PCAPNG_BYTE_ORDER, 1, 0, -1 };
	struct {
		uint32_t type, len;
		uint16_t linktype, reserved;
		uint32_t snaplen;
	} idb = { PCAPNG_IDB, 0, LINKTYPE_ETHERNET, 0, PCAPNG_SNAPLEN };
	int r;

	shb.len = (uint32_t)(sizeof(shb) + opt_len(sizeof(appl) - 1) + 8);
	idb.len = (uint32_t)(sizeof(idb) + opt_len(sizeof(ifname) - 1) + opt_len(1) + 8);
	r = put(f, &shb, sizeof(shb));
	if (!r)
		r = put_opt(f, OPT_SHB_USERAPPL, appl, sizeof(appl) - 1);
	if (!r)
		r = put_end(f, shb.len);
	if (!r)
		r = put(f, &idb, sizeof(idb));
	if (!r)
		r = put_opt(f, OPT_IF_NAME, ifname, sizeof(ifname) - 1);
	if (!r)
		r = put_opt(f, OPT_IF_TSRESOL, &tsresol, 1);
	if (!r)
		r = put_end(f, idb.len);
	return r;
}

int pcapng_write_packet(FILE *f, uint64_t ts_ns, unsigned int dir, const char *comment,
			const struct iovec *iov, int n)
{
	struct {
		uint32_t type, len, ifid, ts_hi, ts_lo, caplen, origlen;
	} epb = { PCAPNG_EPB, 0, 0, (uint32_t)(ts_ns >> 32), (uint32_t)ts_ns, 0, 0 };
	size_t clen = comment ? strlen(comment) : 0, len = 0;
	uint32_t flags = dir & 3;
	int r = 0;

	if (clen > 0xffff)
		clen = 0xffff;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	if (len > PCAPNG_SNAPLEN)
		return -EMSGSIZE;
	epb.caplen = epb.origlen = (uint32_t)len;
	epb.len = (uint32_t)(sizeof(epb) + len + pad4(len) + opt_len(4) +
			     (clen ? opt_len(clen) : 0) + 8);
	r = put(f, &epb, sizeof(epb));
	for (int i = 0; !r && i < n; i++)
		r = put(f, iov[i].iov_base, iov[i].iov_len);
	if (!r)
		r = put_pad(f, len);
	if (!r)
		r = put_opt(f, OPT_EPB_FLAGS, &flags, 4);
	if (!r && clen)
		r = put_opt(f, OPT_COMMENT, comment, clen);
	if (!r)
		r = put_end(f, epb.len);
	return r;
}
