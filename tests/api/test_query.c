/* Black-box checks of the query verbs on srn_lo: device attributes (and
 * query_device_ex's attr_size handling), port attributes through the
 * header's inline ibv_query_port and the exported symbol, invalid ports,
 * the GID table (all four ways to read it) and the P_Key table. */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_verbs.h"

/* The exported compat symbol, reached without the header's macro. */
int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port, unsigned int index, int *type);

static void t_device(struct ibv_context *ctx)
{
	struct ibv_device_attr a;
	struct ibv_device_attr_ex ax;
	unsigned char buf[sizeof(struct ibv_device_attr_ex) + 64];
	struct ibv_query_device_ex_input in = { .comp_mask = 1 };
	struct verbs_context *vctx = verbs_get_ctx(ctx);

	memset(&a, 0xa5, sizeof(a));
	T_OK(ibv_query_device(ctx, &a) == 0, "ibv_query_device succeeds");
	T_OK(a.phys_port_cnt == 1, "phys_port_cnt is 1 (got %u)", a.phys_port_cnt);
	T_OK(a.atomic_cap == IBV_ATOMIC_HCA, "atomic_cap is ATOMIC_HCA");
	T_OK(a.node_guid == ibv_get_device_guid(ctx->device),
	     "node_guid equals ibv_get_device_guid");
	T_OK(a.sys_image_guid == a.node_guid, "sys_image_guid = node_guid");
	T_OK(strlen(a.fw_ver) > 0 && strlen(a.fw_ver) < sizeof(a.fw_ver),
	     "fw_ver is a terminated string (%s)", a.fw_ver);
	T_OK(a.max_qp > 0 && a.max_qp_wr > 0 && a.max_sge > 0 && a.max_cq > 0 &&
	     a.max_cqe > 0 && a.max_mr > 0 && a.max_pd > 0 && a.max_mr_size > 0,
	     "resource limits are positive");
	T_OK(a.max_qp_rd_atom > 0 && a.max_qp_init_rd_atom > 0,
	     "RDMA READ/atomic depth > 0 (%d/%d)", a.max_qp_rd_atom, a.max_qp_init_rd_atom);
	T_OK(a.max_pkeys == 1, "max_pkeys is 1");
	T_OK(a.page_size_cap & 4096, "page_size_cap includes 4 KiB");
	T_OK(a.device_cap_flags & IBV_DEVICE_RC_RNR_NAK_GEN, "RC_RNR_NAK_GEN is set");
	/* the port follows its interface (transport/link_watch.c) */
	T_OK(a.device_cap_flags & IBV_DEVICE_PORT_ACTIVE_EVENT, "PORT_ACTIVE_EVENT is set");

	T_OK(vctx && vctx->query_device_ex, "context is extended, query_device_ex set");
	memset(&ax, 0xa5, sizeof(ax));
	T_OK(ibv_query_device_ex(ctx, NULL, &ax) == 0, "ibv_query_device_ex succeeds");
	T_OK(memcmp(&ax.orig_attr, &a, sizeof(a)) == 0,
	     "query_device_ex orig_attr equals ibv_query_device");
	T_OK(ax.completion_timestamp_mask == UINT64_MAX && ax.hca_core_clock == 1000000,
	     "completion timestamps: 64-bit mask, 1 GHz core clock (%llx, %llu kHz)",
	     (unsigned long long)ax.completion_timestamp_mask,
	     (unsigned long long)ax.hca_core_clock);
	T_OK((ax.odp_caps.general_caps & (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT)) ==
		     (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT) &&
		     (ax.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_ATOMIC) &&
		     (ax.odp_caps.per_transport_caps.ud_odp_caps & IBV_ODP_SUPPORT_SEND) &&
		     !(ax.odp_caps.per_transport_caps.uc_odp_caps & IBV_ODP_SUPPORT_READ),
	     "ODP caps: explicit and implicit; RC atomics, UD sends, no UC READ");
	T_OK(ax.max_dm_size >= 4096, "max_dm_size %llu", (unsigned long long)ax.max_dm_size);
	T_OK(ibv_query_device_ex(ctx, &in, &ax) == EINVAL,
	     "query_device_ex with unknown input comp_mask -> EINVAL");

	/* An older program's shorter struct: nothing past attr_size written. */
	if (vctx && vctx->query_device_ex) {
		size_t short_sz = offsetof(struct ibv_device_attr_ex, completion_timestamp_mask);
		int ok = 1;

		memset(buf, 0x5a, sizeof(buf));
		T_OK(vctx->query_device_ex(ctx, NULL, (void *)buf, short_sz) == 0,
		     "query_device_ex with attr_size %zu succeeds", short_sz);
		for (size_t i = short_sz; i < sizeof(buf); i++)
			ok &= buf[i] == 0x5a;
		T_OK(ok, "nothing written past attr_size");
		T_OK(memcmp(buf, &a, sizeof(a)) == 0, "short struct holds orig_attr");
		memset(buf, 0x5a, sizeof(buf));
		T_OK(vctx->query_device_ex(ctx, NULL, (void *)buf, sizeof(buf)) == 0,
		     "query_device_ex with a larger attr_size succeeds");
		ok = 1;
		for (size_t i = sizeof(ax); i < sizeof(buf); i++)
			ok &= buf[i] == 0x5a;
		T_OK(ok, "larger struct: bytes past the known struct untouched");
		T_OK(vctx->query_device_ex(ctx, NULL, (void *)buf, 8) == EINVAL,
		     "attr_size smaller than orig_attr -> EINVAL");
	}
}

