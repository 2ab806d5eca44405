/* The iWARP RNIC flavour of a device (SOFTRNIC_DEVICES=IFNAME:iwarp): what
 * it reports, modelled on Linux SoftiWARP (siw) so programs that look at
 * the device see what they would on siw.  docs/iwarp.md says what moves
 * data on it (nothing yet: QPs are refused until the TCP path exists).
 *
 * siw's facts: node type RNIC, transport iWARP, Ethernet link layer; one
 * GID, the interface's MAC in its first six bytes and zeros after (a made
 * up, locally administered MAC where the interface has none); the node
 * GUID is that MAC as EUI-64; no atomics, memory windows, multicast or
 * address handles; RC QPs only; port capabilities CM only. */
#include "verbs/srn.h"
#include "verbs/device.h"

#include <string.h>

#define IWARP_SUFFIX ":iwarp"

bool srn_iwarp_spec_strip(char *ifname)
{
	size_t n = strlen(ifname), k = strlen(IWARP_SUFFIX);

	if (n < k || strcmp(ifname + n - k, IWARP_SUFFIX) != 0)
		return false;
	ifname[n - k] = '\0';
	return true;
}

void srn_iwarp_dev_init(struct srn_device *dev)
{
	dev->iwarp = true;
	dev->ibdev.node_type = IBV_NODE_RNIC;
	dev->ibdev.transport_type = IBV_TRANSPORT_IWARP;
}

void srn_iwarp_device_attr(struct ibv_device_attr_ex *x)
{
	struct ibv_device_attr *a = &x->orig_attr;

	/* no RNR NAKs (TCP carries the flow), no memory windows */
	a->device_cap_flags &= ~(unsigned int)(IBV_DEVICE_RC_RNR_NAK_GEN |
					       IBV_DEVICE_MEM_WINDOW |
					       IBV_DEVICE_MEM_WINDOW_TYPE_2B |
					       IBV_DEVICE_XRC);
	x->device_cap_flags_ex = a->device_cap_flags;
	a->atomic_cap = IBV_ATOMIC_NONE;
	a->max_mw = 0;
	a->max_ah = 0;
	a->max_mcast_grp = 0;
	a->max_mcast_qp_attach = 0;
	a->max_total_mcast_qp_attach = 0;
	a->local_ca_ack_delay = 0;
	memset(&x->odp_caps, 0, sizeof(x->odp_caps));
	x->xrc_odp_caps = 0;
}

/* siw maps the interface MTU down to the IB MTU enum (4096 at most). */
static enum ibv_mtu mtu_enum(unsigned int mtu)
{
	if (mtu >= 4096)
		return IBV_MTU_4096;
	if (mtu >= 2048)
		return IBV_MTU_2048;
	if (mtu >= 1024)
		return IBV_MTU_1024;
	if (mtu >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}

void srn_iwarp_port_attr(const struct srn_device *dev, struct ibv_port_attr *p)
{
	p->max_mtu = mtu_enum(dev->if_mtu);
	p->active_mtu = p->max_mtu;
	p->gid_tbl_len = 1;
	p->port_cap_flags = IBV_PORT_CM_SUP;
	p->max_msg_sz = 0xffffffffu;
}

void srn_iwarp_gid(const struct srn_device *dev, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	memcpy(gid->raw, dev->guid_mac, sizeof(dev->guid_mac));
}
