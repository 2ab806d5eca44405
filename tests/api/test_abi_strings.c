/* Black-box checks of the device-independent ABI surface of our
 * libibverbs and librdmacm: enum names, rate conversions, fork support,
 * kernel-structure copies, sysfs accessors, rdma_event_str, and rpoll /
 * rselect on ordinary descriptors (rsockets themselves: test_rsocket). */
#include <errno.h>
#include <limits.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include "tests/lib/t_util.h"

/* Exported by libibverbs but declared in no public header. */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);

#define T_STR(got, want) \
	T_CHECK(strcmp((got), (want)) == 0, "got '%s' want '%s'", (got), (want))

static void t_strings(void)
{
	printf("enum names: node types, port states, WC status, async events\n");
	T_STR(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter");
	T_STR(ibv_node_type_str(IBV_NODE_RNIC), "iWARP NIC");
	T_STR(ibv_node_type_str(IBV_NODE_USNIC_UDP), "usNIC UDP");
	T_STR(ibv_node_type_str(IBV_NODE_UNSPECIFIED), "unspecified");
	T_STR(ibv_node_type_str(IBV_NODE_UNKNOWN), "unknown");
	T_STR(ibv_node_type_str((enum ibv_node_type)1000), "unknown");

	T_STR(ibv_port_state_str(IBV_PORT_NOP), "no state change (NOP)");
	T_STR(ibv_port_state_str(IBV_PORT_ACTIVE), "active");
	T_STR(ibv_port_state_str(IBV_PORT_ACTIVE_DEFER), "active defer");
	T_STR(ibv_port_state_str((enum ibv_port_state)6), "unknown");

	T_STR(ibv_wc_status_str(IBV_WC_SUCCESS), "success");
	T_STR(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error");
	T_STR(ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR), "transport retry counter exceeded");
	T_STR(ibv_wc_status_str(IBV_WC_RNR_RETRY_EXC_ERR), "RNR retry counter exceeded");
	T_STR(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR), "remote access error");
	T_STR(ibv_wc_status_str(IBV_WC_TM_RNDV_INCOMPLETE), "TM software rendezvous");
	T_STR(ibv_wc_status_str((enum ibv_wc_status)(IBV_WC_TM_RNDV_INCOMPLETE + 1)), "unknown");
	T_STR(ibv_wc_status_str((enum ibv_wc_status)-1), "unknown");
	/* Every defined status has a name of its own. */
	for (int s = IBV_WC_SUCCESS; s <= IBV_WC_TM_RNDV_INCOMPLETE; s++)
		T_CHECK(strcmp(ibv_wc_status_str(s), "unknown") != 0, "status %d unnamed", s);

	T_STR(ibv_event_type_str(IBV_EVENT_CQ_ERR), "CQ error");
	T_STR(ibv_event_type_str(IBV_EVENT_COMM_EST), "communication established");
	T_STR(ibv_event_type_str(IBV_EVENT_PORT_ACTIVE), "port active");
	T_STR(ibv_event_type_str(IBV_EVENT_QP_LAST_WQE_REACHED), "last WQE reached");
	T_STR(ibv_event_type_str(IBV_EVENT_WQ_FATAL), "WQ fatal");
	T_STR(ibv_event_type_str((enum ibv_event_type)(IBV_EVENT_WQ_FATAL + 1)), "unknown");
	for (int e = IBV_EVENT_CQ_ERR; e <= IBV_EVENT_WQ_FATAL; e++)
		T_CHECK(strcmp(ibv_event_type_str(e), "unknown") != 0, "event %d unnamed", e);
}

