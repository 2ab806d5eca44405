/* Address handles: the destination of a UD send.  On RoCE an AH is a
 * GID pair (no LIDs), so creation insists on a GRH, as the kernel does
 * for every RoCE device (rxe included).  ibv_init_ah_from_wc builds the
 * reply address from the 40-byte GRH slot of a UD receive, where RoCEv2
 * puts the IP header of the packet: an IPv6 header fills the slot, an
 * IPv4 header sits in its last 20 bytes. */
#include "verbs/datapath.h"
#include "verbs/export.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#define GRH_IPV4_OFFSET 20   /* IPv4 header: last 20 bytes of the GRH slot */
#define IPV6_NEXT_UDP 17     /* RoCEv2: IP next header / protocol = UDP */

bool srn_gid_is_v4mapped(const union ibv_gid *gid)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0,
					    0, 0, 0xff, 0xff };

	return memcmp(gid->raw, prefix, sizeof(prefix)) == 0;
}

bool srn_gid_is_mcast(const union ibv_gid *gid)
{
	/* The kernel's test: an IPv4-mapped GID is multicast when its IPv4
	 * address is (224.0.0.0/4), any other when it starts with 0xff. */
	if (srn_gid_is_v4mapped(gid))
		return (gid->raw[12] & 0xf0) == 0xe0;
	return gid->raw[0] == 0xff;
}

static void gid_from_ipv4(union ibv_gid *gid, const uint8_t addr[4])
{
	memset(gid->raw, 0, 10);
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	memcpy(gid->raw + 12, addr, 4);
}

/* Index of the local GID equal to gid on port 1, or -1. */
static int local_gid_index(const struct srn_device *dev, const union ibv_gid *gid)
{
	int i;

	for (i = 0; i < dev->num_gids; i++)
		if (!memcmp(dev->gid[i].raw, gid->raw, sizeof(gid->raw)))
			return i;
	return -1;
}

/* ---- create / destroy ------------------------------------------------ */

/* A UD destination.  NULL + errno: EINVAL for no GRH (RoCE needs one),
 * a port other than 1, or a sgid_index with no GID. */
SRN_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct srn_context *ctx;
	struct srn_ah *ah;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	ctx = srn_ctx(pd->context);
	if (!attr->is_global || attr->port_num != 1 ||
	    attr->grh.sgid_index >= ctx->dev->num_gids) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->ibv.context = pd->context;
	ah->ibv.pd = pd;
	ah->ibv.handle = 0; /* no kernel object behind it */
	ah->attr = *attr;
	ah->sgid = ctx->dev->gid[attr->grh.sgid_index];
	ah->family = srn_gid_is_v4mapped(&attr->grh.dgid) ? AF_INET : AF_INET6;
	ah->mcast = srn_gid_is_mcast(&attr->grh.dgid);
	atomic_fetch_add(&srn_pd(pd)->users, 1);
	atomic_fetch_add(&ctx->num_objects, 1);
	return &ah->ibv;
}

/* Frees ah.  0 or EINVAL.  WQEs still queued with it are the caller's
 * bug, as on hardware (the verbs spec leaves it undefined). */
SRN_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct srn_ah *ah;

	if (!ibah)
		return EINVAL;
	ah = srn_ah(ibah);
	atomic_fetch_sub(&srn_pd(ibah->pd)->users, 1);
	atomic_fetch_sub(&srn_ctx(ibah->context)->num_objects, 1);
	free(ah);
	return 0;
}

/* ---- from a work completion ----------------------------------------- */

/* Which IP header the GRH slot holds: 4, 6, or 0 (neither).  rdma-core's
 * rule: a first nibble other than 6 means IPv4 if the header at offset
 * 20 says version 4; a first nibble of 6 may still be an IPv4 header
 * whose payload happens to start with 6, so a 20-byte IPv4 header with
 * a valid checksum at offset 20 wins. */
static int grh_ip_version(const uint8_t *slot)
{
	const uint8_t *ip4 = slot + GRH_IPV4_OFFSET;
	uint32_t sum = 0;
	int i;

	if ((slot[0] >> 4) != 6)
		return (ip4[0] >> 4) == 4 ? 4 : 0;
	if (ip4[0] != 0x45) /* version 4, IHL 5: RoCEv2 has no IP options */
		return 6;
	/* The ones' complement sum over a header with a correct checksum
	 * field is 0xffff. */
	for (i = 0; i < 20; i += 2)
		sum += (uint32_t)(ip4[i] << 8 | ip4[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff ? 4 : 6;
}

static int ah_attr_from_ipv4(const struct srn_device *dev,
			     struct ibv_ah_attr *a, const uint8_t *ip4)
{
	union ibv_gid local;
	int idx;

	/* The packet's destination must be one of our addresses; a group
	 * address is never in the GID table. */
	if ((ip4[16] & 0xf0) == 0xe0) {
		errno = EINVAL;
		return -1;
	}
	gid_from_ipv4(&local, ip4 + 16);
	idx = local_gid_index(dev, &local);
	if (idx < 0) {
		errno = ENOENT;
		return -1;
	}
	gid_from_ipv4(&a->grh.dgid, ip4 + 12);
	a->grh.sgid_index = (uint8_t)idx;
	a->grh.hop_limit = ip4[8];      /* TTL */
	a->grh.traffic_class = ip4[1];  /* TOS */
	return 0;
}

static int ah_attr_from_ipv6(const struct srn_device *dev,
			     struct ibv_ah_attr *a, const struct ibv_grh *grh)
{
	int idx;

	if (grh->dgid.raw[0] == 0xff) {
		errno = EINVAL;
		return -1;
	}
	/* Our GIDs are all RoCEv2: only a UDP next header can match one
	 * (0x1b would be RoCEv1, which we do not speak). */
	if (grh->next_hdr != IPV6_NEXT_UDP) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	idx = local_gid_index(dev, &grh->dgid);
	if (idx < 0) {
		errno = ENOENT;
		return -1;
	}
	a->grh.dgid = grh->sgid;
	a->grh.sgid_index = (uint8_t)idx;
	a->grh.hop_limit = grh->hop_limit;
	a->grh.traffic_class = (uint8_t)(ntohl(grh->version_tclass_flow) >> 20);
	return 0;
}

/* The address that answers the sender of wc.  0, or -1 with errno (the
 * documented convention of this call). */
SRN_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
				   struct ibv_wc *wc, struct ibv_grh *grh,
				   struct ibv_ah_attr *ah_attr)
{
	const struct srn_device *dev;

	if (!context || !wc || !grh || !ah_attr) {
		errno = EINVAL;
		return -1;
	}
	dev = srn_ctx(context)->dev;
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->grh.flow_label = ntohl(grh->version_tclass_flow) & 0xfffff;
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0; /* no GRH: a LID address (useless on RoCE, as in rdma-core) */
	ah_attr->is_global = 1;
	if (port_num != 1) { /* no GID table to find the local address in */
		errno = EINVAL;
		return -1;
	}
	switch (grh_ip_version((const uint8_t *)grh)) {
	case 4:
		/* flow_label stays what the first bytes hold (zero as placed
		 * by RoCEv2 receivers), as rdma-core leaves it */
		return ah_attr_from_ipv4(dev, ah_attr,
					 (const uint8_t *)grh + GRH_IPV4_OFFSET);
	case 6:
		return ah_attr_from_ipv6(dev, ah_attr, grh);
	default:
		errno = EPROTONOSUPPORT;
		return -1;
	}
}

/* ibv_init_ah_from_wc then ibv_create_ah.  NULL + errno. */
SRN_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
						struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr attr;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}
