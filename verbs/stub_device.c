/* Weak defaults (see stub.h) for the device-level calls softrnic does not
 * implement yet: importing a context from a command fd (no kernel fd to
 * import) and Ethernet L2 resolution (no neighbour table of our own). */
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "verbs/stub.h"

/* Stubs accept and ignore every argument. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* ---- context ----------------------------------------------------------- */

SRN_STUB struct ibv_context *ibv_import_device(int cmd_fd)
{
	SRN_STUB_NULL(EOPNOTSUPP);
}

/* ---- queries ----------------------------------------------------------- */

SRN_STUB int ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
					 struct ibv_ah_attr *attr,
					 uint8_t eth_mac[ETHERNET_LL_SIZE],
					 uint16_t *vid)
{
	return EOPNOTSUPP;
}