static void t_rates(void)
{
	static const struct { enum ibv_rate r; int mult, mbps; } tab[] = {
		{ IBV_RATE_2_5_GBPS, 1, 2500 },   { IBV_RATE_5_GBPS, 2, 5000 },
		{ IBV_RATE_10_GBPS, 4, 10000 },   { IBV_RATE_20_GBPS, 8, 20000 },
		{ IBV_RATE_30_GBPS, 12, 30000 },  { IBV_RATE_40_GBPS, 16, 40000 },
		{ IBV_RATE_60_GBPS, 24, 60000 },  { IBV_RATE_80_GBPS, 32, 80000 },
		{ IBV_RATE_120_GBPS, 48, 120000 }, { IBV_RATE_14_GBPS, -1, 14062 },
		{ IBV_RATE_56_GBPS, -1, 56250 },  { IBV_RATE_112_GBPS, -1, 112500 },
		{ IBV_RATE_168_GBPS, -1, 168750 }, { IBV_RATE_25_GBPS, -1, 25781 },
		{ IBV_RATE_100_GBPS, -1, 103125 }, { IBV_RATE_200_GBPS, -1, 206250 },
		{ IBV_RATE_300_GBPS, -1, 309375 }, { IBV_RATE_28_GBPS, 11, 28125 },
		{ IBV_RATE_50_GBPS, 20, 53125 },  { IBV_RATE_400_GBPS, 160, 425000 },
		{ IBV_RATE_600_GBPS, 240, 637500 }, { IBV_RATE_800_GBPS, 320, 850000 },
		{ IBV_RATE_1200_GBPS, 480, 1275000 },
	};

	printf("rate conversions: %zu rates, both directions, invalid inputs\n",
	       sizeof(tab) / sizeof(tab[0]));
	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		T_CHECK(ibv_rate_to_mult(tab[i].r) == tab[i].mult, "rate %d mult %d",
			tab[i].r, ibv_rate_to_mult(tab[i].r));
		T_CHECK(ibv_rate_to_mbps(tab[i].r) == tab[i].mbps, "rate %d mbps %d",
			tab[i].r, ibv_rate_to_mbps(tab[i].r));
		T_CHECK(mbps_to_ibv_rate(tab[i].mbps) == tab[i].r, "mbps %d -> %d",
			tab[i].mbps, mbps_to_ibv_rate(tab[i].mbps));
		if (tab[i].mult > 0)
			T_CHECK(mult_to_ibv_rate(tab[i].mult) == tab[i].r, "mult %d -> %d",
				tab[i].mult, mult_to_ibv_rate(tab[i].mult));
	}
	T_CHECK(ibv_rate_to_mult(IBV_RATE_MAX) == -1, "RATE_MAX mult");
	T_CHECK(ibv_rate_to_mbps(IBV_RATE_MAX) == -1, "RATE_MAX mbps");
	T_CHECK(ibv_rate_to_mult((enum ibv_rate)25) == -1, "rate 25 mult");
	T_CHECK(ibv_rate_to_mbps((enum ibv_rate)-1) == -1, "rate -1 mbps");
	T_CHECK(mult_to_ibv_rate(3) == IBV_RATE_MAX, "mult 3");
	T_CHECK(mult_to_ibv_rate(-1) == IBV_RATE_MAX, "mult -1");
	T_CHECK(mbps_to_ibv_rate(25000) == IBV_RATE_MAX, "mbps 25000 (not exact)");
	T_CHECK(mbps_to_ibv_rate(0) == IBV_RATE_MAX, "mbps 0");
}

static void t_fork(void)
{
	char buf[8192];

	printf("fork: unneeded (nothing pinned), init succeeds, range calls succeed\n");
	T_CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED, "status %d",
		ibv_is_fork_initialized());
	T_CHECK(ibv_fork_init() == 0, "ibv_fork_init");
	T_CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED, "status after init");
	T_CHECK(ibv_dontfork_range(buf, sizeof(buf)) == 0, "dontfork");
	T_CHECK(ibv_dofork_range(buf, sizeof(buf)) == 0, "dofork");
}

