/* Weak "not supported" defaults for exported symbols.
 *
 * Every symbol of abi/libibverbs.map has a definition in a verbs/stub_*.c
 * file marked SRN_STUB: a weak, exported function that fails honestly.
 * An area that implements the call for real just defines the same name
 * normally (SRN_EXPORT); the linker prefers the strong definition, so
 * areas can land one by one without link errors.  When an area is done,
 * delete its stubs (the weak copy is then dead code anyway).
 *
 * Caveat: in the static archive (unit tests), the linker resolves a name
 * from the first archive member that defines it, weak or not; a unit test
 * that needs a real ibv_* function must also pull that function's file in
 * through some srn_ symbol it defines (normally true for white-box tests).
 */
#ifndef SRN_STUB_H
#define SRN_STUB_H

#include <errno.h>

#define SRN_STUB __attribute__((weak, visibility("default")))

/* Constructor convention: NULL with errno. */
#define SRN_STUB_NULL(err) \
	do { errno = (err); return NULL; } while (0)

/* "-1 and errno" convention (ibv_query_gid, ibv_get_cq_event, rdma_*). */
#define SRN_STUB_MINUS1(err) \
	do { errno = (err); return -1; } while (0)

#endif
