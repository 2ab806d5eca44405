/* wire/mad_cma.c: rdma_cm's IP addressing header at the start of a REQ's
 * private data (IBTA annex A11, "RDMA IP CM Service"): 36 bytes =
 * version (8) | IP version (4) + reserved (4) | source port (16) |
 * source IP (128) | destination IP (128).  An IPv4 address sits in the
 * last 4 bytes of its 16 with the first 12 zero (not ::ffff:a.b.c.d as in
 * the GIDs).  The destination port travels in the service id. */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "wire/mad.h"

enum {
	CMA_OFF_VERSION = 0,
	CMA_OFF_IPVER = 1,
	CMA_OFF_PORT = 2,
	CMA_OFF_SRC = 4,
	CMA_OFF_DST = 20,
};

int wire_cma_hdr_decode(const uint8_t *pd, size_t len, struct wire_cma_hdr *h)
{
	if (len < WIRE_CMA_HDR_LEN)
		return -EBADMSG;
	h->version = pd[CMA_OFF_VERSION];
	h->ip_version = pd[CMA_OFF_IPVER] >> 4;
	h->src_port = (uint16_t)(pd[CMA_OFF_PORT] << 8 | pd[CMA_OFF_PORT + 1]);
	memcpy(h->src, pd + CMA_OFF_SRC, 16);
	memcpy(h->dst, pd + CMA_OFF_DST, 16);
	if (h->version != 0 || (h->ip_version != 4 && h->ip_version != 6))
		return -EPROTONOSUPPORT;
	return 0;
}

void wire_cma_hdr_encode(uint8_t *out, const struct wire_cma_hdr *h)
{
	out[CMA_OFF_VERSION] = h->version;
	out[CMA_OFF_IPVER] = (uint8_t)(h->ip_version << 4);
	out[CMA_OFF_PORT] = (uint8_t)(h->src_port >> 8);
	out[CMA_OFF_PORT + 1] = (uint8_t)h->src_port;
	memcpy(out + CMA_OFF_SRC, h->src, 16);
	memcpy(out + CMA_OFF_DST, h->dst, 16);
}

int wire_cma_hdr_from_sockaddr(struct wire_cma_hdr *h, const struct sockaddr *src,
			       const struct sockaddr *dst)
{
	memset(h, 0, sizeof(*h));
	if (src->sa_family != dst->sa_family)
		return -EAFNOSUPPORT;
	if (src->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)src, *d = (const void *)dst;

		h->ip_version = 4;
		h->src_port = ntohs(s->sin_port);
		memcpy(h->src + 12, &s->sin_addr, 4);
		memcpy(h->dst + 12, &d->sin_addr, 4);
		return 0;
	}
	if (src->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)src, *d = (const void *)dst;

		h->ip_version = 6;
		h->src_port = ntohs(s->sin6_port);
		memcpy(h->src, &s->sin6_addr, 16);
		memcpy(h->dst, &d->sin6_addr, 16);
		return 0;
	}
	return -EAFNOSUPPORT;
}

int wire_cma_hdr_to_sockaddr(const struct wire_cma_hdr *h, uint64_t service_id,
			     struct sockaddr_storage *src, struct sockaddr_storage *dst)
{
	uint16_t dport = wire_cm_service_id_port(service_id);

	memset(src, 0, sizeof(*src));
	memset(dst, 0, sizeof(*dst));
	if (h->ip_version == 4) {
		struct sockaddr_in *s = (void *)src, *d = (void *)dst;

		s->sin_family = d->sin_family = AF_INET;
		s->sin_port = htons(h->src_port);
		d->sin_port = htons(dport);
		memcpy(&s->sin_addr, h->src + 12, 4);
		memcpy(&d->sin_addr, h->dst + 12, 4);
		return 0;
	}
	if (h->ip_version == 6) {
		struct sockaddr_in6 *s = (void *)src, *d = (void *)dst;

		s->sin6_family = d->sin6_family = AF_INET6;
		s->sin6_port = htons(h->src_port);
		d->sin6_port = htons(dport);
		memcpy(&s->sin6_addr, h->src, 16);
		memcpy(&d->sin6_addr, h->dst, 16);
		return 0;
	}
	return -EAFNOSUPPORT;
}