static void t_kern_copy(void)
{
	struct ib_uverbs_qp_attr k;
	struct ibv_qp_attr a;
	struct ib_user_path_rec kp, kp2;
	struct ibv_sa_path_rec p;

	printf("kernel structure copies: qp_attr (with both AHs), path record round trip\n");
	memset(&k, 0, sizeof(k));
	memset(&a, 0xee, sizeof(a));
	k.qp_state = IBV_QPS_RTS;
	k.cur_qp_state = IBV_QPS_RTR;
	k.path_mtu = IBV_MTU_4096;
	k.qkey = 0x11111111;
	k.rq_psn = 0x123456;
	k.sq_psn = 0x654321;
	k.dest_qp_num = 0x77;
	k.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	k.ah_attr.grh.dgid[0] = 0xfe;
	k.ah_attr.grh.dgid[15] = 0x01;
	k.ah_attr.grh.flow_label = 0xabcde;
	k.ah_attr.grh.sgid_index = 3;
	k.ah_attr.grh.hop_limit = 64;
	k.ah_attr.grh.traffic_class = 0x20;
	k.ah_attr.dlid = 0x1234;
	k.ah_attr.sl = 5;
	k.ah_attr.is_global = 1;
	k.ah_attr.port_num = 1;
	k.alt_ah_attr.dlid = 0x4321;
	k.alt_ah_attr.static_rate = IBV_RATE_10_GBPS;
	k.max_send_wr = 100;
	k.max_recv_wr = 200;
	k.max_send_sge = 3;
	k.max_recv_sge = 4;
	k.max_inline_data = 64;
	k.pkey_index = 2;
	k.max_rd_atomic = 16;
	k.max_dest_rd_atomic = 8;
	k.min_rnr_timer = 12;
	k.port_num = 1;
	k.timeout = 14;
	k.retry_cnt = 7;
	k.rnr_retry = 6;
	k.alt_timeout = 9;
	ibv_copy_qp_attr_from_kern(&a, &k);
	T_CHECK(a.qp_state == IBV_QPS_RTS && a.cur_qp_state == IBV_QPS_RTR, "states");
	T_CHECK(a.path_mtu == IBV_MTU_4096 && a.qkey == 0x11111111, "mtu/qkey");
	T_CHECK(a.rq_psn == 0x123456 && a.sq_psn == 0x654321 && a.dest_qp_num == 0x77, "psn/qpn");
	T_CHECK(a.qp_access_flags == IBV_ACCESS_REMOTE_WRITE, "access");
	T_CHECK(a.cap.max_send_wr == 100 && a.cap.max_recv_wr == 200 &&
		a.cap.max_send_sge == 3 && a.cap.max_recv_sge == 4 &&
		a.cap.max_inline_data == 64, "cap");
	T_CHECK(a.ah_attr.grh.dgid.raw[0] == 0xfe && a.ah_attr.grh.dgid.raw[15] == 1 &&
		a.ah_attr.grh.flow_label == 0xabcde && a.ah_attr.grh.sgid_index == 3 &&
		a.ah_attr.grh.hop_limit == 64 && a.ah_attr.grh.traffic_class == 0x20, "grh");
	T_CHECK(a.ah_attr.dlid == 0x1234 && a.ah_attr.sl == 5 && a.ah_attr.is_global == 1 &&
		a.ah_attr.port_num == 1, "ah");
	T_CHECK(a.alt_ah_attr.dlid == 0x4321 && a.alt_ah_attr.static_rate == IBV_RATE_10_GBPS &&
		a.alt_ah_attr.is_global == 0, "alt ah");
	T_CHECK(a.pkey_index == 2 && a.max_rd_atomic == 16 && a.max_dest_rd_atomic == 8 &&
		a.min_rnr_timer == 12 && a.port_num == 1 && a.timeout == 14 &&
		a.retry_cnt == 7 && a.rnr_retry == 6 && a.alt_timeout == 9, "scalars");

	memset(&kp, 0, sizeof(kp));
	for (int i = 0; i < 16; i++) {
		kp.dgid[i] = (uint8_t)(i + 1);
		kp.sgid[i] = (uint8_t)(0xf0 | i);
	}
	kp.dlid = 0x0102;
	kp.slid = 0x0304;
	kp.raw_traffic = 1;
	kp.flow_label = 0x05060708;
	kp.reversible = 1;
	kp.mtu = IBV_MTU_2048;
	kp.pkey = 0xffff;
	kp.hop_limit = 255;
	kp.traffic_class = 7;
	kp.numb_path = 1;
	kp.sl = 3;
	kp.mtu_selector = 2;
	kp.rate_selector = 2;
	kp.rate = IBV_RATE_40_GBPS;
	kp.packet_life_time_selector = 2;
	kp.packet_life_time = 18;
	kp.preference = 1;
	memset(&p, 0, sizeof(p));
	ibv_copy_path_rec_from_kern(&p, &kp);
	T_CHECK(p.dgid.raw[0] == 1 && p.dgid.raw[15] == 16 && p.sgid.raw[3] == 0xf3, "gids");
	T_CHECK(p.dlid == 0x0102 && p.slid == 0x0304 && p.flow_label == 0x05060708, "lids");
	T_CHECK(p.mtu == IBV_MTU_2048 && p.rate == IBV_RATE_40_GBPS &&
		p.packet_life_time == 18 && p.sl == 3 && p.pkey == 0xffff, "path fields");
	memset(&kp2, 0, sizeof(kp2));
	ibv_copy_path_rec_to_kern(&kp2, &p);
	T_CHECK(memcmp(&kp, &kp2, sizeof(kp)) == 0, "path record round trip");
}