static void t_port(struct ibv_context *ctx)
{
	struct ibv_port_attr p, q;

	memset(&p, 0xa5, sizeof(p));
	T_OK(ibv_query_port(ctx, 1, &p) == 0, "ibv_query_port (inline) port 1 succeeds");
	T_OK(p.state == IBV_PORT_ACTIVE, "state PORT_ACTIVE");
	T_OK(p.max_mtu == IBV_MTU_4096, "max_mtu 4096");
	T_OK(p.active_mtu == IBV_MTU_4096, "active_mtu 4096 on lo (got %d)", p.active_mtu);
	T_OK(p.link_layer == IBV_LINK_LAYER_ETHERNET, "link_layer Ethernet");
	T_OK(p.gid_tbl_len >= 2, "gid_tbl_len >= 2 (got %d)", p.gid_tbl_len);
	T_OK(p.pkey_tbl_len == 1, "pkey_tbl_len 1");
	T_OK(p.lid == 0 && p.sm_lid == 0 && p.lmc == 0, "no LIDs on RoCE");
	T_OK(p.phys_state == 5, "phys_state LinkUp (5)");
	T_OK(p.max_msg_sz >= (1u << 30), "max_msg_sz >= 1 GiB (0x%x)", p.max_msg_sz);
	T_OK(p.port_cap_flags & IBV_PORT_CM_SUP, "port_cap_flags has CM_SUP");
	T_OK(p.flags == 0 && p.port_cap_flags2 == 0, "trailing fields zeroed");

	errno = 0;
	T_OK(ibv_query_port(ctx, 0, &q) == EINVAL, "port 0 -> EINVAL");
	T_OK(ibv_query_port(ctx, 2, &q) == EINVAL, "port 2 -> EINVAL");

	/* The exported symbol fills only the old (shorter) struct. */
	memset(&q, 0x5a, sizeof(q));
	T_OK((ibv_query_port)(ctx, 1, (struct _compat_ibv_port_attr *)&q) == 0,
	     "exported ibv_query_port succeeds");
	T_OK(memcmp(&q, &p, offsetof(struct ibv_port_attr, flags)) == 0,
	     "exported ibv_query_port agrees with the inline one");
	T_OK(q.port_cap_flags2 == 0x5a5a, "exported ibv_query_port leaves port_cap_flags2 alone");
	T_OK((ibv_query_port)(ctx, 9, (struct _compat_ibv_port_attr *)&q) == EINVAL,
	     "exported ibv_query_port port 9 -> EINVAL");
}

