/* Raw packet QPs (IBV_QPT_RAW_PACKET).  On hardware the kernel lets only
 * a process with CAP_NET_RAW create one (EPERM otherwise); softrnic keeps
 * that rule, and then answers EOPNOTSUPP: it has no raw Ethernet path
 * (docs/verbs-extended.md, "Raw packet QPs"). */
#include <errno.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "verbs/srn.h"

/* Is CAP_NET_RAW in this thread's effective set? */
static bool net_raw_capable(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = { { 0 } };

	if (syscall(SYS_capget, &h, d) != 0)
		return false;
	return (d[CAP_NET_RAW / 32].effective >> (CAP_NET_RAW % 32)) & 1;
}

int srn_raw_qp_refusal(void)
{
	return net_raw_capable() ? EOPNOTSUPP : EPERM;
}