static void t_sysfs(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *lo = NULL;
	const char *root;
	char buf[64], dir[PATH_MAX];

	printf("sysfs accessors: the sysfs view's root and files\n");
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "srn_lo"))
			lo = list[i];
	T_CHECK(lo != NULL, "srn_lo listed");
	root = ibv_get_sysfs_path();
	T_CHECK(root && !strncmp(root, "/dev/shm/softrnic-sysfs-", 24), "sysfs path %s",
		root ? root : "(null)");
	if (lo && root) {
		snprintf(dir, sizeof(dir), "%s/class/infiniband/srn_lo", root);
		T_CHECK(!strcmp(lo->ibdev_path, dir), "ibdev_path %s under the root", lo->ibdev_path);
		T_CHECK(ibv_read_sysfs_file(lo->ibdev_path, "node_type", buf, sizeof(buf)) == 5 &&
			!strcmp(buf, "1: CA"), "node_type read, newline dropped: '%s'", buf);
		T_CHECK(ibv_read_sysfs_file(lo->ibdev_path, "ports/1/link_layer", buf, 4) == 3 &&
			!strcmp(buf, "Eth"), "short buffer: truncated, terminated");
		T_CHECK(ibv_read_sysfs_file(root, "class/infiniband/srn_lo/ports/1/gid_attrs/types/0",
					    buf, sizeof(buf)) == 7 && !strcmp(buf, "RoCE v2"),
			"GID 0 type RoCE v2");
	}
	errno = 0;
	T_CHECK(ibv_read_sysfs_file("/sys/class/infiniband/srn_nosuch", "node_desc", buf,
				    sizeof(buf)) == -1 && errno == ENOENT, "missing file: ENOENT");
	ibv_free_device_list(list);
}

static void t_cm(void)
{
	struct rdma_event_channel *ch;
	struct pollfd pfd[2];
	struct timeval tv = { 0, 0 };
	fd_set rfds;
	int p[2];

	printf("librdmacm: rdma_event_str, event channel fd, rpoll/rselect on plain fds, rsocket\n");
	T_STR(rdma_event_str(RDMA_CM_EVENT_ADDR_RESOLVED), "RDMA_CM_EVENT_ADDR_RESOLVED");
	T_STR(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED");
	T_STR(rdma_event_str(RDMA_CM_EVENT_TIMEWAIT_EXIT), "RDMA_CM_EVENT_TIMEWAIT_EXIT");
	T_STR(rdma_event_str((enum rdma_cm_event_type)(RDMA_CM_EVENT_TIMEWAIT_EXIT + 1)),
	      "UNKNOWN EVENT");
	T_STR(rdma_event_str((enum rdma_cm_event_type)-1), "UNKNOWN EVENT");

	ch = rdma_create_event_channel();
	T_CHECK(ch && ch->fd >= 0, "event channel");
	if (ch) {
		pfd[0] = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
		T_CHECK(rpoll(pfd, 1, 0) == 0, "idle channel polls empty");
		rdma_destroy_event_channel(ch);
	}

	if (pipe(p) == 0) {
		pfd[0] = (struct pollfd){ .fd = p[0], .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = p[1], .events = POLLOUT };
		T_CHECK(rpoll(pfd, 2, 0) == 1 && (pfd[1].revents & POLLOUT) &&
			!(pfd[0].revents & POLLIN), "rpoll: only the write end is ready");
		T_CHECK(write(p[1], "x", 1) == 1, "write");
		T_CHECK(rpoll(pfd, 1, 1000) == 1 && (pfd[0].revents & POLLIN), "rpoll readable");
		FD_ZERO(&rfds);
		FD_SET(p[0], &rfds);
		T_CHECK(rselect(p[0] + 1, &rfds, NULL, NULL, &tv) == 1 && FD_ISSET(p[0], &rfds),
			"rselect readable");
		close(p[0]);
		close(p[1]);
	}

	errno = 0;
	T_CHECK(rsend(0, "x", 1, 0) == -1 && errno == EBADF, "rsend on a descriptor that is no rsocket: EBADF");
	{
		int s = rsocket(AF_INET, SOCK_STREAM, 0);

		T_CHECK(s >= 0 && rclose(s) == 0, "rsocket, rclose");
	}
}

int main(void)
{
	t_strings();
	t_rates();
	t_fork();
	t_kern_copy();
	t_sysfs();
	t_cm();
	return t_summary();
}