static void t_gid(struct ibv_context *ctx)
{
	static const uint8_t v4lo[16] = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 };
	struct ibv_port_attr p;
	struct ibv_gid_entry e, table[64];
	union ibv_gid g;
	char s[64];
	int type = -1, valid = 0;
	ssize_t n;

	ibv_query_port(ctx, 1, &p);
	T_OK(ibv_query_gid(ctx, 1, 0, &g) == 0, "ibv_query_gid index 0 succeeds");
	inet_ntop(AF_INET6, g.raw, s, sizeof(s));
	T_OK(memcmp(g.raw, v4lo, 16) == 0, "GID[0] is ::ffff:127.0.0.1 (got %s)", s);
	T_OK(ibv_query_gid_type(ctx, 1, 0, &type) == 0 && type == 1,
	     "ibv_query_gid_type(0) is RoCE v2 (sysfs enum 1)");
	T_OK(ibv_query_gid_ex(ctx, 1, 0, &e, 0) == 0, "ibv_query_gid_ex index 0 succeeds");
	T_OK(memcmp(e.gid.raw, v4lo, 16) == 0 && e.gid_index == 0 && e.port_num == 1 &&
	     e.gid_type == IBV_GID_TYPE_ROCE_V2 && e.ndev_ifindex > 0,
	     "gid entry 0: address, index, port, RoCE v2, ifindex %u", e.ndev_ifindex);
	for (int i = 0; i < p.gid_tbl_len; i++) {
		T_OK(ibv_query_gid(ctx, 1, i, &g) == 0, "ibv_query_gid(%d) succeeds", i);
		if (ibv_query_gid_ex(ctx, 1, (uint32_t)i, &e, 0) == 0) {
			valid++;
			T_OK(!memcmp(&e.gid, &g, sizeof(g)), "gid_ex(%d) = query_gid(%d)", i, i);
		} else {
			static const union ibv_gid zero;
			T_OK(!memcmp(&g, &zero, sizeof(g)), "empty GID %d reads as zero", i);
			T_OK(ibv_query_gid_ex(ctx, 1, (uint32_t)i, &e, 0) == ENODATA,
			     "empty GID %d: gid_ex -> ENODATA", i);
			T_OK(ibv_query_gid_type(ctx, 1, (unsigned)i, &type) == 0 && type == 0,
			     "empty GID %d: gid_type answers v1 like rdma-core", i);
			break;
		}
	}
	T_OK(ibv_query_gid(ctx, 1, p.gid_tbl_len, &g) == -1, "index gid_tbl_len -> -1");
	T_OK(ibv_query_gid(ctx, 2, 0, &g) == -1, "ibv_query_gid port 2 -> -1");
	T_OK(ibv_query_gid(ctx, 1, -1, &g) == -1, "ibv_query_gid index -1 -> -1");
	T_OK(ibv_query_gid_ex(ctx, 2, 0, &e, 0) == EINVAL, "gid_ex port 2 -> EINVAL");
	T_OK(ibv_query_gid_ex(ctx, 1, 0, &e, 1) == EINVAL, "gid_ex flags -> EINVAL");

	n = ibv_query_gid_table(ctx, table, 64, 0);
	T_OK(n == valid, "ibv_query_gid_table returns the %d valid entries (got %zd)", valid, n);
	T_OK(n > 0 && memcmp(table[0].gid.raw, v4lo, 16) == 0, "table[0] is ::ffff:127.0.0.1");
	if (valid > 1)
		T_OK(ibv_query_gid_table(ctx, table, 1, 0) == -EINVAL,
		     "gid table with too few entries -> -EINVAL");
	T_OK(ibv_query_gid_table(ctx, table, 64, 1) == -EINVAL, "gid table flags -> -EINVAL");
}

static void t_pkey(struct ibv_context *ctx)
{
	__be16 pk = 0;

	T_OK(ibv_query_pkey(ctx, 1, 0, &pk) == 0 && pk == htobe16(0xffff),
	     "pkey[0] is 0xffff");
	T_OK(ibv_query_pkey(ctx, 1, 1, &pk) == -1, "pkey index 1 -> -1");
	T_OK(ibv_query_pkey(ctx, 2, 0, &pk) == -1, "pkey port 2 -> -1");
	T_OK(ibv_get_pkey_index(ctx, 1, htobe16(0xffff)) == 0, "pkey index of 0xffff is 0");
	T_OK(ibv_get_pkey_index(ctx, 1, htobe16(0x1234)) == -1, "unknown pkey -> -1");
}

int main(void)
{
	struct ibv_device *dev;
	struct ibv_context *ctx;

	dev = t_lo_find();
	if (!t_lo_list) {
		printf("FAIL - ibv_get_device_list: %s\n", strerror(errno));
		return 1;
	}
	if (!dev)
		t_skip("no srn_lo");
	ctx = ibv_open_device(dev);
	T_OK(ctx != NULL, "ibv_open_device(srn_lo)");
	if (!ctx)
		return 1;
	t_device(ctx);
	t_port(ctx);
	t_gid(ctx);
	t_pkey(ctx);
	T_OK(ibv_close_device(ctx) == 0, "ibv_close_device");
	t_lo_free();
	return t_summary();
}
