/* Address handles, black-box: creation rules on RoCE (GRH required, port
 * 1, sgid_index must name a GID), PD EBUSY while an AH holds it, and
 * ibv_init_ah_from_wc / ibv_create_ah_from_wc on hand-built 40-byte GRH
 * slots in both RoCEv2 layouts (IPv4 header in the last 20 bytes, IPv6
 * header filling it), including rdma-core's version tie-break and the
 * error cases.  Needs no transport. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

static struct ibv_ah *t_create(struct ibv_pd *pd, struct ibv_ah_attr *a, int *err)
{
	struct ibv_ah *ah;

	errno = 0;
	ah = ibv_create_ah(pd, a);
	*err = ah ? 0 : errno;
	return ah;
}

static void gid_v4(union ibv_gid *g, const char *ip)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	inet_pton(AF_INET, ip, g->raw + 12);
}

static bool is_v4mapped(const union ibv_gid *g)
{
	static const uint8_t p[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(g->raw, p, 12);
}

/* A 20-byte IPv4 header (no options) with a correct checksum. */
static void ip4_header(uint8_t *h, const uint8_t src[4], const uint8_t dst[4],
		       uint8_t ttl, uint8_t tos)
{
	uint32_t sum = 0;
	int i;

	memset(h, 0, 20);
	h[0] = 0x45;
	h[1] = tos;
	h[3] = 20 + 8 + 12 + 4; /* total length: any plausible value */
	h[8] = ttl;
	h[9] = 17;              /* UDP */
	memcpy(h + 12, src, 4);
	memcpy(h + 16, dst, 4);
	for (i = 0; i < 20; i += 2)
		sum += (uint32_t)(h[i] << 8 | h[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	sum = ~sum & 0xffff;
	h[10] = (uint8_t)(sum >> 8);
	h[11] = (uint8_t)sum;
}

int main(void)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_ah *ah, *ah2;
	struct ibv_ah_attr a, out;
	struct ibv_port_attr port;
	union ibv_gid g0, gv6, peer;
	uint8_t slot[40], src4[4] = { 127, 0, 0, 2 };
	struct ibv_grh *grh = (struct ibv_grh *)slot;
	struct ibv_wc wc;
	int err, i, v6 = -1, ret;

	ctx = t_lo_open();
	pd = ibv_alloc_pd(ctx);
	if (!pd || ibv_query_gid(ctx, 1, 0, &g0) || ibv_query_port(ctx, 1, &port)) {
		printf("FAIL: setup\n");
		return 1;
	}
	T_OK(is_v4mapped(&g0), "GID 0 is IPv4-mapped");
	for (i = 1; i < port.gid_tbl_len; i++) {
		union ibv_gid g;

		if (ibv_query_gid(ctx, 1, i, &g) == 0 && !is_v4mapped(&g) &&
		    memcmp(&g, &(union ibv_gid){ 0 }, sizeof(g))) {
			v6 = i;
			gv6 = g;
			break;
		}
	}

	/* ---- ibv_create_ah rules ---- */
	memset(&a, 0, sizeof(a));
	a.port_num = 1;
	a.dlid = 1;
	T_OK(!t_create(pd, &a, &err) && err == EINVAL, "no GRH on RoCE -> EINVAL (%d)", err);
	a.is_global = 1;
	gid_v4(&a.grh.dgid, "127.0.0.1");
	a.grh.sgid_index = 0;
	a.grh.hop_limit = 64;
	a.port_num = 2;
	T_OK(!t_create(pd, &a, &err) && err == EINVAL, "port 2 -> EINVAL (%d)", err);
	a.port_num = 1;
	a.grh.sgid_index = (uint8_t)port.gid_tbl_len;
	T_OK(!t_create(pd, &a, &err) && err == EINVAL, "sgid_index past the table -> EINVAL (%d)", err);
	a.grh.sgid_index = 0;
	ah = t_create(pd, &a, &err);
	T_OK(ah && ah->pd == pd && ah->context == ctx, "GRH, port 1, sgid 0 -> AH (%d)", err);
	gid_v4(&a.grh.dgid, "239.1.2.3");
	ah2 = t_create(pd, &a, &err);
	T_OK(ah2 != NULL, "AH to an IPv4 multicast group (%d)", err);
	T_OK(ibv_dealloc_pd(pd) == EBUSY, "dealloc PD with AHs -> EBUSY");
	T_OK(ibv_destroy_ah(ah) == 0 && ibv_destroy_ah(ah2) == 0, "destroy both AHs");

	/* ---- init_ah_from_wc: IPv4 layout ---- */
	memset(&wc, 0, sizeof(wc));
	wc.wc_flags = IBV_WC_GRH;
	wc.src_qp = 0x123;
	wc.sl = 0;
	memset(slot, 0, sizeof(slot));
	ip4_header(slot + 20, src4, g0.raw + 12, 61, 0x28);
	memset(&out, 0xa5, sizeof(out));
	ret = ibv_init_ah_from_wc(ctx, 1, &wc, grh, &out);
	gid_v4(&peer, "127.0.0.2");
	T_OK(ret == 0, "IPv4 GRH slot: init_ah_from_wc ok (%d, errno %d)", ret, errno);
	T_OK(out.is_global == 1 && out.port_num == 1, "is_global, port 1");
	T_OK(!memcmp(&out.grh.dgid, &peer, 16), "dgid = ::ffff:127.0.0.2 (the IPv4 source)");
	T_OK(out.grh.sgid_index == 0, "sgid_index = GID of the IPv4 destination (%u)",
	     out.grh.sgid_index);
	T_OK(out.grh.hop_limit == 61 && out.grh.traffic_class == 0x28,
	     "hop_limit = TTL, traffic_class = TOS (%u, %#x)", out.grh.hop_limit,
	     out.grh.traffic_class);
	errno = 0;
	T_OK(ibv_init_ah_from_wc(ctx, 2, &wc, grh, &out) == -1 && errno == EINVAL,
	     "port 2 -> -1/EINVAL");
	ah = ibv_create_ah_from_wc(pd, &wc, grh, 1);
	T_OK(ah != NULL, "create_ah_from_wc (IPv4)");
	if (ah)
		ibv_destroy_ah(ah);

	/* A first nibble of 6 with a valid IPv4 header at offset 20: IPv4
	 * wins (rdma-core's tie-break). */
	slot[0] = 0x60;
	T_OK(ibv_init_ah_from_wc(ctx, 1, &wc, grh, &out) == 0 &&
	     !memcmp(&out.grh.dgid, &peer, 16), "nibble 6 + valid IPv4 checksum -> IPv4");
	slot[0] = 0;

	/* IPv4 errors */
	{
		uint8_t mc[4] = { 224, 0, 0, 9 }, other[4] = { 10, 99, 99, 99 };

		ip4_header(slot + 20, src4, mc, 64, 0);
		errno = 0;
		T_OK(ibv_init_ah_from_wc(ctx, 1, &wc, grh, &out) == -1 && errno == EINVAL,
		     "IPv4 destination multicast -> -1/EINVAL (errno %d)", errno);
		ip4_header(slot + 20, src4, other, 64, 0);
		errno = 0;
		T_OK(ibv_init_ah_from_wc(ctx, 1, &wc, grh, &out) == -1 && errno != 0,
		     "IPv4 destination not a local GID -> -1 (errno %d)", errno);
		errno = 0;
		T_OK(!ibv_create_ah_from_wc(pd, &wc, grh, 1) && errno != 0,
		     "create_ah_from_wc fails the same way");
	}
	memset(slot, 0, sizeof(slot));
	errno = 0;
	T_OK(ibv_init_ah_from_wc(ctx, 1, &wc, grh, &out) == -1 && errno == EPROTONOSUPPORT,
	     "neither IPv6 nor IPv4 in the slot -> -1/EPROTONOSUPPORT (errno %d)", errno);
	wc.wc_flags = 0;
	T_OK(ibv_init_ah_from_wc(ctx, 1, &wc, grh, &out) == 0 && out.is_global == 0,
	     "no IBV_WC_GRH: 0 and is_global 0 (as rdma-core)");
	wc.wc_flags = IBV_WC_GRH;

	/* ---- init_ah_from_wc: IPv6 layout ---- */
	if (v6 < 0) {
		printf("skip - IPv6 layout: lo has no IPv6 GID\n");
	} else {
		union ibv_gid src6;

		memset(&src6, 0, sizeof(src6));
		src6.raw[0] = 0xfd;
		src6.raw[15] = 0x42;
		memset(slot, 0, sizeof(slot));
		grh->version_tclass_flow = htonl(6u << 28 | 0x14u << 20 | 0xabcde);
		grh->paylen = htons(40);
		grh->next_hdr = 17;
		grh->hop_limit = 7;
		grh->sgid = src6;
		grh->dgid = gv6;
		ret = ibv_init_ah_from_wc(ctx, 1, &wc, grh, &out);
		T_OK(ret == 0, "IPv6 GRH slot: init_ah_from_wc ok (%d, errno %d)", ret, errno);
		T_OK(out.is_global && !memcmp(&out.grh.dgid, &src6, 16),
		     "dgid = IPv6 source");
		T_OK(out.grh.sgid_index == v6, "sgid_index = the IPv6 GID (%u vs %d)",
		     out.grh.sgid_index, v6);
		T_OK(out.grh.hop_limit == 7 && out.grh.traffic_class == 0x14 &&
		     out.grh.flow_label == 0xabcde,
		     "hop_limit, traffic class, flow label from the IPv6 header");
		ah = ibv_create_ah_from_wc(pd, &wc, grh, 1);
		T_OK(ah != NULL, "create_ah_from_wc (IPv6)");
		if (ah)
			ibv_destroy_ah(ah);
		grh->next_hdr = 0x1b;
		errno = 0;
		T_OK(ibv_init_ah_from_wc(ctx, 1, &wc, grh, &out) == -1 &&
		     errno == EPROTONOSUPPORT, "next header 0x1b (RoCEv1) -> EPROTONOSUPPORT");
		grh->next_hdr = 17;
		grh->dgid.raw[0] = 0xff;
		errno = 0;
		T_OK(ibv_init_ah_from_wc(ctx, 1, &wc, grh, &out) == -1 && errno == EINVAL,
		     "IPv6 destination multicast -> EINVAL");
	}

	T_OK(ibv_dealloc_pd(pd) == 0, "PD free once its AHs are gone");
	ibv_close_device(ctx);
	t_lo_free();
	return t_summary();
}
